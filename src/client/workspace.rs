//! The workspace side of a run: the files a band admits, read from the user's folder into the
//! request, and the files the run wrote, copied back into it.
//!
//! Both directions go through directory file descriptors, never through a path resolved again
//! from the root: the workspace is opened once ([`WorkspaceRoot::open`]), and every component
//! below it is opened relative to its parent's descriptor with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)` (or `openat(O_NOFOLLOW)` where the kernel has no
//! `openat2`). A process that swaps a directory of the workspace for a symlink while band reads
//! or writes makes band refuse or skip that entry; band never follows the link. Files are read
//! from the opened descriptor after `fstat` says it is a regular file of the expected size, and
//! written under a fresh temporary name (`O_CREAT | O_EXCL | O_NOFOLLOW`) then renamed into place
//! within the same directory descriptor.
//!
//! Before any of that, [`check_root`] refuses a workspace that is, holds or lies in a system
//! tree (`/`, `/etc`, `/usr`, …) and, under sudo, one the invoking user does not own, unless the
//! caller asked for it deliberately (`--allow-system-workspace`).

use std::ffi::{CStr, OsStr};
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::{ClientError, Result};
use crate::policy::CompiledPolicy;
use crate::policy::fs::FsPattern;
use crate::proto::{Denial, FileEntry};

/// A user error (the message, and a hint on how to fix it).
fn user_error(message: impl Into<String>, hint: impl Into<String>) -> ClientError {
    ClientError::user(message, hint)
}

/// The most workspace data sent to a run.
pub const MAX_WORKSPACE_BYTES: u64 = 256 << 20;

/// The flag that lets a run use a system tree, or another user's folder under sudo, as its
/// workspace.
pub const ALLOW_SYSTEM_FLAG: &str = "--allow-system-workspace";

/// The workspace folder, opened once: every later read and write goes through this descriptor.
#[derive(Debug, Clone)]
pub struct WorkspaceRoot {
    /// The folder as opened (its canonical path, for messages).
    pub path: PathBuf,
    fd: Arc<OwnedFd>,
}

/// Convert an errno into an I/O error that names the path and what band was doing.
fn io_error(what: &str, path: &Path, e: impl Into<std::io::Error>) -> ClientError {
    let e: std::io::Error = e.into();
    ClientError::Fs(std::io::Error::new(
        e.kind(),
        format!("failed to {what} {}: {e}", path.display()),
    ))
}

impl WorkspaceRoot {
    /// Open `dir` (symlinks in the path the user gave are followed, once, here), and check it
    /// with [`check_root`]. `given` says whether the user named it (`--workspace`) or it is the
    /// current directory.
    pub fn open(dir: &Path, given: bool, allow_system: bool) -> Result<WorkspaceRoot> {
        let fd = match rustix::fs::open(
            dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::NOTDIR | Errno::NOENT) => {
                return Err(user_error(
                    format!("workspace {} is not a folder", dir.display()),
                    "pass --workspace DIR",
                ));
            }
            Err(e) => return Err(io_error("open the workspace", dir, e)),
        };
        let Some(path) = opened_path(&fd, dir) else {
            return Err(user_error(
                format!("cannot tell where workspace {} is", dir.display()),
                "pass --workspace with an absolute path",
            ));
        };
        let st = rustix::fs::fstat(&fd).map_err(|e| io_error("stat the workspace", &path, e))?;
        let facts = RootFacts {
            euid: rustix::process::geteuid().as_raw(),
            sudo_uid: std::env::var("SUDO_UID")
                .ok()
                .and_then(|v| v.trim().parse().ok()),
            owner: st.st_uid,
        };
        if !allow_system && let Some(why) = check_root(&path, &facts) {
            let whose = if given {
                format!("workspace {}", path.display())
            } else {
                format!(
                    "workspace {} (the current directory; no --workspace was given)",
                    path.display()
                )
            };
            return Err(user_error(
                format!("refusing to use {whose}: {why}"),
                format!(
                    "run band from a project folder or pass --workspace DIR; to use this folder \
                     deliberately, add {ALLOW_SYSTEM_FLAG}"
                ),
            ));
        }
        Ok(WorkspaceRoot {
            path,
            fd: Arc::new(fd),
        })
    }
}

/// The canonical path of an opened directory: `/proc/self/fd/N` on Linux, else (or without
/// /proc) `dir` canonicalized. `None` when neither works: the caller refuses the folder rather than
/// check a path it cannot name.
fn opened_path(fd: &OwnedFd, dir: &Path) -> Option<PathBuf> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        if let Ok(p) = fs_err::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            && p.is_absolute()
        {
            return Some(p);
        }
    }
    let _ = fd;
    fs_err::canonicalize(dir).ok()
}

/// What [`check_root`] needs to know besides the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RootFacts {
    /// band's effective uid.
    pub euid: u32,
    /// `$SUDO_UID`, when band was started through sudo.
    pub sudo_uid: Option<u32>,
    /// The owner of the workspace folder.
    pub owner: u32,
}

/// System trees no workspace may be, lie in, or contain. (`/` contains all of them.)
pub const SYSTEM_TREES: &[&str] = &[
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/sys",
    "/usr",
    "/var/cache",
    "/var/lib",
    "/var/log",
    "/var/mail",
    "/var/spool",
    // macOS (/etc and /var are links into /private there).
    "/System",
    "/Library",
    "/private/etc",
    "/private/var",
];

/// Folders that hold every user's home: refused themselves (not the homes inside).
pub const HOME_PARENTS: &[&str] = &["/home", "/Users"];

/// Why `canonical` must not be a workspace, if it must not. Pure: the path is canonical (no `..`,
/// no symlinks) and `facts` say who runs band and who owns the folder.
pub fn check_root(canonical: &Path, facts: &RootFacts) -> Option<String> {
    if canonical == Path::new("/") {
        return Some("it is the root of the file system".into());
    }
    for tree in SYSTEM_TREES.iter().map(Path::new) {
        if canonical == tree {
            return Some(format!("{} is a system folder", tree.display()));
        }
        if canonical.starts_with(tree) {
            return Some(format!("it lies in the system folder {}", tree.display()));
        }
        if tree.starts_with(canonical) {
            return Some(format!("it holds the system folder {}", tree.display()));
        }
    }
    if HOME_PARENTS.iter().any(|h| canonical == Path::new(h)) {
        return Some("it holds every user's home folder".into());
    }
    if facts.euid == 0
        && let Some(uid) = facts.sudo_uid
        && uid != facts.owner
    {
        return Some(format!(
            "band runs as root through sudo (SUDO_UID={uid}) and the folder belongs to uid {}, \
             not to you",
            facts.owner
        ));
    }
    None
}

/// Open one component `name` beneath `dir`, never following a symlink (nor a magic link, nor
/// `..`). `openat2` where the kernel has it; `openat(O_NOFOLLOW)` otherwise (the name is a single
/// component, checked here, so that is the same).
fn open_beneath(
    dir: impl AsFd,
    name: &CStr,
    flags: OFlags,
    mode: Mode,
) -> rustix::io::Result<OwnedFd> {
    let bytes = name.to_bytes();
    if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') {
        return Err(Errno::INVAL);
    }
    let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY;
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::ResolveFlags;
        match rustix::fs::openat2(
            dir.as_fd(),
            name,
            flags,
            mode,
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        ) {
            // No openat2 (old kernel, or a seccomp filter that hides it): fall back below.
            Err(Errno::NOSYS | Errno::PERM) => {}
            other => return other,
        }
    }
    rustix::fs::openat(dir.as_fd(), name, flags, mode)
}

/// Open the directory `name` beneath `dir`; a symlink there is refused (`ELOOP`/`ENOTDIR`).
fn open_dir_beneath(dir: impl AsFd, name: &CStr) -> rustix::io::Result<OwnedFd> {
    open_beneath(dir, name, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
}

/// Is this errno what opening a symlink (or a non-directory) with `O_NOFOLLOW` gives?
fn is_link_refusal(e: Errno) -> bool {
    matches!(e, Errno::LOOP | Errno::NOTDIR | Errno::XDEV | Errno::MLINK)
}

/// A C string of one path component.
fn cname(name: &OsStr) -> Option<std::ffi::CString> {
    std::ffi::CString::new(name.as_bytes()).ok()
}

/// One entry of a walk: its workspace-relative path, and the descriptor of the regular file,
/// opened without following links, with its `fstat`.
struct Found {
    rel: String,
    file: std::fs::File,
    stat: rustix::fs::Stat,
}

/// Where a walk of the workspace goes, and what it takes.
struct Scope<'a> {
    /// Workspace-relative paths the walk starts from (`""` is the root), in name order, none
    /// beneath another: nothing outside them is listed, opened or stat'ed.
    starts: Vec<String>,
    /// Whether a path (a file, or a folder with everything below it) is admitted: its file is
    /// read; an unreadable entry that is not admitted is taken as absent, not as an error.
    admit: &'a dyn Fn(&str) -> bool,
    /// Whether nothing below a folder can be admitted (a deny covers it): it is not entered.
    prune: &'a dyn Fn(&str) -> bool,
    /// Told of each folder below a start the walk enters (its workspace-relative path), before
    /// its entries.
    entered: Option<&'a Entered<'a>>,
    /// Whether a folder skipped by name ([`skipped_dir`]) at this path is walked anyway: the
    /// band names it (see [`names_skipped`]).
    opens: &'a dyn Fn(&str) -> bool,
    /// Told of each symlink the scope admits, which the walk never copies.
    links: Option<&'a dyn Fn(&str)>,
}

