//! `--skills DIR`: where to look for skills (shared by several commands).

use std::path::PathBuf;

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct SkillsArgs {
    /// Where to find skills (repeatable). Then $BAND_SKILLS_PATH, ./skills, ~/.local/share/band/skills.
    #[arg(long = "skills", value_name = "DIR")]
    pub(crate) dirs: Vec<PathBuf>,
}
