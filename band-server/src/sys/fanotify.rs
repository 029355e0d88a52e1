//! fanotify (`band learn`'s observer of the files and folders of a run's directory): one mark
//! on a whole filesystem, and its events read and parsed.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;

use super::{check, cstring};

/// What one fanotify event says: its mask, the process, and the file (as `/proc/self/fd` names
/// it, `None` if it could not be read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FanEvent {
    pub(crate) mask: u64,
    pub(crate) pid: i32,
    pub(crate) path: Option<std::path::PathBuf>,
    /// The file's (device, inode): the path alone is relative to the mount's root once the
    /// sandbox's mounts are gone (`/out/r.md` for `/workspace/out/r.md`).
    pub(crate) file: Option<(u64, u64)>,
    /// Whether the file is a folder (`fstat` of the event's descriptor: `S_ISDIR`). A mark with
    /// `FAN_ONDIR` reports folders too: `FAN_OPEN` when one is opened, `FAN_ACCESS` when its
    /// entries are read (`getdents`, under `readdir`, `ls`, a glob, `os.walk`).
    pub(crate) dir: bool,
}

/// `fanotify_init(FAN_CLASS_NOTIF)` (non-blocking, close-on-exec) with one mark on the whole
/// filesystem that holds `path` (`FAN_MARK_FILESYSTEM`, Linux 4.20): every `mask` event of every
/// process on that filesystem, however the file was reached (bind mounts included); of folders
/// too when `mask` has `FAN_ONDIR`. Needs
/// `CAP_SYS_ADMIN`. Notification only: nothing waits for band-server's answer.
pub(crate) fn fanotify_filesystem(path: &Path, mask: u64) -> io::Result<OwnedFd> {
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

/// Read the queued events of a [`fanotify_filesystem`] descriptor (none when it would block).
/// Each event's file descriptor is named through `/proc/self/fd` and closed here.
pub(crate) fn fanotify_read(fd: BorrowedFd<'_>) -> io::Result<Vec<FanEvent>> {
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
        let (path, file, dir) = if raw.fd >= 0 {
            // SAFETY: the kernel opened this descriptor for this event and handed it to us;
            // nothing else refers to it, so the OwnedFd closes it exactly once.
            let owned = unsafe { OwnedFd::from_raw_fd(raw.fd) };
            let p = fs_err::read_link(format!("/proc/self/fd/{}", owned.as_raw_fd())).ok();
            let st = rustix::fs::fstat(&owned).ok();
            let f = st.as_ref().map(|st| (st.st_dev, st.st_ino));
            let dir = st.is_some_and(|st| {
                rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory
            });
            (p, f, dir)
        } else {
            (None, None, false)
        };
        out.push(FanEvent {
            mask: raw.mask,
            pid: raw.pid,
            path,
            file,
            dir,
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

#[cfg(test)]
mod tests {
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
