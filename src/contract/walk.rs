//! Walking schemas: following `$ref`s and combinators to the candidate subschemas of a value, and
//! coercing CLI strings into the types they declare.

use std::collections::HashSet;

use serde_json::Value;

use super::refs::enter;
use super::schema_set::Index;
use super::{MAX_EXACT_FLOAT, MAX_FOLLOW_DEPTH};

/// Which subschemas count as applying to the same value.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Follow {
    /// `$ref` and `allOf` only: what certainly applies.
    Definite,
    /// Also `anyOf`, `oneOf`, `then`, `else`: what may apply.
    All,
}

pub(super) type Candidates<'a> = Vec<(&'a Value, String)>;

impl Index {
    /// Every subschema that applies to the value `schema` (at `base`) is about.
    pub(super) fn candidates<'a>(
        &'a self,
        schema: &'a Value,
        base: &str,
        follow: Follow,
    ) -> Candidates<'a> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        self.collect(schema, base.to_string(), follow, &mut out, &mut seen, 0);
        out
    }

    fn collect<'a>(
        &'a self,
        schema: &'a Value,
        base: String,
        follow: Follow,
        out: &mut Candidates<'a>,
        seen: &mut HashSet<*const Value>,
        depth: usize,
    ) {
        let Some(object) = schema.as_object() else {
            return;
        };
        if depth > MAX_FOLLOW_DEPTH || !seen.insert(std::ptr::from_ref(schema)) {
            return;
        }
        let base = enter(&base, schema);
        for keyword in ["$ref", "$dynamicRef", "$recursiveRef"] {
            if let Some(reference) = object.get(keyword).and_then(Value::as_str)
                && let Some((target, target_base)) = self.lookup(&base, reference)
            {
                self.collect(target, target_base, follow, out, seen, depth + 1);
            }
        }
        let mut combinators = vec!["allOf"];
        if follow == Follow::All {
            combinators.extend(["anyOf", "oneOf"]);
        }
        for keyword in combinators {
            for sub in object
                .get(keyword)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                self.collect(sub, base.clone(), follow, out, seen, depth + 1);
            }
        }
        if follow == Follow::All {
            for keyword in ["then", "else"] {
                if let Some(sub) = object.get(keyword) {
                    self.collect(sub, base.clone(), follow, out, seen, depth + 1);
                }
            }
        }
        out.push((schema, base));
    }

    /// The candidates for property `key` of an object whose candidates are `parents`.
    pub(super) fn property_candidates<'a>(
        &'a self,
        parents: &Candidates<'a>,
        key: &str,
    ) -> Candidates<'a> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        for (parent, base) in parents {
            let declared = parent.get("properties").and_then(|props| props.get(key));
            let sub = match declared {
                Some(sub) => Some(sub),
                None if parent.get("patternProperties").is_none() => {
                    parent.get("additionalProperties")
                }
                None => None,
            };
            if let Some(sub) = sub {
                self.collect(sub, base.clone(), Follow::All, &mut out, &mut seen, 0);
            }
        }
        out
    }

    /// The candidates for item `at` of an array whose candidates are `parents`.
    pub(super) fn item_candidates<'a>(
        &'a self,
        parents: &Candidates<'a>,
        at: usize,
    ) -> Candidates<'a> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        for (parent, base) in parents {
            let prefix = parent.get("prefixItems").and_then(Value::as_array);
            let sub = match (prefix.and_then(|p| p.get(at)), parent.get("items")) {
                (Some(sub), _) => Some(sub),
                (None, Some(Value::Array(tuple))) => {
                    tuple.get(at).or_else(|| parent.get("additionalItems"))
                }
                (None, Some(items)) => Some(items),
                (None, None) => None,
            };
            if let Some(sub) = sub {
                self.collect(sub, base.clone(), Follow::All, &mut out, &mut seen, 0);
            }
        }
        out
    }

    pub(super) fn coerce(&self, value: Value, candidates: &Candidates<'_>) -> Value {
        let value = match value {
            Value::String(text) => coerce_string(text, candidates),
            other => other,
        };
        match value {
            Value::Object(object) => Value::Object(
                object
                    .into_iter()
                    .map(|(key, child)| {
                        let subs = self.property_candidates(candidates, &key);
                        let child = self.coerce(child, &subs);
                        (key, child)
                    })
                    .collect(),
            ),
            Value::Array(items) => Value::Array(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(at, child)| {
                        let subs = self.item_candidates(candidates, at);
                        self.coerce(child, &subs)
                    })
                    .collect(),
            ),
            other => other,
        }
    }
}

