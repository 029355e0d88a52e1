//! The only module of band-server with `unsafe` code: thin wrappers over the syscalls that std
//! does not expose (or exposes only on nightly).
//!
//! Every wrapper returns `io::Result` built from `errno`, takes only owned or borrowed Rust values,
//! and documents what makes its `unsafe` block sound. Nothing here decides policy; callers do.
//!
//! The functions used between `fork` and `exec` ([`PreExec`]) call only async-signal-safe
//! functions (`write`, `fcntl`, `dup2`, `setgroups`, `setgid`, `setuid`, `prctl`, `getppid`,
//! `unshare`, `setns`, `mount`, `mknod`, `chown`, `fork`, `waitpid`, `close_range`, `_exit`) and
//! never allocate: everything they need is prepared before the fork.
#![allow(unsafe_code)]

use std::ffi::{CStr, CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

// The calls band-shim makes too, defined once in its crate (band-shim links nothing else of ours).
use band_shim::sys::recvmsg_cmsgs;
pub use band_shim::sys::{
    execveat_fd, recv_with_fd, reset_signals_for_exec, set_comm, set_not_dumpable,
};

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// In a `pre_exec` child: drop every supplementary group, then to `gid` and `uid`, and die
/// (SIGKILL) with the parent. Raw syscalls only: no allocation, no lock.
fn drop_to_and_die_with_parent(uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: setgroups with a zero-length list and a null pointer is valid.
    check(unsafe { libc::setgroups(0, std::ptr::null()) })?;
    // SAFETY: plain syscalls on integers.
    check(unsafe { libc::setgid(gid) })?;
    // SAFETY: plain syscall on an integer.
    check(unsafe { libc::setuid(uid) })?;
    // SAFETY: prctl with integer arguments.
    check(unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        )
    })?;
    Ok(())
}

fn cstring(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))
}

/// `flock(fd, LOCK_EX | LOCK_NB)`. `Ok(false)` when another open file description holds it.
pub fn try_lock_exclusive(file: &File) -> io::Result<bool> {
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

/// Mount a tmpfs at `target` with the given data string (`size=…,mode=…`), `nosuid,nodev`.
pub fn mount_tmpfs(target: &Path, data: &str) -> io::Result<()> {
    let data = CString::new(data)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "mount data contains NUL"))?;
    tmpfs(c"band-run", target, libc::MS_NOSUID | libc::MS_NODEV, &data)
}

/// A tmpfs named `source` at `target`, with mount `flags` and `data`.
fn tmpfs(source: &CStr, target: &Path, flags: libc::c_ulong, data: &CStr) -> io::Result<()> {
    let target = cstring(target)?;
    // SAFETY: every pointer is a valid NUL-terminated string that outlives the call.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            c"tmpfs".as_ptr(),
            flags,
            data.as_ptr().cast(),
        )
    };
    check(rc).map(|_| ())
}

/// Mount flags for [`bind_mount`]'s remount step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindFlags {
    pub read_only: bool,
    pub no_exec: bool,
}

/// `mount --bind src target` (not recursive: submounts of `src` stay hidden) then remount it `nosuid,nodev` plus `flags`. A bind mount made here
/// (in the initial user namespace) keeps these flags locked inside the sandbox's user namespace,
/// so bubblewrap's copy of it cannot lift `ro` or `noexec`.
pub fn bind_mount(src: &Path, target: &Path, flags: BindFlags) -> io::Result<()> {
    let mut f = libc::MS_NOSUID | libc::MS_NODEV;
    if flags.read_only {
        f |= libc::MS_RDONLY;
    }
    if flags.no_exec {
        f |= libc::MS_NOEXEC;
    }
    bind_then_remount(src, target, f)
}

/// The sandbox's `/dev` at `target`: a small tmpfs of its own, `nosuid,noexec` but not `nodev`
/// (it holds the device nodes [`mknod_char`] makes), mode 0755. Made in the initial user
/// namespace; [`remount_read_only`] locks it read-only once populated.
pub fn mount_dev_tmpfs(target: &Path) -> io::Result<()> {
    tmpfs(
        c"band-dev",
        target,
        libc::MS_NOSUID | libc::MS_NOEXEC,
        c"mode=0755,size=64k,nr_inodes=64",
    )
}

/// A character device node `major:minor` at `path`, mode 0666 (set after `mknod`: the process's
/// umask would take bits off), owned by root.
pub fn mknod_char(path: &Path, major: u32, minor: u32) -> io::Result<()> {
    let c = cstring(path)?;
    // SAFETY: a valid NUL-terminated path outliving the call; the other arguments are integers.
    let rc = unsafe {
        libc::mknod(
            c.as_ptr(),
            libc::S_IFCHR | 0o666,
            libc::makedev(major, minor),
        )
    };
    check(rc)?;
    fs_err::set_permissions(path, std::fs::Permissions::from_mode(0o666))
}

/// Remount the mount at `target` read-only, `nosuid` and `noexec`, keeping device nodes usable
/// (no `nodev`): a bind remount, so the flags are the mount's own, locked for bubblewrap's copy.
pub fn remount_read_only(target: &Path) -> io::Result<()> {
    mount_flags(
        &cstring(target)?,
        libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NOEXEC,
    )
}

