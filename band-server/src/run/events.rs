//! The run's events: the sink that writes them to the client, the thread that serves the
//! sandbox's pipes (stdout, stderr, the jail's status and input, bubblewrap's exit), and the loop
//! that handles them until the run ends.

use std::fs::File;
use std::io::{BufRead, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use band::proto::{CliCall, Denial, Event, Layer, Message};

use super::RunGuard;
use crate::collect::Capture;
use crate::config::EffectiveLimits;
use crate::error::{LayerExt, SetupError, SetupResult};
use crate::layers::cgroup::KILL_DEADLINE;
use crate::layers::cli::reports::Report;
use crate::layers::net::{self, dns::Lookup};

/// CLI calls kept for `result.cli_calls` / insist checks; later ones are still streamed.
pub(super) const MAX_CALLS_KEPT: usize = 10_000;

/// Where events go (band-server's stdout), through a writer thread: the run loop never blocks
/// on a slow client, so the wall clock is enforced whatever the client does. The queue is bounded
/// by the log caps and `MAX_CALLS_KEPT`. Write errors (client gone) are ignored: the run still
/// tears down properly.
pub struct EventSink {
    tx: Mutex<Option<Sender<Vec<u8>>>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Told by the writer thread once it has written everything and dropped its output.
    done: Mutex<Receiver<()>>,
}

impl EventSink {
    pub fn new(mut out: Box<dyn Write + Send>) -> EventSink {
        let (tx, rx) = mpsc::channel::<Vec<u8>>();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let writer = std::thread::Builder::new()
            .name("events".into())
            .spawn(move || {
                // What is queued by the time the writer wakes goes out in one write.
                while let Ok(mut lines) = rx.recv() {
                    while let Ok(more) = rx.try_recv() {
                        lines.extend_from_slice(&more);
                    }
                    let _ = out.write_all(&lines);
                    let _ = out.flush();
                }
                drop(out);
                let _ = done_tx.send(());
            })
            .ok();
        EventSink {
            tx: Mutex::new(Some(tx)),
            writer: Mutex::new(writer),
            done: Mutex::new(done_rx),
        }
    }

    /// Stop taking messages, and wait up to `max` for the writer to write out what is queued
    /// and drop its output (closing standard output, [`ClosingStdout`]). Whether it did: a
    /// client that does not read cannot hold the caller longer than `max`. [`EventSink::finish`]
    /// still joins the writer.
    pub(crate) fn close_within(&self, max: Duration) -> bool {
        if let Ok(mut tx) = self.tx.lock() {
            tx.take();
        }
        self.done
            .lock()
            .map(|d| d.recv_timeout(max).is_ok())
            .unwrap_or(false)
    }

    pub fn send(&self, msg: &Message) {
        let Ok(mut line) = serde_json::to_vec(msg) else {
            return;
        };
        line.push(b'\n');
        if let Ok(tx) = self.tx.lock()
            && let Some(tx) = tx.as_ref()
        {
            let _ = tx.send(line);
        }
    }

    pub(crate) fn event(&self, ev: Event) {
        self.send(&Message::Event(ev));
    }

    /// Write out everything queued and stop the writer.
    pub fn finish(&self) {
        if let Ok(mut tx) = self.tx.lock() {
            tx.take();
        }
        if let Ok(mut w) = self.writer.lock()
            && let Some(w) = w.take()
        {
            let _ = w.join();
        }
    }
}

/// Standard output as an [`EventSink`]'s writer, closed (fd 1 made `/dev/null`) when the sink
/// finishes and drops it: a client that reads to the end of output (band's host transport) has
/// it as soon as the result is written, while band-server goes on removing the run
/// (`run::serve`).
pub struct ClosingStdout(pub std::io::Stdout);

impl Write for ClosingStdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl Drop for ClosingStdout {
    fn drop(&mut self) {
        let _ = self.0.flush();
        if let Ok(null) = fs_err::OpenOptions::new().write(true).open("/dev/null") {
            let _ = rustix::stdio::dup2_stdout(null.file());
        }
    }
}

/// Whether the run's client is gone or asked to stop, and what else it said while the run runs:
/// bytes for the script's stdin, a signal. Set by [`watch_client`]'s thread, read by the run
/// loop, which kills the run when the client is gone (status `cancelled`).
#[derive(Debug, Clone)]
pub(crate) struct ClientGone(Arc<Said>);

#[derive(Debug)]
struct Said {
    gone: AtomicBool,
    /// The last signal asked for and not yet sent (0: none).
    signal: AtomicI32,
    /// The script's stdin: chunks, then `None` for its end. The sender is the watcher's, the
    /// receiver the stdin writer's ([`ClientGone::take_stdin`]).
    stdin_tx: Mutex<Sender<Option<Vec<u8>>>>,
    stdin_rx: Mutex<Option<Receiver<Option<Vec<u8>>>>>,
    /// `go` heard, or the channel done ([`ClientGone::wait_for_go`]).
    go: Mutex<Go>,
    go_changed: Condvar,
}

/// What [`ClientGone::wait_for_go`] waits on.
#[derive(Debug, Default)]
struct Go {
    said: bool,
    /// The client's channel ended (or it said `cancel`): no `go` comes any more.
    over: bool,
}

impl Default for ClientGone {
    fn default() -> ClientGone {
        let (tx, rx) = mpsc::channel();
        ClientGone(Arc::new(Said {
            gone: AtomicBool::new(false),
            signal: AtomicI32::new(0),
            stdin_tx: Mutex::new(tx),
            stdin_rx: Mutex::new(Some(rx)),
            go: Mutex::new(Go::default()),
            go_changed: Condvar::new(),
        }))
    }
}

/// The signals a client may send to a run: SIGINT, SIGKILL, SIGTERM (sandboxd's `Signal`).
pub(crate) const CLIENT_SIGNALS: [i32; 3] = [2, 9, 15];

impl ClientGone {
    pub(crate) fn set(&self) {
        self.0.gone.store(true, Ordering::SeqCst);
        self.no_more_go();
    }

    /// The client's channel is done: a run waiting for `go` stops waiting.
    fn no_more_go(&self) {
        if let Ok(mut g) = self.0.go.lock() {
            g.over = true;
        }
        self.0.go_changed.notify_all();
    }

    /// For a request with `start_on_go`: wait until the client says `go` (true), or its channel
    /// ends, it cancels, or `limit` passes first (false: the script must not start).
    pub(crate) fn wait_for_go(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let Ok(mut g) = self.0.go.lock() else {
            return false;
        };
        loop {
            if g.said {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if g.over || self.is_set() || left.is_zero() {
                return false;
            }
            g = match self.0.go_changed.wait_timeout(g, left) {
                Ok((g, _)) => g,
                Err(_) => return false,
            };
        }
    }

    pub(crate) fn is_set(&self) -> bool {
        self.0.gone.load(Ordering::SeqCst)
    }

    /// What the client said besides `hold` and `cancel`.
    fn heard(&self, msg: Message) {
        use base64::Engine as _;
        match msg {
            Message::Signal { signal } if CLIENT_SIGNALS.contains(&signal) => {
                self.0.signal.store(signal, Ordering::SeqCst);
            }
            Message::Go => {
                if let Ok(mut g) = self.0.go.lock() {
                    g.said = true;
                }
                self.0.go_changed.notify_all();
            }
            Message::Stdin { data, eof } => {
                let Ok(tx) = self.0.stdin_tx.lock() else {
                    return;
                };
                if let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(data)
                    && !bytes.is_empty()
                {
                    let _ = tx.send(Some(bytes));
                }
                if eof {
                    let _ = tx.send(None);
                }
            }
            _ => {}
        }
    }

    /// The signal the client asked for since the last call, if any.
    pub(crate) fn take_signal(&self) -> Option<i32> {
        match self.0.signal.swap(0, Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }

    /// The stdin chunks, for the one thread that writes them to the script.
    pub(crate) fn take_stdin(&self) -> Option<Receiver<Option<Vec<u8>>>> {
        self.0.stdin_rx.lock().ok().and_then(|mut r| r.take())
    }
}

/// Write what the client sends for the script's stdin into its pipe, on a thread, until its end
/// (the pipe closed: EOF for the script), the script closes its end, or the run is over.
pub(super) fn spawn_stdin_writer(mut pipe: std::process::ChildStdin, gone: &ClientGone) {
    let Some(rx) = gone.take_stdin() else {
        return;
    };
    let spawned = std::thread::Builder::new()
        .name("stdin".into())
        .spawn(move || {
            while let Ok(Some(chunk)) = rx.recv() {
                if pipe.write_all(&chunk).is_err() {
                    break;
                }
            }
        });
    if let Err(e) = spawned {
        crate::say!("band-server: cannot feed the script's stdin ({e})");
    }
}

/// What the client said after its request, line by line (see `band::proto`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientSays {
    /// `cancel`, or EOF after `hold`: cancel the run.
    Cancel,
    /// EOF without `hold` (a client that closes its end after the request), or nothing to act on.
    Nothing,
}

/// Read what follows the request until it says to cancel or ends; every other message
/// (`stdin`, `signal`) goes to `heard`. Pure over its input, so the protocol is tested without a
/// run.
pub(crate) fn client_verdict(
    input: &mut dyn BufRead,
    heard: &mut dyn FnMut(Message),
) -> ClientSays {
    let mut held = false;
    let mut line = String::new();
    loop {
        line.clear();
        // Lines are small (band-sandboxd sends stdin in chunks that fit); a client that sends a
        // huge one is cut off at 4 KiB per read.
        match (&mut *input).take(4096).read_line(&mut line) {
            Ok(0) | Err(_) => {
                return if held {
                    ClientSays::Cancel
                } else {
                    ClientSays::Nothing
                };
            }
            Ok(_) => match serde_json::from_str::<Message>(line.trim_end()) {
                Ok(Message::Hold) => held = true,
                Ok(Message::Cancel) => return ClientSays::Cancel,
                Ok(other) => heard(other),
                Err(_) => {}
            },
        }
    }
}

/// Watch the client's channel (band-server's stdin, after the request) on a thread: a `cancel`
/// line, or the end of input after `hold` (the client died, its pipe or ssh channel closed),
/// sets the returned flag; stdin and signals are passed on.
pub(crate) fn watch_client(mut input: Box<dyn BufRead + Send>) -> ClientGone {
    let gone = ClientGone::default();
    let flag = gone.clone();
    let spawned = std::thread::Builder::new()
        .name("client".into())
        .spawn(move || {
            let said = flag.clone();
            let verdict = client_verdict(&mut *input, &mut |m| said.heard(m));
            // The client's channel is done: so is the script's stdin.
            if let Ok(tx) = flag.0.stdin_tx.lock() {
                let _ = tx.send(None);
            }
            if verdict == ClientSays::Cancel {
                flag.set();
            }
            flag.no_more_go();
        });
    if let Err(e) = spawned {
        crate::say!("band-server: cannot watch the client ({e}); a vanished client is not noticed");
        gone.no_more_go();
    }
    gone
}

/// Messages to the run loop.
pub(super) enum Msg {
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    StdoutEof,
    StderrEof,
    Jail(String),
    /// The jail's status pipe is closed (its status line, if any, was sent before).
    JailEof,
    Report(Report),
    Dns(Lookup),
    /// A refusal of the egress proxy (or the stub's, for a placeholder in a name), as it happens.
    Denied(Denial),
    /// bubblewrap has exited (not yet reaped): the loop looks at once ([`spawn_pipes`]).
    Exited,
    /// [`REPORTS_WAKE`] CLI reports are queued ([`ReportQueue`]): the loop takes them now.
    Reports,
}

/// The CLI reports on their way to the run loop. A report worker queues a call's record before it
/// answers band-shim, so the call is on record before its command can run, but it does not wake
/// the loop: a wake per command had the loop, the event writer and the client run between
/// band-shim's answer and the command, on the same CPU of a small machine (issue 17, round 18).
/// The loop takes what is queued each time it wakes ([`Inbox`]): at least every [`POLL`], at once
/// when [`REPORTS_WAKE`] are queued, and at the end, after the report socket has stopped.
pub(super) struct ReportQueue {
    queued: Mutex<Vec<Report>>,
    wake: Mutex<Sender<Msg>>,
}

/// How many queued reports wake the run loop (which streams them to the client as events): the
/// queue stays small however fast a script starts commands.
pub(super) const REPORTS_WAKE: usize = 256;

impl ReportQueue {
    pub(super) fn new(wake: Sender<Msg>) -> ReportQueue {
        ReportQueue {
            queued: Mutex::new(Vec::new()),
            wake: Mutex::new(wake),
        }
    }

    pub(super) fn push(&self, report: Report) {
        let queued = match self.queued.lock() {
            Ok(mut q) => {
                q.push(report);
                q.len()
            }
            Err(_) => return,
        };
        if queued == REPORTS_WAKE
            && let Ok(tx) = self.wake.lock()
        {
            let _ = tx.send(Msg::Reports);
        }
    }

    fn take(&self) -> Vec<Report> {
        self.queued
            .lock()
            .map(|mut q| std::mem::take(&mut *q))
            .unwrap_or_default()
    }
}

/// What the run loop reads: the channel's messages and the queued reports ([`ReportQueue`]). A
/// report queued before a message arrived is read before it: a call is recorded before its
/// command runs, so before anything the command then writes.
pub(super) struct Inbox {
    rx: Receiver<Msg>,
    reports: Arc<ReportQueue>,
    next: std::cell::RefCell<std::collections::VecDeque<Msg>>,
}

impl Inbox {
    pub(super) fn new(rx: Receiver<Msg>, reports: Arc<ReportQueue>) -> Inbox {
        Inbox {
            rx,
            reports,
            next: Default::default(),
        }
    }

    /// The next message lined up: what was lined up before, then the reports queued now, then
    /// `msg` (when there is one).
    fn line_up(&self, msg: Option<Msg>) -> Option<Msg> {
        let mut next = self.next.borrow_mut();
        next.extend(self.reports.take().into_iter().map(Msg::Report));
        next.extend(msg);
        next.pop_front()
    }

    /// The next message, waiting up to `wait` for one.
    pub(super) fn recv_timeout(&self, wait: Duration) -> Result<Msg, RecvTimeoutError> {
        if let Some(msg) = self.line_up(None) {
            return Ok(msg);
        }
        let msg = self.rx.recv_timeout(wait)?;
        Ok(self.line_up(Some(msg)).unwrap_or(Msg::Reports))
    }

    /// The next message, if one is there.
    pub(super) fn try_recv(&self) -> Option<Msg> {
        self.line_up(None)
            .or_else(|| self.line_up(self.rx.try_recv().ok()))
    }
}

/// The sandbox's pipes, on one thread ([`spawn_pipes`]): the script's stdout and stderr (this
/// one read through the run's judge, `heard`), the jail's status pipe, bubblewrap's pidfd, and
/// the jail's input (its secrets) to write.
pub(super) struct Pipes<O, E> {
    pub(super) stdout: Option<O>,
    pub(super) stderr: Option<E>,
    /// The jail's status: a line, `ok` or `err <layer> <message>`.
    pub(super) status: OwnedFd,
    /// bubblewrap's pidfd: readable once it has exited (it is not reaped here). `None` without
    /// pidfds (Linux before 5.3): the run loop's polling alone notices the exit.
    pub(super) exit: Option<OwnedFd>,
    /// The jail's input pipe, and what to write to it.
    pub(super) input: (OwnedFd, Vec<u8>),
}

/// How much of the jail's status pipe is read: its one line is short.
const STATUS_MAX: usize = 64 * 1024;

/// Start the thread, `pipes`, that serves every pipe of [`Pipes`] with `poll(2)` and sends the
/// run loop what a thread per pipe sent before: stdout and stderr in chunks as they come, then
/// [`Msg::StdoutEof`] and [`Msg::StderrEof`]; the jail's status lines, then [`Msg::JailEof`];
/// [`Msg::Exited`] the moment bubblewrap exits (instead of at the loop's next look,
/// [`EXITING_POLL`] after the output pipes closed). It writes the jail's input as the pipe takes
/// it, so an input larger than the pipe never stops the output from being read, and a jail that
/// dies before reading it costs only the write. One thread instead of five: starting and ending
/// a thread costs a run 40–50 µs of CPU (docs/architecture.md, "Where a run's time goes").
///
/// A chunk the loop no longer takes (it has ended) is dropped: the pipes are still drained, so
/// a writer in the sandbox never blocks on them. The thread ends once every pipe is closed and
/// bubblewrap has exited.
pub(super) fn spawn_pipes<O, E>(pipes: Pipes<O, E>, tx: Sender<Msg>) -> SetupResult<()>
where
    O: Read + AsFd + Send + 'static,
    E: Read + AsFd + Send + 'static,
{
    // Written as the pipe takes it, from the poll loop.
    rustix::fs::fcntl_setfl(&pipes.input.0, rustix::fs::OFlags::NONBLOCK)
        .map_err(std::io::Error::from)
        .layer(Layer::Secrets, "failed to set up the jail's input pipe")?;
    std::thread::Builder::new()
        .name("pipes".into())
        .spawn(move || pump(pipes, &tx))
        .map(|_| ())
        .layer(
            Layer::Process,
            "failed to start the thread that reads the sandbox's pipes",
        )
}

/// A source [`pump`] polls.
#[derive(Clone, Copy)]
enum Source {
    Stdout,
    Stderr,
    Status,
    Exit,
    Input,
}

/// What a read of an output pipe gave.
enum Got {
    Chunk(Vec<u8>),
    /// Nothing now (interrupted, or nothing to read after all).
    Nothing,
    /// Closed (or broken: the same for the run).
    End,
}

/// An error of a read or write on a pipe that only says "not now": try again when poll says so.
fn not_now(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock
    )
}

fn read_chunk(r: &mut impl Read, buf: &mut [u8]) -> Got {
    match r.read(buf) {
        Ok(0) => Got::End,
        Ok(n) => Got::Chunk(buf[..n].to_vec()),
        Err(e) if not_now(&e) => Got::Nothing,
        Err(_) => Got::End,
    }
}

/// What one read of an output pipe gave, sent on: a chunk as `chunk`, its end as `end` (the pipe
/// is then closed here).
fn pass_output<R: Read>(
    pipe: &mut Option<R>,
    buf: &mut [u8],
    send: &dyn Fn(Msg),
    chunk: fn(Vec<u8>) -> Msg,
    end: Msg,
) {
    match pipe.as_mut().map(|p| read_chunk(p, buf)) {
        Some(Got::Chunk(c)) => send(chunk(c)),
        Some(Got::End) => {
            *pipe = None;
            send(end);
        }
        _ => {}
    }
}

/// The loop of [`spawn_pipes`]'s thread.
fn pump<O: Read + AsFd, E: Read + AsFd>(pipes: Pipes<O, E>, tx: &Sender<Msg>) {
    use rustix::event::{PollFd, PollFlags, poll};
    let Pipes {
        mut stdout,
        mut stderr,
        status,
        mut exit,
        input,
    } = pipes;
    let mut status = Some(File::from(status));
    let (mut status_line, mut status_read) = (Vec::new(), 0usize);
    let (input_fd, input_data) = input;
    let mut input = (!input_data.is_empty()).then_some(File::from(input_fd));
    let mut written = 0usize;
    let send = |m: Msg| {
        // The loop has ended: keep draining anyway.
        let _ = tx.send(m);
    };
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // The pipes still open: what each is polled for, and which it is.
        let open = [
            (
                stdout.as_ref().map(AsFd::as_fd),
                PollFlags::IN,
                Source::Stdout,
            ),
            (
                stderr.as_ref().map(AsFd::as_fd),
                PollFlags::IN,
                Source::Stderr,
            ),
            (
                status.as_ref().map(AsFd::as_fd),
                PollFlags::IN,
                Source::Status,
            ),
            (exit.as_ref().map(AsFd::as_fd), PollFlags::IN, Source::Exit),
            (
                input.as_ref().map(AsFd::as_fd),
                PollFlags::OUT,
                Source::Input,
            ),
        ];
        let (mut fds, sources): (Vec<PollFd<'_>>, Vec<Source>) = open
            .into_iter()
            .filter_map(|(fd, flags, source)| {
                fd.map(|fd| (PollFd::from_borrowed_fd(fd, flags), source))
            })
            .unzip();
        if fds.is_empty() {
            return;
        }
        match poll(&mut fds, None) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            // Not expected with valid descriptors; the loop's own polling and its kill path
            // still end the run.
            Err(_) => return,
        }
        let ready: Vec<Source> = fds
            .iter()
            .zip(&sources)
            .filter(|(f, _)| !f.revents().is_empty())
            .map(|(_, s)| *s)
            .collect();
        drop(fds);
        for source in ready {
            match source {
                Source::Stdout => {
                    pass_output(&mut stdout, &mut buf, &send, Msg::Stdout, Msg::StdoutEof)
                }
                Source::Stderr => {
                    pass_output(&mut stderr, &mut buf, &send, Msg::Stderr, Msg::StderrEof)
                }
                Source::Status => {
                    let room = STATUS_MAX - status_read;
                    let got = match status.as_mut() {
                        Some(s) => read_chunk(s, &mut buf[..room]),
                        None => Got::Nothing,
                    };
                    let end = match got {
                        Got::Chunk(c) => {
                            status_read += c.len();
                            status_line.extend_from_slice(&c);
                            while let Some(at) = status_line.iter().position(|b| *b == b'\n') {
                                let line: Vec<u8> = status_line.drain(..=at).collect();
                                send(Msg::Jail(String::from_utf8_lossy(&line).into_owned()));
                            }
                            status_read == STATUS_MAX
                        }
                        Got::Nothing => false,
                        Got::End => true,
                    };
                    if end {
                        status = None;
                        if !status_line.is_empty() {
                            let rest = std::mem::take(&mut status_line);
                            send(Msg::Jail(String::from_utf8_lossy(&rest).into_owned()));
                        }
                        send(Msg::JailEof);
                    }
                }
                Source::Exit => {
                    exit = None;
                    send(Msg::Exited);
                }
                Source::Input => {
                    let done = match input.as_mut().map(|i| i.write(&input_data[written..])) {
                        Some(Ok(n)) => {
                            written += n;
                            written == input_data.len()
                        }
                        Some(Err(e)) if not_now(&e) => false,
                        // The jail is gone (its status says why) or took all it will.
                        _ => true,
                    };
                    if done {
                        input = None;
                    }
                }
            }
        }
    }
}

