//! Access to cgroupfs, shared by both versions: the [`Dirs`] seam (the kernel, or a fake in tests),
//! single writes and reads that name their path, and the thin applier of a plan's steps, which
//! removes what it created when a step fails.

use fs_err as fs;
use std::io::{self, Write as _};
use std::path::Path;

use super::CgroupError;
use super::plan::{Need, Op};
use super::v2;

/// The two operations in which cgroupfs differs from a plain directory: `mkdir` creates the
/// interface files, and `rmdir` removes a directory that still lists them. Tests substitute a
/// fake that does the same in a temporary directory.
pub(super) trait Dirs {
    fn mkdir(&self, path: &Path) -> io::Result<()>;
    fn rmdir(&self, path: &Path) -> io::Result<()>;
}

pub(super) struct Kernel;

impl Dirs for Kernel {
    fn mkdir(&self, path: &Path) -> io::Result<()> {
        fs::create_dir(path)
    }
    fn rmdir(&self, path: &Path) -> io::Result<()> {
        fs::remove_dir(path)
    }
}

/// One `write(2)` of `value` to an existing file (cgroupfs files must not be created).
pub(super) fn write_raw(path: &Path, value: &str) -> io::Result<()> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)?;
    file.write_all(value.as_bytes())
}

pub(super) fn write_file(path: &Path, value: &str) -> Result<(), CgroupError> {
    write_raw(path, value).map_err(|error| CgroupError::Write {
        path: path.to_path_buf(),
        value: value.to_string(),
        error,
    })
}

pub(super) fn read_file(path: &Path) -> Result<String, CgroupError> {
    fs::read_to_string(path).map_err(|error| CgroupError::Read {
        path: path.to_path_buf(),
        error,
    })
}

pub(super) fn apply(ops: &[Op], dirs: &dyn Dirs) -> Result<(), CgroupError> {
    let mut created = Vec::new();
    let result = ops.iter().try_for_each(|op| match op {
        Op::Mkdir { path, exist_ok } => match dirs.mkdir(path) {
            Ok(()) => {
                if !exist_ok {
                    created.push(path.clone());
                }
                Ok(())
            }
            Err(e) if *exist_ok && e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            Err(error) => Err(CgroupError::Create {
                path: path.clone(),
                error,
            }),
        },
        Op::EnableControllers { dir } => v2::enable_controllers(dir),
        Op::Write { path, value, need } => match (write_raw(path, value), need) {
            (Ok(()), _) | (Err(_), Need::BestEffort) => Ok(()),
            (Err(e), Need::IfExists) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            (Err(error), _) => Err(CgroupError::Write {
                path: path.clone(),
                value: value.clone(),
                error,
            }),
        },
    });
    if result.is_err() {
        // Fresh and empty, so rmdir succeeds; a failure here would only hide the real error.
        for path in created.iter().rev() {
            let _ = dirs.rmdir(path);
        }
    }
    result
}

/// The first line `key N` of a flat-keyed file (`memory.events`, `pids.events`, `oom_control`).
pub(super) fn keyed_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(' ')?;
        if k == key {
            v.trim().parse().ok()
        } else {
            None
        }
    })
}

pub(super) fn read_u64(path: &Path) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

pub(super) fn read_keyed(path: &Path, key: &str) -> Option<u64> {
    keyed_value(&fs::read_to_string(path).ok()?, key)
}

#[cfg(test)]
mod tests {
    use crate::layers::cgroup::RunCgroup;
    use crate::layers::cgroup::fake::*;

    #[test]
    fn a_failed_write_names_the_file_and_removes_the_run_directory() {
        let (tmp, h) = v2_root("memory pids\n");
        let fake = FakeKernel::new(V2_FILES).without("memory.oom.group");
        let err = RunCgroup::create_with(&h, "r", &limits(), &fake).unwrap_err();
        let file = tmp.path().join("band/r/memory.oom.group");
        assert!(
            err.to_string()
                .starts_with(&format!("failed to write 1 to {}: ", file.display())),
            "{err}"
        );
        assert!(!tmp.path().join("band/r").exists(), "rolled back");
        assert!(tmp.path().join("band").exists(), "the shared parent stays");
    }

    #[test]
    fn an_existing_run_directory_is_an_error() {
        let (tmp, h) = v2_root("memory pids\n");
        let fake = FakeKernel::new(V2_FILES);
        RunCgroup::create_with(&h, "r", &limits(), &fake).unwrap();
        let err = RunCgroup::create_with(&h, "r", &limits(), &fake).unwrap_err();
        let dir = tmp.path().join("band/r");
        assert!(
            err.to_string()
                .starts_with(&format!("failed to create {}: ", dir.display())),
            "{err}"
        );
        assert!(dir.exists(), "the first run's directory is left alone");
    }
}
