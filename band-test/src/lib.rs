//! What band's integration tests and benches share: running `band` in the test environment
//! ([`Band`]), copying fixtures ([`copy_dir`]), the gate of privileged tests ([`privileged!`],
//! [`sandbox_missing`]) and whole-output snapshots with stable filters ([`band_snapshot!`]).
//!
//! A test helper fails by panicking with a message that says what broke.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

#[doc(hidden)]
pub use insta;

pub mod netlab;

/// The variable that turns a skipped privileged test into a failure
/// (`band::proto::env::TEST_MUST_RUN`; `tests/it` checks they agree).
pub const MUST_RUN: &str = "BAND_TEST_MUST_RUN";

/// The state directory every test shares: the uid pool is per state directory, and two pools on
/// one machine would hand out the same uids.
pub const STATE_DIR: &str = "/run/band-test";

/// A config file that does not exist: band's defaults, whatever `~/.config/band` holds.
pub const NO_CONFIG: &str = "/nonexistent/band-test-config.toml";

/// Is `BAND_TEST_MUST_RUN=1` set?
pub fn must_run() -> bool {
    std::env::var_os(MUST_RUN).is_some_and(|v| v == "1")
}

/// Is this process root (effective uid 0)?
pub fn is_root() -> bool {
    fs_err::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2))
        == Some("0")
}

/// `Some(reason)` when the sandbox cannot run here: not root, or no bubblewrap.
pub fn sandbox_missing() -> Option<String> {
    if !is_root() {
        return Some("not root".into());
    }
    if !Path::new("/usr/bin/bwrap").exists() {
        return Some("bubblewrap is not installed (/usr/bin/bwrap)".into());
    }
    None
}

/// The path of the function it is written in, as [`std::any::type_name`] spells it
/// (`it::cancel::privileged_ctrl_c_cancels_the_run_and_records_it`): a test's own name, which no
/// one has to copy into a string literal.
#[macro_export]
macro_rules! test_name {
    () => {{
        fn f() {}
        let name = ::std::any::type_name_of_val(&f);
        name.strip_suffix("::f").unwrap_or(name)
    }};
}

/// The gate of a privileged test, first in its body: returns from the test (it passes) when the
/// sandbox cannot run here, saying `skipped: <test>: <why>` ([`skip`], with [`test_name!`]), or,
/// with `BAND_TEST_MUST_RUN=1`, fails it. `privileged!()` asks [`sandbox_missing`];
/// `privileged!(missing)` takes the reason (an `Option<String>`) from the test, such as
/// [`Band::sandbox_missing`] or `(!band_test::is_root()).then(|| "not root".into())`.
#[macro_export]
macro_rules! privileged {
    () => {
        $crate::privileged!($crate::sandbox_missing())
    };
    ($missing:expr) => {
        if $crate::skip($crate::test_name!(), $missing) {
            return;
        }
    };
}

/// What [`privileged!`] does: `false` when `missing` is `None` (run); otherwise print
/// `skipped: <test>: <why>` and return `true`, or, with `BAND_TEST_MUST_RUN=1`, panic.
pub fn skip(test: &str, missing: Option<String>) -> bool {
    match missing {
        None => false,
        Some(why) if must_run() => panic!("{test}: cannot run ({why}) and {MUST_RUN} is set"),
        Some(why) => {
            eprintln!("skipped: {test}: {why}");
            true
        }
    }
}

/// Copy the tree `from` to `to` (made if missing), file modes included.
pub fn copy_dir(from: &Path, to: &Path) {
    fs_err::create_dir_all(to).unwrap();
    for e in fs_err::read_dir(from).unwrap().flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            copy_dir(&src, &dst);
        } else {
            // fs::copy copies the permission bits too.
            fs_err::copy(&src, &dst).unwrap();
        }
    }
}

