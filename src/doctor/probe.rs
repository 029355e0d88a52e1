//! What `band doctor` tries for real on this machine (the checks themselves stay pure: they read
//! the answers from [`super::Host`]).

use std::path::Path;

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

/// Run `bwrap --ro-bind / / true`: `Ok`, or what went wrong (its stderr's last line).
pub(super) fn bwrap(bwrap: &Path) -> Result<(), String> {
    let out = std::process::Command::new(bwrap)
        .args(["--ro-bind", "/", "/", "true"])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", bwrap.display()))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
    Err(last.map_or_else(|| format!("it exited with {}", out.status), str::to_string))
}
