//! `band.lock`: the fingerprint of a skill bundle, and the comparison that refuses a changed skill.
//!
//! A skill's tree is read once into a [`Tree`] (every regular file with its mode and bytes, every
//! symlink with its target). The same tree gives the request's bundle (so what was checked is
//! byte for byte what is sent), the bundle hash ([`crate::proto::bundle_digest`] over the regular
//! files, the value band-server re-checks) and the lock ([`Lock`]: one line per file plus that
//! bundle hash). The format is in `docs/lock-and-ledger.md`:
//!
//! ```text
//! # band.lock: the fingerprint of this skill. Written by `band lock`; checked before every run.
//! version 1
//! bundle 5f0c…   (64 hex: the run request's bundle_sha256)
//! file 0644 9a1e… "BAND.md"
//! file 0755 77b2… "scripts/count.sh"
//! link 0777 0c3d… "scripts/lib.sh" -> "../lib/common.sh"
//! ```
//!
//! Left out of the tree: `band.lock` and `band.lock.sig` at the skill root (the lock cannot hash
//! itself, nor its signature: [`crate::sign`]) and folders named
//! `.git` or `target`. Symlinks must stay inside the skill; special files are refused.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use std::io::Read as _;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt as _;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::proto;

/// The lock file, at the skill root.
pub const LOCK_FILE: &str = "band.lock";
/// The lock format version written by this build (the `version` line).
pub const LOCK_VERSION: u32 = 1;
/// The most a skill bundle may weigh (regular files, summed).
pub const MAX_BUNDLE_BYTES: u64 = 64 << 20;
/// Folders never taken into a bundle, at any depth.
pub const SKIPPED_DIRS: &[&str] = &[".git", "target"];

const HEADER: &str = "# band.lock: the fingerprint of this skill. Written by `band lock`; checked before every run.\n# Format: docs/lock-and-ledger.md. Do not edit; run `band lock` again after changing the skill.\n";

/// A path for a message: its control characters made inert ([`crate::diag::inert`]).
fn shown(path: &Path) -> String {
    crate::diag::inert(&path.to_string_lossy()).into_owned()
}

#[derive(Debug, Error)]
pub enum LockError {
    /// A file operation failed; the error (from fs_err) names the path.
    #[error(transparent)]
    Fs(std::io::Error),
    // A path of the skill is the skill author's text: inert wherever the message is shown.
    #[error(
        "{} is a symlink that points outside the skill (or nowhere)",
        shown(path)
    )]
    LinkOutside { path: PathBuf },
    #[error("{} is neither a file, a folder nor a symlink", shown(path))]
    Special { path: PathBuf },
    #[error(
        "{}: the name is not valid UTF-8 or holds a control character",
        shown(path)
    )]
    BadName { path: PathBuf },
    #[error("the skill at {root} is larger than {max} bytes")]
    TooLarge { root: PathBuf, max: u64 },
    #[error("{} changed while band read the skill", shown(path))]
    Changed { path: PathBuf },
    #[error("{path}:{line}: {message}")]
    Parse {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

impl LockError {
    /// What the user can do about it.
    pub fn hint(&self) -> &'static str {
        match self {
            LockError::Fs(_) => "check that the skill folder is readable",
            LockError::LinkOutside { .. } => {
                "copy the file into the skill instead of linking to it"
            }
            LockError::Special { .. } => "remove it from the skill",
            LockError::BadName { .. } => {
                "rename it: skill paths are UTF-8 without control characters"
            }
            LockError::TooLarge { .. } => "keep data out of the skill; pass it in the workspace",
            LockError::Changed { .. } => "run again once nothing else is changing the skill folder",
            LockError::Parse { .. } => {
                "run `band lock` to write a fresh band.lock (after checking the skill is what you expect)"
            }
        }
    }
}

/// What a tree entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    File,
    Link,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Link => "link",
        }
    }
}

/// One file or symlink of a skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Relative to the skill root, `/`-separated.
    pub path: String,
    pub kind: Kind,
    /// Permission bits (`& 0o7777`).
    pub mode: u32,
    /// A file's bytes, or a link's target.
    pub data: Vec<u8>,
}

/// A skill folder as read from disk, sorted by path (byte order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree {
    pub nodes: Vec<Node>,
}

impl Tree {
    /// Read every file and symlink under `root` (see the module docs for what is left out).
    pub fn read(root: &Path) -> Result<Tree, LockError> {
        let canon_root = fs_err::canonicalize(root).map_err(LockError::Fs)?;
        let mut nodes = Vec::new();
        let mut total = 0u64;
        let dir = rustix::fs::open(
            root,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| io_error("open", root, e))?;
        let walk = Walk {
            root,
            canon_root: &canon_root,
        };
        walk.dir(&dir, root, &mut nodes, &mut total)?;
        nodes.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(Tree { nodes })
    }

    /// The regular files, in path order.
    pub fn files(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(|n| n.kind == Kind::File)
    }

    /// The symlinks, in path order.
    pub fn links(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(|n| n.kind == Kind::Link)
    }

    /// `proto::bundle_digest` over the regular files: the request's `bundle_sha256`.
    pub fn bundle_sha256(&self) -> String {
        let files: Vec<(String, u32, Vec<u8>)> = self
            .files()
            .map(|n| (n.path.clone(), n.mode, n.data.clone()))
            .collect();
        proto::bundle_digest(&files)
    }

    /// The lock that describes this tree.
    pub fn lock(&self) -> Lock {
        Lock {
            bundle_sha256: self.bundle_sha256(),
            entries: self
                .nodes
                .iter()
                .map(|n| LockEntry {
                    path: n.path.clone(),
                    kind: n.kind,
                    mode: n.mode,
                    sha256: sha256_hex(&n.data),
                    target: (n.kind == Kind::Link)
                        .then(|| String::from_utf8_lossy(&n.data).into_owned()),
                })
                .collect(),
            deps: self.deps(),
        }
    }

