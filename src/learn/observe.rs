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
//!   plus the `#!` interpreter of the entry; a program the run tried and did not find
//!   ([`tried_commands`]) is added and the run observed again when this host has it.
//! - **Workspace files**: read and written, and the folders listed (their entries read), by
//!   band-server's fanotify mark on the run's own filesystem
//!   ([`crate::proto::RunResult::observed`]). The workspace is a copy: nothing is written back to
//!   the real one.
//! - **Paths outside the workspace**: every open and exec, seen by band-server through the
//!   jail's seccomp user-notification filter ([`crate::proto::Observed::outside`]), sorted into
//!   rules and notes by [`sort_outside`].
//! - **Names and connections**: the DNS stub records every question and the run's nftables table
//!   every destination. Without `--net` nothing is reachable (the only allowed host is
//!   [`NO_NET_HOST`], which does not exist), but every name the script looks up is recorded.
//! - **Secrets**: the environment cannot be observed from outside a process; a secret offered to
//!   the run (declared, or `--secret NAME`) is drafted when the skill's files name it.

use std::collections::BTreeSet;

use super::{Connect, Observations};
use crate::policy::Policy;
use crate::policy::fs::FsPattern;
use crate::policy::place::{Place, place};
use crate::proto::{Access, Denial, PathSeen, RunResult};

/// The one host the learning band allows without `--net`: under `.invalid` (RFC 6761), so it
/// never resolves. It makes band-server start the DNS stub, which records every question.
pub const NO_NET_HOST: &str = "band-learn.invalid:9";

pub use crate::policy::cli::ESSENTIALS;

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
///
/// `folders`: the workspace's empty folders (workspace-relative), each allowed as `folder/`,
/// so the sandbox makes it as the real workspace has it: a run sends files, not folders, and a
/// script that writes into an existing empty `out/` must find it (under `band run` a band's
/// write rule in `out/` makes it the same way).
pub fn learning_policy(
    current: &Policy,
    candidates: &[String],
    net: bool,
    secrets: &[String],
    folders: &[String],
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
    // Everything, and the folders a run copies only when the band names them (`.git/**`,
    // `target/**`): named by the band, they are in the observed run's workspace too.
    let named_skipped: Vec<String> = current
        .allow
        .read
        .iter()
        .filter(|r| {
            let Ok(pat) = FsPattern::parse(r) else {
                return false;
            };
            // As the workspace copy decides (`client::workspace::names_skipped`, on the client
            // side): an anchored pattern whose literal prefix is the folder or below it.
            !pat.is_absolute()
                && pat.is_anchored()
                && pat
                    .static_prefix()
                    .split('/')
                    .any(|c| c == ".git" || c == "target")
        })
        .cloned()
        .collect();
    p.allow.read = std::iter::once("**".to_string())
        .chain(named_skipped)
        .collect();
    p.allow.write = vec!["**".into()];
    for f in folders {
        let rule = format!("{f}/");
        // A name with glob characters would be a pattern: that folder is not made.
        if !f.contains(['*', '?', '[', ']', '{', '}', '\\'])
            && FsPattern::parse(&rule).is_ok()
            && !p.allow.write.contains(&rule)
        {
            p.allow.write.push(rule);
        }
    }
    p.allow.net = vec![if net { "*".into() } else { NO_NET_HOST.into() }];
    // `*` never opens a port of the host's loopback: with `--net`, the ports the band opens stay
    // open, so the run uses them and the draft keeps them (`localhost:P`).
    if net {
        p.allow.net.extend(
            current
                .allow
                .net
                .iter()
                .filter(|r| {
                    crate::policy::net::NetPattern::parse(r)
                        .is_ok_and(|n| n.loopback_port().is_some())
                })
                .cloned(),
        );
    }
    // A bound secret stays bound in the observing run too (its value never enters a sandbox):
    // with `--net` its hosts are named beside `*`, so the egress proxy serves them; without
    // network it could go nowhere, and the run does not get it.
    if net {
        for hosts in current.secret_hosts.values() {
            for h in hosts {
                if !p.allow.net.contains(h) {
                    p.allow.net.push(h.clone());
                }
            }
        }
    } else {
        p.secrets.retain(|s| !current.secret_hosts.contains_key(s));
        p.secret_hosts.clear();
    }
    for s in secrets {
        if !p.secrets.contains(s) {
            p.secrets.push(s.clone());
        }
    }
    p
}

