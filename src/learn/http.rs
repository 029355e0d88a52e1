//! HTTP rules drafted from the requests the egress proxy saw in an observing run
//! (`band learn --net`): pure.
//!
//! The generalisation, so that a band learned on one input runs the same job on the next:
//!
//! 1. Per host (and scheme and port), each path is split into segments; a segment that varies
//!    between runs becomes `*`: one of the run's data values (a string or number of its input,
//!    [`super::observe::data_values`]), or one that looks like an identifier (all digits, a
//!    UUID, hexadecimal of 8 or more, or 16 or more characters mixing letters and digits).
//!    A request whose whole URL is one of the run's data values (a URL the input gave) is
//!    `/**` on its host: every segment of it came from the input.
//! 2. Paths that end the same way after that are one rule, with the methods seen on them.
//! 3. When a host has several such paths, they collapse to the longest prefix of fixed
//!    segments they share, as `prefix/**`, with every method seen on the host; without a shared
//!    segment, each path keeps its own rule (never `/**` on the whole host from several
//!    unrelated paths).
//!
//! Methods are those observed, never widened. The query string is never part of a rule.

use std::collections::{BTreeMap, BTreeSet};

use crate::proto::HttpSeen;

/// Whether a path segment looks like an identifier or a varying value.
fn looks_varying(seg: &str) -> bool {
    let hex = seg.chars().all(|c| c.is_ascii_hexdigit());
    let digits = seg.chars().filter(char::is_ascii_digit).count();
    let letters = seg.chars().filter(char::is_ascii_alphabetic).count();
    let uuid = seg.len() == 36
        && seg.chars().enumerate().all(|(i, c)| {
            if [8, 13, 18, 23].contains(&i) {
                c == '-'
            } else {
                c.is_ascii_hexdigit()
            }
        });
    !seg.is_empty()
        && (digits == seg.len()
            || uuid
            || (hex && seg.len() >= 8 && digits > 0)
            || (seg.len() >= 16 && digits > 0 && letters > 0))
}

/// A glob character a segment may not carry into a rule as itself.
fn has_glob(seg: &str) -> bool {
    seg.contains('*')
}

/// The segments of `path` with each varying one (`data` values included) as `*`.
fn generalise(path: &str, data: &BTreeSet<String>) -> Vec<String> {
    path.split('/')
        .skip(1)
        .map(|seg| {
            let decoded = percent_decode(seg);
            if looks_varying(seg) || data.contains(&decoded) || has_glob(seg) {
                "*".to_string()
            } else {
                seg.to_string()
            }
        })
        .collect()
}

