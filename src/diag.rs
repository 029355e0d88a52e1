//! Diagnostics: one located message about an input file, with a stable code and an optional hint.
//!
//! Every check that looks at user input (BAND.md, SKILL.md, schemas, the skill layout) reports through
//! [`Diagnostic`]. The codes are stable: they are listed in `docs/lint.md` and in SARIF output, and
//! a published code never changes meaning.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// How bad a diagnostic is. Errors fail `band lint` and refuse a run; warnings do neither
/// (unless `--deny-warnings`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// A position in a file: 1-based line and column. `line == 0` means "the whole file".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
pub struct Loc {
    pub line: usize,
    pub col: usize,
}

impl Loc {
    pub const FILE: Loc = Loc { line: 0, col: 0 };

    pub fn new(line: usize, col: usize) -> Self {
        Loc { line, col }
    }
}

macro_rules! codes {
    ($( $variant:ident = $code:literal, $name:literal, $sev:ident, $summary:literal; )*) => {
        /// Every diagnostic code band can emit. The string form (`F001`) is the stable public name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Code { $( $variant, )* }

        impl Code {
            pub const ALL: &'static [Code] = &[ $( Code::$variant, )* ];

            /// The stable code, e.g. `F001`.
            pub fn as_str(self) -> &'static str {
                match self { $( Code::$variant => $code, )* }
            }

            /// A short kebab-case name, e.g. `missing-frontmatter`.
            pub fn name(self) -> &'static str {
                match self { $( Code::$variant => $name, )* }
            }

            /// The severity this code is normally reported with.
            pub fn default_severity(self) -> Severity {
                match self { $( Code::$variant => Severity::$sev, )* }
            }

            /// One sentence on what the code means (used by SARIF rules and docs/lint.md).
            pub fn summary(self) -> &'static str {
                match self { $( Code::$variant => $summary, )* }
            }
        }
    };
}

