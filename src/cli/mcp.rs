//! `band mcp` arguments.

use std::path::PathBuf;

use super::skills::SkillsArgs;

#[derive(Debug, clap::Args)]
pub(crate) struct McpArgs {
    /// The folder every script sees at /workspace (only the files its band admits). Default:
    /// the folder band mcp is started in.
    #[arg(long, value_name = "DIR")]
    pub(crate) workspace: Option<PathBuf>,
    /// Let the workspace be a system folder (/, /etc, /usr, /var/lib, …) or, under sudo, a folder
    /// you do not own. Refused by default: band reads and writes the workspace with your rights,
    /// often root's.
    #[arg(long)]
    pub(crate) allow_system_workspace: bool,
    /// Where every call runs: host, qemu, lima or ssh://user@host[:port], over the band's
    /// execution.target and the config (docs/vm.md, "Choosing a target").
    #[arg(long, value_name = "TARGET")]
    pub(crate) target: Option<String>,
    #[command(flatten)]
    pub(crate) skills: SkillsArgs,
}
