//! End to end through a real VM: build the QEMU image from Debian packages, boot it (TCG when
//! KVM does not work), `band setup` twice (the second changes nothing), run skills with allowed
//! and denied reads, writes, commands and network through the VM and through an `ssh://`
//! target, upgrade a stale band-server, and `band vm destroy` leaving nothing running.
//!
//! It needs root, network access to a Debian mirror and several minutes, so it runs only when
//! `BAND_TEST_VM=1` or `BAND_TEST_MUST_RUN=1` (set by `.ci/run`, where a missing prerequisite
//! fails the test instead of skipping it). `BAND_TEST_VM_DATA_DIR=DIR` reuses a data folder
//! (and its built image) between local runs; by default every run starts from nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use band_test::{Band, SkillBuilder, copy_dir, is_root, must_run};

use crate::common::band_exe;

/// Skip (locally) or fail (under `BAND_TEST_MUST_RUN`).
pub(crate) fn skip_or_fail(why: &str) {
    if must_run() {
        panic!("the VM end-to-end test cannot run: {why}");
    }
    eprintln!("skipped: {why}");
}

pub(crate) fn enabled() -> bool {
    std::env::var_os("BAND_TEST_VM").is_some_and(|v| v == "1") || must_run()
}

pub(crate) fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
        || Path::new("/usr/sbin").join(name).is_file()
        || Path::new("/sbin").join(name).is_file()
}

/// One VM at a time: the root and the rootless end-to-end tests share this machine's cores.
pub(crate) static ONE_VM: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Held while a VM test runs: [`ONE_VM`] within this process, and an exclusive lock on
/// `/run/band-test/vm-tests.lock` across processes. Two test runs on one machine (two
/// checkouts, or CI beside a local run) would otherwise share the rootless test's user and its
/// data folder, and one would delete the other's image build.
pub(crate) struct VmTestLock {
    _in_process: std::sync::MutexGuard<'static, ()>,
    _across: Option<fs_err::File>,
}

pub(crate) fn one_vm() -> VmTestLock {
    let guard = ONE_VM.lock().unwrap_or_else(|e| e.into_inner());
    let dir = Path::new("/run/band-test");
    let across = fs_err::create_dir_all(dir)
        .and_then(|()| {
            fs_err::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(dir.join("vm-tests.lock"))
        })
        .ok()
        .filter(|f| {
            eprintln!("waiting for other VM tests on this machine (/run/band-test/vm-tests.lock)");
            rustix::fs::flock(f.file(), rustix::fs::FlockOperation::LockExclusive).is_ok()
        });
    VmTestLock {
        _in_process: guard,
        _across: across,
    }
}

/// An ordinary user band runs as (`runuser`), with copies of the binaries in `bin`.
pub(crate) struct RunAs {
    pub(crate) user: String,
    pub(crate) home: PathBuf,
    pub(crate) bin: PathBuf,
}

pub(crate) struct Env {
    pub(crate) data: PathBuf,
    pub(crate) home: PathBuf,
    pub(crate) _tmp: Option<tempfile::TempDir>,
    pub(crate) run_as: Option<RunAs>,
}

impl Env {
    pub(crate) fn band(&self, args: &[&str], cwd: &Path) -> (i32, String, String) {
        let started = Instant::now();
        let (code, stdout, stderr) = match &self.run_as {
            None => Band::new(band_exe(), &self.data)
                .env("BAND_CONFIG", self.home.join("config.toml"))
                .env_remove("BAND_SERVER_STATE_DIR")
                .run(args, cwd),
            Some(u) => {
                // A login-like environment: nothing of the test's (root's) own.
                let out = Command::new("runuser")
                    .args(["-u", &u.user, "--", "env", "-i"])
                    .arg(format!("HOME={}", u.home.display()))
                    .arg(format!("USER={}", u.user))
                    .arg(format!(
                        "PATH={}:/usr/local/bin:/usr/bin:/bin",
                        u.bin.display()
                    ))
                    .arg(format!("BAND_DATA_DIR={}", self.data.display()))
                    .arg(format!(
                        "BAND_CONFIG={}",
                        self.home.join("config.toml").display()
                    ))
                    .arg("NO_COLOR=1")
                    .arg(u.bin.join("band"))
                    .args(args)
                    .current_dir(cwd)
                    .stdin(Stdio::null())
                    .output()
                    .expect("runuser");
                (
                    out.status.code().unwrap_or(-1),
                    String::from_utf8_lossy(&out.stdout).into_owned(),
                    String::from_utf8_lossy(&out.stderr).into_owned(),
                )
            }
        };
        eprintln!(
            "band {} -> {code} in {:.1} s",
            args.join(" "),
            started.elapsed().as_secs_f64()
        );
        (code, stdout, stderr)
    }

