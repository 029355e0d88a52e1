//! `band mcp` against real MCP clients, each as an agent integrator would use it:
//!
//! - the official Python SDK's stdio client (`tests/mcp/client.py`): `$BAND_TEST_PYTHON` or
//!   `python3` with the `mcp` package;
//! - the official MCP Inspector's CLI (TypeScript SDK): `$BAND_TEST_MCP_INSPECTOR`, the
//!   inspector's launcher script, run by `$BAND_TEST_NODE` (else `node`);
//! - and, for the whole-output snapshots, JSON-RPC lines written to `band mcp` by hand (no client
//!   in between, so the snapshot is what every client receives).
//!
//! Each client makes the same four calls: a success (structured output), bad input, a denied
//! command and a missing secret. Every failure must come back as a tool error (`isError`) that
//! carries band's typed status and hint, never as a protocol error: band used to put its error
//! object in `structuredContent`, which the TypeScript SDK checks against the tool's
//! `outputSchema` (it describes success) and turned into `-32602`.
//!
//! `.ci/run` installs both clients and sets the variables. Without a client a test is skipped,
//! unless `BAND_TEST_MUST_RUN=1`; calls that run the sandbox need root (`privileged_*`).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::{
    DATA_DIR, band, band_exe, bin, noted_pids, repo, sandbox_missing, write_script,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

pub(crate) fn python() -> String {
    std::env::var("BAND_TEST_PYTHON").unwrap_or_else(|_| "python3".into())
}

