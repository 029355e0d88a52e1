//! The skills in `skills/`.
//!
//! - Offline parts of the network skills, on the host: each script runs with a stand-in `gh` or
//!   `curl` that records its argv and prints a fixture. The argv must be allowed by the script's
//!   own band (so script and BAND.md cannot drift apart), and the shaped output must match the
//!   script's output contract.
//! - Every offline script through `band run` in the real sandbox (`privileged_*`: root and
//!   bubblewrap; skipped without them unless `BAND_TEST_MUST_RUN=1`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use band::contract::SchemaSet;
use band::policy::{CompiledPolicy, Decision};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{band_run, repo, sandbox_missing};

pub(crate) fn skill_root(skill: &str) -> PathBuf {
    repo().join("skills").join(skill)
}

pub(crate) fn fixture(rel: &str) -> PathBuf {
    repo().join("tests/fixtures").join(rel)
}

/// The effective policy of `skill/script`, compiled.
pub(crate) fn policy(skill: &str, script: &str) -> CompiledPolicy {
    let (s, _) = band::skill::load_skill(&skill_root(skill));
    let (resolved, diags) = band::skill::resolve_script(&s, script);
    let resolved = resolved.unwrap_or_else(|| panic!("{skill}/{script}: {diags:?}"));
    CompiledPolicy::compile(&resolved.policy).unwrap_or_else(|e| panic!("{skill}/{script}: {e:?}"))
}

pub(crate) fn scripts_of(skill: &str) -> BTreeSet<String> {
    band::skill::load_skill(&skill_root(skill))
        .0
        .scripts
        .into_iter()
        .map(|s| s.name)
        .collect()
}

/// Validate `value` against `schemas/<kind>/<script>.json` of `skill` (input is coerced first).
pub(crate) fn check_contract(skill: &str, kind: &str, script: &str, value: &Value) -> Value {
    let (set, errors) = SchemaSet::load_dir(&skill_root(skill));
    assert!(errors.is_empty(), "{skill}: {errors:?}");
    let contract = set
        .compile(&format!("schemas/{kind}/{script}.json"))
        .unwrap_or_else(|e| panic!("{skill}/{script}: {e}"));
    let checked = if kind == "input" {
        contract.coerce_and_validate(value.clone())
    } else {
        contract.validate(value).map(|()| value.clone())
    };
    checked.unwrap_or_else(|v| {
        panic!("{skill}/{script}: {kind} {value} does not match its contract: {v:?}")
    })
}

/// Every command a script runs on the host goes through this recorder: it appends its argv as one
/// JSON line to $STANDIN_LOG. `gh` and `curl` then write $STANDIN_FIXTURE (to the file after
/// `--output`, or to stdout); anything else runs the real `/usr/bin/<name>`.
const RECORDER: &str = r#"#!/usr/bin/python3
import json, os, sys
name = os.path.basename(sys.argv[0])
with open(os.environ["STANDIN_LOG"], "a") as f:
    f.write(json.dumps([name] + sys.argv[1:]) + "\n")
if name in ("gh", "curl"):
    data = open(os.environ["STANDIN_FIXTURE"], "rb").read()
    args = sys.argv[1:]
    out = args[args.index("--output") + 1] if "--output" in args else None
    if out:
        open(out, "wb").write(data)
    else:
        sys.stdout.buffer.write(data)
else:
    os.execv("/usr/bin/" + name, [name] + sys.argv[1:])
"#;

/// Commands recorded on the host (everything the skills' scripts call by name).
const RECORDED: &[&str] = &["gh", "curl", "jq", "python3"];

pub(crate) struct HostRun {
    pub(crate) output: Value,
    /// argv of every recorded call, in order, with host paths written as the sandbox's
    /// (`/tmp`, `/skill`, `/band/io/input.json`, `/workspace`), so they can be checked against
    /// the band.
    pub(crate) calls: Vec<Vec<String>>,
    dir: tempfile::TempDir,
}

