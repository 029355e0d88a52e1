//! Issue 38, item 3: a script's declared Python packages, built into a read-only environment by
//! band-server outside the sandbox, and the run's `python3` that environment's. No network: the
//! test writes a small pure-Python wheel itself and points band-server's `[deps]` at the folder
//! that holds it (`no_index`, `find_links`).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use band_test::band_snapshot;

use crate::common::{bin, sandbox_missing};

/// A folder outside `/tmp` (the sandbox has its own `/tmp`, and binds no tree under the host's):
/// where the environments are built, the wheels and the skill.
fn root() -> tempfile::TempDir {
    let t = tempfile::Builder::new()
        .prefix("band-deps-")
        .tempdir_in("/var/tmp")
        .expect("tempdir");
    fs_err::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    t
}

/// `<dir>/bandprobe-1.0-py3-none-any.whl`, a wheel whose package `bandprobe` has `VALUE`, written
/// by Python's zipfile (a wheel is a zip with its metadata and a RECORD of hashes).
fn write_wheel(dir: &Path, value: &str) -> PathBuf {
    fs_err::create_dir_all(dir).expect("mkdir");
    fs_err::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let script = r#"
import base64, hashlib, sys, zipfile
out, value = sys.argv[1], sys.argv[2]
name, ver = "bandprobe", "1.0"
files = {
    f"{name}/__init__.py": f"VALUE = {value!r}\n",
    f"{name}-{ver}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {ver}\n",
    f"{name}-{ver}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: band-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
for path, text in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
    record.append(f"{path},sha256={digest},{len(text.encode())}")
record.append(f"{name}-{ver}.dist-info/RECORD,,")
files[f"{name}-{ver}.dist-info/RECORD"] = "\n".join(record) + "\n"
with zipfile.ZipFile(out, "w") as z:
    for path, text in files.items():
        z.writestr(path, text)
"#;
    let wheel = dir.join("bandprobe-1.0-py3-none-any.whl");
    let st = Command::new("python3")
        .args(["-c", script])
        .arg(&wheel)
        .arg(value)
        .status()
        .expect("python3");
    assert!(st.success(), "the wheel was not written");
    fs_err::set_permissions(&wheel, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    wheel
}

/// The script: its PEP 723 block names `requirement`; it prints the package's value, whether a
/// write into the package's folder worked, and its interpreter's prefix.
fn script(requirement: &str) -> String {
    format!(
        r#"#!/usr/bin/env python3
# /// script
# requires-python = ">=3.8"
# dependencies = ["{requirement}"]
# ///
import json, os, sys
import bandprobe
try:
    with open(os.path.join(os.path.dirname(bandprobe.__file__), "planted.py"), "w") as f:
        f.write("x")
    wrote = "wrote"
except OSError:
    wrote = "refused"
with open(os.environ["OUTPUT_PATH"], "w") as f:
    json.dump({{"greeting": " ".join([bandprobe.VALUE, wrote, sys.prefix])}}, f)
"#
    )
}

/// The skill `dm` with the Python script `probe` as `band new-script` makes it, then `text`.
fn skill(skills: &Path, text: &str) -> PathBuf {
    fs_err::create_dir_all(skills).expect("mkdir");
    assert_eq!(bin().run(&["init", "dm"], skills).0, 0);
    let (code, out, err) = bin().run(
        &[
            "new-script",
            "--skills",
            ".",
            "dm",
            "probe",
            "--lang",
            "python",
        ],
        skills,
    );
    assert_eq!(code, 0, "{out}{err}");
    let path = skills.join("dm/scripts/probe.py");
    fs_err::write(&path, text).expect("write");
    path
}

/// The environments' folder's entries, sorted (names only).
fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs_err::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn privileged_a_declared_package_runs_from_a_read_only_env_built_once() {
    band_test::privileged!(sandbox_missing());
    let t = root();
    let wheels = t.path().join("wheels");
    write_wheel(&wheels, "probe-42");
    let envs = t.path().join("envs");
    let cfg = t.path().join("server.toml");
    fs_err::write(
        &cfg,
        format!(
            "[deps]\ndir = \"{}\"\nno_index = true\nfind_links = [\"{}\"]\n",
            envs.display(),
            wheels.display()
        ),
    )
    .expect("write");
    let skills = t.path().join("skills");
    let probe = skill(&skills, &script("bandprobe==1.0"));
    let band = bin().env("BAND_SERVER_CONFIG", &cfg);
    let run = || {
        band.run(
            &["run", "--json", "--skills", ".", "dm/probe", "--name=x"],
            &skills,
        )
    };

    // First run: built, and the script's python3 is the environment's.
    let (code, out, err) = run();
    assert_eq!(code, 0, "{out}\n{err}");
    let json: serde_json::Value = serde_json::from_str(&out).expect("json");
    let digest = json["deps_sha256"]
        .as_str()
        .expect("deps_sha256")
        .to_string();
    let env = envs.join(&digest);
    assert_eq!(
        json["output"]["greeting"],
        format!("probe-42 refused {}", env.display()),
        "{err}"
    );
    assert!(err.contains("built the environment"), "{err}");
    // Read-only on the host too, and the write did not land.
    let site = env.join("lib");
    assert!(!site.join("planted.py").exists());
    assert_eq!(fs_err::metadata(&env).expect("env").mode() & 0o7777, 0o555);
    assert_eq!(fs_err::metadata(&env).expect("env").uid(), 0);
    let before = fs_err::metadata(&env).expect("env");

    // Second run: the same environment, not built again.
    let (code, out, err) = run();
    assert_eq!(code, 0, "{out}\n{err}");
    let json: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(json["deps_sha256"], digest.as_str());
    assert!(!err.contains("built the environment"), "{err}");
    let after = fs_err::metadata(&env).expect("env");
    assert_eq!(
        (after.ino(), after.mtime(), after.mtime_nsec()),
        (before.ino(), before.mtime(), before.mtime_nsec())
    );

    // A version the index does not have: refused before the sandbox, naming the package and the
    // step, and nothing half-built left behind.
    let listed = entries(&envs);
    fs_err::write(&probe, script("bandprobe==9.9")).expect("write");
    let out = band.output(&["run", "--skills", ".", "dm/probe", "--name=x"], &skills);
    band_snapshot!(
        out,
        "missing_package",
        &[(wheels.to_str().expect("utf-8"), "[WHEELS]")]
    );
    assert_eq!(entries(&envs), listed);
}

/// `band wrap --with PKG` writes the packages only the skill's prose names into a
/// `requirements.txt` at its root, which the lock records as a package set; an option is refused.
#[test]
fn wrap_with_records_the_packages_prose_names() {
    let ws = tempfile::tempdir().expect("tempdir");
    band_test::copy_dir(
        &crate::common::repo().join("tests/corpus/agent/pdf"),
        &ws.path().join("pdf"),
    );
    let (code, out, err) = bin().run(
        &[
            "wrap",
            "pdf",
            "--write",
            "--with",
            "pypdf",
            "--with",
            "reportlab>=4",
        ],
        ws.path(),
    );
    assert_eq!(code, 0, "{out}{err}");
    let req = fs_err::read_to_string(ws.path().join("pdf/requirements.txt")).expect("read");
    assert!(req.ends_with("\npypdf\nreportlab>=4\n"), "{req}");
    let lock = fs_err::read_to_string(ws.path().join("pdf/band.lock")).expect("read");
    assert!(
        lock.lines()
            .any(|l| l.starts_with("deps ") && l.ends_with(" \"requirements.txt\"")),
        "{lock}"
    );
    let out = bin().output(&["wrap", "pdf", "--with=-r other.txt"], ws.path());
    band_snapshot!(out, "wrap_with_an_option");
}
