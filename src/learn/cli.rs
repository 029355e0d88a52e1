//! Drafting `allow.cli` from observed command lines, so the band survives new data. Pure.
//!
//! Calls are grouped by their literal skeleton: the program, its subcommand words (leading
//! lower-case words, [`is_subcommand_word`], at most [`MAX_SUBCOMMAND_WORDS`]) and its flags
//! (words starting with `-`, at their places; after `--` every word is a value). These stay
//! literal. A value (any other word, and the value of a `--name=value` flag) becomes a pattern
//! when
//!
//! - it differed across the observed runs (`band learn --merge`): the same skeleton, another
//!   value in another run;
//! - it came from the run's data: it is, whole, a value of the input document (its `args`
//!   included) or the path of a workspace file ([`super::Observations::data`]);
//! - one run gave that place more than [`MAX_EXACT`] values.
//!
//! The pattern is the narrowest the pattern language spells for the values seen: the prefix and
//! suffix they share (cut at a separator: `data/*.csv`, `https://h.test/v1/*`), and between them
//! `[0-9]*` when every value is digits there, `[A-Za-z0-9]*` for a whole word every value of
//! which starts with a letter or digit, `[!-]*` for one no value of which starts with `-` (it
//! cannot become a flag), else `*`; the value of a `--name=value` flag is `*`. A single value
//! (from data) keeps only a URL's `scheme://`, `/workspace/`, `/tmp/` or a relative path's first folder
//! (`repos/*`) as its prefix, and only the
//! calls whose own word came from data are generalised. Each
//! is one word (a `*` last is written `"*"`, which never matches more words). Everything else is
//! exact: one rule per distinct call. Then, per command and subcommand words (or first flag),
//! more than [`MAX_EXACT`] rules become the longest prefix their calls share and `*`
//! (`gh issue list *`), never the program alone with `*`.

use std::collections::{BTreeMap, BTreeSet};

use super::{Draft, Rule, plural};
use crate::policy::cli::CliPattern;
use crate::policy::spell::{command_of, exact_cli_rule, token_for};

/// Most subcommand words kept in a command pattern (`gh pr review list`).
const MAX_SUBCOMMAND_WORDS: usize = 3;
/// Up to this many distinct calls stay exact; more are generalised (the calls vary with the
/// input, so exact rules would not run the script again).
pub(super) const MAX_EXACT: usize = 3;
/// Values shown in a rule's evidence.
const SHOWN_VALUES: usize = 3;

fn is_subcommand_word(w: &str) -> bool {
    w.len() <= 32
        && w.starts_with(|c: char| c.is_ascii_lowercase())
        && w.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_'))
}

/// One observed call: argv with argv\[0\] normalised ([`command_of`]), and its run.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Call {
    argv: Vec<String>,
    run: u32,
}

/// One word after the program and its subcommand words, as the skeleton sees it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Slot {
    /// A flag, literal (`-r`, `--argjson`, `--`).
    Flag(String),
    /// `--name=`: the flag is literal, its value a value.
    FlagValue(String),
    /// Any other word.
    Value,
}

fn slots(args: &[String]) -> Vec<(Slot, String)> {
    let mut out = Vec::with_capacity(args.len());
    let mut operands = false;
    for a in args {
        if !operands && a.starts_with('-') && a.len() >= 2 {
            operands = a == "--";
            match a.split_once('=') {
                Some((name, value)) if name.starts_with("--") && name.len() > 2 => {
                    out.push((Slot::FlagValue(format!("{name}=")), value.to_string()));
                }
                _ => out.push((Slot::Flag(a.clone()), String::new())),
            }
        } else {
            out.push((Slot::Value, a.clone()));
        }
    }
    out
}

/// Why a value's place became a pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Why {
    Runs(usize),
    Data,
    Many(usize),
}

/// The glob text of a literal piece (the pattern language's escapes, no quoting).
fn escaped(s: &str) -> String {
    let mut t = String::new();
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\' | '"') {
            t.push('\\');
        }
        t.push(c);
    }
    t
}

/// A glob as one token: quoted when it has whitespace, a `"` or a leading `'`, or when it is a
/// lone `*` at the end (which would mean "any further words").
fn as_token(glob: String, last: bool) -> String {
    if glob.chars().any(char::is_whitespace)
        || glob.starts_with('\'')
        || glob.contains('"')
        || (last && glob == "*")
    {
        format!("\"{glob}\"")
    } else {
        glob
    }
}

const SEPARATORS: &[char] = &['/', '.', '=', ':', ',', '@', '-', '_', '?', '&', '+', '#'];

