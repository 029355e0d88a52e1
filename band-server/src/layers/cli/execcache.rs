//! The real programs behind the CLI layer, where nothing but an approved call can reach them.
//!
//! Inside the sandbox every wrapped name (`/band/bin/<name>` and `/usr/bin/<name>`) is band-shim,
//! so a command is checked against the band's patterns whether it is called by name, by
//! absolute path, through `env`, `xargs` or `bash -c`. The real program must still be started
//! somehow, and never by the script itself:
//!
//! - **Copies, execute-only.** Each program is copied once into `<state>/exec/cache/`
//!   (`<key>/<name>`, where the key is taken from the host file's path, inode, size and times, so
//!   a package upgrade makes a new entry) with mode `0111`. The kernel marks a process whose
//!   program it could not read as not dumpable, so nothing of the run's uid can open its
//!   `/proc/<pid>/exe`, `maps` or `mem`, or `ld.so` it. `#!` scripts are copied `0555` (their
//!   interpreter must read them).
//! - **Not in the sandbox at all.** No path inside the sandbox leads to a program's copy: the
//!   cache is outside the sandbox's mount tree. band-server opens each program of the run once
//!   (`O_PATH`, [`RunPrograms`]) and, for an allowed call only, hands that descriptor to the
//!   verified band-shim process that asked (`SCM_RIGHTS`, see [`crate::layers::cli::reports`]),
//!   which runs it with `execveat(fd, "", …, AT_EMPTY_PATH)`. The jail starts the entry's
//!   interpreter the same way, from a descriptor band-server gives bubblewrap. The path a running
//!   program reports for itself (`/proc/self/exe`, `/proc/self/maps`: the host path of the copy)
//!   names nothing inside, so learning it gains nothing: before, the copies were bound under
//!   random names in the sandbox, and a program that printed its own path (`sed -n p
//!   /proc/self/maps`, `readlink /proc/self/exe` in an allowed `python3 -c`) let the script run it
//!   with arguments `deny.cli` refuses and without `--trace` seeing it.
//! - **`#!` scripts run as their interpreter, decided by band-server.** `execveat` of a script
//!   would hand the interpreter `/dev/fd/N`, a name that says nothing about which script it is.
//!   So band-server does what the kernel would: an allowed call of a `#!` command is answered
//!   with its interpreter's descriptor and the kernel's argv (`/usr/bin/python3 /band/x/pip
//!   args…`); see [`crate::layers::cli::shim::resolve_call`]. The script's copy is readable at
//!   `/band/x/<name>` (reading it grants nothing, and running it, or giving that path to its
//!   interpreter, is judged as the command itself). `/band/x` holds nothing else: it is empty
//!   when no `#!` command is declared.
//!
//! band-shim itself is cached the same way (execute-only) and bound at `/band/shim`, so it is not
//! dumpable from its first instruction.
//!
//! `<state>/exec` is a tmpfs of its own ([`mount_cache`], once, under a lock): a run makes and
//! removes one directory and one link per `#!` script, which costs about 1 ms there and ten
//! times that on a disk filesystem. The copies take memory: the essentials are about 7 MB. It
//! is mounted `huge=within_size` where the kernel's tmpfs has huge pages, and each copy is
//! sized before it is written ([`write_entry`]), so every whole 2 MiB of a program is one huge
//! page: the program maps fewer, larger pages at each start.
//!
//! **Quotas (issue 36, item 5).** The cache is shared by every user of the state directory, so no
//! one skill may fill it. A skill's own programs ([`super::bundled`]) are copied before the
//! sandbox starts ([`ExecDir::admit_bundled`]), keyed by the requesting user's uid, the skill and
//! the content ([`charged_key`]: two users of one program each have a copy, so nothing one user
//! runs keeps another's quota in use), and charged to that user and skill within
//! [`CacheBounds`] (`[program_cache]` of the server config: `per_skill`, `per_owner`; all
//! charged entries together at most 768 MiB, the rest stays for host programs). A new entry that
//! would not fit first removes unused entries, least recently used first ([`make_room`]); an
//! entry a live run holds (its key in `<state>/exec/holds/<run>`, written under
//! `<state>/exec/cache.lock` before the run uses it, removed with the run's folder) never goes.
//! When nothing can go, the run that asked fails before its sandbox starts, with the program,
//! the bound and a hint ([`AdmitError`]). Host programs only root can change (`/usr/bin/jq`,
//! band-shim: the file and every directory above it root's and writable by no other user) are
//! the host's: one entry each for every run, charged to nobody (charging the first user to stage
//! one would let that user's quota be held by everyone else's runs, and the host's programs are
//! bounded by what root installed); only the total bounds them. A host program another user can
//! change or multiply (a venv's or a user's nvm or pyenv interpreter, a runtime tree's program
//! under a home, any file not root's, or in a folder a user may write) is charged like the
//! skill's own ([`host_owner`]): keyed by the requesting user, the skill and the file
//! ([`host_key`]), within the same bounds, with the same eviction. Such a program is copied on
//! its first call, inside the run: a refusal then is the command's (band-shim prints it, with
//! the hint, on the command's stderr) and the run's (a `program_cache` limit event), see
//! [`super::reports`].
//!
//! What is left: a running program can still run its own file again through `/proc/self/exe`
//! (the kernel lets a process open its own: not being dumpable guards it from others, not from
//! itself), with arguments of its choosing, unseen by the gate. Only a program that can exec an
//! arbitrary path can do that (an interpreter, `env`, `xargs`, `find -exec`), and only with
//! itself: `/proc/<pid>/exe` of any other process of the run cannot be opened. For an
//! interpreter the band allows, that is code it could run anyway; for an undeclared essential
//! (`env`, `xargs`), an unjudged call anyway; it matters for a command that can exec a path but
//! whose patterns refuse some of its own arguments (`allow: find *`, `deny: find * -delete`:
//! `find . -exec /proc/self/exe / -delete ;`). Landlock's execute right follows the file, not how
//! it was reached, and seccomp user notification reads exec paths from memory another thread can
//! change, so neither closes it (docs/security.md). The path a program reports
//! (`<cache>/<key>/<name>`, see [`cache_entry`]) is, inside, a symlink to `/band/bin/<name>`
//! (`SandboxPlan::self_links`): a program that runs that path (node's `process.execPath`, Go's
//! `os.Executable`) calls band-shim as `<name>`, an ordinary judged call. A program that finds
//! its installation from its own path (a JDK's `java`) is copied to its path inside that
//! installation (`<key>/bin/java`), and the sandbox puts the installation's other entries around
//! it as symlinks (`ExecPlan::links`, [`super::runtime::layout_links`]).

use fs_err::{self as fs, File};
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::sync::Arc;

use fs_err::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Where the run's `#!` scripts are readable inside the sandbox (nothing else is there).
pub(crate) const SANDBOX_EXEC: &str = "/band/x";

/// The file name band-shim's execute-only copy is cached under.
pub(crate) const SHIM_NAME: &str = "band-shim";
/// band-jail's name in the cache ([`ExecDir::link_helpers`]).
pub(crate) const JAIL_NAME: &str = "band-jail";

/// How the kernel starts a `#!` script: the interpreter's path and command name (the last
/// component of its path) and the single optional argument of the `#!` line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Shebang {
    /// The interpreter's path as the `#!` line writes it: the interpreter's `argv[0]`.
    pub(crate) path: String,
    pub(crate) interp: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) arg: Option<String>,
}

impl Shebang {
    /// The command that really interprets the script: the interpreter, or for
    /// `#!/usr/bin/env NAME` the name `env` looks up.
    pub(crate) fn effective_interpreter(&self) -> &str {
        match (&*self.interp, &self.arg) {
            ("env", Some(arg)) => arg.split_whitespace().last().unwrap_or(""),
            (interp, _) => interp,
        }
    }
}

/// Parse the `#!` line the way Linux does: up to the first newline, the interpreter path ends at
/// the first space or tab, and the rest (trimmed) is one optional argument.
pub(crate) fn parse_shebang(head: &[u8]) -> Option<Shebang> {
    let rest = head.strip_prefix(b"#!")?;
    let line = rest.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line)
        .ok()?
        .trim_matches([' ', '\t', '\r']);
    let (path, arg) = match line.find([' ', '\t']) {
        Some(i) => (
            &line[..i],
            Some(line[i..].trim_matches([' ', '\t']).to_string()),
        ),
        None => (line, None),
    };
    let interp = path.rsplit('/').next()?.to_string();
    if interp.is_empty() {
        return None;
    }
    Some(Shebang {
        path: path.to_string(),
        interp,
        arg: arg.filter(|a| !a.is_empty()),
    })
}

/// One program of the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Program {
    /// Its copy in the cache, on the host (never reachable inside the sandbox: band-server hands
    /// it over as a descriptor, see [`RunPrograms`]).
    pub(crate) file: PathBuf,
    /// Set when the program is a `#!` script.
    pub(crate) script: Option<Script>,
    /// The `argv[0]` it runs with, when not the call's own (a venv's python runs as
    /// `<venv>/bin/python`: `runtime::venv_argv0`).
    pub(crate) argv0: Option<String>,
}

/// A `#!` script of the run: its `#!` line, and where its interpreter reads it in the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Script {
    pub(crate) line: Shebang,
    /// `/band/x/<name>`.
    pub(crate) path: String,
}

/// Every wrapped name → its program.
pub(crate) type ExecTable = BTreeMap<String, Program>;

/// The run's programs as band-server hands them over: the table, and one open `O_PATH`
/// descriptor (close-on-exec) of each program's copy, by wrapped name ([`RunPrograms::fd`]).
/// Cloning shares the descriptors.
///
/// A program that is not a `#!` script is copied into the cache when the run first calls it, not
/// when the run starts: a cold state directory copies what the run uses (the entry's interpreter
/// and the commands it calls), not every essential (issue 17, item 2).
#[derive(Debug, Clone, Default)]
pub(crate) struct RunPrograms {
    pub(crate) table: ExecTable,
    fds: Arc<std::sync::Mutex<BTreeMap<String, Arc<OwnedFd>>>>,
    /// Not copied yet: name → (path in the cache entry, host file).
    pending: Arc<BTreeMap<String, (PathBuf, PathBuf)>>,
    store: Store,
}

