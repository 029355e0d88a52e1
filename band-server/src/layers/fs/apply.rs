//! Apply the filesystem's plan: create the run directory (a size-limited tmpfs) from its
//! operations.

use std::collections::BTreeSet;

use super::workdir::RunDir;
use super::{Fs, maskcache, workdir};
use crate::common::{Host, REMOVED_RUN_DIRS, Report, RunGuard, Stale};
use crate::error::SetupResult;
use crate::layer::{Inputs, RunLayer};

/// The run directory (made beside the programs and the spawn, whose bubblewrap waits for it):
/// its root on the host, which the run collects from.
pub(crate) fn run_dir(inp: &Inputs<'_>, guard: &mut RunGuard) -> SetupResult<std::path::PathBuf> {
    let dir = RunDir::create(&inp.plan.run_dir)?;
    let root = dir.root.clone();
    guard.push(dir);
    Ok(root)
}

/// The late step, after the spawn: the wrappers in `/usr/bin`, made while bubblewrap builds the
/// sandbox, before the jail's input is written.
pub(crate) fn wrappers(inp: &Inputs<'_>) -> SetupResult<()> {
    RunDir::finish(&inp.plan.run_dir)
}

/// The last step before the jail's input: once bubblewrap has built the sandbox, the host's
/// entries of the run's `/proc` covered from outside ([`super::proc_cover`]). A sandbox that
/// never got built (its status pipe ended) is left to the run, which says why from bubblewrap's
/// stderr.
pub(crate) fn proc_covers(
    inp: &Inputs<'_>,
    spawned: &crate::common::handover::Spawned,
    guard: &RunGuard,
) -> SetupResult<()> {
    if !super::proc_cover::await_ready(&spawned.status_r)? {
        return Ok(());
    }
    let Some(bwrap) = guard.child.as_ref().map(std::process::Child::id) else {
        return Err(crate::error::SetupError::new(
            band::proto::Layer::Filesystem,
            "the sandbox has no process to cover /proc in",
        ));
    };
    super::proc_cover::cover(
        std::path::Path::new(super::procmask::HOST_PROC),
        bwrap,
        &inp.plan.process.sandbox.proc_masks,
    )
}

impl RunLayer for Fs {
    fn list_stale(&self, host: &Host<'_>, _report: &mut Report) -> Vec<Stale> {
        // Run directories are listed before leases are read: a server writes its lease before it
        // creates its directory, so any directory seen here has its lease content by the time
        // the janitor reads it.
        let dirs = fs_err::read_dir(workdir::runs_dir(host.state))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter_map(|e| e.file_name().into_string().ok())
                    .map(Stale::run)
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        let builds = maskcache::builds(host.state)
            .into_iter()
            .map(|(path, run)| Stale {
                run,
                path: Some(path),
            });
        dirs.into_iter().chain(builds).collect()
    }

    fn remove_dead_run(&self, host: &Host<'_>, run: &str, report: &mut Report) {
        let dir = workdir::runs_dir(host.state).join(run);
        if dir.exists() {
            match workdir::remove_stale(&dir) {
                Ok(true) => report.note_removed(REMOVED_RUN_DIRS, run.to_string()),
                Ok(false) => {}
                Err(e) => report.errors.push(format!("{}: {e}", dir.display())),
            }
        }
    }

    fn remove_stale(
        &self,
        host: &Host<'_>,
        item: &Stale,
        live: &BTreeSet<String>,
        report: &mut Report,
    ) {
        match &item.path {
            // Whiteout layers a dead run was building (a live run's build is its own business).
            // Gone since the listing: that run ended and moved or removed it itself.
            Some(path) => {
                if !live.contains(&item.run)
                    && let Err(e) = fs_err::remove_dir_all(path)
                    && e.kind() != std::io::ErrorKind::NotFound
                {
                    report.errors.push(e.to_string());
                }
            }
            None => {
                let d = &item.run;
                if live.contains(d) || report.removed(REMOVED_RUN_DIRS).contains(d) {
                    return;
                }
                let p = workdir::runs_dir(host.state).join(d);
                // Listed before the leases were read: a run that ended in between removed its
                // directory itself, and is not reported as a leftover.
                match workdir::remove_stale(&p) {
                    Ok(true) => report.note_removed(REMOVED_RUN_DIRS, d.clone()),
                    Ok(false) => {}
                    Err(e) => report.errors.push(format!("{}: {e}", p.display())),
                }
            }
        }
    }
}
