//! What the layers share, below all of them: the run's guard and what it tears down
//! ([`RunGuard`], [`Built`]), what one layer hands another or the run ([`handover`]), the paths
//! several layers name ([`paths`]), and the janitor's view of the host and its report. A layer
//! uses another layer's output only through a type of this module (or, for its apply steps, of
//! [`crate::layer`]).

use std::path::{Path, PathBuf};

pub(crate) mod dirs;
mod guard;
pub(crate) mod handover;
pub(crate) mod paths;

pub(crate) use self::guard::built_any;
pub use self::guard::{Built, Held, RunGuard, Teardown};

/// What the janitor did, for the log line.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    pub(crate) dead_leases: Vec<u32>,
    pub(crate) killed: usize,
    /// What each layer removed, under the name the log line gives it ([`REMOVED_RUN_DIRS`],
    /// [`REMOVED_CGROUPS`], [`REMOVED_TABLES`], or a new layer's own), in the order of the
    /// first removal of each.
    pub(crate) removed: Vec<(&'static str, Vec<String>)>,
    pub(crate) errors: Vec<String>,
}

/// What the filesystem layer removes, in the janitor's log line.
pub(crate) const REMOVED_RUN_DIRS: &str = "run dirs";
/// What the cgroup layer removes, in the janitor's log line.
pub(crate) const REMOVED_CGROUPS: &str = "cgroups";
/// What the network layer removes, in the janitor's log line.
pub(crate) const REMOVED_TABLES: &str = "nftables tables";
/// The kinds the log line always names, in this order (others follow, when there are any).
const LOGGED: [&str; 3] = [REMOVED_RUN_DIRS, REMOVED_CGROUPS, REMOVED_TABLES];

impl Report {
    /// What was removed under `what`.
    pub fn removed(&self, what: &str) -> &[String] {
        self.removed
            .iter()
            .find(|(w, _)| *w == what)
            .map(|(_, items)| items.as_slice())
            .unwrap_or_default()
    }

    /// Note `item`, removed, under `what`.
    pub fn note_removed(&mut self, what: &'static str, item: String) {
        match self.removed.iter_mut().find(|(w, _)| *w == what) {
            Some((_, items)) => items.push(item),
            None => self.removed.push((what, vec![item])),
        }
    }

    /// What the pass did and what it could not do, one line each (none when it found nothing).
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.dead_leases.is_empty()
            || self.removed.iter().any(|(_, items)| !items.is_empty())
            || self.killed > 0
        {
            let [dirs, cgroups, tables] = LOGGED.map(|w| self.removed(w));
            let mut line = format!(
                "band-server: janitor: dead leases {:?}, killed {} process(es), removed run dirs {:?}, cgroups {:?}, nftables tables {:?}",
                self.dead_leases, self.killed, dirs, cgroups, tables
            );
            for (what, items) in &self.removed {
                if !LOGGED.contains(what) {
                    line.push_str(&format!(", {what} {items:?}"));
                }
            }
            out.push(line);
        }
        out.extend(
            self.errors
                .iter()
                .map(|e| format!("band-server: janitor: {e}")),
        );
        out
    }

    /// Add what another pass did.
    pub(crate) fn extend(&mut self, r: Report) {
        self.dead_leases.extend(r.dead_leases);
        self.killed += r.killed;
        for (what, items) in r.removed {
            for item in items {
                self.note_removed(what, item);
            }
        }
        self.errors.extend(r.errors);
    }
}

/// The host as the janitor sees it.
pub struct Host<'a> {
    pub state: &'a Path,
    /// The `nft` binary, when installed.
    pub(crate) nft: Option<&'a Path>,
    /// Also look for leftover nftables tables (the `janitor` command, not every run).
    pub(crate) scan_tables: bool,
}

/// Something a run left on the host: the run it belongs to, and where it is when that is not
/// derived from the run id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stale {
    pub run: String,
    pub(crate) path: Option<PathBuf>,
}

impl Stale {
    pub fn run(run: impl Into<String>) -> Stale {
        Stale {
            run: run.into(),
            path: None,
        }
    }
}
