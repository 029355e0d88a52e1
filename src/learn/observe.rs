//! The observing run of `band learn`, as data: the band it runs under ([`learning_policy`]), the
//! commands it makes available ([`candidate_commands`]), and what its result says it did
//! ([`observations`]). Pure.
//!
//! What is observed, and how:
//!
//! - **Commands**: every call through the CLI gate (band-shim asks band-server, which records the
//!   argv; a static binary or a direct `execve` cannot bypass it, since no other program is
//!   executable in the sandbox). A command must be on the sandbox's PATH to be called, so the
//!   learning band declares every host program the skill's files name ([`candidate_commands`]),
//!   plus the `#!` interpreter of the entry; a program named nowhere in the skill is not found,
//!   and the learn run says so.
//! - **Workspace files**: read and written, by band-server's fanotify mark on the run's own
//!   filesystem ([`crate::proto::RunResult::observed`]). The workspace is a copy: nothing is
//!   written back to the real one.
//! - **Names and connections**: the DNS stub records every question and the run's nftables table
//!   every destination. Without `--net` nothing is reachable (the only allowed host is
//!   [`NO_NET_HOST`], which does not exist), but every name the script looks up is recorded.
//! - **Secrets**: the environment cannot be observed from outside a process; a secret offered to
//!   the run (declared, or `--secret NAME`) is drafted when the skill's files name it.

use std::collections::BTreeSet;

use super::{Connect, Observations};
use crate::policy::Policy;
use crate::proto::RunResult;

/// The one host the learning band allows without `--net`: under `.invalid` (RFC 6761), so it
/// never resolves. It makes band-server start the DNS stub, which records every question.
pub const NO_NET_HOST: &str = "band-learn.invalid:9";

/// Commands every band gets without a rule (band-server's `shim::ESSENTIALS`; a test there keeps
/// the two lists equal). A call of one is allowed unchecked, so it needs no rule in a draft.
pub const ESSENTIALS: &[&str] = &[
    "sh", "bash", "env", "cat", "echo", "printf", "test", "true", "false", "head", "tail", "grep",
    "sed", "awk", "sort", "uniq", "wc", "tr", "cut", "mkdir", "rm", "cp", "mv", "touch", "date",
    "sleep", "mktemp", "basename", "dirname", "tee", "xargs", "ls",
];

/// Commands band-server never makes available (its `request::FORBIDDEN_COMMANDS`).
pub const FORBIDDEN: &[&str] = &["sudo", "su", "doas", "pkexec", "bwrap", "band-server"];

fn is_word(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.starts_with(|c: char| c.is_ascii_alphabetic())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-'))
}

/// The `#!` interpreter of a script: `#!/usr/bin/env python3` → `python3`, `#!/bin/bash -e` →
/// `bash`.
pub fn shebang_command(text: &str) -> Option<String> {
    let line = text.strip_prefix("#!")?.lines().next()?;
    let mut words = line.split_whitespace();
    let prog = words.next()?.rsplit('/').next()?;
    let name = if prog == "env" {
        words.find(|w| !w.starts_with('-'))?
    } else {
        prog
    };
    is_word(name).then(|| name.to_string())
}

/// Every word of `texts` that names a program on the host (`is_program`), except the essentials
/// (always there) and the forbidden ones (never there); sorted.
pub fn candidate_commands(texts: &[&str], is_program: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut seen = BTreeSet::new();
    for t in texts {
        for w in
            t.split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-')))
        {
            let w = w.trim_end_matches('.');
            if is_word(w)
                && !ESSENTIALS.contains(&w)
                && !FORBIDDEN.contains(&w)
                && !seen.contains(w)
                && is_program(w)
            {
                seen.insert(w.to_string());
            }
        }
    }
    seen.into_iter().collect()
}

/// The policy the observing run uses: the current one (its deny rules and limits kept, nothing
/// insisted), with every candidate command allowed with any arguments, the whole workspace
/// readable and writable (it is a copy), and the network either open (`net`: `*`, band-server
/// still refuses private and local addresses) or only [`NO_NET_HOST`]. `secrets`: the names
/// offered to the run.
pub fn learning_policy(
    current: &Policy,
    candidates: &[String],
    net: bool,
    secrets: &[String],
) -> Policy {
    let mut p = current.clone();
    p.insist = Default::default();
    p.required_secrets.clear();
    for c in candidates {
        let rule = format!("{c} *");
        if !p.allow.cli.contains(&rule) {
            p.allow.cli.push(rule);
        }
    }
    p.allow.read = vec!["**".into()];
    p.allow.write = vec!["**".into()];
    p.allow.net = vec![if net { "*".into() } else { NO_NET_HOST.into() }];
    for s in secrets {
        if !p.secrets.contains(s) {
            p.secrets.push(s.clone());
        }
    }
    p
}