/// `mount(NULL, target, NULL, flags, NULL)`: a change of an existing mount (a remount, its
/// propagation), which names no source, type or data.
fn mount_flags(target: &CStr, flags: libc::c_ulong) -> io::Result<()> {
    // SAFETY: a valid NUL-terminated string outliving the call; null source, fstype and data are
    // allowed for a remount or a propagation change.
    let rc = unsafe {
        libc::mount(
            std::ptr::null(),
            target.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    };
    check(rc).map(|_| ())
}

/// A non-recursive bind of `src` at `target`, then a remount of it with `flags`.
fn bind_then_remount(src: &Path, target: &Path, flags: libc::c_ulong) -> io::Result<()> {
    let src = cstring(src)?;
    let target = cstring(target)?;
    // SAFETY: valid NUL-terminated strings outliving the call; null fstype/data are allowed for
    // MS_BIND.
    let rc = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        )
    };
    check(rc)?;
    mount_flags(&target, libc::MS_BIND | libc::MS_REMOUNT | flags)
}

/// Mount a new devpts instance at `target` (`nosuid,noexec`), as bubblewrap's `--dev` does:
/// the run's own pseudo-terminals, none of the host's or another run's. `/dev/ptmx` is a link to
/// its `ptmx`, mode 0666; a terminal's slave is owned by whoever opened it, mode 0620.
pub fn mount_devpts(target: &Path) -> io::Result<()> {
    let target = cstring(target)?;
    let data = c"newinstance,ptmxmode=0666,mode=620";
    // SAFETY: every pointer is a valid NUL-terminated string that outlives the call.
    let rc = unsafe {
        libc::mount(
            c"devpts".as_ptr(),
            target.as_ptr(),
            c"devpts".as_ptr(),
            libc::MS_NOSUID | libc::MS_NOEXEC,
            data.as_ptr().cast(),
        )
    };
    check(rc).map(|_| ())
}

/// Mount a read-only overlay of `lowers` (first = topmost) at `target`, `nosuid,nodev`.
pub fn mount_overlay_ro(target: &Path, lowers: &[&Path]) -> io::Result<()> {
    let mut data = String::from("lowerdir=");
    for (i, l) in lowers.iter().enumerate() {
        let s = l
            .to_str()
            .filter(|s| !s.contains([':', ',', '\\']))
            .ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, "overlay path with : , or \\")
            })?;
        if i > 0 {
            data.push(':');
        }
        data.push_str(s);
    }
    let target = cstring(target)?;
    let data = CString::new(data)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in overlay data"))?;
    // SAFETY: every pointer is a valid NUL-terminated string that outlives the call.
    let rc = unsafe {
        libc::mount(
            c"band-lib".as_ptr(),
            target.as_ptr(),
            c"overlay".as_ptr(),
            libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV,
            data.as_ptr().cast(),
        )
    };
    check(rc).map(|_| ())
}

/// Create an overlayfs whiteout (a 0:0 character device) at `path`: in an overlay, it hides the
/// file of the same name in the layers below.
pub fn mknod_whiteout(path: &Path) -> io::Result<()> {
    let p = cstring(path)?;
    // SAFETY: valid NUL-terminated string outliving the call; integer mode and device.
    check(unsafe { libc::mknod(p.as_ptr(), libc::S_IFCHR, libc::makedev(0, 0)) }).map(|_| ())
}

/// `mount --make-private target`: mounts made below it no longer propagate to other mount
/// namespaces (the per-run mounts stay band-server's business).
pub fn make_private(target: &Path) -> io::Result<()> {
    mount_flags(&cstring(target)?, libc::MS_PRIVATE)
}

/// `umount2(target, MNT_DETACH)`: lazily detach the mount and everything below it.
pub fn umount_detach(target: &Path) -> io::Result<()> {
    let target = cstring(target)?;
    // SAFETY: valid NUL-terminated string outliving the call.
    let rc = unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    check(rc).map(|_| ())
}

/// The credentials of the process at the other end of a connected unix socket, as the kernel
/// recorded them at `connect()` time, translated into our pid namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerCred {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
}

/// `getsockopt(SO_PEERCRED)`.
pub fn peer_cred(sock: &UnixStream) -> io::Result<PeerCred> {
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
pub fn set_passcred(sock: std::os::fd::BorrowedFd<'_>) -> io::Result<()> {
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

/// Make the calling thread `SCHED_BATCH`: woken, it does not preempt the task running on its
/// CPU, but waits for that task to block or use up its slice. For band-shim's gate (issue 17,
/// round 20): a worker woken by band-shim's `connect` used to preempt band-shim before its
/// request was written, only to block on the read and switch back; now band-shim writes its
/// request and blocks on the answer first, and the worker finds the request there (two context
/// switches fewer a command). Otherwise scheduled as any thread: it gets its share of the CPU,
/// but on a CPU busy with other work it can wait for the running task's slice.
pub fn set_batch_scheduling() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid sched_param for the duration of the call; pid 0 is the calling
    // thread.
    check(unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) }).map(|_| ())
}

/// The calling thread's scheduling policy (`SCHED_OTHER`, `SCHED_BATCH`, …).
pub fn scheduling_policy() -> io::Result<i32> {
    // SAFETY: plain syscall on an integer; pid 0 is the calling thread.
    check(unsafe { libc::sched_getscheduler(0) })
}

