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

use super::helpers::{STATE_DIR, a_lease_names, band_tables, privileged, server};

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

/// The pid and folder of the warm band-server a line of band-sandboxd's log says it started
/// ("band-sandboxd: warm band-server (pid N) in DIR").
fn warm_server(line: &str) -> Option<(u32, PathBuf)> {
    let rest = line.strip_prefix("band-sandboxd: warm band-server (pid ")?;
    let (pid, dir) = rest.split_once(") in ")?;
    Some((pid.parse().ok()?, PathBuf::from(dir.trim())))
}

/// A pod's files under `root`: its band (`BAND.md`), its workspace (`ws/`, with `data/in.txt`,
/// `top.txt` the band does not admit, and `data/link` leading to `outside/`), its token.
struct Pod {
    ws: PathBuf,
    outside: PathBuf,
    token: PathBuf,
}

fn pod(root: &Path) -> Pod {
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
    Pod { ws, outside, token }
}

/// What `sdk_test.py` says, asserted whole.
fn sdk_test(grpc: &str, http: &str, p: &Pod, policy_sha256: &str) {
    let out = Command::new(python())
        .arg(repo().join("tests/sandboxd/sdk_test.py"))
        .args([grpc, http])
        .arg(&p.token)
        .arg(&p.ws)
        .arg(&p.outside)
        .arg(policy_sha256)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    eprintln!("{said}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && said.ends_with("all ok\n"), "{said}");
}

/// band-sandboxd serving `root/BAND.md` on loopback ports, its resolver a dead loopback port;
/// its stderr kept ([`Daemon::log`]) and shown with the test's.
struct Daemon {
    child: std::process::Child,
    grpc: String,
    http: String,
    policy_sha256: String,
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    _watch: std::sync::mpsc::Sender<()>,
}

impl Daemon {
    fn start(root: &Path, ws: &Path, token: &Path) -> Daemon {
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
        let mut child = Command::new(env!("CARGO_BIN_EXE_band-sandboxd"))
            .args(&args)
            .env(band_server::config::CONFIG_ENV, &cfg)
            .env(band_server::config::STATE_DIR_ENV, STATE_DIR)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let _watch =
            band_test::kill_after(&child, std::time::Duration::from_secs(600), "band-sandboxd");
        let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
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
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = log.clone();
        std::thread::spawn(move || {
            for line in err.lines().map_while(Result::ok) {
                eprintln!("band-sandboxd: {line}");
                kept.lock().unwrap().push(line);
            }
        });
        Daemon {
            child,
            grpc,
            http,
            policy_sha256,
            log,
            _watch,
        }
    }

    /// The band run of process `id`, from the log ("process ID is run RUN").
    fn run_of(&self, id: &str) -> String {
        let said = format!("band-sandboxd: process {id} is run ");
        let log = self.log.lock().unwrap();
        log.iter()
            .find_map(|l| l.strip_prefix(&said))
            .unwrap_or_else(|| panic!("no run for process {id} in {log:?}"))
            .to_string()
    }

    /// Connect to `addr` (one of its ports) and find the connection band-sandboxd accepted for
    /// it (a copy of its descriptor, `pidfd_getfd`): whether it has `TCP_NODELAY`. Without it
    /// the last small frames of a reply wait for the client's delayed ACK.
    fn accepted_nodelay(&self, addr: &str) -> bool {
        use rustix::process::{Pid, PidfdFlags, PidfdGetfdFlags, pidfd_getfd, pidfd_open};
        let client = std::net::TcpStream::connect(addr).unwrap();
        let ours = client.local_addr().unwrap();
        let pid = Pid::from_raw(self.child.id() as i32).unwrap();
        let pidfd = pidfd_open(pid, PidfdFlags::empty()).unwrap();
        let found = std::cell::Cell::new(None);
        band_test::wait_until("band-sandboxd to accept the connection", || {
            let fds = fs_err::read_dir(format!("/proc/{}/fd", self.child.id())).unwrap();
            for e in fds.flatten() {
                let Ok(n) = e.file_name().to_string_lossy().parse::<i32>() else {
                    continue;
                };
                let Ok(fd) = pidfd_getfd(&pidfd, n, PidfdGetfdFlags::empty()) else {
                    continue;
                };
                let peer = rustix::net::getpeername(&fd).ok().flatten();
                let peer = peer.and_then(|a| std::net::SocketAddr::try_from(a).ok());
                if peer == Some(ours) {
                    found.set(Some(rustix::net::sockopt::tcp_nodelay(&fd).unwrap()));
                    return true;
                }
            }
            false
        });
        drop(client);
        found.get().unwrap()
    }

    /// The pod's warm band-server: its pid and folder ([`warm_server`]).
    fn warm(&self) -> Option<(u32, PathBuf)> {
        let log = self.log.lock().unwrap();
        log.iter().rev().find_map(|l| warm_server(l))
    }

    /// Wait until the pod's warm server listens: the runs after this are its.
    fn wait_for_warm_server(&self) {
        band_test::wait_until("the warm server's socket", || {
            self.warm().is_some_and(|(_, dir)| {
                fs_err::read_dir(dir).is_ok_and(|mut es| {
                    es.any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".sock")))
                })
            })
        });
    }

    /// What the warm server's log says (empty without one).
    fn warm_log(&self) -> String {
        self.warm()
            .and_then(|(_, dir)| fs_err::read_to_string(dir.join("serve.log")).ok())
            .unwrap_or_default()
    }

    /// Wait until no run's band-server is left (its warm server's children are its runs and
    /// spares; the server itself stays), then SIGTERM: the runs drained, the warm server stops
    /// once its spares have removed their sandboxes, the ports close, exit 0. Nothing of a
    /// spare is left then, nor the warm server's folder.
    fn stop(&mut self) {
        let warm = self.warm();
        band_test::wait_until("band-sandboxd's runs to end", || {
            children(self.child.id())
                .into_iter()
                .all(|c| warm.as_ref().is_some_and(|(w, _)| *w == c))
        });
        let spares = band_test::spares_in(&self.warm_log());
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(self.child.id() as i32).unwrap(),
            rustix::process::Signal::TERM,
        )
        .unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status}");
        assert!(std::net::TcpStream::connect(&self.grpc).is_err());
        // At once, not eventually: band-sandboxd waited for its warm server, and it for its
        // spares.
        if let Some((pid, dir)) = warm {
            assert!(
                !Path::new(&format!("/proc/{pid}")).exists(),
                "warm server {pid}"
            );
            assert!(!dir.exists(), "{} is left", dir.display());
        }
        let tables = band_tables();
        for s in &spares {
            assert_eq!(run_cgroups(s), Vec::<PathBuf>::new(), "spare {s}'s cgroups");
            let table = band_server::layers::net::nft::table_name(s);
            assert!(
                !tables.contains(&table),
                "spare {s}'s table {table} is left"
            );
        }
    }
}

