//! `band mcp`: a Model Context Protocol server over stdio, built on the official Rust SDK (`rmcp`).
//!
//! What it offers ([`catalog`]), scanned again on every `tools/list` and `resources/list`:
//!
//! - a tool per script of every skill on the skills path, named `<skill>__<script>`, described
//!   by its input schema's `description` (not the skill's, which is in the skill's resource);
//!   `inputSchema` / `outputSchema` are the script's contracts, bundled into self-contained
//!   documents ([`band::contract::SchemaSet::bundle`]) because a client cannot read the skill's
//!   other schema files; annotations come from the policy ([`catalog::annotations`]);
//! - a resource per skill, `skill://<skill>/SKILL.md`: the skill's SKILL.md as written, and the
//!   Skills extension ([`skills`]): each skill's files, `skills/list`, `skills/get`;
//! - the scripts left out (a band with errors, an input schema that does not load or is not an
//!   object) with why: on stderr, in the server's instructions, and as the resource
//!   `band://not-offered`.
//!
//! A call runs [`pipeline::run`], the path every `band run` takes (input contract, secrets,
//! sandbox, output contract, write-back), on the `--workspace` folder. Success returns the output
//! as structured content; any other status is an error result with no structured content and
//! band's typed error object as JSON text ([`result`]). When the client sends a progress token,
//! each event of the run (sandbox ready, each command, each refusal, each line on stderr) becomes
//! a progress notification.
//!
//! A call the client cancels (`notifications/cancelled`) is cancelled: band-server kills the run
//! and it is recorded as `cancelled`. When the client disconnects (stdin ends), every run under
//! way is cancelled the same way, at once.
//!
//! stdout carries the protocol and nothing else.

mod catalog;
mod http;
#[cfg(target_os = "linux")]
mod peer;
mod result;
mod skills;

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context as TaskContext, Poll};

use anyhow::{Context, Result};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestMethod, CompleteRequestParams,
    CompleteResult, GetSkillRequestParams, GetSkillResult, Implementation,
    ListPromptsRequestMethod, ListPromptsResult, ListResourcesResult, ListSkillsResult,
    ListToolsResult, MetaObject, PaginatedRequestParams, ProgressNotificationParam,
    ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, ResourceContents, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;

use super::skills::skill_dirs;
use crate::cli::mcp::McpArgs;
use crate::cli::trace;
use band::client::pipeline::{self, Cancel, RunSpec};
use band::proto::{Event, exit};
use catalog::{Catalog, catalog};
use result::{call_result, error_result};

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

/// The server: what it offers (scanned again on every `tools/list` and `resources/list`), where
/// skills are found, the workspace.
pub(super) struct BandServer {
    dirs: Vec<PathBuf>,
    workspace: PathBuf,
    /// `--allow-system-workspace`.
    pub(super) allow_system_workspace: bool,
    /// `--target`: every call's, at the top of the precedence.
    pub(super) target: Option<String>,
    /// `--script-tool-names`: a tool is named by its script alone.
    script_tool_names: bool,
    catalog: RwLock<Catalog>,
    runs: Runs,
}

impl BandServer {
    pub(super) fn new(dirs: Vec<PathBuf>, workspace: PathBuf, script_tool_names: bool) -> Self {
        let server = BandServer {
            dirs,
            workspace,
            allow_system_workspace: false,
            target: None,
            script_tool_names,
            catalog: RwLock::new(Catalog::default()),
            runs: Runs::default(),
        };
        server.refresh();
        server
    }

    /// Scan the skills path again. The scripts left out are said on stderr, at startup and
    /// whenever that list changes.
    fn refresh(&self) -> Catalog {
        let mut fresh = catalog(&self.dirs);
        if self.script_tool_names {
            catalog::name_by_script(&mut fresh);
        }
        if let Ok(mut current) = self.catalog.write() {
            let first = current.tools.is_empty() && current.skills.is_empty();
            if first || current.skipped != fresh.skipped {
                for s in &fresh.skipped {
                    eprintln!("band mcp: not offered: {s}");
                }
            }
            if first || current.not_served != fresh.not_served {
                for s in &fresh.not_served {
                    eprintln!("band mcp: not served as a skill: {s}");
                }
            }
            *current = fresh.clone();
        }
        fresh
    }

    fn current(&self) -> Catalog {
        self.catalog.read().map(|c| c.clone()).unwrap_or_default()
    }
}

