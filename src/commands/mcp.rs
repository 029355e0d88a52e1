//! `band mcp`: a Model Context Protocol server over stdio, built on the official Rust SDK (`rmcp`).
//!
//! Every script of every skill on the skills path is one tool, named `<skill>__<script>`:
//!
//! - description: the skill's SKILL.md description, then the input schema's description;
//! - `inputSchema` / `outputSchema`: the script's contracts, bundled into self-contained
//!   documents ([`band::contract::SchemaSet::bundle`]) because a client cannot read the skill's
//!   other schema files;
//! - annotations: read-only when the band allows no writes and no network, open-world when it
//!   allows network.
//!
//! A call runs [`pipeline::run`], the path every `band run` takes (input contract, secrets,
//! sandbox, output contract, write-back), on the `--workspace` folder. Success returns the output
//! as structured content; any other status is an error result whose structured content carries
//! the typed status (`input_invalid`, `denied`, `timeout`, …) and its exit code. When the client
//! sends a progress token, each event of the run (sandbox ready, each command, each refusal, each
//! line on stderr) becomes a progress notification.
//!
//! A call the client cancels (`notifications/cancelled`) is cancelled: band-server kills the run
//! and it is recorded as `cancelled`. When the client disconnects (stdin ends), every run under
//! way is cancelled the same way, at once.
//!
//! stdout carries the protocol and nothing else.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context as TaskContext, Poll};

use anyhow::{Context, Result};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

use super::skills::skill_dirs;
use crate::cli::mcp::McpArgs;
use crate::cli::{hint_of, trace};
use band::client::pipeline::{self, Cancel, Outcome, RunSpec};
use band::proto::{Event, Status, exit};

/// Separates skill and script in a tool name. Skill and script names are kebab-case, so it never
/// occurs inside either.
pub(super) const TOOL_SEPARATOR: &str = "__";
/// The most stderr an error result carries (its end).
const MAX_ERROR_STDERR: usize = 4096;

/// One tool and where its script lives.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub tool: Tool,
    pub skill_root: PathBuf,
    pub script: String,
}

pub(crate) fn tool_name(skill: &str, script: &str) -> String {
    format!("{skill}{TOOL_SEPARATOR}{script}")
}

/// Tools for every script of every skill found in `dirs` (the first skill of a name wins, as in
/// `band list`). A script whose band or input schema does not load is left out; the second value
/// says why, one line each.
pub(crate) fn catalog(dirs: &[PathBuf]) -> (Vec<Entry>, Vec<String>) {
    let mut skills = BTreeMap::new();
    for d in dirs {
        for root in band::skill::find_skills(d) {
            let (skill, _) = band::skill::load_skill(&root);
            skills.entry(skill.name.clone()).or_insert(skill);
        }
    }
    let mut entries = Vec::new();
    let mut skipped = Vec::new();
    for skill in skills.values() {
        for script in &skill.scripts {
            match tool_for(skill, &script.name) {
                Ok(tool) => entries.push(Entry {
                    tool,
                    skill_root: skill.root.clone(),
                    script: script.name.clone(),
                }),
                Err(why) => skipped.push(format!(
                    "{}/{}: {why}; run `band lint {}`",
                    skill.name,
                    script.name,
                    skill.root.display()
                )),
            }
        }
    }
    (entries, skipped)
}

/// Why a script is not served as a tool.
#[derive(Debug, thiserror::Error)]
enum NotATool {
    #[error("its band has errors")]
    BandErrors,
    #[error("input schema: {0}")]
    InputSchema(String),
    #[error("its input schema does not describe an object")]
    NotAnObject,
}

