//! The policy model: what a run may do, as data.
//!
//! A band file declares `allow`, `deny` and `insist` rule lists for four categories (`cli`, `net`,
//! `read`, `write`), plus limits and secrets. [`Policy`] is that declaration after composition
//! (see [`compose`]); it is plain serialisable data and is what travels to band-server.
//! [`CompiledPolicy`] turns it into matchers, one per category:
//!
//! - [`net`]: hosts, wildcards (`*.x` = any subdomain at any depth, not the apex), ports, IP/CIDR.
//! - [`cli`]: argv matched token by token, with short-flag clusters expanded.
//! - [`fs`]: globset globs, relative to the workspace or absolute on the execution host.
//!
//! Precedence, for every category: deny > insist > allow > default deny.

pub mod cli;
pub mod compose;
pub mod fs;
pub mod http;
pub mod net;
pub mod options;
pub mod place;
pub mod site;
pub mod spell;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The four rule categories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    Cli,
    Net,
    Read,
    Write,
}

impl Category {
    pub const ALL: [Category; 4] = [
        Category::Read,
        Category::Write,
        Category::Cli,
        Category::Net,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Category::Cli => "cli",
            Category::Net => "net",
            Category::Read => "read",
            Category::Write => "write",
        }
    }

    pub fn parse(s: &str) -> Option<Category> {
        match s {
            "cli" => Some(Category::Cli),
            "net" => Some(Category::Net),
            "read" => Some(Category::Read),
            "write" => Some(Category::Write),
            _ => None,
        }
    }
}

impl std::fmt::Display for Category {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One column (`allow`, `deny` or `insist`): a list of patterns per category.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RuleSet {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cli: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub net: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub write: Vec<String>,
}

impl RuleSet {
    pub fn get(&self, cat: Category) -> &Vec<String> {
        match cat {
            Category::Cli => &self.cli,
            Category::Net => &self.net,
            Category::Read => &self.read,
            Category::Write => &self.write,
        }
    }

    pub fn get_mut(&mut self, cat: Category) -> &mut Vec<String> {
        match cat {
            Category::Cli => &mut self.cli,
            Category::Net => &mut self.net,
            Category::Read => &mut self.read,
            Category::Write => &mut self.write,
        }
    }

    pub fn is_empty(&self) -> bool {
        Category::ALL.iter().all(|c| self.get(*c).is_empty())
    }
}

/// Resource limits as declared. `None` means "the platform default"; band-server applies
/// defaults and platform caps (a band can lower a cap, never raise it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Limits {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_runtime_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_input_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_memory_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_pids: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cpus: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_disk_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_log_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cost_dollars: Option<f64>,
}

fn min_opt<T: PartialOrd + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if y < x { y } else { x }),
        (x, None) => x,
        (None, y) => y,
    }
}

impl Limits {
    /// The tighter of two limit sets, field by field (composition never loosens a limit).
    pub fn narrow(&self, other: &Limits) -> Limits {
        Limits {
            max_runtime_ms: min_opt(self.max_runtime_ms, other.max_runtime_ms),
            max_input_bytes: min_opt(self.max_input_bytes, other.max_input_bytes),
            max_output_bytes: min_opt(self.max_output_bytes, other.max_output_bytes),
            max_memory_bytes: min_opt(self.max_memory_bytes, other.max_memory_bytes),
            max_pids: min_opt(self.max_pids, other.max_pids),
            max_cpus: min_opt(self.max_cpus, other.max_cpus),
            max_disk_bytes: min_opt(self.max_disk_bytes, other.max_disk_bytes),
            max_log_bytes: min_opt(self.max_log_bytes, other.max_log_bytes),
            max_cost_dollars: min_opt(self.max_cost_dollars, other.max_cost_dollars),
        }
    }
}

/// The effective policy of one script: what crosses the wire to band-server.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Policy {
    pub allow: RuleSet,
    pub deny: RuleSet,
    pub insist: RuleSet,
    pub limits: Limits,
    /// Names of host environment variables passed to the script (`env.secrets`).
    pub secrets: Vec<String>,
    /// Names that must be present on the host, or the run does not start (`requires.secrets`).
    pub required_secrets: Vec<String>,
    /// The secrets of `secrets` bound to hosts (`env.secrets: [{name, hosts}]`): the run sees a
    /// per-run placeholder, and band-server's egress proxy puts the value into request headers
    /// toward these hosts only. Empty for a band without bound secrets (and then not sent, so
    /// the policy's fingerprint of such a band is what it was before bound secrets existed).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub secret_hosts: BTreeMap<String, Vec<String>>,
}

