//! The site policy: what the machine's operator allows every band, whatever the band asks.
//!
//! One file per machine (`/etc/band/site.md`, or band-server's `site_policy` config key), in
//! band's own format: YAML frontmatter between two `---` lines. Its layers narrow a run and
//! never widen it:
//!
//! - `deny` (cli/net/read/write) applies to every band: a band rule it covers whole is refused,
//!   and every other band gets the deny rules added to its own (deny beats allow at run time);
//! - `allow` is a ceiling, per category, when present: every `allow` and `insist` rule of a band
//!   must fall inside it, or the request is refused;
//! - `insist` is required of every run: each item must be one the band allows (a site never adds
//!   a permission to a band), and is added to the band's insist;
//! - `limit` caps limits (a band's larger value is lowered, like band-server's own caps);
//! - `secrets`, `network`, `workspaceWrites`, `exec` (default `true`) say whether a band may have
//!   secrets, any network, any workspace write, or run an ad-hoc `band exec` command at all;
//! - `tiers:` gives the same per trust tier (plus `run: false`: this tier never runs), `unsigned:`
//!   the tier of a skill nobody signed (default `local`).
//!
//! The effective policy of a run is `band ∩ site ∩ tier` ([`intersect`]): every layer is checked
//! on its own, so adding a layer (a per-user file, a caller's narrowing) can only narrow.
//! "Covered" is the composition's conservative subsumption ([`super::compose`]): when unsure, a
//! band rule is not inside a ceiling (refused) and not wholly denied (kept, and the deny rules
//! still apply to each call).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use yaml_serde::Value as Yaml;

use super::cli::CliPattern;
use super::fs::FsPattern;
use super::net::NetPattern;
use super::{Category, Limits, Policy, RuleSet, validate_pattern};
use crate::manifest::locate::{Step, locate};
use crate::manifest::split_frontmatter;
use crate::units::{parse_bytes, parse_duration_ms};

/// Where band looks for the site policy when nothing else names one.
pub const DEFAULT_PATH: &str = "/etc/band/site.md";

/// The variable that names the site policy `band explain`, `lint` and `doctor` preview (the
/// client's copy of what band-server reads; band-server itself reads only its config's).
pub const ENV_VAR: &str = "BAND_SITE_POLICY";

/// The site policy file the client previews: `$BAND_SITE_POLICY`, else [`DEFAULT_PATH`].
pub fn local_path() -> PathBuf {
    match std::env::var_os(ENV_VAR) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from(DEFAULT_PATH),
    }
}

/// The variable naming the caller's narrowing for its session: a site policy file an agent host
/// (or anyone) sets for the `band run`, `band exec` or `band mcp` it starts. It can only narrow.
pub const NARROW_VAR: &str = "BAND_NARROW";

/// The user's own narrowing file: `$XDG_CONFIG_HOME/band/site.md`, else `$HOME/.config/band/site.md`.
pub fn user_path() -> Option<PathBuf> {
    let nonempty = |v: &str| {
        std::env::var_os(v)
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
    };
    nonempty("XDG_CONFIG_HOME")
        .or_else(|| nonempty("HOME").map(|h| h.join(".config")))
        .map(|c| c.join("band").join("site.md"))
}

/// Most narrower layers a request carries (the user's and the session's).
pub const MAX_NARROWING: usize = 2;

/// The tier of a skill nobody signed, when the site does not name one.
pub const DEFAULT_UNSIGNED_TIER: &str = "local";

/// Largest site policy file read, in bytes.
pub const MAX_SITE_BYTES: u64 = 1 << 20;

/// The allow ceiling of one layer: `None` for a category the layer does not bound.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Ceiling {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cli: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub net: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write: Option<Vec<String>>,
}

impl Ceiling {
    pub fn get(&self, cat: Category) -> Option<&Vec<String>> {
        match cat {
            Category::Cli => self.cli.as_ref(),
            Category::Net => self.net.as_ref(),
            Category::Read => self.read.as_ref(),
            Category::Write => self.write.as_ref(),
        }
    }

    fn get_mut(&mut self, cat: Category) -> &mut Option<Vec<String>> {
        match cat {
            Category::Cli => &mut self.cli,
            Category::Net => &mut self.net,
            Category::Read => &mut self.read,
            Category::Write => &mut self.write,
        }
    }

    pub fn is_empty(&self) -> bool {
        Category::ALL.iter().all(|c| self.get(*c).is_none())
    }
}

/// What a layer lets a band have at all (`true` unless the site says `false`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Switches {
    pub run: bool,
    pub secrets: bool,
    pub network: bool,
    pub workspace_writes: bool,
    pub exec: bool,
}

impl Default for Switches {
    fn default() -> Self {
        Switches {
            run: true,
            secrets: true,
            network: true,
            workspace_writes: true,
            exec: true,
        }
    }
}

