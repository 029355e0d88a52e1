//! Fixtures the contract tests share.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::{Contract, SchemaFile, SchemaSet, Violation};

pub(super) fn set(files: &[(&str, Value)]) -> SchemaSet {
    let (set, errors) = SchemaSet::load(
        files
            .iter()
            .map(|(path, value)| SchemaFile {
                path: PathBuf::from(path),
                text: value.to_string(),
            })
            .collect(),
    );
    assert!(errors.is_empty(), "load errors: {errors:?}");
    set
}

pub(super) fn compile(set: &SchemaSet, rel: &str) -> Contract {
    match set.compile(rel) {
        Ok(contract) => contract,
        Err(error) => panic!("{rel} does not compile: {error}"),
    }
}

pub(super) fn violations(contract: &Contract, value: &Value) -> Vec<Violation> {
    contract.validate(value).expect_err("expected violations")
}

pub(super) fn paths(violations: &[Violation]) -> Vec<&str> {
    violations
        .iter()
        .map(|v| v.instance_path.as_str())
        .collect()
}

pub(super) fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

pub(super) fn repo_def() -> Value {
    json!({
        "type": "object",
        "properties": {"name": {"type": "string"}, "stars": {"type": "integer"}},
        "required": ["name"]
    })
}

pub(super) fn input_contract(schema: Value) -> Contract {
    let set = set(&[("schemas/input/x.json", schema)]);
    compile(&set, "schemas/input/x.json")
}