/// What a walk tells of a folder it enters ([`Scope::entered`]).
type Entered<'a> = dyn Fn(&str) -> Result<()> + 'a;

/// The folders a walk must start from, given each admitting pattern's literal prefix: `None` for
/// a pattern matched at any depth (`*.pem`), which needs the whole tree; `Some("data")` for
/// `data/*.csv` (only `data` can hold a match); `Some("")` for `**/x`. Pure. No pattern: no
/// start, so a band that admits nothing never reads the workspace. A prefix beneath another is
/// dropped; the rest are in name order (component by component, the order of a depth-first walk).
pub(crate) fn walk_starts<'p>(prefixes: impl IntoIterator<Item = Option<&'p str>>) -> Vec<String> {
    let mut all: Vec<Vec<&str>> = Vec::new();
    for p in prefixes {
        let Some(p) = p else {
            return vec![String::new()];
        };
        all.push(p.split('/').filter(|c| !c.is_empty()).collect());
    }
    all.sort();
    all.dedup();
    let mut starts: Vec<Vec<&str>> = Vec::new();
    for p in all {
        // Sorted component-wise, an ancestor comes right before its descendants.
        if starts.last().is_some_and(|s| p.starts_with(s)) {
            continue;
        }
        starts.push(p);
    }
    starts.into_iter().map(|c| c.join("/")).collect()
}

#[cfg(test)]
thread_local! {
    /// Every folder the walks of this thread listed (a test hook: proves what is not walked).
    static LISTED: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A folder not walked by design: `.git` and `target` (never workspace data), at any depth,
/// unless the band names it ([`names_skipped`]).
pub(crate) fn skipped_dir(name: &str) -> bool {
    name == ".git" || name == "target"
}

/// Whether the folder `rel` (one [`skipped_dir`] names) is walked: an anchored pattern's literal
/// prefix is `rel` or lies below it (`.git/**`, `.git/HEAD`, `sub/target/*.log`). A pattern
/// matched at any depth or through a wildcard (`**`, `**/.git/**`, `*/target/**`) does not
/// name it. `.git` is named by `allow.read` only (it is never written back); `target` by
/// `allow.read` or `allow.write`.
pub fn names_skipped(rel: &str, read: &[FsPattern], write: &[FsPattern]) -> bool {
    let git = rel.rsplit('/').next() == Some(".git");
    let names = |p: &FsPattern| {
        !p.is_absolute()
            && p.is_anchored()
            && (p.static_prefix() == rel
                || p.static_prefix()
                    .strip_prefix(rel)
                    .is_some_and(|rest| rest.starts_with('/')))
    };
    read.iter().any(names) || (!git && write.iter().any(names))
}

/// Every regular file the scope admits, each opened through its parent's descriptor: for each
/// start, the path down to it is opened one component at a time (a missing or unreadable
/// component that is not admitted means nothing there), then walked by [`walk_fd`].
fn walk_scope(
    root: &WorkspaceRoot,
    scope: &Scope<'_>,
    found: &mut dyn FnMut(Found) -> Result<()>,
) -> Result<()> {
    'starts: for start in &scope.starts {
        if start.is_empty() {
            walk_fd(root, &root.fd, "", scope, found)?;
            continue;
        }
        let comps: Vec<&str> = start.split('/').collect();
        let mut dir: Arc<OwnedFd> = Arc::clone(&root.fd);
        for (i, c) in comps.iter().enumerate() {
            let rel = comps[..=i].join("/");
            let last = i + 1 == comps.len();
            if (skipped_dir(c) && !(scope.opens)(&rel)) || (scope.prune)(&rel) {
                continue 'starts;
            }
            let Some(name) = cname(OsStr::new(c)) else {
                continue 'starts;
            };
            let st = match rustix::fs::statat(&*dir, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                Err(Errno::NOENT | Errno::NOTDIR) => continue 'starts,
                Err(_) if !(scope.admit)(&rel) => continue 'starts,
                Err(e) => return Err(io_error("stat", &root.path.join(&rel), e)),
            };
            match FileType::from_raw_mode(st.st_mode) {
                FileType::Directory => {
                    let sub = match open_dir_beneath(&*dir, &name) {
                        Ok(fd) => fd,
                        Err(e) if is_link_refusal(e) || e == Errno::NOENT => continue 'starts,
                        Err(_) if !(scope.admit)(&rel) => continue 'starts,
                        Err(e) => return Err(io_error("open", &root.path.join(&rel), e)),
                    };
                    if last {
                        walk_fd(root, &sub, &rel, scope, found)?;
                    }
                    dir = Arc::new(sub);
                }
                FileType::RegularFile if last => {
                    open_file(root, &dir, &name, rel, scope, found)?;
                }
                _ => continue 'starts,
            }
        }
    }
    Ok(())
}

/// Open the regular file `name` in `dir` (if `scope` admits `rel`) and hand it to `found`.
fn open_file(
    root: &WorkspaceRoot,
    dir: &OwnedFd,
    name: &CStr,
    rel: String,
    scope: &Scope<'_>,
    found: &mut dyn FnMut(Found) -> Result<()>,
) -> Result<()> {
    if !(scope.admit)(&rel) {
        return Ok(());
    }
    let fd = match open_beneath(dir, name, OFlags::RDONLY | OFlags::NONBLOCK, Mode::empty()) {
        Ok(fd) => fd,
        Err(e) if is_link_refusal(e) || e == Errno::NOENT => return Ok(()),
        Err(e) => return Err(io_error("open", &root.path.join(&rel), e)),
    };
    let stat = rustix::fs::fstat(&fd).map_err(|e| io_error("stat", &root.path.join(&rel), e))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Ok(());
    }
    found(Found {
        rel,
        file: std::fs::File::from(fd),
        stat,
    })
}

