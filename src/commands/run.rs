//! `band run`: parse the command line, run the pipeline, print the result.

use anyhow::{Context, Result, bail};

use super::skills::{find_script, split_target};
use std::io::IsTerminal;

use crate::cli::progress::{Spinner, cancel_on_signals};
use crate::cli::render::{
    Live, for_terminal, json_text, print_failure, result_json, say, write_stdout,
};
use crate::cli::run::{RunArgs, Shortcut};
use crate::cli::trace;
use crate::cli::{SkillsArgs, user_error};
use band::client::pipeline::{self, Outcome, RunSpec};
use band::proto::{self, Status};

thread_local! {
    /// What [`start_early`] guessed, for this process's run.
    static EARLY: std::cell::RefCell<Option<pipeline::Early>> = const { std::cell::RefCell::new(None) };
}

/// Start band-server on a guess ([`pipeline::Early::guess`]) before the command line is parsed,
/// for the run [`cmd_run`] is about to make (`main`, when `cli::argv::run_target` sees one).
pub(crate) fn start_early(target: Option<&str>) {
    EARLY.with(|e| *e.borrow_mut() = Some(pipeline::Early::guess(target)));
}

/// What [`start_early`] started, for the run (or `band exec`) that takes it.
pub(crate) fn take_early() -> Option<pipeline::Early> {
    EARLY.with(|e| e.borrow_mut().take())
}

/// Close and reap a band-server [`start_early`] started for a run that did not happen (a usage
/// error, a target naming no script): it gets no request, answers "no request" and exits.
pub(crate) fn forget_early() {
    drop(EARLY.with(|e| e.borrow_mut().take()));
}

pub(crate) fn cmd_run(args: RunArgs) -> Result<u8> {
    let early = take_early();
    let (skill_name, Some(script)) = split_target(&args.target) else {
        bail!(user_error(
            format!("`{}` names no script", args.target),
            "use `band run <skill>/<script>`; `band list` shows them"
        ));
    };
    // As root on Linux, band-server starts now (if `main` did not already), while band reads the
    // skill (issue 17).
    let early = early.unwrap_or_else(|| pipeline::Early::guess(args.common.exec_target.as_deref()));
    let skill = find_script(skill_name, script, &args.skills)?;
    // An argv-style script (`band wrap`): the words after `--` are its `args`, as they are.
    // The schemas loaded to tell are the run's (`RunSpec::schemas`).
    let schemas = (args.input.is_none() && args.input_file.is_none())
        .then(|| band::contract::SchemaSet::load_dir(&skill.root).0);
    let by_words = schemas.as_ref().is_some_and(|s| s.takes_argv(script));
    let raw_input = if by_words {
        let words = match args.args.split_first() {
            Some((first, rest)) if first == "--" => rest,
            _ => &args.args[..],
        };
        serde_json::json!({ "args": words })
    } else {
        read_input(&args)?
    };
    let spec = RunSpec {
        skill_root: skill.root,
        script: script.to_string(),
        raw_input,
        workspace: args.common.workspace(),
        allow_system_workspace: args.common.allow_system_workspace,
        target: args.common.exec_target.clone(),
        trace: args.common.trace,
        require_lock: args.require_lock,
        record_io: args.record_io,
        schemas,
    };
    let human = !args.common.json;
    cancel_on_signals();
    let spinner = Spinner::start(args.common.json, format!("running {}", args.target));
    let mut live = Live::default();
    let outcome = pipeline::run_early(&spec, early, &mut |ev| {
        if human {
            spinner.suspend(|| live.event(ev))
        }
    });
    spinner.finish();
    live.end_with(outcome.as_ref().ok().map(|o| &o.result));
    let mut outcome = outcome?;
    let by_arguments = args.input.is_none() && args.input_file.is_none();
    if outcome.result.status == Status::InputInvalid && by_arguments {
        hint_near_args(&spec, &mut outcome.result);
    }
    render(&args, &spec, &outcome)
}

