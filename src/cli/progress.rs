//! Progress on stderr, only for people: [`Steps`] (band setup, band vm: a spinner per step on a
//! terminal, plain lines otherwise) and [`Spinner`] (band run, band exec: a spinner while a run is
//! under way, only at a terminal and not with `--json`).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

pub(crate) struct Steps {
    prefix: &'static str,
    n: usize,
    quiet: bool,
    current: Option<(String, Instant, Option<ProgressBar>)>,
    /// (step, seconds) of every finished step, for `--json` and the summary.
    pub(crate) done: Vec<(String, f64)>,
}

impl Steps {
    /// `quiet`: print nothing (e.g. `--json`); timings are still recorded.
    pub(crate) fn new(prefix: &'static str, quiet: bool) -> Self {
        Steps {
            prefix,
            n: 0,
            quiet,
            current: None,
            done: Vec::new(),
        }
    }

    /// Finish the current step and start the next one.
    pub(crate) fn start(&mut self, what: impl Into<String>) {
        self.finish();
        self.n += 1;
        let what = what.into();
        let label = format!("[{}] {what}", self.n);
        let bar = if self.quiet {
            None
        } else if std::io::stderr().is_terminal() {
            let pb = ProgressBar::new_spinner();
            pb.set_style(
                ProgressStyle::with_template("{spinner} {prefix} {msg} {elapsed}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            pb.set_prefix(self.prefix);
            pb.set_message(label);
            pb.enable_steady_tick(Duration::from_millis(120));
            Some(pb)
        } else {
            eprintln!("{}: {label} …", self.prefix);
            None
        };
        self.current = Some((what, Instant::now(), bar));
    }

    /// Finish the current step (if any), printing its time.
    pub(crate) fn finish(&mut self) {
        if let Some((what, t, bar)) = self.current.take() {
            let secs = t.elapsed().as_secs_f64();
            let line = format!("{}: [{}] {what}: {secs:.1} s", self.prefix, self.n);
            match bar {
                Some(pb) => pb.finish_with_message(format!("[{}] {what}: {secs:.1} s", self.n)),
                None if !self.quiet => eprintln!("{line}"),
                None => {}
            }
            self.done.push((what, secs));
        }
    }

    /// A note under the current step.
    pub(crate) fn note(&self, text: impl AsRef<str>) {
        if self.quiet {
            return;
        }
        match self.current.as_ref().and_then(|c| c.2.as_ref()) {
            Some(pb) => pb.println(format!("  {}", text.as_ref())),
            None => eprintln!("{}:   {}", self.prefix, text.as_ref()),
        }
    }
}

impl Drop for Steps {
    fn drop(&mut self) {
        if let Some((_, _, Some(pb))) = self.current.take() {
            pb.abandon();
        }
    }
}

/// SIGINT, SIGTERM and SIGHUP cancel the run under way ([`band::client::cancel::Cancel::global`]):
/// band-server kills it and answers `cancelled`, which is recorded and printed as one line; band
/// exits 130. A second signal exits at once (130), without waiting for the record.
pub(crate) fn cancel_on_signals() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
        return; // the default action stays: band dies, band-server notices and kills the run
    };
    let _ = std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut seen = 0;
            for _ in signals.forever() {
                seen += 1;
                if seen > 1 {
                    std::process::exit(i32::from(band::proto::exit::CANCELLED));
                }
                band::client::cancel::Cancel::global().cancel();
            }
        });
}

/// Whether to show a spinner: human output, to a terminal.
pub(crate) fn wanted(json: bool, stderr_is_terminal: bool) -> bool {
    !json && stderr_is_terminal
}

/// A spinner, or nothing.
pub(crate) struct Spinner(Option<ProgressBar>);

impl Spinner {
    /// Start a spinner with `message` when [`wanted`] for this process's stderr.
    pub(crate) fn start(json: bool, message: String) -> Spinner {
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
    pub(crate) fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.0 {
            Some(bar) => bar.suspend(f),
            None => f(),
        }
    }

    /// Remove the spinner before the result is printed.
    pub(crate) fn finish(&self) {
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

impl band::vm::Progress for Steps {
    fn start(&mut self, what: String) {
        Steps::start(self, what);
    }

    fn note(&mut self, what: String) {
        Steps::note(self, what);
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