/// The server's instructions: how tools, results and resources work, and the scripts left out.
pub(crate) fn instructions(c: &Catalog) -> String {
    let mut text = String::from(
        "Each tool runs one script of a skill in band's sandbox, which denies everything the skill's \
         band has not declared. Arguments are checked against the tool's input schema before anything \
         runs. A successful call returns the script's output as structured content. A failed call is \
         an error result (isError) with two text blocks: a line saying what happened (`denied: …`, \
         `input_invalid: …`, then `hint: …`), and a JSON object with `status` (input_invalid, \
         output_invalid, denied, insist_unsatisfied, timeout, memory_limit, cancelled, …; `error` when \
         the run could not start), `exit_code` (band's), `script_exit_code` (the script's), `error` \
         (message, hint), `denied`, `insist_missing`, the end of the script's `stderr` and `run_id`. \
         Each skill's SKILL.md, which says what the skill is for and how to use its scripts, is the \
         resource skill://<skill>/SKILL.md (skills/list gives every file of each skill, with its digest).",
    );
    if !c.skipped.is_empty() {
        text.push_str(&format!(
            "\n\nNot offered as tools ({} is the list, kept current):\n",
            catalog::NOT_OFFERED_URI
        ));
        for s in &c.skipped {
            text.push_str(&format!("- {s}\n"));
        }
    }
    text
}

