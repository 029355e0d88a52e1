//! Issue 13, item 12, seen from inside the sandbox: the CLI gate does not rest on a secret path.
//! A probe learns where a running program's file is (from its own `/proc/self/maps` and
//! `/proc/self/exe`, printed by allowed calls) and tries to run that file directly with arguments
//! `deny.cli` refuses; no program file of the run can be listed or opened; `#!` commands still run
//! as themselves; every call still reaches `--trace`.

use band::proto::{CliCall, Status};
use pretty_assertions::assert_eq;

use super::helpers::*;

fn with_cli(allow: &[&str], deny: &[&str]) -> band::policy::Policy {
    let mut p = policy();
    p.allow.cli = strs(allow);
    p.deny.cli = strs(deny);
    p
}

/// Whether the host has `p` (the `#!` probe skips without its commands).
fn has(p: &str) -> bool {
    std::path::Path::new(p).exists()
}

#[test]
fn privileged_a_leaked_program_path_runs_nothing() {
    privileged!();
    // sed prints its own mappings (an ordinary allowed call): the first one names the file it
    // runs from. python3 prints its own /proc/self/exe. Each path is then run directly, with the
    // arguments deny.cli refuses.
    let script = r#"#!/bin/bash
echo hello > /tmp/f
sed_path=$(sed -n '1s/.* //p' /proc/self/maps)
echo "sed_path=$sed_path"
echo "sed_link=$(python3 -c 'import os, sys; print(os.readlink(sys.argv[1]))' "$sed_path")"
"$sed_path" -i s/hello/owned/ /tmp/f >/dev/null 2>&1; echo "sed_direct=$?"
sed -i s/hello/owned/ /tmp/f >/dev/null 2>&1; echo "sed_by_name=$?"
echo "content=$(cat /tmp/f)"
py_path=$(python3 -c 'import os; print(os.readlink("/proc/self/exe"))')
echo "py_path=$py_path"
echo "py_link=$(python3 -c 'import os, sys; print(os.readlink(sys.argv[1]))' "$py_path")"
"$py_path" -I -c 'open("/tmp/f", "w").write("owned")' >/dev/null 2>&1; echo "py_direct=$?"
python3 -c 'import os; os.execv("/proc/self/exe", ["python3", "-c", "print(1)"])' >/dev/null 2>&1; echo "py_self=$?"
echo "content2=$(cat /tmp/f)"
mkdir -p /tmp/d/e
find /tmp/d/e -delete >/dev/null 2>&1; echo "find_by_name=$?"
find /tmp/d -maxdepth 0 -exec /proc/self/exe /tmp/d/e -delete ';' >/dev/null 2>&1
test -e /tmp/d/e && echo find_self=kept || echo find_self=deleted
cat_path=$(cat /proc/self/maps | head -1 | sed 's/.* //')
cat "$cat_path" >/dev/null 2>&1; echo "cat_read=$?"
exit 0
"#;
    let p = with_cli(
        &["python3 *", "cat *", "find *"],
        &["sed -i *", "python3 -I *", "find * -delete"],
    );
    let mut req = request(script, p);
    req.trace = true;
    let o = run(&req);
    let kv = o.kv();
    let get = |k: &str| value_of(&kv, k);
    assert!(get("sed_path").contains("sed"), "{o:#?}");
    assert!(get("py_path").contains("python3"), "{o:#?}");
    // The leaked path leads to band-shim under the program's own name, never to the program:
    // running it is a call like any other, judged and recorded.
    assert_eq!(get("sed_link"), "/band/bin/sed", "{o:#?}");
    assert_eq!(get("py_link"), "/band/bin/python3", "{o:#?}");
    assert_eq!(get("sed_direct"), "126", "{o:#?}");
    assert_eq!(get("sed_by_name"), "126", "{o:#?}");
    assert_eq!(get("py_direct"), "126", "{o:#?}");
    assert_ne!(get("cat_read"), "0", "{o:#?}");
    assert_eq!(
        get("content"),
        "hello",
        "the refused sed -i did not run: {o:#?}"
    );
    assert_eq!(
        get("content2"),
        "hello",
        "the refused python3 -I did not run: {o:#?}"
    );
    // What remains, stated in docs/security.md: an allowed program may re-run itself, with
    // arguments its patterns refuse when it can exec a path (find's child is still find).
    assert_eq!(get("py_self"), "0", "{o:#?}");
    assert_eq!(get("find_by_name"), "126", "{o:#?}");
    assert_eq!(get("find_self"), "deleted", "{o:#?}");
    // Every refusal was recorded: by name, and by the leaked path (judged by its last component,
    // the command's own name).
    let denied: Vec<&Vec<String>> = o
        .result
        .cli_calls
        .iter()
        .filter(|c| !c.allowed)
        .map(|c| &c.argv)
        .collect();
    assert_eq!(
        denied,
        [
            &strs(&["sed", "-i", "s/hello/owned/", "/tmp/f"]),
            &strs(&["sed", "-i", "s/hello/owned/", "/tmp/f"]),
            &strs(&[
                "python3",
                "-I",
                "-c",
                r#"open("/tmp/f", "w").write("owned")"#
            ]),
            &strs(&["find", "/tmp/d/e", "-delete"])
        ],
        "{o:#?}"
    );
}

