//! The [`Transport`] trait, and [`HostTransport`]: band-server on this machine, as root
//! directly or through `sudo -n`.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::cancel::Cancel;
use super::redact::Masker;
use super::{ClientError, Result};
use crate::proto::{self, Message, RunRequest, RunResult};
use crate::vm::cmd::is_root;

/// Carries a request to a band-server and brings back its events and result.
pub trait Transport {
    /// For messages: `host`, `qemu (vm band)`, …
    fn name(&self) -> String;
    /// Run `req`. When `cancel` is set, band-server is told to stop the run (it answers with a
    /// `cancelled` result). `recorded` makes the run's `start` record durable (it may be called
    /// more than once): the script must not start before it returned `Ok`, and when it fails the
    /// run does not start and its error is `run`'s.
    fn run(
        &mut self,
        req: &RunRequest,
        on_event: &mut dyn FnMut(&proto::Event),
        cancel: &Cancel,
        recorded: &dyn Fn() -> Result<()>,
    ) -> Result<RunResult>;
    /// Whether this transport sends `req` before `recorded` and the script waits for its `go`
    /// ([`RunRequest::start_on_go`]): the record's sync then overlaps band-server's preparing
    /// the run. No by default: `recorded` is called before the request is sent.
    fn starts_on_go(&self) -> bool {
        false
    }
    /// Start what [`Transport::run`] will talk to now, while band still prepares the request:
    /// the two overlap (on the host, band-server's start, its config and its janitor pass take
    /// about as long as compiling the input's schema). A start that fails is forgotten here;
    /// `run` starts again and reports it. Nothing by default.
    fn prestart(&mut self) {}
}

/// Runs band-server on this machine: as root directly, else through `sudo -n`; or, as root (unless
/// the user config says `warm = false` or `BAND_WARM=0`), on the warm band-server that band keeps
/// ([`crate::warm`]).
pub struct HostTransport {
    server: PathBuf,
    /// Use (and keep) a warm band-server: [`UserConfig::warm`](super::config::UserConfig::warm), for root only.
    warm: bool,
    /// A band-server started (or a warm one connected to) by [`Transport::prestart`], waiting
    /// for its request.
    early: Option<Ready>,
}

/// A band-server process and the pipes to it.
struct Started {
    child: Child,
    root: bool,
}

/// What a run's request goes to.
enum Ready {
    /// A band-server of the run's own.
    Started(Started),
    /// A connection to the warm band-server, whose forked child serves this run.
    Warm(UnixStream),
}

impl Drop for HostTransport {
    /// A band-server started early whose run never came (the input was refused, the gate said
    /// no): its stdin closes, it answers "no request" and exits, and is reaped here. A warm
    /// server's child sees its connection close before a request, and exits.
    fn drop(&mut self) {
        if let Some(Ready::Started(mut s)) = self.early.take() {
            drop(s.child.stdin.take());
            drop(s.child.stdout.take());
            drop(s.child.stderr.take());
            let _ = s.child.wait();
        }
    }
}

impl HostTransport {
    /// `warm`: [`UserConfig::warm`](super::config::UserConfig::warm) (used only as root).
    pub fn new(warm: bool) -> Result<Self> {
        if !cfg!(target_os = "linux") {
            return Err(ClientError::user(
                "the host target needs Linux",
                "use a VM target: `band setup`, then `--target lima`",
            ));
        }
        Ok(HostTransport {
            server: server_path(),
            warm: warm && is_root(),
            early: None,
        })
    }

    /// The warm band-server of this band-server and its settings, if one listens.
    fn connect_warm(&self) -> Option<UnixStream> {
        if !self.warm {
            return None;
        }
        let digest = crate::warm::digest_here(&self.server)?;
        UnixStream::connect(crate::warm::socket(Path::new(crate::warm::DIR), &digest)).ok()
    }

    /// A warm band-server, else one of the run's own.
    fn ready(&self) -> Result<Ready> {
        match self.connect_warm() {
            Some(c) => Ok(Ready::Warm(c)),
            None => self.start().map(Ready::Started),
        }
    }

    /// Start the warm band-server (`band-server serve <digest> --host`) for the next runs: in the
    /// background, detached, never waited for. It listens once it has run its janitor pass, and
    /// exits after [`crate::warm::IDLE_SECS`] without a run, or as soon as this band-server or its
    /// settings change. Failing to start it costs nothing but the next run's speed.
    fn keep_warm(&self) {
        let Some(digest) = crate::warm::digest_here(&self.server) else {
            return;
        };
        let mut cmd = Command::new(&self.server);
        server_env(&mut cmd);
        let _ = cmd
            .arg("serve")
            .arg(&digest)
            .arg("--host")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn();
    }

