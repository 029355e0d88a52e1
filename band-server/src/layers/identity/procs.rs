//! The processes of the run's uid: found in `/proc`, killed until none is left. The run's
//! teardown and the janitor both use this, so nothing of a run outlives it.

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

/// The PPid of a `/proc/<pid>/status` text.
pub fn status_ppid(status: &str) -> Option<i32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Pids of the zombies whose parent is `parent`, from the `/proc` at `proc_root`.
pub fn zombie_children(proc_root: &Path, parent: i32) -> Vec<i32> {
    let Ok(rd) = fs::read_dir(proc_root) else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            fs::read_to_string(proc_root.join(pid.to_string()).join("status"))
                .ok()
                .is_some_and(|s| status_is_zombie(&s) && status_ppid(&s) == Some(parent))
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
        assert_eq!(status_ppid("Name:\tx\nPPid:\t42\n"), Some(42));
        assert_eq!(status_ppid(s), None);
    }

    #[test]
    fn zombie_children_of_a_parent() {
        let tmp = tempfile::tempdir().unwrap();
        for (pid, state, ppid) in [
            (10, "Z (zombie)", 7),
            (11, "S (sleeping)", 7),
            (12, "Z (zombie)", 8),
        ] {
            let dir = tmp.path().join(pid.to_string());
            fs::create_dir(&dir).unwrap();
            fs::write(
                dir.join("status"),
                format!("Name:\tbwrap\nState:\t{state}\nPPid:\t{ppid}\n"),
            )
            .unwrap();
        }
        fs::create_dir(tmp.path().join("self")).unwrap();
        assert_eq!(zombie_children(tmp.path(), 7), vec![10]);
        assert!(zombie_children(tmp.path(), 9).is_empty());
    }
}