/// Trees of the sandbox's own machinery: what the jail, band-shim and the skill's files do there
/// is not the script asking for a host path.
const SANDBOX_OWN: &[&str] = &["/band", "/skill", "/workspace", "/proc", "/dev", "/sys"];

/// Configuration files the C library and common runtimes look for on their own and do without
/// (time zone, resolver, name service, loader, shell and locale settings). The sandbox's own
/// `/etc` leaves most of them out on purpose; a run that looked for them is not asking for the
/// host's copy, so they are noted, not drafted.
pub const SYSTEM_PROBES: &[&str] = &[
    "/etc/localtime",
    "/etc/timezone",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/nsswitch.conf",
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/services",
    "/etc/protocols",
    "/etc/networks",
    "/etc/passwd",
    "/etc/group",
    "/etc/shells",
    "/etc/mtab",
    "/etc/ld.so.preload",
    "/etc/ld.so.conf",
    "/etc/ld.so.cache",
    "/etc/locale.alias",
    "/etc/locale.conf",
    "/etc/default/locale",
    "/etc/environment",
    "/etc/inputrc",
    "/etc/bash.bashrc",
    "/etc/profile",
    "/etc/mime.types",
    "/etc/magic",
    "/etc/ssl/openssl.cnf",
];

/// Sort what the run opened outside the workspace ([`crate::proto::Observed::outside`]) into
/// absolute reads and writes to draft, and notes. `bound`: whether a rule of the learning band
/// binds the path (with `write`: writable). Per path, by [`place`]:
///
/// - the run's own `/tmp`, system content every band gets (`/usr/lib`, the loader, libc), the
///   sandbox's own trees, and other `/usr` paths (which no rule can show): no rule, left out;
/// - a path no band may name (lint's P010: `/etc` as a whole, `/root`, `/run`): a note;
/// - a host path the sandbox showed without a rule (its own `/etc` files): left out;
/// - one of the [`SYSTEM_PROBES`] the sandbox hid: one note, not drafted;
/// - a host path the sandbox hid (the call found nothing there) that exists on band-server's
///   host, or one a rule of the band bound: drafted (`hidden` lists the former, for evidence);
/// - a path that exists neither in the sandbox nor on the host: a note (no rule can make it).
///
/// Execs are the gate's business (commands), and are not sorted here.
pub fn sort_outside(seen: &[PathSeen], bound: &dyn Fn(&str, bool) -> bool, o: &mut Observations) {
    let mut probes: Vec<&str> = Vec::new();
    for p in seen {
        let write = match p.access {
            Access::Read => false,
            Access::Write => true,
            Access::Exec => continue,
        };
        let verb = if write { "wrote" } else { "read" };
        if SANDBOX_OWN
            .iter()
            .any(|r| std::path::Path::new(&p.path).starts_with(r))
        {
            continue;
        }
        if FsPattern::parse(&p.path).is_err() || p.path.contains(['*', '?', '[', '{']) {
            o.notes.push(format!(
                "{verb} `{}` outside the workspace: its name is not a plain path; write a rule by hand",
                p.path
            ));
            continue;
        }
        match place(&p.path, write) {
            None | Some(Place::PrivateTmp | Place::Shown(_) | Place::NotShown(_)) => {}
            Some(Place::Refused { message, .. }) => o.notes.push(format!(
                "{verb} `{}` outside the workspace: no band may name it ({message})",
                p.path
            )),
            Some(Place::Host(_)) => {
                let by_rule = bound(&p.path, write);
                if p.in_sandbox && !by_rule {
                    continue;
                }
                if !by_rule && SYSTEM_PROBES.contains(&p.path.as_str()) {
                    if !probes.contains(&p.path.as_str()) {
                        probes.push(&p.path);
                    }
                    continue;
                }
                if !p.in_sandbox && !p.on_host {
                    o.notes.push(format!(
                        "tried to {} `{}`, which exists neither in the sandbox nor on the host: no rule can provide it",
                        if write { "write" } else { "read" },
                        p.path
                    ));
                    continue;
                }
                if !p.in_sandbox {
                    o.hidden.push(p.path.clone());
                }
                if write {
                    o.writes.push(p.path.clone());
                } else {
                    o.reads.push(p.path.clone());
                }
            }
        }
    }
    if !probes.is_empty() {
        o.notes.push(format!(
            "the run looked for {}, which the sandbox does not provide; programs look for these on their own and do without (not drafted: add a rule by hand if the script needs the host's copy)",
            probes.join(", ")
        ));
    }
}

