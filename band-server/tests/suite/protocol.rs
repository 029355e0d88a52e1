//! Refusals that happen before anything is built, and a script that waits for its client's `go`.
//! The checks before the root check need no root; the others are `privileged_*`.

use band::proto::{Layer, Message, RunRequest, Status};
use pretty_assertions::assert_eq;

use super::helpers::*;

#[test]
fn version_prints_versions() {
    let out = std::process::Command::new(server())
        .arg("version")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        v["protocol"],
        serde_json::json!(band::proto::PROTOCOL_VERSION)
    );
    assert_eq!(v["version"], serde_json::json!(env!("CARGO_PKG_VERSION")));
}

#[test]
fn protocol_mismatch_is_setup_failed_protocol() {
    let mut req = request("#!/bin/sh\necho hi\n", policy());
    req.protocol = 999;
    let o = run(&req);
    assert_eq!(o.exit, Some(0));
    assert_eq!(o.result.status, Status::SetupFailed);
    assert_eq!(
        o.result.error.as_ref().map(|e| e.layer.clone()),
        Some(Layer::Protocol)
    );
    assert!(o.events.is_empty(), "{:?}", o.events);
}

#[test]
fn garbage_is_setup_failed_protocol() {
    let o = finish(spawn_line("{\"type\":\"request\",\"nope\":1}"));
    assert_eq!(o.result.status, Status::SetupFailed);
    assert_eq!(o.result.error.map(|e| e.layer), Some(Layer::Protocol));
}

#[test]
fn tampered_bundle_is_refused_for_integrity() {
    let mut req = request("#!/bin/sh\necho hi\n", policy());
    req.bundle[0].data = base64_of("#!/bin/sh\necho pwned\n");
    let o = run(&req);
    assert_eq!(o.result.status, Status::SetupFailed);
    assert_eq!(
        o.result.error.map(|e| e.layer),
        if band_server::sys::euid() == 0 {
            Some(Layer::Integrity)
        } else {
            Some(Layer::Identity)
        }
    );
}

#[test]
fn privileged_bad_paths_are_refused_as_io() {
    privileged!();
    for bad in ["../escape", "/etc/passwd", "a//b", "a/./b", ""] {
        let mut req = request("#!/bin/sh\necho hi\n", policy());
        req.workspace = vec![file(bad, 0o644, b"x")];
        let o = run(&req);
        assert_eq!(o.result.status, Status::SetupFailed, "{bad}");
        assert_eq!(o.result.error.map(|e| e.layer), Some(Layer::Io), "{bad}");
    }
}

#[test]
fn privileged_undeclared_secret_is_refused() {
    privileged!();
    let mut req = request("#!/bin/sh\necho hi\n", policy());
    req.secrets.insert("TOKEN".into(), "x".into());
    let o = run(&req);
    assert_eq!(o.result.error.map(|e| e.layer), Some(Layer::Secrets));
}

fn base64_of(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// The request, then `said`, one line each, as a client writes them.
fn lines(req: &RunRequest, said: &[Message]) -> String {
    let mut all = vec![Message::Request(Box::new(req.clone()))];
    all.extend(said.iter().cloned());
    all.iter()
        .map(|m| serde_json::to_string(m).unwrap_or_else(|e| panic!("{e}")))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn privileged_a_script_that_waits_for_go_starts_on_go_and_never_without_it() {
    privileged!();
    let mut req = request("#!/bin/sh\necho ran\n", policy());
    req.start_on_go = true;
    // `go`, then the client closes its end (without `hold`: no cancel).
    let o = finish(spawn_line(&lines(&req, &[Message::Go])));
    assert_eq!(o.result.status, Status::Ok, "{:?}", o.result.error);
    assert_eq!(o.result.stdout, "ran\n");
    // No `go`: the channel ends, the client holds and goes away, or it cancels (its record did
    // not reach its disk). The sandbox was built; the script never starts, and nothing of the
    // run is left.
    for (what, said) in [
        ("the end of input", vec![]),
        ("hold, then the end of input", vec![Message::Hold]),
        ("cancel", vec![Message::Hold, Message::Cancel]),
    ] {
        req.run_id = run_id();
        let o = finish(spawn_line(&lines(&req, &said)));
        assert_eq!(o.result.status, Status::SetupFailed, "{what}");
        let error = o.result.error.unwrap_or_else(|| panic!("{what}: no error"));
        assert_eq!(error.layer, Layer::Process, "{what}");
        assert!(
            error.message.contains("did not say `go`"),
            "{what}: {}",
            error.message
        );
        assert_eq!(o.result.stdout, "", "{what}: the script ran");
        assert!(!a_lease_names(&req.run_id), "{what}: the lease is left");
    }
}
