//! `band learn`: from what observed runs did to the narrowest band, and its diff against the
//! current one. Pure: observations in, rules with evidence out ([`draft`]), then a diff
//! ([`diff`]) and the band file rewritten in place ([`edit`]).
//!
//! How far each kind of rule is generalised:
//!
//! - **Commands.** By literal skeleton (command, subcommand words, flags); a value that differed
//!   across the observed runs, came from a run's data or took many values becomes a one-word
//!   pattern, the rest stays exact, never a bare `*` nor a command alone with `*` (`cli`).
//! - **Paths.** Exactly the files seen, anchored (`./notes.txt`, `data/in.csv`, `/srv/in.csv`); two
//!   or more files in the same directory below the workspace root become `dir/**`. A folder below
//!   the workspace root the run listed (`ls`, a glob, `os.walk`) becomes `dir/**` for reads, so a
//!   script that walks it reads the files the next input adds; the root listed is a note, never
//!   `**`. A file read and written needs only the write rule. Never drafted, each a note (issue
//!   36): a name with a glob character, a write outside the workspace, a read under
//!   [`NEVER_DRAFTED`] or a home.
//! - **Hosts.** `host:port` for each destination reached (the name the stub resolved to it, else
//!   the address); a name looked up but never contacted is drafted by name alone when no contact
//!   could be tried (without `--net`), and is a note when one could ([`Observations::net_lookups`]).
//!   Only a literal host or address ([`literal_net_rule`]): `*` or `*.com` asked for is a note.
//! - **Secrets.** The names the caller reports as read.

mod cli;
pub mod edit;
pub mod http;
pub mod observe;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::policy::fs::FsPattern;
use crate::policy::net::NetPattern;
use crate::policy::spell::literal_net_rule;
use crate::policy::{Category, RuleSet};
#[cfg(test)]
use crate::policy::{
    cli::CliPattern,
    spell::{command_of, exact_cli_rule},
};

/// What one or more observed runs did. Order is kept for evidence; duplicates are fine.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Observations {
    /// Every command call: argv\[0\] the command name, or `./path` for a program of the skill.
    pub execs: Vec<Vec<String>>,
    /// Files read: workspace-relative (`data/in.csv`) or absolute (`/etc/hosts`).
    pub reads: Vec<String>,
    /// Files written, the same way.
    pub writes: Vec<String>,
    /// Workspace folders the runs listed (read the entries of), workspace-relative, `.` the
    /// root ([`crate::proto::Observed::listed`]).
    pub listed: Vec<String>,
    /// DNS names looked up.
    pub lookups: Vec<String>,
    /// Destinations contacted.
    pub connects: Vec<Connect>,
    /// Environment secrets the runs read.
    pub secrets: Vec<String>,
    /// Absolute paths among `reads`/`writes` the sandbox did not show: the run tried them and
    /// found nothing (evidence that the band must allow them).
    pub hidden: Vec<String>,
    /// What the observations cannot become rules for, and why.
    pub notes: Vec<String>,
    /// How many runs these are (`--merge` adds them up); 0 in a file of an older band: one.
    pub runs: u32,
    /// The run (from 0) of each call of `execs`, in order; a call without one is of run 0.
    pub exec_runs: Vec<u32>,
    /// Arguments of `execs` that came, whole, from a run's data: a value of its input document
    /// or the path of a workspace file ([`observe::data_values`]). A call's argument found here
    /// is drafted as a pattern.
    pub data: Vec<String>,
    /// Names looked up in a run that could contact any public host (`--net`): one of these
    /// never contacted is not drafted.
    pub net_lookups: Vec<String>,
    /// The HTTP requests the egress proxy passed on (`--net`): their hosts are drafted as HTTP
    /// rules ([`http::draft_http`]), not host rules.
    pub http: Vec<crate::proto::HttpSeen>,
}

/// A destination contacted: the host (a name the stub resolved to it, else the address) and port.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Connect {
    pub host: String,
    pub port: u16,
}

impl Observations {
    /// Add another run's observations (`band learn --merge`).
    pub fn merge(&mut self, other: Observations) {
        // Nothing yet (`Observations::default()`): the other's runs are the first.
        let base = if self.runs == 0 && self.is_empty() {
            0
        } else {
            self.run_count()
        };
        self.exec_runs.resize(self.execs.len(), 0);
        self.exec_runs.extend(
            (0..other.execs.len()).map(|i| base + other.exec_runs.get(i).copied().unwrap_or(0)),
        );
        self.runs = base + other.run_count();
        for v in other.data {
            if !self.data.contains(&v) {
                self.data.push(v);
            }
        }
        self.net_lookups.extend(other.net_lookups);
        self.http.extend(other.http);
        self.execs.extend(other.execs);
        self.reads.extend(other.reads);
        self.writes.extend(other.writes);
        self.listed.extend(other.listed);
        self.lookups.extend(other.lookups);
        self.connects.extend(other.connects);
        self.secrets.extend(other.secrets);
        self.hidden.extend(other.hidden);
        self.notes.extend(other.notes);
    }

    /// How many runs these are: at least one.
    pub fn run_count(&self) -> u32 {
        self.runs.max(1)
    }

    pub fn is_empty(&self) -> bool {
        self.execs.is_empty()
            && self.reads.is_empty()
            && self.writes.is_empty()
            && self.listed.is_empty()
            && self.lookups.is_empty()
            && self.connects.is_empty()
            && self.secrets.is_empty()
    }
}

