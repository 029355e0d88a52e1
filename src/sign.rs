//! Signed skills: `band.lock.sig`, an OpenSSH signature (sshsig, namespace `band`) over the bytes
//! of `band.lock`, and the trust tier a site policy gives its signer.
//!
//! The signature is what `ssh-keygen -Y sign -n band -f KEY band.lock` writes (and `band sign`
//! writes the same), so a developer's existing ed25519 key signs a skill and `ssh-keygen -Y
//! verify` checks it. The signature covers `band.lock`; `band.lock` names the bundle hash
//! (`bundle` line) band-server recomputes from the bytes it mounts. band-server checks both at run
//! time ([`trust`]): the signature over the lock text the request carries, then the lock's bundle
//! hash against the bundle the request carries. A client can send any lock and signature, but
//! without the signer's private key it cannot make a signature that verifies over a lock naming
//! a bundle it changed. `band.lock.sig` itself is outside the bundle and the lock (the lock cannot
//! cover its own signature).

use std::path::{Path, PathBuf};

use ssh_key::{HashAlg, LineEnding, PrivateKey, PublicKey, SshSig};

use crate::lock::{LOCK_FILE, Lock, LockError};
use crate::policy::site::SitePolicy;

/// The signature file, beside `band.lock` at the skill root.
pub const SIG_FILE: &str = "band.lock.sig";
/// The sshsig namespace of a skill signature (`ssh-keygen -Y sign -n band`).
pub const NAMESPACE: &str = "band";
/// Largest `band.lock.sig` read, in bytes (an ed25519 signature is under 400).
pub const MAX_SIG_BYTES: u64 = 64 << 10;

/// The wire types of a signed run live in the protocol (a leaf: band-server compiles it).
pub use crate::proto::{SignedLock, Trust};

/// Why `band sign` could not write a signature.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    #[error(transparent)]
    Fs(#[from] std::io::Error),
    #[error("{}: {message}", path.display())]
    Key { path: PathBuf, message: String },
    #[error(transparent)]
    Signature(#[from] SignatureError),
}

/// Why a skill cannot be signed, or why its signature (or the lock it covers) does not hold.
/// Each message carries its cause itself (no `source`): band and band-server print the message.
#[derive(Debug, thiserror::Error)]
pub enum SignatureError {
    #[error("cannot sign: {0}")]
    Sign(ssh_key::Error),
    #[error("cannot encode the signature: {0}")]
    Encode(ssh_key::Error),
    #[error("{sig} is not an OpenSSH signature ({0})", sig = SIG_FILE)]
    NotASignature(ssh_key::Error),
    #[error("{sig} is a signature for namespace `{0}`, not `{ns}`", sig = SIG_FILE, ns = NAMESPACE)]
    Namespace(String),
    #[error(
        "{sig} does not verify over {lock}: the signature or the lock was changed",
        sig = SIG_FILE,
        lock = LOCK_FILE
    )]
    DoesNotVerify,
    #[error("the signed {lock} cannot be read: {0}", lock = LOCK_FILE)]
    LockUnreadable(LockError),
    #[error(
        "the signed {lock} is of another bundle (bundle {signed}, sent {sent}): the skill changed \
         after it was signed",
        lock = LOCK_FILE
    )]
    OtherBundle { signed: String, sent: String },
}

/// Why a site policy's `keys[].key` names no key.
#[derive(Debug, thiserror::Error)]
pub enum SiteKeyError {
    #[error("a fingerprint is `SHA256:` and 43 base64 characters, as `ssh-keygen -l` prints")]
    Fingerprint,
    #[error("not an OpenSSH public key line ({0})")]
    NotAPublicKey(ssh_key::Error),
}

