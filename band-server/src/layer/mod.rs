//! The shape every sandbox layer has (see [`crate::layers`] for the layers and their lists):
//!
//! 1. a pure plan (a function of the layer's folder, whose result is the layer's field of
//!    [`crate::plan::RunPlan`]; [`crate::plan::plan_run`] calls every layer's in order, each with
//!    the earlier parts it reads);
//! 2. apply: one or more [`Step`]s in `layers/<layer>/apply.rs`, declared by
//!    [`RunLayer::steps`] (its impl is there too), each in a [`Phase`] (the run sorts all steps
//!    by phase); each builds what its part of the [`crate::plan::RunPlan`] says, pushes a
//!    [`crate::common::Built`] handle into the run's guard, and leaves in [`Applied::parts`], by
//!    type, what a later step needs;
//! 3. the teardown of that handle ([`crate::common::Built::stop`],
//!    [`crate::common::Built::teardown`]), by the guard, in reverse order of building;
//! 4. the janitor's removal of what a dead run left ([`RunLayer::list_stale`],
//!    [`RunLayer::remove_dead_run`], [`RunLayer::remove_stale`]), over [`crate::layers::LAYERS`].
//!
//! This module sits above the plan (the steps read it) and below the layers' apply halves; what
//! the layers share below their plan halves is in [`crate::common`].

use std::any::{Any, TypeId};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use band::proto::Layer;

use crate::config::ServerConfig;
use crate::error::{SetupError, SetupResult};
use crate::plan::RunPlan;
use crate::request::Checked;

use crate::common::handover::{OnLookup, OnReport};
use crate::common::{Host, Report, RunGuard, Stale};

/// One layer: its apply steps (for the run) and its leftovers (for the janitor).
/// Everything a layer is, declared in its folder; the run and the janitor only walk a list of
/// layers ([`crate::layers::LAYERS`]).
pub trait RunLayer: Sync {
    /// The layer's type name, as errors and the order test name it.
    fn name(&self) -> &'static str {
        std::any::type_name::<Self>()
    }
    /// The layer's apply steps, each tagged with the [`Phase`] it runs in: the run applies every
    /// listed layer's steps sorted by phase (stable: same phase, list order).
    fn steps(&self) -> &'static [Step] {
        &[]
    }
    /// Leftovers of this layer on the host, listed *before* the leases are read (a run holds its
    /// lease before it builds anything, so a run that starts meanwhile is never touched).
    fn list_stale(&self, _host: &Host<'_>, _report: &mut Report) -> Vec<Stale> {
        Vec::new()
    }
    /// Remove what `run`, whose lease was just found dead, left in this layer.
    fn remove_dead_run(&self, _host: &Host<'_>, _run: &str, _report: &mut Report) {}
    /// Remove a listed leftover of a run that no live lease names (`live`).
    fn remove_stale(
        &self,
        _host: &Host<'_>,
        _item: &Stale,
        _live: &BTreeSet<String>,
        _report: &mut Report,
    ) {
    }
}

/// What every apply step reads: the plan, the checked request (for what the plan leaves out: the
/// secrets, the entry's bytes) and the server config.
pub struct Inputs<'a> {
    pub plan: &'a RunPlan<'a>,
    pub checked: &'a Checked<'a>,
    pub cfg: &'a ServerConfig,
}

/// What an apply step leaves for a later one (or for the run loop): the run loop's two callbacks,
/// typed (every run has them), and each layer's hand-overs, by type (one for another layer or
/// the run is defined in [`crate::common::handover`]: `JoinFiles`, `Spawned`, ...; one within
/// a layer in its folder: `cgroup::apply::PendingCgroup`, `RunPrograms`, ...).
pub struct Applied {
    /// Into the run loop: each question the DNS stub answers (set by the run before any step).
    pub on_lookup: Arc<OnLookup>,
    /// Into the run loop: each call the report socket judged (set by the run before any step).
    pub on_report: OnReport,
    /// The layers' hand-overs, by type.
    pub parts: Handed,
}