impl Switches {
    const KEYS: [&'static str; 5] = ["run", "secrets", "network", "workspaceWrites", "exec"];

    fn get_mut(&mut self, key: &str) -> Option<&mut bool> {
        Some(match key {
            "run" => &mut self.run,
            "secrets" => &mut self.secrets,
            "network" => &mut self.network,
            "workspaceWrites" => &mut self.workspace_writes,
            "exec" => &mut self.exec,
            _ => return None,
        })
    }

    /// The switches set to `false`, by key.
    pub fn refused(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        for (key, on) in [
            ("run", self.run),
            ("secrets", self.secrets),
            ("network", self.network),
            ("workspaceWrites", self.workspace_writes),
            ("exec", self.exec),
        ] {
            if !on {
                out.push(key);
            }
        }
        out
    }
}

/// One layer's rules: the site's top level, or one tier.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SiteRules {
    pub allow: Ceiling,
    pub deny: RuleSet,
    pub insist: RuleSet,
    pub limits: Limits,
    pub switches: Switches,
}

impl SiteRules {
    /// Nothing is bounded, denied, required or switched off.
    pub fn is_open(&self) -> bool {
        *self == SiteRules::default()
    }
}

/// A signer the site trusts, and the tier its signatures give.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SiteKey {
    /// The principal (`alice@example.com`), as `ssh-keygen -Y` names it.
    pub signer: String,
    /// The public key, one OpenSSH line (`ssh-ed25519 AAAA…`).
    pub key: String,
    pub tier: String,
}

/// A parsed site policy file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SitePolicy {
    pub source: PathBuf,
    /// The site's name (`site:`), if it gives one.
    pub name: Option<String>,
    pub rules: SiteRules,
    pub tiers: BTreeMap<String, SiteRules>,
    /// The tier of a skill nobody signed.
    pub unsigned: String,
    pub keys: Vec<SiteKey>,
    #[serde(skip)]
    yaml: String,
    #[serde(skip)]
    first_line: usize,
}

/// A site policy file that cannot be used: where, what, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{line}:{col}: {message}", file.display())]
pub struct SiteError {
    pub file: PathBuf,
    pub line: usize,
    pub col: usize,
    pub message: String,
    pub hint: Option<String>,
}

/// One layer of the intersection, as [`intersect`] sees it.
#[derive(Debug, Clone)]
pub struct Layer<'a> {
    /// `site`, or `tier <name>`, or what a narrower layer calls itself.
    pub label: String,
    /// The key path of the layer's rules in its file (`""` or `tiers.community.`).
    pub prefix: String,
    pub rules: &'a SiteRules,
    pub site: &'a SitePolicy,
}

/// What the run is, beyond its policy.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunKind {
    /// An ad-hoc `band exec` command.
    pub exec: bool,
}

/// Why a request is refused: the band rule, the site rule (with its place) and the tier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    /// The band's rule (`allow.cli `curl *``), or what the band asks (`env.secrets`).
    pub band_rule: String,
    /// Where the band's rule sits in a band file (`allow.cli`, `env.secrets`), when it is one.
    pub band_key: Option<String>,
    /// The item of `band_key` that collided (`curl *`).
    pub band_item: Option<String>,
    /// The site's rule (`deny.cli `curl *``, `tiers.community.network: false`).
    pub site_rule: String,
    /// The site file and line of `site_rule`.
    pub at: String,
    /// The layer (`site`, `tier community`).
    pub layer: String,
    /// The tier of the run.
    pub tier: String,
    pub message: String,
    pub hint: String,
}

/// The policy a run gets, and the layers that made it.
#[derive(Debug, Clone, PartialEq)]
pub struct Intersection {
    pub policy: Policy,
    pub tier: String,
}

impl SitePolicy {
    /// A site that says nothing (no file): every layer open.
    pub fn open(source: impl Into<PathBuf>) -> SitePolicy {
        SitePolicy {
            source: source.into(),
            name: None,
            rules: SiteRules::default(),
            tiers: BTreeMap::new(),
            unsigned: DEFAULT_UNSIGNED_TIER.into(),
            keys: Vec::new(),
            yaml: String::new(),
            first_line: 2,
        }
    }

    /// A band as a narrower layer: its `allow` lists are ceilings (an empty list admits
    /// nothing), its `deny` and `insist` join, its limits cap. `text` is the band file's, so a
    /// refusal names its line (`allow.cli` in the band's frontmatter). band-sandboxd's pod
    /// band is such a layer over every skill a client sends it.
    pub fn of_band(source: impl Into<PathBuf>, text: &str, band: &Policy) -> SitePolicy {
        let mut site = SitePolicy::open(source);
        if let Ok((yaml, first_line, _)) = split_frontmatter(text) {
            site.yaml = yaml.to_string();
            site.first_line = first_line;
        }
        site.rules = SiteRules {
            allow: Ceiling {
                cli: Some(band.allow.cli.clone()),
                net: Some(band.allow.net.clone()),
                read: Some(band.allow.read.clone()),
                write: Some(band.allow.write.clone()),
            },
            deny: band.deny.clone(),
            insist: band.insist.clone(),
            limits: band.limits.clone(),
            switches: Switches::default(),
        };
        site
    }

    /// The rules of `tier` (open if the site does not define it).
    pub fn tier_rules(&self, tier: &str) -> Option<&SiteRules> {
        self.tiers.get(tier)
    }

