//! The processes of the run's uid: found in `/proc`, killed until none is left. The run's
//! teardown and the janitor both use this, so nothing of a run outlives it.

use std::collections::BTreeSet;
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

/// Pids (in our pid namespace) of live (non-zombie) processes whose real, effective or saved uid
/// is in `uids`.
pub fn pids_of_uids(uids: &BTreeSet<u32>) -> Vec<i32> {
    let Ok(rd) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            fs::read_to_string(format!("/proc/{pid}/status"))
                .ok()
                .is_some_and(|s| {
                    !status_is_zombie(&s)
                        && status_uids(&s).is_some_and(|u| u.iter().any(|x| uids.contains(x)))
                })
        })
        .collect()
}

/// SIGKILL every process of `uids` until none is left (bounded). Never uid 0.
pub fn kill_uids(uids: &BTreeSet<u32>) -> usize {
    let uids: BTreeSet<u32> = uids.iter().copied().filter(|u| *u != 0).collect();
    if uids.is_empty() {
        return 0;
    }
    let mut killed = 0;
    for _ in 0..50 {
        let pids = pids_of_uids(&uids);
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
