//! CLI tests: `band lint` human/JSON/SARIF output and exit codes, `--help`, `explain`, `fmt`.

use band_test::band_snapshot;

use crate::common::{band, bin, output, repo, sandbox_missing};

fn broken_skill() -> tempfile::TempDir {
    let t = tempfile::tempdir().expect("tmp");
    let root = t.path().join("broken");
    fs_err::create_dir_all(root.join("scripts")).expect("mkdir");
    fs_err::write(
        root.join("SKILL.md"),
        "---\nname: broken\ndescription: A broken skill\n---\n",
    )
    .expect("write");
    fs_err::write(
        root.join("BAND.md"),
        "---\nband: broken\ndescription: d\nallow:\n  net: [\"https://api.github.com\"]\n  cli: [\"/usr/bin/curl *\"]\nlimits:\n  maxRuntimeMs: 5s\n---\n",
    )
    .expect("write");
    // No `#!` line, no extension band knows, no execute bit: nothing says what runs it (S003).
    fs_err::write(root.join("scripts/go"), "go\n").expect("write");
    t
}

#[test]
fn lint_passes_on_the_repository_skills() {
    band_snapshot!(output(&["lint", "skills"], repo()), "lint_repository");
}

#[test]
fn lint_human_output_is_located() {
    let t = broken_skill();
    let (code, out, _) = band(&["lint", "."], t.path());
    assert_eq!(code, 1);
    insta::assert_snapshot!("lint_human", out);
}

#[test]
fn lint_json_output() {
    let t = broken_skill();
    let (code, out, _) = band(&["lint", "--format", "json", "."], t.path());
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    insta::assert_json_snapshot!("lint_json", v);
}

#[test]
fn lint_sarif_output() {
    let t = broken_skill();
    let (code, out, _) = band(&["lint", "--format", "sarif", "."], t.path());
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["version"], "2.1.0");
    let results = v["runs"][0]["results"].as_array().expect("results");
    insta::assert_json_snapshot!("lint_sarif_results", results);
}

#[test]
fn deny_warnings_turns_warnings_into_failure() {
    let t = tempfile::tempdir().expect("tmp");
    fs_err::write(
        t.path().join("x.band.md"),
        "---\nband: x\ndescription: d\ncontract: {}\n---\n",
    )
    .expect("write");
    assert_eq!(band(&["lint", "."], t.path()).0, 0);
    assert_eq!(band(&["lint", "--deny-warnings", "."], t.path()).0, 1);
}

#[test]
fn lint_of_a_missing_path_is_an_error() {
    band_snapshot!(
        output(&["lint", "no/such/dir"], repo()),
        "lint_missing_path"
    );
}

#[test]
fn help_snapshots() {
    let (code, out, _) = band(&["--help"], repo());
    assert_eq!(code, 0);
    insta::assert_snapshot!("help", out);
    let (code, out, _) = band(&["lint", "--help"], repo());
    assert_eq!(code, 0);
    insta::assert_snapshot!("lint_help", out);
}

#[test]
fn explain_shows_the_effective_policy() {
    band_snapshot!(
        output(&["explain", "skills/text/count"], repo()),
        "explain_human"
    );
}

#[test]
fn explain_json_shows_the_effective_policy() {
    let (code, out, err) = band(&["explain", "--json", "skills/text/count"], repo());
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        v[0]["policy"]["allow"]["cli"],
        serde_json::json!(["jq -j .text /band/io/input.json", "wc *", "tr *"])
    );
    assert_eq!(
        v[0]["policy"]["limits"]["maxMemoryBytes"],
        serde_json::json!(64 << 20)
    );
}

