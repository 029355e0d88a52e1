//! Issue 40: band-server reads the site policy of its own machine (`site_policy` in its config)
//! and applies it to every request, whatever client sent it: a request that asks for more is
//! refused before anything is built, naming the band rule, the site rule and the tier; a request
//! inside the ceiling runs, with the site's deny rules joined to its own.

use std::path::{Path, PathBuf};

use band::proto::{Layer, Status};
use pretty_assertions::assert_eq;

use super::helpers::*;

/// A server config in `dir` whose `site_policy` is a file holding `site`.
fn config_with_site(dir: &Path, site: &str) -> PathBuf {
    let site_path = dir.join("site.md");
    fs_err::write(&site_path, site).unwrap_or_else(|e| panic!("{e}"));
    let cfg = dir.join("server.toml");
    fs_err::write(&cfg, format!("site_policy = \"{}\"\n", site_path.display()))
        .unwrap_or_else(|e| panic!("{e}"));
    cfg
}

/// The rules that refused the run's calls of `program`, in order.
fn refused_rules(o: &Outcome, program: &str) -> Vec<Option<String>> {
    o.result
        .cli_calls
        .iter()
        .filter(|c| c.argv.first().map(String::as_str) == Some(program) && !c.allowed)
        .map(|c| c.rule.clone())
        .collect()
}

fn cli_policy(allow: &[&str]) -> band::policy::Policy {
    let mut p = policy();
    p.allow.cli = strs(allow);
    p
}

#[test]
fn privileged_a_band_allowing_curl_under_a_site_denying_curl_is_refused() {
    privileged!();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cfg = config_with_site(dir.path(), "---\ndeny:\n  cli: [\"curl *\"]\n---\n");
    // A raw request (no client checked it): the band allows `curl *`.
    let req = request("#!/bin/bash\necho ran\n", cli_policy(&["curl *"]));
    let o = finish(spawn_with_config(&req, &cfg));
    assert_eq!(o.result.status, Status::SetupFailed, "{o:#?}");
    let err = o
        .result
        .error
        .clone()
        .unwrap_or_else(|| panic!("no error: {o:#?}"));
    assert_eq!(err.layer, Layer::new("site"));
    assert_eq!(
        err.message,
        format!(
            "refused: the band's allow.cli `curl *` is refused by the site policy's deny.cli \
             `curl *` ({}:3) (tier local)",
            dir.path().join("site.md").display()
        )
    );
    assert!(!o.result.stdout.contains("ran"), "{o:#?}");
    assert_eq!(o.result.metrics.run_ms, 0, "nothing ran: {o:#?}");
}

#[test]
fn privileged_a_band_inside_the_ceiling_runs_and_the_site_deny_holds_inside_the_sandbox() {
    privileged!();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cfg = config_with_site(
        dir.path(),
        "---\nallow:\n  cli: [\"sed *\", \"cat *\"]\ndeny:\n  cli: [\"sed -i *\"]\n---\n",
    );
    let script = "#!/bin/bash\necho hello > /tmp/f\nsed -i s/hello/owned/ /tmp/f >/dev/null 2>&1; echo \"sed_i=$?\"\necho \"content=$(cat /tmp/f)\"\necho \"sed_n=$(sed -n 1p /tmp/f)\"\n";
    let mut req = request(script, cli_policy(&["sed *", "cat *"]));
    req.trace = true;
    let o = finish(spawn_with_config(&req, &cfg));
    let kv = o.kv();
    assert_eq!(
        kv.get("content").map(String::as_str),
        Some("hello"),
        "{o:#?}"
    );
    assert_ne!(kv.get("sed_i").map(String::as_str), Some("0"), "{o:#?}");
    assert_eq!(kv.get("sed_n").map(String::as_str), Some("hello"), "{o:#?}");
    // The site's deny is what refused `sed -i`: the band alone allows it.
    assert_eq!(
        refused_rules(&o, "sed"),
        vec![Some("sed -i *".to_string())],
        "{o:#?}"
    );
}