/// One drafted rule and the line of evidence behind it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    pub rule: String,
    pub evidence: String,
}

/// How a script is started, for [`Draft::keep_entry_start`]: the start needs a rule that admits
/// it with any arguments (the agent's, which differ each run), as `band wrap` writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryStart {
    /// band-server starts it with an interpreter that needs a rule (no execute bit: by its `#!`
    /// line, its extension, as a module), outside the CLI gate: no observed call shows it.
    Interpreter(InterpreterStart),
    /// The kernel starts it through its `#!` line (an executable script): the interpreter's call
    /// (`python3 /skill/scripts/x.py plan.json`) goes through the CLI gate, and is observed with
    /// one run's arguments.
    Kernel {
        /// The script as the sandbox names it, the interpreter's first operand
        /// (`/skill/scripts/x.py`).
        path: String,
        /// The rule `band wrap` writes for its `#!` line (`python3 /skill/scripts/x.py *`), when
        /// it has one naming an interpreter that needs a rule ([`EntryStart::with_shebang`]):
        /// drafted when no call of the interpreter is observed and the band has no start.
        shebang_rule: Option<String>,
    },
}

/// How band-server starts a script with an interpreter ([`EntryStart::Interpreter`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterpreterStart {
    /// The interpreter, as a rule names it (`python3`).
    pub program: String,
    /// What told band (`by its #! line`).
    pub how: String,
    /// The start with no argument of the script's (`python3 /skill/scripts/x.py`).
    pub argv: Vec<String>,
    /// The rule `band wrap` writes for it (`python3 /skill/scripts/x.py *`).
    pub rule: String,
}

impl EntryStart {
    /// The start of `entry` (relative to the skill): by band-server, when with an interpreter
    /// that needs a rule; by the kernel, when the entry is exec'd as it is (its `#!` line, if it
    /// has one, names the interpreter whose call the run shows).
    pub fn of(entry: &std::path::Path, launch: &crate::launch::Launch) -> Option<EntryStart> {
        let i = match launch {
            crate::launch::Launch::With(i) => i,
            crate::launch::Launch::AsIs => {
                return Some(EntryStart::Kernel {
                    path: format!("/skill/{}", entry.to_string_lossy()),
                    shebang_rule: None,
                });
            }
            crate::launch::Launch::Unknown => return None,
        };
        if !i.needs_rule() {
            return None;
        }
        let rule = i.start_rule(entry);
        let argv = rule
            .strip_suffix(" *")
            .unwrap_or(&rule)
            .split(' ')
            .map(str::to_string)
            .collect();
        Some(EntryStart::Interpreter(InterpreterStart {
            program: i.name.clone(),
            how: i.by.as_str().to_string(),
            argv,
            rule,
        }))
    }
}

impl EntryStart {
    /// A kernel start's [`EntryStart::Kernel::shebang_rule`], from the entry's `head` (its first
    /// line is enough): `#!/usr/bin/python3 -u` → `python3 -u /skill/scripts/x.py *`. An
    /// interpreter every band gets (`sh`, `bash`) needs none.
    pub fn with_shebang(self, entry: &std::path::Path, head: &[u8]) -> EntryStart {
        match self {
            EntryStart::Kernel { path, .. } => {
                let shebang_rule = crate::launch::shebang(head)
                    .filter(|(name, _)| !crate::policy::cli::ESSENTIALS.contains(&name.as_str()))
                    .map(|(name, arg)| {
                        crate::launch::start_rule(
                            &entry.to_string_lossy(),
                            &name,
                            arg.as_deref(),
                            None,
                        )
                    });
                EntryStart::Kernel { path, shebang_rule }
            }
            other => other,
        }
    }
}

/// A rule for a call of a script's interpreter with the script as first operand: the kernel's
/// start of an executable script ([`kernel_start`]).
#[derive(Debug, Clone, PartialEq, Eq)]
struct KernelStart {
    /// The interpreter (`python3`).
    program: String,
    /// The start as `band wrap` writes it: `python3 /skill/scripts/x.py *`, with the `#!` line's
    /// argument (`node --no-warnings /skill/scripts/x.mjs *`).
    wrapped: String,
    /// Whether the rule has words after the script (the run's arguments).
    args: bool,
}

/// The kernel's start of the script at `path`, when `rule` is one (`python3 /skill/scripts/x.py
/// [A-Za-z0-9]*`, `node --no-warnings /skill/scripts/x.mjs --fast`, `python3
/// /skill/scripts/x.py`).
fn kernel_start(rule: &str, path: &str) -> Option<KernelStart> {
    let token = crate::policy::spell::token_for(path)?;
    let words: Vec<&str> = rule.split(' ').collect();
    let program = *words.first()?;
    // An interpreter by name: not the script itself (`./scripts/x`), nor a quoted word.
    if !program.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return None;
    }
    // Its `#!` argument, if any (`-u`, `--no-warnings`), then the script: not the value of an
    // option that takes one (`node -e CODE`, `node --require FILE`).
    let at = words[1..].iter().position(|w| !w.starts_with('-'))? + 1;
    let value = VALUE_OPTIONS.contains(&words[at - 1]);
    (words[at] == token && !value).then(|| KernelStart {
        program: program.to_string(),
        wrapped: format!("{} *", words[..=at].join(" ")),
        args: words.len() > at + 1,
    })
}

