//! Tool results: what a client gets back from a call.
//!
//! - `ok`: the output as `structuredContent` (it matched the output contract, so it matches the
//!   tool's `outputSchema`), and as JSON text.
//! - anything else: `isError: true` and **no** `structuredContent`. MCP clients validate
//!   `structuredContent` against the tool's `outputSchema`, which describes success; the
//!   TypeScript SDK does it for error results too, and turned every band error into a protocol
//!   error (`-32602 Structured content does not match the tool's output schema`). So an error
//!   result is two text blocks: a line for a person or a model (`denied: … (denied: command jq
//!   …)`, then `hint: …`), and band's typed error object as JSON ([`failure`]).
//!
//! An output property whose schema names a `contentMediaType` is also a content block of its
//! own ([`media_blocks`]), so a script can return an image, a sound or a document as MCP
//! content.
//!
//! Field names, the same in `band run --json` and the ledger: `exit_code` is band's exit code
//! (the table in `band::proto::exit`, as `band run` exits), `script_exit_code` the script's own,
//! when it ran.

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, ResourceContents};
use serde_json::{Value, json};

use crate::cli::{hint_of, trace};
use band::client::pipeline::Outcome;
use band::proto::{Denial, Status, exit};
use serde::Serialize;

/// The most stderr an error result carries (its end).
pub(crate) const MAX_ERROR_STDERR: usize = 4096;
/// The most of the script's last stderr line the headline quotes.
const MAX_HEADLINE_STDERR: usize = 200;

/// The content blocks of an output's media: each top-level property whose schema (in the
/// tool's `outputSchema`, the output contract bundled) has a `contentMediaType`, in the order
/// of the output. `image/*` and `audio/*` with `contentEncoding: base64` are image and audio
/// blocks; any other type is an embedded resource, `band://runs/<run_id>/output/<property>`,
/// as text, or as a blob when base64.
pub(crate) fn media_blocks(
    output: &Value,
    schema: Option<&JsonObject>,
    run_id: &str,
) -> Vec<ContentBlock> {
    let (Some(out), Some(props)) = (
        output.as_object(),
        schema
            .and_then(|s| s.get("properties"))
            .and_then(Value::as_object),
    ) else {
        return Vec::new();
    };
    let mut blocks = Vec::new();
    for (key, value) in out {
        let Some(text) = value.as_str() else { continue };
        let Some(prop) = props.get(key).and_then(Value::as_object) else {
            continue;
        };
        let Some(media) = prop.get("contentMediaType").and_then(Value::as_str) else {
            continue;
        };
        let base64 = prop.get("contentEncoding").and_then(Value::as_str) == Some("base64");
        let block = if base64 && media.starts_with("image/") {
            ContentBlock::image(text, media)
        } else if base64 && media.starts_with("audio/") {
            ContentBlock::audio(text, media)
        } else {
            let uri = format!("band://runs/{run_id}/output/{key}");
            let contents = if base64 {
                ResourceContents::blob(text, uri)
            } else {
                ResourceContents::text(text, uri)
            };
            ContentBlock::resource(contents.with_mime_type(media))
        };
        blocks.push(block);
    }
    blocks
}

