//! The source archive of band-server, made by `build.rs` and checked by this crate's tests.
//!
//! It holds what `cargo build --locked -p band-server` needs to load the workspace and build:
//! the root `Cargo.toml` and `Cargo.lock`, cargo's own config files when there are any,
//! `vm-templates/` (`include_str!`'d by band), and for every workspace member its `Cargo.toml`,
//! `build.rs`, `src/` and `benches/` (cargo checks that declared bench targets exist). Tests,
//! docs and fuzz targets are left out. Hidden files and editor leftovers are skipped.
//!
//! The tar is reproducible: entries sorted by path, no directory entries, owner 0:0, mtime 0,
//! mode 0644 or 0755 (the owner's execute bit), no user or group names. Its SHA-256 is the
//! source's identity; the same files always give the same hash, and any changed byte, name or
//! execute bit another one.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Top-level files taken when they exist.
const TOP_FILES: [&str; 5] = [
    "Cargo.toml",
    "Cargo.lock",
    ".cargo/config.toml",
    "rust-toolchain.toml",
    "rust-toolchain",
];
/// Top-level folders taken when they exist.
const TOP_TREES: [&str; 1] = ["vm-templates"];
/// Each member's files and folders taken when they exist.
const MEMBER_FILES: [&str; 2] = ["Cargo.toml", "build.rs"];
const MEMBER_TREES: [&str; 2] = ["src", "benches"];

/// The workspace members named in the root `Cargo.toml` (`.` for the root package).
fn members(root: &Path) -> Result<Vec<String>, String> {
    let path = root.join("Cargo.toml");
    let text = fs_err::read_to_string(&path).map_err(|e| e.to_string())?;
    let table: toml::Table = text
        .parse()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let list = table
        .get("workspace")
        .and_then(|w| w.get("members"))
        .and_then(|m| m.as_array())
        .ok_or_else(|| format!("{}: no [workspace] members", path.display()))?;
    list.iter()
        .map(|m| {
            let m = m
                .as_str()
                .ok_or_else(|| format!("{}: a member is not a string", path.display()))?;
            if m.contains(['*', '?', '[']) {
                return Err(format!(
                    "{}: member `{m}` is a glob; list members by name",
                    path.display()
                ));
            }
            Ok(m.trim_end_matches('/').to_string())
        })
        .collect()
}

/// `base/rel` as an archive path (`/`-separated, no `./`).
fn join(base: &str, rel: &str) -> String {
    match base {
        "" | "." => rel.to_string(),
        b => format!("{b}/{rel}"),
    }
}

/// A name the archive leaves out: hidden files, editor and merge leftovers.
fn skipped(name: &str) -> bool {
    name.starts_with('.')
        || name.ends_with('~')
        || name.ends_with(".rs.bk")
        || name.ends_with(".orig")
        || name.ends_with(".rej")
        || name.ends_with(".swp")
}

fn add_tree(root: &Path, rel: &str, out: &mut BTreeSet<String>) -> Result<(), String> {
    let dir = root.join(rel);
    let entries = fs_err::read_dir(&dir).map_err(|e| e.to_string())?;
    for e in entries {
        let e = e.map_err(|e| format!("{}: {e}", dir.display()))?;
        let name = e
            .file_name()
            .into_string()
            .map_err(|n| format!("{}: a name that is not UTF-8: {n:?}", dir.display()))?;
        if skipped(&name) {
            continue;
        }
        let child = format!("{rel}/{name}");
        let ty = e.file_type().map_err(|err| format!("{child}: {err}"))?;
        if ty.is_dir() {
            add_tree(root, &child, out)?;
        } else if ty.is_file() {
            out.insert(child);
        }
        // Symlinks and special files are not source.
    }
    Ok(())
}

/// The archive's file list, sorted, as `/`-separated paths relative to `root`.
pub(crate) fn files(root: &Path) -> Result<Vec<String>, String> {
    let mut out = BTreeSet::new();
    for f in TOP_FILES {
        if root.join(f).is_file() {
            out.insert(f.to_string());
        }
    }
    for t in TOP_TREES {
        if root.join(t).is_dir() {
            add_tree(root, t, &mut out)?;
        }
    }
    for m in members(root)? {
        for f in MEMBER_FILES {
            let p = join(&m, f);
            if root.join(&p).is_file() {
                out.insert(p);
            }
        }
        for t in MEMBER_TREES {
            let p = join(&m, t);
            if root.join(&p).is_dir() {
                add_tree(root, &p, &mut out)?;
            }
        }
    }
    Ok(out.into_iter().collect())
}

/// The paths whose changes change the archive (for `cargo:rerun-if-changed`): the files and
/// folders [`files`] looks at, where they exist.
pub(crate) fn watched(root: &Path) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for f in TOP_FILES.iter().chain(TOP_TREES.iter()) {
        let p = root.join(f);
        if p.exists() {
            out.push(p);
        }
    }
    for m in members(root)? {
        for f in MEMBER_FILES.iter().chain(MEMBER_TREES.iter()) {
            let p = root.join(join(&m, f));
            if p.exists() {
                out.push(p);
            }
        }
    }
    Ok(out)
}

/// The reproducible tar of `files` under `root`.
pub(crate) fn tar(root: &Path, files: &[String]) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::PermissionsExt;
    let mut b = tar::Builder::new(Vec::new());
    for f in files {
        let path = root.join(f);
        let data = fs_err::read(&path).map_err(|e| e.to_string())?;
        let mode = fs_err::metadata(&path)
            .map_err(|e| e.to_string())?
            .permissions()
            .mode();
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_size(data.len() as u64);
        h.set_mode(if mode & 0o100 != 0 { 0o755 } else { 0o644 });
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(0);
        b.append_data(&mut h, f, data.as_slice())
            .map_err(|e| format!("{f}: {e}"))?;
    }
    b.into_inner().map_err(|e| e.to_string())
}

/// gzip of `data`, with a fixed header (no name, mtime 0), so it too is reproducible.
pub(crate) fn gzip(data: &[u8]) -> Result<Vec<u8>, String> {
    let mut gz = flate2::GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), flate2::Compression::best());
    gz.write_all(data).map_err(|e| e.to_string())?;
    gz.finish().map_err(|e| e.to_string())
}

/// Lower-case hex SHA-256.
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
