//! What differs between cgroup v1 and v2, as one small trait: [`Version`], which [`super::v1`]
//! and [`super::v2`] implement, and [`Hierarchy::version`], the one place that picks.
//!
//! The trait only says *where* and *what*: which hierarchies a run uses, the steps that create
//! its cgroup, the file a child joins through, how to kill all at once or freeze, where the
//! counters are. The code that does things (apply the steps, list pids, kill, remove) is written
//! once, in [`super::run`] and [`super::cgroupfs`], over the trait.
//!
//! Dispatch: [`Hierarchy`] stays plain data (it is a fact read before planning, part of the plan,
//! compared in tests and printed in the plan's snapshot), and [`Hierarchy::version`] borrows it
//! as a `Box<dyn Version>` on each use. A boxed trait rather than a second enum: each version's
//! code then lives in its own file with no `match` on the version outside this one; and rather
//! than keeping the box inside [`super::RunCgroup`], so that the run's cgroup stays plain data too
//! (`Clone`, `Eq`) and the pure planner uses the same trait without a live cgroup. (youki's
//! `libcgroups` does the same with its `CgroupManager` trait and `AnyCgroupManager`.)

use std::path::{Path, PathBuf};

use super::plan::{CgroupLimits, Op};
use super::v1::V1;
use super::v2::V2;
use super::{CgroupStats, Hierarchy};

/// One cgroup version's layout: everything the shared code needs to know about it.
pub(super) trait Version {
    /// The hierarchies a run uses, in a fixed order; the run's cgroup is `<root>/band/<name>` in
    /// each.
    fn roots(&self) -> Vec<&Path>;
    /// The steps that create the run's cgroup `name` with `limits`. Pure.
    fn plan_create(&self, name: &str, limits: &CgroupLimits) -> Vec<Op>;
    /// The file, in each of the run's directories, through which a freshly forked child joins
    /// the cgroup by writing `0`.
    fn join_file(&self) -> &'static str;
    /// The file a write of `1` to kills every process of `name` at once, if the version has one.
    fn kill_file(&self, name: &str) -> Option<PathBuf>;
    /// How to freeze `name` while its pids are signalled one by one, if the version can.
    fn freezer(&self, name: &str) -> Option<Freezer>;
    /// Peak memory, OOM kills and pids-limit hits of `name`. Best effort: an unreadable counter
    /// reads as absent or zero.
    fn stats(&self, name: &str) -> CgroupStats;
}

/// A cgroup's freeze file and the values that freeze and thaw it.
pub(super) struct Freezer {
    pub(super) path: PathBuf,
    pub(super) frozen: &'static str,
    pub(super) thawed: &'static str,
}

impl Hierarchy {
    /// This hierarchy's version: the one place that picks v1 or v2.
    pub(super) fn version(&self) -> Box<dyn Version + '_> {
        match self {
            Hierarchy::V2 { root } => Box::new(V2 { root }),
            Hierarchy::V1 {
                memory,
                pids,
                cpu,
                freezer,
            } => Box::new(V1 {
                memory,
                pids,
                cpu: cpu.as_deref(),
                freezer: freezer.as_deref(),
            }),
        }
    }
}
