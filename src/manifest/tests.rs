use std::path::Path;

use pretty_assertions::assert_eq;

use super::*;
use crate::diag::Severity;

fn parse(src: &str) -> Parsed {
    parse_band(Path::new("skills/demo/BAND.md"), src)
}

/// `line:col code message` for each diagnostic, to compare whole lists at once.
fn summary(p: &Parsed) -> Vec<String> {
    p.diagnostics
        .iter()
        .map(|d| format!("{}:{} {} {}", d.loc.line, d.loc.col, d.code, d.message))
        .collect()
}

const FULL: &str = r#"---
band: github-issues
description: List and create GitHub issues
icon: "🐙"
version: 2
allow:
  cli: ["gh issue *", "jq *"]
  net:
    - api.github.com
    - "*.githubusercontent.com"
  read: ["data/**"]
  write: [out/]
deny:
  read: ["**/.env*"]
insist:
  cli: ["jq *"]
env:
  secrets: [GITHUB_TOKEN]
requires:
  secrets: [GITHUB_TOKEN]
limit:
  maxRuntimeMs: 30s
  maxMemoryBytes: 256m
  maxOutputBytes: 1.5k
  maxPids: 64
  maxCpus: 0.5
execution:
  target: local-lima
github-issues:
  repo: octo/demo
---

# Notes
Body text.
"#;

#[test]
fn full_band_parses() {
    let p = parse(FULL);
    assert_eq!(summary(&p), Vec::<String>::new());
    let b = p.band.expect("band");
    assert_eq!(b.name, "github-issues");
    assert_eq!(b.version, Some(2));
    assert_eq!(b.allow.cli, vec!["gh issue *", "jq *"]);
    assert_eq!(
        b.allow.net,
        vec!["api.github.com", "*.githubusercontent.com"]
    );
    assert_eq!(b.allow.write, vec!["out/"]);
    assert_eq!(b.deny.read, vec!["**/.env*"]);
    assert_eq!(b.insist.cli, vec!["jq *"]);
    assert_eq!(b.secrets, vec!["GITHUB_TOKEN"]);
    assert_eq!(b.limits.max_runtime_ms, Some(30_000));
    assert_eq!(b.limits.max_memory_bytes, Some(256 << 20));
    assert_eq!(b.limits.max_output_bytes, Some(1536));
    assert_eq!(b.limits.max_pids, Some(64));
    assert_eq!(b.limits.max_cpus, Some(0.5));
    assert_eq!(b.target, Some(Target::Lima));
    assert_eq!(b.config, Some(serde_json::json!({"repo": "octo/demo"})));
    assert_eq!(b.body.as_deref(), Some("# Notes\nBody text."));
}

#[test]
fn frontmatter_errors() {
    assert_eq!(
        summary(&parse("band: x\n")),
        vec!["1:1 F001 the file does not start with a `---` line"]
    );
    assert_eq!(
        summary(&parse("---\nband: x\n")),
        vec!["1:1 F001 the frontmatter is never closed"]
    );
    assert_eq!(
        summary(&parse("---\n- a\n- b\n---\n")),
        vec!["2:1 F003 the frontmatter must be a mapping of keys to values"]
    );
    // A BOM and CRLF line endings are fine.
    let p = parse("\u{feff}---\r\nband: a\r\ndescription: d\r\n---\r\n");
    assert_eq!(summary(&p), Vec::<String>::new());
}

#[test]
fn yaml_syntax_error_is_located() {
    let p = parse("---\nband: x\ndescription: d\nallow:\n  net: [a, b\n---\n");
    assert_eq!(p.diagnostics.len(), 1);
    let d = &p.diagnostics[0];
    assert_eq!(d.code, Code::YamlSyntax);
    assert!(d.loc.line >= 5, "{d:?}");
    assert!(d.hint.is_some());
}

