//! `band-server serve`: a band-server kept warm in a VM or on a remote host.
//!
//! The per-run path (`band-server run` on an SSH exec channel) pays, on every run, a shell, the
//! exec of band-server, its config load and a janitor pass over its state folder: under TCG
//! that is 200 ms or more. The warm server pays them once:
//! - it loads its config and runs the janitor once at start, then every [`JANITOR_SECS`] in a
//!   forked child (never on a run's path);
//! - it listens on a unix socket named by the build digest ([`socket_path`]):
//!   `/run/band-serve/server-<sha256 of installed.json>.sock`, so a client of another build finds
//!   no socket and falls back to the per-run path, whose stale check installs its own build;
//! - the socket is mode 0600 and owned by the uid that may connect ([`Options::owner`]: root, or
//!   the sudo user of a non-root target), in a root-owned 0755 folder; the peer's uid is checked
//!   again on every connection (`SO_PEERCRED`);
//! - each connection is one run: the server forks, and the child serves the request exactly as
//!   `band-server run` does on stdin/stdout (same framing, caps, hold, cancel, events). The
//!   parent stays single-threaded, so the fork is safe. On the host (`--host`), the child then
//!   keeps a spare sandbox of the request's shape (`run::spare`) and says so on its control
//!   socket; the parent hands it the next connection of that shape instead of forking (the
//!   client's shape line says which, [`band::proto::SHAPE_LINE_PREFIX`]), until the spare is
//!   sent away or the server ends. Up to [`MAX_SPARES`] spares of different shapes wait at once.
//!   In a VM the child exits after its run;
//! - one warm server per machine: it holds a lock file, and a server of another build replaces it
//!   (SIGTERM to the pid in [`PID_FILE`]); it exits when its socket is gone or replaced.
//!
//! The client reaches the socket through its OpenSSH master as a streamlocal channel
//! (`ssh -W <socket>`): no shell and no exec in the guest per run.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::config::ServerConfig;
use band::proto::RunResult;

use crate::run::{self, EventSink, spare};
use crate::sys;

/// The folder of the warm server's socket, lock and pid file.
pub(crate) const DIR: &str = "/run/band-serve";
/// The lock a warm server holds while it lives.
pub(crate) const LOCK_FILE: &str = "serve.lock";
/// `<pid> <digest>` of the warm server.
pub(crate) const PID_FILE: &str = "serve.pid";
/// Where band-server and its helpers are installed on a target (band's `SERVER_DIR`).
pub(crate) const SERVER_DIR: &str = "/usr/local/lib/band";
/// How often the background janitor pass runs (seconds).
pub(crate) const JANITOR_SECS: u64 = 60;

/// What `band-server serve` was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The build digest: in a VM or on a remote host the SHA-256 of installed.json; on the host
    /// target ([`Options::host`]) [`band::warm::digest`].
    pub(crate) digest: String,
    /// The uid that may connect besides root.
    pub(crate) owner: u32,
    /// Where the build marker and `installed.json` are ([`SERVER_DIR`]).
    pub(crate) server_dir: PathBuf,
    /// `--host`: the host target's warm server ([`band::warm`]), which serves while
    /// [`band::warm::digest`] of this program and its settings is [`Options::digest`].
    pub host: bool,
    /// Exit after this long without a run (`--idle SECS`; the host's server: 600 s by default).
    pub(crate) idle: Option<Duration>,
    /// The folder of the socket, lock, pid file (and the host's log): `--dir PATH`, else
    /// [`band::warm::DIR`] on the host and [`DIR`] in a VM. band-sandboxd gives its server a
    /// folder of its own, so that it neither replaces nor is replaced by the host's.
    pub(crate) dir: PathBuf,
    /// `--stop-with-parent`: stop (as on SIGTERM) once the process that started it has ended
    /// (band-sandboxd's server: a daemon killed outright leaves no server of its own behind).
    pub(crate) stop_with_parent: bool,
}

impl Options {
    /// The folder of the socket, lock, pid file (and the host's log).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// What is wrong with `serve`'s arguments (a usage error: the message says which).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ServeArgsError(String);

/// Parse `serve <digest> [--owner UID] [--host] [--idle SECS] [--dir PATH]
/// [--stop-with-parent]` (the arguments after `serve`).
pub fn parse_args(args: &[String]) -> Result<Options, ServeArgsError> {
    let mut digest = None;
    let mut owner = 0;
    let mut host = false;
    let mut idle = None;
    let mut dir = None;
    let mut stop_with_parent = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--owner" => {
                owner = it
                    .next()
                    .and_then(|s| s.parse::<u32>().ok())
                    .ok_or(ServeArgsError("--owner needs a uid".into()))?;
            }
            "--host" => host = true,
            "--stop-with-parent" => stop_with_parent = true,
            "--dir" => {
                dir = Some(
                    it.next()
                        .map(PathBuf::from)
                        .filter(|p| p.is_absolute() && p.parent().is_some())
                        .ok_or(ServeArgsError(
                            "--dir needs an absolute path (not `/`)".into(),
                        ))?,
                );
            }
            "--idle" => {
                idle = Some(
                    it.next()
                        .and_then(|s| s.parse::<u64>().ok())
                        .filter(|s| *s > 0)
                        .map(Duration::from_secs)
                        .ok_or(ServeArgsError("--idle needs a number of seconds".into()))?,
                );
            }
            d if digest.is_none() && is_digest(d) => digest = Some(d.to_string()),
            other => return Err(ServeArgsError(format!("unexpected argument `{other}`"))),
        }
    }
    if host && owner != 0 {
        return Err(ServeArgsError(
            "--host serves root only (no --owner)".into(),
        ));
    }
    Ok(Options {
        digest: digest.ok_or(ServeArgsError(
            "serve needs the build digest (64 hex digits)".into(),
        ))?,
        owner,
        server_dir: PathBuf::from(SERVER_DIR),
        host,
        idle: idle.or(host.then(|| Duration::from_secs(band::warm::IDLE_SECS))),
        dir: dir.unwrap_or_else(|| PathBuf::from(if host { band::warm::DIR } else { DIR })),
        stop_with_parent,
    })
}

/// Is this server still the one its clients expect? In a VM: its build is still installed
/// ([`current`]). On the host: this program at `exe` (the path it started from) and its settings
/// still give its digest: a rebuilt band-server, a changed config file or other environment is
/// another server's to serve.
pub(crate) fn still_current(opts: &Options, exe: &Path) -> bool {
    if opts.host {
        band::warm::digest_here(exe).as_deref() == Some(opts.digest.as_str())
    } else {
        current(&opts.server_dir, &opts.digest)
    }
}

