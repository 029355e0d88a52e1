//! The one path every run takes — `band run`, `band <skill>/<script>`, `band exec`, `band mcp`:
//! resolve the band → pick the target → check the input contract → collect secrets → read the
//! bundle and the admitted workspace files → hand one request to a [`Transport`] → check the
//! output contract → copy written files back.
//!
//! Before anything else the skill is read once and compared with its `band.lock`
//! ([`crate::lock`]); the bytes checked are the bytes sent. Every run, refused or not, ends as one
//! record in the ledger ([`crate::ledger`], written by [`super::record::record`]).
//!
//! Statuses (input_invalid, integrity_failed, output_invalid, denied, …) come back inside
//! [`Outcome::result`]; only user errors (unknown skill, broken band, missing secret, no server)
//! are `Err`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use sha2::{Digest, Sha256};

pub use super::cancel::Cancel;
use super::config::UserConfig;
pub use super::outcome::{LeftOut, Outcome, Preparation, Prepared, RunSpec};
use super::redact::Masker;
use super::transport::HostTransport;
pub use super::transport::Transport;
use super::{ClientError, Result};
use crate::ledger::{Durability, LockMark};
use crate::lock::{self, LockState, Tree, sha256_hex};
use crate::manifest::Target;
use crate::policy::{CompiledPolicy, Policy};
use crate::proto::{self, ErrorInfo, FileEntry, Layer, RunRequest, RunResult, Status};
use crate::skill::Resolved;

/// A user error (the message, and a hint on how to fix it).
fn user_error(message: impl Into<String>, hint: impl Into<String>) -> ClientError {
    ClientError::user(message, hint)
}

/// The transport for a target.
pub fn transport_for(target: &Target, config: &UserConfig) -> Result<Box<dyn Transport>> {
    match target {
        Target::Host => Ok(Box::new(HostTransport::new(config.warm())?)),
        Target::Qemu | Target::Lima | Target::Ssh { .. } => {
            Ok(Box::new(super::ssh::SshTransport::new(target)?))
        }
        Target::Sandboxd { host, port } => Ok(Box::new(super::sandboxd::SandboxdTransport::new(
            host, *port,
        )?)),
    }
}

/// Run a script end to end, and record it in the ledger. See the module docs. The process-wide
/// [`Cancel::global`] stops it (the CLI's signal handler sets it).
pub fn run(spec: &RunSpec, on_event: &mut dyn FnMut(&proto::Event)) -> Result<Outcome> {
    run_gated(spec, Early::none(), on_event, &|_| None)
}

/// [`run`], with a band-server that may have been started before the skill was read
/// ([`Early::guess`]): the run uses it if its target is the host, and drops it unused if not.
pub fn run_early(
    spec: &RunSpec,
    early: Early,
    on_event: &mut dyn FnMut(&proto::Event),
) -> Result<Outcome> {
    run_inner(spec, on_event, &|_| None, Cancel::global(), false, early)
}

/// A band-server started before the run's target is known, on the guess that the target is the
/// host. Its own start (exec, config, janitor pass, the host's facts that every run needs) then
/// overlaps band's reading of the skill too, not only the input's check and the bundle. A run
/// whose target is not the host (a band naming a VM) drops it: its stdin closes before any
/// request, it answers "no request", exits, and is reaped.
pub struct Early(Option<Box<dyn Transport>>);

impl Early {
    /// No guess: band-server starts when the target is known (`band mcp`, `band exec`).
    pub fn none() -> Early {
        Early(None)
    }

    /// Start band-server now when [`guess_host`] says so for this process, `--target` (`flag`)
    /// and the user config's `force_target`. A start that fails is forgotten (the run starts
    /// band-server again when the target is known, and reports the failure then).
    pub fn guess(flag: Option<&str>) -> Early {
        let Ok(config) = UserConfig::load() else {
            return Early(None);
        };
        let linux = cfg!(target_os = "linux");
        let root = crate::vm::cmd::is_root();
        if !guess_host(linux, root, flag, config.force_target.as_ref()) {
            return Early(None);
        }
        Early(HostTransport::new(config.warm()).ok().map(|mut t| {
            t.prestart();
            Box::new(t) as Box<dyn Transport>
        }))
    }
}

/// Whether to start band-server before the band is read: on Linux, as root only (without root
/// the start goes through `sudo -n`, and one that may go unused would be a privileged command,
/// and a line in the system's log, for nothing), and only when the first of `--target` (`flag`)
/// and the config's `force_target` that is set, if any, names the host ([`resolve_target`]'s
/// precedence). The band's `execution.target` is not known yet.
pub fn guess_host(
    linux: bool,
    root: bool,
    flag: Option<&str>,
    force_target: Option<&Target>,
) -> bool {
    let host = |t: &Target| *t == Target::Host;
    let named = match flag {
        Some(f) => Target::parse(f).is_ok_and(|t| host(&t)),
        None => force_target.is_none_or(host),
    };
    linux && root && named
}

/// [`run`], stopped by `cancel` instead of the process-wide token (`band mcp`: one per call).
pub fn run_cancellable(
    spec: &RunSpec,
    on_event: &mut dyn FnMut(&proto::Event),
    cancel: &Cancel,
) -> Result<Outcome> {
    run_inner(spec, on_event, &|_| None, cancel, false, Early::none())
}

/// [`run`], with a last check on the prepared request: `gate` may refuse the run (returning the
/// result to record, e.g. `denied`) before it is sent anywhere. `band exec` checks the agent's
/// command against `allow.cli` here. A band-server started `early` for it is then closed unused.
pub fn run_gated(
    spec: &RunSpec,
    early: Early,
    on_event: &mut dyn FnMut(&proto::Event),
    gate: &dyn Fn(&Prepared) -> Option<RunResult>,
) -> Result<Outcome> {
    run_inner(spec, on_event, gate, Cancel::global(), false, early)
}

