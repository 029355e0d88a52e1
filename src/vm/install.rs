//! Installing band-server on a target, and the version handshake that keeps it current.
//!
//! The target holds `/usr/local/lib/band/{band-server,band-jail,band-shim,installed.json}`.
//! `installed.json` records the version, protocol and SHA-256 of the host binaries it came from;
//! `band setup` and `band vm start` compare it with the local binaries and with what
//! `band-server version` answers, and upload again on any difference (a stale band-server is
//! upgraded, never used). Binaries are stripped of debug info and gzip-compressed for the upload
//! when `strip` and `gzip` exist on the host.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::cmd;
use super::ssh::{self, Endpoint, SERVER_DIR, Session};
use super::{Result, VmError, io_at};
use crate::proto;

/// The programs band-server needs next to it.
pub const BINARIES: [&str; 3] = ["band-server", "band-jail", "band-shim"];
/// The server config written on targets that have none (the QEMU image ships the same file).
pub const SERVER_TOML: &str = include_str!("../../vm-templates/debian-12/files/server.toml");

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub version: String,
    pub protocol: u32,
    pub sha256: BTreeMap<String, String>,
}

/// What `band-server version` prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerVersion {
    pub version: String,
    pub protocol: u32,
}

/// The folder holding the host's band-server binaries: `$BAND_SERVER`'s folder, else this
/// executable's folder.
pub fn local_dir() -> Result<PathBuf> {
    let dir = match std::env::var_os(proto::env::SERVER) {
        Some(p) => PathBuf::from(p)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default(),
        None => std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .unwrap_or_default(),
    };
    for b in BINARIES {
        if !dir.join(b).is_file() {
            return Err(VmError::Invalid(format!(
                "{} is missing; build it (`cargo build --workspace`) or point $BAND_SERVER at a band-server with band-jail and band-shim beside it",
                dir.join(b).display()
            )));
        }
    }
    Ok(dir)
}

