//! Issue 14, item 4, seen from inside the sandbox: a declared program brings the trees it needs
//! (an npm CLI's package, a venv's site-packages), read-only, and those trees start nothing
//! undeclared.

use fs_err::os::unix::fs::symlink;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use band::proto::Status;
use pretty_assertions::assert_eq;

use super::helpers::*;

fn write(p: &Path, data: &[u8], mode: u32) {
    if let Some(d) = p.parent() {
        fs_err::create_dir_all(d).unwrap_or_else(|e| panic!("{e}"));
    }
    fs_err::write(p, data).unwrap_or_else(|e| panic!("{e}"));
    fs_err::set_permissions(p, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("{e}"));
}

/// A directory the run's uid can read, outside `/tmp` (the sandbox has its own) and removed at
/// the end.
struct Root(PathBuf);

impl Drop for Root {
    fn drop(&mut self) {
        let _ = fs_err::remove_dir_all(&self.0);
    }
}

/// Build a C extension module for `python` (`None`: no compiler or headers here).
fn build_extension(python: &str, out: &Path) -> Option<()> {
    let info = Command::new(python)
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['include']); print(sysconfig.get_config_var('EXT_SUFFIX'))",
        ])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&info.stdout).into_owned();
    let mut lines = text.lines();
    let include = lines.next()?;
    let suffix = lines.next()?;
    if !Path::new(include).join("Python.h").is_file() {
        return None;
    }
    let src = out.join("bandrtnative.c");
    write(
        &src,
        br#"#include <Python.h>
static PyObject *answer(PyObject *self, PyObject *args) { return PyLong_FromLong(42); }
static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, ""}, {0}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "bandrtnative", 0, -1, methods};
PyMODINIT_FUNC PyInit_bandrtnative(void) { return PyModule_Create(&mod); }
"#,
        0o644,
    );
    let so = out.join(format!("bandrtnative{suffix}"));
    let ok = Command::new("gcc")
        .args(["-shared", "-fPIC", "-I", include, "-o"])
        .arg(&so)
        .arg(&src)
        .status()
        .ok()?
        .success();
    fs_err::remove_file(&src).ok()?;
    ok.then_some(())
}

