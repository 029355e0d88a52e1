//! `band wrap`: a band and argv-style contracts for an Agent Skill (SKILL.md and scripts, no band).
//!
//! Pure: [`plan`] reads the skill and returns the files to write, the rules and where each came
//! from; the command prints or writes them. Each script in `scripts/` (python, shell, node: by its
//! `#!` line or extension) gets an input schema whose only property is `args`, an array of
//! strings ([`crate::contract::is_argv_schema`]: band appends them to the script's command line),
//! and an output schema accepting any text. The band allows each script exactly as band starts it
//! (`python3 /skill/scripts/x.py *`), the programs the code calls by name where that is visible
//! statically, no network and no workspace files unless `--allow-read`/`--allow-write` name them.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::json;

/// One script of the skill, as wrapped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WrappedScript {
    pub name: String,
    /// Relative to the skill root (`scripts/x.py`).
    pub entry: String,
    /// The interpreter band starts it with (`python3`, `bash`, `node`), from `#!` or extension.
    pub interpreter: Option<String>,
    /// The first line of its docstring or leading comment, if any.
    pub description: Option<String>,
    /// Programs its code calls by name (`subprocess.run(["soffice", …])`, `shutil.which("x")`).
    pub calls: Vec<String>,
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
    /// Files in subfolders of `scripts/` that are not wrapped as scripts (a helper module, data),
    /// said so the user knows.
    pub skipped: Vec<String>,
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
    #[error("{}: no script in scripts/{}", .0.display(), nested(.1))]
    NoScripts(PathBuf, Vec<String>),
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
            WrapError::NoScripts(..) => "band wrap wraps the programs in scripts/ and its subfolders (python, shell, node: a `#!` line, or a main guard below scripts/)".into(),
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

fn nested(files: &[String]) -> String {
    if files.is_empty() {
        String::new()
    } else {
        let files: Vec<String> = files.iter().map(|f| f.escape_debug().to_string()).collect();
        format!(
            " (below it: {}, none of them a program band can wrap: no `#!` line or main guard, or a name band cannot write literally)",
            files.join(", ")
        )
    }
}

/// True when a file in a subfolder of `scripts/` is a program rather than a module or data: it
/// has an interpreter band knows and either a `#!` line, or (Python) an
/// `if __name__ == "__main__"` guard, or (node) a `require.main === module` test.
pub fn is_program(file_name: &str, text: &str) -> bool {
    let Some(i) = interpreter(file_name, text) else {
        return false;
    };
    text.starts_with("#!")
        || (i.starts_with("python")
            && text.lines().any(|l| {
                let l = l.replace('\'', "\"");
                l.starts_with("if __name__") && l.contains("\"__main__\"")
            }))
        || (i == "node" && text.contains("require.main === module"))
}

/// The interpreter of a script: its `#!` line (`/usr/bin/env python3` → `python3`), else its
/// extension.
pub fn interpreter(file_name: &str, text: &str) -> Option<String> {
    if let Some(line) = text.lines().next().and_then(|l| l.strip_prefix("#!")) {
        let mut words = line.split_whitespace();
        let first = words.next()?;
        let prog = if first.ends_with("/env") {
            words.find(|w| !w.starts_with('-'))?
        } else {
            first
        };
        return prog.rsplit('/').next().map(str::to_string);
    }
    let ext = file_name.rsplit_once('.')?.1;
    match ext {
        "py" => Some("python3".into()),
        "sh" | "bash" => Some("bash".into()),
        "js" | "mjs" | "cjs" => Some("node".into()),
        _ => None,
    }
}

