//! Programs shipped in a skill (issue 13, item 3): lint's S010/S011/S012 and the `./` pattern
//! errors, `band explain`'s list of the skill's programs.

use band_test::{SkillBuilder, band_snapshot};

use crate::common::output;

/// A skill `tools` with two scripts and files of every kind: `bin/tool` (named by a rule),
/// `bin/helper` (executable, not named), `bin/native` (an ELF header, not named), `lib/notes.sh`
/// (a `#!` line without the execute bit, not named), `lib/x.py` (a `#!` line, passed to
/// python3 by a rule), `lib/data.txt` (plain), and `scripts/native` (an ELF entry). `band` is
/// its band's frontmatter after `band: tools`.
fn skill(band: &str) -> tempfile::TempDir {
    let t = tempfile::tempdir().expect("tmp");
    let mut tools = SkillBuilder::new("tools").description("d").band(band);
    for s in ["go", "native"] {
        tools = tools
            .input_schema(s, r#"{"type": "object"}"#)
            .output_schema(s, r#"{"type": "object"}"#);
    }
    tools
        .script("go.sh", "#!/bin/sh\n/skill/bin/tool\n")
        .script("native", ELF)
        .file("bin/tool", 0o755, "#!/bin/sh\necho tool\n")
        .file("bin/helper", 0o755, "echo helper\n")
        .file("bin/native", 0o644, ELF)
        .file("lib/notes.sh", 0o644, "#!/bin/sh\n")
        .file("lib/x.py", 0o755, "#!/usr/bin/env python3\n")
        .file("lib/data.txt", 0o644, "data\n")
        .write(t.path());
    t
}

/// The start of an ELF file's header.
const ELF: &str = "\x7fELF\x02\x01\x01";

const BAND: &str = r#"description: d
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
        "description: d\nallow:\n  cli: [\"./bin/tool *\", \"jq *\"]\ndeny:\n  cli: [\"./bin/tool --bad *\"]\n",
    );
    band_snapshot!(
        output(&["explain", "--skills", ".", "tools/go"], t.path()),
        "bundled_explain"
    );
}
