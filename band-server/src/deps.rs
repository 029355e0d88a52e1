//! A script's Python environment: built once, outside the sandbox, from the packages its files
//! declare (`band::deps`), and kept read-only under `[deps] dir` for every later run.
//!
//! ```text
//! <dir>/
//!   .lock                  flock: one build at a time
//!   resolved/<key>         the resolved lock of a declared set (key: the set, the Python
//!                          version, the index), written once: later runs install the same files
//!   <sha256 of the lock>/  a venv of the host's python3 with the lock's wheels, root-owned,
//!                          read-only; renamed into place whole, so one that exists is complete
//!   .build-<sha256>        a build under way (removed when it fails, or by the next build)
//!   .work-<pid>            pip's report, the lock it reads, its HOME (removed after)
//! ```
//!
//! pip runs as `nobody` with `--isolated` (no user or site config), `--only-binary=:all:` (wheels
//! only: no package's code runs while it is installed), and, installing, `--require-hashes
//! --no-deps` from the resolved lock. A declared set without hashes is resolved once by pip's
//! own resolver (`--dry-run --ignore-installed --report`). The run's `python3` is the
//! environment's: its `bin` goes first on the run's `bin_path`, so the host's facts find
//! `<env>/bin/python3`, which runs with that path as `argv[0]` (`runtime::venv_argv0`) and whose
//! venv is bound read-only as a runtime tree (`runtime::discover`).
//!
//! A script's Node packages (a `package.json` and its `package-lock.json`) are built by `npm ci`
//! into `<dir>/<sha256 of the lock>/node_modules` ([`node`]), bound read-only beside the
//! script's `package.json` in `/skill`.

pub mod node;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use band::deps::{self, Declared};
use band::proto::Layer;
use fs_err as fs;

use crate::config::{DepsConfig, ServerConfig};
use crate::error::{SetupError, SetupResult};
use crate::layers::cli::bins::BinSearch;
use crate::request::Checked;

/// The layer name a dependency error carries.
pub const LAYER: Layer = Layer::new("deps");

/// The user pip runs as.
const NOBODY: u32 = 65534;

/// A run's environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Env {
    /// `<dir>/<lock_sha256>`.
    pub dir: PathBuf,
    /// SHA-256 of the resolved lock.
    pub lock_sha256: String,
    /// Whether this run built it (else it was there).
    pub built: bool,
}

/// A run's environments: its Python one, its Node one, either, both or none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Envs {
    pub python: Option<Env>,
    pub node: Option<node::NodeEnv>,
}

impl Envs {
    /// Whether the run has none.
    pub fn is_empty(&self) -> bool {
        self.python.is_none() && self.node.is_none()
    }

    /// What the run's result records (`deps_sha256`): the Python environment's resolved lock,
    /// else the Node one's `package-lock.json`.
    pub fn lock_sha256(&self) -> Option<String> {
        self.python
            .as_ref()
            .map(|e| e.lock_sha256.clone())
            .or_else(|| self.node.as_ref().map(|e| e.lock_sha256.clone()))
    }
}

/// The environments of `checked`'s script, built if they are not there yet.
pub fn prepare(checked: &Checked<'_>, cfg: &ServerConfig) -> SetupResult<Envs> {
    let file = |p: &str| {
        checked
            .bundle
            .iter()
            .find(|f| f.path == p)
            .map(|f| f.data.clone())
    };
    let entry = &checked.req.entry;
    let mut envs = Envs::default();
    if let Some(declared) = declared_of(entry, &file)? {
        envs.python = Some(Builder::new(cfg, entry, &declared)?.env()?);
    }
    if let Some(declared) = node_declared_of(entry, &file)? {
        envs.node = Some(node::NodeBuilder::new(cfg, entry, &declared)?.env()?);
    }
    Ok(envs)
}