/// Sign `msg` (the bytes of a `band.lock`) with an OpenSSH private key: the signature's PEM text.
pub fn sign_bytes(msg: &[u8], key: &PrivateKey) -> Result<String, SignatureError> {
    let sig = key
        .sign(NAMESPACE, HashAlg::Sha512, msg)
        .map_err(SignatureError::Sign)?;
    sig.to_pem(LineEnding::LF).map_err(SignatureError::Encode)
}

/// Read an OpenSSH private key file (unencrypted; an encrypted one is refused with a hint).
pub fn read_private_key(path: &Path) -> Result<PrivateKey, SignError> {
    let bad = |message: String| SignError::Key {
        path: path.to_path_buf(),
        message,
    };
    let text = fs_err::read_to_string(path)?;
    let key = PrivateKey::from_openssh(text.trim())
        .map_err(|e| bad(format!("not an OpenSSH private key ({e})")))?;
    if key.is_encrypted() {
        return Err(bad(format!(
            "the key is protected by a passphrase, which band does not read; sign with \
             `ssh-keygen -Y sign -n {NAMESPACE} -f {} band.lock` (it writes the same {SIG_FILE})",
            path.display()
        )));
    }
    if key.algorithm() != ssh_key::Algorithm::Ed25519 {
        return Err(bad(format!(
            "a {} key: band signs and verifies ed25519 keys (`ssh-keygen -t ed25519`)",
            key.algorithm()
        )));
    }
    Ok(key)
}

/// `band sign DIR --key KEY`: write `DIR/band.lock.sig` over `DIR/band.lock`. The lock must
/// match the skill as it is (a signature vouches for what the lock describes).
pub fn sign_dir(root: &Path, key_path: &Path) -> Result<(PathBuf, String), SignError> {
    let key = read_private_key(key_path)?;
    let lock = crate::lock::read_top_file(root, LOCK_FILE, crate::lock::MAX_LOCK_BYTES)?
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{}: no such file", root.join(LOCK_FILE).display()),
            )
        })?;
    let pem = sign_bytes(lock.as_bytes(), &key)?;
    crate::skillfs::write_in_root(root, SIG_FILE, pem.as_bytes())?;
    Ok((root.join(SIG_FILE), fingerprint(key.public_key())))
}

/// `SHA256:…`, as `ssh-keygen -l` prints it.
pub fn fingerprint(key: &PublicKey) -> String {
    key.fingerprint(HashAlg::Sha256).to_string()
}

/// Verify a signature (PEM text) over `msg` with the key it carries: that key, when it holds.
pub fn verify(msg: &[u8], sig_pem: &str) -> Result<PublicKey, SignatureError> {
    let sig = SshSig::from_pem(sig_pem.trim()).map_err(SignatureError::NotASignature)?;
    if sig.namespace() != NAMESPACE {
        return Err(SignatureError::Namespace(sig.namespace().to_string()));
    }
    let key = PublicKey::from(sig.public_key().clone());
    key.verify(NAMESPACE, msg, &sig)
        .map_err(|_| SignatureError::DoesNotVerify)?;
    Ok(key)
}

/// Does a site's `keys[].key` (an OpenSSH public key line, or a `SHA256:` fingerprint) name
/// `key`?
pub fn key_matches(site_key: &str, key: &PublicKey) -> bool {
    let site_key = site_key.trim();
    if site_key.starts_with("SHA256:") {
        return site_key == fingerprint(key);
    }
    PublicKey::from_openssh(site_key).is_ok_and(|k| k.key_data() == key.key_data())
}

/// Is `text` a form `keys[].key` accepts? `Err` says why not.
pub fn check_site_key(text: &str) -> Result<(), SiteKeyError> {
    let text = text.trim();
    if let Some(b64) = text.strip_prefix("SHA256:") {
        let ok = b64.len() == 43
            && b64
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/');
        return if ok {
            Ok(())
        } else {
            Err(SiteKeyError::Fingerprint)
        };
    }
    PublicKey::from_openssh(text)
        .map(|_| ())
        .map_err(SiteKeyError::NotAPublicKey)
}