pub(crate) fn has_mcp_sdk() -> bool {
    Command::new(python())
        .args(["-c", "import mcp"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A skill whose script calls its declared `jq` with arguments the band does not allow.
fn denied_skill(dir: &Path) {
    assert_eq!(band(&["init", "probe", "--script", "peek"], dir).0, 0);
    fs_err::write(dir.join("probe/scripts/peek.sh"), "#!/bin/sh\nset -e\njq . \"$INPUT_PATH\"\necho '{\"greeting\":\"unreachable\"}' > \"$OUTPUT_PATH\"\n").expect("write");
}

/// The four calls every client makes: (tool, arguments).
fn four_calls() -> [(&'static str, Value); 4] {
    [
        ("text__count", json!({"text": "hello big world"})),
        ("text__count", json!({"text": 5})),
        ("probe__peek", json!({"name": "x"})),
        // GITHUB_TOKEN is never set for band in tests: refused before anything starts.
        ("github__issue-list", json!({"repo": "octo/demo"})),
    ]
}

/// The typed error object of an error result's content (its second text block), after checking
/// the first is the headline `<status>: …`.
fn typed(texts: &[Value], status: &str) -> Value {
    let headline = texts.first().and_then(Value::as_str).unwrap_or("");
    assert!(
        headline.starts_with(&format!("{status}: ")),
        "headline: {texts:?}"
    );
    let object = texts.get(1).and_then(Value::as_str).unwrap_or("");
    serde_json::from_str(object).unwrap_or_else(|e| panic!("{e}: {texts:?}"))
}

/// What each client must get back for [`four_calls`], given for each call whether it was an
/// error, its structured content and its text blocks.
fn assert_four_results(results: &[(bool, Value, Vec<Value>)]) {
    // Success: the output as structured content (checked by the client against outputSchema).
    let (is_error, structured, _) = &results[0];
    assert!(!is_error, "{results:?}");
    assert_eq!(structured, &json!({"words": 3, "lines": 1, "chars": 15}));
    for (is_error, structured, _) in &results[1..] {
        assert!(is_error, "{results:?}");
        assert_eq!(structured, &Value::Null, "no structured content on errors");
    }
    // Bad input: nothing ran; the message names the field, the hint says where the arguments are.
    let bad = typed(&results[1].2, "input_invalid");
    assert_eq!(
        (&bad["exit_code"], &bad["script_exit_code"]),
        (&json!(3), &Value::Null)
    );
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("/text"),
        "{bad}"
    );
    assert!(
        bad["error"]["hint"]
            .as_str()
            .unwrap_or("")
            .contains("text/count"),
        "{bad}"
    );
    // Denied: band exits 5, the script 126 (the shim's refusal), and what was refused.
    let denied = typed(&results[2].2, "denied");
    assert_eq!(
        (&denied["exit_code"], &denied["script_exit_code"]),
        (&json!(5), &json!(126))
    );
    assert_eq!(
        denied["denied"][0],
        json!({"kind": "cli", "argv": ["jq", ".", "/band/io/input.json"], "rule": null})
    );
    assert!(
        results[2].2[0].as_str().unwrap_or("").contains(
            "(denied: command jq . /band/io/input.json (cli layer: no allow.cli rule matches; \
                 to allow it: allow.cli \"jq . /band/io/input.json\"))"
        ),
        "{:?}",
        results[2].2
    );
    // A missing secret: the run could not start.
    let secret = typed(&results[3].2, "error");
    assert_eq!(secret["exit_code"], 2);
    assert!(
        secret["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("GITHUB_TOKEN"),
        "{secret}"
    );
    assert!(
        secret["error"]["hint"]
            .as_str()
            .unwrap_or("")
            .contains("export GITHUB_TOKEN"),
        "{secret}"
    );
}

#[test]
fn privileged_python_sdk_lists_calls_and_gets_typed_errors() {
    band_test::privileged!(sandbox_missing());
    if !has_mcp_sdk() {
        assert_ne!(
            std::env::var(band::proto::env::TEST_MUST_RUN).as_deref(),
            Ok("1"),
            "{} has no `mcp` package (pip install mcp) and BAND_TEST_MUST_RUN is set",
            python()
        );
        eprintln!(
            "skipped: {} has no `mcp` package (set BAND_TEST_PYTHON)",
            python()
        );
        return;
    }
    let t = tempfile::tempdir().expect("tmp");
    denied_skill(t.path());
    let mut calls: Vec<Value> = four_calls()
        .into_iter()
        .map(|(tool, args)| json!([tool, args]))
        .collect();
    calls.push(json!(["text__cont", {}]));
    let skills = repo().join("skills");
    let mut cmd = Command::new(python());
    cmd.arg(repo().join("tests/mcp/client.py"))
        .arg(band_exe())
        .arg(Value::from(calls).to_string())
        .arg("--")
        .args(["mcp", "--skills"])
        .arg(&skills)
        .arg("--skills")
        .arg(t.path())
        .arg("--workspace")
        .arg(t.path());
    bin()
        .env("BAND_DATA_DIR", t.path().join("data"))
        .apply(&mut cmd);
    let out = cmd.output().expect("run the MCP client");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "client failed: {stderr}");
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(report["server"], "band");
    assert!(
        report["instructions"]
            .as_str()
            .unwrap_or("")
            .contains("skill://<skill>/SKILL.md"),
        "{}",
        report["instructions"]
    );

    // tools/list: every script, with its contracts, its own description and the policy's hints.
    let tools = report["tools"].as_array().expect("tools");
    let tool = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} not listed"))
    };
    for name in [
        "text__count",
        "text__summary",
        "csv-stats__describe",
        "json-transform__apply",
        "github__issue-list",
        "http-fetch__fetch",
        "probe__peek",
    ] {
        tool(name);
    }
    let count = tool("text__count");
    assert_eq!(count["inputSchema"]["properties"]["text"]["type"], "string");
    assert_eq!(
        count["outputSchema"]["required"],
        json!(["words", "lines", "chars"])
    );
    assert_eq!(
        count["description"],
        "Count words, lines and characters of `text`."
    );
    assert_eq!(
        count["annotations"],
        json!({"title": "text/count", "readOnlyHint": true, "destructiveHint": false, "openWorldHint": false})
    );

    // resources: each skill's SKILL.md, as written.
    let resources = report["resources"].as_array().expect("resources");
    let text_md = resources
        .iter()
        .find(|r| r["uri"] == "skill://text/SKILL.md")
        .unwrap_or_else(|| panic!("no text skill resource: {resources:?}"));
    assert_eq!(
        text_md["text"].as_str().unwrap_or(""),
        fs_err::read_to_string(skills.join("text/SKILL.md")).expect("SKILL.md")
    );

    let calls = report["calls"].as_array().expect("calls");
    let results: Vec<(bool, Value, Vec<Value>)> = calls[..4]
        .iter()
        .map(|c| {
            assert!(c.get("exception").is_none(), "a protocol error: {c}");
            (
                c["is_error"] == true,
                c["structured"].clone(),
                c["text"].as_array().cloned().unwrap_or_default(),
            )
        })
        .collect();
    assert_four_results(&results);

    // Progress: the sandbox, each command and each refusal.
    let progress = |i: usize| -> Vec<String> {
        calls[i]["progress"]
            .as_array()
            .expect("progress")
            .iter()
            .filter_map(|m| m.as_str().map(String::from))
            .collect()
    };
    assert!(
        progress(0).iter().any(|m| m.starts_with("sandbox ready")),
        "{:?}",
        progress(0)
    );
    assert!(
        progress(0).contains(&"ran jq -j .text /band/io/input.json".into()),
        "{:?}",
        progress(0)
    );
    assert!(
        progress(2).contains(&"denied jq . /band/io/input.json".into()),
        "{:?}",
        progress(2)
    );

    // An unknown tool is a protocol error, which the SDK raises.
    assert!(
        calls[4]["exception"]
            .as_str()
            .unwrap_or("")
            .contains("no tool named `text__cont`; did you mean `text__count`?"),
        "{}",
        calls[4]
    );

    // Every call that was a run is in the ledger, the refused one too; the chain verifies.
    let ledger = band::ledger::Ledger::new(t.path().join("data"));
    let runs: Vec<(String, band::proto::Status)> = ledger
        .records()
        .expect("ledger")
        .iter()
        .filter_map(|s| s.run())
        .map(|r| (format!("{}/{}", r.skill, r.script), r.status))
        .collect();
    use band::proto::Status;
    assert_eq!(
        runs,
        vec![
            ("text/count".into(), Status::Ok),
            ("text/count".into(), Status::InputInvalid),
            ("probe/peek".into(), Status::Denied)
        ]
    );
    assert_eq!(ledger.verify().expect("verify").broken, None);
}

/// The MCP Inspector's CLI, when `BAND_TEST_MCP_INSPECTOR` names it; else skip (or, with
/// `BAND_TEST_MUST_RUN=1`, fail).
struct Inspector {
    node: PathBuf,
    launcher: PathBuf,
}

impl Inspector {
    fn find(test: &str) -> Option<Inspector> {
        let Some(launcher) = std::env::var_os("BAND_TEST_MCP_INSPECTOR") else {
            assert!(
                !band_test::must_run(),
                "{test}: BAND_TEST_MCP_INSPECTOR is not set and BAND_TEST_MUST_RUN is set"
            );
            eprintln!(
                "skipped: {test}: BAND_TEST_MCP_INSPECTOR is not set (npm install \
                 @modelcontextprotocol/inspector; see .ci/run)"
            );
            return None;
        };
        Some(Inspector {
            node: std::env::var_os("BAND_TEST_NODE")
                .map(PathBuf::from)
                .unwrap_or_else(|| "node".into()),
            launcher: launcher.into(),
        })
    }

    /// `inspector --cli --format json <method args> -- band mcp --skills … --workspace ws`:
    /// the exit code and the document on stdout. The inspector passes the server only the
    /// variables named with `-e`, so the test environment goes there.
    fn call(&self, ws: &Path, method: &[&str]) -> (i32, Value, String) {
        let data = ws.join("data");
        let out = Command::new(&self.node)
            .arg(&self.launcher)
            .args(["--cli", "--format", "json"])
            .args(method)
            .arg("-e")
            .arg(format!("BAND_DATA_DIR={}", data.display()))
            .arg("-e")
            .arg(format!("BAND_SERVER_STATE_DIR={}", band_test::STATE_DIR))
            .arg("-e")
            .arg(format!("BAND_CONFIG={}", band_test::NO_CONFIG))
            // No warm server: this test's own (another config's digest) would send away the one
            // warm.rs and load.rs hold, mid-run (a load run was then "not served warm").
            .args(["-e", "BAND_WARM=0"])
            .args(["-e", "NO_COLOR=1", "--", band_exe(), "mcp", "--skills"])
            .arg(repo().join("skills"))
            .arg("--skills")
            .arg(ws)
            .arg("--workspace")
            .arg(ws)
            .env_remove("GITHUB_TOKEN")
            .env("HOME", ws)
            .current_dir(ws)
            .output()
            .expect("run the MCP Inspector");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        let doc = serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("{e}: stdout {stdout:?}, stderr {stderr}"));
        (out.status.code().unwrap_or(-1), doc, stderr)
    }

    fn call_tool(&self, ws: &Path, tool: &str, args: &Value) -> (bool, Value, Vec<Value>) {
        let args = args.to_string();
        let (code, doc, stderr) = self.call(
            ws,
            &[
                "--method",
                "tools/call",
                "--tool-name",
                tool,
                "--tool-args-json",
                &args,
            ],
        );
        // A tool error is a result (the inspector exits 5: `tool_is_error`), never a protocol
        // error (exit 1, no result).
        let result = doc
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("{tool}: no result, a protocol error: {doc}\n{stderr}"));
        let is_error = result["isError"] == true;
        assert_eq!(code, if is_error { 5 } else { 0 }, "{doc}\n{stderr}");
        let texts = result["content"]
            .as_array()
            .map(|c| c.iter().map(|b| b["text"].clone()).collect())
            .unwrap_or_default();
        (
            is_error,
            result
                .get("structuredContent")
                .cloned()
                .unwrap_or(Value::Null),
            texts,
        )
    }
}

