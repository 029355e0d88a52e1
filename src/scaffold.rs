//! The files of a new skill (`band init`) or a new script in a skill (`band new-script`), which
//! lint clean and run as they are.
//!
//! The files are built by pure functions ([`skill_files`], [`script_files`], [`script_band`]);
//! [`write_new`] writes them and refuses to overwrite anything; [`init`] and [`new_script`] do
//! both, after their checks. The starting band is the narrowest that lets the scaffold run: no
//! network, no workspace files, and one command in one exact shape (`jq` reading the `name` field
//! for a shell script, `python3` running the script for Python).

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::manifest::{is_kebab, to_kebab};
use crate::policy::CompiledPolicy;
use crate::skill::{Skill, load_skill, resolve_band_file};

/// The language of a scaffolded script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    Sh,
    Python,
}

impl Lang {
    fn ext(self) -> &'static str {
        match self {
            Lang::Sh => "sh",
            Lang::Python => "py",
        }
    }

    /// The one command the scaffolded script runs, as the sandbox sees it.
    pub fn needed_argv(self, script: &str) -> Vec<String> {
        match self {
            Lang::Sh => ["jq", "-r", ".name", "/band/io/input.json"]
                .map(String::from)
                .to_vec(),
            Lang::Python => vec!["python3".into(), format!("/skill/scripts/{script}.py")],
        }
    }

    /// The `allow.cli` rule for [`Lang::needed_argv`].
    pub fn cli_rule(self, script: &str) -> String {
        self.needed_argv(script).join(" ")
    }
}

/// One file to create: path relative to the skill root, contents, executable or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewFile {
    pub rel: String,
    pub text: String,
    pub executable: bool,
}

/// Why nothing was scaffolded. [`ScaffoldError::hint`] says what to do instead.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    #[error("{what} name `{}` is not kebab-case", .name.escape_debug())]
    NotKebab { what: &'static str, name: String },
    #[error("{} exists and is not empty", .0.display())]
    NotEmpty(PathBuf),
    #[error("skill `{skill}` already has a script `{script}`")]
    ScriptExists { skill: String, script: String },
    #[error("{} already exists; nothing was written", .0.display())]
    FileExists(PathBuf),
    /// A file-system error from `fs_err` (its message names the path).
    #[error(transparent)]
    Fs(std::io::Error),
}

impl ScaffoldError {
    /// How to fix it, when the user can.
    pub fn hint(&self) -> Option<String> {
        match self {
            ScaffoldError::NotKebab { name, .. } => Some(format!(
                "use lowercase letters, digits and single hyphens, e.g. `{}`",
                to_kebab(name)
            )),
            ScaffoldError::NotEmpty(_) => Some(
                "pick a new folder; `band new-script` adds a script to an existing skill".into(),
            ),
            ScaffoldError::ScriptExists { .. } => Some("pick another name".into()),
            ScaffoldError::FileExists(_) => Some("pick another name, or remove the file".into()),
            ScaffoldError::Fs(_) => None,
        }
    }
}

pub type Result<T> = std::result::Result<T, ScaffoldError>;

/// Lowercase letters, digits and single hyphens, starting with a letter (as band names).
pub fn check_name(what: &'static str, name: &str) -> Result<()> {
    if is_kebab(name) {
        return Ok(());
    }
    Err(ScaffoldError::NotKebab {
        what,
        name: name.to_string(),
    })
}

/// `band init`: a new skill in `root` (missing or empty), named after its last component, with
/// one script. Returns the skill's name.
pub fn init(root: &Path, script: &str, lang: Lang) -> Result<String> {
    let name = root.file_name().and_then(|n| n.to_str()).unwrap_or("");
    check_name("skill", name)?;
    check_name("script", script)?;
    if root.exists()
        && fs_err::read_dir(root)
            .map_err(ScaffoldError::Fs)?
            .next()
            .is_some()
    {
        return Err(ScaffoldError::NotEmpty(root.to_path_buf()));
    }
    write_new(root, &skill_files(name, script, lang))?;
    Ok(name.to_string())
}

/// What [`new_script`] wrote.
#[derive(Debug, Clone)]
pub struct NewScript {
    pub files: Vec<NewFile>,
    /// The skill's band does not allow what the script needs, so it got its own
    /// (`scripts/<name>.band.md`).
    pub own_band: bool,
}

/// `band new-script`: script `name` in the skill at `root`, with its own band when the skill's
/// does not allow what it needs.
pub fn new_script(root: &Path, name: &str, lang: Lang) -> Result<NewScript> {
    check_name("script", name)?;
    let (skill, _) = load_skill(root);
    // The skill's folder name goes into the script's comments and its band (`band:`): a name
    // with a newline would write code and keys of its own.
    check_name("skill", &skill.name)?;
    if skill.script(name).is_some() {
        return Err(ScaffoldError::ScriptExists {
            skill: skill.name,
            script: name.to_string(),
        });
    }
    let mut files = script_files(&skill.name, name, lang);
    let own_band = !governing_band_allows(&skill, name, &lang.needed_argv(name));
    if own_band {
        files.push(script_band(&skill.name, name, lang));
    }
    write_new(root, &files)?;
    Ok(NewScript { files, own_band })
}

