//! What a run produced, read from outside after every process of the run is dead: captured
//! logs, the output document, written workspace files, insist results, and the final status.

use fs_err::OpenOptions;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;

use fs_err::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use band::policy::cli::CliPattern;
use band::policy::fs::{FsMatcher, FsPattern};
use band::policy::{Decision, Policy};
use band::proto::{CliCall, Denial, FileEntry, Status};
use base64::Engine;

use crate::layers::net::proxy::refusals::shorten;
use crate::request::DecodedFile;

/// One captured stream (stdout or stderr): kept up to `cap` bytes, the rest counted and dropped.
#[derive(Debug, Clone, Default)]
pub(crate) struct Capture {
    pub(crate) kept: Vec<u8>,
    pub(crate) dropped: u64,
    cap: u64,
    /// Bytes of an incomplete UTF-8 sequence held back from the last streamed chunk.
    carry: Vec<u8>,
}

impl Capture {
    pub(crate) fn new(cap: u64) -> Capture {
        Capture {
            cap,
            ..Capture::default()
        }
    }

    /// Keep what fits; return the text to stream now (complete UTF-8 characters only, invalid
    /// bytes replaced) and whether this chunk is the one that crossed the cap.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> (String, bool) {
        let room = self.cap.saturating_sub(self.kept.len() as u64) as usize;
        let take = room.min(chunk.len());
        let crossed = take < chunk.len() && self.dropped == 0;
        self.dropped += (chunk.len() - take) as u64;
        self.kept.extend_from_slice(&chunk[..take]);
        let mut pending = std::mem::take(&mut self.carry);
        pending.extend_from_slice(&chunk[..take]);
        let cut = utf8_complete_prefix(&pending);
        self.carry = pending.split_off(cut);
        if crossed {
            // Nothing more will come: flush the held-back bytes too.
            pending.append(&mut self.carry);
        }
        (String::from_utf8_lossy(&pending).into_owned(), crossed)
    }

    /// Whatever is still held back, at end of stream.
    pub(crate) fn finish(&mut self) -> String {
        String::from_utf8_lossy(&std::mem::take(&mut self.carry)).into_owned()
    }

    pub(crate) fn truncated(&self) -> bool {
        self.dropped > 0
    }

    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.kept).into_owned()
    }
}

/// Length of the longest prefix that does not end inside a UTF-8 sequence.
fn utf8_complete_prefix(b: &[u8]) -> usize {
    let n = b.len();
    for back in 1..=3.min(n) {
        let c = b[n - back];
        if c & 0b1100_0000 == 0b1000_0000 {
            continue; // continuation byte: keep looking for the lead byte
        }
        let need = if c & 0b1110_0000 == 0b1100_0000 {
            2
        } else if c & 0b1111_0000 == 0b1110_0000 {
            3
        } else if c & 0b1111_1000 == 0b1111_0000 {
            4
        } else {
            1
        };
        return if need > back { n - back } else { n };
    }
    n
}

/// The output document.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Output {
    None,
    Json(serde_json::Value, u64),
    TooLarge(u64),
    Unreadable(String),
}

/// Read `output.json` safely: `O_NOFOLLOW`, must be a regular file, size checked with `fstat`
/// before reading. `Ok(None)` when absent.
pub(crate) fn read_output_file(path: &Path, max: u64) -> Output {
    let f = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Output::None,
        Err(e) => return Output::Unreadable(format!("output.json: {e}")),
    };
    let meta = match f.metadata() {
        Ok(m) => m,
        Err(e) => return Output::Unreadable(format!("output.json: {e}")),
    };
    if !meta.file_type().is_file() {
        return Output::Unreadable("output.json is not a regular file".into());
    }
    if meta.len() > max {
        return Output::TooLarge(meta.len());
    }
    let mut buf = Vec::with_capacity(meta.len() as usize);
    if let Err(e) = f.take(max + 1).read_to_end(&mut buf) {
        return Output::Unreadable(format!("output.json: {e}"));
    }
    if buf.len() as u64 > max {
        return Output::TooLarge(buf.len() as u64);
    }
    let n = buf.len() as u64;
    match serde_json::from_slice(&buf) {
        Ok(v) => Output::Json(v, n),
        Err(_) => Output::Json(
            serde_json::Value::String(String::from_utf8_lossy(&buf).into_owned()),
            n,
        ),
    }
}

/// Stdout as the output when there is no output.json: JSON if it parses, else the string; nothing
/// if empty.
pub(crate) fn output_from_stdout(stdout: &Capture, max: u64) -> Output {
    let total = stdout.kept.len() as u64 + stdout.dropped;
    if total > max || stdout.truncated() {
        return Output::TooLarge(total);
    }
    let text = stdout.text();
    if text.trim().is_empty() {
        return Output::None;
    }
    match serde_json::from_str(&text) {
        Ok(v) => Output::Json(v, total),
        Err(_) => Output::Json(serde_json::Value::String(text), total),
    }
}

/// A regular file found in the workspace after the run, or an empty folder ([`FoundFile::folder`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FoundFile {
    /// Workspace-relative; a name that is not UTF-8 is escaped (`\xff`), see `utf8`.
    pub(crate) path: String,
    /// A folder that holds nothing (no entry at all), not a file: `mode` and `data` are empty.
    /// The write-back carries files, and with them the folders they are in; a folder the run
    /// made and left empty (a scaffolder's `mkdir -p project/{src,docs}`) would be lost
    /// without a word otherwise. Only the empty folders: one that holds anything is made on
    /// the way to what it holds.
    pub(crate) folder: bool,
    /// The path is the file's real name (every component UTF-8). A file whose name is not is
    /// never written back: it is a refused write, named escaped, so it never vanishes silently.
    pub(crate) utf8: bool,
    pub(crate) mode: u32,
    pub(crate) data: Vec<u8>,
    /// Not a file read: why. Where the walk stopped, over [`WalkLimits`] (standing for it and
    /// every entry after it), a folder nested past [`WalkLimits::depth`] (for everything in
    /// it), or an entry that could not be read back. Never written back; a refused write with
    /// this reason.
    pub(crate) refused: Option<String>,
}

/// Most entries (files, folders, links, anything) the walk of a run's workspace looks at.
/// Far above an honest run's, it bounds what band-server (root, outside the run's cgroup)
/// holds for a workspace of many small files or empty folders, whatever the disk limit lets
/// the run make (its tmpfs has an inode per KiB of `maxDiskBytes`). What is past it is one
/// refused write ([`FoundFile::refused`]), never dropped silently.
pub(crate) const MAX_WALK_ENTRIES: usize = 100_000;

