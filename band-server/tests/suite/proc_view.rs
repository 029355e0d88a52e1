//! Red-team round 3 (issue 36): the run's /proc shows no host kernel facts (item 7), and the
//! dynamic loader starts nothing the gate has not judged (item 8).

use band::proto::Status;
use band_server::layers::fs::procmask::{KEPT, MASKED};
use pretty_assertions::assert_eq;

use super::helpers::*;

/// The issue's list, checked by name whatever the host has (a name the host lacks is absent
/// inside too).
const NAMED: &[&str] = band_server::layers::fs::procmask::KNOWN_HOST_FACTS;

/// For each path: `<path>=empty` (a file that reads nothing, a folder with nothing in it),
/// `<path>=refused <errno>`, `<path>=absent`, or `<path>=LEAK <n>` with what it read. Every
/// top-level entry of the run's `/proc` but processes and `kept` is probed too.
const PROBE: &str = r#"import errno, json, os, subprocess, sys
kept, named = json.load(open("/skill/lists.json"))
top = [e for e in os.listdir("/proc") if not e.isdigit() and e not in kept]
def probe(rel):
    p = "/proc/" + rel
    try:
        if os.path.isdir(p) and not os.path.islink(p):
            got = os.listdir(p)
            return "empty" if not got else "LEAK %d %s" % (len(got), got[:5])
        with open(p, "rb") as f:
            d = f.read(4096)
        return "empty" if not d else "LEAK %d %r" % (len(d), d[:60])
    except FileNotFoundError:
        return "absent"
    except OSError as e:
        return "refused " + errno.errorcode.get(e.errno, str(e.errno))
for rel in sorted(set(top) | set(named)):
    print("%s=%s" % (rel, probe(rel)))
print("top=" + ",".join(sorted(top)))
for rel in ["sysrq-trigger", "cmdline"]:
    try:
        with open("/proc/" + rel, "w") as f:
            f.write("h")
        print("write %s=written" % rel)
    except OSError as e:
        print("write %s=refused %s" % (rel, errno.errorcode.get(e.errno, str(e.errno))))
for rel in ["cpuinfo", "meminfo", "stat", "loadavg", "uptime", "self/status", "self/cmdline"]:
    print("kept %s=%d" % (rel, len(open("/proc/" + rel, "rb").read())))
print("sys=" + str(os.path.exists("/sys")))
ps = subprocess.run(["ps", "-eo", "pid,comm"], capture_output=True, text=True)
print("ps rc=%d" % ps.returncode)
print("ps=" + ",".join(l.split()[1] for l in ps.stdout.splitlines()[1:]))
import multiprocessing, platform
print("python cpus=%d" % multiprocessing.cpu_count())
"#;

#[test]
fn privileged_the_host_kernel_facts_are_not_in_the_run_proc() {
    privileged!();
    let kept: Vec<&str> = KEPT.iter().map(|(k, _)| *k).collect();
    let named: Vec<&str> = NAMED
        .iter()
        .copied()
        .chain(MASKED.iter().map(|(m, _)| *m))
        .collect();
    let lists = serde_json::to_string(&(kept, &named)).unwrap_or_default();
    let mut p = policy();
    p.allow.cli = strs(&["python3 *", "ps -eo pid,comm"]);
    let req = request_with(
        &[
            (
                "run.sh",
                0o755,
                "#!/bin/bash\nexec python3 /skill/probe.py\n",
            ),
            ("probe.py", 0o644, PROBE),
            ("lists.json", 0o644, &lists),
        ],
        "run.sh",
        p,
    );
    let o = run(&req);
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    let get = |k: &str| value_of(&kv, k);

    // Outside, for comparison: the host's command line is there, and not empty.
    let host_cmdline = fs_err::read("/proc/cmdline").unwrap_or_default();
    assert!(
        !host_cmdline.is_empty(),
        "the host's /proc/cmdline is empty"
    );
    assert_eq!(get("cmdline"), "empty", "{o:#?}");

    // Every name of the issue the host has, and every top-level entry that is no process and
    // not kept: empty, or refused; never what the host's says.
    let top: Vec<String> = get("top").split(',').map(str::to_string).collect();
    assert!(top.iter().any(|t| t == "cmdline"), "{top:?}");
    for rel in named.iter().map(|s| s.to_string()).chain(top) {
        let host_has = std::path::Path::new("/proc").join(&rel).exists();
        let got = get(&rel);
        if host_has {
            assert!(
                got == "empty" || got.starts_with("refused"),
                "/proc/{rel} inside the run: {got}"
            );
        } else {
            assert!(
                got == "absent" || got == "empty",
                "/proc/{rel} (not on the host): {got}"
            );
        }
    }
    if std::path::Path::new("/proc/sysrq-trigger").exists() {
        assert!(get("write sysrq-trigger").starts_with("refused"), "{o:#?}");
    }
    assert_eq!(get("write cmdline"), "refused EROFS", "{o:#?}");

    // What programs need is there: the kept files, ps of the run's own processes, python.
    for rel in [
        "cpuinfo",
        "meminfo",
        "stat",
        "loadavg",
        "uptime",
        "self/status",
    ] {
        let n: usize = get(&format!("kept {rel}")).parse().unwrap_or(0);
        assert!(n > 0, "/proc/{rel} is empty inside the run: {o:#?}");
    }
    assert_eq!(get("sys"), "False", "the run has no /sys");
    assert_eq!(get("ps rc"), "0", "{o:#?}");
    let ps = get("ps");
    assert!(ps.contains("python3") && ps.contains("ps"), "{ps}");
    assert!(
        ps.split(',').count() <= 5,
        "ps sees processes that are not the run's: {ps}"
    );
    assert!(
        get("python cpus").parse::<usize>().unwrap_or(0) > 0,
        "{o:#?}"
    );
}

