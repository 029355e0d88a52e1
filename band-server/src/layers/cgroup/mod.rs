//! One cgroup per run: memory, pids and CPU limits, OOM and fork-limit counters, and teardown.
//!
//! Two layouts are supported, because the machines differ:
//!
//! - **v2** (the production VM): one unified hierarchy; the run's cgroup is `<root>/band/<name>`.
//! - **v1** (older hosts and this project's CI): one hierarchy per controller; the run gets
//!   `<mount>/band/<name>` in each of the memory, pids, cpu and freezer hierarchies.
//!
//! Detection is a pure function of `/proc/self/mountinfo` ([`Hierarchy::detect`]). Creation is
//! a pure plan (a list of mkdirs and writes) followed by a thin applier, so the exact bytes
//! written are unit-tested against a temporary directory laid out like cgroupfs.
//!
//! Every limit write that fails is an error (fail closed); the few optional files are named as
//! such where they are planned. Every I/O error names its path.

pub mod apply;

use fs_err as fs;
use std::collections::BTreeSet;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The directory under each hierarchy's root that holds every run's cgroup.
const PARENT: &str = "band";

/// How long [`RunCgroup::remove`] waits for the processes to die and the directories to go.
const REMOVE_DEADLINE: Duration = Duration::from_secs(5);

/// How often [`RunCgroup::kill_all`] re-reads `cgroup.procs` (and `remove` retries a busy
/// directory) …
const POLL: Duration = Duration::from_millis(10);
/// … after a first look this soon, doubling: a process that was exiting anyway, or was just sent
/// SIGKILL, is usually gone within a millisecond, and every run ends with one such look.
const FIRST_POLL: Duration = Duration::from_millis(1);

/// Where the cgroup controllers are mounted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hierarchy {
    /// The unified hierarchy, mounted at `root`, offering at least memory and pids.
    V2 { root: PathBuf },
    /// Per-controller hierarchies. memory and pids are required; cpu and freezer are used when
    /// mounted.
    V1 {
        memory: PathBuf,
        pids: PathBuf,
        cpu: Option<PathBuf>,
        freezer: Option<PathBuf>,
    },
}

/// The limits of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CgroupLimits {
    /// Memory limit; swap is limited to zero where the kernel allows.
    pub memory_bytes: u64,
    /// Maximum number of tasks (processes and threads).
    pub pids: u64,
    /// CPU time per period, in microseconds. `0` means no CPU limit.
    pub cpu_quota_us: u64,
    /// The CPU accounting period, in microseconds.
    pub cpu_period_us: u64,
}

/// Counters read back after a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CgroupStats {
    /// Peak memory use; `None` where the kernel does not record it (v2 before 5.19).
    pub peak_memory_bytes: Option<u64>,
    /// Processes the OOM killer killed in this cgroup.
    pub oom_kills: u64,
    /// Forks that failed because `pids.max` was reached.
    pub pids_max_hits: u64,
}

/// Errors from cgroup detection, setup and teardown.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("no usable cgroup hierarchy: {reason}")]
    NoHierarchy { reason: String },
    #[error("invalid cgroup name {name:?}: {reason}")]
    InvalidName { name: String, reason: &'static str },
    #[error("the {controller} controller is not available in {}", .path.display())]
    MissingController {
        controller: &'static str,
        path: PathBuf,
    },
    #[error("failed to create {}: {error}", .path.display())]
    Create { path: PathBuf, error: io::Error },
    #[error("failed to remove {}: {error}", .path.display())]
    Remove { path: PathBuf, error: io::Error },
    #[error("failed to read {}: {error}", .path.display())]
    Read { path: PathBuf, error: io::Error },
    #[error("failed to write {value} to {}: {error}", .path.display())]
    Write {
        path: PathBuf,
        value: String,
        error: io::Error,
    },
    #[error("malformed {}: {line:?} is not a pid", .path.display())]
    Parse { path: PathBuf, line: String },
    #[error("failed to kill pid {pid} in {}: {error}", .path.display())]
    Kill {
        pid: i32,
        path: PathBuf,
        error: io::Error,
    },
    #[error("processes still in {} after {deadline:?}: {pids:?}", .path.display())]
    KillTimeout {
        path: PathBuf,
        deadline: Duration,
        pids: Vec<i32>,
    },
}

impl Hierarchy {
    /// Chooses the hierarchy from the text of `/proc/self/mountinfo`.
    ///
    /// `read_controllers` is called with the mount point of each cgroup2 mount and returns the
    /// contents of its `cgroup.controllers` (or `None` if unreadable). A cgroup2 mount whose
    /// controllers include memory and pids wins; otherwise v1 memory and pids hierarchies are
    /// used. A hybrid host (cgroup2 at `/sys/fs/cgroup/unified` without controllers) is v1.
    pub fn detect(
        mountinfo: &str,
        read_controllers: impl Fn(&Path) -> Option<String>,
    ) -> Result<Hierarchy, CgroupError> {
        let mounts = parse_mountinfo(mountinfo);
        let mut notes = Vec::new();

        for mount in mounts.iter().filter(|m| m.v2) {
            let Some(controllers) = read_controllers(&mount.path) else {
                notes.push(format!(
                    "cannot read {}",
                    mount.path.join("cgroup.controllers").display()
                ));
                continue;
            };
            let have: BTreeSet<&str> = controllers.split_whitespace().collect();
            let missing: Vec<&str> = ["memory", "pids"]
                .into_iter()
                .filter(|c| !have.contains(c))
                .collect();
            if missing.is_empty() {
                return Ok(Hierarchy::V2 {
                    root: mount.path.clone(),
                });
            }
            notes.push(format!(
                "cgroup2 at {} lacks {}",
                mount.path.display(),
                missing.join(", ")
            ));
        }

        let v1 = |controller: &str| {
            mounts
                .iter()
                .find(|m| !m.v2 && m.options.iter().any(|o| o == controller))
                .map(|m| m.path.clone())
        };
        match (v1("memory"), v1("pids")) {
            (Some(memory), Some(pids)) => {
                return Ok(Hierarchy::V1 {
                    memory,
                    pids,
                    cpu: v1("cpu"),
                    freezer: v1("freezer"),
                });
            }
            (memory, pids) if mounts.iter().any(|m| !m.v2) => {
                let missing: Vec<&str> = [("memory", memory), ("pids", pids)]
                    .into_iter()
                    .filter(|(_, m)| m.is_none())
                    .map(|(c, _)| c)
                    .collect();
                notes.push(format!("cgroup v1 lacks {}", missing.join(", ")));
            }
            _ => {}
        }
        if mounts.is_empty() {
            notes.push("no cgroup or cgroup2 mount in mountinfo".to_string());
        }
        Err(CgroupError::NoHierarchy {
            reason: notes.join("; "),
        })
    }

