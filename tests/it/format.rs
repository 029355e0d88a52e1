//! The band format, strict and editable: unknown keys are errors in lint and at run, `band fmt`
//! keeps comments and layout, `band explain --band`, the JSON Schema, SARIF help links, and shell
//! builtins in `cli` rules.

use std::path::Path;

use band_test::band_snapshot;

use crate::common::{band, output, repo};

/// A skill `typo` whose BAND.md misspells a key at every level band reads.
fn misspelt_skill() -> tempfile::TempDir {
    let t = tempfile::tempdir().expect("tmp");
    let root = t.path().join("typo");
    fs_err::create_dir_all(root.join("scripts")).expect("mkdir");
    fs_err::create_dir_all(root.join("schemas/input")).expect("mkdir");
    fs_err::write(
        root.join("SKILL.md"),
        "---\nname: typo\ndescription: A skill with typos\n---\n",
    )
    .expect("write");
    write_band(
        &root,
        "---\nband: typo\ndescription: Typos at every level\nallow:\n  cli: [\"cat *\"]\n  reed: [data/]\ndney:\n  cli: [\"rm *\"]\ndeny: {wrte: [\"**/.env\"]}\nenv:\n  secret: [TOKEN]\nrequires:\n  network: {egres: [a.test]}\nlimit:\n  maxRuntime: 5s\nexecution:\n  targte: host\n---\n",
    );
    fs_err::write(root.join("scripts/go.sh"), "#!/bin/sh\necho '{}'\n").expect("write");
    fs_err::set_permissions(
        root.join("scripts/go.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    fs_err::write(root.join("schemas/input/go.json"), "{\"type\":\"object\"}").expect("write");
    t
}

fn write_band(root: &Path, text: &str) {
    fs_err::write(root.join("BAND.md"), text).expect("write");
}

#[test]
fn lint_refuses_every_misspelt_key() {
    let t = misspelt_skill();
    band_snapshot!(output(&["lint", "."], t.path()), "strict_keys_lint");
}

#[test]
fn run_refuses_a_misspelt_key_with_the_same_diagnostic() {
    let t = misspelt_skill();
    let out = output(&["run", "typo/go", "--skills", "."], t.path());
    assert_eq!(out.code, 2);
    band_snapshot!(out, "strict_keys_run");
}

/// Every band file the project ships: the skills' band files, the README's example and the
/// `band init` scaffold, as (name, text).
fn shipped_bands() -> Vec<(String, String)> {
    let mut files = Vec::new();
    band::manifest::format::collect(&repo().join("skills"), &mut files);
    assert!(files.len() >= 12, "{files:?}");
    let mut out: Vec<(String, String)> = files
        .iter()
        .map(|f| {
            let name = f.strip_prefix(repo()).unwrap_or(f).display().to_string();
            (name, fs_err::read_to_string(f).expect("read"))
        })
        .collect();
    let readme = fs_err::read_to_string(repo().join("README.md")).expect("readme");
    let example = readme
        .split("```yaml\n---\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("README has a ```yaml band example");
    out.push(("README.md example".into(), format!("---\n{example}")));
    let t = tempfile::tempdir().expect("tmp");
    let (code, _, err) = band(&["init", "demo"], t.path());
    assert_eq!(code, 0, "{err}");
    let scaffold = fs_err::read_to_string(t.path().join("demo/BAND.md")).expect("scaffold");
    out.push(("band init scaffold".into(), scaffold));
    out
}

/// A band written the way people write them: comments everywhere, mixed styles, keys out of
/// order, a duplicate rule.
const COMMENTED: &str = "---\n# yaml-language-server: $schema=../schemas/band.schema.json\ndescription: >\n  Fetch issues. # not a comment: inside a folded scalar\nband: commented   # the name\n\n# What may run.\nallow:\n  # hosts first, by mistake\n  net:\n    - api.github.com   # the API\n    - 'api.github.com'\n  cli: [\"gh issue list *\", \"jq *\"]  # two tools\n\nlimit: {maxRuntimeMs: 30s}   # short\ndeny:\n  read: [\"**/.env*\"]\n# trailing comment\n---\nThe body stays.\n";

#[test]
fn every_shipped_band_is_formatted() {
    for (name, text) in shipped_bands() {
        let formatted =
            band::manifest::format::format_band(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(formatted, text, "{name} is not formatted");
    }
}

#[test]
fn fmt_twice_is_fmt_once() {
    let mut cases = shipped_bands();
    cases.push(("commented".into(), COMMENTED.into()));
    for (name, text) in cases {
        let once = band::manifest::format::format_band(&text).expect("formats");
        let twice = band::manifest::format::format_band(&once).expect("formats");
        assert_eq!(once, twice, "{name}: fmt is not idempotent");
    }
}

#[test]
fn fmt_keeps_comments_and_layout() {
    let t = tempfile::tempdir().expect("tmp");
    let f = t.path().join("x.band.md");
    fs_err::write(&f, COMMENTED).expect("write");
    band_snapshot!(output(&["fmt", "--check", "."], t.path()), "fmt_check_diff");
    assert_eq!(
        fs_err::read_to_string(&f).expect("read"),
        COMMENTED,
        "--check writes nothing"
    );
    band_snapshot!(output(&["fmt", "."], t.path()), "fmt_write");
    insta::assert_snapshot!("fmt_commented", fs_err::read_to_string(&f).expect("read"));
    assert_eq!(band(&["fmt", "--check", "."], t.path()).0, 0);
}

#[test]
fn fmt_says_when_a_locked_skill_needs_band_lock() {
    let t = tempfile::tempdir().expect("tmp");
    let root = t.path().join("demo");
    let (code, _, err) = band(&["init", "demo"], t.path());
    assert_eq!(code, 0, "{err}");
    let text = fs_err::read_to_string(root.join("BAND.md")).expect("read");
    let swapped = text
        .replacen("band: demo\ndescription: ", "description: ", 1)
        .replacen("version: 1\n", "version: 1\nband: demo\n", 1);
    assert_ne!(swapped, text);
    fs_err::write(root.join("BAND.md"), &swapped).expect("write");
    // Locked as it is, unformatted.
    let (code, _, err) = band(&["lock", "demo"], t.path());
    assert_eq!(code, 0, "{err}");
    band_snapshot!(
        output(&["fmt", "--check", "demo"], t.path()),
        "fmt_check_locked"
    );
    assert_eq!(band(&["lock", "--check", "demo"], t.path()).0, 0);
    band_snapshot!(output(&["fmt", "demo"], t.path()), "fmt_write_locked");
    assert_eq!(
        fs_err::read_to_string(root.join("BAND.md")).expect("read"),
        text
    );
    assert_ne!(
        band(&["lock", "--check", "demo"], t.path()).0,
        0,
        "fmt broke the lock, as it said"
    );
    // Formatting a formatted skill says nothing about its lock.
    assert_eq!(band(&["lock", "demo"], t.path()).0, 0);
    let (code, out, _) = band(&["fmt", "demo"], t.path());
    assert_eq!((code, out.as_str()), (0, ""));
}

/// A standalone band file that references another, as agents pass to `band exec --band`.
fn standalone_bands() -> tempfile::TempDir {
    let t = tempfile::tempdir().expect("tmp");
    fs_err::create_dir_all(t.path().join("shared")).expect("mkdir");
    fs_err::write(
        t.path().join("shared/base.band.md"),
        "---\nband: base\ndescription: Shared rules\nallow:\n  cli: [\"jq *\", \"wc *\"]\n  net: [api.example.test:443]\n  read: [data/]\ndeny:\n  read: [\"**/.env*\"]\nenv:\n  secrets: [TOKEN]\nlimit:\n  maxRuntimeMs: 5s\nexecution:\n  target: host\n---\n",
    )
    .expect("write");
    fs_err::write(
        t.path().join("agent.band.md"),
        "---\npath: shared/base.band.md\n---\n",
    )
    .expect("write");
    fs_err::write(
        t.path().join("typo.band.md"),
        "---\nband: typo\ndescription: d\nallow: {cli: [\"jq *\"], nett: [a.test]}\n---\n",
    )
    .expect("write");
    t
}

#[test]
fn explain_band_shows_a_standalone_band_file() {
    let t = standalone_bands();
    band_snapshot!(
        output(&["explain", "--band", "agent.band.md"], t.path()),
        "explain_band_human"
    );
    band_snapshot!(
        output(&["explain", "--band", "agent.band.md", "--json"], t.path()),
        "explain_band_json"
    );
}

#[test]
fn explain_band_refuses_what_exec_refuses() {
    let t = standalone_bands();
    band_snapshot!(
        output(&["explain", "--band", "typo.band.md"], t.path()),
        "explain_band_errors"
    );
    band_snapshot!(
        output(&["explain", "--band", "shared"], t.path()),
        "explain_band_not_a_file"
    );
    let (code, _, _) = band(&["explain", "--band", "agent.band.md", "text"], t.path());
    assert_eq!(code, 2, "a skill and --band together are a usage error");
}
