//! The whole run, planned before anything exists: a pure function of the request, the server
//! config, the host's facts ([`HostFacts`]) and the run's identity (its leased uid).
//!
//! [`check`] refuses a bad request before anything is looked at; [`preflight`] refuses what
//! the host cannot do before a uid is leased; [`plan_run`] returns the [`RunPlan`]: the bubblewrap
//! argv, the cgroup's operations, the nftables text, the run directory's operations (owners and
//! modes included), the programs to lay out and the seccomp list. `run::execute` only applies it.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use band::policy::{Category, CompiledPolicy, Decision, Policy};
use band::proto::{Layer, RunRequest, RunResult, Status};

use crate::config::{EffectiveLimits, ServerConfig, resolve_limits};
use crate::error::{LayerExt, SetupError, SetupResult};
use crate::facts::{Helpers, HostFacts};
use crate::layers::cgroup::{self, CgroupLimits, CgroupPlan};
use crate::layers::cli::execcache;
use crate::layers::cli::shim::{self, CliRules, ShimPolicy};
use crate::layers::fs::workdir::{self, HostMount, RunDirPlan, RunDirSpec};
use crate::layers::net::{self, NetRunPlan};
use crate::layers::process::bwrap::{self, BinaryBind, ExtraBind, SandboxPlan};
use crate::layers::process::seccomp::{self, DeniedSyscall};
use crate::request::{self, DecodedFile};

/// A request that passed the pure checks, decoded.
#[derive(Debug)]
pub struct Checked<'r> {
    pub req: &'r RunRequest,
    pub bundle: Vec<DecodedFile>,
    pub workspace: Vec<DecodedFile>,
    pub limits: EffectiveLimits,
    pub input_json: Vec<u8>,
    pub config_json: Option<Vec<u8>>,
    pub compiled: CompiledPolicy,
}

/// What [`check`] decided.
#[derive(Debug)]
pub enum Check<'r> {
    Run(Box<Checked<'r>>),
    /// Refused with a result of its own (not a setup failure): the input is too large.
    Refused(Box<RunResult>),
}

/// The pure checks, nothing created or looked at yet: protocol, run id, root, bundle paths and
/// hash, entry, workspace paths, secrets, limits, input size, policy compilation, workspace
/// coverage.
pub fn check<'r>(req: &'r RunRequest, cfg: &ServerConfig, is_root: bool) -> SetupResult<Check<'r>> {
    request::check_protocol(req)?;
    request::validate_run_id(&req.run_id)?;
    if !is_root {
        return Err(
            SetupError::new(Layer::Identity, "band-server must run as root")
                .with_hint("run it with sudo; it drops to a per-run uid before starting anything"),
        );
    }
    let bundle = request::decode_files("bundle", &req.bundle)?;
    request::check_integrity(&bundle, &req.bundle_sha256)?;
    request::check_entry(&bundle, &req.entry)?;
    let workspace = request::decode_files("workspace", &req.workspace)?;
    request::check_secrets(&req.secrets, &req.policy.secrets)?;
    let limits = resolve_limits(&req.policy.limits, cfg)?;
    let input_json =
        serde_json::to_vec(&req.input).layer(Layer::Io, "failed to encode the input")?;
    if input_json.len() as u64 > limits.input_bytes {
        let mut r = RunResult::setup_failed(
            &req.run_id,
            Layer::Io,
            format!(
                "input is {} bytes, over maxInputBytes {}",
                input_json.len(),
                limits.input_bytes
            ),
            None,
        );
        r.status = Status::InputInvalid;
        return Ok(Check::Refused(Box::new(r)));
    }
    let config_json = match &req.config {
        Some(c) => Some(serde_json::to_vec(c).layer(Layer::Io, "failed to encode the config")?),
        None => None,
    };
    let compiled = compile(&req.policy)?;
    check_workspace(&workspace, &compiled)?;
    Ok(Check::Run(Box::new(Checked {
        req,
        bundle,
        workspace,
        limits,
        input_json,
        config_json,
        compiled,
    })))
}

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
    let host_mounts = plan_host_mounts(policy, &cfg.state_dir, facts)?;
    facts.state_dir.clone()?;
    let write_dirs = plan_write_dirs(policy);
    let helpers = facts.helpers.clone()?;
    if !facts.bwrap_present {
        return Err(SetupError::new(
            Layer::Filesystem,
            format!("bubblewrap not found at {}", cfg.bwrap.display()),
        )
        .with_hint("apt-get install bubblewrap, or set `bwrap` in the server config"));
    }
    let rules = CliRules::from_policy(&cli.policy).map_err(|m| SetupError::new(Layer::Cli, m))?;
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
        .clone()
        .map_err(|e| SetupError::new(Layer::Cgroup, format!("no usable cgroup hierarchy: {e}")))?;
    let cgroup = cgroup::plan(&hierarchy, &req.run_id, &cgroup_limits(&limits))
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
                SetupError::new(Layer::Network, e)
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
        .clone()
        .map_err(|e| SetupError::new(Layer::Cli, format!("failed to cache band-shim: {e}")))?;
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
        sandbox,
        run_dir,
        bwrap: cfg.bwrap.clone(),
        seccomp: seccomp::denied_syscalls(),
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

