//! The corpus in `tests/corpus/`: upstream Bands skills and packaged bands, and Anthropic Agent
//! Skills, reconstructed in their own layouts and run unchanged (see `tests/corpus/README.md` and
//! `docs/upstream.md`).
//!
//! - Absolute paths: what upstream's packaged bands say (`/tmp/**`) lints clean and runs, and
//!   means the run's own /tmp; what the sandbox can never honour is a lint error and a refused
//!   run, with the same words.

use std::path::PathBuf;

use band_test::band_snapshot;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::common::{Run, band, bin, output, repo, sandbox_missing};

fn corpus() -> PathBuf {
    repo().join("tests/corpus")
}

/// `band run --json --target host <target> <args>` from the corpus folder.
fn run_corpus(target: &str, args: &[&str]) -> (i32, serde_json::Value, String) {
    let mut full = vec!["run", "--json", "--target", "host", target];
    full.extend(args);
    let (code, out, err) = band(&full, &corpus());
    (code, serde_json::from_str(&out).unwrap_or_default(), err)
}

#[test]
fn absolute_paths_lint_as_they_run() {
    let t = tempfile::tempdir().unwrap();
    fs_err::write(
        t.path().join("paths.band.md"),
        "---\nband: paths\ndescription: d\nallow:\n  read:\n    - \"/tmp/**\"\n    - \"/usr/share/dict/**\"\n    - \"/usr/local/lib/**\"\n    - \"/root/.config/**\"\n    - \"/etc/**\"\n    - \"/srv/data/**\"\n  write:\n    - \"/tmp/**\"\n    - \"/usr/local/**\"\n    - \"/workspace/out/**\"\ndeny:\n  read:\n    - \"/srv/data/secret/**\"\n---\n",
    )
    .unwrap();
    band_snapshot!(
        output(&["lint", "."], t.path()),
        "corpus_absolute_paths_lint"
    );
}

/// `/tmp/**` (all four of upstream's packaged bands) is the run's own /tmp: the script writes
/// and reads /tmp/x, and a host file under /tmp it did not create is not there.
#[test]
fn privileged_corpus_tmp_is_the_runs_own() {
    band_test::privileged!(sandbox_missing());
    let host = tempfile::Builder::new()
        .prefix("band-corpus-")
        .tempdir_in("/tmp")
        .unwrap();
    let secret = host.path().join("secret");
    fs_err::write(&secret, "host secret\n").unwrap();
    let secret = secret.to_string_lossy().into_owned();
    let (code, json, err) = run_corpus(
        "probes/tmp-probe/probe",
        &[&format!("--host_file={secret}")],
    );
    assert_eq!(code, 0, "{err}\n{json}");
    assert_eq!(
        json["output"],
        json!({"read_back": "written inside", "host_file_visible": false, "host_content": "", "home": "/tmp"})
    );
}

/// A rule lint calls refused is refused by the run, with the same words (band exec: no skill).
#[test]
fn privileged_corpus_refused_paths_refuse_the_run() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().unwrap();
    for (rule, words, name) in [
        (
            "read: [\"/root/.config/**\"]",
            "/root is never exposed to a run",
            "lint_refused_read_root",
        ),
        (
            "write: [\"/usr/local/**\"]",
            "/usr is read-only in the sandbox",
            "lint_refused_write_usr",
        ),
    ] {
        let file = t.path().join("x.band.md");
        fs_err::write(
            &file,
            format!("---\nband: x\ndescription: d\nallow:\n  cli: [\"cat *\"]\n  {rule}\n---\n"),
        )
        .unwrap();
        // Lint says `words`; the run's refusal says them too.
        band_snapshot!(output(&["lint", "x.band.md"], t.path()), name);
        let (code, out, err) = band(
            &[
                "exec",
                "--json",
                "--target",
                "host",
                "--band",
                "x.band.md",
                "--",
                "cat",
                "/dev/null",
            ],
            t.path(),
        );
        let json: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
        assert_eq!(json["status"], "setup_failed", "{out}\n{err}");
        assert!(
            json["error"]["message"]
                .as_str()
                .unwrap_or("")
                .contains(words),
            "{out}"
        );
        assert_ne!(code, 0);
    }
}

