//! A run does not outlive its client (issue 13, item 5). A script that never ends on its own,
//! saying `tick uid=N` on stderr and writing a marker every 100 ms; then `band` is interrupted
//! (SIGINT), killed outright (its pipe to band-server closes), its stdout is closed, or an MCP
//! client (the Python SDK) cancels the call or disconnects, over stdio or over HTTP. Each time no
//! process of the run is left, its cgroup and run folder are gone, and — when band lived to
//! record it — the ledger says `cancelled`. Its band allows 30 minutes, far past [`band_test::WAIT_LIMIT`]: a run that is gone
//! was stopped because its client went away, not by its limit.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use band_test::Band;
use serde_json::Value;

use crate::common::{band_exe, sandbox_missing};
use crate::mcp::{has_mcp_sdk, python};

/// The skill `probe/sleepy` in `dir`: a tick every 100 ms, until it is stopped (its band allows
/// 30 minutes).
pub(crate) fn sleepy_skill(dir: &Path, b: &Band) {
    assert_eq!(b.run(&["init", "probe", "--script", "sleepy"], dir).0, 0);
    let band_md = dir.join("probe/BAND.md");
    let text = fs_err::read_to_string(&band_md).unwrap();
    let text = text
        .replace(
            r#"cli: ["jq -r .name /band/io/input.json"]"#,
            r#"cli: ["sleep 0.1"]"#,
        )
        .replace("maxRuntimeMs: 10s", "maxRuntimeMs: 30m");
    assert!(text.contains("sleep 0.1") && text.contains("30m"), "{text}");
    fs_err::write(&band_md, text).unwrap();
    fs_err::write(
        dir.join("probe/scripts/sleepy.sh"),
        r#"#!/bin/sh
while read -r k v rest; do [ "$k" = Uid: ] && uid=$v; done < /proc/self/status
i=0
while :; do
  echo "tick $i" >> /tmp/marker
  echo "tick uid=$uid" >&2
  sleep 0.1
  i=$((i+1))
done
"#,
    )
    .unwrap();
}

fn band_for(t: &Path) -> Band {
    Band::new(band_exe(), t.join("data"))
}

/// A `probe/sleepy` skill in a fresh folder, and `band run` of it started and ticking.
fn start_sleepy_run(stdout: Stdio) -> (tempfile::TempDir, Band, Child, u32) {
    let t = tempfile::tempdir().unwrap();
    let b = band_for(t.path());
    sleepy_skill(t.path(), &b);
    let (child, uid) = start_ticking(
        &b,
        &["run", "--skills", ".", "probe/sleepy", "--name=x"],
        t.path(),
        stdout,
    );
    (t, b, child, uid)
}

/// Start `band <args>` in `dir` with stderr piped; return it once the script has ticked, with
/// the run's uid.
pub(crate) fn start_ticking(b: &Band, args: &[&str], dir: &Path, stdout: Stdio) -> (Child, u32) {
    let mut child = b
        .command(args, dir)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let uid = loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("band ended before the script ticked"))
            .unwrap();
        if let Some(u) = line.strip_prefix("tick uid=") {
            break u.trim().parse::<u32>().unwrap();
        }
    };
    // Keep draining stderr, so band never blocks on it.
    std::thread::spawn(move || for _ in lines {});
    (child, uid)
}

pub(crate) fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

/// The ledger's records of probe/sleepy (newest last).
pub(crate) fn records(b: &Band, dir: &Path) -> Vec<Value> {
    let (_, out, _) = b.run(&["history", "--json"], dir);
    let v: Value = serde_json::from_str(&out).unwrap_or(Value::Array(vec![]));
    v.as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r["skill"] == "probe" && r["script"] == "sleepy")
        .collect()
}

