//! What a remote band-server may hand back: checks on `result.written` before anything touches
//! the host workspace.
//!
//! The request side is staged by the run pipeline (`src/cli/pipeline.rs`): only workspace files
//! that `allow.read`/`allow.write` admit, symlinks skipped, a size cap. On the way back a VM or a
//! remote host is not trusted: every written file must be a plain relative path, allowed by the
//! band's `allow.write` (and not denied), listed once, valid base64, and all of them together
//! under [`MAX_WRITTEN_BYTES`]. The pipeline's write-back then refuses to follow symlinks in the
//! workspace. A result that fails these checks is refused whole: nothing is written.

use std::collections::BTreeSet;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;

use crate::policy::CompiledPolicy;
use crate::proto::FileEntry;

/// The most a run may write back into the host workspace (the size cap of staging in).
pub const MAX_WRITTEN_BYTES: u64 = 256 << 20;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StageError {
    #[error("the target returned an unsafe path `{0}`")]
    UnsafePath(String),
    #[error("the target returned `{0}`, which allow.write does not allow")]
    NotWritable(String),
    #[error("the target returned `{0}` twice")]
    Duplicate(String),
    #[error("the target returned more than {0} bytes of written files")]
    TooLarge(u64),
    #[error("the target returned bad data for `{0}`")]
    BadData(String),
    #[error("the target returned more than {0} empty folders")]
    TooManyFolders(usize),
}

/// A workspace-relative path: `/`-separated normal components, nothing else.
pub fn check_path(p: &str) -> Result<(), StageError> {
    let bad = || StageError::UnsafePath(p.chars().take(200).collect());
    if p.is_empty() || p.starts_with('/') || p.contains('\0') || p.contains('\\') {
        return Err(bad());
    }
    if p.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
        return Err(bad());
    }
    Ok(())
}

/// Check every empty folder a target says its run made (`RunResult::written_folders`): a
/// relative path allow.write admits as a folder (`FsMatcher::check_folder`), each once. At most as many as [`MAX_WRITTEN_FOLDERS`].
pub fn check_written_folders(
    folders: &[String],
    policy: &CompiledPolicy,
) -> Result<(), StageError> {
    if folders.len() > MAX_WRITTEN_FOLDERS {
        return Err(StageError::TooManyFolders(MAX_WRITTEN_FOLDERS));
    }
    let mut seen = BTreeSet::new();
    for d in folders {
        check_path(d)?;
        if !policy.write.check_folder(d).is_allowed() {
            return Err(StageError::NotWritable(d.clone()));
        }
        if !seen.insert(d.as_str()) {
            return Err(StageError::Duplicate(d.clone()));
        }
    }
    Ok(())
}

/// Most empty folders a target may hand back: band-server's walk stops at 100,000 entries.
pub const MAX_WRITTEN_FOLDERS: usize = 100_000;

