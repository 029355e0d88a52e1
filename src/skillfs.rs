//! Reading and rewriting a skill's own files the way the run treats them: never through a link
//! that leaves the skill, never a device, FIFO or socket, never more than a bound.
//!
//! A skill folder may come from a hostile author. The run packs it with [`crate::lock::Tree`],
//! which refuses a symlink that leaves the skill (S009). Every other command that reads a skill
//! folder before any sandbox exists (`band mcp`'s resources, `lint`, `fmt`, `explain`, `lock`,
//! `learn`, `wrap`, `list`, `help`, `show`) reads its files through this module, so that a
//! `SKILL.md` linked to `/proc/self/environ` or `/etc/shadow` is refused, not quoted.
//!
//! A path is resolved first (links that stay inside the skill are followed, as the bundle keeps
//! them; one that leads out, or nowhere, is refused), then the resolved path is opened from the
//! skill root's descriptor with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//! RESOLVE_NO_MAGICLINKS)` on Linux, so a component swapped for a link in between fails in the
//! kernel. Where the kernel has no `openat2` (and on macOS) it is opened with `O_NOFOLLOW`, which
//! catches a swapped last component only. Either way the file is opened `O_NONBLOCK` (a FIFO
//! cannot stall the caller), `fstat` must say it is a regular file, and no more than the caller's
//! bound is read.

use std::io::Read;
use std::path::{Path, PathBuf};