#[test]
fn yaml_error_lines_count_newlines_only() {
    // Found by the band_md fuzz target: the YAML parser counts a lone `\r` as a line break, so
    // its line number pointed past the end of the file. Positions count `\n` lines, like the
    // rest of band and the snippet renderer.
    let text = "---\nband: x\ndescription: d\nallow: {cli: [a], n\r\r\r\r\r\ret: [b\n---\nbody\n";
    let p = parse(text);
    assert_eq!(summary(&p).len(), 1, "{:?}", p.diagnostics);
    let d = &p.diagnostics[0];
    assert_eq!(d.code, Code::YamlSyntax);
    assert_eq!(d.loc, Loc::new(4, 28), "{d:?}");
    assert!(d.loc.line <= text.lines().count());
    // Columns count characters, not bytes.
    let p = parse("---\nband: x\ndescription: \"é\" ]\n---\n");
    assert_eq!(p.diagnostics[0].loc, Loc::new(3, 18), "{:?}", p.diagnostics);
}

#[test]
fn unquoted_star_is_a_yaml_error_with_a_hint() {
    let p = parse("---\nband: x\ndescription: d\nallow:\n  net:\n    - *.github.com\n---\n");
    let d = &p.diagnostics[0];
    assert_eq!(d.code, Code::YamlSyntax);
    assert_eq!(d.loc.line, 6);
    assert!(d.hint.as_deref().unwrap_or("").contains("quote"));
}

#[test]
fn missing_and_bad_fields() {
    let p = parse("---\nicon: x\n---\n");
    assert_eq!(
        summary(&p),
        vec![
            "1:1 F004 required field `band` is missing",
            "1:1 F004 required field `description` is missing"
        ]
    );
    let p = parse("---\nband: MySkill\ndescription: d\nversion: 0\n---\n");
    assert_eq!(
        summary(&p),
        vec![
            "2:1 F006 band name `MySkill` is not kebab-case",
            "4:1 F008 `version` must be a positive integer, found 0"
        ]
    );
    assert_eq!(
        p.diagnostics[0].hint.as_deref(),
        Some("use lowercase letters, digits and single hyphens, e.g. `my-skill`")
    );
    let p = parse("---\nband: [a]\ndescription: 3\n---\n");
    assert_eq!(
        summary(&p),
        vec![
            "2:1 F005 `band` must be a string, found a list",
            "3:1 F005 `description` must be a string, found a number `3`"
        ]
    );
}

#[test]
fn unknown_keys_are_errors_with_suggestions() {
    let p =
        parse("---\nband: a\ndescription: d\nlimits:\n  maxRuntimeMs: 5\nalow:\n  cli: []\n---\n");
    assert_eq!(
        summary(&p),
        vec![
            "4:1 F007 unknown key `limits`",
            "6:1 F007 unknown key `alow`"
        ]
    );
    assert_eq!(
        p.diagnostics[0].hint.as_deref(),
        Some("did you mean `limit`?")
    );
    assert_eq!(
        p.diagnostics[1].hint.as_deref(),
        Some("did you mean `allow`?")
    );
    assert!(p.diagnostics.iter().all(|d| d.severity == Severity::Error));
}

#[test]
fn rule_lists_are_type_checked() {
    let p = parse(
        "---\nband: a\ndescription: d\nallow:\n  cli: \"jq *\"\n  read: [42, {x: 1}]\n  nett: [a]\n  tools: [x]\n---\n",
    );
    assert_eq!(
        summary(&p),
        vec![
            "5:3 F005 `allow.cli` must be a list, found a single string",
            "6:14 F005 `allow.read[1]` must be a string, found a mapping",
            "7:3 F007 unknown key `allow.nett`",
            "8:3 F011 `allow.tools` is not enforced by band and is ignored",
        ]
    );
    assert_eq!(
        p.diagnostics[0].hint.as_deref(),
        Some("write it as a list: `cli: [\"jq *\"]`")
    );
    // A number in a list is taken as text (e.g. a read path `2024`).
    assert_eq!(p.band.expect("band").allow.read, vec!["42"]);
}

