//! A script's contracts wherever the skill keeps them: `schemas/{input,output}/<script>.json`,
//! or upstream Bands' co-located `scripts/resources/<script>/{input,output}_schema.json`. A script
//! with no input schema takes no input: its contract is [`no_input_schema`] (an empty object),
//! the same for `band run`, `band help`, `band mcp` and `band lint`.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::error::ContractError;
use super::schema_set::{SchemaFile, SchemaSet};
use super::validate::Contract;

/// The input contract of a script with no input schema: an object with no properties.
pub fn no_input_schema() -> Value {
    json!({
        "type": "object",
        "properties": {},
        "additionalProperties": false
    })
}

/// True when `schema` is argv-style (what `band wrap` writes for an Agent Skill's script): an
/// object whose only property is `args`, an array of strings. Such a script gets `args` appended
/// to its command line, and `band <skill>/<script> -- ARGS…` gives the words as `args`.
pub fn is_argv_schema(schema: &Value) -> bool {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return false;
    };
    props.len() == 1
        && props.get("args").is_some_and(|a| {
            a.get("type") == Some(&json!("array"))
                && a.get("items").and_then(|i| i.get("type")) == Some(&json!("string"))
        })
}

impl SchemaSet {
    /// True when `script`'s input schema is argv-style ([`is_argv_schema`]).
    pub fn takes_argv(&self, script: &str) -> bool {
        self.input(script).is_some_and(is_argv_schema)
    }

    /// The input contract of `script`: its schema ([`SchemaSet::input_rel`]) compiled, or, when it
    /// has none, [`no_input_schema`].
    pub fn input_contract(&self, script: &str) -> Result<Contract, ContractError> {
        match self.input_rel(script) {
            Some(rel) => self.compile(&rel),
            None => {
                let rel = format!("schemas/input/{script}.json");
                let (set, mut errors) = SchemaSet::load(vec![SchemaFile {
                    path: PathBuf::from(&rel),
                    text: no_input_schema().to_string(),
                }]);
                match errors.pop() {
                    Some(e) => Err(e),
                    None => set.compile(&rel),
                }
            }
        }
    }

    /// The input schema of `script` as a tool's `inputSchema` (every `$ref` bundled), or
    /// [`no_input_schema`] when it has none. `None` when its schema does not compile.
    pub fn input_tool_schema(&self, script: &str) -> Option<Value> {
        match self.input_rel(script) {
            Some(rel) => {
                self.compile(&rel).ok()?;
                self.bundle(&rel)
            }
            None => Some(no_input_schema()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::testutil::*;

    #[test]
    fn a_script_without_an_input_schema_takes_an_empty_object() {
        let set = set(&[]);
        let c = set.input_contract("go").unwrap();
        assert_eq!(c.coerce_and_validate(json!({})), Ok(json!({})));
        assert!(c.coerce_and_validate(json!({"x": 1})).is_err());
        assert_eq!(set.input_tool_schema("go"), Some(no_input_schema()));
    }

    #[test]
    fn colocated_schemas_are_a_scripts_contract_and_the_canonical_one_wins() {
        let set = set(&[
            (
                "scripts/resources/up/input_schema.json",
                json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
            ),
            (
                "scripts/resources/up/output_schema.json",
                json!({"type": "object"}),
            ),
            (
                "scripts/resources/both/input_schema.json",
                json!({"type": "object"}),
            ),
            (
                "schemas/input/both.json",
                json!({"type": "object", "required": ["a"]}),
            ),
        ]);
        assert_eq!(
            set.input_rel("up").as_deref(),
            Some("scripts/resources/up/input_schema.json")
        );
        assert_eq!(
            set.output_rel("up").as_deref(),
            Some("scripts/resources/up/output_schema.json")
        );
        let c = set.input_contract("up").unwrap();
        assert_eq!(
            c.coerce_and_validate(json!({"n": "3"})),
            Ok(json!({"n": 3}))
        );
        assert_eq!(
            set.input_rel("both").as_deref(),
            Some("schemas/input/both.json")
        );
        assert!(set.input("both").unwrap()["required"].is_array());
    }

    #[test]
    fn other_files_under_scripts_are_not_schemas() {
        let (_, errors) = SchemaSet::load(vec![SchemaFile {
            path: PathBuf::from("scripts/resources/up/other.json"),
            text: "{}".into(),
        }]);
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0].to_string().contains("must be under schemas/"),
            "{}",
            errors[0]
        );
    }
}
