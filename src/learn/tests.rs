use pretty_assertions::assert_eq;

use super::*;
use crate::policy::net::NetPattern;

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|s| s.to_string()).collect()
}

fn rules(v: &[Rule]) -> Vec<&str> {
    v.iter().map(|r| r.rule.as_str()).collect()
}

fn obs_execs(calls: &[&[&str]]) -> Observations {
    Observations {
        execs: calls.iter().map(|c| argv(c)).collect(),
        ..Observations::default()
    }
}

#[test]
fn one_call_becomes_its_exact_argv() {
    let d = draft(&obs_execs(&[&["jq", "-j", ".text", "/band/io/input.json"]]));
    assert_eq!(rules(&d.cli), ["jq -j .text /band/io/input.json"]);
    assert_eq!(d.cli[0].evidence, "ran `jq -j .text /band/io/input.json`");
}

#[test]
fn a_few_distinct_calls_stay_exact_and_many_generalise_only_the_places_that_vary() {
    let d = draft(&obs_execs(&[
        &["gh", "issue", "list", "--limit", "5"],
        &["gh", "issue", "list", "--state", "open"],
        &["gh", "issue", "view", "12"],
        &["jq", "-r", ".a", "x.json"],
        &["jq", "-r", ".b", "y.json"],
        &["jq", "-r", ".c", "z.json"],
        &["jq", "-r", ".d", "w.json"],
        &["jq", "-c", ".e", "w.json"],
    ]));
    assert_eq!(
        rules(&d.cli),
        [
            "gh issue list --limit 5",
            "gh issue list --state open",
            "gh issue view 12",
            "jq -c .e w.json",
            "jq -r .* [A-Za-z0-9]*.json"
        ]
    );
    assert_eq!(
        d.cli[4].evidence,
        "ran `jq -r .a x.json` (and 3 other calls); `.*` for a value that took 4 values in one run: .a, .b, .c, …; `[A-Za-z0-9]*.json` for a value that took 4 values in one run: w.json, x.json, y.json, …"
    );
    let d = draft(&obs_execs(&[
        &["gh", "issue", "list", "-L", "1"],
        &["gh", "issue", "list", "-L", "2"],
        &["gh", "issue", "list", "-L", "3"],
        &["gh", "issue", "list", "--state", "open"],
    ]));
    assert_eq!(rules(&d.cli), ["gh issue list *"]);
}

#[test]
fn never_a_bare_star_and_never_wider_than_the_command_and_its_subcommands() {
    let d = draft(&obs_execs(&[
        &["gh", "api", "repos/a/b"],
        &["gh", "api", "repos/c/d"],
        &["gh", "api", "repos/e/f"],
        &["gh", "api", "repos/g/h"],
        &["curl", "-s", "https://h.test/a"],
        &["curl", "-s", "https://h.test/b"],
        &["curl", "-s", "https://h.test/c"],
        &["curl", "-s", "https://h.test/d"],
    ]));
    assert_eq!(
        rules(&d.cli),
        ["curl -s https://h.test/*", "gh api repos/*"]
    );
    for r in &d.cli {
        assert_ne!(r.rule, "*");
        assert!(r.rule.split(' ').count() >= 2, "{}", r.rule);
    }
}

#[test]
fn many_calls_of_a_subcommand_alone_and_with_flags_share_one_rule() {
    let d = draft(&obs_execs(&[
        &["git", "status"],
        &["git", "status", "-s"],
        &["git", "status", "-b"],
        &["git", "status", "--porcelain"],
    ]));
    assert_eq!(rules(&d.cli), ["git status *"]);
}

#[test]
fn duplicate_calls_make_one_exact_rule() {
    let d = draft(&obs_execs(&[&["date", "+%s"], &["date", "+%s"]]));
    assert_eq!(rules(&d.cli), ["date +%s"]);
    assert_eq!(d.cli[0].evidence, "ran `date +%s`");
}

#[test]
fn paths_of_argv0_become_command_names_and_skill_programs_dot_paths() {
    let d = draft(&obs_execs(&[
        &["/usr/bin/python3", "/skill/scripts/describe.py"],
        &["/skill/bin/tool", "--fast"],
    ]));
    assert_eq!(
        rules(&d.cli),
        ["./bin/tool --fast", "python3 /skill/scripts/describe.py"]
    );
}

#[test]
fn mktemp_names_become_a_glob_so_the_next_run_matches_and_fixed_tmp_names_stay() {
    let d = draft(&obs_execs(&[
        &["jq", "-s", "/tmp/tmp.AbC12dEf34"],
        &["jq", "-s", "/tmp/tmp.XyZ99wVu10"],
        &["jq", "-s", "/tmp/tmp.QqQ99wVu10"],
        &["jq", "-s", "/tmp/tmp.RrR99wVu10"],
        &["sort", "/tmp/data.json"],
    ]));
    assert_eq!(rules(&d.cli), ["jq -s /tmp/tmp.*", "sort /tmp/data.json"]);
    let rule = CliPattern::parse(&d.cli[0].rule);
    assert!(rule.is_ok_and(|p| p.matches(&argv(&["jq", "-s", "/tmp/tmp.Other12345"]))));
}