    /// Start band-server (as root, or through `sudo -n`), its stdin, stdout and stderr piped.
    fn start(&self) -> Result<Started> {
        let server = &self.server;
        let root = is_root();
        if !root {
            let sudo = crate::vm::cmd::which("sudo").is_some();
            if let Some(e) = without_root(server, sudo, sudo && sudo_allows(server)) {
                return Err(e);
            }
        }
        let mut cmd = if root {
            Command::new(server)
        } else {
            let mut c = Command::new("sudo");
            c.arg("-n").arg(server);
            c
        };
        server_env(&mut cmd);
        cmd.arg("run")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            // Piped and masked: what band-server says on stderr (teardown problems, dropped
            // reports) reaches a person or an agent's log with the run's secrets masked.
            .stderr(Stdio::piped())
            // Its own process group: Ctrl-C at the terminal reaches band only, which then
            // cancels the run through the request channel and records it.
            .process_group(0);
        let child = cmd.spawn().map_err(|e| {
            if root {
                ClientError::user(
                    format!("cannot start band-server ({}): {e}", server.display()),
                    "install band-server next to band or set $BAND_SERVER",
                )
            } else {
                ClientError::user(
                    format!("cannot start `sudo -n {}`: {e}", server.display()),
                    HOW_TO_CHOOSE,
                )
            }
        })?;
        Ok(Started { child, root })
    }
}

impl Transport for HostTransport {
    fn name(&self) -> String {
        "host".into()
    }

    fn prestart(&mut self) {
        if self.early.is_none() {
            self.early = self.ready().ok();
        }
    }

    fn starts_on_go(&self) -> bool {
        true
    }

    fn run(
        &mut self,
        req: &RunRequest,
        on_event: &mut dyn FnMut(&proto::Event),
        cancel: &Cancel,
        recorded: &dyn Fn() -> Result<()>,
    ) -> Result<RunResult> {
        let started = match self.early.take() {
            Some(r) => r,
            None => self.ready()?,
        };
        let started = match started {
            Ready::Started(s) => s,
            Ready::Warm(conn) => match run_warm(conn, req, on_event, cancel, recorded)? {
                Some(r) => return Ok(r),
                // No byte came back: no band-server read the request (the warm server exited,
                // or no longer serves these settings). One of the run's own serves it.
                None => self.start()?,
            },
        };
        let result = run_started(started, req, on_event, cancel, recorded);
        if self.warm && matches!(result, Ok(ref r) if !r.run_id.is_empty()) {
            self.keep_warm();
        }
        result
    }
}

/// One run on a band-server of its own.
fn run_started(
    started: Started,
    req: &RunRequest,
    on_event: &mut dyn FnMut(&proto::Event),
    cancel: &Cancel,
    recorded: &dyn Fn() -> Result<()>,
) -> Result<RunResult> {
    let Started { mut child, root } = started;
    let relay = child
        .stderr
        .take()
        .and_then(|e| relay_masked(e, Masker::new(&req.secrets), std::io::stderr()));
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| ClientError::Protocol("band-server stdin".into()))?;
    match stdin.write_all(request_lines(req)?.as_bytes()) {
        Ok(()) => {}
        // band-server stopped reading: it refused before the request (its config, say) and
        // its answer is on its stdout, read below. Reported as a closed pipe this was lost
        // (band took it for `band … | head` and exited 0 without a word).
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(source) => {
            return Err(ClientError::Server {
                what: "cannot send the request to band-server",
                source,
            });
        }
    }
    let go = say_go(&mut stdin, req, recorded);
    // Held open until the result is in: if band dies, the pipe closes and band-server
    // cancels the run; on `cancel`, band-server is told so at once.
    let done = Arc::new(AtomicBool::new(false));
    hold_open(stdin, cancel.clone(), done.clone());
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| ClientError::Protocol("band-server stdout".into()))?;
    let result = read_messages(BufReader::new(stdout), on_event);
    done.store(true, Ordering::SeqCst);
    // The holder ends now, not at its next poll (up to 50 ms on every run before). It is not
    // waited for: with `done` set it only closes band-server's input, which no longer
    // matters, and waiting cost every run the holder's wake-up (about 0.15 ms).
    cancel.wake();
    // A run whose record failed did not start: that failure is the run's error.
    go?;
    if let Ok(Some(r)) = result {
        // band-server closes its output with the result and only then removes what it
        // built for the run (mounts, folders, cgroups, lease; the janitor does it if it
        // dies): the run is over, so band goes on. A thread reaps it and relays what it
        // still says on stderr while band lives.
        let _ = std::thread::Builder::new()
            .name("band-server-exit".into())
            .spawn(move || {
                let _ = child.wait();
                if let Some(r) = relay {
                    let _ = r.join();
                }
            });
        return Ok(r);
    }
    let status = child.wait();
    if let Some(r) = relay {
        let _ = r.join();
    }
    let result = result?;
    let status = status.map_err(|source| ClientError::Server {
        what: "waiting for band-server",
        source,
    })?;
    match result {
        Some(r) => Ok(r),
        None if !status.success() && !root => Err(ClientError::user(
            format!("band-server exited ({status}) without a result"),
            HOW_TO_CHOOSE,
        )),
        None => Err(ClientError::Protocol(format!(
            "band-server exited ({status}) without a result"
        ))),
    }
}