    pub(crate) fn band_ok(&self, args: &[&str], cwd: &Path) -> String {
        let (code, out, err) = self.band(args, cwd);
        assert_eq!(
            code, 0,
            "band {args:?} failed:\nstdout: {out}\nstderr: {err}"
        );
        out
    }

    pub(crate) fn json(&self, args: &[&str], cwd: &Path) -> serde_json::Value {
        let out = self.band_ok(args, cwd);
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("band {args:?} printed no JSON ({e}): {out}"))
    }
}

/// The warm band-server in the VM (`band-server serve`): its pid, from its pid file.
pub(crate) fn warm_pid(env: &Env, cwd: &Path) -> String {
    let out = env.band_ok(
        &["vm", "ssh", "--", "cat", "/run/band-serve/serve.pid"],
        cwd,
    );
    let pid = out.split_whitespace().next().unwrap_or("").to_string();
    assert!(
        pid.parse::<u32>().is_ok_and(|p| p > 1),
        "no warm band-server in the VM: {out}"
    );
    pid
}

/// The ids of the last `n` runs (newest first).
pub(crate) fn last_run_ids(env: &Env, cwd: &Path, n: usize) -> Vec<String> {
    let v = env.json(&["history", "--json"], cwd);
    v.as_array()
        .expect("history array")
        .iter()
        .take(n)
        .map(|r| r["run_id"].as_str().expect("run_id").to_string())
        .collect()
}

/// Each of `runs` was served by a child of the warm band-server `pid` (band-server's log in the
/// VM names the run, the child and its parent), not by a `band-server run` of its own.
pub(crate) fn assert_served_warm(env: &Env, cwd: &Path, pid: &str, runs: &[String]) {
    let log = env.band_ok(&["vm", "ssh", "--", "cat", "/var/log/band-server.log"], cwd);
    for id in runs {
        assert!(
            log.lines().any(|l| l.contains(&format!("run {id} served"))
                && l.contains(&format!("parent {pid})"))),
            "run {id} was not served by the warm band-server {pid}:\n{log}"
        );
    }
}

/// Ctrl-C on a run in the VM: band-server there is told over the channel, kills the run and
/// answers `cancelled` (no error: it is its own result, not one band made up), band exits 130.
fn check_cancel_over_ssh(env: &Env, work: &Path) {
    let dir = &work.join("cancel");
    fs_err::create_dir_all(dir).expect("mkdir");
    let b = Band::new(band_exe(), &env.data)
        .env("BAND_CONFIG", env.home.join("config.toml"))
        .env_remove("BAND_SERVER_STATE_DIR");
    crate::cancel::sleepy_skill(dir, &b);
    let args = [
        "run",
        "--target",
        "qemu",
        "--skills",
        ".",
        "probe/sleepy",
        "--name=x",
    ];
    let (mut child, _uid) = crate::cancel::start_ticking(&b, &args, dir, Stdio::null());
    crate::cancel::signal(child.id(), "-INT");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(130));
    let (_, out, _) = b.run(&["history", "--json"], dir);
    let recs: serde_json::Value = serde_json::from_str(&out).expect("history JSON");
    let rec = recs
        .as_array()
        .and_then(|a| a.iter().rev().find(|r| r["skill"] == "probe"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(rec["status"], "cancelled", "{rec:#}");
    assert!(rec["error"].is_null(), "{rec:#}");
}

/// The pids of QEMU processes whose command line mentions `dir`.
/// The folder of the `band` under test, with band-server, band-jail and band-shim built beside
/// it (band installs them into the VM from there).
pub(crate) fn server_bins_dir() -> PathBuf {
    let dir = Path::new(band_exe())
        .parent()
        .expect("bin dir")
        .to_path_buf();
    if !["band-server", "band-jail", "band-shim"]
        .iter()
        .all(|b| dir.join(b).is_file())
    {
        let st = Command::new(env!("CARGO"))
            .args(["build", "-p", "band-server", "--bins"])
            .status()
            .expect("cargo build");
        assert!(st.success(), "cargo build -p band-server failed");
    }
    dir
}

pub(crate) fn qemus_under(dir: &Path) -> Vec<i32> {
    let needle = dir.to_string_lossy().into_owned();
    let mut out = Vec::new();
    for e in fs_err::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(raw) = fs_err::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&raw).replace('\0', " ");
        if cmd.contains("qemu-system") && cmd.contains(&needle) {
            out.push(pid);
        }
    }
    out
}

