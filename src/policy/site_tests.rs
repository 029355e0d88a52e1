use super::*;
use crate::policy::{CompiledPolicy, Decision};

fn site(text: &str) -> SitePolicy {
    match parse_site(Path::new("/etc/band/site.md"), text) {
        Ok(s) => s,
        Err(e) => panic!("{e} (hint: {:?})", e.hint),
    }
}

fn site_err(text: &str) -> SiteError {
    match parse_site(Path::new("/etc/band/site.md"), text) {
        Ok(s) => panic!("parsed: {s:?}"),
        Err(e) => e,
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn band(cat: Category, allow: &[&str]) -> Policy {
    let mut p = Policy::default();
    *p.allow.get_mut(cat) = strings(allow);
    p
}

fn refusal(band: &Policy, site: &SitePolicy, tier: &str) -> Refusal {
    match apply(band, RunKind::default(), site, tier) {
        Ok(i) => panic!("not refused: {:?}", i.policy),
        Err(r) => *r,
    }
}

const EXAMPLE: &str = "---
site: acme-ci
deny:
  cli: [\"curl *\"]
  net: [\"*.pastebin.com\"]
  read: [\"**/.env*\"]
allow:
  net: [\"*.github.com\", api.github.com]
insist:
  cli: [\"jq *\"]
limit:
  maxRuntimeMs: 5m
  maxMemoryBytes: 512m
unsigned: community
tiers:
  community:
    network: false
    secrets: false
  verified:
    limit: {maxPids: 64}
keys:
  - {signer: alice@example.com, key: \"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINGClUxSyFdBth5MX8fP6yp0ZocB2cZJzkO/fxIVi5yR\", tier: verified}
---

# ACME's CI fleet
";

#[test]
fn a_site_file_is_parsed_whole() {
    let s = site(EXAMPLE);
    assert_eq!(s.name.as_deref(), Some("acme-ci"));
    assert_eq!(s.rules.deny.cli, strings(&["curl *"]));
    assert_eq!(
        s.rules.allow.net,
        Some(strings(&["*.github.com", "api.github.com"]))
    );
    assert_eq!(
        s.rules.allow.cli, None,
        "no ceiling where the site names none"
    );
    assert_eq!(s.rules.insist.cli, strings(&["jq *"]));
    assert_eq!(s.rules.limits.max_runtime_ms, Some(300_000));
    assert_eq!(s.rules.limits.max_memory_bytes, Some(512 << 20));
    assert_eq!(s.unsigned, "community");
    let community = &s.tiers["community"];
    assert!(!community.switches.network && !community.switches.secrets);
    assert!(community.switches.run && community.switches.exec);
    assert_eq!(s.tiers["verified"].limits.max_pids, Some(64));
    assert_eq!(s.keys.len(), 1);
    assert_eq!(s.keys[0].signer, "alice@example.com");
    assert_eq!(s.at("deny.cli[0]"), "/etc/band/site.md:4");
    assert_eq!(s.at("tiers.community.network"), "/etc/band/site.md:17");
}

#[test]
fn site_errors_name_the_line_and_a_hint() {
    let e = site_err("---\ndeny:\n  cli: [\"curl *\"]\n  nett: [a.test]\n---\n");
    assert_eq!(
        (e.line, e.message.as_str()),
        (4, "unknown key `deny.nett` in the site policy")
    );
    assert!(
        e.hint
            .as_deref()
            .unwrap_or("")
            .contains("did you mean `net`?"),
        "{e:?}"
    );

    let e = site_err("---\nallow:\n  net:\n    - a.test\n    - \"ftp://x.test/\"\n---\n");
    assert_eq!(e.line, 5, "{e:?}");
    assert!(
        e.message.starts_with("`allow.net[1]` `ftp://x.test/`:"),
        "{e:?}"
    );

    let e = site_err("---\ntiers:\n  community:\n    network: no\n---\n");
    assert_eq!(e.line, 4, "{e:?}");
    assert_eq!(
        e.message,
        "`tiers.community.network` must be `true` or `false`"
    );

    let e = site_err("---\nunsigned: community\n---\n");
    assert_eq!(e.line, 2);
    assert!(
        e.message.contains("names a tier `tiers` does not define"),
        "{e:?}"
    );

    let e = site_err("---\nlimit:\n  maxRuntimeMs: forever\n---\n");
    assert_eq!(e.line, 3);

    let e = site_err("no frontmatter\n");
    assert_eq!(e.line, 1);
    assert!(e.hint.is_some());

    let e = site_err("---\nkeys:\n  - {signer: a, tier: local}\n---\n");
    assert!(e.message.contains("needs `key`"), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!("/etc/band/site.md:3:5: {}", e.message)
    );

    let e = site_err("---\nkeys:\n  - {signer: a, key: \"ssh-ed25519 AAAA\", tier: local}\n---\n");
    assert!(
        e.message
            .starts_with("`keys[0].key`: not an OpenSSH public key line"),
        "{e:?}"
    );
    assert_eq!(e.line, 3);
}

#[test]
fn an_empty_site_narrows_nothing() {
    let s = site("---\n---\n");
    let b = band(Category::Cli, &["curl *"]);
    let i = apply(&b, RunKind::default(), &s, "local").expect("open site");
    assert_eq!(i.policy, b);
    assert_eq!(i.tier, "local");
}

#[test]
fn a_site_deny_that_covers_a_band_allow_refuses_naming_both_rules() {
    let s = site("---\ndeny:\n  cli: [\"curl *\"]\n---\n");
    let r = refusal(&band(Category::Cli, &["curl *"]), &s, "local");
    assert_eq!(
        r.message,
        "the band's allow.cli `curl *` is refused by the site policy's deny.cli `curl *` \
         (/etc/band/site.md:3) (tier local)"
    );
    assert_eq!(r.band_rule, "allow.cli `curl *`");
    assert_eq!(r.site_rule, "deny.cli `curl *`");
    // A narrower band rule the deny covers is refused too.
    let r = refusal(
        &band(Category::Cli, &["curl -s https://x.test/*"]),
        &s,
        "local",
    );
    assert_eq!(r.band_rule, "allow.cli `curl -s https://x.test/*`");
}

#[test]
fn a_site_deny_that_only_overlaps_joins_the_bands_deny() {
    let s = site("---\ndeny:\n  net: [\"*.pastebin.com\"]\n  read: [\"**/.env*\"]\n---\n");
    let mut b = band(Category::Net, &["*"]);
    b.allow.read = strings(&["**"]);
    let i = apply(&b, RunKind::default(), &s, "local").expect("overlap is not a refusal");
    assert_eq!(i.policy.deny.net, strings(&["*.pastebin.com"]));
    let c = CompiledPolicy::compile(&i.policy).expect("compiles");
    assert!(!c.net.check_host("x.pastebin.com", Some(443)).is_allowed());
    assert!(c.net.check_host("example.test", Some(443)).is_allowed());
    assert!(matches!(
        c.read.check("a/.env.local"),
        Decision::Deny { .. }
    ));
    assert!(c.read.check("a/b.txt").is_allowed());
}

#[test]
fn a_band_rule_outside_an_allow_ceiling_is_refused() {
    let s = site("---\nallow:\n  net: [\"*.github.com\", api.github.com]\n---\n");
    apply(
        &band(Category::Net, &["api.github.com", "uploads.github.com:443"]),
        RunKind::default(),
        &s,
        "local",
    )
    .expect("inside the ceiling");
    let r = refusal(
        &band(Category::Net, &["api.github.com", "example.test"]),
        &s,
        "local",
    );
    assert_eq!(r.band_rule, "allow.net `example.test`");
    assert_eq!(
        r.site_rule,
        "allow.net ceiling [`*.github.com`, `api.github.com`]"
    );
    // No ceiling for cli: anything goes there.
    apply(
        &band(Category::Cli, &["curl *"]),
        RunKind::default(),
        &s,
        "local",
    )
    .expect("no cli ceiling");
    // An empty ceiling allows nothing in its category.
    let s = site("---\nallow:\n  write: []\n---\n");
    let r = refusal(&band(Category::Write, &["out/"]), &s, "local");
    assert_eq!(r.site_rule, "allow.write: [] (nothing)");
}

#[test]
fn an_http_rule_is_narrower_than_its_host_rule() {
    // A host ceiling admits the band's HTTP rules for that host.
    let hosts = site("---\nallow:\n  net: [api.github.com]\n---\n");
    let l7 = band(
        Category::Net,
        &["GET,POST https://api.github.com/repos/acme/**"],
    );
    apply(&l7, RunKind::default(), &hosts, "local").expect("inside the host ceiling");
    // An HTTP ceiling admits narrower HTTP rules, not the whole host.
    let paths = site("---\nallow:\n  net: [\"GET,POST https://api.github.com/repos/**\"]\n---\n");
    apply(&l7, RunKind::default(), &paths, "local").expect("inside the path ceiling");
    let r = refusal(&band(Category::Net, &["api.github.com"]), &paths, "local");
    assert_eq!(r.band_rule, "allow.net `api.github.com`");
    let r = refusal(
        &band(
            Category::Net,
            &["DELETE https://api.github.com/repos/acme/**"],
        ),
        &paths,
        "local",
    );
    assert_eq!(
        r.band_rule,
        "allow.net `DELETE https://api.github.com/repos/acme/**`"
    );
    // A site deny of the host refuses the band's HTTP rules for it.
    let deny = site("---\ndeny:\n  net: [api.github.com]\n---\n");
    let r = refusal(&l7, &deny, "local");
    assert_eq!(r.site_rule, "deny.net `api.github.com`");
    // An HTTP rule is no deny.
    let e = site_err("---\ndeny:\n  net: [\"GET https://h.test/**\"]\n---\n");
    assert_eq!(e.line, 3, "{e:?}");
}

#[test]
fn insisted_band_rules_are_bounded_like_allowed_ones() {
    let s = site("---\nallow:\n  cli: [\"jq *\"]\n---\n");
    let mut b = Policy::default();
    b.insist.cli = strings(&["echo AUDIT:*"]);
    let r = refusal(&b, &s, "local");
    assert_eq!(r.band_rule, "insist.cli `echo AUDIT:*`");
}

#[test]
fn site_insists_must_be_allowed_by_the_band_and_join_its_insist() {
    let s = site("---\ninsist:\n  cli: [\"echo AUDIT:*\"]\n---\n");
    let r = refusal(&band(Category::Cli, &["jq *"]), &s, "local");
    assert_eq!(r.band_rule, "allow.cli (nothing covers `echo AUDIT:*`)");
    assert_eq!(r.site_rule, "insist.cli `echo AUDIT:*`");
    let i = apply(
        &band(Category::Cli, &["echo *"]),
        RunKind::default(),
        &s,
        "local",
    )
    .expect("allowed");
    assert_eq!(i.policy.insist.cli, strings(&["echo AUDIT:*"]));
    let mut b = band(Category::Cli, &["echo *"]);
    b.deny.cli = strings(&["echo AUDIT:*"]);
    let r = refusal(&b, &s, "local");
    assert_eq!(r.band_rule, "deny.cli `echo AUDIT:*`");
}

#[test]
fn switches_refuse_what_they_switch_off() {
    let s = site("---\nnetwork: false\nsecrets: false\nworkspaceWrites: false\nexec: false\n---\n");
    let r = refusal(&band(Category::Net, &["a.test"]), &s, "local");
    assert_eq!(
        (r.band_rule.as_str(), r.site_rule.as_str()),
        ("allow.net `a.test`", "`network: false`")
    );
    assert_eq!(r.at, "/etc/band/site.md:2");
    let b = Policy {
        secrets: strings(&["TOKEN"]),
        ..Policy::default()
    };
    assert_eq!(refusal(&b, &s, "local").site_rule, "`secrets: false`");
    let r = refusal(&band(Category::Write, &["out/"]), &s, "local");
    assert_eq!(r.site_rule, "`workspaceWrites: false`");
    // The run's private /tmp is no workspace write.
    apply(
        &band(Category::Write, &["/tmp/**"]),
        RunKind::default(),
        &s,
        "local",
    )
    .expect("/tmp");
    let r = apply(&Policy::default(), RunKind { exec: true }, &s, "local").expect_err("exec");
    assert_eq!(r.site_rule, "`exec: false`");
    apply(&Policy::default(), RunKind::default(), &s, "local").expect("a skill with nothing runs");
}

#[test]
fn limits_take_the_smaller_value() {
    let s = site(
        "---\nlimit: {maxRuntimeMs: 10s, maxPids: 32}\ntiers:\n  t:\n    limit: {maxRuntimeMs: 5s}\n---\n",
    );
    let mut b = Policy::default();
    b.limits.max_runtime_ms = Some(60_000);
    b.limits.max_pids = Some(8);
    let i = apply(&b, RunKind::default(), &s, "t").expect("limits narrow, never refuse");
    assert_eq!(i.policy.limits.max_runtime_ms, Some(5_000));
    assert_eq!(i.policy.limits.max_pids, Some(8));
    let i = apply(&Policy::default(), RunKind::default(), &s, "local").expect("ok");
    assert_eq!(i.policy.limits.max_runtime_ms, Some(10_000));
}

#[test]
fn a_tier_is_a_layer_of_its_own() {
    let s = site(EXAMPLE);
    let mut b = band(Category::Net, &["api.github.com"]);
    b.allow.cli = strings(&["jq *"]);
    let r = refusal(&b, &s, "community");
    assert_eq!(
        r.message,
        "the band's allow.net `api.github.com` is refused by the tier community policy's \
         `tiers.community.network: false` (/etc/band/site.md:17)"
    );
    assert_eq!(r.tier, "community");
    assert_eq!(r.layer, "tier community");
    let i = apply(&b, RunKind::default(), &s, "verified").expect("verified may have network");
    assert_eq!(i.policy.limits.max_pids, Some(64));
    assert_eq!(
        i.policy.deny.cli,
        strings(&["curl *"]),
        "the site's layer applies to every tier"
    );
    let s = site("---\ntiers:\n  community: {run: false}\n---\n");
    let r = refusal(&Policy::default(), &s, "community");
    assert_eq!(r.site_rule, "`tiers.community.run: false`");
}

/// A small deterministic generator (xorshift64*): no dependency, the same cases every run.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn subset(&mut self, vocab: &[&str], max: usize) -> Vec<String> {
        (0..self.below(max + 1))
            .map(|_| vocab[self.below(vocab.len())].to_string())
            .collect()
    }
}

const CLI: &[&str] = &[
    "curl *",
    "curl -s *",
    "curl https://a.test/*",
    "curl -s https://a.test/x",
    "jq *",
    "jq .x",
    "git status",
    "git *",
    "git push *",
    "ls",
    "ls *",
];
const NET: &[&str] = &[
    "a.test",
    "*.a.test",
    "b.test",
    "*",
    "b.test:80",
    "a.test:443",
    "x.a.test",
];
const FS: &[&str] = &[
    "data/**",
    "data/x",
    "out/",
    "**",
    "*.env",
    "secret.env",
    "data/y/**",
    "out/r",
];

fn vocab(cat: Category) -> &'static [&'static str] {
    match cat {
        Category::Cli => CLI,
        Category::Net => NET,
        Category::Read | Category::Write => FS,
    }
}

fn random_rules(g: &mut Gen) -> (RuleSet, RuleSet) {
    let (mut allow, mut deny) = (RuleSet::default(), RuleSet::default());
    for cat in Category::ALL {
        *allow.get_mut(cat) = g.subset(vocab(cat), 3);
        *deny.get_mut(cat) = g.subset(vocab(cat), 2);
    }
    (allow, deny)
}

/// What a policy decides about each probe, per category.
fn decisions(p: &Policy) -> Vec<Decision> {
    let c = CompiledPolicy::compile(p).expect("generated patterns compile");
    let argv = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
    let mut out = Vec::new();
    for a in [
        "curl -s https://a.test/x",
        "curl https://p.test",
        "jq .x",
        "git status",
        "git push o",
        "ls",
    ] {
        out.push(c.cli.check(&argv(a)));
    }
    for (h, port) in [
        ("a.test", 443),
        ("x.a.test", 443),
        ("b.test", 80),
        ("b.test", 443),
        ("c.test", 443),
    ] {
        out.push(c.net.check_host(h, Some(port)));
    }
    for path in ["data/x", "data/y/z", "out/r", "secret.env", "a/b"] {
        out.push(c.read.check(path));
        out.push(c.write.check(path));
    }
    out
}

#[test]
fn property_the_intersection_never_allows_what_the_band_or_the_site_refuses() {
    let mut g = Gen(0x9E37_79B9_7F4A_7C15);
    let (mut ran, mut allowed_somewhere) = (0, 0);
    for _ in 0..6000 {
        let (allow, deny) = random_rules(&mut g);
        let band = Policy {
            allow,
            deny,
            ..Policy::default()
        };
        let rules = random_site_rules(&mut g, 2);
        let mut s = SitePolicy::open("/gen/site.md");
        s.rules = rules.clone();
        let Ok(i) = apply(&band, RunKind::default(), &s, "local") else {
            continue;
        };
        ran += 1;
        let effective = decisions(&i.policy);
        let by_band = decisions(&band);
        let by_site_deny = decisions(&Policy {
            deny: rules.deny.clone(),
            ..Policy::default()
        });
        let by_ceiling = decisions(&ceiling_of(&rules));
        for (k, d) in effective.iter().enumerate() {
            if d.is_allowed() {
                allowed_somewhere += 1;
                assert!(
                    by_band[k].is_allowed(),
                    "probe {k}: band {band:?} site {rules:?}"
                );
                assert!(
                    !matches!(by_site_deny[k], Decision::Deny { .. }),
                    "probe {k}: site deny ignored: band {band:?} site {rules:?}"
                );
                assert!(
                    by_ceiling[k].is_allowed(),
                    "probe {k}: above the ceiling: band {band:?} site {rules:?}"
                );
            }
        }
    }
    // The property is not vacuous: many intersections ran and allowed something.
    assert!(ran > 300, "only {ran} generated pairs ran");
    assert!(
        allowed_somewhere > 300,
        "only {allowed_somewhere} probes allowed"
    );
}

#[test]
fn a_further_layer_can_only_narrow() {
    // A per-user file or a caller's narrowing is one more layer: what it allows beyond the site
    // changes nothing, what it denies is denied.
    let s = site("---\nallow:\n  net: [a.test]\n---\n");
    let user = site("---\nallow:\n  net: [\"*\"]\ndeny:\n  cli: [\"git push *\"]\n---\n");
    let mut layers = s.layers("local");
    layers.push(Layer {
        label: "user".into(),
        prefix: String::new(),
        rules: &user.rules,
        site: &user,
    });
    let r = intersect(
        &band(Category::Net, &["b.test"]),
        RunKind::default(),
        "local",
        &layers,
    )
    .expect_err("the user's wider ceiling does not widen the site's");
    assert_eq!(r.layer, "site");
    let mut b = band(Category::Net, &["a.test"]);
    b.allow.cli = strings(&["git *"]);
    let i = intersect(&b, RunKind::default(), "local", &layers).expect("inside both");
    assert_eq!(i.policy.deny.cli, strings(&["git push *"]));
}

/// The ceiling of `rules` as an allow list (a category without one allows everything: `**`,
/// `*`, every command the probes try).
fn ceiling_of(rules: &SiteRules) -> Policy {
    let mut ceiling = Policy::default();
    for cat in Category::ALL {
        *ceiling.allow.get_mut(cat) = match rules.allow.get(cat) {
            Some(c) => c.clone(),
            None => match cat {
                Category::Cli => strings(&["curl *", "jq *", "git *", "ls *"]),
                Category::Net => strings(&["*"]),
                _ => strings(&["**"]),
            },
        };
    }
    ceiling
}

/// A layer's rules; a category has a ceiling once in `ceiling_odds`.
fn random_site_rules(g: &mut Gen, ceiling_odds: usize) -> SiteRules {
    let (site_allow, site_deny) = random_rules(g);
    let mut rules = SiteRules {
        deny: site_deny,
        ..SiteRules::default()
    };
    for cat in Category::ALL {
        if g.below(ceiling_odds) == 0 {
            *rules.allow.get_mut(cat) = Some(site_allow.get(cat).clone());
        }
    }
    rules
}

#[test]
fn property_band_site_user_and_session_never_allow_what_any_of_them_refuses() {
    let mut g = Gen(0x2545_F491_4F6C_DD1D);
    let (mut ran, mut allowed_somewhere) = (0, 0);
    for _ in 0..4000 {
        let (allow, deny) = random_rules(&mut g);
        let band = Policy {
            allow,
            deny,
            ..Policy::default()
        };
        let mut layers = Vec::new();
        for (name, odds) in [("site", 2), ("user", 5), ("session", 5)] {
            let mut s = SitePolicy::open(format!("/gen/{name}.md"));
            s.rules = random_site_rules(&mut g, odds);
            // A narrower layer often says only a ceiling or only a deny.
            if name != "site" && g.below(2) == 0 {
                s.rules.deny = RuleSet::default();
            }
            layers.push(s);
        }
        let narrowing = vec![
            ("user".to_string(), layers[1].clone()),
            ("session".to_string(), layers[2].clone()),
        ];
        let Ok(i) = apply_narrowed(&band, RunKind::default(), &layers[0], "local", &narrowing)
        else {
            continue;
        };
        ran += 1;
        let effective = decisions(&i.policy);
        let by_band = decisions(&band);
        let refusals: Vec<(Vec<Decision>, Vec<Decision>)> = layers
            .iter()
            .map(|l| {
                (
                    decisions(&Policy {
                        deny: l.rules.deny.clone(),
                        ..Policy::default()
                    }),
                    decisions(&ceiling_of(&l.rules)),
                )
            })
            .collect();
        for (k, d) in effective.iter().enumerate() {
            if !d.is_allowed() {
                continue;
            }
            allowed_somewhere += 1;
            assert!(by_band[k].is_allowed(), "probe {k}: band {band:?}");
            for (n, (deny, ceiling)) in refusals.iter().enumerate() {
                assert!(
                    !matches!(deny[k], Decision::Deny { .. }),
                    "probe {k}: layer {n}'s deny ignored: band {band:?} layer {:?}",
                    layers[n].rules
                );
                assert!(
                    ceiling[k].is_allowed(),
                    "probe {k}: above layer {n}'s ceiling: band {band:?} layer {:?}",
                    layers[n].rules
                );
            }
        }
    }
    assert!(ran > 100, "only {ran} generated bands ran");
    assert!(
        allowed_somewhere > 100,
        "only {allowed_somewhere} probes allowed"
    );
}

#[test]
fn a_narrowing_file_cannot_speak_of_trust() {
    let f = Path::new("/home/u/.config/band/site.md");
    let e = parse_narrowing(
        f,
        "---\ndeny:\n  cli: [\"curl *\"]\nunsigned: verified\ntiers:\n  verified: {}\n---\n",
    )
    .expect_err("unsigned is the site's");
    assert_eq!(
        (e.line, e.message.as_str()),
        (
            4,
            "`unsigned` is the site policy's to set, not a narrowing's"
        )
    );
    let ok = parse_narrowing(f, "---\ndeny:\n  cli: [\"curl *\"]\n---\n").expect("a deny narrows");
    assert_eq!(ok.rules.deny.cli, strings(&["curl *"]));
    let huge = format!(
        "---\ndeny:\n  cli: [\"{}\"]\n---\n",
        "x".repeat(MAX_SITE_BYTES as usize)
    );
    assert!(parse_narrowing(f, &huge).is_err());
}

#[test]
fn a_refusal_by_a_narrowing_names_its_layer_and_file() {
    let s = SitePolicy::open("/etc/band/site.md");
    let session = parse_narrowing(
        Path::new("/agent/session.md"),
        "---\ndeny:\n  net: [\"*.pastebin.com\"]\n---\n",
    )
    .expect("parse");
    let r = apply_narrowed(
        &band(Category::Net, &["x.pastebin.com"]),
        RunKind::default(),
        &s,
        "local",
        &[("session".into(), session)],
    )
    .expect_err("refused");
    assert_eq!(
        r.message,
        "the band's allow.net `x.pastebin.com` is refused by the session policy's deny.net `*.pastebin.com` (/agent/session.md:3)"
    );
    assert_eq!(r.layer, "session");
}