/// Whether the script at `entry` declares packages of either kind (or a declaration band
/// refuses): its run needs [`prepare`].
pub fn declares(entry: &str, file: &dyn Fn(&str) -> Option<Vec<u8>>) -> bool {
    !matches!(declared_of(entry, file), Ok(None))
        || !matches!(node_declared_of(entry, file), Ok(None))
}

/// [`band::deps::node_declared`], as a setup error naming the file and line.
pub fn node_declared_of(
    entry: &str,
    file: &dyn Fn(&str) -> Option<Vec<u8>>,
) -> SetupResult<Option<band::deps::NodeDeclared>> {
    deps::node_declared(entry, file).map_err(|e| {
        SetupError::new(LAYER, format!("the Node packages of {entry}: {e}")).with_hint(e.hint)
    })
}

/// [`band::deps::declared`], as a setup error naming the file and line.
pub fn declared_of(
    entry: &str,
    file: &dyn Fn(&str) -> Option<Vec<u8>>,
) -> SetupResult<Option<Declared>> {
    deps::declared(entry, file).map_err(|e| {
        SetupError::new(LAYER, format!("the packages of {entry}: {e}")).with_hint(e.hint)
    })
}

/// `cfg` with the Python environment's `bin` first on its `bin_path` (the run's `python3` is the
/// environment's), and the Node one's `node_modules` to bind (`facts::runtime_trees`).
pub fn with_env(cfg: &ServerConfig, envs: &Envs) -> ServerConfig {
    let mut out = cfg.clone();
    if let Some(env) = &envs.python {
        out.bin_path.insert(0, env.dir.join("bin"));
    }
    if let Some(env) = &envs.node {
        out.deps.node_modules = Some(crate::config::NodeModules {
            host: env.dir.join("node_modules"),
            at: env.at.clone(),
        });
    }
    out
}

struct Builder<'a> {
    deps: &'a DepsConfig,
    entry: &'a str,
    declared: &'a Declared,
    /// The host's python3 (as found on `bin_path`: the interpreter the run would have had).
    python: PathBuf,
    version: String,
}

