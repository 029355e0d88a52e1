//! Issue 13 (items 4 and 11), seen from inside the sandbox: memfd execution, the seccomp
//! additions, host paths on command lines, cleanup scoped to one state directory, zombies.

use std::io::{BufRead, BufReader};

use band::proto::{Event, Message, Status};
use pretty_assertions::assert_eq;

use super::helpers::*;

fn with_python() -> band::policy::Policy {
    let mut p = policy();
    p.allow.cli = strs(&["python3 *"]);
    p
}

/// A request whose entry runs `probe.py` with python3.
fn python_request(probe: &str, p: band::policy::Policy) -> band::proto::RunRequest {
    request_with(
        &[
            (
                "run.sh",
                0o755,
                "#!/bin/bash\nexec python3 /skill/probe.py\n",
            ),
            ("probe.py", 0o644, probe),
        ],
        "run.sh",
        p,
    )
}

/// A 132-byte static x86_64 ELF that exits with status 42.
const TINY_ELF: &str = "7f454c4602010100000000000000000002003e0001000000780040000000000040000000000000000000000000000000000000004000380001000000000000000100000005000000000000000000000000004000000000000000400000000000840000000000000084000000000000000010000000000000bf2a000000b83c0000000f05";

#[test]
fn privileged_memfd_contents_cannot_be_executed() {
    privileged!();
    if !cfg!(target_arch = "x86_64") {
        eprintln!("skipped: the probe's ELF is x86_64");
        return;
    }
    // Each exec runs in a child: 42 means the bytes ran, 100 + errno that exec failed.
    let probe = format!(
        r#"import ctypes, os, sys
ELF = bytes.fromhex("{TINY_ELF}")
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def attempt(how, fd):
    pid = os.fork()
    if pid == 0:
        try:
            if how == "procfd":
                os.execv("/proc/self/fd/%d" % fd, ["probe"])
            elif how == "fexecve":
                os.execve(fd, ["probe"], {{}})
            else:
                argv = (ctypes.c_char_p * 2)(b"probe", None)
                envp = (ctypes.c_char_p * 1)(None)
                ctypes.set_errno(0)
                libc.syscall(ctypes.c_long(322), ctypes.c_long(fd), b"", argv, envp, ctypes.c_long(0x1000))
                os._exit(100 + ctypes.get_errno())
        except OSError as e:
            os._exit(100 + e.errno)
        os._exit(99)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
try:
    fd = os.memfd_create("probe", 0)
    print("memfd=ok")
except OSError as e:
    print("memfd=errno%d" % e.errno)
    sys.exit(0)
os.write(fd, ELF)
try:
    os.fchmod(fd, 0o755)
    print("chmod=ok")
except OSError as e:
    print("chmod=errno%d" % e.errno)
for how in ["procfd", "fexecve", "execveat"]:
    print("%s=%d" % (how, attempt(how, fd)))
try:
    os.memfd_create("exec", 0x10)
    print("mfd_exec=ok")
except OSError as e:
    print("mfd_exec=errno%d" % e.errno)
print("noexec=" + open("/proc/sys/vm/memfd_noexec").read().strip())
"#
    );
    let o = run(&python_request(&probe, with_python()));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    let get = |k: &str| value_of(&kv, k);
    // On this kernel (6.3+) memfds still work, they just cannot be executed.
    assert_eq!(get("memfd"), "ok", "{o:#?}");
    let refused = [
        (100 + libc::EACCES).to_string(),
        (100 + libc::EPERM).to_string(),
    ];
    for how in ["procfd", "fexecve", "execveat"] {
        assert!(
            refused.contains(&get(how)),
            "{how}: exec of a memfd must fail with EACCES/EPERM, got {} (42: it ran): {o:#?}",
            get(how)
        );
    }
    assert!(
        ["errno1", "errno13"].contains(&get("mfd_exec").as_str()),
        "memfd_create(MFD_EXEC): {}",
        get("mfd_exec")
    );
    assert_ne!(get("chmod"), "ok", "the noexec seal must refuse chmod +x");
    assert_eq!(get("noexec"), "2");
}