/// 64 lowercase hex digits.
pub(crate) fn is_digest(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The socket of the warm server of build `digest` under `dir`.
pub(crate) fn socket_path(dir: &Path, digest: &str) -> PathBuf {
    dir.join(format!("server-{digest}.sock"))
}

/// `(pid, digest)` from the pid file's text.
pub(crate) fn parse_pid_file(text: &str) -> Option<(i32, String)> {
    let mut w = text.split_whitespace();
    let pid = w.next()?.parse::<i32>().ok().filter(|p| *p > 0)?;
    let digest = w.next().filter(|d| is_digest(d))?.to_string();
    Some((pid, digest))
}

/// Is build `digest` still the installed one? The per-run path's shell test, in-process: the
/// marker `.build-<digest>` exists and `installed.json` is not newer (any install rewrites
/// `installed.json` and removes other builds' markers).
pub(crate) fn current(server_dir: &Path, digest: &str) -> bool {
    let mtime = |p: PathBuf| fs_err::metadata(p).ok().and_then(|m| m.modified().ok());
    match (
        mtime(server_dir.join(format!(".build-{digest}"))),
        mtime(server_dir.join("installed.json")),
    ) {
        (Some(marker), Some(installed)) => installed <= marker,
        _ => false,
    }
}

/// May this peer use the server?
pub(crate) fn peer_allowed(peer_uid: u32, owner: u32) -> bool {
    peer_uid == 0 || peer_uid == owner
}

/// Run the warm server until its socket is removed or replaced, or it is told to stop.
/// Returns the exit code. `cfg` is loaded once; `janitor` is the per-run janitor pass.
pub fn serve(dir: &Path, opts: &Options, cfg: &ServerConfig, janitor: &dyn Fn()) -> i32 {
    // Before the janitor pass: a parent that ends during it is still seen to have ended.
    let parent = rustix::process::getppid();
    // The path this program started from: a band-server installed over it since is another.
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            crate::say!("band-server serve: cannot find its own path: {e}");
            return 1;
        }
    };
    if !still_current(opts, &exe) {
        crate::say!(
            "band-server serve: {} is not this build's digest{}; not serving",
            opts.digest,
            if opts.host {
                " (band::warm::digest of this band-server, its config file and settings)"
            } else {
                ""
            }
        );
        return 1;
    }
    if let Err(e) = sys::catch_stop_signals() {
        crate::say!("band-server serve: SIGTERM's handler: {e}");
        return 1;
    }
    if let Err(e) = sys::catch_leave_signal() {
        crate::say!("band-server serve: SIGUSR2's handler: {e}");
        return 1;
    }
    match listen(dir, opts) {
        Ok(None) => 0,
        Ok(Some((listener, lock))) => {
            janitor();
            // Once for every run this server forks: whether a run's listing of /proc may end
            // where the processes begin (`procmask`).
            crate::layers::fs::procmask::settle_listing_order();
            let started = Started {
                exe: &exe,
                listener,
                lock,
                parent,
            };
            accept_loop(dir, opts, cfg, started, janitor)
        }
        Err(e) => {
            crate::say!("band-server serve: {e}");
            1
        }
    }
}

type Listening = (UnixListener, fs_err::File);

