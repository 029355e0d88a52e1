//! BAND.md parsing: frontmatter split, YAML, typed fields, located diagnostics.
//!
//! The parser is strict where the upstream format was loose: every field is type-checked, every
//! pattern is syntax-checked, limits accept human units, and unknown keys get a "did you mean".
//! Parsing never fails outright: it returns what it could build plus diagnostics, and callers
//! refuse to run on any error.

pub mod format;
pub mod locate;
pub mod prescan;
pub mod skill_md;

use std::path::{Path, PathBuf};

use serde::Serialize;
use yaml_serde::Value as Yaml;

use crate::diag::{Code, Diagnostic, Loc};
use crate::policy::compose::BandPolicy;
use crate::policy::{Category, Limits, RuleSet, validate_pattern};
use crate::units::{UnitError, parse_bytes, parse_duration_ms};
use locate::{Step, locate};

/// The canonical band file name.
pub const BAND_FILE: &str = "BAND.md";
/// Band files larger than this are refused (frontmatter is small and hand-written).
pub const MAX_BAND_FILE_BYTES: u64 = 256 * 1024;

/// True for `BAND.md` and `*.band.md`.
pub fn is_band_file(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n == BAND_FILE || (n.ends_with(".band.md") && n.len() > 8))
}

/// Where a run executes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum Target {
    /// band-server directly on this Linux host.
    Host,
    /// The built-in QEMU VM driver.
    Qemu,
    /// A Lima VM (`local-lima` is the upstream spelling).
    Lima,
    /// Any Linux host with band-server installed, over SSH.
    Ssh {
        user: String,
        host: String,
        port: u16,
    },
    /// An agent-sandbox pod's sandboxd endpoint served by band-sandboxd (`sandboxd://host:port`,
    /// the gRPC port): an ad-hoc command runs there under the pod's band.
    Sandboxd { host: String, port: u16 },
}

/// Why a text is not a [`Target`]; each message quotes the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("`{0}` is an upstream Bands target band does not support")]
    Unsupported(String),
    #[error("unknown target `{0}`")]
    Unknown(String),
    #[error("`{0}` needs a user: ssh://user@host[:port]")]
    NoUser(String),
    #[error("bad port in `{0}`")]
    BadPort(String),
    #[error("`{0}` opens `[` but never closes it")]
    OpenBracket(String),
    #[error("`{0}` is not ssh://user@host[:port]")]
    NotSsh(String),
    #[error("`{0}` is not sandboxd://host:port")]
    NotSandboxd(String),
}

/// Upstream's `local-dangerously` ("run on this machine, no sandbox"): band reads it as
/// [`Target::Host`], which is still band's sandbox (band never runs a skill unsandboxed).
pub const UPSTREAM_UNSANDBOXED: &str = "local-dangerously";

/// Upstream Bands targets band has no equivalent for (`cloudflare` workers, `local-docker`).
pub const UPSTREAM_UNSUPPORTED: [&str; 2] = ["cloudflare", "local-docker"];

/// The targets band runs on, for hints.
pub const TARGET_CHOICES: &str =
    "host, qemu, lima (local-lima), ssh://user@host[:port], sandboxd://host:port";

impl Target {
    /// A target on another machine than this one and its VMs (`ssh://`, `sandboxd://`): what a
    /// run sends there (the workspace's files, the input, the secrets) leaves the machine, so a
    /// band never chooses one on its own (`client::pipeline::resolve_target`).
    pub fn is_remote(&self) -> bool {
        matches!(self, Target::Ssh { .. } | Target::Sandboxd { .. })
    }

    /// A target name as written in `execution.target`, `--target` or the user config: band's own
    /// names and upstream's (`local-lima` is lima, `local-dangerously` is the host, sandboxed).
    pub fn parse(s: &str) -> Result<Target, TargetError> {
        match s {
            "host" | UPSTREAM_UNSANDBOXED => Ok(Target::Host),
            "qemu" => Ok(Target::Qemu),
            "lima" | "local-lima" => Ok(Target::Lima),
            _ if UPSTREAM_UNSUPPORTED.contains(&s) => Err(TargetError::Unsupported(s.to_string())),
            _ if s.starts_with("sandboxd://") => Target::parse_sandboxd(s),
            _ => {
                let Some(rest) = s.strip_prefix("ssh://") else {
                    return Err(TargetError::Unknown(s.to_string()));
                };
                let (user, hostport) = rest
                    .split_once('@')
                    .ok_or_else(|| TargetError::NoUser(s.to_string()))?;
                let bad_port = || TargetError::BadPort(s.to_string());
                // `[v6]` or `[v6]:port`; else `host:port`; a bare IPv6 address (several colons) has no port.
                let (host, port) = if let Some(rest) = hostport.strip_prefix('[') {
                    let (h, after) = rest
                        .split_once(']')
                        .ok_or_else(|| TargetError::OpenBracket(s.to_string()))?;
                    match after {
                        "" => (h, 22),
                        _ => (
                            h,
                            after
                                .strip_prefix(':')
                                .and_then(|p| p.parse::<u16>().ok())
                                .ok_or_else(bad_port)?,
                        ),
                    }
                } else {
                    match hostport.rsplit_once(':') {
                        Some((h, p)) if !h.contains(':') => {
                            (h, p.parse::<u16>().map_err(|_| bad_port())?)
                        }
                        _ => (hostport, 22),
                    }
                };
                // Never a word an ssh command line could read as an option.
                let ok = |t: &str| {
                    !t.is_empty()
                        && !t.starts_with('-')
                        && t.chars()
                            .all(|c| c.is_ascii_alphanumeric() || "._-:".contains(c))
                };
                if !ok(user) || !ok(host) || port == 0 {
                    return Err(TargetError::NotSsh(s.to_string()));
                }
                Ok(Target::Ssh {
                    user: user.into(),
                    host: host.into(),
                    port,
                })
            }
        }
    }
}

impl Target {
    /// `sandboxd://host:port` (an IPv6 host in brackets; the port is required: sandboxd's gRPC
    /// port is 9090, but a port-forward's is anything).
    fn parse_sandboxd(s: &str) -> Result<Target, TargetError> {
        let bad = || TargetError::NotSandboxd(s.to_string());
        let rest = s.strip_prefix("sandboxd://").ok_or_else(bad)?;
        let (host, port) = match rest.strip_prefix('[') {
            Some(r) => {
                let (h, p) = r.split_once("]:").ok_or_else(bad)?;
                (h, p)
            }
            None => rest.rsplit_once(':').ok_or_else(bad)?,
        };
        let port = port.parse::<u16>().map_err(|_| bad())?;
        let ok = !host.is_empty()
            && port != 0
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-:".contains(c));
        if !ok || (host.contains(':') && !rest.starts_with('[')) {
            return Err(bad());
        }
        Ok(Target::Sandboxd {
            host: host.into(),
            port,
        })
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Host => f.write_str("host"),
            Target::Qemu => f.write_str("qemu"),
            Target::Lima => f.write_str("lima"),
            // An IPv6 host is bracketed, so that a port after it reads back as the port.
            Target::Ssh {
                user,
                host,
                port: 22,
            } if host.contains(':') => write!(f, "ssh://{user}@[{host}]"),
            Target::Ssh { user, host, port } if host.contains(':') => {
                write!(f, "ssh://{user}@[{host}]:{port}")
            }
            Target::Ssh {
                user,
                host,
                port: 22,
            } => write!(f, "ssh://{user}@{host}"),
            Target::Ssh { user, host, port } => write!(f, "ssh://{user}@{host}:{port}"),
            Target::Sandboxd { host, port } if host.contains(':') => {
                write!(f, "sandboxd://[{host}]:{port}")
            }
            Target::Sandboxd { host, port } => write!(f, "sandboxd://{host}:{port}"),
        }
    }
}

