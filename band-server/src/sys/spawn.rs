//! What a child of band-server does between `fork` and `exec`: of bubblewrap ([`PreExec`]) and
//! of the network relay ([`RelayExec`]); and bubblewrap's spawn as the first process of a pid
//! namespace of its own ([`spawn_in_own_pid_namespace`]). The hooks run in the child of a fork
//! of a multi-threaded process, so they call only async-signal-safe functions and never allocate.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

use super::check;

/// The lowest number [`dup_out_of_the_way`] copies a descriptor to: above every fixed target of
/// [`move_fds`] (3, 4, … for bubblewrap and the relay), so no `dup2` there lands on a copy.
const OUT_OF_THE_WAY: RawFd = 64;

/// A close-on-exec copy of `fd` at the lowest free number from [`OUT_OF_THE_WAY`] up
/// (`F_DUPFD_CLOEXEC`). Async-signal-safe: one `fcntl`, and an error built from `errno` alone.
fn dup_out_of_the_way(fd: RawFd) -> io::Result<RawFd> {
    // SAFETY: fcntl on an fd number takes no pointers; failure is reported through errno.
    check(unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, OUT_OF_THE_WAY) })
}

/// In a child between `fork` and `exec`: put each `(source, target)` descriptor of `fds` at its
/// target number, close-on-exec cleared there, so the program exec'd finds it (e.g. the secrets
/// pipe at fd 3). At most 8 pairs (`EINVAL` beyond).
///
/// Every source is first copied out of the way ([`dup_out_of_the_way`]), then each copy is
/// `dup2`'d to its target: a source that happens to equal another pair's target is not clobbered
/// by that pair's `dup2`. The sources and the copies stay open, close-on-exec: `exec` closes
/// them.
///
/// Async-signal-safe, as the child of a multi-threaded fork must be: it calls only `fcntl` and
/// `dup2` (both on POSIX's list of async-signal-safe functions), keeps the copies in a fixed
/// array on its stack, never allocates or takes a lock, and builds an error only from `errno`
/// (`io::Error::last_os_error` and `from_raw_os_error` hold the number; nothing is allocated).
fn move_fds(fds: &[(RawFd, RawFd)]) -> io::Result<()> {
    let mut moved = [0 as RawFd; 8];
    if fds.len() > moved.len() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    for (slot, (src, _)) in moved.iter_mut().zip(fds) {
        *slot = dup_out_of_the_way(*src)?;
    }
    for (copy, (_, dst)) in moved.iter().zip(fds) {
        // SAFETY: dup2 on fd numbers; the new descriptor has close-on-exec cleared.
        check(unsafe { libc::dup2(*copy, *dst) })?;
    }
    Ok(())
}

/// In a `pre_exec` child: drop every supplementary group, then to `gid` and `uid`. Raw syscalls
/// only: no allocation, no lock.
fn drop_groups_and_ids(uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: setgroups with a zero-length list and a null pointer is valid.
    check(unsafe { libc::setgroups(0, std::ptr::null()) })?;
    // SAFETY: plain syscalls on integers.
    check(unsafe { libc::setgid(gid) })?;
    // SAFETY: plain syscall on an integer.
    check(unsafe { libc::setuid(uid) })?;
    Ok(())
}

/// In a `pre_exec` child: [`drop_groups_and_ids`], then die (SIGKILL) with the parent (the
/// parent's liveness is the caller's to check: `getppid`, outside a new pid namespace).
fn drop_to_and_die_with_parent(uid: u32, gid: u32) -> io::Result<()> {
    drop_groups_and_ids(uid, gid)?;
    die_with_parent(None)
}

