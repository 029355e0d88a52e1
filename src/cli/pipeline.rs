//! The one path every run takes — `band run`, `band <skill>/<script>`, `band exec`, `band mcp`:
//! resolve the band → pick the target → check the input contract → collect secrets → read the
//! bundle and the admitted workspace files → hand one request to a [`Transport`] → check the
//! output contract → copy written files back.
//!
//! Statuses (input_invalid, output_invalid, denied, …) come back inside [`Outcome::result`];
//! only user errors (unknown skill, broken band, missing secret, no server) are `Err`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use sha2::{Digest, Sha256};

use super::config::UserConfig;
use super::user_error;
use band::manifest::Target;
use band::policy::CompiledPolicy;
use band::proto::{self, ErrorInfo, FileEntry, Layer, Message, RunRequest, RunResult, Status};

/// The most a skill bundle may weigh; larger skills should not ship data in the skill.
const MAX_BUNDLE_BYTES: u64 = 64 << 20;
/// The most workspace data sent to a run.
const MAX_WORKSPACE_BYTES: u64 = 256 << 20;

/// What to run, as the caller (CLI, MCP server) understood it.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// The skill's folder.
    pub skill_root: PathBuf,
    pub script: String,
    /// The input before coercion (CLI strings are coerced by the input schema).
    pub raw_input: serde_json::Value,
    /// The host folder the script sees at /workspace (only files its band admits are sent).
    pub workspace: PathBuf,
    /// `--target`, overriding the band's `execution.target` and the user config.
    pub target: Option<String>,
    pub trace: bool,
}

/// Carries a request to a band-server and brings back its events and result.
pub trait Transport {
    /// For messages: `host`, `qemu (vm band)`, …
    fn name(&self) -> String;
    fn run(&mut self, req: &RunRequest, on_event: &mut dyn FnMut(&proto::Event)) -> Result<RunResult>;
}

/// The transport for a target.
pub fn transport_for(target: &Target) -> Result<Box<dyn Transport>> {
    match target {
        Target::Host => Ok(Box::new(HostTransport::new()?)),
        Target::Qemu | Target::Lima | Target::Ssh { .. } => Ok(Box::new(super::vm::SshTransport::new(target)?)),
    }
}

/// Everything about a run that is settled before it starts.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub request: RunRequest,
    pub target: Target,
    pub skill_root: PathBuf,
    pub workspace: PathBuf,
    /// SHA-256 over the band files that made the policy, in resolution order.
    pub band_sha256: String,
    /// SHA-256 of the effective policy as JSON.
    pub policy_sha256: String,
}

/// A finished (or refused) run, with the fingerprints the ledger records.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub result: RunResult,
    pub skill: String,
    pub script: String,
    pub target: Target,
    pub bundle_sha256: String,
    pub band_sha256: String,
    pub policy_sha256: String,
    pub input_bytes: u64,
    pub input_sha256: String,
    pub output_bytes: u64,
    pub output_sha256: String,
    pub started_at_ms: u64,
}

/// Either a request ready to send, or a result for a run refused before it started.
pub enum Preparation {
    Ready(Box<Prepared>),
    Refused(Box<Outcome>),
}

/// Run a script end to end. See the module docs.
pub fn run(spec: &RunSpec, on_event: &mut dyn FnMut(&proto::Event)) -> Result<Outcome> {
    let started_at_ms = now_ms();
    let prepared = match prepare(spec, started_at_ms)? {
        Preparation::Ready(p) => p,
        Preparation::Refused(o) => return Ok(*o),
    };
    let mut transport = transport_for(&prepared.target)?;
    let result = transport.run(&prepared.request, on_event).with_context(|| format!("run on target {}", transport.name()))?;
    finish(*prepared, result, started_at_ms)
}

