use fs_err as fs;
use std::io::{self, Write as _};
use std::path::Path;

use super::CgroupError;
use super::plan::{Need, Op};
use super::v2;

/// The two operations in which cgroupfs differs from a plain directory: `mkdir` creates the
/// interface files, and `rmdir` removes a directory that still lists them. Tests substitute a
/// fake that does the same in a temporary directory.
pub(super) trait Dirs {
    fn mkdir(&self, path: &Path) -> io::Result<()>;
    fn rmdir(&self, path: &Path) -> io::Result<()>;
}

pub(super) struct Kernel;

impl Dirs for Kernel {
    fn mkdir(&self, path: &Path) -> io::Result<()> {
        fs::create_dir(path)
    }
    fn rmdir(&self, path: &Path) -> io::Result<()> {
        fs::remove_dir(path)
    }
}

/// One `write(2)` of `value` to an existing file (cgroupfs files must not be created).
pub(super) fn write_raw(path: &Path, value: &str) -> io::Result<()> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)?;
    file.write_all(value.as_bytes())
}

pub(super) fn write_file(path: &Path, value: &str) -> Result<(), CgroupError> {
    write_raw(path, value).map_err(|error| CgroupError::Write {
        path: path.to_path_buf(),
        value: value.to_string(),
        error,
    })
}

pub(super) fn read_file(path: &Path) -> Result<String, CgroupError> {
    fs::read_to_string(path).map_err(|error| CgroupError::Read {
        path: path.to_path_buf(),
        error,
    })
}

pub(super) fn apply(ops: &[Op], dirs: &dyn Dirs) -> Result<(), CgroupError> {
    let mut created = Vec::new();
    let result = ops.iter().try_for_each(|op| match op {
        Op::Mkdir { path, exist_ok } => match dirs.mkdir(path) {
            Ok(()) => {
                if !exist_ok {
                    created.push(path.clone());
                }
                Ok(())
            }
            Err(e) if *exist_ok && e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            Err(error) => Err(CgroupError::Create {
                path: path.clone(),
                error,
            }),
        },
        Op::EnableControllers { dir } => v2::enable_controllers(dir),
        Op::Write { path, value, need } => match (write_raw(path, value), need) {
            (Ok(()), _) | (Err(_), Need::BestEffort) => Ok(()),
            (Err(e), Need::IfExists) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            (Err(error), _) => Err(CgroupError::Write {
                path: path.clone(),
                value: value.clone(),
                error,
            }),
        },
    });
    if result.is_err() {
        // Fresh and empty, so rmdir succeeds; a failure here would only hide the real error.
        for path in created.iter().rev() {
            let _ = dirs.rmdir(path);
        }
    }
    result
}

/// The first line `key N` of a flat-keyed file (`memory.events`, `pids.events`, `oom_control`).
pub(super) fn keyed_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(' ')?;
        if k == key {
            v.trim().parse().ok()
        } else {
            None
        }
    })
}

pub(super) fn read_u64(path: &Path) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

pub(super) fn read_keyed(path: &Path, key: &str) -> Option<u64> {
    keyed_value(&fs::read_to_string(path).ok()?, key)
}

#[cfg(test)]
mod tests {
    use crate::layers::cgroup::RunCgroup;
    use crate::layers::cgroup::fake::*;
    use fs_err as fs;
    use pretty_assertions::assert_eq;

    #[test]
    fn v2_create_writes_exact_values() {
        let (tmp, h) = v2_root("cpuset cpu io memory hugetlb pids rdma misc\n");
        let cg =
            RunCgroup::create_with(&h, "run-1", &limits(), &FakeKernel::new(V2_FILES)).unwrap();
        let root = tmp.path();
        let leaf = root.join("band/run-1");
        assert_eq!(
            read(root.join("cgroup.subtree_control")),
            "+memory +pids +cpu"
        );
        assert_eq!(
            read(root.join("band/cgroup.subtree_control")),
            "+memory +pids +cpu"
        );
        assert_eq!(
            read(leaf.join("cgroup.subtree_control")),
            "",
            "never on the leaf"
        );
        assert_eq!(read(leaf.join("memory.max")), "67108864");
        assert_eq!(read(leaf.join("memory.swap.max")), "0");
        assert_eq!(read(leaf.join("memory.oom.group")), "1");
        assert_eq!(read(leaf.join("pids.max")), "16");
        assert_eq!(read(leaf.join("cpu.max")), "50000 100000");
        assert_eq!(cg.dirs(), vec![leaf.clone()]);
        assert_eq!(cg.procs_files(), vec![leaf.join("cgroup.procs")]);
        assert_eq!(cg.join_files(), vec![leaf.join("cgroup.procs")]);
        assert_eq!(cg.name(), "run-1");
    }

    #[test]
    fn v2_without_cpu_or_swap_still_limits_memory_and_pids() {
        let (tmp, h) = v2_root("memory pids\n");
        let fake = FakeKernel::new(V2_FILES)
            .without("cpu.max")
            .without("memory.swap.max");
        RunCgroup::create_with(&h, "r", &limits(), &fake).unwrap();
        assert_eq!(
            read(tmp.path().join("cgroup.subtree_control")),
            "+memory +pids"
        );
        assert_eq!(read(tmp.path().join("band/r/memory.max")), "67108864");
        assert!(!tmp.path().join("band/r/cpu.max").exists());
        assert!(!tmp.path().join("band/r/memory.swap.max").exists());
    }

