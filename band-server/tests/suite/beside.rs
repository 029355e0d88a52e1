//! What the run builds beside the steps up to the spawn (the run directory, `run::beside`): it
//! runs on a thread of its own while the later steps up to the spawn run, the spawn's gate opens
//! only when it has succeeded, it is joined before `beside` returns (so before the steps after
//! the spawn), and what it built is torn down with the run whatever failed. No root: toy steps
//! build files in a temp directory, and a toy spawn reads the gate as the real sandbox init does;
//! one test (root) forks the real sandbox init (`sys::PreExec`) to read it.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use band::proto::Layer;
use band_server::error::{SetupError, SetupResult};
use band_server::layer::Gate;
use band_server::run::{self, RunGuard};
use band_server::sys::{self, GATE_OPEN};

use super::helpers::privileged;
use super::new_layer::ToyBuilt;

fn err(layer: Layer, what: impl std::fmt::Display) -> SetupError {
    SetupError::new(layer, what.to_string())
}

/// Make `name` in `dir`, kept by `guard`.
fn make(dir: &Path, guard: &mut RunGuard, name: &str) -> SetupResult<PathBuf> {
    let path = dir.join(name);
    fs_err::write(&path, name).map_err(|e| err(Layer::Filesystem, e))?;
    guard.push(ToyBuilt(path.clone()));
    Ok(path)
}