/// [`run_gated`], asking band-server to observe which workspace files the run reads and writes
/// (`band learn`; the result's `observed`).
pub fn run_observed(
    spec: &RunSpec,
    on_event: &mut dyn FnMut(&proto::Event),
    gate: &dyn Fn(&Prepared) -> Option<RunResult>,
) -> Result<Outcome> {
    run_inner(spec, on_event, gate, Cancel::global(), true, Early::none())
}

fn run_inner(
    spec: &RunSpec,
    on_event: &mut dyn FnMut(&proto::Event),
    gate: &dyn Fn(&Prepared) -> Option<RunResult>,
    cancel: &Cancel,
    observe: bool,
    early: Early,
) -> Result<Outcome> {
    let started_at_ms = now_ms();
    // One reading of the user's config for the whole run: its ledger, its lock requirement, its
    // target.
    let config = UserConfig::load()?;
    let ledger = super::record::ledger_of(&config);
    // On the host, band-server starts as soon as the target is known (unless it was started on a
    // guess before: `Early`), and gets ready while the request is made (`Transport::prestart`); a
    // run refused before it starts drops it. (A VM's transport connects when it runs, as before.)
    let Early(mut early) = early;
    let mut on_target = |target: &Target| {
        if *target != Target::Host {
            // Started on a guess, and not this run's: closed and reaped now.
            early = None;
        } else if early.is_none() {
            early = transport_for(target, &config).ok().map(|mut t| {
                t.prestart();
                t
            });
        }
    };
    let prepared = match prepare(spec, &config, started_at_ms, &mut on_target)? {
        Preparation::Ready(mut p) => {
            p.request.observe = observe;
            p
        }
        Preparation::Refused(o) => {
            super::record::record(
                &ledger,
                &o,
                Vec::new(),
                spec.record_io,
                observe,
                Durability::Synced,
            )?;
            return Ok(*o);
        }
    };
    if let Some(refused) = gate(&prepared) {
        let outcome = finish(*prepared, refused, started_at_ms)?;
        super::record::record(
            &ledger,
            &outcome,
            Vec::new(),
            spec.record_io,
            observe,
            Durability::Synced,
        )?;
        return Ok(outcome);
    }
    // A run that could not be recorded must not start: its `start` record is written now (a full
    // disk or an unsafe ledger file stops it here), and made durable (`recorded`) before the
    // script starts. On the host the request goes first and band-server prepares the run while
    // the record syncs; the script waits for band's `go` (`RunRequest::start_on_go`).
    super::record::record_start(&ledger, &prepared, started_at_ms)?;
    let recorded = || super::record::sync_start(&ledger);
    let mut transport = match early {
        Some(t) => t,
        None => transport_for(&prepared.target, &config)?,
    };
    let mut prepared = prepared;
    prepared.request.start_on_go = transport.starts_on_go();
    let mut events = Vec::new();
    // Events are masked before anyone sees them (super::redact).
    let masker = Masker::new(&prepared.request.secrets);
    let mut masked = masker.events();
    let mut emit = |ev: proto::Event| {
        on_event(&ev);
        events.push(ev);
    };
    let result = match transport.run(
        &prepared.request,
        &mut |ev| masked.event(ev).into_iter().for_each(&mut emit),
        cancel,
        &recorded,
    ) {
        Ok(r) => r,
        // Cancelled, and the transport broke off (band-server or the connection went away
        // first): still a cancelled run, and recorded as one.
        Err(e) if cancel.is_cancelled() => cancelled_result(&prepared.request.run_id, &e),
        Err(e) => {
            return Err(ClientError::Transport {
                target: transport.name(),
                source: Box::new(e),
            });
        }
    };
    masked.finish().into_iter().for_each(&mut emit);
    let outcome = finish(*prepared, result, started_at_ms)?;
    // Its `start` is synced: the `run` record is not waited for (crate::ledger).
    super::record::record(
        &ledger,
        &outcome,
        events,
        spec.record_io,
        observe,
        Durability::Written,
    )?;
    Ok(outcome)
}

/// The result of a run cancelled while its transport failed (no result came back).
fn cancelled_result(run_id: &str, e: &ClientError) -> RunResult {
    let mut r = RunResult::setup_failed(
        run_id,
        Layer::Process,
        format!("cancelled; band-server gave no result ({e})"),
        None,
    );
    r.status = Status::Cancelled;
    r
}

/// Most differences listed in an integrity_failed message (all of them go to the ledger).
const MAX_LISTED_DIFFERENCES: usize = 20;

/// Read the skill once and hold it against its `band.lock`. `Err(outcome)` refuses the run.
fn check_lock(
    spec: &RunSpec,
    config: &UserConfig,
    run_id: &str,
    started_at_ms: u64,
) -> Result<std::result::Result<(Tree, LockMark), Box<Outcome>>> {
    let root = &spec.skill_root;
    let tree = Tree::read(root).map_err(|e| user_error(e.to_string(), e.hint()))?;
    let state = lock::check(root, &tree).map_err(|e| user_error(e.to_string(), e.hint()))?;
    let require = spec.require_lock || config.require_lock;
    let refusal = match state {
        LockState::Matches => return Ok(Ok((tree, LockMark::Matches))),
        LockState::Unlocked if !require => return Ok(Ok((tree, LockMark::Unlocked))),
        LockState::Unlocked => Refusal {
            message: format!(
                "{} has no {} and a lock is required (--require-lock or require_lock in the config)",
                root.display(),
                lock::LOCK_FILE
            ),
            hint: format!("check the skill, then run `band lock {}`", root.display()),
            integrity: Vec::new(),
            mark: LockMark::Unlocked,
        },
        LockState::Differs(diffs) => Refusal::differs(
            root,
            &format!("differs from its {}", lock::LOCK_FILE),
            &diffs,
        ),
    };
    integrity_refusal(spec, config, run_id, started_at_ms, &tree, refusal).map(Err)
}