/// Check every written file (see the module docs). Returns the total decoded size.
pub fn check_written(
    files: &[FileEntry],
    policy: &CompiledPolicy,
    cap: u64,
) -> Result<u64, StageError> {
    let mut seen = BTreeSet::new();
    let mut total = 0u64;
    for f in files {
        check_path(&f.path)?;
        if !policy.write.check(&f.path).is_allowed() {
            return Err(StageError::NotWritable(f.path.clone()));
        }
        if !seen.insert(f.path.as_str()) {
            return Err(StageError::Duplicate(f.path.clone()));
        }
        // Decoded size without decoding: 3 bytes per 4 characters, less the padding.
        let n = f.data.len() as u64;
        if !n.is_multiple_of(4) {
            return Err(StageError::BadData(f.path.clone()));
        }
        total += n / 4 * 3 - f.data.bytes().rev().take(2).filter(|b| *b == b'=').count() as u64;
        if total > cap {
            return Err(StageError::TooLarge(cap));
        }
        if B64.decode(&f.data).is_err() {
            return Err(StageError::BadData(f.path.clone()));
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Category, Policy};

    fn policy(write: &[&str], deny: &[&str]) -> CompiledPolicy {
        let mut p = Policy::default();
        *p.allow.get_mut(Category::Write) = write.iter().map(|s| s.to_string()).collect();
        *p.deny.get_mut(Category::Write) = deny.iter().map(|s| s.to_string()).collect();
        CompiledPolicy::compile(&p).unwrap()
    }

    fn file(path: &str, data: &[u8]) -> FileEntry {
        FileEntry {
            path: path.into(),
            mode: 0o644,
            data: B64.encode(data),
        }
    }

    #[test]
    fn traversal_and_absolute_paths_are_refused() {
        for p in [
            "",
            "/etc/passwd",
            "../x",
            "out/../../x",
            "out/./x",
            "out//x",
            "out/x/",
            "a\\b",
            "a\0b",
            "..",
        ] {
            assert!(check_path(p).is_err(), "{p:?} accepted");
        }
        for p in ["out/x", "a", ".hidden/x", "a..b/c"] {
            assert_eq!(check_path(p), Ok(()), "{p:?} refused");
        }
    }

    #[test]
    fn written_files_must_be_allowed_by_allow_write() {
        let pol = policy(&["out/"], &["out/secret*"]);
        assert_eq!(
            check_written(&[file("out/a.txt", b"hello")], &pol, 100),
            Ok(5)
        );
        assert_eq!(
            check_written(&[file(".git/hooks/pre-commit", b"x")], &pol, 100),
            Err(StageError::NotWritable(".git/hooks/pre-commit".into()))
        );
        assert_eq!(
            check_written(&[file("out/secret.key", b"x")], &pol, 100),
            Err(StageError::NotWritable("out/secret.key".into()))
        );
        assert_eq!(
            check_written(&[file("../out/a", b"x")], &pol, 100),
            Err(StageError::UnsafePath("../out/a".into()))
        );
    }

    #[test]
    fn duplicates_bad_data_and_size_are_refused() {
        let pol = policy(&["out/"], &[]);
        assert_eq!(
            check_written(&[file("out/a", b"1"), file("out/a", b"2")], &pol, 100),
            Err(StageError::Duplicate("out/a".into()))
        );
        let bad = FileEntry {
            path: "out/a".into(),
            mode: 0o644,
            data: "!!!!".into(),
        };
        assert_eq!(
            check_written(&[bad], &pol, 100),
            Err(StageError::BadData("out/a".into()))
        );
        let odd = FileEntry {
            path: "out/a".into(),
            mode: 0o644,
            data: "abc".into(),
        };
        assert_eq!(
            check_written(&[odd], &pol, 100),
            Err(StageError::BadData("out/a".into()))
        );
        assert_eq!(
            check_written(
                &[file("out/a", &[0; 60]), file("out/b", &[0; 41])],
                &pol,
                100
            ),
            Err(StageError::TooLarge(100))
        );
        assert_eq!(
            check_written(
                &[file("out/a", &[0; 60]), file("out/b", &[0; 40])],
                &pol,
                100
            ),
            Ok(100)
        );
        assert_eq!(check_written(&[], &pol, 0), Ok(0));
        // Empty folders: relative, admitted, once each.
        let dirs = |d: &[&str]| d.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            check_written_folders(&dirs(&["out/a", "out/b/c"]), &pol),
            Ok(())
        );
        assert_eq!(
            check_written_folders(&dirs(&["stray"]), &pol),
            Err(StageError::NotWritable("stray".into()))
        );
        assert_eq!(
            check_written_folders(&dirs(&["out/../etc"]), &pol),
            Err(StageError::UnsafePath("out/../etc".into()))
        );
        assert_eq!(
            check_written_folders(&dirs(&["out/a", "out/a"]), &pol),
            Err(StageError::Duplicate("out/a".into()))
        );
        // The folder `state/**` opens, as band-server admits it.
        let state = policy(&["state/**"], &[]);
        assert_eq!(check_written_folders(&dirs(&["state"]), &state), Ok(()));
    }
}