/// The MCP description of one script.
fn tool_for(skill: &band::skill::Skill, script: &str) -> std::result::Result<Tool, NotATool> {
    let (resolved, _) = band::skill::resolve_script(skill, script);
    let policy = resolved.ok_or(NotATool::BandErrors)?.policy;
    let (schemas, _) = band::contract::SchemaSet::load_dir(&skill.root);
    let input_rel = format!("schemas/input/{script}.json");
    schemas
        .compile(&input_rel)
        .map_err(|e| NotATool::InputSchema(e.to_string()))?;
    let input = schemas
        .bundle(&input_rel)
        .and_then(object_schema)
        .ok_or(NotATool::NotAnObject)?;
    let mut description = skill
        .skill_md
        .as_ref()
        .map(|m| m.description.clone())
        .unwrap_or_default();
    if let Some(d) = input.get("description").and_then(Value::as_str) {
        description = format!("{description}\n\n{script}: {d}");
    }
    let name = tool_name(&skill.name, script);
    let no_effects = policy.allow.write.is_empty()
        && policy.insist.write.is_empty()
        && policy.allow.net.is_empty();
    let annotations = ToolAnnotations::with_title(format!("{}/{script}", skill.name))
        .read_only(no_effects)
        .open_world(!policy.allow.net.is_empty());
    let mut tool = Tool::new(name, description.trim().to_string(), Arc::new(input))
        .with_annotations(annotations);
    let output_rel = format!("schemas/output/{script}.json");
    if schemas.compile(&output_rel).is_ok()
        && let Some(output) = schemas.bundle(&output_rel).and_then(object_schema)
    {
        tool = tool.with_raw_output_schema(Arc::new(output));
    }
    Ok(tool)
}

/// A bundled schema as an MCP object schema: `"type": "object"` is added when the root names no
/// type (MCP tool arguments and structured results are objects); a root of another type is not
/// one.
fn object_schema(schema: Value) -> Option<JsonObject> {
    let Value::Object(mut o) = schema else {
        return None;
    };
    match o.get("type") {
        None => {
            o.insert("type".into(), "object".into());
            Some(o)
        }
        Some(Value::String(t)) if t == "object" => Some(o),
        Some(_) => None,
    }
}

/// The tool result of a finished (or refused) run.
pub(crate) fn call_result(outcome: &Outcome) -> CallToolResult {
    let r = &outcome.result;
    if r.status == Status::Ok {
        let mut result = match &r.output {
            Some(v @ Value::Object(_)) => CallToolResult::structured(v.clone()),
            Some(Value::String(s)) => CallToolResult::success(vec![ContentBlock::text(s.clone())]),
            Some(v) => CallToolResult::success(vec![ContentBlock::text(v.to_string())]),
            None => CallToolResult::success(vec![ContentBlock::text(r.stdout.clone())]),
        };
        if !r.written.is_empty() {
            let files: Vec<&str> = r.written.iter().map(|f| f.path.as_str()).collect();
            result.content.push(ContentBlock::text(format!(
                "written to the workspace: {}",
                files.join(", ")
            )));
        }
        for w in &outcome.secret_warnings {
            result
                .content
                .push(ContentBlock::text(format!("band: warning: {w}")));
        }
        return result;
    }
    let stderr_tail = {
        let s = r.stderr.as_str();
        let mut cut = s.len().saturating_sub(MAX_ERROR_STDERR);
        while !s.is_char_boundary(cut) {
            cut += 1;
        }
        &s[cut..]
    };
    CallToolResult::structured_error(json!({
        "status": r.status.as_str(),
        "exit_code": r.status.exit_code(),
        "description": r.status.describe(),
        "error": r.error,
        "script_exit_code": r.exit_code,
        "denied": r.denied,
        "insist_missing": r.insist_missing,
        "stderr": stderr_tail,
        "run_id": r.run_id,
        "secret_warnings": outcome.secret_warnings,
    }))
}

/// The tool result of a run that could not start (unknown script, broken band, missing secret,
/// no band-server): status `error`, exit code 2, as `band run` would exit.
pub(crate) fn error_result(err: &anyhow::Error) -> CallToolResult {
    let hint = err.chain().find_map(hint_of).map(String::from);
    CallToolResult::structured_error(json!({
        "status": "error",
        "exit_code": exit::USAGE,
        "description": "the run could not start",
        "error": { "message": format!("{err:#}"), "hint": hint },
    }))
}

/// A progress message for an event of the run, if it is worth one.
pub(crate) fn progress_message(ev: &Event) -> Option<String> {
    let text = match ev {
        Event::Started { setup_ms, .. } => format!("sandbox ready ({setup_ms} ms); script started"),
        Event::Cli(c) => format!(
            "{} {}",
            if c.allowed { "ran" } else { "denied" },
            trace::display_argv(&c.argv)
        ),
        Event::Denied(band::proto::Denial::Cli { .. }) => return None, // already said by its Event::Cli
        Event::Denied(d) => format!("denied {}", trace::describe(d)),
        Event::Limit { limit, detail } => format!("limit {limit}: {detail}"),
        Event::Stderr { data } => data.trim_end().lines().last()?.to_string(),
        Event::Stdout { .. } => return None,
    };
    Some(text.chars().take(300).collect())
}

