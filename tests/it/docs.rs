//! The examples in the docs are run, so they stay true.
//!
//! Every ```` ```console ```` block of `README.md`, `CONTRIBUTING.md` and `docs/*.md` is a
//! session: a line `$ <command>` runs `<command>` with `sh -c`; the lines after it, up to the
//! next `$ ` line, are its expected stdout (stderr is not compared: write `2>&1` to show it).
//! They are matched with snapbox, whose wildcards the docs use:
//!
//! - `...` on a line of its own matches any number of lines; `[..]` inside a line matches any
//!   text on that line (timings, run ids);
//! - `? N` as the last line of an expectation is the expected exit code (default 0).
//!
//! The blocks of one file run in order in one scratch folder holding a copy of `skills/`, with
//! the built `band` first on `PATH`. They run the sandbox, so the test is privileged.
//!
//! (trycmd reads the same blocks but runs each command without a shell; the docs' examples use
//! pipes, redirections and `2>&1`, so the commands run with `sh -c` here.)

use std::path::PathBuf;
use std::process::Command;

use band_test::{Output, copy_dir};
use snapbox::{Assert, IntoData};

use crate::common::{bin, repo, sandbox_missing};

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

/// The expected stdout of a step as snapbox data (lines joined, wildcards kept).
fn expected_text(expected: &[String]) -> String {
    expected.iter().map(|l| format!("{l}\n")).collect()
}

/// Does `stdout` match the expected lines? `Err` holds snapbox's diff.
fn matches(expected: &[String], stdout: &str) -> Result<(), String> {
    Assert::new()
        .normalize_paths(false)
        .try_eq(
            Some(&"stdout"),
            stdout.into_data(),
            expected_text(expected).into_data(),
        )
        .map_err(|e| e.to_string())
}

fn doc_files() -> Vec<PathBuf> {
    let mut files = vec![repo().join("README.md"), repo().join("CONTRIBUTING.md")];
    let mut docs: Vec<PathBuf> = fs_err::read_dir(repo().join("docs"))
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
    assert!(matches(&s[0].expected, "out 12 ms\na\nb\nend\n").is_ok());
    assert!(matches(&s[0].expected, "out  ms\nend\n").is_ok());
    assert!(matches(&s[0].expected, "out 12 ms\nend\nmore\n").is_err());
    assert!(matches(&s[0].expected, "out 12 s\nend\n").is_err());
    let pattern = ["a [..] b [..] c".to_string()];
    assert!(matches(&pattern, "a 1 b 2 c\n").is_ok());
    assert!(matches(&pattern, "a 1 c\n").is_err());
    assert!(matches(&[], "").is_ok());
}

#[test]
fn privileged_console_examples_in_the_docs_are_true() {
    band_test::privileged!(sandbox_missing());
    let band = bin();
    let path = format!(
        "{}:{}",
        band.bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = 0;
    let mut failures = Vec::new();
    for file in doc_files() {
        let Ok(text) = fs_err::read_to_string(&file) else {
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
            let mut sh = Command::new("sh");
            sh.args(["-c", &step.command]).current_dir(scratch.path());
            band.apply(&mut sh);
            sh.env("PATH", &path);
            let out = Output::of(&mut sh);
            ran += 1;
            let matched = matches(&step.expected, &out.stdout);
            if out.code != step.code || matched.is_err() {
                failures.push(format!(
                    "{}: `{}`\nexit {} (expected {})\n{}\n--- stderr\n{}",
                    step.at,
                    step.command,
                    out.code,
                    step.code,
                    matched
                        .err()
                        .unwrap_or_else(|| format!("--- stdout\n{}", out.stdout)),
                    out.stderr
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(ran >= 10, "only {ran} console commands in the docs");
}