/// [`plan_cli`] with the binaries and heads of `facts`.
pub fn plan_cli_from(
    policy: &Policy,
    compiled: &CompiledPolicy,
    facts: &HostFacts,
) -> SetupResult<CliPlan> {
    plan_cli(
        policy,
        compiled,
        &|name| facts.binaries.get(name).cloned(),
        &|path| facts.heads.get(path).cloned().unwrap_or_default(),
    )
}

/// The pieces of the CLI layer: binaries to bind, wrapper names, and the shim's policy file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliPlan {
    pub binaries: Vec<BinaryBind>,
    pub policy: ShimPolicy,
}

/// Build the CLI layer from the declared commands. `resolve` finds host binaries and `head`
/// reads their first bytes (see [`HostFacts`]). A declared command missing on the host fails closed; a missing essential is skipped.
pub fn plan_cli(
    policy: &Policy,
    compiled: &CompiledPolicy,
    resolve: &dyn Fn(&str) -> Option<PathBuf>,
    head: &dyn Fn(&Path) -> Vec<u8>,
) -> SetupResult<CliPlan> {
    let declared = compiled.cli.commands();
    let mut binaries = Vec::new();
    let mut essentials = Vec::new();
    for name in &declared {
        request::check_command_name(name)?;
        let host = resolve(name).ok_or_else(|| {
            SetupError::new(
                Layer::Cli,
                format!("declared command `{name}` is not installed on this host"),
            )
            .with_hint(format!(
                "install `{name}` where band-server runs, or remove it from allow.cli"
            ))
        })?;
        binaries.push(BinaryBind {
            name: name.clone(),
            host,
        });
    }
    for name in shim::ESSENTIALS {
        if declared.contains(*name) {
            essentials.push(name.to_string());
            continue;
        }
        if let Some(host) = resolve(name) {
            binaries.push(BinaryBind {
                name: name.to_string(),
                host,
            });
            essentials.push(name.to_string());
        }
    }
    // A declared `#!` command needs its interpreter in the sandbox. It is wrapped like any
    // command, but (unless also declared or essential) only runs the scripts it belongs to: see
    // `shim::resolve_call`.
    let interpreters: Vec<String> = binaries
        .iter()
        .filter(|b| declared.contains(&b.name))
        .filter_map(|b| execcache::parse_shebang(&head(&b.host)))
        .flat_map(|sb| [sb.interp.clone(), sb.effective_interpreter().to_string()])
        .collect();
    for name in interpreters {
        if binaries.iter().any(|b| b.name == name) || request::check_command_name(&name).is_err() {
            continue;
        }
        let host = resolve(&name).ok_or_else(|| {
            SetupError::new(
                Layer::Cli,
                format!(
                    "the interpreter `{name}` of a declared command is not installed on this host"
                ),
            )
        })?;
        binaries.push(BinaryBind { name, host });
    }
    binaries.sort_by(|a, b| a.name.cmp(&b.name));
    let mut allow = policy.allow.cli.clone();
    for p in &policy.insist.cli {
        if !allow.contains(p) {
            allow.push(p.clone());
        }
    }
    Ok(CliPlan {
        binaries,
        policy: ShimPolicy {
            allow,
            deny: policy.deny.cli.clone(),
            essentials,
        },
    })
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

pub(crate) fn allow_and_insist(policy: &Policy, cat: Category) -> Vec<String> {
    let mut v = policy.allow.get(cat).clone();
    for p in policy.insist.get(cat) {
        if !v.contains(p) {
            v.push(p.clone());
        }
    }
    v
}

/// Host paths to bind for absolute `allow.read` / `allow.write` (and insist) patterns: their
/// static prefix, if it exists (`facts.host_paths`). Refuses prefixes that would cover the
/// sandbox's own paths, and absolute deny patterns that a whole-path bind could not enforce.
pub fn plan_host_mounts(
    policy: &Policy,
    state: &Path,
    facts: &HostFacts,
) -> SetupResult<Vec<HostMount>> {
    let mut out: Vec<HostMount> = Vec::new();
    for (cat, writable) in [(Category::Read, false), (Category::Write, true)] {
        for p in allow_and_insist(policy, cat) {
            let Some(prefix) = workdir::absolute_prefix(&p) else {
                continue;
            };
            workdir::check_host_mount_path(&prefix, state).map_err(|m| {
                SetupError::new(Layer::Filesystem, format!("allow.{cat} `{p}`: {m}"))
            })?;
            let Some((host, is_dir)) = facts.host_paths.get(&prefix).cloned() else {
                continue;
            };
            workdir::check_host_mount_path(&host, state).map_err(|m| {
                SetupError::new(Layer::Filesystem, format!("allow.{cat} `{p}`: {m}"))
            })?;
            match out.iter_mut().find(|m| m.sandbox == prefix) {
                Some(m) => m.writable |= writable,
                None => out.push(HostMount {
                    host,
                    sandbox: prefix,
                    writable,
                    is_dir,
                }),
            }
        }
    }
    for cat in [Category::Read, Category::Write] {
        for d in policy.deny.get(cat) {
            let Some(dp) = workdir::absolute_prefix(d) else {
                continue;
            };
            if let Some(m) = out
                .iter()
                .find(|m| m.sandbox.starts_with(&dp) || dp.starts_with(&m.sandbox))
            {
                return Err(SetupError::new(
                    Layer::Filesystem,
                    format!(
                        "deny.{cat} `{d}` cannot be enforced inside the bound host path {}",
                        m.sandbox.display()
                    ),
                )
                .with_hint(
                    "narrow the absolute allow pattern so it does not include denied paths",
                ));
            }
        }
    }
    // Parents before children, so a nested bind lands on top.
    out.sort_by_key(|m| m.sandbox.components().count());
    Ok(out)
}

/// Workspace directories the run may create files in (from relative write patterns).
pub fn plan_write_dirs(policy: &Policy) -> Vec<String> {
    let mut dirs: BTreeSet<String> = BTreeSet::new();
    for p in allow_and_insist(policy, Category::Write) {
        if let Some(d) = workdir::write_dir(&p) {
            dirs.insert(d);
        }
    }
    dirs.into_iter().collect()
}

pub fn compile(policy: &Policy) -> SetupResult<CompiledPolicy> {
    CompiledPolicy::compile(policy).map_err(|e| {
        let layer = match e.category {
            Category::Cli => Layer::Cli,
            Category::Net => Layer::Network,
            Category::Read | Category::Write => Layer::Filesystem,
        };
        let err = SetupError::new(layer, e.to_string());
        match e.error.hint {
            Some(h) => err.with_hint(h),
            None => err,
        }
    })
}

/// The workspace the client sent must be what the policy lets the run see: each file matches
/// `allow.read` or `allow.write`, and none is denied for reading.
pub fn check_workspace(files: &[DecodedFile], compiled: &CompiledPolicy) -> SetupResult<()> {
    for f in files {
        let read = compiled.read.check(&f.path);
        if let Decision::Deny { rule } = &read {
            return Err(SetupError::new(
                Layer::Filesystem,
                format!("workspace file {} is denied by deny.read `{rule}`", f.path),
            ));
        }
        if !read.is_allowed() && !compiled.write.check(&f.path).is_allowed() {
            return Err(SetupError::new(
                Layer::Filesystem,
                format!(
                    "workspace file {} is not covered by allow.read or allow.write",
                    f.path
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn policy(allow_cli: &[&str]) -> Policy {
        let mut p = Policy::default();
        p.allow.cli = allow_cli.iter().map(|s| s.to_string()).collect();
        p
    }

    fn fake_resolve(name: &str) -> Option<PathBuf> {
        match name {
            "sh" => Some(PathBuf::from("/usr/bin/dash")),
            "cat" | "jq" | "python3" => Some(PathBuf::from(format!("/usr/bin/{name}"))),
            _ => None,
        }
    }

    #[test]
    fn cli_plan_binds_essentials_and_declared_commands() {
        let p = policy(&["jq -r *"]);
        let compiled = CompiledPolicy::compile(&p).unwrap_or_else(|e| panic!("{e}"));
        let plan = plan_cli(&p, &compiled, &fake_resolve, &|_| Vec::new())
            .unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<(&str, &str)> = plan
            .binaries
            .iter()
            .map(|b| (b.name.as_str(), b.host.to_str().unwrap_or("")))
            .collect();
        assert_eq!(
            names,
            vec![
                ("cat", "/usr/bin/cat"),
                ("jq", "/usr/bin/jq"),
                ("sh", "/usr/bin/dash")
            ]
        );
        assert_eq!(
            plan.policy.essentials,
            vec!["sh".to_string(), "cat".to_string()]
        );
        assert_eq!(plan.policy.allow, vec!["jq -r *".to_string()]);
    }

    #[test]
    fn a_declared_command_missing_on_the_host_fails_closed() {
        let p = policy(&["kubectl get *"]);
        let compiled = CompiledPolicy::compile(&p).unwrap_or_else(|e| panic!("{e}"));
        let got = plan_cli(&p, &compiled, &fake_resolve, &|_| Vec::new());
        assert!(
            matches!(&got, Err(e) if e.layer == Layer::Cli && e.message.contains("kubectl")),
            "{got:?}"
        );
    }

    #[test]
    fn sudo_can_never_be_declared() {
        let p = policy(&["sudo *"]);
        let compiled = CompiledPolicy::compile(&p).unwrap_or_else(|e| panic!("{e}"));
        let got = plan_cli(
            &p,
            &compiled,
            &|_| Some(PathBuf::from("/usr/bin/sudo")),
            &|_| Vec::new(),
        );
        assert!(matches!(&got, Err(e) if e.layer == Layer::Cli), "{got:?}");
    }

    #[test]
    fn write_dirs_cover_allow_and_insist() {
        let mut p = Policy::default();
        p.allow.write = vec!["out/**".into(), "/abs/**".into()];
        p.insist.write = vec!["reports/*.md".into()];
        assert_eq!(
            plan_write_dirs(&p),
            vec!["out".to_string(), "reports".to_string()]
        );
    }

    /// Facts with the real host paths of `p`'s absolute patterns, and nothing else.
    fn facts_for(p: &Policy) -> HostFacts {
        let mut host_paths = std::collections::BTreeMap::new();
        for cat in [Category::Read, Category::Write] {
            for pat in allow_and_insist(p, cat) {
                if let Some(prefix) = workdir::absolute_prefix(&pat)
                    && let Some(found) = crate::facts::host_path(&prefix)
                {
                    host_paths.insert(prefix, found);
                }
            }
        }
        HostFacts {
            binaries: Default::default(),
            heads: Default::default(),
            host_paths,
            state_dir: Ok(()),
            masked: Vec::new(),
            lib_roots: Vec::new(),
            helpers: Err(SetupError::new(Layer::Filesystem, "no helpers")),
            bwrap_present: false,
            hierarchy: Err("none".into()),
            upstream: Vec::new(),
            own_addrs: Vec::new(),
            shim_copy: Err("none".into()),
        }
    }

    #[test]
    fn host_mounts_refuse_reserved_paths_and_unenforceable_denies() {
        let state = Path::new("/run/band");
        let mut p = Policy::default();
        p.allow.read = vec!["/usr/bin/**".into()];
        assert!(
            matches!(plan_host_mounts(&p, state, &facts_for(&p)), Err(e) if e.layer == Layer::Filesystem)
        );
        let mut p = Policy::default();
        p.allow.read = vec!["/nonexistent-band-test/**".into()];
        assert_eq!(plan_host_mounts(&p, state, &facts_for(&p)), Ok(vec![]));
        // Not under /tmp: the sandbox's /tmp is its own.
        let dir = tempfile::tempdir_in("/var/tmp").unwrap_or_else(|e| panic!("{e}"));
        let d = dir.path().to_string_lossy().into_owned();
        let mut p = Policy::default();
        p.allow.read = vec![format!("{d}/**")];
        p.allow.write = vec![format!("{d}/**")];
        let got = plan_host_mounts(&p, state, &facts_for(&p)).unwrap_or_default();
        assert_eq!(got.len(), 1);
        assert!(got[0].writable && got[0].is_dir);
        p.deny.read = vec![format!("{d}/secret/**")];
        assert!(
            matches!(plan_host_mounts(&p, state, &facts_for(&p)), Err(e) if e.layer == Layer::Filesystem)
        );
    }

    #[test]
    fn workspace_must_be_covered_by_the_policy() {
        let mut p = Policy::default();
        p.allow.read = vec!["data/**".into()];
        p.allow.write = vec!["out/**".into()];
        p.deny.read = vec!["data/secret.txt".into()];
        let compiled = CompiledPolicy::compile(&p).unwrap_or_else(|e| panic!("{e}"));
        let f = |path: &str| DecodedFile {
            path: path.into(),
            mode: 0o644,
            data: vec![],
        };
        assert!(check_workspace(&[f("data/a.csv"), f("out/b.txt")], &compiled).is_ok());
        assert!(check_workspace(&[f("data/secret.txt")], &compiled).is_err());
        assert!(check_workspace(&[f("other.txt")], &compiled).is_err());
    }
}
