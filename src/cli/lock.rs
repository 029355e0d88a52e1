//! `band lock` arguments.

use super::skills::SkillsArgs;

#[derive(Debug, clap::Args)]
pub(crate) struct LockArgs {
    /// Skills: names on the skills path, or skill folders. Default: the current folder.
    pub(crate) skills: Vec<String>,
    /// Do not write; exit 7 (integrity_failed) when a skill differs from its band.lock or has none.
    #[arg(long)]
    pub(crate) check: bool,
    /// Print one JSON object per skill (`skill`, `lock`, `state`, …) as a JSON array.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) dirs: SkillsArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct SignArgs {
    /// The skill: a name on the skills path, or a skill folder. Default: the current folder.
    pub(crate) skill: Option<String>,
    /// The signer's OpenSSH ed25519 private key (unencrypted: for one with a passphrase,
    /// `ssh-keygen -Y sign -n band -f KEY band.lock` writes the same band.lock.sig).
    #[arg(long, value_name = "KEY")]
    pub(crate) key: std::path::PathBuf,
    #[command(flatten)]
    pub(crate) dirs: SkillsArgs,
}
