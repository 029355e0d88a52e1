//! The HTTP part of an `allow.net` rule (an L7 rule): methods and a path glob for one host.
//!
//! ```text
//! "GET,POST https://api.github.com/repos/acme/**"   GET or POST, a path below /repos/acme/
//! "https://api.example.com/v1/*"                     any method, one segment below /v1/
//! ```
//!
//! The host part is a [`super::net::NetPattern`] host (an exact name or `*.domain`); the port is
//! the URL's, else the scheme's (443, 80). In the path, `*` matches within one segment and `**`
//! any number of segments; the query string is not part of the match. A host-only entry
//! (`api.github.com`) keeps its meaning: every request to that host. A request is allowed when
//! some allow entry for its host admits it; band-server's egress proxy enforces it.

use super::PatternError;

/// The methods an HTTP rule may name.
pub const METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/// Methods and a path glob: what an L7 rule admits on its host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRule {
    /// Upper-case, each once, in the order written; empty: every method.
    methods: Vec<String>,
    https: bool,
    /// The path glob as written (starts with `/`).
    path: String,
}

fn err(message: impl Into<String>) -> PatternError {
    PatternError::new(message)
}

/// A rule's text split into its parts: the methods (if any), the scheme, `host[:port]` and the
/// path glob.
pub(crate) struct Parts<'a> {
    pub(crate) rule: HttpRule,
    pub(crate) authority: &'a str,
}

/// Parse `[METHODS ]scheme://host[:port]/path-glob` (the caller has seen `://` or a space).
pub(crate) fn parse(text: &str) -> Result<Parts<'_>, PatternError> {
    let (methods, url) = match text.split_once(' ') {
        Some((m, u)) => (Some(m), u),
        None => (None, text),
    };
    if url.chars().any(|c| c.is_whitespace() || c.is_control())
        || methods.is_some_and(|m| m.chars().any(char::is_whitespace))
    {
        return Err(
            err(format!("`{}` has more than one space", text.escape_debug())).with_hint(
                "write `METHODS URL` with one space, e.g. `GET,POST https://api.example.com/v1/**`",
            ),
        );
    }
    let methods = match methods {
        None => Vec::new(),
        Some(m) => parse_methods(m, text)?,
    };
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(err(format!("`{text}`: after the methods comes a URL"))
            .with_hint(format!("write `{} https://HOST/PATH`", methods.join(","))));
    };
    let https = match scheme {
        "https" => true,
        "http" => false,
        other => {
            return Err(err(format!(
                "`{text}`: an HTTP rule's scheme is https or http, not `{other}`"
            ))
            .with_hint("write the host only for other protocols"));
        }
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => {
            return Err(err(format!(
                "`{text}` is a URL without a path; a host-only rule names the host, an HTTP rule a path glob"
            ))
            .with_hint(format!(
                "write the host only (`{rest}`), or the paths it may request (`{scheme}://{rest}/**`)"
            )));
        }
    };
    if authority.contains('@') {
        return Err(
            err(format!("`{text}` names a user; an HTTP rule names a host"))
                .with_hint("drop the `user@`"),
        );
    }
    if let Some(c) = path
        .chars()
        .find(|c| matches!(c, '?' | '#' | '[' | ']' | '{' | '}'))
    {
        return Err(err(format!(
            "`{text}`: `{c}` in the path; a path glob has `*` and `**` only, and no query or fragment"
        ))
        .with_hint("the query string is not matched: end the path where it begins"));
    }
    if path.split('/').any(|s| s == "." || s == "..") {
        return Err(err(format!("`{text}`: `.` or `..` in the path"))
            .with_hint("write the normal path; band refuses every request whose path has dot segments, encoded or not"));
    }
    globset::GlobBuilder::new(path)
        .literal_separator(true)
        .build()
        .map_err(|e| err(format!("`{text}`: the path glob is invalid: {}", e.kind())))?;
    Ok(Parts {
        rule: HttpRule {
            methods,
            https,
            path: path.to_string(),
        },
        authority,
    })
}

fn parse_methods(m: &str, text: &str) -> Result<Vec<String>, PatternError> {
    let mut out: Vec<String> = Vec::new();
    for method in m.split(',') {
        if !METHODS.contains(&method) {
            let upper = method.to_ascii_uppercase();
            let hint = if METHODS.contains(&upper.as_str()) {
                format!("methods are upper-case: `{upper}`")
            } else {
                format!(
                    "name methods among {}, separated by commas; or none for every method",
                    METHODS.join(", ")
                )
            };
            return Err(err(format!("`{text}`: `{method}` is not an HTTP method")).with_hint(hint));
        }
        if !out.iter().any(|x| x == method) {
            out.push(method.to_string());
        }
    }
    Ok(out)
}

impl HttpRule {
    /// The methods it admits; empty: every method.
    pub fn methods(&self) -> &[String] {
        &self.methods
    }

    /// `https://` (else `http://`).
    pub fn is_https(&self) -> bool {
        self.https
    }

    /// The path glob as written.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Whether it admits `method` on `path` (the request's path, without its query string:
    /// anything from `?` on is ignored). A path a server could read as another never matches
    /// ([`ambiguous_path`]): the proxy refuses what it cannot compare.
    pub fn admits(&self, method: &str, path: &str) -> bool {
        let path = path.split(['?', '#']).next().unwrap_or(path);
        if !self.methods.is_empty() && !self.methods.iter().any(|m| m == method) {
            return false;
        }
        if !path.starts_with('/') || ambiguous_path(path) {
            return false;
        }
        globset::GlobBuilder::new(&self.path)
            .literal_separator(true)
            .build()
            .is_ok_and(|g| g.compile_matcher().is_match(path))
    }

