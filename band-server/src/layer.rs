//! The shape every sandbox layer has (see [`crate::layers`] for the layers and their list):
//! a pure plan (a function of the layer's folder, called by [`crate::plan::plan_run`]), apply
//! (it returns a [`Built`] handle the run's guard keeps), the teardown of that handle, and the
//! janitor's removal of what a dead run left ([`RunLayer::list_stale`],
//! [`RunLayer::remove_dead_run`], [`RunLayer::remove_stale`]).

use std::any::Any;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What the janitor did, for the log line.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    pub dead_leases: Vec<u32>,
    pub killed: usize,
    pub removed_dirs: Vec<String>,
    pub removed_cgroups: Vec<String>,
    pub removed_tables: Vec<String>,
    pub errors: Vec<String>,
}

impl Report {
    /// Add what another pass did.
    pub fn extend(&mut self, r: Report) {
        self.dead_leases.extend(r.dead_leases);
        self.killed += r.killed;
        self.removed_dirs.extend(r.removed_dirs);
        self.removed_cgroups.extend(r.removed_cgroups);
        self.removed_tables.extend(r.removed_tables);
        self.errors.extend(r.errors);
    }
}

/// The host as the janitor sees it.
pub struct Host<'a> {
    pub state: &'a Path,
    /// The `nft` binary, when installed.
    pub nft: Option<&'a Path>,
    /// Also look for leftover nftables tables (the `janitor` command, not every run).
    pub scan_tables: bool,
}

/// Something a run left on the host: the run it belongs to, and where it is when that is not
/// derived from the run id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stale {
    pub run: String,
    pub path: Option<PathBuf>,
}

impl Stale {
    pub fn run(run: impl Into<String>) -> Stale {
        Stale {
            run: run.into(),
            path: None,
        }
    }
}

/// One layer, as the janitor walks it.
pub trait RunLayer: Sync {
    /// Leftovers of this layer on the host, listed *before* the leases are read (a run holds its
    /// lease before it builds anything, so a run that starts meanwhile is never touched).
    fn list_stale(&self, _host: &Host<'_>, _report: &mut Report) -> Vec<Stale> {
        Vec::new()
    }
    /// Remove what `run`, whose lease was just found dead, left in this layer.
    fn remove_dead_run(&self, _host: &Host<'_>, _run: &str, _report: &mut Report) {}
    /// Remove a listed leftover of a run that no live lease names (`live`).
    fn remove_stale(
        &self,
        _host: &Host<'_>,
        _item: &Stale,
        _live: &BTreeSet<String>,
        _report: &mut Report,
    ) {
    }
}

/// What a run's teardown knows as it goes.
#[derive(Debug)]
pub struct Teardown {
    /// Nothing of the run is alive any more (decided by the stop phase).
    pub processes_dead: bool,
    /// Everything removed so far is gone; otherwise the lease keeps naming the run, and the
    /// janitor finishes the job.
    pub clean: bool,
    pub errors: Vec<String>,
}

/// One layer built for a live run, kept by the run's guard.
pub trait Built: Send {
    /// First phase, in reverse order of building: kill what runs.
    fn stop(&mut self, _t: &mut Teardown) {}
    /// Second phase, in reverse order of building: remove what was built. Called once.
    fn teardown(self: Box<Self>, t: &mut Teardown);
    /// For the run loop, which needs some layers by type.
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// `as_any` / `as_any_mut` for a [`Built`] implementation.
macro_rules! built_any {
    () => {
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
        fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
            self
        }
    };
}
pub(crate) use built_any;
