//! `net` patterns: which hosts and addresses a run may connect to.
//!
//! Pattern forms (each may carry an optional `:port` suffix; without one it matches any port):
//!
//! | Pattern               | Matches                                                               |
//! |-----------------------|-----------------------------------------------------------------------|
//! | `api.github.com`      | exactly that host name (case-insensitive, a trailing dot is ignored)  |
//! | `*.github.com`        | any subdomain at any depth (`a.b.github.com`), **not** `github.com`   |
//! | `*`                   | any host; the network layer still keeps private ranges denied         |
//! | `10.1.2.3`, `2001:db8::1`, `[2001:db8::1]:443` | that address                                 |
//! | `10.0.0.0/8`, `2001:db8::/32`, `[2001:db8::/32]:443` | every address in the network           |
//!
//! Host-name patterns never match an IP address: allowing `example.com` does not allow the
//! addresses it happens to resolve to (see upstream weakness §7.2.2). IP patterns match both an
//! address and a host string that is that address literally.
//!
//! Precedence in [`NetMatcher`]: deny > allow > default deny.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{Decision, PatternError};

/// What a loopback rule must be, for hints: one port, named.
pub const LOOPBACK_HINT: &str = "a rule for the host's loopback names one port: `localhost:PORT` (e.g. `localhost:8000`) reaches that port on the host's 127.0.0.1 and ::1, and nothing else of the host";

/// The host part of a [`NetPattern`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPattern {
    /// `*`: any host.
    Any,
    /// An exact host name, lower-cased, without a trailing dot.
    Exact(String),
    /// `*.<suffix>`: any name strictly below `suffix` (lower-cased, without a trailing dot).
    Subdomains(String),
    /// An IP literal (IPv4-mapped IPv6 literals are stored as IPv4).
    Ip(IpAddr),
    /// A network: `net` has no host bits set.
    Cidr { net: IpAddr, prefix: u8 },
}

/// One parsed `net` pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetPattern {
    text: String,
    host: HostPattern,
    port: Option<u16>,
    /// An L7 rule's methods and path glob (`"GET https://api.example.com/v1/**"`); `None` for a
    /// host-only rule, which admits every request to its host.
    http: Option<super::http::HttpRule>,
}

fn err(message: impl Into<String>) -> PatternError {
    PatternError::new(message)
}

/// Characters that only make sense as a glob.
fn has_glob_meta(s: &str) -> bool {
    s.contains(['*', '?', '[', ']', '{', '}'])
}

/// Parse a port suffix (the text after `:`).
fn parse_port(s: &str, whole: &str) -> Result<u16, PatternError> {
    if s.is_empty() {
        return Err(err(format!("`{whole}` ends with `:` but names no port"))
            .with_hint("write `host:port`, e.g. `api.example.com:443`, or drop the `:`"));
    }
    if !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(err(format!("`{s}` is not a port number"))
            .with_hint("a port is a number from 1 to 65535; omit it to allow every port"));
    }
    match s.parse::<u32>() {
        Ok(p) if (1..=65535).contains(&p) => u16::try_from(p).map_err(|_| err("port out of range")),
        _ => Err(err(format!("port `{s}` is out of range"))
            .with_hint("a port is a number from 1 to 65535; omit it to allow every port")),
    }
}

/// Validate and normalise a host name (no wildcard): lower-case, no trailing dot.
fn parse_host_name(raw: &str, whole: &str) -> Result<String, PatternError> {
    let lower = raw.to_ascii_lowercase();
    let name = lower.strip_suffix('.').unwrap_or(&lower);
    if name.is_empty() {
        return Err(err(format!("`{whole}` names no host"))
            .with_hint("write a host name such as `api.example.com`"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !matches!(c, 'a'..='z' | '0'..='9' | '.' | '-'))
    {
        let hint = if c == '@' {
            "user names are not part of a host pattern; write the host only".to_string()
        } else if c == '_' {
            "underscores are not valid in host names".to_string()
        } else {
            "host names may contain only letters, digits, `-` and `.` (non-ASCII names: use the `xn--` form)"
                .to_string()
        };
        return Err(err(format!(
            "`{whole}` contains `{c}`, which is not valid in a host name"
        ))
        .with_hint(hint));
    }
    if name.len() > 253 {
        return Err(err(format!(
            "host name in `{whole}` is {} characters long; the limit is 253",
            name.len()
        )));
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Err(err(format!("`{whole}` has an empty label"))
                .with_hint("remove the doubled or leading `.`"));
        }
        if label.len() > 63 {
            return Err(err(format!(
                "label `{label}` in `{whole}` is {} characters long; the limit is 63",
                label.len()
            )));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(err(format!(
                "label `{label}` in `{whole}` starts or ends with `-`"
            )));
        }
    }
    // `10.0.0` or `1.2.3.999` would be read as an address by some resolvers; a real name never has
    // an all-numeric top-level label.
    if name
        .rsplit('.')
        .next()
        .is_some_and(|tld| tld.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(err(format!(
            "`{whole}` looks like an IP address but is not a valid one"
        ))
        .with_hint(
            "write a full IPv4 address (`10.1.2.3`), or a network in CIDR form (`10.0.0.0/8`)",
        ));
    }
    Ok(name.to_string())
}

/// The mask of the first `prefix` bits of a `bits`-wide address.
fn mask(prefix: u8, bits: u8) -> u128 {
    if prefix == 0 {
        0
    } else {
        let all: u128 = if bits == 128 {
            u128::MAX
        } else {
            (1u128 << bits) - 1
        };
        (all << (bits - prefix.min(bits))) & all
    }
}

fn ip_bits(ip: IpAddr) -> (u128, u8) {
    match ip {
        IpAddr::V4(v4) => (u128::from(u32::from(v4)), 32),
        IpAddr::V6(v6) => (u128::from(v6), 128),
    }
}

/// Whether `ip` lies in `net/prefix` (same address family only).
pub fn cidr_contains(net: IpAddr, prefix: u8, ip: IpAddr) -> bool {
    let (n, nb) = ip_bits(net);
    let (a, ab) = ip_bits(ip);
    if nb != ab || prefix > nb {
        return false;
    }
    let m = mask(prefix, nb);
    n & m == a & m
}

/// An address in canonical form: IPv4-mapped IPv6 becomes IPv4.
fn canonical(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

fn parse_cidr(addr: &str, len: &str, whole: &str) -> Result<HostPattern, PatternError> {
    let net: IpAddr = addr.parse().map_err(|_| {
        err(format!(
            "`{whole}` contains a `/` but is not a CIDR network"
        ))
        .with_hint(format!("write the host only: `{}`", host_hint(whole)))
    })?;
    let max = if net.is_ipv4() { 32 } else { 128 };
    let prefix = match len.parse::<u8>() {
        Ok(p) if len.bytes().all(|b| b.is_ascii_digit()) && p <= max => p,
        _ => {
            return Err(err(format!(
                "`/{len}` is not a valid prefix length for `{addr}`"
            ))
            .with_hint(format!("the prefix length is a number from 0 to {max}")));
        }
    };
    let (bits, width) = ip_bits(net);
    let m = mask(prefix, width);
    if bits & !m != 0 {
        let fixed = match net {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(u32::try_from(bits & m).unwrap_or(0))),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(bits & m)),
        };
        return Err(err(format!("`{addr}/{prefix}` has host bits set"))
            .with_hint(format!("the network is `{fixed}/{prefix}`")));
    }
    // A mapped IPv4 network (`::ffff:10.0.0.0/104`) is the IPv4 network it embeds.
    if let IpAddr::V6(v6) = net
        && prefix >= 96
        && let Some(v4) = v6.to_ipv4_mapped()
    {
        return Ok(HostPattern::Cidr {
            net: IpAddr::V4(v4),
            prefix: prefix - 96,
        });
    }
    Ok(HostPattern::Cidr { net, prefix })
}

