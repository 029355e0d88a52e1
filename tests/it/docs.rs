//! The examples in the docs are run, so they stay true.
//!
//! Every ```` ```console ```` block of `README.md`, `CONTRIBUTING.md` and `docs/*.md` is a
//! session: a line `$ <command>` runs `<command>` with `sh -c`; the lines after it, up to the
//! next `$ ` line, are its expected stdout (stderr is not compared: write `2>&1` to show it).
//!
//! - `...` on a line of its own matches any number of lines; `[..]` inside a line matches any
//!   text on that line (timings, run ids);
//! - `? N` as the last line of an expectation is the expected exit code (default 0).
//!
//! The blocks of one file run in order in one scratch folder holding a copy of `skills/`, with
//! the built `band` first on `PATH`. They run the sandbox, so the test is privileged.


use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{band_exe, repo, skip};

#[derive(Debug, Clone, PartialEq, Eq)]
struct Step {
    /// Where the command is written: `file:line`.
    at: String,
    command: String,
    expected: Vec<String>,
    code: i32,
}

/// The console sessions of a Markdown text, as steps.
fn steps(file: &str, text: &str) -> Vec<Step> {
    let mut out: Vec<Step> = Vec::new();
    let mut in_console = false;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            in_console = !in_console && trimmed == "```console";
            continue;
        }
        if !in_console {
            continue;
        }
        if let Some(cmd) = line.strip_prefix("$ ") {
            out.push(Step {
                at: format!("{file}:{}", i + 1),
                command: cmd.to_string(),
                expected: Vec::new(),
                code: 0,
            });
        } else if let Some(step) = out.last_mut() {
            match line.strip_prefix("? ").map(str::parse::<i32>) {
                Some(Ok(code)) => step.code = code,
                _ => step.expected.push(line.to_string()),
            }
        }
    }
    out
}

/// Does `actual` match the line pattern `pattern` (`[..]` matches any text)?
fn line_matches(pattern: &str, actual: &str) -> bool {
    let parts: Vec<&str> = pattern.split("[..]").collect();
    if parts.len() == 1 {
        return pattern == actual;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !actual.starts_with(first)
        || !actual[first.len()..].ends_with(last)
        || actual.len() < first.len() + last.len()
    {
        return false;
    }
    let mut rest = &actual[first.len()..actual.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

/// Do the `actual` lines match the expected lines (with `...` for any number of lines)?
fn lines_match(expected: &[String], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((e, rest)) if e == "..." => {
            (0..=actual.len()).any(|skip| lines_match(rest, &actual[skip..]))
        }
        Some((e, rest)) => actual
            .split_first()
            .is_some_and(|(a, more)| line_matches(e, a) && lines_match(rest, more)),
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir").flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            copy_dir(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).expect("copy");
            std::fs::set_permissions(&dst, std::fs::metadata(&src).expect("stat").permissions())
                .expect("chmod");
        }
    }
}

fn doc_files() -> Vec<PathBuf> {
    let mut files = vec![repo().join("README.md"), repo().join("CONTRIBUTING.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .expect("docs")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

#[test]
fn the_parser_and_matchers_follow_the_rules() {
    let text =
        "x\n```console\n$ band a\nout [..] ms\n...\nend\n? 3\n$ true\n```\n```sh\n$ not me\n```\n";
    let s = steps("f.md", text);
    assert_eq!(s.len(), 2);
    assert_eq!(
        (s[0].at.as_str(), s[0].command.as_str(), s[0].code),
        ("f.md:3", "band a", 3)
    );
    assert_eq!(s[0].expected, ["out [..] ms", "...", "end"]);
    assert!(lines_match(&s[0].expected, &["out 12 ms", "a", "b", "end"]));
    assert!(lines_match(&s[0].expected, &["out  ms", "end"]));
    assert!(!lines_match(&s[0].expected, &["out 12 ms", "end", "more"]));
    assert!(!lines_match(&s[0].expected, &["out 12 s", "end"]));
    assert!(line_matches("a [..] b [..] c", "a 1 b 2 c"));
    assert!(!line_matches("a [..] b [..] c", "a 1 c"));
    assert!(lines_match(&[], &[]));
}

#[test]
fn privileged_console_examples_in_the_docs_are_true() {
    if skip("privileged_console_examples_in_the_docs_are_true") {
        return;
    }
    let bin_dir = Path::new(band_exe())
        .parent()
        .expect("bin dir")
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = 0;
    let mut failures = Vec::new();
    for file in doc_files() {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let name = file
            .strip_prefix(repo())
            .unwrap_or(&file)
            .display()
            .to_string();
        let session = steps(&name, &text);
        if session.is_empty() {
            continue;
        }
        let scratch = tempfile::tempdir().expect("tmp");
        copy_dir(&repo().join("skills"), &scratch.path().join("skills"));
        for step in session {
            let out = Command::new("sh")
                .args(["-c", &step.command])
                .current_dir(scratch.path())
                .env("PATH", &path)
                .env("NO_COLOR", "1")
                .env(
                    "BAND_DATA_DIR",
                    concat!(env!("CARGO_TARGET_TMPDIR"), "/band-data"),
                ) // the run ledger, out of $HOME
                .env("BAND_SERVER_STATE_DIR", "/run/band-test")
                .env("BAND_CONFIG", "/nonexistent/band-test-config.toml")
                .env_remove("BAND_SKILLS_PATH")
                .env_remove("GITHUB_TOKEN")
                .output()
                .expect("run sh");
            ran += 1;
            let stdout = String::from_utf8_lossy(&out.stdout);
            let actual: Vec<&str> = stdout.lines().collect();
            let code = out.status.code().unwrap_or(-1);
            if code != step.code || !lines_match(&step.expected, &actual) {
                failures.push(format!(
                    "{}: `{}`\nexit {code} (expected {})\n--- expected\n{}\n--- stdout\n{stdout}--- stderr\n{}",
                    step.at,
                    step.command,
                    step.code,
                    step.expected.join("\n"),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(ran >= 10, "only {ran} console commands in the docs");
}
