//! The CLI layer: the policy band-server judges calls by, and the protocol between band-shim and
//! band-server.
//!
//! Every wrapped name is band-shim, in `/band/bin` (the `PATH`) and in `/usr/bin` alike, so a
//! command is judged however it is called: by name, by absolute path, through `env`, `xargs`,
//! `find -exec` or `bash -c`. The real programs are not in the sandbox at all (see
//! [`crate::layers::cli::execcache`]): band-server hands a verified shim its program as a
//! descriptor, and only when the call is allowed.
//!
//! Protocol (one connection per call, lines of UTF-8, one round trip):
//!
//! ```text
//! shim   (names itself "band/shim", connects to /band/sock)
//! shim   {"image":{"phdr":…,"random":…},"argv":[…]}\n   its own AT_PHDR and AT_RANDOM
//! server {"exec":{}}\n + SCM_RIGHTS(program)         or {"exec":{"argv":[…]}}\n + SCM_RIGHTS,
//!                                                     or {"denied":{"message":…,"code":126}}\n,
//!                                                     or refused\n (not a verified shim)
//! ```
//!
//! An allowed call's answer carries one `O_PATH` descriptor of the program's copy
//! (`SCM_RIGHTS`); band-shim runs it with `execveat(fd, "", argv, envp, AT_EMPTY_PATH)`, with its
//! own argv, or the `argv` of the answer when band-server started a `#!` script the way the
//! kernel would (see [`resolve_call`]).
//!
//! band-server checks the peer, then its request (see [`crate::layers::cli::reports`]). The peer
//! (`SO_PEERCRED`): its `/proc/<pid>/exe` must be band-shim's execute-only copy, its name
//! `band/shim` (a name with a `/`, which no `exec` can give: the process set it itself, so it is
//! running band-shim's code), and, for a dynamic build, every file it maps band-shim or a system
//! library; all of it one program image, whose addresses band-server reads from its auxiliary
//! vector. The request: every byte was written by that same process (`SCM_CREDENTIALS`), and it
//! names those addresses. The kernel randomized them when it started band-shim in that process,
//! so nothing the process ran before could know them, a program it runs after band-shim has its
//! own, and no other process can read them (band-shim is not dumpable). So a request is answered
//! only if band-shim's own code wrote it, and band-shim writes only on the connection it made
//! itself, which no other process holds. A connection the script opened before exec'ing
//! band-shim gets nothing, whoever keeps it: what another process writes carries that process's
//! pid, and what the process itself writes before band-shim, or after it in the program
//! band-shim starts, names another image. The descriptor therefore only ever reaches the shim
//! that asked: it is sent on the verified connection, after the decision, and band-shim is not
//! dumpable from its first instruction (its file is execute-only), so nothing else can read its
//! memory or take its descriptors (seccomp denies `pidfd_getfd` besides); it receives the
//! descriptor close-on-exec, so the program it runs does not inherit it.
//!
//! Until issue 17's round 18, band-server sent a nonce first and took a request that carried it:
//! a round trip more per command, and it checked the request's writer by pid and start time only,
//! which an `exec` keeps (`docs/security.md`).
//!
//! The decision is band-server's alone ([`resolve_call`] then [`decide`]); the shim only carries
//! it out.

use std::collections::BTreeSet;

use band::policy::Decision;
use band::policy::cli::CliMatcher;
use band::proto::CliCall;

use crate::layers::cli::bundled;
use crate::layers::cli::execcache::ExecTable;

/// Always available (when present on the host) so ordinary shell scripts work. Not
/// pattern-checked unless declared in `allow.cli`; a `deny.cli` rule still applies; every call is
/// reported. Never `sudo` or `su`.
pub(crate) const ESSENTIALS: &[&str] = &[
    "sh", "bash", "env", "cat", "echo", "printf", "test", "true", "false", "head", "tail", "grep",
    "sed", "awk", "sort", "uniq", "wc", "tr", "cut", "mkdir", "rm", "cp", "mv", "touch", "date",
    "sleep", "mktemp", "basename", "dirname", "tee", "xargs", "ls",
];

// The protocol's messages, exit codes and names: band-shim's crate holds them, for both sides.
pub(crate) use band_shim::proto::{
    COMM, EXIT_DENIED, EXIT_UNKNOWN, ImageAddresses, ShimRequest, Verdict, command_name,
};