    /// The layers a run of `tier` passes: the site's own, then the tier's.
    pub fn layers(&self, tier: &str) -> Vec<Layer<'_>> {
        let mut out = vec![Layer {
            label: "site".into(),
            prefix: String::new(),
            rules: &self.rules,
            site: self,
        }];
        if let Some(rules) = self.tiers.get(tier) {
            out.push(Layer {
                label: format!("tier {tier}"),
                prefix: format!("tiers.{tier}."),
                rules,
                site: self,
            });
        }
        out
    }

    /// `file:line` of a key path in the file (`tiers.community.deny.cli[2]`).
    pub fn at(&self, path: &str) -> String {
        let steps = key_steps(path);
        let loc = if self.yaml.is_empty() {
            crate::diag::Loc::FILE
        } else {
            locate(&self.yaml, self.first_line, &steps)
        };
        if loc.line == 0 {
            self.source.display().to_string()
        } else {
            format!("{}:{}", self.source.display(), loc.line)
        }
    }
}

impl SiteRules {
    /// One line per thing the layer says (`deny.cli: `curl *``, `network: off`), or none when
    /// it says nothing: what `band explain` and `band doctor` show of a layer.
    pub fn describe(&self) -> Vec<String> {
        let list = |items: &[String]| {
            items
                .iter()
                .map(|i| format!("`{i}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut out = Vec::new();
        for cat in Category::ALL {
            if let Some(ceiling) = self.allow.get(cat) {
                out.push(if ceiling.is_empty() {
                    format!("allow.{cat}: nothing (an empty ceiling)")
                } else {
                    format!("allow.{cat} (ceiling): {}", list(ceiling))
                });
            }
        }
        for cat in Category::ALL {
            if !self.deny.get(cat).is_empty() {
                out.push(format!("deny.{cat}: {}", list(self.deny.get(cat))));
            }
        }
        for cat in Category::ALL {
            if !self.insist.get(cat).is_empty() {
                out.push(format!("insist.{cat}: {}", list(self.insist.get(cat))));
            }
        }
        let caps = self.limits.shown();
        if !caps.is_empty() {
            out.push(format!("limit (caps): {}", caps.join(", ")));
        }
        let off = self.switches.refused();
        if !off.is_empty() {
            out.push(format!("switched off: {}", off.join(", ")));
        }
        out
    }
}

// The site summary is where policy is rendered for people (with `crate::units`, which the
// policy model itself does not name); `band explain` shows a band's limits with it too.
impl Limits {
    /// The limits set, as people read them (`runtime 10 s`, `memory 64 MiB`, …, `pids 16`,
    /// `cpus 2`), in this order; none for an unset one.
    pub fn shown(&self) -> Vec<String> {
        let mut parts = Vec::new();
        if let Some(v) = self.max_runtime_ms {
            parts.push(format!("runtime {}", crate::units::format_duration_ms(v)));
        }
        for (name, v) in [
            ("memory", self.max_memory_bytes),
            ("disk", self.max_disk_bytes),
            ("input", self.max_input_bytes),
            ("output", self.max_output_bytes),
            ("log", self.max_log_bytes),
        ] {
            if let Some(v) = v {
                parts.push(format!("{name} {}", crate::units::format_bytes(v)));
            }
        }
        if let Some(v) = self.max_pids {
            parts.push(format!("pids {v}"));
        }
        if let Some(v) = self.max_cpus {
            parts.push(format!("cpus {v}"));
        }
        parts
    }
}

/// Split `tiers.community.deny.cli[2]` into locate steps.
fn key_steps(path: &str) -> Vec<Step<'_>> {
    let mut steps = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        match part.split_once('[') {
            Some((key, idx)) => {
                steps.push(Step::Key(key));
                if let Ok(i) = idx.trim_end_matches(']').parse() {
                    steps.push(Step::Index(i));
                }
            }
            None => steps.push(Step::Key(part)),
        }
    }
    steps
}

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

const TOP_KEYS: &[&str] = &[
    "site",
    "description",
    "allow",
    "deny",
    "insist",
    "limit",
    "run",
    "secrets",
    "network",
    "workspaceWrites",
    "exec",
    "tiers",
    "unsigned",
    "keys",
];
const TIER_KEYS: &[&str] = &[
    "allow",
    "deny",
    "insist",
    "limit",
    "run",
    "secrets",
    "network",
    "workspaceWrites",
    "exec",
];
const CATEGORIES: &[&str] = &["cli", "net", "read", "write"];
const KEY_KEYS: &[&str] = &["signer", "key", "tier"];

#[derive(Clone, Copy)]
enum LimitKind {
    Bytes,
    Millis,
    Count,
    Cpus,
}

const LIMIT_FIELDS: &[(&str, LimitKind)] = &[
    ("maxRuntimeMs", LimitKind::Millis),
    ("maxInputBytes", LimitKind::Bytes),
    ("maxOutputBytes", LimitKind::Bytes),
    ("maxMemoryBytes", LimitKind::Bytes),
    ("maxPids", LimitKind::Count),
    ("maxCpus", LimitKind::Cpus),
    ("maxDiskBytes", LimitKind::Bytes),
    ("maxLogBytes", LimitKind::Bytes),
];

struct Parser<'a> {
    file: &'a Path,
    yaml: &'a str,
    first_line: usize,
}

