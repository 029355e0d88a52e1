//! The macOS path on Linux: `band setup --build-server-in-guest` builds band-server, band-jail
//! and band-shim in the target from the source band carries, with Debian testing's Rust
//! toolchain, and the host's own binaries are never used (`$BAND_SERVER` points at nothing).
//!
//! The target is this machine through the `ssh://` driver, against an sshd the test starts
//! itself (`127.0.0.1:<free port>`, its own host key, band's key in its own authorized_keys),
//! inside a private mount namespace where `/usr/local/lib/band`, `/etc/band`, `/var/cache/band`
//! are the test's own temp dirs (bound over overlays of their parents, so nothing of the host's
//! install is touched or even created), `/var/log` an overlay whose upper layer is the test's,
//! and `/run/band-serve` a tmpfs. band-server there uses the
//! privileged tests' shared state dir (`/run/band-test`: its uid pool is shared with the other
//! privileged tests running beside this one).
//!
//! It needs root, sshd (`openssh-server`), mmdebstrap, bwrap, network access to a Debian mirror
//! and crates.io, and several minutes (a release build of band-server), so it runs only when
//! `BAND_TEST_VM=1` or `BAND_TEST_MUST_RUN=1`. `BAND_TEST_BUILD_CACHE=DIR` keeps the build root,
//! cargo's registry and the target dir between local runs (bound on `/var/cache/band`); by
//! default every run starts from nothing, as on a new Mac's VM.
//!
//! Its own traffic goes to loopback only; the build fetches Debian packages and crates.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use band_test::{Band, SkillBuilder, is_root};

use crate::common::band_exe;
use crate::vm_e2e::{ONE_VM, enabled, on_path, skip_or_fail, write};

/// Held while the test runs: [`ONE_VM`] within this process (in CI the VM tests and this one
/// share the cores of one test binary, so they take turns), and across processes a lock of its
/// own, `/run/band-test/vm-build.lock` (two checkouts never build at once; a VM test of another
/// checkout does not hold this one up: they share no state).
struct BuildTestLock {
    _in_process: std::sync::MutexGuard<'static, ()>,
    _across: Option<fs_err::File>,
}

fn one_build() -> BuildTestLock {
    let guard = ONE_VM.lock().unwrap_or_else(|e| e.into_inner());
    let dir = Path::new(band_test::STATE_DIR);
    let across = fs_err::create_dir_all(dir)
        .and_then(|()| {
            fs_err::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(dir.join("vm-build.lock"))
        })
        .ok()
        .filter(|f| rustix::fs::flock(f.file(), rustix::fs::FlockOperation::LockExclusive).is_ok());
    BuildTestLock {
        _in_process: guard,
        _across: across,
    }
}

/// sshd in its own mount namespace, and everything the test made: killed and checked on drop.
struct Target {
    sshd: Child,
    /// The mount namespace of sshd (`/proc/<pid>/ns/mnt`), to find what it left running.
    mnt_ns: String,
}

fn mnt_ns(pid: u32) -> Option<String> {
    fs_err::read_link(format!("/proc/{pid}/ns/mnt"))
        .ok()
        .map(|p| p.display().to_string())
}

/// Processes in the mount namespace `ns` (sshd, its sessions, a warm band-server).
fn procs_in(ns: &str) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for e in fs_err::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if mnt_ns(pid).as_deref() == Some(ns) {
            let cmd = fs_err::read(e.path().join("cmdline"))
                .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
                .unwrap_or_default();
            out.push((pid, cmd));
        }
    }
    out
}

/// Processes on the host whose command line mentions `needle` (the ssh master of the test's
/// data dir).
fn procs_mentioning(needle: &str) -> Vec<(u32, String)> {
    let me = std::process::id();
    let mut out = Vec::new();
    for e in fs_err::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let cmd = fs_err::read(e.path().join("cmdline"))
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .unwrap_or_default();
        if cmd.contains(needle) {
            out.push((pid, cmd));
        }
    }
    out
}