/// What needs no sandbox: listing, reading a skill's resource, bad input and a missing secret,
/// both refused before anything starts.
#[test]
fn inspector_reads_band_errors_as_tool_errors() {
    let Some(inspector) = Inspector::find("inspector_reads_band_errors_as_tool_errors") else {
        return;
    };
    let t = tempfile::tempdir().expect("tmp");
    let ws = t.path();
    let (code, doc, stderr) = inspector.call(ws, &["--method", "tools/list"]);
    assert_eq!(code, 0, "{stderr}");
    let tools = doc["result"]["tools"].as_array().expect("tools");
    let issue_close = tools
        .iter()
        .find(|t| t["name"] == "github__issue-close")
        .expect("github__issue-close");
    assert_eq!(issue_close["description"], "Close an issue.");
    assert_eq!(
        issue_close["annotations"],
        json!({"title": "github/issue-close", "readOnlyHint": false, "destructiveHint": true, "openWorldHint": true})
    );
    let (code, doc, stderr) = inspector.call(
        ws,
        &[
            "--method",
            "resources/read",
            "--uri",
            "skill://github/SKILL.md",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let text = doc["result"]["contents"][0]["text"].as_str().unwrap_or("");
    assert!(text.starts_with("---\nname: github\n"), "{doc}");

    let calls = four_calls();
    let bad = inspector.call_tool(ws, calls[1].0, &calls[1].1);
    let secret = inspector.call_tool(ws, calls[3].0, &calls[3].1);
    for (is_error, structured, _) in [&bad, &secret] {
        assert!(is_error);
        assert_eq!(structured, &Value::Null);
    }
    let bad = typed(&bad.2, "input_invalid");
    assert_eq!(bad["exit_code"], 3);
    assert!(
        bad["error"]["hint"]
            .as_str()
            .unwrap_or("")
            .contains("text/count"),
        "{bad}"
    );
    let secret = typed(&secret.2, "error");
    assert_eq!(secret["exit_code"], 2);
    assert!(
        secret["error"]["hint"]
            .as_str()
            .unwrap_or("")
            .contains("export GITHUB_TOKEN"),
        "{secret}"
    );
}

/// The four calls through the Inspector, the two that run the sandbox included.
#[test]
fn privileged_inspector_calls_and_gets_typed_errors() {
    band_test::privileged!(sandbox_missing());
    let Some(inspector) = Inspector::find("privileged_inspector_calls_and_gets_typed_errors")
    else {
        return;
    };
    let t = tempfile::tempdir().expect("tmp");
    denied_skill(t.path());
    let results: Vec<_> = four_calls()
        .iter()
        .map(|(tool, args)| inspector.call_tool(t.path(), tool, args))
        .collect();
    assert_four_results(&results);
}

/// `band mcp` driven with JSON-RPC lines: each response as the client receives it.
pub(crate) struct Raw {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    next_id: u64,
}

impl Raw {
    /// Start `band mcp` and initialize the session: the server and its `initialize` result.
    pub(crate) fn start(skills: &[&Path], ws: &Path) -> (Raw, Value) {
        Raw::start_with(skills, ws, &[])
    }

    /// [`Raw::start`] with more `band mcp` arguments.
    fn start_with(skills: &[&Path], ws: &Path, args: &[&str]) -> (Raw, Value) {
        Raw::start_in(skills, ws, args, bin())
    }

    /// [`Raw::start_with`] in the environment of `env`.
    pub(crate) fn start_in(
        skills: &[&Path],
        ws: &Path,
        args: &[&str],
        env: band_test::Band,
    ) -> (Raw, Value) {
        let mut cmd = Command::new(band_exe());
        cmd.arg("mcp").args(args);
        for s in skills {
            cmd.arg("--skills").arg(s);
        }
        cmd.arg("--workspace")
            .arg(ws)
            .current_dir(ws)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        env.env("BAND_DATA_DIR", DATA_DIR).apply(&mut cmd);
        let mut child = cmd.spawn().expect("band mcp");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut raw = Raw {
            child,
            stdin,
            stdout,
            next_id: 0,
        };
        let init = raw.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "band-tests", "version": "0"}}),
        );
        raw.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        (raw, init)
    }

    fn send(&mut self, msg: &Value) {
        writeln!(self.stdin, "{msg}").expect("write to band mcp");
        self.stdin.flush().expect("flush");
    }

    /// The response to one request (its `result`, or its `error`).
    pub(crate) fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            let n = self.stdout.read_line(&mut line).expect("read band mcp");
            assert!(n > 0, "band mcp closed stdout before answering {method}");
            let msg: Value = serde_json::from_str(&line).expect("a JSON-RPC line");
            if msg["id"] == id {
                return msg
                    .get("result")
                    .or(msg.get("error"))
                    .cloned()
                    .expect("result");
            }
        }
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).expect("json")
}

