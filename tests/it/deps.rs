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
/// write into the package's folder worked, and its interpreter's prefix. Its `#!` line is uv's
/// (`uv init --script`): band starts it with the environment's python3, not uv.
fn script(requirement: &str) -> String {
    format!(
        r#"#!/usr/bin/env -S uv run --script
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

/// `bandprobe-1.0.0.tgz` made by `npm pack` of a package this writes (`VALUE` is `value`), in
/// `<dir>/bandprobe/-/`, where a registry serves a package's tarballs; and its `integrity`.
fn pack_node_package(t: &Path, value: &str) -> (PathBuf, String) {
    use base64::Engine as _;
    use sha2::Digest as _;
    let src = t.join("src/bandprobe");
    fs_err::create_dir_all(&src).expect("mkdir");
    fs_err::write(
        src.join("package.json"),
        r#"{"name":"bandprobe","version":"1.0.0","main":"index.js"}"#,
    )
    .expect("write");
    fs_err::write(
        src.join("index.js"),
        format!("module.exports = {{ VALUE: {value:?} }};\n"),
    )
    .expect("write");
    let out = t.join("registry/bandprobe/-");
    fs_err::create_dir_all(&out).expect("mkdir");
    let st = Command::new("npm")
        .args(["pack", "--silent", "--pack-destination"])
        .arg(&out)
        .arg("--cache")
        .arg(t.join("npm-cache"))
        .arg(&src)
        .current_dir(t)
        .status()
        .expect("npm");
    assert!(st.success(), "npm pack failed");
    let tgz = out.join("bandprobe-1.0.0.tgz");
    let bytes = fs_err::read(&tgz).expect("read");
    let integrity = format!(
        "sha512-{}",
        base64::engine::general_purpose::STANDARD.encode(sha2::Sha512::digest(&bytes))
    );
    (tgz, integrity)
}

/// A registry on loopback that serves `tgz` at `/bandprobe/-/bandprobe-1.0.0.tgz` (404 for the
/// rest), and the paths asked of it.
fn serve_registry(tgz: &Path) -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = asked.clone();
    let body = fs_err::read(tgz).expect("read");
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut reader = BufReader::new(conn.try_clone().expect("clone"));
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).map_or(true, |n| n == 0) || h.trim().is_empty() {
                    break;
                }
            }
            log.lock().expect("lock").push(path.clone());
            let (status, data): (&str, &[u8]) = if path == "/bandprobe/-/bandprobe-1.0.0.tgz" {
                ("200 OK", &body)
            } else {
                ("404 Not Found", b"{}")
            };
            let _ = write!(
                conn,
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n",
                data.len()
            );
            let _ = conn.write_all(data);
        }
    });
    (port, asked)
}

/// The skill `dm` whose script `probe` is `scripts/probe.js`, allowed to run with node, with a
/// `package.json` beside it (and `lock`, its package-lock.json, if any).
fn node_skill(skills: &Path, lock: Option<&str>) -> PathBuf {
    let script = r#"const fs = require("fs");
const path = require("path");
const probe = require("bandprobe");
const at = require.resolve("bandprobe");
let wrote;
try {
  fs.writeFileSync(path.join(path.dirname(at), "planted.js"), "x");
  wrote = "wrote";
} catch (e) {
  wrote = "refused";
}
import("bandprobe").then((m) => {
  fs.writeFileSync(
    process.env.OUTPUT_PATH,
    JSON.stringify({ greeting: [probe.VALUE, m.default.VALUE, wrote, at].join(" ") })
  );
});
"#;
    let py = skill(skills, "");
    let scripts = py.parent().expect("scripts").to_path_buf();
    fs_err::remove_file(&py).expect("rm");
    fs_err::write(scripts.join("probe.js"), script).expect("write");
    let band = scripts.join("probe.band.md");
    let text = fs_err::read_to_string(&band)
        .expect("read")
        .replace(
            "python3 /skill/scripts/probe.py",
            "node /skill/scripts/probe.js",
        )
        .replace("maxMemoryBytes: 128m", "maxMemoryBytes: 1g")
        .replace("maxPids: 16", "maxPids: 64");
    fs_err::write(&band, text).expect("write");
    fs_err::write(
        scripts.join("package.json"),
        r#"{"name":"probe","version":"1.0.0","dependencies":{"bandprobe":"^1.0.0"}}"#,
    )
    .expect("write");
    if let Some(lock) = lock {
        fs_err::write(scripts.join("package-lock.json"), lock).expect("write");
    }
    scripts
}