/// Why a skill file was not read.
#[derive(Debug, thiserror::Error)]
pub enum SkillFileError {
    /// The path, or a link on it, leads outside the skill.
    #[error("{}: a link that leads outside the skill (or nowhere); not read", path.display())]
    Outside { path: PathBuf },
    /// Not a regular file (a directory, FIFO, socket or device).
    #[error("{}: not a regular file ({kind}); not read", path.display())]
    NotRegular { path: PathBuf, kind: &'static str },
    /// Larger than the caller reads.
    #[error("{}: {size} bytes; the most band reads of it is {limit}", path.display())]
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
    },
    /// Not UTF-8 text where text was asked for.
    #[error("{}: not UTF-8 text", path.display())]
    NotText { path: PathBuf },
    /// Where band would write a file, something it will not write through or over (a link, a
    /// folder, a file where a folder belongs): nothing was written.
    #[error("{}: {why}; nothing was written", path.display())]
    Blocked { path: PathBuf, why: &'static str },
    /// Any other failure to open or read (the error names the path).
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl SkillFileError {
    /// True when the file is simply absent.
    pub fn is_not_found(&self) -> bool {
        matches!(self, SkillFileError::Io(e) if e.kind() == std::io::ErrorKind::NotFound)
    }

    /// True when the file exists but band refuses it for where it leads or what it is.
    pub fn is_refused(&self) -> bool {
        matches!(
            self,
            SkillFileError::Outside { .. }
                | SkillFileError::NotRegular { .. }
                | SkillFileError::Blocked { .. }
        )
    }
}

/// The most of a SKILL.md band reads (its frontmatter alone is bounded by the pre-scan).
pub const MAX_SKILL_MD_BYTES: u64 = MAX_TEXT_BYTES;

/// The most of any other text file of a skill (a schema, a script read for its commands) band
/// reads outside the run.
pub const MAX_TEXT_BYTES: u64 = 4 << 20;

/// `path` as given (absolute, or relative to the working directory and spelled below `root`), or
/// `root.join(path)` for a path relative to the skill.
fn spelled(root: &Path, path: &Path) -> PathBuf {
    if path.is_absolute() || path.starts_with(root) {
        path.to_path_buf()
    } else {
        root.join(path)
    }
}

/// The symlinks in the skill at `root` that lead outside it (or nowhere), sorted. The run refuses
/// such a skill (its bundle cannot hold the link), lint reports each (S009), and `band mcp`
/// offers none of its scripts.
pub fn links_leaving(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(canon_root) = root.canonicalize() else {
        return out;
    };
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = fs_err::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_symlink() {
                if !p.canonicalize().is_ok_and(|t| t.starts_with(&canon_root)) {
                    out.push(p);
                }
            } else if ft.is_dir() {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

/// `O_NOFOLLOW | O_NONBLOCK | O_NOCTTY`, for std's `custom_flags`.
fn no_follow_flags() -> i32 {
    use rustix::fs::OFlags;
    (OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY).bits() as i32
}

fn kind_of(ft: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_block_device() || ft.is_char_device() {
        "a device"
    } else if ft.is_symlink() {
        "a symlink"
    } else {
        "not a file"
    }
}

/// Open `path`, a file of the skill at `root`, for reading: a regular file inside the skill,
/// reached only through links that stay inside it. `path` is relative to `root` or spelled
/// below it.
pub fn open(root: &Path, path: &Path) -> Result<(fs_err::File, std::fs::Metadata), SkillFileError> {
    let o = open_where(root, path)?;
    let (file, meta) = (o.file, o.meta);
    Ok((file, meta))
}

/// A regular file of the skill, opened by [`open_where`].
struct Opened {
    file: fs_err::File,
    meta: std::fs::Metadata,
    /// The skill's canonical root, and the file's path below it (no link on it).
    canon_root: PathBuf,
    rel: PathBuf,
    /// The path as the caller spelled it, for messages.
    shown: PathBuf,
}

/// [`open`], and where the file it opened is.
fn open_where(root: &Path, path: &Path) -> Result<Opened, SkillFileError> {
    let shown = spelled(root, path);
    let (canon_root, rel) = resolve_inside(root, &shown)?;
    let file = open_resolved(&canon_root, &rel, &shown)?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(SkillFileError::NotRegular {
            path: shown,
            kind: kind_of(meta.file_type()),
        });
    }
    Ok(Opened {
        file,
        meta,
        canon_root,
        rel,
        shown,
    })
}

/// The canonical root, and where `shown` leads below it (no link left on that relative path).
/// A link that leads out of the root, or nowhere, is [`SkillFileError::Outside`]; a plain
/// absence is `NotFound`.
fn resolve_inside(root: &Path, shown: &Path) -> Result<(PathBuf, PathBuf), SkillFileError> {
    let outside = || SkillFileError::Outside {
        path: shown.to_path_buf(),
    };
    let canon_root = fs_err::canonicalize(root)?;
    let canon = match fs_err::canonicalize(shown) {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return match fs_err::symlink_metadata(shown) {
                Ok(_) => Err(outside()),
                Err(e) => Err(e.into()),
            };
        }
        Err(e) => return Err(e.into()),
    };
    let rel = canon.strip_prefix(&canon_root).map_err(|_| outside())?;
    if rel.as_os_str().is_empty() {
        return Err(SkillFileError::NotRegular {
            path: shown.to_path_buf(),
            kind: "a directory",
        });
    }
    Ok((canon_root.clone(), rel.to_path_buf()))
}

/// The bytes of a file of the skill (see [`open`]), at most `limit` of them.
pub fn read(root: &Path, path: &Path, limit: u64) -> Result<Vec<u8>, SkillFileError> {
    let (file, meta) = open(root, path)?;
    read_bounded(file, meta.len(), limit, path)
}

/// The first `n` bytes of a file of the skill (see [`open`]), however long it is, and its mode:
/// what says how it starts (`crate::launch`).
pub fn read_head(root: &Path, path: &Path, n: u64) -> Result<(Vec<u8>, u32), SkillFileError> {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let (file, meta) = open(root, path)?;
    let mut head = Vec::new();
    file.take(n)
        .read_to_end(&mut head)
        .map_err(SkillFileError::from)?;
    Ok((head, meta.permissions().mode()))
}

/// The text of a file of the skill (see [`open`]), at most `limit` bytes of it.
pub fn read_to_string(root: &Path, path: &Path, limit: u64) -> Result<String, SkillFileError> {
    let bytes = read(root, path, limit)?;
    String::from_utf8(bytes).map_err(|_| SkillFileError::NotText {
        path: path.to_path_buf(),
    })
}

fn read_bounded(
    file: fs_err::File,
    len: u64,
    limit: u64,
    path: &Path,
) -> Result<Vec<u8>, SkillFileError> {
    let too_large = |size| SkillFileError::TooLarge {
        path: path.to_path_buf(),
        size,
        limit,
    };
    if len > limit {
        return Err(too_large(len));
    }
    let mut buf = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    // One byte over the bound tells a file that grew while it was read.
    file.take(limit.saturating_add(1)).read_to_end(&mut buf)?;
    if buf.len() as u64 > limit {
        return Err(too_large(buf.len() as u64));
    }
    Ok(buf)
}

/// The text of `path` for quoting in a message (a diagnostic's source line): only a regular file
/// that is not itself a link, at most `limit` bytes. Anything else is not quoted (`None`).
/// What band quotes in a message must never be a file the message's reader should not see: a
/// `BAND.md` linked to `/proc/self/environ` is refused by the loaders, and is not read here either.
pub fn read_quotable(path: &Path, limit: u64) -> Option<String> {
    use fs_err::os::unix::fs::OpenOptionsExt;
    let file = fs_err::OpenOptions::new()
        .read(true)
        .custom_flags(no_follow_flags())
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.file_type().is_file() {
        return None;
    }
    let bytes = read_bounded(file, meta.len(), limit, path).ok()?;
    String::from_utf8(bytes).ok()
}

/// Replace the contents of `path` (a band file of the skill at `root`: the file itself, or the file
/// a link inside the skill names; refused like a read when it leads outside the skill or is not a
/// regular file, so `band fmt` or `band learn --write` never write through a link to
/// `~/.bashrc`) with `contents`: written to a fresh file beside it, then renamed over it, keeping its mode and,
/// where band may (as root), its owner: root running `band fmt` on a user's skill must not take
/// the user's band file over.
pub fn replace(root: &Path, path: &Path, contents: &[u8]) -> Result<(), SkillFileError> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let Opened {
        meta,
        canon_root,
        rel,
        shown,
        ..
    } = open_where(root, path)?;
    let (parent, name) = match (rel.parent(), rel.file_name()) {
        (Some(parent), Some(name)) => (parent, name),
        _ => return Err(SkillFileError::Outside { path: shown }),
    };
    let dir = open_dir_resolved(&canon_root, parent, &shown)?;
    let owner = (meta.uid(), meta.gid());
    write_beside(
        &dir,
        name,
        contents,
        meta.permissions().mode() & 0o7777,
        Some(owner),
    )
    .map_err(|e| SkillFileError::Io(at_path(&shown, e)))
}

/// Write `contents` as the file `name` at the top of the skill `root` (`band.lock`,
/// `band.lock.sig`), as [`replace`] writes: a fresh file beside it, renamed over whatever is
/// there (never written through a link or into a file a hard link shares). A new file gets mode
/// 0644 (the umask applies).
pub fn write_in_root(root: &Path, name: &str, contents: &[u8]) -> std::io::Result<()> {
    let canon_root = fs_err::canonicalize(root)?;
    // The root itself: no component to resolve, so only an I/O error.
    let dir = open_dir_resolved(&canon_root, Path::new(""), root).map_err(|e| match e {
        SkillFileError::Io(e) => e,
        e => std::io::Error::other(e.to_string()),
    })?;
    write_beside(&dir, std::ffi::OsStr::new(name), contents, 0o644, None)
        .map_err(|e| at_path(&root.join(name), e))
}

/// `e`, its message prefixed with `path`.
fn at_path(path: &Path, e: impl Into<std::io::Error>) -> std::io::Error {
    let e: std::io::Error = e.into();
    std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// Write `contents` into a fresh file in the folder `dir` (`O_CREAT | O_EXCL | O_NOFOLLOW`, under
/// a name unique to this process and moment), synced, then renamed over `name` in the same folder
/// descriptor: a folder swapped for a link meanwhile, a link or a hard link planted at either
/// name, never lead the write outside. `owner`: the (uid, gid) to keep, where band may (as root):
/// root rewriting a user's file must not take it over.
fn write_beside(
    dir: &std::os::fd::OwnedFd,
    name: &std::ffi::OsStr,
    contents: &[u8],
    mode: u32,
    owner: Option<(u32, u32)>,
) -> std::io::Result<()> {
    Staged::write(dir, name, contents, mode, owner)?.commit()
}

/// A file written and synced beside its place, under a temporary name, not yet renamed into it
/// ([`write_beside`] in two steps, so several files go into place only once all are written).
/// Dropped uncommitted, the temporary file is removed.
struct Staged<'d> {
    dir: &'d std::os::fd::OwnedFd,
    tmp: String,
    name: std::ffi::OsString,
    done: bool,
}

impl<'d> Staged<'d> {
    fn write(
        dir: &'d std::os::fd::OwnedFd,
        name: &std::ffi::OsStr,
        contents: &[u8],
        mode: u32,
        owner: Option<(u32, u32)>,
    ) -> std::io::Result<Staged<'d>> {
        use rustix::fs::{Mode, OFlags};
        use std::io::Write as _;
        // Unique per process and moment: a stale temporary file of a crashed rewrite is no
        // obstacle.
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let tmp = format!(
            ".{}.band-{}-{stamp}.tmp",
            name.to_string_lossy(),
            std::process::id()
        );
        let fd = rustix::fs::openat(
            dir,
            tmp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode as _),
        )?;
        // From here on, dropping `staged` removes the temporary file.
        let staged = Staged {
            dir,
            tmp,
            name: name.to_owned(),
            done: false,
        };
        if let Some((uid, gid)) = owner
            && (uid, gid)
                != (
                    rustix::process::geteuid().as_raw(),
                    rustix::process::getegid().as_raw(),
                )
        {
            // Permitted as root; otherwise the file stays the caller's, as any write makes it.
            let _ = rustix::fs::fchown(
                &fd,
                Some(rustix::fs::Uid::from_raw(uid)),
                Some(rustix::fs::Gid::from_raw(gid)),
            );
            // chown clears set-id bits: the mode again.
            let _ = rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode as _));
        }
        let mut f = std::fs::File::from(fd);
        f.write_all(contents)?;
        f.sync_all()?;
        Ok(staged)
    }

    /// Rename the file into its place.
    fn commit(mut self) -> std::io::Result<()> {
        rustix::fs::renameat(self.dir, self.tmp.as_str(), self.dir, self.name.as_os_str())?;
        self.done = true;
        Ok(())
    }
}

