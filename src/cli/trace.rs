//! `band run --trace`: after a run, what the script tried and what the policy decided, as
//! evidence for tightening or fixing a band.
//!
//! Built only from what the run's result carries: every command call the wrapper saw
//! (`cli_calls`, with the rule that decided), the files copied back (`written`) and the empty
//! folders made (`written_folders`, named with a trailing `/`), the refusals
//! (`denied`), and for a run with `allow.net` its network report (every DNS question, every
//! destination reached or refused). Reads are not traced: a file the band does not admit does
//! not exist in the sandbox, so there is nothing to refuse.

use std::fmt::Write as _;

use band::policy::cli::CliPattern;
use band::proto::{CliCall, Denial, NetworkReport, RunResult};

/// The trace of one run. `allow_cli` is the band's `allow.cli`, to name the rules no call used;
/// `shared_with`, the skill's other scripts that band governs (which may use them).
pub(crate) fn render(result: &RunResult, allow_cli: &[String], shared_with: &[String]) -> String {
    let mut out = String::new();
    commands(&mut out, &result.cli_calls);
    files_and_refusals(&mut out, result);
    if let Some(net) = &result.network {
        network(&mut out, net);
    }
    unused_rules(&mut out, &result.cli_calls, allow_cli, shared_with);
    hints(&mut out, result);
    out
}

/// Every command call, with its verdict and the rule (or reason) that decided.
fn commands(out: &mut String, calls: &[CliCall]) {
    let _ = writeln!(out, "trace: {} command{}", calls.len(), plural(calls.len()));
    let width = calls
        .iter()
        .map(|c| display_argv(&c.argv).chars().count())
        .max()
        .unwrap_or(0)
        .min(60);
    for c in calls {
        let argv = display_argv(&c.argv);
        let _ = writeln!(out, "  {}  {argv:<width$}  {}", verdict(c.allowed), why(c));
    }
}

/// The files written back (and the empty folders the run made, when there are any), and the
/// refusals the command lines above do not show.
fn files_and_refusals(out: &mut String, result: &RunResult) {
    let calls = &result.cli_calls;
    let refused: Vec<&Denial> = result
        .denied
        .iter()
        .filter(|d| !matches!(d, Denial::Cli { argv, .. } if calls.iter().any(|c| &c.argv == argv)))
        .collect();
    let (files, folders) = (result.written.len(), result.written_folders.len());
    let _ = match folders {
        0 => writeln!(out, "trace: {files} file{} written back", plural(files)),
        _ => writeln!(
            out,
            "trace: {files} file{} and {folders} empty folder{} written back",
            plural(files),
            plural(folders)
        ),
    };
    for f in &result.written {
        let _ = writeln!(out, "  allowed  {}", band::diag::one_line(&f.path));
    }
    for d in &result.written_folders {
        let _ = writeln!(out, "  allowed  {}/", band::diag::one_line(d));
    }
    if !refused.is_empty() {
        let _ = writeln!(out, "trace: {} refused", refused.len());
        for d in refused {
            let _ = writeln!(out, "  denied   {}", describe(d));
        }
    }
}

/// A run with `allow.net`: every DNS question (and its answer), every destination reached or
/// refused.
fn network(out: &mut String, net: &NetworkReport) {
    let _ = writeln!(
        out,
        "trace: network: {} lookup{}, {} destination{} reached, {} refused",
        net.lookups.len(),
        plural(net.lookups.len()),
        net.contacted.len(),
        plural(net.contacted.len()),
        net.denied.len()
    );
    for l in &net.lookups {
        let answer = if l.addrs.is_empty() {
            String::new()
        } else {
            format!(" → {}", l.addrs.join(", "))
        };
        let withheld = if l.withheld.is_empty() {
            String::new()
        } else {
            format!(" (withheld: {})", l.withheld.join(", "))
        };
        let _ = writeln!(
            out,
            "  {}  lookup {} {}{answer}{withheld}",
            verdict(l.allowed),
            l.name,
            l.qtype
        );
    }
    if net.lookups_dropped > 0 {
        let _ = writeln!(
            out,
            "  … and {} more distinct lookup{}, counted, not kept",
            net.lookups_dropped,
            plural(net.lookups_dropped as usize)
        );
    }
    for (allowed, flows) in [(true, &net.contacted), (false, &net.denied)] {
        for f in flows {
            let names = if f.names.is_empty() {
                String::new()
            } else {
                format!(" ({})", f.names.join(", "))
            };
            let _ = writeln!(
                out,
                "  {}  {} {}:{}/{}{names}",
                verdict(allowed),
                if allowed { "reached" } else { "refused" },
                f.addr,
                f.port,
                f.proto
            );
        }
    }
}

