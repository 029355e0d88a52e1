//! What a script tried and could not do, when no hook of band's saw it (issue 14, item 6): an
//! undeclared command in a `sh` (dash) or busybox script, a call by absolute path, a command
//! `find -exec`, `env -S` or `xargs` starts. Each is a CLI denial with the rule that would allow
//! it, in `--json`, `--trace`, the ledger and the MCP error, read from inside the sandbox by real
//! shells; the script's own stderr is unchanged, and a `command -v` probe still falls back.

use std::path::Path;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{band, output, sandbox_missing};

/// A skill `demo` whose band allows `cat *`, `find *` and `busybox sh *`, with `script` as
/// `scripts/hello.sh`.
fn skill(dir: &Path, script: &str) {
    assert_eq!(band(&["init", "demo"], dir).0, 0);
    let root = dir.join("demo");
    fs_err::write(root.join("scripts/hello.sh"), script).expect("write");
    let band_md = fs_err::read_to_string(root.join("BAND.md")).expect("read");
    let band_md = band_md.replace(
        "  cli: [\"jq -r .name /band/io/input.json\"]\n",
        "  cli: [\"cat *\", \"find *\", \"busybox sh *\"]\n",
    );
    assert!(band_md.contains("busybox sh *"), "{band_md}");
    fs_err::write(root.join("BAND.md"), band_md).expect("write");
}

/// A script for `shell` (a `#!` line): two undeclared host programs, one by name and one by
/// absolute path, a `command -v` probe, and a name no host has.
fn undeclared_script(shebang: &str) -> String {
    format!(
        "{shebang}\n\
         uname -s; u=$?\n\
         /usr/bin/id -u; i=$?\n\
         if command -v stat >/dev/null; then p=found; else p=fallback; fi\n\
         no-such-tool-band-test; n=$?\n\
         echo \"codes: uname=$u id=$i missing=$n probe=$p\" >&2\n\
         echo '{{\"greeting\":\"hi\"}}' > \"$OUTPUT_PATH\"\n\
         exit $u\n"
    )
}

fn run_json(dir: &Path) -> Value {
    let (code, stdout, stderr) = band(
        &["run", "--json", "--skills", ".", "demo/hello", "--name=x"],
        dir,
    );
    assert_eq!(code, 5, "denied: {stdout}{stderr}");
    serde_json::from_str(&stdout).expect("json")
}

fn shell_denials() -> Value {
    json!([
        {"kind": "cli", "argv": ["uname"], "rule": null, "source": "not_found_message"},
        {"kind": "cli", "argv": ["/usr/bin/id"], "rule": null, "source": "not_found_message"},
    ])
}

/// dash (`/bin/sh`): `uname` and `/usr/bin/id` are denials read from dash's own message, with
/// `uname *`/`id *` as the rules; the script's stderr still holds dash's messages word for word,
/// `command -v stat` still falls back, and a name no host has is no denial. The ledger (`band
/// show`) and `--trace` say the same. Before, these were bare "not found" lines and `denied` was
/// empty.
#[test]
fn privileged_dash_script_undeclared_commands_are_denials_read_from_its_message() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tmp");
    skill(t.path(), &undeclared_script("#!/bin/sh"));
    let v = run_json(t.path());
    let err = v["stderr"].as_str().unwrap_or("");
    for line in [
        "/skill/scripts/hello.sh: 2: uname: not found\n",
        "/skill/scripts/hello.sh: 3: /usr/bin/id: not found\n",
        "/skill/scripts/hello.sh: 5: no-such-tool-band-test: not found\n",
        "codes: uname=127 id=127 missing=127 probe=fallback\n",
    ] {
        assert!(err.contains(line), "{line:?} in {v}");
    }
    assert_eq!(v["denied"], shell_denials(), "{v}");
    assert_eq!(v["stdout"], json!(""), "{v}");

    let id = v["run_id"].as_str().expect("run_id");
    let (code, shown, err) = band(&["show", "--json", id], t.path());
    assert_eq!(code, 0, "{err}");
    let shown: Value = serde_json::from_str(&shown).expect("json");
    assert_eq!(shown["denied"], shell_denials(), "{shown}");
    let (code, shown, err) = band(&["show", id], t.path());
    assert_eq!(code, 0, "{err}");
    assert!(
        shown.contains(
            "command `uname` (cli layer: no allow.cli rule matches; to allow it: allow.cli \
             \"uname *\" (read from a \"not found\" message on its stderr: its arguments are unknown))"
        ),
        "{shown}"
    );

    let trace = output(
        &["run", "--trace", "--skills", ".", "demo/hello", "--name=x"],
        t.path(),
    );
    // The script's stderr and the denials' lines interleave as they arrive; what the trace
    // says after the run is whole.
    let shown = trace.shown();
    let at = shown.find("trace: ").unwrap_or(0);
    // The band allows `busybox sh *` for the test below; a host without busybox (CI installs
    // it) is told so after the run, which is not this test's matter.
    let traced: String = shown[at..]
        .lines()
        .filter(|l| !l.starts_with("hint: not installed where band-server runs"))
        .map(|l| format!("{l}\n"))
        .collect();
    band_test::settings(&[]).bind(|| {
        band_test::insta::assert_snapshot!("trace_dash_undeclared", &traced);
    });
    assert!(shown.contains(
        "band: denied: command `/usr/bin/id` (cli layer: no allow.cli rule matches; to allow it: \
         allow.cli \"id *\" (read from a \"not found\" message on its stderr: its arguments are \
         unknown))\n"
    ));
}