#[test]
fn privileged_modify_ldt_memfd_secret_and_netlink_are_denied() {
    privileged!();
    let probe = r#"import ctypes, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(label, nr, *args):
    ctypes.set_errno(0)
    rc = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    print("%s=%s" % (label, "ok" if rc >= 0 else "errno%d" % ctypes.get_errno()))
ldt = (ctypes.c_char * 16)()
if ctypes.sizeof(ctypes.c_void_p) == 8 and __import__("platform").machine() == "x86_64":
    call("modify_ldt", 154, 0, ctypes.addressof(ldt), 16)
    call("memfd_secret", 447, 0)
for label, proto in [("netlink_route", 0), ("netlink_diag", 4), ("netlink_uevent", 15)]:
    try:
        socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, proto).close()
        print(label + "=ok")
    except OSError as e:
        print("%s=errno%d" % (label, e.errno))
"#;
    let o = run(&python_request(probe, with_python()));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    let get = |k: &str| value_of(&kv, k);
    if cfg!(target_arch = "x86_64") {
        assert_eq!(get("modify_ldt"), "errno1", "{o:#?}");
        assert_eq!(get("memfd_secret"), "errno1", "{o:#?}");
    }
    for label in ["netlink_route", "netlink_diag", "netlink_uevent"] {
        assert_eq!(get(label), "errno1", "{label}: {o:#?}");
    }
}

/// The sandbox's programs are mapped at random addresses even when band-server was started
/// without (`setarch -R`: `ADDR_NO_RANDOMIZE` in its persona, which its children inherit):
/// band-jail clears the flag, and the CLI gate tells one program of a process from the next by
/// those addresses. Seen from inside: the persona, and where two runs of one program put their
/// stack.
#[test]
fn privileged_programs_are_mapped_at_random_addresses_under_setarch_r() {
    privileged!();
    let probe = r#"import ctypes, subprocess
print("persona=%08x" % ctypes.CDLL(None).personality(0xffffffff))
stacks = {subprocess.run(["cat", "/proc/self/stat"], capture_output=True, text=True).stdout.split()[27] for _ in range(3)}
print("stacks=%d" % len(stacks))
"#;
    let mut p = with_python();
    p.allow.cli = strs(&["python3 *", "cat *"]);
    let line = serde_json::to_string(&Message::Request(Box::new(python_request(probe, p))))
        .unwrap_or_default();
    let o = finish(spawn_line_under(
        &["setarch", "-R"],
        &line,
        std::path::Path::new("/nonexistent/band-test/server.toml"),
        std::path::Path::new(STATE_DIR),
    ));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    assert_eq!(
        kv.get("persona").map(String::as_str),
        Some("00000000"),
        "{o:#?}"
    );
    assert_eq!(kv.get("stacks").map(String::as_str), Some("3"), "{o:#?}");
}

#[test]
fn privileged_command_lines_inside_name_no_host_path() {
    privileged!();
    let script = r#"#!/bin/bash
echo "pid1=$(tr '\0' ' ' < /proc/1/cmdline)"
for f in /proc/[0-9]*/cmdline; do
  echo "cmdline $f: $(tr '\0' ' ' < "$f" 2>/dev/null)"
done
for f in /proc/[0-9]*/environ; do
  echo "environ $f: $(tr '\0' ' ' < "$f" 2>/dev/null)"
done
"#;
    let req = request(script, policy());
    let o = run(&req);
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let out = o.stdout();
    assert!(out.contains("pid1="), "{o:#?}");
    assert!(
        out.lines().filter(|l| l.starts_with("cmdline ")).count() >= 2,
        "{out}"
    );
    let install = std::path::Path::new(server())
        .parent()
        .unwrap_or_else(|| panic!("no parent"))
        .display()
        .to_string();
    for needle in [
        STATE_DIR,
        req.run_id.as_str(),
        install.as_str(),
        "/band-jail",
    ] {
        assert!(
            !out.contains(needle),
            "{needle:?} is visible inside the sandbox:\n{out}"
        );
    }
}

