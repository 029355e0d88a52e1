//! Which files of a skill's `scripts/` are entry points (programs an agent runs), and which are
//! modules, tests or data: the one answer `band wrap` and the skill loader give (pure: a function
//! of the files' paths, modes and texts, and of SKILL.md).
//!
//! A file is an entry point when [`crate::launch`] knows how to start it (an execute bit, a `#!`
//! line, or an extension band knows an interpreter for) and:
//!
//! 1. SKILL.md names it in a run command (`python scripts/x.py`, `node scripts/y.mjs`,
//!    `bash scripts/z.sh`, `uv run {baseDir}/scripts/x.py`, `scripts/x` at a command's start,
//!    `python -m scripts.x`); or
//! 2. it is not a test (`test_*.py`, `*_test.py`, `*.test.js`, `*.spec.js`, `conftest.py`), not
//!    `__init__.py`, not a module another file of `scripts/` imports (Python `import x` /
//!    `from x import`, node `require('./x')` / `import … from './x'`) unless it has an execute
//!    bit, and it says it is a program: an execute bit, a `#!` line, a Python
//!    `if __name__ == "__main__":` guard, or a node main check (`require.main === module`,
//!    `import.meta.main`, `import.meta.url` compared with `process.argv[1]`).
//!
//! A file no interpreter band knows starts (`pyproject.toml`, `uv.lock`, `requirements.txt`, an
//! `.xml`, a `.tar.gz`) is data, never an entry point.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::launch::{Launch, launch};

/// The most of a file read to classify it (imports, main guard).
const MAX_READ: u64 = 1 << 20;

/// Why a file is an entry point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// SKILL.md names it in a run command.
    Named,
    /// It has an execute bit.
    Executable,
    /// Its `#!` line.
    Shebang,
    /// A Python `__main__` guard or a node main check.
    MainGuard,
}

/// Why a file is not an entry point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotEntry {
    /// No interpreter band knows starts it, and it has an extension: data.
    Data,
    /// No execute bit, no `#!` line, no extension: nothing says what it is.
    Unknown,
    /// A test file (or `conftest.py`).
    Test,
    /// `__init__.py`.
    Init,
    /// A module the named file (relative to the skill root) imports.
    Module(String),
    /// Nothing says it is a program: no execute bit, `#!` line or main guard, and SKILL.md does not
    /// name it.
    NoSay,
    /// Named as a copy or a model of a file, not the file (`pre-push.template`, `x.sh.sample`,
    /// `config.example`, `x.py.bak`, `x~`): what a user copies or a tool left, not what runs.
    Template,
    /// A git hook (`pre-commit`, `commit-msg`: a hook's own name, no extension), which git runs
    /// in a repository it is installed in, not an agent.
    GitHook,
    /// The Windows form of a script that has another form beside it (`x.ps1`, `x.bat` or `x.cmd`
    /// next to `x.sh`): the named file is the one band runs.
    WindowsTwin(String),
}

impl NotEntry {
    /// Why, as a line of `band wrap`'s output says it.
    pub fn reason(&self) -> String {
        match self {
            NotEntry::Data => "data: no interpreter band knows starts it".into(),
            NotEntry::Unknown => {
                "nothing says what runs it: no execute bit, no `#!` line, no extension band knows"
                    .into()
            }
            NotEntry::Test => "a test".into(),
            NotEntry::Init => "a package's __init__.py".into(),
            NotEntry::Module(by) => format!("a module: {} imports it", by.escape_debug()),
            NotEntry::NoSay => {
                "no `#!` line, execute bit or main guard, and SKILL.md does not run it".into()
            }
            NotEntry::Template => "named as a template, sample or copy, not a program".into(),
            NotEntry::GitHook => {
                "a git hook: git runs it where it is installed, not an agent".into()
            }
            NotEntry::WindowsTwin(other) => format!(
                "the Windows form of {}, which is the script band runs",
                other.escape_debug()
            ),
        }
    }
}

/// One file below `scripts/`, read.
#[derive(Debug, Clone)]
pub struct File {
    /// Relative to the skill root (`scripts/x.py`).
    pub rel: PathBuf,
    pub mode: u32,
    pub text: String,
    pub launch: Launch,
}