impl RunPrograms {
    /// The descriptor of `name`'s copy, copying it into the cache on its first use: within the
    /// cache's bounds when it is charged to the run's user and skill ([`host_owner`]), else
    /// refused ([`AdmitError::Refused`], which the gate tells the command and the run's record).
    pub(crate) fn fd(&self, name: &str) -> Result<Arc<OwnedFd>, AdmitError> {
        let mut fds = self
            .fds
            .lock()
            .map_err(|_| io::Error::other("the program table's lock is poisoned"))?;
        if let Some(fd) = fds.get(name) {
            return Ok(Arc::clone(fd));
        }
        let Some((rel, host)) = self.pending.get(name) else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("`{name}` is not a program of this run"),
            )
            .into());
        };
        let owner = self.store.requester.as_ref().and_then(|r| {
            let m = fs::metadata(host).ok()?;
            host_owner(host, &m, r, &mut BTreeMap::new())
        });
        let cached = copy_into_cache(&self.store, rel, host, owner.as_ref())?;
        let fd = Arc::new(open_program(&cached.path)?);
        fds.insert(name.to_string(), Arc::clone(&fd));
        Ok(fd)
    }

    #[cfg(test)]
    /// The names whose copies this run has made or opened so far.
    pub(crate) fn opened(&self) -> Vec<String> {
        self.fds
            .lock()
            .map(|f| f.keys().cloned().collect())
            .unwrap_or_default()
    }
}

/// Open `path` with `O_PATH | O_CLOEXEC`: a descriptor that can be `execveat`ed (given execute
/// permission) but not read, and that pins the file as it was opened.
pub(crate) fn open_program(path: &Path) -> io::Result<OwnedFd> {
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
        .open(path)?;
    Ok(OwnedFd::from(f.into_file()))
}

/// A cached copy of a host program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cached {
    pub(crate) path: PathBuf,
    pub(crate) script: Option<Shebang>,
}

/// Upper bound of the `<state>/exec` tmpfs (it holds one copy of each program used lately).
pub(crate) const CACHE_TMPFS_SIZE: &str = "1g";
/// The cache's huge pages: only where a whole 2 MiB page lies within a file's size, so a small
/// program takes no more memory than before ([`write_entry`] sizes each copy first).
pub(crate) const CACHE_TMPFS_HUGE: &str = "huge=within_size";

/// Above this many bytes of copies, a run first removes the entries nobody used for
/// [`CACHE_IDLE`] ([`evict_idle`]): copies of programs since upgraded, of older band-shims, of
/// commands no band declares any more. Half the tmpfs.
pub(crate) const CACHE_EVICT_ABOVE: u64 = 512 << 20;

/// An entry unused for this long is no run's: it outlives the longest run the server allows
/// (one hour), and every run touches each entry it uses.
pub(crate) const CACHE_IDLE: std::time::Duration = std::time::Duration::from_secs(2 * 3600);

/// One top-level entry of the cache: a `<key>/` directory (or a file of the older
/// `<name>-<key>` layout), its size and when a run last used it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CacheEntry {
    pub(crate) path: PathBuf,
    pub(crate) bytes: u64,
    pub(crate) used: std::time::SystemTime,
    /// Whose entry it is, from its name ([`charge_of`]); `None`: a host program's.
    pub(crate) charge: Option<Charge>,
}

/// Which entries to remove: none while the cache holds at most `above` bytes; otherwise every
/// entry unused for longer than `idle`. A live run's entries are never among them (it touched
/// them when it started, and no run lasts `idle`); removing one would not hurt such a run
/// anyway: it holds its programs as descriptors and band-shim as a bind. Pure.
pub(crate) fn entries_to_evict(
    entries: &[CacheEntry],
    now: std::time::SystemTime,
    idle: std::time::Duration,
    above: u64,
) -> Vec<PathBuf> {
    let total: u64 = entries.iter().map(|e| e.bytes).sum();
    if total <= above {
        return Vec::new();
    }
    entries
        .iter()
        .filter(|e| now.duration_since(e.used).is_ok_and(|d| d > idle))
        .map(|e| e.path.clone())
        .collect()
}

/// The cache's entries as they are on disk (an entry that goes while it is looked at is left
/// out).
fn cache_entries(cache: &Path) -> io::Result<Vec<CacheEntry>> {
    let mut out = Vec::new();
    for e in fs::read_dir(cache)? {
        let e = e?;
        let Ok(m) = fs::symlink_metadata(e.path()) else {
            continue;
        };
        out.push(CacheEntry {
            path: e.path(),
            bytes: tree_bytes(&e.path(), &m),
            used: m.modified()?,
            charge: e.file_name().to_str().and_then(charge_of),
        });
    }
    Ok(out)
}

/// The bytes of the files at and under `path` (their length: a sparse file counts whole).
fn tree_bytes(path: &Path, m: &std::fs::Metadata) -> u64 {
    if !m.is_dir() {
        return m.len();
    }
    fs::read_dir(path)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let m = fs::symlink_metadata(e.path()).ok()?;
                    Some(tree_bytes(&e.path(), &m))
                })
                .sum()
        })
        .unwrap_or(0)
}

/// How often a run looks over the whole cache for idle entries ([`evict_idle_now_and_then`]).
/// Looking means a `stat` of every entry: per host and per interval, not per run (with a
/// thousand entries it cost a run 10–30 ms). Far below [`CACHE_IDLE`], so an idle entry goes
/// at most this much later; the tmpfs ([`CACHE_TMPFS_SIZE`]) is twice [`CACHE_EVICT_ABOVE`].
pub(crate) const CACHE_EVICT_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// Whether the last look over the cache (the time of the stamp file, `last`) is old enough for
/// another one at `now`: no stamp, a stamp older than `every`, or one from the future (a clock
/// set back). Pure.
pub(crate) fn eviction_due(
    last: Option<std::time::SystemTime>,
    now: std::time::SystemTime,
    every: std::time::Duration,
) -> bool {
    match last {
        None => true,
        Some(t) => match now.duration_since(t) {
            Ok(d) => d >= every,
            Err(_) => true,
        },
    }
}

/// The stamp of the last look over the cache: `<state>/exec/evicted`, beside the cache (not in
/// it, so it is never an entry).
pub(crate) fn eviction_stamp(state: &Path) -> PathBuf {
    state.join("exec").join("evicted")
}

/// [`evict_idle`], once per [`CACHE_EVICT_EVERY`] for all the servers of a state dir: the stamp
/// is moved forward first, so concurrent runs do not all look at once (two may; eviction is
/// idempotent). Returns what it removed (nothing when it did not look).
pub(crate) fn evict_idle_now_and_then(
    state: &Path,
    now: std::time::SystemTime,
) -> io::Result<Vec<PathBuf>> {
    let stamp = eviction_stamp(state);
    let last = match fs::metadata(&stamp) {
        Ok(m) => Some(m.modified()?),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    if !eviction_due(last, now, CACHE_EVICT_EVERY) {
        return Ok(Vec::new());
    }
    fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&stamp)?
        .set_modified(now)?;
    evict_idle(&cache_dir(state), now)
}

/// Remove the cache entries [`entries_to_evict`] picks. Returns what it removed.
pub(crate) fn evict_idle(cache: &Path, now: std::time::SystemTime) -> io::Result<Vec<PathBuf>> {
    let held = held_entries(&cache.with_file_name("holds"), cache)?;
    let mut gone = entries_to_evict(&cache_entries(cache)?, now, CACHE_IDLE, CACHE_EVICT_ABOVE);
    gone.retain(|p| !held.contains(p));
    for p in &gone {
        remove_entry(p)?;
    }
    Ok(gone)
}

/// Mark a cache entry used now (its `<key>/` directory's time: the copy itself may be running,
/// and is never opened for writing).
fn touch(dir: &Path) -> io::Result<()> {
    File::open(dir)?.set_modified(std::time::SystemTime::now())
}

/// Who a cache entry is charged to: the user who asked for the run (its uid; `SUDO_UID` of the
/// band-server started through sudo, [`requesting_uid`]) and the skill. A skill's own programs
/// are charged ([`ExecDir::admit_bundled`]), and so is a host program that a user other than root
/// can change ([`host_owner`]: a venv's, a user's nvm or pyenv interpreter); a host program only
/// root can change is the host's, shared by every run, and charged to nobody (see "Quotas" in
/// the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Owner {
    pub(crate) uid: u32,
    pub(crate) skill: String,
}

impl Owner {
    /// What the entries of this owner's skill are named by: [`Charge`].
    pub(crate) fn charge(&self) -> Charge {
        let tag: String = hex::encode(&Sha256::digest(self.skill.as_bytes())[..6]);
        Charge {
            uid: self.uid,
            skill: tag,
        }
    }
}

/// The user a run is for, whom its charged cache entries are charged to: `SUDO_UID` when
/// band-server runs as root through sudo (set by sudo, which band uses to start it; a warm server
/// is started with the same environment and keeps it, see `band::warm::ENV_INPUTS`), else
/// band-server's own user (root started it).
pub(crate) fn requesting_uid() -> u32 {
    let euid = crate::sys::euid();
    if euid != 0 {
        return euid;
    }
    std::env::var("SUDO_UID")
        .ok()
        .and_then(|u| u.parse().ok())
        .unwrap_or(euid)
}

/// Whether root alone can change a file or directory of this owner, group and mode: it is root's,
/// and no other user may write it (no write bit for others; a group's only for group 0). A
/// directory another user may write (`/tmp`, sticky or not, or a home) lets that user put new
/// names in it, each a new cache entry. Pure.
pub(crate) fn only_root_writes(uid: u32, gid: u32, mode: u32) -> bool {
    uid == 0 && mode & 0o002 == 0 && (mode & 0o020 == 0 || gid == 0)
}

/// Who a host program's cache entry is charged to, from the `(uid, gid, mode)` of its file and of
/// each directory above it: nobody (`None`, one entry shared by every run) when root alone can
/// change each of them ([`only_root_writes`]: what root installed, bounded by what root
/// installed); else `requester`, the run's user and skill, as for the skill's own programs. A
/// user's programs (a venv's, `~/.nvm`'s node, a tree under their home, a file they own anywhere)
/// are theirs to multiply, so they count against their share, never the host's. Pure.
pub(crate) fn charge_for(
    file: (u32, u32, u32),
    dirs: impl IntoIterator<Item = (u32, u32, u32)>,
    requester: &Owner,
) -> Option<Owner> {
    let root_only = |(uid, gid, mode): (u32, u32, u32)| only_root_writes(uid, gid, mode);
    (!(root_only(file) && dirs.into_iter().all(root_only))).then(|| requester.clone())
}