#[test]
fn privileged_a_site_ceiling_refuses_what_lies_above_it() {
    privileged!();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cfg = config_with_site(dir.path(), "---\nallow:\n  cli: [\"jq *\"]\n---\n");
    let req = request(
        "#!/bin/bash\necho ran\n",
        cli_policy(&["jq *", "python3 *"]),
    );
    let o = finish(spawn_with_config(&req, &cfg));
    let err = o
        .result
        .error
        .clone()
        .unwrap_or_else(|| panic!("no error: {o:#?}"));
    assert_eq!(err.layer, Layer::new("site"));
    assert!(
        err.message.starts_with(
            "refused: the band's allow.cli `python3 *` is refused by the site policy's \
             allow.cli ceiling [`jq *`]"
        ),
        "{err:?}"
    );
    assert!(!o.result.stdout.contains("ran"), "{o:#?}");
}

#[test]
fn privileged_an_invalid_site_policy_refuses_every_run_with_its_line() {
    privileged!();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cfg = config_with_site(
        dir.path(),
        "---\ndeny:\n  cli: [\"curl *\"]\n  nett: [x.test]\n---\n",
    );
    let o = finish(spawn_with_config(
        &request("#!/bin/bash\necho ran\n", policy()),
        &cfg,
    ));
    assert_eq!(o.result.status, Status::SetupFailed, "{o:#?}");
    let err = o
        .result
        .error
        .clone()
        .unwrap_or_else(|| panic!("no error: {o:#?}"));
    assert_eq!(err.layer, Layer::new("site"));
    assert!(
        err.message.contains("site.md:4:3: unknown key `deny.nett`"),
        "{err:?}"
    );
}

/// An ed25519 key made by ssh-keygen in `dir` as `name`: (private key path, public key line).
fn keygen(dir: &Path, name: &str) -> (PathBuf, String) {
    let key = dir.join(name);
    let out = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(&key)
        .output()
        .unwrap_or_else(|e| panic!("ssh-keygen (openssh-client): {e}"));
    assert!(out.status.success(), "{out:?}");
    let public =
        fs_err::read_to_string(dir.join(format!("{name}.pub"))).unwrap_or_else(|e| panic!("{e}"));
    (key, public.trim().to_string())
}

/// `lock` signed by `key` with `ssh-keygen -Y sign -n band` (what `band sign` writes).
fn signed(key: &Path, lock: &str) -> band::proto::SignedLock {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let file = dir.path().join("band.lock");
    fs_err::write(&file, lock).unwrap_or_else(|e| panic!("{e}"));
    let out = std::process::Command::new("ssh-keygen")
        .args(["-q", "-Y", "sign", "-n", "band", "-f"])
        .arg(key)
        .arg(&file)
        .output()
        .unwrap_or_else(|e| panic!("ssh-keygen -Y sign: {e}"));
    assert!(out.status.success(), "{out:?}");
    let sig =
        fs_err::read_to_string(dir.path().join("band.lock.sig")).unwrap_or_else(|e| panic!("{e}"));
    band::proto::SignedLock {
        lock: lock.to_string(),
        sig,
    }
}