/// The narrowest single-word glob matching every one of `values` (two or more distinct, or one
/// that came from data): shared prefix and suffix cut at a separator, and between them a class.
fn value_glob(values: &BTreeSet<&str>) -> String {
    let all: Vec<&str> = values.iter().copied().collect();
    let first = all.first().copied().unwrap_or("");
    let shortest = all.iter().map(|v| v.len()).min().unwrap_or(0);
    let (mut pre, mut suf) = (0, 0);
    if all.len() > 1 {
        // Longest common prefix (in bytes, on char boundaries), cut after a separator.
        let common = first
            .char_indices()
            .map(|(i, c)| i + c.len_utf8())
            .take_while(|&end| all.iter().all(|v| v.get(..end) == first.get(..end)))
            .last()
            .unwrap_or(0);
        pre = first[..common]
            .rfind(SEPARATORS)
            .map(|i| i + 1)
            .unwrap_or(0);
        let common = first
            .char_indices()
            .map(|(i, _)| i)
            .rev()
            .take_while(|&start| {
                let s = &first[start..];
                all.iter().all(|v| v.ends_with(s))
            })
            .last()
            .map(|start| first.len() - start)
            .unwrap_or(0);
        let tail = &first[first.len() - common..];
        suf = tail.find(SEPARATORS).map(|i| common - i).unwrap_or(0);
        if pre + suf > shortest {
            suf = shortest.saturating_sub(pre);
        }
    }
    if all.len() == 1 {
        // One value (from data): keep what names its kind, a URL's scheme or the workspace.
        pre = first
            .find("://")
            .filter(|&i| {
                i > 0
                    && first[..i]
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-'))
            })
            .map(|i| i + 3)
            // The workspace, or the run's own `/tmp` (a name the run made there).
            .or_else(|| {
                ["/workspace/", "/tmp/"]
                    .into_iter()
                    .find(|p| first.starts_with(p))
                    .map(str::len)
            })
            // A relative path (`repos/o/r/releases`): its first folder.
            .or_else(|| {
                first
                    .find('/')
                    .filter(|&i| {
                        i > 0 && !first.contains("://") && !first.contains(char::is_whitespace)
                    })
                    .map(|i| i + 1)
            })
            .unwrap_or(0);
    }
    let prefix = &first[..pre];
    let suffix = &first[first.len() - suf..];
    let middles: Vec<&str> = all.iter().map(|v| &v[pre..v.len() - suf]).collect();
    let class = if middles
        .iter()
        .all(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()))
    {
        "[0-9]*"
    } else if pre == 0
        && middles
            .iter()
            .all(|m| m.starts_with(|c: char| c.is_ascii_alphanumeric()))
    {
        "[A-Za-z0-9]*"
    } else if pre == 0 && middles.iter().all(|m| !m.is_empty() && !m.starts_with('-')) {
        "[!-]*"
    } else {
        "*"
    };
    format!("{}{class}{}", escaped(prefix), escaped(suffix))
}

fn shown_values(values: &BTreeSet<&str>) -> String {
    let mut v: Vec<String> = values
        .iter()
        .take(SHOWN_VALUES)
        .map(|s| super::one_line(&display_word(s)))
        .collect();
    if values.len() > SHOWN_VALUES {
        v.push("…".into());
    }
    v.join(", ")
}

fn display_word(w: &str) -> String {
    if w.is_empty() || w.chars().any(|c| c.is_whitespace() || c == '\'') {
        format!("'{}'", w.replace('\'', r"'\''"))
    } else {
        w.to_string()
    }
}

