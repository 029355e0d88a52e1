//! Issue 40: the site policy seen from the client (`band explain`, `lint`, `doctor`: a preview
//! of `$BAND_SITE_POLICY`) and signatures (`band sign`): band-server gives a signed skill its
//! signer's tier, and the same skill unsigned the site's `unsigned` tier.

use std::path::{Path, PathBuf};

use band_test::{SkillBuilder, band_snapshot};

use crate::common::{bin, sandbox_missing};

/// A skill asking for network (`allow.net`) that echoes `ran`.
fn net_skill(root: &Path) -> PathBuf {
    SkillBuilder::new("fetcher")
        .band("description: Fetches from an API.\nallow:\n  net: [api.example.test]\n")
        .script("go.sh", "#!/bin/sh\necho ran\n")
        .input_schema("go", SkillBuilder::NO_INPUT)
        .write(root)
}

/// An ed25519 key made by ssh-keygen in `dir`: (private key path, public key line).
fn keygen(dir: &Path) -> (PathBuf, String) {
    let key = dir.join("id_ed25519");
    let out = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "alice", "-f"])
        .arg(&key)
        .output()
        .expect("ssh-keygen (openssh-client)");
    assert!(out.status.success(), "{out:?}");
    let public = fs_err::read_to_string(dir.join("id_ed25519.pub")).expect("pub");
    (key, public.trim().to_string())
}

/// A site whose unsigned skills get no network and whose `reviewed` tier (alice's key) does.
fn site_file(dir: &Path, public: &str) -> PathBuf {
    let site = dir.join("site.md");
    fs_err::write(
        &site,
        format!(
            "---\nsite: test-fleet\ndeny:\n  cli: [\"curl *\"]\nunsigned: community\ntiers:\n  community:\n    network: false\n  reviewed:\n    limit: {{maxPids: 64}}\nkeys:\n  - {{signer: alice, key: \"{public}\", tier: reviewed}}\n---\n"
        ),
    )
    .expect("write");
    site
}

#[test]
fn explain_lint_and_doctor_preview_the_site_policy() {
    let t = tempfile::tempdir().expect("tmp");
    let skill = net_skill(&t.path().join("skills"));
    let site = site_file(
        t.path(),
        "SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU",
    );
    let band = bin().env("BAND_SITE_POLICY", &site);
    let settings = band_test::settings(&[(&t.path().display().to_string(), "[TMP]")]);
    settings.bind(|| {
        band_snapshot!(
            band.output(&["explain", "--skills", "skills", "fetcher"], t.path()),
            "explain_unsigned"
        );
        band_snapshot!(
            band.output(&["lint", skill.to_str().expect("utf-8")], t.path()),
            "lint_unsigned"
        );
        // The rest of doctor's output depends on the host (its own snapshot, vm_cli.rs).
        let doctor = band.output(&["doctor"], t.path());
        let line: Vec<&str> = doctor
            .stdout
            .lines()
            .filter(|l| l.contains("site policy"))
            .collect();
        band_test::insta::assert_snapshot!("doctor_site", line.join("\n"));
        let none = bin().output(&["doctor"], t.path());
        let line: Vec<&str> = none
            .stdout
            .lines()
            .filter(|l| l.contains("site policy"))
            .collect();
        band_test::insta::assert_snapshot!("doctor_no_site", line.join("\n"));
    });
}