#[test]
fn privileged_no_program_file_is_reachable_inside() {
    privileged!();
    // Every name a program of the run could have inside: /band/x (empty when no `#!` command is
    // declared), the paths running programs report for themselves, and what mountinfo shows.
    let script = r#"#!/bin/bash
echo "x_list=[$(ls -A /band/x 2>&1 | tr '\n' ' ')]"
sleep 3 | cat >/dev/null &
sleep 0.3
for pid in $(ls /proc | grep -E '^[0-9]+$'); do
  if [ -r /proc/$pid/exe ] && [ $pid != $$ ] && [ $pid != 1 ]; then
    cat /proc/$pid/exe >/dev/null 2>&1 && echo "opened_exe=$pid"
  fi
done
exe=$(python3 -c 'import os; print(os.readlink("/proc/self/exe"))')
echo "exe_link=$(python3 -c 'import os, sys; print(os.readlink(sys.argv[1]))' "$exe")"
# A program that starts itself again by the path it reports (node's process.execPath, Go's
# os.Executable) reaches band-shim under its own name: an ordinary, allowed call.
python3 -c 'import os; os.execv(os.readlink("/proc/self/exe"), ["python3", "-c", "print(\"reexec=ok\")"])' 
echo "mounts=$(awk '{print $5}' /proc/self/mountinfo | grep '^/band' | tr '\n' ' ')"
found=$( (find / -xdev -type f -perm -u+x; find /band /tmp /workspace -type f -perm -u+x) 2>/dev/null | grep -v -E '^/band/(shim|jail)$' | head -5 | tr '\n' ' ')
echo "found=[$found]"
# No process of the run holds a descriptor of a program that the script could take (the jail
# got the entry's interpreter as one; bubblewrap's pid 1 must not keep it).
python3 -c '
import glob, os, stat
held = 0
for p in glob.glob("/proc/[0-9]*/fd/*"):
    try:
        fd = os.open(p, os.O_PATH)
    except OSError:
        continue
    st = os.fstat(fd)
    os.close(fd)
    held += stat.S_ISREG(st.st_mode) and st.st_mode & 0o777 == 0o111
print("held=%d" % held)
'
kill %1 2>/dev/null
exit 0
"#;
    let o = run(&request(script, with_cli(&["python3 *"], &[])));
    let kv = o.kv();
    let get = |k: &str| value_of(&kv, k);
    assert_eq!(get("x_list"), "[]", "{o:#?}");
    assert!(!kv.contains_key("opened_exe"), "{o:#?}");
    assert_eq!(get("exe_link"), "/band/bin/python3", "{o:#?}");
    assert_eq!(get("reexec"), "ok", "{o:#?}");
    // /band is one read-only mount of the run's exec folder (io/ the one writable mount on
    // it): no program has a mount, so none is named in mountinfo.
    assert_eq!(get("mounts").trim(), "/band /band/io", "{o:#?}");
    assert_eq!(get("found"), "[]", "{o:#?}");
    assert_eq!(get("held"), "0", "{o:#?}");
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
}

