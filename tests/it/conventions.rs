//! The conventions of the command line: band's flags on either side of a script's arguments
//! (`--` ends them), `--json` on every command that prints data with errors as one JSON object,
//! one name for band's exit code and another for the script's, `--color`.

use band_test::{Band, band_snapshot};
use serde_json::Value;

use crate::common::{band, bin, output, repo, sandbox_missing};
use pretty_assertions::assert_eq;

fn json_of(out: &band_test::Output) -> Value {
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.shown()))
}

#[test]
fn bands_flags_after_the_scripts_arguments_are_bands() {
    // `--json` and `--target` after the input: band's. The target is refused before anything
    // runs, as one JSON error on stdout.
    let out = output(
        &["text/count", "--text=a", "--json", "--target", "nowhere"],
        repo(),
    );
    band_snapshot!(out, "flags_after_input_json_error");
    let v = json_of(&out);
    assert_eq!(
        (v["status"].as_str(), v["exit_code"].as_u64()),
        (Some("error"), Some(2))
    );
    // The same with `band run`, and with the flags before the input.
    for args in [
        &[
            "run",
            "text/count",
            "--text=a",
            "--json",
            "--target=nowhere",
        ][..],
        &[
            "run",
            "--json",
            "--target",
            "nowhere",
            "text/count",
            "--text=a",
        ],
        &["text/count", "--json", "--text=a", "--target", "nowhere"],
        // Before the command, as for every command (the README's `band --json text/count`).
        &["--json", "text/count", "--text=a", "--target", "nowhere"],
        &[
            "--json",
            "--target=nowhere",
            "run",
            "text/count",
            "--text=a",
        ],
    ] {
        assert_eq!(output(args, repo()).stdout, out.stdout, "{args:?}");
    }
}

#[test]
fn a_commands_flags_go_before_or_after_it() {
    for (before, after) in [
        (&["--json", "list"][..], &["list", "--json"][..]),
        (
            &["--json", "help", "text/count"],
            &["help", "text/count", "--json"],
        ),
        (&["--json", "vm", "status"], &["vm", "status", "--json"]),
    ] {
        let (b, a) = (output(before, repo()), output(after, repo()));
        assert_eq!((b.code, &b.stdout), (a.code, &a.stdout), "{before:?}");
        assert!(b.stdout.starts_with(['{', '[']), "{}", b.shown());
    }
    // A flag the command does not have is refused where it stands, as before.
    band_snapshot!(
        output(&["--trace", "list"], repo()),
        "flag_not_the_commands"
    );
}

#[test]
fn help_after_the_scripts_arguments_is_the_scripts_help() {
    let help = band(&["help", "text/count"], repo()).1;
    for args in [
        &["text/count", "--text=a", "--help"][..],
        &["text/count", "--text", "a", "-h"],
        &["run", "text/count", "--text=a", "--help"],
    ] {
        let out = output(args, repo());
        assert_eq!((out.code, &out.stdout), (0, &help), "{args:?}");
    }
}

#[test]
fn after_double_dash_everything_is_the_scripts_input() {
    // `--json` after `--` is an input named `json`, which text/count does not have: refused by
    // the input schema (before the sandbox starts), as JSON because of the `--json` before it.
    let out = output(
        &["text/count", "--json", "--", "--text=a", "--json=x"],
        repo(),
    );
    band_snapshot!(out, "double_dash_input");
    let v = json_of(&out);
    assert_eq!(v["status"], "input_invalid");
    assert_eq!(v["exit_code"], 3);
    assert!(
        v["error"]["message"].as_str().unwrap().contains("json"),
        "{v:#}"
    );
}

#[test]
fn errors_under_json_are_one_json_object_on_stdout() {
    let t = tempfile::tempdir().unwrap();
    let b = Band::new(crate::common::band_exe(), t.path());
    for (args, name) in [
        (&["histry", "--json"][..], "json_error_unknown_command"),
        (&["history", "--json", "--bogus"], "json_error_unknown_flag"),
        (&["show", "0123", "--json"], "json_error_show_unknown"),
        (
            &["help", "text/nope", "--json"],
            "json_error_unknown_script",
        ),
        (
            &["lock", "--check", "--json", "nope"],
            "json_error_lock_unknown",
        ),
    ] {
        let out = b.output(args, repo());
        band_snapshot!(out, name);
        let v = json_of(&out);
        assert_eq!(v["status"], "error", "{args:?}");
        assert_eq!(v["exit_code"], 2, "{args:?}");
        assert_eq!(out.code, 2, "{args:?}");
        assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()));
        assert!(out.stderr.is_empty(), "{args:?}: {}", out.stderr);
    }
}

