//! band-server's end of the shim socket: accept, verify the peer, judge the call, record it, and
//! answer with the program to run (its descriptor, `SCM_RIGHTS`) or the refusal. See `shim` for
//! the protocol and why the checks below are enough.

use std::io::Write;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use band::proto::CliCall;

use crate::layers::cli::execcache::{ExecTable, RunPrograms};
use crate::layers::cli::shim::{self, CliRules, ShimRequest, Verdict};
use crate::sys;

/// Longest report line accepted (argv can be long, but not unbounded).
pub const MAX_REPORT_BYTES: u64 = 1 << 20;
/// Report workers at most (concurrent calls handled at once); more wait in the backlog.
const MAX_HANDLERS: usize = 32;

/// What the report thread tells the run loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    Call(CliCall),
    Forged(String),
}

/// `(st_dev, st_ino)` of a file.
pub type FileId = (u64, u64);

/// What a genuine shim process looks like from `/proc`.
#[derive(Debug, Clone)]
pub struct PeerCheck {
    pub shim: FileId,
    /// Devices that hold the system libraries (`/usr/lib`, `/usr/lib64`).
    pub lib_devs: Vec<u64>,
    pub uid: u32,
}

impl PeerCheck {
    /// `lib_trees`: the directories bound as `/usr/lib` etc. in the sandbox (the host trees, or
    /// the run's masked overlays of them, which have a device of their own).
    pub fn for_shim(shim: &Path, uid: u32, lib_trees: &[PathBuf]) -> std::io::Result<PeerCheck> {
        let m = fs_err::metadata(shim)?;
        let mut lib_devs = Vec::new();
        let defaults = [PathBuf::from("/usr/lib"), PathBuf::from("/usr/lib64")];
        for d in defaults.iter().chain(lib_trees) {
            if let Ok(m) = fs_err::metadata(d)
                && !lib_devs.contains(&m.dev())
            {
                lib_devs.push(m.dev());
            }
        }
        Ok(PeerCheck {
            shim: (m.dev(), m.ino()),
            lib_devs,
            uid,
        })
    }
}

/// One line of `/proc/<pid>/maps` that is backed by a file: (dev, inode, path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub dev: u64,
    pub inode: u64,
    pub path: String,
}

/// A line of `/proc/<pid>/maps` that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad maps line {0:?}")]
pub struct BadMapsLine(pub String);

/// A mapping that is neither the shim nor a system library.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("maps {path} (dev {dev}, inode {inode})")]
pub struct ForeignMapping {
    pub path: String,
    pub dev: u64,
    pub inode: u64,
}

/// Why a connection to the report socket is not a genuine shim's request (a forged report).
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    #[error("peer uid {uid} is not the run's uid {run}")]
    Uid { uid: u32, run: u32 },
    #[error("pid {pid}: {what}: {source}")]
    Proc {
        pid: i32,
        what: &'static str,
        source: std::io::Error,
    },
    #[error("pid {0}: unreadable stat")]
    Stat(i32),
    #[error("pid {0} is not the shim")]
    NotShim(i32),
    #[error("pid {pid} is the shim, but not past its start ({comm:?})")]
    NotStarted { pid: i32, comm: String },
    #[error(transparent)]
    MapsLine(#[from] BadMapsLine),
    #[error("pid {pid} {source}")]
    Mapping { pid: i32, source: ForeignMapping },
    #[error("pid {0} was replaced while it was checked")]
    Replaced(i32),
    #[error("pid {0} was replaced before its request was read")]
    ReplacedBeforeRead(i32),
    #[error("connection closed before the request")]
    Closed,
    #[error("request bytes from pid {sender:?}, not the shim (pid {pid})")]
    Sender { sender: Option<i32>, pid: i32 },
    #[error("request longer than {MAX_REPORT_BYTES} bytes")]
    TooLong,
    #[error("request is not UTF-8")]
    NotUtf8,
    #[error("SO_PEERCRED: {0}")]
    PeerCred(std::io::Error),
    #[error("SO_PASSCRED: {0}")]
    PassCred(std::io::Error),
    #[error("bad request: {0}")]
    BadRequest(serde_json::Error),
    #[error("wrong nonce")]
    WrongNonce,
    #[error("empty argv")]
    EmptyArgv,
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Encode(serde_json::Error),
    #[error("internal: no descriptor for the program {0:?}")]
    NoDescriptor(String),
}

