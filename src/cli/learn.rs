//! `band learn` arguments.

use std::path::PathBuf;

use super::skills::SkillsArgs;

#[derive(Debug, clap::Args)]
pub(crate) struct LearnArgs {
    /// `<skill>/<script>` to observe; with --band, the command to observe (after `--`).
    pub(crate) target: Option<String>,
    /// Input as `--key=value` arguments (coerced to the types in the input schema); with --band,
    /// the command's arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub(crate) args: Vec<String>,
    /// Input as one JSON document.
    #[arg(long)]
    pub(crate) input: Option<String>,
    /// Observe an ad-hoc command under this band file instead of a skill's script:
    /// `band learn --band FILE -- CMD ARGS…`.
    #[arg(long = "band", value_name = "FILE")]
    pub(crate) band: Option<PathBuf>,
    /// The workspace to observe the run on. It is copied first: the run never changes it.
    /// Default: `.`.
    #[arg(long, value_name = "DIR")]
    pub(crate) workspace: Option<PathBuf>,
    /// Let the observed run reach the network. It can then reach any public host during that run
    /// (band-server still refuses private and local addresses). Without it nothing is reachable;
    /// every name looked up is recorded either way.
    #[arg(long)]
    pub(crate) net: bool,
    /// Offer the environment variable NAME to the run as a secret (repeatable); it is drafted
    /// into env.secrets when the skill's files name it. Declared secrets are offered anyway.
    #[arg(long = "secret", value_name = "NAME")]
    pub(crate) secrets: Vec<String>,
    /// Add what this run saw to what earlier `band learn` runs of the same script saw (kept in
    /// the data folder), so the draft covers every path of the script that was run.
    #[arg(long)]
    pub(crate) merge: bool,
    /// Write the draft into the band file that governs the script (only the changed rule lists;
    /// comments stay) and re-lock the skill (not one that `band lint` finds errors in).
    #[arg(long)]
    pub(crate) write: bool,
    /// Where to run: host, qemu, lima or ssh://user@host[:port] (as for `band run`).
    #[arg(long = "target", value_name = "TARGET")]
    pub(crate) exec_target: Option<String>,
    /// Print the observations, the draft and the diff as JSON on stdout.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) skills: SkillsArgs,
}

impl LearnArgs {
    /// With --band: the command and its arguments (everything after `--`).
    pub(crate) fn command(&self) -> Vec<String> {
        self.target.iter().chain(&self.args).cloned().collect()
    }
}
