//! `band wrap`: a band and argv-style contracts for an Agent Skill (SKILL.md and scripts, no band).
//!
//! Pure: [`plan`] reads the skill and returns the files to write, the rules and where each came
//! from; the command prints or writes them. Each entry point of `scripts/` ([`crate::entry`]: a
//! file SKILL.md runs, or a program by its own say; never data, a test or an imported module)
//! gets an input schema whose only property is `args`, an array of strings
//! ([`crate::contract::is_argv_schema`]: band appends them to the script's command line), and an
//! output schema accepting any text. The band allows each script exactly as band-server starts it
//! ([`crate::launch`]: `python3 /skill/scripts/x.py *`), the programs the code it can reach calls
//! by name where that is visible statically, no network and no workspace files unless
//! `--allow-read`/`--allow-write` name them.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::json;

/// One script of the skill, as wrapped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WrappedScript {
    pub name: String,
    /// Relative to the skill root (`scripts/x.py`).
    pub entry: String,
    /// The interpreter band starts it with (`python3`, `bash`, `node`): [`crate::launch`]'s
    /// answer, its `#!` line or extension.
    pub interpreter: Option<String>,
    /// The interpreter's argument from the `#!` line (`-e` of `#!/bin/bash -e`), as band-server
    /// passes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interpreter_arg: Option<String>,
    /// The module it starts as (`scripts.x`), when SKILL.md runs it with `python -m`
    /// ([`crate::launch::By::Module`]): `python3 -m scripts.x`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// Why it is an entry point.
    pub why: String,
    /// The first line of its docstring or leading comment, if any.
    pub description: Option<String>,
    /// Programs its code calls by name (`subprocess.run(["soffice", …])`, `shutil.which("x")`, a
    /// bash script's commands), read from the entry and the modules it imports.
    pub calls: Vec<String>,
    /// Commands its code runs that band cannot read without running it ([`unseen`]), each as
    /// `file: line`.
    pub unseen: Vec<String>,
}

/// A file below `scripts/` not wrapped, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Skipped {
    pub path: String,
    pub why: String,
}

/// A file `band wrap` writes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WrapFile {
    /// Relative to the skill root.
    pub path: String,
    pub text: String,
}

/// What `band wrap` would write for a skill.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WrapPlan {
    pub skill: String,
    pub scripts: Vec<WrappedScript>,
    pub files: Vec<WrapFile>,
    /// Files below `scripts/` that are not entry points (data, tests, modules, files nothing says
    /// are programs: [`crate::entry`]), and why, said so the user knows.
    pub skipped: Vec<Skipped>,
    /// Programs not wrapped because their name or path cannot be written into a band literally
    /// ([`is_plain_name`]): each as its path, escaped ([`shown`]).
    pub refused: Vec<String>,
}

/// Access the user grants at wrap time (`--allow-read`, `--allow-write`, `--allow-net`).
#[derive(Debug, Clone, Default)]
pub struct Access {
    pub read: Vec<String>,
    pub write: Vec<String>,
    /// Hosts (`allow.net`), e.g. `api.example.com:443` or `localhost:8000`.
    pub net: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum WrapError {
    #[error("{}: no script in scripts/{}{}", .0.display(), nested(.1), outside(.2))]
    NoScripts(PathBuf, Vec<String>, Vec<String>),
    /// The folder's name is the band's name and the skill's: it must be kebab-case.
    #[error("the skill's folder name {0} is not kebab-case; band wrap names the band after it")]
    Name(String),
    /// The BAND.md drafted does not read back as exactly the band intended, or lint flags it
    /// (fail closed: nothing is written).
    #[error("the drafted BAND.md is not the band intended: {0}")]
    Draft(#[from] DraftError),
}

/// How a drafted BAND.md differs from the band intended ([`check_band_md`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DraftError {
    #[error("its frontmatter does not parse")]
    Unparsed,
    /// It reads back as other data than intended (`got`).
    #[error("it reads back as {got}, not {intended}")]
    Differs {
        got: serde_json::Value,
        intended: serde_json::Value,
    },
    /// band's parser or lint's path checks find something in it (the first finding).
    #[error("band lint flags it: {0}")]
    Flagged(crate::diag::Diagnostic),
}

impl WrapError {
    pub fn hint(&self) -> String {
        match self {
            WrapError::NoScripts(_, _, runs) if !runs.is_empty() => format!(
                "move {} into scripts/ (with what it loads, such as lib/), or add a script in scripts/ that runs /skill/{} with its arguments, then band wrap again",
                runs.iter().map(|r| shown(r)).collect::<Vec<_>>().join(", "),
                runs[0]
            ),
            WrapError::NoScripts(..) => "band wrap wraps the entry points in scripts/ and its subfolders: a file SKILL.md runs (`python scripts/x.py`), or a program by its own say (an execute bit, a `#!` line, a main guard), not a test or a module another script imports".into(),
            WrapError::Name(_) => "rename the folder: lowercase letters, digits and single hyphens (Agent Skills name their folder so)".into(),
            WrapError::Draft(_) => "nothing was written; write the band by hand (`band init` makes one)".into(),
        }
    }
}

/// `s` quoted for an error message or a line of output: control characters, quotes and
/// backslashes escaped (a name with a newline or an escape sequence shows as its text).
pub fn shown(s: &str) -> String {
    format!("`{}`", s.escape_debug())
}

/// A script name or path component band writes into a band, a pattern and a file name as it is:
/// ASCII letters, digits, `.`, `_`, `+`, `-`, not starting with `-` or `.` (no whitespace, no
/// control character, no quote, no glob character).
pub fn is_plain_name(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(['-', '.'])
        && s.len() <= 128
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-'))
}

/// `; SKILL.md runs x, which is outside it` for the files SKILL.md runs outside `scripts/`.
fn outside(files: &[String]) -> String {
    match files {
        [] => String::new(),
        [one] => format!("; SKILL.md runs {}, which is outside it", shown(one)),
        many => format!(
            "; SKILL.md runs {}, which are outside it",
            many.iter().map(|f| shown(f)).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// The files at the top of the skill (not in `scripts/`) that SKILL.md runs: a program band
/// knows how to start (`crate::launch`: an execute bit, a `#!` line, an extension) whose name stands in SKILL.md's
/// text as a path's last part (`node "$SKILL_DIR/run.js"`, `python3 run.py`, `./run.sh`).
fn run_outside_scripts(root: &Path, skill_md: &str) -> Vec<String> {
    let Ok(entries) = fs_err::read_dir(root) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|name| {
            // Read as the run reads a skill's file (no link out, no FIFO), and started as band
            // would start it.
            let program =
                crate::skillfs::read_head(root, Path::new(name), 256).is_ok_and(|(head, mode)| {
                    crate::launch::launch(Path::new(name), mode, &head)
                        != crate::launch::Launch::Unknown
                });
            program
                && !name.eq_ignore_ascii_case("SKILL.md")
                && skill_md.match_indices(name.as_str()).any(|(at, _)| {
                    let before = skill_md[..at].chars().next_back();
                    let after = skill_md[at + name.len()..].chars().next();
                    before.is_none_or(|c| c.is_whitespace() || matches!(c, '/' | '"' | '\'' | '`'))
                        && after.is_none_or(|c| {
                            !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
                        })
                })
        })
        .collect();
    out.sort();
    out
}

fn nested(files: &[String]) -> String {
    if files.is_empty() {
        String::new()
    } else {
        let files: Vec<String> = files.iter().map(|f| f.escape_debug().to_string()).collect();
        format!(
            " (below it: {}, none of them an entry point band can wrap: data, a test, a module, no `#!` line or main guard, or a name band cannot write literally)",
            files.join(", ")
        )
    }
}

/// The first line of a script's description: a Python module docstring, else the first comment
/// after the `#!` line. Skipped: a coding line, a PEP 723 block (`# /// script` … `# ///`), a
/// shell option line (`set -e`, `set -euo pipefail`) and a comment just above one (`# Exit on
/// error`), a linter directive (`# shellcheck …`, `// @ts-check`, `"use strict"`), and a comment
/// block that is a copyright or licence header (`# Copyright (c) …`, `/* SPDX-License-Identifier:
/// … */`). A comment block's first line with words is its description (`/**` alone is not).
pub fn description(text: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().skip_while(|l| l.starts_with("#!")).collect();
    let is_set =
        |l: &str| l.trim_start().starts_with("set -") || l.trim_start().starts_with("set -o");
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i].trim();
        if l.starts_with("# /// ") {
            // A PEP 723 block: to its closing `# ///`.
            i += 1;
            while i < lines.len() && lines[i].trim() != "# ///" {
                i += 1;
            }
            i += 1;
            continue;
        }
        let directive = l.starts_with("# -*-")
            || l.starts_with("# shellcheck")
            || l.starts_with("// @ts-")
            || l.starts_with("# type:")
            || l.starts_with("# noqa")
            || matches!(
                l,
                "\"use strict\";" | "'use strict';" | "\"use strict\"" | "'use strict'"
            );
        let above_set = l.starts_with('#') && lines.get(i + 1).is_some_and(|n| is_set(n));
        if l.is_empty() || directive || is_set(l) || above_set {
            i += 1;
            continue;
        }
        if let Some(doc) = docstring(&lines[i..]) {
            return doc;
        }
        let block = comment_block(&lines[i..]);
        let words: Vec<String> = block
            .iter()
            .map(|l| uncomment(l))
            .filter(|l| !l.is_empty())
            .collect();
        if block.is_empty() || !words.iter().any(|w| is_licence_line(w)) {
            return words.into_iter().next();
        }
        i += block.len();
    }
    None
}

/// A Python docstring starting `body`: `Some(its first line)`, `Some(None)` when it is empty.
fn docstring(body: &[&str]) -> Option<Option<String>> {
    let first = body.first()?.trim();
    for quote in ["\"\"\"", "'''"] {
        if let Some(rest) = first
            .strip_prefix(quote)
            .or_else(|| first.strip_prefix('r').and_then(|f| f.strip_prefix(quote)))
        {
            let line = rest.split(quote).next().unwrap_or(rest).trim();
            let line = if line.is_empty() {
                body.get(1).map_or("", |l| l.trim())
            } else {
                line
            };
            return Some(Some(line.to_string()).filter(|l| !l.is_empty()));
        }
    }
    None
}

/// The comment lines starting `body`: `#` or `//` lines, or a `/* … */` block to its end.
fn comment_block<'a>(body: &[&'a str]) -> Vec<&'a str> {
    let first = body.first().map_or("", |l| l.trim());
    if first.starts_with("/*") {
        let end = body
            .iter()
            .position(|l| l.contains("*/"))
            .map_or(body.len(), |e| e + 1);
        return body[..end].to_vec();
    }
    let Some(marker) = ["#", "//"].into_iter().find(|m| first.starts_with(m)) else {
        return Vec::new();
    };
    body.iter()
        .take_while(|l| l.trim().starts_with(marker))
        .copied()
        .collect()
}