/// [`charge_for`] of the host file `host` (its metadata `m`), looking at the directories above it
/// (their verdicts kept in `dirs`, shared by the calls of one run: its programs are mostly in the
/// same few folders). A directory that cannot be looked at counts as another user's (charged:
/// bounded, fail closed).
pub(crate) fn host_owner(
    host: &Path,
    m: &std::fs::Metadata,
    requester: &Owner,
    dirs: &mut BTreeMap<PathBuf, bool>,
) -> Option<Owner> {
    let mut verdicts = Vec::new();
    for dir in host
        .ancestors()
        .skip(1)
        .filter(|d| !d.as_os_str().is_empty())
    {
        let root_only = *dirs.entry(dir.to_path_buf()).or_insert_with(|| {
            fs::metadata(dir).is_ok_and(|d| only_root_writes(d.uid(), d.gid(), d.mode()))
        });
        verdicts.push(if root_only { (0, 0, 0) } else { (1, 1, 0) });
    }
    charge_for((m.uid(), m.gid(), m.mode()), verdicts, requester)
}

/// The cache key of a host program's entry: [`cache_key`], and for an entry charged to `owner`
/// ([`host_owner`]) that key under the owner's charge ([`charged_key`]), so that two users, or
/// two skills, never share a charged entry.
pub(crate) fn host_key(host: &Path, m: &std::fs::Metadata, owner: Option<&Owner>) -> String {
    let key = cache_key(host, m);
    match owner {
        Some(o) => charged_key(&o.charge(), &key),
        None => key,
    }
}

/// The charge a cache entry's name carries: `o<uid>-<skill tag>-<content>` ([`charged_key`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Charge {
    pub(crate) uid: u32,
    /// 12 hex digits of the SHA-256 of the skill's name.
    pub(crate) skill: String,
}

/// The key of a charged entry: the owner, the skill and the content (its SHA-256, hex; for a host
/// program, its [`cache_key`]), so that an entry is one owner's and one skill's alone. Two owners of the same program each have their
/// own copy: nothing one user does keeps another's quota in use.
pub(crate) fn charged_key(charge: &Charge, sha256: &str) -> String {
    let content = sha256.get(..24).unwrap_or(sha256);
    format!("o{}-{}-{content}", charge.uid, charge.skill)
}

/// The charge of an entry, from its name (`None`: a host program's entry, shared). Pure.
pub(crate) fn charge_of(name: &str) -> Option<Charge> {
    let mut parts = name.strip_prefix('o')?.splitn(3, '-');
    let uid = parts.next()?.parse().ok()?;
    let skill = parts.next()?;
    parts.next()?;
    (skill.len() == 12 && skill.bytes().all(|b| b.is_ascii_hexdigit())).then(|| Charge {
        uid,
        skill: skill.to_string(),
    })
}

pub(crate) use crate::config::CacheBounds;

/// Why a new entry does not fit, once every entry that could go has gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The skill's entries that live runs hold, with the new one, would be over `per_skill`.
    Skill { held: u64, bound: u64 },
    /// The owner's entries that live runs hold, with the new one, would be over `per_owner`.
    Owner { held: u64, bound: u64 },
    /// The cache is full of entries live runs hold (`charged` or `total`).
    Full { held: u64, bound: u64 },
}

/// Which entries to remove so that an entry of `bytes` charged to `charge` (`None`: a host
/// program) fits: for a charged one, within its skill's bound (taking the skill's own unused
/// entries first), its owner's (then the owner's other skills'), and all charged entries'
/// (then anyone's); then within the total (then host programs' too). Each time least recently
/// used first, and never an entry in `held` (a live run holds it: removing it would free
/// nothing, the run's descriptor keeps the file). Pure.
pub(crate) fn make_room(
    entries: &[CacheEntry],
    held: &std::collections::BTreeSet<PathBuf>,
    charge: Option<&Charge>,
    bytes: u64,
    b: &CacheBounds,
) -> Result<Vec<PathBuf>, Refusal> {
    let mut order: Vec<&CacheEntry> = entries.iter().filter(|e| !held.contains(&e.path)).collect();
    order.sort_by(|a, b| a.used.cmp(&b.used).then_with(|| a.path.cmp(&b.path)));
    let mut gone: Vec<PathBuf> = Vec::new();
    let mut fit = |of: &dyn Fn(&CacheEntry) -> bool, bound: u64| -> Result<(), u64> {
        let mut used: u64 = entries
            .iter()
            .filter(|e| of(e) && !gone.contains(&e.path))
            .map(|e| e.bytes)
            .sum();
        for e in &order {
            if used.saturating_add(bytes) <= bound {
                break;
            }
            if of(e) && !gone.contains(&e.path) {
                used -= e.bytes;
                gone.push(e.path.clone());
            }
        }
        if used.saturating_add(bytes) <= bound {
            Ok(())
        } else {
            Err(used)
        }
    };
    if let Some(c) = charge {
        fit(&|e| e.charge.as_ref() == Some(c), b.per_skill).map_err(|held| Refusal::Skill {
            held,
            bound: b.per_skill,
        })?;
        fit(
            &|e| e.charge.as_ref().is_some_and(|x| x.uid == c.uid),
            b.per_owner,
        )
        .map_err(|held| Refusal::Owner {
            held,
            bound: b.per_owner,
        })?;
        fit(&|e| e.charge.is_some(), b.charged).map_err(|held| Refusal::Full {
            held,
            bound: b.charged,
        })?;
    }
    fit(&|_| true, b.total).map_err(|held| Refusal::Full {
        held,
        bound: b.total,
    })?;
    Ok(gone)
}

/// A program that did not go into the cache.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AdmitError {
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error("{}", refusal_text(.program, *.bytes, .owner, .refusal))]
    Refused {
        /// As the band names it (`./bin/tool`, or a command's name).
        program: String,
        bytes: u64,
        owner: Option<Owner>,
        refusal: Refusal,
    },
}

impl AdmitError {
    /// What to do about it.
    pub(crate) fn hint(&self) -> Option<String> {
        let AdmitError::Refused { refusal, .. } = self else {
            return None;
        };
        Some(match refusal {
            Refusal::Skill { .. } => "use smaller programs (the skill's own, and the programs you own on the host that it runs, count against its share), or have the host's administrator raise `per_skill` under [program_cache] in /etc/band/server.toml".into(),
            Refusal::Owner { .. } => "wait for your other runs to end, or have the host's administrator raise `per_owner` under [program_cache] in /etc/band/server.toml".into(),
            Refusal::Full { .. } => "try again once other runs have ended; the host's administrator can lower `per_owner` under [program_cache] in /etc/band/server.toml so that more users fit".into(),
        })
    }
}

fn refusal_text(program: &str, bytes: u64, owner: &Option<Owner>, r: &Refusal) -> String {
    use band::units::format_bytes as b;
    let head = format!(
        "program `{program}` ({}) does not fit in the program cache",
        b(bytes)
    );
    match (r, owner) {
        (Refusal::Skill { held, bound }, Some(o)) => format!(
            "{head}: skill `{}` of uid {} would keep {} there, over the per-skill bound of {} (program_cache.per_skill)",
            o.skill,
            o.uid,
            b(held + bytes),
            b(*bound)
        ),
        (Refusal::Owner { held, bound }, Some(o)) => format!(
            "{head}: uid {}'s running skills hold {} there, and with it would be over the per-owner bound of {} (program_cache.per_owner)",
            o.uid,
            b(*held),
            b(*bound)
        ),
        (Refusal::Full { held, bound }, _)
        | (Refusal::Skill { held, bound }, None)
        | (Refusal::Owner { held, bound }, None) => format!(
            "{head}: running runs hold {} of its {}",
            b(*held),
            b(*bound)
        ),
    }
}

/// `<state>/exec/holds/<run>`: the entries a live run holds, one key a line, written under the
/// cache's lock before the run uses the entry, removed with the run's folder.
pub(crate) fn holds_dir(state: &Path) -> PathBuf {
    state.join("exec").join("holds")
}

/// The keys every live run holds, as entry paths in `cache`.
fn held_entries(holds: &Path, cache: &Path) -> io::Result<std::collections::BTreeSet<PathBuf>> {
    let mut out = std::collections::BTreeSet::new();
    let rd = match fs::read_dir(holds) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    for e in rd {
        let e = e?;
        let text = match fs::read_to_string(e.path()) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        out.extend(
            text.lines()
                .filter(|l| !l.is_empty())
                .map(|l| cache.join(l)),
        );
    }
    Ok(out)
}

/// The cache's side of one run: where its entries are, its hold file, the bounds. Every change
/// to the cache's entries goes through [`Store::admit`], under `<state>/exec/cache.lock`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Store {
    cache: PathBuf,
    /// This run's hold file.
    hold: PathBuf,
    bounds: CacheBounds,
    /// The run's user and skill, whom a host program another user can change is charged to
    /// ([`host_owner`]); `None`: nothing is charged (band-shim and band-jail, tests).
    requester: Option<Owner>,
}

impl Store {
    fn new(state: &Path, run_id: &str, bounds: CacheBounds, requester: Option<Owner>) -> Store {
        Store {
            cache: cache_dir(state),
            hold: holds_dir(state).join(run_id),
            bounds,
            requester,
        }
    }

    fn lock(&self) -> io::Result<File> {
        let path = self
            .cache
            .parent()
            .unwrap_or(&self.cache)
            .join("cache.lock");
        let f = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(path)?;
        f.lock()?;
        Ok(f)
    }

    fn hold(&self, key: &str) -> io::Result<()> {
        if let Some(dir) = self.hold.parent() {
            ensure_dir(dir, 0o700)?;
        }
        let mut f = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&self.hold)?;
        f.write_all(format!("{key}\n").as_bytes())
    }

    /// Put the entry `<cache>/<key>/<rel>` in place, from `source` (`write` makes the file at the
    /// path it is given, of the `bytes` it is told), within the bounds, and mark it held by this
    /// run; an entry already there is only marked. `program` names it in a refusal.
    fn admit(
        &self,
        key: &str,
        rel: &Path,
        bytes: u64,
        owner: Option<&Owner>,
        program: &str,
        write: &dyn Fn(&Path, u64) -> io::Result<Option<Shebang>>,
    ) -> Result<Cached, AdmitError> {
        let _lock = self.lock()?;
        let key_dir = self.cache.join(key);
        let entry = key_dir.join(rel);
        if let Ok(m) = fs::symlink_metadata(&entry)
            && m.is_file()
        {
            self.hold(key)?;
            touch(&key_dir)?;
            let script = if m.mode() & 0o444 != 0 {
                parse_shebang(&read_head(&entry)?)
            } else {
                None
            };
            return Ok(Cached {
                path: entry,
                script,
            });
        }
        let held = held_entries(self.hold.parent().unwrap_or(&self.hold), &self.cache)?;
        let charge = owner.map(Owner::charge);
        let gone = make_room(
            &cache_entries(&self.cache)?,
            &held,
            charge.as_ref(),
            bytes,
            &self.bounds,
        )
        .map_err(|refusal| AdmitError::Refused {
            program: program.to_string(),
            bytes,
            owner: owner.cloned(),
            refusal,
        })?;
        for p in &gone {
            remove_entry(p)?;
        }
        self.hold(key)?;
        ensure_dir(&key_dir, 0o711)?;
        touch(&key_dir)?;
        let mut d = key_dir.clone();
        for c in rel.parent().into_iter().flat_map(Path::components) {
            d.push(c);
            ensure_dir(&d, 0o711)?;
        }
        let script = write(&entry, bytes)?;
        Ok(Cached {
            path: entry,
            script,
        })
    }
}