    /// The packages each file declares (`band::deps`): a script's PEP 723 block, a
    /// `requirements.txt`, a `pyproject.toml` (with the packages of the `uv.lock` beside it), as
    /// the digest of the declared set, and a `package-lock.json`, as the
    /// digest of its bytes, by path. A declaration band cannot
    /// parse has no line (its run is refused, naming it; its bytes are locked by its `file`
    /// line).
    pub fn deps(&self) -> Vec<DepsEntry> {
        self.files()
            .filter_map(|n| {
                let text = std::str::from_utf8(&n.data).ok()?;
                let name = n.path.rsplit('/').next().unwrap_or(&n.path);
                if name == crate::deps::PACKAGE_LOCK {
                    // npm's lock is itself the resolved set: its digest is its bytes'.
                    return Some(DepsEntry {
                        path: n.path.clone(),
                        sha256: crate::deps::sha256_hex(&n.data),
                    });
                }
                let declared = if name == crate::deps::PYPROJECT {
                    // With the uv.lock beside it, the set is the lock's packages and hashes.
                    let lock_path = match n.path.rsplit_once('/') {
                        Some((dir, _)) => format!("{dir}/{}", crate::deps::UV_LOCK),
                        None => crate::deps::UV_LOCK.to_string(),
                    };
                    let lock = self.files().find(|f| f.path == lock_path);
                    crate::deps::pyproject(
                        &n.path,
                        &n.data,
                        lock.map(|l| (lock_path.as_str(), l.data.as_slice())),
                    )
                    .ok()??
                } else if name == crate::deps::REQUIREMENTS {
                    crate::deps::Declared {
                        source: crate::deps::Source::Requirements {
                            path: n.path.clone(),
                        },
                        requires_python: None,
                        requirements: crate::deps::requirements(&n.path, text).ok()?,
                    }
                } else {
                    crate::deps::pep723(&n.path, text).ok()??
                };
                Some(DepsEntry {
                    path: n.path.clone(),
                    sha256: declared.digest(),
                })
            })
            .collect()
    }
}

/// A `deps` line of a lock: the digest of the packages a file declares
/// (`band::deps::Declared::digest`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DepsEntry {
    pub path: String,
    pub sha256: String,
}

/// A walk of a skill folder through descriptors: each entry is looked at (`statat`, never
/// following a link) and then opened beneath its folder's descriptor with `O_NOFOLLOW`, and the
/// opened file or folder must be the one looked at (its device and inode). A folder or file
/// swapped for a link (or for another file) while band reads the skill is an error
/// ([`LockError::Changed`]), never a read through the link: what the bundle holds, the lock
/// records and the run sees is inside the folder.
struct Walk<'a> {
    root: &'a Path,
    canon_root: &'a Path,
}

impl Walk<'_> {
    fn dir(
        &self,
        fd: &OwnedFd,
        dir: &Path,
        out: &mut Vec<Node>,
        total: &mut u64,
    ) -> Result<(), LockError> {
        let names = crate::skillfs::dir_entries(fd).map_err(|e| io_error("read", dir, e))?;
        for (name, _) in names {
            let p = dir.join(std::ffi::OsStr::from_bytes(name.to_bytes()));
            let st = rustix::fs::statat(fd, &name, AtFlags::SYMLINK_NOFOLLOW)
                .map_err(|e| io_error("stat", &p, e))?;
            let rel = rel_name(self.root, &p)?;
            let mode = u32::from(st.st_mode as u16) & 0o7777;
            let changed = || LockError::Changed { path: p.clone() };
            // Opened beneath `fd` without following a link, and the same file as `st`.
            let open = |flags: OFlags| -> Result<OwnedFd, LockError> {
                let opened = rustix::fs::openat(
                    fd,
                    &name,
                    flags | OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(|e| match e {
                    Errno::LOOP | Errno::NOTDIR | Errno::NOENT | Errno::NXIO => changed(),
                    e => io_error("open", &p, e),
                })?;
                let now = rustix::fs::fstat(&opened).map_err(|e| io_error("stat", &p, e))?;
                if (now.st_dev, now.st_ino, now.st_mode) != (st.st_dev, st.st_ino, st.st_mode) {
                    return Err(changed());
                }
                Ok(opened)
            };
            match FileType::from_raw_mode(st.st_mode) {
                FileType::Directory => {
                    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                    if !SKIPPED_DIRS.contains(&name) {
                        let sub = open(OFlags::DIRECTORY)?;
                        self.dir(&sub, &p, out, total)?;
                    }
                }
                FileType::Symlink => {
                    let target = rustix::fs::readlinkat(fd, &name, Vec::new()).map_err(|e| {
                        match e {
                            // No longer a link (or gone) since the look.
                            Errno::INVAL | Errno::NOENT => changed(),
                            e => io_error("read the link", &p, e),
                        }
                    })?;
                    let inside = p
                        .canonicalize()
                        .is_ok_and(|t| t.starts_with(self.canon_root));
                    if !inside {
                        return Err(LockError::LinkOutside { path: p });
                    }
                    let target = target
                        .to_str()
                        .ok()
                        .filter(|t| !t.chars().any(char::is_control))
                        .ok_or_else(|| LockError::BadName { path: p.clone() })?;
                    out.push(Node {
                        path: rel,
                        kind: Kind::Link,
                        mode,
                        data: target.as_bytes().to_vec(),
                    });
                }
                FileType::RegularFile => {
                    if rel == LOCK_FILE || rel == crate::sign::SIG_FILE {
                        continue;
                    }
                    let size = u64::try_from(st.st_size).unwrap_or(u64::MAX);
                    *total = total.saturating_add(size);
                    if *total > MAX_BUNDLE_BYTES {
                        return Err(LockError::TooLarge {
                            root: self.root.to_path_buf(),
                            max: MAX_BUNDLE_BYTES,
                        });
                    }
                    // Non-blocking: a file swapped for a FIFO fails the check above, not here.
                    let file = std::fs::File::from(open(OFlags::NONBLOCK)?);
                    let mut data = Vec::with_capacity(size as usize);
                    // The file may grow after the look: no more than it said.
                    file.take(size)
                        .read_to_end(&mut data)
                        .map_err(|e| io_error("read", &p, e))?;
                    out.push(Node {
                        path: rel,
                        kind: Kind::File,
                        mode,
                        data,
                    });
                }
                _ => return Err(LockError::Special { path: p }),
            }
        }
        Ok(())
    }
}