/// Why a run is refused with integrity_failed.
struct Refusal {
    message: String,
    hint: String,
    /// Every difference (the message lists the first [`MAX_LISTED_DIFFERENCES`]).
    integrity: Vec<String>,
    mark: LockMark,
}

impl Refusal {
    fn differs(root: &Path, what: &str, diffs: &[lock::Difference]) -> Refusal {
        let all: Vec<String> = diffs.iter().map(|d| d.to_string()).collect();
        let mut listed = all
            .iter()
            .take(MAX_LISTED_DIFFERENCES)
            .cloned()
            .collect::<Vec<_>>()
            .join("; ");
        if all.len() > MAX_LISTED_DIFFERENCES {
            listed.push_str(&format!(
                "; and {} more",
                all.len() - MAX_LISTED_DIFFERENCES
            ));
        }
        // The hint says what changed (the paths), and that `band lint` checks it before a new
        // lock vouches for it (`band lock` refuses a skill lint finds errors in).
        let mut paths: Vec<&str> = Vec::new();
        for d in diffs {
            if !paths.contains(&d.path.as_str()) {
                paths.push(&d.path);
            }
        }
        let mut changed = paths
            .iter()
            .take(MAX_LISTED_DIFFERENCES)
            .map(|p| format!("`{p}`"))
            .collect::<Vec<_>>()
            .join(", ");
        if paths.len() > MAX_LISTED_DIFFERENCES {
            changed.push_str(&format!(
                " and {} more",
                paths.len() - MAX_LISTED_DIFFERENCES
            ));
        }
        Refusal {
            message: format!("{} {what}: {listed}", root.display()),
            hint: format!(
                "{changed} changed since the lock was written; if that was you, review the change, check it with `band lint {0}`, then run `band lock {0}`",
                root.display()
            ),
            integrity: all,
            mark: LockMark::Differs,
        }
    }
}

/// The outcome of a run refused for integrity. The band is not resolved for it (it may be the
/// changed file), so the target is the flag's, the config's or the default.
fn integrity_refusal(
    spec: &RunSpec,
    config: &UserConfig,
    run_id: &str,
    started_at_ms: u64,
    tree: &Tree,
    refusal: Refusal,
) -> Result<Box<Outcome>> {
    let mut result = RunResult::setup_failed(
        run_id,
        Layer::Integrity,
        refusal.message,
        Some(refusal.hint),
    );
    result.status = Status::IntegrityFailed;
    let input = spec.raw_input.clone();
    let input_json = serde_json::to_vec(&input)?;
    Ok(Box::new(Outcome {
        result,
        skill: crate::skill::load_skill(&spec.skill_root).0.name,
        script: spec.script.clone(),
        target: choose_target(spec.target.as_deref(), None, config)
            .map(|c| c.target)
            .unwrap_or(Target::Host),
        bundle_sha256: tree.bundle_sha256(),
        band_sha256: String::new(),
        policy_sha256: String::new(),
        input_bytes: input_json.len() as u64,
        input_sha256: sha256_hex(&input_json),
        output_bytes: 0,
        output_sha256: String::new(),
        started_at_ms,
        lock: refusal.mark,
        integrity: refusal.integrity,
        input,
        redact: Masker::default(),
        secret_warnings: Vec::new(),
        not_admitted: Vec::new(),
        not_writable: Vec::new(),
        without_exec: Vec::new(),
        links_left_out: LeftOut::default(),
    }))
}

/// The request's bundle: the tree's regular files. Symlinks are refused (band-server takes files only).
fn bundle_of(root: &Path, tree: &Tree) -> Result<Vec<FileEntry>> {
    if let Some(link) = tree.links().next() {
        return Err(user_error(
            format!(
                "{} is a symlink; skills must not contain links",
                root.join(&link.path).display()
            ),
            "copy the file into the skill",
        ));
    }
    Ok(tree
        .files()
        .map(|n| FileEntry {
            path: n.path.clone(),
            mode: n.mode,
            data: B64.encode(&n.data),
        })
        .collect())
}

