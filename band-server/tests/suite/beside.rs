//! The steps of a phase that runs beside the others (`Phase::beside`: the run directory): they
//! run on a thread of their own while the later steps up to the spawn run, the spawn's gate opens
//! only when they have all succeeded, they are joined before the steps after the spawn, and
//! what they built is torn down with the run whatever failed. No root: toy layers build files in
//! a temp directory, and a toy spawn step reads the gate as the real sandbox init does.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use band::proto::Layer;
use band_server::error::{SetupError, SetupResult};
use band_server::layer::{Applied, Gate, Inputs, Phase, PlanInputs, RunLayer, Step};
use band_server::plan::{self, RunPlan};
use band_server::run::{self, RunGuard};

use super::new_layer::ToyBuilt;
use super::plan::{checked, facts, identity, request, state_config};

/// Where the toys keep their files: the state folder of the test's config.
struct Dir(PathBuf);

fn dir<'a>(inp: &'a Inputs<'_>) -> SetupResult<&'a Path> {
    Ok(&inp.plan.parts.need::<Dir>(Layer::Filesystem)?.0)
}

fn err(layer: Layer, what: impl std::fmt::Display) -> SetupError {
    SetupError::new(layer, what.to_string())
}

/// Make `name` in the toys' folder, kept by `guard`.
fn make(inp: &Inputs<'_>, guard: &mut RunGuard, name: &str) -> SetupResult<PathBuf> {
    let path = dir(inp)?.join(name);
    fs_err::write(&path, name).map_err(|e| err(Layer::Filesystem, e))?;
    guard.push(ToyBuilt(path.clone()));
    Ok(path)
}

/// Wait (at most 10 s) until `name` exists in the toys' folder.
fn wait_for(inp: &Inputs<'_>, name: &str) -> SetupResult<()> {
    let path = dir(inp)?.join(name);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !path.exists() {
        if Instant::now() > deadline {
            return Err(err(Layer::Filesystem, format!("{name} never came")));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(())
}

/// The run directory's stand-in: with `WAIT`, it waits until the spawn's stand-in has started (so
/// the two run at the same time, or this test times out); it makes `dir`, and fails after it
/// with `FAIL`.
struct ToyDir<const WAIT: bool, const FAIL: bool>;

fn toy_dir<const WAIT: bool, const FAIL: bool>(
    inp: &Inputs<'_>,
    _out: &mut Applied,
    guard: &mut RunGuard,
) -> SetupResult<()> {
    if WAIT {
        wait_for(inp, "spawning")?;
    }
    make(inp, guard, "dir")?;
    if FAIL {
        return Err(err(Layer::Filesystem, "the toy run directory failed"));
    }
    Ok(())
}

impl<const WAIT: bool, const FAIL: bool> RunLayer for ToyDir<WAIT, FAIL> {
    fn steps(&self) -> &'static [Step] {
        &[Step {
            phase: Phase::RunDir,
            what: "the toy run directory",
            apply: toy_dir::<WAIT, FAIL>,
        }]
    }
    fn plan<'a>(&self, inp: &PlanInputs<'a, '_>, plan: &mut RunPlan<'a>) -> SetupResult<()> {
        plan.parts.insert(Dir(inp.cfg.state_dir.clone()));
        Ok(())
    }
}

/// What the spawn's stand-in saw: whether the run directory was there when it started, and what
/// it read from the gate (`None`: the gate closed without a byte).
#[derive(Debug, PartialEq, Eq)]
struct GateSaw {
    dir_before: bool,
    byte: Option<u8>,
}

/// The spawn's stand-in: says it started, then reads the gate as the sandbox init does, and
/// fails as the spawn does when the gate closes without its byte.
struct Spawner;

fn spawner(inp: &Inputs<'_>, out: &mut Applied, guard: &mut RunGuard) -> SetupResult<()> {
    let dir_before = dir(inp)?.join("dir").exists();
    make(inp, guard, "spawning")?;
    let Gate(gate) = out.parts.take(Layer::Process)?;
    let mut byte = [0u8; 1];
    let n = std::fs::File::from(gate)
        .read(&mut byte)
        .map_err(|e| err(Layer::Process, e))?;
    let byte = (n == 1).then_some(byte[0]);
    out.parts.insert(GateSaw { dir_before, byte });
    match byte {
        Some(_) => Ok(()),
        None => Err(err(Layer::Process, "the gate closed: Operation canceled")),
    }
}

/// After the spawn: the run directory must be there (joined before).
struct Late;

fn late(inp: &Inputs<'_>, _out: &mut Applied, guard: &mut RunGuard) -> SetupResult<()> {
    if !dir(inp)?.join("dir").exists() {
        return Err(err(Layer::Filesystem, "no run directory after the spawn"));
    }
    make(inp, guard, "late")?;
    Ok(())
}