#[test]
fn duplicate_rules_warn() {
    let p = parse("---\nband: a\ndescription: d\nallow:\n  cli:\n    - jq *\n    - jq *\n---\n");
    assert_eq!(
        summary(&p),
        vec!["7:7 P005 `jq *` appears twice in `allow.cli`"]
    );
}

#[test]
fn limits_accept_units_and_check_ranges() {
    let p = parse(
        "---\nband: a\ndescription: d\nlimit:\n  maxRuntimeMs: 5m\n  maxMemoryBytes: 1k\n  maxPids: many\n  maxDiskBytes: -1g\n  maxCostDollars: $0.50\n  maxRuntime: 1\n  maxLogBytes: [1]\n---\n",
    );
    assert_eq!(
        summary(&p),
        vec![
            "6:3 L002 limit `maxMemoryBytes` = 1k is out of range: it must be between 4m and 1t",
            "7:3 L001 limit `maxPids`: `many` is not a whole number",
            "8:3 L001 limit `maxDiskBytes`: `-1g` must not be negative",
            "9:3 L003 `maxCostDollars` is parsed but not enforced: band cannot see what an API call costs",
            "10:3 F007 unknown key `limit.maxRuntime`",
            "11:3 L001 limit `maxLogBytes` must be a number or a string like `30s` or `512m`, found a list",
        ]
    );
    assert_eq!(
        p.diagnostics[4].hint.as_deref(),
        Some("did you mean `maxRuntimeMs`?")
    );
    let b = p.band.expect("band");
    assert_eq!(b.limits.max_runtime_ms, Some(300_000));
    assert_eq!(b.limits.max_cost_dollars, Some(0.5));
}

#[test]
fn targets() {
    assert_eq!(Target::parse("host"), Ok(Target::Host));
    assert_eq!(Target::parse("local-lima"), Ok(Target::Lima));
    assert_eq!(
        Target::parse("ssh://me@build.example:2222"),
        Ok(Target::Ssh {
            user: "me".into(),
            host: "build.example".into(),
            port: 2222
        })
    );
    assert_eq!(
        Target::parse("ssh://me@box").map(|t| t.to_string()),
        Ok("ssh://me@box".into())
    );
    assert!(Target::parse("ssh://box").is_err());
    // IPv6 hosts: bracketed with or without a port, printed bracketed (found by the fuzzer:
    // `ssh://u@[::1]:44` printed as `ssh://u@::1:44`, which read back as host `::1:44`, port 22).
    let v6 = |port| Target::Ssh {
        user: "u".into(),
        host: "::1".into(),
        port,
    };
    assert_eq!(Target::parse("ssh://u@[::1]:44"), Ok(v6(44)));
    assert_eq!(Target::parse("ssh://u@[::1]"), Ok(v6(22)));
    assert_eq!(Target::parse("ssh://u@::1"), Ok(v6(22)));
    assert_eq!(v6(44).to_string(), "ssh://u@[::1]:44");
    assert_eq!(v6(22).to_string(), "ssh://u@[::1]");
    for t in [v6(44), v6(22)] {
        assert_eq!(Target::parse(&t.to_string()), Ok(t));
    }
    assert!(Target::parse("ssh://u@[::1").is_err());
    assert!(Target::parse("ssh://u@[::1]44").is_err());
    let p = parse("---\nband: a\ndescription: d\nexecution:\n  target: docker\n---\n");
    assert_eq!(summary(&p), vec!["5:3 F009 unknown target `docker`"]);
    // Nothing an ssh command line could take for an option.
    for hostile in [
        "ssh://-oProxyCommand=x@h",
        "ssh://u@-oProxyCommand=x",
        "ssh://u@-h:22",
    ] {
        assert!(
            matches!(Target::parse(hostile), Err(TargetError::NotSsh(_))),
            "{hostile}"
        );
    }
    // Another machine: a warning that the user chooses it, and the band still parses.
    for remote in ["ssh://me@box", "sandboxd://127.0.0.1:7000"] {
        let p = parse(&format!(
            "---\nband: a\ndescription: d\nexecution:\n  target: {remote}\n---\n"
        ));
        let got = summary(&p);
        assert!(
            got.len() == 1
                && got[0].starts_with(&format!("5:3 F015 `{remote}` is another machine")),
            "{got:?}"
        );
        assert!(p.band.expect("band").target.is_some_and(|t| t.is_remote()));
    }
}