/// The `allow.cli` rules no allowed call used (when any command ran): candidates to remove, when
/// the band governs no other script.
fn unused_rules(out: &mut String, calls: &[CliCall], allow_cli: &[String], shared_with: &[String]) {
    let unused: Vec<&String> = allow_cli
        .iter()
        .filter(|r| {
            !calls
                .iter()
                .any(|c| c.allowed && c.rule.as_ref() == Some(*r))
        })
        .collect();
    if !unused.is_empty() && !calls.is_empty() {
        let list = unused
            .iter()
            .map(|r| quoted(r))
            .collect::<Vec<_>>()
            .join(", ");
        let why = if shared_with.is_empty() {
            "candidates to remove".to_string()
        } else {
            let names: Vec<String> = shared_with.iter().map(|s| format!("`{s}`")).collect();
            format!(
                "the band also governs {}, which may need them",
                names.join(", ")
            )
        };
        let _ = writeln!(out, "trace: allow.cli rules no call used ({why}): {list}");
    }
}

/// A hint per refused lookup (add it to allow.net) and per refused call no rule decided (the
/// exact rule that would allow it, once each).
fn hints(out: &mut String, result: &RunResult) {
    for l in result
        .network
        .iter()
        .flat_map(|n| &n.lookups)
        .filter(|l| !l.allowed)
    {
        let _ = writeln!(
            out,
            "hint: to let the script reach {}, add it to allow.net",
            l.name
        );
    }
    let mut hinted = std::collections::BTreeSet::new();
    for c in result
        .cli_calls
        .iter()
        .filter(|c| !c.allowed && c.rule.is_none())
    {
        // A call known only in part (a shell's message, a launcher's template): its rule says
        // what is unknown with `*`.
        let rule = match c.source {
            None => suggest_rule(&c.argv),
            Some(_) => band::proto::CallSource::cli_rule(c.source, &c.argv),
        };
        if let Some(rule) = rule
            && hinted.insert(rule.clone())
        {
            let _ = writeln!(
                out,
                "hint: to allow `{}`, add to allow.cli: {} (or a pattern with globs)",
                display_argv(&c.argv),
                // In single quotes as a rule with quotes of its own is most often written, but
                // for one holding a `'` or a control character ([`quoted`]).
                match rule.contains('\'') || rule.chars().any(char::is_control) {
                    true => quoted(&rule),
                    false => format!("'{rule}'"),
                }
            );
        }
    }
}

