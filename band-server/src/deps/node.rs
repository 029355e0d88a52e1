//! A script's `node_modules`: built once by `npm ci` from its `package-lock.json`, outside the
//! sandbox, as `nobody`, and kept read-only under `[deps] dir`.
//!
//! ```text
//! <dir>/<sha256 of package-lock.json>/
//!   package.json package-lock.json   the skill's, as npm ci read them
//!   node_modules/                    bound read-only beside the script's package.json in /skill
//! ```
//!
//! npm runs with `--ignore-scripts` (no package's code runs while it is installed), `--omit=dev`,
//! its own empty user and global config, a cache in the build's work folder, and
//! `--registry <npm_registry> --replace-registry-host=always`: every package is fetched from
//! band-server's registry, whatever host the lock's `resolved` names, and npm checks each file
//! against the lock's `integrity` (sha512) before it is unpacked.

use std::path::{Path, PathBuf};
use std::process::Command;

use band::deps::NodeDeclared;
use fs_err as fs;

use super::{LAYER, as_builder, build_lock, prepare_dir, seal, unseal_and_remove};
use crate::config::{DepsConfig, ServerConfig};
use crate::error::{SetupError, SetupResult};
use crate::layers::cli::bins::BinSearch;

/// A run's Node environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeEnv {
    /// `<dir>/<lock_sha256>`; its `node_modules` is what the run sees.
    pub dir: PathBuf,
    /// Where the sandbox has its `node_modules` (`/skill/scripts/node_modules`).
    pub at: PathBuf,
    /// SHA-256 of the `package-lock.json`.
    pub lock_sha256: String,
    /// Whether this run built it.
    pub built: bool,
}

pub(super) struct NodeBuilder<'a> {
    deps: &'a DepsConfig,
    entry: &'a str,
    declared: &'a NodeDeclared,
    npm: PathBuf,
    /// The folder of the `node` npm runs with (first on its `PATH`).
    node_dir: PathBuf,
}

