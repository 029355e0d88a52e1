//! Rendering a run for people and machines: its events on stderr as they come, the status line
//! of a run that did not end `ok`, and the `--json` document.

//!
//! What a script controls (its stdout and stderr, the argv of its commands, paths, host names)
//! goes through [`for_terminal`] on its way to a person: a script must not drive the terminal
//! (OSC 52 writes the clipboard, OSC 0/2 the window title, CSI 2J clears the screen, SGR 8 hides
//! band's own next line). `--json` keeps every character, JSON-escaped ([`json_text`]).

use std::borrow::Cow;
use std::io::{ErrorKind, IsTerminal, Write};

use anyhow::{Context, Result};

use band::client::cancel::Cancel;
use band::client::outcome::Outcome;
use band::proto;

/// `s` made inert for a terminal ([`band::diag::inert`]).
pub(crate) fn for_terminal(s: &str) -> Cow<'_, str> {
    band::diag::inert(s)
}

/// Standard output for a command's text: what is written goes through [`for_terminal`] (people)
/// or [`json_text`] (`--json`), whole `write_str` pieces at a time, as `write!` hands them over.
/// For commands that print what a skill folder holds (names, descriptions, rules, paths): a
/// skill author must not drive the reader's terminal (issue 36).
pub(crate) struct Shown {
    out: std::io::StdoutLock<'static>,
    json: bool,
}

impl Shown {
    pub(crate) fn stdout(json: bool) -> Shown {
        Shown {
            out: std::io::stdout().lock(),
            json,
        }
    }
}

impl Write for Shown {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let shown = if self.json {
            json_text(&text)
        } else {
            for_terminal(&text)
        };
        self.out.write_all(shown.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// The script's own JSON text for `output`, when its stdout is that document (the output came
/// from stdout, not `output.json`): printed as the script wrote it, keys in its order, where
/// printing the parsed value would sort them and change a file the user redirects band's
/// stdout to (sixth wild trial). `None` when stdout is not exactly `output` (an `output.json`,
/// a masked secret, a cut stdout).
pub(crate) fn scripts_json<'a>(output: &serde_json::Value, stdout: &'a str) -> Option<&'a str> {
    let text = stdout.trim_end_matches(['\n', '\r']);
    serde_json::from_str::<serde_json::Value>(text)
        .is_ok_and(|v| v == *output)
        .then_some(text)
}

/// JSON text as printed: serde_json escapes C0 controls (ESC is `\u001b`) but not C1 controls
/// (U+0080–U+009F, which some terminals read as CSI/OSC); escape those too. Still valid JSON, and
/// the same value: outside strings JSON has only ASCII.
pub(crate) fn json_text(json: &str) -> Cow<'_, str> {
    let c1 = |c: char| ('\u{80}'..='\u{9f}').contains(&c);
    if !json.chars().any(c1) {
        return Cow::Borrowed(json);
    }
    Cow::Owned(
        json.chars()
            .map(|c| {
                if c1(c) {
                    format!("\\u{:04x}", c as u32)
                } else {
                    c.to_string()
                }
            })
            .collect(),
    )
}

/// Write `text` to stdout. A closed stdout (`band run --json … | head -c1`) is not an error: the
/// reader took what it wanted; nothing more is written and the exit code stays the run's.
pub(crate) fn write_stdout(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(()),
        r => r.context("cannot write to stdout"),
    }
}

/// A chunk of a script's stdout as it streams (`band exec`): inert at a terminal, as is
/// otherwise. When stdout is closed the run is cancelled: nobody reads what it makes.
pub(crate) fn stream_stdout(data: &str) {
    let mut out = std::io::stdout().lock();
    let text = if out.is_terminal() {
        for_terminal(data)
    } else {
        Cow::Borrowed(data)
    };
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush())
        && e.kind() == ErrorKind::BrokenPipe
    {
        Cancel::global().cancel();
    }
}

/// Human text on stderr, made inert; a closed stderr is ignored (never a panic).
pub(crate) fn say(text: &str) {
    let _ = std::io::stderr().write_all(for_terminal(text).as_bytes());
}

/// What a person sees of a run's events (`band run`, `band exec`, `band learn`): the script's
/// stderr and limits as they come; its denials once the run is over ([`Live::end`]), in the order
/// band-server recorded them. A denial reaches band-server on another channel than the script's
/// stderr (the shim's report socket), so its place among the stderr lines would vary from run to
/// run; the shim says on that stderr itself when it refuses a command.
#[derive(Default)]
pub(crate) struct Live {
    denied: Vec<proto::Denial>,
}

