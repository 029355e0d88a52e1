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