/// `recvmsg` into `buf`, returning the byte count and the sender's pid from `SCM_CREDENTIALS`
/// (`None` if the message carried none). With `SO_PASSCRED` set, the kernel never joins bytes of
/// two different senders into one read, so the pid is that of every byte returned.
pub fn recv_with_creds(sock: &UnixStream, buf: &mut [u8]) -> io::Result<(usize, Option<i32>)> {
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

/// `kill(pid, sig)`; ESRCH (already gone) is success.
pub fn kill(pid: i32, sig: i32) -> io::Result<()> {
    if pid <= 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "refusing to signal a process group",
        ));
    }
    // SAFETY: plain syscall on integers.
    let rc = unsafe { libc::kill(pid, sig) };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::ESRCH) {
        Ok(())
    } else {
        Err(err)
    }
}

/// `prctl(PR_SET_CHILD_SUBREAPER, 1)`: orphans below this process are handed to it, not to the
/// host's init (band-server reaps them at the end of the run: [`reap_any`]).
pub fn set_child_subreaper() -> io::Result<()> {
    // SAFETY: prctl with integer arguments.
    check(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }).map(|_| ())
}

/// `waitpid(-1, WNOHANG)`: reap one child of ours that has exited. `Ok(Some(pid))` when one
/// was reaped, `Ok(None)` when none has exited (or there is no child at all).
pub fn reap_any() -> io::Result<Option<i32>> {
    let mut status: libc::c_int = 0;
    // SAFETY: `status` is a valid c_int for writes; plain syscall otherwise.
    let rc = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
    if rc > 0 {
        return Ok(Some(rc));
    }
    let err = io::Error::last_os_error();
    match rc {
        0 => Ok(None),
        _ if err.raw_os_error() == Some(libc::ECHILD) => Ok(None),
        _ => Err(err),
    }
}

/// `fork()` for a process with one thread (`band-server serve`'s accept loop): `Ok(None)` in the
/// child, `Ok(Some(pid))` in the parent. Refused when `/proc/self/task` lists more than one
/// thread, since the child of a multi-threaded fork may find locks held by threads it lacks.
pub fn fork_single_threaded() -> io::Result<Option<i32>> {
    let threads = fs_err::read_dir("/proc/self/task")?.count();
    if threads != 1 {
        return Err(io::Error::other(format!(
            "refusing to fork a process with {threads} threads"
        )));
    }
    // SAFETY: this process has one thread (checked above; only this thread could start another),
    // so the child gets a consistent copy of memory and of every lock; it then runs ordinary Rust.
    let pid = check(unsafe { libc::fork() })?;
    Ok((pid != 0).then_some(pid))
}

/// `getpid()`.
pub fn pid() -> i32 {
    // SAFETY: getpid cannot fail and takes no arguments.
    unsafe { libc::getpid() }
}

/// `geteuid()`.
pub fn euid() -> u32 {
    // SAFETY: geteuid cannot fail and takes no arguments.
    unsafe { libc::geteuid() }
}

/// `pipe2(O_CLOEXEC)`: (read end, write end).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = std::io::pipe()?;
    Ok((r.into(), w.into()))
}

/// What the child does between `fork` and `exec` of bubblewrap, in this order:
///
/// 1. move `fds` to their fixed numbers (e.g. the secrets pipe to fd 3), clearing close-on-exec;
/// 2. `PR_SET_PDEATHSIG(SIGKILL)` and exit if band-server is already gone;
/// 3. `unshare(CLONE_NEWPID)` and `fork`: the child of that fork (the *sandbox init*) is pid 1 of
///    a pid namespace of the run's own, owned by the initial user namespace. The process between
///    (the *reaper*, still root, outside the run's cgroup) closes every descriptor, waits for the
///    sandbox init and exits with its status (a signal `s` as exit code `128 + s`), so band-server
///    sees bubblewrap's outcome and reaps everything: when the sandbox init dies the kernel kills
///    and reaps every process of its namespace (bubblewrap's own pid namespace included), and the
///    reaper reaps the sandbox init, never leaving a zombie for the host's init;
/// 4. the sandbox init joins the run's cgroup(s) by writing `"0"` to each pre-opened join file
///    (v1 `tasks`, v2 `cgroup.procs`: [`crate::layers::cgroup::RunCgroup::join_files`]);
/// 5. it writes `2` to the pre-opened `vm.memfd_noexec` (if given): the kernel applies the value
///    to the writer's pid namespace, the run's, and every pid namespace created below it
///    (bubblewrap's) inherits at least that, so no memfd of the run can ever be executed;
/// 6. `setgroups([])`, `setgid(gid)`, `setuid(uid)`: from here on the process is the run's user;
/// 7. `PR_SET_PDEATHSIG(SIGKILL)` again (the uid change cleared it), tied to the reaper;
/// 8. with a `gate`, it reads one byte from it and closes it: [`GATE_OPEN`] when what the run
///    builds beside the spawn is ready (`run::apply`); anything else ([`GATE_SHUT`], or the end
///    of the pipe) and it exits, and bubblewrap never starts. (The end of the pipe alone cannot
///    say so: this process holds a copy of the write end from its fork when the thread that
///    writes it had it open then; see `layer::GateWriter`.)
///
/// A networked run also joins its own network namespace (`netns`) between steps 2 and 3.
///
/// Joining the cgroup before anything of the run exists means nothing the run starts can escape
/// it; dropping to the run's uid before `exec` means bubblewrap itself never runs as root.
#[derive(Debug)]
pub struct PreExec {
    pub cgroup_join: Vec<File>,
    /// (source fd, target fd) pairs; the sources stay owned by the caller until after spawn.
    pub fds: Vec<(RawFd, RawFd)>,
    pub uid: u32,
    pub gid: u32,
    /// `/proc/sys/vm/memfd_noexec`, opened for writing; `None` on kernels without it (before
    /// 6.3), where the seccomp filter denies `memfd_create` instead.
    pub memfd_noexec: Option<File>,
    /// The run's own network namespace (a networked run, see `layers::net::netns`): joined
    /// with `setns` right after step 2, while still root, so bubblewrap starts inside it.
    /// `None`: bubblewrap makes one with only loopback (`--unshare-net`).
    pub netns: Option<RawFd>,
    /// The read end of the gate of step 8 (`layer::Gate`); owned by the caller until after spawn.
    pub gate: Option<RawFd>,
}

