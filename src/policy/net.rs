//! `net` patterns (PLACEHOLDER: to be implemented).
use std::net::IpAddr;
use super::{Decision, PatternError};

#[derive(Debug, Clone)]
pub struct NetPattern { text: String }
impl NetPattern {
    pub fn parse(text: &str) -> Result<Self, PatternError> { Ok(NetPattern { text: text.to_string() }) }
    pub fn as_str(&self) -> &str { &self.text }
    pub fn matches_host(&self, _host: &str, _port: Option<u16>) -> bool { false }
    pub fn matches_ip(&self, _ip: IpAddr, _port: Option<u16>) -> bool { false }
}
#[derive(Debug, Clone)]
pub struct NetMatcher { allow: Vec<NetPattern>, deny: Vec<NetPattern> }
impl NetMatcher {
    pub fn new(allow: &[String], deny: &[String]) -> Result<Self, (bool, usize, PatternError)> {
        let a = allow.iter().enumerate().map(|(i, s)| NetPattern::parse(s).map_err(|e| (false, i, e))).collect::<Result<_, _>>()?;
        let d = deny.iter().enumerate().map(|(i, s)| NetPattern::parse(s).map_err(|e| (true, i, e))).collect::<Result<_, _>>()?;
        Ok(NetMatcher { allow: a, deny: d })
    }
    pub fn is_empty(&self) -> bool { self.allow.is_empty() }
    pub fn check_host(&self, _host: &str, _port: Option<u16>) -> Decision { let _ = &self.deny; Decision::Default }
    pub fn check_ip(&self, _ip: IpAddr, _port: Option<u16>) -> Decision { Decision::Default }
}