/// What the child does between `fork` and `exec` of bubblewrap. The child is born the first
/// process (pid 1, the *sandbox init*) of a pid namespace of the run's own, owned by the initial
/// user namespace ([`spawn_in_own_pid_namespace`]); then, in this order:
///
/// 1. move `fds` to their fixed numbers (e.g. the secrets pipe to fd 3), clearing close-on-exec;
/// 2. `PR_SET_PDEATHSIG(SIGKILL)`, and exit if band-server is already gone (its pidfd, opened by
///    [`PreExec::install`], is readable): `getppid` cannot tell, it is 0 across a pid namespace;
/// 3. with `netns`, join the run's network namespace (`setns`, still root), so bubblewrap starts
///    inside it;
/// 4. join the run's cgroup(s) by writing `"0"` to each pre-opened join file (v1 `tasks`, v2
///    `cgroup.procs`: [`crate::layers::cgroup::RunCgroup::join_files`]);
/// 5. write `2` to the pre-opened `vm.memfd_noexec` (if given): the kernel applies the value to
///    the writer's pid namespace, the run's, and every pid namespace created below it
///    (bubblewrap's) inherits at least that, so no memfd of the run can ever be executed;
/// 6. with a `gate`, read one byte from it and close it: [`GATE_OPEN`] when what the run builds
///    beside the spawn is ready (`run::apply`); anything else ([`GATE_SHUT`], or the end of the
///    pipe) and it exits, and bubblewrap never starts. (The end of the pipe alone cannot say
///    so: this process holds a copy of the write end from its fork when the thread that writes
///    it had it open then; see `layer::GateWriter`.)
/// 7. in a mount namespace of its own, mount a /proc of the run's pid namespace (bubblewrap reads
///    `/proc/<its child>/ns` there, numbered in that namespace);
/// 8. `setgroups([])`, `setgid(gid)`, `setuid(uid)`: from here on the process is the run's user;
/// 9. `PR_SET_PDEATHSIG(SIGKILL)` again (the uid change cleared it), and the same check as in 2.
///
/// band-server is the sandbox init's parent and reaps it: when it dies, the kernel kills and
/// reaps every process of its pid namespace (bubblewrap's own pid namespace included), so
/// nothing of the run is left for the host's init. If band-server dies first, the init is
/// killed (`PR_SET_PDEATHSIG`), and with it the namespace.
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
    /// with `setns` at step 3, while still root, so bubblewrap starts inside it.
    /// `None`: bubblewrap makes one with only loopback (`--unshare-net`).
    pub netns: Option<RawFd>,
    /// The read end of the gate of step 6 (`layer::Gate`); owned by the caller until after spawn.
    pub gate: Option<RawFd>,
}

/// The byte of a gate (step 6 of [`PreExec`]) that lets bubblewrap start.
pub const GATE_OPEN: u8 = b'1';
/// The byte of a gate that stops the spawn: what the run builds beside it failed.
pub(crate) const GATE_SHUT: u8 = b'0';