fn remove_entry(p: &Path) -> io::Result<()> {
    let r = if fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()) {
        fs::remove_dir_all(p)
    } else {
        fs::remove_file(p)
    };
    match r {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Write `data` as the cache file at `entry`: through a temporary file beside its key directory,
/// execute-only (`0555` for a `#!` script), linked into place unless another was first.
///
/// `len` is the size `data` is expected to have. The file is given that size before it is
/// written, so that the cache's tmpfs (`huge=within_size`, [`mount_cache`]) can hold each 2 MiB
/// of it in one huge page: a program started from there maps fewer, larger pages (a python
/// job's start about 0.5 ms shorter here). The file ends where `data` did, whatever `len` said.
fn write_entry(entry: &Path, data: &mut dyn Read, len: u64) -> io::Result<Option<Shebang>> {
    let dir = entry
        .parent()
        .ok_or_else(|| io::Error::other(format!("{} has no folder", entry.display())))?;
    let name = entry
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("program");
    let tmp = dir.join(format!(
        ".tmp-{name}-{}-{}",
        std::process::id(),
        random_hex(1)?[0]
    ));
    let result = (|| {
        let mut dst = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        dst.set_len(len)?;
        let mut head = Vec::new();
        (&mut *data).take(256).read_to_end(&mut head)?;
        dst.write_all(&head)?;
        let written = head.len() as u64 + io::copy(data, &mut dst)?;
        // Shorter than said (the file changed since it was looked at): no zeros after it.
        dst.set_len(written)?;
        dst.flush()?;
        // Closed before it can be run: a file still open for writing cannot be exec'd (ETXTBSY).
        drop(dst);
        let script = parse_shebang(&head);
        let mode = if script.is_some() { 0o555 } else { 0o111 };
        fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))?;
        // The first copy in place stays: another server may already have opened or bound it
        // (its peer check holds that inode), so a later copy is never renamed over it.
        match fs::hard_link(&tmp, entry) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(e),
            _ => Ok(script),
        }
    })();
    let _ = fs::remove_file(&tmp);
    result
}

/// A program of the skill for [`ExecDir::admit_bundled`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct BundledCopy<'a> {
    /// Its table name (`skill:bin:tool`).
    pub(crate) name: &'a str,
    /// As the band names it (`./bin/tool`).
    pub(crate) shown: &'a str,
    /// SHA-256 of `data`, hex.
    pub(crate) sha256: &'a str,
    pub(crate) data: &'a [u8],
}

/// Why the program cache could not be mounted. File system errors name their path (fs-err).
#[derive(Debug, thiserror::Error)]
pub(crate) enum CacheMountError {
    #[error(transparent)]
    Fs(#[from] io::Error),
    #[error("failed to mount a tmpfs on {}: {source}", .path.display())]
    Mount { path: PathBuf, source: io::Error },
    #[error("failed to make {} private: {source}", .path.display())]
    Private { path: PathBuf, source: io::Error },
}

/// Mount a tmpfs on `<state>/exec` unless one is there already (a later server, or a server that
/// raced this one and won the lock first, sees it and does nothing). Needs root.
pub(crate) fn mount_cache(state: &Path) -> Result<(), CacheMountError> {
    let exec = state.join("exec");
    let is_mount = |p: &Path| -> io::Result<bool> {
        let parent = fs::metadata(state)?;
        Ok(fs::metadata(p).is_ok_and(|m| m.dev() != parent.dev()))
    };
    if is_mount(&exec)? {
        return Ok(());
    }
    let lock_path = state.join("exec.lock");
    let lock = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&lock_path)?;
    lock.lock()?;
    if is_mount(&exec)? {
        return Ok(());
    }
    ensure_dir(&exec, 0o711)?;
    let options = format!("size={CACHE_TMPFS_SIZE},mode=0711,uid=0,gid=0");
    // Huge pages for the copies' whole 2 MiB pieces ([`write_entry`]); a kernel without them
    // for tmpfs (no transparent huge pages) refuses the option, and gets the plain tmpfs.
    match crate::sys::mount_tmpfs(&exec, &format!("{options},{CACHE_TMPFS_HUGE}")) {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            crate::sys::mount_tmpfs(&exec, &options)
        }
        r => r,
    }
    .map_err(|source| CacheMountError::Mount {
        path: exec.clone(),
        source,
    })?;
    crate::sys::make_private(&exec)
        .map_err(|source| CacheMountError::Private { path: exec, source })
}

pub(crate) fn cache_dir(state: &Path) -> PathBuf {
    state.join("exec").join("cache")
}

pub(crate) fn runs_root(state: &Path) -> PathBuf {
    state.join("exec").join("runs")
}

/// The cache key of a host file: its path and identity (device, inode, size, times). Any package
/// upgrade changes at least one of them.
pub(crate) fn cache_key(host: &Path, m: &std::fs::Metadata) -> String {
    let mut h = Sha256::new();
    h.update(host.as_os_str().as_encoded_bytes());
    for n in [
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime() as u64,
        m.mtime_nsec() as u64,
        m.ctime() as u64,
        m.ctime_nsec() as u64,
    ] {
        h.update(n.to_le_bytes());
    }
    hex::encode(&h.finalize()[..12])
}

/// The first 256 bytes of a file (enough for its `#!` line).
pub(crate) fn read_head(path: &Path) -> io::Result<Vec<u8>> {
    read_first(path, 256)
}

/// The first `max` bytes of a file (fewer if it is shorter).
pub(crate) fn read_first(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let mut head = Vec::new();
    File::open(path).and_then(|f| f.take(max).read_to_end(&mut head))?;
    Ok(head)
}

/// Make a directory with exactly `mode` (no umask), or accept an existing one.
fn ensure_dir(path: &Path, mode: u32) -> io::Result<()> {
    crate::common::dirs::dir_with_mode(path, mode, false, None)
}

/// Make `<state>/exec/{cache,runs}`: traversable (bubblewrap, as the run's uid, binds from
/// here), not listable.
fn ensure_dirs(state: &Path) -> io::Result<()> {
    ensure_dir(&state.join("exec"), 0o711)?;
    ensure_dir(&cache_dir(state), 0o711)?;
    ensure_dir(&runs_root(state), 0o711)
}

/// The execute-only (or, for a `#!` script, read-only) copy of `host` in the cache, made on first
/// use. Concurrent servers may copy the same file at once: each writes its own temporary file and
/// links it into place unless another was first, so the entry is always whole and never changes
/// once made.
#[cfg(test)]
pub(crate) fn cached_copy(state: &Path, name: &str, host: &Path) -> io::Result<Cached> {
    ensure_dirs(state)?;
    let store = Store::new(state, "test", CacheBounds::default(), None);
    copy_into_cache(&store, Path::new(name), host, None)
        .map_err(|e| io::Error::other(e.to_string()))
}

/// Where the copy of `name` with cache key `key` is: `<cache>/<key>/<name>`. The file keeps the
/// command's own name, so a program that starts itself again by the path it reports
/// (`/proc/self/exe`) calls band-shim under that name (see `SandboxPlan::self_links`). (Before,
/// entries were files named `<name>-<key>`; a directory named by the bare key never meets one.)
pub(crate) fn cache_entry(cache: &Path, name: &str, key: &str) -> PathBuf {
    cache.join(key).join(name)
}

/// The copy of `host` at `<cache>/<key>/<rel>`: `rel` is the command's name, or for a program
/// with an installation of its own its path there (`bin/java`, see
/// [`super::runtime::install_layout`]), so that the path it reports for itself has its
/// installation around it in the sandbox (`ExecPlan::links`). Charged to `owner` when it is
/// someone's ([`host_owner`]: keyed by [`host_key`], within the bounds), else shared.
fn copy_into_cache(
    store: &Store,
    rel: &Path,
    host: &Path,
    owner: Option<&Owner>,
) -> Result<Cached, AdmitError> {
    let meta = fs::metadata(host)?;
    store.admit(
        &host_key(host, &meta, owner),
        rel,
        meta.len(),
        owner,
        &host.to_string_lossy(),
        &|entry, len| write_entry(entry, &mut File::open(host)?, len),
    )
}

/// `n` names of 128 random bits each, as 32 hex characters (one read for all of them).
pub(crate) fn random_hex(n: usize) -> io::Result<Vec<String>> {
    let mut b = vec![0u8; 16 * n];
    File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b))?;
    Ok(b.chunks(16).map(hex::encode).collect())
}

/// A run's `/band/x`: `<state>/exec/runs/<run>/`, which holds a link to each `#!` script's copy,
/// and the run's programs ([`RunPrograms`]). Removed by [`ExecDir::remove`] (the run's teardown)
/// or, after a crash, by the janitor.
#[derive(Debug)]
pub(crate) struct ExecDir {
    pub(crate) root: PathBuf,
    pub(crate) programs: RunPrograms,
    /// `<state>/exec/cache`, made by [`ExecDir::make`], and this run's hold on its entries.
    store: Store,
    /// The links made, for a teardown that does not have to list anything.
    made: Vec<PathBuf>,
}

/// The sandbox's `/band/empty` and `/band/empty.d` (root, 0444 and 0555): what band-server binds
/// over the host's entries of the run's `/proc` (`layers::fs::proc_cover`).
fn proc_covers(root: &Path) -> io::Result<()> {
    use crate::common::paths::{PROC_COVER_DIR, PROC_COVER_FILE};
    let file = root.join(PROC_COVER_FILE);
    fs::write(&file, b"")?;
    fs::set_permissions(&file, std::fs::Permissions::from_mode(0o444))?;
    let dir = root.join(PROC_COVER_DIR);
    fs::create_dir(&dir)?;
    fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555))
}