/// A skill folder for a test, written by [`SkillBuilder::write`]: `SKILL.md` (its name,
/// description and text), `BAND.md` (the frontmatter after `band: <name>`), scripts with their
/// modes, the contracts in `schemas/`, and any other file with the mode it is given. A tree
/// that is malformed on purpose (a symlink, a hostile name, a folder named unlike its skill) is
/// a test's own to write, where the reader sees it.
///
/// ```text
/// let skill = SkillBuilder::new("probe")
///     .description("Probes the sandbox.")
///     .band("allow:\n  read: [in.txt]\n")
///     .script("probe.sh", "#!/bin/sh\n…")
///     .input_schema("probe", r#"{"type":"object"}"#)
///     .write(root); // root/probe
/// ```
#[derive(Debug, Clone)]
pub struct SkillBuilder {
    name: String,
    description: String,
    body: String,
    band: Option<String>,
    files: Vec<(String, u32, String)>,
}

impl SkillBuilder {
    /// The contract of a script that takes no input: an object with no properties (JSON Schema
    /// 2020-12), as [`SkillBuilder::input_schema`] text.
    pub const NO_INPUT: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false
}
"#;

    /// The skill `name`, described as "A skill of a test.", with no text, no `BAND.md` and no
    /// files yet.
    pub fn new(name: &str) -> SkillBuilder {
        SkillBuilder {
            name: name.into(),
            description: "A skill of a test.".into(),
            body: String::new(),
            band: None,
            files: Vec::new(),
        }
    }

    /// `SKILL.md`'s `description:`.
    pub fn description(mut self, text: &str) -> SkillBuilder {
        self.description = text.into();
        self
    }

    /// `SKILL.md`'s text after its frontmatter (and a blank line). Without one, `SKILL.md` ends
    /// at its frontmatter's closing `---` line.
    pub fn body(mut self, text: &str) -> SkillBuilder {
        self.body = text.into();
        self
    }

    /// `BAND.md`, whose frontmatter is `band: <name>` and then `frontmatter` (whole lines, each
    /// ending in a newline).
    pub fn band(mut self, frontmatter: &str) -> SkillBuilder {
        self.band = Some(frontmatter.into());
        self
    }

    /// `scripts/<file>`, executable (0755).
    pub fn script(self, file: &str, text: &str) -> SkillBuilder {
        self.file(&format!("scripts/{file}"), 0o755, text)
    }

    /// `schemas/input/<script>.json`.
    pub fn input_schema(self, script: &str, json: &str) -> SkillBuilder {
        self.file(&format!("schemas/input/{script}.json"), 0o644, json)
    }

    /// `schemas/output/<script>.json`.
    pub fn output_schema(self, script: &str, json: &str) -> SkillBuilder {
        self.file(&format!("schemas/output/{script}.json"), 0o644, json)
    }

    /// Any file of the skill, at `path` inside it, with `mode`.
    pub fn file(mut self, path: &str, mode: u32, text: &str) -> SkillBuilder {
        self.files.push((path.into(), mode, text.into()));
        self
    }

    /// Write the skill into `root/<name>` (made if missing); that folder.
    pub fn write(&self, root: &Path) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let dir = root.join(&self.name);
        let put = |path: &str, mode: u32, text: &str| {
            let p = dir.join(path);
            fs_err::create_dir_all(p.parent().expect("a file of the skill has a folder")).unwrap();
            fs_err::write(&p, text).unwrap();
            fs_err::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        let mut skill_md = format!(
            "---\nname: {}\ndescription: {}\n---\n",
            self.name, self.description
        );
        if !self.body.is_empty() {
            skill_md.push('\n');
            skill_md.push_str(&self.body);
        }
        put("SKILL.md", 0o644, &skill_md);
        if let Some(band) = &self.band {
            put(
                "BAND.md",
                0o644,
                &format!("---\nband: {}\n{band}---\n", self.name),
            );
        }
        for (path, mode, text) in &self.files {
            put(path, *mode, text);
        }
        dir
    }
}

