//! Where the host's commands are found: the config's `bin_path` (by default
//! [`crate::config::BIN_SEARCH`]), in order, each name resolved to its final file. Read by the
//! host's facts (the declared commands) and by the CLI gate (whether a refused name exists).

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use fs_err as fs;

/// Find `name` in `search` (the config's `bin_path`, by default [`crate::config::BIN_SEARCH`]) and resolve it
/// to its final file.
pub(crate) fn resolve_binary(name: &str, search: &[PathBuf]) -> Option<PathBuf> {
    find_binary(name, search).map(|(_, real)| real)
}

/// [`resolve_binary`], with the path where it was found (not resolved: a venv's `bin/python`
/// link), then the canonical file.
pub(crate) fn find_binary(name: &str, search: &[PathBuf]) -> Option<(PathBuf, PathBuf)> {
    BinSearch::new(search).find(name)
}

/// The folders [`find_binary`] looks in, each resolved to its canonical path once, when first
/// needed: for a batch of names (band-server's essential commands, each run), a command found
/// as a file of its own (no link) costs one `lstat` per folder looked in, where resolving its
/// whole path again cost a `readlink` for each of its components.
pub(crate) struct BinSearch<'a> {
    dirs: &'a [PathBuf],
    canonical: Vec<std::cell::OnceCell<Option<PathBuf>>>,
}

impl<'a> BinSearch<'a> {
    pub(crate) fn new(dirs: &'a [PathBuf]) -> BinSearch<'a> {
        BinSearch {
            dirs,
            canonical: dirs.iter().map(|_| std::cell::OnceCell::new()).collect(),
        }
    }

    /// `name` in the first folder that has it as an executable file (a link is followed), with
    /// its canonical path; `None` when no folder has it, or when it is one of
    /// [`crate::request::FORBIDDEN_COMMANDS`].
    pub(crate) fn find(&self, name: &str) -> Option<(PathBuf, PathBuf)> {
        // A plain name of a file that is no link: its canonical path is its folder's, joined.
        let plain = !name.is_empty() && !name.contains('/') && name != "." && name != "..";
        for (i, d) in self.dirs.iter().enumerate() {
            let p = d.join(name);
            let Ok(lm) = fs::symlink_metadata(&p) else {
                continue;
            };
            let direct = plain && !lm.file_type().is_symlink();
            let m = if direct {
                lm
            } else {
                let Ok(m) = fs::metadata(&p) else {
                    continue;
                };
                m
            };
            if !m.is_file() || m.mode() & 0o111 == 0 {
                continue;
            }
            let real = if direct {
                self.canonical[i]
                    .get_or_init(|| d.canonicalize().ok())
                    .as_ref()?
                    .join(name)
            } else {
                p.canonicalize().ok()?
            };
            let base = real.file_name()?.to_str()?;
            if crate::request::FORBIDDEN_COMMANDS.contains(&base) {
                return None;
            }
            return Some((p, real));
        }
        None
    }
}
