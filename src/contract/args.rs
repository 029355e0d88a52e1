//! CLI arguments: parsing `--key[=value]` flags into a JSON object, and describing the flags an
//! input schema accepts.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::{Map, Value};

use super::error::ArgError;
use super::schema_set::{Index, SchemaSet};
use super::walk::{Candidates, Follow, declared_types};

/// Turn `--key=value`, `--key value` and bare `--flag` (= `"true"`) into a map of strings.
///
/// The first `=` splits key from value (`--filter=a=b` is `"a=b"`); the last of duplicate keys
/// wins; a following argument is taken as the value unless it starts with `--`; `--` ends the
/// flags. Anything that is not a flag (including anything after `--`) is an error naming it.
pub fn parse_cli_args(args: &[String]) -> Result<Map<String, Value>, ArgError> {
    let mut out = Map::new();
    let mut rest = args.iter().peekable();
    while let Some(arg) = rest.next() {
        if arg == "--" {
            return match rest.next() {
                Some(positional) => Err(ArgError::Positional(positional.clone())),
                None => Ok(out),
            };
        }
        let Some(flag) = arg.strip_prefix("--") else {
            return Err(ArgError::Positional(arg.clone()));
        };
        let (key, value) = match flag.split_once('=') {
            Some((key, value)) => (key, value.to_string()),
            None => match rest.next_if(|next| !next.starts_with("--")) {
                Some(value) => (flag, value.clone()),
                None => (flag, "true".to_string()),
            },
        };
        if key.is_empty() {
            return Err(ArgError::EmptyName(arg.clone()));
        }
        out.insert(key.to_string(), Value::String(value));
    }
    Ok(out)
}

/// One top-level input property, as `band help <skill>/<script>` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArgDoc {
    pub name: String,
    /// `string`, `integer|null`, `array<string>`, … or `any`.
    #[serde(rename = "type")]
    pub ty: String,
    pub description: Option<String>,
    pub required: bool,
    pub default: Option<Value>,
    /// The allowed values, from `enum` or `const`; empty when any value of the type goes.
    pub enum_values: Vec<Value>,
    /// The schema's `examples` of this property (for the example invocation of `band help`).
    pub examples: Vec<Value>,
}

/// Describe the top-level properties of an input schema, for `band help`.
///
/// Properties come from the root and from what it pulls in (`$ref`, `allOf`, and the branches of
/// `anyOf`/`oneOf`), the root's own first, each group by name (serde_json keeps keys sorted).
/// A property is required if the root or a `$ref`/`allOf` of it lists it. `schema` is best one
/// of this set's own (from [`SchemaSet::input`]), so its relative `$ref`s resolve from its file;
/// any other schema is read as if it sat in `schemas/input/`.
pub fn describe_args(schema: &Value, defs: &SchemaSet) -> Vec<ArgDoc> {
    let index = &defs.index;
    let (schema, base) = defs.located(schema);
    let definite = index.candidates(schema, &base, Follow::Definite);
    let all = index.candidates(schema, &base, Follow::All);
    let required: BTreeSet<&str> = definite
        .iter()
        .filter_map(|(s, _)| s.get("required")?.as_array())
        .flatten()
        .filter_map(Value::as_str)
        .collect();

    // Root first, then what it pulls in.
    let mut names: Vec<&str> = Vec::new();
    for (candidate, _) in all.iter().rev() {
        for name in candidate
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|props| props.keys())
        {
            if !names.contains(&name.as_str()) {
                names.push(name);
            }
        }
    }

    names
        .into_iter()
        .map(|name| {
            let subs = index.property_candidates(&all, name);
            let first = |keyword: &str| subs.iter().rev().find_map(|(s, _)| s.get(keyword));
            ArgDoc {
                name: name.to_string(),
                ty: type_string(index, &subs, 0),
                description: first("description")
                    .or_else(|| first("title"))
                    .and_then(Value::as_str)
                    .map(str::to_string),
                required: required.contains(name),
                default: first("default").cloned(),
                enum_values: match first("enum") {
                    Some(Value::Array(values)) => values.clone(),
                    _ => first("const").cloned().into_iter().collect(),
                },
                examples: match first("examples") {
                    Some(Value::Array(values)) => values.clone(),
                    _ => Vec::new(),
                },
            }
        })
        .collect()
}

/// For each name in `given` that is none of the schema's top-level properties (as
/// [`describe_args`] finds them, through `$ref`, `allOf`, `anyOf` and `oneOf`) but is close to one
/// ([`crate::suggest::nearest`]): `(given, nearest)`, in the order of `given`.
pub fn suggest_args<'a>(
    schema: &Value,
    defs: &SchemaSet,
    given: impl IntoIterator<Item = &'a str>,
) -> Vec<(String, String)> {
    let known: Vec<String> = describe_args(schema, defs)
        .into_iter()
        .map(|doc| doc.name)
        .collect();
    given
        .into_iter()
        .filter(|name| !known.iter().any(|k| k == name))
        .filter_map(|name| {
            let near = crate::suggest::nearest(name, known.iter().map(String::as_str))?;
            Some((name.to_string(), near.to_string()))
        })
        .collect()
}

