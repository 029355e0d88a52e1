use super::*;
use crate::policy::site::parse_site;
use ssh_key::private::Ed25519Keypair;

fn key(seed: u8) -> PrivateKey {
    PrivateKey::from(Ed25519Keypair::from_seed(&[seed; 32]))
}

fn public_line(k: &PrivateKey) -> String {
    k.public_key().to_openssh().expect("public key")
}

/// A skill folder with a BAND.md and a fresh band.lock.
fn locked_skill() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    fs_err::write(dir.path().join("BAND.md"), "---\nband: x\n---\n").expect("write");
    let tree = crate::lock::Tree::read(dir.path()).expect("tree");
    let lock = crate::lock::write(dir.path(), &tree).expect("lock");
    (dir, lock.bundle_sha256)
}

fn site_with(keys: &str) -> SitePolicy {
    let text = format!(
        "---\nunsigned: community\ntiers:\n  community:\n    network: false\n  reviewed: {{}}\nkeys:\n{keys}---\n"
    );
    parse_site(Path::new("/etc/band/site.md"), &text).expect("site")
}

#[test]
fn a_signature_verifies_over_its_lock_and_names_its_key() {
    let k = key(1);
    let pem = sign_bytes(b"lock text", &k).expect("sign");
    assert!(pem.starts_with("-----BEGIN SSH SIGNATURE-----\n"), "{pem}");
    let signer = verify(b"lock text", &pem).expect("verify");
    assert_eq!(fingerprint(&signer), fingerprint(k.public_key()));
}

#[test]
fn a_signature_over_other_bytes_or_another_namespace_does_not_verify() {
    let k = key(1);
    let pem = sign_bytes(b"lock text", &k).expect("sign");
    assert_eq!(
        verify(b"lock text!", &pem).unwrap_err().to_string(),
        "band.lock.sig does not verify over band.lock: the signature or the lock was changed"
    );
    let other = k
        .sign("file", HashAlg::Sha512, b"lock text")
        .expect("sign")
        .to_pem(LineEnding::LF)
        .expect("pem");
    assert_eq!(
        verify(b"lock text", &other).unwrap_err().to_string(),
        "band.lock.sig is a signature for namespace `file`, not `band`"
    );
    assert!(
        verify(b"lock text", "not a signature")
            .unwrap_err()
            .to_string()
            .starts_with("band.lock.sig is not an OpenSSH signature"),
    );
}

#[test]
fn a_site_key_matches_by_public_key_line_or_fingerprint_only_its_own_key() {
    let (a, b) = (key(1), key(2));
    assert!(key_matches(&public_line(&a), a.public_key()));
    assert!(key_matches(&fingerprint(a.public_key()), a.public_key()));
    assert!(!key_matches(&public_line(&b), a.public_key()));
    assert!(!key_matches(&fingerprint(b.public_key()), a.public_key()));
    assert!(check_site_key(&public_line(&a)).is_ok());
    assert!(check_site_key(&fingerprint(a.public_key())).is_ok());
    assert_eq!(
        check_site_key("SHA256:short").unwrap_err().to_string(),
        "a fingerprint is `SHA256:` and 43 base64 characters, as `ssh-keygen -l` prints"
    );
    assert!(
        check_site_key("ssh-ed25519 AAAA")
            .unwrap_err()
            .to_string()
            .starts_with("not an OpenSSH public key line (")
    );
}

#[test]
fn trust_gives_the_signers_tier_and_the_unsigned_tier_otherwise() {
    let (dir, bundle) = locked_skill();
    let (a, b) = (key(1), key(2));
    let site = site_with(&format!(
        "  - {{signer: alice@example.com, key: \"{}\", tier: reviewed}}\n",
        public_line(&a)
    ));
    let lock = fs_err::read_to_string(dir.path().join(LOCK_FILE)).expect("lock");
    let signed = |k: &PrivateKey| SignedLock {
        lock: lock.clone(),
        sig: sign_bytes(lock.as_bytes(), k).expect("sign"),
    };
    assert_eq!(
        trust(&site, None, &bundle).map_err(|e| e.to_string()),
        Ok(Trust {
            tier: "community".into(),
            signer: None
        })
    );
    assert_eq!(
        trust(&site, Some(&signed(&a)), &bundle).map_err(|e| e.to_string()),
        Ok(Trust {
            tier: "reviewed".into(),
            signer: Some(format!(
                "alice@example.com ({})",
                fingerprint(a.public_key())
            )),
        })
    );
    assert_eq!(
        trust(&site, Some(&signed(&b)), &bundle).map_err(|e| e.to_string()),
        Ok(Trust {
            tier: "community".into(),
            signer: Some(fingerprint(b.public_key())),
        })
    );
}