/// The file-backed mappings in a `/proc/<pid>/maps` text (inode ≠ 0).
pub fn parse_maps(text: &str) -> Result<Vec<Mapping>, BadMapsLine> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut rest = line;
        let mut fields = [""; 5];
        for f in fields.iter_mut() {
            rest = rest.trim_start();
            let end = rest.find(' ').unwrap_or(rest.len());
            *f = &rest[..end];
            rest = &rest[end..];
        }
        let bad = || BadMapsLine(line.to_string());
        let inode: u64 = fields[4].parse().map_err(|_| bad())?;
        if inode == 0 {
            continue;
        }
        let (maj, min) = fields[3].split_once(':').ok_or_else(bad)?;
        let maj = u64::from_str_radix(maj, 16).map_err(|_| bad())?;
        let min = u64::from_str_radix(min, 16).map_err(|_| bad())?;
        out.push(Mapping {
            dev: libc::makedev(maj as u32, min as u32),
            inode,
            path: rest.trim().to_string(),
        });
    }
    Ok(out)
}

/// Is every file-backed mapping the shim itself or a system library?
pub fn check_mappings(maps: &[Mapping], check: &PeerCheck) -> Result<(), ForeignMapping> {
    for m in maps {
        if (m.dev, m.inode) == check.shim {
            continue;
        }
        let lib_path = ["/usr/lib/", "/usr/lib64/", "/lib/", "/lib64/"]
            .iter()
            .any(|p| m.path.starts_with(p))
            && !m.path.ends_with(" (deleted)");
        if lib_path && check.lib_devs.contains(&m.dev) {
            continue;
        }
        return Err(ForeignMapping {
            path: m.path.clone(),
            dev: m.dev,
            inode: m.inode,
        });
    }
    Ok(())
}

/// Field 22 of a `/proc/<pid>/stat` text: the start time in clock ticks since boot. A pid and its
/// start time name one process for good (a pid is reused only by a process that starts later).
pub fn parse_starttime(stat: &str) -> Option<u64> {
    parse_stat(stat).map(|(_, start)| start)
}

/// Fields 2 and 22 of a `/proc/<pid>/stat` text: the process's name (`comm`, what
/// `/proc/<pid>/comm` holds) and its start time. The name may hold spaces and parentheses: it is
/// what lies between the first `(` and the last `)`; the fields after that `)` start at 3.
pub fn parse_stat(stat: &str) -> Option<(&str, u64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?;
    let start = stat[close + 1..].split_whitespace().nth(19)?.parse().ok()?;
    Some((comm, start))
}

/// `/proc/<pid>`, open: every file read through it is one process's. A pid that ends and is
/// reused names another process, whose files this descriptor does not reach: reads through it
/// fail (`ESRCH`) once the process it was opened for is gone (reaped), whatever its pid names
/// then. So the checks of [`verify_peer`] all look at one process, and the start time they read
/// at the end and again at the request is that process's, read with one `openat` and one `read`
/// instead of a path walk and a growing read (issue 17, round 6).
pub struct ProcDir {
    pid: i32,
    dir: std::os::fd::OwnedFd,
}

/// The most bytes read of a `/proc/<pid>/stat` (about 300 in practice: 52 numbers and a name of
/// at most 15 bytes).
const STAT_MAX: usize = 4096;

impl ProcDir {
    /// Open `<proc>/<pid>` (`proc`: `/proc`, a parameter for tests).
    pub fn open(proc: &Path, pid: i32) -> Result<ProcDir, PeerError> {
        use rustix::fs::{Mode, OFlags};
        let dir = rustix::fs::open(
            proc.join(pid.to_string()),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| PeerError::Proc {
            pid,
            what: "(its /proc directory)",
            source: e.into(),
        })?;
        Ok(ProcDir { pid, dir })
    }

    fn err(&self, what: &'static str) -> impl FnOnce(rustix::io::Errno) -> PeerError {
        let pid = self.pid;
        move |e| PeerError::Proc {
            pid,
            what,
            source: e.into(),
        }
    }