/// After the request: make the run's record durable (`recorded`), then tell band-server the
/// script may start (`go`), or, when the record failed, `cancel` (the script never starts, and
/// the failure is returned). A request without `start_on_go` was recorded before it was sent.
fn say_go(
    to_server: &mut impl Write,
    req: &RunRequest,
    recorded: &dyn Fn() -> Result<()>,
) -> Result<()> {
    if !req.start_on_go {
        return Ok(());
    }
    let outcome = recorded();
    let say = if outcome.is_ok() {
        Message::Go
    } else {
        Message::Cancel
    };
    // A server that went away is seen in what is read next.
    let _ = to_server.write_all(format!("{}\n", serde_json::to_string(&say)?).as_bytes());
    outcome
}

/// The request, then `hold` (band-server holds the run's end for band's result).
fn request_lines(req: &RunRequest) -> Result<String> {
    let mut line = serde_json::to_string(&Message::Request(Box::new(req.clone())))?;
    line.push('\n');
    line.push_str(&serde_json::to_string(&Message::Hold)?);
    line.push('\n');
    Ok(line)
}

/// One run on the warm band-server, whose forked child serves it as `band-server run` would
/// (same framing, hold and cancel: the connection is its input and its output). `Ok(None)` when
/// no byte came back, so that a band-server of the run's own may serve it without running it
/// twice: the warm server writes a blank line before it reads a request, and closes a
/// connection unread when it no longer serves these settings.
fn run_warm(
    conn: UnixStream,
    req: &RunRequest,
    on_event: &mut dyn FnMut(&proto::Event),
    cancel: &Cancel,
    recorded: &dyn Fn() -> Result<()>,
) -> Result<Option<RunResult>> {
    let mut writer = conn.try_clone().map_err(|source| ClientError::Server {
        what: "cannot use the connection to the warm band-server",
        source,
    })?;
    // A server that closed the connection unread fails this write: judged by what is read.
    // The shape line first: the warm server hands the connection to a spare of this shape.
    let lines = req.shape_line() + &request_lines(req)?;
    let _ = writer.write_all(lines.as_bytes());
    let go = say_go(&mut writer, req, recorded);
    let done = Arc::new(AtomicBool::new(false));
    hold_open(writer, cancel.clone(), done.clone());
    let mut got = false;
    let result = read_messages(
        BufReader::new(Counted {
            inner: conn,
            got: &mut got,
        }),
        on_event,
    );
    done.store(true, Ordering::SeqCst);
    cancel.wake();
    go?;
    match result {
        Ok(Some(r)) => Ok(Some(r)),
        _ if !got => Ok(None),
        Ok(None) => Err(ClientError::Protocol(
            "the warm band-server closed the connection without a result".into(),
        )),
        Err(e) => Err(e),
    }
}

/// A reader that notes whether any byte came through.
struct Counted<'a, R> {
    inner: R,
    got: &'a mut bool,
}

impl<R: std::io::Read> std::io::Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        *self.got |= n > 0;
        Ok(n)
    }
}

/// What an ordinary user can do when the host target cannot start band-server.
pub const HOW_TO_CHOOSE: &str = "run skills in a VM instead: `band setup` once, then runs go there (or pass `--target qemu`); or, for the host target, run band as root or allow `sudo -n` to run band-server";