/// What a wrapper call amounts to: the command line the policy judges, and what runs if it is
/// allowed: the program (its name in the table) and, when not the call's own, the argv.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resolved {
    pub(crate) judged: Vec<String>,
    pub(crate) program: String,
    pub(crate) argv: Option<Vec<String>>,
    /// Only an `allow.cli` rule lets it run (a program inside a runtime tree, called by its path:
    /// never as an essential).
    pub(crate) needs_rule: bool,
}

/// How many `#!` interpreters deep a command may start (Linux's own limit).
pub(crate) const MAX_INTERPRETER_DEPTH: usize = 4;

/// Resolve one call of band-shim: `argv[0]`'s last path component names the command.
///
/// A `#!` script command runs as its interpreter with the script's path as an argument, as the
/// kernel would start it: calling `pip args…` (`#!/usr/bin/python3`) is judged as `pip args…`,
/// and if allowed runs the interpreter's program with `[/usr/bin/python3, /band/x/pip, args…]`
/// (the `#!` line's argument after the interpreter's path when it has one; for
/// `#!/usr/bin/env python3`, `env`, which then calls `python3` through band-shim).
///
/// Conversely an interpreter given a declared script's path in exactly that shape
/// (`[python3, /band/x/pip, args…]`, `[env, python3, /band/x/pip, args…]`, with the `#!` line's
/// argument when it has one) is judged as `pip args…`: that is the call the kernel, `env`, or a
/// script calling the interpreter itself makes, and it runs the same code. Anything else given
/// to an interpreter is judged as a call of the interpreter.
///
/// A path to one of the skill's programs (band-shim is bound over each one the policy declares)
/// names it by its `./` form: `/skill/bin/tool x` is judged as `./bin/tool x` and runs that file
/// (see [`bundled::call_name`]), never a host command called `tool`.
pub(crate) fn resolve_call(table: &ExecTable, argv: &[String]) -> Result<Resolved, NotAvailable> {
    let arg0 = argv.first().map(String::as_str).unwrap_or("");
    // A program inside a declared program's runtime tree, called by its path (claude-code's
    // `vendor/ripgrep/x64-linux/rg`): band-shim is bound over it, and the call is judged as its
    // file name, allowed only by an `allow.cli` rule naming it (`runtime::helper_table_name`).
    if arg0.starts_with('/') {
        let normal: std::path::PathBuf = std::path::Path::new(arg0).components().collect();
        let key = crate::layers::cli::runtime::helper_table_name(&normal);
        if table.contains_key(&key) {
            let name = normal
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let mut judged = vec![name];
            judged.extend_from_slice(&argv[1..]);
            return Ok(Resolved {
                judged,
                program: key,
                argv: None,
                needs_rule: true,
            });
        }
    }
    let name = bundled::call_name(arg0, &|rel| table.contains_key(&bundled::table_name(rel)));
    let key = match band::policy::cli::bundled_path(&name) {
        Some(rel) => bundled::table_name(rel),
        None if bundled::is_table_name(&name) => return Err(NotAvailable(name.into_owned())),
        None => name.to_string(),
    };
    if !table.contains_key(&key) {
        return Err(NotAvailable(name.into_owned()));
    }
    let judged = judged_call(table, &key, &name, argv);
    let (program, argv) = start(table, &key, argv)?;
    Ok(Resolved {
        judged,
        program,
        argv,
        needs_rule: false,
    })
}

/// The call as judged by what the kernel executed: when `exe` (the shim's `/proc/<pid>/exe`, a
/// path in the sandbox) is a program of a runtime tree or of the skill (band-shim is bound over
/// each), `argv` with that path as `argv[0]`, whatever the caller named it (a symlink to it, a
/// relative path, `exec -a`). `None` when `exe` is none of them (band-shim reached through the
/// `/band/bin` wrappers: judged by `argv[0]`, the command's name), or `argv[0]` is already it.
/// Only the judgement changes: the program still gets the caller's `argv[0]`. Pure.
pub(crate) fn executed_argv(
    table: &ExecTable,
    argv: &[String],
    exe: Option<&std::path::Path>,
) -> Option<Vec<String>> {
    let path = exe?.to_str()?;
    let helper = table.contains_key(&crate::layers::cli::runtime::helper_table_name(exe?));
    let skill = path
        .strip_prefix("/skill/")
        .is_some_and(|rel| table.contains_key(&bundled::table_name(rel)));
    if !(helper || skill) || argv.first().map(String::as_str) == Some(path) {
        return None;
    }
    let mut out = argv.to_vec();
    match out.first_mut() {
        Some(first) => *first = path.to_string(),
        None => out.push(path.to_string()),
    }
    Some(out)
}