/// Take the lock (replacing a server of another build), bind the socket with its owner and
/// mode set before it appears under its name. `None`: a server of this build already serves.
fn listen(dir: &Path, opts: &Options) -> Result<Option<Listening>, String> {
    fs_err::create_dir_all(dir).map_err(|e| e.to_string())?;
    fs_err::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| e.to_string())?;
    let lock = fs_err::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(LOCK_FILE))
        .map_err(|e| e.to_string())?;
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut signalled = false;
    loop {
        if sys::try_lock_exclusive(lock.file()).map_err(|e| format!("locking: {e}"))? {
            break;
        }
        let other = fs_err::read_to_string(dir.join(PID_FILE))
            .ok()
            .and_then(|t| parse_pid_file(&t));
        match other {
            Some((_, d)) if d == opts.digest => return Ok(None),
            Some((pid, _)) if !signalled => {
                let _ = sys::kill(pid, libc::SIGTERM);
                signalled = true;
            }
            _ => {}
        }
        if Instant::now() > deadline {
            return Err(format!(
                "another warm server holds {} and did not stop",
                dir.join(LOCK_FILE).display()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Sockets of other builds go: their clients fall back to the per-run path.
    if let Ok(entries) = fs_err::read_dir(dir) {
        for e in entries.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with("server-") || n.starts_with(".server-") {
                let _ = fs_err::remove_file(e.path());
            }
        }
    }
    let path = socket_path(dir, &opts.digest);
    let tmp = dir.join(format!(".server-{}.sock", sys::pid()));
    let listener = UnixListener::bind(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    fs_err::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| e.to_string())?;
    rustix::fs::chown(&tmp, Some(rustix::fs::Uid::from_raw(opts.owner)), None)
        .map_err(|e| format!("{}: chown: {e}", tmp.display()))?;
    // The pid file first: whoever finds the socket finds its server's pid.
    let mut pidf = fs_err::File::create(dir.join(PID_FILE)).map_err(|e| e.to_string())?;
    writeln!(pidf, "{} {}", sys::pid(), opts.digest).map_err(|e| e.to_string())?;
    fs_err::rename(&tmp, &path).map_err(|e| e.to_string())?;
    crate::say!(
        "band-server serve: pid {} listening on {} (owner uid {})",
        sys::pid(),
        path.display(),
        opts.owner
    );
    Ok(Some((listener, lock)))
}

/// The inode of our socket, to notice when it is removed or replaced.
fn inode(path: &Path) -> Option<u64> {
    fs_err::symlink_metadata(path).ok().map(|m| m.ino())
}

/// A run's child of the accept loop, with the loop's end of its control socket: the child
/// writes [`SPARE_READY`] on it when it has a spare sandbox built (`run::spare`), and the loop
/// hands it the next connection on it (`SCM_RIGHTS`). The socket's other end is the child's: it
/// closes when the child ends, and the child sees this end close when the server ends.
struct RunChild {
    pid: i32,
    ctl: UnixStream,
    /// It said [`SPARE_READY`] and has not been handed a connection since.
    spare: bool,
    /// It was let build a spare ([`SPARE_WANTED`]) and has not said it is ready.
    building: bool,
    /// The shape of the request it served last ([`SPARE_WANTED`] says it): its spare's.
    shape: Option<String>,
    /// When its spare said it was ready.
    ready_at: Option<Instant>,
}

impl RunChild {
    /// A child just forked: no spare, and no shape yet.
    fn new(pid: i32, ctl: UnixStream) -> RunChild {
        RunChild {
            pid,
            ctl,
            spare: false,
            building: false,
            shape: None,
            ready_at: None,
        }
    }
}

/// What a child with a spare built writes on its control socket.
const SPARE_READY: u8 = b'R';
/// What a child about to build a spare asks first, followed by the shape of the request it
/// served ([`SHAPE_LEN`] bytes): the loop answers [`SPARE_YES`] when no other child has a spare
/// of that shape or is building one, and fewer than [`MAX_SPARES`] spares wait or are being built
/// (or the one that has waited longest, at least [`SPARE_EVICT_AFTER`], is sent away for it);
/// else [`SPARE_NO`] (the child then ends). Without the question every run's child built a spare
/// after its run, and each new one sent the last away: with many callers at once most runs paid
/// for a second sandbox that nobody used.
const SPARE_WANTED: u8 = b'W';
/// The length of a shape ([`band::proto::RunRequest::shape_key`]: SHA-256 in hex).
const SHAPE_LEN: usize = 64;
/// How many spares, each of another shape, wait or are built at once. An agent that calls a few
/// tools in turn finds each one's spare; with one spare, each call found the other tool's, was
/// built for, and the spare was removed unused (15.9 ms a no-op run against 8 ms with its spare).
/// Each spare holds a pool uid, a cgroup, a run directory and a waiting sandbox.
const MAX_SPARES: usize = 4;
/// A spare that has waited this long may be sent away for a spare of a new shape when
/// [`MAX_SPARES`] wait: an agent that moved on to other tools gets their spares, while a burst
/// of many skills at once (whose spares are all younger) does not build spares that are sent away
/// before they serve.
const SPARE_EVICT_AFTER: Duration = Duration::from_secs(1);
/// What a child writes when its run found every uid leased and waits for one: the loop sends
/// the spare that has waited longest away (its uid is free once it is removed). A spare holds
/// a uid for a run that may not come; a run that came comes first.
const POOL_FULL: u8 = b'F';
const SPARE_YES: u8 = b'Y';
const SPARE_NO: u8 = b'N';
/// What comes with a connection handed to a spare.
const HANDED: &[u8] = b"C";

/// Hand `conn` to the child with a spare of `shape`, if one waits. Its connection is then the
/// child's; `Some` gives it back when no spare took it.
fn hand_to_spare(kids: &mut Vec<RunChild>, conn: UnixStream, shape: &str) -> Option<UnixStream> {
    let Some(i) = kids
        .iter()
        .position(|k| k.spare && k.shape.as_deref() == Some(shape))
    else {
        return Some(conn);
    };
    match sys::send_with_fd(&kids[i].ctl, HANDED, conn.as_fd()) {
        Ok(_) => {
            kids[i].spare = false;
            None
        }
        Err(e) => {
            // Gone (its end closed): no spare.
            crate::say!(
                "band-server serve: the spare of pid {} took no connection: {e}",
                kids[i].pid
            );
            kids.remove(i);
            Some(conn)
        }
    }
}

/// The ready spare that has waited longest, of a child other than `besides`: when it said it was
/// ready, and its pid.
fn oldest_spare(kids: &[RunChild], besides: i32) -> Option<(Instant, i32)> {
    kids.iter()
        .filter(|k| k.pid != besides && k.spare)
        .filter_map(|k| Some((k.ready_at?, k.pid)))
        .min()
}

/// Forget the children `away` picks (their control sockets close: each removes its sandbox and
/// exits), adding their pids to `gone`.
fn send_away(kids: &mut Vec<RunChild>, gone: &mut Vec<i32>, away: impl Fn(&RunChild) -> bool) {
    kids.retain(|k| {
        let sent = away(k);
        if sent {
            gone.push(k.pid);
        }
        !sent
    });
}

/// Read one message the run child `kids[i]` wrote on its control socket (`poll` wakes the loop
/// again for the next): a spare asked for (answered), or a spare ready (the one of its shape now,
/// another of that shape sent away: its socket closes, and it removes its sandbox and exits).
/// Returns the pids of the children forgotten: this one when its end is closed (it ended), and
/// the spares sent away.
fn heard_from(kids: &mut Vec<RunChild>, i: usize) -> Vec<i32> {
    use std::io::Read;
    let pid = kids[i].pid;
    let mut said = [0u8; 1];
    if !matches!(kids[i].ctl.read(&mut said), Ok(1)) {
        return vec![kids.remove(i).pid];
    }
    let mut gone = Vec::new();
    match said[0] {
        SPARE_WANTED => {
            // Its shape follows, written with it.
            let mut shape = [0u8; SHAPE_LEN];
            if kids[i].ctl.read_exact(&mut shape).is_err() {
                return vec![kids.remove(i).pid];
            }
            let shape = String::from_utf8_lossy(&shape).into_owned();
            let (yes, away) = spare_answer(kids, pid, shape, Instant::now());
            send_away(kids, &mut gone, |k| away.contains(&k.pid));
            if let Some(k) = kids.iter_mut().find(|k| k.pid == pid) {
                k.building = yes;
                let answer = if yes { SPARE_YES } else { SPARE_NO };
                let _ = std::io::Write::write_all(&mut k.ctl, &[answer]);
            }
        }
        POOL_FULL => {
            if let Some((_, away)) = oldest_spare(kids, pid) {
                send_away(kids, &mut gone, |k| k.pid == away);
            }
        }
        SPARE_READY => {
            let shape = kids[i].shape.clone();
            send_away(kids, &mut gone, |k| {
                k.spare && k.pid != pid && k.shape == shape
            });
            if let Some(k) = kids.iter_mut().find(|k| k.pid == pid) {
                k.spare = true;
                k.building = false;
                k.ready_at = Some(Instant::now());
            }
        }
        _ => {}
    }
    gone
}

/// May the child `pid`, which served a request of `shape`, build a spare ([`SPARE_WANTED`])?
/// And which ready spares to send away for it. The child is no spare while it asks (a spare
/// that went stale rebuilds), and its spare is of `shape` from now on.
fn spare_answer(kids: &mut [RunChild], pid: i32, shape: String, now: Instant) -> (bool, Vec<i32>) {
    if let Some(k) = kids.iter_mut().find(|k| k.pid == pid) {
        k.spare = false;
        k.building = false;
        k.ready_at = None;
        k.shape = Some(shape.clone());
    }
    let others = || {
        kids.iter()
            .filter(|k| k.pid != pid && (k.spare || k.building))
    };
    if others().any(|k| k.shape.as_deref() == Some(shape.as_str())) {
        return (false, Vec::new());
    }
    if others().count() < MAX_SPARES {
        return (true, Vec::new());
    }
    // Full: the spare that has waited longest goes, if it has waited long enough.
    match oldest_spare(kids, pid) {
        Some((at, away)) if now.saturating_duration_since(at) >= SPARE_EVICT_AFTER => {
            (true, vec![away])
        }
        _ => (false, Vec::new()),
    }
}

/// What the start of a connection that waits for a spare says ([`peek_shape`]).
#[derive(Debug, PartialEq, Eq)]
enum Shape {
    /// Nothing has come yet.
    Waiting,
    /// Its shape line's key, or `None` when what came does not begin with a whole one (band
    /// writes the line and its request in one write, so a line in pieces is not band's: the loop
    /// does not wait on it, which would have `poll` wake it for the same bytes again and again).
    Known(Option<String>),
    /// Closed, or unreadable.
    Gone,
}

/// The shape line at the start of `conn` ([`band::proto::SHAPE_LINE_PREFIX`]), looked at
/// without reading it: the child that serves the connection reads it
/// (`run::serve_with`).
fn peek_shape(conn: &UnixStream) -> Shape {
    use rustix::net::{RecvFlags, recv};
    let mut buf = [0u8; run::SHAPE_LINE_MAX];
    let n = match recv(conn, &mut buf, RecvFlags::PEEK | RecvFlags::DONTWAIT) {
        Ok((0, _)) => return Shape::Gone,
        Ok((n, _)) => n,
        Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => return Shape::Waiting,
        Err(_) => return Shape::Gone,
    };
    Shape::Known(band::proto::shape_line_key(&buf[..n]).map(str::to_string))
}

/// What the accept loop starts with: the path this program started from, its socket and lock,
/// and its parent when it started (`--stop-with-parent`).
struct Started<'a> {
    exe: &'a Path,
    listener: UnixListener,
    lock: fs_err::File,
    parent: Option<rustix::process::Pid>,
}

fn accept_loop(
    dir: &Path,
    opts: &Options,
    cfg: &ServerConfig,
    started: Started<'_>,
    janitor: &dyn Fn(),
) -> i32 {
    let Started {
        exe,
        listener,
        lock,
        parent,
    } = started;
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let path = socket_path(dir, &opts.digest);
    let ours = inode(&path);
    let mut last_janitor = Instant::now();
    let mut last_run = Instant::now();
    // The build's (or, on the host, the digest's) check: once a second, and before each run.
    let mut last_check = Instant::now();
    // Children that end or are ending, not yet reaped: the janitor's, and run children whose
    // control socket closed or that were sent away. While there are some, the loop looks every
    // [`REAP_POLL_MS`], so that they are reaped (and their CPU time accounted to this process)
    // soon after they end.
    let mut ending: Vec<i32> = Vec::new();
    let mut kids: Vec<RunChild> = Vec::new();
    // Connections accepted while a spare waits, until their shape line says which spare (if any)
    // serves them ([`peek_shape`]).
    let mut pending: Vec<UnixStream> = Vec::new();
    loop {
        while let Ok(Some(pid)) = sys::reap_any() {
            ending.retain(|j| *j != pid);
        }
        let why = if sys::stop_asked() {
            Some("told to stop")
        } else if opts.stop_with_parent && rustix::process::getppid() != parent {
            Some("the process that started it has ended")
        } else {
            None
        };
        if let Some(why) = why {
            // The socket first, so that no client connects to a server that is going.
            remove_if_ours(&path, ours);
            // Connections not yet served (in the backlog, or waiting for a spare) get no byte:
            // their clients take the per-run path.
            drop(listener);
            drop(pending);
            return stop(dir, lock, kids, why, opts.stop_with_parent);
        }
        if ours.is_none() || inode(&path) != ours {
            crate::say!("band-server serve: {} is gone; exiting", path.display());
            return 0;
        }
        if last_check.elapsed() >= Duration::from_secs(1) {
            last_check = Instant::now();
            if !still_current(opts, exe) {
                return stale_exit(&path, opts.host);
            }
        }
        if opts.idle.is_some_and(|idle| last_run.elapsed() >= idle) {
            let _ = fs_err::remove_file(&path);
            crate::say!(
                "band-server serve: no run for {} s; removed {} and exiting",
                last_run.elapsed().as_secs(),
                path.display()
            );
            return 0;
        }
        if last_janitor.elapsed() >= Duration::from_secs(JANITOR_SECS) {
            last_janitor = Instant::now();
            // In a child: the parent stays single-threaded and never blocks on it.
            match sys::fork_single_threaded() {
                Ok(None) => {
                    let _ = sys::default_stop_signals();
                    drop(kids);
                    drop(pending);
                    janitor();
                    std::process::exit(0);
                }
                Ok(Some(pid)) => ending.push(pid),
                Err(e) => crate::say!("band-server serve: janitor: fork: {e}"),
            }
        }
        let wait_ms = if ending.is_empty() {
            1000
        } else {
            REAP_POLL_MS
        };
        let (listening, heard, spoke) = {
            let mut fds = Vec::with_capacity(1 + kids.len() + pending.len());
            fds.push(PollFd::new(&listener, PollFlags::IN));
            for k in &kids {
                fds.push(PollFd::new(&k.ctl, PollFlags::IN));
            }
            for c in &pending {
                fds.push(PollFd::new(c, PollFlags::IN));
            }
            let timeout = Timespec {
                tv_sec: i64::from(wait_ms / 1000),
                tv_nsec: i64::from(wait_ms % 1000) * 1_000_000,
            };
            match poll(&mut fds, Some(&timeout)) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => {
                    crate::say!("band-server serve: poll: {e}");
                    return 1;
                }
            }
            let heard: Vec<i32> = fds[1..=kids.len()]
                .iter()
                .zip(&kids)
                .filter(|(f, _)| !f.revents().is_empty())
                .map(|(_, k)| k.pid)
                .collect();
            let spoke: Vec<bool> = fds[1 + kids.len()..]
                .iter()
                .map(|f| !f.revents().is_empty())
                .collect();
            (!fds[0].revents().is_empty(), heard, spoke)
        };
        for pid in heard {
            if let Some(i) = kids.iter().position(|k| k.pid == pid) {
                for gone in heard_from(&mut kids, i) {
                    still_ending(&mut ending, gone);
                }
            }
        }
        // Connections whose shape line may have come: to the spare of their shape, else to a
        // child forked for them.
        let mut to_fork: Vec<UnixStream> = Vec::new();
        let mut still = Vec::with_capacity(pending.len());
        for (conn, spoke) in pending.drain(..).zip(spoke) {
            if !spoke {
                still.push(conn);
                continue;
            }
            match peek_shape(&conn) {
                Shape::Waiting => still.push(conn),
                Shape::Gone => {}
                Shape::Known(None) => to_fork.push(conn),
                Shape::Known(Some(shape)) => to_fork.extend(hand_to_spare(&mut kids, conn, &shape)),
            }
        }
        pending = still;
        let accepted = if listening {
            match accept_checked(&listener, opts, exe) {
                Ok(c) => c,
                Err(()) => return stale_exit(&path, opts.host),
            }
        } else {
            None
        };
        if let Some(conn) = accepted {
            last_run = Instant::now();
            if opts.host {
                trim_log(&dir.join(LOG_FILE));
            }
            if kids.iter().any(|k| k.spare) {
                // Which spare serves it is its shape's: told by its first line.
                pending.push(conn);
            } else {
                to_fork.push(conn);
            }
        }
        while let Some(conn) = to_fork.pop() {
            let (ctl, theirs) = match UnixStream::pair() {
                Ok(p) => p,
                Err(e) => {
                    crate::say!("band-server serve: control socket: {e}");
                    continue;
                }
            };
            match sys::fork_single_threaded() {
                Ok(None) => {
                    let _ = sys::default_stop_signals();
                    drop(lock);
                    drop(listener);
                    // The other children's control sockets and the other clients' connections
                    // are the loop's, not this child's: held here, a child would never see its
                    // socket close when the server exits.
                    drop(kids);
                    drop(pending);
                    drop(to_fork);
                    drop(ctl);
                    let code = serve_one(conn, cfg, opts.host, theirs);
                    std::process::exit(code);
                }
                Ok(Some(pid)) => {
                    drop(conn);
                    drop(theirs);
                    kids.push(RunChild::new(pid, ctl));
                }
                Err(e) => crate::say!("band-server serve: fork: {e}"),
            }
        }
    }
}

