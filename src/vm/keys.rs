//! SSH keys: the client key `band setup` makes (ed25519, 0600), the VM host keys it pins, and
//! OpenSSH-style fingerprints for messages.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD as B64, STANDARD_NO_PAD as B64_NO_PAD};
use sha2::{Digest, Sha256};

use super::cmd::{self, os};
use super::paths::private_dir;
use super::{Result, VmError};

/// `ssh-keygen` making an ed25519 key pair at `path` (and `path.pub`), no passphrase.
pub fn keygen_argv(path: &Path, comment: &str) -> Vec<OsString> {
    vec![
        os("ssh-keygen"),
        os("-q"),
        os("-t"),
        os("ed25519"),
        os("-N"),
        os(""),
        os("-C"),
        os(comment),
        os("-f"),
        os(path),
    ]
}

/// Make the key pair at `path` unless it exists; either way check that the private key is 0600.
pub fn ensure_key(path: &Path, comment: &str) -> Result<PathBuf> {
    if let Some(dir) = path.parent() {
        private_dir(dir)?;
    }
    if !path.exists() {
        cmd::run_argv(&keygen_argv(path, comment))?;
        fs_err::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(VmError::Fs)?;
    }
    check_private(path)?;
    Ok(path.to_path_buf())
}

/// A private key readable by anyone but its owner is refused (as OpenSSH does).
pub fn check_private(path: &Path) -> Result<()> {
    let meta = fs_err::symlink_metadata(path).map_err(VmError::Fs)?;
    if !meta.is_file() {
        return Err(VmError::Invalid(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(VmError::Invalid(format!(
            "{} has mode {mode:o}; a private key must be 0600 (chmod 600 it)",
            path.display()
        )));
    }
    Ok(())
}

/// An OpenSSH public key line: `ssh-ed25519 AAAA… [comment]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    pub algo: String,
    pub blob: Vec<u8>,
}

impl PublicKey {
    pub fn parse(line: &str) -> Result<PublicKey> {
        let mut it = line.split_whitespace();
        let (Some(algo), Some(b64)) = (it.next(), it.next()) else {
            return Err(VmError::Invalid(format!(
                "not an OpenSSH public key: `{}`",
                line.trim()
            )));
        };
        let blob = B64
            .decode(b64)
            .map_err(|e| VmError::Invalid(format!("bad public key data: {e}")))?;
        // The blob starts with the algorithm name, length-prefixed; a mismatch is a forged line.
        let named = blob.get(4..).and_then(|rest| {
            let n = u32::from_be_bytes(blob.get(..4)?.try_into().ok()?) as usize;
            rest.get(..n)
        });
        if named != Some(algo.as_bytes()) {
            return Err(VmError::Invalid(format!(
                "public key data does not match its type `{algo}`"
            )));
        }
        Ok(PublicKey {
            algo: algo.to_string(),
            blob,
        })
    }

    /// A key as the SSH protocol carries it (the algorithm name is inside the blob).
    pub fn from_blob(blob: &[u8]) -> Result<PublicKey> {
        let n = blob
            .get(..4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_be_bytes)
            .unwrap_or(0) as usize;
        let algo = blob
            .get(4..4 + n)
            .and_then(|a| std::str::from_utf8(a).ok())
            .filter(|a| !a.is_empty());
        let algo =
            algo.ok_or_else(|| VmError::Invalid("malformed host key from the server".into()))?;
        Ok(PublicKey {
            algo: algo.to_string(),
            blob: blob.to_vec(),
        })
    }

    /// `ssh-ed25519 AAAA…` (no comment).
    pub fn line(&self) -> String {
        format!("{} {}", self.algo, B64.encode(&self.blob))
    }

    /// As OpenSSH prints it: `SHA256:` and the unpadded base64 of the blob's SHA-256.
    pub fn fingerprint(&self) -> String {
        format!("SHA256:{}", B64_NO_PAD.encode(Sha256::digest(&self.blob)))
    }
}

/// Read a public key file.
pub fn read_public(path: &Path) -> Result<PublicKey> {
    let text = fs_err::read_to_string(path).map_err(VmError::Fs)?;
    PublicKey::parse(text.lines().next().unwrap_or(""))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHfTx4JDz2kRt5ltvDrBVnGmIzLHp3rRuu4gm8HCMPHu band-vm-host";

    #[test]
    fn parses_a_public_key_and_prints_its_fingerprint() {
        let k = PublicKey::parse(KEY).unwrap();
        assert_eq!(k.algo, "ssh-ed25519");
        assert_eq!(k.blob.len(), 51);
        assert_eq!(k.line(), KEY.rsplit_once(' ').unwrap().0);
        assert!(k.fingerprint().starts_with("SHA256:") && !k.fingerprint().ends_with('='));
        assert_eq!(PublicKey::from_blob(&k.blob).unwrap(), k);
    }

    #[test]
    fn a_key_whose_data_names_another_type_is_refused() {
        let blob = KEY.split_whitespace().nth(1).unwrap();
        assert!(PublicKey::parse(&format!("ssh-rsa {blob}")).is_err());
        assert!(PublicKey::parse("ssh-ed25519").is_err());
        assert!(PublicKey::parse("ssh-ed25519 !!!").is_err());
    }

    #[test]
    fn keygen_makes_a_0600_key_once() {
        if cmd::which("ssh-keygen").is_none() {
            // openssh-client is in .ci/run's packages; locally it may be missing.
            assert!(
                std::env::var_os(band_must_run()).is_none(),
                "ssh-keygen is missing under BAND_TEST_MUST_RUN"
            );
            return;
        }
        let t = tempfile::tempdir().unwrap();
        let key = t.path().join("keys/id_ed25519");
        ensure_key(&key, "test").unwrap();
        let first = fs_err::read(&key).unwrap();
        ensure_key(&key, "test").unwrap();
        assert_eq!(
            fs_err::read(&key).unwrap(),
            first,
            "an existing key is kept"
        );
        assert_eq!(
            fs_err::metadata(&key).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            read_public(&key.with_extension("pub")).unwrap().algo,
            "ssh-ed25519"
        );
        fs_err::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(
            check_private(&key)
                .unwrap_err()
                .to_string()
                .contains("0600")
        );
    }

    fn band_must_run() -> &'static str {
        crate::proto::env::TEST_MUST_RUN
    }
}
