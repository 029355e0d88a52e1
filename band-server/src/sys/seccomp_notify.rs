//! seccomp user notification (`band learn`'s observer of paths and execs): the listener, and
//! receiving, checking and continuing its notifications.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};

use super::check;

/// Install the classic BPF `program` on the calling thread with `SECCOMP_FILTER_FLAG_NEW_LISTENER`
/// (Linux 5.0) and return the listener: a descriptor (close-on-exec) on which the syscalls the
/// program answers `SECCOMP_RET_USER_NOTIF` wait for a supervisor. Needs `PR_SET_NO_NEW_PRIVS`
/// (or `CAP_SYS_ADMIN`).
pub fn seccomp_listener(program: &[libc::sock_filter]) -> io::Result<OwnedFd> {
    use std::os::fd::FromRawFd;
    let len = u16::try_from(program.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "BPF program too long"))?;
    let prog = libc::sock_fprog {
        len,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: `prog` points at `program`, which outlives the call; the kernel copies it and does
    // not write through it. The result is a new descriptor or -1, checked before use.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &prog as *const libc::sock_fprog,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor to us; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(rc as RawFd) })
}

/// One syscall waiting for the supervisor (`struct seccomp_notif`): its id, the process (in the
/// listener's pid namespace), the syscall number and its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SeccompNotif {
    pub(crate) id: u64,
    pub(crate) pid: u32,
    pub(crate) nr: i32,
    pub(crate) args: [u64; 6],
}

/// `SECCOMP_IOCTL_NOTIF_RECV`: wait for the next notification on a listener.
pub(crate) fn seccomp_notif_recv(listener: BorrowedFd<'_>) -> io::Result<SeccompNotif> {
    // SAFETY: an all-zero seccomp_notif is what the kernel requires on input.
    let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: the ioctl writes one seccomp_notif into `n`, which lives for the call.
    check(unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV,
            &mut n as *mut libc::seccomp_notif,
        )
    })?;
    Ok(SeccompNotif {
        id: n.id,
        pid: n.pid,
        nr: n.data.nr,
        args: n.data.args,
    })
}

/// `SECCOMP_IOCTL_NOTIF_ID_VALID`: whether notification `id` is still pending (its process still
/// waits in that syscall). Checked after reading the process's memory: the documented guard
/// against the pid having been reused meanwhile.
pub(crate) fn seccomp_notif_id_valid(listener: BorrowedFd<'_>, id: u64) -> bool {
    // SAFETY: the ioctl reads one u64 from `&id`, which lives for the call.
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &id as *const u64,
        )
    };
    rc == 0
}

/// Answer notification `id` with `SECCOMP_USER_NOTIF_FLAG_CONTINUE`: the kernel runs the syscall
/// as if no filter had asked (observation only; the sandbox's mounts and the other filters still
/// decide).
pub(crate) fn seccomp_notif_continue(listener: BorrowedFd<'_>, id: u64) -> io::Result<()> {
    let mut r = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: 0,
        flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
    };
    // SAFETY: the ioctl reads one seccomp_notif_resp from `r`, which lives for the call.
    check(unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &mut r as *mut libc::seccomp_notif_resp,
        )
    })
    .map(|_| ())
}