/// bubblewrap's pidfd, for [`Pipes::exit`]: opened before anything can reap the child, so it
/// names bubblewrap and nothing else. `None` without pidfds (Linux before 5.3).
pub(super) fn exit_pidfd(child: &std::process::Child) -> Option<OwnedFd> {
    use rustix::process::{Pid, PidfdFlags, pidfd_open};
    pidfd_open(Pid::from_child(child), PidfdFlags::empty()).ok()
}

/// Parse a jail status line: `ok`, or `err <layer> <message>`.
pub(crate) fn parse_jail_status(line: &str) -> Option<Result<(), SetupError>> {
    let line = line.trim_end();
    if line == "ok" {
        return Some(Ok(()));
    }
    let rest = line.strip_prefix("err ")?;
    let (layer, msg) = rest.split_once(' ').unwrap_or((rest, ""));
    // The jail names one of the layers every band knows; anything else is the process's.
    let layer = Layer::known(layer).unwrap_or(Layer::Process);
    Some(Err(SetupError::new(layer, format!("band-jail: {msg}"))))
}

pub(super) struct LoopState {
    pub(super) stdout: Capture,
    pub(super) stderr: Capture,
    pub(super) stdout_eof: bool,
    pub(super) stderr_eof: bool,
    pub(super) jail_eof: bool,
    pub(super) calls: Vec<CliCall>,
    pub(super) denied: Vec<Denial>,
    pub(super) denial_count: u64,
    /// The egress proxy's denials already streamed ([`Msg::Denied`]): the end's list of them
    /// adds only the others.
    pub(super) streamed: Vec<Denial>,
    pub(super) forged: usize,
    pub(super) forged_why: Vec<String>,
    /// The programs the program cache refused ([`Report::CacheRefused`]), each told once.
    pub(super) cache_refused: std::collections::BTreeSet<String>,
    pub(super) jail: Option<Result<(), SetupError>>,
    pub(super) timed_out: bool,
    /// What the run was still listening on when it timed out (read before the kill).
    pub(super) listening: Vec<String>,
    /// The run's nftables table vanished mid-run; the run was killed.
    pub(super) net_lost: bool,
    /// The client went away or asked to stop; the run was killed.
    pub(super) cancelled: bool,
    pub(super) log_bytes: u64,
}