#[test]
fn privileged_script_commands_run_as_themselves() {
    privileged!();
    if !has("/usr/bin/pygmentize") || !has("/usr/bin/pygettext3") || !has("/usr/bin/python3") {
        eprintln!(
            "skipped: needs pygmentize (`#!/usr/bin/python3`) and pygettext3 (`#! /usr/bin/env python3`)"
        );
        return;
    }
    let script = r#"#!/bin/bash
pygmentize -V >/tmp/v 2>&1; echo "direct=$?"
echo "version=$(head -c 8 /tmp/v)"
pygmentize -L >/dev/null 2>&1; echo "denied=$?"
pygettext3 -V >/tmp/h 2>&1; echo "env=$?"
echo "env_version=$(head -c 9 /tmp/h)"
python3 -c 1 >/dev/null 2>&1; echo "interp=$?"
python3 /band/x/pygmentize -V >/dev/null 2>&1; echo "shape=$?"
python3 /band/x/pygmentize -L >/dev/null 2>&1; echo "shape_denied=$?"
"#;
    let mut req = request(script, with_cli(&["pygmentize -V", "pygettext3 -V"], &[]));
    req.trace = true;
    let o = run(&req);
    let kv = o.kv();
    let get = |k: &str| value_of(&kv, k);
    assert_eq!(get("direct"), "0", "{o:#?}");
    assert_eq!(get("version"), "Pygments", "{o:#?}");
    assert_eq!(get("denied"), "126", "{o:#?}");
    assert_eq!(get("env"), "0", "{o:#?}");
    assert_eq!(get("env_version"), "pygettext", "{o:#?}");
    assert_eq!(
        get("interp"),
        "126",
        "the interpreter alone is not declared: {o:#?}"
    );
    assert_eq!(get("shape"), "0", "{o:#?}");
    assert_eq!(get("shape_denied"), "126", "{o:#?}");
    let calls: Vec<&CliCall> = o.result.cli_calls.iter().collect();
    for argv in [&["pygmentize", "-V"][..], &["pygettext3", "-V"]] {
        assert!(
            calls.iter().any(|c| c.allowed && c.argv == strs(argv)),
            "{argv:?}: {calls:?}"
        );
    }
    assert!(
        calls
            .iter()
            .any(|c| !c.allowed && c.argv == strs(&["pygmentize", "-L"])),
        "{calls:?}"
    );
}

#[test]
fn privileged_every_call_of_a_loop_reaches_the_trace() {
    privileged!();
    // 200 calls of an allowed program by path (not the shell's builtin), timed from inside: the
    // gate's round trip, reported (not asserted) for the record; every call is in the trace.
    let script = r#"#!/bin/bash
start=$(date +%s%N)
for i in $(seq 200); do /usr/bin/true || echo failed; done
end=$(date +%s%N)
echo "us_per_call=$(( (end - start) / 200000 ))"
"#;
    let mut p = policy();
    p.allow.cli = strs(&["true", "seq 200"]);
    let mut req = request(script, p);
    req.trace = true;
    let o = run(&req);
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    assert!(!o.result.stdout.contains("failed"), "{o:#?}");
    let n = o
        .result
        .cli_calls
        .iter()
        .filter(|c| c.allowed && c.argv == strs(&["true"]))
        .count();
    assert_eq!(n, 200, "{:?}", o.result.cli_calls);
    eprintln!(
        "gate round trip: {} µs per call of /usr/bin/true (200 calls)",
        o.kv().get("us_per_call").cloned().unwrap_or_default()
    );
}

#[test]
fn privileged_concurrent_calls_are_all_served_and_traced() {
    privileged!();
    // 40 calls at once, more than the gate's two first workers: each is answered (the program
    // runs and exits 0), each is on record, none is counted as forged; then a call after them
    // still works (the workers that took the burst went back to accepting).
    let script = r#"#!/bin/bash
for i in $(seq 40); do /usr/bin/true & done
failed=0
for pid in $(jobs -p); do wait "$pid" || failed=$((failed + 1)); done
/usr/bin/true && echo after=ok
echo "failed=$failed"
"#;
    let mut p = policy();
    p.allow.cli = strs(&["true", "seq 40"]);
    let mut req = request(script, p);
    req.trace = true;
    let o = run(&req);
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    assert_eq!(kv.get("failed").map(String::as_str), Some("0"), "{o:#?}");
    assert_eq!(kv.get("after").map(String::as_str), Some("ok"), "{o:#?}");
    let n = o
        .result
        .cli_calls
        .iter()
        .filter(|c| c.allowed && c.argv == strs(&["true"]))
        .count();
    assert_eq!(n, 41, "{:?}", o.result.cli_calls);
}

