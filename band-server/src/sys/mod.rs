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
//!
//! One file per concern; everything is re-exported here, so callers name `sys::X`:
//!
//! - `mount`: tmpfs, bind, overlay, devpts and remount calls, device nodes and whiteouts.
//! - `spawn`: what a child does between `fork` and `exec` of bubblewrap ([`PreExec`]) and of the
//!   network relay ([`RelayExec`]), and bubblewrap's spawn as pid 1 of a pid namespace of its
//!   own ([`spawn_in_own_pid_namespace`]).
//! - `netns`: the user and network namespaces of a networked run, and joining them.
//! - `process`: signals, reaping, a single-threaded `fork`, ids and scheduling.
//! - `fd`: pipes, `flock`, `poll`, and the descriptors band-jail inherits, keeps or closes.
//! - `socket`: a unix socket's peer credentials and the descriptors passed over it.
//! - `exec`: a process that holds secrets or is about to exec (band-server, band-jail): no core
//!   dumps, `no_new_privs`, randomized addresses, `execve`.
//! - `fanotify`: the filesystem events of a run's directory (`band learn`).
//! - `seccomp_notify`: seccomp user notification (`band learn`'s observer of paths and execs).
//! - `nft`: libnftables, opened at run time ([`NftLibrary`]).
#![allow(unsafe_code)]

mod exec;
mod fanotify;
mod fd;
mod mount;
mod netns;
mod nft;
mod process;
mod seccomp_notify;
mod socket;
mod spawn;

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

pub use exec::{clear_addr_no_randomize, disable_core_dumps, execve, set_no_new_privs};
pub(crate) use fanotify::{FanEvent, fanotify_filesystem, fanotify_read};
pub use fd::{close_fds_except, take_inherited_fd, write_fd};
pub(crate) use fd::{pipe, poll_readable, poll_readable_unless, try_lock_exclusive};
pub(crate) use mount::{
    BindFlags, bind_mount, bind_read_only_in, make_private, mknod_char, mknod_whiteout,
    mount_dev_tmpfs, mount_devpts, mount_overlay_ro, mount_tmpfs, own_mount_namespace,
    remount_read_only, umount_detach,
};
pub(crate) use netns::{setns_net, user_and_net_namespaces};
pub(crate) use nft::NftLibrary;
pub use process::euid;
pub(crate) use process::{
    Reaped, catch_leave_signal, catch_stop_signals, clear_leave_asked, default_stop_signals,
    fork_single_threaded, kill, leave_asked, pid, reap, reap_any, set_batch_scheduling,
    set_child_subreaper, stop_asked, wait_any,
};
pub use seccomp_notify::seccomp_listener;
pub(crate) use seccomp_notify::{
    SeccompNotif, seccomp_notif_continue, seccomp_notif_id_valid, seccomp_notif_recv,
};
pub use socket::send_with_fd;
pub(crate) use socket::{peer_cred, recv_with_creds, set_passcred};
pub use spawn::{GATE_OPEN, PreExec, spawn_in_own_pid_namespace};
pub(crate) use spawn::{GATE_SHUT, RelayExec};

// The calls band-shim makes too, defined once in its crate (band-shim links nothing else of ours).
pub use band_shim::sys::execveat_fd;
pub(crate) use band_shim::sys::recv_with_fd;
pub use band_shim::sys::{reset_signals_for_exec, set_not_dumpable};

/// `rc`, or the error `errno` names when `rc` is negative (the C convention of most syscalls).
fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// `p` as a C string, for a syscall's path argument.
pub(crate) fn cstring(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))
}