#[test]
fn arguments_with_spaces_and_glob_characters_are_quoted_and_escaped_and_still_match() {
    let call = argv(&["grep", "-e", "a b", "*.md", ""]);
    let d = draft(&Observations {
        execs: vec![call.clone()],
        ..Observations::default()
    });
    assert_eq!(rules(&d.cli), [r#"grep -e "a b" \*.md """#]);
    let p = CliPattern::parse(&d.cli[0].rule);
    assert!(p.as_ref().is_ok_and(|p| p.matches(&call)));
    assert!(p.is_ok_and(|p| !p.matches(&argv(&["grep", "-e", "a b", "x.md", ""]))));
}

#[test]
fn arguments_with_quotes_and_shell_syntax_are_drafted_exactly() {
    let call = argv(&[
        "echo",
        "say \"hi\"",
        "\"",
        "line 1 'q'",
        "it's $(touch pwned) `x`",
        "a\\\"b",
    ]);
    let d = draft(&Observations {
        execs: vec![call.clone()],
        ..Observations::default()
    });
    assert!(d.notes.is_empty(), "{:?}", d.notes);
    assert_eq!(
        rules(&d.cli),
        [r#"echo "say \"hi\"" "\"" "line 1 'q'" "it's $(touch pwned) `x`" "a\\\"b""#]
    );
    let p = CliPattern::parse(&d.cli[0].rule);
    assert!(p.as_ref().is_ok_and(|p| p.matches(&call)), "{p:?}");
    assert!(p.as_ref().is_ok_and(|p| p.is_concrete()));
    let mut other = call.clone();
    other[1] = "say xhix".into();
    assert!(p.is_ok_and(|p| !p.matches(&other)));
}

#[test]
fn an_argument_with_a_control_character_is_a_note_not_a_rule() {
    // Patterns are one line: the language refuses control characters, so a newline in an
    // argument cannot be spelled exactly, and a wider `?` is not drafted silently.
    let d = draft(&obs_execs(&[&[
        "gh",
        "issue",
        "create",
        "--body=line 1\nline 2",
    ]]));
    assert!(d.cli.is_empty(), "{:?}", d.cli);
    assert_eq!(d.notes.len(), 1, "{:?}", d.notes);
}

#[test]
fn files_are_drafted_exactly_and_anchored() {
    let d = draft(&Observations {
        reads: argv(&["notes.txt", "data/in.csv", "./data/in.csv", "/srv/hosts"]),
        writes: argv(&["out/report.md"]),
        ..Observations::default()
    });
    assert_eq!(rules(&d.read), ["./notes.txt", "/srv/hosts", "data/in.csv"]);
    assert_eq!(rules(&d.write), ["out/report.md"]);
    assert_eq!(d.read[2].evidence, "read data/in.csv");
    // The anchored top-level rule matches the file and not the same name deeper down.
    let p = FsPattern::parse("./notes.txt");
    assert!(p.as_ref().is_ok_and(|p| p.matches("notes.txt")));
    assert!(p.is_ok_and(|p| !p.matches("sub/notes.txt")));
}

#[test]
fn several_files_in_one_directory_become_that_directory_and_no_wider() {
    let d = draft(&Observations {
        reads: argv(&[
            "data/a.csv",
            "data/b.csv",
            "data/sub/c.csv",
            "a.txt",
            "b.txt",
        ]),
        ..Observations::default()
    });
    assert_eq!(
        rules(&d.read),
        ["./a.txt", "./b.txt", "data/**", "data/sub/c.csv"]
    );
    // Files outside the workspace are never collapsed: exactly the files read, not their folder.
    let d = draft(&Observations {
        reads: argv(&["/srv/a", "/srv/b", "/opt/x/one", "/opt/x/two"]),
        ..Observations::default()
    });
    assert_eq!(
        rules(&d.read),
        ["/opt/x/one", "/opt/x/two", "/srv/a", "/srv/b"]
    );
}

#[test]
fn a_file_read_and_written_needs_only_the_write_rule_and_bad_paths_are_dropped() {
    let d = draft(&Observations {
        reads: argv(&["out/x.json", "../escape", "", "/"]),
        writes: argv(&["out/x.json"]),
        ..Observations::default()
    });
    assert!(d.read.is_empty(), "{:?}", d.read);
    assert_eq!(rules(&d.write), ["out/x.json"]);
}

#[test]
fn hosts_with_ports_and_names_looked_up_only_by_name() {
    let d = draft(&Observations {
        lookups: argv(&["API.example.test.", "other.test", "api.example.test"]),
        connects: vec![
            Connect {
                host: "api.example.test".into(),
                port: 443,
            },
            Connect {
                host: "api.example.test".into(),
                port: 443,
            },
            Connect {
                host: "2001:db8::1".into(),
                port: 80,
            },
        ],
        ..Observations::default()
    });
    assert_eq!(
        rules(&d.net),
        ["[2001:db8::1]:80", "api.example.test:443", "other.test"]
    );
    for r in &d.net {
        assert!(NetPattern::parse(&r.rule).is_ok(), "{}", r.rule);
    }
}

/// band-server reports a use of an opened loopback port as `127.0.0.1` or `::1` named
/// `localhost` (`layers/net/forward.rs`): the draft is `localhost:P`, once, which lints clean; a
/// loopback name only looked up is a note (a loopback rule names its port).
#[test]
fn a_host_loopback_port_used_is_drafted_as_localhost_with_its_port() {
    use crate::proto::{NetFlow, NetworkReport, RunResult};
    let mut r = RunResult::setup_failed("0123456789abcdef", crate::proto::Layer::Cli, "", None);
    let flow = |addr: &str| NetFlow {
        addr: addr.into(),
        proto: "tcp".into(),
        port: 18000,
        names: vec!["localhost".into()],
    };
    r.network = Some(NetworkReport {
        lookups: vec![],
        contacted: vec![flow("127.0.0.1"), flow("::1")],
        denied: vec![],
        requests: Vec::new(),
        lookups_dropped: 0,
    });
    let mut o = super::observe::observations(&r, &[], &[], &crate::policy::Policy::default());
    o.lookups = argv(&["localhost"]);
    let d = draft(&o);
    assert_eq!(rules(&d.net), ["localhost:18000"]);
    assert_eq!(super::lint_rule("allow", "net", "localhost:18000"), None);
    let d = draft(&Observations {
        lookups: argv(&["localhost", "api.example.test"]),
        ..Observations::default()
    });
    assert_eq!(rules(&d.net), ["api.example.test"]);
    assert_eq!(
        d.notes,
        [
            "looked up localhost, never connected: a rule for the host's loopback names its port (`localhost:PORT`): not drafted"
        ]
    );
}

#[test]
fn secrets_read_become_env_secrets() {
    let d = draft(&Observations {
        secrets: argv(&["GH_TOKEN", "GH_TOKEN"]),
        ..Observations::default()
    });
    assert_eq!(d.secret_names(), ["GH_TOKEN"]);
}

#[test]
fn nothing_observed_drafts_nothing() {
    let d = draft(&Observations::default());
    assert_eq!(d, Draft::default());
    assert_eq!(d.allow(), RuleSet::default());
}

#[test]
fn merged_runs_cover_each_path_of_a_script() {
    let mut a = obs_execs(&[&["gh", "issue", "list", "--limit", "5"]]);
    a.writes.push("out/a.md".into());
    let mut b = obs_execs(&[&["gh", "issue", "list", "--state", "closed"]]);
    b.writes.push("out/b.md".into());
    a.merge(b);
    let d = draft(&a);
    assert_eq!(
        rules(&d.cli),
        ["gh issue list --limit 5", "gh issue list --state closed"]
    );
    assert_eq!(rules(&d.write), ["out/**"]);
}

#[test]
fn every_drafted_rule_allows_what_it_was_drafted_from() {
    let calls: &[&[&str]] = &[
        &["gh", "issue", "list", "--repo", "o/r"],
        &["gh", "issue", "list"],
        &["sh", "-c", "echo $X"],
        &["python3", "/skill/scripts/a.py", "--n=3"],
        &["jq", "-c", "[.[] | {a}]", "/tmp/data.json"],
    ];
    let obs = obs_execs(calls);
    let d = draft(&obs);
    for call in &obs.execs {
        let mut norm = call.clone();
        norm[0] = command_of(&call[0]);
        assert!(
            d.cli
                .iter()
                .any(|r| CliPattern::parse(&r.rule).is_ok_and(|p| p.matches(&norm))),
            "no rule for {call:?} in {:?}",
            d.cli
        );
    }
}

#[test]
fn the_diff_marks_new_kept_and_unneeded_rules_with_evidence() {
    let current = RuleSet {
        cli: argv(&["gh *", "jq -r *"]),
        read: argv(&["data/**"]),
        ..RuleSet::default()
    };
    let d = draft(&Observations {
        execs: vec![
            argv(&["gh", "issue", "list", "-L", "1"]),
            argv(&["jq", "-r", ".a"]),
            argv(&["jq", "-r", ".b"]),
            argv(&["jq", "-r", ".c"]),
            argv(&["jq", "-r", ".d"]),
        ],
        writes: argv(&["out/r.md"]),
        secrets: argv(&["GH_TOKEN"]),
        ..Observations::default()
    });
    let lines = diff(&current, &[], &d);
    let text = render_diff(&lines);
    assert_eq!(
        text,
        "allow.cli:
+ \"gh issue list -L 1\"  # ran `gh issue list -L 1`
+ \"jq -r .*\"            # ran `jq -r .a` (and 3 other calls); `.*` for a value that took 4 values in one run: .a, .b, .c, …
- \"gh *\"                # not needed by the observed runs
- \"jq -r *\"             # not needed by the observed runs
allow.read:
- \"data/**\"             # not needed by the observed runs
allow.write:
+ \"out/r.md\"            # wrote out/r.md
env.secrets:
+ \"GH_TOKEN\"            # $GH_TOKEN was read
"
    );
}

#[test]
fn exact_cli_rule_matches_only_its_argv() {
    let a = argv(&["rm", "-rf", "/x y"]);
    let rule = exact_cli_rule(&a).unwrap_or_default();
    assert_eq!(rule, "rm -rf \"/x y\"");
    let p = CliPattern::parse(&rule);
    assert!(p.as_ref().is_ok_and(|p| p.matches(&a)));
    assert!(p.is_ok_and(|p| !p.matches(&argv(&["rm", "-rf", "/"]))));
    assert_eq!(exact_cli_rule(&[]), None);
}

/// Issue 36: names the run looked up or reached are drafted only as the one host they name.
#[test]
fn names_that_are_patterns_or_no_host_are_never_drafted() {
    let d = draft(&Observations {
        lookups: argv(&[
            "*",
            "*.com",
            "*.example.test.",
            "10.0.0.0/8",
            "evil.test:443",
            "a b",
            "x\ninsist",
            "ok.example.test",
        ]),
        connects: vec![
            Connect {
                host: "*.com".into(),
                port: 443,
            },
            Connect {
                host: "10.9.0.2".into(),
                port: 80,
            },
        ],
        ..Observations::default()
    });
    assert_eq!(rules(&d.net), ["10.9.0.2:80", "ok.example.test"]);
    assert_eq!(d.notes.len(), 7, "{:?}", d.notes);
    assert!(d.notes.iter().all(|n| !n.contains('\n')), "{:?}", d.notes);
    assert!(d.notes.iter().any(|n| n.contains("`*`")), "{:?}", d.notes);
    for host in ["*", "*.com", "10.0.0.0/8", "a:1", ""] {
        assert_eq!(literal_net_rule(host, Some(443)), None, "{host}");
        assert_eq!(literal_net_rule(host, None), None, "{host}");
    }
    assert_eq!(
        literal_net_rule("API.test.", Some(443)).as_deref(),
        Some("api.test:443")
    );
    assert_eq!(
        literal_net_rule("2001:db8::1", Some(443)).as_deref(),
        Some("[2001:db8::1]:443")
    );
}

/// Issue 36: a file whose name has glob characters is never drafted (a rule would be a pattern,
/// and would not collapse its folder into `dir/**` either).
#[test]
fn file_names_with_glob_characters_are_notes_never_patterns() {
    let d = draft(&Observations {
        reads: argv(&["data/*", "data/in.csv", "[x]", "/srv/a?b"]),
        writes: argv(&["out/{a,b}", "out/**"]),
        ..Observations::default()
    });
    assert_eq!(rules(&d.read), ["data/in.csv"]);
    assert!(d.write.is_empty(), "{:?}", d.write);
    assert_eq!(d.notes.len(), 5, "{:?}", d.notes);
    assert!(d.notes.iter().all(|n| n.contains("glob characters")));
}

/// Issue 36: outside the workspace, only reads in no one's home and outside /etc, /var, … are
/// drafted; writes outside the workspace never are.
#[test]
fn foreign_places_are_notes_never_rules() {
    let homes = argv(&["/srv/git"]);
    let d = draft_with(
        &Observations {
            reads: argv(&[
                "/home/bob/.aws/credentials",
                "/srv/git/.ssh/id_ed25519",
                "/etc/shadow.bak",
                "/var/spool/cron/crontabs/root",
                "/srv/data/in.csv",
            ]),
            writes: argv(&[
                "/etc/cron.d/x",
                "/home/bob/.bashrc",
                "/srv/out/r.txt",
                "out/r.txt",
            ]),
            ..Observations::default()
        },
        &homes,
    );
    assert_eq!(rules(&d.read), ["/srv/data/in.csv"]);
    assert_eq!(rules(&d.write), ["out/r.txt"]);
    assert_eq!(d.notes.len(), 7, "{:?}", d.notes);
    for p in [
        "/etc/cron.d/x",
        "/home/bob/.bashrc",
        "/srv/git/.ssh/id_ed25519",
    ] {
        assert!(d.notes.iter().any(|n| n.contains(p)), "{p}: {:?}", d.notes);
    }
    assert_eq!(outside_problem("/opt/tool/x", false, &homes), None);
    assert!(outside_problem("/opt/tool/x", true, &homes).is_some());
    assert!(outside_problem("/srv/git", false, &homes).is_some());
    assert!(outside_problem("/srv/gitx", false, &homes).is_none());
}

/// Issue 36: a draft passes the checks a human-written band does; what lint flags is a note.
#[test]
fn what_lint_flags_is_left_out_of_a_draft_with_a_note() {
    for (top, key, ok) in [
        ("allow", "cli", "jq -r .a /band/io/input.json"),
        ("allow", "read", "data/**"),
        ("allow", "read", "/srv/data/in.csv"),
        ("allow", "write", "out/r.txt"),
        ("allow", "net", "api.example.test:443"),
        ("env", "secrets", "GH_TOKEN"),
    ] {
        assert_eq!(lint_rule(top, key, ok), None, "{top}.{key} {ok}");
    }
    let mut d = Draft {
        cli: vec![Rule {
            rule: "jq -r .a".into(),
            evidence: "ran `jq -r .a`".into(),
        }],
        read: vec![
            Rule {
                rule: "/usr/local/share/x".into(),
                evidence: "read /usr/local/share/x".into(),
            },
            Rule {
                rule: "/etc".into(),
                evidence: "read /etc".into(),
            },
        ],
        secrets: vec![Rule {
            rule: "LD_PRELOAD".into(),
            evidence: "$LD_PRELOAD was read".into(),
        }],
        ..Draft::default()
    };
    vet(&mut d);
    assert_eq!(rules(&d.cli), ["jq -r .a"]);
    assert!(d.read.is_empty(), "{:?}", d.read);
    assert!(d.secrets.is_empty(), "{:?}", d.secrets);
    assert_eq!(d.notes.len(), 3, "{:?}", d.notes);
    assert!(
        d.notes.iter().all(|n| n.contains("band lint says")),
        "{:?}",
        d.notes
    );
}

/// What a run controls shows on one line, inert, in the diff.
#[test]
fn the_diff_shows_observed_text_on_one_line() {
    let d = draft(&Observations {
        execs: vec![argv(&["jq", "x\u{1b}[2J\n+ \"curl *\"  # fake"])],
        ..Observations::default()
    });
    let text = render_diff(&diff(&RuleSet::default(), &[], &d));
    assert!(!text.contains('\u{1b}'), "{text}");
    for line in text.lines().skip(1) {
        assert!(line.starts_with("+ \"jq "), "{text}");
    }
    assert_eq!(one_line("a\nb\u{202e}c"), "a\\nb\\u{202e}c");
}

/// Issue 36: a denial's hint names the one host or file refused, never a pattern built from what
/// the run asked for.
#[test]
fn denial_hints_never_suggest_a_wildcard_from_observed_data() {
    use crate::proto::Denial;
    for name in ["*", "*.com", "10.0.0.0/8"] {
        let d = Denial::Dns { name: name.into() };
        assert_eq!(d.smallest_rule(), None, "{name}");
        assert!(!d.explain().contains("to allow it"), "{}", d.explain());
        let d = Denial::Net {
            host: name.into(),
            port: Some(443),
            rule: None,
        };
        assert_eq!(d.smallest_rule(), None, "{name}");
    }
    for path in ["out/*", "out/[ab]", "{a,b}", "/srv/x?"] {
        let d = Denial::Write {
            path: path.into(),
            rule: None,
            reason: None,
        };
        assert_eq!(d.smallest_rule(), None, "{path}");
    }
    let d = Denial::Dns {
        name: "API.test.".into(),
    };
    assert_eq!(d.smallest_rule(), Some(("allow.net", "api.test".into())));
    let d = Denial::Write {
        path: "notes.txt".into(),
        rule: None,
        reason: None,
    };
    assert_eq!(
        d.smallest_rule(),
        Some(("allow.write", "./notes.txt".into()))
    );
}

/// Observations of several runs, each a list of calls (as `band learn --merge` keeps them).
fn runs_of(runs: &[&[&[&str]]], data: &[&str]) -> Observations {
    let mut all = Observations::default();
    for calls in runs {
        let mut one = obs_execs(calls);
        one.runs = 1;
        one.data = argv(data);
        all.merge(one);
    }
    all
}

fn cli_matches(rule: &str, call: &[&str]) -> bool {
    CliPattern::parse(rule).is_ok_and(|p| p.matches(&argv(call)))
}

/// Issue 38: a band learned from two runs with different data admits a third; a call with
/// another flag is still refused.
#[test]
fn a_value_that_differed_across_runs_becomes_a_pattern_and_flags_stay_literal() {
    let filter = "{items: [range($n)]}";
    let obs = runs_of(
        &[
            &[&["jq", "-n", "--argjson", "n", "3", filter]],
            &[&["jq", "-n", "--argjson", "n", "4", filter]],
        ],
        &[],
    );
    assert_eq!(obs.exec_runs, [0, 1]);
    assert_eq!(obs.run_count(), 2);
    let d = draft(&obs);
    assert_eq!(
        rules(&d.cli),
        [r#"jq -n --argjson n [0-9]* "\{items: \[range($n)\]\}""#]
    );
    assert!(
        d.cli[0].evidence.contains("differed across 2 runs: 3, 4"),
        "{}",
        d.cli[0].evidence
    );
    let rule = &d.cli[0].rule;
    assert!(cli_matches(
        rule,
        &["jq", "-n", "--argjson", "n", "5", filter]
    ));
    assert!(cli_matches(
        rule,
        &["jq", "-n", "--argjson", "n", "120", filter]
    ));
    assert!(!cli_matches(rule, &["jq", "-n", "--arg", "n", "5", filter]));
    assert!(!cli_matches(
        rule,
        &["jq", "-n", "--argjson", "n", "--slurp", filter]
    ));
    assert!(!cli_matches(
        rule,
        &["jq", "-n", "--argjson", "n", "5", "."]
    ));
    assert!(!cli_matches(
        rule,
        &["jq", "-n", "--argjson", "n", "5", filter, "x"]
    ));
    // One run alone: exact, as before.
    let one = runs_of(&[&[&["jq", "-n", "--argjson", "n", "3", filter]]], &[]);
    assert_eq!(
        rules(&draft(&one).cli),
        [r#"jq -n --argjson n 3 "\{items: \[range($n)\]\}""#]
    );
}

#[test]
fn values_every_run_shares_stay_exact_even_when_a_run_has_several() {
    let calls: &[&[&str]] = &[&["jq", ".a", "f.json"], &["jq", ".b", "f.json"]];
    let d = draft(&runs_of(&[calls, calls], &[]));
    assert_eq!(rules(&d.cli), ["jq .a f.json", "jq .b f.json"]);
}

#[test]
fn values_from_the_runs_data_become_patterns_even_in_one_run() {
    let d = draft(&runs_of(
        &[&[
            &["head", "-n", "5", "notes.txt"],
            &["python3", "/skill/x.py", "--path=data/in.csv", "--fast"],
            &["curl", "-s", "https://h.test/a b"],
        ]],
        &["5", "notes.txt", "data/in.csv", "https://h.test/a b"],
    ));
    assert_eq!(
        rules(&d.cli),
        [
            "curl -s https://*",
            "head -n [0-9]* [A-Za-z0-9]*",
            "python3 /skill/x.py --path=* --fast"
        ]
    );
    assert!(
        d.cli[1]
            .evidence
            .contains("came from the run's input or workspace: 5"),
        "{}",
        d.cli[1].evidence
    );
}

/// A script that walks a folder names each file it finds, spelled as its glob made it
/// (`uia//ha.json`), and a temporary file of `mktemp`: the next input's names differ, so each is
/// a pattern of its own folder, never wider.
#[test]
fn a_walking_scripts_paths_and_temporary_files_become_patterns_of_their_folder() {
    let d = draft(&runs_of(
        &[&[
            &["jq", "-e", ".x", "uia//ha.json"],
            &["sha256sum", "/tmp/tmp.Xa81Kq0pZm"],
        ]],
        &["uia//ha.json", "/tmp/tmp.Xa81Kq0pZm"],
    ));
    assert_eq!(rules(&d.cli), ["jq -e .x uia/*", "sha256sum /tmp/*"]);
    assert!(cli_matches(
        &d.cli[0].rule,
        &["jq", "-e", ".x", "uia//new.json"]
    ));
    assert!(cli_matches(
        &d.cli[0].rule,
        &["jq", "-e", ".x", "uia/b/c.json"]
    ));
    assert!(!cli_matches(
        &d.cli[0].rule,
        &["jq", "-e", ".x", "notes.txt"]
    ));
    assert!(!cli_matches(
        &d.cli[0].rule,
        &["jq", "-e", ".y", "uia/a.json"]
    ));
    assert!(cli_matches(&d.cli[1].rule, &["sha256sum", "/tmp/tmp.Q"]));
    assert!(!cli_matches(&d.cli[1].rule, &["sha256sum", "/etc/shadow"]));
}

#[test]
fn subcommands_and_commands_stay_literal_and_never_a_bare_command_with_star() {
    // A data value in a subcommand's place is still a subcommand.
    let d = draft(&runs_of(
        &[
            &[&["gh", "issue", "delete", "7"]],
            &[&["gh", "issue", "close", "8"]],
        ],
        &["delete", "close", "7", "8"],
    ));
    assert_eq!(
        rules(&d.cli),
        ["gh issue close [0-9]*", "gh issue delete [0-9]*"]
    );
    // `*` is never a command; a lone `*` last is one word, quoted.
    let d = draft(&runs_of(
        &[
            &[&["*", "x"], &["printf", "%s", ""]],
            &[&["*", "y"], &["printf", "%s", "x"]],
        ],
        &[],
    ));
    assert_eq!(rules(&d.cli), [r#"printf %s "*""#]);
    assert!(d.notes.iter().any(|n| n.contains("`* x`")), "{:?}", d.notes);
    assert!(cli_matches(&d.cli[0].rule, &["printf", "%s", "y"]));
    assert!(!cli_matches(&d.cli[0].rule, &["printf", "%s", "y", "z"]));
    // Many forms of a program with nothing shared but its name stay exact rules.
    let calls: &[&[&str]] = &[
        &["curl", "https://a.test/"],
        &["curl", "-s", "https://b.test/"],
        &["curl", "-o", "x", "https://c.test/"],
        &["curl", "--fail", "https://d.test/"],
    ];
    let d = draft(&obs_execs(calls));
    assert_eq!(d.cli.len(), 4, "{:?}", d.cli);
    for r in &d.cli {
        assert!(!r.rule.ends_with(" *"), "{}", r.rule);
    }
}

#[test]
fn shared_prefixes_and_suffixes_are_cut_at_a_separator() {
    let d = draft(&runs_of(
        &[
            &[&["wc", "-l", "out/report-13.csv"]],
            &[&["wc", "-l", "out/report-3.csv"]],
            &[&["wc", "-l", "out/report-x3.csv"]],
        ],
        &[],
    ));
    assert_eq!(rules(&d.cli), ["wc -l out/report-*.csv"]);
}

/// Issue 38: a name looked up while any host was reachable, and never contacted, is a note.
#[test]
fn a_name_looked_up_with_the_network_open_and_never_contacted_is_a_note() {
    let d = draft(&Observations {
        lookups: argv(&["telemetry.example.test", "api.example.test", "offline.test"]),
        net_lookups: argv(&["telemetry.example.test", "api.example.test"]),
        connects: vec![Connect {
            host: "api.example.test".into(),
            port: 443,
        }],
        ..Observations::default()
    });
    assert_eq!(rules(&d.net), ["api.example.test:443", "offline.test"]);
    assert_eq!(d.notes.len(), 1, "{:?}", d.notes);
    assert!(
        d.notes[0].contains("telemetry.example.test") && d.notes[0].contains("never contacted"),
        "{:?}",
        d.notes
    );
}

/// A value from data makes a pattern of that call's word only: a call of the same shape with a
/// word of the script's own keeps it.
#[test]
fn only_the_calls_whose_value_came_from_data_are_generalised() {
    let d = draft(&runs_of(
        &[&[
            &["jq", "-c", ".data", "/band/io/input.json"],
            &["jq", "-c", "map(.price) | add", "/tmp/data.json"],
            &["jq", "-c", "-.x", "/tmp/data.json"],
        ]],
        &["map(.price) | add", "-.x"],
    ));
    assert_eq!(
        rules(&d.cli),
        [
            "jq -c .data /band/io/input.json",
            "jq -c [A-Za-z0-9]* /tmp/data.json",
            // A word starting with `-` is a flag: literal, even from data.
            "jq -c -.x /tmp/data.json"
        ]
    );
}

/// A concrete read rule the observed runs never opened stays when a script names its path (a
/// test of its existence is not observed), and only then: not for a name inside a longer one,
/// not for a pattern, not for what the draft already covers.
#[test]
fn a_read_rule_a_script_names_is_kept() {
    let current = RuleSet {
        read: [
            "LICENSE",
            "./README.md",
            "data/a.md",
            "docs/**",
            "notes.txt",
            "cfg/x.toml",
        ]
        .map(String::from)
        .to_vec(),
        ..RuleSet::default()
    };
    let scripts = [(
        "scripts/check.sh".to_string(),
        "[ -e LICENSE ] && [ -f \"$ROOT/README.md\" ]\ncat mydata/a.mdx LICENSES docs/x\n"
            .to_string(),
    )];
    let mut d = Draft {
        read: vec![Rule {
            rule: "cfg/**".into(),
            evidence: "read cfg/x.toml".into(),
        }],
        ..Draft::default()
    };
    d.keep_named_reads(&current, &scripts);
    assert_eq!(rules(&d.read), ["cfg/**", "LICENSE", "./README.md"]);
    assert_eq!(
        d.read[1].evidence,
        "kept: scripts/check.sh names it, and a test of a file's existence (`[ -e ]`, `stat`) is not observed"
    );
    // A file the run read as well (sixth wild trial: `claims.csv`): the band's spelling, with
    // the run's evidence, not a "kept" rule beside the drafted `./LICENSE`.
    let mut d = Draft {
        read: vec![Rule {
            rule: "./LICENSE".into(),
            evidence: "read by the run".into(),
        }],
        ..Draft::default()
    };
    d.keep_named_reads(&current, &scripts);
    assert_eq!(rules(&d.read), ["LICENSE", "./README.md"]);
    assert_eq!(d.read[0].evidence, "read by the run");
}

/// One file, one rule: a drafted rule a kept one covers goes (coded-apps: `./action-schema.json`
/// beside the kept `action-schema.json`); of two equal ones the first stays; a folder's rule
/// takes its files'.
#[test]
fn a_path_rule_another_covers_is_dropped() {
    let rule = |r: &str| Rule {
        rule: r.into(),
        evidence: String::new(),
    };
    let mut d = Draft {
        read: [
            "./action-schema.json",
            "action-schema.json",
            "src/a.txt",
            "src/**",
            "./b",
            "b",
        ]
        .map(rule)
        .to_vec(),
        write: ["out/x.md", "out/*.md", "other.md"].map(rule).to_vec(),
        ..Draft::default()
    };
    d.drop_covered_paths();
    assert_eq!(rules(&d.read), ["action-schema.json", "src/**", "b"]);
    assert_eq!(rules(&d.write), ["out/*.md", "other.md"]);
}

/// A script with no execute bit is started by band-server with its interpreter, a start no
/// observed call shows: before, learn drafted the removal of `python3 /skill/scripts/count.py *`
/// and every later run was setup_failed.
#[test]
fn the_rule_that_starts_the_script_is_kept_or_drafted() {
    use crate::launch::{By, Interpreter, Launch};
    let py = |by| {
        Launch::With(Interpreter {
            name: "python3".into(),
            arg: None,
            by,
        })
    };
    let entry = std::path::Path::new("scripts/count.py");
    let Some(EntryStart::Interpreter(start)) = EntryStart::of(entry, &py(By::Shebang)) else {
        panic!("python3 needs a rule");
    };
    assert_eq!(start.rule, "python3 /skill/scripts/count.py *");
    assert_eq!(start.argv, ["python3", "/skill/scripts/count.py"]);
    let start = EntryStart::Interpreter(start);
    // The band's own rule that admits the start, as spelled; else the one wrap writes (a rule
    // for the start with no argument, or with one run's, is not one).
    for (current, want, kept) in [
        (vec!["python3 *", "jq *"], "python3 *", true),
        (
            vec!["python3 /skill/scripts/count.py *"],
            "python3 /skill/scripts/count.py *",
            true,
        ),
        (
            vec!["python3 /skill/scripts/other.py *"],
            "python3 /skill/scripts/count.py *",
            false,
        ),
        (
            vec!["python3 /skill/scripts/count.py"],
            "python3 /skill/scripts/count.py *",
            false,
        ),
        (vec![], "python3 /skill/scripts/count.py *", false),
    ] {
        let current = RuleSet {
            cli: current.into_iter().map(String::from).collect(),
            ..RuleSet::default()
        };
        let mut d = Draft::default();
        d.keep_entry_start(&current, &start);
        assert_eq!(rules(&d.cli), [want]);
        assert_eq!(d.cli[0].evidence.starts_with("kept: "), kept);
        assert!(
            d.cli[0]
                .evidence
                .contains("band-server starts the script with python3 (by its #! line)")
        );
    }
    // A draft that runs python3 otherwise (the script calls `python3 -c` too) does not start
    // the script: the start's rule is added.
    let mut d = Draft {
        cli: vec![Rule {
            rule: "python3 -c \"print(1)\"".into(),
            evidence: "ran".into(),
        }],
        ..Draft::default()
    };
    d.keep_entry_start(&RuleSet::default(), &start);
    assert_eq!(
        rules(&d.cli),
        [
            "python3 -c \"print(1)\"",
            "python3 /skill/scripts/count.py *"
        ]
    );
    // One that admits the start already needs nothing more.
    let mut d = Draft {
        cli: vec![Rule {
            rule: "python3 /skill/scripts/count.py *".into(),
            evidence: "ran".into(),
        }],
        ..Draft::default()
    };
    d.keep_entry_start(&RuleSet::default(), &start);
    assert_eq!(rules(&d.cli), ["python3 /skill/scripts/count.py *"]);
    // A module start; and bash (an essential) needs no rule; an executable entry is the
    // kernel's start.
    let Some(EntryStart::Interpreter(m)) = EntryStart::of(entry, &py(By::Module)) else {
        panic!("module");
    };
    assert_eq!(m.rule, "python3 -m scripts.count *");
    let bash = Launch::With(Interpreter {
        name: "bash".into(),
        arg: None,
        by: By::Extension,
    });
    assert_eq!(EntryStart::of(entry, &bash), None);
    assert_eq!(EntryStart::of(entry, &Launch::Unknown), None);
    assert_eq!(
        EntryStart::of(entry, &Launch::AsIs),
        Some(EntryStart::Kernel {
            path: "/skill/scripts/count.py".into(),
            shebang_rule: None,
        })
    );
}

/// An executable script (`#!/usr/bin/env python3`, mode 755) is started by the kernel through
/// its `#!` line: the call of its interpreter goes through the CLI gate and is observed with one
/// run's arguments. Before, learn narrowed `python3 /skill/scripts/x.py *` to `python3
/// /skill/scripts/x.py [A-Za-z0-9]*`, and the next run with a flag was refused; the draft keeps
/// the start as `band wrap` writes it.
#[test]
fn an_executable_script_keeps_the_rule_that_starts_it_with_any_arguments() {
    let start = EntryStart::of(
        std::path::Path::new("scripts/x.py"),
        &crate::launch::Launch::AsIs,
    )
    .expect("the kernel's start");
    let wrapped = RuleSet {
        cli: vec!["python3 /skill/scripts/x.py *".into(), "jq *".into()],
        ..RuleSet::default()
    };
    let obs = runs_of(
        &[&[
            &["python3", "/skill/scripts/x.py", "plan.json"],
            &["python3", "/skill/lib/helper.py", "plan.json"],
            &["jq", "-r", ".steps", "plan.json"],
        ]],
        &["plan.json"],
    );
    let mut d = draft(&obs);
    d.keep_entry_start(&wrapped, &start);
    assert_eq!(
        rules(&d.cli),
        [
            "jq -r .steps [A-Za-z0-9]*",
            "python3 /skill/scripts/x.py *",
            "python3 /skill/lib/helper.py [A-Za-z0-9]*"
        ]
    );
    assert_eq!(
        d.cli[1].evidence,
        "kept: the kernel starts the script with python3 (by its #! line) and the agent's \
         arguments, which differ each run: one run's cannot stand for the next's"
    );
    assert!(cli_matches(
        &d.cli[1].rule,
        &[
            "python3",
            "/skill/scripts/x.py",
            "plan.json",
            "--format",
            "json"
        ]
    ));
    let lines = diff(&wrapped, &[], &d);
    assert!(
        lines
            .iter()
            .any(|l| l.op == ' ' && l.rule == "python3 /skill/scripts/x.py *"),
        "{lines:?}"
    );
    // Calls of several forms (merged runs, a flag), and an interpreter with its `#!` argument
    // (`#!/usr/bin/env -S node --no-warnings`): one start each, as wrap writes it, where the
    // first of its calls was; a band without it gets it added. Another file, or the script as
    // the value of an option, is not the start.
    let start = EntryStart::Kernel {
        path: "/skill/scripts/x.mjs".into(),
        shebang_rule: None,
    };
    let obs = runs_of(
        &[
            &[
                &["node", "--no-warnings", "/skill/scripts/x.mjs", "a.json"],
                &[
                    "node",
                    "--no-warnings",
                    "/skill/scripts/x.mjs",
                    "b.json",
                    "--all",
                ],
                &["node", "/skill/scripts/x.mjs.bak", "a.json"],
                // Code for `node -e`, not the script.
                &["node", "-e", "/skill/scripts/x.mjs"],
            ],
            &[&["node", "--no-warnings", "/skill/scripts/x.mjs", "c.json"]],
        ],
        &["a.json", "b.json", "c.json"],
    );
    let mut d = draft(&obs);
    d.keep_entry_start(&RuleSet::default(), &start);
    assert_eq!(
        rules(&d.cli),
        [
            "node /skill/scripts/x.mjs.bak [A-Za-z0-9]*",
            "node --no-warnings /skill/scripts/x.mjs *",
            "node -e /skill/scripts/x.mjs"
        ],
        "{:?}",
        d.cli
    );
    assert!(
        d.cli[1]
            .evidence
            .starts_with("the kernel starts the script with node (by its #! line)"),
        "{}",
        d.cli[1].evidence
    );
    // No call of the script's interpreter (a compiled program, or `bash`, which every band
    // gets), and no rule of the band's that starts it: nothing changes.
    let obs = obs_execs(&[&["jq", "-r", ".a", "x.json"]]);
    let mut d = draft(&obs);
    let before = d.clone();
    d.keep_entry_start(&wrapped, &start);
    assert_eq!(d, before);
    // No call observed (`#!/usr/bin/python3 -u`: the kernel execs the interpreter by its path,
    // a call the gate does not record): the band's own starts are kept, as spelled; an
    // essential's needs no rule.
    let start = EntryStart::Kernel {
        path: "/skill/scripts/x.py".into(),
        shebang_rule: None,
    };
    for (current, want, kept) in [
        (
            vec!["python3 -u /skill/scripts/x.py *", "jq *"],
            vec!["jq -r .a x.json", "python3 -u /skill/scripts/x.py *"],
            true,
        ),
        (
            vec!["python3 /skill/scripts/x.py", "python3 -c 1"],
            vec!["jq -r .a x.json", "python3 /skill/scripts/x.py"],
            true,
        ),
        (
            vec!["sh /skill/scripts/x.py *"],
            vec!["jq -r .a x.json"],
            false,
        ),
    ] {
        let current = RuleSet {
            cli: current.into_iter().map(String::from).collect(),
            ..RuleSet::default()
        };
        let mut d = draft(&obs);
        d.keep_entry_start(&current, &start);
        assert_eq!(rules(&d.cli), want);
        if let Some(r) = d.cli.get(1) {
            assert_eq!(
                r.evidence,
                format!(
                    "{}the kernel starts the script with python3 (by its #! line), which no \
                     observed call shows",
                    if kept { "kept: " } else { "" }
                )
            );
        }
    }
    // No call observed and no start of the band's (a band without one, which learn's observing
    // band got the interpreter for): the start its `#!` line needs, as wrap writes it. Before,
    // none, and the learned band could not start its script.
    let with = EntryStart::Kernel {
        path: "/skill/scripts/x.py".into(),
        shebang_rule: None,
    }
    .with_shebang(
        std::path::Path::new("scripts/x.py"),
        b"#!/usr/bin/python3 -u\nimport sys\n",
    );
    assert_eq!(
        with,
        EntryStart::Kernel {
            path: "/skill/scripts/x.py".into(),
            shebang_rule: Some("python3 -u /skill/scripts/x.py *".into()),
        }
    );
    let mut d = draft(&obs);
    d.keep_entry_start(&RuleSet::default(), &with);
    assert_eq!(
        rules(&d.cli),
        ["jq -r .a x.json", "python3 -u /skill/scripts/x.py *"]
    );
    assert_eq!(
        d.cli[1].evidence,
        "the kernel starts the script with python3 (by its #! line), which no observed call shows"
    );
    // The band's own start wins over it; `#!/bin/sh` needs none.
    let mut d = draft(&obs);
    let own = RuleSet {
        cli: vec!["python3 -u /skill/scripts/x.py --fast".into()],
        ..RuleSet::default()
    };
    d.keep_entry_start(&own, &with);
    assert_eq!(
        rules(&d.cli),
        ["jq -r .a x.json", "python3 -u /skill/scripts/x.py --fast"]
    );
    let sh = EntryStart::Kernel {
        path: "/skill/scripts/x.py".into(),
        shebang_rule: None,
    }
    .with_shebang(std::path::Path::new("scripts/x.py"), b"#!/bin/sh\n");
    assert_eq!(
        sh,
        EntryStart::Kernel {
            path: "/skill/scripts/x.py".into(),
            shebang_rule: None,
        }
    );
    // A start observed without arguments (a script whose input is a document, not its argv)
    // stays exact, unless the band's own start admits it; with arguments too, wrap's.
    let no_args: &[&str] = &["python3", "/skill/scripts/x.py"];
    for (calls, current, want) in [
        (vec![no_args], vec![], "python3 /skill/scripts/x.py"),
        (
            vec![no_args],
            vec!["python3 /skill/scripts/x.py *"],
            "python3 /skill/scripts/x.py *",
        ),
        (
            vec![no_args, &["python3", "/skill/scripts/x.py", "--all"]],
            vec![],
            "python3 /skill/scripts/x.py *",
        ),
    ] {
        let current = RuleSet {
            cli: current.into_iter().map(String::from).collect(),
            ..RuleSet::default()
        };
        let mut d = draft(&obs_execs(&calls));
        d.keep_entry_start(&current, &start);
        assert_eq!(rules(&d.cli), [want]);
    }
}

/// A pattern of the band narrowed to one run's files or calls is said, so the author knows the
/// next input may need more (third wild trial: `**` narrowed to one workspace's files, and the
/// next ran without `libs/`).
#[test]
fn narrowing_a_pattern_is_said() {
    let line = |key: &str, op: char, rule: &str| DiffLine {
        key: key.into(),
        op,
        rule: rule.into(),
        evidence: String::new(),
    };
    let lines = [
        line("allow.read", '-', "**"),
        line("allow.read", '+', "prisma/schema.prisma"),
        line("allow.cli", '-', "grep *"),
        line("allow.cli", '+', "grep -r model prisma/"),
        line("allow.cli", '-', "jq *"),
        line("allow.write", '-', "out/**"),
    ];
    let note = narrowed_note(&lines).expect("a note");
    assert!(
        note.starts_with("the draft replaces `**` (allow.read), `grep *` (allow.cli), `jq *` (allow.cli) with what was observed"),
        "{note}"
    );
    // A pattern only removed (nothing added in its column) is not narrowed, it is unused.
    assert_eq!(narrowed_note(&lines[4..]), None);
    assert_eq!(
        narrowed_note(&[
            line("allow.read", '-', "a.txt"),
            line("allow.read", '+', "b.txt")
        ]),
        None
    );
}

/// A script that walks a folder (`os.walk`, `fs.readdirSync`, `for f in src/*`) reads the files
/// the next input adds there: the folder it listed is drafted whole, not the files one run read
/// (a trial with public skills: `src/**` narrowed to three files, the fourth never seen).
#[test]
fn a_folder_the_run_listed_is_drafted_whole() {
    let d = draft(&Observations {
        // `os.walk("src")` lists src and each folder below it; `ls docs` reads nothing there.
        listed: argv(&["src", "src/b", "src/d", "docs", "out"]),
        reads: argv(&[
            "src/a.txt",
            "src/b/c.txt",
            "src/d/e.txt",
            "src/d/f.txt",
            "./src/a.txt",
            "notes.txt",
        ]),
        // A folder the run writes is the write rule's: no read rule for its listing.
        writes: argv(&["out/x.md", "out/y.md"]),
        ..Observations::default()
    });
    assert_eq!(rules(&d.read), ["./notes.txt", "docs/**", "src/**"]);
    assert_eq!(rules(&d.write), ["out/**"]);
    assert_eq!(
        d.read[2].evidence,
        "listed by the run: a script that walks it reads files the next input adds; read src/a.txt, src/b/c.txt, src/d/e.txt and 1 more"
    );
    assert_eq!(
        d.read[1].evidence,
        "listed by the run: a script that walks it reads files the next input adds"
    );
    assert!(d.notes.is_empty(), "{:?}", d.notes);
    // The rule admits a file the run never saw there.
    assert!(FsPattern::parse("src/**").is_ok_and(|p| p.matches("src/new/g.txt")));
    // One file read in a folder the run did not list stays that file.
    let d = draft(&Observations {
        reads: argv(&["src/a.txt"]),
        ..Observations::default()
    });
    assert_eq!(rules(&d.read), ["src/a.txt"]);
}

/// The workspace root listed is never `**`: the files read stay one by one, and a note says a
/// script walking the root will not see new files unless a wider rule is written by hand.
#[test]
fn the_workspace_root_listed_is_a_note_and_its_files_stay_exact() {
    for root in [".", "", "./"] {
        let d = draft(&Observations {
            listed: argv(&[root, "data"]),
            reads: argv(&["a.txt", "b.txt", "data/x.csv", "lib/y.py"]),
            ..Observations::default()
        });
        assert_eq!(
            rules(&d.read),
            ["./a.txt", "./b.txt", "data/**", "lib/y.py"],
            "{root:?}"
        );
        assert_eq!(d.notes.len(), 1, "{:?}", d.notes);
        assert!(
            d.notes[0].starts_with("the run listed the workspace root: a script that walks it will not see the files the next input adds there unless a wider rule is written by hand"),
            "{:?}",
            d.notes
        );
    }
}

/// A listed folder no rule may name gets no folder rule: under `.git` or `target` (which the
/// workspace copy leaves out unless a rule names them), with a glob character in its name (the
/// note files with such names get), or outside the workspace (never its folder, and never under
/// /etc or a home).
#[test]
fn a_listed_folder_under_an_excluded_tree_is_never_a_folder_rule() {
    let d = draft_with(
        &Observations {
            listed: argv(&[
                ".git/refs",
                ".git/refs/heads",
                "sub/target/debug",
                "a[1]",
                "/etc/ssl",
                "/home/u/src",
                "/srv/data",
                "../up",
                "bad\nname",
            ]),
            reads: argv(&[
                ".git/refs/heads/main",
                "sub/target/debug/x.d",
                "/etc/ssl/x.pem",
                "/home/u/src/k",
                "/srv/data/in.csv",
                "bad\nname/x",
            ]),
            ..Observations::default()
        },
        &argv(&["/home/u"]),
    );
    // A folder whose name no rule can spell leaves its file to the file's own fate (dropped).
    assert_eq!(
        rules(&d.read),
        [
            ".git/refs/heads/main",
            "/srv/data/in.csv",
            "sub/target/debug/x.d"
        ]
    );
    assert!(
        d.read.iter().all(|r| !r.rule.ends_with("/**")),
        "{:?}",
        d.read
    );
    assert!(
        d.notes.iter().any(|n| n.starts_with(
            "listed a[1]: its name has glob characters, which a rule would read as a pattern"
        )),
        "{:?}",
        d.notes
    );
    assert!(
        d.notes.iter().any(|n| n.starts_with(
            "listed .git/refs, .git/refs/heads, sub/target/debug: not drafted as a folder"
        )),
        "{:?}",
        d.notes
    );
    // /etc and the home: the reads' own notes, as before.
    for p in ["/etc/ssl/x.pem", "/home/u/src/k"] {
        assert!(d.notes.iter().any(|n| n.contains(p)), "{p}: {:?}", d.notes);
    }
}

#[test]
fn merged_runs_carry_their_listings() {
    let mut a = Observations {
        listed: argv(&["src"]),
        reads: argv(&["src/a.txt"]),
        ..Observations::default()
    };
    let b = Observations {
        listed: argv(&["docs"]),
        ..Observations::default()
    };
    assert!(!b.is_empty());
    a.merge(b);
    assert_eq!(a.listed, ["src", "docs"]);
    assert_eq!(rules(&draft(&a).read), ["docs/**", "src/**"]);
    // Saved by an older band (no `listed`): read as none.
    let old: Observations = serde_json::from_str(r#"{"reads": ["a.txt"]}"#).unwrap_or_default();
    assert!(old.listed.is_empty());
    assert_eq!(old.reads, ["a.txt"]);
}

/// The band's `src/**` stays when the run listed `src`, however the band spells it: nothing was
/// narrowed, so no note says so. A pattern replaced by narrower rules still is.
#[test]
fn a_listed_folder_the_band_has_is_kept_and_not_narrowed() {
    let obs = Observations {
        listed: argv(&["src", "src/b"]),
        reads: argv(&["src/a.txt", "src/b/c.txt", "notes.txt"]),
        ..Observations::default()
    };
    let d = draft(&obs);
    for band in ["src/**", "./src/**", "src/**/*.txt"] {
        let current = RuleSet {
            read: argv(&[band, "./notes.txt"]),
            ..RuleSet::default()
        };
        let lines = diff(&current, &[], &d);
        assert!(
            lines.iter().any(|l| l.rule == "src/**" && l.op != '-'),
            "{band}: {lines:?}"
        );
        assert_eq!(narrowed_note(&lines), None, "{band}: {lines:?}");
    }
    let current = RuleSet {
        read: argv(&["**"]),
        ..RuleSet::default()
    };
    let note = narrowed_note(&diff(&current, &[], &d));
    assert!(
        note.is_some_and(|n| n.starts_with("the draft replaces `**` (allow.read)")),
        "{d:?}"
    );
}
