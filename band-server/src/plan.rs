//! The whole run, planned before anything exists: a pure function of the request, the server
//! config, the host's facts ([`HostFacts`]) and the run's identity (its leased uid).
//!
//! [`crate::request::check`] refuses a bad request before anything is looked at; [`preflight`] refuses what
//! the host cannot do before a uid is leased; [`plan_run`] returns the [`RunPlan`]: the bubblewrap
//! argv, the cgroup's operations, the nftables text, the run directory's operations (owners and
//! modes included), the programs to lay out and the seccomp list. `run::execute` only applies it
//! (the steps of [`crate::layers::APPLY`]).
//!
//! Each layer's part is planned by a pure function of its folder, which [`plan_run`] calls in
//! turn: [`cgroup::plan`], [`net::plan_network`], [`cli::plan_exec`], [`fs::plan_run_dir`],
//! [`process::plan_sandbox`] (then its argv and [`process::plan_seccomp`]).

use std::ffi::OsString;
use std::path::PathBuf;

use band::policy::{CompiledPolicy, Policy};
use band::proto::Layer;

use crate::config::{EffectiveLimits, ServerConfig};
use crate::error::{SetupError, SetupResult};
use crate::facts::{Helpers, HostFacts};
use crate::layers::cgroup::{self, CgroupPlan};
pub use crate::layers::cli::ExecPlan;
use crate::layers::cli::programs::{self, CliPlan};
use crate::layers::cli::shim::CliRules;
use crate::layers::fs::mounts;
use crate::layers::fs::workdir::{HostMount, RunDirPlan};
use crate::layers::net::{self, NetRunPlan};
use crate::layers::process::bwrap::{self, SandboxPlan};
use crate::layers::process::seccomp::DeniedSyscall;
use crate::layers::{cli, fs, process};
use crate::request::{Checked, DecodedFile};

/// The run's identity, leased before [`plan_run`] (the only thing that exists before the plan).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub slot: u32,
    pub uid: u32,
    pub gid: u32,
    pub user: String,
}

/// What can be planned before a uid is leased, and what the host must offer.
#[derive(Debug, Clone)]
pub struct Preflight {
    pub cli: CliPlan,
    pub host_mounts: Vec<HostMount>,
    pub write_dirs: Vec<String>,
    pub helpers: Helpers,
    pub rules: CliRules,
}

/// Everything that can fail before a uid is leased: commands, host mounts, the state directory,
/// the helpers, bubblewrap, the CLI rules.
pub fn preflight(
    checked: &Checked<'_>,
    cfg: &ServerConfig,
    facts: &HostFacts,
) -> SetupResult<Preflight> {
    let policy = &checked.req.policy;
    let cli = plan_cli_from(policy, &checked.compiled, &checked.bundle, facts)?;
    let host_mounts = mounts::plan_host_mounts(policy, &cfg.state_dir, &|p| {
        facts.host_paths.get(p).cloned()
    })?;
    facts.state_dir.clone()?;
    let write_dirs = mounts::plan_write_dirs(policy);
    let helpers = facts.helpers.clone()?;
    if !facts.bwrap_present {
        return Err(SetupError::new(
            Layer::Filesystem,
            format!("bubblewrap not found at {}", cfg.bwrap.display()),
        )
        .with_hint("apt-get install bubblewrap, or set `bwrap` in the server config"));
    }
    let rules = CliRules::from_policy(&cli.policy)
        .map_err(|e| SetupError::new(Layer::Cli, e.to_string()))?
        .with_host_search(cfg.bin_path.clone());
    Ok(Preflight {
        cli,
        host_mounts,
        write_dirs,
        helpers,
        rules,
    })
}

/// One run, planned.
#[derive(Debug, Clone)]
pub struct RunPlan<'a> {
    pub run_id: String,
    pub identity: Identity,
    pub limits: EffectiveLimits,
    pub helpers: Helpers,
    pub cli: CliPlan,
    pub rules: CliRules,
    pub cgroup: CgroupPlan,
    /// `None`: no `allow.net`, the run gets a network namespace with only loopback.
    pub net: Option<NetRunPlan>,
    pub exec: ExecPlan,
    pub run_dir: RunDirPlan<'a>,
    /// The shim's report socket.
    pub sock: PathBuf,
    pub sandbox: SandboxPlan,
    /// bubblewrap and its arguments.
    pub bwrap: PathBuf,
    pub argv: Vec<OsString>,
    /// The deny list band-jail installs (it builds the filter from the same function).
    pub seccomp: Vec<DeniedSyscall>,
}

/// Plan the whole run. Pure: nothing is looked at but the arguments. Each layer's part is a
/// function of its folder.
pub fn plan_run<'a>(
    checked: &'a Checked<'_>,
    cfg: &ServerConfig,
    facts: &HostFacts,
    identity: &Identity,
) -> SetupResult<RunPlan<'a>> {
    let req = checked.req;
    let pre = preflight(checked, cfg, facts)?;
    let limits = checked.limits;
    let cgroup = cgroup::plan_run_cgroup(&req.run_id, &limits, facts)?;
    let net = net::plan_network(&req.run_id, identity, &checked.compiled.net, facts)?;
    let exec = cli::plan_exec(&cfg.state_dir, &req.run_id, &pre.cli, facts)?;
    let resolv_conf = net.as_ref().map(|n| n.resolv_conf.as_str());
    let run_dir = fs::plan_run_dir(checked, cfg, facts, identity, &pre, resolv_conf);
    let sandbox = process::plan_sandbox(checked, cfg, &pre, &exec, &run_dir, net.is_some());
    Ok(RunPlan {
        run_id: req.run_id.clone(),
        identity: identity.clone(),
        limits,
        helpers: pre.helpers,
        cli: pre.cli,
        rules: pre.rules,
        cgroup,
        net,
        exec,
        sock: run_dir.sock(),
        argv: bwrap::build_bwrap_args(&sandbox),
        seccomp: process::plan_seccomp(&sandbox),
        sandbox,
        run_dir,
        bwrap: cfg.bwrap.clone(),
    })
}

/// [`programs::plan_cli`] with the binaries and heads of `facts`.
pub fn plan_cli_from(
    policy: &Policy,
    compiled: &CompiledPolicy,
    bundle: &[DecodedFile],
    facts: &HostFacts,
) -> SetupResult<CliPlan> {
    programs::plan_cli(
        policy,
        compiled,
        bundle,
        &|name| facts.binaries.get(name).cloned(),
        &|path| facts.heads.get(path).cloned().unwrap_or_default(),
    )
}
