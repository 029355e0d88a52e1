//! `band exec` arguments.

use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub(crate) struct ExecArgs {
    /// The band file (BAND.md or *.band.md) whose policy the command runs under.
    #[arg(long = "band", value_name = "FILE")]
    pub(crate) band: PathBuf,
    /// The workspace the command sees at /workspace (only files the band admits). Default: `.`.
    #[arg(long, value_name = "DIR")]
    pub(crate) workspace: Option<PathBuf>,
    /// Let the workspace be a system folder (/, /etc, /usr, /var/lib, …) or, under sudo, a folder
    /// you do not own. Refused by default: band reads and writes the workspace with your rights,
    /// often root's.
    #[arg(long)]
    pub(crate) allow_system_workspace: bool,
    /// Where to run: host, qemu, lima or ssh://user@host[:port]. Default: `force_target` in
    /// ~/.config/band/config.toml, then the band's execution.target (mapped by the config's
    /// [targets]), then the config's `target`, then host on Linux (as root or with sudo -n; else
    /// the set-up VM). See docs/vm.md.
    #[arg(long = "target", value_name = "TARGET")]
    pub(crate) exec_target: Option<String>,
    /// Print the result as JSON on stdout (the command's stdout is in `stdout`).
    #[arg(long)]
    pub(crate) json: bool,
    /// After the run, list every command it ran, the files it wrote and what the policy refused,
    /// each with the rule that decided (and for a refusal the smallest rule that would allow it).
    #[arg(long)]
    pub(crate) trace: bool,
    /// Keep the input (the argv), stdout and stderr in the run ledger.
    #[arg(long)]
    pub(crate) record_io: bool,
    /// The command and its arguments, after `--`. The command is a name on the sandbox's PATH
    /// (run a file with its interpreter: `-- python3 script.py`).
    #[arg(last = true, required = true, value_name = "CMD")]
    pub(crate) command: Vec<String>,
}
