//! The measure of the layout: a layer is its folder plus one line in a layer list (and, when it
//! plans anything, its field of the typed `RunPlan` and one call of its planner in `plan_run`,
//! which a toy defined outside the crate cannot add: this toy plans from the plan's common
//! fields in its step, with a pure planner of its own). A toy layer, defined only here, is
//! applied in its phase (its step sorted among the real layers' steps), torn down by the run's
//! guard and swept by the janitor, with nothing but its own code and a list that names it. No
//! root: the toy builds a file in a temp directory.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use band::proto::Layer;
use band_server::common::{Built, Host, Report, Stale, Teardown};
use band_server::config::ServerConfig;
use band_server::error::SetupResult;
use band_server::janitor;
use band_server::layer::{Applied, Inputs, Phase, RunLayer, Step};
use band_server::layers::{self, LAYERS};
use band_server::plan::{self, RunPlan};

use band_server::run::{self, RunGuard};

use super::plan::{checked, facts, identity, request, state_config};

/// The toy layer: one marker file per run under `<state>/toy/`.
struct Toy;

/// What the janitor's log line calls what the toy removes.
const TOY_MARKERS: &str = "toy markers";

/// Its part of the plan.
#[derive(Debug)]
struct ToyPlan {
    marker: PathBuf,
    uid: u32,
}

/// Its pure planner: a function of the config and the plan's common fields.
fn toy_plan(cfg: &ServerConfig, plan: &RunPlan<'_>) -> ToyPlan {
    ToyPlan {
        marker: toy_dir(&cfg.state_dir).join(&plan.run_id),
        uid: plan.identity.uid,
    }
}

/// A hand-over no layer makes (for the step that needs it).
struct Unmade;

/// What its step hands on.
struct ToyBuiltAt(PathBuf);

/// What the guard tears down: a file (the toys of `beside` use it too).
pub(super) struct ToyBuilt(pub(super) PathBuf);

fn toy_dir(state: &Path) -> PathBuf {
    state.join("toy")
}

impl RunLayer for Toy {
    fn steps(&self) -> &'static [Step] {
        &[Step {
            phase: Phase::RunDir,
            what: "the toy's marker",
            apply: toy_apply,
        }]
    }
    fn list_stale(&self, host: &Host<'_>, _report: &mut Report) -> Vec<Stale> {
        fs_err::read_dir(toy_dir(host.state))
            .map(|d| {
                d.filter_map(Result::ok)
                    .map(|e| Stale::run(e.file_name().to_string_lossy()))
                    .collect()
            })
            .unwrap_or_default()
    }
    fn remove_stale(
        &self,
        host: &Host<'_>,
        item: &Stale,
        live: &BTreeSet<String>,
        report: &mut Report,
    ) {
        if !live.contains(&item.run)
            && fs_err::remove_file(toy_dir(host.state).join(&item.run)).is_ok()
        {
            report.note_removed(TOY_MARKERS, item.run.clone());
        }
    }
}

fn toy_apply(inp: &Inputs<'_>, out: &mut Applied, guard: &mut RunGuard) -> SetupResult<()> {
    let part = &toy_plan(inp.cfg, inp.plan);
    let err =
        |e: std::io::Error| band_server::error::SetupError::new(Layer::Filesystem, e.to_string());
    fs_err::create_dir_all(toy_dir(&inp.cfg.state_dir)).map_err(err)?;
    fs_err::write(&part.marker, part.uid.to_string()).map_err(err)?;
    guard.push(ToyBuilt(part.marker.clone()));
    out.parts.insert(ToyBuiltAt(part.marker.clone()));
    Ok(())
}