    /// [`Hierarchy::detect`] on this process's `/proc/self/mountinfo`.
    pub fn detect_system() -> Result<Hierarchy, CgroupError> {
        let path = Path::new("/proc/self/mountinfo");
        let mountinfo = fs::read_to_string(path).map_err(|error| CgroupError::Read {
            path: path.to_path_buf(),
            error,
        })?;
        Hierarchy::detect(&mountinfo, |mount| {
            fs::read_to_string(mount.join("cgroup.controllers")).ok()
        })
    }

    /// The roots of the hierarchies a run uses, in a fixed order.
    fn roots(&self) -> Vec<&Path> {
        match self {
            Hierarchy::V2 { root } => vec![root],
            Hierarchy::V1 {
                memory,
                pids,
                cpu,
                freezer,
            } => [Some(memory), Some(pids), cpu.as_ref(), freezer.as_ref()]
                .into_iter()
                .flatten()
                .map(PathBuf::as_path)
                .collect(),
        }
    }
}

#[derive(Debug)]
struct CgroupMount {
    path: PathBuf,
    v2: bool,
    /// Superblock options; for v1 these name the controllers (`rw,cpu,cpuacct`).
    options: Vec<String>,
}

/// The cgroup and cgroup2 mounts in `mountinfo` (proc(5)):
/// `id parent maj:min root mount-point options [optional...] - fstype source super-options`.
fn parse_mountinfo(mountinfo: &str) -> Vec<CgroupMount> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let sep = fields.iter().position(|f| *f == "-")?;
            let mount_point = fields.get(4).filter(|_| sep >= 6)?;
            let v2 = match *fields.get(sep + 1)? {
                "cgroup2" => true,
                "cgroup" => false,
                _ => return None,
            };
            let options = fields
                .get(sep + 3)
                .map(|o| o.split(',').map(str::to_string).collect())
                .unwrap_or_default();
            Some(CgroupMount {
                path: PathBuf::from(unescape_mount_path(mount_point)),
                v2,
                options,
            })
        })
        .collect()
}

/// Undoes the kernel's octal escapes in mountinfo paths (`\040` for a space).
fn unescape_mount_path(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)))
            .map(|d| d.iter().fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0')));
        match octal.and_then(|v| u8::try_from(v).ok()) {
            Some(byte) => {
                out.push(byte);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One run's cgroup: `<root>/band/<name>` in every hierarchy it uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunCgroup {
    hierarchy: Hierarchy,
    name: String,
    /// `<state>/cgroups/<name>` when this state directory created the cgroup
    /// ([`RunCgroup::apply_owned`]): removed with the cgroup.
    mark: Option<PathBuf>,
}

/// `<state>/cgroups`: an empty file per run cgroup that servers of this state directory created
/// and have not removed yet. Cgroups live in one host-wide `band/` directory, whichever state
/// directory a server uses; the janitor's stale pass removes only the ones marked here, never a
/// cgroup of a server with another state directory (issue 13, item 11).
pub fn marks_dir(state: &Path) -> PathBuf {
    state.join("cgroups")
}

/// The ownership mark of cgroup `name` in `state`.
pub fn mark_path(state: &Path, name: &str) -> PathBuf {
    marks_dir(state).join(name)
}

/// The names marked in `state` (valid cgroup names only), sorted.
pub fn list_marks(state: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(marks_dir(state)) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| validate_name(n).is_ok())
        .collect();
    names.sort();
    names
}

/// Remove the mark of `name` in `state`; a missing mark is fine.
pub fn remove_mark(state: &Path, name: &str) -> io::Result<()> {
    match fs::remove_file(mark_path(state, name)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

fn write_mark(state: &Path, name: &str) -> Result<PathBuf, CgroupError> {
    use fs_err::os::unix::fs::OpenOptionsExt;
    use std::os::unix::fs::PermissionsExt;
    validate_name(name)?;
    let dir = marks_dir(state);
    let create = |path: &Path, error| CgroupError::Create {
        path: path.to_path_buf(),
        error,
    };
    fs::create_dir_all(&dir).map_err(|e| create(&dir, e))?;
    fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| create(&dir, e))?;
    let mark = dir.join(name);
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&mark)
        .map_err(|e| create(&mark, e))?;
    Ok(mark)
}

/// What the applier does with a write that fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Any failure is an error.
    Required,
    /// A missing file is skipped (the kernel or controller does not offer it); any other
    /// failure is an error.
    IfExists,
    /// Failures are ignored: the setting is a refinement, not a limit.
    BestEffort,
}

/// One step of creating a run's cgroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// `mkdir`; `exist_ok` only for the shared `band` parent.
    Mkdir { path: PathBuf, exist_ok: bool },
    /// v2: enable memory and pids (required) and cpu (if offered) for the children of `dir`.
    EnableControllers { dir: PathBuf },
    Write {
        path: PathBuf,
        value: String,
        need: Need,
    },
}

fn write_op(dir: &Path, file: &str, value: impl ToString, need: Need) -> Op {
    Op::Write {
        path: dir.join(file),
        value: value.to_string(),
        need,
    }
}

/// `mkdir` of the shared parent and of the run's directory under `root`; returns the latter.
fn plan_mkdirs(ops: &mut Vec<Op>, root: &Path, name: &str) -> PathBuf {
    let parent = root.join(PARENT);
    let leaf = parent.join(name);
    ops.push(Op::Mkdir {
        path: parent,
        exist_ok: true,
    });
    ops.push(Op::Mkdir {
        path: leaf.clone(),
        exist_ok: false,
    });
    leaf
}