fn kill_all(procs: &[(u32, String)]) {
    for (pid, _) in procs {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
}

impl Target {
    /// Kill everything in the namespace (a warm band-server, sessions, sshd) and wait for sshd.
    fn stop(&mut self) {
        kill_all(&procs_in(&self.mnt_ns));
        let _ = self.sshd.kill();
        let _ = self.sshd.wait();
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// The namespace's mounts, then `exec sshd`: each of the install's folders is a fresh temp dir
/// bound over a fresh overlay of its parent (the overlay's upper layer is in `t`, so a folder
/// missing on the host is made in the overlay, not on the host).
fn start_target(t: &Path, cache: &Path, port: u16) -> Target {
    let sshd_dir = t.join("sshd");
    fs_err::create_dir_all(&sshd_dir).expect("mkdir");
    let host_key = sshd_dir.join("host_ed25519");
    run(Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "band-test-sshd",
            "-f",
        ])
        .arg(&host_key));
    let client_key = t.join("client_ed25519");
    run(Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "band-test", "-f"])
        .arg(&client_key));
    fs_err::copy(
        client_key.with_extension("pub"),
        sshd_dir.join("authorized_keys"),
    )
    .expect("authorized_keys");
    write(
        &sshd_dir.join("sshd_config"),
        &format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nAuthorizedKeysFile {}\nPidFile {}\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nAllowStreamLocalForwarding yes\nX11Forwarding no\nPrintMotd no\nLogLevel ERROR\n",
            host_key.display(),
            sshd_dir.join("authorized_keys").display(),
            sshd_dir.join("sshd.pid").display()
        ),
    );
    // band-server in the namespace: the shared test state dir (uid pool), and a dead loopback
    // port as its DNS upstream (the probe has no allow.net; nothing is ever asked).
    write(
        &t.join("etc-band/server.toml"),
        &format!(
            "state_dir = \"{}\"\nbwrap = \"/usr/bin/bwrap\"\ndns_upstream = [\"127.0.0.1:9\"]\n",
            band_test::STATE_DIR
        ),
    );
    fs_err::create_dir_all(t.join("lib")).expect("mkdir");
    fs_err::create_dir_all(band_test::STATE_DIR).expect("state dir");
    let script = r#"set -eu
