//! The real thing: band-server as root, bubblewrap, cgroups, seccomp. Probe scripts assert from
//! inside the sandbox and print `key=value` lines.

use std::io::{BufRead, BufReader};
use std::ops::Range;
use std::time::{Duration, Instant};

use band::proto::{CliCall, Denial, Event, Layer, Message, Status};
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
# /run and /var hold nothing of the host: at most the directories leading to the symlinks at
# the paths the run's programs report for themselves, each to band-shim in /band/bin.
shopt -s globstar nullglob dotglob
files=0; links=0; other_links=0
for f in /run/** /var/**; do
  if [ -L "$f" ]; then
    links=$((links+1))
    case "$(ls -l "$f")" in *" -> /band/bin/"*) ;; *) other_links=$((other_links+1));; esac
  elif [ ! -d "$f" ]; then files=$((files+1)); fi
done
echo "run_var_files=$files"
echo "run_var_other_links=$other_links"
echo "run_var_links=$links"
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
echo "env_names=$(env | cut -d= -f1 | sort | tr '\n' ,)"
echo "config=$(cat "$CONFIG_PATH")"
echo '{"probe": true}' > "$OUTPUT_PATH"
"#;
    let mut req = request(script, policy());
    req.config = Some(serde_json::json!({"mode": "probe"}));
    let o = run(&req);
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
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
    assert_eq!(get("run_var_files"), "0");
    assert_eq!(get("run_var_other_links"), "0");
    assert_ne!(
        get("run_var_links"),
        "0",
        "the self-path links of the run's programs"
    );
    assert_eq!(get("hostname"), "band");
    assert_eq!(get("net"), "closed");
    assert_eq!(get("usr_bin_has_perl"), "no");
    assert_eq!(get("root_writable"), "no");
    assert_eq!(get("skill_writable"), "no");
    assert_eq!(get("tmp_writable"), "yes");
    assert_eq!(get("input_writable"), "no");
    assert_eq!(get("config"), r#"{"mode":"probe"}"#);
    // Only what band sets (plus what bash itself adds: PWD, SHLVL, _); nothing from the host.
    assert_eq!(
        get("env_names"),
        "BASH_ENV,CONFIG_PATH,GIT_CONFIG_COUNT,GIT_CONFIG_KEY_0,GIT_CONFIG_VALUE_0,HOME,INPUT_PATH,LANG,OUTPUT_PATH,PATH,PWD,SHLVL,SKILL_DIR,TMPDIR,WORKSPACE,_,"
    );
    assert_eq!(o.result.output, Some(serde_json::json!({"probe": true})));
    assert!(
        matches!(o.events.first(), Some(Event::Started { .. })),
        "{:?}",
        o.events.first()
    );
}

fn with_cli(allow: &[&str], deny: &[&str]) -> band::policy::Policy {
    let mut p = policy();
    p.allow.cli = strs(allow);
    p.deny.cli = strs(deny);
    p
}

fn setup_layer(o: &Outcome) -> Option<Layer> {
    assert_eq!(o.result.status, Status::SetupFailed, "{o:#?}");
    o.result.error.as_ref().map(|e| e.layer.clone())
}

/// No process of the run `o` is left: none in its cgroup, none of its user started within
/// `window` ([`run_marked`]'s). Processes of that user started before or after are other runs':
/// every band-server start may lease the uid as soon as a run's server has freed it.
fn no_process_of_run_left(o: &Outcome, window: Range<u64>) {
    let user = run_user(o);
    let uid = uid_of(&user).unwrap_or_else(|| panic!("no user {user}"));
    let left = processes_of_run(uid, &o.result.run_id, window);
    assert!(left.is_empty(), "processes of {user} left: {left:?}");
}

fn run_user(o: &Outcome) -> String {
    o.kv()
        .get("user")
        .cloned()
        .unwrap_or_else(|| panic!("probe printed no user=: {o:#?}"))
}

const WHO: &str = r#"echo "user=$(awk -F: -v u="$(awk '/^Uid:/{print $2}' /proc/self/status)" '$3==u{print $1}' /etc/passwd)""#;

#[test]
fn privileged_undeclared_commands_are_absent_every_way() {
    privileged!();
    let script = r#"#!/bin/bash
try() { local name=$1; shift; if "$@" >/dev/null 2>&1; then echo "$name=ran"; else echo "$name=failed"; fi; }
try by_name perl -e 1
try abs_path /usr/bin/perl -e 1
try bash_c bash -c 'perl -e 1'
try bash_c_abs bash -c '/usr/bin/perl -e 1'
try env env perl -e 1
try env_path env PATH=/usr/bin:/bin perl -e 1
try python python3 -c 1
try curl /usr/bin/curl --version
try sudo sudo true
try lib_exec /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 /usr/bin/perl -e 1
cp /usr/bin/cat /tmp/mycat 2>/dev/null; chmod +x /tmp/mycat 2>/dev/null
try copied_binary /tmp/mycat /etc/hosts
printf '#!/bin/sh\necho hi\n' > /tmp/s.sh; chmod +x /tmp/s.sh
try tmp_script /tmp/s.sh
try workspace_script sh -c 'cp /tmp/s.sh /workspace/s.sh && /workspace/s.sh'
try lib_git /usr/lib/git-core/git --version
try lib_java /usr/lib/jvm/java-17-openjdk-amd64/bin/java -version
try lib_ldso_git /lib64/ld-linux-x86-64.so.2 /usr/lib/git-core/git --version
try essential cat /etc/hosts
"#;
    let o = run(&request(script, policy()));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    for k in [
        "by_name",
        "abs_path",
        "bash_c",
        "bash_c_abs",
        "env",
        "env_path",
        "python",
        "curl",
        "sudo",
        "lib_exec",
        "copied_binary",
        "tmp_script",
        "workspace_script",
        "lib_git",
        "lib_java",
        "lib_ldso_git",
    ] {
        assert_eq!(
            kv.get(k).map(String::as_str),
            Some("failed"),
            "{k} should fail: {o:#?}"
        );
    }
    assert_eq!(kv.get("essential").map(String::as_str), Some("ran"));
}

#[test]
fn privileged_cli_argument_patterns_and_denials() {
    privileged!();
    let script = r#"#!/bin/bash
echo '{"a": 1}' > /tmp/in.json
jq -r .a /tmp/in.json; echo "allowed_rc=$?"
jq .a /tmp/in.json; echo "denied_rc=$?"
rm -rf /tmp/nothing; echo "rm_rc=$?"
rm /tmp/in.json; echo "rm_plain_rc=$?"
exit 3
"#;
    let mut req = request(script, with_cli(&["jq -r *"], &["rm -rf *"]));
    req.trace = true;
    let o = run(&req);
    let kv = o.kv();
    assert_eq!(
        kv.get("allowed_rc").map(String::as_str),
        Some("0"),
        "{o:#?}"
    );
    assert_eq!(kv.get("denied_rc").map(String::as_str), Some("126"));
    assert_eq!(kv.get("rm_rc").map(String::as_str), Some("126"));
    assert_eq!(kv.get("rm_plain_rc").map(String::as_str), Some("0"));
    assert!(o.result.stdout.starts_with("1\n"), "{}", o.result.stdout);
    assert!(
        o.result
            .stderr
            .contains("band: denied: jq .a /tmp/in.json (no allow.cli rule matches)"),
        "{}",
        o.result.stderr
    );
    assert!(
        o.result
            .stderr
            .contains("band: denied: rm -rf /tmp/nothing (denied by deny.cli rule \"rm -rf *\")"),
        "{}",
        o.result.stderr
    );
    assert_eq!(o.result.status, Status::Denied);
    assert_eq!(o.result.exit_code, Some(3));
    assert_eq!(
        o.result.denied,
        vec![
            Denial::Cli {
                argv: strs(&["jq", ".a", "/tmp/in.json"]),
                rule: None,
                source: None,
            },
            Denial::Cli {
                argv: strs(&["rm", "-rf", "/tmp/nothing"]),
                rule: Some("rm -rf *".into()),
                source: None,
            },
        ]
    );
    assert!(o.result.cli_calls.contains(&CliCall {
        argv: strs(&["jq", "-r", ".a", "/tmp/in.json"]),
        allowed: true,
        rule: Some("jq -r *".into()),
        source: None,
    }));
    assert!(
        o.events
            .iter()
            .any(|e| matches!(e, Event::Denied(Denial::Cli { rule: None, .. })))
    );
    assert!(
        o.events
            .iter()
            .any(|e| matches!(e, Event::Cli(c) if c.allowed && c.argv[0] == "jq"))
    );
}

#[test]
fn privileged_declared_command_missing_on_host_fails_closed() {
    privileged!();
    // Insisted: the run cannot keep its promise without it (an allowed one is only absent, see
    // gate.rs, issue 14 item 5).
    let mut p = with_cli(&[], &[]);
    p.insist.cli = strs(&["no-such-tool-band *"]);
    let o = run(&request("#!/bin/sh\ntrue\n", p));
    assert_eq!(setup_layer(&o), Some(Layer::Cli));
    assert!(
        o.result
            .error
            .as_ref()
            .is_some_and(|e| e.message.contains("no-such-tool-band"))
    );
}

#[test]
fn privileged_ptrace_and_unshare_are_eperm() {
    privileged!();
    let script = r#"#!/usr/bin/env python3
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def errno_of(rc):
    return "ok" if rc == 0 else os.strerror(ctypes.get_errno())
print("unshare_user=" + errno_of(libc.unshare(0x10000000)))
print("unshare_ns=" + errno_of(libc.unshare(0x00020000)))
print("ptrace=" + errno_of(libc.ptrace(0, 0, None, None)))
print("mount=" + errno_of(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)))
print("setuid0=" + errno_of(libc.setuid(0)))
"#;
    let req = request_with(
        &[("run.py", 0o755, script)],
        "run.py",
        with_cli(&["python3 *"], &[]),
    );
    let o = run(&req);
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    for k in ["unshare_user", "unshare_ns", "ptrace", "mount", "setuid0"] {
        let v = kv.get(k).map(String::as_str).unwrap_or("<missing>");
        // setuid(0): uid 0 is not even mapped in the sandbox's user namespace (EINVAL).
        let want = if k == "setuid0" {
            "Invalid argument"
        } else {
            "Operation not permitted"
        };
        assert_eq!(v, want, "{k}");
    }
}

#[test]
fn privileged_fork_bomb_hits_pids_limit() {
    privileged!();
    let mut p = policy();
    p.limits.max_pids = Some(32);
    p.limits.max_runtime_ms = Some(10_000);
    let (o, window) = run_marked(&request(
        // The script stays alive while the bomb grows (a bare `wait` returns as soon as the
        // first pipeline has forked, and the run could end before the limit is reached).
        &format!("#!/bin/bash\n{WHO}\nbomb() {{ bomb | bomb & }}; bomb\nsleep 3\n"),
        p,
    ));
    assert_eq!(
        o.result.status,
        Status::PidsLimit,
        "{:?} {}",
        o.result.status,
        o.result.stderr
    );
    assert!(
        o.events
            .iter()
            .any(|e| matches!(e, Event::Limit { limit, .. } if limit == "pids"))
    );
    // The run ended, and the bomb with it: not one of its processes is left.
    no_process_of_run_left(&o, window);
    // The machine is fine: a normal run right after works.
    assert_eq!(
        run(&request("#!/bin/sh\necho ok\n", policy()))
            .result
            .status,
        Status::Ok
    );
}

#[test]
fn privileged_memory_hog_hits_memory_limit() {
    privileged!();
    let mut p = policy();
    p.limits.max_memory_bytes = Some(64 << 20);
    p.limits.max_runtime_ms = Some(30_000);
    let o = run(&request(
        "#!/bin/bash\nx=aaaaaaaaaaaaaaaa\nwhile true; do x=$x$x; done\n",
        p,
    ));
    assert_eq!(
        o.result.status,
        Status::MemoryLimit,
        "{:?} {}",
        o.result.status,
        o.result.stderr
    );
    assert!(
        o.result.metrics.peak_memory_bytes.unwrap_or(0) > 32 << 20,
        "{:?}",
        o.result.metrics
    );
}

#[test]
fn privileged_timeout_kills_every_process_of_the_run() {
    privileged!();
    let mut p = policy();
    p.limits.max_runtime_ms = Some(2_000);
    // Nothing of the run ends on its own: that it ended at all is the limit's doing.
    let script = format!("#!/bin/bash\n{WHO}\nsleep infinity &\nsleep infinity\n");
    let (o, window) = run_marked(&request(&script, p));
    assert_eq!(o.result.status, Status::Timeout, "{o:#?}");
    assert!(
        o.events
            .iter()
            .any(|e| matches!(e, Event::Limit { limit, .. } if limit == "runtime"))
    );
    no_process_of_run_left(&o, window);
}

#[test]
fn privileged_daemonised_children_die_with_the_run() {
    privileged!();
    // Both daemons are declared programs (the gate lets them start), so the test can fail: a
    // daemon refused at the gate would leave nothing to find.
    let script = format!(
        "#!/bin/bash\n{WHO}\n( ( sleep 1000 </dev/null >/dev/null 2>&1 & echo daemon=$! ) & )\nnohup sleep 1000 >/dev/null 2>&1 &\necho nohup=$!\ndisown\nsleep 0.2\necho started\n"
    );
    let (o, window) = run_marked(&request(&script, with_cli(&["sleep *", "nohup *"], &[])));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    assert!(
        kv.contains_key("daemon") && kv.contains_key("nohup"),
        "a daemon never started: {o:#?}"
    );
    assert!(o.result.denied.is_empty(), "{o:#?}");
    let started = o
        .events
        .iter()
        .filter(|e| matches!(e, Event::Cli(c) if c.allowed && c.argv.join(" ") == "sleep 1000"))
        .count();
    assert_eq!(started, 2, "both daemons went through the gate: {o:#?}");
    no_process_of_run_left(&o, window);
}

#[test]
fn privileged_a_setsid_double_forked_stray_dies_at_teardown() {
    privileged!();
    // A stray that leaves the script's session and process group, and whose parent exits: only
    // the run's cgroup (and pid namespace) still hold it. It prints its pid, so the test can look
    // for that very process afterwards.
    let script = format!(
        "#!/bin/bash\n{WHO}\nsetsid bash -c 'sleep 1000 </dev/null >/dev/null 2>&1 & echo stray=$!' \nsleep 0.2\necho started\n"
    );
    let (o, window) = run_marked(&request(&script, with_cli(&["setsid *"], &[])));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    assert!(
        o.kv().contains_key("stray"),
        "the stray never started: {o:#?}"
    );
    no_process_of_run_left(&o, window);
}

#[test]
fn privileged_the_sandbox_etc_is_the_synthetic_one_and_band_bin_the_wrappers() {
    privileged!();
    // /etc is one bind of the run's synthetic folder, which holds a copy of the host's
    // ld.so.cache (not a mount of its own), with the CA certificates on its mount points;
    // /band/bin is a link to /usr/bin. Nothing more is visible, and nothing there is writable.
    let script = "#!/bin/bash\n\
        cd /etc && echo \"etc=$(echo *)\"\n\
        echo \"same_bin=$([ \"$(cd /band/bin && echo *)\" = \"$(cd /usr/bin && echo *)\" ] && echo yes)\"\n\
        echo \"cache=$([ -s /etc/ld.so.cache ] && echo full)\"\n\
        m=no; while read -r l; do case \"$l\" in *' /etc/ld.so.cache '*) m=yes;; esac; done < /proc/self/mountinfo; echo \"cache_mount=$m\"\n\
        if (echo x > /etc/passwd) 2>/dev/null; then echo passwd=written; else echo passwd=refused; fi\n\
        if (echo x > /etc/new) 2>/dev/null; then echo new=written; else echo new=refused; fi\n\
        cd /band && echo \"band=$(echo *)\"\n\
        if (echo x > /band/new) 2>/dev/null; then echo band_new=written; else echo band_new=refused; fi\n\
        if (echo x > /band/io/probe) 2>/dev/null; then echo io=written; else echo io=refused; fi\n";
    let o = run(&request(script, policy()));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    let get = |k: &str| kv.get(k).cloned().unwrap_or_default();
    // With the host's time zone where the host has one.
    let has = |f: &str| std::path::Path::new("/etc").join(f).exists();
    let mut want = vec![
        "band-bash-env",
        "ca-certificates",
        "fonts",
        "group",
        "hosts",
        "ld.so.cache",
    ];
    want.extend(has("localtime").then_some("localtime"));
    want.extend(["nsswitch.conf", "passwd", "ssl"]);
    want.extend(has("timezone").then_some("timezone"));
    assert_eq!(get("etc"), want.join(" "), "{o:#?}");
    assert_eq!(get("same_bin"), "yes", "{o:#?}");
    assert_eq!(
        get("cache"),
        "full",
        "the host's ld.so.cache is there: {o:#?}"
    );
    assert_eq!(
        get("cache_mount"),
        "no",
        "ld.so.cache is a copy in the synthetic /etc, not a bind: {o:#?}"
    );
    assert_eq!(get("passwd"), "refused", "{o:#?}");
    assert_eq!(get("new"), "refused", "{o:#?}");
    // /band: one read-only bind of the run's exec folder, with io/ the one writable place in it
    // (`empty` and `empty.d`: the covers of the host's entries of /proc).
    assert_eq!(
        get("band"),
        "bin empty empty.d io jail shim sock x",
        "{o:#?}"
    );
    assert_eq!(get("band_new"), "refused", "{o:#?}");
    assert_eq!(get("io"), "written", "{o:#?}");
}

#[test]
fn privileged_huge_stdout_is_truncated_at_max_log_bytes() {
    privileged!();
    let mut p = policy();
    p.limits.max_log_bytes = Some(1 << 20);
    let script = "#!/bin/bash\nhead -c 104857600 /dev/zero | tr '\\0' a\necho '{\"done\":1}' > \"$OUTPUT_PATH\"\n";
    let started = Instant::now();
    let o = run(&request(script, p));
    assert_eq!(
        o.result.status,
        Status::Ok,
        "{:?} {}",
        o.result.status,
        o.result.stderr
    );
    assert!(o.result.stdout_truncated);
    assert_eq!(o.result.stdout.len(), 1 << 20);
    assert_eq!(
        o.events
            .iter()
            .filter(|e| matches!(e, Event::Limit { limit, .. } if limit == "log"))
            .count(),
        1
    );
    let streamed: usize = o
        .events
        .iter()
        .map(|e| {
            if let Event::Stdout { data } = e {
                data.len()
            } else {
                0
            }
        })
        .sum();
    assert_eq!(streamed, 1 << 20);
    assert_eq!(o.result.output, Some(serde_json::json!({"done": 1})));
    eprintln!("100 MiB of stdout took {:?}", started.elapsed());
}

#[test]
fn privileged_oversized_output_json_is_output_too_large() {
    privileged!();
    let mut p = policy();
    p.limits.max_output_bytes = Some(1 << 20);
    let script = "#!/bin/bash\nhead -c 2097152 /dev/zero | tr '\\0' 1 > \"$OUTPUT_PATH\"\n";
    let o = run(&request(script, p));
    assert_eq!(o.result.status, Status::OutputTooLarge, "{o:#?}");
    assert_eq!(o.result.output, None);
    // A symlink planted as output.json is not followed.
    let o = run(&request(
        "#!/bin/bash\nln -s /etc/hosts \"$OUTPUT_PATH\"\n",
        policy(),
    ));
    assert_eq!(o.result.output, None, "{o:#?}");
}

#[test]
fn privileged_workspace_writes_and_copy_back() {
    privileged!();
    let mut p = policy();
    p.allow.read = strs(&["data/**"]);
    p.allow.write = strs(&["out/**"]);
    let script = r#"#!/bin/bash
echo "read=$(cat data/in.txt)"
echo result > out/a.txt && echo "out_write=ok"
mkdir -p out/sub && echo deep > out/sub/b.txt
(echo changed > data/in.txt) 2>/dev/null && echo "data_write=ok" || echo "data_write=refused"
(rm -f data/in.txt) 2>/dev/null; test -e data/in.txt && echo "data_rm=refused" || echo "data_rm=ok"
(echo x > top.txt) 2>/dev/null && echo "top_write=ok" || echo "top_write=refused"
(echo x > /skill/evil) 2>/dev/null && echo "skill_write=ok" || echo "skill_write=refused"
cp -s /etc/passwd out/link && echo "symlink=made"
"#;
    let mut req = request(script, p);
    req.workspace = vec![file("data/in.txt", 0o644, b"input-data")];
    let o = run(&req);
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    assert_eq!(kv.get("read").map(String::as_str), Some("input-data"));
    assert_eq!(kv.get("out_write").map(String::as_str), Some("ok"));
    assert_eq!(kv.get("data_write").map(String::as_str), Some("refused"));
    assert_eq!(kv.get("top_write").map(String::as_str), Some("refused"));
    assert_eq!(kv.get("skill_write").map(String::as_str), Some("refused"));
    assert_eq!(kv.get("symlink").map(String::as_str), Some("made"));
    let mut written: Vec<(String, String)> = o
        .result
        .written
        .iter()
        .map(|f| {
            use base64::Engine;
            let data = base64::engine::general_purpose::STANDARD
                .decode(&f.data)
                .unwrap_or_default();
            (f.path.clone(), String::from_utf8_lossy(&data).into_owned())
        })
        .collect();
    written.sort();
    assert_eq!(
        written,
        vec![
            ("out/a.txt".to_string(), "result\n".to_string()),
            ("out/sub/b.txt".to_string(), "deep\n".to_string())
        ]
    );
}

#[test]
fn privileged_insist_cli_and_write() {
    privileged!();
    let mut p = with_cli(&["jq *"], &[]);
    p.allow.write = strs(&["out/**"]);
    p.insist.cli = strs(&["jq *"]);
    p.insist.write = strs(&["out/report.md"]);
    let o = run(&request("#!/bin/bash\necho hi\n", p.clone()));
    assert_eq!(o.result.status, Status::InsistUnsatisfied, "{o:#?}");
    assert_eq!(
        o.result.insist_missing,
        strs(&["cli: jq *", "write: out/report.md"])
    );
    let o = run(&request(
        "#!/bin/bash\necho '{}' | jq . >/dev/null\necho r > out/report.md\n",
        p,
    ));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    assert!(o.result.insist_missing.is_empty());
}

#[test]
fn privileged_secrets_reach_their_run_only() {
    privileged!();
    let mut p = policy();
    p.secrets = strs(&["API_TOKEN"]);
    let secret = format!("s3cr3t-{}", run_id());
    let script_a = format!(
        "#!/bin/bash\n{WHO}\necho \"has_secret=$([ \"$API_TOKEN\" = \"{secret}\" ] && echo yes || echo no)\"\nprintf '%s' \"$API_TOKEN\" > /tmp/pat\necho \"in_cmdline=$(cat /proc/*/cmdline 2>/dev/null | tr '\\0' '\\n' | grep -c -F -f /tmp/pat)\"\nsleep 8\n"
    );
    let mut req_a = request(&script_a, p);
    req_a.secrets.insert("API_TOKEN".into(), secret.clone());
    let from = marker();
    let a = spawn_watching(&req_a, "in_cmdline=");
    // Run A is running, with its secret: it has printed what it saw, and sleeps.
    let printed = a.printed();
    let user_a = printed
        .lines()
        .find_map(|l| l.strip_prefix("user="))
        .unwrap_or_else(|| panic!("run A printed no user=: {printed}"));
    let uid_a = uid_of(user_a).unwrap_or_else(|| panic!("no user {user_a}"));
    let of_a = || processes_of_run(uid_a, &req_a.run_id, from..u64::MAX);
    // From the host: the secret is on no command line and in no file under the state dir.
    let during_scan = of_a();
    assert!(
        !during_scan.is_empty(),
        "the scan ran while no process of run A was alive"
    );
    let mut on_cmdline = Vec::new();
    for e in fs_err::read_dir("/proc")
        .unwrap_or_else(|e| panic!("{e}"))
        .flatten()
    {
        if let Ok(c) = fs_err::read(e.path().join("cmdline"))
            && String::from_utf8_lossy(&c).contains(&secret)
        {
            on_cmdline.push(e.file_name());
        }
    }
    let script_b = format!(
        "#!/bin/bash\n{WHO}\necho \"seen=$(cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c {secret})\"\necho \"state_files=$(ls -A /run/band-test/runs /run/band-test/leases /run/band-test/cgroups /run/band-test/exec/runs 2>/dev/null | wc -l)\"\n"
    );
    let b = run(&request(&script_b, policy()));
    // Run B looked at every process it could see while run A was alive.
    let after_b = of_a();
    assert!(
        !after_b.is_empty(),
        "run A was over before run B ended: B's look proved nothing"
    );
    let a = a.finish();
    assert!(
        on_cmdline.is_empty(),
        "secret on a command line: {on_cmdline:?}"
    );
    assert_eq!(a.result.status, Status::Ok, "{a:#?}");
    assert_eq!(a.kv().get("has_secret").map(String::as_str), Some("yes"));
    assert_eq!(a.kv().get("in_cmdline").map(String::as_str), Some("0"));
    assert_eq!(b.kv().get("seen").map(String::as_str), Some("0"), "{b:#?}");
    // Only the links at the programs' own cache paths exist under the state directory's path.
    assert_eq!(
        b.kv().get("state_files").map(String::as_str),
        Some("0"),
        "{b:#?}"
    );
    assert_ne!(run_user(&a), run_user(&b));
    assert!(!a.result.stdout.contains(&secret));
}

