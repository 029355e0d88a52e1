//! The data a run passes along: what the caller asked ([`RunSpec`]), what was settled before it
//! started ([`Prepared`]), and how it ended ([`Outcome`]).

use std::path::PathBuf;

use super::redact::Masker;
use super::workspace::WorkspaceRoot;
use crate::ledger::LockMark;
use crate::manifest::Target;
use crate::proto::{RunRequest, RunResult};

/// What to run, as the caller (CLI, MCP server) understood it.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// The skill's folder.
    pub skill_root: PathBuf,
    pub script: String,
    /// The input before coercion (CLI strings are coerced by the input schema).
    pub raw_input: serde_json::Value,
    /// The host folder the script sees at /workspace (only files its band admits are sent).
    pub workspace: PathBuf,
    /// `--target`, overriding the band's `execution.target` and the user config.
    pub target: Option<String>,
    pub trace: bool,
    /// Let the workspace be a system folder, or (under sudo) a folder the invoking user does not
    /// own (`--allow-system-workspace`; see [`super::workspace::check_root`]).
    pub allow_system_workspace: bool,
    /// Refuse a skill that has no `band.lock` (`--require-lock`; `require_lock` in the user
    /// config has the same effect).
    pub require_lock: bool,
    /// Keep the input and output documents, stdout and stderr in the ledger (`--record-io`).
    pub record_io: bool,
    /// The skill's schemas, when the caller has loaded them from `skill_root` already (`band run`
    /// does, to tell an argv-style script): the run takes them instead of loading them again,
    /// unless the skill is locked (its schemas are then read between the lock's two readings).
    pub schemas: Option<crate::contract::SchemaSet>,
}

/// Everything about a run that is settled before it starts.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub request: RunRequest,
    pub target: Target,
    pub skill_root: PathBuf,
    /// The workspace folder, opened once; the write-back goes through it.
    pub workspace: WorkspaceRoot,
    /// SHA-256 over the band files that made the policy, in resolution order.
    pub band_sha256: String,
    /// SHA-256 of the effective policy as JSON.
    pub policy_sha256: String,
    pub lock: LockMark,
    /// The skill's schemas as `prepare` loaded them (the input checked against them): the
    /// output is checked against the same set, not loaded again after the run.
    pub schemas: crate::contract::SchemaSet,
    /// The workspace's symlinks the band admits, which band left out of the run.
    pub links_left_out: LeftOut,
}

/// Symlinks of the workspace the band admits, left out of a run (band copies none in): the
/// first of them by name, and how many in all.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct LeftOut {
    pub named: Vec<String>,
    pub count: usize,
}

/// A finished (or refused) run, with the fingerprints the ledger records.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub result: RunResult,
    pub skill: String,
    pub script: String,
    pub target: Target,
    pub bundle_sha256: String,
    pub band_sha256: String,
    pub policy_sha256: String,
    pub input_bytes: u64,
    pub input_sha256: String,
    pub output_bytes: u64,
    pub output_sha256: String,
    pub started_at_ms: u64,
    /// How the skill stood against its `band.lock`.
    pub lock: LockMark,
    /// The differences from `band.lock` that refused the run (integrity_failed).
    pub integrity: Vec<String>,
    /// The input document (validated, or as given when it was refused).
    pub input: serde_json::Value,
    /// Masks the run's declared secrets (its `Debug` shows names only). The result is already
    /// masked; the ledger masks the documents it keeps with it.
    pub redact: Masker,
    /// Warnings about secrets, by name: found in the output or a written file (left as they
    /// are), or too short to mask.
    pub secret_warnings: Vec<String>,
    /// Names the run gave of workspace files that exist but were not copied in (the band does
    /// not admit them), each with the `allow.read` rule that would.
    pub not_admitted: Vec<super::unadmitted::NotAdmitted>,
    /// Workspace paths a failed run's stderr says it was denied writing (`EACCES`), which the
    /// band's `allow.write` does not admit, each with the rule that would.
    pub not_writable: Vec<super::unwritable::NotWritable>,
    /// Files the run made executable, written back without the execute bit
    /// ([`super::workspace::WrittenBack::without_exec`]).
    pub without_exec: Vec<String>,
    /// The workspace's symlinks the band admits, which band left out of the run.
    pub links_left_out: LeftOut,
}

impl Outcome {
    /// For a failed run given `-` among its arguments (the convention for "read standard
    /// input": `echo '<json>' | node validate.js -`): band gives a run no standard input (it is
    /// empty), which the script's own error does not say.
    pub fn stdin_hint(&self) -> Option<&'static str> {
        let failed = !matches!(
            self.result.status,
            crate::proto::Status::Ok | crate::proto::Status::Cancelled
        );
        let dash = self.input["args"]
            .as_array()
            .is_some_and(|a| a.iter().any(|v| v.as_str() == Some("-")));
        (failed && dash).then_some(
            "the script was given `-`, which by convention reads standard input, and a run's standard input is empty: band does not pass its own on. Put the content in a workspace file the band admits and give its path instead",
        )
    }

    /// For a failed run while band's own standard input held `waiting` bytes nobody read (`echo
    /// '<json>' | band …/runner`, an interactive script's piped answers): they never reached the
    /// script. Not said for a run given `-` ([`Outcome::stdin_hint`] says it), nor when nothing
    /// waits (an agent's harness often leaves an empty pipe open).
    pub fn piped_stdin_hint(&self, waiting: u64) -> Option<String> {
        let failed = !matches!(
            self.result.status,
            crate::proto::Status::Ok | crate::proto::Status::Cancelled
        );
        (failed && waiting > 0 && self.stdin_hint().is_none()).then(|| {
            format!(
                "band's standard input held {waiting} byte{} that the script never saw: a run's standard input is empty, band does not pass its own on. Put the content in a workspace file the band admits and give its path",
                if waiting == 1 { "" } else { "s" }
            )
        })
    }
}

/// Either a request ready to send, or a result for a run refused before it started.
pub enum Preparation {
    Ready(Box<Prepared>),
    Refused(Box<Outcome>),
}