/// Resolve, choose the target, check the input and secrets, read the bundle and workspace.
pub fn prepare(spec: &RunSpec, started_at_ms: u64) -> Result<Preparation> {
    let root = &spec.skill_root;
    let script = spec.script.as_str();
    let (skill, _) = band::skill::load_skill(root);
    let Some(entry) = skill.script(script).map(|s| s.entry.clone()) else {
        bail!(user_error(format!("skill `{}` has no script `{script}`", skill.name), "`band list` shows the scripts"));
    };
    let (resolved, diags) = band::skill::resolve_script(&skill, script);
    let Some(resolved) = resolved else {
        let errors: Vec<String> = diags.iter().filter(|d| d.is_error()).map(|d| d.to_string()).collect();
        bail!(user_error(
            format!("the band for `{}/{script}` has errors; nothing ran\n{}", skill.name, errors.join("\n")),
            format!("run `band lint {}`", root.display())
        ));
    };
    let policy = resolved.policy.clone();
    let compiled = CompiledPolicy::compile(&policy).map_err(|e| user_error(e.to_string(), "run `band lint`"))?;
    let target = choose_target(spec.target.as_deref(), resolved.target.as_ref(), &UserConfig::load()?)?;
    let band_sha256 = {
        let mut h = Sha256::new();
        for src in &resolved.sources {
            h.update(std::fs::read(src).with_context(|| format!("cannot read {}", src.display()))?);
        }
        hex(&h.finalize())
    };
    let policy_sha256 = sha256_hex(&serde_json::to_vec(&policy)?);
    let run_id = new_run_id();

    // Input: validated against the contract, coerced from CLI strings.
    let schemas = band::contract::SchemaSet::load_dir(root).0;
    let input_rel = format!("schemas/input/{script}.json");
    let contract = schemas.compile(&input_rel).map_err(|e| user_error(format!("input schema: {e}"), format!("run `band lint {}`", root.display())))?;
    let refuse = |message: String, input_bytes: u64, input_sha256: String| {
        let mut result = RunResult::setup_failed(&run_id, Layer::Io, message, Some(format!("`band help {}/{script}` lists the arguments", skill.name)));
        result.status = Status::InputInvalid;
        Preparation::Refused(Box::new(Outcome {
            result,
            skill: skill.name.clone(),
            script: script.to_string(),
            target: target.clone(),
            bundle_sha256: String::new(),
            band_sha256: band_sha256.clone(),
            policy_sha256: policy_sha256.clone(),
            input_bytes,
            input_sha256,
            output_bytes: 0,
            output_sha256: String::new(),
            started_at_ms,
        }))
    };
    let raw_bytes = serde_json::to_vec(&spec.raw_input)?;
    let input = match contract.coerce_and_validate(spec.raw_input.clone()) {
        Ok(v) => v,
        Err(violations) => {
            let msg = violations
                .iter()
                .map(|v| format!("input {}: {}", if v.instance_path.is_empty() { "/" } else { &v.instance_path }, v.message))
                .collect::<Vec<_>>()
                .join("; ");
            return Ok(refuse(msg, raw_bytes.len() as u64, sha256_hex(&raw_bytes)));
        }
    };
    let input_json = serde_json::to_vec(&input)?;
    let input_bytes = input_json.len() as u64;
    if let Some(max) = policy.limits.max_input_bytes.filter(|m| input_bytes > *m) {
        return Ok(refuse(format!("input is {input_bytes} bytes; the band allows {max} (maxInputBytes)"), input_bytes, sha256_hex(&input_json)));
    }

    // Secrets: required ones must exist before anything starts.
    let missing: Vec<&str> = policy.required_secrets.iter().filter(|n| std::env::var_os(n).is_none()).map(String::as_str).collect();
    if !missing.is_empty() {
        bail!(user_error(
            format!("missing required secret{}: {}", if missing.len() == 1 { "" } else { "s" }, missing.join(", ")),
            format!("set {} in your environment, e.g. `export {}=...`", if missing.len() == 1 { "it" } else { "them" }, missing[0]),
        ));
    }
    let secrets: BTreeMap<String, String> = policy.secrets.iter().filter_map(|n| std::env::var(n).ok().map(|v| (n.clone(), v))).collect();

    let bundle = read_bundle(root)?;
    let digest = proto::bundle_digest(&bundle.iter().map(|f| (f.path.clone(), f.mode, B64.decode(&f.data).unwrap_or_default())).collect::<Vec<_>>());
    let workspace = read_workspace(&spec.workspace, &compiled)?;
    let request = RunRequest {
        protocol: proto::PROTOCOL_VERSION,
        run_id,
        skill: skill.name.clone(),
        script: script.to_string(),
        entry: entry.to_string_lossy().into_owned(),
        bundle,
        bundle_sha256: digest,
        policy,
        input,
        config: resolved.config.clone(),
        secrets,
        workspace,
        trace: spec.trace,
    };
    Ok(Preparation::Ready(Box::new(Prepared {
        request,
        target,
        skill_root: root.clone(),
        workspace: spec.workspace.clone(),
        band_sha256,
        policy_sha256,
    })))
}

/// Check the output contract, copy written files back, and fill in the fingerprints.
pub fn finish(prepared: Prepared, mut result: RunResult, started_at_ms: u64) -> Result<Outcome> {
    let script = prepared.request.script.clone();
    if result.status == Status::Ok {
        check_output(&prepared.skill_root, &script, &mut result)?;
    }
    write_back(&prepared.workspace, &result.written)?;
    let input_json = serde_json::to_vec(&prepared.request.input)?;
    let output_json = result.output.as_ref().map(serde_json::to_vec).transpose()?.unwrap_or_default();
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
        output_sha256: if output_json.is_empty() { String::new() } else { sha256_hex(&output_json) },
        started_at_ms,
        result,
    })
}

