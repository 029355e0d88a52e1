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
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use band::proto::Observed;

use crate::sys::{self, FanEvent};

/// The events asked for: opened, read, written, closed after writing.
pub const MASK: u64 = libc::FAN_OPEN | libc::FAN_ACCESS | libc::FAN_MODIFY | libc::FAN_CLOSE_WRITE;
const WRITE: u64 = libc::FAN_MODIFY | libc::FAN_CLOSE_WRITE;

/// The workspace as the sandbox sees it: the kernel names an event's file by the sandbox's own
/// mount (`/workspace/data/in.csv`), which band-server's mount namespace does not reach.
pub const SANDBOX_WORKSPACE: &str = "/workspace";

/// The workspace-relative path of an event's file, if it is in the run's workspace: under
/// [`SANDBOX_WORKSPACE`], or under the host's `workspace` directory of the run.
pub fn workspace_path(workspace: &Path, path: &Path) -> Option<String> {
    let rel = path
        .strip_prefix(SANDBOX_WORKSPACE)
        .or_else(|_| path.strip_prefix(workspace))
        .ok()?;
    let s = rel.to_str()?;
    let s = s.strip_suffix(" (deleted)").unwrap_or(s);
    (!s.is_empty()).then(|| s.to_string())
}

/// Fold events into the files read and written (a file written is not also listed as read).
pub fn fold(workspace: &Path, own_pid: i32, events: &[FanEvent], seen: &mut Seen) {
    for e in events {
        if e.pid == own_pid {
            continue;
        }
        let Some(rel) = e.path.as_deref().and_then(|p| workspace_path(workspace, p)) else {
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

fn read_loop(fd: OwnedFd, workspace: &PathBuf, stop: &AtomicBool, seen: &Mutex<Seen>) {
    let own = sys::pid();
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
                        fold(workspace, own, &events, &mut s);
                    }
                    continue;
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        if stopping {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn ev(mask: u64, pid: i32, path: &str) -> FanEvent {
        FanEvent {
            mask,
            pid,
            path: Some(PathBuf::from(path)),
        }
    }

    #[test]
    fn workspace_files_are_read_or_written_and_the_rest_is_ignored() {
        let ws = Path::new("/run/band/runs/0123/workspace");
        let events = [
            ev(
                libc::FAN_OPEN,
                10,
                "/run/band/runs/0123/workspace/data/in.csv",
            ),
            ev(
                libc::FAN_ACCESS,
                10,
                "/run/band/runs/0123/workspace/data/in.csv",
            ),
            ev(libc::FAN_OPEN, 11, "/run/band/runs/0123/workspace/out/r.md"),
            ev(
                libc::FAN_CLOSE_WRITE,
                11,
                "/run/band/runs/0123/workspace/out/r.md",
            ),
            ev(
                libc::FAN_MODIFY,
                11,
                "/run/band/runs/0123/workspace/gone.tmp (deleted)",
            ),
            ev(libc::FAN_OPEN, 12, "/run/band/runs/0123/io/input.json"),
            ev(libc::FAN_OPEN, 12, "/run/band/runs/0123/tmp/x"),
            ev(
                libc::FAN_OPEN,
                99,
                "/run/band/runs/0123/workspace/walked-by-us",
            ),
            FanEvent {
                mask: libc::FAN_OPEN,
                pid: 12,
                path: None,
            },
        ];
        let mut seen = Seen::default();
        fold(ws, 99, &events, &mut seen);
        assert_eq!(
            seen.clone().into_observed(),
            Observed {
                reads: vec!["data/in.csv".into()],
                writes: vec!["gone.tmp".into(), "out/r.md".into()],
                complete: true,
            }
        );
    }
}