fn read_user(child: &mut std::process::Child) -> String {
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let mut lines = BufReader::new(stdout).lines();
    // A server that hangs before it prints is killed, which ends its output.
    let _hung = band_test::kill_after(child, band_test::WAIT_LIMIT, "band-server");
    while let Some(Ok(line)) = lines.next() {
        if let Ok(Message::Event(Event::Stdout { data })) = serde_json::from_str::<Message>(&line)
            && let Some(u) = data.lines().find_map(|l| l.strip_prefix("user="))
        {
            // Keep reading in the background so the server never blocks on its stdout.
            std::thread::spawn(move || for _ in lines.by_ref() {});
            return u.to_string();
        }
    }
    panic!("the run never printed its user")
}

const WHO: &str = r#"echo "user=$(awk -F: -v u="$(awk '/^Uid:/{print $2}' /proc/self/status)" '$3==u{print $1}' /etc/passwd)""#;

#[test]
fn privileged_a_janitor_of_another_state_dir_leaves_a_live_run_alone() {
    privileged!();
    let script = format!("#!/bin/bash\n{WHO}\nsleep 3\necho survived=yes\n");
    let req = request(&script, policy());
    let run_id = req.run_id.clone();
    let mut child = spawn(&req);
    let user = read_user(&mut child);
    let uid = uid_of(&user).unwrap_or_else(|| panic!("no uid for {user}"));
    // The run's own processes (in its cgroup): another run's of the uid would not do.
    assert!(!processes_of_run(uid, &run_id, 0..0).is_empty());

    // Another server's state directory, where the run's slot (so its uid) is free. (Only that
    // slot: other tests' runs, and other servers' on this host, are none of this test's business.)
    let other = tempfile::Builder::new()
        .prefix("band-test-other-")
        .tempdir_in("/run")
        .unwrap_or_else(|e| panic!("{e}"));
    let slot: u32 = user
        .strip_prefix("band-run-")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not a pool user: {user}"));
    let lease = band_server::layers::identity::uidpool::lease_path(other.path(), slot);
    fs_err::create_dir_all(lease.parent().unwrap_or(other.path()))
        .unwrap_or_else(|e| panic!("{e}"));
    fs_err::write(&lease, "").unwrap_or_else(|e| panic!("{e}"));
    // The pass every band-server runs as it starts (the `janitor` command also scans nftables
    // tables host-wide, which is the network layer's business and not scoped yet).
    let report = band_server::janitor::run(
        other.path(),
        std::path::Path::new("/nonexistent/nft"),
        false,
    );
    let h =
        band_server::layers::cgroup::Hierarchy::detect_system().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        band_server::layers::cgroup::RunCgroup::list_stale(&h).contains(&run_id),
        "the other janitor removed the live run's cgroup: {report:?}"
    );
    assert!(
        !processes_of_run(uid, &run_id, 0..0).is_empty(),
        "the other janitor killed the live run's processes: {report:?}"
    );
    let status = child.wait().unwrap_or_else(|e| panic!("{e}"));
    assert!(status.success());
    // The run finished normally: its cgroup is gone now (its own server removed it).
    assert!(!band_server::layers::cgroup::RunCgroup::list_stale(&h).contains(&run_id));
}

/// Runs band-server under a child subreaper (a python wrapper): whatever band-server leaves
/// orphaned is handed to the wrapper instead of the host's init, and stays a zombie there, since
/// the wrapper reaps band-server only. It reports those zombies on stderr as `zombie-child …`.
const SUBREAPER: &str = r#"import ctypes, os, subprocess, sys, time
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(36, 1, 0, 0, 0) != 0:
    sys.exit("PR_SET_CHILD_SUBREAPER failed")
