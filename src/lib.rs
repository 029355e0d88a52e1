//! band: run AI-agent skills in a sandbox that denies everything a skill has not declared.
//!
//! This crate is the library the `band` CLI and `band-server` share, so that a band file, a
//! pattern and a request mean the same on both sides (band-server uses it without the `cli`
//! feature). The design is in `docs/architecture.md`.
//!
//! Always built:
//!
//! - [`manifest`]: BAND.md / SKILL.md parsing with located diagnostics, and `band fmt`'s form.
//! - [`policy`]: allow/deny/insist rules, their matchers, and composition into one policy.
//! - [`contract`]: JSON Schema contracts per script, resolved offline.
//! - [`skill`]: the skill folder layout and per-script band discovery.
//! - [`skillfs`]: reading a skill's own files as the run does (never through a link out of it).
//! - [`launch`]: how an entry point starts (its `#!` line, or an interpreter by its extension).
//! - [`entry`]: which files of `scripts/` are entry points (`band wrap` and the skill loader).
//! - [`lock`]: `band.lock`, the fingerprint of a skill bundle, and the check against it.
//! - [`ledger`]: the append-only, hash-chained run ledger.
//! - [`proto`]: the versioned wire protocol between `band` and `band-server`, and the exit codes.
//! - [`deps`]: the Python packages a script declares (PEP 723, requirements.txt, pyproject.toml
//!   and uv.lock), and the resolved lock its environment is built from.
//! - [`diag`]: diagnostics (file, line, column, code, hint) and the table of lint codes.
//! - [`learn`]: `band learn`'s drafting: observations in, the narrowest band and its diff out.
//! - [`warm`]: the host target's warm band-server: the digest of what it serves, its socket.
//! - [`units`]: human sizes and durations (`512m`, `30s`).
//! - [`suggest`]: the nearest known name to a mistyped one ("did you mean").
//!
//! With the `cli` feature (the `band` binary's side):
//!
//! - `client`: a run from the client's side: the pipeline, its transports, the workspace, the
//!   ledger record, `band exec`.
//! - `vm`: VM images, SSH, staging band-server, and the `vm::driver::Driver`s (qemu, lima, and
//!   remote for an `ssh://` host).
//! - `doctor`: `band doctor`'s checks.
//! - `lint`: `band lint`'s checks and renderers.
//! - `scaffold`: `band init` and `band new-script`.
//! - `wrap`: `band wrap`.
//!
//! Nothing here builds a sandbox, and there is no `unsafe` code. The modules always built do
//! file I/O only: the ledger takes a file lock, and `skillfs` opens files with `openat2` where
//! the kernel has it. The `cli` modules also start processes and talk to them: band-server
//! (directly or through `sudo -n`, or over the warm server's socket), `ssh`, QEMU, `limactl`,
//! `mmdebstrap`; and `band doctor` probes the host (bubblewrap, the Landlock ABI).

pub mod contract;
pub mod deps;
pub mod diag;
pub mod entry;
pub mod launch;
pub mod learn;
pub mod ledger;
pub mod lock;
pub mod manifest;
pub mod policy;
pub mod proto;
pub mod sign;
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
