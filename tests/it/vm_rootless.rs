//! An ordinary user — not root, no sudo, not in the kvm group — sets up the QEMU VM and runs
//! skills through it: `band doctor` names what the rootless path needs, a run before setup says
//! how to choose (not "cannot start band-server"), `band setup --driver qemu` builds the image in
//! mmdebstrap's unshare mode and boots it (TCG: the user cannot open /dev/kvm), runs with no
//! `--target` go to the VM and say so, the probe skill's allowed and denied reads, writes,
//! commands and network hold, and `band vm destroy` leaves no process of that user.
//!
//! The test runs as root (CI does) and makes the user with `useradd` when it is missing; band runs
//! as that user through `runuser`, from copies of the binaries in the user's home. It builds its
//! own image (several minutes) and runs when `BAND_TEST_VM=1` or `BAND_TEST_MUST_RUN=1`, one VM at
//! a time with `vm_e2e`. `BAND_TEST_VM_DATA_DIR` set (the local reuse knob) keeps the user's data
//! folder, and so its image, between runs.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use band_test::is_root;

use crate::vm_e2e::{
    Env, KillQemus, RunAs, assert_served_warm, check_probe_run, enabled, http_listener,
    last_run_ids, net_skill, on_path, one_vm, probe_skill, qemus_under, server_bins_dir,
    skip_or_fail, warm_pid, workspace,
};

const USER: &str = "band-rootless-test";

fn sh(cmd: &mut Command) -> (bool, String) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// The user's home, made with the user (and its subordinate ids) when missing.
fn ordinary_user() -> PathBuf {
    if !sh(Command::new("id").arg(USER)).0 {
        let (ok, out) = sh(Command::new("useradd").args(["-m", "-s", "/bin/sh", USER]));
        assert!(ok, "useradd {USER}: {out}");
    }
    let (ok, groups) = sh(Command::new("id").args(["-nG", USER]));
    assert!(ok, "{groups}");
    assert!(
        !groups
            .split_whitespace()
            .any(|g| ["kvm", "sudo", "root"].contains(&g)),
        "{USER} must be an ordinary user: {groups}"
    );
    let (ok, home) =
        sh(Command::new("sh").args(["-c", &format!("getent passwd {USER} | cut -d: -f6")]));
    assert!(ok, "{home}");
    PathBuf::from(home.trim())
}

fn chown(path: &Path) {
    let (ok, out) = sh(Command::new("chown")
        .args(["-R", "-h", &format!("{USER}:{USER}")])
        .arg(path));
    assert!(ok, "{out}");
}

/// The user's warm channels: OpenSSH masters (`ssh: <socket> [mux]`), as `pid command`.
fn ssh_masters() -> Vec<String> {
    processes_of_user()
        .into_iter()
        .filter(|l| l.contains("[mux]"))
        .collect()
}

/// The pids of the user's processes.
fn processes_of_user() -> Vec<String> {
    let (_, out) = sh(Command::new("pgrep").args(["-u", USER, "-a"]));
    out.lines().map(str::to_string).collect()
}