#[test]
fn privileged_commands_start_with_default_signal_dispositions() {
    privileged!();
    // band-shim and band-jail are Rust programs, whose runtime ignores SIGPIPE; a command they
    // start must not inherit that (`yes | head -1` ends `yes` by SIGPIPE, exit 141, not with a
    // "Broken pipe" error), and its signal mask is empty.
    let script = r#"#!/bin/bash
yes | head -1 >/dev/null; echo "yes_rc=${PIPESTATUS[0]}"
while read -r k v; do case $k in SigIgn:|SigBlk:) echo "entry_${k%:}=$v";; esac; done < /proc/self/status
echo "cmd=$(grep -E '^Sig(Ign|Blk):' /proc/self/status | tr -s '\t ' '=' | tr '\n' ' ')"
"#;
    let mut p = policy();
    p.allow.cli = strs(&["yes"]);
    let o = run(&request(script, p));
    let kv = o.kv();
    let get = |k: &str| value_of(&kv, k);
    assert_eq!(get("yes_rc"), "141", "{o:#?}");
    // Bit 13 (SIGPIPE) is not ignored, in the entry's interpreter or in a command.
    let ign = |hex: &str| u64::from_str_radix(hex, 16).unwrap_or(u64::MAX);
    assert_eq!(ign(&get("entry_SigIgn")) & (1 << 12), 0, "{o:#?}");
    assert_eq!(get("entry_SigBlk"), "0000000000000000", "{o:#?}");
    assert!(get("cmd").contains("SigBlk:=0000000000000000"), "{o:#?}");
    let cmd_ign = get("cmd")
        .split(' ')
        .find_map(|w| w.strip_prefix("SigIgn:="))
        .map(ign)
        .unwrap_or(u64::MAX);
    assert_eq!(cmd_ign & (1 << 12), 0, "{o:#?}");
}

/// band-shim starts without Rust's runtime start (issue 17, round 6), which reopened a closed
/// standard descriptor on /dev/null: a command now gets the descriptors its caller gave, closed
/// ones closed, as without the shim; band-shim's own connection, which takes the lowest free
/// number, never stays on one of them (a refusal with stderr closed is still 126, not a
/// SIGPIPE from writing the message to band-server's closed end).
#[test]
fn privileged_commands_get_the_standard_descriptors_their_caller_gave() {
    privileged!();
    let script = r#"#!/bin/bash
/usr/bin/test -e /proc/self/fd/0 0<&-; echo "in_closed=$?"
/usr/bin/test -e /proc/self/fd/2 2>&-; echo "err_closed=$?"
/usr/bin/test -e /proc/self/fd/0; echo "in_open=$?"
/usr/bin/true 0<&- 1>&- 2>&-; echo "all_closed=$?"
jq . /dev/null 2>&-; echo "denied_err_closed=$?"
jq . /dev/null 0<&- 1>&- 2>&-; echo "denied_all_closed=$?"
jq -r . /dev/null 0<&- 2>&-; echo "allowed_jq=$?"
"#;
    let o = run(&request(script, with_cli(&["jq -r *"], &[])));
    let kv = o.kv();
    let get = |k: &str| kv.get(k).map(String::as_str).unwrap_or("<missing>");
    for (k, want) in [
        ("in_closed", "1"),
        ("err_closed", "1"),
        ("in_open", "0"),
        ("all_closed", "0"),
        ("denied_err_closed", "126"),
        ("denied_all_closed", "126"),
        ("allowed_jq", "0"),
    ] {
        assert_eq!(get(k), want, "{k}: {o:#?}");
    }
}

/// band-shim without glibc's start (issue 17, round 6) takes argv and the environment from its
/// initial stack and passes them on itself: a command gets them byte for byte, a long argument,
/// `=` in a value, an empty value, and a UTF-8 one included.
#[test]
fn privileged_commands_get_their_arguments_and_environment_intact() {
    privileged!();
    let script = r#"#!/bin/bash
export EQ='a=b=c' EMPTY='' UTF='été ✓'
big=$(head -c 100000 /dev/zero | tr '\0' x)
echo "big=$(/usr/bin/printf '%s' "$big" | wc -c)"
echo "eq=$(/usr/bin/env | grep -c '^EQ=a=b=c$')"
echo "empty=$(/usr/bin/env | grep -c '^EMPTY=$')"
echo "utf=$(/usr/bin/env | grep '^UTF=' | cut -d= -f2)"
echo "args=$(/usr/bin/printf '[%s]' '' ' ' 'it'"'"'s' '$HOME' 'é')"
"#;
    let o = run(&request(script, policy()));
    let kv = o.kv();
    let get = |k: &str| kv.get(k).map(String::as_str).unwrap_or("<missing>");
    assert_eq!(get("big"), "100000", "{o:#?}");
    assert_eq!(get("eq"), "1", "{o:#?}");
    assert_eq!(get("empty"), "1", "{o:#?}");
    assert_eq!(get("utf"), "été ✓", "{o:#?}");
    assert_eq!(get("args"), "[][ ][it's][$HOME][é]", "{o:#?}");
}

