//! `process.v1.ProcessService` over gRPC: each `Start` and `Execute` is a band run
//! ([`super::run`]); `WriteStdin` and `SendSignal` reach a `Start`ed run by its process id.
//!
//! `ResizeTTY`: a band run never has a terminal (its stdout and stderr are pipes band-server
//! reads; a `Start` that asks for a PTY runs without one), so there is nothing to resize: a
//! known process answers `FAILED_PRECONDITION` ("no terminal"), an unknown one `NOT_FOUND`.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::service::interceptor::InterceptedService;
use tonic::{Request, Response, Status};

use super::Pod;
use super::pb::process_service_server::{ProcessService, ProcessServiceServer};
use super::pb::{self, start_response, write_stdin_request};
use super::run::{self, Control, Out};

/// The service, behind the token check.
pub fn service(pod: Arc<Pod>) -> InterceptedService<ProcessServiceServer<Process>, Auth> {
    let auth = Auth(pod.token.clone());
    InterceptedService::new(ProcessServiceServer::new(Process { pod }), auth)
}

/// Every call must carry `authorization: Bearer <token>` (`UNAUTHENTICATED` otherwise).
#[derive(Clone)]
pub struct Auth(super::Token);

impl tonic::service::Interceptor for Auth {
    fn call(&mut self, req: Request<()>) -> Result<Request<()>, Status> {
        let header = req.metadata().get("authorization").map(|v| v.as_bytes());
        if self.0.admits(header) {
            Ok(req)
        } else {
            Err(Status::unauthenticated(
                "band-sandboxd: a token is required (authorization: Bearer <token>)",
            ))
        }
    }
}

pub struct Process {
    pod: Arc<Pod>,
}