/// A test that fails before [`Daemon::stop`] leaves no band-sandboxd behind (its runs' band-servers
/// then see their channel close and tear the runs down).
impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Two concurrent Starts under a band with `allow.net`: each run has its own nftables table
/// (named after its run) while it runs, and neither is left once they end.
#[test]
fn privileged_sandboxd_networked_runs_get_their_own_egress_tables() {
    privileged!(band_test::sandbox_missing().or_else(sdk_missing));
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let p = pod(root);
    let band = BAND.replace("  read:", "  net: [\"a.test:443\"]\n  read:");
    fs_err::write(root.join("BAND.md"), band).unwrap();
    let mut d = Daemon::start(root, &p.ws, &p.token);
    let mut two = Command::new(python())
        .arg(repo().join("tests/sandboxd/two_runs.py"))
        .arg(&d.grpc)
        .arg(&p.token)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let _watch = band_test::kill_after(&two, std::time::Duration::from_secs(300), "two_runs.py");
    let mut said = std::io::BufReader::new(two.stdout.take().unwrap());
    let mut line = String::new();
    said.read_line(&mut line).unwrap();
    let ids: Vec<&str> = line
        .strip_prefix("ready ")
        .unwrap_or_else(|| panic!("{line}"))
        .split_whitespace()
        .collect();
    let tables: Vec<String> = ids
        .iter()
        .map(|id| band_server::layers::net::nft::table_name(&d.run_of(id)))
        .collect();
    assert_ne!(tables[0], tables[1]);
    let now = band_tables();
    for t in &tables {
        assert!(now.contains(t), "{t} not in {now:?}");
    }
    {
        use std::io::Write;
        writeln!(two.stdin.as_mut().unwrap()).unwrap();
    }
    line.clear();
    said.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "done 0 0");
    assert!(two.wait().unwrap().success());
    band_test::wait_until("the runs' tables to go", || {
        let now = band_tables();
        tables.iter().all(|t| !now.contains(t))
    });
    d.stop();
}

