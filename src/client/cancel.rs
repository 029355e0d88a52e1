//! [`Cancel`]: asks a run under way to stop. The CLI sets the process-wide one ([`Cancel::global`])
//! on SIGINT/SIGTERM/SIGHUP or a closed stdout; `band mcp` sets one per tool call when the client
//! cancels it or disconnects. The transport passes it on to band-server (`{"type":"cancel"}`),
//! which kills the run; the run is recorded as `cancelled`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

/// A flag that can be waited on. Clones share it.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<(Mutex<bool>, Condvar)>);

impl Cancel {
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// The process-wide token (the CLI's signal handler sets it).
    pub fn global() -> &'static Cancel {
        static GLOBAL: OnceLock<Cancel> = OnceLock::new();
        GLOBAL.get_or_init(Cancel::new)
    }

    pub fn cancel(&self) {
        let (m, cv) = &*self.0;
        if let Ok(mut c) = m.lock() {
            *c = true;
        }
        cv.notify_all();
    }

    /// Whether `other` is this token (a clone of it).
    pub fn same_as(&self, other: &Cancel) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.0.lock().map(|c| *c).unwrap_or(true)
    }

    /// Wait until cancelled or `timeout` passes; whether it is cancelled.
    pub fn wait(&self, timeout: Duration) -> bool {
        self.wait_unless(timeout, &AtomicBool::new(false))
    }

    /// Wait until cancelled, `done` is set (and [`Cancel::wake`] called) or `timeout` passes;
    /// whether it is cancelled.
    pub fn wait_unless(&self, timeout: Duration, done: &AtomicBool) -> bool {
        let (m, cv) = &*self.0;
        let Ok(c) = m.lock() else {
            return true;
        };
        match cv.wait_timeout_while(c, timeout, |c| !*c && !done.load(Ordering::SeqCst)) {
            Ok((c, _)) => *c,
            Err(_) => true,
        }
    }

    /// Wake every waiter without cancelling, so a [`Cancel::wait_unless`] sees its `done` at
    /// once rather than at its timeout. The lock is taken first: a waiter that has just found
    /// `done` unset is then already waiting, and cannot miss this.
    pub fn wake(&self) {
        let (m, cv) = &*self.0;
        let _held = m.lock();
        cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wake_after_done_ends_the_wait_at_once_without_cancelling() {
        let c = Cancel::new();
        let done = Arc::new(AtomicBool::new(false));
        let (c2, done2) = (c.clone(), done.clone());
        let waiter = std::thread::spawn(move || {
            let start = std::time::Instant::now();
            let cancelled = c2.wait_unless(Duration::from_secs(60), &done2);
            (cancelled, start.elapsed())
        });
        std::thread::sleep(Duration::from_millis(20));
        done.store(true, Ordering::SeqCst);
        c.wake();
        let (cancelled, waited) = waiter.join().unwrap();
        assert!(!cancelled);
        assert!(!c.is_cancelled());
        // Not a timing assertion on speed: a wait that ignored the wake would run its full minute.
        assert!(waited < Duration::from_secs(30), "{waited:?}");
    }

    #[test]
    fn a_cancel_wakes_a_waiter() {
        let c = Cancel::new();
        assert!(!c.wait(Duration::from_millis(1)));
        let c2 = c.clone();
        let t = std::thread::spawn(move || c2.wait(Duration::from_secs(30)));
        c.cancel();
        assert!(t.join().unwrap());
        assert!(c.is_cancelled());
    }
}
