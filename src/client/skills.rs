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
/// one, over `dirs()` (asked for only then). `script`, when the skill was named as
/// `<skill>/<script>`, only shapes the "did you mean" hint.
pub fn find_skill(
    name: &str,
    script: Option<&str>,
    dirs: impl FnOnce() -> Vec<PathBuf>,
) -> Result<PathBuf> {
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
    let names = skill_names(&dirs);
    let hint = match crate::suggest::nearest(name, names.iter().map(String::as_str)) {
        Some(near) => format!(
            "did you mean `{}`? `band list` shows the skills",
            target(near, script)
        ),
        None => format!(
            "looked in {}; pass --skills DIR or a path to the skill folder, and see `band list`",
            dirs.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    Err(ClientError::user(format!("no skill named `{name}`"), hint))
}

/// The names of the skills directly inside `dirs`, in order (folders that cannot be read are
/// left out: this only feeds a hint).
fn skill_names(dirs: &[PathBuf]) -> Vec<String> {
    let mut names = Vec::new();
    for d in dirs {
        let Ok(entries) = fs_err::read_dir(d) else {
            continue;
        };
        let mut here: Vec<String> = entries
            .flatten()
            .filter(|e| crate::skill::is_skill_dir(&e.path()))
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        here.sort();
        names.extend(here);
    }
    names
}

/// That `skill` has `script`; else an error naming the nearest script, if one is close.
pub fn check_script(skill: &crate::skill::Skill, script: &str) -> Result<()> {
    if skill.script(script).is_some() {
        return Ok(());
    }
    let near = crate::suggest::nearest(script, skill.scripts.iter().map(|s| s.name.as_str()));
    Err(ClientError::user(
        format!("skill `{}` has no script `{script}`", skill.name),
        match near {
            Some(near) => format!(
                "did you mean `{}`? `band list` shows the scripts",
                target(&skill.name, Some(near))
            ),
            None => "`band list` shows the scripts".to_string(),
        },
    ))
}

fn target(skill: &str, script: Option<&str>) -> String {
    match script {
        Some(script) => format!("{skill}/{script}"),
        None => skill.to_string(),
    }
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
            find_skill(folder, None, || panic!("the path is not needed")).expect("by folder"),
            skill
        );
        let dirs = || vec![PathBuf::from("/nowhere"), t.path().to_path_buf()];
        assert_eq!(find_skill("one", None, dirs).expect("on the path"), skill);
        match find_skill("two", None, dirs) {
            Err(ClientError::User { message, hint }) => {
                assert_eq!(message, "no skill named `two`");
                assert!(hint.starts_with("looked in /nowhere, "), "{hint}");
            }
            other => panic!("{other:?}"),
        }
        match find_skill("onw", Some("go"), dirs) {
            Err(ClientError::User { message, hint }) => {
                assert_eq!(message, "no skill named `onw`");
                assert_eq!(hint, "did you mean `one/go`? `band list` shows the skills");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_missing_script_names_the_nearest() {
        let (skill, _) =
            crate::skill::load_skill(&Path::new(env!("CARGO_MANIFEST_DIR")).join("skills/text"));
        assert!(check_script(&skill, "count").is_ok());
        let hint = |script| match check_script(&skill, script) {
            Err(ClientError::User { hint, .. }) => hint,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            hint("cont"),
            "did you mean `text/count`? `band list` shows the scripts"
        );
        assert_eq!(hint("zzz"), "`band list` shows the scripts");
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
