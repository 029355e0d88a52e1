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

use crate::layers::cli::execcache::{AdmitError, ExecTable, RunPrograms};
use crate::layers::cli::shim::{self, CliRules, ImageAddresses, ShimRequest, Verdict};
use crate::sys;

/// Longest report line accepted (argv can be long, but not unbounded).
pub(crate) const MAX_REPORT_BYTES: u64 = 1 << 20;
/// Report workers at most (concurrent calls handled at once); more wait in the backlog.
const MAX_HANDLERS: usize = 32;

pub(crate) use crate::common::handover::{OnReport, Report};

/// `(st_dev, st_ino)` of a file.
pub(crate) type FileId = (u64, u64);

/// What a genuine shim process looks like from `/proc`.
#[derive(Debug, Clone)]
pub(crate) struct PeerCheck {
    pub(crate) shim: FileId,
    /// Devices that hold the system libraries (`/usr/lib`, `/usr/lib64`).
    pub(crate) lib_devs: Vec<u64>,
    pub(crate) uid: u32,
    /// Whether each peer's mappings are checked ([`check_mappings`]): when band-shim's file names
    /// a program interpreter (a dynamic build), `ld.so` starts it and maps what it is told to
    /// (`LD_PRELOAD`), before band-shim's code runs. A static band-shim (the build's default on
    /// glibc Linux: `build.rs`) has the kernel map its file and nothing else, and only its own
    /// code could map more, which it never does: reading and checking its `maps` on every call
    /// would find nothing (issue 17, round 18).
    pub(crate) maps: bool,
}

impl PeerCheck {
    /// `lib_trees`: the directories bound as `/usr/lib` etc. in the sandbox (the host trees, or
    /// the run's masked overlays of them, which have a device of their own).
    pub(crate) fn for_shim(
        shim: &Path,
        uid: u32,
        lib_trees: &[PathBuf],
    ) -> std::io::Result<PeerCheck> {
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
        // Unreadable, or not an ELF file this reads: the mappings are checked.
        let maps = crate::layers::cli::execcache::read_first(shim, ELF_HEAD_BYTES)
            .ok()
            .and_then(|head| elf_interpreter(&head))
            .unwrap_or(true);
        Ok(PeerCheck {
            shim: (m.dev(), m.ino()),
            lib_devs,
            uid,
            maps,
        })
    }
}

/// How much of band-shim's file [`PeerCheck::for_shim`] reads: its ELF header and program
/// headers, which follow it in every linker's output (about 700 bytes).
const ELF_HEAD_BYTES: u64 = 4096;

/// Whether the ELF file that starts with `head` names a program interpreter (a `PT_INTERP`
/// program header: a dynamically linked program, started by `ld.so`); `None` when `head` does
/// not hold a whole 64-bit little-endian ELF header and program header table. Pure.
pub(crate) fn elf_interpreter(head: &[u8]) -> Option<bool> {
    if head.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let u16_at = |at: usize| Some(u16::from_le_bytes(head.get(at..at + 2)?.try_into().ok()?));
    let u32_at = |at: usize| Some(u32::from_le_bytes(head.get(at..at + 4)?.try_into().ok()?));
    let u64_at = |at: usize| Some(u64::from_le_bytes(head.get(at..at + 8)?.try_into().ok()?));
    // e_phoff, e_phentsize and e_phnum (the ELF-64 header's layout).
    let table = usize::try_from(u64_at(32)?).ok()?;
    let (size, count) = (usize::from(u16_at(54)?), usize::from(u16_at(56)?));
    if size < 4 {
        return None;
    }
    let mut interp = false;
    for i in 0..count {
        let at = table.checked_add(i.checked_mul(size)?)?;
        interp |= u32_at(at)? == libc::PT_INTERP;
    }
    Some(interp)
}

/// One line of `/proc/<pid>/maps` that is backed by a file: (dev, inode, path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mapping {
    pub(crate) dev: u64,
    pub(crate) inode: u64,
    pub(crate) path: String,
}

/// A line of `/proc/<pid>/maps` that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad maps line {0:?}")]
pub(crate) struct BadMapsLine(pub(crate) String);

/// A mapping that is neither the shim nor a system library.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("maps {path} (dev {dev}, inode {inode})")]
pub(crate) struct ForeignMapping {
    pub(crate) path: String,
    pub(crate) dev: u64,
    pub(crate) inode: u64,
}

