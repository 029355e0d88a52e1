//! The filesystem layer's plan of host paths: binds for absolute `allow.read` / `allow.write`
//! patterns, and the workspace directories relative write patterns let the run create files in.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use band::policy::place::{Place, place};
use band::policy::{Category, Policy};
use band::proto::Layer;

use crate::error::{SetupError, SetupResult};
use crate::layers::fs::workdir::{self, HostMount};

/// `allow.<cat>` plus the `insist.<cat>` patterns it lacks.
pub(crate) fn allow_and_insist(policy: &Policy, cat: Category) -> Vec<String> {
    let mut v = policy.allow.get(cat).clone();
    for p in policy.insist.get(cat) {
        if !v.contains(p) {
            v.push(p.clone());
        }
    }
    v
}

/// Host paths to bind for absolute `allow.read` / `allow.write` (and insist) patterns: their
/// static prefix, if it exists (`host_path` gives its canonical host path and whether it is a
/// directory). What a pattern means is [`band::policy::place`]'s (the same answer `band lint`
/// gives): `/tmp/**` is the run's private `/tmp` and the sandbox's own system content is already
/// shown, so neither is bound; a secret or managed path is refused. Refuses host paths that
/// would cover the sandbox's own paths (also after symlinks), and absolute deny patterns that a
/// whole-path bind could not enforce.
pub(crate) fn plan_host_mounts(
    policy: &Policy,
    state: &Path,
    host_path: &dyn Fn(&Path) -> Option<(PathBuf, bool)>,
) -> SetupResult<Vec<HostMount>> {
    let mut out: Vec<HostMount> = Vec::new();
    for (cat, writable) in [(Category::Read, false), (Category::Write, true)] {
        for p in allow_and_insist(policy, cat) {
            // Where the pattern points (shared with `band lint`): only a host path is bound.
            let prefix = match place(&p, writable) {
                None | Some(Place::PrivateTmp | Place::Shown(_) | Place::NotShown(_)) => continue,
                Some(Place::Refused { message, hint }) => {
                    return Err(SetupError::new(
                        Layer::Filesystem,
                        format!("allow.{cat} `{p}`: {message}"),
                    )
                    .with_hint(hint));
                }
                Some(Place::Host(prefix)) => prefix,
            };
            workdir::check_host_mount_path(&prefix, state).map_err(|m| {
                SetupError::new(Layer::Filesystem, format!("allow.{cat} `{p}`: {m}"))
            })?;
            let Some((host, is_dir)) = host_path(&prefix) else {
                continue;
            };
            workdir::check_host_mount_path(&host, state).map_err(|m| {
                SetupError::new(Layer::Filesystem, format!("allow.{cat} `{p}`: {m}"))
            })?;
            match out.iter_mut().find(|m| m.sandbox == prefix) {
                Some(m) => m.writable |= writable,
                None => out.push(HostMount {
                    host,
                    sandbox: prefix,
                    writable,
                    is_dir,
                }),
            }
        }
    }
    for cat in [Category::Read, Category::Write] {
        for d in policy.deny.get(cat) {
            let Some(dp) = workdir::absolute_prefix(d) else {
                continue;
            };
            if let Some(m) = out
                .iter()
                .find(|m| m.sandbox.starts_with(&dp) || dp.starts_with(&m.sandbox))
            {
                return Err(SetupError::new(
                    Layer::Filesystem,
                    format!(
                        "deny.{cat} `{d}` cannot be enforced inside the bound host path {}",
                        m.sandbox.display()
                    ),
                )
                .with_hint(
                    "narrow the absolute allow pattern so it does not include denied paths",
                ));
            }
        }
    }
    // Parents before children, so a nested bind lands on top.
    out.sort_by_key(|m| m.sandbox.components().count());
    Ok(out)
}

