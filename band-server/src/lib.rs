//! band-server: builds and tears down the sandbox for one run.
//!
//! Runs as root, one request per process: reads a `RunRequest` line on stdin, streams events and
//! one result on stdout (see `band::proto`). Kernel-facing setup is synchronous; nothing here uses
//! an async runtime.
//!
//! Modules:
//!
//! - [`run`]: the pipeline of one run, in order, and its teardown guard.
//! - [`request`]: pure checks on a request (paths, bundle hash, secrets, run id).
//! - [`config`]: `/etc/band/server.toml` and the effective limits (`min(band, cap)`).
//! - [`uidpool`]: per-run users `band-run-N`, leased with `flock`.
//! - [`workdir`]: the per-run tmpfs with skill, workspace, io, tmp, synthetic `/etc`, wrappers.
//! - [`bwrap`]: the bubblewrap argv, a pure function of a plan.
//! - [`shim`] / [`reports`]: the CLI layer (policy file, decision, verified report socket).
//! - [`collect`]: output, written files, insist and status, read after the run.
//! - [`janitor`]: cleanup after servers that died mid-run.
//! - `cgroup` and `seccomp`: pure builders plus thin appliers; `sys` holds the only `unsafe`
//!   code of band-server.

pub mod bwrap;
pub mod cgroup;
pub mod collect;
pub mod config;
pub mod error;
pub mod janitor;
pub mod reports;
pub mod request;
pub mod run;
pub mod seccomp;
pub mod shim;
pub mod sys;
pub mod uidpool;
pub mod workdir;