    /// The whole of the process's file `what`, at most `max` bytes (more is an error: a read
    /// never stops short of the end and passes what it did not see).
    pub fn read(&self, what: &'static str, max: usize) -> Result<Vec<u8>, PeerError> {
        use rustix::fs::{Mode, OFlags};
        let file = rustix::fs::openat(
            &self.dir,
            what,
            OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(self.err(what))?;
        let mut out = vec![0u8; 4096.min(max)];
        let mut len = 0;
        loop {
            if len == out.len() {
                if len >= max {
                    return Err(PeerError::Proc {
                        pid: self.pid,
                        what,
                        source: std::io::Error::other(format!("longer than {max} bytes")),
                    });
                }
                out.resize((len * 2).min(max), 0);
            }
            let n = rustix::io::read(&file, &mut out[len..]).map_err(self.err(what))?;
            if n == 0 {
                out.truncate(len);
                return Ok(out);
            }
            len += n;
        }
    }

    /// The process's name and start time (`stat`).
    pub fn stat(&self) -> Result<(String, u64), PeerError> {
        let text = self.read("stat", STAT_MAX)?;
        let text = String::from_utf8_lossy(&text);
        parse_stat(&text)
            .map(|(comm, start)| (comm.to_string(), start))
            .ok_or(PeerError::Stat(self.pid))
    }

    /// The process's start time, or an error if it is no longer this process (gone, or another
    /// one's start time: never, through the open directory, but checked all the same).
    pub fn still(&self, start: u64) -> Result<(), PeerError> {
        match self.stat()? {
            (_, now) if now == start => Ok(()),
            _ => Err(PeerError::ReplacedBeforeRead(self.pid)),
        }
    }
}

/// The most bytes read of a `/proc/<pid>/maps` (band-shim, static, maps about ten files' worth
/// of lines; a process that maps more is not band-shim).
const MAPS_MAX: usize = 1 << 20;

/// Verify that `pid` is a genuine band-shim process of the run's uid, running its own code (its
/// name is [`shim::COMM`]). Returns its `/proc` directory and start time, checked before and after,
/// so every look at `/proc` was at this one process, and the path it was executed from in the
/// sandbox (its `/proc/<pid>/exe`: band-shim is bound over each program of a runtime tree and of
/// the skill, so this names the one the kernel ran, however the script reached it: a symlink, a
/// relative path).
///
/// The name is read from `stat` (field 2 is `/proc/<pid>/comm`), at the start and again at the
/// end, around the checks of the executable and the mappings: an `exec` between them would have
/// reset the name, and only band-shim's code sets this one.
pub fn verify_peer(
    pid: i32,
    uid: u32,
    check: &PeerCheck,
) -> Result<(ProcDir, u64, Option<PathBuf>), PeerError> {
    verify_peer_in(Path::new("/proc"), pid, uid, check)
}

/// [`verify_peer`] with the `/proc` to look in as a parameter.
pub fn verify_peer_in(
    proc: &Path,
    pid: i32,
    uid: u32,
    check: &PeerCheck,
) -> Result<(ProcDir, u64, Option<PathBuf>), PeerError> {
    if uid != check.uid {
        return Err(PeerError::Uid {
            uid,
            run: check.uid,
        });
    }
    let dir = ProcDir::open(proc, pid)?;
    let (comm, start) = dir.stat()?;
    let exe = rustix::fs::statat(&dir.dir, "exe", rustix::fs::AtFlags::empty())
        .map_err(dir.err("exe"))?;
    if (exe.st_dev, exe.st_ino) != check.shim {
        return Err(PeerError::NotShim(pid));
    }
    let executed = rustix::fs::readlinkat(&dir.dir, "exe", Vec::new())
        .ok()
        .map(|link| PathBuf::from(std::ffi::OsString::from_vec(link.into_bytes())));
    let not_started = |comm: String| PeerError::NotStarted { pid, comm };
    if comm != shim::COMM {
        return Err(not_started(comm));
    }
    let maps = dir.read("maps", MAPS_MAX)?;
    check_mappings(&parse_maps(&String::from_utf8_lossy(&maps))?, check)
        .map_err(|source| PeerError::Mapping { pid, source })?;
    let (comm, now) = dir.stat()?;
    if now != start {
        return Err(PeerError::Replaced(pid));
    }
    if comm != shim::COMM {
        return Err(not_started(comm));
    }
    Ok((dir, start, executed))
}

/// The nonces of one run's socket: 128 bits each, the first half of SHA-256 over a 256-bit key
/// read once from `/dev/urandom` when the socket opens and a call counter. Unpredictable to the
/// sandbox as long as the key is (it never leaves band-server; every input hashed has the same
/// length, so no length extension reaches another counter's value), never repeated within the
/// run, and no system call per call.
struct Nonces {
    key: [u8; 32],
    next: std::sync::atomic::AtomicU64,
}

impl Nonces {
    fn new() -> std::io::Result<Nonces> {
        let hex = crate::layers::cli::execcache::random_hex(2)?.concat();
        let mut key = [0u8; 32];
        for (k, pair) in key.iter_mut().zip(hex.as_bytes().chunks(2)) {
            let digit = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
            *k = digit(pair[0]) << 4 | digit(pair[1]);
        }
        Ok(Nonces {
            key,
            next: std::sync::atomic::AtomicU64::new(0),
        })
    }

