//! Execution targets: upstream's names in `execution.target`, the user config's `[targets]` and
//! `force_target`, and `band mcp --target` (docs/vm.md, "Choosing a target").

use std::path::Path;

use band_test::{Band, band_snapshot};
use serde_json::{Value, json};

use crate::common::{bin, noted_pids, noting_server, repo, sandbox_missing};

/// skills/text copied to `dir/skills/text` with `execution.target: <target>` (no lock: the band
/// changed).
pub(crate) fn text_with_target(dir: &Path, target: &str) {
    let skill = dir.join("skills/text");
    band_test::copy_dir(&repo().join("skills/text"), &skill);
    fs_err::remove_file(skill.join("band.lock")).expect("rm lock");
    let band_md = skill.join("BAND.md");
    let text = fs_err::read_to_string(&band_md).expect("read");
    let text = text.replacen(
        "version: 1\n",
        &format!("version: 1\nexecution:\n  target: {target}\n"),
        1,
    );
    fs_err::write(&band_md, text).expect("write");
}

/// [`text_with_target`] in a temporary folder, and `band` reading `config` as its config file.
fn upstream_text(target: &str, config: &str) -> (tempfile::TempDir, Band) {
    let t = tempfile::tempdir().expect("tmp");
    text_with_target(t.path(), target);
    let file = t.path().join("config.toml");
    fs_err::write(&file, config).expect("write");
    let band = bin().env("BAND_CONFIG", &file);
    (t, band)
}

fn explain_json(band: &Band, dir: &Path) -> Value {
    let (code, out, err) = band.run(
        &["explain", "--json", "--skills", "skills", "text/count"],
        dir,
    );
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).expect("json");
    v[0]["run_target"].clone()
}

#[test]
fn an_upstream_local_lima_band_runs_on_the_host_when_the_config_maps_lima_to_host() {
    let (t, band) = upstream_text("local-lima", "[targets]\nlima = \"host\"\n");
    assert_eq!(
        explain_json(&band, t.path()),
        json!({"target": "host", "reason": {"by": "band_mapped", "from": "lima"}})
    );
    // The run goes to the host (BAND_SERVER points nowhere, so it stops there) and says why.
    let mut cmd = band.command(
        &["run", "--skills", "skills", "text/count", "--text=hi"],
        t.path(),
    );
    cmd.env("BAND_SERVER", "/nonexistent/band-server");
    // Not a word of limactl: the host is all it tries.
    band_snapshot!(
        band_test::Output::of(&mut cmd),
        "target_lima_mapped_to_host_run"
    );
}

#[test]
fn without_a_mapping_the_band_target_stands_and_force_target_wins_over_it() {
    let (t, band) = upstream_text("local-lima", "");
    assert_eq!(
        explain_json(&band, t.path()),
        json!({"target": "lima", "reason": {"by": "band"}})
    );
    let (t, band) = upstream_text("local-lima", "target = \"qemu\"\nforce_target = \"host\"\n");
    assert_eq!(
        explain_json(&band, t.path()),
        json!({"target": "host", "reason": {"by": "force_target"}})
    );
}

#[test]
fn explain_says_which_target_and_why() {
    let (t, band) = upstream_text("local-lima", "[targets]\nlocal-lima = \"host\"\n");
    band_snapshot!(
        band.output(&["explain", "--skills", "skills", "text/count"], t.path()),
        "target_explain_mapped"
    );
}

#[test]
fn an_unsupported_upstream_target_is_a_located_error() {
    let (t, band) = upstream_text("cloudflare", "");
    band_snapshot!(
        band.output(&["lint", "skills/text"], t.path()),
        "target_unsupported_lint"
    );
}

#[test]
fn local_dangerously_runs_sandboxed_on_the_host_and_lint_says_so() {
    let (t, band) = upstream_text("local-dangerously", "");
    band_snapshot!(
        band.output(&["lint", "skills/text"], t.path()),
        "target_local_dangerously_lint"
    );
    assert_eq!(
        explain_json(&band, t.path()),
        json!({"target": "host", "reason": {"by": "band"}})
    );
}

#[test]
fn a_bad_target_in_the_config_names_the_file_and_line() {
    let (t, band) = upstream_text("local-lima", "\n[targets]\nlima = \"local-docker\"\n");
    let dir = t.path().display().to_string();
    band_snapshot!(
        band.output(&["explain", "--skills", "skills", "text/count"], t.path()),
        "target_config_unsupported",
        &[(dir.as_str(), "[DIR]")]
    );
}

#[test]
fn mcp_refuses_a_bad_target_before_serving() {
    let t = tempfile::tempdir().expect("tmp");
    band_snapshot!(
        bin().output(&["mcp", "--target", "cloudflare"], t.path()),
        "target_mcp_unsupported"
    );
}

/// As root, `band run` starts band-server before it reads the skill, on the guess that the target
/// is the host (issue 17). A band that names a VM drops it: it gets no request and is gone when
/// band exits. `--target host` uses it (one start, one request); `--target qemu` starts none.
#[test]
fn privileged_a_band_server_started_on_a_guess_gets_no_request_when_the_target_is_a_vm() {
    band_test::privileged!(sandbox_missing());
    let (t, band) = upstream_text("qemu", "");
    let (starts, sent) = (t.path().join("starts"), t.path().join("sent"));
    let wrapper = noting_server(t.path(), &band);
    let band = band
        .env("BAND_SERVER", &wrapper)
        .env("BAND_DATA_DIR", t.path().join("data"));
    let started = || noted_pids(&starts);
    let sent_bytes = || fs_err::read(&sent).map(|b| b.len()).unwrap_or(0);
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "--skills", "skills", "text/count", "--text=a b"];
        args.extend_from_slice(extra);
        band.output(&args, t.path())
    };

    // The band names qemu, which is not set up here: the run fails, and the band-server started
    // on the guess got nothing and is gone (band waited for it).
    band_snapshot!(run(&[]), "target_qemu_not_running");
    let first = started();
    assert_eq!(
        first.len(),
        1,
        "one band-server started on the guess: {first:?}"
    );
    assert_eq!(
        sent_bytes(),
        0,
        "the guessed band-server was sent a request"
    );
    assert!(
        !Path::new(&format!("/proc/{}", first[0])).exists(),
        "the guessed band-server {} outlived band",
        first[0]
    );

    // `--target qemu`: no guess, no start.
    let (code, _, err) = run(&["--target", "qemu"]).parts();
    assert_eq!(code, 2, "{err}");
    assert_eq!(started().len(), 1, "a band-server started for a VM run");

    // `--target host`: the band-server started early serves the run; no second start.
    let (code, out, err) = run(&["--target", "host", "--json"]).parts();
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(started().len(), 2, "one start for the host run");
    assert!(
        sent_bytes() > 0,
        "the host run's request never reached band-server"
    );
}
