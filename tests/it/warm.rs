//! The host target's warm band-server (user config `warm = true`, issue 17): runs after the
//! first are served by a forked child of `band-server serve --host`, which stands aside for
//! another build of band-server.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{bin, skip, write_script};

const HOST_DIR: &str = "/run/band-serve/host";

/// A skill whose script reports, from inside the sandbox, who it runs as and what it may do.
fn probe_skill(root: &Path) -> PathBuf {
    let s = root.join("warmprobe");
    fs_err::create_dir_all(s.join("scripts")).expect("mkdir");
    fs_err::write(
        s.join("SKILL.md"),
        "---\nname: warmprobe\ndescription: Probes the sandbox.\n---\n\nUsed by the warm server test.\n",
    )
    .expect("write");
    fs_err::write(
        s.join("BAND.md"),
        "---\nband: warmprobe\ndescription: Reads nothing, writes nothing, runs nothing.\n---\n",
    )
    .expect("write");
    write_script(
        &s.join("scripts/probe.sh"),
        r#"#!/bin/bash
field() { while read -r k v; do [ "$k" = "$1:" ] && { echo "${v%%[[:space:]]*}"; return; }; done < /proc/self/status; }
if cat /etc/shadow >/dev/null 2>&1; then shadow=readable; else shadow=denied; fi
if (exec 3<>/dev/tcp/127.0.0.1/9) 2>/dev/null; then net=open; else net=closed; fi
if echo x > /usr/bin/warm-probe 2>/dev/null; then usr=writable; else usr=read-only; fi
printf '{"uid":%s,"nnp":"%s","seccomp":"%s","capeff":"%s","shadow":"%s","net":"%s","usr":"%s"}\n' \
  "$(field Uid)" "$(field NoNewPrivs)" "$(field Seccomp)" "$(field CapEff)" "$shadow" "$net" "$usr" > "$OUTPUT_PATH"
"#,
    );
    s
}

