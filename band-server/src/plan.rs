//! The whole run, planned before anything exists: a pure function of the request, the server
//! config, the host's facts ([`HostFacts`]) and the run's identity (its leased uid).
//!
//! [`crate::request::check`] refuses a bad request before anything is looked at; [`preflight`] refuses what
//! the host cannot do before a uid is leased; [`plan_run`] returns the [`RunPlan`]: the bubblewrap
//! argv, the cgroup's operations, the nftables text, the run directory's operations (owners and
//! modes included), the programs to lay out and the seccomp list. The run only applies it
//! ([`crate::run::apply`]).
//!
//! Each layer's part is planned by a pure function of its folder; [`plan_run`] calls those in
//! order, each with exactly the earlier parts it reads as arguments: cgroup, network, CLI gate,
//! run directory (it reads the network's resolv.conf and the programs), process (its argv reads
//! every other part). The plan is a typed struct, one field per layer's part: a part a layer
//! needs that is not planned before it does not compile.

use std::path::PathBuf;

use band::policy::{CompiledPolicy, Policy};
use band::proto::Layer;

use crate::common::handover::{ExecView, ProcMask};
use crate::config::{EffectiveLimits, ServerConfig};
use crate::error::{SetupError, SetupResult};
use crate::facts::{Helpers, HostFacts};
use crate::layers::cgroup::{CgroupPlan, plan_run_cgroup};
pub use crate::layers::cli::ExecPlan;
use crate::layers::cli::programs::{self, CliPlan};
use crate::layers::cli::shim::CliRules;
use crate::layers::fs::RunDirInputs;
use crate::layers::fs::mounts;
use crate::layers::fs::workdir::{HostMount, RunDirPlan};
use crate::layers::net::{NetRunPlan, plan_network};
pub use crate::layers::process::ProcessPlan;
use crate::layers::process::bwrap::{ExtraBind, SandboxPlan};
use crate::request::{Checked, DecodedFile};

pub use crate::common::handover::Identity;

/// What can be planned before a uid is leased, and what the host must offer.
#[derive(Debug, Clone)]
pub struct Preflight {
    pub cli: CliPlan,
    pub(crate) host_mounts: Vec<HostMount>,
    pub(crate) write_dirs: Vec<String>,
    pub(crate) helpers: Helpers,
    pub(crate) rules: CliRules,
}

/// Everything that can fail before a uid is leased: commands, host mounts, the state directory,
/// the helpers, bubblewrap, the CLI rules.
pub(crate) fn preflight(
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

/// One run, planned: the common, cross-layer fields, and each layer's part.
#[derive(Debug, Clone)]
pub struct RunPlan<'a> {
    pub run_id: String,
    pub identity: Identity,
    pub limits: EffectiveLimits,
    /// What was planned before the lease: the commands, host mounts, write dirs, helpers and
    /// CLI rules, which several layers read.
    pub pre: Preflight,
    /// The cgroup's operations.
    pub cgroup: CgroupPlan,
    /// The network: `None` without `allow.net`.
    pub net: Option<NetRunPlan>,
    /// The CLI gate: the run's programs and exec folder.
    pub exec: ExecPlan,
    /// The filesystem: the run directory's operations. It borrows the request's file bytes
    /// (owning them would copy every bundle and workspace file once more).
    pub run_dir: RunDirPlan<'a>,
    /// The process: bubblewrap's argv and the seccomp list.
    pub process: ProcessPlan,
    /// The egress proxy's material (bound secrets, the run's CA), for the network layer: `None`
    /// for a run without bound secrets or HTTP rules.
    pub egress: Option<std::sync::Arc<crate::layers::net::proxy::Egress>>,
    /// What the run sees of it, for the process layer (its secrets and CA variables).
    pub run_egress: Option<crate::common::handover::RunEgress>,
}

/// Plan the whole run. Pure: nothing is looked at but the arguments. Each layer's part is a
/// function of its folder, called with the earlier parts it reads.
pub fn plan_run<'a>(
    checked: &'a Checked<'_>,
    cfg: &ServerConfig,
    facts: &HostFacts,
    identity: &Identity,
) -> SetupResult<RunPlan<'a>> {
    plan_run_with(checked, cfg, facts, identity, None)
}