/// What is left of a run: its live processes (by cgroup, or of its uid naming it), its cgroups,
/// its run folder. Without its run id, its processes are the sandboxed ones of its uid started
/// within `window` (from a [`marker`] taken before the run started to one taken while it held the
/// uid: any band-server may lease the uid for another run as soon as a run's has freed it).
pub(crate) fn leftovers(
    run_id: Option<&str>,
    uid: u32,
    window: std::ops::Range<u64>,
) -> Vec<String> {
    let mut left = Vec::new();
    for e in fs_err::read_dir("/proc").unwrap().flatten() {
        let p = e.path();
        let Ok(status) = fs_err::read_to_string(p.join("status")) else {
            continue;
        };
        let field = |k: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(k))
                .map(|v| v.split_whitespace().next().unwrap_or("").to_string())
        };
        if field("State:").as_deref() == Some("Z") {
            continue; // exited; nothing runs
        }
        let cgroup = fs_err::read_to_string(p.join("cgroup")).unwrap_or_default();
        let cmdline = fs_err::read(p.join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let of_uid = field("Uid:") == Some(uid.to_string());
        let names_run = run_id.is_some_and(|id| cgroup.contains(id) || cmdline.contains(id));
        // Without a run id (band was killed before it could record), a sandboxed process of the
        // run's pool uid counts.
        let sandboxed = cmdline.contains("/band/jail")
            || cmdline.contains("/skill/scripts/")
            || cgroup.contains("/band/");
        let in_window = || {
            let pid = e.file_name().to_str().and_then(|n| n.parse().ok());
            pid.and_then(start_time)
                .is_some_and(|t| window.contains(&t))
        };
        if names_run || (run_id.is_none() && of_uid && sandboxed && in_window()) {
            left.push(format!("process {}: {cmdline}", p.display()));
        }
    }
    if let Some(id) = run_id {
        for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
            .into_iter()
            .map(String::from)
            .chain(
                fs_err::read_dir("/sys/fs/cgroup")
                    .map(|d| {
                        d.flatten()
                            .map(|e| e.path().display().to_string())
                            .collect::<Vec<_>>()
                    })
                    .unwrap_or_default(),
            )
        {
            let cg = Path::new(&root).join("band").join(id);
            if cg.exists() {
                left.push(format!("cgroup {}", cg.display()));
            }
        }
        let dir = Path::new(band_test::STATE_DIR).join("runs").join(id);
        if dir.exists() {
            left.push(format!("run folder {}", dir.display()));
        }
    }
    left
}

/// When `pid` started, in clock ticks since boot (`/proc/<pid>/stat`, field 22).
fn start_time(pid: i32) -> Option<u64> {
    let stat = fs_err::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces): state is field 3.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// The start time of a process started now: every process with an earlier [`start_time`]
/// started before this call.
fn marker() -> u64 {
    let mut m = Command::new("sleep").arg("1000").spawn().unwrap();
    let t = start_time(m.id() as i32).unwrap();
    let _ = m.kill();
    let _ = m.wait();
    t
}

/// Wait for a `cancelled` record and nothing left of the run ([`band_test::wait_until`]); fail at
/// once if the run is recorded as anything else.
fn assert_cancelled_and_gone(b: &Band, dir: &Path, uid: u32) -> Value {
    let mut found = Value::Null;
    band_test::wait_until("a `cancelled` record and nothing left of the run", || {
        let recs = records(b, dir);
        let Some(r) = recs.last() else { return false };
        assert_eq!(r["status"], "cancelled", "records {recs:#?}");
        let left = leftovers(r["run_id"].as_str(), uid, 0..u64::MAX);
        if !left.is_empty() {
            return false;
        }
        found = r.clone();
        true
    });
    found
}

