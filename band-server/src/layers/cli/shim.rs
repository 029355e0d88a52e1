//! The CLI layer: the policy band-server judges calls by, and the protocol between band-shim and
//! band-server.
//!
//! Every wrapped name is band-shim, in `/band/bin` (the `PATH`) and in `/usr/bin` alike, so a
//! command is judged however it is called: by name, by absolute path, through `env`, `xargs`,
//! `find -exec` or `bash -c`. The real programs are hidden in `/band/x` (see
//! [`crate::layers::cli::execcache`]); band-server tells a verified shim where its program is, and only when
//! the call is allowed.
//!
//! Protocol (one connection per call, lines of UTF-8):
//!
//! ```text
//! shim   (names itself "band/shim", connects to /band/sock)
//! server <nonce>\n                                    32 hex characters
//! shim   {"nonce":…,"argv":[…]}\n
//! server {"exec":"/band/x/<hex>/<name>"}\n           or {"denied":{"message":…,"code":126}}
//! ```
//!
//! band-server checks the peer twice (see [`crate::layers::cli::reports`]). When it connects (`SO_PEERCRED`):
//! its `/proc/<pid>/exe` must be band-shim's execute-only copy, its name `band/shim` (a name with
//! a `/`, which no `exec` can give: the process set it itself, so it is running band-shim's code),
//! and every file it maps band-shim or a system library; only then is the nonce sent. For the
//! request (`SCM_CREDENTIALS`): every byte was written by that same process, whose start time has
//! not changed. So a request is answered only if band-shim's own code wrote it after the nonce,
//! and band-shim writes only on the connection it made itself. A connection the script opened
//! before exec'ing band-shim, and kept a copy of in another process, gets nothing: its nonce may
//! arrive, but what the other process writes carries that process's pid. band-shim is not
//! dumpable from its first instruction (its file is execute-only), so nothing else can read or
//! change its memory, and seccomp denies `pidfd_getfd`.
//!
//! The decision is band-server's alone ([`resolve_call`] then [`decide`]); the shim only carries
//! it out.

use std::collections::BTreeSet;

use band::policy::Decision;
use band::policy::cli::CliMatcher;
use band::proto::CliCall;
use serde::{Deserialize, Serialize};

use crate::layers::cli::bundled;
use crate::layers::cli::execcache::ExecTable;

/// Always available (when present on the host) so ordinary shell scripts work. Not
/// pattern-checked unless declared in `allow.cli`; a `deny.cli` rule still applies; every call is
/// reported. Never `sudo` or `su`.
pub const ESSENTIALS: &[&str] = &[
    "sh", "bash", "env", "cat", "echo", "printf", "test", "true", "false", "head", "tail", "grep",
    "sed", "awk", "sort", "uniq", "wc", "tr", "cut", "mkdir", "rm", "cp", "mv", "touch", "date",
    "sleep", "mktemp", "basename", "dirname", "tee", "xargs", "ls",
];

/// Exit code of a refused command (as a shell's "found but cannot execute").
pub const EXIT_DENIED: i32 = 126;
/// Exit code of a name the shim does not know.
pub const EXIT_UNKNOWN: i32 = 127;

/// band-shim's name (`PR_SET_NAME`), set first thing. It contains a `/`, which no `exec` can give
/// a process, so a process with this name is running band-shim's code.
pub const COMM: &str = "band/shim";

/// shim → server, after the nonce.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShimRequest {
    pub nonce: String,
    pub argv: Vec<String>,
}

/// server → shim: run this program, or refuse with this message and exit code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Verdict {
    Exec(String),
    Denied { message: String, code: i32 },
}

/// What a wrapper call amounts to: the command line the policy judges, and the program that runs
/// if it is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub judged: Vec<String>,
    pub program: String,
}

/// Resolve one call of band-shim: `argv[0]`'s last path component names the command.
///
/// A `#!` script command runs as its interpreter with the script's hidden path as an argument:
/// the kernel does that when the script is started, so `[python3, /band/x/…/pip, args…]`
/// (`[env, python3, /band/x/…/pip, args…]` for `#!/usr/bin/env python3`, and with the `#!`
/// line's argument when it has one) is judged as `pip args…`, and the interpreter's program
/// runs. Only that exact shape counts: anything else given to an interpreter is judged as a call
/// of the interpreter.
///
/// A path to one of the skill's programs (band-shim is bound over each one the policy declares)
/// names it by its `./` form: `/skill/bin/tool x` is judged as `./bin/tool x` and runs that file
/// (see [`bundled::call_name`]), never a host command called `tool`.
pub fn resolve_call(table: &ExecTable, argv: &[String]) -> Result<Resolved, NotAvailable> {
    let arg0 = argv.first().map(String::as_str).unwrap_or("");
    let name = bundled::call_name(arg0, &|rel| table.contains_key(&bundled::table_name(rel)));
    let key = match band::policy::cli::bundled_path(&name) {
        Some(rel) => bundled::table_name(rel),
        None if bundled::is_table_name(&name) => return Err(NotAvailable(name.into_owned())),
        None => name.to_string(),
    };
    let Some(program) = table.get(&key) else {
        return Err(NotAvailable(name.into_owned()));
    };
    for (script_name, script) in table {
        let Some(sb) = &script.script else { continue };
        let mut shapes: Vec<Vec<&str>> = Vec::new();
        if sb.interp == name {
            shapes.push(sb.arg.iter().map(String::as_str).collect());
        }
        if sb.interp == "env" && sb.effective_interpreter() == name {
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
                return Ok(Resolved {
                    judged,
                    program: program.path.clone(),
                });
            }
        }
    }
    let mut judged = vec![name.into_owned()];
    judged.extend_from_slice(&argv[1..]);
    Ok(Resolved {
        judged,
        program: program.path.clone(),
    })
}

