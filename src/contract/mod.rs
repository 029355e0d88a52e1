//! JSON Schema contracts per script, resolved offline.
//!
//! A skill's contracts live in `schemas/input/<script>.json`, `schemas/output/<script>.json`, and
//! shared fragments in `schemas/defs/*.json`. Drafts 2020-12 (the default) and 7 are the supported
//! ones, picked from `$schema`.
//!
//! Every schema file is given a URI under `band://skill/` that mirrors its path, so a relative
//! `$ref` such as `../defs/repo.json` resolves the way it reads. A defs file is also known by its
//! `$id`: an absolute `$id` as is, a relative one (`"repo.json"`) from every schema folder of the
//! skill. Nothing else is ever resolved: jsonschema gets a retriever that serves the skill's own
//! schemas from memory and refuses every other URI (no network, no file reads), and the documents
//! it is handed have every `$ref` already made absolute, so a file means the same thing however
//! it is reached.
//!
//! [`Contract::coerce_and_validate`] turns CLI strings into the types the schema asks for before
//! validating; [`Contract::validate`] is strict and is what script output goes through.

mod args;
mod bundle;
mod error;
mod load_dir;
mod offline;
mod refs;
mod schema_set;
mod script;
#[cfg(test)]
mod testutil;
mod uri;
mod validate;
mod walk;

pub use args::{ArgDoc, describe_args, parse_cli_args, suggest_args};
pub use error::{ArgError, ContractError, Violation};
pub use schema_set::{SchemaFile, SchemaSet};
pub use script::{is_argv_schema, no_input_schema};
pub use validate::Contract;

/// The long flags `band run` (and `band <skill>/<script>`) takes for itself wherever they stand
/// before `--`, global ones included: an input property of one of these names cannot be given as
/// `--name=…` on the command line (band takes it), only after `--` or in `--input`. Kept equal to
/// the command line's own by a test of the binary.
pub const RUN_FLAGS: &[&str] = &[
    "allow-system-workspace",
    "color",
    "help",
    "input",
    "input-file",
    "json",
    "record-io",
    "require-lock",
    "skills",
    "target",
    "trace",
    "workspace",
];

/// The top-level properties of the input schema `schema` named like one of band's own run flags
/// ([`RUN_FLAGS`]), sorted.
pub fn shadowed_properties(schema: &serde_json::Value) -> Vec<String> {
    let mut out: Vec<String> = schema
        .get("properties")
        .and_then(serde_json::Value::as_object)
        .map(|p| {
            p.keys()
                .filter(|k| RUN_FLAGS.contains(&k.as_str()))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// The advice every refused `$ref` carries.
const OFFLINE_ONLY: &str = "band resolves $ref offline only; put the schema in schemas/defs/";
/// The URI prefix under which a skill's files are known to the resolver.
const ROOT_URI: &str = "band://skill/";
/// The folder, relative to the skill root, that holds every schema.
const SCHEMAS_DIR: &str = "schemas";
/// The largest whole number an `f64` holds exactly (2^53).
const MAX_EXACT_FLOAT: f64 = 9_007_199_254_740_992.0;
/// How deep a `$ref`/combinator chain is followed when looking for types (cycles are cut earlier).
const MAX_FOLLOW_DEPTH: usize = 64;