/// One parsed band file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Band {
    pub path: PathBuf,
    pub name: String,
    pub description: String,
    pub icon: Option<String>,
    pub version: Option<u64>,
    pub allow: RuleSet,
    pub deny: RuleSet,
    pub insist: RuleSet,
    pub secrets: Vec<String>,
    pub required_secrets: Vec<String>,
    /// `env.secrets` entries of the form `{name, hosts}`: the hosts each bound secret may go to.
    pub secret_hosts: std::collections::BTreeMap<String, Vec<String>>,
    pub requires_egress: Vec<String>,
    pub limits: Limits,
    pub target: Option<Target>,
    /// `path:`: this file is a reference to another band file.
    pub reference: Option<String>,
    pub extends: Vec<String>,
    pub includes: Vec<String>,
    /// The block keyed by the band's own name (`$CONFIG_PATH`).
    pub config: Option<serde_json::Value>,
    pub body: Option<String>,
    /// The raw frontmatter and the file line it starts on, to locate later diagnostics.
    pub yaml: String,
    pub yaml_first_line: usize,
}

impl Band {
    /// The position of a key path in this file.
    pub fn locate(&self, path: &[Step<'_>]) -> Loc {
        locate(&self.yaml, self.yaml_first_line, path)
    }

    /// This file's own declarations, for composition.
    pub fn own_policy(&self) -> BandPolicy {
        BandPolicy {
            name: self.name.clone(),
            source: self.path.clone(),
            allow: self.allow.clone(),
            deny: self.deny.clone(),
            insist: self.insist.clone(),
            limits: self.limits.clone(),
            secrets: self.secrets.clone(),
            required_secrets: self.required_secrets.clone(),
            secret_hosts: self.secret_hosts.clone(),
            requires_egress: self.requires_egress.clone(),
        }
    }
}

/// The result of parsing: whatever could be built, and everything found wrong.
#[derive(Debug, Clone)]
pub struct Parsed {
    pub band: Option<Band>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Why a text has no `---` frontmatter to split off.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrontmatterError {
    #[error("the file does not start with a `---` line")]
    NoOpening,
    #[error("the frontmatter is never closed")]
    NotClosed,
    /// The frontmatter exceeds a limit of the pre-scan ([`prescan`]); it is not parsed.
    #[error("{}", .0.excess)]
    TooComplex(prescan::TooComplex),
}

impl FrontmatterError {
    /// Where the diagnostic points: the first line, where the frontmatter should open.
    pub fn loc(&self) -> Loc {
        match self {
            FrontmatterError::TooComplex(t) => t.loc,
            _ => Loc::new(1, 1),
        }
    }

    /// The diagnostic code: F001, or F013 for frontmatter over the pre-scan's limits.
    pub fn code(&self) -> Code {
        match self {
            FrontmatterError::TooComplex(_) => Code::FrontmatterTooComplex,
            _ => Code::MissingFrontmatter,
        }
    }

    /// What to do about it, for a band file.
    pub fn hint(&self) -> &'static str {
        match self {
            FrontmatterError::NoOpening => {
                "a band file is YAML frontmatter between two `---` lines, then optional Markdown"
            }
            FrontmatterError::NotClosed => "end the frontmatter with a line holding only `---`",
            FrontmatterError::TooComplex(t) => t.excess.hint(),
        }
    }
}

/// Split `---` frontmatter from the body. Returns (yaml, first yaml line, body).
///
/// The frontmatter is also pre-scanned ([`prescan::prescan`]): anything that could make the YAML
/// parser slow (deep nesting, many aliases, size) is refused here, in linear time, so every
/// caller that parses the YAML afterwards parses bounded input.
pub fn split_frontmatter(source: &str) -> Result<(&str, usize, &str), FrontmatterError> {
    let src = source.strip_prefix('\u{feff}').unwrap_or(source);
    let first_end = src.find('\n').unwrap_or(src.len());
    if src[..first_end].trim_end() != "---" {
        return Err(FrontmatterError::NoOpening);
    }
    let yaml_start = (first_end + 1).min(src.len());
    let mut offset = yaml_start;
    for line in src[yaml_start..].split_inclusive('\n') {
        let t = line.trim_end();
        if t == "---" || t == "..." {
            let yaml = &src[yaml_start..offset];
            let body = &src[offset + line.len()..];
            prescan::prescan(yaml, 2).map_err(FrontmatterError::TooComplex)?;
            return Ok((yaml, 2, body));
        }
        offset += line.len();
    }
    Err(FrontmatterError::NotClosed)
}

/// Where a YAML error is, counted the way band counts everywhere else: lines end at `\n` only.
/// (The YAML parser also breaks lines at a lone `\r`, NEL, LS and PS, so its own line numbers
/// can point past the end of the file; its byte index cannot.) The column counts characters.
pub(crate) fn yaml_error_loc(yaml: &str, first_line: usize, e: &yaml_serde::Error) -> Loc {
    let Some(index) = e.location().map(|l| l.index().min(yaml.len())) else {
        return Loc::new(first_line, 1);
    };
    let index = (0..=index)
        .rev()
        .find(|&i| yaml.is_char_boundary(i))
        .unwrap_or(0);
    let before = &yaml[..index];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    Loc::new(
        first_line + before.matches('\n').count(),
        before[line_start..].chars().count() + 1,
    )
}

/// The top-level keys band reads (besides the key named after the band, its config block).
/// Every key of every mapping in the frontmatter is checked against the lists here and in
/// [`KEY_SETS`]: an unknown key is an error (F007), so a typo can never silently widen or
/// drop a rule.
pub const TOP_KEYS: &[&str] = &[
    "band",
    "description",
    "icon",
    "version",
    "allow",
    "deny",
    "insist",
    "env",
    "requires",
    "limit",
    "execution",
    "path",
    "extends",
    "includes",
    "provides",
    "contract",
    "url",
];

/// The categories of `allow`, `deny` and `insist` band enforces.
pub const RULE_KEYS: &[&str] = &["cli", "net", "read", "write"];
/// Upstream's categories band accepts and ignores (F011): it enforces only [`RULE_KEYS`].
pub const IGNORED_RULE_KEYS: &[&str] = &["tools", "mcps", "apis", "skills", "fs"];

/// The keys of each nested mapping band reads, by dotted path (`""` is the top level, without
/// the band-named config block; `allow`, `deny` and `insist` take [`RULE_KEYS`] and
/// [`IGNORED_RULE_KEYS`]). The parser rejects any other key; the JSON Schema
/// (`schemas/band.schema.json`) lists exactly these (a test holds the two together).
pub const KEY_SETS: &[(&str, &[&str])] = &[
    ("", TOP_KEYS),
    ("env", &["secrets", "variables"]),
    ("requires", &["secrets", "network"]),
    ("requires.network", &["egress"]),
    (
        "limit",
        &[
            "maxRuntimeMs",
            "maxInputBytes",
            "maxOutputBytes",
            "maxMemoryBytes",
            "maxPids",
            "maxCpus",
            "maxDiskBytes",
            "maxLogBytes",
            "maxCostDollars",
        ],
    ),
    ("execution", &["target", "lima", "cloudflare"]),
    ("execution.lima", &["vmName", "port"]),
    (
        "execution.cloudflare",
        &["workerName", "accountId", "customDomain"],
    ),
    ("provides", &["apis", "tools", "skills", "mcps"]),
    ("contract", &["input", "output"]),
];

/// The keys band reads in the mapping at `path` (dotted), if it is one of [`KEY_SETS`].
pub fn known_keys(path: &str) -> Option<&'static [&'static str]> {
    KEY_SETS.iter().find(|(p, _)| *p == path).map(|(_, k)| *k)
}

