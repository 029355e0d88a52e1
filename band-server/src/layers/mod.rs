//! The sandbox's layers, one folder each, and the one list of them. Each has the shape of
//! [`crate::layer`]; a run's guard tears down what it built in reverse order of building, and
//! the janitor walks [`LAYERS`].

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
