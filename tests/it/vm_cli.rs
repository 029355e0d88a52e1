//! `band setup`, `band vm`, `band doctor` and VM targets without a VM: what a user sees before
//! anything is set up (fast; the VM itself is exercised by tests/vm_e2e.rs).

use std::path::Path;

use band_test::Band;

use crate::common::{band_exe, repo};

/// `band <args>` from the repository with its own data folder `data` and config file
/// `data/config.toml` (absent): nothing set up.
fn band(args: &[&str], data: &Path) -> (i32, String, String) {
    Band::new(band_exe(), data)
        .env("BAND_CONFIG", data.join("config.toml"))
        .run(args, repo())
}

#[test]
fn vm_targets_without_setup_are_user_errors_with_a_hint() {
    let t = tempfile::tempdir().expect("tmp");
    let (code, _, err) = band(
        &["run", "--target", "qemu", "text/count", "--text=x"],
        t.path(),
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("not running") && err.contains("hint: run `band vm start`"),
        "{err}"
    );
    let (code, _, err) = band(
        &[
            "run",
            "--target",
            "ssh://me@box.invalid",
            "text/count",
            "--text=x",
        ],
        t.path(),
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("has not been set up")
            && err.contains("band setup --driver ssh --host me@box.invalid:22"),
        "{err}"
    );
    let (code, _, err) = band(
        &["run", "--target", "lima", "text/count", "--text=x"],
        t.path(),
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("band setup --driver lima"), "{err}");
}

#[test]
fn setup_checks_its_arguments_before_doing_anything() {
    let t = tempfile::tempdir().expect("tmp");
    let (code, _, err) = band(&["setup", "--driver", "ssh"], t.path());
    assert_eq!(code, 2);
    assert!(err.contains("--driver ssh needs --host"), "{err}");
    let (code, _, err) = band(&["setup", "--driver", "ssh", "--host", "nouser"], t.path());
    assert_eq!(code, 2);
    assert!(err.contains("not user@host"), "{err}");
    let (code, _, err) = band(&["setup", "--driver", "qemu", "--host", "a@b"], t.path());
    assert_eq!(code, 2);
    assert!(err.contains("--host is for --driver ssh"), "{err}");
    let (code, _, err) = band(&["setup", "--driver", "qemu", "--memory", "12k"], t.path());
    assert_eq!(code, 2);
    assert!(err.contains("too small"), "{err}");
    assert!(
        !t.path().join("vm/images").exists(),
        "nothing may be built after a usage error"
    );
}

#[test]
fn vm_status_of_nothing_is_absent() {
    let t = tempfile::tempdir().expect("tmp");
    let (code, out, err) = band(&["vm", "status", "--driver", "qemu", "--json"], t.path());
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["state"], "absent");
    assert_eq!(v["image"], serde_json::Value::Null);
    let (code, _, err) = band(&["vm", "ssh", "--driver", "qemu"], t.path());
    assert_eq!(code, 2, "{err}");
    // Stopping or destroying nothing is not an error.
    assert_eq!(band(&["vm", "stop", "--driver", "qemu"], t.path()).0, 0);
    assert_eq!(band(&["vm", "destroy", "--driver", "qemu"], t.path()).0, 0);
}

#[test]
fn doctor_reports_every_check_as_json() {
    let t = tempfile::tempdir().expect("tmp");
    let (code, out, err) = band(&["doctor", "--json"], t.path());
    assert!(code == 0 || code == 1, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    let checks = v["checks"].as_array().expect("checks");
    let names: Vec<&str> = checks.iter().filter_map(|c| c["name"].as_str()).collect();
    for want in ["host", "accelerator", "ssh-keygen", "free disk", "qemu VM"] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    for c in checks {
        assert!(
            ["ok", "warn", "fail", "skip"].contains(&c["level"].as_str().unwrap_or("")),
            "{c}"
        );
        if c["level"] == "fail" {
            assert!(
                c["fix"].is_string(),
                "a failed check says how to fix it: {c}"
            );
        }
    }
    assert_eq!(v["ok"], code == 0);
}