/// The JSON types the candidates name, from `type`, `enum` and `const`, in order of appearance.
pub(super) fn declared_types(candidates: &Candidates<'_>) -> Vec<&'static str> {
    let mut types: Vec<&'static str> = Vec::new();
    let mut add = |name: &'static str| {
        if !types.contains(&name) {
            types.push(name);
        }
    };
    for (schema, _) in candidates {
        match schema.get("type") {
            Some(Value::String(name)) => {
                if let Some(name) = type_name(name) {
                    add(name);
                }
            }
            Some(Value::Array(names)) => {
                for name in names.iter().filter_map(Value::as_str).filter_map(type_name) {
                    add(name);
                }
            }
            _ => {}
        }
        let values = schema
            .get("enum")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .chain(schema.get("const"));
        for value in values {
            add(json_type(value));
        }
    }
    types
}

pub(super) fn allows_type(candidates: &Candidates<'_>, name: &str) -> bool {
    declared_types(candidates).contains(&name)
}

fn type_name(name: &str) -> Option<&'static str> {
    [
        "string", "integer", "number", "boolean", "null", "array", "object",
    ]
    .into_iter()
    .find(|known| *known == name)
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Coerce one string to the first type the candidates name that it can become, unless they
/// accept a string (or name no type at all).
fn coerce_string(text: String, candidates: &Candidates<'_>) -> Value {
    let types = declared_types(candidates);
    if types.is_empty() || types.contains(&"string") {
        return Value::String(text);
    }
    let parsed = || serde_json::from_str::<Value>(&text).ok();
    for wanted in ["integer", "number", "boolean", "null", "array", "object"] {
        if !types.contains(&wanted) {
            continue;
        }
        let coerced = match wanted {
            // Whole numbers only, and only where they are exact (`"5.0"` yes, `"1e30"` no).
            "integer" => parsed().filter(|v| {
                v.as_number().is_some_and(|n| {
                    n.is_i64()
                        || n.is_u64()
                        || n.as_f64()
                            .is_some_and(|f| f.fract() == 0.0 && f.abs() <= MAX_EXACT_FLOAT)
                })
            }),
            "number" => parsed().filter(Value::is_number),
            "boolean" => match text.as_str() {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                _ => None,
            },
            "null" => (text == "null").then_some(Value::Null),
            "array" => parsed().filter(Value::is_array),
            "object" => parsed().filter(Value::is_object),
            _ => None,
        };
        if let Some(coerced) = coerced {
            return coerced;
        }
    }
    Value::String(text)
}

#[cfg(test)]
mod tests {
    use crate::contract::testutil::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn coerces_integer_and_still_enforces_minimum() {
        let contract = input_contract(json!({
            "type": "object",
            "properties": {"n": {"type": "integer", "minimum": 10}}
        }));
        assert_eq!(
            contract.coerce_and_validate(json!({"n": "12"})),
            Ok(json!({"n": 12}))
        );
        let errs = contract.coerce_and_validate(json!({"n": "5"})).unwrap_err();
        assert_eq!(paths(&errs), vec!["/n"]);
        assert!(errs[0].message.contains("minimum of 10"), "{errs:?}");
        // Not an integer: left a string, so the type error shows.
        let errs = contract
            .coerce_and_validate(json!({"n": "2.5"}))
            .unwrap_err();
        assert!(errs[0].message.contains("\"2.5\""), "{errs:?}");
        // Too big to be exact: not coerced rather than silently rounded.
        let errs = contract
            .coerce_and_validate(json!({"n": "100000000000000000000000"}))
            .unwrap_err();
        assert!(errs[0].message.contains("is not of type"), "{errs:?}");
        assert_eq!(
            contract.coerce_and_validate(json!({"n": "12.0"})),
            Ok(json!({"n": 12.0}))
        );
        let errs = contract
            .coerce_and_validate(json!({"n": "ten"}))
            .unwrap_err();
        assert!(
            errs[0]
                .message
                .contains("\"ten\" is not of type \"integer\""),
            "{errs:?}"
        );
    }