/// The output contract is checked here, on the host, strictly.
fn check_output(root: &Path, script: &str, result: &mut RunResult) -> Result<()> {
    let rel = format!("schemas/output/{script}.json");
    if !root.join(&rel).is_file() {
        return Ok(());
    }
    let schemas = band::contract::SchemaSet::load_dir(root).0;
    let contract = schemas.compile(&rel).map_err(|e| user_error(format!("output schema: {e}"), "run `band lint`"))?;
    let value = result.output.clone().unwrap_or(serde_json::Value::Null);
    if let Err(v) = contract.validate(&value) {
        result.status = Status::OutputInvalid;
        result.error = Some(ErrorInfo {
            layer: Layer::Io,
            message: v.iter().map(|v| format!("output {}: {}", if v.instance_path.is_empty() { "/" } else { &v.instance_path }, v.message)).collect::<Vec<_>>().join("; "),
            hint: Some(format!("the script's output must match {rel}")),
        });
    }
    Ok(())
}

/// `--target`, then the band's `execution.target`, then the user config, then the platform default.
pub fn choose_target(flag: Option<&str>, band: Option<&Target>, config: &UserConfig) -> Result<Target> {
    let hint = "use host, qemu, lima or ssh://user@host[:port]";
    if let Some(t) = flag {
        return Target::parse(t).map_err(|e| user_error(format!("--target: {e}"), hint));
    }
    if let Some(t) = band {
        return Ok(t.clone());
    }
    if let Some(t) = &config.target {
        let path = UserConfig::path().map(|p| p.display().to_string()).unwrap_or_default();
        return Target::parse(t).map_err(|e| user_error(format!("{path}: target: {e}"), hint));
    }
    Ok(if cfg!(target_os = "linux") { Target::Host } else { Target::Lima })
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs band-server on this machine: as root directly, else through `sudo -n`.
pub struct HostTransport {
    server: PathBuf,
}

impl HostTransport {
    pub fn new() -> Result<Self> {
        if !cfg!(target_os = "linux") {
            bail!(user_error("the host target needs Linux", "use a VM target: `band setup`, then `--target lima`"));
        }
        Ok(HostTransport { server: server_path() })
    }
}

impl Transport for HostTransport {
    fn name(&self) -> String {
        "host".into()
    }

    fn run(&mut self, req: &RunRequest, on_event: &mut dyn FnMut(&proto::Event)) -> Result<RunResult> {
        let server = &self.server;
        let mut cmd = if is_root() {
            Command::new(server)
        } else {
            let mut c = Command::new("sudo");
            c.arg("-n").arg(server);
            c
        };
        cmd.arg("run").stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit());
        let mut child = cmd.spawn().map_err(|e| {
            user_error(
                format!("cannot start band-server ({}): {e}", server.display()),
                "install band-server next to band or set $BAND_SERVER; without root, `sudo -n` must be allowed to run it",
            )
        })?;
        {
            let mut stdin = child.stdin.take().context("band-server stdin")?;
            let line = serde_json::to_string(&Message::Request(Box::new(req.clone())))?;
            stdin.write_all(line.as_bytes()).and_then(|()| stdin.write_all(b"\n")).context("cannot send the request to band-server")?;
        }
        let stdout = child.stdout.take().context("band-server stdout")?;
        let result = read_messages(BufReader::new(stdout), on_event)?;
        let status = child.wait().context("waiting for band-server")?;
        match result {
            Some(r) => Ok(r),
            None if !status.success() && !is_root() => Err(user_error(
                format!("band-server exited ({status}) without a result"),
                "the host target runs band-server as root: run band as root, or allow `sudo -n band-server`",
            )),
            None => bail!("band-server exited ({status}) without a result"),
        }
    }
}

/// Read protocol lines until the stream ends: events go to `on_event`, the last result is returned.
pub fn read_messages(reader: impl BufRead, on_event: &mut dyn FnMut(&proto::Event)) -> Result<Option<RunResult>> {
    let mut result = None;
    for line in reader.lines() {
        let line = line.context("reading from band-server")?;
        match serde_json::from_str::<Message>(&line) {
            Ok(Message::Result(r)) => result = Some(*r),
            Ok(Message::Event(ev)) => on_event(&ev),
            Ok(_) => {}
            Err(e) => eprintln!("band: ignoring a malformed line from band-server: {e}"),
        }
    }
    Ok(result)
}

/// Every regular file of the skill, with its mode. Symlinks are refused (lint reports them).
pub fn read_bundle(root: &Path) -> Result<Vec<FileEntry>> {
    let mut out = Vec::new();
    let mut total = 0u64;
    walk_files(root, root, &mut |rel, path, meta| {
        if meta.file_type().is_symlink() {
            bail!(user_error(format!("{} is a symlink; skills must not contain links", path.display()), "copy the file into the skill"));
        }
        push_capped(&mut out, &mut total, MAX_BUNDLE_BYTES, rel, path, meta, || {
            user_error(format!("the skill at {} is larger than {MAX_BUNDLE_BYTES} bytes", root.display()), "keep data out of the skill; pass it in the workspace")
        })
    })?;
    Ok(out)
}