/// The runs under way, to cancel when the client disconnects.
#[derive(Debug, Default)]
pub(super) struct Inflight {
    /// The client's input ended: every run, and any that starts later, is cancelled.
    gone: bool,
    runs: Vec<Cancel>,
}

pub(super) type Runs = Arc<Mutex<Inflight>>;

/// A token for a new run, cancelled at once if the client is already gone.
fn register(runs: &Runs) -> Cancel {
    let c = Cancel::new();
    if let Ok(mut r) = runs.lock() {
        if r.gone {
            c.cancel();
        }
        r.runs.push(c.clone());
    }
    c
}

fn unregister(runs: &Runs, c: &Cancel) {
    if let Ok(mut r) = runs.lock() {
        r.runs.retain(|x| !x.same_as(c));
    }
}

/// The client disconnected: cancel every run under way.
fn cancel_all(runs: &Runs) {
    if let Ok(mut r) = runs.lock() {
        r.gone = true;
        for c in &r.runs {
            c.cancel();
        }
    }
}

/// The server's stdin, telling `on_eof` when it ends (the client is gone). The SDK notices too,
/// but waits for running calls before it cancels them; runs must stop within a second.
pub(super) struct EofWatch<R> {
    inner: R,
    on_eof: Option<Box<dyn FnOnce() + Send>>,
}

impl<R: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for EofWatch<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let wants = buf.remaining() > 0;
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let ended = match &polled {
            Poll::Ready(Ok(())) => wants && buf.filled().len() == before,
            Poll::Ready(Err(_)) => true,
            Poll::Pending => false,
        };
        if ended && let Some(f) = self.on_eof.take() {
            f();
        }
        polled
    }
}

/// The server: its tools (rebuilt on every `tools/list`), where skills are found, the workspace.
pub(super) struct BandServer {
    dirs: Vec<PathBuf>,
    workspace: PathBuf,
    /// `--allow-system-workspace`.
    pub(super) allow_system_workspace: bool,
    tools: RwLock<BTreeMap<String, Entry>>,
    runs: Runs,
}

impl BandServer {
    pub(super) fn new(dirs: Vec<PathBuf>, workspace: PathBuf) -> Self {
        let server = BandServer {
            dirs,
            workspace,
            allow_system_workspace: false,
            tools: RwLock::new(BTreeMap::new()),
            runs: Runs::default(),
        };
        server.refresh();
        server
    }

    /// Scan the skills path again; report skipped scripts on stderr.
    fn refresh(&self) -> Vec<Tool> {
        let (entries, skipped) = catalog(&self.dirs);
        for s in skipped {
            eprintln!("band mcp: not offered: {s}");
        }
        let tools = entries.iter().map(|e| e.tool.clone()).collect();
        if let Ok(mut map) = self.tools.write() {
            *map = entries
                .into_iter()
                .map(|e| (e.tool.name.to_string(), e))
                .collect();
        }
        tools
    }
}