impl<'a> Builder<'a> {
    fn new(
        cfg: &'a ServerConfig,
        entry: &'a str,
        declared: &'a Declared,
    ) -> SetupResult<Builder<'a>> {
        let what = format!("building the environment for {entry}");
        let Some((python, _)) = BinSearch::new(&cfg.bin_path).find("python3") else {
            return Err(SetupError::new(
                LAYER,
                format!("{what}: band-server finds no python3 on its bin_path"),
            )
            .with_hint("install python3 (and python3-venv, python3-pip) where band-server runs"));
        };
        let out = Command::new(&python)
            .args(["-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"])
            .env_clear()
            .output()
            .map_err(|e| {
                SetupError::new(
                    LAYER,
                    format!("{what}: cannot run {}: {e}", python.display()),
                )
            })?;
        let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
        match declared.python_ok(&version) {
            Ok(true) => {}
            Ok(false) => {
                return Err(SetupError::new(
                    LAYER,
                    format!(
                        "{what}: it requires Python {}, and band-server's python3 is {version}",
                        declared.requires_python.as_deref().unwrap_or("")
                    ),
                )
                .with_hint(format!(
                    "change `requires-python` in {}, or give band-server a python3 that fits (bin_path in server.toml)",
                    declared.source.path()
                )));
            }
            Err(e) => {
                return Err(
                    SetupError::new(LAYER, format!("{what}: requires-python: {e}"))
                        .with_hint("write it as PEP 440 specifiers: \">=3.10\", \">=3.9,<4\""),
                );
            }
        }
        Ok(Builder {
            deps: &cfg.deps,
            entry,
            declared,
            python,
            version,
        })
    }

    fn fail(&self, step: &str, message: impl std::fmt::Display) -> SetupError {
        SetupError::new(
            LAYER,
            format!(
                "building the environment for {}: {step}: {message}",
                self.entry
            ),
        )
    }

    /// Where pip looks, in words.
    fn index(&self) -> String {
        let mut parts = Vec::new();
        if !self.deps.no_index {
            parts.push(
                self.deps
                    .index_url
                    .clone()
                    .unwrap_or_else(|| "https://pypi.org/simple".into()),
            );
        }
        parts.extend(self.deps.find_links.iter().cloned());
        parts.join(", ")
    }

    /// The resolution's key: the declared set, the interpreter, and where packages come from.
    fn key(&self) -> String {
        deps::sha256_hex(
            format!(
                "{}\0{}\0{}\0{:?}\0{}",
                self.declared.normal_text(),
                self.version,
                self.deps.index_url.as_deref().unwrap_or(""),
                self.deps.find_links,
                self.deps.no_index
            )
            .as_bytes(),
        )
    }

    fn env(&self) -> SetupResult<Env> {
        let root = &self.deps.dir;
        prepare_dir(root).map_err(|e| self.fail("preparing its folder", e))?;
        let resolved_at = root.join("resolved").join(self.key());
        // Built already: no lock taken.
        if let Some(env) = self.existing(&resolved_at)? {
            return Ok(env);
        }
        let _held = build_lock(root).map_err(|e| self.fail("locking", e))?;
        // Another run may have built it while this one waited.
        if let Some(env) = self.existing(&resolved_at)? {
            return Ok(env);
        }
        let work = root.join(format!(".work-{}", std::process::id()));
        let _ = fs::remove_dir_all(&work);
        let result = self.build(&work, &resolved_at);
        let _ = fs::remove_dir_all(&work);
        result
    }

    /// The resolved lock, if known.
    fn lock_text(&self, resolved_at: &Path) -> SetupResult<Option<String>> {
        if self.declared.fully_hashed() {
            return Ok(Some(deps::lock_of_hashed(self.declared)));
        }
        match fs::read_to_string(resolved_at) {
            Ok(t) => Ok(Some(t)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.fail("reading its resolved lock", e)),
        }
    }

    fn existing(&self, resolved_at: &Path) -> SetupResult<Option<Env>> {
        let Some(lock) = self.lock_text(resolved_at)? else {
            return Ok(None);
        };
        let sha = deps::sha256_hex(lock.as_bytes());
        let dir = self.deps.dir.join(&sha);
        Ok(dir.join("pyvenv.cfg").is_file().then_some(Env {
            dir,
            lock_sha256: sha,
            built: false,
        }))
    }

    fn build(&self, work: &Path, resolved_at: &Path) -> SetupResult<Env> {
        fs::create_dir(work).map_err(|e| self.fail("preparing its folder", e))?;
        as_builder(work, 0o700).map_err(|e| self.fail("preparing its folder", e))?;
        let lock = match self.lock_text(resolved_at)? {
            Some(l) => l,
            None => {
                let l = self.resolve(work)?;
                let dir = resolved_at.parent().unwrap_or(&self.deps.dir);
                fs::create_dir_all(dir).map_err(|e| self.fail("keeping its resolved lock", e))?;
                let tmp = dir.join(format!(".{}", std::process::id()));
                fs::write(&tmp, &l).map_err(|e| self.fail("keeping its resolved lock", e))?;
                fs::rename(&tmp, resolved_at)
                    .map_err(|e| self.fail("keeping its resolved lock", e))?;
                l
            }
        };
        let sha = deps::sha256_hex(lock.as_bytes());
        let dir = self.deps.dir.join(&sha);
        let building = self.deps.dir.join(format!(".build-{sha}"));
        let _ = fs::remove_dir_all(&building);
        let made = self.install(work, &building, &lock);
        let made = made.and_then(|()| {
            seal(&building).map_err(|e| self.fail("making it read-only", e))?;
            // Another declared set may resolve to the same lock: its environment, already
            // there (complete: it was renamed into place whole), is this one's.
            if dir.join("pyvenv.cfg").is_file() {
                return unseal_and_remove(&building)
                    .map_err(|e| self.fail("removing a duplicate build", e));
            }
            fs::rename(&building, &dir).map_err(|e| self.fail("keeping it", e))
        });
        if let Err(e) = made {
            let _ = unseal_and_remove(&building);
            return Err(e);
        }
        crate::say!(
            "band-server: built the environment {} for {} ({})",
            dir.display(),
            self.entry,
            lock.lines().count()
        );
        Ok(Env {
            dir,
            lock_sha256: sha,
            built: true,
        })
    }

    /// pip, as the builder, with the index options.
    fn pip(&self, work: &Path) -> Command {
        let mut c = Command::new(&self.python);
        c.args([
            "-m",
            "pip",
            "--isolated",
            "--disable-pip-version-check",
            "--no-input",
            "--no-cache-dir",
            "--timeout",
            "30",
            "install",
            "--only-binary=:all:",
        ]);
        if self.deps.no_index {
            c.arg("--no-index");
        }
        if let Some(u) = &self.deps.index_url {
            c.args(["--index-url", u]);
        }
        for f in &self.deps.find_links {
            c.args(["--find-links", f]);
        }
        builder_env(&mut c, "/usr/bin:/bin".as_ref(), work, work);
        c
    }

    /// The declared set resolved by pip into a lock.
    fn resolve(&self, work: &Path) -> SetupResult<String> {
        let declared = work.join("declared.txt");
        let report = work.join("report.json");
        let text: String = self
            .declared
            .requirements
            .iter()
            .map(|r| format!("{}\n", r.spec))
            .collect();
        fs::write(&declared, text).map_err(|e| self.fail("resolving its packages", e))?;
        let out = self
            .pip(work)
            .args(["--dry-run", "--ignore-installed", "--quiet", "--report"])
            .arg(&report)
            .arg("-r")
            .arg(&declared)
            .output()
            .map_err(|e| self.fail("resolving its packages", format!("cannot run pip: {e}")))?;
        if !out.status.success() {
            return Err(self.pip_failed("resolving its packages", &out.stderr));
        }
        let bytes = fs::read(&report).map_err(|e| self.fail("resolving its packages", e))?;
        let mut resolved = deps::resolved_from_report(&bytes)
            .map_err(|e| self.fail("resolving its packages", e))?;
        for r in &mut resolved {
            if r.sha256.is_none()
                && let Some(path) = r.url.strip_prefix("file://")
            {
                let data = fs::read(path).map_err(|e| self.fail("resolving its packages", e))?;
                r.sha256 = Some(deps::sha256_hex(&data));
            }
        }
        deps::lock_text(&resolved).map_err(|e| {
            self.fail(
                "resolving its packages",
                format!("{e}: the index gave no hash to pin it by"),
            )
        })
    }

    /// A venv of the host's python3 at `building`, with the lock's wheels installed, hashes
    /// required.
    fn install(&self, work: &Path, building: &Path, lock: &str) -> SetupResult<()> {
        let step = "installing its packages";
        fs::create_dir(building).map_err(|e| self.fail("creating its venv", e))?;
        as_builder(building, 0o755).map_err(|e| self.fail("creating its venv", e))?;
        let mut venv = Command::new(&self.python);
        venv.args(["-m", "venv", "--without-pip"])
            .arg(building)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", work)
            .current_dir(work);
        as_builder_cmd(&mut venv);
        let out = venv.output().map_err(|e| {
            self.fail(
                "creating its venv",
                format!("cannot run python3 -m venv: {e}"),
            )
        })?;
        if !out.status.success() {
            return Err(self
                .fail(
                    "creating its venv",
                    format!(
                        "python3 -m venv failed: {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    ),
                )
                .with_hint("install python3-venv where band-server runs"));
        }
        let site = Command::new(building.join("bin/python3"))
            .args([
                "-c",
                "import sysconfig; print(sysconfig.get_path('purelib'))",
            ])
            .env_clear()
            .output()
            .map_err(|e| self.fail("creating its venv", e))?;
        let site = PathBuf::from(String::from_utf8_lossy(&site.stdout).trim());
        if !site.starts_with(building) {
            return Err(self.fail(
                "creating its venv",
                format!("its site-packages is {}, outside it", site.display()),
            ));
        }
        let locked = work.join("lock.txt");
        fs::write(&locked, lock).map_err(|e| self.fail(step, e))?;
        as_builder(&locked, 0o644).map_err(|e| self.fail(step, e))?;
        let out = self
            .pip(work)
            .args(["--no-deps", "--require-hashes", "--quiet", "--target"])
            .arg(&site)
            .arg("-r")
            .arg(&locked)
            .output()
            .map_err(|e| self.fail(step, format!("cannot run pip: {e}")))?;
        if !out.status.success() {
            return Err(self.pip_failed(step, &out.stderr));
        }
        Ok(())
    }

    /// pip's failure, naming the package when pip does.
    fn pip_failed(&self, step: &str, stderr: &[u8]) -> SetupError {
        let text = String::from_utf8_lossy(stderr);
        let errors: Vec<&str> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("ERROR: "))
            .collect();
        let source = self.declared.source.pins();
        if text.contains("No module named pip") {
            return self
                .fail(step, "band-server's python3 has no pip")
                .with_hint("install python3-pip where band-server runs");
        }
        // Every package is "not found" when the index cannot be reached: say that instead.
        if let Some(why) = unreachable(&text) {
            return self
                .fail(step, format!("pip could not reach {}: {why}", self.index()))
                .with_hint(
                    "building an environment needs the package index (running never does): check band-server's network, or point [deps] index_url or find_links in server.toml at one it reaches",
                );
        }
        if let Some(pkg) = errors
            .iter()
            .find_map(|l| l.strip_prefix("No matching distribution found for "))
        {
            let line = self
                .declared
                .requirements
                .iter()
                .find(|r| {
                    deps::normalize_name(r.name()) == deps::normalize_name(deps::package_name(pkg))
                })
                .map_or(String::new(), |r| format!(":{}", r.line));
            return self
                .fail(
                    step,
                    format!("pip could not find {} in {}", pkg.trim(), self.index()),
                )
                .with_hint(format!(
                    "check the package's name and version in {source}{line}; band-server installs wheels only, from the index in its config ([deps] in server.toml)"
                ));
        }
        if let Some(l) = errors
            .iter()
            .find(|l| l.contains("HASHES") || l.contains("hash"))
        {
            let fix = if matches!(
                self.declared.source,
                deps::Source::Pyproject { lock: Some(_), .. }
            ) {
                "check the index, or run `uv lock` again"
            } else {
                "check the hashes (pip hash), or drop them to let band-server resolve"
            };
            return self.fail(step, format!("pip: {l}")).with_hint(format!(
                "a file on the index does not match the hash {source} pins it to; {fix}"
            ));
        }
        let last = errors.last().copied().unwrap_or_else(|| {
            text.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("pip failed")
        });
        self.fail(step, format!("pip: {}", last.trim()))
            .with_hint(format!("pip looked in {}", self.index()))
    }
}

