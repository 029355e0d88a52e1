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
    Ok(skills::find_skill(name, None, || skill_dirs(args))?)
}

/// Find the skill of `<skill>/<script>` and check it has the script; a miss names the nearest
/// skill or script.
pub(crate) fn find_script(
    name: &str,
    script: &str,
    args: &SkillsArgs,
) -> Result<band::skill::Skill> {
    let root = skills::find_skill(name, Some(script), || skill_dirs(args))?;
    let (skill, _) = band::skill::load_skill(&root);
    skills::check_script(&skill, script)?;
    Ok(skill)
}
