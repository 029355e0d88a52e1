//! The observing half of `band learn` (a request with `observe: true`): which workspace files the
//! run opened, read and wrote, seen by the kernel.
//!
//! One fanotify mark (`FAN_MARK_FILESYSTEM`) on the run's own tmpfs (the run directory, which
//! holds the workspace copy) reports every open, read, write and close-after-write on it, by any
//! process, however the file was reached: static binaries and direct syscalls included, and no
//! code inside the sandbox (never LD_PRELOAD). The tmpfs belongs to this run alone, so every event
//! on it is the run's, except band-server's own (filtered by pid). The mark is set after the
//! sandbox is built and before the script can start (the jail waits for its secrets, written
//! after), and removed before the collection walks the workspace.
//!
//! Not seen here: files outside the workspace (the host's system files, which every band gets
//! read-only, and absolute paths) — see docs/learn.md.

use std::collections::BTreeSet;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use band::proto::Observed;

use crate::sys::{self, FanEvent};

/// The events asked for: opened, read, written, closed after writing.
pub const MASK: u64 = libc::FAN_OPEN | libc::FAN_ACCESS | libc::FAN_MODIFY | libc::FAN_CLOSE_WRITE;
const WRITE: u64 = libc::FAN_MODIFY | libc::FAN_CLOSE_WRITE;

/// The workspace as the sandbox sees it.
pub const SANDBOX_WORKSPACE: &str = "/workspace";

/// The workspace-relative paths an event's file may have. The kernel names the file by the
/// sandbox's mount: `/workspace/data/in.csv` while the sandbox lives, `/data/in.csv` (relative to
/// the mount's root) once its mounts are gone; so both readings are candidates, and
/// [`fold`] keeps the one whose file in the run's workspace is the event's file.
pub fn candidates(path: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut push = |rel: &Path| {
        if let Some(s) = rel.to_str() {
            let s = s.strip_suffix(" (deleted)").unwrap_or(s);
            if !s.is_empty() && !out.iter().any(|o: &String| o == s) {
                out.push(s.to_string());
            }
        }
    };
    if let Ok(rel) = path.strip_prefix(SANDBOX_WORKSPACE) {
        push(rel);
    }
    if let Ok(rel) = path.strip_prefix("/") {
        push(rel);
    }
    out
}

/// Fold events into the files read and written (a file written is not also listed as read).
/// `identify` gives the (device, inode) of a workspace-relative path in the run's workspace.
pub fn fold(
    own_pid: i32,
    events: &[FanEvent],
    identify: &dyn Fn(&str) -> Option<(u64, u64)>,
    seen: &mut Seen,
) {
    for e in events {
        if e.pid == own_pid {
            continue;
        }
        let (Some(path), Some(file)) = (e.path.as_deref(), e.file) else {
            continue;
        };
        let Some(rel) = candidates(path)
            .into_iter()
            .find(|rel| identify(rel) == Some(file))
        else {
            continue;
        };
        if e.mask & WRITE != 0 {
            seen.writes.insert(rel);
        } else {
            seen.reads.insert(rel);
        }
    }
}

/// What the observer has seen so far.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Seen {
    pub reads: BTreeSet<String>,
    pub writes: BTreeSet<String>,
    pub overflowed: bool,
}

impl Seen {
    pub fn into_observed(self) -> Observed {
        let reads = self
            .reads
            .into_iter()
            .filter(|r| !self.writes.contains(r))
            .collect();
        Observed {
            reads,
            writes: self.writes.into_iter().collect(),
            complete: !self.overflowed,
        }
    }
}

/// A running observer: a thread reading the fanotify queue until [`Observer::finish`].
pub struct Observer {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Seen>>,
    thread: Option<JoinHandle<()>>,
}

impl Observer {
    /// Mark the filesystem of `run_dir` and start reading its events.
    pub fn start(run_dir: &Path) -> std::io::Result<Observer> {
        let fd = sys::fanotify_filesystem(run_dir, MASK)?;
        let workspace = run_dir.join("workspace");
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (s2, seen2) = (stop.clone(), seen.clone());
        let thread = std::thread::Builder::new()
            .name("observe".into())
            .spawn(move || read_loop(fd, &workspace, &s2, &seen2))?;
        Ok(Observer {
            stop,
            seen,
            thread: Some(thread),
        })
    }

