//! `band help <skill>/<script>` and `band <skill>/<script> --help` against the scripts' input
//! schemas, with an independent reading of their `$ref`s and `allOf`; `band help <command>`.

use std::path::{Path, PathBuf};

use band_test::band_snapshot;
use serde_json::Value;

use crate::common::{band, output, repo};
use pretty_assertions::assert_eq;

/// A schema document and the file it came from (for its relative `$ref`s).
#[derive(Clone)]
struct Doc {
    file: PathBuf,
    root: Value,
}

/// Follow `$ref` (a file relative to `doc`'s, a `$id` in `schemas/defs`, a `#/…` pointer) once.
fn follow(skill: &Path, doc: &Doc, reference: &str) -> (Doc, Value) {
    let (file, pointer) = reference.split_once('#').unwrap_or((reference, ""));
    let target = if file.is_empty() {
        doc.clone()
    } else {
        let by_path = doc.file.parent().unwrap().join(file);
        let path = if by_path.exists() {
            by_path
        } else {
            // By `$id`: the defs file whose `$id` is this name.
            fs_err::read_dir(skill.join("schemas/defs"))
                .unwrap()
                .map(|e| e.unwrap().path())
                .find(|p| {
                    let v: Value =
                        serde_json::from_str(&fs_err::read_to_string(p).unwrap()).unwrap();
                    v["$id"].as_str() == Some(file)
                })
                .unwrap_or_else(|| panic!("{reference} from {}: not found", doc.file.display()))
        };
        Doc {
            root: serde_json::from_str(&fs_err::read_to_string(&path).unwrap()).unwrap(),
            file: path,
        }
    };
    let node = if pointer.is_empty() {
        target.root.clone()
    } else {
        target.root.pointer(pointer).unwrap().clone()
    };
    (target, node)
}

/// `schema` with its `$ref`s followed (until there is none at the top).
fn resolved(skill: &Path, doc: &Doc, schema: &Value) -> (Doc, Value) {
    let (mut doc, mut schema) = (doc.clone(), schema.clone());
    while let Some(r) = schema
        .get("$ref")
        .and_then(Value::as_str)
        .map(str::to_string)
    {
        let (d, s) = follow(skill, &doc, &r);
        let mut merged = s;
        // Keywords beside the `$ref` (a description, say) stay.
        if let (Some(m), Some(o)) = (merged.as_object_mut(), schema.as_object()) {
            for (k, v) in o {
                if k != "$ref" {
                    m.insert(k.clone(), v.clone());
                }
            }
        }
        (doc, schema) = (d, merged);
    }
    (doc, schema)
}

/// Every property of an object schema (through `$ref` and `allOf`): `(name, type, required)`.
fn properties(skill: &Path, doc: &Doc, schema: &Value, out: &mut Vec<(String, String, bool)>) {
    // A `$ref` beside other keywords is one more `allOf` member (2020-12).
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let (d, target) = follow(skill, doc, r);
        properties(skill, &d, &target, out);
    }
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(props) = schema["properties"].as_object() {
        for (name, p) in props {
            let (_, p) = resolved(skill, doc, p);
            let ty = match &p["type"] {
                // An array shows its items' type, when they name one.
                Value::String(t) if t == "array" => {
                    let (_, items) = resolved(skill, doc, &p["items"]);
                    match items["type"].as_str() {
                        Some(inner) => format!("array<{inner}>"),
                        None => "array".into(),
                    }
                }
                Value::String(t) => t.clone(),
                Value::Array(ts) => ts
                    .iter()
                    .map(|t| t.as_str().unwrap().to_string())
                    .collect::<Vec<_>>()
                    .join("|"),
                _ => match p["enum"].as_array().and_then(|e| e.first()) {
                    Some(Value::String(_)) => "string".into(),
                    Some(Value::Number(_)) => "number".into(),
                    _ => "any".into(),
                },
            };
            out.push((name.clone(), ty, required.contains(&name.as_str())));
        }
    }
    for sub in schema["allOf"].as_array().into_iter().flatten() {
        properties(skill, doc, sub, out);
    }
    // A name `required` at this level whose property came from an `allOf` is required too.
    for entry in out.iter_mut() {
        if required.contains(&entry.0.as_str()) {
            entry.2 = true;
        }
    }
}

/// Every shipped script, as `(skill folder, script name)`.
fn shipped_scripts() -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for skill in fs_err::read_dir(repo().join("skills")).unwrap() {
        let skill = skill.unwrap().path();
        let Ok(scripts) = fs_err::read_dir(skill.join("scripts")) else {
            continue;
        };
        for f in scripts {
            let name = f.unwrap().file_name().into_string().unwrap();
            if name.ends_with(".band.md") {
                continue;
            }
            let stem = name.split('.').next().unwrap().to_string();
            if !out.contains(&(skill.clone(), stem.clone())) {
                out.push((skill.clone(), stem));
            }
        }
    }
    out.sort();
    out
}

