//! Apply the CLI gate's plan, in three steps: the run's exec folder (before the run directory,
//! which binds it at `/band`), the run's programs in it (before the jail's input, which names
//! them), then the report socket (in that folder beside band-shim).

use std::collections::BTreeSet;

use super::Cli;
use crate::common::{Host, Report, Stale};
use std::path::PathBuf;

use band::proto::Layer;

use super::ExecPlan;
use super::execcache::{self, ExecDir, RunPrograms};
use super::reports::{PeerCheck, ReportListener};
use crate::common::handover::OnReport;
use crate::common::{Held, RunGuard};
use crate::error::{LayerExt, SetupError, SetupResult};
use crate::layer::{EntryStart, Inputs, RunLayer};

/// What the programs step returns: the run's programs (every wrapped name → its program, and each
/// program's descriptor; the jail's input reads them as [`EntryStart`], the report socket judges
/// calls against them) and band-shim's execute-only copy (the report socket checks its peers
/// against it).
pub(crate) struct Programs {
    pub(crate) table: RunPrograms,
    pub(crate) shim: PathBuf,
}

/// The exec folder step: the program cache's tmpfs (once per boot) and the run's folder in it,
/// empty ([`ExecDir::make`]), so that the run directory, made beside the programs' step, can bind
/// it at `/band` while the programs go in.
pub(crate) fn exec_folder(inp: &Inputs<'_>, guard: &mut RunGuard) -> SetupResult<Held<ExecDir>> {
    let exec_plan: &ExecPlan = &inp.plan.exec;
    execcache::mount_cache(&inp.cfg.state_dir)
        .layer(Layer::Cli, "failed to prepare the program cache")?;
    let exec = ExecDir::make(
        &exec_plan.state,
        &inp.plan.run_id,
        inp.cfg.program_cache,
        run_owner(inp),
    )
    .layer(Layer::Cli, "failed to make the run's exec folder")?;
    Ok(guard.push(exec))
}

/// The programs step, into the exec folder: the execute-only copies, opened as descriptors
/// band-server hands over for allowed calls only (see [`execcache`]), the `#!` scripts' links in
/// `/band/x`, and band-shim's own copy.
pub(crate) fn programs(
    inp: &Inputs<'_>,
    exec: &Held<ExecDir>,
    guard: &mut RunGuard,
) -> SetupResult<Programs> {
    let plan = inp.plan;
    let exec_plan: &ExecPlan = &plan.exec;
    // `#!` commands in the library trees or a runtime tree run at their host paths (they are
    // there, read-only): `soffice` finds `oosplash` beside it.
    let trees: Vec<PathBuf> = exec_plan
        .runtime
        .iter()
        .map(|t| t.root.clone())
        .chain(crate::common::paths::LIB_ROOTS.iter().map(PathBuf::from))
        .collect();
    let exec = guard.get_mut(exec).ok_or_else(|| {
        SetupError::new(
            Layer::Cli,
            "internal: the run's exec folder was torn down before its programs",
        )
    })?;
    // The skill's own programs first, charged to the user and the skill, before any sandbox
    // exists: a run that asks for more than its share fails here, alone.
    let owner = run_owner(inp);
    let bundled = plan
        .pre
        .cli
        .bundled
        .iter()
        .map(|b| {
            let data = inp
                .checked
                .bundle
                .iter()
                .find(|f| f.path == b.path)
                .map(|f| f.data.as_slice())
                .ok_or_else(|| {
                    SetupError::new(
                        Layer::Cli,
                        format!(
                            "allow.cli names `./{}`, which is not a file of the skill",
                            b.path
                        ),
                    )
                })?;
            Ok((b, format!("./{}", b.path), data))
        })
        .collect::<SetupResult<Vec<_>>>()?;
    let copies: Vec<execcache::BundledCopy<'_>> = bundled
        .iter()
        .map(|(b, shown, data)| execcache::BundledCopy {
            name: &b.name,
            shown,
            sha256: &b.sha256,
            data,
        })
        .collect();
    exec.admit_bundled(&owner, &copies)
        .map_err(|e| admit_error("failed to cache the skill's programs", &e))?;
    exec.populate(&exec_plan.programs, &trees, &exec_plan.layouts)
        .map_err(|e| admit_error("failed to lay out the run's programs", &e))?;
    let mut programs = exec.programs.clone();
    for (name, argv0) in &exec_plan.argv0 {
        if let Some(p) = programs.table.get_mut(name) {
            p.argv0 = Some(argv0.clone());
        }
    }
    let shim_copy = exec
        .cached_copy(execcache::SHIM_NAME, &plan.pre.helpers.shim)
        .map_err(|e| e.to_string())
        .and_then(|c| {
            exec.link_helpers(&c.path, &plan.pre.helpers.jail)
                .map(|()| c)
                .map_err(|e| e.to_string())
        });
    let shim_copy = shim_copy.layer(Layer::Cli, "failed to cache band-shim")?;
    if shim_copy.path != exec_plan.shim {
        return Err(SetupError::new(
            Layer::Cli,
            format!(
                "band-shim changed while the run was set up ({} is not {})",
                shim_copy.path.display(),
                exec_plan.shim.display()
            ),
        ));
    }
    Ok(Programs {
        table: programs,
        shim: shim_copy.path,
    })
}