codes! {
    // F: the file and its fields
    MissingFrontmatter = "F001", "missing-frontmatter", Error, "The file does not start with a `---` line, or the frontmatter is never closed.";
    YamlSyntax = "F002", "yaml-syntax", Error, "The frontmatter is not valid YAML.";
    NotAMapping = "F003", "not-a-mapping", Error, "The frontmatter is valid YAML but not a mapping of keys to values.";
    MissingField = "F004", "missing-field", Error, "A required field is missing or empty.";
    WrongType = "F005", "wrong-type", Error, "A field has the wrong type (for example a number where a list is expected).";
    InvalidName = "F006", "invalid-name", Error, "The `band` name is not kebab-case.";
    UnknownKey = "F007", "unknown-key", Error, "A key band does not know, at any level of the frontmatter (often a typo): an error, so a misspelt key can never silently widen or drop a rule.";
    InvalidVersion = "F008", "invalid-version", Error, "`version` is not a positive integer.";
    InvalidTarget = "F009", "invalid-target", Error, "`execution.target` is not one of host, qemu, lima, local-lima, local-dangerously or ssh://user@host[:port] (upstream's cloudflare and local-docker are not supported).";
    BadReference = "F010", "bad-reference", Error, "A `path`, `extends` or `includes` reference cannot be resolved, escapes, or forms a cycle.";
    Ignored = "F011", "ignored-field", Warning, "A field band accepts for compatibility but does not use.";
    FileUnreadable = "F012", "file-unreadable", Error, "A file could not be read.";
    FrontmatterTooComplex = "F013", "frontmatter-too-complex", Error, "The frontmatter exceeds a parsing limit (size, nesting depth, brackets, anchors or aliases), so it is not parsed.";
    TargetSubstituted = "F014", "target-substituted", Warning, "`execution.target: local-dangerously` (upstream: no sandbox) runs on the host target, inside band's sandbox.";
    RemoteTarget = "F015", "remote-target", Warning, "`execution.target` names another machine (`ssh://`, `sandboxd://`): a run goes there only when its user chooses it (`--target`, or `[targets]` in the config).";
    // P: policy rules
    InvalidPattern = "P001", "invalid-pattern", Error, "A rule pattern is malformed or uses characters band refuses.";
    DenyInsist = "P002", "deny-insist", Error, "An item is insisted on but also denied, so the run could never satisfy it.";
    InsistNotAllowed = "P003", "insist-not-allowed", Error, "An insisted item is not allowed, so the run could never satisfy it.";
    NeverMatches = "P004", "never-matches", Warning, "An allow rule is entirely covered by a deny rule and can never take effect.";
    DuplicateRule = "P005", "duplicate-rule", Warning, "The same rule appears twice in one list.";
    CeilingExceeded = "P006", "ceiling-exceeded", Warning, "An extended or included band asks for more than its parent allows; the extra is dropped.";
    RequiresUnsatisfied = "P007", "requires-unsatisfied", Error, "An included band requires network egress that the effective policy denies.";
    DenyFlagsUnmodelled = "P008", "deny-flags-unmodelled", Warning, "A cli deny pattern names flags of a command band has no option model for, so other spellings of the same options are not denied.";
    ShellBuiltin = "P009", "shell-builtin", Warning, "An `allow.cli` or `insist.cli` rule names a shell builtin (echo, printf, cd, test, read, export…): the shell runs the builtin itself, never through band's CLI gate, so the rule never sees it. An insist on a builtin with no program of the same name (cd, read, export…) can never be satisfied: an error.";
    PathRefused = "P010", "path-refused", Error, "An absolute read/write rule names a path the sandbox never binds (a secret, a tree it manages, read-only system content for writing, a prefix covering its own paths), or an absolute deny falls inside a bound host path; the run is refused.";
    PathNotShown = "P011", "path-not-shown", Warning, "An absolute read rule names a part of /usr the sandbox does not show (only /usr/lib*, /usr/share, /usr/libexec and the declared programs), so it gives nothing.";
    NeverCopied = "P012", "never-copied", Warning, "A workspace rule reaches into `.git` or `target`, folders a run gets only when a rule names them from the workspace root (`.git/**`, `target/**`), through a wildcard or a bare name; or a write rule names `.git`, which is never written back.";
    SiteRefused = "P013", "site-refused", Warning, "The site policy of this machine (`/etc/band/site.md`, or `$BAND_SITE_POLICY`) refuses the band: a rule it denies, one above its ceiling, an insist the band does not allow, or something switched off for the skill's tier. band-server refuses the run; the warning names the site rule.";
    GitWithoutWorkTree = "P014", "git-without-work-tree", Warning, "A band allows `git` and copies the repository's history (`.git/**`) but not the whole work tree: the copy holds only what the read rules admit, so git in the run sees every tracked file they leave out as deleted.";
    // L: limits
    InvalidLimit = "L001", "invalid-limit", Error, "A limit is not a number or a valid human size/duration.";
    LimitOutOfRange = "L002", "limit-out-of-range", Error, "A limit is outside the range band accepts.";
    LimitNotEnforced = "L003", "limit-not-enforced", Warning, "A limit band parses but cannot enforce (maxCostDollars).";
    // E: environment and secrets
    InvalidSecretName = "E001", "invalid-secret-name", Error, "A secret name is not an environment variable name, or is one band reserves.";
    RequiredSecretNotDeclared = "E002", "required-secret-not-declared", Error, "A secret in `requires.secrets` is not listed in `env.secrets`, so it would never reach the script.";
    SecretHostNotAllowed = "E003", "secret-host-not-allowed", Error, "A bound secret (`env.secrets: [{name, hosts}]`) names a host the effective `allow.net` does not admit, so its value could never be sent there; band-server refuses the run.";
    // S: skill layout
    SkillMdMissing = "S001", "skill-md-missing", Error, "The skill has no SKILL.md.";
    SkillMdField = "S002", "skill-md-field", Error, "SKILL.md frontmatter lacks `name` or `description`, or `name` does not match the folder.";
    NotExecutable = "S003", "not-executable", Error, "A script is not an executable file.";
    MissingInputSchema = "S004", "missing-input-schema", Warning, "A script has no input schema (schemas/input/ or upstream's co-located input_schema.json), so it takes no input: an empty object.";
    MissingOutputSchema = "S005", "missing-output-schema", Warning, "A script has no output schema in schemas/output/ (recommended).";
    NoBand = "S006", "no-band", Error, "A script has no band file at any level, so it could never run.";
    NoScripts = "S007", "no-scripts", Warning, "The skill has no scripts.";
    OrphanSchema = "S008", "orphan-schema", Warning, "A schema names a script that does not exist.";
    UnsafeLink = "S009", "unsafe-link", Error, "A symlink in the skill points outside it.";
    BundledProgramMissing = "S010", "bundled-program-missing", Error, "A `./` cli pattern names a file that is not in the skill, so the run is refused.";
    BundledProgramUndeclared = "S011", "bundled-program-undeclared", Warning, "A file of the skill looks executable (execute bit, `#!` line or ELF header) but is no script's entry and no `./` cli pattern names it: it cannot execute in the sandbox.";
    NativeEntry = "S012", "native-entry", Error, "A script's entry is a native executable; /skill is noexec, so it cannot start.";
    InterpreterNotAllowed = "S013", "interpreter-not-allowed", Error, "A script band-server starts with an interpreter (it has no execute bit) names one the band's allow.cli does not allow, so the run cannot start.";
    // C: contracts
    SchemaJson = "C001", "schema-json", Error, "A schema file is not valid JSON.";
    SchemaInvalid = "C002", "schema-invalid", Error, "A schema does not compile (bad keyword, unknown draft, or unresolvable $ref).";
    ConfigInvalid = "C003", "config-invalid", Error, "The band's config block does not match schemas/band-config.schema.json.";
    ShadowedInput = "C004", "shadowed-input", Warning, "An input property is named like one of band run's own flags (`target`, `workspace`, `json`…): `--name=…` on the command line is band's, not the script's.";
}