impl Drop for Staged<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = rustix::fs::unlinkat(self.dir, self.tmp.as_str(), rustix::fs::AtFlags::empty());
        }
    }
}

/// Write new files into the skill at `root` (`band wrap --write`: its band and contracts), each a
/// path relative to the root, all or nothing as far as the filesystem allows:
///
/// 1. Before anything is written, every folder on each path must be a folder and no link (or
///    absent, to be made), and each file absent or a regular file (no link, no folder):
///    otherwise [`SkillFileError::Blocked`] names the path, and nothing is written.
/// 2. The missing folders are made and each file is written and synced beside its place
///    (staged), every step beneath the root's descriptor without following a link. A failure
///    here removes what this call wrote and the folders it made.
/// 3. Only then is each renamed into place. A rename failing midway (the disk went away) leaves
///    the files renamed before it.
pub fn write_files(root: &Path, files: &[(&Path, &[u8])]) -> Result<(), SkillFileError> {
    use rustix::fs::AtFlags;
    use rustix::io::Errno;
    let canon_root = fs_err::canonicalize(root)?;
    let top = open_dir_resolved(&canon_root, Path::new(""), root)?;
    let blocked = |rel: &Path, why: &'static str| SkillFileError::Blocked {
        path: root.join(rel),
        why,
    };
    let io = |rel: &Path, e: Errno| SkillFileError::Io(at_path(&root.join(rel), e));
    // 1. Look at every path before writing any.
    let mut split = Vec::with_capacity(files.len());
    for (rel, _) in files {
        let mut parts = Vec::new();
        for c in rel.components() {
            match c {
                std::path::Component::Normal(p) => parts.push(p),
                _ => return Err(blocked(rel, "not a plain path inside the skill")),
            }
        }
        let Some((name, folders)) = parts.split_last() else {
            return Err(blocked(rel, "not a plain path inside the skill"));
        };
        let dir = walk_folders(&top, folders, None).map_err(|w| w.error(root, rel))?;
        if let Some(dir) = dir {
            match rustix::fs::statat(&dir, *name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) if rustix::fs::FileType::from_raw_mode(st.st_mode).is_file() => {}
                Ok(_) => {
                    return Err(blocked(
                        rel,
                        "not a regular file (a link or a folder) where band writes one",
                    ));
                }
                Err(Errno::NOENT) => {}
                Err(e) => return Err(io(rel, e)),
            }
        }
        split.push((folders.to_vec(), *name));
    }
    // 2. Make the folders and stage every file.
    let mut made: Vec<(std::os::fd::OwnedFd, std::ffi::OsString)> = Vec::new();
    let mut dirs = Vec::with_capacity(files.len());
    let outcome = (|| {
        for ((folders, _), (rel, _)) in split.iter().zip(files) {
            let dir = walk_folders(&top, folders, Some(&mut made))
                .map_err(|w| w.error(root, rel))?
                .ok_or_else(|| io(rel, Errno::NOENT))?;
            dirs.push(dir);
        }
        Ok(())
    })();
    let staged = outcome.and_then(|()| {
        split
            .iter()
            .zip(files)
            .zip(&dirs)
            .map(|(((_, name), (rel, contents)), dir)| {
                Staged::write(dir, name, contents, 0o644, None)
                    .map_err(|e| SkillFileError::Io(at_path(&root.join(rel), e)))
            })
            .collect::<Result<Vec<_>, _>>()
    });
    let staged = match staged {
        Ok(s) => s,
        Err(e) => {
            // The staged files are gone with their drop; the folders made, deepest first.
            for (parent, name) in made.iter().rev() {
                let _ = rustix::fs::unlinkat(parent, name.as_os_str(), AtFlags::REMOVEDIR);
            }
            return Err(e);
        }
    };
    // 3. Every file is written: into place.
    for (s, (rel, _)) in staged.into_iter().zip(files) {
        s.commit()
            .map_err(|e| SkillFileError::Io(at_path(&root.join(rel), e)))?;
    }
    Ok(())
}

