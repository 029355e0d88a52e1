//! The whole run, planned before anything exists: a pure function of the request, the server
//! config, the host's facts ([`HostFacts`]) and the run's identity (its leased uid).
//!
//! [`crate::request::check`] refuses a bad request before anything is looked at; [`preflight`] refuses what
//! the host cannot do before a uid is leased; [`plan_run`] returns the [`RunPlan`]: the bubblewrap
//! argv, the cgroup's operations, the nftables text, the run directory's operations (owners and
//! modes included), the programs to lay out and the seccomp list. `run::execute` only applies it.

use std::ffi::OsString;
use std::path::PathBuf;

use band::policy::{CompiledPolicy, Policy};
use band::proto::Layer;

use crate::config::{EffectiveLimits, ServerConfig};
use crate::error::{LayerExt, SetupError, SetupResult};
use crate::facts::{Helpers, HostFacts};
use crate::layers::cgroup::{self, CgroupLimits, CgroupPlan};
use crate::layers::cli::execcache;
use crate::layers::cli::programs::{self, CliPlan};
use crate::layers::cli::shim::CliRules;
use crate::layers::fs::mounts;
use crate::layers::fs::workdir::{self, HostMount, RunDirPlan, RunDirSpec};
use crate::layers::net::{self, NetRunPlan};
use crate::layers::process::bwrap::{self, ExtraBind, SandboxPlan};
use crate::layers::process::seccomp::{self, DeniedSyscall};
use crate::request::Checked;

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
    let cli = plan_cli_from(policy, &checked.compiled, facts)?;
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
        .map_err(|e| SetupError::new(Layer::Cli, e.to_string()))?;
    Ok(Preflight {
        cli,
        host_mounts,
        write_dirs,
        helpers,
        rules,
    })
}

/// The run's programs: `<state>/exec/runs/<run>` → `/band/x`, laid out by
/// [`execcache::ExecDir::create`] (under random names chosen then).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecPlan {
    pub state: PathBuf,
    pub root: PathBuf,
    /// (wrapped name, host file).
    pub programs: Vec<(String, PathBuf)>,
    /// band-shim's execute-only copy in the program cache.
    pub shim: PathBuf,
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

/// Plan the whole run. Pure: nothing is looked at but the arguments.
pub fn plan_run<'a>(
    checked: &'a Checked<'_>,
    cfg: &ServerConfig,
    facts: &HostFacts,
    identity: &Identity,
) -> SetupResult<RunPlan<'a>> {
    let req = checked.req;
    let pre = preflight(checked, cfg, facts)?;
    let limits = checked.limits;
    let hierarchy = facts
        .hierarchy
        .as_ref()
        .map_err(|e| SetupError::new(Layer::Cgroup, format!("no usable cgroup hierarchy: {e}")))?;
    let cgroup = cgroup::plan(hierarchy, &req.run_id, &cgroup_limits(&limits))
        .layer(Layer::Cgroup, "failed to create the run's cgroup")?;
    let net = if checked.compiled.net.is_empty() {
        None
    } else {
        Some(
            net::plan_run(
                &req.run_id,
                identity.uid,
                identity.slot,
                &checked.compiled.net,
                &facts.own_addrs,
                &facts.upstream,
            )
            .map_err(|e| {
                SetupError::new(Layer::Network, e.to_string())
                    .with_hint("the network layer needs nftables (apt-get install nftables) and a resolver in /etc/resolv.conf or dns_upstream in the server config")
            })?,
        )
    };
    let programs: Vec<(String, PathBuf)> = pre
        .cli
        .binaries
        .iter()
        .map(|b| (b.name.clone(), b.host.clone()))
        .collect();
    let shim_copy = facts
        .shim_copy
        .as_ref()
        .map_err(|e| SetupError::new(Layer::Cli, format!("failed to cache band-shim: {e}")))?
        .clone();
    let exec = ExecPlan {
        state: cfg.state_dir.clone(),
        root: execcache::runs_root(&cfg.state_dir).join(&req.run_id),
        programs,
        shim: shim_copy,
    };
    let wrappers: Vec<String> = pre.cli.binaries.iter().map(|b| b.name.clone()).collect();
    let compiled = &checked.compiled;
    let write_allowed = |p: &str| compiled.write.check(p).is_allowed();
    let run_dir = workdir::plan(&RunDirSpec {
        state: &cfg.state_dir,
        run_id: &req.run_id,
        disk_bytes: limits.disk_bytes,
        uid: identity.uid,
        gid: identity.gid,
        user: &identity.user,
        bundle: &checked.bundle,
        workspace: &checked.workspace,
        write_allowed: &write_allowed,
        write_dirs: &pre.write_dirs,
        input_json: &checked.input_json,
        config_json: checked.config_json.as_deref(),
        wrappers: &wrappers,
        host_mounts: &pre.host_mounts,
        masked: &facts.masked,
        lib_roots: &facts.lib_roots,
        resolv_conf: net.as_ref().map(|n| n.resolv_conf.as_str()),
    });
    let sandbox = SandboxPlan {
        run_dir: run_dir.root.clone(),
        shim: exec.shim.clone(),
        jail: pre.helpers.jail.clone(),
        exec_dir: exec.root.clone(),
        extra: pre
            .host_mounts
            .iter()
            .enumerate()
            .map(|(i, m)| ExtraBind {
                source: run_dir.host_mount(i),
                dest: m.sandbox.clone(),
                writable: m.writable,
            })
            .collect(),
        lib_binds: run_dir.lib_binds.clone(),
        entry: req.entry.clone(),
        has_config: checked.config_json.is_some(),
        share_net: net.is_some(),
        ipc_scope_required: net.is_some() && cfg.require_ipc_scope,
    };
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
        seccomp: seccomp::denied_syscalls(seccomp::Profile {
            share_net: sandbox.share_net,
            ..Default::default()
        }),
        sandbox,
        run_dir,
        bwrap: cfg.bwrap.clone(),
    })
}

fn cgroup_limits(l: &EffectiveLimits) -> CgroupLimits {
    CgroupLimits {
        memory_bytes: l.memory_bytes,
        pids: l.pids,
        cpu_quota_us: l.cpu_quota_us,
        cpu_period_us: l.cpu_period_us,
    }
}

/// [`programs::plan_cli`] with the binaries and heads of `facts`.
pub fn plan_cli_from(
    policy: &Policy,
    compiled: &CompiledPolicy,
    facts: &HostFacts,
) -> SetupResult<CliPlan> {
    programs::plan_cli(
        policy,
        compiled,
        &|name| facts.binaries.get(name).cloned(),
        &|path| facts.heads.get(path).cloned().unwrap_or_default(),
    )
}

/// How the jail starts the entry: a `#!` script whose interpreter is one of the run's programs
/// starts that program directly (what the kernel would do, minus a trip through band-shim, which
/// would only judge the skill's own entry point); anything else is exec'd as it is.
pub fn entry_exec(
    entry: &[u8],
    entry_path: &str,
    table: &execcache::ExecTable,
) -> Option<bwrap::JailExec> {
    let sb = execcache::parse_shebang(entry)?;
    let program = table.get(&sb.interp)?;
    let mut argv = vec![sb.interp.clone()];
    argv.extend(sb.arg.clone());
    argv.push(entry_path.to_string());
    Some(bwrap::JailExec {
        program: program.path.clone(),
        argv,
    })
}