impl HostRun {
    pub(crate) fn calls_to(&self, name: &str) -> Vec<&Vec<String>> {
        self.calls.iter().filter(|c| c[0] == name).collect()
    }

    /// Every recorded call must be allowed by the script's band.
    fn assert_allowed_by(&self, skill: &str, script: &str) {
        let p = policy(skill, script);
        for argv in &self.calls {
            let decision = p.cli.check(argv);
            assert!(
                decision.is_allowed(),
                "{skill}/{script}: its own band refuses {argv:?}: {decision:?}"
            );
        }
    }
}

/// Run a skill's script on the host (no sandbox), recording its commands, with stand-ins for
/// `gh` and `curl`.
pub(crate) fn run_on_host(skill: &str, entry: &str, input: &Value, fixture_file: &Path) -> HostRun {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tmp");
    let bin = dir.path().join("bin");
    let tmp = dir.path().join("tmp");
    let workspace = dir.path().join("workspace");
    for d in [&bin, &tmp, &workspace] {
        fs_err::create_dir(d).expect("mkdir");
    }
    for name in RECORDED {
        let p = bin.join(name);
        fs_err::write(&p, RECORDER).expect("write recorder");
        fs_err::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let input_path = dir.path().join("input.json");
    let output_path = dir.path().join("output.json");
    fs_err::write(&input_path, serde_json::to_vec(input).expect("json")).expect("write input");
    let log = dir.path().join("calls.jsonl");
    let out = Command::new(skill_root(skill).join(entry))
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("HOME", &tmp)
        .env("LANG", "C.UTF-8")
        .env("TMPDIR", &tmp)
        .env("INPUT_PATH", &input_path)
        .env("OUTPUT_PATH", &output_path)
        .env("SKILL_DIR", skill_root(skill))
        .env("WORKSPACE", &workspace)
        .env("GITHUB_TOKEN", "not-a-token")
        .env("STANDIN_LOG", &log)
        .env("STANDIN_FIXTURE", fixture_file)
        .current_dir(&workspace)
        .output()
        .expect("run script");
    assert!(
        out.status.success(),
        "{skill}/{entry}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = fs_err::read_to_string(&output_path)
        .unwrap_or_else(|e| panic!("{skill}/{entry} wrote no output: {e}"));
    let output = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{skill}/{entry}: output is not JSON ({e}): {text}"));
    let skill_dir = skill_root(skill);
    let as_in_sandbox = [
        (input_path.display().to_string(), "/band/io/input.json"),
        (tmp.display().to_string(), "/tmp"),
        (workspace.display().to_string(), "/workspace"),
        (skill_dir.display().to_string(), "/skill"),
    ];
    let calls = fs_err::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let argv: Vec<String> = serde_json::from_str(l).expect("argv line");
            argv.into_iter()
                .map(|a| {
                    as_in_sandbox
                        .iter()
                        .fold(a, |a, (host, sandbox)| a.replace(host.as_str(), sandbox))
                })
                .collect()
        })
        .collect();
    HostRun { output, calls, dir }
}