#[test]
fn privileged_a_missing_alternative_is_absent_and_a_missing_insisted_command_fails() {
    privileged!();
    // Issue 14, item 5: a band lists alternatives and this host has only one of them.
    let script = r#"#!/bin/bash
bandtestabsent -c 1 >/dev/null 2>&1; echo "absent=$?"
command -v bandtestabsent >/dev/null; echo "lookup=$?"
env bandtestabsent -c 1 >/dev/null 2>&1; echo "env_absent=$?"
echo "present=$(python3 -c 'print(6 * 7)')"
"#;
    let p = with_cli(&["bandtestabsent *", "python3 *"], &[]);
    let o = run(&request(script, p));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    assert_eq!(kv.get("absent").map(String::as_str), Some("127"), "{o:#?}");
    assert_eq!(kv.get("lookup").map(String::as_str), Some("1"), "{o:#?}");
    assert_eq!(
        kv.get("env_absent").map(String::as_str),
        Some("127"),
        "{o:#?}"
    );
    assert_eq!(kv.get("present").map(String::as_str), Some("42"), "{o:#?}");
    // The result names it; the script's stderr stays the script's.
    assert_eq!(
        o.result.missing_commands,
        [band::proto::MissingCommand {
            name: "bandtestabsent".into(),
            rules: vec!["bandtestabsent *".into()],
        }],
        "{o:#?}"
    );
    assert!(!o.stderr().contains("band:"), "{o:#?}");

    // Insisted, a missing command refuses the run, naming it.
    let mut p = with_cli(&["python3 *"], &[]);
    p.insist.cli = strs(&["bandtestabsent *"]);
    let o = run(&request("#!/bin/sh\necho ran\n", p));
    assert_eq!(o.result.status, Status::SetupFailed, "{o:#?}");
    let e = o.result.error.as_ref().unwrap_or_else(|| panic!("{o:#?}"));
    assert_eq!(e.layer, band::proto::Layer::Cli);
    assert_eq!(
        e.message, "insist.cli `bandtestabsent *`: `bandtestabsent` is not installed on this host",
        "{e:?}"
    );
    assert!(!o.result.stdout.contains("ran"), "{o:#?}");
}

#[test]
fn privileged_band_exec_starts_its_one_allowed_command_without_sh_or_the_shim() {
    privileged!();
    // Issue 17, item 4: band exec's script (`exec 'cmd' 'args'…`) cost `sh` and a band-shim round
    // trip. Allowed, the jail now starts the command itself, from the descriptor band-server
    // gives it (the kernel's AT_EXECFN names the descriptor execveat ran: the jail's
    // PROGRAM_FD, where band-shim's would be the one it received), and the call is judged and
    // recorded once, as band-shim's would be.
    let probe = "import ctypes, os; g = ctypes.CDLL(None).getauxval; g.restype = ctypes.c_char_p; g.argtypes = [ctypes.c_ulong]; print('execfn=' + g(31).decode()); print('argv0=' + os.readlink('/proc/self/exe').rsplit('/', 1)[-1])";
    let argv = strs(&["python3", "-c", probe]);
    let script = band_exec_script(&argv);
    let mut req = request(&script, with_cli(&["python3 -c *"], &["python3 -I *"]));
    req.trace = true;
    let o = run(&req);
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    let jail_fd = format!(
        "/dev/fd/{}",
        band_server::layers::process::bwrap::PROGRAM_FD
    );
    assert_eq!(kv.get("execfn"), Some(&jail_fd), "{o:#?}");
    assert!(
        kv.get("argv0").is_some_and(|a| a.starts_with("python3")),
        "{o:#?}"
    );
    let calls: Vec<(&Vec<String>, bool)> = o
        .result
        .cli_calls
        .iter()
        .map(|c| (&c.argv, c.allowed))
        .collect();
    assert_eq!(calls, [(&argv, true)], "{o:#?}");

    // Refused, it goes the old way: sh runs the script, band-shim refuses (126), one record.
    let argv = strs(&["python3", "-I", "-c", "print(1)"]);
    let mut req = request(
        &band_exec_script(&argv),
        with_cli(&["python3 -c *"], &["python3 -I *"]),
    );
    req.trace = true;
    let o = run(&req);
    assert_eq!(o.result.exit_code, Some(126), "{o:#?}");
    let calls: Vec<(&Vec<String>, bool)> = o
        .result
        .cli_calls
        .iter()
        .map(|c| (&c.argv, c.allowed))
        .collect();
    assert_eq!(calls, [(&argv, false)], "{o:#?}");
}

