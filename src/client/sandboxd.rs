//! The `sandboxd://host:port` target: `band exec` and `band run` on an agent-sandbox pod that
//! band-sandboxd serves, through the pod's own contract (gRPC `process.v1.ProcessService`,
//! `Start`).
//!
//! A skill's run is a `Start` of [`REQUEST_COMMAND`] with its request as stdin (without this
//! host's workspace files: the pod runs it on its own workspace); the pod holds the request to
//! its own band, which the skill can only narrow (more is refused, naming the pod's band file
//! and line), and never trusts it further (docs/kubernetes.md).
//!
//! The pod runs the command under its band (its ConfigMap's BAND.md), in its workspace; band
//! here checked the command against the band file it was given first, as for every target, so
//! with the pod's band file the command is judged the same way on both sides. The token is read
//! from the file `$BAND_SANDBOXD_TOKEN_FILE` names (never from the command line). stdout and
//! stderr are shown as the pod streams them; Ctrl-C sends the run SIGINT (`SendSignal`) and the
//! stream goes on to its end. band-sandboxd ends the stream with the run's result in its
//! trailers (`band-result-bin`: band's `RunResult` as JSON, without its output, which was
//! streamed): status, exit code, denials and the pod's fingerprints come back as from any
//! band-server. The files the run wrote stay in the pod's workspace (its files API serves
//! them); none are copied here.
//!
//! The protobuf (`proto/process/v1/process.proto`) is compiled by `build.rs`: [`pb`] is both the
//! client used here and the service band-sandboxd implements.

use std::path::PathBuf;

use super::cancel::Cancel;
use super::transport::Transport;
use super::{ClientError, Result};
use crate::proto::{self, Event, RunRequest, RunResult, Status};

/// The generated messages, client and service of `process.v1`.
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod pb {
    tonic::include_proto!("process.v1");
}

/// The environment variable naming the file that holds the pod's token.
pub const TOKEN_FILE_ENV: &str = "BAND_SANDBOXD_TOKEN_FILE";

/// The `Execute` response's metadata that carries band's result (binary metadata: the `-bin`
/// suffix makes gRPC carry it base64).
pub const RESULT_METADATA: &str = "band-result-bin";

/// The command of a `Start` whose stdin is a skill's whole run request (JSON, ended by `eof`):
/// `band run --target sandboxd://`. band-sandboxd runs it under the pod's band; a sandboxd that
/// is not band's has no program of that name and fails.
pub const REQUEST_COMMAND: &str = "band-request";

/// The most of a result the metadata carries (its output is in the body) for a command's run:
/// the SDK's gRPC reads trailers of 8 KiB at most (grpcio's default metadata size), and a
/// larger one would fail its call.
pub const MAX_RESULT_METADATA: usize = 8 << 10;

/// The most for a skill's run ([`REQUEST_COMMAND`], only band's client starts one): its result
/// carries the skill's output JSON, which band's output cap (10 MiB by default) bounds. band's
/// client reads trailers up to [`MAX_TRAILERS`].
pub const MAX_SKILL_RESULT_METADATA: usize = 16 << 20;

/// The trailers band's client reads: a skill's result, base64, and room for the rest.
pub const MAX_TRAILERS: u32 = (MAX_SKILL_RESULT_METADATA / 3 * 4 + (64 << 10)) as u32;

/// band's result as band-sandboxd sends it in [`RESULT_METADATA`]: without stdout, stderr, the
/// written files' contents and the CLI calls; `None` when even that is over
/// [`MAX_RESULT_METADATA`].
pub fn result_metadata(result: &RunResult) -> Option<Vec<u8>> {
    result_metadata_within(result, MAX_RESULT_METADATA)
}

/// [`result_metadata`], at most `max` bytes.
pub fn result_metadata_within(result: &RunResult, max: usize) -> Option<Vec<u8>> {
    let mut r = result.clone();
    r.stdout.clear();
    r.stderr.clear();
    r.cli_calls.clear();
    for w in &mut r.written {
        w.data.clear();
    }
    let json = serde_json::to_vec(&r).ok()?;
    (json.len() <= max).then_some(json)
}

