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
            // The user's own file is optional: none there, or none this user may read (a `HOME`
            // that is another user's, as `sudo -u` leaves it), is no narrowing of theirs. The
            // session's file was named on purpose: it must be read.
            Err(e)
                if !required
                    && matches!(
                        e.kind(),
                        std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
                    ) =>
            {
                continue;
            }
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

/// The layers a run from this client passes, as this client previews them (band-server applies
/// those of the machine it runs on).
pub struct Preview {
    /// The site policy at [`site::local_path`], or an open one when there is no file.
    pub site: SitePolicy,
    /// There is no site policy file: only narrower layers.
    pub no_site: bool,
    /// The user's and the session's layers: `(label, file)`.
    pub narrowing: Vec<(String, SitePolicy)>,
}

/// Why [`preview`] has no layers to show.
#[derive(Debug, thiserror::Error)]
pub enum PreviewError {
    /// The site policy file is there but cannot be used: band-server refuses every run.
    #[error(transparent)]
    Site(site::SiteError),
    /// A narrowing file cannot be used: band sends no run.
    #[error(transparent)]
    Narrowing(Box<ClientError>),
}

impl Preview {
    /// The tier a run of the skill at `root` gets (its signature previewed), and why.
    pub fn tier(&self, root: Option<&Path>) -> (String, String) {
        crate::sign::preview_tier(&self.site, root)
    }

    /// `band ∩ site ∩ tier ∩ narrowing` for `band` at `tier`.
    pub fn apply(
        &self,
        band: &crate::policy::Policy,
        kind: site::RunKind,
        tier: &str,
    ) -> std::result::Result<site::Intersection, Box<site::Refusal>> {
        site::apply_narrowed(band, kind, &self.site, tier, &self.narrowing)
    }
}

/// The site policy and narrowing this client previews; `Ok(None)` when there are none.
pub fn preview() -> std::result::Result<Option<Preview>, PreviewError> {
    let narrowing: Vec<(String, SitePolicy)> = read()
        .map_err(|e| PreviewError::Narrowing(Box::new(e)))?
        .into_iter()
        .map(|(n, p)| (n.label, p))
        .collect();
    let path = site::local_path();
    let (site, no_site) = match site::load_site(&path).map_err(PreviewError::Site)? {
        Some(found) => (found, false),
        None if narrowing.is_empty() => return Ok(None),
        None => (SitePolicy::open(&path), true),
    };
    Ok(Some(Preview {
        site,
        no_site,
        narrowing,
    }))
}