/// The first line of a script's description: a Python module docstring, else the first comment
/// after the `#!` line.
pub fn description(text: &str) -> Option<String> {
    let body: Vec<&str> = text
        .lines()
        .skip_while(|l| l.starts_with("#!"))
        .skip_while(|l| l.trim().is_empty() || l.starts_with("# -*-"))
        .collect();
    let first = body.first()?.trim();
    for quote in ["\"\"\"", "'''"] {
        if let Some(rest) = first.strip_prefix(quote) {
            let line = rest.split(quote).next().unwrap_or(rest).trim();
            let line = if line.is_empty() {
                body.get(1).map_or("", |l| l.trim())
            } else {
                line
            };
            return Some(line.to_string()).filter(|l| !l.is_empty());
        }
    }
    ["#", "//"]
        .iter()
        .find_map(|c| first.strip_prefix(c))
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
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
    variables.sort();
    variables.dedup();
    for var in variables {
        for line in text.lines() {
            let Some(value) = line
                .trim_start()
                .strip_prefix(var.as_str())
                .map(str::trim_start)
                .and_then(|l| l.strip_prefix('='))
                .filter(|l| !l.starts_with('='))
                .and_then(|l| l.trim_start().strip_prefix('['))
            else {
                continue;
            };
            out.extend(first_word(value.trim_start()));
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The command name in a string literal at the start of `arg` (its first word, path stripped).
fn first_word(arg: &str) -> Option<String> {
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

/// The `allow.cli` rules of the wrapped scripts: each script as band starts it, then each program
/// its code calls; and why each called program is there.
fn cli_rules(scripts: &[WrappedScript]) -> (Vec<String>, Vec<String>) {
    let mut cli = Vec::new();
    let mut why = Vec::new();
    for s in scripts {
        match &s.interpreter {
            Some(i) => cli.push(format!("{i} /skill/{} *", s.entry)),
            None => cli.push(format!("./{} *", s.entry)),
        }
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

/// What `band wrap` writes for the Agent Skill at `root`: schemas for each script and a BAND.md.
pub fn plan(root: &Path, access: &Access) -> Result<WrapPlan, WrapError> {
    let (skill, _) = crate::skill::load_skill(root);
    // The folder's name goes into the band (`band:`), the schemas and every command line shown:
    // it must be a band name, whatever bytes a folder name may hold.
    if !crate::manifest::is_kebab(&skill.name) {
        return Err(WrapError::Name(shown(&skill.name)));
    }
    let read = |entry: &Path| {
        let text = crate::skillfs::read(root, entry, crate::skillfs::MAX_TEXT_BYTES)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        let file_name = entry
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        (file_name, text)
    };
    let mut scripts = Vec::new();
    let mut refused = Vec::new();
    // A program whose name, path or interpreter band cannot write literally (a space, a quote, a
    // glob character, a control character) is not wrapped: the rule would not say what it means.
    let mut add = |name: &str, entry: &Path, text: &str, file_name: &str| {
        let interpreter = interpreter(file_name, text);
        let plain_entry = entry.iter().all(|c| c.to_str().is_some_and(is_plain_name));
        if !is_plain_name(name)
            || !plain_entry
            || interpreter.as_deref().is_some_and(|i| !is_plain_name(i))
        {
            refused.push(entry.to_string_lossy().into_owned());
            return;
        }
        scripts.push(WrappedScript {
            name: name.to_string(),
            entry: entry.to_string_lossy().into_owned(),
            interpreter,
            description: description(text),
            calls: calls(text),
        });
    };
    for s in &skill.scripts {
        let (file_name, text) = read(&s.entry);
        add(&s.name, &s.entry, &text, &file_name);
    }
    // Programs in subfolders (docx's `scripts/office/soffice.py`), named by their path
    // (`office-soffice`, [`crate::skill::nested_name`]); a nested script already wrapped is in
    // `skill.scripts` (its contract makes it one). Modules and data are listed as skipped.
    let mut skipped = Vec::new();
    for (name, entry) in crate::skill::nested_candidates(root) {
        if skill.scripts.iter().any(|s| s.entry == entry) {
            continue;
        }
        let (file_name, text) = read(&entry);
        if is_program(&file_name, &text) && !skill.scripts.iter().any(|s| s.name == name) {
            add(&name, &entry, &text, &file_name);
        } else {
            skipped.push(entry.to_string_lossy().into_owned());
        }
    }
    scripts.sort_by(|a, b| a.name.cmp(&b.name));
    scripts.dedup_by(|a, b| a.name == b.name);
    if scripts.is_empty() {
        skipped.extend(refused);
        return Err(WrapError::NoScripts(root.to_path_buf(), skipped));
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
    fn interpreter_from_shebang_or_extension() {
        assert_eq!(
            interpreter("x.py", "#!/usr/bin/env python3\n").as_deref(),
            Some("python3")
        );
        assert_eq!(
            interpreter("x", "#!/usr/bin/env -S node --x\n").as_deref(),
            Some("node")
        );
        assert_eq!(
            interpreter("x", "#!/bin/bash -e\n").as_deref(),
            Some("bash")
        );
        assert_eq!(interpreter("x.sh", "echo\n").as_deref(), Some("bash"));
        assert_eq!(interpreter("x", "echo\n"), None);
    }

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
    }

    #[test]
    fn programs_below_scripts_have_a_shebang_or_a_main_guard() {
        assert!(is_program("x.py", "#!/usr/bin/env python3\nimport sys\n"));
        assert!(is_program(
            "x.py",
            "import sys\n\nif __name__ == '__main__':\n    main()\n"
        ));
        assert!(is_program("x.js", "if (require.main === module) main();\n"));
        assert!(!is_program("x.py", "def f():\n    pass\n"));
        assert!(!is_program("data.json", "{}\n"));
    }

    #[test]
    fn wrapped_input_schema_is_argv_style() {
        let s = WrappedScript {
            name: "x".into(),
            entry: "scripts/x.py".into(),
            interpreter: Some("python3".into()),
            description: None,
            calls: vec![],
        };
        assert!(crate::contract::is_argv_schema(&input_schema("k", &s)));
    }

    fn script(name: &str, entry: &str) -> WrappedScript {
        WrappedScript {
            name: name.into(),
            entry: entry.into(),
            interpreter: Some("python3".into()),
            description: None,
            calls: vec![],
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
        fs_err::write(root.join("scripts/sub/d.py"), "#!/usr/bin/env py*\n").unwrap();
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
}
