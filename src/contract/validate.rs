//! Contracts: one compiled schema, validated strictly or after coercing CLI strings.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::error::Violation;
use super::error::lowercase_first;
use super::schema_set::Index;
use super::walk::{Follow, allows_type};

/// A compiled schema, ready to validate values.
pub struct Contract {
    pub(super) path: PathBuf,
    pub(super) file: usize,
    pub(super) index: Arc<Index>,
    pub(super) validator: jsonschema::Validator,
}

impl fmt::Debug for Contract {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Contract")
            .field("path", &self.path)
            .finish()
    }
}

impl Contract {
    /// The schema file this contract was compiled from, relative to the skill root.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Strict validation: every error, each with the JSON pointer of the value it is about.
    ///
    /// `Value::Null` stands for "no output": against a schema that requires properties it fails
    /// with a message saying so, even where the schema would not otherwise constrain `null`.
    pub fn validate(&self, value: &Value) -> Result<(), Vec<Violation>> {
        let mut violations: Vec<Violation> = self
            .validator
            .iter_errors(value)
            .map(|error| Violation {
                instance_path: error.instance_path().as_str().to_string(),
                message: describe(&error),
            })
            .collect();
        if value.is_null() {
            let file = &self.index.files[self.file];
            let roots = self
                .index
                .candidates(&file.served, &file.uri, Follow::Definite);
            let required: BTreeSet<&str> = roots
                .iter()
                .filter_map(|(schema, _)| schema.get("required")?.as_array())
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            if !required.is_empty() {
                let names: Vec<String> =
                    required.iter().map(|name| format!("\"{name}\"")).collect();
                let expected = format!(
                    "got null (no output), but the schema expects an object with required properties {}",
                    names.join(", ")
                );
                if violations.is_empty() {
                    if !allows_type(&roots, "null") {
                        violations.push(Violation {
                            instance_path: String::new(),
                            message: expected,
                        });
                    }
                } else {
                    violations.insert(
                        0,
                        Violation {
                            instance_path: String::new(),
                            message: expected,
                        },
                    );
                    violations.retain(|v| {
                        !(v.instance_path.is_empty()
                            && v.message.starts_with("null is not of type"))
                    });
                }
            } else if !violations.is_empty() {
                for violation in &mut violations {
                    if violation.instance_path.is_empty() {
                        violation.message = format!("got null (no output): {}", violation.message);
                    }
                }
            }
        }
        if violations.is_empty() {
            Ok(())
        } else {
            Err(violations)
        }
    }

    /// Coerce CLI strings to the types the schema asks for, then validate strictly.
    ///
    /// A string becomes an integer/number (`"5"`), boolean (`"true"`/`"false"`), null (`"null"`),
    /// or array/object (JSON text) only where the schema at that place (following `$ref`,
    /// `allOf`/`anyOf`/`oneOf`, `properties`, `additionalProperties`, `items` and `prefixItems`)
    /// names that type and does not accept a string. A string that cannot be coerced is left as
    /// it is, so validation reports it.
    pub fn coerce_and_validate(&self, value: Value) -> Result<Value, Vec<Violation>> {
        let file = &self.index.files[self.file];
        let roots = self.index.candidates(&file.served, &file.uri, Follow::All);
        let coerced = self.index.coerce(value, &roots);
        self.validate(&coerced).map(|()| coerced)
    }
}

/// An error's message; for a value no branch of a `oneOf` or `anyOf` accepts, followed by what
/// is wrong in the branch that was most likely meant ([`meant_branch`]).
fn describe(error: &jsonschema::ValidationError<'_>) -> String {
    cap_quotes(&describe_whole(error), error.instance())
}

/// The most of a value an error message quotes: the input may be megabytes, and an error is
/// printed, returned to an MCP client and recorded in the ledger ("contents stay out").
const QUOTE_CAP: usize = 200;

