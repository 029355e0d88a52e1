//! The observing half of `band learn` (a request with `observe: true`): which workspace files the
//! run opened, read and wrote, and which workspace folders it listed, seen by the kernel.
//!
//! One fanotify mark (`FAN_MARK_FILESYSTEM`) on the run's own tmpfs (the run directory, which
//! holds the workspace copy) reports every open, read, write and close-after-write on it, by any
//! process, however the file was reached: static binaries and direct syscalls included, and no
//! code inside the sandbox (never LD_PRELOAD). The tmpfs belongs to this run alone, so every event
//! on it is the run's, except band-server's own (filtered by pid). The mark is set after the
//! sandbox is built and before the script can start (the jail waits for its secrets, written
//! after), and removed before the collection walks the workspace.
//!
//! With `FAN_ONDIR` the mark reports folders too. Reading a folder's entries (`getdents`, which
//! `readdir`, `ls`, a shell glob, `os.walk`, `fs.readdirSync` and `find` all make) reports
//! `FAN_ACCESS` on it: that folder was listed. Opening a folder without reading it (`mkdir -p`,
//! a descriptor for `openat`, `find`'s start) reports only `FAN_OPEN`, and is not a listing.
//!
//! Files outside the workspace, and commands, are seen by a second means ([`Supervisor`]): the
//! jail installs a seccomp filter that hands every `open`, `openat`, `openat2`, `creat`,
//! `execve` and `execveat` of the sandbox to band-server before it runs
//! (`SECCOMP_RET_USER_NOTIF`), and passes band-server the filter's listener. band-server reads
//! the path from the caller's memory, resolves it against the caller's working directory or
//! directory descriptor, notes whether it exists in the sandbox and on the host, and lets the
//! call go on unchanged (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`). Observation only: what the call
//! may reach is still the sandbox's mounts and the deny filter's business.

use std::collections::BTreeSet;
use std::collections::HashSet;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use band::proto::{Access, Observed, PathSeen};

use crate::sys::{self, FanEvent};

/// The events asked for: opened, read, written, closed after writing; of folders too
/// (`FAN_ONDIR`), where a read is a listing.
pub(crate) const MASK: u64 =
    libc::FAN_OPEN | libc::FAN_ACCESS | libc::FAN_MODIFY | libc::FAN_CLOSE_WRITE | libc::FAN_ONDIR;
const WRITE: u64 = libc::FAN_MODIFY | libc::FAN_CLOSE_WRITE;

/// Most distinct folders kept as listed; past it the record says it is incomplete. Like the files
/// read, each is a folder of the run's workspace (matched by device and inode), once.
pub(crate) const MAX_LISTED: usize = 16_384;

/// The workspace as the sandbox sees it.
pub(crate) const SANDBOX_WORKSPACE: &str = "/workspace";

/// The workspace-relative paths an event's file may have. The kernel names the file by the
/// sandbox's mount: `/workspace/data/in.csv` while the sandbox lives, `/data/in.csv` (relative to
/// the mount's root) once its mounts are gone; so both readings are candidates, and
/// [`fold`] keeps the one whose file in the run's workspace is the event's file. The workspace
/// root itself (`/workspace`, or `/`) is the empty path (only a folder's event can be it).
pub(crate) fn candidates(path: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut push = |rel: &Path| {
        if let Some(s) = rel.to_str() {
            let s = s.strip_suffix(" (deleted)").unwrap_or(s);
            if !out.iter().any(|o: &String| o == s) {
                out.push(s.to_string());
            }
        }
    };
    if let Ok(rel) = path.strip_prefix(SANDBOX_WORKSPACE) {
        push(rel);
    }
    if let Ok(rel) = path.strip_prefix("/") {
        push(rel);
    }
    out
}

