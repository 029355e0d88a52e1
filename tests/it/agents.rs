//! The agent-facing command line: `band <skill>/<script> --key=value` is `band run`.

use crate::common::{band, repo, skip};
use pretty_assertions::assert_eq;

#[test]
fn shortcut_help_shows_the_scripts_arguments() {
    let (code, out, err) = band(&["text/count", "--help"], repo());
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, band(&["help", "text/count"], repo()).1);
    assert!(out.contains("--text <string> (required)"), "{out}");
}

#[test]
fn a_word_without_a_slash_is_not_a_script() {
    let (code, _, err) = band(&["lnit", "x"], repo());
    assert_eq!(code, 2);
    assert!(err.contains("`lnit` is not a band command"), "{err}");
    assert!(
        err.contains("hint: `band --help` lists the commands"),
        "{err}"
    );
}

#[test]
fn shortcut_checks_input_like_band_run() {
    // Refused before the sandbox starts, so this needs no privileges.
    let (code, _, err) = band(&["text/summary", "--text=x", "--sentences=0"], repo());
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("input_invalid"), "{err}");
    let (code, _, err) = band(&["text/nope"], repo());
    assert_eq!(code, 2);
    assert!(err.contains("skill `text` has no script `nope`"), "{err}");
}

#[test]
fn privileged_shortcut_runs_like_band_run() {
    if skip("privileged_shortcut_runs_like_band_run") {
        return;
    }
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
