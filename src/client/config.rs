//! The user's config file: `~/.config/band/config.toml` (or `$BAND_CONFIG`).
//!
//! ```toml
//! target = "host"          # default execution target when neither --target nor the band names one
//! require_lock = false     # refuse skills without a band.lock
//! skills_path = ["~/skills"]
//! data_dir = "~/.local/share/band"
//! ```
//!
//! A missing file is an empty config; a broken one is an error naming the file and line.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{ClientError, Result};
use crate::vm::paths::VmPaths;

/// Environment variable naming another config file.
pub const CONFIG_ENV: &str = "BAND_CONFIG";

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    /// Default execution target (`host`, `qemu`, `lima`, `ssh://user@host[:port]`).
    #[serde(default)]
    pub target: Option<String>,
    /// Refuse to run skills that have no `band.lock`.
    #[serde(default)]
    pub require_lock: bool,
    /// Extra folders of skills, searched after `--skills` and `$BAND_SKILLS_PATH`.
    #[serde(default)]
    pub skills_path: Vec<PathBuf>,
    /// Where band keeps its ledger, VM images and keys (default `~/.local/share/band`).
    #[serde(default)]
    pub data_dir: Option<PathBuf>,
}

impl UserConfig {
    /// The config file in use: `$BAND_CONFIG`, else `~/.config/band/config.toml`.
    pub fn path() -> Option<PathBuf> {
        match std::env::var_os(CONFIG_ENV) {
            Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
            _ => dirs::config_dir().map(|d| d.join("band/config.toml")),
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
        Self::parse(&text).map_err(|e| ClientError::user(format!("{}:{e}", path.display()), "the keys are target, require_lock, skills_path and data_dir (README, \"Configuration\")"))
    }

    /// Parse config text; the error says `line:col: message`.
    pub fn parse(text: &str) -> std::result::Result<UserConfig, SyntaxError> {
        let mut cfg: UserConfig = toml::from_str(text).map_err(|e| {
            let (line, col) = e.span().map(|s| line_col(text, s.start)).unwrap_or((1, 1));
            SyntaxError {
                line,
                col,
                message: e.message().to_string(),
            }
        })?;
        cfg.skills_path = cfg.skills_path.iter().map(|p| expand_home(p)).collect();
        cfg.data_dir = cfg.data_dir.as_deref().map(expand_home);
        Ok(cfg)
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
            "target = \"lima\"\nrequire_lock = true\nskills_path = [\"/s\"]\ndata_dir = \"/d\"\n",
        )
        .unwrap();
        assert_eq!(c.target.as_deref(), Some("lima"));
        assert!(c.require_lock);
        assert_eq!(c.skills_path, vec![PathBuf::from("/s")]);
        assert_eq!(c.data_dir, Some(PathBuf::from("/d")));
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
