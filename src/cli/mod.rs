//! Command-line arguments (clap) and output rendering, and nothing else: the command bodies are
//! in `crate::commands`. Output goes to stdout (data) and stderr (messages).
//!
//! Dependency order: `error`, `progress`, `trace`, `render`, `skills` → the argument modules
//! (`setup` uses `vm`'s values) → this module's [`Cli`]. No submodule imports this one, and
//! nothing here imports `crate::commands`.

pub(crate) mod argv;
pub(crate) mod audit;
pub(crate) mod color;
pub(crate) mod doctor;
pub(crate) mod error;
pub(crate) mod exec;
pub(crate) mod history;
pub(crate) mod learn;
pub(crate) mod lock;
pub(crate) mod mcp;
pub(crate) mod progress;
pub(crate) mod render;
pub(crate) mod run;
pub(crate) mod scaffold;
pub(crate) mod setup;
pub(crate) mod skills;
pub(crate) mod trace;
pub(crate) mod vm;
pub(crate) mod wrap;

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

pub(crate) use error::{hint_of, user_error};
pub(crate) use skills::SkillsArgs;

/// Where band's options go (`cli::argv`), for `band -h` and, before the exit codes, `--help`.
macro_rules! options_rule {
    () => {
        "\
A command's options go before or after it (`band --json list` is `band list --json`), a run's
also among the script's arguments; after `--` every argument is the script's."
    };
}
const OPTIONS_RULE: &str = options_rule!();

macro_rules! exit_table {
    () => {
        "\
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
  124  timeout             the run exceeded maxRuntimeMs
  130  cancelled           the run was interrupted (Ctrl-C, SIGTERM) or its client went away"
    };
}

/// Run AI-agent skills in a sandbox that denies everything a skill has not declared.
#[derive(Debug, Parser)]
#[command(
    name = "band",
    version,
    about,
    override_usage = "band [OPTIONS] <COMMAND> [OPTIONS]\n       band [OPTIONS] <SKILL>/<SCRIPT> [--key=value …] [OPTIONS]   (the same as band run)",
    after_help = OPTIONS_RULE,
    after_long_help = concat!(options_rule!(), "\n\n", exit_table!()),
    disable_help_subcommand = true
)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) global: Global,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// band's flags for every command.
#[derive(Debug, clap::Args)]
pub(crate) struct Global {
    /// Colour: auto (at a terminal; NO_COLOR turns it off, FORCE_COLOR on), always or never.
    #[arg(long, global = true, value_enum, value_name = "WHEN", hide_possible_values = true, default_value_t = color::ColorWhen::Auto)]
    pub(crate) color: color::ColorWhen,
}

/// The command line as band reads it: a plain run by [`fast_run`], anything else, and every usage
/// error, by the whole [`Cli`] ([`parse_whole`]). With the command line as clap read it.
pub(crate) fn parse(
    argv: Vec<std::ffi::OsString>,
) -> (Result<Cli, clap::Error>, Vec<std::ffi::OsString>) {
    match fast_run(&argv) {
        Some((run, argv)) => (Ok(run), argv),
        None => parse_whole(argv),
    }
}

/// The command line read by the whole [`Cli`] (its errors coloured as `--color` says), and the
/// line as clap read it ([`argv::normalize`]).
pub(crate) fn parse_whole(
    argv: Vec<std::ffi::OsString>,
) -> (Result<Cli, clap::Error>, Vec<std::ffi::OsString>) {
    use clap::{CommandFactory as _, FromArgMatches as _};
    let command = Cli::command();
    let argv = argv::normalize(&command, argv);
    let command = command.color(color::from_argv(&argv));
    let parsed = command
        .try_get_matches_from(&argv)
        .and_then(|m| Cli::from_arg_matches(&m));
    (parsed, argv)
}

