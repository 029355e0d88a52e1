//! Hide the executables that live in the read-only library trees.
//!
//! `/usr/lib`, `/usr/libexec` and `/usr/lib64` are bound whole (libraries, interpreters' standard
//! libraries, locale and gconv data are all there). They also hold complete programs:
//! `/usr/lib/jvm/*/bin/java`, `/usr/lib/git-core/git`, compiler back ends, database servers. Without
//! this module a script could run any of them by absolute path, although `/usr/bin` has only the
//! declared commands.
//!
//! So every ELF executable in those trees whose name is not a shared object (`*.so`, `*.so.N`) is
//! removed from the sandbox's view: the tree is bound as a read-only overlay whose top layer holds
//! a whiteout for each of them (see `workdir`), so they do not exist at all (not by path, not
//! through `ld.so <file>`). Shell scripts there are left alone: their interpreter is itself an ordinary command
//! (`sh` is essential; `perl`, `python3` only when declared).
//!
//! "Executable" is what the kernel would run (any execute bit) or what the dynamic loader would:
//! `ld.so <file>` needs only to read and map its file, so an ELF program without an execute bit
//! (`ET_EXEC`, or `ET_DYN` with a `PT_INTERP`: a PIE) is hidden too ([`is_elf_program`]; issue
//! 36, item 8). Shared objects stay, whatever they do when run: a program needs them; those that
//! run at all (`libc.so.6`, `libcap.so.2`) print their version or usage and exit.
//!
//! A declared command keeps the helpers of its own tree: `gcc` keeps `/usr/lib/gcc/**`, `git`
//! keeps `/usr/lib/git-core/**`, and a command whose real file lives under the library trees
//! (`java` → `/usr/lib/jvm/java-17-openjdk-amd64/bin/java`) keeps that top directory
//! (`/usr/lib/jvm/java-17-openjdk-amd64/**`). This is a heuristic; see [`exempt_roots`].
//!
//! Scanning walks ~120,000 entries and takes 0.5 to 3 s, so it is kept off a run's path: the list
//! is stored in the state directory and host-wide ([`HOST_CACHE`]); a run uses the list it finds,
//! and when that list is stale (the package database or the top-level library directories
//! changed, or it is over an hour old) starts `band-server rescan-mask` in the background and
//! uses the stale list meanwhile (one scan at a time on the host). `band-server janitor` (at install
//! and boot) makes the list when there is none or it is stale ([`prepare`]), so no run waits for a
//! scan; only a run on a host where the janitor never ran scans while it waits
//! ([`load_or_scan_with`]): without the list the library trees' programs could not be hidden, and
//! a run does not start unprotected.

use fs_err as fs;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

pub use crate::common::paths::LIB_ROOTS;
/// Files whose change invalidates the cache (any package install touches the first).
const KEY_FILES: &[&str] = &[
    "/var/lib/dpkg/status",
    "/var/lib/rpm",
    "/usr/lib",
    "/usr/lib64",
    "/usr/libexec",
];
const MAX_AGE: Duration = Duration::from_secs(3600);
const CACHE_NAME: &str = "exec-mask.json";

#[derive(Debug, Serialize, Deserialize)]
struct Cache {
    key: String,
    files: Vec<PathBuf>,
}

/// Does this file name look like a shared object (`libc.so.6`, `x.so`, `ld-linux-x86-64.so.2`)?
pub(crate) fn is_shared_object_name(name: &str) -> bool {
    name.ends_with(".so") || name.contains(".so.")
}

fn is_elf(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && magic == *b"\x7fELF"
}