/// A malformed pattern. `message` says what is wrong; `hint` how to write it instead.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{message}")]
pub struct PatternError {
    pub message: String,
    pub hint: Option<String>,
}

impl PatternError {
    pub fn new(message: impl Into<String>) -> Self {
        PatternError {
            message: message.into(),
            hint: None,
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

/// Check one pattern's syntax for its category.
pub fn validate_pattern(cat: Category, text: &str) -> Result<(), PatternError> {
    match cat {
        Category::Cli => cli::CliPattern::parse(text).map(|_| ()),
        Category::Net => net::NetPattern::parse(text).map(|_| ()),
        Category::Read | Category::Write => fs::FsPattern::parse(text).map(|_| ()),
    }
}

/// The list of a matcher's two a pattern is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleList {
    Allow,
    Deny,
}

impl RuleList {
    /// The list's column in a band (`allow`, `deny`).
    pub fn column(self) -> &'static str {
        match self {
            RuleList::Allow => "allow",
            RuleList::Deny => "deny",
        }
    }
}

impl std::fmt::Display for RuleList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.column())
    }
}

/// A malformed pattern in a matcher's rule lists: which list, its index there, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{list}[{index}]: {error}")]
pub struct RuleListError {
    pub list: RuleList,
    pub index: usize,
    pub error: PatternError,
}

/// Parse an allow and a deny list with one category's parser.
pub(crate) fn parse_rule_lists<P>(
    allow: &[String],
    deny: &[String],
    parse: impl Fn(&str) -> Result<P, PatternError>,
) -> Result<(Vec<P>, Vec<P>), RuleListError> {
    let parse_list = |items: &[String], list: RuleList| {
        items
            .iter()
            .enumerate()
            .map(|(index, s)| parse(s).map_err(|error| RuleListError { list, index, error }))
            .collect::<Result<Vec<P>, _>>()
    };
    Ok((
        parse_list(allow, RuleList::Allow)?,
        parse_list(deny, RuleList::Deny)?,
    ))
}

/// Turn a matcher's [`RuleListError`] into an error naming the column, the category and the
/// pattern.
fn located_error<'a>(
    category: Category,
    allow: &'a [String],
    deny: &'a [String],
) -> impl FnOnce(RuleListError) -> CompileError + 'a {
    move |RuleListError { list, index, error }| CompileError {
        column: list.column(),
        category,
        index,
        pattern: match list {
            RuleList::Allow => &allow[index],
            RuleList::Deny => &deny[index],
        }
        .clone(),
        error,
    }
}

/// Which rule decided, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "lowercase")]
pub enum Decision {
    /// Allowed by this allow (or insist) rule.
    Allow { rule: String },
    /// Denied by this deny rule.
    Deny { rule: String },
    /// No rule matched: denied by default.
    Default,
}

impl Decision {
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allow { .. })
    }
}

/// A malformed pattern found while compiling a policy.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{column}.{category}[{index}] `{pattern}`: {error}")]
pub struct CompileError {
    pub column: &'static str,
    pub category: Category,
    pub index: usize,
    pub pattern: String,
    pub error: PatternError,
}

/// A [`Policy`] with every pattern parsed, ready to answer "may the run do X?".
#[derive(Debug, Clone)]
pub struct CompiledPolicy {
    pub cli: cli::CliMatcher,
    pub net: net::NetMatcher,
    pub read: fs::FsMatcher,
    pub write: fs::FsMatcher,
}

impl CompiledPolicy {
    /// Compile every pattern of `policy`. Insist items count as allowed (deny > insist > allow).
    pub fn compile(policy: &Policy) -> Result<CompiledPolicy, CompileError> {
        let lists = |cat: Category| -> (Vec<String>, Vec<String>) {
            let mut allow = policy.allow.get(cat).clone();
            for item in policy.insist.get(cat) {
                if !allow.contains(item) {
                    allow.push(item.clone());
                }
            }
            (allow, policy.deny.get(cat).clone())
        };
        let (a, d) = lists(Category::Cli);
        let cli = cli::CliMatcher::new(&a, &d).map_err(located_error(Category::Cli, &a, &d))?;
        let (a, d) = lists(Category::Net);
        let net = net::NetMatcher::new(&a, &d).map_err(located_error(Category::Net, &a, &d))?;
        let (a, d) = lists(Category::Read);
        let read = fs::FsMatcher::new(&a, &d).map_err(located_error(Category::Read, &a, &d))?;
        let (a, d) = lists(Category::Write);
        let write = fs::FsMatcher::new(&a, &d).map_err(located_error(Category::Write, &a, &d))?;
        Ok(CompiledPolicy {
            cli,
            net,
            read,
            write,
        })
    }
}