#[test]
fn commands_that_print_data_take_json() {
    let t = tempfile::tempdir().unwrap();
    let b = Band::new(crate::common::band_exe(), t.path());
    for args in [
        &["list", "--json"][..],
        &["history", "--json"],
        &["audit", "verify", "--json"],
        &["lock", "--check", "--json", "--skills", "skills", "text"],
        &["help", "text/count", "--json"],
        &["doctor", "--json"],
        &["vm", "status", "--json"],
    ] {
        let out = b.output(args, repo());
        json_of(&out);
    }
    band_snapshot!(
        b.output(&["lock", "--check", "--json", "text"], repo()),
        "lock_check_json"
    );
    let w = tempfile::tempdir().unwrap();
    let init = b.output(&["init", "demo", "--json"], w.path());
    band_snapshot!(init, "init_json");
    let new = b.output(
        &["new-script", "demo", "other", "--json", "--skills", "."],
        w.path(),
    );
    band_snapshot!(new, "new_script_json");
}

#[test]
fn color_follows_the_flag_then_no_color_then_force_color() {
    let t = tempfile::tempdir().unwrap();
    fs_err::create_dir_all(t.path().join("s/scripts")).unwrap();
    // A broken skill: lint has something to colour.
    fs_err::write(t.path().join("s/BAND.md"), "---\nallow: {cli: [7]}\n---\n").unwrap();
    let esc = |b: &Band, args: &[&str]| b.output(args, t.path()).stdout.contains('\x1b');
    let plain = bin();
    assert!(!esc(&plain, &["lint", "s"]), "NO_COLOR, not a terminal");
    assert!(esc(&plain, &["lint", "s", "--color=always"]));
    assert!(esc(&plain, &["--color", "always", "lint", "s"]));
    let forced = bin().env_remove("NO_COLOR").env("FORCE_COLOR", "1");
    assert!(esc(&forced, &["lint", "s"]));
    assert!(!esc(&forced, &["lint", "s", "--color", "never"]));
    let none = bin().env_remove("NO_COLOR");
    assert!(!esc(&none, &["lint", "s"]), "not a terminal");
    // clap's own errors follow it too.
    let err = plain.output(&["lint", "--bogus", "--color=always"], t.path());
    assert!(err.stderr.contains('\x1b'), "{}", err.stderr);
}

/// A denied run: `exit_code` 5 (band's) and `script_exit_code` the script's own, the same in
/// `band run --json` (flags after the input), `band history --json` and `band show --json`.
#[test]
fn privileged_exit_codes_have_one_name_each_everywhere() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().unwrap();
    let b = Band::new(crate::common::band_exe(), t.path().join("data"));
    assert_eq!(b.output(&["init", "demo"], t.path()).code, 0);
    fs_err::write(
        t.path().join("demo/scripts/hello.sh"),
        "#!/bin/sh\nset -e\njq . \"$INPUT_PATH\"\n",
    )
    .unwrap();
    let run = b.output(
        &["demo/hello", "--name=x", "--json", "--skills", "."],
        t.path(),
    );
    assert_eq!(run.code, 5, "{}", run.shown());
    let v = json_of(&run);
    assert_eq!(v["status"], "denied");
    assert_eq!(v["exit_code"], 5);
    let script = v["script_exit_code"].clone();
    assert!(script.is_i64() && script != 5, "{v:#}");

    let history = json_of(&b.output(&["history", "--json"], t.path()));
    let rec = &history.as_array().unwrap()[0];
    assert_eq!(
        (&rec["exit_code"], &rec["script_exit_code"]),
        (&v["exit_code"], &script)
    );
    assert!(rec.get("script_exit").is_none(), "{rec:#}");
    let id = rec["run_id"].as_str().unwrap();
    let shown = json_of(&b.output(&["show", id, "--json"], t.path()));
    assert_eq!(
        (&shown["exit_code"], &shown["script_exit_code"]),
        (&v["exit_code"], &script)
    );
}