#[test]
fn upstream_target_names() {
    let band = |target: &str| {
        parse(&format!(
            "---\nband: a\ndescription: d\nexecution:\n  target: {target}\n---\n"
        ))
    };
    // local-lima is lima, with no note.
    let p = band("local-lima");
    assert!(p.diagnostics.is_empty(), "{:?}", summary(&p));
    assert_eq!(p.band.expect("band").target, Some(Target::Lima));
    // local-dangerously is the host, sandboxed: a warning says so, the band still runs.
    assert_eq!(Target::parse("local-dangerously"), Ok(Target::Host));
    let p = band("local-dangerously");
    assert_eq!(
        summary(&p),
        vec![
            "5:3 F014 `local-dangerously` runs on the host target, inside band's sandbox: band \
             never runs a skill unsandboxed"
        ]
    );
    assert!(!p.diagnostics[0].is_error());
    assert_eq!(p.band.expect("band").target, Some(Target::Host));
    // The rest of upstream's names: not supported, with a hint naming band's targets.
    for name in ["cloudflare", "local-docker"] {
        assert_eq!(
            Target::parse(name),
            Err(TargetError::Unsupported(name.into()))
        );
        let p = band(name);
        assert_eq!(
            summary(&p),
            vec![format!(
                "5:3 F009 `{name}` is an upstream Bands target band does not support"
            )]
        );
        assert!(
            p.diagnostics[0]
                .hint
                .as_deref()
                .is_some_and(|h| h.contains("local-lima")),
            "{:?}",
            p.diagnostics[0].hint
        );
    }
}

#[test]
fn secrets_are_checked() {
    let p = parse(
        "---\nband: a\ndescription: d\nenv:\n  secrets: [GOOD, PATH, 9BAD, LD_PRELOAD]\nrequires:\n  secrets: [GOOD, OTHER]\n---\n",
    );
    assert_eq!(
        summary(&p),
        vec![
            "5:19 E001 secret name `PATH` is reserved by band",
            "5:25 E001 secret name `9BAD` is not an environment variable name",
            "5:31 E001 secret name `LD_PRELOAD` uses a prefix band reserves (BAND_, LD_)",
            "7:19 E002 `OTHER` is required but not listed in `env.secrets`, so the script would never see it",
        ]
    );
}

#[test]
fn a_secret_can_be_bound_to_hosts() {
    let p = parse(
        "---\nband: a\ndescription: d\nallow:\n  net: [api.example.com]\nenv:\n  secrets:\n    - PLAIN\n    - name: API_TOKEN\n      hosts: [api.example.com, \"*.example.com\"]\nrequires:\n  secrets: [API_TOKEN]\n---\n",
    );
    assert_eq!(summary(&p), Vec::<String>::new());
    let b = p.band.unwrap();
    assert_eq!(b.secrets, vec!["PLAIN", "API_TOKEN"]);
    assert_eq!(
        b.secret_hosts,
        [(
            "API_TOKEN".to_string(),
            vec!["api.example.com".to_string(), "*.example.com".to_string()]
        )]
        .into_iter()
        .collect()
    );
}