/// `dir`: created if missing, a root-owned directory not writable by others.
/// The environments' build lock (`<root>/.lock`), held (blocking) until the file is dropped: one
/// build at a time, of every ecosystem. The error names the file.
pub(crate) fn build_lock(root: &Path) -> std::io::Result<fs::File> {
    let path = root.join(".lock");
    let lock = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)?;
    lock.file()
        .lock()
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    Ok(lock)
}

pub(crate) fn prepare_dir(dir: &Path) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    let m = fs::symlink_metadata(dir)?;
    if !m.is_dir() || (crate::sys::euid() == 0 && m.uid() != 0) || m.mode() & 0o022 != 0 {
        return Err(std::io::Error::other(format!(
            "{} must be a directory owned by root and writable by it alone",
            dir.display()
        )));
    }
    Ok(())
}

/// Hand `p` to the user pip runs as (as root), with `mode`.
pub(crate) fn as_builder(p: &Path, mode: u32) -> std::io::Result<()> {
    if crate::sys::euid() == 0 {
        std::os::unix::fs::lchown(p, Some(NOBODY), Some(NOBODY))
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", p.display())))?;
    }
    fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
}

/// Run `c` as the builder's user (as root).
/// A build tool's environment: nothing of band-server's but the proxy settings, `PATH` as
/// given, `HOME` the build's own folder, run in `cwd` as the builder ([`as_builder_cmd`]).
pub(crate) fn builder_env(c: &mut Command, path: &std::ffi::OsStr, home: &Path, cwd: &Path) {
    c.env_clear()
        .env("PATH", path)
        .env("HOME", home)
        .env("LANG", "C.UTF-8")
        .current_dir(cwd);
    for k in [
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
    ] {
        if let Some(v) = std::env::var_os(k) {
            c.env(k, v);
        }
    }
    as_builder_cmd(c);
}