/// Wait (at most 10 s) until `name` exists in `dir`.
fn wait_for(dir: &Path, name: &str) -> SetupResult<()> {
    let path = dir.join(name);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !path.exists() {
        if Instant::now() > deadline {
            return Err(err(Layer::Filesystem, format!("{name} never came")));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(())
}

/// The run directory's stand-in: with `wait`, it waits until the spawn's stand-in has started (so
/// the two run at the same time, or this test times out), and `wait_ms` more; it makes `dir`,
/// and fails after it with `fail`.
#[derive(Clone, Copy)]
struct ToyDir {
    wait: bool,
    fail: bool,
    wait_ms: u64,
}

impl ToyDir {
    fn make(self, dir: &Path, guard: &mut RunGuard) -> SetupResult<()> {
        if self.wait {
            wait_for(dir, "spawning")?;
            std::thread::sleep(Duration::from_millis(self.wait_ms));
        }
        make(dir, guard, "dir")?;
        if self.fail {
            return Err(err(Layer::Filesystem, "the toy run directory failed"));
        }
        Ok(())
    }
}

/// What the spawn's stand-in saw: whether the run directory was there when it started, and
/// whether the gate opened.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
struct GateSaw {
    dir_before: bool,
    opened: bool,
}

/// The spawn's stand-ins.
#[derive(Clone, Copy)]
enum Spawn {
    /// Says it started, then reads the gate as the sandbox init does.
    Reads,
    /// With the real sandbox init: `sys::PreExec` forks it (it holds a copy of every descriptor
    /// band-server had at the fork, the gate's write end among them while the run directory's
    /// thread holds it), and it reads the gate, as nobody, before its exec of `/bin/true`. Root
    /// only.
    Forks,
}

impl Spawn {
    /// Spawn; what it saw goes to `saw`, and it fails as the spawn does when the gate did not
    /// open.
    fn spawn(
        self,
        dir: &Path,
        Gate(gate): Gate,
        guard: &mut RunGuard,
        saw: &mut Option<GateSaw>,
    ) -> SetupResult<()> {
        let dir_before = dir.join("dir").exists();
        let opened = match self {
            Spawn::Reads => {
                make(dir, guard, "spawning")?;
                let mut byte = [0u8; 1];
                let n = std::fs::File::from(gate)
                    .read(&mut byte)
                    .map_err(|e| err(Layer::Process, e))?;
                n == 1 && byte[0] == GATE_OPEN
            }
            Spawn::Forks => {
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
                make(dir, guard, "spawning")?;
                let spawned = cmd.spawn();
                drop(gate);
                match spawned {
                    Ok(mut child) => child.wait().map_err(|e| err(Layer::Process, e))?.success(),
                    Err(e) if e.raw_os_error() == Some(libc::ECANCELED) => false,
                    Err(e) => return Err(err(Layer::Process, e)),
                }
            }
        };
        *saw = Some(GateSaw { dir_before, opened });
        if opened {
            Ok(())
        } else {
            Err(err(Layer::Process, "the gate shut: Operation canceled"))
        }
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

/// After the spawn: the run directory must be there (joined before `beside` returned).
fn late(dir: &Path, guard: &mut RunGuard) -> SetupResult<()> {
    if !dir.join("dir").exists() {
        return Err(err(Layer::Filesystem, "no run directory after the spawn"));
    }
    make(dir, guard, "late")?;
    Ok(())
}

/// What [`apply`] gives back: the result, what the spawn saw, the guard, the toys' folder.
type Applied4 = (
    SetupResult<()>,
    Option<GateSaw>,
    RunGuard,
    tempfile::TempDir,
);

/// The toy run: `toy` beside the steps up to the spawn (a report socket's stand-in that fails
/// first, with `failing_services`), then the step after it, as `run::apply` does.
fn apply(toy: ToyDir, failing_services: bool, spawn: Spawn) -> Applied4 {
    let state = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = state.path();
    let mut guard = RunGuard::default();
    let mut saw = None;
    let result = run::beside(
        &mut guard,
        |guard| toy.make(dir, guard),
        |gate, guard| {
            if failing_services {
                return Err(err(Layer::Cli, "the toy report socket failed"));
            }
            spawn.spawn(dir, gate, guard, &mut saw)
        },
    )
    .and_then(|((), ())| late(dir, &mut guard));
    (result, saw, guard, state)
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
fn assert_opened((result, saw, mut guard, state): Applied4) {
    result.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        saw,
        Some(GateSaw {
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
fn assert_shut((result, saw, mut guard, state): Applied4) {
    let e = match result {
        Ok(()) => panic!("the run started without its run directory"),
        Err(e) => e,
    };
    assert_eq!(e.layer, Layer::Filesystem, "{}", e.message);
    assert_eq!(e.message, "the toy run directory failed");
    assert_eq!(
        saw,
        Some(GateSaw {
            dir_before: false,
            opened: false,
        })
    );
    assert_eq!(files(state.path()), ["dir", "spawning"]);
    assert_eq!(guard.teardown(), Vec::<String>::new());
    assert_eq!(files(state.path()), Vec::<String>::new());
}

const WAITS: ToyDir = ToyDir {
    wait: true,
    fail: false,
    wait_ms: 0,
};

#[test]
fn the_run_directory_is_made_beside_the_spawn_which_waits_for_it() {
    assert_opened(apply(WAITS, false, Spawn::Reads));
}

#[test]
fn a_run_directory_that_fails_closes_the_gate_and_its_error_is_the_runs() {
    assert_shut(apply(
        ToyDir {
            fail: true,
            ..WAITS
        },
        false,
        Spawn::Reads,
    ));
}

#[test]
fn a_step_that_fails_beside_the_run_directory_still_leaves_it_to_the_guard() {
    // The report socket's stand-in fails while the run directory's thread works: that error is
    // the run's, the thread is joined, and what it made is the guard's to remove.
    let toy = ToyDir {
        wait: false,
        ..WAITS
    };
    let (result, _, mut guard, state) = apply(toy, true, Spawn::Reads);
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
    let toy = ToyDir {
        fail: true,
        wait_ms: 300,
        ..WAITS
    };
    assert_shut(within(60, "a gate that never shut", || {
        apply(toy, false, Spawn::Forks)
    }));
}

/// The same spawn, its gate opened: the sandbox init goes on to its exec.
#[test]
fn privileged_a_run_directory_made_after_the_fork_opens_the_gate() {
    privileged!();
    let toy = ToyDir {
        wait_ms: 300,
        ..WAITS
    };
    assert_opened(within(60, "a gate that never opened", || {
        apply(toy, false, Spawn::Forks)
    }));
}
