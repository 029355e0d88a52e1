//! Declared secrets never reach what band shows or keeps (issue 13, item 6): a script that passes
//! its secret to a command, prints it to stdout and stderr, in base64 (alone and inside a longer
//! blob), URL-encoded, and split across two writes. The ledger (raw bytes, `band history --json`,
//! `band show --json`), `--trace`, the stderr a person reads, the `--json` result and an MCP
//! client's results and progress messages hold none of those forms; the output document and the
//! written file still hold the secret where the script put it, and a warning names it (by name).

use std::path::Path;
use std::process::Command;

use band_test::SkillBuilder;
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

use crate::common::{band_exe, repo, sandbox_missing};

/// A fake secret with characters that base64 and URL encoding change.
const TOKEN: &str = "fake-Secret/val+ue?x=42 &more~>>";

/// The band's frontmatter after `band: leak`.
const BAND: &str = r#"description: Shows its secret every way a careless or hostile script could.
version: 1
allow:
  cli: ["printf *", "base64 *", "jq *"]
  write: ["out/**"]
env:
  secrets: [TOKEN]
limit:
  maxRuntimeMs: 20s
"#;

const SCRIPT: &str = r#"#!/bin/sh
set -eu
# As a command argument: the CLI layer sees (and reports) it. `exec` skips the shell builtin.
(exec printf 'arg %s\n' "$TOKEN")
echo "stdout $TOKEN"
echo "stderr $TOKEN" >&2
b64=$(printf %s "$TOKEN" | base64 -w0)
url=$(jq -rn --arg t "$TOKEN" '$t|@uri')
blob=$(printf 'prefix-%s-suffix' "$TOKEN" | base64 -w0)
echo "b64 $b64 url $url blob $blob"
echo "b64 $b64 url $url blob $blob" >&2
# Split across two writes (two chunks on the wire).
printf %s "$TOKEN" | head -c 9; sleep 0.3; printf %s "$TOKEN" | tail -c +10; echo
printf %s "$TOKEN" | head -c 9 >&2; sleep 0.3; printf '%s\n' "$TOKEN" | tail -c +10 >&2
mkdir -p /workspace/out
printf '%s\n' "$TOKEN" > /workspace/out/token.txt
jq -n --arg t "$TOKEN" '{token: $t}' > "$OUTPUT_PATH"
if jq -e .fail "$INPUT_PATH" >/dev/null; then exit 3; fi
"#;

const INPUT: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": { "fail": { "type": "boolean" } },
  "additionalProperties": false
}
"#;

/// The skill `leak` in `dir`.
fn leak_skill(dir: &Path) {
    SkillBuilder::new("leak")
        .description("Prints its secret.")
        .band(BAND)
        .script("leak.sh", SCRIPT)
        .input_schema("leak", INPUT)
        .write(dir);
}

/// Every form the script prints the secret in.
fn forms() -> Vec<String> {
    let b = TOKEN.as_bytes();
    let url: String = b
        .iter()
        .map(|&c| match c {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(c).to_string()
            }
            _ => format!("%{c:02X}"),
        })
        .collect();
    let blob = STANDARD.encode(format!("prefix-{TOKEN}-suffix"));
    vec![
        TOKEN.to_string(),
        STANDARD.encode(b),
        STANDARD_NO_PAD.encode(b),
        URL_SAFE.encode(b),
        URL_SAFE_NO_PAD.encode(b),
        url,
        blob,
        // The halves of a split write: each is shorter than the secret, so only masking the
        // whole (carried over between chunks) hides them both.
        TOKEN[..9].to_string(),
        TOKEN[9..].to_string(),
    ]
}

/// Assert `text` (named `what`) holds no form of the secret.
#[track_caller]
fn assert_clean(what: &str, text: &str) {
    for f in forms() {
        assert!(
            !text.contains(&f),
            "{what} shows the secret as `{f}`:\n{text}"
        );
    }
}

/// Every file under `dir`, as text.
fn all_files(dir: &Path) -> String {
    let mut out = String::new();
    for e in fs_err::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.push_str(&all_files(&p));
        } else {
            out.push_str(&String::from_utf8_lossy(&fs_err::read(&p).unwrap()));
        }
    }
    out
}