/// What a finished command did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// The exit code, -1 when killed by a signal.
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// Run `cmd` to the end (its stdin empty, as `Command::output` does), killed if it has
    /// not ended within [`COMMAND_DEADLINE`]: a command that hangs fails its test, named, instead
    /// of stalling the whole suite until CI gives up.
    pub fn of(cmd: &mut Command) -> Output {
        let program = cmd.get_program().to_string_lossy().into_owned();
        let child = cmd
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("run {program}: {e}"));
        let _deadline = kill_after(&child, COMMAND_DEADLINE, &program);
        let out = child
            .wait_with_output()
            .unwrap_or_else(|e| panic!("run {program}: {e}"));
        Output {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// `(code, stdout, stderr)`.
    pub fn parts(self) -> (i32, String, String) {
        (self.code, self.stdout, self.stderr)
    }

    /// What a user sees, for a snapshot: success, exit code, stdout, stderr.
    pub fn shown(&self) -> String {
        format!(
            "success: {}\nexit_code: {}\n----- stdout -----\n{}\n----- stderr -----\n{}",
            self.code == 0,
            self.code,
            self.stdout,
            self.stderr
        )
    }
}

/// How long a command of a test may take ([`Output::of`], [`kill_after`]): far above any of the
/// suite's (an image build under TCG takes minutes).
pub const COMMAND_DEADLINE: std::time::Duration = std::time::Duration::from_secs(900);

/// How long [`wait_until`] waits before it calls a wait hung: far above any wait of the suite,
/// so that it never decides a test on a slow machine. It is no claim about how fast anything is.
pub const WAIT_LIMIT: std::time::Duration = std::time::Duration::from_secs(300);

/// Is a process of command line `cmd` (its arguments joined by spaces) running on this machine,
/// in any sandbox?
pub fn running(cmd: &str) -> bool {
    fs_err::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            let line = fs_err::read(e.path().join("cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&line).replace('\0', " ").trim_end() == cmd
        })
}

/// Poll `done` (every 50 ms) until it holds; panic saying `what` never happened if it still does
/// not after [`WAIT_LIMIT`]. What a test asserts is that `done` comes to hold at all, not how
/// soon: a wait that never ends fails its test, named, instead of stalling the suite.
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(
            start.elapsed() < WAIT_LIMIT,
            "never happened (waited {} s): {what}",
            WAIT_LIMIT.as_secs()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The run ids of the spares a warm band-server's log (`serve.log`) says were ready
/// ("spare ID ready for SKILL/SCRIPT"), in order.
pub fn spares_in(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains(" ready for "))
        .filter_map(|l| {
            l.split_whitespace()
                .skip_while(|w| *w != "spare")
                .nth(1)
                .map(String::from)
        })
        .collect()
}

/// Run `on_time_out` on a thread of its own unless the returned sender is dropped (or sent to)
/// within `limit`: a test's guard against a wait that never ends.
pub fn watchdog(
    limit: std::time::Duration,
    on_time_out: impl FnOnce() + Send + 'static,
) -> std::sync::mpsc::Sender<()> {
    let (done, wait) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(limit) {
            on_time_out();
        }
    });
    done
}

