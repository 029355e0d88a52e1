//! The shape every sandbox layer has (see [`crate::layers`] for the layers and their list):
//!
//! 1. a pure plan (a function of the layer's folder, whose result is the layer's field of
//!    [`crate::plan::RunPlan`]; [`crate::plan::plan_run`] calls every layer's in order, each with
//!    the earlier parts it reads);
//! 2. apply: functions in `layers/<layer>/apply.rs`, each building what its part of the plan
//!    says from [`Inputs`] and the typed values earlier steps returned, keeping what it built in
//!    the run's guard ([`crate::common::RunGuard::push`], which gives back a typed
//!    [`crate::common::Held`] handle) and returning, typed, what a later step needs.
//!    `run::apply` calls them in order: a hand-over that no earlier step returns does not
//!    compile;
//! 3. the teardown of what it built ([`crate::common::Built::stop`],
//!    [`crate::common::Built::teardown`]), by the guard, in reverse order of building;
//! 4. the janitor's removal of what a dead run left ([`RunLayer::list_stale`],
//!    [`RunLayer::remove_dead_run`], [`RunLayer::remove_stale`]), over [`crate::layers::LAYERS`].
//!
//! This module sits above the plan (the steps read it) and below the layers' apply halves; what
//! the layers share below their plan halves is in [`crate::common`].

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::config::ServerConfig;
use crate::plan::RunPlan;
use crate::request::Checked;

use crate::common::handover::OnReport;
use crate::common::{Host, Report, Stale};

/// One layer, as the janitor walks it: what a dead run may have left of it on the host. (Its
/// apply steps are functions `run::apply` calls, typed; see the module's doc.)
pub trait RunLayer: Sync {
    /// The layer's type name, as errors and the order test name it.
    fn name(&self) -> &'static str {
        std::any::type_name::<Self>()
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

/// CLI gate → the process layer's jail input: how the entry starts, decided by the gate, which
/// knows the run's programs and rules. The gate's programs step returns them; `run::apply` hands
/// them to the jail's input as this trait (the process layer does not name the gate).
pub(crate) trait EntryStart: Sync {
    /// `band exec`'s one command (`entry` is its script), when the gate allows it: the call is
    /// judged, and reported to `on_report`, as band-shim's would be. The program's name in the
    /// run's table, and its argv.
    fn band_exec(
        &self,
        inp: &Inputs<'_>,
        entry: &[u8],
        on_report: &OnReport,
    ) -> Option<(String, Vec<String>)>;
    /// An entry (at `entry_path` in the sandbox) whose interpreter is a program of the run (not
    /// itself a script): a `#!` entry started as the kernel would, or one `launch` says an
    /// interpreter starts (its `#!` line without an execute bit, its extension, upstream's
    /// `run.sh`). The program's name and its argv.
    fn interpreter(
        &self,
        entry: &[u8],
        entry_path: &str,
        launch: &band::launch::Launch,
    ) -> Option<(String, Vec<String>)>;
    /// The descriptor of program `name`'s copy.
    fn fd(&self, name: &str) -> std::io::Result<Arc<std::os::fd::OwnedFd>>;
}

/// The read end of the pipe bubblewrap's exec waits on (see `run::apply::beside`): the spawn's
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
pub(crate) struct GateWriter(Option<std::os::fd::OwnedFd>);

impl GateWriter {
    pub(crate) fn new(fd: std::os::fd::OwnedFd) -> GateWriter {
        GateWriter(Some(fd))
    }

    /// Let bubblewrap start.
    pub(crate) fn open(mut self) {
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