/// One input per github script; together they cover every script of the skill.
pub(crate) fn github_inputs() -> Vec<(&'static str, Value)> {
    vec![
        (
            "issue-list",
            json!({"repo": "octo/demo", "state": "open", "limit": 5, "search": "label:bug"}),
        ),
        ("issue-view", json!({"repo": "octo/demo", "number": 12})),
        (
            "issue-create",
            json!({"repo": "octo/demo", "title": "it's $(touch pwned) `touch pwned2`", "body": "line 1\nline 2 'quoted'"}),
        ),
        (
            "issue-comment",
            json!({"repo": "octo/demo", "number": 12, "body": "Thanks!"}),
        ),
        (
            "issue-close",
            json!({"repo": "octo/demo", "number": 12, "reason": "not_planned"}),
        ),
        ("pr-list", json!({"repo": "octo/demo", "state": "merged"})),
        ("pr-view", json!({"repo": "octo/demo", "number": 13})),
        ("pr-files", json!({"repo": "octo/demo", "number": 13})),
        ("release-list", json!({"repo": "octo/demo", "limit": 2})),
        ("release-latest", json!({"repo": "octo/demo"})),
        ("repo-view", json!({"repo": "octo/demo"})),
        ("search-issues", json!({"query": "--web crash", "limit": 3})),
        ("search-repos", json!({"query": "sandbox language:rust"})),
        (
            "issue-edit",
            json!({"repo": "octo/demo", "number": 12, "labels": ["bug", "p1"]}),
        ),
        ("issue-reopen", json!({"repo": "octo/demo", "number": 12})),
        (
            "pr-create",
            json!({"repo": "octo/demo", "title": "Add a parser", "head": "parser", "base": "main", "draft": true}),
        ),
        ("pr-diff", json!({"repo": "octo/demo", "number": 21})),
        ("pr-checks", json!({"repo": "octo/demo", "number": 21})),
        (
            "pr-review",
            json!({"repo": "octo/demo", "number": 21, "event": "APPROVE"}),
        ),
        (
            "pr-merge",
            json!({"repo": "octo/demo", "number": 21, "method": "squash"}),
        ),
        ("pr-close", json!({"repo": "octo/demo", "number": 21})),
        (
            "release-create",
            json!({"repo": "octo/demo", "tag": "v1.4.0", "notes": "Fixes.", "target_commitish": "main"}),
        ),
        (
            "release-view",
            json!({"repo": "octo/demo", "tag": "v1.4.0"}),
        ),
        (
            "release-delete",
            json!({"repo": "octo/demo", "tag": "v1.4.0"}),
        ),
        ("label-list", json!({"repo": "octo/demo"})),
        (
            "label-create",
            json!({"repo": "octo/demo", "name": "needs triage", "hex_color": "fbca04"}),
        ),
        (
            "label-delete",
            json!({"repo": "octo/demo", "name": "good first issue"}),
        ),
        ("gist-list", json!({"limit": 2})),
        ("gist-view", json!({"id": "aa5a315d61ae9438b18d"})),
        (
            "gist-create",
            json!({"description": "demo", "files": [{"name": "hello.py", "content": "print('hello, band')\n"}]}),
        ),
        ("gist-delete", json!({"id": "aa5a315d61ae9438b18d"})),
        ("run-list", json!({"repo": "octo/demo", "limit": 2})),
        ("run-view", json!({"repo": "octo/demo", "id": 7})),
        (
            "run-rerun",
            json!({"repo": "octo/demo", "id": 7, "failed_only": true}),
        ),
        (
            "api",
            json!({"path": "repos/octo/demo/contributors?per_page=1"}),
        ),
    ]
}

/// The recorded response of `skill/script`: `tests/fixtures/<skill>/<script>.<ext>`.
pub(crate) fn fixture_of(skill: &str, script: &str) -> PathBuf {
    let dir = fixture(skill);
    fs_err::read_dir(&dir)
        .expect("fixture dir")
        .map(|e| e.expect("entry").path())
        .find(|p| {
            p.file_stem().and_then(|s| s.to_str()) == Some(script)
                && p.extension().is_some_and(|e| e != "md")
        })
        .unwrap_or_else(|| panic!("no fixture for {skill}/{script} in {}", dir.display()))
}

