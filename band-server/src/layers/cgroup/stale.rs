//! The janitor's side: the ownership marks under `<state>/cgroups` (which cgroups this state
//! directory created), the run cgroups that exist on the host, and the removal of a dead run's.

use fs_err as fs;
use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

use super::plan::{PARENT, validate_name};
use super::{CgroupError, Hierarchy, RunCgroup};

/// `<state>/cgroups`: an empty file per run cgroup that servers of this state directory created
/// and have not removed yet. Cgroups live in one host-wide `band/` directory, whichever state
/// directory a server uses; the janitor's stale pass removes only the ones marked here, never a
/// cgroup of a server with another state directory (issue 13, item 11).
pub(crate) fn marks_dir(state: &Path) -> PathBuf {
    state.join("cgroups")
}

/// The ownership mark of cgroup `name` in `state`.
pub(crate) fn mark_path(state: &Path, name: &str) -> PathBuf {
    marks_dir(state).join(name)
}

/// The names marked in `state` (valid cgroup names only), sorted.
pub fn list_marks(state: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(marks_dir(state)) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| validate_name(n).is_ok())
        .collect();
    names.sort();
    names
}

/// Remove the mark of `name` in `state`; a missing mark is fine.
pub(crate) fn remove_mark(state: &Path, name: &str) -> io::Result<()> {
    match fs::remove_file(mark_path(state, name)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

pub(super) fn write_mark(state: &Path, name: &str) -> Result<PathBuf, CgroupError> {
    use fs_err::os::unix::fs::OpenOptionsExt;
    validate_name(name)?;
    let dir = marks_dir(state);
    let create = |path: &Path, error| CgroupError::Create {
        path: path.to_path_buf(),
        error,
    };
    crate::common::dirs::dir_with_mode(&dir, 0o700, true, None).map_err(|e| create(&dir, e))?;
    let mark = dir.join(name);
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&mark)
        .map_err(|e| create(&mark, e))?;
    Ok(mark)
}

impl RunCgroup {
    /// Names of the run cgroups that exist under `band/` in any hierarchy, sorted. Unreadable
    /// directories are skipped.
    pub fn list_stale(h: &Hierarchy) -> Vec<String> {
        let mut names = BTreeSet::new();
        for root in h.version().roots() {
            let Ok(entries) = fs::read_dir(root.join(PARENT)) else {
                continue;
            };
            for entry in entries.flatten() {
                let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                let name = entry.file_name().to_string_lossy().into_owned();
                if is_dir && validate_name(&name).is_ok() {
                    names.insert(name);
                }
            }
        }
        names.into_iter().collect()
    }
}

/// Remove the cgroup `name` of a dead run of `state`, then its mark. A mark whose cgroup is
/// already gone (removed by a server without marks) just goes, unreported.
pub(super) fn remove_owned(state: &Path, name: &str, report: &mut crate::common::Report) {
    if let Ok(h) = Hierarchy::detect_system() {
        let gone = RunCgroup::open(&h, name)
            .map(|cg| cg.dirs().iter().all(|d| !d.exists()))
            .unwrap_or(false);
        if gone {
            if let Err(e) = remove_mark(state, name) {
                report.errors.push(format!("cgroup {name}: {e}"));
            }
            return;
        }
        match RunCgroup::open(&h, name).and_then(|cg| cg.remove()) {
            Ok(()) => {
                report.note_removed(crate::common::REMOVED_CGROUPS, name.to_string());
                if let Err(e) = remove_mark(state, name) {
                    report.errors.push(format!("cgroup {name}: {e}"));
                }
            }
            Err(e) => report.errors.push(format!("cgroup {name}: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::cgroup::fake::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn ownership_marks_are_per_state_directory() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        write_mark(a.path(), "0123456789abcdef").unwrap();
        write_mark(a.path(), "fedcba9876543210").unwrap();
        fs::write(marks_dir(a.path()).join("not a run"), "").unwrap();
        assert_eq!(
            list_marks(a.path()),
            vec![
                "0123456789abcdef".to_string(),
                "fedcba9876543210".to_string()
            ]
        );
        assert!(
            list_marks(b.path()).is_empty(),
            "another state dir owns nothing"
        );
        remove_mark(a.path(), "0123456789abcdef").unwrap();
        remove_mark(a.path(), "0123456789abcdef").unwrap();
        assert_eq!(list_marks(a.path()), vec!["fedcba9876543210".to_string()]);
        assert!(write_mark(a.path(), "../escape").is_err());
    }

    #[test]
    fn list_stale_is_the_union_of_valid_run_directories() {
        let (tmp, h) = v1_roots(false, true);
        let fake = FakeKernel::new(V1_FILES);
        RunCgroup::create_with(&h, "b-run", &limits(), &fake).unwrap();
        RunCgroup::create_with(&h, "a-run", &limits(), &fake).unwrap();
        fs::create_dir(tmp.path().join("freezer/band/only-freezer")).unwrap();
        fs::create_dir(tmp.path().join("pids/band/.hidden")).unwrap();
        fs::write(tmp.path().join("memory/band/not-a-dir"), "").unwrap();
        assert_eq!(
            RunCgroup::list_stale(&h),
            vec!["a-run", "b-run", "only-freezer"]
        );
        let (_tmp, empty) = v2_root("memory pids\n");
        assert_eq!(RunCgroup::list_stale(&empty), Vec::<String>::new());
    }
}