impl File {
    /// Read `rel` of the skill at `root` the symlink-safe way the run reads it.
    pub fn read(root: &Path, rel: &Path) -> File {
        let (head, mode) = crate::skillfs::read_head(root, rel, 256).unwrap_or_default();
        let launch = launch(rel, mode, &head);
        // Data is not read further (a large asset costs its first bytes only).
        let text = if launch == Launch::Unknown {
            String::new()
        } else {
            crate::skillfs::read_head(root, rel, MAX_READ)
                .map(|(b, _)| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default()
        };
        File {
            launch,
            rel: rel.to_path_buf(),
            mode,
            text,
        }
    }

    fn file_name(&self) -> &str {
        self.rel.file_name().and_then(|n| n.to_str()).unwrap_or("")
    }

    /// The interpreter family: `python`, `node`, `bash` (by its launch, `#!` line or extension).
    pub fn language(&self) -> Option<&'static str> {
        let name = match &self.launch {
            Launch::With(i) => i.name.clone(),
            Launch::AsIs => crate::launch::shebang(self.text.as_bytes())
                .map(|(n, _)| n)
                .or_else(|| crate::launch::by_extension(self.file_name()).map(str::to_string))?,
            Launch::Unknown => return None,
        };
        if name.starts_with("python") || name == "uv" {
            Some("python")
        } else if name == "node" || name == "bun" || name == "deno" {
            Some("node")
        } else if matches!(name.as_str(), "bash" | "sh" | "dash" | "zsh") {
            Some("bash")
        } else {
            None
        }
    }
}

/// True for a test file by its name.
/// True when a file's name says it is a model or a copy of a file rather than the file: its last
/// extension is one of the conventions for that (`.template`, `.tmpl`, `.tpl`, `.sample`,
/// `.example`, `.dist`, `.bak`, `.orig`, `.old`), or it ends in `~` (an editor's backup).
pub fn is_template(file_name: &str) -> bool {
    const MARKS: [&str; 9] = [
        "template", "tmpl", "tpl", "sample", "example", "dist", "bak", "orig", "old",
    ];
    file_name.ends_with('~')
        || file_name.rsplit_once('.').is_some_and(|(stem, ext)| {
            !stem.is_empty() && MARKS.iter().any(|m| ext.eq_ignore_ascii_case(m))
        })
}

pub fn is_test(file_name: &str) -> bool {
    let stem = file_name.split('.').next().unwrap_or(file_name);
    file_name == "conftest.py"
        || (file_name.ends_with(".py") && (stem.starts_with("test_") || stem.ends_with("_test")))
        || [".test.", ".spec."].iter().any(|m| file_name.contains(m))
}

/// True when a file's text says it is a program: a Python `__main__` guard, or a node main check.
pub fn has_main_guard(text: &str) -> bool {
    text.lines().any(|l| {
        let l: String = l.chars().filter(|c| !c.is_whitespace()).collect();
        let l = l.replace('\'', "\"");
        l.starts_with("if__name__==\"__main__\"") || l.starts_with("if\"__main__\"==__name__")
    }) || text.contains("require.main === module")
        || text.contains("require.main == module")
        || text.contains("import.meta.main")
        || (text.contains("import.meta.url") && text.contains("process.argv[1]"))
}

/// The files of `files` each file imports (paths relative to the skill root, among `files`).
pub fn imports(file: &File, all: &BTreeSet<PathBuf>) -> BTreeSet<PathBuf> {
    let dir = file.rel.parent().unwrap_or(Path::new("scripts"));
    let mut out = BTreeSet::new();
    match file.language() {
        Some("python") => {
            for module in python_imports(&file.text) {
                let (dots, name) =
                    module.split_at(module.len() - module.trim_start_matches('.').len());
                let path = name.replace('.', "/");
                let mut bases = vec![dir.to_path_buf()];
                if dots.is_empty() {
                    bases.push(PathBuf::new());
                    bases.push(PathBuf::from("scripts"));
                }
                for base in bases {
                    for cand in [
                        base.join(format!("{path}.py")),
                        base.join(&path).join("__init__.py"),
                    ] {
                        if all.contains(&cand) {
                            out.insert(cand);
                        }
                    }
                }
            }
        }
        Some("node") => {
            for spec in node_imports(&file.text) {
                let joined = normalize(&dir.join(&spec));
                for ext in ["", ".js", ".mjs", ".cjs", "/index.js"] {
                    let cand = PathBuf::from(format!("{}{ext}", joined.display()));
                    if all.contains(&cand) {
                        out.insert(cand);
                        break;
                    }
                }
            }
        }
        _ => {}
    }
    out.remove(&file.rel);
    out
}

