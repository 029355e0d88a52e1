//! Authoring: `band init` and `band new-script` scaffolds lint clean and run; `band run --trace`
//! shows what a run tried.

use std::path::Path;

use crate::common::{band, skip};
use pretty_assertions::assert_eq;

fn lint_clean(dir: &Path, what: &str) {
    let (code, out, err) = band(&["lint", "--deny-warnings", what], dir);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("no problems"), "{out}");
}

#[test]
fn init_and_new_script_scaffold_skills_that_lint_clean() {
    let t = tempfile::tempdir().expect("tmp");
    let (code, out, err) = band(&["init", "my-skill", "--script", "greet"], t.path());
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("band run --skills . my-skill/greet --name=World"),
        "{out}"
    );
    lint_clean(t.path(), "my-skill");

    // A Python script is not covered by the shell scaffold's band: it gets its own.
    let (code, out, err) = band(
        &[
            "new-script",
            "--skills",
            ".",
            "my-skill",
            "stats",
            "--lang",
            "python",
        ],
        t.path(),
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("scripts/stats.band.md governs this script alone"),
        "{out}"
    );
    assert!(t.path().join("my-skill/scripts/stats.band.md").is_file());
    // Another shell script is: no new band.
    let (code, out, err) = band(&["new-script", "my-skill", "again"], t.path());
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("governs"), "{out}");
    assert!(!t.path().join("my-skill/scripts/again.band.md").exists());
    lint_clean(t.path(), "my-skill");

    let (_, out, _) = band(&["list", "--skills", "."], t.path());
    assert!(
        out.starts_with(
            "my-skill: Says hello.\n  my-skill/again  my-skill/greet  my-skill/stats\n"
        ),
        "{out}"
    );
}

#[test]
fn init_and_new_script_refuse_bad_names_and_existing_files() {
    let t = tempfile::tempdir().expect("tmp");
    let (code, _, err) = band(&["init", "My_Skill"], t.path());
    assert_eq!(code, 2);
    assert!(
        err.contains("not kebab-case")
            && err.contains(
                "hint: use lowercase letters, digits and single hyphens, e.g. `my-skill`"
            ),
        "{err}"
    );
    assert!(!t.path().join("My_Skill").exists());

    assert_eq!(band(&["init", "s"], t.path()).0, 0);
    let before = fs_err::read_to_string(t.path().join("s/BAND.md")).expect("band");
    let (code, _, err) = band(&["init", "s", "--lang", "python"], t.path());
    assert_eq!(code, 2);
    assert!(err.contains("exists and is not empty"), "{err}");
    let (code, _, err) = band(&["new-script", "s", "hello"], t.path());
    assert_eq!(code, 2);
    assert!(err.contains("already has a script `hello`"), "{err}");
    assert_eq!(
        fs_err::read_to_string(t.path().join("s/BAND.md")).expect("band"),
        before
    );
}

#[test]
fn privileged_scaffolded_scripts_run_in_the_sandbox() {
    if skip("privileged_scaffolded_scripts_run_in_the_sandbox") {
        return;
    }
    let t = tempfile::tempdir().expect("tmp");
    assert_eq!(band(&["init", "demo", "--lang", "python"], t.path()).0, 0);
    assert_eq!(band(&["new-script", "demo", "shell"], t.path()).0, 0);
    for script in ["hello", "shell"] {
        let (code, out, err) = band(
            &[
                "run",
                "--json",
                "--skills",
                ".",
                &format!("demo/{script}"),
                "--name=World",
            ],
            t.path(),
        );
        assert_eq!(code, 0, "{script}: {err}");
        let v: serde_json::Value = serde_json::from_str(&out).expect("json");
        assert_eq!(
            v["output"],
            serde_json::json!({"greeting": "Hello, World!"}),
            "{script}"
        );
    }
    // The scaffold's input contract keeps `name` safe to print into JSON.
    let (code, _, _) = band(
        &["run", "--skills", ".", "demo/shell", "--name=a\"b"],
        t.path(),
    );
    assert_eq!(code, 3);
}

#[test]
fn privileged_trace_shows_commands_rules_writes_and_unused_rules() {
    if skip("privileged_trace_shows_commands_rules_writes_and_unused_rules") {
        return;
    }
    let t = tempfile::tempdir().expect("tmp");
    assert_eq!(band(&["init", "demo"], t.path()).0, 0);
    let root = t.path().join("demo");
    // A script that does one allowed thing, one refused thing, and writes inside and outside out/.
    fs_err::write(
        root.join("scripts/hello.sh"),
        "#!/bin/sh\njq -r .name \"$INPUT_PATH\" >/dev/null\njq . \"$INPUT_PATH\" || true\nmkdir -p out other\necho x > out/a.txt\necho y > other/b.txt\necho '{\"greeting\":\"hi\"}' > \"$OUTPUT_PATH\"\n",
    )
    .expect("write");
    let band_md = fs_err::read_to_string(root.join("BAND.md")).expect("read");
    let band_md = band_md.replace(
        "  cli: [\"jq -r .name /band/io/input.json\"]\n",
        "  cli: [\"jq -r .name /band/io/input.json\", \"wc *\"]\n  write: [out/]\n",
    );
    fs_err::write(root.join("BAND.md"), band_md).expect("write");
    let ws = t.path().join("ws");
    fs_err::create_dir(&ws).expect("mkdir");
    let (code, out, err) = band(
        &[
            "run",
            "--trace",
            "--skills",
            ".",
            "--workspace",
            "ws",
            "demo/hello",
            "--name=x",
        ],
        t.path(),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "{\n  \"greeting\": \"hi\"\n}\n");
    let trace: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("trace:") || l.starts_with("  ") || l.starts_with("hint:"))
        .collect();
    assert_eq!(
        trace,
        [
            "trace: 3 commands",
            "  allowed  jq -r .name /band/io/input.json  allow.cli \"jq -r .name /band/io/input.json\"",
            "  denied   jq . /band/io/input.json         no allow.cli rule matches",
            "  allowed  mkdir -p out other               essential command (not declared, not pattern-checked)",
            "trace: 1 file written back",
            "  allowed  out/a.txt",
            "trace: allow.cli rules no call used (candidates to remove): \"wc *\"",
            "hint: to allow `jq . /band/io/input.json`, add to allow.cli: 'jq . /band/io/input.json' (or a pattern with globs)",
        ]
    );
    assert!(ws.join("out/a.txt").is_file());
    assert!(!ws.join("other").exists());
}