/// What band-sandboxd says at the end of a run's stderr about a result that is not the script's
/// own end: the status, the error and its hint (for the SDK's users, who see no band result).
/// Nothing for `ok` and `script_failed`. `band exec --target sandboxd://` takes it off again: it
/// renders the result itself.
pub fn explain(r: &RunResult) -> Option<String> {
    if matches!(r.status, Status::Ok | Status::ScriptFailed) {
        return None;
    }
    let mut text = format!("band: {}", r.status.as_str());
    if let Some(e) = &r.error {
        text.push_str(&format!(": {}", e.message));
        if let Some(h) = &e.hint {
            text.push_str(&format!("\nhint: {h}"));
        }
    } else if let Some(d) = r.denied.first() {
        text.push_str(&format!(": {}", d.explain()));
    }
    if let Some(h) = r.listening_hint() {
        text.push_str(&format!("\nhint: {h}"));
    }
    text.push('\n');
    Some(text)
}

/// One pod's endpoint and token.
pub struct SandboxdTransport {
    host: String,
    port: u16,
    token: String,
}

impl SandboxdTransport {
    pub fn new(host: &str, port: u16) -> Result<SandboxdTransport> {
        let hint = format!(
            "set {TOKEN_FILE_ENV} to the file that holds the pod's token (its Secret), readable only by you"
        );
        let path = std::env::var_os(TOKEN_FILE_ENV)
            .map(PathBuf::from)
            .ok_or_else(|| {
                ClientError::user(format!("no token for sandboxd://{host}:{port}"), &hint)
            })?;
        // Owner-only, as `band mcp --token-file`: a token other users can read is theirs too.
        {
            use std::os::unix::fs::MetadataExt;
            let meta =
                fs_err::metadata(&path).map_err(|e| ClientError::user(e.to_string(), &hint))?;
            if meta.mode() & 0o077 != 0 {
                return Err(ClientError::user(
                    format!(
                        "{}: the token file can be read by other users (mode {:o})",
                        path.display(),
                        meta.mode() & 0o777
                    ),
                    format!("chmod 600 {}", path.display()),
                ));
            }
        }
        let token = fs_err::read_to_string(&path)
            .map_err(|e| ClientError::user(e.to_string(), &hint))?
            .trim()
            .to_string();
        if token.is_empty() {
            return Err(ClientError::user(
                format!("{}: the token file is empty", path.display()),
                hint,
            ));
        }
        Ok(SandboxdTransport {
            host: host.to_string(),
            port,
            token,
        })
    }

    fn uri(&self) -> String {
        if self.host.contains(':') {
            format!("http://[{}]:{}", self.host, self.port)
        } else {
            format!("http://{}:{}", self.host, self.port)
        }
    }
}

/// The most of a request one `WriteStdin` carries (gRPC's default message cap is 4 MiB).
const REQUEST_CHUNK: usize = 1 << 20;

/// How long band waits for a TCP connection to the endpoint.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The most of a stream (stdout, stderr) band keeps of a run on a pod: past it band stops
/// reading and the run is an error, so an endpoint that streams without end cannot fill band's
/// memory. Above band-server's own bounds on a run's output and logs.
pub const MAX_STREAMED: usize = 64 << 20;

/// The argv of `band exec`'s request (its input `{"argv": [...]}`); `None` for a skill's run.
fn exec_argv(req: &RunRequest) -> Option<Vec<String>> {
    if req.skill != super::adhoc::NAME || req.script != super::adhoc::NAME {
        return None;
    }
    let argv: Vec<String> = req
        .input
        .get("argv")
        .and_then(|a| serde_json::from_value(a.clone()).ok())?;
    (!argv.is_empty()).then_some(argv)
}

/// `data` added to what a stream sent so far, or an error past [`MAX_STREAMED`].
fn bounded(kept: &mut String, data: &str, name: &str) -> std::result::Result<(), String> {
    if kept.len() + data.len() > MAX_STREAMED {
        return Err(format!(
            "the run sent more than {} MiB on {name}; band stopped reading it",
            MAX_STREAMED >> 20
        ));
    }
    kept.push_str(data);
    Ok(())
}

