//! `band run` arguments, and the shortcut `band <skill>/<script> …`.

use std::path::PathBuf;

use super::skills::SkillsArgs;

#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// `<skill>/<script>`.
    pub(crate) target: String,
    /// Input as `--key=value` arguments (coerced to the types in the input schema). Not together
    /// with --input or --input-file.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub(crate) args: Vec<String>,
    /// Input as one JSON document.
    #[arg(long, conflicts_with = "input_file")]
    pub(crate) input: Option<String>,
    /// Input as one JSON document read from FILE, or from stdin when FILE is `-` (64 MiB at most).
    #[arg(long, value_name = "FILE")]
    pub(crate) input_file: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) common: RunCommon,
    /// Refuse the skill if it has no band.lock (also `require_lock = true` in the config).
    #[arg(long)]
    pub(crate) require_lock: bool,
    /// Keep the input and output documents, stdout and stderr in the run ledger (default:
    /// only their sizes and SHA-256).
    #[arg(long)]
    pub(crate) record_io: bool,
    #[command(flatten)]
    pub(crate) skills: SkillsArgs,
}

/// The flags `band run` and `band exec` share: where the run happens and what it shows. The help
/// text is `band run`'s; `band exec` words three of them for a command ([`super::exec`]).
#[derive(Debug, clap::Args)]
pub(crate) struct RunCommon {
    /// The workspace the script sees at /workspace (only files its band allows). Default: `.`.
    #[arg(long, value_name = "DIR")]
    pub(crate) workspace: Option<PathBuf>,
    /// Let the workspace be a system folder (/, /etc, /usr, /var/lib, …) or, under sudo, a folder
    /// you do not own. Refused by default: band reads and writes the workspace with your rights,
    /// often root's.
    #[arg(long)]
    pub(crate) allow_system_workspace: bool,
    /// Where to run: host, qemu, lima, ssh://user@host[:port] or sandboxd://host:port (a pod's
    /// band-sandboxd: under the pod's band, which a skill can only narrow; the token from
    /// $BAND_SANDBOXD_TOKEN_FILE; docs/kubernetes.md). Default: `force_target` in
    /// ~/.config/band/config.toml, then the band's execution.target (mapped by the config's
    /// [targets]), then the config's `target`, then host on Linux (as root or with sudo -n; else
    /// the set-up VM). See docs/vm.md.
    #[arg(long = "target", value_name = "TARGET")]
    pub(crate) exec_target: Option<String>,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub(crate) json: bool,
    /// After the run, list every command the script ran, the files it wrote and what the policy
    /// refused, each with the rule that decided.
    #[arg(long)]
    pub(crate) trace: bool,
}

impl RunCommon {
    /// The workspace, `.` by default.
    pub(crate) fn workspace(&self) -> PathBuf {
        self.workspace.clone().unwrap_or_else(|| PathBuf::from("."))
    }
}

/// `band run`'s arguments on their own, for the shortcut.
#[derive(Debug, clap::Parser)]
#[command(name = "band", no_binary_name = true, disable_help_flag = true)]
pub(crate) struct Shortcut {
    #[command(flatten)]
    pub(crate) run: RunArgs,
}