/// Fold events into the files read and written (a file written is not also listed as read) and
/// the folders listed (a folder whose entries were read: `FAN_ACCESS` on it; the empty path for
/// the root), at most [`MAX_LISTED`]. `identify` gives the (device, inode) of a
/// workspace-relative path in the run's workspace (the empty path: the workspace itself).
pub(crate) fn fold(
    own_pid: i32,
    events: &[FanEvent],
    identify: &dyn Fn(&str) -> Option<(u64, u64)>,
    seen: &mut Seen,
) {
    for e in events {
        if e.pid == own_pid {
            continue;
        }
        // A folder opened and not read (`mkdir -p`, a descriptor for `openat`) is no listing.
        if e.dir && e.mask & libc::FAN_ACCESS == 0 {
            continue;
        }
        let (Some(path), Some(file)) = (e.path.as_deref(), e.file) else {
            continue;
        };
        let Some(rel) = candidates(path)
            .into_iter()
            .filter(|rel| e.dir || !rel.is_empty())
            .find(|rel| identify(rel) == Some(file))
        else {
            continue;
        };
        if e.dir {
            if seen.listed.contains(&rel) {
                continue;
            }
            if seen.listed.len() >= MAX_LISTED {
                seen.overflowed = true;
                continue;
            }
            seen.listed.insert(rel);
        } else if e.mask & WRITE != 0 {
            seen.writes.insert(rel);
        } else {
            seen.reads.insert(rel);
        }
    }
}

/// What the observer has seen so far.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) reads: BTreeSet<String>,
    pub(crate) writes: BTreeSet<String>,
    /// Folders listed, workspace-relative (the empty path for the root).
    pub(crate) listed: BTreeSet<String>,
    pub(crate) overflowed: bool,
}

impl Seen {
    pub(crate) fn into_observed(self) -> Observed {
        let reads = self
            .reads
            .into_iter()
            .filter(|r| !self.writes.contains(r))
            .collect();
        Observed {
            reads,
            writes: self.writes.into_iter().collect(),
            complete: !self.overflowed,
            outside: Vec::new(),
            // The root as `.`: first, as the empty path was.
            listed: self
                .listed
                .into_iter()
                .map(|l| if l.is_empty() { ".".into() } else { l })
                .collect(),
        }
    }
}

/// A running observer: a thread reading the fanotify queue, and one answering the observing
/// seccomp filter (when the jail was given its socket), until [`Observer::finish`].
pub(crate) struct Observer {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Seen>>,
    thread: Option<JoinHandle<()>>,
    supervisor: Option<Supervisor>,
}

impl Observer {
    /// Mark the filesystem of `run_dir` and start reading its events; with `sock` (band-server's
    /// end of [`crate::layers::process::bwrap::OBSERVE_FD`]), start the [`Supervisor`] too.
    pub(crate) fn start(run_dir: &Path, sock: Option<UnixStream>) -> std::io::Result<Observer> {
        let supervisor = sock.map(Supervisor::start).transpose()?;
        let fd = sys::fanotify_filesystem(run_dir, MASK)?;
        let workspace = run_dir.join("workspace");
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (s2, seen2) = (stop.clone(), seen.clone());
        let thread = std::thread::Builder::new()
            .name("observe".into())
            .spawn(move || read_loop(fd, &workspace, &s2, &seen2))?;
        Ok(Observer {
            stop,
            seen,
            thread: Some(thread),
            supervisor,
        })
    }