/// Resolve, choose the target, check the input and secrets, read the bundle and workspace.
/// `config` is the user's, read once for the run. `on_target` is called once, with the target,
/// as soon as it is settled (before the input is checked and the bundle and workspace read).
pub fn prepare(
    spec: &RunSpec,
    config: &UserConfig,
    started_at_ms: u64,
    on_target: &mut dyn FnMut(&Target),
) -> Result<Preparation> {
    let root = &spec.skill_root;
    let run_id = super::workspace::random_hex();
    let (tree, lock) = match check_lock(spec, config, &run_id, started_at_ms)? {
        Ok(t) => t,
        Err(refused) => return Ok(Preparation::Refused(refused)),
    };
    let band = ScriptBand::resolve(root, &spec.script)?;
    let choice = choose_target(
        spec.target.as_deref(),
        band.resolved.target.as_ref(),
        config,
    )?;
    say_once(&choice.note);
    on_target(&choice.target);
    let settled = Settled {
        band_sha256: band.sha256()?,
        policy_sha256: sha256_hex(&serde_json::to_vec(&band.resolved.policy)?),
        run_id,
        target: choice.target,
        bundle_sha256: tree.bundle_sha256(),
        started_at_ms,
        lock,
    };
    let schemas = schemas_for(spec, lock);
    let CheckedInput { input, args } = match check_input(spec, &schemas, &band, &settled)? {
        Ok(checked) => checked,
        Err(refused) => return Ok(Preparation::Refused(refused)),
    };
    let secrets = secrets_of(&band.resolved.policy)?;
    let bundle = bundle_of(root, &tree)?;
    if lock == LockMark::Matches
        && let Some(refused) = moved_since_check(spec, config, &settled, &tree)?
    {
        return Ok(Preparation::Refused(refused));
    }
    let ws_root = super::workspace::WorkspaceRoot::open(
        &spec.workspace,
        spec.workspace != Path::new("."),
        spec.allow_system_workspace,
    )?;
    let super::workspace::WorkspaceFiles {
        files: workspace,
        links,
        links_count,
    } = super::workspace::read_workspace(&ws_root, &band.compiled)?;
    // A signed skill sends its lock and signature: band-server verifies both and takes the run's
    // tier from its own site policy (a lock that does not match the skill never runs).
    let signed = if lock == LockMark::Matches {
        crate::sign::read_signed(root).map_err(ClientError::Fs)?
    } else {
        None
    };
    let workspace_folders = Some(super::workspace::write_folders(
        &ws_root,
        &band.resolved.policy,
    ));
    let request = RunRequest {
        protocol: proto::PROTOCOL_VERSION,
        run_id: settled.run_id,
        skill: band.skill,
        script: spec.script.clone(),
        entry: band.entry.to_string_lossy().into_owned(),
        bundle,
        bundle_sha256: settled.bundle_sha256,
        policy: band.resolved.policy,
        input,
        config: band.resolved.config,
        secrets,
        workspace,
        trace: spec.trace,
        observe: false,
        args,
        signed,
        narrowing: super::narrow::read()?.into_iter().map(|(n, _)| n).collect(),
        stdin: false,
        start_on_go: false,
        workspace_folders,
    };
    Ok(Preparation::Ready(Box::new(Prepared {
        request,
        target: settled.target,
        skill_root: root.clone(),
        workspace: ws_root,
        band_sha256: settled.band_sha256,
        policy_sha256: settled.policy_sha256,
        lock,
        schemas,
        links_left_out: LeftOut {
            named: links,
            count: links_count,
        },
    })))
}

/// The band that governs a script: resolved, and compiled.
struct ScriptBand {
    /// The skill's name.
    skill: String,
    /// The script's entry file, relative to the skill.
    entry: PathBuf,
    resolved: Resolved,
    compiled: CompiledPolicy,
}

impl ScriptBand {
    /// Read the skill, find the script, and resolve and compile its band; a band with errors is
    /// a user error (nothing runs).
    fn resolve(root: &Path, script: &str) -> Result<ScriptBand> {
        let (skill, _) = crate::skill::load_skill(root);
        // The same check (and did-you-mean) as `band run`'s, for a caller that reaches here
        // without it (MCP, whose catalog may be older than the skill).
        super::skills::check_script(&skill, script)?;
        let Some(entry) = skill.script(script).map(|s| s.entry.clone()) else {
            return Err(user_error(
                format!("skill `{}` has no script `{script}`", skill.name),
                "`band list` shows the scripts",
            ));
        };
        let (resolved, diags) = crate::skill::resolve_script(&skill, script);
        let Some(resolved) = resolved else {
            let errors: Vec<String> = diags
                .iter()
                .filter(|d| d.is_error())
                .map(|d| d.to_string())
                .collect();
            return Err(user_error(
                format!(
                    "the band for `{}/{script}` has errors; nothing ran\n{}",
                    skill.name,
                    errors.join("\n")
                ),
                format!("run `band lint {}`", root.display()),
            ));
        };
        let compiled = CompiledPolicy::compile(&resolved.policy)
            .map_err(|e| user_error(e.to_string(), "run `band lint`"))?;
        Ok(ScriptBand {
            skill: skill.name,
            entry,
            resolved,
            compiled,
        })
    }

    /// SHA-256 over the band files that made the policy, in resolution order.
    fn sha256(&self) -> Result<String> {
        let mut h = Sha256::new();
        for src in &self.resolved.sources {
            h.update(fs_err::read(src).map_err(ClientError::Fs)?);
        }
        Ok(hex::encode(h.finalize()))
    }
}

/// What is settled of a run once its band and target are: what a run refused for its input
/// records, and what its request and [`Prepared`] carry.
struct Settled {
    run_id: String,
    target: Target,
    bundle_sha256: String,
    band_sha256: String,
    policy_sha256: String,
    started_at_ms: u64,
    lock: LockMark,
}

impl Settled {
    /// The outcome of a run refused for its input (input_invalid). `input_json` is `input` as
    /// sent; the message is masked of the band's declared `secrets`.
    fn refuse_input(
        &self,
        spec: &RunSpec,
        band: &ScriptBand,
        message: String,
        input: serde_json::Value,
        input_json: &[u8],
    ) -> Box<Outcome> {
        let mut result = RunResult::setup_failed(
            &self.run_id,
            Layer::Io,
            message,
            Some(format!(
                "`band help {}/{}` lists the arguments",
                band.skill, spec.script
            )),
        );
        result.status = Status::InputInvalid;
        // The schema's messages quote the input, which may hold a declared secret.
        let redact = Masker::new(&read_secrets(&band.resolved.policy.secrets));
        redact.mask_result(&mut result);
        Box::new(Outcome {
            result,
            skill: band.skill.clone(),
            script: spec.script.clone(),
            target: self.target.clone(),
            bundle_sha256: self.bundle_sha256.clone(),
            band_sha256: self.band_sha256.clone(),
            policy_sha256: self.policy_sha256.clone(),
            input_bytes: input_json.len() as u64,
            input_sha256: sha256_hex(input_json),
            output_bytes: 0,
            output_sha256: String::new(),
            started_at_ms: self.started_at_ms,
            lock: self.lock,
            integrity: Vec::new(),
            input,
            redact,
            secret_warnings: Vec::new(),
            not_admitted: Vec::new(),
            not_writable: Vec::new(),
            without_exec: Vec::new(),
            links_left_out: LeftOut::default(),
        })
    }
}

