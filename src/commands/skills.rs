//! Finding skills ([`band::client::skills`]) from the command line: `--skills`, the environment,
//! the user config and the data folder.

use std::path::PathBuf;

use anyhow::Result;

use crate::cli::SkillsArgs;
use band::client::skills;

pub(crate) use band::client::skills::split_target;

/// The folders searched for skills, in order.
pub(crate) fn skill_dirs(args: &SkillsArgs) -> Vec<PathBuf> {
    let env = std::env::var_os(band::proto::env::SKILLS_PATH);
    let config = match band::client::config::UserConfig::load() {
        Ok(c) => c.skills_path,
        Err(e) => {
            eprintln!("band: warning: {e}");
            Vec::new()
        }
    };
    skills::search_path(
        &args.dirs,
        env.as_deref(),
        config,
        dirs::data_dir().as_deref(),
    )
}

/// Find a skill by name on the skills path, or by folder.
pub(crate) fn find_skill(name: &str, args: &SkillsArgs) -> Result<PathBuf> {
    Ok(skills::find_skill(name, || skill_dirs(args))?)
}