/// Kills the test's QEMU if the test fails half way (a passing test destroys it itself).
pub(crate) struct KillQemus(pub PathBuf);

impl Drop for KillQemus {
    fn drop(&mut self) {
        for pid in qemus_under(&self.0) {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
    }
}

pub(crate) fn write(path: &Path, text: &str) {
    fs_err::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs_err::write(path, text).expect("write");
}

/// A skill whose scripts probe the sandbox from inside the VM.
pub(crate) fn probe_skill(root: &Path) -> PathBuf {
    SkillBuilder::new("vmprobe")
        .description("Probes the sandbox from inside the band VM.")
        .body("Used by the VM end-to-end test.\n")
        .band(r#"description: Reads data/, writes out/, may run cat, ls and mkdir; nothing else.
allow:
  cli: ["cat *", "ls *", "mkdir *"]
  read: ["data/**"]
  write: ["out/"]
deny:
  read: ["data/secret*"]
limit:
  maxRuntimeMs: 300s
"#)
        .input_schema("probe", SkillBuilder::NO_INPUT)
        .input_schema("curl", SkillBuilder::NO_INPUT)
        .script(
            "probe.sh",
            r#"#!/bin/bash
# Report what the sandbox lets this script see and do.
allowed=$(cat /workspace/data/allowed.txt)
if cat /workspace/data/secret.txt >/dev/null 2>&1; then secret=readable; else secret=absent; fi
if [ -e /workspace/notes.txt ]; then notes=visible; else notes=absent; fi
if [ -e /workspace/data/link ]; then link=visible; else link=absent; fi
if cat /etc/shadow >/dev/null 2>&1; then shadow=readable; else shadow=denied; fi
mkdir -p /workspace/out
echo "written in the vm" > /workspace/out/result.txt
echo "escape" > /workspace/escape.txt 2>/dev/null
ifaces=$(while read -r l; do case $l in *:*) n=${l%%:*}; printf '%s ' "${n// /}";; esac; done < /proc/net/dev)
if (exec 3<>/dev/tcp/192.0.2.1/80) 2>/dev/null; then net=open; else net=closed; fi
kernel=$(cat /proc/sys/kernel/osrelease)
printf '{"allowed":"%s","secret":"%s","notes":"%s","link":"%s","shadow":"%s","ifaces":"%s","net":"%s","kernel":"%s","uid":%d}\n' \
  "$allowed" "$secret" "$notes" "$link" "$shadow" "$ifaces" "$net" "$kernel" "$EUID" > "$OUTPUT_PATH"
"#,
        )
        .script(
            "curl.sh",
            "#!/bin/bash\nset -e\ncurl --version\necho '{}' > \"$OUTPUT_PATH\"\n",
        )
        .write(root)
}

/// An HTTP server on the host's loopback that answers every request with `body` and counts
/// connections. The VM reaches the host's loopback at 10.0.2.2 (QEMU user networking).
pub(crate) fn http_listener(
    body: &'static str,
) -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind(("127.0.0.1", 0)).expect("bind");
    let port = l.local_addr().expect("addr").port();
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let h = hits.clone();
    std::thread::spawn(move || {
        for conn in l.incoming().flatten() {
            h.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut c = conn;
            let mut buf = [0u8; 1024];
            let _ = c.read(&mut buf);
            let _ = write!(
                c,
                "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (port, hits)
}

/// A skill allowed to reach one host port (by IP: private addresses need an explicit allow).
pub(crate) fn net_skill(root: &Path, open: u16, closed: u16) -> PathBuf {
    SkillBuilder::new("vmnet")
        .description("Reaches one allowed address from inside the band VM.")
        .body("Used by the VM end-to-end test.\n")
        .band(&format!(
            r#"description: May fetch from 10.0.2.2:{open} with curl; nothing else.
allow:
  cli: ["curl *"]
  net: ["10.0.2.2:{open}"]
limit:
  maxRuntimeMs: 300s
"#
        ))
        .input_schema("fetch", SkillBuilder::NO_INPUT)
        .script(
            "fetch.sh",
            &format!(
                "#!/bin/bash\na=$(curl -s --max-time 60 http://10.0.2.2:{open}/ || echo failed)\nif curl -s --max-time 20 http://10.0.2.2:{closed}/ >/dev/null 2>&1; then d=reached; else d=refused; fi\nprintf '{{\"allowed\":\"%s\",\"denied\":\"%s\"}}\\n' \"$a\" \"$d\" > \"$OUTPUT_PATH\"\n"
            ),
        )
        .write(root)
}

pub(crate) fn workspace(root: &Path) -> PathBuf {
    let w = root.join("ws");
    write(&w.join("data/allowed.txt"), "hello from the host");
    write(&w.join("data/secret.txt"), "do not read");
    write(&w.join("notes.txt"), "not admitted");
    fs_err::os::unix::fs::symlink("/etc/hostname", w.join("data/link")).expect("symlink");
    w
}

/// `band run --workspace WS [--target T] --json SKILL/SCRIPT` (no `--target` when `target` is
/// empty: the default target).
fn run_args(ws: &Path, target: &str, script: String) -> Vec<String> {
    let mut a = vec!["run".to_string(), "--workspace".into()];
    a.push(ws.to_str().expect("utf8").into());
    if !target.is_empty() {
        a.extend(["--target".to_string(), target.to_string()]);
    }
    a.extend(["--json".to_string(), script]);
    a
}

pub(crate) fn check_probe_run(env: &Env, skill: &Path, ws: &Path, target: &str) {
    let _ = fs_err::remove_dir_all(ws.join("out"));
    let args = run_args(ws, target, format!("{}/probe", skill.display()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let v = env.json(&args, ws);
    assert_eq!(v["status"], "ok", "{v:#}");
    let o = &v["output"];
    assert_eq!(o["allowed"], "hello from the host", "allowed read: {o}");
    assert_eq!(o["secret"], "absent", "deny.read wins: {o}");
    assert_eq!(
        o["notes"], "absent",
        "files outside allow.read are not staged: {o}"
    );
    assert_eq!(o["link"], "absent", "symlinks are not staged: {o}");
    assert_eq!(o["shadow"], "denied", "{o}");
    assert_eq!(o["ifaces"], "lo ", "no allow.net: only loopback: {o}");
    assert_eq!(o["net"], "closed", "{o}");
    assert!(
        o["kernel"]
            .as_str()
            .is_some_and(|k| k.ends_with("-cloud-amd64")),
        "the run happened inside the VM (its cloud kernel): {o}"
    );
    assert!(
        o["uid"].as_u64().is_some_and(|u| u > 0),
        "the script does not run as root: {o}"
    );
    assert_eq!(
        fs_err::read_to_string(ws.join("out/result.txt")).expect("written back"),
        "written in the vm\n"
    );
    assert!(
        !ws.join("escape.txt").exists(),
        "a write outside allow.write came back"
    );
    assert_eq!(
        v["written_files"],
        serde_json::json!(["out/result.txt"]),
        "{v:#}"
    );

    // An undeclared command does not exist for the script: the run fails (denied or, when the
    // shell only finds no such command, script_failed with 127) and nothing claims success.
    let args = run_args(ws, target, format!("{}/curl", skill.display()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = env.band(&args, ws);
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    assert!(
        code == 5 || (code == 1 && v["script_exit_code"] == 127),
        "curl is not declared: {v:#}"
    );
    assert!(
        v["status"] == "denied" || v["status"] == "script_failed",
        "{v:#}"
    );
    assert!(
        v["stderr"].as_str().is_some_and(|s| s.contains("curl"))
            || v["denied"].to_string().contains("curl"),
        "{v:#}"
    );
}

#[test]
fn vm_end_to_end() {
    let _one = one_vm();
    if !enabled() {
        eprintln!("skipped: set BAND_TEST_VM=1 to build and boot the VM (several minutes)");
        return;
    }
    if !is_root() {
        return skip_or_fail("the image build needs root");
    }
    for tool in [
        "mmdebstrap",
        "mkfs.ext4",
        "qemu-img",
        "qemu-system-x86_64",
        "ssh-keygen",
        "ssh",
    ] {
        if !on_path(tool) {
            return skip_or_fail(&format!("{tool} is not installed (see .ci/run)"));
        }
    }
    server_bins_dir();

    let tmp = tempfile::tempdir().expect("tmp");
    let (data, keep) = match std::env::var_os("BAND_TEST_VM_DATA_DIR") {
        Some(d) => (PathBuf::from(d), None),
        None => (tmp.path().join("data"), Some(tmp)),
    };
    let work = tempfile::tempdir().expect("tmp");
    let env = Env {
        data: data.clone(),
        home: work.path().to_path_buf(),
        _tmp: keep,
        run_as: None,
    };
    let cwd = work.path();
    let _guard = KillQemus(data.clone());

    // 1. Setup, cold (or warm with BAND_TEST_VM_DATA_DIR).
    let first = env.json(&["setup", "--driver", "qemu", "--json"], cwd);
    eprintln!("first setup: {first:#}");
    assert_eq!(first["target"], "qemu");
    assert_eq!(first["protocol"], band::proto::PROTOCOL_VERSION);
    assert!(
        first["accel"] == "kvm" || first["accel"] == "tcg",
        "{first}"
    );

    // 2. Setup again: nothing is rebuilt or rebooted.
    let second = env.json(&["setup", "--driver", "qemu", "--json"], cwd);
    eprintln!("second setup: {second:#}");
    assert!(
        second["image_build_secs"].is_null(),
        "the image was rebuilt: {second}"
    );
    assert!(
        second["boot_to_ready_secs"].is_null(),
        "the VM was rebooted: {second}"
    );
    assert_eq!(second["ssh"], first["ssh"]);
    assert_eq!(second["image"], first["image"]);

    // Key and host-key files are private.
    use std::os::unix::fs::PermissionsExt;
    let key = data.join("vm/keys/id_ed25519");
    assert_eq!(
        fs_err::metadata(&key).expect("key").permissions().mode() & 0o777,
        0o600
    );

    // 3. Runs through the VM.
    let skill = probe_skill(work.path());
    let ws = workspace(work.path());
    check_probe_run(&env, &skill, &ws, "qemu");

    // Network through the VM: the allowed address answers, another port of the same host is
    // refused and never sees a connection.
    let (open, open_hits) = http_listener("hello-from-the-host");
    let (closed, closed_hits) = http_listener("must-not-be-reached");
    let net = net_skill(work.path(), open, closed);
    let v = env.json(
        &[
            "run",
            "--workspace",
            ws.to_str().expect("utf8"),
            "--target",
            "qemu",
            "--json",
            &format!("{}/fetch", net.display()),
        ],
        cwd,
    );
    assert_eq!(v["status"], "ok", "{v:#}");
    assert_eq!(
        v["output"],
        serde_json::json!({"allowed": "hello-from-the-host", "denied": "refused"}),
        "{v:#}"
    );
    assert!(open_hits.load(std::sync::atomic::Ordering::SeqCst) >= 1);
    assert_eq!(
        closed_hits.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "a denied port was reached"
    );

    // The repository's own skill, input and output contracts included (its 10 s runtime limit
    // is raised: emulation under TCG on a loaded 2-core machine is slow).
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = work.path().join("skills/text");
    copy_dir(&repo.join("skills/text"), &text);
    let band_md = fs_err::read_to_string(text.join("BAND.md"))
        .expect("BAND.md")
        .replace("maxRuntimeMs: 10s", "maxRuntimeMs: 300s");
    fs_err::write(text.join("BAND.md"), band_md).expect("write");
    env.band_ok(&["lock", text.to_str().expect("utf8")], cwd);
    let repo = work.path();
    let v = env.json(
        &[
            "run",
            "--target",
            "qemu",
            "--json",
            "text/count",
            "--text=hello vm world",
        ],
        repo,
    );
    assert_eq!(
        v["output"],
        serde_json::json!({"words": 3, "lines": 1, "chars": 14}),
        "{v:#}"
    );
    // The warm band-server: the first run started it; the runs since (the undeclared command,
    // the network, text/count) were each served by a child of it, and so are the probe's allowed
    // and denied reads, writes and commands when run again, by the same server.
    let pid = warm_pid(&env, cwd);
    assert_served_warm(&env, cwd, &pid, &last_run_ids(&env, cwd, 3));
    check_probe_run(&env, &skill, &ws, "qemu");
    assert_served_warm(&env, cwd, &pid, &last_run_ids(&env, cwd, 2));
    assert_eq!(
        warm_pid(&env, cwd),
        pid,
        "the warm band-server was replaced"
    );
    check_cancel_over_ssh(&env, repo);

    // 4. The doctor sees a current band-server in the VM.
    let (_, out, _) = env.band(&["doctor", "--json"], cwd);
    let d: serde_json::Value = serde_json::from_str(&out).expect("doctor json");
    let vm_server = d["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["name"] == "VM band-server")
        .cloned()
        .unwrap_or_default();
    assert_eq!(vm_server["level"], "ok", "{d:#}");

    // 5. A stale band-server in the VM is detected and upgraded.
    env.band_ok(
        &[
            "vm",
            "ssh",
            "--",
            "sh",
            "-c",
            "echo '{}' > /usr/local/lib/band/installed.json",
        ],
        cwd,
    );
    let (_, out, _) = env.band(&["doctor", "--json"], cwd);
    assert!(out.contains("stale"), "the doctor did not notice: {out}");
    let (code, _, err) = env.band(&["vm", "start"], cwd);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("install band-server"), "no upgrade: {err}");
    // A run finds a stale band-server by itself (same round trip) and upgrades it before running.
    env.band_ok(
        &[
            "vm",
            "ssh",
            "--",
            "sh",
            "-c",
            "echo '{}' > /usr/local/lib/band/installed.json",
        ],
        cwd,
    );
    let (code, out, err) = env.band(
        &[
            "run",
            "--target",
            "qemu",
            "--json",
            "text/count",
            "--text=a b",
        ],
        repo,
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("another build; installing"), "{err}");
    let status: serde_json::Value = env.json(&["vm", "status", "--json"], cwd);
    assert_eq!(status["state"], "running");
    assert_eq!(status["band_server"]["current"], true, "{status:#}");

    // 6. The same VM as an ssh:// target (how a team points runs at a remote host).
    let port = first["ssh"]
        .as_str()
        .and_then(|s| s.rsplit(':').next())
        .expect("port")
        .to_string();
    let host = format!("root@127.0.0.1:{port}");
    env.band_ok(
        &[
            "setup",
            "--driver",
            "ssh",
            "--host",
            &host,
            "--identity",
            key.to_str().expect("utf8"),
        ],
        cwd,
    );
    check_probe_run(&env, &skill, &ws, &format!("ssh://{host}"));
    // A token bound to a host and an HTTP rule, through the VM and through the ssh:// target,
    // against a lab the test makes inside the VM (its config put back after).
    crate::vm_egress::check_bound_secret(&env, work.path(), &ws, &host);
    // A changed host key is refused.
    let pinned = data.join(format!("vm/ssh/root@127.0.0.1_{port}/known_host"));
    let mut text = fs_err::read_to_string(&pinned).expect("pinned key");
    text = text.replacen("AAAA", "AAAB", 1);
    fs_err::write(&pinned, text).expect("write");
    let (code, out, err) = env.band(
        &[
            "run",
            "--target",
            &format!("ssh://{host}"),
            "--json",
            "text/count",
            "--text=x",
        ],
        repo,
    );
    assert_ne!(code, 0, "ran despite a wrong host key: {out}");
    // Under --json the error is the JSON object on stdout.
    let error: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    let message = error["message"].as_str().unwrap_or("");
    assert!(
        message.contains("host key") || message.contains("public key"),
        "{out}{err}"
    );

    // 7. Stop, start, destroy: nothing is left running.
    env.band_ok(&["vm", "stop"], cwd);
    assert!(
        qemus_under(&data).is_empty(),
        "QEMU still running after stop"
    );
    env.band_ok(&["vm", "start"], cwd);
    assert_eq!(qemus_under(&data).len(), 1);
    env.band_ok(&["vm", "destroy"], cwd);
    assert!(
        qemus_under(&data).is_empty(),
        "QEMU still running after destroy"
    );
    assert!(
        !data.join("vm/qemu").exists(),
        "the instance folder is left"
    );
    let (code, _, err) = env.band(&["run", "--target", "qemu", "text/count", "--text=x"], repo);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not running"), "{err}");
}