#[test]
fn vm_rootless_setup_and_runs() {
    let _one = one_vm();
    if !enabled() {
        eprintln!("skipped: set BAND_TEST_VM=1 to build and boot the VM as an ordinary user");
        return;
    }
    if !is_root() {
        return skip_or_fail("making an ordinary user to run band as needs root");
    }
    for tool in [
        "mmdebstrap",
        "mkfs.ext4",
        "qemu-img",
        "qemu-system-x86_64",
        "ssh-keygen",
        "ssh",
        "newuidmap",
        "newgidmap",
        "useradd",
        "runuser",
        "pgrep",
    ] {
        if !on_path(tool) {
            return skip_or_fail(&format!("{tool} is not installed (see .ci/run)"));
        }
    }
    let src = server_bins_dir();

    let home = ordinary_user();
    let root = home.join("band-it");
    let data = root.join("data");
    let keep = std::env::var_os("BAND_TEST_VM_DATA_DIR").is_some();
    for dir in ["bin", "work"] {
        let _ = fs_err::remove_dir_all(root.join(dir));
    }
    if !keep {
        let _ = fs_err::remove_dir_all(&data);
    }
    // band uploads band-server from beside itself: the user's copies, the user's own.
    let bin = root.join("bin");
    fs_err::create_dir_all(&bin).expect("mkdir");
    for b in ["band", "band-server", "band-jail", "band-shim"] {
        fs_err::copy(src.join(b), bin.join(b)).expect("copy binary");
        fs_err::set_permissions(bin.join(b), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
    }
    let work = root.join("work");
    let skill = probe_skill(&work);
    let ws = workspace(&work);
    let (open, open_hits) = http_listener("hello-from-the-host");
    let (closed, closed_hits) = http_listener("must-not-be-reached");
    let net = net_skill(&work, open, closed);
    fs_err::create_dir_all(&data).expect("mkdir");
    chown(&root);
    let env = Env {
        data: data.clone(),
        home: work.clone(),
        _tmp: None,
        run_as: Some(RunAs {
            user: USER.into(),
            home: home.clone(),
            bin,
        }),
    };
    let _guard = KillQemus(data.clone());

    // 1. The doctor: the host target cannot start, the rootless build can.
    let (_, out, err) = env.band(&["doctor", "--json"], &work);
    let d: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("doctor: {e}: {out}{err}"));
    let level = |name: &str| {
        d["checks"]
            .as_array()
            .and_then(|a| a.iter().find(|c| c["name"] == name))
            .map(|c| c["level"].as_str().unwrap_or("").to_string())
            .unwrap_or_else(|| panic!("no {name} check: {d:#}"))
    };
    assert_eq!(level("host target"), "warn", "{d:#}");
    for name in ["newuidmap", "newgidmap", "subuid", "subgid", "mmdebstrap"] {
        assert_eq!(level(name), "ok", "{name}: {d:#}");
    }
    assert_eq!(
        level("accelerator"),
        "warn",
        "{USER} cannot open /dev/kvm: {d:#}"
    );

    // 2. Before setup, a run says what is missing and how to choose: sudo, not band-server.
    if keep {
        // A VM a failed earlier run left: gone, so the run below has none to go to.
        env.band(&["vm", "destroy"], &work);
    }
    {
        let probe = format!("{}/probe", skill.display());
        let (code, _, err) = env.band(
            &["run", "--workspace", ws.to_str().expect("utf8"), &probe],
            &ws,
        );
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains("you are not root and `sudo` is not installed")
                || err.contains("`sudo -n` may not run it"),
            "{err}"
        );
        assert!(err.contains("band setup"), "{err}");
    }

    // 3. Setup: the image built without root, booted under TCG.
    let setup = env.json(&["setup", "--driver", "qemu", "--json"], &work);
    eprintln!("rootless setup: {setup:#}");
    assert_eq!(setup["target"], "qemu");
    assert_eq!(setup["accel"], "tcg", "{setup}");
    // Nothing of another owner (a subordinate id, root) is left in the user's data folder.
    let (ok, out) = sh(Command::new("find")
        .arg(&data)
        .args(["-not", "-user", USER]));
    assert!(
        ok && out.trim().is_empty(),
        "the data folder holds files of another owner: {out}"
    );

    // 4. Runs with no --target go to the VM, and say so; the sandbox holds there.
    let (code, out, err) = env.band(
        &[
            "run",
            "--workspace",
            ws.to_str().expect("utf8"),
            "--json",
            &format!("{}/probe", skill.display()),
        ],
        &ws,
    );
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        err.matches("band: not root and no sudo: running on the VM (qemu); choose with --target")
            .count(),
        1,
        "{err}"
    );
    check_probe_run(&env, &skill, &ws, "");
    // The warm channel: one master connection, in the VM's state folder, serves every run.
    let masters = ssh_masters();
    assert_eq!(masters.len(), 1, "one warm channel: {masters:?}");
    assert!(
        masters[0].contains(&data.join("vm/qemu/mux-").display().to_string()),
        "{masters:?}"
    );
    check_probe_run(&env, &skill, &ws, "qemu");
    assert_eq!(ssh_masters(), masters, "the second run reused the channel");
    // The warm band-server in the VM served these runs (allowed and denied reads, writes,
    // commands), each in a child of its own.
    let warm = warm_pid(&env, &ws);
    assert_served_warm(&env, &ws, &warm, &last_run_ids(&env, &ws, 2));
    // A dead master fails closed: the next run connects afresh (the pinned key checked again)
    // and runs, through a new master.
    let pid = masters[0]
        .split_whitespace()
        .next()
        .expect("pid")
        .to_string();
    let (ok, out) = sh(Command::new("kill").args(["-KILL", &pid]));
    assert!(ok, "{out}");
    check_probe_run(&env, &skill, &ws, "qemu");
    let fresh = ssh_masters();
    assert_eq!(fresh.len(), 1, "{fresh:?}");
    assert_ne!(fresh, masters, "a new master after the old one died");
    let v = env.json(
        &[
            "run",
            "--workspace",
            ws.to_str().expect("utf8"),
            "--json",
            &format!("{}/fetch", net.display()),
        ],
        &ws,
    );
    assert_eq!(v["status"], "ok", "{v:#}");
    assert_eq!(
        v["output"],
        serde_json::json!({"allowed": "hello-from-the-host", "denied": "refused"}),
        "{v:#}"
    );
    assert!(open_hits.load(std::sync::atomic::Ordering::SeqCst) >= 1);
    assert_eq!(closed_hits.load(std::sync::atomic::Ordering::SeqCst), 0);
    // The same warm band-server, through the new master's forward, served the runs after the
    // first one past the kill (that one found no master to forward through and took the per-run
    // path, which started the new master): the undeclared command and the network run.
    assert_eq!(warm_pid(&env, &ws), warm);
    assert_served_warm(&env, &ws, &warm, &last_run_ids(&env, &ws, 2));

    // 5. Destroy: no process of the user is left.
    env.band_ok(&["vm", "destroy"], &work);
    assert!(qemus_under(&data).is_empty(), "QEMU still running");
    let mut left = processes_of_user();
    for _ in 0..20 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
        left = processes_of_user();
    }
    assert!(left.is_empty(), "processes of {USER} left: {left:?}");
    let sockets: Vec<_> = fs_err::read_dir(data.join("vm"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(
        !sockets.iter().any(|p| p.to_string_lossy().contains("mux-")),
        "{sockets:?}"
    );
    if !keep {
        let _ = fs_err::remove_dir_all(&root);
    }
}
