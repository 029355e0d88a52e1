//! Paths several layers name, defined below all of them.

/// The read-only system trees that are bound into every sandbox (the filesystem layer binds
/// them and hides their executables; the CLI gate runs `#!` commands in them at their host paths).
pub const LIB_ROOTS: &[&str] = &["/usr/lib", "/usr/lib64", "/usr/libexec", "/usr/share"];

/// Where the run's commands are, inside the sandbox (the process layer binds them; the run
/// directory's root links to them).
pub const SANDBOX_PATH: &str = "/band/bin";
