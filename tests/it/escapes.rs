//! A script cannot drive the user's terminal (issue 13, item 7). The script prints OSC 52 (write
//! the clipboard), OSC 0 (window title), CSI 2J (clear the screen) and SGR 8 (hidden text) on
//! stdout and stderr, and runs a command whose argument carries a title sequence (denied, so it
//! shows in the denial line and `--trace`). Under a pseudo-terminal (`script`), none of those
//! sequences reaches the terminal: they show as text (`^[]52;…`). `--json` keeps them, escaped.

use std::path::Path;
use std::process::Command;

use band_test::Band;
use serde_json::Value;

use crate::common::{band_exe, sandbox_missing};

/// `probe/loud` in `dir`.
fn loud_skill(dir: &Path, b: &Band) {
    assert_eq!(b.run(&["init", "probe", "--script", "loud"], dir).0, 0);
    let band_md = dir.join("probe/BAND.md");
    let text = fs_err::read_to_string(&band_md).unwrap().replace(
        r#"cli: ["jq -r .name /band/io/input.json"]"#,
        r#"cli: ["sleep 0"]"#,
    );
    assert!(text.contains("sleep 0"), "{text}");
    fs_err::write(&band_md, text).unwrap();
    // The output is stdout as text (no output schema).
    fs_err::remove_file(dir.join("probe/schemas/output/loud.json")).unwrap();
    fs_err::write(
        dir.join("probe/scripts/loud.sh"),
        r#"#!/bin/sh
printf 'err clip\033]52;c;cHduZWQ=\007 title\033]0;pwned\007 clear\033[2J hide\033[8m c1\302\233 end\n' >&2
sleep "$(printf 'x\033]0;argv-title\007')" 2>/dev/null || true
printf 'out clip\033]52;c;cHduZWQ=\007 clear\033[2J hide\033[8m end\n'
"#,
    )
    .unwrap();
}

const FROM_THE_SCRIPT: [&str; 6] = [
    "\x1b]52;",
    "\x1b]0;pwned",
    "\x1b]0;argv-title",
    "\x1b[2J",
    "\x1b[8m",
    "\u{9b}",
];

#[test]
fn privileged_script_escapes_do_not_reach_the_terminal() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().unwrap();
    let b = Band::new(band_exe(), t.path().join("data"));
    loud_skill(t.path(), &b);
    // band's stdout and stderr are a terminal: `script` records what band writes to it.
    let line = format!("{} run --trace --skills . probe/loud --name=x", band_exe());
    let mut cmd = Command::new("script");
    cmd.args(["-qec", &line, "/dev/null"]).current_dir(t.path());
    b.apply(&mut cmd);
    let out = cmd.output().unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    for seq in FROM_THE_SCRIPT {
        assert!(
            !shown.contains(seq),
            "{seq:?} reached the terminal: {shown:?}"
        );
    }
    // What the script printed is there, inert: stderr as it streamed, the stdout output, the
    // denied command's argument in the denial line and in the trace.
    for text in [
        "err clip^[]52;c;cHduZWQ=^G title^[]0;pwned^G clear^[[2J hide^[[8m c1\\u{9b} end",
        "out clip^[]52;c;cHduZWQ=^G clear^[[2J hide^[[8m end",
        "^[]0;argv-title^G",
    ] {
        assert!(shown.contains(text), "no {text:?} in {shown:?}");
    }
    assert!(
        shown.matches("^[]0;argv-title^G").count() >= 2,
        "denial line and trace: {shown:?}"
    );
}

#[test]
fn privileged_json_keeps_script_escapes_escaped() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().unwrap();
    let b = Band::new(band_exe(), t.path().join("data"));
    loud_skill(t.path(), &b);
    let (code, stdout, stderr) = b.run(
        &["run", "--json", "--skills", ".", "probe/loud", "--name=x"],
        t.path(),
    );
    assert_eq!(code, 0, "{stderr}");
    // Valid JSON, no raw control character (C1 included), every sequence kept as `\u001b…`.
    assert!(
        !stdout.chars().any(|c| c.is_control() && c != '\n'),
        "{stdout:?}"
    );
    assert!(stdout.contains(r"\u001b]52;c;cHduZWQ=\u0007"), "{stdout}");
    assert!(stdout.contains(r"\u009b"), "{stdout}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert!(
        v["stderr"].as_str().unwrap().contains(
            "\x1b]52;c;cHduZWQ=\x07 title\x1b]0;pwned\x07 clear\x1b[2J hide\x1b[8m c1\u{9b}"
        ),
        "{v:#}"
    );
    assert_eq!(
        v["output"],
        "out clip\x1b]52;c;cHduZWQ=\x07 clear\x1b[2J hide\x1b[8m end\n"
    );
}

#[test]
fn privileged_history_and_show_do_not_replay_script_escapes() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().unwrap();
    let b = Band::new(band_exe(), t.path().join("data"));
    loud_skill(t.path(), &b);
    let (code, _, stderr) = b.run(
        &["run", "--trace", "--skills", ".", "probe/loud", "--name=x"],
        t.path(),
    );
    assert_eq!(code, 0, "{stderr}");
    let (code, json, stderr) = b.run(&["history", "--json"], t.path());
    assert_eq!(code, 0, "{stderr}");
    let records: Value = serde_json::from_str(&json).unwrap();
    let run_id = records[0]["run_id"].as_str().unwrap().to_string();
    // The ledger keeps what the script did (the denied argument with its escape) ...
    let (code, shown_json, stderr) = b.run(&["show", "--json", &run_id], t.path());
    assert_eq!(code, 0, "{stderr}");
    assert!(
        shown_json.contains(r"\u001b]0;argv-title\u0007"),
        "{shown_json}"
    );
    for out in [&json, &shown_json] {
        assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out:?}");
    }
    // ... and neither the table nor `show` writes it raw to the terminal.
    for args in [vec!["history"], vec!["show", run_id.as_str()]] {
        let line = format!("{} {}", band_exe(), args.join(" "));
        let mut cmd = Command::new("script");
        cmd.args(["-qec", &line, "/dev/null"]).current_dir(t.path());
        b.apply(&mut cmd);
        let out = cmd.output().unwrap();
        let shown = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{args:?}: {shown}");
        for seq in FROM_THE_SCRIPT {
            assert!(
                !shown.contains(seq),
                "{args:?}: {seq:?} reached the terminal: {shown:?}"
            );
        }
    }
}