/// Most bytes of workspace-relative paths the walk holds, every entry's path counted: 64 MiB.
/// A folder nested hundreds of levels deep makes each path under it tens of KiB long, which the
/// disk limit does not count (the names are in the folders, not in the files); this bounds
/// them, and the result's size, as [`MAX_WALK_ENTRIES`] bounds their number.
pub(crate) const MAX_WALK_PATH_BYTES: usize = 64 << 20;

/// Most folders nested in one another that the walk goes into: 256. The walk holds a
/// descriptor per level it is in, and the client writes a file back by its path (`PATH_MAX`,
/// 4096 bytes); a folder deeper is one refused write, for everything in it.
pub(crate) const MAX_WALK_DEPTH: usize = 256;

/// The longest path a refused write names where the walk stopped (cut, with its length said).
const MAX_REFUSED_PATH: usize = 1024;

/// What a walk of the workspace may take (parameters, so a test uses small ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WalkLimits {
    /// Bytes of file data read, in all: files past the budget are skipped (the disk limit
    /// keeps an honest run within it).
    pub(crate) data_bytes: u64,
    /// Entries looked at, in all ([`MAX_WALK_ENTRIES`]).
    pub(crate) entries: usize,
    /// Bytes of the entries' paths, summed ([`MAX_WALK_PATH_BYTES`]).
    pub(crate) path_bytes: usize,
    /// Folders nested in one another ([`MAX_WALK_DEPTH`]): `a/b` is 2 deep.
    pub(crate) depth: usize,
}

impl WalkLimits {
    /// The walk of a run's workspace: `data_bytes` of data (its disk limit), and the entry and
    /// path bounds.
    pub(crate) fn run(data_bytes: u64) -> WalkLimits {
        WalkLimits {
            data_bytes,
            entries: MAX_WALK_ENTRIES,
            path_bytes: MAX_WALK_PATH_BYTES,
            depth: MAX_WALK_DEPTH,
        }
    }
}

/// Walk `root` with [`WalkLimits::run`]`(max_total)`: see [`walk_workspace_within`].
pub(crate) fn walk_workspace(root: &Path, max_total: u64) -> Vec<FoundFile> {
    walk_workspace_within(root, WalkLimits::run(max_total))
}