/// The `limit` fields and whether each is a size, a duration, a count, or dollars.
#[derive(Clone, Copy)]
enum LimitKind {
    Bytes,
    Millis,
    Count,
    Cpus,
    Dollars,
}

/// Why a limit's value is not a number of its kind.
#[derive(Debug, thiserror::Error)]
enum LimitValueError {
    #[error(transparent)]
    Unit(#[from] UnitError),
    #[error("`{0}` is not a whole number")]
    NotWhole(String),
    #[error("`{0}` is not a number of CPUs")]
    NotCpus(String),
    #[error("`{0}` is not an amount of dollars")]
    NotDollars(String),
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
    ("maxCostDollars", LimitKind::Dollars),
];

/// Read and parse a band file. I/O problems become an F012 diagnostic naming the path; a band
/// file that is a link out of its skill (or, outside a skill, out of its own folder), or no
/// regular file, is refused with S009 and never read ([`crate::skillfs`]).
pub fn load_band(path: &Path) -> Parsed {
    let fail = |code: Code, msg: String| Parsed {
        band: None,
        diagnostics: vec![Diagnostic::new(code, path, Loc::FILE, msg)],
    };
    let (scope, file) = band_scope(path);
    match crate::skillfs::read_to_string(&scope, &file, MAX_BAND_FILE_BYTES) {
        Ok(src) => parse_band(path, &src),
        Err(crate::skillfs::SkillFileError::TooLarge { size, .. }) => fail(
            Code::FileUnreadable,
            format!("band file is {size} bytes; the limit is {MAX_BAND_FILE_BYTES}"),
        ),
        Err(e) if e.is_refused() => Parsed {
            band: None,
            diagnostics: vec![crate::diag::refused_file(path, &e)],
        },
        Err(e) => fail(Code::FileUnreadable, e.to_string()),
    }
}

/// The folder a band file may be read from: its skill (the nearest folder above it that holds a
/// SKILL.md), or, for a band file outside any skill (a shared band an `extends:` names, a loose
/// band), its own folder. A link may lead anywhere inside that folder, never out of it.
/// Returns that folder and `path` made absolute, as [`crate::skillfs`] takes them.
pub fn band_scope(path: &Path) -> (PathBuf, PathBuf) {
    let file = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    (band_folder(&file), file)
}

fn band_folder(path: &Path) -> PathBuf {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    // The folder as the kernel finds it (`exec/../../x.band.md` is the reference of `band exec`'s
    // temporary skill to the user's band file).
    let parent = fs_err::canonicalize(parent).unwrap_or_else(|_| parent.to_path_buf());
    parent
        .ancestors()
        .take(8)
        .filter(|d| !d.as_os_str().is_empty())
        .find(|d| fs_err::symlink_metadata(d.join("SKILL.md")).is_ok())
        .unwrap_or(&parent)
        .to_path_buf()
}

/// Parse band file text. `path` is used for diagnostics only.
pub fn parse_band(path: &Path, source: &str) -> Parsed {
    let mut p = FieldParser {
        path,
        yaml: "",
        first: 2,
        diags: Vec::new(),
        items: Default::default(),
    };
    let Some((map, body)) = p.frontmatter(source) else {
        return Parsed {
            band: None,
            diagnostics: p.diags,
        };
    };
    let mut band = Band {
        path: path.to_path_buf(),
        yaml: p.yaml.to_string(),
        yaml_first_line: p.first,
        body: Some(body.trim())
            .filter(|b| !b.is_empty())
            .map(str::to_string),
        ..Band::default()
    };
    p.fields(&map, &mut band);
    if band.reference.is_none() {
        p.required_fields(&map, &band);
    } else {
        p.ignored_in_reference(&map);
    }
    p.semantic_checks(&band);
    Parsed {
        band: Some(band),
        diagnostics: p.diags,
    }
}

/// Reads a band's frontmatter field by field, collecting located diagnostics.
struct FieldParser<'a> {
    path: &'a Path,
    yaml: &'a str,
    first: usize,
    diags: Vec<Diagnostic>,
    /// The flow sequences' items located so far in `yaml`.
    items: crate::manifest::locate::FlowItems,
}

/// The steps of [`parse_band`], in order.
impl<'a> FieldParser<'a> {
    /// The frontmatter as a mapping (empty for an empty one) and the body after it; `None`, with
    /// its diagnostic, when there is no frontmatter, it is no YAML, or it is no mapping.
    fn frontmatter(&mut self, source: &'a str) -> Option<(yaml_serde::Mapping, &'a str)> {
        let (yaml, first, body) = match split_frontmatter(source) {
            Ok(x) => x,
            Err(e) => {
                self.diags.push(
                    Diagnostic::new(e.code(), self.path, e.loc(), e.to_string())
                        .with_hint(e.hint()),
                );
                return None;
            }
        };
        self.yaml = yaml;
        self.items = Default::default();
        self.first = first;
        let root: Yaml = match yaml_serde::from_str(yaml) {
            Ok(v) => v,
            Err(e) => {
                let loc = yaml_error_loc(yaml, first, &e);
                let msg = e.to_string();
                let msg = msg.split(" at line ").next().unwrap_or(&msg).to_string();
                self.diags.push(
                    Diagnostic::new(Code::YamlSyntax, self.path, loc, format!("invalid YAML: {msg}"))
                        .with_hint("quote values that start with `*`, `&`, `!`, `{`, `[` or contain `: `, e.g. \"*.github.com\""),
                );
                return None;
            }
        };
        match root {
            Yaml::Mapping(m) => Some((m, body)),
            Yaml::Null => Some((yaml_serde::Mapping::new(), body)),
            _ => {
                self.diags.push(
                    Diagnostic::new(
                        Code::NotAMapping,
                        self.path,
                        Loc::new(first, 1),
                        "the frontmatter must be a mapping of keys to values",
                    )
                    .with_hint("start with `band: my-skill` and `description: ...`"),
                );
                None
            }
        }
    }
}

