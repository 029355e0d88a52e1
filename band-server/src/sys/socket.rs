//! Unix sockets: the peer's credentials (`SO_PEERCRED`, `SCM_CREDENTIALS`) and the CLI gate's
//! descriptor hand-over (band-server → band-shim, band-server → band-jail: `SCM_RIGHTS`).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::os::unix::net::UnixStream;

use band_shim::sys::recvmsg_cmsgs;

use super::check;

/// The credentials of the process at the other end of a connected unix socket, as the kernel
/// recorded them at `connect()` time, translated into our pid namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PeerCred {
    pub(crate) pid: i32,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
}

/// `getsockopt(SO_PEERCRED)`.
pub(crate) fn peer_cred(sock: &UnixStream) -> io::Result<PeerCred> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes given; the fd is owned by `sock`.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    check(rc)?;
    Ok(PeerCred {
        pid: cred.pid,
        uid: cred.uid,
        gid: cred.gid,
    })
}

/// `setsockopt(SO_PASSCRED, 1)`: from now on every message received on `sock` carries its
/// sender's credentials (see [`recv_with_creds`]). Set on a listening unix socket, every
/// connection it accepts has it from the start (the kernel copies it at `accept`), and bytes a
/// peer sends before the `accept` carry their sender too.
pub(crate) fn set_passcred(sock: std::os::fd::BorrowedFd<'_>) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: `one` is a valid c_int for the duration of the call; the fd is borrowed, open.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PASSCRED,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    check(rc).map(|_| ())
}

/// `recvmsg` into `buf`, returning the byte count and the sender's pid from `SCM_CREDENTIALS`
/// (`None` if the message carried none). With `SO_PASSCRED` set, the kernel never joins bytes of
/// two different senders into one read, so the pid is that of every byte returned.
pub(crate) fn recv_with_creds(
    sock: &UnixStream,
    buf: &mut [u8],
) -> io::Result<(usize, Option<i32>)> {
    let mut pid = None;
    let n = recvmsg_cmsgs(sock, buf, &mut |c| {
        // SAFETY: `c` is a header of the filled control buffer (`recvmsg_cmsgs`); CMSG_DATA of an
        // SCM_CREDENTIALS header holds a ucred (read unaligned).
        unsafe {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_CREDENTIALS {
                let cred: libc::ucred = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                pid = Some(cred.pid);
            }
        }
    })?;
    Ok((n, pid))
}

/// `sendmsg` of `data` with one descriptor attached (`SCM_RIGHTS`). Returns the bytes sent (the
/// descriptor travels with the first of them); the caller writes any rest without it.
pub fn send_with_fd(sock: &UnixStream, data: &[u8], fd: BorrowedFd<'_>) -> io::Result<usize> {
    // Room for one control message holding one int, aligned as cmsghdr requires.
    let mut control = [0u64; 4];
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: an all-zero msghdr is a valid "no name, no iov, no control" value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE only computes a size.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as _;
    // SAFETY: `control` is larger than CMSG_SPACE(sizeof(int)) (32 bytes against 24), so
    // CMSG_FIRSTHDR is non-null and the header and its int fit; the write is unaligned-safe.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<RawFd>(), fd.as_raw_fd());
    }
    loop {
        // SAFETY: `msg` points at `iov` (which describes `data`, only read by the kernel) and at
        // `control`; all outlive the call. MSG_NOSIGNAL: a closed peer is an error, not SIGPIPE.
        let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}