#[test]
fn fmt_check_reports_and_fmt_fixes() {
    let t = tempfile::tempdir().expect("tmp");
    let f = t.path().join("BAND.md");
    fs_err::write(&f, "---\ndescription: d\nband: x\n---\nbody\n").expect("write");
    band_snapshot!(output(&["fmt", "--check", "."], t.path()), "fmt_check");
    assert_eq!(band(&["fmt", "."], t.path()).0, 0);
    assert_eq!(
        fs_err::read_to_string(&f).expect("read"),
        "---\nband: x\ndescription: d\n---\n\nbody\n"
    );
    assert_eq!(band(&["fmt", "--check", "."], t.path()).0, 0);
}

#[test]
fn run_refuses_a_broken_band_before_anything_starts() {
    let t = broken_skill();
    band_snapshot!(
        output(&["run", "broken/go", "--skills", "."], t.path()),
        "run_broken_band"
    );
}

#[test]
fn list_is_one_sentence_and_one_line_of_scripts_per_skill() {
    let list = output(&["list", "--skills", "skills"], repo());
    band_snapshot!(list, "list");
    let out = list.stdout;
    // Every skill fits in two lines plus the footer: short enough for an agent's context.
    let skills = out
        .lines()
        .filter(|l| !l.starts_with("  ") && !l.starts_with("Run:") && l.contains(": "))
        .count();
    assert_eq!(out.lines().count(), skills * 2 + 2, "{out}");
}

#[test]
fn a_mistyped_command_skill_script_or_argument_gets_the_nearest_name() {
    band_snapshot!(output(&["lnt"], repo()), "did_you_mean_command");
    band_snapshot!(output(&["txt/count"], repo()), "did_you_mean_skill");
    band_snapshot!(
        output(&["run", "txt/count"], repo()),
        "did_you_mean_skill_run"
    );
    band_snapshot!(output(&["run", "text/cont"], repo()), "did_you_mean_script");
    // Refused before the sandbox starts (input_invalid), so this needs no privileges.
    band_snapshot!(
        output(&["text/count", "--txt=one two"], repo()),
        "did_you_mean_argument"
    );
    // Nothing close: no guess, the hint as before.
    band_snapshot!(output(&["zzz"], repo()), "did_you_mean_nothing");
}

