//! The narrowest rule that allows one thing a run did: one spelling for `band learn`'s drafts
//! ([`crate::learn`]) and for the rule a denial suggests ([`crate::proto::Denial::smallest_rule`]).
//! Each is checked against the pattern language: `None` when no pattern spells exactly it.

use super::cli::CliPattern;
use super::fs::FsPattern;
use super::net::{HostPattern, NetPattern};

/// The command name a pattern uses for argv\[0\]: `./rel` for a program of the skill, else the
/// file name.
pub(crate) fn command_of(arg0: &str) -> String {
    if let Some(rel) = arg0.strip_prefix("/skill/") {
        return format!("./{rel}");
    }
    if arg0.starts_with("./") {
        return arg0.to_string();
    }
    arg0.rsplit('/').next().unwrap_or(arg0).to_string()
}

/// One argument as a pattern token matching exactly it (or, for a name `mktemp` made up,
/// `/tmp/tmp.XXXXXXXXXX`, any such name).
/// Glob characters are escaped; a token with whitespace, a `"` (written `\"`), a leading `'`
/// or nothing is quoted.
pub(crate) fn token_for(arg: &str) -> Option<String> {
    if let Some(rest) = arg.strip_prefix("/tmp/tmp.")
        && rest.len() == 10
        && rest.chars().all(|c| c.is_ascii_alphanumeric())
    {
        return Some("/tmp/tmp.*".into());
    }
    let mut t = String::new();
    for c in arg.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\' | '"') {
            t.push('\\');
        }
        t.push(c);
    }
    if t.is_empty()
        || t.chars().any(char::is_whitespace)
        || t.starts_with('\'')
        || arg.contains('"')
    {
        t = format!("\"{t}\"");
    }
    Some(t)
}

/// The `allow.cli` rule that matches exactly `argv` (`mktemp` names as `/tmp/tmp.*`), or
/// `None` when the pattern language cannot spell it. Used for drafts and for the smallest rule
/// a denial names.
pub fn exact_cli_rule(argv: &[String]) -> Option<String> {
    let (first, rest) = argv.split_first()?;
    let mut tokens = vec![command_of(first)];
    for a in rest {
        tokens.push(token_for(a)?);
    }
    let rule = tokens.join(" ");
    let mut norm = argv.to_vec();
    norm[0] = command_of(first);
    CliPattern::parse(&rule)
        .ok()
        .filter(|p| p.matches(&norm))
        .map(|_| rule)
}

/// The `allow.cli` rule for a command line a launcher completes (`find -exec`, `xargs`): each word
/// with `{}` in it becomes `*`, and with `tail` (words are appended) the rule ends in `*`.
/// `None` when the pattern language cannot spell it.
pub fn template_cli_rule(argv: &[String], tail: bool) -> Option<String> {
    let (first, rest) = argv.split_first()?;
    let mut tokens = vec![command_of(first)];
    for a in rest {
        tokens.push(if a.contains("{}") {
            "*".to_string()
        } else {
            token_for(a)?
        });
    }
    if tail && tokens.last().map(String::as_str) != Some("*") {
        tokens.push("*".into());
    }
    let rule = tokens.join(" ");
    CliPattern::parse(&rule).ok().map(|_| rule)
}

/// The `allow.net` rule that names exactly `host` (a name, lower-cased, without its trailing
/// dot, or an address; IPv6 bracketed with a port), at `port` or any: `None` when `host` is not a
/// literal host name or address. A name the run looked up or reached is never drafted (nor
/// suggested by a denial) as a pattern: `*` and `*.example.com` are refused, as is anything
/// [`NetPattern`] reads as a network (`10.0.0.0/8`).
pub fn literal_net_rule(host: &str, port: Option<u16>) -> Option<String> {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    // The host alone must name one host: a name or an address, no port, no pattern, no network.
    let alone = NetPattern::parse(&host).ok()?;
    if alone.port().is_some() || !matches!(alone.host(), HostPattern::Exact(_) | HostPattern::Ip(_))
    {
        return None;
    }
    let rule = match port {
        Some(p) if host.contains(':') => format!("[{host}]:{p}"),
        Some(p) => format!("{host}:{p}"),
        None => host,
    };
    NetPattern::parse(&rule).ok().map(|_| rule)
}

/// The `allow.write` rule that names exactly the file at `path`, or the folder at `path/` (a
/// workspace-relative name anchored as `./name`, `./name/`), or `None` when the path has glob
/// characters (the pattern would match more than it) or no pattern spells it.
pub fn exact_write_rule(path: &str) -> Option<String> {
    let rule = if path.starts_with('/') || path.trim_end_matches('/').contains('/') {
        path.to_string()
    } else {
        format!("./{path}")
    };
    // A name with glob characters would be a pattern matching more than it.
    if path.contains(['*', '?', '[', ']', '{', '}', '\\']) {
        return None;
    }
    FsPattern::parse(&rule)
        .ok()
        .filter(|p| p.matches(path))
        .map(|_| rule)
}