/// The byte of a gate (step 8 of [`PreExec`]) that lets bubblewrap start.
pub const GATE_OPEN: u8 = b'1';
/// The byte of a gate that stops the spawn: what the run builds beside it failed.
pub const GATE_SHUT: u8 = b'0';

/// The reaper's exit code for the sandbox init's wait status: its exit code, or `128 + signal`.
fn reaper_code(status: libc::c_int) -> libc::c_int {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        255
    }
}

/// The reaper (step 3 of [`PreExec`]): close every descriptor, so band-server's spawn sees
/// exec's close-on-exec report pipe close when the sandbox init execs or fails, and the run's
/// pipes reach EOF with the sandbox; wait for `pid`; exit with its status. Never returns.
fn reap_and_exit(pid: libc::pid_t) -> ! {
    // SAFETY: close_range on fd numbers; this process never returns to Rust code that could own
    // one of them (it only waits and `_exit`s).
    unsafe { libc::close_range(0, libc::c_uint::MAX, 0) };
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: `status` is a valid c_int for writes; plain syscall otherwise.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc == pid {
            break;
        }
        // SAFETY: reads the thread's errno, a plain function with no arguments.
        if rc < 0 && unsafe { *libc::__errno_location() } != libc::EINTR {
            // SAFETY: `_exit` is async-signal-safe and never returns.
            unsafe { libc::_exit(255) };
        }
    }
    // SAFETY: `_exit` is async-signal-safe and never returns.
    unsafe { libc::_exit(reaper_code(status)) }
}