/// A call of a command the sandbox does not have (the message the script sees).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("band: {0}: command not available in this sandbox")]
pub struct NotAvailable(pub String);

/// A CLI pattern of the policy that does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}.cli[{index}]: {error}", if *.is_deny { "deny" } else { "allow" })]
pub struct RuleError {
    pub is_deny: bool,
    pub index: usize,
    pub error: band::policy::PatternError,
}

/// The CLI policy of a run, as band-server judges wrapper calls by it (in band-server only:
/// nothing inside the sandbox reads it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShimPolicy {
    /// `allow.cli` plus `insist.cli` (insist counts as allowed).
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    /// Essentials present in this sandbox.
    pub essentials: Vec<String>,
}

/// The compiled view of a [`ShimPolicy`].
#[derive(Debug, Clone)]
pub struct CliRules {
    matcher: CliMatcher,
    essentials: BTreeSet<String>,
    declared: BTreeSet<String>,
}

impl CliRules {
    pub fn new(
        allow: &[String],
        deny: &[String],
        essentials: &[String],
    ) -> Result<CliRules, RuleError> {
        let matcher =
            CliMatcher::new(allow, deny).map_err(|(is_deny, index, error)| RuleError {
                is_deny,
                index,
                error,
            })?;
        let declared = matcher.commands();
        Ok(CliRules {
            matcher,
            essentials: essentials.iter().cloned().collect(),
            declared,
        })
    }

    pub fn from_policy(p: &ShimPolicy) -> Result<CliRules, RuleError> {
        CliRules::new(&p.allow, &p.deny, &p.essentials)
    }
}

/// The decision for one call: `argv[0]` is the bare command name.
///
/// - a `deny.cli` match always denies;
/// - a declared command (first word of an `allow.cli` pattern) needs an `allow.cli` match;
/// - an essential that is not declared is allowed (reported, rule `None`).
pub fn decide(rules: &CliRules, argv: &[String]) -> CliCall {
    let name = argv.first().map(String::as_str).unwrap_or("");
    let (allowed, rule) = match rules.matcher.check(argv) {
        Decision::Deny { rule } => (false, Some(rule)),
        Decision::Allow { rule } => (true, Some(rule)),
        Decision::Default => (
            rules.essentials.contains(name) && !rules.declared.contains(name),
            None,
        ),
    };
    CliCall {
        argv: argv.to_vec(),
        allowed,
        rule,
    }
}

/// `band: denied: jq -r . (no allow.cli rule matches)` / `(denied by deny.cli rule "rm -rf *")`.
pub fn denied_message(call: &CliCall) -> String {
    let argv = display_argv(&call.argv);
    match &call.rule {
        Some(rule) => format!("band: denied: {argv} (denied by deny.cli rule \"{rule}\")"),
        None => format!("band: denied: {argv} (no allow.cli rule matches)"),
    }
}

