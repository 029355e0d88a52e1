//! Per-run cost through the QEMU VM against the host target, measured in the same run.
//!
//! ```sh
//! band setup --driver qemu                      # once
//! cargo bench --bench vm [-- RUNS]              # needs root (the host target) and the VM up
//! cargo test --bench vm -- --bench [RUNS]       # the same in a debug build
//! ```
//!
//! Prints medians of: a fresh SSH connection (TCP, key exchange, host key check, key auth) running
//! `true`, a channel on the warm master (`true`, and starting
//! band-server), band-server's own setup+run+teardown time, the wall time of `band run
//! text/count` on the host and through the VM, what lies outside band-server (wall minus
//! setup+run+teardown, per run), and the VM/host ratio. Without a
//! running VM it says so and exits 0 (numbers are never test assertions).

// A benchmark harness: a broken fixture or a failed measurement is a panic, as in tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use band::vm::endpoint::{self, Auth, Endpoint};
use band::vm::paths::VmPaths;
use band::vm::qemu::InstanceDir;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

fn data_dir() -> PathBuf {
    std::env::var_os("BAND_DATA_DIR")
        .map(PathBuf::from)
        .or_else(|| dirs::data_dir().map(|d| d.join("band")))
        .unwrap_or_default()
}

/// Wall time of one `band run`, and band-server's setup+run+teardown milliseconds.
fn band_run(band: &Path, target: &str, skills: &Path) -> Option<(f64, f64)> {
    let t = Instant::now();
    let out = Command::new(band)
        .args(["run", "--json", "--target", target, "--skills"])
        .arg(skills)
        .args(["text/count", "--text=hello vm world"])
        .output()
        .ok()?;
    let wall = t.elapsed().as_secs_f64() * 1000.0;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    if v["status"] != "ok" {
        eprintln!("{target}: {}", String::from_utf8_lossy(&out.stdout));
        return None;
    }
    let m = &v["metrics"];
    Some((
        wall,
        m["setup_ms"].as_f64().unwrap_or(0.0)
            + m["run_ms"].as_f64().unwrap_or(0.0)
            + m["teardown_ms"].as_f64().unwrap_or(0.0),
    ))
}

fn main() {
    // `cargo test --all-targets` runs bench binaries too (without `--bench`): measure nothing then.
    if !std::env::args().any(|a| a == "--bench") {
        println!("vm bench: run it with `cargo bench --bench vm`");
        return;
    }
    let runs: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(5);
    let paths = VmPaths::new(&data_dir());
    let inst = InstanceDir::new(&paths);
    let Some(state) = inst.running() else {
        println!(
            "vm bench: no running qemu VM under {} (run `band setup --driver qemu`); nothing measured",
            paths.root.display()
        );
        return;
    };
    let ep = Endpoint {
        host: "127.0.0.1".into(),
        port: state.ssh_port,
        user: "root".into(),
        auth: Auth::KeyFile(paths.client_key()),
        known_host: inst.known_host(),
        sudo: false,
        ssh_config: None,
    };
    // A fresh connection (TCP, key exchange, host key check, key auth) running `true`: what
    // every run paid before the master; no master used or left.
    let mut connect = Vec::new();
    if let Ok(Some(ch)) = band::vm::mux::channel(&ep) {
        let fresh = band::vm::mux::Channel {
            control: None,
            ..ch
        };
        for _ in 0..runs {
            let t = Instant::now();
            let ok = band::vm::cmd::command(&band::vm::mux::argv(&ep, &fresh, "true"))
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                println!("vm bench: cannot connect to the VM");
                return;
            }
            connect.push(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
    // The warm channel (band's OpenSSH master): a channel that runs `true`, and one that starts
    // band-server (`version`), on the open master.
    let (mut warm_true, mut warm_server) = (vec![], vec![]);
    if let Ok(Some(ch)) = band::vm::mux::channel(&ep) {
        let time = |remote: &str| {
            let t = Instant::now();
            let ok = band::vm::cmd::command(&band::vm::mux::argv(&ep, &ch, remote))
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            ok.then(|| t.elapsed().as_secs_f64() * 1000.0)
        };
        let _ = time("true"); // the master, if none is up
        for _ in 0..runs {
            warm_true.extend(time("true"));
            warm_server.extend(time(&format!(
                "exec {}/band-server version",
                endpoint::SERVER_DIR
            )));
        }
    }
    let band = PathBuf::from(env!("CARGO_BIN_EXE_band"));
    let skills = Path::new(env!("CARGO_MANIFEST_DIR")).join("skills");
    // A run through the VM is slow under TCG; the text skill's 10 s limit is kept, so a loaded
    // host can time runs out (they are reported and left out).
    let (mut host_wall, mut host_server, mut vm_wall, mut vm_server) =
        (vec![], vec![], vec![], vec![]);
    for _ in 0..runs {
        if let Some((w, s)) = band_run(&band, "host", &skills) {
            host_wall.push(w);
            host_server.push(s);
        }
        if let Some((w, s)) = band_run(&band, "qemu", &skills) {
            vm_wall.push(w);
            vm_server.push(s);
        }
    }
    let (hw, vw) = (median(host_wall.clone()), median(vm_wall.clone()));
    println!(
        "vm bench ({} accelerator, {runs} runs each, medians)",
        state.accel.as_str()
    );
    println!(
        "  ssh connect + `true` (no master)           {:8.0} ms",
        median(connect)
    );
    println!(
        "  warm channel: `true` on the open master    {:8.0} ms",
        median(warm_true)
    );
    println!(
        "  warm channel: start band-server (version)  {:8.0} ms",
        median(warm_server)
    );
    println!(
        "  band-server setup+run+teardown, host       {:8.0} ms  ({} ok)",
        median(host_server.clone()),
        host_wall.len()
    );
    println!(
        "  band-server setup+run+teardown, VM         {:8.0} ms  ({} ok)",
        median(vm_server.clone()),
        vm_wall.len()
    );
    println!("  band run wall time, host                   {:8.0} ms", hw);
    println!("  band run wall time, VM                     {:8.0} ms", vw);
    let outside = |wall: &[f64], server: &[f64]| {
        median(wall.iter().zip(server).map(|(w, s)| w - s).collect())
    };
    println!(
        "  outside band-server, host (wall - s+r+t)   {:8.0} ms",
        outside(&host_wall, &host_server)
    );
    println!(
        "  outside band-server, VM (wall - s+r+t)     {:8.0} ms",
        outside(&vm_wall, &vm_server)
    );
    if hw > 0.0 {
        println!(
            "  VM / host                                  {:8.1} x",
            vw / hw
        );
    }
}