#[test]
fn privileged_secrets_are_masked_in_what_band_shows_and_keeps() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().unwrap();
    leak_skill(t.path());
    let ws = t.path().join("ws");
    fs_err::create_dir_all(&ws).unwrap();
    let data = t.path().join("data");
    let band = band_test::Band::new(band_exe(), &data).env("TOKEN", TOKEN);
    let w = ws.display().to_string();
    let common = ["--skills", ".", "--workspace", &w, "--record-io"];

    // A person's view: --trace and the run's stderr, on band's stderr.
    let mut args = vec!["run", "--trace"];
    args.extend(common);
    args.push("leak/leak");
    let (code, stdout, stderr) = band.run(&args, t.path());
    assert_eq!(code, 0, "{stderr}");
    assert_clean("human stderr (events, --trace)", &stderr);
    for shown in [
        "stderr [secret TOKEN]",
        "printf 'arg %s\\n' '[secret TOKEN]'",
        "band: warning: the output contains the secret TOKEN",
        "band: warning: the file out/token.txt written back contains the secret TOKEN",
    ] {
        assert!(stderr.contains(shown), "`{shown}` not in:\n{stderr}");
    }
    // The output is the script's: left alone.
    let output: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(output, json!({ "token": TOKEN }));
    assert_eq!(
        fs_err::read_to_string(ws.join("out/token.txt")).unwrap(),
        format!("{TOKEN}\n")
    );

    // A machine's view: --json (with the trace's CLI calls).
    let mut args = vec!["run", "--json", "--trace"];
    args.extend(common);
    args.push("leak/leak");
    let (code, stdout, stderr) = band.run(&args, t.path());
    assert_eq!(code, 0, "{stderr}");
    let mut result: Value = serde_json::from_str(&stdout).unwrap();
    let output = result.as_object_mut().unwrap().remove("output");
    assert_eq!(output, Some(json!({ "token": TOKEN })));
    let shown = result.to_string();
    assert_clean("--json result", &shown);
    assert_clean("--json stderr", &stderr);
    assert!(
        result["stdout"]
            .as_str()
            .unwrap()
            .contains("stdout [secret TOKEN]\n"),
        "{result:#}"
    );
    assert!(
        result["cli_calls"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["argv"] == json!(["printf", "arg %s\\n", "[secret TOKEN]"])),
        "{result:#}"
    );
    let warnings = result["secret_warnings"].to_string();
    assert!(
        warnings.contains("the output contains the secret TOKEN"),
        "{warnings}"
    );
    let run_id = result["run_id"].as_str().unwrap().to_string();

    // The ledger: what band shows of it, and its raw bytes (the hash chain makes it permanent).
    let (code, history, _) = band.run(&["history", "--json"], t.path());
    assert_eq!(code, 0);
    assert_clean("band history --json", &history);
    let (code, show, _) = band.run(&["show", "--json", &run_id], t.path());
    assert_eq!(code, 0);
    assert_clean("band show --json", &show);
    assert!(show.contains("[secret TOKEN]"), "{show}");
    let raw = all_files(&data);
    assert!(
        raw.contains(&run_id),
        "the ledger is under {}",
        data.display()
    );
    assert_clean("the ledger's files", &raw);
    let ledger = band::ledger::Ledger::new(&data);
    assert_eq!(ledger.verify().unwrap().broken, None);
}

fn python() -> String {
    std::env::var("BAND_TEST_PYTHON").unwrap_or_else(|_| "python3".into())
}

