//! URIs: the `band://skill/` URI of a schema file, resolving a reference against a base, and
//! percent-encoding.

use super::ROOT_URI;

/// The `band://skill/…` URI of a relative path.
pub(super) fn path_uri(rel: &str) -> Option<String> {
    let mut encoded = String::with_capacity(rel.len());
    for byte in rel.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    let uri = jsonschema::uri::from_str(&format!("{ROOT_URI}{encoded}")).ok()?;
    Some(uri.as_str().to_string())
}

/// Resolve a URI reference against a base URI; the result is normalized.
pub(super) fn resolve(base: &str, reference: &str) -> Option<String> {
    let base = jsonschema::uri::from_str(base).ok()?;
    let resolved = jsonschema::uri::resolve_against(&base.borrow(), reference).ok()?;
    Some(resolved.as_str().to_string())
}

pub(super) fn strip_fragment(uri: &str) -> &str {
    uri.split_once('#').map_or(uri, |(doc, _)| doc)
}

pub(super) fn has_scheme(reference: &str) -> bool {
    let end = reference.find([':', '/', '?', '#']);
    matches!(end, Some(at) if at > 0 && reference[at..].starts_with(':'))
}

/// A URI as a person would write it: skill URIs become their relative path.
pub(super) fn display_uri(uri: &str) -> String {
    match uri.strip_prefix(ROOT_URI) {
        Some(rel) => percent_decode(rel),
        None => uri.to_string(),
    }
}

pub(super) fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' && at + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[at + 1..at + 3]).ok();
            if let Some(byte) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(byte);
                at += 3;
                continue;
            }
        }
        out.push(bytes[at]);
        at += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Percent-encode what a URI fragment cannot hold as is.
pub(super) fn encode_fragment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/?".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}