fn type_string(index: &Index, candidates: &Candidates<'_>, depth: usize) -> String {
    let types = declared_types(candidates);
    if types.is_empty() {
        return "any".to_string();
    }
    types
        .iter()
        .map(|name| {
            if *name == "array" && depth < 4 {
                let items = index.item_candidates(candidates, usize::MAX);
                if !items.is_empty() {
                    let inner = type_string(index, &items, depth + 1);
                    if inner != "any" {
                        return format!("array<{inner}>");
                    }
                }
            }
            (*name).to_string()
        })
        .collect::<Vec<_>>()
        .join("|")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::testutil::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn cli_args_end_to_end() {
        let contract = input_contract(json!({
            "type": "object",
            "properties": {
                "n": {"type": "integer"},
                "verbose": {"type": "boolean"},
                "filter": {"type": "string"},
                "name": {"type": "string"}
            },
            "required": ["n"],
            "additionalProperties": false
        }));
        let map =
            parse_cli_args(&args(&["--n", "3", "--verbose", "--filter=a=b", "--name="])).unwrap();
        assert_eq!(
            contract.coerce_and_validate(Value::Object(map)),
            Ok(json!({"n": 3, "verbose": true, "filter": "a=b", "name": ""}))
        );
    }

    #[test]
    fn parse_cli_args_forms() {
        let map = parse_cli_args(&args(&[
            "--filter=key=val",
            "--name=",
            "--count",
            "5",
            "--neg",
            "-3",
            "--flag",
            "--last",
        ]))
        .unwrap();
        assert_eq!(
            Value::Object(map),
            json!({
                "filter": "key=val",
                "name": "",
                "count": "5",
                "neg": "-3",
                "flag": "true",
                "last": "true"
            })
        );
    }

    #[test]
    fn parse_cli_args_last_duplicate_wins() {
        let map = parse_cli_args(&args(&["--a=1", "--b", "x", "--a", "2"])).unwrap();
        assert_eq!(Value::Object(map), json!({"a": "2", "b": "x"}));
    }

    #[test]
    fn parse_cli_args_double_dash_and_positionals() {
        assert_eq!(
            Value::Object(parse_cli_args(&args(&["--a", "--"])).unwrap()),
            json!({"a": "true"})
        );
        assert_eq!(parse_cli_args(&[]).unwrap(), Map::new());
        assert_eq!(
            parse_cli_args(&args(&["--a=1", "stray"])),
            Err(ArgError::Positional("stray".into()))
        );
        assert_eq!(
            parse_cli_args(&args(&["--a", "1", "2"])),
            Err(ArgError::Positional("2".into()))
        );
        assert_eq!(
            parse_cli_args(&args(&["--", "--b"])),
            Err(ArgError::Positional("--b".into()))
        );
        assert_eq!(
            parse_cli_args(&args(&["-v"])),
            Err(ArgError::Positional("-v".into()))
        );
        assert_eq!(
            parse_cli_args(&args(&["--=x"])),
            Err(ArgError::EmptyName("--=x".into()))
        );
        let text = ArgError::Positional("stray".into()).to_string();
        assert!(text.contains("\"stray\""), "{text}");
    }

    #[test]
    fn describe_args_follows_refs() {
        let set = set(&[
            (
                "schemas/defs/common.json",
                json!({"$defs": {
                    "limit": {"type": "integer", "description": "how many", "default": 10},
                    "base": {"properties": {"verbose": {"type": "boolean"}}, "required": ["verbose"]}
                }}),
            ),
            (
                "schemas/input/x.json",
                json!({
                    "type": "object",
                    "allOf": [{"$ref": "../defs/common.json#/$defs/base"}],
                    "properties": {
                        "repo": {"type": "string", "description": "owner/name"},
                        "limit": {"$ref": "../defs/common.json#/$defs/limit"},
                        "mode": {"enum": ["fast", "slow"], "default": "fast"},
                        "tags": {"type": "array", "items": {"type": "string"}},
                        "since": {"type": ["string", "null"]},
                        "blob": {}
                    },
                    "required": ["repo"]
                }),
            ),
        ]);
        let schema = set.input("x").unwrap();
        let docs = describe_args(schema, &set);
        let by_name = |name: &str| docs.iter().find(|d| d.name == name).unwrap().clone();
        assert_eq!(docs.len(), 7, "{docs:?}");
        assert_eq!(
            by_name("repo"),
            ArgDoc {
                name: "repo".into(),
                ty: "string".into(),
                description: Some("owner/name".into()),
                required: true,
                default: None,
                enum_values: vec![],
                examples: vec![],
            }
        );
        assert_eq!(
            by_name("limit"),
            ArgDoc {
                name: "limit".into(),
                ty: "integer".into(),
                description: Some("how many".into()),
                required: false,
                default: Some(json!(10)),
                enum_values: vec![],
                examples: vec![],
            }
        );
        let mode = by_name("mode");
        assert_eq!(mode.ty, "string");
        assert_eq!(mode.enum_values, vec![json!("fast"), json!("slow")]);
        assert_eq!(mode.default, Some(json!("fast")));
        assert_eq!(by_name("tags").ty, "array<string>");
        assert_eq!(by_name("since").ty, "string|null");
        assert_eq!(by_name("blob").ty, "any");
        let verbose = by_name("verbose");
        assert_eq!((verbose.ty.as_str(), verbose.required), ("boolean", true));

        // Unknown arguments are matched against the same names, `$ref`ed ones included.
        assert_eq!(
            suggest_args(schema, &set, ["repo", "limt", "verbse", "zzz", "tags"]),
            vec![
                ("limt".to_string(), "limit".to_string()),
                ("verbse".to_string(), "verbose".to_string()),
            ]
        );
    }
}
