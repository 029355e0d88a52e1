//! Command-line arguments and dispatch. Output goes to stdout (data) and stderr (messages).

pub(crate) mod progress;
pub(crate) mod trace;

use crate::commands::{
    audit, doctor, exec, explain, fmt, history, lock, mcp, run, scaffold, setup, vm,
};

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand, ValueEnum};

use band::lint::{self, render};
use band::proto::exit;

const EXIT_TABLE: &str = "\
Exit codes:
  0    ok
  1    band run / exec: exited non-zero · lint, fmt --check, audit verify, doctor: problems
  2    bad command line, invalid skill or band file, missing secret, internal error
  3    input_invalid       input does not match the script's input schema, or too large
  4    output_invalid      output does not match the script's output schema
  5    denied              the script failed after the policy denied a command, host or path
  6    insist_unsatisfied  the script never did something its band insists on
  7    integrity_failed    the skill does not match its band.lock (also band lock --check)
  8    setup_failed        a sandbox layer could not be set up; nothing ran
  9    output_too_large    output exceeded maxOutputBytes
  10   memory_limit        the run hit maxMemoryBytes
  11   pids_limit          the run hit maxPids
  124  timeout             the run exceeded maxRuntimeMs";

/// Run AI-agent skills in a sandbox that denies everything a skill has not declared.
#[derive(Debug, Parser)]
#[command(
    name = "band",
    version,
    about,
    override_usage = "band <COMMAND>\n       band <SKILL>/<SCRIPT> [--key=value …]   (the same as band run)",
    after_long_help = EXIT_TABLE,
    disable_help_subcommand = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check skills and band files: fields, patterns, conflicts, layout, contracts.
    Lint(LintArgs),
    /// Normalise band files (stable key order, sorted rule lists; the body is kept).
    Fmt(FmtArgs),
    /// Print the effective policy of a skill or one of its scripts.
    Explain(ExplainArgs),
    /// List skills and their scripts.
    List(ListArgs),
    /// Show a script's arguments, from its input schema.
    Help(HelpArgs),
    /// Run a skill's script in the sandbox.
    Run(run::RunArgs),
    /// Run an ad-hoc command (code an agent wrote) under a band file's policy, in the sandbox.
    Exec(exec::ExecArgs),
    /// Write each skill's band.lock (its fingerprint), or check it with --check.
    Lock(lock::LockArgs),
    /// Recent runs from the ledger, as a table or JSON; `prune` drops old records.
    History(history::HistoryArgs),
    /// One recorded run in full, with its events.
    Show(history::ShowArgs),
    /// Check the run ledger.
    Audit(audit::AuditArgs),
    /// Create a skill that lints clean and runs: BAND.md, SKILL.md, one script, its schemas.
    Init(scaffold::InitArgs),
    /// Serve every script as a tool over the Model Context Protocol (stdio).
    Mcp(mcp::McpArgs),
    /// Provision a VM (qemu, lima) or an SSH host that runs band-server; idempotent.
    Setup(setup::SetupArgs),
    /// Manage the VM made by `band setup`: status, start, stop, destroy, ssh, logs.
    Vm(vm::VmArgs),
    /// Check the host and the VM (accelerator, tools, band-server) and say what to fix.
    Doctor(doctor::DoctorArgs),
    /// `band <skill>/<script> --key=value …` is `band run <skill>/<script> --key=value …`.
    #[command(external_subcommand)]
    Shortcut(Vec<String>),
    /// Add a script and its schemas to a skill.
    ///
    /// When the band that would govern it does not allow what the new script runs, the script
    /// also gets its own band, `scripts/<name>.band.md`.
    NewScript(scaffold::NewScriptArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Human,
    Json,
    Sarif,
}

#[derive(Debug, clap::Args)]
pub struct LintArgs {
    /// Skill folders, folders of skills, or band files. Default: the current folder.
    pub paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Treat warnings as errors (exit 1 when there are any).
    #[arg(long)]
    pub deny_warnings: bool,
}

#[derive(Debug, clap::Args)]
pub struct FmtArgs {
    /// Band files, or folders to search for them. Default: the current folder.
    pub paths: Vec<PathBuf>,
    /// Do not write; exit 1 if any file would change.
    #[arg(long)]
    pub check: bool,
}

#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    /// `<skill>` or `<skill>/<script>` (a name found on the skills path, or a folder).
    pub target: String,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub skills: SkillsArgs,
}

#[derive(Debug, clap::Args)]
pub struct ListArgs {
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub skills: SkillsArgs,
}