impl PreExec {
    /// Install the steps above as `cmd`'s pre-exec hook. `self` moves into the closure, so the
    /// cgroup files stay open until the child has written to them.
    pub fn install(self, cmd: &mut Command) {
        // SAFETY: getpid is a plain syscall that cannot fail.
        let parent = unsafe { libc::getpid() };
        let hook = move || -> io::Result<()> {
            // The descriptors written after the fork (cgroup join files, then the sysctl) are
            // copied out of the way first (to fds >= 64): the dup2 below may land on them.
            let mut later = [-1 as RawFd; 16];
            let sysctl = self.memfd_noexec.iter();
            let written = self.cgroup_join.iter().chain(sysctl);
            for (i, f) in written.enumerate() {
                let slot = later
                    .get_mut(i)
                    .ok_or(io::Error::from_raw_os_error(libc::EINVAL))?;
                // SAFETY: fcntl on an fd number owned by `f`; failure is reported through errno.
                *slot = check(unsafe { libc::fcntl(f.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 64) })?;
            }
            let netns = match self.netns {
                // SAFETY: fcntl on an fd number owned by the caller until after spawn.
                Some(fd) => Some(check(unsafe {
                    libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 64)
                })?),
                None => None,
            };
            let gate = match self.gate {
                // SAFETY: fcntl on an fd number owned by the caller until after spawn.
                Some(fd) => Some(check(unsafe {
                    libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 64)
                })?),
                None => None,
            };
            let joins = &later[..self.cgroup_join.len()];
            let sysctl = self
                .memfd_noexec
                .as_ref()
                .map(|_| later[self.cgroup_join.len()]);
            // Move every source out of the way too, so that a source which happens to equal
            // another pair's target is not clobbered by the dup2 below.
            let mut moved = [0 as RawFd; 8];
            if self.fds.len() > moved.len() {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            }
            for (i, (src, _)) in self.fds.iter().enumerate() {
                // SAFETY: fcntl on an fd number; failure is reported through errno.
                moved[i] = check(unsafe { libc::fcntl(*src, libc::F_DUPFD_CLOEXEC, 64) })?;
            }
            for (i, (_, dst)) in self.fds.iter().enumerate() {
                // SAFETY: dup2 on fd numbers; the new descriptor has close-on-exec cleared.
                check(unsafe { libc::dup2(moved[i], *dst) })?;
            }
            // The reaper dies with band-server (it stays root, so this is never cleared).
            // SAFETY: prctl with integer arguments.
            check(unsafe {
                libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                )
            })?;
            // SAFETY: plain syscall, cannot fail.
            if unsafe { libc::getppid() } != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            if let Some(fd) = netns {
                // SAFETY: setns on an fd number copied above (a network namespace file).
                check(unsafe { libc::setns(fd, libc::CLONE_NEWNET) })?;
            }
            // SAFETY: plain syscall with an integer flag; only children enter the namespace.
            check(unsafe { libc::unshare(libc::CLONE_NEWPID) })?;
            // SAFETY: this process has one thread (a child of fork); fork is async-signal-safe
            // here: the child only makes the raw syscalls below before exec (no allocation, no
            // lock), and the parent only waits and exits.
            let pid = check(unsafe { libc::fork() })?;
            if pid > 0 {
                reap_and_exit(pid);
            }
            for &fd in joins {
                // SAFETY: writes 1 byte from a static buffer to an fd copied above.
                let n = unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) };
                if n != 1 {
                    return Err(io::Error::last_os_error());
                }
            }
            if let Some(fd) = sysctl {
                // SAFETY: writes 1 byte from a static buffer to an fd copied above.
                let n = unsafe { libc::write(fd, b"2".as_ptr().cast(), 1) };
                if n != 1 {
                    return Err(io::Error::last_os_error());
                }
            }
            // Tied to the reaper, which dies with band-server. (getppid is 0 here: the reaper is
            // outside this pid namespace, so there is nothing to compare.)
            drop_to_and_die_with_parent(self.uid, self.gid)?;
            if let Some(fd) = gate {
                let mut byte = 0u8;
                let n = loop {
                    // SAFETY: reads at most 1 byte into a stack variable from an fd copied above.
                    let n = unsafe { libc::read(fd, (&raw mut byte).cast(), 1) };
                    // SAFETY: reads the thread's errno, a plain function with no arguments.
                    if n >= 0 || unsafe { *libc::__errno_location() } != libc::EINTR {
                        break n;
                    }
                };
                // SAFETY: closes the copy made above; nothing else owns that number here.
                unsafe { libc::close(fd) };
                if n != 1 || byte != GATE_OPEN {
                    return Err(io::Error::from_raw_os_error(libc::ECANCELED));
                }
            }
            Ok(())
        };
        // SAFETY: the hook only calls async-signal-safe functions and does not allocate (the
        // `moved` buffer is on the stack; `cgroup_join`, `memfd_noexec` and `fds` were built
        // before the fork).
        unsafe { cmd.pre_exec(hook) };
    }
}

// ---------------------------------------------------------------------------------------------
// The network namespace of a networked run (`layers::net::netns`)
// ---------------------------------------------------------------------------------------------

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
pub fn user_and_net_namespaces(uid: u32, gid: u32) -> io::Result<(OwnedFd, OwnedFd)> {
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
pub fn setns_net(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: setns on a borrowed, open descriptor; it only changes this thread's namespace.
    check(unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) }).map(|_| ())
}

/// What the child does between `fork` and `exec` of the network relay (slirp4netns), which
/// runs as the run's uid but must open `/dev/net/tun` (often `0600 root` when no udev made it
/// `0666`): in a mount namespace of its own (private, nothing propagates back),
///
/// 1. move `fds` to their fixed numbers;
/// 2. `unshare(CLONE_NEWNS)`, make `/` private, mount a small tmpfs on `/dev/net` and make a
///    `tun` device node there owned by `uid` (mode 0600): the host's `/dev/net/tun` is not
///    touched;
/// 3. `setgroups([])`, `setgid`, `setuid`; `PR_SET_PDEATHSIG(SIGKILL)`: the relay dies with
///    band-server (it also exits when its `--exit-fd` pipe closes).
#[derive(Debug)]
pub struct RelayExec {
    pub fds: Vec<(RawFd, RawFd)>,
    pub uid: u32,
    pub gid: u32,
}

impl RelayExec {
    pub fn install(self, cmd: &mut Command) {
        // SAFETY: getpid is a plain syscall that cannot fail.
        let parent = unsafe { libc::getpid() };
        let hook = move || -> io::Result<()> {
            let mut moved = [0 as RawFd; 8];
            if self.fds.len() > moved.len() {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            }
            for (i, (src, _)) in self.fds.iter().enumerate() {
                // SAFETY: fcntl on an fd number; failure is reported through errno.
                moved[i] = check(unsafe { libc::fcntl(*src, libc::F_DUPFD_CLOEXEC, 64) })?;
            }
            for (i, (_, dst)) in self.fds.iter().enumerate() {
                // SAFETY: dup2 on fd numbers; the new descriptor has close-on-exec cleared.
                check(unsafe { libc::dup2(moved[i], *dst) })?;
            }
            // SAFETY: plain syscall with an integer flag; this process has one thread.
            check(unsafe { libc::unshare(libc::CLONE_NEWNS) })?;
            // SAFETY: static NUL-terminated strings; null fstype/data are allowed for a
            // propagation change.
            check(unsafe {
                libc::mount(
                    std::ptr::null(),
                    c"/".as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                )
            })?;
            // SAFETY: static NUL-terminated strings that outlive the call.
            check(unsafe {
                libc::mount(
                    c"band-tun".as_ptr(),
                    c"/dev/net".as_ptr(),
                    c"tmpfs".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NOEXEC,
                    c"mode=0755,size=4k".as_ptr().cast(),
                )
            })?;
            // SAFETY: static NUL-terminated string; integer mode and device (10, 200: tun).
            check(unsafe {
                libc::mknod(
                    c"/dev/net/tun".as_ptr(),
                    libc::S_IFCHR | 0o600,
                    libc::makedev(10, 200),
                )
            })?;
            // SAFETY: static NUL-terminated string; integer ids.
            check(unsafe { libc::chown(c"/dev/net/tun".as_ptr(), self.uid, self.gid) })?;
            drop_to_and_die_with_parent(self.uid, self.gid)?;
            // SAFETY: plain syscall, cannot fail.
            if unsafe { libc::getppid() } != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        };
        // SAFETY: the hook only makes async-signal-safe syscalls on integers, stack buffers and
        // static strings; `fds` was built before the fork.
        unsafe { cmd.pre_exec(hook) };
    }
}