#[test]
fn privileged_concurrent_runs_have_distinct_uids_and_no_cross_talk() {
    privileged!();
    const N: usize = 16;
    let script = format!(
        "#!/bin/bash\n{WHO}\nid=$(cat \"$INPUT_PATH\")\necho \"$id\" > /tmp/mine\necho \"$id\" > out/mine\nsleep 1\necho \"tmp=$(cat /tmp/mine)\"\necho \"ws=$(cat out/mine)\"\necho \"others=$(ls /tmp | wc -l)\"\n"
    );
    let mut p = policy();
    p.allow.write = strs(&["out/**"]);
    let started = Instant::now();
    let children: Vec<(String, std::process::Child)> = (0..N)
        .map(|_| {
            let mut req = request(&script, p.clone());
            req.input = serde_json::json!(req.run_id.clone());
            (req.run_id.clone(), spawn(&req))
        })
        .collect();
    let mut users = std::collections::BTreeSet::new();
    for (id, child) in children {
        let o = finish(child);
        assert_eq!(o.result.status, Status::Ok, "{o:#?}");
        let kv = o.kv();
        let quoted = format!("\"{id}\"");
        assert_eq!(kv.get("tmp"), Some(&quoted));
        assert_eq!(kv.get("ws"), Some(&quoted));
        assert_eq!(kv.get("others").map(String::as_str), Some("1"));
        assert_eq!(o.result.written.len(), 1);
        users.insert(run_user(&o));
    }
    assert_eq!(users.len(), N, "{users:?}");
    eprintln!("{N} concurrent runs took {:?}", started.elapsed());
}