#[test]
fn bound_secrets_are_checked() {
    let p = parse(
        "---\nband: a\ndescription: d\nenv:\n  secrets:\n    - {name: A, hosts: []}\n    - {hosts: [a.test]}\n    - {name: B, hosts: [\"*\"]}\n    - {name: C, hosts: [a.test:443]}\n    - {name: PATH, hosts: [a.test]}\n    - {name: D, host: [a.test]}\n    - [E]\n    - {name: F, hosts: [a.test]}\n    - F\n---\n",
    );
    assert_eq!(
        summary(&p),
        vec![
            "6:7 F004 bound secret `A` names no `hosts`",
            "7:7 F004 a bound secret needs a `name`",
            "8:25 P001 invalid host `*` for a bound secret: a secret is bound to host names (`api.example.com` or `*.example.com`), without a port or a path",
            "9:25 P001 invalid host `a.test:443` for a bound secret: a secret is bound to host names (`api.example.com` or `*.example.com`), without a port or a path",
            "10:8 E001 secret name `PATH` is reserved by band",
            "11:17 F007 unknown key `env.secrets[5].host`",
            "12:7 F005 `env.secrets[6]` must be a secret name or a mapping `{name, hosts}`, found a list",
            "14:7 P005 `F` appears twice in `env.secrets`",
        ]
    );
}

#[test]
fn http_rules_are_allow_net_only() {
    let p = parse(
        "---\nband: a\ndescription: d\nallow:\n  net: [\"GET,POST https://api.example.com/v1/**\", \"https://h.test/x/*\"]\ndeny:\n  net: [\"GET https://api.example.com/v1/admin/**\"]\ninsist:\n  net: [\"GET https://h.test/x/y\"]\n---\n",
    );
    assert_eq!(
        summary(&p),
        vec![
            "7:9 P001 `GET https://api.example.com/v1/admin/**` is an HTTP rule; only `allow.net` takes methods and paths",
            "9:9 P001 `GET https://h.test/x/y` is an HTTP rule; only `allow.net` takes methods and paths",
        ]
    );
    assert_eq!(p.band.unwrap().allow.net.len(), 2);
}

#[test]
fn deny_insist_and_shadowed_allow_exact() {
    let p = parse(
        "---\nband: a\ndescription: d\nallow:\n  cli: [\"jq *\"]\ndeny:\n  cli: [\"jq *\"]\ninsist:\n  cli: [\"jq *\"]\n---\n",
    );
    let codes: Vec<_> = p.diagnostics.iter().map(|d| (d.code, d.loc.line)).collect();
    assert_eq!(codes, vec![(Code::DenyInsist, 9), (Code::NeverMatches, 5)]);
}

#[test]
fn a_loopback_rule_without_a_port_is_an_error_in_allow_and_insist_not_in_deny() {
    let p = parse(
        "---\nband: a\ndescription: d\nallow:\n  net: [localhost, \"127.0.0.1\", \"::1\", \"localhost:8000\", \"[::1]:8000\"]\ndeny:\n  net: [localhost]\ninsist:\n  net: [\"127.0.0.1\"]\n---\n",
    );
    assert_eq!(
        summary(&p),
        vec![
            "5:9 P001 `localhost` names the host's loopback without a port; band opens one loopback port at a time, never all of them",
            "5:20 P001 `127.0.0.1` names the host's loopback without a port; band opens one loopback port at a time, never all of them",
            "5:33 P001 `::1` names the host's loopback without a port; band opens one loopback port at a time, never all of them",
            "9:9 P001 `127.0.0.1` names the host's loopback without a port; band opens one loopback port at a time, never all of them",
            // A port-less loopback deny is fine, and closes every loopback port.
            "5:9 P004 `allow.net` rule `localhost:8000` can never take effect: `deny.net` rule `localhost` covers it",
        ]
    );
    assert!(
        p.diagnostics[..4]
            .iter()
            .all(|d| d.hint.as_deref() == Some(crate::policy::net::LOOPBACK_HINT))
    );
    let b = p.band.expect("band");
    assert_eq!(b.allow.net, vec!["localhost:8000", "[::1]:8000"]);
    assert_eq!(b.deny.net, vec!["localhost"]);
}

