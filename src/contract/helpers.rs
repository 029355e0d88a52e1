//! Helpers: URIs and `$ref` rewriting, walking a schema's subschemas, draft checks, JSON errors
//! and reading the `schemas/` tree.

use std::path::{Component, Path, PathBuf};

use jsonschema::Draft;
use serde_json::Value;

use super::error::ContractError;
use super::schema_set::SchemaFile;
use super::{ROOT_URI, SCHEMAS_DIR};

/// Check that `path` is a plain relative path under `schemas/`, and return it `/`-separated.
pub(super) fn relative_schema_path(path: &Path) -> Result<String, ContractError> {
    let mut parts = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => match part.to_str() {
                Some(part) => parts.push(part),
                None => return Err(ContractError::compile(path, "the file name is not utf-8")),
            },
            Component::CurDir => {}
            _ => {
                return Err(ContractError::compile(
                    path,
                    "a schema path must be relative to the skill root, under schemas/",
                ));
            }
        }
    }
    if parts.len() < 2 || parts[0] != SCHEMAS_DIR {
        return Err(ContractError::compile(
            path,
            "a schema file must be under schemas/",
        ));
    }
    Ok(parts.join("/"))
}

/// The `band://skill/…` URI of a relative path.
pub(super) fn path_uri(rel: &str) -> Option<String> {
    let mut encoded = String::with_capacity(rel.len());
    for byte in rel.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    let uri = jsonschema::uri::from_str(&format!("{ROOT_URI}{encoded}")).ok()?;
    Some(uri.as_str().to_string())
}

/// Resolve a URI reference against a base URI; the result is normalized.
pub(super) fn resolve(base: &str, reference: &str) -> Option<String> {
    let base = jsonschema::uri::from_str(base).ok()?;
    let resolved = jsonschema::uri::resolve_against(&base.borrow(), reference).ok()?;
    Some(resolved.as_str().to_string())
}

pub(super) fn strip_fragment(uri: &str) -> &str {
    uri.split_once('#').map_or(uri, |(doc, _)| doc)
}

pub(super) fn has_scheme(reference: &str) -> bool {
    let end = reference.find([':', '/', '?', '#']);
    matches!(end, Some(at) if at > 0 && reference[at..].starts_with(':'))
}

/// A URI as a person would write it: skill URIs become their relative path.
pub(super) fn display_uri(uri: &str) -> String {
    match uri.strip_prefix(ROOT_URI) {
        Some(rel) => percent_decode(rel),
        None => uri.to_string(),
    }
}

pub(super) fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' && at + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[at + 1..at + 3]).ok();
            if let Some(byte) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(byte);
                at += 3;
                continue;
            }
        }
        out.push(bytes[at]);
        at += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

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

/// Percent-encode what a URI fragment cannot hold as is.
pub(super) fn encode_fragment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/?".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Refuse a `$schema` band does not know (it would otherwise be fetched as a custom meta-schema).
pub(super) fn check_drafts(path: &Path, schema: &Value) -> Result<(), ContractError> {
    match schema.get("$schema") {
        None => Ok(()),
        Some(Value::String(uri)) => match Draft::default().detect(schema) {
            Draft::Unknown => Err(ContractError::compile(
                path,
                format!(
                    "unknown $schema \"{uri}\": use https://json-schema.org/draft/2020-12/schema \
                     (the default) or http://json-schema.org/draft-07/schema#"
                ),
            )),
            _ => Ok(()),
        },
        Some(_) => Err(ContractError::compile(path, "$schema must be a string")),
    }
}

pub(super) fn json_error(path: PathBuf, error: &serde_json::Error) -> ContractError {
    let full = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    let message = full.strip_suffix(&suffix).unwrap_or(&full);
    ContractError::Json {
        path,
        line: error.line(),
        col: error.column(),
        message: lowercase_first(message),
    }
}

pub(super) fn lowercase_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        // Leave acronyms ("EOF while parsing") alone.
        Some(first) if chars.next().is_some_and(char::is_lowercase) => first
            .to_lowercase()
            .chain(text[first.len_utf8()..].chars())
            .collect(),
        _ => text.to_string(),
    }
}

/// Gather `schemas/**.json` (as paths relative to the skill root) into `files`.
pub(super) fn collect_json_files(
    skill_root: &Path,
    canonical_root: &Path,
    rel_dir: &Path,
    files: &mut Vec<SchemaFile>,
    errors: &mut Vec<ContractError>,
) {
    let dir = skill_root.join(rel_dir);
    let entries = match fs_err::read_dir(&dir) {
        Ok(entries) => entries,
        Err(source) => {
            errors.push(ContractError::Io {
                path: rel_dir.to_path_buf(),
                source,
            });
            return;
        }
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        let rel = rel_dir.join(entry.file_name());
        let full = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            collect_json_files(skill_root, canonical_root, &rel, files, errors);
            continue;
        }
        if rel.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        if kind.is_symlink() {
            match fs_err::canonicalize(&full) {
                Ok(target) if target.starts_with(canonical_root) && target.is_file() => {}
                Ok(_) => {
                    errors.push(ContractError::compile(
                        &rel,
                        "symlink points outside the skill (or not to a file); not read",
                    ));
                    continue;
                }
                Err(source) => {
                    errors.push(ContractError::Io { path: rel, source });
                    continue;
                }
            }
        }
        match fs_err::read_to_string(&full) {
            Ok(text) => files.push(SchemaFile { path: rel, text }),
            Err(source) => errors.push(ContractError::Io { path: rel, source }),
        }
    }
}