/// What an observing run's result says it did. `secrets`: the names offered to the run, kept
/// when `texts` (the skill's files) name them. Calls allowed without a rule (the essentials) and
/// calls a deny rule refused need no draft rule and are left out.
pub fn observations(result: &RunResult, secrets: &[String], texts: &[&str]) -> Observations {
    let mut o = Observations::default();
    for c in &result.cli_calls {
        if c.allowed && c.rule.is_some() {
            o.execs.push(c.argv.clone());
        }
    }
    if let Some(seen) = &result.observed {
        o.reads.extend(seen.reads.iter().cloned());
        o.writes.extend(seen.writes.iter().cloned());
    }
    if let Some(net) = &result.network {
        o.lookups.extend(net.lookups.iter().map(|l| l.name.clone()));
        for f in net.contacted.iter().chain(&net.denied) {
            o.connects.push(Connect {
                host: f.names.first().cloned().unwrap_or_else(|| f.addr.clone()),
                port: f.port,
            });
        }
    }
    for s in secrets {
        if texts.iter().any(|t| t.contains(s.as_str())) {
            o.secrets.push(s.clone());
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::proto::{CliCall, DnsLookup, Layer, NetFlow, NetworkReport, Observed};

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn shebangs_name_their_interpreter() {
        assert_eq!(
            shebang_command("#!/usr/bin/env python3\nx"),
            Some("python3".into())
        );
        assert_eq!(
            shebang_command("#!/usr/bin/env -S node --x\n"),
            Some("node".into())
        );
        assert_eq!(shebang_command("#!/bin/bash -e\n"), Some("bash".into()));
        assert_eq!(shebang_command("echo hi\n"), None);
    }

    #[test]
    fn candidates_are_host_programs_named_in_the_files_without_essentials_or_forbidden_ones() {
        let host = ["gh", "jq", "cat", "sudo", "python3"];
        let is = |w: &str| host.contains(&w);
        let got = candidate_commands(
            &[
                "#!/bin/sh\ngh issue list | jq -r .x\ncat f; sudo x\n",
                "python3.\nnot-a-program",
            ],
            &is,
        );
        assert_eq!(got, s(&["gh", "jq", "python3"]));
    }

    #[test]
    fn the_learning_policy_keeps_denies_and_limits_and_opens_only_what_it_must() {
        let mut cur = Policy::default();
        cur.allow.cli = s(&["jq -r .a /band/io/input.json"]);
        cur.allow.read = s(&["data/**"]);
        cur.deny.read = s(&["**/.env*"]);
        cur.insist.cli = s(&["jq *"]);
        cur.limits.max_pids = Some(8);
        cur.required_secrets = s(&["T"]);
        let p = learning_policy(&cur, &s(&["gh", "jq"]), false, &s(&["GH_TOKEN"]));
        assert_eq!(
            p.allow.cli,
            s(&["jq -r .a /band/io/input.json", "gh *", "jq *"])
        );
        assert_eq!(p.allow.read, s(&["**"]));
        assert_eq!(p.allow.write, s(&["**"]));
        assert_eq!(p.allow.net, s(&[NO_NET_HOST]));
        assert_eq!(p.deny.read, s(&["**/.env*"]));
        assert!(p.insist.is_empty());
        assert!(p.required_secrets.is_empty());
        assert_eq!(p.limits.max_pids, Some(8));
        assert_eq!(p.secrets, s(&["GH_TOKEN"]));
        assert_eq!(learning_policy(&cur, &[], true, &[]).allow.net, s(&["*"]));
        assert!(crate::policy::net::NetPattern::parse(NO_NET_HOST).is_ok());
    }

    #[test]
    fn observations_keep_ruled_calls_files_names_destinations_and_named_secrets() {
        let mut r = RunResult::setup_failed("0123456789abcdef", Layer::Cli, "", None);
        r.error = None;
        r.cli_calls = vec![
            CliCall {
                argv: s(&["gh", "issue", "list"]),
                allowed: true,
                rule: Some("gh *".into()),
            },
            CliCall {
                argv: s(&["cat", "x"]),
                allowed: true,
                rule: None,
            },
            CliCall {
                argv: s(&["rm", "-rf", "/"]),
                allowed: false,
                rule: Some("rm -rf *".into()),
            },
        ];
        r.observed = Some(Observed {
            reads: s(&["data/in.csv"]),
            writes: s(&["out/r.md"]),
            complete: true,
            outside: Vec::new(),
        });
        r.network = Some(NetworkReport {
            lookups: vec![DnsLookup {
                name: "api.test".into(),
                qtype: "A".into(),
                allowed: true,
                addrs: s(&["10.9.0.2"]),
                withheld: vec![],
            }],
            contacted: vec![NetFlow {
                addr: "10.9.0.2".into(),
                proto: "tcp".into(),
                port: 8080,
                names: s(&["api.test"]),
            }],
            denied: vec![],
        });
        let o = observations(&r, &s(&["GH_TOKEN", "UNUSED"]), &["gh auth with $GH_TOKEN"]);
        assert_eq!(o.execs, vec![s(&["gh", "issue", "list"])]);
        assert_eq!(o.reads, s(&["data/in.csv"]));
        assert_eq!(o.writes, s(&["out/r.md"]));
        assert_eq!(o.lookups, s(&["api.test"]));
        assert_eq!(
            o.connects,
            vec![Connect {
                host: "api.test".into(),
                port: 8080
            }]
        );
        assert_eq!(o.secrets, s(&["GH_TOKEN"]));
    }
}
