//! `band init` and `band new-script`: a new skill, or a new script in a skill, that lints clean and
//! runs as it is.
//!
//! The files are built by pure functions ([`skill_files`], [`script_files`]); [`write_new`] writes
//! them and refuses to overwrite anything. The starting band is the narrowest that lets the
//! scaffold run: no network, no workspace files, and one command in one exact shape (`jq` reading
//! the `name` field for a shell script, `python3` running the script for Python).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use super::skills::find_skill;
use crate::cli::scaffold::{InitArgs, Lang, NewScriptArgs};
use crate::cli::user_error;
use band::policy::CompiledPolicy;
use band::proto::exit;

/// One file to create: path relative to the skill root, contents, executable or not.
impl Lang {
    fn ext(self) -> &'static str {
        match self {
            Lang::Sh => "sh",
            Lang::Python => "py",
        }
    }

    /// The one command the scaffolded script runs, as the sandbox sees it.
    fn needed_argv(self, script: &str) -> Vec<String> {
        match self {
            Lang::Sh => ["jq", "-r", ".name", "/band/io/input.json"]
                .map(String::from)
                .to_vec(),
            Lang::Python => vec!["python3".into(), format!("/skill/scripts/{script}.py")],
        }
    }

    /// The `allow.cli` rule for [`Lang::needed_argv`].
    fn cli_rule(self, script: &str) -> String {
        self.needed_argv(script).join(" ")
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NewFile {
    pub rel: String,
    pub text: String,
    pub executable: bool,
}

/// Lowercase letters, digits and single hyphens, starting with a letter (as band names).
pub(crate) fn check_name(what: &str, name: &str) -> Result<()> {
    if band::manifest::is_kebab(name) {
        return Ok(());
    }
    Err(user_error(
        format!("{what} name `{name}` is not kebab-case"),
        format!(
            "use lowercase letters, digits and single hyphens, e.g. `{}`",
            band::manifest::to_kebab(name)
        ),
    ))
}

/// Everything `band init` writes.
pub(crate) fn skill_files(skill: &str, script: &str, lang: Lang) -> Vec<NewFile> {
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
`band run --trace {skill}/{script}` to see every command a script tries, then allow exactly those.
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
pub(crate) fn script_files(skill: &str, script: &str, lang: Lang) -> Vec<NewFile> {
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
pub(crate) fn script_band(skill: &str, script: &str, lang: Lang) -> NewFile {
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
pub(crate) fn write_new(root: &Path, files: &[NewFile]) -> Result<()> {
    for f in files {
        let p = root.join(&f.rel);
        if p.exists() {
            bail!(user_error(
                format!("{} already exists; nothing was written", p.display()),
                "pick another name, or remove the file"
            ));
        }
    }
    for f in files {
        let p = root.join(&f.rel);
        if let Some(dir) = p.parent() {
            fs_err::create_dir_all(dir)?;
        }
        let mut file = fs_err::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&p)?;
        file.write_all(f.text.as_bytes())?;
        #[cfg(unix)]
        if f.executable {
            use std::os::unix::fs::PermissionsExt;
            fs_err::set_permissions(&p, std::fs::Permissions::from_mode(0o755))?;
        }
    }
    Ok(())
}

pub(crate) fn cmd_init(args: InitArgs) -> Result<u8> {
    let root = &args.path;
    let name = root.file_name().and_then(|n| n.to_str()).unwrap_or("");
    check_name("skill", name)?;
    check_name("script", &args.script)?;
    if root.exists() && fs_err::read_dir(root)?.next().is_some() {
        bail!(user_error(
            format!("{} exists and is not empty", root.display()),
            "pick a new folder; `band new-script` adds a script to an existing skill"
        ));
    }
    write_new(root, &skill_files(name, &args.script, args.lang))?;
    println!("Created skill `{name}` in {}.", root.display());
    println!("  band lint {}", root.display());
    println!(
        "  band run --skills {} {name}/{} --name=World",
        parent_or_dot(root).display(),
        args.script
    );
    Ok(exit::OK)
}

pub(crate) fn cmd_new_script(args: NewScriptArgs) -> Result<u8> {
    check_name("script", &args.name)?;
    let root = find_skill(&args.skill, &args.skills)?;
    let (skill, _) = band::skill::load_skill(&root);
    if skill.script(&args.name).is_some() {
        bail!(user_error(
            format!(
                "skill `{}` already has a script `{}`",
                skill.name, args.name
            ),
            "pick another name"
        ));
    }
    let mut files = script_files(&skill.name, &args.name, args.lang);
    let own_band = !governing_band_allows(&skill, &args.name, &args.lang.needed_argv(&args.name));
    if own_band {
        files.push(script_band(&skill.name, &args.name, args.lang));
    }
    write_new(&root, &files)?;
    for f in &files {
        println!("created {}", root.join(&f.rel).display());
    }
    if own_band {
        println!(
            "The skill's band does not allow `{}`, so scripts/{}.band.md governs this script alone.",
            args.lang.cli_rule(&args.name),
            args.name
        );
    }
    Ok(exit::OK)
}

/// Would the band that governs `script` (once it exists) allow `argv`? A missing or broken band
/// allows nothing.
fn governing_band_allows(skill: &band::skill::Skill, script: &str, argv: &[String]) -> bool {
    let Some(file) = skill.band_file_for(script) else {
        return false;
    };
    let Some(resolved) = band::skill::resolve_band_file(&file).0 else {
        return false;
    };
    CompiledPolicy::compile(&resolved.policy).is_ok_and(|p| p.cli.check(argv).is_allowed())
}

fn parent_or_dot(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lint_clean(root: &Path) {
        let report = band::lint::lint_paths(&[root.to_path_buf()]);
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
            let (skill, _) = band::skill::load_skill(&root);
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
        let (skill, _) = band::skill::load_skill(&root);
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
        let (skill, _) = band::skill::load_skill(&root);
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
        let err = check_name("skill", "My_Skill").unwrap_err();
        let user = err.downcast_ref::<crate::cli::error::UserError>().unwrap();
        assert!(user.hint.contains("`my-skill`"), "{}", user.hint);
        assert!(check_name("script", "a__b").is_err());
    }
}
