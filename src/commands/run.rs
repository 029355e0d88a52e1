//! `band run`: parse the command line, run the pipeline, print the result.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};

use super::progress::Spinner;
use super::trace;
use super::{SkillsArgs, find_skill, split_target, user_error};
use band::client::pipeline::{self, Outcome, RunSpec};
use band::proto::{self, Status};

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
    /// execution.target, then `target` in ~/.config/band/config.toml, then host on Linux.
    #[arg(long = "target", value_name = "TARGET")]
    pub exec_target: Option<String>,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// After the run, list every command the script ran, the files it wrote and what the policy
    /// refused, each with the rule that decided.
    #[arg(long)]
    pub trace: bool,
    /// Refuse the skill if it has no band.lock (also `require_lock = true` in the config).
    #[arg(long)]
    pub require_lock: bool,
    /// Keep the input and output documents, stdout and stderr in the run ledger (default:
    /// only their sizes and SHA-256).
    #[arg(long)]
    pub record_io: bool,
    #[command(flatten)]
    pub skills: SkillsArgs,
}

pub fn cmd_run(args: RunArgs) -> Result<u8> {
    let (skill_name, Some(script)) = split_target(&args.target) else {
        bail!(user_error(
            format!("`{}` names no script", args.target),
            "use `band run <skill>/<script>`; `band list` shows them"
        ));
    };
    let spec = RunSpec {
        skill_root: find_skill(skill_name, &args.skills)?,
        script: script.to_string(),
        raw_input: read_input(&args)?,
        workspace: args.workspace.clone().unwrap_or_else(|| PathBuf::from(".")),
        target: args.exec_target.clone(),
        trace: args.trace,
        require_lock: args.require_lock,
        record_io: args.record_io,
    };
    let human = !args.json;
    let spinner = Spinner::start(args.json, format!("running {}", args.target));
    let outcome = pipeline::run(&spec, &mut |ev| {
        if human {
            spinner.suspend(|| show_event(ev))
        }
    });
    spinner.finish();
    render(&args, &spec, &outcome?)
}

/// `band run`'s arguments on their own, for the shortcut.
#[derive(Debug, clap::Parser)]
#[command(name = "band", no_binary_name = true, disable_help_flag = true)]
struct Shortcut {
    #[command(flatten)]
    run: RunArgs,
}

/// `band <skill>/<script> …`: the agent-facing form of `band run`. `band <skill>/<script> --help`
/// is `band help <skill>/<script>`.
pub fn cmd_shortcut(args: Vec<String>) -> Result<u8> {
    let first = args.first().map(String::as_str).unwrap_or("");
    if !first.contains('/') {
        bail!(user_error(
            format!("`{first}` is not a band command"),
            "`band --help` lists the commands; a script runs as `band <skill>/<script> --key=value`"
        ));
    }
    if matches!(&args[1..], [h] if h == "--help" || h == "-h") {
        return super::cmd_help(super::HelpArgs {
            target: first.to_string(),
            skills: SkillsArgs { dirs: Vec::new() },
        });
    }
    match <Shortcut as clap::Parser>::try_parse_from(&args) {
        Ok(s) => cmd_run(s.run),
        Err(e) => {
            e.print().context("cannot print the usage error")?;
            Ok(proto::exit::USAGE)
        }
    }
}

fn read_input(args: &RunArgs) -> Result<serde_json::Value> {
    if let Some(text) = &args.input {
        return serde_json::from_str(text).map_err(|e| {
            user_error(
                format!("--input is not JSON: {e}"),
                "pass a JSON object, e.g. --input '{\"n\": 5}'",
            )
        });
    }
    if let Some(f) = &args.input_file {
        let text =
            std::fs::read_to_string(f).with_context(|| format!("cannot read {}", f.display()))?;
        return serde_json::from_str(&text).map_err(|e| {
            user_error(
                format!("{} is not JSON: {e}", f.display()),
                "the input file must hold one JSON document",
            )
        });
    }
    let map = band::contract::parse_cli_args(&args.args)
        .map_err(|e| user_error(e.to_string(), "pass arguments as --key=value"))?;
    Ok(serde_json::Value::Object(map))
}