/// Interpreters' options whose value is the next word (`python3 -c CODE`, `node -r FILE`,
/// `perl -I DIR`): a path after one is that value, not the script the interpreter runs.
const VALUE_OPTIONS: &[&str] = &[
    "-c",
    "-e",
    "-m",
    "-p",
    "-r",
    "--eval",
    "--print",
    "--require",
    "--import",
    "--loader",
    "--experimental-loader",
    "--env-file",
];

/// The narrowest band the observations need: `allow` rules per category, and `env.secrets`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Draft {
    pub cli: Vec<Rule>,
    pub read: Vec<Rule>,
    pub write: Vec<Rule>,
    pub net: Vec<Rule>,
    pub secrets: Vec<Rule>,
    /// What could not become a rule, and why.
    pub notes: Vec<String>,
}

impl Draft {
    pub fn rules(&self, cat: Category) -> &[Rule] {
        match cat {
            Category::Cli => &self.cli,
            Category::Net => &self.net,
            Category::Read => &self.read,
            Category::Write => &self.write,
        }
    }

    /// The drafted `allow` column.
    pub fn allow(&self) -> RuleSet {
        let texts = |v: &[Rule]| v.iter().map(|r| r.rule.clone()).collect();
        RuleSet {
            cli: texts(&self.cli),
            net: texts(&self.net),
            read: texts(&self.read),
            write: texts(&self.write),
        }
    }

    pub fn secret_names(&self) -> Vec<String> {
        self.secrets.iter().map(|r| r.rule.clone()).collect()
    }

    /// Drop each `allow.read` and `allow.write` rule another rule of the same list covers (a
    /// drafted `./action-schema.json` beside the kept `action-schema.json`, a bare name that
    /// matches at any depth): one file, one rule. Of two that cover each other the first stays.
    pub fn drop_covered_paths(&mut self) {
        for list in [&mut self.read, &mut self.write] {
            let parsed: Vec<Option<FsPattern>> = list
                .iter()
                .map(|r| FsPattern::parse(&r.rule).ok())
                .collect();
            let covered = |i: usize| {
                let Some(p) = &parsed[i] else { return false };
                parsed.iter().enumerate().any(|(j, o)| {
                    j != i
                        && o.as_ref()
                            .is_some_and(|o| o.covers(p) && (!p.covers(o) || j < i))
                })
            };
            let drop: Vec<bool> = (0..list.len()).map(covered).collect();
            *list = std::mem::take(list)
                .into_iter()
                .zip(drop)
                .filter_map(|(r, drop)| (!drop).then_some(r))
                .collect();
        }
    }

    /// Keep each concrete `allow.read` rule of the current band that the draft neither has nor
    /// covers, when a script of the skill names its path (`scripts`: each file's name and
    /// text): a test of a file's existence (`[ -e LICENSE ]`, `stat`, `access`) opens nothing,
    /// so the observer does not see it, and without the rule the script would find the file
    /// missing and go on.
    pub fn keep_named_reads(&mut self, current: &RuleSet, scripts: &[(String, String)]) {
        for rule in &current.read {
            let Ok(pattern) = FsPattern::parse(rule) else {
                continue;
            };
            let covered = self.read.iter().any(|r| {
                r.rule == *rule || FsPattern::parse(&r.rule).is_ok_and(|d| d.covers(&pattern))
            });
            // A path without glob characters, anchored (`./x`, `a/b`) or a bare name (`LICENSE`).
            let glob = rule.contains(['*', '?', '[', '{']);
            if covered || glob {
                continue;
            }
            let path = pattern.normalized().trim_start_matches("./");
            if let Some((file, _)) = scripts.iter().find(|(_, text)| names_path(text, path)) {
                // The run read it too (`./x` drafted for the band's `x`): the band's spelling,
                // with what the run did as its evidence.
                if let Some(read) = self.read.iter_mut().find(|r| {
                    FsPattern::parse(&r.rule).is_ok_and(|d| {
                        d.is_concrete() && d.normalized().trim_start_matches("./") == path
                    })
                }) {
                    read.rule = rule.clone();
                    continue;
                }
                self.read.push(Rule {
                    rule: rule.clone(),
                    evidence: format!(
                        "kept: {file} names it, and a test of a file's existence (`[ -e ]`, `stat`) is not observed"
                    ),
                });
            }
        }
    }

    /// Keep the rule that starts the script, as `band wrap` writes it (`python3
    /// /skill/scripts/x.py *`), or the band's own rule that admits that start (as its author
    /// spelled it): never one run's arguments, which are the agent's and differ each run.
    ///
    /// - An entry with no execute bit is started with its interpreter (`crate::launch`) by
    ///   band-server itself, not through the CLI gate, so no observed call shows that start, and
    ///   a draft without a rule for it is a band whose every run fails at setup.
    /// - An executable script is started by the kernel through its `#!` line: the call of its
    ///   interpreter with the script as first operand goes through the CLI gate, and the observed
    ///   run shows it with that run's arguments, which the draft would make a rule of (`python3
    ///   /skill/scripts/x.py [A-Za-z0-9]*`); each such rule becomes the start's. With no such
    ///   call (an interpreter the `#!` line names by its path is exec'd without one the gate
    ///   records), the band's own rules that start the script are kept. (An interpreter every
    ///   band gets, `bash` or `sh`, needs no rule.)
    pub fn keep_entry_start(&mut self, current: &RuleSet, start: &EntryStart) {
        match start {
            EntryStart::Interpreter(start) => self.keep_interpreter_start(current, start),
            EntryStart::Kernel { path, shebang_rule } => {
                self.keep_kernel_start(current, path, shebang_rule.as_deref());
            }
        }
    }