/// Is the file at `path` an ELF program the dynamic loader would start (`ld.so <path>`): type
/// `ET_EXEC`, or `ET_DYN` with a `PT_INTERP` program header (a position-independent program; a
/// shared library has none). Either class, either byte order; `false` for what cannot be read.
pub(crate) fn is_elf_program(path: &Path) -> bool {
    let Ok(mut f) = fs::File::open(path) else {
        return false;
    };
    let mut head = [0u8; 64];
    if f.read_exact(&mut head[..52]).is_err() || head[..4] != *b"\x7fELF" {
        return false;
    }
    let wide = head[4] == 2;
    let big = head[5] == 2;
    if wide && f.read_exact(&mut head[52..]).is_err() {
        return false;
    }
    let u16_at = |b: &[u8], at: usize| {
        let v = [b[at], b[at + 1]];
        if big {
            u16::from_be_bytes(v)
        } else {
            u16::from_le_bytes(v)
        }
    };
    let u32_at = |b: &[u8], at: usize| {
        let v = [b[at], b[at + 1], b[at + 2], b[at + 3]];
        if big {
            u32::from_be_bytes(v)
        } else {
            u32::from_le_bytes(v)
        }
    };
    const ET_EXEC: u16 = 2;
    const ET_DYN: u16 = 3;
    const PT_INTERP: u32 = 3;
    match u16_at(&head, 16) {
        ET_EXEC => return true,
        ET_DYN => {}
        _ => return false,
    }
    let (phoff, phentsize, phnum) = if wide {
        let mut v = [0u8; 8];
        v.copy_from_slice(&head[32..40]);
        let off = if big {
            u64::from_be_bytes(v)
        } else {
            u64::from_le_bytes(v)
        };
        (off, u16_at(&head, 54), u16_at(&head, 56))
    } else {
        (
            u64::from(u32_at(&head, 28)),
            u16_at(&head, 42),
            u16_at(&head, 44),
        )
    };
    let size = usize::from(phentsize) * usize::from(phnum);
    if phentsize < 4 || size > 1 << 20 {
        return false;
    }
    use std::io::{Seek, SeekFrom};
    let mut table = vec![0u8; size];
    if f.seek(SeekFrom::Start(phoff)).is_err() || f.read_exact(&mut table).is_err() {
        return false;
    }
    table
        .chunks_exact(usize::from(phentsize))
        .any(|ph| u32_at(ph, 0) == PT_INTERP)
}

/// The smallest ELF header (32-bit): a shorter file is no program.
const ELF_HEADER_MIN: u64 = 52;

/// Every ELF executable below `roots` (not following symlinks, not crossing into other file
/// systems), sorted: with an execute bit, or an ELF program without one ([`is_elf_program`]).
/// The second kind opens every file of the trees (about 100,000 here, most of them in
/// `/usr/share`): about a second more per scan, which runs off the runs' path.
pub(crate) fn scan(roots: &[&str]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for root in roots {
        let Ok(meta) = fs::symlink_metadata(root) else {
            continue;
        };
        if !meta.is_dir() {
            continue;
        }
        let dev = meta.dev();
        let mut stack = vec![PathBuf::from(root)];
        while let Some(dir) = stack.pop() {
            let Ok(rd) = fs::read_dir(&dir) else { continue };
            for e in rd.flatten() {
                let Ok(m) = e.metadata() else { continue };
                let p = e.path();
                if m.is_dir() {
                    if m.dev() == dev {
                        stack.push(p);
                    }
                } else if m.is_file()
                    && !is_shared_object_name(&e.file_name().to_string_lossy())
                    && if m.mode() & 0o111 != 0 {
                        is_elf(&p)
                    } else {
                        m.len() >= ELF_HEADER_MIN && is_elf_program(&p)
                    }
                {
                    out.push(p);
                }
            }
        }
    }
    out.sort();
    out
}

fn cache_key() -> String {
    // The roots are part of the key: a band-server with other roots must not reuse the list.
    let roots = LIB_ROOTS.join(",");
    let files = KEY_FILES
        .iter()
        .map(|f| match fs::metadata(f) {
            Ok(m) => format!("{f}:{}.{}:{}", m.mtime(), m.mtime_nsec(), m.ino()),
            Err(_) => format!("{f}:-"),
        })
        .collect::<Vec<_>>()
        .join(" ");
    // v2: ELF programs without an execute bit are in the list (issue 36).
    format!("v2 {roots} {files}")
}

