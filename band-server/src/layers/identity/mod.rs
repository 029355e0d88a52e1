//! Identity: the run's uid, leased from a pool of per-run users.

pub(crate) mod apply;
pub(crate) mod idle;
pub mod procs;
pub mod uidpool;

use std::collections::BTreeSet;
use std::path::Path;

use self::uidpool::Lease;
use crate::common::{Built, Teardown, built_any};

/// The identity layer. Its leftovers are the leases of dead servers, which the janitor reads to
/// decide what is live; it walks the other layers from there.
pub(crate) struct Identity;

impl Built for Lease {
    fn stop(&mut self, t: &mut Teardown) {
        stop_uid(Path::new(procs::PROC), self.uid, t);
    }

    fn teardown(self: Box<Self>, t: &mut Teardown) {
        if t.processes_dead && t.clean {
            self.release();
        } else {
            // Keep the run named in the lease file: the janitor finishes the job once this
            // process has exited and the lock is free.
            drop(self);
        }
    }

    built_any!();
}

/// The identity's part of a run's teardown, after every later layer has stopped (reverse order
/// of building). Every process of the run's uid was in the run's cgroup (bubblewrap joins it
/// before it execs, and moving out needs root's write on another cgroup's files) or is the
/// network relay (which the network layer reaps): when those stops confirmed that everything
/// died, there is nothing to look for, and the host's `/proc` is not read. Otherwise sweep the
/// uid in the `/proc` at `proc_root` (kill, then look once more); a survivor keeps the lease.
pub(crate) fn stop_uid(proc_root: &Path, uid: u32, t: &mut Teardown) {
    if t.processes_dead {
        return;
    }
    let uids = BTreeSet::from([uid]);
    procs::kill_uids_in(proc_root, &uids);
    let left = procs::pids_of_uids_in(proc_root, &uids);
    if !left.is_empty() {
        t.errors
            .push(format!("processes {left:?} of uid {uid} survived"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fs_err as fs;

    /// A `/proc` with one live process of `uid`, at a pid above any kernel's `pid_max` (so the
    /// sweep's SIGKILL reaches nothing real).
    fn fake_proc(uid: u32) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("999999999");
        fs::create_dir(&dir).unwrap();
        fs::write(
            dir.join("status"),
            format!("Name:\tsleep\nState:\tS (sleeping)\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n"),
        )
        .unwrap();
        tmp
    }

    #[test]
    fn a_clean_teardown_does_not_sweep_proc() {
        let proc_root = fake_proc(61234);
        let mut t = Teardown {
            processes_dead: true,
            clean: true,
            errors: Vec::new(),
        };
        let before = procs::sweeps();
        stop_uid(proc_root.path(), 61234, &mut t);
        assert_eq!(procs::sweeps(), before, "a clean run read /proc");
        assert!(t.errors.is_empty() && t.processes_dead);
    }

    #[test]
    fn an_unconfirmed_teardown_sweeps_the_uid_and_names_survivors() {
        let proc_root = fake_proc(61234);
        let mut t = Teardown {
            processes_dead: false,
            clean: true,
            errors: Vec::new(),
        };
        let before = procs::sweeps();
        stop_uid(proc_root.path(), 61234, &mut t);
        assert!(procs::sweeps() > before);
        assert!(!t.processes_dead);
        assert_eq!(
            t.errors,
            vec!["processes [999999999] of uid 61234 survived".to_string()]
        );
    }
}
