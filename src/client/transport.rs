//! The [`Transport`] trait, and [`HostTransport`]: band-server on this machine, as root
//! directly or through `sudo -n`.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::cancel::Cancel;
use super::{ClientError, Result};
use crate::proto::{self, Message, RunRequest, RunResult};
use crate::vm::cmd::is_root;

/// Carries a request to a band-server and brings back its events and result.
pub trait Transport {
    /// For messages: `host`, `qemu (vm band)`, …
    fn name(&self) -> String;
    /// Run `req`. When `cancel` is set, band-server is told to stop the run (it answers with a
    /// `cancelled` result).
    fn run(
        &mut self,
        req: &RunRequest,
        on_event: &mut dyn FnMut(&proto::Event),
        cancel: &Cancel,
    ) -> Result<RunResult>;
}

/// Runs band-server on this machine: as root directly, else through `sudo -n`.
pub struct HostTransport {
    server: PathBuf,
}

impl HostTransport {
    pub fn new() -> Result<Self> {
        if !cfg!(target_os = "linux") {
            return Err(ClientError::user(
                "the host target needs Linux",
                "use a VM target: `band setup`, then `--target lima`",
            ));
        }
        Ok(HostTransport {
            server: server_path(),
        })
    }
}

impl Transport for HostTransport {
    fn name(&self) -> String {
        "host".into()
    }

    fn run(
        &mut self,
        req: &RunRequest,
        on_event: &mut dyn FnMut(&proto::Event),
        cancel: &Cancel,
    ) -> Result<RunResult> {
        let server = &self.server;
        let mut cmd = if is_root() {
            Command::new(server)
        } else {
            let mut c = Command::new("sudo");
            c.arg("-n").arg(server);
            c
        };
        cmd.arg("run")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            // Its own process group: Ctrl-C at the terminal reaches band only, which then
            // cancels the run through the request channel and records it.
            .process_group(0);
        let mut child = cmd.spawn().map_err(|e| {
            ClientError::user(
                format!("cannot start band-server ({}): {e}", server.display()),
                "install band-server next to band or set $BAND_SERVER; without root, `sudo -n` must be allowed to run it",
            )
        })?;
        let mut stdin = child
            .stdin
            .take()
            .ok_or_else(|| ClientError::Protocol("band-server stdin".into()))?;
        let mut line = serde_json::to_string(&Message::Request(Box::new(req.clone())))?;
        line.push('\n');
        line.push_str(&serde_json::to_string(&Message::Hold)?);
        line.push('\n');
        stdin
            .write_all(line.as_bytes())
            .map_err(|source| ClientError::Server {
                what: "cannot send the request to band-server",
                source,
            })?;
        // Held open until the result is in: if band dies, the pipe closes and band-server
        // cancels the run; on `cancel`, band-server is told so at once.
        let done = Arc::new(AtomicBool::new(false));
        let watcher = hold_open(stdin, cancel.clone(), done.clone());
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| ClientError::Protocol("band-server stdout".into()))?;
        let result = read_messages(BufReader::new(stdout), on_event);
        done.store(true, Ordering::SeqCst);
        if let Some(w) = watcher {
            let _ = w.join();
        }
        let result = result?;
        let status = child.wait().map_err(|source| ClientError::Server {
            what: "waiting for band-server",
            source,
        })?;
        match result {
            Some(r) => Ok(r),
            None if !status.success() && !is_root() => Err(ClientError::user(
                format!("band-server exited ({status}) without a result"),
                "the host target runs band-server as root: run band as root, or allow `sudo -n band-server`",
            )),
            None => Err(ClientError::Protocol(format!(
                "band-server exited ({status}) without a result"
            ))),
        }
    }
}

/// How often the holder looks whether the run is over (when no cancel wakes it first).
const HOLD_POLL: Duration = Duration::from_millis(50);

/// Hold band-server's stdin open on a thread until `done`; on `cancel`, send `cancel` and close it.
fn hold_open(
    mut stdin: ChildStdin,
    cancel: Cancel,
    done: Arc<AtomicBool>,
) -> Option<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("band-server-stdin".into())
        .spawn(move || {
            while !done.load(Ordering::SeqCst) {
                if cancel.wait(HOLD_POLL) {
                    if let Ok(line) = serde_json::to_string(&Message::Cancel) {
                        let _ = stdin.write_all(format!("{line}\n").as_bytes());
                    }
                    return;
                }
            }
        })
        .ok()
}

/// Read protocol lines until the stream ends: events go to `on_event`, the last result is returned.
pub fn read_messages(
    reader: impl BufRead,
    on_event: &mut dyn FnMut(&proto::Event),
) -> Result<Option<RunResult>> {
    let mut result = None;
    for line in reader.lines() {
        let line = line.map_err(|source| ClientError::Server {
            what: "reading from band-server",
            source,
        })?;
        match serde_json::from_str::<Message>(&line) {
            Ok(Message::Result(r)) => result = Some(*r),
            Ok(Message::Event(ev)) => on_event(&ev),
            Ok(_) => {}
            Err(e) => eprintln!("band: ignoring a malformed line from band-server: {e}"),
        }
    }
    Ok(result)
}

/// The band-server binary: $BAND_SERVER, next to this executable, or on PATH.
fn server_path() -> PathBuf {
    if let Some(p) = std::env::var_os(proto::env::SERVER) {
        return PathBuf::from(p);
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
    {
        let p = dir.join("band-server");
        if p.is_file() {
            return p;
        }
    }
    PathBuf::from("band-server")
}
