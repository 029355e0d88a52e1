//! Composition: one script's effective [`Policy`] from its band, the bands it `extends`
//! (ancestors, root-first) and the bands it `includes`.
//!
//! Unlike upstream (where `extends` unioned the parents' allows, §1.6), composition never widens:
//!
//! - **extends narrows.** For each category, a band that declares no `allow` items inherits its
//!   nearest ancestor's effective allow; otherwise every item it declares (allow or insist) must be
//!   covered by each ancestor's effective allow ∪ insist, or it is dropped
//!   ([`ConflictKind::CeilingExceeded`] / [`ConflictKind::InsistNotAllowed`]). Note that an
//!   ancestor that allows nothing in a category (for example a deny-only base band) leaves its
//!   descendants nothing to allow there: such bases are meant to be included, not extended.
//! - **includes never widen.** An included band's allow and insist items are kept only if the
//!   ceiling (the extends chain's effective allow ∪ insist) covers them.
//! - `deny` is the union of every band; an insist item that a deny covers is dropped
//!   ([`ConflictKind::DenyInsist`]).
//! - limits narrow field by field; `secrets` are the band's own, else the nearest ancestor's;
//!   `required_secrets` are the union.
//! - a band's `requires_egress` item that the effective `deny.net` covers is reported
//!   ([`ConflictKind::RequiresUnsatisfied`]).
//!
//! "Covered" is decided per category by the matchers' conservative subsumption checks
//! ([`CliPattern::covers`], [`NetPattern::covers`], [`FsPattern::covers`]): an exact match, or the
//! outer pattern provably matching everything the item matches. When unsure, an item is not
//! covered. Every list keeps declaration order (own band first, then ancestors root-first, then
//! includes) and is deduplicated.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use super::cli::CliPattern;
use super::fs::FsPattern;
use super::net::NetPattern;
use super::{Category, Limits, Policy, RuleSet};

/// One band file's own declarations, before composition.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BandPolicy {
    pub name: String,
    pub source: PathBuf,
    pub allow: RuleSet,
    pub deny: RuleSet,
    pub insist: RuleSet,
    pub limits: Limits,
    pub secrets: Vec<String>,
    pub required_secrets: Vec<String>,
    /// The hosts of the bound ones among `secrets` (`{name, hosts}` entries).
    pub secret_hosts: BTreeMap<String, Vec<String>>,
    pub requires_egress: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConflictKind {
    /// An insisted item is also denied; it is dropped from the effective insist.
    DenyInsist,
    /// An insisted item is not within the ceiling (of an ancestor, or of the including band).
    InsistNotAllowed,
    /// An allow item is not within the ceiling; it is dropped.
    CeilingExceeded,
    /// A band's `requires_egress` item is denied by the effective `deny.net`.
    RequiresUnsatisfied,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Conflict {
    pub kind: ConflictKind,
    pub category: Category,
    pub item: String,
    /// The band (by name) the offending item comes from.
    pub band: String,
    pub source: PathBuf,
    pub message: String,
}

/// A pattern parsed for its category (`None` if it does not parse: then only exact string
/// equality relates it to anything).
enum Parsed {
    Cli(CliPattern),
    Net(NetPattern),
    Fs(FsPattern),
}

fn parse(cat: Category, text: &str) -> Option<Parsed> {
    match cat {
        Category::Cli => CliPattern::parse(text).ok().map(Parsed::Cli),
        Category::Net => NetPattern::parse(text).ok().map(Parsed::Net),
        Category::Read | Category::Write => FsPattern::parse(text).ok().map(Parsed::Fs),
    }
}

/// Whether `outer` covers `inner`; `as_deny` applies deny semantics to a cli `outer`.
fn covers(
    outer: &(String, Option<Parsed>),
    inner: &(String, Option<Parsed>),
    as_deny: bool,
) -> bool {
    if outer.0 == inner.0 {
        return true;
    }
    match (&outer.1, &inner.1) {
        (Some(Parsed::Cli(a)), Some(Parsed::Cli(b))) => {
            if as_deny {
                a.covers_as_deny(b)
            } else {
                a.covers(b)
            }
        }
        (Some(Parsed::Net(a)), Some(Parsed::Net(b))) => a.covers(b),
        (Some(Parsed::Fs(a)), Some(Parsed::Fs(b))) => a.covers(b),
        _ => false,
    }
}

/// A list of patterns of one category, parsed once.
struct Rules {
    cat: Category,
    items: Vec<(String, Option<Parsed>)>,
}

impl Rules {
    fn new<'a>(cat: Category, texts: impl IntoIterator<Item = &'a String>) -> Rules {
        Rules {
            cat,
            items: texts
                .into_iter()
                .map(|t| (t.clone(), parse(cat, t)))
                .collect(),
        }
    }

    fn subject(&self, item: &str) -> (String, Option<Parsed>) {
        (item.to_string(), parse(self.cat, item))
    }

    /// Some item of the list covers `item` (allow semantics).
    fn covers(&self, item: &str) -> bool {
        let subject = self.subject(item);
        self.items.iter().any(|o| covers(o, &subject, false))
    }

    /// The first item of the (deny) list that covers `item`.
    fn denying_rule(&self, item: &str) -> Option<&str> {
        let subject = self.subject(item);
        self.items
            .iter()
            .find(|o| covers(o, &subject, true))
            .map(|o| o.0.as_str())
    }
}

