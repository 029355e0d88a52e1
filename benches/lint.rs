//! `cargo bench --bench lint`: `band lint` over a generated tree of 200 skills × 10 scripts,
//! against baselines measured in the same run on the same files. (Under `cargo test` it is a
//! smoke run of 3 skills: the generated tree must still lint clean.)
//!
//! Rows (each timed over `BAND_BENCH_ITERS` runs after one warm-up, default 15):
//! - `cat`: one `cat` process reading every file of the tree (the cost of touching the bytes);
//! - `read + parse`: in process, read every file, parse every frontmatter as YAML and every
//!   schema as JSON (the floor for any linter that looks at every file);
//! - `lint (library)`: `band::lint::lint_paths` on the tree;
//! - `lint (binary)`: the built `band lint --format json` on the tree, output discarded.
//!
//! The tree is realistic: every skill has a BAND.md with rules in all four categories, limits,
//! secrets and a config block (checked against a config schema), a SKILL.md, ten executable
//! scripts, two per-script bands that extend the skill's band, input and output schemas that
//! `$ref` shared definitions. It lints clean (the bench checks), so the time is the time of the
//! checks, not of error rendering. `BAND_BENCH_SKILLS` changes the number of skills;
//! `BAND_BENCH_TREE=DIR` writes the tree to DIR and keeps it, to profile `band lint DIR`.

// A benchmark harness: a broken fixture or a failed measurement is a panic, as in tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{env_usize, measure, ms, ratio};

const SCRIPTS_PER_SKILL: usize = 10;
/// The target from the foundation issue: the whole tree in under a second on 2 cores.
const TARGET: Duration = Duration::from_secs(1);

fn main() {
    common::without_cargo_library_path();
    let full = common::bench_mode();
    let skills = env_usize("BAND_BENCH_SKILLS", if full { 200 } else { 3 });
    let iters = env_usize("BAND_BENCH_ITERS", if full { 15 } else { 2 }).max(2);
    let dir = tempfile::Builder::new()
        .prefix("band-bench-lint")
        .tempdir()
        .expect("temp dir");
    // BAND_BENCH_TREE=DIR: generate the tree there and keep it (to profile `band lint DIR`).
    let root = std::env::var_os("BAND_BENCH_TREE")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.path().join("skills"));
    let files = generate(&root, skills);
    let bytes: u64 = files
        .iter()
        .map(|f| fs_err::metadata(f).map(|m| m.len()).unwrap_or(0))
        .sum();

    // The tree must lint clean, or the bench would time error paths instead of checks.
    let report = band::lint::lint_paths(std::slice::from_ref(&root));
    assert_eq!(
        report.skills, skills,
        "the generator made {skills} skills, lint found {}",
        report.skills
    );
    if !report.diagnostics.is_empty() {
        for d in report.diagnostics.iter().take(10) {
            eprintln!("{d}");
        }
        panic!(
            "the generated tree has {} diagnostics; fix the generator",
            report.diagnostics.len()
        );
    }

    let band_bin = PathBuf::from(env!("CARGO_BIN_EXE_band"));
    if !full {
        println!("(a smoke run under cargo test: the figures mean nothing; use cargo bench)");
    }
    println!(
        "band lint bench: {skills} skills × {SCRIPTS_PER_SKILL} scripts, {} files, {} KiB, {} band files; {iters} iterations per row",
        files.len(),
        bytes / 1024,
        report.band_files,
    );

    let mut rows: Vec<(&str, common::Stats)> = Vec::new();
    rows.push(("cat (every file)", measure(iters, || cat_all(&files))));
    rows.push((
        "read + parse (YAML, JSON)",
        measure(iters, || read_and_parse(&files)),
    ));
    rows.push((
        "band lint (library)",
        measure(iters, || {
            let r = band::lint::lint_paths(std::slice::from_ref(&root));
            assert!(r.diagnostics.is_empty());
        }),
    ));
    rows.push((
        "band lint (binary)",
        measure(iters, || lint_binary(&band_bin, &root)),
    ));
    // Issue 13, item 9: a hostile band file is refused by the pre-scan in linear time (it took
    // 18.6 s to parse before).
    let hostile = dir.path().join("hostile");
    write(
        &hostile.join("x.band.md"),
        &format!(
            "---\nband: x\ndescription: d\nx: {}\n---\n",
            "[".repeat(200_000)
        ),
    );
    rows.push((
        "band lint (library), one 200 KB band file of nested `[`",
        measure(iters, || {
            let r = band::lint::lint_paths(std::slice::from_ref(&hostile));
            assert!(r.diagnostics.iter().any(|d| d.code.as_str() == "F013"));
        }),
    ));

    let cat = rows[0].1.p50;
    let parse = rows[1].1.p50;
    println!();
    println!("| row | p50 | p95 | p50 / cat | p50 / read+parse | CPU per run |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (name, s) in &rows {
        println!(
            "| {name} | {} | {} | {:.1}× | {:.1}× | {} |",
            ms(s.p50),
            ms(s.p95),
            ratio(s.p50, cat),
            ratio(s.p50, parse),
            s.cpu_text()
        );
    }
    let whole = rows[3].1.p95;
    println!();
    println!(
        "target: the whole tree under {} s with the binary (p95): {} ({})",
        TARGET.as_secs(),
        if whole < TARGET { "met" } else { "MISSED" },
        ms(whole)
    );
    println!("machine: {}", common::machine());
}