/// Walk `root`, returning its regular files and its empty folders ([`FoundFile::folder`]: a
/// folder the walk listed that holds no entry at all), with at most `limits.data_bytes` bytes
/// read in all. Files past the budget are skipped. Names that are not UTF-8 are kept, escaped
/// (`utf8: false`). Past `limits.entries` entries or `limits.path_bytes` bytes of paths the walk
/// stops: the entry it stopped at is returned with [`FoundFile::refused`] saying why (a refused
/// write, for it and the rest), and nothing after it is read. A folder deeper than
/// `limits.depth`, and an entry the walk lists but cannot open or read, are returned refused
/// too: nothing the run left is dropped without a word.
///
/// The walk goes through directory descriptors, never through a path resolved again from
/// `root`: `root` is opened once with `O_NOFOLLOW`, and every folder and file below it is opened
/// relative to its parent's descriptor, one component at a time, with `openat2(RESOLVE_BENEATH |
/// RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)` (`openat(O_NOFOLLOW)` where the kernel has no
/// `openat2`). So even a process of the run that survived the kill and swaps a folder for a
/// symlink meanwhile cannot make band-server (root) read a file outside the workspace copy.
/// A file is read only if `fstat` on the opened descriptor says it is the regular file `lstat`
/// listed.
pub(crate) fn walk_workspace_within(root: &Path, limits: WalkLimits) -> Vec<FoundFile> {
    use rustix::fs::{AtFlags, FileType, Mode, OFlags};
    use std::sync::Arc;
    let mut out = Vec::new();
    let mut budget = limits.data_bytes;
    let (mut entries_seen, mut path_bytes) = (0usize, 0usize);
    let Ok(root_fd) = rustix::fs::open(
        root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return out;
    };
    let unread = |path: &str, utf8: bool, why: String| FoundFile {
        path: shorten(path, MAX_REFUSED_PATH),
        folder: false,
        utf8,
        mode: 0,
        data: Vec::new(),
        refused: Some(why),
    };
    // Folders still to walk: their parent's descriptor, their name there, their relative path,
    // how deep they are. (Opened when popped, so at most one descriptor per level of nesting is
    // held, and there are at most `limits.depth` levels.)
    type Pending = (
        Arc<rustix::fd::OwnedFd>,
        Option<std::ffi::CString>,
        String,
        bool,
        usize,
    );
    let mut stack: Vec<Pending> = vec![(Arc::new(root_fd), None, String::new(), true, 0)];
    'walk: while let Some((parent, name, rel, rel_utf8, depth)) = stack.pop() {
        let dir = match name {
            None => parent,
            Some(name) => match open_beneath(&parent, &name, OFlags::RDONLY | OFlags::DIRECTORY) {
                Ok(fd) => Arc::new(fd),
                Err(e) => {
                    out.push(unread(&rel, rel_utf8, unreadable_folder(e)));
                    continue;
                }
            },
        };
        let entries = match rustix::fs::Dir::read_from(&*dir) {
            Ok(entries) => entries,
            Err(e) => {
                out.push(unread(&rel, rel_utf8, unreadable_folder(e)));
                continue;
            }
        };
        // At most one name more than the walk may still take: a folder of a million names is
        // never held whole (the one more is where the walk stops).
        let room = limits.entries.saturating_sub(entries_seen);
        let mut listed_whole = true;
        let mut names: Vec<std::ffi::CString> = entries
            .filter_map(|e| e.map_err(|_| listed_whole = false).ok())
            .map(|e| e.file_name().to_owned())
            .filter(|n| !matches!(n.to_bytes(), b"." | b".."))
            .take(room.saturating_add(1))
            .collect();
        names.sort();
        // A folder listed whole that holds nothing: an entry of its own (it was counted as one
        // in its parent's listing). Never the workspace itself.
        if names.is_empty() && listed_whole && !rel.is_empty() {
            out.push(FoundFile {
                path: rel.clone(),
                folder: true,
                utf8: rel_utf8,
                mode: 0,
                data: Vec::new(),
                refused: None,
            });
        }
        for name in names {
            let (text, utf8) = match name.to_str() {
                Ok(t) => (t.to_string(), rel_utf8),
                Err(_) => (name.to_bytes().escape_ascii().to_string(), false),
            };
            let child = if rel.is_empty() {
                text
            } else {
                format!("{rel}/{text}")
            };
            entries_seen += 1;
            path_bytes = path_bytes.saturating_add(child.len());
            if let Some(why) = over_walk_limits(&limits, entries_seen, path_bytes) {
                out.push(unread(&child, utf8, why));
                break 'walk;
            }
            let Ok(meta) = rustix::fs::statat(&*dir, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW)
            else {
                continue;
            };
            match FileType::from_raw_mode(meta.st_mode) {
                FileType::Directory if depth >= limits.depth => out.push(unread(
                    &child,
                    utf8,
                    format!(
                        "more than {} folders deep: the walk of the workspace did not go in, and nothing in this folder was written back",
                        limits.depth
                    ),
                )),
                FileType::Directory => {
                    stack.push((Arc::clone(&dir), Some(name), child, utf8, depth + 1));
                }
                FileType::RegularFile
                    if u64::try_from(meta.st_size).unwrap_or(u64::MAX) <= budget =>
                {
                    let fd = match open_beneath(&dir, &name, OFlags::RDONLY | OFlags::NONBLOCK) {
                        Ok(fd) => fd,
                        Err(e) => {
                            out.push(unread(&child, utf8, unreadable_file(e)));
                            continue;
                        }
                    };
                    let same = rustix::fs::fstat(&fd).is_ok_and(|m2| {
                        FileType::from_raw_mode(m2.st_mode) == FileType::RegularFile
                            && m2.st_ino == meta.st_ino
                            && m2.st_dev == meta.st_dev
                    });
                    if !same {
                        out.push(unread(
                            &child,
                            utf8,
                            "replaced while the workspace was read back: not written back".into(),
                        ));
                        continue;
                    }
                    let mut data = Vec::new();
                    if let Err(e) = std::fs::File::from(fd).take(budget).read_to_end(&mut data) {
                        out.push(unread(&child, utf8, unreadable_file(e)));
                        continue;
                    }
                    budget -= data.len() as u64;
                    out.push(FoundFile {
                        path: child,
                        folder: false,
                        utf8,
                        // st_mode is u16 on some platforms.
                        #[allow(clippy::unnecessary_cast)]
                        mode: (meta.st_mode & 0o777) as u32,
                        data,
                        refused: None,
                    });
                }
                _ => {}
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// Why a folder the walk listed is not walked.
fn unreadable_folder(e: impl std::fmt::Display) -> String {
    format!("could not be opened to be read back ({e}): nothing in this folder was written back")
}

/// Why a file the walk listed is not read.
fn unreadable_file(e: impl std::fmt::Display) -> String {
    format!("could not be read back ({e}): not written back")
}

/// Why the walk stops at an entry, having looked at `entries` entries with `path_bytes` bytes
/// of paths in all, if it does.
fn over_walk_limits(limits: &WalkLimits, entries: usize, path_bytes: usize) -> Option<String> {
    let tail = "the walk of the workspace stopped here, and this and every entry after it were not written back";
    if entries > limits.entries {
        Some(format!(
            "over the {} files and folders a run may leave in its workspace: {tail}",
            limits.entries
        ))
    } else if path_bytes > limits.path_bytes {
        Some(format!(
            "over the {} bytes of paths a run may leave in its workspace: {tail}",
            limits.path_bytes
        ))
    } else {
        None
    }
}

/// Open the single component `name` beneath `dir`, never following a symlink, a magic link or
/// `..`: `openat2` where the kernel has it, else `openat(O_NOFOLLOW)` (the same for one
/// checked component).
fn open_beneath(
    dir: &rustix::fd::OwnedFd,
    name: &std::ffi::CStr,
    flags: rustix::fs::OFlags,
) -> rustix::io::Result<rustix::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    use rustix::io::Errno;
    let bytes = name.to_bytes();
    if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') {
        return Err(Errno::INVAL);
    }
    let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY;
    match rustix::fs::openat2(
        dir,
        name,
        flags,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    ) {
        Err(Errno::NOSYS | Errno::PERM) => rustix::fs::openat(dir, name, flags, Mode::empty()),
        other => other,
    }
}

/// The folders the run's copy of the workspace had before the script started, from the request
/// alone ([`changed_files`] reports an empty folder only when the run made it): every folder on
/// the way to a file of the request, and the folders band makes for `allow.write` with those
/// above them. Those are the request's `workspace_folders` (the folders on the way to each
/// write folder that the workspace has; band-server makes the deepest of them, and a write
/// folder only when the workspace has it), or, from a client that does not say
/// (`workspace_folders: None`), every write folder of the band (`write_dirs`), all of which
/// band-server then makes. Pure: no walk of the copy before the script, and so no second limit
/// on it. It may name a folder the copy lacks (a `workspace_folders` entry inside a write
/// folder band made whole) but only one the workspace has: not reporting the run's making of
/// it loses nothing.
pub(crate) fn folders_before(
    files: &[DecodedFile],
    workspace_folders: Option<&[String]>,
    write_dirs: &[String],
) -> BTreeSet<String> {
    let made = workspace_folders.unwrap_or(write_dirs);
    let mut before = BTreeSet::new();
    let parents = files
        .iter()
        .filter_map(|f| f.path.rsplit_once('/').map(|(d, _)| d));
    for d in parents.chain(made.iter().map(String::as_str)) {
        let mut at = Some(d);
        // Each folder and those above it, stopping at one already in (so are its parents).
        while let Some(d) = at.filter(|d| !d.is_empty()) {
            if !before.insert(d.to_string()) {
                break;
            }
            at = d.rsplit_once('/').map(|(up, _)| up);
        }
    }
    before
}

/// Files that are new or changed compared with the request's workspace (and where the walk
/// stopped, if it did: see [`FoundFile::refused`]), and the empty folders the run made: those
/// not in `folders_before` ([`folders_before`]).
pub(crate) fn changed_files<'a>(
    found: &'a [FoundFile],
    original: &[DecodedFile],
    folders_before: &BTreeSet<String>,
) -> Vec<&'a FoundFile> {
    let before: BTreeMap<&str, &[u8]> = original
        .iter()
        .map(|f| (f.path.as_str(), f.data.as_slice()))
        .collect();
    found
        .iter()
        .filter(|f| match f.folder {
            true => !f.utf8 || !folders_before.contains(&f.path),
            false => {
                !f.utf8
                    || f.refused.is_some()
                    || before.get(f.path.as_str()) != Some(&f.data.as_slice())
            }
        })
        .collect()
}