/// [`plan_run`] for a run through the egress proxy: `egress` is its material
/// (`layers::net::proxy::Egress`, made before the plan: random placeholders, the run's CA).
pub fn plan_run_with<'a>(
    checked: &'a Checked<'_>,
    cfg: &ServerConfig,
    facts: &HostFacts,
    identity: &Identity,
    egress: Option<std::sync::Arc<crate::layers::net::proxy::Egress>>,
) -> SetupResult<RunPlan<'a>> {
    let run_egress = egress.as_ref().map(|e| e.handover(&checked.req.secrets));
    let pre = preflight(checked, cfg, facts)?;
    let run_id = checked.req.run_id.clone();
    let limits = checked.limits;
    let cgroup = plan_run_cgroup(&run_id, &limits, &facts.hierarchy)?;
    let net = plan_network(
        &run_id,
        identity,
        &checked.compiled.net,
        &facts.own_addrs,
        &facts.upstream,
    )?;
    let exec = crate::layers::cli::plan_exec(&cfg.state_dir, &run_id, &pre.cli, &facts.programs())?;
    let wrappers: Vec<String> = pre.cli.binaries.iter().map(|b| b.name.clone()).collect();
    // Each tree's mount point, where the sandbox has it (a user site's under the run's own
    // /tmp is made by bubblewrap; a Node environment's is in /skill).
    let tree_roots: Vec<PathBuf> = exec
        .runtime
        .iter()
        .map(|t| t.at.clone())
        .filter(|at| !at.starts_with("/tmp"))
        .collect();
    let hidden_trees: Vec<PathBuf> = exec
        .runtime
        .iter()
        .filter(|t| t.hidden)
        .map(|t| t.root.clone())
        .collect();
    let run_dir = crate::layers::fs::plan_run_dir(
        checked,
        cfg,
        identity,
        &RunDirInputs {
            host_mounts: &pre.host_mounts,
            write_dirs: &pre.write_dirs,
            wrappers: &wrappers,
            masked: &facts.masked,
            lib_roots: &facts.lib_roots,
            resolv_conf: net.as_ref().map(|n| n.resolv_conf.as_str()),
            ca_bundle: run_egress.as_ref().map(|e| e.ca_bundle.as_str()),
            java_truststore: run_egress
                .as_ref()
                .and_then(|e| e.java_truststore.as_deref()),
            exec: ExecView {
                root: &exec.root,
                self_links: &exec.self_links,
                links: &exec.links,
                tree_roots: &tree_roots,
                hidden_trees: &hidden_trees,
            },
        },
    );
    let process = crate::layers::process::plan_process(
        plan_sandbox(
            checked,
            cfg,
            &pre,
            &exec,
            &run_dir,
            net.is_some(),
            facts.proc_masks.as_ref().map_err(Clone::clone)?,
        ),
        cfg,
    );
    Ok(RunPlan {
        run_id,
        identity: identity.clone(),
        limits,
        pre,
        cgroup,
        net,
        exec,
        run_dir,
        process,
        egress,
        run_egress,
    })
}

/// What bubblewrap gets, the process layer's input (its argv is
/// [`crate::layers::process::bwrap::build_bwrap_args`] of this), made of the other layers' parts: the run directory, the programs, band-shim and
/// band-jail, the host mounts and the masked library trees. `share_net`: the run has `allow.net`.
/// Pure.
fn plan_sandbox(
    checked: &Checked<'_>,
    cfg: &ServerConfig,
    pre: &Preflight,
    exec: &ExecPlan,
    run_dir: &RunDirPlan<'_>,
    share_net: bool,
    proc_masks: &[ProcMask],
) -> SandboxPlan {
    SandboxPlan {
        run_dir: run_dir.root.clone(),
        shim: exec.shim.clone(),
        exec_dir: exec.root.clone(),
        self_links: exec.self_links.clone(),
        links: exec.links.clone(),
        extra: pre
            .host_mounts
            .iter()
            .enumerate()
            .map(|(i, m)| ExtraBind {
                source: run_dir.host_mount(i),
                dest: m.sandbox.clone(),
                writable: m.writable,
            })
            .chain(exec.runtime.iter().flat_map(|t| {
                // A declared program's tree (`layers::cli::runtime`): read-only, band-shim bound
                // over each of its programs (judged by the gate, run only by a rule naming it).
                // One the run's uid cannot reach on the host is bound from the run directory,
                // where band-server bound it (`RunDirSpec::hidden_trees`).
                let source = match t.hidden {
                    true => {
                        let i = exec
                            .runtime
                            .iter()
                            .filter(|o| o.hidden)
                            .take_while(|o| !std::ptr::eq(*o, t))
                            .count();
                        run_dir.hidden_tree(i)
                    }
                    false => t.root.clone(),
                };
                std::iter::once(ExtraBind {
                    source,
                    dest: t.at.clone(),
                    writable: false,
                })
                .chain(t.helpers().into_iter().map(|(at, _)| ExtraBind {
                    source: exec.shim.clone(),
                    dest: at,
                    writable: false,
                }))
            }))
            .collect(),
        entry: checked.req.entry.clone(),
        // The entry is read by its interpreter: band-shim is never bound over it (a `./` rule
        // naming it leaves it noexec at its path).
        bundled: pre
            .cli
            .bundled
            .iter()
            .filter(|b| b.path != checked.req.entry)
            .map(|b| b.path.clone())
            .collect(),
        has_config: checked.config_json.is_some(),
        share_net,
        ipc_scope_required: share_net && cfg.require_ipc_scope,
        proc_masks: proc_masks.to_vec(),
    }
}

/// [`programs::plan_cli`] with the binaries and heads of `facts`.
pub(crate) fn plan_cli_from(
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