/// Whole output: `tools/list` and `resources/list` for the shipped skills, and the error result
/// of a call with bad input, exactly as a client receives them.
#[test]
fn mcp_protocol_output() {
    let t = tempfile::tempdir().expect("tmp");
    let skills = repo().join("skills");
    let (mut raw, _) = Raw::start(&[&skills], t.path());
    let tools = raw.request("tools/list", json!({}));
    let resources = raw.request("resources/list", json!({}));
    let bad = raw.request(
        "tools/call",
        json!({"name": "text__count", "arguments": {"text": 5}}),
    );
    let settings = band_test::settings(&[]);
    settings.bind(|| {
        insta::assert_snapshot!("mcp_tools_list", pretty(&tools));
        insta::assert_snapshot!("mcp_resources_list", pretty(&resources));
        insta::assert_snapshot!(
            "mcp_error_result",
            format!(
                "{}\n\nthe first text block:\n{}\n\nthe second:\n{}",
                pretty(&bad),
                bad["content"][0]["text"].as_str().unwrap_or(""),
                bad["content"][1]["text"].as_str().unwrap_or("")
            )
        );
    });
}

/// An unknown tool, or a script gone from its skill since the catalog was made, gets the nearest
/// name, as `band run` does.
#[test]
fn mcp_unknown_script_gets_the_nearest_name() {
    let t = tempfile::tempdir().expect("tmp");
    let skills = t.path().join("skills");
    band_test::copy_dir(&repo().join("skills/text"), &skills.join("text"));
    // Unlocked: the rename below is not an integrity failure.
    fs_err::remove_file(skills.join("text/band.lock")).expect("rm");
    let (mut raw, _) = Raw::start(&[&skills], t.path());
    let unknown = raw.request(
        "tools/call",
        json!({"name": "text__cont", "arguments": {"text": "a"}}),
    );
    // The script renamed under the running server: the call still names the nearest.
    let dir = skills.join("text");
    fs_err::rename(dir.join("scripts/count.sh"), dir.join("scripts/counts.sh")).expect("mv");
    fs_err::rename(
        dir.join("schemas/input/count.json"),
        dir.join("schemas/input/counts.json"),
    )
    .expect("mv");
    fs_err::rename(
        dir.join("schemas/output/count.json"),
        dir.join("schemas/output/counts.json"),
    )
    .expect("mv");
    let gone = raw.request(
        "tools/call",
        json!({"name": "text__count", "arguments": {"text": "a"}}),
    );
    // `did you mean `text__count`?`, then `did you mean `text/counts`?`.
    let settings = band_test::settings(&[]);
    settings.bind(|| {
        insta::assert_snapshot!(
            "mcp_unknown_tool",
            format!("{}\n\n{}", pretty(&unknown), pretty(&gone))
        );
    });
}

