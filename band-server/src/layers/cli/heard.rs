//! The shells' own "not found" messages on the script's stderr, read as CLI denials.
//!
//! A command the sandbox does not have never reaches band-shim when the shell has no hook for it
//! (bash's `command_not_found_handle`, see `workdir::BASH_ENV_FILE`, is the only one): dash,
//! busybox ash, zsh, mksh and posh search `PATH`, find nothing, and print their message. So does
//! every shell, bash included, for an absolute path the sandbox lacks (`/usr/bin/uname`: no
//! `PATH` search, no hook), and so do Python's `subprocess` and Node's `child_process` when the
//! error reaches the script's stderr (an uncaught exception). band-server reads the script's stderr anyway; [`StderrWatch`] passes
//! it on unchanged and recognises those messages ([`not_found`], pure), and a name the host has
//! as a program that the band does not allow is a denial on record with
//! [`CallSource::NotFoundMessage`]: only the command is known, so the rule that would allow it is
//! `<command> *`.
//!
//! The script writes its stderr, so it can print such a line itself: that adds a report line,
//! never a permission (a denial allows nothing), and names only a program the host has, which
//! the user reading the report may see anyway. The script sees nothing of it. What costs nothing
//! where there is nothing to report: one scan for `\n` over the stderr bytes.

use std::io::Read;
use std::path::{Path, PathBuf};

use band::proto::{CallSource, CliCall};

use super::reports::{OnReport, Report};
use super::shim::{self, CliRules};

/// Longest stderr line looked at; a longer one is passed on and not read.
const MAX_LINE: usize = 4096;

/// The shells whose own name is the prefix of a message from `sh -c` (no line number).
const SHELLS: &[&str] = &[
    "sh", "ash", "dash", "bash", "zsh", "mksh", "lksh", "ksh", "posh", "busybox",
];

/// The command a shell's "not found" message names, or `None` when the line is not one:
///
/// ```text
/// ./t.sh: 2: jq: not found                      dash (`dash: 1: jq: not found` for -c)
/// ./t.sh: line 2: jq: not found                 busybox sh/ash (`sh: jq: not found` for -c)
/// ./t.sh:2: jq: not found                       posh (`posh: jq: not found`)
/// E: ./t.sh[2]: jq: inaccessible or not found   mksh (`E: mksh: jq: …`)
/// ./t.sh:2: command not found: jq               zsh (`f: command not found: jq` in a function)
/// ./t.sh:3: no such file or directory: /x/jq    zsh, an absolute path
/// ./t.sh: line 2: jq: command not found         bash without its hook
/// ./t.sh: line 3: /x/jq: No such file or directory   bash, an absolute path
/// FileNotFoundError: [Errno 2] No such file or directory: 'jq'   Python's subprocess
/// Error: spawn jq ENOENT                        Node's child_process (`spawnSync` too)
/// ```
///
/// The part before the command must be a shell's: a script name and line number, or a shell's
/// name, so that a program's own message about a file (`cat: /usr/bin/jq: No such file or
/// directory`) is not taken for one. The command is a bare name or an absolute path, with no
/// white space or `:` in it. Pure.
pub(crate) fn not_found(line: &str) -> Option<&str> {
    let line = line.trim_end_matches(['\r', '\n']);
    // Python's subprocess (the last line of its traceback) and Node's child_process.
    if let Some(name) = line
        .strip_prefix("FileNotFoundError: [Errno 2] No such file or directory: '")
        .and_then(|rest| rest.strip_suffix('\''))
        .or_else(|| {
            let rest = line.trim_start();
            rest.strip_prefix("Error: spawn ")
                .or_else(|| rest.strip_prefix("Error: spawnSync "))
                .and_then(|rest| rest.strip_suffix(" ENOENT"))
        })
    {
        return command_word(name, false).then_some(name);
    }
    // zsh: the message comes before the command.
    for zsh in [": command not found: ", ": no such file or directory: "] {
        if let Some((prefix, name)) = line.split_once(zsh) {
            let abs = zsh.starts_with(": no");
            return (zsh_prefix(prefix) && command_word(name, abs)).then_some(name);
        }
    }
    for (suffix, abs_only) in [
        (": inaccessible or not found", false),
        (": command not found", false),
        (": not found", false),
        (": No such file or directory", true),
    ] {
        if let Some(rest) = line.strip_suffix(suffix) {
            let (prefix, name) = rest.rsplit_once(": ")?;
            let prefix = prefix.strip_prefix("E: ").unwrap_or(prefix);
            let ok = shell_prefix(prefix) && command_word(name, abs_only);
            return ok.then_some(name);
        }
    }
    None
}