/// The command line `argv` (a call of the table's `key`, named `name` in judgement) is judged
/// as: a declared script's own call when it is its interpreter in the kernel's shape, otherwise
/// `name` with the call's arguments.
fn judged_call(table: &ExecTable, key: &str, name: &str, argv: &[String]) -> Vec<String> {
    for (script_name, program) in table {
        let Some(script) = &program.script else {
            continue;
        };
        let sb = &script.line;
        let mut shapes: Vec<Vec<&str>> = Vec::new();
        if sb.interp == key {
            shapes.push(sb.arg.iter().map(String::as_str).collect());
        }
        if sb.interp == "env" && sb.effective_interpreter() == key {
            shapes.push(Vec::new());
        }
        for prefix in shapes {
            let k = 1 + prefix.len();
            if argv.len() > k
                && argv[1..k]
                    .iter()
                    .map(String::as_str)
                    .eq(prefix.iter().copied())
                && argv[k] == script.path
            {
                let mut judged =
                    vec![bundled::judged_name(script_name).unwrap_or_else(|| script_name.clone())];
                judged.extend_from_slice(&argv[k + 1..]);
                return judged;
            }
        }
    }
    let mut judged = vec![name.to_string()];
    judged.extend_from_slice(&argv[1..]);
    judged
}

/// How `name`, called with `argv`, starts: its own program with the call's argv, or, for a `#!`
/// script, its interpreter's program with the argv the kernel would give it (repeated for an
/// interpreter that is itself a script, as deep as Linux goes).
fn start(
    table: &ExecTable,
    name: &str,
    argv: &[String],
) -> Result<(String, Option<Vec<String>>), NotAvailable> {
    let mut name = name.to_string();
    let mut rewritten: Option<Vec<String>> = None;
    for _ in 0..=MAX_INTERPRETER_DEPTH {
        let program = table.get(&name).ok_or_else(|| NotAvailable(name.clone()))?;
        let Some(script) = &program.script else {
            // A program that runs under another argv[0] (a venv's python: its venv's path).
            if let Some(argv0) = &program.argv0 {
                let mut args = rewritten.unwrap_or_else(|| argv.to_vec());
                match args.first_mut() {
                    Some(first) => *first = argv0.clone(),
                    None => args.push(argv0.clone()),
                }
                return Ok((name, Some(args)));
            }
            return Ok((name, rewritten));
        };
        let args = rewritten.as_deref().unwrap_or(argv);
        let mut next = vec![script.line.path.clone()];
        next.extend(script.line.arg.clone());
        next.push(script.path.clone());
        next.extend_from_slice(args.get(1..).unwrap_or_default());
        name = script.line.interp.clone();
        rewritten = Some(next);
    }
    Err(NotAvailable(name))
}

/// A call of a command the sandbox does not have (the message the script sees).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("band: {0}: command not available in this sandbox")]
pub(crate) struct NotAvailable(pub(crate) String);

/// A CLI pattern of the policy that does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}.cli[{}]: {}", .0.list, .0.index, .0.error)]
pub(crate) struct RuleError(#[from] pub(crate) band::policy::RuleListError);

/// The CLI policy of a run, as band-server judges wrapper calls by it (in band-server only:
/// nothing inside the sandbox reads it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShimPolicy {
    /// `allow.cli` plus `insist.cli` (insist counts as allowed).
    pub(crate) allow: Vec<String>,
    pub(crate) deny: Vec<String>,
    /// Essentials present in this sandbox.
    pub(crate) essentials: Vec<String>,
}

/// The compiled view of a [`ShimPolicy`].
#[derive(Debug, Clone)]
pub(crate) struct CliRules {
    matcher: CliMatcher,
    essentials: BTreeSet<String>,
    declared: BTreeSet<String>,
    /// Where the host's programs are looked up (the server config's `bin_path`): a call of a
    /// name the sandbox does not have is recorded as a denial when the host has it
    /// ([`undeclared_call`]). Empty: never (unknown names stay unknown).
    host_search: Vec<std::path::PathBuf>,
}

impl CliRules {
    pub(crate) fn new(
        allow: &[String],
        deny: &[String],
        essentials: &[String],
    ) -> Result<CliRules, RuleError> {
        let matcher = CliMatcher::new(allow, deny)?;
        let declared = matcher.commands();
        Ok(CliRules {
            matcher,
            essentials: essentials.iter().cloned().collect(),
            declared,
            host_search: Vec::new(),
        })
    }

