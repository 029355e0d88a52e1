//! The sandbox's layers, one folder each, and the one list of them, [`LAYERS`]. Each has the
//! shape of [`crate::layer`], in two halves:
//!
//! - its plan half, the folder but `apply.rs`: its types and its pure planner, whose result is
//!   its field of [`crate::plan::RunPlan`];
//! - its apply half, `apply.rs`: its apply steps (functions of the plan and of what earlier steps
//!   returned, which return what later steps need) and its [`RunLayer`] impl (its janitor
//!   passes).
//!
//! `run::apply` calls the steps in order, the run's guard tears down what was built in reverse
//! order, and the janitor walks [`LAYERS`].
//!
//! Adding a layer takes:
//!
//! - a folder here with its two halves. Its plan half uses only what is below the layers
//!   ([`crate::common`], with [`crate::common::handover`] for what it reads of another layer or
//!   hands one; the config; the request); its apply half also the plan and [`crate::layer`].
//!   Neither uses another layer (`layering.rs` checks it);
//! - one line in [`LAYERS`] (its janitor passes);
//! - when it plans anything: its field in [`crate::plan::RunPlan`] and one call of its pure
//!   planner in [`crate::plan::plan_run`], with the earlier parts it reads as arguments (typed: a
//!   part that is not planned before it does not compile);
//! - when it builds anything: one call of each of its steps in `run::apply`, where what it needs
//!   is made, with those values as arguments (typed the same way);
//! - what its janitor passes remove goes in the janitor's report under a name of its own
//!   ([`crate::common::Report::note_removed`]);
//! - its errors name it: `band::proto::Layer::new("<name>")` (a layer the client does not know
//!   yet is shown by its name).
//!
//! `band-server/tests/suite/new_layer.rs` does it with a toy layer.

use crate::layer::RunLayer;

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