/// A comment line without its markers (`#`, `//`, `/**`, `*`, `*/`), trimmed.
fn uncomment(line: &str) -> String {
    let l = line.trim();
    let l = ["/**", "/*", "//", "#", "*"]
        .iter()
        .find_map(|c| l.strip_prefix(c))
        .unwrap_or(l);
    l.trim().trim_end_matches("*/").trim().to_string()
}

/// A line of a copyright or licence header.
fn is_licence_line(l: &str) -> bool {
    let lower = l.to_ascii_lowercase();
    lower.starts_with("copyright")
        || lower.starts_with("(c) ")
        || lower.starts_with("© ")
        || lower.contains("spdx-license-identifier")
        || lower.starts_with("licensed under")
        || lower.contains("all rights reserved")
}

/// Shell builtins and keywords: the first word of a command that runs no program.
const SHELL_WORDS: &[&str] = &[
    "if",
    "then",
    "else",
    "elif",
    "fi",
    "for",
    "while",
    "until",
    "do",
    "done",
    "case",
    "esac",
    "in",
    "function",
    "select",
    "time",
    "!",
    "{",
    "}",
    "[[",
    "]]",
    "[",
    "]",
    "coproc",
    "echo",
    "printf",
    "cd",
    "read",
    "set",
    "shift",
    "exit",
    "return",
    "test",
    "source",
    ".",
    "eval",
    "trap",
    "declare",
    "typeset",
    "local",
    "export",
    "unset",
    "true",
    "false",
    "type",
    "wait",
    "kill",
    "pwd",
    "pushd",
    "popd",
    "alias",
    "unalias",
    "let",
    "readonly",
    "getopts",
    "umask",
    "ulimit",
    "shopt",
    "break",
    "continue",
    ":",
    "mapfile",
    "readarray",
    "hash",
    "jobs",
    "fg",
    "bg",
    "disown",
    "builtin",
    "caller",
    "compgen",
    "complete",
    "enable",
    "help",
    "logout",
    "times",
    "history",
    "command",
    "exec",
    "nohup",
    "env",
    "sudo",
];

