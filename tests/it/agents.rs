//! The agent-facing command line: `band <skill>/<script> --key=value` is `band run`.

use band_test::band_snapshot;

use crate::common::{band, output, repo, sandbox_missing};
use pretty_assertions::assert_eq;

#[test]
fn shortcut_help_shows_the_scripts_arguments() {
    let help = output(&["text/count", "--help"], repo());
    band_snapshot!(help, "shortcut_help");
    assert_eq!(help.stdout, band(&["help", "text/count"], repo()).1);
}

#[test]
fn a_word_without_a_slash_is_not_a_script() {
    band_snapshot!(output(&["lnit", "x"], repo()), "not_a_command");
}

#[test]
fn shortcut_checks_input_like_band_run() {
    // Refused before the sandbox starts, so this needs no privileges.
    band_snapshot!(
        output(&["text/summary", "--text=x", "--sentences=0"], repo()),
        "shortcut_input_invalid"
    );
    band_snapshot!(output(&["text/nope"], repo()), "shortcut_unknown_script");
}

#[test]
fn privileged_shortcut_runs_like_band_run() {
    band_test::privileged!(sandbox_missing());
    let short = band(&["text/count", "--text=one two three"], repo());
    let long = band(&["run", "text/count", "--text=one two three"], repo());
    assert_eq!(short.0, 0, "{}", short.2);
    assert_eq!(
        short.1,
        "{\n  \"chars\": 13,\n  \"lines\": 1,\n  \"words\": 3\n}\n"
    );
    assert_eq!(short.1, long.1);
    // Band's own flags work before the input, as with band run.
    let (code, out, err) = band(&["text/count", "--json", "--text=x"], repo());
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["output"]["words"], 1);
}