/// The section (`Required`, `Optional`) each `--name <type>` line of a help page is under.
fn help_lines(page: &str) -> Vec<(String, String)> {
    let mut section = String::new();
    let mut out = Vec::new();
    for line in page.lines() {
        if let Some(title) = line.strip_suffix(':').filter(|t| !t.starts_with(' ')) {
            section = title.to_string();
        } else if let Some(arg) = line.strip_prefix("  --") {
            out.push((section.clone(), arg.to_string()));
        }
    }
    out
}

#[test]
fn help_of_every_shipped_script_shows_every_property_of_its_schema() {
    let scripts = shipped_scripts();
    assert!(scripts.len() >= 20, "{} scripts", scripts.len());
    for (skill, script) in scripts {
        let target = format!("{}/{script}", skill.file_name().unwrap().to_str().unwrap());
        let file = skill.join("schemas/input").join(format!("{script}.json"));
        let doc = Doc {
            root: serde_json::from_str(&fs_err::read_to_string(&file).unwrap()).unwrap(),
            file,
        };
        let mut props = Vec::new();
        properties(&skill, &doc, &doc.root.clone(), &mut props);
        let help = output(&["help", &target], repo());
        assert_eq!(help.code, 0, "{target}: {}", help.stderr);
        let page = help.stdout.clone();
        let (_, shortcut, _) = band(&[&target, "--help"], repo());
        assert_eq!(page, shortcut, "{target}: --help differs from band help");
        if props.is_empty() {
            // A script that takes no input says so (`Arguments: none`), and its example takes
            // no argument (`band <target>`).
            band_snapshot!(
                help,
                format!("help_no_arguments_{}", target.replace('/', "_"))
            );
            continue;
        }
        assert!(!page.contains("<any>"), "{target}:\n{page}");
        let lines = help_lines(&page);
        for (name, ty, required) in &props {
            let shown = format!("{name} <{ty}>");
            let Some((section, _)) = lines.iter().find(|(_, l)| *l == shown) else {
                panic!("{target}: no `--{shown}` line in\n{page}");
            };
            let want = if *required { "Required" } else { "Optional" };
            assert_eq!(section, want, "{target}: --{name}\n{page}");
        }
        assert_eq!(lines.len(), props.len(), "{target}:\n{page}");
        // The example gives every required argument.
        let example = page
            .split("Example:\n  ")
            .nth(1)
            .unwrap()
            .lines()
            .next()
            .unwrap();
        assert!(example.starts_with(&format!("band {target}")), "{example}");
        for (name, _, required) in &props {
            if *required {
                assert!(
                    example.contains(&format!("--{name}")),
                    "{target}: {example}"
                );
            }
        }
    }
}

#[test]
fn help_pages_in_full() {
    for (target, name) in [
        ("csv-stats/describe", "help_csv_describe"),
        ("github/issue-list", "help_github_issue_list"),
        ("json-transform/apply", "help_json_transform_apply"),
    ] {
        band_snapshot!(output(&["help", target], repo()), name);
    }
    band_snapshot!(
        output(&["help", "github/issue-list", "--json"], repo()),
        "help_github_issue_list_json"
    );
}

#[test]
fn help_of_a_command_is_its_help() {
    let via_help = output(&["help", "history"], repo());
    assert_eq!(via_help.code, 0, "{}", via_help.stderr);
    assert_eq!(
        via_help.stdout,
        output(&["history", "--help"], repo()).stdout
    );
    let sub = output(&["help", "vm", "status"], repo());
    assert_eq!(
        sub.stdout,
        output(&["vm", "status", "--help"], repo()).stdout
    );
    assert_eq!(
        output(&["help"], repo()).stdout,
        output(&["--help"], repo()).stdout
    );
    band_snapshot!(output(&["help", "histry"], repo()), "help_unknown_command");
}

/// An input property named like band's own flag (red-team round 5: a contract's `target` made
/// `band skill/script --target=ssh://…` look like the script's argument while band took it):
/// lint warns (C004; the shipped github skill had two such, `--color` and `--target`, and its
/// `--color=ff0000` was refused as band's colour), `band help` says to give it after `--` and its example does,
/// and a run given it after `--` passes it to the script.
#[test]
fn an_input_property_named_like_bands_flag_is_warned_and_goes_after_the_dashes() {
    let t = tempfile::tempdir().expect("tmp");
    band_test::SkillBuilder::new("shadow")
        .band("description: Echoes a label.\nversion: 1\n")
        .script("echo.sh", "#!/bin/sh\ncat \"$INPUT_PATH\"\n")
        .input_schema(
            "echo",
            r#"{"type":"object","properties":{"target":{"type":"string","description":"A label."},"n":{"type":"integer"}},"required":["target"],"additionalProperties":false}"#,
        )
        .write(&t.path().join("skills"));
    let (_, out, err) = band(&["lint", "skills/shadow"], t.path());
    assert!(
        format!("{out}{err}").contains("warning[C004]")
            && format!("{out}{err}").contains("input property `target` of script `echo`"),
        "{out}{err}"
    );
    let (code, out, err) = band(&["help", "--skills", "skills", "shadow/echo"], t.path());
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(
            "(band run takes --target for itself: give the script's after `--`, as `-- --target=…`)"
        ),
        "{out}"
    );
    assert!(
        out.contains("band shadow/echo -- --target=<target>"),
        "{out}"
    );
}