/// What `band exec` writes (`src/client/adhoc.rs`, `script_for`).
fn band_exec_script(argv: &[String]) -> String {
    let words: Vec<String> = argv
        .iter()
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect();
    format!(
        "#!/bin/sh\n# Written by `band exec`: the agent's command, under the band's policy.\nexec {}\n",
        words.join(" ")
    )
}

/// Issue 14 item 6 / issue 15 item 4: a bash script's call of a host program the band does not
/// declare is a CLI denial (no rule decided) on the run's result, and its program never runs:
/// by name, in a command substitution, under `bash -c`. The script sees "not available" (127)
/// as for a name no host has, which is not a denial; `command -v` still finds nothing; names
/// with a path and the forbidden `sudo` are never looked up on the host; `sh` (dash) has no
/// hook, so its calls are refused unreported (docs/security.md says so).
#[test]
fn privileged_undeclared_host_programs_are_denials_and_never_run() {
    privileged!();
    for p in [
        "/usr/bin/uname",
        "/usr/bin/id",
        "/usr/bin/hostname",
        "/bin/sh",
    ] {
        assert!(has(p), "this probe needs {p} on the host");
    }
    let script = r#"#!/bin/bash
uname -s; echo "by_name=$?"
echo "subst=$(id -u 2>/dev/null; echo $?)"
bash -c 'hostname; echo "bash_c=$?"'
if command -v uname >/dev/null; then echo probe=found; else echo probe=absent; fi
no-such-tool-band-probe 2>/dev/null; echo "missing=$?"
( exec -a ../../usr/bin/uname /band/shim -a ) 2>/dev/null; echo "pathy=$?"
( exec -a sudo /band/shim true ) 2>/dev/null; echo "sudo=$?"
sh -c 'uname -m; echo "dash=$?"' 2>/dev/null
cat /etc/hosts >/dev/null; echo "cat=$?"
"#;
    let o = run(&request(script, with_cli(&["cat *"], &[])));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    let get = |k: &str| kv.get(k).cloned().unwrap_or_default();
    for (k, want) in [
        ("by_name", "127"),
        ("subst", "127"),
        ("bash_c", "127"),
        ("probe", "absent"),
        ("missing", "127"),
        ("pathy", "127"),
        ("sudo", "127"),
        ("dash", "127"),
        ("cat", "0"),
    ] {
        assert_eq!(get(k), want, "{k}: {o:#?}");
    }
    // Nothing any of them would print: no kernel name, no uid, no host name, no machine.
    for out in ["Linux", "band\n", "x86_64", "aarch64"] {
        assert!(!o.result.stdout.contains(out), "{out:?} ran: {o:#?}");
    }
    assert!(
        !o.result.stdout.lines().any(|l| l.parse::<u32>().is_ok()),
        "id ran: {o:#?}"
    );
    let denied = |argv: &[&str]| band::proto::Denial::Cli {
        argv: strs(argv),
        rule: None,
        source: None,
    };
    assert_eq!(
        o.result.denied,
        vec![
            denied(&["uname", "-s"]),
            denied(&["id", "-u"]),
            denied(&["hostname"]),
        ],
        "{o:#?}"
    );
    // Each streamed as a refused call and a denial event, as `--trace` and the ledger show them.
    let refused: Vec<&CliCall> = o
        .events
        .iter()
        .filter_map(|e| match e {
            band::proto::Event::Cli(c) if !c.allowed => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(refused.len(), 3, "{o:#?}");
    let denial_events = o
        .events
        .iter()
        .filter(|e| matches!(e, band::proto::Event::Denied(_)))
        .count();
    assert_eq!(denial_events, 3, "{o:#?}");
}

/// The program headers' types of the ELF64 file `bytes` (little-endian).
fn elf_program_header_types(bytes: &[u8]) -> Vec<u32> {
    let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]) as usize;
    let u32_at = |o: usize| {
        let mut b = [0u8; 4];
        b.copy_from_slice(&bytes[o..o + 4]);
        u32::from_le_bytes(b)
    };
    let u64_at = |o: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&bytes[o..o + 8]);
        u64::from_le_bytes(b) as usize
    };
    assert_eq!(&bytes[..5], b"\x7fELF\x02", "an ELF64 file");
    let (phoff, phentsize, phnum) = (u64_at(0x20), u16_at(0x36), u16_at(0x38));
    (0..phnum).map(|i| u32_at(phoff + i * phentsize)).collect()
}