/// The connection waiting on `listener`, if its peer may connect. `Err` when another install
/// came since the last look: the connection gets no byte (the client then takes the per-run
/// path, whose stale check installs its build) and the server exits.
fn accept_checked(
    listener: &UnixListener,
    opts: &Options,
    exe: &Path,
) -> Result<Option<UnixStream>, ()> {
    let conn = match listener.accept() {
        Ok((c, _)) => c,
        Err(e) => {
            crate::say!("band-server serve: accept: {e}");
            return Ok(None);
        }
    };
    if !still_current(opts, exe) {
        return Err(());
    }
    match sys::peer_cred(&conn) {
        Ok(p) if peer_allowed(p.uid, opts.owner) => Ok(Some(conn)),
        Ok(p) => {
            crate::say!(
                "band-server serve: refused a connection from uid {} (pid {})",
                p.uid,
                p.pid
            );
            Ok(None)
        }
        Err(e) => {
            crate::say!("band-server serve: peer credentials: {e}");
            Ok(None)
        }
    }
}

/// Remove the socket at `path` if it is still the one this server bound (inode `ours`).
fn remove_if_ours(path: &Path, ours: Option<u64>) {
    if ours.is_some() && inode(path) == ours {
        let _ = fs_err::remove_file(path);
    }
}

