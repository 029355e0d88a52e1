//! Bound secrets and HTTP rules through a VM and an `ssh://` target (issue 39, item 5): a step of
//! `vm_e2e`'s one boot. Inside the VM the test makes its own lab: a network namespace behind a
//! veth holding the test's resolver (`band-test/netlab.py`, which answers the lab's one name and
//! nothing else) and an HTTPS server with a CA the test made on the host
//! (`band-server/tests/suite/egress_https.py`, which logs what it received). The VM's
//! band-server config points `dns_upstream` at that resolver and `proxy_extra_ca` at that CA for
//! the step, and is put back after it. Nothing goes to the VM's gateway: the lab's address is
//! checked to be routed to the veth before anything starts.

use std::path::Path;

use band_test::{Band, SkillBuilder};
use base64::Engine as _;
use serde_json::Value;

use crate::common::{band_exe, make_ca_and_cert};
use crate::vm_e2e::Env;

/// The lab's one name, and its server's address inside the VM (routed to the lab's veth).
const NAME: &str = "api.vmlab.test";
const ADDR: &str = "11.231.200.2";
/// The lab's folder in the VM (its scripts, certificate, key and logs).
const DIR: &str = "/root/band-vmlab";
/// The secret's value: what the client has, what only the lab's server may see.
const TOKEN: &str = "vm-real-token-7f3a9c";

/// Run `script` as root in the VM (one argument: ssh hands it to the VM's shell whole).
fn vm_sh(env: &Env, cwd: &Path, script: &str) -> String {
    env.band_ok(&["vm", "ssh", "--", script], cwd)
}

/// `text` as a shell command that writes it to `path` in the VM.
fn put(path: &str, text: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(text);
    format!("echo {b64} | base64 -d > {path}\n")
}

/// A CA and a certificate for [`NAME`] signed by it, made with the host's openssl in `dir`
/// ([`make_ca_and_cert`]): (CA PEM, certificate PEM, key PEM).
fn lab_certificate(dir: &Path) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    make_ca_and_cert(dir, NAME);
    let read = |n: &str| fs_err::read(dir.join(n)).expect("read");
    (read("ca.crt"), read("srv.crt"), read("srv.key"))
}

