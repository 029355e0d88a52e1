//! The CLI layer: the policy file `band-shim` reads, its decision, and the report protocol.
//!
//! Every name in `/band/bin` is a symlink to `/band/shim`. The shim takes the command name from
//! `argv[0]`, decides with the same [`decide`] function band-server uses, reports the call over
//! `/band/sock`, and only then either refuses (exit 126) or `exec`s `/usr/bin/<name>`.
//!
//! Report protocol (one connection per call, lines of UTF-8):
//!
//! ```text
//! server → shim   <nonce>\n                         32 hex characters
//! shim   → server {"nonce":…,"argv":[…],"allowed":…,"rule":…}\n
//! server → shim   ok\n                             or "refused\n"
//! ```
//!
//! band-server checks the peer before answering `ok`: `SO_PEERCRED` gives its pid, whose
//! `/proc/<pid>/exe` must be the shim binary and whose file-backed mappings must all be the shim
//! or system libraries (no `LD_PRELOAD` of a script-written library). The nonce means a line
//! written into the socket by some other program before it exec'd the shim is never accepted.
//! The server recomputes the decision itself; the shim's `allowed` is only its own view.
//!
//! Known limit: argument patterns are enforced on the `PATH` route. The declared binaries exist
//! at `/usr/bin/<name>`, so a script calling `/usr/bin/jq` directly skips the argv check (it cannot
//! reach an undeclared binary this way: those are not in the sandbox at all).

use std::collections::{BTreeMap, BTreeSet};

use band::policy::Decision;
use band::policy::cli::CliMatcher;
use band::proto::CliCall;
use serde::{Deserialize, Serialize};

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

/// `/band/policy.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShimPolicy {
    pub version: u32,
    /// `allow.cli` plus `insist.cli` (insist counts as allowed).
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    /// Essentials present in this sandbox.
    pub essentials: Vec<String>,
    /// Every wrapped name → the real binary inside the sandbox.
    pub commands: BTreeMap<String, String>,
}

pub const SHIM_POLICY_VERSION: u32 = 1;

/// One line from the shim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShimReport {
    pub nonce: String,
    pub argv: Vec<String>,
    pub allowed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
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
    ) -> Result<CliRules, String> {
        let matcher = CliMatcher::new(allow, deny).map_err(|(is_deny, i, e)| {
            format!("{}.cli[{i}]: {e}", if is_deny { "deny" } else { "allow" })
        })?;
        let declared = matcher.commands();
        Ok(CliRules {
            matcher,
            essentials: essentials.iter().cloned().collect(),
            declared,
        })
    }

    pub fn from_policy(p: &ShimPolicy) -> Result<CliRules, String> {
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
    fn policy_file_round_trips_and_rejects_unknown_fields() {
        let p = ShimPolicy {
            version: SHIM_POLICY_VERSION,
            allow: v(&["jq *"]),
            deny: v(&["jq --rawfile *"]),
            essentials: v(&["cat", "sh"]),
            commands: BTreeMap::from([("jq".to_string(), "/usr/bin/jq".to_string())]),
        };
        let text = serde_json::to_string(&p).unwrap_or_default();
        assert_eq!(
            text,
            r#"{"version":1,"allow":["jq *"],"deny":["jq --rawfile *"],"essentials":["cat","sh"],"commands":{"jq":"/usr/bin/jq"}}"#
        );
        assert_eq!(serde_json::from_str::<ShimPolicy>(&text).ok(), Some(p));
        assert!(
            serde_json::from_str::<ShimPolicy>(
                &text.replace("\"version\"", "\"extra\":1,\"version\"")
            )
            .is_err()
        );
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
