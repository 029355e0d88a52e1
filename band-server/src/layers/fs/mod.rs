//! Filesystem: the run directory, the hidden library executables and their cached whiteouts.

pub mod execmask;
pub mod maskcache;
pub mod workdir;