#[test]
fn remote_and_reference_bands() {
    let p = parse("---\nurl: https://github.com/x/y\nband: a\ndescription: d\n---\n");
    assert_eq!(
        summary(&p),
        vec![
            "2:1 F010 remote band references (`url:`) are not supported: band never fetches policy"
        ]
    );
    let p = parse("---\npath: ../shared/BAND.md\nallow:\n  cli: [ls]\n---\n");
    assert_eq!(
        summary(&p),
        vec!["3:1 F011 `allow` is ignored in a band file that is a `path:` reference"]
    );
    assert_eq!(
        p.band.expect("band").reference.as_deref(),
        Some("../shared/BAND.md")
    );
}

#[test]
fn config_block_must_be_a_mapping() {
    let p = parse("---\nband: a\ndescription: d\na: 5\n---\n");
    assert_eq!(
        summary(&p),
        vec!["4:1 F005 `a` must be a mapping (the skill's config), found a number `5`"]
    );
}

#[test]
fn band_file_names() {
    assert!(is_band_file(Path::new("x/BAND.md")));
    assert!(is_band_file(Path::new("x/count.band.md")));
    assert!(!is_band_file(Path::new("x/.band.md")));
    assert!(!is_band_file(Path::new("x/band.md")));
}

#[test]
fn kebab_hints() {
    assert_eq!(to_kebab("MySkill"), "my-skill");
    assert_eq!(to_kebab("my_skill v2"), "my-skill-v2");
}

#[test]
fn skill_md() {
    let (s, d) = skill_md::parse_skill_md(
        Path::new("SKILL.md"),
        "---\nname: demo\ndescription: Does things\n---\nUse it.\n",
        "demo",
    );
    assert!(d.is_empty(), "{d:?}");
    assert_eq!(s.body, "Use it.");
    let (_, d) = skill_md::parse_skill_md(Path::new("SKILL.md"), "---\nname: other\n---\n", "demo");
    let msgs: Vec<_> = d.iter().map(|d| d.message.clone()).collect();
    assert_eq!(
        msgs,
        vec![
            "SKILL.md name `other` does not match the folder `demo`",
            "SKILL.md frontmatter has no `description`"
        ]
    );
}

#[test]
fn deny_flags_without_an_option_model_warn() {
    let p = parse(
        "---\nband: x\ndescription: d\nallow:\n  cli: [\"frob *\", \"rm *\"]\ndeny:\n  cli:\n    - rm -rf *\n    - frob -x --all *\n    - frob status\n---\n",
    );
    let got: Vec<_> = p
        .diagnostics
        .iter()
        .map(|d| (d.code, d.severity, d.loc.line, d.loc.col))
        .collect();
    assert_eq!(
        got,
        vec![(Code::DenyFlagsUnmodelled, Severity::Warning, 9, 7)]
    );
    let d = &p.diagnostics[0];
    assert!(d.message.contains("(-x --all) of `frob`"), "{}", d.message);
    assert!(d.message.contains("`find -delete`"), "{}", d.message);
    assert!(
        d.hint.as_deref().unwrap_or("").contains("rm, sed, chmod"),
        "{:?}",
        d.hint
    );
}

