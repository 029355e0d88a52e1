//! Apply the cgroup's plan in two steps: start making the run's cgroup (with the effective
//! limits, and the files that put bubblewrap in it) on a thread of its own, beside the steps
//! that make the programs and the run directory; then wait for it, just before the spawn.
//!
//! A v1 host has a directory to make and limits to write in each hierarchy (memory, pids, cpu,
//! freezer): about 0.6 ms, which the run no longer waits for in sequence. A run that fails
//! between the two steps drops [`PendingCgroup`], which waits for the thread and removes what
//! it made: nothing is left behind.

use std::collections::BTreeSet;

use super::stale::remove_owned;
use super::{Cgroup, list_marks};
use std::fs::File;
use std::path::Path;
use std::thread::JoinHandle;

use band::proto::Layer;
use fs_err::OpenOptions;

use super::{CgroupPlan, RunCgroup};
use crate::common::{Built, Held, RunGuard, Teardown};
use crate::error::{LayerExt, SetupResult};
use crate::layer::{Inputs, RunLayer};

pub(crate) use crate::common::handover::JoinFiles;

/// The run's cgroup, with its join files.
type Made = (RunCgroup, Vec<File>);

/// The run's cgroup and its join files, being made (`start` → `join`).
pub(crate) struct PendingCgroup(Option<JoinHandle<SetupResult<Made>>>);

impl PendingCgroup {
    fn wait(mut self) -> SetupResult<Made> {
        match self.0.take().map(JoinHandle::join) {
            Some(Ok(made)) => made,
            Some(Err(_)) | None => Err(crate::error::SetupError::new(
                Layer::Cgroup,
                "the cgroup's thread panicked",
            )),
        }
    }
}

impl Drop for PendingCgroup {
    /// A run that fails before `join`: the cgroup the thread made is removed here.
    fn drop(&mut self) {
        if let Some(Ok(Ok((cg, _files)))) = self.0.take().map(JoinHandle::join) {
            remove(cg);
        }
    }
}

/// Remove a cgroup no process was put in, saying what could not be removed (the janitor removes
/// it then: its mark names it).
fn remove(cg: RunCgroup) {
    let mut t = Teardown {
        processes_dead: true,
        clean: true,
        errors: Vec::new(),
    };
    Box::new(cg).teardown(&mut t);
    for e in t.errors {
        crate::say!("band-server: teardown: {e}");
    }
}

/// Make the run's cgroup from `plan` (marked as `state`'s) and open its join files. On failure,
/// nothing of it is left.
fn make(plan: &CgroupPlan, state: &Path) -> SetupResult<Made> {
    let cg = RunCgroup::apply_owned(plan, state)
        .layer(Layer::Cgroup, "failed to create the run's cgroup")?;
    let opened = cg
        .join_files()
        .iter()
        .map(|p| {
            OpenOptions::new()
                .write(true)
                .open(p)
                .map(fs_err::File::into_file)
                .layer(Layer::Cgroup, format!("failed to open {}", p.display()))
        })
        .collect::<SetupResult<Vec<File>>>();
    match opened {
        Ok(files) => Ok((cg, files)),
        Err(e) => {
            remove(cg);
            Err(e)
        }
    }
}

/// The cgroup's first step, before everything else of the run: start making it, on a thread of
/// its own, while the steps up to the spawn run.
pub(crate) fn start(inp: &Inputs<'_>) -> SetupResult<PendingCgroup> {
    let plan: CgroupPlan = inp.plan.cgroup.clone();
    let state = inp.cfg.state_dir.clone();
    let thread = std::thread::Builder::new()
        .name("cgroup".into())
        .spawn(move || make(&plan, &state))
        .layer(
            Layer::Cgroup,
            "failed to start the thread that makes the run's cgroup",
        )?;
    Ok(PendingCgroup(Some(thread)))
}

/// The cgroup's second step, just before the spawn: wait for it; guarded from here on. The run
/// keeps the handle (it kills the cgroup and reads its statistics); the join files go to the
/// spawn.
pub(crate) fn join(
    pending: PendingCgroup,
    guard: &mut RunGuard,
) -> SetupResult<(Held<RunCgroup>, JoinFiles)> {
    let (cg, files) = pending.wait()?;
    Ok((guard.push(cg), JoinFiles(files)))
}

impl RunLayer for Cgroup {
    /// The cgroups this state directory marked (see [`marks_dir`]); a cgroup of another state
    /// directory's server is never listed, so never removed.
    fn list_stale(
        &self,
        host: &crate::common::Host<'_>,
        report: &mut crate::common::Report,
    ) -> Vec<crate::common::Stale> {
        let _ = report;
        list_marks(host.state)
            .into_iter()
            .map(crate::common::Stale::run)
            .collect()
    }

    fn remove_dead_run(
        &self,
        host: &crate::common::Host<'_>,
        run: &str,
        report: &mut crate::common::Report,
    ) {
        remove_owned(host.state, run, report);
    }

    fn remove_stale(
        &self,
        host: &crate::common::Host<'_>,
        item: &crate::common::Stale,
        live: &BTreeSet<String>,
        report: &mut crate::common::Report,
    ) {
        let name = &item.run;
        if live.contains(name)
            || report
                .removed(crate::common::REMOVED_CGROUPS)
                .contains(name)
        {
            return;
        }
        remove_owned(host.state, name, report);
    }
}
