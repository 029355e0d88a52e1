//! Authoring: `band init` and `band new-script` scaffolds lint clean and run; `band run --trace`
//! shows what a run tried.

use std::path::Path;

use band_test::band_snapshot;

use crate::common::{band, output, sandbox_missing};
use pretty_assertions::assert_eq;

/// `band lint --deny-warnings <what>` in `dir` passes; its output is the snapshot `name`.
fn lint_clean(dir: &Path, what: &str, name: &str) {
    band_snapshot!(output(&["lint", "--deny-warnings", what], dir), name);
}

#[test]
fn init_and_new_script_scaffold_skills_that_lint_clean() {
    let t = tempfile::tempdir().expect("tmp");
    band_snapshot!(
        output(&["init", "my-skill", "--script", "greet"], t.path()),
        "init"
    );
    lint_clean(t.path(), "my-skill", "lint_scaffold");

    // A Python script is not covered by the shell scaffold's band: it gets its own.
    band_snapshot!(
        output(
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
        ),
        "new_script_python"
    );
    assert!(t.path().join("my-skill/scripts/stats.band.md").is_file());
    // Another shell script is: no new band.
    band_snapshot!(
        output(&["new-script", "my-skill", "again"], t.path()),
        "new_script_shell"
    );
    assert!(!t.path().join("my-skill/scripts/again.band.md").exists());
    lint_clean(t.path(), "my-skill", "lint_scaffold_more");

    band_snapshot!(
        output(&["list", "--skills", "."], t.path()),
        "list_scaffold"
    );
}

#[test]
fn init_and_new_script_refuse_bad_names_and_existing_files() {
    let t = tempfile::tempdir().expect("tmp");
    band_snapshot!(output(&["init", "My_Skill"], t.path()), "init_bad_name");
    assert!(!t.path().join("My_Skill").exists());

    assert_eq!(band(&["init", "s"], t.path()).0, 0);
    let before = fs_err::read_to_string(t.path().join("s/BAND.md")).expect("band");
    band_snapshot!(
        output(&["init", "s", "--lang", "python"], t.path()),
        "init_existing"
    );
    band_snapshot!(
        output(&["new-script", "s", "hello"], t.path()),
        "new_script_existing"
    );
    assert_eq!(
        fs_err::read_to_string(t.path().join("s/BAND.md")).expect("band"),
        before
    );
}

#[test]
fn privileged_scaffolded_scripts_run_in_the_sandbox() {
    band_test::privileged!(sandbox_missing());
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

/// Every `band run …` command the new skill's BAND.md and SKILL.md suggest works as written
/// (before, BAND.md's `band run --trace demo/hello` failed: `name` is required).
#[test]
fn privileged_the_commands_a_new_skill_suggests_work() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tmp");
    assert_eq!(band(&["init", "demo"], t.path()).0, 0);
    let mut seen = 0;
    for file in ["BAND.md", "SKILL.md"] {
        let text = fs_err::read_to_string(t.path().join("demo").join(file)).expect("read");
        for command in text.split('`').filter(|c| c.starts_with("band run ")) {
            let mut args: Vec<&str> = command.split_whitespace().skip(1).collect();
            // The skill is in the current folder, not on the skills path.
            args.splice(1..1, ["--skills", "."]);
            let (code, _, err) = band(&args, t.path());
            assert_eq!(code, 0, "{file}: `{command}`: {err}");
            seen += 1;
        }
    }
    assert_eq!(seen, 2);
}

#[test]
fn privileged_trace_shows_commands_rules_writes_and_unused_rules() {
    band_test::privileged!(sandbox_missing());
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
    let trace = output(
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
    band_snapshot!(trace, "trace");
    assert!(ws.join("out/a.txt").is_file());
    assert!(!ws.join("other").exists());
}

/// A skill whose band allows only `cat *`, with a bash script that calls two host programs it
/// does not declare, probes for an optional tool with `command -v`, calls a name no host has,
/// and exits with the first refusal's code.
pub(crate) fn undeclared_skill(dir: &Path) {
    assert_eq!(band(&["init", "demo"], dir).0, 0);
    let root = dir.join("demo");
    fs_err::write(
        root.join("scripts/hello.sh"),
        "#!/bin/bash\n\
         uname -s; u=$?\n\
         id -u; i=$?\n\
         if command -v stat >/dev/null; then probe=found; else probe=absent; fi\n\
         no-such-tool-band-test; n=$?\n\
         cat /band/io/input.json >/dev/null; c=$?\n\
         echo \"codes: uname=$u id=$i cat=$c missing=$n probe=$probe\" >&2\n\
         echo '{\"greeting\":\"hi\"}' > \"$OUTPUT_PATH\"\n\
         exit $u\n",
    )
    .expect("write");
    let band_md = fs_err::read_to_string(root.join("BAND.md")).expect("read");
    let band_md = band_md.replace(
        "  cli: [\"jq -r .name /band/io/input.json\"]\n",
        "  cli: [\"cat *\"]\n",
    );
    fs_err::write(root.join("BAND.md"), band_md).expect("write");
}

/// An undeclared host command in a script is a CLI denial with the rule that would allow it, in
/// `--trace`, `--json` and the ledger; the program never starts (its output is absent), the
/// script sees "not available" (127), and `command -v` still says an undeclared tool is absent.
/// Before, these were a bare "command not found" with no denial anywhere.
#[test]
fn privileged_undeclared_host_commands_are_denials_with_the_rule() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tmp");
    undeclared_skill(t.path());
    let args = ["run", "--skills", ".", "demo/hello", "--name=x"];
    let mut traced = vec!["run", "--trace"];
    traced.extend_from_slice(&args[1..]);
    let trace = output(&traced, t.path());
    band_snapshot!(trace, "trace_undeclared");

    let mut json = vec!["run", "--json"];
    json.extend_from_slice(&args[1..]);
    let (code, stdout, stderr) = band(&json, t.path());
    assert_eq!(code, 5, "denied: {stdout}{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    // The script's own streams: uname and id never ran (no "Linux", no uid), each refusal is
    // 127 as for a name the sandbox lacks, and `command -v` finds no undeclared tool.
    let script_err = v["stderr"].as_str().unwrap_or("");
    assert!(
        script_err.contains("codes: uname=127 id=127 cat=0 missing=127 probe=absent"),
        "{v}"
    );
    assert_eq!(v["stdout"], serde_json::json!(""), "{v}");
    let expected = serde_json::json!([
        {"kind": "cli", "argv": ["uname", "-s"], "rule": null},
        {"kind": "cli", "argv": ["id", "-u"], "rule": null},
    ]);
    assert_eq!(v["denied"], expected, "{v}");

    let id = v["run_id"].as_str().expect("run_id");
    let (code, shown, err) = band(&["show", "--json", id], t.path());
    assert_eq!(code, 0, "{err}");
    let shown: serde_json::Value = serde_json::from_str(&shown).expect("json");
    assert_eq!(shown["denied"], expected, "{shown}");
}