impl ExecDir {
    /// The run's folder, before its programs: `x/`, `io/` (the mount point of the run's `io/`,
    /// which band-server binds writable over this read-only folder on the run directory's
    /// `view/`) and `bin` (a link to `/usr/bin`: `/band/bin` is the same wrappers). The run
    /// directory binds it at `/band` while [`ExecDir::populate`] fills it (a bind shows what is
    /// added to the folder later).
    ///
    /// `requester` is the run's user and skill ([`Owner`]), whom the host programs another user
    /// can change are charged to ([`host_owner`]).
    pub(crate) fn make(
        state: &Path,
        run_id: &str,
        bounds: CacheBounds,
        requester: Owner,
    ) -> io::Result<ExecDir> {
        ensure_dirs(state)?;
        evict_idle_now_and_then(state, std::time::SystemTime::now())?;
        let root = runs_root(state).join(run_id);
        fs::create_dir(&root)?;
        let dir = ExecDir {
            root,
            programs: RunPrograms::default(),
            store: Store::new(state, run_id, bounds, Some(requester)),
            made: Vec::new(),
        };
        let made = fs::create_dir(dir.root.join("x"))
            .and_then(|()| fs::create_dir(dir.root.join("io")))
            .and_then(|()| fs_err::os::unix::fs::symlink("/usr/bin", dir.root.join("bin")))
            .and_then(|()| proc_covers(&dir.root));
        if let Err(e) = made {
            let _ = dir.remove();
            return Err(e);
        }
        Ok(dir)
    }

    /// [`ExecDir::make`], then [`ExecDir::populate`]; removed again when either fails.
    #[cfg(test)]
    pub(crate) fn create(
        state: &Path,
        run_id: &str,
        programs: &[(String, PathBuf)],
        trees: &[PathBuf],
        layouts: &BTreeMap<String, PathBuf>,
    ) -> io::Result<ExecDir> {
        let requester = Owner {
            uid: 0,
            skill: "test".into(),
        };
        let mut dir = ExecDir::make(state, run_id, CacheBounds::default(), requester)?;
        if let Err(e) = dir.populate(programs, trees, layouts) {
            let _ = dir.remove();
            return Err(io::Error::other(e.to_string()));
        }
        Ok(dir)
    }

    /// [`cached_copy`] for a program outside the table (band-shim), in the cache this run's
    /// directory was made beside.
    /// band-server's own helpers are charged to nobody.
    pub(crate) fn cached_copy(&self, name: &str, host: &Path) -> Result<Cached, AdmitError> {
        copy_into_cache(&self.store, Path::new(name), host, None)
    }

    /// Put the skill's programs in the cache now, before the sandbox exists, each charged to
    /// `owner` ([`Owner`]: the requesting user and the skill) and keyed by its content: within
    /// the bounds (making room by removing unused entries, [`make_room`]), or refused, naming
    /// the program and the bound. They join the run's programs like declared commands (a `#!`
    /// one is linked at `/band/x/<name>`).
    pub(crate) fn admit_bundled(
        &mut self,
        owner: &Owner,
        programs: &[BundledCopy<'_>],
    ) -> Result<(), AdmitError> {
        let charge = owner.charge();
        for p in programs {
            let cached = self.store.admit(
                &charged_key(&charge, p.sha256),
                Path::new(p.name),
                p.data.len() as u64,
                Some(owner),
                p.shown,
                &|entry, len| write_entry(entry, &mut { p.data }, len),
            )?;
            self.add(p.name, cached, None)?;
        }
        Ok(())
    }

    /// Add the cached program `name` to the run's: its descriptor, and for a `#!` script its link
    /// in `x/` (unless `in_tree`: it runs at its host path, `host`).
    fn add(&mut self, name: &str, cached: Cached, in_tree: Option<&Path>) -> io::Result<()> {
        let fd = Arc::new(open_program(&cached.path)?);
        self.programs
            .fds
            .lock()
            .map_err(|_| io::Error::other("the program table's lock is poisoned"))?
            .insert(name.to_string(), fd);
        let script = match (cached.script, in_tree) {
            (None, _) => None,
            (Some(line), Some(host)) => Some(Script {
                line,
                path: host.to_string_lossy().into_owned(),
            }),
            (Some(line), None) => {
                let target = self.root.join("x").join(name);
                if let Err(e) = fs::hard_link(&cached.path, &target) {
                    // A state directory spread over two filesystems: copy instead (slower,
                    // same result). (By kind: an fs-err error carries no raw errno.)
                    if e.kind() != io::ErrorKind::CrossesDevices {
                        return Err(e);
                    }
                    fs::copy(&cached.path, &target)?;
                    fs::set_permissions(&target, std::fs::Permissions::from_mode(0o555))?;
                }
                self.made.push(target);
                Some(Script {
                    line,
                    path: format!("{SANDBOX_EXEC}/{name}"),
                })
            }
        };
        self.programs.table.insert(
            name.to_string(),
            Program {
                file: cached.path,
                script,
                argv0: None,
            },
        );
        Ok(())
    }

    /// Lay out the run's programs in the folder [`ExecDir::make`] made: `programs` are (wrapped
    /// name, host file) pairs. A `#!` script inside one of the run's runtime `trees` (bound at
    /// their host paths, see [`super::runtime`]) is given to its interpreter at its host path, so
    /// it finds its siblings (node's `require('./lib/x')`); others at `/band/x/<name>`. Then `x/`
    /// and the folder are made read-only. A program another user can change is charged to the
    /// run's user and skill ([`host_owner`]): a `#!` one over their share is refused here.
    pub(crate) fn populate(
        &mut self,
        programs: &[(String, PathBuf)],
        trees: &[PathBuf],
        layouts: &BTreeMap<String, PathBuf>,
    ) -> Result<(), AdmitError> {
        let mut pending = BTreeMap::new();
        let mut dirs = BTreeMap::new();
        for (name, host) in programs {
            if self.programs.table.contains_key(name) {
                // Admitted already (the skill's own programs, [`ExecDir::admit_bundled`]).
                continue;
            }
            let rel = layouts
                .get(name)
                .cloned()
                .unwrap_or_else(|| PathBuf::from(name));
            let head = read_head(host)?;
            let meta = fs::metadata(host)?;
            let owner = self
                .store
                .requester
                .as_ref()
                .and_then(|r| host_owner(host, &meta, r, &mut dirs));
            if parse_shebang(&head).is_none() {
                // Copied on first use (`RunPrograms::fd`); its entry is where it will be.
                let key = host_key(host, &meta, owner.as_ref());
                self.programs.table.insert(
                    name.clone(),
                    Program {
                        file: self.store.cache.join(key).join(&rel),
                        script: None,
                        argv0: None,
                    },
                );
                pending.insert(name.clone(), (rel, host.clone()));
                continue;
            }
            let cached = copy_into_cache(&self.store, &rel, host, owner.as_ref())?;
            let in_tree = trees.iter().any(|t| host.starts_with(t));
            self.add(name, cached, in_tree.then_some(host.as_path()))?;
        }
        self.programs.pending = Arc::new(pending);
        self.programs.store = self.store.clone();
        fs::set_permissions(self.root.join("x"), std::fs::Permissions::from_mode(0o555))?;
        Ok(fs::set_permissions(
            &self.root,
            std::fs::Permissions::from_mode(0o555),
        )?)
    }

    /// Hard links to band-shim's and band-jail's execute-only copies in the cache, at `shim` and
    /// `jail` beside `x/`: the whole folder is the sandbox's `/band`, one bind instead of one
    /// per file. (The cache and this folder share the `<state>/exec` tmpfs, so a link is
    /// always possible; the gate knows band-shim by its inode, so a copy would not do.)
    pub(crate) fn link_helpers(&mut self, shim: &Path, jail: &Path) -> io::Result<()> {
        let jail = copy_into_cache(&self.store, Path::new(JAIL_NAME), jail, None)
            .map_err(|e| io::Error::other(e.to_string()))?;
        for (from, name) in [(shim, "shim"), (jail.path.as_path(), "jail")] {
            let to = self.root.join(name);
            fs::hard_link(from, &to)?;
            self.made.push(to);
        }
        Ok(())
    }

    /// Remove the run's directory: what it made, by name, then anything else the slow way. Safe
    /// to repeat.
    pub(crate) fn remove(&self) -> io::Result<()> {
        for file in &self.made {
            let _ = fs::remove_file(file);
        }
        // The run no longer holds its entries: they may go when room is needed.
        let _ = fs::remove_file(&self.store.hold);
        for file in ["bin", "sock"] {
            let _ = fs::remove_file(self.root.join(file));
        }
        for dir in ["io", "x"] {
            let _ = fs::remove_dir(self.root.join(dir));
        }
        match fs::remove_dir(&self.root) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(_) => remove_run_dir(&self.root),
        }
    }
}