code = subprocess.call(sys.argv[1:])
time.sleep(0.3)
me = str(os.getpid())
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    try:
        stat = open("/proc/%s/stat" % pid).read()
    except OSError:
        continue
    state, ppid = stat[stat.rindex(")") + 2:].split()[:2]
    if ppid == me:
        print("zombie-child" if state == "Z" else "orphan-child", stat.strip(), file=sys.stderr)
sys.exit(code)
"#;

fn run_under_subreaper(req: &band::proto::RunRequest) -> Outcome {
    use std::io::Write;
    let line = serde_json::to_string(&Message::Request(Box::new(req.clone())))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut child = std::process::Command::new("python3")
        .args(["-c", SUBREAPER, server(), "run"])
        .env(band_server::config::STATE_DIR_ENV, STATE_DIR)
        .env(
            band_server::config::CONFIG_ENV,
            "/nonexistent/band-test/server.toml",
        )
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start python3: {e}"));
    let mut stdin = child.stdin.take().unwrap_or_else(|| panic!("no stdin"));
    stdin
        .write_all(format!("{line}\n").as_bytes())
        .unwrap_or_else(|e| panic!("{e}"));
    drop(stdin);
    finish(child)
}

#[test]
fn privileged_no_zombie_is_left_after_a_run() {
    privileged!();
    // A run that ends normally with a daemonised child (killed with the cgroup), and one that is
    // killed at its deadline: both end with cgroup.kill, which kills bubblewrap and its child at
    // once.
    for (script, limit, status) in [
        (
            "#!/bin/bash\n(sleep 1000 &)\nsleep 0.3\necho done\n",
            None,
            Status::Ok,
        ),
        ("#!/bin/bash\nsleep 1000\n", Some(1_500), Status::Timeout),
    ] {
        let mut p = policy();
        p.limits.max_runtime_ms = limit;
        let o = run_under_subreaper(&request(script, p));
        assert_eq!(o.result.status, status, "{o:#?}");
        let left: Vec<&str> = o
            .server_stderr
            .lines()
            .filter(|l| l.starts_with("zombie-child") || l.starts_with("orphan-child"))
            .collect();
        assert!(
            left.is_empty(),
            "band-server left processes for init to reap: {left:#?}"
        );
    }
}

/// The janitor pass before a run cleans up after other runs (dead ones: possibly another user's,
/// or another test's). What it did goes to the state directory's log, not into this run's
/// output, where it read as if it were about this run.
#[test]
fn privileged_the_pass_before_a_run_logs_what_it_cleaned_instead_of_saying_it() {
    privileged!();
    let state = OwnStateDir::new("band-test-janitor-log-");
    let config = std::path::Path::new("/nonexistent/band-test/server.toml");
    let run = || {
        let req = request("#!/bin/sh\necho ran\n", policy());
        let line = serde_json::to_string(&Message::Request(Box::new(req)))
            .unwrap_or_else(|e| panic!("{e}"));
        finish(spawn_line_in(&line, config, state.path()))
    };
    let o = run();
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    // A dead run's directory: no lease names it.
    let dead = "00dead00dead00de";
    let dir = state.path().join("runs").join(dead);
    fs_err::create_dir_all(dir.join("io")).unwrap_or_else(|e| panic!("{e}"));
    let o = run();
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    assert!(!dir.exists(), "the dead run's directory is left");
    assert!(
        !o.server_stderr.contains("janitor"),
        "the pass spoke in the run's output: {}",
        o.server_stderr
    );
    let log = fs_err::read_to_string(state.path().join(band_server::janitor::LOG_FILE))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        log.contains(&format!("removed run dirs [\"{dead}\"]")),
        "{log}"
    );
}
