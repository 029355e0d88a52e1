//! The sandbox's layers, one folder each, and the one list of them. Each has the shape of
//! [`crate::layer`]; the run's guard tears them down in reverse order of building and the
//! janitor walks [`LAYERS`].

use crate::layer::RunLayer;

pub mod cgroup;
pub mod cli;
pub mod fs;
pub mod identity;
pub mod net;
pub mod process;

/// Every layer, in the order a run builds them (its guard tears them down in reverse).
pub const LAYERS: &[&dyn RunLayer] = &[
    &identity::Identity,
    &cgroup::Cgroup,
    &net::Net,
    &cli::Cli,
    &fs::Fs,
    &process::Process,
];