/// `a/./b/../c` → `a/c` (lexically).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// The modules a Python text imports, as written: `a.b`, `.x` (relative), `pkg.name` for
/// `from pkg import name` (and `pkg` itself).
fn python_imports(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let ident = |w: &str| {
        w.trim_matches(|c| c == '(' || c == ')' || c == ',')
            .to_string()
    };
    for line in text.lines() {
        let l = line.trim();
        if let Some(rest) = l.strip_prefix("import ") {
            for part in rest.split(',') {
                if let Some(m) = part.split_whitespace().next() {
                    out.push(ident(m));
                }
            }
        } else if let Some(rest) = l.strip_prefix("from ") {
            let mut words = rest.split_whitespace();
            let Some(module) = words.next() else { continue };
            if words.next() != Some("import") {
                continue;
            }
            out.push(module.to_string());
            let names: Vec<String> = words
                .collect::<Vec<_>>()
                .join(" ")
                .split(',')
                .filter_map(|p| p.split_whitespace().next().map(ident))
                .filter(|n| !n.is_empty() && n != "*")
                .collect();
            for n in names {
                if module.chars().all(|c| c == '.') {
                    out.push(format!("{module}{n}"));
                } else {
                    out.push(format!("{module}.{n}"));
                }
            }
        }
    }
    out
}

/// The relative specifiers (`./x`, `../y.js`) a node text requires or imports.
fn node_imports(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for opener in ["require(", "from ", "import(", "import "] {
        let mut rest = text;
        while let Some(at) = rest.find(opener) {
            rest = &rest[at + opener.len()..];
            let arg = rest.trim_start();
            let Some(q) = arg.chars().next().filter(|c| matches!(c, '"' | '\'' | '`')) else {
                continue;
            };
            let lit = &arg[1..];
            let Some(end) = lit.find(q) else { continue };
            let spec = &lit[..end];
            if spec.starts_with("./") || spec.starts_with("../") {
                out.push(spec.to_string());
            }
        }
    }
    out
}

/// Words that run the next word as a script (`python scripts/x.py`).
const RUNNERS: &[&str] = &[
    "python", "python3", "python2", "py", "pypy3", "node", "nodejs", "bun", "deno", "tsx", "bash",
    "sh", "zsh", "dash", "exec",
];

/// The files (relative to the skill root, among `all`) SKILL.md's text runs: `python
/// scripts/x.py`, `uv run --no-project {baseDir}/scripts/x.py`, `` `scripts/x` `` at a command's
/// start, `python -m scripts.x`. A path only mentioned ("see scripts/x.py") is not a run command.
pub fn named_by_skill_md(skill_md: &str, all: &BTreeSet<PathBuf>) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut fenced = false;
    for line in skill_md.lines() {
        if line.trim_start().starts_with("```") || line.trim_start().starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        // `python -m scripts.package_skill`
        let words: Vec<&str> = line.split_whitespace().collect();
        for w in words.windows(2) {
            if w[0] == "-m" {
                let m =
                    w[1].trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '_' && c != '.');
                if m.starts_with("scripts.") {
                    let cand = PathBuf::from(format!("{}.py", m.replace('.', "/")));
                    if all.contains(&cand) {
                        out.insert(cand);
                    }
                }
            }
        }
        let mut from = 0;
        while let Some(at) = line[from..].find("scripts/") {
            let at = from + at;
            from = at + "scripts/".len();
            let path: String = line[at..]
                .chars()
                .take_while(|c| {
                    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+' | '/')
                })
                .collect();
            let path = path.trim_end_matches(['.', '/']);
            let cand = PathBuf::from(path);
            if !all.contains(&cand) {
                continue;
            }
            // The token's start: back over a prefix such as `{baseDir}/`, `./`, `"$DIR"/`.
            let before = &line[..at];
            let token_start = before
                .rfind(|c: char| c.is_whitespace() || c == '`' || c == '"' || c == '\'')
                .map_or(0, |i| i + 1);
            let prefix = &before[token_start..];
            if !(prefix.is_empty() || prefix.ends_with('/')) {
                continue;
            }
            let lead = before[..token_start]
                .trim_end_matches(['"', '\''])
                .trim_end();
            // After an opening backtick, a command has words after the path (`scripts/x ARG`);
            // `scripts/x.py` alone in backticks is a mention.
            let after = &line[at + path.len()..];
            let inline_command = lead.ends_with('`') && after.starts_with(' ') && {
                let rest = &after[1..];
                rest.find('`').is_some_and(|e| !rest[..e].trim().is_empty())
            };
            let command_start = lead.is_empty() && fenced;
            if inline_command
                || command_start
                || lead.ends_with('$')
                || lead.ends_with("&&")
                || is_run_context(lead)
            {
                out.insert(cand);
            }
        }
    }
    out
}