/// `message` with its quotes of `instance` cut to [`QUOTE_CAP`] bytes (`"abc…" (N bytes)`), and
/// the whole held to a few quotes' length (a message quoting part of the value another way).
fn cap_quotes(message: &str, instance: &serde_json::Value) -> String {
    let whole = instance.to_string();
    let message = if whole.len() > QUOTE_CAP {
        message.replace(&whole, &cut(&whole, QUOTE_CAP))
    } else {
        message.to_string()
    };
    if message.len() > 4 * QUOTE_CAP {
        cut(&message, 4 * QUOTE_CAP)
    } else {
        message
    }
}

/// The first `max` bytes of `text` (at a character boundary), then `… (N bytes)`.
fn cut(text: &str, max: usize) -> String {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

fn describe_whole(error: &jsonschema::ValidationError<'_>) -> String {
    use jsonschema::error::ValidationErrorKind as Kind;
    let message = lowercase_first(&error.to_string());
    let (keyword, context) = match error.kind() {
        Kind::OneOfNotValid { context } => ("oneOf", context),
        Kind::AnyOf { context } => ("anyOf", context),
        _ => return message,
    };
    let at = error.instance_path().as_str();
    let Some((index, errors)) = meant_branch(context, at) else {
        return message;
    };
    let detail: Vec<String> = errors
        .iter()
        .map(|e| {
            let path = e.instance_path().as_str();
            let path = path.strip_prefix(at).unwrap_or(path);
            let path = if path.is_empty() { "/" } else { path };
            format!("{path}: {}", lowercase_first(&e.to_string()))
        })
        .collect();
    format!(
        "{message}; the nearest is branch {keyword}/{index}: {}",
        detail.join("; ")
    )
}

/// The branch most likely meant, as `(index, its errors)`: of the branches whose `const`/`enum`
/// values (the usual discriminators) and type at `at` itself match, the one with the fewest
/// errors; none when no branch is left or two come equally near (a guess would mislead).
fn meant_branch<'c, 'e>(
    context: &'c [Vec<jsonschema::ValidationError<'e>>],
    at: &str,
) -> Option<(usize, &'c [jsonschema::ValidationError<'e>])> {
    use jsonschema::error::ValidationErrorKind as Kind;
    let ruled_out = |e: &jsonschema::ValidationError<'_>| match e.kind() {
        Kind::Constant { .. } | Kind::Enum { .. } => true,
        Kind::Type { .. } => e.instance_path().as_str() == at,
        _ => false,
    };
    let mut open = context
        .iter()
        .enumerate()
        .filter(|(_, errors)| !errors.is_empty() && !errors.iter().any(ruled_out));
    let mut best = open.next()?;
    let mut tied = false;
    for branch in open {
        if branch.1.len() < best.1.len() {
            (best, tied) = (branch, false);
        } else if branch.1.len() == best.1.len() {
            tied = true;
        }
    }
    (!tied).then_some((best.0, best.1.as_slice()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::SchemaSet;
    use crate::contract::testutil::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn output_validation_does_not_coerce() {
        let set = set(&[(
            "schemas/output/x.json",
            json!({"type": "object", "properties": {"n": {"type": "integer"}, "ok": {"type": "boolean"}}}),
        )]);
        let contract = compile(&set, "schemas/output/x.json");
        let errs = violations(&contract, &json!({"n": "5", "ok": "true"}));
        assert_eq!(paths(&errs), vec!["/n", "/ok"]);
        assert_eq!(errs[0].to_string(), "/n: \"5\" is not of type \"integer\"");
    }

    #[test]
    fn a_long_value_is_quoted_cut_with_its_size() {
        let contract = input_contract(json!({"properties": {"n": {"type": "integer"}}}));
        let long = "a".repeat(1 << 20);
        let errs = violations(&contract, &json!({"n": long}));
        let want = format!(
            "/n: \"{}… ({} bytes) is not of type \"integer\"",
            "a".repeat(199),
            (1 << 20) + 2
        );
        assert_eq!(errs[0].to_string(), want);
        // A message that quotes the value some other way is held to 800 bytes.
        let text = "b".repeat(5000);
        let got = cap_quotes(&text, &json!(1));
        assert!(got.len() < 900 && got.ends_with("… (5000 bytes)"), "{got}");
    }

    #[test]
    fn violation_messages_are_lowercase() {
        let contract = input_contract(json!({"properties": {}, "additionalProperties": false}));
        let errs = violations(&contract, &json!({"x": 1}));
        assert!(
            errs[0].message.starts_with("additional properties"),
            "{errs:?}"
        );
    }

    #[test]
    fn contracts_can_be_shared_across_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Contract>();
        assert_send_sync::<SchemaSet>();
    }

    #[test]
    fn formats_are_checked() {
        let contract =
            input_contract(json!({"properties": {"when": {"type": "string", "format": "date"}}}));
        assert_eq!(contract.validate(&json!({"when": "2024-02-29"})), Ok(()));
        assert_eq!(
            paths(&violations(&contract, &json!({"when": "yesterday"}))),
            vec!["/when"]
        );
    }

    #[test]
    fn null_output_against_required_fields() {
        let set = set(&[
            (
                "schemas/output/typed.json",
                json!({"type": "object", "required": ["a", "b"]}),
            ),
            ("schemas/output/untyped.json", json!({"required": ["a"]})),
            ("schemas/defs/res.json", json!({"required": ["id"]})),
            (
                "schemas/output/viaref.json",
                json!({"$ref": "../defs/res.json"}),
            ),
            ("schemas/output/object.json", json!({"type": "object"})),
            ("schemas/output/anything.json", json!({})),
            (
                "schemas/output/nullable.json",
                json!({"type": ["object", "null"], "required": ["a"]}),
            ),
        ]);
        let one = |rel: &str| compile(&set, rel).validate(&Value::Null);

        let errs = one("schemas/output/typed.json").unwrap_err();
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(
            errs[0].to_string(),
            "(root): got null (no output), but the schema expects an object with required \
             properties \"a\", \"b\""
        );
        // `required` alone does not constrain null in JSON Schema; band still refuses no output.
        let errs = one("schemas/output/untyped.json").unwrap_err();
        assert!(errs[0].message.contains("\"a\""), "{errs:?}");
        let errs = one("schemas/output/viaref.json").unwrap_err();
        assert!(errs[0].message.contains("\"id\""), "{errs:?}");

        let errs = one("schemas/output/object.json").unwrap_err();
        assert_eq!(
            errs[0].message,
            "got null (no output): null is not of type \"object\""
        );

        assert_eq!(one("schemas/output/anything.json"), Ok(()));
        assert_eq!(one("schemas/output/nullable.json"), Ok(()));
    }

    #[test]
    fn a_one_of_failure_names_the_branch_that_was_meant() {
        let contract = input_contract(json!({
            "type": "object",
            "properties": {
                "shape": {
                    "oneOf": [
                        {
                            "type": "object",
                            "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}},
                            "required": ["kind", "r"]
                        },
                        {
                            "type": "object",
                            "properties": {
                                "kind": {"const": "rect"},
                                "w": {"type": "number"},
                                "h": {"type": "number"}
                            },
                            "required": ["kind", "w", "h"]
                        }
                    ]
                }
            }
        }));
        // The kind says rect: that branch is named, though the circle branch has as few errors.
        let errs = violations(&contract, &json!({"shape": {"kind": "rect", "w": "2"}}));
        assert_eq!(paths(&errs), vec!["/shape"]);
        let message = &errs[0].message;
        assert!(
            message.ends_with(
                "; the nearest is branch oneOf/1: /: \"h\" is a required property; /w: \"2\" is not of type \"number\""
            ),
            "{message}"
        );
        // A value of the wrong type for every branch gets no guess.
        // Neither branch is nearer than the other: no guess either.
        for shape in [json!(5), json!({"kind": "square"}), json!({"w": 1})] {
            let errs = violations(&contract, &json!({ "shape": shape }));
            assert!(!errs[0].message.contains("nearest"), "{}", errs[0].message);
        }
    }
}
