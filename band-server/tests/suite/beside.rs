//! The steps of a phase that runs beside the others (`Phase::beside`: the run directory): they
//! run on a thread of their own while the later steps up to the spawn run, the spawn's gate opens
//! only when they have all succeeded, they are joined before the steps after the spawn, and
//! what they built is torn down with the run whatever failed. No root: toy layers build files in
//! a temp directory, and a toy spawn step reads the gate as the real sandbox init does; one test
//! (root) forks the real sandbox init (`sys::PreExec`) to read it.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use band::proto::Layer;
use band_server::error::{SetupError, SetupResult};
use band_server::layer::{Applied, Gate, Inputs, Phase, RunLayer, Step};
use band_server::plan;
use band_server::run::{self, RunGuard};
use band_server::sys::{self, GATE_OPEN};

use super::helpers::privileged;
use super::new_layer::ToyBuilt;
use super::plan::{checked, facts, identity, request, state_config};

/// Where the toys keep their files: the state folder of the test's config.
fn dir<'a>(inp: &'a Inputs<'_>) -> SetupResult<&'a Path> {
    Ok(&inp.cfg.state_dir)
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
/// the two run at the same time, or this test times out), and `WAIT_MS` more; it makes `dir`,
/// and fails after it with `FAIL`.
struct ToyDir<const WAIT: bool, const FAIL: bool, const WAIT_MS: u64 = 0>;

fn toy_dir<const WAIT: bool, const FAIL: bool, const WAIT_MS: u64>(
    inp: &Inputs<'_>,
    _out: &mut Applied,
    guard: &mut RunGuard,
) -> SetupResult<()> {
    if WAIT {
        wait_for(inp, "spawning")?;
        std::thread::sleep(Duration::from_millis(WAIT_MS));
    }
    make(inp, guard, "dir")?;
    if FAIL {
        return Err(err(Layer::Filesystem, "the toy run directory failed"));
    }
    Ok(())
}

impl<const WAIT: bool, const FAIL: bool, const WAIT_MS: u64> RunLayer
    for ToyDir<WAIT, FAIL, WAIT_MS>
{
    fn steps(&self) -> &'static [Step] {
        &[Step {
            phase: Phase::RunDir,
            what: "the toy run directory",
            apply: toy_dir::<WAIT, FAIL, WAIT_MS>,
        }]
    }
}

/// What the spawn's stand-in saw: whether the run directory was there when it started, and
/// whether the gate opened.
#[derive(Debug, PartialEq, Eq)]
struct GateSaw {
    dir_before: bool,
    opened: bool,
}

/// Keep what a spawn's stand-in saw; fail as the spawn does when the gate did not open.
fn gate_saw(out: &mut Applied, dir_before: bool, opened: bool) -> SetupResult<()> {
    out.parts.insert(GateSaw { dir_before, opened });
    if opened {
        Ok(())
    } else {
        Err(err(Layer::Process, "the gate shut: Operation canceled"))
    }
}

/// The spawn's stand-in: says it started, then reads the gate as the sandbox init does, and
/// fails as the spawn does when the gate does not open.
struct Spawner;

fn spawner(inp: &Inputs<'_>, out: &mut Applied, guard: &mut RunGuard) -> SetupResult<()> {
    let dir_before = dir(inp)?.join("dir").exists();
    make(inp, guard, "spawning")?;
    let Gate(gate) = out.parts.take(Layer::Process)?;
    let mut byte = [0u8; 1];
    let n = std::fs::File::from(gate)
        .read(&mut byte)
        .map_err(|e| err(Layer::Process, e))?;
    let opened = n == 1 && byte[0] == GATE_OPEN;
    gate_saw(out, dir_before, opened)
}

/// The spawn's stand-in with the real sandbox init: `sys::PreExec` forks it (it holds a copy of
/// every descriptor band-server had at the fork, the gate's write end among them while the run
/// directory's thread holds it), and it reads the gate, as nobody, before its exec of
/// `/bin/true`. Root only.
struct ForkingSpawner;

