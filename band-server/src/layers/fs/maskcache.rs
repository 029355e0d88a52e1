//! Whiteout layers for the masked library trees ([`crate::layers::fs::execmask`]), kept between runs.
//!
//! A run hides the ELF executables of a library tree with a read-only overlay whose top layer
//! holds one whiteout per masked file. That layer depends only on the tree and the set of masked
//! files, and building it (hundreds of `mkdir`/`mknod`) then freeing it with the run's tmpfs was
//! most of band-server's per-run setup and teardown. So each distinct layer is built once under
//! `<state>/masks/<key>` (the key: SHA-256 of the tree and the sorted relative paths), published
//! with an atomic rename, and never changed or removed afterwards: a layer may be the lower
//! directory of live overlays, and changing it would make masked files reappear. Concurrent runs
//! share it read-only.
//!
//! ```text
//! <state>/masks/           root 0700
//!   <key>/                 the whiteout layer (complete: it appears only by rename)
//!   .build-<run>-<n>/      a layer being built by run <run>; the janitor removes those of dead runs
//! ```
//!
//! At most [`MAX_LAYERS`] layers are kept (they live until the state directory is cleared, e.g.
//! at reboot for `/run/band`); beyond that a run builds a private layer in its own directory as
//! before, so a flood of distinct command sets cannot fill the disk.

use fs_err as fs;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use band::proto::Layer;
use sha2::{Digest, Sha256};

use crate::error::{LayerExt, SetupError, SetupResult};
use crate::sys;

/// The most layers kept in the cache.
pub(crate) const MAX_LAYERS: usize = 64;
/// Prefix of a layer being built.
const BUILD_PREFIX: &str = ".build-";

/// `<state>/masks`.
pub fn cache_dir(state: &Path) -> PathBuf {
    state.join("masks")
}

/// The cache key of the layer for `root` with whiteouts at `rels` (relative to `root`).
pub fn key(root: &str, rels: &[&Path]) -> String {
    let mut sorted: Vec<&[u8]> = rels
        .iter()
        .map(|p| p.as_os_str().as_encoded_bytes())
        .collect();
    sorted.sort_unstable();
    sorted.dedup();
    let mut h = Sha256::new();
    h.update(root.as_bytes());
    for r in sorted {
        h.update([0]);
        h.update(r);
    }
    hex::encode(h.finalize())
}

/// Write one whiteout per path of `rels` under `dir` (which exists), with directories between.
pub(crate) fn build_layer(dir: &Path, rels: &[&Path]) -> SetupResult<()> {
    const FSL: Layer = Layer::Filesystem;
    for rel in rels {
        let file = dir.join(rel);
        if let Some(parent) = file.parent() {
            fs::create_dir_all(parent)
                .layer(FSL, format!("failed to create {}", parent.display()))?;
        }
        sys::mknod_whiteout(&file).layer(
            FSL,
            format!("failed to create a whiteout for {}", rel.display()),
        )?;
    }
    Ok(())
}

/// The shared layer for (`root`, `rels`), built now by `run_id` if no run built it before.
/// `None` when the cache is full (the caller builds a private layer).
pub(crate) fn shared_layer(
    state: &Path,
    run_id: &str,
    n: usize,
    root: &str,
    rels: &[&Path],
) -> SetupResult<Option<PathBuf>> {
    const FSL: Layer = Layer::Filesystem;
    let cache = cache_dir(state);
    match std::fs::DirBuilder::new().mode(0o700).create(&cache) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(SetupError::new(
                FSL,
                format!("failed to create {}: {e}", cache.display()),
            ));
        }
    }
    let meta =
        fs::symlink_metadata(&cache).layer(FSL, format!("failed to stat {}", cache.display()))?;
    if !meta.is_dir() || meta.uid() != 0 || meta.mode() & 0o022 != 0 {
        return Err(SetupError::new(
            FSL,
            format!(
                "{} must be a root-owned directory writable by root only",
                cache.display()
            ),
        ));
    }
    let layer = cache.join(key(root, rels));
    match fs::symlink_metadata(&layer) {
        Ok(m) if m.is_dir() => return Ok(Some(layer)),
        Ok(_) => {
            return Err(SetupError::new(
                FSL,
                format!("{} is not a directory", layer.display()),
            ));
        }
        Err(_) => {}
    }
    let kept = fs::read_dir(&cache)
        .layer(FSL, format!("failed to read {}", cache.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .count();
    if kept >= MAX_LAYERS {
        return Ok(None);
    }
    let build = cache.join(format!("{BUILD_PREFIX}{run_id}-{n}"));
    let _ = fs::remove_dir_all(&build);
    std::fs::DirBuilder::new()
        .mode(0o755)
        .create(&build)
        .layer(FSL, format!("failed to create {}", build.display()))?;
    let built = build_layer(&build, rels).and_then(|()| match fs::rename(&build, &layer) {
        Ok(()) => Ok(()),
        // Another run published the same layer first: use theirs.
        Err(_) if layer.is_dir() => {
            let _ = fs::remove_dir_all(&build);
            Ok(())
        }
        Err(e) => Err(SetupError::new(
            FSL,
            format!("failed to publish {}: {e}", layer.display()),
        )),
    });
    if let Err(e) = built {
        let _ = fs::remove_dir_all(&build);
        return Err(e);
    }
    Ok(Some(layer))
}

/// Layers being built, with the run that builds each: `(path, run id)`.
pub fn builds(state: &Path) -> Vec<(PathBuf, String)> {
    let Ok(rd) = fs::read_dir(cache_dir(state)) else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let run = name
                .strip_prefix(BUILD_PREFIX)?
                .split('-')
                .next()?
                .to_string();
            Some((e.path(), run))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_names_the_tree_and_the_set_of_paths() {
        let a = Path::new("jvm/bin/java");
        let b = Path::new("git-core/git");
        assert_eq!(
            key("/usr/lib", &[a, b]),
            key("/usr/lib", &[b, a, b]),
            "order and repeats do not matter"
        );
        assert_ne!(key("/usr/lib", &[a, b]), key("/usr/lib", &[a]));
        assert_ne!(key("/usr/lib", &[a]), key("/usr/libexec", &[a]));
        // Path boundaries count: ["ab"] is not ["a", "b"].
        assert_ne!(
            key("/r", &[Path::new("ab")]),
            key("/r", &[Path::new("a"), Path::new("b")])
        );
        assert_eq!(key("/r", &[a]).len(), 64);
    }

    #[test]
    fn builds_lists_layers_in_progress_with_their_run() {
        let t = tempfile::tempdir().expect("tmp");
        let cache = cache_dir(t.path());
        fs::create_dir_all(cache.join(".build-0123456789abcdef-2")).expect("mkdir");
        fs::create_dir_all(cache.join("f00d")).expect("mkdir");
        assert_eq!(
            builds(t.path()),
            vec![(
                cache.join(".build-0123456789abcdef-2"),
                "0123456789abcdef".to_string()
            )]
        );
        assert!(builds(&t.path().join("none")).is_empty());
    }
}