/// The report socket step (in the run's exec folder, beside band-shim): band-shim's calls, from
/// verified peers only, judged against the run's rules. The run keeps the handle (it stops the
/// listener when the run ends).
pub(crate) fn report_socket(
    inp: &Inputs<'_>,
    programs: Programs,
    on_report: OnReport,
    guard: &mut RunGuard,
) -> SetupResult<Held<ReportListener>> {
    let plan = inp.plan;
    let lib_trees: Vec<PathBuf> = plan
        .run_dir
        .lib_binds
        .iter()
        .map(|(_, p)| p.clone())
        .collect();
    let exec_plan: &ExecPlan = &plan.exec;
    let check = PeerCheck::for_shim(&programs.shim, plan.identity.uid, &lib_trees)
        .layer(Layer::Cli, "cannot stat band-shim")?;
    let listener = ReportListener::start(
        &exec_plan.root.join("sock"),
        plan.identity.gid,
        check,
        plan.pre.rules.clone(),
        programs.table,
        on_report,
    )
    .layer(Layer::Cli, "failed to open the report socket")?;
    Ok(guard.push(listener))
}

/// The user and skill a run is for, whom its charged entries in the program cache are charged
/// to ([`execcache::requesting_uid`]).
fn run_owner(inp: &Inputs<'_>) -> execcache::Owner {
    execcache::Owner {
        uid: execcache::requesting_uid(),
        skill: inp.checked.req.skill.clone(),
    }
}

/// A program the cache did not take, as the run's CLI-layer error: what failed, why, and for a
/// refusal the hint.
fn admit_error(what: &str, e: &execcache::AdmitError) -> SetupError {
    let err = SetupError::new(Layer::Cli, format!("{what}: {e}"));
    match e.hint() {
        Some(h) => err.with_hint(h),
        None => err,
    }
}

/// How the jail starts the entry, as the gate decides it from the run's programs and rules.
impl EntryStart for RunPrograms {
    fn band_exec(
        &self,
        inp: &Inputs<'_>,
        entry: &[u8],
        on_report: &OnReport,
    ) -> Option<(String, Vec<String>)> {
        let argv = super::shim::band_exec_argv(entry)?;
        let r = super::shim::resolve_call(&self.table, &argv).ok()?;
        let call = super::shim::decide_with(&inp.plan.pre.rules, &r.judged, r.needs_rule);
        if !call.allowed {
            return None;
        }
        on_report(super::reports::Report::Call(call));
        Some((r.program, r.argv.unwrap_or(argv)))
    }

    fn interpreter(
        &self,
        entry: &[u8],
        entry_path: &str,
        launch: &band::launch::Launch,
    ) -> Option<(String, Vec<String>)> {
        super::entry_exec(entry, entry_path, &self.table, launch)
    }

    fn fd(&self, name: &str) -> std::io::Result<std::sync::Arc<std::os::fd::OwnedFd>> {
        // A refusal of the program cache reads as it did (its text names the program and bound).
        RunPrograms::fd(self, name).map_err(|e| std::io::Error::other(e.to_string()))
    }
}

impl RunLayer for Cli {
    fn list_stale(&self, host: &Host<'_>, _report: &mut Report) -> Vec<Stale> {
        execcache::run_dirs(host.state)
            .into_iter()
            .map(Stale::run)
            .collect()
    }

    fn remove_stale(
        &self,
        host: &Host<'_>,
        item: &Stale,
        live: &BTreeSet<String>,
        report: &mut Report,
    ) {
        if !live.contains(&item.run)
            && let Err(e) = execcache::remove_stale(host.state, &item.run)
        {
            report.errors.push(e.to_string());
        }
    }
}