/// True when the text before a path makes it a command: nothing (the line's start), an opening
/// backtick, a shell prompt `$`: the caller's), a runner word (options after it skipped;
/// `uv run`).
fn is_run_context(lead: &str) -> bool {
    let mut words: Vec<&str> = lead.split_whitespace().collect();
    while words.last().is_some_and(|w| w.starts_with('-')) {
        words.pop();
    }
    let Some(last) = words.last() else {
        return false;
    };
    let last = last.trim_start_matches(['`', '(']);
    let last = last.rsplit('/').next().unwrap_or(last);
    if RUNNERS.contains(&last) || (last.starts_with("python3.") && last.len() <= 10) {
        return true;
    }
    last == "run"
        && words.len() >= 2
        && words[words.len() - 2]
            .trim_start_matches('`')
            .ends_with("uv")
}

/// The names of git's hooks (githooks(5)): a file of the skill named so, with no extension, is
/// one.
const GIT_HOOKS: &[&str] = &[
    "applypatch-msg",
    "pre-applypatch",
    "post-applypatch",
    "pre-commit",
    "pre-merge-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-rebase",
    "post-checkout",
    "post-merge",
    "pre-push",
    "pre-receive",
    "post-receive",
    "post-update",
    "push-to-checkout",
    "pre-auto-gc",
    "post-rewrite",
];

/// The extensions of scripts for Windows only (PowerShell, cmd.exe).
const WINDOWS_ONLY: &[&str] = &["ps1", "psm1", "bat", "cmd"];

/// The file beside `rel` (in `all`) of which `rel` is the Windows form: `rel` has a Windows-only
/// extension ([`WINDOWS_ONLY`]), and another file of the same folder and stem has none of them
/// (`x.ps1` → `x.sh`).
pub fn windows_twin_of<'a>(rel: &Path, all: &'a BTreeSet<PathBuf>) -> Option<&'a PathBuf> {
    let ext = rel.extension().and_then(|e| e.to_str())?;
    if !WINDOWS_ONLY.contains(&ext.to_ascii_lowercase().as_str()) {
        return None;
    }
    let stem = rel.file_stem()?;
    all.iter().find(|o| {
        *o != rel
            && o.parent() == rel.parent()
            && o.file_stem() == Some(stem)
            && o.extension()
                .and_then(|e| e.to_str())
                .is_none_or(|e| !WINDOWS_ONLY.contains(&e.to_ascii_lowercase().as_str()))
    })
}

/// Classify every file of `files` (relative to the skill root), SKILL.md's text given.
pub fn classify(files: &[File], skill_md: Option<&str>) -> Vec<Result<Entry, NotEntry>> {
    let all: BTreeSet<PathBuf> = files.iter().map(|f| f.rel.clone()).collect();
    let named = skill_md
        .map(|t| named_by_skill_md(t, &all))
        .unwrap_or_default();
    // Who imports whom (tests do not count as importers: a test imports what it tests).
    let mut imported_by: BTreeMap<PathBuf, PathBuf> = BTreeMap::new();
    for f in files {
        if is_test(f.file_name()) {
            continue;
        }
        for m in imports(f, &all) {
            imported_by.entry(m).or_insert_with(|| f.rel.clone());
        }
    }
    files
        .iter()
        .map(|f| {
            let name = f.file_name();
            let executable = f.mode & 0o111 != 0;
            if let Some(other) = windows_twin_of(&f.rel, &all) {
                return Err(NotEntry::WindowsTwin(other.to_string_lossy().into_owned()));
            }
            if f.launch == Launch::Unknown {
                return Err(if name.contains('.') && !name.ends_with('.') {
                    NotEntry::Data
                } else {
                    NotEntry::Unknown
                });
            }
            if named.contains(&f.rel) {
                return Ok(Entry::Named);
            }
            if name == "__init__.py" {
                return Err(NotEntry::Init);
            }
            if GIT_HOOKS.contains(&name) {
                return Err(NotEntry::GitHook);
            }
            if is_template(name) {
                return Err(NotEntry::Template);
            }
            if is_test(name) {
                return Err(NotEntry::Test);
            }
            if let Some(by) = imported_by.get(&f.rel)
                && !executable
            {
                return Err(NotEntry::Module(by.to_string_lossy().into_owned()));
            }
            if executable {
                Ok(Entry::Executable)
            } else if f.text.starts_with("#!") {
                Ok(Entry::Shebang)
            } else if has_main_guard(&f.text) {
                Ok(Entry::MainGuard)
            } else {
                Err(NotEntry::NoSay)
            }
        })
        .collect()
}