/// An input refused with a `--key` the schema does not name but names one close to: the hint
/// says which was meant (`did you mean `--text` (not `--txt`)?`) before what it said already.
fn hint_near_args(spec: &RunSpec, result: &mut proto::RunResult) {
    let Some(given) = spec.raw_input.as_object() else {
        return;
    };
    let (schemas, _) = band::contract::SchemaSet::load_dir(&spec.skill_root);
    let Some(schema) = schemas.input(&spec.script) else {
        return;
    };
    let near = band::contract::suggest_args(schema, &schemas, given.keys().map(String::as_str));
    let Some(error) = result.error.as_mut().filter(|_| !near.is_empty()) else {
        return;
    };
    let meant: Vec<String> = near
        .iter()
        .map(|(given, near)| format!("`--{near}` (not `--{given}`)"))
        .collect();
    let mut hint = format!("did you mean {}?", meant.join(", "));
    if let Some(before) = &error.hint {
        hint = format!("{hint} {before}");
    }
    error.hint = Some(hint);
}

/// `band <skill>/<script> …`: the agent-facing form of `band run`. `band <skill>/<script> --help`
/// is `band help <skill>/<script>`.
pub(crate) fn cmd_shortcut(args: Vec<String>) -> Result<u8> {
    let first = args.first().map(String::as_str).unwrap_or("");
    if !first.contains('/') {
        let command = <crate::cli::Cli as clap::CommandFactory>::command();
        let names = command.get_subcommands().map(|c| c.get_name());
        let hint = match band::suggest::nearest(first, names) {
            Some(near) => format!("did you mean `band {near}`? `band --help` lists the commands"),
            None => "`band --help` lists the commands; a script runs as `band <skill>/<script> --key=value`".to_string(),
        };
        bail!(user_error(format!("`{first}` is not a band command"), hint));
    }
    if matches!(&args[1..], [h] if h == "--help" || h == "-h") {
        return super::help::cmd_help(crate::cli::HelpArgs {
            target: vec![first.to_string()],
            json: false,
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

/// The most `--input-file` reads, from a file or stdin. The band's `maxInputBytes` is checked
/// later, by the pipeline; this only keeps `band` from reading an endless stream into memory.
const MAX_INPUT_FILE_BYTES: u64 = 64 << 20;

/// The input document: `--input`, `--input-file` (`-` is stdin), or the `--key=value` arguments.
/// Giving a document and arguments both is a usage error, never a silent choice.
fn read_input(args: &RunArgs) -> Result<serde_json::Value> {
    input_document(
        args.input.as_deref(),
        args.input_file.as_deref(),
        &args.args,
    )
}

/// [`read_input`] over its three sources, for every command that takes a script's input
/// (`band run`, `band learn`; `input_file` is `None` where there is no `--input-file`).
pub(crate) fn input_document(
    input: Option<&str>,
    input_file: Option<&std::path::Path>,
    arguments: &[String],
) -> Result<serde_json::Value> {
    let document = match (input, input_file) {
        (Some(_), _) => Some("--input"),
        (None, Some(_)) => Some("--input-file"),
        (None, None) => None,
    };
    if let (Some(flag), Some(first)) = (document, arguments.first()) {
        bail!(user_error(
            format!("{flag} and `--key=value` arguments (`{first}`) both give the input"),
            format!(
                "pass the input one way: every value in the JSON document of {flag}, or only `--key=value` arguments"
            )
        ));
    }
    if let Some(text) = input {
        return serde_json::from_str(text).map_err(|e| {
            user_error(
                format!("--input is not JSON: {e}"),
                "pass a JSON object, e.g. --input '{\"n\": 5}'",
            )
        });
    }
    if let Some(f) = input_file {
        let (name, bytes) = if f.as_os_str() == "-" {
            let stdin = std::io::stdin().lock();
            ("<stdin>".to_string(), read_bounded(stdin, "<stdin>")?)
        } else {
            let name = f.display().to_string();
            let file = fs_err::File::open(f)?;
            let bytes = read_bounded(file, &name)?;
            (name, bytes)
        };
        return serde_json::from_slice(&bytes).map_err(|e| {
            user_error(
                format!("{name} is not JSON: {e}"),
                "--input-file must hold one JSON document (`-`: on stdin)",
            )
        });
    }
    let map = band::contract::parse_cli_args(arguments)
        .map_err(|e| user_error(e.to_string(), "pass arguments as --key=value"))?;
    Ok(serde_json::Value::Object(map))
}

/// All of `from`, if it is at most [`MAX_INPUT_FILE_BYTES`]; `name` names it in the errors.
fn read_bounded(from: impl std::io::Read, name: &str) -> Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    from.take(MAX_INPUT_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {name}"))?;
    if bytes.len() as u64 > MAX_INPUT_FILE_BYTES {
        bail!(user_error(
            format!(
                "{name} holds more than {} of input",
                band::units::format_bytes(MAX_INPUT_FILE_BYTES)
            ),
            "the input is one JSON document; large data belongs in the workspace (--workspace)"
        ));
    }
    Ok(bytes)
}

/// The `allow.cli` rules of the band that governs `script`, and the skill's other scripts that
/// band governs (for the trace; empty if it cannot be resolved, which the run would already
/// have reported).
fn allow_cli(root: &std::path::Path, script: &str) -> (Vec<String>, Vec<String>) {
    let (skill, _) = band::skill::load_skill(root);
    let rules = band::skill::resolve_script(&skill, script)
        .0
        .map(|r| r.policy.allow.cli)
        .unwrap_or_default();
    (rules, super::learn::sharing_band(&skill, script))
}

fn render(args: &RunArgs, spec: &RunSpec, outcome: &Outcome) -> Result<u8> {
    let result = &outcome.result;
    if args.common.json {
        let text = serde_json::to_string_pretty(&result_json(outcome)?)?;
        write_stdout(&format!("{}\n", json_text(&text)))?;
    } else {
        // A string output is the script's text: inert at a terminal, as is into a pipe or file.
        // Output that broke its contract is not the result: not on stdout, where a pipe would
        // take it for one (the status line on stderr says what is wrong with it).
        let shown = result
            .output
            .as_ref()
            .filter(|_| result.status != Status::OutputInvalid);
        match shown {
            Some(serde_json::Value::String(s)) if std::io::stdout().is_terminal() => {
                write_stdout(&format!("{}\n", for_terminal(s)))?
            }
            Some(serde_json::Value::String(s)) => write_stdout(&format!("{s}\n"))?,
            Some(v) => match crate::cli::render::scripts_json(v, &result.stdout) {
                Some(text) => write_stdout(&format!("{}\n", json_text(text)))?,
                None => write_stdout(&format!(
                    "{}\n",
                    json_text(&serde_json::to_string_pretty(v)?)
                ))?,
            },
            None => {}
        }
        if args.common.trace {
            let (rules, shared_with) = allow_cli(&spec.skill_root, &spec.script);
            say(&trace::render(result, &rules, &shared_with));
        }
        for w in &outcome.secret_warnings {
            eprintln!("band: warning: {w}");
        }
        crate::cli::render::warn_forged(result);
        let m = &result.metrics;
        match result.status {
            Status::Ok => say(&format!(
                "band: ok ({} ms: setup {} ms, run {} ms{})\n",
                m.setup_ms + m.run_ms + m.teardown_ms,
                m.setup_ms,
                m.run_ms,
                refusals(&result.denied)
            )),
            _ => print_failure(result),
        }
        if let Some(note) = crate::cli::render::links_note(&outcome.links_left_out) {
            say(&note);
        }
        if let Some(note) = crate::cli::render::missing_note(result) {
            say(&note);
        }
        if let Some(hint) = crate::cli::render::listening_hint(result) {
            say(&hint);
        }
        if let Some(hint) = outcome.stdin_hint() {
            say(&format!("hint: {hint}\n"));
        }
        if let Some(hint) = outcome.piped_stdin_hint(stdin_waiting()) {
            say(&format!("hint: {hint}\n"));
        }
        if !outcome.without_exec.is_empty() {
            let names: Vec<String> = outcome
                .without_exec
                .iter()
                .map(|p| for_terminal(p).into_owned())
                .collect();
            say(&format!(
                "note: written without the execute bit the script gave {}: {} (band writes no executable file into the workspace; chmod +x what you mean to run)\n",
                if names.len() == 1 { "it" } else { "them" },
                names.join(", ")
            ));
        }
        // After a failure, a likely cause; after an ok run, why its result may differ from the
        // same script's on the host.
        let (lead, ran) = match result.status {
            Status::Ok => ("note", "; the script ran without it"),
            _ => ("hint", ""),
        };
        for n in &outcome.not_admitted {
            say(&format!(
                "{lead}: `{}` (named in the input or the script's output) is in the workspace but was not copied in, as the band does not admit it{ran}; to let the script read it: allow.read {:?}\n",
                for_terminal(&n.path),
                n.rule
            ));
        }
        for n in &outcome.not_writable {
            say(&format!(
                "hint: the script was refused writing `{}` (permission denied): the workspace copy is writable only where allow.write admits it; to let the script write it: allow.write {:?}\n",
                for_terminal(&n.path),
                n.rule
            ));
        }
    }
    Ok(result.status.exit_code())
}

/// What a run that ended ok still refused, for its final line: `; 1 write refused: out/x.txt`,
/// `; 4 writes refused: a, b, c and 1 more; 1 other refusal`. Empty when nothing was refused.
/// (Each refusal has its own `band: denied:` line above, with the rule that would allow it.)
pub(crate) fn refusals(denied: &[proto::Denial]) -> String {
    const SHOWN: usize = 3;
    let writes: Vec<&str> = denied
        .iter()
        .filter_map(|d| match d {
            proto::Denial::Write { path, .. } => Some(path.as_str()),
            _ => None,
        })
        .collect();
    let others = denied.len() - writes.len();
    let mut out = String::new();
    if !writes.is_empty() {
        let s = if writes.len() == 1 { "" } else { "s" };
        let mut names = writes[..writes.len().min(SHOWN)].join(", ");
        if writes.len() > SHOWN {
            names.push_str(&format!(" and {} more", writes.len() - SHOWN));
        }
        out.push_str(&format!(
            "; {} write{s} refused: {}",
            writes.len(),
            for_terminal(&names)
        ));
    }
    if others > 0 {
        let s = if others == 1 { "" } else { "s" };
        out.push_str(&format!("; {others} other refusal{s}"));
    }
    out
}

/// How many bytes wait unread on band's standard input, without reading them: what a pipe holds
/// (`FIONREAD`), or what is left of a regular file; 0 for a terminal, `/dev/null`, an empty or
/// closed pipe, or anything that cannot say.
fn stdin_waiting() -> u64 {
    let stdin = std::io::stdin();
    let Ok(st) = rustix::fs::fstat(&stdin) else {
        return 0;
    };
    match rustix::fs::FileType::from_raw_mode(st.st_mode) {
        rustix::fs::FileType::Fifo | rustix::fs::FileType::Socket => {
            rustix::io::ioctl_fionread(&stdin).unwrap_or(0)
        }
        rustix::fs::FileType::RegularFile => {
            let at = rustix::fs::seek(&stdin, rustix::fs::SeekFrom::Current(0)).unwrap_or(0);
            u64::try_from(st.st_size).unwrap_or(0).saturating_sub(at)
        }
        _ => 0,
    }
}
