//! `cli` patterns: which commands a run may execute, with which arguments.
//!
//! A pattern is a list of whitespace-separated tokens matched against argv element by element
//! (argument boundaries are kept: upstream joined argv with spaces and lost them, §7.2.15).
//!
//! - The first token is the command name, written literally (`gh`, not `/usr/bin/gh`, no glob);
//!   it is compared with argv\[0\], which the caller passes as the bare command name.
//! - Or it names a program shipped in the skill, relative to the skill root, starting with `./`
//!   (`./bin/tool *`, `./scripts/helper.sh --fast`): see [`bundled_path`]. band-server judges a
//!   call of `/skill/bin/tool` (by any path) as argv\[0\] `./bin/tool`, never as a host `tool`.
//! - Every other token is a glob over one argv element (`*`, `?`, `[...]`, `{a,b}`; `*` also
//!   matches `/`; `\*` is a literal `*`).
//! - A final unquoted `*` matches zero or more remaining arguments: `jq *` matches `jq` and
//!   `jq . -r`. Without it the argv length must equal the token count: `jq .` matches only `jq .`.
//! - A token in double quotes is one token even with spaces: `git commit -m "fix: *"`. The quotes
//!   only group; the content is still a glob, and a quoted `"*"` is one argument, never "the rest".
//!   Inside quotes `\"` is a literal `"` (the glob's escape): `echo "say \"hi\""` matches
//!   `echo 'say "hi"'`.
//!
//! Allow patterns check every argument, not only the command (upstream ignored allow arguments,
//! §7.2.12): `gh issue list *` allows `gh issue list --repo x` but not `gh repo delete x`.
//!
//! Short-flag clusters: before matching, argv is also considered in its expanded form where a
//! cluster such as `-rf` (one dash, two or more letters) becomes `-r -f`. A deny pattern matches
//! when it matches the original or the expanded argv, **or** when every flag token of the pattern
//! (tokens starting with `-`, clusters expanded) is among the argv's flags and the pattern's other
//! tokens match the argv's non-flag elements in order. So `deny: rm -rf *` also denies
//! `rm -fr /`, `rm -r -f /` and `rm -f -r x`; and a deny pattern without flag tokens, such as
//! `git status`, also denies `git status -s` (extra flags never escape a deny).
//!
//! Option models: for the commands in [`super::options::MODELS`] (rm, sed, chmod, chown, chgrp,
//! cp, mv, git, curl, wget), a deny pattern is also matched on the normalised argv and pattern:
//! case aliases (`rm -R` ≡ `-r`), long options and their unique abbreviations (`--recursive`,
//! `--rec`), `--opt=value` ≡ `--opt value` ≡ `-ovalue` for options that take a value, values
//! not mistaken for operands (`git -C dir push --force`), `--` ending the options. So
//! `deny: rm -rf *` also denies `rm -Rf /`, `rm --recursive --force /`, and `deny: sed -i *` also
//! denies `sed --in-place=.bak`. Allow patterns are never normalised: they match as written (or
//! with their clusters expanded, as above), so they are never wider than written.
//!
//! Known limits (band-server applies these patterns to every call, by name or path, but they
//! bound argv only, not what an allowed command then does; see docs/security.md):
//! - a deny pattern on flags of a command without a model matches only the spellings above
//!   (lint warns, P008);
//! - no deny pattern stops the same effect reached another way: `find -delete`, `git push origin
//!   +main`, a script in another language, an allowed interpreter.
//!
//! Precedence in [`CliMatcher`]: deny > allow > default deny.

use std::collections::BTreeSet;

use globset::{GlobBuilder, GlobMatcher};

use super::options::Item;
use super::{Decision, PatternError};

/// One token of a pattern.
#[derive(Debug, Clone)]
enum Token {
    Lit(String),
    Glob { text: String, matcher: GlobMatcher },
}

impl Token {
    fn text(&self) -> &str {
        match self {
            Token::Lit(s) => s,
            Token::Glob { text, .. } => text,
        }
    }

    fn is_glob(&self) -> bool {
        matches!(self, Token::Glob { .. })
    }

    fn matches(&self, arg: &str) -> bool {
        match self {
            Token::Lit(s) => s == arg,
            Token::Glob { matcher, .. } => matcher.is_match(arg),
        }
    }

    /// The one argument this token matches, when it matches exactly one: a literal, or a glob
    /// whose every glob character is escaped (`a\?b` matches only `a?b`).
    fn literal(&self) -> Option<String> {
        match self {
            Token::Lit(s) => Some(s.clone()),
            Token::Glob { text, .. } => unescape(text),
        }
    }

    /// Every argument `other` matches, `self` matches too (conservative).
    fn covers(&self, other: &Token) -> bool {
        if self.text() == other.text() && self.is_glob() == other.is_glob() {
            return true;
        }
        match (self, other) {
            (Token::Glob { text, .. }, _) if text == "*" => true,
            _ => other.literal().is_some_and(|s| self.matches(&s)),
        }
    }
}

const GLOB_META: [char; 7] = ['*', '?', '[', ']', '{', '}', '\\'];

/// The text a glob matches when it matches only one text: every glob character in it escaped
/// with `\\` (globset's escape; any character may be escaped). `None` when an unescaped glob
/// character is left or an escape dangles.
fn unescape(glob: &str) -> Option<String> {
    let mut out = String::with_capacity(glob.len());
    let mut chars = glob.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push(chars.next()?),
            c if GLOB_META.contains(&c) => return None,
            c => out.push(c),
        }
    }
    Some(out)
}

fn err(message: impl Into<String>) -> PatternError {
    PatternError::new(message)
}

fn token(text: &str, whole: &str) -> Result<Token, PatternError> {
    if !text.contains(GLOB_META) {
        return Ok(Token::Lit(text.to_string()));
    }
    let glob = GlobBuilder::new(text)
        .literal_separator(false)
        .build()
        .map_err(|e| {
            err(format!(
                "`{text}` in `{whole}` is not a valid glob: {}",
                e.kind()
            ))
            .with_hint("globs support `*`, `?`, `[abc]`, `{a,b}`; write `\\*` for a literal `*`")
        })?;
    Ok(Token::Glob {
        text: text.to_string(),
        matcher: glob.compile_matcher(),
    })
}

/// A valid command name: `[A-Za-z0-9._+-]+`, not `.` or `..`.
fn is_command_name(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-'))
}

/// The longest bundled program path a pattern may name (its table name must fit a file name).
pub const BUNDLED_PATH_MAX: usize = 200;