impl ServerHandler for BandServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("band", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Each tool runs one script of a skill in band's sandbox, which denies everything the skill's band has not \
                 declared. Arguments are checked against the tool's input schema before anything runs. A failed call is \
                 an error result whose structured content has `status` (input_invalid, output_invalid, denied, \
                 insist_unsatisfied, timeout, memory_limit, …), `error` and the end of the script's stderr.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.refresh()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.read().ok()?.get(name).map(|e| e.tool.clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let entry = self
            .tools
            .read()
            .ok()
            .and_then(|t| t.get(request.name.as_ref()).cloned());
        let Some(entry) = entry else {
            return Err(McpError::invalid_params(
                format!("no tool named `{}`; tools/list shows them", request.name),
                None,
            ));
        };
        let spec = RunSpec {
            skill_root: entry.skill_root,
            script: entry.script,
            raw_input: Value::Object(request.arguments.unwrap_or_default()),
            workspace: self.workspace.clone(),
            allow_system_workspace: self.allow_system_workspace,
            target: None,
            trace: false,
            // `require_lock` in the user config applies; the ledger keeps hashes, not contents.
            require_lock: false,
            record_io: false,
        };
        let token = request
            .meta
            .as_ref()
            .and_then(|m| m.get_progress_token())
            .or_else(|| context.meta.get_progress_token());
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
        // `notifications/cancelled` for this call, or the client going away, cancels the run.
        let cancel = register(&self.runs);
        let on_cancel = {
            let (ct, cancel) = (context.ct.clone(), cancel.clone());
            tokio::spawn(async move {
                ct.cancelled().await;
                cancel.cancel();
            })
        };
        let run = {
            let cancel = cancel.clone();
            tokio::task::spawn_blocking(move || {
                pipeline::run_cancellable(&spec, &mut |ev| drop(tx.send(ev.clone())), &cancel)
            })
        };
        // The channel closes when the run is over (its sender is dropped with the closure).
        let mut step = 0.0;
        while let Some(ev) = rx.recv().await {
            if let (Some(token), Some(message)) = (&token, progress_message(&ev)) {
                step += 1.0;
                let _ = context
                    .peer
                    .notify_progress(
                        ProgressNotificationParam::new(token.clone(), step).with_message(message),
                    )
                    .await;
            }
        }
        let joined = run.await;
        on_cancel.abort();
        unregister(&self.runs, &cancel);
        let result = match joined {
            Ok(Ok(outcome)) => call_result(&outcome),
            Ok(Err(err)) => error_result(&err.into()),
            Err(join) => error_result(&anyhow::anyhow!("the run panicked: {join}")),
        };
        Ok(result.into())
    }
}

