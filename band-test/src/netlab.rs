//! A fake internet for tests that need one host to resolve and reach: a network namespace the
//! test makes (`ip netns add` + veth) running band-server's `tests/suite/netlab.py` (DNS on port
//! 53 for the invented names given, HTTP on `ADDR:8080`). The host's address looks public (so the
//! network layer treats it as the internet) but is routed to the veth, and [`Lab::new`] checks
//! with `ip route get` that it is before any traffic: nothing leaves the machine. The same
//! address plan as band-server's network suite (`11.231.n.0/24`, a number claimed with
//! `ip netns add bandt<n>`), so labs of both suites never collide.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// One lab: its namespace, veth, server and a band-server config whose `dns_upstream` is the
/// lab's resolver. Removed on drop.
pub struct Lab {
    ns: String,
    veth: String,
    n: u32,
    dir: tempfile::TempDir,
    server: Child,
    /// A band-server config file (`BAND_SERVER_CONFIG`) asking the lab's resolver.
    pub config: PathBuf,
}

fn sh(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Lab {
    /// A lab whose resolver answers each of `names` with [`Lab::host`] (and NXDOMAIN otherwise),
    /// serving HTTP on `host:8080`.
    pub fn new(names: &[&str]) -> Lab {
        let base = std::process::id() + NEXT.fetch_add(1, Ordering::SeqCst) * 37 + 101;
        let n = (0..250)
            .map(|i| (base + i) % 250 + 1)
            .find(|n| {
                Command::new("ip")
                    .args(["netns", "add", &format!("bandt{n}")])
                    .output()
                    .is_ok_and(|o| o.status.success())
            })
            .unwrap_or_else(|| panic!("no free lab number"));
        let ns = format!("bandt{n}");
        let veth = format!("bt{n}h");
        let peer = format!("bt{n}n");
        let _ = Command::new("ip").args(["link", "del", &veth]).output();
        sh(&[
            "ip", "link", "add", &veth, "type", "veth", "peer", "name", &peer,
        ]);
        sh(&["ip", "link", "set", &peer, "netns", &ns]);
        let v4 = |h: u32| format!("11.231.{n}.{h}");
        sh(&["ip", "addr", "add", &format!("{}/24", v4(1)), "dev", &veth]);
        sh(&["ip", "link", "set", &veth, "up"]);
        let nsx = |args: &[&str]| {
            let mut a = vec!["ip", "netns", "exec", ns.as_str()];
            a.extend_from_slice(args);
            sh(&a);
        };
        nsx(&["ip", "link", "set", "lo", "up"]);
        nsx(&["ip", "addr", "add", &format!("{}/24", v4(2)), "dev", &peer]);
        nsx(&["ip", "link", "set", &peer, "up"]);
        nsx(&["ip", "route", "add", "default", "via", &v4(1)]);
        let r = Command::new("ip")
            .args(["route", "get", &v4(2)])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        assert!(
            r.contains(&format!("dev {veth}")),
            "{} is not routed to the lab ({r}); refusing to send traffic",
            v4(2)
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let zone: Vec<String> = names
            .iter()
            .map(|name| format!("\"{name}\": [\"{}\"]", v4(2)))
            .collect();
        let zone = format!("{{{}}}", zone.join(", "));
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../band-server/tests/suite/netlab.py");
        let server = Command::new("ip")
            .args(["netns", "exec", &ns, "/usr/bin/python3"])
            .arg(&script)
            .arg(dir.path())
            .arg(zone)
            .arg(format!("{}:8080", v4(2)))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("netlab: {e}"));
        let start = Instant::now();
        while !dir.path().join("ready").exists() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "netlab did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let config = dir.path().join("server.toml");
        fs_err::write(&config, format!("dns_upstream = [\"{}:53\"]\n", v4(2)))
            .expect("write config");
        Lab {
            ns,
            veth,
            n,
            dir,
            server,
            config,
        }
    }

    /// The lab's one host (what every name resolves to).
    pub fn host(&self) -> String {
        format!("11.231.{}.2", self.n)
    }

    /// The lab's network namespace (`ip netns exec <it> …` runs a server of the test's own there).
    pub fn netns(&self) -> &str {
        &self.ns
    }

    /// A log of the lab's server: `dns.log` (one question a line) or `http.log`.
    pub fn log(&self, name: &str) -> String {
        fs_err::read_to_string(self.dir.path().join(name)).unwrap_or_default()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).output();
        let _ = Command::new("ip")
            .args(["link", "del", &self.veth])
            .output();
    }
}