/// Commands every band gets without a rule (band-server's `shim::ESSENTIALS`; a test there keeps
/// the two lists equal). A call of one is allowed unchecked, so it needs no rule in a draft.
pub const ESSENTIALS: &[&str] = &[
    "sh", "bash", "env", "cat", "echo", "printf", "test", "true", "false", "head", "tail", "grep",
    "sed", "awk", "sort", "uniq", "wc", "tr", "cut", "mkdir", "rm", "cp", "mv", "touch", "date",
    "sleep", "mktemp", "basename", "dirname", "tee", "xargs", "ls",
];

/// The file of the skill bundle a command word names, relative to the skill root: `./bin/tool` →
/// `bin/tool`. `None` for a host command (`jq`) or anything that is not a valid `./` form (see
/// `check_bundled`). Inside the sandbox that file is `/skill/bin/tool`; it runs only through
/// band-shim, judged against the patterns that name it this way.
pub fn bundled_path(cmd: &str) -> Option<&str> {
    let rel = cmd.strip_prefix("./")?;
    (!rel.is_empty() && rel.len() <= BUNDLED_PATH_MAX && rel.split('/').all(is_command_name))
        .then_some(rel)
}

/// A native executable: the file starts with an ELF header.
pub fn is_native_executable(head: &[u8]) -> bool {
    head.starts_with(b"\x7fELF")
}

/// A file that would run as a program if it could be executed: an execute bit, a `#!` line or
/// an ELF header. In the sandbox such a file of the skill runs only as a bundled program.
pub fn looks_executable(mode: u32, head: &[u8]) -> bool {
    mode & 0o111 != 0 || head.starts_with(b"#!") || is_native_executable(head)
}

/// A `./` command word: components of letters, digits, `.`, `_`, `+`, `-`; no `.` or `..`, no
/// empty component, no glob.
fn check_bundled(cmd: &str, whole: &str) -> Result<(), PatternError> {
    if bundled_path(cmd).is_some() {
        return Ok(());
    }
    let rel = &cmd[2..];
    let e = err(format!(
        "`{cmd}` in `{whole}` is not a program of the skill"
    ));
    if rel.split('/').any(|c| c == "..") {
        return Err(e.with_hint(
            "a `./` program is a file of the skill, named from its root without `..`: `./bin/tool`",
        ));
    }
    if cmd.contains(GLOB_META) {
        return Err(e.with_hint(
            "the command (first token) must be named literally; globs are for arguments",
        ));
    }
    if rel.len() > BUNDLED_PATH_MAX {
        return Err(e.with_hint(format!(
            "name a file whose path is at most {BUNDLED_PATH_MAX} bytes"
        )));
    }
    Err(e.with_hint(
        "name a file of the skill from its root, `./dir/file`: path components of letters, digits, `.`, `_`, `+` and `-`, without `.`, `..` or `//`",
    ))
}

/// A raw token from the tokenizer: its text and whether it was quoted.
struct RawToken {
    text: String,
    quoted: bool,
}

fn tokenize(text: &str) -> Result<Vec<RawToken>, PatternError> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let Some(first) = chars.next() else { break };
        if first == '"' {
            let mut tok = String::new();
            let mut closed = false;
            // A `\\` keeps the next character (the glob's escape): `\\"` is a literal `"`.
            let mut escaped = false;
            for c in chars.by_ref() {
                if !escaped && c == '"' {
                    closed = true;
                    break;
                }
                escaped = !escaped && c == '\\';
                tok.push(c);
            }
            if !closed {
                return Err(err(format!("`{text}` has an unterminated `\"`"))
                    .with_hint("close the quoted token: `\"...\"`"));
            }
            if chars.peek().is_some_and(|c| !c.is_whitespace()) {
                return Err(err(format!("`{text}`: a closing `\"` must end its token"))
                    .with_hint("quote a whole token: `\"a b\"`, not `\"a\"b`"));
            }
            out.push(RawToken {
                text: tok,
                quoted: true,
            });
        } else {
            if first == '\'' {
                return Err(err(format!(
                    "`{text}`: single quotes are not quoting in cli patterns"
                ))
                .with_hint("patterns are not shell; group words with double quotes: `\"a b\"`"));
            }
            let mut tok = String::from(first);
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                if c == '"' {
                    return Err(err(format!("`{text}`: a `\"` must start a token"))
                        .with_hint("quote a whole token: `\"a b\"`, not `a\"b c\"`"));
                }
                tok.push(c);
            }
            out.push(RawToken {
                text: tok,
                quoted: false,
            });
        }
    }
    Ok(out)
}

/// A cluster of short flags: one dash, two or more ASCII letters (`-rf`, `-xzf`; not `-n5`,
/// not `-1`, not `--x`, not `-o=x`).
fn is_cluster(s: &str) -> bool {
    s.strip_prefix('-')
        .is_some_and(|r| r.len() >= 2 && r.bytes().all(|b| b.is_ascii_alphabetic()))
}

/// argv with every short-flag cluster before `--` split into its flags, in order.
fn expand(argv: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(argv.len());
    let mut end_of_options = false;
    for (i, a) in argv.iter().enumerate() {
        if i == 0 || end_of_options {
            out.push(a.clone());
        } else if a == "--" {
            end_of_options = true;
            out.push(a.clone());
        } else if is_cluster(a) {
            out.extend(a.chars().skip(1).map(|c| format!("-{c}")));
        } else {
            out.push(a.clone());
        }
    }
    out
}

/// Split a token or argv list into flags and the rest. A flag starts with `-`, is longer than
/// `-`, comes before any `--` (which itself counts as a flag), and is not the command.
fn split_flags<T>(items: &[T], text: impl Fn(&T) -> &str) -> (Vec<&T>, Vec<&T>) {
    let mut flags = Vec::new();
    let mut positional = Vec::new();
    let mut end_of_options = false;
    for (i, item) in items.iter().enumerate() {
        let t = text(item);
        if i > 0 && !end_of_options && t.starts_with('-') && t.len() >= 2 {
            end_of_options = t == "--";
            flags.push(item);
        } else {
            positional.push(item);
        }
    }
    (flags, positional)
}

/// `tokens` (followed by "the rest" if `rest`) against `args`.
fn match_seq<T: std::borrow::Borrow<Token>, A: AsRef<str>>(
    tokens: &[T],
    rest: bool,
    args: &[A],
) -> bool {
    let len_ok = if rest {
        args.len() >= tokens.len()
    } else {
        args.len() == tokens.len()
    };
    len_ok
        && tokens
            .iter()
            .zip(args)
            .all(|(t, a)| t.borrow().matches(a.as_ref()))
}