    fn keep_interpreter_start(&mut self, current: &RuleSet, start: &InterpreterStart) {
        if self.cli.iter().any(|r| admits_start(&r.rule, &start.rule)) {
            return;
        }
        let why = format!(
            "band-server starts the script with {} ({}), which no observed call shows",
            start.program, start.how
        );
        let own = current.cli.iter().find(|r| admits_start(r, &start.rule));
        self.cli.push(match own {
            Some(rule) => Rule {
                rule: rule.clone(),
                evidence: format!("kept: {why}"),
            },
            None => Rule {
                rule: start.rule.clone(),
                evidence: why,
            },
        });
    }

    fn keep_kernel_start(&mut self, current: &RuleSet, path: &str, shebang_rule: Option<&str>) {
        // The band's own rules that start the script, as its author spelled them.
        let own: Vec<(&String, KernelStart)> = current
            .cli
            .iter()
            .filter_map(|r| Some((r, kernel_start(r, path)?)))
            .collect();
        // The drafted starts: with the run's arguments, as wrap writes it (the agent's arguments
        // differ each run); without any (a script whose input is a document, not its argv), as
        // observed.
        let mut at = None;
        let mut starts: Vec<(String, String)> = Vec::new();
        let mut i = 0;
        while i < self.cli.len() {
            let Some(k) = kernel_start(&self.cli[i].rule, path) else {
                i += 1;
                continue;
            };
            let r = self.cli.remove(i);
            at.get_or_insert(i);
            let rule = if k.args { k.wrapped } else { r.rule };
            if !starts.iter().any(|(s, _)| *s == rule) {
                starts.push((rule, k.program));
            }
        }
        let observed = at.is_some();
        if !observed {
            // No call of the interpreter observed (a `#!` line naming it by its path,
            // `#!/usr/bin/python3`, is exec'd by the kernel with no call the gate records): the
            // band's own starts, but an essential's (`sh`), which needs no rule.
            for (r, k) in &own {
                if !crate::policy::cli::ESSENTIALS.contains(&k.program.as_str()) {
                    starts.push(((*r).clone(), k.program.clone()));
                }
            }
            // None: the start its `#!` line needs, as wrap writes it.
            if starts.is_empty()
                && let Some(k) = shebang_rule.and_then(|r| kernel_start(r, path))
            {
                starts.push((k.wrapped, k.program));
            }
        }
        // A start another one admits (the call without arguments, and one with) is that one's.
        let all = starts.clone();
        starts.retain(|(s, _)| {
            !all.iter()
                .any(|(o, _)| o != s && admits_start(o, s) && !admits_start(s, o))
        });
        let mut at = at.unwrap_or(self.cli.len());
        for (rule, program) in starts {
            let why = if observed {
                format!(
                    "the kernel starts the script with {program} (by its #! line) and the \
                     agent's arguments, which differ each run: one run's cannot stand for the \
                     next's"
                )
            } else {
                format!(
                    "the kernel starts the script with {program} (by its #! line), which no \
                     observed call shows"
                )
            };
            let kept = match own
                .iter()
                .find(|(r, _)| **r == rule || admits_start(r, &rule))
            {
                Some((r, _)) => Rule {
                    rule: (*r).clone(),
                    evidence: format!("kept: {why}"),
                },
                None => Rule {
                    rule,
                    evidence: why,
                },
            };
            if !self.cli.iter().any(|r| r.rule == kept.rule) {
                self.cli.insert(at, kept);
                at += 1;
            }
        }
    }

    /// Keep every rule and secret of the current band the draft does not have, with `why` as
    /// its evidence: a band that also governs other scripts than the observed one may need them
    /// for those, which one script's runs cannot show.
    pub fn keep(&mut self, current: &RuleSet, secrets: &[String], why: &str) {
        let keep = |list: &mut Vec<Rule>, current: &[String]| {
            for c in current {
                if !list.iter().any(|r| &r.rule == c) {
                    list.push(Rule {
                        rule: c.clone(),
                        evidence: why.to_string(),
                    });
                }
            }
        };
        keep(&mut self.cli, &current.cli);
        keep(&mut self.read, &current.read);
        keep(&mut self.write, &current.write);
        keep(&mut self.net, &current.net);
        keep(&mut self.secrets, secrets);
    }
}

/// Whether the `allow.cli` rule `rule` admits every call the start rule `start` does (`python3 *`
/// or `python3 /skill/scripts/x.py *` for `python3 /skill/scripts/x.py *`).
fn admits_start(rule: &str, start: &str) -> bool {
    use crate::policy::cli::CliPattern;
    match (CliPattern::parse(rule), CliPattern::parse(start)) {
        (Ok(r), Ok(s)) => r.as_str() == s.as_str() || r.covers(&s),
        _ => false,
    }
}

