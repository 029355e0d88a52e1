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
    /// Name each tool by its script alone (`count`), not `<skill>__<script>`; a script name two
    /// skills share is then left out, and said.
    #[arg(long)]
    pub(crate) script_tool_names: bool,
    /// Serve MCP over Streamable HTTP at ADDR (`PORT` or `HOST:PORT`; a bare port is on loopback)
    /// instead of stdio, at the path /mcp. Any address but loopback needs a bearer token.
    #[arg(long, value_name = "ADDR")]
    pub(crate) http: Option<String>,
    /// The file holding the bearer token HTTP clients must send (`Authorization: Bearer …`),
    /// readable by its owner only. Else $BAND_MCP_TOKEN; never on the command line.
    #[arg(long, value_name = "FILE", requires = "http")]
    pub(crate) token_file: Option<PathBuf>,
    /// A name HTTP clients may use in the Host header, besides localhost, 127.0.0.1, ::1 and the
    /// address served (repeatable). Others are refused, against DNS rebinding.
    #[arg(long, value_name = "HOST", requires = "http")]
    pub(crate) allow_host: Vec<String>,
    /// A browser origin allowed to call (`https://app.example:443`, `http://localhost:*`;
    /// repeatable). Loopback origins are allowed; a request from any other Origin is refused.
    #[arg(long, value_name = "ORIGIN", requires = "http")]
    pub(crate) allow_origin: Vec<String>,
    #[command(flatten)]
    pub(crate) skills: SkillsArgs,
}