#[test]
fn privileged_sandboxd_serves_the_sdk_runs_isolated_and_leaves_nothing() {
    privileged!(band_test::sandbox_missing().or_else(sdk_missing));
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let Pod { ws, outside, token } = pod(root);
    let mut d = Daemon::start(root, &ws, &token);
    let (grpc, http) = (d.grpc.clone(), d.http.clone());
    let policy_sha256 = d.policy_sha256.clone();
    sdk_test(&grpc, &http, &Pod { ws, outside, token }, &policy_sha256);
    // Both ports answer without Nagle's delay.
    let (g, h) = (d.grpc.clone(), d.http.clone());
    assert!(d.accepted_nodelay(&g), "gRPC: no TCP_NODELAY");
    assert!(d.accepted_nodelay(&h), "HTTP: no TCP_NODELAY");
    // The pod's warm server served its runs (the first ones may come before it listens).
    let warm = d.warm_log();
    assert!(
        warm.contains("served by the warm server"),
        "no run was served warm: {warm}"
    );

    // Every run's band-server is gone (the killed client's too), and with it what it built.
    d.stop();
}

/// band-sandboxd killed outright (SIGKILL: no drain, no stop of its own): its warm band-server
/// sees its parent gone (`--stop-with-parent`), stops as on SIGTERM and removes its folder.
#[test]
fn privileged_a_killed_sandboxd_leaves_no_warm_server_behind() {
    privileged!(band_test::sandbox_missing());
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let p = pod(root);
    let mut d = Daemon::start(root, &p.ws, &p.token);
    d.wait_for_warm_server();
    let (pid, dir) = d.warm().unwrap();
    d.child.kill().unwrap();
    d.child.wait().unwrap();
    band_test::wait_until("the warm server to stop", || {
        !Path::new(&format!("/proc/{pid}")).exists()
    });
    assert!(!dir.exists(), "{} is left", dir.display());
}

/// What `many_runs.py` said: the probes' reports (index, process id, exit code, report) and the
/// killed clients' runs (index, process id).
struct Many {
    probes: Vec<(usize, String, i32, serde_json::Value)>,
    killed: Vec<(usize, String)>,
}

