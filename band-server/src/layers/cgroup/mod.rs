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
//!
//! Where things are (the hierarchy roots are parameters throughout, so the tests run on a
//! temporary directory):
//!
//! - `hierarchy.rs`: [`Hierarchy`] and its detection.
//! - `plan.rs`: [`CgroupLimits`], the steps ([`Op`], [`Need`]) and [`plan`]. Pure.
//! - `version.rs`: the `Version` trait, what differs between v1 and v2, and
//!   `Hierarchy::version`, the one place that picks (it says why a borrowed `Box<dyn Version>`).
//! - `v1.rs`, `v2.rs`: the two implementations: create steps, join file, kill and freeze files,
//!   counters.
//! - `cgroupfs.rs`: reads and writes of cgroup files, and the applier of a plan's steps.
//! - `run.rs`: [`RunCgroup`], a live run's cgroup: join files, pids, stats, kill, remove.
//! - `stale.rs`: the janitor's side: ownership marks ([`marks_dir`]), leftovers, their removal.
//! - `error.rs`: [`CgroupError`]. `fake.rs` (tests only): a stand-in for cgroupfs.
//! - here: the layer, [`Cgroup`] (its janitor passes) and the teardown of a [`RunCgroup`].

use fs_err as fs;
use std::io;
use std::time::Duration;

pub(crate) mod apply;
mod cgroupfs;
mod error;
#[cfg(test)]
mod fake;
mod hierarchy;
mod plan;
mod run;
mod stale;
mod v1;
mod v2;
mod version;

pub(crate) use error::CgroupError;
pub use hierarchy::Hierarchy;
pub use plan::CgroupPlan;
pub(crate) use plan::plan_run_cgroup;
pub(crate) use run::CgroupStats;
pub use run::RunCgroup;
pub use stale::list_marks;

/// How long a run's teardown waits for everything in its cgroup to die.
pub(crate) const KILL_DEADLINE: Duration = Duration::from_secs(5);

/// The cgroup layer.
pub(crate) struct Cgroup;

impl crate::common::Built for RunCgroup {
    fn stop(&mut self, t: &mut crate::common::Teardown) {
        if let Err(e) = self.kill_all(KILL_DEADLINE) {
            t.errors.push(format!("cgroup: {e}"));
            t.processes_dead = false;
        }
    }

    fn teardown(self: Box<Self>, t: &mut crate::common::Teardown) {
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

    crate::common::built_any!();
}