impl ServerHandler for BandServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_skills_with_directory_read()
                .build(),
        )
        .with_server_info(Implementation::new("band", env!("CARGO_PKG_VERSION")))
        .with_instructions(instructions(&self.current()))
    }

    // Not declared, so not answered: band has no prompts and completes nothing (the SDK's
    // defaults answered both with empty results, which a client reads as a capability).
    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Err(McpError::method_not_found::<ListPromptsRequestMethod>())
    }

    async fn complete(
        &self,
        _request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        Err(McpError::method_not_found::<CompleteRequestMethod>())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools = self.refresh().tools.into_iter().map(|e| e.tool).collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.current()
            .tools
            .into_iter()
            .find(|e| e.tool.name == name)
            .map(|e| e.tool)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Ok(ListResourcesResult::with_all_items(
            self.refresh().resources(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let c = self.current();
        let uri = request.uri;
        if uri == catalog::NOT_OFFERED_URI {
            return Ok(ReadResourceResult::new(vec![ResourceContents::text(
                c.not_offered_text(),
                uri,
            )])
            .into());
        }
        let found = c
            .skills
            .iter()
            .find_map(|s| s.served.files.get(&uri).map(|rel| (&s.served.root, rel)));
        let Some((root, rel)) = found else {
            return Err(McpError::resource_not_found(
                format!("no resource `{uri}`; resources/list and skills/list show them"),
                Some(serde_json::json!({ "uri": uri })),
            ));
        };
        // As the run reads a skill: never through a link out of it (issue 36: a SKILL.md linked
        // to /proc/self/environ served band mcp's whole environment).
        let limit = if rel == "SKILL.md" {
            band::skillfs::MAX_SKILL_MD_BYTES
        } else {
            band::lock::MAX_BUNDLE_BYTES
        };
        let bytes = band::skillfs::read(root, Path::new(rel), limit)
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        let contents = match String::from_utf8(bytes) {
            Ok(text) => ResourceContents::text(text, uri),
            Err(e) => {
                use base64::Engine as _;
                let b64 = base64::engine::general_purpose::STANDARD.encode(e.into_bytes());
                ResourceContents::blob(b64, uri)
            }
        };
        Ok(ReadResourceResult::new(vec![contents.with_mime_type(skills::mime_type(rel))]).into())
    }

    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, McpError> {
        let skills = self.refresh().skills.into_iter().map(|s| s.served.entry);
        Ok(ListSkillsResult::with_all_items(skills.collect()))
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, McpError> {
        let found = self
            .refresh()
            .skills
            .into_iter()
            .find(|s| s.served.entry.uri == request.uri);
        match found {
            Some(s) => Ok(GetSkillResult::new(s.served.entry)),
            None => Err(McpError::invalid_params(
                format!("no skill `{}`; skills/list shows them", request.uri),
                Some(serde_json::json!({ "uri": request.uri })),
            )),
        }
    }

    async fn read_resource_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, McpError> {
        let c = self.current();
        let served: Vec<&skills::Served> = c.skills.iter().map(|s| &s.served).collect();
        match skills::directory(&served, &request.uri) {
            Some(children) => Ok(ReadResourceDirectoryResult::with_all_items(children)),
            None => Err(McpError::invalid_params(
                format!(
                    "`{}` is not a folder of a served skill; skills/list shows them",
                    request.uri
                ),
                Some(serde_json::json!({ "uri": request.uri })),
            )),
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let tools = self.current().tools;
        let names: Vec<String> = tools.iter().map(|e| e.tool.name.to_string()).collect();
        let entry = tools.into_iter().find(|e| e.tool.name == request.name);
        let Some(entry) = entry else {
            let near = band::suggest::nearest(&request.name, names.iter().map(String::as_str));
            let hint = match near {
                Some(near) => format!("did you mean `{near}`? tools/list shows them"),
                None => "tools/list shows them".to_string(),
            };
            return Err(McpError::invalid_params(
                format!("no tool named `{}`; {hint}", request.name),
                None,
            ));
        };
        let output_schema = entry.tool.output_schema.clone();
        let spec = RunSpec {
            skill_root: entry.skill_root.clone(),
            script: entry.script.clone(),
            raw_input: Value::Object(request.arguments.unwrap_or_default()),
            workspace: self.workspace.clone(),
            allow_system_workspace: self.allow_system_workspace,
            target: self.target.clone(),
            trace: false,
            // `require_lock` in the user config applies; the ledger keeps hashes, not contents.
            require_lock: false,
            record_io: false,
            schemas: None,
        };
        let token = request
            .meta
            .as_ref()
            .and_then(|m| m.get_progress_token())
            .or_else(|| context.meta.get_progress_token());
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
        // `notifications/cancelled` for this call, or the client going away, cancels the run.
        let cancel = register(&self.runs);
        // Over HTTP: the client of this request closing its connection (`http::Disconnect`).
        let gone = context
            .extensions
            .get::<::http::request::Parts>()
            .and_then(|p| p.extensions.get::<http::Disconnect>())
            .map(|d| d.0.clone())
            .unwrap_or_default();
        let on_cancel = {
            let (ct, cancel) = (context.ct.clone(), cancel.clone());
            tokio::spawn(async move {
                tokio::select! {
                    _ = ct.cancelled() => {}
                    _ = gone.cancelled() => {}
                }
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
            Ok(Ok(outcome)) => {
                let mut result = call_result(&outcome, output_schema.as_deref());
                result.meta = Some(run_meta(&outcome, entry.skill_uri.as_deref()));
                result
            }
            Ok(Err(err)) => error_result(&err.into()),
            Err(join) => error_result(&anyhow::anyhow!("the run panicked: {join}")),
        };
        Ok(result.into())
    }
}

/// A tool result's `_meta`: which version of which skill ran. `bundle` is the skill's
/// fingerprint as the run read it (its `band.lock`'s `bundle` line; the ledger's
/// `bundle_sha256`), `lock` how it stood against its `band.lock`.
fn run_meta(outcome: &band::client::outcome::Outcome, skill_uri: Option<&str>) -> MetaObject {
    let mut meta = serde_json::Map::new();
    meta.insert(
        skills::META_SKILL.into(),
        serde_json::json!({
            "name": outcome.skill,
            "uri": skill_uri,
            "script": outcome.script,
            "bundle": format!("sha256:{}", outcome.bundle_sha256),
            "lock": outcome.lock,
            "run_id": outcome.result.run_id,
        }),
    );
    MetaObject(meta)
}

pub(crate) fn cmd_mcp(args: McpArgs) -> Result<u8> {
    let workspace = args.workspace.unwrap_or_else(|| PathBuf::from("."));
    let mut server = BandServer::new(skill_dirs(&args.skills)?, workspace, args.script_tool_names);
    server.allow_system_workspace = args.allow_system_workspace;
    // A bad --target fails now, not on every call.
    if let Some(t) = &args.target {
        band::manifest::Target::parse(t).map_err(|e| {
            crate::cli::user_error(
                format!("--target: {e}"),
                format!("use one of: {}", band::manifest::TARGET_CHOICES),
            )
        })?;
    }
    server.target = args.target;
    if let Some(addr) = &args.http {
        let addr = http::parse_addr(addr).map_err(|e| {
            crate::cli::user_error(
                format!("--http: {e}"),
                "e.g. --http 8808 (loopback) or --http 127.0.0.1:8808",
            )
        })?;
        let token = http::read_token(
            args.token_file.as_deref(),
            std::env::var(http::TOKEN_ENV).ok(),
        )?;
        http::check_exposure(&addr, token.as_deref())?;
        let opts = http::HttpOptions {
            addr,
            token,
            allow_hosts: args.allow_host,
            allow_origins: args.allow_origin,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?;
        runtime.block_on(http::serve(Arc::new(server), opts))?;
        return Ok(exit::OK);
    }
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
    use band::proto::Denial;

    #[test]
    fn progress_messages_name_what_happened() {
        let call = band::proto::CliCall {
            argv: vec!["jq".into(), "a b".into()],
            allowed: true,
            rule: None,
            source: None,
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
            Some(
                "denied host example.com:443 (network layer: no allow.net rule matches; \
                 to allow it: allow.net \"example.com:443\")"
            )
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