/// Every regular file under `dir` (the workspace's `prefix`), depth first in name order (`.git`
/// and `target` skipped, and folders the scope prunes), each opened through its parent's
/// descriptor. Symlinks, devices, FIFOs and sockets are skipped; so is an entry that changed type
/// between the listing and the open. The type in the listing saves a `stat` where the file system
/// gives it. An entry that cannot be read is an error only when the scope admits it.
fn walk_fd(
    root: &WorkspaceRoot,
    dir: &OwnedFd,
    prefix: &str,
    scope: &Scope<'_>,
    found: &mut dyn FnMut(Found) -> Result<()>,
) -> Result<()> {
    #[cfg(test)]
    LISTED.with(|l| l.borrow_mut().push(prefix.to_string()));
    let shown = root.path.join(prefix);
    let unreadable = |e: Errno| -> Result<()> {
        if prefix.is_empty() || (scope.admit)(prefix) {
            Err(io_error("read the folder", &shown, e))
        } else {
            Ok(())
        }
    };
    let names = match crate::skillfs::dir_entries(dir) {
        Ok(names) => names,
        Err(e) => return unreadable(e),
    };
    for (name, listed) in names {
        // Names that are not UTF-8 cannot be matched by a band's patterns: skip them.
        let Ok(text) = name.to_str() else { continue };
        let rel = if prefix.is_empty() {
            text.to_string()
        } else {
            format!("{prefix}/{text}")
        };
        let kind = match listed {
            FileType::Unknown => {
                match rustix::fs::statat(dir, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) => FileType::from_raw_mode(st.st_mode),
                    Err(Errno::NOENT) => continue, // gone meanwhile
                    Err(_) if !(scope.admit)(&rel) => continue,
                    Err(e) => return Err(io_error("stat", &root.path.join(&rel), e)),
                }
            }
            known => known,
        };
        match kind {
            FileType::Directory => {
                if (skipped_dir(text) && !(scope.opens)(&rel)) || (scope.prune)(&rel) {
                    continue;
                }
                let sub = match open_dir_beneath(dir, &name) {
                    Ok(fd) => fd,
                    // Swapped for a link or a file since the listing, or gone: skip it.
                    Err(e) if is_link_refusal(e) || e == Errno::NOENT => continue,
                    // Unreadable, and nothing in it is admitted: as if absent.
                    Err(_) if !(scope.admit)(&rel) => continue,
                    Err(e) => return Err(io_error("open", &root.path.join(&rel), e)),
                };
                if let Some(entered) = scope.entered {
                    entered(&rel)?;
                }
                walk_fd(root, &sub, &rel, scope, found)?;
            }
            FileType::RegularFile => open_file(root, dir, &name, rel, scope, found)?,
            // Symlinks are never followed out of the workspace (the caller may say which were
            // left out); devices, FIFOs and sockets are not workspace data.
            FileType::Symlink => {
                if let Some(links) = scope.links
                    && (scope.admit)(&rel)
                {
                    links(&rel);
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The most symlinks [`read_workspace`] names of those it left out (it counts them all).
const LINKS_NAMED: usize = 100;

/// What [`read_workspace`] read: the files, and the symlinks the band admits that were left out
/// (band copies none into a run), the first [`LINKS_NAMED`] by name, and how many in all.
#[derive(Debug, Default)]
pub struct WorkspaceFiles {
    pub files: Vec<FileEntry>,
    pub links: Vec<String>,
    pub links_count: usize,
}

/// Workspace files that a relative allow.read or allow.write pattern admits (and no deny covers).
/// Only the folders such a pattern can reach are walked (see [`walk_starts`]); a folder that a
/// deny covers for both reading and writing is not entered.
pub fn read_workspace(root: &WorkspaceRoot, policy: &CompiledPolicy) -> Result<WorkspaceFiles> {
    let prefixes = [&policy.read, &policy.write]
        .into_iter()
        .flat_map(|m| m.allow_patterns())
        .filter(|p| !p.is_absolute())
        .map(|p| p.is_anchored().then(|| p.static_prefix()));
    let admit =
        |rel: &str| policy.read.check(rel).is_allowed() || policy.write.check(rel).is_allowed();
    // Nothing below `rel` is admitted through `m`: it admits nothing in the workspace, or a deny
    // covers `rel` (a pattern that matches a folder matches everything below it).
    let closed = |m: &crate::policy::fs::FsMatcher, rel: &str| {
        m.allow_patterns().iter().all(|p| p.is_absolute())
            || matches!(m.check(rel), crate::policy::Decision::Deny { .. })
    };
    let prune = |rel: &str| closed(&policy.read, rel) && closed(&policy.write, rel);
    let opens = |rel: &str| {
        names_skipped(
            rel,
            policy.read.allow_patterns(),
            policy.write.allow_patterns(),
        )
    };
    let links = std::cell::RefCell::new((Vec::new(), 0usize));
    let link = |rel: &str| {
        let (named, count) = &mut *links.borrow_mut();
        if *count < LINKS_NAMED {
            named.push(rel.to_string());
        }
        *count += 1;
    };
    let scope = Scope {
        starts: walk_starts(prefixes),
        admit: &admit,
        prune: &prune,
        entered: None,
        opens: &opens,
        links: Some(&link),
    };
    let files = read_admitted(root, MAX_WORKSPACE_BYTES, &scope)?;
    let (links, links_count) = links.take();
    Ok(WorkspaceFiles {
        files,
        links,
        links_count,
    })
}

/// The regular files of `scope` under `root`, at most `cap` bytes in all.
fn read_admitted(root: &WorkspaceRoot, cap: u64, scope: &Scope<'_>) -> Result<Vec<FileEntry>> {
    let mut out = Vec::new();
    let mut total = 0u64;
    let too_large = || {
        user_error(
            format!(
                "the files the band admits from {} exceed {cap} bytes",
                root.path.display()
            ),
            "narrow allow.read, or pick a smaller --workspace",
        )
    };
    walk_scope(root, scope, &mut |found| {
        let size = u64::try_from(found.stat.st_size).unwrap_or(u64::MAX);
        total = total.saturating_add(size);
        if total > cap {
            return Err(too_large());
        }
        let mut data = Vec::with_capacity(size as usize);
        // The file may grow after the fstat: read no more than it said.
        found
            .file
            .take(size)
            .read_to_end(&mut data)
            .map_err(|e| io_error("read", &root.path.join(&found.rel), e))?;
        out.push(FileEntry {
            path: found.rel,
            // st_mode is u16 on some platforms.
            #[allow(clippy::unnecessary_cast)]
            mode: (found.stat.st_mode & 0o7777) as u32,
            data: B64.encode(data),
        });
        Ok(())
    })?;
    Ok(out)
}

/// The most a copy ([`copy_out`]) takes: regular files, their sizes summed, and their number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyLimits {
    pub bytes: u64,
    pub files: usize,
}

/// How a copy ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Copied {
    All,
    /// The files exceed the [`CopyLimits`]: the copy stopped (part of it is in place).
    TooLarge,
}

/// Copy the regular files below `root` into the folder `to` (made if missing), each with its
/// mode, through the walk a run's read takes: every entry is opened through its parent's
/// descriptor, and symlinks (never followed), devices, FIFOs, sockets, names that are not UTF-8
/// and the folders `.git` and `target` are left out, as a run never sees them. `skip` names
/// workspace-relative paths to leave out as well (a folder with everything below it). Every
/// folder walked is made, empty ones too (a script may write into an empty `out/`); a folder
/// counts as a file against the limits. An entry that cannot be read is an error.
pub fn copy_out(
    root: &WorkspaceRoot,
    to: &Path,
    skip: &dyn Fn(&str) -> bool,
    opens: &dyn Fn(&str) -> bool,
    limits: Option<CopyLimits>,
) -> Result<Copied> {
    fs_err::create_dir_all(to).map_err(ClientError::Fs)?;
    let admit = |rel: &str| !skip(rel);
    let (bytes, files) = (std::cell::Cell::new(0u64), std::cell::Cell::new(0usize));
    let over = std::cell::Cell::new(false);
    let exceeded = || {
        let out = limits.is_some_and(|l| bytes.get() > l.bytes || files.get() > l.files);
        over.set(over.get() || out);
        out
    };
    let entered = |rel: &str| -> Result<()> {
        files.set(files.get() + 1);
        if exceeded() {
            return Err(user_error("the copy exceeds its limits", ""));
        }
        fs_err::create_dir_all(to.join(rel)).map_err(ClientError::Fs)
    };
    let scope = Scope {
        starts: vec![String::new()],
        admit: &admit,
        prune: skip,
        entered: Some(&entered),
        opens,
        links: None,
    };
    let walked = walk_scope(root, &scope, &mut |found| {
        let size = u64::try_from(found.stat.st_size).unwrap_or(u64::MAX);
        bytes.set(bytes.get().saturating_add(size));
        files.set(files.get() + 1);
        if exceeded() {
            // Stops the walk; the caller sees `TooLarge`, not this.
            return Err(user_error("the copy exceeds its limits", ""));
        }
        let dest = to.join(&found.rel);
        if let Some(parent) = dest.parent() {
            fs_err::create_dir_all(parent).map_err(ClientError::Fs)?;
        }
        // st_mode is u16 on some platforms.
        #[allow(clippy::unnecessary_cast)]
        let mode = (found.stat.st_mode & 0o7777) as u32;
        let copy = || -> std::io::Result<()> {
            use fs_err::os::unix::fs::OpenOptionsExt;
            use std::os::unix::fs::PermissionsExt;
            let mut out = fs_err::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(mode)
                .open(&dest)?;
            // The file may grow after the fstat: copy no more than it said.
            std::io::copy(&mut (&found.file).take(size), &mut out)?;
            // The mode as it was, whatever the umask.
            out.set_permissions(std::fs::Permissions::from_mode(mode))
        };
        copy().map_err(|e| io_error("copy", &root.path.join(&found.rel), e))
    });
    match walked {
        Err(_) if over.get() => Ok(Copied::TooLarge),
        Err(e) => Err(e),
        Ok(()) => Ok(Copied::All),
    }
}

/// What is at the workspace-relative `rel` (normal components only), looked up one component at
/// a time beneath the root, never through a symlink: a regular file, a folder, or nothing
/// (missing, a link, unreadable, anything else). Only its type is read, never its contents.
pub(super) fn kind_of(root: &WorkspaceRoot, rel: &str) -> Option<FileType> {
    let comps: Vec<&str> = rel.split('/').collect();
    let (last, dirs) = comps.split_last()?;
    let mut dir: Arc<OwnedFd> = Arc::clone(&root.fd);
    for c in dirs {
        let name = cname(OsStr::new(c))?;
        dir = Arc::new(open_dir_beneath(&*dir, &name).ok()?);
    }
    let name = cname(OsStr::new(last))?;
    let st = rustix::fs::statat(&*dir, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW).ok()?;
    match FileType::from_raw_mode(st.st_mode) {
        k @ (FileType::RegularFile | FileType::Directory) => Some(k),
        _ => None,
    }
}

/// The folders on the way to each folder a relative write pattern of `policy` writes in
/// (`policy::fs::write_dir`, of `allow.write` and `insist.write`) that the workspace has (real
/// folders, no link on the way): `RunRequest::workspace_folders`, so that band-server makes in
/// the run's copy those folders and no other. Sorted, each once.
pub fn write_folders(root: &WorkspaceRoot, policy: &crate::policy::Policy) -> Vec<String> {
    let mut out = std::collections::BTreeSet::new();
    for pattern in policy.allow.write.iter().chain(&policy.insist.write) {
        let Some(dir) = crate::policy::fs::write_dir(pattern) else {
            continue;
        };
        for folder in crate::policy::fs::folders_to(&dir) {
            if out.contains(folder) {
                continue;
            }
            if kind_of(root, folder) != Some(FileType::Directory) {
                break;
            }
            out.insert(folder.to_string());
        }
    }
    out.into_iter().collect()
}

/// Copy files the run wrote back into the workspace, and make the empty folders it made
/// (`RunResult::written_folders`): relative paths only, never through a symlink.
///
/// A file band cannot write where the run wrote it (a symlink, or something not a folder or a
/// file, on its path in the workspace; a write that fails) is left out and comes back as a
/// refused write with the reason, and the other files are still written: the run's result, its
/// output and its record are not lost to one file. So is a folder band cannot make (a symlink or
/// a file on its path or at it), named with a trailing `/`; one the workspace has already is
/// fine. A path band-server should never send (not relative, into `.git`) or data that is not
/// base64 ends the write-back: nothing more is written.
pub fn write_back(
    root: &WorkspaceRoot,
    files: &[FileEntry],
    folders: &[String],
) -> Result<WrittenBack> {
    let mut refused = Vec::new();
    let mut without_exec = Vec::new();
    for f in files {
        let rel = safe_relative(&f.path)?;
        let data = B64.decode(&f.data).map_err(|source| ClientError::BadData {
            path: f.path.clone(),
            source,
        })?;
        match write_one(root, rel, &data, f.mode) {
            Ok(true) => without_exec.push(f.path.clone()),
            Ok(false) => {}
            Err(e) => refused.push(Denial::Write {
                path: f.path.clone(),
                rule: None,
                reason: Some(format!("{e}; the run's file was not written back")),
            }),
        }
    }
    for d in folders {
        let rel = safe_relative(d)?;
        if let Err(e) = write_folder(root, rel) {
            refused.push(Denial::Write {
                path: format!("{d}/"),
                rule: None,
                reason: Some(format!("{e}; the run's folder was not made")),
            });
        }
    }
    Ok(WrittenBack {
        refused,
        without_exec,
    })
}

/// `path` as band-server may name a file or folder to write back: relative, normal components
/// only, nothing under `.git` (band-server never sends it; checked here too). Anything else is a
/// protocol error that ends the write-back.
fn safe_relative(path: &str) -> Result<&Path> {
    let rel = Path::new(path);
    if path.is_empty()
        || rel.components().any(|c| !matches!(c, Component::Normal(_)))
        || rel.components().any(|c| c.as_os_str() == ".git")
    {
        return Err(ClientError::Protocol(format!(
            "band-server returned an unsafe path `{path}`; nothing more was written"
        )));
    }
    Ok(rel)
}

/// What a write-back did besides writing.
#[derive(Debug, Default)]
pub struct WrittenBack {
    /// The files it could not write, as refused writes.
    pub refused: Vec<Denial>,
    /// The files the run made executable that are not: band writes no execute bit it did not
    /// find (a new file gets `0666` less the umask, an existing one keeps its mode), so a run
    /// cannot leave a program or a git hook to be run on the host.
    pub without_exec: Vec<String>,
}

/// The refusal of a write whose path meets a symlink at `at`.
fn through_link(root: &WorkspaceRoot, at: &Path) -> ClientError {
    ClientError::Protocol(format!(
        "{} is a symlink, and band never writes through one",
        root.path.join(at).display()
    ))
}

/// The refusal of a component `name` of a write's path (at `at`) that did not open as a folder
/// (`ELOOP`, `ENOTDIR`): a symlink, never followed, or something else that is no folder (a file),
/// said as what it is (looked at through its folder's descriptor, `dir`).
fn not_a_folder(root: &WorkspaceRoot, dir: &OwnedFd, name: &CStr, at: &Path) -> ClientError {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st)
            if !matches!(
                FileType::from_raw_mode(st.st_mode),
                FileType::Directory | FileType::Symlink
            ) =>
        {
            ClientError::Protocol(format!("{} is not a folder", root.path.join(at).display()))
        }
        _ => through_link(root, at),
    }
}