/// Where the list is kept for the whole host, besides the state directory: it depends on the
/// host's `/usr`, not on the state directory, and outlives a state directory on a tmpfs
/// (`/run/band` after a reboot, a test's own).
pub const HOST_CACHE: &str = "/var/cache/band/exec-mask.json";

/// What [`load`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Loaded {
    /// A list for this key, younger than `MAX_AGE`.
    Fresh(Vec<PathBuf>),
    /// A list for another key (packages changed since) or an old one: used while a new one is
    /// made in the background ([`refresh_in_background`]).
    Stale(Vec<PathBuf>),
    Missing,
}

fn read_cache(path: &Path, key: &str, now: SystemTime) -> Loaded {
    let Ok(text) = fs::read(path) else {
        return Loaded::Missing;
    };
    let Ok(c) = serde_json::from_slice::<Cache>(&text) else {
        return Loaded::Missing;
    };
    let young = fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| now.duration_since(t).ok())
        .is_some_and(|age| age < MAX_AGE);
    if young && c.key == key {
        Loaded::Fresh(c.files)
    } else {
        Loaded::Stale(c.files)
    }
}

/// The list from the first of `caches` that has a fresh one, else the first stale one.
pub(crate) fn load(caches: &[&Path], key: &str, now: SystemTime) -> Loaded {
    let mut stale = None;
    for c in caches {
        match read_cache(c, key, now) {
            Loaded::Fresh(files) => return Loaded::Fresh(files),
            Loaded::Stale(files) if stale.is_none() => stale = Some(files),
            _ => {}
        }
    }
    stale.map_or(Loaded::Missing, Loaded::Stale)
}

/// Write the list to `path` (atomically; a failure leaves the old one).
fn store(path: &Path, key: &str, files: &[PathBuf]) {
    let Ok(text) = serde_json::to_vec(&Cache {
        key: key.to_string(),
        files: files.to_vec(),
    }) else {
        return;
    };
    if let Some(dir) = path.parent() {
        let _ = fs::create_dir_all(dir);
    }
    let tmp = path.with_extension(format!("json.{}", std::process::id()));
    if fs::write(&tmp, text).is_ok() && fs::rename(&tmp, path).is_err() {
        let _ = fs::remove_file(&tmp);
    }
}

/// Scan now and store the list in `state` and `host` (what `band-server rescan-mask` does, in
/// the background). One scan at a time on the host: the lock is the host list's
/// (`exec-mask.lock` beside [`HOST_CACHE`]), not the state directory's, so runs of many state
/// directories (a test suite's, a bench's fresh ones) that all find the list stale start one walk
/// of `/usr`, not one each on a 2-core machine. (The state directory's lock only where the host's
/// directory cannot be made.)
pub fn rescan(state: &Path, host: &Path) {
    rescan_with(state, host, &cache_key(), &|| scan(LIB_ROOTS));
}

/// [`rescan`] with its key and scan given; whether it scanned (`false`: another scan holds the
/// lock, or no lock could be made).
pub(crate) fn rescan_with(
    state: &Path,
    host: &Path,
    key: &str,
    scan: &dyn Fn() -> Vec<PathBuf>,
) -> bool {
    let open = |p: PathBuf| {
        fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(p)
    };
    let host_lock = host.with_extension("lock");
    let lock = host_lock
        .parent()
        .map_or(Ok(()), fs::create_dir_all)
        .and_then(|()| open(host_lock))
        .or_else(|_| open(state.join("exec-mask.lock")));
    let Ok(lock) = lock else { return false };
    if lock.file().try_lock().is_err() {
        return false;
    }
    let files = scan();
    store(&state.join(CACHE_NAME), key, &files);
    store(host, key, &files);
    true
}