/// Why a connection to the report socket is not a genuine shim's request (a forged report).
#[derive(Debug, thiserror::Error)]
pub(crate) enum PeerError {
    #[error("peer uid {uid} is not the run's uid {run}")]
    Uid { uid: u32, run: u32 },
    #[error("{0}")]
    ProcRoot(std::io::Error),
    #[error("pid {pid}: {what}: {source}")]
    Proc {
        pid: i32,
        what: &'static str,
        source: std::io::Error,
    },
    #[error("pid {0}: unreadable stat")]
    Stat(i32),
    #[error("pid {0}: no AT_PHDR or AT_RANDOM in its auxv")]
    Auxv(i32),
    #[error("pid {0} is not the shim")]
    NotShim(i32),
    #[error("pid {pid} is the shim, but not past its start ({comm:?})")]
    NotStarted { pid: i32, comm: String },
    #[error(transparent)]
    MapsLine(#[from] BadMapsLine),
    #[error("pid {pid} {source}")]
    Mapping { pid: i32, source: ForeignMapping },
    #[error("pid {0}: its addresses are hidden from band-server (/proc/<pid>/stat shows zeros)")]
    Hidden(i32),
    #[error("pid {0} was replaced while it was checked")]
    Replaced(i32),
    #[error("pid {0}: the request names another program image than the one verified")]
    AnotherImage(i32),
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
    #[error("bad request: {0}")]
    BadRequest(serde_json::Error),
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
pub(crate) fn parse_maps(text: &str) -> Result<Vec<Mapping>, BadMapsLine> {
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
pub(crate) fn check_mappings(maps: &[Mapping], check: &PeerCheck) -> Result<(), ForeignMapping> {
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

/// One program image of a process, as `/proc/<pid>/stat` shows it: where the kernel put its
/// code and its stack (fields 26 to 28). An `exec` keeps the pid and the start time, but maps a
/// new image at addresses the kernel randomizes, so two images of one process differ here, even
/// two of the same program. The sandbox cannot turn the randomization off: seccomp allows
/// `personality` only its query and `PER_LINUX`, band-jail clears `ADDR_NO_RANDOMIZE` from the
/// persona it inherits, and a run does not start where `kernel.randomize_va_space` is 0
/// ([`randomization`]). All zero when the reader may not see them (not band-server, which is
/// root).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Image {
    pub(crate) start_code: u64,
    pub(crate) end_code: u64,
    pub(crate) start_stack: u64,
}

/// What [`verify_peer`] sees of its peer before its checks and again after them: the start time
/// (field 22: a pid and its start time name one process for good, a pid being reused only by a
/// process that starts later) and the program image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) start: u64,
    pub(crate) image: Image,
}

/// Fields 2, 22 and 26 to 28 of a `/proc/<pid>/stat` text: the process's name (`comm`, what
/// `/proc/<pid>/comm` holds), its start time and its program image. The name may hold spaces and
/// parentheses: it is what lies between the first `(` and the last `)`; the fields after that `)`
/// start at 3.
pub(crate) fn parse_stat(stat: &str) -> Option<(&str, Seen)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?;
    let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    let seen = Seen {
        start: field(22)?,
        image: Image {
            start_code: field(26)?,
            end_code: field(27)?,
            start_stack: field(28)?,
        },
    };
    Some((comm, seen))
}

/// Whether the kernel randomizes where it maps programs (`kernel.randomize_va_space`, read from
/// `sysctl`: `/proc/sys/kernel/randomize_va_space`, a parameter for tests): the CLI gate tells one
/// program image of a shim's process from the next by its addresses ([`Image`]), so a run does
/// not start without it.
pub(crate) fn randomization(sysctl: &Path) -> Result<(), RandomizationOff> {
    match fs_err::read_to_string(sysctl) {
        Ok(v) if v.trim() != "0" => Ok(()),
        Ok(_) => Err(RandomizationOff::Zero(sysctl.to_path_buf())),
        Err(e) => Err(RandomizationOff::Unreadable(std::sync::Arc::new(e))),
    }
}

/// Why the kernel does not randomize where it maps programs ([`randomization`]).
#[derive(Debug, Clone, thiserror::Error)]
pub enum RandomizationOff {
    #[error(
        "{} is 0: the kernel maps every program at the same addresses, and band-server tells one program a shim's process runs from the next by them",
        .0.display()
    )]
    Zero(std::path::PathBuf),
    /// The sysctl could not be read (the error names it).
    #[error("{0}")]
    Unreadable(std::sync::Arc<std::io::Error>),
}

/// `/proc/<pid>`, open, with its `stat`: every file read through it is one process's. A pid that
/// ends and is reused names another process, whose files these descriptors do not reach: reads
/// through them fail (`ESRCH`) once the process they were opened for is gone (reaped), whatever
/// its pid names then. So the checks of [`verify_peer`] all look at one process. Its `stat` is
/// read again at its start (`pread`, one system call: a `/proc` file starts over at offset 0)
/// instead of opened again (issue 17, rounds 6 and 18).
pub(crate) struct ProcDir {
    pid: i32,
    dir: std::os::fd::OwnedFd,
    stat: std::os::fd::OwnedFd,
}

/// An open `/proc` (a test's stand-in: any directory). Each peer's directory is opened in it:
/// on a VM, looking `/proc` up again from `/` for every call cost about 8 µs of the 20 µs its
/// `open` took (issue 17, round 20).
pub(crate) struct ProcRoot(std::os::fd::OwnedFd);

impl ProcRoot {
    pub(crate) fn open(path: &Path) -> std::io::Result<ProcRoot> {
        use rustix::fs::{Mode, OFlags};
        rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map(ProcRoot)
        .map_err(|e| std::io::Error::other(format!("cannot open {}: {e}", path.display())))
    }

    /// The host's `/proc`, opened on first use and kept for the process's life.
    fn host() -> Result<&'static ProcRoot, PeerError> {
        static PROC: std::sync::OnceLock<ProcRoot> = std::sync::OnceLock::new();
        if let Some(proc) = PROC.get() {
            return Ok(proc);
        }
        let proc = ProcRoot::open(Path::new("/proc")).map_err(PeerError::ProcRoot)?;
        Ok(PROC.get_or_init(|| proc))
    }
}

