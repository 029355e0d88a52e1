//! `band exec --band FILE -- CMD ARGS…`: an ad-hoc command under a band file's policy, and the
//! spinner of `band run` / `band exec`. `privileged_*` tests run the real sandbox and skip
//! without root unless `BAND_TEST_MUST_RUN=1`; the refusals need no sandbox (nothing runs).

use std::path::Path;

use band_test::{Output, band_snapshot};

use crate::common::{band, bin, noted_pids, noting_server, output, sandbox_missing};
use pretty_assertions::assert_eq;
use serde_json::Value;

const BAND: &str = "---
band: agent-code
description: What agent-written code may do in this folder.
allow:
  cli: [\"echo *\", \"wc *\", \"sleep *\"]
  read: [\"data/**\"]
deny:
  cli: [\"echo secret *\"]
---
";

/// A workspace with `agent.band.md` and `data/words.txt`.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    fs_err::write(dir.path().join("agent.band.md"), BAND).expect("write band");
    fs_err::create_dir(dir.path().join("data")).expect("mkdir");
    fs_err::write(dir.path().join("data/words.txt"), "one two three\n").expect("write data");
    dir
}

fn exec(dir: &Path, json: bool, command: &[&str]) -> (i32, String, String) {
    exec_output(dir, json, command).parts()
}

fn exec_output(dir: &Path, json: bool, command: &[&str]) -> Output {
    let mut args = vec!["exec", "--band", "agent.band.md"];
    if json {
        args.push("--json");
    }
    args.push("--");
    args.extend(command);
    output(&args, dir)
}

#[test]
fn exec_without_a_band_file_is_a_clear_error() {
    let dir = workspace();
    band_snapshot!(
        output(
            &["exec", "--band", "missing.band.md", "--", "echo", "x"],
            dir.path(),
        ),
        "exec_missing_band_file"
    );
    band_snapshot!(
        output(
            &["exec", "--band", "data/words.txt", "--", "echo", "x"],
            dir.path(),
        ),
        "exec_not_a_band_file"
    );
    let (code, _, err) = band(
        &["exec", "--band", "agent.band.md", "echo", "x"],
        dir.path(),
    );
    assert_eq!(code, 2, "the command must follow `--`: {err}");
}

#[test]
fn exec_with_a_broken_band_file_runs_nothing() {
    let dir = workspace();
    fs_err::write(
        dir.path().join("broken.band.md"),
        "---\nband: x\ndescription: d\nallow:\n  cli: [\"/bin/sh *\"]\n---\n",
    )
    .expect("write");
    band_snapshot!(
        output(
            &["exec", "--band", "broken.band.md", "--", "echo", "x"],
            dir.path(),
        ),
        "exec_broken_band_file"
    );
}

#[test]
fn exec_denies_what_the_band_does_not_allow_before_anything_runs() {
    let dir = workspace();
    // No allow rule: exit 5, status denied, the argv and no rule.
    let denied = exec_output(dir.path(), true, &["cat", "data/words.txt"]);
    band_snapshot!(denied, "exec_denied_json");
    let (code, out, err) = denied.parts();
    assert_eq!(code, 5, "{err}");
    let v: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["status"], "denied");
    assert_eq!(
        v["denied"][0]["argv"],
        serde_json::json!(["cat", "data/words.txt"])
    );
    assert_eq!(v["denied"][0]["rule"], Value::Null);
    assert_eq!(v["error"]["layer"], "cli");
    assert_eq!(v["skill"], "exec");
    // A deny rule wins over the allow rule, and names itself.
    let (code, out, err) = exec(dir.path(), true, &["echo", "secret", "x"]);
    assert_eq!(code, 5, "{err}");
    let v: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["denied"][0]["rule"], "echo secret *");
    // The shell essentials a script may use are not exempt for the agent's command.
    band_snapshot!(
        exec_output(dir.path(), false, &["sh", "-c", "echo hi"]),
        "exec_denied_shell"
    );
    // A path is not a command name.
    band_snapshot!(
        exec_output(dir.path(), false, &["/usr/bin/echo", "x"]),
        "exec_denied_path"
    );
}