/// The start of a line of `band.lock` for a message: at most 80 characters, made visible.
fn quoted_start(line: &str) -> String {
    let start: String = line
        .chars()
        .take(80)
        .collect::<String>()
        .escape_debug()
        .to_string();
    if line.chars().count() > 80 {
        format!("{start}…")
    } else {
        start
    }
}

/// An I/O error that names what was done and the path.
fn io_error(what: &str, path: &Path, e: impl Into<std::io::Error>) -> LockError {
    let e: std::io::Error = e.into();
    LockError::Fs(std::io::Error::new(
        e.kind(),
        format!("failed to {what} {}: {e}", path.display()),
    ))
}

/// The `/`-separated path of `p` below `root`; UTF-8 without control characters.
fn rel_name(root: &Path, p: &Path) -> Result<String, LockError> {
    let rel = p.strip_prefix(root).unwrap_or(p);
    let mut parts = Vec::new();
    for c in rel.components() {
        match c.as_os_str().to_str() {
            Some(s) if !s.chars().any(char::is_control) => parts.push(s),
            _ => {
                return Err(LockError::BadName {
                    path: p.to_path_buf(),
                });
            }
        }
    }
    Ok(parts.join("/"))
}

/// A file's permission bits as the lock and the bundle record them.
#[cfg(unix)]
pub fn mode_of(m: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    m.permissions().mode() & 0o7777
}

#[cfg(not(unix))]
pub fn mode_of(_: &std::fs::Metadata) -> u32 {
    0o644
}

/// Lowercase hex SHA-256.
pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// One line of a lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockEntry {
    pub path: String,
    pub kind: Kind,
    pub mode: u32,
    /// SHA-256 of the file's bytes, or of the link's target.
    pub sha256: String,
    /// A link's target (also in `sha256`; written for readable diffs).
    pub target: Option<String>,
}

/// The contents of a `band.lock`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lock {
    /// The request's `bundle_sha256` for this skill.
    pub bundle_sha256: String,
    /// Sorted by path.
    pub entries: Vec<LockEntry>,
    /// The declared package sets, sorted by path (`deps` lines, after the entries).
    pub deps: Vec<DepsEntry>,
}

impl Lock {
    /// The file text: a header comment, `version`, `bundle`, then one line per entry.
    pub fn render(&self) -> String {
        let mut out = String::from(HEADER);
        out.push_str(&format!(
            "version {LOCK_VERSION}\nbundle {}\n",
            self.bundle_sha256
        ));
        for e in &self.entries {
            out.push_str(&format!(
                "{} {:04o} {} {}",
                e.kind.as_str(),
                e.mode,
                e.sha256,
                quote(&e.path)
            ));
            if let Some(t) = &e.target {
                out.push_str(&format!(" -> {}", quote(t)));
            }
            out.push('\n');
        }
        for d in &self.deps {
            out.push_str(&format!("deps {} {}\n", d.sha256, quote(&d.path)));
        }
        out
    }

    /// Parse a lock's text; `path` names the file in errors. Strict: any unknown or malformed
    /// line is an error, never skipped.
    pub fn parse(text: &str, path: &Path) -> Result<Lock, LockError> {
        let err = |line: usize, message: String| LockError::Parse {
            path: path.to_path_buf(),
            line,
            message,
        };
        let mut version = None;
        let mut bundle = None;
        let mut entries: Vec<LockEntry> = Vec::new();
        let mut deps: Vec<DepsEntry> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (word, rest) = line.split_once(' ').ok_or_else(|| {
                err(
                    n,
                    format!("expected `<word> <value>`, found `{}`", quoted_start(line)),
                )
            })?;
            match word {
                "version" => {
                    if version.is_some() {
                        return Err(err(n, "`version` appears twice".into()));
                    }
                    let v: u32 = rest
                        .parse()
                        .map_err(|_| err(n, format!("`{rest}` is not a version number")))?;
                    if v != LOCK_VERSION {
                        return Err(err(
                            n,
                            format!(
                                "lock format version {v}; this band reads version {LOCK_VERSION}"
                            ),
                        ));
                    }
                    version = Some(v);
                }
                "bundle" => {
                    if bundle.is_some() {
                        return Err(err(n, "`bundle` appears twice".into()));
                    }
                    bundle = Some(
                        parse_hex(rest)
                            .ok_or_else(|| err(n, format!("`{rest}` is not a SHA-256 in hex")))?,
                    );
                }
                "file" | "link" => {
                    let kind = if word == "file" {
                        Kind::File
                    } else {
                        Kind::Link
                    };
                    let e = parse_entry(kind, rest).map_err(|m| err(n, m.to_string()))?;
                    if let Some(prev) = entries.last()
                        && prev.path >= e.path
                    {
                        return Err(err(
                            n,
                            format!(
                                "{} is out of order or repeated (entries are sorted by path)",
                                quote(&e.path)
                            ),
                        ));
                    }
                    entries.push(e);
                }
                "deps" => {
                    let (hex, path) = rest
                        .split_once(' ')
                        .ok_or_else(|| err(n, "expected `deps <sha256> \"<path>\"`".into()))?;
                    let sha256 = parse_hex(hex)
                        .ok_or_else(|| err(n, format!("`{hex}` is not a SHA-256 in hex")))?;
                    let (path, after) = unquote(path).map_err(|m| err(n, m.to_string()))?;
                    if !after.is_empty() {
                        return Err(err(n, format!("unexpected `{after}` after the path")));
                    }
                    if deps.last().is_some_and(|p| p.path >= path) {
                        return Err(err(
                            n,
                            format!(
                                "{} is out of order or repeated (deps lines are sorted by path)",
                                quote(&path)
                            ),
                        ));
                    }
                    deps.push(DepsEntry { path, sha256 });
                }
                other => return Err(err(n, format!("unknown line kind `{other}`"))),
            }
        }
        if version.is_none() {
            return Err(err(1, "no `version` line".into()));
        }
        let bundle_sha256 = bundle.ok_or_else(|| err(1, "no `bundle` line".into()))?;
        Ok(Lock {
            bundle_sha256,
            entries,
            deps,
        })
    }

    /// What differs between this (locked) lock and `actual`, by path. Empty means they agree.
    pub fn diff(&self, actual: &Lock) -> Vec<Difference> {
        let locked: BTreeMap<&str, &LockEntry> =
            self.entries.iter().map(|e| (e.path.as_str(), e)).collect();
        let now: BTreeMap<&str, &LockEntry> = actual
            .entries
            .iter()
            .map(|e| (e.path.as_str(), e))
            .collect();
        let mut paths: Vec<&str> = locked.keys().chain(now.keys()).copied().collect();
        paths.sort_unstable();
        paths.dedup();
        let mut out = Vec::new();
        for p in paths {
            let mut push = |change| {
                out.push(Difference {
                    path: p.to_string(),
                    change,
                })
            };
            match (locked.get(p), now.get(p)) {
                (Some(_), None) => push(Change::Removed),
                (None, Some(_)) => push(Change::Added),
                (Some(l), Some(a)) if l.kind != a.kind => push(Change::Kind {
                    locked: l.kind,
                    actual: a.kind,
                }),
                (Some(l), Some(a)) => {
                    if l.sha256 != a.sha256 || l.target != a.target {
                        push(match a.kind {
                            Kind::File => Change::Content,
                            Kind::Link => Change::Target {
                                locked: l.target.clone().unwrap_or_default(),
                                actual: a.target.clone().unwrap_or_default(),
                            },
                        });
                    }
                    if l.mode != a.mode && a.kind == Kind::File {
                        push(Change::Mode {
                            locked: l.mode,
                            actual: a.mode,
                        });
                    }
                }
                (None, None) => {}
            }
        }
        let locked: BTreeMap<&str, &str> = self
            .deps
            .iter()
            .map(|d| (d.path.as_str(), d.sha256.as_str()))
            .collect();
        let now: BTreeMap<&str, &str> = actual
            .deps
            .iter()
            .map(|d| (d.path.as_str(), d.sha256.as_str()))
            .collect();
        let mut paths: Vec<&str> = locked.keys().chain(now.keys()).copied().collect();
        paths.sort_unstable();
        paths.dedup();
        for p in paths {
            if locked.get(p) != now.get(p) {
                out.push(Difference {
                    path: p.to_string(),
                    change: Change::Deps,
                });
            }
        }
        if out.is_empty() && self.bundle_sha256 != actual.bundle_sha256 {
            out.push(Difference {
                path: LOCK_FILE.to_string(),
                change: Change::BundleHash,
            });
        }
        out
    }
}