/// `%XX` escapes decoded (for comparing a segment with the run's data); invalid ones kept.
fn percent_decode(seg: &str) -> String {
    let b = seg.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |j: usize| b.get(j).and_then(|c| (*c as char).to_digit(16));
        if b[i] == b'%'
            && let (Some(hi), Some(lo)) = (hex(i + 1), hex(i + 2))
        {
            out.push((hi * 16 + lo) as u8);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A request's URL without its query, as an input would give it.
fn request_url(r: &HttpSeen) -> String {
    let host = r.host.trim_end_matches('.').to_ascii_lowercase();
    let (scheme, default) = if r.https {
        ("https", 443)
    } else {
        ("http", 80)
    };
    if r.port == default {
        format!("{scheme}://{host}{}", r.path)
    } else {
        format!("{scheme}://{host}:{}{}", r.port, r.path)
    }
}

/// The requests' URLs and the segments of their paths (decoded) found in `values`: the run's
/// data that went out in a request, kept in [`super::Observations::data`] like a call's.
pub fn data_in_requests(requests: &[HttpSeen], values: &BTreeSet<String>) -> Vec<String> {
    let mut out = BTreeSet::new();
    for r in requests {
        let url = request_url(r);
        if values.contains(&url) {
            out.insert(url);
        }
        for seg in r.path.split('/') {
            let d = percent_decode(seg);
            if values.contains(&d) {
                out.insert(d);
            }
        }
    }
    out.into_iter().collect()
}

/// One drafted rule and the requests it stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpDraft {
    /// The `allow.net` entry, `METHODS scheme://host[:port]/glob`.
    pub rule: String,
    /// The requests seen, as `METHOD path` (a few).
    pub seen: Vec<String>,
}

/// The HTTP rules of `requests` ([`HttpSeen`], from the egress proxy), with `data` the run's
/// data values. One host's rules are together, hosts in order.
pub fn draft_http(requests: &[HttpSeen], data: &BTreeSet<String>) -> Vec<HttpDraft> {
    // (scheme, host, port) → generalised path → methods, requests seen.
    type Paths = BTreeMap<Vec<String>, (BTreeSet<String>, Vec<String>)>;
    let mut hosts: BTreeMap<(bool, String, u16), Paths> = BTreeMap::new();
    for r in requests {
        let host = r.host.trim_end_matches('.').to_ascii_lowercase();
        let segs = if data.contains(&request_url(r)) {
            vec!["**".to_string()]
        } else {
            generalise(&r.path, data)
        };
        let entry = hosts
            .entry((r.https, host, r.port))
            .or_default()
            .entry(segs)
            .or_default();
        entry.0.insert(r.method.to_ascii_uppercase());
        let seen = format!("{} {}", r.method, r.path);
        if !entry.1.contains(&seen) {
            entry.1.push(seen);
        }
    }
    let mut out = Vec::new();
    for ((https, host, port), paths) in hosts {
        let scheme = if https { "https" } else { "http" };
        let authority = if port == if https { 443 } else { 80 } {
            host
        } else {
            format!("{host}:{port}")
        };
        let rule = |methods: &BTreeSet<String>, glob: &str| {
            let m: Vec<&str> = methods.iter().map(String::as_str).collect();
            format!("{} {scheme}://{authority}{glob}", m.join(","))
        };
        let prefix = shared_prefix(paths.keys());
        if paths.len() > 1 && !prefix.is_empty() {
            let methods: BTreeSet<String> = paths.values().flat_map(|(m, _)| m.clone()).collect();
            let seen = paths.values().flat_map(|(_, s)| s.clone()).collect();
            out.push(HttpDraft {
                rule: rule(&methods, &format!("/{}/**", prefix.join("/"))),
                seen,
            });
            continue;
        }
        for (segs, (methods, seen)) in paths {
            out.push(HttpDraft {
                rule: rule(&methods, &format!("/{}", segs.join("/"))),
                seen,
            });
        }
    }
    out
}

/// The fixed segments every path starts with (up to the first `*` of any).
fn shared_prefix<'a>(mut paths: impl Iterator<Item = &'a Vec<String>>) -> Vec<String> {
    let Some(first) = paths.next() else {
        return Vec::new();
    };
    let mut prefix: Vec<String> = first
        .iter()
        .take_while(|s| *s != "*" && *s != "**" && !s.is_empty())
        .cloned()
        .collect();
    for p in paths {
        let n = prefix
            .iter()
            .zip(p)
            .take_while(|(a, b)| a == b && *b != "*" && *b != "**")
            .count();
        prefix.truncate(n);
    }
    prefix
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::net::NetMatcher;

    fn seen(method: &str, host: &str, path: &str) -> HttpSeen {
        HttpSeen {
            method: method.into(),
            host: host.into(),
            port: 443,
            https: true,
            path: path.into(),
        }
    }

    fn rules(requests: &[HttpSeen], data: &[&str]) -> Vec<String> {
        let data = data.iter().map(|s| s.to_string()).collect();
        draft_http(requests, &data)
            .into_iter()
            .map(|d| d.rule)
            .collect()
    }

    #[test]
    fn identifiers_and_data_values_become_a_segment_glob() {
        assert_eq!(
            rules(&[seen("GET", "api.example.test", "/items/123")], &[]),
            ["GET https://api.example.test/items/*"]
        );
        assert_eq!(
            rules(
                &[seen(
                    "GET",
                    "API.example.test.",
                    "/v1/users/0f8fad5b-d9cb-469f-a165-70867728950e/avatar"
                )],
                &[]
            ),
            ["GET https://api.example.test/v1/users/*/avatar"]
        );
        // A value of the run's input (a repository's name) varies with the input.
        assert_eq!(
            rules(
                &[seen("GET", "api.example.test", "/repos/acme/widget/issues")],
                &["widget"]
            ),
            ["GET https://api.example.test/repos/acme/*/issues"]
        );
        // A URL the input gave: all of it varies with the input.
        assert_eq!(
            rules(
                &[seen("GET", "docs.rs", "/band-learn")],
                &["https://docs.rs/band-learn"]
            ),
            ["GET https://docs.rs/**"]
        );
        // Words stay words.
        assert_eq!(
            rules(&[seen("GET", "api.example.test", "/v2/status")], &[]),
            ["GET https://api.example.test/v2/status"]
        );
    }

    #[test]
    fn several_paths_collapse_to_their_shared_prefix_with_the_methods_seen() {
        assert_eq!(
            rules(
                &[
                    seen("GET", "api.example.test", "/repos/acme/x/issues"),
                    seen("POST", "api.example.test", "/repos/acme/x/comments"),
                    seen("GET", "other.example.test", "/health"),
                ],
                &[]
            ),
            [
                "GET,POST https://api.example.test/repos/acme/x/**",
                "GET https://other.example.test/health"
            ]
        );
        // Nothing shared: each its own rule, never the whole host.
        assert_eq!(
            rules(
                &[
                    seen("GET", "api.example.test", "/a"),
                    seen("GET", "api.example.test", "/b/7"),
                ],
                &[]
            ),
            [
                "GET https://api.example.test/a",
                "GET https://api.example.test/b/*"
            ]
        );
        // The same path twice is one rule with both methods.
        assert_eq!(
            rules(
                &[
                    seen("GET", "api.example.test", "/items/1"),
                    seen("DELETE", "api.example.test", "/items/2"),
                ],
                &[]
            ),
            ["DELETE,GET https://api.example.test/items/*"]
        );
    }

    /// A band learned on one input admits the next input's request (another id under the same
    /// prefix) and still refuses a method or a path it never saw.
    #[test]
    fn a_drafted_rule_admits_the_next_inputs_request_and_no_other() {
        let drafted = rules(&[seen("GET", "api.example.test", "/items/123")], &[]);
        let m = NetMatcher::new(&drafted, &[]).unwrap_or_else(|e| panic!("{e:?}"));
        let check = |method: &str, path: &str| {
            m.check_request("api.example.test", 443, true, method, path)
                .is_allowed()
        };
        assert!(check("GET", "/items/456"));
        assert!(!check("DELETE", "/items/456"));
        assert!(!check("GET", "/admin/users"));
        // A plain-HTTP request and a non-default port keep their scheme and port.
        let plain = HttpSeen {
            https: false,
            port: 8080,
            ..seen("GET", "api.example.test", "/x")
        };
        assert_eq!(rules(&[plain], &[]), ["GET http://api.example.test:8080/x"]);
    }

    #[test]
    fn the_data_in_a_requests_path_is_kept() {
        let values: BTreeSet<String> = ["widget", "a b", "unused"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            data_in_requests(
                &[
                    seen("GET", "h", "/repos/widget/x"),
                    seen("GET", "h", "/f/a%20b")
                ],
                &values
            ),
            ["a b", "widget"]
        );
    }

    #[test]
    fn percent_escapes_are_compared_decoded() {
        assert_eq!(percent_decode("a%20b"), "a b");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
    }
}
