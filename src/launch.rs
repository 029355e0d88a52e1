//! How band starts a skill's entry point: the one answer `band wrap`, `band lint`, `band explain`
//! and band-server give (pure: a function of the entry's path, mode and first bytes).
//!
//! Agent Skills tell the agent to run `python scripts/x.py` or `node scripts/x.mjs`: many scripts
//! have no execute bit, no `#!` line, or both. band starts such an entry as its skill says it
//! runs, with an interpreter that is a program of the run (allowed by the band like any other, so
//! the CLI gate's rules hold):
//!
//! 0. a Python file SKILL.md runs as a module (`python -m scripts.x`, [`launch_in_skill`]):
//!    `python3 -m scripts.x`, with `PYTHONPATH=/skill` (the working directory stays
//!    `/workspace`), so its `from scripts.y import …` works as it does from the skill's folder;
//! 1. upstream Bands' `scripts/resources/<name>/run.sh` without an execute bit: `bash`, as
//!    upstream starts it;
//! 2. a `#!` line that starts it with `uv run` (`#!/usr/bin/env -S uv run --script`, as uv
//!    writes a PEP 723 script's): `python3`, execute bit or not. uv would resolve and install the
//!    script's packages when it runs, from the network; band-server has built them into the
//!    script's environment before the run (`band::deps`), whose `python3` the run's is;
//! 3. a `#!` line: an executable entry runs through it as the kernel would; one without an
//!    execute bit is started with the interpreter its `#!` line names (`/usr/bin/env python3` →
//!    `python3`);
//! 4. no `#!` line: by its extension (`.py` python3, `.sh`/`.bash` bash, `.js`/`.mjs`/`.cjs`
//!    node), execute bit or not (the kernel cannot run a script without a `#!` line);
//! 5. otherwise an executable file runs as it is (a compiled program), and one that is not
//!    executable cannot be started: band says so, and what would fix it.

use std::path::Path;

/// How an entry point starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launch {
    /// exec'd as it is: an executable program, or a script whose `#!` line the kernel follows.
    AsIs,
    /// Started by a program of the run: `interpreter [arg] <entry> ARGS…`.
    With(Interpreter),
    /// Not executable, and nothing says what runs it.
    Unknown,
}

/// The interpreter an entry is started with, and what told band.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interpreter {
    /// Its name, as the band's `allow.cli` names it (`python3`).
    pub name: String,
    /// The one argument of its `#!` line, if any (`-e` of `#!/bin/bash -e`).
    pub arg: Option<String>,
    pub by: By,
}

/// What told band which interpreter starts an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    /// Its `#!` line (the file has no execute bit).
    Shebang,
    /// Its extension (the file has no `#!` line).
    Extension,
    /// Upstream Bands' `run.sh`, which upstream starts with bash.
    UpstreamRunSh,
    /// A `#!` line that starts it with `uv run`: a Python script, started with `python3`.
    UvRun,
    /// SKILL.md runs it as a module (`python -m scripts.x`, from the skill's root): started as
    /// `python3 -m scripts.x` with the skill's root on Python's path ([`module_name`]).
    Module,
}

impl By {
    /// How a message says it: "by its #! line".
    pub fn as_str(self) -> &'static str {
        match self {
            By::Shebang => "by its #! line",
            By::Extension => "by its extension",
            By::UpstreamRunSh => "as upstream starts run.sh",
            By::UvRun => "by its #! line: `uv run` runs a Python script",
            By::Module => "as a module, as SKILL.md runs it (python3 -m)",
        }
    }
}

impl Interpreter {
    /// Whether a run needs an `allow.cli` rule for it: every interpreter but the essentials
    /// every band gets (`bash`, `sh`: [`crate::policy::cli::ESSENTIALS`]).
    pub fn needs_rule(&self) -> bool {
        !crate::policy::cli::ESSENTIALS.contains(&self.name.as_str())
    }