/// `many_runs.py` with `n` Starts at once, every `every`-th client killed; `at_ready` is called
/// with the probes' process ids while every probe is alive, before they are let go.
fn many_runs(
    d: &Daemon,
    p: &Pod,
    n: usize,
    every: usize,
    at_ready: impl FnOnce(&[String]),
) -> Many {
    use std::io::Write;
    let mut driver = Command::new(python())
        .arg(repo().join("tests/sandboxd/many_runs.py"))
        .arg(&d.grpc)
        .arg(&p.token)
        .args([n.to_string(), every.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let _watch =
        band_test::kill_after(&driver, std::time::Duration::from_secs(600), "many_runs.py");
    let said = std::io::BufReader::new(driver.stdout.take().unwrap());
    let mut stdin = driver.stdin.take();
    let mut at_ready = Some(at_ready);
    let mut many = Many {
        probes: Vec::new(),
        killed: Vec::new(),
    };
    let mut all = false;
    for line in said.lines() {
        let line = line.unwrap();
        let words: Vec<&str> = line.splitn(5, ' ').collect();
        match words[..] {
            ["killed", i, id] => many.killed.push((i.parse().unwrap(), id.to_string())),
            ["ready", ..] => {
                let ids: Vec<String> = words[1..].join(" ").split(' ').map(String::from).collect();
                let Some(at_ready) = at_ready.take() else {
                    panic!("many_runs.py was ready twice: {line}");
                };
                at_ready(&ids);
                writeln!(stdin.as_mut().unwrap()).unwrap();
            }
            ["run", i, id, code, report] => many.probes.push((
                i.parse().unwrap(),
                id.to_string(),
                code.parse().unwrap(),
                serde_json::from_str(report).unwrap_or_else(|e| panic!("{e}: {line}")),
            )),
            ["all", _] => all = true,
            _ => panic!("many_runs.py: {line}"),
        }
    }
    drop(stdin.take());
    assert!(
        driver.wait().unwrap().success() && all,
        "many_runs.py failed"
    );
    many
}

/// Issue 42 on the platform's path: 64 Starts at once on one pod, its runs served by the pod's
/// warm band-server with a spare of their shape waiting, beside another pod whose warm server
/// has a spare too. All 64 are alive at once, so that other pod's spare must leave (the pool has
/// 64 uids); then every fourth client is killed. While the 48 others are alive each has its own
/// nftables table; then each one sees, from inside, its own uid (none shared with another run
/// alive beside it), only its own processes and only its own file in `/tmp`. Once both
/// band-sandboxds have stopped, nothing of any run or spare is left: processes, cgroups, run
/// folders, leases, tables.
#[test]
fn privileged_sixty_four_starts_at_once_see_only_their_own_and_leave_nothing_behind() {
    privileged!(band_test::sandbox_missing().or_else(sdk_missing));
    const RUNS: usize = 64;
    const KILL_EVERY: usize = 4;
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let p = pod(root);
    let band = BAND.replace("  read:", "  net: [\"a.test:443\"]\n  read:");
    fs_err::write(root.join("BAND.md"), band).unwrap();
    // Another pod beside it, whose warm server has a spare waiting: that spare holds a uid the
    // 64 need, and only a request of theirs can free it (its server is not theirs).
    let beside = root.join("beside");
    let q = pod(&beside);
    let mut other = Daemon::start(&beside, &q.ws, &q.token);
    let mut d = Daemon::start(root, &p.ws, &p.token);
    // One run first on each, so that a spare of the runs' shape waits when the 64 come.
    let mut first = Vec::new();
    for (daemon, pod) in [(&other, &q), (&d, &p)] {
        daemon.wait_for_warm_server();
        let one = many_runs(daemon, pod, 1, RUNS, |_| {});
        assert_eq!(one.probes.len(), 1);
        band_test::wait_until("a spare of the pod's runs", || {
            daemon.warm_log().contains(" ready for ")
        });
        first.push(daemon.run_of(&one.probes[0].1));
    }

    // The tables while every probe is alive (a run served by a spare has the spare's).
    let mut alive = Vec::new();
    let mut tables_then = std::collections::BTreeSet::new();
    let many = many_runs(&d, &p, RUNS, KILL_EVERY, |ids| {
        alive = ids.iter().map(|id| d.run_of(id)).collect();
        tables_then = band_tables();
    });
    assert_eq!(many.killed.len(), RUNS / KILL_EVERY);
    assert_eq!(many.probes.len(), RUNS - RUNS / KILL_EVERY);
    assert_eq!(alive.len(), many.probes.len());
    let mut uids = std::collections::BTreeSet::new();
    for (i, id, code, seen) in &many.probes {
        assert_eq!(*code, 0, "probe {i} (process {id}): {seen}");
        assert_eq!(seen["i"], i.to_string(), "probe {i}: {seen}");
        assert_eq!(seen["foreign"], serde_json::json!([]), "probe {i}: {seen}");
        assert_eq!(
            seen["tmp"],
            serde_json::json!([format!("mine-{i}")]),
            "probe {i}: {seen}"
        );
        assert!(
            seen["pids"].as_u64().is_some_and(|n| n < 6),
            "probe {i}: {seen}"
        );
        let uid = seen["uid"].as_u64().unwrap();
        assert!(uid > 0, "probe {i}: {seen}");
        assert!(
            uids.insert(uid),
            "probe {i} has the uid of another run alive beside it: {seen}"
        );
    }
    // The killed clients' runs end: their commands are gone.
    for (i, _) in &many.killed {
        let cmd = format!("sleep {}", 1200 + i);
        band_test::wait_until(&format!("killed client {i}'s run to end"), || {
            !band_test::running(&cmd)
        });
    }
    // Every probe was the warm server's, and a spare served one of the 64.
    let runs: Vec<String> = many
        .probes
        .iter()
        .map(|(_, id, _, _)| id)
        .chain(many.killed.iter().map(|(_, id)| id))
        .map(|id| d.run_of(id))
        .chain(first)
        .collect();
    let log = d.warm_log();
    for run in &alive {
        assert!(
            log.contains(&format!("run {run} served by the warm server (")),
            "run {run} was not served warm:\n{log}"
        );
    }
    assert!(
        runs.iter().any(|run| sandbox_of(&log, run) != *run),
        "no run was served by a spare:\n{log}"
    );
    // Each probe had a table of its own while they were all alive.
    let own: std::collections::BTreeSet<String> = alive
        .iter()
        .map(|run| band_server::layers::net::nft::table_name(&sandbox_of(&log, run)))
        .collect();
    assert_eq!(own.len(), alive.len(), "two runs shared a table");
    for table in &own {
        assert!(
            tables_then.contains(table),
            "{table} not in {tables_then:?}"
        );
    }

    // The other pod's spare left for one of them.
    let beside_log = other.warm_log();
    assert!(
        beside_log.contains("removed (for a run of another server waiting for a uid;"),
        "the other pod's spare did not leave:\n{beside_log}"
    );

    // Stopped, band-sandboxd has waited for its warm server, and it for every run and spare.
    let spares: Vec<String> = [&log, &beside_log]
        .into_iter()
        .flat_map(|l| band_test::spares_in(l))
        .collect();
    d.stop();
    other.stop();
    let tables = band_tables();
    for run in runs.iter().chain(&spares) {
        assert_eq!(
            run_cgroups(run),
            Vec::<PathBuf>::new(),
            "run {run}'s cgroups"
        );
        let table = band_server::layers::net::nft::table_name(run);
        assert!(
            !tables.contains(&table),
            "run {run}'s table {table} is left"
        );
        let folder = Path::new(STATE_DIR).join("runs").join(run);
        assert!(!folder.exists(), "{} is left", folder.display());
        assert!(!a_lease_names(run), "a lease still names run {run}");
    }
}

/// The id the sandbox of `run` was built under, from a warm server's `log`: a run served by a
/// spare ("run RUN served by the warm server (a spare; pid P, …") ran in that spare's, the last
/// spare process P said was ready before it; any other run in its own.
fn sandbox_of(log: &str, run: &str) -> String {
    let served = format!("run {run} served by the warm server (a spare; pid ");
    let Some(at) = log.find(&served) else {
        return run.to_string();
    };
    let pid = log[at + served.len()..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap_or_default();
    let ready = format!("(pid {pid})");
    log[..at]
        .lines()
        .rev()
        .find(|l| l.contains(" ready for ") && l.ends_with(&ready))
        .and_then(|l| band_test::spares_in(l).pop())
        .unwrap_or_else(|| panic!("no spare of pid {pid} before run {run}:\n{log}"))
}

/// Why the image test cannot run here, if it cannot: `BAND_TEST_IMAGE=0` (to skip it locally:
/// it builds a Debian image, about 2 min), or a tool it needs is missing.
fn image_missing() -> Option<String> {
    if std::env::var("BAND_TEST_IMAGE").is_ok_and(|v| v == "0") {
        return Some("BAND_TEST_IMAGE=0".into());
    }
    ["podman", "runc", "umoci", "mmdebstrap"]
        .into_iter()
        .find(|t| {
            !Command::new("sh")
                .args(["-c", &format!("command -v {t}")])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .map(|t| format!("{t} is missing (.ci/run installs it)"))
}

/// A free loopback port (bound and let go: podman publishes it next).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn podman(args: &[&str]) -> String {
    let out = Command::new("podman").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "podman {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What the container said (band-sandboxd logs on stderr, which `podman logs` gives on its own).
fn podman_logs(name: &str) -> String {
    let out = Command::new("podman")
        .args(["logs", name])
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A container of the image, removed however the test ends.
struct Container {
    name: String,
    image: String,
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = Command::new("podman")
            .args(["rm", "-f", "-t", "0", &self.name])
            .stdout(Stdio::null())
            .status();
        let _ = Command::new("podman")
            .args(["rmi", "-f", &self.image])
            .stdout(Stdio::null())
            .status();
    }
}

/// The pid namespace of process `pid` (`pid:[N]`), if it is still there.
fn pid_ns(pid: u32) -> Option<String> {
    fs_err::read_link(format!("/proc/{pid}/ns/pid"))
        .ok()
        .map(|p| p.display().to_string())
}

/// The processes of the machine in the pid namespace `ns`.
fn processes_in(ns: &str) -> Vec<u32> {
    fs_err::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|p| pid_ns(*p).as_deref() == Some(ns))
        .collect()
}

/// The cgroup folders of run `run` in the machine's hierarchies (v1: one per controller).
fn run_cgroups(run: &str) -> Vec<PathBuf> {
    let root = Path::new("/sys/fs/cgroup");
    let mut at = vec![root.join("band").join(run)];
    for e in fs_err::read_dir(root).unwrap().flatten() {
        at.push(e.path().join("band").join(run));
    }
    at.into_iter().filter(|p| p.exists()).collect()
}

/// The image (`deploy/image/build.sh`, from Debian packages, with this build's binaries) under
/// podman, as the SandboxTemplate runs it: the container's own pid and network namespaces (no
/// `--pid host`; the SDK reaches it through published loopback ports), the capabilities the
/// manifest states and nothing more (not `--privileged`), `/dev/net/tun`, the host's cgroup
/// hierarchy mounted writable (the template's hostPath), the runtime's masks off (`procMount:
/// Unmasked`), its resolver the test's lab (a network namespace of the test's). The SDK script
/// checks the contract, the token, and two concurrent Starts from inside; a run is held to its
/// memory limit; an allowed name resolves through the lab and its server answers; then two runs
/// are left waiting and the container is stopped: their processes, cgroups, mounts and tables
/// are gone from the machine. It builds an image (about
/// 45 s with a reachable Debian mirror); `BAND_TEST_IMAGE=0` skips it outside CI. runc: this
/// host's hybrid cgroup v1 hierarchy is refused by crun.
#[test]
fn privileged_sandboxd_image_runs_under_podman() {
    privileged!(
        image_missing()
            .or_else(band_test::sandbox_missing)
            .or_else(sdk_missing)
    );
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let p = pod(root);
    let bin = Path::new(server()).parent().unwrap();
    let out = root.join("image");
    let built = Command::new(repo().join("deploy/image/build.sh"))
        .arg(&out)
        .env("BIN_DIR", bin)
        .status()
        .unwrap();
    assert!(built.success(), "build.sh: {built}");
    let said = podman(&[
        "load",
        "-q",
        "-i",
        &out.join("band-sandboxd.tar").display().to_string(),
    ]);
    // "Loaded image: localhost/0.1.0:latest" (the layout's tag is the version).
    let image = said
        .lines()
        .find_map(|l| l.strip_prefix("Loaded image: "))
        .unwrap_or_else(|| panic!("{said}"))
        .trim()
        .to_string();
    // A memory limit, seen from inside a run of the container (`sdk_test.py --memory`), and a
    // name the runs may reach, answered by the test's own lab (a network namespace of its own,
    // reached from the container's bridge through the host's routes; `sdk_test.py --net`).
    let band = BAND
        .replace("limit:\n", "limit:\n  maxMemoryBytes: 64m\n")
        .replace("  read:", "  net: [\"api.example.test:80\"]\n  read:");
    assert!(band.contains("maxMemoryBytes") && band.contains("net:"));
    let lab = band_test::netlab::Spec::new()
        .name("api.example.test", [band_test::netlab::At::V4(2)])
        .listen(band_test::netlab::At::V4(2), 80)
        .build();
    fs_err::write(root.join("BAND.md"), band).unwrap();
    fs_err::create_dir_all(root.join("pod")).unwrap();
    fs_err::copy(root.join("BAND.md"), root.join("pod/BAND.md")).unwrap();
    fs_err::create_dir_all(root.join("tok")).unwrap();
    fs_err::copy(&p.token, root.join("tok/token")).unwrap();
    fs_err::write(
        root.join("server.toml"),
        format!("dns_upstream = [\"{}:53\"]\n", lab.host()),
    )
    .unwrap();
    let c = Container {
        name: format!("band-test-sandboxd-{}", std::process::id()),
        image,
    };
    let (gport, hport) = (free_port(), free_port());
    let (grpc, http) = (format!("127.0.0.1:{gport}"), format!("127.0.0.1:{hport}"));
    let vol = |from: &Path, to: &str| format!("{}:{to}", from.display());
    // The capabilities the SandboxTemplate adds, read from it: the container gets those and no more.
    let caps = Command::new(python())
        .args([
            "-c",
            "import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); \
             c = d['spec']['podTemplate']['spec']['containers'][0]['securityContext']['capabilities']; \
             assert c['drop'] == ['ALL'], c; print(','.join(c['add']))",
        ])
        .arg(repo().join("deploy/kubernetes/sandbox-template.yaml"))
        .output()
        .unwrap();
    assert!(
        caps.status.success(),
        "{}",
        String::from_utf8_lossy(&caps.stderr)
    );
    let caps = String::from_utf8_lossy(&caps.stdout).trim().to_string();
    assert!(
        caps.contains("SYS_ADMIN") && !caps.contains("ALL"),
        "{caps}"
    );
    let volumes = [
        "/sys/fs/cgroup:/sys/fs/cgroup:rw".to_string(),
        vol(&root.join("pod"), "/etc/band/pod:ro"),
        vol(&root.join("tok"), "/etc/band/token:ro"),
        vol(&p.ws, "/workspace"),
        vol(&root.join("server.toml"), "/etc/band/server.toml:ro"),
    ];
    let mut run = Command::new("podman");
    run.args([
        "--runtime",
        "runc",
        "run",
        "-d",
        "--pull=never",
        "--name",
        &c.name,
    ])
    .args(["-p", &format!("127.0.0.1:{gport}:9090")])
    .args(["-p", &format!("127.0.0.1:{hport}:8080")])
    .args([
        "--ulimit",
        "nofile=1024:1024",
        "--ulimit",
        "nproc=1024:1024",
    ])
    .args(["--cap-drop", "ALL", "--cap-add", &caps])
    .args([
        "--device-cgroup-rule",
        "c *:* m",
        "--device",
        "/dev/net/tun",
    ])
    .args(["--security-opt", "seccomp=unconfined"])
    .args(["--security-opt", "apparmor=unconfined"])
    .args(["--security-opt", "unmask=ALL"])
    .args(["--security-opt", "no-new-privileges"]);
    for v in &volumes {
        run.args(["-v", v]);
    }
    let run = run
        .args([
            "--read-only",
            "--tmpfs",
            "/run",
            "--tmpfs",
            "/tmp",
            &c.image,
        ])
        .args(["--band", "/etc/band/pod/BAND.md"])
        .args([
            "--token-file",
            "/etc/band/token/token",
            "--workspace",
            "/workspace",
        ])
        .args(["--grpc", "0.0.0.0:9090", "--http", "0.0.0.0:8080"])
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    // The container's own pid namespace: its first process (band-sandboxd) is pid 1 there.
    let pid1: u32 = podman(&["inspect", "--format", "{{.State.Pid}}", &c.name])
        .trim()
        .parse()
        .unwrap();
    let ns = pid_ns(pid1).unwrap();
    assert_ne!(
        Some(ns.clone()),
        pid_ns(std::process::id()),
        "not the host's pid namespace"
    );
    band_test::wait_until("the container's ports", || {
        let running = podman(&["inspect", "--format", "{{.State.Running}}", &c.name]);
        assert_eq!(running.trim(), "true", "{}", podman_logs(&c.name));
        podman_logs(&c.name).contains("serving")
            && std::net::TcpStream::connect(&grpc).is_ok()
            && std::net::TcpStream::connect(&http).is_ok()
    });
    let opts = band_server::sandboxd::Options::parse(
        &[
            "--band".into(),
            root.join("BAND.md").display().to_string(),
            "--token-file".into(),
            p.token.display().to_string(),
            "--workspace".into(),
            p.ws.display().to_string(),
        ],
        server().into(),
    )
    .unwrap();
    let policy = band_server::sandboxd::Pod::load(&opts)
        .unwrap()
        .policy_sha256;
    sdk_test(&grpc, &http, &p, &policy);
    let out = Command::new(python())
        .arg(repo().join("tests/sandboxd/sdk_test.py"))
        .args(["--memory", &grpc])
        .arg(&p.token)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    eprintln!("{said}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && said.ends_with("all ok\n"), "{said}");
    let out = Command::new(python())
        .arg(repo().join("tests/sandboxd/sdk_test.py"))
        .args(["--net", &grpc])
        .arg(&p.token)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    eprintln!("{said}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && said.ends_with("all ok\n"), "{said}");
    assert!(
        lab.log("http.log").contains("/from-the-pod"),
        "{}",
        lab.log("http.log")
    );
    assert!(
        !lab.log("dns.log").contains("other.example.test"),
        "{}",
        lab.log("dns.log")
    );

    // Two runs left waiting on their stdin, then the container stopped under them.
    let mut two = Command::new(python())
        .arg(repo().join("tests/sandboxd/two_runs.py"))
        .arg(&grpc)
        .arg(&p.token)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let _watch = band_test::kill_after(&two, std::time::Duration::from_secs(300), "two_runs.py");
    let mut said = std::io::BufReader::new(two.stdout.take().unwrap());
    let mut line = String::new();
    said.read_line(&mut line).unwrap();
    let ids: Vec<String> = line
        .strip_prefix("ready ")
        .unwrap_or_else(|| panic!("{line}"))
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let log = podman_logs(&c.name);
    let runs: Vec<String> = ids
        .iter()
        .map(|id| {
            let said = format!("band-sandboxd: process {id} is run ");
            log.lines()
                .find_map(|l| l.strip_prefix(&said))
                .unwrap_or_else(|| panic!("no run for process {id} in {log}"))
                .trim()
                .to_string()
        })
        .collect();
    // While they wait: their band-servers are in the container's pid namespace, each run has
    // its cgroup in the machine's hierarchy and its mounts.
    assert!(processes_in(&ns).len() > 2, "{:?}", processes_in(&ns));
    for r in &runs {
        assert!(!run_cgroups(r).is_empty(), "run {r} has no cgroup");
    }
    // ... and its own nftables table, in the container's network namespace.
    let inside = band_server::layers::net::nft::parse_tables_json(&podman(&[
        "exec", &c.name, "nft", "-j", "list", "tables",
    ]))
    .unwrap();
    for r in &runs {
        let table = band_server::layers::net::nft::table_name(r);
        assert!(inside.contains(&table), "{table} not in {inside:?}");
    }
    // The pod's warm server served runs, and keeps spares: each holds a cgroup on the machine.
    let log = podman_logs(&c.name);
    let (_, warm_dir) = log
        .lines()
        .find_map(warm_server)
        .unwrap_or_else(|| panic!("no warm band-server in {log}"));
    let warm_log = podman(&[
        "exec",
        &c.name,
        "cat",
        &warm_dir.join("serve.log").display().to_string(),
    ]);
    assert!(
        warm_log.contains("served by the warm server"),
        "no run was served warm: {warm_log}"
    );
    let spares = band_test::spares_in(&warm_log);
    assert!(!spares.is_empty(), "no spare: {warm_log}");
    podman(&["stop", "-t", "30", &c.name]);
    let _ = two.kill();
    let _ = two.wait();
    assert!(processes_in(&ns).is_empty(), "{:?}", processes_in(&ns));
    // The runs' and the spares' cgroups: band-sandboxd waited for its warm server, and it for
    // its spares' teardown, before the container's init exited.
    for r in runs.iter().chain(&spares) {
        assert_eq!(run_cgroups(r), Vec::<PathBuf>::new(), "run {r}'s cgroups");
    }
    let mounts = fs_err::read_to_string("/proc/self/mountinfo").unwrap();
    for r in &runs {
        assert!(
            !mounts.contains(r.as_str()),
            "a mount of run {r} is left:\n{mounts}"
        );
    }
    let now = band_tables();
    for r in &runs {
        let table = band_server::layers::net::nft::table_name(r);
        assert!(!now.contains(&table), "{table} is left");
    }
    // band-sandboxd ended on podman's SIGTERM (its runs cancelled), not by the SIGKILL after.
    let code = podman(&["inspect", "--format", "{{.State.ExitCode}}", &c.name]);
    assert_eq!(code.trim(), "0", "{}", podman_logs(&c.name));
    podman(&["rm", &c.name]);
    let left = podman(&["ps", "-a", "-q", "--filter", &format!("name={}", c.name)]);
    assert!(left.is_empty());
    assert!(std::net::TcpStream::connect(&grpc).is_err());
}
