//! Step 4 of a run: apply its plan. Every layer's apply steps, called in the order what each needs
//! from another decides, each handing the next what it needs as a typed value (a hand-over that
//! no earlier step makes does not compile):
//!
//! 1. the cgroup, started on a thread of its own (it is waited for just before the spawn);
//! 2. the network (with `allow.net`): the nftables table, and the namespace with its relay;
//! 3. the run's exec folder, empty (the run directory binds it at `/band`); then this thread
//!    moves to a mount namespace of the run's own, where the next steps mount;
//! 4. beside the steps up to the spawn, on a thread of its own ([`beside`]): the run directory;
//!    bubblewrap's exec waits for it through a [`Gate`];
//! 5. the run's programs and band-shim's copy, into the exec folder;
//! 6. the jail's input (the programs decide how the entry starts);
//! 7. the report socket (it judges calls against the programs);
//! 8. the cgroup, waited for (its join files go to the spawn);
//! 9. bubblewrap, spawned: in the cgroup, as the run's uid, in the run's network namespace;
//! 10. after the spawn, while bubblewrap builds the sandbox: the network's relay waited for, and
//!     the wrappers in `/usr/bin`;
//! 11. once bubblewrap has built it (the jail says so and waits for its input): the host's
//!     entries of the run's `/proc` covered from outside (`fs::proc_cover`).
//!
//! What each step builds goes into the run's guard (torn down in reverse order on any failure);
//! the handles the run needs later come back in [`Started`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use band::proto::Layer;

use crate::common::handover::{OnLookup, OnReport, Spawned};
use crate::common::{Held, RunGuard};
use crate::error::{LayerExt, SetupResult};
use crate::layer::{Gate, GateWriter, Inputs};
use crate::layers::cgroup::RunCgroup;
use crate::layers::cli::reports::ReportListener;
use crate::layers::net::NetLayer;
use crate::layers::{cgroup, cli, fs, net, process};
use crate::sys;

/// What applying a run's plan leaves to the run: what the spawn made, where the run directory
/// is, and handles on the layers the run loop and the collection read.
pub(crate) struct Started {
    pub(crate) spawned: Spawned,
    /// The run directory's root on the host.
    pub(crate) run_dir: PathBuf,
    /// The run's cgroup (killed at the end, its counters read).
    pub(crate) cgroup: Held<RunCgroup>,
    /// The run's network, with `allow.net` (its table watched, what it saw read).
    pub(crate) net: Option<Held<NetLayer>>,
    /// The report socket (stopped when the run ends).
    pub(crate) reports: Held<ReportListener>,
}

/// Apply `inp`'s plan (the steps of the module's doc). The first failure stops it; `guard`
/// tears down what was built. `on_lookup` hears every question the DNS stub answers,
/// `on_report` every call the report socket judges.
pub(crate) fn apply(
    inp: &Inputs<'_>,
    on_lookup: Arc<OnLookup>,
    on_report: OnReport,
    guard: &mut RunGuard,
) -> SetupResult<Started> {
    let cgroup = cgroup::apply::start(inp)?;
    let network = net::apply::table_and_relay(inp, on_lookup, guard)?;
    let exec = cli::apply::exec_folder(inp, guard)?;
    // From here on this thread, and what it starts, make the run's mounts in a mount namespace of
    // the run's own (`sys::own_mount_namespace`): the host's namespace never holds them, so no
    // other run's bubblewrap copies them (it reads its mount table once per bind: with 16 runs
    // at once, each of theirs held ~16 mounts of every other), and they go when the run's last
    // process does. The program cache's tmpfs is mounted before, in the host's namespace, where
    // every run finds it.
    sys::own_mount_namespace().layer(
        Layer::Filesystem,
        "failed to give the run a mount namespace of its own",
    )?;
    let (net_layer, netns) = match network {
        Some(n) => (Some(n.layer), n.netns),
        None => (None, None),
    };
    let (run_dir, (mut spawned, cgroup, reports)) = beside(
        guard,
        |guard| fs::apply::run_dir(inp, guard),
        |gate, guard| {
            let programs = cli::apply::programs(inp, &exec, guard)?;
            let jail = process::apply::jail_input(inp, &programs.table, &on_report)?;
            let reports = cli::apply::report_socket(inp, programs, on_report.clone(), guard)?;
            let (cgroup, cgroup_join) = cgroup::apply::join(cgroup, guard)?;
            let with = process::apply::SpawnInputs {
                jail,
                cgroup_join,
                netns,
                gate: Some(gate),
            };
            let spawned = process::apply::spawn(inp, with, guard)?;
            Ok((spawned, cgroup, reports))
        },
    )?;
    if let Some(n) = &net_layer {
        net::apply::ready(n, guard)?;
        // The script's clock starts after the wait.
        spawned.run_start = Instant::now();
    }
    fs::apply::wrappers(inp)?;
    fs::apply::proc_covers(inp, &spawned, guard)?;
    Ok(Started {
        spawned,
        run_dir,
        cgroup,
        net: net_layer,
        reports,
    })
}

/// Run `aside` on a thread of its own, with a guard of its own, while `here` runs with the run's
/// `guard` and the read end of a [`Gate`]: the gate opens when `aside` succeeds, and shuts when
/// it fails or panics (bubblewrap's exec, in `here`, waits for it: nothing of the run can start
/// before `aside` is done). Both are waited for: what `aside` built goes into `guard` whether it
/// succeeded or not, and the first error is its own when it failed (a spawn that found its gate
/// shut failed because of it).
pub fn beside<A: Send, H>(
    guard: &mut RunGuard,
    aside: impl FnOnce(&mut RunGuard) -> SetupResult<A> + Send,
    here: impl FnOnce(Gate, &mut RunGuard) -> SetupResult<H>,
) -> SetupResult<(A, H)> {
    let (gate_r, gate_w) =
        sys::pipe().layer(Layer::Process, "failed to create the spawn's gate")?;
    // Shut when dropped unopened (by `aside`'s thread, or here if it does not start).
    let gate_w = GateWriter::new(gate_w);
    std::thread::scope(|s| {
        let pending = std::thread::Builder::new()
            .name("beside".into())
            .spawn_scoped(s, move || {
                let mut own = RunGuard::default();
                let result = aside(&mut own);
                if result.is_ok() {
                    gate_w.open();
                }
                (result, own)
            })
            .layer(Layer::Process, "failed to start a thread")?;
        let here = here(Gate(gate_r), guard);
        let aside = match pending.join() {
            Ok((result, built)) => {
                guard.absorb(built);
                result
            }
            Err(panic) => std::panic::resume_unwind(panic),
        };
        Ok((aside?, here?))
    })
}