/// Words joined by spaces; a word with whitespace, quotes or nothing in it is single-quoted.
pub fn display_argv(argv: &[String]) -> String {
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

/// The command name from `argv[0]`: its last path component.
pub fn command_name(arg0: &str) -> &str {
    arg0.rsplit('/').next().unwrap_or(arg0)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn v(words: &[&str]) -> Vec<String> {
        words.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn protocol_lines() {
        let req = ShimRequest {
            nonce: "ab".into(),
            argv: v(&["jq", "-r"]),
        };
        let text = serde_json::to_string(&req).unwrap_or_default();
        assert_eq!(text, r#"{"nonce":"ab","argv":["jq","-r"]}"#);
        assert!(
            serde_json::from_str::<ShimRequest>(&text.replace('}', r#","allowed":true}"#)).is_err()
        );
        assert_eq!(
            serde_json::to_string(&Verdict::Exec("/band/x/00/jq".into())).unwrap_or_default(),
            r#"{"exec":"/band/x/00/jq"}"#
        );
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

    fn table() -> ExecTable {
        use crate::layers::cli::execcache::{Program, Shebang};
        let prog = |p: &str, script: Option<(&str, Option<&str>)>| Program {
            path: p.into(),
            script: script.map(|(i, a)| Shebang {
                interp: i.into(),
                arg: a.map(str::to_string),
            }),
        };
        ExecTable::from([
            ("jq".into(), prog("/band/x/01/jq", None)),
            ("sh".into(), prog("/band/x/02/sh", None)),
            ("env".into(), prog("/band/x/03/env", None)),
            ("python3".into(), prog("/band/x/04/python3", None)),
            (
                "pip".into(),
                prog("/band/x/05/pip", Some(("python3", None))),
            ),
            (
                "tool".into(),
                prog("/band/x/06/tool", Some(("python3", Some("-E")))),
            ),
            (
                "npx".into(),
                prog("/band/x/07/npx", Some(("env", Some("node")))),
            ),
            ("node".into(), prog("/band/x/08/node", None)),
            ("ls".into(), prog("/band/x/09/ls", None)),
            ("skill:bin:ls".into(), prog("/band/x/10/skill:bin:ls", None)),
            (
                "skill:bin:s.sh".into(),
                prog("/band/x/11/skill:bin:s.sh", Some(("sh", None))),
            ),
        ])
    }

    fn resolved(judged: &[&str], program: &str) -> Result<Resolved, NotAvailable> {
        Ok(Resolved {
            judged: v(judged),
            program: program.into(),
        })
    }

    #[test]
    fn calls_resolve_by_the_last_component_of_argv0() {
        let t = table();
        assert_eq!(
            resolve_call(&t, &v(&["jq", "."])),
            resolved(&["jq", "."], "/band/x/01/jq")
        );
        assert_eq!(
            resolve_call(&t, &v(&["/usr/bin/jq", "."])),
            resolved(&["jq", "."], "/band/x/01/jq"),
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
                resolved(&["./bin/ls", "-l"], "/band/x/10/skill:bin:ls"),
                "{arg0}"
            );
        }
        // The host's ls stays the host's ls.
        assert_eq!(
            resolve_call(&t, &v(&["/usr/bin/ls", "-l"])),
            resolved(&["ls", "-l"], "/band/x/09/ls")
        );
        // The table's own name is not a command.
        assert_eq!(
            resolve_call(&t, &v(&["skill:bin:ls"])).map_err(|e| e.to_string()),
            Err("band: skill:bin:ls: command not available in this sandbox".into())
        );
        // A bundled #! script, started by the kernel: judged as itself, runs its interpreter.
        assert_eq!(
            resolve_call(&t, &v(&["/bin/sh", "/band/x/11/skill:bin:s.sh", "a"])),
            resolved(&["./bin/s.sh", "a"], "/band/x/02/sh")
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
    fn script_commands_are_judged_as_themselves_only_in_the_kernels_shape() {
        let t = table();
        // The kernel starting /band/x/05/pip (#!/usr/bin/python3).
        assert_eq!(
            resolve_call(
                &t,
                &v(&["/usr/bin/python3", "/band/x/05/pip", "install", "x"])
            ),
            resolved(&["pip", "install", "x"], "/band/x/04/python3")
        );
        // With the #! line's argument.
        assert_eq!(
            resolve_call(&t, &v(&["/usr/bin/python3", "-E", "/band/x/06/tool", "a"])),
            resolved(&["tool", "a"], "/band/x/04/python3")
        );
        // #!/usr/bin/env node: env first, then node through PATH.
        assert_eq!(
            resolve_call(&t, &v(&["/usr/bin/env", "node", "/band/x/07/npx", "a"])),
            resolved(&["npx", "a"], "/band/x/03/env")
        );
        assert_eq!(
            resolve_call(&t, &v(&["node", "/band/x/07/npx", "a"])),
            resolved(&["npx", "a"], "/band/x/08/node")
        );
        // Anything else handed to an interpreter is the interpreter's own call.
        for argv in [
            &["python3", "-i", "/band/x/05/pip"][..],
            &["python3", "/band/x/06/tool"],
            &["python3", "-c", "/band/x/06/tool"],
            &["sh", "/band/x/05/pip"],
            &["python3", "/band/x/5/pip"],
        ] {
            let r = resolve_call(&t, &v(argv)).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(r.judged[0], command_name(argv[0]), "{argv:?}");
            assert_eq!(r.judged[1..], v(&argv[1..])[..], "{argv:?}");
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
                rule: None
            }
        );
        assert_eq!(
            decide(&rules, &v(&["curl", "x"])),
            CliCall {
                argv: v(&["curl", "x"]),
                allowed: false,
                rule: None
            }
        );
    }

    #[test]
    fn messages() {
        let call = CliCall {
            argv: v(&["jq", "-r", ". | x", ""]),
            allowed: false,
            rule: None,
        };
        assert_eq!(
            denied_message(&call),
            "band: denied: jq -r '. | x' '' (no allow.cli rule matches)"
        );
        let call = CliCall {
            argv: v(&["rm", "-rf", "/"]),
            allowed: false,
            rule: Some("rm -rf *".into()),
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
}