/// Best effort at "the host the user meant" for hints: strips a scheme, user info, path, port.
fn host_hint(text: &str) -> String {
    let s = text.split_once("://").map_or(text, |(_, rest)| rest);
    let s = s.split(['/', '?', '#']).next().unwrap_or(s);
    let s = s.rsplit_once('@').map_or(s, |(_, h)| h);
    s.to_string()
}

impl NetPattern {
    /// Parse one pattern. See the module documentation for the accepted forms.
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        if text.is_empty() {
            return Err(err("empty net pattern")
                .with_hint("write a host such as `api.example.com`, or `*` for any host"));
        }
        let methods_then_url = text
            .split_once(' ')
            .is_some_and(|(m, url)| !m.is_empty() && url.contains("://"));
        if methods_then_url || Self::is_http_url(text) {
            return Self::parse_http(text);
        }
        if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(err(format!(
                "`{}` contains whitespace or a control character",
                text.escape_debug()
            ))
            .with_hint("write one host per list item, with no spaces"));
        }
        if let Some((scheme, _)) = text.split_once("://") {
            return Err(err(format!(
                "`{text}` is a URL; net patterns name hosts, not URLs (`{scheme}://`)"
            ))
            .with_hint(format!("write the host only: `{}`", host_hint(text))));
        }
        let (host_part, port) =
            Self::split_port(text).map_err(|e| Self::loopback_port_error(text, e))?;
        let host = Self::parse_host(host_part, text)?;
        Ok(NetPattern {
            text: text.to_string(),
            host,
            port,
            http: None,
        })
    }

    /// `http(s)://authority/…`: an L7 rule without methods (a URL without a path stays the
    /// host-only rule's error, whose hint names the host).
    fn is_http_url(text: &str) -> bool {
        ["https://", "http://"].iter().any(|scheme| {
            text.strip_prefix(scheme)
                .is_some_and(|rest| rest.contains('/'))
        })
    }

    /// An L7 rule: `[METHODS ]scheme://host[:port]/path-glob` ([`super::http`]).
    fn parse_http(text: &str) -> Result<Self, PatternError> {
        let parts = super::http::parse(text)?;
        let (host_part, port) = Self::split_port(parts.authority)?;
        let host = Self::parse_host(host_part, text)?;
        if host == HostPattern::Any || matches!(host, HostPattern::Cidr { .. }) {
            return Err(err(format!("`{text}`: an HTTP rule names one host or `*.domain`"))
                .with_hint("write the host whose requests the rule admits, e.g. `GET https://api.example.com/**`"));
        }
        let https = parts.rule.is_https();
        let pattern = NetPattern {
            text: text.to_string(),
            host,
            port: Some(port.unwrap_or(if https { 443 } else { 80 })),
            http: Some(parts.rule),
        };
        if pattern.is_loopback() {
            return Err(err(format!(
                "`{text}`: an HTTP rule cannot name the host's loopback"
            ))
            .with_hint(LOOPBACK_HINT));
        }
        Ok(pattern)
    }

    /// An L7 rule's methods and path glob; `None` for a host-only rule.
    pub fn http(&self) -> Option<&super::http::HttpRule> {
        self.http.as_ref()
    }

    /// A loopback host with a port that is no number (`localhost:*`): a loopback rule names one
    /// port, so the hint says that rather than "omit it".
    fn loopback_port_error(text: &str, e: PatternError) -> PatternError {
        let host = match text.strip_prefix('[') {
            Some(rest) => rest.split_once(']').map_or(rest, |(h, _)| h),
            None => text.split_once(':').map_or(text, |(h, _)| h),
        };
        let loopback = host.eq_ignore_ascii_case("localhost")
            || host.parse::<IpAddr>().is_ok_and(|ip| {
                ip == IpAddr::V4(Ipv4Addr::LOCALHOST) || ip == IpAddr::V6(Ipv6Addr::LOCALHOST)
            });
        if loopback {
            e.with_hint(LOOPBACK_HINT)
        } else {
            e
        }
    }

    /// Split `host[:port]`, `[v6]:port`, bare IPv6 (several colons, no port).
    fn split_port(text: &str) -> Result<(&str, Option<u16>), PatternError> {
        if let Some(rest) = text.strip_prefix('[') {
            let Some((inner, after)) = rest.split_once(']') else {
                return Err(err(format!("`{text}` opens `[` but never closes it"))
                    .with_hint("write an IPv6 address with a port as `[2001:db8::1]:443`"));
            };
            if !inner.contains(':') {
                return Err(
                    err(format!("`{text}`: brackets are only for IPv6 addresses")).with_hint(
                        format!(
                            "write `{}` without brackets",
                            if after.is_empty() {
                                inner.to_string()
                            } else {
                                format!("{inner}{after}")
                            }
                        ),
                    ),
                );
            }
            let port = match after {
                "" => None,
                _ => match after.strip_prefix(':') {
                    Some(p) => Some(parse_port(p, text)?),
                    None => {
                        return Err(err(format!("unexpected `{after}` after `]` in `{text}`"))
                            .with_hint("write `[address]:port`"));
                    }
                },
            };
            return Ok((inner, port));
        }
        match text.matches(':').count() {
            0 => Ok((text, None)),
            1 => {
                let (h, p) = text.split_once(':').unwrap_or((text, ""));
                Ok((h, Some(parse_port(p, text)?)))
            }
            // Bare IPv6 (address or network); a port needs brackets.
            _ => Ok((text, None)),
        }
    }

    fn parse_host(host: &str, whole: &str) -> Result<HostPattern, PatternError> {
        if host.is_empty() {
            return Err(err(format!("`{whole}` names no host"))
                .with_hint("write `host:port`, e.g. `api.example.com:443`"));
        }
        if host == "*" {
            return Ok(HostPattern::Any);
        }
        if let Some((addr, len)) = host.split_once('/') {
            if addr.parse::<IpAddr>().is_ok() {
                return parse_cidr(addr, len, whole);
            }
            return Err(err(format!(
                "`{whole}` contains a path; net patterns name hosts only"
            ))
            .with_hint(format!("write the host only: `{}`", host_hint(whole))));
        }
        if host.contains(':') {
            return match host.parse::<Ipv6Addr>() {
                Ok(v6) => Ok(HostPattern::Ip(canonical(IpAddr::V6(v6)))),
                Err(_) => Err(err(format!("`{whole}` is not a valid IPv6 address"))
                    .with_hint("write an IPv6 address as `2001:db8::1`, or `[2001:db8::1]:443` with a port")),
            };
        }
        if let Ok(v4) = host.parse::<Ipv4Addr>() {
            return Ok(HostPattern::Ip(IpAddr::V4(v4)));
        }
        if let Some(suffix) = host.strip_prefix("*.") {
            if suffix.contains('*') {
                return Err(Self::wildcard_error(whole, host));
            }
            let name = parse_host_name(suffix, whole)?;
            return Ok(HostPattern::Subdomains(name));
        }
        if has_glob_meta(host) {
            return Err(Self::wildcard_error(whole, host));
        }
        Ok(HostPattern::Exact(parse_host_name(host, whole)?))
    }

    fn wildcard_error(whole: &str, host: &str) -> PatternError {
        let e = err(format!(
            "`{whole}`: a wildcard is only allowed as a whole leading label (`*.example.com`)"
        ));
        // Guess the domain the user had in mind: everything after the last label holding a
        // wildcard, or, for a leading `*x.com`, the name without its `*`.
        let labels: Vec<&str> = host.split('.').collect();
        let last_wild = labels.iter().rposition(|l| has_glob_meta(l)).unwrap_or(0);
        let mut domain: Vec<&str> = labels[last_wild + 1..].to_vec();
        if last_wild == 0
            && let Some(rest) = labels[0].strip_prefix('*')
            && !rest.is_empty()
            && !has_glob_meta(rest)
        {
            domain.insert(0, rest);
        }
        let domain = domain.join(".");
        if domain.contains('.') && parse_host_name(&domain, whole).is_ok() {
            e.with_hint(format!(
                "`*.{domain}` matches every subdomain of `{domain}` (add `{domain}` itself for the apex)"
            ))
        } else {
            e.with_hint("list each host explicitly; `*.domain` matches every subdomain of `domain`")
        }
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The host part, parsed.
    pub fn host(&self) -> &HostPattern {
        &self.host
    }

    /// The port restriction, if any.
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// `*` (with or without a port): any host. The network layer keeps private ranges denied
    /// for such patterns; only an explicit IP/CIDR pattern opens a private address.
    pub fn is_any(&self) -> bool {
        self.host == HostPattern::Any
    }

    /// A rule for the host's loopback: its host is `localhost`, `127.0.0.1` or `::1` (with or
    /// without a port). Only such a rule with a port, in `allow.net`, reaches the host: see
    /// [`NetPattern::loopback_port`].
    pub fn is_loopback(&self) -> bool {
        match &self.host {
            HostPattern::Exact(name) => name == "localhost",
            HostPattern::Ip(ip) => {
                *ip == IpAddr::V4(Ipv4Addr::LOCALHOST) || *ip == IpAddr::V6(Ipv6Addr::LOCALHOST)
            }
            _ => false,
        }
    }

    /// The port of the host's loopback this rule opens: `Some(P)` for `localhost:P`,
    /// `127.0.0.1:P` and `[::1]:P`, each of which reaches port P of the host's loopback (IPv4,
    /// then IPv6) and nothing else. `None` for any other rule (a loopback rule without a port is
    /// refused by lint, and opens nothing).
    pub fn loopback_port(&self) -> Option<u16> {
        self.port.filter(|_| self.is_loopback())
    }

    /// An IP or CIDR pattern.
    pub fn is_ip(&self) -> bool {
        matches!(self.host, HostPattern::Ip(_) | HostPattern::Cidr { .. })
    }

    fn port_ok(&self, port: Option<u16>) -> bool {
        match (self.port, port) {
            (None, _) | (_, None) => true,
            (Some(a), Some(b)) => a == b,
        }
    }

    /// Whether a connection to host name `host` on `port` matches.
    ///
    /// `host` may be a name (matched case-insensitively, trailing dot ignored), or an IP literal
    /// (bare or in brackets), which only IP/CIDR patterns and `*` match. An invalid host name
    /// never matches. `port: None` asks "some port of this host": a port-restricted pattern
    /// matches it (use [`NetMatcher::check_host`] for the deny/allow decision, which only lets a
    /// port-less deny pattern deny a port-less question).
    pub fn matches_host(&self, host: &str, port: Option<u16>) -> bool {
        if !self.port_ok(port) {
            return false;
        }
        match normalize_host(host) {
            Some(Subject::Ip(ip)) => self.host_matches_ip(ip),
            Some(Subject::Name(name)) => match &self.host {
                HostPattern::Any => true,
                HostPattern::Exact(e) => *e == name,
                HostPattern::Subdomains(s) => is_strict_subdomain(&name, s),
                HostPattern::Ip(_) | HostPattern::Cidr { .. } => false,
            },
            None => false,
        }
    }

    /// Whether a connection to address `ip` on `port` matches. Only IP/CIDR patterns and `*`
    /// match addresses; a host-name pattern never does. IPv4-mapped IPv6 addresses match the
    /// IPv4 patterns of the address they embed. `port: None` as in [`NetPattern::matches_host`].
    pub fn matches_ip(&self, ip: IpAddr, port: Option<u16>) -> bool {
        self.port_ok(port) && self.host_matches_ip(ip)
    }

    fn host_matches_ip(&self, ip: IpAddr) -> bool {
        let canon = canonical(ip);
        match &self.host {
            HostPattern::Any => true,
            HostPattern::Ip(p) => *p == canon || *p == ip,
            HostPattern::Cidr { net, prefix } => {
                cidr_contains(*net, *prefix, canon) || cidr_contains(*net, *prefix, ip)
            }
            HostPattern::Exact(_) | HostPattern::Subdomains(_) => false,
        }
    }

    /// Whether everything `other` matches is also matched by `self` (conservative: `false` when
    /// unsure). Used by composition to check that a band only narrows what it extends.
    pub fn covers(&self, other: &NetPattern) -> bool {
        // A host-only rule admits every request to its host; an L7 rule only some of them.
        let http_ok = match (&self.http, &other.http) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(a), Some(b)) => a.covers(b),
        };
        if !http_ok {
            return false;
        }
        let port_ok = match (self.port, other.port) {
            (None, _) => true,
            (Some(a), Some(b)) => a == b,
            (Some(_), None) => false,
        };
        if !port_ok {
            return false;
        }
        match (&self.host, &other.host) {
            (HostPattern::Any, _) => true,
            (_, HostPattern::Any) => false,
            (HostPattern::Exact(a), HostPattern::Exact(b)) => a == b,
            (HostPattern::Subdomains(s), HostPattern::Exact(b)) => is_strict_subdomain(b, s),
            (HostPattern::Subdomains(s), HostPattern::Subdomains(t)) => {
                s == t || is_strict_subdomain(t, s)
            }
            (HostPattern::Ip(a), HostPattern::Ip(b)) => a == b,
            (HostPattern::Ip(a), HostPattern::Cidr { net, prefix }) => {
                a == net && *prefix == if net.is_ipv4() { 32 } else { 128 }
            }
            (HostPattern::Cidr { net, prefix }, HostPattern::Ip(b)) => {
                cidr_contains(*net, *prefix, *b)
            }
            (
                HostPattern::Cidr { net, prefix },
                HostPattern::Cidr {
                    net: n2,
                    prefix: p2,
                },
            ) => p2 >= prefix && cidr_contains(*net, *prefix, *n2),
            _ => false,
        }
    }
}

