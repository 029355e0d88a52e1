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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::cgroup::fake::*;
    use crate::layers::cgroup::{Hierarchy, RunCgroup};
    use fs_err as fs;
    use pretty_assertions::assert_eq;

    #[test]
    fn v1_plan() {
        let h = Hierarchy::V1 {
            memory: "/m".into(),
            pids: "/p".into(),
            cpu: Some("/c".into()),
            freezer: Some("/f".into()),
        };
        assert_eq!(
            h.version().plan_create("run-1", &limits()),
            vec![
                mkdir("/m/band", true),
                mkdir("/m/band/run-1", false),
                mkdir("/p/band", true),
                mkdir("/p/band/run-1", false),
                mkdir("/c/band", true),
                mkdir("/c/band/run-1", false),
                mkdir("/f/band", true),
                mkdir("/f/band/run-1", false),
                w(
                    "/m/band/run-1/memory.limit_in_bytes",
                    "67108864",
                    Need::Required
                ),
                w(
                    "/m/band/run-1/memory.memsw.limit_in_bytes",
                    "67108864",
                    Need::IfExists
                ),
                w("/m/band/run-1/memory.swappiness", "0", Need::BestEffort),
                w("/p/band/run-1/pids.max", "16", Need::Required),
                w("/c/band/run-1/cpu.cfs_period_us", "100000", Need::Required),
                w("/c/band/run-1/cpu.cfs_quota_us", "50000", Need::Required),
            ]
        );
    }

    #[test]
    fn v1_without_cpu_or_freezer_plans_neither() {
        let h = Hierarchy::V1 {
            memory: "/m".into(),
            pids: "/p".into(),
            cpu: None,
            freezer: None,
        };
        let ops = h.version().plan_create("r", &limits());
        let touched: Vec<&Path> = ops
            .iter()
            .map(|op| match op {
                Op::Mkdir { path, .. } | Op::Write { path, .. } => path.as_path(),
                Op::EnableControllers { dir } => dir.as_path(),
            })
            .collect();
        assert!(
            touched
                .iter()
                .all(|p| p.starts_with("/m") || p.starts_with("/p")),
            "{touched:?}"
        );
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

    #[test]
    fn v1_stats() {
        let (tmp, h) = v1_roots(false, false);
        let cg = RunCgroup::create_with(&h, "r", &limits(), &FakeKernel::new(V1_FILES)).unwrap();
        let memory = tmp.path().join("memory/band/r");
        fs::write(memory.join("memory.max_usage_in_bytes"), "33554432\n").unwrap();
        fs::write(
            memory.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n",
        )
        .unwrap();
        fs::write(tmp.path().join("pids/band/r/pids.events"), "max 11\n").unwrap();
        assert_eq!(
            cg.stats(),
            CgroupStats {
                peak_memory_bytes: Some(32 * MIB),
                oom_kills: 3,
                pids_max_hits: 11,
            }
        );
        // Before 4.13 there is no oom_kill line.
        fs::write(
            memory.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 1\n",
        )
        .unwrap();
        assert_eq!(cg.stats().oom_kills, 1);
    }
}