impl LoopState {
    pub(super) fn new(l: &EffectiveLimits) -> LoopState {
        LoopState {
            stdout: Capture::new(l.log_bytes),
            stderr: Capture::new(l.log_bytes),
            stdout_eof: false,
            stderr_eof: false,
            jail_eof: false,
            calls: Vec::new(),
            denied: Vec::new(),
            denial_count: 0,
            streamed: Vec::new(),
            forged: 0,
            forged_why: Vec::new(),
            cache_refused: std::collections::BTreeSet::new(),
            jail: None,
            timed_out: false,
            listening: Vec::new(),
            net_lost: false,
            cancelled: false,
            log_bytes: l.log_bytes,
        }
    }

    pub(super) fn handle(&mut self, msg: Msg, sink: &EventSink) {
        match msg {
            Msg::Stdout(chunk) => {
                let (text, crossed) = self.stdout.push(&chunk);
                if !text.is_empty() {
                    sink.event(Event::Stdout { data: text });
                }
                if crossed {
                    sink.event(Event::Limit {
                        limit: "log".into(),
                        detail: format!(
                            "stdout over maxLogBytes {}; the rest is discarded",
                            self.log_bytes
                        ),
                    });
                }
            }
            Msg::Stderr(chunk) => {
                let (text, crossed) = self.stderr.push(&chunk);
                if !text.is_empty() {
                    sink.event(Event::Stderr { data: text });
                }
                if crossed {
                    sink.event(Event::Limit {
                        limit: "log".into(),
                        detail: format!(
                            "stderr over maxLogBytes {}; the rest is discarded",
                            self.log_bytes
                        ),
                    });
                }
            }
            Msg::StdoutEof => {
                self.stdout_eof = true;
                let rest = self.stdout.finish();
                if !rest.is_empty() {
                    sink.event(Event::Stdout { data: rest });
                }
            }
            Msg::StderrEof => {
                self.stderr_eof = true;
                let rest = self.stderr.finish();
                if !rest.is_empty() {
                    sink.event(Event::Stderr { data: rest });
                }
            }
            Msg::JailEof => self.jail_eof = true,
            Msg::Jail(line) => {
                if let Some(v) = parse_jail_status(&line) {
                    // An error after "ok" (execve failed) replaces it.
                    if self.jail.is_none() || v.is_err() {
                        self.jail = Some(v);
                    }
                }
            }
            Msg::Report(Report::Call(call)) => {
                // Beyond MAX_CALLS_KEPT, calls are neither streamed nor kept (memory stays
                // bounded however many commands a script runs); denials are still counted. What
                // is kept of each is its argv's start (`CliCall::recorded`).
                let call = call.recorded();
                if !call.allowed {
                    self.denial_count += 1;
                    if self.denied.len() < MAX_CALLS_KEPT {
                        let d = call.denial();
                        sink.event(Event::Cli(call.clone()));
                        sink.event(Event::Denied(d.clone()));
                        self.denied.push(d);
                    }
                } else if self.calls.len() < MAX_CALLS_KEPT {
                    sink.event(Event::Cli(call.clone()));
                }
                if self.calls.len() < MAX_CALLS_KEPT {
                    self.calls.push(call);
                }
            }
            Msg::Denied(d) => {
                self.denial_count += 1;
                sink.event(Event::Denied(d.clone()));
                if self.denied.len() < MAX_CALLS_KEPT {
                    self.denied.push(d.clone());
                }
                self.streamed.push(d);
            }
            Msg::Dns(l) => {
                if !l.allowed {
                    self.denial_count += 1;
                    if self.denied.len() < MAX_CALLS_KEPT {
                        let d = Denial::Dns { name: l.name };
                        sink.event(Event::Denied(d.clone()));
                        self.denied.push(d);
                    }
                }
            }
            // Once per program (a loop calling it again is told the same by band-shim each time):
            // at most one event per program of the run's table.
            Msg::Report(Report::CacheRefused { program, detail }) => {
                if self.cache_refused.insert(program) {
                    sink.event(Event::Limit {
                        limit: "program_cache".into(),
                        detail,
                    });
                }
            }
            Msg::Report(Report::Forged(why)) => {
                self.forged += 1;
                if self.forged_why.len() < band::proto::Forged::MAX_REASONS {
                    self.forged_why.push(why);
                }
            }
            // The run loop reaps it when it looks again, which this message makes happen now.
            Msg::Exited => {}
            // Read before this message (`Inbox`).
            Msg::Reports => {}
        }
    }
}

