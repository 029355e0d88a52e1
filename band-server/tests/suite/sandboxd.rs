//! band-sandboxd against the kubernetes-sigs agent-sandbox SDK's own client code
//! (`tests/sandboxd/sdk_test.py`, PyPI `k8s-agent-sandbox[grpc]` in `$BAND_TEST_PYTHON`):
//! a band-sandboxd on loopback ports, its runs real band-server runs (this host, root), every
//! network run's resolver a dead loopback port. The script checks the contract from the client's
//! side and probes isolation from inside the runs; this test checks that nothing of the runs is
//! left once they are done, and that band-sandboxd stops cleanly on SIGTERM.
#![allow(clippy::unwrap_used)]

use std::io::BufRead;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::helpers::{STATE_DIR, privileged, server};

const BAND: &str = "---
band: pod
description: the test pod's band
version: 1
allow:
  cli: [\"sh -c *\", \"cat *\", \"cat\", \"echo *\", \"ls *\", \"tr *\", \"grep *\", \"python3 -c *\"]
  read: [\"data/**\"]
  write: [\"out/**\"]
limit:
  maxRuntimeMs: 120s
---
";

const TOKEN: &str = "band-test-token-0123456789";

fn python() -> String {
    std::env::var("BAND_TEST_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Why the SDK cannot be used here, if it cannot.
fn sdk_missing() -> Option<String> {
    let ok = Command::new(python())
        .args([
            "-c",
            "import grpc, k8s_agent_sandbox.commands._process_stubs",
        ])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    (!ok).then(|| {
        format!(
            "{} has no k8s-agent-sandbox[grpc] (pip install 'k8s-agent-sandbox[grpc]'; set BAND_TEST_PYTHON)",
            python()
        )
    })
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The processes whose parent is `pid`.
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in fs_err::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = fs_err::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // After the command's `(name)`: state, then the parent's pid.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|s| s.parse::<u32>().ok());
        if ppid == Some(pid) {
            out.push(p);
        }
    }
    out
}

#[test]
fn privileged_sandboxd_serves_the_sdk_runs_isolated_and_leaves_nothing() {
    privileged!(band_test::sandbox_missing().or_else(sdk_missing));
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let (ws, outside) = (root.join("ws"), root.join("outside"));
    fs_err::create_dir_all(ws.join("data")).unwrap();
    fs_err::create_dir_all(ws.join("out")).unwrap();
    fs_err::create_dir_all(&outside).unwrap();
    fs_err::write(ws.join("data/in.txt"), "hello\n").unwrap();
    fs_err::write(ws.join("top.txt"), "not admitted\n").unwrap();
    fs_err::write(outside.join("outer.txt"), "outside\n").unwrap();
    fs_err::os::unix::fs::symlink(&outside, ws.join("data/link")).unwrap();
    fs_err::write(root.join("BAND.md"), BAND).unwrap();
    let token = root.join("token");
    fs_err::write(&token, format!("{TOKEN}\n")).unwrap();
    fs_err::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    // No real resolver: a dead loopback port.
    let cfg = root.join("server.toml");
    fs_err::write(&cfg, "dns_upstream = [\"127.0.0.1:9\"]\n").unwrap();

    let args: Vec<String> = [
        "--band",
        &root.join("BAND.md").display().to_string(),
        "--token-file",
        &token.display().to_string(),
        "--workspace",
        &ws.display().to_string(),
        "--grpc",
        "127.0.0.1:0",
        "--http",
        "127.0.0.1:0",
        "--server",
        server(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let opts = band_server::sandboxd::Options::parse(&args, server().into()).unwrap();
    let policy_sha256 = band_server::sandboxd::Pod::load(&opts)
        .unwrap()
        .policy_sha256;
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_band-sandboxd"))
        .args(&args)
        .env(band_server::config::CONFIG_ENV, &cfg)
        .env(band_server::config::STATE_DIR_ENV, STATE_DIR)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _watch = band_test::kill_after(
        &daemon,
        std::time::Duration::from_secs(600),
        "band-sandboxd",
    );
    let mut err = std::io::BufReader::new(daemon.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    // "band-sandboxd: serving … on grpc ADDR and http ADDR"
    let words: Vec<&str> = first.split_whitespace().collect();
    let after = |w: &str| {
        let i = words
            .iter()
            .position(|x| *x == w)
            .unwrap_or_else(|| panic!("{first}"));
        words[i + 1].to_string()
    };
    let (grpc, http) = (after("grpc"), after("http"));
    // The rest of its stderr (band-server's), shown with the test's.
    std::thread::spawn(move || {
        for line in err.lines().map_while(Result::ok) {
            eprintln!("band-sandboxd: {line}");
        }
    });

    let out = Command::new(python())
        .arg(repo().join("tests/sandboxd/sdk_test.py"))
        .args([&grpc, &http])
        .arg(&token)
        .arg(&ws)
        .arg(&outside)
        .arg(&policy_sha256)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    eprintln!("{said}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && said.ends_with("all ok\n"), "{said}");

    // Every run's band-server is gone (the killed client's too), and with it what it built.
    band_test::wait_until("band-sandboxd's runs to end", || {
        children(daemon.id()).is_empty()
    });
    // SIGTERM: the ports close and band-sandboxd exits 0.
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(daemon.id() as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let status = daemon.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(std::net::TcpStream::connect(&grpc).is_err());
}