/// `band <args>` from the repository with `stdin` on its standard input.
fn output_with_stdin(args: &[&str], stdin: &str) -> band_test::Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = bin()
        .command(args, repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn band");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    let out = child.wait_with_output().expect("wait for band");
    band_test::Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn input_file_dash_reads_stdin() {
    // Refused before the sandbox starts, so these need no privileges.
    band_snapshot!(
        output_with_stdin(&["run", "text/count", "--input-file", "-"], "{bad"),
        "input_stdin_not_json"
    );
    band_snapshot!(
        output_with_stdin(&["text/count", "--input-file", "-"], r#"{"text": 5}"#),
        "input_stdin_invalid"
    );
}

#[test]
fn privileged_input_file_dash_runs_with_stdin() {
    band_test::privileged!(sandbox_missing());
    let out = output_with_stdin(
        &["text/count", "--input-file", "-"],
        r#"{"text": "one two three"}"#,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        "{\n  \"chars\": 13,\n  \"lines\": 1,\n  \"words\": 3\n}\n"
    );
}

/// A script told `-` (read standard input, `echo '<json>' | node validate.js -`) finds the run's
/// standard input empty, even with band's own fed: a failed run says so (a fifth wild trial:
/// "invalid JSON: Unexpected end of JSON input", and nothing else).
#[test]
fn privileged_a_script_given_dash_is_told_its_stdin_is_empty() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tempdir");
    let (skills, ws) = (t.path().join("skills"), t.path().join("ws"));
    fs_err::create_dir_all(&ws).expect("mkdir");
    band_test::SkillBuilder::new("schema")
        .band(
            "description: Validates a schema.\nversion: 1\nallow:\n  cli: [\"python3 /skill/scripts/check.py *\"]\n",
        )
        .script(
            "check.py",
            "import json, sys\nsrc = sys.stdin if sys.argv[1] == '-' else open(sys.argv[1])\n\
             json.load(src)\nprint('valid')\n",
        )
        .input_schema(
            "check",
            r#"{"type": "object", "properties": {"args": {"type": "array", "items": {"type": "string"}}}}"#,
        )
        .write(&skills);
    let (k, w) = (skills.to_str().expect("utf-8"), ws.to_str().expect("utf-8"));
    let args = [
        "run",
        "--skills",
        k,
        "--workspace",
        w,
        "schema/check",
        "--",
        "-",
    ];
    let hint = "hint: the script was given `-`, which by convention reads standard input, and a run's standard input is empty";
    let out = output_with_stdin(&args, r#"{"type": "object"}"#);
    assert_ne!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("JSONDecodeError"), "{out:?}");
    assert!(out.stderr.contains(hint), "{out:?}");
    // A file given instead: no hint.
    fs_err::write(ws.join("s.json"), "{}").expect("write");
    let mut args = args;
    args[7] = "s.json";
    let fine = output_with_stdin(&args, "");
    assert!(!fine.stderr.contains(hint), "{fine:?}");
    // Content piped to band for a script that is not given `-` (sixth wild trial: a runner that
    // takes its requests on stdin, an interactive script's answers): a failed run says how much
    // waited unread; an empty stdin says nothing.
    let piped = "hint: band's standard input held 18 bytes that the script never saw";
    args[7] = "missing.json";
    let failed = output_with_stdin(&args, r#"{"type": "object"}"#);
    assert_ne!(failed.code, 0, "{failed:?}");
    assert!(failed.stderr.contains(piped), "{failed:?}");
    assert!(!failed.stderr.contains(hint), "{failed:?}");
    let empty = output_with_stdin(&args, "");
    assert_ne!(empty.code, 0, "{empty:?}");
    assert!(!empty.stderr.contains("standard input"), "{empty:?}");
}

#[test]
fn a_document_and_key_value_arguments_together_are_a_usage_error() {
    band_snapshot!(
        output(
            &[
                "run",
                "text/count",
                "--input",
                r#"{"text": "a"}"#,
                "--text=b"
            ],
            repo()
        ),
        "input_and_arguments"
    );
    let t = tempfile::tempdir().expect("tmp");
    let file = t.path().join("in.json");
    fs_err::write(&file, r#"{"text": "a"}"#).expect("write");
    let file = file.to_str().expect("utf-8");
    band_snapshot!(
        output(&["text/count", "--input-file", file, "--text=b"], repo()),
        "input_file_and_arguments"
    );
}

#[test]
fn a_one_of_failure_names_the_branch_that_was_meant() {
    let t = tempfile::tempdir().expect("tmp");
    let root = t.path().join("shapes");
    fs_err::create_dir_all(root.join("scripts")).expect("mkdir");
    fs_err::create_dir_all(root.join("schemas/input")).expect("mkdir");
    fs_err::write(
        root.join("SKILL.md"),
        "---\nname: shapes\ndescription: Shapes\n---\n",
    )
    .expect("write");
    fs_err::write(
        root.join("BAND.md"),
        "---\nband: shapes\ndescription: d\n---\n",
    )
    .expect("write");
    fs_err::write(root.join("scripts/area.sh"), "#!/bin/sh\n").expect("write");
    fs_err::write(
        root.join("schemas/input/area.json"),
        r#"{
  "type": "object",
  "properties": { "kind": { "enum": ["circle", "rect"] } },
  "oneOf": [
    { "properties": { "kind": { "const": "circle" }, "r": { "type": "number" } }, "required": ["r"] },
    { "properties": { "kind": { "const": "rect" }, "w": { "type": "number" }, "h": { "type": "number" } }, "required": ["w", "h"] }
  ]
}"#,
    )
    .expect("write");
    band_snapshot!(
        output(
            &["shapes/area", "--skills", ".", "--kind=rect", "--w=2"],
            t.path()
        ),
        "one_of_branch"
    );
}