    /// These rules, recording calls of undeclared host programs found in `search`.
    pub(crate) fn with_host_search(mut self, search: Vec<std::path::PathBuf>) -> CliRules {
        self.host_search = search;
        self
    }

    pub(crate) fn host_search(&self) -> &[std::path::PathBuf] {
        &self.host_search
    }

    pub(crate) fn from_policy(p: &ShimPolicy) -> Result<CliRules, RuleError> {
        CliRules::new(&p.allow, &p.deny, &p.essentials)
    }
}

/// The decision for one call: `argv[0]` is the bare command name.
///
/// - a `deny.cli` match always denies;
/// - a declared command (first word of an `allow.cli` pattern) needs an `allow.cli` match;
/// - an essential that is not declared is allowed (reported, rule `None`).
pub(crate) fn decide(rules: &CliRules, argv: &[String]) -> CliCall {
    decide_with(rules, argv, false)
}

/// [`decide`] for a call that only an `allow.cli` rule lets run (`needs_rule`: a program inside
/// a runtime tree): an essential's name is no exception for it.
pub(crate) fn decide_with(rules: &CliRules, argv: &[String], needs_rule: bool) -> CliCall {
    let name = argv.first().map(String::as_str).unwrap_or("");
    let (allowed, rule) = match rules.matcher.check(argv) {
        Decision::Deny { rule } => (false, Some(rule)),
        Decision::Allow { rule } => (true, Some(rule)),
        Decision::Default => (
            !needs_rule && rules.essentials.contains(name) && !rules.declared.contains(name),
            None,
        ),
    };
    CliCall {
        argv: argv.to_vec(),
        allowed,
        rule,
        source: None,
    }
}

/// The denial to record for a call of a name the sandbox does not have (`resolve_call` said
/// [`NotAvailable`]), when that is a command the band could declare: a bare name (no `/`, not a
/// skill program's table name) the policy does not allow as called, and that the host has
/// (`on_host`, the thin layer's lookup in the config's `bin_path`). A name the host does not have
/// either (a typo, an optional tool a script probes for) is not a denial: no rule would make it
/// run. Pure but for `on_host`.
pub(crate) fn undeclared_call(
    rules: &CliRules,
    argv: &[String],
    on_host: &dyn Fn(&str) -> bool,
) -> Option<CliCall> {
    let name = argv.first()?;
    if name.is_empty()
        || name.contains('/')
        || bundled::is_table_name(name)
        || band::policy::cli::bundled_path(name).is_some()
    {
        return None;
    }
    let call = decide(rules, argv);
    (!call.allowed && on_host(name)).then_some(call)
}

/// `band: denied: jq -r . (no allow.cli rule matches)` / `(denied by deny.cli rule "rm -rf *")`.
pub(crate) fn denied_message(call: &CliCall) -> String {
    let argv = display_argv(&call.argv);
    match &call.rule {
        Some(rule) => format!("band: denied: {argv} (denied by deny.cli rule \"{rule}\")"),
        None => format!("band: denied: {argv} (no allow.cli rule matches)"),
    }
}

