//! The protocol between band-shim and band-server (one connection per call; see
//! `band_server::layers::cli::shim` for the exchange and why band-server trusts a request), and
//! the names and exit codes both sides agree on.

use serde::{Deserialize, Serialize};

/// Exit code of a refused command (as a shell's "found but cannot execute").
pub const EXIT_DENIED: i32 = 126;
/// Exit code of a name the shim does not know.
pub const EXIT_UNKNOWN: i32 = 127;

/// band-shim's name (`PR_SET_NAME`), set first thing. It contains a `/`, which no `exec` can give
/// a process, so a process with this name is running band-shim's code.
pub const COMM: &str = "band/shim";

/// shim → server, after the nonce.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShimRequest {
    pub nonce: String,
    pub argv: Vec<String>,
}

/// server → shim: run the program whose descriptor comes with this line, or refuse with this
/// message and exit code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Verdict {
    Exec {
        /// The argv to run it with, when it is not the call's own (a `#!` script's interpreter).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        argv: Option<Vec<String>>,
    },
    Denied {
        message: String,
        code: i32,
    },
}

/// The command name from `argv[0]`: its last path component.
pub fn command_name(arg0: &str) -> &str {
    arg0.rsplit('/').next().unwrap_or(arg0)
}