/// The entries of the folder open at `dir`, `.` and `..` left out, sorted by name, each with
/// the type its listing gives (`FileType::Unknown` where the file system gives none). The one
/// listing that the lock's walk, the workspace's walk, its listing and its removal share.
pub fn dir_entries(
    dir: impl std::os::fd::AsFd,
) -> rustix::io::Result<Vec<(std::ffi::CString, rustix::fs::FileType)>> {
    let mut out = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if !matches!(name.to_bytes(), b"." | b"..") {
            out.push((name.to_owned(), entry.file_type()));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Why [`walk_folders`] stopped: at which of the folders (its path below the root) and how.
struct WalkStop {
    at: PathBuf,
    errno: Option<rustix::io::Errno>,
}

impl WalkStop {
    /// The error for writing `rel` below `root`: a folder that is a file or a link is named;
    /// anything else is an I/O error on `rel`.
    fn error(self, root: &Path, rel: &Path) -> SkillFileError {
        match self.errno {
            None => SkillFileError::Blocked {
                path: root.join(&self.at),
                why: "not a folder (a file or a link) where band writes one",
            },
            Some(e) => SkillFileError::Io(at_path(&root.join(rel), e)),
        }
    }
}

/// Open `folders` one below the other beneath `top`, following no link. A missing one ends the
/// walk with `None`, or, given `made`, is made (0755) and recorded there (its parent's descriptor
/// and its name, for a rollback). A component that is a file or a link stops it.
fn walk_folders(
    top: &std::os::fd::OwnedFd,
    folders: &[&std::ffi::OsStr],
    mut made: Option<&mut Vec<(std::os::fd::OwnedFd, std::ffi::OsString)>>,
) -> Result<Option<std::os::fd::OwnedFd>, WalkStop> {
    use rustix::fs::{Mode, OFlags};
    use rustix::io::Errno;
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut at = PathBuf::new();
    let stop = |at: &PathBuf, errno| WalkStop {
        at: at.clone(),
        errno,
    };
    let mut dir =
        rustix::fs::openat(top, ".", flags, Mode::empty()).map_err(|e| stop(&at, Some(e)))?;
    for part in folders {
        at.push(part);
        dir = match rustix::fs::openat(&dir, *part, flags, Mode::empty()) {
            Ok(d) => d,
            Err(Errno::NOENT) => {
                let Some(made) = made.as_deref_mut() else {
                    return Ok(None);
                };
                rustix::fs::mkdirat(&dir, *part, Mode::from_raw_mode(0o755))
                    .map_err(|e| stop(&at, Some(e)))?;
                let parent = rustix::fs::openat(&dir, ".", flags, Mode::empty())
                    .map_err(|e| stop(&at, Some(e)))?;
                made.push((parent, part.to_os_string()));
                rustix::fs::openat(&dir, *part, flags, Mode::empty())
                    .map_err(|e| stop(&at, Some(e)))?
            }
            Err(Errno::LOOP | Errno::NOTDIR) => return Err(stop(&at, None)),
            Err(e) => return Err(stop(&at, Some(e))),
        };
    }
    Ok(Some(dir))
}

/// Open the folder `rel` (no link on it, as [`resolve_inside`] found it; empty: the root) beneath
/// `canon_root`, as [`open_resolved`] opens a file: a component swapped for a link since is
/// refused, not followed.
fn open_dir_resolved(
    canon_root: &Path,
    rel: &Path,
    shown: &Path,
) -> Result<std::os::fd::OwnedFd, SkillFileError> {
    use rustix::fs::{Mode, OFlags};
    use rustix::io::Errno;
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let io = |e: Errno| SkillFileError::Io(at_path(shown, e));
    let mut dir = rustix::fs::open(canon_root, flags, Mode::empty()).map_err(io)?;
    // One component at a time, never following a link: what `openat2(RESOLVE_BENEATH |
    // RESOLVE_NO_SYMLINKS)` does, on every system.
    for c in rel.components() {
        let std::path::Component::Normal(part) = c else {
            return Err(SkillFileError::Outside {
                path: shown.to_path_buf(),
            });
        };
        dir = rustix::fs::openat(&dir, part, flags | OFlags::NOFOLLOW, Mode::empty()).map_err(
            |e| match e {
                Errno::LOOP | Errno::NOTDIR => SkillFileError::Outside {
                    path: shown.to_path_buf(),
                },
                e => io(e),
            },
        )?;
    }
    Ok(dir)
}

/// Open `rel` (a path with no link on it, as [`resolve_inside`] found it) beneath `canon_root`.
/// On Linux, `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)` from the
/// root's descriptor: a component swapped for a link since it was resolved makes the open fail
/// in the kernel (refused as a link out), so the file read is the file checked.
#[cfg(target_os = "linux")]
fn open_resolved(
    canon_root: &Path,
    rel: &Path,
    shown: &Path,
) -> Result<fs_err::File, SkillFileError> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    use rustix::io::Errno;
    let dir = fs_err::File::open(canon_root)?;
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
    match rustix::fs::openat2(
        &dir,
        rel,
        flags,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    ) {
        Ok(fd) => Ok(fs_err::File::from_parts(std::fs::File::from(fd), shown)),
        Err(Errno::XDEV | Errno::LOOP) => Err(SkillFileError::Outside {
            path: shown.to_path_buf(),
        }),
        // No openat2 (an old kernel, or a seccomp filter that hides it): the portable way.
        Err(Errno::NOSYS | Errno::PERM) => open_nofollow(canon_root, rel, shown),
        Err(e) => Err(SkillFileError::Io(std::io::Error::new(
            std::io::Error::from(e).kind(),
            format!("{}: {e}", shown.display()),
        ))),
    }
}

#[cfg(not(target_os = "linux"))]
fn open_resolved(
    canon_root: &Path,
    rel: &Path,
    shown: &Path,
) -> Result<fs_err::File, SkillFileError> {
    open_nofollow(canon_root, rel, shown)
}

/// The portable open of a resolved path: no link on it but, at the last component, one swapped
/// in since (refused by `O_NOFOLLOW`); a directory swapped meanwhile is not caught here.
fn open_nofollow(
    canon_root: &Path,
    rel: &Path,
    shown: &Path,
) -> Result<fs_err::File, SkillFileError> {
    use rustix::fs::{Mode, OFlags};
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
    match rustix::fs::open(canon_root.join(rel), flags, Mode::empty()) {
        Ok(fd) => Ok(fs_err::File::from_parts(std::fs::File::from(fd), shown)),
        Err(rustix::io::Errno::LOOP) => Err(SkillFileError::Outside {
            path: shown.to_path_buf(),
        }),
        Err(e) => Err(SkillFileError::Io(std::io::Error::new(
            std::io::Error::from(e).kind(),
            format!("{}: {e}", shown.display()),
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fs_err::os::unix::fs::symlink;

    fn skill() -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("s");
        fs_err::create_dir_all(root.join("scripts")).unwrap();
        fs_err::write(root.join("SKILL.md"), "---\nname: s\n---\n").unwrap();
        (t, root)
    }

    #[test]
    fn reads_a_plain_file_and_a_link_that_stays_inside() {
        let (_t, root) = skill();
        symlink("../SKILL.md", root.join("scripts/doc.md")).unwrap();
        assert_eq!(
            read_to_string(&root, Path::new("SKILL.md"), 1024).unwrap(),
            "---\nname: s\n---\n"
        );
        assert!(read_to_string(&root, &root.join("scripts/doc.md"), 1024).is_ok());
        assert!(read_to_string(&root, Path::new("scripts/../SKILL.md"), 1024).is_ok());
    }

    #[test]
    fn refuses_links_that_leave_the_skill_whatever_their_form() {
        let (t, root) = skill();
        let secret = t.path().join("secret");
        fs_err::write(&secret, "TOKEN=hunter2").unwrap();
        symlink(&secret, root.join("abs.md")).unwrap();
        symlink("../secret", root.join("rel.md")).unwrap();
        symlink("/proc/self/environ", root.join("environ.md")).unwrap();
        symlink("/nowhere/at/all", root.join("dangling.md")).unwrap();
        symlink(t.path(), root.join("up")).unwrap();
        for p in ["abs.md", "rel.md", "environ.md", "dangling.md", "up/secret"] {
            let e = read_to_string(&root, Path::new(p), 1024).unwrap_err();
            assert!(matches!(e, SkillFileError::Outside { .. }), "{p}: {e:?}");
            assert!(!e.to_string().contains("hunter2"));
        }
        for p in ["../secret", "/etc/passwd"] {
            assert!(matches!(
                read(&root, Path::new(p), 1024),
                Err(SkillFileError::Outside { .. })
            ));
        }
    }

    #[test]
    fn an_absolute_link_that_stays_inside_is_followed() {
        let (_t, root) = skill();
        symlink(root.join("SKILL.md"), root.join("scripts/abs.md")).unwrap();
        assert!(read(&root, Path::new("scripts/abs.md"), 1024).is_ok());
    }

    #[test]
    fn a_path_resolved_then_swapped_for_a_link_is_refused() {
        let (t, root) = skill();
        fs_err::create_dir(t.path().join("elsewhere")).unwrap();
        fs_err::write(t.path().join("elsewhere/x.md"), "secret").unwrap();
        fs_err::write(root.join("scripts/x.md"), "fine").unwrap();
        let shown = root.join("scripts/x.md");
        let (canon_root, rel) = resolve_inside(&root, &shown).unwrap();
        // The folder is swapped for a link after it was resolved.
        fs_err::rename(root.join("scripts"), root.join("old")).unwrap();
        symlink(t.path().join("elsewhere"), root.join("scripts")).unwrap();
        for e in [
            open_resolved(&canon_root, &rel, &shown).unwrap_err(),
            open_nofollow(&canon_root, Path::new("scripts"), &shown).unwrap_err(),
        ] {
            assert!(matches!(e, SkillFileError::Outside { .. }), "{e:?}");
        }
    }

    #[test]
    fn refuses_what_is_not_a_regular_file_without_blocking() {
        let (_t, root) = skill();
        let fifo = root.join("fifo.md");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        rustix::fs::mkfifoat(rustix::fs::CWD, c.as_c_str(), rustix::fs::Mode::RUSR).unwrap();
        let e = read(&root, Path::new("fifo.md"), 1024).unwrap_err();
        assert!(
            matches!(e, SkillFileError::NotRegular { kind: "a FIFO", .. }),
            "{e:?}"
        );
        let e = read(&root, Path::new("scripts"), 1024).unwrap_err();
        assert!(matches!(e, SkillFileError::NotRegular { .. }), "{e:?}");
        assert_eq!(read_quotable(&fifo, 1024), None);
    }

    #[test]
    fn reads_no_more_than_the_bound() {
        let (_t, root) = skill();
        fs_err::write(root.join("big.md"), vec![b'a'; 2048]).unwrap();
        let e = read(&root, Path::new("big.md"), 1024).unwrap_err();
        assert!(matches!(
            e,
            SkillFileError::TooLarge {
                size: 2048,
                limit: 1024,
                ..
            }
        ));
        assert!(read(&root, Path::new("big.md"), 2048).is_ok());
    }

    #[test]
    fn quotes_only_a_plain_file() {
        let (_t, root) = skill();
        symlink("/proc/self/environ", root.join("BAND.md")).unwrap();
        assert_eq!(read_quotable(&root.join("BAND.md"), 1 << 20), None);
        assert!(read_quotable(&root.join("SKILL.md"), 1 << 20).is_some());
    }

    #[test]
    fn a_rewrite_never_goes_through_a_link_out_of_the_skill() {
        let (t, root) = skill();
        let victim = t.path().join("bashrc");
        fs_err::write(&victim, "original").unwrap();
        symlink(&victim, root.join("BAND.md")).unwrap();
        assert!(matches!(
            replace(&root, Path::new("BAND.md"), b"---\n---\n"),
            Err(SkillFileError::Outside { .. })
        ));
        assert_eq!(fs_err::read_to_string(&victim).unwrap(), "original");
        // A link inside the skill: its target is rewritten, the link stays a link.
        fs_err::write(root.join("scripts/base.band.md"), "old").unwrap();
        symlink("scripts/base.band.md", root.join("x.band.md")).unwrap();
        replace(&root, Path::new("x.band.md"), b"new").unwrap();
        assert_eq!(
            fs_err::read_to_string(root.join("scripts/base.band.md")).unwrap(),
            "new"
        );
        assert!(
            fs_err::symlink_metadata(root.join("x.band.md"))
                .unwrap()
                .is_symlink()
        );
    }

    #[test]
    fn a_rewrite_keeps_the_files_mode_and_as_root_its_owner() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let (_t, root) = skill();
        let band = root.join("BAND.md");
        fs_err::write(&band, "old").unwrap();
        fs_err::set_permissions(&band, std::fs::Permissions::from_mode(0o640)).unwrap();
        let as_root = rustix::process::geteuid().is_root();
        if as_root {
            rustix::fs::chown(
                &band,
                Some(rustix::fs::Uid::from_raw(4242)),
                Some(rustix::fs::Gid::from_raw(4343)),
            )
            .unwrap();
        }
        replace(&root, Path::new("BAND.md"), b"new").unwrap();
        let m = fs_err::metadata(&band).unwrap();
        assert_eq!(m.permissions().mode() & 0o7777, 0o640);
        if as_root {
            assert_eq!((m.uid(), m.gid()), (4242, 4343));
        }
        assert_eq!(fs_err::read_to_string(&band).unwrap(), "new");
        // No temporary file is left beside it.
        let left: Vec<_> = fs_err::read_dir(&root)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    /// Every file and folder below `root`, relative, sorted: what a write left.
    fn listing(root: &Path) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in fs_err::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                out.push(p.strip_prefix(root).unwrap().display().to_string());
                if e.file_type().unwrap().is_dir() {
                    stack.push(p);
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn a_draft_is_written_whole_with_its_folders() {
        let (_t, root) = skill();
        fs_err::write(root.join("BAND.md"), "old").unwrap();
        write_files(
            &root,
            &[
                (Path::new("BAND.md"), b"band".as_slice()),
                (Path::new("schemas/input/a.json"), b"{}".as_slice()),
                (Path::new("schemas/output/a.json"), b"{}".as_slice()),
            ],
        )
        .unwrap();
        assert_eq!(
            fs_err::read_to_string(root.join("BAND.md")).unwrap(),
            "band"
        );
        assert_eq!(
            fs_err::read_to_string(root.join("schemas/output/a.json")).unwrap(),
            "{}"
        );
        assert!(!listing(&root).iter().any(|p| p.ends_with(".tmp")));
    }

    #[test]
    fn a_draft_blocked_anywhere_writes_nothing() {
        let (t, root) = skill();
        let outside = t.path().join("outside");
        fs_err::create_dir(&outside).unwrap();
        let before = listing(&root);
        let draft = |last: &'static str| {
            [
                (Path::new("BAND.md"), b"band".as_slice()),
                (Path::new("schemas/input/a.json"), b"{}".as_slice()),
                (Path::new(last), b"{}".as_slice()),
            ]
        };
        // A file where a folder belongs, a folder linked out, a link where a file belongs.
        fs_err::write(root.join("out-file"), "x").unwrap();
        symlink(&outside, root.join("linked")).unwrap();
        symlink(outside.join("planted"), root.join("dangling.json")).unwrap();
        let before = {
            let mut b = before;
            b.extend(["dangling.json", "linked", "out-file"].map(String::from));
            b.sort();
            b
        };
        for (last, blocked) in [
            ("out-file/a.json", "out-file"),
            ("linked/a.json", "linked"),
            ("dangling.json", "dangling.json"),
            ("scripts", "scripts"),
        ] {
            let e = write_files(&root, &draft(last)).unwrap_err();
            match &e {
                SkillFileError::Blocked { path, .. } => {
                    assert_eq!(path, &root.join(blocked), "{last}")
                }
                e => panic!("{last}: {e:?}"),
            }
            assert!(e.to_string().ends_with("nothing was written"), "{e}");
            assert_eq!(listing(&root), before, "{last}");
        }
        assert_eq!(fs_err::read_dir(&outside).unwrap().count(), 0);
    }

    #[test]
    fn a_draft_that_fails_while_written_leaves_no_file_and_no_folder() {
        let (_t, root) = skill();
        let before = listing(&root);
        // A name its temporary file cannot have (over 255 bytes with the temporary suffix):
        // the failure comes after the folders are made and the first file is staged.
        let long = format!("schemas/output/{}.json", "n".repeat(230));
        let e = write_files(
            &root,
            &[
                (Path::new("schemas/input/a.json"), b"{}".as_slice()),
                (Path::new(&long), b"{}".as_slice()),
            ],
        )
        .unwrap_err();
        assert!(matches!(e, SkillFileError::Io(_)), "{e:?}");
        assert_eq!(listing(&root), before);
    }
}
