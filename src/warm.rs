//! The host target's warm band-server (issue 17): which build and settings one serves, and where
//! its socket is. Shared by `band` (which connects, and starts one) and `band-server serve
//! --host` (which listens, and exits when it no longer matches).
//!
//! A warm server serves a run exactly as a `band-server run` started by band would, so it may
//! only serve a band whose band-server would be the same program with the same settings. The
//! [`digest`] covers what a band-server started by band reads besides its request:
//! - the band-server binary: device, inode, size and modification time (a rebuild or an
//!   install changes them);
//! - the environment variables band-server reads ([`ENV_INPUTS`]: its config file and state
//!   folder, its helpers' paths, the invoking user of `sudo band`);
//! - its config file (`$BAND_SERVER_CONFIG` or [`DEFAULT_SERVER_CONFIG`]): present or not, and
//!   if present its device, inode, size and modification time.
//!
//! The socket's name carries the digest, so a band of other settings finds no socket and starts
//! band-server per run, as without a warm server.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The folder of the host's warm server: socket, lock, pid file and log (root's, 0755).
pub const DIR: &str = "/run/band-serve/host";

/// band-server's config file when `$BAND_SERVER_CONFIG` is not set.
pub const DEFAULT_SERVER_CONFIG: &str = "/etc/band/server.toml";

/// The environment variables band-server reads: the digest covers their values.
pub const ENV_INPUTS: [&str; 6] = [
    "BAND_SERVER_CONFIG",
    "BAND_SERVER_STATE_DIR",
    "BAND_JAIL",
    "BAND_SHIM",
    "SUDO_UID",
    "BAND_TEST_MUST_RUN",
];

/// How long a warm server waits for a run before it exits (seconds).
pub const IDLE_SECS: u64 = 600;

/// The digest (64 lowercase hex) of a band-server at `server` with the environment `env`.
/// `None` when `server` cannot be read (no warm server then: band starts band-server per run
/// and reports what is wrong with it).
pub fn digest(server: &Path, env: &dyn Fn(&str) -> Option<OsString>) -> Option<String> {
    let mut h = Sha256::new();
    let mut file = |label: &str, path: &Path| match fs_err::metadata(path) {
        Ok(m) => {
            h.update(
                format!(
                    "{label} {} {} {} {}.{}\n",
                    m.dev(),
                    m.ino(),
                    m.size(),
                    m.mtime(),
                    m.mtime_nsec()
                )
                .as_bytes(),
            );
            true
        }
        Err(_) => {
            h.update(format!("{label} absent\n").as_bytes());
            false
        }
    };
    if !file("server", server) {
        return None;
    }
    let config = env("BAND_SERVER_CONFIG")
        .map_or_else(|| PathBuf::from(DEFAULT_SERVER_CONFIG), PathBuf::from);
    file("config", &config);
    for name in ENV_INPUTS {
        h.update(name.as_bytes());
        match env(name) {
            Some(v) => {
                h.update(b"=");
                h.update(v.as_bytes());
            }
            None => h.update(b" unset"),
        }
        h.update(b"\n");
    }
    Some(hex::encode(h.finalize()))
}

/// [`digest`] with this process's environment.
pub fn digest_here(server: &Path) -> Option<String> {
    digest(server, &|name| std::env::var_os(name))
}

/// The socket of the warm server of `digest` under `dir` ([`DIR`]).
pub fn socket(dir: &Path, digest: &str) -> PathBuf {
    dir.join(format!("server-{digest}.sock"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let map: BTreeMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| ((*k).to_string(), OsString::from(v)))
            .collect();
        move |k: &str| map.get(k).cloned()
    }

    #[test]
    fn the_digest_changes_with_the_binary_the_config_and_every_setting() {
        let dir = tempfile::tempdir().unwrap();
        let server = dir.path().join("band-server");
        let config = dir.path().join("server.toml");
        fs_err::write(&server, b"one").unwrap();
        let cfg = config.to_str().unwrap();
        let base = digest(&server, &env_of(&[("BAND_SERVER_CONFIG", cfg)])).unwrap();
        assert_eq!(base.len(), 64);
        assert!(base.bytes().all(|b| b.is_ascii_hexdigit()));
        // The same inputs, the same digest.
        assert_eq!(
            digest(&server, &env_of(&[("BAND_SERVER_CONFIG", cfg)])).as_deref(),
            Some(base.as_str())
        );

        // The config file appears.
        fs_err::write(&config, b"[caps]\n").unwrap();
        let with_config = digest(&server, &env_of(&[("BAND_SERVER_CONFIG", cfg)])).unwrap();
        assert_ne!(with_config, base);

        // Every variable band-server reads, set or changed.
        let mut seen = vec![with_config.clone()];
        for name in ENV_INPUTS.iter().filter(|n| **n != "BAND_SERVER_CONFIG") {
            let d = digest(
                &server,
                &env_of(&[("BAND_SERVER_CONFIG", cfg), (name, "/x")]),
            )
            .unwrap();
            assert!(!seen.contains(&d), "{name} does not change the digest");
            seen.push(d);
        }

        // The binary rewritten (another size) or replaced (another inode).
        fs_err::write(&server, b"two, longer").unwrap();
        let rewritten = digest(&server, &env_of(&[("BAND_SERVER_CONFIG", cfg)])).unwrap();
        assert_ne!(rewritten, with_config);
        let other = dir.path().join("other");
        fs_err::write(&other, b"two, longer").unwrap();
        fs_err::rename(&other, &server).unwrap();
        let replaced = digest(&server, &env_of(&[("BAND_SERVER_CONFIG", cfg)])).unwrap();
        assert_ne!(replaced, rewritten);
    }

    #[test]
    fn no_band_server_no_digest() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(digest(&dir.path().join("none"), &env_of(&[])), None);
    }

    #[test]
    fn the_socket_is_named_by_the_digest() {
        assert_eq!(
            socket(Path::new(DIR), "ab12"),
            PathBuf::from("/run/band-serve/host/server-ab12.sock")
        );
    }
}