/// One parsed `cli` pattern.
#[derive(Debug, Clone)]
pub struct CliPattern {
    text: String,
    /// Every token except a final "rest" `*`; `tokens[0]` is the command (a literal).
    tokens: Vec<Token>,
    /// The pattern ends with an unquoted `*`: zero or more further arguments.
    rest: bool,
    /// For deny matching: the flag tokens (clusters expanded) …
    flag_tokens: Vec<Token>,
    /// … and the other tokens, in order.
    positional_tokens: Vec<Token>,
    /// For deny matching, when the command has an option model: the pattern normalised by it.
    model_form: Option<ModelForm>,
}

/// A pattern normalised by its command's option model ([`super::options::normalize`]).
#[derive(Debug, Clone)]
struct ModelForm {
    /// Canonical flag names, with the value the pattern requires, if any.
    flags: Vec<(String, Option<Token>)>,
    /// The operands, in order (the command first).
    args: Vec<Token>,
}

impl ModelForm {
    /// `None` when the command has no model or a flag of the pattern is a glob (it cannot be
    /// normalised; the pattern is then matched as written only).
    fn new(texts: &[&str], whole: &str) -> Option<ModelForm> {
        let items = super::options::normalize(texts)?;
        let mut flags = Vec::new();
        let mut args = Vec::new();
        for item in items {
            match item {
                Item::Flag { name, value } => {
                    if name.contains(GLOB_META) {
                        return None;
                    }
                    let value = match value {
                        Some(v) => Some(token(&v, whole).ok()?),
                        None => None,
                    };
                    flags.push((name, value));
                }
                Item::Arg(a) => args.push(token(&a, whole).ok()?),
            }
        }
        Some(ModelForm { flags, args })
    }

    fn matches(&self, rest: bool, argv: &[String]) -> bool {
        let Some(items) = super::options::normalize(argv) else {
            return false;
        };
        let mut flags = Vec::new();
        let mut args = Vec::new();
        for item in &items {
            match item {
                Item::Flag { name, value } => flags.push((name.as_str(), value.as_deref())),
                Item::Arg(a) => args.push(a.as_str()),
            }
        }
        self.flags.iter().all(|(name, want)| {
            flags.iter().any(|(n, v)| {
                n == name
                    && want
                        .as_ref()
                        .is_none_or(|t| v.is_some_and(|v| t.matches(v)))
            })
        }) && match_seq(&self.args, rest, &args)
    }
}

impl CliPattern {
    /// Parse one pattern. See the module documentation.
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        if text.chars().any(char::is_control) {
            return Err(err(format!(
                "`{}` contains a control character",
                text.escape_debug()
            ))
            .with_hint("write the pattern on one line, tokens separated by spaces"));
        }
        let raw = tokenize(text)?;
        let Some(first) = raw.first() else {
            return Err(err("empty cli pattern")
                .with_hint("name a command, e.g. `jq *` or `gh issue list *`"));
        };
        Self::check_command(&first.text, text)?;
        let rest = raw.len() > 1 && raw.last().is_some_and(|t| !t.quoted && t.text == "*");
        let body = if rest {
            &raw[..raw.len() - 1]
        } else {
            &raw[..]
        };
        let tokens = body
            .iter()
            .map(|t| token(&t.text, text))
            .collect::<Result<Vec<_>, _>>()?;

        let (flags, positional) = split_flags(&tokens, Token::text);
        let mut flag_tokens = Vec::new();
        for f in flags {
            match f {
                Token::Lit(s) if is_cluster(s) => {
                    flag_tokens.extend(s.chars().skip(1).map(|c| Token::Lit(format!("-{c}"))));
                }
                other => flag_tokens.push(other.clone()),
            }
        }
        let positional_tokens = positional.into_iter().cloned().collect();
        let texts: Vec<&str> = body.iter().map(|t| t.text.as_str()).collect();
        let model_form = ModelForm::new(&texts, text);
        Ok(CliPattern {
            text: text.to_string(),
            tokens,
            rest,
            flag_tokens,
            positional_tokens,
            model_form,
        })
    }

    fn check_command(cmd: &str, whole: &str) -> Result<(), PatternError> {
        if is_command_name(cmd) {
            return Ok(());
        }
        if cmd.starts_with("./") {
            return check_bundled(cmd, whole);
        }
        let e = err(format!("`{cmd}` in `{whole}` is not a command name"));
        if let Some(rel) = cmd.strip_prefix("/skill/") {
            return Err(e.with_hint(format!(
                "name a program of the skill relative to its root: `./{rel}`"
            )));
        }
        let as_bundled = format!("./{cmd}");
        if !cmd.starts_with('/') && cmd.contains('/') && bundled_path(&as_bundled).is_some() {
            return Err(e.with_hint(format!(
                "name the command, not its path; or a program of the skill from its root: `{as_bundled}`"
            )));
        }
        if cmd.contains('/') {
            let base = cmd.rsplit('/').next().unwrap_or_default();
            if is_command_name(base) {
                return Err(e.with_hint(format!("name the command, not its path: `{base}`")));
            }
            return Err(e.with_hint("name the command, not its path"));
        }
        if cmd.contains(GLOB_META) {
            return Err(e.with_hint(
                "the command (first token) must be named literally; globs are for arguments",
            ));
        }
        Err(e.with_hint("command names may contain only letters, digits, `.`, `_`, `+` and `-`"))
    }

    /// The flag tokens of a pattern whose command band has no option model for (so, as a deny
    /// pattern, it stops only the spellings it names); `None` otherwise.
    pub fn unmodelled_flags(&self) -> Option<Vec<&str>> {
        let command = self.command()?;
        if self.flag_tokens.is_empty() || super::options::model(command).is_some() {
            return None;
        }
        let (flags, _) = split_flags(&self.tokens, Token::text);
        Some(flags.into_iter().map(Token::text).collect())
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The command name (first token). Always `Some` for a parsed pattern.
    pub fn command(&self) -> Option<&str> {
        self.tokens.first().map(Token::text)
    }

    /// The file of the skill this pattern's command names (`./bin/tool *` → `bin/tool`), if it
    /// names one (see [`bundled_path`]).
    pub fn bundled(&self) -> Option<&str> {
        self.command().and_then(bundled_path)
    }

    /// Whether the pattern ends with "the rest" `*`.
    pub fn has_rest(&self) -> bool {
        self.rest
    }

    /// No glob anywhere (escaped glob characters are literal) and no final `*`: the pattern
    /// names exactly one argv.
    pub fn is_concrete(&self) -> bool {
        self.concrete_argv().is_some()
    }

    /// The argv a concrete pattern names (see [`CliPattern::is_concrete`]), escapes resolved:
    /// `gh api a\?b` names `["gh", "api", "a?b"]`.
    pub fn concrete_argv(&self) -> Option<Vec<String>> {
        if self.rest {
            return None;
        }
        self.tokens.iter().map(Token::literal).collect()
    }

    /// Allow semantics: the pattern matches `argv` or its flag-expanded form.
    pub fn matches(&self, argv: &[String]) -> bool {
        if argv.is_empty() {
            return false;
        }
        if match_seq(&self.tokens, self.rest, argv) {
            return true;
        }
        let expanded = expand(argv);
        expanded.len() != argv.len() && match_seq(&self.tokens, self.rest, &expanded)
    }

    /// Deny semantics: [`CliPattern::matches`], or every flag token of the pattern is among the
    /// flags of the expanded argv and the other tokens match its non-flag elements in order, or
    /// the same holds for the pattern and argv normalised by the command's option model.
    pub fn matches_as_deny(&self, argv: &[String]) -> bool {
        if self.matches(argv) {
            return true;
        }
        if self
            .model_form
            .as_ref()
            .is_some_and(|m| m.matches(self.rest, argv))
        {
            return true;
        }
        let expanded = expand(argv);
        let (flags, positional) = split_flags(&expanded, String::as_str);
        self.flag_tokens
            .iter()
            .all(|t| flags.iter().any(|f| t.matches(f)))
            && match_seq(&self.positional_tokens, self.rest, &positional)
    }

    /// Every argv `other` matches (allow semantics), `self` matches too. Conservative: `false`
    /// when unsure. A concrete `other` is checked as an argv; otherwise token by token, where a
    /// token covers another if they are equal, if it is `*`, or if it matches the other literally.
    pub fn covers(&self, other: &CliPattern) -> bool {
        if let Some(argv) = other.concrete_argv()
            && self.matches(&argv)
        {
            return true;
        }
        self.covers_tokens(other)
    }

    /// Like [`CliPattern::covers`], with deny semantics for `self`.
    pub fn covers_as_deny(&self, other: &CliPattern) -> bool {
        if let Some(argv) = other.concrete_argv()
            && self.matches_as_deny(&argv)
        {
            return true;
        }
        self.covers_tokens(other)
    }

    fn covers_tokens(&self, other: &CliPattern) -> bool {
        let (a, b) = (&self.tokens, &other.tokens);
        let shape_ok = if self.rest {
            b.len() >= a.len()
        } else {
            !other.rest && a.len() == b.len()
        };
        shape_ok && a.iter().zip(b).all(|(x, y)| x.covers(y))
    }
}

