//! The layers narrower than the site policy that a run request carries
//! ([`crate::proto::Narrowing`]): the user's own file (`~/.config/band/site.md`), then the
//! caller's for its session (`$BAND_NARROW`). band checks each here, so a broken file is an
//! error with its line before anything is sent; band-server parses and applies them again.

use std::path::{Path, PathBuf};

use super::{ClientError, Result};
use crate::policy::site::{self, SitePolicy};
use crate::proto::Narrowing;

/// The narrowing files of this process: the user's (if there is one) and `$BAND_NARROW`'s.
pub fn files() -> Vec<(&'static str, PathBuf, bool)> {
    let mut out = Vec::new();
    if let Some(p) = site::user_path() {
        out.push(("user", p, false));
    }
    if let Some(p) = std::env::var_os(site::NARROW_VAR).filter(|p| !p.is_empty()) {
        out.push(("session", PathBuf::from(p), true));
    }
    out
}

/// Read and check the narrowing files: `(layer for the request, parsed file)` each. The user's
/// file is optional; `$BAND_NARROW` names a file that must exist.
pub fn read() -> Result<Vec<(Narrowing, SitePolicy)>> {
    let mut out = Vec::new();
    for (label, path, required) in files() {
        let text = match read_bounded(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => continue,
            Err(e) => {
                return Err(ClientError::user(
                    format!("cannot read the {label} narrowing: {e}"),
                    hint(label),
                ));
            }
        };
        let parsed = site::parse_narrowing(&path, &text).map_err(|e| {
            ClientError::user(
                format!("the {label} narrowing cannot be used: {e}"),
                e.hint.clone().unwrap_or_else(|| hint(label)),
            )
        })?;
        out.push((
            Narrowing {
                label: label.into(),
                source: path.display().to_string(),
                text,
            },
            parsed,
        ));
    }
    Ok(out)
}

fn hint(label: &str) -> String {
    if label == "session" {
        format!(
            "${} names a site policy file (docs/site-policy.md) that narrows this session; fix it or unset it",
            site::NARROW_VAR
        )
    } else {
        "~/.config/band/site.md narrows every run of yours (docs/site-policy.md); fix it or remove it".into()
    }
}

/// The file's text, at most [`site::MAX_SITE_BYTES`] (a larger one is an error, not truncated).
fn read_bounded(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let f = fs_err::File::open(path)?;
    let mut text = String::new();
    f.take(site::MAX_SITE_BYTES + 1).read_to_string(&mut text)?;
    if text.len() as u64 > site::MAX_SITE_BYTES {
        return Err(std::io::Error::other(format!(
            "{} is larger than {} bytes",
            path.display(),
            site::MAX_SITE_BYTES
        )));
    }
    Ok(text)
}
