//! The workspace side of a run: the files a band admits, read from the user's folder into the
//! request, and the files the run wrote, copied back into it.

use std::path::{Component, Path};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;

use super::{ClientError, Result};
use crate::policy::CompiledPolicy;
use crate::proto::FileEntry;

/// A user error (the message, and a hint on how to fix it).
fn user_error(message: impl Into<String>, hint: impl Into<String>) -> ClientError {
    ClientError::user(message, hint)
}

/// The most workspace data sent to a run.
const MAX_WORKSPACE_BYTES: u64 = 256 << 20;

/// Workspace files that a relative allow.read or allow.write pattern admits (and no deny covers).
pub(super) fn read_workspace(dir: &Path, policy: &CompiledPolicy) -> Result<Vec<FileEntry>> {
    let mut out = Vec::new();
    let mut total = 0u64;
    if !dir.is_dir() {
        return Err(user_error(
            format!("workspace {} is not a folder", dir.display()),
            "pass --workspace DIR",
        ));
    }
    walk_files(dir, dir, &mut |rel, path, meta| {
        if meta.file_type().is_symlink() {
            return Ok(()); // never follow links out of the workspace
        }
        let wanted = policy.read.check(&rel).is_allowed() || policy.write.check(&rel).is_allowed();
        if !wanted {
            return Ok(());
        }
        push_capped(
            &mut out,
            &mut total,
            MAX_WORKSPACE_BYTES,
            rel,
            path,
            meta,
            || {
                user_error(
                    format!(
                        "the files the band admits from {} exceed {MAX_WORKSPACE_BYTES} bytes",
                        dir.display()
                    ),
                    "narrow allow.read, or pick a smaller --workspace",
                )
            },
        )
    })?;
    Ok(out)
}

/// Read one file into `out` unless the running total would pass `cap`.
fn push_capped(
    out: &mut Vec<FileEntry>,
    total: &mut u64,
    cap: u64,
    rel: String,
    path: &Path,
    meta: &std::fs::Metadata,
    too_large: impl FnOnce() -> ClientError,
) -> Result<()> {
    *total += meta.len();
    if *total > cap {
        return Err(too_large());
    }
    let data = fs_err::read(path).map_err(ClientError::Fs)?;
    out.push(FileEntry {
        path: rel,
        mode: crate::lock::mode_of(meta),
        data: B64.encode(data),
    });
    Ok(())
}

fn walk_files(
    root: &Path,
    dir: &Path,
    f: &mut dyn FnMut(String, &Path, &std::fs::Metadata) -> Result<()>,
) -> Result<()> {
    let mut entries: Vec<_> = fs_err::read_dir(dir)
        .map_err(ClientError::Fs)?
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        let meta = fs_err::symlink_metadata(&p).map_err(ClientError::Fs)?;
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if meta.is_dir() {
            if name == ".git" || name == "target" {
                continue;
            }
            walk_files(root, &p, f)?;
        } else {
            let rel = p
                .strip_prefix(root)
                .unwrap_or(&p)
                .to_string_lossy()
                .replace('\\', "/");
            f(rel, &p, &meta)?;
        }
    }
    Ok(())
}

/// Copy files the run wrote back into the workspace: relative paths only, never through a symlink.
pub(super) fn write_back(workspace: &Path, files: &[FileEntry]) -> Result<()> {
    for f in files {
        let rel = Path::new(&f.path);
        if f.path.is_empty() || rel.components().any(|c| !matches!(c, Component::Normal(_))) {
            return Err(ClientError::Protocol(format!(
                "band-server returned an unsafe path `{}`; nothing more was written",
                f.path
            )));
        }
        let mut cur = workspace.to_path_buf();
        for c in rel.parent().into_iter().flat_map(|p| p.components()) {
            cur.push(c);
            match fs_err::symlink_metadata(&cur) {
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(ClientError::Protocol(format!(
                        "refusing to write through symlink {}",
                        cur.display()
                    )));
                }
                Ok(_) => {}
                Err(_) => fs_err::create_dir(&cur).map_err(ClientError::Fs)?,
            }
        }
        let dest = workspace.join(rel);
        if fs_err::symlink_metadata(&dest).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(ClientError::Protocol(format!(
                "refusing to write through symlink {}",
                dest.display()
            )));
        }
        let data = B64.decode(&f.data).map_err(|source| ClientError::BadData {
            path: f.path.clone(),
            source,
        })?;
        fs_err::write(&dest, data).map_err(ClientError::Fs)?;
    }
    Ok(())
}