/// Everything `band init` writes.
pub fn skill_files(skill: &str, script: &str, lang: Lang) -> Vec<NewFile> {
    let band = format!(
        "---
band: {skill}
description: What {skill} may do. Everything not listed here is denied.
version: 1
allow:
  cli: [\"{rule}\"]
limit:
  maxRuntimeMs: 10s
  maxMemoryBytes: 128m
  maxPids: 16
  maxOutputBytes: 64k
---

The narrowest start: no network, no workspace files, and one command in one exact shape. Run
`band run --trace {skill}/{script} --name=World` to see every command a script tries, then allow
exactly those.
",
        rule = lang.cli_rule(script)
    );
    let skill_md = format!(
        "---
name: {skill}
description: Says hello. Replace this with what the skill does and when an agent should use it.
---

# {skill}

`band run {skill}/{script} --name=World` prints `{{\"greeting\": \"Hello, World!\"}}`.
"
    );
    let mut files = vec![
        NewFile {
            rel: "BAND.md".into(),
            text: band,
            executable: false,
        },
        NewFile {
            rel: "SKILL.md".into(),
            text: skill_md,
            executable: false,
        },
    ];
    files.extend(script_files(skill, script, lang));
    files
}

/// A script and its two schemas (what `band new-script` writes, besides a band when needed).
pub fn script_files(skill: &str, script: &str, lang: Lang) -> Vec<NewFile> {
    let body = match lang {
        Lang::Sh => format!(
            "#!/bin/sh
# {skill}/{script}: replace this with what the script does.
# Input: $INPUT_PATH, JSON checked against schemas/input/{script}.json.
# Output: JSON written to $OUTPUT_PATH, checked against schemas/output/{script}.json.
set -eu
name=$(jq -r .name \"$INPUT_PATH\")
# The input schema limits `name` to characters that need no escaping in JSON.
printf '{{\"greeting\":\"Hello, %s!\"}}\\n' \"$name\" > \"$OUTPUT_PATH\"
"
        ),
        Lang::Python => format!(
            "#!/usr/bin/env python3
\"\"\"{skill}/{script}: replace this with what the script does.

Input: $INPUT_PATH, JSON checked against schemas/input/{script}.json.
Output: JSON written to $OUTPUT_PATH, checked against schemas/output/{script}.json.
\"\"\"

import json
import os

with open(os.environ[\"INPUT_PATH\"], encoding=\"utf-8\") as f:
    args = json.load(f)
with open(os.environ[\"OUTPUT_PATH\"], \"w\", encoding=\"utf-8\") as f:
    json.dump({{\"greeting\": f\"Hello, {{args['name']}}!\"}}, f)
"
        ),
    };
    let input = serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "description": format!("Replace with what {skill}/{script} takes."),
        "type": "object",
        "properties": {
            "name": { "type": "string", "description": "Who to greet", "pattern": "^[A-Za-z0-9 ._-]{1,64}$" }
        },
        "required": ["name"],
        "additionalProperties": false
    });
    let output = serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": { "greeting": { "type": "string" } },
        "required": ["greeting"],
        "additionalProperties": false
    });
    let pretty = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap_or_default() + "\n";
    vec![
        NewFile {
            rel: format!("scripts/{script}.{}", lang.ext()),
            text: body,
            executable: true,
        },
        NewFile {
            rel: format!("schemas/input/{script}.json"),
            text: pretty(&input),
            executable: false,
        },
        NewFile {
            rel: format!("schemas/output/{script}.json"),
            text: pretty(&output),
            executable: false,
        },
    ]
}

/// A band for one script (`scripts/<name>.band.md`), for when the skill's band does not allow
/// what the new script needs.
pub fn script_band(skill: &str, script: &str, lang: Lang) -> NewFile {
    NewFile {
        rel: format!("scripts/{script}.band.md"),
        text: format!(
            "---
band: {skill}-{script}
description: What {skill}/{script} may do. This file governs only this script; everything not listed is denied.
version: 1
allow:
  cli: [\"{rule}\"]
limit:
  maxRuntimeMs: 10s
  maxMemoryBytes: 128m
  maxPids: 16
  maxOutputBytes: 64k
---
",
            rule = lang.cli_rule(script)
        ),
        executable: false,
    }
}

/// Create every file under `root`, refusing to overwrite: all paths are checked first, so
/// nothing is written when any exists.
pub fn write_new(root: &Path, files: &[NewFile]) -> Result<()> {
    for f in files {
        let p = root.join(&f.rel);
        if p.exists() {
            return Err(ScaffoldError::FileExists(p));
        }
    }
    for f in files {
        let p = root.join(&f.rel);
        if let Some(dir) = p.parent() {
            fs_err::create_dir_all(dir).map_err(ScaffoldError::Fs)?;
        }
        let mut file = fs_err::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&p)
            .map_err(ScaffoldError::Fs)?;
        file.write_all(f.text.as_bytes())
            .map_err(ScaffoldError::Fs)?;
        #[cfg(unix)]
        if f.executable {
            use std::os::unix::fs::PermissionsExt;
            fs_err::set_permissions(&p, std::fs::Permissions::from_mode(0o755))
                .map_err(ScaffoldError::Fs)?;
        }
    }
    Ok(())
}

/// Would the band that governs `script` (once it exists) allow `argv`? A missing or broken band
/// allows nothing.
pub fn governing_band_allows(skill: &Skill, script: &str, argv: &[String]) -> bool {
    let Some(file) = skill.band_file_for(script) else {
        return false;
    };
    let Some(resolved) = resolve_band_file(&file).0 else {
        return false;
    };
    CompiledPolicy::compile(&resolved.policy).is_ok_and(|p| p.cli.check(argv).is_allowed())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lint_clean(root: &Path) {
        let report = crate::lint::lint_paths(&[root.to_path_buf()]);
        assert!(report.diagnostics.is_empty(), "{:#?}", report.diagnostics);
        assert_eq!(report.skills, 1);
    }

    #[test]
    fn init_scaffolds_lint_clean_in_both_languages() {
        for lang in [Lang::Sh, Lang::Python] {
            let t = tempfile::tempdir().unwrap();
            let root = t.path().join("my-skill");
            write_new(&root, &skill_files("my-skill", "greet", lang)).unwrap();
            lint_clean(&root);
            let (skill, _) = load_skill(&root);
            assert_eq!(skill.scripts.len(), 1);
            assert!(
                governing_band_allows(&skill, "greet", &lang.needed_argv("greet")),
                "{lang:?}"
            );
            assert!(!governing_band_allows(
                &skill,
                "greet",
                &["jq".into(), ".".into()]
            ));
        }
    }

    #[test]
    fn a_script_the_band_does_not_cover_gets_its_own_band() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("s");
        write_new(&root, &skill_files("s", "one", Lang::Sh)).unwrap();
        let (skill, _) = load_skill(&root);
        // The sh scaffold's rule covers another sh script; a Python script needs its own rule.
        assert!(governing_band_allows(
            &skill,
            "two",
            &Lang::Sh.needed_argv("two")
        ));
        assert!(!governing_band_allows(
            &skill,
            "two",
            &Lang::Python.needed_argv("two")
        ));
        let mut files = script_files("s", "two", Lang::Python);
        files.push(script_band("s", "two", Lang::Python));
        write_new(&root, &files).unwrap();
        lint_clean(&root);
        let (skill, _) = load_skill(&root);
        assert!(governing_band_allows(
            &skill,
            "two",
            &Lang::Python.needed_argv("two")
        ));
        assert!(!governing_band_allows(
            &skill,
            "two",
            &Lang::Sh.needed_argv("two")
        ));
    }

    #[test]
    fn write_new_never_overwrites_and_writes_nothing_on_conflict() {
        let t = tempfile::tempdir().unwrap();
        let files = skill_files("x", "a", Lang::Sh);
        fs_err::create_dir_all(t.path().join("schemas/output")).unwrap();
        fs_err::write(t.path().join("schemas/output/a.json"), "{}").unwrap();
        let err = write_new(t.path(), &files).unwrap_err().to_string();
        assert!(err.contains("already exists"), "{err}");
        assert!(!t.path().join("BAND.md").exists());
        assert_eq!(
            fs_err::read_to_string(t.path().join("schemas/output/a.json")).unwrap(),
            "{}"
        );
    }

    #[test]
    fn names_must_be_kebab_case() {
        assert!(check_name("skill", "my-skill").is_ok());
        let err = check_name("skill", "My_Skill").expect_err("not kebab");
        let hint = err.hint().unwrap_or_default();
        assert!(hint.contains("`my-skill`"), "{hint}");
        assert!(check_name("script", "a__b").is_err());
    }

    #[test]
    fn init_refuses_a_folder_with_files_and_new_script_an_existing_script() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("s");
        assert_eq!(init(&root, "one", Lang::Sh).unwrap(), "s");
        assert!(matches!(
            init(&root, "one", Lang::Sh),
            Err(ScaffoldError::NotEmpty(_))
        ));
        assert!(matches!(
            new_script(&root, "one", Lang::Sh),
            Err(ScaffoldError::ScriptExists { .. })
        ));
        let two = new_script(&root, "two", Lang::Python).unwrap();
        assert!(two.own_band);
        assert!(!new_script(&root, "three", Lang::Sh).unwrap().own_band);
    }

    #[test]
    fn new_script_refuses_a_skill_folder_whose_name_is_not_a_band_name() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("x\nallow:\n  net: [\"*\"]");
        fs_err::create_dir_all(root.join("scripts")).unwrap();
        let e = new_script(&root, "stats", Lang::Python).unwrap_err();
        assert!(
            matches!(e, ScaffoldError::NotKebab { what: "skill", .. }),
            "{e:?}"
        );
        // Shown escaped: the newline is `\n`, not a line of its own.
        assert!(!e.to_string().contains('\n'), "{e}");
        assert!(!root.join("scripts/stats.py").exists());
        assert!(!root.join("scripts/stats.band.md").exists());
    }
}