/// Kill `child` (SIGKILL) unless it has ended within `limit`, saying so on stderr with `what`;
/// the returned sender, dropped once it has ended, calls that off ([`watchdog`]).
pub fn kill_after(
    child: &std::process::Child,
    limit: std::time::Duration,
    what: &str,
) -> std::sync::mpsc::Sender<()> {
    let pid = rustix::process::Pid::from_raw(child.id() as i32);
    let what = what.to_string();
    watchdog(limit, move || {
        if let Some(pid) = pid {
            eprintln!(
                "{what} (pid {}) did not end within {} s: killed",
                pid.as_raw_nonzero(),
                limit.as_secs()
            );
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    })
}

/// The site policy file `band explain`, `lint` and `doctor` read in a test that names none:
/// never there.
pub const NO_SITE_POLICY: &str = "/nonexistent/band-test/site.md";

/// The `band` binary in the test environment: no colour, the run ledger in `data_dir` (out of
/// `$HOME`), the shared band-server state directory, a config file of the test's choosing (none
/// by default), no warm band-server (`BAND_WARM=0`), and no skills path or GitHub token from the
/// caller's environment.
#[derive(Debug, Clone)]
pub struct Band {
    exe: PathBuf,
    env: Vec<(OsString, Option<OsString>)>,
}

impl Band {
    /// `exe` is `env!("CARGO_BIN_EXE_band")` of the test; `data_dir` its `BAND_DATA_DIR`.
    pub fn new(exe: impl Into<PathBuf>, data_dir: impl AsRef<Path>) -> Band {
        Band {
            exe: exe.into(),
            env: Vec::new(),
        }
        .env("NO_COLOR", "1")
        .env("BAND_DATA_DIR", data_dir.as_ref())
        .env("BAND_SERVER_STATE_DIR", STATE_DIR)
        .env("BAND_CONFIG", NO_CONFIG)
        // No warm band-server (on by default as root): each run's band-server is its own, and
        // nothing of a run waits after it (tests/it/warm.rs asks for one).
        .env("BAND_WARM", "0")
        .env_remove("BAND_SKILLS_PATH")
        .env_remove("GITHUB_TOKEN")
        // No site policy of the machine's (`/etc/band/site.md`) in what a test sees: a test that
        // wants one names its file.
        .env("BAND_SITE_POLICY", NO_SITE_POLICY)
    }

    /// Set (or replace) one variable.
    pub fn env(mut self, key: &str, value: impl AsRef<std::ffi::OsStr>) -> Band {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.into(), Some(value.as_ref().into())));
        self
    }

    /// Remove one variable from the child's environment.
    pub fn env_remove(mut self, key: &str) -> Band {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.into(), None));
        self
    }

    /// The `band` executable.
    pub fn exe(&self) -> &Path {
        &self.exe
    }

    /// The folder of the built binaries (`band`, `band-server`, …).
    pub fn bin_dir(&self) -> &Path {
        self.exe.parent().expect("band has a folder")
    }

    /// `Some(reason)` when `band run` cannot start the real sandbox here: [`sandbox_missing`], or
    /// band-server not built next to band.
    pub fn sandbox_missing(&self) -> Option<String> {
        sandbox_missing().or_else(|| {
            let server = self.bin_dir().join("band-server");
            (!server.exists()).then(|| {
                format!(
                    "{} is not built (cargo build --workspace)",
                    server.display()
                )
            })
        })
    }

    /// Give `cmd` the test environment.
    pub fn apply(&self, cmd: &mut Command) {
        for (k, v) in &self.env {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
    }

    /// `band <args>` in `cwd`, not yet started.
    pub fn command(&self, args: &[&str], cwd: &Path) -> Command {
        let mut cmd = Command::new(&self.exe);
        cmd.args(args).current_dir(cwd);
        self.apply(&mut cmd);
        cmd
    }

    /// `band <args>` in `cwd`, run to the end.
    pub fn output(&self, args: &[&str], cwd: &Path) -> Output {
        Output::of(&mut self.command(args, cwd))
    }

    /// `band <args>` in `cwd`: `(code, stdout, stderr)`.
    pub fn run(&self, args: &[&str], cwd: &Path) -> (i32, String, String) {
        self.output(args, cwd).parts()
    }
}

