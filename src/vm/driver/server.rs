//! band-server on a machine a driver reached: install or upgrade it, ask its version, read its
//! log.

use std::time::Duration;

use super::{Progress, ServerLog};
use crate::vm::install::{self, Handshake};
use crate::vm::ssh::{self, Endpoint};
use crate::vm::{Result, VmError};

/// The tail of band-server's log on the machine at `endpoint`.
pub(super) fn server_log(endpoint: Result<Endpoint>, lines: usize) -> ServerLog {
    match endpoint.and_then(|ep| ssh::connect(&ep, Duration::from_secs(15))) {
        Ok(sess) => match ssh::exec(
            &sess,
            &format!("tail -n {lines} {} 2>/dev/null", ssh::SERVER_LOG),
            b"",
        ) {
            Ok(o) => ServerLog::Text(o.stdout),
            Err(e) => ServerLog::Failed(e),
        },
        Err(e) => ServerLog::Unreachable(e.to_string()),
    }
}

/// Install or upgrade band-server on a connected target, and check what it needs.
pub fn ensure_server(ep: &Endpoint, progress: &mut dyn Progress) -> Result<install::ServerVersion> {
    progress.start("check band-server on the target (version handshake)".into());
    let sess = ssh::connect(ep, Duration::from_secs(30))?;
    let dir = install::local_dir()?;
    let local = install::local_manifest(&dir)?;
    let version = match install::handshake(&sess, &local)? {
        Handshake::Current(v) => {
            progress.note(format!(
                "band-server {} (protocol {}) is current",
                v.version, v.protocol
            ));
            v
        }
        other => {
            let why = match &other {
                Handshake::Missing => "not installed".to_string(),
                Handshake::Stale {
                    answered: Some(v), ..
                } => format!("stale (answers {} protocol {})", v.version, v.protocol),
                _ => "stale".to_string(),
            };
            progress.start(format!("install band-server ({why})"));
            install::install(&sess, ep, &dir, &local)?
        }
    };
    let missing = install::missing_prerequisites(&sess, ep)?;
    if !missing.is_empty() {
        return Err(VmError::user(
            format!("the target lacks {}", missing.join(", ")),
            "install them there (Debian: apt-get install bubblewrap iptables iproute2 passwd)",
        ));
    }
    Ok(version)
}

/// band-server's version on a running target, and whether it is current.
pub fn server_status(ep: &Endpoint) -> serde_json::Value {
    let sess = match ssh::connect(ep, Duration::from_secs(15)) {
        Ok(s) => s,
        Err(e) => return serde_json::json!({ "error": e.to_string() }),
    };
    let local = match install::local_dir().and_then(|d| install::local_manifest(&d)) {
        Ok(m) => m,
        Err(e) => return serde_json::json!({ "error": e.to_string() }),
    };
    match install::handshake(&sess, &local) {
        Ok(Handshake::Current(v)) => {
            serde_json::json!({ "version": v.version, "protocol": v.protocol, "current": true })
        }
        Ok(Handshake::Stale { answered, .. }) => {
            serde_json::json!({ "answered": answered, "current": false })
        }
        Ok(Handshake::Missing) => serde_json::json!({ "installed": false }),
        Err(e) => serde_json::json!({ "error": e.to_string() }),
    }
}
