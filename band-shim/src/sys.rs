//! The system calls band-shim makes, and band-server too (band-server's `sys` re-exports them:
//! one definition). Thin wrappers that return `io::Result` built from `errno`, take only owned
//! or borrowed Rust values, and say what makes each `unsafe` block sound. The workspace's other
//! `unsafe` code is band-server's `sys`, band-shim's libc-free start (`sys/bare.rs`) and its
//! entry (`band-server/src/bin/band-shim.rs`), as CONTRIBUTING lists.
#![allow(unsafe_code)]

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub mod bare;

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// `recvmsg` into `buf` (retried on `EINTR`, control messages received close-on-exec), then
/// `on_cmsg` for each control message header the kernel filled in. Returns the byte count.
pub fn recvmsg_cmsgs(
    sock: &UnixStream,
    buf: &mut [u8],
    on_cmsg: &mut dyn FnMut(*const libc::cmsghdr),
) -> io::Result<usize> {
    // Room for one ucred or a few descriptors, aligned as cmsghdr requires.
    let mut control = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: an all-zero msghdr is a valid "no name, no iov, no control" value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    let n = loop {
        // SAFETY: `msg` points at `iov` (which describes `buf`) and at `control`; all outlive the
        // call and have the sizes given.
        let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    // SAFETY: CMSG_FIRSTHDR/CMSG_NXTHDR walk the control buffer the kernel filled in, bounded by
    // msg_controllen; each header handed on lies inside `control`, alive for the callback.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            on_cmsg(c);
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok(n)
}

/// This program image's addresses from its auxiliary vector (`getauxval`), or `None` when the C
/// library has no value for one of them.
// `c_ulong` is `u32` on 32-bit targets: the casts are no-ops only on 64-bit ones.
#[allow(clippy::unnecessary_cast)]
pub fn image_addresses() -> Option<crate::proto::ImageAddresses> {
    // SAFETY: getauxval reads the process's saved auxiliary vector; it takes and returns integers.
    let (phdr, random) = unsafe {
        (
            libc::getauxval(libc::AT_PHDR),
            libc::getauxval(libc::AT_RANDOM),
        )
    };
    (phdr != 0 && random != 0).then_some(crate::proto::ImageAddresses {
        phdr: phdr as u64,
        random: random as u64,
    })
}

/// `prctl(PR_SET_NAME, name)`: the calling thread's name (`/proc/<pid>/comm`, at most 15 bytes).
pub fn set_comm(name: &CStr) -> io::Result<()> {
    // SAFETY: `name` is a valid NUL-terminated string for the duration of the call.
    check(unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr() as libc::c_ulong, 0, 0, 0) })
        .map(|_| ())
}

/// `prctl(PR_SET_DUMPABLE, 0)`: other processes of the same uid can no longer ptrace this one,
/// open its `/proc/<pid>/mem`, or take its file descriptors with `pidfd_getfd`.
pub fn set_not_dumpable() -> io::Result<()> {
    // SAFETY: prctl with integer arguments.
    check(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) }).map(|_| ())
}

/// `recvmsg` into `buf`, returning the byte count and the descriptor that came with the bytes
/// (`SCM_RIGHTS`, received close-on-exec), if any. Extra descriptors are closed.
pub fn recv_with_fd(sock: &UnixStream, buf: &mut [u8]) -> io::Result<(usize, Option<OwnedFd>)> {
    use std::os::fd::FromRawFd;
    let mut got: Option<OwnedFd> = None;
    let n = recvmsg_cmsgs(sock, buf, &mut |c| {
        // SAFETY: `c` is a header of the filled control buffer (`recvmsg_cmsgs`); an SCM_RIGHTS
        // header holds (cmsg_len - CMSG_LEN(0)) / 4 ints, each a descriptor the kernel just
        // installed in this process, owned by nobody else yet.
        unsafe {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let bytes = (*c).cmsg_len - libc::CMSG_LEN(0) as usize;
                let data = libc::CMSG_DATA(c).cast::<RawFd>();
                for i in 0..bytes / std::mem::size_of::<RawFd>() {
                    let fd = OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i)));
                    if got.is_none() {
                        got = Some(fd);
                    }
                }
            }
        }
    })?;
    Ok((n, got))
}

/// `execveat(fd, "", argv, envp, AT_EMPTY_PATH)`: run the program `fd` refers to (an `O_PATH`
/// descriptor is enough; the caller needs only execute permission on the file). Only returns on
/// failure.
pub fn execveat_fd(fd: BorrowedFd<'_>, argv: &[CString], envp: &[CString]) -> io::Error {
    let mut a: Vec<*mut libc::c_char> = argv.iter().map(|s| s.as_ptr().cast_mut()).collect();
    a.push(std::ptr::null_mut());
    let mut e: Vec<*mut libc::c_char> = envp.iter().map(|s| s.as_ptr().cast_mut()).collect();
    e.push(std::ptr::null_mut());
    // SAFETY: the empty path, every argv/envp string and both null-terminated pointer arrays live
    // until the call returns (it only returns on failure); the kernel does not write through
    // them; `fd` is open for the duration of the call.
    unsafe {
        libc::execveat(
            fd.as_raw_fd(),
            c"".as_ptr(),
            a.as_ptr(),
            e.as_ptr(),
            libc::AT_EMPTY_PATH,
        )
    };
    io::Error::last_os_error()
}

/// Put the signal state a program should start with, as `std::process::Command` does before it
/// execs: `SIGPIPE` back to its default action (the Rust runtime ignores it, and an ignored
/// signal stays ignored across `exec`), and an empty signal mask.
pub fn reset_signals_for_exec() -> io::Result<()> {
    // SAFETY: signal() with a valid signal number and SIG_DFL; no handler is installed.
    if unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) } == libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `set` is initialised by sigemptyset before it is read; sigprocmask only reads it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        check(libc::sigemptyset(&mut set))?;
        check(libc::sigprocmask(
            libc::SIG_SETMASK,
            &set,
            std::ptr::null_mut(),
        ))?;
    }
    Ok(())
}