#[derive(Debug, clap::Args)]
pub struct HelpArgs {
    /// `<skill>/<script>`.
    pub target: String,
    #[command(flatten)]
    pub skills: SkillsArgs,
}

#[derive(Debug, Clone, clap::Args)]
pub struct SkillsArgs {
    /// Where to find skills (repeatable). Then $BAND_SKILLS_PATH, ./skills, ~/.local/share/band/skills.
    #[arg(long = "skills", value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
}

/// An error for the user, with a hint on how to fix it.
#[derive(Debug)]
pub struct UserError {
    pub message: String,
    pub hint: String,
}

impl std::fmt::Display for UserError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for UserError {}

pub fn user_error(message: impl Into<String>, hint: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UserError {
        message: message.into(),
        hint: hint.into(),
    })
}

/// The hint of an error in a chain, when it is one the user can fix: a [`UserError`], or a
/// library error that carries a hint.
pub fn hint_of<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a str> {
    use band::client::ClientError;
    use band::vm::VmError;
    if let Some(user) = e.downcast_ref::<UserError>() {
        return Some(&user.hint);
    }
    if let Some(c) = e.downcast_ref::<ClientError>() {
        return c.hint();
    }
    if let Some(c) = e.downcast_ref::<Box<ClientError>>() {
        return c.hint();
    }
    if let Some(v) = e.downcast_ref::<VmError>() {
        return v.hint();
    }
    e.downcast_ref::<Box<VmError>>().and_then(|v| v.hint())
}

pub fn dispatch(cli: Cli) -> Result<u8> {
    match cli.command {
        Command::Lint(a) => cmd_lint(a),
        Command::Fmt(a) => fmt::cmd_fmt(a),
        Command::Explain(a) => explain::cmd_explain(a),
        Command::List(a) => cmd_list(a),
        Command::Help(a) => cmd_help(a),
        Command::Run(a) => run::cmd_run(a),
        Command::Exec(a) => exec::cmd_exec(a),
        Command::Lock(a) => lock::cmd_lock(a),
        Command::History(a) => history::cmd_history(a),
        Command::Show(a) => history::cmd_show(a),
        Command::Audit(a) => audit::cmd_audit(a),
        Command::Init(a) => scaffold::cmd_init(a),
        Command::NewScript(a) => scaffold::cmd_new_script(a),
        Command::Mcp(a) => mcp::cmd_mcp(a),
        Command::Shortcut(args) => run::cmd_shortcut(args),
        Command::Setup(a) => setup::cmd_setup(a),
        Command::Vm(a) => vm::cmd_vm(a),
        Command::Doctor(a) => doctor::cmd_doctor(a),
    }
}

fn cmd_lint(args: LintArgs) -> Result<u8> {
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths
    };
    let report = lint::lint_paths(&paths);
    let mut out = std::io::stdout().lock();
    match args.format {
        Format::Human => {
            let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            out.write_all(render::human(&report, color).as_bytes())?;
        }
        Format::Json => writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&render::json(&report))?
        )?,
        Format::Sarif => {
            let base = std::env::current_dir().unwrap_or_default();
            writeln!(
                out,
                "{}",
                serde_json::to_string_pretty(&render::sarif(&report, &base))?
            )?;
        }
    }
    let errors = report.count(band::diag::Severity::Error);
    let warnings = report.count(band::diag::Severity::Warning);
    Ok(if errors > 0 || (args.deny_warnings && warnings > 0) {
        exit::SCRIPT_FAILED
    } else {
        exit::OK
    })
}

/// The folders searched for skills, in order.
pub fn skill_dirs(args: &SkillsArgs) -> Vec<PathBuf> {
    let mut dirs = args.dirs.clone();
    if let Some(p) = std::env::var_os(band::proto::env::SKILLS_PATH) {
        dirs.extend(std::env::split_paths(&p));
    }
    dirs.push(PathBuf::from("skills"));
    match band::client::config::UserConfig::load() {
        Ok(c) => dirs.extend(c.skills_path),
        Err(e) => eprintln!("band: warning: {e}"),
    }
    if let Some(d) = dirs::data_dir() {
        dirs.push(d.join("band/skills"));
    }
    dirs
}

