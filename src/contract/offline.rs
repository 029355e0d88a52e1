//! Offline resolution: the retriever jsonschema gets, which serves the skill's own schemas from
//! memory and refuses every other URI with the reason why.

use std::fmt;
use std::sync::Arc;

use jsonschema::{Retrieve, Uri};
use serde_json::Value;

use super::schema_set::Index;
use super::uri::{percent_decode, resolve, strip_fragment};
use super::{OFFLINE_ONLY, ROOT_URI};

/// The only retriever band ever gives jsonschema: it serves the skill's own schemas from memory
/// and refuses everything else. It never opens a file or a socket.
pub(super) struct OfflineRetriever {
    pub(super) index: Arc<Index>,
}

/// Why [`OfflineRetriever`] refused a URI.
#[derive(Debug)]
pub(super) struct Refusal {
    pub(super) reason: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for Refusal {}

impl Retrieve for OfflineRetriever {
    fn retrieve(
        &self,
        uri: &Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        let key = strip_fragment(uri.as_str());
        // Served with every `$ref` already absolute: a defs file known by `$id: "repo.json"` is
        // also asked for as `schemas/input/repo.json`, and its own relative `$ref`s must still
        // mean schemas/defs/.
        if let Some((at, pointer)) = self.index.by_uri.get(key)
            && let Some(value) = self.index.files[*at].served.pointer(pointer)
        {
            return Ok(value.clone());
        }
        Err(Box::new(Refusal {
            reason: self.index.missing_reason(key),
        }))
    }
}

impl Index {
    /// Why the document at the fragmentless URI `key` is not available.
    fn missing_reason(&self, key: &str) -> String {
        match key.strip_prefix(ROOT_URI) {
            Some(rel) if rel.starts_with("schemas/") => match self.broken.get(key) {
                Some(broken) => format!("{broken} is not valid json"),
                None => format!("no schema file at {}", percent_decode(rel)),
            },
            Some(_) => format!("it points outside schemas/; {OFFLINE_ONLY}"),
            None => OFFLINE_ONLY.to_string(),
        }
    }

    /// Why `literal` (a `$ref` seen at `base`) does not resolve in this set, or `None` if it does.
    pub(super) fn unresolved_reason(&self, base: &str, literal: &str) -> Option<String> {
        let Some(target) = resolve(base, literal) else {
            return Some("not a valid uri reference".to_string());
        };
        if self.lookup(base, literal).is_some() {
            return None;
        }
        let (doc, fragment) = target.split_once('#').unwrap_or((target.as_str(), ""));
        let fragment = percent_decode(fragment);
        Some(if !self.by_uri.contains_key(doc) {
            self.missing_reason(doc)
        } else if fragment.starts_with('/') {
            format!("nothing at \"{fragment}\" in the schema it points into")
        } else {
            format!("no $anchor \"{fragment}\" in the schema it points into")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::testutil::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn unknown_schema_uri_is_refused() {
        let set = set(&[(
            "schemas/input/x.json",
            json!({"$schema": "https://example.com/my-meta", "type": "object"}),
        )]);
        let error = set.compile("schemas/input/x.json").unwrap_err();
        let text = error.to_string();
        assert!(
            text.starts_with("schemas/input/x.json: unknown $schema"),
            "{text}"
        );
    }

    #[test]
    fn http_ref_is_refused_without_any_connection() {
        // A listener nobody should ever connect to: the ref points at it.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let url = format!("http://127.0.0.1:{port}/repo.json");
        let set = set(&[(
            "schemas/input/fetch.json",
            json!({"properties": {"repo": {"$ref": url}}}),
        )]);
        let error = set.compile("schemas/input/fetch.json").unwrap_err();
        let text = error.to_string();
        assert_eq!(
            text,
            format!(
                "schemas/input/fetch.json: cannot resolve $ref \"{url}\": band resolves $ref \
                 offline only; put the schema in schemas/defs/"
            )
        );
        match listener.accept() {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => panic!("band connected to the $ref url: {other:?}"),
        }
    }

    #[test]
    fn file_refs_and_escapes_are_refused() {
        let set = set(&[
            (
                "schemas/input/a.json",
                json!({"$ref": "file:///etc/passwd"}),
            ),
            (
                "schemas/input/b.json",
                json!({"$ref": "../../scripts/x.json"}),
            ),
            (
                "schemas/input/c.json",
                json!({"$ref": "../../../../../etc/passwd"}),
            ),
            (
                "schemas/input/d.json",
                json!({"$ref": "//evil.example/x.json"}),
            ),
        ]);
        let a = set.compile("schemas/input/a.json").unwrap_err().to_string();
        assert!(a.contains("\"file:///etc/passwd\""), "{a}");
        assert!(a.ends_with(OFFLINE_ONLY), "{a}");
        for rel in [
            "schemas/input/b.json",
            "schemas/input/c.json",
            "schemas/input/d.json",
        ] {
            let text = set.compile(rel).unwrap_err().to_string();
            assert!(
                text.starts_with(&format!("{rel}: cannot resolve $ref")),
                "{text}"
            );
            assert!(text.contains(OFFLINE_ONLY), "{text}");
        }
        let b = set.compile("schemas/input/b.json").unwrap_err().to_string();
        assert!(b.contains("outside schemas/"), "{b}");
    }
}
