//! Programs shipped in the skill (issue 13, item 3): `/skill` is noexec, and a file of the bundle
//! runs only as a `./` command of `allow.cli`, through band-shim and band-server's judgement.
//! Probe scripts try every way to start the files and print `key=value` lines.

use band::proto::{CliCall, Denial, FileEntry, RunRequest, Status};
use pretty_assertions::assert_eq;

use super::helpers::*;

/// A request whose bundle holds `run.sh` (the entry, `script`), an ELF (`bin/elf`, a copy of
/// `touch`), a `#!/bin/sh` script (`bin/s.sh`, which touches its argument) and a bundled
/// `bin/ls` (another copy of `touch`).
fn request(script: &str, allow: &[&str], deny: &[&str]) -> RunRequest {
    let touch = fs_err::read("/usr/bin/touch").unwrap_or_else(|e| panic!("{e}"));
    let bundle: Vec<FileEntry> = vec![
        file("bin/elf", 0o755, &touch),
        file("bin/ls", 0o755, &touch),
        file("bin/s.sh", 0o755, b"#!/bin/sh\ntouch \"$1\"\n"),
        file("run.sh", 0o755, script.as_bytes()),
    ];
    let mut policy = policy();
    policy.allow.cli = strs(allow);
    policy.deny.cli = strs(deny);
    bundle_request("test", bundle, policy)
}

/// Every way to start `bin/<prog>` (with one argument: the file it should create), each made
/// `<prog>_<way>=<exit code>` and `made_<prog>_<way>=yes|no`.
const PROBE: &str = r#"#!/bin/bash
try() {
  local key=$1; shift
  "$@" >/dev/null 2>/tmp/err.$key
  echo "$key=$?"
  echo "err_$key=$(head -c 200 /tmp/err.$key | tr '\n' ' ')"
}
made() { if [ -e "/tmp/$1" ]; then echo "made_$1=yes"; else echo "made_$1=no"; fi; }
cd /skill
for p in elf s.sh; do
  k=${p%.sh}
  try ${k}_abs /skill/bin/$p /tmp/${k}_abs
  try ${k}_dot ./bin/$p /tmp/${k}_dot
  try ${k}_rel bin/$p /tmp/${k}_rel
  try ${k}_sh_c sh -c "/skill/bin/$p /tmp/${k}_sh_c"
  try ${k}_env env /skill/bin/$p /tmp/${k}_env
  try ${k}_find find /skill/bin -name $p -exec {} /tmp/${k}_find ';'
  for w in abs dot rel sh_c env find; do made ${k}_$w; done
done
try elf_ldso /lib64/ld-linux-x86-64.so.2 /skill/bin/elf /tmp/elf_ldso; made elf_ldso
try elf_bad /skill/bin/elf --bad /tmp/elf_bad; made elf_bad
try ls_bundled /skill/bin/ls /tmp/ls_bundled; made ls_bundled
try ls_bundled_dot ./bin/ls /tmp/ls_bundled_dot; made ls_bundled_dot
try ls_host ls /skill
cp /skill/bin/elf /tmp/copy 2>/dev/null; chmod +x /tmp/copy 2>/dev/null
try copy /tmp/copy /tmp/copy_ran; made copy_ran
exit 0
"#;

const WAYS: [&str; 6] = ["abs", "dot", "rel", "sh_c", "env", "find"];

#[test]
fn privileged_bundled_programs_do_not_run_without_a_rule() {
    privileged!();
    let o = run(&request(PROBE, &["find *", "ls *"], &[]));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    let get = |k: &str| kv.get(k).map(String::as_str).unwrap_or("?");
    for prog in ["elf", "s"] {
        for way in WAYS {
            let key = format!("{prog}_{way}");
            assert_eq!(get(&format!("made_{key}")), "no", "{key} ran: {o:#?}");
            // The kernel refuses the exec (noexec): EACCES, whoever asks for it.
            assert!(
                get(&format!("err_{key}")).contains("Permission denied"),
                "{key}: {o:#?}"
            );
        }
        // Started by a shell or env, that is exit 126 (find -exec only reports the error).
        for way in ["abs", "dot", "rel", "sh_c", "env"] {
            let key = format!("{prog}_{way}");
            assert_eq!(get(&key), "126", "{key}: {o:#?}");
        }
    }
    // A bundled bin/ls is not the host's ls, however ls is allowed.
    assert_eq!(get("ls_bundled"), "126", "{o:#?}");
    assert_eq!(get("ls_bundled_dot"), "126", "{o:#?}");
    assert_eq!(get("made_ls_bundled"), "no");
    assert_eq!(get("made_ls_bundled_dot"), "no");
    assert_eq!(get("ls_host"), "0", "{o:#?}");
    // Nor through the dynamic loader (mapping a noexec file executable is refused too).
    assert_ne!(get("elf_ldso"), "0", "{o:#?}");
    assert_eq!(get("made_elf_ldso"), "no", "{o:#?}");
    // A copy in /tmp does not run either (noexec).
    assert_eq!(get("copy"), "126", "{o:#?}");
    assert_eq!(get("made_copy_ran"), "no");
    // Nothing reached the gate as a program of the skill.
    assert!(
        !o.result
            .cli_calls
            .iter()
            .any(|c| c.argv[0].starts_with("./")),
        "{:?}",
        o.result.cli_calls
    );
}

