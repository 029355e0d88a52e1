//! Red-team round 3 (issue 36): one skill cannot fill the shared program cache.
//!
//! A skill's own programs go into the state directory's program cache charged to the user who
//! asked for the run (`SUDO_UID` of the band-server started through sudo) and to the skill, within
//! `[program_cache]` bounds of the server config (shrunk here to a few MiB). A run that asks for
//! more than its share fails before its sandbox starts, with an error of the CLI layer that names
//! the program and the bound; another user's run afterwards runs its commands as before.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use band::proto::{self, FileEntry, Layer, Message, RunRequest, Status};
use pretty_assertions::assert_eq;

use super::helpers::*;

const MIB: usize = 1 << 20;

/// A copy of `touch` padded to `size` bytes with `fill` (the kernel ignores what follows an ELF's
/// segments): distinct programs of any size, made in memory.
fn big_program(size: usize, fill: u8) -> Vec<u8> {
    let mut data = fs_err::read("/usr/bin/touch").unwrap_or_else(|e| panic!("{e}"));
    assert!(data.len() < size);
    data.resize(size, fill);
    data
}

/// A run of skill `skill` whose bundle ships `programs` (`bin/<name>`, allowed with any
/// arguments) and whose entry runs `script`.
fn request(skill: &str, programs: &[(&str, Vec<u8>)], script: &str, host: &[&str]) -> RunRequest {
    let mut bundle: Vec<FileEntry> = programs
        .iter()
        .map(|(name, data)| file(&format!("bin/{name}"), 0o755, data))
        .collect();
    bundle.push(file("run.sh", 0o755, script.as_bytes()));
    let mut policy = policy();
    policy.allow.cli = programs
        .iter()
        .map(|(name, _)| format!("./bin/{name} *"))
        .chain(host.iter().map(|h| h.to_string()))
        .collect();
    RunRequest {
        protocol: proto::PROTOCOL_VERSION,
        run_id: run_id(),
        skill: skill.into(),
        script: "run".into(),
        entry: "run.sh".into(),
        bundle_sha256: bundle_hash(&bundle),
        bundle,
        policy,
        input: serde_json::json!({}),
        config: None,
        secrets: BTreeMap::new(),
        workspace: Vec::new(),
        trace: true,
        observe: false,
        args: Vec::new(),
    }
}

/// band-server started for user `uid` (as sudo would start it), with `config`.
fn spawn_for(uid: u32, req: &RunRequest, config: &Path) -> Child {
    use std::io::Write;
    let line = serde_json::to_string(&Message::Request(Box::new(req.clone())))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut child = Command::new(server())
        .arg("run")
        .env(band_server::config::STATE_DIR_ENV, STATE_DIR)
        .env(band_server::config::CONFIG_ENV, config)
        .env("SUDO_UID", uid.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start band-server: {e}"));
    let mut stdin = child.stdin.take().unwrap_or_else(|| panic!("no stdin"));
    stdin
        .write_all(line.as_bytes())
        .and_then(|()| stdin.write_all(b"\n"))
        .unwrap_or_else(|e| panic!("{e}"));
    drop(stdin);
    child
}

#[test]
fn privileged_a_skill_over_its_share_of_the_program_cache_fails_alone() {
    privileged!();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = dir.path().join("server.toml");
    fs_err::write(
        &config,
        "[program_cache]\nper_skill = \"8m\"\nper_owner = \"12m\"\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // Users no other test runs as.
    let (hog, other) = (4_136_001, 4_136_002);
    let probe = |names: &[&str]| {
        let mut s = String::from("#!/bin/sh\n");
        for n in names {
            s.push_str(&format!("/skill/bin/{n} /tmp/{n}; echo \"{n}=$?\"\n"));
        }
        s
    };

    // Within its share: the skill's 5 MiB program runs.
    let req = request(
        "hog-small",
        &[("big1", big_program(5 * MIB, 1))],
        &probe(&["big1"]),
        &[],
    );
    let o = finish(spawn_for(hog, &req, &config));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    assert_eq!(o.kv().get("big1").map(String::as_str), Some("0"), "{o:#?}");

    // Two 5 MiB programs of one skill: over the 8 MiB a skill may keep there. The run fails
    // before its sandbox starts (nothing of the script ran), naming the layer, the program, the
    // bound and what to do.
    let req = request(
        "hog-big",
        &[
            ("big2", big_program(5 * MIB, 2)),
            ("big3", big_program(5 * MIB, 3)),
        ],
        &probe(&["big2", "big3"]),
        &[],
    );
    let o = finish(spawn_for(hog, &req, &config));
    assert_eq!(o.result.status, Status::SetupFailed, "{o:#?}");
    assert_eq!(o.result.stdout, "", "{o:#?}");
    let e = o.result.error.as_ref().unwrap_or_else(|| panic!("{o:#?}"));
    assert_eq!(e.layer, Layer::Cli, "{e:?}");
    assert!(
        e.message.contains("`./bin/big3`")
            && e.message.contains("per-skill bound of 8 MiB")
            && e.message.contains(&format!("uid {hog}")),
        "{e:?}"
    );
    assert!(
        e.hint
            .as_deref()
            .is_some_and(|h| h.contains("[program_cache]")),
        "{e:?}"
    );

    // Another user, afterwards: a program of the same content (its own copy) and host commands
    // run as before.
    let req = request(
        "tool",
        &[("big1", big_program(5 * MIB, 1))],
        &format!("{}echo hi | tr a-z A-Z\n", probe(&["big1"])),
        &["tr a-z A-Z"],
    );
    let o = finish(spawn_for(other, &req, &config));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    assert_eq!(o.result.stdout, "big1=0\nHI\n", "{o:#?}");
}
