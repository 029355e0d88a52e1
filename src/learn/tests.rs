use pretty_assertions::assert_eq;

use super::*;

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
fn a_few_distinct_calls_stay_exact_and_many_generalise_only_past_what_they_share() {
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
            "jq -r *"
        ]
    );
    assert_eq!(
        d.cli[4].evidence,
        "ran `jq -r .a x.json` (and 3 other calls)"
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
    assert_eq!(rules(&d.cli), ["curl -s *", "gh api *"]);
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
        reads: argv(&["notes.txt", "data/in.csv", "./data/in.csv", "/etc/hosts"]),
        writes: argv(&["out/report.md"]),
        ..Observations::default()
    });
    assert_eq!(rules(&d.read), ["./notes.txt", "/etc/hosts", "data/in.csv"]);
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
    // Two files at the top of an absolute tree are not collapsed into `/etc/**`.
    let d = draft(&Observations {
        reads: argv(&["/etc/a", "/etc/b", "/opt/x/one", "/opt/x/two"]),
        ..Observations::default()
    });
    assert_eq!(rules(&d.read), ["/etc/a", "/etc/b", "/opt/x/**"]);
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
  \"jq -r *\"             # ran `jq -r .a` (and 3 other calls)
- \"gh *\"                # not needed by the observed runs
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