    #[test]
    fn coerces_numbers_booleans_and_null() {
        let contract = input_contract(json!({
            "properties": {
                "x": {"type": "number"},
                "b": {"type": "boolean"},
                "z": {"type": "null"},
                "m": {"type": ["integer", "null"]}
            }
        }));
        assert_eq!(
            contract
                .coerce_and_validate(json!({"x": "2.5", "b": "true", "z": "null", "m": "null"})),
            Ok(json!({"x": 2.5, "b": true, "z": null, "m": null}))
        );
        assert_eq!(
            contract.coerce_and_validate(json!({"x": "-3", "b": "false", "m": "4"})),
            Ok(json!({"x": -3, "b": false, "m": 4}))
        );
        let errs = contract
            .coerce_and_validate(json!({"b": "yes"}))
            .unwrap_err();
        assert_eq!(paths(&errs), vec!["/b"]);
    }

    #[test]
    fn coerces_through_ref() {
        let set = set(&[
            (
                "schemas/defs/limits.json",
                json!({"$id": "limits.json", "$defs": {"count": {"type": "integer", "maximum": 100}}}),
            ),
            ("schemas/defs/flag.json", json!({"type": "boolean"})),
            (
                "schemas/input/x.json",
                json!({"$ref": "#/$defs/args", "$defs": {"args": {
                    "type": "object",
                    "properties": {
                        "count": {"$ref": "limits.json#/$defs/count"},
                        "dry": {"$ref": "../defs/flag.json"}
                    }
                }}}),
            ),
        ]);
        let contract = compile(&set, "schemas/input/x.json");
        assert_eq!(
            contract.coerce_and_validate(json!({"count": "42", "dry": "true"})),
            Ok(json!({"count": 42, "dry": true}))
        );
        let errs = contract
            .coerce_and_validate(json!({"count": "420"}))
            .unwrap_err();
        assert_eq!(paths(&errs), vec!["/count"]);
    }

    #[test]
    fn strings_stay_strings() {
        let contract = input_contract(json!({
            "properties": {
                "s": {"type": "string"},
                "either": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
                "free": {}
            }
        }));
        let value = json!({"s": "5", "either": "5", "free": "true"});
        assert_eq!(contract.coerce_and_validate(value.clone()), Ok(value));
    }

    #[test]
    fn enum_of_integers_coerces() {
        let contract = input_contract(json!({"properties": {"level": {"enum": [1, 2, 3]}}}));
        assert_eq!(
            contract.coerce_and_validate(json!({"level": "2"})),
            Ok(json!({"level": 2}))
        );
    }

    #[test]
    fn arrays_and_objects_from_json_text() {
        let contract = input_contract(json!({
            "properties": {
                "tags": {"type": "array", "items": {"type": "string"}},
                "ids": {"type": "array", "items": {"type": "integer"}},
                "opts": {"type": "object", "properties": {"deep": {"type": "boolean"}}},
                "extra": {"type": "object", "additionalProperties": {"type": "integer"}}
            }
        }));
        assert_eq!(
            contract.coerce_and_validate(json!({
                "tags": "[\"a\", \"b\"]",
                "ids": "[1, \"2\"]",
                "opts": "{\"deep\": \"true\"}",
                "extra": {"k": "3"}
            })),
            Ok(json!({
                "tags": ["a", "b"],
                "ids": [1, 2],
                "opts": {"deep": true},
                "extra": {"k": 3}
            }))
        );
        let errs = contract
            .coerce_and_validate(json!({"tags": "a,b"}))
            .unwrap_err();
        assert_eq!(paths(&errs), vec!["/tags"]);
        let errs = contract
            .coerce_and_validate(json!({"opts": "[1]"}))
            .unwrap_err();
        assert_eq!(paths(&errs), vec!["/opts"]);
    }
}
