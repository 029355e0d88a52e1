//! `read` / `write` patterns: which paths a run may read or write.
//!
//! Patterns are globs (globset, `*` and `?` do not cross `/`, `**` does, `[...]`, `{a,b}`):
//!
//! - **Relative** patterns name paths in the workspace: `data/**/*.csv`. A leading `./` is
//!   dropped, as are `.` components and doubled or trailing `/`; `..` is rejected.
//! - **Absolute** patterns start with `/` and name paths on the execution host: `/etc/ssl/**`.
//!   They only ever match absolute paths, and relative patterns only relative paths.
//! - A relative pattern without `/` (`*.pem`, `.env*`, `secrets`, also `secrets/`) matches the
//!   name at any depth, like gitignore: it is `**/<pattern>`. Write `./secrets` to mean only the
//!   top-level one.
//! - A pattern matches a path when it matches the path **or any of its ancestors**, so a pattern
//!   naming a directory covers everything below it: `data` matches `data/x/y.csv`, and
//!   `deny: [**/.env*]` also denies `.envrc.d/x`.
//!
//! File-level denies are real here (upstream could only deny whole directories, §7.2.17); it is
//! up to the enforcement layer to apply them per file.
//!
//! Precedence in [`FsMatcher`]: deny > allow > default deny.

use std::sync::OnceLock;

use globset::{Glob, GlobBuilder, GlobMatcher};

use super::{Decision, PatternError};

const GLOB_META: [char; 7] = ['*', '?', '[', ']', '{', '}', '\\'];

fn has_meta(s: &str) -> bool {
    s.contains(GLOB_META)
}

fn err(message: impl Into<String>) -> PatternError {
    PatternError::new(message)
}

/// One parsed `read`/`write` pattern.
#[derive(Debug, Clone)]
pub struct FsPattern {
    text: String,
    /// Normalised pattern: `data/**`, `*.pem`, `/etc/hosts`.
    normalized: String,
    /// Its components (without the leading `/` of an absolute pattern).
    components: Vec<String>,
    absolute: bool,
    /// Relative to the workspace root (or absolute), as opposed to "this name at any depth".
    anchored: bool,
    /// How many leading components have no glob metacharacter.
    static_len: usize,
    prefix: String,
    glob: Glob,
    /// The glob's matcher, built on first use: building it (a regex) costs far more than parsing,
    /// and most parsed patterns are only validated (lint, composition) and never matched.
    matcher: OnceLock<GlobMatcher>,
}

/// A path, normalised for matching: `(absolute, components)`. `None` when it has a `..`
/// component, a NUL, or no component at all.
fn normalize_path(path: &str) -> Option<(bool, Vec<&str>)> {
    if path.contains('\0') {
        return None;
    }
    let absolute = path.starts_with('/');
    let mut comps = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => return None,
            c => comps.push(c),
        }
    }
    if comps.is_empty() {
        None
    } else {
        Some((absolute, comps))
    }
}

