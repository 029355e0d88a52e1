//! `band learn`'s observing runs (`observe: true`), and refusals that used to vanish: a write
//! outside `allow.write`, and `allow.write: out/` creating `out/`.

use band::proto::{Access, Denial, Event, Observed, PathSeen};

use super::helpers::{file, policy, privileged, request, run, strs};

#[test]
fn privileged_observe_records_the_workspace_files_read_and_written_and_nothing_else() {
    privileged!();
    let mut p = policy();
    p.allow.read = strs(&["**"]);
    p.allow.write = strs(&["out/**"]);
    // A shell redirection (no exec the gate could see), a read by an essential command, a write,
    // and one file never touched.
    let mut req = request(
        "#!/bin/sh\nread line < notes.txt\ncat data/in.csv > /dev/null\nmkdir -p out\necho \"$line\" > out/r.md\necho ok\n",
        p,
    );
    req.observe = true;
    req.workspace = vec![
        file("notes.txt", 0o644, b"hello\n"),
        file("data/in.csv", 0o644, b"a,b\n"),
        file("data/untouched.csv", 0o644, b"c,d\n"),
    ];
    let out = run(&req);
    assert_eq!(out.stdout().trim(), "ok", "{out:?}");
    // Paths outside the workspace: the next test.
    let mut observed = out.result.observed.clone();
    if let Some(o) = observed.as_mut() {
        o.outside.clear();
    }
    assert_eq!(
        observed,
        Some(Observed {
            reads: strs(&["data/in.csv", "notes.txt"]),
            writes: strs(&["out/r.md"]),
            complete: true,
            outside: Vec::new(),
            listed: Vec::new(),
        }),
        "{out:?}"
    );
}

#[test]
fn privileged_without_observe_nothing_is_observed() {
    privileged!();
    let mut p = policy();
    p.allow.read = strs(&["**"]);
    let mut req = request("#!/bin/sh\ncat notes.txt\n", p);
    req.workspace = vec![file("notes.txt", 0o644, b"hello\n")];
    let out = run(&req);
    assert_eq!(out.stdout().trim(), "hello", "{out:?}");
    assert_eq!(out.result.observed, None);
}

#[test]
fn privileged_a_write_outside_allow_write_is_a_denial_not_silence() {
    privileged!();
    let mut p = policy();
    // `*.json` makes the workspace root writable; `notes.txt` is not admitted.
    p.allow.write = strs(&["*.json"]);
    let req = request(
        "#!/bin/sh\necho '{}' > a.json\necho secret > notes.txt\necho done\n",
        p,
    );
    let out = run(&req);
    assert_eq!(out.stdout().trim(), "done", "{out:?}");
    let want = Denial::Write {
        path: "notes.txt".into(),
        rule: None,
        reason: None,
    };
    assert!(out.result.denied.contains(&want), "{out:?}");
    assert!(
        out.events.contains(&Event::Denied(want.clone())),
        "{:?}",
        out.events
    );
    assert_eq!(
        want.smallest_rule(),
        Some(("allow.write", "./notes.txt".to_string()))
    );
    let written: Vec<&str> = out.result.written.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(written, ["a.json"]);
}

#[test]
fn privileged_allow_write_of_a_directory_creates_it() {
    privileged!();
    let mut p = policy();
    p.allow.write = strs(&["out/"]);
    // No mkdir: the directory is there because the band names it.
    let req = request("#!/bin/sh\necho x > out/a.txt && echo wrote\n", p);
    let out = run(&req);
    assert_eq!(out.stdout().trim(), "wrote", "{out:?}");
    let written: Vec<&str> = out.result.written.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(written, ["out/a.txt"]);
}