pub(super) fn show_event(ev: &proto::Event) {
    match ev {
        proto::Event::Stderr { data } => eprint!("{data}"),
        proto::Event::Denied(d) => eprintln!("band: denied: {}", describe_denial(d)),
        proto::Event::Limit { limit, detail } => {
            eprintln!("band: limit `{limit}` reached: {detail}")
        }
        _ => {}
    }
}

fn describe_denial(d: &proto::Denial) -> String {
    match d {
        proto::Denial::Cli { argv, .. } => format!("command `{}`", argv.join(" ")),
        proto::Denial::Net { host, port, .. } => format!(
            "host {host}{}",
            port.map(|p| format!(":{p}")).unwrap_or_default()
        ),
        proto::Denial::Dns { name } => format!("DNS name {name}"),
        proto::Denial::Write { path, .. } => format!("write to {path}"),
    }
}

/// The `allow.cli` rules of the band that governs `script` (for the trace; empty if it cannot
/// be resolved, which the run would already have reported).
fn allow_cli(root: &std::path::Path, script: &str) -> Vec<String> {
    let (skill, _) = band::skill::load_skill(root);
    band::skill::resolve_script(&skill, script)
        .0
        .map(|r| r.policy.allow.cli)
        .unwrap_or_default()
}

fn render(args: &RunArgs, spec: &RunSpec, outcome: &Outcome) -> Result<u8> {
    let result = &outcome.result;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&result_json(outcome)?)?);
    } else {
        match &result.output {
            Some(serde_json::Value::String(s)) => println!("{s}"),
            Some(v) => println!("{}", serde_json::to_string_pretty(v)?),
            None => {}
        }
        if args.trace {
            eprint!(
                "{}",
                trace::render(result, &allow_cli(&spec.skill_root, &spec.script))
            );
        }
        let m = &result.metrics;
        match result.status {
            Status::Ok => eprintln!(
                "band: ok ({} ms: setup {} ms, run {} ms)",
                m.setup_ms + m.run_ms + m.teardown_ms,
                m.setup_ms,
                m.run_ms
            ),
            _ => print_failure(result),
        }
    }
    Ok(result.status.exit_code())
}

/// The `--json` document of a run: the result, with the run's names and fingerprints.
pub(super) fn result_json(outcome: &Outcome) -> Result<serde_json::Value> {
    let result = &outcome.result;
    let mut v = serde_json::to_value(result)?;
    if let Some(o) = v.as_object_mut() {
        o.remove("written");
        o.insert(
            "written_files".into(),
            serde_json::json!(
                result
                    .written
                    .iter()
                    .map(|f| f.path.clone())
                    .collect::<Vec<_>>()
            ),
        );
        o.insert("skill".into(), outcome.skill.clone().into());
        o.insert("script".into(), outcome.script.clone().into());
        o.insert("target".into(), outcome.target.to_string().into());
        o.insert(
            "fingerprints".into(),
            serde_json::json!({
                "bundle_sha256": outcome.bundle_sha256,
                "band_sha256": outcome.band_sha256,
                "policy_sha256": outcome.policy_sha256,
            }),
        );
        o.insert(
            "io".into(),
            serde_json::json!({
                "input_bytes": outcome.input_bytes,
                "input_sha256": outcome.input_sha256,
                "output_bytes": outcome.output_bytes,
                "output_sha256": outcome.output_sha256,
            }),
        );
        o.insert("started_at_ms".into(), outcome.started_at_ms.into());
    }
    Ok(v)
}

/// The status line of a run that did not end `ok`, on stderr: status, exit code, layer, hint.
pub(super) fn print_failure(result: &proto::RunResult) {
    let s = result.status;
    let detail = result
        .error
        .as_ref()
        .map(|e| format!(" [{}] {}", e.layer.as_str(), e.message))
        .unwrap_or_default();
    let code = result
        .exit_code
        .map(|c| format!(" (exit {c})"))
        .unwrap_or_default();
    eprintln!("band: {s}{code}: {}{detail}", s.describe());
    if !result.insist_missing.is_empty() {
        eprintln!("band: never happened: {}", result.insist_missing.join(", "));
    }
    if let Some(h) = result.error.as_ref().and_then(|e| e.hint.as_ref()) {
        eprintln!("hint: {h}");
    }
}