impl Live {
    /// Show `ev` now, or keep it for [`Live::end`].
    pub(crate) fn event(&mut self, ev: &proto::Event) {
        if let Some(text) = self.take(ev) {
            say(&text);
        }
    }

    /// The text to show now for `ev`, if any.
    fn take(&mut self, ev: &proto::Event) -> Option<String> {
        match ev {
            proto::Event::Stderr { data } => Some(data.clone()),
            proto::Event::Denied(d) => {
                self.denied.push(d.clone());
                None
            }
            proto::Event::Limit { limit, detail } => {
                Some(format!("band: limit `{limit}` reached: {detail}\n"))
            }
            _ => None,
        }
    }

    /// Once the run is over: its denials, one line each.
    pub(crate) fn end(&self) {
        say(&self.end_text());
    }

    /// [`Live::end`], with the refusals of `result` that came after its events: the files
    /// band's write-back did not write. One band-server sent as an event too (where its walk of
    /// the workspace stopped, a folder too deep) is shown once.
    pub(crate) fn end_with(&mut self, result: Option<&proto::RunResult>) {
        if let Some(r) = result {
            self.add_late(r);
        }
        self.end();
    }

    fn add_late(&mut self, r: &proto::RunResult) {
        let late: Vec<proto::Denial> = r
            .denied
            .iter()
            .filter(|d| d.refused_by_write_back() && !self.denied.contains(d))
            .cloned()
            .collect();
        self.denied.extend(late);
    }

    fn end_text(&self) -> String {
        self.denied
            .iter()
            .map(|d| format!("band: denied: {}\n", describe_denial(d)))
            .collect()
    }
}

/// The note for the workspace's symlinks a run left out (band copies none in), if any: a script
/// that looks for one finds nothing there, which is otherwise seen nowhere.
pub(crate) fn links_note(left: &band::client::pipeline::LeftOut) -> Option<String> {
    const SHOWN: usize = 3;
    let n = left.count;
    if n == 0 {
        return None;
    }
    let mut names = left
        .named
        .iter()
        .take(SHOWN)
        .map(|p| format!("`{p}`"))
        .collect::<Vec<_>>()
        .join(", ");
    if n > SHOWN {
        names.push_str(&format!(" and {} more", n - SHOWN));
    }
    let text = if n == 1 {
        format!(
            "band: note: the workspace's symlink {names} was left out of the run (band copies no symlink in; put a copy of its file there to give it to the script)\n"
        )
    } else {
        format!(
            "band: note: {n} of the workspace's symlinks were left out of the run: {names} (band copies no symlink in; put copies of their files there to give them to the script)\n"
        )
    };
    Some(text)
}

/// The note for the allowed commands the host did not have, if any: the run went without them,
/// which a script that falls back quietly shows nowhere else. Told after the run, so the
/// script's stderr stays the script's. After a failure it does not say they caused it: band
/// cannot tell whether the script tried one (a band often allows a sibling script's programs),
/// and a hint would send the user after the wrong cause.
pub(crate) fn missing_note(result: &proto::RunResult) -> Option<String> {
    if result.missing_commands.is_empty() {
        return None;
    }
    let names: Vec<String> = result
        .missing_commands
        .iter()
        .map(|m| for_terminal(&m.describe()).into_owned())
        .collect();
    let (it, rule) = if names.len() == 1 {
        ("it", "its rule")
    } else {
        ("them", "their rules")
    };
    Some(match result.status {
        proto::Status::Ok => format!(
            "note: not installed where band-server runs, so the run went without {it}: {} (install {it} there, or take {rule} out of the band)\n",
            names.join(", "),
        ),
        _ => format!(
            "note: the band allows what is not installed where band-server runs: {} (if the script needed {it}, install {it} there; if not, take {rule} out of the band)\n",
            names.join(", "),
        ),
    })
}

/// The hint for a run that timed out while it was listening on a port (a skill that serves a
/// gallery on `127.0.0.1:8765` and waits): nothing outside the run could connect to it, so it
/// waited until `maxRuntimeMs`. Told after the run, with the status line.
pub(crate) fn listening_hint(result: &proto::RunResult) -> Option<String> {
    result
        .listening_hint()
        .map(|h| format!("hint: {}\n", for_terminal(&h)))
}