/// The schemas the input is checked against: the caller's, if it loaded them; a locked skill's
/// are read here, between its two readings (the lock check, and the check before the request),
/// so that what checks the input is what the lock names.
fn schemas_for(spec: &RunSpec, lock: LockMark) -> crate::contract::SchemaSet {
    match &spec.schemas {
        Some(s) if lock != LockMark::Matches => s.clone(),
        _ => crate::contract::SchemaSet::load_dir(&spec.skill_root).0,
    }
}

/// The input, validated against the script's contract (coerced from CLI strings) and held to
/// the band's maxInputBytes, and the command-line args it gives an argv-style script.
/// `Err(outcome)` refuses the run (input_invalid).
fn check_input(
    spec: &RunSpec,
    schemas: &crate::contract::SchemaSet,
    band: &ScriptBand,
    settled: &Settled,
) -> Result<std::result::Result<CheckedInput, Box<Outcome>>> {
    let script = spec.script.as_str();
    // No input schema: the script takes no input (an empty object), as upstream's did.
    let contract = schemas.input_contract(script).map_err(|e| {
        user_error(
            format!("input schema: {e}"),
            format!("run `band lint {}`", spec.skill_root.display()),
        )
    })?;
    let raw_bytes = serde_json::to_vec(&spec.raw_input)?;
    let input = match contract.coerce_and_validate(spec.raw_input.clone()) {
        Ok(v) => v,
        Err(violations) => {
            let msg = describe_violations("input", &violations);
            return Ok(Err(settled.refuse_input(
                spec,
                band,
                msg,
                spec.raw_input.clone(),
                &raw_bytes,
            )));
        }
    };
    let args = argv_args(schemas, script, &input);
    let input_json = serde_json::to_vec(&input)?;
    let input_bytes = input_json.len() as u64;
    if let Some(max) = band
        .resolved
        .policy
        .limits
        .max_input_bytes
        .filter(|m| input_bytes > *m)
    {
        return Ok(Err(settled.refuse_input(
            spec,
            band,
            format!("input is {input_bytes} bytes; the band allows {max} (maxInputBytes)"),
            input,
            &input_json,
        )));
    }
    Ok(Ok(CheckedInput { input, args }))
}

/// The input of a run as checked, and the args it gives an argv-style script.
struct CheckedInput {
    input: serde_json::Value,
    args: Vec<String>,
}

/// An argv-style script's (`band wrap`) `args`, which it gets on its command line too; none for
/// any other script.
fn argv_args(
    schemas: &crate::contract::SchemaSet,
    script: &str,
    input: &serde_json::Value,
) -> Vec<String> {
    if !schemas.takes_argv(script) {
        return Vec::new();
    }
    input["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect()
}

/// The run's secrets from the environment; a required one that is missing is a user error
/// (before anything starts).
fn secrets_of(policy: &Policy) -> Result<BTreeMap<String, String>> {
    let missing: Vec<&str> = policy
        .required_secrets
        .iter()
        .filter(|n| std::env::var_os(n).is_none())
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(user_error(
            format!(
                "missing required secret{}: {}",
                if missing.len() == 1 { "" } else { "s" },
                missing.join(", ")
            ),
            format!(
                "set {} in your environment, e.g. `export {}=...`",
                if missing.len() == 1 { "it" } else { "them" },
                missing[0]
            ),
        ));
    }
    Ok(read_secrets(&policy.secrets))
}

/// A locked skill read again, since its band and schemas were read after the check: the
/// refusal (integrity_failed) if it moved meanwhile.
fn moved_since_check(
    spec: &RunSpec,
    config: &UserConfig,
    settled: &Settled,
    tree: &Tree,
) -> Result<Option<Box<Outcome>>> {
    let root = &spec.skill_root;
    let again = Tree::read(root).map_err(|e| user_error(e.to_string(), e.hint()))?;
    let moved = tree.lock().diff(&again.lock());
    if moved.is_empty() {
        return Ok(None);
    }
    let refusal = Refusal::differs(root, "changed while band was preparing the run", &moved);
    integrity_refusal(
        spec,
        config,
        &settled.run_id,
        settled.started_at_ms,
        &again,
        refusal,
    )
    .map(Some)
}

/// The values of the named secrets that the environment has.
fn read_secrets(names: &[String]) -> BTreeMap<String, String> {
    names
        .iter()
        .filter_map(|n| std::env::var(n).ok().map(|v| (n.clone(), v)))
        .collect()
}

