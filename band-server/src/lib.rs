//! band-server: builds and tears down the sandbox for one run.
//!
//! Runs as root, one request per process: reads a `RunRequest` line on stdin, streams events and
//! one result on stdout (see `band::proto`). Kernel-facing setup is synchronous; nothing here uses
//! an async runtime.
//!
//! Modules: `cgroup` and `seccomp` are pure builders plus thin appliers; `sys` holds the only
//! `unsafe` code in the workspace.

pub mod cgroup;
pub mod seccomp;