/// Whether `text` names `path` as a word of its own: not inside a longer name (`LICENSE` in
/// `LICENSES`, `a.md` in `data.md`); a folder before it (`$ROOT/LICENSE`) is allowed.
fn names_path(text: &str, path: &str) -> bool {
    let part = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    !path.is_empty()
        && text.match_indices(path).any(|(at, _)| {
            let before = text[..at].chars().next_back();
            let after = text[at + path.len()..].chars().next();
            !before.is_some_and(part) && !after.is_some_and(|c| part(c) || c == '/')
        })
}

/// Draft the narrowest band for `obs` (see the module documentation), with this host's home
/// folders ([`host_homes`]) never drafted.
pub fn draft(obs: &Observations) -> Draft {
    draft_with(obs, &host_homes())
}

/// [`draft`], with `homes` the home folders of the host's users (no path below one is drafted).
pub fn draft_with(obs: &Observations, homes: &[String]) -> Draft {
    let mut d = Draft::default();
    cli::draft_cli(&obs.execs, &obs.exec_runs, &obs.data, &mut d);
    draft_paths(obs, homes, &mut d);
    for n in &obs.notes {
        if !d.notes.contains(n) {
            d.notes.push(n.clone());
        }
    }
    draft_net(obs, &mut d);
    let secrets: BTreeSet<&String> = obs.secrets.iter().collect();
    d.secrets = secrets
        .into_iter()
        .map(|s| Rule {
            rule: s.clone(),
            evidence: format!("${s} was read"),
        })
        .collect();
    d
}

pub(crate) fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// A path as matched: no `.` or empty components; `None` with a `..`, a NUL or nothing left.
fn clean_path(p: &str) -> Option<String> {
    if p.contains('\0') {
        return None;
    }
    let absolute = p.starts_with('/');
    let mut comps = Vec::new();
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." => return None,
            c => comps.push(c),
        }
    }
    if comps.is_empty() {
        return None;
    }
    let joined = comps.join("/");
    Some(if absolute {
        format!("/{joined}")
    } else {
        joined
    })
}

fn has_glob_meta(s: &str) -> bool {
    s.contains(['*', '?', '[', ']', '{', '}', '\\'])
}

/// Host trees no draft names, read or written: system configuration (`/etc`), users' homes
/// (`/home`, `/root`, and every home folder of the host's users, [`host_homes`]), service state
/// and spools (`/var`), and what the sandbox manages (`/run`, `/boot`). A script that needs one
/// gets a note; the author writes the rule by hand, knowing what it opens.
pub const NEVER_DRAFTED: &[&str] = &["/etc", "/home", "/root", "/var", "/run", "/boot"];