impl RunLayer for Spawner {
    fn steps(&self) -> &'static [Step] {
        &[Step {
            phase: Phase::Spawn,
            what: "the toy spawn",
            apply: spawner,
        }]
    }
}

impl RunLayer for Late {
    fn steps(&self) -> &'static [Step] {
        &[Step {
            phase: Phase::Ready,
            what: "the toy late step",
            apply: late,
        }]
    }
}

/// A step of the report socket's phase that fails (beside the run directory).
struct FailingServices;

fn failing(_inp: &Inputs<'_>, _out: &mut Applied, _guard: &mut RunGuard) -> SetupResult<()> {
    Err(err(Layer::Cli, "the toy report socket failed"))
}

impl RunLayer for FailingServices {
    fn steps(&self) -> &'static [Step] {
        &[Step {
            phase: Phase::Services,
            what: "the toy report socket",
            apply: failing,
        }]
    }
}

/// Plan and apply `layers` on a fresh state folder: apply's result, the hand-overs, the guard,
/// and the folder.
fn apply(
    layers: &[&'static dyn RunLayer],
) -> (SetupResult<()>, Applied, RunGuard, tempfile::TempDir) {
    let (state, cfg) = state_config();
    let req = request();
    let checked = checked(&req, &cfg);
    let identity = identity();
    let plan = plan::plan_run_with(layers, &checked, &cfg, &facts(), &identity)
        .unwrap_or_else(|e| panic!("{e}"));
    let inputs = Inputs {
        plan: &plan,
        checked: &checked,
        cfg: &cfg,
    };
    let mut applied = Applied::new(Arc::new(|_: &_| {}), Arc::new(|_| {}));
    let mut guard = RunGuard::default();
    let result = run::apply(layers, &inputs, &mut applied, &mut guard);
    (result, applied, guard, state)
}

fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs_err::read_dir(dir)
        .unwrap_or_else(|e| panic!("{e}"))
        .map(|e| {
            e.unwrap_or_else(|e| panic!("{e}"))
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

#[test]
fn the_run_directory_is_made_beside_the_spawn_which_waits_for_it() {
    let (result, applied, mut guard, state) = apply(&[&ToyDir::<true, false>, &Spawner, &Late]);
    result.unwrap_or_else(|e| panic!("{e}"));
    // The spawn started before the run directory was made, and its gate opened after it.
    assert_eq!(
        applied.parts.get::<GateSaw>(),
        Some(&GateSaw {
            dir_before: false,
            byte: Some(b'1'),
        })
    );
    assert_eq!(files(state.path()), ["dir", "late", "spawning"]);
    // What the run directory's thread built is the run's: the guard removes it.
    assert_eq!(guard.teardown(), Vec::<String>::new());
    assert_eq!(files(state.path()), Vec::<String>::new());
}

#[test]
fn a_run_directory_that_fails_closes_the_gate_and_its_error_is_the_runs() {
    let (result, applied, mut guard, state) = apply(&[&ToyDir::<true, true>, &Spawner, &Late]);
    let e = match result {
        Ok(()) => panic!("the run started without its run directory"),
        Err(e) => e,
    };
    // Its own error, not the spawn's that followed from it.
    assert_eq!(e.layer, Layer::Filesystem);
    assert_eq!(e.message, "the toy run directory failed");
    // The gate closed without its byte: bubblewrap would never have started.
    assert_eq!(
        applied.parts.get::<GateSaw>(),
        Some(&GateSaw {
            dir_before: false,
            byte: None,
        })
    );
    // Nothing after the spawn ran, and what the failed step built before failing is removed.
    assert_eq!(files(state.path()), ["dir", "spawning"]);
    assert_eq!(guard.teardown(), Vec::<String>::new());
    assert_eq!(files(state.path()), Vec::<String>::new());
}

#[test]
fn a_step_that_fails_beside_the_run_directory_still_leaves_it_to_the_guard() {
    // The report socket's stand-in fails while the run directory's thread works: that error is
    // the run's, the thread is joined, and what it made is the guard's to remove.
    let (result, _, mut guard, state) =
        apply(&[&ToyDir::<false, false>, &FailingServices, &Spawner]);
    let e = match result {
        Ok(()) => panic!("the run started"),
        Err(e) => e,
    };
    assert_eq!(e.layer, Layer::Cli, "{}", e.message);
    assert_eq!(e.message, "the toy report socket failed");
    assert_eq!(files(state.path()), ["dir"]);
    assert_eq!(guard.teardown(), Vec::<String>::new());
    assert_eq!(files(state.path()), Vec::<String>::new());
}