impl Applied {
    pub fn new(on_lookup: Arc<OnLookup>, on_report: OnReport) -> Applied {
        Applied {
            on_lookup,
            on_report,
            parts: Handed::default(),
        }
    }

    /// The two callbacks, for steps that run with hand-overs of their own (`run::apply`).
    pub fn callbacks(&self) -> (Arc<OnLookup>, OnReport) {
        (self.on_lookup.clone(), self.on_report.clone())
    }
}

/// CLI gate → the process layer's jail input: how the entry starts, decided by the gate, which
/// knows the run's programs and rules. The gate's programs step hands it over as
/// [`EntryPrograms`].
pub trait EntryStart: Send {
    /// `band exec`'s one command (`entry` is its script), when the gate allows it: the call is
    /// judged, and reported to `on_report`, as band-shim's would be. The program's name in the
    /// run's table, and its argv.
    fn band_exec(
        &self,
        inp: &Inputs<'_>,
        entry: &[u8],
        on_report: &OnReport,
    ) -> Option<(String, Vec<String>)>;
    /// A `#!` entry (at `entry_path` in the sandbox) whose interpreter is a program of the run
    /// (not itself a script), started as the kernel would: the program's name and its argv.
    /// `with_bash`: the entry is upstream's `run.sh` without an execute bit, started with bash.
    fn interpreter(
        &self,
        entry: &[u8],
        entry_path: &str,
        with_bash: bool,
    ) -> Option<(String, Vec<String>)>;
    /// The descriptor of program `name`'s copy.
    fn fd(&self, name: &str) -> std::io::Result<Arc<std::os::fd::OwnedFd>>;
    /// What it is, for the layer that made it.
    fn into_any(self: Box<Self>) -> Box<dyn Any + Send>;
}

/// The CLI gate's programs as the jail's input reads them (see [`EntryStart`]).
pub struct EntryPrograms(pub Box<dyn EntryStart>);

/// When an apply step runs, in this order: what a step needs from another decides its phase.
/// The cgroup comes first, so everything later is guarded by its kill; the run directory needs
/// the run's exec folder (it binds it at `/band`), not the programs that go in it; the jail's
/// input needs the programs; the spawn needs everything before it (the run directory through its
/// gate); the waits come after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// The run's cgroup, started (made on a thread of its own beside the steps up to
    /// [`Phase::Joins`]).
    Limits,
    /// The network (table, namespace, DNS stub).
    Network,
    /// The run's exec folder, empty: the run directory binds it at `/band`.
    ExecFolder,
    /// The run directory: on a thread of its own ([`Phase::beside`]), beside the programs, the
    /// jail's input, the report socket, the cgroup's wait and the spawn, whose exec of
    /// bubblewrap waits for it ([`Gate`]).
    RunDir,
    /// The run's programs (execute-only copies, band-shim's copy), into the exec folder.
    Programs,
    /// The jail's input (needs the programs).
    JailInput,
    /// The report socket (in the run's exec folder; not in the run directory, which is still
    /// being made beside it).
    Services,
    /// What was started beside the steps before, waited for: the run's cgroup (bubblewrap's
    /// spawn needs its join files).
    Joins,
    /// bubblewrap: it needs every step before.
    Spawn,
    /// After the spawn, before the jail's input is written (the script cannot start before it):
    /// waits for what was started earlier and may finish while bubblewrap builds the sandbox
    /// (the network's relay), and makes what only the script needs (the wrappers in `/usr/bin`).
    Ready,
}

impl Phase {
    /// Whether this phase's steps run on a thread of their own, beside the steps of the later
    /// phases up to [`Phase::Spawn`] (see `run::apply`): bubblewrap's exec waits for them.
    pub fn beside(self) -> bool {
        matches!(self, Phase::RunDir)
    }
}