#[test]
fn completions_and_manual_page_come_from_the_command_line() {
    let bash = output(&["completions", "bash"], repo());
    assert_eq!(bash.code, 0, "{}", bash.stderr);
    // Every command is offered, and the script is valid bash.
    for command in ["run", "history", "doctor", "completions", "man", "help"] {
        assert!(bash.stdout.contains(command), "{command}");
    }
    let t = tempfile::tempdir().unwrap();
    fs_err::write(t.path().join("band.bash"), &bash.stdout).unwrap();
    let check = std::process::Command::new("bash")
        .arg("-n")
        .arg(t.path().join("band.bash"))
        .output()
        .unwrap();
    assert!(check.status.success(), "{check:?}");
    band_snapshot!(output(&["completions", "fish"], repo()), "completions_fish");
    band_snapshot!(output(&["man"], repo()), "man_page");
    let dir = t.path().join("man1");
    let out = output(&["man", "--dir", dir.to_str().unwrap()], repo());
    assert_eq!(out.code, 0, "{}", out.stderr);
    for page in [
        "band.1",
        "band-run.1",
        "band-vm-status.1",
        "band-completions.1",
    ] {
        assert!(dir.join(page).is_file(), "{page}");
    }
    band_snapshot!(
        output(&["completions", "tcsh"], repo()),
        "completions_unknown_shell"
    );
}

/// An ordinary user this test makes (`useradd`, no home), to run band as.
const USER: &str = "band-cliconv-test";

fn ordinary_user() -> (String, String) {
    let id = |flag: &str| {
        let out = std::process::Command::new("id")
            .args([flag, USER])
            .output()
            .unwrap();
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    if id("-u").is_none() {
        let out = std::process::Command::new("useradd")
            .args(["-M", "-s", "/usr/sbin/nologin", USER])
            .output()
            .unwrap();
        assert!(
            out.status.success() || id("-u").is_some(),
            "useradd: {out:?}"
        );
    }
    (id("-u").unwrap(), id("-g").unwrap())
}

/// `band <args>` as [`USER`] (setpriv keeps the environment `b` gives), in `cwd`.
fn as_ordinary_user(b: &Band, args: &[&str], cwd: &std::path::Path) -> band_test::Output {
    let (uid, gid) = ordinary_user();
    // By its full path: `b` may give the child a PATH without it.
    let setpriv = std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join("setpriv"))
        .find(|p| p.is_file())
        .expect("setpriv (util-linux)");
    let mut cmd = std::process::Command::new(setpriv);
    cmd.args(["--reuid", &uid, "--regid", &gid, "--clear-groups"])
        .arg(b.exe())
        .args(args)
        .current_dir(cwd);
    b.apply(&mut cmd);
    band_test::Output::of(&mut cmd)
}

