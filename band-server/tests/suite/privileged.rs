//! The real thing: band-server as root, bubblewrap, cgroups, seccomp. Probe scripts assert from
//! inside the sandbox and print `key=value` lines.

use band::proto::{Denial, Event, Layer, Status};
use pretty_assertions::assert_eq;

use super::helpers::*;

#[test]
fn privileged_probe_identity_and_hardening() {
    privileged!();
    let script = r#"#!/bin/bash
echo "uid=$(id -u 2>/dev/null || awk '/^Uid:/{print $2}' /proc/self/status)"
grep -E '^(Seccomp|NoNewPrivs|CapEff|CapPrm|CapBnd):' /proc/self/status | sed 's/:\s*/=/'
echo "path=$PATH"
echo "home=$HOME"
echo "pwd=$(pwd)"
echo "input=$(cat "$INPUT_PATH")"
echo "whoami=$(awk -F: -v u="$(awk '/^Uid:/{print $2}' /proc/self/status)" '$3==u{print $1}' /etc/passwd)"
echo "passwd_lines=$(wc -l < /etc/passwd)"
echo "shadow=$(test -e /etc/shadow && echo present || echo absent)"
echo "root_dir=$(test -e /root && echo present || echo absent)"
echo "home_dir=$(test -e /home && echo present || echo absent)"
echo "run_dir=$(test -e /run && echo present || echo absent)"
echo "var_dir=$(test -e /var && echo present || echo absent)"
echo "pid1=$(cat /proc/1/comm)"
echo "nprocs=$(ls -d /proc/[0-9]* | wc -l)"
echo "hostname=$(cat /proc/sys/kernel/hostname)"
echo "net=$( (echo > /dev/tcp/127.0.0.1/9) 2>/dev/null && echo open || echo closed)"
echo "ifaces=$(ls /sys/class/net 2>/dev/null | wc -l)"
echo "usr_bin_has_perl=$(test -e /usr/bin/perl && echo yes || echo no)"
echo "root_writable=$(touch /x 2>/dev/null && echo yes || echo no)"
echo "skill_writable=$(touch /skill/x 2>/dev/null && echo yes || echo no)"
echo "tmp_writable=$(touch /tmp/x 2>/dev/null && echo yes || echo no)"
echo "input_writable=$( (echo x > /band/io/input.json) 2>/dev/null && echo yes || echo no)"
echo "env_count=$(env | wc -l)"
echo '{"probe": true}' > "$OUTPUT_PATH"
"#;
    let o = run(&request(script, policy()));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    eprintln!("{}\n{:?}\n{}", o.result.stdout, o.result.metrics, o.server_stderr);
    let kv = o.kv();
    let get = |k: &str| kv.get(k).map(String::as_str).unwrap_or("<missing>");
    assert_ne!(get("uid"), "0");
    assert_ne!(get("uid"), "<missing>");
    assert_eq!(get("Seccomp"), "2");
    assert_eq!(get("NoNewPrivs"), "1");
    assert_eq!(get("CapEff"), "0000000000000000");
    assert_eq!(get("CapPrm"), "0000000000000000");
    assert_eq!(get("path"), "/band/bin");
    assert_eq!(get("home"), "/tmp");
    assert_eq!(get("pwd"), "/workspace");
    assert_eq!(get("input"), r#"{"hello":"world"}"#);
    assert!(get("whoami").starts_with("band-run-"), "{}", get("whoami"));
    assert_eq!(get("passwd_lines"), "2");
    assert_eq!(get("shadow"), "absent");
    assert_eq!(get("root_dir"), "absent");
    assert_eq!(get("home_dir"), "absent");
    assert_eq!(get("run_dir"), "absent");
    assert_eq!(get("var_dir"), "absent");
    assert_eq!(get("hostname"), "band");
    assert_eq!(get("net"), "closed");
    assert_eq!(get("usr_bin_has_perl"), "no");
    assert_eq!(get("root_writable"), "no");
    assert_eq!(get("skill_writable"), "no");
    assert_eq!(get("tmp_writable"), "yes");
    assert_eq!(get("input_writable"), "no");
    assert_eq!(o.result.output, Some(serde_json::json!({"probe": true})));
    assert!(matches!(o.events.first(), Some(Event::Started { .. })), "{:?}", o.events.first());
}
