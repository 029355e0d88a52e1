//! A process that holds secrets or is about to exec (band-server, band-jail; single-threaded
//! when it execs): no core dumps, `no_new_privs`, randomized addresses, and `execve`.

use std::ffi::{CStr, CString};
use std::io;

use super::check;

/// `setrlimit(RLIMIT_CORE, 0)`: a crashing script leaves no core file with its secrets in it.
pub fn disable_core_dumps() -> io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid rlimit for the duration of the call.
    check(unsafe { libc::setrlimit(libc::RLIMIT_CORE, &lim) }).map(|_| ())
}

/// `prctl(PR_SET_NO_NEW_PRIVS, 1)`: no setuid/file-capability gain across exec, ever again.
pub fn set_no_new_privs() -> io::Result<()> {
    // SAFETY: prctl with integer arguments.
    check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }).map(|_| ())
}

/// Take `ADDR_NO_RANDOMIZE` out of this process's persona, which its programs inherit through
/// `exec`: each of them is then mapped at addresses the kernel randomizes (where
/// `kernel.randomize_va_space` is not 0). Whether the flag was set.
pub fn clear_addr_no_randomize() -> io::Result<bool> {
    const QUERY: libc::c_ulong = 0xffff_ffff;
    // SAFETY: personality takes an integer and touches no memory; QUERY only reads the persona.
    let persona = check(unsafe { libc::personality(QUERY) })? as libc::c_ulong;
    let flag = libc::ADDR_NO_RANDOMIZE as libc::c_ulong;
    if persona & flag == 0 {
        return Ok(false);
    }
    // SAFETY: as above; this sets the persona without the flag.
    check(unsafe { libc::personality(persona & !flag) })?;
    Ok(true)
}

/// `execve(path, argv, envp)`. Only returns on failure. All strings are prepared by the caller so
/// nothing allocates between installing seccomp and this call.
pub fn execve(path: &CStr, argv: &[CString], envp: &[CString]) -> io::Error {
    let mut a: Vec<*const libc::c_char> = argv.iter().map(|s| s.as_ptr()).collect();
    a.push(std::ptr::null());
    let mut e: Vec<*const libc::c_char> = envp.iter().map(|s| s.as_ptr()).collect();
    e.push(std::ptr::null());
    // SAFETY: `path`, every argv/envp string and both null-terminated pointer arrays live until
    // the call returns (it only returns on failure).
    unsafe { libc::execve(path.as_ptr(), a.as_ptr(), e.as_ptr()) };
    io::Error::last_os_error()
}