/// The same from busybox's ash (`#!/bin/busybox sh`, whose message has `line N`), when the host
/// has busybox (CI installs it).
#[test]
fn privileged_busybox_script_undeclared_commands_are_denials_read_from_its_message() {
    band_test::privileged!(sandbox_missing());
    let test = band_test::test_name!();
    if !Path::new("/bin/busybox").exists() {
        assert!(
            !band_test::must_run(),
            "{test}: /bin/busybox is missing and BAND_TEST_MUST_RUN is set"
        );
        eprintln!("skipped: {test}: no /bin/busybox");
        return;
    }
    let t = tempfile::tempdir().expect("tmp");
    skill(t.path(), &undeclared_script("#!/bin/busybox sh"));
    let v = run_json(t.path());
    let err = v["stderr"].as_str().unwrap_or("");
    for line in [
        "/skill/scripts/hello.sh: line 2: uname: not found\n",
        "/skill/scripts/hello.sh: line 3: /usr/bin/id: not found\n",
        "codes: uname=127 id=127 missing=127 probe=fallback\n",
    ] {
        assert!(err.contains(line), "{line:?} in {v}");
    }
    assert_eq!(v["denied"], shell_denials(), "{v}");
}

/// A script that only probes for an optional tool and falls back reports nothing and succeeds,
/// though the host has the tool.
#[test]
fn privileged_a_command_v_probe_falls_back_and_reports_nothing() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tmp");
    skill(
        t.path(),
        "#!/bin/sh\n\
         command -v uname >/dev/null || echo fallback >&2\n\
         [ -x /usr/bin/uname ] || echo fallback2 >&2\n\
         echo '{\"greeting\":\"hi\"}' > \"$OUTPUT_PATH\"\n",
    );
    let (code, stdout, stderr) = band(
        &["run", "--json", "--skills", ".", "demo/hello", "--name=x"],
        t.path(),
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    let v: Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(v["stderr"], json!("fallback\nfallback2\n"), "{v}");
    assert_eq!(v["denied"], json!([]), "{v}");
}

