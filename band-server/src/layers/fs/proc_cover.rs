//! The host's entries of a run's `/proc` ([`super::procmask`]), covered from outside the sandbox.
//!
//! bubblewrap mounts the run's `/proc` in the sandbox's namespaces (`--proc`). It could cover
//! each host entry there too (`--ro-bind`), but bubblewrap reads its whole mount table again for
//! every bind (containers/bubblewrap#384): some 30 covers, each a read of 60 to 90 lines, cost a
//! run about 5 ms of CPU, as much as the rest of bubblewrap's start. band-server covers them
//! instead, once bubblewrap has built the sandbox and before the jail has its input:
//!
//! 1. band-jail's first act is to write [`READY`] on its status pipe; then it waits for its input
//!    (so nothing of the skill has started);
//! 2. band-server reads that line ([`await_ready`]), finds the jail ([`sandbox_pid`]: its own child
//!    is bubblewrap, whose child is the pid 1 of bubblewrap's own pid namespace, whose child is
//!    the jail),
//!    and a thread of band-server's enters the jail's mount namespace and binds the jail's
//!    `/band/empty` or `/band/empty.d` over each entry, read-only, `nosuid`, `nodev`, `noexec`
//!    (`sys::bind_read_only_in`);
//! 3. any failure fails the run before its input is written: the filesystem layer, naming the
//!    entry.
//!
//! The sandbox's processes hold no capability in any namespace (bubblewrap drops them all and
//! `no_new_privs` keeps it so), so none can unmount or remount a cover.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use band::proto::Layer;

use crate::common::handover::ProcMask;
use crate::common::paths::{PROC_COVER_DIR, PROC_COVER_FILE};
use crate::error::{SetupError, SetupResult};
use crate::sys;

/// What band-jail writes on its status pipe once it runs, before it reads its input.
pub const READY: &[u8] = b"up\n";

/// Where the covers are inside the sandbox: the run's exec folder, the sandbox's `/band`.
const COVERS_IN: &str = "/band";

/// How long band-server waits for the jail's [`READY`] (bubblewrap builds the sandbox meanwhile).
const READY_WAIT_MS: i32 = 60_000;

/// Each cover of `masks` as `(source, target)`, both as the sandbox sees them. Pure.
pub(crate) fn binds(masks: &[ProcMask]) -> SetupResult<Vec<(CString, CString)>> {
    masks
        .iter()
        .map(|m| {
            let cover = if m.dir {
                PROC_COVER_DIR
            } else {
                PROC_COVER_FILE
            };
            let source = Path::new(COVERS_IN).join(cover);
            let target = m.sandbox_path();
            Ok((cstring(&source)?, cstring(&target)?))
        })
        .collect()
}

fn cstring(p: &Path) -> SetupResult<CString> {
    sys::cstring(p).map_err(|e| SetupError::new(Layer::Filesystem, format!("{}: {e}", p.display())))
}