// ---------------------------------------------------------------------------------------------
// band-jail and band-shim (single-threaded, about to exec)
// ---------------------------------------------------------------------------------------------

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

/// Close every descriptor above 2 except `keep` (which is marked close-on-exec instead).
pub fn close_fds_above_stderr(keep: Option<RawFd>) -> io::Result<()> {
    let close = |first: u32, last: u32| -> io::Result<()> {
        if first > last {
            return Ok(());
        }
        // SAFETY: close_range on fd numbers only; no Rust object owns fds above 2 in the callers
        // (band-jail and band-shim hold no File/OwnedFd across this call).
        check(unsafe { libc::close_range(first, last, 0) }).map(|_| ())
    };
    match keep {
        Some(k) if k > 2 => {
            close(3, (k - 1) as u32)?;
            close(k as u32 + 1, u32::MAX)?;
            // SAFETY: fcntl on an fd number.
            check(unsafe { libc::fcntl(k, libc::F_SETFD, libc::FD_CLOEXEC) }).map(|_| ())
        }
        _ => close(3, u32::MAX),
    }
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

/// Build a `CString` from an `OsStr` (fails on interior NUL).
pub fn os_cstring(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "argument contains NUL"))
}

// ---------------------------------------------------------------------------------------------
// The CLI gate's descriptor hand-over (band-server → band-shim, band-server → band-jail)
// ---------------------------------------------------------------------------------------------

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

/// What one fanotify event says: its mask, the process, and the file (as `/proc/self/fd` names
/// it, `None` if it could not be read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FanEvent {
    pub mask: u64,
    pub pid: i32,
    pub path: Option<std::path::PathBuf>,
    /// The file's (device, inode): the path alone is relative to the mount's root once the
    /// sandbox's mounts are gone (`/out/r.md` for `/workspace/out/r.md`).
    pub file: Option<(u64, u64)>,
}

/// `fanotify_init(FAN_CLASS_NOTIF)` (non-blocking, close-on-exec) with one mark on the whole
/// filesystem that holds `path` (`FAN_MARK_FILESYSTEM`, Linux 4.20): every `mask` event of every
/// process on that filesystem, however the file was reached (bind mounts included). Needs
/// `CAP_SYS_ADMIN`. Notification only: nothing waits for band-server's answer.
pub fn fanotify_filesystem(path: &Path, mask: u64) -> io::Result<OwnedFd> {
    use std::os::fd::FromRawFd;
    let p = cstring(path)?;
    // SAFETY: plain flags; the result is checked before use.
    let fd = check(unsafe {
        libc::fanotify_init(
            libc::FAN_CLASS_NOTIF | libc::FAN_CLOEXEC | libc::FAN_NONBLOCK,
            (libc::O_RDONLY | libc::O_LARGEFILE | libc::O_CLOEXEC) as libc::c_uint,
        )
    })?;
    // SAFETY: fanotify_init just returned this descriptor and nothing else refers to it.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: `owned` is open, `p` is a NUL-terminated path that outlives the call.
    check(unsafe {
        libc::fanotify_mark(
            owned.as_raw_fd(),
            libc::FAN_MARK_ADD | libc::FAN_MARK_FILESYSTEM,
            mask,
            libc::AT_FDCWD,
            p.as_ptr(),
        )
    })?;
    Ok(owned)
}

/// Wait up to `timeout_ms` for `fd` to be readable. `Ok(false)` on timeout.
pub fn poll_readable(fd: BorrowedFd<'_>, timeout_ms: i32) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: `p` is one valid pollfd for the duration of the call.
        let rc = unsafe { libc::poll(&mut p, 1, timeout_ms) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        return Ok(rc > 0);
    }
}