fn forking_spawner(inp: &Inputs<'_>, out: &mut Applied, guard: &mut RunGuard) -> SetupResult<()> {
    let dir_before = dir(inp)?.join("dir").exists();
    let Gate(gate) = out.parts.take(Layer::Process)?;
    let mut cmd = std::process::Command::new("/bin/true");
    sys::PreExec {
        cgroup_join: Vec::new(),
        fds: Vec::new(),
        uid: 65534,
        gid: 65534,
        memfd_noexec: None,
        netns: None,
        gate: Some(gate.as_raw_fd()),
    }
    .install(&mut cmd);
    make(inp, guard, "spawning")?;
    let spawned = cmd.spawn();
    drop(gate);
    let opened = match spawned {
        Ok(mut child) => child.wait().map_err(|e| err(Layer::Process, e))?.success(),
        Err(e) if e.raw_os_error() == Some(libc::ECANCELED) => false,
        Err(e) => return Err(err(Layer::Process, e)),
    };
    gate_saw(out, dir_before, opened)
}

impl RunLayer for ForkingSpawner {
    fn steps(&self) -> &'static [Step] {
        &[Step {
            phase: Phase::Spawn,
            what: "the toy spawn that forks",
            apply: forking_spawner,
        }]
    }
}

/// `f()`, or the whole test binary aborts after `secs` seconds with `what`: a hang is a failure
/// that names itself, not a CI run that never ends.
fn within<T>(secs: u64, what: &'static str, f: impl FnOnce() -> T) -> T {
    let _watch = band_test::watchdog(Duration::from_secs(secs), move || {
        eprintln!("{what}: did not finish within {secs} s");
        std::process::abort();
    });
    f()
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

/// What [`apply`] gives back.
type Applied4 = (SetupResult<()>, Applied, RunGuard, tempfile::TempDir);

/// Plan and apply `layers` on a fresh state folder: apply's result, the hand-overs, the guard,
/// and the folder.
fn apply(layers: &[&'static dyn RunLayer]) -> Applied4 {
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

/// The run directory was made and the gate opened after the spawn had started: every step ran,
/// and what they built (the run directory's thread's too) is the run's, which the guard removes.
fn assert_opened((result, applied, mut guard, state): Applied4) {
    result.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        applied.parts.get::<GateSaw>(),
        Some(&GateSaw {
            dir_before: false,
            opened: true,
        })
    );
    assert_eq!(files(state.path()), ["dir", "late", "spawning"]);
    assert_eq!(guard.teardown(), Vec::<String>::new());
    assert_eq!(files(state.path()), Vec::<String>::new());
}

/// The run directory failed after the spawn had started: the run's error is its own, not the
/// spawn's that followed from it; the gate shut (bubblewrap would never have started); nothing
/// after the spawn ran, and what the failed step built before failing is removed.
fn assert_shut((result, applied, mut guard, state): Applied4) {
    let e = match result {
        Ok(()) => panic!("the run started without its run directory"),
        Err(e) => e,
    };
    assert_eq!(e.layer, Layer::Filesystem, "{}", e.message);
    assert_eq!(e.message, "the toy run directory failed");
    assert_eq!(
        applied.parts.get::<GateSaw>(),
        Some(&GateSaw {
            dir_before: false,
            opened: false,
        })
    );
    assert_eq!(files(state.path()), ["dir", "spawning"]);
    assert_eq!(guard.teardown(), Vec::<String>::new());
    assert_eq!(files(state.path()), Vec::<String>::new());
}

#[test]
fn the_run_directory_is_made_beside_the_spawn_which_waits_for_it() {
    assert_opened(apply(&[&ToyDir::<true, false>, &Spawner, &Late]));
}

#[test]
fn a_run_directory_that_fails_closes_the_gate_and_its_error_is_the_runs() {
    assert_shut(apply(&[&ToyDir::<true, true>, &Spawner, &Late]));
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

/// The run directory fails after the real sandbox init has forked (holding a copy of the gate's
/// write end, so the pipe cannot close while it reads): the gate still shuts, the spawn fails
/// with the sandbox init's "Operation canceled", and the run's error is the run directory's. Its
/// way before: the sandbox init waited for ever on a pipe it held open itself, and its spawn with
/// it (a CI run that never ended).
#[test]
fn privileged_a_run_directory_that_fails_after_the_fork_still_shuts_the_gate() {
    privileged!();
    assert_shut(within(60, "a gate that never shut", || {
        apply(&[&ToyDir::<true, true, 300>, &ForkingSpawner, &Late])
    }));
}

/// The same spawn, its gate opened: the sandbox init goes on to its exec.
#[test]
fn privileged_a_run_directory_made_after_the_fork_opens_the_gate() {
    privileged!();
    assert_opened(within(60, "a gate that never opened", || {
        apply(&[&ToyDir::<true, false, 300>, &ForkingSpawner, &Late])
    }));
}