    /// Whether everything `other` admits, `self` admits (conservative: `false` when unsure).
    pub fn covers(&self, other: &HttpRule) -> bool {
        if self.https != other.https {
            return false;
        }
        let methods = self.methods.is_empty()
            || (!other.methods.is_empty()
                && other.methods.iter().all(|m| self.methods.contains(m)));
        let path = self.path == other.path
            || self
                .path
                .strip_suffix("**")
                .is_some_and(|prefix| prefix.ends_with('/') && other.path.starts_with(prefix));
        methods && path
    }
}

/// Whether servers may read `path` as another path than its text says, so that no rule can be
/// matched against it: a `.` or `..` segment, also with parameters after `;` (`..;`, which
/// Tomcat and Spring take for `..`); a backslash (taken for `/` by some); and an encoded dot,
/// slash, backslash or percent sign (`%2e`, `%2f`, `%5c`, `%25`), which a server may decode
/// before it resolves dot segments (`/public/%2e%2e/admin`). Red team, round 6.
pub fn ambiguous_path(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    path.contains('\\')
        || ["%2e", "%2f", "%5c", "%25"]
            .iter()
            .any(|e| lower.contains(e))
        || path.split('/').any(|s| {
            let bare = s.split(';').next().unwrap_or(s);
            bare == "." || bare == ".."
        })
}

/// The narrowest rule admitting one request: `METHOD scheme://host/path` (the query dropped),
/// for a denial's suggestion and for `band learn --net`.
pub fn suggest(method: &str, https: bool, host: &str, port: Option<u16>, path: &str) -> String {
    let path = path.split(['?', '#']).next().unwrap_or(path);
    // Characters a glob would read as pattern syntax are not kept literally: `*` stands in.
    let path: String = path
        .chars()
        .map(|c| {
            if matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\') {
                '*'
            } else {
                c
            }
        })
        .collect();
    let scheme = if https { "https" } else { "http" };
    let default = if https { 443 } else { 80 };
    let authority = match port {
        Some(p) if p != default => format!("{host}:{p}"),
        _ => host.to_string(),
    };
    format!("{method} {scheme}://{authority}{path}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(s: &str) -> HttpRule {
        parse(s)
            .unwrap_or_else(|e| panic!("{s}: {e} {:?}", e.hint))
            .rule
    }

    #[test]
    fn methods_and_paths() {
        let r = rule("GET,POST https://api.github.com/repos/acme/**");
        assert_eq!(r.methods(), ["GET", "POST"]);
        assert!(r.admits("GET", "/repos/acme/x/issues"));
        assert!(r.admits("POST", "/repos/acme/x?per_page=1"));
        assert!(!r.admits("DELETE", "/repos/acme/x"));
        assert!(!r.admits("GET", "/repos/other/x"));
        assert!(!r.admits("GET", "/repos/acme/../other/x"));
        assert!(!r.admits("GET", "/repos/acme%2F..%2Fother"));
        // Paths a server may read as another (red team, round 6): encoded dots, `..;`, a
        // backslash, an encoded backslash or percent sign.
        for other in [
            "/repos/acme/%2e%2e/other",
            "/repos/acme/%2E%2E/other",
            "/repos/acme/.%2e/other",
            "/repos/acme/..;/other",
            "/repos/acme/.;x/other",
            "/repos/acme/..%5cother",
            "/repos/acme\\..\\other",
            "/repos/acme/%252e%252e/other",
        ] {
            assert!(!r.admits("GET", other), "{other}");
        }
        assert!(r.admits("GET", "/repos/acme/x/issues;v=1"));
        let one = rule("https://h.test/v1/*");
        assert!(one.methods().is_empty());
        assert!(one.admits("PATCH", "/v1/a"));
        assert!(!one.admits("GET", "/v1/a/b"));
    }

    #[test]
    fn refusals_say_how_to_write_it() {
        for (text, hint) in [
            ("get https://h.test/x", "methods are upper-case: `GET`"),
            (
                "GET https://h.test",
                "write the host only (`h.test`), or the paths it may request (`https://h.test/**`)",
            ),
            (
                "GET ftp://h.test/x",
                "write the host only for other protocols",
            ),
            (
                "GET https://h.test/x?a=1",
                "the query string is not matched: end the path where it begins",
            ),
            (
                "GET  https://h.test/x",
                "write `METHODS URL` with one space, e.g. `GET,POST https://api.example.com/v1/**`",
            ),
        ] {
            let e = parse(text)
                .err()
                .unwrap_or_else(|| panic!("{text} accepted"));
            assert_eq!(e.hint.as_deref(), Some(hint), "{text}: {e}");
        }
    }

    #[test]
    fn covers_is_narrowing() {
        let wide = rule("https://h.test/**");
        let narrow = rule("GET https://h.test/repos/acme/**");
        assert!(wide.covers(&narrow));
        assert!(!narrow.covers(&wide));
        assert!(rule("GET,POST https://h.test/repos/**").covers(&narrow));
        assert!(!rule("POST https://h.test/repos/**").covers(&narrow));
        assert!(!rule("http://h.test/**").covers(&narrow));
    }

    #[test]
    fn suggestion_is_the_request() {
        assert_eq!(
            suggest("POST", true, "api.github.com", Some(443), "/gists?x=1"),
            "POST https://api.github.com/gists"
        );
        assert_eq!(
            suggest("GET", false, "h.test", Some(8080), "/a*b"),
            "GET http://h.test:8080/a*b"
        );
        let r = rule(&suggest("GET", true, "h.test", None, "/a/b"));
        assert!(r.admits("GET", "/a/b"));
    }
}