    /// The `allow.cli` rule that lets band-server start the entry `entry` (relative to the skill)
    /// with this interpreter, as `band wrap` writes it: `python3 /skill/scripts/x.py *`,
    /// `bash -e /skill/scripts/x *`, `python3 -m scripts.x *`.
    pub fn start_rule(&self, entry: &Path) -> String {
        let module = (self.by == By::Module)
            .then(|| module_name(entry))
            .flatten();
        start_rule(
            &entry.to_string_lossy(),
            &self.name,
            self.arg.as_deref(),
            module.as_deref(),
        )
    }
}

/// The `allow.cli` rule that starts the entry `entry` (relative to the skill) with the
/// interpreter `name` (its `#!` argument `arg`; as the module `module`, when SKILL.md runs it so).
pub fn start_rule(entry: &str, name: &str, arg: Option<&str>, module: Option<&str>) -> String {
    match (module, arg) {
        (Some(m), _) => format!("{name} -m {m} *"),
        (None, Some(a)) => format!("{name} {a} /skill/{entry} *"),
        (None, None) => format!("{name} /skill/{entry} *"),
    }
}

/// The extensions band knows an interpreter for, as a hint says them.
pub const KNOWN_EXTENSIONS: &str = ".py, .sh, .bash, .js, .mjs, .cjs";

/// How band starts the entry at `entry` (relative to the skill root) with file mode `mode`, whose
/// file begins with `head` (its first line is enough).
pub fn launch(entry: &Path, mode: u32, head: &[u8]) -> Launch {
    let executable = mode & 0o111 != 0;
    if !executable && runs_with_bash(entry) {
        return Launch::With(Interpreter {
            name: "bash".into(),
            arg: None,
            by: By::UpstreamRunSh,
        });
    }
    if let Some((name, arg)) = shebang(head) {
        if runs_with_uv(&name, arg.as_deref()) {
            return Launch::With(Interpreter {
                name: "python3".into(),
                arg: None,
                by: By::UvRun,
            });
        }
        if executable {
            return Launch::AsIs;
        }
        return Launch::With(Interpreter {
            name,
            arg,
            by: By::Shebang,
        });
    }
    if let Some(name) = entry
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(by_extension)
    {
        return Launch::With(Interpreter {
            name: name.into(),
            arg: None,
            by: By::Extension,
        });
    }
    if executable {
        Launch::AsIs
    } else {
        Launch::Unknown
    }
}

/// How band starts the entry at `entry` in a skill whose SKILL.md body is `skill_md`: as
/// [`launch`] says, except a Python file SKILL.md runs as a module (`python -m scripts.x`, which
/// its own `from scripts.y import …` needs): `python3 -m scripts.x`, whatever its mode or `#!`
/// line ([`By::Module`]).
pub fn launch_in_skill(entry: &Path, mode: u32, head: &[u8], skill_md: Option<&str>) -> Launch {
    if skill_md.is_some_and(|md| runs_as_module(entry, md)) {
        return Launch::With(Interpreter {
            name: "python3".into(),
            arg: None,
            by: By::Module,
        });
    }
    launch(entry, mode, head)
}

/// The module name of a Python file below the skill's root (`scripts/x.py` → `scripts.x`), when
/// every part of its path is a Python identifier.
pub fn module_name(entry: &Path) -> Option<String> {
    let s = entry.to_str()?.strip_suffix(".py")?;
    let ident = |p: &str| {
        p.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    s.split('/').all(ident).then(|| s.replace('/', "."))
}

/// Whether SKILL.md's text runs `entry` as a module: a `-m <its module name>` in it.
pub fn runs_as_module(entry: &Path, skill_md: &str) -> bool {
    let Some(m) = module_name(entry) else {
        return false;
    };
    skill_md.lines().any(|line| {
        let words: Vec<&str> = line.split_whitespace().collect();
        words.windows(2).any(|w| {
            w[0] == "-m"
                && w[1].trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '_' && c != '.')
                    == m
        })
    })
}

/// A `#!` line's `uv run …` (`#!/usr/bin/env -S uv run --script`): uv's way to run a Python
/// script with the packages of its PEP 723 block.
fn runs_with_uv(name: &str, arg: Option<&str>) -> bool {
    name == "uv" && arg.is_some_and(|a| a.split_whitespace().next() == Some("run"))
}