/// Why `host` cannot be a host of a bound secret (`env.secrets: [{name, hosts}]`): it must be an
/// exact host name or `*.domain`, without a port; `None` when it can.
pub fn secret_host_problem(host: &str) -> Option<PatternError> {
    let p = match NetPattern::parse(host) {
        Ok(p) => p,
        Err(e) => return Some(e),
    };
    let named = matches!(p.host, HostPattern::Exact(_) | HostPattern::Subdomains(_));
    if !named || p.port.is_some() || p.http.is_some() || p.is_loopback() {
        return Some(
            err("a secret is bound to host names (`api.example.com` or `*.example.com`), without a port or a path")
                .with_hint("name the API's host; which requests may go there is `allow.net`'s to say"),
        );
    }
    None
}

/// `name` is strictly below `suffix` (at any depth).
fn is_strict_subdomain(name: &str, suffix: &str) -> bool {
    name.len() > suffix.len() + 1
        && name.ends_with(suffix)
        && name.as_bytes()[name.len() - suffix.len() - 1] == b'.'
}

/// A connection target, normalised.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Subject {
    Name(String),
    Ip(IpAddr),
}

/// Normalise a host string for matching: an IP literal (optionally bracketed) or a valid host
/// name, lower-cased, trailing dot removed. `None` for anything else (which then matches nothing).
fn normalize_host(host: &str) -> Option<Subject> {
    let unbracketed = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(ip) = unbracketed.parse::<IpAddr>() {
        return Some(Subject::Ip(ip));
    }
    if unbracketed.contains('*') {
        return None;
    }
    parse_host_name(unbracketed, host).ok().map(Subject::Name)
}