/// Read the queued events of a [`fanotify_filesystem`] descriptor (none when it would block).
/// Each event's file descriptor is named through `/proc/self/fd` and closed here.
pub fn fanotify_read(fd: BorrowedFd<'_>) -> io::Result<Vec<FanEvent>> {
    use std::os::fd::FromRawFd;
    let mut buf = vec![0u8; 64 * 1024];
    // SAFETY: the pointer and length describe the live `buf`.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(Vec::new()),
            _ => Err(e),
        };
    }
    let mut out = Vec::new();
    for raw in parse_fanotify(&buf[..n as usize]) {
        let (path, file) = if raw.fd >= 0 {
            // SAFETY: the kernel opened this descriptor for this event and handed it to us;
            // nothing else refers to it, so the OwnedFd closes it exactly once.
            let owned = unsafe { OwnedFd::from_raw_fd(raw.fd) };
            let p = fs_err::read_link(format!("/proc/self/fd/{}", owned.as_raw_fd())).ok();
            let f = rustix::fs::fstat(&owned)
                .ok()
                .map(|st| (st.st_dev, st.st_ino));
            (p, f)
        } else {
            (None, None)
        };
        out.push(FanEvent {
            mask: raw.mask,
            pid: raw.pid,
            path,
            file,
        });
    }
    Ok(out)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RawFanEvent {
    mask: u64,
    fd: i32,
    pid: i32,
}

/// `struct fanotify_event_metadata` records (native endian): event_len u32, vers u8, reserved u8,
/// metadata_len u16, mask u64, fd i32, pid i32. Stops at a short or malformed record.
fn parse_fanotify(mut b: &[u8]) -> Vec<RawFanEvent> {
    let mut out = Vec::new();
    let u32_at = |b: &[u8], i: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(b.get(i..i + 4)?.try_into().ok()?))
    };
    while b.len() >= 24 {
        let Some(len) = u32_at(b, 0).map(|l| l as usize) else {
            break;
        };
        if len < 24 || len > b.len() || b[4] != libc::FANOTIFY_METADATA_VERSION {
            break;
        }
        let mask = b
            .get(8..16)
            .and_then(|s| s.try_into().ok())
            .map(u64::from_ne_bytes)
            .unwrap_or(0);
        let fd = u32_at(b, 16).map(|v| v as i32).unwrap_or(-1);
        let pid = u32_at(b, 20).map(|v| v as i32).unwrap_or(0);
        out.push(RawFanEvent { mask, fd, pid });
        b = &b[len..];
    }
    out
}

// ---------------------------------------------------------------------------------------------
// seccomp user notification (`band learn`'s observer of paths and execs)
// ---------------------------------------------------------------------------------------------

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
pub struct SeccompNotif {
    pub id: u64,
    pub pid: u32,
    pub nr: i32,
    pub args: [u64; 6],
}