/// The interpreter a file name's extension says: `x.py` → `python3`.
pub fn by_extension(file_name: &str) -> Option<&'static str> {
    match file_name.rsplit_once('.')?.1 {
        "py" => Some("python3"),
        "sh" | "bash" => Some("bash"),
        "js" | "mjs" | "cjs" => Some("node"),
        _ => None,
    }
}

/// The interpreter a `#!` line names, and its argument: `#!/usr/bin/env python3` → `python3`,
/// `#!/bin/bash -e` → `bash` with `-e`, `#!/usr/bin/env -S node --x` → `node` with `--x`.
/// None without a `#!` line, or with one that names nothing band can write as a program name.
pub fn shebang(head: &[u8]) -> Option<(String, Option<String>)> {
    let rest = head.strip_prefix(b"#!")?;
    let line = rest.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?.trim();
    let mut words = line.split_whitespace();
    let first = words.next()?;
    let (name, rest): (&str, Vec<&str>) = if first.ends_with("/env") {
        let mut rest: Vec<&str> = words.collect();
        // `env -S`, `env -i`…: the flags are env's.
        while rest.first().is_some_and(|w| w.starts_with('-')) {
            rest.remove(0);
        }
        let name = *rest.first()?;
        (name, rest[1..].to_vec())
    } else {
        (first, words.collect())
    };
    let name = name.rsplit('/').next()?;
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-'));
    if !plain {
        return None;
    }
    let arg = (!rest.is_empty()).then(|| rest.join(" "));
    Some((name.to_string(), arg))
}