fn describe_denial(d: &proto::Denial) -> String {
    let what = match d {
        proto::Denial::Cli { argv, .. } => format!("command `{}`", argv.join(" ")),
        proto::Denial::Net { host, port, .. } => format!(
            "host {host}{}",
            port.map(|p| format!(":{p}")).unwrap_or_default()
        ),
        proto::Denial::Dns { name } => format!("DNS name {name}"),
        proto::Denial::Write { path, .. } => format!("write to {path}"),
        proto::Denial::Http { .. } | proto::Denial::Secret { .. } => d.what(),
    };
    band::diag::one_line(&format!(
        "{what} ({} layer: {})",
        d.layer().as_str(),
        d.explain()
    ))
    .into_owned()
}

/// `3 requests to the CLI gate came from no band-shim and were refused: <reasons>`.
pub(crate) fn describe_forged(f: &proto::Forged) -> String {
    let n = f.count;
    let (s, verb) = if n == 1 { ("", "was") } else { ("s", "were") };
    let more = (n as usize)
        .checked_sub(f.reasons.len())
        .filter(|m| *m > 0)
        .map(|m| format!("; {m} more"))
        .unwrap_or_default();
    format!(
        "{n} request{s} to the CLI gate came from no band-shim and {verb} refused: {}{more}",
        f.reasons.join("; ")
    )
}

/// Once a run is over, for a person: the forged requests to the CLI gate, if any (a script, or
/// something it ran, tried to speak for band-shim; each was refused).
pub(crate) fn warn_forged(result: &proto::RunResult) {
    if let Some(f) = &result.forged {
        say(&format!("band: warning: {}\n", describe_forged(f)));
    }
}

/// The `--json` document of a run: the result, with the run's names and fingerprints.
pub(crate) fn result_json(outcome: &Outcome) -> Result<serde_json::Value> {
    let result = &outcome.result;
    let mut v = serde_json::to_value(result)?;
    if let Some(o) = v.as_object_mut() {
        // The same two names as MCP results and the ledger: `exit_code` is band's (as `band run`
        // exits), `script_exit_code` the script's own (the wire's `exit_code`), null if it never ran.
        o.insert("exit_code".into(), result.status.exit_code().into());
        o.insert(
            "script_exit_code".into(),
            serde_json::json!(result.exit_code),
        );
        o.remove("written");
        o.insert(
            "written_files".into(),
            serde_json::json!(
                result
                    .written
                    .iter()
                    .map(|f| f.path.clone())
                    .collect::<Vec<_>>()
            ),
        );
        if !outcome.not_admitted.is_empty() {
            o.insert(
                "not_admitted".into(),
                serde_json::to_value(&outcome.not_admitted)?,
            );
        }
        if !outcome.not_writable.is_empty() {
            o.insert(
                "not_writable".into(),
                serde_json::to_value(&outcome.not_writable)?,
            );
        }
        if outcome.links_left_out.count > 0 {
            o.insert(
                "links_left_out".into(),
                serde_json::to_value(&outcome.links_left_out)?,
            );
        }
        if !outcome.without_exec.is_empty() {
            o.insert(
                "written_without_exec".into(),
                serde_json::to_value(&outcome.without_exec)?,
            );
        }
        o.insert("skill".into(), outcome.skill.clone().into());
        o.insert("script".into(), outcome.script.clone().into());
        o.insert("target".into(), outcome.target.to_string().into());
        o.insert(
            "fingerprints".into(),
            serde_json::json!({
                "bundle_sha256": outcome.bundle_sha256,
                "band_sha256": outcome.band_sha256,
                "policy_sha256": outcome.policy_sha256,
            }),
        );
        o.insert(
            "io".into(),
            serde_json::json!({
                "input_bytes": outcome.input_bytes,
                "input_sha256": outcome.input_sha256,
                "output_bytes": outcome.output_bytes,
                "output_sha256": outcome.output_sha256,
            }),
        );
        o.insert("started_at_ms".into(), outcome.started_at_ms.into());
        if !outcome.secret_warnings.is_empty() {
            o.insert(
                "secret_warnings".into(),
                outcome.secret_warnings.clone().into(),
            );
        }
    }
    Ok(v)
}