/// Find a skill by name on the skills path, or by folder.
pub fn find_skill(name: &str, args: &SkillsArgs) -> Result<PathBuf> {
    let as_path = Path::new(name);
    if as_path.is_dir() && band::skill::is_skill_dir(as_path) {
        return Ok(as_path.to_path_buf());
    }
    let dirs = skill_dirs(args);
    for d in &dirs {
        let p = d.join(name);
        if band::skill::is_skill_dir(&p) {
            return Ok(p);
        }
    }
    Err(user_error(
        format!("no skill named `{name}`"),
        format!(
            "looked in {}; pass --skills DIR or a path to the skill folder, and see `band list`",
            dirs.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    ))
}

/// Split `<skill>/<script>`; the skill part may itself be a path.
pub fn split_target(target: &str) -> (&str, Option<&str>) {
    match target.rsplit_once('/') {
        Some((skill, script)) if !skill.is_empty() && !Path::new(target).is_dir() => {
            (skill, Some(script))
        }
        _ => (target.trim_end_matches('/'), None),
    }
}

fn cmd_list(args: ListArgs) -> Result<u8> {
    let mut seen = std::collections::BTreeMap::new();
    for d in skill_dirs(&args.skills) {
        for root in band::skill::find_skills(&d) {
            let (skill, _) = band::skill::load_skill(&root);
            seen.entry(skill.name.clone()).or_insert(skill);
        }
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        let v: Vec<_> = seen
            .values()
            .map(|s| {
                serde_json::json!({
                    "skill": s.name,
                    "path": s.root,
                    "description": s.skill_md.as_ref().map(|m| m.description.clone()),
                    "scripts": s.scripts.iter().map(|x| x.name.clone()).collect::<Vec<_>>(),
                })
            })
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(exit::OK);
    }
    if seen.is_empty() {
        writeln!(
            out,
            "No skills found. Pass --skills DIR or set $BAND_SKILLS_PATH."
        )?;
        return Ok(exit::OK);
    }
    // Short enough to paste into an agent's context: one sentence per skill, scripts on one line.
    for s in seen.values() {
        let desc = s
            .skill_md
            .as_ref()
            .map(|m| first_sentence(&m.description))
            .unwrap_or_default();
        let scripts: Vec<String> = s
            .scripts
            .iter()
            .map(|x| format!("{}/{}", s.name, x.name))
            .collect();
        writeln!(out, "{}: {desc}\n  {}", s.name, scripts.join("  "))?;
    }
    writeln!(
        out,
        "\nRun: band <skill>/<script> --key=value   Arguments: band help <skill>/<script>"
    )?;
    Ok(exit::OK)
}

/// The first sentence of a description (up to the first ". "), for `band list`.
fn first_sentence(text: &str) -> String {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match text.find(". ") {
        Some(i) => text[..=i].to_string(),
        None => text,
    }
}

pub(crate) fn cmd_help(args: HelpArgs) -> Result<u8> {
    let (skill_name, script) = split_target(&args.target);
    let Some(script) = script else {
        bail!(user_error(
            format!("`{}` names no script", args.target),
            "use `band help <skill>/<script>`; `band list` shows them"
        ));
    };
    let root = find_skill(skill_name, &args.skills)?;
    let (skill, _) = band::skill::load_skill(&root);
    if skill.script(script).is_none() {
        bail!(user_error(
            format!("skill `{}` has no script `{script}`", skill.name),
            "`band list` shows the scripts"
        ));
    }
    let schema_path = root.join("schemas/input").join(format!("{script}.json"));
    let text = std::fs::read_to_string(&schema_path)
        .with_context(|| format!("cannot read {}", schema_path.display()))?;
    let schema: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not JSON", schema_path.display()))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "band run {}/{script} [--key=value …]", skill.name)?;
    if let Some(desc) = schema.get("description").and_then(|d| d.as_str()) {
        writeln!(out, "\n{desc}")?;
    }
    let required: Vec<&str> = schema
        .get("required")
        .and_then(|r| r.as_array())
        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    writeln!(out, "\nArguments:")?;
    let props = schema.get("properties").and_then(|p| p.as_object());
    match props {
        Some(props) if !props.is_empty() => {
            for (name, p) in props {
                let ty = p
                    .get("type")
                    .map(|t| t.to_string().replace('"', ""))
                    .unwrap_or_else(|| "any".into());
                let desc = p.get("description").and_then(|d| d.as_str()).unwrap_or("");
                let req = if required.contains(&name.as_str()) {
                    " (required)"
                } else {
                    ""
                };
                writeln!(out, "  --{name} <{ty}>{req}  {desc}")?;
            }
        }
        _ => writeln!(out, "  (none)")?,
    }
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