/// A `./` pattern of a policy: its list, its index there, the pattern and the file it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundledRef {
    /// `allow`, `deny` or `insist`.
    pub column: &'static str,
    pub index: usize,
    pub pattern: String,
    /// Relative to the skill root (`bin/tool`).
    pub path: String,
}

/// Every `cli` pattern of `policy` that names a program of the skill (patterns that do not parse
/// are left to the pattern checks).
pub fn bundled_refs(policy: &super::Policy) -> Vec<BundledRef> {
    let mut out = Vec::new();
    for (column, list) in [
        ("allow", &policy.allow.cli),
        ("deny", &policy.deny.cli),
        ("insist", &policy.insist.cli),
    ] {
        for (index, text) in list.iter().enumerate() {
            if let Ok(p) = CliPattern::parse(text)
                && let Some(path) = p.bundled()
            {
                out.push(BundledRef {
                    column,
                    index,
                    pattern: text.clone(),
                    path: path.to_string(),
                });
            }
        }
    }
    out
}

/// The `./` patterns of `policy` that name no regular file of the skill (`is_file` says which
/// paths are). `band lint` (on the skill folder) and band-server (on the bundle it received)
/// both refuse these, through this one function.
pub fn missing_bundled(policy: &super::Policy, is_file: &dyn Fn(&str) -> bool) -> Vec<BundledRef> {
    bundled_refs(policy)
        .into_iter()
        .filter(|r| !is_file(&r.path))
        .collect()
}

/// Allow and deny `cli` patterns, compiled.
#[derive(Debug, Clone)]
pub struct CliMatcher {
    allow: Vec<CliPattern>,
    deny: Vec<CliPattern>,
}

impl CliMatcher {
    /// Parse both lists. On error: the list of the first bad pattern, its index, what is wrong.
    pub fn new(allow: &[String], deny: &[String]) -> Result<Self, super::RuleListError> {
        let (allow, deny) = super::parse_rule_lists(allow, deny, CliPattern::parse)?;
        Ok(CliMatcher { allow, deny })
    }

    /// Decide one execution. `argv[0]` is the bare command name; a path there (or an empty argv)
    /// matches no pattern and is denied by default.
    pub fn check(&self, argv: &[String]) -> Decision {
        if argv.is_empty() {
            return Decision::Default;
        }
        if let Some(d) = self.deny.iter().find(|p| p.matches_as_deny(argv)) {
            return Decision::Deny {
                rule: d.text.clone(),
            };
        }
        match self.allow.iter().find(|p| p.matches(argv)) {
            Some(a) => Decision::Allow {
                rule: a.text.clone(),
            },
            None => Decision::Default,
        }
    }

    /// The commands that exist for the run: the first token of every allow pattern, except
    /// commands that a deny pattern `<command> *` denies outright.
    pub fn commands(&self) -> BTreeSet<String> {
        let denied: BTreeSet<&str> = self
            .deny
            .iter()
            .filter(|p| p.rest && p.tokens.len() == 1)
            .filter_map(CliPattern::command)
            .collect();
        self.allow
            .iter()
            .filter_map(CliPattern::command)
            .filter(|c| !denied.contains(c))
            .map(str::to_string)
            .collect()
    }

    /// The programs of the skill that exist for the run (relative to the skill root): the
    /// [`CliMatcher::commands`] written `./…`.
    pub fn bundled(&self) -> BTreeSet<String> {
        self.commands()
            .iter()
            .filter_map(|c| bundled_path(c))
            .map(str::to_string)
            .collect()
    }

    /// The allow patterns (allow and insist items), in declaration order.
    pub fn allow_patterns(&self) -> &[CliPattern] {
        &self.allow
    }

