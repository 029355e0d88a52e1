//! `band run`: validate the input, collect secrets and workspace files, send one request to
//! band-server, stream its events, validate the output, copy written files back.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, IsTerminal, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;

use super::{SkillsArgs, find_skill, split_target, user_error};
use band::manifest::Target;
use band::policy::CompiledPolicy;
use band::proto::{self, FileEntry, Message, RunRequest, RunResult, Status};

/// The most a skill bundle may weigh; larger skills should not ship data in the skill.
const MAX_BUNDLE_BYTES: u64 = 64 << 20;
/// The most workspace data sent to a run.
const MAX_WORKSPACE_BYTES: u64 = 256 << 20;

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// `<skill>/<script>`.
    pub target: String,
    /// Input as `--key=value` arguments (coerced to the types in the input schema).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
    /// Input as one JSON document.
    #[arg(long, conflicts_with = "input_file")]
    pub input: Option<String>,
    /// Input from a JSON file.
    #[arg(long, value_name = "FILE")]
    pub input_file: Option<PathBuf>,
    /// The workspace the script sees at /workspace (only files its band allows). Default: `.`.
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Where to run: host, qemu, lima or ssh://user@host[:port]. Default: the band's
    /// execution.target, then host on Linux.
    #[arg(long = "target", value_name = "TARGET")]
    pub exec_target: Option<String>,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Also list every command the script ran and whether the policy allowed it.
    #[arg(long)]
    pub trace: bool,
    #[command(flatten)]
    pub skills: SkillsArgs,
}

pub fn cmd_run(args: RunArgs) -> Result<u8> {
    let (skill_name, Some(script)) = split_target(&args.target) else {
        bail!(user_error(format!("`{}` names no script", args.target), "use `band run <skill>/<script>`; `band list` shows them"));
    };
    let root = find_skill(skill_name, &args.skills)?;
    let (skill, _) = band::skill::load_skill(&root);
    let Some(entry) = skill.script(script).map(|s| s.entry.clone()) else {
        bail!(user_error(format!("skill `{}` has no script `{script}`", skill.name), "`band list` shows the scripts"));
    };
    let (resolved, diags) = band::skill::resolve_script(&skill, script);
    let Some(resolved) = resolved else {
        for d in diags.iter().filter(|d| d.is_error()) {
            eprintln!("{d}");
        }
        bail!(user_error(format!("the band for `{}/{script}` has errors; nothing ran", skill.name), format!("run `band lint {}`", root.display())));
    };
    let policy = resolved.policy.clone();
    let compiled = CompiledPolicy::compile(&policy).map_err(|e| user_error(e.to_string(), "run `band lint`"))?;

    // Target: flag, band, then the platform default. Only the host target exists in this build.
    let target = match &args.exec_target {
        Some(t) => Target::parse(t).map_err(|e| user_error(e, "use host, qemu, lima or ssh://user@host[:port]"))?,
        None => resolved.target.clone().unwrap_or(Target::Host),
    };
    if target != Target::Host {
        bail!(user_error(format!("target `{target}` is not available in this build of band"), "use `--target host` on Linux"));
    }

    // Input: validated against the contract, coerced from CLI strings.
    let raw_input = read_input(&args)?;
    let schemas = band::contract::SchemaSet::load_dir(&root).0;
    let input_rel = format!("schemas/input/{script}.json");
    let contract = schemas.compile(&input_rel).map_err(|e| user_error(format!("input schema: {e}"), format!("run `band lint {}`", root.display())))?;
    let input = match contract.coerce_and_validate(raw_input) {
        Ok(v) => v,
        Err(violations) => {
            for v in &violations {
                eprintln!("input {}: {}", if v.instance_path.is_empty() { "/" } else { &v.instance_path }, v.message);
            }
            eprintln!("\nhint: `band help {}/{script}` lists the arguments", skill.name);
            return Ok(Status::InputInvalid.exit_code());
        }
    };
    let input_bytes = serde_json::to_vec(&input)?.len() as u64;
    if let Some(max) = policy.limits.max_input_bytes.filter(|m| input_bytes > *m) {
        eprintln!("input is {input_bytes} bytes; the band allows {max} (maxInputBytes)");
        return Ok(Status::InputInvalid.exit_code());
    }

    // Secrets: required ones must exist before anything starts.
    let missing: Vec<&String> = policy.required_secrets.iter().filter(|n| std::env::var_os(n).is_none()).collect();
    if !missing.is_empty() {
        let names: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
        bail!(user_error(
            format!("missing required secret{}: {}", if names.len() == 1 { "" } else { "s" }, names.join(", ")),
            format!("set {} in your environment, e.g. `export {}=...`", if names.len() == 1 { "it" } else { "them" }, names[0]),
        ));
    }
    let secrets: BTreeMap<String, String> =
        policy.secrets.iter().filter_map(|n| std::env::var(n).ok().map(|v| (n.clone(), v))).collect();

    let bundle = read_bundle(&root)?;
    let digest = proto::bundle_digest(&bundle.iter().map(|f| (f.path.clone(), f.mode, B64.decode(&f.data).unwrap_or_default())).collect::<Vec<_>>());
    let workspace_dir = args.workspace.clone().unwrap_or_else(|| PathBuf::from("."));
    let workspace = read_workspace(&workspace_dir, &compiled)?;

    let run_id = new_run_id();
    let request = RunRequest {
        protocol: proto::PROTOCOL_VERSION,
        run_id: run_id.clone(),
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
        trace: args.trace,
    };
    let result = send_to_host_server(&request, !args.json)?;
    finish(&args, &root, script, &workspace_dir, result)
}