fn cat_all(files: &[PathBuf]) {
    let status = Command::new("cat")
        .args(files)
        .stdout(Stdio::null())
        .status()
        .expect("cat");
    assert!(status.success());
}

fn read_and_parse(files: &[PathBuf]) {
    for f in files {
        let text = fs_err::read_to_string(f).expect("read");
        match f.extension().and_then(|e| e.to_str()) {
            Some("json") => {
                let _: serde_json::Value = serde_json::from_str(&text).expect("json");
            }
            Some("md") => {
                let yaml = text.split("---\n").nth(1).unwrap_or("");
                let _: yaml_serde::Value = yaml_serde::from_str(yaml).expect("yaml");
            }
            _ => {}
        }
    }
}

fn lint_binary(band: &Path, root: &Path) {
    let out = Command::new(band)
        .arg("lint")
        .arg("--format")
        .arg("json")
        .arg(root)
        .stderr(Stdio::inherit())
        .output()
        .expect("band lint");
    assert!(
        out.status.success(),
        "band lint failed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

// ---------------------------------------------------------------------------------------------
// The generated tree
// ---------------------------------------------------------------------------------------------

fn write(path: &Path, text: &str) -> PathBuf {
    fs_err::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs_err::write(path, text).expect("write");
    path.to_path_buf()
}

fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    fs_err::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// Write `skills` skills under `root`; returns every file written.
fn generate(root: &Path, skills: usize) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for i in 0..skills {
        let name = format!("skill-{i:03}");
        let dir = root.join(&name);
        files.push(write(&dir.join("BAND.md"), &band_md(&name, i)));
        files.push(write(&dir.join("SKILL.md"), &skill_md(&name)));
        files.push(write(&dir.join("schemas/defs/common.json"), COMMON_DEFS));
        files.push(write(
            &dir.join("schemas/band-config.schema.json"),
            CONFIG_SCHEMA,
        ));
        for j in 0..SCRIPTS_PER_SKILL {
            let script = format!("op-{j}");
            let entry = write(
                &dir.join("scripts").join(format!("{script}.sh")),
                &script_sh(&script),
            );
            make_executable(&entry);
            files.push(entry);
            files.push(write(
                &dir.join("schemas/input").join(format!("{script}.json")),
                &input_schema(&script, j),
            ));
            files.push(write(
                &dir.join("schemas/output").join(format!("{script}.json")),
                &output_schema(j),
            ));
            if j == 3 || j == 7 {
                files.push(write(
                    &dir.join("scripts").join(format!("{script}.band.md")),
                    &script_band(&name, &script),
                ));
            }
        }
    }
    files
}

fn band_md(name: &str, i: usize) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        r#"---
band: {name}
description: Triage issues of repository number {i}, fetch their details and write a JSON report.
version: {v}
allow:
  cli:
    - jq *
    - "gh issue list *"
    - "gh issue view *"
    - curl -sSf *
    - grep *
    - sed -n *
    - python3 *
    - "git log --oneline *"
  net:
    - api.github.com
    - "*.githubusercontent.com"
    - "api.example.com:443"
  read:
    - "data/**"
    - "src/**/*.rs"
    - "docs/*.md"
  write:
    - "out/"
    - "reports/*.json"
deny:
  cli:
    - "git push *"
    - "curl -X DELETE *"
  read:
    - "**/.env*"
    - "**/*.pem"
insist:
  write:
    - "out/"
env:
  secrets: [GITHUB_TOKEN, EXAMPLE_API_KEY]
requires:
  secrets: [GITHUB_TOKEN]
limit:
  maxRuntimeMs: 30s
  maxMemoryBytes: 256m
  maxPids: 64
  maxOutputBytes: 1m
  maxDiskBytes: 64m
  maxCpus: 1.5
execution:
  target: host
{name}:
  retries: 3
  endpoint: https://api.example.com/v1
  labels: [triage, generated]
---

# {name}

This skill reads the issues of one repository, fetches their details from the GitHub API and
writes a triage report to `out/`. It never pushes and never deletes anything remotely.

- `op-0` … `op-9`: one step each of the triage pipeline.
- Reports land in `reports/` as JSON.
"#,
        v = i % 5 + 1,
    );
    s
}

