//! Apply the cgroup's plan: create the run's cgroup with the effective limits, then open the
//! files that put bubblewrap in it (for the spawn).

use band::proto::Layer;
use fs_err::OpenOptions;

use super::RunCgroup;
use crate::error::{LayerExt, SetupResult};
use crate::layer::{Applied, Inputs};
use crate::run::RunGuard;

/// cgroup → spawn: the files that put bubblewrap in the run's cgroup.
pub struct JoinFiles(pub Vec<std::fs::File>);

/// The cgroup step of layer's steps ([`crate::layer::RunLayer::steps`]).
pub(crate) fn cgroup(inp: &Inputs<'_>, out: &mut Applied, guard: &mut RunGuard) -> SetupResult<()> {
    let part: &super::CgroupPlan = inp.plan.parts.need(Layer::Cgroup)?;
    let cg = RunCgroup::apply_owned(part, &inp.cfg.state_dir)
        .layer(Layer::Cgroup, "failed to create the run's cgroup")?;
    let join_files = cg.join_files();
    // Guarded before anything else can fail, so a failure below still removes it.
    guard.push(cg);
    let files = join_files
        .iter()
        .map(|p| {
            OpenOptions::new()
                .write(true)
                .open(p)
                .map(fs_err::File::into_file)
                .layer(Layer::Cgroup, format!("failed to open {}", p.display()))
        })
        .collect::<SetupResult<Vec<std::fs::File>>>()?;
    out.parts.insert(JoinFiles(files));
    Ok(())
}