/// Whether a connection to `ip` may leave the machine as "the public internet".
///
/// False for: unspecified, loopback, RFC 1918, CGNAT `100.64.0.0/10`, link-local (`169.254/16`,
/// `fe80::/10`, which hold the cloud metadata endpoint `169.254.169.254`), `fd00:ec2::254` and all
/// of ULA `fc00::/7`, multicast, broadcast, the documentation / benchmarking / reserved ranges,
/// and every IPv6 address outside global unicast `2000::/3` (so also the deprecated
/// IPv4-compatible `::a.b.c.d`). IPv4-mapped (`::ffff:a.b.c.d`) and NAT64 (`64:ff9b::/96`)
/// addresses are judged by the IPv4 address they embed;
/// 6to4 (`2002::/16`) and Teredo (`2001::/32`) are never public (they tunnel to arbitrary IPv4).
pub fn is_public_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

const V4_NON_PUBLIC: &[(Ipv4Addr, u8)] = &[
    (Ipv4Addr::new(0, 0, 0, 0), 8),       // "this network", unspecified
    (Ipv4Addr::new(10, 0, 0, 0), 8),      // RFC 1918
    (Ipv4Addr::new(100, 64, 0, 0), 10),   // CGNAT (also Alibaba's metadata 100.100.100.200)
    (Ipv4Addr::new(127, 0, 0, 0), 8),     // loopback
    (Ipv4Addr::new(169, 254, 0, 0), 16),  // link-local, cloud metadata 169.254.169.254
    (Ipv4Addr::new(172, 16, 0, 0), 12),   // RFC 1918
    (Ipv4Addr::new(192, 0, 0, 0), 24),    // IETF protocol assignments
    (Ipv4Addr::new(192, 0, 2, 0), 24),    // TEST-NET-1
    (Ipv4Addr::new(192, 88, 99, 0), 24),  // 6to4 relay anycast (deprecated)
    (Ipv4Addr::new(192, 168, 0, 0), 16),  // RFC 1918
    (Ipv4Addr::new(198, 18, 0, 0), 15),   // benchmarking
    (Ipv4Addr::new(198, 51, 100, 0), 24), // TEST-NET-2
    (Ipv4Addr::new(203, 0, 113, 0), 24),  // TEST-NET-3
    (Ipv4Addr::new(224, 0, 0, 0), 4),     // multicast
    (Ipv4Addr::new(240, 0, 0, 0), 4),     // reserved, and 255.255.255.255 broadcast
];

/// Every range [`is_public_ip`] rejects, as (network, prefix) — for rule builders that need the
/// list as data. IPv6 outside `2000::/3` is given as `::/3`, `4000::/2` and `8000::/1`.
pub fn non_public_ranges() -> Vec<(IpAddr, u8)> {
    let mut v: Vec<(IpAddr, u8)> = V4_NON_PUBLIC
        .iter()
        .map(|(n, p)| (IpAddr::V4(*n), *p))
        .collect();
    v.extend([
        (IpAddr::V6(Ipv6Addr::UNSPECIFIED), 3),
        (IpAddr::V6(Ipv6Addr::new(0x4000, 0, 0, 0, 0, 0, 0, 0)), 2),
        (IpAddr::V6(Ipv6Addr::new(0x8000, 0, 0, 0, 0, 0, 0, 0)), 1),
    ]);
    v.extend(V6_NON_PUBLIC.iter().map(|(n, p)| (IpAddr::V6(*n), *p)));
    v
}

fn is_public_v4(v4: Ipv4Addr) -> bool {
    !V4_NON_PUBLIC
        .iter()
        .any(|(net, prefix)| cidr_contains(IpAddr::V4(*net), *prefix, IpAddr::V4(v4)))
}

const V6_NON_PUBLIC: &[(Ipv6Addr, u8)] = &[
    (Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0), 23), // IETF protocol assignments, Teredo
    (Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0), 32), // documentation
    (Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0), 16), // 6to4
    (Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 0), 20), // documentation (RFC 9637)
];

fn is_public_v6(v6: Ipv6Addr) -> bool {
    if let Some(v4) = v6.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    let a = IpAddr::V6(v6);
    // NAT64 (well-known prefix): the translator forwards to the embedded IPv4 address.
    if cidr_contains(
        IpAddr::V6(Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0)),
        96,
        a,
    ) {
        let o = v6.octets();
        let v4 = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
        return is_public_v4(v4);
    }
    // Only global unicast 2000::/3 is public; that excludes `::`, `::1`, IPv4-compatible `::/96`,
    // ULA fc00::/7 (and fd00:ec2::254), link-local fe80::/10, multicast ff00::/8, site-local
    // fec0::/10, discard 100::/64, local-use NAT64 64:ff9b:1::/48, …
    if !cidr_contains(IpAddr::V6(Ipv6Addr::new(0x2000, 0, 0, 0, 0, 0, 0, 0)), 3, a) {
        return false;
    }
    !V6_NON_PUBLIC
        .iter()
        .any(|(net, prefix)| cidr_contains(IpAddr::V6(*net), *prefix, a))
}

/// Allow and deny `net` patterns, compiled.
#[derive(Debug, Clone)]
pub struct NetMatcher {
    allow: Vec<NetPattern>,
    deny: Vec<NetPattern>,
}

impl NetMatcher {
    /// Parse both lists. On error: the list of the first bad pattern, its index, what is wrong.
    pub fn new(allow: &[String], deny: &[String]) -> Result<Self, super::RuleListError> {
        let (allow, deny) = super::parse_rule_lists(allow, deny, NetPattern::parse)?;
        Ok(NetMatcher { allow, deny })
    }