/// Commands the run tried to start that were not in its sandbox: the last component of every
/// exec of a path the sandbox did not have (`seen`: a shell's PATH search tries each folder, and
/// dash execs each), and the command of every call the gate refused with no rule deciding
/// (`denied`: bash reports a command it did not find that way). Words only, forbidden commands
/// left out; sorted.
pub fn tried_commands(seen: &[PathSeen], denied: &[Denial]) -> Vec<String> {
    let mut out = BTreeSet::new();
    let execs = seen
        .iter()
        .filter(|p| p.access == Access::Exec && !p.in_sandbox)
        .map(|p| p.path.as_str());
    let calls = denied.iter().filter_map(|d| match d {
        Denial::Cli {
            argv, rule: None, ..
        } => argv.first().map(String::as_str),
        _ => None,
    });
    for path in execs.chain(calls) {
        if let Some(name) = path.rsplit('/').next()
            && is_word(name)
            && !FORBIDDEN.contains(&name)
            && !is_data_file(name)
        {
            out.insert(name.to_string());
        }
    }
    out.into_iter().collect()
}

/// A name with a file extension (`pyvenv.cfg`, `python3._pth`): a file a program looks for next
/// to itself, not a command (`python3.11` is one).
fn is_data_file(name: &str) -> bool {
    name.rsplit_once('.')
        .is_some_and(|(_, ext)| ext.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'))
}

/// Whether an absolute allow rule of `policy` covers `path` (for a read, an allow.write rule
/// does too).
pub fn bound_by(policy: &Policy, path: &str, write: bool) -> bool {
    let rules = if write {
        &policy.allow.write
    } else {
        &policy.allow.read
    };
    rules
        .iter()
        .any(|r| FsPattern::parse(r).is_ok_and(|pat| pat.is_absolute() && pat.matches(path)))
        || (!write && bound_by(policy, path, true))
}

/// What an observing run's result says it did. `secrets`: the names offered to the run, kept
/// when `texts` (the skill's files) name them. Calls allowed without a rule (the essentials) and
/// calls a deny rule refused need no draft rule and are left out. `policy`: the learning band
/// (which paths outside the workspace its rules bind, see [`sort_outside`]).
pub fn observations(
    result: &RunResult,
    secrets: &[String],
    texts: &[&str],
    policy: &Policy,
) -> Observations {
    let mut o = Observations::default();
    for c in &result.cli_calls {
        if c.allowed && c.rule.is_some() {
            o.execs.push(c.argv.clone());
        }
    }
    if let Some(seen) = &result.observed {
        o.reads.extend(seen.reads.iter().cloned());
        o.writes.extend(seen.writes.iter().cloned());
        o.listed.extend(seen.listed.iter().cloned());
        sort_outside(
            &seen.outside,
            &|p: &str, w: bool| bound_by(policy, p, w),
            &mut o,
        );
    }
    o.runs = 1;
    o.exec_runs = vec![0; o.execs.len()];
    if let Some(net) = &result.network {
        o.lookups.extend(net.lookups.iter().map(|l| l.name.clone()));
        // With the network open (`*`), a name looked up could have been contacted.
        if policy.allow.net.iter().any(|r| r == "*") {
            o.net_lookups = o.lookups.clone();
        }
        o.http.extend(net.requests.iter().cloned());
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

/// Most values of an input document [`data_values`] takes.
const MAX_DATA_VALUES: usize = 10_000;

/// The values a run got as data, each as a command line would carry it: every string and number
/// of the input document `input` (its `args` included), and each workspace file of `files`
/// (workspace-relative) as `path`, `./path` and `/workspace/path`. Booleans and null are left
/// out (a `true` in a command line is rarely the input's).
pub fn data_values(input: &serde_json::Value, files: &[String]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![input];
    while let Some(v) = stack.pop() {
        if out.len() >= MAX_DATA_VALUES {
            break;
        }
        match v {
            serde_json::Value::String(s) if !s.is_empty() => {
                out.insert(s.clone());
            }
            serde_json::Value::Number(n) => {
                out.insert(n.to_string());
            }
            serde_json::Value::Array(a) => stack.extend(a),
            serde_json::Value::Object(m) => stack.extend(m.values()),
            _ => {}
        }
    }
    for f in files {
        out.insert(f.clone());
        out.insert(format!("./{f}"));
        out.insert(format!("/workspace/{f}"));
    }
    out
}

/// The arguments of `execs` (after the command) that came from a run's data: what
/// [`super::Observations::data`] keeps, so a saved file holds only the values that matter, not
/// the whole input. An argument is data when it is in `values`, or when it is a path
/// ([`workspace_path`]: `src//a.txt` and `/workspace/src/a.txt` are `src/a.txt`) that
///
/// - names a workspace file of `values`, however spelled;
/// - lies in a folder the run listed (`listed`, below the root): a script that walks a folder
///   names the files it finds, and the next input's differ;
/// - is a name a temporary-file maker chose in the run's own `/tmp` ([`is_run_temp`]:
///   `mktemp`'s `/tmp/tmp.Xa81Kq0pZm`).
pub fn data_in_calls(
    execs: &[Vec<String>],
    values: &BTreeSet<String>,
    listed: &[String],
) -> Vec<String> {
    let listed: Vec<&str> = listed
        .iter()
        .map(String::as_str)
        .filter(|l| *l != "." && !l.is_empty())
        .collect();
    let is_data = |value: &str| {
        values.contains(value)
            || is_run_temp(value)
            || workspace_path(value).is_some_and(|p| {
                values.contains(&p)
                    || listed.iter().any(|l| {
                        p.strip_prefix(l)
                            .is_some_and(|rest| rest.starts_with('/') && rest.len() > 1)
                    })
            })
    };
    let mut out = BTreeSet::new();
    for argv in execs {
        for a in argv.iter().skip(1) {
            let value = match a.split_once('=') {
                Some((name, v)) if name.starts_with("--") && !values.contains(a) => v,
                _ => a.as_str(),
            };
            if is_data(value) {
                out.insert(value.to_string());
            }
        }
    }
    out.into_iter().collect()
}

/// A command-line word as a workspace-relative path: `./`, `.` segments and repeated `/`
/// dropped, `/workspace/` taken off (`./src//a.txt` and `/workspace/src/a.txt` are both
/// `src/a.txt`). `None` for a word that is not such a path: another absolute path, one with a `..`
/// segment, a URL, a flag, or one with no name left.
pub fn workspace_path(word: &str) -> Option<String> {
    if word.starts_with('-') || word.contains("://") || word.contains('\n') {
        return None;
    }
    let rel = match word.strip_prefix("/workspace/") {
        Some(rest) => rest.trim_start_matches('/'),
        None if word.starts_with('/') => return None,
        None => word,
    };
    super::clean_path(rel)
}

/// Whether a command-line word is a path in the run's `/tmp` (a tmpfs of its own, empty when
/// the run starts) with a name a temporary-file maker chose: the next run's differs. A fixed name
/// (`/tmp/data.json`) is the script's own and stays literal.
pub fn is_run_temp(word: &str) -> bool {
    word.strip_prefix("/tmp/").is_some_and(|rest| {
        !rest.split('/').any(|p| p == "..") && rest.split('/').any(looks_generated)
    })
}

/// A file name a temporary-file maker chose:
///
/// - `mktemp`'s default, `tmp.` and at least six letters and digits;
/// - Python's `tempfile`, `tmp` and at least six of `[a-z0-9_]` with a digit or `_` among them
///   (a suffix such as `.json` after them);
/// - a template's run of random characters (`mktemp out.XXXXXX`, node's `mkdtemp`): six or more
///   letters and digits with an upper-case letter, a lower-case one and a digit among them.
fn looks_generated(name: &str) -> bool {
    let alnum = |t: &str| t.len() >= 6 && t.bytes().all(|b| b.is_ascii_alphanumeric());
    if name
        .strip_prefix("tmp.")
        .is_some_and(|t| alnum(t.split('.').next().unwrap_or("")))
    {
        return true;
    }
    if let Some(t) = name.strip_prefix("tmp") {
        let t = t.split('.').next().unwrap_or("");
        if t.len() >= 6
            && t.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            && t.bytes().any(|b| b.is_ascii_digit() || b == b'_')
        {
            return true;
        }
    }
    name.split(|c: char| !c.is_ascii_alphanumeric()).any(|run| {
        run.len() >= 6
            && run.bytes().any(|b| b.is_ascii_uppercase())
            && run.bytes().any(|b| b.is_ascii_lowercase())
            && run.bytes().any(|b| b.is_ascii_digit())
    })
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
        let p = learning_policy(&cur, &s(&["gh", "jq"]), false, &s(&["GH_TOKEN"]), &[]);
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
        assert_eq!(
            learning_policy(&cur, &[], true, &[], &[]).allow.net,
            s(&["*"])
        );
        // The band's loopback ports stay open with --net (`*` opens none), and only those.
        cur.allow.net = s(&["localhost:18000", "api.example.test", "[::1]:9000"]);
        assert_eq!(
            learning_policy(&cur, &[], true, &[], &[]).allow.net,
            s(&["*", "localhost:18000", "[::1]:9000"])
        );
        assert_eq!(
            learning_policy(&cur, &[], false, &[], &[]).allow.net,
            s(&[NO_NET_HOST])
        );
        assert!(crate::policy::net::NetPattern::parse(NO_NET_HOST).is_ok());
        // A bound secret stays bound: with --net its host is named, so the proxy serves it;
        // without network the run does not get it at all.
        let mut bound = cur.clone();
        bound.secrets = s(&["PLAIN", "API_TOKEN"]);
        bound.secret_hosts = [("API_TOKEN".to_string(), s(&["api.example.test"]))].into();
        let with_net = learning_policy(&bound, &[], true, &[], &[]);
        assert_eq!(
            with_net.allow.net,
            s(&["*", "localhost:18000", "[::1]:9000", "api.example.test"])
        );
        assert_eq!(with_net.secret_hosts, bound.secret_hosts);
        let offline = learning_policy(&bound, &[], false, &[], &[]);
        assert_eq!(offline.secrets, s(&["PLAIN"]));
        assert!(offline.secret_hosts.is_empty());
        // A folder a run copies only when the band names it (`.git`, `target`): named, it is in
        // the observed run's workspace too; `**` alone never names it.
        cur.allow.read = s(&["**", ".git/**", "sub/.git/**", "target/*.log", "/etc/x"]);
        assert_eq!(
            learning_policy(&cur, &[], false, &[], &[]).allow.read,
            s(&["**", ".git/**", "sub/.git/**", "target/*.log"])
        );
    }

    #[test]
    fn observations_keep_ruled_calls_files_folders_listed_names_destinations_and_named_secrets() {
        let mut r = RunResult::setup_failed("0123456789abcdef", Layer::Cli, "", None);
        r.error = None;
        r.cli_calls = vec![
            CliCall {
                argv: s(&["gh", "issue", "list"]),
                allowed: true,
                rule: Some("gh *".into()),
                source: None,
            },
            CliCall {
                argv: s(&["cat", "x"]),
                allowed: true,
                rule: None,
                source: None,
            },
            CliCall {
                argv: s(&["rm", "-rf", "/"]),
                allowed: false,
                rule: Some("rm -rf *".into()),
                source: None,
            },
        ];
        r.observed = Some(Observed {
            reads: s(&["data/in.csv"]),
            writes: s(&["out/r.md"]),
            complete: true,
            outside: Vec::new(),
            listed: s(&[".", "src"]),
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
            requests: Vec::new(),
            lookups_dropped: 0,
        });
        let o = observations(
            &r,
            &s(&["GH_TOKEN", "UNUSED"]),
            &["gh auth with $GH_TOKEN"],
            &Policy::default(),
        );
        assert_eq!(o.execs, vec![s(&["gh", "issue", "list"])]);
        assert_eq!(o.reads, s(&["data/in.csv"]));
        assert_eq!(o.writes, s(&["out/r.md"]));
        assert_eq!(o.listed, s(&[".", "src"]));
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

    fn seen(path: &str, access: Access, in_sandbox: bool, on_host: bool) -> PathSeen {
        PathSeen {
            path: path.into(),
            access,
            in_sandbox,
            on_host,
        }
    }

    #[test]
    fn outside_paths_are_drafted_only_when_a_band_must_name_them() {
        let seen = [
            // Hidden in the sandbox, on the host: the band must allow it (the draft names the
            // read below /srv; /etc and a write outside the workspace only get notes).
            seen("/srv/band-probe.conf", Access::Read, false, true),
            seen("/etc/band-probe.conf", Access::Read, false, true),
            seen("/srv/out/r.txt", Access::Write, false, true),
            // Shown by the sandbox without a rule (its own /etc), system content, /tmp.
            seen("/etc/passwd", Access::Read, true, true),
            seen("/lib/x86_64-linux-gnu/libc.so.6", Access::Read, true, true),
            seen("/usr/share/zoneinfo/UTC", Access::Read, true, true),
            seen("/tmp/x", Access::Write, true, true),
            // Bound by a rule of the band: kept.
            seen("/data/in.csv", Access::Read, true, true),
            // The sandbox's own machinery.
            seen("/band/bin/jq", Access::Exec, true, false),
            seen("/skill/run.sh", Access::Read, true, false),
            seen("/band/sock", Access::Write, true, false),
            // No band may name it; nowhere at all.
            seen("/root/.netrc", Access::Read, false, true),
            seen("/opt/none/y", Access::Read, false, false),
            // Looked for by the C library on its own: one note.
            seen("/etc/localtime", Access::Read, false, true),
            seen("/etc/host.conf", Access::Read, false, true),
        ];
        let mut p = Policy::default();
        p.allow.read = s(&["/data/**"]);
        let mut o = Observations::default();
        sort_outside(&seen, &|path: &str, w: bool| bound_by(&p, path, w), &mut o);
        assert_eq!(
            o.reads,
            s(&[
                "/srv/band-probe.conf",
                "/etc/band-probe.conf",
                "/data/in.csv"
            ])
        );
        assert_eq!(o.writes, s(&["/srv/out/r.txt"]));
        assert_eq!(
            o.hidden,
            s(&[
                "/srv/band-probe.conf",
                "/etc/band-probe.conf",
                "/srv/out/r.txt"
            ])
        );
        assert_eq!(o.notes.len(), 3, "{:?}", o.notes);
        assert!(o.notes[0].contains("/root/.netrc"), "{:?}", o.notes);
        assert!(o.notes[1].contains("/opt/none/y"), "{:?}", o.notes);
        assert!(
            o.notes[2].contains("/etc/localtime, /etc/host.conf"),
            "{:?}",
            o.notes
        );
        let d = crate::learn::draft_with(&o, &[]);
        assert_eq!(
            d.read.iter().map(|r| r.rule.as_str()).collect::<Vec<_>>(),
            ["/data/in.csv", "/srv/band-probe.conf"]
        );
        assert!(
            d.read[1].evidence.contains("not in the sandbox"),
            "{:?}",
            d.read
        );
        assert!(d.write.is_empty(), "{:?}", d.write);
        assert_eq!(d.notes.len(), 5, "{:?}", d.notes);
        assert!(d.notes[0].contains("/srv/out/r.txt"), "{:?}", d.notes);
        assert!(d.notes[1].contains("/etc/band-probe.conf"), "{:?}", d.notes);
    }

    #[test]
    fn data_is_the_inputs_strings_and_numbers_and_the_workspaces_paths_found_in_calls() {
        let input =
            serde_json::json!({"n": 4, "name": "ada", "on": true, "args": ["-x", ["deep"]]});
        let values = data_values(&input, &s(&["data/in.csv"]));
        for v in [
            "4",
            "ada",
            "-x",
            "deep",
            "data/in.csv",
            "./data/in.csv",
            "/workspace/data/in.csv",
        ] {
            assert!(values.contains(v), "{v}: {values:?}");
        }
        assert!(!values.contains("true"), "{values:?}");
        let calls = vec![
            s(&["jq", "-n", "--argjson", "n", "4", "."]),
            s(&["python3", "x.py", "--name=ada", "/workspace/data/in.csv"]),
            s(&["4", "true"]),
        ];
        assert_eq!(
            data_in_calls(&calls, &values, &[]),
            s(&["/workspace/data/in.csv", "4", "ada"])
        );
    }

    #[test]
    fn paths_are_data_however_spelled_in_a_listed_folder_or_in_the_runs_tmp() {
        let values = data_values(&serde_json::Value::Null, &s(&["uia/ha.json", "top.txt"]));
        let calls = vec![
            // A folder given with a trailing `/` and globbed: `uia//ha.json`.
            s(&["jq", "-e", ".x", "uia//ha.json"]),
            s(&["wc", "./top.txt", "/workspace//top.txt"]),
            // A file the run made in the folder it walks, and one in a deeper folder of it.
            s(&["gzip", "uia/new.json", "uia/b/c.json"]),
            // `mktemp`'s name; the run's `/tmp` itself is no name.
            s(&["mv", "/tmp/tmp.Xa81Kq0pZm", "uia//ha.json"]),
            s(&[
                "ls",
                "/tmp/",
                "/tmp/../etc/x",
                "uia/",
                "uia/../x",
                "other/y",
                "/etc/hosts",
            ]),
            // The script's own names in `/tmp` stay literal.
            s(&[
                "jq",
                "-c",
                ".",
                "/tmp/data.json",
                "/tmp/results",
                "/tmp/auth",
            ]),
        ];
        assert_eq!(
            data_in_calls(&calls, &values, &s(&[".", "uia"])),
            s(&[
                "./top.txt",
                "/tmp/tmp.Xa81Kq0pZm",
                "/workspace//top.txt",
                "uia//ha.json",
                "uia/b/c.json",
                "uia/new.json",
            ])
        );
        // Not listed: only the workspace's own files are.
        assert_eq!(
            data_in_calls(&calls[2..3], &values, &s(&["."])),
            Vec::<String>::new()
        );
        for made in [
            "/tmp/tmp.Xa81Kq0pZm",
            "/tmp/tmp.abcdefghij/out.json",
            "/tmp/tmpk2j_h4g5.json",
            "/tmp/band-aB3kQ9",
            "/tmp/out.Zq7Rw2",
        ] {
            assert!(is_run_temp(made), "{made}");
        }
        for fixed in [
            "/tmp/data.json",
            "/tmp/results",
            "/tmp/tmpresults",
            "/tmp/MyReport.json",
            "/tmp/report2024.json",
            "/tmp/",
            "/tmp/tmp.Xa81Kq0pZm/../x",
            "/var/tmp/tmp.Xa81Kq0pZm",
        ] {
            assert!(!is_run_temp(fixed), "{fixed}");
        }
        assert_eq!(workspace_path("./a//b/./c"), Some("a/b/c".into()));
        assert_eq!(workspace_path("/workspace/a"), Some("a".into()));
        for not in ["/etc/a", "a/../b", "--x", "https://h/a", ".", "./", ""] {
            assert_eq!(workspace_path(not), None, "{not}");
        }
    }

    #[test]
    fn the_learning_policy_makes_the_workspaces_empty_folders() {
        let p = learning_policy(
            &Policy::default(),
            &[],
            false,
            &[],
            &s(&["out", "a/b", "x*"]),
        );
        assert_eq!(p.allow.write, s(&["**", "out/", "a/b/"]));
    }

    #[test]
    fn commands_tried_and_not_found_are_the_names_of_missing_execs() {
        let seen = [
            seen("/band/bin/rg", Access::Exec, false, false),
            seen("/usr/bin/rg", Access::Exec, false, true),
            seen("/band/bin/sudo", Access::Exec, false, true),
            seen("/band/bin/jq", Access::Exec, true, false),
            seen("/etc/rg", Access::Read, false, true),
            // Python looks for its venv file next to itself: not a command.
            seen("/band/bin/pyvenv.cfg", Access::Exec, false, false),
            seen("/band/bin/python3.11", Access::Exec, false, true),
        ];
        let denied = [
            Denial::Cli {
                argv: s(&["uname", "-s"]),
                rule: None,
                source: None,
            },
            // Refused by a deny rule: the band decided, nothing to add.
            Denial::Cli {
                argv: s(&["curl", "x"]),
                rule: Some("curl *".into()),
                source: None,
            },
        ];
        assert_eq!(
            tried_commands(&seen, &denied),
            s(&["python3.11", "rg", "uname"])
        );
    }
}