#[test]
fn privileged_mcp_results_and_progress_mask_secrets() {
    band_test::privileged!(sandbox_missing());
    let has_sdk = Command::new(python())
        .args(["-c", "import mcp"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_sdk {
        assert!(
            !band_test::must_run(),
            "{} has no `mcp` package (pip install mcp) and BAND_TEST_MUST_RUN is set",
            python()
        );
        eprintln!(
            "skipped: {} has no `mcp` package (set BAND_TEST_PYTHON)",
            python()
        );
        return;
    }
    let t = tempfile::tempdir().unwrap();
    leak_skill(t.path());
    let calls = json!([["leak__leak", {}], ["leak__leak", {"fail": true}]]);
    let out = Command::new(python())
        .arg(repo().join("tests/mcp/client.py"))
        .arg(band_exe())
        .arg(calls.to_string())
        .arg("--")
        .args(["mcp", "--skills"])
        .arg(t.path())
        .arg("--workspace")
        .arg(t.path())
        .env("BAND_SERVER_STATE_DIR", band_test::STATE_DIR)
        .env("BAND_CONFIG", band_test::NO_CONFIG)
        // No warm server: a test's own would send away the one warm.rs and load.rs hold.
        .env("BAND_WARM", "0")
        .env("BAND_DATA_DIR", t.path().join("data"))
        .env("TOKEN", TOKEN)
        .env_remove("BAND_SKILLS_PATH")
        .output()
        .expect("run the MCP client");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "client failed: {stderr}");
    assert_clean("band mcp's stderr", &stderr);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let calls = report["calls"].as_array().unwrap();

    // Ok: the structured result is the output, left alone; progress and warnings are masked.
    let ok = &calls[0];
    assert_eq!(ok["is_error"], false, "{ok}");
    assert_eq!(ok["structured"], json!({ "token": TOKEN }));
    let progress = ok["progress"].to_string();
    assert_clean("MCP progress messages", &progress);
    assert!(progress.contains("[secret TOKEN]"), "{progress}");
    let text = ok["text"].to_string();
    assert!(
        text.contains("band: warning: the output contains the secret TOKEN"),
        "{text}"
    );

    // Failed: the error result's stderr and everything else are masked.
    let failed = &calls[1];
    assert_eq!(failed["is_error"], true, "{failed}");
    // band's typed error object is the error result's second text block.
    let typed: Value = serde_json::from_str(failed["text"][1].as_str().unwrap_or("")).unwrap();
    assert_eq!(typed["status"], "script_failed", "{failed}");
    assert_clean("MCP error result", &failed.to_string());
    assert!(
        typed["stderr"]
            .as_str()
            .unwrap()
            .contains("stderr [secret TOKEN]"),
        "{failed}"
    );

    assert_clean("the ledger's files", &all_files(&t.path().join("data")));
}

/// `band exec`: the agent's own command line holds the secret (its shell expanded it). What the
/// agent reads back (the command's stdout, streamed) and the ledger (the input document with
/// `--record-io`, the CLI call) are masked.
#[test]
fn privileged_exec_masks_a_secret_in_the_agents_command() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().unwrap();
    leak_skill(t.path());
    let data = t.path().join("data");
    let band = band_test::Band::new(band_exe(), &data).env("TOKEN", TOKEN);
    let file = t.path().join("leak/BAND.md").display().to_string();
    let (code, stdout, stderr) = band.run(
        &[
            "exec",
            "--record-io",
            "--band",
            &file,
            "--",
            "printf",
            "token %s\\n",
            TOKEN,
        ],
        t.path(),
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "token [secret TOKEN]\n");
    assert_clean("band exec stderr", &stderr);
    let raw = all_files(&data);
    assert!(raw.contains("[secret TOKEN]"), "{raw}");
    assert_clean("the ledger's files", &raw);
}

/// An input refusal quotes the input; an agent that passes the secret as an argument gets it
/// masked there too, and the ledger (with `--record-io`, the input document) holds none of it.
/// (Refused before any sandbox: no root needed.)
#[test]
fn an_input_refusal_masks_a_secret_in_the_input() {
    let t = tempfile::tempdir().unwrap();
    leak_skill(t.path());
    let data = t.path().join("data");
    let band = band_test::Band::new(band_exe(), &data).env("TOKEN", TOKEN);
    let input = json!({ "fail": TOKEN }).to_string();
    let (code, stdout, stderr) = band.run(
        &[
            "run",
            "--json",
            "--record-io",
            "--skills",
            ".",
            "leak/leak",
            "--input",
            &input,
        ],
        t.path(),
    );
    assert_eq!(code, 3, "{stderr}");
    assert_clean("--json result", &stdout);
    assert_clean("stderr", &stderr);
    let result: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(result["status"], "input_invalid");
    let message = result["error"]["message"].as_str().unwrap();
    assert!(message.contains("[secret TOKEN]"), "{message}");
    let raw = all_files(&data);
    assert!(raw.contains(r#""input":{"bytes""#), "{raw}");
    assert_clean("the ledger's files", &raw);
}