/// Check the output contract, copy written files back, and fill in the fingerprints.
pub fn finish(prepared: Prepared, mut result: RunResult, started_at_ms: u64) -> Result<Outcome> {
    let script = prepared.request.script.clone();
    if result.status == Status::Ok {
        check_output(&prepared.schemas, &script, &mut result)?;
    }
    // A file band could not write back, or a folder it could not make, is a refused write on the
    // result (and so in its record and its final line), not an error that would lose the result.
    let back = super::workspace::write_back(
        &prepared.workspace,
        &result.written,
        &result.written_folders,
    )?;
    result.denied.extend(back.refused);
    // What the run shows is masked; its output and written files are not, but are warned about.
    let redact = Masker::new(&prepared.request.secrets);
    let secret_warnings = redact.warnings(&result);
    redact.mask_result(&mut result);
    let failed = matches!(result.status, Status::ScriptFailed | Status::Denied)
        && result.exit_code.is_some_and(|c| c != 0);
    let which = match result.status {
        _ if failed => Some(super::unadmitted::Words::Failed),
        Status::Ok => Some(super::unadmitted::Words::PathLike),
        _ => None,
    };
    let policy = CompiledPolicy::compile(&prepared.request.policy).ok();
    let not_admitted = match (&policy, which) {
        (Some(policy), Some(which)) => super::unadmitted::not_admitted(
            &prepared.workspace,
            policy,
            &prepared.request.workspace,
            &result.written,
            &result.written_folders,
            &super::unadmitted::named_paths(
                &result.stderr,
                &result.stdout,
                &prepared.request.input,
                which,
            ),
        ),
        _ => Vec::new(),
    };
    let not_writable = match &policy {
        Some(policy) if failed => {
            super::unwritable::not_writable(&prepared.workspace, policy, &result.stderr)
        }
        _ => Vec::new(),
    };
    let input_json = serde_json::to_vec(&prepared.request.input)?;
    let output_json = result
        .output
        .as_ref()
        .map(serde_json::to_vec)
        .transpose()?
        .unwrap_or_default();
    Ok(Outcome {
        skill: prepared.request.skill.clone(),
        script,
        target: prepared.target.clone(),
        bundle_sha256: prepared.request.bundle_sha256.clone(),
        band_sha256: prepared.band_sha256.clone(),
        policy_sha256: prepared.policy_sha256.clone(),
        input_bytes: input_json.len() as u64,
        input_sha256: sha256_hex(&input_json),
        output_bytes: output_json.len() as u64,
        output_sha256: if output_json.is_empty() {
            String::new()
        } else {
            sha256_hex(&output_json)
        },
        started_at_ms,
        lock: prepared.lock,
        integrity: Vec::new(),
        input: prepared.request.input,
        result,
        redact,
        secret_warnings,
        not_admitted,
        not_writable,
        without_exec: back.without_exec,
        links_left_out: prepared.links_left_out,
    })
}

/// The output contract is checked here, on the host, strictly.
fn check_output(
    schemas: &crate::contract::SchemaSet,
    script: &str,
    result: &mut RunResult,
) -> Result<()> {
    let Some(rel) = schemas.output_rel(script) else {
        return Ok(());
    };
    let contract = schemas
        .compile(&rel)
        .map_err(|e| user_error(format!("output schema: {e}"), "run `band lint`"))?;
    let value = result.output.clone().unwrap_or(serde_json::Value::Null);
    if let Err(v) = contract.validate(&value) {
        result.status = Status::OutputInvalid;
        result.error = Some(ErrorInfo {
            layer: Layer::Io,
            message: describe_violations("output", &v),
            hint: Some(format!("the script's output must match {rel}")),
        });
    }
    Ok(())
}

/// Contract violations as one line: `input /x: message; input /y: …`.
fn describe_violations(what: &str, violations: &[crate::contract::Violation]) -> String {
    violations
        .iter()
        .map(|v| {
            let path = if v.instance_path.is_empty() {
                "/"
            } else {
                &v.instance_path
            };
            format!("{what} {path}: {}", v.message)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// What the default target depends on (Linux): looked at only when no target was chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFacts {
    /// band runs as root (the host target starts band-server itself).
    pub is_root: bool,
    /// `sudo -n` may run band-server.
    pub sudo_works: bool,
    /// The VM `band setup` made, if any (qemu, else lima).
    pub vm: Option<Target>,
}

impl HostFacts {
    /// This machine's (runs `sudo -n -l` when not root).
    pub fn this() -> HostFacts {
        let is_root = crate::vm::cmd::is_root();
        HostFacts {
            is_root,
            sudo_works: !is_root && super::transport::host_can_start(),
            vm: super::config::vm_paths()
                .ok()
                .and_then(|p| crate::vm::driver::select::set_up_vm(&p)),
        }
    }
}

/// A chosen target, why it was chosen, and what to tell the user about the choice (once, on stderr).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetChoice {
    pub target: Target,
    pub reason: TargetReason,
    pub note: Option<String>,
}

/// Which step of the precedence chose the target (docs/vm.md, "Choosing a target").
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "by")]
pub enum TargetReason {
    /// `--target` (of `band run`, `band exec` or `band mcp`).
    Flag,
    /// `force_target` in the user config.
    ForceTarget,
    /// The band's `execution.target`.
    Band,
    /// The band's `execution.target`, mapped by `[targets]` in the user config.
    BandMapped { from: String },
    /// `target` in the user config.
    Config,
    /// Nothing named one: [`default_target`].
    Default,
}

impl std::fmt::Display for TargetReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TargetReason::Flag => f.write_str("--target"),
            TargetReason::ForceTarget => f.write_str("force_target in the config"),
            TargetReason::Band => f.write_str("the band's execution.target"),
            TargetReason::BandMapped { from } => {
                write!(
                    f,
                    "the band's execution.target {from}, mapped by [targets] in the config"
                )
            }
            TargetReason::Config => f.write_str("target in the config"),
            TargetReason::Default => f.write_str("the default"),
        }
    }
}

/// The target when none was chosen: off Linux, lima. On Linux, the host when band-server can
/// start there (root, or `sudo -n`); else the VM `band setup` made, saying so; else the host,
/// whose error says how to choose ([`super::transport::without_root`]).
pub fn default_target(linux: bool, facts: &HostFacts) -> TargetChoice {
    let target = |target| TargetChoice {
        target,
        reason: TargetReason::Default,
        note: None,
    };
    if !linux {
        return target(Target::Lima);
    }
    if facts.is_root || facts.sudo_works {
        return target(Target::Host);
    }
    match &facts.vm {
        Some(vm) => TargetChoice {
            target: vm.clone(),
            reason: TargetReason::Default,
            note: Some(format!(
                "not root and no sudo: running on the VM ({vm}); choose with --target"
            )),
        },
        None => target(Target::Host),
    }
}

