//! A waiting spare's mark on its uid, and a run's request that such a spare leave (issue 42).
//!
//! A spare sandbox holds one of the pool's uids while it waits for a request. A run that finds
//! every uid leased asks its own warm server to send one of its spares away
//! (`uidpool::WhenFull`), but it cannot reach the spares of another server: the host's warm
//! server and a pod's band-sandboxd each have theirs, and a `band-server run` has no server to
//! ask. Before this, such a run waited 5 s and was refused while idle spares held uids.
//!
//! So a spare marks its uid's host-wide lock file (`uidpool::UID_LOCK_DIR`, root's, `0700`) for
//! as long as it waits ([`mark`]): `idle PID START SERVER PIDNS`, its pid, its start time (the
//! 22nd field of `/proc/PID/stat`), its server's pid and its pid namespace (pids name processes
//! only within one). It clears the mark ([`unmark`]) before it serves a request or goes. A run
//! that finds the pool full sends `SIGUSR2` to one marked spare of another server, in its own pid
//! namespace ([`ask_one_to_leave`]), after each look. It opens a pidfd for the marked pid and
//! checks the start time against the mark once the pidfd is open. A process that ended and whose
//! pid was reused is never signalled, since its start time differs. The spare's wait
//! wakes on the signal. If no connection was handed to it meanwhile, it removes its sandbox and
//! its uid is free. A spare that is already serving ignores the signal.
//!
//! A lease clears whatever mark the previous holder of the uid left (`uidpool::try_acquire`), so
//! a spare killed outright leaves nothing that names it as idle, and its pid names no spare.

use std::io::{self, Write};
use std::path::Path;

use fs_err::OpenOptions;
use fs_err::os::unix::fs::OpenOptionsExt;

use super::uidpool::{POOL_SIZE, uid_lock_path};

/// What a waiting spare writes into its uid's host-wide lock file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mark {
    pub(crate) pid: i32,
    /// The process's start time, in clock ticks since boot (`/proc/PID/stat`, field 22).
    pub(crate) start: u64,
    /// The pid of the warm server the spare belongs to (its parent).
    pub(crate) server: i32,
    /// The inode of the spare's pid namespace (`/proc/self/ns/pid`), in which `pid` and
    /// `server` are numbered.
    pub(crate) pidns: u64,
}

impl Mark {
    pub(crate) fn render(&self) -> String {
        format!(
            "idle {} {} {} {}\n",
            self.pid, self.start, self.server, self.pidns
        )
    }

    /// The mark in `text`, if it is one (an empty file, a torn write: none).
    pub(crate) fn parse(text: &str) -> Option<Mark> {
        let line = text.strip_suffix('\n')?;
        let mut w = line.split(' ');
        if w.next()? != "idle" {
            return None;
        }
        let mark = Mark {
            pid: w.next()?.parse().ok().filter(|p| *p > 0)?,
            start: w.next()?.parse().ok()?,
            server: w.next()?.parse().ok()?,
            pidns: w.next()?.parse().ok()?,
        };
        w.next().is_none().then_some(mark)
    }
}

/// The start time of process `pid` (field 22 of `<proc>/<pid>/stat`), if it is alive.
pub(crate) fn start_time(proc: &Path, pid: i32) -> Option<u64> {
    let stat = fs_err::read_to_string(proc.join(pid.to_string()).join("stat")).ok()?;
    // After the command's `(name)`, which may hold spaces: state is field 3, start time 22.
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The server a process of a warm server belongs to, as marks name it: its parent, the serve
/// loop (for a `band-server run`, its client, which has no spares).
pub(crate) fn server() -> i32 {
    rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get())
}

/// The inode of the pid namespace `<proc>/self/ns/pid` is (`pid:[N]`).
pub(crate) fn pid_namespace(proc: &Path) -> Option<u64> {
    let link = fs_err::read_link(proc.join("self/ns/pid")).ok()?;
    let link = link.to_str()?;
    link.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
}