/// The warm server's pid, from its pid file.
fn server_pid() -> Option<i32> {
    fs_err::read_to_string(Path::new(HOST_DIR).join("serve.pid"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn alive(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Wait until `ok`, or fail with `what` after 20 s.
fn wait_for(what: &str, ok: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The sockets the host's warm servers listen on.
fn sockets() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs_err::read_dir(HOST_DIR)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("server-"))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Stops the warm server this test started, whatever the test's end.
struct StopServer;

impl Drop for StopServer {
    fn drop(&mut self) {
        if let Some(pid) = server_pid() {
            let _ = std::process::Command::new("kill")
                .arg(pid.to_string())
                .status();
        }
    }
}

#[test]
fn privileged_a_warm_server_serves_the_next_runs_and_stands_aside_for_another_build() {
    if skip("privileged_a_warm_server_serves_the_next_runs_and_stands_aside_for_another_build") {
        return;
    }
    let _stop = StopServer;
    // No warm server of an earlier run of this test.
    if let Some(pid) = server_pid().filter(|p| alive(*p)) {
        let _ = std::process::Command::new("kill")
            .arg(pid.to_string())
            .status();
        wait_for("the earlier warm server to exit", || !alive(pid));
    }
    let t = tempfile::tempdir().expect("tempdir");
    let band = bin();
    // band-server and its helpers copied: the test installs another build over it later.
    let bins = t.path().join("bin");
    fs_err::create_dir_all(&bins).expect("mkdir");
    for b in ["band-server", "band-jail", "band-shim"] {
        fs_err::copy(band.bin_dir().join(b), bins.join(b)).expect("copy");
    }
    let server = bins.join("band-server");
    let config = t.path().join("config.toml");
    fs_err::write(&config, "warm = true\n").expect("write");
    let band = band.env("BAND_SERVER", &server).env("BAND_CONFIG", &config);
    let skill = probe_skill(t.path());
    let work = t.path().join("work");
    fs_err::create_dir_all(&work).expect("mkdir");
    let log = Path::new(HOST_DIR).join("serve.log");
    let run = || {
        let (code, out, err) = band.run(
            &["run", "--json", &format!("{}/probe", skill.display())],
            &work,
        );
        assert_eq!(code, 0, "{out}{err}");
        let v: Value = serde_json::from_str(&out).expect("json");
        let id = v["run_id"].as_str().expect("run_id").to_string();
        (id, v["output"].clone())
    };
    // A warm child logs its run once the run is removed, after band has its result: the log is
    // read once the warm server (if any) has no child left.
    let served_warm = |id: &str| {
        if let Some(pid) = server_pid().filter(|p| alive(*p)) {
            let children = format!("/proc/{pid}/task/{pid}/children");
            wait_for("the warm server's children to end", || {
                fs_err::read_to_string(&children).map_or(true, |c| c.trim().is_empty())
            });
        }
        fs_err::read_to_string(&log)
            .unwrap_or_default()
            .contains(&format!("run {id} served by the warm server"))
    };
    let before = sockets();

    // The first run has no warm server: band-server of its own, then one is started.
    let (first, cold) = run();
    assert!(!served_warm(&first));
    wait_for("a warm server's socket", || {
        sockets().iter().any(|s| !before.contains(s))
    });
    wait_for("the warm server's pid file", || {
        server_pid().is_some_and(alive)
    });
    let pid = server_pid().expect("the warm server's pid file");

    // The next runs go to it, and the sandbox is the same one seen from inside.
    for _ in 0..2 {
        let (id, warm) = run();
        assert!(served_warm(&id), "run {id} was not served warm");
        assert_eq!(warm, cold, "the sandbox differs when served warm");
    }
    assert_eq!(cold["nnp"], "1", "{cold}");
    assert_eq!(cold["seccomp"], "2", "{cold}");
    assert_eq!(cold["capeff"], "0000000000000000", "{cold}");
    assert_ne!(cold["uid"], 0, "{cold}");
    assert_eq!(
        (&cold["shadow"], &cold["net"], &cold["usr"]),
        (
            &Value::from("denied"),
            &Value::from("closed"),
            &Value::from("read-only")
        )
    );

    // Another build installed over band-server: the warm server notices and exits by itself
    // (its socket goes with it), the next run is served by a band-server of its own, and a
    // warm server of the new build starts.
    let old_socket = sockets()
        .into_iter()
        .find(|s| !before.contains(s))
        .expect("the warm server's socket");
    let next = bins.join("band-server.next");
    fs_err::copy(&server, &next).expect("copy");
    fs_err::rename(&next, &server).expect("install");
    wait_for("the old warm server to exit", || !alive(pid));
    assert!(!old_socket.exists(), "the old build's socket is left");
    let (id, out) = run();
    assert!(!served_warm(&id), "the old build served run {id}");
    assert_eq!(out, cold);
    wait_for("a warm server of the new build", || {
        server_pid().is_some_and(|p| p != pid && alive(p))
    });
    let (id, _) = run();
    assert!(
        served_warm(&id),
        "the new build's server did not serve run {id}"
    );

    // Without `warm = true`, a running warm server is not used.
    let cold_band = band.clone().env("BAND_CONFIG", t.path().join("none.toml"));
    let (code, out, err) = cold_band.run(
        &["run", "--json", &format!("{}/probe", skill.display())],
        &work,
    );
    assert_eq!(code, 0, "{out}{err}");
    let v: Value = serde_json::from_str(&out).expect("json");
    let id = v["run_id"].as_str().expect("run_id");
    assert!(!served_warm(id), "a run without `warm` was served warm");

    // A warm server without runs exits after its idle time, and its socket goes with it.
    let running = server_pid().expect("the warm server's pid");
    let _ = std::process::Command::new("kill")
        .arg(running.to_string())
        .status();
    wait_for("the warm server to stop", || !alive(running));
    let digest = band::warm::digest_here(&server).expect("digest");
    let socket = band::warm::socket(Path::new(HOST_DIR), &digest);
    let mut idle = std::process::Command::new(&server)
        .args(["serve", &digest, "--host", "--idle", "1"])
        .spawn()
        .expect("band-server serve");
    wait_for("the idle server's socket", || socket.exists());
    let started = Instant::now();
    let status = idle.wait().expect("wait");
    assert!(status.success(), "{status}");
    assert!(started.elapsed() >= Duration::from_millis(500));
    assert!(!socket.exists(), "the idle server left its socket");
}