/// `band mcp --target` holds for every call: here a remote host never set up, so each call fails
/// naming it (without `--target` the call would go to the host).
#[test]
fn mcp_target_applies_to_every_call() {
    let t = tempfile::tempdir().expect("tmp");
    let skills = repo().join("skills");
    let (mut raw, _) = Raw::start_with(&[&skills], t.path(), &["--target", "ssh://me@box.invalid"]);
    for _ in 0..2 {
        let r = raw.request(
            "tools/call",
            json!({"name": "text__count", "arguments": {"text": "hi"}}),
        );
        // An error result naming ssh://me@box.invalid:22, not set up; the same for each call.
        band_test::settings(&[]).bind(|| {
            insta::assert_snapshot!("mcp_target_not_set_up", pretty(&r));
        });
    }
}

/// A script left out is said to the client: in the instructions and as a resource.
#[test]
fn mcp_reports_scripts_left_out() {
    let t = tempfile::tempdir().expect("tmp");
    let skills = t.path().join("skills");
    band_test::copy_dir(&repo().join("skills/text"), &skills.join("text"));
    fs_err::write(skills.join("text/schemas/input/count.json"), "[1, 2").expect("write");
    let (mut raw, init) = Raw::start(&[&skills], t.path());
    let resources = raw.request("resources/list", json!({}));
    let left_out = raw.request("resources/read", json!({"uri": "band://not-offered"}));
    let tools = raw.request("tools/list", json!({}));
    let names: Vec<&Value> = tools["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| &t["name"])
        .collect();
    assert_eq!(names, [&json!("text__summary")]);
    let settings = band_test::settings(&[(skills.to_str().expect("utf8"), "[SKILLS]")]);
    settings.bind(|| {
        insta::assert_snapshot!(
            "mcp_left_out",
            format!(
                "instructions:\n{}\n\nresources/list:\n{}\n\nresources/read band://not-offered:\n{}",
                init["instructions"].as_str().unwrap_or(""),
                pretty(&resources),
                pretty(&left_out)
            )
        );
    });
}

/// An undeclared host command inside a script reaches the agent as a denial in the MCP error
/// result: the typed object lists it, and the headline says which rule would allow it.
#[test]
fn privileged_undeclared_host_command_is_a_denial_in_the_mcp_error() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tmp");
    crate::authoring::undeclared_skill(t.path());
    let ws = t.path().join("ws");
    fs_err::create_dir(&ws).expect("mkdir");
    let (mut raw, _) = Raw::start(&[t.path()], &ws);
    let result = raw.request(
        "tools/call",
        json!({"name": "demo__hello", "arguments": {"name": "x"}}),
    );
    assert_eq!(result["isError"], json!(true), "{result}");
    let texts: Vec<Value> = result["content"]
        .as_array()
        .map(|c| c.iter().map(|b| b["text"].clone()).collect())
        .unwrap_or_default();
    let denied = typed(&texts, "denied");
    assert_eq!(
        (&denied["exit_code"], &denied["script_exit_code"]),
        (&json!(5), &json!(127))
    );
    assert_eq!(
        denied["denied"],
        json!([
            {"kind": "cli", "argv": ["uname", "-s"], "rule": null},
            {"kind": "cli", "argv": ["id", "-u"], "rule": null},
        ])
    );
    assert!(
        texts[0].as_str().unwrap_or("").contains(
            "denied: command uname -s (cli layer: no allow.cli rule matches; \
             to allow it: allow.cli \"uname -s\")"
        ),
        "{texts:?}"
    );
}