/// Programs a bash script runs: the first word of each simple command (after `;`, `&&`, `||`,
/// `|`, `&`, `$(`, a backtick, `if`/`then`/`do`…; `exec`, `nohup`, `env X=1` skipped to the
/// word they run), when it is a plain name, not a builtin or keyword, not a function the script
/// defines, not `command -v x` (a test whether `x` exists). Heredoc bodies and comments are not
/// read. Sorted, without duplicates.
pub fn bash_calls(text: &str) -> Vec<String> {
    let mut functions = Vec::new();
    let mut logical = Vec::new();
    let mut heredoc: Option<String> = None;
    let mut pending = String::new();
    // Heredoc bodies out first (their text is no code, and an apostrophe in one is no quote),
    // then what quotes hold (an `echo` text, a regex, `node -e` code: words, not commands).
    let mut code_lines = Vec::new();
    for line in text.lines() {
        if let Some(end) = &heredoc {
            if line.trim() == end {
                heredoc = None;
            }
            code_lines.push("");
            continue;
        }
        let code = strip_comment(line);
        if let Some(at) = code.find("<<")
            && !code[at..].starts_with("<<<")
        {
            let tag: String = code[at + 2..]
                .trim_start_matches('-')
                .trim_start()
                .trim_start_matches(['\'', '"'])
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !tag.is_empty() {
                heredoc = Some(tag);
            }
        }
        code_lines.push(line);
    }
    let unquoted = without_arithmetic_and_arrays(&shell_code(&code_lines.join("\n")));
    for line in unquoted.lines() {
        let code = line.to_string();
        if let Some(cont) = code.strip_suffix('\\') {
            pending.push_str(cont);
            pending.push(' ');
            continue;
        }
        pending.push_str(&code);
        let l = std::mem::take(&mut pending);
        let t = l.trim();
        let def = t.strip_prefix("function ").unwrap_or(t);
        if let Some(name) = def.split(['(', ' ', '{']).next()
            && (t.starts_with("function ") || def.contains("()"))
            && def.split('(').next().is_some_and(|n| !n.contains(' '))
        {
            functions.push(name.trim().to_string());
        }
        logical.push(l);
    }
    let mut out = Vec::new();
    for l in logical {
        // A case pattern (`Darwin)`, `start|stop)`) is no command.
        let l = match l.trim_start().split_once(')') {
            Some((pat, rest)) if !pat.contains(['(', ' ', '$', '"', '=']) => rest.to_string(),
            _ => l,
        };
        let mut s = without_expansions(&l)
            .replace("$(", "\n")
            .replace('`', "\n");
        for sep in ["&&", "||", ";", "|", "&", "(", ")"] {
            s = s.replace(sep, "\n");
        }
        for seg in s.split('\n') {
            let mut words = seg.split_whitespace().peekable();
            while let Some(w) = words.peek() {
                let assignment = w.split_once('=').is_some_and(|(k, _)| {
                    !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                });
                if assignment
                    || matches!(
                        *w,
                        "if" | "then"
                            | "else"
                            | "elif"
                            | "do"
                            | "while"
                            | "until"
                            | "!"
                            | "time"
                            | "exec"
                            | "nohup"
                            | "env"
                            | "{"
                    )
                    || w.starts_with('-')
                {
                    words.next();
                } else {
                    break;
                }
            }
            let Some(first) = words.next() else { continue };
            if first == "command" || first == "type" || first == "which" || first == "hash" {
                continue;
            }
            let name = first.rsplit('/').next().unwrap_or(first);
            if first.contains('/') && !first.starts_with('/') {
                // `./x`, `$DIR/x`: a file of the skill or the workspace, not a program by name.
                continue;
            }
            if is_plain_name(name)
                && name.starts_with(|c: char| c.is_ascii_alphabetic())
                && !SHELL_WORDS.contains(&name)
                && !functions.iter().any(|f| f == name)
            {
                out.push(name.to_string());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Where [`shell_code`] found a quoted word: its opening quote (the rest is blanked), so that a
/// quoted command word (`"$venv/bin/pip" list`) is still a word, and no name, where a space left
/// its first argument (`list`) to be taken for the program.
const QUOTED: char = '\u{1}';

/// A shell script's code as the shell runs it, for finding its commands: comments gone, and what
/// quotes hold blanked (spaces; line breaks kept; the opening quote [`QUOTED`]), but for the
/// command substitutions `$(…)` and backticks inside double quotes, which are code. A quote left
/// open blanks to the end.
fn shell_code(text: &str) -> String {
    #[derive(Clone, Copy, PartialEq)]
    enum In {
        Code,
        Single,
        Double,
    }
    // What encloses the current position: `$(` inside double quotes pushes code.
    let mut stack = vec![In::Code];
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut prev = '\n';
    while let Some(c) = chars.next() {
        let state = *stack.last().unwrap_or(&In::Code);
        let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
        match state {
            In::Code => match c {
                // A line continuation stays one, for the caller to join the lines.
                '\\' if chars.peek() == Some(&'\n') => {
                    chars.next();
                    out.push_str("\\\n");
                }
                '\\' => {
                    out.push(' ');
                    if let Some(n) = chars.next() {
                        out.push(blank(n));
                    }
                }
                '\'' => {
                    stack.push(In::Single);
                    out.push(QUOTED);
                }
                '"' => {
                    stack.push(In::Double);
                    out.push(QUOTED);
                }
                '#' if prev.is_whitespace() || prev == ';' => {
                    for n in chars.by_ref() {
                        if n == '\n' {
                            out.push('\n');
                            break;
                        }
                    }
                    prev = '\n';
                    continue;
                }
                ')' if stack.len() > 1 => {
                    stack.pop();
                    out.push(')');
                }
                '(' if prev == '$' && stack.len() > 1 => {
                    stack.push(In::Code);
                    out.push('(');
                }
                _ => out.push(c),
            },
            In::Single => {
                if c == '\'' {
                    stack.pop();
                    out.push(' ');
                } else {
                    out.push(blank(c));
                }
            }
            In::Double => match c {
                '\\' => {
                    out.push(' ');
                    if let Some(n) = chars.next() {
                        out.push(blank(n));
                    }
                }
                '"' => {
                    stack.pop();
                    out.push(' ');
                }
                '$' if chars.peek() == Some(&'(') => {
                    chars.next();
                    out.push_str("$(");
                    stack.push(In::Code);
                }
                _ => out.push(blank(c)),
            },
        }
        prev = c;
    }
    out
}

/// Shell code (its quotes already blanked: [`shell_code`]) without what holds words that are no
/// commands: the insides of arithmetic (`$(( … ))`, `(( … ))`, `for (( … ))`: variables and
/// numbers) and of array literals (`name=( … )`, `name+=( … )`: words), blanked to spaces with
/// their line breaks kept; the command substitutions in them (`$( … )`, backticks) are code and
/// stay, read the same way to a depth of [`MAX_NESTING`] (deeper, they are blanked too).
fn without_arithmetic_and_arrays(code: &str) -> String {
    blank_arithmetic_and_arrays(code, 0)
}

/// How deep [`without_arithmetic_and_arrays`] reads command substitutions nested in arithmetic
/// and arrays: a hostile script cannot make it recurse without end.
const MAX_NESTING: usize = 16;

fn blank_arithmetic_and_arrays(code: &str, depth: usize) -> String {
    let chars: Vec<char> = code.chars().collect();
    let mut out = String::with_capacity(code.len());
    let mut i = 0;
    while i < chars.len() {
        let arithmetic = chars[i] == '(' && chars.get(i + 1) == Some(&'(');
        if arithmetic || (chars[i] == '(' && array_name_before(&chars[..i])) {
            let end = closing_paren(&chars, i);
            out.push(' ');
            let mut j = i + 1;
            while j < end {
                if depth < MAX_NESTING
                    && chars[j] == '$'
                    && chars.get(j + 1) == Some(&'(')
                    && chars.get(j + 2) != Some(&'(')
                {
                    let close = closing_paren(&chars, j + 1).min(end);
                    let inner: String = chars[j + 2..close].iter().collect();
                    out.push_str("$(");
                    out.push_str(&blank_arithmetic_and_arrays(&inner, depth + 1));
                    out.push(')');
                    j = close + 1;
                } else if depth < MAX_NESTING && chars[j] == '`' {
                    let close = chars[j + 1..end]
                        .iter()
                        .position(|c| *c == '`')
                        .map_or(end, |at| j + 1 + at);
                    let inner: String = chars[j + 1..close].iter().collect();
                    out.push('`');
                    out.push_str(&blank_arithmetic_and_arrays(&inner, depth + 1));
                    out.push('`');
                    j = close + 1;
                } else {
                    out.push(if chars[j] == '\n' { '\n' } else { ' ' });
                    j += 1;
                }
            }
            if end < chars.len() {
                out.push(' ');
            }
            i = end + 1;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// Whether `before` ends with an array assignment's `name=` or `name+=`.
fn array_name_before(before: &[char]) -> bool {
    let Some((&'=', rest)) = before.split_last() else {
        return false;
    };
    let rest = rest.strip_suffix(&['+']).unwrap_or(rest);
    let name = rest
        .iter()
        .rev()
        .take_while(|c| c.is_ascii_alphanumeric() || **c == '_')
        .count();
    name > 0 && !rest[rest.len() - name].is_ascii_digit()
}

/// The index of the `)` that closes the `(` at `open` (the length when none does).
fn closing_paren(chars: &[char], open: usize) -> usize {
    let mut depth = 0usize;
    for (at, c) in chars.iter().enumerate().skip(open) {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return at;
                }
            }
            _ => {}
        }
    }
    chars.len()
}

/// A shell line without the insides of its `${…}` expansions (`${1:?usage: x NAME}`).
fn without_expansions(line: &str) -> String {
    let mut out = String::new();
    let mut depth = 0usize;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' && chars.peek() == Some(&'{') {
            chars.next();
            depth += 1;
            out.push_str("$V");
            continue;
        }
        if depth > 0 {
            if c == '{' {
                depth += 1;
            } else if c == '}' {
                depth -= 1;
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// A shell line without its comment (a `#` at a word's start, outside quotes).
fn strip_comment(line: &str) -> String {
    let mut out = String::new();
    let mut quote: Option<char> = None;
    let mut prev = ' ';
    for c in line.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == '#' && prev.is_whitespace() => break,
            None => {}
        }
        out.push(c);
        prev = c;
    }
    out
}

/// What a script's code runs that band cannot see without running it: a `subprocess` call or
/// `shell=True` whose command is neither a literal nor a variable assigned a literal in the file
/// (`Popen(args.server, shell=True)`), one line each, as written (trimmed, at most 80 chars).
pub fn unseen(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    for (n, line) in lines.iter().enumerate() {
        // A call whose arguments start on the next line (`subprocess.run(` alone) is read with
        // its first argument's line.
        let joined;
        let l = match line.trim() {
            l if l.ends_with('(') => {
                let next = lines[n + 1..]
                    .iter()
                    .map(|x| x.trim())
                    .find(|x| !x.is_empty());
                joined = format!("{l}{}", next.unwrap_or(""));
                joined.as_str()
            }
            l => l,
        };
        let opener = [
            "run(",
            "call(",
            "check_call(",
            "check_output(",
            "Popen(",
            "system(",
        ]
        .into_iter()
        .find(|o| l.contains(&format!("subprocess.{o}")) || l.contains(&format!("os.{o}")));
        let Some(o) = opener else { continue };
        let Some(at) = l.find(o) else { continue };
        let arg = l[at + o.len()..].trim_start();
        if arg.is_empty() || arg.starts_with(['[', '"', '\'']) {
            continue;
        }
        let ident: String = arg
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        // A variable assigned a command whose program is a literal (`cmd = [` then `"git",`),
        // which `calls` drafts: said nowhere else. One assigned a list that starts with anything
        // else (`[sys.executable, …]`) is a command band cannot read.
        let assigned = !ident.is_empty()
            && arg[ident.len()..].trim_start().starts_with([',', ')'])
            && assigned_values(text, &ident)
                .into_iter()
                .any(|v| literal_command(v).is_some());
        // A helper's parameter (`def sh(cmd): … run(cmd, …)`) whose every call gives a literal
        // command, which `calls` drafts.
        let helper = !ident.is_empty()
            && helpers(text).iter().any(|(name, param)| {
                *param == ident && {
                    let args = helper_call_args(text, name);
                    !args.is_empty()
                        && args
                            .iter()
                            .all(|a| literal_command(a).and_then(first_word).is_some())
                }
            });
        if !assigned && !helper {
            out.push(l.chars().take(80).collect());
        }
    }
    out
}

/// Programs a script's code names as a command, where that is visible without running it: the
/// first word of a literal list handed to `subprocess` (`run`, `call`, `check_call`,
/// `check_output`, `Popen`), `shutil.which("x")`, `os.system("x …")`, node's
/// `execFileSync("x"`/`spawn("x"`. Sorted, without duplicates.
///
/// The list may start on the next line (`run(\n    ["x", …]`), and may be a variable the call is
/// given, assigned a literal list in the same file (`cmd = ["timeout", str(t), *cmd]` … `run(cmd`):
/// each such assignment's first word counts.
pub fn calls(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let lists = ["run(", "call(", "check_call(", "check_output(", "Popen("];
    let strings = [
        "which(",
        "system(",
        "spawn(",
        "spawnSync(",
        "execFile(",
        "execFileSync(",
        "execSync(",
    ];
    let mut variables = Vec::new();
    for opener in lists.iter().chain(&strings) {
        let mut rest = text;
        while let Some(at) = rest.find(opener) {
            rest = &rest[at + opener.len()..];
            let mut arg = rest.trim_start();
            if lists.contains(opener) {
                match arg.strip_prefix('[') {
                    Some(list) => arg = list.trim_start(),
                    // A command string (`run("x -y", shell=True)`): its first word.
                    None if arg.starts_with(['"', '\'']) => {}
                    None => {
                        let ident: String = arg
                            .chars()
                            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                            .collect();
                        if !ident.is_empty() && !ident.starts_with(|c: char| c.is_ascii_digit()) {
                            variables.push(ident);
                        }
                        continue;
                    }
                }
            }
            out.extend(first_word(arg));
        }
    }
    // A helper the script defines that hands its parameter to `subprocess`
    // (`def sh(cmd): … subprocess.run(cmd, …)`): the command each call of it gives.
    for (helper, _) in helpers(text) {
        for arg in helper_call_args(text, &helper) {
            match arg.strip_prefix('[') {
                Some(list) => out.extend(first_word(list.trim_start())),
                None if arg.starts_with(['"', '\'']) => out.extend(first_word(arg)),
                None => variables.push(
                    arg.chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect(),
                ),
            }
        }
    }
    variables.retain(|v| !v.is_empty() && !v.starts_with(|c: char| c.is_ascii_digit()));
    variables.sort();
    variables.dedup();
    for var in variables {
        for value in assigned_values(text, &var) {
            out.extend(literal_command(value).and_then(first_word));
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The functions a Python script defines that run their first parameter as a command: `def
/// NAME(PARAM…):` whose body (the lines indented below it) hands `PARAM` to `subprocess`
/// (`run(PARAM`, `Popen(PARAM`, …, the argument possibly on the next line). Each as (name,
/// parameter).
fn helpers(text: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        let indent = line.len() - line.trim_start().len();
        let Some(def) = line.trim_start().strip_prefix("def ") else {
            continue;
        };
        let Some((name, params)) = def.split_once('(') else {
            continue;
        };
        let param: String = params
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let name = name.trim();
        if param.is_empty() || param == "self" || !is_plain_name(name) {
            continue;
        }
        let body: String = lines[n + 1..]
            .iter()
            .take_while(|l| l.trim().is_empty() || l.len() - l.trim_start().len() > indent)
            .map(|l| l.trim())
            .collect::<Vec<_>>()
            .join(" ");
        let runs = ["run(", "call(", "check_call(", "check_output(", "Popen("]
            .iter()
            .any(|o| {
                body.match_indices(&format!("subprocess.{o}"))
                    .any(|(at, m)| {
                        let arg = body[at + m.len()..].trim_start();
                        arg.strip_prefix(param.as_str())
                            .is_some_and(|r| r.trim_start().starts_with([',', ')']))
                    })
            });
        if runs {
            out.push((name.to_string(), param));
        }
    }
    out
}

/// What each call of the function `name` in `text` is given first (the text after `name(`, its
/// leading whitespace trimmed), its definition and method calls (`x.name(`) left out.
fn helper_call_args<'t>(text: &'t str, name: &str) -> Vec<&'t str> {
    let opener = format!("{name}(");
    text.match_indices(&opener)
        .filter(|(at, _)| {
            let before = &text[..*at];
            !before.ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.')
                && !before.trim_end_matches([' ', '\t']).ends_with("def")
        })
        .map(|(at, _)| text[at + opener.len()..].trim_start())
        .collect()
}

/// What each assignment `var = …` in `text` assigns: the text after its `=` to the end of the
/// file, its leading whitespace (line breaks too) trimmed, so a list that opens at the end of a
/// line (`cmd = [` then `"git",` below) reads on.
fn assigned_values<'t>(text: &'t str, var: &str) -> Vec<&'t str> {
    let mut out = Vec::new();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let body = line.trim_start();
        let Some(after) = body.strip_prefix(var) else {
            continue;
        };
        // The whole name (`cmd`, not `cmd2`), then `=` but not `==`.
        if after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let Some(value) = after.trim_start().strip_prefix('=') else {
            continue;
        };
        if value.starts_with('=') {
            continue;
        }
        let at = start + (line.len() - value.len());
        out.push(text[at..].trim_start());
    }
    out
}

/// The string literal (or `sys.executable`) that starts a command assigned as `value`: the first
/// item of a list (`["git", …]`, on the same line or the next), or a command string (`"git
/// log"`).
fn literal_command(value: &str) -> Option<&str> {
    let first = match value.strip_prefix('[') {
        Some(list) => list.trim_start(),
        None => value,
    };
    (first.starts_with(['"', '\'']) || is_sys_executable(first)).then_some(first)
}

/// Whether `arg` starts with Python's `sys.executable` (the interpreter running the script,
/// `[sys.executable, "-u", …]`): band starts a Python script with `python3`, so the program is
/// `python3` ([`first_word`]).
fn is_sys_executable(arg: &str) -> bool {
    arg.strip_prefix("sys.executable")
        .is_some_and(|rest| !rest.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_'))
}

/// The command name in a string literal at the start of `arg` (its first word, path stripped),
/// or `python3` for `sys.executable` ([`is_sys_executable`]).
fn first_word(arg: &str) -> Option<String> {
    if is_sys_executable(arg) {
        return Some("python3".into());
    }
    let q = arg.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let lit = &arg[1..];
    let end = lit.find(q)?;
    let word = lit[..end].split_whitespace().next().unwrap_or("");
    let name = word.rsplit('/').next().unwrap_or(word);
    is_plain_name(name).then(|| name.to_string())
}

/// `s` as a YAML double-quoted scalar that reads back as exactly `s`: `"` and `\` escaped, and
/// every character YAML does not print as itself (C0 and C1 controls, DEL, the line and
/// paragraph separators, the byte-order mark, non-characters) as a `\u`/`\U` escape. No raw line
/// break, so nothing after it can become a key.
pub fn yaml_quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        let printable = matches!(c, ' '..='~' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
            && !matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if printable => out.push(c),
            c if (c as u32) <= 0xffff => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// The input schema of a wrapped script: its argv.
pub fn input_schema(skill: &str, script: &WrappedScript) -> serde_json::Value {
    let what = script
        .description
        .clone()
        .unwrap_or_else(|| format!("{}.", script.entry));
    json!({
        "type": "object",
        "description": format!("{what} Arguments as on its command line: `band {skill}/{} -- ARGS…`.", script.name),
        "properties": {
            "args": {
                "type": "array",
                "items": {"type": "string"},
                "description": format!("The words after `{}` on its command line; workspace files by their path relative to the workspace.", script.entry)
            }
        },
        "additionalProperties": false
    })
}

/// The output schema of a wrapped script: whatever it prints. band gives stdout as text, or as
/// JSON when it is JSON (`recalc.py` prints a JSON report), and no output when it prints nothing
/// (a script that writes a file): the schema accepts each.
pub fn output_schema(script: &WrappedScript) -> serde_json::Value {
    json!({
        "type": ["string", "object", "array", "number", "boolean", "null"],
        "description": format!("What {} prints: its stdout as text (as JSON when it prints JSON; none when it prints nothing).", script.entry)
    })
}

/// The `allow.cli` rule that starts a wrapped script as band-server starts it: `python3
/// /skill/scripts/x.py *`, `bash -e /skill/scripts/x *` (its interpreter and `#!` argument), or
/// `./scripts/x *` for a program exec'd as it is.
pub fn entry_rule(s: &WrappedScript) -> String {
    match &s.interpreter {
        Some(i) => crate::launch::start_rule(
            &s.entry,
            i,
            s.interpreter_arg.as_deref(),
            s.module.as_deref(),
        ),
        None => format!("./{} *", s.entry),
    }
}

/// The `allow.cli` rules of the wrapped scripts: each script as band starts it, then each program
/// its code calls; and why each called program is there.
fn cli_rules(scripts: &[WrappedScript]) -> (Vec<String>, Vec<String>) {
    let mut cli = Vec::new();
    let mut why = Vec::new();
    for s in scripts {
        cli.push(entry_rule(s));
        for c in &s.calls {
            let rule = format!("{c} *");
            if !cli.contains(&rule) {
                cli.push(rule);
                why.push(format!("`{c}`: called by {} (read from its code)", s.entry));
            }
        }
    }
    (cli, why)
}

/// The frontmatter [`band_md`] means to write, as data: what the written file must read back as,
/// exactly ([`check_band_md`]).
pub fn intended_frontmatter(
    skill: &str,
    description: &str,
    scripts: &[WrappedScript],
    access: &Access,
) -> serde_json::Value {
    let (cli, _) = cli_rules(scripts);
    let mut allow = serde_json::Map::new();
    allow.insert("cli".into(), json!(cli));
    if !access.read.is_empty() {
        allow.insert("read".into(), json!(access.read));
    }
    if !access.write.is_empty() {
        allow.insert("write".into(), json!(access.write));
    }
    if !access.net.is_empty() {
        allow.insert("net".into(), json!(access.net));
    }
    json!({
        "band": skill,
        "description": description,
        "version": 1,
        "allow": allow,
    })
}

/// The BAND.md for the wrapped scripts (see the module's documentation). Every value from the
/// skill (its name, description, paths) is a YAML double-quoted scalar ([`yaml_quoted`]).
pub fn band_md(
    skill: &str,
    description: &str,
    scripts: &[WrappedScript],
    access: &Access,
) -> String {
    let (cli, why) = cli_rules(scripts);
    let mut t = String::new();
    t.push_str("---\n");
    t.push_str(&format!("band: {}\n", yaml_quoted(skill)));
    t.push_str(&format!("description: {}\n", yaml_quoted(description)));
    t.push_str("version: 1\n");
    t.push_str("allow:\n  cli:\n");
    for r in &cli {
        t.push_str(&format!("    - {}\n", yaml_quoted(r)));
    }
    for (key, list) in [
        ("read", &access.read),
        ("write", &access.write),
        ("net", &access.net),
    ] {
        if !list.is_empty() {
            t.push_str(&format!("  {key}:\n"));
            for p in list {
                t.push_str(&format!("    - {}\n", yaml_quoted(p)));
            }
        }
    }
    t.push_str("---\n\n");
    t.push_str(
        "Written by `band wrap` from the skill's scripts. Each script runs as its interpreter \
         starts it, with the words after `--` as its arguments (`band <skill>/<script> -- ARGS…`).",
    );
    t.push_str(if access.net.is_empty() {
        " No network."
    } else {
        " Network: only the hosts under `allow.net`."
    });
    if access.read.is_empty() && access.write.is_empty() {
        t.push_str(
            " No workspace file is readable or writable: add the files the arguments name under \
             `allow.read`/`allow.write`, or run `band learn <skill>/<script> -- ARGS…` to draft them.",
        );
    }
    t.push('\n');
    if !why.is_empty() {
        t.push_str("\nPrograms the scripts call, read from their code:\n\n");
        for w in why {
            t.push_str(&format!("- {w}\n"));
        }
    }
    t
}

/// The frontmatter of a band file's text as data (`None` without one, or when it is no YAML).
pub fn frontmatter_value(text: &str) -> Option<serde_json::Value> {
    let (yaml, _, _) = crate::manifest::split_frontmatter(text).ok()?;
    yaml_serde::from_str(yaml).ok()
}

/// The structural check of a drafted band: `text` reads back as exactly `intended` (no other
/// key, no other rule, no value changed), and band's own parser and lint's path checks find
/// nothing in it (no error, no warning). `Err` says what differs.
pub fn check_band_md(text: &str, intended: &serde_json::Value) -> Result<(), DraftError> {
    let Some(got) = frontmatter_value(text) else {
        return Err(DraftError::Unparsed);
    };
    if &got != intended {
        return Err(DraftError::Differs {
            got,
            intended: intended.clone(),
        });
    }
    match crate::lint::band_text_findings(text).into_iter().next() {
        Some(d) => Err(DraftError::Flagged(d)),
        None => Ok(()),
    }
}

/// The words of a `#!` argument band can write into a rule as they are.
fn plain_arg(a: &str) -> bool {
    a.split(' ').all(|w| {
        !w.is_empty()
            && w.chars().all(|c| {
                c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-' | '=' | '/')
            })
    })
}

/// What `band wrap` writes for the Agent Skill at `root`: schemas for each entry point
/// ([`crate::entry`]) and a BAND.md allowing each as band-server starts it and the programs the
/// code it can reach calls.
pub fn plan(root: &Path, access: &Access) -> Result<WrapPlan, WrapError> {
    use crate::entry::File;
    use crate::launch::Launch;
    let (skill, _) = crate::skill::load_skill(root);
    // The folder's name goes into the band (`band:`), the schemas and every command line shown:
    // it must be a band name, whatever bytes a folder name may hold.
    if !crate::manifest::is_kebab(&skill.name) {
        return Err(WrapError::Name(shown(&skill.name)));
    }
    // Every file below scripts/: those directly in it (named by their stem), and those in
    // subfolders (named by their path, `office-soffice`: [`crate::skill::nested_name`]).
    let mut named: Vec<(String, File)> = crate::skill::top_level_candidates(root)
        .into_iter()
        .map(|rel| {
            let f = rel
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            (
                f.split('.').next().unwrap_or(&f).to_string(),
                File::read(root, &rel),
            )
        })
        .collect();
    named.extend(
        crate::skill::nested_candidates(root)
            .into_iter()
            .map(|(name, rel)| (name, File::read(root, &rel))),
    );
    let files: Vec<File> = named.iter().map(|(_, f)| f.clone()).collect();
    let verdicts = crate::entry::classify(&files, skill.skill_md.as_ref().map(|m| m.body.as_str()));
    let mut scripts: Vec<WrappedScript> = Vec::new();
    let mut refused = Vec::new();
    let mut skipped = Vec::new();
    for ((name, f), verdict) in named.iter().zip(verdicts) {
        let entry = f.rel.to_string_lossy().into_owned();
        let why = match verdict {
            Ok(why) => why,
            Err(not) => {
                skipped.push(Skipped {
                    path: entry,
                    why: not.reason(),
                });
                continue;
            }
        };
        // How band-server starts it ([`crate::launch`]): the rule names the same program. A
        // module SKILL.md runs with `python -m` starts as `python3 -m scripts.x`.
        let skill_md = skill.skill_md.as_ref().map(|m| m.body.as_str());
        let launch = crate::launch::launch_in_skill(&f.rel, f.mode, f.text.as_bytes(), skill_md);
        let module = match &launch {
            Launch::With(i) if i.by == crate::launch::By::Module => {
                crate::launch::module_name(&f.rel)
            }
            _ => None,
        };
        let (interpreter, interpreter_arg) = match &launch {
            Launch::With(i) => (Some(i.name.clone()), i.arg.clone()),
            Launch::AsIs => match crate::launch::shebang(f.text.as_bytes()) {
                Some((n, a)) => (Some(n), a),
                None => (None, None),
            },
            Launch::Unknown => (None, None),
        };
        // A program whose name, path or interpreter band cannot write literally (a space, a
        // quote, a glob character, a control character) is not wrapped: the rule would not say
        // what it means.
        let plain_entry = f.rel.iter().all(|c| c.to_str().is_some_and(is_plain_name));
        if !is_plain_name(name)
            || !plain_entry
            || interpreter.as_deref().is_some_and(|i| !is_plain_name(i))
            || interpreter_arg.as_deref().is_some_and(|a| !plain_arg(a))
        {
            refused.push(entry);
            continue;
        }
        // The code the entry can reach: itself and the modules it imports.
        let mut calls_found = Vec::new();
        let mut unseen_found = Vec::new();
        for g in crate::entry::reach(f, &files) {
            let c = if g.language() == Some("bash") {
                bash_calls(&g.text)
            } else {
                calls(&g.text)
            };
            calls_found.extend(c);
            unseen_found.extend(
                unseen(&g.text)
                    .into_iter()
                    .map(|l| format!("{}: {l}", g.rel.display())),
            );
        }
        calls_found.sort();
        calls_found.dedup();
        scripts.push(WrappedScript {
            name: name.clone(),
            entry,
            interpreter,
            interpreter_arg,
            module,
            why: match why {
                crate::entry::Entry::Named => "SKILL.md runs it",
                crate::entry::Entry::Executable => "an execute bit",
                crate::entry::Entry::Shebang => "a #! line",
                crate::entry::Entry::MainGuard => "a main guard",
            }
            .into(),
            description: description(&f.text),
            calls: calls_found,
            unseen: unseen_found,
        });
    }
    scripts.sort_by(|a, b| a.name.cmp(&b.name));
    // Two entry points of one name (`x.py` and `x.sh`): the first is wrapped, the other said.
    let mut seen = std::collections::BTreeSet::new();
    scripts.retain(|s| {
        let first = seen.insert(s.name.clone());
        if !first {
            skipped.push(Skipped {
                path: s.entry.clone(),
                why: format!("another entry point is named `{}`", s.name),
            });
        }
        first
    });
    if scripts.is_empty() {
        let mut below: Vec<String> = skipped.into_iter().map(|s| s.path).collect();
        below.extend(refused);
        let runs = skill
            .skill_md
            .as_ref()
            .map(|m| run_outside_scripts(root, &m.body))
            .unwrap_or_default();
        return Err(WrapError::NoScripts(root.to_path_buf(), below, runs));
    }
    let description = skill
        .skill_md
        .as_ref()
        .map(|m| m.description.clone())
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| format!("The {} Agent Skill's scripts.", skill.name));
    let mut files = Vec::new();
    for s in &scripts {
        for (kind, schema) in [
            ("input", input_schema(&skill.name, s)),
            ("output", output_schema(s)),
        ] {
            files.push(WrapFile {
                path: format!("schemas/{kind}/{}.json", s.name),
                text: format!(
                    "{}\n",
                    serde_json::to_string_pretty(&schema).unwrap_or_default()
                ),
            });
        }
    }
    let text = band_md(&skill.name, &description, &scripts, access);
    let intended = intended_frontmatter(&skill.name, &description, &scripts, access);
    check_band_md(&text, &intended)?;
    files.push(WrapFile {
        path: "BAND.md".into(),
        text,
    });
    Ok(WrapPlan {
        skill: skill.name,
        scripts,
        files,
        skipped,
        refused,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn description_from_docstring_or_comment() {
        assert_eq!(
            description("#!/usr/bin/env python3\n\"\"\"Say hi.\"\"\"\n").as_deref(),
            Some("Say hi.")
        );
        assert_eq!(
            description("#!/usr/bin/env python3\n\"\"\"\nSay hi.\n\"\"\"\n").as_deref(),
            Some("Say hi.")
        );
        assert_eq!(
            description("#!/bin/sh\n# Count words.\n").as_deref(),
            Some("Count words.")
        );
        assert_eq!(description("import sys\n"), None);
        // A PEP 723 block is no description (before: "/// script").
        let pep723 = "#!/usr/bin/env -S uv run --script\n# /// script\n# requires-python = \">=3.11\"\n# dependencies = []\n# ///\n\"\"\"Draw cards.\"\"\"\n";
        assert_eq!(description(pep723).as_deref(), Some("Draw cards."));
        assert_eq!(description("# /// script\n# ///\nimport x\n"), None);
        // `set -e` and the comment above it are no description (before: "Exit on error").
        assert_eq!(
            description("#!/bin/bash\n\n# Exit on error\nset -e\n\n# Make a project.\n").as_deref(),
            Some("Make a project.")
        );
        assert_eq!(
            description("#!/bin/bash\nset -euo pipefail  # strict\n# Count.\n").as_deref(),
            Some("Count.")
        );
    }

    /// A copyright or licence header is no description (before: "Copyright (c) Microsoft
    /// Corporation."); a JSDoc block's `/**` line is none either (before: no description).
    #[test]
    fn description_skips_licence_headers_and_reads_block_comments() {
        let py = "#!/usr/bin/env python3\n# Copyright (c) Microsoft Corporation.\n# Licensed under the MIT License.\n\n\"\"\"Build the evidence map.\"\"\"\n";
        assert_eq!(description(py).as_deref(), Some("Build the evidence map."));
        let js = "#!/usr/bin/env node\n/**\n * Copyright 2025 Example LLC\n * SPDX-License-Identifier: Apache-2.0\n */\n\n/**\n * Serve the image gallery.\n *\n * Usage: node serve.js\n */\nimport http from 'node:http';\n";
        assert_eq!(description(js).as_deref(), Some("Serve the image gallery."));
        // The header and the comment right below it are one block.
        assert_eq!(
            description("// SPDX-License-Identifier: MIT\n// Sum the column.\nconst x = 1;\n"),
            None
        );
        assert_eq!(
            description("#!/bin/sh\n#\n# Count words.\n#\n").as_deref(),
            Some("Count words.")
        );
        assert_eq!(description("/* Copyright 2020 X */\nmain();\n"), None);
    }

    #[test]
    fn bash_calls_are_the_first_words_of_its_commands() {
        let sh = "#!/bin/bash\nset -e\nusage() { echo hi; }\nif ! command -v pdfinfo >/dev/null; then\n  echo no\nfi\nROOT=$(git rev-parse --show-toplevel)\nfor f in $(ls *.txt); do wc -l \"$f\" | sort -n; done\nnohup node server.cjs &\ncat <<EOF\nrm -rf /\nEOF\nX=1 od -An -N4 /dev/urandom # chmod 600 x\n./local-tool --x\n\"$DIR/other\"\nusage\nN=\"${1:?usage: tool NAME}\"\n[[ -f x ]] || { echo no >&2; exit 2; }\ncase \"$(uname -s)\" in\n  Darwin) OPEN=open ;;\nesac\nexit 0\n";
        assert_eq!(
            bash_calls(sh),
            ["cat", "git", "ls", "node", "od", "sort", "uname", "wc"]
        );
    }

    /// A command continued on the next lines (`\\` at the end) is one command: the words that
    /// start its next lines are its arguments.
    #[test]
    fn bash_calls_join_continued_lines() {
        let sh = "#!/usr/bin/env bash\nfind \"$1\" \\\n    -type d \\( \\\n        -name node_modules -o -name dist \\\n    \\) -prune -o \\\n    -type f -name '*.html' -print\ntar -c \\\n  dist | gzip\n";
        assert_eq!(bash_calls(sh), ["find", "gzip", "tar"]);
    }

    /// Arithmetic holds variables and array literals hold words, not commands; a command
    /// substitution in either is code.
    #[test]
    fn bash_calls_skip_arithmetic_and_array_words() {
        let sh = "#!/bin/bash\nN=$(( IDLE_TIMEOUT_MINUTES * 60 ))\n(( count > 0 )) && echo yes\nfor ((i=0; i<limit; i++)); do od -c x; done\narr=(alpha beta)\ndeclare -a list=(one two)\ndeps+=(\n  jq\n  curl\n)\nfiles=( $(ls *.txt) `id -u` $(echo $((n+1))) )\nx=$((total+1 + $(wc -l < f)))\necho $(( (width - pad) / 2 )) | tr 1 2\n( cd /tmp && pwd ) ; ( uname )\n";
        assert_eq!(bash_calls(sh), ["id", "ls", "od", "tr", "uname", "wc"]);
        // Nesting without end is read to a depth, not until the stack runs out.
        let deep = format!("a=({}\n", "$(x=(".repeat(50_000));
        assert_eq!(bash_calls(&deep), Vec::<String>::new());
    }

    /// What quotes hold is text, not commands: an `echo` message, a regex with `|`, `node -e`
    /// and awk code over several lines, an apostrophe in a comment or a heredoc; a command
    /// substitution inside double quotes is code.
    #[test]
    fn bash_calls_skip_what_quotes_hold() {
        let sh = "#!/bin/bash\n# don't read me\necho \"go; rsa | no s Lorem\"\ngrep -E 'a|go|rsa' f.txt\nnode -e '\nconst fs = require(\"fs\");\nfs.writeFileSync(\"x\", 1)\n'\nawk '{ print $1 | \"sort\" }' f\ncat <<EOF\nit's here\nEOF\nV=\"$(date +%s) and $(id -u)\"\necho \"escaped \\\" quote; rm x\" && tr a b\n";
        assert_eq!(
            bash_calls(sh),
            ["awk", "cat", "date", "echo", "grep", "id", "node", "tr"]
                .iter()
                .filter(|w| !SHELL_WORDS.contains(w))
                .copied()
                .collect::<Vec<_>>()
        );
        // A quoted command word is a word, not a name: its first argument is no program (sixth
        // wild trial: `list *` from `"$venv_dir/bin/pip" list`, `show *` from `"$HOME/bin/tool"
        // show`).
        let sh = "\"$venv_dir/bin/pip\" list --format=json\n'/opt/x/tool' show x | jq .\n\
                  out=\"$(\"$HOME/bin/tool\" show)\"\nif \"$flag\"; then curl -s x; fi\n";
        assert_eq!(bash_calls(sh), ["curl", "jq"]);
    }

    #[test]
    fn shell_strings_and_commands_built_at_run_time() {
        let py = "subprocess.run(\"python3 -m http.server 8765\", shell=True)\ncmd = \"npm run dev\"\nsubprocess.Popen(cmd, shell=True)\nsubprocess.Popen(args.server, shell=True)\n";
        assert_eq!(calls(py), ["npm", "python3"]);
        assert_eq!(unseen(py), ["subprocess.Popen(args.server, shell=True)"]);
        // Its arguments on the lines after the call's opening.
        let py = "def sh(cmd):\n    p = subprocess.run(\n        cmd,\n        text=True,\n    )\nsubprocess.run(\n    [\"git\", \"status\"],\n)\n";
        assert_eq!(unseen(py), ["p = subprocess.run(cmd,"]);
    }

    /// A helper that runs the list it is given (alirezarezvani's pr_analyzer, the wild trials'
    /// `sh(["git", …])`): the programs of its calls are drafted, and its `run(cmd` is no unseen
    /// command when every call gives a literal one.
    #[test]
    fn calls_through_a_helper_that_runs_its_parameter() {
        let py = "def sh(cmd, check=True):\n    \"\"\"Run.\"\"\"\n    p = subprocess.run(\n        cmd,\n        capture_output=True,\n    )\n    return p.stdout\n\ndef main():\n    out = sh([\"git\", \"diff\", \"--stat\"])\n    log = sh(\n        [\"git\", \"log\"]\n    )\n    sh(\"wc -l x\")\n    self.sh([\"rm\", \"-rf\"])\n    fresh([\"jq\"])\n";
        assert_eq!(calls(py), ["git", "wc"]);
        assert!(unseen(py).is_empty(), "{:?}", unseen(py));
        // A call given a command built at run time: still unseen.
        let py = "def sh(cmd):\n    return subprocess.check_output(cmd)\nsh([\"git\", \"log\"])\nsh(args.cmd)\n";
        assert_eq!(calls(py), ["git"]);
        assert_eq!(unseen(py), ["return subprocess.check_output(cmd)"]);
        // A function whose parameter is not the command is no helper.
        let py = "def show(name):\n    subprocess.run([\"echo\", name])\nshow([\"rm\"])\n";
        assert_eq!(calls(py), ["echo"]);
    }

    #[test]
    fn calls_read_from_the_code() {
        let py = "subprocess.run([\"soffice\", \"--headless\"])\nshutil.which('pdftotext')\nsubprocess.check_output([\"/usr/bin/qpdf\", x])\nsubprocess.run([cmd])\nos.system(\"convert a b\")\n";
        assert_eq!(calls(py), ["convert", "pdftotext", "qpdf", "soffice"]);
        assert!(calls("print('run([')").is_empty());
        // A list on the next line, and lists assigned to the variable the call is given (both
        // in Anthropic's xlsx recalc.py); a comparison is no assignment.
        let py = "subprocess.run(\n    [\"soffice\", \"--headless\"],\n)\ncmd = [\"soffice\", x]\nif p == 'Linux':\n    cmd = [\"timeout\", str(t)] + cmd\nif cmd == [\"rm\"]:\n    pass\nsubprocess.run(cmd, env=e)\nother = [\"jq\"]\n";
        assert_eq!(calls(py), ["soffice", "timeout"]);
        // A list assigned on the lines below `cmd = [` (tech-leads-club's security-ownership-map):
        // its program is drafted, and the call given the variable is no unseen command.
        let py = "cmd = [\n    \"git\",\n    \"log\",\n]\ncmd2 = [\"rm\"]\nproc = subprocess.Popen(\n    cmd,\n    stdout=PIPE,\n)\n";
        assert_eq!(calls(py), ["git"]);
        assert!(unseen(py).is_empty(), "{:?}", unseen(py));
        // A list whose program is not a literal: no program drafted, and said.
        let py = "cmd = [\n    args.tool, \"-m\", \"x\",\n]\nsubprocess.run(cmd)\n";
        assert!(calls(py).is_empty());
        assert_eq!(unseen(py), ["subprocess.run(cmd)"]);
        // `sys.executable` is the interpreter band starts the script with, `python3` (sixth wild
        // trial: `[sys.executable, "-u", str(HERE / "worker.py"), …]` was unread, and the run
        // refused the call); `sys.executable_x` is another name.
        let py = "cmd = [\n    sys.executable, \"-m\", \"x\",\n]\nsubprocess.run(cmd)\n\
                  subprocess.run([sys.executable, \"-u\", str(HERE / \"worker.py\")])\n";
        assert_eq!(calls(py), ["python3"]);
        assert!(unseen(py).is_empty(), "{:?}", unseen(py));
        assert!(calls("subprocess.run([sys.executable_x, \"y\"])\n").is_empty());
    }

    #[test]
    fn wrapped_input_schema_is_argv_style() {
        let s = WrappedScript {
            name: "x".into(),
            entry: "scripts/x.py".into(),
            interpreter: Some("python3".into()),
            interpreter_arg: None,
            module: None,
            why: "a #! line".into(),
            description: None,
            calls: vec![],
            unseen: vec![],
        };
        assert!(crate::contract::is_argv_schema(&input_schema("k", &s)));
    }

    fn script(name: &str, entry: &str) -> WrappedScript {
        WrappedScript {
            name: name.into(),
            entry: entry.into(),
            interpreter: Some("python3".into()),
            interpreter_arg: None,
            module: None,
            why: "a #! line".into(),
            description: None,
            calls: vec![],
            unseen: vec![],
        }
    }

    #[test]
    fn yaml_quoted_reads_back_as_itself_whatever_it_holds() {
        for s in [
            "plain",
            "x\ninsist:\n  net: [\"*\"]\nenv:\n  secrets: [GH_TOKEN]",
            "a \"quote\" and \\ back\\slash",
            "nel\u{85}ls\u{2028}ps\u{2029}bom\u{feff}esc\u{1b}[2Jdel\u{7f}",
            "\u{202e}bidi and 😀 and é",
            "- [x]: {y} # z & *a !tag |",
            "",
        ] {
            let yaml = format!("k: {}\n", yaml_quoted(s));
            assert!(!yaml.trim_end().contains('\n'), "{yaml}");
            let v: serde_json::Value = yaml_serde::from_str(&yaml).unwrap();
            assert_eq!(v, json!({ "k": s }), "{yaml}");
        }
    }

    #[test]
    fn a_hostile_description_stays_a_description() {
        let desc = "ok\ninsist:\n  net: [\"*\"]\nenv:\n  secrets: [GH_TOKEN]\n---\nbody";
        let scripts = [script("x", "scripts/x.py")];
        let access = Access::default();
        let text = band_md("demo", desc, &scripts, &access);
        let intended = intended_frontmatter("demo", desc, &scripts, &access);
        assert_eq!(check_band_md(&text, &intended), Ok(()));
        let v = frontmatter_value(&text).unwrap();
        assert_eq!(v["description"], desc);
        assert_eq!(
            v["allow"],
            json!({ "cli": ["python3 /skill/scripts/x.py *"] })
        );
        assert!(v.get("insist").is_none() && v.get("env").is_none(), "{v}");
    }

    #[test]
    fn the_structural_check_refuses_any_key_or_rule_not_intended() {
        let scripts = [script("x", "scripts/x.py")];
        let access = Access::default();
        let intended = intended_frontmatter("demo", "d", &scripts, &access);
        let good = band_md("demo", "d", &scripts, &access);
        assert_eq!(check_band_md(&good, &intended), Ok(()));
        // The band a name spliced into the text unquoted gave (issue 36).
        let injected = good.replacen(
            "band: \"demo\"\n",
            "band: demo\ninsist:\n  net: [\"*\"]\nenv:\n  secrets: [GH_TOKEN]\n",
            1,
        );
        let e = check_band_md(&injected, &intended).unwrap_err().to_string();
        assert!(e.contains("reads back as"), "{e}");
        // One more rule, or a rule changed, is refused the same.
        let more = good.replacen("  cli:\n", "  cli:\n    - \"curl *\"\n", 1);
        assert!(check_band_md(&more, &intended).is_err());
        // What reads back as intended but lint flags (a cli rule no command can match) is
        // refused too.
        let bad = [WrappedScript {
            interpreter: None,
            ..script("x", "scripts/../x")
        }];
        let text = band_md("demo", "d", &bad, &access);
        let e = check_band_md(&text, &intended_frontmatter("demo", "d", &bad, &access))
            .unwrap_err()
            .to_string();
        assert!(e.contains("band lint flags it"), "{e}");
    }

    #[test]
    fn plain_names_have_nothing_a_rule_or_yaml_would_read() {
        for ok in [
            "recalc",
            "fill_fields",
            "office-soffice",
            "x.py",
            "python3",
            "c++",
        ] {
            assert!(is_plain_name(ok), "{ok}");
        }
        for bad in [
            "",
            "a b",
            "*",
            "a?b",
            "[x]",
            "{a,b}",
            "x\ny",
            "-x",
            ".hidden",
            "a\"b",
            "a'b",
            "a/b",
            "\u{1b}[2J",
            "é",
        ] {
            assert!(!is_plain_name(bad), "{bad:?}");
        }
        assert!(calls("subprocess.run([\"-rf\", x])\nshutil.which(\".x\")\n").is_empty());
    }

    #[test]
    fn a_folder_not_named_as_a_band_is_refused_and_odd_script_names_are_not_wrapped() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("x\ninsist:\n  net: [\"*\"]");
        fs_err::create_dir_all(root.join("scripts")).unwrap();
        fs_err::write(root.join("scripts/a.py"), "#!/usr/bin/env python3\n").unwrap();
        match plan(&root, &Access::default()) {
            Err(WrapError::Name(n)) => assert!(n.contains("\\n"), "{n}"),
            other => panic!("{other:?}"),
        }
        let root = t.path().join("demo");
        fs_err::create_dir_all(root.join("scripts/sub")).unwrap();
        fs_err::write(root.join("scripts/a.py"), "#!/usr/bin/env python3\n").unwrap();
        fs_err::write(root.join("scripts/*.py"), "#!/usr/bin/env python3\n").unwrap();
        fs_err::write(root.join("scripts/sub/b c.py"), "#!/usr/bin/env python3\n").unwrap();
        // An interpreter's argument with a glob character: refused. (`#!/usr/bin/env py*` names
        // no program band can write, so band-server starts a `.py` by its extension: python3.)
        fs_err::write(
            root.join("scripts/sub/d.py"),
            "#!/usr/bin/env python3 -X*\n",
        )
        .unwrap();
        let p = plan(&root, &Access::default()).unwrap();
        let names: Vec<&str> = p.scripts.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a"]);
        assert_eq!(
            p.refused,
            ["scripts/*.py", "scripts/sub/b c.py", "scripts/sub/d.py"]
        );
        let band = &p.files.last().unwrap().text;
        let v = frontmatter_value(band).unwrap();
        assert_eq!(
            v["allow"],
            json!({ "cli": ["python3 /skill/scripts/a.py *"] })
        );
    }

    /// A skill whose entry SKILL.md runs sits at its root (lackeyjb/playwright-skill's `run.js`):
    /// the error names it, and the hint says what to do; a file only mentioned, or data, is not
    /// named.
    #[test]
    fn an_entry_outside_scripts_is_named_with_what_to_do() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("pw");
        fs_err::create_dir_all(root.join("lib")).unwrap();
        fs_err::write(
            root.join("SKILL.md"),
            "---\nname: pw\ndescription: d\n---\nRun `cd $SKILL_DIR && node run.js /tmp/x.js`.\nSee notes.txt and runner.json.\n",
        )
        .unwrap();
        fs_err::write(root.join("run.js"), "#!/usr/bin/env node\n").unwrap();
        fs_err::set_permissions(root.join("run.js"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        fs_err::write(root.join("notes.txt"), "x").unwrap();
        fs_err::write(root.join("runner.json"), "{}").unwrap();
        let e = plan(&root, &Access::default()).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("no script in scripts/; SKILL.md runs `run.js`, which is outside it"),
            "{e}"
        );
        assert!(
            e.hint().starts_with("move `run.js` into scripts/ (with what it loads, such as lib/), or add a script in scripts/ that runs /skill/run.js"),
            "{}",
            e.hint()
        );
    }
}
