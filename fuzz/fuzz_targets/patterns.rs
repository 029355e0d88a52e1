//! The rule parsers and matchers: cli, net and path patterns, limit units, execution targets.
//! Any text goes in; parsing may refuse it but must not panic, and a parsed pattern must answer
//! every query without panicking.
//!
//! Input: lines. `! <pattern>` is a deny pattern, `? <subject>` a subject to check (as an argv,
//! a `host[:port]` and a path), any other line an allow pattern. Seeds in `fuzz/seeds/patterns`.
#![no_main]

use band::manifest::Target;
use band::policy::cli::{CliMatcher, CliPattern};
use band::policy::fs::{FsMatcher, FsPattern};
use band::policy::net::{NetMatcher, NetPattern};
use band::units::{parse_bytes, parse_duration_ms};
use libfuzzer_sys::fuzz_target;

fn host_port(s: &str) -> (&str, Option<u16>) {
    match s.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => (h, p.parse().ok()),
        _ => (s, None),
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (mut allow, mut deny, mut subjects) = (Vec::new(), Vec::new(), Vec::new());
    for line in text.split('\n').take(16) {
        if let Some(p) = line.strip_prefix("! ") {
            deny.push(p.to_string());
        } else if let Some(s) = line.strip_prefix("? ") {
            subjects.push(s);
        } else {
            allow.push(line.to_string());
        }
    }
    let argvs: Vec<Vec<String>> = subjects
        .iter()
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .collect();

    let (mut cli, mut net, mut fs) = (Vec::new(), Vec::new(), Vec::new());
    for t in allow.iter().chain(&deny) {
        if let Ok(p) = CliPattern::parse(t) {
            if let Some(argv) = p.concrete_argv() {
                assert!(
                    p.matches(&argv),
                    "concrete pattern {t:?} does not match its own argv {argv:?}"
                );
            }
            cli.push(p);
        }
        if let Ok(p) = NetPattern::parse(t) {
            net.push(p);
        }
        if let Ok(p) = FsPattern::parse(t) {
            let _ = (p.static_prefix(), p.is_concrete(), p.normalized());
            fs.push(p);
        }
        let _ = (parse_bytes(t), parse_duration_ms(t));
        if let Ok(target) = Target::parse(t) {
            assert_eq!(
                Target::parse(&target.to_string()).as_ref(),
                Ok(&target),
                "{t:?}"
            );
        }
    }
    for (s, argv) in subjects.iter().zip(&argvs) {
        let (host, port) = host_port(s);
        for p in &cli {
            let _ = (p.matches(argv), p.matches_as_deny(argv));
        }
        for p in &net {
            let _ = p.matches_host(host, port);
            if let Ok(ip) = host.trim_matches(|c| c == '[' || c == ']').parse() {
                let _ = p.matches_ip(ip, port);
            }
        }
        for p in &fs {
            let _ = p.matches(s);
        }
    }
    // Coverage between patterns (lint and composition use it).
    for a in cli.iter().take(8) {
        for b in cli.iter().take(8) {
            let _ = (a.covers(b), a.covers_as_deny(b));
        }
    }
    for a in net.iter().take(8) {
        for b in net.iter().take(8) {
            let _ = a.covers(b);
        }
    }
    for a in fs.iter().take(8) {
        for b in fs.iter().take(8) {
            let _ = a.covers(b);
        }
    }
    // Whole matchers, when every pattern of a list parses for that category.
    if let Ok(m) = CliMatcher::new(&allow, &deny) {
        let _ = m.commands();
        for argv in &argvs {
            let _ = m.check(argv);
        }
    }
    if let Ok(m) = NetMatcher::new(&allow, &deny) {
        let _ = m.allows_any();
        for s in &subjects {
            let (host, port) = host_port(s);
            let _ = m.check_host(host, port);
        }
    }
    if let Ok(m) = FsMatcher::new(&allow, &deny) {
        for s in &subjects {
            let _ = m.check(s);
        }
    }
});
