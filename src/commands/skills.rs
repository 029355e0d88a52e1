//! Finding skills ([`band::client::skills`]) from the command line: `--skills`, the environment,
//! the user config and the data folder.

use std::path::PathBuf;

use anyhow::Result;

use crate::cli::SkillsArgs;
use band::client::skills;

pub(crate) use band::client::skills::split_target;

/// The folders searched for skills, in order. A config file that cannot be read is an error
/// (with its file, line and hint), said once: before, each command warned and then, for a run,
/// failed with the same text.
pub(crate) fn skill_dirs(args: &SkillsArgs) -> Result<Vec<PathBuf>> {
    let env = std::env::var_os(band::proto::env::SKILLS_PATH);
    let config = band::client::config::UserConfig::load()?.skills_path;
    Ok(skills::search_path(
        &args.dirs,
        env.as_deref(),
        config,
        dirs::data_dir().as_deref(),
    ))
}

/// [`skills::find_skill`] with the search path read only if the name is not a folder; a
/// config error then comes first, before "no skill named …".
fn find_on_path(name: &str, script: Option<&str>, args: &SkillsArgs) -> Result<PathBuf> {
    let mut failed = None;
    let found = skills::find_skill(name, script, || {
        skill_dirs(args).unwrap_or_else(|e| {
            failed = Some(e);
            Vec::new()
        })
    });
    if let Some(e) = failed {
        return Err(e);
    }
    Ok(found?)
}

/// Find a skill by name on the skills path, or by folder.
pub(crate) fn find_skill(name: &str, args: &SkillsArgs) -> Result<PathBuf> {
    find_on_path(name, None, args)
}

/// Find the skill of `<skill>/<script>` and check it has the script; a miss names the nearest
/// skill or script.
pub(crate) fn find_script(
    name: &str,
    script: &str,
    args: &SkillsArgs,
) -> Result<band::skill::Skill> {
    let root = find_on_path(name, Some(script), args)?;
    let (skill, _) = band::skill::load_skill(&root);
    skills::check_script(&skill, script)?;
    Ok(skill)
}
