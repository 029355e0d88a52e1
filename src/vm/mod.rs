//! VM targets: build, boot and reach a Linux machine that runs band-server.
//!
//! ```text
//! band setup --driver qemu   recipe (vm-templates/debian-12) → mmdebstrap → mkfs.ext4 -d → qcow2
//!                            → QEMU (-kernel/-initrd, user net, SSH on a random loopback port)
//! band setup --driver lima   vm-templates/band.yaml → limactl create/start
//! band setup --driver ssh    any Linux host with SSH
//!            then, for all three: upload band-server (version handshake) over SSH
//! band run --target qemu|lima|ssh://user@host
//!                            one request over an SSH exec channel to `band-server run`
//! ```
//!
//! Pure builders (argv of mmdebstrap, mkfs, qemu-img, qemu, limactl; the Lima template) are
//! separate from the thin layers that run them, so tests cover them without a VM.
//! Everything here belongs to the host CLI (the `cli` feature); band-server never links it.

pub mod build;
pub mod cmd;
pub mod driver;
pub mod endpoint;
pub mod framing;
pub mod image;
pub mod install;
pub mod keys;
pub mod lima;
pub mod mux;
pub mod paths;
pub mod qemu;
pub mod recipe;
pub mod ssh;
pub mod stage;

use std::path::{Path, PathBuf};

/// Progress of a long operation, for people: a new step, or a note on the current one.
pub trait Progress {
    fn start(&mut self, what: String);
    fn note(&mut self, what: String);
}

/// Progress that shows nothing.
pub struct Silent;

impl Progress for Silent {
    fn start(&mut self, _what: String) {}
    fn note(&mut self, _what: String) {}
}

/// What can go wrong while managing a VM. Every I/O error names its path.
#[derive(Debug, thiserror::Error)]
pub enum VmError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{program}` failed ({status}){}", if stderr.is_empty() { String::new() } else { format!(": {stderr}") })]
    Command {
        program: String,
        status: String,
        stderr: String,
    },
    #[error("ssh {addr}: {message}")]
    Ssh { addr: String, message: String },
    #[error("the host key of {addr} is {got}, but {pinned} is pinned; refusing to connect")]
    HostKey {
        addr: String,
        pinned: String,
        got: String,
    },
    #[error("band-server on the target is not the build of this band (installed.json differs)")]
    StaleServer,
    /// No warm band-server of this build answers on the target (its socket is missing, or
    /// sshd refused the streamlocal channel): nothing was sent, the per-run path serves the run.
    #[error("no warm band-server on the target: {0}")]
    NoWarmServer(String),
    #[error("timed out after {secs} s: {what}")]
    Timeout { what: String, secs: u64 },
    #[error("{0}")]
    Invalid(String),
    /// A problem the user can fix; `hint` says how.
    #[error("{message}")]
    User { message: String, hint: String },
    #[error("the running VM does not answer SSH; try `band vm stop` and `band vm start`")]
    NoAnswer(#[source] Box<VmError>),
    /// A file-system error from `fs_err` (its message names the path).
    #[error(transparent)]
    Fs(std::io::Error),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

impl VmError {
    pub fn user(message: impl Into<String>, hint: impl Into<String>) -> VmError {
        VmError::User {
            message: message.into(),
            hint: hint.into(),
        }
    }

    /// How to fix it, when the user can.
    pub fn hint(&self) -> Option<&str> {
        match self {
            VmError::User { hint, .. } => Some(hint),
            _ => None,
        }
    }
}

pub type Result<T> = std::result::Result<T, VmError>;

/// `map_err` helper: an I/O error that names its path.
pub fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> VmError + '_ {
    move |source| VmError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The OS error under an `fs_err` error (whose own message names the path), for messages that
/// name the path themselves.
pub fn os_error(e: &std::io::Error) -> String {
    std::error::Error::source(e).map_or_else(|| e.to_string(), ToString::to_string)
}
