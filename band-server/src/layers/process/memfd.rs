//! memfd execution: what makes a memfd of the run non-executable.
//!
//! On Linux 6.3+ `vm.memfd_noexec` is per pid namespace: band-server gives every run a pid
//! namespace of its own (see `sys::PreExec`) and writes `2` there before bubblewrap starts, so
//! every memfd of the run is created non-executable and sealed that way (`F_SEAL_EXEC`), and
//! `memfd_create(MFD_EXEC)` fails. Without the sysctl, the seccomp filter denies `memfd_create`
//! altogether ([`super::seccomp::Profile::deny_memfd`]).

use std::io;
use std::path::Path;

/// The sysctl, as seen by band-server (its pid namespace's `/proc`).
pub(crate) const MEMFD_NOEXEC: &str = "/proc/sys/vm/memfd_noexec";

/// How the run is kept from executing memfds.
#[derive(Debug)]
pub(crate) enum MemfdGuard {
    /// The sysctl, opened for writing, for the run's pid namespace.
    Sysctl(std::fs::File),
    /// The kernel has no such sysctl: seccomp denies `memfd_create`.
    Seccomp,
}

/// Open `path` (normally [`MEMFD_NOEXEC`]) for writing; a missing file means an older kernel.
/// Any other error is returned: the run must not start when the guard cannot be set up.
pub(crate) fn open(path: &Path) -> io::Result<MemfdGuard> {
    match fs_err::OpenOptions::new().write(true).open(path) {
        Ok(f) => Ok(MemfdGuard::Sysctl(f.into_file())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(MemfdGuard::Seccomp),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_sysctl_falls_back_to_seccomp() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(matches!(
            open(&tmp.path().join("memfd_noexec")).unwrap(),
            MemfdGuard::Seccomp
        ));
        fs_err::write(tmp.path().join("memfd_noexec"), "0\n").unwrap();
        assert!(matches!(
            open(&tmp.path().join("memfd_noexec")).unwrap(),
            MemfdGuard::Sysctl(_)
        ));
        // Not a file we can write: the error names the path.
        let err = open(tmp.path()).unwrap_err();
        assert!(
            err.to_string().contains(&tmp.path().display().to_string()),
            "{err}"
        );
    }
}
