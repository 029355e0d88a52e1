//! [`RunCgroup`]: a live run's cgroup. Apply a plan, the files a child joins through, the pids,
//! the counters, kill everything, remove; written once over [`super::version::Version`].

use fs_err as fs;
use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::cgroupfs::{Dirs, Kernel, apply, write_file, write_raw};
#[cfg(test)]
use super::plan::{CgroupLimits, plan};
use super::plan::{CgroupPlan, PARENT, validate_name};
use super::stale::{remove_mark, write_mark};
use super::{CgroupError, Hierarchy};

/// How long [`RunCgroup::remove`] waits for the processes to die and the directories to go.
const REMOVE_DEADLINE: Duration = Duration::from_secs(5);

/// How often [`RunCgroup::kill_all`] re-reads `cgroup.procs` (and `remove` retries a busy
/// directory) …
const POLL: Duration = Duration::from_millis(10);
/// … after a first look this soon, doubling: a process that was exiting anyway, or was just sent
/// SIGKILL, is usually gone within a millisecond, and every run ends with one such look.
const FIRST_POLL: Duration = Duration::from_millis(1);

/// Counters read back after a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CgroupStats {
    /// Peak memory use; `None` where the kernel does not record it (v2 before 5.19).
    pub(crate) peak_memory_bytes: Option<u64>,
    /// Processes the OOM killer killed in this cgroup.
    pub(crate) oom_kills: u64,
    /// Forks that failed because `pids.max` was reached.
    pub(crate) pids_max_hits: u64,
}

/// One run's cgroup: `<root>/band/<name>` in every hierarchy it uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunCgroup {
    hierarchy: Hierarchy,
    name: String,
    /// `<state>/cgroups/<name>` when this state directory created the cgroup
    /// ([`RunCgroup::apply_owned`]): removed with the cgroup.
    pub(super) mark: Option<PathBuf>,
}

impl RunCgroup {
    /// Applies a plan: see [`RunCgroup::create`].
    pub(crate) fn apply(plan: &CgroupPlan) -> Result<RunCgroup, CgroupError> {
        apply(&plan.ops, &Kernel)?;
        Ok(RunCgroup {
            hierarchy: plan.hierarchy.clone(),
            name: plan.name.clone(),
            mark: None,
        })
    }

    /// [`RunCgroup::apply`], marked as created by the servers of `state` first (see
    /// [`super::marks_dir`]); the mark goes with the cgroup.
    pub(crate) fn apply_owned(plan: &CgroupPlan, state: &Path) -> Result<RunCgroup, CgroupError> {
        let mark = write_mark(state, &plan.name)?;
        match Self::apply(plan) {
            Ok(cg) => Ok(RunCgroup {
                mark: Some(mark),
                ..cg
            }),
            Err(e) => {
                let _ = remove_mark(state, &plan.name);
                Err(e)
            }
        }
    }

    #[cfg(test)]
    /// Creates the run's cgroup in every hierarchy and applies `limits`. The `band` parent is
    /// created if needed; the run's own directory must not exist yet. On failure, directories
    /// created for the run are removed again.
    pub(crate) fn create(
        h: &Hierarchy,
        name: &str,
        limits: &CgroupLimits,
    ) -> Result<RunCgroup, CgroupError> {
        Self::create_with(h, name, limits, &Kernel)
    }

    #[cfg(test)]
    pub(super) fn create_with(
        h: &Hierarchy,
        name: &str,
        limits: &CgroupLimits,
        dirs: &dyn Dirs,
    ) -> Result<RunCgroup, CgroupError> {
        let plan = plan(h, name, limits)?;
        apply(&plan.ops, dirs)?;
        Ok(RunCgroup {
            hierarchy: plan.hierarchy,
            name: plan.name,
            mark: None,
        })
    }

    /// An existing run's cgroup (for the janitor). Does no I/O; the name is validated because
    /// it becomes a path component of what [`RunCgroup::remove`] deletes.
    pub fn open(h: &Hierarchy, name: &str) -> Result<RunCgroup, CgroupError> {
        validate_name(name)?;
        Ok(RunCgroup {
            hierarchy: h.clone(),
            name: name.to_string(),
            mark: None,
        })
    }

