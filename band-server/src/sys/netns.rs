//! The network namespace of a networked run (`layers::net::netns`): a user and a network
//! namespace made by a short-lived child, and joining the network namespace from a thread.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use super::check;
use super::fd::pipe;
use super::process::kill;

/// The child of [`user_and_net_namespaces`]: close every descriptor but `report` and `release`,
/// become `uid`/`gid`, unshare a user and a network namespace, report `[step, errno as 4 bytes]`
/// (step 0 = done) on `report`, then wait for EOF on `release` and exit. Only async-signal-safe
/// syscalls; never returns.
///
/// The fork copied every descriptor band-server had open, those of other threads' pipes among
/// them (a spare sandbox's gate, a run's secrets); this child never execs, so without the close
/// it would hold their write ends, and their readers would wait for it, until it exits.
fn ns_holder(uid: u32, gid: u32, report: RawFd, release: RawFd) -> ! {
    let fail = |step: u8| -> ! {
        // SAFETY: reads the thread's errno, a plain function with no arguments.
        let errno = unsafe { *libc::__errno_location() }.to_ne_bytes();
        let msg = [step, errno[0], errno[1], errno[2], errno[3]];
        // SAFETY: writes 5 bytes from a stack buffer; `_exit` never returns.
        unsafe {
            libc::write(report, msg.as_ptr().cast(), msg.len());
            libc::_exit(1)
        }
    };
    let (low, high) = (
        report.min(release) as libc::c_uint,
        report.max(release) as libc::c_uint,
    );
    // SAFETY: closes this process's copies of the parent's descriptors, all but the two it uses
    // (nothing here owns them); `high` is at most `c_uint::MAX - 1` (a descriptor number).
    unsafe {
        if low > 0 {
            libc::close_range(0, low - 1, 0);
        }
        if high > low + 1 {
            libc::close_range(low + 1, high - 1, 0);
        }
        libc::close_range(high + 1, libc::c_uint::MAX, 0);
    }
    // SAFETY: setgroups with a zero-length list and a null pointer is valid.
    if unsafe { libc::setgroups(0, std::ptr::null()) } != 0 {
        fail(1);
    }
    // SAFETY: plain syscalls on integers.
    if unsafe { libc::setgid(gid) } != 0 || unsafe { libc::setuid(uid) } != 0 {
        fail(2);
    }
    // SAFETY: plain syscall with integer flags; this process has one thread (a child of fork).
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) } != 0 {
        fail(3);
    }
    let ok = [0u8; 5];
    let mut buf = [0u8; 1];
    // SAFETY: writes from / reads into stack buffers of the given sizes; `_exit` never returns.
    unsafe {
        libc::write(report, ok.as_ptr().cast(), ok.len());
        while libc::read(release, buf.as_mut_ptr().cast(), 1) > 0 {}
        libc::_exit(0)
    }
}

/// A new user namespace owned by `uid` (its root mapped to `uid`/`gid`) and a new network
/// namespace owned by that user namespace: (user namespace, network namespace), as descriptors.
///
/// A short-lived child makes them (`fork`, drop to `uid`, `unshare`); this process opens them
/// from `/proc/<child>/ns`, writes the maps and lets the child exit. Nothing names the
/// namespaces afterwards but these descriptors (and whatever joins them): when the last goes,
/// so do the namespaces and every interface inside.
pub(crate) fn user_and_net_namespaces(uid: u32, gid: u32) -> io::Result<(OwnedFd, OwnedFd)> {
    let (report_r, report_w) = pipe()?;
    let (release_r, release_w) = pipe()?;
    let (rw, rr) = (report_w.as_raw_fd(), release_r.as_raw_fd());
    // SAFETY: the child only makes async-signal-safe syscalls on integers and stack buffers
    // (`ns_holder`) and `_exit`s; it never returns into Rust code of this process.
    let pid = check(unsafe { libc::fork() })?;
    if pid == 0 {
        ns_holder(uid, gid, rw, rr);
    }
    drop(report_w);
    drop(release_r);
    let result = (|| {
        let mut msg = [0u8; 5];
        let mut f = File::from(report_r);
        io::Read::read_exact(&mut f, &mut msg)?;
        if msg[0] != 0 {
            let errno = i32::from_ne_bytes([msg[1], msg[2], msg[3], msg[4]]);
            let step = match msg[0] {
                1 => "setgroups",
                2 => "setgid/setuid",
                _ => "unshare(CLONE_NEWUSER | CLONE_NEWNET)",
            };
            let e = io::Error::from_raw_os_error(errno);
            return Err(io::Error::new(e.kind(), format!("{step}: {e}")));
        }
        let open = |what: &str| -> io::Result<OwnedFd> {
            Ok(OwnedFd::from(
                fs_err::File::open(format!("/proc/{pid}/ns/{what}"))?
                    .into_parts()
                    .0,
            ))
        };
        let (user, net) = (open("user")?, open("net")?);
        fs_err::write(format!("/proc/{pid}/uid_map"), format!("0 {uid} 1\n"))?;
        fs_err::write(format!("/proc/{pid}/gid_map"), format!("0 {gid} 1\n"))?;
        Ok((user, net))
    })();
    drop(release_w);
    if result.is_err() {
        let _ = kill(pid, libc::SIGKILL);
    }
    let mut status: libc::c_int = 0;
    // SAFETY: `status` is a valid c_int for writes; `pid` is our child.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0
        && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
    {}
    result
}

/// `setns(fd, CLONE_NEWNET)`: the calling *thread* moves to the network namespace `fd` (sockets
/// it creates from now on belong there). Call it on a thread of its own.
pub(crate) fn setns_net(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: setns on a borrowed, open descriptor; it only changes this thread's namespace.
    check(unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) }).map(|_| ())
}
