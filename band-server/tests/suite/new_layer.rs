//! The measure of the layout: a layer is its folder (its plan, its typed apply steps, its
//! janitor passes, its own error name) plus one line in the layer list, one call of each step in
//! `run::apply`, and, when it plans anything, its field of the typed `RunPlan` and one call of its
//! planner in `plan_run` (which a toy defined outside the crate cannot add: this toy plans from
//! the plan's common fields, with a pure planner of its own). A toy layer, defined only here, is
//! planned, applied (its step returns a typed handle on what it built), torn down by the run's
//! guard, swept by the janitor, and names itself in errors the client reads, with nothing but its
//! own code and a list that names it. No root: the toy builds a file in a temp directory.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use band::proto::{Layer, RunResult};
use band_server::common::{Built, Held, Host, Report, Stale, Teardown};
use band_server::config::ServerConfig;
use band_server::error::{SetupError, SetupResult};
use band_server::janitor;
use band_server::layer::{Inputs, RunLayer};
use band_server::layers::LAYERS;
use band_server::plan::{self, RunPlan};

use band_server::run::RunGuard;

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

/// How the toy's errors name it: a layer of its own, which the protocol need not list.
const TOY: Layer = Layer::new("toy");

/// What the guard tears down: a file (the toys of `beside` use it too).
pub(super) struct ToyBuilt(pub(super) PathBuf);

fn toy_dir(state: &Path) -> PathBuf {
    state.join("toy")
}

impl RunLayer for Toy {
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

/// Its apply step: a function of the inputs, keeping what it built in the guard and returning
/// the handle that reads it back (what a later step or the run would take as an argument).
fn toy_apply(inp: &Inputs<'_>, guard: &mut RunGuard) -> SetupResult<Held<ToyBuilt>> {
    let part = &toy_plan(inp.cfg, inp.plan);
    let err = |e: std::io::Error| SetupError::new(TOY, e.to_string());
    fs_err::create_dir_all(toy_dir(&inp.cfg.state_dir)).map_err(err)?;
    fs_err::write(&part.marker, part.uid.to_string()).map_err(err)?;
    Ok(guard.push(ToyBuilt(part.marker.clone())))
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

#[test]
fn a_new_layer_is_one_folder_and_one_line_of_the_list() {
    // The one line: the toy, added to the list.
    let with_toy: Vec<&'static dyn RunLayer> = LAYERS
        .iter()
        .copied()
        .chain([&Toy as &dyn RunLayer])
        .collect();

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

    // Applied (only the toy: the real layers' steps need root), read back through its handle,
    // and torn down by the guard.
    let inputs = Inputs {
        plan: &plan,
        checked: &checked,
        cfg: &cfg,
    };
    let mut guard = RunGuard::default();
    let held = toy_apply(&inputs, &mut guard).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        fs_err::read_to_string(&marker).unwrap_or_else(|e| panic!("{e}")),
        "990"
    );
    assert_eq!(guard.get(&held).map(|b| b.0.clone()), Some(marker.clone()));
    // A handle reads only its own guard.
    assert!(RunGuard::default().get(&held).is_none());
    assert_eq!(guard.teardown(), Vec::<String>::new());
    assert!(!marker.exists(), "the guard did not tear the toy down");
    assert!(
        guard.get(&held).is_none(),
        "a handle read a torn-down layer"
    );

    // Swept by the janitor, walking the list: a dead run's marker goes.
    fs_err::write(&marker, "990").unwrap_or_else(|e| panic!("{e}"));
    let report = janitor::run_with(
        &with_toy,
        state.path(),
        Path::new("/nonexistent/nft"),
        false,
    );
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

#[test]
fn a_new_layers_error_names_it_on_the_wire_without_a_protocol_change() {
    // A run the toy failed: the client reads the toy's own name back, and shows it.
    let failed = SetupError::new(TOY, "the toy's marker failed").with_hint("make room for it");
    let result = RunResult::setup_failed(
        "0123456789abcdef",
        failed.layer.clone(),
        &failed.message,
        failed.hint.clone(),
    );
    let wire = serde_json::to_string(&result).unwrap_or_else(|e| panic!("{e}"));
    assert!(wire.contains(r#""layer":"toy""#), "{wire}");
    let read: RunResult = serde_json::from_str(&wire).unwrap_or_else(|e| panic!("{e}"));
    let error = read.error.unwrap_or_else(|| panic!("no error in {wire}"));
    assert_eq!(error.layer, TOY);
    assert_eq!(error.layer.as_str(), "toy");

    // A name that is not a layer's (a forged result) is refused, not shown.
    for forged in [
        "",
        "Toy",
        "to y",
        "toy\u{1b}[2J",
        &"t".repeat(Layer::MAX_LEN + 1),
    ] {
        let json = wire.replace(
            r#""layer":"toy""#,
            &format!(r#""layer":{}"#, serde_json::json!(forged)),
        );
        assert!(
            serde_json::from_str::<RunResult>(&json).is_err(),
            "a layer named {forged:?} was read"
        );
    }
}
