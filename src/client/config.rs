//! The user's config file: `~/.config/band/config.toml` (or `$BAND_CONFIG`).
//!
//! ```toml
//! target = "host"          # default execution target when neither --target nor the band names one
//! force_target = "host"    # wins over the band's execution.target (only --target wins over it)
//! require_lock = false     # refuse skills without a band.lock
//! [targets]                # a band's execution.target -> the target to use instead
//! lima = "host"            # (`local-lima` and `lima` are one key; so are `local-dangerously` and `host`)
//! skills_path = ["~/skills"]
//! data_dir = "~/.local/share/band"
//! warm = true              # as root on the host target: keep a band-server warm between runs (the default)
//! ```
//!
//! A missing file is an empty config; a broken one is an error naming the file and line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use super::{ClientError, Result};
use crate::manifest::{TARGET_CHOICES, Target};
use crate::vm::paths::VmPaths;

/// Environment variable naming another config file.
pub const CONFIG_ENV: &str = "BAND_CONFIG";

#[derive(Debug, Clone, Default, PartialEq)]
pub struct UserConfig {
    /// Default execution target (`host`, `qemu`, `lima`, `ssh://user@host[:port]`).
    pub target: Option<String>,
    /// The target every run uses whatever its band says (`--target` still wins).
    pub force_target: Option<Target>,
    /// `[targets]`: a band's `execution.target` mapped to the target to use instead.
    pub targets: Vec<(Target, Target)>,
    /// Refuse to run skills that have no `band.lock`.
    pub require_lock: bool,
    /// Extra folders of skills, searched after `--skills` and `$BAND_SKILLS_PATH`.
    pub skills_path: Vec<PathBuf>,
    /// Where band keeps its ledger, VM images and keys (default `~/.local/share/band`).
    pub data_dir: Option<PathBuf>,
    /// `warm` as written: as root on the host target, run on a warm band-server (`band-server
    /// serve --host`, with its spare sandboxes), and start one after a run that had none
    /// ([`crate::warm`]). Unset: on. What a run uses is [`UserConfig::warm`].
    pub warm: Option<bool>,
}

/// The file as written; target names are checked (and located) when it becomes a [`UserConfig`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    target: Option<String>,
    #[serde(default)]
    force_target: Option<Spanned<String>>,
    #[serde(default)]
    targets: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    require_lock: bool,
    #[serde(default)]
    skills_path: Vec<PathBuf>,
    #[serde(default)]
    data_dir: Option<PathBuf>,
    #[serde(default)]
    warm: Option<bool>,
}

impl UserConfig {
    /// The config file in use: `$BAND_CONFIG`, else `~/.config/band/config.toml`.
    pub fn path() -> Option<PathBuf> {
        match std::env::var_os(CONFIG_ENV) {
            Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
            _ => dirs::config_dir().map(|d| d.join("band/config.toml")),
        }
    }

    /// Does a run on the host target use the warm band-server: `$BAND_WARM` (`0` or `1`) when
    /// set, else the config's `warm`, else yes.
    pub fn warm(&self) -> bool {
        match std::env::var(crate::proto::env::WARM).as_deref() {
            Ok("0") => false,
            Ok("1") => true,
            _ => self.warm.unwrap_or(true),
        }
    }

    /// Load the user's config; no file means the defaults.
    pub fn load() -> Result<UserConfig> {
        match Self::path() {
            Some(p) => Self::load_from(&p),
            None => Ok(UserConfig::default()),
        }
    }

    pub fn load_from(path: &Path) -> Result<UserConfig> {
        let text = match fs_err::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(UserConfig::default()),
            Err(e) => {
                // fs_err's message names the path; the one below names it already.
                let why = std::error::Error::source(&e)
                    .map_or_else(|| e.to_string(), ToString::to_string);
                return Err(ClientError::user(
                    format!("cannot read {}: {why}", path.display()),
                    "check the file's permissions",
                ));
            }
        };
        Self::parse(&text).map_err(|e| {
            let hint = if e.target {
                format!("band's targets are {TARGET_CHOICES}")
            } else {
                "the keys are target, force_target, [targets], require_lock, skills_path, \
                 data_dir and warm (README, \"Configuration\")"
                    .to_string()
            };
            ClientError::user(format!("{}:{e}", path.display()), hint)
        })
    }

    /// The target a band's `execution.target` maps to under `[targets]`, if it is mapped.
    pub fn mapped(&self, band: &Target) -> Option<&Target> {
        self.targets
            .iter()
            .find_map(|(from, to)| (from == band).then_some(to))
    }

    /// Parse config text; the error says `line:col: message`.
    pub fn parse(text: &str) -> std::result::Result<UserConfig, SyntaxError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            let (line, col) = e.span().map(|s| line_col(text, s.start)).unwrap_or((1, 1));
            SyntaxError {
                line,
                col,
                message: e.message().to_string(),
                target: false,
            }
        })?;
        // A bad target name is located at its value (a key's value is on the key's line).
        let target = |what: &str, name: &str, at: &Spanned<String>| {
            Target::parse(name).map_err(|e| {
                let (line, col) = line_col(text, at.span().start);
                SyntaxError {
                    line,
                    col,
                    message: format!("{what}: {e}"),
                    target: true,
                }
            })
        };
        let force_target = match &raw.force_target {
            Some(t) => Some(target("force_target", t.get_ref(), t)?),
            None => None,
        };
        let mut targets = Vec::new();
        for (from, to) in &raw.targets {
            let what = format!("[targets] `{from}`");
            let from_t = target(&what, from, to)?;
            if targets.iter().any(|(f, _)| f == &from_t) {
                let (line, col) = line_col(text, to.span().start);
                return Err(SyntaxError {
                    line,
                    col,
                    message: format!(
                        "{what}: `{from_t}` is mapped twice (`lima` and `local-lima` are one target)"
                    ),
                    target: true,
                });
            }
            targets.push((from_t, target(&what, to.get_ref(), to)?));
        }
        Ok(UserConfig {
            target: raw.target,
            force_target,
            targets,
            require_lock: raw.require_lock,
            skills_path: raw.skills_path.iter().map(|p| expand_home(p)).collect(),
            data_dir: raw.data_dir.as_deref().map(expand_home),
            warm: raw.warm,
        })
    }

    /// The band data folder: `$BAND_DATA_DIR`, the config's `data_dir`, else `~/.local/share/band`.
    pub fn data_dir(&self) -> PathBuf {
        if let Some(p) = std::env::var_os(crate::proto::env::DATA_DIR).filter(|p| !p.is_empty()) {
            return PathBuf::from(p);
        }
        if let Some(d) = &self.data_dir {
            return d.clone();
        }
        dirs::data_dir()
            .map(|d| d.join("band"))
            .unwrap_or_else(|| PathBuf::from(".band"))
    }
}

