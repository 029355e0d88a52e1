//! Descriptors: pipes, `flock`, `poll`, and the descriptors band-jail inherits, keeps or closes.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};

use super::check;

/// `flock(fd, LOCK_EX | LOCK_NB)`. `Ok(false)` when another open file description holds it.
pub(crate) fn try_lock_exclusive(file: &File) -> io::Result<bool> {
    // SAFETY: `file` owns a valid open descriptor for the duration of the call; flock takes no
    // pointers.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(err)
    }
}

/// `pipe2(O_CLOEXEC)`: (read end, write end).
pub(crate) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = std::io::pipe()?;
    Ok((r.into(), w.into()))
}

/// Wait up to `timeout_ms` for `fd` to be readable. `Ok(false)` on timeout.
pub(crate) fn poll_readable(fd: BorrowedFd<'_>, timeout_ms: i32) -> io::Result<bool> {
    fn never() -> bool {
        false
    }
    Ok(poll_readable_unless(fd, timeout_ms, never)?.unwrap_or(false))
}

/// [`poll_readable`], except that a signal that makes `stop` true ends the wait: `Ok(None)`,
/// unless `fd` is readable by then (what was sent comes first). `stop` is also asked before the
/// first wait, so a signal that came just before it is not missed.
pub(crate) fn poll_readable_unless(
    fd: BorrowedFd<'_>,
    timeout_ms: i32,
    stop: fn() -> bool,
) -> io::Result<Option<bool>> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let mut timeout = timeout_ms;
    loop {
        if stop() {
            timeout = 0;
        }
        // SAFETY: `p` is one valid pollfd for the duration of the call.
        let rc = unsafe { libc::poll(&mut p, 1, timeout) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if rc == 0 && timeout == 0 && stop() {
            return Ok(None);
        }
        return Ok(Some(rc > 0));
    }
}

/// Close every descriptor above 2 except those in `keep` (which are marked close-on-exec
/// instead).
pub fn close_fds_except(keep: &[RawFd]) -> io::Result<()> {
    let mut keep: Vec<RawFd> = keep.iter().copied().filter(|k| *k > 2).collect();
    keep.sort_unstable();
    keep.dedup();
    let close = |first: u32, last: u32| -> io::Result<()> {
        if first > last {
            return Ok(());
        }
        // SAFETY: close_range on fd numbers only; no Rust object owns fds above 2 in the callers
        // other than those in `keep` (band-jail holds no other File/OwnedFd across this call).
        check(unsafe { libc::close_range(first, last, 0) }).map(|_| ())
    };
    let mut next: u32 = 3;
    for k in &keep {
        close(next, (*k as u32).saturating_sub(1))?;
        // SAFETY: fcntl on an fd number.
        check(unsafe { libc::fcntl(*k, libc::F_SETFD, libc::FD_CLOEXEC) })?;
        next = *k as u32 + 1;
    }
    close(next, u32::MAX)
}

/// Take ownership of an inherited descriptor number (e.g. `--secrets-fd 3`). Fails if it is not
/// open.
pub fn take_inherited_fd(fd: RawFd) -> io::Result<OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: fcntl(F_GETFD) only inspects the descriptor.
    check(unsafe { libc::fcntl(fd, libc::F_GETFD) })?;
    // SAFETY: the descriptor is open (checked above) and, by the command-line contract, nothing
    // else in this process refers to it, so the OwnedFd is its unique owner.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Write `bytes` to a raw descriptor (used for the jail's status fd after other fds are closed).
pub fn write_fd(fd: RawFd, bytes: &[u8]) -> io::Result<()> {
    let mut off = 0;
    while off < bytes.len() {
        // SAFETY: the pointer and length describe the live `bytes` slice.
        let n = unsafe { libc::write(fd, bytes[off..].as_ptr().cast(), bytes.len() - off) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        off += n as usize;
    }
    Ok(())
}