/// The tool result of a finished (or refused) run; `output_schema` is the tool's.
pub(crate) fn call_result(outcome: &Outcome, output_schema: Option<&JsonObject>) -> CallToolResult {
    let r = &outcome.result;
    if r.status == Status::Ok {
        let mut result = match &r.output {
            Some(v @ Value::Object(_)) => {
                let mut res = CallToolResult::structured(v.clone());
                res.content
                    .extend(media_blocks(v, output_schema, &r.run_id));
                res
            }
            Some(Value::String(s)) => CallToolResult::success(vec![ContentBlock::text(s.clone())]),
            Some(v) => CallToolResult::success(vec![ContentBlock::text(v.to_string())]),
            None => CallToolResult::success(vec![ContentBlock::text(r.stdout.clone())]),
        };
        if !r.written.is_empty() || !r.written_folders.is_empty() {
            // Files, then the empty folders the run made, each with a trailing `/`.
            let files: Vec<String> = r
                .written
                .iter()
                .map(|f| f.path.clone())
                .chain(r.written_folders.iter().map(|d| format!("{d}/")))
                .collect();
            let without = match outcome.without_exec.is_empty() {
                true => String::new(),
                false => format!(
                    " ({} without the execute bit the script gave: band writes no executable file into the workspace)",
                    outcome.without_exec.join(", ")
                ),
            };
            result.content.push(ContentBlock::text(format!(
                "written to the workspace: {}{without}",
                files.join(", ")
            )));
        }
        for w in &outcome.secret_warnings {
            result
                .content
                .push(ContentBlock::text(format!("band: warning: {w}")));
        }
        // A workspace path its output names that the band hid: the run went without it.
        for n in &outcome.not_admitted {
            result.content.push(ContentBlock::text(format!(
                "band: note: `{}` is in the workspace but was not copied in, as the band does not admit it; the script ran without it; to let it read it: allow.read {:?}",
                n.path, n.rule
            )));
        }
        if !r.missing_commands.is_empty() {
            result.content.push(ContentBlock::text(format!(
                "band: note: not installed where band-server runs, so the run went without: {}",
                missing(r)
            )));
        }
        return result;
    }
    let message = match &r.error {
        Some(e) => e.message.clone(),
        None => {
            let mut m = r.status.describe().to_string();
            if r.status == Status::ScriptFailed
                && let Some(line) = r.stderr.lines().rev().find(|l| !l.trim().is_empty())
            {
                let line: String = line.trim().chars().take(MAX_HEADLINE_STDERR).collect();
                m = format!("{m}; its last line on stderr: {line}");
            }
            m
        }
    };
    let mut details: Vec<String> = Vec::new();
    if !r.denied.is_empty() {
        let what: Vec<String> = r.denied.iter().map(trace::describe).collect();
        details.push(format!("denied: {}", what.join("; ")));
    }
    if !r.insist_missing.is_empty() {
        details.push(format!("never happened: {}", r.insist_missing.join(", ")));
    }
    if !outcome.not_admitted.is_empty() {
        let what: Vec<String> = outcome
            .not_admitted
            .iter()
            .map(|n| format!("`{}` (allow.read {:?})", n.path, n.rule))
            .collect();
        details.push(format!(
            "in the workspace but not admitted by the band: {}",
            what.join(", ")
        ));
    }
    if !outcome.not_writable.is_empty() {
        let what: Vec<String> = outcome
            .not_writable
            .iter()
            .map(|n| format!("`{}` (allow.write {:?})", n.path, n.rule))
            .collect();
        details.push(format!(
            "refused writing by the filesystem, as the band does not admit it: {}",
            what.join(", ")
        ));
    }
    if !r.missing_commands.is_empty() {
        details.push(format!(
            "not installed where band-server runs, so the run went without: {}",
            missing(r)
        ));
    }
    // A run that timed out while serving on a port: why it waited (a run takes no inbound
    // connections), as `band run` says it.
    let listening = r.listening_hint();
    let hint = r
        .error
        .as_ref()
        .and_then(|e| e.hint.as_deref())
        .or(listening.as_deref())
        .or(outcome.stdin_hint());
    failure(
        &headline(r.status.as_str(), &message, &details, hint),
        &Failure {
            status: r.status.as_str(),
            exit_code: r.status.exit_code(),
            script_exit_code: r.exit_code,
            description: r.status.describe(),
            error: json!(r.error),
            denied: &r.denied,
            insist_missing: &r.insist_missing,
            stderr: tail(&r.stderr, MAX_ERROR_STDERR),
            run_id: Some(&r.run_id),
            secret_warnings: &outcome.secret_warnings,
        },
    )
}

/// The tool result of a run that could not start (unknown script, broken band, missing secret,
/// no band-server): status `error`, exit code 2, as `band run` would exit. The same fields as
/// every other error result, so a client reads one shape.
pub(crate) fn error_result(err: &anyhow::Error) -> CallToolResult {
    let hint = err.chain().find_map(hint_of);
    let message = format!("{err:#}");
    failure(
        &headline("error", &message, &[], hint),
        &Failure {
            status: "error",
            exit_code: exit::USAGE,
            script_exit_code: None,
            description: "the run could not start",
            error: json!({ "message": message, "hint": hint }),
            denied: &[],
            insist_missing: &[],
            stderr: "",
            run_id: None,
            secret_warnings: &[],
        },
    )
}

/// band's typed error object, the second text block of every error result; its fields in this
/// order.
#[derive(Debug, Serialize)]
struct Failure<'a> {
    /// The run's status (`denied`, `input_invalid`, …), or `error` when it could not start.
    status: &'a str,
    /// band's exit code for it, as `band run` exits.
    exit_code: u8,
    /// The script's own exit code, when it ran.
    script_exit_code: Option<i32>,
    description: &'a str,
    /// `message`, `hint` and, for a run, the sandbox `layer`; `null` when the status says it all.
    error: Value,
    denied: &'a [Denial],
    insist_missing: &'a [String],
    /// The end of the script's stderr ([`MAX_ERROR_STDERR`]).
    stderr: &'a str,
    run_id: Option<&'a str>,
    secret_warnings: &'a [String],
}

