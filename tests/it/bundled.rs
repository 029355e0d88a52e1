//! Programs shipped in a skill (issue 13, item 3): lint's S010/S011/S012 and the `./` pattern
//! errors, `band explain`'s list of the skill's programs.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use band_test::band_snapshot;

use crate::common::output;

fn write(root: &Path, rel: &str, data: &[u8], mode: u32) {
    let p = root.join(rel);
    fs_err::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    fs_err::write(&p, data).expect("write");
    fs_err::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// A skill `tools` with two scripts and files of every kind: `bin/tool` (named by a rule),
/// `bin/helper` (executable, not named), `bin/native` (an ELF header, not named), `lib/notes.sh`
/// (a `#!` line without the execute bit, not named), `lib/x.py` (a `#!` line, passed to
/// python3 by a rule), `lib/data.txt` (plain), and `scripts/native` (an ELF entry).
fn skill(bands: &str) -> tempfile::TempDir {
    let t = tempfile::tempdir().expect("tmp");
    let root = t.path().join("tools");
    write(
        &root,
        "SKILL.md",
        b"---\nname: tools\ndescription: d\n---\n",
        0o644,
    );
    write(&root, "BAND.md", bands.as_bytes(), 0o644);
    for s in ["go", "native"] {
        write(
            &root,
            &format!("schemas/input/{s}.json"),
            br#"{"type": "object"}"#,
            0o644,
        );
        write(
            &root,
            &format!("schemas/output/{s}.json"),
            br#"{"type": "object"}"#,
            0o644,
        );
    }
    write(
        &root,
        "scripts/go.sh",
        b"#!/bin/sh\n/skill/bin/tool\n",
        0o755,
    );
    write(&root, "scripts/native", b"\x7fELF\x02\x01\x01", 0o755);
    write(&root, "bin/tool", b"#!/bin/sh\necho tool\n", 0o755);
    write(&root, "bin/helper", b"echo helper\n", 0o755);
    write(&root, "bin/native", b"\x7fELF\x02\x01\x01", 0o644);
    write(&root, "lib/notes.sh", b"#!/bin/sh\n", 0o644);
    write(&root, "lib/x.py", b"#!/usr/bin/env python3\n", 0o755);
    write(&root, "lib/data.txt", b"data\n", 0o644);
    t
}

const BAND: &str = r#"---
band: tools
description: d
allow:
  cli:
    - "./bin/tool *"
    - "./bin/gone --x"
    - "python3 /skill/lib/x.py *"
    - "./../outside *"
    - "/skill/bin/tool *"
    - "bin/tool *"
deny:
  cli: ["./bin/missing *"]
---
"#;

#[test]
fn lint_reports_the_skills_programs() {
    let t = skill(BAND);
    band_snapshot!(output(&["lint", "."], t.path()), "bundled_lint_human");
}

#[test]
fn lint_json_reports_the_skills_programs() {
    let t = skill(BAND);
    band_snapshot!(
        output(&["lint", "--format", "json", "."], t.path()),
        "bundled_lint_json"
    );
}

#[test]
fn explain_lists_the_skills_programs() {
    let t = skill(
        "---\nband: tools\ndescription: d\nallow:\n  cli: [\"./bin/tool *\", \"jq *\"]\ndeny:\n  cli: [\"./bin/tool --bad *\"]\n---\n",
    );
    band_snapshot!(
        output(&["explain", "--skills", ".", "tools/go"], t.path()),
        "bundled_explain"
    );
}