impl FieldParser<'_> {
    /// Every top-level key into its field of `band` ([`Self::field`]). The band's own name
    /// decides which key holds its config, so it is read first.
    fn fields(&mut self, map: &yaml_serde::Mapping, band: &mut Band) {
        let name_key = map.get("band").and_then(Yaml::as_str).map(str::to_string);
        for (k, v) in map {
            let Some(key) = k.as_str() else {
                self.err(
                    Code::WrongType,
                    &[],
                    format!("keys must be strings, found {}", kind(k)),
                    None,
                );
                continue;
            };
            self.field(key, v, name_key.as_deref(), band);
        }
    }

    /// One top-level key: its value, type-checked, into `band`, or a diagnostic. `name_key` is
    /// the band's name (the key of its config).
    fn field(&mut self, key: &str, v: &Yaml, name_key: Option<&str>, band: &mut Band) {
        let at = [Step::Key(key)];
        match key {
            "band" => match v.as_str() {
                Some(s) if is_kebab(s) => band.name = s.to_string(),
                Some(s) => self.err(
                    Code::InvalidName,
                    &at,
                    format!("band name `{s}` is not kebab-case"),
                    Some(format!(
                        "use lowercase letters, digits and single hyphens, e.g. `{}`",
                        to_kebab(s)
                    )),
                ),
                None => self.type_err(&at, "a string", v),
            },
            "description" => match v.as_str() {
                Some(s) => band.description = s.trim().to_string(),
                None => self.type_err(&at, "a string", v),
            },
            "icon" => match v.as_str() {
                Some(s) => band.icon = Some(s.to_string()),
                None => self.type_err(&at, "a string", v),
            },
            "version" => match v.as_u64() {
                Some(n) if n >= 1 => band.version = Some(n),
                _ => self.err(
                    Code::InvalidVersion,
                    &at,
                    format!("`version` must be a positive integer, found {}", show(v)),
                    None,
                ),
            },
            "allow" => band.allow = self.rules("allow", v),
            "deny" => band.deny = self.rules("deny", v),
            "insist" => band.insist = self.rules("insist", v),
            "env" => self.env(v, band),
            "requires" => self.requires(v, band),
            "limit" => band.limits = self.limits(v),
            "execution" => self.execution(v, band),
            "path" => match v.as_str() {
                Some(s) if !s.trim().is_empty() => band.reference = Some(s.to_string()),
                _ => self.type_err(&at, "a relative path to another band file", v),
            },
            "extends" => band.extends = self.string_list(&at, v),
            "includes" => band.includes = self.string_list(&at, v),
            "provides" => self.check_keys(&at, v),
            "contract" => {
                self.warn(
                    Code::Ignored,
                    &at,
                    "`contract` is ignored: band reads contracts from schemas/input and schemas/output".into(),
                    Some("move the schemas to schemas/input/<script>.json and schemas/output/<script>.json".into()),
                );
                self.check_keys(&at, v);
            }
            "url" => self.err(
                Code::BadReference,
                &at,
                "remote band references (`url:`) are not supported: band never fetches policy"
                    .into(),
                Some(
                    "vendor the band file into the repository and reference it with `path:`".into(),
                ),
            ),
            k if Some(k) == name_key => match serde_json::to_value(v) {
                Ok(j @ serde_json::Value::Object(_)) => band.config = Some(j),
                _ => self.type_err(&at, "a mapping (the skill's config)", v),
            },
            other => {
                let mut known: Vec<&str> = TOP_KEYS.to_vec();
                known.extend(name_key);
                self.unknown_key(&at, other, &known);
            }
        }
    }

    /// F004 for `band` and `description`, when a band that is no `path:` reference lacks one.
    fn required_fields(&mut self, map: &yaml_serde::Mapping, band: &Band) {
        for (field, value) in [("band", &band.name), ("description", &band.description)] {
            let present = map.get(field).is_some_and(|v| {
                !matches!(v, Yaml::Null) && v.as_str().is_none_or(|s| !s.trim().is_empty())
            });
            if value.is_empty() && !present {
                self.diags.push(
                    Diagnostic::new(
                        Code::MissingField,
                        self.path,
                        Loc::new(1, 1),
                        format!("required field `{field}` is missing"),
                    )
                    .with_hint(match field {
                        "band" => "add `band: <kebab-case-name>` to the frontmatter",
                        _ => "add `description: <one sentence on what the skill does>`",
                    }),
                );
            }
        }
    }

    /// A warning for each rule key of a band that is a `path:` reference (the referenced file's
    /// rules are the ones read).
    fn ignored_in_reference(&mut self, map: &yaml_serde::Mapping) {
        for key in [
            "allow", "deny", "insist", "limit", "env", "extends", "includes",
        ] {
            if map.contains_key(key) {
                self.warn(
                    Code::Ignored,
                    &[Step::Key(key)],
                    format!("`{key}` is ignored in a band file that is a `path:` reference"),
                    Some("put the rules in the referenced file".into()),
                );
            }
        }
    }

    fn loc(&self, at: &[Step<'_>]) -> Loc {
        crate::manifest::locate::locate_with(self.yaml, self.first, at, &self.items)
    }

    fn push(&mut self, code: Code, at: &[Step<'_>], msg: String, hint: Option<String>) {
        let mut d = Diagnostic::new(code, self.path, self.loc(at), msg);
        if let Some(hint) = hint {
            d = d.with_hint(hint);
        }
        self.diags.push(d);
    }

    fn err(&mut self, code: Code, at: &[Step<'_>], msg: String, hint: Option<String>) {
        self.push(code, at, msg, hint);
    }

    fn warn(&mut self, code: Code, at: &[Step<'_>], msg: String, hint: Option<String>) {
        self.push(code, at, msg, hint);
    }

    /// F007, an error: `key` is not one of `known` in the mapping at `at`. The hint names the
    /// nearest known key, or lists them all.
    fn unknown_key(&mut self, at: &[Step<'_>], key: &str, known: &[&str]) {
        let hint = match crate::suggest::nearest(key, known.iter().copied()) {
            Some(near) => format!("did you mean `{near}`?"),
            None => format!(
                "band reads {}; it refuses other keys, so a typo cannot change the policy",
                known
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        self.push(
            Code::UnknownKey,
            at,
            format!("unknown key `{}`", dotted(at)),
            Some(hint),
        );
    }

    /// Check that every key of the mapping `v` at `at` is one of [`KEY_SETS`]' for that path,
    /// recursing into the nested mappings [`KEY_SETS`] knows. For blocks band reads only to
    /// refuse typos (`provides`, `contract`, `execution.lima`).
    fn check_keys(&mut self, at: &[Step<'_>], v: &Yaml) {
        let path = dotted(at);
        let Some(known) = known_keys(&path) else {
            return;
        };
        let Some(map) = self.mapping(at, v) else {
            return;
        };
        for (k, val) in map {
            let Some(key) = k.as_str() else {
                self.type_err(at, "a mapping with string keys", k);
                continue;
            };
            let mut inner = at.to_vec();
            inner.push(Step::Key(key));
            if known.contains(&key) {
                if known_keys(&dotted(&inner)).is_some() {
                    self.check_keys(&inner, val);
                }
            } else {
                self.unknown_key(&inner, key, known);
            }
        }
    }

    fn type_err(&mut self, at: &[Step<'_>], expected: &str, found: &Yaml) {
        let name = dotted(at);
        self.push(
            Code::WrongType,
            at,
            format!("`{name}` must be {expected}, found {}", kind(found)),
            None,
        );
    }

    /// A list of strings. A single string is refused with a hint (it is almost always a mistake).
    fn string_list(&mut self, at: &[Step<'_>], v: &Yaml) -> Vec<String> {
        match v {
            Yaml::Null => Vec::new(),
            Yaml::Sequence(items) => {
                let mut out = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    let mut path = at.to_vec();
                    path.push(Step::Index(i));
                    match item {
                        Yaml::String(s) => out.push(s.clone()),
                        // Unquoted numbers and booleans are almost always meant as text (`- 443`).
                        Yaml::Number(n) => out.push(n.to_string()),
                        other => self.type_err(&path, "a string", other),
                    }
                }
                out
            }
            Yaml::String(s) => {
                let name = dotted(at);
                self.push(
                    Code::WrongType,
                    at,
                    format!("`{name}` must be a list, found a single string"),
                    Some(format!(
                        "write it as a list: `{}: [\"{s}\"]`",
                        at.last().map(step_name).unwrap_or_default()
                    )),
                );
                Vec::new()
            }
            other => {
                self.type_err(at, "a list of strings", other);
                Vec::new()
            }
        }
    }

    fn rules(&mut self, column: &str, v: &Yaml) -> RuleSet {
        let mut set = RuleSet::default();
        let map = match v {
            Yaml::Null => return set,
            Yaml::Mapping(m) => m,
            other => {
                self.type_err(
                    &[Step::Key(column)],
                    "a mapping of cli/net/read/write lists",
                    other,
                );
                return set;
            }
        };
        for (k, val) in map {
            let Some(cat_name) = k.as_str() else {
                self.type_err(&[Step::Key(column)], "a mapping with string keys", k);
                continue;
            };
            let at = [Step::Key(column), Step::Key(cat_name)];
            let Some(cat) = Category::parse(cat_name) else {
                if IGNORED_RULE_KEYS.contains(&cat_name) {
                    self.warn(
                        Code::Ignored,
                        &at,
                        format!("`{column}.{cat_name}` is not enforced by band and is ignored"),
                        Some("band enforces cli, net, read and write".into()),
                    );
                } else {
                    let known: Vec<&str> =
                        RULE_KEYS.iter().chain(IGNORED_RULE_KEYS).copied().collect();
                    self.unknown_key(&at, cat_name, &known);
                }
                continue;
            };
            let items = self.string_list(&at, val);
            let mut seen = std::collections::BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                let item_at = [Step::Key(column), Step::Key(cat_name), Step::Index(i)];
                if let Err(e) = validate_pattern(cat, item) {
                    self.push(
                        Code::InvalidPattern,
                        &item_at,
                        format!("invalid {cat} pattern `{item}`: {}", e.message),
                        e.hint,
                    );
                    continue;
                }
                if column != "allow"
                    && cat == Category::Net
                    && crate::policy::net::NetPattern::parse(item).is_ok_and(|p| p.http().is_some())
                {
                    self.push(
                        Code::InvalidPattern,
                        &item_at,
                        format!("`{item}` is an HTTP rule; only `allow.net` takes methods and paths"),
                        Some(if column == "deny" {
                            "deny the host (`deny.net: [host]`), or narrow the paths `allow.net` admits".into()
                        } else {
                            "insist on the host; which requests may go there is `allow.net`'s to say".into()
                        }),
                    );
                    continue;
                }
                if column != "deny"
                    && cat == Category::Net
                    && let Some(problem) = loopback_problem(item)
                {
                    self.push(
                        Code::InvalidPattern,
                        &item_at,
                        problem,
                        Some(crate::policy::net::LOOPBACK_HINT.into()),
                    );
                    continue;
                }
                if !seen.insert(item.as_str()) {
                    self.push(
                        Code::DuplicateRule,
                        &item_at,
                        format!("`{item}` appears twice in `{column}.{cat}`"),
                        None,
                    );
                    continue;
                }
                set.get_mut(cat).push(item.clone());
            }
        }
        set
    }

    fn secret_names(&mut self, at: &[Step<'_>], v: &Yaml) -> Vec<String> {
        let names = self.string_list(at, v);
        let mut ok = Vec::new();
        for (i, name) in names.into_iter().enumerate() {
            let mut path = at.to_vec();
            path.push(Step::Index(i));
            if let Some(why) = secret_name_problem(&name) {
                self.push(
                    Code::InvalidSecretName,
                    &path,
                    format!("secret name `{name}` {why}"),
                    Some("use an environment variable name like `GITHUB_TOKEN`".into()),
                );
            } else if !ok.contains(&name) {
                ok.push(name);
            }
        }
        ok
    }

    /// `env.secrets`: each entry a name (`- GITHUB_TOKEN`: the value is in the run's
    /// environment) or a secret bound to hosts (`- {name: API_TOKEN, hosts: [api.example.com]}`:
    /// the run sees a placeholder, the value goes only into requests to those hosts).
    fn env_secrets(&mut self, v: &Yaml, band: &mut Band) {
        let at = [Step::Key("env"), Step::Key("secrets")];
        let Yaml::Sequence(items) = v else {
            band.secrets = self.secret_names(&at, v);
            return;
        };
        for (i, item) in items.iter().enumerate() {
            let item_at = [Step::Key("env"), Step::Key("secrets"), Step::Index(i)];
            let (name, hosts) = match item {
                Yaml::String(s) => (s.clone(), None),
                Yaml::Mapping(map) => match self.bound_secret(&item_at, map) {
                    Some((name, hosts)) => (name, Some(hosts)),
                    None => continue,
                },
                other => {
                    self.type_err(
                        &item_at,
                        "a secret name or a mapping `{name, hosts}`",
                        other,
                    );
                    continue;
                }
            };
            if let Some(why) = secret_name_problem(&name) {
                let mut name_at = item_at.to_vec();
                if hosts.is_some() {
                    name_at.push(Step::Key("name"));
                }
                self.push(
                    Code::InvalidSecretName,
                    &name_at,
                    format!("secret name `{name}` {why}"),
                    Some("use an environment variable name like `GITHUB_TOKEN`".into()),
                );
                continue;
            }
            if band.secrets.contains(&name) {
                self.push(
                    Code::DuplicateRule,
                    &item_at,
                    format!("`{name}` appears twice in `env.secrets`"),
                    Some(
                        "list each secret once; a bound secret's hosts go in its one entry".into(),
                    ),
                );
                continue;
            }
            band.secrets.push(name.clone());
            if let Some(hosts) = hosts {
                band.secret_hosts.insert(name, hosts);
            }
        }
    }

    /// One `{name, hosts}` entry of `env.secrets`: its name and its hosts, each an exact host
    /// name or `*.domain` (an address, `*` or a port would bind it to more than a named API).
    fn bound_secret(
        &mut self,
        at: &[Step<'_>],
        map: &yaml_serde::Mapping,
    ) -> Option<(String, Vec<String>)> {
        let mut name = None;
        let mut hosts = None;
        let mut ok = true;
        for (k, val) in map {
            let key = k.as_str();
            let mut key_at = at.to_vec();
            match key {
                Some("name") => {
                    key_at.push(Step::Key("name"));
                    match val {
                        Yaml::String(s) => name = Some(s.clone()),
                        other => {
                            self.type_err(&key_at, "a secret name", other);
                            ok = false;
                        }
                    }
                }
                Some("hosts") => {
                    key_at.push(Step::Key("hosts"));
                    let list = self.string_list(&key_at, val);
                    let mut good = Vec::new();
                    for (j, host) in list.iter().enumerate() {
                        let mut host_at = key_at.clone();
                        host_at.push(Step::Index(j));
                        match crate::policy::net::secret_host_problem(host) {
                            Some(e) => {
                                self.push(
                                    Code::InvalidPattern,
                                    &host_at,
                                    format!(
                                        "invalid host `{host}` for a bound secret: {}",
                                        e.message
                                    ),
                                    e.hint,
                                );
                                ok = false;
                            }
                            None if good.contains(host) => {}
                            None => good.push(host.clone()),
                        }
                    }
                    hosts = Some(good);
                }
                Some(other) => {
                    key_at.push(Step::Key(other));
                    self.unknown_key(&key_at, other, &["name", "hosts"]);
                    ok = false;
                }
                None => {
                    self.type_err(at, "a mapping with string keys", k);
                    ok = false;
                }
            }
        }
        let Some(name) = name else {
            self.push(
                Code::MissingField,
                at,
                "a bound secret needs a `name`".into(),
                Some("write `- {name: API_TOKEN, hosts: [api.example.com]}`".into()),
            );
            return None;
        };
        let hosts = match hosts {
            Some(h) if !h.is_empty() => h,
            _ if !ok => return None,
            _ => {
                self.push(
                    Code::MissingField,
                    at,
                    format!("bound secret `{name}` names no `hosts`"),
                    Some(format!(
                        "list the hosts `{name}` may be sent to (`hosts: [api.example.com]`), or write `- {name}` to pass it as a plain environment variable"
                    )),
                );
                return None;
            }
        };
        ok.then_some((name, hosts))
    }

    fn env(&mut self, v: &Yaml, band: &mut Band) {
        let Some(map) = self.mapping(&[Step::Key("env")], v) else {
            return;
        };
        for (k, val) in map {
            match k.as_str() {
                Some("secrets") => self.env_secrets(val, band),
                Some("variables") => self.warn(
                    Code::Ignored,
                    &[Step::Key("env"), Step::Key("variables")],
                    "`env.variables` is not supported and is ignored".into(),
                    Some("put fixed values in the band's config block; it reaches the script as $CONFIG_PATH".into()),
                ),
                Some(other) => self.unknown_key(&[Step::Key("env"), Step::Key(other)], other, &["secrets", "variables"]),
                None => self.type_err(&[Step::Key("env")], "a mapping with string keys", k),
            }
        }
    }

    fn requires(&mut self, v: &Yaml, band: &mut Band) {
        let Some(map) = self.mapping(&[Step::Key("requires")], v) else {
            return;
        };
        for (k, val) in map {
            match k.as_str() {
                Some("secrets") => {
                    band.required_secrets =
                        self.secret_names(&[Step::Key("requires"), Step::Key("secrets")], val);
                }
                Some("network") => {
                    let at = [Step::Key("requires"), Step::Key("network")];
                    if let Some(net) = self.mapping(&at, val) {
                        for (nk, nv) in net {
                            if nk.as_str() == Some("egress") {
                                band.requires_egress = self.string_list(
                                    &[
                                        Step::Key("requires"),
                                        Step::Key("network"),
                                        Step::Key("egress"),
                                    ],
                                    nv,
                                );
                            } else if let Some(key) = nk.as_str() {
                                self.unknown_key(
                                    &[Step::Key("requires"), Step::Key("network"), Step::Key(key)],
                                    key,
                                    &["egress"],
                                );
                            } else {
                                self.type_err(&at, "a mapping with string keys", nk);
                            }
                        }
                    }
                }
                Some(other) => self.unknown_key(
                    &[Step::Key("requires"), Step::Key(other)],
                    other,
                    &["secrets", "network"],
                ),
                None => self.type_err(&[Step::Key("requires")], "a mapping with string keys", k),
            }
        }
    }

    fn execution(&mut self, v: &Yaml, band: &mut Band) {
        let Some(map) = self.mapping(&[Step::Key("execution")], v) else {
            return;
        };
        for (k, val) in map {
            let key = k.as_str().unwrap_or("");
            let at = [Step::Key("execution"), Step::Key(key)];
            match key {
                "target" => match val.as_str().map(|s| (s, Target::parse(s))) {
                    Some((s, Ok(t))) => {
                        if s == UPSTREAM_UNSANDBOXED {
                            self.warn(
                                Code::TargetSubstituted,
                                &at,
                                format!(
                                    "`{s}` runs on the host target, inside band's sandbox: band \
                                     never runs a skill unsandboxed"
                                ),
                                Some("write `target: host` to say so".into()),
                            );
                        }
                        if t.is_remote() {
                            self.warn(
                                Code::RemoteTarget,
                                &at,
                                format!(
                                    "`{s}` is another machine: a band does not choose where \
                                     band sends the user's files, input and secrets, so a run \
                                     goes there only when its user does"
                                ),
                                Some(
                                    "the user runs it with --target, or maps it in [targets] \
                                     of the config (docs/vm.md); delete it to use the user's \
                                     target"
                                        .into(),
                                ),
                            );
                        }
                        band.target = Some(t);
                    }
                    Some((_, Err(e))) => {
                        let hint = match e {
                            TargetError::Unsupported(_) => format!(
                                "band runs on {TARGET_CHOICES}; change `execution.target`, or \
                                 delete it to use your config's target"
                            ),
                            _ => format!("use one of: {TARGET_CHOICES}"),
                        };
                        self.push(Code::InvalidTarget, &at, e.to_string(), Some(hint));
                    }
                    None => self.type_err(&at, "a string", val),
                },
                "lima" | "cloudflare" => {
                    self.warn(
                        Code::Ignored,
                        &at,
                        format!("`execution.{key}` is ignored"),
                        None,
                    );
                    self.check_keys(&at, val);
                }
                other => self.unknown_key(&at, other, &["target", "lima", "cloudflare"]),
            }
        }
    }

    fn limits(&mut self, v: &Yaml) -> Limits {
        let mut limits = Limits::default();
        let Some(map) = self.mapping(&[Step::Key("limit")], v) else {
            return limits;
        };
        for (k, val) in map {
            let key = k.as_str().unwrap_or("");
            let at = [Step::Key("limit"), Step::Key(key)];
            let Some(&(_, kind)) = LIMIT_FIELDS.iter().find(|(n, _)| *n == key) else {
                let known: Vec<&str> = LIMIT_FIELDS.iter().map(|(n, _)| *n).collect();
                self.unknown_key(&at, key, &known);
                continue;
            };
            let text = match val {
                Yaml::Number(n) => n.to_string(),
                Yaml::String(s) => s.clone(),
                other => {
                    self.push(Code::InvalidLimit, &at, format!("limit `{key}` must be a number or a string like `30s` or `512m`, found {}", kind_name(other)), None);
                    continue;
                }
            };
            let parsed: Result<f64, LimitValueError> = match kind {
                LimitKind::Bytes => parse_bytes(&text).map(|n| n as f64).map_err(Into::into),
                LimitKind::Millis => parse_duration_ms(&text)
                    .map(|n| n as f64)
                    .map_err(Into::into),
                LimitKind::Count => text
                    .trim()
                    .parse::<u64>()
                    .map(|n| n as f64)
                    .map_err(|_| LimitValueError::NotWhole(text.clone())),
                LimitKind::Cpus => text
                    .trim()
                    .parse::<f64>()
                    .map_err(|_| LimitValueError::NotCpus(text.clone())),
                LimitKind::Dollars => text
                    .trim()
                    .trim_start_matches('$')
                    .parse::<f64>()
                    .map_err(|_| LimitValueError::NotDollars(text.clone())),
            };
            let value = match parsed {
                Ok(x) => x,
                Err(e) => {
                    self.push(Code::InvalidLimit, &at, format!("limit `{key}`: {e}"), None);
                    continue;
                }
            };
            let range: (f64, f64, &str) = match (kind, key) {
                (LimitKind::Millis, _) => (1.0, 86_400_000.0, "between 1ms and 24h"),
                (LimitKind::Bytes, "maxMemoryBytes") => (
                    (4u64 << 20) as f64,
                    (1u64 << 40) as f64,
                    "between 4m and 1t",
                ),
                (LimitKind::Bytes, _) => (1.0, (1u64 << 40) as f64, "between 1 byte and 1t"),
                (LimitKind::Count, _) => (1.0, 4_194_304.0, "between 1 and 4194304"),
                (LimitKind::Cpus, _) => (0.01, 1024.0, "between 0.01 and 1024"),
                (LimitKind::Dollars, _) => (0.0, 1e9, "zero or more"),
            };
            if !(value >= range.0 && value <= range.1) {
                self.push(
                    Code::LimitOutOfRange,
                    &at,
                    format!(
                        "limit `{key}` = {text} is out of range: it must be {}",
                        range.2
                    ),
                    None,
                );
                continue;
            }
            match key {
                "maxRuntimeMs" => limits.max_runtime_ms = Some(value as u64),
                "maxInputBytes" => limits.max_input_bytes = Some(value as u64),
                "maxOutputBytes" => limits.max_output_bytes = Some(value as u64),
                "maxMemoryBytes" => limits.max_memory_bytes = Some(value as u64),
                "maxPids" => limits.max_pids = Some(value as u64),
                "maxCpus" => limits.max_cpus = Some(value),
                "maxDiskBytes" => limits.max_disk_bytes = Some(value as u64),
                "maxLogBytes" => limits.max_log_bytes = Some(value as u64),
                "maxCostDollars" => {
                    limits.max_cost_dollars = Some(value);
                    self.push(
                        Code::LimitNotEnforced,
                        &at,
                        "`maxCostDollars` is parsed but not enforced: band cannot see what an API call costs".into(),
                        Some("enforce spend in the API's own settings; keep this as documentation".into()),
                    );
                }
                _ => {}
            }
        }
        limits
    }

    fn mapping<'v>(&mut self, at: &[Step<'_>], v: &'v Yaml) -> Option<&'v yaml_serde::Mapping> {
        match v {
            Yaml::Mapping(m) => Some(m),
            Yaml::Null => None,
            other => {
                self.type_err(at, "a mapping", other);
                None
            }
        }
    }

    /// P009: `allow.cli` and `insist.cli` rules whose command is a shell builtin.
    fn builtin_checks(&mut self, band: &Band) {
        for (column, rules) in [("allow", &band.allow.cli), ("insist", &band.insist.cli)] {
            for (i, rule) in rules.iter().enumerate() {
                let Some(name) = rule.split_whitespace().next() else {
                    continue;
                };
                if !SHELL_BUILTINS.contains(&name) {
                    continue;
                }
                let program = BUILTINS_WITH_PROGRAM.contains(&name);
                let rest = rule[name.len()..].trim_start();
                let example = if rest.is_empty() {
                    name.to_string()
                } else {
                    format!("{name} {}", rest.replace('*', "…"))
                };
                let at = [Step::Key(column), Step::Key("cli"), Step::Index(i)];
                let (message, hint, error) = match (column, program) {
                    ("insist", true) => (
                        format!(
                            "`insist.cli` rule `{rule}` names `{name}`, a shell builtin: a script's `{name} …` runs inside the shell and never reaches band's CLI gate, so this insist fails unless the script runs the program `{name}` itself"
                        ),
                        format!(
                            "in the script, run the program, not the builtin: `env {example}` (or `/usr/bin/{name} …`); `command {name}` and `builtin {name}` still run the builtin"
                        ),
                        false,
                    ),
                    ("insist", false) => (
                        format!(
                            "`insist.cli` rule `{rule}` names `{name}`, a shell builtin with no program of that name: the shell runs it itself, never through band's CLI gate, so no run can satisfy this insist"
                        ),
                        "insist on a program the script runs (see docs/band-format.md, Shell builtins), or remove the rule".to_string(),
                        true,
                    ),
                    (_, true) => (
                        format!(
                            "`allow.cli` rule `{rule}` names `{name}`, a shell builtin: a script's `{name} …` runs inside the shell without this rule (it is not checked); the rule applies only when the program `{name}` is run (`env {name} …`, `/usr/bin/{name} …`)"
                        ),
                        format!(
                            "keep it only if the script runs the program; `{name}` is always available as a builtin"
                        ),
                        false,
                    ),
                    _ => (
                        format!(
                            "`allow.cli` rule `{rule}` names `{name}`, a shell builtin with no program of that name: the shell runs it itself, so this rule does nothing"
                        ),
                        "remove the rule; the builtin needs no permission".to_string(),
                        false,
                    ),
                };
                let mut d = Diagnostic::new(Code::ShellBuiltin, self.path, self.loc(&at), message)
                    .with_hint(hint);
                if error {
                    d = d.with_severity(crate::diag::Severity::Error);
                }
                self.diags.push(d);
            }
        }
    }

    /// Checks that need the whole file: secrets wiring and rule conflicts within the file.
    fn semantic_checks(&mut self, band: &Band) {
        self.builtin_checks(band);
        for (i, name) in band.required_secrets.iter().enumerate() {
            if !band.secrets.contains(name) {
                self.push(
                    Code::RequiredSecretNotDeclared,
                    &[Step::Key("requires"), Step::Key("secrets"), Step::Index(i)],
                    format!("`{name}` is required but not listed in `env.secrets`, so the script would never see it"),
                    Some(format!("add `{name}` to `env.secrets`")),
                );
            }
        }
        for (i, rule) in band.deny.cli.iter().enumerate() {
            let Ok(pattern) = crate::policy::cli::CliPattern::parse(rule) else {
                continue;
            };
            if let (Some(flags), Some(command)) = (pattern.unmodelled_flags(), pattern.command()) {
                self.warn(
                    Code::DenyFlagsUnmodelled,
                    &[Step::Key("deny"), Step::Key("cli"), Step::Index(i)],
                    format!(
                        "`deny.cli` rule `{rule}` names flags ({}) of `{command}`, which band has no option model for: it denies only these spellings (and short clusters such as `-ab`), not long or abbreviated names, `--opt=value` forms or other letters for the same option; and no deny pattern stops the same effect reached another way (`find -delete`, a script in another language, an allowed interpreter)",
                        flags.join(" ")
                    ),
                    Some(format!(
                        "prefer a narrow `allow.cli` pattern for `{command}` that states what may run; deny patterns on flags understand other spellings only for {}",
                        crate::policy::options::MODELS
                            .iter()
                            .map(|m| m.command)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                );
            }
        }
        let policy = crate::policy::Policy {
            deny: band.deny.clone(),
            ..Default::default()
        };
        let Ok(deny_only) = crate::policy::CompiledPolicy::compile(&policy) else {
            return;
        };
        for cat in Category::ALL {
            for (i, item) in band.insist.get(cat).iter().enumerate() {
                if let Some(rule) = denied_by(&deny_only, band, cat, item) {
                    self.push(
                        Code::DenyInsist,
                        &[Step::Key("insist"), Step::Key(cat.as_str()), Step::Index(i)],
                        format!("`{item}` is insisted on but also denied by `{rule}`, so no run could satisfy it"),
                        Some("remove it from `insist` or from `deny`".into()),
                    );
                }
            }
            for (i, item) in band.allow.get(cat).iter().enumerate() {
                if let Some(rule) = denied_by(&deny_only, band, cat, item) {
                    self.push(
                        Code::NeverMatches,
                        &[Step::Key("allow"), Step::Key(cat.as_str()), Step::Index(i)],
                        format!("`allow.{cat}` rule `{item}` can never take effect: `deny.{cat}` rule `{rule}` covers it"),
                        Some("remove one of the two rules".into()),
                    );
                }
            }
        }
    }
}

/// The builtins of sh (dash) and bash, which a shell runs itself: a `cli` rule never sees them.
pub const SHELL_BUILTINS: &[&str] = &[
    ".",
    ":",
    "[",
    "alias",
    "bg",
    "bind",
    "break",
    "builtin",
    "caller",
    "cd",
    "command",
    "compgen",
    "complete",
    "compopt",
    "continue",
    "declare",
    "dirs",
    "disown",
    "echo",
    "enable",
    "eval",
    "exec",
    "exit",
    "export",
    "false",
    "fc",
    "fg",
    "getopts",
    "hash",
    "help",
    "history",
    "jobs",
    "kill",
    "let",
    "local",
    "logout",
    "mapfile",
    "popd",
    "printf",
    "pushd",
    "pwd",
    "read",
    "readarray",
    "readonly",
    "return",
    "set",
    "shift",
    "shopt",
    "source",
    "suspend",
    "test",
    "times",
    "trap",
    "true",
    "type",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "wait",
];

/// The builtins that are also programs on a Linux host (coreutils, procps): run by path or
/// through `env`, they reach the CLI gate like any program.
pub const BUILTINS_WITH_PROGRAM: &[&str] = &[
    "[", "echo", "false", "kill", "printf", "pwd", "test", "true",
];

/// The deny rule that covers `item` (exactly, or by matching it as a concrete subject).
fn denied_by(
    deny: &crate::policy::CompiledPolicy,
    band: &Band,
    cat: Category,
    item: &str,
) -> Option<String> {
    if let Some(rule) = band.deny.get(cat).iter().find(|d| d.as_str() == item) {
        return Some(rule.clone());
    }
    if item.contains(['*', '?', '[', '{']) {
        return None;
    }
    let decision = match cat {
        Category::Cli => deny.cli.check(
            &item
                .split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>(),
        ),
        Category::Net => {
            let (host, port) = match item.rsplit_once(':') {
                Some((h, p)) if !h.contains(':') => (h, p.parse().ok()),
                _ => (item, None),
            };
            deny.net.check_host(host, port)
        }
        Category::Read => deny.read.check(item.trim_start_matches("./")),
        Category::Write => deny.write.check(item.trim_start_matches("./")),
    };
    match decision {
        crate::policy::Decision::Deny { rule } => Some(rule),
        _ => None,
    }
}

/// Why an `allow.net` or `insist.net` item is not a rule for the host's loopback band can keep:
/// `localhost`, `127.0.0.1` or `::1` without a port would open every service of the host, so a
/// loopback rule names one port (a deny rule needs none: denying more is always fine).
fn loopback_problem(item: &str) -> Option<String> {
    let p = crate::policy::net::NetPattern::parse(item).ok()?;
    (p.is_loopback() && p.port().is_none()).then(|| {
        format!("`{item}` names the host's loopback without a port; band opens one loopback port at a time, never all of them")
    })
}

/// Why a secret name is unacceptable, or None.
pub fn secret_name_problem(name: &str) -> Option<&'static str> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Some("is not an environment variable name");
    }
    if crate::proto::env::RESERVED.contains(&name) {
        return Some("is reserved by band");
    }
    if crate::proto::env::RESERVED_PREFIXES
        .iter()
        .any(|p| name.starts_with(p))
    {
        return Some("uses a prefix band reserves (BAND_, LD_)");
    }
    None
}

/// Lowercase letters, digits and single hyphens, starting with a letter, at most 64 characters.
pub fn is_kebab(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.starts_with(|c: char| c.is_ascii_lowercase())
        && !s.ends_with('-')
        && !s.contains("--")
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// A best-effort kebab-case version of `s`, for hints.
pub fn to_kebab(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_uppercase() && !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let out = out.trim_matches('-').to_string();
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        format!("x-{out}")
    } else {
        out
    }
}

fn dotted(at: &[Step<'_>]) -> String {
    let mut s = String::new();
    for step in at {
        match step {
            Step::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Step::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

fn step_name(step: &Step<'_>) -> String {
    match step {
        Step::Key(k) => (*k).to_string(),
        Step::Index(i) => i.to_string(),
    }
}

fn kind_name(v: &Yaml) -> &'static str {
    match v {
        Yaml::Null => "nothing",
        Yaml::Bool(_) => "a boolean",
        Yaml::Number(_) => "a number",
        Yaml::String(_) => "a string",
        Yaml::Sequence(_) => "a list",
        Yaml::Mapping(_) => "a mapping",
        Yaml::Tagged(_) => "a tagged value",
    }
}

fn kind(v: &Yaml) -> String {
    match v {
        Yaml::Null | Yaml::Sequence(_) | Yaml::Mapping(_) | Yaml::Tagged(_) => {
            kind_name(v).to_string()
        }
        other => format!("{} `{}`", kind_name(other), show(other)),
    }
}

fn show(v: &Yaml) -> String {
    match v {
        Yaml::String(s) => s.clone(),
        Yaml::Number(n) => n.to_string(),
        Yaml::Bool(b) => b.to_string(),
        other => kind_name(other).to_string(),
    }
}

#[cfg(test)]
mod tests;
