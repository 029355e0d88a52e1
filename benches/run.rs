//! `cargo bench --bench run`: what a sandboxed run costs, against baselines measured in the same
//! run. Needs root and bubblewrap (like `band run` on the host target); otherwise it says why and
//! exits 0. (Under `cargo test` it is a smoke run of 2 iterations per row.)
//!
//! Rows, each `BAND_BENCH_ITERS` runs (default 30) after one warm-up, of a no-op script:
//! - `bare script`: `sh noop.sh`, no sandbox;
//! - `bare bwrap`: `bwrap --unshare-all` with `/usr` read-only, a private `/proc`, `/dev`, `/tmp`,
//!   running the same script (the floor for any bubblewrap sandbox);
//! - `band-server setup + teardown`: from the `metrics` of each direct band-server run's result:
//!   request checks, uid lease, cgroup, run dir, wrappers before the spawn; removal after;
//! - `band-server run phase`: also from the metrics: bubblewrap's start, the jail, the script;
//! - `band-server, whole request`: start `band-server run`, send the request, read the result;
//! - `band run`: the whole `band run <skill>/noop --json` (client checks, band-server, output).
//!
//! band-server and its helpers are taken from next to the `band` binary (target/release), built
//! first with `cargo build --release -p band-server` so they are never stale. State goes to
//! `$BAND_SERVER_STATE_DIR` when set (set it to the test suite's `/run/band-test` when tests run
//! at the same time: one uid pool per machine; the smoke run always shares it), else
//! band-server's default. `band run` gets a throwaway ledger and no user config.

// A benchmark harness: a broken fixture or a failed measurement is a panic, as in tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;

use band::proto::{self, FileEntry, Message, RunRequest, RunResult, Status};
use common::{Stats, env_usize, measure, ms, ratio};

const BWRAP: &str = "/usr/bin/bwrap";
/// band-server's state directory override, and the one the test suite uses.
const STATE_DIR_ENV: &str = "BAND_SERVER_STATE_DIR";
const TEST_STATE_DIR: &str = "/run/band-test";
const SCRIPT: &str = "#!/bin/sh\nexit 0\n";

fn why_not() -> Option<String> {
    let status = fs_err::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2));
    if euid != Some("0") {
        return Some(
            "it needs root (band-server builds the sandbox as root); run it as root".into(),
        );
    }
    if !Path::new(BWRAP).is_file() {
        return Some(format!(
            "bubblewrap is not installed ({BWRAP}): apt-get install bubblewrap"
        ));
    }
    None
}