/// A changed file that is never written back, whatever the band says: a name that is not
/// UTF-8 (no pattern can name it, and the protocol carries text), or anything under a folder
/// named `.git` (a repository is read-only to the script), or where the walk stopped.
fn never_written_back(f: &FoundFile) -> bool {
    !f.utf8 || f.refused.is_some() || f.path.split('/').any(|c| c == ".git")
}

/// `result.written`: changed files allowed by `allow.write` and not denied.
pub(crate) fn written_entries(changed: &[&FoundFile], write: &FsMatcher) -> Vec<FileEntry> {
    changed
        .iter()
        .filter(|f| !f.folder && !never_written_back(f) && write.check(&f.path).is_allowed())
        .map(|f| FileEntry {
            path: f.path.clone(),
            mode: f.mode,
            data: base64::engine::general_purpose::STANDARD.encode(&f.data),
        })
        .collect()
}

/// `result.written_folders`: the empty folders the run made ([`changed_files`]) that
/// `allow.write` admits ([`FsMatcher::check_folder`]), and not denied; never one under `.git`.
pub(crate) fn written_folders(changed: &[&FoundFile], write: &FsMatcher) -> Vec<String> {
    changed
        .iter()
        .filter(|f| f.folder && !never_written_back(f) && write.check_folder(&f.path).is_allowed())
        .map(|f| f.path.clone())
        .collect()
}

/// The refused writes: changed files and made folders that `allow.write` does not admit (or a
/// `deny.write` rule covers), and those never written back at all. They are not copied back,
/// and each is reported, so a write never vanishes silently. A folder is named with a trailing
/// `/` (`stray/`). Where the walk stopped over its limits is one refused write saying so, for
/// every entry the walk did not reach.
pub(crate) fn write_denials(changed: &[&FoundFile], write: &FsMatcher) -> Vec<Denial> {
    changed
        .iter()
        .filter_map(|f| {
            let path = match f.folder {
                true => format!("{}/", f.path),
                false => f.path.clone(),
            };
            let decision = match f.folder {
                true => write.check_folder(&f.path),
                false => write.check(&f.path),
            };
            match decision {
                _ if f.refused.is_some() => Some(Denial::Write {
                    path,
                    rule: None,
                    reason: f.refused.clone(),
                }),
                _ if never_written_back(f) => Some(Denial::Write {
                    path,
                    rule: None,
                    reason: None,
                }),
                Decision::Allow { .. } => None,
                Decision::Deny { rule } => Some(Denial::Write {
                    path,
                    rule: Some(rule),
                    reason: None,
                }),
                Decision::Default => Some(Denial::Write {
                    path,
                    rule: None,
                    reason: None,
                }),
            }
        })
        .collect()
}

/// Workspace-relative form of a CLI argument that names a path, if it does.
/// `/workspace/a/b` → `a/b`; `a/b` → `a/b` (the script's cwd is `/workspace`); `./a` → `a`;
/// absolute paths outside the workspace stay absolute; flags and URLs are not paths.
pub(crate) fn arg_as_path(arg: &str) -> Option<String> {
    if arg.is_empty() || arg.starts_with('-') || arg.contains("://") {
        return None;
    }
    if let Some(rest) = arg.strip_prefix("/workspace/") {
        return Some(rest.to_string());
    }
    Some(arg.strip_prefix("./").unwrap_or(arg).to_string())
}

/// The `insist` items the run did not satisfy, as `"<category>: <pattern>"`.
///
/// - `cli`: some allowed reported call matches the pattern.
/// - `read`: some allowed reported call has an argument that is a path matching the pattern. Shell
///   builtins and redirections (`< file`) are not seen: they never go through the shim.
/// - `write`: some workspace file matching the pattern was created or changed (a folder made
///   empty is not a file written).
/// - `net`: refused at setup, never reaches here.
pub(crate) fn insist_missing(
    policy: &Policy,
    calls: &[CliCall],
    changed: &[&FoundFile],
) -> Vec<String> {
    let mut missing = Vec::new();
    for p in &policy.insist.cli {
        let ok = CliPattern::parse(p)
            .map(|pat| calls.iter().any(|c| c.allowed && pat.matches(&c.argv)))
            .unwrap_or(false);
        if !ok {
            missing.push(format!("cli: {p}"));
        }
    }
    for p in &policy.insist.read {
        let ok = FsPattern::parse(p)
            .map(|pat| {
                calls.iter().filter(|c| c.allowed).any(|c| {
                    c.argv
                        .iter()
                        .skip(1)
                        .filter_map(|a| arg_as_path(a))
                        .any(|a| pat.matches(&a))
                })
            })
            .unwrap_or(false);
        if !ok {
            missing.push(format!("read: {p}"));
        }
    }
    for p in &policy.insist.write {
        let ok = FsPattern::parse(p)
            .map(|pat| {
                changed
                    .iter()
                    .any(|f| !f.folder && f.refused.is_none() && pat.matches(&f.path))
            })
            .unwrap_or(false);
        if !ok {
            missing.push(format!("write: {p}"));
        }
    }
    // insist.net is decided by the network layer (`net::insist_missing`), from the kernel's sets.
    missing
}

/// Everything the status depends on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Facts {
    pub(crate) exit_code: Option<i32>,
    pub(crate) timed_out: bool,
    pub(crate) oom_kills: u64,
    pub(crate) pids_max_hits: u64,
    pub(crate) output_too_large: bool,
    pub(crate) denials: usize,
    pub(crate) insist_missing: usize,
}

/// The status of a run that started. Order: resource kills first (a fork bomb usually also times
/// out; the pids limit is the cause), then output size, then the script's own verdict, then
/// insist.
pub(crate) fn status(f: &Facts) -> Status {
    if f.pids_max_hits > 0 {
        Status::PidsLimit
    } else if f.oom_kills > 0 {
        Status::MemoryLimit
    } else if f.timed_out {
        Status::Timeout
    } else if f.output_too_large {
        Status::OutputTooLarge
    } else if f.exit_code != Some(0) {
        if f.denials > 0 {
            Status::Denied
        } else {
            Status::ScriptFailed
        }
    } else if f.insist_missing > 0 {
        Status::InsistUnsatisfied
    } else {
        Status::Ok
    }
}