/// Words joined by spaces; a word with whitespace, quotes or nothing in it is single-quoted.
pub(crate) fn display_argv(argv: &[String]) -> String {
    argv.iter()
        .map(|w| {
            if w.is_empty()
                || w.chars()
                    .any(|c| c.is_whitespace() || matches!(c, '\'' | '"' | '\\'))
            {
                format!("'{}'", w.replace('\'', r"'\''"))
            } else {
                w.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The command of a `band exec` entry script (`src/client/adhoc.rs`'s `script_for`): `#!/bin/sh`,
/// comment lines, then one `exec 'word' 'it'\''s' …` line, each word single-quoted as
/// `sh_quote` writes it. Anything else is `None` (the script runs as written). Pure.
pub(crate) fn band_exec_argv(script: &[u8]) -> Option<Vec<String>> {
    let text = std::str::from_utf8(script).ok()?;
    let mut lines = text.strip_prefix("#!/bin/sh\n")?.lines();
    let exec = lines.find(|l| !l.starts_with('#'))?;
    if lines.next().is_some() || !text.ends_with('\n') {
        return None;
    }
    let mut rest = exec.strip_prefix("exec ")?;
    let mut argv = Vec::new();
    loop {
        let mut word = String::new();
        let mut any = false;
        loop {
            if let Some(r) = rest.strip_prefix('\'') {
                let end = r.find('\'')?;
                word.push_str(&r[..end]);
                rest = &r[end + 1..];
            } else if let Some(r) = rest.strip_prefix("\\'") {
                word.push('\'');
                rest = r;
            } else {
                break;
            }
            any = true;
        }
        if !any {
            return None;
        }
        argv.push(word);
        match rest.strip_prefix(' ') {
            Some(r) => rest = r,
            None if rest.is_empty() => return Some(argv),
            None => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn v(words: &[&str]) -> Vec<String> {
        words.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn undeclared_host_commands_are_denials_unknown_names_are_not() {
        let rules = CliRules::new(&v(&["cat *"]), &v(&["rm -rf *"]), &v(&["cat", "ls"]))
            .unwrap_or_else(|e| panic!("{e}"));
        let host = |name: &str| ["id", "uname", "rm", "cat", "ls"].contains(&name);
        // A host program the band does not declare: denied, no rule decided.
        assert_eq!(
            undeclared_call(&rules, &v(&["id", "-u"]), &host),
            Some(CliCall {
                argv: v(&["id", "-u"]),
                allowed: false,
                rule: None,
                source: None,
            })
        );
        // A deny rule that matches is the deciding rule.
        assert_eq!(
            undeclared_call(&rules, &v(&["rm", "-rf", "/"]), &host).and_then(|c| c.rule),
            Some("rm -rf *".to_string())
        );
        // Not on the host (a typo, an optional tool): nothing a rule could allow.
        assert_eq!(undeclared_call(&rules, &v(&["no-such-tool"]), &host), None);
        // An essential absent from this sandbox would be allowed: not a denial.
        assert_eq!(undeclared_call(&rules, &v(&["ls", "/"]), &host), None);
        // Paths and skill programs are never looked up on the host.
        for argv in [
            v(&["/usr/bin/id"]),
            v(&["../id"]),
            v(&["./bin/id"]),
            v(&[""]),
            Vec::new(),
        ] {
            assert_eq!(undeclared_call(&rules, &argv, &|_| true), None, "{argv:?}");
        }
    }

    #[test]
    fn protocol_lines() {
        let req = ShimRequest {
            image: ImageAddresses {
                phdr: 4096,
                random: 8192,
            },
            argv: v(&["jq", "-r"]),
        };
        let text = serde_json::to_string(&req).unwrap_or_default();
        assert_eq!(
            text,
            r#"{"image":{"phdr":4096,"random":8192},"argv":["jq","-r"]}"#
        );
        assert!(
            serde_json::from_str::<ShimRequest>(&text.replace('}', r#","allowed":true}"#)).is_err()
        );
        assert_eq!(
            serde_json::to_string(&Verdict::Exec { argv: None }).unwrap_or_default(),
            r#"{"exec":{}}"#
        );
        assert_eq!(
            serde_json::to_string(&Verdict::Exec {
                argv: Some(v(&["/usr/bin/python3", "/band/x/pip"]))
            })
            .unwrap_or_default(),
            r#"{"exec":{"argv":["/usr/bin/python3","/band/x/pip"]}}"#
        );
        assert!(serde_json::from_str::<Verdict>(r#"{"exec":"/band/x/00/jq"}"#).is_err());
        assert_eq!(
            serde_json::to_string(&Verdict::Denied {
                message: "no".into(),
                code: 126
            })
            .unwrap_or_default(),
            r#"{"denied":{"message":"no","code":126}}"#
        );
        assert!(
            COMM.contains('/') && COMM.len() < 16,
            "a name exec cannot give, within TASK_COMM_LEN"
        );
    }

    /// A program inside a runtime tree, called by its path (even spelled with `.`/`//`), is
    /// judged as its file name and runs only by an `allow.cli` rule, an essential's name included;
    /// by its bare name it is not reachable.
    #[test]
    fn a_tree_helper_is_judged_by_its_name_and_needs_a_rule() {
        let t = table();
        let r = resolve_call(&t, &v(&["/opt/x/./vendor//rg", "-n", "x"])).unwrap();
        assert_eq!(
            (r.judged.clone(), r.program.as_str(), r.needs_rule),
            (v(&["rg", "-n", "x"]), "tree:/opt/x/vendor/rg", true)
        );
        assert!(resolve_call(&t, &v(&["rg"])).is_err());
        let rules = CliRules::new(&v(&["rg -n *"]), &[], &v(&["cat"])).unwrap();
        assert!(decide_with(&rules, &r.judged, true).allowed);
        let cat = resolve_call(&t, &v(&["/opt/x/vendor/cat", "f"])).unwrap();
        assert!(decide(&rules, &cat.judged).allowed, "an essential by name");
        assert!(!decide_with(&rules, &cat.judged, cat.needs_rule).allowed);
    }

    /// Through a symlink or a relative path, a tree's or the skill's program is judged as the file
    /// the kernel ran (the shim's exe), not as the link's name: `./cat` in the tree is the helper
    /// `cat` (a rule needed), not the essential `cat`; `/tmp/my-rg` is the helper `rg`.
    #[test]
    fn a_program_reached_by_a_link_or_a_relative_path_is_judged_as_what_ran() {
        let t = table();
        let exe = |p: &str| Some(std::path::PathBuf::from(p));
        let judged = |argv: &[&str], at: &str| {
            let argv = executed_argv(&t, &v(argv), exe(at).as_deref()).unwrap_or_else(|| v(argv));
            resolve_call(&t, &argv).map(|r| (r.judged, r.program, r.needs_rule))
        };
        assert_eq!(
            judged(&["./cat", "f"], "/opt/x/vendor/cat"),
            Ok((v(&["cat", "f"]), "tree:/opt/x/vendor/cat".into(), true))
        );
        assert_eq!(
            judged(&["/tmp/my-rg", "-n"], "/opt/x/vendor/rg"),
            Ok((v(&["rg", "-n"]), "tree:/opt/x/vendor/rg".into(), true))
        );
        assert_eq!(
            judged(&["../tmp/ls", "-l"], "/skill/bin/ls"),
            Ok((v(&["./bin/ls", "-l"]), "skill:bin:ls".into(), false))
        );
        // The wrappers: judged by the name called, as before.
        assert_eq!(
            executed_argv(&t, &v(&["jq", "."]), exe("/band/shim").as_deref()),
            None
        );
        assert_eq!(executed_argv(&t, &v(&["jq"]), None), None);
        assert_eq!(
            executed_argv(
                &t,
                &v(&["/opt/x/vendor/rg"]),
                exe("/opt/x/vendor/rg").as_deref()
            ),
            None,
            "already its path"
        );
        assert_eq!(
            executed_argv(&t, &v(&["x"]), exe("/skill/bin/other").as_deref()),
            None,
            "not a program of the skill's"
        );
        // Without the exe: judged by the link's name (`cat`, here not in the table; in a run the
        // host's essential `cat`), `my-rg` unknown.
        assert_eq!(
            resolve_call(&t, &v(&["./cat", "f"]))
                .map(|r| r.program)
                .ok(),
            None
        );
        assert!(resolve_call(&t, &v(&["/tmp/my-rg"])).is_err());
    }

    fn table() -> ExecTable {
        use crate::layers::cli::execcache::{Program, Script, parse_shebang};
        let prog = |name: &str, line: Option<&str>| {
            (
                name.to_string(),
                Program {
                    file: format!("/state/exec/cache/{name}-0").into(),
                    script: line.map(|l| Script {
                        line: parse_shebang(l.as_bytes()).unwrap_or_else(|| panic!("{l}")),
                        path: format!("/band/x/{name}"),
                    }),
                    argv0: None,
                },
            )
        };
        ExecTable::from([
            prog("jq", None),
            prog("sh", None),
            prog("env", None),
            prog("python3", None),
            prog("pip", Some("#!/usr/bin/python3\n")),
            prog("tool", Some("#! /usr/bin/python3 -E\n")),
            prog("npx", Some("#!/usr/bin/env node\n")),
            prog("node", None),
            prog("nested", Some("#!/usr/bin/tool -x\n")),
            prog("loop1", Some("#!/usr/bin/loop2\n")),
            prog("loop2", Some("#!/usr/bin/loop1\n")),
            prog("orphan", Some("#!/usr/bin/perl\n")),
            prog("ls", None),
            prog("skill:bin:ls", None),
            prog("skill:bin:s.sh", Some("#!/bin/sh\n")),
            prog("tree:/opt/x/vendor/rg", None),
            prog("tree:/opt/x/vendor/cat", None),
        ])
    }

    fn resolved(
        judged: &[&str],
        program: &str,
        argv: Option<&[&str]>,
    ) -> Result<Resolved, NotAvailable> {
        Ok(Resolved {
            judged: v(judged),
            program: program.into(),
            argv: argv.map(v),
            needs_rule: false,
        })
    }

    #[test]
    fn calls_resolve_by_the_last_component_of_argv0() {
        let t = table();
        assert_eq!(
            resolve_call(&t, &v(&["jq", "."])),
            resolved(&["jq", "."], "jq", None)
        );
        assert_eq!(
            resolve_call(&t, &v(&["/usr/bin/jq", "."])),
            resolved(&["jq", "."], "jq", None),
            "an absolute path is the same command, judged the same way"
        );
        assert_eq!(
            resolve_call(&t, &v(&["perl", "-e", "1"])).map_err(|e| e.to_string()),
            Err("band: perl: command not available in this sandbox".into())
        );
        assert!(resolve_call(&t, &[]).is_err());
    }

    #[test]
    fn the_skills_programs_are_judged_by_their_dot_slash_name() {
        let t = table();
        // A bundled bin/ls, by any path to it: judged as ./bin/ls, runs the bundled file.
        for arg0 in ["/skill/bin/ls", "./bin/ls", "bin/ls", "/skill/./bin//ls"] {
            assert_eq!(
                resolve_call(&t, &v(&[arg0, "-l"])),
                resolved(&["./bin/ls", "-l"], "skill:bin:ls", None),
                "{arg0}"
            );
        }
        // The host's ls stays the host's ls.
        assert_eq!(
            resolve_call(&t, &v(&["/usr/bin/ls", "-l"])),
            resolved(&["ls", "-l"], "ls", None)
        );
        // The table's own name is not a command.
        assert_eq!(
            resolve_call(&t, &v(&["skill:bin:ls"])).map_err(|e| e.to_string()),
            Err("band: skill:bin:ls: command not available in this sandbox".into())
        );
        // A bundled #! script, started by the kernel: judged as itself, runs its interpreter.
        assert_eq!(
            resolve_call(&t, &v(&["/bin/sh", "/band/x/skill:bin:s.sh", "a"])),
            resolved(&["./bin/s.sh", "a"], "sh", None)
        );
        // Called by its path: judged as itself, starts as the kernel would start it.
        assert_eq!(
            resolve_call(&t, &v(&["/skill/bin/s.sh", "a"])),
            resolved(
                &["./bin/s.sh", "a"],
                "sh",
                Some(&["/bin/sh", "/band/x/skill:bin:s.sh", "a"])
            )
        );
        // And the gate judges ./bin/ls by the ./ patterns only.
        let rules =
            CliRules::new(&v(&["ls *"]), &[], &v(&["ls"])).unwrap_or_else(|e| panic!("{e}"));
        let r = resolve_call(&t, &v(&["/skill/bin/ls"])).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            !decide(&rules, &r.judged).allowed,
            "ls * never allows ./bin/ls"
        );
    }

    #[test]
    fn script_commands_start_as_the_kernel_would_start_them() {
        let t = table();
        // pip (#!/usr/bin/python3): judged as pip, runs python3 with the script's path.
        assert_eq!(
            resolve_call(&t, &v(&["pip", "install", "x"])),
            resolved(
                &["pip", "install", "x"],
                "python3",
                Some(&["/usr/bin/python3", "/band/x/pip", "install", "x"])
            )
        );
        // With the #! line's argument, and by path.
        assert_eq!(
            resolve_call(&t, &v(&["/usr/bin/tool", "a"])),
            resolved(
                &["tool", "a"],
                "python3",
                Some(&["/usr/bin/python3", "-E", "/band/x/tool", "a"])
            )
        );
        // #!/usr/bin/env node: env runs, and calls node through band-shim.
        assert_eq!(
            resolve_call(&t, &v(&["npx", "a"])),
            resolved(
                &["npx", "a"],
                "env",
                Some(&["/usr/bin/env", "node", "/band/x/npx", "a"])
            )
        );
        // An interpreter that is itself a script: two levels, like the kernel.
        assert_eq!(
            resolve_call(&t, &v(&["nested", "a"])),
            resolved(
                &["nested", "a"],
                "python3",
                Some(&[
                    "/usr/bin/python3",
                    "-E",
                    "/band/x/tool",
                    "-x",
                    "/band/x/nested",
                    "a"
                ])
            )
        );
        // No end, or no interpreter in the sandbox: nothing runs.
        assert!(resolve_call(&t, &v(&["loop1"])).is_err());
        assert_eq!(
            resolve_call(&t, &v(&["orphan"])).map_err(|e| e.to_string()),
            Err("band: perl: command not available in this sandbox".into())
        );
    }

    #[test]
    fn script_commands_are_judged_as_themselves_only_in_the_kernels_shape() {
        let t = table();
        // The interpreter given /band/x/pip (what a script calling python3 itself does).
        assert_eq!(
            resolve_call(&t, &v(&["/usr/bin/python3", "/band/x/pip", "install", "x"])),
            resolved(&["pip", "install", "x"], "python3", None)
        );
        // With the #! line's argument.
        assert_eq!(
            resolve_call(&t, &v(&["/usr/bin/python3", "-E", "/band/x/tool", "a"])),
            resolved(&["tool", "a"], "python3", None)
        );
        // #!/usr/bin/env node: env first, then node through PATH.
        assert_eq!(
            resolve_call(&t, &v(&["/usr/bin/env", "node", "/band/x/npx", "a"])),
            resolved(&["npx", "a"], "env", None)
        );
        assert_eq!(
            resolve_call(&t, &v(&["node", "/band/x/npx", "a"])),
            resolved(&["npx", "a"], "node", None)
        );
        // Anything else handed to an interpreter is the interpreter's own call.
        for argv in [
            &["python3", "-i", "/band/x/pip"][..],
            &["python3", "/band/x/tool"],
            &["python3", "-c", "/band/x/tool"],
            &["sh", "/band/x/pip"],
            &["python3", "/band/x/pip/"],
            &["python3", "/tmp/pip"],
        ] {
            let r = resolve_call(&t, &v(argv)).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(r.judged[0], command_name(argv[0]), "{argv:?}");
            assert_eq!(r.judged[1..], v(&argv[1..])[..], "{argv:?}");
            assert_eq!(r.argv, None, "{argv:?}");
        }
    }

    #[test]
    fn undeclared_essentials_are_allowed_without_a_rule() {
        let rules = CliRules::new(&[], &[], &v(&["cat"])).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            decide(&rules, &v(&["cat", "x"])),
            CliCall {
                argv: v(&["cat", "x"]),
                allowed: true,
                rule: None,
                source: None,
            }
        );
        assert_eq!(
            decide(&rules, &v(&["curl", "x"])),
            CliCall {
                argv: v(&["curl", "x"]),
                allowed: false,
                rule: None,
                source: None,
            }
        );
    }

    #[test]
    fn messages() {
        let call = CliCall {
            argv: v(&["jq", "-r", ". | x", ""]),
            allowed: false,
            rule: None,
            source: None,
        };
        assert_eq!(
            denied_message(&call),
            "band: denied: jq -r '. | x' '' (no allow.cli rule matches)"
        );
        let call = CliCall {
            argv: v(&["rm", "-rf", "/"]),
            allowed: false,
            rule: Some("rm -rf *".into()),
            source: None,
        };
        assert_eq!(
            denied_message(&call),
            "band: denied: rm -rf / (denied by deny.cli rule \"rm -rf *\")"
        );
        assert_eq!(display_argv(&v(&["echo", "it's"])), r"echo 'it'\''s'");
    }

    #[test]
    fn names_from_argv0() {
        assert_eq!(command_name("jq"), "jq");
        assert_eq!(command_name("/band/bin/jq"), "jq");
        assert_eq!(command_name(""), "");
    }

    #[test]
    fn essentials_never_include_privilege_tools() {
        for bad in crate::request::FORBIDDEN_COMMANDS {
            assert!(!ESSENTIALS.contains(bad), "{bad}");
        }
    }

    #[test]
    fn band_exec_scripts_give_back_their_argv_and_nothing_else_does() {
        let script = "#!/bin/sh\n# Written by `band exec`: the agent's command, under the band's policy.\nexec 'printf' '%s\\n' 'it'\\''s' '$HOME `x`' ''\n";
        assert_eq!(
            band_exec_argv(script.as_bytes()),
            Some(vec![
                "printf".to_string(),
                "%s\\n".into(),
                "it's".into(),
                "$HOME `x`".into(),
                String::new()
            ])
        );
        for not in [
            "#!/bin/sh\nexec 'a' 'b'\necho more\n",
            "#!/bin/sh\nexec 'a' b\n",
            "#!/bin/sh\nexec 'a'; rm x\n",
            "#!/bin/sh\nexec 'a'  'b'\n",
            "#!/bin/bash\nexec 'a'\n",
            "#!/bin/sh\nexec 'a'",
            "#!/bin/sh\nexec 'a\n",
            "#!/bin/sh\nexec\n",
        ] {
            assert_eq!(band_exec_argv(not.as_bytes()), None, "{not:?}");
        }
    }
}