/// The read end of the pipe bubblewrap's exec waits on (see [`Phase::beside`]): the spawn's
/// sandbox init reads one byte from it after its own setup and before bubblewrap's exec, and goes
/// on only when that byte is [`crate::sys::GATE_OPEN`]. Its writer is a [`GateWriter`].
pub struct Gate(pub std::os::fd::OwnedFd);

/// The write end of a [`Gate`]: [`GateWriter::open`] writes [`crate::sys::GATE_OPEN`] once every
/// step beside the others has succeeded; dropped without it (a step failed, or panicked) it
/// writes [`crate::sys::GATE_SHUT`].
///
/// The end of the pipe cannot say "shut": the spawn's fork copies every descriptor of
/// band-server, this one included when its thread still holds it, and the sandbox init keeps
/// that copy until its exec, so the pipe has a writer for as long as the sandbox init reads it
/// and would never close. Only a byte tells the sandbox init to stop.
pub struct GateWriter(Option<std::os::fd::OwnedFd>);

impl GateWriter {
    pub fn new(fd: std::os::fd::OwnedFd) -> GateWriter {
        GateWriter(Some(fd))
    }

    /// Let bubblewrap start.
    pub fn open(mut self) {
        self.send(crate::sys::GATE_OPEN);
    }

    /// A write that fails finds no reader: the spawn is gone, and with it whatever could have
    /// started; nothing to tell.
    fn send(&mut self, byte: u8) {
        if let Some(fd) = self.0.take() {
            let _ = std::io::Write::write_all(&mut std::fs::File::from(fd), &[byte]);
        }
    }
}

impl Drop for GateWriter {
    fn drop(&mut self) {
        self.send(crate::sys::GATE_SHUT);
    }
}

/// What apply steps hand each other, keyed by type: a step puts its own types in, a later one
/// reads or takes them (failing closed, naming the layer, when the step that makes one did not
/// run before it).
#[derive(Default)]
pub struct Handed {
    map: HashMap<TypeId, Box<dyn Any + Send>>,
}

impl Handed {
    /// Add what another set of steps handed over (`run::apply`'s steps beside the others).
    pub fn absorb(&mut self, other: Handed) {
        self.map.extend(other.map);
    }
    pub fn insert<T: Any + Send>(&mut self, value: T) {
        self.map.insert(TypeId::of::<T>(), Box::new(value));
    }
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.map.get(&TypeId::of::<T>())?.downcast_ref()
    }
    /// The value of type `T`, if a step left one (for what is optional).
    pub fn remove<T: Any>(&mut self) -> Option<T> {
        self.map
            .remove(&TypeId::of::<T>())
            .and_then(|b| b.downcast().ok())
            .map(|b| *b)
    }
    /// The value of type `T`, which `layer` needs; absent, the run does not start.
    pub fn need<T: Any>(&self, layer: Layer) -> SetupResult<&T> {
        self.get().ok_or_else(|| missing::<T>(layer))
    }
    /// [`Handed::need`], taken out.
    pub fn take<T: Any>(&mut self, layer: Layer) -> SetupResult<T> {
        self.remove().ok_or_else(|| missing::<T>(layer))
    }
}

fn missing<T>(layer: Layer) -> SetupError {
    SetupError::new(
        layer,
        format!(
            "internal: {} was not set up before this step (see the layers' phases)",
            std::any::type_name::<T>()
        ),
    )
}

/// One apply step of a layer: build, push the handle into the guard, leave what later steps
/// need in [`Applied`]. Errors name the layer (fail closed: the run does not start).
pub type ApplyFn = fn(&Inputs<'_>, &mut Applied, &mut RunGuard) -> SetupResult<()>;

/// One apply step of a layer ([`RunLayer::steps`]).
pub struct Step {
    /// When it runs.
    pub phase: Phase,
    /// What the step builds.
    pub what: &'static str,
    pub apply: ApplyFn,
}