impl Parser<'_> {
    fn err(&self, path: &str, message: impl Into<String>, hint: Option<String>) -> SiteError {
        let loc = locate(self.yaml, self.first_line, &key_steps(path));
        SiteError {
            file: self.file.to_path_buf(),
            line: loc.line.max(1),
            col: loc.col.max(1),
            message: message.into(),
            hint,
        }
    }

    fn mapping<'v>(
        &self,
        path: &str,
        v: &'v Yaml,
        known: &[&str],
    ) -> Result<Vec<(&'v str, &'v Yaml)>, SiteError> {
        let Yaml::Mapping(map) = v else {
            return Err(self.err(path, format!("`{path}` must be a mapping"), None));
        };
        let mut out = Vec::new();
        for (k, val) in map {
            let Some(key) = k.as_str() else {
                return Err(self.err(path, format!("a key of `{path}` is not a string"), None));
            };
            if !known.contains(&key) {
                let at = join(path, key);
                let near = crate::suggest::nearest(key, known.iter().copied());
                return Err(self.err(
                    &at,
                    format!("unknown key `{at}` in the site policy"),
                    Some(match near {
                        Some(n) => format!("did you mean `{n}`? known keys: {}", known.join(", ")),
                        None => format!("known keys: {}", known.join(", ")),
                    }),
                ));
            }
            out.push((key, val));
        }
        Ok(out)
    }

    fn strings(&self, path: &str, v: &Yaml) -> Result<Vec<String>, SiteError> {
        let Yaml::Sequence(seq) = v else {
            return Err(self.err(
                path,
                format!("`{path}` must be a list of patterns"),
                Some(format!(
                    "write `{}: [\"…\"]`",
                    path.rsplit('.').next().unwrap_or(path)
                )),
            ));
        };
        seq.iter()
            .enumerate()
            .map(|(i, item)| match item {
                Yaml::String(s) => Ok(s.clone()),
                _ => Err(self.err(
                    &format!("{path}[{i}]"),
                    format!("`{path}[{i}]` must be a string"),
                    Some("quote the pattern".into()),
                )),
            })
            .collect()
    }

    fn category_lists(
        &self,
        path: &str,
        v: &Yaml,
    ) -> Result<Vec<(Category, Vec<String>)>, SiteError> {
        let mut out = Vec::new();
        for (key, val) in self.mapping(path, v, CATEGORIES)? {
            let cat = Category::parse(key).unwrap_or(Category::Cli);
            let at = join(path, key);
            let items = self.strings(&at, val)?;
            for (i, item) in items.iter().enumerate() {
                if let Err(e) = validate_pattern(cat, item) {
                    return Err(self.err(
                        &format!("{at}[{i}]"),
                        format!("`{at}[{i}]` `{item}`: {}", e.message),
                        e.hint,
                    ));
                }
                // An HTTP rule narrows what an allowed host admits: a ceiling, never a deny.
                if cat == Category::Net
                    && !path.starts_with("allow")
                    && NetPattern::parse(item).is_ok_and(|p| p.http().is_some())
                {
                    return Err(self.err(
                        &format!("{at}[{i}]"),
                        format!(
                            "`{at}[{i}]` `{item}`: an HTTP rule belongs in `allow.net` (a ceiling)"
                        ),
                        Some("deny the host, or allow only the requests a band may make".into()),
                    ));
                }
            }
            out.push((cat, items));
        }
        Ok(out)
    }

    fn limits(&self, path: &str, v: &Yaml) -> Result<Limits, SiteError> {
        let known: Vec<&str> = LIMIT_FIELDS.iter().map(|(n, _)| *n).collect();
        let mut limits = Limits::default();
        for (key, val) in self.mapping(path, v, &known)? {
            let at = join(path, key);
            let kind = LIMIT_FIELDS
                .iter()
                .find(|(n, _)| *n == key)
                .map_or(LimitKind::Count, |(_, k)| *k);
            let text = match val {
                Yaml::Number(n) => n.to_string(),
                Yaml::String(s) => s.clone(),
                _ => String::new(),
            };
            let bad = || {
                self.err(
                    &at,
                    format!("`{at}` must be a number or a string like `30s` or `512m`"),
                    None,
                )
            };
            let whole = |r: Option<u64>| r.filter(|n| *n > 0).ok_or_else(bad);
            match kind {
                LimitKind::Bytes => {
                    let n = whole(parse_bytes(&text).ok())?;
                    match key {
                        "maxInputBytes" => limits.max_input_bytes = Some(n),
                        "maxOutputBytes" => limits.max_output_bytes = Some(n),
                        "maxMemoryBytes" => limits.max_memory_bytes = Some(n),
                        "maxDiskBytes" => limits.max_disk_bytes = Some(n),
                        _ => limits.max_log_bytes = Some(n),
                    }
                }
                LimitKind::Millis => {
                    limits.max_runtime_ms = Some(whole(parse_duration_ms(&text).ok())?);
                }
                LimitKind::Count => limits.max_pids = Some(whole(text.trim().parse().ok())?),
                LimitKind::Cpus => {
                    let c: f64 = text.trim().parse().map_err(|_| bad())?;
                    if !(c.is_finite() && c > 0.0) {
                        return Err(bad());
                    }
                    limits.max_cpus = Some(c);
                }
            }
        }
        Ok(limits)
    }

    fn switch(&self, path: &str, v: &Yaml) -> Result<bool, SiteError> {
        match v {
            Yaml::Bool(b) => Ok(*b),
            _ => Err(self.err(path, format!("`{path}` must be `true` or `false`"), None)),
        }
    }

    /// The rules of the top level (`prefix` "") or of one tier (`tiers.NAME`).
    fn rules(&self, prefix: &str, entries: &[(&str, &Yaml)]) -> Result<SiteRules, SiteError> {
        let mut rules = SiteRules::default();
        for (key, val) in entries {
            let at = join(prefix, key);
            match *key {
                "allow" => {
                    for (cat, items) in self.category_lists(&at, val)? {
                        *rules.allow.get_mut(cat) = Some(items);
                    }
                }
                "deny" => {
                    for (cat, items) in self.category_lists(&at, val)? {
                        *rules.deny.get_mut(cat) = items;
                    }
                }
                "insist" => {
                    for (cat, items) in self.category_lists(&at, val)? {
                        *rules.insist.get_mut(cat) = items;
                    }
                }
                "limit" => rules.limits = self.limits(&at, val)?,
                k if Switches::KEYS.contains(&k) => {
                    let on = self.switch(&at, val)?;
                    if let Some(slot) = rules.switches.get_mut(k) {
                        *slot = on;
                    }
                }
                _ => {}
            }
        }
        Ok(rules)
    }
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