fn remove_run_dir(path: &Path) -> io::Result<()> {
    match fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// The run ids that have a directory under [`runs_root`] (for the janitor).
pub(crate) fn run_dirs(state: &Path) -> Vec<String> {
    fs::read_dir(runs_root(state))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Remove a dead run's directory (the janitor; `run` comes from [`run_dirs`]).
pub(crate) fn remove_stale(state: &Path, run: &str) -> io::Result<()> {
    match fs::remove_file(holds_dir(state).join(run)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    remove_run_dir(&runs_root(state).join(run))
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn idle_entries_go_only_when_the_cache_is_over_its_share() {
        use std::time::{Duration, SystemTime};
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(100_000);
        let e = |name: &str, bytes: u64, age_s: u64| CacheEntry {
            path: PathBuf::from(name),
            bytes,
            used: now - Duration::from_secs(age_s),
            charge: None,
        };
        let idle = Duration::from_secs(3600);
        let entries = [
            e("old", 600, 7200),
            e("fresh", 600, 10),
            e("jq-0123", 10, 4000),
        ];
        // Under the mark: nothing goes, however old.
        assert!(entries_to_evict(&entries, now, idle, 2000).is_empty());
        // Over it: every idle entry (the older layout's files too), never a fresh one.
        assert_eq!(
            entries_to_evict(&entries, now, idle, 1000),
            [PathBuf::from("old"), PathBuf::from("jq-0123")]
        );
    }

    #[test]
    fn eviction_removes_idle_copies_and_keeps_used_ones_on_disk() {
        let t = tempfile::tempdir().unwrap();
        let state = t.path().join("state");
        fs::create_dir(&state).unwrap();
        let elf = t.path().join("tool");
        fs::write(&elf, vec![0u8; 4096]).unwrap();
        let used = cached_copy(&state, "tool", &elf).unwrap();
        let cache = cache_dir(&state);
        let stale = cache.join("00000000000000000000dead");
        fs::create_dir(&stale).unwrap();
        fs::write(stale.join("old"), vec![0u8; 1024]).unwrap();
        let long_ago = std::time::SystemTime::now() - CACHE_IDLE * 2;
        File::open(&stale).unwrap().set_modified(long_ago).unwrap();
        let entries = cache_entries(&cache).unwrap();
        assert_eq!(entries.len(), 2, "{entries:?}");
        let gone = entries_to_evict(&entries, std::time::SystemTime::now(), CACHE_IDLE, 0);
        assert_eq!(gone, std::slice::from_ref(&stale));
        for p in gone {
            fs::remove_dir_all(p).unwrap();
        }
        assert!(used.path.is_file(), "a copy a run just used stays");
    }

    #[test]
    fn the_cache_is_looked_over_once_per_interval_not_per_run() {
        use std::time::{Duration, SystemTime};
        let now = SystemTime::now();
        let every = Duration::from_secs(60);
        assert!(eviction_due(None, now, every), "never looked");
        assert!(!eviction_due(
            Some(now - Duration::from_secs(5)),
            now,
            every
        ));
        assert!(eviction_due(Some(now - every), now, every));
        assert!(
            eviction_due(Some(now + Duration::from_secs(3600)), now, every),
            "a stamp from the future (clock set back) does not stop eviction for an hour"
        );

        let t = tempfile::tempdir().unwrap();
        let state = t.path();
        ensure_dirs(state).unwrap();
        let stale = cache_dir(state).join("00000000000000000000dead");
        fs::create_dir(&stale).unwrap();
        let long_ago = now - CACHE_IDLE * 2;
        File::open(&stale).unwrap().set_modified(long_ago).unwrap();
        // The first run looks (the cache is under its mark: nothing goes) and stamps.
        assert_eq!(
            evict_idle_now_and_then(state, now).unwrap(),
            Vec::<PathBuf>::new()
        );
        let stamped = fs::metadata(eviction_stamp(state))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(stamped, now);
        // The next runs within the interval do not look: the stamp stays.
        evict_idle_now_and_then(state, now + Duration::from_secs(30)).unwrap();
        let again = fs::metadata(eviction_stamp(state))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(again, now, "looked again within {CACHE_EVICT_EVERY:?}");
        // Once the interval is over, a run looks again.
        let later = now + CACHE_EVICT_EVERY;
        evict_idle_now_and_then(state, later).unwrap();
        let last = fs::metadata(eviction_stamp(state))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(last, later);
        assert!(stale.is_dir(), "under the mark, idle entries stay");
        let listed: Vec<_> = fs::read_dir(cache_dir(state)).unwrap().collect();
        assert_eq!(listed.len(), 1, "the stamp is not a cache entry");
    }

    fn sb(path: &str, arg: Option<&str>) -> Option<Shebang> {
        Some(Shebang {
            path: path.into(),
            interp: path.rsplit('/').next().unwrap_or_default().into(),
            arg: arg.map(str::to_string),
        })
    }

    #[test]
    fn shebang_lines_parse_like_the_kernel() {
        assert_eq!(parse_shebang(b"#!/bin/sh\nexit 0\n"), sb("/bin/sh", None));
        assert_eq!(
            parse_shebang(b"#! /usr/bin/python3 -E\n"),
            sb("/usr/bin/python3", Some("-E"))
        );
        assert_eq!(
            parse_shebang(b"#!/usr/bin/env -S node --no-warnings\r\n"),
            sb("/usr/bin/env", Some("-S node --no-warnings"))
        );
        assert_eq!(
            parse_shebang(b"#!/usr/bin/env\tnode  \n"),
            sb("/usr/bin/env", Some("node"))
        );
        assert_eq!(parse_shebang(b"#!python3\n"), sb("python3", None));
        assert_eq!(parse_shebang(b"\x7fELF\x02\x01"), None);
        assert_eq!(parse_shebang(b"#!\n"), None);
        assert_eq!(parse_shebang(b"#!/\n"), None);
    }

    #[test]
    fn effective_interpreters() {
        let s = |i: &str, a: Option<&str>| Shebang {
            path: format!("/usr/bin/{i}"),
            interp: i.into(),
            arg: a.map(str::to_string),
        };
        assert_eq!(s("python3", Some("-E")).effective_interpreter(), "python3");
        assert_eq!(s("env", Some("node")).effective_interpreter(), "node");
        assert_eq!(s("env", Some("-S node")).effective_interpreter(), "node");
        assert_eq!(s("env", None).effective_interpreter(), "env");
    }

    #[test]
    fn copies_are_execute_only_or_readable_scripts_and_reused() {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        fs::create_dir(&state).unwrap();
        let elf = tmp.path().join("tool");
        fs::write(&elf, b"\x7fELF binary").unwrap();
        let script = tmp.path().join("pip");
        fs::write(&script, b"#!/usr/bin/python3\nprint(1)\n").unwrap();

        let a = cached_copy(&state, "tool", &elf).unwrap();
        assert_eq!(fs::metadata(&a.path).unwrap().mode() & 0o7777, 0o111);
        assert_eq!(a.script, None);
        assert_eq!(
            fs::read(&a.path).unwrap(),
            b"\x7fELF binary",
            "root reads it back"
        );
        let b = cached_copy(&state, "pip", &script).unwrap();
        assert_eq!(fs::metadata(&b.path).unwrap().mode() & 0o7777, 0o555);
        assert_eq!(b.script, sb("/usr/bin/python3", None));
        assert_eq!(
            cached_copy(&state, "pip", &script).unwrap(),
            b,
            "second use hits the cache"
        );
        assert_eq!(
            fs::metadata(cache_dir(&state)).unwrap().mode() & 0o777,
            0o711
        );
        let leftovers: Vec<_> = fs::read_dir(cache_dir(&state))
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty());

        // A changed host file is a new entry.
        fs::write(&elf, b"\x7fELF binary, upgraded").unwrap();
        let c = cached_copy(&state, "tool", &elf).unwrap();
        assert_ne!(c.path, a.path);
    }

    #[test]
    fn a_run_directory_holds_only_the_scripts_and_every_program_is_a_descriptor() {
        // (The folder is the sandbox's /band: `x/` the scripts, `io/` a mount point, `bin` a
        // link to /usr/bin, `empty` and `empty.d` the covers of /proc; band-shim, band-jail and
        // the socket come later.)
        use std::os::fd::AsRawFd;
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        fs::create_dir(&state).unwrap();
        let elf = tmp.path().join("jq");
        fs::write(&elf, b"\x7fELF jq").unwrap();
        let sh = tmp.path().join("dash");
        fs::write(&sh, b"\x7fELF dash").unwrap();
        let pip = tmp.path().join("pip");
        fs::write(&pip, b"#!/usr/bin/python3 -E\nprint(1)\n").unwrap();
        let programs = vec![
            ("jq".to_string(), elf),
            ("pip".to_string(), pip),
            ("sh".to_string(), sh),
        ];
        let dir = ExecDir::create(&state, "run1", &programs, &[], &BTreeMap::new()).unwrap();
        assert_eq!(dir.root, runs_root(&state).join("run1"));
        assert_eq!(fs::metadata(&dir.root).unwrap().mode() & 0o777, 0o555);
        let list = |d: &Path| {
            let mut listed: Vec<String> = fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            listed.sort();
            listed
        };
        assert_eq!(list(&dir.root), ["bin", "empty", "empty.d", "io", "x"]);
        assert_eq!(
            fs::metadata(dir.root.join("empty")).unwrap().mode() & 0o7777,
            0o444
        );
        assert_eq!(fs::metadata(dir.root.join("empty")).unwrap().len(), 0);
        assert_eq!(
            fs::metadata(dir.root.join("empty.d")).unwrap().mode() & 0o7777,
            0o555
        );
        assert_eq!(list(&dir.root.join("empty.d")), Vec::<String>::new());
        assert_eq!(
            fs::read_link(dir.root.join("bin")).unwrap(),
            Path::new("/usr/bin")
        );
        assert_eq!(
            list(&dir.root.join("x")),
            ["pip"],
            "only the scripts are in /band/x"
        );
        assert_eq!(
            fs::metadata(dir.root.join("x")).unwrap().mode() & 0o777,
            0o555
        );
        let t = &dir.programs.table;
        assert_eq!(t.len(), 3);
        assert_eq!(t["jq"].script, None);
        assert!(t["jq"].file.starts_with(cache_dir(&state)), "{:?}", t["jq"]);
        assert!(!t["jq"].file.exists(), "copied on first use");
        dir.programs.fd("jq").unwrap();
        assert_eq!(fs::metadata(&t["jq"].file).unwrap().mode() & 0o7777, 0o111);
        let script = t["pip"].script.clone().unwrap();
        assert_eq!(script.path, "/band/x/pip");
        assert_eq!(
            script.line,
            parse_shebang(b"#!/usr/bin/python3 -E\n").unwrap()
        );
        let link = fs::metadata(dir.root.join("x/pip")).unwrap();
        assert_eq!(link.mode() & 0o7777, 0o555);
        assert_eq!(link.nlink(), 2, "hardlinked from the cache");
        // One O_PATH descriptor per program, of its copy.
        assert_eq!(
            dir.programs.opened(),
            ["jq", "pip"],
            "sh waits for its first use"
        );
        for name in ["jq", "pip", "sh"] {
            let fd = dir.programs.fd(name).unwrap();
            let target = fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
            assert_eq!(target, t[name].file, "{name}");
            let flags =
                fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())).unwrap();
            let flags = flags
                .lines()
                .find_map(|l| l.strip_prefix("flags:"))
                .map(|f| u32::from_str_radix(f.trim(), 8).unwrap())
                .unwrap();
            assert_eq!(flags & libc::O_PATH as u32, libc::O_PATH as u32, "{name}");
            assert_eq!(
                flags & libc::O_CLOEXEC as u32,
                libc::O_CLOEXEC as u32,
                "{name}"
            );
        }
        assert_eq!(run_dirs(&state), vec!["run1".to_string()]);

        let other = ExecDir::create(&state, "run2", &programs, &[], &BTreeMap::new()).unwrap();
        assert_eq!(
            other.programs.table, dir.programs.table,
            "the cache is shared"
        );
        dir.remove().unwrap();
        assert!(!dir.root.exists());
        dir.remove().unwrap();
        remove_stale(&state, "run2").unwrap();
        assert!(run_dirs(&state).is_empty());
    }

    #[test]
    fn a_missing_program_fails_and_leaves_no_run_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let programs = vec![("nope".to_string(), tmp.path().join("nope"))];
        let e = ExecDir::create(tmp.path(), "run1", &programs, &[], &BTreeMap::new()).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
        assert!(run_dirs(tmp.path()).is_empty());
    }

    #[test]
    fn a_run_copies_only_the_programs_it_uses() {
        use std::os::fd::AsRawFd;
        // Issue 17, item 2: a cold cache got every essential on a run's path. Now a run that
        // declares many programs and uses one makes one cache entry (besides its `#!` scripts).
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        fs::create_dir(&state).unwrap();
        let mut programs = Vec::new();
        for i in 0..30 {
            let host = tmp.path().join(format!("prog{i}"));
            fs::write(&host, format!("\x7fELF {i}")).unwrap();
            programs.push((format!("prog{i}"), host));
        }
        let entries = || fs::read_dir(cache_dir(&state)).unwrap().count();
        let dir = ExecDir::create(&state, "run1", &programs, &[], &BTreeMap::new()).unwrap();
        assert_eq!(entries(), 0, "nothing is copied before it is called");
        assert_eq!(dir.programs.table.len(), 30);
        let fd = dir.programs.fd("prog7").unwrap();
        assert_eq!(entries(), 1);
        assert_eq!(
            fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap(),
            dir.programs.table["prog7"].file
        );
        assert!(
            Arc::ptr_eq(&fd, &dir.programs.fd("prog7").unwrap()),
            "opened once"
        );
        assert_eq!(entries(), 1);
        assert!(dir.programs.fd("nope").is_err());
        assert_eq!(dir.programs.opened(), ["prog7"]);
    }

    fn owner(uid: u32, skill: &str) -> Owner {
        Owner {
            uid,
            skill: skill.into(),
        }
    }

    #[test]
    fn a_host_program_only_root_can_change_is_shared_and_any_other_is_the_requesters() {
        let req = owner(1000, "tool");
        let root_dir = (0, 0, 0o40755);
        let root_file = (0, 0, 0o100755);
        // What root installed, in folders only root writes: nobody's, one entry for every run.
        assert_eq!(charge_for(root_file, [root_dir, root_dir], &req), None);
        assert_eq!(
            charge_for((0, 0, 0o100775), [(0, 0, 0o40775)], &req),
            None,
            "group root may write"
        );
        // A user's file (a venv's, ~/.nvm's node): the requester's, under their bounds.
        assert_eq!(
            charge_for((1000, 1000, 0o100755), [root_dir], &req),
            Some(req.clone())
        );
        // Someone else's file is still charged to the run's user, never shared.
        assert_eq!(
            charge_for((2000, 2000, 0o100555), [root_dir], &req),
            Some(req.clone())
        );
        // Root's file that another user may write, or in a folder another user may write (and
        // so name it again and again: a new entry each time).
        for (file, dir) in [
            ((0, 0, 0o100757), root_dir),
            ((0, 50, 0o100775), root_dir),
            (root_file, (1000, 1000, 0o40755)),
            (root_file, (0, 0, 0o41777)),
            (root_file, (0, 50, 0o42775)),
        ] {
            assert_eq!(
                charge_for(file, [root_dir, dir], &req),
                Some(req.clone()),
                "{file:?} in {dir:?}"
            );
        }
        // The key says whose: two users (or two skills) of one file never share its entry.
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("python3");
        fs::write(&f, b"\x7fELF py").unwrap();
        let m = fs::metadata(&f).unwrap();
        let shared = host_key(&f, &m, None);
        assert_eq!(shared, cache_key(&f, &m));
        let mine = host_key(&f, &m, Some(&req));
        assert_eq!(charge_of(&mine), Some(req.charge()));
        assert_ne!(host_key(&f, &m, Some(&owner(2000, "tool"))), mine);
        assert_ne!(host_key(&f, &m, Some(&owner(1000, "other"))), mine);
    }

    #[test]
    fn a_file_a_user_owns_or_can_rename_is_charged_to_the_requester() {
        let req = owner(1000, "tool");
        let mut dirs = BTreeMap::new();
        // Made here: the test's user's (in a folder of the test's user, under a /tmp everyone
        // writes); as root, handed to a user.
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("node");
        fs::write(&f, b"\x7fELF node").unwrap();
        if crate::sys::euid() == 0 {
            fs_err::os::unix::fs::chown(&f, Some(4_136_010), None).unwrap();
        }
        let m = fs::metadata(&f).unwrap();
        assert_eq!(host_owner(&f, &m, &req, &mut dirs), Some(req.clone()));
        assert!(dirs.contains_key(t.path()), "{dirs:?}");
        // A program root installed where only root writes (as on any Linux host, else there is
        // nothing to look at): shared.
        let env = Path::new("/usr/bin/env");
        if let Ok(m) = fs::metadata(env)
            && only_root_writes(m.uid(), m.gid(), m.mode())
            && env.ancestors().skip(1).all(|d| {
                fs::metadata(d).is_ok_and(|d| only_root_writes(d.uid(), d.gid(), d.mode()))
            })
        {
            assert_eq!(host_owner(env, &m, &req, &mut dirs), None);
        }
    }

    #[test]
    fn a_users_program_in_a_run_is_charged_to_them_copied_when_called_and_refused_past_their_share()
    {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        fs::create_dir(&state).unwrap();
        let bounds = CacheBounds {
            per_skill: 4000,
            per_owner: 4000,
            charged: 10000,
            total: 12000,
        };
        // A venv's own programs: files of the user (here under a folder everyone writes, so
        // charged whoever the test runs as).
        let venv = tmp.path().join("venv/bin");
        fs::create_dir_all(&venv).unwrap();
        let small = venv.join("small");
        fs::write(&small, [b"\x7fELF".as_slice(), &[1; 1996]].concat()).unwrap();
        let big = venv.join("big");
        fs::write(&big, [b"\x7fELF".as_slice(), &[2; 4997]].concat()).unwrap();
        let programs = vec![("small".to_string(), small), ("big".to_string(), big)];
        let a = owner(1000, "hog");
        let mut run1 = ExecDir::make(&state, "run1", bounds, a.clone()).unwrap();
        run1.populate(&programs, &[], &BTreeMap::new()).unwrap();
        let t = &run1.programs.table;
        let entry = |p: &Program| {
            p.file
                .strip_prefix(cache_dir(&state))
                .unwrap()
                .components()
                .next()
                .unwrap()
                .as_os_str()
                .to_string_lossy()
                .into_owned()
        };
        assert_eq!(charge_of(&entry(&t["small"])), Some(a.charge()));
        assert!(!t["small"].file.exists(), "copied on its first call");
        run1.programs.fd("small").unwrap();
        assert!(t["small"].file.is_file());
        // Over the skill's share: refused, naming the program, the bound and what to do.
        let e = run1.programs.fd("big").unwrap_err();
        assert!(
            matches!(
                e,
                AdmitError::Refused {
                    refusal: Refusal::Skill {
                        held: 2000,
                        bound: 4000
                    },
                    ..
                }
            ),
            "{e:?}"
        );
        let text = e.to_string();
        assert!(
            text.contains("venv/bin/big") && text.contains("per_skill"),
            "{text}"
        );
        assert!(e.hint().unwrap().contains("per_skill"));
        // Another user's run of the same file: an entry of its own, never this one.
        let mut run2 = ExecDir::make(&state, "run2", bounds, owner(2000, "tool")).unwrap();
        run2.populate(&programs, &[], &BTreeMap::new()).unwrap();
        assert_ne!(run2.programs.table["small"].file, t["small"].file);
        run2.programs.fd("small").unwrap();
        let charged: Vec<Option<Charge>> = cache_entries(&cache_dir(&state))
            .unwrap()
            .into_iter()
            .map(|e| e.charge)
            .collect();
        assert_eq!(charged.len(), 2, "{charged:?}");
        assert!(
            charged.iter().all(Option::is_some),
            "nothing shared: {charged:?}"
        );
        run1.remove().unwrap();
        run2.remove().unwrap();
    }

    #[test]
    fn charged_entries_are_named_by_user_skill_and_content() {
        let a = owner(1000, "hog").charge();
        let key = charged_key(&a, &"ab".repeat(32));
        assert_eq!(charge_of(&key), Some(a.clone()));
        assert!(key.starts_with("o1000-"), "{key}");
        assert_ne!(
            charged_key(&owner(1001, "hog").charge(), &"ab".repeat(32)),
            key
        );
        assert_ne!(
            charged_key(&owner(1000, "other").charge(), &"ab".repeat(32)),
            key
        );
        // A host program's key (24 hex digits) and the older `<name>-<key>` files are nobody's.
        assert_eq!(charge_of("0123456789abcdef01234567"), None);
        assert_eq!(charge_of("jq-0123456789abcdef01234567"), None);
        assert_eq!(charge_of("o12-zz-x"), None);
    }

    #[test]
    fn room_is_made_least_recently_used_first_and_never_from_a_live_run() {
        use std::time::{Duration, SystemTime};
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(100_000);
        let (a, a2, b) = (
            owner(1000, "hog").charge(),
            owner(1000, "other").charge(),
            owner(2000, "x").charge(),
        );
        let e = |name: &str, c: Option<&Charge>, bytes: u64, age: u64| CacheEntry {
            path: PathBuf::from(name),
            bytes,
            used: now - Duration::from_secs(age),
            charge: c.cloned(),
        };
        let bounds = CacheBounds {
            per_skill: 100,
            per_owner: 150,
            charged: 300,
            total: 400,
        };
        let entries = [
            e("a-old", Some(&a), 40, 50),
            e("a-new", Some(&a), 40, 10),
            e("a2", Some(&a2), 60, 30),
            e("b", Some(&b), 100, 40),
            e("jq", None, 30, 60),
        ];
        let none = std::collections::BTreeSet::new();
        let held = |names: &[&str]| names.iter().map(PathBuf::from).collect();
        let p = |names: &[&str]| names.iter().map(PathBuf::from).collect::<Vec<_>>();
        // Within every bound: nothing goes.
        assert_eq!(
            make_room(&entries, &none, Some(&a), 10, &bounds),
            Ok(vec![])
        );
        // Over the skill's bound: the skill's own least recently used entry goes, nobody else's.
        assert_eq!(
            make_room(&entries, &none, Some(&a), 30, &bounds),
            Ok(p(&["a-old"]))
        );
        // Over it with both held by live runs: refused, only this skill.
        assert_eq!(
            make_room(&entries, &held(&["a-old", "a-new"]), Some(&a), 30, &bounds),
            Err(Refusal::Skill {
                held: 80,
                bound: 100
            })
        );
        // More than the bound itself: refused whatever could go.
        assert_eq!(
            make_room(&entries, &none, Some(&a), 101, &bounds),
            Err(Refusal::Skill {
                held: 0,
                bound: 100
            })
        );
        // Over the owner's bound: the skill's, then the owner's other skills' entries go.
        assert_eq!(
            make_room(&entries, &held(&["a-new"]), Some(&a2), 80, &bounds),
            Ok(p(&["a2", "a-old"]))
        );
        assert_eq!(
            make_room(&entries, &held(&["a-new", "a-old"]), Some(&a2), 80, &bounds),
            Err(Refusal::Owner {
                held: 80,
                bound: 150
            })
        );
        // Another user is never refused for what `a` holds: `b` is within its own bounds, and
        // room in the pool comes from unused entries, `a`'s or anyone's.
        let all_a = held(&["a-old", "a-new", "a2"]);
        assert_eq!(
            make_room(&entries, &all_a, Some(&b), 90, &bounds),
            Ok(p(&["b"]))
        );
        // A host program is charged to nobody: only the total bounds it, and it makes room.
        assert_eq!(make_room(&entries, &all_a, None, 100, &bounds), Ok(vec![]));
        assert_eq!(
            make_room(&entries, &all_a, None, 200, &bounds),
            Ok(p(&["jq", "b"]))
        );
        assert_eq!(
            make_room(
                &entries,
                &held(&["a-old", "a-new", "a2", "b", "jq"]),
                None,
                200,
                &bounds
            ),
            Err(Refusal::Full {
                held: 270,
                bound: 400
            })
        );
    }

    #[test]
    fn a_skill_over_its_share_fails_alone_and_another_user_still_gets_in() {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path();
        let bounds = CacheBounds {
            per_skill: 4000,
            per_owner: 5000,
            charged: 10000,
            total: 12000,
        };
        let data: Vec<Vec<u8>> = (0..4u8)
            .map(|i| {
                let mut d = b"\x7fELF".to_vec();
                d.resize(2000, i);
                d
            })
            .collect();
        let sha = |d: &[u8]| hex::encode(Sha256::digest(d));
        let shas: Vec<String> = data.iter().map(|d| sha(d)).collect();
        let copy = |i: usize, name: &'static str| BundledCopy {
            name,
            shown: name,
            sha256: &shas[i],
            data: &data[i],
        };
        let (a, b) = (owner(1000, "hog"), owner(2000, "tool"));
        // A's first run holds 2000 bytes of its skill.
        let mut run1 = ExecDir::make(state, "run1", bounds, a.clone()).unwrap();
        run1.admit_bundled(&a, &[copy(0, "skill:big0")]).unwrap();
        let fd = run1.programs.fd("skill:big0").unwrap();
        assert_eq!(
            fs::metadata(&run1.programs.table["skill:big0"].file)
                .unwrap()
                .mode()
                & 0o7777,
            0o111
        );
        // Its second run asks for two more programs of another skill: over A's 5000.
        let mut run2 = ExecDir::make(state, "run2", bounds, owner(1000, "hog2")).unwrap();
        let e = run2
            .admit_bundled(
                &owner(1000, "hog2"),
                &[copy(1, "skill:big1"), copy(2, "skill:big2")],
            )
            .unwrap_err();
        assert!(
            matches!(
                e,
                AdmitError::Refused {
                    refusal: Refusal::Owner {
                        held: 4000,
                        bound: 5000
                    },
                    ..
                }
            ),
            "{e:?}"
        );
        let text = e.to_string();
        assert!(
            text.contains("`skill:big2`") && text.contains("per_owner"),
            "{text}"
        );
        assert!(e.hint().unwrap().contains("[program_cache]"));
        // B's run, meanwhile, gets the same content as A's and its own: its own copies.
        let mut run3 = ExecDir::make(state, "run3", bounds, b.clone()).unwrap();
        run3.admit_bundled(&b, &[copy(0, "skill:big0"), copy(3, "skill:big3")])
            .unwrap();
        assert_ne!(
            run3.programs.table["skill:big0"].file,
            run1.programs.table["skill:big0"].file
        );
        run3.remove().unwrap();
        // Live runs' entries stayed; once A's first run ends, its entry is the one to go.
        assert!(run1.programs.table["skill:big0"].file.is_file());
        drop(fd);
        run1.remove().unwrap();
        run2.remove().unwrap();
        let mut run4 = ExecDir::make(state, "run4", bounds, owner(1000, "hog2")).unwrap();
        run4.admit_bundled(
            &owner(1000, "hog2"),
            &[copy(1, "skill:big1"), copy(2, "skill:big2")],
        )
        .unwrap();
        assert!(!run1.programs.table["skill:big0"].file.exists(), "evicted");
        let a_entries = cache_entries(&cache_dir(state))
            .unwrap()
            .into_iter()
            .filter(|e| e.charge.as_ref().is_some_and(|c| c.uid == 1000))
            .map(|e| e.bytes)
            .sum::<u64>();
        assert_eq!(a_entries, 4000, "A keeps what it holds, no more");
        // A skill that alone asks for more than a skill's share fails before anything is copied.
        let mut run5 = ExecDir::make(state, "run5", bounds, owner(1000, "hog3")).unwrap();
        let mut big = b"#!/bin/sh\n".to_vec();
        big.resize(4001, b'#');
        let big_sha = sha(&big);
        let e = run5
            .admit_bundled(
                &owner(1000, "hog3"),
                &[BundledCopy {
                    name: "skill:s",
                    shown: "./s",
                    sha256: &big_sha,
                    data: &big,
                }],
            )
            .unwrap_err();
        assert!(e.to_string().contains("per_skill"), "{e}");
        assert!(run5.programs.table.is_empty());
        run4.remove().unwrap();
        run5.remove().unwrap();
        assert_eq!(
            fs::read_dir(holds_dir(state)).unwrap().count(),
            0,
            "a run's holds go with it"
        );
    }

    /// A copy is the bytes read, whatever size it was given first: a source that shrank
    /// leaves no zeros after its end, one that grew is copied whole.
    #[test]
    fn a_cache_copy_ends_where_its_source_did() {
        let tmp = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        for (i, said) in [0, 1000, data.len() as u64, data.len() as u64 + 4096 * 5]
            .into_iter()
            .enumerate()
        {
            let entry = tmp.path().join(format!("p{i}"));
            write_entry(&entry, &mut &data[..], said).unwrap();
            assert_eq!(fs::read(&entry).unwrap(), data, "said {said}");
        }
    }

    /// Python, run as root: the number of a file's pages in the page cache and how many of them
    /// are parts of a transparent huge page (`/proc/kpageflags`, bit 22), seen through a
    /// mapping of it.
    const HUGE_PAGES_OF: &str = r#"
