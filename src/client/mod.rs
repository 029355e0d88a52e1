//! The client side of a run, as a library: the user's config, the run pipeline (prepare →
//! transport → finish → record), its transports and the ledger record. `band run`, `band exec`
//! and `band mcp` call [`pipeline::run`]; the binary only parses arguments and renders.
//!
//! Dependency order (each module uses only those before it, and `crate::vm` below all of them):
//!
//! ```text
//! config     the user's config file; where the data folder (ledger, VMs) is
//! skills     the skills path, and a skill by name or folder
//! cancel     Cancel: asks a run under way to stop (signals, MCP cancellation)
//! outcome    RunSpec, Prepared, Outcome: the data a run passes along
//! redact     masking the declared secrets in what band shows and keeps
//! record     the ledger, and one run's record in it
//! transport  the Transport trait; HostTransport (band-server on this machine)
//! ssh        SshTransport (band-server on a VM or an ssh:// host, through vm::driver)
//! workspace  the admitted workspace files read in, the written ones copied back
//! pipeline   prepare → transport → finish → record
//! adhoc      band exec: an ad-hoc command under a band file, as a one-script skill; its CLI check
//! ```
//!
//! Everything here belongs to the host CLI (the `cli` feature). Errors are [`ClientError`];
//! [`ClientError::hint`] says how to fix the ones the user can.

pub mod adhoc;
pub mod cancel;
pub mod config;
pub mod narrow;
pub mod outcome;
pub mod pipeline;
pub mod record;
pub mod redact;
pub mod sandboxd;
pub mod skills;
pub mod ssh;
pub mod transport;
pub mod unadmitted;
pub mod unwritable;
pub mod workspace;

use crate::ledger::LedgerError;
use crate::vm::VmError;

/// What can go wrong on the client side of a run. Statuses (input_invalid, denied, …) are not
/// errors: they come back in [`outcome::Outcome::result`].
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// A problem the user can fix (unknown script, broken band, missing secret, no server);
    /// `hint` says how.
    #[error("{message}")]
    User { message: String, hint: String },
    #[error(transparent)]
    Vm(#[from] VmError),
    /// A file-system error from `fs_err` (its message names the path).
    #[error(transparent)]
    Fs(std::io::Error),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error("cannot write the run ledger {}; nothing ran", path.display())]
    LedgerUnwritable {
        path: std::path::PathBuf,
        #[source]
        source: LedgerError,
    },
    #[error("the run {run_id} finished but could not be recorded in the ledger")]
    NotRecorded {
        run_id: String,
        #[source]
        source: LedgerError,
    },
    /// The transport failed; `target` names it (`host`, `qemu (root@127.0.0.1:…)`).
    #[error("run on target {target}")]
    Transport {
        target: String,
        #[source]
        source: Box<ClientError>,
    },
    /// Talking to band-server failed (`what` says at which step).
    #[error("{what}")]
    Server {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// band-server answered something band cannot accept.
    #[error("{0}")]
    Protocol(String),
    #[error("bad data for {path}")]
    BadData {
        path: String,
        #[source]
        source: base64::DecodeError,
    },
}

impl ClientError {
    pub fn user(message: impl Into<String>, hint: impl Into<String>) -> ClientError {
        ClientError::User {
            message: message.into(),
            hint: hint.into(),
        }
    }

    /// How to fix it, when the user can. (A wrapped error's hint is its source's: walk the
    /// chain.)
    pub fn hint(&self) -> Option<&str> {
        match self {
            ClientError::User { hint, .. } => Some(hint),
            ClientError::Vm(v) => v.hint(),
            _ => None,
        }
    }
}

pub type Result<T> = std::result::Result<T, ClientError>;