/// `<script>: <n>`, `<script>: line <n>`, `<script>:<n>`, `<script>[<n>]`, or a shell's name.
fn shell_prefix(prefix: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let Some(inner) = prefix.strip_suffix(']')
        && let Some((script, n)) = inner.rsplit_once('[')
    {
        return !script.is_empty() && digits(n);
    }
    if let Some((script, n)) = prefix.rsplit_once(':') {
        let n = n.strip_prefix(' ').unwrap_or(n);
        let n = n.strip_prefix("line ").unwrap_or(n);
        return !script.is_empty() && digits(n);
    }
    is_shell_name(prefix)
}

/// zsh's prefix: `<script>:<n>`, `zsh`, or the name of the function it was in.
fn zsh_prefix(prefix: &str) -> bool {
    !prefix.is_empty() && !prefix.contains(char::is_whitespace)
}

fn is_shell_name(s: &str) -> bool {
    SHELLS.contains(&s.rsplit('/').next().unwrap_or(s))
}

/// A bare command name, or an absolute path (`abs_only`: only a path).
fn command_word(name: &str, abs_only: bool) -> bool {
    !name.is_empty()
        && !name.contains(|c: char| c.is_whitespace() || c == ':' || c.is_control())
        && if abs_only {
            name.starts_with('/')
        } else {
            name.starts_with('/') || !name.contains('/')
        }
}

/// Where the host keeps programs a script may name by absolute path: the config's `bin_path` and
/// the usual directories. A path elsewhere (`/tmp/x`, `/proc/…`) is not looked at.
const BIN_DIRS: &[&str] = &[
    "/bin",
    "/sbin",
    "/usr/bin",
    "/usr/sbin",
    "/usr/local/bin",
    "/usr/local/sbin",
];

/// What a run's shell messages are judged against.
#[derive(Clone)]
pub(crate) struct Judge {
    pub(crate) rules: CliRules,
    /// The run's programs (wrapped names): a name the run has is not "undeclared".
    pub(crate) names: std::collections::BTreeSet<String>,
}

/// A run's [`Judge`] and where its reports go.
pub(crate) struct RunJudge {
    judge: Judge,
    on_report: OnReport,
}

impl RunJudge {
    /// The script's stderr, read through this run's judge.
    pub(crate) fn watch<R: Read>(self, stderr: R) -> StderrWatch<R> {
        StderrWatch::new(stderr, self.judge, self.on_report)
    }
}

impl Judge {
    /// The run's rules and programs, as the plan has them.
    pub(crate) fn for_run(
        rules: &CliRules,
        exec: &super::ExecPlan,
        on_report: OnReport,
    ) -> crate::error::SetupResult<RunJudge> {
        Ok(RunJudge {
            judge: Judge {
                rules: rules.clone(),
                names: exec.programs.iter().map(|(n, _)| n.clone()).collect(),
            },
            on_report,
        })
    }

    /// The denial a shell's message about `word` amounts to: a command the run does not have,
    /// the host does (`on_host` for a bare name; for an absolute path, its own file, in a
    /// program directory, executable), and the band does not allow with any arguments. Pure but
    /// for `on_host` and `is_program`.
    pub(crate) fn call(
        &self,
        word: &str,
        on_host: &dyn Fn(&str) -> bool,
        is_program: &dyn Fn(&Path) -> bool,
    ) -> Option<CliCall> {
        let name = if word.starts_with('/') {
            let path: PathBuf = Path::new(word).components().collect();
            let dir = path.parent()?;
            let in_bin = BIN_DIRS.iter().any(|d| Path::new(d) == dir)
                || self.rules.host_search().iter().any(|d| d == dir);
            if !in_bin || !is_program(&path) {
                return None;
            }
            path.file_name()?.to_str()?.to_string()
        } else {
            word.to_string()
        };
        if self.names.contains(&name) {
            return None;
        }
        let mut call = shim::undeclared_call(&self.rules, &[name], on_host)?;
        call.argv = vec![word.to_string()];
        call.source = Some(CallSource::NotFoundMessage);
        Some(call)
    }

    /// [`Judge::call`] with the host's own lookups.
    fn on_host(&self, word: &str) -> Option<CliCall> {
        let host =
            |name: &str| super::bins::resolve_binary(name, self.rules.host_search()).is_some();
        let is_program = |p: &Path| {
            use std::os::unix::fs::PermissionsExt;
            fs_err::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        };
        self.call(word, &host, &is_program)
    }
}

