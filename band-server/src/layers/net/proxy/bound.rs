//! Bound secrets: the placeholders a run sees, and what the proxy does with them (pure).
//!
//! A secret bound to hosts (`env.secrets: [{name, hosts}]`) reaches the run as a placeholder:
//! `bandph` and 40 lower-case hex digits, random per run. It survives URL encoding, JSON and DNS
//! labels unchanged (letters and digits only, 46 characters), so the proxy and the DNS stub find
//! it wherever it is sent as is. The value itself lives only in band-server's memory.
//!
//! [`Bound::rewrite_headers`] puts the value in place of the placeholder in the headers of a
//! request to one of the secret's hosts (any header, and inside `Authorization: Basic`'s
//! base64); [`Bound::find_in`] finds a placeholder anywhere else (the request target, a header
//! toward another host); [`Scanner`] finds one in a body streamed in chunks, holding back just
//! enough bytes to see a placeholder split across two chunks.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use band::policy::net::NetPattern;

/// The prefix of every placeholder.
pub const PREFIX: &str = "bandph";
/// A placeholder's length: the prefix and 40 hex digits.
pub const LEN: usize = PREFIX.len() + 40;

/// A placeholder from 20 random bytes.
pub fn placeholder(random: &[u8; 20]) -> String {
    let mut s = String::with_capacity(LEN);
    s.push_str(PREFIX);
    s.push_str(&hex::encode(random));
    s
}

/// One bound secret of a run.
#[derive(Clone)]
pub struct Secret {
    pub name: String,
    pub placeholder: String,
    value: String,
    hosts: Vec<NetPattern>,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secret")
            .field("name", &self.name)
            .field("placeholder", &self.placeholder)
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

impl Secret {
    /// `hosts` as the band wrote them (checked by `request::check_bound_secrets`); a host that
    /// does not parse binds nothing.
    pub fn new(name: &str, placeholder: String, value: String, hosts: &[String]) -> Secret {
        Secret {
            name: name.to_string(),
            placeholder,
            value,
            hosts: hosts
                .iter()
                .filter_map(|h| NetPattern::parse(h).ok())
                .collect(),
        }
    }

    /// Whether its value may go in a request to `host`.
    pub fn bound_to(&self, host: &str) -> bool {
        self.hosts.iter().any(|p| p.matches_host(host, None))
    }
}

/// A placeholder found where its value is not put.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leak {
    /// The secret's name.
    pub name: String,
    /// Where: `header X-Y`, `query string`, `path`, `body`.
    pub place: String,
}

/// The run's bound secrets.
#[derive(Debug, Clone, Default)]
pub struct Bound {
    secrets: Vec<Secret>,
}