fn is_tier_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Parse a site policy file's text. `file` names it in errors.
pub fn parse_site(file: &Path, source: &str) -> Result<SitePolicy, SiteError> {
    let whole = |message: String, hint: &str| SiteError {
        file: file.to_path_buf(),
        line: 1,
        col: 1,
        message,
        hint: Some(hint.into()),
    };
    let (yaml, first_line, _body) = split_frontmatter(source).map_err(|e| {
        whole(
            e.to_string(),
            "a site policy is YAML frontmatter between two `---` lines, then optional Markdown",
        )
    })?;
    let p = Parser {
        file,
        yaml,
        first_line,
    };
    let doc: Yaml = yaml_serde::from_str(yaml).map_err(|e| {
        let loc = crate::manifest::yaml_error_loc(yaml, first_line, &e);
        SiteError {
            file: file.to_path_buf(),
            line: loc.line.max(1),
            col: loc.col.max(1),
            message: format!("the frontmatter is not valid YAML: {e}"),
            hint: None,
        }
    })?;
    if doc.is_null() {
        return Ok(SitePolicy {
            yaml: yaml.to_string(),
            first_line,
            ..SitePolicy::open(file)
        });
    }
    let top = p.mapping("", &doc, TOP_KEYS)?;
    let mut site = SitePolicy {
        yaml: yaml.to_string(),
        first_line,
        ..SitePolicy::open(file)
    };
    site.rules = p.rules("", &top)?;
    for (key, val) in &top {
        match *key {
            "site" | "description" => {
                let Yaml::String(s) = val else {
                    return Err(p.err(key, format!("`{key}` must be a string"), None));
                };
                if *key == "site" {
                    site.name = Some(s.clone());
                }
            }
            "unsigned" => match val {
                Yaml::String(s) if is_tier_name(s) => site.unsigned = s.clone(),
                _ => {
                    return Err(p.err(
                        key,
                        "`unsigned` must name a tier",
                        Some(
                            "lowercase letters, digits and `-`, e.g. `unsigned: community`".into(),
                        ),
                    ));
                }
            },
            "tiers" => {
                let Yaml::Mapping(map) = val else {
                    return Err(p.err(key, "`tiers` must be a mapping of tier names", None));
                };
                for (name, body) in map {
                    let Some(name) = name.as_str().filter(|n| is_tier_name(n)) else {
                        return Err(p.err(
                            "tiers",
                            "a tier name must be lowercase letters, digits and `-`",
                            Some("e.g. `community`, `verified`, `local`".into()),
                        ));
                    };
                    let prefix = format!("tiers.{name}");
                    let entries = if body.is_null() {
                        Vec::new()
                    } else {
                        p.mapping(&prefix, body, TIER_KEYS)?
                    };
                    site.tiers
                        .insert(name.to_string(), p.rules(&prefix, &entries)?);
                }
            }
            "keys" => {
                let Yaml::Sequence(seq) = val else {
                    return Err(p.err(key, "`keys` must be a list", None));
                };
                for (i, item) in seq.iter().enumerate() {
                    let at = format!("keys[{i}]");
                    let mut fields = BTreeMap::new();
                    for (k, v) in p.mapping(&at, item, KEY_KEYS)? {
                        let Yaml::String(s) = v else {
                            return Err(p.err(
                                &format!("{at}.{k}"),
                                format!("`{at}.{k}` must be a string"),
                                None,
                            ));
                        };
                        fields.insert(k, s.clone());
                    }
                    let mut take = |k: &str| {
                        fields.remove(k).ok_or_else(|| {
                            p.err(&at, format!("`{at}` needs `{k}`"), Some(
                                "a key is `{signer: alice@example.com, key: \"ssh-ed25519 AAAA…\", tier: verified}`".into(),
                            ))
                        })
                    };
                    let entry = SiteKey {
                        signer: take("signer")?,
                        key: take("key")?,
                        tier: take("tier")?,
                    };
                    if let Err(why) = crate::sign::check_site_key(&entry.key) {
                        return Err(p.err(
                            &format!("{at}.key"),
                            format!("`{at}.key`: {why}"),
                            Some("an OpenSSH public key line (`ssh-ed25519 AAAA…`, from the signer's .pub file) or its `SHA256:` fingerprint (`ssh-keygen -lf KEY.pub`)".into()),
                        ));
                    }
                    site.keys.push(entry);
                }
            }
            _ => {}
        }
    }
    // Every tier the file names must be one it defines, or `local` (open unless defined).
    let defined = |t: &str| site.tiers.contains_key(t) || t == DEFAULT_UNSIGNED_TIER;
    if !defined(&site.unsigned) {
        return Err(p.err(
            "unsigned",
            format!(
                "`unsigned: {}` names a tier `tiers` does not define",
                site.unsigned
            ),
            Some(format!(
                "define it under `tiers:` (known: {})",
                site.tiers.keys().cloned().collect::<Vec<_>>().join(", ")
            )),
        ));
    }
    for (i, k) in site.keys.iter().enumerate() {
        if !defined(&k.tier) {
            return Err(p.err(
                &format!("keys[{i}].tier"),
                format!(
                    "`keys[{i}].tier: {}` names a tier `tiers` does not define",
                    k.tier
                ),
                Some("define it under `tiers:`".into()),
            ));
        }
    }
    Ok(site)
}

