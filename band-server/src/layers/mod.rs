//! The sandbox's layers, one folder each, and the one list of them, [`LAYERS`]. Each has the
//! shape of [`crate::layer`], in two halves:
//!
//! - its plan half, the folder but `apply.rs`: its types and its pure planner, whose result is
//!   its field of [`crate::plan::RunPlan`];
//! - its apply half, `apply.rs`: its [`RunLayer`] impl (its apply steps, each tagged with a
//!   [`crate::layer::Phase`], and its janitor passes) and the steps themselves, which read the
//!   plan.
//!
//! The run applies every listed layer's steps sorted by phase ([`apply_order`]), the run's guard
//! tears down what was built in reverse order, and the janitor walks [`LAYERS`].
//!
//! Adding a layer takes:
//!
//! - a folder here with its two halves. Its plan half uses only what is below the layers
//!   ([`crate::common`], with [`crate::common::handover`] for what it reads of another layer or
//!   hands one; the config; the request); its apply half also the plan and [`crate::layer`].
//!   Neither uses another layer (`layering.rs` checks it);
//! - one line in [`LAYERS`];
//! - when it plans anything: its field in [`crate::plan::RunPlan`] and one call of its pure
//!   planner in [`crate::plan::plan_run`], with the earlier parts it reads as arguments (typed: a
//!   part that is not planned before it does not compile);
//! - its steps' phases: existing [`crate::layer::Phase`]s, or a new one where it must run;
//! - what its janitor passes remove goes in the janitor's report under a name of its own
//!   ([`crate::common::Report::note_removed`]);
//! - its errors name a layer of the protocol (`band::proto::Layer`), which the client shows: a
//!   layer the protocol does not name yet takes a variant there.
//!
//! Its hand-overs to later steps go in [`crate::layer::Applied::parts`], by type (one a step needs
//! that is absent fails closed naming the layer). `run::execute`, the guard and the janitor walk
//! the list (`band-server/tests/suite/new_layer.rs` does it with a toy layer).

use crate::layer::{RunLayer, Step};

pub mod cgroup;
pub mod cli;
pub mod fs;
pub mod identity;
pub mod net;
pub mod process;

/// Every layer. The janitor removes what a dead run left in this order (its nftables table
/// first: the run's processes are dead by then), and leftovers no lease names in the reverse
/// order (tables last: they keep a survivor filtered until everything else is gone).
pub const LAYERS: &[&dyn RunLayer] = &[
    &identity::Identity,
    &net::Net,
    &cgroup::Cgroup,
    &fs::Fs,
    &cli::Cli,
    &process::Process,
];

/// How a run applies its plan: every step of every layer of `layers`, sorted by its [`crate::layer::Phase`]
/// (stable: steps of one phase keep the order of `layers`). Not the order of [`LAYERS`], which
/// is the janitor's: building goes by what a step needs from an earlier one. The identity has
/// no step: its uid is leased before the plan, which needs it ([`identity::apply::lease`]).
pub fn apply_order(
    layers: &[&'static dyn RunLayer],
) -> Vec<(&'static dyn RunLayer, &'static Step)> {
    let mut steps: Vec<(&'static dyn RunLayer, &'static Step)> = layers
        .iter()
        .flat_map(|l| l.steps().iter().map(move |s| (*l, s)))
        .collect();
    steps.sort_by_key(|(_, s)| s.phase);
    steps
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use pretty_assertions::assert_eq;

    use super::*;

    fn short(l: &dyn RunLayer) -> &'static str {
        let name = l.name();
        name.rsplit("::").next().unwrap_or(name)
    }

    #[test]
    fn the_run_applies_every_layer_in_this_order() {
        let order: Vec<String> = apply_order(LAYERS)
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
                "Cli: the run's programs and band-shim's copy",
                "Process: the memfd guard and the jail's input",
                "Cli: the report socket",
                "Cgroup: the run's cgroup waited for",
                "Process: bubblewrap, spawned in the cgroup as the run's uid",
                "Net: the relay waited for, and the DNS stub (with allow.net)",
                "Fs: the wrappers in /usr/bin",
            ]
        );
        // Every layer but the identity (leased before the plan) has a step.
        let listed: BTreeSet<&str> = LAYERS
            .iter()
            .map(|l| l.name())
            .filter(|n| *n != identity::Identity.name())
            .collect();
        let applied: BTreeSet<&str> = apply_order(LAYERS).iter().map(|(l, _)| l.name()).collect();
        assert_eq!(listed, applied);
    }
}
