//! Apply the filesystem's plan: create the run directory (a size-limited tmpfs) from its
//! operations.

use super::workdir::RunDir;
use crate::error::SetupResult;
use crate::layer::{Applied, Inputs};
use crate::run::RunGuard;

/// The run directory step of layer's steps ([`crate::layer::RunLayer::steps`]).
pub(crate) fn run_dir(
    inp: &Inputs<'_>,
    out: &mut Applied,
    guard: &mut RunGuard,
) -> SetupResult<()> {
    let dir = RunDir::create(&inp.plan.run_dir)?;
    out.run_dir = Some(dir.root.clone());
    guard.push(dir);
    Ok(())
}