/// Upstream's packaged bands that list alternatives (`python *` and `python3 *`; `node`, `bun`,
/// `deno`; `wget`) run where only some are installed: the absent ones are absent with a warning,
/// the present one runs, and a command none of them allows is still refused.
#[test]
fn privileged_corpus_packaged_bands_with_absent_alternatives_run() {
    band_test::privileged!(sandbox_missing());
    let exec = |band_name: &str, cmd: &[&str]| {
        let file = corpus().join("bands").join(band_name).join("BAND.md");
        let file = file.to_string_lossy().into_owned();
        let mut argv = vec!["exec", "--json", "--target", "host", "--band", &file, "--"];
        argv.extend_from_slice(cmd);
        let t = tempfile::tempdir().unwrap();
        let (code, out, err) = band(&argv, t.path());
        let json: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
        (code, json, err)
    };
    for band_name in ["code-runner", "data-analyst"] {
        let (code, json, err) = exec(band_name, &["python3", "-c", "print(6*7)"]);
        assert_eq!(code, 0, "{band_name}: {err}\n{json}");
        assert_eq!(json["stdout"], "42\n", "{band_name}: {json}");
        let missing = json["missing_commands"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            missing.iter().any(|m| m["name"] == "python"),
            "{band_name}: {json}"
        );
        assert_eq!(json["stderr"], "", "{band_name}: {json}");
        // The absent alternative is not found inside.
        let (code, json, _) = exec(
            band_name,
            &[
                "python3",
                "-c",
                "import shutil; print(shutil.which('python'))",
            ],
        );
        assert_eq!(json["stdout"], "None\n", "{band_name}: {code} {json}");
    }
    let (code, json, _) = exec("web-reader", &["python3", "-c", "print(1)"]);
    assert_eq!(json["status"], "denied", "{code} {json}");
}

/// The stand-ins (`tests/corpus/standins`), copied with their execute bit into a folder of the
/// test's own, which `run_with_standins` binds over /usr/local/bin (the first folder
/// band-server looks in) in a private mount namespace: never over the system's binaries.
fn standins() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    for name in ["gh", "curl", "claude"] {
        let to = dir.path().join(name);
        fs_err::copy(corpus().join("standins").join(name), &to).unwrap();
        fs_err::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    fs_err::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // The runs with allow.net resolve through a DNS stub that asks only a dead loopback port.
    fs_err::write(
        dir.path().join("server.toml"),
        "dns_upstream = [\"127.0.0.1:9\"]\n",
    )
    .unwrap();
    dir
}