#[test]
fn a_tampered_signature_or_a_lock_of_another_bundle_is_refused() {
    let (dir, bundle) = locked_skill();
    let a = key(1);
    let site = site_with(&format!(
        "  - {{signer: alice, key: \"{}\", tier: reviewed}}\n",
        fingerprint(a.public_key())
    ));
    let lock = fs_err::read_to_string(dir.path().join(LOCK_FILE)).expect("lock");
    let sig = sign_bytes(lock.as_bytes(), &a).expect("sign");
    // The lock edited after signing (one file's hash), the signature kept.
    let edited = lock.replacen("file 0644 ", "file 0755 ", 1);
    assert_ne!(edited, lock);
    let err = trust(
        &site,
        Some(&SignedLock {
            lock: edited,
            sig: sig.clone(),
        }),
        &bundle,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("does not verify over band.lock"), "{err}");
    // A signature that verifies, over a lock of another bundle (the skill changed, or a signed
    // lock was sent with another skill's files).
    let err = trust(
        &site,
        Some(&SignedLock {
            lock: lock.clone(),
            sig,
        }),
        &"0".repeat(64),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.starts_with("the signed band.lock is of another bundle"),
        "{err}"
    );
}

#[test]
fn band_sign_writes_a_signature_beside_the_lock_outside_the_bundle() {
    let (dir, bundle) = locked_skill();
    let a = key(3);
    let key_file = tempfile::NamedTempFile::new().expect("tmp");
    fs_err::write(
        key_file.path(),
        a.to_openssh(LineEnding::LF).expect("openssh").as_bytes(),
    )
    .expect("write key");
    let (out, fp) = sign_dir(dir.path(), key_file.path()).expect("sign");
    assert_eq!(out, dir.path().join(SIG_FILE));
    assert_eq!(fp, fingerprint(a.public_key()));
    // The signature is not part of the skill: the bundle and the lock are the same as before.
    let tree = crate::lock::Tree::read(dir.path()).expect("tree");
    assert_eq!(tree.bundle_sha256(), bundle);
    assert!(tree.nodes.iter().all(|n| n.path != SIG_FILE));
    let signed = read_signed(dir.path()).expect("read").expect("signed");
    verify(signed.lock.as_bytes(), &signed.sig).expect("verify");
}

/// `ssh-keygen -Y verify` accepts what `band sign` writes (the same format, not a look-alike).
#[test]
fn ssh_keygen_verifies_a_band_signature() {
    let Ok(out) = std::process::Command::new("ssh-keygen").arg("-?").output() else {
        assert!(
            std::env::var_os("BAND_TEST_MUST_RUN").is_none(),
            "ssh-keygen is missing (openssh-client)"
        );
        eprintln!("skipped: no ssh-keygen");
        return;
    };
    drop(out);
    let dir = tempfile::tempdir().expect("tempdir");
    let a = key(4);
    let msg = dir.path().join("band.lock");
    fs_err::write(&msg, "version 1\n").expect("write");
    let sig = sign_bytes(b"version 1\n", &a).expect("sign");
    fs_err::write(
        dir.path().join("allowed"),
        format!("alice {}\n", public_line(&a)),
    )
    .expect("write");
    let run = |data: &[u8]| {
        let mut child = std::process::Command::new("ssh-keygen")
            .args(["-Y", "verify", "-n", "band", "-I", "alice", "-f"])
            .arg(dir.path().join("allowed"))
            .arg("-s")
            .arg(dir.path().join("sig"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn");
        use std::io::Write as _;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(data)
            .expect("stdin");
        child.wait_with_output().expect("wait").status.success()
    };
    fs_err::write(dir.path().join("sig"), &sig).expect("write");
    assert!(run(b"version 1\n"));
    assert!(!run(b"version 2\n"));
}