/// A folder of stand-ins, first on PATH: `dpkg-query` (only bubblewrap installed), `apt-get`
/// (writes its arguments to `apt.log`) and `band-server`. Never the system's apt-get.
fn fake_debian(dir: &std::path::Path) -> Band {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("bin");
    fs_err::create_dir_all(&bin).unwrap();
    let log = dir.join("apt.log");
    for (name, text) in [
        (
            "dpkg-query",
            "#!/bin/sh\ncase \"$3\" in bubblewrap) printf 'install ok installed';; *) echo \"dpkg-query: no packages found matching $3\" >&2; exit 1;; esac\n".to_string(),
        ),
        (
            "apt-get",
            format!("#!/bin/sh\necho \"$DEBIAN_FRONTEND: $*\" >> {}\necho 'apt-get: done'\n", log.display()),
        ),
        ("band-server", "#!/bin/sh\n".to_string()),
    ] {
        let p = bin.join(name);
        fs_err::write(&p, text).unwrap();
        fs_err::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    fs_err::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    Band::new(crate::common::band_exe(), dir.join("data"))
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("BAND_SERVER", bin.join("band-server"))
}

#[test]
fn privileged_setup_host_installs_what_is_missing_and_says_what() {
    band_test::privileged!((!band_test::is_root()).then(|| "not root".to_string()));
    let t = tempfile::tempdir().unwrap();
    let b = fake_debian(t.path());
    let out = b.output(&["setup", "--driver", "host"], t.path());
    band_snapshot!(
        out,
        "setup_host_root",
        &[(t.path().to_str().unwrap(), "[DIR]")]
    );
    assert_eq!(
        fs_err::read_to_string(t.path().join("apt.log")).unwrap(),
        "noninteractive: update\nnoninteractive: install -y --no-install-recommends nftables slirp4netns uidmap\n"
    );
    let json = b.output(&["setup", "--driver", "host", "--json"], t.path());
    band_snapshot!(
        json,
        "setup_host_root_json",
        &[(t.path().to_str().unwrap(), "[DIR]")]
    );

    // An ordinary user: the exact command, and apt-get is not run.
    fs_err::remove_file(t.path().join("apt.log")).unwrap();
    let user = as_ordinary_user(&b, &["setup", "--driver", "host"], t.path());
    band_snapshot!(
        user,
        "setup_host_user",
        &[(t.path().to_str().unwrap(), "[DIR]")]
    );
    assert!(!t.path().join("apt.log").exists());
}

/// With every package in place, an ordinary user with neither root nor `sudo -n` is told the
/// host target is not ready (before: "ready"); with a `sudo -n` that may run band-server, it is.
#[test]
fn privileged_setup_host_is_not_ready_without_root_or_sudo() {
    use std::os::unix::fs::PermissionsExt;
    band_test::privileged!(
        (!band_test::is_root()).then(|| "not root (to make the ordinary user)".to_string())
    );
    let t = tempfile::tempdir().unwrap();
    let bin = t.path().join("bin");
    let b = fake_debian(t.path()).env("PATH", &bin);
    let script = |name: &str, text: &str| {
        let p = bin.join(name);
        fs_err::write(&p, text).unwrap();
        fs_err::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    // Every package installed.
    script(
        "dpkg-query",
        "#!/bin/sh
printf 'install ok installed'
",
    );
    let filters = [(t.path().to_str().unwrap(), "[DIR]")];
    // No sudo on PATH.
    let out = as_ordinary_user(&b, &["setup", "--driver", "host"], t.path());
    band_snapshot!(out, "setup_host_user_no_sudo", &filters);
    // A sudo that allows nothing.
    script(
        "sudo",
        "#!/bin/sh
echo 'sudo: a password is required' >&2
exit 1
",
    );
    let out = as_ordinary_user(&b, &["setup", "--driver", "host", "--json"], t.path());
    band_snapshot!(out, "setup_host_user_sudo_refuses", &filters);
    // A sudo that may run band-server (`sudo -n -l <band-server>` succeeds).
    script(
        "sudo",
        "#!/bin/sh
[ \"$1 $2\" = '-n -l' ] && exit 0
exit 1
",
    );
    let out = as_ordinary_user(&b, &["setup", "--driver", "host"], t.path());
    band_snapshot!(out, "setup_host_user_sudo_allows", &filters);
}

/// As an ordinary user, the host target's error names sudo (not "No such file or directory").
#[test]
fn privileged_the_host_target_without_root_names_sudo() {
    band_test::privileged!(
        (!band_test::is_root()).then(|| "not root (to make the ordinary user)".to_string())
    );
    let t = tempfile::tempdir().unwrap();
    // A `sudo` that allows nothing, alone on PATH: the same answer whether or not this machine
    // has sudo.
    let bin = t.path().join("bin");
    let b = fake_debian(t.path())
        .env("BAND_SKILLS_PATH", repo().join("skills"))
        .env("PATH", &bin);
    {
        use std::os::unix::fs::PermissionsExt;
        let sudo = bin.join("sudo");
        fs_err::write(
            &sudo,
            "#!/bin/sh\necho 'sudo: a password is required' >&2\nexit 1\n",
        )
        .unwrap();
        fs_err::set_permissions(&sudo, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // The user's own ledger and workspace.
    let (uid, gid) = ordinary_user();
    let chown = std::process::Command::new("chown")
        .args(["-R", &format!("{uid}:{gid}")])
        .arg(t.path())
        .status()
        .unwrap();
    assert!(chown.success());
    let out = as_ordinary_user(
        &b,
        &["text/count", "--text=a", "--target", "host"],
        t.path(),
    );
    // The error names `sudo -n`, and no "No such file or directory".
    band_snapshot!(
        out,
        "host_target_not_root",
        &[(t.path().to_str().unwrap(), "[DIR]")]
    );
}

/// The README's pre-commit examples name a hook the repository has, with its `files`, and pin no
/// revision that does not exist (no made-up tag: a `rev` is a full commit hash, or a tag that
/// is in this repository).
#[test]
fn the_pre_commit_example_is_true() {
    let readme = fs_err::read_to_string(repo().join("README.md")).unwrap();
    let hooks = fs_err::read_to_string(repo().join(".pre-commit-hooks.yaml")).unwrap();
    let section = readme.split("\n## pre-commit\n").nth(1).unwrap();
    let section = section.split("\n## ").next().unwrap();
    let field = |text: &str, key: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| {
                let l = l.trim().trim_start_matches("- ");
                let v = l.strip_prefix(&format!("{key}:"))?;
                Some(v.split(" #").next().unwrap().trim().to_string())
            })
            .collect()
    };
    let ids = field(&hooks, "id");
    assert!(section.contains("{ id: band-lint }"), "{section}");
    assert!(ids.contains(&"band-lint".to_string()), "{hooks}");
    for id in field(section, "id") {
        assert!(
            ids.contains(&id),
            "hook {id} is not in .pre-commit-hooks.yaml"
        );
    }
    assert_eq!(field(section, "files"), field(&hooks, "files"));
    let tags = std::process::Command::new("git")
        .args(["tag", "-l"])
        .current_dir(repo())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    for rev in field(section, "rev") {
        let full_hash = rev.len() == 40 && rev.chars().all(|c| c.is_ascii_hexdigit());
        assert!(
            full_hash || tags.lines().any(|t| t == rev),
            "rev {rev} is neither a full commit hash nor a tag of this repository"
        );
    }
}

/// A config file band cannot read is one error, with its file, line and hint, for every command
/// that reads it (before: a warning, then for a run the same text again as the error).
#[test]
fn a_config_error_is_said_once() {
    let t = tempfile::tempdir().expect("tempdir");
    let file = t.path().join("config.toml");
    fs_err::write(&file, "target = 3\n").expect("write");
    let band = bin().env("BAND_CONFIG", &file);
    for (args, name) in [
        (&["run", "text/count", "--text=a"][..], "config_error_run"),
        (&["list"], "config_error_list"),
    ] {
        let out = band.output(args, repo());
        band_snapshot!(out, name);
        assert_eq!(
            out.stderr.matches("expected a string").count(),
            1,
            "{}",
            out.shown()
        );
    }
}

/// bash completion, as bash runs it: skill/script names where one goes (from the skills path the
/// line's `--skills` gives), and the values of `--target` and `--status`.
#[test]
fn bash_completes_skill_names_and_target_and_status_values() {
    let t = tempfile::tempdir().unwrap();
    let script = t.path().join("band.bash");
    fs_err::write(&script, output(&["completions", "bash"], repo()).stdout).unwrap();
    // `band` on PATH is the band under test, as the user's would be.
    let exe = std::path::Path::new(crate::common::band_exe());
    let path = format!(
        "{}:{}",
        exe.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let complete = |line: &str| -> String {
        // The words of `line`; a trailing space starts a new, empty word.
        let mut words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        if line.ends_with(' ') {
            words.push(String::new());
        }
        let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
        let program = format!(
            "source {}\nCOMP_WORDS=({})\nCOMP_CWORD={}\nCOMP_LINE='{line}'\nCOMP_POINT=${{#COMP_LINE}}\n_band_values band '{}' '{}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\" | sort",
            script.display(),
            quoted.join(" "),
            words.len() - 1,
            words.last().unwrap(),
            words
                .get(words.len().wrapping_sub(2))
                .map_or("", |w| w.as_str()),
        );
        let out = std::process::Command::new("bash")
            .args(["--norc", "-c", &program])
            .env("PATH", &path)
            .env("BAND_CONFIG", band_test::NO_CONFIG)
            .env_remove("BAND_SKILLS_PATH")
            .current_dir(t.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{line}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let skills = repo().join("skills");
    let s = skills.display();
    let lines = |text: String| -> Vec<String> { text.lines().map(str::to_string).collect() };
    assert_eq!(
        lines(complete(&format!("band --skills {s} text/"))),
        ["text/count", "text/summary"]
    );
    assert_eq!(
        lines(complete(&format!("band run --skills {s} --json text/c"))),
        ["text/count"]
    );
    assert_eq!(
        lines(complete(&format!("band help --skills {s} json"))),
        ["json-transform/apply"]
    );
    // Not where a skill goes: after a skill, as a value of --workspace, or after lint.
    assert!(!complete(&format!("band run --skills {s} text/count ")).contains("text/"));
    assert!(!complete(&format!("band run --skills {s} --workspace ")).contains("text/"));
    assert!(!complete(&format!("band lint --skills {s} ")).contains("text/"));
    assert_eq!(
        lines(complete("band run --target ")),
        ["host", "lima", "qemu", "ssh://"]
    );
    assert_eq!(
        lines(complete("band history --status in")),
        ["input_invalid", "insist_unsatisfied", "integrity_failed"]
    );
    // The commands still complete.
    assert!(lines(complete("band hist")).contains(&"history".to_string()));
}
