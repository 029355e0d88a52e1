//! `band init` and `band new-script` arguments, and the languages a new script can be in.

use std::path::PathBuf;

use clap::ValueEnum;

use super::skills::SkillsArgs;

/// The language of a scaffolded script.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Lang {
    Sh,
    Python,
}

#[derive(Debug, clap::Args)]
pub(crate) struct InitArgs {
    /// The new skill's folder; its last component is the skill's name (kebab-case).
    pub(crate) path: PathBuf,
    /// The first script's name.
    #[arg(long, value_name = "NAME", default_value = "hello")]
    pub(crate) script: String,
    /// The first script's language.
    #[arg(long, value_enum, default_value_t = Lang::Sh)]
    pub(crate) lang: Lang,
    /// Print what was made as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct NewScriptArgs {
    /// The skill: a name on the skills path, or a folder.
    pub(crate) skill: String,
    /// The new script's name (kebab-case).
    pub(crate) name: String,
    #[arg(long, value_enum, default_value_t = Lang::Sh)]
    pub(crate) lang: Lang,
    /// Print the files made as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) skills: SkillsArgs,
}
