//! Bundling: one schema and every file it reaches as a single self-contained document.

use jsonschema::Draft;
use serde_json::{Map, Value};

use super::refs::rewrite_refs;
use super::schema_set::SchemaSet;
use super::uri::{encode_fragment, percent_decode};

impl SchemaSet {
    /// The schema at `rel_path` as one self-contained document, for readers that cannot reach the
    /// skill's other files (an MCP client, say).
    ///
    /// JSON Schema's own bundling: the root gets `$id` = its `band://skill/...` URI, and every file
    /// it reaches through `$ref` (transitively) is embedded under `$defs` (`definitions` for a
    /// draft-7 root) as a resource whose `$id` is that file's URI. Every `$ref` is rewritten to
    /// the canonical `<file uri>#<pointer>` form, so references made through a `$id` alias
    /// resolve to the embedded copy. `None` if there is no such schema.
    pub fn bundle(&self, rel_path: &str) -> Option<Value> {
        let index = &self.index;
        let (at, reached) = self.reached(rel_path)?;
        let canonical = |target: &str| -> Option<String> {
            let (doc, fragment) = target.split_once('#').unwrap_or((target, ""));
            let (j, prefix) = index.by_uri.get(doc)?;
            let pointer = format!("{prefix}{}", percent_decode(fragment));
            let uri = &index.files[*j].uri;
            Some(if pointer.is_empty() {
                uri.clone()
            } else {
                format!("{uri}#{}", encode_fragment(&pointer))
            })
        };
        let prepare = |i: usize| {
            let file = &index.files[i];
            let mut value = file.served.clone();
            rewrite_refs(&mut value, &canonical);
            if let Value::Object(object) = &mut value {
                object.insert("$id".into(), Value::String(file.uri.clone()));
            }
            value
        };
        let mut root = prepare(at);
        let draft7 = matches!(
            Draft::default().detect(&root),
            Draft::Draft7 | Draft::Draft6 | Draft::Draft4
        );
        if let Value::Object(object) = &mut root {
            let key = if draft7 { "definitions" } else { "$defs" };
            let defs = object
                .entry(key)
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(defs) = defs {
                for &i in reached.iter().filter(|&&i| i != at) {
                    defs.insert(format!("band:{}", index.files[i].rel), prepare(i));
                }
            }
        }
        Some(root)
    }
}

#[cfg(test)]
mod tests {
    use crate::contract::testutil::*;
    use serde_json::json;

    #[test]
    fn bundle_is_self_contained_and_means_the_same() {
        let s = set(&[
            (
                "schemas/input/go.json",
                json!({
                    "type": "object",
                    "properties": {
                        "repo": {"$ref": "../defs/repo.json"},
                        "by_id": {"$ref": "repo.json"},
                        "n": {"$ref": "../defs/num.json#/$defs/small"}
                    },
                    "required": ["repo"],
                    "additionalProperties": false
                }),
            ),
            (
                "schemas/defs/repo.json",
                json!({"$id": "repo.json", "type": "string", "pattern": "^[a-z]+/[a-z]+$"}),
            ),
            (
                "schemas/defs/num.json",
                json!({"$defs": {"small": {"$ref": "#/$defs/int", "maximum": 9}, "int": {"type": "integer"}}}),
            ),
            ("schemas/defs/unused.json", json!({"type": "null"})),
        ]);
        let bundle = s.bundle("schemas/input/go.json").unwrap();
        assert_eq!(bundle["$id"], "band://skill/schemas/input/go.json");
        let defs = bundle["$defs"].as_object().unwrap();
        assert_eq!(
            defs.keys().collect::<Vec<_>>(),
            ["band:schemas/defs/num.json", "band:schemas/defs/repo.json"]
        );
        assert_eq!(
            bundle["properties"]["by_id"]["$ref"],
            "band://skill/schemas/defs/repo.json"
        );
        // No retriever: every reference must resolve inside the document.
        let validator = jsonschema::validator_for(&bundle).unwrap();
        let contract = s.compile("schemas/input/go.json").unwrap();
        for (value, ok) in [
            (json!({"repo": "a/b", "by_id": "c/d", "n": 3}), true),
            (json!({"repo": "A B"}), false),
            (json!({"repo": "a/b", "by_id": "x"}), false),
            (json!({"repo": "a/b", "n": 10}), false),
            (json!({"repo": "a/b", "n": 1.5}), false),
            (json!({"repo": "a/b", "extra": 1}), false),
        ] {
            assert_eq!(validator.is_valid(&value), ok, "bundle on {value}");
            assert_eq!(contract.validate(&value).is_ok(), ok, "contract on {value}");
        }
        assert!(s.bundle("schemas/input/none.json").is_none());
    }

    #[test]
    fn bundle_of_a_draft7_root_uses_definitions() {
        let s = set(&[
            (
                "schemas/input/go.json",
                json!({"$schema": "http://json-schema.org/draft-07/schema#", "properties": {"a": {"$ref": "../defs/a.json"}}}),
            ),
            ("schemas/defs/a.json", json!({"type": "integer"})),
        ]);
        let bundle = s.bundle("schemas/input/go.json").unwrap();
        assert!(
            bundle["definitions"]["band:schemas/defs/a.json"].is_object(),
            "{bundle}"
        );
        let validator = jsonschema::validator_for(&bundle).unwrap();
        assert!(validator.is_valid(&json!({"a": 1})));
        assert!(!validator.is_valid(&json!({"a": "x"})));
    }
}