/// The home folders of this host's users (from `/etc/passwd`), except `/` and the folders of
/// [`NEVER_DRAFTED`] that hold them anyway. Empty when the file cannot be read.
pub fn host_homes() -> Vec<String> {
    let text = fs_err::read_to_string("/etc/passwd").unwrap_or_default();
    let mut out: Vec<String> = text
        .lines()
        .filter_map(|l| l.split(':').nth(5))
        .filter_map(clean_path)
        .filter(|h| h.starts_with('/'))
        .filter(|h| {
            !NEVER_DRAFTED
                .iter()
                .any(|r| std::path::Path::new(h).starts_with(r))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Why an absolute `path` the run read (`write: false`) or wrote is not drafted: a write outside
/// the workspace, or a read in a tree of [`NEVER_DRAFTED`] or below a home folder in `homes`.
/// `None`: it may be drafted (a read of `/srv/data/x.csv`, `/opt/tool/share/x`).
pub fn outside_problem(path: &str, write: bool, homes: &[String]) -> Option<String> {
    let p = std::path::Path::new(path);
    if write {
        return Some(
            "band learn drafts writes only in the workspace; a write outside it is yours to allow by hand"
                .into(),
        );
    }
    if let Some(r) = NEVER_DRAFTED.iter().find(|r| p.starts_with(r)) {
        return Some(format!(
            "band learn never drafts a rule under {r} (system configuration, homes, service state)"
        ));
    }
    if let Some(h) = homes.iter().find(|h| p.starts_with(h.as_str())) {
        return Some(format!(
            "{h} is a user's home folder; band learn never drafts a rule there"
        ));
    }
    None
}

/// Exact path patterns for `paths` (cleaned, distinct), with two or more files of one directory
/// below the workspace root collapsed into `dir/**`. A path outside the workspace is drafted
/// exactly or not at all ([`outside_problem`]); a path with a glob character in its name is never
/// drafted (a pattern would match more than it): both are notes.
fn path_rules(
    paths: &BTreeSet<String>,
    verb: &str,
    hidden: &BTreeSet<String>,
    homes: &[String],
) -> (Vec<Rule>, Vec<String>) {
    let why = |f: &str| {
        if hidden.contains(f) {
            " (outside the workspace, not in the sandbox: the run tried it and found nothing)"
        } else {
            ""
        }
    };
    let write = verb == "wrote";
    let mut notes = Vec::new();
    let mut by_dir: BTreeMap<String, Vec<&String>> = BTreeMap::new();
    for p in paths {
        if has_glob_meta(p) {
            notes.push(format!(
                "{verb} {}: its name has glob characters, which a rule would read as a pattern matching more than it; write a rule by hand",
                one_line(p)
            ));
            continue;
        }
        if p.starts_with('/')
            && let Some(why_not) = outside_problem(p, write, homes)
        {
            notes.push(format!("{verb} {} (not drafted: {why_not})", one_line(p)));
            continue;
        }
        let dir = p.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
        by_dir.entry(dir.to_string()).or_default().push(p);
    }
    let mut rules: Vec<Rule> = Vec::new();
    for (dir, files) in by_dir {
        let collapsible = !dir.is_empty() && !dir.starts_with('/');
        if files.len() >= 2 && collapsible {
            let shown: Vec<&str> = files.iter().take(3).map(|s| s.as_str()).collect();
            let more = if files.len() > 3 {
                format!(" and {} more", files.len() - 3)
            } else {
                String::new()
            };
            rules.push(Rule {
                rule: format!("{dir}/**"),
                evidence: format!("{verb} {}{more}", shown.join(", ")),
            });
            continue;
        }
        for f in files {
            let rule = if f.starts_with('/') || f.contains('/') {
                f.clone()
            } else {
                format!("./{f}")
            };
            rules.push(Rule {
                rule,
                evidence: format!("{verb} {f}{}", why(f)),
            });
        }
    }
    rules.retain(|r| FsPattern::parse(&r.rule).is_ok());
    rules.sort_by(|a, b| a.rule.cmp(&b.rule));
    (rules, notes)
}

/// Folders a rule drafted from a listing never names: the workspace copy leaves them out unless
/// a rule names them (`client::workspace::skipped_dir`), and `folder/**` would copy all of them.
const UNLISTED: &[&str] = &[".git", "target"];

/// The note for a listing of the workspace root, which is never drafted as `**`.
const ROOT_LISTED_NOTE: &str = "the run listed the workspace root: a script that walks it will not see the files the next input adds there unless a wider rule is written by hand (band learn never drafts `**`); the draft keeps the files this run read";

/// The folders below the workspace root the runs listed that a read rule `folder/**` is drafted
/// for: the uppermost of each listed tree (a folder listed below another is that one's), none
/// covered by a drafted write rule (`write`), none with a glob character in its name, none in
/// [`UNLISTED`]; and notes (the root listed, a folder no rule may name). Only workspace-relative
/// folders: a folder outside the workspace is never drafted (its files are, exactly).
fn listed_folders(listed: &[String], write: &[Rule]) -> (BTreeSet<String>, Vec<String>) {
    let mut notes = Vec::new();
    let mut root = false;
    let mut unlisted: BTreeSet<String> = BTreeSet::new();
    let mut folders: BTreeSet<String> = BTreeSet::new();
    for l in listed {
        if !l.starts_with('/') && l.split('/').all(|c| c.is_empty() || c == ".") {
            root = true;
            continue;
        }
        let Some(p) = clean_path(l) else {
            continue;
        };
        if p.starts_with('/') {
            continue;
        }
        if has_glob_meta(&p) {
            let note = format!(
                "listed {}: its name has glob characters, which a rule would read as a pattern matching more than it; write a rule by hand",
                one_line(&p)
            );
            if !notes.contains(&note) {
                notes.push(note);
            }
            continue;
        }
        if p.split('/').any(|c| UNLISTED.contains(&c)) {
            unlisted.insert(p);
            continue;
        }
        // A name no rule can spell (a control character): its files stay one by one.
        let Ok(folder) = FsPattern::parse(&format!("{p}/**")) else {
            continue;
        };
        let written = write
            .iter()
            .any(|r| FsPattern::parse(&r.rule).is_ok_and(|w| w.covers(&folder)));
        if !written {
            folders.insert(p);
        }
    }
    let below_another = |f: &String| {
        std::path::Path::new(f)
            .ancestors()
            .skip(1)
            .filter_map(|a| a.to_str())
            .any(|a| folders.contains(a))
    };
    let uppermost: BTreeSet<String> = folders
        .iter()
        .filter(|f| !below_another(f))
        .cloned()
        .collect();
    if root {
        notes.insert(0, ROOT_LISTED_NOTE.to_string());
    }
    if !unlisted.is_empty() {
        let shown: Vec<String> = unlisted.iter().take(3).map(|s| one_line(s)).collect();
        let more = unlisted.len().saturating_sub(3);
        notes.push(format!(
            "listed {}{}: not drafted as a folder (the workspace copy leaves {} out unless a rule names them, and a folder rule would copy all of it); the files read there are drafted one by one",
            shown.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            },
            UNLISTED
                .iter()
                .map(|u| format!("`{u}`"))
                .collect::<Vec<_>>()
                .join(" and ")
        ));
    }
    (uppermost, notes)
}

/// The evidence of a folder rule drafted from a listing: it was listed, and the files read in it
/// (`files`, at most three named).
fn listed_evidence(files: &[&String]) -> String {
    let mut out =
        "listed by the run: a script that walks it reads files the next input adds".to_string();
    if !files.is_empty() {
        let shown: Vec<String> = files.iter().take(3).map(|s| one_line(s)).collect();
        out.push_str(&format!("; read {}", shown.join(", ")));
        if files.len() > 3 {
            out.push_str(&format!(" and {} more", files.len() - 3));
        }
    }
    out
}

fn draft_paths(obs: &Observations, homes: &[String], d: &mut Draft) {
    let writes: BTreeSet<String> = obs.writes.iter().filter_map(|p| clean_path(p)).collect();
    let hidden: BTreeSet<String> = obs.hidden.iter().filter_map(|p| clean_path(p)).collect();
    let (write, notes) = path_rules(&writes, "wrote", &hidden, homes);
    d.notes.extend(notes);
    let covered = |p: &str| {
        write
            .iter()
            .any(|r| FsPattern::parse(&r.rule).is_ok_and(|pat| pat.matches(p)))
    };
    let (folders, notes) = listed_folders(&obs.listed, &write);
    d.notes.extend(notes);
    // The listed folder a file is in, if any.
    let folder_of = |p: &str| -> Option<String> {
        std::path::Path::new(p)
            .ancestors()
            .skip(1)
            .filter_map(|a| a.to_str())
            .find(|a| folders.contains(*a))
            .map(str::to_string)
    };
    let mut in_folders: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut reads: BTreeSet<String> = BTreeSet::new();
    for p in obs.reads.iter().filter_map(|p| clean_path(p)) {
        if covered(&p) {
            continue;
        }
        match folder_of(&p) {
            Some(f) => in_folders.entry(f).or_default().push(p),
            None => {
                reads.insert(p);
            }
        }
    }
    let (mut read, notes) = path_rules(&reads, "read", &hidden, homes);
    d.notes.extend(notes);
    for f in &folders {
        let mut files: Vec<&String> = in_folders
            .get(f)
            .map(|v| v.iter().collect())
            .unwrap_or_default();
        files.sort();
        files.dedup();
        read.push(Rule {
            rule: format!("{f}/**"),
            evidence: listed_evidence(&files),
        });
    }
    read.retain(|r| FsPattern::parse(&r.rule).is_ok());
    read.sort_by(|a, b| a.rule.cmp(&b.rule));
    d.read = read;
    d.write = write;
}

/// `s` on one line, inert: control characters (a newline included), the bidirectional overrides
/// and isolates escaped as Rust writes them (`\n`, `\u{1b}`). For what a run controls (argv,
/// paths, names) in evidence, notes and the diff.
pub fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

fn draft_net(obs: &Observations, d: &mut Draft) {
    // The hosts the egress proxy saw requests to get HTTP rules; the others (traffic the proxy
    // did not carry) keep host rules.
    let data: BTreeSet<String> = obs.data.iter().cloned().collect();
    let mut by_proxy: BTreeSet<(String, u16)> = BTreeSet::new();
    for r in &obs.http {
        by_proxy.insert((r.host.trim_end_matches('.').to_ascii_lowercase(), r.port));
    }
    for h in http::draft_http(&obs.http, &data) {
        if !d.net.iter().any(|r| r.rule == h.rule) {
            let mut seen = h.seen.clone();
            let more = seen.len().saturating_sub(3);
            seen.truncate(3);
            d.net.push(Rule {
                rule: h.rule,
                evidence: format!(
                    "requested {}{}",
                    seen.iter()
                        .map(|s| one_line(s))
                        .collect::<Vec<_>>()
                        .join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                ),
            });
        }
    }
    let connects: BTreeSet<&Connect> = obs.connects.iter().collect();
    let mut named: BTreeSet<String> = BTreeSet::new();
    for c in connects {
        let host = c.host.trim_end_matches('.').to_ascii_lowercase();
        named.insert(host.clone());
        if by_proxy.contains(&(host, c.port)) {
            continue;
        }
        match literal_net_rule(&c.host, Some(c.port)) {
            Some(rule) => {
                if !d.net.iter().any(|r| r.rule == rule) {
                    d.net.push(Rule {
                        rule,
                        evidence: format!("connected to {}:{}", c.host, c.port),
                    });
                }
            }
            None => d.notes.push(format!(
                "connected to {}:{}, which is not a literal host name or address: not drafted",
                one_line(&c.host),
                c.port
            )),
        }
    }
    let lookups: BTreeSet<String> = obs
        .lookups
        .iter()
        .map(|n| n.trim_end_matches('.').to_ascii_lowercase())
        .collect();
    let reachable: BTreeSet<String> = obs
        .net_lookups
        .iter()
        .map(|n| n.trim_end_matches('.').to_ascii_lowercase())
        .collect();
    for name in lookups {
        if named.contains(&name) {
            continue;
        }
        if reachable.contains(&name) {
            // The run could reach any public host and did not contact this one: telemetry, a
            // probe, a fallback. The band needs no rule for it.
            d.notes.push(format!(
                "looked up {}, never contacted although the run could reach it (--net): not drafted; add it by hand if the script needs it",
                one_line(&name)
            ));
            continue;
        }
        match literal_net_rule(&name, None) {
            // A loopback rule names its port, and a lookup has none.
            Some(rule) if NetPattern::parse(&rule).is_ok_and(|p| p.is_loopback()) => d.notes.push(format!(
                "looked up {name}, never connected: a rule for the host's loopback names its port (`{name}:PORT`): not drafted"
            )),
            Some(rule) => d.net.push(Rule {
                rule,
                evidence: format!("looked up {name}, never contacted (so no port to narrow it to)"),
            }),
            None => d.notes.push(format!(
                "looked up {}, which is not a literal host name: not drafted (a rule names one host, never a pattern)",
                one_line(&format!("`{name}`"))
            )),
        }
    }
}

/// What band lint says of one rule written as `top.key: [value]` in a band of its own (its
/// parser's diagnostics and the absolute-path checks), errors and warnings alike: `None` when
/// lint finds nothing.
#[cfg(feature = "cli")]
pub fn lint_rule(top: &str, key: &str, value: &str) -> Option<String> {
    let doc = serde_json::json!({
        "band": "draft",
        "description": "One drafted rule.",
        "version": 1,
        top: { key: [value] },
    });
    let text = format!("---\n{doc}\n---\n");
    crate::lint::band_text_findings(&text)
        .first()
        .map(|d| d.message.clone())
}

/// Drop from `d` every rule band lint would flag in a band a person wrote ([`lint_rule`]), each
/// with a note: a draft passes the checks a human-written band does.
#[cfg(feature = "cli")]
pub fn vet(d: &mut Draft) {
    let mut notes = Vec::new();
    let mut keep = |top: &str, key: &str, rules: &mut Vec<Rule>| {
        rules.retain(|r| match lint_rule(top, key, &r.rule) {
            None => true,
            Some(why) => {
                notes.push(format!(
                    "{top}.{key} {} (from: {}) is not drafted: band lint says {}",
                    one_line(&format!("{:?}", r.rule)),
                    one_line(&r.evidence),
                    one_line(&why)
                ));
                false
            }
        });
    };
    keep("allow", "cli", &mut d.cli);
    keep("allow", "read", &mut d.read);
    keep("allow", "write", &mut d.write);
    keep("allow", "net", &mut d.net);
    keep("env", "secrets", &mut d.secrets);
    d.notes.extend(notes);
}

/// One line of a [`diff`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffLine {
    /// `allow.cli`, `allow.read`, `allow.write`, `allow.net` or `env.secrets`.
    pub key: String,
    /// `+` added, `-` removed, ` ` kept.
    pub op: char,
    pub rule: String,
    pub evidence: String,
}

/// A note when the draft narrows a pattern of the band (`**`, `grep *`) to what the observed
/// runs did: the next input may take a path those runs did not, and is then refused, or finds a
/// file missing. `None` when no pattern is removed where rules are added in its stead; a path
/// pattern a drafted rule covers (`./src/**` by `src/**`, the folder the run listed) is not
/// narrowed.
pub fn narrowed_note(lines: &[DiffLine]) -> Option<String> {
    let kept_wider = |l: &DiffLine| {
        matches!(l.key.as_str(), "allow.read" | "allow.write")
            && FsPattern::parse(&l.rule).is_ok_and(|removed| {
                lines.iter().any(|a| {
                    a.op != '-'
                        && a.key == l.key
                        && FsPattern::parse(&a.rule).is_ok_and(|p| p.covers(&removed))
                })
            })
    };
    let narrowed: Vec<String> = lines
        .iter()
        .filter(|l| {
            l.op == '-'
                && l.key != "env.secrets"
                && l.rule.contains(['*', '?', '['])
                && lines.iter().any(|a| a.op == '+' && a.key == l.key)
                && !kept_wider(l)
        })
        .map(|l| format!("`{}` ({})", l.rule, l.key))
        .collect();
    (!narrowed.is_empty()).then(|| {
        format!(
            "the draft replaces {} with what was observed: an input that takes another path is refused, or finds a file missing (the run then names it); observe more inputs with --merge, or keep the pattern by hand",
            narrowed.join(", ")
        )
    })
}

/// The draft against the current band: every drafted rule (`+` new, ` ` already there), and
/// every current rule the observed runs did not need (`-`).
pub fn diff(current: &RuleSet, current_secrets: &[String], d: &Draft) -> Vec<DiffLine> {
    let mut out = Vec::new();
    let mut section = |key: String, cur: &[String], drafted: &[Rule]| {
        for r in drafted {
            let op = if cur.contains(&r.rule) { ' ' } else { '+' };
            out.push(DiffLine {
                key: key.clone(),
                op,
                rule: r.rule.clone(),
                evidence: r.evidence.clone(),
            });
        }
        for c in cur {
            if !drafted.iter().any(|r| &r.rule == c) {
                out.push(DiffLine {
                    key: key.clone(),
                    op: '-',
                    rule: c.clone(),
                    evidence: "not needed by the observed runs".into(),
                });
            }
        }
    };
    for cat in [
        Category::Cli,
        Category::Read,
        Category::Write,
        Category::Net,
    ] {
        section(format!("allow.{cat}"), current.get(cat), d.rules(cat));
    }
    section("env.secrets".into(), current_secrets, &d.secrets);
    out
}

/// The diff as text: a header per key, one rule per line with its evidence.
pub fn render_diff(lines: &[DiffLine]) -> String {
    let mut out = String::new();
    let mut key = "";
    let width = lines
        .iter()
        .map(|l| l.rule.chars().count() + 2)
        .max()
        .unwrap_or(0)
        .min(48);
    for l in lines {
        if l.key != key {
            key = &l.key;
            out.push_str(&format!("{key}:\n"));
        }
        let quoted = format!(
            "\"{}\"",
            one_line(&l.rule.replace('\\', "\\\\").replace('"', "\\\""))
        );
        out.push_str(&format!(
            "{} {quoted:<width$}  # {}\n",
            l.op,
            one_line(&l.evidence)
        ));
    }
    if lines.is_empty() {
        out.push_str("(the observed runs needed no rule)\n");
    }
    out
}

#[cfg(test)]
mod tests;