#[cfg(test)]
mod tests {
    use fs_err as fs;
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn changed_files_outside_allow_write_are_refused_writes_naming_the_deciding_rule() {
        let file = |p: &str| FoundFile {
            path: p.into(),
            folder: false,
            utf8: true,
            mode: 0o644,
            data: b"x".to_vec(),
            refused: None,
        };
        let found = [
            file("out/a.md"),
            file("out/a.txt"),
            file("out/.env"),
            file("b"),
        ];
        let changed: Vec<&FoundFile> = found.iter().collect();
        let write = FsMatcher::new(&["out/*.md".into(), "out/.env".into()], &["**/.env".into()])
            .unwrap_or_else(|e| panic!("{e:?}"));
        let got = write_denials(&changed, &write);
        assert_eq!(
            got,
            vec![
                Denial::Write {
                    path: "out/a.txt".into(),
                    rule: None,
                    reason: None
                },
                Denial::Write {
                    path: "out/.env".into(),
                    rule: Some("**/.env".into()),
                    reason: None
                },
                Denial::Write {
                    path: "b".into(),
                    rule: None,
                    reason: None
                },
            ]
        );
        assert_eq!(
            written_entries(&changed, &write)
                .iter()
                .map(|f| f.path.as_str())
                .collect::<Vec<_>>(),
            ["out/a.md"]
        );
        assert_eq!(
            got[0].explain(),
            "no allow.write rule matches; to allow it: allow.write \"out/a.txt\""
        );
        assert_eq!(
            got[2].smallest_rule(),
            Some(("allow.write", "./b".to_string()))
        );
    }

    #[test]
    fn git_and_names_that_are_not_utf8_are_never_written_back_and_always_reported() {
        use std::os::unix::ffi::OsStrExt;
        let t = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let r = t.path();
        fs::create_dir_all(r.join(".git")).unwrap_or_else(|e| panic!("{e}"));
        fs::create_dir_all(r.join("out")).unwrap_or_else(|e| panic!("{e}"));
        fs::write(r.join(".git/config"), "x").unwrap_or_else(|e| panic!("{e}"));
        fs::write(r.join("out/ok.txt"), "x").unwrap_or_else(|e| panic!("{e}"));
        let bad = std::ffi::OsStr::from_bytes(b"out/\xff.txt");
        fs::write(r.join(bad), "x").unwrap_or_else(|e| panic!("{e}"));
        let found = walk_workspace(r, 1 << 20);
        let paths: Vec<(&str, bool)> = found.iter().map(|f| (f.path.as_str(), f.utf8)).collect();
        assert_eq!(
            paths,
            [
                (".git/config", true),
                ("out/\\xff.txt", false),
                ("out/ok.txt", true)
            ]
        );
        let changed = changed_files(&found, &[], &BTreeSet::new());
        let write = FsMatcher::new(&["**".into()], &[]).unwrap_or_else(|e| panic!("{e:?}"));
        let written: Vec<String> = written_entries(&changed, &write)
            .into_iter()
            .map(|f| f.path)
            .collect();
        assert_eq!(written, ["out/ok.txt"]);
        let denied = write_denials(&changed, &write);
        let said: Vec<String> = denied.iter().map(Denial::explain).collect();
        assert_eq!(
            said,
            [
                "nothing under `.git` is written back: a repository is read-only to the script",
                "a file name that is not UTF-8 is never written back (shown escaped): rename it",
            ]
        );
    }

    /// A request's files and write folders, for the tests of the folders a run made.
    fn request_file(path: &str) -> DecodedFile {
        DecodedFile {
            path: path.into(),
            mode: 0o644,
            data: b"x".to_vec(),
        }
    }

    /// A scaffolder whose whole result is empty folders (spark-video's `episode --init`): each
    /// folder it made and left empty is written back where `allow.write` admits it, and is a
    /// refused write, named `stray/`, where it does not; a folder of the request left empty is
    /// not the run's, and a folder holding a file comes back with its file, not as a folder.
    /// (Before, the write-back carried files only, and the folders vanished without a word.)
    #[test]
    fn the_empty_folders_a_run_made_are_written_back_or_refused_never_dropped() {
        let t = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let r = t.path();
        for d in [
            "projects/demo/episode-01/audio",
            "projects/demo/episode-01/video",
            "projects/demo/episode-02",
            "projects/kept/empty",
            "projects/.git/hooks",
            "projects/secret",
            "data/in",
            "out",
            "stray/deeper",
        ] {
            fs::create_dir_all(r.join(d)).unwrap_or_else(|e| panic!("{e}"));
        }
        fs::write(r.join("projects/demo/episode-02/notes.md"), "n")
            .unwrap_or_else(|e| panic!("{e}"));
        fs::write(r.join("data/in/a.csv"), "x").unwrap_or_else(|e| panic!("{e}"));
        let request = [request_file("data/in/a.csv"), request_file("data/in/b.csv")];
        // `out` is a write folder band made (the workspace has it); `projects/kept/empty` is on
        // the way to another the workspace has.
        let has = ["out".to_string(), "projects/kept/empty".to_string()];
        let before = folders_before(&request, Some(&has), &[]);
        assert_eq!(
            before.iter().map(String::as_str).collect::<Vec<_>>(),
            [
                "data",
                "data/in",
                "out",
                "projects",
                "projects/kept",
                "projects/kept/empty"
            ]
        );
        let found = walk_workspace(r, 1 << 20);
        let folders: Vec<&str> = found
            .iter()
            .filter(|f| f.folder)
            .map(|f| f.path.as_str())
            .collect();
        assert_eq!(
            folders,
            [
                "out",
                "projects/.git/hooks",
                "projects/demo/episode-01/audio",
                "projects/demo/episode-01/video",
                "projects/kept/empty",
                "projects/secret",
                "stray/deeper",
            ]
        );
        let changed = changed_files(&found, &request, &before);
        let write = FsMatcher::new(&["projects/**".into()], &["projects/secret".into()])
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(
            written_folders(&changed, &write),
            [
                "projects/demo/episode-01/audio",
                "projects/demo/episode-01/video",
            ]
        );
        // The file is written, not its folder.
        assert_eq!(
            written_entries(&changed, &write)
                .iter()
                .map(|f| f.path.as_str())
                .collect::<Vec<_>>(),
            ["projects/demo/episode-02/notes.md"]
        );
        let denied = write_denials(&changed, &write);
        assert_eq!(
            denied,
            [
                Denial::Write {
                    path: "projects/.git/hooks/".into(),
                    rule: None,
                    reason: None
                },
                Denial::Write {
                    path: "projects/secret/".into(),
                    rule: Some("projects/secret".into()),
                    reason: None
                },
                Denial::Write {
                    path: "stray/deeper/".into(),
                    rule: None,
                    reason: None
                },
            ]
        );
        assert_eq!(
            denied.iter().map(Denial::explain).collect::<Vec<_>>(),
            [
                "nothing under `.git` is written back: a repository is read-only to the script",
                "deny.write \"projects/secret\" decided (a deny wins over any allow)",
                "no allow.write rule matches; to allow it: allow.write \"stray/deeper/\"",
            ]
        );
        // An empty folder does not meet `insist.write`: it asks for a file written.
        let policy = Policy {
            insist: band::policy::RuleSet {
                write: vec!["projects/**".into(), "projects/demo/**/*.md".into()],
                ..Default::default()
            },
            ..Default::default()
        };
        let only_folders: Vec<&FoundFile> = changed.iter().copied().filter(|f| f.folder).collect();
        assert_eq!(
            insist_missing(&policy, &[], &only_folders),
            ["write: projects/**", "write: projects/demo/**/*.md"]
        );
        assert!(insist_missing(&policy, &[], &changed).is_empty());
    }