/// What is wrong with a `file` or `link` line of a lock (reported with its line number).
#[derive(Debug, Error)]
enum EntryError {
    #[error("expected `{0} <mode> <sha256> \"<path>\"`")]
    Shape(&'static str),
    #[error("`{0}` is not a four-digit octal mode")]
    ModeDigits(String),
    #[error("`{0}` is not an octal mode")]
    ModeOctal(String),
    #[error("`{0}` is not a SHA-256 in hex")]
    Sha(String),
    #[error("{} is not a relative path inside the skill", quote(.0))]
    NotRelative(String),
    #[error("a link line ends with ` -> \"<target>\"`")]
    NoArrow,
    #[error("unexpected `{0}` after the link target")]
    AfterTarget(String),
    #[error("the hash of link {} does not match its target", quote(.0))]
    LinkHash(String),
    #[error("unexpected `{0}` after the path")]
    AfterPath(String),
    #[error("expected a quoted path, found `{0}`")]
    Unquoted(String),
    #[error("`{0}` is not a quoted path")]
    BadQuote(String),
}

fn parse_entry(kind: Kind, rest: &str) -> Result<LockEntry, EntryError> {
    let mut it = rest.splitn(3, ' ');
    let (Some(mode), Some(sha), Some(tail)) = (it.next(), it.next(), it.next()) else {
        return Err(EntryError::Shape(kind.as_str()));
    };
    if mode.len() != 4 {
        return Err(EntryError::ModeDigits(mode.to_string()));
    }
    let mode = u32::from_str_radix(mode, 8).map_err(|_| EntryError::ModeOctal(mode.to_string()))?;
    let sha256 = parse_hex(sha).ok_or_else(|| EntryError::Sha(sha.to_string()))?;
    let (path, tail) = unquote(tail)?;
    if path.is_empty()
        || path.starts_with('/')
        || path
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(EntryError::NotRelative(path));
    }
    let target = match kind {
        Kind::File if tail.is_empty() => None,
        Kind::Link => {
            let t = tail.strip_prefix(" -> ").ok_or(EntryError::NoArrow)?;
            let (target, end) = unquote(t)?;
            if !end.is_empty() {
                return Err(EntryError::AfterTarget(end.to_string()));
            }
            if sha256_hex(target.as_bytes()) != sha256 {
                return Err(EntryError::LinkHash(path));
            }
            Some(target)
        }
        Kind::File => return Err(EntryError::AfterPath(tail.to_string())),
    };
    Ok(LockEntry {
        path,
        kind,
        mode,
        sha256,
        target,
    })
}

fn parse_hex(s: &str) -> Option<String> {
    (s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
    .then(|| s.to_string())
}

/// A path as a JSON string: unambiguous whatever the name holds.
fn quote(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// A JSON string at the start of `s`, and the text after it.
fn unquote(s: &str) -> Result<(String, &str), EntryError> {
    if !s.starts_with('"') {
        return Err(EntryError::Unquoted(s.to_string()));
    }
    let mut stream = serde_json::Deserializer::from_str(s).into_iter::<String>();
    match stream.next() {
        Some(Ok(v)) => Ok((v, &s[stream.byte_offset()..])),
        _ => Err(EntryError::BadQuote(s.to_string())),
    }
}

/// One way the skill differs from its lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    pub path: String,
    pub change: Change,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The file's bytes changed.
    Content,
    Mode {
        locked: u32,
        actual: u32,
    },
    /// A file became a link or the other way round.
    Kind {
        locked: Kind,
        actual: Kind,
    },
    /// A link points somewhere else.
    Target {
        locked: String,
        actual: String,
    },
    /// In the skill, not in the lock.
    Added,
    /// In the lock, not in the skill.
    Removed,
    /// Every line matches but the lock's `bundle` line does not (the lock was edited).
    BundleHash,
    /// The packages the file declares are not the set `band.lock` records.
    Deps,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.path;
        match &self.change {
            Change::Content => write!(f, "{p}: content changed"),
            Change::Mode { locked, actual } => {
                write!(f, "{p}: mode changed from {locked:04o} to {actual:04o}")
            }
            Change::Kind { locked, actual } => write!(
                f,
                "{p}: was a {}, is now a {}",
                locked.as_str(),
                actual.as_str()
            ),
            Change::Target { locked, actual } => {
                write!(f, "{p}: symlink points to `{actual}`, locked `{locked}`")
            }
            Change::Added => write!(f, "{p}: added (not in band.lock)"),
            Change::Removed => write!(f, "{p}: removed (listed in band.lock)"),
            Change::Deps => write!(
                f,
                "{p}: its declared packages are not the ones band.lock records"
            ),
            Change::BundleHash => write!(
                f,
                "{p}: its bundle hash does not match the files it lists (the lock was edited)"
            ),
        }
    }
}