/// As root, `band exec` starts band-server before it reads the band file, on the guess that the
/// target is the host, as `band run` does (issue 17): a broken band file (nothing to run) closes
/// it unused, as does a command the band refuses; either way it got no request and is gone when
/// band exits. An allowed command is served by it, with no second start.
#[test]
fn privileged_exec_starts_band_server_on_a_guess_and_a_refusal_closes_it() {
    band_test::privileged!(sandbox_missing());
    let dir = workspace();
    let t = tempfile::tempdir().expect("tempdir");
    let (starts, sent) = (t.path().join("starts"), t.path().join("sent"));
    let band = bin();
    let band = band
        .clone()
        .env("BAND_SERVER", noting_server(t.path(), &band));
    let sent_bytes = || fs_err::read(&sent).map(|b| b.len()).unwrap_or(0);
    let gone = |pid: u32| !Path::new(&format!("/proc/{pid}")).exists();
    let exec = |file: &str, command: &[&str]| {
        let mut args = vec!["exec", "--band", file, "--"];
        args.extend(command);
        band.run(&args, dir.path())
    };

    // An exec that runs nothing: the band-server started on the guess for it is closed unused,
    // the `n`th start in all, and gone when band exits.
    let closed_unused = |file: &str, command: &[&str], code: i32, n: usize| {
        let (got, out, err) = exec(file, command);
        assert_eq!(got, code, "{out}{err}");
        let pids = noted_pids(&starts);
        assert_eq!(
            pids.len(),
            n,
            "one band-server per exec, on the guess: {pids:?}"
        );
        let last = pids[n - 1];
        assert!(gone(last), "the guessed band-server {last} outlived band");
    };

    // Started before the band file was read: a broken one still met a band-server.
    fs_err::write(dir.path().join("broken.band.md"), "---\nband: [\n---\n").expect("write");
    closed_unused("broken.band.md", &["echo", "x"], 2, 1);
    // A refused command: that one start, closed unused.
    closed_unused("agent.band.md", &["cat", "data/words.txt"], 5, 2);
    assert_eq!(sent_bytes(), 0, "a request reached band-server");

    let (code, out, err) = exec("agent.band.md", &["echo", "hi"]);
    assert_eq!((code, out.as_str()), (0, "hi\n"), "{err}");
    assert_eq!(noted_pids(&starts).len(), 3, "one start per exec");
    assert!(
        sent_bytes() > 0,
        "the allowed command's request never reached band-server"
    );
}

#[test]
fn privileged_exec_runs_an_allowed_command_in_the_sandbox() {
    band_test::privileged!(sandbox_missing());
    let dir = workspace();
    // Arguments arrive exactly as given (no shell expansion on the way).
    let (code, out, err) = exec(dir.path(), false, &["echo", "it's", "$HOME", "`id`"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "it's $HOME `id`\n");
    assert_eq!(err, "", "a successful exec prints nothing else");
    // The workspace files the band admits are there.
    let ok = exec_output(dir.path(), true, &["wc", "-w", "data/words.txt"]);
    band_snapshot!(ok, "exec_json_ok");
    let (code, out, err) = ok.parts();
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["status"], "ok");
    assert_eq!(v["stdout"], "3 data/words.txt\n");
    assert_eq!(
        (v["skill"].as_str(), v["script"].as_str()),
        (Some("exec"), Some("exec"))
    );
    // Files the band does not admit are not (the band file itself is not in allow.read).
    let (code, out, _) = exec(dir.path(), true, &["wc", "-c", "agent.band.md"]);
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["status"], "script_failed");
    assert!(
        v["stderr"].as_str().unwrap_or("").contains("No such file"),
        "{v}"
    );
}

/// Run `args` with stdout and stderr on a pseudo-terminal (`script`); what the terminal showed.
fn on_a_terminal(dir: &Path, args: &str) -> String {
    let out = std::process::Command::new("script")
        .args([
            "-qec",
            &format!("{} {args}", crate::common::band_exe()),
            "/dev/null",
        ])
        .current_dir(dir)
        .env("BAND_DATA_DIR", crate::common::DATA_DIR)
        .env("BAND_SERVER_STATE_DIR", band_test::STATE_DIR)
        .env("BAND_CONFIG", band_test::NO_CONFIG)
        // No warm server: a test's own would send away the one warm.rs and load.rs hold.
        .env("BAND_WARM", "0")
        .output()
        .expect("script (bsdutils)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn privileged_spinner_only_on_a_terminal_and_never_with_json() {
    band_test::privileged!(sandbox_missing());
    let dir = workspace();
    let tty = on_a_terminal(dir.path(), "exec --band agent.band.md -- sleep 0.6");
    assert!(tty.contains("running sleep under agent.band.md"), "{tty:?}");
    let tty = on_a_terminal(dir.path(), "exec --json --band agent.band.md -- sleep 0.6");
    assert!(!tty.contains("running"), "{tty:?}");
    assert!(tty.contains("\"status\": \"ok\""), "{tty:?}");
    // Not a terminal: no spinner either.
    let (code, _, err) = exec(dir.path(), false, &["sleep", "0.6"]);
    assert_eq!((code, err.as_str()), (0, ""));

    // band run: the same rule.
    let skill = dir.path().join("nap");
    fs_err::create_dir_all(skill.join("scripts")).expect("mkdir");
    fs_err::create_dir_all(skill.join("schemas/input")).expect("mkdir");
    fs_err::write(
        skill.join("BAND.md"),
        "---\nband: nap\ndescription: Sleeps.\nallow:\n  cli: [\"sleep *\"]\n---\n",
    )
    .expect("write");
    fs_err::write(
        skill.join("SKILL.md"),
        "---\nname: nap\ndescription: Sleeps.\n---\n",
    )
    .expect("write");
    fs_err::write(
        skill.join("schemas/input/nap.json"),
        "{\"type\": \"object\"}",
    )
    .expect("write");
    let script = skill.join("scripts/nap.sh");
    fs_err::write(&script, "#!/bin/sh\nsleep 0.6\n").expect("write");
    fs_err::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let tty = on_a_terminal(dir.path(), "run ./nap/nap");
    assert!(tty.contains("running ./nap/nap"), "{tty:?}");
    assert!(tty.contains("band: ok"), "{tty:?}");
    let tty = on_a_terminal(dir.path(), "run --json ./nap/nap");
    assert!(!tty.contains("running"), "{tty:?}");
}