    #[cfg(test)]
    /// The run's name (`<name>` in `band/<name>`).
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The run's directory in each hierarchy (v1: memory, pids, then cpu and freezer if used).
    pub fn dirs(&self) -> Vec<PathBuf> {
        self.hierarchy
            .version()
            .roots()
            .into_iter()
            .map(|root| root.join(PARENT).join(&self.name))
            .collect()
    }

    /// The files through which a freshly forked, single-threaded child joins the run's cgroup by
    /// writing `0` to each, before it execs anything. The caller opens them before forking.
    ///
    /// v1 `tasks` (one thread moves, without the global threadgroup lock: see `v1.rs` for why),
    /// v2 `cgroup.procs`.
    pub(crate) fn join_files(&self) -> Vec<PathBuf> {
        let file = self.hierarchy.version().join_file();
        self.dirs().into_iter().map(|d| d.join(file)).collect()
    }

    /// `cgroup.procs` in every hierarchy: the processes in the run's cgroup.
    pub(crate) fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs()
            .into_iter()
            .map(|d| d.join("cgroup.procs"))
            .collect()
    }

    /// Every pid in the cgroup (the union over hierarchies), sorted. A cgroup that no longer
    /// exists has none.
    pub(crate) fn pids(&self) -> Result<Vec<i32>, CgroupError> {
        let mut pids = BTreeSet::new();
        for path in self.procs_files() {
            let text = match fs::read_to_string(&path) {
                Ok(text) => text,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(error) => return Err(CgroupError::Read { path, error }),
            };
            for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
                let pid = line.parse().map_err(|_| CgroupError::Parse {
                    path: path.clone(),
                    line: line.to_string(),
                })?;
                pids.insert(pid);
            }
        }
        Ok(pids.into_iter().collect())
    }

    /// Peak memory, OOM kills and pids-limit hits. Best effort: an unreadable counter reads as
    /// absent or zero. Read it before [`RunCgroup::remove`].
    pub(crate) fn stats(&self) -> CgroupStats {
        self.hierarchy.version().stats(&self.name)
    }

    /// SIGKILLs every process in the cgroup and waits until `cgroup.procs` is empty, or fails
    /// after `deadline` naming the survivors.
    ///
    /// v2 writes `cgroup.kill`, which kills atomically, forks included. Without it (v2 before
    /// 5.14, and v1) each round freezes the cgroup if a freezer is available, so nothing forks
    /// or exits while the pids are signalled, SIGKILLs each pid, and thaws it again (v1 frozen
    /// tasks die only once thawed). Without a freezer a pid can be reused between reading and
    /// signalling it; that is the v1-without-freezer limitation.
    pub(crate) fn kill_all(&self, deadline: Duration) -> Result<(), CgroupError> {
        let start = Instant::now();
        let mut pause = FIRST_POLL;
        loop {
            let pids = self.pids()?;
            if pids.is_empty() {
                return Ok(());
            }
            if start.elapsed() >= deadline {
                return Err(CgroupError::KillTimeout {
                    path: self.first_dir(),
                    deadline,
                    pids,
                });
            }
            self.kill_round(&pids)?;
            std::thread::sleep(pause);
            pause = (pause * 2).min(POLL);
        }
    }

    /// Sends `signal` to every process in the cgroup but `except` (bubblewrap, which reports how
    /// its child ended): a client's SIGINT, SIGTERM or SIGKILL to the script and what it started.
    /// A process gone meanwhile is fine.
    pub(crate) fn signal_all(&self, signal: i32, except: Option<i32>) -> Result<(), CgroupError> {
        use rustix::process::{Pid, Signal, getpid, kill_process};
        let Some(sig) = Signal::from_named_raw(signal) else {
            return Ok(());
        };
        let own = getpid().as_raw_pid();
        for pid in self.pids()? {
            if pid == own || Some(pid) == except {
                continue;
            }
            let Some(target) = Pid::from_raw(pid) else {
                continue;
            };
            match kill_process(target, sig) {
                Ok(()) | Err(rustix::io::Errno::SRCH) => {}
                Err(errno) => {
                    return Err(CgroupError::Kill {
                        pid,
                        path: self.first_dir(),
                        error: errno.into(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Kills every process, then removes the run's directory in every hierarchy. A directory
    /// that is already gone is fine, so this is safe to repeat.
    pub(crate) fn remove(&self) -> Result<(), CgroupError> {
        self.remove_with(&Kernel)
    }

    pub(super) fn remove_with(&self, dirs: &dyn Dirs) -> Result<(), CgroupError> {
        // The kernel refuses to remove a cgroup that still has a process (EBUSY: v1 and v2 alike),
        // so an empty one, as a run's is once bubblewrap has been reaped (its pid namespace ended
        // with it), goes without reading `cgroup.procs` first. Anything else, a busy directory
        // among them, takes the way below: kill what is left, then remove.
        let mut all_gone = true;
        for path in self.dirs() {
            match dirs.rmdir(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(_) => all_gone = false,
            }
        }
        if all_gone {
            return Ok(());
        }
        self.kill_all(REMOVE_DEADLINE)?;
        let start = Instant::now();
        for path in self.dirs() {
            loop {
                match dirs.rmdir(&path) {
                    Ok(()) => break,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                    // A killed task can keep the cgroup busy for a moment after leaving procs.
                    // (By kind: an fs-err error carries no raw errno.)
                    Err(e)
                        if e.kind() == io::ErrorKind::ResourceBusy
                            && start.elapsed() < REMOVE_DEADLINE =>
                    {
                        std::thread::sleep(POLL);
                    }
                    Err(error) => return Err(CgroupError::Remove { path, error }),
                }
            }
        }
        Ok(())
    }

    fn first_dir(&self) -> PathBuf {
        self.dirs().into_iter().next().unwrap_or_default()
    }

    fn kill_round(&self, pids: &[i32]) -> Result<(), CgroupError> {
        let version = self.hierarchy.version();
        if let Some(kill) = version.kill_file(&self.name) {
            match write_raw(&kill, "1") {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(error) => {
                    return Err(CgroupError::Write {
                        path: kill,
                        value: "1".to_string(),
                        error,
                    });
                }
            }
        }
        // Freezing is a refinement; if it fails the pids are still killed one by one.
        let frozen = version
            .freezer(&self.name)
            .filter(|f| write_raw(&f.path, f.frozen).is_ok());
        let killed = self.kill_each(pids);
        if let Some(f) = frozen {
            write_file(&f.path, f.thawed)?;
        }
        killed
    }

    fn kill_each(&self, pids: &[i32]) -> Result<(), CgroupError> {
        use rustix::process::{Pid, Signal, getpid, kill_process};
        let own = getpid().as_raw_pid();
        // Never signal ourselves: if band-server were in the cgroup by mistake, the deadline
        // reports it instead.
        for pid in pids.iter().copied().filter(|&p| p != own) {
            let Some(target) = Pid::from_raw(pid) else {
                continue;
            };
            match kill_process(target, Signal::KILL) {
                Ok(()) | Err(rustix::io::Errno::SRCH) => {}
                Err(errno) => {
                    return Err(CgroupError::Kill {
                        pid,
                        path: self.first_dir(),
                        error: errno.into(),
                    });
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::cgroup::cgroupfs::write_file;
    use crate::layers::cgroup::fake::*;
    use pretty_assertions::assert_eq;
    use std::io::Write as _;

    #[test]
    fn pids_are_the_union_over_hierarchies() {
        let (tmp, h) = v1_roots(false, true);
        let cg = RunCgroup::create_with(&h, "r", &limits(), &FakeKernel::new(V1_FILES)).unwrap();
        fs::write(tmp.path().join("memory/band/r/cgroup.procs"), "12\n7\n").unwrap();
        fs::write(tmp.path().join("pids/band/r/cgroup.procs"), "7\n30\n").unwrap();
        assert_eq!(cg.pids().unwrap(), vec![7, 12, 30]);

        fs::write(tmp.path().join("pids/band/r/cgroup.procs"), "7\nx\n").unwrap();
        let err = cg.pids().unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "malformed {}: \"x\" is not a pid",
                tmp.path().join("pids/band/r/cgroup.procs").display()
            )
        );
    }

    #[test]
    fn a_missing_cgroup_has_no_pids() {
        let (_tmp, h) = v2_root("memory pids\n");
        let cg = RunCgroup::open(&h, "gone").unwrap();
        assert_eq!(cg.pids().unwrap(), Vec::<i32>::new());
    }

    #[test]
    fn stats_of_a_missing_cgroup_are_empty() {
        let (_tmp, h) = v1_roots(false, false);
        let cg = RunCgroup::open(&h, "gone").unwrap();
        assert_eq!(cg.stats(), CgroupStats::default());
    }

    #[test]
    fn kill_all_of_an_empty_cgroup_returns_at_once() {
        let (tmp, h) = v2_root("memory pids\n");
        let cg = RunCgroup::create_with(&h, "r", &limits(), &FakeKernel::new(V2_FILES)).unwrap();
        cg.kill_all(Duration::ZERO).unwrap();
        assert_eq!(
            read(tmp.path().join("band/r/cgroup.kill")),
            "",
            "nothing to kill"
        );
    }

    #[test]
    fn kill_all_times_out_naming_the_survivors() {
        // With cgroup.kill present no pid is signalled one by one, so listing real pids in a
        // plain file is harmless: the "kernel" never empties it.
        let (tmp, h) = v2_root("memory pids\n");
        let cg = RunCgroup::create_with(&h, "r", &limits(), &FakeKernel::new(V2_FILES)).unwrap();
        let leaf = tmp.path().join("band/r");
        fs::write(leaf.join("cgroup.procs"), "4242\n4243\n").unwrap();
        let err = cg.kill_all(Duration::from_millis(30)).unwrap_err();
        assert_eq!(read(leaf.join("cgroup.kill")), "1");
        assert_eq!(
            err.to_string(),
            format!(
                "processes still in {} after 30ms: [4242, 4243]",
                leaf.display()
            )
        );
    }

    #[test]
    fn remove_deletes_every_hierarchy_and_can_repeat() {
        let (tmp, h) = v1_roots(true, true);
        let fake = FakeKernel::new(V1_FILES);
        let cg = RunCgroup::create_with(&h, "r", &limits(), &fake).unwrap();
        cg.remove_with(&fake).unwrap();
        for dir in cg.dirs() {
            assert!(!dir.exists(), "{}", dir.display());
        }
        assert!(
            tmp.path().join("memory/band").is_dir(),
            "the shared parent stays"
        );
        cg.remove_with(&fake).unwrap();
    }

    // ---- Privileged: a real cgroup on this machine.

    /// The real hierarchy, or `None` with "skipped: …" (a panic if `BAND_TEST_MUST_RUN=1`).
    fn privileged() -> Option<Hierarchy> {
        let skip = |why: String| {
            if std::env::var_os("BAND_TEST_MUST_RUN").is_some_and(|v| v == "1") {
                panic!("BAND_TEST_MUST_RUN=1 but this test {why}");
            }
            eprintln!("skipped: {why}");
            None
        };
        if !rustix::process::geteuid().is_root() {
            return skip("needs root".to_string());
        }
        match Hierarchy::detect_system() {
            Ok(h) => Some(h),
            Err(e) => skip(format!("needs a cgroup hierarchy: {e}")),
        }
    }

    /// Removes the cgroup and reaps the child even when an assertion fails.
    struct Cleanup {
        cg: RunCgroup,
        child: Option<std::process::Child>,
    }

    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = self.cg.remove();
            if let Some(child) = self.child.as_mut() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }

    /// Starts `program args…` stopped on its stdin, moves it into `cg`, then lets it run, so
    /// everything it does is charged to the cgroup.
    fn spawn_inside(cg: &RunCgroup, program: &str, args: &[&str]) -> std::process::Child {
        use std::process::{Command, Stdio};
        let mut child = Command::new("sh")
            .arg("-c")
            .arg("read _ && exec \"$@\"")
            .arg("sh")
            .arg(program)
            .args(args)
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        for procs in cg.procs_files() {
            write_file(&procs, &child.id().to_string()).unwrap();
        }
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"go\n").unwrap();
        child
    }

    fn wait_until(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if done() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        done()
    }

    fn unique(test: &str) -> String {
        format!("test-{}-{test}", std::process::id())
    }

    #[test]
    fn privileged_cgroup_lifecycle() {
        use std::os::unix::process::ExitStatusExt;
        let Some(h) = privileged() else { return };
        let name = unique("lifecycle");
        let cg = RunCgroup::create(&h, &name, &limits()).unwrap();
        let mut guard = Cleanup {
            cg: cg.clone(),
            child: None,
        };
        let memory_file = match &h {
            Hierarchy::V2 { .. } => "memory.max",
            Hierarchy::V1 { .. } => "memory.limit_in_bytes",
        };
        let memory_dir = cg.dirs().remove(0);
        assert_eq!(read(memory_dir.join(memory_file)).trim(), "67108864");

        let child = spawn_inside(&cg, "sleep", &["30"]);
        let pid = i32::try_from(child.id()).unwrap();
        guard.child = Some(child);
        assert_eq!(cg.pids().unwrap(), vec![pid]);
        let own = read(format!("/proc/{pid}/cgroup"));
        assert!(own.contains(&format!("/band/{name}")), "{own}");
        let stats = cg.stats();
        assert_eq!((stats.oom_kills, stats.pids_max_hits), (0, 0));
        assert!(RunCgroup::list_stale(&h).contains(&name));

        cg.kill_all(Duration::from_secs(5)).unwrap();
        assert_eq!(cg.pids().unwrap(), Vec::<i32>::new());
        let status = guard.child.take().unwrap().wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL));

        cg.remove().unwrap();
        for dir in cg.dirs() {
            assert!(!dir.exists(), "{}", dir.display());
        }
        cg.remove().unwrap();
        assert!(!RunCgroup::list_stale(&h).contains(&name));
    }

    #[test]
    fn privileged_remove_kills_what_is_left_first() {
        use std::os::unix::process::ExitStatusExt;
        let Some(h) = privileged() else { return };
        let name = unique("remove-busy");
        let cg = RunCgroup::create(&h, &name, &limits()).unwrap();
        let mut guard = Cleanup {
            cg: cg.clone(),
            child: None,
        };
        let child = spawn_inside(&cg, "sleep", &["30"]);
        let pid = i32::try_from(child.id()).unwrap();
        guard.child = Some(child);
        assert_eq!(cg.pids().unwrap(), vec![pid]);

        // No kill_all first: the kernel refuses the first removal, and remove kills the sleep.
        cg.remove().unwrap();
        let status = guard.child.take().unwrap().wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        for dir in cg.dirs() {
            assert!(!dir.exists(), "{}", dir.display());
        }
    }

    #[test]
    fn privileged_memory_hog_is_oom_killed() {
        use std::os::unix::process::ExitStatusExt;
        let Some(h) = privileged() else { return };
        let small = CgroupLimits {
            memory_bytes: 32 * MIB,
            ..limits()
        };
        let cg = RunCgroup::create(&h, &unique("oom"), &small).unwrap();
        let mut guard = Cleanup {
            cg: cg.clone(),
            child: None,
        };
        let python = if Path::new("/usr/bin/python3").exists() {
            "/usr/bin/python3"
        } else {
            "python3"
        };
        let child =
            guard
                .child
                .insert(spawn_inside(&cg, python, &["-c", "b = b'x' * (200 << 20)"]));
        let mut status = None;
        wait_until(Duration::from_secs(30), || {
            status = child.try_wait().unwrap();
            status.is_some()
        });
        let status = status.expect("the memory hog was not killed within 30 s");
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
        let stats = cg.stats();
        assert!(stats.oom_kills >= 1, "{stats:?}");
        if let Some(peak) = stats.peak_memory_bytes {
            assert!(peak <= 32 * MIB, "{stats:?}");
        }
        cg.remove().unwrap();
    }

    #[test]
    fn privileged_fork_loop_hits_pids_max() {
        let Some(h) = privileged() else { return };
        let few = CgroupLimits {
            pids: 10,
            ..limits()
        };
        let cg = RunCgroup::create(&h, &unique("pids"), &few).unwrap();
        let mut guard = Cleanup {
            cg: cg.clone(),
            child: None,
        };
        guard.child = Some(spawn_inside(
            &cg,
            "bash",
            &["-c", "for i in $(seq 100); do sleep 5 & done; wait"],
        ));
        let hit = wait_until(Duration::from_secs(20), || cg.stats().pids_max_hits >= 1);
        assert!(hit, "pids.max was never hit: {:?}", cg.stats());
        assert!(cg.pids().unwrap().len() <= 10);
        cg.kill_all(Duration::from_secs(5)).unwrap();
        assert_eq!(cg.pids().unwrap(), Vec::<i32>::new());
        drop(guard);
        for dir in cg.dirs() {
            assert!(!dir.exists(), "{}", dir.display());
        }
    }
}