/// Wait for the jail's [`READY`] on its status pipe `status`. `Ok(false)`: the pipe ended first
/// (bubblewrap or the jail failed; the run reports it from bubblewrap's stderr and exit).
pub(crate) fn await_ready(status: &OwnedFd) -> SetupResult<bool> {
    let ready = sys::poll_readable(status.as_fd(), READY_WAIT_MS)
        .map_err(|e| SetupError::new(Layer::Filesystem, format!("waiting for the sandbox: {e}")))?;
    if !ready {
        return Err(SetupError::new(
            Layer::Filesystem,
            format!(
                "the sandbox was not built within {} s",
                READY_WAIT_MS / 1000
            ),
        ));
    }
    let mut got = [0u8; 3];
    let mut n = 0;
    while n < got.len() {
        match rustix::io::read(status, &mut got[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => {
                return Err(SetupError::new(
                    Layer::Filesystem,
                    format!("reading the jail's status: {e}"),
                ));
            }
        }
    }
    match &got[..n] {
        [] => Ok(false),
        line if line == READY => Ok(true),
        other => Err(SetupError::new(
            Layer::Process,
            format!(
                "band-jail said {:?} before its input",
                String::from_utf8_lossy(other)
            ),
        )),
    }
}

/// The jail of a run whose bubblewrap is `bwrap` (band-server's child), by the children
/// `proc_root` (`/proc`) lists: bubblewrap's only child (the pid 1 of its pid namespace), its
/// only child (the jail).
pub(crate) fn sandbox_pid(proc_root: &Path, bwrap: u32) -> io::Result<u32> {
    let mut pid = bwrap;
    for _ in 0..2 {
        pid = only_child(proc_root, pid)?;
    }
    Ok(pid)
}

fn children_file(proc_root: &Path, pid: u32) -> PathBuf {
    proc_root
        .join(pid.to_string())
        .join("task")
        .join(pid.to_string())
        .join("children")
}

fn only_child(proc_root: &Path, pid: u32) -> io::Result<u32> {
    let path = children_file(proc_root, pid);
    let text = fs_err::read_to_string(&path)?;
    let mut kids = text.split_whitespace().map(str::parse::<u32>);
    match (kids.next(), kids.next()) {
        (Some(Ok(kid)), None) => Ok(kid),
        _ => Err(io::Error::other(format!(
            "{}: expected one child, found {:?}",
            path.display(),
            text.trim()
        ))),
    }
}

/// Cover `masks` in the run's `/proc` (the module's steps 2 and 3), the jail being the second
/// generation below `bwrap`.
pub(crate) fn cover(proc_root: &Path, bwrap: u32, masks: &[ProcMask]) -> SetupResult<()> {
    let binds = binds(masks)?;
    let jail = sandbox_pid(proc_root, bwrap).map_err(|e| {
        SetupError::new(
            Layer::Filesystem,
            format!("cannot find the run's jail: {e}"),
        )
    })?;
    let ns_path = proc_root.join(jail.to_string()).join("ns").join("mnt");
    let ns = fs_err::File::open(&ns_path).map_err(|e| {
        SetupError::new(
            Layer::Filesystem,
            format!("cannot cover the run's /proc: {e}"),
        )
    })?;
    sys::bind_read_only_in(ns.as_fd(), &binds).map_err(|e| {
        let what = match e.index.and_then(|i| masks.get(i)) {
            Some(m) => format!(
                "cannot cover {} in the run's /proc",
                m.sandbox_path().display()
            ),
            None => format!(
                "cannot enter the run's mount namespace ({})",
                ns_path.display()
            ),
        };
        SetupError::new(Layer::Filesystem, format!("{what}: {}", e.source))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(links: &[(u32, &str)]) -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        for (pid, kids) in links {
            let f = children_file(t.path(), *pid);
            fs_err::create_dir_all(f.parent().unwrap()).unwrap();
            fs_err::write(f, kids).unwrap();
        }
        t
    }

    #[test]
    fn the_jail_is_two_generations_below_bubblewrap() {
        let t = tree(&[(11, "12 "), (12, "13 "), (13, "")]);
        assert_eq!(sandbox_pid(t.path(), 11).unwrap(), 13);
    }

    #[test]
    fn two_children_or_none_at_a_generation_is_an_error_naming_the_file() {
        let t = tree(&[(11, "12 14 "), (12, "13 ")]);
        let e = sandbox_pid(t.path(), 11).unwrap_err().to_string();
        assert!(
            e.contains("11/task/11/children") && e.contains("12 14"),
            "{e}"
        );
        let t = tree(&[(11, "12 "), (12, "")]);
        let e = sandbox_pid(t.path(), 11).unwrap_err().to_string();
        assert!(e.contains("expected one child"), "{e}");
        let t = tree(&[(10, "11 ")]);
        let e = sandbox_pid(t.path(), 10).unwrap_err().to_string();
        assert!(e.contains("11/task/11/children"), "{e}");
    }

    #[test]
    fn each_entry_is_covered_by_the_empty_file_or_folder_of_band() {
        let masks = [
            ProcMask {
                path: "cmdline".into(),
                dir: false,
            },
            ProcMask {
                path: "sys/dev".into(),
                dir: true,
            },
        ];
        let b = binds(&masks).unwrap();
        let s: Vec<(&str, &str)> = b
            .iter()
            .map(|(a, b)| (a.to_str().unwrap(), b.to_str().unwrap()))
            .collect();
        assert_eq!(
            s,
            [
                ("/band/empty", "/proc/cmdline"),
                ("/band/empty.d", "/proc/sys/dev")
            ]
        );
    }
}