/// The trust of a request: the site's `unsigned` tier for an unsigned skill or an unknown
/// signer, the signer's tier for a key the site names. `Err` (a refusal) for a signature that
/// does not verify over the lock, or a lock that does not describe the bundle sent
/// (`bundle_sha256`, recomputed by band-server from the bundle's bytes).
pub fn trust(
    site: &SitePolicy,
    signed: Option<&SignedLock>,
    bundle_sha256: &str,
) -> Result<Trust, SignatureError> {
    let Some(signed) = signed else {
        return Ok(Trust {
            tier: site.unsigned.clone(),
            signer: None,
        });
    };
    let key = verify(signed.lock.as_bytes(), &signed.sig)?;
    let lock =
        Lock::parse(&signed.lock, Path::new(LOCK_FILE)).map_err(SignatureError::LockUnreadable)?;
    if lock.bundle_sha256 != bundle_sha256 {
        return Err(SignatureError::OtherBundle {
            signed: lock.bundle_sha256,
            sent: bundle_sha256.to_string(),
        });
    }
    let fp = fingerprint(&key);
    Ok(match site.keys.iter().find(|k| key_matches(&k.key, &key)) {
        Some(k) => Trust {
            tier: k.tier.clone(),
            signer: Some(format!("{} ({fp})", k.signer)),
        },
        None => Trust {
            tier: site.unsigned.clone(),
            signer: Some(fp),
        },
    })
}

/// Read `root/band.lock` and `root/band.lock.sig` for a request: `None` when the skill has no
/// signature (or no lock).
pub fn read_signed(root: &Path) -> Result<Option<SignedLock>, std::io::Error> {
    let sig_path = root.join(SIG_FILE);
    let meta = match fs_err::symlink_metadata(&sig_path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if !meta.is_file() || meta.len() > MAX_SIG_BYTES {
        return Err(std::io::Error::other(format!(
            "{} is not a regular file of at most {MAX_SIG_BYTES} bytes",
            sig_path.display()
        )));
    }
    let Some(lock) = crate::lock::read_top_file(root, LOCK_FILE, crate::lock::MAX_LOCK_BYTES)?
    else {
        return Ok(None);
    };
    let Some(sig) = crate::lock::read_top_file(root, SIG_FILE, MAX_SIG_BYTES)? else {
        return Ok(None);
    };
    Ok(Some(SignedLock { lock, sig }))
}

/// The tier `band explain` previews for a skill at `root` under `site`, and why (band-server
/// decides at run time, from what the request carries).
pub fn preview_tier(site: &SitePolicy, root: Option<&Path>) -> (String, String) {
    let unsigned = || {
        (
            site.unsigned.clone(),
            "the site's tier for unsigned skills".to_string(),
        )
    };
    let Some(root) = root else {
        return unsigned();
    };
    let signed = match read_signed(root) {
        Ok(Some(s)) => s,
        Ok(None) => return (site.unsigned.clone(), format!("unsigned: no {SIG_FILE}")),
        Err(e) => return (site.unsigned.clone(), format!("{SIG_FILE} unreadable: {e}")),
    };
    let bundle = match crate::lock::Tree::read(root) {
        Ok(t) => t.bundle_sha256(),
        Err(e) => {
            return (
                site.unsigned.clone(),
                format!("the skill cannot be read: {e}"),
            );
        }
    };
    match trust(site, Some(&signed), &bundle) {
        Ok(Trust {
            tier,
            signer: Some(s),
        }) if !s.starts_with("SHA256:") => (tier, format!("signed by {s}")),
        Ok(Trust { tier, signer }) => (
            tier,
            format!(
                "signed by {}, a key the site does not list",
                signer.unwrap_or_default()
            ),
        ),
        Err(e) => (
            site.unsigned.clone(),
            format!("band-server would refuse the run: {e}"),
        ),
    }
}

#[cfg(test)]
#[path = "sign_tests.rs"]
mod tests;