impl<'a> NodeBuilder<'a> {
    pub(super) fn new(
        cfg: &'a ServerConfig,
        entry: &'a str,
        declared: &'a NodeDeclared,
    ) -> SetupResult<NodeBuilder<'a>> {
        let search = BinSearch::new(&cfg.bin_path);
        let find = |name: &str| {
            search.find(name).ok_or_else(|| {
                SetupError::new(
                    LAYER,
                    format!(
                        "building the node_modules of {entry} ({}): band-server finds no {name} on its bin_path",
                        declared.lock_path()
                    ),
                )
                .with_hint("install node and npm where band-server runs (bin_path in server.toml)")
            })
        };
        let (npm, _) = find("npm")?;
        let (node, _) = find("node")?;
        Ok(NodeBuilder {
            deps: &cfg.deps,
            entry,
            declared,
            npm,
            node_dir: node.parent().map(Path::to_path_buf).unwrap_or_default(),
        })
    }

    fn fail(&self, step: &str, message: impl std::fmt::Display) -> SetupError {
        SetupError::new(
            LAYER,
            format!(
                "building the node_modules of {} ({}): {step}: {message}",
                self.entry,
                self.declared.lock_path()
            ),
        )
    }

    pub(super) fn env(&self) -> SetupResult<NodeEnv> {
        let root = &self.deps.dir;
        prepare_dir(root).map_err(|e| self.fail("preparing its folder", e))?;
        let sha = self.declared.digest();
        let at = PathBuf::from(self.declared.sandbox_node_modules());
        let dir = root.join(&sha);
        let env = |built| NodeEnv {
            dir: dir.clone(),
            at: at.clone(),
            lock_sha256: sha.clone(),
            built,
        };
        if dir.join("node_modules").is_dir() {
            return Ok(env(false));
        }
        let _held = build_lock(root).map_err(|e| self.fail("locking", e))?;
        if dir.join("node_modules").is_dir() {
            return Ok(env(false));
        }
        let work = root.join(format!(".work-{}", std::process::id()));
        let _ = fs::remove_dir_all(&work);
        let building = root.join(format!(".build-{sha}"));
        let _ = unseal_and_remove(&building);
        let made = self.install(&work, &building).and_then(|()| {
            seal(&building).map_err(|e| self.fail("making it read-only", e))?;
            fs::rename(&building, &dir).map_err(|e| self.fail("keeping it", e))
        });
        let _ = fs::remove_dir_all(&work);
        if let Err(e) = made {
            let _ = unseal_and_remove(&building);
            return Err(e);
        }
        crate::say!(
            "band-server: built the node_modules {} for {} ({} packages)",
            dir.join("node_modules").display(),
            self.entry,
            self.declared.packages.len()
        );
        Ok(env(true))
    }

    /// `npm ci` in `building`, as the builder.
    fn install(&self, work: &Path, building: &Path) -> SetupResult<()> {
        let step = "installing its packages";
        fs::create_dir(work).map_err(|e| self.fail("preparing its folder", e))?;
        as_builder(work, 0o700).map_err(|e| self.fail("preparing its folder", e))?;
        fs::create_dir(building).map_err(|e| self.fail("preparing its folder", e))?;
        as_builder(building, 0o755).map_err(|e| self.fail("preparing its folder", e))?;
        // npm's user and global config: empty (none of the host's, none of band-server's user's).
        let (userrc, globalrc) = (work.join("npmrc"), work.join("npmrc.global"));
        for (path, data) in [
            (
                building.join("package.json"),
                &self.declared.package_json[..],
            ),
            (building.join("package-lock.json"), &self.declared.lock[..]),
            (userrc.clone(), &b""[..]),
            (globalrc.clone(), &b""[..]),
        ] {
            fs::write(&path, data).map_err(|e| self.fail("preparing its folder", e))?;
            as_builder(&path, 0o644).map_err(|e| self.fail("preparing its folder", e))?;
        }
        let mut c = Command::new(&self.npm);
        c.args([
            "ci",
            "--ignore-scripts",
            "--omit=dev",
            "--no-audit",
            "--no-fund",
            "--no-progress",
            "--update-notifier=false",
            "--loglevel=http",
            // A run waits for its build: a file that fails its hash or a registry that does not
            // answer is not retried for minutes (npm's default backs off 10 s, then 60 s).
            "--fetch-retries=1",
            "--fetch-retry-mintimeout=1000",
            "--fetch-retry-maxtimeout=3000",
            "--replace-registry-host=always",
            "--registry",
            &self.deps.npm_registry,
        ])
        .arg("--cache")
        .arg(work.join("cache"))
        .arg("--userconfig")
        .arg(&userrc)
        .arg("--globalconfig")
        .arg(&globalrc);
        let mut path = std::ffi::OsString::from(self.node_dir.as_os_str());
        path.push(":/usr/bin:/bin");
        super::builder_env(&mut c, &path, work, building);
        let out = c
            .output()
            .map_err(|e| self.fail(step, format!("cannot run npm: {e}")))?;
        if !out.status.success() {
            let mut text = out.stderr;
            text.extend_from_slice(&out.stdout);
            return Err(self.npm_failed(step, &text));
        }
        if !building.join("node_modules").is_dir() {
            return Err(self.fail(step, "npm ci made no node_modules"));
        }
        Ok(())
    }

    /// npm's failure, naming the package its output names (the last one fetched).
    pub(super) fn npm_failed(&self, step: &str, output: &[u8]) -> SetupError {
        let text = String::from_utf8_lossy(output);
        let errors: Vec<&str> = text
            .lines()
            .filter_map(|l| {
                l.strip_prefix("npm error ")
                    .or_else(|| l.strip_prefix("npm ERR! "))
            })
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("A complete log"))
            .collect();
        // The package: the one whose tarball npm names last (`…/<name>/-/<name>-1.0.0.tgz`).
        let package = self
            .declared
            .packages
            .iter()
            .filter_map(|p| text.rfind(&format!("/{}/-/", p.name)).map(|at| (at, p)))
            .max_by_key(|(at, _)| *at)
            .map(|(_, p)| p);
        let what = package.map_or_else(String::new, |p| format!("{}@{}: ", p.name, p.version));
        let lock = self.declared.lock_path();
        let registry = &self.deps.npm_registry;
        let code = errors
            .iter()
            .find_map(|l| l.strip_prefix("code "))
            .unwrap_or("");
        let detail = errors
            .iter()
            .find(|l| !l.starts_with("code ") && !l.starts_with("errno "))
            .or(errors.last())
            .copied()
            .or_else(|| text.lines().map(str::trim).rfind(|l| !l.is_empty()))
            .unwrap_or("npm ci failed");
        let hint = match code {
            "EINTEGRITY" => format!(
                "the file {registry} gave is not the one {lock} pins by its integrity hash; check the registry ([deps] npm_registry in server.toml), or the lock"
            ),
            "E404" => format!(
                "{registry} does not have it; check the package's name and version in {lock}, and the registry ([deps] npm_registry in server.toml)"
            ),
            _ => format!("npm fetched from {registry} ([deps] npm_registry in server.toml)"),
        };
        self.fail(step, format!("{what}npm: {detail}"))
            .with_hint(hint)
    }
}
