//! `band wrap` arguments.

use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub(crate) struct WrapArgs {
    /// The Agent Skill's folder (SKILL.md and scripts/).
    pub(crate) dir: PathBuf,
    /// Write the files and lock the skill, as `band lock` does: not one lint finds errors in
    /// (without it: print what would be written).
    #[arg(long)]
    pub(crate) write: bool,
    /// Replace an existing BAND.md or schema.
    #[arg(long)]
    pub(crate) force: bool,
    /// A workspace path the scripts may read (allow.read), e.g. `forms/*.pdf`; repeatable.
    /// Default: none.
    #[arg(long, value_name = "PATTERN")]
    pub(crate) allow_read: Vec<String>,
    /// A workspace path the scripts may write (allow.write), e.g. `out/**`; repeatable.
    /// Default: none.
    #[arg(long, value_name = "PATTERN")]
    pub(crate) allow_write: Vec<String>,
    /// A host the scripts may connect to (allow.net), e.g. `api.example.com:443`, or
    /// `localhost:8000` for that port of this machine's loopback; repeatable. Default: none.
    #[arg(long, value_name = "HOST[:PORT]")]
    pub(crate) allow_net: Vec<String>,
    /// A Python package the scripts need that only the skill's prose names ("pip install
    /// pandas"), e.g. `pandas>=2`; repeatable. Written into a `requirements.txt` at the skill's
    /// root, from which band-server builds the scripts' environment.
    #[arg(long, value_name = "PKG")]
    pub(crate) with: Vec<String>,
    /// Print the plan (scripts, files, what they hold) as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}