#[test]
fn privileged_a_declared_programs_tree_comes_along_read_only_and_runs_nothing_else() {
    privileged!();
    let node = "/usr/bin/node";
    let python = "/usr/bin/python3";
    if !Path::new(node).exists() || !Path::new(python).exists() {
        eprintln!("skipped: needs {node} and {python}");
        return;
    }
    let root = Root(PathBuf::from(format!("/var/tmp/band-rt-{}", run_id())));
    let r = &root.0;
    let elf = fs_err::read("/usr/bin/true").unwrap_or_else(|e| panic!("{e}"));

    // An npm CLI as `npm install -g` lays it out: a bin link into its package, which requires
    // its siblings and a dependency, and ships a native program.
    let pkg = r.join("lib/node_modules/fakecli");
    write(&pkg.join("package.json"), br#"{"name": "fakecli"}"#, 0o644);
    write(
        &pkg.join("cli.js"),
        b"#!/usr/bin/env node\nconst h = require('./lib/helper');\nconst d = require('dep');\nconsole.log('fakecli=' + h.greet(process.argv[2]) + d.tag);\n",
        0o755,
    );
    write(
        &pkg.join("lib/helper.js"),
        b"exports.greet = (w) => 'hello ' + w;\n",
        0o644,
    );
    write(
        &pkg.join("node_modules/dep/package.json"),
        br#"{"name": "dep", "main": "index.js"}"#,
        0o644,
    );
    write(
        &pkg.join("node_modules/dep/index.js"),
        b"exports.tag = '!';\n",
        0o644,
    );
    write(&pkg.join("vendor/native"), &elf, 0o755);
    fs_err::create_dir_all(r.join("bin")).unwrap_or_else(|e| panic!("{e}"));
    symlink("../lib/node_modules/fakecli/cli.js", r.join("bin/fakecli"))
        .unwrap_or_else(|e| panic!("{e}"));

    // A venv (as `python3 -m venv` makes it) with a pure module, a C extension, a console script
    // and a copied program.
    let venv = r.join("venv");
    write(
        &venv.join("pyvenv.cfg"),
        b"home = /usr/bin\ninclude-system-site-packages = false\n",
        0o644,
    );
    fs_err::create_dir_all(venv.join("bin")).unwrap_or_else(|e| panic!("{e}"));
    symlink(python, venv.join("bin/python3")).unwrap_or_else(|e| panic!("{e}"));
    let version = Command::new(python)
        .args(["-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
    let site = venv.join(format!("lib/python{version}/site-packages"));
    write(&site.join("bandrtmod.py"), b"WHERE = 'venv'\n", 0o644);
    let native = build_extension(python, &site).is_some();
    if !native {
        eprintln!("no C compiler or Python headers: the extension part is left out");
    }
    write(
        &venv.join("bin/vtool"),
        format!(
            "#!{}/bin/python3\nimport sys, bandrtmod\nprint('vtool=' + bandrtmod.WHERE + ' ' + sys.prefix)\ntry:\n    import bandrtnative\n    print('native=%d' % bandrtnative.answer())\nexcept ImportError as e:\n    print('native=' + str(e))\n",
            venv.display()
        )
        .as_bytes(),
        0o755,
    );
    write(&venv.join("bin/tool"), &elf, 0o755);
    symlink(venv.join("bin/vtool"), r.join("bin/vtool")).unwrap_or_else(|e| panic!("{e}"));
    let config = r.join("server.toml");
    write(
        &config,
        format!(
            "bin_path = [\"{}\", \"/usr/local/bin\", \"/usr/bin\", \"/bin\"]\n",
            r.join("bin").display()
        )
        .as_bytes(),
        0o644,
    );
    let script = format!(
        r#"#!/bin/bash
fakecli world
vtool
{pkg}/vendor/native; echo "npm_native=$?"
{venv}/bin/tool; echo "venv_tool=$?"
cat {venv}/bin/tool >/dev/null 2>&1; echo "venv_tool_read=$?"
echo "helper=$(head -c 14 {pkg}/lib/helper.js)"
echo x > {pkg}/lib/new 2>/dev/null; echo "write=$?"
{pkg}/cli.js direct >/dev/null 2>&1; echo "direct=$?"
"#,
        pkg = pkg.display(),
        venv = venv.display()
    );
    let mut p = policy();
    p.allow.cli = strs(&["fakecli *", "vtool"]);
    let mut req = request(&script, p);
    req.trace = true;
    let o = finish(spawn_with_config(&req, &config));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    let get = |k: &str| value_of(&kv, k);
    // The CLI finds its siblings and its dependency; python finds the venv's modules.
    assert_eq!(get("fakecli"), "hello world!", "{o:#?}");
    assert_eq!(get("vtool"), format!("venv {}", venv.display()), "{o:#?}");
    if native {
        assert_eq!(get("native"), "42", "the C extension loads: {o:#?}");
    }
    // The trees are readable and read-only; their programs cannot be run or read.
    assert_eq!(get("helper"), "exports.greet", "{o:#?}");
    assert_ne!(get("write"), "0", "{o:#?}");
    assert_eq!(get("npm_native"), "126", "{o:#?}");
    assert_eq!(get("venv_tool"), "126", "{o:#?}");
    assert_ne!(get("venv_tool_read"), "0", "{o:#?}");
    // The CLI's script run by its path is the declared command itself (its interpreter in the
    // kernel's shape), judged and recorded as `fakecli direct`.
    assert_eq!(get("direct"), "0", "{o:#?}");
    assert!(
        o.result
            .cli_calls
            .iter()
            .any(|c| c.allowed && c.argv == strs(&["fakecli", "direct"])),
        "{:?}",
        o.result.cli_calls
    );
}

#[test]
fn privileged_a_jdks_java_starts_from_its_copy() {
    privileged!();
    // `java` finds libjli.so at `$ORIGIN/../lib` of the path it runs from, its copy's.
    let Some(java) = fs_err::canonicalize("/usr/bin/java").ok().filter(|_| {
        Command::new("java")
            .arg("-version")
            .output()
            .is_ok_and(|o| o.status.success())
    }) else {
        eprintln!("skipped: no working JDK at /usr/bin/java");
        return;
    };
    let script = r#"#!/bin/bash
java -version 2>&1 | head -1 | sed 's/^/version=/'
echo "status=${PIPESTATUS[0]}"
java -XshowSettings:properties -version 2>&1 | grep -c 'java.home' | sed 's/^/home=/'
"#;
    let mut p = policy();
    p.allow.cli = strs(&["java -version", "java -XshowSettings:properties -version"]);
    let o = run(&request(script, p));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    assert_eq!(
        kv.get("status").map(String::as_str),
        Some("0"),
        "{java:?}: {o:#?}"
    );
    assert!(
        kv.get("version").is_some_and(|v| v.contains("version")),
        "{o:#?}"
    );
    assert_eq!(kv.get("home").map(String::as_str), Some("1"), "{o:#?}");
}

/// A Java program that reads the JDK's security configuration (`MessageDigest` loads the
/// providers listed in `conf/security/java.security`).
const DIGEST_JAVA: &str = r#"
public class Digest {
    public static void main(String[] args) throws Exception {
        var d = java.security.MessageDigest.getInstance("SHA-256").digest("band".getBytes());
        System.out.println("digest=" + java.util.HexFormat.of().formatHex(d));
        System.out.println("policy=" + java.security.Security.getProperty("crypto.policy"));
    }
}
"#;

/// Debian's JDK links `lib/jvm.cfg` and `conf/security/*` into `/etc/java-17-openjdk`: a run
/// allowed only `java *` sees that folder (read-only), so the JVM finds its configuration and
/// its security providers, without an `allow.read` of it. Skips (fails under
/// `BAND_TEST_MUST_RUN`) without a JDK (`javac`) on the host.
#[test]
fn privileged_a_jdk_brings_the_etc_folder_its_files_link_to() {
    privileged!();
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    fs_err::write(tmp.path().join("Digest.java"), DIGEST_JAVA).unwrap_or_else(|e| panic!("{e}"));
    let compiled = Command::new("javac")
        .arg("-d")
        .arg(tmp.path())
        .arg(tmp.path().join("Digest.java"))
        .status()
        .is_ok_and(|s| s.success());
    if !compiled {
        assert!(
            !band_test::must_run(),
            "this test needs a JDK (javac, java): apt-get install openjdk-17-jdk-headless"
        );
        eprintln!("skipped: no JDK (javac) on this host");
        return;
    }
    let class = fs_err::read(tmp.path().join("Digest.class")).unwrap_or_else(|e| panic!("{e}"));
    // Where this JDK's files link to outside it (Debian: /etc/java-17-openjdk); the test shows
    // the run reads it there.
    let java = fs_err::canonicalize("/usr/bin/java").unwrap_or_else(|e| panic!("{e}"));
    let jdk = java
        .parent()
        .and_then(Path::parent)
        .unwrap_or_else(|| panic!("{}", java.display()));
    let etc = fs_err::canonicalize(jdk.join("conf/security/java.security"))
        .ok()
        .and_then(|f| f.parent().and_then(Path::parent).map(Path::to_path_buf))
        .filter(|e| !e.starts_with(jdk));
    let script = format!(
        r#"#!/bin/bash
java -version 2>/tmp/v; echo "version=$?"
java -cp /skill Digest 2>/tmp/err
echo "java=$?"
echo "err=$(head -c 300 /tmp/err | tr '\n' ' ')"
echo "etc_write=$( (echo x > {etc}/band-probe) 2>/dev/null; echo $?)"
if [ -e /etc/shadow ]; then echo shadow=visible; else echo shadow=absent; fi
"#,
        etc = etc.as_deref().unwrap_or(jdk).display()
    );
    let mut p = policy();
    p.allow.cli = strs(&["java *"]);
    let mut req = request(&script, p);
    req.bundle.push(file("Digest.class", 0o644, &class));
    req.bundle_sha256 = bundle_hash(&req.bundle);
    let o = run(&req);
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    let get = |k: &str| value_of(&kv, k);
    assert_eq!(get("version"), "0", "{o:#?}");
    assert_eq!(get("java"), "0", "{}", get("err"));
    assert_eq!(
        get("digest"),
        "65f15ce8fee25b248445eedc63cd9a82094e35965e4ed552e195029a9311d474",
        "{o:#?}"
    );
    assert_eq!(get("policy"), "unlimited", "{o:#?}");
    // Read-only, and no more of /etc than that.
    assert_ne!(get("etc_write"), "0", "{o:#?}");
    assert_eq!(get("shadow"), "absent", "{o:#?}");
    if let Some(etc) = etc {
        assert!(
            !etc.join("band-probe").exists(),
            "{} was written",
            etc.display()
        );
    }
}

#[test]
fn privileged_libreoffice_starts_through_its_launcher_script() {
    privileged!();
    // Debian's soffice is a shell script in /usr/lib/libreoffice/program that starts oosplash
    // and soffice.bin beside it: it runs at its host path, its tree's helpers with it.
    if !Path::new("/usr/bin/soffice").exists() {
        eprintln!("skipped: LibreOffice is not installed (/usr/bin/soffice)");
        return;
    }
    let script = "#!/bin/bash\nsoffice --version 2>&1 | head -1 | sed 's/^/version=/'\necho \"status=${PIPESTATUS[0]}\"\n";
    let mut p = policy();
    p.allow.cli = strs(&["soffice --version", "uname *"]);
    let o = run(&request(script, p));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    assert_eq!(kv.get("status").map(String::as_str), Some("0"), "{o:#?}");
    assert!(
        kv.get("version")
            .is_some_and(|v| v.starts_with("LibreOffice")),
        "{o:#?}"
    );
}

/// Issue 14, item 3 (b): a venv's `bin` on the server's `bin_path`, so `python3` is the venv's
/// (a link to the base interpreter). The run's python is in the venv: `sys.prefix` is the venv and
/// its site-packages import (before: the base python, "No module named bandvenvmod"), both when
/// the script calls `python3` and through a `#!/usr/bin/env python3` script. The venv's own
/// programs still do not start.
#[test]
fn privileged_a_venv_python_on_the_bin_path_sees_its_venv() {
    privileged!();
    let python = "/usr/bin/python3";
    if !Path::new(python).exists() {
        eprintln!("skipped: needs {python}");
        return;
    }
    let root = Root(PathBuf::from(format!("/var/tmp/band-venv-{}", run_id())));
    let r = &root.0;
    let venv = r.join("venv");
    write(
        &venv.join("pyvenv.cfg"),
        b"home = /usr/bin\ninclude-system-site-packages = false\n",
        0o644,
    );
    fs_err::create_dir_all(venv.join("bin")).unwrap_or_else(|e| panic!("{e}"));
    symlink(python, venv.join("bin/python3")).unwrap_or_else(|e| panic!("{e}"));
    let version = Command::new(python)
        .args(["-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
    let site = venv.join(format!("lib/python{version}/site-packages"));
    write(&site.join("bandvenvmod.py"), b"WHERE = 'venv'\n", 0o644);
    let elf = fs_err::read("/usr/bin/true").unwrap_or_else(|e| panic!("{e}"));
    write(&venv.join("bin/tool"), &elf, 0o755);
    let config = r.join("server.toml");
    write(
        &config,
        format!(
            "bin_path = [\"{}\", \"/usr/local/bin\", \"/usr/bin\", \"/bin\"]\n",
            venv.join("bin").display()
        )
        .as_bytes(),
        0o644,
    );
    let probe = "import sys\ntry:\n    import bandvenvmod\n    print('mod=' + bandvenvmod.WHERE)\nexcept ImportError as e:\n    print('mod=' + str(e))\nprint('prefix=' + sys.prefix)\n";
    let script = format!(
        "#!/bin/bash\npython3 -c \"$(cat <<'PY'\n{probe}PY\n)\"\nprintf '#!/usr/bin/env python3\\nimport bandvenvmod\\nprint(\"env_mod=\" + bandvenvmod.WHERE)\\n' > /tmp/p.py\npython3 /tmp/p.py\n{venv}/bin/tool; echo \"venv_tool=$?\"\n",
        venv = venv.display()
    );
    let mut p = policy();
    p.allow.cli = strs(&["python3 *"]);
    let o = finish(spawn_with_config(&request(&script, p), &config));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    let get = |k: &str| value_of(&kv, k);
    assert_eq!(get("mod"), "venv", "{o:#?}");
    assert_eq!(get("prefix"), venv.display().to_string(), "{o:#?}");
    assert_eq!(get("env_mod"), "venv", "{o:#?}");
    assert_eq!(get("venv_tool"), "126", "{o:#?}");
}

/// An ordinary user this test makes (`useradd`, home `home` of mode 0755, not created by
/// useradd), removed at the end.
struct User {
    name: String,
    uid: u32,
}

impl User {
    fn new(home: &Path) -> User {
        let name = format!("bandus{}", &run_id()[..8]);
        let out = Command::new("useradd")
            .args(["-M", "-s", "/usr/sbin/nologin", "-d"])
            .arg(home)
            .arg(&name)
            .output()
            .unwrap_or_else(|e| panic!("useradd: {e}"));
        assert!(out.status.success(), "useradd: {out:?}");
        let id = Command::new("id")
            .args(["-u", &name])
            .output()
            .unwrap_or_else(|e| panic!("id: {e}"));
        let uid = String::from_utf8_lossy(&id.stdout)
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("id -u: {e}"));
        User { name, uid }
    }
}

impl Drop for User {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg(&self.name).output();
    }
}

/// Issue 14, item 3 (a): pip's user site of the user who invoked band (band-server started through
/// sudo: `SUDO_UID`) is the run's user site, read-only: a declared `python3` imports what
/// `pip install --user` put there (before: "No module named banduser"), cannot write there, and
/// the programs in it are hidden. Started by root (no `SUDO_UID`), the run does not see that user's
/// site; and a home other users cannot enter keeps its user site to itself (the run still starts).
#[test]
fn privileged_the_invoking_users_pip_user_site_comes_along_read_only() {
    privileged!();
    let python = "/usr/bin/python3";
    if !Path::new(python).exists() {
        eprintln!("skipped: needs {python}");
        return;
    }
    let root = Root(PathBuf::from(format!("/var/tmp/band-us-{}", run_id())));
    let home = root.0.join("home");
    let user = User::new(&home);
    let version = Command::new(python)
        .args(["-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
    let site = home.join(format!(".local/lib/python{version}/site-packages"));
    write(&site.join("banduser.py"), b"WHERE = 'user site'\n", 0o644);
    let elf = fs_err::read("/usr/bin/true").unwrap_or_else(|e| panic!("{e}"));
    write(&site.join("pkg/tool"), &elf, 0o755);
    for d in site.ancestors().take_while(|d| d.starts_with(&root.0)) {
        fs_err::set_permissions(d, std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let config = root.0.join("server.toml");
    write(
        &config,
        b"bin_path = [\"/usr/local/bin\", \"/usr/bin\", \"/bin\"]\n",
        0o644,
    );
    let script = format!(
        "#!/bin/bash\npython3 -c \"$(printf 'try:\\n    import banduser\\n    print(\"mod=\" + banduser.WHERE)\\nexcept ImportError as e:\\n    print(\"mod=\" + str(e))\\n')\"\ntouch {at}/new 2>/dev/null; echo \"write=$?\"\n{at}/pkg/tool; echo \"tool=$?\"\n",
        at = format!("/tmp/.local/lib/python{version}/site-packages")
    );
    let mut p = policy();
    p.allow.cli = strs(&["python3 *"]);
    let req = request(&script, p);
    let run_as = |sudo_uid: Option<u32>| {
        let mut cmd = Command::new(server());
        cmd.arg("run")
            .env(band_server::config::STATE_DIR_ENV, STATE_DIR)
            .env(band_server::config::CONFIG_ENV, &config)
            .env_remove("SUDO_UID")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        if let Some(uid) = sudo_uid {
            cmd.env("SUDO_UID", uid.to_string());
        }
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{e}"));
        let line = serde_json::to_string(&band::proto::Message::Request(Box::new(req.clone())))
            .unwrap_or_default();
        let mut stdin = child.stdin.take().unwrap_or_else(|| panic!("no stdin"));
        std::io::Write::write_all(&mut stdin, format!("{line}\n").as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
        drop(stdin);
        let o = finish(child);
        assert_eq!(o.result.status, Status::Ok, "{o:#?}");
        o
    };
    let o = run_as(Some(user.uid));
    let kv = o.kv();
    let get = |k: &str| value_of(&kv, k);
    assert_eq!(get("mod"), "user site", "{o:#?}");
    assert_ne!(get("write"), "0", "{o:#?}");
    assert_eq!(get("tool"), "126", "{o:#?}");
    // Root's run does not see the user's site.
    let o = run_as(None);
    assert_eq!(
        o.kv().get("mod").map(String::as_str),
        Some("No module named 'banduser'"),
        "{o:#?}"
    );
    // A home others cannot enter: not bound, and the run starts.
    fs_err::set_permissions(&home, std::fs::Permissions::from_mode(0o700))
        .unwrap_or_else(|e| panic!("{e}"));
    let o = run_as(Some(user.uid));
    assert_eq!(
        o.kv().get("mod").map(String::as_str),
        Some("No module named 'banduser'"),
        "{o:#?}"
    );
}

/// An npm-style tree under `/var/tmp/<name>-<run id>` (removed when the guard drops): the node
/// CLI `fakecli` (`bin/fakecli` → `lib/node_modules/fakecli/cli.js`, printing `fakecli=ok`) with
/// two helpers in its tree, `vendor/ripgrep/x64-linux/rg` and `vendor/cat` (copies of `echo`),
/// and a server config whose `bin_path` starts with the tree's `bin/`. Gives the guard, the
/// package folder and the config; `None` (skipped, with a message) where node is missing.
fn fakecli_tree(name: &str) -> Option<(Root, PathBuf, PathBuf)> {
    let node = "/usr/bin/node";
    if !Path::new(node).exists() {
        eprintln!("skipped: needs {node}");
        return None;
    }
    let root = Root(PathBuf::from(format!("/var/tmp/{name}-{}", run_id())));
    let r = &root.0;
    let echo = fs_err::read("/usr/bin/echo").unwrap_or_else(|e| panic!("{e}"));
    let pkg = r.join("lib/node_modules/fakecli");
    write(&pkg.join("package.json"), br#"{"name": "fakecli"}"#, 0o644);
    write(
        &pkg.join("cli.js"),
        b"#!/usr/bin/env node\nconsole.log('fakecli=ok');\n",
        0o755,
    );
    write(&pkg.join("vendor/ripgrep/x64-linux/rg"), &echo, 0o755);
    write(&pkg.join("vendor/cat"), &echo, 0o755);
    fs_err::create_dir_all(r.join("bin")).unwrap_or_else(|e| panic!("{e}"));
    symlink("../lib/node_modules/fakecli/cli.js", r.join("bin/fakecli"))
        .unwrap_or_else(|e| panic!("{e}"));
    let config = r.join("server.toml");
    write(
        &config,
        format!(
            "bin_path = [\"{}\", \"/usr/local/bin\", \"/usr/bin\", \"/bin\"]\n",
            r.join("bin").display()
        )
        .as_bytes(),
        0o644,
    );
    Some((root, pkg, config))
}

/// Issue 14, item 4: a program inside a declared program's tree, started by its path (claude-code's
/// `vendor/ripgrep/x64-linux/rg`), goes through the gate: judged as its file name with its
/// arguments, it runs only when an `allow.cli` rule allows that (before: hidden under /dev/null,
/// "Permission denied" for every call, with no denial on record); otherwise it is denied (126) and
/// the denial is recorded, like any command's. A helper named like an essential (`cat`) is no
/// exception: it needs a rule too. Its file stays unreadable.
#[test]
fn privileged_a_helper_in_a_declared_programs_tree_runs_only_by_a_rule() {
    privileged!();
    let Some((_root, pkg, config)) = fakecli_tree("band-helper") else {
        return;
    };
    let script = format!(
        r#"#!/bin/bash
fakecli
{rg} rgout=yes; echo "rg=$?"
{rg} other 2>/dev/null; echo "rg_other=$?"
{pkg}/vendor/cat catout=yes 2>/dev/null; echo "cat=$?"
cat {rg} >/dev/null 2>&1; echo "rg_read=$?"
"#,
        pkg = pkg.display(),
        rg = pkg.join("vendor/ripgrep/x64-linux/rg").display()
    );
    let mut p = policy();
    p.allow.cli = strs(&["fakecli", "rg rgout=*"]);
    let mut req = request(&script, p);
    req.trace = true;
    let o = finish(spawn_with_config(&req, &config));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    let get = |k: &str| value_of(&kv, k);
    assert_eq!(get("fakecli"), "ok", "{o:#?}");
    assert_eq!(get("rgout"), "yes", "{o:#?}");
    assert_eq!(get("rg"), "0", "{o:#?}");
    assert_eq!(get("rg_other"), "126", "{o:#?}");
    assert_eq!(get("catout"), "<missing catout>", "{o:#?}");
    assert_eq!(get("cat"), "126", "{o:#?}");
    assert_ne!(get("rg_read"), "0", "{o:#?}");
    let calls: Vec<(Vec<String>, bool)> = o
        .result
        .cli_calls
        .iter()
        .filter(|c| matches!(c.argv[0].as_str(), "rg" | "cat") && c.argv.len() == 2)
        .filter(|c| {
            c.argv[1]
                != pkg
                    .join("vendor/ripgrep/x64-linux/rg")
                    .display()
                    .to_string()
        })
        .map(|c| (c.argv.clone(), c.allowed))
        .collect();
    assert_eq!(
        calls,
        [
            (strs(&["rg", "rgout=yes"]), true),
            (strs(&["rg", "other"]), false),
            (strs(&["cat", "catout=yes"]), false),
        ],
        "{o:#?}"
    );
}

/// Issue 14, item 6 (tree helpers): a program inside a declared program's tree reached through a
/// symlink the script made, or by a relative path from inside the tree, is judged as the file the
/// kernel ran (band-shim's `/proc/<pid>/exe`: it is bound over each helper), not by the name it
/// was called by. Before: `/tmp/rg-link` was the unknown command `rg-link` (127), `./x64-linux/rg`
/// the unknown `rg` (127), and the tree's `./cat` the host's essential `cat`, which ran.
#[test]
fn privileged_a_tree_helper_reached_by_a_link_or_a_relative_path_is_judged_as_itself() {
    privileged!();
    let Some((_root, pkg, config)) = fakecli_tree("band-helper-link") else {
        return;
    };
    let script = format!(
        r#"#!/bin/sh
fakecli
ln -s {rg} /tmp/rg-link
/tmp/rg-link link=yes; echo "link_code=$?"
cd {pkg}/vendor/ripgrep && ./x64-linux/rg rel=yes; echo "rel_code=$?"
cd {pkg}/vendor && ./cat catrel=yes 2>/dev/null; echo "cat_code=$?"
"#,
        pkg = pkg.display(),
        rg = pkg.join("vendor/ripgrep/x64-linux/rg").display()
    );
    let mut p = policy();
    p.allow.cli = strs(&["fakecli", "ln -s *", "rg link=*", "rg rel=*"]);
    let mut req = request(&script, p);
    req.trace = true;
    let o = finish(spawn_with_config(&req, &config));
    assert_eq!(o.result.status, Status::Ok, "{o:#?}");
    let kv = o.kv();
    let get = |k: &str| value_of(&kv, k);
    assert_eq!(get("fakecli"), "ok", "{o:#?}");
    assert_eq!(
        (get("link"), get("link_code")),
        ("yes".into(), "0".into()),
        "{o:#?}"
    );
    assert_eq!(
        (get("rel"), get("rel_code")),
        ("yes".into(), "0".into()),
        "{o:#?}"
    );
    // The tree's `cat` needs a rule of its own: denied, and nothing ran (the helper would print
    // `catrel=yes`, the host's cat would fail on a file of that name).
    assert_eq!(get("catrel"), "<missing catrel>", "{o:#?}");
    assert_eq!(get("cat_code"), "126", "{o:#?}");
    let calls: Vec<(Vec<String>, bool)> = o
        .result
        .cli_calls
        .iter()
        .filter(|c| matches!(c.argv[0].as_str(), "rg" | "cat" | "rg-link"))
        .map(|c| (c.argv.clone(), c.allowed))
        .collect();
    assert_eq!(
        calls,
        [
            (strs(&["rg", "link=yes"]), true),
            (strs(&["rg", "rel=yes"]), true),
            (strs(&["cat", "catrel=yes"]), false),
        ],
        "{o:#?}"
    );
}

/// A venv of `python` at `venv` (`python -m venv --without-pip`, no network) whose site-packages
/// has `bandownmod` (`WHERE = "own"`), and a run whose `bin_path` starts with its `bin`: what the
/// run's `python3` imports and its `sys.prefix`, and whether it can write into the venv.
fn run_in_own_venv(
    python: &str,
    venv: &Path,
    config: &Path,
) -> (Status, String, String, String, String) {
    let st = Command::new(python)
        .args(["-m", "venv", "--without-pip"])
        .arg(venv)
        .status()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(st.success(), "{python} -m venv failed");
    let site = Command::new(venv.join("bin/python3"))
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_path('purelib'))",
        ])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let site = PathBuf::from(String::from_utf8_lossy(&site.stdout).trim());
    write(&site.join("bandownmod.py"), b"WHERE = 'own'\n", 0o644);
    write(
        config,
        format!(
            "bin_path = [\"{}\", \"/usr/local/bin\", \"/usr/bin\", \"/bin\"]\n",
            venv.join("bin").display()
        )
        .as_bytes(),
        0o644,
    );
    let probe = "import os, sys\ntry:\n    import bandownmod\n    print('mod=' + bandownmod.WHERE)\nexcept ImportError as e:\n    print('mod=' + str(e))\nprint('prefix=' + sys.prefix)\ntry:\n    open(os.path.join(os.path.dirname(bandownmod.__file__), 'planted.py'), 'w')\n    print('write=wrote')\nexcept OSError:\n    print('write=refused')\nprint('home=' + ' '.join(sorted(os.listdir(os.path.dirname(os.path.dirname(sys.prefix))))))\n";
    let script = format!("#!/bin/bash\npython3 -c \"$(cat <<'PY'\n{probe}PY\n)\"\n");
    let mut p = policy();
    p.allow.cli = strs(&["python3 *"]);
    let o = finish(spawn_with_config(&request(&script, p), config));
    let kv = o.kv();
    let get = |k: &str| {
        kv.get(k)
            .cloned()
            .unwrap_or_else(|| format!("<missing {k}>: {o:#?}"))
    };
    (
        o.result.status,
        get("mod"),
        get("prefix"),
        get("write"),
        get("home"),
    )
}

/// Issue 38, item 3: a user's own venv on band-server's `bin_path`, under a home the run's uid
/// cannot enter (mode 0700, as `~` is): the run's python3 is the venv's, read-only (before:
/// `bwrap: Can't find source path …: Permission denied`). Nothing else of the home comes along.
#[test]
fn privileged_a_venv_under_a_home_others_cannot_enter_is_the_runs_python() {
    privileged!();
    let python = "/usr/bin/python3";
    if !Path::new(python).exists() {
        eprintln!("skipped: needs {python}");
        return;
    }
    let root = Root(PathBuf::from(format!("/var/tmp/band-home-{}", run_id())));
    let home = &root.0;
    fs_err::create_dir_all(home).unwrap_or_else(|e| panic!("{e}"));
    fs_err::set_permissions(home, std::fs::Permissions::from_mode(0o700))
        .unwrap_or_else(|e| panic!("{e}"));
    write(&home.join("secret.txt"), b"private\n", 0o600);
    let venv = home.join("proj/.venv");
    let (status, module, prefix, wrote, home_seen) =
        run_in_own_venv(python, &venv, &home.join("server.toml"));
    assert_eq!(status, Status::Ok, "{module}");
    assert_eq!(module, "own");
    assert_eq!(prefix, venv.display().to_string());
    assert_eq!(wrote, "refused");
    // In the sandbox, the home holds the venv's way and nothing else (not secret.txt).
    assert_eq!(home_seen, "proj");
}

/// Issue 38, item 3: a user's own venv under the host's `/tmp` (which the sandbox does not see:
/// it has a `/tmp` of its own) is bound read-only at its path there (before: not mounted, and the
/// run's python3 was the base one).
#[test]
fn privileged_a_venv_under_tmp_is_the_runs_python() {
    privileged!();
    let python = "/usr/bin/python3";
    if !Path::new(python).exists() {
        eprintln!("skipped: needs {python}");
        return;
    }
    let root = Root(PathBuf::from(format!("/tmp/band-tmpvenv-{}", run_id())));
    let venv = root.0.join("venv");
    fs_err::create_dir_all(&root.0).unwrap_or_else(|e| panic!("{e}"));
    let (status, module, prefix, wrote, home_seen) =
        run_in_own_venv(python, &venv, &root.0.join("server.toml"));
    assert_eq!(status, Status::Ok, "{module}");
    assert_eq!(module, "own");
    assert_eq!(prefix, venv.display().to_string());
    assert_eq!(wrote, "refused");
    // The sandbox's own /tmp holds the venv's way and nothing else of the host's.
    assert_eq!(
        home_seen,
        root.0.file_name().unwrap_or_default().to_string_lossy()
    );
}

/// Issue 38, item 3: a venv of a pyenv Python in root's home (mode 0700): both the venv and the
/// pyenv installation it is made from are the run's, read-only (before: `bwrap: Can't find
/// source path /root/.pyenv/versions/3.x: Permission denied`). Only where `python3` on this
/// host's PATH is such a Python.
#[test]
fn privileged_a_venv_of_a_pyenv_python_in_a_private_home_is_the_runs_python() {
    privileged!();
    let Some(real) = Command::new("python3")
        .args([
            "-c",
            "import sys, os; print(os.path.realpath(sys.executable))",
        ])
        .output()
        .ok()
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .filter(|p| p.to_string_lossy().contains("/.pyenv/versions/"))
    else {
        eprintln!("skipped: python3 here is not a pyenv Python");
        return;
    };
    let root = Root(PathBuf::from(format!("/var/tmp/band-home-{}", run_id())));
    fs_err::create_dir_all(&root.0).unwrap_or_else(|e| panic!("{e}"));
    fs_err::set_permissions(&root.0, std::fs::Permissions::from_mode(0o700))
        .unwrap_or_else(|e| panic!("{e}"));
    let venv = root.0.join(".venv");
    let (status, module, prefix, wrote, _) =
        run_in_own_venv(&real.to_string_lossy(), &venv, &root.0.join("server.toml"));
    assert_eq!(status, Status::Ok, "{module}");
    assert_eq!(module, "own");
    assert_eq!(prefix, venv.display().to_string());
    assert_eq!(wrote, "refused");
}