#[test]
fn github_scripts_call_gh_only_in_their_bands_shapes_and_shape_fixtures_to_their_contracts() {
    let inputs = github_inputs();
    let covered: BTreeSet<String> = inputs.iter().map(|(s, _)| s.to_string()).collect();
    assert_eq!(
        covered,
        scripts_of("github"),
        "every github script needs an input here and a fixture"
    );
    for (script, input) in inputs {
        let input = check_contract("github", "input", script, &input);
        let run = run_on_host(
            "github",
            &format!("scripts/{script}.sh"),
            &input,
            &fixture_of("github", script),
        );
        // One gh call (release-delete: look the tag up, then delete); every other command is jq.
        let gh = if script == "release-delete" { 2 } else { 1 };
        assert_eq!(run.calls_to("gh").len(), gh, "{script}: {:?}", run.calls);
        assert_eq!(
            run.calls_to("jq").len(),
            run.calls.len() - gh,
            "{script}: read the input, call gh, shape: {:?}",
            run.calls
        );
        run.assert_allowed_by("github", script);
        check_contract("github", "output", script, &run.output);
        // Nothing in the input was executed by the shell.
        assert!(
            !run.dir.path().join("pwned").exists() && !run.dir.path().join("tmp/pwned").exists(),
            "{script}"
        );
    }
}

#[test]
fn github_values_reach_gh_verbatim_and_never_as_flags() {
    let (_, input) = github_inputs()
        .into_iter()
        .find(|(s, _)| *s == "issue-create")
        .expect("issue-create");
    let run = run_on_host(
        "github",
        "scripts/issue-create.sh",
        &input,
        &fixture("github/issue-create.json"),
    );
    assert_eq!(
        *run.calls_to("gh")[0],
        [
            "gh",
            "api",
            "--method=POST",
            "repos/octo/demo/issues",
            "--raw-field=title=it's $(touch pwned) `touch pwned2`",
            "--raw-field=body=line 1\nline 2 'quoted'"
        ]
    );
    assert_eq!(
        run.output,
        json!({"number": 14, "url": "https://github.com/octo/demo/issues/14", "title": "New issue", "state": "open"})
    );

    // A query that looks like a flag stays the positional argument after `--`.
    let run = run_on_host(
        "github",
        "scripts/search-issues.sh",
        &json!({"query": "--web crash", "limit": 3}),
        &fixture("github/search-issues.json"),
    );
    let gh = run.calls_to("gh")[0];
    assert_eq!(gh[gh.len() - 2..], ["--", "--web crash"]);
}

#[test]
fn github_read_scripts_cannot_write_and_write_scripts_cannot_read() {
    let create = [
        "gh",
        "api",
        "--method=POST",
        "repos/octo/demo/issues",
        "--raw-field=title=t",
        "--raw-field=body=",
    ]
    .map(String::from);
    let list = [
        "gh",
        "api",
        "--method=GET",
        "repos/octo/demo/releases/latest",
    ]
    .map(String::from);
    assert!(
        policy("github", "issue-create")
            .cli
            .check(&create)
            .is_allowed()
    );
    assert!(
        !policy("github", "issue-list")
            .cli
            .check(&create)
            .is_allowed()
    );
    assert!(
        policy("github", "release-latest")
            .cli
            .check(&list)
            .is_allowed()
    );
    assert!(
        !policy("github", "issue-create")
            .cli
            .check(&list)
            .is_allowed()
    );
    // `--field` reads `@file` values; only `--raw-field` is allowed.
    let field = [
        "gh",
        "api",
        "--method=POST",
        "repos/octo/demo/issues",
        "--field=title=@/etc/passwd",
        "--raw-field=body=",
    ]
    .map(String::from);
    assert_eq!(
        policy("github", "issue-create").cli.check(&field),
        Decision::Default
    );
}

#[test]
fn github_shapes_fixture_edge_cases() {
    let run = run_on_host(
        "github",
        "scripts/repo-view.sh",
        &json!({"repo": "octo/demo"}),
        &fixture("github/repo-view.json"),
    );
    assert_eq!(run.output["license"], Value::Null);
    assert_eq!(run.output["description"], "");
    assert_eq!(run.output["default_branch"], "main");
    let run = run_on_host(
        "github",
        "scripts/search-repos.sh",
        &json!({"query": "x"}),
        &fixture("github/search-repos.json"),
    );
    assert_eq!(run.output["repositories"][1]["language"], Value::Null);
    let run = run_on_host(
        "github",
        "scripts/release-list.sh",
        &json!({"repo": "octo/demo"}),
        &fixture("github/release-list.json"),
    );
    assert_eq!(
        run.output["releases"][1],
        json!({"tag": "v1.3.0-rc1", "name": "", "draft": true, "prerelease": true, "published_at": null, "url": "https://github.com/octo/demo/releases/tag/untagged-1"})
    );
}

