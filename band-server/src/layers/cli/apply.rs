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
use crate::common::RunGuard;
use crate::common::handover::OnReport;
use crate::error::{LayerExt, SetupError, SetupResult};
use crate::layer::{Applied, EntryPrograms, EntryStart, Inputs};
use crate::layer::{Phase, RunLayer, Step};

/// CLI programs → report socket: band-shim's execute-only copy. (The programs themselves go on
/// as [`RunPrograms`], handed over as [`EntryPrograms`]: every wrapped name → its program, and
/// each program's descriptor; the jail's input reads them too.)
pub struct ShimCopy(pub PathBuf);

/// The exec folder step of layer's steps ([`crate::layer::RunLayer::steps`]): the program cache's
/// tmpfs (once per boot) and the run's folder in it, empty ([`ExecDir::make`]), so that the run
/// directory, made beside the programs' step, can bind it at `/band` while the programs go in.
pub(crate) fn exec_folder(
    inp: &Inputs<'_>,
    _out: &mut Applied,
    guard: &mut RunGuard,
) -> SetupResult<()> {
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
    guard.push(exec);
    Ok(())
}

/// The programs step of layer's steps ([`crate::layer::RunLayer::steps`]): the execute-only copies, opened as descriptors
/// band-server hands over for allowed calls only (see [`execcache`]), the `#!` scripts' links in
/// `/band/x`, and band-shim's own copy.
pub(crate) fn programs(
    inp: &Inputs<'_>,
    out: &mut Applied,
    guard: &mut RunGuard,
) -> SetupResult<()> {
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
    let exec = guard.get_mut::<ExecDir>().ok_or_else(|| {
        SetupError::new(
            Layer::Cli,
            "internal error: the run's exec folder was not made before its programs",
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
    out.parts.insert(EntryPrograms(Box::new(programs)));
    out.parts.insert(ShimCopy(shim_copy.path));
    Ok(())
}

/// The report socket step of layer's steps ([`crate::layer::RunLayer::steps`]): band-shim's calls, from verified peers
/// only, judged against the run's rules.
pub(crate) fn report_socket(
    inp: &Inputs<'_>,
    out: &mut Applied,
    guard: &mut RunGuard,
) -> SetupResult<()> {
    let plan = inp.plan;
    let lib_trees: Vec<PathBuf> = plan
        .run_dir
        .lib_binds
        .iter()
        .map(|(_, p)| p.clone())
        .collect();
    let exec_plan: &ExecPlan = &plan.exec;
    let ShimCopy(shim) = out.parts.need(Layer::Cli)?;
    let check = PeerCheck::for_shim(shim, plan.identity.uid, &lib_trees)
        .layer(Layer::Cli, "cannot stat band-shim")?;
    let EntryPrograms(programs) = out.parts.take(Layer::Cli)?;
    let programs: RunPrograms = programs.into_any().downcast().map(|p| *p).map_err(|_| {
        SetupError::new(
            Layer::Cli,
            "internal: the run's programs are not the gate's",
        )
    })?;
    guard.push(
        ReportListener::start(
            &exec_plan.root.join("sock"),
            plan.identity.gid,
            check,
            plan.pre.rules.clone(),
            programs,
            out.on_report.clone(),
        )
        .layer(Layer::Cli, "failed to open the report socket")?,
    );
    Ok(())
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
        with_bash: bool,
    ) -> Option<(String, Vec<String>)> {
        super::entry_exec(entry, entry_path, &self.table, with_bash)
    }

    fn fd(&self, name: &str) -> std::io::Result<std::sync::Arc<std::os::fd::OwnedFd>> {
        // A refusal of the program cache reads as it did (its text names the program and bound).
        RunPrograms::fd(self, name).map_err(|e| std::io::Error::other(e.to_string()))
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        self
    }
}

impl RunLayer for Cli {
    fn steps(&self) -> &'static [Step] {
        &[
            Step {
                phase: Phase::ExecFolder,
                what: "the run's exec folder",
                apply: exec_folder,
            },
            Step {
                phase: Phase::Programs,
                what: "the run's programs and band-shim's copy",
                apply: programs,
            },
            Step {
                phase: Phase::Services,
                what: "the report socket",
                apply: report_socket,
            },
        ]
    }
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
