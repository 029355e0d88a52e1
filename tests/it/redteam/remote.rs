//! Red-team round 5: a skill that names another machine as its target. `execution.target:
//! sandboxd://HOST:PORT` (or `ssh://…`) in a hostile band sent the run (the workspace's files, the
//! input, the secrets) and the user's sandboxd token to an address of the author's choosing. A
//! band no longer chooses another machine: `band run`, `band mcp` and `band explain` refuse it
//! unless the user's flag or config does, and nothing connects there.

use std::io::{BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::common::{band_exe, bin};
use crate::mcp::rpc_with;
use crate::targets::text_with_target;

/// A token file with `mode`, in `dir`.
fn token_file(dir: &Path, mode: u32) -> std::path::PathBuf {
    let token = dir.join("pod-token");
    fs_err::write(&token, "band-it-token-0123456789\n").expect("write");
    fs_err::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(mode))
        .expect("chmod");
    token
}

/// `band run --target <target>` of text/count.
fn run_on(target: &str) -> [&str; 7] {
    [
        "run",
        "--target",
        target,
        "--skills",
        "skills",
        "text/count",
        "--text=hi",
    ]
}

/// No connection reached `listener` (it is non-blocking).
fn assert_never_connected(listener: &TcpListener) {
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        Ok((_, peer)) => panic!("band connected to the band's target from {peer}"),
        Err(e) => panic!("accept: {e}"),
    }
}

#[test]
fn a_band_that_names_another_machine_sends_nothing_there() {
    let t = tempfile::tempdir().expect("tmp");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let target = format!("sandboxd://{}", listener.local_addr().expect("addr"));
    text_with_target(t.path(), &target);
    let token = token_file(t.path(), 0o600);
    let config = t.path().join("config.toml");
    fs_err::write(&config, "target = \"host\"\n").expect("write");
    let band = bin()
        .env("BAND_SANDBOXD_TOKEN_FILE", &token)
        .env("BAND_CONFIG", &config);

    // band run: refused before anything is sent, with what to do.
    let (code, out, err) = band.run(
        &["run", "--skills", "skills", "text/count", "--text=hi"],
        t.path(),
    );
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains(&format!(
            "the band's execution.target {target} is another machine"
        )) && err.contains("--target"),
        "{err}"
    );
    assert_never_connected(&listener);

    // band explain: the policy is shown, the target refused and why.
    let (code, out, err) = band.run(
        &["explain", "--json", "--skills", "skills", "text/count"],
        t.path(),
    );
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v[0]["run_target"]["target"], Value::Null, "{v}");
    assert!(
        v[0]["run_target"]["refused"]
            .as_str()
            .is_some_and(|r| r.contains("is another machine")),
        "{v}"
    );

    // band lint: a warning that the user chooses it.
    let (_, out, err) = band.run(&["lint", "skills/text"], t.path());
    assert!(format!("{out}{err}").contains("F015"), "{out}{err}");

    // band mcp: the tool call is an error result, and nothing connects either.
    let mut cmd = Command::new(band_exe());
    cmd.args(["mcp", "--skills"])
        .arg(t.path().join("skills"))
        .arg("--workspace")
        .arg(t.path())
        .current_dir(t.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    band.apply(&mut cmd);
    let mut child = cmd.spawn().expect("band mcp");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let init = rpc_with(
        &mut stdin,
        &mut stdout,
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "band-tests", "version": "0"}}),
    );
    assert!(init["result"].is_object(), "{init}");
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .expect("write");
    let call = rpc_with(
        &mut stdin,
        &mut stdout,
        2,
        "tools/call",
        json!({"name": "text__count", "arguments": {"text": "hi"}}),
    );
    assert_eq!(call["result"]["isError"], true, "{call}");
    assert!(call.to_string().contains("is another machine"), "{call}");
    drop(stdin);
    let _ = child.wait();
    assert_never_connected(&listener);
}

/// A sandboxd endpoint (the user's own `--target`) that takes the connection and never answers:
/// one SIGTERM ends `band run` as a cancelled run (before, band waited on the endpoint and only a
/// second signal ended it).
#[test]
fn one_signal_ends_a_run_whose_endpoint_never_answers() {
    let t = tempfile::tempdir().expect("tmp");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let target = format!("sandboxd://{}", listener.local_addr().expect("addr"));
    text_with_target(t.path(), "host");
    let token = token_file(t.path(), 0o600);
    let band = bin().env("BAND_SANDBOXD_TOKEN_FILE", &token);
    let mut cmd = band.command(&run_on(&target), t.path());
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("band run");
    // The endpoint: a connection taken and held, never a word back.
    let (held, _) = listener.accept().expect("band connects to its --target");
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let out = child.wait_with_output().expect("wait");
    drop(held);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("cancelled"), "{err}");
}

/// A sandboxd token file other users can read is refused before anything connects, with the fix.
#[test]
fn a_token_file_others_can_read_is_refused() {
    let t = tempfile::tempdir().expect("tmp");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let target = format!("sandboxd://{}", listener.local_addr().expect("addr"));
    text_with_target(t.path(), "host");
    let token = token_file(t.path(), 0o644);
    let (code, out, err) = bin()
        .env("BAND_SANDBOXD_TOKEN_FILE", &token)
        .run(&run_on(&target), t.path());
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("the token file can be read by other users (mode 644)")
            && err.contains("chmod 600"),
        "{err}"
    );
    assert_never_connected(&listener);
}
