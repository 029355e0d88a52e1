//! Hostile input files (issue 13, item 9): band files and SKILL.md built to make the YAML parser
//! slow. Each is refused by the pre-scan with a located F013 error before the YAML parser runs.
//! (200 KB of nested `[` took 18.6 s to parse before the pre-scan; how long a parse takes is for
//! the benchmarks, these tests check the error and where it points.)

use std::path::Path;

use band_test::band_snapshot;
use pretty_assertions::assert_eq;

use crate::common::{band, output};
use serde_json::Value;

/// `band lint --format json .` in `dir`: the exit code and the diagnostics.
fn lint(dir: &Path) -> (i32, Vec<Value>) {
    let (code, out, err) = band(&["lint", "--format", "json", "."], dir);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out} {err}"));
    (
        code,
        v["diagnostics"].as_array().cloned().unwrap_or_default(),
    )
}

/// A loose band file with `yaml` as its frontmatter, linted: (code, line, column, message) of
/// its diagnostics.
fn lint_band(yaml: &str) -> (i32, Vec<(String, u64, u64, String)>) {
    let t = tempfile::tempdir().expect("tmp");
    fs_err::write(t.path().join("x.band.md"), format!("---\n{yaml}\n---\n")).expect("write");
    let (code, diags) = lint(t.path());
    let diags = diags
        .iter()
        .map(|d| {
            (
                d["code"].as_str().unwrap_or("").to_string(),
                d["line"].as_u64().unwrap_or(0),
                d["column"].as_u64().unwrap_or(0),
                d["message"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    (code, diags)
}

fn f013(line: u64, column: u64, message: &str) -> (String, u64, u64, String) {
    ("F013".into(), line, column, message.into())
}

#[test]
fn nested_brackets_200_kb() {
    let yaml = format!(
        "band: x\ndescription: d\nallow:\n  cli: {}",
        "[".repeat(200_000)
    );
    let (code, diags) = lint_band(&yaml);
    assert_eq!(code, 1);
    assert_eq!(
        diags,
        vec![f013(
            5,
            8 + 64,
            "flow collections (`[` and `{`) nest deeper than 64 levels"
        )]
    );
}

#[test]
fn nested_braces() {
    let yaml = format!("band: x\ndescription: d\nx: {}", "{a: ".repeat(50_000));
    let (code, diags) = lint_band(&yaml);
    assert_eq!(code, 1);
    assert_eq!(
        diags,
        vec![f013(
            4,
            4 + 64 * 4,
            "flow collections (`[` and `{`) nest deeper than 64 levels"
        )]
    );
}

#[test]
fn brackets_closed_inside_strings_still_count() {
    // `"]"` closes nothing for the YAML parser; the bracket count bounds its depth anyway.
    let yaml = format!(
        "band: x\ndescription: d\nx: {}",
        r#"[ "]", "#.repeat(20_000)
    );
    let (code, diags) = lint_band(&yaml);
    assert_eq!(code, 1);
    assert_eq!(
        diags,
        vec![f013(
            4,
            4 + 256 * 7,
            "the frontmatter has more than 256 `[` and `{`"
        )]
    );
}

#[test]
fn a_hash_in_a_string_hides_nothing() {
    // ` #` inside a quoted string is no comment: the brackets after it still count.
    let yaml = format!(
        "band: x\ndescription: d\nx: [\"a #\", {}",
        "[".repeat(200_000)
    );
    let (code, diags) = lint_band(&yaml);
    assert_eq!(code, 1);
    assert_eq!(
        diags,
        vec![f013(
            4,
            11 + 64,
            "flow collections (`[` and `{`) nest deeper than 64 levels"
        )]
    );
}

#[test]
fn deep_block_indentation() {
    let mut yaml = String::from("band: x\ndescription: d\n");
    for n in 0..400 {
        yaml.push_str(&format!("{}k{n}:\n", " ".repeat(n)));
    }
    let (code, diags) = lint_band(&yaml);
    assert_eq!(code, 1);
    assert_eq!(
        diags,
        vec![f013(
            4 + 64,
            65,
            "block indentation nests deeper than 64 levels"
        )]
    );
    let compact = format!("band: x\ndescription: d\nx:\n{}y\n", "- ".repeat(100_000));
    let (_, diags) = lint_band(&compact);
    assert_eq!(
        diags,
        vec![f013(
            5,
            2 * 64 + 1,
            "block indentation nests deeper than 64 levels"
        )]
    );
}

#[test]
fn billion_laughs() {
    let mut yaml = String::from("band: x\ndescription: d\na: &a [\"lol\"]\n");
    let mut prev = 'a';
    for c in 'b'..='j' {
        let refs = vec![format!("*{prev}"); 9].join(", ");
        yaml.push_str(&format!("{c}: &{c} [{refs}]\n"));
        prev = c;
    }
    let (code, diags) = lint_band(&yaml);
    assert_eq!(code, 1);
    // The 65th alias: the 2nd of line `i` (7 full lines of 9 before it).
    let col = "i: &i [*h, ".len() as u64 + 1;
    assert_eq!(
        diags,
        vec![f013(
            4 + 8,
            col,
            "the frontmatter has more than 64 aliases (`*name`)"
        )]
    );
}

#[test]
fn oversized_frontmatter() {
    let yaml = format!("band: x\ndescription: \"{}\"", "x".repeat(300 * 1024));
    let t = tempfile::tempdir().expect("tmp");
    // Through the parser, not the file size check: a BAND.md below the file limit is parsed
    // whole; a SKILL.md has no file limit, only the frontmatter's.
    let skill = t.path().join("big");
    fs_err::create_dir_all(skill.join("scripts")).expect("mkdir");
    fs_err::write(
        skill.join("SKILL.md"),
        format!("---\nname: big\n{yaml}\n---\n"),
    )
    .expect("write");
    let (code, diags) = lint(t.path());
    assert_eq!(code, 1);
    let f013: Vec<_> = diags.iter().filter(|d| d["code"] == "F013").collect();
    assert_eq!(f013.len(), 1, "{diags:?}");
    assert_eq!(f013[0]["line"], 2);
    assert_eq!(f013[0]["column"], 1);
    assert!(
        f013[0]["path"]
            .as_str()
            .unwrap_or("")
            .ends_with("big/SKILL.md"),
        "{f013:?}"
    );
}

#[test]
fn nested_brackets_in_skill_md() {
    let t = tempfile::tempdir().expect("tmp");
    let skill = t.path().join("deep");
    fs_err::create_dir_all(skill.join("scripts")).expect("mkdir");
    fs_err::write(
        skill.join("SKILL.md"),
        format!(
            "---\nname: deep\ndescription: {}\n---\n",
            "[".repeat(200_000)
        ),
    )
    .expect("write");
    let (code, diags) = lint(t.path());
    assert_eq!(code, 1);
    let got: Vec<_> = diags
        .iter()
        .filter(|d| d["code"] == "F013")
        .map(|d| (d["line"].clone(), d["column"].clone(), d["hint"].clone()))
        .collect();
    assert_eq!(
        got,
        vec![(
            Value::from(3),
            Value::from(14 + 64),
            Value::from(
                "flatten the frontmatter: rules are flat lists of strings (see docs/band-format.md, limits)"
            )
        )]
    );
}

#[test]
fn real_bands_are_within_the_limits() {
    // No problem at all, so no F013.
    band_snapshot!(
        output(&["lint", "skills"], crate::common::repo()),
        "real_bands_lint_clean"
    );
}

/// Issue 13, item 10, through the real gate: band-shim asks band-server about every `rm` the
/// script runs; `deny: rm -rf *` refuses each spelling of it with exit 126, `rm x` runs. (Before
/// the option models, `rm -Rf` and `rm --recursive --force` passed.)
#[test]
fn privileged_deny_cli_catches_every_spelling_of_rm_rf() {
    band_test::privileged!(crate::common::sandbox_missing());
    let t = tempfile::tempdir().expect("tmp");
    fs_err::write(
        t.path().join("rm.band.md"),
        "---\nband: rm-probe\ndescription: d\nallow:\n  cli: [\"sh *\", \"rm *\"]\ndeny:\n  cli: [\"rm -rf *\"]\n---\n",
    )
    .expect("write");
    let probe = r#"cd /tmp || exit 9
for flags in "-Rf" "--recursive --force" "-r -f" "-f -r" "-fR" "--force -R" "--rec --for"; do
  mkdir -p d && touch d/f
  rm $flags d
  echo "rm $flags: $? $(test -e d/f && echo kept || echo gone)"
done
touch y
rm y
echo "rm y: $? $(test -e y && echo kept || echo gone)"
"#;
    let (code, out, err) = band(
        &[
            "exec",
            "--json",
            "--band",
            "rm.band.md",
            "--",
            "sh",
            "-c",
            probe,
        ],
        t.path(),
    );
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out} {err}"));
    assert_eq!(
        v["stdout"].as_str().unwrap_or(""),
        "rm -Rf: 126 kept\n\
         rm --recursive --force: 126 kept\n\
         rm -r -f: 126 kept\n\
         rm -f -r: 126 kept\n\
         rm -fR: 126 kept\n\
         rm --force -R: 126 kept\n\
         rm --rec --for: 126 kept\n\
         rm y: 0 gone\n",
        "{v}"
    );
    let denied: Vec<_> = v["denied"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|d| (d["argv"].clone(), d["rule"].clone()))
        .collect();
    assert_eq!(denied.len(), 7, "{v}");
    assert!(
        denied.iter().all(|(_, rule)| rule == "rm -rf *"),
        "{denied:?}"
    );
    // The script handled the refusals itself (each `rm` exited 126) and ended well; the run
    // records every denied call.
    assert_eq!((code, v["status"].as_str()), (0, Some("ok")), "{v}");
    assert_eq!(
        denied[1].0,
        serde_json::json!(["rm", "--recursive", "--force", "d"])
    );
}
