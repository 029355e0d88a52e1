//! A schema document's structure: its `$id`s, its `$ref`s (found or rewritten) and its
//! subschemas, with data keywords (`enum`, `const`, …) never entered.

use serde_json::Value;

use super::uri::{resolve, strip_fragment};

/// The root `$id` of a schema (`id`-less drafts are not supported).
pub(super) fn root_id(schema: &Value) -> Option<&str> {
    schema
        .get("$id")
        .and_then(Value::as_str)
        .filter(|id| !id.starts_with('#'))
}

/// The base URI inside `schema`, given the base outside it.
pub(super) fn enter(base: &str, schema: &Value) -> String {
    match root_id(schema).and_then(|id| resolve(base, id)) {
        Some(resolved) => strip_fragment(&resolved).to_string(),
        None => base.to_string(),
    }
}

/// Keywords whose values are data, not schemas.
fn is_data_keyword(key: &str) -> bool {
    matches!(key, "enum" | "const" | "default" | "examples")
}

/// Rewrite every `$ref` / `$dynamicRef` / `$recursiveRef` string in a schema document with
/// `map` (where it returns `Some`); data keywords (`enum`, `const`, …) are not entered.
pub(super) fn rewrite_refs(schema: &mut Value, map: &dyn Fn(&str) -> Option<String>) {
    match schema {
        Value::Object(object) => {
            for (key, child) in object.iter_mut() {
                match child {
                    Value::String(literal)
                        if matches!(key.as_str(), "$ref" | "$dynamicRef" | "$recursiveRef") =>
                    {
                        if let Some(new) = map(literal) {
                            *literal = new;
                        }
                    }
                    _ if is_data_keyword(key) => {}
                    _ => rewrite_refs(child, map),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| rewrite_refs(item, map)),
        _ => {}
    }
}

/// Keywords whose values map names to schemas.
fn is_schema_map_keyword(key: &str) -> bool {
    matches!(
        key,
        "properties"
            | "patternProperties"
            | "$defs"
            | "definitions"
            | "dependentSchemas"
            | "dependencies"
    )
}

/// Call `found(base, literal)` for every `$ref`-like keyword in a schema document.
pub(super) fn walk_refs(schema: &Value, base: &str, found: &mut dyn FnMut(&str, &str)) {
    walk_schemas(schema, base, &mut String::new(), &mut |node, base, _| {
        for keyword in ["$ref", "$dynamicRef", "$recursiveRef"] {
            if let Some(literal) = node.get(keyword).and_then(Value::as_str) {
                found(base, literal);
            }
        }
    });
}

/// Call `visit(node, base, pointer)` for every schema object in a document: `base` is the base
/// URI inside the node (its `$id` applied), `pointer` its JSON pointer in the document. Values of
/// `enum`, `const`, `default` and `examples` are data and are not entered.
pub(super) fn walk_schemas<'v>(
    schema: &'v Value,
    base: &str,
    pointer: &mut String,
    visit: &mut dyn FnMut(&'v Value, &str, &str),
) {
    match schema {
        Value::Object(object) => {
            let base = enter(base, schema);
            visit(schema, &base, pointer);
            for (key, child) in object {
                if is_data_keyword(key) {
                    continue;
                }
                let outer = pointer.len();
                push_segment(pointer, key);
                match child {
                    Value::Object(map) if is_schema_map_keyword(key) => {
                        for (name, sub) in map {
                            let inner = pointer.len();
                            push_segment(pointer, name);
                            walk_schemas(sub, &base, pointer, visit);
                            pointer.truncate(inner);
                        }
                    }
                    _ => walk_schemas(child, &base, pointer, visit),
                }
                pointer.truncate(outer);
            }
        }
        Value::Array(items) => {
            for (at, item) in items.iter().enumerate() {
                let outer = pointer.len();
                pointer.push('/');
                pointer.push_str(&at.to_string());
                walk_schemas(item, base, pointer, visit);
                pointer.truncate(outer);
            }
        }
        _ => {}
    }
}

fn push_segment(pointer: &mut String, segment: &str) {
    pointer.push('/');
    pointer.push_str(&segment.replace('~', "~0").replace('/', "~1"));
}
