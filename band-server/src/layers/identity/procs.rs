//! The processes of a pool uid: found in `/proc`, killed until none is left.
//!
//! This is a sweep of every process on the host, so its cost grows with the host: a run never
//! pays it when its teardown went as planned. A run's processes are found through its cgroup
//! (bubblewrap joins it before it execs, and nothing of the run can leave it) and its relay (the
//! network layer's child, reaped there); the sweep is for when those could not confirm that
//! everything died, for a lease whose run is dead (the janitor), and for `band-server janitor`.
//!
//! The `/proc` root is a parameter, so the unit tests run on a temporary directory, and every
//! sweep is counted per thread ([`sweeps`]), so a test can prove that a path does not sweep.

use std::cell::Cell;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use fs_err as fs;

use crate::sys;

/// The real uid (and effective, saved) of a `/proc/<pid>/status` text.
pub fn status_uids(status: &str) -> Option<[u32; 3]> {
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    let mut it = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok());
    Some([it.next()?, it.next()?, it.next()?])
}

/// Is this `/proc/<pid>/status` a zombie (dead, waiting to be reaped: nothing left to kill)?
pub fn status_is_zombie(status: &str) -> bool {
    status
        .lines()
        .any(|l| l.starts_with("State:") && l.split_whitespace().nth(1) == Some("Z"))
}

/// The host's `/proc`.
pub(crate) const PROC: &str = "/proc";

thread_local! {
    static SWEEPS: Cell<usize> = const { Cell::new(0) };
}

#[cfg(test)]
/// How many `/proc` sweeps this thread has made (a test hook: the count is per thread, so tests
/// running in parallel do not see each other's).
pub(crate) fn sweeps() -> usize {
    SWEEPS.with(Cell::get)
}

/// Pids (in our pid namespace) of live (non-zombie) processes whose real, effective or saved uid
/// is in `uids`: a sweep of the host's `/proc`.
pub fn pids_of_uids(uids: &BTreeSet<u32>) -> Vec<i32> {
    pids_of_uids_in(Path::new(PROC), uids)
}

/// [`pids_of_uids`] in the `/proc` at `proc_root`: reads every process's `status`.
pub(crate) fn pids_of_uids_in(proc_root: &Path, uids: &BTreeSet<u32>) -> Vec<i32> {
    SWEEPS.with(|n| n.set(n.get() + 1));
    let Ok(rd) = fs::read_dir(proc_root) else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            fs::read_to_string(proc_root.join(pid.to_string()).join("status"))
                .ok()
                .is_some_and(|s| {
                    !status_is_zombie(&s)
                        && status_uids(&s).is_some_and(|u| u.iter().any(|x| uids.contains(x)))
                })
        })
        .collect()
}

/// SIGKILL every process of `uids` until none is left (bounded). Never uid 0.
pub(crate) fn kill_uids(uids: &BTreeSet<u32>) -> usize {
    kill_uids_in(Path::new(PROC), uids)
}

/// [`kill_uids`] in the `/proc` at `proc_root`.
pub(crate) fn kill_uids_in(proc_root: &Path, uids: &BTreeSet<u32>) -> usize {
    let uids: BTreeSet<u32> = uids.iter().copied().filter(|u| *u != 0).collect();
    if uids.is_empty() {
        return 0;
    }
    let mut killed = 0;
    for _ in 0..50 {
        let pids = pids_of_uids_in(proc_root, &uids);
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            if sys::kill(pid, libc::SIGKILL).is_ok() {
                killed += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    killed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_from_status() {
        let s = "Name:\tsleep\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t998\t998\t998\t998\nGid:\t997\t997\t997\t997\n";
        assert_eq!(status_uids(s), Some([998, 998, 998]));
        assert_eq!(status_uids("Name: x\n"), None);
        assert!(!status_is_zombie(s));
        assert!(status_is_zombie("Name:\tx\nState:\tZ (zombie)\n"));
    }
}