/// The same skill, signed by a key the site lists, runs with network in the `reviewed` tier;
/// unsigned (no band.lock.sig), it is of the `community` tier and refused before anything is
/// built; with its signature over a lock the skill no longer matches, refused.
#[test]
fn privileged_a_signed_skill_gets_its_signers_tier_and_unsigned_it_is_refused_network() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tmp");
    let skills = t.path().join("skills");
    let skill = net_skill(&skills);
    let (key, public) = keygen(t.path());
    let site = site_file(t.path(), &public);
    let cfg = t.path().join("server.toml");
    fs_err::write(&cfg, format!("site_policy = \"{}\"\n", site.display())).expect("write");
    let band = bin()
        .env("BAND_SERVER_CONFIG", &cfg)
        .env("BAND_SITE_POLICY", &site);
    let dir = skill.to_str().expect("utf-8");
    let (code, _, err) = band.run(&["lock", dir], t.path());
    assert_eq!(code, 0, "{err}");
    let mut settings = band_test::settings(&[(&t.path().display().to_string(), "[TMP]")]);
    // The key is the test's own, new each run.
    settings.add_filter(r"SHA256:[A-Za-z0-9+/]{43}", "SHA256:[FINGERPRINT]");
    settings.bind(|| {
        // Unsigned: the community tier has no network.
        band_snapshot!(
            band.output(&["run", "--skills", "skills", "fetcher/go"], t.path()),
            "run_unsigned_refused"
        );
        let signed = band.output(
            &["sign", dir, "--key", key.to_str().expect("utf-8")],
            t.path(),
        );
        assert_eq!(signed.code, 0, "{signed:?}");
        assert!(skill.join("band.lock.sig").is_file());
        band_snapshot!(
            band.output(&["explain", "--skills", "skills", "fetcher/go"], t.path()),
            "explain_signed"
        );
        let (code, out, err) = band.run(
            &["run", "--json", "--skills", "skills", "fetcher/go"],
            t.path(),
        );
        assert_eq!(code, 0, "{out}\n{err}");
        let v: serde_json::Value = serde_json::from_str(&out).expect("json");
        assert_eq!(v["stdout"], "ran\n", "{v}");
        assert_eq!(v["trust"]["tier"], "reviewed", "{v}");
        let signer = v["trust"]["signer"].as_str().unwrap_or_default();
        assert!(signer.starts_with("alice (SHA256:"), "{v}");
        // The ledger records it; `band show` says it.
        let run_id = v["run_id"].as_str().expect("run id").to_string();
        let (code, shown, err) = band.run(&["show", &run_id], t.path());
        assert_eq!(code, 0, "{err}");
        assert!(
            shown.lines().any(|l| l.trim_start().starts_with("trust")
                && l.contains("tier reviewed (signed by alice (SHA256:")),
            "{shown}"
        );
        // `band history` has a tier column once a run has one.
        let (code, history, err) = band.run(&["history"], t.path());
        assert_eq!(code, 0, "{err}");
        let header = history
            .lines()
            .find(|l| l.contains("skill/script"))
            .unwrap_or_default();
        assert!(header.contains("tier"), "{history}");
        let row = history
            .lines()
            .find(|l| l.contains(&run_id[..12.min(run_id.len())]))
            .unwrap_or_else(|| panic!("{history}"));
        assert!(row.contains("reviewed"), "{history}");
    });
    // A signature kept over a lock that no longer describes the skill: the skill changed, was
    // re-locked, the old signature kept.
    fs_err::write(skill.join("scripts/go.sh"), "#!/bin/sh\necho changed\n").expect("write");
    let (code, _, err) = band.run(&["lock", dir], t.path());
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = band.run(
        &["run", "--json", "--skills", "skills", "fetcher/go"],
        t.path(),
    );
    assert_eq!(code, 8, "{out}\n{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    let msg = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.starts_with("refused: band.lock.sig does not verify over band.lock"),
        "{v}"
    );
    assert!(!out.contains("changed\\n"), "{out}");
}