/// The script's stderr, read through: every byte passes unchanged; each complete line that is a
/// shell's "not found" message for a command the band does not allow is reported.
pub(crate) struct StderrWatch<R> {
    inner: R,
    judge: Judge,
    on_report: OnReport,
    line: Vec<u8>,
    /// The current line is longer than [`MAX_LINE`]: skipped to its end.
    skipping: bool,
    /// Reports of lines passed on by the last read, sent at the next one: after the line itself
    /// (a shell may write its message in pieces; the report never splits it on a terminal).
    pending: Vec<CliCall>,
}

impl<R: Read> StderrWatch<R> {
    pub(crate) fn new(inner: R, judge: Judge, on_report: OnReport) -> StderrWatch<R> {
        StderrWatch {
            inner,
            judge,
            on_report,
            line: Vec::new(),
            skipping: false,
            pending: Vec::new(),
        }
    }

    fn scan(&mut self, bytes: &[u8]) {
        for part in bytes.split_inclusive(|b| *b == b'\n') {
            let ends = part.last() == Some(&b'\n');
            if !self.skipping {
                if self.line.len() + part.len() > MAX_LINE + 1 {
                    self.skipping = true;
                    self.line.clear();
                } else {
                    self.line.extend_from_slice(part);
                }
            }
            if ends {
                self.end_line();
            }
        }
    }

    fn end_line(&mut self) {
        if !self.skipping
            && let Ok(text) = std::str::from_utf8(&self.line)
            && let Some(word) = not_found(text)
            && let Some(call) = self.judge.on_host(word)
        {
            self.pending.push(call);
        }
        self.line.clear();
        self.skipping = false;
    }
}