/// Make sure the host has a fresh list (what `band-server janitor` does at install and boot, so
/// that no run, not even the first on a new host, waits for a scan). Whether it scanned.
pub fn prepare(state: &Path, host: &Path) -> bool {
    let key = cache_key();
    match load(&[host], &key, SystemTime::now()) {
        Loaded::Fresh(_) => false,
        Loaded::Stale(_) | Loaded::Missing => rescan_with(state, host, &key, &|| scan(LIB_ROOTS)),
    }
}

/// Start `band-server rescan-mask <state>` detached: it outlives this run's server.
pub(crate) fn refresh_in_background(state: &Path) {
    use std::os::unix::process::CommandExt;
    let Ok(me) = std::env::current_exe() else {
        return;
    };
    let _ = std::process::Command::new(me)
        .arg("rescan-mask")
        .arg(state)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn();
}

/// The executables to mask. Never a scan on a run's path once the host has a list: a fresh list
/// (the state directory's, else the host's [`HOST_CACHE`]) is used as it is; a stale one too,
/// while `refresh` makes a new one in the background. Only a host with no list at all scans
/// now (`scan`), and stores the list in both places.
pub(crate) fn load_or_scan_with(
    state: &Path,
    host: &Path,
    key: &str,
    scan: &dyn Fn() -> Vec<PathBuf>,
    refresh: &dyn Fn(),
) -> Vec<PathBuf> {
    let here = state.join(CACHE_NAME);
    match load(&[&here, host], key, SystemTime::now()) {
        Loaded::Fresh(files) => files,
        Loaded::Stale(files) => {
            refresh();
            files
        }
        Loaded::Missing => {
            let files = scan();
            store(&here, key, &files);
            store(host, key, &files);
            files
        }
    }
}

/// [`load_or_scan_with`] for this host.
pub fn load_or_scan(state: &Path) -> Vec<PathBuf> {
    load_or_scan_with(
        state,
        Path::new(HOST_CACHE),
        &cache_key(),
        &|| scan(LIB_ROOTS),
        &|| refresh_in_background(state),
    )
}

/// The library directories a declared command keeps unmasked:
///
/// - top-level entries of the library trees named after it: the name exactly, or followed by
///   `-`, `.`, `_` or a digit (`git` → `/usr/lib/git-core`, `python3` → `/usr/lib/python3.11`,
///   `valgrind` → `/usr/libexec/valgrind`);
/// - when its real file lives in a library tree, that tree's top directory
///   (`/usr/lib/jvm/<jdk>/bin/java` → `/usr/lib/jvm/<jdk>`, `/usr/lib/foo/x` → `/usr/lib/foo`).
pub(crate) fn exempt_roots(name: &str, real: &Path) -> Vec<PathBuf> {
    let named = |entry: &str| {
        entry == name
            || entry.strip_prefix(name).is_some_and(|rest| {
                rest.starts_with(['-', '.', '_']) || rest.starts_with(|c: char| c.is_ascii_digit())
            })
    };
    let mut out = Vec::new();
    for root in LIB_ROOTS {
        if let Ok(rd) = fs::read_dir(root) {
            for e in rd.flatten() {
                if named(&e.file_name().to_string_lossy()) {
                    out.push(e.path());
                }
            }
        }
        if let Ok(rest) = real.strip_prefix(root) {
            let comps: Vec<_> = rest.components().collect();
            if comps.len() >= 2 {
                let keep = if comps.len() > 3 { 2 } else { 1 };
                let mut p = PathBuf::from(root);
                for c in &comps[..keep] {
                    p.push(c);
                }
                out.push(p);
            }
        }
    }
    out
}