/// band starts band-server on the host as soon as a call's target is known, while it still
/// checks the input and reads the bundle and workspace (issue 17). That early band-server serves
/// the run; a call refused before it runs (its input is invalid) ends it and reaps it: a
/// long-lived `band mcp` keeps no band-server, running or a zombie, after either call.
#[test]
fn privileged_the_band_server_started_early_serves_the_call_or_is_reaped() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tmp");
    let ws = t.path().join("ws");
    fs_err::create_dir(&ws).expect("mkdir");
    // band-server, through a script that notes each start.
    let starts = t.path().join("starts");
    let real = bin().bin_dir().join("band-server");
    let wrapper = t.path().join("band-server");
    write_script(
        &wrapper,
        &format!(
            "#!/bin/sh\necho $$ >> '{}'\nexec '{}' \"$@\"\n",
            starts.display(),
            real.display()
        ),
    );
    let started = || noted_pids(&starts);
    let skills = repo().join("skills");
    let (mut raw, _) = Raw::start_in(
        &[skills.as_path()],
        &ws,
        &[],
        bin().env(band::proto::env::SERVER, &wrapper),
    );
    let band_pid = raw.child.id();
    // What `band mcp` has as children now (running or zombie).
    let children = || -> Vec<String> {
        let mut all = Vec::new();
        for task in fs_err::read_dir(format!("/proc/{band_pid}/task")).expect("tasks") {
            let path = task.expect("task").path().join("children");
            let listed = fs_err::read_to_string(&path).unwrap_or_default();
            all.extend(listed.split_whitespace().map(str::to_string));
        }
        all
    };
    let gone = |pid: u32, what: &str| {
        band_test::wait_until(&format!("{what} {pid} is gone"), || {
            !Path::new(&format!("/proc/{pid}")).exists()
        });
    };

    // Refused before it runs: the early band-server was started, and is gone and reaped.
    let refused = raw.request(
        "tools/call",
        json!({"name": "text__count", "arguments": {"text": 5}}),
    );
    assert_eq!(refused["isError"], json!(true), "{refused}");
    assert!(refused.to_string().contains("input_invalid"), "{refused}");
    let first = started();
    assert_eq!(first.len(), 1, "one band-server started early: {first:?}");
    gone(first[0], "the early band-server");
    assert_eq!(children(), Vec::<String>::new(), "band mcp keeps a child");

    // A run: served by the band-server started early (no second start), then reaped.
    let ok = raw.request(
        "tools/call",
        json!({"name": "text__count", "arguments": {"text": "hello big world"}}),
    );
    assert_eq!(ok["isError"], json!(false), "{ok}");
    let both = started();
    assert_eq!(both.len(), 2, "one more band-server for the run: {both:?}");
    gone(both[1], "band-server");
    assert_eq!(children(), Vec::<String>::new(), "band mcp keeps a child");
}

