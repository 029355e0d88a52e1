//! `band setup`, `band vm`, `band doctor` and VM targets without a VM: what a user sees before
//! anything is set up (fast; the VM itself is exercised by `vm_e2e`).

use std::path::Path;

use band_test::{Band, Output, band_snapshot};

use crate::common::{band_exe, repo};

/// `band <args>` from the repository with its own data folder `data` and config file
/// `data/config.toml` (absent): nothing set up.
fn band(args: &[&str], data: &Path) -> (i32, String, String) {
    output(args, data).parts()
}

fn output(args: &[&str], data: &Path) -> Output {
    Band::new(band_exe(), data)
        .env("BAND_CONFIG", data.join("config.toml"))
        .output(args, repo())
}

#[test]
fn vm_targets_without_setup_are_user_errors_with_a_hint() {
    let t = tempfile::tempdir().expect("tmp");
    let data = t.path().to_str().expect("utf-8");
    let filters = [(data, "[DATA]")];
    band_snapshot!(
        output(
            &["run", "--target", "qemu", "text/count", "--text=x"],
            t.path()
        ),
        "qemu_not_running",
        &filters
    );
    band_snapshot!(
        output(
            &[
                "run",
                "--target",
                "ssh://me@box.invalid",
                "text/count",
                "--text=x",
            ],
            t.path(),
        ),
        "ssh_not_set_up",
        &filters
    );
    band_snapshot!(
        output(
            &["run", "--target", "lima", "text/count", "--text=x"],
            t.path()
        ),
        "lima_not_set_up",
        &filters
    );
}

#[test]
fn setup_checks_its_arguments_before_doing_anything() {
    let t = tempfile::tempdir().expect("tmp");
    let data = t.path().to_str().expect("utf-8");
    let filters = [(data, "[DATA]")];
    for (args, name) in [
        (&["setup", "--driver", "ssh"][..], "setup_ssh_without_host"),
        (
            &["setup", "--driver", "ssh", "--host", "nouser"][..],
            "setup_ssh_host_without_user",
        ),
        (
            &["setup", "--driver", "qemu", "--host", "a@b"][..],
            "setup_host_for_qemu",
        ),
        (
            &["setup", "--driver", "qemu", "--memory", "12k"][..],
            "setup_memory_too_small",
        ),
    ] {
        band_snapshot!(output(args, t.path()), name, &filters);
    }
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

/// `band doctor` on a host whose PATH holds only a few stand-ins (a `df` that answers a fixed
/// size, `bwrap`, `qemu-img`, `mkfs.ext4`, `ssh`, `band-server`): every line, human and JSON, is
/// fixed but the platform and what depends on the host itself (/dev/kvm, Landlock, AppArmor, nft
/// in /usr/sbin). As root, as CI runs it:
/// the host target and the rootless build say so (an ordinary user's lines are unit-tested and
/// seen by `vm_rootless`).
#[cfg(target_os = "linux")]
#[test]
fn doctor_whole_output() {
    use std::os::unix::fs::PermissionsExt;
    band_test::privileged!(
        (!band_test::is_root()).then(|| "the snapshot is of root's doctor".to_string())
    );
    let t = tempfile::tempdir().expect("tmp");
    let bin = t.path().join("bin");
    fs_err::create_dir(&bin).expect("mkdir");
    let df = "#!/bin/sh\nprintf 'Filesystem 1024-blocks Used Available Capacity Mounted on\\n/dev/x 100 50 62795512 35%% /\\n'\n";
    for (name, text) in [
        ("df", df),
        ("bwrap", "#!/bin/sh\n"),
        ("qemu-img", "#!/bin/sh\n"),
        ("mkfs.ext4", "#!/bin/sh\n"),
        ("ssh", "#!/bin/sh\n"),
        ("band-server", "#!/bin/sh\n"),
    ] {
        let p = bin.join(name);
        fs_err::write(&p, text).expect("write");
        fs_err::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let run = |args: &[&str]| {
        Band::new(band_exe(), t.path())
            .env("BAND_CONFIG", t.path().join("config.toml"))
            .env("PATH", &bin)
            .env("BAND_SERVER", bin.join("band-server"))
            .output(args, repo())
    };
    let platform = format!("{} {}", std::env::consts::OS, std::env::consts::ARCH);
    let mut settings = band_test::settings(&[(&platform, "[OS] [ARCH]")]);
    settings.add_filter(r"qemu-system-(x86_64|aarch64)", "qemu-system-[ARCH]");
    // The source band carries changes with every edit of the workspace.
    settings.add_filter(r"source [0-9a-f]{12}", "source [SOURCE]");
    // What depends on this host, not on the test's PATH: /dev/kvm, the kernel's Landlock and
    // AppArmor, nft in /usr/sbin. Their line (and fix) in the human form, their object in the JSON.
    for (shown, tag) in [
        ("accelerator", "[ACCELERATOR]"),
        ("landlock", "[LANDLOCK]"),
        ("user namespaces", "[USERNS]"),
        ("nft (host target)", "[NFT]"),
    ] {
        let name = band_test::regex_escape(shown);
        settings.add_filter(
            &format!(r"(?m)^(ok  |warn|FAIL|-   )  {name} .*\n( +fix: .*\n)?"),
            format!("{tag}\n"),
        );
        settings.add_filter(
            &format!(
                r#""detail": "[^"]*",\n\s*("fix": "[^"]*",\n\s*)?"level": "\w+",\n(\s*)"name": "{name}""#
            ),
            format!("\"detail\": \"{tag}\",\n${{2}}\"level\": \"{tag}\",\n${{2}}\"name\": \"{shown}\""),
        );
    }
    settings.bind(|| {
        band_test::insta::assert_snapshot!("doctor_human", run(&["doctor"]).shown());
        band_test::insta::assert_snapshot!("doctor_json", run(&["doctor", "--json"]).shown());
    });
}