/// The files `entry` can reach: itself and the modules it imports, transitively (among `files`).
pub fn reach<'a>(entry: &'a File, files: &'a [File]) -> Vec<&'a File> {
    let all: BTreeSet<PathBuf> = files.iter().map(|f| f.rel.clone()).collect();
    let mut seen = BTreeSet::from([entry.rel.clone()]);
    let mut out = vec![entry];
    let mut i = 0;
    while i < out.len() {
        for m in imports(out[i], &all) {
            if seen.insert(m.clone())
                && let Some(f) = files.iter().find(|f| f.rel == m)
            {
                out.push(f);
            }
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(rel: &str, mode: u32, text: &str) -> File {
        File {
            rel: rel.into(),
            mode,
            text: text.into(),
            launch: launch(Path::new(rel), mode, text.as_bytes()),
        }
    }

    #[test]
    fn entry_points_by_their_own_say_or_skill_md() {
        let files = [
            file(
                "scripts/a.py",
                0o644,
                "import utils\nif __name__ == '__main__':\n    main()\n",
            ),
            file(
                "scripts/utils.py",
                0o644,
                "#!/usr/bin/env python3\ndef f(): pass\n",
            ),
            file(
                "scripts/test_a.py",
                0o644,
                "from a import main\nif __name__ == \"__main__\": pass\n",
            ),
            file("scripts/__init__.py", 0o644, ""),
            file("scripts/pyproject.toml", 0o644, "[project]\n"),
            file("scripts/blob", 0o644, "\x7fELF"),
            file("scripts/run.mjs", 0o644, "import { x } from './lib.mjs'\n"),
            file("scripts/lib.mjs", 0o644, "export const x = 1\n"),
            file("scripts/tool", 0o755, "#!/bin/bash\ngit status\n"),
            file("scripts/plain.py", 0o644, "print(1)\n"),
            file("scripts/sub/helper.js", 0o644, "document.body\n"),
        ];
        let md = "Run `node scripts/run.mjs`, or\n\n    python3 {baseDir}/scripts/plain.py x\n\nSee scripts/test_a.py.\n";
        let got: Vec<_> = classify(&files, Some(md));
        assert_eq!(
            got,
            [
                Ok(Entry::MainGuard),
                Err(NotEntry::Module("scripts/a.py".into())),
                Err(NotEntry::Test),
                Err(NotEntry::Init),
                Err(NotEntry::Data),
                Err(NotEntry::Unknown),
                Ok(Entry::Named),
                Err(NotEntry::Module("scripts/run.mjs".into())),
                Ok(Entry::Executable),
                Ok(Entry::Named),
                Err(NotEntry::NoSay),
            ]
        );
        let r: Vec<_> = reach(&files[0], &files)
            .iter()
            .map(|f| f.rel.clone())
            .collect();
        assert_eq!(
            r,
            [PathBuf::from("scripts/a.py"), "scripts/utils.py".into()]
        );
    }

    #[test]
    fn a_template_or_a_copy_is_no_entry_point_unless_skill_md_runs_it() {
        let files = [
            file("scripts/pre-push.template", 0o755, "#!/bin/sh\nexit 0\n"),
            file("scripts/deploy.sh.sample", 0o755, "#!/bin/sh\n"),
            file("scripts/fix.py.bak", 0o644, "#!/usr/bin/env python3\n"),
            file("scripts/fix.py~", 0o755, "#!/usr/bin/env python3\n"),
            file("scripts/hook.tmpl", 0o755, "#!/bin/sh\n"),
            file("scripts/named.example", 0o755, "#!/bin/sh\n"),
            file("scripts/fix.py", 0o755, "#!/usr/bin/env python3\n"),
            file("scripts/example.sh", 0o755, "#!/bin/sh\n"),
        ];
        let md = "Once, run:\n\n    bash scripts/named.example\n";
        assert_eq!(
            classify(&files, Some(md)),
            [
                Err(NotEntry::Template),
                Err(NotEntry::Template),
                Err(NotEntry::Template),
                Err(NotEntry::Template),
                Err(NotEntry::Template),
                Ok(Entry::Named),
                Ok(Entry::Executable),
                Ok(Entry::Executable),
            ]
        );
    }

    /// A PowerShell or cmd.exe twin of a script (uipath-planner's `docx-extract.ps1` beside
    /// `docx-extract.sh`) is not a second entry point, even where SKILL.md names it: before, wrap
    /// drafted the `.ps1` and band ran the `.sh`. Alone, it is what it is.
    #[test]
    fn the_windows_twin_of_a_script_is_no_entry_point() {
        let files = [
            file("scripts/docx-extract.ps1", 0o644, "param($In)\n"),
            file("scripts/docx-extract.sh", 0o755, "#!/usr/bin/env bash\n"),
            file("scripts/build.BAT", 0o755, "@echo off\n"),
            file("scripts/build", 0o755, "#!/bin/sh\n"),
            file("scripts/only.ps1", 0o755, "#!/usr/bin/env pwsh\n"),
        ];
        let md = "On Windows: `pwsh scripts/docx-extract.ps1 in.docx`; elsewhere `bash scripts/docx-extract.sh in.docx`.\n";
        assert_eq!(
            classify(&files, Some(md)),
            [
                Err(NotEntry::WindowsTwin("scripts/docx-extract.sh".into())),
                Ok(Entry::Named),
                Err(NotEntry::WindowsTwin("scripts/build".into())),
                Ok(Entry::Executable),
                Ok(Entry::Executable),
            ]
        );
    }

    /// A git hook the skill ships (`scripts/pre-commit`, mode 755) is installed into a
    /// repository for git to run, not run by an agent (a fifth wild trial: wrap made it a
    /// script); SKILL.md running it makes it one.
    #[test]
    fn a_git_hook_is_no_entry_point_unless_skill_md_runs_it() {
        let files = [
            file("scripts/pre-commit", 0o755, "#!/bin/sh\nexec make lint\n"),
            file("scripts/commit-msg", 0o755, "#!/bin/sh\n"),
            file("scripts/pre-commit.py", 0o755, "#!/usr/bin/env python3\n"),
        ];
        assert_eq!(
            classify(&files, None),
            [
                Err(NotEntry::GitHook),
                Err(NotEntry::GitHook),
                Ok(Entry::Executable),
            ]
        );
        let md = "Check by hand: `sh scripts/commit-msg .git/COMMIT_EDITMSG`.\n";
        assert_eq!(classify(&files, Some(md))[1], Ok(Entry::Named));
    }

    #[test]
    fn skill_md_run_commands() {
        let all: BTreeSet<PathBuf> = [
            "scripts/x.py",
            "scripts/package_skill.py",
            "scripts/s",
            "scripts/r.sh",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        let n = |t: &str| named_by_skill_md(t, &all).into_iter().collect::<Vec<_>>();
        assert_eq!(
            n("uv run --no-project {baseDir}/scripts/x.py --fenced"),
            [PathBuf::from("scripts/x.py")]
        );
        assert_eq!(
            n("python -m scripts.package_skill dir"),
            [PathBuf::from("scripts/package_skill.py")]
        );
        assert_eq!(n("`scripts/s PLAN`"), [PathBuf::from("scripts/s")]);
        assert!(n("The model is in `scripts/x.py`; `scripts/s` too.").is_empty());
        assert_eq!(
            n("python \"<path-to-skill>/scripts/x.py\" --repo ."),
            [PathBuf::from("scripts/x.py")]
        );
        assert!(n("(Available in `scripts/r.sh`) and see the scripts/x.py file").is_empty());
        assert_eq!(
            n("```bash\nscripts/s --x\n```\n"),
            [PathBuf::from("scripts/s")]
        );
        assert_eq!(
            n("$ scripts/r.sh a && bash scripts/x.py"),
            [PathBuf::from("scripts/r.sh"), "scripts/x.py".into()]
        );
        assert!(n("See scripts/x.py for details").is_empty());
    }
}