/// The steps that create `name` with `limits` in `h`. Pure.
fn plan_create(h: &Hierarchy, name: &str, limits: &CgroupLimits) -> Vec<Op> {
    match h {
        Hierarchy::V2 { root } => {
            // Controllers are enabled on the ancestors only: a cgroup with processes cannot
            // also delegate controllers (EBUSY), so the leaf's subtree_control stays empty.
            let parent = root.join(PARENT);
            let leaf = parent.join(name);
            let cpu_max = if limits.cpu_quota_us == 0 {
                format!("max {}", limits.cpu_period_us)
            } else {
                format!("{} {}", limits.cpu_quota_us, limits.cpu_period_us)
            };
            vec![
                Op::EnableControllers { dir: root.clone() },
                Op::Mkdir {
                    path: parent.clone(),
                    exist_ok: true,
                },
                Op::EnableControllers { dir: parent },
                Op::Mkdir {
                    path: leaf.clone(),
                    exist_ok: false,
                },
                write_op(&leaf, "memory.max", limits.memory_bytes, Need::Required),
                // Absent without swap accounting; then there is no swap to limit.
                write_op(&leaf, "memory.swap.max", 0, Need::IfExists),
                // An OOM kill takes the whole run, not one process of it.
                write_op(&leaf, "memory.oom.group", 1, Need::Required),
                write_op(&leaf, "pids.max", limits.pids, Need::Required),
                // Absent when the cpu controller could not be enabled (see EnableControllers).
                write_op(&leaf, "cpu.max", cpu_max, Need::IfExists),
            ]
        }
        Hierarchy::V1 {
            memory,
            pids,
            cpu,
            freezer,
        } => {
            let mut ops = Vec::new();
            let memory_leaf = plan_mkdirs(&mut ops, memory, name);
            let pids_leaf = plan_mkdirs(&mut ops, pids, name);
            let cpu_leaf = cpu.as_deref().map(|cpu| plan_mkdirs(&mut ops, cpu, name));
            if let Some(freezer) = freezer {
                plan_mkdirs(&mut ops, freezer, name);
            }
            let bytes = limits.memory_bytes;
            ops.extend([
                write_op(&memory_leaf, "memory.limit_in_bytes", bytes, Need::Required),
                // memory+swap; absent without swap accounting. Must follow limit_in_bytes,
                // which it may not undercut.
                write_op(
                    &memory_leaf,
                    "memory.memsw.limit_in_bytes",
                    bytes,
                    Need::IfExists,
                ),
                write_op(&memory_leaf, "memory.swappiness", 0, Need::BestEffort),
                write_op(&pids_leaf, "pids.max", limits.pids, Need::Required),
            ]);
            if let Some(cpu_leaf) = cpu_leaf {
                let quota = match limits.cpu_quota_us {
                    0 => "-1".to_string(),
                    q => q.to_string(),
                };
                ops.extend([
                    write_op(
                        &cpu_leaf,
                        "cpu.cfs_period_us",
                        limits.cpu_period_us,
                        Need::Required,
                    ),
                    write_op(&cpu_leaf, "cpu.cfs_quota_us", quota, Need::Required),
                ]);
            }
            ops
        }
    }
}

/// The two operations in which cgroupfs differs from a plain directory: `mkdir` creates the
/// interface files, and `rmdir` removes a directory that still lists them. Tests substitute a
/// fake that does the same in a temporary directory.
trait Dirs {
    fn mkdir(&self, path: &Path) -> io::Result<()>;
    fn rmdir(&self, path: &Path) -> io::Result<()>;
}

struct Kernel;

impl Dirs for Kernel {
    fn mkdir(&self, path: &Path) -> io::Result<()> {
        fs::create_dir(path)
    }
    fn rmdir(&self, path: &Path) -> io::Result<()> {
        fs::remove_dir(path)
    }
}

/// One `write(2)` of `value` to an existing file (cgroupfs files must not be created).
fn write_raw(path: &Path, value: &str) -> io::Result<()> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)?;
    file.write_all(value.as_bytes())
}

fn write_file(path: &Path, value: &str) -> Result<(), CgroupError> {
    write_raw(path, value).map_err(|error| CgroupError::Write {
        path: path.to_path_buf(),
        value: value.to_string(),
        error,
    })
}

fn read_file(path: &Path) -> Result<String, CgroupError> {
    fs::read_to_string(path).map_err(|error| CgroupError::Read {
        path: path.to_path_buf(),
        error,
    })
}

fn enable_controllers(dir: &Path) -> Result<(), CgroupError> {
    let offered_path = dir.join("cgroup.controllers");
    let offered = read_file(&offered_path)?;
    let offered: BTreeSet<&str> = offered.split_whitespace().collect();
    for controller in ["memory", "pids"] {
        if !offered.contains(controller) {
            return Err(CgroupError::MissingController {
                controller,
                path: offered_path,
            });
        }
    }
    let control = dir.join("cgroup.subtree_control");
    // One write enables all or none, so cpu (optional: absent, or EBUSY with realtime tasks)
    // gets a second chance without it.
    if offered.contains("cpu") && write_raw(&control, "+memory +pids +cpu").is_ok() {
        return Ok(());
    }
    write_file(&control, "+memory +pids")
}

fn apply(ops: &[Op], dirs: &dyn Dirs) -> Result<(), CgroupError> {
    let mut created = Vec::new();
    let result = ops.iter().try_for_each(|op| match op {
        Op::Mkdir { path, exist_ok } => match dirs.mkdir(path) {
            Ok(()) => {
                if !exist_ok {
                    created.push(path.clone());
                }
                Ok(())
            }
            Err(e) if *exist_ok && e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            Err(error) => Err(CgroupError::Create {
                path: path.clone(),
                error,
            }),
        },
        Op::EnableControllers { dir } => enable_controllers(dir),
        Op::Write { path, value, need } => match (write_raw(path, value), need) {
            (Ok(()), _) | (Err(_), Need::BestEffort) => Ok(()),
            (Err(e), Need::IfExists) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            (Err(error), _) => Err(CgroupError::Write {
                path: path.clone(),
                value: value.clone(),
                error,
            }),
        },
    });
    if result.is_err() {
        // Fresh and empty, so rmdir succeeds; a failure here would only hide the real error.
        for path in created.iter().rev() {
            let _ = dirs.rmdir(path);
        }
    }
    result
}