/// The host target without root: band-server needs root, which only `sudo -n` can give. `None`
/// when sudo is installed and may run `server` without a password; else the error, which names
/// sudo (not band-server, which may well be there) and the two ways out.
pub fn without_root(server: &Path, sudo_installed: bool, sudo_allows: bool) -> Option<ClientError> {
    let why = if !sudo_installed {
        "`sudo` is not installed"
    } else if !sudo_allows {
        "`sudo -n` may not run it"
    } else {
        return None;
    };
    Some(ClientError::user(
        format!(
            "the host target runs band-server ({}) as root; you are not root and {why}",
            server.display()
        ),
        HOW_TO_CHOOSE,
    ))
}

/// The variables band-server is started with besides those it reads ([`crate::warm::ENV_INPUTS`]):
/// where programs are, the locale, and the proxy settings its package builds go through.
pub const SERVER_ENV_PASSED: [&str; 10] = [
    "PATH",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
];

/// Start band-server (a run's own, or the warm one) with a clean environment: only what it reads
/// and [`SERVER_ENV_PASSED`]. A declared secret reaches band-server in the request of its run and
/// nowhere else, so neither the run's server nor a warm one (alive for minutes) holds one in
/// `/proc/PID/environ`, and no other variable of the caller's (tokens band never declared) does.
fn server_env(cmd: &mut Command) {
    cmd.env_clear();
    for name in crate::warm::ENV_INPUTS.iter().chain(&SERVER_ENV_PASSED) {
        if let Some(v) = std::env::var_os(name) {
            cmd.env(name, v);
        }
    }
}

/// May `sudo -n` run `server` (no password asked)? `sudo -n -l CMD` answers without running it.
pub fn sudo_allows(server: &Path) -> bool {
    Command::new("sudo")
        .arg("-n")
        .arg("-l")
        .arg(server)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Can the host target start band-server here: root, or sudo that may run it?
pub fn host_can_start() -> bool {
    is_root() || (crate::vm::cmd::which("sudo").is_some() && sudo_allows(&server_path()))
}

/// Copy band-server's stderr to `out` line by line, every declared secret masked, on a thread
/// (joined once band-server has exited and its stderr is at EOF).
fn relay_masked(
    from: impl std::io::Read + Send + 'static,
    masker: Masker,
    mut out: impl Write + Send + 'static,
) -> Option<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("band-server-stderr".into())
        .spawn(move || {
            let mut reader = BufReader::new(from);
            let mut line = Vec::new();
            while matches!(reader.read_until(b'\n', &mut line), Ok(n) if n > 0) {
                let text = String::from_utf8_lossy(&line);
                let _ = out.write_all(masker.mask(&text).as_bytes());
                let _ = out.flush();
                line.clear();
            }
        })
        .ok()
}

/// How often the holder looks whether the run is over (when neither a cancel nor the end of the
/// run wakes it first).
const HOLD_POLL: Duration = Duration::from_millis(50);

/// Hold band-server's input open on a thread until `done`; on `cancel`, send `cancel` and close
/// it.
fn hold_open(mut stdin: impl Write + Send + 'static, cancel: Cancel, done: Arc<AtomicBool>) {
    // Not joined (see `run`). Without a thread, the input closes at once, and band-server
    // cancels the run: as when band dies.
    let _ = std::thread::Builder::new()
        .name("band-server-stdin".into())
        .spawn(move || {
            while !done.load(Ordering::SeqCst) {
                if cancel.wait_unless(HOLD_POLL, &done) {
                    if let Ok(line) = serde_json::to_string(&Message::Cancel) {
                        let _ = stdin.write_all(format!("{line}\n").as_bytes());
                    }
                    return;
                }
            }
        });
}

/// Read protocol lines up to the result, band-server's last line: events go to `on_event`, the
/// result is returned (`None` when the stream ends without one). Nothing after the result is
/// read: band goes on even while another process still holds band-server's output open (`sudo`,
/// which waits for band-server through its teardown, or a wrapper script).
pub fn read_messages(
    reader: impl BufRead,
    on_event: &mut dyn FnMut(&proto::Event),
) -> Result<Option<RunResult>> {
    for line in reader.lines() {
        let line = line.map_err(|source| ClientError::Server {
            what: "reading from band-server",
            source,
        })?;
        if line.trim().is_empty() {
            // The framing skips blank lines (a warm server's first byte is one).
            continue;
        }
        match serde_json::from_str::<Message>(&line) {
            Ok(Message::Result(r)) => return Ok(Some(*r)),
            Ok(Message::Event(ev)) => on_event(&ev),
            Ok(_) => {}
            Err(e) => eprintln!("band: ignoring a malformed line from band-server: {e}"),
        }
    }
    Ok(None)
}