/// Issue 17, item 4: band-shim starts once per command in the sandbox, so it is static (no
/// `PT_INTERP`: no `ld.so` and no shared libraries to load before it asks band-server) and
/// stripped (no `.symtab`). Built so on glibc Linux (`band-server/build.rs`).
#[test]
fn the_built_shim_starts_and_refuses_to_be_run_as_itself() {
    // A static-pie that links a library needing the dynamic loader (`__tls_get_addr`) links
    // without an error and dies of SIGSEGV before `main`; every command of every run would then
    // fail. `cargo build --workspace` did that (band's default features bring libssh2 and
    // OpenSSL into band-shim's link, 2026-11-24). Run as itself, outside a sandbox, the shim
    // must get to `main` and refuse with its message.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_band-shim"))
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        (out.status.code(), out.status.signal()),
        (Some(126), None),
        "band-shim did not reach main: {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not the shim itself"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn the_shim_is_static_and_stripped() {
    const PT_INTERP: u32 = 3;
    let shim = fs_err::read(env!("CARGO_BIN_EXE_band-shim")).unwrap();
    let types = elf_program_header_types(&shim);
    assert!(
        !types.contains(&PT_INTERP),
        "band-shim names a dynamic loader: it is dynamically linked ({types:?})"
    );
    assert!(
        !shim.windows(8).any(|w| w == b".symtab\0"),
        "band-shim has a symbol table: it is not stripped"
    );
}

/// Issue 14, item 5 (the part the gate sees): a launcher that looks its command up itself (`env
/// uname`, `xargs id`, in a `sh` script, which has no hook) cannot find an undeclared host program
/// (127, and it never runs), and that program's call is now a CLI denial on record with its
/// arguments, as bash's are (before: only the allowed `env`/`xargs` calls, no denial). A name no
/// host has is still no denial.
#[test]
fn privileged_undeclared_programs_started_by_env_or_xargs_are_denials() {
    privileged!();
    for p in [
        "/usr/bin/uname",
        "/usr/bin/id",
        "/usr/bin/env",
        "/usr/bin/xargs",
    ] {
        assert!(has(p), "this probe needs {p} on the host");
    }
    let script = r#"#!/bin/sh
env LC_ALL=C uname -s 2>/dev/null; echo "env=$?"
echo x | xargs -n 1 id -u 2>/dev/null; echo "xargs=$?"
env no-such-tool-band-probe 2>/dev/null; echo "missing=$?"
"#;
    let o = run(&request(script, with_cli(&["cat *"], &[])));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    let get = |k: &str| kv.get(k).cloned().unwrap_or_default();
    assert_eq!(get("env"), "127", "{o:#?}");
    assert_eq!(get("xargs"), "127", "{o:#?}");
    assert_eq!(get("missing"), "127", "{o:#?}");
    assert!(!o.result.stdout.contains("Linux"), "uname ran: {o:#?}");
    let denied = |argv: &[&str], source| band::proto::Denial::Cli {
        argv: strs(argv),
        rule: None,
        source,
    };
    // xargs appends its input to `id -u`: the rule that allows it ends in `*`.
    assert_eq!(
        o.result.denied,
        vec![
            denied(&["uname", "-s"], None),
            denied(&["id", "-u"], Some(band::proto::CallSource::Appended))
        ],
        "{o:#?}"
    );
}