/// A script that exits at once can finish before the thread reading the jail's status pipe has
/// passed on its `ok`; the run must still count as started (it was `setup_failed`, "the sandbox
/// did not start", in about 1 of 7 runs with three runs at a time on a busy 2-core machine).
#[test]
fn privileged_instant_scripts_are_never_taken_for_a_sandbox_that_did_not_start() {
    privileged!();
    const THREADS: usize = 3;
    const RUNS: usize = 12;
    let failures: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                scope.spawn(|| {
                    (0..RUNS)
                        .map(|_| run(&request("#!/bin/sh\nexit 0\n", policy())))
                        .filter(|o| o.result.status != Status::Ok)
                        .map(|o| format!("{:?}: {:?}", o.result.status, o.result.error))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|_| panic!("runner panicked")))
            .collect()
    });
    assert!(
        failures.is_empty(),
        "{} of {} runs failed: {failures:#?}",
        failures.len(),
        THREADS * RUNS
    );
}

/// The whiteout layer that hides the library trees' executables is built by the first run that
/// needs it and shared, unchanged, by later runs; nothing of the build is left behind.
#[test]
fn privileged_whiteout_layers_are_built_once_and_shared() {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    privileged!();
    let state = std::path::Path::new(STATE_DIR);
    let first = run(&request("#!/bin/sh\nexit 0\n", policy()));
    assert_eq!(first.result.status, Status::Ok, "{first:#?}");
    // No declared command: every scanned file is masked.
    let masked = band_server::layers::fs::execmask::apply_exemptions(
        &band_server::layers::fs::execmask::load_or_scan(state),
        &[],
        &[],
    );
    let mut layers = Vec::new();
    for root in band_server::layers::fs::execmask::LIB_ROOTS {
        let rels: Vec<&std::path::Path> = masked
            .iter()
            .filter_map(|m| m.strip_prefix(root).ok())
            .collect();
        if rels.is_empty() {
            continue;
        }
        let layer = band_server::layers::fs::maskcache::cache_dir(state)
            .join(band_server::layers::fs::maskcache::key(root, &rels));
        for rel in &rels {
            let m = fs_err::symlink_metadata(layer.join(rel))
                .unwrap_or_else(|e| panic!("{}: {e}", layer.join(rel).display()));
            assert!(
                m.file_type().is_char_device() && m.rdev() == 0,
                "{rel:?} is not a whiteout"
            );
        }
        layers.push((
            layer.clone(),
            fs_err::metadata(&layer).map(|m| m.ino()).unwrap_or(0),
        ));
    }
    if layers.is_empty() {
        eprintln!("skipped the sharing check: nothing to mask on this host");
        return;
    }
    let second = run(&request("#!/bin/sh\nexit 0\n", policy()));
    assert_eq!(second.result.status, Status::Ok, "{second:#?}");
    for (layer, ino) in &layers {
        assert_eq!(
            fs_err::metadata(layer).map(|m| m.ino()).ok(),
            Some(*ino),
            "{} was rebuilt",
            layer.display()
        );
    }
    let ours = [first.result.run_id.clone(), second.result.run_id.clone()];
    let left: Vec<_> = band_server::layers::fs::maskcache::builds(state)
        .into_iter()
        .filter(|(_, run)| ours.contains(run))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn privileged_forged_reports_are_refused() {
    privileged!();
    // 1. A script talking to the socket itself. 2. A script that connects, keeps a copy of the
    // connection in a child, and execs band-shim (a genuine shim, as the peer of that
    // connection): the child then sends its own request, naming made-up image addresses (it
    // cannot read band-shim's). Neither may be answered with a program.
    let script = r#"#!/usr/bin/env python3
import json, os, socket

def talk(sock):
    """Send a forged request, read the answer; never raise. A refused peer's connection may be
    closed before the request is written: the answer (`refused`) is there to read all the same."""
    f = sock.makefile("rw")
    try:
        image = {"phdr": 0x555555554040, "random": 0x7ffff7ff0000}
        f.write(json.dumps({"image": image, "argv": ["jq", "--forged"]}) + "\n")
        f.flush()
    except OSError:
        pass
    try:
        return f.readline().strip() or "none"
    except OSError:
        return "error"

s = socket.socket(socket.AF_UNIX)
s.connect("/band/sock")
print("direct_answer=" + talk(s), flush=True)

for attempt in range(20):
    r, w = os.pipe()
    worker = os.fork()
    if worker == 0:
        os.close(r)
        c = socket.socket(socket.AF_UNIX)
        c.connect("/band/sock")
        os.set_inheritable(c.fileno(), True)
        if os.fork() == 0:
            os.write(w, (talk(c) + "\n").encode())
            os._exit(0)
        os.close(w)
        # The connecting process becomes band-shim; its own call is an ordinary allowed one.
        os.execv("/usr/bin/jq", ["jq", "-r", ".", "/dev/null"])
    os.close(w)
    os.waitpid(worker, 0)
    line = os.read(r, 4096).decode().strip()
    os.close(r)
    print(f"held_{attempt}={line or 'none'}", flush=True)
"#;
    let mut p = with_cli(&["python3 *", "jq *"], &[]);
    p.insist.cli = strs(&["jq --forged"]);
    let mut req = request_with(&[("run.py", 0o755, script)], "run.py", p);
    req.trace = true;
    let o = run(&req);
    let kv = o.kv();
    assert_eq!(
        kv.get("direct_answer").map(String::as_str),
        Some("refused"),
        "{o:#?}"
    );
    let held: Vec<&String> = (0..20)
        .filter_map(|i| kv.get(&format!("held_{i}")))
        .collect();
    assert_eq!(held.len(), 20, "{o:#?}");
    for h in held {
        assert!(
            !h.contains("exec"),
            "a held connection got a program: {h} ({o:#?})"
        );
    }
    assert!(
        !o.result
            .cli_calls
            .iter()
            .any(|c| c.argv.contains(&"--forged".to_string())),
        "{:?}",
        o.result.cli_calls
    );
    assert_eq!(o.result.status, Status::InsistUnsatisfied, "{o:#?}");
    assert!(o.server_stderr.contains("forged"), "{}", o.server_stderr);
    // On the run's record too (issue 36): at least the direct request, with why.
    let forged = o
        .result
        .forged
        .as_ref()
        .expect("forged requests on the record");
    assert!(forged.count >= 1, "{forged:?}");
    assert!(
        !forged.reasons.is_empty() && forged.reasons.len() <= band::proto::Forged::MAX_REASONS,
        "{forged:?}"
    );
}

#[test]
fn privileged_argument_patterns_hold_by_absolute_path_and_programs_stay_hidden() {
    privileged!();
    let script = r#"#!/bin/bash
echo '{"a": 1}' > /tmp/in.json
try() { local name=$1; shift; "$@" >/dev/null 2>&1; echo "$name=$?"; }
try by_name jq .a /tmp/in.json
try abs /usr/bin/jq .a /tmp/in.json
try bin /bin/jq .a /tmp/in.json
try env env /usr/bin/jq .a /tmp/in.json
try bash_c bash -c '/usr/bin/jq .a /tmp/in.json'
try xargs xargs -a /dev/null /usr/bin/jq .a /tmp/in.json
try arg0 bash -c 'exec -a jq /usr/bin/jq .a /tmp/in.json'
try rm_abs /usr/bin/rm -rf /tmp/nothing
try abs_allowed /usr/bin/jq -r .a /tmp/in.json
try procsub jq -r .a <(echo '{"a": 1}')
echo "list_x=[$(ls -A /band/x 2>&1)]"
try read_shim cat /band/shim
try read_usr_bin_jq cat /usr/bin/jq
try ldso_shim /lib64/ld-linux-x86-64.so.2 /band/shim
echo "usr_bin=$(ls /usr/bin | tr '
' ' ')"
echo "mounts_x=$(grep -c ' /band/x' /proc/self/mountinfo)"
echo "mounts_band=$(grep -c ' /band[/ ]' /proc/self/mountinfo)"
# A running allowed command: its program cannot be taken through /proc.
sleep 3 | jq -r . &
pid=$!
sleep 0.5
echo "exe_link=$(readlink /proc/$pid/exe 2>/dev/null || echo refused)"
try exe_open cat /proc/$pid/exe
try maps_open cat /proc/$pid/maps
kill $pid 2>/dev/null
wait 2>/dev/null
exit 0
"#;
    let mut req = request(script, with_cli(&["jq -r *"], &["rm -rf *"]));
    req.trace = true;
    let o = run(&req);
    let kv = o.kv();
    let get = |k: &str| kv.get(k).map(String::as_str).unwrap_or("<missing>");
    for k in ["by_name", "abs", "bin", "env", "bash_c", "arg0", "rm_abs"] {
        assert_eq!(
            get(k),
            "126",
            "{k}: a denied argument pattern must hold: {o:#?}"
        );
    }
    assert_eq!(get("abs_allowed"), "0", "{o:#?}");
    assert_eq!(
        get("procsub"),
        "0",
        "inherited descriptors reach the command: {o:#?}"
    );
    for k in [
        "xargs",
        "read_shim",
        "read_usr_bin_jq",
        "ldso_shim",
        "exe_open",
        "maps_open",
    ] {
        assert_ne!(get(k), "0", "{k} must fail: {o:#?}");
        assert_ne!(get(k), "<missing>", "{k}: {o:#?}");
    }
    assert_eq!(get("list_x"), "[]", "no program is in the sandbox: {o:#?}");
    assert_eq!(get("exe_link"), "refused", "{o:#?}");
    // /band is one mount (the run's exec folder) with io/ on it: no mount names a program.
    assert_eq!(
        get("mounts_x"),
        "0",
        "no mount of its own, no names: {o:#?}"
    );
    assert_eq!(get("mounts_band"), "2", "/band and /band/io: {o:#?}");
    let usr_bin = get("usr_bin");
    assert!(
        usr_bin.split(' ').any(|n| n == "jq") && usr_bin.split(' ').any(|n| n == "rm"),
        "{usr_bin}"
    );
    assert!(
        !usr_bin.split(' ').any(|n| n == "perl" || n == "curl"),
        "{usr_bin}"
    );
    // Every refusal was recorded with the command's own name.
    let denied_argv: Vec<Vec<String>> = o
        .result
        .denied
        .iter()
        .filter_map(|d| match d {
            Denial::Cli { argv, .. } => Some(argv.clone()),
            _ => None,
        })
        .collect();
    assert!(
        denied_argv.contains(&strs(&["rm", "-rf", "/tmp/nothing"])),
        "{denied_argv:?}"
    );
    assert!(
        denied_argv
            .iter()
            .filter(|a| a[..] == strs(&["jq", ".a", "/tmp/in.json"])[..])
            .count()
            >= 7,
        "{denied_argv:?}"
    );
}

#[test]
fn privileged_unexecutable_interpreter_is_setup_failed_process() {
    privileged!();
    let o = run(&request("#!/nonexistent/interpreter\n", policy()));
    assert_eq!(setup_layer(&o), Some(Layer::Process));
}

/// The uid of the run whose band-server prints `lines`, from the `user=` line its script prints
/// first ([`WHO`]).
fn printed_uid(lines: &mut impl Iterator<Item = std::io::Result<String>>) -> u32 {
    let user = lines
        .map_while(Result::ok)
        .find_map(|line| match serde_json::from_str::<Message>(&line) {
            Ok(Message::Event(Event::Stdout { data })) => data
                .lines()
                .find_map(|l| l.strip_prefix("user="))
                .map(str::to_string),
            _ => None,
        })
        .unwrap_or_else(|| panic!("the run never printed its user"));
    uid_of(&user).unwrap_or_else(|| panic!("no uid for {user}"))
}

#[test]
fn privileged_kill9_mid_run_then_janitor_leaves_nothing() {
    privileged!();
    // A run with every layer, its network too (the resolver a dead loopback port: the run asks
    // nothing).
    let cfg_dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cfg = cfg_dir.path().join("server.toml");
    fs_err::write(&cfg, "dns_upstream = [\"127.0.0.1:9\"]\n").unwrap_or_else(|e| panic!("{e}"));
    let mut p = policy();
    p.allow.net = strs(&["api.example.test"]);
    let script = format!("#!/bin/bash\n{WHO}\nsleep 1000 &\nsleep 1000\n");
    let req = request(&script, p);
    let run_id = req.run_id.clone();
    let from = marker();
    let mut child = spawn_with_config(&req, &cfg);
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let mut lines = BufReader::new(stdout).lines();
    // A server that hangs before it prints is killed, which ends its output.
    let hung = band_test::kill_after(&child, band_test::WAIT_LIMIT, "band-server");
    let uid = printed_uid(&mut lines);
    // The run is complete once both its sleeps run.
    let sleeps = || {
        processes_of_run(uid, &run_id, from..u64::MAX)
            .iter()
            .filter(|(_, c)| c == "sleep")
            .count()
    };
    drop(hung);
    band_test::wait_until("both sleeps of the run run", || sleeps() >= 2);
    // The marker: a process started after every process of the run and before the server dies
    // (a clock tick later: start times count 10 ms ticks).
    std::thread::sleep(Duration::from_millis(30));
    let mark = marker();
    // Every leftover checked below exists now, so each check can fail.
    let before = processes_of_run(uid, &run_id, from..mark);
    assert_eq!(
        before.iter().filter(|(_, c)| c == "sleep").count(),
        2,
        "{before:?}"
    );
    let table = format!("band_{run_id}");
    assert!(band_tables().contains(&table), "the run has no table");
    assert!(a_lease_names(&run_id), "no lease names the run");
    let run_dir = state_dir().join("runs").join(&run_id);
    assert!(run_dir.exists(), "the run has no directory");
    let h =
        band_server::layers::cgroup::Hierarchy::detect_system().unwrap_or_else(|e| panic!("{e}"));
    assert!(band_server::layers::cgroup::RunCgroup::list_stale(&h).contains(&run_id));
    child.kill().unwrap_or_else(|e| panic!("{e}"));
    let _ = child.wait();
    let out = run_janitor(Some(std::path::Path::new(
        "/nonexistent/band-test/server.toml",
    )));
    // Tests of other processes share the state directory, and every run's start cleans the dead
    // leases it finds, then takes that slot for its own run: the server of another test may have
    // found this dead lease first. This janitor then saw the slot locked and left it; that server
    // clears the lease once it has removed everything of the run. Wait for the lease to be
    // cleared, whoever cleans (bounded: a janitor that never cleans fails here).
    wait_until_no_lease_names(&run_id);
    assert!(
        !a_lease_names(&run_id),
        "the lease still names the run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // That server may then run as the same uid: only the run's own processes count.
    let left = processes_of_run(uid, &run_id, from..mark);
    assert!(left.is_empty(), "processes left: {left:?}");
    assert!(!run_dir.exists(), "run dir left");
    let mounts = fs_err::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    assert!(!mounts.contains(&run_id), "mount left");
    assert!(
        !band_server::layers::cgroup::RunCgroup::list_stale(&h).contains(&run_id),
        "cgroup left"
    );
    assert!(!band_tables().contains(&table), "table {table} left");
}

/// band-server is the parent of the sandbox's pid 1 (no process between them): killed, it takes
/// every process of the run with it through `PR_SET_PDEATHSIG`, before any janitor runs.
#[test]
fn privileged_a_killed_band_server_takes_every_process_of_its_run_with_it() {
    privileged!();
    let script = format!("#!/bin/bash\n{WHO}\nsleep 1000 &\nsleep 1000\n");
    let req = request(&script, policy());
    let run_id = req.run_id.clone();
    let from = marker();
    let mut child = spawn(&req);
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let mut lines = BufReader::new(stdout).lines();
    let hung = band_test::kill_after(&child, band_test::WAIT_LIMIT, "band-server");
    let uid = printed_uid(&mut lines);
    drop(hung);
    let of_run = || processes_of_run(uid, &run_id, from..u64::MAX);
    band_test::wait_until("both sleeps of the run run", || {
        of_run().iter().filter(|(_, c)| c == "sleep").count() >= 2
    });
    // bubblewrap (both of its processes), band-jail's exec, the shell and the sleeps: the check
    // below can fail.
    assert!(of_run().len() >= 3, "{:?}", of_run());
    child.kill().unwrap_or_else(|e| panic!("{e}"));
    let _ = child.wait();
    band_test::wait_until("no process of the run is left", || of_run().is_empty());
    // What band-server had built is the janitor's (tested above): leave nothing for the next test.
    let _ = run_janitor(Some(std::path::Path::new(
        "/nonexistent/band-test/server.toml",
    )));
    wait_until_no_lease_names(&run_id);
}

#[test]
fn privileged_insist_read_sees_paths_passed_to_commands() {
    privileged!();
    let mut p = policy();
    p.allow.read = strs(&["data/**"]);
    p.insist.read = strs(&["data/in.csv"]);
    let mut req = request("#!/bin/bash\nwc -l < data/in.csv\n", p.clone());
    req.workspace = vec![file("data/in.csv", 0o644, b"a\nb\n")];
    let o = run(&req);
    // A redirection is done by the shell itself: the shim never sees it (documented limit).
    assert_eq!(o.result.status, Status::InsistUnsatisfied, "{o:#?}");
    assert_eq!(o.result.insist_missing, strs(&["read: data/in.csv"]));
    let mut req = request("#!/bin/bash\nwc -l /workspace/data/in.csv\n", p);
    req.workspace = vec![file("data/in.csv", 0o644, b"a\nb\n")];
    let o = run(&req);
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
}

/// A host file allowed at the path of one of the synthetic `/etc`'s files is bound over it: that
/// file is the bind's mount point, so it is made before bubblewrap starts, while the synthetic
/// `/etc`'s other files are made after (`RunDirPlan::late`). The script reads the host's.
#[test]
fn privileged_a_host_file_allowed_over_a_synthetic_etc_file_is_the_hosts() {
    privileged!();
    let host = fs_err::read_to_string("/etc/hosts").unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !host.contains("\tband\n"),
        "this host's /etc/hosts looks like band's own: the test could not tell them apart"
    );
    let mut p = policy();
    p.allow.read = strs(&["/etc/hosts"]);
    let o = run(&request(&format!("#!/bin/sh\ncat /etc/hosts\n{WHO}\n"), p));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let (shown, rest) = o
        .result
        .stdout
        .split_once("user=")
        .unwrap_or_else(|| panic!("{o:#?}"));
    assert_eq!(shown, host);
    // The late files are there too: the run's user is named from the synthetic passwd.
    assert!(rest.starts_with("band-run-"), "{o:#?}");
}

#[test]
fn privileged_absolute_allow_patterns_bind_host_paths() {
    privileged!();
    use std::os::unix::fs::PermissionsExt;
    let host = tempfile::tempdir_in("/var/tmp").unwrap_or_else(|e| panic!("{e}"));
    let root = host.path();
    fs_err::set_permissions(root, std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("{e}"));
    fs_err::create_dir(root.join("in")).unwrap_or_else(|e| panic!("{e}"));
    fs_err::write(root.join("in/data.txt"), "host-data").unwrap_or_else(|e| panic!("{e}"));
    fs_err::write(root.join("in/tool.sh"), "#!/bin/sh\necho ran\n")
        .unwrap_or_else(|e| panic!("{e}"));
    for f in ["in/data.txt", "in/tool.sh"] {
        fs_err::set_permissions(root.join(f), std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    fs_err::set_permissions(root.join("in"), std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("{e}"));
    fs_err::create_dir(root.join("out")).unwrap_or_else(|e| panic!("{e}"));
    fs_err::set_permissions(root.join("out"), std::fs::Permissions::from_mode(0o777))
        .unwrap_or_else(|e| panic!("{e}"));
    let r = root.display();
    let mut p = policy();
    p.allow.read = strs(&[&format!("{r}/in/**")]);
    p.allow.write = strs(&[&format!("{r}/out/**")]);
    let script = format!(
        r#"#!/bin/bash
echo "read=$(cat {r}/in/data.txt)"
(echo x > {r}/in/data.txt) 2>/dev/null && echo "ro_write=ok" || echo "ro_write=refused"
{r}/in/tool.sh >/dev/null 2>&1 && echo "exec=ran" || echo "exec=refused"
echo written > {r}/out/new.txt && echo "rw_write=ok"
echo "sibling=$(test -e {r}/secret && echo visible || echo hidden)"
"#
    );
    fs_err::write(root.join("secret"), "no").unwrap_or_else(|e| panic!("{e}"));
    let o = run(&request(&script, p));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    assert_eq!(kv.get("read").map(String::as_str), Some("host-data"));
    assert_eq!(kv.get("ro_write").map(String::as_str), Some("refused"));
    assert_eq!(kv.get("exec").map(String::as_str), Some("refused"));
    assert_eq!(kv.get("rw_write").map(String::as_str), Some("ok"));
    assert_eq!(kv.get("sibling").map(String::as_str), Some("hidden"));
    assert_eq!(
        fs_err::read_to_string(root.join("out/new.txt"))
            .ok()
            .as_deref(),
        Some("written\n")
    );
    assert_eq!(
        fs_err::read_to_string(root.join("in/data.txt"))
            .ok()
            .as_deref(),
        Some("host-data")
    );
}

#[test]
fn privileged_shim_refuses_direct_and_unknown_invocations() {
    privileged!();
    let script = r#"#!/bin/bash
/band/shim >/dev/null 2>&1; echo "direct=$?"
(exec -a perl /band/shim -e 1) >/dev/null 2>&1; echo "renamed=$?"
"#;
    let o = run(&request(script, policy()));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    assert_eq!(o.kv().get("direct").map(String::as_str), Some("126"));
    assert_eq!(o.kv().get("renamed").map(String::as_str), Some("127"));
}

#[test]
fn privileged_a_client_that_does_not_read_cannot_stall_the_run() {
    privileged!();
    let mut p = policy();
    p.limits.max_runtime_ms = Some(1_500);
    // The script never ends on its own: only the runtime limit can end the run.
    let req = request(
        "#!/bin/bash\nhead -c 3000000 /dev/zero | tr '\\0' x\nsleep infinity\n",
        p,
    );
    let run_dir = state_dir().join("runs").join(&req.run_id);
    let child = spawn(&req);
    // Read nothing until the run is torn down: the server must still enforce the wall clock and
    // tear down while its client does not read.
    band_test::wait_until("the run torn down while the client was not reading", || {
        !run_dir.exists()
    });
    let o = finish(child);
    assert_eq!(o.result.status, Status::Timeout, "{:?}", o.result.status);
}

#[test]
fn privileged_not_root_is_setup_failed_identity() {
    privileged!();
    let line = serde_json::to_string(&Message::Request(Box::new(request(
        "#!/bin/sh\ntrue\n",
        policy(),
    ))))
    .unwrap_or_default();
    let mut child = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            server(),
            "run",
        ])
        .env(
            band_server::config::STATE_DIR_ENV,
            "/nonexistent/band-test-state",
        )
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap_or_else(|| panic!("no stdin"));
        stdin
            .write_all(line.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
        stdin.write_all(b"\n").unwrap_or_else(|e| panic!("{e}"));
    }
    let o = finish(child);
    assert_eq!(o.exit, Some(0));
    assert_eq!(setup_layer(&o), Some(Layer::Identity));
}

#[test]
fn privileged_a_declared_command_keeps_the_helpers_of_its_library_tree() {
    privileged!();
    if !std::path::Path::new("/usr/lib/git-core/git").exists() {
        eprintln!("skipped: git is not installed");
        return;
    }
    // The tree's helpers stay; its copy of git itself does not (it would run without band-shim,
    // so without git's argument patterns).
    let script = r#"#!/bin/bash
test -x /usr/lib/git-core/git-remote-http && echo helper=present
/usr/lib/git-core/git --version >/dev/null 2>&1; echo "copy=$?"
git --version >/dev/null && echo git=ran
git status >/dev/null 2>&1; echo "denied=$?"
"#;
    let o = run(&request(script, with_cli(&["git --version"], &[])));
    assert_eq!(
        o.kv().get("helper").map(String::as_str),
        Some("present"),
        "{o:#?}"
    );
    assert_ne!(o.kv().get("copy").map(String::as_str), Some("0"), "{o:#?}");
    assert_eq!(o.kv().get("git").map(String::as_str), Some("ran"), "{o:#?}");
    assert_eq!(
        o.kv().get("denied").map(String::as_str),
        Some("126"),
        "{o:#?}"
    );
}

#[test]
fn privileged_janitor_kills_leftovers_of_a_free_slot() {
    privileged!();
    // Make sure the last slot's user exists, then start a stray process as it with no lease.
    let user = band_server::layers::identity::uidpool::user_name(
        band_server::layers::identity::uidpool::POOL_SIZE - 1,
    );
    let (uid, gid) = band_server::layers::identity::uidpool::ensure_user(&user)
        .unwrap_or_else(|e| panic!("{e}"));
    let from = marker();
    let mut stray = std::process::Command::new("setpriv")
        .args([
            format!("--reuid={uid}"),
            format!("--regid={gid}"),
            "--clear-groups".into(),
        ])
        .args(["sleep", "1000"])
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    // Processes of the uid started from `from` to `mark` are this test's (a run that leases the
    // slot after the janitor's pass may start its own).
    let mark = marker();
    let lease = band_server::layers::identity::uidpool::lease_path(
        &state_dir(),
        band_server::layers::identity::uidpool::POOL_SIZE - 1,
    );
    fs_err::create_dir_all(lease.parent().unwrap_or(&state_dir()))
        .unwrap_or_else(|e| panic!("{e}"));
    let _ = fs_err::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&lease);
    // (Any band-server that starts meanwhile, e.g. for a concurrent test, runs the same pass and
    // may kill it first.)
    std::thread::sleep(Duration::from_millis(50));
    run_janitor(None);
    let status = stray.wait().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !status.success(),
        "the stray process should have been killed"
    );
    let left: Vec<i32> = pids_of_uid(uid)
        .into_iter()
        .filter(|&p| start_time(p).is_some_and(|t| (from..mark).contains(&t)))
        .collect();
    assert!(left.is_empty(), "processes of {user} left: {left:?}");
}