/// The target of a run, by precedence: `--target`, then the config's `force_target`, then the
/// band's `execution.target` (mapped by the config's `[targets]` when it names it), then the
/// config's `target`, then `default` (asked only then). Pure: the caller loads the config.
pub fn resolve_target(
    flag: Option<&str>,
    band: Option<&Target>,
    config: &UserConfig,
    default: &dyn Fn() -> TargetChoice,
) -> Result<TargetChoice> {
    let hint = format!("use one of: {}", crate::manifest::TARGET_CHOICES);
    let chosen = |target, reason| TargetChoice {
        target,
        reason,
        note: None,
    };
    if let Some(t) = flag {
        return Target::parse(t)
            .map(|t| chosen(t, TargetReason::Flag))
            .map_err(|e| user_error(format!("--target: {e}"), hint));
    }
    if let Some(t) = &config.force_target {
        let mut c = chosen(t.clone(), TargetReason::ForceTarget);
        if let Some(b) = band.filter(|b| *b != t) {
            c.note = Some(format!(
                "force_target in the config runs this band on {t}, not its {b}"
            ));
        }
        return Ok(c);
    }
    if let Some(b) = band {
        return match config.mapped(b) {
            Some(to) => Ok(TargetChoice {
                target: to.clone(),
                reason: TargetReason::BandMapped {
                    from: b.to_string(),
                },
                note: Some(format!(
                    "the band's target {b} runs on {to} ([targets] in the config)"
                )),
            }),
            // The skill's author does not choose where the user's workspace, input and secrets
            // (and a sandboxd token) are sent: only the user does, by a flag or the config.
            None if b.is_remote() => Err(user_error(
                format!(
                    "the band's execution.target {b} is another machine, and a band does not choose where band sends your files, input and secrets"
                ),
                format!(
                    "run it with --target (`--target {b}` if you trust it), or map it in [targets] of the config (docs/vm.md)"
                ),
            )),
            None => Ok(chosen(b.clone(), TargetReason::Band)),
        };
    }
    if let Some(t) = &config.target {
        let path = UserConfig::path()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        return Target::parse(t)
            .map(|t| chosen(t, TargetReason::Config))
            .map_err(|e| user_error(format!("{path}: target: {e}"), hint));
    }
    Ok(default())
}

/// [`resolve_target`] with this machine's default ([`default_target`] over [`HostFacts::this`]).
pub fn choose_target(
    flag: Option<&str>,
    band: Option<&Target>,
    config: &UserConfig,
) -> Result<TargetChoice> {
    resolve_target(flag, band, config, &|| {
        default_target(cfg!(target_os = "linux"), &HostFacts::this())
    })
}

