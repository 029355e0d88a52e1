//! `read` / `write` patterns (PLACEHOLDER: to be implemented).
use super::{Decision, PatternError};

#[derive(Debug, Clone)]
pub struct FsPattern { text: String }
impl FsPattern {
    pub fn parse(text: &str) -> Result<Self, PatternError> { Ok(FsPattern { text: text.to_string() }) }
    pub fn as_str(&self) -> &str { &self.text }
    pub fn is_absolute(&self) -> bool { self.text.starts_with('/') }
    pub fn matches(&self, _path: &str) -> bool { false }
}
#[derive(Debug, Clone)]
pub struct FsMatcher { allow: Vec<FsPattern>, deny: Vec<FsPattern> }
impl FsMatcher {
    pub fn new(allow: &[String], deny: &[String]) -> Result<Self, (bool, usize, PatternError)> {
        let a = allow.iter().enumerate().map(|(i, s)| FsPattern::parse(s).map_err(|e| (false, i, e))).collect::<Result<_, _>>()?;
        let d = deny.iter().enumerate().map(|(i, s)| FsPattern::parse(s).map_err(|e| (true, i, e))).collect::<Result<_, _>>()?;
        Ok(FsMatcher { allow: a, deny: d })
    }
    pub fn check(&self, _path: &str) -> Decision { let _ = (&self.allow, &self.deny); Decision::Default }
}