/// How a skill stands against its lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockState {
    /// No `band.lock`.
    Unlocked,
    /// The skill is exactly what was locked.
    Matches,
    /// The skill changed since it was locked.
    Differs(Vec<Difference>),
}

impl LockState {
    /// The word recorded in the ledger: `unlocked`, `matches`, `differs`.
    pub fn as_str(&self) -> &'static str {
        match self {
            LockState::Unlocked => "unlocked",
            LockState::Matches => "matches",
            LockState::Differs(_) => "differs",
        }
    }
}

/// Compare `tree` (read from `root`) with `root/band.lock`. A lock that cannot be parsed is an
/// error, never "unlocked".
pub fn check(root: &Path, tree: &Tree) -> Result<LockState, LockError> {
    let path = root.join(LOCK_FILE);
    let Some(text) = read_top_file(root, LOCK_FILE, MAX_LOCK_BYTES).map_err(LockError::Fs)? else {
        return Ok(LockState::Unlocked);
    };
    let locked = Lock::parse(&text, &path)?;
    let diffs = locked.diff(&tree.lock());
    Ok(if diffs.is_empty() {
        LockState::Matches
    } else {
        LockState::Differs(diffs)
    })
}

/// Write `root/band.lock` for `tree` (through a temporary file and a rename). Returns the lock.
pub fn write(root: &Path, tree: &Tree) -> Result<Lock, LockError> {
    let lock = tree.lock();
    crate::skillfs::write_in_root(root, LOCK_FILE, lock.render().as_bytes())
        .map_err(LockError::Fs)?;
    Ok(lock)
}

/// The most bytes of `band.lock` band reads (a line for each of the skill's files: far more than
/// any skill within [`MAX_BUNDLE_BYTES`] needs).
pub const MAX_LOCK_BYTES: u64 = 16 << 20;