/// Parse a narrower layer's file (the user's own, a caller's for its session): a site policy that
/// cannot speak of trust, so `keys:` and `unsigned:` are refused (a signer's tier is the site's
/// to give); its `tiers:` narrow the run of that tier further.
pub fn parse_narrowing(file: &Path, source: &str) -> Result<SitePolicy, SiteError> {
    if source.len() as u64 > MAX_SITE_BYTES {
        return Err(SiteError {
            file: file.to_path_buf(),
            line: 1,
            col: 1,
            message: format!("larger than {MAX_SITE_BYTES} bytes"),
            hint: Some("a narrowing is a short site policy file".into()),
        });
    }
    let site = parse_site(file, source)?;
    for (key, set) in [
        ("keys", !site.keys.is_empty()),
        ("unsigned", site.unsigned != DEFAULT_UNSIGNED_TIER),
    ] {
        if set {
            let loc = locate(&site.yaml, site.first_line, &key_steps(key));
            return Err(SiteError {
                file: file.to_path_buf(),
                line: loc.line.max(1),
                col: loc.col.max(1),
                message: format!("`{key}` is the site policy's to set, not a narrowing's"),
                hint: Some(format!(
                    "remove `{key}`: a narrowing can only take away (deny, ceilings, insist, caps, switches)"
                )),
            });
        }
    }
    Ok(site)
}

/// Read the site policy at `path`: `Ok(None)` when there is no file there.
pub fn load_site(path: &Path) -> Result<Option<SitePolicy>, SiteError> {
    let io = |message: String| SiteError {
        file: path.to_path_buf(),
        line: 0,
        col: 0,
        message,
        hint: None,
    };
    let meta = match fs_err::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e.to_string())),
    };
    if !meta.is_file() {
        return Err(io("the site policy is not a regular file".into()));
    }
    if meta.len() > MAX_SITE_BYTES {
        return Err(io(format!(
            "the site policy is {} bytes; the limit is {MAX_SITE_BYTES}",
            meta.len()
        )));
    }
    let text = fs_err::read_to_string(path).map_err(|e| io(e.to_string()))?;
    parse_site(path, &text).map(Some)
}

// ---------------------------------------------------------------------------------------------
// The intersection
// ---------------------------------------------------------------------------------------------

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

/// `outer` covers everything `inner` matches (`as_deny`: with a deny rule's semantics).
fn covers(cat: Category, outer: &str, inner: &str, as_deny: bool) -> bool {
    if outer == inner {
        return true;
    }
    match (parse(cat, outer), parse(cat, inner)) {
        (Some(Parsed::Cli(a)), Some(Parsed::Cli(b))) => {
            if as_deny {
                a.covers_as_deny(&b)
            } else {
                a.covers(&b)
            }
        }
        (Some(Parsed::Net(a)), Some(Parsed::Net(b))) => a.covers(&b),
        (Some(Parsed::Fs(a)), Some(Parsed::Fs(b))) => a.covers(&b),
        _ => false,
    }
}