T=$1; CACHE=$2
mount --make-rprivate /
fresh() { # fresh PARENT NAME SOURCE: SOURCE bound on PARENT/NAME, over an overlay of PARENT
  key=$(echo "$1" | tr / _)
  mkdir -p "$T/ov/$key/up" "$T/ov/$key/work"
  mount -t overlay overlay -o "lowerdir=$1,upperdir=$T/ov/$key/up,workdir=$T/ov/$key/work" "$1"
  rm -rf "$1/$2"
  mkdir "$1/$2"
  mount --bind "$3" "$1/$2"
}
fresh /usr/local/lib band "$T/lib"
fresh /etc band "$T/etc-band"
fresh /var/cache band "$CACHE"
# band-server's log (/var/log/band-server.log) goes to an overlay's upper layer in T.
mkdir -p "$T/ov/_var_log/up" "$T/ov/_var_log/work"
mount -t overlay overlay -o "lowerdir=/var/log,upperdir=$T/ov/_var_log/up,workdir=$T/ov/_var_log/work" /var/log
mkdir -p /run/sshd /run/band-serve
mount -t tmpfs -o mode=0755 tmpfs /run/band-serve
exec /usr/sbin/sshd -D -e -f "$T/sshd/sshd_config"
"#;
    let mut sshd = Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            script,
            "sh",
        ])
        .arg(t)
        .arg(cache)
        .stdin(Stdio::null())
        .spawn()
        .expect("unshare sshd");
    let pid = sshd.id();
    // Wait until sshd listens (it execs in the namespace first).
    band_test::wait_until(&format!("sshd listens on 127.0.0.1:{port}"), || {
        let exited = sshd.try_wait().ok().flatten();
        assert!(exited.is_none(), "sshd exited: {exited:?}");
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let ns = mnt_ns(pid).expect("sshd's mount namespace");
    assert_ne!(
        Some(ns.as_str()),
        mnt_ns(std::process::id()).as_deref(),
        "sshd runs in a mount namespace of its own"
    );
    Target { sshd, mnt_ns: ns }
}

/// A skill that probes the sandbox: an allowed read and write, a denied read and write, a
/// connect to a loopback port of the host (refused: the run has its own network namespace),
/// and, in a second script, a command it did not declare.
fn probe_skill(root: &Path) -> PathBuf {
    SkillBuilder::new("buildprobe")
        .description("Probes the sandbox of a band-server built in the target.")
        .body("Used by tests/it/vm_build.rs.\n")
        .band(
            r#"description: Reads data/, writes out/, may run cat and mkdir; nothing else.
allow:
  cli: ["cat *", "mkdir *"]
  read: ["data/**"]
  write: ["out/"]
deny:
  read: ["data/secret*"]
limit:
  maxRuntimeMs: 120s
"#,
        )
        .input_schema("probe", SkillBuilder::NO_INPUT)
        .input_schema("undeclared", SkillBuilder::NO_INPUT)
        .script(
            "probe.sh",
            r#"#!/bin/bash
allowed=$(cat /workspace/data/allowed.txt)
if cat /workspace/data/secret.txt >/dev/null 2>&1; then secret=readable; else secret=denied; fi
if cat /etc/shadow >/dev/null 2>&1; then shadow=readable; else shadow=denied; fi
mkdir -p /workspace/out
echo "written in the target" > /workspace/out/result.txt
echo "escape" > /workspace/escape.txt 2>/dev/null
port=$(cat /workspace/data/port.txt)
if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then net=open; else net=refused; fi
uid=$(while read -r k v _; do [ "$k" = Uid: ] && echo "$v"; done < /proc/self/status)
printf '{"allowed":"%s","secret":"%s","shadow":"%s","net":"%s","uid":%s}\n' \
  "$allowed" "$secret" "$shadow" "$net" "$uid" > "$OUTPUT_PATH"
"#,
        )
        .script(
            "undeclared.sh",
            "#!/bin/bash\nset -e\nuname -r\necho '{}' > \"$OUTPUT_PATH\"\n",
        )
        .write(root)
}

/// The sorted names in `dir`, `None` when it does not exist.
fn listing(dir: &str) -> Option<Vec<std::ffi::OsString>> {
    fs_err::read_dir(dir).ok().map(|r| {
        let mut names: Vec<_> = r.flatten().map(|e| e.file_name()).collect();
        names.sort();
        names
    })
}

fn sha256_file(path: &Path) -> String {
    use sha2::Digest;
    let data = fs_err::read(path).expect("read");
    sha2::Sha256::digest(&data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn privileged_build_server_in_the_target_over_ssh() {
    let _one = one_build();
    if !enabled() {
        eprintln!(
            "skipped: set BAND_TEST_VM=1 to build band-server in a target from source (minutes)"
        );
        return;
    }
    if !is_root() {
        return skip_or_fail("the mount namespace and sshd need root");
    }
    for tool in [
        "sshd",
        "ssh",
        "ssh-keygen",
        "unshare",
        "bwrap",
        "mmdebstrap",
    ] {
        if !on_path(tool) {
            return skip_or_fail(&format!("{tool} is not installed (see .ci/run)"));
        }
    }
    let started = Instant::now();
    // On disk, not in a tmpfs /tmp: the build root and target dir take about 2 GB.
    let t = tempfile::Builder::new()
        .prefix("band-vm-build-")
        .tempdir_in("/var/tmp")
        .expect("tmp");
    let cache = match std::env::var_os("BAND_TEST_BUILD_CACHE") {
        Some(d) => PathBuf::from(d),
        None => t.path().join("cache"),
    };
    fs_err::create_dir_all(&cache).expect("cache dir");
    // The host's own install folders, as they were (the test must leave them so).
    let host_dirs = ["/usr/local/lib/band", "/etc/band", "/var/cache/band/build"];
    let host_before: Vec<_> = host_dirs.iter().copied().map(listing).collect();
    let port = free_port();
    let mut target = start_target(t.path(), &cache, port);

    let data = t.path().join("data");
    let work = t.path().join("work");
    fs_err::create_dir_all(&work).expect("mkdir");
    // $BAND_SERVER points at nothing: the host's own band-server, band-jail and band-shim (beside
    // band) are not used.
    let band =
        Band::new(band_exe(), &data).env("BAND_SERVER", t.path().join("nothing/band-server"));
    let host = format!("root@127.0.0.1:{port}");
    let identity = t.path().join("client_ed25519");
    let setup_args = [
        "setup",
        "--driver",
        "ssh",
        "--host",
        &host,
        "--identity",
        identity.to_str().expect("utf8"),
        "--build-server-in-guest",
        "--json",
    ];
    let (code, out, err) = band.run(&setup_args, &work);
    assert_eq!(code, 0, "setup failed:\n{out}\n{err}");
    let first: serde_json::Value = serde_json::from_str(&out).expect("setup JSON");
    let setup_secs = started.elapsed().as_secs_f64();
    eprintln!("first setup ({setup_secs:.0} s): {first:#}\n{err}");
    assert_eq!(first["server_way"], "build", "{first:#}");
    assert_eq!(first["protocol"], band::proto::PROTOCOL_VERSION);
    assert!(
        first["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .any(|s| s["step"]
                .as_str()
                .is_some_and(|s| s.starts_with("build band-server in the target"))),
        "{first:#}"
    );

    // What was installed: built from this band's source, and not the host's binaries.
    let source = band::vm::build::carried().expect("this band carries its source");
    let lib = t.path().join("lib");
    let installed: serde_json::Value = serde_json::from_str(
        &fs_err::read_to_string(lib.join("installed.json")).expect("installed.json"),
    )
    .expect("installed.json is JSON");
    assert_eq!(installed["source"], source.sha256, "{installed:#}");
    let host_bins = Path::new(band_exe())
        .parent()
        .expect("bin dir")
        .to_path_buf();
    for b in band::vm::install::BINARIES {
        let built = lib.join(b);
        let hash = sha256_file(&built);
        assert_eq!(installed["sha256"][b], hash.as_str(), "{b}: {installed:#}");
        let mut head = [0u8; 20];
        fs_err::File::open(&built)
            .and_then(|mut f| f.read_exact(&mut head))
            .expect("read");
        assert!(
            band::vm::build::elf_machine(&head).is_some(),
            "{b} is an ELF executable"
        );
        if host_bins.join(b).is_file() {
            assert_ne!(
                hash,
                sha256_file(&host_bins.join(b)),
                "{b} is the host's binary"
            );
        }
    }
    let log = fs_err::read_to_string(cache.join("build/build.log")).expect("the build log is kept");
    assert!(
        log.contains(&format!("from source {}", source.sha256)),
        "{log}"
    );
    assert!(
        fs_err::read_dir(t.path().join("ov/_usr_local_lib/up"))
            .map(|d| d.count())
            .unwrap_or(0)
            <= 1,
        "the install went to the test's folder, not the host's /usr/local/lib"
    );

    // Setup again: the build is current (same source), nothing is rebuilt.
    let (code, out, err) = band.run(&setup_args, &work);
    assert_eq!(code, 0, "second setup failed:\n{out}\n{err}");
    let second: serde_json::Value = serde_json::from_str(&out).expect("setup JSON");
    assert!(
        !second["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .any(|s| s["step"]
                .as_str()
                .is_some_and(|s| s.starts_with("build band-server"))),
        "rebuilt although current: {second:#}"
    );
    assert_eq!(
        sha256_file(&lib.join("band-server")),
        installed["sha256"]["band-server"].as_str().expect("hash")
    );

    // band doctor says which way the binaries come.
    let (_, out, _) = band.run(&["doctor", "--json"], &work);
    let doctor: serde_json::Value = serde_json::from_str(&out).expect("doctor JSON");
    let way = doctor
        .as_array()
        .or_else(|| doctor["checks"].as_array())
        .and_then(|a| a.iter().find(|c| c["name"] == "server binaries"))
        .cloned()
        .unwrap_or_default();
    assert!(
        way["detail"]
            .as_str()
            .is_some_and(|d| d.contains(&source.sha256[..12]) && d.contains("built in the target")),
        "{doctor:#}"
    );

    // A probe through that target, seen from inside the sandbox.
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let lport = listener.local_addr().expect("addr").port();
    let skill = probe_skill(&work);
    let ws = work.join("ws");
    write(&ws.join("data/allowed.txt"), "hello from the host");
    write(&ws.join("data/secret.txt"), "do not read");
    write(&ws.join("data/port.txt"), &lport.to_string());
    let target_name = format!("ssh://{host}");
    let ws_s = ws.to_str().expect("utf8");
    let probe = format!("{}/probe", skill.display());
    let (code, out, err) = band.run(
        &[
            "run",
            "--workspace",
            ws_s,
            "--target",
            &target_name,
            "--json",
            &probe,
        ],
        &ws,
    );
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    assert_eq!(code, 0, "{v:#}\n{err}");
    let o = &v["output"];
    assert_eq!(o["allowed"], "hello from the host", "allowed read: {o}");
    assert_eq!(o["secret"], "denied", "deny.read wins: {o}");
    assert_eq!(o["shadow"], "denied", "{o}");
    assert_eq!(o["net"], "refused", "no allow.net: {o}");
    assert!(
        o["uid"].as_u64().is_some_and(|u| u > 0),
        "not root in the sandbox: {o}"
    );
    assert!(
        listener.accept().is_err(),
        "the sandbox reached the host's loopback listener"
    );
    assert_eq!(
        fs_err::read_to_string(ws.join("out/result.txt")).expect("written back"),
        "written in the target\n"
    );
    assert!(
        !ws.join("escape.txt").exists(),
        "a write outside allow.write came back"
    );
    // An undeclared command does not run.
    let undeclared = format!("{}/undeclared", skill.display());
    let (code, out, err) = band.run(
        &[
            "run",
            "--workspace",
            ws_s,
            "--target",
            &target_name,
            "--json",
            &undeclared,
        ],
        &ws,
    );
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    assert!(
        code == 5 || (code == 1 && v["script_exit_code"] == 127),
        "uname is not declared: {v:#}"
    );
    assert!(
        v["stderr"].as_str().is_some_and(|s| s.contains("uname"))
            || v["denied"].to_string().contains("uname"),
        "{v:#}"
    );

    // That run was served by the warm band-server in the target (the first run started it from
    // /usr/local/lib/band there, which holds only the binaries built there).
    let run_id = v["run_id"].as_str().expect("run_id").to_string();
    let server_log =
        fs_err::read_to_string(t.path().join("ov/_var_log/up/band-server.log")).unwrap_or_default();
    assert!(
        server_log.contains(&format!("run {run_id} served by the warm server")),
        "run {run_id} not served by the target's warm band-server:\n{server_log}"
    );
    assert!(
        procs_in(&target.mnt_ns)
            .iter()
            .any(|(_, cmd)| cmd.contains("band-server serve")),
        "no warm band-server in the target"
    );

    // Clean up: the host's ssh master for the target, then everything in the namespace.
    let needle = data.display().to_string();
    kill_all(&procs_mentioning(&needle));
    target.stop();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let left = procs_in(&target.mnt_ns);
    assert!(left.is_empty(), "left running in the target: {left:?}");
    let left = procs_mentioning(&needle);
    assert!(left.is_empty(), "left running on the host: {left:?}");
    let host_after: Vec<_> = host_dirs.iter().copied().map(listing).collect();
    assert_eq!(host_after, host_before, "the host's {host_dirs:?} changed");
    eprintln!(
        "build in the target: setup {setup_secs:.0} s, whole test {:.0} s",
        started.elapsed().as_secs_f64()
    );
}
