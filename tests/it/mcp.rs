//! `band mcp` against a real MCP client: the official Python SDK's stdio client
//! (`tests/mcp/client.py`). It lists the tools, calls one, calls one with invalid input, calls
//! one whose script is denied a command, and calls a tool that does not exist; the runs are in the
//! ledger.
//!
//! Needs the sandbox (root, bubblewrap) and a Python with the `mcp` package: `$BAND_TEST_PYTHON`
//! or `python3` (`.ci/run` makes a venv and sets it). Without them the test is skipped, unless
//! `BAND_TEST_MUST_RUN=1`.

use std::path::Path;
use std::process::Command;

use crate::common::{band, band_exe, repo, skip};
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

#[test]
fn privileged_python_sdk_lists_calls_and_gets_typed_errors() {
    if skip("privileged_python_sdk_lists_calls_and_gets_typed_errors") {
        return;
    }
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
    let calls = json!([
        ["text__count", {"text": "hello big world"}],
        ["text__count", {"text": 5}],
        ["probe__peek", {"name": "x"}],
        ["no__such", {}],
    ]);
    let skills = repo().join("skills");
    let out = Command::new(python())
        .arg(repo().join("tests/mcp/client.py"))
        .arg(band_exe())
        .arg(calls.to_string())
        .arg("--")
        .args(["mcp", "--skills"])
        .arg(&skills)
        .arg("--skills")
        .arg(t.path())
        .arg("--workspace")
        .arg(t.path())
        .env("BAND_SERVER_STATE_DIR", "/run/band-test")
        .env("BAND_CONFIG", "/nonexistent/band-test-config.toml")
        .env("BAND_DATA_DIR", t.path().join("data"))
        .env_remove("BAND_SKILLS_PATH")
        .output()
        .expect("run the MCP client");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "client failed: {stderr}");
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(report["server"], "band");

    // tools/list: every script, with its contracts.
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
    assert!(
        count["description"]
            .as_str()
            .unwrap_or("")
            .contains("Count the words"),
        "{count}"
    );
    assert_eq!(count["annotations"]["readOnlyHint"], true);

    let calls = report["calls"].as_array().expect("calls");
    // A call: structured content, validated by the SDK against the output schema; progress.
    let ok = &calls[0];
    assert_eq!(ok["is_error"], false, "{ok}");
    assert_eq!(
        ok["structured"],
        json!({"words": 3, "lines": 1, "chars": 15})
    );
    let progress: Vec<&str> = ok["progress"]
        .as_array()
        .expect("progress")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        progress.iter().any(|m| m.starts_with("sandbox ready")),
        "{progress:?}"
    );
    assert!(
        progress.contains(&"ran jq -j .text /band/io/input.json"),
        "{progress:?}"
    );

    // Invalid input: an error result with the typed status; nothing ran.
    let bad = &calls[1];
    assert_eq!(bad["is_error"], true, "{bad}");
    assert_eq!(bad["structured"]["status"], "input_invalid");
    assert_eq!(bad["structured"]["exit_code"], 3);
    assert!(
        bad["structured"]["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("/text"),
        "{bad}"
    );

    // Denied: the script's jq call was refused and it failed.
    let denied = &calls[2];
    assert_eq!(denied["is_error"], true, "{denied}");
    assert_eq!(denied["structured"]["status"], "denied");
    assert_eq!(denied["structured"]["exit_code"], 5);
    assert_eq!(
        denied["structured"]["denied"][0],
        json!({"kind": "cli", "argv": ["jq", ".", "/band/io/input.json"], "rule": null})
    );
    let progress: Vec<&str> = denied["progress"]
        .as_array()
        .expect("progress")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        progress.contains(&"denied jq . /band/io/input.json"),
        "{progress:?}"
    );

    // An unknown tool is a protocol error, which the SDK raises.
    assert!(
        calls[3]["exception"]
            .as_str()
            .unwrap_or("")
            .contains("no tool named `no__such`"),
        "{}",
        calls[3]
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