fn main() {
    if let Some(why) = why_not() {
        println!("band run bench skipped: {why}");
        return;
    }
    let full = common::bench_mode();
    let iters = env_usize("BAND_BENCH_ITERS", if full { 30 } else { 2 }).max(2);
    let band_bin = PathBuf::from(env!("CARGO_BIN_EXE_band"));
    // Under `cargo test` (a smoke run), band-server is the one the workspace build put next to
    // band; cargo must not be started from inside cargo test.
    let server = if full {
        build_server(&band_bin)
    } else {
        band_bin.with_file_name("band-server")
    };
    if !server.is_file() {
        println!(
            "band run bench skipped: {} is not built (cargo build --workspace)",
            server.display()
        );
        return;
    }
    // The smoke run shares the test suite's state directory (one uid pool per machine).
    let state_dir: Option<std::ffi::OsString> =
        std::env::var_os(STATE_DIR_ENV).or_else(|| (!full).then(|| TEST_STATE_DIR.into()));

    let tmp = tempfile::Builder::new()
        .prefix("band-bench-run")
        .tempdir()
        .expect("temp dir");
    let skill = tmp.path().join("noop");
    write_skill(&skill);
    let workspace = tmp.path().join("workspace");
    fs_err::create_dir(&workspace).expect("mkdir workspace");
    let script = skill.join("scripts/noop.sh");

    println!("band run bench: a no-op script, {iters} iterations per row");
    if !full {
        println!(
            "(a smoke run under cargo test: a debug build, so the figures mean nothing; use cargo bench)"
        );
    }

    let bare = measure(iters, || {
        let st = Command::new("sh").arg(&script).status().expect("sh");
        assert!(st.success());
    });
    let bwrap = measure(iters, || {
        let st = Command::new(BWRAP)
            .args(bare_bwrap_args(&script))
            .status()
            .expect("bwrap");
        assert!(st.success(), "bare bwrap failed");
    });

    // band-server directly: the request the client would send.
    let request = build_request(&skill);
    let mut server_metrics: Vec<Duration> = Vec::new();
    let mut run_metrics: Vec<Duration> = Vec::new();
    let server_whole = measure(iters, || {
        let r = serve_once(&server, &request, state_dir.as_deref());
        assert_eq!(r.status, Status::Ok, "band-server run failed: {r:?}");
        server_metrics.push(Duration::from_millis(
            r.metrics.setup_ms + r.metrics.teardown_ms,
        ));
        run_metrics.push(Duration::from_millis(r.metrics.run_ms));
    });
    // The warm-up run is in the metrics too; drop it.
    let setup_teardown = Stats::of(server_metrics.split_off(1));
    let run_part = Stats::of(run_metrics.split_off(1));

    let band_run = measure(iters, || {
        let out = Command::new(&band_bin)
            .arg("run")
            .arg(format!("{}/noop", skill.display()))
            .arg("--json")
            .arg("--workspace")
            .arg(&workspace)
            .env(proto::env::SERVER, &server)
            // The bench's runs go to a throwaway ledger, not the user's.
            .env(proto::env::DATA_DIR, tmp.path().join("data"))
            .env("BAND_CONFIG", tmp.path().join("no-config.toml"))
            .envs(state_dir.iter().map(|d| (STATE_DIR_ENV, d)))
            .stdin(Stdio::null())
            .output()
            .expect("band run");
        assert!(
            out.status.success(),
            "band run failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    });

    let rows: [(&str, Stats); 6] = [
        ("bare script (`sh noop.sh`)", bare),
        ("bare `bwrap --unshare-all` of it", bwrap),
        (
            "band-server setup + teardown (result metrics)",
            setup_teardown,
        ),
        (
            "band-server run phase: bwrap, jail, script (result metrics)",
            run_part,
        ),
        ("band-server, whole request (spawn → result)", server_whole),
        ("`band run noop/noop --json`, whole", band_run),
    ];
    println!();
    println!("| row | p50 | p95 | p50 / bare bwrap | p50 − bare script | CPU per run |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (name, s) in &rows {
        let over = s.p50.as_secs_f64() - bare.p50.as_secs_f64();
        println!(
            "| {name} | {} | {} | {:.2}× | {:+.1} ms | {} |",
            ms(s.p50),
            ms(s.p95),
            ratio(s.p50, bwrap.p50),
            over * 1000.0,
            s.cpu_text()
        );
    }
    println!();
    println!("metrics are whole milliseconds (band-server reports ms), so that row is ±1 ms.");
    let st_ratio = ratio(setup_teardown.p50, bwrap.p50);
    println!(
        "target: band-server setup + teardown under 2× bare bwrap: {} ({st_ratio:.2}×)",
        if st_ratio < 2.0 { "met" } else { "MISSED" }
    );
    let over = band_run.p50.saturating_sub(bare.p50);
    println!(
        "target: whole band run under 50 ms over the bare script: {} ({} over)",
        if over < Duration::from_millis(50) {
            "met"
        } else {
            "MISSED"
        },
        ms(over)
    );
    println!("machine: {}", common::machine());
}

/// Build band-server, band-jail and band-shim next to `band` and return band-server's path.
fn build_server(band_bin: &Path) -> PathBuf {
    let dir = band_bin.parent().expect("band's directory");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let t = Instant::now();
    let st = Command::new(cargo)
        .args([
            "build",
            "--release",
            "--quiet",
            "-p",
            "band-server",
            "--bins",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("cargo build -p band-server");
    assert!(st.success(), "cargo build --release -p band-server failed");
    let server = dir.join("band-server");
    assert!(server.is_file(), "{} was not built", server.display());
    eprintln!("band-server built in {}", ms(t.elapsed()));
    server
}

fn write_file(path: &Path, text: &str, mode: u32) {
    fs_err::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs_err::write(path, text).expect("write");
    fs_err::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn write_skill(root: &Path) {
    write_file(
        &root.join("BAND.md"),
        "---\nband: noop\ndescription: Does nothing, for the run benchmark.\n---\n",
        0o644,
    );
    write_file(
        &root.join("SKILL.md"),
        "---\nname: noop\ndescription: Does nothing.\n---\n",
        0o644,
    );
    write_file(&root.join("scripts/noop.sh"), SCRIPT, 0o755);
    write_file(
        &root.join("schemas/input/noop.json"),
        r#"{"type": "object", "properties": {}}"#,
        0o644,
    );
}

fn bare_bwrap_args(script: &Path) -> Vec<String> {
    let mut a: Vec<String> = [
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--ro-bind",
        "/usr",
        "/usr",
        "--symlink",
        "usr/bin",
        "/bin",
        "--symlink",
        "usr/lib",
        "/lib",
        "--symlink",
        "usr/lib64",
        "/lib64",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        "--ro-bind",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.push(script.display().to_string());
    a.extend(["/noop.sh", "--chdir", "/", "sh", "/noop.sh"].map(String::from));
    a
}

/// The request `band run` would send for the no-op script (fresh run id per call).
fn build_request(skill: &Path) -> RunRequest {
    let (s, _) = band::skill::load_skill(skill);
    let (resolved, diags) = band::skill::resolve_script(&s, "noop");
    let resolved =
        resolved.unwrap_or_else(|| panic!("the bench skill does not resolve: {diags:?}"));
    let mut raw: Vec<(String, u32, Vec<u8>)> = Vec::new();
    for rel in [
        "BAND.md",
        "SKILL.md",
        "schemas/input/noop.json",
        "scripts/noop.sh",
    ] {
        let p = skill.join(rel);
        let mode = fs_err::metadata(&p).expect("stat").permissions().mode() & 0o7777;
        raw.push((rel.to_string(), mode, fs_err::read(&p).expect("read")));
    }
    RunRequest {
        protocol: proto::PROTOCOL_VERSION,
        run_id: String::new(),
        skill: "noop".into(),
        script: "noop".into(),
        entry: "scripts/noop.sh".into(),
        bundle_sha256: proto::bundle_digest(&raw),
        bundle: raw
            .iter()
            .map(|(p, m, d)| FileEntry {
                path: p.clone(),
                mode: *m,
                data: B64.encode(d),
            })
            .collect(),
        policy: resolved.policy,
        input: serde_json::json!({}),
        config: None,
        secrets: BTreeMap::new(),
        workspace: Vec::new(),
        trace: false,
        observe: false,
    }
}

fn run_id() -> String {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos() as u64;
    format!("{:016x}", n ^ (u64::from(std::process::id()) << 40))
}

/// One `band-server run`: send the request, read lines until the result.
fn serve_once(
    server: &Path,
    request: &RunRequest,
    state_dir: Option<&std::ffi::OsStr>,
) -> RunResult {
    let mut req = request.clone();
    req.run_id = run_id();
    let mut child = Command::new(server)
        .arg("run")
        .envs(state_dir.iter().map(|d| (STATE_DIR_ENV, d)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("band-server");
    {
        let mut stdin = child.stdin.take().expect("stdin");
        let line = serde_json::to_string(&Message::Request(Box::new(req))).expect("json");
        stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.write_all(b"\n"))
            .expect("send request");
    }
    let mut result = None;
    for line in BufReader::new(child.stdout.take().expect("stdout")).lines() {
        if let Ok(Message::Result(r)) = serde_json::from_str::<Message>(&line.expect("read")) {
            result = Some(*r);
        }
    }
    child.wait().expect("wait");
    result.expect("band-server sent no result")
}