impl Bound {
    pub fn new(secrets: Vec<Secret>) -> Bound {
        Bound { secrets }
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    pub fn secrets(&self) -> &[Secret] {
        &self.secrets
    }

    /// The first placeholder in `text` (compared without case, as DNS does), as a leak at `place`.
    pub fn find_in(&self, text: &[u8], place: &str) -> Option<Leak> {
        let lower = text.to_ascii_lowercase();
        self.secrets.iter().find_map(|s| {
            contains(&lower, s.placeholder.as_bytes()).then(|| Leak {
                name: s.name.clone(),
                place: place.to_string(),
            })
        })
    }

    /// Rewrite the headers of a request to `host`: each placeholder of a secret bound to
    /// `host` becomes its value (also inside `Authorization: Basic <base64>`); a placeholder of
    /// a secret not bound to `host` is a leak, and the request must not go out. `headers` are
    /// `(name, value)` pairs; the rewritten values come back in the same order.
    pub fn rewrite_headers(
        &self,
        host: &str,
        headers: &[(String, Vec<u8>)],
    ) -> Result<Vec<Vec<u8>>, Leak> {
        let mut out = Vec::with_capacity(headers.len());
        for (name, value) in headers {
            let mut v = value.clone();
            if name.eq_ignore_ascii_case("authorization")
                || name.eq_ignore_ascii_case("proxy-authorization")
            {
                v = self.rewrite_basic(host, name, &v)?;
            }
            for s in &self.secrets {
                if !contains(&v, s.placeholder.as_bytes()) {
                    continue;
                }
                if !s.bound_to(host) {
                    return Err(Leak {
                        name: s.name.clone(),
                        place: format!("header {name}"),
                    });
                }
                v = replace(&v, s.placeholder.as_bytes(), s.value.as_bytes());
            }
            out.push(v);
        }
        Ok(out)
    }

    /// `Basic <base64(user:pass)>` with a placeholder inside: decoded, rewritten, encoded again.
    fn rewrite_basic(&self, host: &str, header: &str, v: &[u8]) -> Result<Vec<u8>, Leak> {
        let Some(encoded) = v
            .strip_prefix(b"Basic ")
            .or_else(|| v.strip_prefix(b"basic "))
        else {
            return Ok(v.to_vec());
        };
        let Ok(mut decoded) = STANDARD.decode(encoded.trim_ascii()) else {
            return Ok(v.to_vec());
        };
        let mut changed = false;
        for s in &self.secrets {
            if !contains(&decoded, s.placeholder.as_bytes()) {
                continue;
            }
            if !s.bound_to(host) {
                return Err(Leak {
                    name: s.name.clone(),
                    place: format!("header {header}"),
                });
            }
            decoded = replace(&decoded, s.placeholder.as_bytes(), s.value.as_bytes());
            changed = true;
        }
        if !changed {
            return Ok(v.to_vec());
        }
        let mut out = b"Basic ".to_vec();
        out.extend_from_slice(STANDARD.encode(&decoded).as_bytes());
        Ok(out)
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

fn replace(hay: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(hay.len());
    let mut i = 0;
    while i < hay.len() {
        if hay[i..].starts_with(needle) {
            out.extend_from_slice(with);
            i += needle.len();
        } else {
            out.push(hay[i]);
            i += 1;
        }
    }
    out
}

/// Finds a placeholder in a body that arrives in chunks, without holding the body: each chunk
/// is released but for its last `LEN - 1` bytes, kept to be searched with the next one (a
/// placeholder split across chunks is found). Nothing of a chunk holding a placeholder is
/// released.
#[derive(Debug)]
pub struct Scanner {
    bound: Bound,
    held: Vec<u8>,
}

impl Scanner {
    pub fn new(bound: Bound) -> Scanner {
        Scanner {
            bound,
            held: Vec::new(),
        }
    }

    /// The bytes that may go on (`Ok`), or the leak (then nothing more may).
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<u8>, Leak> {
        self.held.extend_from_slice(chunk);
        if let Some(leak) = self.bound.find_in(&self.held, "body") {
            return Err(leak);
        }
        let keep = (LEN - 1).min(self.held.len());
        let rest = self.held.split_off(self.held.len() - keep);
        Ok(std::mem::replace(&mut self.held, rest))
    }

    /// The bytes still held, at the end of the body (already searched).
    pub fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound() -> (Bound, String, String) {
        let a = placeholder(&[0xab; 20]);
        let b = placeholder(&[0x01; 20]);
        let secrets = vec![
            Secret::new(
                "API_TOKEN",
                a.clone(),
                "s3cret-A".into(),
                &["api.example.test".into()],
            ),
            Secret::new(
                "OTHER",
                b.clone(),
                "s3cret-B".into(),
                &["*.other.test".into()],
            ),
        ];
        (Bound::new(secrets), a, b)
    }

    #[test]
    fn a_placeholder_is_dns_and_url_safe() {
        let p = placeholder(&[0xff; 20]);
        assert_eq!(p.len(), LEN);
        assert!(
            p.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        );
        assert!(p.len() <= 63, "fits a DNS label");
    }

    #[test]
    fn headers_to_a_bound_host_get_the_value() {
        let (b, a, _) = bound();
        let headers = vec![
            (
                "Authorization".to_string(),
                format!("Bearer {a}").into_bytes(),
            ),
            ("X-Api-Key".to_string(), a.clone().into_bytes()),
            ("Accept".to_string(), b"*/*".to_vec()),
        ];
        let out = b.rewrite_headers("api.example.test", &headers).unwrap();
        assert_eq!(out[0], b"Bearer s3cret-A");
        assert_eq!(out[1], b"s3cret-A");
        assert_eq!(out[2], b"*/*");
        // Basic: base64 of user:placeholder.
        let basic = format!("Basic {}", STANDARD.encode(format!("me:{a}")));
        let out = b
            .rewrite_headers(
                "API.example.test",
                &[("authorization".into(), basic.into_bytes())],
            )
            .unwrap();
        assert_eq!(
            out[0],
            format!("Basic {}", STANDARD.encode("me:s3cret-A")).into_bytes()
        );
    }

    #[test]
    fn a_placeholder_toward_another_host_is_a_leak() {
        let (b, a, other) = bound();
        let leak = b
            .rewrite_headers(
                "evil.test",
                &[("Authorization".into(), format!("Bearer {a}").into_bytes())],
            )
            .unwrap_err();
        assert_eq!(
            leak,
            Leak {
                name: "API_TOKEN".into(),
                place: "header Authorization".into()
            }
        );
        let basic = format!("Basic {}", STANDARD.encode(format!("x:{other}")));
        let leak = b
            .rewrite_headers(
                "api.example.test",
                &[("Authorization".into(), basic.into_bytes())],
            )
            .unwrap_err();
        assert_eq!(leak.name, "OTHER");
        // In the target, upper-cased (as a DNS name may come), it is found too.
        let leak = b.find_in(
            format!("/x?t={}", a.to_uppercase()).as_bytes(),
            "query string",
        );
        assert_eq!(leak.map(|l| l.name), Some("API_TOKEN".into()));
        assert_eq!(b.find_in(b"/x?t=nothing", "query string"), None);
    }

    #[test]
    fn a_placeholder_split_across_chunks_is_found_and_never_released() {
        let (b, a, _) = bound();
        let body = format!("{{\"description\": \"x\", \"token\": \"{a}\"}}").into_bytes();
        for cut in 0..body.len() {
            for second in cut..body.len() {
                let mut s = Scanner::new(b.clone());
                let mut released = Vec::new();
                let mut leak = None;
                for part in [&body[..cut], &body[cut..second], &body[second..]] {
                    match s.push(part) {
                        Ok(out) => released.extend(out),
                        Err(l) => {
                            leak = Some(l);
                            break;
                        }
                    }
                }
                assert_eq!(
                    leak.map(|l| l.place),
                    Some("body".to_string()),
                    "cut {cut} {second}"
                );
                assert!(!contains(&released, a.as_bytes()));
            }
        }
        // A clean body goes through whole, in order.
        let mut s = Scanner::new(b);
        let mut out = s.push(b"hello ").unwrap();
        out.extend(s.push(b"world").unwrap());
        out.extend(s.finish());
        assert_eq!(out, b"hello world");
    }
}