#[test]
fn privileged_bundled_programs_run_through_the_gate_with_a_rule() {
    privileged!();
    let o = run(&request(
        PROBE,
        &[
            "./bin/elf *",
            "./bin/s.sh *",
            "find *",
            "ls *",
            "./bin/ls --only-this",
        ],
        &["./bin/elf --bad *"],
    ));
    // The script exits 0; the --bad call is among the denials.
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    assert!(
        o.result.denied.contains(&Denial::Cli {
            argv: strs(&["./bin/elf", "--bad", "/tmp/elf_bad"]),
            rule: Some("./bin/elf --bad *".into()),
            source: None,
        }),
        "{:?}",
        o.result.denied
    );
    let kv = o.kv();
    let get = |k: &str| kv.get(k).map(String::as_str).unwrap_or("?");
    for prog in ["elf", "s"] {
        for way in WAYS {
            let key = format!("{prog}_{way}");
            assert_eq!(get(&key), "0", "{key}: {o:#?}");
            assert_eq!(get(&format!("made_{key}")), "yes", "{key}: {o:#?}");
        }
    }
    for way in WAYS {
        for (prog, rule) in [("elf", "./bin/elf *"), ("s", "./bin/s.sh *")] {
            let path = if prog == "elf" { "elf" } else { "s.sh" };
            let call = CliCall {
                argv: strs(&[&format!("./bin/{path}"), &format!("/tmp/{prog}_{way}")]),
                allowed: true,
                rule: Some(rule.into()),
                source: None,
            };
            assert!(
                o.result.cli_calls.contains(&call),
                "{call:?} not in {:#?}",
                o.result.cli_calls
            );
        }
    }
    // deny.cli on a ./ program: 126, nothing made.
    assert_eq!(get("elf_bad"), "126", "{o:#?}");
    assert_eq!(get("made_elf_bad"), "no");
    assert!(get("err_elf_bad").contains("band: denied: ./bin/elf --bad /tmp/elf_bad"));
    assert!(o.result.cli_calls.contains(&CliCall {
        argv: strs(&["./bin/elf", "--bad", "/tmp/elf_bad"]),
        allowed: false,
        rule: Some("./bin/elf --bad *".into()),
        source: None,
    }));
    // The bundled bin/ls is a program of the run (`./bin/ls --only-this`), and a call of it is
    // judged as ./bin/ls, by its own patterns: `ls *` does not allow it.
    assert_eq!(get("ls_bundled"), "126", "{o:#?}");
    assert_eq!(get("made_ls_bundled"), "no");
    assert_eq!(get("ls_bundled_dot"), "126", "{o:#?}");
    assert!(
        get("err_ls_bundled")
            .contains("band: denied: ./bin/ls /tmp/ls_bundled (no allow.cli rule matches)"),
        "{o:#?}"
    );
    for arg in ["/tmp/ls_bundled", "/tmp/ls_bundled_dot"] {
        assert!(o.result.cli_calls.contains(&CliCall {
            argv: strs(&["./bin/ls", arg]),
            allowed: false,
            rule: None,
            source: None,
        }));
    }
    assert!(
        !o.result
            .cli_calls
            .iter()
            .any(|c| c.argv[0] == "ls" && c.argv.get(1).is_some_and(|a| a == "/tmp/ls_bundled")),
        "{:?}",
        o.result.cli_calls
    );
    // With a rule, /skill/bin/elf is band-shim (execute-only): no copy can be made to run.
    assert_ne!(get("copy"), "0", "{o:#?}");
    assert_eq!(get("made_copy_ran"), "no");
}

#[test]
fn privileged_a_dot_slash_rule_naming_no_file_is_refused_before_anything_runs() {
    privileged!();
    let o = run(&request("#!/bin/sh\necho ran\n", &["./bin/gone *"], &[]));
    assert_eq!(o.result.status, Status::SetupFailed, "{o:#?}");
    let e = o.result.error.as_ref().unwrap_or_else(|| panic!("{o:#?}"));
    assert_eq!(e.layer, band::proto::Layer::Cli);
    assert!(e.message.contains("`./bin/gone`"), "{e:?}");
    assert!(!o.result.stdout.contains("ran"));
}

#[test]
fn privileged_a_dot_slash_rule_naming_the_entry_leaves_it_to_its_interpreter() {
    privileged!();
    let script = "#!/bin/sh\necho ran\n/skill/run.sh again 2>/dev/null; echo \"again=$?\"\n";
    let o = run(&request(script, &["./run.sh *"], &[]));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    assert!(o.result.stdout.starts_with("ran\n"), "{o:#?}");
    // Calling the entry by its path is refused like any file of the skill (noexec).
    assert_eq!(kv.get("again").map(String::as_str), Some("126"), "{o:#?}");
}