pub(crate) fn as_builder_cmd(c: &mut Command) {
    if crate::sys::euid() == 0 {
        c.uid(NOBODY).gid(NOBODY);
    }
}

/// Every file under `root` owned by root and not writable (folders `0555`, files their mode
/// without write bits); links untouched but for their owner.
pub(crate) fn seal(root: &Path) -> std::io::Result<()> {
    let m = fs::symlink_metadata(root)?;
    if crate::sys::euid() == 0 {
        std::os::unix::fs::lchown(root, Some(0), Some(0))?;
    }
    if m.is_dir() {
        for e in fs::read_dir(root)? {
            seal(&e?.path())?;
        }
        fs::set_permissions(root, std::fs::Permissions::from_mode(0o555))?;
    } else if m.is_file() {
        fs::set_permissions(
            root,
            std::fs::Permissions::from_mode(m.mode() & 0o7555 & !0o6000),
        )?;
    }
    Ok(())
}

/// Remove a build that failed, whatever it got to.
pub(crate) fn unseal_and_remove(root: &Path) -> std::io::Result<()> {
    let Ok(m) = fs::symlink_metadata(root) else {
        return Ok(());
    };
    if m.is_dir() {
        fs::set_permissions(root, std::fs::Permissions::from_mode(0o700))?;
        for e in fs::read_dir(root)? {
            unseal_and_remove(&e?.path())?;
        }
    }
    match m.is_dir() {
        true => fs::remove_dir(root),
        false => fs::remove_file(root),
    }
}