    /// `allow.write "state/**"` admits what is in `state`, and the folder `state` itself when the
    /// run makes it and leaves it empty (`mkdir -p state`): it comes back, and is no refused write
    /// (sixth wild trial: a run that made it ended `denied`, exit 5, whatever else failed). The
    /// folders on the way to `a/b/*.md` come back too; one beside them is still refused.
    #[test]
    fn the_folder_a_write_rule_opens_is_admitted_when_the_run_makes_it() {
        let t = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let r = t.path();
        for d in ["state", "a/b", "elsewhere"] {
            fs::create_dir_all(r.join(d)).unwrap_or_else(|e| panic!("{e}"));
        }
        let found = walk_workspace(r, 1 << 20);
        let changed = changed_files(&found, &[], &BTreeSet::new());
        let write = FsMatcher::new(&["state/**".into(), "a/b/*.md".into()], &[])
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(written_folders(&changed, &write), ["a/b", "state"]);
        assert_eq!(
            write_denials(&changed, &write),
            [Denial::Write {
                path: "elsewhere/".into(),
                rule: None,
                reason: None
            }]
        );
    }

    /// From a client that does not say which folders the workspace has, band-server makes every
    /// write folder in the copy: each is the request's, not the run's.
    #[test]
    fn without_workspace_folders_every_write_folder_was_the_request_s() {
        let dirs = ["out/reports".to_string(), String::new()];
        let before = folders_before(&[request_file("a/b/c.txt")], None, &dirs);
        assert_eq!(
            before.iter().map(String::as_str).collect::<Vec<_>>(),
            ["a", "a/b", "out", "out/reports"]
        );
        // `workspace_folders` says which, when there: the band's write folders are not taken.
        let before = folders_before(&[], Some(&[]), &dirs);
        assert!(before.is_empty(), "{before:?}");
    }

    /// Every folder the plan makes in the workspace copy for a request is one
    /// [`folders_before`] names: an empty one the run left is never taken for the run's.
    #[test]
    fn folders_before_covers_every_folder_the_plan_makes_in_the_copy() {
        use crate::layers::fs::workdir::{FsOp, RequestFiles, plan_request};
        let files = [request_file("docs/a/b.md"), request_file("top.txt")];
        let dirs: Vec<String> = [
            "",
            "docs/new",
            "my-package",
            "new/a",
            "out",
            "out/reports",
            "x/y/z",
        ]
        .iter()
        .map(|d| d.to_string())
        .collect();
        let has = [
            "docs".to_string(),
            "out".to_string(),
            "x".to_string(),
            "x/y".to_string(),
        ];
        let state = Path::new("/run/band");
        let allowed = |_: &str| true;
        for folders in [Some(&has[..]), None] {
            let plan = plan_request(&RequestFiles {
                state,
                run_id: "0123456789abcdef",
                uid: 900,
                gid: 900,
                workspace: &files,
                write_allowed: &allowed,
                write_dirs: &dirs,
                workspace_folders: folders,
                input_json: b"{}",
            });
            let ws = state.join("runs/0123456789abcdef/workspace");
            let made: BTreeSet<String> = plan
                .request
                .iter()
                .filter_map(|op| match op {
                    FsOp::Mkdir { path, .. } => path.strip_prefix(&ws).ok(),
                    _ => None,
                })
                .filter_map(|rel| rel.to_str())
                .filter(|rel| !rel.is_empty())
                .map(String::from)
                .collect();
            assert!(!made.is_empty());
            let before = folders_before(&files, folders, &dirs);
            let missed: Vec<&String> = made.difference(&before).collect();
            assert!(missed.is_empty(), "{folders:?}: {missed:?}");
        }
    }

    #[test]
    fn capture_keeps_up_to_the_cap_and_reports_crossing_once() {
        let mut c = Capture::new(5);
        assert_eq!(c.push(b"abc"), ("abc".to_string(), false));
        assert_eq!(c.push(b"defg"), ("de".to_string(), true));
        assert_eq!(c.push(b"hij"), (String::new(), false));
        assert_eq!(c.text(), "abcde");
        assert_eq!(c.dropped, 5);
        assert!(c.truncated());
    }

    #[test]
    fn capture_never_splits_a_character() {
        let mut c = Capture::new(100);
        let s = "é€😀".as_bytes();
        let (a, _) = c.push(&s[..1]);
        let (b, _) = c.push(&s[1..4]);
        let (d, _) = c.push(&s[4..8]);
        let (e, _) = c.push(&s[8..]);
        assert_eq!(
            (a.as_str(), b.as_str(), d.as_str(), e.as_str()),
            ("", "é", "€", "😀")
        );
        assert_eq!(c.finish(), "");
        let mut c = Capture::new(100);
        let _ = c.push(&s[..1]);
        assert_eq!(c.finish(), "\u{fffd}");
    }

    #[test]
    fn stdout_as_output() {
        let mut c = Capture::new(100);
        c.push(b"{\"n\": 1}\n");
        assert_eq!(
            output_from_stdout(&c, 100),
            Output::Json(serde_json::json!({"n": 1}), 9)
        );
        let mut c = Capture::new(100);
        c.push(b"hello\n");
        assert_eq!(
            output_from_stdout(&c, 100),
            Output::Json(serde_json::json!("hello\n"), 6)
        );
        assert_eq!(output_from_stdout(&Capture::new(100), 100), Output::None);
        let mut c = Capture::new(4);
        c.push(b"123456");
        assert_eq!(output_from_stdout(&c, 100), Output::TooLarge(6));
        let mut c = Capture::new(100);
        c.push(b"123456");
        assert_eq!(output_from_stdout(&c, 5), Output::TooLarge(6));
    }