/// A rule as it would be written in YAML, so that it reads back as itself: in double quotes;
/// in single quotes when it has a `"` or a `\` (a glob's escape, which a double-quoted scalar
/// would read as its own) and no `'`; else double-quoted with YAML's escapes
/// ([`band::wrap::yaml_quoted`]: `bash -c "cat 'x'"`).
fn quoted(rule: &str) -> String {
    let plain = |c: char| !c.is_control();
    if !rule.contains(['"', '\\']) && rule.chars().all(plain) {
        format!("\"{rule}\"")
    } else if !rule.contains('\'') && rule.chars().all(plain) {
        format!("'{rule}'")
    } else {
        band::wrap::yaml_quoted(rule)
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn verdict(allowed: bool) -> &'static str {
    if allowed { "allowed" } else { "denied " }
}

/// The rule behind a decision, as the band spells it.
fn why(c: &CliCall) -> String {
    let why = match (c.allowed, &c.rule) {
        (true, Some(rule)) => format!("allow.cli {}", quoted(rule)),
        (true, None) => "essential command (not declared, not pattern-checked)".into(),
        (false, Some(rule)) => format!("deny.cli {}", quoted(rule)),
        (false, None) => "no allow.cli rule matches".into(),
    };
    match c.source {
        Some(s) => format!("{why} ({})", s.says()),
        None => why,
    }
}

/// One refusal, in words: what was tried, the layer, the rule that decided (or that none did)
/// and the smallest rule that would allow it.
pub(crate) fn describe(d: &Denial) -> String {
    let what = match d {
        Denial::Cli { argv, .. } => format!("command {}", display_argv(argv)),
        Denial::Net { host, port, .. } => format!(
            "host {host}{}",
            port.map(|p| format!(":{p}")).unwrap_or_default(),
        ),
        Denial::Dns { name } => format!("DNS lookup of {name}"),
        Denial::Write { path, .. } => format!("write to {path}"),
        Denial::Http { .. } | Denial::Secret { .. } => d.what(),
    };
    band::diag::one_line(&format!(
        "{what} ({} layer: {})",
        d.layer().as_str(),
        d.explain()
    ))
    .into_owned()
}

/// argv as a shell would show it: words with white space, quotes or nothing in them quoted.
pub(crate) fn display_argv(argv: &[String]) -> String {
    argv.iter()
        .map(|w| {
            if w.is_empty()
                || w.chars()
                    .any(|c| c.is_whitespace() || matches!(c, '\'' | '"' | '\\' | '$' | '`'))
            {
                format!("'{}'", w.replace('\'', r"'\''"))
            } else {
                w.clone()
            }
        })
        .map(|w| band::diag::one_line(&w).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// An `allow.cli` pattern that matches exactly `argv`, or `None` when the pattern language cannot
/// spell one of its words (a `"` inside it).
pub(crate) fn suggest_rule(argv: &[String]) -> Option<String> {
    let mut tokens = Vec::new();
    for (i, w) in argv.iter().enumerate() {
        if w.contains('"') || (i == 0 && w.is_empty()) {
            return None;
        }
        let mut t = String::new();
        for c in w.chars() {
            if matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\') {
                t.push('\\');
            }
            t.push(c);
        }
        if t.is_empty() || t.chars().any(char::is_whitespace) || t.starts_with('\'') {
            t = format!("\"{t}\"");
        }
        tokens.push(t);
    }
    let rule = tokens.join(" ");
    CliPattern::parse(&rule)
        .ok()
        .filter(|p| p.matches(argv))
        .map(|_| rule)
}

#[cfg(test)]
mod tests {
    use band::proto::{FileEntry, Status};
    use pretty_assertions::assert_eq;

    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|s| s.to_string()).collect()
    }

    fn call(words: &[&str], allowed: bool, rule: Option<&str>) -> CliCall {
        CliCall {
            argv: argv(words),
            allowed,
            rule: rule.map(String::from),
            source: None,
        }
    }

    #[test]
    fn renders_calls_files_refusals_unused_rules_and_hints() {
        let mut r = RunResult::setup_failed("0123456789abcdef", band::proto::Layer::Cli, "x", None);
        r.status = Status::Denied;
        r.error = None;
        r.cli_calls = vec![
            call(
                &["jq", "-r", ".a", "/band/io/input.json"],
                true,
                Some("jq -r *"),
            ),
            call(&["cat", "x y"], true, None),
            call(&["curl", "https://example.com/a b"], false, None),
            call(&["rm", "-rf", "/"], false, Some("rm -rf *")),
        ];
        r.denied = vec![
            Denial::Cli {
                argv: argv(&["curl", "https://example.com/a b"]),
                rule: None,
                source: None,
            },
            Denial::Net {
                host: "example.com".into(),
                port: Some(443),
                rule: None,
            },
            Denial::Write {
                path: "data/x".into(),
                rule: Some("data/**".into()),
                reason: None,
            },
        ];
        r.written = vec![FileEntry {
            path: "out/a.md".into(),
            mode: 0o644,
            data: String::new(),
        }];
        let text = render(&r, &["jq -r *".to_string(), "wc *".to_string()], &[]);
        assert_eq!(
            text,
            "trace: 4 commands
  allowed  jq -r .a /band/io/input.json    allow.cli \"jq -r *\"
  allowed  cat 'x y'                       essential command (not declared, not pattern-checked)
  denied   curl 'https://example.com/a b'  no allow.cli rule matches
  denied   rm -rf /                        deny.cli \"rm -rf *\"
trace: 1 file written back
  allowed  out/a.md
trace: 2 refused
  denied   host example.com:443 (network layer: no allow.net rule matches; to allow it: allow.net \"example.com:443\")
  denied   write to data/x (filesystem layer: deny.write \"data/**\" decided (a deny wins over any allow))
trace: allow.cli rules no call used (candidates to remove): \"wc *\"
hint: to allow `curl 'https://example.com/a b'`, add to allow.cli: 'curl \"https://example.com/a b\"' (or a pattern with globs)
"
        );
    }

    /// The hint's rule for a call holding a `'` pastes as YAML that reads back as the rule (the
    /// sixth wild trial's `'bash -c "cat 'test-input.json' | …"'` made lint say F002).
    #[test]
    fn the_hint_for_a_call_with_quotes_is_valid_yaml() {
        let mut r = RunResult::setup_failed("0123456789abcdef", band::proto::Layer::Cli, "x", None);
        r.cli_calls = vec![call(
            &["bash", "-c", "cat 'test-input.json' | ./hook.sh"],
            false,
            None,
        )];
        let text = render(&r, &[], &[]);
        let hint = text
            .lines()
            .find(|l| l.starts_with("hint: to allow"))
            .unwrap_or_else(|| panic!("{text}"));
        let rule = hint
            .split("add to allow.cli: ")
            .nth(1)
            .and_then(|r| r.strip_suffix(" (or a pattern with globs)"))
            .unwrap_or_else(|| panic!("{hint}"));
        let v: serde_json::Value = yaml_serde::from_str(&format!("cli: [{rule}]"))
            .unwrap_or_else(|e| panic!("{rule}: {e}"));
        let back = v["cli"][0].as_str().unwrap_or_default();
        assert!(
            band::policy::cli::CliPattern::parse(back).is_ok_and(|p| p.matches(&argv(&[
                "bash",
                "-c",
                "cat 'test-input.json' | ./hook.sh"
            ]))),
            "{rule} reads back as {back}"
        );
    }

    #[test]
    fn renders_the_network_report() {
        use band::proto::{DnsLookup, NetFlow, NetworkReport};
        let mut r = RunResult::setup_failed("0123456789abcdef", band::proto::Layer::Cli, "x", None);
        r.network = Some(NetworkReport {
            lookups: vec![
                DnsLookup {
                    name: "api.github.com".into(),
                    qtype: "A".into(),
                    allowed: true,
                    addrs: vec!["192.0.2.7".into()],
                    withheld: vec![],
                },
                DnsLookup {
                    name: "evil.example".into(),
                    qtype: "AAAA".into(),
                    allowed: false,
                    addrs: vec![],
                    withheld: vec![],
                },
            ],
            contacted: vec![NetFlow {
                addr: "192.0.2.7".into(),
                proto: "tcp".into(),
                port: 443,
                names: vec!["api.github.com".into()],
            }],
            denied: vec![NetFlow {
                addr: "10.0.0.1".into(),
                proto: "tcp".into(),
                port: 80,
                names: vec![],
            }],
            requests: Vec::new(),
            lookups_dropped: 0,
        });
        assert_eq!(
            render(&r, &[], &[]),
            "trace: 0 commands
trace: 0 files written back
trace: network: 2 lookups, 1 destination reached, 1 refused
  allowed  lookup api.github.com A → 192.0.2.7
  denied   lookup evil.example AAAA
  allowed  reached 192.0.2.7:443/tcp (api.github.com)
  denied   refused 10.0.0.1:80/tcp
hint: to let the script reach evil.example, add it to allow.net
"
        );
    }

    /// Distinct lookups past band-server's bound are counted in the report, and said.
    #[test]
    fn lookups_past_the_bound_are_counted() {
        use band::proto::NetworkReport;
        let mut r = RunResult::setup_failed("0123456789abcdef", band::proto::Layer::Cli, "x", None);
        r.network = Some(NetworkReport {
            lookups: Vec::new(),
            lookups_dropped: 190_000,
            contacted: Vec::new(),
            denied: Vec::new(),
            requests: Vec::new(),
        });
        assert!(
            render(&r, &[], &[])
                .contains("\n  … and 190000 more distinct lookups, counted, not kept\n"),
            "{}",
            render(&r, &[], &[])
        );
    }

    /// A written file's name or an argument holding a newline stays on its line: it cannot
    /// print a line that reads as band's (red team, round 6).
    #[test]
    fn a_newline_in_a_name_stays_on_its_line() {
        let mut r = RunResult::setup_failed("0123456789abcdef", band::proto::Layer::Cli, "x", None);
        r.written = vec![band::proto::FileEntry {
            path: "out/a\nband: denied: ok\nb".into(),
            mode: 0o644,
            data: String::new(),
        }];
        r.denied = vec![Denial::Write {
            path: "out/c\nband: ok".into(),
            rule: None,
            reason: None,
        }];
        let shown = render(&r, &[], &[]);
        assert!(shown.lines().all(|l| !l.starts_with("band:")), "{shown}");
        assert!(
            shown.contains("  allowed  out/a\\nband: denied: ok\\nb\n"),
            "{shown}"
        );
        assert_eq!(display_argv(&argv(&["echo", "a\nb"])), "echo 'a\\nb'");
    }

    /// A scaffolder's empty folders are counted and named with the files, each with a `/`.
    #[test]
    fn the_empty_folders_written_back_are_counted_and_named() {
        let mut r = RunResult::setup_failed("0123456789abcdef", band::proto::Layer::Cli, "x", None);
        r.written_folders = vec!["projects/demo/audio".into(), "projects/demo/video".into()];
        r.denied = vec![Denial::Write {
            path: "stray/".into(),
            rule: None,
            reason: None,
        }];
        assert_eq!(
            render(&r, &[], &[]),
            "trace: 0 commands
trace: 0 files and 2 empty folders written back
  allowed  projects/demo/audio/
  allowed  projects/demo/video/
trace: 1 refused
  denied   write to stray/ (filesystem layer: no allow.write rule matches; to allow it: allow.write \"./stray/\")
"
        );
    }

    #[test]
    fn an_empty_run_says_so() {
        let r = RunResult::setup_failed("0123456789abcdef", band::proto::Layer::Cli, "x", None);
        assert_eq!(
            render(&r, &["wc *".to_string()], &[]),
            "trace: 0 commands\ntrace: 0 files written back\n"
        );
    }

    #[test]
    fn suggested_rules_match_exactly_their_argv() {
        for words in [
            &["jq", "-r", ".[] | {a}", "/tmp/x.json"][..],
            &["sh", "-c", "echo *"],
            &["printf", ""],
            &["awk", "'{print}'"],
            &["grep", "a\\b", "[x]"],
        ] {
            let a = argv(words);
            let rule = suggest_rule(&a).unwrap_or_else(|| panic!("{words:?}"));
            let p = CliPattern::parse(&rule).unwrap();
            assert!(p.matches(&a), "{rule}");
            let mut longer = a.clone();
            longer.push("more".into());
            assert!(!p.matches(&longer), "{rule} must not match extra arguments");
        }
        assert_eq!(
            suggest_rule(&argv(&["jq", "-r", "x*"])).as_deref(),
            Some("jq -r x\\*")
        );
        assert_eq!(suggest_rule(&argv(&["echo", "say \"hi\""])), None);
        assert_eq!(quoted("jq -r \".a // 1\" x"), "'jq -r \".a // 1\" x'");
        // Each reads back as the rule in a band's YAML (the sixth wild trial's test-hook hint,
        // `'bash -c "cat 'x' | …"'`, did not: lint said F002).
        for rule in [
            "jq -r .a",
            "jq -r \".a // 1\" x",
            "bash -c \"cat 'test-input.json' | ./hook.sh\"",
            "grep \\* x",
            "echo 'a' \\ b",
        ] {
            let yaml = format!("allow:\n  cli: [{}]\n", quoted(rule));
            let v: serde_json::Value =
                yaml_serde::from_str(&yaml).unwrap_or_else(|e| panic!("{rule}: {yaml}: {e}"));
            assert_eq!(v["allow"]["cli"][0], rule, "{yaml}");
        }
    }
}