import mmap, os, struct, sys
path = sys.argv[1]
m = mmap.mmap(os.open(path, os.O_RDONLY), 0, prot=mmap.PROT_READ)
for off in range(0, len(m), 4096):
    m[off]
start = next(int(l.split()[0].split('-')[0], 16) for l in open('/proc/self/maps') if l.split()[5:] == [path])
pm, kf = open('/proc/self/pagemap', 'rb'), open('/proc/kpageflags', 'rb')
pages = huge = 0
for off in range(0, len(m), 4096):
    pm.seek((start + off) // 4096 * 8)
    e = struct.unpack('<Q', pm.read(8))[0]
    if e >> 63:
        kf.seek((e & ((1 << 55) - 1)) * 8)
        pages += 1
        huge += struct.unpack('<Q', kf.read(8))[0] >> 22 & 1
print(pages, huge)
"#;

    /// A program in the cache sits in huge pages wherever a whole 2 MiB of it does: the cache's
    /// tmpfs is mounted with `huge=within_size`, and each copy is given its size before it is
    /// written. On a kernel whose tmpfs has no huge pages (or with them denied), the cache is
    /// the plain tmpfs and the copy the same bytes.
    #[test]
    fn privileged_a_large_program_is_cached_in_huge_pages() {
        band_test::privileged!(
            (!rustix::process::geteuid().is_root()).then(|| "not root".to_string())
        );
        let shmem = fs::read_to_string("/sys/kernel/mm/transparent_hugepage/shmem_enabled")
            .unwrap_or_default();
        let huge_expected = !shmem.is_empty() && !shmem.contains("[deny]");
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().to_path_buf();
        let data: Vec<u8> = (0..(5u32 << 20) + 4097).map(|i| (i % 253) as u8).collect();
        // A thread of its own mount namespace: the cache's tmpfs goes when it ends.
        let (mount, pages) = std::thread::spawn(move || {
            crate::sys::own_mount_namespace().unwrap();
            mount_cache(&state).unwrap();
            let dir = cache_dir(&state).join("k");
            fs::create_dir_all(&dir).unwrap();
            let entry = dir.join("prog");
            write_entry(&entry, &mut &data[..], data.len() as u64).unwrap();
            assert!(
                fs::read(&entry).unwrap() == data,
                "the copy is the program's bytes"
            );
            let exec = state.join("exec");
            let mount = fs::read_to_string("/proc/thread-self/mountinfo")
                .unwrap()
                .lines()
                .find(|l| l.split(' ').nth(4) == exec.to_str())
                .expect("the cache's mount")
                .to_string();
            let out = std::process::Command::new("python3")
                .args(["-c", HUGE_PAGES_OF])
                .arg(&entry)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let counts: Vec<u64> = String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .map(|n| n.parse().unwrap())
                .collect();
            (mount, counts)
        })
        .join()
        .unwrap();
        let (in_cache, in_huge) = (pages[0], pages[1]);
        assert_eq!(
            in_cache,
            (5 << 8) + 2,
            "every page of the copy, mapped: {mount}"
        );
        if huge_expected {
            assert!(mount.contains("huge=within_size"), "{mount}");
            // The two whole 2 MiB pieces at least.
            assert!(
                in_huge >= 1024,
                "{in_huge} of {in_cache} pages in huge pages: {mount}"
            );
        } else {
            assert_eq!(in_huge, 0, "{mount}");
        }
    }
}