/// A client that skips its own checks (a raw request to band-server) gets the tier its signature
/// proves, and no more: unsigned, signed by a key the site does not list, a tampered signature,
/// a lock of another bundle each end as the site says; alice's signature over the bundle sent
/// gives her tier. The band asks for a secret, which the site's `community` tier switches off.
#[test]
fn privileged_a_raw_request_gets_the_tier_its_signature_proves_and_no_more() {
    privileged!();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (alice, alice_pub) = keygen(dir.path(), "alice");
    let (mallory, _) = keygen(dir.path(), "mallory");
    let cfg = config_with_site(
        dir.path(),
        &format!(
            "---\nunsigned: community\ntiers:\n  community:\n    secrets: false\n  reviewed: {{}}\nkeys:\n  - {{signer: alice, key: \"{alice_pub}\", tier: reviewed}}\n---\n"
        ),
    );
    let mut p = policy();
    p.secrets = strs(&["TOKEN"]);
    let mut req = request("#!/bin/bash\necho \"ran=${TOKEN:+yes}\"\n", p);
    req.secrets.insert("TOKEN".into(), "t0ken".into());
    let lock = format!("version 1\nbundle {}\n", req.bundle_sha256);
    let other = format!("version 1\nbundle {}\n", "0".repeat(64));
    let refused = |r: &band::proto::RunRequest| {
        let o = finish(spawn_with_config(r, &cfg));
        assert_eq!(o.result.status, Status::SetupFailed, "{o:#?}");
        assert!(!o.kv().contains_key("ran"), "it ran: {o:#?}");
        let e = o
            .result
            .error
            .clone()
            .unwrap_or_else(|| panic!("no error: {o:#?}"));
        assert_eq!(e.layer, Layer::new("site"), "{e:?}");
        e.message
    };
    let community = format!(
        "refused: the band's env.secrets `TOKEN` is refused by the tier community policy's \
         `tiers.community.secrets: false` ({}:5)",
        dir.path().join("site.md").display()
    );

    // Unsigned, and signed by a key the site does not list: the unsigned tier.
    assert_eq!(refused(&req), community);
    let mut by_mallory = req.clone();
    by_mallory.signed = Some(signed(&mallory, &lock));
    assert_eq!(refused(&by_mallory), community);

    // alice's signature, one character of it changed: no tier at all.
    let mut tampered = req.clone();
    let mut s = signed(&alice, &lock);
    let at = s.sig.find("\n").unwrap_or(0) + 10;
    let c = if s.sig.as_bytes()[at] == b'A' {
        "B"
    } else {
        "A"
    };
    s.sig.replace_range(at..at + 1, c);
    tampered.signed = Some(s);
    let m = refused(&tampered);
    assert!(m.starts_with("refused: "), "{m}");
    assert!(!m.contains("tier reviewed"), "{m}");
    // alice's own signature over a lock of another bundle (the skill changed after signing).
    let mut moved = req.clone();
    moved.signed = Some(signed(&alice, &other));
    let m = refused(&moved);
    assert!(m.contains("is of another bundle"), "{m}");

    // alice's signature over this bundle's lock: her tier, and the run has its secret.
    let mut good = req.clone();
    good.signed = Some(signed(&alice, &lock));
    let o = finish(spawn_with_config(&good, &cfg));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    assert_eq!(o.kv().get("ran").map(String::as_str), Some("yes"), "{o:#?}");
    let trust = o
        .result
        .trust
        .clone()
        .unwrap_or_else(|| panic!("no trust: {o:#?}"));
    assert_eq!(trust.tier, "reviewed");
    assert!(
        trust
            .signer
            .is_some_and(|s| s.starts_with("alice (SHA256:"))
    );
}