/// Where the documentation is published; SARIF help links point into it.
pub const DOCS_BASE_URL: &str = "https://github.com/band-sh/band/blob/main/docs/";

impl Code {
    /// The code's entry in `docs/lint.md` (its anchor is in the code table).
    pub fn help_uri(self) -> String {
        format!(
            "{DOCS_BASE_URL}lint.md#{}",
            self.as_str().to_ascii_lowercase()
        )
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// The most characters of a diagnostic's message or hint: what they quote of a skill (a value,
/// a pattern, a line) is the skill's, and a 4 MB pattern quoted once per script must not make
/// lint's output, or band mcp's answer, gigabytes.
pub const MAX_MESSAGE_CHARS: usize = 1000;

/// `text`, cut to [`MAX_MESSAGE_CHARS`] with `…` where it was cut.
fn clipped(text: String) -> String {
    match text.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// One located message about an input file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    pub severity: Severity,
    pub code: Code,
    pub message: String,
    pub path: PathBuf,
    #[serde(flatten)]
    pub loc: Loc,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl Diagnostic {
    /// A diagnostic with the code's default severity.
    pub fn new(code: Code, path: impl Into<PathBuf>, loc: Loc, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: code.default_severity(),
            code,
            message: clipped(message.into()),
            path: path.into(),
            loc,
            hint: None,
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(clipped(hint.into()));
        self
    }

    pub fn with_severity(mut self, severity: Severity) -> Self {
        self.severity = severity;
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// `path:line:col: severity[code]: message` — the one-line form used in errors and logs.
    pub fn headline(&self) -> String {
        format!(
            "{}: {}[{}]: {}",
            location_prefix(&self.path, self.loc),
            self.severity.as_str(),
            self.code,
            self.message
        )
    }
}

/// As people read it: inert for a terminal ([`inert`]), since the path and the message quote a
/// skill author's text. Machines read the fields (lint's JSON and SARIF).
impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&inert(&self.headline()))?;
        if let Some(hint) = &self.hint {
            write!(f, "\n  hint: {}", inert(hint))?;
        }
        Ok(())
    }
}

/// `path`, `path:line` or `path:line:col`, depending on how precise the location is.
pub fn location_prefix(path: &Path, loc: Loc) -> String {
    match (loc.line, loc.col) {
        (0, _) => path.display().to_string(),
        (line, 0) => format!("{}:{line}", path.display()),
        (line, col) => format!("{}:{line}:{col}", path.display()),
    }
}

/// True when any diagnostic is an error.
pub fn has_errors(diags: &[Diagnostic]) -> bool {
    diags.iter().any(Diagnostic::is_error)
}

/// The closest candidate within edit distance 2 (case-insensitive), for "did you mean" hints.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let word = word.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| (levenshtein(&word, &c.to_ascii_lowercase()), c))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The diagnostic for a file of a skill that band refuses to read ([`crate::skillfs`]): a link
/// out of the skill is S009, worded as lint's own check of every link (so the two coincide), and
/// so is a FIFO, socket or device where a file should be.
pub fn refused_file(path: &Path, e: &crate::skillfs::SkillFileError) -> Diagnostic {
    match e {
        crate::skillfs::SkillFileError::Outside { .. } => Diagnostic::new(
            Code::UnsafeLink,
            path,
            Loc::FILE,
            "symlink points outside the skill (or nowhere)",
        )
        .with_hint("copy the file into the skill instead of linking to it"),
        e => Diagnostic::new(Code::UnsafeLink, path, Loc::FILE, e.to_string())
            .with_hint("make it a regular file of the skill"),
    }
}

/// `s` made inert for a terminal: what a skill folder or a script controls (file names, messages
/// quoting them, output) never drives the terminal it is shown on. every C0 control but `\n` and `\t` in caret notation (ESC is
/// `^[`, BEL `^G`, CR `^M` except in CRLF, which becomes LF), DEL as `^?`, C1 controls
/// (U+0080–U+009F, 8-bit CSI/OSC) and the bidirectional overrides and isolates as `\u{…}`. The
/// rest is unchanged, so an escape sequence shows as its text (`^[]52;c;…^G`) and does nothing.
pub fn inert(s: &str) -> Cow<'_, str> {
    let inert = |c: char| {
        matches!(c, '\n' | '\t')
            || !(c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'))
    };
    if s.chars().all(inert) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if inert(c) => out.push(c),
            '\r' if chars.peek() == Some(&'\n') => {}
            '\u{7f}' => out.push_str("^?"),
            c if (c as u32) < 0x20 => {
                out.push('^');
                out.push(char::from(b'@' + c as u8));
            }
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    Cow::Owned(out)
}

/// `s` on one line: each line break (`\n`, `\r`) as the two characters `\n` or `\r`. For a
/// field shown as one line among others (a path, an argument): one holding a newline could
/// otherwise start a line of its own that reads as band's (`band: denied: …`). Shown through
/// [`inert`] as well, it is inert and single.
pub fn one_line(s: &str) -> Cow<'_, str> {
    if !s.contains(['\n', '\r']) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(s.replace('\n', "\\n").replace('\r', "\\r"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_line_keeps_a_field_on_its_line() {
        assert_eq!(super::one_line("out/a.txt"), "out/a.txt");
        assert_eq!(
            super::one_line("a\nband: denied: ok\r\nb"),
            "a\\nband: denied: ok\\r\\nb"
        );
    }

    /// A message or hint quoting a huge value is cut, on a character boundary, and says so.
    #[test]
    fn messages_and_hints_are_clipped() {
        let d = super::Diagnostic::new(
            super::Code::ALL[0],
            "BAND.md",
            super::Loc::new(1, 1),
            format!("pattern `{}`", "é".repeat(5000)),
        )
        .with_hint("h".repeat(5000));
        assert_eq!(d.message.chars().count(), super::MAX_MESSAGE_CHARS + 1);
        assert!(d.message.ends_with('…'));
        assert_eq!(
            d.hint.as_deref().map(|h| h.chars().count()),
            Some(super::MAX_MESSAGE_CHARS + 1)
        );
    }

    use super::*;

    #[test]
    fn codes_are_unique_and_well_formed() {
        let mut seen = std::collections::BTreeSet::new();
        for code in Code::ALL {
            assert!(seen.insert(code.as_str()), "duplicate code {code}");
            let s = code.as_str();
            assert_eq!(s.len(), 4);
            assert!(s[1..].chars().all(|c| c.is_ascii_digit()));
        }
    }

    #[test]
    fn did_you_mean_finds_close_keys() {
        assert_eq!(
            did_you_mean("limits", ["limit", "allow", "deny"]),
            Some("limit")
        );
        assert_eq!(
            did_you_mean("alow", ["limit", "allow", "deny"]),
            Some("allow")
        );
        assert_eq!(did_you_mean("zzzzzz", ["limit", "allow"]), None);
    }

    #[test]
    fn headline_formats_location() {
        let d = Diagnostic::new(Code::YamlSyntax, "a/BAND.md", Loc::new(3, 5), "bad");
        assert_eq!(d.headline(), "a/BAND.md:3:5: error[F002]: bad");
        let d = Diagnostic::new(Code::SkillMdMissing, "a", Loc::FILE, "none");
        assert_eq!(d.headline(), "a: error[S001]: none");
    }
}

/// The code table of `docs/lint.md` (a test keeps the file in sync with [`Code::ALL`]). Each
/// code carries an anchor (`#f001`), the target of its SARIF `helpUri` ([`Code::help_uri`]).
pub fn lint_codes_markdown() -> String {
    let mut s = String::from("| code | name | default | meaning |\n|---|---|---|---|\n");
    for c in Code::ALL {
        s.push_str(&format!(
            "| <a id=\"{}\"></a>{} | `{}` | {} | {} |\n",
            c.as_str().to_ascii_lowercase(),
            c.as_str(),
            c.name(),
            c.default_severity().as_str(),
            c.summary()
        ));
    }
    s
}

#[cfg(test)]
mod docs_tests {
    #[test]
    fn docs_lint_md_lists_every_code() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/lint.md");
        let doc = fs_err::read_to_string(path).unwrap_or_default();
        let table = super::lint_codes_markdown();
        assert!(
            doc.contains(&table),
            "docs/lint.md is out of date; paste this table into it:\n{table}"
        );
    }
}