    /// Read what is queued, stop, and return what was seen. Paths outside the workspace under
    /// `bands_own` (the program cache's folders of the run's programs: a program that reads its
    /// own file by `/proc/self/exe`'s path reads there) are band's, not the skill's: left out.
    pub(crate) fn finish(mut self, bands_own: &[PathBuf]) -> Observed {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let seen = self.seen.lock().map(|s| s.clone()).unwrap_or_default();
        let mut observed = seen.into_observed();
        if let Some(sup) = self.supervisor.take() {
            let (outside, complete) = sup.finish();
            observed.outside = without_bands_own(outside, bands_own);
            observed.complete &= complete;
        }
        observed
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn read_loop(fd: OwnedFd, workspace: &Path, stop: &AtomicBool, seen: &Mutex<Seen>) {
    let own = sys::pid();
    let identify = |rel: &str| -> Option<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        let m = fs_err::symlink_metadata(workspace.join(rel)).ok()?;
        Some((m.dev(), m.ino()))
    };
    let mut errors = 0u32;
    loop {
        let stopping = stop.load(Ordering::SeqCst);
        // After the stop request, drain what is queued (no wait) and end.
        let ready = sys::poll_readable(fd.as_fd(), if stopping { 0 } else { 100 }).unwrap_or(false);
        if ready {
            match sys::fanotify_read(fd.as_fd()) {
                Ok(events) if !events.is_empty() => {
                    if let Ok(mut s) = seen.lock() {
                        if events.iter().any(|e| e.mask & libc::FAN_Q_OVERFLOW != 0) {
                            s.overflowed = true;
                        }
                        fold(own, &events, &identify, &mut s);
                    }
                    continue;
                }
                Ok(_) => {}
                // A read fails when the kernel cannot open one event's file for us; that event
                // is gone, the next ones are not. A descriptor that keeps failing ends the loop.
                Err(_) => {
                    errors += 1;
                    if let Ok(mut s) = seen.lock() {
                        s.overflowed = true;
                    }
                    if errors > 1000 {
                        break;
                    }
                    continue;
                }
            }
        }
        if stopping {
            break;
        }
    }
}

/// Most distinct (path, access) pairs kept; past it the record says it is incomplete.
pub(crate) const MAX_OUTSIDE: usize = 16_384;
/// Longest path read from a caller's memory (`PATH_MAX`).
const PATH_MAX: usize = 4096;
/// `AT_FDCWD` as the low 32 bits of a syscall argument.
const AT_FDCWD: i32 = libc::AT_FDCWD;

/// What one observed syscall asks for, from its number and arguments (pure).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Call {
    /// Address of the path in the caller's memory.
    pub(crate) path_addr: u64,
    /// The directory a relative path is resolved against (`AT_FDCWD`: the working directory).
    pub(crate) dirfd: i32,
    pub(crate) how: How,
}

/// How a call uses its path: known from its number, or from open flags (given, or in an
/// `openat2` `struct open_how` at an address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum How {
    Exec,
    /// A lookup (stat, access): kept only as a program folder's missing name.
    Lookup,
    Write,
    Flags(u64),
    OpenHowAt(u64),
}

/// The call a notification is, or `None` for a syscall the observing filter does not send.
pub(crate) fn call_of(nr: i64, args: &[u64; 6]) -> Option<Call> {
    let dirfd = args[0] as i32;
    let at = |how| Call {
        path_addr: args[1],
        dirfd,
        how,
    };
    let cwd = |how| Call {
        path_addr: args[0],
        dirfd: AT_FDCWD,
        how,
    };
    Some(match nr {
        libc::SYS_openat => at(How::Flags(args[2])),
        libc::SYS_openat2 => at(How::OpenHowAt(args[2])),
        libc::SYS_execveat => at(How::Exec),
        libc::SYS_execve => cwd(How::Exec),
        libc::SYS_newfstatat | libc::SYS_statx | libc::SYS_faccessat | libc::SYS_faccessat2 => {
            at(How::Lookup)
        }
        #[cfg(target_arch = "x86_64")]
        libc::SYS_stat | libc::SYS_lstat | libc::SYS_access => cwd(How::Lookup),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_open => cwd(How::Flags(args[1])),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_creat => cwd(How::Write),
        _ => return None,
    })
}

/// Read or write, from open flags: writing when opened for writing, created or truncated.
pub(crate) fn access_of_flags(flags: u64) -> Access {
    let f = flags as i32;
    if f & libc::O_ACCMODE != libc::O_RDONLY || f & (libc::O_CREAT | libc::O_TRUNC) != 0 {
        Access::Write
    } else {
        Access::Read
    }
}

/// `path` made absolute against `base` (the caller's working directory or directory
/// descriptor, as the sandbox names it), `.` and `..` folded lexically; `None` for an empty path
/// (`execveat` of a descriptor: no path is named).
pub(crate) fn absolute(path: &str, base: Option<&str>) -> Option<String> {
    if path.is_empty() {
        return None;
    }
    let joined = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{}/{path}", base?)
    };
    let mut out: Vec<&str> = Vec::new();
    for c in joined.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    Some(format!("/{}", out.join("/")))
}

/// The (path, access) pairs seen so far.
#[derive(Debug, Default)]
struct Outside {
    list: Vec<PathSeen>,
    keys: HashSet<(String, Access)>,
    complete: bool,
}