/// A request's narrower layers (the user's, a caller's session) apply after the site's, in
/// band-server, whatever the client checked: a band rule a session denies is refused naming the
/// session's file and line; a layer that claims trust (`keys:`) or an unknown label is refused; a
/// session deny that only overlaps the band holds inside the sandbox.
#[test]
fn privileged_a_raw_requests_narrowing_is_applied_by_band_server_and_never_widens() {
    privileged!();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // No site file at all: the narrowing applies alone.
    let cfg = dir.path().join("server.toml");
    fs_err::write(
        &cfg,
        format!(
            "site_policy = \"{}\"\n",
            dir.path().join("none.md").display()
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let session = |text: &str| band::proto::Narrowing {
        label: "session".into(),
        source: "/agent/session.md".into(),
        text: text.into(),
    };
    let err_of = |req: &band::proto::RunRequest| {
        let o = finish(spawn_with_config(req, &cfg));
        assert_eq!(o.result.status, Status::SetupFailed, "{o:#?}");
        assert!(!o.result.stdout.contains("ran"), "{o:#?}");
        o.result.error.unwrap_or_else(|| panic!("no error")).message
    };

    let mut req = request("#!/bin/bash\necho ran\n", cli_policy(&["curl *"]));
    req.narrowing = vec![session("---\ndeny:\n  cli: [\"curl *\"]\n---\n")];
    assert_eq!(
        err_of(&req),
        "refused: the band's allow.cli `curl *` is refused by the session policy's deny.cli \
         `curl *` (/agent/session.md:3)"
    );

    let (_, public) = keygen(dir.path(), "agent");
    let mut claims = request("#!/bin/bash\necho ran\n", policy());
    claims.narrowing = vec![session(&format!(
        "---\nkeys:\n  - {{signer: x, key: \"{public}\", tier: god}}\ntiers:\n  god: {{}}\n---\n"
    ))];
    let m = err_of(&claims);
    assert!(
        m.contains("`keys` is the site policy's to set, not a narrowing's"),
        "{m}"
    );
    let mut unknown = request("#!/bin/bash\necho ran\n", policy());
    unknown.narrowing = vec![band::proto::Narrowing {
        label: "root".into(),
        ..session("---\n---\n")
    }];
    assert!(err_of(&unknown).contains("unknown narrower layer \"root\""));

    // Overlapping: the band allows `sed *`, the session denies `sed -i *`; the run goes on and
    // `sed -i` is refused inside the sandbox by the session's rule.
    let script = "#!/bin/bash\necho hello > /tmp/f\nsed -i s/hello/owned/ /tmp/f >/dev/null 2>&1\necho \"content=$(cat /tmp/f)\"\n";
    let mut req = request(script, cli_policy(&["sed *", "cat *"]));
    req.trace = true;
    req.narrowing = vec![session("---\ndeny:\n  cli: [\"sed -i *\"]\n---\n")];
    let o = finish(spawn_with_config(&req, &cfg));
    assert_eq!(
        o.kv().get("content").map(String::as_str),
        Some("hello"),
        "{o:#?}"
    );
    assert_eq!(
        refused_rules(&o, "sed"),
        vec![Some("sed -i *".to_string())],
        "{o:#?}"
    );
}

/// A site deny beats a band allow for read, write and net, seen from inside the sandbox: the
/// band allows the whole workspace, every write under out/ and every host of a domain; the
/// site denies one file, one kind of file and one host, and the run goes on without them.
#[test]
fn privileged_a_site_deny_beats_a_band_allow_for_read_write_and_net_inside_the_sandbox() {
    privileged!();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let site = dir.path().join("site.md");
    fs_err::write(
        &site,
        "---\ndeny:\n  read: [\"secret.txt\"]\n  write: [\"out/*.sh\"]\n  net: [\"evil.site.test\"]\n---\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // No resolver answers (a dead loopback port): a lookup the band and site allow is asked
    // upstream and fails; one the site denies is refused by the run's own DNS stub.
    let cfg = dir.path().join("server.toml");
    fs_err::write(
        &cfg,
        format!(
            "site_policy = \"{}\"\ndns_upstream = [\"127.0.0.1:9\"]\n",
            site.display()
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut p = policy();
    p.allow.read = strs(&["**"]);
    p.allow.write = strs(&["out/**"]);
    p.allow.net = strs(&["*.site.test"]);
    let script = "#!/bin/bash\n\
        cat /workspace/notes.txt >/dev/null 2>&1 && echo notes=read || echo notes=refused\n\
        cat /workspace/secret.txt >/dev/null 2>&1 && echo secret=read || echo secret=refused\n\
        mkdir -p /workspace/out\n\
        echo ok > /workspace/out/report.txt\n\
        echo 'rm -rf ~' > /workspace/out/run.sh 2>/dev/null\n\
        (exec 3<>/dev/tcp/evil.site.test/443) 2>/dev/null; echo evil=$?\n\
        (exec 3<>/dev/tcp/api.site.test/443) 2>/dev/null; echo api=$?\n";
    let mut req = request(script, p);
    req.workspace = vec![
        file("notes.txt", 0o644, b"notes\n"),
        file("secret.txt", 0o644, b"s3cret\n"),
    ];
    let o = finish(spawn_with_config(&req, &cfg));
    let kv = o.kv();
    assert_eq!(kv.get("notes").map(String::as_str), Some("read"), "{o:#?}");
    assert_eq!(
        kv.get("secret").map(String::as_str),
        Some("refused"),
        "{o:#?}"
    );
    let written: Vec<&str> = o.result.written.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(written, ["out/report.txt"], "{o:#?}");
    let lookups: Vec<(String, bool)> = o
        .result
        .network
        .as_ref()
        .map(|n| {
            n.lookups
                .iter()
                .map(|l| (l.name.clone(), l.allowed))
                .collect()
        })
        .unwrap_or_default();
    assert!(
        lookups.contains(&("evil.site.test".to_string(), false)),
        "{lookups:?}"
    );
    assert!(
        lookups.contains(&("api.site.test".to_string(), true)),
        "{lookups:?}"
    );
    assert_ne!(kv.get("evil").map(String::as_str), Some("0"), "{o:#?}");
}