/// The end of a server told to stop (SIGTERM, SIGINT) or whose parent has ended: its pid file
/// goes (when it is still this server's) and its lock is released, so that a server replacing
/// it starts at once; its children are sent away (a spare removes its sandbox and exits; a run
/// under way ends as it would, then exits) and waited for, so that none is left behind half torn
/// down: band-sandboxd, whose pod ends when it does, waits for this one in turn. `own_dir`
/// (`--stop-with-parent`: band-sandboxd's server, whose folder is its own): its files there and
/// the folder go too, also when band-sandboxd was killed before it could remove them.
fn stop(dir: &Path, lock: fs_err::File, kids: Vec<RunChild>, why: &str, own_dir: bool) -> i32 {
    let pid_file = dir.join(PID_FILE);
    if fs_err::read_to_string(&pid_file)
        .ok()
        .and_then(|t| parse_pid_file(&t))
        .is_some_and(|(pid, _)| pid == sys::pid())
    {
        let _ = fs_err::remove_file(&pid_file);
    }
    drop(lock);
    let children = kids.len();
    drop(kids);
    crate::say!(
        "band-server serve: {why}; stopping once its {children} run children (runs and spares) \
         have ended"
    );
    let mut ended = 0u32;
    loop {
        match sys::wait_any() {
            Ok(Some(_)) => ended += 1,
            Ok(None) => break,
            Err(e) => {
                crate::say!("band-server serve: waiting for its children: {e}");
                return 1;
            }
        }
    }
    crate::say!("band-server serve: stopped ({ended} children reaped)");
    if own_dir {
        // What this server made there, then the folder if nothing else is in it: never a
        // recursive removal of a folder a caller named.
        for f in [LOCK_FILE, LOG_FILE] {
            let _ = fs_err::remove_file(dir.join(f));
        }
        if let Err(e) = fs_err::remove_dir(dir) {
            crate::say!("band-server serve: {e}");
        }
    }
    0
}

/// Count `pid`, a child the loop no longer serves, among the children that are ending, unless it
/// has ended: its control socket closes as it exits, so the loop often hears of its end after
/// reaping it (`reap_any` at the top of the loop). Counted then, it would be waited for for ever,
/// and the loop would wake every [`REAP_POLL_MS`] while idle.
fn still_ending(ending: &mut Vec<i32>, pid: i32) {
    match sys::reap(pid) {
        Ok(sys::Reaped::Running) => ending.push(pid),
        Ok(sys::Reaped::Now | sys::Reaped::Before) => {}
        Err(e) => {
            crate::say!("band-server serve: waitpid {pid}: {e}");
        }
    }
}

/// How often (ms) the accept loop looks for ended children while it has some.
const REAP_POLL_MS: i32 = 10;

/// The host's warm server writes what it says to [`LOG_FILE`] in its folder (its stderr). The
/// log starts again past [`LOG_MAX_BYTES`], so that a server that is never idle does not fill
/// `/run`.
pub const LOG_FILE: &str = "serve.log";
/// See [`LOG_FILE`].
pub(crate) const LOG_MAX_BYTES: u64 = 1 << 20;

fn trim_log(path: &Path) {
    if fs_err::metadata(path).is_ok_and(|m| m.len() > LOG_MAX_BYTES) {
        // Opened with O_APPEND by everyone who writes it: the next line starts the file.
        let _ = fs_err::OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|f| f.set_len(0));
    }
}

fn stale_exit(path: &Path, host: bool) -> i32 {
    let _ = fs_err::remove_file(path);
    crate::say!(
        "band-server serve: {}; removed {} and exiting",
        if host {
            "this band-server, its config file or its settings changed"
        } else {
            "this build is no longer installed"
        },
        path.display()
    );
    0
}

/// One run on `conn`, as `band-server run` serves stdin/stdout; then, on the host, spares of
/// the shape of the last request served (`run::spare`), each announced on `ctl`, until the
/// server sends this child away or ends.
///
/// A blank line goes out first, before the request is read (the framing skips blank lines): a
/// client that receives no byte at all knows that no band-server read its request, and may send
/// it elsewhere without running it twice.
fn serve_one(conn: UnixStream, cfg: &ServerConfig, host: bool, ctl: UnixStream) -> i32 {
    if host {
        // The host's facts, looked up while the request is read, as `band-server run` does.
        crate::facts::Prefetched::start(cfg);
    }
    let Some((input, sink)) = connection(conn) else {
        return 1;
    };
    let said = |r: &RunResult| log_result(r, spare::Served::Own);
    // Every uid leased: the loop sends a waiting spare away, and its uid is free once it is
    // removed.
    let full = || {
        let _ = (&ctl).write_all(&[POOL_FULL]);
    };
    let hooks = run::LeaseHooks {
        full: &full,
        ..run::LeaseHooks::NONE
    };
    let (_, mut served) = run::serve_with(input, cfg, &sink, &said, |req, gone| {
        let (result, removal) = run::execute_until_result(&req, cfg, &sink, &gone, hooks);
        (result, removal, req)
    });
    sink.finish();
    if !host {
        return 0;
    }
    // Spares, one after another, while they are wanted and the server is there.
    let mut n = 0u32;
    while let Some(served_req) = served.take().filter(|s| spare::wanted(&s.req)) {
        if !spare_allowed(&ctl, served_req.shape.as_deref().unwrap_or_default()) {
            break;
        }
        let req = &served_req.req;
        n += 1;
        let id = spare::run_id(sys::pid(), n);
        let ready_id = id.clone();
        let mut ready = || {
            crate::say!(
                "band-server serve: spare {ready_id} ready for {}/{} (pid {})",
                req.skill,
                req.script,
                sys::pid()
            );
            // A connection handed over while this spare was being built (after its rebuild,
            // the loop still took it for a spare): served next, unannounced, so that the loop
            // does not hand it another one meanwhile.
            if !sys::poll_readable(ctl.as_fd(), 0).unwrap_or(false) {
                let _ = (&ctl).write_all(&[SPARE_READY]);
            }
        };
        let mut next = || wait_for_handover(&ctl);
        let kept = spare::keep(req, id, cfg, &mut ready, &mut next, hooks);
        served = match kept {
            spare::Kept::Served(next_req) => next_req.map(|b| *b),
            spare::Kept::Rebuild => Some(served_req),
            spare::Kept::Stop | spare::Kept::Failed => None,
        };
    }
    0
}