/// The folder at `rel` (normal components) beneath `root`, each component opened beneath its
/// parent's descriptor and made with `mkdirat` (`0777` less the umask, as `mkdir` makes one)
/// where it is missing; one that exists is opened as it is. A symlink at any component is
/// refused, never followed, and so is a file.
fn make_dirs(root: &WorkspaceRoot, rel: &Path) -> Result<Arc<OwnedFd>> {
    let mut dir: Arc<OwnedFd> = Arc::clone(&root.fd);
    let mut at = PathBuf::new();
    for c in rel.components() {
        at.push(c);
        let name = cname(c.as_os_str()).ok_or_else(|| through_link(root, &at))?;
        let next = match open_dir_beneath(&*dir, &name) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => {
                match rustix::fs::mkdirat(&*dir, name.as_c_str(), Mode::from_raw_mode(0o777)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(io_error("create", &root.path.join(&at), e)),
                }
                open_dir_beneath(&*dir, &name).map_err(|e| {
                    if is_link_refusal(e) {
                        not_a_folder(root, &dir, &name, &at)
                    } else {
                        io_error("open", &root.path.join(&at), e)
                    }
                })?
            }
            Err(e) if is_link_refusal(e) => return Err(not_a_folder(root, &dir, &name, &at)),
            Err(e) => return Err(io_error("open", &root.path.join(&at), e)),
        };
        dir = Arc::new(next);
    }
    Ok(dir)
}

/// Make the folder `rel` (normal components only) beneath `root`, and the folders on its way,
/// with [`make_dirs`]: a folder there already is fine; a symlink or a file on the way or at it
/// is refused.
fn write_folder(root: &WorkspaceRoot, rel: &Path) -> Result<()> {
    make_dirs(root, rel).map(drop)
}

/// Write `data` at `rel` (normal components only) beneath `root`: folders made with `mkdirat`
/// ([`make_dirs`]), the file created under a temporary name with `O_EXCL | O_NOFOLLOW` and
/// renamed into place in the same folder descriptor. A symlink at any component is refused.
/// `Ok(true)`: the run's `mode` had an execute bit the written file does not.
fn write_one(root: &WorkspaceRoot, rel: &Path, data: &[u8], mode: u32) -> Result<bool> {
    let refuse = |at: &Path| through_link(root, at);
    let (Some(parent), Some(file_name)) = (rel.parent(), rel.file_name()) else {
        return Err(refuse(rel));
    };
    let dir = make_dirs(root, parent)?;
    let mut at = parent.to_path_buf();
    at.push(file_name);
    let name = cname(file_name).ok_or_else(|| refuse(&at))?;
    // What is there now: a symlink is refused, an existing file keeps its mode and owner.
    let existing = match rustix::fs::statat(&*dir, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => match FileType::from_raw_mode(st.st_mode) {
            FileType::Symlink => return Err(refuse(&at)),
            FileType::RegularFile => Some(st),
            _ => {
                return Err(ClientError::Protocol(format!(
                    "{} is not a regular file",
                    root.path.join(&at).display()
                )));
            }
        },
        Err(Errno::NOENT) => None,
        Err(e) => return Err(io_error("stat", &root.path.join(&at), e)),
    };
    let (tmp_name, fd) = create_temp(&dir)
        .map_err(|e| io_error("create a temporary file next to", &root.path.join(&at), e))?;
    let written = (|| -> std::io::Result<bool> {
        if let Some(st) = existing {
            // The permission bits only: what a run wrote never becomes set-uid, set-gid or
            // sticky, whatever the file it replaces was (band may be root here).
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(st.st_mode & 0o777))?;
            if rustix::process::geteuid().is_root() {
                rustix::fs::fchown(
                    &fd,
                    Some(rustix::fs::Uid::from_raw(st.st_uid)),
                    Some(rustix::fs::Gid::from_raw(st.st_gid)),
                )?;
            }
        }
        let kept = rustix::fs::fstat(&fd)?.st_mode;
        let mut file = std::fs::File::from(fd);
        file.write_all(data)?;
        file.flush()?;
        rustix::fs::renameat(&*dir, tmp_name.as_c_str(), &*dir, name.as_c_str())?;
        Ok(mode & 0o111 != 0 && kept & 0o111 == 0)
    })();
    match written {
        Ok(dropped) => Ok(dropped),
        Err(e) => {
            let _ = rustix::fs::unlinkat(&*dir, tmp_name.as_c_str(), AtFlags::empty());
            Err(io_error("write", &root.path.join(&at), e))
        }
    }
}

