//! Finding skills: the skills path, a skill by name, `<skill>/<script>`.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::cli::{SkillsArgs, user_error};

/// The folders searched for skills, in order.
pub(crate) fn skill_dirs(args: &SkillsArgs) -> Vec<PathBuf> {
    let mut dirs = args.dirs.clone();
    if let Some(p) = std::env::var_os(band::proto::env::SKILLS_PATH) {
        dirs.extend(std::env::split_paths(&p));
    }
    dirs.push(PathBuf::from("skills"));
    match band::client::config::UserConfig::load() {
        Ok(c) => dirs.extend(c.skills_path),
        Err(e) => eprintln!("band: warning: {e}"),
    }
    if let Some(d) = dirs::data_dir() {
        dirs.push(d.join("band/skills"));
    }
    dirs
}

/// Find a skill by name on the skills path, or by folder.
pub(crate) fn find_skill(name: &str, args: &SkillsArgs) -> Result<PathBuf> {
    let as_path = Path::new(name);
    if as_path.is_dir() && band::skill::is_skill_dir(as_path) {
        return Ok(as_path.to_path_buf());
    }
    let dirs = skill_dirs(args);
    for d in &dirs {
        let p = d.join(name);
        if band::skill::is_skill_dir(&p) {
            return Ok(p);
        }
    }
    Err(user_error(
        format!("no skill named `{name}`"),
        format!(
            "looked in {}; pass --skills DIR or a path to the skill folder, and see `band list`",
            dirs.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    ))
}

/// Split `<skill>/<script>`; the skill part may itself be a path.
pub(crate) fn split_target(target: &str) -> (&str, Option<&str>) {
    match target.rsplit_once('/') {
        Some((skill, script)) if !skill.is_empty() && !Path::new(target).is_dir() => {
            (skill, Some(script))
        }
        _ => (target.trim_end_matches('/'), None),
    }
}
