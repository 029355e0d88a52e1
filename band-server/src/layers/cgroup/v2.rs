//! cgroup v2 (the production VM): one unified hierarchy; the run's cgroup is
//! `<root>/band/<name>`, with memory and pids (required) and cpu (when offered) enabled on its
//! ancestors.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::cgroupfs::{read_file, read_keyed, read_u64, write_file, write_raw};
use super::plan::{CgroupLimits, Need, Op, PARENT, write_op};
use super::version::{Freezer, Version};
use super::{CgroupError, CgroupStats};

/// The unified hierarchy mounted at `root`.
pub(super) struct V2<'a> {
    pub(super) root: &'a Path,
}

impl V2<'_> {
    fn leaf(&self, name: &str) -> PathBuf {
        self.root.join(PARENT).join(name)
    }
}

impl Version for V2<'_> {
    fn roots(&self) -> Vec<&Path> {
        vec![self.root]
    }

    fn plan_create(&self, name: &str, limits: &CgroupLimits) -> Vec<Op> {
        // Controllers are enabled on the ancestors only: a cgroup with processes cannot
        // also delegate controllers (EBUSY), so the leaf's subtree_control stays empty.
        let parent = self.root.join(PARENT);
        let leaf = parent.join(name);
        let cpu_max = if limits.cpu_quota_us == 0 {
            format!("max {}", limits.cpu_period_us)
        } else {
            format!("{} {}", limits.cpu_quota_us, limits.cpu_period_us)
        };
        vec![
            Op::EnableControllers {
                dir: self.root.to_path_buf(),
            },
            Op::Mkdir {
                path: parent.clone(),
                exist_ok: true,
            },
            Op::EnableControllers { dir: parent },
            Op::Mkdir {
                path: leaf.clone(),
                exist_ok: false,
            },
            write_op(&leaf, "memory.max", limits.memory_bytes, Need::Required),
            // Absent without swap accounting; then there is no swap to limit.
            write_op(&leaf, "memory.swap.max", 0, Need::IfExists),
            // An OOM kill takes the whole run, not one process of it.
            write_op(&leaf, "memory.oom.group", 1, Need::Required),
            write_op(&leaf, "pids.max", limits.pids, Need::Required),
            // Absent when the cpu controller could not be enabled (see EnableControllers).
            write_op(&leaf, "cpu.max", cpu_max, Need::IfExists),
        ]
    }

    /// `cgroup.procs`: v2 offers no thread-only path (like v1's `tasks`) for a domain cgroup.
    fn join_file(&self) -> &'static str {
        "cgroup.procs"
    }

    /// `cgroup.kill` (Linux 5.14 and later), which kills atomically, forks included.
    fn kill_file(&self, name: &str) -> Option<PathBuf> {
        Some(self.leaf(name).join("cgroup.kill"))
    }

    fn freezer(&self, name: &str) -> Option<Freezer> {
        Some(Freezer {
            path: self.leaf(name).join("cgroup.freeze"),
            frozen: "1",
            thawed: "0",
        })
    }

    fn stats(&self, name: &str) -> CgroupStats {
        let leaf = self.leaf(name);
        CgroupStats {
            peak_memory_bytes: read_u64(&leaf.join("memory.peak")),
            oom_kills: read_keyed(&leaf.join("memory.events"), "oom_kill").unwrap_or(0),
            pids_max_hits: read_keyed(&leaf.join("pids.events"), "max").unwrap_or(0),
        }
    }
}

/// [`Op::EnableControllers`]: enable memory and pids (required) and cpu (if offered) for the
/// children of `dir`.
pub(super) fn enable_controllers(dir: &Path) -> Result<(), CgroupError> {
    let offered_path = dir.join("cgroup.controllers");
    let offered = read_file(&offered_path)?;
    let offered: BTreeSet<&str> = offered.split_whitespace().collect();
    for controller in ["memory", "pids"] {
        if !offered.contains(controller) {
            return Err(CgroupError::MissingController {
                controller,
                path: offered_path,
            });
        }
    }
    let control = dir.join("cgroup.subtree_control");
    // One write enables all or none, so cpu (optional: absent, or EBUSY with realtime tasks)
    // gets a second chance without it.
    if offered.contains("cpu") && write_raw(&control, "+memory +pids +cpu").is_ok() {
        return Ok(());
    }
    write_file(&control, "+memory +pids")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::cgroup::fake::*;
    use crate::layers::cgroup::{Hierarchy, RunCgroup};
    use fs_err as fs;
    use pretty_assertions::assert_eq;

    #[test]
    fn v2_plan() {
        let h = Hierarchy::V2 { root: "/cg".into() };
        assert_eq!(
            h.version().plan_create("run-1", &limits()),
            vec![
                Op::EnableControllers { dir: "/cg".into() },
                mkdir("/cg/band", true),
                Op::EnableControllers {
                    dir: "/cg/band".into()
                },
                mkdir("/cg/band/run-1", false),
                w("/cg/band/run-1/memory.max", "67108864", Need::Required),
                w("/cg/band/run-1/memory.swap.max", "0", Need::IfExists),
                w("/cg/band/run-1/memory.oom.group", "1", Need::Required),
                w("/cg/band/run-1/pids.max", "16", Need::Required),
                w("/cg/band/run-1/cpu.max", "50000 100000", Need::IfExists),
            ]
        );
    }

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
    fn v2_stats() {
        let (tmp, h) = v2_root("memory pids\n");
        let cg = RunCgroup::create_with(&h, "r", &limits(), &FakeKernel::new(V2_FILES)).unwrap();
        let leaf = tmp.path().join("band/r");
        fs::write(leaf.join("memory.peak"), "5242880\n").unwrap();
        fs::write(
            leaf.join("memory.events"),
            "low 0\nhigh 0\nmax 9\noom 2\noom_kill 2\noom_group_kill 1\n",
        )
        .unwrap();
        fs::write(leaf.join("pids.events"), "max 4\n").unwrap();
        assert_eq!(
            cg.stats(),
            CgroupStats {
                peak_memory_bytes: Some(5 * MIB),
                oom_kills: 2,
                pids_max_hits: 4,
            }
        );
        fs::remove_file(leaf.join("memory.peak")).unwrap();
        assert_eq!(cg.stats().peak_memory_bytes, None, "before 5.19");
    }
}