fn open(dir: &Path, slot: u32) -> io::Result<fs_err::File> {
    OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(uid_lock_path(dir, slot))
}

/// Mark `slot`'s lock file in `dir` as held by this waiting spare, whose server is `server`.
pub(crate) fn mark(dir: &Path, proc: &Path, slot: u32, server: i32) -> io::Result<()> {
    let pid = crate::sys::pid();
    let start = start_time(proc, pid).ok_or_else(|| {
        io::Error::other(format!("no start time for pid {pid} in {}", proc.display()))
    })?;
    let pidns = pid_namespace(proc).ok_or_else(|| {
        io::Error::other(format!("no pid namespace in {}/self/ns", proc.display()))
    })?;
    let mark = Mark {
        pid,
        start,
        server,
        pidns,
    };
    let mut f = open(dir, slot)?;
    f.set_len(0)?;
    f.write_all(mark.render().as_bytes())
}

/// Clear `slot`'s mark in `dir`.
pub(crate) fn unmark(dir: &Path, slot: u32) -> io::Result<()> {
    open(dir, slot)?.set_len(0)
}

/// Ask one waiting spare of a server other than `server` to leave: `SIGUSR2` through a pidfd
/// of the pid a mark in `dir` names, if the mark is of this pid namespace and once the start
/// time in `proc` is the mark's. The pid it signalled, if any.
pub(crate) fn ask_one_to_leave(dir: &Path, proc: &Path, server: i32) -> Option<i32> {
    use rustix::process::{Pid, PidfdFlags, Signal, pidfd_open, pidfd_send_signal};
    let pidns = pid_namespace(proc)?;
    (0..POOL_SIZE).find_map(|slot| {
        let text = fs_err::read_to_string(uid_lock_path(dir, slot)).ok()?;
        let mark = Mark::parse(&text).filter(|m| m.server != server && m.pidns == pidns)?;
        let pidfd = pidfd_open(Pid::from_raw(mark.pid)?, PidfdFlags::empty()).ok()?;
        // The pidfd holds this process whatever happens to the pid from now on: if it is the one
        // that wrote the mark, the signal reaches that spare and nothing else.
        (start_time(proc, mark.pid) == Some(mark.start)).then_some(())?;
        pidfd_send_signal(&pidfd, Signal::USR2).ok()?;
        Some(mark.pid)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Child, Command};

    /// A `sleep`, killed when dropped (a failing test leaves none behind).
    struct Sleeper(Child);

    impl Drop for Sleeper {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    fn sleeper() -> Sleeper {
        Sleeper(Command::new("sleep").arg("600").spawn().unwrap())
    }

    /// A lock dir with `marks` written into the slots' files, the others empty.
    fn lock_dir(marks: &[(u32, String)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for slot in 0..POOL_SIZE {
            let text = marks
                .iter()
                .find(|(s, _)| *s == slot)
                .map_or("", |(_, t)| t.as_str());
            fs_err::write(uid_lock_path(dir.path(), slot), text).unwrap();
        }
        dir
    }

    #[test]
    fn a_mark_reads_back_and_nothing_else_is_one() {
        let m = Mark {
            pid: 41,
            start: 123_456,
            server: 7,
            pidns: 4_026_531_836,
        };
        assert_eq!(m.render(), "idle 41 123456 7 4026531836\n");
        assert_eq!(Mark::parse(&m.render()), Some(m));
        for bad in [
            "",
            "idle 41 123456 7 4026531836",
            "idle 41 123456 7\n",
            "idle 41 123456 7 4026531836 8\n",
            "idle 0 1 7 4026531836\n",
            "idle -3 1 7 4026531836\n",
            "run 41 123456 7 4026531836\n",
            "idle 41 x 7 4026531836\n",
        ] {
            assert_eq!(Mark::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_start_time_is_read_past_a_name_with_spaces_and_parens() {
        let proc = tempfile::tempdir().unwrap();
        fs_err::create_dir_all(proc.path().join("42")).unwrap();
        let fields: Vec<String> = (3..=22).map(|n| n.to_string()).collect();
        let stat = format!("42 (a) b (c) {}\n", fields.join(" "));
        fs_err::write(proc.path().join("42/stat"), stat).unwrap();
        assert_eq!(start_time(proc.path(), 42), Some(22));
        assert_eq!(start_time(proc.path(), 43), None);
    }

    #[test]
    fn marking_and_unmarking_write_the_slots_file() {
        let dir = lock_dir(&[]);
        let proc = Path::new("/proc");
        mark(dir.path(), proc, 5, 99).unwrap();
        let text = fs_err::read_to_string(uid_lock_path(dir.path(), 5)).unwrap();
        let m = Mark::parse(&text).unwrap();
        assert_eq!((m.pid, m.server), (crate::sys::pid(), 99));
        assert_eq!(Some(m.pidns), pid_namespace(proc));
        assert_eq!(start_time(proc, m.pid), Some(m.start));
        unmark(dir.path(), 5).unwrap();
        assert_eq!(
            fs_err::read_to_string(uid_lock_path(dir.path(), 5)).unwrap(),
            ""
        );
        // The file must be there already (the lease made it): nothing is created.
        fs_err::remove_file(uid_lock_path(dir.path(), 6)).unwrap();
        assert!(mark(dir.path(), proc, 6, 99).is_err());
    }

    /// The signal goes to the marked process of another server, and only when it is the process
    /// that wrote the mark (its start time, its pid namespace): a stale mark, a reused pid, a
    /// mark of another pid namespace, a spare of the asking run's own server and an empty file
    /// get nothing.
    #[test]
    fn only_a_live_marked_spare_of_another_server_is_asked() {
        let proc = Path::new("/proc");
        let mut spare = sleeper();
        let mut bystander = sleeper();
        let pid = |c: &Sleeper| i32::try_from(c.0.id()).unwrap();
        let start = |c: &Sleeper| start_time(proc, pid(c)).unwrap();
        let own_server = 4242;
        let ns = pid_namespace(proc).unwrap();
        let dir = lock_dir(&[
            // The bystander's pid with another start time: a pid reused since the mark.
            (
                1,
                Mark {
                    pid: pid(&bystander),
                    start: start(&bystander) + 1,
                    server: 1,
                    pidns: ns,
                }
                .render(),
            ),
            // A spare of the asking run's own server: its server is asked instead.
            (
                2,
                Mark {
                    pid: pid(&bystander),
                    start: start(&bystander),
                    server: own_server,
                    pidns: ns,
                }
                .render(),
            ),
            // The bystander as a spare of a pid namespace other than the asking run's: its pid
            // names another process there.
            (
                4,
                Mark {
                    pid: pid(&bystander),
                    start: start(&bystander),
                    server: 1,
                    pidns: ns + 1,
                }
                .render(),
            ),
            (3, format!("idle 2147483000 1 1 {ns}\n")),
            (
                9,
                Mark {
                    pid: pid(&spare),
                    start: start(&spare),
                    server: 1,
                    pidns: ns,
                }
                .render(),
            ),
        ]);
        assert_eq!(
            ask_one_to_leave(dir.path(), proc, own_server),
            Some(pid(&spare))
        );
        // `sleep` has no handler: SIGUSR2 ends it, so the signal is seen.
        assert_eq!(spare.0.wait().unwrap().signal(), Some(libc::SIGUSR2));
        assert!(
            bystander.0.try_wait().unwrap().is_none(),
            "the bystander was signalled"
        );
        // The spare is gone: its mark names nobody now, so nothing is asked.
        assert_eq!(ask_one_to_leave(dir.path(), proc, own_server), None);
        assert!(
            bystander.0.try_wait().unwrap().is_none(),
            "the bystander was signalled"
        );
    }
}
