//! The errors: a schema file that cannot be used ([`ContractError`]), a value that fails a
//! contract ([`Violation`]) and a command line that is not a list of flags ([`ArgError`]).

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::diag::{Code, Diagnostic, Loc};

/// A problem with a schema file: it is not JSON, does not compile, or has a `$ref` band cannot
/// resolve. Every message names the file (relative to the skill root).
#[derive(Debug, thiserror::Error)]
pub enum ContractError {
    #[error("{}:{line}:{col}: invalid json: {message}", path.display())]
    Json {
        path: PathBuf,
        line: usize,
        col: usize,
        message: String,
    },
    #[error("{}: {message}", path.display())]
    Compile { path: PathBuf, message: String },
    #[error("{}: cannot resolve $ref \"{reference}\": {message}", path.display())]
    Ref {
        path: PathBuf,
        reference: String,
        message: String,
    },
    #[error("{}: {}", .path.display(), lowercase_first(&.source.to_string()))]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl ContractError {
    /// The file the error is about, relative to the skill root (or as given for I/O errors).
    pub fn path(&self) -> &Path {
        match self {
            ContractError::Json { path, .. }
            | ContractError::Compile { path, .. }
            | ContractError::Ref { path, .. }
            | ContractError::Io { path, .. } => path,
        }
    }

    /// The lint code this error is reported under.
    pub fn code(&self) -> Code {
        match self {
            ContractError::Json { .. } | ContractError::Io { .. } => Code::SchemaJson,
            ContractError::Compile { .. } | ContractError::Ref { .. } => Code::SchemaInvalid,
        }
    }

    /// Where in the file the error is, when known.
    pub fn loc(&self) -> Loc {
        match self {
            ContractError::Json { line, col, .. } => Loc::new(*line, *col),
            _ => Loc::FILE,
        }
    }

    /// The error as a lint diagnostic (the path stays relative to the skill root).
    pub fn to_diagnostic(&self) -> Diagnostic {
        let message = match self {
            ContractError::Json { message, .. } => format!("invalid json: {message}"),
            ContractError::Compile { message, .. } => message.clone(),
            ContractError::Ref {
                reference, message, ..
            } => format!("cannot resolve $ref \"{reference}\": {message}"),
            ContractError::Io { source, .. } => lowercase_first(&source.to_string()),
        };
        Diagnostic::new(self.code(), self.path(), self.loc(), message)
    }

    pub(super) fn compile(path: &Path, message: impl Into<String>) -> Self {
        ContractError::Compile {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }
}

/// One way a value fails a contract.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// JSON pointer to the offending part of the value; `""` is the value itself.
    pub instance_path: String,
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.instance_path.is_empty() {
            write!(f, "(root): {}", self.message)
        } else {
            write!(f, "{}: {}", self.instance_path, self.message)
        }
    }
}

/// A command line that is not a list of `--key[=value]` flags.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgError {
    #[error("unexpected argument \"{0}\": arguments are --key=value, --key value, or --flag")]
    Positional(String),
    #[error("argument \"{0}\" has no name: arguments are --key=value, --key value, or --flag")]
    EmptyName(String),
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

#[cfg(test)]
mod tests {
    use crate::contract::testutil::*;
    use crate::contract::{SchemaFile, SchemaSet};
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn errors_become_diagnostics() {
        let set = set(&[(
            "schemas/input/x.json",
            json!({"$ref": "https://example.com/x.json"}),
        )]);
        let diag = set
            .compile("schemas/input/x.json")
            .unwrap_err()
            .to_diagnostic();
        assert_eq!(
            diag.headline(),
            "schemas/input/x.json: error[C002]: cannot resolve $ref \"https://example.com/x.json\": \
             band resolves $ref offline only; put the schema in schemas/defs/"
        );
        let (_, errors) = SchemaSet::load(vec![SchemaFile {
            path: "schemas/input/y.json".into(),
            text: "{\"a\": }".into(),
        }]);
        let headline = errors[0].to_diagnostic().headline();
        assert!(
            headline.starts_with("schemas/input/y.json:1:7: error[C001]: invalid json: "),
            "{headline}"
        );
    }
}