/// An error result: the headline, then band's typed error object as JSON; no structured content.
fn failure(headline: &str, typed: &Failure) -> CallToolResult {
    let text = serde_json::to_string_pretty(typed)
        .unwrap_or_else(|e| json!({"status": "error", "message": e.to_string()}).to_string());
    CallToolResult::error(vec![ContentBlock::text(headline), ContentBlock::text(text)])
}

/// `status: message (details)`, then `hint: …` on a line of its own.
fn headline(status: &str, message: &str, details: &[String], hint: Option<&str>) -> String {
    let mut line = format!("{status}: {message}");
    if !details.is_empty() {
        line = format!("{line} ({})", details.join("; "));
    }
    if let Some(h) = hint {
        line = format!("{line}\nhint: {h}");
    }
    line
}

/// The last `max` bytes of `s`, cut at a character boundary.
fn tail(s: &str, max: usize) -> &str {
    let mut cut = s.len().saturating_sub(max);
    while !s.is_char_boundary(cut) {
        cut += 1;
    }
    &s[cut..]
}

/// The allowed commands the run went without, as a note names them.
fn missing(r: &band::proto::RunResult) -> String {
    let names: Vec<String> = r.missing_commands.iter().map(|m| m.describe()).collect();
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use band::proto::{Layer, RunResult};

    fn outcome(result: RunResult) -> Outcome {
        Outcome {
            result,
            skill: "s".into(),
            script: "x".into(),
            target: band::manifest::Target::Host,
            bundle_sha256: String::new(),
            band_sha256: String::new(),
            policy_sha256: String::new(),
            input_bytes: 0,
            input_sha256: String::new(),
            output_bytes: 0,
            output_sha256: String::new(),
            started_at_ms: 0,
            lock: band::ledger::LockMark::Unlocked,
            integrity: Vec::new(),
            input: serde_json::Value::Null,
            redact: Default::default(),
            secret_warnings: Vec::new(),
            not_admitted: Vec::new(),
            not_writable: Vec::new(),
            without_exec: Vec::new(),
            links_left_out: Default::default(),
        }
    }

    fn texts(r: &CallToolResult) -> Vec<String> {
        r.content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect()
    }

    /// An error result: no structured content (a client would check it against the success
    /// schema), the headline, and the typed object as the second text block.
    fn typed(r: &CallToolResult) -> (String, Value) {
        assert_eq!(r.is_error, Some(true));
        assert_eq!(r.structured_content, None);
        let t = texts(r);
        assert_eq!(t.len(), 2, "{t:?}");
        (t[0].clone(), serde_json::from_str(&t[1]).unwrap())
    }

    fn denied() -> RunResult {
        let mut denied = RunResult::setup_failed("0011223344556677", Layer::Cli, "", None);
        denied.status = Status::Denied;
        denied.error = None;
        denied.exit_code = Some(126);
        denied.denied = vec![Denial::Cli {
            argv: vec!["curl".into(), "x".into()],
            rule: None,
            source: None,
        }];
        denied.stderr = format!("{}band: denied: curl x\n", "é".repeat(5000));
        denied
    }

    #[test]
    fn success_is_structured_content() {
        let mut ok = RunResult::setup_failed("0011223344556677", Layer::Io, "", None);
        ok.status = Status::Ok;
        ok.error = None;
        ok.output = Some(json!({"words": 2}));
        let r = call_result(&outcome(ok), None);
        assert_eq!(r.is_error, Some(false));
        assert_eq!(r.structured_content, Some(json!({"words": 2})));
    }

    /// The agent is told what reached the workspace: the files, then the empty folders the run
    /// made, each with a trailing `/`.
    #[test]
    fn the_files_and_empty_folders_written_are_named() {
        let mut ok = RunResult::setup_failed("0011223344556677", Layer::Io, "", None);
        ok.status = Status::Ok;
        ok.error = None;
        ok.output = Some(json!({"ok": true}));
        ok.written_folders = vec!["projects/demo/audio".into(), "projects/demo/video".into()];
        let r = call_result(&outcome(ok.clone()), None);
        assert_eq!(
            texts(&r)[1..],
            ["written to the workspace: projects/demo/audio/, projects/demo/video/"]
        );
        ok.written = vec![band::proto::FileEntry {
            path: "projects/demo/notes.md".into(),
            mode: 0o644,
            data: String::new(),
        }];
        let r = call_result(&outcome(ok), None);
        assert_eq!(
            texts(&r)[1..],
            [
                "written to the workspace: projects/demo/notes.md, projects/demo/audio/, projects/demo/video/"
            ]
        );
    }

    #[test]
    fn output_media_are_content_blocks_of_their_kind() {
        let schema = json!({"type": "object", "properties": {
            "png": {"type": "string", "contentEncoding": "base64", "contentMediaType": "image/png"},
            "wav": {"type": "string", "contentEncoding": "base64", "contentMediaType": "audio/wav"},
            "doc": {"type": "string", "contentMediaType": "application/json"},
            "plain": {"type": "string"}
        }});
        let mut ok = RunResult::setup_failed("0011223344556677", Layer::Io, "", None);
        ok.status = Status::Ok;
        ok.error = None;
        ok.output = Some(json!({"png": "iVBO", "wav": "UklG", "doc": "{}", "plain": "x"}));
        let r = call_result(&outcome(ok), schema.as_object());
        let blocks: Vec<Value> = r.content.iter().map(|c| json!(c)).collect();
        assert_eq!(blocks.len(), 4, "{blocks:?}");
        assert_eq!(blocks[0]["type"], "text");
        let kinds: Vec<&str> = blocks[1..]
            .iter()
            .map(|b| b["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            ["resource", "image", "audio"],
            "in the output's order: {blocks:?}"
        );
        assert_eq!(blocks[2]["mimeType"], "image/png");
        assert_eq!(blocks[2]["data"], "iVBO");
        assert_eq!(
            blocks[1]["resource"],
            json!({"uri": "band://runs/0011223344556677/output/doc", "mimeType": "application/json", "text": "{}"})
        );
    }

    #[test]
    fn errors_carry_the_typed_status_as_text_not_structured_content() {
        let (headline, s) = typed(&call_result(&outcome(denied()), None));
        assert_eq!(
            headline,
            "denied: the script failed after the policy denied a command, host or path \
             (denied: command curl x (cli layer: no allow.cli rule matches; to allow it: allow.cli \"curl x\"))"
        );
        assert_eq!(
            (
                s["status"].clone(),
                s["exit_code"].clone(),
                s["script_exit_code"].clone(),
                s["run_id"].clone()
            ),
            (
                json!("denied"),
                json!(5),
                json!(126),
                json!("0011223344556677")
            )
        );
        assert_eq!(s["denied"][0]["argv"], json!(["curl", "x"]));
        let tail = s["stderr"].as_str().unwrap();
        assert!(
            tail.len() <= MAX_ERROR_STDERR && tail.ends_with("band: denied: curl x\n"),
            "{}",
            tail.len()
        );

        let mut failed = denied();
        failed.status = Status::ScriptFailed;
        failed.denied.clear();
        failed.exit_code = Some(3);
        failed.stderr = "one\nno such file: data/x.csv\n\n".into();
        let (headline, s) = typed(&call_result(&outcome(failed), None));
        assert_eq!(
            headline,
            "script_failed: the script exited non-zero; its last line on stderr: no such file: \
             data/x.csv"
        );
        assert_eq!(
            (s["exit_code"].clone(), s["script_exit_code"].clone()),
            (json!(1), json!(3))
        );

        let mut invalid = RunResult::setup_failed(
            "0011223344556677",
            Layer::Io,
            "input: /text: 5 is not of type \"string\"",
            Some("see `band run text/count --help`".into()),
        );
        invalid.status = Status::InputInvalid;
        let (headline, s) = typed(&call_result(&outcome(invalid), None));
        assert_eq!(
            headline,
            "input_invalid: input: /text: 5 is not of type \"string\"\n\
             hint: see `band run text/count --help`"
        );
        assert_eq!(s["script_exit_code"], Value::Null);
        assert_eq!(s["error"]["hint"], "see `band run text/count --help`");
    }

    #[test]
    fn a_run_that_could_not_start_has_the_same_shape() {
        let err = crate::cli::user_error("missing required secret: GITHUB_TOKEN", "export it");
        let (headline, s) = typed(&error_result(&err));
        assert_eq!(
            headline,
            "error: missing required secret: GITHUB_TOKEN\nhint: export it"
        );
        let (_, denied) = typed(&call_result(&outcome(denied()), None));
        let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&s), keys(&denied));
        assert_eq!(
            (
                s["status"].clone(),
                s["exit_code"].clone(),
                s["error"]["hint"].clone()
            ),
            (json!("error"), json!(2), json!("export it"))
        );
    }

    #[test]
    fn results_carry_the_secret_warnings() {
        let warning =
            "the output contains the secret TOKEN (band masks secrets in logs, not in output)";
        let mut ok = RunResult::setup_failed("0011223344556677", Layer::Io, "", None);
        ok.status = Status::Ok;
        ok.error = None;
        ok.output = Some(json!({"t": "value"}));
        let mut o = outcome(ok);
        o.secret_warnings = vec![warning.into()];
        let r = call_result(&o, None);
        assert!(
            texts(&r).contains(&format!("band: warning: {warning}")),
            "{:?}",
            r.content
        );
        o.result.status = Status::ScriptFailed;
        let (_, s) = typed(&call_result(&o, None));
        assert_eq!(s["secret_warnings"], json!([warning]));
    }

    #[test]
    fn results_say_what_the_band_hid_that_the_script_named() {
        let mut ok = RunResult::setup_failed("0011223344556677", Layer::Io, "", None);
        ok.status = Status::Ok;
        ok.error = None;
        ok.output = Some(json!("libs: skipped"));
        let mut o = outcome(ok);
        o.not_admitted = vec![band::client::unadmitted::NotAdmitted {
            path: "libs".into(),
            rule: "libs/**".into(),
        }];
        let r = call_result(&o, None);
        assert!(
            texts(&r)
                .iter()
                .any(|t| t.starts_with("band: note: `libs` is in the workspace")
                    && t.ends_with("allow.read \"libs/**\"")),
            "{:?}",
            r.content
        );
        o.result.status = Status::ScriptFailed;
        let (head, _) = typed(&call_result(&o, None));
        assert!(
            head.contains(
                "in the workspace but not admitted by the band: `libs` (allow.read \"libs/**\")"
            ),
            "{head}"
        );
    }

    #[test]
    fn a_failed_result_names_what_the_filesystem_refused_it_writing() {
        let mut failed = RunResult::setup_failed("0011223344556677", Layer::Io, "", None);
        failed.status = Status::ScriptFailed;
        failed.error = None;
        failed.exit_code = Some(1);
        let mut o = outcome(failed);
        o.not_writable = vec![band::client::unwritable::NotWritable {
            path: "beta".into(),
            rule: "beta/**".into(),
        }];
        let (head, _) = typed(&call_result(&o, None));
        assert!(
            head.contains(
                "refused writing by the filesystem, as the band does not admit it: `beta` (allow.write \"beta/**\")"
            ),
            "{head}"
        );
    }

    #[test]
    fn results_name_the_allowed_commands_the_host_lacked() {
        let mut ok = RunResult::setup_failed("0011223344556677", Layer::Io, "", None);
        ok.status = Status::Ok;
        ok.error = None;
        ok.output = Some(json!("using the fallback"));
        ok.missing_commands = vec![band::proto::MissingCommand {
            name: "gh".into(),
            rules: vec!["gh pr *".into(), "gh api *".into()],
        }];
        let mut o = outcome(ok);
        let r = call_result(&o, None);
        assert!(
            texts(&r).iter().any(|t| t
                == "band: note: not installed where band-server runs, so the run went without: `gh` (allow.cli `gh pr *`, `gh api *`)"),
            "{:?}",
            r.content
        );
        o.result.status = Status::ScriptFailed;
        let (head, _) = typed(&call_result(&o, None));
        assert!(
            head.contains("so the run went without: `gh` (allow.cli `gh pr *`, `gh api *`)"),
            "{head}"
        );
    }

    #[test]
    fn a_run_that_timed_out_serving_a_port_says_why_it_waited() {
        let mut r = RunResult::setup_failed("0011223344556677", Layer::Process, "", None);
        r.status = Status::Timeout;
        r.error = None;
        r.exit_code = Some(137);
        r.listening = vec!["127.0.0.1:8765".into()];
        let (head, s) = typed(&call_result(&outcome(r.clone()), None));
        assert_eq!(
            head,
            "timeout: the run exceeded maxRuntimeMs and was killed\nhint: the script was still listening on 127.0.0.1:8765 when it timed out; a run takes no inbound connections, so nothing outside the run can reach a server a skill starts (docs/network.md, \"A server inside a run\")"
        );
        // The typed object keeps its one shape.
        let (_, denied) = typed(&call_result(&outcome(denied()), None));
        let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&s), keys(&denied));
        // Nothing listening: no hint.
        r.listening.clear();
        let (head, _) = typed(&call_result(&outcome(r), None));
        assert_eq!(
            head,
            "timeout: the run exceeded maxRuntimeMs and was killed"
        );
    }
}
