//! `band exec` arguments.

use std::path::PathBuf;

use super::run::RunCommon;

/// [`RunCommon`]'s help, worded for a command where `band run`'s speaks of a script. In place
/// (`mut_arg` would move the flag to the end of the completions).
fn worded_for_a_command(a: clap::Arg) -> clap::Arg {
    let help = match a.get_id().as_str() {
        "workspace" => {
            "The workspace the command sees at /workspace (only files the band admits). Default: `.`"
        }
        "json" => "Print the result as JSON on stdout (the command's stdout is in `stdout`)",
        "trace" => {
            "After the run, list every command it ran, the files it wrote and what the policy \
             refused, each with the rule that decided (and for a refusal the smallest rule that \
             would allow it)"
        }
        _ => return a,
    };
    a.help(help)
}

#[derive(Debug, clap::Args)]
#[command(mut_args(worded_for_a_command))]
pub(crate) struct ExecArgs {
    /// The band file (BAND.md or *.band.md) whose policy the command runs under.
    #[arg(long = "band", value_name = "FILE")]
    pub(crate) band: PathBuf,
    #[command(flatten)]
    pub(crate) common: RunCommon,
    /// Keep the input (the argv), stdout and stderr in the run ledger.
    #[arg(long)]
    pub(crate) record_io: bool,
    /// The command and its arguments, after `--`. The command is a name on the sandbox's PATH
    /// (run a file with its interpreter: `-- python3 script.py`).
    #[arg(last = true, required = true, value_name = "CMD")]
    pub(crate) command: Vec<String>,
}