/// A static C program making the raw syscalls (no libc wrapper, nothing an `LD_PRELOAD` could
/// see): `openat` of the host file `argv[1]` for reading, `openat` of `argv[2]` for writing
/// (created), `open` of a path that exists nowhere, and `execve` of a program that exists
/// nowhere (a shell's PATH search looks like this).
const PROBE_C: &str = r#"
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv) {
    char *none[] = { 0 };
    if (argc < 3) return 2;
    syscall(SYS_openat, AT_FDCWD, argv[1], O_RDONLY);
    syscall(SYS_openat, AT_FDCWD, argv[2], O_WRONLY | O_CREAT, 0644);
    syscall(SYS_open, "/opt/band-learn-nowhere/y", O_RDONLY);
    syscall(SYS_execve, "/usr/bin/band-learn-no-such-tool", argv, none);
    return 0;
}
"#;

#[test]
fn privileged_observe_sees_paths_outside_the_workspace_opened_by_raw_syscalls() {
    privileged!();
    let t = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    fs_err::write(t.path().join("probe.c"), PROBE_C).unwrap_or_else(|e| panic!("{e}"));
    let st = std::process::Command::new("cc")
        .args(["-static", "-O0", "-o"])
        .arg(t.path().join("probe"))
        .arg(t.path().join("probe.c"))
        .status()
        .unwrap_or_else(|e| panic!("cc: {e}"));
    assert!(st.success(), "cc -static failed");
    let probe = fs_err::read(t.path().join("probe")).unwrap_or_else(|e| panic!("{e}"));
    // A host file outside the workspace, which the sandbox does not show, and a host folder
    // (also hidden) the probe writes a new file into.
    let host_file = format!("/etc/band-learn-probe-{}.conf", std::process::id());
    fs_err::write(&host_file, "x\n").unwrap_or_else(|e| panic!("{e}"));
    let host_dir = t.path().join("out");
    fs_err::create_dir_all(&host_dir).unwrap_or_else(|e| panic!("{e}"));
    let written = host_dir.join("w.txt").display().to_string();

    let mut p = policy();
    p.allow.cli = strs(&["./bin/probe *"]);
    let mut req = request(
        &format!("#!/bin/sh\n/skill/bin/probe {host_file} {written}\necho ok\n"),
        p,
    );
    req.bundle.push(file("bin/probe", 0o755, &probe));
    req.bundle_sha256 = super::helpers::bundle_hash(&req.bundle);
    req.observe = true;
    let out = run(&req);
    let _ = fs_err::remove_file(&host_file);
    assert_eq!(out.stdout().trim(), "ok", "{out:?}");
    let observed = out.result.observed.clone().unwrap_or_default();
    let seen = |path: &str| -> Vec<&PathSeen> {
        observed.outside.iter().filter(|p| p.path == path).collect()
    };
    let one = |path: &str, access: Access, in_sandbox: bool, on_host: bool| {
        assert_eq!(
            seen(path),
            [&PathSeen {
                path: path.into(),
                access,
                in_sandbox,
                on_host
            }],
            "{path} in {:#?}",
            observed.outside
        );
    };
    one(&host_file, Access::Read, false, true);
    one(&written, Access::Write, false, true);
    one("/opt/band-learn-nowhere/y", Access::Read, false, false);
    one(
        "/usr/bin/band-learn-no-such-tool",
        Access::Exec,
        false,
        false,
    );
    // The probe itself, run by its path; the workspace is the fanotify mark's, never here.
    one("/skill/bin/probe", Access::Exec, true, false);
    assert!(
        observed
            .outside
            .iter()
            .all(|p| !p.path.starts_with("/workspace")),
        "{:#?}",
        observed.outside
    );
    assert!(observed.complete, "{observed:?}");
}

#[test]
fn privileged_a_run_that_does_not_observe_has_no_observing_filter() {
    privileged!();
    // The seccomp line of /proc/self/status counts the filters: without observe, one fewer.
    let count = |observe: bool| {
        let mut p = policy();
        p.allow.read = strs(&["**"]);
        let mut req = request(
            "#!/bin/sh\nwhile read k v; do [ \"$k\" = Seccomp_filters: ] && echo \"$v\"; done < /proc/self/status\n",
            p,
        );
        req.observe = observe;
        let out = run(&req);
        out.stdout()
            .trim()
            .parse::<u32>()
            .unwrap_or_else(|_| panic!("{out:?}"))
    };
    let plain = count(false);
    assert_eq!(count(true), plain + 1);
}