/// insta filters that make band's output the same on every machine and every run: `extra`
/// first (say a test's temporary folder as `[TMP]`), then temporary paths, hashes, run ids,
/// timestamps and durations.
pub fn filters(extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = extra
        .iter()
        .map(|(from, to)| (regex_escape(from), (*to).to_string()))
        .collect();
    // tempfile's folders: /tmp/.tmpAbC123 (or under $TMPDIR)
    let tmp = std::env::temp_dir();
    let tmp = regex_escape(tmp.to_str().unwrap_or("/tmp").trim_end_matches('/'));
    out.push((format!(r"{tmp}/\.tmp[A-Za-z0-9]{{6}}"), "[TMP]".into()));
    for (from, to) in [
        // band-server's cleanup of a run another test left dead: the tests share one state
        // directory, so whether a run's stderr has this line depends on what ran beside it.
        (r"(?m)^band-server: janitor: .*\n", ""),
        // sha256 and run ids (64 and 16 lowercase hex)
        (r"\b[0-9a-f]{64}\b", "[SHA256]"),
        (r"\b[0-9a-f]{16}\b", "[RUN_ID]"),
        // 2025-03-01T12:00:00Z, 2025-03-01 12:00:00 UTC
        (
            r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?Z?( UTC)?",
            "[TIME]",
        ),
        // what took time: `12 ms`, `1.5 s` (not a limit such as `runtime 10 s`)
        (r"\b\d+ ms\b", "[DURATION]"),
        (r"\b\d+\.\d+ s\b", "[DURATION]"),
        // "setup_ms": 12, "peak_memory_bytes": 2428928
        (r#""(\w+_ms)": \d+"#, r#""$1": "[MS]""#),
        (
            r#""peak_memory_bytes": \d+"#,
            r#""peak_memory_bytes": "[BYTES]""#,
        ),
    ] {
        out.push((from.to_string(), to.to_string()));
    }
    out
}

/// The `p`-th percentile (0 < `p` <= 100) of `sorted` (ascending, not empty), by nearest rank:
/// the smallest value with at least `p` % of the values at or below it. What the benches report
/// as p50 and p95.
pub fn percentile(sorted: &[std::time::Duration], p: usize) -> std::time::Duration {
    assert!((1..=100).contains(&p), "percentile {p} is not in 1..=100");
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1]
}

/// `text` as a regex that matches it literally.
pub fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// insta settings with [`filters`]`(extra)`.
pub fn settings(extra: &[(&str, &str)]) -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    for (from, to) in filters(extra) {
        s.add_filter(&from, to);
    }
    s
}