/// The Skills extension (SEP-2640) over stdio: each skill's files with their digests and sizes,
/// each file readable as listed; the entry's `_meta` carries the skill's `band.lock` fingerprint,
/// and a tool result says which version of which skill ran: the same fingerprint.
#[test]
fn mcp_skills_list_their_files_and_a_tool_result_names_the_version_that_ran() {
    let t = tempfile::tempdir().expect("tmp");
    let skills = repo().join("skills");
    let (mut raw, init) = Raw::start(&[&skills], t.path());
    assert_eq!(
        init["capabilities"]["extensions"]["io.modelcontextprotocol/skills"],
        json!({"directoryRead": true}),
        "{init}"
    );
    let listed = raw.request("skills/list", json!({}));
    let got = raw.request("skills/get", json!({"uri": "skill://text/SKILL.md"}));
    let text = &got["skill"];
    assert!(
        listed["skills"].as_array().expect("skills").contains(text),
        "{listed}"
    );
    assert_eq!(text["frontmatter"]["name"], "text", "{text}");
    for file in text["resources"].as_array().expect("resources") {
        let uri = file["uri"].as_str().expect("uri");
        let read = raw.request("resources/read", json!({"uri": uri}));
        let body = read["contents"][0]["text"].as_str().expect("text");
        assert_eq!(file["size"], body.len(), "{uri}");
        assert_eq!(
            file["digest"],
            format!("sha256:{}", band::lock::sha256_hex(body.as_bytes())),
            "{uri}"
        );
    }
    let tree = band::lock::Tree::read(&skills.join("text")).expect("tree");
    let fingerprint = format!("sha256:{}", tree.bundle_sha256());
    assert_eq!(text["_meta"]["band/skill"]["bundle"], fingerprint, "{text}");
    let unknown = raw.request("skills/get", json!({"uri": "skill://nope/SKILL.md"}));
    assert_eq!(unknown["code"], -32602, "{unknown}");
    // A call refused at the input contract still names the skill version it was checked against.
    let bad = raw.request(
        "tools/call",
        json!({"name": "text__count", "arguments": {"text": 5}}),
    );
    assert_eq!(bad["_meta"]["band/skill"]["bundle"], fingerprint, "{bad}");
    assert_eq!(
        bad["_meta"]["band/skill"]["uri"], "skill://text/SKILL.md",
        "{bad}"
    );
}