    /// The deny patterns, in declaration order.
    pub fn deny_patterns(&self) -> &[CliPattern] {
        &self.deny
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> CliPattern {
        CliPattern::parse(s).unwrap_or_else(|e| panic!("{s}: {e} ({:?})", e.hint))
    }

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    fn m(allow: &[&str], deny: &[&str]) -> CliMatcher {
        let a: Vec<String> = allow.iter().map(|s| s.to_string()).collect();
        let d: Vec<String> = deny.iter().map(|s| s.to_string()).collect();
        CliMatcher::new(&a, &d).unwrap()
    }

    fn allow(rule: &str) -> Decision {
        Decision::Allow { rule: rule.into() }
    }

    fn deny(rule: &str) -> Decision {
        Decision::Deny { rule: rule.into() }
    }

    #[test]
    fn bundled_programs_are_named_from_the_skill_root() {
        for (text, path) in [
            ("./bin/tool *", "bin/tool"),
            ("./scripts/helper.sh --fast", "scripts/helper.sh"),
            ("./tool", "tool"),
            ("./a/b.c/d_e+f-g *", "a/b.c/d_e+f-g"),
        ] {
            let x = p(text);
            assert_eq!(x.bundled(), Some(path), "{text}");
            assert_eq!(x.command(), Some(&*format!("./{path}")), "{text}");
        }
        assert_eq!(p("jq *").bundled(), None);
        let x = p("./bin/tool *");
        assert!(x.matches(&argv("./bin/tool a b")));
        assert!(!x.matches(&argv("tool a b")), "never the host command");
        assert!(
            !x.matches(&argv("/skill/bin/tool a")),
            "argv[0] comes mapped"
        );
        assert!(!p("tool *").matches(&argv("./bin/tool")));
        let n = m(&["./bin/tool *", "ls *"], &["./bin/tool --bad *"]);
        assert_eq!(n.check(&argv("./bin/tool x")), allow("./bin/tool *"));
        assert_eq!(
            n.check(&argv("./bin/tool --bad x")),
            deny("./bin/tool --bad *")
        );
        assert_eq!(n.check(&argv("./bin/ls")), Decision::Default);
        assert_eq!(
            n.bundled().into_iter().collect::<Vec<_>>(),
            ["bin/tool".to_string()]
        );
    }

    #[test]
    fn bundled_programs_outside_the_skill_are_refused() {
        for (text, hint) in [
            ("./../etc/x *", "without `..`"),
            ("./bin/../../x", "without `..`"),
            ("/skill/bin/tool *", "`./bin/tool`"),
            ("bin/tool *", "`./bin/tool`"),
            ("/usr/bin/jq *", "`jq`"),
            ("./ *", "components"),
            ("./bin//tool", "components"),
            ("./bin/./tool", "components"),
            ("./bin/ *", "components"),
            ("./bin/*", "literally"),
        ] {
            let e = CliPattern::parse(text)
                .err()
                .unwrap_or_else(|| panic!("{text} parsed"));
            let h = e.hint.clone().unwrap_or_default();
            assert!(h.contains(hint), "{text}: {e} / {h}");
        }
        let long = format!("./{}", "a".repeat(BUNDLED_PATH_MAX + 1));
        assert!(CliPattern::parse(&long).is_err());
    }

    #[test]
    fn missing_bundled_programs_are_listed_with_their_place() {
        let mut pol = super::super::Policy::default();
        pol.allow.cli = vec!["jq *".into(), "./bin/tool *".into()];
        pol.deny.cli = vec!["./bin/gone --x".into()];
        pol.insist.cli = vec!["./bin/tool a".into(), "./bad/../x".into()];
        let missing = missing_bundled(&pol, &|p| p == "bin/tool");
        assert_eq!(
            missing,
            vec![BundledRef {
                column: "deny",
                index: 0,
                pattern: "./bin/gone --x".into(),
                path: "bin/gone".into()
            }]
        );
        assert_eq!(bundled_refs(&pol).len(), 3);
    }

    #[test]
    fn bare_command() {
        let x = p("ls");
        assert_eq!(x.command(), Some("ls"));
        assert!(x.matches(&argv("ls")));
        assert!(!x.matches(&argv("ls -la")));
        assert!(!x.matches(&argv("lsblk")));
        assert!(!x.matches(&[]));
        assert!(x.is_concrete());
    }

    #[test]
    fn final_star_is_zero_or_more() {
        let x = p("jq *");
        assert!(x.has_rest());
        assert!(x.matches(&argv("jq")));
        assert!(x.matches(&argv("jq .")));
        assert!(x.matches(&argv("jq . -r")));
        assert!(x.matches(&argv("jq -r .a /tmp/x.json")));
        assert!(!x.matches(&argv("jqq .")));
        let y = p("jq .");
        assert!(y.matches(&argv("jq .")));
        assert!(!y.matches(&argv("jq")));
        assert!(!y.matches(&argv("jq . -r")));
    }

    #[test]
    fn inner_star_is_one_element() {
        let x = p("git -C * status");
        assert!(!x.has_rest());
        assert!(x.matches(&argv("git -C /some/dir status")), "* crosses /");
        assert!(!x.matches(&argv("git -C status")));
        assert!(!x.matches(&argv("git -C a b status")));
        let y = p("cat *");
        assert!(y.matches(&argv("cat")), "final * matches zero arguments");
        let z = p("cp * *");
        assert!(z.matches(&argv("cp a b")));
        assert!(z.matches(&argv("cp a b c")), "final * is the rest");
        assert!(!z.matches(&argv("cp")));
    }

    #[test]
    fn argument_patterns_on_allow_upstream_bug_7_2_12() {
        let n = m(&["gh issue list *"], &[]);
        assert_eq!(
            n.check(&argv("gh issue list --repo x")),
            allow("gh issue list *")
        );
        assert_eq!(n.check(&argv("gh issue list")), allow("gh issue list *"));
        assert_eq!(n.check(&argv("gh repo delete x")), Decision::Default);
        assert_eq!(n.check(&argv("gh issue create")), Decision::Default);
        assert_eq!(n.check(&argv("gh")), Decision::Default);
        assert_eq!(n.commands().into_iter().collect::<Vec<_>>(), ["gh"]);
    }

    #[test]
    fn globs_within_an_element() {
        let x = p("curl -o out/*.json https://api.x.test/*");
        assert!(x.matches(&argv("curl -o out/a.json https://api.x.test/v1/items")));
        assert!(x.matches(&argv("curl -o out/a/b.json https://api.x.test/")));
        assert!(!x.matches(&argv("curl -o out/a.txt https://api.x.test/v1")));
        let q = p("tar -?f *");
        assert!(q.matches(&argv("tar -xf a.tar")));
        assert!(q.matches(&argv("tar -cf a.tar b")));
        assert!(!q.matches(&argv("tar -xzf a.tgz")));
        let c = p("git [ad]iff");
        assert!(c.matches(&argv("git diff")));
        assert!(c.matches(&argv("git aiff")));
        assert!(!c.matches(&argv("git biff")));
        let b = p("git {status,log} *");
        assert!(b.matches(&argv("git status")));
        assert!(b.matches(&argv("git log --oneline")));
        assert!(!b.matches(&argv("git push")));
        let lit = p(r"echo \*");
        assert!(lit.matches(&argv("echo *")));
        assert!(!lit.matches(&argv("echo x")));
    }

    #[test]
    fn quoted_tokens() {
        let x = p(r#"git commit -m "*""#);
        assert!(!x.has_rest(), "a quoted * is one argument");
        let a = vec![
            "git".into(),
            "commit".into(),
            "-m".into(),
            "fix: a bug".into(),
        ];
        assert!(x.matches(&a));
        assert!(!x.matches(&argv("git commit -m")));
        assert!(!x.matches(&argv("git commit -m a b")));
        let y = p(r#"echo "hello world" *"#);
        assert!(y.has_rest());
        assert!(y.matches(&["echo".to_string(), "hello world".to_string()]));
        assert!(!y.matches(&argv("echo hello world")));
        let z = p(r#"printf """#);
        assert!(z.matches(&["printf".to_string(), String::new()]));
        let g = p(r#"git commit -m "fix: *" *"#);
        assert!(g.matches(&[
            "git".into(),
            "commit".into(),
            "-m".into(),
            "fix: the thing".into()
        ]));
        assert!(!g.matches(&["git".into(), "commit".into(), "-m".into(), "feat: x".into()]));
        assert!(p(r#""gh" *"#).matches(&argv("gh x")));
    }

    #[test]
    fn whitespace_is_flexible() {
        let x = p("  gh   issue\u{a0}list  * ");
        assert!(x.matches(&argv("gh issue list --web")));
    }

    #[test]
    fn rejections() {
        let cases: &[(&str, &str, Option<&str>)] = &[
            ("", "empty cli pattern", None),
            ("   ", "empty cli pattern", None),
            (
                "/usr/bin/curl",
                "not a command name",
                Some("name the command, not its path: `curl`"),
            ),
            (
                "/usr/bin/curl *",
                "not a command name",
                Some("name the command, not its path: `curl`"),
            ),
            (
                "./../run.sh *",
                "not a program of the skill",
                Some("without `..`"),
            ),
            (
                "bin/",
                "not a command name",
                Some("name the command, not its path"),
            ),
            ("*", "not a command name", Some("named literally")),
            ("g* status", "not a command name", Some("named literally")),
            ("{gh,git} *", "not a command name", None),
            ("ls\n-la", "control character", Some("one line")),
            ("ls\t-la", "control character", None),
            ("rm\0 x", "control character", None),
            ("gh$ x", "not a command name", Some("letters, digits")),
            (".", "not a command name", None),
            ("..", "not a command name", None),
            (r#"git commit -m "unterminated"#, "unterminated", None),
            (
                r#"git commit -m "a"b"#,
                "closing `\"` must end its token",
                None,
            ),
            (r#"git commit -m a"b c""#, "must start a token", None),
            ("jq '.a'", "single quotes", Some("double quotes")),
            ("git [abc", "not a valid glob", None),
            ("git {a,b", "not a valid glob", None),
        ];
        for (text, msg, hint) in cases {
            let e = match CliPattern::parse(text) {
                Ok(x) => panic!("{text:?} should be rejected, got {x:?}"),
                Err(e) => e,
            };
            assert!(
                e.message.contains(msg),
                "{text:?}: message {:?} lacks {msg:?}",
                e.message
            );
            if let Some(h) = hint {
                let got = e.hint.clone().unwrap_or_default();
                assert!(got.contains(h), "{text:?}: hint {got:?} lacks {h:?}");
            }
        }
    }

    #[test]
    fn command_names() {
        for ok in [
            "gh",
            "python3",
            "g++",
            "clang-format",
            "7z",
            "a.out",
            "x_y",
            "-weird",
        ] {
            assert!(CliPattern::parse(ok).is_ok(), "{ok}");
        }
        // argv[0] is compared literally: a path never matches.
        let n = m(&["curl *"], &[]);
        assert_eq!(n.check(&argv("/usr/bin/curl x")), Decision::Default);
        assert_eq!(n.check(&argv("CURL x")), Decision::Default);
        assert_eq!(n.check(&[]), Decision::Default);
    }

    #[test]
    fn flag_cluster_expansion() {
        assert_eq!(expand(&argv("rm -rf /")), argv("rm -r -f /"));
        assert_eq!(expand(&argv("tar -xzf a.tgz")), argv("tar -x -z -f a.tgz"));
        assert_eq!(
            expand(&argv("head -n5 x")),
            argv("head -n5 x"),
            "digits: not a cluster"
        );
        assert_eq!(expand(&argv("echo -1")), argv("echo -1"), "negative number");
        assert_eq!(expand(&argv("ls -l")), argv("ls -l"));
        assert_eq!(expand(&argv("x --rf -o=ab")), argv("x --rf -o=ab"));
        assert_eq!(
            expand(&argv("rm -- -rf")),
            argv("rm -- -rf"),
            "after --: operands"
        );
        assert_eq!(
            expand(&argv("-rf -rf")),
            argv("-rf -r -f"),
            "argv[0] is the command"
        );
    }

    #[test]
    fn allow_accepts_expanded_form() {
        let n = m(&["rm -r -f build"], &[]);
        assert_eq!(n.check(&argv("rm -rf build")), allow("rm -r -f build"));
        assert_eq!(
            n.check(&argv("rm -fr build")),
            Decision::Default,
            "allow does not reorder flags"
        );
        let c = m(&["tar -xzf *"], &[]);
        assert_eq!(c.check(&argv("tar -xzf a.tgz")), allow("tar -xzf *"));
        assert_eq!(
            c.check(&argv("tar -x -z -f a.tgz")),
            Decision::Default,
            "allow clusters are literal"
        );
    }

    #[test]
    fn deny_rm_rf_variants_upstream_bug_7_2_15() {
        let n = m(&["rm *"], &["rm -rf *"]);
        let d = deny("rm -rf *");
        assert_eq!(n.check(&argv("rm -rf /")), d);
        assert_eq!(n.check(&argv("rm -fr /")), d);
        assert_eq!(n.check(&argv("rm -r -f /")), d);
        assert_eq!(n.check(&argv("rm -f -r x")), d);
        assert_eq!(n.check(&argv("rm -rfv /")), d);
        assert_eq!(n.check(&argv("rm -v -f -i -r a b")), d);
        assert_eq!(n.check(&argv("rm x -rf")), d, "flags after operands");
        assert_eq!(n.check(&argv("rm -rf")), d);
        assert_eq!(n.check(&argv("rm -r x")), allow("rm *"));
        assert_eq!(n.check(&argv("rm -f x")), allow("rm *"));
        assert_eq!(n.check(&argv("rm x")), allow("rm *"));
        // Long options and case aliases, through rm's option model (issue 13).
        assert_eq!(n.check(&argv("rm --recursive --force /")), d);
        assert_eq!(n.check(&argv("rm -Rf /")), d);
        assert_eq!(n.check(&argv("rm --force -R /")), d);
        assert_eq!(n.check(&argv("rm --recursive x")), allow("rm *"));
        // After `--`, `-rf` is a file name.
        assert_eq!(n.check(&argv("rm -- -rf")), allow("rm *"));
    }

    #[test]
    fn deny_with_positionals_and_flags() {
        let n = m(&["git *"], &["git push --force *", "git status"]);
        let d = deny("git push --force *");
        assert_eq!(n.check(&argv("git push --force")), d);
        assert_eq!(n.check(&argv("git push origin main --force")), d);
        assert_eq!(n.check(&argv("git push --force origin")), d);
        assert_eq!(n.check(&argv("git push origin main")), allow("git *"));
        assert_eq!(n.check(&argv("git pull --force")), allow("git *"));
        // A deny without flag tokens is not escaped by adding flags.
        assert_eq!(n.check(&argv("git status")), deny("git status"));
        assert_eq!(n.check(&argv("git status -s")), deny("git status"));
        assert_eq!(
            n.check(&argv("git status x")),
            allow("git *"),
            "extra operands are a different command"
        );
        // Option values are understood through git's option model (issue 13).
        assert_eq!(n.check(&argv("git -C dir push --force")), d);
        assert_eq!(n.check(&argv("git -C dir push -f")), d);
        assert_eq!(n.check(&argv("git -C dir push origin")), allow("git *"));
        assert_eq!(
            n.check(&argv("git -C push status")),
            deny("git status"),
            "`push` is -C's value"
        );
    }

    #[test]
    fn deny_matches_every_spelling_issue_13() {
        let n = m(
            &["rm *", "sed *", "chmod *", "curl *", "git *", "cp *"],
            &[
                "rm -rf *",
                "sed -i *",
                "chmod -R *",
                "curl -X DELETE *",
                "git push --force *",
                "cp --force *",
            ],
        );
        for (call, rule) in [
            ("rm -Rf x", "rm -rf *"),
            ("rm -fR x", "rm -rf *"),
            ("rm --recursive --force x", "rm -rf *"),
            ("rm -r -f x", "rm -rf *"),
            ("rm -f -r x", "rm -rf *"),
            ("rm --rec -f x", "rm -rf *"),
            ("rm x --force -R", "rm -rf *"),
            ("sed --in-place s/a/b/ f", "sed -i *"),
            ("sed --in-place=.bak s/a/b/ f", "sed -i *"),
            ("sed -i.bak s/a/b/ f", "sed -i *"),
            ("sed -ni s/a/b/ f", "sed -i *"),
            ("chmod --recursive 777 /", "chmod -R *"),
            ("curl --request=DELETE https://x", "curl -X DELETE *"),
            ("curl -XDELETE https://x", "curl -X DELETE *"),
            ("curl -sXDELETE https://x", "curl -X DELETE *"),
            ("git push origin main -f", "git push --force *"),
            ("git -c a=b push --force", "git push --force *"),
            ("cp -f a b", "cp --force *"),
            ("cp -rf a b", "cp --force *"),
            // `-i` here is -e's value; the pattern as written still denies it (fail closed).
            ("sed -e -i f", "sed -i *"),
        ] {
            assert_eq!(n.check(&argv(call)), deny(rule), "{call}");
        }
        for (call, rule) in [
            ("rm -r x", "rm *"),
            ("rm --force x", "rm *"),
            ("rm -- -rf", "rm *"),
            ("sed -n s/a/b/ f", "sed *"),
            ("chmod -r f", "chmod *"),
            ("curl -X GET https://x", "curl *"),
            ("curl -d DELETE https://x", "curl *"),
            ("git push --force-with-lease", "git *"),
            ("git commit -f", "git *"),
            ("cp -r a b", "cp *"),
        ] {
            assert_eq!(n.check(&argv(call)), allow(rule), "{call}");
        }
    }

    #[test]
    fn deny_patterns_are_normalised_too() {
        let n = m(&["rm *"], &["rm --recursive --force *"]);
        let d = deny("rm --recursive --force *");
        assert_eq!(n.check(&argv("rm -rf x")), d);
        assert_eq!(n.check(&argv("rm -Rf x")), d);
        assert_eq!(n.check(&argv("rm -r x")), allow("rm *"));
    }

    #[test]
    fn allow_is_not_widened() {
        // An allow pattern matches as written (and with clusters expanded), never other spellings.
        let n = m(&["rm -r *"], &[]);
        assert_eq!(n.check(&argv("rm -r x")), allow("rm -r *"));
        assert_eq!(n.check(&argv("rm -R x")), Decision::Default);
        assert_eq!(n.check(&argv("rm --recursive x")), Decision::Default);
        let s = m(&["sed -i *"], &[]);
        assert_eq!(s.check(&argv("sed --in-place x f")), Decision::Default);
    }

    #[test]
    fn unmodelled_flags() {
        assert_eq!(
            p("frob -x --all *").unmodelled_flags(),
            Some(vec!["-x", "--all"])
        );
        assert_eq!(p("frob sub *").unmodelled_flags(), None);
        assert_eq!(p("rm -rf *").unmodelled_flags(), None);
        // Without a model, long spellings are not caught (what P008 warns about).
        let n = m(&["frob *"], &["frob -x *"]);
        assert_eq!(n.check(&argv("frob --extra")), allow("frob *"));
        assert_eq!(n.check(&argv("frob -vx")), deny("frob -x *"));
    }

    #[test]
    fn deny_glob_flags() {
        let n = m(&["curl *"], &["curl -X DELETE *", "curl --data* *"]);
        assert_eq!(
            n.check(&argv("curl -X DELETE https://x")),
            deny("curl -X DELETE *")
        );
        assert_eq!(
            n.check(&argv("curl --data-binary @f https://x")),
            deny("curl --data* *")
        );
        assert_eq!(
            n.check(&argv("curl https://x --data=1")),
            deny("curl --data* *")
        );
        assert_eq!(n.check(&argv("curl -X GET https://x")), allow("curl *"));
    }

    #[test]
    fn precedence_and_first_rule() {
        let n = m(&["gh issue *", "gh *"], &["gh issue delete *"]);
        assert_eq!(n.check(&argv("gh issue list")), allow("gh issue *"));
        assert_eq!(n.check(&argv("gh pr list")), allow("gh *"));
        assert_eq!(
            n.check(&argv("gh issue delete 3")),
            deny("gh issue delete *")
        );
        assert_eq!(n.check(&argv("git status")), Decision::Default);
        assert_eq!(m(&[], &[]).check(&argv("ls")), Decision::Default);
    }

    #[test]
    fn commands() {
        let n = m(
            &["gh issue *", "gh *", "jq *", "curl *", "rm x"],
            &["curl *", "rm -rf *", "sh *"],
        );
        let c: Vec<String> = n.commands().into_iter().collect();
        assert_eq!(
            c,
            ["gh", "jq", "rm"],
            "curl is denied outright; deny-only sh never exists"
        );
        assert_eq!(n.allow_patterns().len(), 5);
        assert_eq!(n.deny_patterns()[1].as_str(), "rm -rf *");
    }

    #[test]
    fn matcher_reports_index() {
        let a = vec!["ls".to_string(), "/bin/ls".to_string()];
        assert_eq!(CliMatcher::new(&a, &[]).unwrap_err().index, 1);
        let d = vec!["".to_string()];
        let e = CliMatcher::new(&[], &d).unwrap_err();
        assert_eq!((e.list, e.index), (crate::policy::RuleList::Deny, 0));
    }

    #[test]
    fn covers() {
        let c = |a: &str, b: &str| p(a).covers(&p(b));
        assert!(c("gh *", "gh issue list *"));
        assert!(c("gh *", "gh"));
        assert!(c("gh issue *", "gh issue list --repo x"));
        assert!(c("gh issue *", "gh issue"));
        assert!(!c("gh issue list *", "gh *"));
        assert!(!c("gh issue list *", "gh repo delete x"));
        assert!(!c("gh issue", "gh issue *"));
        assert!(c("gh issue *", "gh issue *"));
        assert!(c("git * status", "git x status"));
        assert!(!c("git * status", "git -C x status"));
        assert!(
            c("git * status", "git [ab] status"),
            "* covers any one-element glob"
        );
        assert!(!c("git [ab] status", "git * status"));
        assert!(c("git [ab] status", "git a status"));
        assert!(c("cat *.json", "cat a.json"));
        assert!(!c("cat *.json", "cat *"));
        assert!(!c("cat *.json", "cat a*.json"), "conservative");
        assert!(!c("jq", "jq *"));
        assert!(!c("rm -rf *", "rm -r -f x"), "conservative for allow");
        let d = |a: &str, b: &str| p(a).covers_as_deny(&p(b));
        assert!(d("rm -rf *", "rm -r -f x"));
        // Between two globbed patterns only token-wise coverage is detected (a missed
        // diagnostic, never a hole: the deny still wins at run time).
        assert!(!d("rm -rf *", "rm -fr *"));
        assert!(d("rm *", "rm -rf *"));
        assert!(!d("rm -rf *", "rm *"));
    }

    #[test]
    fn an_escaped_quote_inside_quotes_is_a_literal_quote() {
        let q = p(r#"echo "say \"hi\"" "\"" "a\\""#);
        let want: Vec<String> = ["echo", "say \"hi\"", "\"", "a\\"]
            .map(String::from)
            .to_vec();
        assert!(q.matches(&want));
        assert_eq!(q.concrete_argv(), Some(want));
        assert!(!q.matches(&argv("echo sayxhix \" a\\")));
        // An unescaped `"` still ends the token; one left open is an error, as before.
        assert!(CliPattern::parse(r#"echo "a\" b"#).is_err());
        assert!(CliPattern::parse(r#"echo "a" b""#).is_err());
        // A quoted token ending in a lone `\` was a dangling escape before and still fails.
        assert!(CliPattern::parse(r#"echo "a\""#).is_err());
    }

    #[test]
    fn an_argument_written_with_escaped_glob_characters_is_literal_for_covers() {
        // The exact rule learn drafts for `gh api repos/o/r/contributors?per_page=1`.
        let exact = p(r"gh api --method=GET repos/o/r/contributors\?per_page=1");
        assert!(exact.is_concrete());
        assert_eq!(
            exact.concrete_argv(),
            Some(argv(
                "gh api --method=GET repos/o/r/contributors?per_page=1"
            ))
        );
        let c = |a: &str, b: &str| p(a).covers(&p(b));
        assert!(c(
            "gh api --method=GET repos/*/*/contributors?per_page=[0-9]*",
            r"gh api --method=GET repos/o/r/contributors\?per_page=1"
        ));
        assert!(!c(
            "gh api --method=GET repos/*/*/contributors?per_page=[0-9]*",
            r"gh api --method=GET repos/o/r/contributors\?per_page=x"
        ));
        // Token-wise too, when the other pattern also has a glob or a final `*`.
        assert!(c("cat *.json *", r"cat \*.json x *"));
        assert!(c("cat [*]", r"cat \*"));
        assert!(!c("cat a", r"cat \*"), "`\\*` is the text `*`, not `a`");
        assert!(c(r"cat \*", r"cat \*"));
        // An unescaped glob character left is still a glob: conservative as before.
        assert!(!c("cat *.json", r"cat \*.js?n"));
        assert!(!p("cat *.json").is_concrete());
        assert!(!p(r"cat \*.json *").is_concrete());
        assert_eq!(super::unescape(r"a\?b\\c"), Some(r"a?b\c".into()));
        assert_eq!(super::unescape(r"a\"), None, "a dangling escape");
        assert_eq!(super::unescape("a?"), None);
    }
}