/// A whole-output snapshot of a finished command (success, exit code, stdout and stderr), with
/// the [`filters`]; like uv's `uv_snapshot!`:
///
/// ```text
/// band_snapshot!(band.output(&["lint", "."], dir), "lint_human");
/// band_snapshot!(out, "run_human", &[(dir.to_str().unwrap(), "[WS]")]);
/// ```
#[macro_export]
macro_rules! band_snapshot {
    ($output:expr, $name:expr) => {
        $crate::band_snapshot!($output, $name, &[])
    };
    ($output:expr, $name:expr, $extra:expr) => {{
        let output: &$crate::Output = &$output;
        $crate::settings($extra).bind(|| {
            $crate::insta::assert_snapshot!($name, output.shown());
        });
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filters_hide_what_differs_between_runs_and_keep_the_rest() {
        let out = Output {
            code: 0,
            stdout: format!(
                "{}/.tmpAb12Cd/x run 0123456789abcdef {} at 2025-03-01 12:00:00 UTC\n",
                std::env::temp_dir().display(),
                "ab".repeat(32)
            ),
            stderr: "band-server: janitor: dead leases [], killed 0 process(es), removed run dirs [\"x\"], cgroups [], nftables tables []\nband: ok (263 ms: setup 1.5 s) limit 10 s\n\"setup_ms\": 3\n".into(),
        };
        settings(&[("/work/here", "[DIR]")]).bind(|| {
            insta::assert_snapshot!(out.shown(), @r#"
            success: true
            exit_code: 0
            ----- stdout -----
            [TMP]/x run [RUN_ID] [SHA256] at [TIME]

            ----- stderr -----
            band: ok ([DURATION]: setup [DURATION]) limit 10 s
            "setup_ms": "[MS]"
            "#);
        });
    }

    #[test]
    fn extra_filters_match_their_text_literally() {
        let out = Output {
            code: 2,
            stdout: "/a-b~c&d#e.f(g)/x and /a-b~c&d#eXf(g)/x\n".into(),
            stderr: String::new(),
        };
        settings(&[("/a-b~c&d#e.f(g)", "[X]")]).bind(|| {
            insta::assert_snapshot!(out.shown(), @r"
            success: false
            exit_code: 2
            ----- stdout -----
            [X]/x and /a-b~c&d#eXf(g)/x

            ----- stderr -----
            ");
        });
    }

    #[test]
    fn the_percentile_is_the_nearest_rank() {
        let ms = |v: &[u64]| -> Vec<std::time::Duration> {
            v.iter()
                .map(|&m| std::time::Duration::from_millis(m))
                .collect()
        };
        let one_to_ten = ms(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        let at = |p| percentile(&one_to_ten, p).as_millis();
        // Rank ceil(p * n / 100): the 5th of 10 for p50, the 10th for p95 (a rounded index into
        // 0..n-1 would give the 6th of 10 for p50).
        assert_eq!(
            [at(1), at(10), at(50), at(51), at(95), at(100)],
            [1, 1, 5, 6, 10, 10]
        );
        let one = ms(&[7]);
        assert_eq!(percentile(&one, 50), one[0]);
        assert_eq!(percentile(&ms(&[1, 2, 3]), 50).as_millis(), 2);
    }

    #[test]
    fn skip_runs_when_nothing_is_missing() {
        assert!(!skip("t", None));
    }

    #[test]
    fn the_skill_builder_writes_the_folder_it_describes() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let dir = SkillBuilder::new("probe")
            .description("Probes.")
            .body("Used by a test.\n")
            .band("allow:\n  read: [in.txt]\n")
            .script("probe.sh", "#!/bin/sh\n")
            .input_schema("probe", "{}")
            .write(t.path());
        assert_eq!(dir, t.path().join("probe"));
        let read = |p: &str| fs_err::read_to_string(dir.join(p)).unwrap();
        assert_eq!(
            read("SKILL.md"),
            "---\nname: probe\ndescription: Probes.\n---\n\nUsed by a test.\n"
        );
        assert_eq!(
            read("BAND.md"),
            "---\nband: probe\nallow:\n  read: [in.txt]\n---\n"
        );
        assert_eq!(read("schemas/input/probe.json"), "{}");
        let mode = |p: &str| fs_err::metadata(dir.join(p)).unwrap().permissions().mode() & 0o7777;
        assert_eq!(
            (mode("scripts/probe.sh"), mode("schemas/input/probe.json")),
            (0o755, 0o644)
        );
    }

    #[test]
    fn a_skill_without_text_ends_at_its_frontmatter_and_files_keep_their_modes() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let dir = SkillBuilder::new("bare")
            .input_schema("go", SkillBuilder::NO_INPUT)
            .file("lib/notes.sh", 0o644, "#!/bin/sh\n")
            .file("bin/tool", 0o700, "echo tool\n")
            .write(t.path());
        let read = |p: &str| fs_err::read_to_string(dir.join(p)).unwrap();
        assert_eq!(
            read("SKILL.md"),
            "---\nname: bare\ndescription: A skill of a test.\n---\n"
        );
        assert!(!dir.join("BAND.md").exists());
        let contract: serde_json::Value =
            serde_json::from_str(&read("schemas/input/go.json")).unwrap();
        assert_eq!(
            contract,
            serde_json::json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "additionalProperties": false
            })
        );
        let mode = |p: &str| fs_err::metadata(dir.join(p)).unwrap().permissions().mode() & 0o7777;
        assert_eq!((mode("lib/notes.sh"), mode("bin/tool")), (0o644, 0o700));
    }

    #[test]
    fn a_test_knows_its_own_name() {
        assert_eq!(
            crate::test_name!(),
            "band_test::tests::a_test_knows_its_own_name"
        );
    }

    #[test]
    fn the_gate_lets_the_test_run_when_nothing_is_missing() {
        let mut ran = false;
        (|| {
            crate::privileged!(None);
            ran = true;
        })();
        assert!(ran);
    }
}