/// Create a new file `.band-write-<random>` in `dir` (`O_CREAT | O_EXCL | O_NOFOLLOW`). The
/// name is short and fixed in form, so any file name that fits fits this too.
fn create_temp(dir: &OwnedFd) -> rustix::io::Result<(std::ffi::CString, OwnedFd)> {
    let mut last = Errno::EXIST;
    for _ in 0..16 {
        let tmp = std::ffi::CString::new(format!(".band-write-{}", random_hex()))
            .map_err(|_| Errno::INVAL)?;
        match open_beneath(
            dir,
            &tmp,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
            Mode::from_raw_mode(0o666),
        ) {
            Ok(fd) => return Ok((tmp, fd)),
            Err(Errno::EXIST) => last = Errno::EXIST,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

/// 16 random hex digits (from /dev/urandom; the time and pid if it cannot be read): run ids and
/// the temporary names of written files.
pub fn random_hex() -> String {
    let mut buf = [0u8; 8];
    if fs_err::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .is_err()
    {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        buf = (t.as_nanos() as u64 ^ u64::from(std::process::id())).to_le_bytes();
    }
    hex::encode(buf)
}

/// One entry of a workspace folder, as the files API lists it ([`WorkspaceRoot::list`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub name: String,
    pub size: u64,
    pub dir: bool,
    /// Seconds since the epoch.
    pub modified: i64,
    pub mode: u32,
}

/// `rel` as a workspace-relative path the files API may name: normal components only (no `..`,
/// no leading `/`, no `.`), not empty, nothing under `.git`, no NUL. The error says which.
pub fn api_path(rel: &str) -> std::result::Result<&Path, String> {
    let path = Path::new(rel);
    if rel.is_empty() {
        return Err("an empty path names no file".into());
    }
    if rel.contains('\0') {
        return Err(format!("`{}`: a path with a NUL byte", rel.escape_debug()));
    }
    if path.is_absolute() {
        return Err(format!(
            "`{rel}` is absolute; paths are relative to the workspace"
        ));
    }
    if path
        .components()
        .any(|c| !matches!(c, Component::Normal(_)))
        || rel.split('/').any(|c| c.is_empty() || c == ".")
    {
        return Err(format!(
            "`{rel}` has a `..`, `.` or empty component; paths stay in the workspace"
        ));
    }
    if path.components().any(|c| c.as_os_str() == ".git") {
        return Err(format!(
            "`{rel}` is under .git, which band never reads or writes"
        ));
    }
    Ok(path)
}

impl WorkspaceRoot {
    /// The folder at `rel` (normal components; empty: the root), opened one component at a time
    /// beneath the root, never through a symlink.
    fn dir_at(&self, rel: &Path) -> rustix::io::Result<Arc<OwnedFd>> {
        let mut dir: Arc<OwnedFd> = Arc::clone(&self.fd);
        for c in rel.components() {
            let name = cname(c.as_os_str()).ok_or(Errno::INVAL)?;
            dir = Arc::new(open_dir_beneath(&*dir, &name)?);
        }
        Ok(dir)
    }

    /// The refusal of a path that meets a symlink.
    fn link_error(&self, rel: &Path) -> ClientError {
        ClientError::user(
            format!(
                "{}: a symlink on the path; band never follows one in the workspace",
                self.path.join(rel).display()
            ),
            "name the file itself, not a link to it",
        )
    }

    /// Write `data` at `rel` ([`api_path`]), folders made as needed, never through a symlink
    /// (the same write as a run's write-back).
    pub fn write_file(&self, rel: &str, data: &[u8]) -> Result<()> {
        let path =
            api_path(rel).map_err(|m| ClientError::user(m, "name a file in the workspace"))?;
        write_one(self, path, data, 0o644).map(|_| ())
    }

    /// What is at `rel`: a regular file, a folder, or nothing (missing, a symlink, anything else).
    pub fn kind(&self, rel: &str) -> Option<FileType> {
        if rel.is_empty() {
            return Some(FileType::Directory);
        }
        kind_of(self, rel)
    }

    /// The contents of the regular file at `rel`, at most `limit` bytes; `None` when nothing is
    /// there. A symlink on the way is refused.
    pub fn read_file(&self, rel: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        let path =
            api_path(rel).map_err(|m| ClientError::user(m, "name a file in the workspace"))?;
        let (parent, name) = (
            path.parent().unwrap_or(Path::new("")),
            path.file_name().unwrap_or_default(),
        );
        let dir = match self.dir_at(parent) {
            Ok(d) => d,
            Err(Errno::NOENT) => return Ok(None),
            Err(e) if is_link_refusal(e) => return Err(self.link_error(path)),
            Err(e) => return Err(io_error("open", &self.path.join(parent), e)),
        };
        let name = cname(name).ok_or_else(|| self.link_error(path))?;
        let fd = match open_beneath(
            &*dir,
            &name,
            OFlags::RDONLY | OFlags::NONBLOCK,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(e) if is_link_refusal(e) => return Err(self.link_error(path)),
            Err(e) => return Err(io_error("open", &self.path.join(path), e)),
        };
        let st = rustix::fs::fstat(&fd).map_err(|e| io_error("stat", &self.path.join(path), e))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Ok(None);
        }
        if u64::try_from(st.st_size).unwrap_or(u64::MAX) > limit {
            return Err(ClientError::user(
                format!(
                    "{}: {} bytes; the most the files API reads is {limit}",
                    self.path.join(path).display(),
                    st.st_size
                ),
                "",
            ));
        }
        let mut data = Vec::new();
        std::fs::File::from(fd)
            .take(limit)
            .read_to_end(&mut data)
            .map_err(|e| io_error("read", &self.path.join(path), e))?;
        Ok(Some(data))
    }

    /// The entries of the folder at `rel` (empty: the root), sorted by name; symlinks, devices,
    /// FIFOs and sockets are left out. `None` when no folder is there.
    pub fn list(&self, rel: &str) -> Result<Option<Vec<Listed>>> {
        let path = if rel.is_empty() {
            Path::new("")
        } else {
            api_path(rel).map_err(|m| ClientError::user(m, "name a folder in the workspace"))?
        };
        let dir = match self.dir_at(path) {
            Ok(d) => d,
            Err(Errno::NOENT | Errno::NOTDIR) => return Ok(None),
            Err(e) if is_link_refusal(e) => return Err(self.link_error(path)),
            Err(e) => return Err(io_error("open", &self.path.join(path), e)),
        };
        let shown = self.path.join(path);
        let names = crate::skillfs::dir_entries(&*dir)
            .map_err(|e| io_error("read the folder", &shown, e))?;
        let mut out = Vec::new();
        for (name, _) in names {
            let Ok(st) = rustix::fs::statat(&*dir, &name, AtFlags::SYMLINK_NOFOLLOW) else {
                continue;
            };
            let dir = match FileType::from_raw_mode(st.st_mode) {
                FileType::RegularFile => false,
                FileType::Directory => true,
                _ => continue,
            };
            let Ok(text) = name.to_str() else { continue };
            out.push(Listed {
                name: text.to_string(),
                size: u64::try_from(st.st_size).unwrap_or(0),
                dir,
                modified: st.st_mtime,
                mode: st.st_mode & 0o7777,
            });
        }
        // In name order, as the listing is.
        Ok(Some(out))
    }

    /// Remove the file or folder (with everything in it) at `rel`; `false` when nothing was
    /// there. A symlink on the way is refused; a symlink inside a removed folder is removed, not
    /// followed.
    pub fn remove(&self, rel: &str) -> Result<bool> {
        let path = api_path(rel)
            .map_err(|m| ClientError::user(m, "name a file or folder in the workspace"))?;
        let (parent, name) = (
            path.parent().unwrap_or(Path::new("")),
            path.file_name().unwrap_or_default(),
        );
        let dir = match self.dir_at(parent) {
            Ok(d) => d,
            Err(Errno::NOENT) => return Ok(false),
            Err(e) if is_link_refusal(e) => return Err(self.link_error(path)),
            Err(e) => return Err(io_error("open", &self.path.join(parent), e)),
        };
        let name = cname(name).ok_or_else(|| self.link_error(path))?;
        let st = match rustix::fs::statat(&*dir, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(Errno::NOENT) => return Ok(false),
            Err(e) => return Err(io_error("stat", &self.path.join(path), e)),
        };
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Symlink => Err(self.link_error(path)),
            FileType::Directory => {
                remove_tree(&dir, &name)
                    .map_err(|e| io_error("remove", &self.path.join(path), e))?;
                Ok(true)
            }
            _ => {
                rustix::fs::unlinkat(&*dir, name.as_c_str(), AtFlags::empty())
                    .map_err(|e| io_error("remove", &self.path.join(path), e))?;
                Ok(true)
            }
        }
    }
}

