//! `band mcp` arguments.

use std::path::PathBuf;

use super::skills::SkillsArgs;

#[derive(Debug, clap::Args)]
pub(crate) struct McpArgs {
    /// The folder every script sees at /workspace (only the files its band admits). Default:
    /// the folder band mcp is started in.
    #[arg(long, value_name = "DIR")]
    pub(crate) workspace: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) skills: SkillsArgs,
}