/// Without bubblewrap's pidfd ([`Pipes::exit`]), how often the run loop checks whether
/// bubblewrap exited, while messages are quiet …
const POLL: Duration = Duration::from_millis(20);
/// … and once its stdout and stderr are closed (it is exiting): a run's end is noticed within a
/// millisecond, not up to a whole [`POLL`] later …
const EXITING_POLL: Duration = Duration::from_millis(1);
/// … for this long after they closed; then back to [`POLL`].
const EXITING_WINDOW: Duration = Duration::from_millis(100);

/// Until bubblewrap exits or the deadline passes (then the cgroup is killed: `timeout`), or the
/// client is gone (then it is killed too: `cancelled`).
pub(super) fn run_loop(
    rx: &Inbox,
    guard: &mut RunGuard,
    held: &super::Handles,
    sink: &EventSink,
    st: &mut LoopState,
    deadline: Instant,
    gone: &ClientGone,
) -> Option<ExitStatus> {
    let mut next_watch = Instant::now() + net::WATCH_INTERVAL;
    let mut exiting_since: Option<Instant> = None;
    loop {
        if let Some(child) = guard.child.as_mut()
            && let Ok(Some(status)) = child.try_wait()
        {
            guard.child = None;
            return Some(status);
        }
        let now = Instant::now();
        if let Some(n) = held.net.as_ref().and_then(|n| guard.get(n))
            && now >= next_watch
        {
            next_watch = now + net::WATCH_INTERVAL;
            if !n.table_present() {
                // Fail closed: without its table the run's uid would reach everything.
                st.net_lost = true;
                if let Some(cg) = guard.get(&held.cgroup) {
                    let _ = cg.kill_all(KILL_DEADLINE);
                }
                return guard.child.take().and_then(|mut c| {
                    let _ = c.kill();
                    c.wait().ok()
                });
            }
        }
        if let Some(signal) = gone.take_signal()
            && let Some(cg) = guard.get(&held.cgroup)
        {
            // The script and what it started; bubblewrap itself reports how its child ended.
            let bwrap = guard.child.as_ref().map(|c| c.id() as i32);
            let _ = cg.signal_all(signal, bwrap);
        }
        if gone.is_set() {
            st.cancelled = true;
            if let Some(cg) = guard.get(&held.cgroup) {
                let _ = cg.kill_all(KILL_DEADLINE);
            }
            return guard.child.take().and_then(|mut c| {
                let _ = c.kill();
                c.wait().ok()
            });
        }
        if now >= deadline {
            st.timed_out = true;
            // Before the kill: the servers the run still held, which nothing outside it could
            // reach (a run takes no inbound connections).
            st.listening = guard
                .get(&held.cgroup)
                .and_then(|cg| cg.pids().ok())
                .map(|pids| {
                    net::listening::of_run(Path::new("/proc"), &pids, &held.bands_listeners)
                        .iter()
                        .map(ToString::to_string)
                        .collect()
                })
                .unwrap_or_default();
            sink.event(Event::Limit {
                limit: "runtime".into(),
                detail: runtime_detail(&st.listening),
            });
            if let Some(cg) = guard.get(&held.cgroup) {
                let _ = cg.kill_all(KILL_DEADLINE);
            }
            let status = guard.child.take().and_then(|mut c| {
                let _ = c.kill();
                c.wait().ok()
            });
            return status;
        }
        // Both pipes at EOF: the sandbox is most likely exiting, so look again soon instead of a
        // full period (for a while: a script may also close them and keep running).
        if st.stdout_eof && st.stderr_eof {
            exiting_since.get_or_insert(now);
        }
        let period = match exiting_since {
            Some(t) if now.duration_since(t) < EXITING_WINDOW => EXITING_POLL,
            _ => POLL,
        };
        let wait = (deadline - now).min(period);
        match rx.recv_timeout(wait) {
            Ok(msg) => st.handle(msg, sink),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => std::thread::sleep(wait),
        }
    }
}

