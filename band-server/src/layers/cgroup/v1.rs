//! cgroup v1 (older hosts and this project's CI): one hierarchy per controller; the run gets
//! `<mount>/band/<name>` in each of the memory and pids hierarchies, and in the cpu and freezer
//! ones when they are mounted.

use fs_err as fs;
use std::path::{Path, PathBuf};

use super::CgroupStats;
use super::cgroupfs::{keyed_value, read_keyed, read_u64};
use super::plan::{CgroupLimits, Need, Op, PARENT, write_op};
use super::version::{Freezer, Version};

/// Per-controller hierarchies: memory and pids required, cpu and freezer used when mounted.
pub(super) struct V1<'a> {
    pub(super) memory: &'a Path,
    pub(super) pids: &'a Path,
    pub(super) cpu: Option<&'a Path>,
    pub(super) freezer: Option<&'a Path>,
}

/// `mkdir` of the shared parent and of the run's directory under `root`; returns the latter.
fn plan_mkdirs(ops: &mut Vec<Op>, root: &Path, name: &str) -> PathBuf {
    let parent = root.join(PARENT);
    let leaf = parent.join(name);
    ops.push(Op::Mkdir {
        path: parent,
        exist_ok: true,
    });
    ops.push(Op::Mkdir {
        path: leaf.clone(),
        exist_ok: false,
    });
    leaf
}

impl Version for V1<'_> {
    /// memory, pids, then cpu and freezer if mounted.
    fn roots(&self) -> Vec<&Path> {
        [Some(self.memory), Some(self.pids), self.cpu, self.freezer]
            .into_iter()
            .flatten()
            .collect()
    }

    fn plan_create(&self, name: &str, limits: &CgroupLimits) -> Vec<Op> {
        let mut ops = Vec::new();
        let memory_leaf = plan_mkdirs(&mut ops, self.memory, name);
        let pids_leaf = plan_mkdirs(&mut ops, self.pids, name);
        let cpu_leaf = self.cpu.map(|cpu| plan_mkdirs(&mut ops, cpu, name));
        if let Some(freezer) = self.freezer {
            plan_mkdirs(&mut ops, freezer, name);
        }
        let bytes = limits.memory_bytes;
        ops.extend([
            write_op(&memory_leaf, "memory.limit_in_bytes", bytes, Need::Required),
            // memory+swap; absent without swap accounting. Must follow limit_in_bytes,
            // which it may not undercut.
            write_op(
                &memory_leaf,
                "memory.memsw.limit_in_bytes",
                bytes,
                Need::IfExists,
            ),
            write_op(&memory_leaf, "memory.swappiness", 0, Need::BestEffort),
            write_op(&pids_leaf, "pids.max", limits.pids, Need::Required),
        ]);
        if let Some(cpu_leaf) = cpu_leaf {
            let quota = match limits.cpu_quota_us {
                0 => "-1".to_string(),
                q => q.to_string(),
            };
            ops.extend([
                write_op(
                    &cpu_leaf,
                    "cpu.cfs_period_us",
                    limits.cpu_period_us,
                    Need::Required,
                ),
                write_op(&cpu_leaf, "cpu.cfs_quota_us", quota, Need::Required),
            ]);
        }
        ops
    }

    /// `tasks`, not `cgroup.procs`: writing `0` there moves only the calling thread, which
    /// (since Linux 5.19) skips the global threadgroup lock, and with it the RCU grace period
    /// that taking the lock for writing waits for (10-30 ms per run on a busy 2-core host,
    /// measured; one per hierarchy when the lock has gone idle in between). A forked child has
    /// exactly one thread, so moving it moves the whole process.
    fn join_file(&self) -> &'static str {
        "tasks"
    }

    /// None: v1 has no `cgroup.kill`.
    fn kill_file(&self, _name: &str) -> Option<PathBuf> {
        None
    }

    /// `freezer.state`, when the freezer hierarchy is mounted. (Frozen tasks die only once
    /// thawed.)
    fn freezer(&self, name: &str) -> Option<Freezer> {
        self.freezer.map(|f| Freezer {
            path: f.join(PARENT).join(name).join("freezer.state"),
            frozen: "FROZEN",
            thawed: "THAWED",
        })
    }

    fn stats(&self, name: &str) -> CgroupStats {
        let memory = self.memory.join(PARENT).join(name);
        let pids = self.pids.join(PARENT).join(name);
        let oom_control = fs::read_to_string(memory.join("memory.oom_control"));
        // `oom_kill` appeared in 4.13; before it, `under_oom 1` is the only sign.
        let oom_kills = oom_control.ok().and_then(|text| {
            keyed_value(&text, "oom_kill").or_else(|| keyed_value(&text, "under_oom"))
        });
        CgroupStats {
            peak_memory_bytes: read_u64(&memory.join("memory.max_usage_in_bytes")),
            oom_kills: oom_kills.unwrap_or(0),
            pids_max_hits: read_keyed(&pids.join("pids.events"), "max").unwrap_or(0),
        }
    }
}