/// Workspace files that a relative allow.read or allow.write pattern admits (and no deny covers).
fn read_workspace(dir: &Path, policy: &CompiledPolicy) -> Result<Vec<FileEntry>> {
    let mut out = Vec::new();
    let mut total = 0u64;
    if !dir.is_dir() {
        bail!(user_error(format!("workspace {} is not a folder", dir.display()), "pass --workspace DIR"));
    }
    walk_files(dir, dir, &mut |rel, path, meta| {
        if meta.file_type().is_symlink() {
            return Ok(()); // never follow links out of the workspace
        }
        let wanted = policy.read.check(&rel).is_allowed() || policy.write.check(&rel).is_allowed();
        if !wanted {
            return Ok(());
        }
        push_capped(&mut out, &mut total, MAX_WORKSPACE_BYTES, rel, path, meta, || {
            user_error(format!("the files the band admits from {} exceed {MAX_WORKSPACE_BYTES} bytes", dir.display()), "narrow allow.read, or pick a smaller --workspace")
        })
    })?;
    Ok(out)
}

/// Read one file into `out` unless the running total would pass `cap`.
fn push_capped(
    out: &mut Vec<FileEntry>,
    total: &mut u64,
    cap: u64,
    rel: String,
    path: &Path,
    meta: &std::fs::Metadata,
    too_large: impl FnOnce() -> anyhow::Error,
) -> Result<()> {
    *total += meta.len();
    if *total > cap {
        return Err(too_large());
    }
    let data = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    out.push(FileEntry { path: rel, mode: mode_of(meta), data: B64.encode(data) });
    Ok(())
}

fn walk_files(root: &Path, dir: &Path, f: &mut dyn FnMut(String, &Path, &std::fs::Metadata) -> Result<()>) -> Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        let meta = std::fs::symlink_metadata(&p).with_context(|| format!("cannot stat {}", p.display()))?;
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if meta.is_dir() {
            if name == ".git" || name == "target" {
                continue;
            }
            walk_files(root, &p, f)?;
        } else {
            let rel = p.strip_prefix(root).unwrap_or(&p).to_string_lossy().replace('\\', "/");
            f(rel, &p, &meta)?;
        }
    }
    Ok(())
}

#[cfg(unix)]
fn mode_of(m: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    m.permissions().mode() & 0o7777
}

#[cfg(not(unix))]
fn mode_of(_: &std::fs::Metadata) -> u32 {
    0o644
}

fn new_run_id() -> String {
    let mut buf = [0u8; 8];
    if std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut buf)).is_err() {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        buf = (t.as_nanos() as u64 ^ u64::from(std::process::id())).to_le_bytes();
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// The band-server binary: $BAND_SERVER, next to this executable, or on PATH.
fn server_path() -> PathBuf {
    if let Some(p) = std::env::var_os(proto::env::SERVER) {
        return PathBuf::from(p);
    }
    if let Some(dir) = std::env::current_exe().ok().and_then(|p| p.parent().map(Path::to_path_buf)) {
        let p = dir.join("band-server");
        if p.is_file() {
            return p;
        }
    }
    PathBuf::from("band-server")
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(2) == Some("0")))
        .unwrap_or(false)
}

/// Copy files the run wrote back into the workspace: relative paths only, never through a symlink.
fn write_back(workspace: &Path, files: &[FileEntry]) -> Result<()> {
    for f in files {
        let rel = Path::new(&f.path);
        if f.path.is_empty() || rel.components().any(|c| !matches!(c, Component::Normal(_))) {
            bail!("band-server returned an unsafe path `{}`; nothing more was written", f.path);
        }
        let mut cur = workspace.to_path_buf();
        for c in rel.parent().into_iter().flat_map(|p| p.components()) {
            cur.push(c);
            match std::fs::symlink_metadata(&cur) {
                Ok(m) if m.file_type().is_symlink() => bail!("refusing to write through symlink {}", cur.display()),
                Ok(_) => {}
                Err(_) => std::fs::create_dir(&cur).with_context(|| format!("cannot create {}", cur.display()))?,
            }
        }
        let dest = workspace.join(rel);
        if std::fs::symlink_metadata(&dest).is_ok_and(|m| m.file_type().is_symlink()) {
            bail!("refusing to write through symlink {}", dest.display());
        }
        let data = B64.decode(&f.data).with_context(|| format!("bad data for {}", f.path))?;
        std::fs::write(&dest, data).with_context(|| format!("cannot write {}", dest.display()))?;
    }
    Ok(())
}