/// The runtime limit event's detail: what the run was still listening on, when anything.
fn runtime_detail(listening: &[String]) -> String {
    let mut detail = "maxRuntimeMs reached; the run was killed".to_string();
    if !listening.is_empty() {
        detail.push_str(" while listening on ");
        detail.push_str(&listening.join(", "));
    }
    detail
}

/// Handle what is still queued, until the output pipes and the jail's status pipe are at EOF (or
/// `max` passes), then whatever else is already queued. Waiting for the status pipe too matters:
/// a short script can exit before the pipes thread has passed on the jail's `ok`, and without
/// it the run would count as a sandbox that never started.
pub(super) fn drain(rx: &Inbox, sink: &EventSink, st: &mut LoopState, max: Duration) {
    let end = Instant::now() + max;
    while !(st.stdout_eof && st.stderr_eof && st.jail_eof) {
        let now = Instant::now();
        if now >= end {
            break;
        }
        match rx.recv_timeout(end - now) {
            Ok(msg) => st.handle(msg, sink),
            Err(_) => break,
        }
    }
    while let Some(msg) = rx.try_recv() {
        st.handle(msg, sink);
    }
}

#[cfg(test)]
mod tests {
    use std::io::BufReader;

    use pretty_assertions::assert_eq;

    use super::*;