/// Workspace directories the run may create files in (from relative write patterns).
pub(crate) fn plan_write_dirs(policy: &Policy) -> Vec<String> {
    let mut dirs: BTreeSet<String> = BTreeSet::new();
    for p in allow_and_insist(policy, Category::Write) {
        if let Some(d) = workdir::write_dir(&p) {
            dirs.insert(d);
        }
    }
    dirs.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn write_dirs_cover_allow_and_insist() {
        let mut p = Policy::default();
        p.allow.write = vec!["out/**".into(), "/abs/**".into()];
        p.insist.write = vec!["reports/*.md".into()];
        assert_eq!(
            plan_write_dirs(&p),
            vec!["out".to_string(), "reports".to_string()]
        );
    }

    /// The real host, as `facts::host_path` sees it.
    fn real_host_path(p: &Path) -> Option<(PathBuf, bool)> {
        let host = p.canonicalize().ok()?;
        let is_dir = host.is_dir();
        Some((host, is_dir))
    }

    /// What upstream's packaged bands write (all four: code-runner, data-analyst, sandbox,
    /// web-reader): `/tmp/**` is the run's own /tmp, and reading system content needs no bind.
    #[test]
    fn tmp_and_system_reads_bind_nothing() {
        let state = Path::new("/run/band");
        let mut p = Policy::default();
        p.allow.read = vec![
            "/tmp/**".into(),
            "/usr/bin/**".into(),
            "/usr/share/**".into(),
        ];
        p.allow.write = vec!["/tmp/**".into()];
        p.insist.write = vec!["/tmp/report.txt".into()];
        assert_eq!(plan_host_mounts(&p, state, &real_host_path), Ok(vec![]));
    }

    /// Upstream's four packaged bands, as the corpus holds them, plan their paths without error.
    #[test]
    fn upstream_packaged_bands_plan_their_paths() {
        let bands = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus/bands");
        for name in ["code-runner", "data-analyst", "sandbox", "web-reader"] {
            let parsed = band::manifest::load_band(&bands.join(name).join("BAND.md"));
            let b = parsed
                .band
                .unwrap_or_else(|| panic!("{name}: {:?}", parsed.diagnostics));
            let p = Policy {
                allow: b.allow,
                deny: b.deny,
                insist: b.insist,
                ..Default::default()
            };
            assert_eq!(
                plan_host_mounts(&p, Path::new("/run/band"), &real_host_path),
                Ok(vec![]),
                "{name}"
            );
        }
    }

    #[test]
    fn host_mounts_refuse_reserved_paths_and_unenforceable_denies() {
        let state = Path::new("/run/band");
        let mut p = Policy::default();
        p.allow.read = vec!["/**".into()];
        assert!(
            matches!(plan_host_mounts(&p, state, &real_host_path), Err(e) if e.layer == Layer::Filesystem)
        );
        // A host path that leads into a reserved tree (here by being one) is still refused.
        let mut p = Policy::default();
        p.allow.read = vec!["/run/band/**".into()];
        assert!(
            matches!(plan_host_mounts(&p, state, &real_host_path), Err(e) if e.layer == Layer::Filesystem)
        );
        let mut p = Policy::default();
        p.allow.write = vec!["/usr/share/x/**".into()];
        let got = plan_host_mounts(&p, state, &real_host_path);
        assert!(
            matches!(&got, Err(e) if e.message.contains("/usr is read-only in the sandbox")),
            "{got:?}"
        );
        let mut p = Policy::default();
        p.allow.read = vec!["/root/**".into()];
        assert!(
            matches!(plan_host_mounts(&p, state, &real_host_path), Err(e) if e.message.contains("never exposed"))
        );
        let mut p = Policy::default();
        p.allow.read = vec!["/nonexistent-band-test/**".into()];
        assert_eq!(plan_host_mounts(&p, state, &real_host_path), Ok(vec![]));
        // Not under /tmp: the sandbox's /tmp is its own.
        let dir = tempfile::tempdir_in("/var/tmp").unwrap_or_else(|e| panic!("{e}"));
        let d = dir.path().to_string_lossy().into_owned();
        let mut p = Policy::default();
        p.allow.read = vec![format!("{d}/**")];
        p.allow.write = vec![format!("{d}/**")];
        let got = plan_host_mounts(&p, state, &real_host_path).unwrap_or_default();
        assert_eq!(got.len(), 1);
        assert!(got[0].writable && got[0].is_dir);
        p.deny.read = vec![format!("{d}/secret/**")];
        assert!(
            matches!(plan_host_mounts(&p, state, &real_host_path), Err(e) if e.layer == Layer::Filesystem)
        );
    }
}