/// The text of `name` at the top of the skill `root` (`band.lock`, `band.lock.sig`), as every
/// file of a skill is read (`skillfs`): never through a link out of the skill, only a regular
/// file (a FIFO or a device is refused, never waited on), at most `limit` bytes. `None` when
/// there is no such file.
pub fn read_top_file(root: &Path, name: &str, limit: u64) -> std::io::Result<Option<String>> {
    match crate::skillfs::read_to_string(root, Path::new(name), limit) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(crate::skillfs::SkillFileError::Io(e)) => Err(e),
        Err(e) => Err(std::io::Error::other(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fs_err::os::unix::fs::symlink;
    use std::os::unix::fs::PermissionsExt;

    /// `band.lock` (and so `band lock`, `wrap --write`, `learn --write`) never writes into a
    /// file outside the skill: a hard link or a symlink at `band.lock` is replaced, not written
    /// through, and no temporary file is left.
    #[test]
    fn the_lock_is_written_beside_and_renamed_never_through_a_link() {
        let t = tempfile::tempdir().expect("tempdir");
        let (root, outside) = (t.path().join("s"), t.path().join("outside.txt"));
        fs_err::create_dir_all(&root).expect("mkdir");
        fs_err::write(root.join("SKILL.md"), "---\nname: s\n---\n").expect("write");
        fs_err::write(&outside, "OUTSIDE").expect("write");
        let tree = Tree::read(&root).expect("tree");
        for plant in ["hard", "soft"] {
            // Planted after the skill was read, as a race would.
            let _ = fs_err::remove_file(root.join(LOCK_FILE));
            if plant == "hard" {
                fs_err::hard_link(&outside, root.join(LOCK_FILE)).expect("link");
            } else {
                symlink(&outside, root.join(LOCK_FILE)).expect("symlink");
            }
            write(&root, &tree).expect("write");
            assert_eq!(
                fs_err::read_to_string(&outside).expect("read"),
                "OUTSIDE",
                "{plant}"
            );
            let meta = fs_err::symlink_metadata(root.join(LOCK_FILE)).expect("stat");
            assert!(meta.is_file(), "{plant}");
            assert_eq!(check(&root, &tree).expect("check"), LockState::Matches);
            let names: Vec<String> = fs_err::read_dir(&root)
                .expect("ls")
                .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                .collect();
            assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
        }
    }

    /// `band.lock` is read as a skill's file: a FIFO is refused (never waited on), a link to
    /// `/dev/zero` or out of the skill is refused, a file larger than [`MAX_LOCK_BYTES`] is
    /// refused unread, and a bad line is quoted only in part.
    #[test]
    fn the_lock_is_read_bounded_and_never_from_a_fifo_or_a_link_out() {
        let t = tempfile::tempdir().expect("tempdir");
        let root = t.path().join("s");
        fs_err::create_dir_all(&root).expect("mkdir");
        let lock = root.join(LOCK_FILE);
        // The skill as read before each plant (the walk itself refuses a FIFO or a link out).
        let tree = Tree::read(&root).expect("tree");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &lock,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .expect("mkfifo");
        assert!(check(&root, &tree).is_err());
        // What a site policy's preview reads (`band lint`, `explain`, `mcp`): refused, not waited on.
        fs_err::write(root.join(crate::sign::SIG_FILE), "sig").expect("write");
        assert!(crate::sign::read_signed(&root).is_err());
        fs_err::remove_file(&lock).expect("rm");
        symlink("/dev/zero", &lock).expect("symlink");
        assert!(check(&root, &tree).is_err());
        fs_err::remove_file(&lock).expect("rm");
        let big = fs_err::File::create(&lock).expect("create");
        big.set_len(MAX_LOCK_BYTES + 1).expect("sparse");
        let e = check(&root, &tree).expect_err("too large").to_string();
        assert!(e.contains("the most band reads of it is"), "{e}");
        fs_err::write(&lock, format!("{}\n", "x".repeat(10_000))).expect("write");
        let e = check(&root, &tree).expect_err("bad line").to_string();
        assert!(e.len() < 300, "{} bytes: {e}", e.len());
    }

    /// A folder of the skill swapped for a link to a folder outside it, back and forth, while
    /// the skill is read: no read ever returns a file from outside (the swap is an error or is
    /// not seen), however the two interleave.
    #[test]
    fn a_folder_swapped_for_a_link_while_the_skill_is_read_is_never_read_through() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};
        let t = tempfile::tempdir().expect("tempdir");
        let (skill, outside, holder) = (
            t.path().join("skill"),
            t.path().join("outside"),
            t.path().join("holder"),
        );
        for d in [skill.join("lib"), outside.clone(), holder.clone()] {
            fs_err::create_dir_all(d).expect("mkdir");
        }
        fs_err::write(skill.join("SKILL.md"), "---\nname: skill\n---\n").expect("write");
        for i in 0..20 {
            fs_err::write(skill.join(format!("lib/f{i:02}")), "inside").expect("write");
            fs_err::write(outside.join(format!("f{i:02}")), "CANARY").expect("write");
        }
        // The link stays outside the skill; only the exchange brings it in.
        symlink(&outside, holder.join("lib")).expect("symlink");
        let stop = Arc::new(AtomicBool::new(false));
        let swapper = {
            let (stop, skill, holder) = (Arc::clone(&stop), skill.clone(), holder.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    rustix::fs::renameat_with(
                        rustix::fs::CWD,
                        skill.join("lib"),
                        rustix::fs::CWD,
                        holder.join("lib"),
                        rustix::fs::RenameFlags::EXCHANGE,
                    )
                    .expect("exchange");
                }
            })
        };
        let (mut read, mut refused) = (0, 0);
        let mut leaked = Vec::new();
        for _ in 0..3000 {
            match Tree::read(&skill) {
                Ok(tree) => {
                    read += 1;
                    leaked.extend(
                        tree.files()
                            .filter(|n| n.data == b"CANARY")
                            .map(|n| n.path.clone()),
                    );
                }
                Err(LockError::Changed { .. } | LockError::LinkOutside { .. }) => refused += 1,
                // The entry was gone between the listing and the look.
                Err(LockError::Fs(e)) if e.kind() == std::io::ErrorKind::NotFound => refused += 1,
                Err(e) => panic!("{e}"),
            }
        }
        stop.store(true, Ordering::Relaxed);
        swapper.join().expect("swapper");
        assert!(leaked.is_empty(), "read through the link: {leaked:?}");
        assert_eq!(read + refused, 3000);
    }

    fn skill() -> tempfile::TempDir {
        let t = tempfile::tempdir().expect("tmp");
        let r = t.path();
        fs_err::create_dir_all(r.join("scripts")).expect("mkdir");
        fs_err::create_dir_all(r.join("lib")).expect("mkdir");
        fs_err::write(r.join("BAND.md"), "---\nband: s\ndescription: d\n---\n").expect("write");
        fs_err::write(r.join("scripts/go.sh"), "#!/bin/sh\necho hi\n").expect("write");
        fs_err::write(r.join("lib/good.sh"), "good\n").expect("write");
        fs_err::write(r.join("lib/evil.sh"), "evil\n").expect("write");
        for (f, mode) in [
            ("BAND.md", 0o644),
            ("scripts/go.sh", 0o755),
            ("lib/good.sh", 0o644),
            ("lib/evil.sh", 0o644),
        ] {
            fs_err::set_permissions(r.join(f), std::fs::Permissions::from_mode(mode))
                .expect("chmod");
        }
        symlink("../lib/good.sh", r.join("scripts/lib.sh")).expect("symlink");
        t
    }

    fn locked_skill() -> tempfile::TempDir {
        let t = skill();
        let tree = Tree::read(t.path()).expect("read");
        write(t.path(), &tree).expect("lock");
        t
    }

    #[test]
    fn an_npm_lock_is_locked_by_its_bytes_on_a_deps_line() {
        let t = skill();
        let r = t.path();
        let npm = "{\"lockfileVersion\": 3, \"packages\": {}}\n";
        fs_err::write(r.join("scripts/package-lock.json"), npm).expect("write");
        let lock = write(r, &Tree::read(r).expect("read")).expect("lock");
        assert_eq!(
            lock.deps,
            [DepsEntry {
                path: "scripts/package-lock.json".into(),
                sha256: crate::deps::sha256_hex(npm.as_bytes()),
            }]
        );
        let text = fs_err::read_to_string(r.join(LOCK_FILE)).expect("read");
        // Its `file` line has the same digest: only the `deps` line is changed here.
        let edited = text.replace(
            &format!("deps {}", lock.deps[0].sha256),
            &format!("deps {}", "0".repeat(64)),
        );
        fs_err::write(r.join(LOCK_FILE), edited).expect("write");
        let d = differs(r);
        assert_eq!(
            d.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["scripts/package-lock.json: its declared packages are not the ones band.lock records"]
        );
    }

    #[test]
    fn a_pyproject_and_its_uv_lock_are_locked_on_the_pyprojects_deps_line() {
        let t = skill();
        let r = t.path();
        let pyproject = "[project]\nname = \"s\"\nversion = \"0\"\ndependencies = [\"six\"]\n";
        let uv = |hash: char| {
            format!(
                "version = 1\nrequires-python = \">=3.8\"\n\n[[package]]\nname = \"s\"\nversion = \"0\"\nsource = {{ virtual = \".\" }}\ndependencies = [{{ name = \"six\" }}]\n\n[[package]]\nname = \"six\"\nversion = \"1.16.0\"\nsource = {{ registry = \"https://pypi.org/simple\" }}\nwheels = [{{ url = \"https://x/six-1.16.0-py2.py3-none-any.whl\", hash = \"sha256:{}\" }}]\n",
                hash.to_string().repeat(64)
            )
        };
        fs_err::write(r.join("pyproject.toml"), pyproject).expect("write");
        fs_err::write(r.join("uv.lock"), uv('a')).expect("write");
        let lock = write(r, &Tree::read(r).expect("read")).expect("lock");
        let paths: Vec<&str> = lock.deps.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, ["pyproject.toml"]);
        // Another wheel in the lock is another declared set.
        fs_err::write(r.join("uv.lock"), uv('b')).expect("write");
        let now = Tree::read(r).expect("read").lock();
        assert_ne!(now.deps[0].sha256, lock.deps[0].sha256);
        let d = differs(r);
        assert!(
            d.iter().any(|d| d.to_string()
                == "pyproject.toml: its declared packages are not the ones band.lock records"),
            "{d:?}"
        );
    }

    #[test]
    fn declared_packages_are_locked_and_a_changed_set_is_refused() {
        let t = skill();
        let r = t.path();
        let script = "#!/usr/bin/env python3\n# /// script\n# dependencies = [\"attrs==23.1.0\"]\n# ///\nimport attrs\n";
        fs_err::write(r.join("scripts/a.py"), script).expect("write");
        fs_err::write(r.join("requirements.txt"), "six\n").expect("write");
        let lock = write(r, &Tree::read(r).expect("read")).expect("lock");
        let paths: Vec<&str> = lock.deps.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, ["requirements.txt", "scripts/a.py"]);
        let text = fs_err::read_to_string(r.join(LOCK_FILE)).expect("read");
        let a = &lock.deps[1].sha256;
        assert!(
            text.ends_with(&format!("deps {a} \"scripts/a.py\"\n")),
            "{text}"
        );
        assert_eq!(
            Lock::parse(&text, Path::new(LOCK_FILE)).expect("parse"),
            lock
        );
        assert_eq!(state(r), LockState::Matches);

        // A lock whose recorded set is not the skill's (an older lock, or an edited one).
        let edited = text.replace(a.as_str(), &"0".repeat(64));
        fs_err::write(r.join(LOCK_FILE), edited).expect("write");
        let d = differs(r);
        assert_eq!(d.len(), 1);
        assert_eq!(
            d[0].to_string(),
            "scripts/a.py: its declared packages are not the ones band.lock records"
        );

        // A changed set: the file and its packages both differ.
        write(r, &Tree::read(r).expect("read")).expect("lock");
        fs_err::write(r.join("scripts/a.py"), script.replace("23.1.0", "23.2.0")).expect("write");
        let shown: Vec<String> = differs(r).iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "scripts/a.py: content changed",
                "scripts/a.py: its declared packages are not the ones band.lock records"
            ]
        );
        let bad = format!(
            "version 1\nbundle {}\ndeps {a} \"b\"\ndeps {a} \"a\"\n",
            "0".repeat(64)
        );
        assert!(Lock::parse(&bad, Path::new(LOCK_FILE)).is_err());
    }

    fn state(root: &Path) -> LockState {
        check(root, &Tree::read(root).expect("read")).expect("check")
    }

    fn differs(root: &Path) -> Vec<Difference> {
        match state(root) {
            LockState::Differs(d) => d,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_hostile_file_name_is_inert_in_the_error() {
        let t = tempfile::tempdir().expect("tmp");
        fs_err::write(t.path().join("x\u{1b}]52;c;eA==\u{7}"), "x").expect("write");
        let e = Tree::read(t.path()).expect_err("a control character in a name");
        let shown = e.to_string();
        assert!(!shown.contains(['\u{1b}', '\u{7}']), "{shown:?}");
        assert!(shown.contains("x^[]52;c;eA==^G"), "{shown}");
    }

    #[test]
    fn round_trip() {
        let t = locked_skill();
        let text = fs_err::read_to_string(t.path().join(LOCK_FILE)).expect("read");
        let parsed = Lock::parse(&text, Path::new("band.lock")).expect("parse");
        let tree = Tree::read(t.path()).expect("read");
        assert_eq!(parsed, tree.lock());
        assert_eq!(parsed.render(), text, "render is the inverse of parse");
        assert_eq!(state(t.path()), LockState::Matches);
        // The lock is not part of what it fingerprints, and the lines are sorted and typed.
        assert!(tree.nodes.iter().all(|n| n.path != LOCK_FILE));
        let kinds: Vec<(&str, &str)> = text
            .lines()
            .filter(|l| l.starts_with("file") || l.starts_with("link"))
            .map(|l| (&l[..4], l.rsplit('"').nth(1).unwrap_or("")))
            .collect();
        assert_eq!(kinds[0], ("file", "BAND.md"));
        assert!(
            text.contains("file 0755 ") && text.contains("\"scripts/go.sh\"\n"),
            "{text}"
        );
        assert!(
            text.contains("link 0777 ")
                && text.contains("\"scripts/lib.sh\" -> \"../lib/good.sh\"\n"),
            "{text}"
        );
    }

    #[test]
    fn bundle_hash_is_the_request_digest() {
        let t = locked_skill();
        let tree = Tree::read(t.path()).expect("read");
        let files: Vec<(String, u32, Vec<u8>)> = vec![
            (
                "BAND.md".into(),
                0o644,
                b"---\nband: s\ndescription: d\n---\n".to_vec(),
            ),
            ("lib/evil.sh".into(), 0o644, b"evil\n".to_vec()),
            ("lib/good.sh".into(), 0o644, b"good\n".to_vec()),
            (
                "scripts/go.sh".into(),
                0o755,
                b"#!/bin/sh\necho hi\n".to_vec(),
            ),
        ];
        assert_eq!(tree.bundle_sha256(), proto::bundle_digest(&files));
        assert_eq!(tree.lock().bundle_sha256, tree.bundle_sha256());
    }

    #[test]
    fn unlocked_skill_is_unlocked() {
        let t = skill();
        assert_eq!(state(t.path()), LockState::Unlocked);
    }

    #[test]
    fn one_changed_byte_is_refused() {
        let t = locked_skill();
        fs_err::write(t.path().join("scripts/go.sh"), "#!/bin/sh\necho hI\n").expect("write");
        assert_eq!(
            differs(t.path()),
            vec![Difference {
                path: "scripts/go.sh".into(),
                change: Change::Content
            }]
        );
    }

    #[test]
    fn an_added_file_is_refused() {
        let t = locked_skill();
        fs_err::write(t.path().join("scripts/.hidden"), "x").expect("write");
        assert_eq!(
            differs(t.path()),
            vec![Difference {
                path: "scripts/.hidden".into(),
                change: Change::Added
            }]
        );
    }

    #[test]
    fn a_removed_file_is_refused() {
        let t = locked_skill();
        fs_err::remove_file(t.path().join("lib/evil.sh")).expect("rm");
        assert_eq!(
            differs(t.path()),
            vec![Difference {
                path: "lib/evil.sh".into(),
                change: Change::Removed
            }]
        );
    }

    #[test]
    fn a_changed_mode_is_refused() {
        let t = locked_skill();
        fs_err::set_permissions(
            t.path().join("BAND.md"),
            std::fs::Permissions::from_mode(0o4755),
        )
        .expect("chmod");
        assert_eq!(
            differs(t.path()),
            vec![Difference {
                path: "BAND.md".into(),
                change: Change::Mode {
                    locked: 0o644,
                    actual: 0o4755
                }
            }]
        );
    }

    #[test]
    fn a_swapped_symlink_is_refused() {
        let t = locked_skill();
        let link = t.path().join("scripts/lib.sh");
        fs_err::remove_file(&link).expect("rm");
        symlink("../lib/evil.sh", &link).expect("symlink");
        let d = differs(t.path());
        assert_eq!(
            d,
            vec![Difference {
                path: "scripts/lib.sh".into(),
                change: Change::Target {
                    locked: "../lib/good.sh".into(),
                    actual: "../lib/evil.sh".into()
                }
            }]
        );
        assert!(d[0].to_string().contains("../lib/evil.sh"));
    }

    #[test]
    fn a_file_swapped_for_a_symlink_is_refused() {
        let t = locked_skill();
        let f = t.path().join("lib/good.sh");
        fs_err::remove_file(&f).expect("rm");
        symlink("evil.sh", &f).expect("symlink");
        let d = differs(t.path());
        assert!(
            d.contains(&Difference {
                path: "lib/good.sh".into(),
                change: Change::Kind {
                    locked: Kind::File,
                    actual: Kind::Link
                }
            }),
            "{d:?}"
        );
    }

    #[test]
    fn an_edited_bundle_line_is_refused() {
        let t = locked_skill();
        let p = t.path().join(LOCK_FILE);
        let text = fs_err::read_to_string(&p).expect("read");
        let line = text
            .lines()
            .find(|l| l.starts_with("bundle "))
            .expect("bundle line");
        fs_err::write(
            &p,
            text.replace(line, &format!("bundle {}", "0".repeat(64))),
        )
        .expect("write");
        assert_eq!(
            differs(t.path()),
            vec![Difference {
                path: LOCK_FILE.into(),
                change: Change::BundleHash
            }]
        );
    }

    #[test]
    fn skipped_folders_do_not_count() {
        let t = locked_skill();
        fs_err::create_dir_all(t.path().join(".git")).expect("mkdir");
        fs_err::write(t.path().join(".git/HEAD"), "x").expect("write");
        fs_err::create_dir_all(t.path().join("scripts/target")).expect("mkdir");
        fs_err::write(t.path().join("scripts/target/a"), "x").expect("write");
        assert_eq!(state(t.path()), LockState::Matches);
    }

    #[test]
    fn links_outside_the_skill_are_errors() {
        let t = skill();
        symlink("/etc/passwd", t.path().join("scripts/passwd")).expect("symlink");
        assert!(matches!(
            Tree::read(t.path()),
            Err(LockError::LinkOutside { .. })
        ));
        let t = skill();
        symlink("../../outside", t.path().join("scripts/up")).expect("symlink");
        assert!(matches!(
            Tree::read(t.path()),
            Err(LockError::LinkOutside { .. })
        ));
        let t = skill();
        symlink("nowhere", t.path().join("scripts/dangling")).expect("symlink");
        assert!(matches!(
            Tree::read(t.path()),
            Err(LockError::LinkOutside { .. })
        ));
    }

    #[test]
    fn malformed_locks_are_errors_with_a_line() {
        let good = Tree::read(locked_skill().path())
            .expect("read")
            .lock()
            .render();
        let cases = [
            (good.replace("version 1", "version 2"), "version 2"),
            (good.replace("version 1\n", ""), "no `version`"),
            (good.replace("file 0644", "file 644"), "four-digit"),
            (good.replace("file 0755", "fyle 0755"), "unknown line kind"),
            (
                good.replace("\"BAND.md\"", "\"../BAND.md\""),
                "not a relative path",
            ),
            (
                good.replace("\"../lib/good.sh\"", "\"../lib/evil.sh\""),
                "does not match its target",
            ),
            (
                format!(
                    "{good}{}",
                    good.lines()
                        .find(|l| l.starts_with("file"))
                        .unwrap_or_default()
                ),
                "out of order",
            ),
        ];
        for (text, want) in cases {
            match Lock::parse(&text, Path::new("x/band.lock")) {
                Err(e @ LockError::Parse { .. }) => assert!(
                    e.to_string().contains(want) && e.to_string().starts_with("x/band.lock:"),
                    "{e} (wanted {want})"
                ),
                other => panic!("expected a parse error containing {want}, got {other:?}"),
            }
        }
    }

    #[test]
    fn unreadable_lock_is_an_error_not_unlocked() {
        let t = skill();
        fs_err::write(t.path().join(LOCK_FILE), "garbage\n").expect("write");
        assert!(matches!(
            check(t.path(), &Tree::read(t.path()).expect("read")),
            Err(LockError::Parse { .. })
        ));
    }
}
