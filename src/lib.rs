//! band: run AI-agent skills in a sandbox that denies everything a skill has not declared.
//!
//! This crate is the shared library used by the `band` CLI and by `band-server`:
//!
//! - [`manifest`]: BAND.md / SKILL.md parsing with located diagnostics.
//! - [`policy`]: allow/deny/insist rules, their matchers, and composition into one effective policy.
//! - [`contract`]: JSON Schema contracts per script, resolved offline.
//! - [`skill`]: the skill folder layout and per-script band discovery.
//! - [`skillfs`]: reading a skill's own files as the run does (never through a link out of it).
//! - [`proto`]: the versioned wire protocol between `band` and `band-server`, and the exit-code table.
//! - [`lock`]: `band.lock`, the fingerprint of a skill bundle, and the check against it.
//! - [`ledger`]: the append-only, hash-chained run ledger.
//! - [`suggest`]: the nearest known name to a mistyped one ("did you mean").
//! - [`warm`]: the host target's warm band-server: the digest of what it serves, its socket.
//! - [`diag`]: diagnostics (file, line, column, code, hint) shared by everything that reports on input.
//!
//! Everything here is pure or does plain file I/O (the ledger also takes a file lock); nothing
//! else touches the kernel.

pub mod contract;
pub mod diag;
pub mod learn;
pub mod ledger;
pub mod lock;
pub mod manifest;
pub mod policy;
pub mod proto;
pub mod skill;
pub mod skillfs;
pub mod suggest;
pub mod units;
pub mod warm;

#[cfg(test)]
mod layering;

#[cfg(feature = "cli")]
pub mod client;
#[cfg(feature = "cli")]
pub mod doctor;
#[cfg(feature = "cli")]
pub mod lint;
#[cfg(feature = "cli")]
pub mod scaffold;
#[cfg(feature = "cli")]
pub mod vm;
#[cfg(feature = "cli")]
pub mod wrap;