/// `files` minus those under any of `exempt`, except other ways to start one of the run's declared
/// `programs` (command name, host file): a file with the command's name or the host file's name,
/// or a copy of the host file. A declared command keeps its helpers, never a second way to start
/// itself without band-shim, so without its argument patterns (Debian's `/usr/lib/git-core/git`
/// is a full git; so is any `git` in that tree when the declared one is `/usr/local/bin/git`).
pub fn apply_exemptions(
    files: &[PathBuf],
    exempt: &[PathBuf],
    programs: &[(String, PathBuf)],
) -> Vec<PathBuf> {
    let is_program = |f: &Path| {
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
        programs.iter().any(|(cmd, host)| {
            name == cmd
                || host.file_name().and_then(|n| n.to_str()) == Some(name)
                || same_program(f, host)
        })
    };
    files
        .iter()
        .filter(|f| !exempt.iter().any(|e| f.starts_with(e)) || is_program(f))
        .cloned()
        .collect()
}

/// Are these the same program: the same file, or files of one size whose first and last 64 KiB
/// agree? (The library trees are read-only system files, so a look at both ends is enough; where
/// it errs, it errs towards masking.)
pub(crate) fn same_program(a: &Path, b: &Path) -> bool {
    let (Ok(ma), Ok(mb)) = (fs::metadata(a), fs::metadata(b)) else {
        return false;
    };
    if (ma.dev(), ma.ino()) == (mb.dev(), mb.ino()) {
        return true;
    }
    if ma.len() != mb.len() {
        return false;
    }
    let ends = |p: &Path| -> Option<(Vec<u8>, Vec<u8>)> {
        use std::io::{Seek, SeekFrom};
        let mut f = fs::File::open(p).ok()?;
        let mut head = Vec::new();
        (&mut f).take(64 << 10).read_to_end(&mut head).ok()?;
        let len = f.metadata().ok()?.len();
        f.seek(SeekFrom::Start(len.saturating_sub(64 << 10))).ok()?;
        let mut tail = Vec::new();
        f.read_to_end(&mut tail).ok()?;
        Some((head, tail))
    };
    matches!((ends(a), ends(b)), (Some(x), Some(y)) if x == y)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn shared_object_names() {
        for so in [
            "libc.so.6",
            "x.so",
            "ld-linux-x86-64.so.2",
            "libfoo.so.1.2.3",
        ] {
            assert!(is_shared_object_name(so), "{so}");
        }
        for exe in ["java", "git", "cc1", "sonar", "x.sock", "lib.sol"] {
            assert!(!is_shared_object_name(exe), "{exe}");
        }
    }

    #[test]
    fn scan_finds_elf_executables_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let r = dir.path();
        fs::create_dir_all(r.join("tool/bin")).unwrap_or_default();
        let elf = b"\x7fELF\x02\x01\x01rest";
        for (p, data, mode) in [
            ("tool/bin/prog", &elf[..], 0o755),
            ("tool/bin/script", &b"#!/bin/sh\n"[..], 0o755),
            ("libx.so.1", &elf[..], 0o755),
            ("tool/data.elf", &elf[..], 0o644),
        ] {
            fs::write(r.join(p), data).unwrap_or_default();
            fs::set_permissions(r.join(p), std::fs::Permissions::from_mode(mode))
                .unwrap_or_default();
        }
        let root = r.to_string_lossy().into_owned();
        assert_eq!(scan(&[root.as_str()]), vec![r.join("tool/bin/prog")]);
    }

    /// `ld.so <file>` runs what it can read: an ELF program without an execute bit is in the
    /// list like one with; a shared library is not, nor is a shared object by name.
    #[test]
    fn elf_programs_without_an_execute_bit_are_found_too() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        // A 132-byte static x86_64 `ET_EXEC` (exits 42).
        let tiny = "7f454c4602010100000000000000000002003e0001000000780040000000000040000000000000000000000000000000000000004000380001000000000000000100000005000000000000000000000000004000000000000000400000000000840000000000000084000000000000000010000000000000bf2a000000b83c0000000f05";
        let tiny: Vec<u8> = (0..tiny.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&tiny[i..i + 2], 16).unwrap())
            .collect();
        let mut files: Vec<(&str, Vec<u8>, bool)> = vec![
            ("static", tiny.clone(), true),
            ("lib.so.1", tiny.clone(), false),
            ("short", tiny[..40].to_vec(), false),
        ];
        // A PIE (`ET_DYN` with `PT_INTERP`) and a library without one, from the host.
        let pie = fs::read("/usr/bin/id").ok();
        let lib = ["/usr/lib/x86_64-linux-gnu/libm.so.6", "/lib64/libm.so.6"]
            .iter()
            .find_map(|p| fs::read(p).ok());
        if let (Some(pie), Some(lib)) = (pie, lib) {
            files.push(("pie", pie, true));
            files.push(("plugin", lib, false));
        }
        for (name, data, _) in &files {
            fs::write(r.join(name), data).unwrap();
            fs::set_permissions(r.join(name), std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        for (name, _, program) in &files {
            if !name.contains(".so") {
                assert_eq!(is_elf_program(&r.join(name)), *program, "{name}");
            }
        }
        let root = r.to_string_lossy().into_owned();
        let want: Vec<PathBuf> = files
            .iter()
            .filter(|(_, _, program)| *program)
            .map(|(n, _, _)| r.join(n))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        assert_eq!(scan(&[root.as_str()]), want);
    }

    #[test]
    fn exemptions() {
        let files = vec![
            PathBuf::from("/usr/lib/jvm/jdk17/bin/java"),
            PathBuf::from("/usr/lib/jvm/jdk25/bin/java"),
            PathBuf::from("/usr/lib/git-core/git"),
        ];
        let exempt = vec![PathBuf::from("/usr/lib/jvm/jdk17")];
        assert_eq!(
            apply_exemptions(&files, &exempt, &[]),
            vec![
                PathBuf::from("/usr/lib/jvm/jdk25/bin/java"),
                PathBuf::from("/usr/lib/git-core/git")
            ]
        );
        let roots = exempt_roots("java", Path::new("/usr/lib/jvm/jdk17/bin/java"));
        assert!(
            roots.contains(&PathBuf::from("/usr/lib/jvm/jdk17")),
            "{roots:?}"
        );
        assert!(!roots.contains(&PathBuf::from("/usr/lib/jvm")), "{roots:?}");
        let roots = exempt_roots("x", Path::new("/usr/lib/foo/x"));
        assert!(roots.contains(&PathBuf::from("/usr/lib/foo")), "{roots:?}");
        assert!(
            exempt_roots("jq", Path::new("/usr/bin/jq"))
                .iter()
                .all(|p| !p.starts_with("/usr/lib/jvm"))
        );
    }

    #[test]
    fn an_exempt_tree_keeps_its_helpers_but_not_copies_of_the_program() {
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path();
        let prog = r.join("bin-git");
        let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        fs::write(&prog, &big).unwrap();
        fs::create_dir(r.join("git-core")).unwrap();
        fs::write(r.join("git-core/git"), &big).unwrap();
        let mut other = big.clone();
        other[100_000] ^= 1; // differs only in the middle: still taken for the same program
        fs::write(r.join("git-core/git-middle"), &other).unwrap();
        let mut helper = big.clone();
        helper[199_999] ^= 1;
        fs::write(r.join("git-core/git-remote-https"), &helper).unwrap();
        fs::hard_link(&prog, r.join("git-core/git-linked")).unwrap();
        fs::write(r.join("git-core/bin-git"), b"another build").unwrap();
        let files: Vec<PathBuf> = [
            "git",
            "git-middle",
            "git-remote-https",
            "git-linked",
            "bin-git",
        ]
        .iter()
        .map(|n| r.join("git-core").join(n))
        .collect();
        fs::write(r.join("git-core/git"), b"a different git, same name").unwrap();
        assert_eq!(
            apply_exemptions(
                &files,
                &[r.join("git-core")],
                &[("git".to_string(), prog.clone())]
            ),
            vec![
                r.join("git-core/git"),
                r.join("git-core/git-middle"),
                r.join("git-core/git-linked"),
                r.join("git-core/bin-git"),
            ],
            "by command name, by the host file's name, by content"
        );
        assert!(apply_exemptions(&files, &[r.join("git-core")], &[]).is_empty());
        assert!(!same_program(&prog, &r.join("missing")));
    }

    #[test]
    fn one_rescan_at_a_time_on_the_host_whatever_the_state_directory() {
        use std::cell::Cell;
        let t = tempfile::tempdir().unwrap();
        let host = t.path().join("var/cache/band/exec-mask.json");
        let (a, b) = (t.path().join("a"), t.path().join("b"));
        fs::create_dir(&a).unwrap();
        fs::create_dir(&b).unwrap();
        let scans = Cell::new(0);
        let scan = || {
            scans.set(scans.get() + 1);
            vec![PathBuf::from("/usr/lib/x/prog")]
        };
        // A scan is under way for state directory `a` (it holds the lock): one for `b` does
        // nothing.
        assert!(rescan_with(&a, &host, "k", &scan), "the first scan");
        let held = fs::OpenOptions::new()
            .write(true)
            .open(host.with_extension("lock"))
            .unwrap();
        held.file().try_lock().unwrap();
        assert!(!rescan_with(&b, &host, "k", &scan));
        assert!(!rescan_with(&a, &host, "k", &scan));
        assert_eq!(scans.get(), 1);
        drop(held);
        assert!(rescan_with(&b, &host, "k", &scan));
        assert_eq!(scans.get(), 2);
        assert_eq!(
            load(&[&b.join(CACHE_NAME), &host], "k", SystemTime::now()),
            Loaded::Fresh(vec![PathBuf::from("/usr/lib/x/prog")])
        );
    }

    #[test]
    fn the_list_is_scanned_once_per_host_and_refreshed_off_the_run() {
        use std::cell::Cell;
        let t = tempfile::tempdir().unwrap();
        let state = t.path().join("state");
        fs::create_dir(&state).unwrap();
        let host = t.path().join("var/cache/band/exec-mask.json");
        let scans = Cell::new(0);
        let refreshes = Cell::new(0);
        let list = vec![PathBuf::from("/usr/lib/x/prog")];
        let scan = || {
            scans.set(scans.get() + 1);
            list.clone()
        };
        let refresh = || refreshes.set(refreshes.get() + 1);
        // No list anywhere: the only scan on a run's path, stored in both places.
        assert_eq!(
            load_or_scan_with(&state, &host, "k1", &scan, &refresh),
            list
        );
        assert_eq!((scans.get(), refreshes.get()), (1, 0));
        assert!(host.is_file());
        // A fresh state directory on the same host: the host's list, no scan.
        let state2 = t.path().join("state2");
        fs::create_dir(&state2).unwrap();
        assert_eq!(
            load_or_scan_with(&state2, &host, "k1", &scan, &refresh),
            list
        );
        assert_eq!((scans.get(), refreshes.get()), (1, 0));
        // Packages changed (another key), or the list is over an hour old: the old list now, a
        // new one in the background.
        assert_eq!(
            load_or_scan_with(&state2, &host, "k2", &scan, &refresh),
            list
        );
        assert_eq!((scans.get(), refreshes.get()), (1, 1));
        let old = SystemTime::now() - MAX_AGE * 2;
        for p in [state.join(CACHE_NAME), host.clone()] {
            fs::File::options()
                .write(true)
                .open(&p)
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
        assert_eq!(
            load_or_scan_with(&state, &host, "k1", &scan, &refresh),
            list
        );
        assert_eq!((scans.get(), refreshes.get()), (1, 2));
        assert_eq!(
            load(&[&state.join(CACHE_NAME)], "k1", SystemTime::now()),
            Loaded::Stale(list.clone())
        );
    }
}