/// `band run …` (or the shortcut `band <skill>/<script> …`) read by a command line of `band
/// run` alone: clap builds every command of [`Cli`] before it reads one (about 0.3 ms of each
/// run's start), and a run needs one. `None` when it is not plainly a run (another command, a
/// global flag before it, `--help`), or the smaller command does not read it as one (a usage
/// error): [`Cli`] then reads it as before, and says what is wrong. Where both read a command
/// line, they agree (tested). With the command line as clap read it ([`argv::normalize`]).
pub(crate) fn fast_run(argv: &[std::ffi::OsString]) -> Option<(Cli, Vec<std::ffi::OsString>)> {
    use clap::{Args as _, FromArgMatches as _};
    argv::run_target(argv)?;
    if argv.get(1).is_some_and(|w| w == "exec") {
        return None;
    }
    let run = run::RunArgs::augment_args(clap::Command::new("run"));
    let help = HelpArgs::augment_args(clap::Command::new("help"));
    let command = Global::augment_args(clap::Command::new("band"))
        .disable_help_subcommand(true)
        .subcommand(run)
        .subcommand(help);
    let argv = argv::normalize(&command, argv.to_vec());
    let mut matches = command.try_get_matches_from(&argv).ok()?;
    let global = Global::from_arg_matches_mut(&mut matches).ok()?;
    let ("run", sub) = matches.subcommand()? else {
        return None;
    };
    let args = run::RunArgs::from_arg_matches(sub).ok()?;
    let cli = Cli {
        global,
        command: Command::Run(args),
    };
    Some((cli, argv))
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Check skills and band files: fields, patterns, conflicts, layout, contracts.
    Lint(LintArgs),
    /// Normalise band files (key order, duplicate rules), keeping comments and layout.
    Fmt(FmtArgs),
    /// Print the effective policy of a skill or one of its scripts.
    Explain(ExplainArgs),
    /// List skills and their scripts.
    List(ListArgs),
    /// Show a script's arguments (from its input schema), or a command's help.
    Help(HelpArgs),
    /// Run a skill's script in the sandbox.
    Run(run::RunArgs),
    /// Run an ad-hoc command (code an agent wrote) under a band file's policy, in the sandbox.
    Exec(exec::ExecArgs),
    /// Observe one run of a script (or, with --band, a command) and draft the narrowest band for
    /// what it did, as a diff against its band; --write writes it and re-locks.
    Learn(learn::LearnArgs),
    /// Write each skill's band.lock (its fingerprint), or check it with --check.
    Lock(lock::LockArgs),
    /// Sign a skill's band.lock with an OpenSSH key into band.lock.sig: a site policy's `keys:`
    /// give its signer a trust tier.
    Sign(lock::SignArgs),
    /// Recent runs from the ledger, as a table or JSON; `prune` drops old records.
    History(history::HistoryArgs),
    /// One recorded run in full, with its events.
    Show(history::ShowArgs),
    /// Check the run ledger.
    Audit(audit::AuditArgs),
    /// Create a skill that lints clean and runs: BAND.md, SKILL.md, one script, its schemas.
    Init(scaffold::InitArgs),
    /// Give an Agent Skill (SKILL.md and scripts, no band) a band and argv-style contracts, so
    /// `band <skill>/<script> -- ARGS…` runs it; prints what it would write unless --write.
    Wrap(wrap::WrapArgs),
    /// Serve every script as a tool over the Model Context Protocol (stdio).
    Mcp(mcp::McpArgs),
    /// Provision a VM (qemu, lima) or an SSH host that runs band-server; idempotent.
    Setup(setup::SetupArgs),
    /// Manage the VM made by `band setup`: status, start, stop, destroy, ssh, logs.
    Vm(vm::VmArgs),
    /// Check the host and the VM (accelerator, tools, band-server) and say what to fix.
    Doctor(doctor::DoctorArgs),
    /// Print a shell completion script: bash, zsh, fish, elvish or powershell.
    ///
    /// bash: `band completions bash > ~/.local/share/bash-completion/completions/band`;
    /// zsh: `band completions zsh > ~/.zfunc/_band` (with `fpath+=~/.zfunc`);
    /// fish: `band completions fish > ~/.config/fish/completions/band.fish`.
    Completions(CompletionsArgs),
    /// Print band's manual page (roff), or write one page per command to a folder.
    ///
    /// `band man | man -l -` reads it; `band man --dir ~/.local/share/man/man1` installs them.
    Man(ManArgs),
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
pub(crate) enum Format {
    Human,
    Json,
    Sarif,
}

#[derive(Debug, clap::Args)]
pub(crate) struct LintArgs {
    /// Skill folders, folders of skills, or band files. Default: the current folder.
    pub(crate) paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub(crate) format: Format,
    /// Treat warnings as errors (exit 1 when there are any).
    #[arg(long)]
    pub(crate) deny_warnings: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct FmtArgs {
    /// Band files, or folders to search for them. Default: the current folder.
    pub(crate) paths: Vec<PathBuf>,
    /// Do not write; exit 1 if any file would change.
    #[arg(long)]
    pub(crate) check: bool,
    /// Print JSON: each file that changes (or would, with --check) and its diff, and the locked
    /// skills that need `band lock` again.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ExplainArgs {
    /// `<skill>` or `<skill>/<script>` (a name found on the skills path, or a folder).
    #[arg(required_unless_present = "band", conflicts_with = "band")]
    pub(crate) target: Option<String>,
    /// Explain a standalone band file (BAND.md or *.band.md), as `band exec --band` uses it.
    #[arg(long, value_name = "FILE")]
    pub(crate) band: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) skills: SkillsArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ListArgs {
    #[arg(long, conflicts_with = "names")]
    pub(crate) json: bool,
    /// Print only the `<skill>/<script>` names, one a line (for scripts and shell completion).
    #[arg(long)]
    pub(crate) names: bool,
    #[command(flatten)]
    pub(crate) skills: SkillsArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub(crate) shell: clap_complete::Shell,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ManArgs {
    /// Write band.1 and a page per command (band-run.1, …) into DIR instead of printing band.1.
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct HelpArgs {
    /// `<skill>/<script>` for a script's arguments, or a command (`band help run`, `band help vm
    /// status`). None: band's own help.
    #[arg(value_name = "SKILL/SCRIPT | COMMAND")]
    pub(crate) target: Vec<String>,
    /// Print the script's arguments as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) skills: SkillsArgs,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }

    fn line(words: &[&str]) -> Vec<std::ffi::OsString> {
        std::iter::once("band")
            .chain(words.iter().copied())
            .map(Into::into)
            .collect()
    }

    #[test]
    fn a_run_reads_the_same_by_band_run_alone_as_by_the_whole_command_line() {
        let runs: &[&[&str]] = &[
            &["run", "text/count"],
            &["run", "text/count", "--text=a"],
            &["text/count", "--text=a", "--json"],
            &["text/count", "--text", "a", "--other"],
            &["run", "--json", "text/count", "--", "--json=1", "--help"],
            &["run", "text/count", "--target", "host", "--trace"],
            &[
                "text/count",
                "--target=qemu",
                "--workspace",
                "/tmp/w",
                "--allow-system-workspace",
            ],
            &["run", "text/count", "--input", "{\"a\": 1}"],
            &["run", "text/count", "--input-file", "-"],
            &["run", "--color", "never", "text/count"],
            &["text/count", "--color=always", "--json", "--n=3"],
            &["run", "text/count", "--require-lock", "--record-io"],
            &[
                "run",
                "text/count",
                "--skills",
                "/a",
                "--skills=/b",
                "--text=a",
            ],
            &["wrapped/cmd", "--", "-x", "--", "y"],
        ];
        for words in runs {
            let argv = line(words);
            let (fast, fast_argv) = super::fast_run(&argv)
                .map(|(c, a)| (format!("{c:?}"), a))
                .unwrap_or_else(|| panic!("{words:?} is a run"));
            let (cli, argv) = super::parse_whole(argv);
            assert_eq!(Some(fast), cli.ok().map(|c| format!("{c:?}")), "{words:?}");
            assert_eq!(fast_argv, argv, "{words:?}");
        }
        // What is not plainly a run, or not a good one, is the whole command line's to read (and
        // to explain).
        let others: &[&[&str]] = &[
            &["run", "text/count", "--help"],
            &["text/count", "-h"],
            &["--json", "run", "text/count"],
            &["exec", "--band", "b.band.md", "--", "ls"],
            &["list"],
            &["run"],
            &["run", "text/count", "--input", "{}", "--input-file", "x"],
            &["run", "--nope", "text/count"],
            &["run", "--version"],
            &["run", "text/count", "--color", "purple"],
        ];
        for words in others {
            assert!(super::fast_run(&line(words)).is_none(), "{words:?}");
        }
    }
}