fn skill_md(name: &str) -> String {
    format!(
        "---\nname: {name}\ndescription: Triage the issues of a repository and write a JSON report. Use it when asked to sort or summarise open issues.\n---\n\n# {name}\n\nRun `band run {name}/op-0 --repo=owner/name` first, then the other steps in order.\nEach step reads the previous step's report from `out/`.\n"
    )
}

fn script_sh(script: &str) -> String {
    format!(
        r#"#!/bin/sh
# {script}: one step of the triage pipeline.
set -eu
repo=$(jq -r '.repo' "$INPUT_PATH")
limit=$(jq -r '.limit // 20' "$INPUT_PATH")
mkdir -p out
gh issue list --repo "$repo" --limit "$limit" --json number,title,labels > out/{script}-issues.json
count=$(jq 'length' out/{script}-issues.json)
for n in $(jq -r '.[].number' out/{script}-issues.json); do
  gh issue view "$n" --repo "$repo" --json body,comments > "out/{script}-$n.json"
done
jq -n --argjson count "$count" --arg repo "$repo" \
  '{{"repo": $repo, "count": $count, "step": "{script}"}}' > "$OUTPUT_PATH"
"#
    )
}

fn script_band(skill: &str, script: &str) -> String {
    format!(
        r#"---
band: {skill}-{script}
description: The {script} step of {skill} needs only jq and the GitHub API.
extends: [../BAND.md]
allow:
  cli: ["jq *", "gh issue list *"]
  net: [api.github.com]
  write: ["out/"]
env:
  secrets: [GITHUB_TOKEN]
requires:
  secrets: [GITHUB_TOKEN]
limit:
  maxRuntimeMs: 10s
---
"#
    )
}

fn input_schema(script: &str, j: usize) -> String {
    format!(
        r#"{{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "description": "Input of {script}: which repository and how many issues.",
  "type": "object",
  "properties": {{
    "repo": {{ "$ref": "../defs/common.json#/$defs/repo" }},
    "limit": {{ "type": "integer", "minimum": 1, "maximum": {max}, "description": "How many issues" }},
    "labels": {{ "type": "array", "items": {{ "$ref": "../defs/common.json#/$defs/label" }} }},
    "dry_run": {{ "type": "boolean", "default": false }}
  }},
  "required": ["repo"],
  "additionalProperties": false
}}
"#,
        max = 100 + j
    )
}

fn output_schema(j: usize) -> String {
    format!(
        r#"{{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {{
    "repo": {{ "$ref": "../defs/common.json#/$defs/repo" }},
    "count": {{ "type": "integer", "minimum": 0 }},
    "step": {{ "type": "string", "const": "op-{j}" }},
    "issues": {{ "type": "array", "items": {{ "$ref": "../defs/common.json#/$defs/issue" }} }}
  }},
  "required": ["repo", "count", "step"],
  "additionalProperties": false
}}
"#
    )
}

const COMMON_DEFS: &str = r##"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "$id": "common.json",
  "$defs": {
    "repo": { "type": "string", "pattern": "^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$", "description": "owner/name" },
    "label": { "type": "string", "minLength": 1, "maxLength": 50 },
    "issue": {
      "type": "object",
      "properties": {
        "number": { "type": "integer", "minimum": 1 },
        "title": { "type": "string" },
        "labels": { "type": "array", "items": { "$ref": "#/$defs/label" } },
        "priority": { "enum": ["low", "medium", "high"] }
      },
      "required": ["number", "title"]
    }
  }
}
"##;

const CONFIG_SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "retries": { "type": "integer", "minimum": 0, "maximum": 10 },
    "endpoint": { "type": "string", "format": "uri" },
    "labels": { "type": "array", "items": { "type": "string" } }
  },
  "required": ["endpoint"],
  "additionalProperties": false
}
"#;
