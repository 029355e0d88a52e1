//! Test support: a stand-in for cgroupfs in a temporary directory ([`FakeKernel`], v1 and v2
//! roots), the limits the tests use, and builders of plan steps.

use fs_err as fs;
use std::io;
use std::path::Path;

use super::Hierarchy;
use super::cgroupfs::Dirs;
use super::plan::{CgroupLimits, Need, Op};

pub(super) const MIB: u64 = 1 << 20;

pub(super) fn limits() -> CgroupLimits {
    CgroupLimits {
        memory_bytes: 64 * MIB,
        pids: 16,
        cpu_quota_us: 50_000,
        cpu_period_us: 100_000,
    }
}

// ---- Applying against a temporary directory laid out like cgroupfs.

/// A stand-in for cgroupfs: `mkdir` creates the interface files the kernel would (minus
/// `absent`), `rmdir` removes the directory with them.
pub(super) struct FakeKernel {
    /// Files (with initial contents) of every new cgroup directory.
    files: Vec<(&'static str, &'static str)>,
    absent: Vec<&'static str>,
}

pub(super) const V2_FILES: &[(&str, &str)] = &[
    ("cgroup.controllers", "cpu memory pids\n"),
    ("cgroup.subtree_control", ""),
    ("cgroup.procs", ""),
    ("cgroup.kill", ""),
    ("cgroup.freeze", "0\n"),
    ("memory.max", "max\n"),
    ("memory.swap.max", "max\n"),
    ("memory.oom.group", "0\n"),
    ("memory.peak", "0\n"),
    (
        "memory.events",
        "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
    ),
    ("pids.max", "max\n"),
    ("pids.events", "max 0\n"),
    ("cpu.max", "max 100000\n"),
];

pub(super) const V1_FILES: &[(&str, &str)] = &[
    ("cgroup.procs", ""),
    ("memory.limit_in_bytes", "9223372036854771712\n"),
    ("memory.memsw.limit_in_bytes", "9223372036854771712\n"),
    ("memory.swappiness", "60\n"),
    ("memory.max_usage_in_bytes", "0\n"),
    (
        "memory.oom_control",
        "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
    ),
    ("pids.max", "max\n"),
    ("pids.events", "max 0\n"),
    ("cpu.cfs_period_us", "100000\n"),
    ("cpu.cfs_quota_us", "-1\n"),
    ("freezer.state", "THAWED\n"),
];

impl FakeKernel {
    pub(super) fn new(files: &[(&'static str, &'static str)]) -> FakeKernel {
        FakeKernel {
            files: files.to_vec(),
            absent: Vec::new(),
        }
    }

    pub(super) fn without(mut self, file: &'static str) -> FakeKernel {
        self.absent.push(file);
        self
    }
}

impl Dirs for FakeKernel {
    fn mkdir(&self, path: &Path) -> io::Result<()> {
        fs::create_dir(path)?;
        for (file, contents) in &self.files {
            if !self.absent.contains(file) {
                fs::write(path.join(file), contents)?;
            }
        }
        Ok(())
    }
    /// As the kernel: a cgroup with a process in its `cgroup.procs` is busy.
    fn rmdir(&self, path: &Path) -> io::Result<()> {
        if !path.exists() {
            return Err(io::ErrorKind::NotFound.into());
        }
        let procs = fs::read_to_string(path.join("cgroup.procs")).unwrap_or_default();
        if procs.lines().any(|l| !l.trim().is_empty()) {
            return Err(io::ErrorKind::ResourceBusy.into());
        }
        fs::remove_dir_all(path)
    }
}

/// A v2 root as the kernel presents it.
pub(super) fn v2_root(controllers: &str) -> (tempfile::TempDir, Hierarchy) {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("cgroup.controllers"), controllers).unwrap();
    fs::write(tmp.path().join("cgroup.subtree_control"), "").unwrap();
    let h = Hierarchy::V2 {
        root: tmp.path().to_path_buf(),
    };
    (tmp, h)
}

pub(super) fn v1_roots(cpu: bool, freezer: bool) -> (tempfile::TempDir, Hierarchy) {
    let tmp = tempfile::tempdir().unwrap();
    let mount = |name: &str| {
        let p = tmp.path().join(name);
        fs::create_dir(&p).unwrap();
        p
    };
    let h = Hierarchy::V1 {
        memory: mount("memory"),
        pids: mount("pids"),
        cpu: cpu.then(|| mount("cpu")),
        freezer: freezer.then(|| mount("freezer")),
    };
    (tmp, h)
}

pub(super) fn read(path: impl AsRef<Path>) -> String {
    fs::read_to_string(path).unwrap()
}

pub(super) fn w(path: &str, value: &str, need: Need) -> Op {
    Op::Write {
        path: path.into(),
        value: value.into(),
        need,
    }
}

pub(super) fn mkdir(path: &str, exist_ok: bool) -> Op {
    Op::Mkdir {
        path: path.into(),
        exist_ok,
    }
}