/// `band run --json --target host <target> <args>` from the corpus folder, with the stand-ins
/// as the host's `gh`, `curl` and `claude`, and fake secrets.
fn run_with_standins(dir: &std::path::Path, target: &str, args: &[&str]) -> Run {
    let mut cmd = std::process::Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "--", "sh", "-c"])
        .arg("mount --bind \"$1\" /usr/local/bin && shift && exec \"$@\"")
        .arg("sh")
        .arg(dir)
        .arg(crate::common::band_exe())
        .args(["run", "--json", "--target", "host", target])
        .args(args)
        .current_dir(corpus());
    bin()
        .env("BAND_SERVER_CONFIG", dir.join("server.toml"))
        .env("GITHUB_TOKEN", "ghp_recorded-token")
        .env("SLACK_BOT_TOKEN", "xoxb-recorded-token")
        .env("ELEVENLABS_API_KEY", "el-recorded-key")
        .env("ANTHROPIC_API_KEY", "sk-ant-recorded-key")
        .apply(&mut cmd);
    let out = cmd.output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        json: serde_json::from_slice(&out.stdout).unwrap_or_default(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Every script of the corpus, run unchanged on the host target: (target, arguments, exit
/// code, the output it must give). A stand-in answers only after the forbidden actions it
/// tries from inside the sandbox (run an undeclared program, write /skill, read the host's
/// /root or /home) have all failed; otherwise the run fails and so does this test.
const CASES: &[(&str, &[&str], i32, &str)] = &[
    (
        "upstream/example-banded/echo-input",
        &["--message=hi"],
        0,
        r#"{"echo": "hi"}"#,
    ),
    (
        "upstream/github/issue-list",
        &["--repo=o/r", "--limit=2"],
        0,
        r#"[{"number":7,"title":"Recorded issue","state":"OPEN","author":{"login":"octocat"},"labels":[],"url":"https://github.com/o/r/issues/7","createdAt":"2026-01-02T03:04:05Z"},{"number":3,"title":"Older issue","state":"OPEN","author":{"login":"hubot"},"labels":[{"name":"bug"}],"url":"https://github.com/o/r/issues/3","createdAt":"2025-12-01T00:00:00Z"}]"#,
    ),
    (
        "upstream/github/pr-view",
        &["--repo=o/r", "--number=42"],
        0,
        r#"{"number":42,"title":"Recorded pull request","state":"OPEN","author":{"login":"octocat"},"body":"Adds things.","url":"https://github.com/o/r/pull/42","mergeable":"MERGEABLE","headRefName":"feature","baseRefName":"main"}"#,
    ),
    (
        "upstream/github/label-create",
        &["--repo=o/r", "--name=triage"],
        0,
        r#"{"created": true, "name": "triage", "color": "ededed"}"#,
    ),
    (
        "upstream/slack/message-send",
        &["--channel=#bands-test", "--text=hello"],
        0,
        r#"{"ok":true,"channel":"C0BANDSTEST","ts":"1700000000.000100","message":{"text":"hello","ts":"1700000000.000100"}}"#,
    ),
    // The band's config allows #bands-test only: the skill's own check refuses #general.
    (
        "upstream/slack/message-send",
        &["--channel=#general", "--text=hello"],
        1,
        r#"{"error": "Permission denied: channel #general is not in the allow list"}"#,
    ),
    // The mp3 goes to the run's private /tmp; `stat` is not declared, so the size reads 0.
    (
        "upstream/elevenlabs/tts",
        &["--voice_id=v1", "--text=hello"],
        0,
        r#"{"success": true, "output_path": "/tmp/tts-output.mp3", "size_bytes": 0}"#,
    ),
    // No input schema: takes no input.
    (
        "upstream/elevenlabs/user-info",
        &[],
        0,
        r#"{"user_id":"u-recorded","tier":"free","character_count":42,"character_limit":10000}"#,
    ),
    (
        "upstream/summarize/summarize",
        &["--document=First line here\nsecond line"],
        0,
        r#"{"summary": "Recorded summary: First line here\n"}"#,
    ),
    (
        "upstream/config-skill/echo-config",
        &["--name=x"],
        0,
        r#"{"config": {"greeting": "hello", "max_items": 3}, "name": "x"}"#,
    ),
    (
        "upstream/config-skill/no-wrapper",
        &[],
        0,
        r#"{"ran": true}"#,
    ),
    (
        "probes/tmp-probe/probe",
        &["--host_file=/tmp/band-corpus-nothing-here"],
        0,
        r#"{"read_back": "written inside", "host_file_visible": false, "host_content": "", "home": "/tmp"}"#,
    ),
];

#[test]
fn privileged_corpus_runs_unchanged_with_recorded_standins() {
    band_test::privileged!(sandbox_missing());
    let dir = standins();
    for (target, args, code, want) in CASES {
        let r = run_with_standins(dir.path(), target, args);
        let want: serde_json::Value = serde_json::from_str(want).unwrap();
        assert_eq!(
            (r.code, &r.json["output"]),
            (*code, &want),
            "{target}: {}\n{}",
            r.stderr,
            r.json
        );
        assert!(!r.stderr.contains("forbidden:"), "{target}: {}", r.stderr);
    }
    // A script that takes no input refuses one.
    let r = run_with_standins(dir.path(), "upstream/config-skill/no-wrapper", &["--x=1"]);
    assert_eq!((r.code, &r.json["status"]), (3, &json!("input_invalid")));
    // The upstream wrappers are not scripts, and nothing here runs them.
    let (skill, _) = band::skill::load_skill(&corpus().join("upstream/github"));
    let names: Vec<&str> = skill.scripts.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["issue-list", "label-create", "pr-view"]);
}

/// Lint and run agree over the whole corpus: every script lint finds is in [`CASES`] (which
/// all start) when its skill lints without errors, and is refused before it starts when its
/// skill has errors (the Agent Skills: no band until `band wrap`).
#[test]
fn privileged_corpus_lint_and_run_agree() {
    band_test::privileged!(sandbox_missing());
    let dir = standins();
    for root in band::skill::find_skills(&corpus()) {
        let (diags, _) = band::lint::lint_skill(&root);
        let errors: Vec<String> = diags
            .iter()
            .filter(|d| d.is_error())
            .map(|d| d.to_string())
            .collect();
        let (skill, _) = band::skill::load_skill(&root);
        for script in &skill.scripts {
            let rel = root.strip_prefix(corpus()).unwrap().display().to_string();
            let target = format!("{rel}/{}", script.name);
            let case = CASES.iter().find(|c| c.0 == target);
            let r = run_with_standins(dir.path(), &target, case.map_or(&[][..], |c| c.1));
            let started = r.json["status"] != "setup_failed" && r.code != 2;
            assert_eq!(
                started,
                errors.is_empty(),
                "{target}: lint errors {errors:?}, run: {} {}",
                r.json,
                r.stderr
            );
            if errors.is_empty() {
                assert!(case.is_some(), "{target} lints clean: add it to CASES");
            }
        }
    }
}

/// `band help` reads co-located contracts, and says a script without one takes no arguments.
#[test]
fn help_reads_upstream_contracts() {
    band_snapshot!(
        output(&["help", "upstream/github/issue-list"], &corpus()),
        "help_upstream_contract"
    );
    band_snapshot!(
        output(&["help", "upstream/elevenlabs/user-info"], &corpus()),
        "help_upstream_no_contract"
    );
}

/// `band list` shows the resources' scripts, not upstream's wrappers twice or as scripts.
#[test]
fn list_shows_upstream_scripts_once() {
    band_snapshot!(
        output(&["list", "--skills", "upstream"], &corpus()),
        "corpus_list_upstream"
    );
}

/// Until `band wrap` writes them a band, Agent Skills run unchanged through `band exec` under a
/// band file of the user's (here: the narrowest for Python scripts reading the workspace): the
/// pdf and skill-creator scripts that need only the standard library and Debian's python3-yaml
/// give their output; a host path they are handed is not there.
#[test]
fn privileged_corpus_agent_skills_run_under_a_band_file() {
    band_test::privileged!(sandbox_missing());
    let ws = tempfile::tempdir().unwrap();
    for skill in ["pdf", "skill-creator"] {
        band_test::copy_dir(&corpus().join("agent").join(skill), &ws.path().join(skill));
    }
    fs_err::write(
        ws.path().join("fields.json"),
        r#"{"form_fields": [
            {"page_number": 1, "description": "Name", "label_bounding_box": [10, 10, 50, 20], "entry_bounding_box": [60, 10, 200, 30]},
            {"page_number": 1, "description": "Date", "label_bounding_box": [10, 40, 50, 50], "entry_bounding_box": [55, 25, 200, 55]}
        ]}"#,
    )
    .unwrap();
    let band_file = ws.path().join("agent.band.md");
    fs_err::write(
        &band_file,
        "---\nband: agent-python\ndescription: Agent Skill scripts on workspace files\nallow:\n  cli: [\"python3 *\"]\n  read: [\"pdf/**\", \"skill-creator/**\", \"fields.json\"]\n---\n",
    )
    .unwrap();
    let exec = |argv: &[&str]| {
        let mut args = vec![
            "exec",
            "--json",
            "--target",
            "host",
            "--band",
            "agent.band.md",
            "--",
        ];
        args.extend(argv);
        let (code, out, err) = band(&args, ws.path());
        let json: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
        (code, json, err)
    };
    let (code, json, err) = exec(&[
        "python3",
        "pdf/scripts/check_bounding_boxes.py",
        "fields.json",
    ]);
    assert_eq!(code, 0, "{json}\n{err}");
    assert_eq!(
        json["stdout"],
        "Read 2 fields\nFAILURE: entry of `Name` overlaps entry of `Date`\nFAILURE: fix the boxes\n"
    );
    let (code, json, err) = exec(&["python3", "skill-creator/scripts/quick_validate.py", "pdf"]);
    assert_eq!(
        (code, &json["stdout"]),
        (0, &json!("Skill is valid!\n")),
        "{json}\n{err}"
    );
    // The same skill by its host path: valid on the host, absent in the sandbox.
    let host_pdf = corpus().join("agent/pdf").display().to_string();
    let (code, json, _) = exec(&[
        "python3",
        "skill-creator/scripts/quick_validate.py",
        &host_pdf,
    ]);
    assert_eq!(
        (code, &json["stdout"]),
        (1, &json!("SKILL.md not found\n")),
        "{json}"
    );
}