pub(super) fn display(argv: &[String]) -> String {
    argv.iter()
        .map(|w| display_word(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A rule drafted for calls of one skeleton: its text, the calls it covers, and what was
/// generalised (for the evidence).
struct Drafted {
    rule: Option<String>,
    calls: Vec<Call>,
    reasons: Vec<String>,
}

/// Rules for the calls of one skeleton (`skeleton.len()` words after `head`).
fn skeleton_rules(
    head: &[String],
    skeleton: &[Slot],
    calls: &[Call],
    data: &BTreeSet<&str>,
) -> Vec<Drafted> {
    let words: Vec<Vec<(Slot, String)>> =
        calls.iter().map(|c| slots(&c.argv[head.len()..])).collect();
    let runs: BTreeSet<u32> = calls.iter().map(|c| c.run).collect();
    // Per place: the pattern and why, when it is generalised.
    // Per place: the glob, why, and (for data) the only values it stands for.
    type Pattern = (String, String, Option<BTreeSet<String>>);
    let mut patterns: Vec<Option<Pattern>> = Vec::with_capacity(skeleton.len());
    for (i, slot) in skeleton.iter().enumerate() {
        if matches!(slot, Slot::Flag(_)) {
            patterns.push(None);
            continue;
        }
        let seen: Vec<(&str, u32)> = words
            .iter()
            .zip(calls)
            .map(|(w, c)| (w[i].1.as_str(), c.run))
            .collect();
        let distinct: BTreeSet<&str> = seen.iter().map(|(v, _)| *v).collect();
        let per_run = |r: u32| -> BTreeSet<&str> {
            seen.iter()
                .filter(|(_, run)| *run == r)
                .map(|(v, _)| *v)
                .collect()
        };
        let first_run = runs.iter().next().map(|r| per_run(*r)).unwrap_or_default();
        let from_data: BTreeSet<&str> = distinct
            .iter()
            .copied()
            .filter(|v| !v.is_empty() && data.contains(v))
            .collect();
        let why = if runs.len() > 1 && runs.iter().any(|r| per_run(*r) != first_run) {
            Some(Why::Runs(runs.len()))
        } else if !from_data.is_empty() {
            // Only the calls whose value came from data: the others keep theirs.
            Some(Why::Data)
        } else if distinct.len() > MAX_EXACT {
            Some(Why::Many(distinct.len()))
        } else {
            None
        };
        let Some(why) = why else {
            patterns.push(None);
            continue;
        };
        let distinct = if why == Why::Data {
            from_data
        } else {
            distinct
        };
        let glob = match slot {
            Slot::FlagValue(name) => format!("{}*", escaped(name)),
            _ => value_glob(&distinct),
        };
        let because = match why {
            Why::Runs(n) => format!("differed across {n} runs: {}", shown_values(&distinct)),
            Why::Data => format!(
                "came from the run's input or workspace: {}",
                shown_values(&distinct)
            ),
            Why::Many(n) => format!("took {n} values in one run: {}", shown_values(&distinct)),
        };
        let place = match slot {
            Slot::FlagValue(name) => format!("the value of {name}"),
            _ => "a value".into(),
        };
        let only: Option<BTreeSet<String>> =
            (why == Why::Data).then(|| distinct.iter().map(|v| v.to_string()).collect());
        patterns.push(Some((
            glob.clone(),
            format!("`{glob}` for {place} that {because}"),
            only,
        )));
    }
    let last = skeleton.len().saturating_sub(1);
    let mut by_rule: BTreeMap<Option<String>, Drafted> = BTreeMap::new();
    let mut order: Vec<Option<String>> = Vec::new();
    for (call, words) in calls.iter().zip(&words) {
        let mut tokens: Vec<String> = vec![head[0].clone()];
        let mut spelled = true;
        for w in &head[1..] {
            match token_for(w) {
                Some(t) => tokens.push(t),
                None => spelled = false,
            }
        }
        let mut reasons = Vec::new();
        for (i, ((slot, value), pattern)) in words.iter().zip(&patterns).enumerate() {
            let pattern = pattern
                .as_ref()
                .filter(|(_, _, only)| only.as_ref().is_none_or(|o| o.contains(value)));
            let token = match (slot, pattern) {
                (_, Some((glob, why, _))) => {
                    reasons.push(why.clone());
                    Some(as_token(glob.clone(), i == last))
                }
                (Slot::Flag(f), None) => token_for(f),
                (Slot::FlagValue(name), None) => token_for(&format!("{name}{value}")),
                (Slot::Value, None) => token_for(value),
            };
            match token {
                Some(t) => tokens.push(t),
                None => spelled = false,
            }
        }
        let generalised = !reasons.is_empty();
        let rule = if !spelled {
            None
        } else if generalised {
            Some(tokens.join(" "))
        } else {
            exact_cli_rule(&call.argv)
        };
        let entry = by_rule.entry(rule.clone()).or_insert_with(|| {
            order.push(rule.clone());
            Drafted {
                rule: rule.clone(),
                calls: Vec::new(),
                reasons,
            }
        });
        entry.calls.push(call.clone());
    }
    let mut out = Vec::new();
    for key in order {
        let Some(d) = by_rule.remove(&key) else {
            continue;
        };
        // The rule must match every call it was drafted from; else the calls stay exact.
        let ok = d.rule.as_deref().is_some_and(|r| {
            CliPattern::parse(r).is_ok_and(|p| d.calls.iter().all(|c| p.matches(&c.argv)))
        });
        if ok || d.reasons.is_empty() {
            out.push(d);
        } else {
            for c in d.calls {
                out.push(Drafted {
                    rule: exact_cli_rule(&c.argv),
                    calls: vec![c],
                    reasons: Vec::new(),
                });
            }
        }
    }
    out
}

/// Draft `allow.cli` for `execs` (with `runs`, the run of each call, missing ones run 0) and
/// `data`, the values of the runs' input documents and workspace paths seen in them.
pub(super) fn draft_cli(execs: &[Vec<String>], runs: &[u32], data: &[String], d: &mut Draft) {
    let data: BTreeSet<&str> = data.iter().map(String::as_str).collect();
    // (command, subcommand words or first flag) → (skeleton → distinct calls), first seen first.
    type Skeletons = Vec<(Vec<Slot>, Vec<Call>)>;
    let mut groups: BTreeMap<Vec<String>, (usize, Skeletons)> = BTreeMap::new();
    for (n, argv) in execs.iter().enumerate() {
        let Some(first) = argv.first() else { continue };
        let mut norm = argv.clone();
        norm[0] = command_of(first);
        let run = runs.get(n).copied().unwrap_or(0);
        let words = norm
            .iter()
            .skip(1)
            .take_while(|w| is_subcommand_word(w))
            .take(MAX_SUBCOMMAND_WORDS)
            .count();
        let head: Vec<String> = norm[..1 + words].to_vec();
        let mut key = head.clone();
        // A command without subcommands is grouped by its first option too (`jq -r`, `jq -c`).
        if words == 0
            && let Some(flag) = norm.get(1).filter(|a| a.starts_with('-') && a.len() > 1)
        {
            key.push(flag.clone());
        }
        let skeleton: Vec<Slot> = slots(&norm[head.len()..])
            .into_iter()
            .map(|(s, _)| s)
            .collect();
        let at = groups.len();
        let (_, skels) = groups.entry(key).or_insert((at, Vec::new()));
        let call = Call { argv: norm, run };
        let skel_key = (head.len(), skeleton);
        match skels.iter_mut().find(|(s, c)| {
            *s == skel_key.1
                && c.first()
                    .is_some_and(|c| c.argv[..skel_key.0] == call.argv[..skel_key.0])
        }) {
            Some((_, calls)) => {
                if !calls.contains(&call) {
                    calls.push(call);
                }
            }
            None => skels.push((skel_key.1, vec![call])),
        }
    }
    for (key, (_, skels)) in groups {
        let mut drafted: Vec<Drafted> = Vec::new();
        for (skeleton, calls) in &skels {
            let words = calls[0].argv.len() - skeleton.len();
            drafted.extend(skeleton_rules(
                &calls[0].argv[..words],
                skeleton,
                calls,
                &data,
            ));
        }
        let distinct: BTreeSet<&Option<String>> = drafted.iter().map(|x| &x.rule).collect();
        if distinct.len() > MAX_EXACT && key.len() > 1 {
            let calls: Vec<Vec<String>> = drafted
                .iter()
                .flat_map(|x| x.calls.iter().map(|c| c.argv.clone()))
                .collect();
            let shown = display(&calls[0]);
            let more = calls.len() - 1;
            push_cli(
                d,
                prefix_rule(&key, &calls),
                format!(
                    "ran `{shown}` (and {more} other call{}): more than {MAX_EXACT} forms",
                    plural(more)
                ),
                &shown,
            );
            continue;
        }
        for x in drafted {
            let shown = display(&x.calls[0].argv);
            let distinct_calls: BTreeSet<&Vec<String>> = x.calls.iter().map(|c| &c.argv).collect();
            let more = distinct_calls.len() - 1;
            let mut evidence = format!("ran `{shown}`");
            if more > 0 {
                evidence.push_str(&format!(" (and {more} other call{})", plural(more)));
            }
            if !x.reasons.is_empty() {
                evidence.push_str("; ");
                evidence.push_str(&x.reasons.join("; "));
            }
            push_cli(d, x.rule, evidence, &shown);
        }
    }
}

fn push_cli(d: &mut Draft, rule: Option<String>, evidence: String, shown: &str) {
    let parsed = rule
        .as_deref()
        .and_then(|r| CliPattern::parse(r).ok())
        // Never a bare command with `*` (`jq *`), nor a command that is not a name.
        .filter(|p| !(p.has_rest() && p.as_str().split_whitespace().count() <= 2));
    match (rule, parsed) {
        (Some(rule), Some(_)) => {
            if !d.cli.iter().any(|r| r.rule == rule) {
                d.cli.push(Rule { rule, evidence });
            }
        }
        _ => d.notes.push(format!(
            "`{}` cannot be written as an allow.cli pattern; write one by hand",
            super::one_line(shown)
        )),
    }
}

/// The longest token prefix every call shares (at least the command and its subcommand words or
/// first flag), then `*`.
fn prefix_rule(key: &[String], calls: &[Vec<String>]) -> Option<String> {
    let mut n = key.len();
    let shortest = calls.iter().map(Vec::len).min().unwrap_or(n);
    while n < shortest && calls.iter().all(|c| c[n] == calls[0][n]) {
        n += 1;
    }
    let mut tokens = vec![key[0].clone()];
    for a in calls.first()?.get(1..n)? {
        tokens.push(token_for(a)?);
    }
    tokens.push("*".into());
    Some(tokens.join(" "))
}
