//! Paths several layers name, defined below all of them.

/// The read-only system trees that are bound into every sandbox (the filesystem layer binds
/// them and hides their executables; the CLI gate runs `#!` commands in them at their host paths).
pub const LIB_ROOTS: &[&str] = &["/usr/lib", "/usr/lib64", "/usr/libexec", "/usr/share"];

/// Where the run's commands are, inside the sandbox (the process layer binds them; the run
/// directory's root links to them).
pub(crate) const SANDBOX_PATH: &str = "/band/bin";

/// The folder of the run directory that bubblewrap binds at `/`: `root/`, read-only, with every
/// mount of the sandbox's tree on it (made by the filesystem layer, bound by the process layer).
pub(crate) const VIEW: &str = "view";

/// An empty file and an empty folder of the run's exec folder, the sandbox's `/band` (root-owned,
/// read-only), bound over the host's entries of the run's `/proc` (the filesystem layer's
/// `procmask` and `proc_cover`).
pub(crate) const PROC_COVER_FILE: &str = "empty";
pub(crate) const PROC_COVER_DIR: &str = "empty.d";
