//! What a user sees of `band run`, whole: stdout, stderr and the exit code, as insta snapshots
//! (with band-test's filters for durations, ids and hashes). The refusals need no sandbox
//! (nothing starts); `privileged_*` runs need root, bubblewrap and a built band-server.

use band_test::band_snapshot;

use crate::common::{bin, output, repo, sandbox_missing};

#[test]
fn run_of_an_unknown_skill_is_a_user_error() {
    let out = bin()
        .env("XDG_DATA_HOME", "/nonexistent/xdg")
        .output(&["run", "nosuch/x"], repo());
    band_snapshot!(out, "unknown_skill");
    band_snapshot!(output(&["run", "text/nosuch"], repo()), "unknown_script");
}

#[test]
fn run_with_bad_input_is_refused_before_the_sandbox() {
    band_snapshot!(
        output(&["run", "text/count", "--input", "{bad"], repo()),
        "input_not_json"
    );
    band_snapshot!(
        output(
            &["run", "text/summary", "--text=x", "--sentences=0"],
            repo()
        ),
        "input_invalid"
    );
    band_snapshot!(
        output(
            &["run", "--json", "text/summary", "--text=x", "--sentences=0"],
            repo()
        ),
        "input_invalid_json"
    );
}

#[test]
fn run_without_a_required_secret_is_refused() {
    band_snapshot!(
        output(&["run", "github/repo-view", "--repo=octo/demo"], repo()),
        "missing_secret"
    );
}

/// Root starts band-server itself; without root band goes through `sudo -n`, and what the user
/// sees then depends on the machine's sudo.
#[test]
fn privileged_run_without_band_server_is_a_user_error() {
    let not_root = (!band_test::is_root()).then(|| "not root".to_string());
    band_test::privileged!(not_root);
    let out = bin()
        .env("BAND_SERVER", "/nonexistent/band-server")
        .output(&["run", "text/count", "--text=a b"], repo());
    band_snapshot!(out, "no_server");
}

#[test]
fn privileged_run_human_output() {
    band_test::privileged!(sandbox_missing());
    band_snapshot!(
        output(&["run", "text/count", "--text=one two three"], repo()),
        "run_human"
    );
}

#[test]
fn privileged_run_json_output() {
    band_test::privileged!(sandbox_missing());
    band_snapshot!(
        output(
            &["run", "--json", "text/count", "--text=one two three"],
            repo()
        ),
        "run_json"
    );
}

#[test]
fn privileged_run_trace_output() {
    band_test::privileged!(sandbox_missing());
    band_snapshot!(
        output(
            &[
                "run",
                "--trace",
                "json-transform/apply",
                "--filter=.a",
                r#"--data={"a": 1}"#
            ],
            repo()
        ),
        "run_trace"
    );
}

#[test]
fn privileged_run_denied_command() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tmp");
    assert_eq!(output(&["init", "demo"], t.path()).code, 0);
    fs_err::write(
        t.path().join("demo/scripts/hello.sh"),
        "#!/bin/sh\nset -e\njq . \"$INPUT_PATH\"\n",
    )
    .expect("write");
    let args = ["run", "--skills", ".", "demo/hello", "--name=x"];
    band_snapshot!(output(&args, t.path()), "run_denied");
    let json = ["run", "--json", "--skills", ".", "demo/hello", "--name=x"];
    band_snapshot!(output(&json, t.path()), "run_denied_json");
}

/// The output is checked against the script's output schema once the run is over: a document
/// that does not match is `output_invalid` (band's exit code 4), naming the schema and what is
/// wrong; the same script writing a matching one is `ok`.
#[test]
fn privileged_run_output_that_breaks_its_schema() {
    band_test::privileged!(sandbox_missing());
    let t = tempfile::tempdir().expect("tmp");
    assert_eq!(output(&["init", "demo"], t.path()).code, 0);
    let script = t.path().join("demo/scripts/hello.sh");
    fs_err::write(
        &script,
        "#!/bin/sh\nprintf '{\"greeting\":42}\\n' > \"$OUTPUT_PATH\"\n",
    )
    .expect("write");
    let args = ["run", "--skills", ".", "demo/hello", "--name=x"];
    band_snapshot!(output(&args, t.path()), "run_output_invalid");
    let json = ["run", "--json", "--skills", ".", "demo/hello", "--name=x"];
    band_snapshot!(output(&json, t.path()), "run_output_invalid_json");
    fs_err::write(
        &script,
        "#!/bin/sh\nprintf '{\"greeting\":\"hi\"}\\n' > \"$OUTPUT_PATH\"\n",
    )
    .expect("write");
    let ok = output(&args, t.path());
    assert_eq!(ok.code, 0, "{ok:?}");
}
