//! Composition (PLACEHOLDER: to be implemented).
use std::path::PathBuf;
use serde::Serialize;
use super::{Category, Limits, Policy, RuleSet};

/// One band file's own declarations, before composition.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BandPolicy {
    pub name: String,
    pub source: PathBuf,
    pub allow: RuleSet,
    pub deny: RuleSet,
    pub insist: RuleSet,
    pub limits: Limits,
    pub secrets: Vec<String>,
    pub required_secrets: Vec<String>,
    pub requires_egress: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConflictKind { DenyInsist, InsistNotAllowed, CeilingExceeded, RequiresUnsatisfied }

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Conflict {
    pub kind: ConflictKind,
    pub category: Category,
    pub item: String,
    /// The band (by name) the offending item comes from.
    pub band: String,
    pub source: PathBuf,
    pub message: String,
}

pub fn compose(own: &BandPolicy, ancestors: &[BandPolicy], includes: &[BandPolicy]) -> (Policy, Vec<Conflict>) {
    let _ = (ancestors, includes);
    (Policy { allow: own.allow.clone(), deny: own.deny.clone(), insist: own.insist.clone(), limits: own.limits.clone(), secrets: own.secrets.clone(), required_secrets: own.required_secrets.clone() }, Vec::new())
}