/// The pipe it reads, for `poll(2)` (the run's pipes are served by one thread).
impl<R: std::os::fd::AsFd> std::os::fd::AsFd for StderrWatch<R> {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

impl<R: Read> Read for StderrWatch<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        for call in self.pending.drain(..) {
            (self.on_report)(Report::Call(call));
        }
        let n = self.inner.read(buf)?;
        if n == 0 {
            // A last line without its newline.
            if !self.line.is_empty() {
                self.end_line();
            }
            for call in self.pending.drain(..) {
                (self.on_report)(Report::Call(call));
            }
        } else {
            self.scan(&buf[..n]);
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use pretty_assertions::assert_eq;

    use super::*;

    /// Each shell's real message (run on Debian 12: dash 0.5.12, busybox 1.35, zsh 5.9, mksh 59c,
    /// posh 0.14.1, bash 5.2), from a script and from `-c`.
    #[test]
    fn every_shells_not_found_message_names_its_command() {
        for (line, want) in [
            ("./t.sh: 2: nosuchprog-x: not found", Some("nosuchprog-x")),
            (
                "/skill/scripts/a.sh: 3: /usr/bin/jq: not found",
                Some("/usr/bin/jq"),
            ),
            ("dash: 1: jq: not found", Some("jq")),
            ("./t.sh: line 2: jq: not found", Some("jq")),
            ("sh: jq: not found", Some("jq")),
            ("ash: jq: not found", Some("jq")),
            ("./t.sh:2: jq: not found", Some("jq")),
            ("posh: jq: not found", Some("jq")),
            ("E: ./t.sh[2]: jq: inaccessible or not found", Some("jq")),
            ("E: mksh: jq: inaccessible or not found", Some("jq")),
            ("./t.sh:2: command not found: jq", Some("jq")),
            ("f: command not found: jq", Some("jq")),
            ("zsh:1: command not found: jq", Some("jq")),
            (
                "./t.sh:3: no such file or directory: /usr/bin/jq",
                Some("/usr/bin/jq"),
            ),
            ("./t.sh: line 2: jq: command not found", Some("jq")),
            ("bash: line 1: jq: command not found", Some("jq")),
            (
                "./t.sh: line 3: /usr/bin/jq: No such file or directory\n",
                Some("/usr/bin/jq"),
            ),
        ] {
            assert_eq!(not_found(line), want, "{line}");
        }
    }

    #[test]
    fn other_lines_are_not_not_found_messages() {
        for line in [
            "",
            "not found",
            "jq: not found",
            "cat: /usr/bin/jq: No such file or directory",
            "./t.sh: line 3: jq: No such file or directory",
            "grep: x: not found",
            "./t.sh: 2: two words: not found",
            "./t.sh: 2: ./bin/tool: not found",
            "./t.sh: 2: bin/tool: not found",
            "band: jq: command not available in this sandbox",
            "env: ‘uname’: No such file or directory",
            "xargs: uname: No such file or directory",
            "./t.sh:2: command not found: two words",
            "./t.sh: x: jq: not found",
            "FileNotFoundError: [Errno 2] No such file or directory: 'data/in.csv'",
            "FileNotFoundError: [Errno 2] No such file or directory: 'a b'",
            "OSError: [Errno 2] No such file or directory: 'jq'",
            "Error: spawn jq EACCES",
        ] {
            assert_eq!(not_found(line), None, "{line:?}");
        }
    }

    fn judge() -> Judge {
        let rules = CliRules::new(
            &["jq -r *".to_string()],
            &["curl *".to_string()],
            &["cat".to_string()],
        )
        .unwrap_or_else(|e| panic!("{e}"))
        .with_host_search(vec![PathBuf::from("/opt/tools/bin")]);
        Judge {
            rules,
            names: ["jq".to_string(), "cat".to_string()].into(),
        }
    }

    #[test]
    fn a_host_program_the_band_does_not_allow_is_a_denial_with_its_command_only() {
        let host = |n: &str| ["uname", "curl", "jq", "cat", "tool"].contains(&n);
        let prog = |p: &Path| {
            [
                "/usr/bin/uname",
                "/usr/bin/jq",
                "/opt/tools/bin/tool",
                "/tmp/uname",
            ]
            .contains(&p.to_str().unwrap_or(""))
        };
        let j = judge();
        let call = |w: &str| j.call(w, &host, &prog);
        let shell = |argv: &str, rule: Option<&str>| {
            Some(CliCall {
                argv: vec![argv.to_string()],
                allowed: false,
                rule: rule.map(String::from),
                source: Some(CallSource::NotFoundMessage),
            })
        };
        assert_eq!(call("uname"), shell("uname", None));
        assert_eq!(
            call("curl"),
            shell("curl", Some("curl *")),
            "a deny rule decides"
        );
        assert_eq!(call("/usr/bin/uname"), shell("/usr/bin/uname", None));
        assert_eq!(call("/usr//bin/./uname"), shell("/usr//bin/./uname", None));
        assert_eq!(
            call("/opt/tools/bin/tool"),
            shell("/opt/tools/bin/tool", None)
        );
        // Not on the host, declared (the run has it), or not in a program directory.
        assert_eq!(call("no-such-tool"), None);
        assert_eq!(call("jq"), None);
        assert_eq!(call("/usr/bin/jq"), None);
        assert_eq!(call("/tmp/uname"), None);
        assert_eq!(call("/usr/bin/perl"), None, "no such file on the host");
        assert_eq!(call("cat"), None);
    }

    #[test]
    fn the_watch_passes_every_byte_and_reports_lines_split_across_reads() {
        // A reader that returns 5 bytes at a time.
        struct Slow(std::io::Cursor<Vec<u8>>);
        impl Read for Slow {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = buf.len().min(5);
                self.0.read(&mut buf[..n])
            }
        }
        let text = format!(
            "hello\n./a.sh: 2: uname: not found\n{}\nb.sh: 3: no-such-xyz: not found\n/x: 9: uname: not found",
            "y".repeat(MAX_LINE * 2)
        );
        let seen = Arc::new(Mutex::new(Vec::new()));
        let seen2 = Arc::clone(&seen);
        let on: OnReport = Arc::new(move |r| seen2.lock().unwrap().push(r));
        // `uname` is on every host, and not among the judge's names: reported, twice (the last
        // line has no newline); the line over MAX_LINE and the name no host has are not.
        let mut j = judge();
        j.rules = j
            .rules
            .with_host_search(vec![PathBuf::from("/bin"), PathBuf::from("/usr/bin")]);
        let mut w = StderrWatch::new(Slow(std::io::Cursor::new(text.clone().into_bytes())), j, on);
        let mut out = Vec::new();
        w.read_to_end(&mut out).unwrap();
        assert_eq!(out, text.as_bytes(), "stderr passes unchanged");
        let seen = seen.lock().unwrap();
        let argvs: Vec<_> = seen
            .iter()
            .map(|r| match r {
                Report::Call(c) => (c.argv.clone(), c.source),
                other => panic!("{other:?}"),
            })
            .collect();
        let uname = (vec!["uname".to_string()], Some(CallSource::NotFoundMessage));
        assert_eq!(argvs, vec![uname.clone(), uname]);
    }
}