#[test]
fn privileged_ctrl_c_cancels_the_run_and_records_it() {
    band_test::privileged!(sandbox_missing());
    let (t, b, mut child, uid) = start_sleepy_run(Stdio::null());
    signal(child.id(), "-INT");
    let rec = assert_cancelled_and_gone(&b, t.path(), uid);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{rec:#}");
    assert_eq!(rec["exit_code"], 130);
}

/// Under a pseudo-terminal: wait for a tick, type Ctrl-C, print what band wrote after it and how
/// it exited (`exit N`).
const CTRL_C_AT_A_TERMINAL: &str = r#"
import os, pty, select, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
seen, end = b"", time.time() + 60
while b"tick uid=" not in seen and time.time() < end:
    if select.select([fd], [], [], 0.5)[0]:
        seen += os.read(fd, 4096)
os.write(fd, b"\x03")
after = b""
while True:
    try:
        if select.select([fd], [], [], 0.5)[0]:
            d = os.read(fd, 4096)
            if not d:
                break
            after += d
    except OSError:
        break
_, st = os.waitpid(pid, 0)
uid = seen.split(b"tick uid=")[1].split()[0].decode()
sys.stdout.write("uid %s\nexit %d\n" % (uid, os.waitstatus_to_exitcode(st)))
sys.stdout.write(after.decode("utf-8", "replace"))
"#;

#[test]
fn privileged_ctrl_c_at_a_terminal_prints_one_line_and_records() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().unwrap();
    let b = band_for(t.path());
    sleepy_skill(t.path(), &b);
    let mut cmd = Command::new("python3");
    cmd.args(["-c", CTRL_C_AT_A_TERMINAL, band_exe()])
        .args(["run", "--skills", ".", "probe/sleepy", "--name=x"])
        .current_dir(t.path());
    b.apply(&mut cmd);
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let uid: u32 = text
        .lines()
        .find_map(|l| l.strip_prefix("uid "))
        .and_then(|u| u.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!(text.contains("\nexit 130\n"), "{text:?}");
    // The spinner cleared, then one line.
    let said: Vec<&str> = text
        .split(['\r', '\n'])
        .map(|l| l.trim_start_matches("\x1b[2K")) // the spinner's line clearing
        .filter(|l| l.starts_with("band:"))
        .collect();
    assert_eq!(
        said,
        [
            "band: cancelled: the run was cancelled (interrupted, or its client went away) and was killed"
        ],
        "{text:?}"
    );
    assert_cancelled_and_gone(&b, t.path(), uid);
}

#[test]
fn privileged_sigterm_cancels_the_run_and_records_it() {
    band_test::privileged!(sandbox_missing());
    let (t, b, child, uid) = start_sleepy_run(Stdio::piped());
    signal(child.id(), "-TERM");
    assert_cancelled_and_gone(&b, t.path(), uid);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "", "no output");
}

#[test]
fn privileged_a_killed_band_does_not_leave_its_run_behind() {
    band_test::privileged!(sandbox_missing());
    let from = marker();
    let (_t, _b, mut child, uid) = start_sleepy_run(Stdio::null());
    // The run is ticking, so it holds the uid: its processes started from `from` to this.
    let window = from..marker();
    // SIGKILL: band cannot record anything, but its pipe to band-server closes.
    signal(child.id(), "-KILL");
    let _ = child.wait();
    let mut left = Vec::new();
    band_test::wait_until("nothing left of the run", || {
        left = leftovers(None, uid, window.clone());
        left.is_empty()
    });
    assert!(left.is_empty(), "left over: {left:#?}");
}

#[test]
fn privileged_a_closed_stdout_is_quiet() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().unwrap();
    let b = band_for(t.path());
    assert_eq!(b.run(&["init", "probe", "--script", "hi"], t.path()).0, 0);
    // `band run --json … | head -c1`, with the reader gone before band writes.
    let mut child = b
        .command(
            &["run", "--json", "--skills", ".", "probe/hi", "--name=x"],
            t.path(),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("panicked") && !stderr.contains("backtrace"),
        "{stderr}"
    );
    // The run's own exit code (it succeeded), not a panic's 101.
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

