//! `cli` patterns (PLACEHOLDER: to be implemented).
use std::collections::BTreeSet;
use super::{Decision, PatternError};

#[derive(Debug, Clone)]
pub struct CliPattern { text: String }
impl CliPattern {
    pub fn parse(text: &str) -> Result<Self, PatternError> { Ok(CliPattern { text: text.to_string() }) }
    pub fn as_str(&self) -> &str { &self.text }
    pub fn command(&self) -> Option<&str> { self.text.split_whitespace().next() }
    pub fn matches(&self, _argv: &[String]) -> bool { false }
}
#[derive(Debug, Clone)]
pub struct CliMatcher { allow: Vec<CliPattern>, deny: Vec<CliPattern> }
impl CliMatcher {
    pub fn new(allow: &[String], deny: &[String]) -> Result<Self, (bool, usize, PatternError)> {
        let a = allow.iter().enumerate().map(|(i, s)| CliPattern::parse(s).map_err(|e| (false, i, e))).collect::<Result<_, _>>()?;
        let d = deny.iter().enumerate().map(|(i, s)| CliPattern::parse(s).map_err(|e| (true, i, e))).collect::<Result<_, _>>()?;
        Ok(CliMatcher { allow: a, deny: d })
    }
    pub fn check(&self, _argv: &[String]) -> Decision { let _ = (&self.allow, &self.deny); Decision::Default }
    pub fn commands(&self) -> BTreeSet<String> { self.allow.iter().filter_map(|p| p.command().map(str::to_string)).collect() }
}