    #[test]
    fn v2_subtree_control_failure_names_the_file() {
        // A directory in its place fails both writes: with cpu, then the fallback without it.
        let (tmp, h) = v2_root("cpu memory pids\n");
        let control = tmp.path().join("cgroup.subtree_control");
        fs::remove_file(&control).unwrap();
        fs::create_dir(&control).unwrap();
        let err =
            RunCgroup::create_with(&h, "r", &limits(), &FakeKernel::new(V2_FILES)).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!(
                "failed to write +memory +pids to {}: ",
                control.display()
            )),
            "{msg}"
        );
    }

    #[test]
    fn v2_missing_pids_controller_fails_closed() {
        let (tmp, h) = v2_root("cpu memory\n");
        let err =
            RunCgroup::create_with(&h, "r", &limits(), &FakeKernel::new(V2_FILES)).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "the pids controller is not available in {}",
                tmp.path().join("cgroup.controllers").display()
            )
        );
        assert!(
            !tmp.path().join("band").exists(),
            "nothing created before the check"
        );
    }

    #[test]
    fn a_failed_write_names_the_file_and_removes_the_run_directory() {
        let (tmp, h) = v2_root("memory pids\n");
        let fake = FakeKernel::new(V2_FILES).without("memory.oom.group");
        let err = RunCgroup::create_with(&h, "r", &limits(), &fake).unwrap_err();
        let file = tmp.path().join("band/r/memory.oom.group");
        assert!(
            err.to_string()
                .starts_with(&format!("failed to write 1 to {}: ", file.display())),
            "{err}"
        );
        assert!(!tmp.path().join("band/r").exists(), "rolled back");
        assert!(tmp.path().join("band").exists(), "the shared parent stays");
    }

    #[test]
    fn an_existing_run_directory_is_an_error() {
        let (tmp, h) = v2_root("memory pids\n");
        let fake = FakeKernel::new(V2_FILES);
        RunCgroup::create_with(&h, "r", &limits(), &fake).unwrap();
        let err = RunCgroup::create_with(&h, "r", &limits(), &fake).unwrap_err();
        let dir = tmp.path().join("band/r");
        assert!(
            err.to_string()
                .starts_with(&format!("failed to create {}: ", dir.display())),
            "{err}"
        );
        assert!(dir.exists(), "the first run's directory is left alone");
    }

    #[test]
    fn v1_create_writes_exact_values() {
        let (tmp, h) = v1_roots(true, true);
        let cg =
            RunCgroup::create_with(&h, "run-1", &limits(), &FakeKernel::new(V1_FILES)).unwrap();
        let leaf = |hier: &str| tmp.path().join(hier).join("band/run-1");
        assert_eq!(
            read(leaf("memory").join("memory.limit_in_bytes")),
            "67108864"
        );
        assert_eq!(
            read(leaf("memory").join("memory.memsw.limit_in_bytes")),
            "67108864"
        );
        assert_eq!(read(leaf("memory").join("memory.swappiness")), "0");
        assert_eq!(read(leaf("pids").join("pids.max")), "16");
        assert_eq!(read(leaf("cpu").join("cpu.cfs_period_us")), "100000");
        assert_eq!(read(leaf("cpu").join("cpu.cfs_quota_us")), "50000");
        assert!(leaf("freezer").is_dir());
        assert_eq!(
            cg.procs_files(),
            ["memory", "pids", "cpu", "freezer"]
                .map(|h| leaf(h).join("cgroup.procs"))
                .to_vec()
        );
        assert_eq!(
            cg.join_files(),
            ["memory", "pids", "cpu", "freezer"]
                .map(|h| leaf(h).join("tasks"))
                .to_vec(),
            "v1 joins through `tasks` (single thread, no global lock)"
        );
    }

    #[test]
    fn v1_optional_files_may_be_missing_or_read_only() {
        let (tmp, h) = v1_roots(false, false);
        let fake = FakeKernel::new(V1_FILES)
            .without("memory.memsw.limit_in_bytes")
            .without("memory.swappiness");
        RunCgroup::create_with(&h, "r", &limits(), &fake).unwrap();
        let leaf = tmp.path().join("memory/band/r");
        assert_eq!(read(leaf.join("memory.limit_in_bytes")), "67108864");
        assert!(!leaf.join("memory.swappiness").exists());
    }

    #[test]
    fn v1_missing_pids_max_fails_closed_and_rolls_back_every_hierarchy() {
        let (tmp, h) = v1_roots(true, true);
        let fake = FakeKernel::new(V1_FILES).without("pids.max");
        let err = RunCgroup::create_with(&h, "r", &limits(), &fake).unwrap_err();
        assert!(err.to_string().contains("pids/band/r/pids.max"), "{err}");
        for hier in ["memory", "pids", "cpu", "freezer"] {
            assert!(!tmp.path().join(hier).join("band/r").exists(), "{hier}");
        }
    }
}