/// The argv of a request, checked: a command, no environment (a run's environment is its band's),
/// and the workspace as its folder.
fn argv_of(config: Option<pb::ProcessConfig>) -> Result<Vec<String>, Status> {
    let config = config.ok_or_else(|| Status::invalid_argument("config is required"))?;
    if config.command.is_empty() || config.command[0].is_empty() {
        return Err(Status::invalid_argument("config.command is empty"));
    }
    if !config.env_vars.is_empty() {
        let mut names: Vec<&String> = config.env_vars.keys().collect();
        names.sort();
        return Err(Status::invalid_argument(format!(
            "env_vars ({}) are not passed: a band run's environment is its band's (env.secrets); set them in the command",
            names
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    match config.cwd.as_deref() {
        None | Some("") | Some("/workspace") | Some("/workspace/") | Some(".") => {}
        Some(other) => {
            return Err(Status::invalid_argument(format!(
                "cwd `{other}`: a band run starts in /workspace; cd in the command"
            )));
        }
    }
    Ok(run::normalize_argv(config.command))
}

type Sent = Result<pb::StartResponse, Status>;

fn event(e: start_response::Event) -> Sent {
    Ok(pb::StartResponse { event: Some(e) })
}

#[tonic::async_trait]
impl ProcessService for Process {
    type StartStream = ReceiverStream<Sent>;

    async fn start(
        &self,
        request: Request<pb::StartRequest>,
    ) -> Result<Response<Self::StartStream>, Status> {
        let argv = argv_of(request.into_inner().config)?;
        // `band run --target sandboxd://`: a skill's request on stdin, not a command.
        let skill =
            argv.first().map(String::as_str) == Some(band::client::sandboxd::REQUEST_COMMAND);
        if skill && argv.len() != 1 {
            return Err(Status::invalid_argument(format!(
                "`{}` takes no arguments: the request is its stdin",
                band::client::sandboxd::REQUEST_COMMAND
            )));
        }
        let pod = self.pod.clone();
        let (id, control) = pod.runs.register().await;
        let (tx, rx) = mpsc::channel::<Sent>(64);
        let _ = tx
            .send(event(start_response::Event::Init(pb::InitEvent {
                process_id: id,
            })))
            .await;
        let (out_tx, mut out_rx) = mpsc::channel::<Out>(64);
        // What the run writes, to the stream; a client gone (the stream dropped) cancels the run.
        let forward = {
            let tx = tx.clone();
            let pod = pod.clone();
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        o = out_rx.recv() => match o {
                            Some(Out::Stdout(b)) => { let _ = tx.send(event(start_response::Event::Stdout(b))).await; }
                            Some(Out::Stderr(b)) => { let _ = tx.send(event(start_response::Event::Stderr(b))).await; }
                            None => break,
                        },
                        _ = tx.closed() => {
                            pod.runs.tell(id, Control::Cancel).await;
                            // Drain what is left, unsent.
                            while out_rx.recv().await.is_some() {}
                            break;
                        }
                    }
                }
            })
        };
        tokio::spawn(async move {
            let (code, result) = if skill {
                run::skill(pod.clone(), id, out_tx, control).await
            } else {
                run::execute(pod.clone(), id, argv, true, out_tx, control).await
            };
            let _ = forward.await;
            pod.runs.forget(id).await;
            let _ = tx
                .send(event(start_response::Event::Exit(pb::ExitEvent {
                    exit_code: code,
                })))
                .await;
            // band's own result, in the stream's trailers (a status OK with metadata: tonic
            // sends an item's status as the trailers), for `band exec --target sandboxd://`;
            // the SDK reads none.
            // A skill's result carries its output, for band's client only; a command's stays
            // within what the SDK reads.
            let max = if skill {
                band::client::sandboxd::MAX_SKILL_RESULT_METADATA
            } else {
                band::client::sandboxd::MAX_RESULT_METADATA
            };
            if let Some(json) = result
                .as_ref()
                .and_then(|r| band::client::sandboxd::result_metadata_within(r, max))
            {
                let mut md = tonic::metadata::MetadataMap::new();
                md.insert_bin(
                    band::client::sandboxd::RESULT_METADATA,
                    tonic::metadata::MetadataValue::from_bytes(&json),
                );
                let _ = tx
                    .send(Err(Status::with_metadata(tonic::Code::Ok, "", md)))
                    .await;
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn execute(
        &self,
        request: Request<pb::ExecuteRequest>,
    ) -> Result<Response<pb::ExecuteResponse>, Status> {
        let argv = argv_of(request.into_inner().config)?;
        if argv.first().map(String::as_str) == Some(band::client::sandboxd::REQUEST_COMMAND) {
            return Err(Status::invalid_argument(format!(
                "`{}` is started with Start: its request is its stdin, which Execute has not",
                band::client::sandboxd::REQUEST_COMMAND
            )));
        }
        let pod = self.pod.clone();
        let (id, control) = pod.runs.register().await;
        let (out_tx, mut out_rx) = mpsc::channel::<Out>(64);
        let gather = tokio::spawn(async move {
            let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
            while let Some(o) = out_rx.recv().await {
                match o {
                    Out::Stdout(b) => stdout.extend(b),
                    Out::Stderr(b) => stderr.extend(b),
                }
            }
            (stdout, stderr)
        });
        // A client that goes away drops this future, and with it the run's channel to its
        // band-server, which then cancels the run and tears it down; the id is forgotten.
        let _forget = ForgetOnDrop(pod.clone(), id);
        let (exit_code, result) = run::execute(pod.clone(), id, argv, false, out_tx, control).await;
        let (stdout, stderr) = gather
            .await
            .map_err(|e| Status::internal(format!("output: {e}")))?;
        let mut response = Response::new(pb::ExecuteResponse {
            exit_code,
            stdout,
            stderr,
        });
        // band's own result, for `band exec --target sandboxd://` (the SDK ignores it).
        if let Some(json) = result
            .as_ref()
            .and_then(band::client::sandboxd::result_metadata)
        {
            response.metadata_mut().insert_bin(
                band::client::sandboxd::RESULT_METADATA,
                tonic::metadata::MetadataValue::from_bytes(&json),
            );
        }
        Ok(response)
    }

    async fn write_stdin(
        &self,
        request: Request<pb::WriteStdinRequest>,
    ) -> Result<Response<pb::WriteStdinResponse>, Status> {
        let req = request.into_inner();
        let what = match req.payload {
            Some(write_stdin_request::Payload::Input(b)) => Control::Stdin(b),
            Some(write_stdin_request::Payload::Eof(_)) => Control::Eof,
            None => return Err(Status::invalid_argument("input or eof is required")),
        };
        if self.pod.runs.tell(req.process_id, what).await {
            Ok(Response::new(pb::WriteStdinResponse {}))
        } else {
            Err(not_found(req.process_id))
        }
    }

    async fn send_signal(
        &self,
        request: Request<pb::SendSignalRequest>,
    ) -> Result<Response<pb::SendSignalResponse>, Status> {
        let req = request.into_inner();
        let signal = match pb::Signal::try_from(req.signal) {
            Ok(pb::Signal::Sigint) => 2,
            Ok(pb::Signal::Sigkill) => 9,
            Ok(pb::Signal::Sigterm) => 15,
            _ => {
                return Err(Status::invalid_argument(
                    "signal must be SIGINT, SIGKILL or SIGTERM",
                ));
            }
        };
        if self
            .pod
            .runs
            .tell(req.process_id, Control::Signal(signal))
            .await
        {
            Ok(Response::new(pb::SendSignalResponse {}))
        } else {
            Err(not_found(req.process_id))
        }
    }

    async fn resize_tty(
        &self,
        request: Request<pb::ResizeTtyRequest>,
    ) -> Result<Response<pb::ResizeTtyResponse>, Status> {
        let id = request.into_inner().process_id;
        if self.pod.runs.is_live(id).await {
            Err(Status::failed_precondition(format!(
                "process {id} has no terminal: a band run's output is pipes, never a tty"
            )))
        } else {
            Err(not_found(id))
        }
    }
}

fn not_found(id: i32) -> Status {
    Status::not_found(format!("no process {id} is running"))
}

/// Forgets run `.1` when dropped: the end of an `Execute`, or its client gone.
struct ForgetOnDrop(Arc<Pod>, i32);

impl Drop for ForgetOnDrop {
    fn drop(&mut self) {
        let (pod, id) = (self.0.clone(), self.1);
        tokio::spawn(async move {
            pod.runs.forget(id).await;
        });
    }
}