/// `SECCOMP_IOCTL_NOTIF_RECV`: wait for the next notification on a listener.
pub fn seccomp_notif_recv(listener: BorrowedFd<'_>) -> io::Result<SeccompNotif> {
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
pub fn seccomp_notif_id_valid(listener: BorrowedFd<'_>, id: u64) -> bool {
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
pub fn seccomp_notif_continue(listener: BorrowedFd<'_>, id: u64) -> io::Result<()> {
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

/// libnftables (`libnftables.so.1`), opened at run time: the library the `nft` program is a
/// front end to. One context; the caller holds it behind a lock (a context is not for two
/// threads at once). Output and errors are buffered and returned per command.
pub struct NftLibrary {
    /// Keeps the library mapped while the functions below are used.
    _lib: libloading::Library,
    ctx: std::ptr::NonNull<libc::c_void>,
    run: unsafe extern "C" fn(*mut libc::c_void, *const libc::c_char) -> libc::c_int,
    output: unsafe extern "C" fn(*mut libc::c_void) -> *const libc::c_char,
    error: unsafe extern "C" fn(*mut libc::c_void) -> *const libc::c_char,
    set_flags: unsafe extern "C" fn(*mut libc::c_void, libc::c_uint),
    free: unsafe extern "C" fn(*mut libc::c_void),
}

// SAFETY: the context is only reached through `&mut self` (one thread at a time), and
// libnftables keeps no thread-local state of its own.
unsafe impl Send for NftLibrary {}

/// `NFT_CTX_OUTPUT_JSON` of libnftables.h: listings in JSON, as `nft -j`.
const NFT_CTX_OUTPUT_JSON: libc::c_uint = 1 << 4;

impl NftLibrary {
    /// Open `libnftables.so.1` and make a context with buffered output and errors.
    pub fn open() -> Result<NftLibrary, String> {
        // SAFETY: loading libnftables runs its initialisers, which only set up its own state.
        let lib = unsafe { libloading::Library::new("libnftables.so.1") }
            .map_err(|e| format!("libnftables.so.1: {e}"))?;
        /// The function `name` of `lib`, as the C signature `F` (a copy of the pointer).
        ///
        /// # Safety
        /// `F` must be the signature libnftables.h gives `name`.
        unsafe fn sym<F: Copy>(lib: &libloading::Library, name: &str) -> Result<F, String> {
            // SAFETY: the caller's; the pointer stays valid while `lib` is loaded, which
            // NftLibrary keeps.
            unsafe { lib.get::<F>(name.as_bytes()) }
                .map(|f| *f)
                .map_err(|e| format!("libnftables.so.1: {name}: {e}"))
        }
        type Ctx = *mut libc::c_void;
        // SAFETY: each signature is the one libnftables.h gives the function.
        let (new, buffer_output, buffer_error, run, output, error, set_flags, free) = unsafe {
            (
                sym::<unsafe extern "C" fn(u32) -> Ctx>(&lib, "nft_ctx_new")?,
                sym::<unsafe extern "C" fn(Ctx) -> libc::c_int>(&lib, "nft_ctx_buffer_output")?,
                sym::<unsafe extern "C" fn(Ctx) -> libc::c_int>(&lib, "nft_ctx_buffer_error")?,
                sym::<unsafe extern "C" fn(Ctx, *const libc::c_char) -> libc::c_int>(
                    &lib,
                    "nft_run_cmd_from_buffer",
                )?,
                sym::<unsafe extern "C" fn(Ctx) -> *const libc::c_char>(
                    &lib,
                    "nft_ctx_get_output_buffer",
                )?,
                sym::<unsafe extern "C" fn(Ctx) -> *const libc::c_char>(
                    &lib,
                    "nft_ctx_get_error_buffer",
                )?,
                sym::<unsafe extern "C" fn(Ctx, libc::c_uint)>(&lib, "nft_ctx_output_set_flags")?,
                sym::<unsafe extern "C" fn(Ctx)>(&lib, "nft_ctx_free")?,
            )
        };
        // SAFETY: nft_ctx_new(NFT_CTX_DEFAULT) returns a new context or NULL.
        let ctx = std::ptr::NonNull::new(unsafe { new(0) })
            .ok_or_else(|| "libnftables.so.1: nft_ctx_new failed".to_string())?;
        // SAFETY: ctx is the live context made above.
        let buffered =
            unsafe { buffer_output(ctx.as_ptr()) == 0 && buffer_error(ctx.as_ptr()) == 0 };
        if !buffered {
            // SAFETY: ctx is live and freed once, here.
            unsafe { free(ctx.as_ptr()) };
            return Err("libnftables.so.1: cannot buffer its output".into());
        }
        Ok(NftLibrary {
            _lib: lib,
            ctx,
            run,
            output,
            error,
            set_flags,
            free,
        })
    }

    /// Run `commands` (one or more lines, applied as one transaction, as `nft -f`), listings in
    /// JSON when `json`. What it printed, or its error messages.
    pub fn run(&mut self, commands: &str, json: bool) -> Result<String, String> {
        let text = CString::new(commands).map_err(|_| "the commands contain NUL".to_string())?;
        let flags = if json { NFT_CTX_OUTPUT_JSON } else { 0 };
        let ctx = self.ctx.as_ptr();
        // SAFETY: ctx is live; text outlives the call; the buffers returned are owned by the
        // context, NUL-terminated, and copied out before the next call on it.
        unsafe {
            (self.set_flags)(ctx, flags);
            let rc = (self.run)(ctx, text.as_ptr());
            let copy = |p: *const libc::c_char| {
                if p.is_null() {
                    String::new()
                } else {
                    CStr::from_ptr(p).to_string_lossy().into_owned()
                }
            };
            let out = copy((self.output)(ctx));
            let err = copy((self.error)(ctx));
            if rc == 0 {
                Ok(out)
            } else {
                Err(err.trim().to_string())
            }
        }
    }
}

impl std::fmt::Debug for NftLibrary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("libnftables.so.1")
    }
}

impl Drop for NftLibrary {
    fn drop(&mut self) {
        // SAFETY: the context is live and freed once, here, before the library is unmapped.
        unsafe { (self.free)(self.ctx.as_ptr()) }
    }
}

#[cfg(test)]
mod sched_tests {
    use super::*;

    #[test]
    fn a_thread_made_batch_is_batch_and_others_are_not() {
        let (before, after) = std::thread::spawn(|| {
            let before = scheduling_policy().unwrap();
            set_batch_scheduling().unwrap();
            (before, scheduling_policy().unwrap())
        })
        .join()
        .unwrap();
        assert_eq!((before, after), (libc::SCHED_OTHER, libc::SCHED_BATCH));
        assert_eq!(scheduling_policy().unwrap(), libc::SCHED_OTHER);
    }
}

#[cfg(test)]
mod fanotify_tests {
    use super::*;

    fn record(mask: u64, fd: i32, pid: i32, len: u32) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend(len.to_ne_bytes());
        v.push(libc::FANOTIFY_METADATA_VERSION);
        v.push(0);
        v.extend(24u16.to_ne_bytes());
        v.extend(mask.to_ne_bytes());
        v.extend(fd.to_ne_bytes());
        v.extend(pid.to_ne_bytes());
        v.resize(len as usize, 0);
        v
    }

    #[test]
    fn parses_records_and_stops_at_a_malformed_one() {
        let mut b = record(libc::FAN_OPEN, 7, 42, 24);
        b.extend(record(libc::FAN_MODIFY, -1, 43, 32));
        b.extend(record(libc::FAN_ACCESS, 9, 44, 8));
        assert_eq!(
            parse_fanotify(&b),
            vec![
                RawFanEvent {
                    mask: libc::FAN_OPEN,
                    fd: 7,
                    pid: 42
                },
                RawFanEvent {
                    mask: libc::FAN_MODIFY,
                    fd: -1,
                    pid: 43
                },
            ]
        );
        assert!(parse_fanotify(&b[..20]).is_empty());
    }
}