/// Show a target choice's note, once per process (`band mcp` runs many).
fn say_once(note: &Option<String>) {
    static SAID: std::sync::Once = std::sync::Once::new();
    if let Some(n) = note {
        SAID.call_once(|| eprintln!("band: {n}"));
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(is_root: bool, sudo_works: bool, vm: Option<Target>) -> HostFacts {
        HostFacts {
            is_root,
            sudo_works,
            vm,
        }
    }

    #[test]
    fn band_server_starts_on_a_guess_only_as_root_on_linux_when_nothing_names_another_target() {
        let qemu = Target::Qemu;
        assert!(guess_host(true, true, None, None));
        assert!(guess_host(true, true, Some("host"), None));
        assert!(guess_host(true, true, None, Some(&Target::Host)));
        assert!(!guess_host(true, true, Some("qemu"), None));
        assert!(!guess_host(true, true, None, Some(&qemu)));
        // --target wins over force_target, as in the precedence.
        assert!(guess_host(true, true, Some("host"), Some(&qemu)));
        assert!(!guess_host(true, true, Some("qemu"), Some(&Target::Host)));
        // A bad --target: no guess (the run's own check reports it).
        assert!(!guess_host(true, true, Some("cloudflare"), None));
        // Not root (sudo), or not Linux: never on a guess.
        assert!(!guess_host(true, false, None, None));
        assert!(!guess_host(false, true, None, None));
    }

    #[test]
    fn the_default_is_the_host_when_band_server_can_start_there() {
        for f in [
            facts(true, false, None),
            facts(true, false, Some(Target::Qemu)),
            facts(false, true, Some(Target::Qemu)),
        ] {
            assert_eq!(
                default_target(true, &f),
                TargetChoice {
                    target: Target::Host,
                    reason: TargetReason::Default,
                    note: None
                },
                "{f:?}"
            );
        }
    }

    #[test]
    fn not_root_and_no_sudo_goes_to_the_vm_and_says_so() {
        let c = default_target(true, &facts(false, false, Some(Target::Qemu)));
        assert_eq!(c.target, Target::Qemu);
        assert_eq!(
            c.note.as_deref(),
            Some("not root and no sudo: running on the VM (qemu); choose with --target")
        );
        let c = default_target(true, &facts(false, false, Some(Target::Lima)));
        assert_eq!(c.target, Target::Lima);
        // No VM: the host, whose error says how to choose.
        let c = default_target(true, &facts(false, false, None));
        assert_eq!((c.target, c.note), (Target::Host, None));
        // Off Linux: lima, whatever the facts.
        assert_eq!(
            default_target(false, &facts(true, true, None)).target,
            Target::Lima
        );
    }

    fn config(text: &str) -> UserConfig {
        UserConfig::parse(text).expect("config")
    }

    /// `(target, reason)` of a choice whose default is never needed.
    fn pick(flag: Option<&str>, band: Option<&Target>, config: &UserConfig) -> (String, String) {
        let never = || -> TargetChoice { panic!("the default is not needed") };
        let c = resolve_target(flag, band, config, &never).expect("a target");
        (c.target.to_string(), c.reason.to_string())
    }

    fn pair(target: &str, reason: &str) -> (String, String) {
        (target.to_string(), reason.to_string())
    }

    #[test]
    fn each_step_of_the_precedence() {
        let full = config(
            "target = \"qemu\"\nforce_target = \"ssh://me@box\"\n[targets]\nlima = \"host\"\n",
        );
        let lima = Some(&Target::Lima);
        // 1. --target wins over everything.
        assert_eq!(pick(Some("host"), lima, &full), pair("host", "--target"));
        assert_eq!(
            pick(Some("local-lima"), None, &full),
            pair("lima", "--target")
        );
        // 2. force_target wins over the band (mapped or not) and the config's target.
        assert_eq!(
            pick(None, lima, &full),
            pair("ssh://me@box", "force_target in the config")
        );
        // 3. the band's target, mapped by [targets] when named there.
        let mapped = config("target = \"qemu\"\n[targets]\nlocal-lima = \"host\"\n");
        assert_eq!(
            pick(None, lima, &mapped),
            pair(
                "host",
                "the band's execution.target lima, mapped by [targets] in the config"
            )
        );
        assert_eq!(
            pick(None, Some(&Target::Qemu), &mapped),
            pair("qemu", "the band's execution.target")
        );
        // 4. the config's target when the band names none.
        assert_eq!(
            pick(None, None, &mapped),
            pair("qemu", "target in the config")
        );
        // 5. the default, only when nothing named a target.
        let default = || TargetChoice {
            target: Target::Lima,
            reason: TargetReason::Default,
            note: None,
        };
        let c = resolve_target(None, None, &UserConfig::default(), &default).expect("target");
        assert_eq!((c.target, c.reason), (Target::Lima, TargetReason::Default));
        // [targets] maps the band's target only, not --target or the config's target.
        let lima_to_host = config("target = \"lima\"\n[targets]\nlima = \"host\"\n");
        assert_eq!(
            pick(Some("lima"), None, &lima_to_host),
            pair("lima", "--target")
        );
        assert_eq!(
            pick(None, None, &lima_to_host),
            pair("lima", "target in the config")
        );
    }

    /// A band that names another machine is never taken at its word: a run goes there only by
    /// the user's flag, force_target or [targets] mapping.
    #[test]
    fn a_band_never_chooses_another_machine_on_its_own() {
        let never = || -> TargetChoice { panic!("the default is not needed") };
        for remote in ["ssh://me@box", "sandboxd://127.0.0.1:7000"] {
            let b = Target::parse(remote).expect("target");
            assert!(b.is_remote());
            for cfg in ["", "target = \"host\"\n"] {
                let e = resolve_target(None, Some(&b), &config(cfg), &never).unwrap_err();
                assert!(
                    e.to_string().contains(&format!(
                        "the band's execution.target {remote} is another machine"
                    )),
                    "{e}"
                );
                assert!(e.hint().is_some_and(|h| h.contains("--target")), "{e:?}");
            }
            assert_eq!(pick(Some(remote), Some(&b), &config("")).1, "--target");
            let forced = config(&format!("force_target = \"{remote}\"\n"));
            assert_eq!(
                pick(None, Some(&b), &forced).1,
                "force_target in the config"
            );
            let mapped = config(&format!("[targets]\n\"{remote}\" = \"{remote}\"\n"));
            assert_eq!(pick(None, Some(&b), &mapped).0, remote);
        }
        for local in [Target::Host, Target::Qemu, Target::Lima] {
            assert!(!local.is_remote());
            assert_eq!(
                pick(None, Some(&local), &config("")).1,
                "the band's execution.target"
            );
        }
    }

    #[test]
    fn a_mapping_or_an_override_says_so() {
        let never = || -> TargetChoice { panic!("the default is not needed") };
        let c = resolve_target(
            None,
            Some(&Target::Lima),
            &config("[targets]\nlima = \"host\"\n"),
            &never,
        )
        .expect("target");
        assert_eq!(
            c.note.as_deref(),
            Some("the band's target lima runs on host ([targets] in the config)")
        );
        let forced = config("force_target = \"host\"\n");
        let c = resolve_target(None, Some(&Target::Lima), &forced, &never).expect("target");
        assert_eq!(
            c.note.as_deref(),
            Some("force_target in the config runs this band on host, not its lima")
        );
        // Nothing to say when the band asked for the forced target anyway.
        let c = resolve_target(None, Some(&Target::Host), &forced, &never).expect("target");
        assert_eq!(c.note, None);
        let c = resolve_target(Some("qemu"), Some(&Target::Lima), &forced, &never).expect("t");
        assert_eq!(c.note, None);
    }

    #[test]
    fn a_bad_flag_is_an_error_naming_it() {
        let never = || -> TargetChoice { panic!("the default is not needed") };
        let e = resolve_target(Some("cloudflare"), None, &UserConfig::default(), &never)
            .expect_err("unsupported")
            .to_string();
        assert!(
            e.contains("--target: `cloudflare` is an upstream Bands target"),
            "{e}"
        );
    }

    #[test]
    fn the_reason_serialises_for_json() {
        let r = TargetReason::BandMapped {
            from: "lima".into(),
        };
        assert_eq!(
            serde_json::to_value(&r).expect("json"),
            serde_json::json!({"by": "band_mapped", "from": "lima"})
        );
        assert_eq!(
            serde_json::to_value(TargetReason::ForceTarget).expect("json"),
            serde_json::json!({"by": "force_target"})
        );
    }
}
