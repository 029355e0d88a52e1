//! Process: the bubblewrap argv, the seccomp filter the jail installs, and the memfd guard.

pub(crate) mod apply;
pub mod bwrap;
pub(crate) mod memfd;
pub mod seccomp;

use self::bwrap::SandboxPlan;
use self::seccomp::DeniedSyscall;
use crate::config::ServerConfig;

/// The process layer's part of [`crate::plan::RunPlan`].
#[derive(Debug, Clone)]
pub struct ProcessPlan {
    pub(crate) sandbox: SandboxPlan,
    /// bubblewrap and its arguments.
    pub bwrap: std::path::PathBuf,
    pub argv: Vec<std::ffi::OsString>,
    /// The deny list band-jail installs (it builds the filter from the same function).
    pub seccomp: Vec<DeniedSyscall>,
}

/// The process layer's part of [`crate::plan::RunPlan`]: what bubblewrap gets (`sandbox`, which
/// the plan makes of the other layers' parts), its argv, and the seccomp list. Pure.
pub(crate) fn plan_process(sandbox: SandboxPlan, cfg: &ServerConfig) -> ProcessPlan {
    ProcessPlan {
        argv: bwrap::build_bwrap_args(&sandbox),
        seccomp: plan_seccomp(&sandbox),
        sandbox,
        bwrap: cfg.bwrap.clone(),
    }
}

/// The deny list band-jail installs (it builds the filter from the same function), part of
/// [`crate::plan::RunPlan`]. Pure.
pub(crate) fn plan_seccomp(sandbox: &SandboxPlan) -> Vec<DeniedSyscall> {
    seccomp::denied_syscalls(seccomp::Profile {
        share_net: sandbox.share_net,
        ..Default::default()
    })
}

/// The process layer: bubblewrap and the jail leave nothing behind that the other layers do not
/// remove (their processes die with the cgroup and the uid).
pub(crate) struct Process;
