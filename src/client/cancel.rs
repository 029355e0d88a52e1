//! [`Cancel`]: asks a run under way to stop. The CLI sets the process-wide one ([`Cancel::global`])
//! on SIGINT/SIGTERM/SIGHUP or a closed stdout; `band mcp` sets one per tool call when the client
//! cancels it or disconnects. The transport passes it on to band-server (`{"type":"cancel"}`),
//! which kills the run; the run is recorded as `cancelled`.

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
        let (m, cv) = &*self.0;
        let Ok(c) = m.lock() else {
            return true;
        };
        match cv.wait_timeout_while(c, timeout, |c| !*c) {
            Ok((c, _)) => *c,
            Err(_) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