/// Ask the accept loop on `ctl` whether this child may build a spare of `shape`
/// ([`SPARE_WANTED`]). No answer (the server is gone) is no.
fn spare_allowed(ctl: &UnixStream, shape: &str) -> bool {
    use std::io::{Read, Write};
    let mut ask = vec![SPARE_WANTED];
    // Always SHAPE_LEN bytes (a key is 64 hex digits; anything else is a shape no spare has).
    ask.extend(format!("{shape:0<SHAPE_LEN$.SHAPE_LEN$}").bytes());
    if (&*ctl).write_all(&ask).is_err() {
        return false;
    }
    // The loop answers at once; a server that does not within 5 s is treated as gone.
    if !sys::poll_readable(ctl.as_fd(), 5000).unwrap_or(false) {
        return false;
    }
    let mut b = [0u8; 1];
    matches!((&*ctl).read(&mut b), Ok(1) if b[0] == SPARE_YES)
}

/// The client's ends of a connection: the blank line written, then its input and a sink.
fn connection(mut conn: UnixStream) -> Option<(Box<dyn BufRead + Send>, EventSink)> {
    if conn.write_all(b"\n").is_err() {
        return None;
    }
    match conn.try_clone() {
        Ok(writer) => Some((
            Box::new(BufReader::new(conn)),
            EventSink::new(Box::new(writer)),
        )),
        Err(e) => {
            crate::say!("band-server serve: {e}");
            None
        }
    }
}

/// The log line of a warm child's run, written before its result goes out (so it is there once
/// the client has the result).
fn log_result(result: &RunResult, how: spare::Served) {
    let parent = rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get());
    if result.run_id.is_empty() {
        // A client that connected and sent no request (band dropped a connection it made on a
        // guess, or a refused run's).
        crate::say!(
            "band-server serve: a connection without a request (pid {}, parent {parent}): {}",
            sys::pid(),
            result.error.as_ref().map_or("", |e| e.message.as_str())
        );
    } else {
        crate::say!(
            "band-server serve: run {} served by the warm server ({}; pid {}, parent {parent})",
            result.run_id,
            how.as_str(),
            sys::pid(),
        );
    }
}