/// Whether the process behind `pidfd` has ended (the pidfd is readable). Async-signal-safe: one
/// `poll` with a zero timeout on a stack variable.
fn gone(pidfd: RawFd) -> bool {
    let mut p = libc::pollfd {
        fd: pidfd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `p` is one valid pollfd on the stack for the duration of the call.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n == 1 && p.revents & libc::POLLIN != 0
}

/// `PR_SET_PDEATHSIG(SIGKILL)`, then [`gone`] on band-server's pidfd, if there is one: it may
/// have died before the call, and then no signal comes. Without pidfds (Linux before 5.3) that
/// window stays open; what the child started is then the janitor's, as every run of a
/// band-server that died.
fn die_with_parent(parent: Option<RawFd>) -> io::Result<()> {
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
    if parent.is_some_and(gone) {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(())
}

impl PreExec {
    /// Install the steps above as `cmd`'s pre-exec hook. `self` moves into the closure, so the
    /// cgroup files stay open until the child has written to them. Spawn `cmd` with
    /// [`spawn_in_own_pid_namespace`].
    pub fn install(self, cmd: &mut Command) {
        use rustix::process::{PidfdFlags, getpid, pidfd_open};
        // band-server's own pidfd, for steps 2 and 9 (close-on-exec: bubblewrap never has it).
        let me = pidfd_open(getpid(), PidfdFlags::empty()).ok();
        let hook = move || -> io::Result<()> {
            // The descriptors written after the fork (cgroup join files, then the sysctl) are
            // copied out of the way first (to fds >= 64): `move_fds`'s dup2 may land on them.
            let mut later = [-1 as RawFd; 16];
            let sysctl = self.memfd_noexec.iter();
            let written = self.cgroup_join.iter().chain(sysctl);
            for (i, f) in written.enumerate() {
                let slot = later
                    .get_mut(i)
                    .ok_or(io::Error::from_raw_os_error(libc::EINVAL))?;
                // `f` owns the number until the closure (and so this child) is gone.
                *slot = dup_out_of_the_way(f.as_raw_fd())?;
            }
            // Both numbers are owned by the caller until after spawn; `me` by the closure.
            let netns = self.netns.map(dup_out_of_the_way).transpose()?;
            let gate = self.gate.map(dup_out_of_the_way).transpose()?;
            let parent = me
                .as_ref()
                .map(|fd| dup_out_of_the_way(fd.as_raw_fd()))
                .transpose()?;
            let joins = &later[..self.cgroup_join.len()];
            let sysctl = self
                .memfd_noexec
                .as_ref()
                .map(|_| later[self.cgroup_join.len()]);
            move_fds(&self.fds)?;
            die_with_parent(parent)?;
            if let Some(fd) = netns {
                // SAFETY: setns on an fd number copied above (a network namespace file).
                check(unsafe { libc::setns(fd, libc::CLONE_NEWNET) })?;
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
            // A /proc of the run's own pid namespace, in a mount namespace of this process's
            // own (nothing propagates back), made once the gate is open (the mounts band-server
            // makes beside the spawn are in place by then) and before the uid is dropped, for
            // bubblewrap: after its clone it opens
            // `/proc/<its child's pid>/ns` in the /proc it was given, with the pid as its own
            // namespace numbers it. With the host's /proc that is the host's pid 2 (kthreadd, so
            // the wrong namespaces were read); in a container's pid namespace there is no pid 2
            // and every run failed to start.
            // SAFETY: plain syscalls with static NUL-terminated strings and null pointers; this
            // single-threaded child allocates nothing.
            check(unsafe { libc::unshare(libc::CLONE_NEWNS) })?;
            // SAFETY: as above.
            check(unsafe {
                libc::mount(
                    std::ptr::null(),
                    c"/".as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_SLAVE,
                    std::ptr::null(),
                )
            })?;
            // SAFETY: as above.
            check(unsafe {
                libc::mount(
                    c"proc".as_ptr(),
                    c"/proc".as_ptr(),
                    c"proc".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    std::ptr::null(),
                )
            })?;
            drop_groups_and_ids(self.uid, self.gid)?;
            die_with_parent(parent)
        };
        // SAFETY: the hook only calls async-signal-safe functions and does not allocate (the
        // `later` buffer and `move_fds`'s are on the stack; `cgroup_join`, `memfd_noexec`, `me`
        // and `fds` were built before the fork).
        unsafe { cmd.pre_exec(hook) };
    }
}

/// The active pid namespace of band-server (`/proc/thread-self/ns/pid`), opened once: where
/// [`spawn_in_own_pid_namespace`] puts the calling thread's next children back.
static OWN_PID_NS: std::sync::OnceLock<File> = std::sync::OnceLock::new();

/// Spawn `cmd` (bubblewrap, with [`PreExec`]'s hook) as the first process of a new pid
/// namespace: `unshare(CLONE_NEWPID)` on the calling thread, which makes the thread's next
/// child that namespace's pid 1, the fork and exec of `cmd`, and `setns` back to band-server's
/// own pid namespace, so the thread's later children (and threads: the kernel refuses a thread
/// while the two differ) are as before. No process sits between band-server and the sandbox.
///
/// The thread must outlive the child: it is the parent that `PR_SET_PDEATHSIG` watches.
pub fn spawn_in_own_pid_namespace(cmd: &mut Command) -> io::Result<std::process::Child> {
    const OWN: &str = "/proc/thread-self/ns/pid";
    let own = match OWN_PID_NS.get() {
        Some(f) => f,
        None => {
            let f = fs_err::File::open(OWN)?.into_parts().0;
            OWN_PID_NS.get_or_init(|| f)
        }
    };
    // SAFETY: a plain syscall with an integer flag; it changes only where this thread's next
    // children go.
    check(unsafe { libc::unshare(libc::CLONE_NEWPID) })
        .map_err(|e| io::Error::new(e.kind(), format!("unshare(CLONE_NEWPID): {e}")))?;
    let spawned = cmd.spawn();
    // SAFETY: setns on a pid namespace file held open by `OWN_PID_NS`: the thread's active one,
    // which it may always enter again.
    let back = check(unsafe { libc::setns(own.as_raw_fd(), libc::CLONE_NEWPID) });
    match (spawned, back) {
        (Ok(child), Ok(_)) => Ok(child),
        (Err(e), Ok(_)) => Err(e),
        // Said either way: this thread's next children would go into the new namespace.
        (spawned, Err(e)) => {
            if let Ok(mut child) = spawned {
                let _ = child.kill();
                let _ = child.wait();
            }
            Err(io::Error::new(
                e.kind(),
                format!("setns back to {OWN} after the spawn: {e}"),
            ))
        }
    }
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
pub(crate) struct RelayExec {
    pub(crate) fds: Vec<(RawFd, RawFd)>,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
}

impl RelayExec {
    pub(crate) fn install(self, cmd: &mut Command) {
        // SAFETY: getpid is a plain syscall that cannot fail.
        let parent = unsafe { libc::getpid() };
        let hook = move || -> io::Result<()> {
            move_fds(&self.fds)?;
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

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    /// The liveness check of steps 2 and 9: a pidfd is readable once its process has ended.
    #[test]
    fn gone_tells_a_living_process_from_an_ended_one() {
        use rustix::process::{Pid, PidfdFlags, pidfd_open};
        let mut child = Command::new("/bin/sh")
            .args(["-c", "read x"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let fd = pidfd_open(Pid::from_child(&child), PidfdFlags::empty()).unwrap();
        assert!(!gone(fd.as_raw_fd()));
        drop(child.stdin.take());
        child.wait().unwrap();
        assert!(gone(fd.as_raw_fd()));
    }

    /// Two write ends swap numbers: each source is the other pair's target, which a plain `dup2`
    /// of the first pair would clobber before the second pair reads it.
    #[test]
    fn move_fds_swaps_descriptors_that_are_each_others_targets() {
        let (mut read_a, write_a) = std::io::pipe().unwrap();
        let (mut read_b, write_b) = std::io::pipe().unwrap();
        let (a, b) = (write_a.as_raw_fd(), write_b.as_raw_fd());
        let pairs = [(a, b), (b, a)];
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c").arg(format!(
            "printf A >/proc/self/fd/{b}; printf B >/proc/self/fd/{a}"
        ));
        // SAFETY: the hook only runs `move_fds` (async-signal-safe) on an array built before the
        // fork.
        unsafe { cmd.pre_exec(move || move_fds(&pairs)) };
        let status = cmd.status().unwrap();
        drop((write_a, write_b));
        let (mut got_a, mut got_b) = (String::new(), String::new());
        read_a.read_to_string(&mut got_a).unwrap();
        read_b.read_to_string(&mut got_b).unwrap();
        assert!(status.success(), "{status}");
        assert_eq!((got_a.as_str(), got_b.as_str()), ("A", "B"));
    }
}