    #[test]
    fn output_file_checks() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = dir.path().join("output.json");
        assert_eq!(read_output_file(&p, 10), Output::None);
        fs::write(&p, b"[1,2]").unwrap_or_default();
        assert_eq!(
            read_output_file(&p, 10),
            Output::Json(serde_json::json!([1, 2]), 5)
        );
        assert_eq!(read_output_file(&p, 4), Output::TooLarge(5));
        fs::remove_file(&p).unwrap_or_default();
        fs_err::os::unix::fs::symlink("/etc/passwd", &p).unwrap_or_default();
        assert!(matches!(
            read_output_file(&p, 1 << 20),
            Output::Unreadable(_)
        ));
        fs::remove_file(&p).unwrap_or_default();
        fs::create_dir(&p).unwrap_or_default();
        assert!(matches!(read_output_file(&p, 10), Output::Unreadable(_)));
    }

    #[test]
    fn workspace_walk_skips_symlinks_and_respects_the_budget() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let r = dir.path();
        fs::create_dir_all(r.join("a/b")).unwrap_or_default();
        fs::write(r.join("a/b/x.txt"), b"xx").unwrap_or_default();
        fs::write(r.join("top.txt"), b"t").unwrap_or_default();
        fs::write(r.join("big.bin"), vec![0u8; 100]).unwrap_or_default();
        fs_err::os::unix::fs::symlink("/etc/passwd", r.join("link")).unwrap_or_default();
        fs_err::os::unix::fs::symlink("/etc", r.join("dirlink")).unwrap_or_default();
        let got: Vec<String> = walk_workspace(r, 10).into_iter().map(|f| f.path).collect();
        assert_eq!(got, vec!["a/b/x.txt", "top.txt"]);
        let before = vec![DecodedFile {
            path: "top.txt".into(),
            mode: 0o644,
            data: b"t".to_vec(),
        }];
        let found = walk_workspace(r, 1000);
        let changed: Vec<&str> = changed_files(&found, &before, &BTreeSet::new())
            .iter()
            .map(|f| f.path.as_str())
            .collect();
        assert_eq!(changed, vec!["a/b/x.txt", "big.bin"]);
    }

    #[test]
    fn workspace_walk_skips_nested_links_and_fifos() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let r = dir.path();
        fs::create_dir_all(r.join("a/b")).unwrap_or_default();
        fs::write(r.join("a/b/x.txt"), b"x").unwrap_or_default();
        fs_err::os::unix::fs::symlink("/etc", r.join("a/dirlink")).unwrap_or_default();
        fs_err::os::unix::fs::symlink("/etc/passwd", r.join("a/b/link")).unwrap_or_default();
        fs_err::os::unix::fs::symlink("../../../", r.join("a/b/up")).unwrap_or_default();
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            r.join("a/fifo"),
            rustix::fs::Mode::from_raw_mode(0o644),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let got: Vec<String> = walk_workspace(r, 1000)
            .into_iter()
            .map(|f| f.path)
            .collect();
        assert_eq!(got, vec!["a/b/x.txt"]);
    }

    /// A process of the run that outlived the kill swaps `d/` with a symlink to a folder outside
    /// the workspace while band-server walks it: the walk never returns a file from outside.
    /// (The path-based walk it replaced read through the link: lstat, then open by full path.)
    #[test]
    fn workspace_walk_never_follows_a_folder_swapped_for_a_link() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (ws, outside) = (dir.path().join("ws"), dir.path().join("outside"));
        fs::create_dir_all(ws.join("d")).unwrap_or_else(|e| panic!("{e}"));
        fs::create_dir_all(&outside).unwrap_or_else(|e| panic!("{e}"));
        for i in 0..20 {
            fs::write(ws.join(format!("d/f{i:02}")), b"inside").unwrap_or_else(|e| panic!("{e}"));
            fs::write(outside.join(format!("f{i:02}")), b"OUTSIDE")
                .unwrap_or_else(|e| panic!("{e:?}"));
        }
        fs_err::os::unix::fs::symlink(&outside, ws.join("swap")).unwrap_or_else(|e| panic!("{e}"));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let swapper = {
            let (stop, ws) = (std::sync::Arc::clone(&stop), ws.clone());
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    rustix::fs::renameat_with(
                        rustix::fs::CWD,
                        ws.join("d"),
                        rustix::fs::CWD,
                        ws.join("swap"),
                        rustix::fs::RenameFlags::EXCHANGE,
                    )
                    .unwrap_or_else(|e| panic!("{e:?}"));
                }
            })
        };
        let (mut leaked, mut seen) = (Vec::new(), 0);
        let started = std::time::Instant::now();
        for _ in 0..2000 {
            if started.elapsed() > std::time::Duration::from_secs(10) {
                break;
            }
            for f in walk_workspace(&ws, 1 << 20) {
                seen += 1;
                if f.data == b"OUTSIDE" {
                    leaked.push(f.path);
                }
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        swapper.join().unwrap_or_else(|_| panic!("swapper"));
        assert!(leaked.is_empty(), "read through the link: {leaked:?}");
        assert!(seen > 0, "the walk never saw d/");
    }

    /// A folder nested deeper than the walk goes is one refused write naming it, for
    /// everything in it; the rest of the workspace is read back as usual.
    #[test]
    fn a_folder_nested_past_the_walk_depth_is_one_refused_write() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let r = dir.path();
        fs::create_dir_all(r.join("out/b/c/d/e")).unwrap_or_else(|e| panic!("{e}"));
        for f in ["out/x", "out/b/c/y", "out/b/c/d/z", "out/b/c/d/e/w"] {
            fs::write(r.join(f), b"x").unwrap_or_else(|e| panic!("{e}"));
        }
        let limits = WalkLimits {
            data_bytes: 1 << 20,
            entries: 1000,
            path_bytes: 1 << 20,
            depth: 3,
        };
        let found = walk_workspace_within(r, limits);
        let seen: Vec<(&str, Option<&str>)> = found
            .iter()
            .map(|f| (f.path.as_str(), f.refused.as_deref()))
            .collect();
        assert_eq!(
            seen,
            [
                (
                    "out/b/c/d",
                    Some(
                        "more than 3 folders deep: the walk of the workspace did not go in, and nothing in this folder was written back"
                    )
                ),
                ("out/b/c/y", None),
                ("out/x", None),
            ]
        );
        let write = FsMatcher::new(&["out/**".into()], &[]).unwrap_or_else(|e| panic!("{e:?}"));
        let changed = changed_files(&found, &[], &BTreeSet::new());
        let denied = write_denials(&changed, &write);
        assert_eq!(denied.len(), 1);
        assert_eq!(denied[0].smallest_rule(), None);
    }

    /// A script that leaves more entries, or longer paths, than a run may write back: the
    /// walk stops at its limits, what it read before is written back as usual, and the rest is
    /// one refused write saying why (the walk it replaced held every path, however many).
    #[test]
    fn the_walk_stops_at_its_entry_and_path_limits_and_the_rest_is_one_refused_write() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let r = dir.path();
        fs::create_dir_all(r.join("out")).unwrap_or_else(|e| panic!("{e}"));
        for i in 0..50 {
            fs::write(r.join(format!("out/f{i:02}")), b"x").unwrap_or_else(|e| panic!("{e}"));
        }
        let write = FsMatcher::new(&["out/**".into()], &[]).unwrap_or_else(|e| panic!("{e:?}"));
        let limits = WalkLimits {
            data_bytes: 1 << 20,
            entries: 5,
            path_bytes: 1 << 20,
            depth: MAX_WALK_DEPTH,
        };
        let found = walk_workspace_within(r, limits);
        // `out` and four files are the five entries; the sixth is where the walk stopped.
        // (Which four: the first the folder lists, never more than the walk may take.)
        let (stop, read): (Vec<&FoundFile>, Vec<&FoundFile>) =
            found.iter().partition(|f| f.refused.is_some());
        let read: Vec<String> = read.iter().map(|f| f.path.clone()).collect();
        assert_eq!(read.len(), 4, "{read:?}");
        assert!(read.iter().all(|p| p.starts_with("out/f")), "{read:?}");
        let [stop] = &stop[..] else {
            panic!("{found:?}");
        };
        assert!(stop.path.starts_with("out/f") && !read.contains(&stop.path));
        let changed = changed_files(&found, &[], &BTreeSet::new());
        let written: Vec<String> = written_entries(&changed, &write)
            .into_iter()
            .map(|f| f.path)
            .collect();
        assert_eq!(written, read);
        let denied = write_denials(&changed, &write);
        assert_eq!(
            denied.iter().map(Denial::explain).collect::<Vec<_>>(),
            [
                "over the 5 files and folders a run may leave in its workspace: the walk of the workspace stopped here, and this and every entry after it were not written back"
            ]
        );
        assert_eq!(denied[0].smallest_rule(), None);

        // Paths: a folder nested deep makes each path under it long.
        let deep = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut at = deep.path().join("out");
        for _ in 0..20 {
            at = at.join("dddddddddd");
        }
        fs::create_dir_all(&at).unwrap_or_else(|e| panic!("{e}"));
        fs::write(at.join("f"), b"x").unwrap_or_else(|e| panic!("{e}"));
        let limits = WalkLimits {
            data_bytes: 1 << 20,
            entries: 1000,
            path_bytes: 500,
            depth: MAX_WALK_DEPTH,
        };
        let found = walk_workspace_within(deep.path(), limits);
        let [stop] = &found[..] else {
            panic!("{found:?}");
        };
        // 3 bytes for `out`, 14 for `out/dddddddddd`, 11 more each level: 423 down to the
        // eighth, 525 with the ninth.
        assert_eq!(stop.path, format!("out{}", "/dddddddddd".repeat(9)));
        let changed = changed_files(&found, &[], &BTreeSet::new());
        assert!(written_entries(&changed, &write).is_empty());
        let denied = write_denials(&changed, &write);
        assert_eq!(
            denied.iter().map(Denial::explain).collect::<Vec<_>>(),
            [
                "over the 500 bytes of paths a run may leave in its workspace: the walk of the workspace stopped here, and this and every entry after it were not written back"
            ]
        );
        // Within the limits, the walk is what it was.
        let found = walk_workspace_within(deep.path(), WalkLimits::run(1 << 20));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].refused, None);
        assert!(found[0].path.ends_with("/dddddddddd/f"));
        // A file the request had is no match for where the walk stopped: still refused.
        let before = [DecodedFile {
            path: stop.path.clone(),
            mode: 0o644,
            data: Vec::new(),
        }];
        let found = walk_workspace_within(
            r,
            WalkLimits {
                entries: 5,
                ..limits
            },
        );
        assert_eq!(changed_files(&found, &before, &BTreeSet::new()).len(), 5);
    }

    #[test]
    fn args_as_paths() {
        assert_eq!(arg_as_path("/workspace/a/b.txt"), Some("a/b.txt".into()));
        assert_eq!(arg_as_path("./a"), Some("a".into()));
        assert_eq!(arg_as_path("data.csv"), Some("data.csv".into()));
        assert_eq!(arg_as_path("/etc/hosts"), Some("/etc/hosts".into()));
        assert_eq!(arg_as_path("-r"), None);
        assert_eq!(arg_as_path("https://x/y"), None);
    }

    #[test]
    fn status_order() {
        let ok = Facts {
            exit_code: Some(0),
            ..Facts::default()
        };
        assert_eq!(status(&ok), Status::Ok);
        assert_eq!(
            status(&Facts {
                exit_code: Some(1),
                ..ok
            }),
            Status::ScriptFailed
        );
        assert_eq!(
            status(&Facts {
                exit_code: Some(126),
                denials: 1,
                ..ok
            }),
            Status::Denied
        );
        assert_eq!(status(&Facts { denials: 1, ..ok }), Status::Ok);
        assert_eq!(
            status(&Facts {
                insist_missing: 1,
                ..ok
            }),
            Status::InsistUnsatisfied
        );
        assert_eq!(
            status(&Facts {
                exit_code: Some(1),
                insist_missing: 1,
                ..ok
            }),
            Status::ScriptFailed
        );
        assert_eq!(
            status(&Facts {
                output_too_large: true,
                ..ok
            }),
            Status::OutputTooLarge
        );
        assert_eq!(
            status(&Facts {
                exit_code: None,
                timed_out: true,
                ..ok
            }),
            Status::Timeout
        );
        assert_eq!(
            status(&Facts {
                exit_code: None,
                timed_out: true,
                pids_max_hits: 3,
                ..ok
            }),
            Status::PidsLimit
        );
        assert_eq!(
            status(&Facts {
                exit_code: Some(137),
                oom_kills: 1,
                ..ok
            }),
            Status::MemoryLimit
        );
        assert_eq!(
            status(&Facts {
                exit_code: Some(137),
                oom_kills: 1,
                pids_max_hits: 1,
                ..ok
            }),
            Status::PidsLimit
        );
    }
}