/// The `package-lock.json` of the probe: `bandprobe` resolved from a port of loopback where no
/// registry is (band-server's registry replaces its host), pinned by `integrity`.
fn node_lock(integrity: &str) -> String {
    format!(
        r#"{{
  "name": "probe",
  "version": "1.0.0",
  "lockfileVersion": 3,
  "requires": true,
  "packages": {{
    "": {{ "name": "probe", "version": "1.0.0", "dependencies": {{ "bandprobe": "^1.0.0" }} }},
    "node_modules/bandprobe": {{
      "version": "1.0.0",
      "resolved": "http://127.0.0.1:1/bandprobe/-/bandprobe-1.0.0.tgz",
      "integrity": "{integrity}"
    }}
  }}
}}
"#
    )
}

#[test]
fn privileged_a_node_script_requires_its_locked_package_from_a_read_only_node_modules() {
    band_test::privileged!(sandbox_missing());
    let t = root();
    let (tgz, integrity) = pack_node_package(t.path(), "node-42");
    let (port, asked) = serve_registry(&tgz);
    let envs = t.path().join("envs");
    let cfg = t.path().join("server.toml");
    fs_err::write(
        &cfg,
        format!(
            "[deps]\ndir = \"{}\"\nnpm_registry = \"http://127.0.0.1:{port}/\"\n",
            envs.display()
        ),
    )
    .expect("write");
    let skills = t.path().join("skills");
    let lock = node_lock(&integrity);
    let scripts = node_skill(&skills, Some(&lock));
    let band = bin().env("BAND_SERVER_CONFIG", &cfg);
    let run = || {
        band.run(
            &["run", "--json", "--skills", ".", "dm/probe", "--name=x"],
            &skills,
        )
    };

    // First run: built from band-server's registry (not the host the lock names), and the
    // script's require and import find it beside its package.json, read-only.
    let (code, out, err) = run();
    assert_eq!(code, 0, "{out}\n{err}");
    let json: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        json["output"]["greeting"],
        "node-42 node-42 refused /skill/scripts/node_modules/bandprobe/index.js",
        "{err}"
    );
    let digest = band::deps::sha256_hex(lock.as_bytes());
    assert_eq!(json["deps_sha256"], digest.as_str());
    assert!(err.contains("built the node_modules"), "{err}");
    assert_eq!(
        *asked.lock().expect("lock"),
        ["/bandprobe/-/bandprobe-1.0.0.tgz"]
    );
    let env = envs.join(&digest);
    let modules = env.join("node_modules/bandprobe");
    assert!(modules.join("index.js").is_file());
    assert!(!modules.join("planted.js").exists());
    assert_eq!(
        fs_err::metadata(&modules).expect("env").mode() & 0o7777,
        0o555
    );
    assert_eq!(fs_err::metadata(&env).expect("env").uid(), 0);
    let before = fs_err::metadata(&env).expect("env");

    // Second run: the same node_modules, not built again, nothing fetched.
    let (code, out, err) = run();
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(!err.contains("built the node_modules"), "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(json["deps_sha256"], digest.as_str());
    assert_eq!(asked.lock().expect("lock").len(), 1);
    let after = fs_err::metadata(&env).expect("env");
    assert_eq!(
        (after.ino(), after.mtime(), after.mtime_nsec()),
        (before.ino(), before.mtime(), before.mtime_nsec())
    );

    // A lock whose hash is not the file's: refused at the install step, naming the package,
    // nothing half-built left behind.
    let listed = entries(&envs);
    let bad = integrity
        .replacen("sha512-", "sha512-A", 1)
        .replacen('=', "", 1);
    fs_err::write(scripts.join("package-lock.json"), node_lock(&bad)).expect("write");
    let out = band.output(&["run", "--skills", ".", "dm/probe", "--name=x"], &skills);
    let host = format!("127.0.0.1:{port}");
    band_snapshot!(
        out,
        "node_integrity_mismatch",
        &[
            (host.as_str(), "127.0.0.1:[PORT]"),
            (bad.as_str(), "[LOCKED]"),
            (integrity.as_str(), "[SERVED]"),
        ]
    );
    assert_eq!(entries(&envs), listed);

    // No lock: refused before anything is fetched, with how to make one.
    let fetched = asked.lock().expect("lock").len();
    fs_err::remove_file(scripts.join("package-lock.json")).expect("rm");
    let out = band.output(&["run", "--skills", ".", "dm/probe", "--name=x"], &skills);
    band_snapshot!(out, "node_without_a_lock");
    assert_eq!(asked.lock().expect("lock").len(), fetched);
}