#[test]
fn http_fetch_calls_curl_in_its_one_shape_and_extracts_the_page() {
    let input = check_contract(
        "http-fetch",
        "input",
        "fetch",
        &json!({"url": "https://docs.python.org/3/library/csv.html", "max_chars": 60}),
    );
    let run = run_on_host(
        "http-fetch",
        "scripts/fetch.sh",
        &input,
        &fixture("http-fetch/page.html"),
    );
    assert_eq!(run.calls_to("curl").len(), 1, "{:?}", run.calls);
    run.assert_allowed_by("http-fetch", "fetch");
    let out = check_contract("http-fetch", "output", "fetch", &run.output);
    assert_eq!(out["title"], "csv — CSV File Reading and Writing");
    assert_eq!(out["url"], "https://docs.python.org/3/library/csv.html");
    assert_eq!(
        out["text"],
        "Home\ncsv — CSV File Reading and Writing\nThe csv module imple"
    );
    assert_eq!(out["truncated"], true);
}

#[test]
fn http_fetch_url_contract_admits_exactly_the_bands_hosts() {
    let (s, _) = band::skill::load_skill(&skill_root("http-fetch"));
    let resolved = band::skill::resolve_script(&s, "fetch")
        .0
        .expect("fetch band");
    let hosts: Vec<String> = resolved
        .policy
        .allow
        .net
        .iter()
        .map(|h| h.trim_end_matches(":443").to_string())
        .collect();
    assert_eq!(hosts.len(), 4, "{hosts:?}");
    let (set, _) = SchemaSet::load_dir(&skill_root("http-fetch"));
    let contract = set
        .compile("schemas/input/fetch.json")
        .expect("fetch schema");
    for h in &hosts {
        assert!(
            contract
                .validate(&json!({"url": format!("https://{h}/some/page?q=1")}))
                .is_ok(),
            "{h}"
        );
        assert!(
            contract
                .validate(&json!({"url": format!("https://{h}")}))
                .is_ok(),
            "{h}"
        );
        assert!(
            contract
                .validate(&json!({"url": format!("http://{h}/")}))
                .is_err(),
            "plain http to {h}"
        );
        assert!(
            contract
                .validate(&json!({"url": format!("https://{h}.evil.example/")}))
                .is_err(),
            "{h} as a prefix"
        );
        assert!(
            contract
                .validate(&json!({"url": format!("https://evil.example/{h}")}))
                .is_err()
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Through `band run`, in the sandbox
// ---------------------------------------------------------------------------------------------

fn workspace_with_cities() -> tempfile::TempDir {
    let ws = tempfile::tempdir().expect("tmp");
    fs_err::create_dir(ws.path().join("data")).expect("mkdir");
    fs_err::copy(fixture("csv/cities.csv"), ws.path().join("data/cities.csv")).expect("copy");
    ws
}

#[test]
fn privileged_text_count_counts_exactly() {
    band_test::privileged!(sandbox_missing());
    let r = band_run(
        &[
            "text/count",
            "--input",
            r#"{"text": "say \"hi\"\nback\\slash é"}"#,
        ],
        None,
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json["status"], "ok");
    assert_eq!(
        r.json["output"],
        json!({"words": 4, "lines": 2, "chars": 21})
    );
}

#[test]
fn privileged_text_summary_keeps_the_best_sentences_in_order() {
    band_test::privileged!(sandbox_missing());
    let text = "The cat sat on the mat. Dogs bark at cats loudly! A cat is a small animal. Cats and dogs are pets.";
    let r = band_run(
        &["text/summary", &format!("--text={text}"), "--sentences=2"],
        None,
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = &r.json["output"];
    assert_eq!(
        out["summary"],
        "Dogs bark at cats loudly! Cats and dogs are pets."
    );
    assert_eq!(out["total_sentences"], 4);
    let indexes: Vec<i64> = out["sentences"]
        .as_array()
        .expect("array")
        .iter()
        .map(|s| s["index"].as_i64().unwrap_or(0))
        .collect();
    assert_eq!(indexes, [2, 4]);

    let r = band_run(&["text/summary", "--text=x", "--sentences=51"], None);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert_eq!(r.json["status"], "input_invalid");
    assert!(
        r.json["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("/sentences"),
        "{}",
        r.json
    );
}

#[test]
fn privileged_csv_stats_describe_reads_data_and_nothing_denied() {
    band_test::privileged!(sandbox_missing());
    let ws = workspace_with_cities();
    let r = band_run(
        &["csv-stats/describe", "--path=data/cities.csv"],
        Some(ws.path()),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = &r.json["output"];
    assert_eq!(out["rows"], 5);
    let pop = &out["columns"][1];
    assert_eq!(
        (
            pop["type"].clone(),
            pop["count"].clone(),
            pop["missing"].clone(),
            pop["min"].clone(),
            pop["max"].clone(),
            pop["mean"].clone(),
            pop["median"].clone()
        ),
        (
            json!("number"),
            json!(4),
            json!(1),
            json!(330000),
            json!(3645000),
            json!(1659750),
            json!(1332000)
        )
    );
    assert_eq!(
        out["columns"][2]["top"][0],
        json!({"value": "DE", "count": 3})
    );
    assert_eq!(r.json["written_files"], json!([]));

    // deny.read `**/*.key`: the file is never copied into the sandbox.
    fs_err::copy(fixture("csv/cities.csv"), ws.path().join("data/cities.key")).expect("copy");
    let r = band_run(
        &["csv-stats/describe", "--path=data/cities.key"],
        Some(ws.path()),
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(r.json["status"], "script_failed");
    assert!(
        r.json["stderr"]
            .as_str()
            .unwrap_or("")
            .contains("no such file"),
        "{}",
        r.json
    );

    // Outside data/: refused by the input contract before anything starts.
    let r = band_run(
        &["csv-stats/describe", "--path=../etc/passwd"],
        Some(ws.path()),
    );
    assert_eq!(r.code, 3, "{}", r.stderr);
}

#[test]
fn privileged_csv_stats_report_writes_back_only_to_out() {
    band_test::privileged!(sandbox_missing());
    let ws = workspace_with_cities();
    let r = band_run(
        &["csv-stats/report", "--path=data/cities.csv"],
        Some(ws.path()),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.json["output"],
        json!({"path": "data/cities.csv", "rows": 5, "report": "out/cities.md", "chart": "out/cities.svg", "chart_column": "population"})
    );
    assert_eq!(
        r.json["written_files"],
        json!(["out/cities.md", "out/cities.svg"])
    );
    let md = fs_err::read_to_string(ws.path().join("out/cities.md")).expect("report written back");
    assert!(
        md.contains("| population | number | 4 | 1 | 330000 | 3645000 | 1659750 | 1332000 |"),
        "{md}"
    );
    let svg = fs_err::read_to_string(ws.path().join("out/cities.svg")).expect("chart written back");
    assert!(
        svg.starts_with("<svg") && svg.matches("<rect").count() == 10,
        "{svg}"
    );
    assert_eq!(
        fs_err::read_to_string(ws.path().join("data/cities.csv")).ok(),
        fs_err::read_to_string(fixture("csv/cities.csv")).ok()
    );

    // A text-only column cannot be charted: the script fails, and nothing is written back.
    let ws = workspace_with_cities();
    let r = band_run(
        &[
            "csv-stats/report",
            "--path=data/cities.csv",
            "--chart_column=country",
        ],
        Some(ws.path()),
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(!ws.path().join("out").exists());
}

#[test]
fn privileged_json_transform_applies_filters_to_input_and_workspace_files() {
    band_test::privileged!(sandbox_missing());
    let r = band_run(
        &[
            "json-transform/apply",
            "--filter=map(.price) | add",
            r#"--data=[{"price": 2}, {"price": 3}]"#,
        ],
        None,
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json["output"], json!({"results": [5]}));

    let ws = tempfile::tempdir().expect("tmp");
    fs_err::create_dir_all(ws.path().join("data/sub")).expect("mkdir");
    fs_err::write(
        ws.path().join("data/sub/checks.json"),
        r#"[{"ok":true,"name":"a"},{"ok":false,"name":"b"},{"ok":true,"name":"c"}]"#,
    )
    .expect("write");
    let r = band_run(
        &[
            "json-transform/apply",
            "--filter=.[] | select(.ok) | .name",
            "--path=data/sub/checks.json",
        ],
        Some(ws.path()),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json["output"], json!({"results": ["a", "c"]}));

    let r = band_run(
        &["json-transform/apply", "--filter=-L/etc .", "--data=[]"],
        None,
    );
    assert_eq!(r.code, 3, "{}", r.stderr);
    let r = band_run(&["json-transform/apply", "--filter=.[", "--data=[]"], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.json["stderr"]
            .as_str()
            .unwrap_or("")
            .contains("syntax error"),
        "{}",
        r.json
    );
}

#[test]
fn privileged_http_fetch_extract_reads_html_from_the_input() {
    band_test::privileged!(sandbox_missing());
    let html = fs_err::read_to_string(fixture("http-fetch/page.html")).expect("fixture");
    let input = json!({"html": html}).to_string();
    let r = band_run(&["http-fetch/extract", "--input", &input], None);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.json["output"],
        json!({
            "title": "csv — CSV File Reading and Writing",
            "text": "Home\ncsv — CSV File Reading and Writing\nThe csv module implements classes to read and write tabular data in CSV format.\nreader\nwriter\na\nb & c",
            "chars": 141,
            "truncated": false,
        })
    );
}

#[test]
fn privileged_trace_lists_every_command_of_a_run() {
    band_test::privileged!(sandbox_missing());
    let r = band_run(
        &[
            "--trace",
            "json-transform/apply",
            "--filter=.a",
            r#"--data={"a": 1}"#,
        ],
        None,
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let calls: Vec<(Vec<String>, bool)> = r.json["cli_calls"]
        .as_array()
        .expect("cli_calls")
        .iter()
        .map(|c| {
            (
                serde_json::from_value(c["argv"].clone()).unwrap_or_default(),
                c["allowed"] == true,
            )
        })
        .collect();
    let expect = |argv: &[&str]| (argv.iter().map(|s| s.to_string()).collect::<Vec<_>>(), true);
    assert_eq!(
        calls,
        [
            expect(&["jq", "-r", ".filter", "/band/io/input.json"]),
            expect(&["jq", "-r", ".path//empty", "/band/io/input.json"]),
            expect(&["jq", "-c", ".data", "/band/io/input.json"]),
            expect(&["jq", "-c", ".a", "/tmp/data.json"]),
            expect(&["jq", "-s", "-c", "-f", "/skill/lib/wrap.jq", "/tmp/results"]),
        ]
    );
}

#[test]
fn github_needs_its_token_and_valid_input_before_anything_starts() {
    // Neither needs the sandbox: both are refused before band-server is started.
    band_test::band_snapshot!(
        crate::common::output(
            &["run", "--json", "github/repo-view", "--repo=octo/demo"],
            repo()
        ),
        "github_missing_token"
    );
    let r = band_run(&["github/repo-view", "--repo=octo/demo; rm -rf /"], None);
    assert_eq!(r.code, 3, "{}", r.stderr);
}
