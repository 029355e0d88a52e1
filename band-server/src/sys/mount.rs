//! Mounts: the run directory's tmpfs, bind mounts with locked flags, the sandbox's `/dev`
//! (tmpfs, device nodes, devpts), read-only overlays and their whiteouts, and unmounting.

use std::ffi::{CStr, CString};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::{check, cstring};

/// Mount a tmpfs at `target` with the given data string (`size=…,mode=…`), `nosuid,nodev`.
pub(crate) fn mount_tmpfs(target: &Path, data: &str) -> io::Result<()> {
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
pub(crate) struct BindFlags {
    pub(crate) read_only: bool,
    pub(crate) no_exec: bool,
}

/// `mount --bind src target` (not recursive: submounts of `src` stay hidden) then remount it `nosuid,nodev` plus `flags`. A bind mount made here
/// (in the initial user namespace) keeps these flags locked inside the sandbox's user namespace,
/// so bubblewrap's copy of it cannot lift `ro` or `noexec`.
pub(crate) fn bind_mount(src: &Path, target: &Path, flags: BindFlags) -> io::Result<()> {
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
pub(crate) fn mount_dev_tmpfs(target: &Path) -> io::Result<()> {
    tmpfs(
        c"band-dev",
        target,
        libc::MS_NOSUID | libc::MS_NOEXEC,
        c"mode=0755,size=64k,nr_inodes=64",
    )
}

/// A character device node `major:minor` at `path`, mode 0666 (set after `mknod`: the process's
/// umask would take bits off), owned by root.
pub(crate) fn mknod_char(path: &Path, major: u32, minor: u32) -> io::Result<()> {
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
pub(crate) fn remount_read_only(target: &Path) -> io::Result<()> {
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
    bind_then_remount_c(&cstring(src)?, &cstring(target)?, flags)
}

/// [`bind_then_remount`] of paths already NUL-terminated ([`bind_read_only_in`] builds them
/// before it enters the namespace).
fn bind_then_remount_c(src: &CStr, target: &CStr, flags: libc::c_ulong) -> io::Result<()> {
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
    mount_flags(target, libc::MS_BIND | libc::MS_REMOUNT | flags)
}

/// The most pseudo-terminals a run's devpts holds. The kernel counts every instance's against
/// one host-wide bound (`kernel.pty.max` less the initial instance's reserve, 3,072 by
/// default), so a run without one could take them all (red team, round 6); 64 runs at once
/// of 32 each stay below it. A script needs one or two (`script`, `expect`, a pty library).
pub(crate) const RUN_PTYS: u32 = 32;

/// Mount a new devpts instance at `target` (`nosuid,noexec`), as bubblewrap's `--dev` does:
/// the run's own pseudo-terminals, none of the host's or another run's, at most
/// [`RUN_PTYS`]. `/dev/ptmx` is a link to its `ptmx`, mode 0666; a terminal's slave is owned by
/// whoever opened it, mode 0620.
pub(crate) fn mount_devpts(target: &Path) -> io::Result<()> {
    let target = cstring(target)?;
    let data = c"newinstance,ptmxmode=0666,mode=620,max=32";
    const _: () = assert!(RUN_PTYS == 32, "the mount's max= says RUN_PTYS");
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
pub(crate) fn mount_overlay_ro(target: &Path, lowers: &[&Path]) -> io::Result<()> {
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
pub(crate) fn mknod_whiteout(path: &Path) -> io::Result<()> {
    let p = cstring(path)?;
    // SAFETY: valid NUL-terminated string outliving the call; integer mode and device.
    check(unsafe { libc::mknod(p.as_ptr(), libc::S_IFCHR, libc::makedev(0, 0)) }).map(|_| ())
}

/// `mount --make-private target`: mounts made below it no longer propagate to other mount
/// namespaces (the per-run mounts stay band-server's business).
pub(crate) fn make_private(target: &Path) -> io::Result<()> {
    mount_flags(&cstring(target)?, libc::MS_PRIVATE)
}

/// Move the calling thread into a mount namespace of its own, a slave of the one it was in: the
/// host's mounts (and later changes to them) still show in it, the mounts made in it never show
/// outside it, and they go with it when its last process ends.
///
/// Only the calling thread moves (and the threads and processes it starts afterwards): threads
/// that already run stay where they are.
pub(crate) fn own_mount_namespace() -> io::Result<()> {
    // SAFETY: a plain syscall with an integer flag. In a process with other threads the kernel
    // gives this thread its own filesystem context first (CLONE_NEWNS implies CLONE_FS).
    check(unsafe { libc::unshare(libc::CLONE_NEWNS) })?;
    mount_flags(c"/", libc::MS_REC | libc::MS_SLAVE)
}

/// What [`bind_read_only_in`] could not do: the bind (its index) or entering the namespace
/// (`None`), and why.
#[derive(Debug)]
pub(crate) struct BindInError {
    pub(crate) index: Option<usize>,
    pub(crate) source: io::Error,
}

/// In a thread that enters the mount namespace `ns` (`setns`; its root and working folder become
/// that namespace's root), bind each `(source, target)` of `binds`, both paths as that namespace
/// sees them, and remount it read-only, `nosuid`, `nodev`, `noexec`. The first failure stops it.
///
/// A thread of its own because `setns` into a mount namespace needs a filesystem context (root,
/// working folder) that no other thread shares: the thread `unshare`s its own first and takes it
/// with it when it ends, so the caller and every other thread stay where they were; unlike a
/// forked child, it costs no copy of the caller's address space and no teardown of one.
pub(crate) fn bind_read_only_in(
    ns: std::os::fd::BorrowedFd<'_>,
    binds: &[(CString, CString)],
) -> Result<(), BindInError> {
    use std::os::fd::AsRawFd;
    let whole = |source: io::Error| BindInError {
        index: None,
        source,
    };
    let enter_and_bind = || {
        // SAFETY: a plain syscall with an integer flag: this thread gets a copy of the
        // filesystem context (root, working folder, umask) that only it uses.
        check(unsafe { libc::unshare(libc::CLONE_FS) }).map_err(whole)?;
        // SAFETY: setns on a descriptor the caller keeps open for the whole call; it moves only
        // this thread, whose filesystem context is its own.
        check(unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNS) }).map_err(whole)?;
        let flags = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        for (i, (src, dst)) in binds.iter().enumerate() {
            bind_then_remount_c(src, dst, flags).map_err(|source| BindInError {
                index: Some(i),
                source,
            })?;
        }
        Ok(())
    };
    std::thread::scope(|scope| {
        let thread = std::thread::Builder::new()
            .name("proc-cover".into())
            .spawn_scoped(scope, enter_and_bind)
            .map_err(whole)?;
        thread
            .join()
            .unwrap_or_else(|_| Err(whole(io::Error::other("the binding thread panicked"))))
    })
}

/// `umount2(target, MNT_DETACH)`: lazily detach the mount and everything below it.
pub(crate) fn umount_detach(target: &Path) -> io::Result<()> {
    let target = cstring(target)?;
    // SAFETY: valid NUL-terminated string outliving the call.
    let rc = unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    check(rc).map(|_| ())
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;
    use std::os::unix::ffi::OsStrExt;

    use super::*;

    /// A process in a mount namespace of its own, killed and reaped when dropped.
    struct Holder(std::process::Child);

    impl Drop for Holder {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    fn c(p: &Path) -> CString {
        CString::new(p.as_os_str().as_bytes()).unwrap()
    }

    #[test]
    fn privileged_binds_go_into_the_namespace_named_and_a_failure_names_its_bind() {
        band_test::privileged!((!rustix::process::geteuid().is_root()).then(|| "not root".into()));
        let t = tempfile::tempdir().unwrap();
        let (cover, covered) = (t.path().join("cover"), t.path().join("covered"));
        fs_err::write(&cover, "").unwrap();
        fs_err::write(&covered, "a host fact").unwrap();
        let h = Holder(
            std::process::Command::new("unshare")
                .args(["--mount", "--propagation", "private", "sleep", "1000"])
                .spawn()
                .unwrap(),
        );
        let pid = h.0.id();
        let ns_of = |p: &str| fs_err::read_link(format!("/proc/{p}/ns/mnt")).unwrap();
        band_test::wait_until("unshare's namespace", || {
            ns_of(&pid.to_string()) != ns_of("self")
        });
        let ns = fs_err::File::open(format!("/proc/{pid}/ns/mnt")).unwrap();
        let mine = ns_of("thread-self");
        bind_read_only_in(ns.as_fd(), &[(c(&cover), c(&covered))]).unwrap();
        // The calling thread (and so the rest of band-server) stays in its own namespace.
        assert_eq!(ns_of("thread-self"), mine);
        let theirs = fs_err::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap();
        let line = theirs
            .lines()
            .find(|l| l.split(' ').nth(4) == Some(covered.to_str().unwrap()))
            .unwrap_or_else(|| panic!("no bind at {}:\n{theirs}", covered.display()));
        let opts: Vec<&str> = line.split(' ').nth(5).unwrap().split(',').collect();
        for o in ["ro", "nosuid", "nodev", "noexec"] {
            assert!(opts.contains(&o), "{o} missing: {line}");
        }
        let ours = fs_err::read_to_string("/proc/self/mountinfo").unwrap();
        assert!(!ours.contains(covered.to_str().unwrap()), "{ours}");
        assert_eq!(fs_err::read_to_string(&covered).unwrap(), "a host fact");

        // The second bind fails (no such target): its index and errno, not the first's.
        let missing = t.path().join("missing");
        let e = bind_read_only_in(
            ns.as_fd(),
            &[(c(&cover), c(&covered)), (c(&cover), c(&missing))],
        )
        .unwrap_err();
        assert_eq!(e.index, Some(1), "{e:?}");
        assert_eq!(e.source.raw_os_error(), Some(libc::ENOENT), "{e:?}");

        // Not a mount namespace: entering it fails, before any bind.
        let file = fs_err::File::open(&cover).unwrap();
        let e = bind_read_only_in(file.as_fd(), &[(c(&cover), c(&covered))]).unwrap_err();
        assert_eq!(e.index, None, "{e:?}");
        assert_eq!(e.source.raw_os_error(), Some(libc::EINVAL), "{e:?}");
    }
}