/// A run's mounts (its run directory, the sandbox's view) are in a mount namespace of the run's
/// own: band-server's run sees them, the host's namespace never holds them, so no other run's
/// bubblewrap copies them into its mount table; and when band-server dies (SIGKILL mid-run) they
/// go with its processes, leaving the janitor only the empty folder.
#[test]
fn privileged_a_runs_mounts_are_in_its_own_mount_namespace_only() {
    privileged!();
    let req = request("#!/bin/sh\necho ready\nsleep 1000\n", policy());
    let w = spawn_watching(&req, "ready");
    w.printed();
    let server = w.child.id();
    let run_dir = state_dir().join("runs").join(&req.run_id);
    let theirs = fs_err::read_to_string(format!("/proc/{server}/mountinfo")).unwrap();
    assert!(
        theirs.contains(&format!("{}/view ", run_dir.display())),
        "band-server's run does not see its view:\n{theirs}"
    );
    let host = fs_err::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !host.contains(&req.run_id),
        "a mount of the running run is in the host's namespace:\n{host}"
    );
    let mut child = w.child;
    child.kill().unwrap_or_else(|e| panic!("{e}"));
    let _ = child.wait();
    // The janitor frees the dead run's lease (its processes die with band-server) and removes its
    // folders.
    band_test::wait_until("the janitor removes the dead run's folder", || {
        run_janitor(None);
        !run_dir.exists()
    });
    let host = fs_err::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!host.contains(&req.run_id), "{host}");
}
