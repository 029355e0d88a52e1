//! Process: the bubblewrap argv, the seccomp filter the jail installs, and the memfd guard.

pub mod apply;
pub mod bwrap;
pub mod memfd;
pub mod seccomp;

use crate::layer::RunLayer;

/// The process layer: bubblewrap and the jail leave nothing behind that the other layers do not
/// remove (their processes die with the cgroup and the uid).
pub struct Process;

impl RunLayer for Process {}