/// True for upstream's entry point `scripts/resources/<script>/run.sh` (a path relative to the
/// skill root): upstream runs it as `bash run.sh`, so band starts it with bash too, execute bit
/// or not.
pub fn runs_with_bash(entry: &Path) -> bool {
    let parts: Vec<&str> = entry.iter().filter_map(|c| c.to_str()).collect();
    matches!(parts.as_slice(), ["scripts", "resources", name, "run.sh"] if !name.starts_with('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(name: &str, arg: Option<&str>, by: By) -> Launch {
        Launch::With(Interpreter {
            name: name.into(),
            arg: arg.map(str::to_string),
            by,
        })
    }

    #[test]
    fn a_uv_run_script_starts_with_python3_execute_bit_or_not() {
        let pep723 = "#!/usr/bin/env -S uv run --script\n# /// script\n# dependencies = [\"httpx\"]\n# ///\nimport httpx\n";
        for mode in [0o644, 0o755] {
            assert_eq!(
                launch(Path::new("scripts/fetch.py"), mode, pep723.as_bytes()),
                with("python3", None, By::UvRun)
            );
        }
        assert_eq!(
            launch(Path::new("scripts/x"), 0o755, b"#!/usr/bin/env -S uv run\n"),
            with("python3", None, By::UvRun)
        );
        // uv's other commands, and a uv with no `run`, are uv's own.
        assert_eq!(
            launch(Path::new("scripts/x"), 0o755, b"#!/usr/bin/env uv\n"),
            Launch::AsIs
        );
        assert_eq!(
            launch(
                Path::new("scripts/x"),
                0o644,
                b"#!/usr/bin/env -S uv tool run ruff\n"
            ),
            with("uv", Some("tool run ruff"), By::Shebang)
        );
    }

    #[test]
    fn an_entry_starts_as_its_skill_says_it_runs() {
        let l = |path: &str, mode: u32, head: &str| launch(Path::new(path), mode, head.as_bytes());
        // Executable with a `#!` line: the kernel's way.
        assert_eq!(
            l("scripts/x.py", 0o755, "#!/usr/bin/env python3\n"),
            Launch::AsIs
        );
        // Mode 644 with a `#!` line: its interpreter.
        assert_eq!(
            l("scripts/x.py", 0o644, "#!/usr/bin/env python3\nprint(1)\n"),
            with("python3", None, By::Shebang)
        );
        assert_eq!(
            l("scripts/x", 0o664, "#!/bin/bash -e\n"),
            with("bash", Some("-e"), By::Shebang)
        );
        assert_eq!(
            l(
                "scripts/x.mjs",
                0o644,
                "#!/usr/bin/env -S node --no-warnings\n"
            ),
            with("node", Some("--no-warnings"), By::Shebang)
        );
        // No `#!` line: the extension, execute bit or not (the kernel cannot run it).
        for mode in [0o644, 0o755] {
            assert_eq!(
                l("scripts/draw_cards.py", mode, "import sys\n"),
                with("python3", None, By::Extension)
            );
        }
        assert_eq!(
            l("scripts/x.mjs", 0o644, "console.log(1)\n"),
            with("node", None, By::Extension)
        );
        assert_eq!(
            l("scripts/x.sh", 0o644, "echo hi\n"),
            with("bash", None, By::Extension)
        );
        // PEP 723: a comment block, no `#!` line: python3 by its extension.
        assert_eq!(
            l(
                "scripts/x.py",
                0o644,
                "# /// script\n# dependencies = []\n# ///\n"
            ),
            with("python3", None, By::Extension)
        );
        // Upstream's run.sh without an execute bit: bash, whatever its first line.
        assert_eq!(
            l("scripts/resources/go/run.sh", 0o644, "#!/bin/sh\n"),
            with("bash", None, By::UpstreamRunSh)
        );
        assert_eq!(
            l("scripts/resources/go/run.sh", 0o755, "#!/bin/sh\n"),
            Launch::AsIs
        );
        // A compiled program runs as it is; a file nothing explains does not run.
        assert_eq!(l("scripts/tool", 0o755, "\x7fELF"), Launch::AsIs);
        assert_eq!(l("scripts/tool", 0o644, "\x7fELF"), Launch::Unknown);
        assert_eq!(l("scripts/x.rb", 0o644, "puts 1\n"), Launch::Unknown);
    }

    #[test]
    fn a_shebang_names_a_program_band_can_write() {
        assert_eq!(
            shebang(b"#!/usr/bin/python3\n"),
            Some(("python3".into(), None))
        );
        assert_eq!(
            shebang(b"#! /usr/bin/env  python3 \r\n"),
            Some(("python3".into(), None))
        );
        assert_eq!(
            shebang(b"#!/usr/bin/env -S uv run --script\n"),
            Some(("uv".into(), Some("run --script".into())))
        );
        assert_eq!(shebang(b"#!/usr/bin/env\n"), None);
        assert_eq!(shebang(b"#!\n"), None);
        assert_eq!(shebang(b"#!/bin/we\"ird\n"), None);
        assert_eq!(shebang(b"print(1)\n"), None);
    }

    #[test]
    fn an_entry_skill_md_runs_as_a_module_starts_as_one() {
        let md =
            "Run it from the skill root:\n\n```bash\npython -m scripts.package_skill <dir>\n```\n";
        let p = Path::new("scripts/package_skill.py");
        assert_eq!(module_name(p).as_deref(), Some("scripts.package_skill"));
        assert_eq!(
            launch_in_skill(p, 0o644, b"import sys\n", Some(md)),
            Launch::With(Interpreter {
                name: "python3".into(),
                arg: None,
                by: By::Module
            })
        );
        // Another script of the skill, or no SKILL.md: as before.
        let other = Path::new("scripts/quick_validate.py");
        assert_eq!(
            launch_in_skill(other, 0o755, b"#!/usr/bin/env python3\n", Some(md)),
            Launch::AsIs
        );
        assert_eq!(
            launch_in_skill(p, 0o755, b"#!/usr/bin/env python3\n", None),
            Launch::AsIs
        );
        // A path that is no module name.
        assert_eq!(module_name(Path::new("scripts/my-tool.py")), None);
        assert!(!runs_as_module(
            Path::new("scripts/x.py"),
            "python -m scripts.xy"
        ));
    }
}
