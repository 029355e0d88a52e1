//! band-server on a machine a driver reached: install or upgrade it, ask its version, read its
//! log.

use std::time::Duration;

use super::ServerLog;
use crate::vm::Progress;
use crate::vm::endpoint::{Endpoint, SERVER_LOG};
use crate::vm::install::{self, Handshake};
use crate::vm::ssh;
use crate::vm::{Result, VmError};

/// The tail of band-server's log on the machine at `endpoint`.
pub(super) fn server_log(endpoint: Result<Endpoint>, lines: usize) -> ServerLog {
    match endpoint.and_then(|ep| ssh::connect(&ep, Duration::from_secs(15))) {
        Ok(sess) => match ssh::exec(
            &sess,
            &format!("tail -n {lines} {} 2>/dev/null", SERVER_LOG),
            b"",
        ) {
            Ok(o) => ServerLog::Text(o.stdout),
            Err(e) => ServerLog::Failed(e),
        },
        Err(e) => ServerLog::Unreachable(e.to_string()),
    }
}

/// How [`ensure_server`] decides the way band-server's binaries come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WayPlan {
    /// The way `band setup` recorded for the target (`band vm start`).
    Recorded,
    /// Choose now and record it (`band setup`): `forced` is `--build-server-in-guest`, `auto`
    /// lets the driver build when uploading cannot work (Lima).
    Choose { forced: bool, auto: bool },
}

/// Install or upgrade band-server on a connected target, and check what it needs.
pub fn ensure_server(
    ep: &Endpoint,
    progress: &mut dyn Progress,
    plan: WayPlan,
) -> Result<install::ServerVersion> {
    progress.start("check band-server on the target (version handshake)".into());
    let sess = ssh::connect(ep, Duration::from_secs(30))?;
    let way = match plan {
        WayPlan::Recorded => install::read_way(ep),
        WayPlan::Choose { forced, auto } => {
            let dir = install::local_dir().ok();
            let local = install::inspect_local(dir.as_deref());
            let arch = if forced || !auto {
                None
            } else {
                Some(ssh::exec_ok(&sess, "uname -m", b"")?.stdout_text())
            };
            let (way, why) = install::choose(
                forced,
                auto,
                cfg!(target_os = "linux"),
                &local,
                arch.as_deref().map(str::trim),
            );
            progress.note(format!("band-server: {} ({why})", way.describe()));
            install::write_way(ep, way)?;
            way
        }
    };
    let expected = install::Expected::of(way, None)?;
    let version = match install::handshake(&sess, expected.manifest())? {
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
            match way {
                install::Way::Upload => progress.start(format!("install band-server ({why})")),
                install::Way::Build => progress.start(format!(
                    "build band-server in the target ({why}; first time: a few minutes)"
                )),
            }
            expected.install(&sess, ep, progress)?
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
    let way = install::read_way(ep);
    let expected = match install::Expected::of(way, None) {
        Ok(m) => m,
        Err(e) => return serde_json::json!({ "error": e.to_string() }),
    };
    match install::handshake(&sess, expected.manifest()) {
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