/// The narrower layers a client sends: the user's own file (`$XDG_CONFIG_HOME/band/site.md`)
/// and the caller's for its session (`$BAND_NARROW`). `band explain` shows them; band-server
/// applies them (no site file here): a session deny that covers a band rule refuses the run with
/// the session's file and line; a user deny that only overlaps holds inside the sandbox; a
/// `$BAND_NARROW` that names no file is an error before anything is sent.
#[test]
fn privileged_the_users_and_the_sessions_narrowing_are_previewed_and_enforced() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tmp");
    SkillBuilder::new("lister")
        .band("description: Lists and reads.\nallow:\n  cli: [\"ls *\", \"cat *\"]\n")
        .script(
            "go.sh",
            "#!/bin/sh\nls / >/dev/null && echo listed\nls -a / >/dev/null 2>&1 || echo ls_a_refused\n",
        )
        .input_schema("go", SkillBuilder::NO_INPUT)
        .write(&t.path().join("skills"));
    let xdg = t.path().join("config");
    fs_err::create_dir_all(xdg.join("band")).expect("mkdir");
    fs_err::write(
        xdg.join("band/site.md"),
        "---\ndeny:\n  cli: [\"ls -a *\"]\n---\nMy own rules.\n",
    )
    .expect("write");
    let session = t.path().join("session.md");
    fs_err::write(&session, "---\ndeny:\n  cli: [\"cat *\"]\n---\n").expect("write");
    let nosite = t.path().join("server.toml");
    fs_err::write(
        &nosite,
        format!("site_policy = \"{}\"\n", t.path().join("none.md").display()),
    )
    .expect("write");
    let band = bin()
        .env("XDG_CONFIG_HOME", &xdg)
        .env("BAND_SITE_POLICY", t.path().join("none.md"))
        .env("BAND_SERVER_CONFIG", &nosite);
    let settings = band_test::settings(&[(&t.path().display().to_string(), "[TMP]")]);
    settings.bind(|| {
        band_snapshot!(
            band.clone()
                .env("BAND_NARROW", &session)
                .output(&["explain", "--skills", "skills", "lister/go"], t.path()),
            "explain_narrowed"
        );
        band_snapshot!(
            band.clone()
                .env("BAND_NARROW", &session)
                .output(&["run", "--skills", "skills", "lister/go"], t.path()),
            "run_session_refused"
        );
        band_snapshot!(
            band.clone()
                .env("BAND_NARROW", t.path().join("gone.md"))
                .output(&["run", "--skills", "skills", "lister/go"], t.path()),
            "run_session_missing"
        );
    });
    // The user's layer alone: the run goes on, `ls -a` refused inside by the user's rule.
    let (code, out, err) = band.run(
        &["run", "--json", "--skills", "skills", "lister/go"],
        t.path(),
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["stdout"], "listed\nls_a_refused\n", "{v}");
}

/// An agent host sees, in `tools/list`, the tier each tool would run in and whether the site's
/// layers would refuse it (`_meta["band/trust"]`, a preview); `band history` shows the tier a
/// run was given once a site policy gave one.
#[test]
fn the_mcp_tool_list_says_each_tools_tier_and_refusal() {
    let t = tempfile::tempdir().expect("tmp");
    let skills = t.path().join("skills");
    net_skill(&skills);
    let site = site_file(
        t.path(),
        "SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU",
    );
    let env = bin().env("BAND_SITE_POLICY", &site);
    let (mut raw, _) = crate::mcp::Raw::start_in(&[&skills], t.path(), &[], env);
    let list = raw.request("tools/list", serde_json::json!({}));
    let tool = list["tools"]
        .as_array()
        .and_then(|a| a.iter().find(|t| t["name"] == "fetcher__go"))
        .unwrap_or_else(|| panic!("{list}"));
    let trust = &tool["_meta"]["band/trust"];
    assert_eq!(trust["tier"], "community", "{tool}");
    assert_eq!(trust["preview"], true, "{tool}");
    assert_eq!(
        trust["refused"],
        format!(
            "the band's allow.net `api.example.test` is refused by the tier community policy's `tiers.community.network: false` ({}:8)",
            site.display()
        ),
        "{tool}"
    );
    // Without a site policy, no trust is claimed.
    let (mut raw, _) = crate::mcp::Raw::start(&[&skills], t.path());
    let list = raw.request("tools/list", serde_json::json!({}));
    assert!(
        list["tools"]
            .as_array()
            .is_some_and(|a| a.iter().all(|t| t["_meta"].get("band/trust").is_none())),
        "{list}"
    );
}
