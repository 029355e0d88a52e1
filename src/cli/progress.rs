//! The spinner `band run` and `band exec` show on stderr while a run is under way: only when
//! stderr is a terminal and the output is not `--json` (machines read stdout, and a log file
//! should not fill with spinner frames).

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// Whether to show a spinner: human output, to a terminal.
pub fn wanted(json: bool, stderr_is_terminal: bool) -> bool {
    !json && stderr_is_terminal
}

/// A spinner, or nothing.
pub struct Spinner(Option<ProgressBar>);

impl Spinner {
    /// Start a spinner with `message` when [`wanted`] for this process's stderr.
    pub fn start(json: bool, message: String) -> Spinner {
        if !wanted(json, std::io::stderr().is_terminal()) {
            return Spinner(None);
        }
        let bar = ProgressBar::new_spinner();
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} {elapsed}") {
            bar.set_style(style);
        }
        bar.set_message(message);
        bar.enable_steady_tick(Duration::from_millis(100));
        Spinner(Some(bar))
    }

    /// Print something (an event) without tearing the spinner line.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.0 {
            Some(bar) => bar.suspend(f),
            None => f(),
        }
    }

    /// Remove the spinner before the result is printed.
    pub fn finish(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_for_humans_at_a_terminal() {
        assert!(wanted(false, true));
        assert!(!wanted(true, true));
        assert!(!wanted(false, false));
        assert!(!wanted(true, false));
    }

    #[test]
    fn no_terminal_no_spinner() {
        // Test harness stderr is captured (not a terminal) here; with --json there is never one.
        assert!(Spinner::start(true, "x".into()).0.is_none());
        let s = Spinner::start(false, "x".into());
        assert_eq!(s.0.is_some(), std::io::stderr().is_terminal());
        s.suspend(|| ());
        s.finish();
    }
}
