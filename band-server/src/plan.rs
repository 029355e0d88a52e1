//! The whole run, planned before anything exists: a pure function of the request, the server
//! config, the host's facts ([`HostFacts`]) and the run's identity (its leased uid).
//!
//! [`crate::request::check`] refuses a bad request before anything is looked at; [`preflight`] refuses what
//! the host cannot do before a uid is leased; [`plan_run`] returns the [`RunPlan`]: the bubblewrap
//! argv, the cgroup's operations, the nftables text, the run directory's operations (owners and
//! modes included), the programs to lay out and the seccomp list. `run::execute` only applies it
//! ([`crate::run::apply`]).
//!
//! Each layer's part is planned by a pure function of its folder, which its
//! [`RunLayer::plan`] calls; [`plan_run`] calls those in the order of their
//! [`crate::layer::PlanStage`]: cgroup, network, CLI gate, run directory, process (its argv needs
//! the others' parts).

use band::policy::{CompiledPolicy, Policy};
use band::proto::Layer;

use crate::config::{EffectiveLimits, ServerConfig};
use crate::error::{SetupError, SetupResult};
use crate::facts::{Helpers, HostFacts};
use crate::layer::{Parts, PlanInputs, RunLayer};
pub use crate::layers::cli::ExecPlan;
use crate::layers::cli::programs::{self, CliPlan};
use crate::layers::cli::shim::CliRules;
use crate::layers::fs::mounts;
use crate::layers::fs::workdir::{HostMount, RunDirPlan};
pub use crate::layers::process::ProcessPlan;
use crate::request::{Checked, DecodedFile};

pub use crate::layer::handover::Identity;

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
    if let Err(why) = &facts.randomization {
        return Err(SetupError::new(
            Layer::Cli,
            format!("address space randomization is off: {why}"),
        )
        .with_hint("sysctl -w kernel.randomize_va_space=2 (the kernel's default)"));
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

/// One run, planned: the common, cross-layer fields typed, each layer's part by type in
/// [`RunPlan::parts`] (cgroup: `CgroupPlan`; network: `Option<NetRunPlan>`, `None` without
/// `allow.net`; CLI gate: [`ExecPlan`]; process: [`ProcessPlan`]), and the run directory's.
#[derive(Debug, Clone)]
pub struct RunPlan<'a> {
    pub run_id: String,
    pub identity: Identity,
    pub limits: EffectiveLimits,
    /// What was planned before the lease: the commands, host mounts, write dirs, helpers and
    /// CLI rules, which several layers read.
    pub pre: Preflight,
    /// The filesystem layer's part: the run directory's operations. Not in [`RunPlan::parts`]
    /// because it borrows the request's file bytes (owning them would copy every bundle and
    /// workspace file once more); `None` until that layer is planned.
    pub run_dir: Option<RunDirPlan<'a>>,
    /// Each layer's part, by type.
    pub parts: Parts,
}

impl<'a> RunPlan<'a> {
    /// The run directory's plan, which `layer` needs; absent, the run does not start.
    pub fn run_dir(&self, layer: Layer) -> SetupResult<&RunDirPlan<'a>> {
        self.run_dir.as_ref().ok_or_else(|| {
            SetupError::new(
                layer,
                "internal: the run directory is not planned (is the filesystem layer listed?)",
            )
        })
    }
}

/// Plan the whole run for [`crate::layers::LAYERS`]. Pure: nothing is looked at but the
/// arguments. Each layer's part is a function of its folder.
pub fn plan_run<'a>(
    checked: &'a Checked<'_>,
    cfg: &ServerConfig,
    facts: &HostFacts,
    identity: &Identity,
) -> SetupResult<RunPlan<'a>> {
    plan_run_with(crate::layers::LAYERS, checked, cfg, facts, identity)
}

/// [`plan_run`] for the layers of `layers`: the common fields, then each layer's
/// [`RunLayer::plan`], sorted by [`RunLayer::plan_stage`] (stable).
pub fn plan_run_with<'a>(
    layers: &[&'static dyn RunLayer],
    checked: &'a Checked<'_>,
    cfg: &ServerConfig,
    facts: &HostFacts,
    identity: &Identity,
) -> SetupResult<RunPlan<'a>> {
    let pre = preflight(checked, cfg, facts)?;
    let mut plan = RunPlan {
        run_id: checked.req.run_id.clone(),
        identity: identity.clone(),
        limits: checked.limits,
        pre,
        run_dir: None,
        parts: Parts::default(),
    };
    let inp = PlanInputs {
        checked,
        cfg,
        facts,
    };
    for layer in crate::layers::plan_order(layers) {
        layer.plan(&inp, &mut plan)?;
    }
    Ok(plan)
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
