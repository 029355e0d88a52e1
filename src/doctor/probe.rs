//! What `band doctor` tries for real on this machine (the checks themselves stay pure: they read
//! the answers from [`super::Host`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The kernel's Landlock ABI, as far as it matters to band (1 to 6; 6 means 6 or later: the
/// ABI that scopes abstract unix sockets and signals): the highest whose every access right a
/// ruleset may handle. `None` when Landlock is off or absent.
#[cfg(target_os = "linux")]
pub(super) fn landlock_abi() -> Option<u8> {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr, Scope,
    };
    let supports = |abi: ABI| -> bool {
        let mut r = Ruleset::default().set_compatibility(CompatLevel::HardRequirement);
        let fs = AccessFs::from_all(abi);
        let net = AccessNet::from_all(abi);
        let scope = Scope::from_all(abi);
        if !fs.is_empty() {
            let Ok(next) = r.handle_access(fs) else {
                return false;
            };
            r = next;
        }
        if !net.is_empty() {
            let Ok(next) = r.handle_access(net) else {
                return false;
            };
            r = next;
        }
        if !scope.is_empty() && r.scope(scope).is_err() {
            return false;
        }
        true
    };
    [ABI::V6, ABI::V5, ABI::V4, ABI::V3, ABI::V2, ABI::V1]
        .into_iter()
        .find(|&abi| supports(abi))
        .map(|abi| abi as u8)
}

#[cfg(not(target_os = "linux"))]
pub(super) fn landlock_abi() -> Option<u8> {
    None
}

/// Why `bwrap --ro-bind / / true` did not succeed (`band doctor` shows it after "failed: ").
#[derive(Debug, Clone, thiserror::Error)]
pub enum BwrapError {
    /// It could not be started.
    #[error("cannot run {}: {source}", path.display())]
    Spawn {
        path: PathBuf,
        source: Arc<std::io::Error>,
    },
    /// It failed, and said why: its stderr's last line that is not blank.
    #[error("{0}")]
    Said(String),
    /// It failed, and said nothing.
    #[error("it exited with {0}")]
    Exited(std::process::ExitStatus),
}

/// Run `bwrap --ro-bind / / true`: `Ok`, or what went wrong.
pub(super) fn bwrap(bwrap: &Path) -> Result<(), BwrapError> {
    let out = std::process::Command::new(bwrap)
        .args(["--ro-bind", "/", "/", "true"])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| BwrapError::Spawn {
            path: bwrap.to_path_buf(),
            source: Arc::new(e),
        })?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
    Err(last.map_or(BwrapError::Exited(out.status), |l| {
        BwrapError::Said(l.to_string())
    }))
}