    fn next(&self) -> String {
        nonce_from(&self.key, self.next.fetch_add(1, Ordering::Relaxed))
    }
}

/// The `n`th nonce of `key`: 32 hex characters. Pure.
fn nonce_from(key: &[u8; 32], n: u64) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(key);
    h.update(n.to_le_bytes());
    h.finalize()[..16]
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

/// Where verified calls go. Called before the shim is answered, so a call is always recorded
/// before the command it reports can run (or the run can end).
pub type OnReport = Arc<dyn Fn(Report) + Send + Sync>;

/// Read one line from `conn`, every byte of which was written by process `pid`.
fn read_line_from(conn: &UnixStream, pid: i32) -> Result<String, PeerError> {
    let mut line = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let (n, sender) = sys::recv_with_creds(conn, &mut buf)?;
        if n == 0 {
            return Err(PeerError::Closed);
        }
        if sender != Some(pid) {
            return Err(PeerError::Sender { sender, pid });
        }
        line.extend_from_slice(&buf[..n]);
        if let Some(end) = line.iter().position(|b| *b == b'\n') {
            line.truncate(end);
            break;
        }
        if line.len() as u64 > MAX_REPORT_BYTES {
            return Err(PeerError::TooLong);
        }
    }
    String::from_utf8(line).map_err(|_| PeerError::NotUtf8)
}

/// The verdict for a verified request, and the program (its name in the table) whose descriptor
/// goes with an `exec`. Allowed and denied calls are recorded first.
pub fn judge(
    rules: &CliRules,
    table: &ExecTable,
    argv: &[String],
    on_report: &OnReport,
) -> (Verdict, Option<String>) {
    match shim::resolve_call(table, argv) {
        Err(e) => {
            // An undeclared host program (reached through bash's `command_not_found_handle`,
            // see `workdir::BASH_ENV_FILE`) is a denial on record; the script sees the same
            // "not available" either way, so it learns nothing about the host's programs.
            let on_host =
                |name: &str| crate::facts::resolve_binary(name, rules.host_search()).is_some();
            if let Some(call) = shim::undeclared_call(rules, argv, &on_host) {
                on_report(Report::Call(call));
            }
            (
                Verdict::Denied {
                    message: e.to_string(),
                    code: shim::EXIT_UNKNOWN,
                },
                None,
            )
        }
        Ok(r) => {
            let call = shim::decide_with(rules, &r.judged, r.needs_rule);
            on_report(Report::Call(call.clone()));
            // A launcher (`env jq`, `xargs jq`) that will not find its command: that command's
            // denial is on record too (`launch`); the launcher runs and fails as it would.
            // `find -exec`, `env -S` too; for xargs and `{}`, what the record knows is a
            // template (`CallSource`).
            if call.allowed {
                for (inner, source) in super::launch::started(&r.judged) {
                    if shim::resolve_call(table, &inner).is_err() {
                        let on_host = |name: &str| {
                            crate::facts::resolve_binary(name, rules.host_search()).is_some()
                        };
                        if let Some(mut denied) = shim::undeclared_call(rules, &inner, &on_host) {
                            denied.source = source;
                            on_report(Report::Call(denied));
                        }
                    }
                }
            }
            if call.allowed {
                (Verdict::Exec { argv: r.argv }, Some(r.program))
            } else {
                (
                    Verdict::Denied {
                        message: shim::denied_message(&call),
                        code: shim::EXIT_DENIED,
                    },
                    None,
                )
            }
        }
    }
}

