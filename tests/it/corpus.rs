//! The corpus in `tests/corpus/`: upstream Bands skills and packaged bands, and Anthropic Agent
//! Skills, reconstructed in their own layouts and run unchanged (see `tests/corpus/README.md` and
//! `docs/upstream.md`).
//!
//! - Absolute paths: what upstream's packaged bands say (`/tmp/**`) lints clean and runs, and
//!   means the run's own /tmp; what the sandbox can never honour is a lint error and a refused
//!   run, with the same words.

use std::path::PathBuf;

use band_test::band_snapshot;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::common::{band, output, repo, skip};

fn corpus() -> PathBuf {
    repo().join("tests/corpus")
}

/// `band run --json --target host <target> <args>` from the corpus folder.
fn run_corpus(target: &str, args: &[&str]) -> (i32, serde_json::Value, String) {
    let mut full = vec!["run", "--json", "--target", "host", target];
    full.extend(args);
    let (code, out, err) = band(&full, &corpus());
    (code, serde_json::from_str(&out).unwrap_or_default(), err)
}

#[test]
fn absolute_paths_lint_as_they_run() {
    let t = tempfile::tempdir().unwrap();
    fs_err::write(
        t.path().join("paths.band.md"),
        "---\nband: paths\ndescription: d\nallow:\n  read:\n    - \"/tmp/**\"\n    - \"/usr/share/dict/**\"\n    - \"/usr/local/lib/**\"\n    - \"/root/.config/**\"\n    - \"/etc/**\"\n    - \"/srv/data/**\"\n  write:\n    - \"/tmp/**\"\n    - \"/usr/local/**\"\n    - \"/workspace/out/**\"\ndeny:\n  read:\n    - \"/srv/data/secret/**\"\n---\n",
    )
    .unwrap();
    band_snapshot!(
        output(&["lint", "."], t.path()),
        "corpus_absolute_paths_lint"
    );
}

/// `/tmp/**` (all four of upstream's packaged bands) is the run's own /tmp: the script writes
/// and reads /tmp/x, and a host file under /tmp it did not create is not there.
#[test]
fn privileged_corpus_tmp_is_the_runs_own() {
    if skip("privileged_corpus_tmp_is_the_runs_own") {
        return;
    }
    let host = tempfile::Builder::new()
        .prefix("band-corpus-")
        .tempdir_in("/tmp")
        .unwrap();
    let secret = host.path().join("secret");
    fs_err::write(&secret, "host secret\n").unwrap();
    let secret = secret.to_string_lossy().into_owned();
    let (code, json, err) = run_corpus(
        "probes/tmp-probe/probe",
        &[&format!("--host_file={secret}")],
    );
    assert_eq!(code, 0, "{err}\n{json}");
    assert_eq!(
        json["output"],
        json!({"read_back": "written inside", "host_file_visible": false, "host_content": "", "home": "/tmp"})
    );
}

/// A rule lint calls refused is refused by the run, with the same words (band exec: no skill).
#[test]
fn privileged_corpus_refused_paths_refuse_the_run() {
    if skip("privileged_corpus_refused_paths_refuse_the_run") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    for (rule, words) in [
        (
            "read: [\"/root/.config/**\"]",
            "/root is never exposed to a run",
        ),
        (
            "write: [\"/usr/local/**\"]",
            "/usr is read-only in the sandbox",
        ),
    ] {
        let file = t.path().join("x.band.md");
        fs_err::write(
            &file,
            format!("---\nband: x\ndescription: d\nallow:\n  cli: [\"cat *\"]\n  {rule}\n---\n"),
        )
        .unwrap();
        let (lint_code, lint_out, _) = band(&["lint", "x.band.md"], t.path());
        assert_eq!(lint_code, 1, "{lint_out}");
        assert!(lint_out.contains(words), "{lint_out}");
        let (code, out, err) = band(
            &[
                "exec",
                "--json",
                "--target",
                "host",
                "--band",
                "x.band.md",
                "--",
                "cat",
                "/dev/null",
            ],
            t.path(),
        );
        let json: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
        assert_eq!(json["status"], "setup_failed", "{out}\n{err}");
        assert!(
            json["error"]["message"]
                .as_str()
                .unwrap_or("")
                .contains(words),
            "{out}"
        );
        assert_ne!(code, 0);
    }
}