    /// The pipes of a test "sandbox": stdout and stderr of `child`, a status pipe whose write end
    /// the test holds, and `input` for the child's stdin.
    fn serve(script: &str, input: Vec<u8>) -> (std::process::Child, OwnedFd, mpsc::Receiver<Msg>) {
        use std::process::{Command, Stdio};
        let (input_r, input_w) = crate::sys::pipe().unwrap();
        let (status_r, status_w) = crate::sys::pipe().unwrap();
        let mut child = Command::new("sh")
            .args(["-c", script])
            .stdin(Stdio::from(input_r))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, rx) = mpsc::channel();
        let pipes = Pipes {
            stdout: child.stdout.take(),
            stderr: child.stderr.take(),
            status: status_r,
            exit: exit_pidfd(&child),
            input: (input_w, input),
        };
        assert!(pipes.exit.is_some(), "pidfds are Linux 5.3's");
        spawn_pipes(pipes, tx).unwrap();
        (child, status_w, rx)
    }

    /// Everything the pipes thread sent, until it ended (it drops its sender).
    fn all(rx: &mpsc::Receiver<Msg>) -> (Vec<u8>, Vec<u8>, Vec<String>, Vec<&'static str>) {
        let (mut out, mut err, mut jail, mut ends) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        loop {
            let m = match rx.recv_timeout(Duration::from_secs(60)) {
                Ok(m) => m,
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => panic!("the pipes thread did not end"),
            };
            match m {
                Msg::Stdout(c) => out.extend(c),
                Msg::Stderr(c) => err.extend(c),
                Msg::Jail(l) => jail.push(l),
                Msg::StdoutEof => ends.push("stdout"),
                Msg::StderrEof => ends.push("stderr"),
                Msg::JailEof => ends.push("jail"),
                Msg::Exited => ends.push("exited"),
                _ => ends.push("other"),
            }
        }
        ends.sort_unstable();
        (out, err, jail, ends)
    }

    /// One thread serves every pipe: a script that writes more than a pipe holds before it reads
    /// an input larger than a pipe holds gets that input whole (a blocking write of it would
    /// wait for the script, which waits for its output to be read); the status pipe's lines come
    /// as lines (the last one without its newline too); each pipe's end and bubblewrap's exit
    /// are told once; and the exit status is left for the loop to reap.
    #[test]
    fn one_thread_serves_the_sandboxs_pipes_and_leaves_the_exit_status_to_reap() {
        use sha2::Digest;
        let input: Vec<u8> = (0..4u32 << 20).map(|i| (i * 7 + i / 251) as u8).collect();
        let mut want = vec![0u8; 1 << 20];
        want.extend(format!("{:x}  -\n", sha2::Sha256::digest(&input)).bytes());
        let script = "head -c 1048576 /dev/zero; sha256sum; echo to-stderr >&2; exit 3";
        let (mut child, status_w, rx) = serve(script, input);
        let mut status = File::from(status_w);
        status.write_all(b"ok\nerr fs partial").unwrap();
        drop(status);
        let (out, err, jail, ends) = all(&rx);
        assert_eq!(out.len(), want.len());
        assert!(out == want, "stdout: the zeros, then the input's digest");
        assert_eq!(err, b"to-stderr\n");
        assert_eq!(jail, ["ok\n", "err fs partial"]);
        assert_eq!(ends, ["exited", "jail", "stderr", "stdout"]);
        let status = child
            .try_wait()
            .unwrap()
            .expect("exited, and not reaped by the thread");
        assert_eq!(status.code(), Some(3));
    }

    /// While bubblewrap lives, no exit is told; and an input the script never reads does not
    /// keep the thread once the script is gone.
    #[test]
    fn an_input_never_read_does_not_hold_the_pipes_thread() {
        let (mut child, status_w, rx) = serve("read _ <&-; exec sleep 1000", vec![b'x'; 1 << 20]);
        drop(status_w);
        // Alive, its input unread: its output is open, and no exit is told.
        loop {
            match rx.recv_timeout(Duration::from_millis(200)) {
                Ok(Msg::JailEof) => {}
                Ok(Msg::Exited) => panic!("an exit was told while the script lives"),
                Ok(_) => panic!("unexpected message"),
                Err(_) => break,
            }
        }
        child.kill().unwrap();
        let (out, err, _, ends) = all(&rx);
        assert!(out.is_empty() && err.is_empty());
        assert_eq!(ends, ["exited", "stderr", "stdout"]);
        child.wait().unwrap();
    }

    fn forged(n: usize) -> Report {
        Report::Forged(n.to_string())
    }

    fn name(msg: &Msg) -> String {
        match msg {
            Msg::Report(Report::Forged(n)) => format!("report {n}"),
            Msg::Stderr(b) => format!("stderr {}", String::from_utf8_lossy(b)),
            Msg::Reports => "wake".into(),
            _ => "other".into(),
        }
    }

    /// Queued reports wake nobody; the loop reads them before the message it wakes for, and
    /// at its next look when nothing comes.
    #[test]
    fn queued_reports_come_before_the_next_message_without_a_wake() {
        let (tx, rx) = mpsc::channel();
        let queue = Arc::new(ReportQueue::new(tx.clone()));
        let inbox = Inbox::new(rx, Arc::clone(&queue));
        queue.push(forged(1));
        queue.push(forged(2));
        tx.send(Msg::Stderr(b"x".to_vec())).unwrap();
        queue.push(forged(3));
        let mut got = Vec::new();
        while let Ok(m) = inbox.recv_timeout(Duration::from_millis(10)) {
            got.push(name(&m));
        }
        assert_eq!(got, ["report 1", "report 2", "report 3", "stderr x"]);
        // Nothing on the channel: the queue alone, no wait.
        queue.push(forged(4));
        let t = Instant::now();
        assert_eq!(
            inbox
                .recv_timeout(Duration::from_secs(10))
                .map(|m| name(&m)),
            Ok("report 4".to_string())
        );
        assert!(t.elapsed() < Duration::from_secs(5));
        queue.push(forged(5));
        tx.send(Msg::Stderr(b"y".to_vec())).unwrap();
        let drained: Vec<String> = std::iter::from_fn(|| inbox.try_recv())
            .map(|m| name(&m))
            .collect();
        assert_eq!(drained, ["report 5", "stderr y"]);
    }

    /// [`REPORTS_WAKE`] queued reports send one wake, which the loop reads after them.
    #[test]
    fn a_full_queue_wakes_the_loop_once() {
        let (tx, rx) = mpsc::channel();
        let queue = Arc::new(ReportQueue::new(tx));
        let inbox = Inbox::new(rx, Arc::clone(&queue));
        for n in 0..REPORTS_WAKE + 3 {
            queue.push(forged(n));
        }
        let got: Vec<String> = std::iter::from_fn(|| inbox.try_recv())
            .map(|m| name(&m))
            .collect();
        assert_eq!(got.len(), REPORTS_WAKE + 4, "{got:?}");
        assert_eq!(got.iter().filter(|m| *m == "wake").count(), 1);
        assert_eq!(got.last().map(String::as_str), Some("wake"));
    }

    #[test]
    fn the_runtime_limit_names_what_the_run_was_listening_on() {
        assert_eq!(
            runtime_detail(&[]),
            "maxRuntimeMs reached; the run was killed"
        );
        assert_eq!(
            runtime_detail(&["127.0.0.1:8765".into(), "[::]:3000".into()]),
            "maxRuntimeMs reached; the run was killed while listening on 127.0.0.1:8765, [::]:3000"
        );
    }

    #[test]
    fn jail_status_lines() {
        assert_eq!(parse_jail_status("ok\n"), Some(Ok(())));
        assert_eq!(
            parse_jail_status("err seccomp failed to install: EINVAL\n"),
            Some(Err(SetupError::new(
                Layer::Seccomp,
                "band-jail: failed to install: EINVAL"
            )))
        );
        assert_eq!(
            parse_jail_status("err bogus x"),
            Some(Err(SetupError::new(Layer::Process, "band-jail: x")))
        );
        assert_eq!(parse_jail_status("hello"), None);
    }

    #[test]
    fn stdin_and_signals_from_the_client_are_passed_on() {
        let gone = ClientGone::default();
        let input = "{\"type\":\"stdin\",\"data\":\"aGk=\"}\n{\"type\":\"signal\",\"signal\":15}\n{\"type\":\"signal\",\"signal\":11}\n{\"type\":\"stdin\",\"eof\":true}\n";
        let verdict = client_verdict(
            &mut std::io::Cursor::new(input.as_bytes().to_vec()),
            &mut |m| gone.heard(m),
        );
        assert_eq!(verdict, ClientSays::Nothing);
        // SIGSEGV is not a signal a client may send.
        assert_eq!(gone.take_signal(), Some(15));
        assert_eq!(gone.take_signal(), None);
        let rx = gone.take_stdin().unwrap();
        assert_eq!(rx.try_recv().unwrap(), Some(b"hi".to_vec()));
        assert_eq!(rx.try_recv().unwrap(), None);
    }

    #[test]
    fn the_client_cancels_by_message_or_by_going_away_after_hold() {
        let v = |s: &str| {
            client_verdict(
                &mut std::io::Cursor::new(s.as_bytes().to_vec()),
                &mut |_| {},
            )
        };
        // A client that closes its end right after the request (tests, `band-server run <
        // file`) does not cancel.
        assert_eq!(v(""), ClientSays::Nothing);
        assert_eq!(v("junk\n"), ClientSays::Nothing);
        // After `hold`, the end of input is the client going away.
        assert_eq!(v("{\"type\":\"hold\"}\n"), ClientSays::Cancel);
        assert_eq!(v("{\"type\":\"cancel\"}\n"), ClientSays::Cancel);
        assert_eq!(
            v("{\"type\":\"hold\"}\n{\"type\":\"cancel\"}\n"),
            ClientSays::Cancel
        );
    }

    #[test]
    fn a_run_starts_on_go_and_never_once_the_client_is_done_without_it() {
        use std::io::Write as _;
        let watched = |lines: &str| {
            let gone = watch_client(Box::new(std::io::Cursor::new(lines.as_bytes().to_vec())));
            // The channel ends with `lines`: the wait ends with it, whatever the limit.
            gone.wait_for_go(Duration::from_secs(3600))
        };
        assert!(watched("{\"type\":\"go\"}\n"));
        assert!(watched("{\"type\":\"hold\"}\n{\"type\":\"go\"}\n"));
        // Said before the channel ends: `go` holds after it (the script may have started).
        assert!(watched("{\"type\":\"go\"}\n{\"type\":\"hold\"}\n"));
        for never in [
            "",
            "junk\n",
            "{\"type\":\"hold\"}\n",
            "{\"type\":\"cancel\"}\n{\"type\":\"go\"}\n",
            "{\"type\":\"hold\"}\n{\"type\":\"cancel\"}\n",
        ] {
            assert!(!watched(never), "{never:?} let the script start");
        }
        // A client that says nothing and keeps its end open: the limit ends the wait.
        let (r, mut w) = std::io::pipe().unwrap_or_else(|e| panic!("{e}"));
        let gone = watch_client(Box::new(BufReader::new(r)));
        assert!(!gone.wait_for_go(Duration::from_millis(20)));
        // ...and `go` still comes through afterwards.
        w.write_all(b"{\"type\":\"go\"}\n")
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(gone.wait_for_go(Duration::from_secs(3600)));
    }
}