/// The band's allow and insist items of one category, each named by its rule.
fn band_items(band: &Policy, cat: Category) -> Vec<(&'static str, &str)> {
    let mut out: Vec<(&'static str, &str)> = Vec::new();
    for item in band.allow.get(cat) {
        out.push(("allow", item));
    }
    for item in band.insist.get(cat) {
        out.push(("insist", item));
    }
    out
}

fn push_unique(list: &mut Vec<String>, item: &str) {
    if !list.iter().any(|x| x == item) {
        list.push(item.to_string());
    }
}

/// `band ∩ layers`: the band's policy with every layer applied, or the first collision.
///
/// Refused (nothing is narrowed silently): a band allow/insist rule a layer's deny covers whole;
/// one outside a layer's allow ceiling; a layer's insist the band does not allow, or denies;
/// network, secrets, workspace writes or `band exec` where a layer switches them off; a tier
/// with `run: false`. Otherwise the layers' deny rules join the band's, their insists join the
/// band's insist, and limits take the smaller value.
pub fn intersect(
    band: &Policy,
    kind: RunKind,
    tier: &str,
    layers: &[Layer<'_>],
) -> Result<Intersection, Box<Refusal>> {
    let mut out = band.clone();
    for layer in layers {
        check_layer(band, kind, tier, layer)?;
        for cat in Category::ALL {
            for item in layer.rules.deny.get(cat) {
                push_unique(out.deny.get_mut(cat), item);
            }
            for item in layer.rules.insist.get(cat) {
                push_unique(out.insist.get_mut(cat), item);
            }
        }
        out.limits = out.limits.narrow(&layer.rules.limits);
    }
    Ok(Intersection {
        policy: out,
        tier: tier.to_string(),
    })
}

fn check_layer(
    band: &Policy,
    kind: RunKind,
    tier: &str,
    layer: &Layer<'_>,
) -> Result<(), Box<Refusal>> {
    let prefix = layer.prefix.as_str();
    let refuse = |band_rule: String, key: String, shown: String, hint: String| {
        // `allow.cli `curl *``: the key and the item a band file holds.
        let (band_key, band_item) = match band_rule.split_once(" `") {
            Some((k, rest)) if !k.contains(' ') => (
                Some(k.to_string()),
                rest.strip_suffix('`').map(str::to_string),
            ),
            _ => (None, None),
        };
        let at = layer.site.at(&key);
        let in_tier = if layer.label == "site" {
            format!(" (tier {tier})")
        } else {
            String::new()
        };
        // A narrower layer is not the machine's: its refusals say whose they are.
        let hint = if layer.label == "site" || layer.label.starts_with("tier ") {
            hint
        } else {
            let whose = format!(
                "the {} policy ({})",
                layer.label,
                layer.site.source.display()
            );
            hint.replace("this machine", &whose)
                .replace("the site requires", &format!("{whose} requires"))
        };
        Box::new(Refusal {
            message: format!(
                "the band's {band_rule} is refused by the {} policy's {shown} ({at}){in_tier}",
                layer.label
            ),
            band_rule,
            band_key,
            band_item,
            site_rule: shown,
            at,
            layer: layer.label.to_string(),
            tier: tier.to_string(),
            hint,
        })
    };
    let switch = |name: &str| {
        (
            format!("{prefix}{name}"),
            format!("`{prefix}{name}: false`"),
        )
    };
    let sw = layer.rules.switches;
    if !sw.run {
        let (key, shown) = switch("run");
        return Err(refuse(
            "run".into(),
            key,
            shown,
            format!("skills of tier {tier} do not run on this machine"),
        ));
    }
    if !sw.exec && kind.exec {
        let (key, shown) = switch("exec");
        return Err(refuse(
            "ad-hoc command (`band exec`)".into(),
            key,
            shown,
            "run a skill instead: `band exec` is switched off on this machine".into(),
        ));
    }
    if !sw.secrets {
        let asked = band.secrets.first().or(band.required_secrets.first());
        if let Some(name) = asked {
            let (key, shown) = switch("secrets");
            return Err(refuse(
                format!("env.secrets `{name}`"),
                key,
                shown,
                "a skill of this tier gets no secrets here: drop them from the band".into(),
            ));
        }
    }
    if !sw.network
        && let Some((col, item)) = band_items(band, Category::Net).first()
    {
        let (key, shown) = switch("network");
        return Err(refuse(
            format!("{col}.net `{item}`"),
            key,
            shown,
            "a skill of this tier gets no network here".into(),
        ));
    }
    if !sw.workspace_writes {
        for (col, item) in band_items(band, Category::Write) {
            if !item.starts_with('/') {
                let (key, shown) = switch("workspaceWrites");
                return Err(refuse(
                    format!("{col}.write `{item}`"),
                    key,
                    shown,
                    "a skill of this tier may not write to the workspace here".into(),
                ));
            }
        }
    }
    for cat in Category::ALL {
        let items = band_items(band, cat);
        for (col, item) in &items {
            for (i, deny) in layer.rules.deny.get(cat).iter().enumerate() {
                if covers(cat, deny, item, true) {
                    return Err(refuse(
                        format!("{col}.{cat} `{item}`"),
                        format!("{prefix}deny.{cat}[{i}]"),
                        format!("{prefix}deny.{cat} `{deny}`"),
                        format!(
                            "remove `{item}` from the band's {col}.{cat}: this machine never allows it"
                        ),
                    ));
                }
            }
            if let Some(ceiling) = layer.rules.allow.get(cat)
                && !ceiling.iter().any(|c| covers(cat, c, item, false))
            {
                let shown = if ceiling.is_empty() {
                    format!("{prefix}allow.{cat}: [] (nothing)")
                } else {
                    format!(
                        "{prefix}allow.{cat} ceiling [{}]",
                        ceiling
                            .iter()
                            .map(|c| format!("`{c}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                };
                return Err(refuse(
                    format!("{col}.{cat} `{item}`"),
                    format!("{prefix}allow.{cat}"),
                    shown,
                    format!("narrow `{item}` to a rule inside the ceiling"),
                ));
            }
        }
        for (i, need) in layer.rules.insist.get(cat).iter().enumerate() {
            if let Some(deny) = band
                .deny
                .get(cat)
                .iter()
                .find(|d| covers(cat, d, need, true))
            {
                return Err(refuse(
                    format!("deny.{cat} `{deny}`"),
                    format!("{prefix}insist.{cat}[{i}]"),
                    format!("{prefix}insist.{cat} `{need}`"),
                    "the site requires what the band denies: the run could never satisfy it".into(),
                ));
            }
            if !items.iter().any(|(_, item)| covers(cat, item, need, false)) {
                return Err(refuse(
                    format!("allow.{cat} (nothing covers `{need}`)"),
                    format!("{prefix}insist.{cat}[{i}]"),
                    format!("{prefix}insist.{cat} `{need}`"),
                    format!("add `{need}` to the band's allow.{cat}: every run here must do it"),
                ));
            }
        }
    }
    Ok(())
}

/// `band ∩ site ∩ tier` for a run of `tier` (no tier layer when the site does not define it).
pub fn apply(
    band: &Policy,
    kind: RunKind,
    site: &SitePolicy,
    tier: &str,
) -> Result<Intersection, Box<Refusal>> {
    let layers = site.layers(tier);
    intersect(band, kind, tier, &layers)
}

/// [`apply`], then each narrower layer (`(label, file)`, in order): its own rules and its tier's,
/// named by its label in a refusal (`the user policy's deny.cli …`).
pub fn apply_narrowed(
    band: &Policy,
    kind: RunKind,
    site: &SitePolicy,
    tier: &str,
    narrowing: &[(String, SitePolicy)],
) -> Result<Intersection, Box<Refusal>> {
    let mut layers = site.layers(tier);
    for (label, n) in narrowing {
        for mut l in n.layers(tier) {
            l.label = if l.label == "site" {
                label.clone()
            } else {
                format!("{label} {}", l.label)
            };
            layers.push(l);
        }
    }
    intersect(band, kind, tier, &layers)
}

/// The band made to fit the layers instead of refused: each allow or insist rule, and each
/// secret, a layer would refuse is dropped (with the refusal that dropped it), until the rest
/// passes. `band learn` offers its observing run what the site lets it have, and says what it
/// took away. `Err` for what no dropping fixes (`run: false`, an ad-hoc command where `exec`
/// is off, a site insist the band does not allow).
pub fn fit(
    band: &Policy,
    kind: RunKind,
    site: &SitePolicy,
    tier: &str,
    narrowing: &[(String, SitePolicy)],
) -> Result<(Policy, Vec<Refusal>), Box<Refusal>> {
    let mut fitted = band.clone();
    let mut dropped = Vec::new();
    loop {
        let refusal = match apply_narrowed(&fitted, kind, site, tier, narrowing) {
            Ok(_) => return Ok((fitted, dropped)),
            Err(r) => r,
        };
        let list = match (refusal.band_key.as_deref(), refusal.band_item.as_deref()) {
            (Some("env.secrets"), Some(_)) => Some(&mut fitted.secrets),
            (Some(key), Some(_)) => key.split_once('.').and_then(|(col, cat)| {
                let cat = Category::parse(cat)?;
                match col {
                    "allow" => Some(fitted.allow.get_mut(cat)),
                    "insist" => Some(fitted.insist.get_mut(cat)),
                    _ => None,
                }
            }),
            _ => None,
        };
        let item = refusal.band_item.clone().unwrap_or_default();
        let Some(list) = list.filter(|l| l.contains(&item)) else {
            return Err(refusal);
        };
        list.retain(|i| *i != item);
        if refusal.band_key.as_deref() == Some("env.secrets") {
            fitted.required_secrets.retain(|i| *i != item);
        }
        dropped.push(*refusal);
    }
}

#[cfg(test)]
#[path = "site_tests.rs"]
mod tests;