pub(crate) fn cmd_mcp(args: McpArgs) -> Result<u8> {
    let workspace = args.workspace.unwrap_or_else(|| PathBuf::from("."));
    let mut server = BandServer::new(skill_dirs(&args.skills), workspace);
    server.allow_system_workspace = args.allow_system_workspace;
    let runs = server.runs.clone();
    let (stdin, stdout) = rmcp::transport::io::stdio();
    let stdin = EofWatch {
        inner: stdin,
        on_eof: Some(Box::new(move || cancel_all(&runs))),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let service = server
            .serve((stdin, stdout))
            .await
            .context("MCP initialisation failed")?;
        service.waiting().await.context("the MCP server stopped")?;
        anyhow::Ok(())
    })?;
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use band::proto::{Denial, Layer, RunResult};

    fn repo_skills() -> Vec<PathBuf> {
        vec![PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("skills")]
    }

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
        }
    }

    #[test]
    fn every_script_of_the_repository_skills_is_a_tool() {
        let (entries, skipped) = catalog(&repo_skills());
        assert!(skipped.is_empty(), "{skipped:?}");
        let names: Vec<String> = entries.iter().map(|e| e.tool.name.to_string()).collect();
        for name in [
            "text__count",
            "text__summary",
            "csv-stats__report",
            "github__issue-create",
            "json-transform__apply",
        ] {
            assert!(names.contains(&name.to_string()), "{name} in {names:?}");
        }
        let get = |n: &str| {
            entries
                .iter()
                .find(|e| e.tool.name == n)
                .map(|e| e.tool.clone())
                .unwrap()
        };
        let count = get("text__count");
        assert!(
            count
                .description
                .as_deref()
                .unwrap_or("")
                .starts_with("Count the words"),
            "{:?}",
            count.description
        );
        assert_eq!(count.input_schema["required"], json!(["text"]));
        assert_eq!(
            count.annotations.as_ref().and_then(|a| a.read_only_hint),
            Some(true)
        );
        let create = get("github__issue-create");
        assert_eq!(
            create.annotations.as_ref().and_then(|a| a.open_world_hint),
            Some(true)
        );
        assert_eq!(
            create.annotations.as_ref().and_then(|a| a.read_only_hint),
            Some(false)
        );
        assert_eq!(
            get("csv-stats__report")
                .annotations
                .as_ref()
                .and_then(|a| a.read_only_hint),
            Some(false)
        );
    }

    #[test]
    fn tool_schemas_are_self_contained() {
        let (entries, _) = catalog(&repo_skills());
        for e in &entries {
            let input = Value::Object((*e.tool.input_schema).clone());
            assert_eq!(input["type"], "object", "{}", e.tool.name);
            let compiled = jsonschema::validator_for(&input);
            assert!(compiled.is_ok(), "{}: {:?}", e.tool.name, compiled.err());
            if let Some(out) = &e.tool.output_schema {
                let out = Value::Object((**out).clone());
                assert!(
                    jsonschema::validator_for(&out).is_ok(),
                    "{} output",
                    e.tool.name
                );
            }
        }
        // A $ref'd input schema (github) still checks what the contract checks.
        let list = entries
            .iter()
            .find(|e| e.tool.name == "github__issue-list")
            .unwrap();
        let v =
            jsonschema::validator_for(&Value::Object((*list.tool.input_schema).clone())).unwrap();
        assert!(v.is_valid(&json!({"repo": "octo/demo", "limit": 5})));
        assert!(!v.is_valid(&json!({"repo": "not a repo"})));
        assert!(!v.is_valid(&json!({"repo": "octo/demo", "limit": 500})));
    }

    #[test]
    fn results_carry_output_or_the_typed_status() {
        let mut ok = RunResult::setup_failed("0011223344556677", Layer::Io, "", None);
        ok.status = Status::Ok;
        ok.error = None;
        ok.output = Some(json!({"words": 2}));
        let r = call_result(&outcome(ok));
        assert_eq!(r.is_error, Some(false));
        assert_eq!(r.structured_content, Some(json!({"words": 2})));

        let mut denied = RunResult::setup_failed("0011223344556677", Layer::Cli, "", None);
        denied.status = Status::Denied;
        denied.error = None;
        denied.exit_code = Some(126);
        denied.denied = vec![Denial::Cli {
            argv: vec!["curl".into(), "x".into()],
            rule: None,
        }];
        denied.stderr = format!("{}band: denied: curl x\n", "é".repeat(5000));
        let r = call_result(&outcome(denied));
        assert_eq!(r.is_error, Some(true));
        let s = r.structured_content.unwrap();
        assert_eq!(
            (
                s["status"].clone(),
                s["exit_code"].clone(),
                s["script_exit_code"].clone()
            ),
            (json!("denied"), json!(5), json!(126))
        );
        assert_eq!(s["denied"][0]["argv"], json!(["curl", "x"]));
        let tail = s["stderr"].as_str().unwrap();
        assert!(
            tail.len() <= MAX_ERROR_STDERR && tail.ends_with("band: denied: curl x\n"),
            "{}",
            tail.len()
        );

        let err = crate::cli::user_error("missing required secret: GITHUB_TOKEN", "export it");
        let s = error_result(&err).structured_content.unwrap();
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
        let r = call_result(&o);
        assert!(
            r.content.iter().any(|c| c
                .as_text()
                .is_some_and(|t| t.text == format!("band: warning: {warning}"))),
            "{:?}",
            r.content
        );
        o.result.status = Status::ScriptFailed;
        let s = call_result(&o).structured_content.unwrap();
        assert_eq!(s["secret_warnings"], json!([warning]));
    }

    #[test]
    fn progress_messages_name_what_happened() {
        let call = band::proto::CliCall {
            argv: vec!["jq".into(), "a b".into()],
            allowed: true,
            rule: None,
        };
        assert_eq!(
            progress_message(&Event::Cli(call)).as_deref(),
            Some("ran jq 'a b'")
        );
        assert_eq!(
            progress_message(&Event::Stderr {
                data: "one\ntwo\n".into()
            })
            .as_deref(),
            Some("two")
        );
        assert_eq!(progress_message(&Event::Stdout { data: "x".into() }), None);
        let net = Denial::Net {
            host: "example.com".into(),
            port: Some(443),
            rule: None,
        };
        assert_eq!(
            progress_message(&Event::Denied(net)).as_deref(),
            Some("denied host example.com:443")
        );
        assert_eq!(
            progress_message(&Event::Started {
                run_id: "r".into(),
                setup_ms: 12
            })
            .as_deref(),
            Some("sandbox ready (12 ms); script started")
        );
    }
}
