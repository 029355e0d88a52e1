//! Process: the bubblewrap argv and the seccomp filter the jail installs.

pub mod bwrap;
pub mod seccomp;
