//! [`CgroupError`]: every error of detection, setup and teardown, naming its path.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// Errors from cgroup detection, setup and teardown.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("no usable cgroup hierarchy: {reason}")]
    NoHierarchy { reason: String },
    #[error("invalid cgroup name {name:?}: {reason}")]
    InvalidName { name: String, reason: &'static str },
    #[error("the {controller} controller is not available in {}", .path.display())]
    MissingController {
        controller: &'static str,
        path: PathBuf,
    },
    #[error("failed to create {}: {error}", .path.display())]
    Create { path: PathBuf, error: io::Error },
    #[error("failed to remove {}: {error}", .path.display())]
    Remove { path: PathBuf, error: io::Error },
    #[error("failed to read {}: {error}", .path.display())]
    Read { path: PathBuf, error: io::Error },
    #[error("failed to write {value} to {}: {error}", .path.display())]
    Write {
        path: PathBuf,
        value: String,
        error: io::Error,
    },
    #[error("malformed {}: {line:?} is not a pid", .path.display())]
    Parse { path: PathBuf, line: String },
    #[error("failed to kill pid {pid} in {}: {error}", .path.display())]
    Kill {
        pid: i32,
        path: PathBuf,
        error: io::Error,
    },
    #[error("processes still in {} after {deadline:?}: {pids:?}", .path.display())]
    KillTimeout {
        path: PathBuf,
        deadline: Duration,
        pids: Vec<i32>,
    },
}
