//! Shared by the integration tests: running `band` and the privileged-test gate.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

use serde_json::Value;

pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub fn band_exe() -> &'static str {
    env!("CARGO_BIN_EXE_band")
}

/// `Some(reason)` when the sandbox cannot run here.
pub fn unprivileged_reason() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let uid = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2))
        .unwrap_or("");
    if uid != "0" {
        return Some("not root".into());
    }
    if !Path::new("/usr/bin/bwrap").exists() {
        return Some("bubblewrap is not installed (/usr/bin/bwrap)".into());
    }
    let server = Path::new(band_exe()).with_file_name("band-server");
    if !server.exists() {
        return Some(format!(
            "{} is not built (cargo build --workspace)",
            server.display()
        ));
    }
    None
}

/// Skip (true) or, with `BAND_TEST_MUST_RUN=1`, fail.
pub fn skip(test: &str) -> bool {
    match unprivileged_reason() {
        None => false,
        Some(why) if std::env::var(band::proto::env::TEST_MUST_RUN).as_deref() == Ok("1") => {
            panic!(
                "{test}: cannot run ({why}) and {} is set",
                band::proto::env::TEST_MUST_RUN
            )
        }
        Some(why) => {
            eprintln!("skipped: {test}: {why}");
            true
        }
    }
}

pub struct Run {
    pub code: i32,
    /// `band run --json` output.
    pub json: Value,
    pub stderr: String,
}

/// `band run --json <args>` from the repository (skills found in ./skills).
pub fn band_run(args: &[&str], workspace: Option<&Path>) -> Run {
    let mut full = vec!["run", "--json"];
    let w;
    if let Some(dir) = workspace {
        w = dir.display().to_string();
        full.extend(["--workspace", w.as_str()]);
    }
    full.extend(args);
    let (code, stdout, stderr) = band(&full, repo());
    Run {
        code,
        json: serde_json::from_str(&stdout).unwrap_or(Value::Null),
        stderr,
    }
}

/// `band <args>` in `cwd`, sharing the test state directory (one uid pool) with band-server's own
/// tests, with no skills path, no config file and no GitHub token from the environment.
pub fn band(args: &[&str], cwd: &Path) -> (i32, String, String) {
    let out = Command::new(band_exe())
        .args(args)
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .env(
            "BAND_DATA_DIR",
            concat!(env!("CARGO_TARGET_TMPDIR"), "/band-data"),
        ) // the run ledger, out of $HOME
        .env("BAND_SERVER_STATE_DIR", "/run/band-test")
        .env("BAND_CONFIG", "/nonexistent/band-test-config.toml")
        .env_remove("BAND_SKILLS_PATH")
        .env_remove("GITHUB_TOKEN")
        .output()
        .expect("run band");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