impl Built for ToyBuilt {
    fn teardown(self: Box<Self>, t: &mut Teardown) {
        if let Err(e) = fs_err::remove_file(&self.0) {
            t.errors.push(e.to_string());
        }
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

fn short(l: &dyn RunLayer) -> &'static str {
    let name = l.name();
    name.rsplit("::").next().unwrap_or(name)
}

#[test]
fn a_new_layer_is_one_folder_and_one_line_of_the_list() {
    // The one line: the toy, added to the list.
    let with_toy: Vec<&'static dyn RunLayer> = LAYERS
        .iter()
        .copied()
        .chain([&Toy as &dyn RunLayer])
        .collect();

    // Applied in its phase: right after the run directory (beside the programs and the steps
    // after them), before the programs.
    let order: Vec<String> = layers::apply_order(&with_toy)
        .iter()
        .map(|(l, s)| format!("{}: {}", short(*l), s.what))
        .collect();
    assert_eq!(
        order,
        [
            "Cgroup: the run's cgroup with its limits and join files, on a thread of its own",
            "Net: the nftables table, and the network namespace with its relay started (with allow.net)",
            "Cli: the run's exec folder",
            "Fs: the run directory",
            "Toy: the toy's marker",
            "Cli: the run's programs and band-shim's copy",
            "Process: the memfd guard and the jail's input",
            "Cli: the report socket",
            "Cgroup: the run's cgroup waited for",
            "Process: bubblewrap, spawned in the cgroup as the run's uid",
            "Net: the relay waited for, and the DNS stub (with allow.net)",
            "Fs: the wrappers in /usr/bin",
        ]
    );

    // Planned: its planner reads the plan's common fields.
    let (state, cfg) = state_config();
    let req = request();
    let checked = checked(&req, &cfg);
    let identity = identity();
    let facts = facts();
    let plan = plan::plan_run(&checked, &cfg, &facts, &identity).unwrap_or_else(|e| panic!("{e}"));
    let part = toy_plan(&cfg, &plan);
    let marker = state.path().join("toy/0123456789abcdef");
    assert_eq!(part.marker, marker);
    assert_eq!(part.uid, 990);

    // Applied (only the toy: the real layers' steps need root) and torn down by the guard.
    let inputs = Inputs {
        plan: &plan,
        checked: &checked,
        cfg: &cfg,
    };
    let mut applied = Applied::new(Arc::new(|_: &_| {}), Arc::new(|_| {}));
    let mut guard = RunGuard::default();
    run::apply(&[&Toy], &inputs, &mut applied, &mut guard).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        fs_err::read_to_string(&marker).unwrap_or_else(|e| panic!("{e}")),
        "990"
    );
    assert_eq!(
        applied.parts.get::<ToyBuiltAt>().map(|b| b.0.clone()),
        Some(marker.clone())
    );
    assert_eq!(guard.teardown(), Vec::<String>::new());
    assert!(!marker.exists(), "the guard did not tear the toy down");

    // Swept by the janitor: a dead run's marker goes.
    fs_err::write(&marker, "990").unwrap_or_else(|e| panic!("{e}"));
    let report = janitor::run_with(&[&Toy], state.path(), Path::new("/nonexistent/nft"), false);
    assert_eq!(report.removed(TOY_MARKERS), ["0123456789abcdef"]);
    assert!(
        report.lines()[0].ends_with(", toy markers [\"0123456789abcdef\"]"),
        "{:?}",
        report.lines()
    );
    assert!(
        !marker.exists(),
        "the janitor did not sweep the toy's leftover"
    );
}

/// A toy whose step needs a hand-over that no listed layer makes.
struct NeedsUnmade;

impl RunLayer for NeedsUnmade {
    fn steps(&self) -> &'static [Step] {
        &[Step {
            phase: Phase::RunDir,
            what: "the toy's marker, from a hand-over",
            apply: needs_unmade,
        }]
    }
}

fn needs_unmade(inp: &Inputs<'_>, out: &mut Applied, guard: &mut RunGuard) -> SetupResult<()> {
    let Unmade = out.parts.take(Layer::Filesystem)?;
    toy_apply(inp, out, guard)
}

#[test]
fn a_layer_whose_hand_over_is_missing_does_not_start() {
    // The toy's step without the hand-over it needs (no listed layer makes it): the run does not
    // start, and the error names it. (A part of the plan cannot be missing: the plan is typed.)
    let (state, cfg) = state_config();
    let req = request();
    let checked = checked(&req, &cfg);
    let identity = identity();
    let plan =
        plan::plan_run(&checked, &cfg, &facts(), &identity).unwrap_or_else(|e| panic!("{e}"));
    let inputs = Inputs {
        plan: &plan,
        checked: &checked,
        cfg: &cfg,
    };
    let mut applied = Applied::new(Arc::new(|_: &_| {}), Arc::new(|_| {}));
    let mut guard = RunGuard::default();
    let err = match run::apply(&[&NeedsUnmade], &inputs, &mut applied, &mut guard) {
        Ok(()) => panic!("the toy applied without its hand-over"),
        Err(e) => e,
    };
    assert_eq!(err.layer, Layer::Filesystem);
    assert!(
        err.message
            .contains("Unmade was not set up before this step"),
        "{}",
        err.message
    );
    assert!(!toy_dir(state.path()).exists());
}
