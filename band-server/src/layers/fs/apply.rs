//! Apply the filesystem's plan: create the run directory (a size-limited tmpfs) from its
//! operations.

use super::workdir::RunDir;
use crate::error::SetupResult;
use crate::layer::RunGuard;
use crate::layer::{Applied, Inputs};

/// run directory → collect: its root on the host.
pub struct RunDirRoot(pub std::path::PathBuf);

/// The late step ([`crate::layer::Phase::Ready`]): the wrappers in `/usr/bin`, made while
/// bubblewrap builds the sandbox, before the jail's input is written.
pub(crate) fn wrappers(
    inp: &Inputs<'_>,
    _out: &mut Applied,
    _guard: &mut RunGuard,
) -> SetupResult<()> {
    RunDir::finish(&inp.plan.run_dir)
}

/// The run directory step of layer's steps ([`crate::layer::RunLayer::steps`]).
pub(crate) fn run_dir(
    inp: &Inputs<'_>,
    out: &mut Applied,
    guard: &mut RunGuard,
) -> SetupResult<()> {
    let dir = RunDir::create(&inp.plan.run_dir)?;
    out.parts.insert(RunDirRoot(dir.root.clone()));
    guard.push(dir);
    Ok(())
}