impl FsPattern {
    /// Parse one pattern. See the module documentation.
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        if text.is_empty() {
            return Err(err("empty path pattern")
                .with_hint("write a path relative to the workspace, e.g. `data/**`"));
        }
        if let Some(c) = text.chars().find(|c| c.is_control()) {
            return Err(err(format!(
                "`{}` contains a control character ({c:?})",
                text.escape_debug()
            ))
            .with_hint("path patterns cannot contain NUL, newlines or other control characters"));
        }
        if text.starts_with('~') {
            return Err(
                err(format!("`{text}`: `~` is not expanded in path patterns")).with_hint(
                    "write the absolute path (`/home/…`), or a path relative to the workspace",
                ),
            );
        }
        let absolute = text.starts_with('/');
        let mut components: Vec<String> = Vec::new();
        let mut dot_prefix = false;
        for (i, c) in text.split('/').enumerate() {
            match c {
                "" => {}
                "." => dot_prefix |= i == 0,
                ".." => {
                    return Err(err(format!("`{text}` contains a `..` component")).with_hint(if absolute {
                        "write the absolute path without `..`".to_string()
                    } else {
                        "patterns cannot leave the workspace; use an absolute path (`/…`) for host paths".to_string()
                    }));
                }
                c => components.push(c.to_string()),
            }
        }
        if components.is_empty() {
            let hint = if absolute {
                "write `/**` for every host path"
            } else {
                "write `**` for the whole workspace"
            };
            return Err(err(format!("`{text}` names no path")).with_hint(hint));
        }
        let anchored = absolute || dot_prefix || components.len() > 1;
        let joined = components.join("/");
        let normalized = if absolute {
            format!("/{joined}")
        } else if dot_prefix && components.len() == 1 {
            format!("./{joined}")
        } else {
            joined.clone()
        };
        let glob_text = match (absolute, anchored) {
            (true, _) => format!("/{joined}"),
            (false, true) => joined,
            (false, false) => format!("**/{joined}"),
        };
        let glob = GlobBuilder::new(&glob_text)
            .literal_separator(true)
            .build()
            .map_err(|e| {
                err(format!("`{text}` is not a valid glob: {}", e.kind())).with_hint(
                    "globs support `*`, `**`, `?`, `[abc]`, `{a,b}`; write `\\*` for a literal `*`",
                )
            })?;
        let static_len = if anchored {
            components.iter().take_while(|c| !has_meta(c)).count()
        } else {
            0
        };
        let prefix_body = components[..static_len].join("/");
        let prefix = if absolute {
            format!("/{prefix_body}")
        } else {
            prefix_body
        };
        Ok(FsPattern {
            text: text.to_string(),
            normalized,
            components,
            absolute,
            anchored,
            static_len,
            prefix,
            glob,
            matcher: OnceLock::new(),
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The normalised pattern: `./data/**` → `data/**`, `/etc//x/` → `/etc/x`. A one-component
    /// pattern anchored by `./` keeps it (`./secrets`), since `secrets` alone means any depth.
    pub fn normalized(&self) -> &str {
        &self.normalized
    }

    /// An absolute pattern: it names execution-host paths.
    pub fn is_absolute(&self) -> bool {
        self.absolute
    }

    /// Anchored at the workspace root (or absolute), rather than a name matched at any depth.
    pub fn is_anchored(&self) -> bool {
        self.anchored
    }

    /// No glob metacharacter: the pattern names one path (and everything below it).
    pub fn is_concrete(&self) -> bool {
        self.static_len == self.components.len()
    }

    /// The longest leading path without glob metacharacters: `data/in` for `data/in/**/*.csv`,
    /// `/etc` for `/etc/*.conf`, `/` for `/*.pem`, and `` for a pattern matched at any depth
    /// (`*.pem`, `secrets`). For a pattern without metacharacters it is the whole path, which may
    /// name a file.
    pub fn static_prefix(&self) -> &str {
        &self.prefix
    }

    /// Whether `path` (relative to the workspace, `/`-separated, or absolute) or one of its
    /// ancestors matches. Relative patterns match only relative paths, absolute patterns only
    /// absolute ones. A path with a `..` component never matches.
    pub fn matches(&self, path: &str) -> bool {
        match normalize_path(path) {
            Some((absolute, comps)) => absolute == self.absolute && self.matches_components(&comps),
            None => false,
        }
    }

    fn matches_components(&self, comps: &[&str]) -> bool {
        let lead = if self.absolute { "/" } else { "" };
        let glob = self.matcher.get_or_init(|| self.glob.compile_matcher());
        (1..=comps.len())
            .rev()
            .any(|n| glob.is_match(format!("{lead}{}", comps[..n].join("/"))))
    }

    /// Whether every path `other` matches is also matched by `self`. Conservative (`false` when
    /// unsure): exact equality; a concrete `other` that `self` matches; `**` (or `/**`) covers
    /// everything on its side; `P/**` and a concrete `P` cover any anchored pattern whose static
    /// prefix lies under `P`.
    pub fn covers(&self, other: &FsPattern) -> bool {
        if self.absolute != other.absolute {
            return false;
        }
        if self.normalized == other.normalized && self.anchored == other.anchored {
            return true;
        }
        if other.anchored && other.is_concrete() {
            let comps: Vec<&str> = other.components.iter().map(String::as_str).collect();
            return self.matches_components(&comps);
        }
        if self.components.len() == 1 && self.components[0] == "**" {
            return true;
        }
        // A name at any depth (`out`, from `out/`) includes it at the root: it covers what an
        // anchored pattern under `./out` names.
        if !self.anchored
            && self.components.len() == 1
            && !has_meta(&self.components[0])
            && other.anchored
            && other.components[..other.static_len].first() == self.components.first()
        {
            return true;
        }
        if !self.anchored || !other.anchored {
            return false;
        }
        let base = if self.is_concrete() {
            &self.components[..]
        } else if self.static_len + 1 == self.components.len()
            && self.components[self.static_len] == "**"
        {
            &self.components[..self.static_len]
        } else {
            return false;
        };
        other.components[..other.static_len].starts_with(base)
    }
}

/// Allow and deny `read` or `write` patterns, compiled.
#[derive(Debug, Clone)]
pub struct FsMatcher {
    allow: Vec<FsPattern>,
    deny: Vec<FsPattern>,
}

impl FsMatcher {
    /// Parse both lists. On error: the list of the first bad pattern, its index, what is wrong.
    pub fn new(allow: &[String], deny: &[String]) -> Result<Self, super::RuleListError> {
        let (allow, deny) = super::parse_rule_lists(allow, deny, FsPattern::parse)?;
        Ok(FsMatcher { allow, deny })
    }

    /// Decide an access to `path`: relative (to the workspace, `/`-separated) or absolute.
    /// A path with a `..` component, or no component, is denied by default.
    pub fn check(&self, path: &str) -> Decision {
        let Some((absolute, comps)) = normalize_path(path) else {
            return Decision::Default;
        };
        let hit = |p: &&FsPattern| p.absolute == absolute && p.matches_components(&comps);
        if let Some(d) = self.deny.iter().find(hit) {
            return Decision::Deny {
                rule: d.text.clone(),
            };
        }
        match self.allow.iter().find(hit) {
            Some(a) => Decision::Allow {
                rule: a.text.clone(),
            },
            None => Decision::Default,
        }
    }

    /// Decide a workspace folder a run made and left empty: as a file at its path would be
    /// (`projects/**` admits `projects/demo/episode-01`), or, where no rule matches it, allowed
    /// when the band lets the run make files in it or in a folder below it (`state` for
    /// `state/**`: [`FsMatcher::leads_to_allowed`]). band-server's write-back and the check of a
    /// remote target's result both decide so.
    pub fn check_folder(&self, dir: &str) -> Decision {
        match self.check(dir) {
            Decision::Default => match self.leads_to_allowed(dir) {
                Some(rule) => Decision::Allow {
                    rule: rule.to_string(),
                },
                None => Decision::Default,
            },
            d => d,
        }
    }

    /// The allow pattern that lets the run make files in the workspace folder `dir`, or in a
    /// folder below it ([`write_dir`]: `state` for `state/**`, `a` and `a/b` for `a/b/*.md`), if
    /// any. A folder the run makes there is on the way to what the band admits even where no
    /// pattern matches the folder itself (`state/**` matches what is in `state`, not `state`).
    pub fn leads_to_allowed(&self, dir: &str) -> Option<&str> {
        if dir.is_empty() {
            return None;
        }
        self.allow
            .iter()
            .find(|p| write_dir(&p.text).is_some_and(|w| folders_to(&w).any(|a| a == dir)))
            .map(|p| p.text.as_str())
    }

    /// No allow pattern.
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty()
    }

    /// The allow patterns (allow and insist items), in declaration order.
    pub fn allow_patterns(&self) -> &[FsPattern] {
        &self.allow
    }

    /// The deny patterns, in declaration order.
    pub fn deny_patterns(&self) -> &[FsPattern] {
        &self.deny
    }
}

/// The workspace directory a relative `allow.write` pattern lets the run create files in: the
/// pattern's static prefix (`FsPattern::static_prefix`), or its parent when the pattern is
/// concrete (it may name a file, which must be creatable) unless it ends with `/` (it names a
/// directory). `out/**` and `out/` → `out`, `reports/*.md` →
/// `reports`, `a/b.txt` → `a`, `*.json` → `` (the workspace root). `None` for absolute or invalid
/// patterns.
pub fn write_dir(pattern: &str) -> Option<String> {
    let p = FsPattern::parse(pattern).ok()?;
    if p.is_absolute() {
        return None;
    }
    // `out/` names a directory: it is created (and the run's) even before anything is in it
    // (a one-name `out/` matches at any depth; the directory made is the top-level one).
    if pattern.ends_with('/') && !pattern.contains(['*', '?', '[', ']', '{', '}', '\\']) {
        return Some(p.normalized().trim_start_matches("./").to_string());
    }
    let prefix = p.static_prefix();
    let dir = if p.is_concrete() {
        prefix.rsplit_once('/').map(|(d, _)| d).unwrap_or("")
    } else {
        prefix
    };
    Some(dir.to_string())
}

/// The folders on the way to a workspace-relative `dir` ([`write_dir`]), outermost first, `dir`
/// itself last: `a/b/c` → `a`, `a/b`, `a/b/c`; none for the root (``).
pub fn folders_to(dir: &str) -> impl Iterator<Item = &str> {
    dir.match_indices('/')
        .map(move |(i, _)| &dir[..i])
        .chain((!dir.is_empty()).then_some(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> FsPattern {
        FsPattern::parse(s).unwrap_or_else(|e| panic!("{s}: {e} ({:?})", e.hint))
    }

    fn m(allow: &[&str], deny: &[&str]) -> FsMatcher {
        let a: Vec<String> = allow.iter().map(|s| s.to_string()).collect();
        let d: Vec<String> = deny.iter().map(|s| s.to_string()).collect();
        FsMatcher::new(&a, &d).unwrap()
    }

    fn allow(rule: &str) -> Decision {
        Decision::Allow { rule: rule.into() }
    }

    fn deny(rule: &str) -> Decision {
        Decision::Deny { rule: rule.into() }
    }

    #[test]
    fn star_does_not_cross_slash() {
        let x = p("data/*.csv");
        assert!(x.matches("data/a.csv"));
        assert!(!x.matches("data/sub/a.csv"));
        assert!(!x.matches("a.csv"));
        assert!(
            !x.matches("other/data/a.csv"),
            "anchored at the workspace root"
        );
        let q = p("data/?.csv");
        assert!(q.matches("data/a.csv"));
        assert!(!q.matches("data/ab.csv"));
    }

    #[test]
    fn double_star_crosses_slash() {
        let x = p("data/**/*.csv");
        assert!(x.matches("data/a.csv"));
        assert!(x.matches("data/x/y/z.csv"));
        assert!(!x.matches("data/x/y/z.json"));
        let all = p("**");
        assert!(all.matches("a"));
        assert!(all.matches("a/b/c"));
        assert!(
            !all.matches("/etc/passwd"),
            "relative patterns never match absolute paths"
        );
    }

    #[test]
    fn classes_and_braces() {
        let x = p("out/{a,b}/[0-9].txt");
        assert!(x.matches("out/a/1.txt"));
        assert!(x.matches("out/b/9.txt"));
        assert!(!x.matches("out/c/1.txt"));
        assert!(!x.matches("out/a/x.txt"));
        assert!(p("[!.]*").matches("visible"));
        assert!(!p("[!.]*").matches(".hidden"));
    }

    #[test]
    fn dotenv_at_any_depth() {
        let x = p("**/.env*");
        for path in [".env", ".env.local", "a/.env", "a/b/c/.envrc", ".envrc.d/x"] {
            assert!(x.matches(path), "{path}");
        }
        assert!(!x.matches("a/env"));
        assert!(!x.matches("a/x.env"));
        let y = p(".env*");
        assert!(
            y.matches("a/b/.env.production"),
            "slash-less pattern = any depth"
        );
        assert!(!y.is_anchored());
    }

    #[test]
    fn basename_patterns_at_any_depth() {
        let x = p("*.pem");
        assert!(x.matches("key.pem"));
        assert!(x.matches("a/b/c/key.pem"));
        assert!(x.matches("a/.hidden.pem"));
        assert!(!x.matches("key.pem.bak"));
        assert!(!x.matches("/etc/ssl/key.pem"), "relative only");
        let s = p("secrets");
        assert!(s.matches("secrets"));
        assert!(s.matches("a/secrets"));
        assert!(s.matches("a/secrets/token"));
        assert!(!s.matches("secretsx"));
        assert!(!s.matches("a/my-secrets"));
    }

    #[test]
    fn directory_covers_everything_below() {
        for pat in ["data", "data/", "./data", "./data/"] {
            let x = p(pat);
            assert!(x.matches("data"), "{pat}");
            assert!(x.matches("data/a"), "{pat}");
            assert!(x.matches("data/a/b"), "{pat}");
            assert!(x.matches("data/x/y.csv"), "{pat}");
            assert!(!x.matches("database"), "{pat}");
            assert!(!x.matches("dat"), "{pat}");
        }
        // `data` and `data/` are names at any depth; `./data` only the top-level one.
        assert!(p("data").matches("src/data/x"));
        assert!(p("data/").matches("src/data/x"));
        assert!(!p("./data").matches("src/data/x"));
        let deep = p("data/in");
        assert!(deep.matches("data/in/x/y"));
        assert!(!deep.matches("data"));
        assert!(!deep.matches("x/data/in"));
    }

    #[test]
    fn normalisation() {
        assert_eq!(p("./data/**").normalized(), "data/**");
        assert_eq!(p("././data//in/./x").normalized(), "data/in/x");
        assert_eq!(p("data/").normalized(), "data");
        assert_eq!(p("./secrets").normalized(), "./secrets");
        assert_eq!(p("//etc///ssl/").normalized(), "/etc/ssl");
        let x = p("./data/**");
        assert!(x.matches("data/a/b"));
        assert!(x.matches("./data/a"), "input paths are normalised too");
        assert!(x.matches("data//a/./b"));
        assert!(!x.matches("data"));
        assert!(!x.matches("data/../etc/passwd"), "`..` never matches");
        assert!(!x.matches(""));
        assert!(!x.matches("."));
        assert_eq!(p("./data/**").as_str(), "./data/**");
    }

    #[test]
    fn absolute_and_relative_are_separate() {
        let a = p("/etc/ssl/**");
        assert!(a.is_absolute());
        assert!(a.matches("/etc/ssl/certs/ca.pem"));
        assert!(!a.matches("etc/ssl/certs/ca.pem"));
        let r = p("etc/ssl/**");
        assert!(!r.is_absolute());
        assert!(r.matches("etc/ssl/x"));
        assert!(!r.matches("/etc/ssl/x"));
        let f = p("/etc/hosts");
        assert!(f.matches("/etc/hosts"));
        assert!(f.matches("//etc/./hosts"));
        assert!(!f.matches("/etc/hosts.allow"));
        assert!(!f.matches("/etc"));
        let root = p("/*.pem");
        assert!(root.matches("/k.pem"));
        assert!(!root.matches("/a/k.pem"), "absolute patterns are anchored");
        let n = m(&["/tmp/x/**", "out/**"], &[]);
        assert_eq!(n.check("/tmp/x/a"), allow("/tmp/x/**"));
        assert_eq!(n.check("tmp/x/a"), Decision::Default);
        assert_eq!(n.check("out/a"), allow("out/**"));
        assert_eq!(n.check("/out/a"), Decision::Default);
    }

    #[test]
    fn the_folders_to_a_write_folder_and_the_write_folder_of_a_pattern() {
        assert_eq!(
            folders_to("a/b/c").collect::<Vec<_>>(),
            ["a", "a/b", "a/b/c"]
        );
        assert_eq!(folders_to("out").collect::<Vec<_>>(), ["out"]);
        assert_eq!(folders_to("").count(), 0);
        for (pattern, dir) in [
            ("out/**", Some("out")),
            ("out/", Some("out")),
            ("reports/*.md", Some("reports")),
            ("a/b.txt", Some("a")),
            ("*.json", Some("")),
            ("/abs/**", None),
        ] {
            assert_eq!(write_dir(pattern).as_deref(), dir, "{pattern}");
        }
        // The folders on the way to a write folder, for a folder the run made.
        let w = m(&["state/**", "a/b/*.md", "*.json"], &[]);
        assert_eq!(w.check("state"), Decision::Default);
        for (dir, rule) in [
            ("state", Some("state/**")),
            ("a", Some("a/b/*.md")),
            ("a/b", Some("a/b/*.md")),
            ("a/b/c", None),
            ("other", None),
            ("", None),
        ] {
            assert_eq!(w.leads_to_allowed(dir), rule, "{dir}");
        }
        assert!(w.check_folder("state").is_allowed());
        assert!(w.check_folder("state/deeper").is_allowed());
        assert!(!w.check_folder("other").is_allowed());
        let denied = m(&["state/**"], &["state"]);
        assert_eq!(
            denied.check_folder("state"),
            Decision::Deny {
                rule: "state".into()
            }
        );
    }

    #[test]
    fn static_prefix() {
        let cases = [
            ("data/in/**/*.csv", "data/in"),
            ("./data/in/**/*.csv", "data/in"),
            ("*.pem", ""),
            ("secrets", ""),
            ("data/", ""),
            ("./out", "out"),
            ("out/**", "out"),
            ("out/report.csv", "out/report.csv"),
            ("**/.env*", ""),
            ("a/{b,c}/d", "a"),
            ("a/b[0-9]/d", "a"),
            ("/etc/ssl/**", "/etc/ssl"),
            ("/etc/*.conf", "/etc"),
            ("/*.pem", "/"),
            ("/**", "/"),
        ];
        for (pat, prefix) in cases {
            assert_eq!(p(pat).static_prefix(), prefix, "{pat}");
        }
    }

    #[test]
    fn rejections() {
        let cases: &[(&str, &str, Option<&str>)] = &[
            ("", "empty path pattern", None),
            ("..", "`..` component", Some("cannot leave the workspace")),
            ("../x", "`..` component", Some("absolute path")),
            ("data/../../etc", "`..` component", None),
            ("/etc/../root", "`..` component", Some("without `..`")),
            ("a\0b", "control character", Some("NUL")),
            ("a\nb", "control character", None),
            ("a\tb", "control character", None),
            ("~/x", "`~` is not expanded", Some("absolute path")),
            (".", "names no path", Some("`**`")),
            ("./", "names no path", Some("`**`")),
            ("/", "names no path", Some("`/**`")),
            ("//", "names no path", Some("`/**`")),
            ("data/[a", "not a valid glob", None),
            ("data/{a,b", "not a valid glob", None),
        ];
        for (text, msg, hint) in cases {
            let e = match FsPattern::parse(text) {
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
        // Names that merely contain dots are fine.
        for ok in ["...", "a..b", ".hidden", "..x", "x..", "with space/f.txt"] {
            assert!(FsPattern::parse(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn matcher_precedence() {
        let n = m(
            &["**", "/etc/ssl/**"],
            &["**/.env*", "*.pem", "secrets", "/etc/ssl/private/**"],
        );
        assert_eq!(n.check("src/main.rs"), allow("**"));
        assert_eq!(n.check(".env"), deny("**/.env*"));
        assert_eq!(n.check("app/config/.env.local"), deny("**/.env*"));
        assert_eq!(n.check("a/b/server.pem"), deny("*.pem"));
        assert_eq!(n.check("secrets/token"), deny("secrets"));
        assert_eq!(n.check("x/secrets/y/z"), deny("secrets"));
        assert_eq!(n.check("/etc/ssl/certs/ca.crt"), allow("/etc/ssl/**"));
        assert_eq!(n.check("/etc/ssl/private/key"), deny("/etc/ssl/private/**"));
        assert_eq!(n.check("/etc/passwd"), Decision::Default);
        assert_eq!(n.check("../outside"), Decision::Default);
        assert_eq!(n.check("a/../../x"), Decision::Default);
        assert_eq!(n.check(""), Decision::Default);
        let first = m(&["data/**", "data"], &[]);
        assert_eq!(
            first.check("data/x"),
            allow("data/**"),
            "first matching allow"
        );
        assert_eq!(first.check("data"), allow("data"));
        assert!(m(&[], &["x"]).is_empty());
        assert_eq!(m(&[], &[]).check("x"), Decision::Default);
    }

    #[test]
    fn accessors_and_index() {
        let n = m(&["a/**", "/b"], &["c"]);
        assert_eq!(n.allow_patterns().len(), 2);
        assert!(n.allow_patterns()[1].is_absolute());
        assert_eq!(n.deny_patterns()[0].as_str(), "c");
        let a = vec!["ok".to_string(), "../bad".to_string()];
        assert_eq!(FsMatcher::new(&a, &[]).unwrap_err().index, 1);
        let e = FsMatcher::new(&[], &a).unwrap_err();
        assert_eq!((e.list, e.index), (crate::policy::RuleList::Deny, 1));
    }

    #[test]
    fn covers() {
        let c = |a: &str, b: &str| p(a).covers(&p(b));
        assert!(c("data/**", "data/x.csv"));
        assert!(c("data/**", "data/in/**/*.csv"));
        assert!(c("data/**", "./data/in"));
        assert!(
            !c("data/**", "data"),
            "`data/**` does not match `data` itself"
        );
        assert!(c("./data", "data/**"));
        assert!(
            c("./data", "./data/x"),
            "a concrete item is checked as a path"
        );
        assert!(c("data", "./data/x"));
        assert!(c("out/", "out/**"), "`out` at any depth includes `./out`");
        assert!(c("out", "out/in/*.md"));
        assert!(!c("out", "data/out/**"), "conservative");
        assert!(!c("./data", "data"), "`data` is any depth");
        assert!(!c("./data", "*.csv"));
        assert!(!c("data/**", "**"));
        assert!(c("**", "*.pem"));
        assert!(c("**", "data/**"));
        assert!(!c("**", "/etc/x"));
        assert!(c("/**", "/etc/x/**"));
        assert!(!c("/**", "etc/x"));
        assert!(c("*.csv", "data/a.csv"));
        assert!(c("*.csv", "*.csv"));
        assert!(!c("*.csv", "data/*.csv"), "conservative");
        assert!(!c("data/*.csv", "data/**"));
        assert!(
            !c("./secrets", "secrets"),
            "any depth is wider than top level"
        );
        assert!(c("secrets", "./secrets"));
        assert!(c("/etc/ssl", "/etc/ssl/certs/*.pem"));
        assert!(!c("/etc/ssl", "/etc/sslx"));
        assert!(!c("/etc/ssl/**", "etc/ssl/x"));
    }
}