fn read_input(args: &RunArgs) -> Result<serde_json::Value> {
    if let Some(text) = &args.input {
        return serde_json::from_str(text).map_err(|e| user_error(format!("--input is not JSON: {e}"), "pass a JSON object, e.g. --input '{\"n\": 5}'"));
    }
    if let Some(f) = &args.input_file {
        let text = std::fs::read_to_string(f).with_context(|| format!("cannot read {}", f.display()))?;
        return serde_json::from_str(&text).map_err(|e| user_error(format!("{} is not JSON: {e}", f.display()), "the input file must hold one JSON document"));
    }
    let map = band::contract::parse_cli_args(&args.args).map_err(|e| user_error(e.to_string(), "pass arguments as --key=value"))?;
    Ok(serde_json::Value::Object(map))
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

/// Start band-server (as root directly, else through `sudo -n`), send the request, stream events.
fn send_to_host_server(req: &RunRequest, human: bool) -> Result<RunResult> {
    if !cfg!(target_os = "linux") {
        bail!(user_error("the host target needs Linux", "use a VM target: `band setup`, then `--target lima`"));
    }
    let server = server_path();
    let mut cmd = if is_root() {
        Command::new(&server)
    } else {
        let mut c = Command::new("sudo");
        c.arg("-n").arg(&server);
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
    let spinner = human && std::io::stderr().is_terminal();
    let mut result = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading from band-server")?;
        match serde_json::from_str::<Message>(&line) {
            Ok(Message::Result(r)) => result = Some(*r),
            Ok(Message::Event(ev)) if human => show_event(&ev, spinner),
            Ok(_) => {}
            Err(e) => eprintln!("band: ignoring a malformed line from band-server: {e}"),
        }
    }
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

fn show_event(ev: &proto::Event, _spinner: bool) {
    match ev {
        proto::Event::Stderr { data } => eprint!("{data}"),
        proto::Event::Denied(d) => eprintln!("band: denied: {}", describe_denial(d)),
        proto::Event::Limit { limit, detail } => eprintln!("band: limit `{limit}` reached: {detail}"),
        _ => {}
    }
}

fn describe_denial(d: &proto::Denial) -> String {
    match d {
        proto::Denial::Cli { argv, .. } => format!("command `{}`", argv.join(" ")),
        proto::Denial::Net { host, port, .. } => format!("host {host}{}", port.map(|p| format!(":{p}")).unwrap_or_default()),
        proto::Denial::Dns { name } => format!("DNS name {name}"),
        proto::Denial::Write { path, .. } => format!("write to {path}"),
    }
}

fn finish(args: &RunArgs, root: &Path, script: &str, workspace: &Path, mut result: RunResult) -> Result<u8> {
    // The output contract is checked here, on the host, strictly.
    if result.status == Status::Ok {
        let rel = format!("schemas/output/{script}.json");
        if root.join(&rel).is_file() {
            let schemas = band::contract::SchemaSet::load_dir(root).0;
            let contract = schemas.compile(&rel).map_err(|e| user_error(format!("output schema: {e}"), "run `band lint`"))?;
            let value = result.output.clone().unwrap_or(serde_json::Value::Null);
            if let Err(v) = contract.validate(&value) {
                result.status = Status::OutputInvalid;
                result.error = Some(proto::ErrorInfo {
                    layer: proto::Layer::Io,
                    message: v.iter().map(|v| format!("output {}: {}", if v.instance_path.is_empty() { "/" } else { &v.instance_path }, v.message)).collect::<Vec<_>>().join("; "),
                    hint: Some(format!("the script's output must match {rel}")),
                });
            }
        }
    }
    write_back(workspace, &result.written)?;
    if args.json {
        let mut v = serde_json::to_value(&result)?;
        if let Some(o) = v.as_object_mut() {
            o.remove("written");
            o.insert("written_files".into(), serde_json::json!(result.written.iter().map(|f| f.path.clone()).collect::<Vec<_>>()));
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        match &result.output {
            Some(serde_json::Value::String(s)) => println!("{s}"),
            Some(v) => println!("{}", serde_json::to_string_pretty(v)?),
            None => {}
        }
        if args.trace {
            for c in &result.cli_calls {
                eprintln!("trace: {} {}", if c.allowed { "allowed" } else { "denied " }, c.argv.join(" "));
            }
        }
        let m = &result.metrics;
        match result.status {
            Status::Ok => eprintln!("band: ok ({} ms: setup {} ms, run {} ms)", m.setup_ms + m.run_ms + m.teardown_ms, m.setup_ms, m.run_ms),
            s => {
                let detail = result.error.as_ref().map(|e| format!(" [{}] {}", e.layer.as_str(), e.message)).unwrap_or_default();
                let code = result.exit_code.map(|c| format!(" (exit {c})")).unwrap_or_default();
                eprintln!("band: {s}{code}: {}{detail}", s.describe());
                if !result.insist_missing.is_empty() {
                    eprintln!("band: never happened: {}", result.insist_missing.join(", "));
                }
                if let Some(h) = result.error.as_ref().and_then(|e| e.hint.as_ref()) {
                    eprintln!("hint: {h}");
                }
            }
        }
    }
    Ok(result.status.exit_code())
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

