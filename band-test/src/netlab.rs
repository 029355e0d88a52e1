//! A fake internet for tests that need hosts to resolve and reach: a network namespace the test
//! makes (`ip netns add` + veth) running `band-test/netlab.py` — DNS on port 53 for the invented
//! names of a [`Spec`]'s zone, HTTP on its listeners. The lab's addresses look public (so the
//! network layer treats them as the internet) but are routed to the veth, and [`Spec::build`]
//! checks with `ip route get` that every one is before any traffic: nothing leaves the machine.
//!
//! Addresses: lab `n` (a number claimed with `ip netns add bandt<n>`, so labs of parallel tests
//! and test processes never collide) is `11.231.n.0/24` and `2a0f:b0a0:<n hex>::/64`; host 1 is
//! the machine's side of the veth, hosts 2, 3, … are the lab's servers ([`At`]).
//!
//! This is the one lab of band's tests: band-server's network suite and the `band learn` tests
//! build theirs from a [`Spec`] each.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// An address of the lab's server host `h` (2, 3, …; 1 is the machine's side of the veth).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum At {
    /// `11.231.n.h`
    V4(u32),
    /// `2a0f:b0a0:n::h`
    V6(u32),
}

/// One answer of the lab's resolver.
#[derive(Clone, Debug)]
pub enum Answer {
    /// An address of the lab (it exists in the lab's namespace).
    Lab(At),
    /// A literal address that is answered only, never given to the lab: for tests that the
    /// sandbox's DNS stub withholds it (private, metadata). Nothing listens there.
    Literal(String),
}

impl From<At> for Answer {
    fn from(a: At) -> Answer {
        Answer::Lab(a)
    }
}

/// What a lab serves: its resolver's zone (every other name is NXDOMAIN) and its HTTP listeners.
/// The lab's namespace holds exactly the addresses these name, and always `At::V4(2)`: the
/// resolver (UDP and TCP port 53 on every IPv4 address of the lab).
#[derive(Clone, Debug, Default)]
pub struct Spec {
    zone: Vec<(String, Vec<Answer>)>,
    listeners: Vec<(At, u16)>,
}

impl Spec {
    /// An empty lab: a resolver that answers NXDOMAIN, no listener.
    pub fn new() -> Spec {
        Spec::default()
    }

    /// The resolver answers `name` (A and AAAA questions) with `answers`.
    pub fn name<A: Into<Answer>>(
        mut self,
        name: &str,
        answers: impl IntoIterator<Item = A>,
    ) -> Spec {
        self.zone.push((
            name.to_string(),
            answers.into_iter().map(Into::into).collect(),
        ));
        self
    }

    /// An HTTP server on `at:port`: it answers `hello <at:port> <path>` and logs
    /// `<at:port> <path>` to `http.log` ([`Lab::log`]).
    pub fn listen(mut self, at: At, port: u16) -> Spec {
        self.listeners.push((at, port));
        self
    }

    /// The lab, or a panic that says which step failed.
    pub fn build(&self) -> Lab {
        self.try_build().unwrap_or_else(|e| panic!("netlab: {e}"))
    }

    /// The lab, or which step failed (everything made so far is removed).
    pub fn try_build(&self) -> Result<Lab, String> {
        let n = claim()?;
        let mut lab = Lab {
            ns: format!("bandt{n}"),
            veth: format!("bt{n}h"),
            n,
            dir: tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?,
            server: None,
            config: PathBuf::new(),
        };
        // From here on, dropping `lab` removes the namespace and the veth.
        lab.start(self)?;
        Ok(lab)
    }

    /// Every lab address the spec names, and the resolver's.
    fn addresses(&self) -> BTreeSet<At> {
        let zone = self
            .zone
            .iter()
            .flat_map(|(_, a)| a)
            .filter_map(|a| match a {
                Answer::Lab(at) => Some(*at),
                Answer::Literal(_) => None,
            });
        zone.chain(self.listeners.iter().map(|(at, _)| *at))
            .chain([At::V4(2)])
            .collect()
    }
}