/// The status line of a run that did not end `ok`, on stderr: status, exit code, layer, hint.
pub(crate) fn print_failure(result: &proto::RunResult) {
    let s = result.status;
    let detail = result
        .error
        .as_ref()
        .map(|e| format!(" [{}] {}", e.layer.as_str(), e.message))
        .unwrap_or_default();
    // The script's exit code, named so: band's own is the process's (124 for a timeout, 4 for
    // output_invalid), and two bare numbers read as a contradiction. A cancelled run's script
    // was killed (137 says nothing more); 0 adds nothing to a status.
    let code = result
        .exit_code
        .filter(|&c| s != proto::Status::Cancelled && c != 0)
        .map(|c| format!(" (script exit {c})"))
        .unwrap_or_default();
    say(&format!("band: {s}{code}: {}{detail}\n", s.describe()));
    if !result.insist_missing.is_empty() {
        say(&format!(
            "band: never happened: {}\n",
            result.insist_missing.join(", ")
        ));
    }
    if let Some(h) = result.error.as_ref().and_then(|e| e.hint.as_ref()) {
        say(&format!("hint: {h}\n"));
    } else if let Some(h) = read_only_skill_hint(&result.stderr) {
        say(&format!("hint: {h}\n"));
    }
}

/// The hint for a script that tried to write into its own skill folder, which the sandbox mounts
/// read-only at `/skill` (a `setup.sh` that installs its packages beside it): a line of its
/// stderr that names a path under `/skill` and says "read-only file system" (`mkdir`, Python's
/// `[Errno 30]`, node's `EROFS`).
pub(crate) fn read_only_skill_hint(stderr: &str) -> Option<&'static str> {
    stderr
        .lines()
        .any(|l| {
            l.to_ascii_lowercase().contains("read-only file system")
                && (l.contains("/skill/") || l.contains("'/skill'") || l.contains("\"/skill\""))
        })
        .then_some(
            "the skill's folder is read-only in the sandbox (/skill): a script that installs into it \
             needs its dependencies declared instead (band-server builds them before the run: \
             docs/dependencies.md), and a script that writes files writes them in the workspace, \
             under allow.write",
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A script's JSON on stdout is printed as it wrote it (keys in its order); a document that
    /// is not its stdout (an `output.json`, a masked secret) is printed from the value.
    #[test]
    fn the_scripts_own_json_is_printed_as_written() {
        let stdout = "{\n  \"zeta\": 1,\n  \"alpha\": [true]\n}\n";
        let v: serde_json::Value = serde_json::from_str(stdout).unwrap_or_default();
        assert_eq!(
            scripts_json(&v, stdout),
            Some("{\n  \"zeta\": 1,\n  \"alpha\": [true]\n}")
        );
        assert_eq!(scripts_json(&v, "log line\n"), None);
        assert_eq!(scripts_json(&serde_json::json!({"zeta": 2}), stdout), None);
        assert_eq!(scripts_json(&v, ""), None);
    }

    #[test]
    fn a_write_into_the_read_only_skill_folder_gets_its_hint() {
        for line in [
            "mkdir: cannot create directory '/skill/.deps': Read-only file system",
            "OSError: [Errno 30] Read-only file system: '/skill/cache'",
            "Error: EROFS: read-only file system, mkdir '/skill/node_modules'",
        ] {
            assert!(
                read_only_skill_hint(&format!("x\n{line}\n")).is_some(),
                "{line}"
            );
        }
        for line in [
            "touch: cannot touch '/workspace/x': Read-only file system",
            "cp: /skill/a: No such file or directory",
        ] {
            assert_eq!(read_only_skill_hint(line), None, "{line}");
        }
    }

    #[test]
    fn a_run_that_timed_out_serving_a_port_gets_a_hint_naming_it() {
        let mut r =
            proto::RunResult::setup_failed("0011223344556677", proto::Layer::Process, "", None);
        r.status = proto::Status::Timeout;
        r.error = None;
        assert_eq!(listening_hint(&r), None);
        r.listening = vec!["127.0.0.1:8765".into(), "[::]:3000\x1b[2J".into()];
        assert_eq!(
            listening_hint(&r).as_deref(),
            Some(
                "hint: the script was still listening on 127.0.0.1:8765, [::]:3000^[[2J when it timed out; a run takes no inbound connections, so nothing outside the run can reach a server a skill starts (docs/network.md, \"A server inside a run\")\n"
            )
        );
    }

    /// What a person sees of `events`: what is shown as they come, then the end.
    fn seen(events: &[proto::Event]) -> String {
        let mut live = Live::default();
        let mut out: String = events.iter().filter_map(|e| live.take(e)).collect();
        out.push_str(&live.end_text());
        out
    }

    /// A denial and the script's stderr lines come on two channels, in either order: what a
    /// person sees is the same (before, the denial line went out wherever it arrived).
    #[test]
    fn denials_show_in_one_place_however_they_interleave_with_stderr() {
        let denied = |w: &str| {
            proto::Event::Denied(proto::Denial::Cli {
                argv: vec![w.to_string(), "-s".to_string()],
                rule: None,
                source: None,
            })
        };
        let err = |t: &str| proto::Event::Stderr {
            data: t.to_string(),
        };
        let one = [
            denied("uname"),
            err("band: uname: command not available in this sandbox\n"),
            denied("id"),
            err("band: id: command not available in this sandbox\n"),
        ];
        let other = [
            err("band: uname: command not available in this sandbox\n"),
            err("band: id: command not available in this sandbox\n"),
            denied("uname"),
            denied("id"),
        ];
        let want = "band: uname: command not available in this sandbox\n\
                    band: id: command not available in this sandbox\n\
                    band: denied: command `uname -s` (cli layer: no allow.cli rule matches; to allow it: allow.cli \"uname -s\")\n\
                    band: denied: command `id -s` (cli layer: no allow.cli rule matches; to allow it: allow.cli \"id -s\")\n";
        assert_eq!(seen(&one), want);
        assert_eq!(seen(&other), want);
    }

    /// A write-back refusal band-server streamed (where its walk stopped) and that the result
    /// holds too is shown once; one only the result holds (band's own write-back) is added.
    #[test]
    fn a_write_back_refusal_streamed_and_in_the_result_is_shown_once() {
        let refused = |p: &str| proto::Denial::Write {
            path: p.into(),
            rule: None,
            reason: Some("over the 100000 files and folders a run may leave".into()),
        };
        let mut live = Live::default();
        let _ = live.take(&proto::Event::Denied(refused("out/a")));
        let mut r = proto::RunResult::setup_failed("0011223344556677", proto::Layer::Io, "", None);
        r.denied = vec![refused("out/a"), refused("out/b")];
        live.add_late(&r);
        let text = live.end_text();
        assert_eq!(text.matches("out/a").count(), 1, "{text}");
        assert_eq!(text.matches("out/b").count(), 1, "{text}");
    }

    #[test]
    fn escapes_are_made_inert_for_a_terminal() {
        // OSC 52 (clipboard), OSC 0 (title), CSI 2J (clear), SGR 8 (hidden), BEL, CR, DEL.
        let s = "a\x1b]52;c;aGk=\x07b\x1b]0;pwned\x1b\\c\x1b[2J\x1b[8md\re\x7f";
        assert_eq!(
            for_terminal(s),
            "a^[]52;c;aGk=^Gb^[]0;pwned^[\\c^[[2J^[[8md^Me^?"
        );
        // Newlines and tabs stay; CRLF becomes LF; plain text is borrowed, not copied.
        assert_eq!(for_terminal("x\ty\r\nz\n"), "x\ty\nz\n");
        assert!(matches!(
            for_terminal("plain ünïcode ✓\n"),
            Cow::Borrowed(_)
        ));
        // C1 controls (8-bit CSI, OSC) and bidi overrides are shown as code points.
        assert_eq!(for_terminal("\u{9b}2J\u{9d}0;t"), "\\u{9b}2J\\u{9d}0;t");
        assert_eq!(for_terminal("ab\u{202e}cd"), "ab\\u{202e}cd");
        assert_eq!(for_terminal("\0\x01\x1f"), "^@^A^_");
        assert!(!for_terminal(s).contains('\x1b'));
    }

    #[test]
    fn json_text_escapes_c1_and_stays_the_same_json() {
        let v = serde_json::json!({"s": "\x1b[2J\u{9b}31m\u{85}ok"});
        let text = serde_json::to_string(&v).unwrap();
        assert!(text.contains("\\u001b"), "{text}");
        let shown = json_text(&text);
        assert!(!shown.chars().any(|c| c.is_control()), "{shown}");
        assert!(
            shown.contains("\\u009b") && shown.contains("\\u0085"),
            "{shown}"
        );
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&shown).unwrap(),
            v
        );
        assert!(matches!(json_text("{\"a\":1}"), Cow::Borrowed(_)));
    }
}
