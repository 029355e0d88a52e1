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