/// A spare's wait: for a connection handed over on `ctl`, for at most [`spare::FRESH`], or until
/// a run of another server asks it to leave (SIGUSR2: `layers::identity::idle`).
fn wait_for_handover(ctl: &UnixStream) -> spare::Next {
    let fresh = i32::try_from(spare::FRESH.as_millis()).unwrap_or(i32::MAX);
    match sys::poll_readable_unless(ctl.as_fd(), fresh, sys::leave_asked) {
        Ok(None) => return spare::Next::Leave,
        Ok(Some(false)) => return spare::Next::Rebuild,
        Ok(Some(true)) => {}
        Err(e) => {
            crate::say!("band-server serve: spare: poll: {e}");
            return spare::Next::Stop;
        }
    }
    let mut buf = [0u8; 16];
    match band_shim::sys::recv_with_fd(ctl, &mut buf) {
        Ok((n, Some(fd))) if n > 0 => match connection(UnixStream::from(fd)) {
            Some((input, sink)) => spare::Next::Serve {
                input,
                sink,
                before_result: Box::new(log_result),
            },
            None => spare::Next::Stop,
        },
        // The server ended, or sent this spare away.
        _ => spare::Next::Stop,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    /// Run children `pids`, each with the loop's end of its control socket in `kids` and its own
    /// end in the second list.
    fn children(pids: &[i32]) -> (Vec<RunChild>, Vec<UnixStream>) {
        pids.iter()
            .map(|&pid| {
                let (ctl, child) = UnixStream::pair().unwrap();
                (RunChild::new(pid, ctl), child)
            })
            .unzip()
    }

    fn shape(c: char) -> String {
        c.to_string().repeat(SHAPE_LEN)
    }

    /// Child `pid` (its end `mine`) says `what` (with `shape` for [`SPARE_WANTED`]); the loop
    /// hears it: its answer, if it asked, and the pids forgotten.
    fn say(
        kids: &mut Vec<RunChild>,
        mine: &mut UnixStream,
        pid: i32,
        what: u8,
        shape: &str,
    ) -> (Option<u8>, Vec<i32>) {
        use std::io::{Read, Write};
        let mut msg = vec![what];
        if what == SPARE_WANTED {
            msg.extend(shape.bytes());
        }
        mine.write_all(&msg).unwrap();
        let at = kids.iter().position(|k| k.pid == pid).unwrap();
        let gone = heard_from(kids, at);
        let mut b = [0u8; 1];
        let answer = (what == SPARE_WANTED).then(|| {
            mine.read_exact(&mut b).unwrap();
            b[0]
        });
        (answer, gone)
    }

    /// Child `pid` asks for a spare of `shape`, is let, and says it is ready; nothing is sent
    /// away.
    fn builds_a_spare(kids: &mut Vec<RunChild>, mine: &mut UnixStream, pid: i32, shape: &str) {
        assert_eq!(say(kids, mine, pid, SPARE_WANTED, shape).0, Some(SPARE_YES));
        assert_eq!(say(kids, mine, pid, SPARE_READY, "").1, Vec::<i32>::new());
    }

    /// What the child at `mine` was handed: the connection's byte.
    fn handed(mine: &mut UnixStream) -> Vec<u8> {
        use std::io::Read;
        let mut b = [0u8; 1];
        mine.read_exact(&mut b).unwrap();
        b.to_vec()
    }

    /// Three run children of one shape end their runs at once and each asks to build a spare:
    /// the first is let, the others are told no (they end) while it builds and once it has its
    /// spare; when that spare is handed a connection, the next child to ask is let build the
    /// next one.
    #[test]
    fn one_spare_of_a_shape_is_built_at_a_time() {
        let (mut kids, mut theirs) = children(&[101, 102, 103]);
        let a = shape('a');
        let mut t = theirs.iter_mut();
        let (t0, t1, t2) = (t.next().unwrap(), t.next().unwrap(), t.next().unwrap());
        assert_eq!(say(&mut kids, t0, 101, SPARE_WANTED, &a).0, Some(SPARE_YES));
        assert_eq!(say(&mut kids, t1, 102, SPARE_WANTED, &a).0, Some(SPARE_NO));
        assert_eq!(
            say(&mut kids, t0, 101, SPARE_READY, "").1,
            Vec::<i32>::new()
        );
        assert!(kids[0].spare && !kids[0].building);
        assert_eq!(say(&mut kids, t2, 103, SPARE_WANTED, &a).0, Some(SPARE_NO));
        // A connection of another shape is not the spare's; one of its shape is.
        let (conn, _client) = UnixStream::pair().unwrap();
        let conn = hand_to_spare(&mut kids, conn, &shape('b')).expect("not handed");
        assert!(hand_to_spare(&mut kids, conn, &a).is_none());
        assert!(!kids[0].spare);
        assert_eq!(handed(t0), HANDED);
        assert_eq!(say(&mut kids, t2, 103, SPARE_WANTED, &a).0, Some(SPARE_YES));
        assert_eq!(say(&mut kids, t0, 101, SPARE_WANTED, &a).0, Some(SPARE_NO));
    }

    /// Spares of different shapes wait side by side, each handed the connections of its own
    /// shape, up to [`MAX_SPARES`]; one more shape is let in only for the spare that has waited
    /// longest, once it has waited [`SPARE_EVICT_AFTER`] (sent away: its socket closes).
    #[test]
    fn spares_of_different_shapes_wait_side_by_side() {
        use std::io::Read;
        let pids: Vec<i32> = (0..=MAX_SPARES as i32 + 1).map(|i| 201 + i).collect();
        let (mut kids, mut theirs) = children(&pids);
        let shapes: Vec<String> = "abcdefgh".chars().map(shape).collect();
        for i in 0..MAX_SPARES {
            builds_a_spare(&mut kids, &mut theirs[i], pids[i], &shapes[i]);
        }
        assert_eq!(kids.iter().filter(|k| k.spare).count(), MAX_SPARES);
        // Each connection goes to its own shape's spare.
        for i in [2, 0] {
            let (conn, _client) = UnixStream::pair().unwrap();
            assert!(hand_to_spare(&mut kids, conn, &shapes[i]).is_none());
            assert_eq!(handed(&mut theirs[i]), HANDED);
            builds_a_spare(&mut kids, &mut theirs[i], pids[i], &shapes[i]);
        }
        // Full, and every spare is young: a new shape is refused.
        let new = MAX_SPARES;
        let t = &mut theirs[new];
        assert_eq!(
            say(&mut kids, t, pids[new], SPARE_WANTED, &shapes[new]).0,
            Some(SPARE_NO)
        );
        // The spare that has waited longest (shape b: a and c served since) has waited long
        // enough: it is sent away for the new shape.
        let long_ago = Instant::now() - SPARE_EVICT_AFTER;
        for k in kids.iter_mut() {
            k.ready_at = k.ready_at.map(|_| long_ago);
        }
        let b = kids.iter().position(|k| k.pid == pids[1]).unwrap();
        kids[b].ready_at = Some(long_ago - Duration::from_millis(1));
        let t = &mut theirs[new];
        let (answer, gone) = say(&mut kids, t, pids[new], SPARE_WANTED, &shapes[new]);
        assert_eq!((answer, gone), (Some(SPARE_YES), vec![pids[1]]));
        let mut rest = Vec::new();
        assert_eq!(
            theirs[1].read_to_end(&mut rest).unwrap(),
            0,
            "b's socket is closed"
        );
        assert!(kids.iter().all(|k| k.pid != pids[1]));
    }

    /// A run that finds every uid leased gets a spare's: the loop sends the spare that has
    /// waited longest away (its socket closes, it removes its sandbox and its lease), however
    /// young, and another on the next call; a child with no spare waiting besides it changes
    /// nothing.
    #[test]
    fn a_run_that_finds_every_uid_leased_has_a_spare_sent_away() {
        use std::io::Read;
        let (mut kids, mut theirs) = children(&[301, 302, 303]);
        builds_a_spare(&mut kids, &mut theirs[0], 301, &shape('a'));
        builds_a_spare(&mut kids, &mut theirs[1], 302, &shape('b'));
        let now = Instant::now();
        kids[0].ready_at = Some(now);
        kids[1].ready_at = Some(now - Duration::from_millis(1));
        let (_, gone) = say(&mut kids, &mut theirs[2], 303, POOL_FULL, "");
        assert_eq!(gone, vec![302], "the older spare goes");
        let mut rest = Vec::new();
        assert_eq!(
            theirs[1].read_to_end(&mut rest).unwrap(),
            0,
            "its socket is closed"
        );
        let (_, gone) = say(&mut kids, &mut theirs[2], 303, POOL_FULL, "");
        assert_eq!(gone, vec![301]);
        let (_, gone) = say(&mut kids, &mut theirs[2], 303, POOL_FULL, "");
        assert_eq!(gone, Vec::<i32>::new(), "no spare left");
        assert_eq!(kids.iter().map(|k| k.pid).collect::<Vec<_>>(), vec![303]);
    }

    /// The loop looks at a connection's shape line without reading it: the child that serves the
    /// connection reads it, then the request.
    #[test]
    fn a_shape_line_is_looked_at_and_left_for_the_child() {
        use std::io::{Read, Write};
        let (conn, mut client) = UnixStream::pair().unwrap();
        assert_eq!(peek_shape(&conn), Shape::Waiting);
        client
            .write_all(b"shape abc\n{\"type\":\"request\"}\n")
            .unwrap();
        assert_eq!(peek_shape(&conn), Shape::Known(Some("abc".into())));
        drop(client);
        let mut all = String::new();
        (&conn).read_to_string(&mut all).unwrap();
        assert_eq!(all, "shape abc\n{\"type\":\"request\"}\n");
        assert_eq!(peek_shape(&conn), Shape::Gone);
        // A connection that begins with anything else, or with a line in pieces, has no shape.
        for start in ["sha", "shape abc"] {
            let (conn, mut client) = UnixStream::pair().unwrap();
            client.write_all(start.as_bytes()).unwrap();
            assert_eq!(peek_shape(&conn), Shape::Known(None), "{start}");
        }
        let (conn, mut client) = UnixStream::pair().unwrap();
        client.write_all(b"{\"type\"").unwrap();
        assert_eq!(peek_shape(&conn), Shape::Known(None));
        let (conn, mut client) = UnixStream::pair().unwrap();
        client.write_all(&[b'x'; 200]).unwrap();
        assert_eq!(peek_shape(&conn), Shape::Known(None));
        let (conn, mut client) = UnixStream::pair().unwrap();
        client
            .write_all(format!("shape {}", "a".repeat(200)).as_bytes())
            .unwrap();
        assert_eq!(peek_shape(&conn), Shape::Known(None));
    }

    #[test]
    fn arguments_need_a_digest_and_take_an_owner() {
        let a = |v: &[&str]| parse_args(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            a(&[D]),
            Ok(Options {
                digest: D.into(),
                owner: 0,
                server_dir: PathBuf::from(SERVER_DIR),
                host: false,
                idle: None,
                dir: PathBuf::from(DIR),
                stop_with_parent: false,
            })
        );
        assert_eq!(a(&[D, "--owner", "1000"]).map(|o| o.owner), Ok(1000));
        // The host's folder unless one is given (band-sandboxd's server has its own).
        assert_eq!(
            a(&[D, "--host"]).map(|o| o.dir),
            Ok(PathBuf::from(band::warm::DIR))
        );
        let own = a(&[
            D,
            "--host",
            "--dir",
            "/run/band-serve/x",
            "--stop-with-parent",
        ])
        .unwrap();
        assert_eq!(own.dir(), Path::new("/run/band-serve/x"));
        assert!(own.stop_with_parent);
        let err = |v: &[&str]| a(v).map(|_| ()).unwrap_err().to_string();
        assert_eq!(err(&[]), "serve needs the build digest (64 hex digits)");
        assert_eq!(err(&["../../etc/x"]), "unexpected argument `../../etc/x`");
        let upper = D.to_uppercase();
        assert_eq!(err(&[&upper]), format!("unexpected argument `{upper}`"));
        assert_eq!(err(&[D, "--owner"]), "--owner needs a uid");
        assert_eq!(err(&[D, "--owner", "-1"]), "--owner needs a uid");
        assert_eq!(err(&[D, D]), format!("unexpected argument `{D}`"));
        for bad in [
            &[D, "--dir"][..],
            &[D, "--dir", "run/x"],
            &[D, "--dir", "/"],
        ] {
            assert_eq!(err(bad), "--dir needs an absolute path (not `/`)");
        }
    }

    #[test]
    fn the_host_server_serves_root_only_and_exits_when_idle() {
        let a = |v: &[&str]| parse_args(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let host = a(&[D, "--host"]).unwrap();
        assert!(host.host);
        assert_eq!(host.idle, Some(Duration::from_secs(band::warm::IDLE_SECS)));
        assert_eq!(host.dir(), Path::new("/run/band-serve/host"));
        assert_eq!(a(&[D]).unwrap().dir(), Path::new(DIR));
        assert_eq!(
            a(&["--idle", "5", "--host", D]).map(|o| o.idle),
            Ok(Some(Duration::from_secs(5)))
        );
        assert!(a(&[D, "--host", "--owner", "1000"]).is_err());
        assert!(a(&[D, "--idle", "0"]).is_err());
        assert!(a(&[D, "--idle"]).is_err());
    }

    #[test]
    fn the_host_server_is_current_while_its_program_and_settings_give_its_digest() {
        let t = tempfile::tempdir().unwrap();
        let exe = t.path().join("band-server");
        fs_err::write(&exe, b"build one").unwrap();
        let digest = band::warm::digest_here(&exe).unwrap();
        let opts = Options {
            digest,
            owner: 0,
            server_dir: t.path().to_path_buf(),
            host: true,
            idle: None,
            dir: t.path().to_path_buf(),
            stop_with_parent: false,
        };
        assert!(still_current(&opts, &exe));
        // Another build installed over it.
        let next = t.path().join("next");
        fs_err::write(&next, b"build two").unwrap();
        fs_err::rename(&next, &exe).unwrap();
        assert!(!still_current(&opts, &exe));
    }

    #[test]
    fn the_socket_is_named_by_the_digest() {
        assert_eq!(
            socket_path(Path::new(DIR), D),
            PathBuf::from(format!("/run/band-serve/server-{D}.sock"))
        );
    }

    #[test]
    fn the_pid_file_names_pid_and_digest() {
        assert_eq!(parse_pid_file(&format!("42 {D}\n")), Some((42, D.into())));
        assert_eq!(parse_pid_file("42"), None);
        assert_eq!(parse_pid_file(&format!("0 {D}")), None);
        assert_eq!(parse_pid_file(&format!("-1 {D}")), None);
        assert_eq!(parse_pid_file("42 nothex"), None);
    }

    #[test]
    fn the_build_is_current_while_its_marker_is_not_older_than_installed_json() {
        let t = tempfile::tempdir().unwrap();
        let installed = t.path().join("installed.json");
        let marker = t.path().join(format!(".build-{D}"));
        assert!(!current(t.path(), D), "nothing installed");
        fs_err::write(&installed, b"{}").unwrap();
        assert!(!current(t.path(), D), "no marker");
        fs_err::write(&marker, b"").unwrap();
        assert!(current(t.path(), D));
        assert!(
            !current(t.path(), &D.replace('0', "1")),
            "another build's marker"
        );
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
        fs_err::File::options()
            .write(true)
            .open(&installed)
            .unwrap()
            .file()
            .set_modified(later)
            .unwrap();
        assert!(
            !current(t.path(), D),
            "installed.json rewritten after the marker"
        );
    }

    #[test]
    fn only_root_and_the_owner_may_connect() {
        assert!(peer_allowed(0, 1000));
        assert!(peer_allowed(1000, 1000));
        assert!(!peer_allowed(1001, 1000));
        assert!(peer_allowed(0, 0));
        assert!(!peer_allowed(1000, 0));
    }

    /// A child the loop has reaped already, or reaps now, is not waited for (before, one whose
    /// control socket the loop heard close after reaping it was, and the loop then woke every
    /// 10 ms for as long as it lived); one still running is.
    #[test]
    // Each child is reaped by `sys::reap`, what the test is about, not by `Child::wait`.
    #[allow(clippy::zombie_processes)]
    fn only_children_still_running_are_counted_as_ending() {
        use std::process::{Command, Stdio};
        // Until it has exited (a zombie, left to be reaped).
        let exited = |child: &std::process::Child| {
            let stat = format!("/proc/{}/stat", child.id());
            while !fs_err::read_to_string(&stat)
                .expect("read the child's stat")
                .rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('Z'))
            {
                std::thread::yield_now();
            }
        };
        let mut ending = Vec::new();

        let reaped_before = Command::new("true").spawn().expect("spawn true");
        exited(&reaped_before);
        let pid = reaped_before.id() as i32;
        assert_eq!(sys::reap(pid).expect("reap"), sys::Reaped::Now);
        still_ending(&mut ending, pid);
        assert!(ending.is_empty(), "a child reaped before is not ending");

        let zombie = Command::new("true").spawn().expect("spawn true");
        exited(&zombie);
        still_ending(&mut ending, zombie.id() as i32);
        assert!(
            ending.is_empty(),
            "a child that has exited is reaped, not counted"
        );
        assert_eq!(
            sys::reap(zombie.id() as i32).expect("reap"),
            sys::Reaped::Before
        );

        let mut running = Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn cat");
        still_ending(&mut ending, running.id() as i32);
        assert_eq!(ending, vec![running.id() as i32]);
        drop(running.stdin.take());
        exited(&running);
        assert_eq!(
            sys::reap(running.id() as i32).expect("reap"),
            sys::Reaped::Now
        );
    }
}