/// Why pip could not reach its index, from its output: the connection error it retried on.
fn unreachable(pip_output: &str) -> Option<String> {
    const SIGNS: [&str; 5] = [
        "Failed to establish a new connection",
        "Temporary failure in name resolution",
        "Name or service not known",
        "Network is unreachable",
        "Connection refused",
    ];
    let line = pip_output
        .lines()
        .find(|l| SIGNS.iter().any(|s| l.contains(s)))?;
    let sign = SIGNS.iter().find(|s| line.contains(*s))?;
    Some(sign.to_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_env_goes_first_on_the_run_bin_path() {
        let cfg = ServerConfig::default();
        let env = Env {
            dir: PathBuf::from("/var/cache/band/envs/abc"),
            lock_sha256: "abc".into(),
            built: false,
        };
        let envs = Envs {
            python: Some(env),
            node: Some(node::NodeEnv {
                dir: PathBuf::from("/var/cache/band/envs/def"),
                at: PathBuf::from("/skill/scripts/node_modules"),
                lock_sha256: "def".into(),
                built: false,
            }),
        };
        let got = with_env(&cfg, &envs);
        assert_eq!(
            got.deps.node_modules,
            Some(crate::config::NodeModules {
                host: PathBuf::from("/var/cache/band/envs/def/node_modules"),
                at: PathBuf::from("/skill/scripts/node_modules"),
            })
        );
        assert_eq!(envs.lock_sha256().as_deref(), Some("abc"));
        assert_eq!(got.bin_path[0], Path::new("/var/cache/band/envs/abc/bin"));
        assert_eq!(&got.bin_path[1..], &cfg.bin_path[..]);
    }

    #[test]
    fn a_sealed_tree_is_read_only_and_a_failed_one_goes_whole() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("env");
        fs::create_dir_all(root.join("lib/pkg")).unwrap();
        fs::write(root.join("lib/pkg/__init__.py"), "X = 1\n").unwrap();
        fs::write(root.join("tool"), "#!/bin/sh\n").unwrap();
        fs::set_permissions(root.join("tool"), std::fs::Permissions::from_mode(0o775)).unwrap();
        fs::os::unix::fs::symlink("/usr/bin/python3", root.join("python3")).unwrap();
        seal(&root).unwrap();
        let mode = |p: &str| fs::symlink_metadata(root.join(p)).unwrap().mode() & 0o7777;
        assert_eq!(mode(""), 0o555);
        assert_eq!(mode("lib/pkg"), 0o555);
        assert_eq!(mode("lib/pkg/__init__.py"), 0o444);
        assert_eq!(mode("tool"), 0o555);
        unseal_and_remove(&root).unwrap();
        assert!(!root.exists());
    }

    #[test]
    fn pip_errors_name_the_package_and_the_line() {
        let declared = deps::pep723(
            "scripts/x.py",
            "# /// script\n# dependencies = [\n#   \"attrs\",\n#   \"pandas==9.9\",\n# ]\n# ///\n",
        )
        .unwrap()
        .unwrap();
        let cfg = ServerConfig {
            deps: DepsConfig {
                find_links: vec!["/srv/wheels".into()],
                no_index: true,
                ..DepsConfig::default()
            },
            ..ServerConfig::default()
        };
        let b = Builder {
            deps: &cfg.deps,
            entry: "scripts/x.py",
            declared: &declared,
            python: PathBuf::from("/usr/bin/python3"),
            version: "3.11.2".into(),
        };
        let stderr = b"ERROR: Could not find a version that satisfies the requirement pandas==9.9 (from versions: none)\nERROR: No matching distribution found for pandas==9.9\n";
        let e = b.pip_failed("resolving its packages", stderr);
        assert_eq!(
            e.message,
            "building the environment for scripts/x.py: resolving its packages: pip could not find pandas==9.9 in /srv/wheels"
        );
        assert_eq!(
            e.hint.as_deref(),
            Some(
                "check the package's name and version in scripts/x.py:4; band-server installs wheels only, from the index in its config ([deps] in server.toml)"
            )
        );
        assert_eq!(e.layer.as_str(), "deps");
        // An index it cannot reach: that, not "could not find" each package.
        let offline = b"WARNING: Retrying (Retry(total=4)) after connection broken by 'NewConnectionError('<pip._vendor.urllib3.connection.HTTPSConnection object>: Failed to establish a new connection: [Errno 101] Network is unreachable')': /simple/pandas/\nERROR: Could not find a version that satisfies the requirement pandas==9.9 (from versions: none)\nERROR: No matching distribution found for pandas==9.9\n";
        let e = b.pip_failed("resolving its packages", offline);
        assert_eq!(
            e.message,
            "building the environment for scripts/x.py: resolving its packages: pip could not reach /srv/wheels: failed to establish a new connection"
        );
        assert!(
            e.hint
                .as_deref()
                .is_some_and(|h| h.contains("needs the package index"))
        );
    }
}