#[test]
fn a_misspelt_key_is_an_error_at_every_level() {
    let p = parse(
        "---\nband: demo\ndescription: d\ndney:\n  cli: [\"rm *\"]\ndeny: {reed: [\"**/.env\"]}\ninsist:\n  clii: [\"jq *\"]\nenv:\n  secret: [A]\nrequires:\n  secrets: []\n  network:\n    egres: [a.test]\nlimit: {maxRuntime: 5s}\nexecution:\n  targt: host\n  lima:\n    vmname: x\nprovides:\n  tool: []\ncontract:\n  inputs: {}\ndemo-x: {}\nzzzz: 1\n---\n",
    );
    let got: Vec<String> = p
        .diagnostics
        .iter()
        .filter(|d| d.code == Code::UnknownKey)
        .map(|d| {
            assert_eq!(d.severity, Severity::Error, "{d}");
            format!(
                "{}:{} {} | {}",
                d.loc.line,
                d.loc.col,
                d.message,
                d.hint.as_deref().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            "4:1 unknown key `dney` | did you mean `deny`?",
            "6:8 unknown key `deny.reed` | did you mean `read`?",
            "8:3 unknown key `insist.clii` | did you mean `cli`?",
            "10:3 unknown key `env.secret` | did you mean `secrets`?",
            "14:5 unknown key `requires.network.egres` | did you mean `egress`?",
            "15:9 unknown key `limit.maxRuntime` | did you mean `maxRuntimeMs`?",
            "17:3 unknown key `execution.targt` | did you mean `target`?",
            "19:5 unknown key `execution.lima.vmname` | did you mean `vmName`?",
            "21:3 unknown key `provides.tool` | did you mean `tools`?",
            "23:3 unknown key `contract.inputs` | did you mean `input`?",
            "24:1 unknown key `demo-x` | did you mean `demo`?",
            "25:1 unknown key `zzzz` | band reads `band`, `description`, `icon`, `version`, `allow`, `deny`, `insist`, `env`, `requires`, `limit`, `execution`, `path`, `extends`, `includes`, `provides`, `contract`, `url`, `demo`; it refuses other keys, so a typo cannot change the policy",
        ]
    );
}

#[test]
fn every_upstream_key_is_still_accepted() {
    // Every key upstream Bands documents (shared/research/bands-upstream.md §1.2-1.4).
    let p = parse(
        "---\nband: up\nicon: \"x\"\ndescription: d\nversion: 2\nallow:\n  cli: [\"jq *\"]\n  net: [a.test]\n  read: [data/]\n  write: [out/]\n  tools: [x]\n  mcps: [x]\n  apis: [x]\n  skills: [x]\n  fs: [x]\ndeny: {cli: [\"rm *\"]}\ninsist: {cli: [\"jq *\"]}\nenv:\n  secrets: [A]\n  variables: [B=1]\nrequires:\n  secrets: [A]\n  network:\n    egress: [a.test]\nlimit:\n  maxInputBytes: 1k\n  maxOutputBytes: 1k\n  maxRuntimeMs: 1000\n  maxCostDollars: 0.5\nexecution:\n  target: local-lima\n  lima: {vmName: v, port: 9000}\n  cloudflare: {workerName: w, accountId: a, customDomain: c}\nprovides: {apis: [], tools: [], skills: [], mcps: []}\ncontract: {input: {}, output: ./o.json}\nup: {anything: [goes, here]}\n---\n",
    );
    let errors: Vec<String> = p
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(ToString::to_string)
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
}

#[test]
fn limit_fields_and_key_sets_agree() {
    let limits: Vec<&str> = super::LIMIT_FIELDS.iter().map(|(n, _)| *n).collect();
    assert_eq!(super::known_keys("limit"), Some(&limits[..]));
}

#[test]
fn sandboxd_targets_name_a_host_and_a_port() {
    let t = |s: &str| Target::parse(s);
    assert_eq!(
        t("sandboxd://pod.ns.svc:9090"),
        Ok(Target::Sandboxd {
            host: "pod.ns.svc".into(),
            port: 9090
        })
    );
    assert_eq!(
        t("sandboxd://[::1]:19090"),
        Ok(Target::Sandboxd {
            host: "::1".into(),
            port: 19090
        })
    );
    for bad in [
        "sandboxd://host",
        "sandboxd://:9090",
        "sandboxd://h:0",
        "sandboxd://h:x",
        "sandboxd://::1:9090",
        "sandboxd://a b:1",
    ] {
        assert_eq!(t(bad), Err(TargetError::NotSandboxd(bad.into())), "{bad}");
    }
    for s in ["sandboxd://pod:9090", "sandboxd://[::1]:19090"] {
        assert_eq!(t(s).unwrap().to_string(), s);
    }
}