/// The `_meta` a stateless (2026-07-28) request carries.
fn modern_meta() -> Value {
    json!({"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "band-tests", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {}
    }})
}

/// `band mcp` on stdio without a handshake: the child, its stdin and its stdout.
fn bare_mcp(
    ws: &Path,
) -> (
    std::process::Child,
    std::process::ChildStdin,
    BufReader<std::process::ChildStdout>,
) {
    let mut cmd = Command::new(band_exe());
    cmd.arg("mcp")
        .arg("--skills")
        .arg(repo().join("skills"))
        .arg("--workspace")
        .arg(ws)
        .current_dir(ws)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    bin().env("BAND_DATA_DIR", DATA_DIR).apply(&mut cmd);
    let mut child = cmd.spawn().expect("band mcp");
    let stdin = child.stdin.take().expect("stdin");
    let stdout = BufReader::new(child.stdout.take().expect("stdout"));
    (child, stdin, stdout)
}

fn rpc(
    stdin: &mut std::process::ChildStdin,
    stdout: &mut BufReader<std::process::ChildStdout>,
    id: u64,
    method: &str,
) -> Value {
    rpc_with(stdin, stdout, id, method, modern_meta())
}

/// One JSON-RPC request on a stdio server, and its one-line answer.
pub(crate) fn rpc_with(
    stdin: &mut std::process::ChildStdin,
    stdout: &mut BufReader<std::process::ChildStdout>,
    id: u64,
    method: &str,
    params: Value,
) -> Value {
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    writeln!(stdin, "{msg}").expect("write");
    stdin.flush().expect("flush");
    let mut line = String::new();
    assert!(
        stdout.read_line(&mut line).expect("read") > 0,
        "no answer to {method}"
    );
    serde_json::from_str(&line).expect("a JSON-RPC line")
}

/// The modern era on stdio (issue 41): after `server/discover`, `ping` is answered and
/// `subscriptions/listen` (not offered) is "method not found".
#[test]
fn mcp_stdio_modern_era_answers_ping_and_refuses_subscriptions_listen() {
    let t = tempfile::tempdir().expect("tmp");
    let (mut child, mut stdin, mut stdout) = bare_mcp(t.path());
    let discover = rpc(&mut stdin, &mut stdout, 1, "server/discover");
    assert!(
        discover["result"]["supportedVersions"].is_array(),
        "{discover}"
    );
    let ping = rpc(&mut stdin, &mut stdout, 2, "ping");
    assert_eq!(ping, json!({"jsonrpc": "2.0", "id": 2, "result": {}}));
    let listen = rpc(&mut stdin, &mut stdout, 3, "subscriptions/listen");
    assert_eq!(listen["error"]["code"], -32601, "{listen}");
    drop(stdin);
    let _ = child.wait();
}

/// A client that only discovers and leaves never started a session: band exits 2 and says so.
#[test]
fn mcp_stdio_discover_only_then_close_is_an_initialisation_failure() {
    let t = tempfile::tempdir().expect("tmp");
    let (child, mut stdin, mut stdout) = bare_mcp(t.path());
    let discover = rpc(&mut stdin, &mut stdout, 1, "server/discover");
    assert!(discover["result"].is_object(), "{discover}");
    drop(stdin);
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("MCP initialisation failed"), "{stderr}");
}
