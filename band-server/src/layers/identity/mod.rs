//! Identity: the run's uid, leased from a pool of per-run users.

pub mod apply;
pub mod procs;
pub mod uidpool;

use std::collections::BTreeSet;

use self::uidpool::Lease;
use crate::layer::{Built, RunLayer, Teardown, built_any};

/// The identity layer. Its leftovers are the leases of dead servers, which the janitor reads to
/// decide what is live; it walks the other layers from there.
pub struct Identity;

impl RunLayer for Identity {}

impl Built for Lease {
    fn stop(&mut self, t: &mut Teardown) {
        // Belt and braces: nothing of the run's uid may survive, inside the cgroup or not.
        procs::kill_uids(&BTreeSet::from([self.uid]));
        let left = procs::pids_of_uids(&BTreeSet::from([self.uid]));
        if !left.is_empty() {
            t.errors
                .push(format!("processes {left:?} of uid {} survived", self.uid));
            t.processes_dead = false;
        }
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