    /// Read what is queued, stop, and return what was seen.
    pub fn finish(mut self) -> Observed {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let seen = self.seen.lock().map(|s| s.clone()).unwrap_or_default();
        seen.into_observed()
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn read_loop(fd: OwnedFd, workspace: &Path, stop: &AtomicBool, seen: &Mutex<Seen>) {
    let own = sys::pid();
    let identify = |rel: &str| -> Option<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        let m = fs_err::symlink_metadata(workspace.join(rel)).ok()?;
        Some((m.dev(), m.ino()))
    };
    let mut errors = 0u32;
    loop {
        let stopping = stop.load(Ordering::SeqCst);
        // After the stop request, drain what is queued (no wait) and end.
        let ready = sys::poll_readable(fd.as_fd(), if stopping { 0 } else { 100 }).unwrap_or(false);
        if ready {
            match sys::fanotify_read(fd.as_fd()) {
                Ok(events) if !events.is_empty() => {
                    if let Ok(mut s) = seen.lock() {
                        if events.iter().any(|e| e.mask & libc::FAN_Q_OVERFLOW != 0) {
                            s.overflowed = true;
                        }
                        fold(own, &events, &identify, &mut s);
                    }
                    continue;
                }
                Ok(_) => {}
                // A read fails when the kernel cannot open one event's file for us; that event
                // is gone, the next ones are not. A descriptor that keeps failing ends the loop.
                Err(_) => {
                    errors += 1;
                    if let Ok(mut s) = seen.lock() {
                        s.overflowed = true;
                    }
                    if errors > 1000 {
                        break;
                    }
                    continue;
                }
            }
        }
        if stopping {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use pretty_assertions::assert_eq;

    use super::*;

    fn ev(mask: u64, pid: i32, path: &str, ino: u64) -> FanEvent {
        FanEvent {
            mask,
            pid,
            path: Some(PathBuf::from(path)),
            file: Some((7, ino)),
        }
    }

    #[test]
    fn workspace_files_are_read_or_written_by_inode_and_the_rest_is_ignored() {
        // The run's workspace: these files, on device 7.
        let ws = [
            ("data/in.csv", 1),
            ("out/r.md", 2),
            ("out", 3),
            ("gone.tmp", 4),
        ];
        let identify = |rel: &str| ws.iter().find(|(p, _)| *p == rel).map(|(_, i)| (7, *i));
        let events = [
            ev(libc::FAN_OPEN, 10, "/workspace/data/in.csv", 1),
            ev(libc::FAN_ACCESS, 10, "/workspace/data/in.csv", 1),
            // Read after the sandbox's mounts were gone: relative to the mount's root.
            ev(libc::FAN_OPEN, 11, "/out/r.md", 2),
            ev(libc::FAN_CLOSE_WRITE, 11, "/out/r.md", 2),
            ev(libc::FAN_MODIFY, 11, "/workspace/gone.tmp (deleted)", 4),
            // Not the workspace: the io mount's output.json, /skill, /tmp, a same-named file.
            ev(libc::FAN_CLOSE_WRITE, 12, "/output.json", 9),
            ev(libc::FAN_OPEN, 12, "/skill/run.sh", 10),
            ev(libc::FAN_OPEN, 12, "/tmp/x", 11),
            ev(libc::FAN_OPEN, 12, "/data/in.csv", 12),
            // band-server's own.
            ev(libc::FAN_OPEN, 99, "/workspace/data/in.csv", 1),
            FanEvent {
                mask: libc::FAN_OPEN,
                pid: 12,
                path: None,
                file: None,
            },
        ];
        let mut seen = Seen::default();
        fold(99, &events, &identify, &mut seen);
        assert_eq!(
            seen.clone().into_observed(),
            Observed {
                reads: vec!["data/in.csv".into()],
                writes: vec!["gone.tmp".into(), "out/r.md".into()],
                complete: true,
            }
        );
    }

    #[test]
    fn band_learn_knows_the_essentials_and_forbidden_commands_as_band_server_does() {
        assert_eq!(
            band::learn::observe::ESSENTIALS,
            crate::layers::cli::shim::ESSENTIALS
        );
        assert_eq!(
            band::learn::observe::FORBIDDEN,
            crate::request::FORBIDDEN_COMMANDS
        );
    }
}