fn sha256_file(path: &Path) -> Result<String> {
    let data = fs_err::read(path).map_err(VmError::Fs)?;
    Ok(Sha256::digest(&data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// The manifest of the local binaries.
pub fn local_manifest(dir: &Path) -> Result<Manifest> {
    let mut sha256 = BTreeMap::new();
    for b in BINARIES {
        sha256.insert(b.to_string(), sha256_file(&dir.join(b))?);
    }
    Ok(Manifest {
        version: env!("CARGO_PKG_VERSION").to_string(),
        protocol: proto::PROTOCOL_VERSION,
        sha256,
    })
}

/// The SHA-256 of `installed.json` as [`install`] writes it for `m`: what a current target holds.
pub fn manifest_digest(m: &Manifest) -> String {
    Sha256::digest(serde_json::to_vec_pretty(m).unwrap_or_default())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// [`local_manifest`], remembered in `cache` while the binaries' sizes and mtimes do not change
/// (hashing a debug build reads about 250 MB, too much for every run).
pub fn local_manifest_cached(dir: &Path, cache: &Path) -> Result<Manifest> {
    let stamp = |b: &str| -> Option<(u64, u128)> {
        let m = fs_err::metadata(dir.join(b)).ok()?;
        let t = m
            .modified()
            .ok()?
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?
            .as_nanos();
        Some((m.len(), t))
    };
    let stamps: Option<BTreeMap<String, (u64, u128)>> = BINARIES
        .iter()
        .map(|b| stamp(b).map(|s| (b.to_string(), s)))
        .collect();
    #[derive(Serialize, Deserialize)]
    struct Cached {
        dir: PathBuf,
        stamps: BTreeMap<String, (u64, u128)>,
        manifest: Manifest,
    }
    if let Some(st) = &stamps
        && let Some(c) = fs_err::read_to_string(cache)
            .ok()
            .and_then(|t| serde_json::from_str::<Cached>(&t).ok())
        && c.dir == dir
        && &c.stamps == st
        && c.manifest.version == env!("CARGO_PKG_VERSION")
        && c.manifest.protocol == proto::PROTOCOL_VERSION
    {
        return Ok(c.manifest);
    }
    let manifest = local_manifest(dir)?;
    if let Some(stamps) = stamps {
        let c = Cached {
            dir: dir.to_path_buf(),
            stamps,
            manifest: manifest.clone(),
        };
        let _ = super::paths::write_atomic(
            cache,
            serde_json::to_string(&c).unwrap_or_default().as_bytes(),
            0o600,
        );
    }
    Ok(manifest)
}

/// Ask the target's band-server for its version (`None`: not installed or not runnable).
pub fn remote_version(sess: &Session) -> Result<Option<ServerVersion>> {
    let out = ssh::exec(sess, &format!("{SERVER_DIR}/band-server version"), b"")?;
    Ok(if out.status == 0 {
        serde_json::from_slice(&out.stdout).ok()
    } else {
        None
    })
}

/// The manifest recorded on the target at the last install.
pub fn remote_manifest(sess: &Session) -> Result<Option<Manifest>> {
    let out = ssh::exec(sess, &format!("cat {SERVER_DIR}/installed.json"), b"")?;
    Ok(if out.status == 0 {
        serde_json::from_slice(&out.stdout).ok()
    } else {
        None
    })
}

/// Where the target stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handshake {
    /// Same binaries, and band-server answers with our version and protocol.
    Current(ServerVersion),
    /// Installed, but not ours (another build, version or protocol).
    Stale {
        installed: Option<Manifest>,
        answered: Option<ServerVersion>,
    },
    Missing,
}

/// Compare the target with the local manifest.
pub fn handshake(sess: &Session, local: &Manifest) -> Result<Handshake> {
    let installed = remote_manifest(sess)?;
    let answered = remote_version(sess)?;
    Ok(decide(local, installed, answered))
}

/// The pure part of [`handshake`].
pub fn decide(
    local: &Manifest,
    installed: Option<Manifest>,
    answered: Option<ServerVersion>,
) -> Handshake {
    match (&installed, &answered) {
        (None, None) => Handshake::Missing,
        (Some(m), Some(v))
            if m == local && v.version == local.version && v.protocol == local.protocol =>
        {
            Handshake::Current(v.clone())
        }
        _ => Handshake::Stale {
            installed,
            answered,
        },
    }
}

/// Bytes to upload for one binary and the remote command that unpacks them.
fn payload(path: &Path, tmp: &Path) -> Result<(Vec<u8>, &'static str)> {
    let mut src = path.to_path_buf();
    let stripped = tmp.join(format!(
        "{}.stripped",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    ));
    if cmd::which("strip").is_some()
        && Command::new("strip")
            .arg("--strip-debug")
            .arg("-o")
            .arg(&stripped)
            .arg(path)
            .status()
            .is_ok_and(|s| s.success())
    {
        src = stripped;
    }
    if cmd::which("gzip").is_some()
        && let Ok(out) = Command::new("gzip").arg("-1").arg("-c").arg(&src).output()
        && out.status.success()
    {
        return Ok((out.stdout, "gzip -dc"));
    }
    Ok((fs_err::read(&src).map_err(VmError::Fs)?, "cat"))
}

/// Upload the local binaries and the default server config, then check the handshake.
pub fn install(
    sess: &Session,
    ep: &Endpoint,
    dir: &Path,
    local: &Manifest,
) -> Result<ServerVersion> {
    let tmp = tempfile::tempdir().map_err(io_at(&std::env::temp_dir()))?;
    // A warm band-server of the old build stops taking runs (it exits when its socket is gone).
    ssh::exec_ok(
        sess,
        &ep.as_root(&format!(
            "mkdir -p {SERVER_DIR} /etc/band && chmod 0755 {SERVER_DIR} && rm -f {}/server-*.sock",
            ssh::WARM_DIR
        )),
        b"",
    )?;
    for b in BINARIES {
        let (data, unpack) = payload(&dir.join(b), tmp.path())?;
        let new = format!("{SERVER_DIR}/.{b}.new");
        let command = format!(
            "{unpack} > {new} && chown root:root {new} && chmod 0755 {new} && mv -f {new} {SERVER_DIR}/{b}"
        );
        ssh::exec_ok(sess, &ep.as_root(&command), &data)?;
    }
    ssh::exec_ok(
        sess,
        &ep.as_root("test -e /etc/band/server.toml || cat > /etc/band/server.toml"),
        SERVER_TOML.as_bytes(),
    )?;
    let answered = remote_version(sess)?.ok_or_else(|| VmError::Invalid("the uploaded band-server does not run on the target (another architecture or C library?)".into()))?;
    if answered.version != local.version || answered.protocol != local.protocol {
        return Err(VmError::Invalid(format!(
            "the uploaded band-server answers version {} protocol {}, expected {} protocol {}",
            answered.version, answered.protocol, local.version, local.protocol
        )));
    }
    let manifest = serde_json::to_vec_pretty(local).unwrap_or_default();
    // The build marker lets a run check the build with a shell test, no program started (see
    // `Endpoint::server_command`); written last, after the binaries and installed.json.
    let marker = ssh::build_marker(&manifest_digest(local));
    ssh::exec_ok(
        sess,
        &ep.as_root(&format!(
            "cat > {SERVER_DIR}/installed.json && rm -f {SERVER_DIR}/.build-* && : > {marker}"
        )),
        &manifest,
    )?;
    Ok(answered)
}

/// What the target lacks for band-server to work (empty when ready).
pub fn missing_prerequisites(sess: &Session, ep: &Endpoint) -> Result<Vec<String>> {
    let out = ssh::exec(sess, &ep.as_root("for p in bwrap iptables ip6tables ip useradd; do command -v $p >/dev/null || echo $p; done"), b"")?;
    let mut missing: Vec<String> = out
        .stdout_text()
        .split_whitespace()
        .map(String::from)
        .collect();
    if out.status != 0 && missing.is_empty() {
        missing.push(format!(
            "root access ({})",
            if out.stderr.is_empty() {
                "sudo -n failed".into()
            } else {
                out.stderr
            }
        ));
    }
    Ok(missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(v: &str, sha: &str) -> Manifest {
        Manifest {
            version: v.into(),
            protocol: 1,
            sha256: [("band-server".to_string(), sha.to_string())].into(),
        }
    }

    #[test]
    fn only_the_same_binaries_answering_the_same_version_are_current() {
        let local = manifest("0.1.0", "aa");
        let v = ServerVersion {
            version: "0.1.0".into(),
            protocol: 1,
        };
        assert_eq!(
            decide(&local, Some(local.clone()), Some(v.clone())),
            Handshake::Current(v.clone())
        );
        assert_eq!(decide(&local, None, None), Handshake::Missing);
        // Another build of the same version is stale (the version string alone is not enough).
        assert!(matches!(
            decide(&local, Some(manifest("0.1.0", "bb")), Some(v.clone())),
            Handshake::Stale { .. }
        ));
        // Right manifest, but the binary answers another protocol: stale.
        let old = ServerVersion {
            version: "0.1.0".into(),
            protocol: 0,
        };
        assert!(matches!(
            decide(&local, Some(local.clone()), Some(old)),
            Handshake::Stale { .. }
        ));
        // A band-server that no longer runs.
        assert!(matches!(
            decide(&local, Some(local.clone()), None),
            Handshake::Stale { .. }
        ));
    }

    #[test]
    fn the_local_manifest_hashes_every_binary() {
        let t = tempfile::tempdir().unwrap();
        for b in BINARIES {
            fs_err::write(t.path().join(b), b.as_bytes()).unwrap();
        }
        let m = local_manifest(t.path()).unwrap();
        assert_eq!(m.sha256.len(), 3);
        let want: String = Sha256::digest(b"band-jail")
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(m.sha256["band-jail"], want);
        assert_ne!(m.sha256["band-jail"], m.sha256["band-shim"]);
        assert_eq!(m.protocol, proto::PROTOCOL_VERSION);
    }

    #[test]
    fn the_cached_manifest_follows_the_binaries() {
        let t = tempfile::tempdir().unwrap();
        for b in BINARIES {
            fs_err::write(t.path().join(b), b.as_bytes()).unwrap();
        }
        let cache = t.path().join("cache.json");
        let first = local_manifest_cached(t.path(), &cache).unwrap();
        assert!(cache.is_file());
        assert_eq!(local_manifest_cached(t.path(), &cache).unwrap(), first);
        fs_err::write(t.path().join("band-shim"), b"another build").unwrap();
        let second = local_manifest_cached(t.path(), &cache).unwrap();
        assert_ne!(
            second.sha256["band-shim"], first.sha256["band-shim"],
            "a rebuilt binary is rehashed"
        );
        assert_eq!(manifest_digest(&second).len(), 64);
        assert_ne!(manifest_digest(&second), manifest_digest(&first));
    }

    #[test]
    fn payloads_unpack_to_the_original() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("band-shim");
        fs_err::write(&f, b"#!/bin/sh\necho hi\n").unwrap();
        let (data, unpack) = payload(&f, t.path()).unwrap();
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(unpack)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(&data).unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.stdout, b"#!/bin/sh\necho hi\n");
    }
}