/// A config file that is not valid TOML or names an unknown key: `line:col: message`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{col}: {message}")]
pub struct SyntaxError {
    pub line: usize,
    pub col: usize,
    pub message: String,
    /// The error is a bad target name (the hint lists band's targets).
    pub target: bool,
}

/// The VM state folder of this user (under the data folder).
pub fn vm_paths() -> Result<VmPaths> {
    Ok(VmPaths::new(&UserConfig::load()?.data_dir()))
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rfind('\n')
        .map_or(before.len(), |i| before.len() - i - 1)
        + 1;
    (line, col)
}

fn expand_home(p: &Path) -> PathBuf {
    match (p.strip_prefix("~"), dirs::home_dir()) {
        (Ok(rest), Some(home)) => home.join(rest),
        _ => p.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_text_is_the_default() {
        assert_eq!(UserConfig::parse("").unwrap(), UserConfig::default());
    }

    #[test]
    fn reads_every_key() {
        let c = UserConfig::parse(
            "target = \"lima\"\nrequire_lock = true\nskills_path = [\"/s\"]\ndata_dir = \"/d\"\nwarm = true\n",
        )
        .unwrap();
        assert_eq!(c.target.as_deref(), Some("lima"));
        assert!(c.require_lock);
        assert_eq!(c.warm, Some(true));
        assert_eq!(
            UserConfig::parse("warm = false\n").map(|c| c.warm),
            Ok(Some(false))
        );
        assert_eq!(UserConfig::parse("").map(|c| c.warm), Ok(None));
        assert_eq!(c.skills_path, vec![PathBuf::from("/s")]);
        assert_eq!(c.data_dir, Some(PathBuf::from("/d")));
    }

    #[test]
    fn target_keys_are_parsed_with_the_band_file_names() {
        let c = UserConfig::parse(
            "force_target = \"qemu\"\n[targets]\nlocal-lima = \"host\"\n\"local-dangerously\" = \"ssh://me@box\"\n",
        )
        .unwrap();
        assert_eq!(c.force_target, Some(Target::Qemu));
        assert_eq!(c.mapped(&Target::Lima), Some(&Target::Host));
        assert_eq!(
            c.mapped(&Target::Host).map(ToString::to_string).as_deref(),
            Some("ssh://me@box")
        );
        assert_eq!(c.mapped(&Target::Qemu), None);
    }

    #[test]
    fn a_bad_target_name_is_located_and_says_why() {
        let e = UserConfig::parse("[targets]\nlima = \"cloudflare\"\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "2:8: [targets] `lima`: `cloudflare` is an upstream Bands target band does not support"
        );
        assert!(e.target);
        let e = UserConfig::parse("\n\nforce_target = \"vm\"\n").unwrap_err();
        assert_eq!(e.to_string(), "3:16: force_target: unknown target `vm`");
        let e = UserConfig::parse("[targets]\nlima = \"host\"\nlocal-lima = \"qemu\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("mapped twice"), "{e}");
    }

    #[test]
    fn unknown_key_is_located() {
        let e = UserConfig::parse("target = \"host\"\ntarg = 1\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("2:1:"), "{e}");
        assert!(e.contains("targ"), "{e}");
    }

    #[test]
    fn missing_file_is_the_default_and_a_broken_one_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            UserConfig::load_from(&dir.path().join("none.toml")).unwrap(),
            UserConfig::default()
        );
        let f = dir.path().join("config.toml");
        fs_err::write(&f, "require_lock = \"yes\"\n").unwrap();
        let e = UserConfig::load_from(&f).unwrap_err().to_string();
        assert!(e.contains("config.toml:1:"), "{e}");
    }
}
