//! Finding skills: the skills path, a skill by name or folder, `<skill>/<script>`. What the
//! search path is made of (arguments, `$BAND_SKILLS_PATH`, the config, the data folder) is given
//! by the caller, so the order is tested without the environment.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use super::{ClientError, Result};

/// The folders searched for skills, in order: `given` (`--skills`), `env` (`$BAND_SKILLS_PATH`,
/// split like `$PATH`), `./skills`, `config` (`skills_path` in the user config), then
/// `<data_dir>/band/skills`.
pub fn search_path(
    given: &[PathBuf],
    env: Option<&OsStr>,
    config: Vec<PathBuf>,
    data_dir: Option<&Path>,
) -> Vec<PathBuf> {
    let mut dirs = given.to_vec();
    if let Some(p) = env {
        dirs.extend(std::env::split_paths(p));
    }
    dirs.push(PathBuf::from("skills"));
    dirs.extend(config);
    if let Some(d) = data_dir {
        dirs.push(d.join("band/skills"));
    }
    dirs
}

/// Find a skill: `name` itself when it is a skill's folder, else the first `<dir>/<name>` that is
/// one, over `dirs()` (asked for only then).
pub fn find_skill(name: &str, dirs: impl FnOnce() -> Vec<PathBuf>) -> Result<PathBuf> {
    let as_path = Path::new(name);
    if as_path.is_dir() && crate::skill::is_skill_dir(as_path) {
        return Ok(as_path.to_path_buf());
    }
    let dirs = dirs();
    for d in &dirs {
        let p = d.join(name);
        if crate::skill::is_skill_dir(&p) {
            return Ok(p);
        }
    }
    Err(ClientError::user(
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
pub fn split_target(target: &str) -> (&str, Option<&str>) {
    match target.rsplit_once('/') {
        Some((skill, script)) if !skill.is_empty() && !Path::new(target).is_dir() => {
            (skill, Some(script))
        }
        _ => (target.trim_end_matches('/'), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_search_path_keeps_its_order() {
        let dirs = search_path(
            &[PathBuf::from("/given")],
            Some(OsStr::new("/env1:/env2")),
            vec![PathBuf::from("/config")],
            Some(Path::new("/data")),
        );
        let want: Vec<PathBuf> = [
            "/given",
            "/env1",
            "/env2",
            "skills",
            "/config",
            "/data/band/skills",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(dirs, want);
        assert_eq!(
            search_path(&[], None, Vec::new(), None),
            [PathBuf::from("skills")]
        );
    }

    #[test]
    fn a_skill_is_found_by_folder_or_on_the_path() {
        let t = tempfile::tempdir().expect("tmp");
        let skill = t.path().join("one");
        fs_err::create_dir(&skill).expect("mkdir");
        fs_err::write(
            skill.join("SKILL.md"),
            "---\nname: one\ndescription: d\n---\n",
        )
        .expect("write");
        let folder = skill.to_str().expect("utf-8");
        assert_eq!(
            find_skill(folder, || panic!("the path is not needed")).expect("by folder"),
            skill
        );
        let dirs = || vec![PathBuf::from("/nowhere"), t.path().to_path_buf()];
        assert_eq!(find_skill("one", dirs).expect("on the path"), skill);
        match find_skill("two", dirs) {
            Err(ClientError::User { message, hint }) => {
                assert_eq!(message, "no skill named `two`");
                assert!(hint.starts_with("looked in /nowhere, "), "{hint}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn targets_split_at_the_last_slash() {
        assert_eq!(split_target("text/count"), ("text", Some("count")));
        assert_eq!(
            split_target("./skills/text/count"),
            ("./skills/text", Some("count"))
        );
        assert_eq!(split_target("text"), ("text", None));
        assert_eq!(split_target("/"), ("", None));
    }
}