fn push_unique(list: &mut Vec<String>, item: &str) {
    if !list.iter().any(|x| x == item) {
        list.push(item.to_string());
    }
}

fn conflict(
    kind: ConflictKind,
    category: Category,
    item: &str,
    band: &BandPolicy,
    message: String,
) -> Conflict {
    Conflict {
        kind,
        category,
        item: item.to_string(),
        band: band.name.clone(),
        source: band.source.clone(),
        message,
    }
}

/// The effective allow/insist of one band of the extends chain.
struct Level {
    allow: Vec<String>,
    insist: Vec<String>,
    /// `allow ∪ insist`, parsed: the ceiling for the band's descendants.
    ceiling: Rules,
}

/// Compose `own` with the bands it extends (`ancestors`, root-first) and includes.
/// Returns the effective policy and every conflict found, in a stable order.
pub fn compose(
    own: &BandPolicy,
    ancestors: &[BandPolicy],
    includes: &[BandPolicy],
) -> (Policy, Vec<Conflict>) {
    let mut c = Composer::new(own, ancestors, includes);
    let mut policy = Policy::default();
    for cat in Category::ALL {
        let Some(top) = c.top_level(cat) else {
            continue;
        };
        let deny = c.deny(cat);
        let allow = c.allow(cat, &top);
        let insist = c.insist(cat, &top, &Rules::new(cat, &deny));
        *policy.allow.get_mut(cat) = allow;
        *policy.deny.get_mut(cat) = deny;
        *policy.insist.get_mut(cat) = insist;
    }
    c.unsatisfied_egress(&policy.deny.net);
    policy.limits = c.limits();
    (policy.secrets, policy.secret_hosts) = c.secrets();
    policy.required_secrets = c.required_secrets();
    (policy, c.conflicts)
}

/// The bands of one composition, and the conflicts found so far (in the order found).
struct Composer<'a> {
    own: &'a BandPolicy,
    ancestors: &'a [BandPolicy],
    includes: &'a [BandPolicy],
    /// The extends chain: the ancestors root-first, then `own`.
    chain: Vec<&'a BandPolicy>,
    /// Every band, in the output order of unions: own first, then the ancestors (root-first),
    /// then the includes.
    all: Vec<&'a BandPolicy>,
    conflicts: Vec<Conflict>,
}