/// Shell text that removes the lab (if any) and puts the VM's original server config back
/// (kept in `server.toml.before-vmlab`), then stops the warm band-server so the next run's
/// server reads the config afresh (the warm server reads it once, at start).
const TEARDOWN: &str = r#"
for p in /root/band-vmlab/*.pid; do [ -e "$p" ] && kill "$(cat "$p")" 2>/dev/null; done
ip link del bvlab0 2>/dev/null
ip netns del bandvmlab 2>/dev/null
if [ -e /etc/band/server.toml.before-vmlab ]; then
  mv /etc/band/server.toml.before-vmlab /etc/band/server.toml
fi
rm -f /etc/band/vmlab-ca.pem /etc/band/server.toml.vmlab
sync
restart_warm
rm -rf /root/band-vmlab
"#;

/// Shell function: stop the warm band-server (its socket first: a run then falls back to a
/// `band-server run` of its own, which starts a new warm server) and wait for it to be gone.
const RESTART_WARM: &str = r#"
restart_warm() {
  pid=$(cat /run/band-serve/serve.pid 2>/dev/null)
  rm -f /run/band-serve/server-*.sock
  if [ -n "$pid" ] && kill "$pid" 2>/dev/null; then timeout 60 tail --pid="$pid" -f /dev/null; fi
  true
}
"#;

/// The skill: a token bound to the lab's name, one HTTP rule; its script shows what it sees.
fn skill(root: &Path) -> std::path::PathBuf {
    SkillBuilder::new("vmapi")
        .description("Calls the VM lab's API with a bound token.")
        .body("Used by the VM end-to-end test.\n")
        .band(&format!(
            r#"description: Calls GET https://{NAME}/ok/** with its bound API token.
allow:
  cli: ["curl *", "cat *"]
  net: ["GET https://{NAME}/ok/**"]
env:
  secrets: [{{name: API_TOKEN, hosts: [{NAME}]}}]
limit:
  maxRuntimeMs: 300s
"#
        ))
        .input_schema("call", SkillBuilder::NO_INPUT)
        .script(
            "call.sh",
            &format!(
                r#"#!/bin/bash
code() {{ curl -sS -m 60 -o /tmp/body -w '%{{http_code}}' "$@" 2>/tmp/err || echo "rc$? $(cat /tmp/err)"; }}
ok=$(code -H "Authorization: Bearer $API_TOKEN" https://{NAME}/ok/header)
ok_body=$(cat /tmp/body)
outside=$(code -H "Authorization: Bearer $API_TOKEN" https://{NAME}/other)
outside_body=$(cat /tmp/body)
query=$(code "https://{NAME}/ok/query?t=$API_TOKEN")
printf '{{"env":"%s","ok":"%s","ok_body":"%s","outside":"%s","outside_body":"%s","query":"%s"}}\n' \
  "$API_TOKEN" "$ok" "$ok_body" "$outside" "$outside_body" "$query" > "$OUTPUT_PATH"
"#
            ),
        )
        .write(root)
}

/// The files under `dir` holding `text`, but the VM's own folder (`vm/`: its disk image holds
/// the lab's log, the API's side).
fn files_holding(dir: &Path, text: &str) -> Vec<String> {
    let skip = dir.join("vm");
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs_err::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                if p != skip {
                    todo.push(p);
                }
            } else if fs_err::read(&p).is_ok_and(|b| String::from_utf8_lossy(&b).contains(text)) {
                out.push(p.display().to_string());
            }
        }
    }
    out.sort();
    out
}

/// Set the lab up in the VM (a leftover of an earlier, failed run removed first) and point the
/// VM's band-server at it.
fn lab_up(env: &Env, cwd: &Path) {
    let certs = tempfile::tempdir().expect("tmp");
    let (ca, cert, key) = lab_certificate(certs.path());
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let netlab = fs_err::read(repo.join("band-test/netlab.py")).expect("netlab.py");
    let https = fs_err::read(repo.join("band-server/tests/suite/egress_https.py")).expect("https");
    let zone = format!(r#"{{"{NAME}": ["{ADDR}"]}}"#);
    let mut s = String::from("set -e\n");
    s.push_str(RESTART_WARM);
    s.push_str("set +e\n");
    s.push_str(TEARDOWN);
    s.push_str("set -e\n");
    s.push_str(&format!("mkdir -p {DIR}\n"));
    s.push_str(&put(&format!("{DIR}/netlab.py"), &netlab));
    s.push_str(&put(&format!("{DIR}/https.py"), &https));
    s.push_str(&put(&format!("{DIR}/cert.pem"), &cert));
    s.push_str(&put(&format!("{DIR}/key.pem"), &key));
    s.push_str(&put("/etc/band/vmlab-ca.pem", &ca));
    s.push_str(&format!(
        r#"ip netns add bandvmlab
ip link add bvlab0 type veth peer name bvlab1
ip link set bvlab1 netns bandvmlab
ip addr add 11.231.200.1/24 dev bvlab0
ip link set bvlab0 up
ip netns exec bandvmlab ip link set lo up
ip netns exec bandvmlab ip addr add {ADDR}/24 dev bvlab1
ip netns exec bandvmlab ip link set bvlab1 up
ip netns exec bandvmlab ip route add default via 11.231.200.1
# Nothing may leave the VM: the lab's address goes to the veth, or nothing starts.
ip route get {ADDR} | grep -q 'dev bvlab0' || {{ echo "{ADDR} is not routed to the lab"; exit 1; }}
setsid ip netns exec bandvmlab python3 {DIR}/netlab.py {DIR} '{zone}' </dev/null >{DIR}/netlab.out 2>&1 &
echo $! > {DIR}/netlab.pid
setsid ip netns exec bandvmlab python3 {DIR}/https.py {DIR} {DIR}/cert.pem {DIR}/key.pem {ADDR}:443 </dev/null >{DIR}/https.out 2>&1 &
echo $! > {DIR}/https.pid
timeout 60 sh -c 'until [ -e {DIR}/ready ] && [ -e {DIR}/https.ready ]; do sleep 0.2; done' || {{ cat {DIR}/*.out; exit 1; }}
# The new config goes in by a rename after a sync, the original kept beside it: a VM killed
# half way (a failed test) keeps a whole file, never a half-written one.
cp /etc/band/server.toml /etc/band/server.toml.before-vmlab
{{ cat /etc/band/server.toml
  printf 'dns_upstream = ["{ADDR}:53"]\nproxy_extra_ca = "/etc/band/vmlab-ca.pem"\n'; }} > /etc/band/server.toml.vmlab
sync
mv /etc/band/server.toml.vmlab /etc/band/server.toml
sync
restart_warm
echo lab up
"#
    ));
    let out = vm_sh(env, cwd, &s);
    assert!(out.contains("lab up"), "{out}");
}

/// Put the VM back as it was: no lab, the original config, no warm server holding the lab's.
fn lab_down(env: &Env, cwd: &Path) {
    vm_sh(env, cwd, &format!("{RESTART_WARM}{TEARDOWN}echo down\n"));
    let left = vm_sh(
        env,
        cwd,
        &format!("ip netns list; ip -brief link; ls /etc/band; [ ! -e {DIR} ] || echo {DIR}"),
    );
    assert!(
        !left.contains("bandvmlab") && !left.contains("bvlab") && !left.contains("vmlab"),
        "the lab is left in the VM: {left}"
    );
    let conf = vm_sh(env, cwd, "cat /etc/band/server.toml");
    assert!(
        !conf.contains("dns_upstream") && !conf.contains("vmlab"),
        "the VM's config was not put back: {conf}"
    );
}

/// What the lab's server received since the last call (its log, one JSON line a request; the
/// log is emptied).
fn received(env: &Env, cwd: &Path) -> Vec<Value> {
    let log = vm_sh(
        env,
        cwd,
        &format!("cat {DIR}/https.log 2>/dev/null; : > {DIR}/https.log"),
    );
    log.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// One run of the skill through `target`: the sandbox holds the placeholder, the lab's server
/// gets the value in the header, a path outside the rule and the placeholder in a query string
/// are refused and reported, and the value is nowhere the client shows or keeps, nor in the
/// VM's log and state.
fn check_target(env: &Env, cwd: &Path, skill: &Path, ws: &Path, target: &str) {
    let band = Band::new(band_exe(), &env.data)
        .env("BAND_CONFIG", env.home.join("config.toml"))
        .env_remove("BAND_SERVER_STATE_DIR")
        .env("API_TOKEN", TOKEN);
    let script = format!("{}/call", skill.display());
    let args = [
        "run",
        "--workspace",
        ws.to_str().expect("utf8"),
        "--target",
        target,
        "--json",
        &script,
    ];
    let (code, out, err) = band.run(&args, ws);
    eprintln!("band run --target {target} -> {code}\n{out}\n{err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    let o = &v["output"];
    // Inside: the placeholder, never the value.
    let ph = o["env"].as_str().unwrap_or_default().to_string();
    assert!(
        ph.starts_with("bandph") && ph.len() == 46,
        "{target}: the sandbox's API_TOKEN is not a placeholder: {v:#}"
    );
    // The lab's server got the value, in the header, once: the only request that reached it.
    assert_eq!(o["ok"], "200", "{target}: {v:#}");
    assert_eq!(o["ok_body"], "upstream ok", "{target}: {v:#}");
    let got = received(env, cwd);
    assert_eq!(got.len(), 1, "{target}: {got:#?}");
    assert_eq!(got[0]["path"], "/ok/header", "{target}: {got:#?}");
    assert_eq!(got[0]["auth"], format!("Bearer {TOKEN}"), "{target}");
    assert_eq!(got[0]["host"], NAME, "{target}");
    // Outside the HTTP rule: refused by the proxy, which names the request.
    assert_eq!(o["outside"], "403", "{target}: {v:#}");
    assert_eq!(
        o["outside_body"],
        format!("band: refused by the run's egress proxy: request GET https://{NAME}/other"),
        "{target}"
    );
    // The placeholder in a query string: refused, not replaced.
    assert_eq!(o["query"], "403", "{target}: {v:#}");
    let denied = v["denied"].as_array().cloned().unwrap_or_default();
    let http = serde_json::json!({
        "kind": "http", "method": "GET", "host": NAME, "port": 443, "https": true,
        "path": "/other", "rule": null,
    });
    let secret = serde_json::json!({
        "kind": "secret", "name": "API_TOKEN", "to": format!("{NAME}:443"),
        "place": "query string",
    });
    for d in [&http, &secret] {
        assert!(
            denied.iter().any(|x| x == d),
            "{target}: {d} not in the result's denials: {v:#}"
        );
    }
    // `band show` names the rule that would allow the request, and the secret by its name.
    let run_id = v["run_id"].as_str().expect("run_id");
    let (_, show, _) = band.run(&["show", run_id], ws);
    for want in [
        format!(
            "request GET https://{NAME}/other (network layer: no allow.net rule matches; \
             to allow it: allow.net \"GET https://{NAME}/other\")"
        ),
        format!("placeholder of API_TOKEN in the query string to {NAME}:443"),
    ] {
        assert!(show.contains(&want), "{target}: {want:?} not in:\n{show}");
    }
    // The value nowhere the client shows or keeps: its output, its stderr, its ledger.
    for (what, text) in [("stdout", &out), ("stderr", &err)] {
        assert!(!text.contains(TOKEN), "{target}: {what} shows the value");
    }
    let (_, history, _) = band.run(&["history", "--json"], ws);
    for (what, text) in [("history", &history), ("show", &show)] {
        assert!(
            !text.contains(TOKEN),
            "{target}: band {what} shows the value"
        );
    }
    assert_eq!(
        files_holding(&env.data, TOKEN),
        Vec::<String>::new(),
        "{target}: the client's data folder keeps the value"
    );
    // Nor in the VM's band-server log and state (the lab's own log under /root holds it: it is
    // the API's side).
    let found = vm_sh(
        env,
        cwd,
        &format!(
            "grep -rlsF -e '{TOKEN}' /var/log /run/band /run/band-serve /var/lib/band /var/cache/band /usr/local/lib/band /tmp; true"
        ),
    );
    assert_eq!(found.trim(), "", "{target}: the VM keeps the value");
    assert_eq!(v["status"], "ok", "{target}: {v:#}");
    assert_eq!(code, 0, "{target}: {err}");
}

/// The step: the lab up, the skill through the VM target and the `ssh://` target `host`, the
/// lab down and the VM's config as before.
pub(crate) fn check_bound_secret(env: &Env, root: &Path, ws: &Path, ssh_host: &str) {
    let cwd = root;
    let skill = skill(root);
    lab_up(env, cwd);
    check_target(env, cwd, &skill, ws, "qemu");
    check_target(env, cwd, &skill, ws, &format!("ssh://{ssh_host}"));
    lab_down(env, cwd);
}