/// The band-server binary: $BAND_SERVER, next to this executable, or on PATH.
pub fn server_path() -> PathBuf {
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn band_server_stderr_reaches_the_user_with_secrets_masked() {
        let secrets = BTreeMap::from([("API_TOKEN".to_string(), "s3cr3t-t0ken-value".to_string())]);
        let said = "band-server: teardown: cannot remove /x/s3cr3t-t0ken-value\nsecond line, no secret\nlast s3cr3t-t0ken-value";
        let out = Shared::default();
        relay_masked(
            std::io::Cursor::new(said.as_bytes().to_vec()),
            Masker::new(&secrets),
            out.clone(),
        )
        .unwrap()
        .join()
        .unwrap();
        let shown = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert_eq!(shown.lines().count(), 3, "{shown}");
        assert!(shown.contains("second line, no secret\n"), "{shown}");
        assert!(shown.contains("API_TOKEN"), "{shown}");
    }

    /// Lines, then a read that never ends (a process that still holds the stream open): here an
    /// error, which a read past the lines would return.
    struct HeldOpen(std::io::Cursor<Vec<u8>>);

    impl std::io::Read for HeldOpen {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            match self.0.read(buf)? {
                0 => Err(std::io::Error::other("read past the result")),
                n => Ok(n),
            }
        }
    }

    #[test]
    fn the_result_ends_the_read_even_while_the_stream_stays_open() {
        let event = Message::Event(proto::Event::Stdout {
            data: "hello\n".into(),
        });
        let result = Message::Result(Box::new(RunResult::setup_failed(
            "0123456789abcdef",
            proto::Layer::Process,
            "the last line",
            None,
        )));
        let text = format!(
            "{}\n{}\n",
            serde_json::to_string(&event).unwrap(),
            serde_json::to_string(&result).unwrap()
        );
        let mut events = Vec::new();
        let got = read_messages(
            BufReader::new(HeldOpen(std::io::Cursor::new(text.into_bytes()))),
            &mut |ev| events.push(ev.clone()),
        )
        .unwrap()
        .expect("a result");
        assert_eq!(got.run_id, "0123456789abcdef");
        assert_eq!(events.len(), 1);
        // Without a result, the end of the stream is the answer.
        let none = read_messages(
            BufReader::new(std::io::Cursor::new(Vec::new())),
            &mut |_| {},
        );
        assert!(matches!(none, Ok(None)));
    }

    #[test]
    fn go_follows_the_record_and_a_record_that_failed_cancels() {
        let mut req: RunRequest = serde_json::from_value(serde_json::json!({
            "protocol": proto::PROTOCOL_VERSION,
            "run_id": "0123456789abcdef",
            "skill": "s",
            "script": "run",
            "entry": "scripts/run.sh",
            "bundle": [],
            "bundle_sha256": "00",
            "policy": {},
            "input": {},
            "start_on_go": true
        }))
        .expect("a request");
        let said = |req: &RunRequest, recorded: bool| {
            let mut out = Vec::new();
            let calls = std::cell::Cell::new(0);
            let r = say_go(&mut out, req, &|| {
                calls.set(calls.get() + 1);
                if recorded {
                    Ok(())
                } else {
                    Err(ClientError::Protocol("no disk".into()))
                }
            });
            (
                r.is_ok(),
                String::from_utf8(out).expect("utf-8"),
                calls.get(),
            )
        };
        assert_eq!(said(&req, true), (true, "{\"type\":\"go\"}\n".into(), 1));
        // The record failed: band-server hears `cancel` (the script never starts), and the
        // failure is the run's.
        assert_eq!(
            said(&req, false),
            (false, "{\"type\":\"cancel\"}\n".into(), 1)
        );
        // A request without `start_on_go` was recorded before it was sent: nothing to say.
        req.start_on_go = false;
        assert_eq!(said(&req, true), (true, String::new(), 0));
    }

    #[test]
    fn without_root_the_error_names_sudo_and_the_two_ways() {
        let server = Path::new("/opt/band/band-server");
        assert!(without_root(server, true, true).is_none());
        for (installed, why) in [
            (false, "`sudo` is not installed"),
            (true, "`sudo -n` may not run it"),
        ] {
            let e = without_root(server, installed, false).expect("an error");
            assert_eq!(
                e.to_string(),
                format!(
                    "the host target runs band-server (/opt/band/band-server) as root; you are not root and {why}"
                )
            );
            let hint = e.hint().expect("a hint");
            assert!(hint.contains("`band setup`"), "{hint}");
            assert!(hint.contains("sudo -n"), "{hint}");
        }
    }
}