/// `band mcp` under the Python SDK client `tests/mcp/cancel.py` in `mode`: returns the client,
/// still running (`cancel`) or gone (`disconnect`), and the run's uid.
fn mcp_client(t: &Path, mode: &str) -> (Child, u32) {
    let mut cmd = Command::new(python());
    cmd.arg(crate::common::repo().join("tests/mcp/cancel.py"))
        .arg(band_exe())
        .args([mode, "probe__sleepy", r#"{"name": "x"}"#, "--"])
        .args(["mcp", "--skills"])
        .arg(t)
        .arg("--workspace")
        .arg(t);
    started_client(cmd, t)
}

/// The client of [`mcp_client`], started; returns it with the run's uid once it said it.
fn started_client(mut cmd: Command, t: &Path) -> (Child, u32) {
    let mut child = cmd
        .env("BAND_SERVER_STATE_DIR", band_test::STATE_DIR)
        .env("BAND_CONFIG", band_test::NO_CONFIG)
        // No warm server: a test's own would send away the one warm.rs and load.rs hold.
        .env("BAND_WARM", "0")
        .env("BAND_DATA_DIR", t.join("data"))
        .env_remove("BAND_SKILLS_PATH")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let uid = line
        .split("uid=")
        .nth(1)
        .and_then(|u| u.trim().parse().ok())
        .unwrap_or_else(|| panic!("the client said `{line}`"));
    (child, uid)
}

/// Is the MCP Python SDK there? Else say so, and fail under `BAND_TEST_MUST_RUN=1`.
fn mcp_ready() -> bool {
    if !has_mcp_sdk() {
        assert_ne!(
            std::env::var(band::proto::env::TEST_MUST_RUN).as_deref(),
            Ok("1"),
            "{} has no `mcp` package and BAND_TEST_MUST_RUN is set",
            python()
        );
        eprintln!("skipped: {} has no `mcp` package", python());
        return false;
    }
    true
}

#[test]
fn privileged_mcp_cancelled_call_stops_the_run() {
    band_test::privileged!(sandbox_missing());
    if !mcp_ready() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let b = band_for(t.path());
    sleepy_skill(t.path(), &b);
    let (mut client, uid) = mcp_client(t.path(), "cancel");
    let rec = assert_cancelled_and_gone(&b, t.path(), uid);
    assert_eq!(rec["status"], "cancelled");
    let _ = client.kill();
    let _ = client.wait();
}

#[test]
fn privileged_mcp_client_that_disconnects_stops_the_run() {
    band_test::privileged!(sandbox_missing());
    if !mcp_ready() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let b = band_for(t.path());
    sleepy_skill(t.path(), &b);
    let (mut client, uid) = mcp_client(t.path(), "disconnect");
    let _ = client.wait();
    assert_cancelled_and_gone(&b, t.path(), uid);
}

/// Over HTTP (`band mcp --http`, which serves on): a client that disconnects (its process exits,
/// closing its connection) stops its run, seen from outside: recorded `cancelled`, no process,
/// cgroup or run folder left; the server still serves.
#[test]
fn privileged_mcp_http_client_that_disconnects_stops_the_run() {
    band_test::privileged!(sandbox_missing());
    if !mcp_ready() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let b = band_for(t.path());
    sleepy_skill(t.path(), &b);
    let served = crate::mcp_http::Served::start_with(&b, t.path(), t.path(), &[]);
    let url = format!("http://127.0.0.1:{}/mcp", served.port);
    let mut cmd = Command::new(python());
    cmd.arg(crate::common::repo().join("tests/mcp/cancel.py"))
        .args(["-", "disconnect", "probe__sleepy", r#"{"name": "x"}"#, "--"])
        .args(["--url", &url]);
    let (mut client, uid) = started_client(cmd, t.path());
    let _ = client.wait();
    assert_cancelled_and_gone(&b, t.path(), uid);
    // Another client is served, and its run too stops when it goes.
    let mut cmd = Command::new(python());
    cmd.arg(crate::common::repo().join("tests/mcp/cancel.py"))
        .args(["-", "disconnect", "probe__sleepy", r#"{"name": "x"}"#, "--"])
        .args(["--url", &url]);
    let (mut client, uid) = started_client(cmd, t.path());
    let _ = client.wait();
    band_test::wait_until("the second run recorded cancelled and gone", || {
        let recs = records(&b, t.path());
        let Some(r) = recs.get(1) else { return false };
        assert_eq!(r["status"], "cancelled", "{recs:#?}");
        leftovers(r["run_id"].as_str(), uid, 0..u64::MAX).is_empty()
    });
}
