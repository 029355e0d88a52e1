//! Shared by the modules: the built `band` in the test environment, and the privileged-test gate
//! (the helpers themselves are in the `band-test` crate).

use std::path::{Path, PathBuf};

use band_test::{Band, Output};
use serde_json::Value;

pub(crate) fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub(crate) fn band_exe() -> &'static str {
    env!("CARGO_BIN_EXE_band")
}

/// Where the tests' run ledger goes (out of `$HOME`).
pub(crate) const DATA_DIR: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/band-data");

/// `band` in the test environment: the shared state directory (one uid pool with band-server's
/// own tests), the ledger in [`DATA_DIR`], no config file, no skills path, no GitHub token.
pub(crate) fn bin() -> Band {
    Band::new(band_exe(), DATA_DIR)
}

/// Write an executable script (mode 0755) at `path`: a stand-in, in the test's own folder.
pub(crate) fn write_script(path: &Path, text: &str) {
    fs_err::write(path, text).expect("write");
    fs_err::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
}

/// The skill `demo` as `band init` writes it in `skills` (made if missing), with `script` as its
/// `scripts/hello.sh`, each `(path, text)` of `files` written into it, and its band's
/// `allow.cli` empty: a skill for `band learn` to draft a band for. Returns the skill's folder.
pub(crate) fn unbanded_demo(skills: &Path, script: &str, files: &[(&str, &str)]) -> PathBuf {
    fs_err::create_dir_all(skills).expect("mkdir");
    assert_eq!(bin().run(&["init", "demo"], skills).0, 0);
    let root = skills.join("demo");
    fs_err::write(root.join("scripts/hello.sh"), script).expect("write");
    for (path, text) in files {
        let file = root.join(path);
        fs_err::create_dir_all(file.parent().expect("a file of the skill has a folder"))
            .expect("mkdir");
        fs_err::write(file, text).expect("write");
    }
    let band_md = root.join("BAND.md");
    let text = fs_err::read_to_string(&band_md).expect("read");
    let text = band::learn::edit::set_list(&text, "allow", "cli", &[]).expect("edit");
    fs_err::write(&band_md, text).expect("write");
    root
}

/// band-server behind a script in `dir` that notes each start in `dir/starts` and keeps what it
/// was sent in `dir/sent`: a copy of its input goes through a fifo, and the script becomes
/// band-server (so nothing else holds band's end of its output, whose end band waits for).
/// Returns the script, for `BAND_SERVER`.
pub(crate) fn noting_server(dir: &Path, band: &Band) -> PathBuf {
    let wrapper = dir.join("band-server");
    write_script(
        &wrapper,
        &format!(
            "#!/bin/sh\necho $$ >> '{dir}/starts'\nf='{dir}/fifo.'$$\nmkfifo \"$f\"\n\
             exec 3<&0\ntee -a '{dir}/sent' <&3 > \"$f\" &\nexec '{real}' \"$@\" < \"$f\" 3<&-\n",
            dir = dir.display(),
            real = band.bin_dir().join("band-server").display()
        ),
    );
    wrapper
}

/// The pids a wrapper script noted in `file`, one per line (none while it is missing).
pub(crate) fn noted_pids(file: &Path) -> Vec<u32> {
    fs_err::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|l| l.parse().expect("a pid"))
        .collect()
}

/// Why the real sandbox cannot run here (it needs root, bubblewrap and a built band-server), for
/// the gate of privileged tests: `band_test::privileged!(sandbox_missing())`.
pub(crate) fn sandbox_missing() -> Option<String> {
    bin().sandbox_missing()
}

pub(crate) struct Run {
    pub(crate) code: i32,
    /// `band run --json` output.
    pub(crate) json: Value,
    pub(crate) stderr: String,
}

/// `band run --json <args>` from the repository (skills found in ./skills).
pub(crate) fn band_run(args: &[&str], workspace: Option<&Path>) -> Run {
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

/// `band <args>` in `cwd`: `(code, stdout, stderr)`.
pub(crate) fn band(args: &[&str], cwd: &Path) -> (i32, String, String) {
    bin().run(args, cwd)
}

/// `band <args>` in `cwd`, for a whole-output snapshot.
pub(crate) fn output(args: &[&str], cwd: &Path) -> Output {
    bin().output(args, cwd)
}

#[test]
fn the_must_run_variable_is_bands() {
    assert_eq!(band_test::MUST_RUN, band::proto::env::TEST_MUST_RUN);
}

/// `openssl <args>` in `dir`, which must succeed.
pub(crate) fn openssl(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl (package openssl)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA of the test's own and a certificate for `name` it signed, in `dir` (`ca.crt`,
/// `srv.crt`, `srv.key`).
pub(crate) fn make_ca_and_cert(dir: &Path, name: &str) {
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
    openssl(
        dir,
        &[
            &["req", "-x509", "-nodes", "-days", "2"][..],
            &ec,
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
                "-subj",
                "/CN=band test CA",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
        ]
        .concat(),
    );
    openssl(
        dir,
        &[
            &["req", "-new", "-nodes"][..],
            &ec,
            &["-keyout", "srv.key", "-out", "srv.csr", "-subj"],
            &[&format!("/CN={name}")],
        ]
        .concat(),
    );
    fs_err::write(
        dir.join("srv.ext"),
        format!(
            "subjectAltName=DNS:{name}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
        ),
    )
    .expect("write ext");
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "srv.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            "srv.crt",
            "-extfile",
            "srv.ext",
        ],
    );
}