fn validate_name(name: &str) -> Result<(), CgroupError> {
    let reason = if name.is_empty() {
        Some("empty")
    } else if name.len() > 200 {
        Some("longer than 200 bytes")
    } else if name.starts_with('.') {
        Some("starts with a dot")
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
    {
        Some("only ASCII letters, digits, '-', '_' and '.' are allowed")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(CgroupError::InvalidName {
            name: name.to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

/// The first line `key N` of a flat-keyed file (`memory.events`, `pids.events`, `oom_control`).
fn keyed_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(' ')?;
        if k == key {
            v.trim().parse().ok()
        } else {
            None
        }
    })
}

fn read_u64(path: &Path) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn read_keyed(path: &Path, key: &str) -> Option<u64> {
    keyed_value(&fs::read_to_string(path).ok()?, key)
}

/// How a run's cgroup is created: a pure function of the hierarchy, the name and the limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupPlan {
    pub hierarchy: Hierarchy,
    pub name: String,
    pub ops: Vec<Op>,
}

/// Plan the run's cgroup `name` with `limits` in `h`. Pure.
pub fn plan(h: &Hierarchy, name: &str, limits: &CgroupLimits) -> Result<CgroupPlan, CgroupError> {
    validate_name(name)?;
    Ok(CgroupPlan {
        hierarchy: h.clone(),
        name: name.to_string(),
        ops: plan_create(h, name, limits),
    })
}

impl RunCgroup {
    /// Applies a plan: see [`RunCgroup::create`].
    pub fn apply(plan: &CgroupPlan) -> Result<RunCgroup, CgroupError> {
        apply(&plan.ops, &Kernel)?;
        Ok(RunCgroup {
            hierarchy: plan.hierarchy.clone(),
            name: plan.name.clone(),
            mark: None,
        })
    }

    /// [`RunCgroup::apply`], marked as created by the servers of `state` first (see
    /// [`marks_dir`]); the mark goes with the cgroup.
    pub fn apply_owned(plan: &CgroupPlan, state: &Path) -> Result<RunCgroup, CgroupError> {
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

    /// Creates the run's cgroup in every hierarchy and applies `limits`. The `band` parent is
    /// created if needed; the run's own directory must not exist yet. On failure, directories
    /// created for the run are removed again.
    pub fn create(
        h: &Hierarchy,
        name: &str,
        limits: &CgroupLimits,
    ) -> Result<RunCgroup, CgroupError> {
        Self::create_with(h, name, limits, &Kernel)
    }

    fn create_with(
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

    /// The run's name (`<name>` in `band/<name>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The run's directory in each hierarchy (v1: memory, pids, then cpu and freezer if used).
    pub fn dirs(&self) -> Vec<PathBuf> {
        self.hierarchy
            .roots()
            .into_iter()
            .map(|root| root.join(PARENT).join(&self.name))
            .collect()
    }

    /// The files through which a freshly forked, single-threaded child joins the run's cgroup by
    /// writing `0` to each, before it execs anything. The caller opens them before forking.
    ///
    /// On v1 this is `tasks`, not `cgroup.procs`: writing `0` there moves only the calling
    /// thread, which (since Linux 5.19) skips the global threadgroup lock, and with it the RCU
    /// grace period that taking the lock for writing waits for (10-30 ms per run on a busy
    /// 2-core host, measured; one per hierarchy when the lock has gone idle in between). A
    /// forked child has exactly one thread, so moving it moves the whole process. v2 offers no
    /// such path for a domain cgroup, so it keeps `cgroup.procs`.
    pub fn join_files(&self) -> Vec<PathBuf> {
        let file = match self.hierarchy {
            Hierarchy::V2 { .. } => "cgroup.procs",
            Hierarchy::V1 { .. } => "tasks",
        };
        self.dirs().into_iter().map(|d| d.join(file)).collect()
    }

    /// `cgroup.procs` in every hierarchy: the processes in the run's cgroup.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs()
            .into_iter()
            .map(|d| d.join("cgroup.procs"))
            .collect()
    }

    /// Every pid in the cgroup (the union over hierarchies), sorted. A cgroup that no longer
    /// exists has none.
    pub fn pids(&self) -> Result<Vec<i32>, CgroupError> {
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
    pub fn stats(&self) -> CgroupStats {
        match &self.hierarchy {
            Hierarchy::V2 { root } => {
                let leaf = root.join(PARENT).join(&self.name);
                CgroupStats {
                    peak_memory_bytes: read_u64(&leaf.join("memory.peak")),
                    oom_kills: read_keyed(&leaf.join("memory.events"), "oom_kill").unwrap_or(0),
                    pids_max_hits: read_keyed(&leaf.join("pids.events"), "max").unwrap_or(0),
                }
            }
            Hierarchy::V1 { memory, pids, .. } => {
                let memory = memory.join(PARENT).join(&self.name);
                let pids = pids.join(PARENT).join(&self.name);
                let oom_control = fs::read_to_string(memory.join("memory.oom_control"));
                // `oom_kill` appeared in 4.13; before it, `under_oom 1` is the only sign.
                let oom_kills = oom_control.ok().and_then(|text| {
                    keyed_value(&text, "oom_kill").or_else(|| keyed_value(&text, "under_oom"))
                });
                CgroupStats {
                    peak_memory_bytes: read_u64(&memory.join("memory.max_usage_in_bytes")),
                    oom_kills: oom_kills.unwrap_or(0),
                    pids_max_hits: read_keyed(&pids.join("pids.events"), "max").unwrap_or(0),
                }
            }
        }
    }

    /// SIGKILLs every process in the cgroup and waits until `cgroup.procs` is empty, or fails
    /// after `deadline` naming the survivors.
    ///
    /// v2 writes `cgroup.kill`, which kills atomically, forks included. Without it (v2 before
    /// 5.14, and v1) each round freezes the cgroup if a freezer is available, so nothing forks
    /// or exits while the pids are signalled, SIGKILLs each pid, and thaws it again (v1 frozen
    /// tasks die only once thawed). Without a freezer a pid can be reused between reading and
    /// signalling it; that is the v1-without-freezer limitation.
    pub fn kill_all(&self, deadline: Duration) -> Result<(), CgroupError> {
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

    /// Kills every process, then removes the run's directory in every hierarchy. A directory
    /// that is already gone is fine, so this is safe to repeat.
    pub fn remove(&self) -> Result<(), CgroupError> {
        self.remove_with(&Kernel)
    }

    fn remove_with(&self, dirs: &dyn Dirs) -> Result<(), CgroupError> {
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

    /// Names of the run cgroups that exist under `band/` in any hierarchy, sorted. Unreadable
    /// directories are skipped.
    pub fn list_stale(h: &Hierarchy) -> Vec<String> {
        let mut names = BTreeSet::new();
        for root in h.roots() {
            let Ok(entries) = fs::read_dir(root.join(PARENT)) else {
                continue;
            };
            for entry in entries.flatten() {
                let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                let name = entry.file_name().to_string_lossy().into_owned();
                if is_dir && validate_name(&name).is_ok() {
                    names.insert(name);
                }
            }
        }
        names.into_iter().collect()
    }

    fn first_dir(&self) -> PathBuf {
        self.dirs().into_iter().next().unwrap_or_default()
    }

    /// The freeze file and its frozen/thawed values, if this cgroup has one.
    fn freezer(&self) -> Option<(PathBuf, &'static str, &'static str)> {
        match &self.hierarchy {
            Hierarchy::V2 { root } => Some((
                root.join(PARENT).join(&self.name).join("cgroup.freeze"),
                "1",
                "0",
            )),
            Hierarchy::V1 { freezer, .. } => freezer.as_ref().map(|f| {
                (
                    f.join(PARENT).join(&self.name).join("freezer.state"),
                    "FROZEN",
                    "THAWED",
                )
            }),
        }
    }

    fn kill_round(&self, pids: &[i32]) -> Result<(), CgroupError> {
        if let Hierarchy::V2 { root } = &self.hierarchy {
            let kill = root.join(PARENT).join(&self.name).join("cgroup.kill");
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
        let frozen = self
            .freezer()
            .filter(|(path, frozen, _)| write_raw(path, frozen).is_ok());
        let killed = self.kill_each(pids);
        if let Some((path, _, thawed)) = frozen {
            write_file(&path, thawed)?;
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

/// How long a run's teardown waits for everything in its cgroup to die.
pub const KILL_DEADLINE: Duration = Duration::from_secs(5);

/// The cgroup layer.
pub struct Cgroup;

impl crate::layer::RunLayer for Cgroup {
    /// The cgroups this state directory marked (see [`marks_dir`]); a cgroup of another state
    /// directory's server is never listed, so never removed.
    fn list_stale(
        &self,
        host: &crate::layer::Host<'_>,
        report: &mut crate::layer::Report,
    ) -> Vec<crate::layer::Stale> {
        let _ = report;
        list_marks(host.state)
            .into_iter()
            .map(crate::layer::Stale::run)
            .collect()
    }

    fn remove_dead_run(
        &self,
        host: &crate::layer::Host<'_>,
        run: &str,
        report: &mut crate::layer::Report,
    ) {
        remove_owned(host.state, run, report);
    }

    fn remove_stale(
        &self,
        host: &crate::layer::Host<'_>,
        item: &crate::layer::Stale,
        live: &BTreeSet<String>,
        report: &mut crate::layer::Report,
    ) {
        let name = &item.run;
        if live.contains(name) || report.removed_cgroups.contains(name) {
            return;
        }
        remove_owned(host.state, name, report);
    }
}

/// Remove the cgroup `name` of a dead run of `state`, then its mark. A mark whose cgroup is
/// already gone (removed by a server without marks) just goes, unreported.
fn remove_owned(state: &Path, name: &str, report: &mut crate::layer::Report) {
    if let Ok(h) = Hierarchy::detect_system() {
        let gone = RunCgroup::open(&h, name)
            .map(|cg| cg.dirs().iter().all(|d| !d.exists()))
            .unwrap_or(false);
        if gone {
            if let Err(e) = remove_mark(state, name) {
                report.errors.push(format!("cgroup {name}: {e}"));
            }
            return;
        }
        match RunCgroup::open(&h, name).and_then(|cg| cg.remove()) {
            Ok(()) => {
                report.removed_cgroups.push(name.to_string());
                if let Err(e) = remove_mark(state, name) {
                    report.errors.push(format!("cgroup {name}: {e}"));
                }
            }
            Err(e) => report.errors.push(format!("cgroup {name}: {e}")),
        }
    }
}

impl crate::layer::Built for RunCgroup {
    fn stop(&mut self, t: &mut crate::layer::Teardown) {
        if let Err(e) = self.kill_all(KILL_DEADLINE) {
            t.errors.push(format!("cgroup: {e}"));
            t.processes_dead = false;
        }
    }

    fn teardown(self: Box<Self>, t: &mut crate::layer::Teardown) {
        if let Err(e) = self.remove() {
            t.errors.push(format!("cgroup: {e}"));
            return;
        }
        if let Some(mark) = &self.mark
            && let Err(e) = fs::remove_file(mark)
            && e.kind() != io::ErrorKind::NotFound
        {
            t.errors.push(format!("cgroup: {e}"));
        }
    }

    crate::layer::built_any!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const MIB: u64 = 1 << 20;

    fn limits() -> CgroupLimits {
        CgroupLimits {
            memory_bytes: 64 * MIB,
            pids: 16,
            cpu_quota_us: 50_000,
            cpu_period_us: 100_000,
        }
    }

    // ---- Detection.

    /// This project's CI machine: v1 controllers plus a controller-less cgroup2 (hybrid).
    const HYBRID: &str = "\
22 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime - sysfs sysfs rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    /// Debian 12 default: pure v2.
    const UNIFIED: &str = "\
25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
28 25 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";

    /// Ubuntu 20.04 style v1: cpu and cpuacct co-mounted, escaped path for good measure.
    const COMOUNTED: &str = "\
30 25 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
35 30 0:31 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,cpu,cpuacct
36 30 0:32 / /sys/fs/cgroup/memory\\040limits rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,memory
37 30 0:33 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:17 - cgroup cgroup rw,pids
";

    fn controllers(
        map: &'static [(&'static str, &'static str)],
    ) -> impl Fn(&Path) -> Option<String> {
        move |p| {
            map.iter()
                .find(|(path, _)| Path::new(path) == p)
                .map(|(_, c)| c.to_string())
        }
    }

    #[test]
    fn hybrid_host_is_v1() {
        let got = Hierarchy::detect(
            HYBRID,
            controllers(&[("/sys/fs/cgroup/unified", "hugetlb\n")]),
        );
        assert_eq!(
            got.unwrap(),
            Hierarchy::V1 {
                memory: "/sys/fs/cgroup/memory".into(),
                pids: "/sys/fs/cgroup/pids".into(),
                cpu: Some("/sys/fs/cgroup/cpu".into()),
                freezer: Some("/sys/fs/cgroup/freezer".into()),
            }
        );
    }

    #[test]
    fn unified_host_is_v2() {
        let got = Hierarchy::detect(
            UNIFIED,
            controllers(&[(
                "/sys/fs/cgroup",
                "cpuset cpu io memory hugetlb pids rdma misc\n",
            )]),
        );
        assert_eq!(
            got.unwrap(),
            Hierarchy::V2 {
                root: "/sys/fs/cgroup".into()
            }
        );
    }

    #[test]
    fn v2_with_the_controllers_wins_over_v1() {
        let got = Hierarchy::detect(
            HYBRID,
            controllers(&[("/sys/fs/cgroup/unified", "memory pids")]),
        );
        assert_eq!(
            got.unwrap(),
            Hierarchy::V2 {
                root: "/sys/fs/cgroup/unified".into()
            }
        );
    }

    #[test]
    fn comounted_v1_controllers_and_escaped_paths() {
        let got = Hierarchy::detect(COMOUNTED, controllers(&[("/sys/fs/cgroup/unified", "")]));
        assert_eq!(
            got.unwrap(),
            Hierarchy::V1 {
                memory: "/sys/fs/cgroup/memory limits".into(),
                pids: "/sys/fs/cgroup/pids".into(),
                cpu: Some("/sys/fs/cgroup/cpu,cpuacct".into()),
                freezer: None,
            }
        );
    }

    #[test]
    fn v2_without_pids_and_no_v1_is_an_error() {
        let err = Hierarchy::detect(UNIFIED, controllers(&[("/sys/fs/cgroup", "cpu memory io")]))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "no usable cgroup hierarchy: cgroup2 at /sys/fs/cgroup lacks pids"
        );
    }

    #[test]
    fn unreadable_v2_and_partial_v1_is_an_error() {
        let mountinfo = "\
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
";
        let err = Hierarchy::detect(mountinfo, |_| None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no usable cgroup hierarchy: cannot read /sys/fs/cgroup/unified/cgroup.controllers; \
             cgroup v1 lacks pids"
        );
    }

    #[test]
    fn no_cgroup_mounts_is_an_error() {
        let err =
            Hierarchy::detect("22 1 0:21 / /sys rw - sysfs sysfs rw\n", |_| None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no usable cgroup hierarchy: no cgroup or cgroup2 mount in mountinfo"
        );
    }

    // ---- Plans (pure).

    fn w(path: &str, value: &str, need: Need) -> Op {
        Op::Write {
            path: path.into(),
            value: value.into(),
            need,
        }
    }

    fn mkdir(path: &str, exist_ok: bool) -> Op {
        Op::Mkdir {
            path: path.into(),
            exist_ok,
        }
    }

    #[test]
    fn v2_plan() {
        let h = Hierarchy::V2 { root: "/cg".into() };
        assert_eq!(
            plan_create(&h, "run-1", &limits()),
            vec![
                Op::EnableControllers { dir: "/cg".into() },
                mkdir("/cg/band", true),
                Op::EnableControllers {
                    dir: "/cg/band".into()
                },
                mkdir("/cg/band/run-1", false),
                w("/cg/band/run-1/memory.max", "67108864", Need::Required),
                w("/cg/band/run-1/memory.swap.max", "0", Need::IfExists),
                w("/cg/band/run-1/memory.oom.group", "1", Need::Required),
                w("/cg/band/run-1/pids.max", "16", Need::Required),
                w("/cg/band/run-1/cpu.max", "50000 100000", Need::IfExists),
            ]
        );
    }

    #[test]
    fn v1_plan() {
        let h = Hierarchy::V1 {
            memory: "/m".into(),
            pids: "/p".into(),
            cpu: Some("/c".into()),
            freezer: Some("/f".into()),
        };
        assert_eq!(
            plan_create(&h, "run-1", &limits()),
            vec![
                mkdir("/m/band", true),
                mkdir("/m/band/run-1", false),
                mkdir("/p/band", true),
                mkdir("/p/band/run-1", false),
                mkdir("/c/band", true),
                mkdir("/c/band/run-1", false),
                mkdir("/f/band", true),
                mkdir("/f/band/run-1", false),
                w(
                    "/m/band/run-1/memory.limit_in_bytes",
                    "67108864",
                    Need::Required
                ),
                w(
                    "/m/band/run-1/memory.memsw.limit_in_bytes",
                    "67108864",
                    Need::IfExists
                ),
                w("/m/band/run-1/memory.swappiness", "0", Need::BestEffort),
                w("/p/band/run-1/pids.max", "16", Need::Required),
                w("/c/band/run-1/cpu.cfs_period_us", "100000", Need::Required),
                w("/c/band/run-1/cpu.cfs_quota_us", "50000", Need::Required),
            ]
        );
    }

    #[test]
    fn zero_cpu_quota_means_unlimited() {
        let unlimited = CgroupLimits {
            cpu_quota_us: 0,
            ..limits()
        };
        let v2 = plan_create(&Hierarchy::V2 { root: "/cg".into() }, "r", &unlimited);
        assert_eq!(
            v2.last(),
            Some(&w("/cg/band/r/cpu.max", "max 100000", Need::IfExists))
        );
        let v1 = Hierarchy::V1 {
            memory: "/m".into(),
            pids: "/p".into(),
            cpu: Some("/c".into()),
            freezer: None,
        };
        let v1 = plan_create(&v1, "r", &unlimited);
        assert_eq!(
            v1.last(),
            Some(&w("/c/band/r/cpu.cfs_quota_us", "-1", Need::Required))
        );
    }

    #[test]
    fn v1_without_cpu_or_freezer_plans_neither() {
        let h = Hierarchy::V1 {
            memory: "/m".into(),
            pids: "/p".into(),
            cpu: None,
            freezer: None,
        };
        let ops = plan_create(&h, "r", &limits());
        let touched: Vec<&Path> = ops
            .iter()
            .map(|op| match op {
                Op::Mkdir { path, .. } | Op::Write { path, .. } => path.as_path(),
                Op::EnableControllers { dir } => dir.as_path(),
            })
            .collect();
        assert!(
            touched
                .iter()
                .all(|p| p.starts_with("/m") || p.starts_with("/p")),
            "{touched:?}"
        );
    }

    // ---- Applying against a temporary directory laid out like cgroupfs.

    /// A stand-in for cgroupfs: `mkdir` creates the interface files the kernel would (minus
    /// `absent`), `rmdir` removes the directory with them.
    struct FakeKernel {
        /// Files (with initial contents) of every new cgroup directory.
        files: Vec<(&'static str, &'static str)>,
        absent: Vec<&'static str>,
    }

    const V2_FILES: &[(&str, &str)] = &[
        ("cgroup.controllers", "cpu memory pids\n"),
        ("cgroup.subtree_control", ""),
        ("cgroup.procs", ""),
        ("cgroup.kill", ""),
        ("cgroup.freeze", "0\n"),
        ("memory.max", "max\n"),
        ("memory.swap.max", "max\n"),
        ("memory.oom.group", "0\n"),
        ("memory.peak", "0\n"),
        (
            "memory.events",
            "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
        ),
        ("pids.max", "max\n"),
        ("pids.events", "max 0\n"),
        ("cpu.max", "max 100000\n"),
    ];

    const V1_FILES: &[(&str, &str)] = &[
        ("cgroup.procs", ""),
        ("memory.limit_in_bytes", "9223372036854771712\n"),
        ("memory.memsw.limit_in_bytes", "9223372036854771712\n"),
        ("memory.swappiness", "60\n"),
        ("memory.max_usage_in_bytes", "0\n"),
        (
            "memory.oom_control",
            "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
        ),
        ("pids.max", "max\n"),
        ("pids.events", "max 0\n"),
        ("cpu.cfs_period_us", "100000\n"),
        ("cpu.cfs_quota_us", "-1\n"),
        ("freezer.state", "THAWED\n"),
    ];

    impl FakeKernel {
        fn new(files: &[(&'static str, &'static str)]) -> FakeKernel {
            FakeKernel {
                files: files.to_vec(),
                absent: Vec::new(),
            }
        }

        fn without(mut self, file: &'static str) -> FakeKernel {
            self.absent.push(file);
            self
        }
    }

    impl Dirs for FakeKernel {
        fn mkdir(&self, path: &Path) -> io::Result<()> {
            fs::create_dir(path)?;
            for (file, contents) in &self.files {
                if !self.absent.contains(file) {
                    fs::write(path.join(file), contents)?;
                }
            }
            Ok(())
        }
        fn rmdir(&self, path: &Path) -> io::Result<()> {
            if !path.exists() {
                return Err(io::ErrorKind::NotFound.into());
            }
            fs::remove_dir_all(path)
        }
    }

    /// A v2 root as the kernel presents it.
    fn v2_root(controllers: &str) -> (tempfile::TempDir, Hierarchy) {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("cgroup.controllers"), controllers).unwrap();
        fs::write(tmp.path().join("cgroup.subtree_control"), "").unwrap();
        let h = Hierarchy::V2 {
            root: tmp.path().to_path_buf(),
        };
        (tmp, h)
    }

    fn v1_roots(cpu: bool, freezer: bool) -> (tempfile::TempDir, Hierarchy) {
        let tmp = tempfile::tempdir().unwrap();
        let mount = |name: &str| {
            let p = tmp.path().join(name);
            fs::create_dir(&p).unwrap();
            p
        };
        let h = Hierarchy::V1 {
            memory: mount("memory"),
            pids: mount("pids"),
            cpu: cpu.then(|| mount("cpu")),
            freezer: freezer.then(|| mount("freezer")),
        };
        (tmp, h)
    }

    fn read(path: impl AsRef<Path>) -> String {
        fs::read_to_string(path).unwrap()
    }

    #[test]
    fn v2_create_writes_exact_values() {
        let (tmp, h) = v2_root("cpuset cpu io memory hugetlb pids rdma misc\n");
        let cg =
            RunCgroup::create_with(&h, "run-1", &limits(), &FakeKernel::new(V2_FILES)).unwrap();
        let root = tmp.path();
        let leaf = root.join("band/run-1");
        assert_eq!(
            read(root.join("cgroup.subtree_control")),
            "+memory +pids +cpu"
        );
        assert_eq!(
            read(root.join("band/cgroup.subtree_control")),
            "+memory +pids +cpu"
        );
        assert_eq!(
            read(leaf.join("cgroup.subtree_control")),
            "",
            "never on the leaf"
        );
        assert_eq!(read(leaf.join("memory.max")), "67108864");
        assert_eq!(read(leaf.join("memory.swap.max")), "0");
        assert_eq!(read(leaf.join("memory.oom.group")), "1");
        assert_eq!(read(leaf.join("pids.max")), "16");
        assert_eq!(read(leaf.join("cpu.max")), "50000 100000");
        assert_eq!(cg.dirs(), vec![leaf.clone()]);
        assert_eq!(cg.procs_files(), vec![leaf.join("cgroup.procs")]);
        assert_eq!(cg.join_files(), vec![leaf.join("cgroup.procs")]);
        assert_eq!(cg.name(), "run-1");
    }

    #[test]
    fn v2_without_cpu_or_swap_still_limits_memory_and_pids() {
        let (tmp, h) = v2_root("memory pids\n");
        let fake = FakeKernel::new(V2_FILES)
            .without("cpu.max")
            .without("memory.swap.max");
        RunCgroup::create_with(&h, "r", &limits(), &fake).unwrap();
        assert_eq!(
            read(tmp.path().join("cgroup.subtree_control")),
            "+memory +pids"
        );
        assert_eq!(read(tmp.path().join("band/r/memory.max")), "67108864");
        assert!(!tmp.path().join("band/r/cpu.max").exists());
        assert!(!tmp.path().join("band/r/memory.swap.max").exists());
    }

    #[test]
    fn v2_subtree_control_failure_names_the_file() {
        // A directory in its place fails both writes: with cpu, then the fallback without it.
        let (tmp, h) = v2_root("cpu memory pids\n");
        let control = tmp.path().join("cgroup.subtree_control");
        fs::remove_file(&control).unwrap();
        fs::create_dir(&control).unwrap();
        let err =
            RunCgroup::create_with(&h, "r", &limits(), &FakeKernel::new(V2_FILES)).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!(
                "failed to write +memory +pids to {}: ",
                control.display()
            )),
            "{msg}"
        );
    }

    #[test]
    fn v2_missing_pids_controller_fails_closed() {
        let (tmp, h) = v2_root("cpu memory\n");
        let err =
            RunCgroup::create_with(&h, "r", &limits(), &FakeKernel::new(V2_FILES)).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "the pids controller is not available in {}",
                tmp.path().join("cgroup.controllers").display()
            )
        );
        assert!(
            !tmp.path().join("band").exists(),
            "nothing created before the check"
        );
    }

    #[test]
    fn a_failed_write_names_the_file_and_removes_the_run_directory() {
        let (tmp, h) = v2_root("memory pids\n");
        let fake = FakeKernel::new(V2_FILES).without("memory.oom.group");
        let err = RunCgroup::create_with(&h, "r", &limits(), &fake).unwrap_err();
        let file = tmp.path().join("band/r/memory.oom.group");
        assert!(
            err.to_string()
                .starts_with(&format!("failed to write 1 to {}: ", file.display())),
            "{err}"
        );
        assert!(!tmp.path().join("band/r").exists(), "rolled back");
        assert!(tmp.path().join("band").exists(), "the shared parent stays");
    }

    #[test]
    fn an_existing_run_directory_is_an_error() {
        let (tmp, h) = v2_root("memory pids\n");
        let fake = FakeKernel::new(V2_FILES);
        RunCgroup::create_with(&h, "r", &limits(), &fake).unwrap();
        let err = RunCgroup::create_with(&h, "r", &limits(), &fake).unwrap_err();
        let dir = tmp.path().join("band/r");
        assert!(
            err.to_string()
                .starts_with(&format!("failed to create {}: ", dir.display())),
            "{err}"
        );
        assert!(dir.exists(), "the first run's directory is left alone");
    }

    #[test]
    fn v1_create_writes_exact_values() {
        let (tmp, h) = v1_roots(true, true);
        let cg =
            RunCgroup::create_with(&h, "run-1", &limits(), &FakeKernel::new(V1_FILES)).unwrap();
        let leaf = |hier: &str| tmp.path().join(hier).join("band/run-1");
        assert_eq!(
            read(leaf("memory").join("memory.limit_in_bytes")),
            "67108864"
        );
        assert_eq!(
            read(leaf("memory").join("memory.memsw.limit_in_bytes")),
            "67108864"
        );
        assert_eq!(read(leaf("memory").join("memory.swappiness")), "0");
        assert_eq!(read(leaf("pids").join("pids.max")), "16");
        assert_eq!(read(leaf("cpu").join("cpu.cfs_period_us")), "100000");
        assert_eq!(read(leaf("cpu").join("cpu.cfs_quota_us")), "50000");
        assert!(leaf("freezer").is_dir());
        assert_eq!(
            cg.procs_files(),
            ["memory", "pids", "cpu", "freezer"]
                .map(|h| leaf(h).join("cgroup.procs"))
                .to_vec()
        );
        assert_eq!(
            cg.join_files(),
            ["memory", "pids", "cpu", "freezer"]
                .map(|h| leaf(h).join("tasks"))
                .to_vec(),
            "v1 joins through `tasks` (single thread, no global lock)"
        );
    }

    #[test]
    fn v1_optional_files_may_be_missing_or_read_only() {
        let (tmp, h) = v1_roots(false, false);
        let fake = FakeKernel::new(V1_FILES)
            .without("memory.memsw.limit_in_bytes")
            .without("memory.swappiness");
        RunCgroup::create_with(&h, "r", &limits(), &fake).unwrap();
        let leaf = tmp.path().join("memory/band/r");
        assert_eq!(read(leaf.join("memory.limit_in_bytes")), "67108864");
        assert!(!leaf.join("memory.swappiness").exists());
    }

    #[test]
    fn v1_missing_pids_max_fails_closed_and_rolls_back_every_hierarchy() {
        let (tmp, h) = v1_roots(true, true);
        let fake = FakeKernel::new(V1_FILES).without("pids.max");
        let err = RunCgroup::create_with(&h, "r", &limits(), &fake).unwrap_err();
        assert!(err.to_string().contains("pids/band/r/pids.max"), "{err}");
        for hier in ["memory", "pids", "cpu", "freezer"] {
            assert!(!tmp.path().join(hier).join("band/r").exists(), "{hier}");
        }
    }

    #[test]
    fn invalid_names_are_rejected() {
        let h = Hierarchy::V2 { root: "/cg".into() };
        for name in ["", ".", "..", ".hidden", "a/b", "../x", "a b", "ü"] {
            let err = RunCgroup::open(&h, name).unwrap_err();
            assert!(
                matches!(err, CgroupError::InvalidName { .. }),
                "{name:?}: {err}"
            );
        }
        assert!(RunCgroup::open(&h, "run-2024.01_x").is_ok());
    }

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
    fn v2_stats() {
        let (tmp, h) = v2_root("memory pids\n");
        let cg = RunCgroup::create_with(&h, "r", &limits(), &FakeKernel::new(V2_FILES)).unwrap();
        let leaf = tmp.path().join("band/r");
        fs::write(leaf.join("memory.peak"), "5242880\n").unwrap();
        fs::write(
            leaf.join("memory.events"),
            "low 0\nhigh 0\nmax 9\noom 2\noom_kill 2\noom_group_kill 1\n",
        )
        .unwrap();
        fs::write(leaf.join("pids.events"), "max 4\n").unwrap();
        assert_eq!(
            cg.stats(),
            CgroupStats {
                peak_memory_bytes: Some(5 * MIB),
                oom_kills: 2,
                pids_max_hits: 4,
            }
        );
        fs::remove_file(leaf.join("memory.peak")).unwrap();
        assert_eq!(cg.stats().peak_memory_bytes, None, "before 5.19");
    }

    #[test]
    fn v1_stats() {
        let (tmp, h) = v1_roots(false, false);
        let cg = RunCgroup::create_with(&h, "r", &limits(), &FakeKernel::new(V1_FILES)).unwrap();
        let memory = tmp.path().join("memory/band/r");
        fs::write(memory.join("memory.max_usage_in_bytes"), "33554432\n").unwrap();
        fs::write(
            memory.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n",
        )
        .unwrap();
        fs::write(tmp.path().join("pids/band/r/pids.events"), "max 11\n").unwrap();
        assert_eq!(
            cg.stats(),
            CgroupStats {
                peak_memory_bytes: Some(32 * MIB),
                oom_kills: 3,
                pids_max_hits: 11,
            }
        );
        // Before 4.13 there is no oom_kill line.
        fs::write(
            memory.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 1\n",
        )
        .unwrap();
        assert_eq!(cg.stats().oom_kills, 1);
    }

    #[test]
    fn stats_of_a_missing_cgroup_are_empty() {
        let (_tmp, h) = v1_roots(false, false);
        let cg = RunCgroup::open(&h, "gone").unwrap();
        assert_eq!(cg.stats(), CgroupStats::default());
    }

    #[test]
    fn ownership_marks_are_per_state_directory() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        write_mark(a.path(), "0123456789abcdef").unwrap();
        write_mark(a.path(), "fedcba9876543210").unwrap();
        fs::write(marks_dir(a.path()).join("not a run"), "").unwrap();
        assert_eq!(
            list_marks(a.path()),
            vec![
                "0123456789abcdef".to_string(),
                "fedcba9876543210".to_string()
            ]
        );
        assert!(
            list_marks(b.path()).is_empty(),
            "another state dir owns nothing"
        );
        remove_mark(a.path(), "0123456789abcdef").unwrap();
        remove_mark(a.path(), "0123456789abcdef").unwrap();
        assert_eq!(list_marks(a.path()), vec!["fedcba9876543210".to_string()]);
        assert!(write_mark(a.path(), "../escape").is_err());
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

    #[test]
    fn list_stale_is_the_union_of_valid_run_directories() {
        let (tmp, h) = v1_roots(false, true);
        let fake = FakeKernel::new(V1_FILES);
        RunCgroup::create_with(&h, "b-run", &limits(), &fake).unwrap();
        RunCgroup::create_with(&h, "a-run", &limits(), &fake).unwrap();
        fs::create_dir(tmp.path().join("freezer/band/only-freezer")).unwrap();
        fs::create_dir(tmp.path().join("pids/band/.hidden")).unwrap();
        fs::write(tmp.path().join("memory/band/not-a-dir"), "").unwrap();
        assert_eq!(
            RunCgroup::list_stale(&h),
            vec!["a-run", "b-run", "only-freezer"]
        );
        let (_tmp, empty) = v2_root("memory pids\n");
        assert_eq!(RunCgroup::list_stale(&empty), Vec::<String>::new());
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