fn handle(
    conn: UnixStream,
    nonces: &Nonces,
    check: &PeerCheck,
    rules: &CliRules,
    programs: &RunPrograms,
    on_report: &OnReport,
) -> Result<(), PeerError> {
    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
    conn.set_write_timeout(Some(Duration::from_secs(5)))?;
    let cred = sys::peer_cred(&conn).map_err(PeerError::PeerCred)?;
    let (proc, start, executed) = match verify_peer(cred.pid, cred.uid, check) {
        Ok(v) => v,
        Err(e) => {
            let _ = (&conn).write_all(b"refused\n");
            return Err(e);
        }
    };
    sys::set_passcred(&conn).map_err(PeerError::PassCred)?;
    let n = nonces.next();
    (&conn).write_all(format!("{n}\n").as_bytes())?;
    let line = read_line_from(&conn, cred.pid)?;
    let req: ShimRequest = serde_json::from_str(&line).map_err(PeerError::BadRequest)?;
    if req.nonce != n {
        return Err(PeerError::WrongNonce);
    }
    if req.argv.is_empty() {
        return Err(PeerError::EmptyArgv);
    }
    proc.still(start)?;
    // A tree's or the skill's program is judged as the file the kernel ran, not by the name of
    // the link or relative path it was called by.
    let argv =
        shim::executed_argv(&programs.table, &req.argv, executed.as_deref()).unwrap_or(req.argv);
    let (verdict, program) = judge(rules, &programs.table, &argv, on_report);
    let mut out = serde_json::to_vec(&verdict).map_err(PeerError::Encode)?;
    out.push(b'\n');
    let Some(program) = program else {
        return Ok((&conn).write_all(&out)?);
    };
    // The program goes only on this connection, whose request the verified shim wrote, and only
    // now that the call is allowed and recorded.
    let Ok(fd) = programs.fd(&program) else {
        let denied = Verdict::Denied {
            message: format!("band: {program}: cannot hand the program over"),
            code: shim::EXIT_UNKNOWN,
        };
        let mut out = serde_json::to_vec(&denied).map_err(PeerError::Encode)?;
        out.push(b'\n');
        (&conn).write_all(&out)?;
        return Err(PeerError::NoDescriptor(program));
    };
    let sent = sys::send_with_fd(&conn, &out, std::os::fd::AsFd::as_fd(&*fd))?;
    Ok((&conn).write_all(&out[sent..])?)
}

/// The report workers: how many there are and how many wait in `accept`.
struct Pool {
    idle: AtomicUsize,
    workers: AtomicUsize,
}

/// The socket's workers, each accepting connections itself.
pub struct ReportListener {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    pool: Arc<Pool>,
    spawn: Arc<Spawner>,
}

/// Starts one more worker (kept until [`ReportListener::stop`]).
type Spawner = std::sync::Mutex<Option<Box<dyn Fn() + Send + Sync>>>;

impl ReportListener {
    /// Bind `path` (owned root:`gid`, mode 0660) and start accepting.
    pub fn start(
        path: &Path,
        gid: u32,
        check: PeerCheck,
        rules: CliRules,
        programs: RunPrograms,
        on_report: OnReport,
    ) -> std::io::Result<ReportListener> {
        let listener = Arc::new(UnixListener::bind(path)?);
        std::os::unix::fs::lchown(path, Some(0), Some(gid))?;
        fs_err::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o660))?;
        let stop = Arc::new(AtomicBool::new(false));
        let nonces = Arc::new(Nonces::new()?);
        let check = Arc::new(check);
        let rules = Arc::new(rules);
        let programs = Arc::new(programs);
        // Calls are served by a pool of threads that outlive a call (a thread per call cost a
        // spawn on every command, and up to ~2 ms at p90 under load), each blocked in `accept`
        // itself (a separate accept thread handing connections over cost a thread switch per
        // call): two from the start, one more whenever a worker takes a call and leaves none
        // waiting, up to MAX_HANDLERS. Past that, connections wait in the backlog.
        let pool = Arc::new(Pool {
            idle: AtomicUsize::new(0),
            workers: AtomicUsize::new(0),
        });
        let spawn: Arc<Spawner> = Arc::new(std::sync::Mutex::new(None));
        let worker = {
            let (pool, stop, spawn) = (Arc::clone(&pool), Arc::clone(&stop), Arc::clone(&spawn));
            move || -> std::io::Result<()> {
                let (pool, stop, spawn, listener, nonces, check, rules, programs, on_report) = (
                    Arc::clone(&pool),
                    Arc::clone(&stop),
                    Arc::clone(&spawn),
                    Arc::clone(&listener),
                    Arc::clone(&nonces),
                    Arc::clone(&check),
                    Arc::clone(&rules),
                    Arc::clone(&programs),
                    Arc::clone(&on_report),
                );
                pool.workers.fetch_add(1, Ordering::SeqCst);
                let counted = Arc::clone(&pool);
                let spawned = std::thread::Builder::new()
                    .name("report".into())
                    .spawn(move || {
                        while !stop.load(Ordering::SeqCst) {
                            pool.idle.fetch_add(1, Ordering::SeqCst);
                            let conn = listener.accept();
                            let idle = pool.idle.fetch_sub(1, Ordering::SeqCst) - 1;
                            // A connection accepted after `stop` (its wake-up, or a late call)
                            // is not served.
                            if stop.load(Ordering::SeqCst) {
                                break;
                            }
                            let Ok((conn, _)) = conn else { continue };
                            if idle == 0
                                && pool.workers.load(Ordering::SeqCst) < MAX_HANDLERS
                                && let Ok(more) = spawn.lock()
                                && let Some(more) = more.as_ref()
                            {
                                more();
                            }
                            let r = handle(conn, &nonces, &check, &rules, &programs, &on_report);
                            if let Err(e) = r {
                                on_report(Report::Forged(e.to_string()));
                            }
                        }
                        pool.workers.fetch_sub(1, Ordering::SeqCst);
                    });
                if spawned.is_err() {
                    counted.workers.fetch_sub(1, Ordering::SeqCst);
                }
                spawned.map(|_| ())
            }
        };
        worker()?;
        worker()?;
        if let Ok(mut slot) = spawn.lock() {
            *slot = Some(Box::new(move || {
                let _ = worker();
            }));
        }
        Ok(ReportListener {
            path: path.to_path_buf(),
            stop,
            pool,
            spawn,
        })
    }

    /// Stop serving: no connection accepted from now on is served (calls being served finish on
    /// their own). Every worker waiting in `accept` is woken by a connection of its own and ends.
    pub fn stop(&mut self) {
        if !self.stop.swap(true, Ordering::SeqCst) {
            // The spawner holds the workers' shares of the socket: gone, the socket closes with
            // the last worker.
            if let Ok(mut slot) = self.spawn.lock() {
                slot.take();
            }
            for _ in 0..self.pool.workers.load(Ordering::SeqCst) {
                if UnixStream::connect(&self.path).is_err() {
                    break;
                }
            }
        }
    }
}

