//! JSON Schema contracts (TEMPORARY stand-in until the contract module lands).
use std::path::{Path, PathBuf};
pub struct SchemaSet;
pub struct Contract;
pub struct Violation { pub instance_path: String, pub message: String }
#[derive(Debug, thiserror::Error)]
pub enum ContractError { #[error("{path}: {message}")] Compile { path: PathBuf, message: String } }
impl SchemaSet {
    pub fn load_dir(_root: &Path) -> (SchemaSet, Vec<ContractError>) { (SchemaSet, Vec::new()) }
    pub fn compile(&self, rel: &str) -> Result<Contract, ContractError> { Err(ContractError::Compile { path: rel.into(), message: "unavailable".into() }) }
}
impl Contract { pub fn validate(&self, _v: &serde_json::Value) -> Result<(), Vec<Violation>> { Ok(()) } }
impl Contract { pub fn coerce_and_validate(&self, v: serde_json::Value) -> Result<serde_json::Value, Vec<Violation>> { Ok(v) } }
#[derive(Debug, thiserror::Error)] #[error("{0}")] pub struct ArgError(String);
pub fn parse_cli_args(args: &[String]) -> Result<serde_json::Map<String, serde_json::Value>, ArgError> {
    let mut m = serde_json::Map::new();
    for a in args { let Some(kv) = a.strip_prefix("--") else { return Err(ArgError(format!("unexpected argument `{a}`"))) };
        let (k, v) = kv.split_once('=').unwrap_or((kv, "true")); m.insert(k.into(), v.into()); }
    Ok(m)
}