/// A free lab number: `ip netns add` fails when the name exists (another lab, of this test
/// process or another, has it), so two labs never share addresses.
fn claim() -> Result<u32, String> {
    let base = std::process::id() + NEXT.fetch_add(1, Ordering::SeqCst) * 37;
    (0..250)
        .map(|i| (base + i) % 250 + 1)
        .find(|n| {
            Command::new("ip")
                .args(["netns", "add", &format!("bandt{n}")])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .ok_or_else(|| "no free lab number (ip netns add bandt1..250 all failed)".to_string())
}

fn sh(args: &[&str]) -> Result<String, String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{args:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// One lab: its namespace, veth, server and a band-server config whose `dns_upstream` is the
/// lab's resolver. Removed on drop.
pub struct Lab {
    ns: String,
    veth: String,
    n: u32,
    dir: tempfile::TempDir,
    server: Option<Child>,
    /// A band-server config file (`BAND_SERVER_CONFIG`) asking the lab's resolver.
    pub config: PathBuf,
}

impl Lab {
    /// A lab whose resolver answers each of `names` with [`Lab::host`] (and NXDOMAIN otherwise),
    /// serving HTTP on `host:8080`.
    pub fn new(names: &[&str]) -> Lab {
        names
            .iter()
            .fold(Spec::new(), |s, name| s.name(name, [At::V4(2)]))
            .listen(At::V4(2), 8080)
            .build()
    }

    fn start(&mut self, spec: &Spec) -> Result<(), String> {
        let addrs = spec.addresses();
        let (ns, veth, n) = (self.ns.as_str(), self.veth.as_str(), self.n);
        let peer = format!("bt{n}n");
        let _ = Command::new("ip").args(["link", "del", veth]).output();
        sh(&[
            "ip", "link", "add", veth, "type", "veth", "peer", "name", &peer,
        ])?;
        sh(&["ip", "link", "set", &peer, "netns", ns])?;
        let v6 = addrs.iter().any(|a| matches!(a, At::V6(_)));
        sh(&[
            "ip",
            "addr",
            "add",
            &format!("{}/24", self.v4(1)),
            "dev",
            veth,
        ])?;
        if v6 {
            let a = format!("{}/64", self.v6(1));
            sh(&["ip", "-6", "addr", "add", &a, "dev", veth, "nodad"])?;
        }
        sh(&["ip", "link", "set", veth, "up"])?;
        let nsx = |args: &[&str]| {
            let mut a = vec!["ip", "netns", "exec", ns];
            a.extend_from_slice(args);
            sh(&a)
        };
        nsx(&["ip", "link", "set", "lo", "up"])?;
        for at in &addrs {
            match at {
                At::V4(_) => {
                    let a = format!("{}/24", self.at(*at));
                    nsx(&["ip", "addr", "add", &a, "dev", &peer])?
                }
                At::V6(_) => {
                    let a = format!("{}/64", self.at(*at));
                    nsx(&["ip", "-6", "addr", "add", &a, "dev", &peer, "nodad"])?
                }
            };
        }
        nsx(&["ip", "link", "set", &peer, "up"])?;
        nsx(&["ip", "route", "add", "default", "via", &self.v4(1)])?;
        if v6 {
            nsx(&["ip", "-6", "route", "add", "default", "via", &self.v6(1)])?;
        }
        // Nothing may leave the machine: every address a test can reach is routed to the veth.
        for at in &addrs {
            let a = self.at(*at);
            let r = sh(&["ip", "route", "get", &a])?;
            if !r.contains(&format!("dev {veth}")) {
                return Err(format!(
                    "{a} is not routed to the lab ({r}); refusing to send traffic"
                ));
            }
        }
        let zone: serde_json::Map<String, serde_json::Value> = spec
            .zone
            .iter()
            .map(|(name, answers)| {
                let answers = answers
                    .iter()
                    .map(|a| match a {
                        Answer::Lab(at) => self.at(*at),
                        Answer::Literal(s) => s.clone(),
                    })
                    .collect();
                (name.clone(), answers)
            })
            .collect();
        let listeners = spec.listeners.iter().map(|(at, port)| match at {
            At::V4(_) => format!("{}:{port}", self.at(*at)),
            At::V6(_) => format!("[{}]:{port}", self.at(*at)),
        });
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("netlab.py");
        let server = Command::new("ip")
            .args(["netns", "exec", ns, "/usr/bin/python3"])
            .arg(&script)
            .arg(self.dir.path())
            .arg(serde_json::Value::Object(zone).to_string())
            .args(listeners)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("{}: {e}", script.display()))?;
        self.server = Some(server);
        let start = Instant::now();
        while !self.dir.path().join("ready").exists() {
            if start.elapsed() > Duration::from_secs(20) {
                return Err("netlab.py did not start within 20 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let resolver = self.v4(2);
        self.config = self.dir.path().join("server.toml");
        fs_err::write(
            &self.config,
            format!("dns_upstream = [\"{resolver}:53\"]\n"),
        )
        .map_err(|e| e.to_string())?;
        Ok(())
    }

    /// The address `at` of this lab.
    pub fn at(&self, at: At) -> String {
        match at {
            At::V4(h) => self.v4(h),
            At::V6(h) => self.v6(h),
        }
    }

    /// `11.231.n.h`
    pub fn v4(&self, h: u32) -> String {
        format!("11.231.{}.{h}", self.n)
    }

    /// `2a0f:b0a0:n::h`
    pub fn v6(&self, h: u32) -> String {
        format!("2a0f:b0a0:{:x}::{h}", self.n)
    }

    /// The lab's first server host, `11.231.n.2` (what [`Lab::new`]'s names resolve to).
    pub fn host(&self) -> String {
        self.v4(2)
    }

    /// The lab's network namespace (`ip netns exec <it> …` runs a server of the test's own there).
    pub fn netns(&self) -> &str {
        &self.ns
    }

    /// The lab's own temporary directory (its logs and config; a test may put files there).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A log of the lab's server: `dns.log` (`<name> <qtype>`, one question a line) or
    /// `http.log` (`<addr:port> <path>`).
    pub fn log(&self, name: &str) -> String {
        fs_err::read_to_string(self.dir.path().join(name)).unwrap_or_default()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Some(server) = &mut self.server {
            let _ = server.kill();
            let _ = server.wait();
        }
        // The veth first (both ends go), the namespace last: its name is the claim on the lab's
        // number, and once it is gone another lab may take the number and make a veth of the same
        // name, which a late `ip link del` here would remove (its addresses then unrouted).
        let _ = Command::new("ip")
            .args(["link", "del", &self.veth])
            .output();
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).output();
    }
}