/// The dynamic loader run as a command (`/lib64/ld-linux-x86-64.so.2 <file>`) needs only to read
/// and map its file. What it could start, and what it gets, from inside a real run:
/// `<name>=ran` (the program ran), `=refused <why>`.
const LOADER_PROBE: &str = r#"import os, subprocess, sys
LD = "/lib64/ld-linux-x86-64.so.2"
ELF = open("/skill/prog.elf", "rb").read()
open("/tmp/prog", "wb").write(ELF)
os.chmod("/tmp/prog", 0o755)
targets = {
    "declared": "/usr/bin/python3",
    "shim": "/band/shim",
    "jail": "/band/jail",
    "tmp": "/tmp/prog",
    "skill": "/skill/prog.elf",
    "library": sys.argv[1],
}
for name, path in targets.items():
    r = subprocess.run([LD, path, "-u"], capture_output=True, text=True)
    if r.returncode == 0 and r.stdout.strip().isdigit():
        print("%s=ran" % name)
    else:
        why = r.stderr.strip().split(": ")[-1] if r.stderr.strip() else "exit %d" % r.returncode
        print("%s=refused %s" % (name, why))
r = subprocess.run([LD, "/lib/x86_64-linux-gnu/libc.so.6"], capture_output=True, text=True)
print("libc=%d %s" % (r.returncode, r.stdout.splitlines()[0] if r.stdout else r.stderr.strip()))
print("python=" + sys.version.split()[0])
"#;

/// A file the test puts in the host's `/usr/lib` for one run, removed when dropped.
struct HostFixture(std::path::PathBuf);

impl Drop for HostFixture {
    fn drop(&mut self) {
        let _ = fs_err::remove_dir_all(&self.0);
    }
}

#[test]
fn privileged_the_loader_starts_nothing_the_gate_has_not_judged() {
    privileged!();
    if !cfg!(target_arch = "x86_64")
        || !std::path::Path::new("/lib64/ld-linux-x86-64.so.2").exists()
    {
        eprintln!("skipped: the probe names x86_64 glibc's loader");
        return;
    }
    // An ELF program without an execute bit in a library tree (a copy of `id`, mode 0644): the
    // kernel would not run it, the loader would. The list of hidden programs is made again now
    // that it is there (a scan under way elsewhere holds the host's lock: try again).
    let id = fs_err::read("/usr/bin/id").unwrap_or_else(|e| panic!("{e}"));
    let dir = std::path::PathBuf::from(format!("/usr/lib/band-test-loader-{}", run_id()));
    let fixture = HostFixture(dir.clone());
    fs_err::create_dir(&dir).unwrap_or_else(|e| panic!("{e}"));
    let prog = dir.join("id-copy");
    fs_err::write(&prog, &id).unwrap_or_else(|e| panic!("{e}"));
    let listed = || {
        fs_err::read_to_string(std::path::Path::new(STATE_DIR).join("exec-mask.json"))
            .is_ok_and(|t| t.contains(&*prog.to_string_lossy()))
    };
    for _ in 0..120 {
        let st = std::process::Command::new(server())
            .arg("rescan-mask")
            .arg(STATE_DIR)
            .status()
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(st.success(), "band-server rescan-mask: {st}");
        if listed() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    assert!(listed(), "{} never made it into the list", prog.display());

    let mut p = policy();
    p.allow.cli = strs(&["python3 *"]);
    let req = request_with(
        &[
            (
                "run.sh",
                0o755,
                &format!(
                    "#!/bin/bash\nexec python3 /skill/probe.py {}\n",
                    prog.display()
                ),
            ),
            ("probe.py", 0o644, LOADER_PROBE),
        ],
        "run.sh",
        p,
    );
    let mut req = req;
    req.bundle.push(file("prog.elf", 0o755, &id));
    req.bundle_sha256 = bundle_hash(&req.bundle);
    let o = run(&req);
    drop(fixture);
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    let get = |k: &str| value_of(&kv, k);
    // The gate's programs and helpers are execute-only: the loader cannot read them.
    for k in ["declared", "shim", "jail"] {
        assert_eq!(get(k), "refused Permission denied", "{k}: {o:#?}");
    }
    // What the run wrote or brought is on a noexec mount: the loader cannot map it.
    for k in ["tmp", "skill"] {
        assert_eq!(
            get(k),
            "refused failed to map segment from shared object",
            "{k}: {o:#?}"
        );
    }
    // A program in the library trees is hidden whatever its mode bits.
    assert_eq!(
        get("library"),
        "refused No such file or directory",
        "{o:#?}"
    );
    // The loader itself still serves the gate's programs (python runs), and libc run as a
    // program prints its version and exits.
    assert!(get("python").starts_with('3'), "{o:#?}");
    assert!(get("libc").starts_with("0 GNU C Library"), "{o:#?}");
}