/// What a `Start` runs: `band exec`'s command, or [`REQUEST_COMMAND`] with the skill's request
/// for its stdin. The pod runs a skill on its own workspace, so the request goes without this
/// host's workspace files.
fn start_of(req: &RunRequest) -> Result<(Vec<String>, Option<Vec<u8>>)> {
    if let Some(argv) = exec_argv(req) {
        return Ok((argv, None));
    }
    let mut sent = req.clone();
    sent.workspace.clear();
    let json = serde_json::to_vec(&sent)
        .map_err(|e| ClientError::Protocol(format!("the request: {e}")))?;
    Ok((vec![REQUEST_COMMAND.to_string()], Some(json)))
}

impl Transport for SandboxdTransport {
    fn name(&self) -> String {
        format!("sandboxd ({})", self.uri())
    }

    fn run(
        &mut self,
        req: &RunRequest,
        on_event: &mut dyn FnMut(&Event),
        cancel: &Cancel,
        recorded: &dyn Fn() -> Result<()>,
    ) -> Result<RunResult> {
        // band-sandboxd starts the process at its `Start`: the record first.
        recorded()?;
        let (argv, request) = start_of(req)?;
        let unreachable = |e: String| {
            let hint = if e.starts_with("the run sent more than") {
                "the run printed more than band keeps of it; write large results to files"
            } else {
                "is band-sandboxd listening there (a port-forward to the pod's gRPC port, 9090)?"
            };
            ClientError::user(format!("sandboxd at {}: {e}", self.uri()), hint)
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ClientError::Protocol(format!("tokio: {e}")))?;
        let bearer: tonic::metadata::MetadataValue<tonic::metadata::Ascii> =
            format!("Bearer {}", self.token).parse().map_err(|_| {
                ClientError::user(
                    "the token is not ASCII",
                    "write the token as it is in the pod's Secret",
                )
            })?;
        let uri = self.uri();
        // What the pod streams goes to `on_event` as it comes, except the last stderr chunk,
        // held until the next event: band-sandboxd's words about the result (`explain`) are
        // its own chunk at the end, and band renders the result itself.
        let (mut stdout, mut stderr) = (String::new(), String::new());
        let mut held: Option<String> = None;
        let mut emit = |e: Event, held: &mut Option<String>| {
            if let Some(h) = held.take() {
                on_event(&Event::Stderr { data: h });
            }
            match e {
                Event::Stderr { data } => *held = Some(data),
                other => on_event(&other),
            }
        };
        // Until the pod has started the run there is nothing to signal: a cancel (Ctrl-C,
        // SIGTERM) ends the wait for an endpoint that does not answer, and the run is cancelled.
        let cancelled = || async {
            while !cancel.is_cancelled() {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        };
        const CANCELLED: &str = "cancelled before the pod started the run's script";
        let answered: std::result::Result<(Option<i32>, Option<RunResult>, bool), String> =
            rt.block_on(async {
                let endpoint = tonic::transport::Endpoint::from_shared(uri)
                    .map_err(|e| e.to_string())?
                    .connect_timeout(CONNECT_TIMEOUT)
                    .http2_max_header_list_size(MAX_TRAILERS);
                let channel = tokio::select! {
                    c = endpoint.connect() => c.map_err(|e| format!("{e}"))?,
                    () = cancelled() => return Err(CANCELLED.to_string()),
                };
                let mut client =
                    pb::process_service_client::ProcessServiceClient::with_interceptor(
                        channel,
                        move |mut r: tonic::Request<()>| {
                            r.metadata_mut().insert("authorization", bearer.clone());
                            Ok(r)
                        },
                    );
                let start = client.start(pb::StartRequest {
                    config: Some(pb::ProcessConfig {
                        command: argv,
                        env_vars: Default::default(),
                        cwd: None,
                    }),
                    pty: None,
                });
                let mut stream = tokio::select! {
                    r = start => r.map_err(|s| format!("{}: {}", s.code(), s.message()))?,
                    () = cancelled() => return Err(CANCELLED.to_string()),
                }
                .into_inner();
                let (mut pid, mut exit, mut signalled) = (None, None, false);
                loop {
                    tokio::select! {
                        // No word from the pod yet and a cancel: nothing to signal.
                        () = cancelled(), if pid.is_none() => return Err(CANCELLED.to_string()),
                        m = stream.message() => match m {
                            Ok(Some(pb::StartResponse { event: Some(e) })) => match e {
                                pb::start_response::Event::Init(i) => {
                                    pid = Some(i.process_id);
                                    // A skill's request: its stdin, then its end.
                                    if let Some(json) = &request {
                                        // A pod that does not read its stdin holds these:
                                        // a cancel ends the wait (the connection goes, and
                                        // with it the run).
                                        let payloads = json
                                            .chunks(REQUEST_CHUNK)
                                            .map(|c| pb::write_stdin_request::Payload::Input(c.to_vec()))
                                            .chain([pb::write_stdin_request::Payload::Eof(())]);
                                        for payload in payloads {
                                            let write = client.write_stdin(pb::WriteStdinRequest {
                                                process_id: i.process_id,
                                                payload: Some(payload),
                                            });
                                            tokio::select! {
                                                r = write => r.map_err(|s| format!("{}: {}", s.code(), s.message()))?,
                                                () = cancelled() => return Err(CANCELLED.to_string()),
                                            };
                                        }
                                    }
                                }
                                pb::start_response::Event::Stdout(b) => {
                                    let data = String::from_utf8_lossy(&b).into_owned();
                                    bounded(&mut stdout, &data, "stdout")?;
                                    emit(Event::Stdout { data }, &mut held);
                                }
                                pb::start_response::Event::Stderr(b) => {
                                    let data = String::from_utf8_lossy(&b).into_owned();
                                    bounded(&mut stderr, &data, "stderr")?;
                                    emit(Event::Stderr { data }, &mut held);
                                }
                                pb::start_response::Event::Exit(x) => exit = Some(x.exit_code),
                            },
                            Ok(Some(_)) => {}
                            Ok(None) => break,
                            Err(s) => return Err(format!("{}: {}", s.code(), s.message())),
                        },
                        // Ctrl-C here: SIGINT to the run's processes (the pod's SendSignal);
                        // the stream goes on to the run's end, which says how it ended.
                        _ = tokio::time::sleep(std::time::Duration::from_millis(100)), if !signalled => {
                            if cancel.is_cancelled() && let Some(id) = pid {
                                signalled = true;
                                client
                                    .send_signal(pb::SendSignalRequest {
                                        process_id: id,
                                        signal: pb::Signal::Sigint as i32,
                                    })
                                    .await
                                    .map_err(|s| format!("{}: {}", s.code(), s.message()))?;
                            }
                        }
                    }
                }
                let from_pod = stream
                    .trailers()
                    .await
                    .ok()
                    .flatten()
                    .and_then(|md| md.get_bin(RESULT_METADATA).and_then(|v| v.to_bytes().ok()))
                    .and_then(|b| serde_json::from_slice::<RunResult>(&b).ok());
                Ok((exit, from_pod, signalled))
            });
        let (exit, from_pod, signalled) = answered.map_err(unreachable)?;
        if let Some(h) = held.take() {
            if from_pod.as_ref().and_then(explain).as_deref() == Some(h.as_str()) {
                stderr.truncate(stderr.len() - h.len());
            } else {
                on_event(&Event::Stderr { data: h });
            }
        }
        for d in from_pod.iter().flat_map(|r| &r.denied) {
            on_event(&Event::Denied(d.clone()));
        }
        let exit_code = exit.ok_or_else(|| {
            ClientError::Protocol(format!(
                "sandboxd at {}: the stream ended without an exit",
                self.uri()
            ))
        })?;
        let skill = request.is_some();
        let mut result = match from_pod {
            Some(r) => r,
            // A skill's result is its output: without it, nothing here could say what it was.
            None if skill => {
                return Err(ClientError::user(
                    format!(
                        "sandboxd at {}: the run ended (exit code {exit_code}) but its result did not come back",
                        self.uri()
                    ),
                    format!(
                        "a skill's result, its output included, must be under {} MiB; or is the endpoint not band-sandboxd?",
                        MAX_SKILL_RESULT_METADATA >> 20
                    ),
                ));
            }
            // Not band-sandboxd (another sandboxd), or a result too large to carry: what the
            // exit code says.
            None => {
                let mut r = RunResult::setup_failed(&req.run_id, proto::Layer::Process, "", None);
                r.error = None;
                r.status = if exit_code == 0 {
                    Status::Ok
                } else {
                    Status::ScriptFailed
                };
                r.exit_code = Some(exit_code);
                r
            }
        };
        // Ctrl-C ended it: cancelled, as a run on the host that band cancels.
        if signalled && result.status != Status::Denied {
            result.status = Status::Cancelled;
        }
        result.run_id = req.run_id.clone();
        result.stdout = stdout;
        result.stderr = stderr;
        // The pod wrote them into its own workspace.
        result.written.clear();
        result.written_folders.clear();
        if result.status == Status::Ok && result.output.is_none() {
            result.output = serde_json::from_str(&result.stdout).ok();
        }
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An SDK user sees no band result: a run that timed out serving a port says where, and why
    /// nothing reached it, at the end of its stderr.
    #[test]
    fn a_timeout_while_listening_is_explained_to_the_sdk_user() {
        let mut r = RunResult::setup_failed("r", crate::proto::Layer::Process, "", None);
        r.status = Status::Timeout;
        r.error = None;
        assert_eq!(explain(&r).as_deref(), Some("band: timeout\n"));
        r.listening = vec!["127.0.0.1:8765".into()];
        assert_eq!(
            explain(&r).as_deref(),
            Some(
                "band: timeout\nhint: the script was still listening on 127.0.0.1:8765 when it timed out; a run takes no inbound connections, so nothing outside the run can reach a server a skill starts (docs/network.md, \"A server inside a run\")\n"
            )
        );
    }

    #[test]
    fn a_skill_goes_to_a_pod_as_its_request_without_the_workspace() {
        let mut req: RunRequest = serde_json::from_value(serde_json::json!({
            "protocol": 1, "run_id": "0123456789abcdef", "skill": "exec", "script": "exec",
            "entry": "scripts/exec.sh", "bundle": [], "bundle_sha256": "00", "policy": {},
            "input": {"argv": ["echo", "hi"]},
            "workspace": [{"path": "a.txt", "mode": 420, "data": "aGk="}]
        }))
        .unwrap();
        assert_eq!(
            start_of(&req).unwrap(),
            (vec!["echo".into(), "hi".into()], None)
        );
        req.skill = "text".into();
        let (argv, sent) = start_of(&req).unwrap();
        assert_eq!(argv, vec![REQUEST_COMMAND]);
        let sent: RunRequest = serde_json::from_slice(&sent.unwrap()).unwrap();
        assert!(sent.workspace.is_empty());
        req.workspace.clear();
        assert_eq!(sent, req);
    }

    #[test]
    fn the_result_metadata_leaves_the_output_out() {
        let mut r = RunResult::setup_failed("r", proto::Layer::Cli, "no", None);
        r.stdout = "x".repeat(100);
        let back: RunResult = serde_json::from_slice(&result_metadata(&r).unwrap()).unwrap();
        assert!(back.stdout.is_empty());
        assert_eq!(back.status, r.status);
        r.error = Some(proto::ErrorInfo {
            layer: proto::Layer::Cli,
            message: "y".repeat(MAX_RESULT_METADATA),
            hint: None,
        });
        assert_eq!(result_metadata(&r), None);
    }

    #[test]
    fn a_stream_is_kept_up_to_its_bound_then_refused() {
        let mut kept = String::new();
        let chunk = "x".repeat(1 << 20);
        for _ in 0..(MAX_STREAMED >> 20) {
            bounded(&mut kept, &chunk, "stdout").expect("within the bound");
        }
        let e = bounded(&mut kept, "y", "stdout").unwrap_err();
        assert_eq!(
            e,
            "the run sent more than 64 MiB on stdout; band stopped reading it"
        );
        assert_eq!(kept.len(), MAX_STREAMED);
    }
}