/// A script with no block of its own, in a skill whose `pyproject.toml` names `bandprobe` and
/// whose `uv.lock` (as uv 0.5+ writes it) pins it to the test's wheel by its real sha256: the
/// lock is the resolved set (nothing is resolved: band-server keeps no resolved lock for it), and
/// a wheel that is not the one the lock pins is refused at install.
#[test]
fn privileged_a_uv_lock_beside_a_pyproject_is_installed_as_it_pins() {
    band_test::privileged!(sandbox_missing());
    let t = root();
    let wheels = t.path().join("wheels");
    let wheel = write_wheel(&wheels, "uv-7");
    let sha = band::deps::sha256_hex(&fs_err::read(&wheel).expect("wheel"));
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
    // The script of the PEP 723 test without its block (its `#!` line a plain python3's).
    let text = script("x")
        .lines()
        .filter(|l| !l.starts_with("# "))
        .collect::<Vec<_>>()
        .join("\n")
        .replace(
            "#!/usr/bin/env -S uv run --script",
            "#!/usr/bin/env python3",
        );
    skill(&skills, &(text + "\n"));
    let dm = skills.join("dm");
    fs_err::write(
        dm.join("pyproject.toml"),
        "[project]\nname = \"dm\"\nversion = \"0.1.0\"\nrequires-python = \">=3.8\"\ndependencies = [\"bandprobe>=1\"]\n",
    )
    .expect("write");
    let uv_lock = |hash: &str| {
        format!(
            r#"version = 1
requires-python = ">=3.8"

[[package]]
name = "bandprobe"
version = "1.0"
source = {{ registry = "https://pypi.org/simple" }}
wheels = [
    {{ url = "https://files.pythonhosted.org/packages/py3/b/bandprobe/bandprobe-1.0-py3-none-any.whl", hash = "sha256:{hash}", size = 700 }},
]

[[package]]
name = "dm"
version = "0.1.0"
source = {{ virtual = "." }}
dependencies = [
    {{ name = "bandprobe" }},
]

[package.metadata]
requires-dist = [{{ name = "bandprobe", specifier = ">=1" }}]
"#
        )
    };
    fs_err::write(dm.join("uv.lock"), uv_lock(&sha)).expect("write");
    let band = bin().env("BAND_SERVER_CONFIG", &cfg);
    let run = || {
        band.run(
            &["run", "--json", "--skills", ".", "dm/probe", "--name=x"],
            &skills,
        )
    };
    let (code, out, err) = run();
    assert_eq!(code, 0, "{out}\n{err}");
    let json: serde_json::Value = serde_json::from_str(&out).expect("json");
    // The environment is named by the lock band made of the uv.lock: the one wheel, its hash.
    let lock = format!("bandprobe==1.0 --hash=sha256:{sha}\n");
    let digest = band::deps::sha256_hex(lock.as_bytes());
    assert_eq!(json["deps_sha256"], digest.as_str(), "{err}");
    assert_eq!(
        json["output"]["greeting"],
        format!("uv-7 refused {}", envs.join(&digest).display()),
        "{err}"
    );
    assert!(
        !entries(&envs).contains(&"resolved".to_string()),
        "{:?}",
        entries(&envs)
    );

    // The lock pins another file: pip refuses the wheel it finds, and the run is refused before
    // the sandbox, naming the package.
    fs_err::write(dm.join("uv.lock"), uv_lock(&"0".repeat(64))).expect("write");
    let (code, out, err) = run();
    assert_ne!(code, 0, "{out}\n{err}");
    let json: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(json["error"]["layer"], "deps", "{out}");
    let message = json["error"]["message"].as_str().expect("message");
    assert!(
        message.starts_with("building the environment for scripts/probe.py: installing its packages: pip: THESE PACKAGES DO NOT MATCH THE HASHES"),
        "{message}"
    );
    assert_eq!(
        json["error"]["hint"],
        "a file on the index does not match the hash uv.lock pins it to; check the index, or run `uv lock` again"
    );
}