/// Commands a declared launcher starts: `find -exec` (each word with `{}` is `*` in the rule),
/// `env -S` (split as env splits it: the exact rule), `xargs` (it appends its input: the rule
/// ends in `*`). Each launcher runs and fails as before; the undeclared command never runs (no
/// kernel name on stdout). Before, only `xargs uname` was reported, and with the rule `uname`,
/// which does not allow what xargs runs (`uname x`).
#[test]
fn privileged_commands_find_exec_env_s_and_xargs_start_are_denials_with_their_rules() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tmp");
    skill(
        t.path(),
        "#!/bin/sh\n\
         find /band/io -maxdepth 0 -exec uname -a {} \\;\n\
         env -S 'id -u -n'; e=$?\n\
         echo x | xargs uname; x=$?\n\
         echo \"codes: env=$e xargs=$x\" >&2\n\
         echo '{\"greeting\":\"hi\"}' > \"$OUTPUT_PATH\"\n\
         exit $x\n",
    );
    let (code, stdout, stderr) = band(
        &["run", "--json", "--skills", ".", "demo/hello", "--name=x"],
        t.path(),
    );
    assert_eq!(code, 5, "denied: {stdout}{stderr}");
    let v: Value = serde_json::from_str(&stdout).expect("json");
    assert!(
        v["stderr"]
            .as_str()
            .unwrap_or("")
            .contains("codes: env=127 xargs=127"),
        "{v}"
    );
    assert_eq!(v["stdout"], json!(""), "{v}");
    assert_eq!(
        v["denied"],
        json!([
            {"kind": "cli", "argv": ["uname", "-a", "{}"], "rule": null, "source": "filled"},
            {"kind": "cli", "argv": ["id", "-u", "-n"], "rule": null},
            {"kind": "cli", "argv": ["uname"], "rule": null, "source": "appended"},
        ]),
        "{v}"
    );
    let (_, _, human) = band(
        &["run", "--skills", ".", "demo/hello", "--name=x"],
        t.path(),
    );
    for rule in [
        "allow.cli \"uname -a *\"",
        "allow.cli \"id -u -n\"",
        "allow.cli \"uname *\"",
    ] {
        assert!(human.contains(rule), "{rule} in {human}");
    }
}

/// The agent sees the shell-message denial in the MCP error: the typed object with its source,
/// and the headline with the rule.
#[test]
fn privileged_a_dash_denial_reaches_the_mcp_error() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tmp");
    skill(t.path(), &undeclared_script("#!/bin/sh"));
    let ws = t.path().join("ws");
    fs_err::create_dir(&ws).expect("mkdir");
    let (mut raw, _) = crate::mcp::Raw::start(&[t.path()], &ws);
    let result = raw.request(
        "tools/call",
        json!({"name": "demo__hello", "arguments": {"name": "x"}}),
    );
    assert_eq!(result["isError"], json!(true), "{result}");
    let texts: Vec<String> = result["content"]
        .as_array()
        .map(|c| {
            c.iter()
                .map(|b| b["text"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default();
    assert!(texts[0].starts_with("denied: "), "{texts:?}");
    let typed: Value = texts
        .get(1)
        .and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_else(|| panic!("no typed result in {texts:?}"));
    assert_eq!(typed["denied"], shell_denials(), "{typed}");
    assert!(
        texts[0].contains(
            "denied: command uname (cli layer: no allow.cli rule matches; to allow it: \
             allow.cli \"uname *\" (read from a \"not found\" message on its stderr"
        ),
        "{texts:?}"
    );
}

/// A declared program runs by any of the absolute paths a host may keep it at (`/usr/bin`,
/// `/bin`, `/usr/sbin`, `/usr/local/bin`), judged as the same call: so the rule a shell-message
/// denial of `/usr/sbin/x` names (`x *`) makes that call run. Before, `/usr/sbin` and
/// `/usr/local/bin` were empty in the sandbox.
#[test]
fn privileged_a_declared_program_runs_by_every_program_directory_path() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tmp");
    skill(
        t.path(),
        "#!/bin/sh\n\
         for d in /usr/bin /bin /usr/sbin /usr/local/bin /sbin; do\n\
           echo \"$d=$(\"$d/uname\" -s)\" >&2\n\
         done\n\
         echo '{\"greeting\":\"hi\"}' > \"$OUTPUT_PATH\"\n",
    );
    let band_md = t.path().join("demo/BAND.md");
    let text = fs_err::read_to_string(&band_md).expect("read");
    fs_err::write(&band_md, text.replace("\"cat *\"", "\"uname -s\"")).expect("write");
    let (code, stdout, stderr) = band(
        &["run", "--json", "--skills", ".", "demo/hello", "--name=x"],
        t.path(),
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    let v: Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(
        v["stderr"],
        json!("/usr/bin=Linux\n/bin=Linux\n/usr/sbin=Linux\n/usr/local/bin=Linux\n/sbin=Linux\n"),
        "{v}"
    );
    assert_eq!(v["denied"], json!([]), "{v}");
    // Each is the call `uname -s`, judged and on record.
    let (_, _, trace) = band(
        &["run", "--trace", "--skills", ".", "demo/hello", "--name=x"],
        t.path(),
    );
    let unames = trace
        .lines()
        .filter(|l| l.starts_with("  allowed  uname -s ") && l.ends_with("allow.cli \"uname -s\""))
        .count();
    assert_eq!(unames, 5, "{trace}");
}