impl Drop for ReportListener {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    const MAPS: &str = "\
55d0c0a00000-55d0c0a10000 r--p 00000000 fd:01 1234                       /band/shim
55d0c0a10000-55d0c0a90000 r-xp 00010000 fd:01 1234                       /band/shim
7f1e2c000000-7f1e2c021000 rw-p 00000000 00:00 0 
7f1e2c200000-7f1e2c228000 r--p 00000000 fd:01 777                        /usr/lib/x86_64-linux-gnu/libc.so.6
7ffd5a1f0000-7ffd5a211000 rw-p 00000000 00:00 0                          [stack]
7ffd5a3c4000-7ffd5a3c6000 r-xp 00000000 00:00 0                          [vdso]
";

    fn check() -> PeerCheck {
        PeerCheck {
            shim: (libc::makedev(0xfd, 1), 1234),
            lib_devs: vec![libc::makedev(0xfd, 1)],
            uid: 1000,
        }
    }

    #[test]
    fn nonces_differ_per_call_and_per_key_and_look_like_the_protocol_says() {
        let key = [7u8; 32];
        let a = nonce_from(&key, 0);
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|b| b.is_ascii_hexdigit()), "{a}");
        assert_ne!(a, nonce_from(&key, 1));
        assert_eq!(a, nonce_from(&key, 0), "a function of key and counter");
        assert_ne!(
            a,
            nonce_from(&[8u8; 32], 0),
            "another run's key, other nonces"
        );
        let n = Nonces::new().unwrap();
        let (x, y) = (n.next(), n.next());
        assert_ne!(x, y);
        assert_ne!(n.key, [0u8; 32], "the key is read, not left zero");
        let m = Nonces::new().unwrap();
        assert_ne!(m.key, n.key);
    }

    #[test]
    fn maps_parse_file_backed_only() {
        let got = parse_maps(MAPS).unwrap_or_default();
        let paths: Vec<&str> = got.iter().map(|m| m.path.as_str()).collect();
        assert_eq!(
            paths,
            vec![
                "/band/shim",
                "/band/shim",
                "/usr/lib/x86_64-linux-gnu/libc.so.6"
            ]
        );
        assert_eq!(got[2].dev, libc::makedev(0xfd, 1));
        assert_eq!(check_mappings(&got, &check()), Ok(()));
    }

    #[test]
    fn a_preloaded_library_outside_the_system_libs_is_refused() {
        for extra in [
            "7f00-7f01 r-xp 00000000 00:2a 99 /tmp/evil.so",
            "7f00-7f01 r-xp 00000000 00:2a 99 /usr/lib/evil.so",
            "7f00-7f01 r-xp 00000000 00:01 99 /memfd:x (deleted)",
            "7f00-7f01 r-xp 00000000 fd:01 99 /workspace/lib.so",
            "7f00-7f01 r-xp 00000000 fd:01 98 /usr/lib/x86_64-linux-gnu/libc.so.6 (deleted)",
        ] {
            let maps = parse_maps(&format!("{MAPS}{extra}\n")).unwrap_or_default();
            assert!(check_mappings(&maps, &check()).is_err(), "{extra}");
        }
    }
    #[test]
    fn the_program_descriptor_travels_with_the_answer_close_on_exec() {
        use std::os::fd::{AsFd, AsRawFd};
        let tmp = tempfile::tempdir().unwrap();
        let prog = tmp.path().join("prog");
        fs_err::write(&prog, b"\x7fELF").unwrap();
        let fd = crate::layers::cli::execcache::open_program(&prog).unwrap();
        let (a, b) = UnixStream::pair().unwrap();
        let line = b"{\"exec\":{}}\n";
        assert_eq!(sys::send_with_fd(&a, line, fd.as_fd()).unwrap(), line.len());
        let mut buf = [0u8; 64];
        let (n, got) = sys::recv_with_fd(&b, &mut buf).unwrap();
        assert_eq!(&buf[..n], line);
        let got = got.unwrap();
        assert_ne!(got.as_raw_fd(), fd.as_raw_fd());
        let link = fs_err::read_link(format!("/proc/self/fd/{}", got.as_raw_fd())).unwrap();
        assert_eq!(link, prog);
        let info =
            fs_err::read_to_string(format!("/proc/self/fdinfo/{}", got.as_raw_fd())).unwrap();
        let flags = info
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .map(|f| u32::from_str_radix(f.trim(), 8).unwrap())
            .unwrap();
        assert_ne!(flags & libc::O_CLOEXEC as u32, 0, "received close-on-exec");
        // A plain line carries none.
        (&a).write_all(b"x\n").unwrap();
        let (n, none) = sys::recv_with_fd(&b, &mut buf).unwrap();
        assert_eq!((n, none.is_none()), (2, true));
    }

    #[test]
    fn start_time_is_field_22_even_when_the_name_has_parentheses() {
        let stat = "4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 200 18446744073709551615";
        assert_eq!(parse_starttime(stat), Some(987654));
        assert_eq!(parse_starttime("4242 (x) S 1"), None);
        assert_eq!(parse_starttime("garbage"), None);
    }

    #[test]
    fn the_name_and_start_time_come_from_one_stat_line() {
        let stat =
            "4242 (band/shim) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000";
        assert_eq!(parse_stat(stat), Some(("band/shim", 987654)));
        let odd = "7 (a) b (c)) S 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 55 1000";
        assert_eq!(parse_stat(odd), Some(("a) b (c)", 55)));
        assert_eq!(parse_stat("7 (x S 1"), None);
        assert_eq!(parse_stat(")x( 1 2"), None);
    }

    /// A `/proc/<pid>` descriptor is one process's: once that process is gone (reaped), a read
    /// through it fails, whatever the pid names by then. The request's last check
    /// ([`ProcDir::still`]) therefore fails closed for a peer that ended after its check.
    #[test]
    fn a_proc_directory_reads_its_own_process_and_nothing_after_it_ends() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let dir = ProcDir::open(Path::new("/proc"), pid).unwrap();
        let (comm, start) = dir.stat().unwrap();
        assert_eq!(comm, "sleep");
        assert_eq!(dir.still(start).map_err(|e| e.to_string()), Ok(()));
        assert!(
            matches!(dir.still(start + 1), Err(PeerError::ReplacedBeforeRead(p)) if p == pid),
            "another start time is another process"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        let gone = dir.still(start).map_err(|e| e.to_string());
        assert!(
            matches!(&gone, Err(m) if m.starts_with(&format!("pid {pid}: stat: "))),
            "{gone:?}"
        );
        assert!(dir.read("maps", 1 << 20).is_err());
        // A file longer than the limit is an error, not its first bytes.
        let me = ProcDir::open(Path::new("/proc"), std::process::id() as i32).unwrap();
        assert!(me.read("maps", 16).is_err());
        assert!(!me.read("maps", MAPS_MAX).unwrap().is_empty());
    }

    /// The peer check on a made-up `/proc/<pid>`: the executable by its file identity, the name,
    /// every mapping, the uid; each wrong one refuses the peer.
    #[test]
    fn the_peer_check_refuses_each_wrong_part() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().unwrap();
        let shim = tmp.path().join("shim");
        let other = tmp.path().join("other");
        fs_err::write(&shim, b"").unwrap();
        fs_err::write(&other, b"").unwrap();
        let m = fs_err::metadata(&shim).unwrap();
        let check = PeerCheck {
            shim: (m.dev(), m.ino()),
            lib_devs: vec![],
            uid: 1000,
        };
        let stat =
            |comm: &str| format!("77 ({comm}) S 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 4242 1000\n");
        let maps = |path: &Path| {
            let ino = fs_err::metadata(path).unwrap().ino();
            let dev = fs_err::metadata(path).unwrap().dev();
            format!(
                "5555-5556 r-xp 00000000 {:x}:{:x} {ino} /band/shim\n7ffd-7ffe rw-p 00000000 00:00 0 [stack]\n",
                libc::major(dev),
                libc::minor(dev)
            )
        };
        let proc = tmp.path().join("proc");
        let make = |exe: &Path, comm: &str, mapped: &Path| {
            let _ = fs_err::remove_dir_all(&proc);
            fs_err::create_dir_all(proc.join("77")).unwrap();
            fs_err::os::unix::fs::symlink(exe, proc.join("77/exe")).unwrap();
            fs_err::write(proc.join("77/stat"), stat(comm)).unwrap();
            fs_err::write(proc.join("77/maps"), maps(mapped)).unwrap();
        };
        let verdict = |uid: u32| verify_peer_in(&proc, 77, uid, &check).map(|(_, s, e)| (s, e));
        make(&shim, COMM_NAME, &shim);
        assert_eq!(
            verdict(1000).map_err(|e| e.to_string()),
            Ok((4242, Some(shim.clone())))
        );
        assert!(matches!(verdict(1001), Err(PeerError::Uid { .. })));
        make(&other, COMM_NAME, &shim);
        assert!(matches!(verdict(1000), Err(PeerError::NotShim(77))));
        make(&shim, "jq", &shim);
        assert!(matches!(verdict(1000), Err(PeerError::NotStarted { .. })));
        make(&shim, COMM_NAME, &other);
        assert!(matches!(verdict(1000), Err(PeerError::Mapping { .. })));
        assert!(matches!(
            verify_peer_in(&proc, 78, 1000, &check),
            Err(PeerError::Proc { pid: 78, .. })
        ));
    }

    const COMM_NAME: &str = shim::COMM;

    #[test]
    fn judge_records_then_answers() {
        use crate::layers::cli::execcache::Program;
        let rules = CliRules::new(&["jq -r *".to_string()], &[], &["cat".to_string()])
            .unwrap_or_else(|e| panic!("{e}"));
        let host = tempfile::tempdir().unwrap();
        let perl = host.path().join("perl");
        fs_err::write(&perl, "").unwrap();
        fs_err::set_permissions(&perl, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let table = ExecTable::from([
            (
                "jq".to_string(),
                Program {
                    file: "/state/exec/cache/jq-aa".into(),
                    script: None,
                    argv0: None,
                },
            ),
            (
                "cat".to_string(),
                Program {
                    file: "/state/exec/cache/cat-bb".into(),
                    script: None,
                    argv0: None,
                },
            ),
        ]);
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen2 = Arc::clone(&seen);
        let on: OnReport = Arc::new(move |r| seen2.lock().unwrap().push(r));
        let v = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            judge(&rules, &table, &v(&["/usr/bin/jq", "-r", "."]), &on),
            (Verdict::Exec { argv: None }, Some("jq".to_string()))
        );
        assert_eq!(
            judge(&rules, &table, &v(&["jq", "."]), &on),
            (
                Verdict::Denied {
                    message: "band: denied: jq . (no allow.cli rule matches)".into(),
                    code: shim::EXIT_DENIED
                },
                None
            )
        );
        assert_eq!(
            judge(&rules, &table, &v(&["perl"]), &on),
            (
                Verdict::Denied {
                    message: "band: perl: command not available in this sandbox".into(),
                    code: shim::EXIT_UNKNOWN
                },
                None
            )
        );
        // The host has `perl` (this test's lookup): a denial on record, the same answer.
        let rules = rules.with_host_search(vec![host.path().to_path_buf()]);
        assert_eq!(
            judge(&rules, &table, &v(&["perl", "-e", "1"]), &on),
            (
                Verdict::Denied {
                    message: "band: perl: command not available in this sandbox".into(),
                    code: shim::EXIT_UNKNOWN
                },
                None
            )
        );
        assert_eq!(
            judge(&rules, &table, &v(&["ruby"]), &on).1,
            None,
            "not on the host either"
        );
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 3, "unknown names are not calls: {seen:?}");
        assert_eq!(
            seen[2],
            Report::Call(band::proto::CliCall {
                argv: v(&["perl", "-e", "1"]),
                allowed: false,
                rule: None,
                source: None,
            })
        );
        assert_eq!(
            seen[0],
            Report::Call(band::proto::CliCall {
                argv: v(&["jq", "-r", "."]),
                allowed: true,
                rule: Some("jq -r *".into()),
                source: None,
            })
        );
    }
}