/// The steps of [`compose`]: per category the chain's levels, the deny, the allow and the
/// insist; then the egress the deny refuses, the limits and the secrets.
impl<'a> Composer<'a> {
    fn new(
        own: &'a BandPolicy,
        ancestors: &'a [BandPolicy],
        includes: &'a [BandPolicy],
    ) -> Composer<'a> {
        Composer {
            own,
            ancestors,
            includes,
            chain: ancestors.iter().chain(std::iter::once(own)).collect(),
            all: std::iter::once(own)
                .chain(ancestors)
                .chain(includes)
                .collect(),
            conflicts: Vec::new(),
        }
    }

    /// 1. The extends chain, root first, each band inheriting or narrowing the levels above it:
    ///    the own band's level.
    fn top_level(&mut self, cat: Category) -> Option<Level> {
        let mut levels: Vec<Level> = Vec::with_capacity(self.chain.len());
        for i in 0..self.chain.len() {
            let level = self.level(cat, self.chain[i], &levels);
            levels.push(level);
        }
        levels.pop()
    }

    /// One band's level under the levels `above` it: its allow (its nearest ancestor's when it
    /// declares none) and its insist (added to its nearest ancestor's), each item within every
    /// ceiling above.
    fn level(&mut self, cat: Category, band: &BandPolicy, above: &[Level]) -> Level {
        let declared = band.allow.get(cat);
        let allow = if declared.is_empty() {
            above.last().map(|l| l.allow.clone()).unwrap_or_default()
        } else {
            let kept = Vec::new();
            self.within_chain(
                cat,
                band,
                declared,
                above,
                ConflictKind::CeilingExceeded,
                kept,
            )
        };
        let inherited = above.last().map(|l| l.insist.clone()).unwrap_or_default();
        let insist = self.within_chain(
            cat,
            band,
            band.insist.get(cat),
            above,
            ConflictKind::InsistNotAllowed,
            inherited,
        );
        let ceiling = Rules::new(cat, allow.iter().chain(&insist));
        Level {
            allow,
            insist,
            ceiling,
        }
    }

    /// `items` of `band` added to `kept` when every ceiling `above` covers them; the others are
    /// conflicts of `kind` (allow items: [`ConflictKind::CeilingExceeded`], insist items:
    /// [`ConflictKind::InsistNotAllowed`]) naming the nearest ancestor they exceed.
    fn within_chain(
        &mut self,
        cat: Category,
        band: &BandPolicy,
        items: &[String],
        above: &[Level],
        kind: ConflictKind,
        mut kept: Vec<String>,
    ) -> Vec<String> {
        let verb = match kind {
            ConflictKind::InsistNotAllowed => "insisted",
            _ => "allowed",
        };
        for item in items {
            match above.iter().rposition(|l| !l.ceiling.covers(item)) {
                Some(k) => self.conflicts.push(conflict(
                    kind,
                    cat,
                    item,
                    band,
                    format!(
                        "\"{item}\" {verb} by band \"{}\" exceeds the ceiling of \"{}\", which it extends",
                        band.name, self.chain[k].name
                    ),
                )),
                None => push_unique(&mut kept, item),
            }
        }
        kept
    }

    /// 2. The deny: the union of every band's.
    fn deny(&self, cat: Category) -> Vec<String> {
        let mut deny = Vec::new();
        for band in &self.all {
            for item in band.deny.get(cat) {
                push_unique(&mut deny, item);
            }
        }
        deny
    }

    /// 3. The allow: the chain's, and the includes' items within its ceiling (the others are
    ///    dropped, as conflicts).
    fn allow(&mut self, cat: Category, top: &Level) -> Vec<String> {
        let mut allow = top.allow.clone();
        for band in self.includes {
            for item in band.allow.get(cat) {
                if top.ceiling.covers(item) {
                    push_unique(&mut allow, item);
                } else {
                    self.conflicts.push(conflict(
                        ConflictKind::CeilingExceeded,
                        cat,
                        item,
                        band,
                        format!(
                            "\"{item}\" requested by included band \"{}\" exceeds the ceiling",
                            band.name
                        ),
                    ));
                }
            }
        }
        allow
    }

    /// 4. The insist: the candidates ([`Self::insist_candidates`]) minus anything `deny` covers.
    fn insist(&mut self, cat: Category, top: &Level, deny: &Rules) -> Vec<String> {
        let mut insist = Vec::new();
        for (band, item) in self.insist_candidates(cat, top) {
            if let Some(rule) = deny.denying_rule(item) {
                self.conflicts.push(conflict(
                    ConflictKind::DenyInsist,
                    cat,
                    item,
                    band,
                    format!("\"{item}\" is insisted but also denied by \"{rule}\""),
                ));
            } else {
                push_unique(&mut insist, item);
            }
        }
        insist
    }

    /// The insist items that may stand, with their bands: the chain's accepted items, and the
    /// includes' items within the ceiling (the others are conflicts).
    fn insist_candidates(
        &mut self,
        cat: Category,
        top: &Level,
    ) -> Vec<(&'a BandPolicy, &'a String)> {
        let mut candidates = Vec::new();
        for band in std::iter::once(self.own).chain(self.ancestors) {
            for item in band.insist.get(cat) {
                if top.insist.contains(item) {
                    candidates.push((band, item));
                }
            }
        }
        for band in self.includes {
            for item in band.insist.get(cat) {
                if top.ceiling.covers(item) {
                    candidates.push((band, item));
                } else {
                    self.conflicts.push(conflict(
                        ConflictKind::InsistNotAllowed,
                        cat,
                        item,
                        band,
                        format!("\"{item}\" insisted by included band \"{}\" is not allowed by the ceiling", band.name),
                    ));
                }
            }
        }
        candidates
    }

    /// 5. Egress a band requires but the effective `deny.net` denies (conflicts only).
    fn unsatisfied_egress(&mut self, deny_net: &[String]) {
        let deny_net = Rules::new(Category::Net, deny_net);
        for band in &self.all {
            for item in &band.requires_egress {
                if let Some(rule) = deny_net.denying_rule(item) {
                    self.conflicts.push(conflict(
                        ConflictKind::RequiresUnsatisfied,
                        Category::Net,
                        item,
                        band,
                        format!(
                            "\"{item}\" required by band \"{}\" is denied by \"{rule}\"",
                            band.name
                        ),
                    ));
                }
            }
        }
    }

    /// 6. The limits: every band's, narrowed field by field.
    fn limits(&self) -> Limits {
        self.all
            .iter()
            .fold(Limits::default(), |acc, b| acc.narrow(&b.limits))
    }

    /// The secrets and the hosts of the bound ones: the own band's, else the nearest
    /// ancestor's that declares any (a secret and its hosts come from one band).
    fn secrets(&self) -> (Vec<String>, BTreeMap<String, Vec<String>>) {
        std::iter::once(self.own)
            .chain(self.ancestors.iter().rev())
            .find(|b| !b.secrets.is_empty())
            .map(|b| {
                let mut out = Vec::new();
                for x in &b.secrets {
                    push_unique(&mut out, x);
                }
                let hosts = b
                    .secret_hosts
                    .iter()
                    .filter(|(name, _)| out.contains(name))
                    .map(|(n, h)| (n.clone(), h.clone()))
                    .collect();
                (out, hosts)
            })
            .unwrap_or_default()
    }

    /// The required secrets: the union of every band's.
    fn required_secrets(&self) -> Vec<String> {
        let mut required = Vec::new();
        for band in &self.all {
            for s in &band.required_secrets {
                push_unique(&mut required, s);
            }
        }
        required
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{CompiledPolicy, Decision};

    fn band(name: &str) -> BandPolicy {
        BandPolicy {
            name: name.into(),
            source: PathBuf::from(format!("bands/{name}.band.md")),
            ..Default::default()
        }
    }

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn kinds(c: &[Conflict]) -> Vec<(ConflictKind, Category, &str, &str)> {
        c.iter()
            .map(|c| (c.kind, c.category, c.item.as_str(), c.band.as_str()))
            .collect()
    }

    #[test]
    fn lone_band_is_its_own_policy() {
        let mut b = band("solo");
        b.allow.net = v(&["api.x.test", "api.x.test"]);
        b.allow.cli = v(&["jq *"]);
        b.deny.read = v(&["**/.env*"]);
        b.insist.write = v(&["out/**"]);
        b.secrets = v(&["TOKEN"]);
        b.required_secrets = v(&["TOKEN"]);
        b.limits.max_runtime_ms = Some(1000);
        let (p, c) = compose(&b, &[], &[]);
        assert!(c.is_empty(), "{c:?}");
        assert_eq!(p.allow.net, v(&["api.x.test"]), "deduplicated");
        assert_eq!(p.allow.cli, v(&["jq *"]));
        assert_eq!(p.deny.read, v(&["**/.env*"]));
        assert_eq!(p.insist.write, v(&["out/**"]));
        assert_eq!(p.secrets, v(&["TOKEN"]));
        assert_eq!(p.required_secrets, v(&["TOKEN"]));
        assert_eq!(p.limits.max_runtime_ms, Some(1000));
    }

    #[test]
    fn extends_narrows_net() {
        let mut parent = band("github");
        parent.allow.net = v(&["*.github.com", "github.com"]);
        let mut own = band("issues");
        own.allow.net = v(&[
            "api.github.com",
            "evil.test",
            "a.b.github.com:443",
            "*.api.github.com",
        ]);
        let (p, c) = compose(&own, &[parent], &[]);
        assert_eq!(
            p.allow.net,
            v(&["api.github.com", "a.b.github.com:443", "*.api.github.com"])
        );
        assert_eq!(
            kinds(&c),
            [(
                ConflictKind::CeilingExceeded,
                Category::Net,
                "evil.test",
                "issues"
            )]
        );
        assert_eq!(c[0].source, PathBuf::from("bands/issues.band.md"));
        assert_eq!(
            c[0].message,
            r#""evil.test" allowed by band "issues" exceeds the ceiling of "github", which it extends"#
        );
    }

    #[test]
    fn extends_narrows_port_and_cidr() {
        let mut parent = band("p");
        parent.allow.net = v(&["api.x.test:443", "10.0.0.0/8"]);
        let mut own = band("o");
        own.allow.net = v(&[
            "api.x.test",
            "api.x.test:443",
            "10.1.0.0/16",
            "10.1.2.3",
            "11.0.0.1",
        ]);
        let (p, c) = compose(&own, &[parent], &[]);
        assert_eq!(
            p.allow.net,
            v(&["api.x.test:443", "10.1.0.0/16", "10.1.2.3"])
        );
        let items: Vec<&str> = c.iter().map(|c| c.item.as_str()).collect();
        assert_eq!(
            items,
            ["api.x.test", "11.0.0.1"],
            "a port-less item is wider than a port-bound ceiling"
        );
    }

    #[test]
    fn extends_narrows_cli_and_fs() {
        let mut parent = band("p");
        parent.allow.cli = v(&["gh *", "git status"]);
        parent.allow.read = v(&["data/**", "/etc/ssl/**"]);
        parent.allow.write = v(&["./out"]);
        let mut own = band("o");
        own.allow.cli = v(&[
            "gh issue list *",
            "gh",
            "git status",
            "git push",
            "gh {a,b}",
        ]);
        own.allow.read = v(&[
            "data/in/**/*.csv",
            "data/x.json",
            "*.csv",
            "/etc/ssl/certs/ca.pem",
            "/etc/passwd",
        ]);
        own.allow.write = v(&["out/reports/**", "./out", "out", "tmp/**"]);
        let (p, c) = compose(&own, &[parent], &[]);
        assert_eq!(
            p.allow.cli,
            v(&["gh issue list *", "gh", "git status", "gh {a,b}"])
        );
        assert_eq!(
            p.allow.read,
            v(&["data/in/**/*.csv", "data/x.json", "/etc/ssl/certs/ca.pem"])
        );
        assert_eq!(p.allow.write, v(&["out/reports/**", "./out"]));
        let dropped: Vec<(Category, &str)> =
            c.iter().map(|c| (c.category, c.item.as_str())).collect();
        assert_eq!(
            dropped,
            [
                (Category::Read, "*.csv"),
                (Category::Read, "/etc/passwd"),
                (Category::Write, "out"),
                (Category::Write, "tmp/**"),
                (Category::Cli, "git push"),
            ]
        );
        assert!(c.iter().all(|c| c.kind == ConflictKind::CeilingExceeded));
    }

    #[test]
    fn omitted_category_is_inherited() {
        let mut parent = band("p");
        parent.allow.cli = v(&["gh *"]);
        parent.allow.net = v(&["*.github.com"]);
        let mut own = band("o");
        own.allow.net = v(&["api.github.com"]);
        let (p, c) = compose(&own, &[parent], &[]);
        assert!(c.is_empty());
        assert_eq!(p.allow.cli, v(&["gh *"]), "cli omitted: inherited");
        assert_eq!(
            p.allow.net,
            v(&["api.github.com"]),
            "net declared: narrowed"
        );
        assert!(p.allow.read.is_empty());
    }

    #[test]
    fn every_ancestor_is_a_ceiling() {
        let mut root = band("root");
        root.allow.net = v(&["*.x.test"]);
        let mut mid = band("mid");
        mid.allow.net = v(&["*.a.x.test", "other.test"]);
        let mut own = band("own");
        own.allow.net = v(&["b.a.x.test", "other.test", "c.x.test"]);
        let (p, c) = compose(&own, &[root, mid], &[]);
        assert_eq!(p.allow.net, v(&["b.a.x.test"]));
        assert_eq!(
            kinds(&c),
            [
                (
                    ConflictKind::CeilingExceeded,
                    Category::Net,
                    "other.test",
                    "mid"
                ),
                (
                    ConflictKind::CeilingExceeded,
                    Category::Net,
                    "other.test",
                    "own"
                ),
                (
                    ConflictKind::CeilingExceeded,
                    Category::Net,
                    "c.x.test",
                    "own"
                ),
            ]
        );
        assert!(
            c[1].message.contains(r#"the ceiling of "mid""#),
            "{}",
            c[1].message
        );
        assert!(c[1].message.contains("\"other.test\""));
        // An omitted category inherits through several levels.
        let mut root = band("root");
        root.allow.cli = v(&["jq *"]);
        let (p, _) = compose(&band("own"), &[root, band("mid")], &[]);
        assert_eq!(p.allow.cli, v(&["jq *"]));
    }

    #[test]
    fn empty_ancestor_is_an_empty_ceiling() {
        let mut base = band("base");
        base.deny.net = v(&["*.internal.test"]);
        let mut own = band("own");
        own.allow.net = v(&["api.x.test"]);
        let (p, c) = compose(&own, &[base], &[]);
        assert!(p.allow.net.is_empty());
        assert_eq!(
            kinds(&c),
            [(
                ConflictKind::CeilingExceeded,
                Category::Net,
                "api.x.test",
                "own"
            )]
        );
        assert_eq!(p.deny.net, v(&["*.internal.test"]));
    }

    #[test]
    fn ancestor_insist_is_part_of_the_ceiling() {
        let mut parent = band("p");
        parent.insist.write = v(&["out/**"]);
        let mut own = band("o");
        own.allow.write = v(&["out/a/**"]);
        let (p, c) = compose(&own, &[parent], &[]);
        assert!(c.is_empty(), "{c:?}");
        assert_eq!(p.allow.write, v(&["out/a/**"]));
        assert_eq!(p.insist.write, v(&["out/**"]));
    }

    #[test]
    fn insist_cannot_widen_through_extends() {
        let mut parent = band("p");
        parent.allow.net = v(&["api.x.test"]);
        let mut own = band("o");
        own.insist.net = v(&["evil.test", "api.x.test"]);
        let (p, c) = compose(&own, &[parent], &[]);
        assert_eq!(p.insist.net, v(&["api.x.test"]));
        assert_eq!(
            kinds(&c),
            [(
                ConflictKind::InsistNotAllowed,
                Category::Net,
                "evil.test",
                "o"
            )]
        );
        let compiled = CompiledPolicy::compile(&p).unwrap();
        assert_eq!(
            compiled.net.check_host("evil.test", None),
            Decision::Default
        );
    }

    #[test]
    fn includes_never_widen() {
        let mut own = band("skill");
        own.allow.net = v(&["api.github.com", "*.githubusercontent.com"]);
        own.allow.read = v(&["data/**"]);
        let mut inc = band("gh");
        inc.allow.net = v(&[
            "api.github.com",
            "uploads.github.com",
            "raw.githubusercontent.com",
        ]);
        inc.allow.read = v(&["data/in/*.csv", "/etc/gh/**"]);
        inc.allow.cli = v(&["gh *"]);
        let (p, c) = compose(&own, &[], &[inc]);
        assert_eq!(
            p.allow.net,
            v(&[
                "api.github.com",
                "*.githubusercontent.com",
                "raw.githubusercontent.com"
            ])
        );
        assert_eq!(p.allow.read, v(&["data/**", "data/in/*.csv"]));
        assert!(p.allow.cli.is_empty());
        assert_eq!(
            kinds(&c),
            [
                (
                    ConflictKind::CeilingExceeded,
                    Category::Read,
                    "/etc/gh/**",
                    "gh"
                ),
                (ConflictKind::CeilingExceeded, Category::Cli, "gh *", "gh"),
                (
                    ConflictKind::CeilingExceeded,
                    Category::Net,
                    "uploads.github.com",
                    "gh"
                ),
            ]
        );
        let net = c.iter().find(|c| c.category == Category::Net).unwrap();
        assert_eq!(
            net.message,
            r#""uploads.github.com" requested by included band "gh" exceeds the ceiling"#
        );
        assert_eq!(net.source, PathBuf::from("bands/gh.band.md"));
    }

    #[test]
    fn include_ceiling_is_the_narrowed_chain() {
        let mut parent = band("p");
        parent.allow.net = v(&["*.github.com"]);
        let mut own = band("o");
        own.allow.net = v(&["api.github.com"]);
        let mut inc = band("i");
        inc.allow.net = v(&["uploads.github.com"]);
        let (p, c) = compose(&own, &[parent], &[inc]);
        assert_eq!(p.allow.net, v(&["api.github.com"]));
        assert_eq!(
            kinds(&c),
            [(
                ConflictKind::CeilingExceeded,
                Category::Net,
                "uploads.github.com",
                "i"
            )]
        );
    }

    #[test]
    fn deny_is_the_union() {
        let mut own = band("o");
        own.deny.net = v(&["a.test", "b.test"]);
        let mut parent = band("p");
        parent.deny.net = v(&["b.test", "c.test"]);
        let mut inc = band("i");
        inc.deny.net = v(&["d.test", "a.test"]);
        inc.deny.read = v(&["*.pem"]);
        let (p, c) = compose(&own, &[parent], &[inc]);
        assert!(c.is_empty());
        assert_eq!(p.deny.net, v(&["a.test", "b.test", "c.test", "d.test"]));
        assert_eq!(p.deny.read, v(&["*.pem"]));
    }

    #[test]
    fn deny_insist() {
        let mut own = band("o");
        own.allow.net = v(&["*.x.test"]);
        own.allow.cli = v(&["rm *"]);
        own.allow.read = v(&["**"]);
        own.insist.net = v(&["api.x.test", "ok.x.test"]);
        own.insist.cli = v(&["rm -r -f build"]);
        own.insist.read = v(&["config/.env", "README.md"]);
        let mut parent = band("p");
        parent.allow = own.allow.clone();
        parent.deny.net = v(&["api.x.test"]);
        parent.deny.cli = v(&["rm -rf *"]);
        parent.deny.read = v(&["**/.env*"]);
        let (p, c) = compose(&own, &[parent], &[]);
        assert_eq!(p.insist.net, v(&["ok.x.test"]));
        assert!(p.insist.cli.is_empty());
        assert_eq!(p.insist.read, v(&["README.md"]));
        assert_eq!(
            kinds(&c),
            [
                (ConflictKind::DenyInsist, Category::Read, "config/.env", "o"),
                (
                    ConflictKind::DenyInsist,
                    Category::Cli,
                    "rm -r -f build",
                    "o"
                ),
                (ConflictKind::DenyInsist, Category::Net, "api.x.test", "o"),
            ]
        );
        assert_eq!(
            c[0].message,
            r#""config/.env" is insisted but also denied by "**/.env*""#
        );
        assert_eq!(
            c[1].message,
            r#""rm -r -f build" is insisted but also denied by "rm -rf *""#
        );
        assert_eq!(
            c[2].message,
            r#""api.x.test" is insisted but also denied by "api.x.test""#
        );
    }

    #[test]
    fn deny_insist_wildcard_and_exact() {
        let mut own = band("o");
        own.allow.net = v(&["*"]);
        own.insist.net = v(&["a.corp.test", "*.corp.test", "*.x.test"]);
        own.deny.net = v(&["*.corp.test"]);
        let (p, c) = compose(&own, &[], &[]);
        assert_eq!(p.insist.net, v(&["*.x.test"]));
        let items: Vec<&str> = c.iter().map(|c| c.item.as_str()).collect();
        assert_eq!(items, ["a.corp.test", "*.corp.test"]);
        assert!(c.iter().all(|c| c.kind == ConflictKind::DenyInsist));
    }

    #[test]
    fn insist_from_includes() {
        let mut own = band("o");
        own.allow.write = v(&["out/**"]);
        own.deny.write = v(&["out/secret/**"]);
        let mut inc = band("i");
        inc.insist.write = v(&["out/report.json", "logs/**", "out/secret/key"]);
        let (p, c) = compose(&own, &[], &[inc]);
        assert_eq!(p.insist.write, v(&["out/report.json"]));
        assert_eq!(
            kinds(&c),
            [
                (
                    ConflictKind::InsistNotAllowed,
                    Category::Write,
                    "logs/**",
                    "i"
                ),
                (
                    ConflictKind::DenyInsist,
                    Category::Write,
                    "out/secret/key",
                    "i"
                ),
            ]
        );
        assert_eq!(
            c[0].message,
            r#""logs/**" insisted by included band "i" is not allowed by the ceiling"#
        );
    }

    #[test]
    fn requires_unsatisfied() {
        let mut own = band("o");
        own.allow.net = v(&["*"]);
        own.deny.net = v(&["*.slack.com"]);
        let mut inc = band("slack");
        inc.requires_egress = v(&["api.slack.com", "example.test", "*.files.slack.com"]);
        let (_, c) = compose(&own, &[], &[inc]);
        assert_eq!(
            kinds(&c),
            [
                (
                    ConflictKind::RequiresUnsatisfied,
                    Category::Net,
                    "api.slack.com",
                    "slack"
                ),
                (
                    ConflictKind::RequiresUnsatisfied,
                    Category::Net,
                    "*.files.slack.com",
                    "slack"
                ),
            ]
        );
        assert_eq!(
            c[0].message,
            r#""api.slack.com" required by band "slack" is denied by "*.slack.com""#
        );
        // An included band's deny counts too.
        let mut inc2 = band("blocker");
        inc2.deny.net = v(&["example.test"]);
        let mut needs = band("needs");
        needs.requires_egress = v(&["example.test:443"]);
        let (_, c) = compose(&band("o"), &[], &[inc2, needs]);
        assert_eq!(
            kinds(&c),
            [(
                ConflictKind::RequiresUnsatisfied,
                Category::Net,
                "example.test:443",
                "needs"
            )]
        );
    }

    #[test]
    fn limits_narrow() {
        let mut own = band("o");
        own.limits.max_runtime_ms = Some(60_000);
        own.limits.max_memory_bytes = Some(2 << 30);
        let mut parent = band("p");
        parent.limits.max_runtime_ms = Some(30_000);
        parent.limits.max_cpus = Some(2.0);
        let mut inc = band("i");
        inc.limits.max_memory_bytes = Some(1 << 30);
        inc.limits.max_cpus = Some(4.0);
        inc.limits.max_cost_dollars = Some(0.5);
        let (p, _) = compose(&own, &[parent], &[inc]);
        assert_eq!(p.limits.max_runtime_ms, Some(30_000));
        assert_eq!(p.limits.max_memory_bytes, Some(1 << 30));
        assert_eq!(p.limits.max_cpus, Some(2.0));
        assert_eq!(p.limits.max_cost_dollars, Some(0.5));
        assert_eq!(p.limits.max_pids, None);
    }

    #[test]
    fn secrets() {
        let mut root = band("root");
        root.secrets = v(&["A"]);
        root.required_secrets = v(&["A"]);
        let mut mid = band("mid");
        mid.secrets = v(&["B", "B"]);
        mid.required_secrets = v(&["B"]);
        let mut inc = band("i");
        inc.secrets = v(&["C"]);
        inc.required_secrets = v(&["C", "A"]);
        let mut own = band("own");
        own.required_secrets = v(&["D"]);
        let (p, _) = compose(&own, &[root.clone(), mid.clone()], &[inc.clone()]);
        assert_eq!(p.secrets, v(&["B"]), "nearest ancestor's");
        assert_eq!(p.required_secrets, v(&["D", "A", "B", "C"]));
        own.secrets = v(&["OWN"]);
        let (p, _) = compose(&own, &[root, mid], &[inc]);
        assert_eq!(p.secrets, v(&["OWN"]));
    }

    #[test]
    fn unparseable_items_relate_only_by_equality() {
        let mut parent = band("p");
        parent.allow.net = v(&["https://x.test"]);
        let mut own = band("o");
        own.allow.net = v(&["https://x.test", "x.test"]);
        let (p, c) = compose(&own, &[parent], &[]);
        assert_eq!(p.allow.net, v(&["https://x.test"]));
        assert_eq!(
            kinds(&c),
            [(ConflictKind::CeilingExceeded, Category::Net, "x.test", "o")]
        );
    }

    #[test]
    fn composed_policy_compiles_and_decides() {
        let mut parent = band("p");
        parent.allow.cli = v(&["gh *", "jq *"]);
        parent.allow.net = v(&["*.github.com"]);
        parent.deny.cli = v(&["gh repo delete *"]);
        let mut own = band("o");
        own.allow.cli = v(&["gh issue list *", "gh repo delete *"]);
        own.allow.net = v(&["api.github.com:443"]);
        let (p, _) = compose(&own, &[parent], &[]);
        let c = CompiledPolicy::compile(&p).unwrap();
        let argv = |s: &str| s.split(' ').map(str::to_string).collect::<Vec<_>>();
        assert!(c.cli.check(&argv("gh issue list --repo a/b")).is_allowed());
        assert_eq!(
            c.cli.check(&argv("gh repo delete a/b")),
            Decision::Deny {
                rule: "gh repo delete *".into()
            }
        );
        assert_eq!(
            c.cli.check(&argv("jq .")),
            Decision::Default,
            "narrowed away"
        );
        assert!(c.net.check_host("api.github.com", Some(443)).is_allowed());
        assert_eq!(
            c.net.check_host("uploads.github.com", Some(443)),
            Decision::Default
        );
    }

    #[test]
    fn conflict_kind_serialises_kebab_case() {
        let k = serde_json::to_string(&ConflictKind::RequiresUnsatisfied).unwrap();
        assert_eq!(k, "\"requires-unsatisfied\"");
        assert_eq!(
            serde_json::to_string(&ConflictKind::DenyInsist).unwrap(),
            "\"deny-insist\""
        );
    }
}