    /// No allow pattern: no network at all.
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty()
    }

    /// The allow patterns (allow and insist items), in declaration order.
    pub fn allow_patterns(&self) -> &[NetPattern] {
        &self.allow
    }

    /// The deny patterns, in declaration order.
    pub fn deny_patterns(&self) -> &[NetPattern] {
        &self.deny
    }

    /// Every allowed host-name pattern (exact names and `*.` wildcards; not `*`, not IPs).
    pub fn host_patterns(&self) -> impl Iterator<Item = &NetPattern> {
        self.allow
            .iter()
            .filter(|p| matches!(p.host, HostPattern::Exact(_) | HostPattern::Subdomains(_)))
    }

    /// Every allowed IP/CIDR pattern.
    pub fn ip_patterns(&self) -> impl Iterator<Item = &NetPattern> {
        self.allow.iter().filter(|p| p.is_ip())
    }

    /// The ports of the host's loopback the run may reach: each allow rule's
    /// [`NetPattern::loopback_port`], unless a deny rule covers `localhost`, `127.0.0.1` or `::1`
    /// on that port (`deny.net: ["localhost:5432"]`, `["127.0.0.0/8"]`, `["*:5432"]`). Sorted,
    /// each once. `*` never opens a loopback port: only a rule that names one does.
    pub fn loopback_ports(&self) -> Vec<u16> {
        let mut ports: Vec<u16> = self
            .allow
            .iter()
            .filter_map(NetPattern::loopback_port)
            .filter(|port| {
                let port = Some(*port);
                !self.deny.iter().any(|d| {
                    d.matches_host("localhost", port)
                        || d.matches_ip(IpAddr::V4(Ipv4Addr::LOCALHOST), port)
                        || d.matches_ip(IpAddr::V6(Ipv6Addr::LOCALHOST), port)
                })
            })
            .collect();
        ports.sort_unstable();
        ports.dedup();
        ports
    }

    /// Whether some allow pattern is `*`.
    pub fn allows_any(&self) -> bool {
        self.allow.iter().any(NetPattern::is_any)
    }

    /// A deny pattern denies a port-less question only if the pattern has no port itself:
    /// denying `x:25` does not deny every connection to `x`.
    fn denies(p: &NetPattern, port: Option<u16>) -> bool {
        port.is_some() || p.port.is_none()
    }

    /// Decide a connection to host `host` (a name or an IP literal) on `port`.
    /// An invalid host name is never allowed.
    pub fn check_host(&self, host: &str, port: Option<u16>) -> Decision {
        if normalize_host(host).is_none() {
            return Decision::Default;
        }
        if let Some(d) = self
            .deny
            .iter()
            .find(|p| Self::denies(p, port) && p.matches_host(host, port))
        {
            return Decision::Deny {
                rule: d.text.clone(),
            };
        }
        match self.allow.iter().find(|p| p.matches_host(host, port)) {
            Some(a) => Decision::Allow {
                rule: a.text.clone(),
            },
            None => Decision::Default,
        }
    }

    /// Whether some allow rule is an L7 rule (methods and a path glob).
    pub fn has_http_rules(&self) -> bool {
        self.allow.iter().any(|p| p.http.is_some())
    }

    /// Decide one HTTP request the egress proxy sees: to `host` (a name) on `port`, over TLS or
    /// not, `method` on `path`. A deny rule for the host denies it; a host-only allow rule for
    /// the host allows every request; an L7 rule allows what its methods and path admit.
    /// `Default` when nothing admits it (see [`super::http::suggest`] for the rule that would).
    pub fn check_request(
        &self,
        host: &str,
        port: u16,
        https: bool,
        method: &str,
        path: &str,
    ) -> Decision {
        if let Decision::Deny { rule } = self.check_host(host, Some(port)) {
            return Decision::Deny { rule };
        }
        let admits = |p: &&NetPattern| {
            p.matches_host(host, Some(port))
                && p.http
                    .as_ref()
                    .is_none_or(|h| h.is_https() == https && h.admits(method, path))
        };
        match self.allow.iter().find(admits) {
            Some(a) => Decision::Allow {
                rule: a.text.clone(),
            },
            None => Decision::Default,
        }
    }

    /// Decide a connection to address `ip` on `port`. Only IP/CIDR patterns and `*` apply.
    pub fn check_ip(&self, ip: IpAddr, port: Option<u16>) -> Decision {
        if let Some(d) = self
            .deny
            .iter()
            .find(|p| Self::denies(p, port) && p.matches_ip(ip, port))
        {
            return Decision::Deny {
                rule: d.text.clone(),
            };
        }
        match self.allow.iter().find(|p| p.matches_ip(ip, port)) {
            Some(a) => Decision::Allow {
                rule: a.text.clone(),
            },
            None => Decision::Default,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_public_ranges_agree_with_is_public_ip() {
        let ranges = non_public_ranges();
        let listed = |ip: IpAddr| {
            ranges
                .iter()
                .any(|(n, p)| n.is_ipv4() == ip.is_ipv4() && cidr_contains(*n, *p, ip))
        };
        for s in [
            "10.1.2.3",
            "127.0.0.1",
            "169.254.169.254",
            "100.100.100.200",
            "192.168.0.1",
            "8.8.8.8",
            "93.184.216.34",
            "::1",
            "fd00:ec2::254",
            "fe80::1",
            "2001:db8::1",
            "2606:4700::1111",
            "2002::1",
            "ff02::1",
        ] {
            let ip: IpAddr = s.parse().unwrap();
            assert_eq!(listed(ip), !is_public_ip(ip), "{s}");
        }
    }

    #[test]
    fn http_rules_admit_their_requests_and_open_their_host_port() {
        let allow = vec![
            "GET,POST https://api.github.com/repos/acme/**".to_string(),
            "uploads.github.com".to_string(),
        ];
        let m = NetMatcher::new(&allow, &["evil.github.com".to_string()]).unwrap();
        assert!(m.has_http_rules());
        let req =
            |host: &str, method: &str, path: &str| m.check_request(host, 443, true, method, path);
        assert_eq!(
            req("api.github.com", "GET", "/repos/acme/x/issues?page=2"),
            Decision::Allow {
                rule: allow[0].clone()
            }
        );
        assert_eq!(req("api.github.com", "POST", "/gists"), Decision::Default);
        assert_eq!(
            req("api.github.com", "DELETE", "/repos/acme/x"),
            Decision::Default
        );
        assert_eq!(
            m.check_request("api.github.com", 80, false, "GET", "/repos/acme/x"),
            Decision::Default,
            "http:// is not https://"
        );
        // A host-only rule admits every request to its host.
        assert_eq!(
            req("uploads.github.com", "PUT", "/anything"),
            Decision::Allow {
                rule: allow[1].clone()
            }
        );
        // At the network layer, the HTTP rule opens its host on its port only.
        assert!(m.check_host("api.github.com", Some(443)).is_allowed());
        assert!(!m.check_host("api.github.com", Some(22)).is_allowed());
        let narrow = p("GET https://api.github.com/repos/acme/**");
        assert!(p("api.github.com").covers(&narrow));
        assert!(p("*.github.com").covers(&narrow));
        assert!(!narrow.covers(&p("api.github.com")));
        assert!(!p("other.test").covers(&narrow));
    }

    fn p(s: &str) -> NetPattern {
        NetPattern::parse(s).unwrap_or_else(|e| panic!("{s}: {e} ({:?})", e.hint))
    }

    fn rej(s: &str) -> PatternError {
        match NetPattern::parse(s) {
            Ok(x) => panic!("{s} should be rejected, got {x:?}"),
            Err(e) => e,
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn m(allow: &[&str], deny: &[&str]) -> NetMatcher {
        let a: Vec<String> = allow.iter().map(|s| s.to_string()).collect();
        let d: Vec<String> = deny.iter().map(|s| s.to_string()).collect();
        NetMatcher::new(&a, &d).unwrap()
    }

    fn allow(rule: &str) -> Decision {
        Decision::Allow { rule: rule.into() }
    }

    fn deny(rule: &str) -> Decision {
        Decision::Deny { rule: rule.into() }
    }

    #[test]
    fn exact_host() {
        let x = p("api.github.com");
        assert_eq!(x.host(), &HostPattern::Exact("api.github.com".into()));
        assert_eq!(x.port(), None);
        assert!(x.matches_host("api.github.com", None));
        assert!(x.matches_host("api.github.com", Some(443)));
        assert!(
            x.matches_host("API.GitHub.COM", Some(80)),
            "case-insensitive"
        );
        assert!(
            x.matches_host("api.github.com.", Some(443)),
            "trailing dot ignored"
        );
        assert!(!x.matches_host("github.com", None));
        assert!(!x.matches_host("x.api.github.com", None));
        assert!(!x.matches_host("api.github.com.evil.test", None));
        assert!(!x.matches_host("evilapi.github.com", None));
        // Upper case and a trailing dot in the pattern are normalised too.
        assert!(p("API.GitHub.com.").matches_host("api.github.com", None));
    }

    #[test]
    fn wildcard_any_depth_not_apex() {
        let x = p("*.example.test");
        assert_eq!(x.host(), &HostPattern::Subdomains("example.test".into()));
        assert!(x.matches_host("a.example.test", None));
        assert!(x.matches_host("a.b.example.test", None));
        assert!(x.matches_host("a.b.c.d.example.test", Some(8080)));
        assert!(x.matches_host("UPLOADS.Example.Test.", None));
        assert!(!x.matches_host("example.test", None), "not the apex");
        assert!(!x.matches_host("badexample.test", None), "label boundary");
        assert!(!x.matches_host("example.test.evil", None));
        assert!(!x.matches_host(".example.test", None), "invalid host");
        assert!(!x.matches_ip(ip("93.184.216.34"), None));
    }

    #[test]
    fn any_host() {
        let x = p("*");
        assert!(x.is_any());
        assert!(x.matches_host("anything.test", None));
        assert!(x.matches_host("localhost", Some(1)));
        assert!(x.matches_ip(ip("8.8.8.8"), Some(53)));
        assert!(x.matches_ip(ip("2001:4860::8888"), None));
        assert!(!p("*.x.test").is_any());
        let y = p("*:443");
        assert!(y.is_any());
        assert_eq!(y.port(), Some(443));
        assert!(y.matches_host("a.test", Some(443)));
        assert!(!y.matches_host("a.test", Some(80)));
    }

    #[test]
    fn ports() {
        let x = p("api.github.com:443");
        assert_eq!(x.port(), Some(443));
        assert!(x.matches_host("api.github.com", Some(443)));
        assert!(!x.matches_host("api.github.com", Some(80)));
        assert!(x.matches_host("api.github.com", None), "None = some port");
        let w = p("*.x.test:8080");
        assert!(w.matches_host("a.b.x.test", Some(8080)));
        assert!(!w.matches_host("a.b.x.test", Some(8081)));
        assert!(!w.matches_host("x.test", Some(8080)));
        assert_eq!(p("a.test:1").port(), Some(1));
        assert_eq!(p("a.test:65535").port(), Some(65535));
        assert_eq!(p("10.1.2.3:22").port(), Some(22));
    }

    #[test]
    fn ipv4_literal() {
        let x = p("10.1.2.3");
        assert!(x.is_ip());
        assert_eq!(x.host(), &HostPattern::Ip(ip("10.1.2.3")));
        assert!(x.matches_ip(ip("10.1.2.3"), Some(5432)));
        assert!(!x.matches_ip(ip("10.1.2.4"), None));
        assert!(
            x.matches_host("10.1.2.3", None),
            "an IP pattern matches the IP as a host string"
        );
        assert!(
            x.matches_ip(ip("::ffff:10.1.2.3"), None),
            "IPv4-mapped form"
        );
        assert!(!x.matches_host("10.1.2.3.nip.io", None));
    }

    #[test]
    fn ipv6_literal() {
        let x = p("2001:db8::1");
        assert_eq!(x.port(), None);
        assert!(x.matches_ip(ip("2001:db8::1"), Some(443)));
        assert!(x.matches_ip(ip("2001:0db8:0:0::1"), None));
        assert!(!x.matches_ip(ip("2001:db8::2"), None));
        assert!(x.matches_host("2001:db8::1", None));
        assert!(x.matches_host("[2001:db8::1]", None));
        let y = p("[2001:db8::1]:443");
        assert_eq!(y.port(), Some(443));
        assert!(y.matches_ip(ip("2001:db8::1"), Some(443)));
        assert!(!y.matches_ip(ip("2001:db8::1"), Some(80)));
        assert!(p("[2001:db8::1]").matches_ip(ip("2001:db8::1"), None));
        // A mapped literal is its IPv4 address.
        assert_eq!(
            p("::ffff:10.0.0.1").host(),
            &HostPattern::Ip(ip("10.0.0.1"))
        );
        assert!(p("::ffff:10.0.0.1").matches_ip(ip("10.0.0.1"), None));
    }

    #[test]
    fn cidr_v4() {
        let x = p("10.0.0.0/8");
        assert_eq!(
            x.host(),
            &HostPattern::Cidr {
                net: ip("10.0.0.0"),
                prefix: 8
            }
        );
        assert!(x.matches_ip(ip("10.0.0.0"), None));
        assert!(x.matches_ip(ip("10.255.255.255"), None));
        assert!(!x.matches_ip(ip("11.0.0.0"), None));
        assert!(!x.matches_ip(ip("9.255.255.255"), None));
        assert!(x.matches_ip(ip("::ffff:10.9.9.9"), None));
        assert!(!x.matches_ip(ip("2001:db8::1"), None), "other family");
        assert!(x.matches_host("10.3.4.5", None));
        let edge = p("192.168.1.128/25");
        assert!(edge.matches_ip(ip("192.168.1.128"), None));
        assert!(edge.matches_ip(ip("192.168.1.255"), None));
        assert!(!edge.matches_ip(ip("192.168.1.127"), None));
        let host = p("192.168.1.7/32");
        assert!(host.matches_ip(ip("192.168.1.7"), None));
        assert!(!host.matches_ip(ip("192.168.1.6"), None));
        let all = p("0.0.0.0/0");
        assert!(all.matches_ip(ip("1.2.3.4"), None));
        assert!(!all.matches_ip(ip("2001:db8::1"), None));
        assert!(!all.is_any());
        let port = p("10.0.0.0/8:5432");
        assert!(port.matches_ip(ip("10.1.1.1"), Some(5432)));
        assert!(!port.matches_ip(ip("10.1.1.1"), Some(5433)));
    }

    #[test]
    fn cidr_v6() {
        let x = p("2001:db8::/32");
        assert!(x.matches_ip(ip("2001:db8::"), None));
        assert!(x.matches_ip(ip("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff"), None));
        assert!(!x.matches_ip(ip("2001:db9::"), None));
        assert!(!x.matches_ip(ip("2001:db7:ffff::"), None));
        assert!(p("::/0").matches_ip(ip("fe80::1"), None));
        assert!(p("fe80::1/128").matches_ip(ip("fe80::1"), None));
        assert!(!p("fe80::1/128").matches_ip(ip("fe80::2"), None));
        let b = p("[2001:db8::/32]:443");
        assert_eq!(b.port(), Some(443));
        assert!(b.matches_ip(ip("2001:db8::5"), Some(443)));
        assert!(!b.matches_ip(ip("2001:db8::5"), Some(80)));
        // A mapped network is the IPv4 network it embeds.
        assert_eq!(
            p("::ffff:10.0.0.0/104").host(),
            &HostPattern::Cidr {
                net: ip("10.0.0.0"),
                prefix: 8
            }
        );
    }

    #[test]
    fn host_patterns_never_match_ips() {
        assert!(!p("example.com").matches_ip(ip("93.184.216.34"), None));
        assert!(!p("*.example.com").matches_ip(ip("93.184.216.34"), None));
        assert!(!p("example.com").matches_host("93.184.216.34", None));
    }

    #[test]
    fn invalid_subjects_never_match() {
        let x = p("*.example.com");
        for h in [
            "",
            "a b.example.com",
            "a_b.example.com",
            "evil.com/.example.com",
            "a..example.com",
            "*.example.com",
        ] {
            assert!(!x.matches_host(h, None), "{h:?}");
        }
        assert!(!p("*").matches_host("bad host", None));
        assert_eq!(
            m(&["*"], &[]).check_host("a\0.example.com", None),
            Decision::Default
        );
    }

    #[test]
    fn rejections() {
        let cases: &[(&str, &str, Option<&str>)] = &[
            ("", "empty net pattern", None),
            (" api.x.test", "whitespace", None),
            ("api.x.test ", "whitespace", None),
            ("a b.test", "whitespace", None),
            ("a\tb", "whitespace", None),
            (
                "https://api.github.com",
                "is a URL",
                Some("write the host only: `api.github.com`"),
            ),
            // A URL with a path is an HTTP rule (`policy::http`): its own refusals.
            (
                "https://api.github.com/repos?x=1",
                "`?` in the path",
                Some("the query string is not matched: end the path where it begins"),
            ),
            (
                "http://user@x.test:8080/p",
                "names a user",
                Some("drop the `user@`"),
            ),
            (
                "GET https://*/p",
                "names one host",
                Some(
                    "write the host whose requests the rule admits, e.g. `GET https://api.example.com/**`",
                ),
            ),
            (
                "GET https://localhost:8000/p",
                "loopback",
                Some(LOOPBACK_HINT),
            ),
            (
                "x.test/y",
                "contains a path",
                Some("write the host only: `x.test`"),
            ),
            (
                "api.github.com/repos/a",
                "contains a path",
                Some("write the host only: `api.github.com`"),
            ),
            (
                "a*.x.test",
                "wildcard",
                Some("`*.x.test` matches every subdomain of `x.test`"),
            ),
            (
                "*x.com",
                "wildcard",
                Some("`*.x.com` matches every subdomain of `x.com` (add `x.com` itself"),
            ),
            ("x.*", "wildcard", Some("list each host explicitly")),
            ("x.*.test", "wildcard", Some("list each host explicitly")),
            ("a.*.x.test", "wildcard", Some("`*.x.test`")),
            ("*.*.x.test", "wildcard", Some("`*.x.test`")),
            ("a?.x.test", "wildcard", None),
            ("[ab].x.test", "brackets are only for IPv6", None),
            ("{a,b}.x.test", "wildcard", None),
            ("**", "wildcard", None),
            ("*.", "names no host", None),
            ("a_b.test", "not valid in a host name", Some("underscores")),
            (
                "user@x.test",
                "not valid in a host name",
                Some("user names"),
            ),
            ("bücher.de", "not valid in a host name", Some("xn--")),
            ("a..b.test", "empty label", None),
            (".a.test", "empty label", None),
            ("-a.test", "starts or ends with `-`", None),
            ("a-.test", "starts or ends with `-`", None),
            ("x.test:", "names no port", None),
            ("x.test:0", "out of range", Some("1 to 65535")),
            ("x.test:65536", "out of range", None),
            ("x.test:99999999999", "out of range", None),
            ("x.test:https", "is not a port number", None),
            ("x.test:-1", "is not a port number", None),
            (":443", "names no host", None),
            ("[2001:db8::1", "never closes", None),
            ("[2001:db8::1]443", "after `]`", None),
            (
                "[10.0.0.1]:80",
                "brackets are only for IPv6",
                Some("`10.0.0.1:80`"),
            ),
            ("2001:db8::g", "not a valid IPv6 address", None),
            ("10.0.0.0/33", "not a valid prefix length", Some("0 to 32")),
            ("10.0.0.0/", "not a valid prefix length", None),
            ("10.0.0.0/x", "not a valid prefix length", None),
            ("10.0.0.0/-1", "not a valid prefix length", None),
            (
                "2001:db8::/129",
                "not a valid prefix length",
                Some("0 to 128"),
            ),
            (
                "10.1.2.3/8",
                "host bits set",
                Some("the network is `10.0.0.0/8`"),
            ),
            ("2001:db8::1/32", "host bits set", Some("`2001:db8::/32`")),
            ("10.0.0", "looks like an IP address", None),
            ("1.2.3.999", "looks like an IP address", None),
            ("010.1.2.3", "looks like an IP address", None),
        ];
        for (text, msg, hint) in cases {
            let e = rej(text);
            assert!(
                e.message.contains(msg),
                "{text:?}: message {:?} lacks {msg:?}",
                e.message
            );
            if let Some(h) = hint {
                let got = e.hint.clone().unwrap_or_default();
                assert!(got.contains(h), "{text:?}: hint {got:?} lacks {h:?}");
            }
        }
    }

    #[test]
    fn length_limits() {
        let label63 = "a".repeat(63);
        assert!(NetPattern::parse(&format!("{label63}.test")).is_ok());
        let e = rej(&format!("{}.test", "a".repeat(64)));
        assert!(e.message.contains("limit is 63"), "{}", e.message);
        // 4 × 63 + 3 dots = 255 > 253.
        let long = [label63.as_str(); 4].join(".");
        let e = rej(&long);
        assert!(e.message.contains("limit is 253"), "{}", e.message);
        let ok = format!("{}.{}.{}.{}", label63, label63, label63, "a".repeat(61));
        assert_eq!(ok.len(), 253);
        assert!(NetPattern::parse(&ok).is_ok());
    }

    #[test]
    fn matcher_precedence() {
        let n = m(
            &["*.github.com", "api.openai.com:443"],
            &["gist.github.com"],
        );
        assert_eq!(
            n.check_host("api.github.com", Some(443)),
            allow("*.github.com")
        );
        assert_eq!(n.check_host("a.b.github.com", None), allow("*.github.com"));
        assert_eq!(
            n.check_host("gist.github.com", Some(443)),
            deny("gist.github.com")
        );
        assert_eq!(
            n.check_host("GIST.github.com.", None),
            deny("gist.github.com")
        );
        assert_eq!(
            n.check_host("x.gist.github.com", None),
            allow("*.github.com"),
            "exact deny is not a wildcard"
        );
        assert_eq!(n.check_host("github.com", None), Decision::Default);
        assert_eq!(
            n.check_host("api.openai.com", Some(443)),
            allow("api.openai.com:443")
        );
        assert_eq!(n.check_host("api.openai.com", Some(80)), Decision::Default);
        assert_eq!(n.check_ip(ip("140.82.112.3"), Some(443)), Decision::Default);
        assert!(!n.is_empty());
        assert!(m(&[], &["x.test"]).is_empty());
        assert_eq!(m(&[], &[]).check_host("x.test", None), Decision::Default);
    }

    #[test]
    fn deny_inside_wildcard() {
        let n = m(
            &["*"],
            &["*.internal.corp", "169.254.169.254", "10.0.0.0/8"],
        );
        assert_eq!(
            n.check_host("a.b.internal.corp", None),
            deny("*.internal.corp")
        );
        assert_eq!(
            n.check_host("internal.corp", None),
            allow("*"),
            "wildcard deny does not cover the apex"
        );
        assert_eq!(n.check_host("example.com", Some(443)), allow("*"));
        assert_eq!(
            n.check_ip(ip("169.254.169.254"), Some(80)),
            deny("169.254.169.254")
        );
        assert_eq!(
            n.check_ip(ip("::ffff:169.254.169.254"), Some(80)),
            deny("169.254.169.254")
        );
        assert_eq!(n.check_ip(ip("10.2.3.4"), None), deny("10.0.0.0/8"));
        assert_eq!(n.check_host("10.2.3.4", None), deny("10.0.0.0/8"));
        assert_eq!(n.check_ip(ip("8.8.8.8"), None), allow("*"));
        let w = m(&["*.github.com"], &["*.gist.github.com", "github.com"]);
        assert_eq!(
            w.check_host("a.gist.github.com", None),
            deny("*.gist.github.com")
        );
        assert_eq!(w.check_host("gist.github.com", None), allow("*.github.com"));
    }

    #[test]
    fn port_specific_deny() {
        let n = m(&["*.x.test"], &["smtp.x.test:25", "*:25"]);
        assert_eq!(
            n.check_host("smtp.x.test", Some(25)),
            deny("smtp.x.test:25")
        );
        assert_eq!(n.check_host("smtp.x.test", Some(587)), allow("*.x.test"));
        // A port-less question ("may this name be used at all?") is not denied by a port deny.
        assert_eq!(n.check_host("smtp.x.test", None), allow("*.x.test"));
        assert_eq!(n.check_host("a.x.test", Some(25)), deny("*:25"));
        let full = m(&["*.x.test"], &["smtp.x.test"]);
        assert_eq!(full.check_host("smtp.x.test", None), deny("smtp.x.test"));
    }

    #[test]
    fn check_ip_only_ip_patterns() {
        let n = m(
            &["example.com", "2001:db8::/32", "192.0.2.10"],
            &["2001:db8:bad::/48"],
        );
        assert_eq!(n.check_ip(ip("93.184.216.34"), None), Decision::Default);
        assert_eq!(
            n.check_ip(ip("2001:db8::1"), Some(443)),
            allow("2001:db8::/32")
        );
        assert_eq!(
            n.check_ip(ip("2001:db8:bad::1"), Some(443)),
            deny("2001:db8:bad::/48")
        );
        assert_eq!(n.check_ip(ip("192.0.2.10"), None), allow("192.0.2.10"));
        assert_eq!(n.check_host("[2001:db8::1]", None), allow("2001:db8::/32"));
    }

    #[test]
    fn accessors() {
        let n = m(
            &["*", "a.test", "*.b.test", "10.0.0.0/8", "1.2.3.4"],
            &["c.test"],
        );
        let hosts: Vec<&str> = n.host_patterns().map(NetPattern::as_str).collect();
        assert_eq!(hosts, ["a.test", "*.b.test"]);
        let ips: Vec<&str> = n.ip_patterns().map(NetPattern::as_str).collect();
        assert_eq!(ips, ["10.0.0.0/8", "1.2.3.4"]);
        assert!(n.allows_any());
        assert_eq!(n.allow_patterns().len(), 5);
        assert_eq!(n.deny_patterns()[0].as_str(), "c.test");
        assert!(!m(&["a.test"], &[]).allows_any());
    }

    #[test]
    fn matcher_reports_index() {
        let a = vec!["ok.test".to_string(), "https://bad".to_string()];
        let err = NetMatcher::new(&a, &[]).unwrap_err();
        assert_eq!((err.list, err.index), (crate::policy::RuleList::Allow, 1));
        let d = vec!["x.*".to_string()];
        let err = NetMatcher::new(&[], &d).unwrap_err();
        assert_eq!((err.list, err.index), (crate::policy::RuleList::Deny, 0));
    }

    #[test]
    fn covers() {
        let c = |a: &str, b: &str| p(a).covers(&p(b));
        assert!(c("*", "a.test"));
        assert!(c("*", "10.0.0.0/8"));
        assert!(c("*", "*:443"));
        assert!(!c("*:443", "*"));
        assert!(!c("a.test", "*"));
        assert!(c("a.test", "A.test."));
        assert!(c("a.test", "a.test:443"));
        assert!(!c("a.test:443", "a.test"), "a port-less item is wider");
        assert!(!c("a.test:443", "a.test:80"));
        assert!(c("*.x.test", "a.x.test"));
        assert!(c("*.x.test", "a.b.x.test:8080"));
        assert!(!c("*.x.test", "x.test"));
        assert!(c("*.x.test", "*.x.test"));
        assert!(c("*.x.test", "*.a.x.test"));
        assert!(!c("*.a.x.test", "*.x.test"));
        assert!(!c("a.x.test", "*.a.x.test"));
        assert!(c("10.0.0.0/8", "10.1.2.3"));
        assert!(c("10.0.0.0/8", "10.1.0.0/16"));
        assert!(c("10.0.0.0/8", "10.0.0.0/8"));
        assert!(!c("10.0.0.0/8", "0.0.0.0/0"));
        assert!(!c("10.1.0.0/16", "10.0.0.0/8"));
        assert!(c("10.1.2.3", "10.1.2.3/32"));
        assert!(!c("10.1.2.3", "10.1.2.0/24"));
        assert!(!c("example.com", "93.184.216.34"));
        assert!(!c("10.0.0.0/8", "example.com"));
    }

    #[test]
    fn a_loopback_rule_with_a_port_opens_that_port_of_the_host_and_no_other() {
        for (rule, port) in [
            ("localhost:18000", Some(18000)),
            ("LOCALHOST.:18000", Some(18000)),
            ("127.0.0.1:18000", Some(18000)),
            ("[::1]:18000", Some(18000)),
            ("[::ffff:127.0.0.1]:18000", Some(18000)),
            ("localhost", None),
            ("127.0.0.1", None),
            ("::1", None),
            ("127.0.0.2:18000", None),
            ("127.0.0.0/8", None),
            ("*:18000", None),
            ("*", None),
            ("localhost.example.test:18000", None),
            ("api.example.test:18000", None),
        ] {
            assert_eq!(p(rule).loopback_port(), port, "{rule}");
        }
        assert!(p("localhost").is_loopback());
        assert!(!p("*.localhost").is_loopback());
        let ports = m(
            &[
                "localhost:8000",
                "127.0.0.1:8000",
                "[::1]:9000",
                "*",
                "localhost",
                "127.0.0.1:5432",
                "localhost:25",
                "localhost:6000",
            ],
            &["localhost:5432", "*:25", "127.0.0.0/8:6000"],
        )
        .loopback_ports();
        assert_eq!(ports, vec![8000, 9000], "each once, a denied port never");
        assert_eq!(m(&["*", "*:8000"], &[]).loopback_ports(), Vec::<u16>::new());
        assert_eq!(
            m(&["localhost:8000"], &["localhost"]).loopback_ports(),
            Vec::<u16>::new()
        );
        assert_eq!(
            m(&["localhost:8000"], &["*"]).loopback_ports(),
            Vec::<u16>::new()
        );
    }

    #[test]
    fn a_loopback_rule_with_a_wildcard_port_says_a_loopback_rule_names_one_port() {
        for rule in ["localhost:*", "127.0.0.1:*", "[::1]:*", "localhost:"] {
            let e = rej(rule);
            assert_eq!(e.hint.as_deref(), Some(LOOPBACK_HINT), "{rule}: {e:?}");
        }
        assert_ne!(rej("x.test:*").hint.as_deref(), Some(LOOPBACK_HINT));
    }

    #[test]
    fn cidr_helper() {
        assert!(cidr_contains(ip("0.0.0.0"), 0, ip("255.255.255.255")));
        assert!(cidr_contains(ip("::"), 0, ip("ffff::")));
        assert!(!cidr_contains(ip("0.0.0.0"), 0, ip("::")));
        assert!(cidr_contains(ip("ff00::"), 8, ip("ff02::1")));
        assert!(!cidr_contains(ip("ff00::"), 8, ip("fe80::1")));
        assert!(cidr_contains(ip("1.2.3.4"), 32, ip("1.2.3.4")));
        assert!(!cidr_contains(ip("1.2.3.4"), 33, ip("1.2.3.4")));
    }

    #[test]
    fn public_ip_v4() {
        let non_public = [
            "0.0.0.0",
            "0.1.2.3",
            "127.0.0.1",
            "127.255.255.254",
            "10.0.0.1",
            "10.255.255.255",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.0.1",
            "192.168.255.255",
            "100.64.0.1",
            "100.127.255.255",
            "100.100.100.200",
            "169.254.0.1",
            "169.254.169.254",
            "192.0.0.1",
            "192.0.2.1",
            "198.51.100.7",
            "203.0.113.9",
            "198.18.0.1",
            "198.19.255.255",
            "192.88.99.1",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
        ];
        for a in non_public {
            assert!(!is_public_ip(ip(a)), "{a} must not be public");
        }
        let public = [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.216.34",
            "140.82.112.3",
            "172.15.255.255",
            "172.32.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "169.253.255.255",
            "192.169.0.0",
            "198.20.0.0",
            "223.255.255.255",
        ];
        for a in public {
            assert!(is_public_ip(ip(a)), "{a} must be public");
        }
    }

    #[test]
    fn public_ip_v6() {
        let non_public = [
            "::",
            "::1",
            "::10.0.0.1",
            "::8.8.8.8",
            "::ffff:127.0.0.1",
            "::ffff:10.1.2.3",
            "::ffff:169.254.169.254",
            "::ffff:192.168.1.1",
            "::ffff:100.64.0.1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b::10.0.0.1",
            "64:ff9b:1::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "fc00::1",
            "fd00::1",
            "fd00:ec2::254",
            "ff02::1",
            "ff0e::1",
            "2001:db8::1",
            "3fff::1",
            "2001::1",
            "2002:c0a8:101::1",
            "100::1",
        ];
        for a in non_public {
            assert!(!is_public_ip(ip(a)), "{a} must not be public");
        }
        let public = [
            "2001:4860:4860::8888",
            "2606:4700::1111",
            "2a00:1450::1",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ];
        for a in public {
            assert!(is_public_ip(ip(a)), "{a} must be public");
        }
    }
}