/// The most bytes read of a `/proc/<pid>/stat` (about 300 in practice: 52 numbers and a name of
/// at most 15 bytes) or `auxv` (a few dozen pairs of words).
const SMALL_MAX: usize = 4096;

impl ProcDir {
    /// Open `<proc>/<pid>` and its `stat` (`proc`: `/proc`, a parameter for tests).
    pub(crate) fn open(proc: &ProcRoot, pid: i32) -> Result<ProcDir, PeerError> {
        use rustix::fs::{Mode, OFlags};
        let dir = rustix::fs::openat(
            &proc.0,
            pid.to_string(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| PeerError::Proc {
            pid,
            what: "(its /proc directory)",
            source: e.into(),
        })?;
        let stat = rustix::fs::openat(
            &dir,
            "stat",
            OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| PeerError::Proc {
            pid,
            what: "stat",
            source: e.into(),
        })?;
        Ok(ProcDir { pid, dir, stat })
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
    pub(crate) fn read(&self, what: &'static str, max: usize) -> Result<Vec<u8>, PeerError> {
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
                    return Err(self.too_long(what, max));
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

    fn too_long(&self, what: &'static str, max: usize) -> PeerError {
        PeerError::Proc {
            pid: self.pid,
            what,
            source: std::io::Error::other(format!("longer than {max} bytes")),
        }
    }

    /// All of a small `/proc` file (`what`, open as `file`) in one `pread` at offset 0: the
    /// kernel makes the whole of `stat` or `auxv` there, so a read that leaves room in the buffer
    /// has all of it. Longer than [`SMALL_MAX`] is an error.
    fn read_small(
        &self,
        file: impl std::os::fd::AsFd,
        what: &'static str,
    ) -> Result<([u8; SMALL_MAX], usize), PeerError> {
        let mut buf = [0u8; SMALL_MAX];
        let n = rustix::io::pread(file, &mut buf[..], 0).map_err(self.err(what))?;
        if n == buf.len() {
            return Err(self.too_long(what, SMALL_MAX - 1));
        }
        Ok((buf, n))
    }

    /// The process's name, start time and program image (`stat`).
    pub(crate) fn stat(&self) -> Result<(String, Seen), PeerError> {
        let (buf, n) = self.read_small(&self.stat, "stat")?;
        let text = String::from_utf8_lossy(&buf[..n]);
        parse_stat(&text)
            .map(|(comm, seen)| (comm.to_string(), seen))
            .ok_or(PeerError::Stat(self.pid))
    }

    /// The program image's addresses, from the process's auxiliary vector (`auxv`).
    pub(crate) fn image_addresses(&self) -> Result<ImageAddresses, PeerError> {
        use rustix::fs::{Mode, OFlags};
        let file = rustix::fs::openat(
            &self.dir,
            "auxv",
            OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(self.err("auxv"))?;
        let (buf, n) = self.read_small(&file, "auxv")?;
        let word = |at: usize| u64::from_ne_bytes(buf[at..at + 8].try_into().unwrap_or_default());
        let pairs = (0..n / 16).map(|i| (word(16 * i), word(16 * i + 8)));
        band_shim::proto::image_addresses(pairs).ok_or(PeerError::Auxv(self.pid))
    }
}

/// The most bytes read of a `/proc/<pid>/maps` (band-shim, static, maps about ten files' worth
/// of lines; a process that maps more is not band-shim).
const MAPS_MAX: usize = 1 << 20;

/// Verify that `pid` is a genuine band-shim process of the run's uid, running its own code (its
/// name is [`shim::COMM`]). Returns its program image's addresses (from its auxiliary vector:
/// the request must name them, see [`handle`]), and the path it was executed
/// from in the sandbox (its `/proc/<pid>/exe`: band-shim is bound over each program of a runtime
/// tree and of the skill, so this names the one the kernel ran, however the script reached it: a
/// symlink, a relative path).
///
/// The name, start time and image are read from `stat` at the start and again at the end,
/// around the checks of the executable, the mappings and the auxiliary vector: an `exec`
/// between them would have moved the image (and reset the name, which only band-shim's code
/// sets to this one), so every look was at one process running one program image.
pub(crate) fn verify_peer(
    pid: i32,
    uid: u32,
    check: &PeerCheck,
) -> Result<(ImageAddresses, Option<PathBuf>), PeerError> {
    verify_peer_in(ProcRoot::host()?, pid, uid, check)
}

/// [`verify_peer`] with the `/proc` to look in as a parameter.
pub(crate) fn verify_peer_in(
    proc: &ProcRoot,
    pid: i32,
    uid: u32,
    check: &PeerCheck,
) -> Result<(ImageAddresses, Option<PathBuf>), PeerError> {
    if uid != check.uid {
        return Err(PeerError::Uid {
            uid,
            run: check.uid,
        });
    }
    let dir = ProcDir::open(proc, pid)?;
    let (comm, seen) = dir.stat()?;
    if seen.image == Image::default() {
        return Err(PeerError::Hidden(pid));
    }
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
    if check.maps {
        let maps = dir.read("maps", MAPS_MAX)?;
        check_mappings(&parse_maps(&String::from_utf8_lossy(&maps))?, check)
            .map_err(|source| PeerError::Mapping { pid, source })?;
    }
    let image = dir.image_addresses()?;
    let (comm, now) = dir.stat()?;
    if now != seen {
        return Err(PeerError::Replaced(pid));
    }
    if comm != shim::COMM {
        return Err(not_started(comm));
    }
    Ok((image, executed))
}

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
pub(crate) fn judge(
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
                |name: &str| super::bins::resolve_binary(name, rules.host_search()).is_some();
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
                            super::bins::resolve_binary(name, rules.host_search()).is_some()
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

/// Serve one connection: verify its peer ([`verify_peer`]), read its request, judge it, answer.
///
/// The request is taken only if every byte of it was written by the verified process
/// (`SCM_CREDENTIALS`) and it names that process's program image ([`ImageAddresses`]), which the
/// kernel randomized when it started band-shim there: whatever wrote it before band-shim started
/// could not know them, nor could a program the process ran after band-shim (its own are
/// others), and no other process can read them. So the request is band-shim's own, written on
/// the connection it made itself, which no other process holds, and the program's descriptor
/// goes back on that connection, after the decision and its record.
fn handle(
    conn: UnixStream,
    check: &PeerCheck,
    rules: &CliRules,
    programs: &RunPrograms,
    on_report: &OnReport,
) -> Result<(), PeerError> {
    let peer = verify_conn(&conn, check)?;
    answer(conn, peer, rules, programs, on_report)
}

/// A verified peer: its pid, its program image's addresses, and the path it was executed from.
struct Peer {
    pid: i32,
    image: ImageAddresses,
    executed: Option<PathBuf>,
}

/// The first half of [`handle`]: the verified peer, or (after writing `refused`) why not.
fn verify_conn(conn: &UnixStream, check: &PeerCheck) -> Result<Peer, PeerError> {
    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
    conn.set_write_timeout(Some(Duration::from_secs(5)))?;
    let cred = sys::peer_cred(conn).map_err(PeerError::PeerCred)?;
    match verify_peer(cred.pid, cred.uid, check) {
        Ok((image, executed)) => Ok(Peer {
            pid: cred.pid,
            image,
            executed,
        }),
        Err(e) => {
            let _ = (&*conn).write_all(b"refused\n");
            Err(e)
        }
    }
}

/// The second half of [`handle`]: read the verified peer's request, and answer it.
fn answer(
    conn: UnixStream,
    peer: Peer,
    rules: &CliRules,
    programs: &RunPrograms,
    on_report: &OnReport,
) -> Result<(), PeerError> {
    let line = read_line_from(&conn, peer.pid)?;
    let req: ShimRequest = serde_json::from_str(&line).map_err(PeerError::BadRequest)?;
    if req.image != peer.image {
        return Err(PeerError::AnotherImage(peer.pid));
    }
    if req.argv.is_empty() {
        return Err(PeerError::EmptyArgv);
    }
    // A tree's or the skill's program is judged as the file the kernel ran, not by the name of
    // the link or relative path it was called by.
    let argv = shim::executed_argv(&programs.table, &req.argv, peer.executed.as_deref())
        .unwrap_or(req.argv);
    let (verdict, program) = judge(rules, &programs.table, &argv, on_report);
    let mut out = serde_json::to_vec(&verdict).map_err(PeerError::Encode)?;
    out.push(b'\n');
    let Some(program) = program else {
        return Ok((&conn).write_all(&out)?);
    };
    // The program goes only on this connection, whose request the verified shim wrote, and only
    // now that the call is allowed and recorded.
    let fd = match programs.fd(&program) {
        Ok(fd) => fd,
        Err(e) => {
            let name = shim::command_name(argv.first().map(String::as_str).unwrap_or(""));
            let (denied, report) = not_handed_over(name, &program, &e);
            if let Some(r) = report {
                on_report(r);
            }
            let mut out = serde_json::to_vec(&denied).map_err(PeerError::Encode)?;
            out.push(b'\n');
            (&conn).write_all(&out)?;
            return Err(PeerError::NoDescriptor(program));
        }
    };
    let sent = sys::send_with_fd(&conn, &out, std::os::fd::AsFd::as_fd(&*fd))?;
    Ok((&conn).write_all(&out[sent..])?)
}

/// The answer to an allowed call of `name` whose program (`program` in the run's table) could not
/// be handed over, and what goes on the run's record. A refusal of the program cache (the
/// program is charged to the run's user and skill, and over their share) is said whole where the
/// user looks: on the command's stderr (band-shim prints the message), with the program, the
/// bound and the hint, and on the run's record ([`Report::CacheRefused`]); the command exits 126,
/// as for a program it may not run. Anything else is an internal failure, told as before. Pure.
pub(crate) fn not_handed_over(
    name: &str,
    program: &str,
    e: &AdmitError,
) -> (Verdict, Option<Report>) {
    match e {
        AdmitError::Refused { .. } => {
            let hint = e.hint().unwrap_or_default();
            (
                Verdict::Denied {
                    message: format!("band: {name}: {e}\nhint: {hint}"),
                    code: shim::EXIT_DENIED,
                },
                Some(Report::CacheRefused {
                    program: program.to_string(),
                    detail: format!("{e}; hint: {hint}"),
                }),
            )
        }
        AdmitError::Io(_) => (
            Verdict::Denied {
                message: format!("band: {program}: cannot hand the program over"),
                code: shim::EXIT_UNKNOWN,
            },
            None,
        ),
    }
}

/// The report workers: how many there are and how many wait in `accept`.
struct Pool {
    idle: AtomicUsize,
    workers: AtomicUsize,
}

/// The socket's workers, each accepting connections itself.
pub(crate) struct ReportListener {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    pool: Arc<Pool>,
    spawn: Arc<Spawner>,
}

/// Starts one more worker (kept until [`ReportListener::stop`]).
type Spawner = std::sync::Mutex<Option<Box<dyn Fn() + Send + Sync>>>;

impl ReportListener {
    /// Bind `path` (owned root:`gid`, mode 0660) and start accepting.
    pub(crate) fn start(
        path: &Path,
        gid: u32,
        check: PeerCheck,
        rules: CliRules,
        programs: RunPrograms,
        on_report: OnReport,
    ) -> std::io::Result<ReportListener> {
        let listener = Arc::new(UnixListener::bind(path)?);
        // Every connection's bytes carry their sender, from the first: a shim writes its request
        // as soon as it is connected, maybe before the `accept`.
        sys::set_passcred(std::os::fd::AsFd::as_fd(&*listener))?;
        std::os::unix::fs::lchown(path, Some(0), Some(gid))?;
        fs_err::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o660))?;
        let stop = Arc::new(AtomicBool::new(false));
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
                let (pool, stop, spawn, listener, check, rules, programs, on_report) = (
                    Arc::clone(&pool),
                    Arc::clone(&stop),
                    Arc::clone(&spawn),
                    Arc::clone(&listener),
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
                        // Not preempting band-shim at its `connect`: it writes its request
                        // before the worker looks (`sys::set_batch_scheduling`). Only a hint: a
                        // worker the kernel keeps as it was serves calls the same.
                        let _ = sys::set_batch_scheduling();
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
                            let r = handle(conn, &check, &rules, &programs, &on_report);
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
    pub(crate) fn stop(&mut self) {
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
            maps: true,
        }
    }

    /// A process's own auxiliary vector, as band-server reads it, gives what band-shim reads
    /// from its initial stack (here: what the C library kept of it).
    #[test]
    fn the_image_addresses_are_the_processes_own() {
        let me = ProcDir::open(ProcRoot::host().unwrap(), std::process::id() as i32).unwrap();
        let seen = me.image_addresses().unwrap();
        assert_eq!(Some(seen), band_shim::sys::image_addresses());
        assert_ne!(seen, ImageAddresses::default());
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

    /// Fields 3 to 28 of a stat line, the start time (22) and the image (26 to 28) as given.
    fn stat_line(pid: u32, comm: &str, start: u64, image: [u64; 3]) -> String {
        let [code, end, stack] = image;
        format!(
            "{pid} ({comm}) S 1 {pid} {pid} 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 {start} 1000 200 18446744073709551615 {code} {end} {stack} 0 0\n"
        )
    }

    #[test]
    fn the_name_start_time_and_image_come_from_one_stat_line() {
        let seen = |start, [c, e, s]: [u64; 3]| Seen {
            start,
            image: Image {
                start_code: c,
                end_code: e,
                start_stack: s,
            },
        };
        let line = stat_line(4242, "band/shim", 987654, [4096, 8192, 140000]);
        assert_eq!(
            parse_stat(&line),
            Some(("band/shim", seen(987654, [4096, 8192, 140000])))
        );
        // The name may hold spaces and parentheses: the fields count from the last `)`.
        let odd = stat_line(7, "a) b (c)", 55, [1, 2, 3]);
        assert_eq!(parse_stat(&odd), Some(("a) b (c)", seen(55, [1, 2, 3]))));
        // Cut short before the image: not a stat line.
        let short = "4242 (x) S 1 4242 4242 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 987654 1000";
        assert_eq!(parse_stat(short), None);
        assert_eq!(parse_stat("7 (x S 1"), None);
        assert_eq!(parse_stat(")x( 1 2"), None);
        assert_eq!(parse_stat("garbage"), None);
    }

    /// A process that `exec`s keeps its pid and start time, but not its image, even when it runs
    /// the same program again (the kernel randomizes where it maps it): neither its `stat` nor
    /// its auxiliary vector says the same.
    #[test]
    fn an_exec_is_another_image_even_of_the_same_program() {
        use std::io::BufRead;
        // `sh` waits for a line, then becomes `sh` again, which says so and waits.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "echo ready; read _; exec sh -c 'echo again; read _'"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        // Running: the kernel has placed the image.
        out.read_line(&mut line).unwrap();
        assert_eq!(line, "ready\n");
        let dir = ProcDir::open(ProcRoot::host().unwrap(), pid).unwrap();
        let (_, seen) = dir.stat().unwrap();
        assert_ne!(
            seen.image,
            Image::default(),
            "our own child's addresses are visible"
        );
        let before = dir.image_addresses().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"\n").unwrap();
        line.clear();
        out.read_line(&mut line).unwrap();
        assert_eq!(line, "again\n");
        let (_, now) = dir.stat().unwrap();
        assert_eq!(now.start, seen.start, "the same process");
        assert_ne!(now.image, seen.image);
        let after = dir.image_addresses().unwrap();
        assert_ne!(after.phdr, before.phdr);
        assert_ne!(after.random, before.random);
        assert_eq!(pid, child.id() as i32);
        drop(stdin);
        child.wait().unwrap();
    }

    #[test]
    fn randomization_is_the_sysctl_not_being_zero() {
        let tmp = tempfile::tempdir().unwrap();
        let sysctl = tmp.path().join("randomize_va_space");
        for (value, ok) in [("2\n", true), ("1\n", true), ("0\n", false)] {
            fs_err::write(&sysctl, value).unwrap();
            assert_eq!(randomization(&sysctl).is_ok(), ok, "{value:?}");
        }
        let off = randomization(&sysctl).unwrap_err().to_string();
        assert!(off.contains("randomize_va_space is 0"), "{off}");
        let missing = randomization(&tmp.path().join("none"))
            .unwrap_err()
            .to_string();
        assert!(missing.contains("none"), "names the file: {missing}");
    }

    /// Only a band-shim that names an interpreter (`ld.so`, which maps what it is told to) has
    /// its mappings checked; a file this cannot read as ELF is checked too.
    #[test]
    fn the_mappings_are_checked_for_a_dynamic_shim_only() {
        // An ELF-64 header with `count` program headers of 56 bytes at offset 64.
        let elf = |types: &[u32]| {
            let mut f = vec![0u8; 64 + 56 * types.len()];
            f[..6].copy_from_slice(b"\x7fELF\x02\x01");
            f[32..40].copy_from_slice(&64u64.to_le_bytes());
            f[54..56].copy_from_slice(&56u16.to_le_bytes());
            f[56..58].copy_from_slice(&(types.len() as u16).to_le_bytes());
            for (i, t) in types.iter().enumerate() {
                f[64 + 56 * i..68 + 56 * i].copy_from_slice(&t.to_le_bytes());
            }
            f
        };
        let (load, interp, dynamic) = (libc::PT_LOAD, libc::PT_INTERP, libc::PT_DYNAMIC);
        assert_eq!(elf_interpreter(&elf(&[6, interp, load, load])), Some(true));
        assert_eq!(
            elf_interpreter(&elf(&[6, load, load, dynamic])),
            Some(false)
        );
        assert_eq!(elf_interpreter(&elf(&[])), Some(false));
        let cut = elf(&[load, interp]);
        assert_eq!(
            elf_interpreter(&cut[..cut.len() - 60]),
            None,
            "table cut short"
        );
        assert_eq!(elf_interpreter(b"#!/bin/sh\n"), None);
        assert_eq!(elf_interpreter(b"\x7fELF\x01\x01"), None, "32-bit");
        // The files themselves: this test's own executable is dynamic (cargo's test harness);
        // anything else is checked.
        let tmp = tempfile::tempdir().unwrap();
        let check = |bytes: &[u8]| {
            let f = tmp.path().join("shim");
            fs_err::write(&f, bytes).unwrap();
            PeerCheck::for_shim(&f, 1000, &[]).unwrap().maps
        };
        assert!(!check(&elf(&[load, load])));
        assert!(check(&elf(&[interp, load])));
        assert!(check(b"not elf"));
        let me = std::env::current_exe().unwrap();
        assert!(PeerCheck::for_shim(&me, 1000, &[]).unwrap().maps);
    }

    /// A `/proc/<pid>` descriptor is one process's: once that process is gone (reaped), a read
    /// through it fails, whatever the pid names by then. The peer check's second read of `stat`
    /// therefore fails closed for a peer that ended during its checks.
    #[test]
    fn a_proc_directory_reads_its_own_process_and_nothing_after_it_ends() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let dir = ProcDir::open(ProcRoot::host().unwrap(), pid).unwrap();
        let (comm, seen) = dir.stat().unwrap();
        assert_eq!(comm, "sleep");
        assert_eq!(
            dir.stat().map(|(_, s)| s).ok(),
            Some(seen),
            "read again, the same"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        let gone = dir.stat().map_err(|e| e.to_string());
        assert!(
            matches!(&gone, Err(m) if m.starts_with(&format!("pid {pid}: stat: "))),
            "{gone:?}"
        );
        assert!(dir.read("maps", 1 << 20).is_err());
        // A file longer than the limit is an error, not its first bytes.
        let me = ProcDir::open(ProcRoot::host().unwrap(), std::process::id() as i32).unwrap();
        assert!(me.read("maps", 16).is_err());
        assert!(!me.read("maps", MAPS_MAX).unwrap().is_empty());
    }

    /// The peer check on a made-up `/proc/<pid>`: the executable by its file identity, the name,
    /// every mapping (of a dynamic shim), the uid, visible addresses; each wrong one refuses the
    /// peer.
    #[test]
    fn the_peer_check_refuses_each_wrong_part() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().unwrap();
        let shim = tmp.path().join("shim");
        let other = tmp.path().join("other");
        fs_err::write(&shim, b"").unwrap();
        fs_err::write(&other, b"").unwrap();
        let m = fs_err::metadata(&shim).unwrap();
        let mut check = PeerCheck {
            shim: (m.dev(), m.ino()),
            lib_devs: vec![],
            uid: 1000,
            maps: true,
        };
        let image = [0x5555_0000, 0x5556_0000, 0x7ffd_1000];
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
        let make = |exe: &Path, comm: &str, mapped: &Path, image: [u64; 3]| {
            let _ = fs_err::remove_dir_all(&proc);
            fs_err::create_dir_all(proc.join("77")).unwrap();
            fs_err::os::unix::fs::symlink(exe, proc.join("77/exe")).unwrap();
            fs_err::write(proc.join("77/stat"), stat_line(77, comm, 4242, image)).unwrap();
            fs_err::write(proc.join("77/maps"), maps(mapped)).unwrap();
            let auxv: Vec<u8> = [6u64, 4096, 3, 0x5555_0040, 25, 0x7ffd_1234, 0, 0]
                .iter()
                .flat_map(|w| w.to_ne_bytes())
                .collect();
            fs_err::write(proc.join("77/auxv"), auxv).unwrap();
        };
        let verdict = |uid: u32, check: &PeerCheck| {
            verify_peer_in(&ProcRoot::open(&proc).unwrap(), 77, uid, check)
        };
        let addresses = ImageAddresses {
            phdr: 0x5555_0040,
            random: 0x7ffd_1234,
        };
        make(&shim, COMM_NAME, &shim, image);
        assert_eq!(
            verdict(1000, &check).map_err(|e| e.to_string()),
            Ok((addresses, Some(shim.clone())))
        );
        assert!(matches!(verdict(1001, &check), Err(PeerError::Uid { .. })));
        make(&other, COMM_NAME, &shim, image);
        assert!(matches!(verdict(1000, &check), Err(PeerError::NotShim(77))));
        make(&shim, "jq", &shim, image);
        assert!(matches!(
            verdict(1000, &check),
            Err(PeerError::NotStarted { .. })
        ));
        make(&shim, COMM_NAME, &shim, [0, 0, 0]);
        assert!(matches!(verdict(1000, &check), Err(PeerError::Hidden(77))));
        make(&shim, COMM_NAME, &other, image);
        assert!(matches!(
            verdict(1000, &check),
            Err(PeerError::Mapping { .. })
        ));
        // A static shim's mappings are not read: the kernel mapped its file alone.
        check.maps = false;
        assert_eq!(
            verdict(1000, &check).map_err(|e| e.to_string()),
            Ok((addresses, Some(shim.clone())))
        );
        // No auxiliary vector to name the image by: refused.
        fs_err::write(proc.join("77/auxv"), [0u8; 16]).unwrap();
        assert!(matches!(verdict(1000, &check), Err(PeerError::Auxv(77))));
        assert!(matches!(
            verify_peer_in(&ProcRoot::open(&proc).unwrap(), 78, 1000, &check),
            Err(PeerError::Proc { pid: 78, .. })
        ));
    }

    const COMM_NAME: &str = shim::COMM;

    /// Requests from a process verified while it ran "band-shim" (here `python3`, whose file the
    /// check is given, and which names itself `band/shim`): taken when they name its program
    /// image; refused when written by the program it `exec`s next (on the connection it kept
    /// open, under the same pid and start time), and refused when they name another image.
    #[test]
    fn only_a_request_that_names_the_verified_image_is_taken() {
        use std::io::{BufRead, Read};
        use std::os::unix::fs::MetadataExt;
        let python = fs_err::canonicalize("/usr/bin/python3").expect("python3");
        let m = fs_err::metadata(&python).unwrap();
        let check = PeerCheck {
            shim: (m.dev(), m.ino()),
            lib_devs: vec![],
            uid: sys::euid(),
            maps: false,
        };
        // The request on descriptor argv[1], naming this image's addresses (its own auxv), or
        // (argv[2] = "guess") made-up ones; then the answer.
        let write = "import json, socket, struct, sys\n\
             words = open('/proc/self/auxv', 'rb').read()\n\
             aux = dict(struct.iter_unpack('QQ', words))\n\
             image = {'phdr': aux[3], 'random': aux[25]}\n\
             if sys.argv[2] == 'guess':\n    image = {'phdr': aux[3] + 4096, 'random': aux[25]}\n\
             s = socket.socket(fileno=int(sys.argv[1]))\n\
             s.sendall(json.dumps({'image': image, 'argv': ['jq', '.']}).encode() + b'\\n')\n\
             print(s.recv(4096).decode().strip())\n";
        // Named band/shim, then connected; told (a line on stdin) once it is verified, it writes
        // the request itself, or `exec`s python3 again, which does.
        let connect = "import ctypes, os, socket, sys\n\
             ctypes.CDLL(None).prctl(15, b'band/shim', 0, 0, 0)\n\
             s = socket.socket(socket.AF_UNIX)\n\
             s.connect(sys.argv[1])\n\
             s.set_inheritable(True)\n\
             print('connected', flush=True)\n\
             sys.stdin.readline()\n\
             argv = [sys.executable, '-c', sys.argv[3], str(s.fileno()), sys.argv[2]]\n\
             if sys.argv[2] == 'exec':\n    os.execv(sys.executable, argv)\n\
             sys.argv = argv[2:]\n\
             exec(argv[2], {})\n";
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("sock");
        let listener = UnixListener::bind(&path).unwrap();
        sys::set_passcred(std::os::fd::AsFd::as_fd(&listener)).unwrap();
        let rules = CliRules::new(&[], &[], &[]).unwrap_or_else(|e| panic!("{e}"));
        let programs = RunPrograms::default();
        let on: OnReport = Arc::new(|_| {});
        let serve = |how: &str| {
            let mut child = std::process::Command::new(&python)
                .args(["-c", connect])
                .arg(&path)
                .args([how, write])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
            assert_eq!(line, "connected\n");
            let (conn, _) = listener.accept().unwrap();
            let peer = verify_conn(&conn, &check).unwrap();
            assert_eq!(peer.pid, child.id() as i32);
            child.stdin.take().unwrap().write_all(b"go\n").unwrap();
            let served = answer(conn, peer, &rules, &programs, &on);
            let mut rest = String::new();
            out.read_to_string(&mut rest).unwrap();
            child.wait().unwrap();
            (served.map_err(|e| e.to_string()), rest)
        };
        let (served, out) = serve("same");
        assert_eq!(served, Ok(()));
        assert!(
            out.contains("not available in this sandbox"),
            "judged: {out:?}"
        );
        for how in ["exec", "guess"] {
            let (served, out) = serve(how);
            assert!(
                matches!(&served, Err(e) if e.contains("names another program image")),
                "{how}: {served:?}"
            );
            assert_eq!(out.trim(), "", "{how}: no answer");
        }
    }

    /// The workers serving band-shim are `SCHED_BATCH` (they do not preempt band-shim at its
    /// `connect`; `sys::set_batch_scheduling`), read from the kernel's view of each thread.
    #[test]
    fn the_workers_wait_for_the_shims_request_instead_of_preempting_it() {
        if sys::euid() != 0 {
            assert!(
                std::env::var_os("BAND_TEST_MUST_RUN").is_none_or(|v| v != "1"),
                "BAND_TEST_MUST_RUN=1 but this test needs root (the socket is owned by root)"
            );
            eprintln!("skipped: needs root (the socket is owned by root)");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let check = PeerCheck {
            shim: (0, 0),
            lib_devs: Vec::new(),
            uid: 0,
            maps: false,
        };
        let rules = CliRules::new(&[], &[], &[]).unwrap_or_else(|e| panic!("{e}"));
        let on: OnReport = Arc::new(|_| {});
        let mut listener = ReportListener::start(
            &tmp.path().join("sock"),
            0,
            check,
            rules,
            RunPrograms::default(),
            on,
        )
        .unwrap();
        // Policy of every thread named `report` (this test's two, and any other test's).
        let workers = || -> Vec<(String, i32)> {
            let mut out = Vec::new();
            for task in fs_err::read_dir("/proc/thread-self/..").unwrap().flatten() {
                let dir = task.path();
                // A thread that ended since the listing (another test's) is skipped.
                let (Ok(comm), Ok(stat)) = (
                    fs_err::read_to_string(dir.join("comm")),
                    fs_err::read_to_string(dir.join("stat")),
                ) else {
                    continue;
                };
                if comm.trim_end() != "report" {
                    continue;
                }
                // Field 41 (`policy`), counted after the `)` that ends `comm` (field 2).
                let after = &stat[stat.rfind(')').unwrap() + 2..];
                let policy = after.split(' ').nth(41 - 3).unwrap().parse().unwrap();
                out.push((dir.display().to_string(), policy));
            }
            out
        };
        let start = std::time::Instant::now();
        let seen = loop {
            let seen = workers();
            let waiting = listener.pool.idle.load(Ordering::SeqCst);
            let batch = seen.iter().all(|(_, p)| *p == libc::SCHED_BATCH);
            if (waiting >= 2 && batch) || start.elapsed() > std::time::Duration::from_secs(5) {
                break seen;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        listener.stop();
        assert!(seen.len() >= 2, "two workers: {seen:?}");
        for (task, policy) in &seen {
            assert_eq!(*policy, libc::SCHED_BATCH, "{task}");
        }
    }

    #[test]
    fn a_program_the_cache_refuses_is_told_to_the_command_and_the_record() {
        use crate::layers::cli::execcache::{Owner, Refusal};
        let e = AdmitError::Refused {
            program: "/home/u/venv/bin/tool".into(),
            bytes: 2 << 20,
            owner: Some(Owner {
                uid: 1000,
                skill: "s".into(),
            }),
            refusal: Refusal::Owner {
                held: 0,
                bound: 1 << 20,
            },
        };
        let (verdict, report) = not_handed_over("tool", "tree:/home/u/venv/bin/tool", &e);
        let Verdict::Denied { message, code } = verdict else {
            panic!("{verdict:?}")
        };
        assert_eq!(code, shim::EXIT_DENIED);
        let hint = e.hint().unwrap_or_default();
        assert_eq!(message, format!("band: tool: {e}\nhint: {hint}"));
        assert!(
            message.contains("/home/u/venv/bin/tool")
                && message.contains("per-owner bound of 1 MiB")
                && message.contains("[program_cache]"),
            "{message}"
        );
        assert_eq!(
            report,
            Some(Report::CacheRefused {
                program: "tree:/home/u/venv/bin/tool".into(),
                detail: format!("{e}; hint: {hint}"),
            })
        );
        // Anything else stays an internal failure, with nothing on the record.
        let (verdict, report) = not_handed_over(
            "tool",
            "tool",
            &AdmitError::Io(std::io::Error::other("gone")),
        );
        assert_eq!(
            verdict,
            Verdict::Denied {
                message: "band: tool: cannot hand the program over".into(),
                code: shim::EXIT_UNKNOWN,
            }
        );
        assert_eq!(report, None);
    }

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