/// Remove the folder `name` in `parent` and everything in it, through descriptors (never
/// following a symlink: a link inside is removed as a link).
fn remove_tree(parent: &OwnedFd, name: &CStr) -> rustix::io::Result<()> {
    let dir = open_dir_beneath(parent, name)?;
    for (n, _) in crate::skillfs::dir_entries(&dir)? {
        let st = rustix::fs::statat(&dir, n.as_c_str(), AtFlags::SYMLINK_NOFOLLOW)?;
        if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
            remove_tree(&dir, &n)?;
        } else {
            rustix::fs::unlinkat(&dir, n.as_c_str(), AtFlags::empty())?;
        }
    }
    rustix::fs::unlinkat(parent, name, AtFlags::REMOVEDIR)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use fs_err::os::unix::fs::symlink;

    use super::*;

    fn facts(euid: u32, sudo_uid: Option<u32>, owner: u32) -> RootFacts {
        RootFacts {
            euid,
            sudo_uid,
            owner,
        }
    }

    fn why(path: &str, f: RootFacts) -> Option<String> {
        check_root(Path::new(path), &f)
    }

    #[test]
    fn system_trees_their_insides_and_their_parents_are_refused() {
        let user = facts(1000, None, 1000);
        for (path, expected) in [
            ("/", "it is the root of the file system"),
            ("/etc", "/etc is a system folder"),
            ("/etc/cron.d", "it lies in the system folder /etc"),
            ("/usr/local/src", "it lies in the system folder /usr"),
            ("/root", "/root is a system folder"),
            ("/var", "it holds the system folder /var/cache"),
            ("/var/lib/docker", "it lies in the system folder /var/lib"),
            ("/boot", "/boot is a system folder"),
            ("/lib64", "/lib64 is a system folder"),
            ("/proc/self", "it lies in the system folder /proc"),
            ("/home", "it holds every user's home folder"),
            ("/private/etc", "/private/etc is a system folder"),
        ] {
            assert_eq!(why(path, user).as_deref(), Some(expected), "{path}");
        }
        for fine in [
            "/home/ada/project",
            "/tmp/work",
            "/srv/site",
            "/var/tmp/x",
            "/opt/src",
            "/etcetera",
            "/usrdata",
        ] {
            assert_eq!(why(fine, user), None, "{fine}");
        }
    }

    #[test]
    fn under_sudo_the_folder_must_be_the_invoking_users() {
        // root through sudo, a folder of the invoking user: fine.
        assert_eq!(why("/home/ada/p", facts(0, Some(1000), 1000)), None);
        // root through sudo, somebody else's folder (root's, or another user's): refused.
        let refused = why("/home/bob/p", facts(0, Some(1000), 1001)).expect("refused");
        assert!(
            refused.contains("SUDO_UID=1000") && refused.contains("uid 1001"),
            "{refused}"
        );
        assert!(why("/tmp/shared", facts(0, Some(1000), 0)).is_some());
        // Plain root (no sudo), or SUDO_UID left in a non-root environment: not this rule.
        assert_eq!(why("/tmp/shared", facts(0, None, 1000)), None);
        assert_eq!(why("/tmp/shared", facts(1000, Some(1001), 0)), None);
    }

    fn root_of(dir: &Path) -> WorkspaceRoot {
        WorkspaceRoot::open(dir, true, true).expect("open")
    }

    /// The files API's listing: names in order, files and folders only (a link and a FIFO left
    /// out); its removal takes a folder with everything in it, a link inside removed as a link.
    #[test]
    fn the_listing_is_in_name_order_and_removal_takes_whole_folders() {
        let t = tempfile::tempdir().expect("tmp");
        let w = t.path();
        fs_err::create_dir_all(w.join("d/inner")).expect("mkdir");
        for f in ["b.txt", "a.txt", "d/inner/x", "outside"] {
            fs_err::write(w.join(f), "x").expect("write");
        }
        fs_err::os::unix::fs::symlink(w.join("outside"), w.join("d/link")).expect("link");
        fs_err::os::unix::fs::symlink("b.txt", w.join("c-link")).expect("link");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            w.join("fifo"),
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .expect("fifo");
        let root = root_of(w);
        let listed = root.list("").expect("list").expect("a folder");
        let names: Vec<(&str, bool)> = listed.iter().map(|l| (l.name.as_str(), l.dir)).collect();
        assert_eq!(
            names,
            [
                ("a.txt", false),
                ("b.txt", false),
                ("d", true),
                ("outside", false)
            ]
        );
        assert!(root.remove("d").expect("remove"));
        assert!(!w.join("d").exists());
        assert!(w.join("outside").exists(), "the link's target stays");
        assert_eq!(root.list("d").expect("list"), None);
    }

    /// The folders on the way to each write folder that the workspace has, and no further than
    /// the first it lacks; a link or a file on the way is not a folder it has.
    #[test]
    fn write_folders_are_those_the_workspace_has() {
        let t = tempfile::tempdir().expect("tempdir");
        let w = t.path();
        fs_err::create_dir_all(w.join("out/reports")).expect("mkdir");
        fs_err::create_dir_all(w.join("docs")).expect("mkdir");
        fs_err::write(w.join("notes"), "a file").expect("write");
        fs_err::os::unix::fs::symlink(w.join("docs"), w.join("linked")).expect("symlink");
        let mut policy = crate::policy::Policy::default();
        policy.allow.write = [
            "out/reports/**",
            "docs/new/*.md",
            "my-package/**",
            "notes/**",
            "linked/**",
            "*.txt",
        ]
        .map(String::from)
        .to_vec();
        policy.insist.write = vec!["docs/index.md".into()];
        assert_eq!(
            write_folders(&root_of(w), &policy),
            ["docs", "out", "out/reports"]
        );
    }

    /// The whole tree, admitting what `admit` admits.
    fn everything<'a>(admit: &'a dyn Fn(&str) -> bool) -> Scope<'a> {
        Scope {
            starts: vec![String::new()],
            admit,
            prune: &|_| false,
            entered: None,
            opens: &|_| false,
            links: None,
        }
    }

    fn read_all(dir: &Path) -> Vec<(String, String)> {
        read_admitted(&root_of(dir), 1 << 20, &everything(&|_| true))
            .expect("read")
            .into_iter()
            .map(|f| {
                let data = String::from_utf8(B64.decode(f.data).expect("b64")).expect("utf8");
                (f.path, data)
            })
            .collect()
    }

    /// A workspace `w/` and, next to it, `outside/` holding `secret` and `sub/secret`.
    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let t = tempfile::tempdir().expect("tempdir");
        let w = t.path().join("w");
        let outside = t.path().join("outside");
        fs_err::create_dir_all(w.join("a/b")).expect("mkdir");
        fs_err::create_dir_all(outside.join("sub")).expect("mkdir");
        fs_err::write(outside.join("secret"), "SECRET").expect("write");
        fs_err::write(outside.join("sub/secret"), "SECRET").expect("write");
        fs_err::write(w.join("top.txt"), "top").expect("write");
        fs_err::write(w.join("a/b/deep.txt"), "deep").expect("write");
        (t, w, outside)
    }

    #[test]
    fn the_walk_skips_symlinks_at_every_component() {
        let (_t, w, outside) = setup();
        // A linked folder at the top, in the middle and at the bottom; a linked file at each.
        symlink(&outside, w.join("link-dir")).expect("symlink");
        symlink(&outside, w.join("a/link-dir")).expect("symlink");
        symlink(outside.join("sub"), w.join("a/b/link-dir")).expect("symlink");
        symlink(outside.join("secret"), w.join("secret")).expect("symlink");
        symlink(outside.join("secret"), w.join("a/secret")).expect("symlink");
        symlink("../../../outside/secret", w.join("a/b/secret")).expect("symlink");
        // A FIFO is not workspace data (and reading it would block). (rustix has no mkfifoat on
        // macOS.)
        #[cfg(target_os = "linux")]
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            w.join("a/fifo"),
            Mode::from_raw_mode(0o644),
        )
        .expect("mkfifo");
        assert_eq!(
            read_all(&w),
            vec![
                ("a/b/deep.txt".to_string(), "deep".to_string()),
                ("top.txt".to_string(), "top".to_string()),
            ]
        );
    }

    #[test]
    fn the_walk_skips_git_and_target_and_keeps_modes() {
        let (_t, w, _) = setup();
        fs_err::create_dir_all(w.join(".git")).expect("mkdir");
        fs_err::write(w.join(".git/config"), "x").expect("write");
        fs_err::create_dir_all(w.join("target")).expect("mkdir");
        fs_err::write(w.join("target/x"), "x").expect("write");
        fs_err::set_permissions(w.join("top.txt"), std::fs::Permissions::from_mode(0o750))
            .expect("chmod");
        let files = read_admitted(&root_of(&w), 1 << 20, &everything(&|_| true)).expect("read");
        let got: Vec<(&str, u32)> = files.iter().map(|f| (f.path.as_str(), f.mode)).collect();
        assert_eq!(got, vec![("a/b/deep.txt", 0o644), ("top.txt", 0o750)]);
        // Only admitted files are read; the cap counts their sizes.
        let only =
            read_admitted(&root_of(&w), 1 << 20, &everything(&|r| r == "top.txt")).expect("read");
        assert_eq!(only.len(), 1);
        let err = read_admitted(&root_of(&w), 3, &everything(&|_| true)).expect_err("over the cap");
        assert!(err.to_string().contains("exceed 3 bytes"), "{err}");
    }

    /// Every file below `dir`, with its mode and contents, and every folder (symlinks listed as
    /// such).
    fn tree_of(dir: &Path) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut stack = vec![PathBuf::new()];
        while let Some(rel) = stack.pop() {
            for e in fs_err::read_dir(dir.join(&rel)).expect("read_dir") {
                let e = e.expect("entry");
                let r = rel.join(e.file_name());
                let ft = e.file_type().expect("type");
                let shown = r.display().to_string();
                if ft.is_dir() {
                    out.push((format!("{shown}/"), String::new()));
                    stack.push(r);
                } else if ft.is_symlink() {
                    out.push((shown, "link".into()));
                } else {
                    let mode = e.metadata().expect("meta").permissions().mode() & 0o7777;
                    let data = fs_err::read_to_string(e.path()).expect("read");
                    out.push((shown, format!("{mode:o} {data}")));
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn a_copy_takes_what_a_run_would_read_with_modes_and_leaves_links_out() {
        let (t, w, outside) = setup();
        symlink(&outside, w.join("link-dir")).expect("symlink");
        symlink(outside.join("secret"), w.join("a/secret")).expect("symlink");
        fs_err::create_dir_all(w.join("a/.git")).expect("mkdir");
        fs_err::write(w.join("a/.git/config"), "x").expect("write");
        fs_err::create_dir_all(w.join("target")).expect("mkdir");
        fs_err::write(w.join("target/x"), "x").expect("write");
        fs_err::create_dir_all(w.join("skipped/deeper")).expect("mkdir");
        fs_err::write(w.join("skipped/deeper/f"), "x").expect("write");
        fs_err::write(w.join("a/skipped"), "x").expect("write");
        // Empty folders are copied too (a script may write into an empty `out/`).
        fs_err::create_dir_all(w.join("out/empty")).expect("mkdir");
        fs_err::set_permissions(w.join("top.txt"), std::fs::Permissions::from_mode(0o750))
            .expect("chmod");
        let to = t.path().join("copy");
        let skip = |rel: &str| rel.rsplit('/').next() == Some("skipped");
        assert_eq!(
            copy_out(&root_of(&w), &to, &skip, &|_| false, None).expect("copy"),
            Copied::All
        );
        assert_eq!(
            tree_of(&to),
            vec![
                ("a/".to_string(), String::new()),
                ("a/b/".to_string(), String::new()),
                ("a/b/deep.txt".to_string(), "644 deep".to_string()),
                ("out/".to_string(), String::new()),
                ("out/empty/".to_string(), String::new()),
                ("top.txt".to_string(), "750 top".to_string()),
            ]
        );
        // Over either limit: the copy stops and says so.
        for (bytes, files) in [(6, 10), (100, 1)] {
            let to = t.path().join(format!("small-{bytes}-{files}"));
            let limits = Some(CopyLimits { bytes, files });
            assert_eq!(
                copy_out(&root_of(&w), &to, &skip, &|_| false, limits).expect("copy"),
                Copied::TooLarge,
                "{bytes} {files}"
            );
        }
        let to = t.path().join("exact");
        // Two files and four folders: a folder counts as a file.
        let limits = Some(CopyLimits { bytes: 7, files: 6 });
        assert_eq!(
            copy_out(&root_of(&w), &to, &skip, &|_| false, limits).expect("copy"),
            Copied::All
        );
    }

    fn entry(path: &str, data: &str) -> FileEntry {
        FileEntry {
            path: path.into(),
            mode: 0o644,
            data: B64.encode(data),
        }
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs_err::read_dir(dir)
            .expect("read_dir")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn the_write_back_makes_folders_and_replaces_files_in_place() {
        let (_t, w, _) = setup();
        fs_err::set_permissions(w.join("top.txt"), std::fs::Permissions::from_mode(0o600))
            .expect("chmod");
        write_back(
            &root_of(&w),
            &[entry("top.txt", "new top"), entry("x/y/z.txt", "z")],
            &[],
        )
        .expect("write back");
        assert_eq!(
            fs_err::read_to_string(w.join("top.txt")).expect("read"),
            "new top"
        );
        assert_eq!(
            fs_err::read_to_string(w.join("x/y/z.txt")).expect("read"),
            "z"
        );
        let mode = fs_err::metadata(w.join("top.txt"))
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "an existing file keeps its mode");
        // No temporary file is left behind.
        assert_eq!(names(&w), vec!["a", "top.txt", "x"]);
        assert_eq!(names(&w.join("x/y")), vec!["z.txt"]);
    }

    /// A run's execute bit is not written back: a new file the run made executable (a script
    /// it generated, a git hook it planted) lands without it, and is named; an existing
    /// executable keeps its mode.
    #[test]
    fn the_write_back_writes_no_execute_bit_it_did_not_find() {
        let (_t, w, _) = setup();
        fs_err::write(w.join("tool.sh"), "old").expect("write");
        fs_err::set_permissions(w.join("tool.sh"), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        let exec = |path: &str, text: &str| FileEntry {
            mode: 0o755,
            ..entry(path, text)
        };
        let back = write_back(
            &root_of(&w),
            &[
                exec("hooks/pre-commit", "#!/bin/sh\n"),
                exec("tool.sh", "new"),
                entry("plain.txt", "x"),
            ],
            &[],
        )
        .expect("write back");
        assert_eq!(back.without_exec, ["hooks/pre-commit"]);
        let mode = |p: &str| {
            fs_err::metadata(w.join(p))
                .expect("stat")
                .permissions()
                .mode()
        };
        assert_eq!(mode("hooks/pre-commit") & 0o111, 0);
        assert_eq!(mode("tool.sh") & 0o777, 0o755);
    }

    #[test]
    fn a_replaced_file_never_keeps_set_uid_set_gid_or_sticky() {
        let (_t, w, _) = setup();
        fs_err::set_permissions(w.join("top.txt"), std::fs::Permissions::from_mode(0o7755))
            .expect("chmod");
        write_back(&root_of(&w), &[entry("top.txt", "written by a run")], &[]).expect("write back");
        let mode = fs_err::metadata(w.join("top.txt"))
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o755, "only the permission bits are kept");
    }

    #[test]
    fn the_write_back_never_goes_through_a_symlink() {
        let (_t, w, outside) = setup();
        symlink(&outside, w.join("link-dir")).expect("symlink");
        symlink(&outside, w.join("a/link-dir")).expect("symlink");
        symlink(outside.join("secret"), w.join("a/b/file-link")).expect("symlink");
        let root = root_of(&w);
        for path in [
            "link-dir/secret",
            "link-dir/new",
            "a/link-dir/sub/new",
            "a/b/file-link",
        ] {
            // The file is a refused write, with why; the run's other files are still written.
            let refused = write_back(
                &root,
                &[entry(path, "PWNED"), entry("after.txt", path)],
                &[],
            )
            .expect(path)
            .refused;
            let [
                Denial::Write {
                    path: p,
                    rule: None,
                    reason: Some(why),
                },
            ] = &refused[..]
            else {
                panic!("{path}: {refused:?}");
            };
            assert_eq!(p, path);
            assert!(
                why.ends_with(
                    "is a symlink, and band never writes through one; the run's file was not written back"
                ),
                "{path}: {why}"
            );
            assert_eq!(
                fs_err::read_to_string(w.join("after.txt")).expect("read"),
                path
            );
        }
        assert_eq!(names(&outside), vec!["secret", "sub"]);
        assert_eq!(names(&outside.join("sub")), vec!["secret"]);
        assert_eq!(
            fs_err::read_to_string(outside.join("secret")).expect("read"),
            "SECRET"
        );
        // Unsafe paths from the server are refused before anything is touched.
        for path in ["../outside/x", "/etc/x", "a/../../x", ""] {
            let err = write_back(&root, &[entry(path, "x")], &[]).expect_err(path);
            assert!(err.to_string().contains("unsafe path"), "{path}: {err}");
        }
    }

    /// The empty folders a run made (`RunResult::written_folders`) are made in the workspace
    /// through the same descriptors as its files: with the folders on their way, `0777` less the
    /// umask; one there already is fine. A symlink on the way, or at the folder, is refused and
    /// never followed, and so is a file where the folder goes: each a refused write named with a
    /// trailing `/`, and the run's other folders and files are still written. A path band-server
    /// should never send ends the write-back.
    #[test]
    fn the_write_back_makes_the_run_s_empty_folders_never_through_a_symlink() {
        let (_t, w, outside) = setup();
        symlink(&outside, w.join("link-dir")).expect("symlink");
        symlink(&outside, w.join("a/link-here")).expect("symlink");
        let root = root_of(&w);
        let folders: Vec<String> = [
            "projects/demo/episode-01/audio",
            "projects/demo/episode-01/video",
            "a/b",
            "link-dir/made",
            "a/link-here",
            "top.txt",
            "top.txt/under",
            "last",
        ]
        .iter()
        .map(|d| d.to_string())
        .collect();
        let back = write_back(&root, &[entry("after.txt", "x")], &folders).expect("write back");
        let said: Vec<(&str, &str)> = back
            .refused
            .iter()
            .map(|d| match d {
                Denial::Write {
                    path,
                    rule: None,
                    reason: Some(why),
                } => (path.as_str(), why.as_str()),
                other => panic!("{other:?}"),
            })
            .collect();
        let at = |rel: &str| w.join(rel).display().to_string();
        assert_eq!(
            said,
            [
                (
                    "link-dir/made/",
                    format!(
                        "{} is a symlink, and band never writes through one; the run's folder was not made",
                        at("link-dir")
                    )
                    .as_str()
                ),
                (
                    "a/link-here/",
                    format!(
                        "{} is a symlink, and band never writes through one; the run's folder was not made",
                        at("a/link-here")
                    )
                    .as_str()
                ),
                (
                    "top.txt/",
                    format!("{} is not a folder; the run's folder was not made", at("top.txt"))
                        .as_str()
                ),
                (
                    "top.txt/under/",
                    format!("{} is not a folder; the run's folder was not made", at("top.txt"))
                        .as_str()
                ),
            ]
        );
        // The mode `mkdir` gives: 0777 less the umask.
        fs_err::create_dir(w.join("by-mkdir")).expect("mkdir");
        let mkdir_mode = fs_err::metadata(w.join("by-mkdir"))
            .expect("stat")
            .permissions()
            .mode();
        for d in [
            "projects/demo/episode-01/audio",
            "projects/demo/episode-01/video",
            "last",
        ] {
            let st = fs_err::symlink_metadata(w.join(d)).expect(d);
            assert!(st.is_dir(), "{d}");
            assert_eq!(st.permissions().mode() & 0o7777, mkdir_mode & 0o7777, "{d}");
            assert!(names(&w.join(d)).is_empty(), "{d}");
        }
        assert_eq!(
            names(&w.join("projects/demo/episode-01")),
            ["audio", "video"]
        );
        assert_eq!(names(&w.join("a")), ["b", "link-here"]);
        assert_eq!(
            fs_err::read_to_string(w.join("after.txt")).expect("read"),
            "x"
        );
        // Nothing was made through the links (`a/b` was there already: made without a word).
        assert_eq!(names(&outside), vec!["secret", "sub"]);
        assert_eq!(names(&outside.join("sub")), vec!["secret"]);
        // A folder that is there already is made again without a word.
        let back = write_back(&root, &[], &folders[..1]).expect("again");
        assert!(back.refused.is_empty(), "{:?}", back.refused);
        // Unsafe paths from the server are refused before anything is touched.
        for path in [
            "../outside/x",
            "/etc/x",
            "a/../../x",
            "",
            ".git/hooks",
            "sub/.git",
        ] {
            let err = write_back(&root, &[], &[path.to_string()]).expect_err(path);
            assert!(err.to_string().contains("unsafe path"), "{path}: {err}");
        }
        assert!(!w.join("sub").exists());
    }

    #[test]
    fn one_component_at_a_time() {
        let (_t, w, _) = setup();
        let root = root_of(&w);
        for bad in [c"..", c".", c"a/b", c""] {
            assert_eq!(
                open_dir_beneath(&*root.fd, bad).err(),
                Some(Errno::INVAL),
                "{bad:?}"
            );
        }
        assert!(open_dir_beneath(&*root.fd, c"a").is_ok());
    }

    #[test]
    fn opening_names_the_folder_and_checks_it() {
        let err = WorkspaceRoot::open(Path::new("/etc"), true, false).expect_err("refused");
        assert_eq!(
            err.to_string(),
            "refusing to use workspace /etc: /etc is a system folder"
        );
        assert!(err.hint().is_some_and(|h| h.contains(ALLOW_SYSTEM_FLAG)));
        assert!(WorkspaceRoot::open(Path::new("/etc"), true, true).is_ok());
        let (_t, w, _) = setup();
        let err = WorkspaceRoot::open(&w.join("top.txt"), true, false).expect_err("a file");
        assert!(err.to_string().ends_with("is not a folder"), "{err}");
    }

    #[test]
    fn walks_start_at_each_patterns_literal_prefix() {
        assert_eq!(walk_starts([]), Vec::<String>::new(), "admits nothing");
        assert_eq!(
            walk_starts([Some("data"), Some("data/in"), Some("docs/a.md"), Some("b")]),
            vec!["b", "data", "docs/a.md"]
        );
        // Any depth (`*.pem`) or a leading glob (`**/x`): the whole tree.
        assert_eq!(walk_starts([Some("data"), None]), vec![""]);
        assert_eq!(walk_starts([Some("data"), Some("")]), vec![""]);
        // Component order, as a depth-first walk gives it (`a` before `a-b`, `a/x` between).
        assert_eq!(
            walk_starts([Some("a-b"), Some("a/x"), Some("a")]),
            vec!["a", "a-b"]
        );
    }

    fn policy_reading(allow: &[&str], deny: &[&str]) -> CompiledPolicy {
        let mut p = crate::policy::Policy::default();
        p.allow.read = allow.iter().map(|s| s.to_string()).collect();
        p.deny.read = deny.iter().map(|s| s.to_string()).collect();
        CompiledPolicy::compile(&p).expect("policy")
    }

    /// What `read_workspace` returned, and every folder it listed.
    fn read_listing(w: &Path, policy: &CompiledPolicy) -> (Result<Vec<String>>, Vec<String>) {
        LISTED.with(|l| l.borrow_mut().clear());
        let got = read_workspace(&root_of(w), policy)
            .map(|v| v.files.into_iter().map(|f| f.path).collect());
        (got, LISTED.with(|l| l.borrow().clone()))
    }

    /// The symlinks the band admits are named as left out (in name order, the first
    /// [`LINKS_NAMED`]) and all counted; one it does not admit is not.
    #[test]
    fn the_symlinks_the_band_admits_are_said_to_be_left_out() {
        let (_t, w, outside) = setup();
        fs_err::write(w.join("AGENTS.md"), "rules").expect("write");
        symlink("AGENTS.md", w.join("CLAUDE.md")).expect("symlink");
        symlink(&outside, w.join("a/docs.md")).expect("symlink");
        symlink("AGENTS.md", w.join("notes.txt")).expect("symlink");
        for i in 0..LINKS_NAMED + 5 {
            symlink("../AGENTS.md", w.join(format!("a/b/l{i:03}.md"))).expect("symlink");
        }
        let got = read_workspace(&root_of(&w), &policy_reading(&["**/*.md"], &[])).expect("read");
        let files: Vec<&str> = got.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(files, ["AGENTS.md"]);
        assert_eq!(got.links_count, LINKS_NAMED + 7);
        assert_eq!(got.links.len(), LINKS_NAMED);
        assert_eq!(
            got.links[..3],
            ["CLAUDE.md", "a/b/l000.md", "a/b/l001.md"].map(String::from)
        );
        assert!(
            !got.links.iter().any(|l| l == "notes.txt"),
            "{:?}",
            got.links
        );
    }

    #[test]
    fn the_walk_goes_only_where_an_admitting_pattern_reaches() {
        let t = tempfile::tempdir().expect("tempdir");
        let w = t.path();
        fs_err::create_dir_all(w.join("data/sub")).expect("mkdir");
        fs_err::write(w.join("data/a.csv"), "1").expect("write");
        fs_err::write(w.join("data/b.txt"), "2").expect("write");
        fs_err::write(w.join("data/sub/c.csv"), "3").expect("write");
        for i in 0..200 {
            let d = w.join(format!("node_modules/pkg{i}"));
            fs_err::create_dir_all(&d).expect("mkdir");
            fs_err::write(d.join("index.js"), "x").expect("write");
        }
        fs_err::create_dir(w.join("locked")).expect("mkdir");
        fs_err::write(w.join("locked/x.csv"), "x").expect("write");
        fs_err::set_permissions(w.join("locked"), std::fs::Permissions::from_mode(0o000))
            .expect("chmod");

        let (got, listed) = read_listing(w, &policy_reading(&["data/*.csv"], &[]));
        assert_eq!(got.expect("read"), vec!["data/a.csv"]);
        // Only `data` and below: not the root, not node_modules, not the locked folder.
        assert_eq!(listed, vec!["data", "data/sub"]);

        // A band that admits nothing from the workspace never reads it.
        let (got, listed) = read_listing(w, &policy_reading(&[], &[]));
        assert_eq!(got.expect("read"), Vec::<String>::new());
        assert_eq!(listed, Vec::<String>::new());
        let (got, listed) = read_listing(w, &policy_reading(&["/etc/hosts"], &[]));
        assert_eq!(got.expect("read"), Vec::<String>::new());
        assert_eq!(listed, Vec::<String>::new());

        // A pattern matched at any depth walks the tree, but not what a deny covers; the locked
        // folder is not admitted (its name is no `*.csv`), so as non-root it reads as absent, and
        // as root (which reads it anyway) it is walked and holds no admitted file.
        let (got, listed) = read_listing(w, &policy_reading(&["*.csv"], &["node_modules"]));
        let expected_locked = if rustix::process::geteuid().is_root() {
            vec!["data/a.csv", "data/sub/c.csv", "locked/x.csv"]
        } else {
            vec!["data/a.csv", "data/sub/c.csv"]
        };
        assert_eq!(got.expect("read"), expected_locked);
        assert!(
            !listed.iter().any(|d| d.starts_with("node_modules")),
            "{listed:?}"
        );

        // A missing prefix is nothing to read; a file named by its full path is read.
        let (got, _) = read_listing(w, &policy_reading(&["missing/**", "./data/a.csv"], &[]));
        assert_eq!(got.expect("read"), vec!["data/a.csv"]);
        fs_err::set_permissions(w.join("locked"), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
    }

    #[test]
    fn git_and_target_are_walked_only_when_a_pattern_names_them() {
        let t = tempfile::tempdir().expect("tempdir");
        let w = t.path();
        for f in [
            ".git/HEAD",
            "sub/.git/HEAD",
            "target/x",
            "sub/target/y",
            "a.txt",
        ] {
            fs_err::create_dir_all(w.join(f).parent().expect("parent")).expect("mkdir");
            fs_err::write(w.join(f), "x").expect("write");
        }
        let read = |allow: &[&str]| {
            read_listing(w, &policy_reading(allow, &[]))
                .0
                .expect("read")
        };
        // Admitted by `**`, but not named: never copied.
        assert_eq!(read(&["**"]), vec!["a.txt"]);
        assert_eq!(read(&["**/.git/**", "*/target/**"]), Vec::<String>::new());
        // Named from the root: copied, and only the folder named.
        assert_eq!(read(&["**", ".git/**"]), vec![".git/HEAD", "a.txt"]);
        assert_eq!(read(&[".git/HEAD"]), vec![".git/HEAD"]);
        assert_eq!(read(&["sub/target/**"]), vec!["sub/target/y"]);
        assert_eq!(read(&["./target"]), vec!["target/x"]);
        // A bare name is matched at any depth: it names no folder.
        assert_eq!(read(&["target"]), Vec::<String>::new());
        // allow.write names `target`, never `.git` (it is never written back).
        let write = |allow: &[&str]| {
            let p: Vec<FsPattern> = allow
                .iter()
                .map(|a| FsPattern::parse(a).expect("pattern"))
                .collect();
            (
                names_skipped(".git", &[], &p),
                names_skipped("target", &[], &p),
            )
        };
        assert_eq!(write(&[".git/**", "target/**"]), (false, true));
        assert!(!names_skipped(".git", &[], &[]));
        assert!(!names_skipped(
            ".gitx",
            &[FsPattern::parse(".git/**").expect("p")],
            &[]
        ));
    }
}