/// A running supervisor of the observing seccomp filter: receives the listener from the jail,
/// The folders of the program cache a run's programs are in (the folder of each
/// `SandboxPlan::self_links` path): what the run reads there is band's copy of a program, never
/// a path a band names.
pub(crate) fn program_cache_folders(self_links: &[(PathBuf, String)]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = self_links
        .iter()
        .filter_map(|(p, _)| p.parent().map(Path::to_path_buf))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// `seen` without the paths under any of `bands_own`.
fn without_bands_own(mut seen: Vec<PathSeen>, bands_own: &[PathBuf]) -> Vec<PathSeen> {
    seen.retain(|p| !bands_own.iter().any(|b| Path::new(&p.path).starts_with(b)));
    seen
}

/// then answers every notification (always `CONTINUE`) until [`Supervisor::finish`].
pub(crate) struct Supervisor {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Outside>>,
    thread: Option<JoinHandle<()>>,
}

impl Supervisor {
    pub(crate) fn start(sock: UnixStream) -> std::io::Result<Supervisor> {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Outside {
            complete: true,
            ..Outside::default()
        }));
        let (s2, seen2) = (stop.clone(), seen.clone());
        let thread = std::thread::Builder::new()
            .name("observe-seccomp".into())
            .spawn(move || supervise(&sock, &s2, &seen2))?;
        Ok(Supervisor {
            stop,
            seen,
            thread: Some(thread),
        })
    }

    /// Stop (every process of the run is gone by now) and return what was seen, and whether
    /// it is complete.
    pub(crate) fn finish(mut self) -> (Vec<PathSeen>, bool) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        match self.seen.lock() {
            Ok(mut s) => (std::mem::take(&mut s.list), s.complete),
            Err(_) => (Vec::new(), false),
        }
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn supervise(sock: &UnixStream, stop: &AtomicBool, seen: &Mutex<Outside>) {
    // The listener, once the jail has installed its filter (or never, if the jail failed first).
    let listener = loop {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        if sys::poll_readable(sock.as_fd(), 100).unwrap_or(false) {
            let mut buf = [0u8; 8];
            match sys::recv_with_fd(sock, &mut buf) {
                Ok((_, Some(fd))) => break fd,
                Ok((0, None)) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    loop {
        let stopping = stop.load(Ordering::SeqCst);
        let ready =
            sys::poll_readable(listener.as_fd(), if stopping { 0 } else { 100 }).unwrap_or(false);
        if ready {
            match sys::seccomp_notif_recv(listener.as_fd()) {
                Ok(n) => {
                    let p = inspect(&n);
                    // Asked only after the caller's memory was read: the pid was the caller's.
                    let valid = sys::seccomp_notif_id_valid(listener.as_fd(), n.id);
                    let _ = sys::seccomp_notif_continue(listener.as_fd(), n.id);
                    if let (true, Some(p)) = (valid, p)
                        && let Ok(mut s) = seen.lock()
                    {
                        record(&mut s, p);
                    }
                    continue;
                }
                // The caller died meanwhile (ENOENT), or no filter user is left (the listener
                // hangs up): nothing to answer.
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
            }
        }
        if stopping {
            break;
        }
    }
}

fn record(s: &mut Outside, p: PathSeen) {
    // The workspace is the fanotify mark's; the sandbox's own /proc and /dev need no rule.
    if p.path == SANDBOX_WORKSPACE
        || p.path.starts_with("/workspace/")
        || p.path.starts_with("/proc/")
        || p.path.starts_with("/dev/")
    {
        return;
    }
    let key = (p.path.clone(), p.access);
    if s.keys.contains(&key) {
        return;
    }
    if s.list.len() >= MAX_OUTSIDE {
        s.complete = false;
        return;
    }
    s.keys.insert(key);
    s.list.push(p);
}

/// Folders a shell looks commands up in (the sandbox's PATH and the usual host ones).
pub(crate) const PROGRAM_DIRS: &[&str] = &[
    "/band/bin",
    "/usr/local/bin",
    "/usr/bin",
    "/bin",
    "/usr/local/sbin",
    "/usr/sbin",
    "/sbin",
];

/// Whether `path` names a file directly in a program folder.
pub(crate) fn in_program_dir(path: &str) -> bool {
    Path::new(path)
        .parent()
        .and_then(|d| d.to_str())
        .is_some_and(|d| PROGRAM_DIRS.contains(&d))
}

/// Read a NUL-terminated string at `addr` in `mem` (the caller's `/proc/<pid>/mem`).
fn read_cstr(mem: &fs_err::File, addr: u64) -> Option<String> {
    let mut buf = vec![0u8; PATH_MAX];
    // A short read is fine: the string may end before an unmapped page.
    let n = mem.file().read_at(&mut buf, addr).ok()?;
    let end = buf[..n].iter().position(|b| *b == 0)?;
    String::from_utf8(buf[..end].to_vec()).ok()
}

/// Whether `path` exists under `root`, resolved as a process with that root would: absolute
/// symlinks and `..` stay inside it (`openat2` with `RESOLVE_IN_ROOT`; the sandbox's
/// `/band/bin` is a symlink to `/usr/bin`, which must not be read as the host's).
fn exists_in(root: &Path, path: &str) -> bool {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    let Ok(dir) = rustix::fs::open(root, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()) else {
        return false;
    };
    rustix::fs::openat2(
        &dir,
        path.trim_start_matches('/'),
        OFlags::PATH,
        Mode::empty(),
        ResolveFlags::IN_ROOT,
    )
    .is_ok()
}

/// Whether `path`, used with `access`, is there under `root`: for a write, its folder is enough
/// (the call creates the file).
fn present(root: &Path, path: &str, access: Access) -> bool {
    exists_in(root, path)
        || (access == Access::Write
            && Path::new(path)
                .parent()
                .and_then(|d| d.to_str())
                .is_some_and(|d| exists_in(root, d)))
}

/// What a notification's call names, read from the caller (`None` when it names no path or the
/// caller could not be read). Everything here happens while the caller waits in the call.
fn inspect(n: &sys::SeccompNotif) -> Option<PathSeen> {
    let call = call_of(i64::from(n.nr), &n.args)?;
    let proc_dir = PathBuf::from(format!("/proc/{}", n.pid));
    let mem = fs_err::File::open(proc_dir.join("mem")).ok()?;
    let raw = read_cstr(&mem, call.path_addr)?;
    let access = match call.how {
        How::Exec | How::Lookup => Access::Exec,
        How::Write => Access::Write,
        How::Flags(f) => access_of_flags(f),
        How::OpenHowAt(addr) => {
            let mut b = [0u8; 8];
            mem.file().read_exact_at(&mut b, addr).ok()?;
            access_of_flags(u64::from_ne_bytes(b))
        }
    };
    let base = if raw.starts_with('/') {
        None
    } else if call.dirfd == AT_FDCWD {
        fs_err::read_link(proc_dir.join("cwd")).ok()
    } else {
        fs_err::read_link(proc_dir.join(format!("fd/{}", call.dirfd))).ok()
    };
    let path = absolute(&raw, base.as_deref().and_then(|b| b.to_str()))?;
    let in_sandbox = present(&proc_dir.join("root"), &path, access);
    if call.how == How::Lookup && (in_sandbox || !in_program_dir(&path)) {
        return None;
    }
    let on_host = present(Path::new("/"), &path, access);
    Some(PathSeen {
        path,
        access,
        in_sandbox,
        on_host,
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use pretty_assertions::assert_eq;

    use super::*;

    /// node reads its own file by `/proc/self/exe`'s path, which names band's copy in the
    /// program cache: not a path the skill read (learn listed it among the reads outside).
    #[test]
    fn the_program_caches_copies_are_not_the_runs_reads() {
        let links = [
            (
                PathBuf::from("/run/band/exec/cache/ab12/node"),
                "node".to_string(),
            ),
            (
                PathBuf::from("/run/band/exec/cache/cd34/git"),
                "git".to_string(),
            ),
            (
                PathBuf::from("/run/band/exec/cache/ab12/node"),
                "nodejs".to_string(),
            ),
        ];
        let own = program_cache_folders(&links);
        assert_eq!(
            own,
            [
                PathBuf::from("/run/band/exec/cache/ab12"),
                PathBuf::from("/run/band/exec/cache/cd34")
            ]
        );
        let seen = |p: &str| PathSeen {
            path: p.into(),
            access: Access::Read,
            in_sandbox: true,
            on_host: true,
        };
        let kept = without_bands_own(
            vec![
                seen("/run/band/exec/cache/ab12/node"),
                seen("/run/band/exec/cache/ab12/lib/node_modules/npm/package.json"),
                seen("/srv/data/in.csv"),
                seen("/run/band/exec/cache/ab123/x"),
            ],
            &own,
        );
        let paths: Vec<&str> = kept.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(paths, ["/srv/data/in.csv", "/run/band/exec/cache/ab123/x"]);
    }

    fn ev(mask: u64, pid: i32, path: &str, ino: u64) -> FanEvent {
        FanEvent {
            mask,
            pid,
            path: Some(PathBuf::from(path)),
            file: Some((7, ino)),
            dir: false,
        }
    }

    /// An event of a folder (`FAN_ONDIR`).
    fn dir_ev(mask: u64, pid: i32, path: &str, ino: u64) -> FanEvent {
        FanEvent {
            dir: true,
            ..ev(mask, pid, path, ino)
        }
    }

    #[test]
    fn workspace_files_are_read_or_written_by_inode_and_the_rest_is_ignored() {
        // The run's workspace: these files, on device 7.
        let ws = [
            ("data/in.csv", 1),
            ("out/r.md", 2),
            ("out", 3),
            ("gone.tmp", 4),
        ];
        let identify = |rel: &str| ws.iter().find(|(p, _)| *p == rel).map(|(_, i)| (7, *i));
        let events = [
            ev(libc::FAN_OPEN, 10, "/workspace/data/in.csv", 1),
            ev(libc::FAN_ACCESS, 10, "/workspace/data/in.csv", 1),
            // Read after the sandbox's mounts were gone: relative to the mount's root.
            ev(libc::FAN_OPEN, 11, "/out/r.md", 2),
            ev(libc::FAN_CLOSE_WRITE, 11, "/out/r.md", 2),
            ev(libc::FAN_MODIFY, 11, "/workspace/gone.tmp (deleted)", 4),
            // Not the workspace: the io mount's output.json, /skill, /tmp, a same-named file.
            ev(libc::FAN_CLOSE_WRITE, 12, "/output.json", 9),
            ev(libc::FAN_OPEN, 12, "/skill/run.sh", 10),
            ev(libc::FAN_OPEN, 12, "/tmp/x", 11),
            ev(libc::FAN_OPEN, 12, "/data/in.csv", 12),
            // band-server's own.
            ev(libc::FAN_OPEN, 99, "/workspace/data/in.csv", 1),
            FanEvent {
                mask: libc::FAN_OPEN,
                pid: 12,
                path: None,
                file: None,
                dir: false,
            },
        ];
        let mut seen = Seen::default();
        fold(99, &events, &identify, &mut seen);
        assert_eq!(
            seen.clone().into_observed(),
            Observed {
                reads: vec!["data/in.csv".into()],
                writes: vec!["gone.tmp".into(), "out/r.md".into()],
                complete: true,
                outside: Vec::new(),
                listed: Vec::new(),
            }
        );
    }

    #[test]
    fn the_mask_reports_folders() {
        assert_ne!(MASK & libc::FAN_ONDIR, 0);
        assert_ne!(MASK & libc::FAN_ACCESS, 0);
    }

    #[test]
    fn a_folder_whose_entries_were_read_is_listed_and_an_open_alone_is_not() {
        // The run's workspace (inode 1 the workspace itself), on device 7.
        let ws = [
            ("", 1),
            ("src", 2),
            ("src/lib", 3),
            ("src/a.py", 4),
            ("out", 5),
            ("docs", 6),
        ];
        let identify = |rel: &str| ws.iter().find(|(p, _)| *p == rel).map(|(_, i)| (7, *i));
        let events = [
            // `os.walk("src")`: each folder opened and read (the kernel merges the two events).
            dir_ev(libc::FAN_OPEN | libc::FAN_ACCESS, 10, "/workspace/src", 2),
            dir_ev(libc::FAN_OPEN, 10, "/workspace/src/lib", 3),
            dir_ev(libc::FAN_ACCESS, 10, "/workspace/src/lib", 3),
            ev(
                libc::FAN_OPEN | libc::FAN_ACCESS,
                10,
                "/workspace/src/a.py",
                4,
            ),
            // `ls` in the workspace: the root, after the mounts were gone (named `/`).
            dir_ev(libc::FAN_OPEN | libc::FAN_ACCESS, 11, "/", 1),
            // `mkdir -p out/x`: `out` opened, never read.
            dir_ev(libc::FAN_OPEN, 12, "/workspace/out", 5),
            // A file opened where a folder of the same name is: not a listing.
            ev(libc::FAN_OPEN, 12, "/workspace/docs", 6),
            // Not the workspace's folders: the sandbox's /tmp, a same-named folder elsewhere.
            dir_ev(libc::FAN_ACCESS, 12, "/tmp", 20),
            dir_ev(libc::FAN_ACCESS, 12, "/src", 21),
            // band-server's own walk.
            dir_ev(libc::FAN_ACCESS, 99, "/workspace/docs", 6),
        ];
        let mut seen = Seen::default();
        fold(99, &events, &identify, &mut seen);
        let o = seen.into_observed();
        assert_eq!(o.listed, [".", "src", "src/lib"]);
        assert_eq!(o.reads, ["docs", "src/a.py"]);
        assert!(o.writes.is_empty());
        assert!(o.complete);
    }

    /// The kernel's half, on a real filesystem: `ls` reads a folder's entries (`FAN_ACCESS` on
    /// it), `mkdir -p` only opens the folders it goes through, `cat` reads a file. Outside a
    /// sandbox the kernel names files by their host path, which `identify` reads here.
    #[test]
    fn privileged_the_kernel_reports_a_listing_as_a_read_of_the_folder() {
        band_test::privileged!((!rustix::process::geteuid().is_root()).then(|| "not root".into()));
        // A tmpfs, as the run's own filesystem is, where there is one.
        let base = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let t = tempfile::tempdir_in(&base).unwrap();
        let ws = t.path();
        fs_err::create_dir_all(ws.join("src/b")).unwrap();
        fs_err::create_dir_all(ws.join("out")).unwrap();
        fs_err::write(ws.join("src/a.txt"), "a").unwrap();
        let fd = sys::fanotify_filesystem(ws, MASK).unwrap();
        let status = std::process::Command::new("sh")
            .args([
                "-c",
                "ls src > /dev/null; mkdir -p out/x/y; cat src/a.txt > /dev/null",
            ])
            .current_dir(ws)
            .status()
            .unwrap();
        assert!(status.success());
        let mut events = Vec::new();
        while sys::poll_readable(fd.as_fd(), 200).unwrap() {
            events.extend(sys::fanotify_read(fd.as_fd()).unwrap());
        }
        let identify = |rel: &str| -> Option<(u64, u64)> {
            use std::os::unix::fs::MetadataExt;
            let p = Path::new("/").join(rel);
            let m = fs_err::symlink_metadata(&p).ok()?;
            p.starts_with(ws).then(|| (m.dev(), m.ino()))
        };
        let mut seen = Seen::default();
        fold(sys::pid(), &events, &identify, &mut seen);
        let rel = ws.strip_prefix("/").unwrap().to_str().unwrap();
        assert_eq!(
            seen.listed.iter().collect::<Vec<_>>(),
            [&format!("{rel}/src")],
            "{events:?}"
        );
        assert_eq!(
            seen.reads.iter().collect::<Vec<_>>(),
            [&format!("{rel}/src/a.txt")],
            "{events:?}"
        );
    }

    #[test]
    fn a_file_opened_or_read_is_never_a_listing() {
        let identify = |rel: &str| (rel == "src/a.py").then_some((7, 4));
        let events = [
            ev(libc::FAN_OPEN, 10, "/workspace/src/a.py", 4),
            ev(libc::FAN_ACCESS, 10, "/workspace/src/a.py", 4),
        ];
        let mut seen = Seen::default();
        fold(99, &events, &identify, &mut seen);
        let o = seen.into_observed();
        assert!(o.listed.is_empty(), "{o:?}");
        assert_eq!(o.reads, ["src/a.py"]);
    }

    #[test]
    fn listed_folders_are_kept_up_to_a_bound_and_past_it_the_record_is_incomplete() {
        let identify = |rel: &str| {
            rel.strip_prefix("d")
                .and_then(|n| n.parse().ok())
                .map(|n| (7, n))
        };
        let events: Vec<FanEvent> = (0..=MAX_LISTED as u64)
            .map(|n| dir_ev(libc::FAN_ACCESS, 10, &format!("/workspace/d{n}"), n))
            .collect();
        let mut seen = Seen::default();
        fold(99, &events, &identify, &mut seen);
        // The same folder again changes nothing.
        fold(99, &events[..1], &identify, &mut seen);
        let o = seen.into_observed();
        assert_eq!(o.listed.len(), MAX_LISTED);
        assert!(!o.complete);
    }

    #[test]
    fn band_learn_knows_the_essentials_and_forbidden_commands_as_band_server_does() {
        assert_eq!(
            band::learn::observe::ESSENTIALS,
            crate::layers::cli::shim::ESSENTIALS
        );
        assert_eq!(
            band::learn::observe::FORBIDDEN,
            crate::request::FORBIDDEN_COMMANDS
        );
    }

    #[test]
    fn a_call_names_its_path_directory_and_use() {
        let a = [10, 20, 30, 40, 50, 60];
        let at = |how| {
            Some(Call {
                path_addr: 20,
                dirfd: 10,
                how,
            })
        };
        assert_eq!(call_of(libc::SYS_openat, &a), at(How::Flags(30)));
        assert_eq!(call_of(libc::SYS_openat2, &a), at(How::OpenHowAt(30)));
        assert_eq!(call_of(libc::SYS_execveat, &a), at(How::Exec));
        let cwd = |how| {
            Some(Call {
                path_addr: 10,
                dirfd: libc::AT_FDCWD,
                how,
            })
        };
        assert_eq!(call_of(libc::SYS_execve, &a), cwd(How::Exec));
        #[cfg(target_arch = "x86_64")]
        {
            assert_eq!(call_of(libc::SYS_open, &a), cwd(How::Flags(20)));
            assert_eq!(call_of(libc::SYS_creat, &a), cwd(How::Write));
        }
        assert_eq!(call_of(libc::SYS_newfstatat, &a), at(How::Lookup));
        assert_eq!(call_of(libc::SYS_read, &a), None);
        // AT_FDCWD arrives as a 64-bit argument; its low 32 bits are the int.
        let neg = [libc::AT_FDCWD as u32 as u64, 1, 0, 0, 0, 0];
        assert_eq!(
            call_of(libc::SYS_openat, &neg).map(|c| c.dirfd),
            Some(libc::AT_FDCWD)
        );
    }

    #[test]
    fn lookups_count_only_in_program_folders() {
        assert!(in_program_dir("/band/bin/uname"));
        assert!(in_program_dir("/usr/bin/uname"));
        assert!(!in_program_dir("/usr/bin/x/uname"));
        assert!(!in_program_dir("/usr/lib/python3.11/os.py"));
    }

    #[test]
    fn open_flags_say_read_or_write() {
        assert_eq!(access_of_flags(libc::O_RDONLY as u64), Access::Read);
        assert_eq!(
            access_of_flags((libc::O_RDONLY | libc::O_CLOEXEC) as u64),
            Access::Read
        );
        assert_eq!(access_of_flags(libc::O_WRONLY as u64), Access::Write);
        assert_eq!(access_of_flags(libc::O_RDWR as u64), Access::Write);
        assert_eq!(access_of_flags(libc::O_CREAT as u64), Access::Write);
        assert_eq!(access_of_flags(libc::O_TRUNC as u64), Access::Write);
    }

    #[test]
    fn paths_are_made_absolute_against_the_callers_directory() {
        assert_eq!(absolute("/etc/x", None), Some("/etc/x".into()));
        assert_eq!(
            absolute("a/../b/./c", Some("/srv/d")),
            Some("/srv/d/b/c".into())
        );
        assert_eq!(absolute("../../../x", Some("/a")), Some("/x".into()));
        assert_eq!(absolute("x", None), None);
        assert_eq!(absolute("", Some("/a")), None);
    }
}
