//! Where the cgroup controllers are mounted: [`Hierarchy`], detected by a pure function of
//! `/proc/self/mountinfo` ([`Hierarchy::detect`]).

use fs_err as fs;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::CgroupError;

/// Where the cgroup controllers are mounted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hierarchy {
    /// The unified hierarchy, mounted at `root`, offering at least memory and pids.
    V2 { root: PathBuf },
    /// Per-controller hierarchies. memory and pids are required; cpu and freezer are used when
    /// mounted.
    V1 {
        memory: PathBuf,
        pids: PathBuf,
        cpu: Option<PathBuf>,
        freezer: Option<PathBuf>,
    },
}

impl Hierarchy {
    /// Chooses the hierarchy from the text of `/proc/self/mountinfo`.
    ///
    /// `read_controllers` is called with the mount point of each cgroup2 mount and returns the
    /// contents of its `cgroup.controllers` (or `None` if unreadable). A cgroup2 mount whose
    /// controllers include memory and pids wins; otherwise v1 memory and pids hierarchies are
    /// used. A hybrid host (cgroup2 at `/sys/fs/cgroup/unified` without controllers) is v1.
    pub(crate) fn detect(
        mountinfo: &str,
        read_controllers: impl Fn(&Path) -> Option<String>,
    ) -> Result<Hierarchy, CgroupError> {
        let mounts = parse_mountinfo(mountinfo);
        let mut notes = Vec::new();

        for mount in mounts.iter().filter(|m| m.v2) {
            let Some(controllers) = read_controllers(&mount.path) else {
                notes.push(format!(
                    "cannot read {}",
                    mount.path.join("cgroup.controllers").display()
                ));
                continue;
            };
            let have: BTreeSet<&str> = controllers.split_whitespace().collect();
            let missing: Vec<&str> = ["memory", "pids"]
                .into_iter()
                .filter(|c| !have.contains(c))
                .collect();
            if missing.is_empty() {
                return Ok(Hierarchy::V2 {
                    root: mount.path.clone(),
                });
            }
            notes.push(format!(
                "cgroup2 at {} lacks {}",
                mount.path.display(),
                missing.join(", ")
            ));
        }

        let v1 = |controller: &str| {
            mounts
                .iter()
                .find(|m| !m.v2 && m.options.iter().any(|o| o == controller))
                .map(|m| m.path.clone())
        };
        match (v1("memory"), v1("pids")) {
            (Some(memory), Some(pids)) => {
                return Ok(Hierarchy::V1 {
                    memory,
                    pids,
                    cpu: v1("cpu"),
                    freezer: v1("freezer"),
                });
            }
            (memory, pids) if mounts.iter().any(|m| !m.v2) => {
                let missing: Vec<&str> = [("memory", memory), ("pids", pids)]
                    .into_iter()
                    .filter(|(_, m)| m.is_none())
                    .map(|(c, _)| c)
                    .collect();
                notes.push(format!("cgroup v1 lacks {}", missing.join(", ")));
            }
            _ => {}
        }
        if mounts.is_empty() {
            notes.push("no cgroup or cgroup2 mount in mountinfo".to_string());
        }
        Err(CgroupError::NoHierarchy {
            reason: notes.join("; "),
        })
    }

    /// [`Hierarchy::detect`] on this process's `/proc/self/mountinfo`.
    pub fn detect_system() -> Result<Hierarchy, CgroupError> {
        let path = Path::new("/proc/self/mountinfo");
        let mountinfo = fs::read_to_string(path).map_err(|error| CgroupError::Read {
            path: path.to_path_buf(),
            error,
        })?;
        Hierarchy::detect(&mountinfo, |mount| {
            fs::read_to_string(mount.join("cgroup.controllers")).ok()
        })
    }
}

#[derive(Debug)]
struct CgroupMount {
    path: PathBuf,
    v2: bool,
    /// Superblock options; for v1 these name the controllers (`rw,cpu,cpuacct`).
    options: Vec<String>,
}

/// The cgroup and cgroup2 mounts in `mountinfo` (proc(5)):
/// `id parent maj:min root mount-point options [optional...] - fstype source super-options`.
fn parse_mountinfo(mountinfo: &str) -> Vec<CgroupMount> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let sep = fields.iter().position(|f| *f == "-")?;
            let mount_point = fields.get(4).filter(|_| sep >= 6)?;
            let v2 = match *fields.get(sep + 1)? {
                "cgroup2" => true,
                "cgroup" => false,
                _ => return None,
            };
            let options = fields
                .get(sep + 3)
                .map(|o| o.split(',').map(str::to_string).collect())
                .unwrap_or_default();
            Some(CgroupMount {
                path: PathBuf::from(unescape_mount_path(mount_point)),
                v2,
                options,
            })
        })
        .collect()
}

/// Undoes the kernel's octal escapes in mountinfo paths (`\040` for a space).
fn unescape_mount_path(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)))
            .map(|d| d.iter().fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0')));
        match octal.and_then(|v| u8::try_from(v).ok()) {
            Some(byte) => {
                out.push(byte);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    // ---- Detection.

    /// This project's CI machine: v1 controllers plus a controller-less cgroup2 (hybrid).
    const HYBRID: &str = "\
22 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime - sysfs sysfs rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    /// Debian 12 default: pure v2.
    const UNIFIED: &str = "\
25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
28 25 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";

    /// Ubuntu 20.04 style v1: cpu and cpuacct co-mounted, escaped path for good measure.
    const COMOUNTED: &str = "\
30 25 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
35 30 0:31 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,cpu,cpuacct
36 30 0:32 / /sys/fs/cgroup/memory\\040limits rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,memory
37 30 0:33 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:17 - cgroup cgroup rw,pids
";

    fn controllers(
        map: &'static [(&'static str, &'static str)],
    ) -> impl Fn(&Path) -> Option<String> {
        move |p| {
            map.iter()
                .find(|(path, _)| Path::new(path) == p)
                .map(|(_, c)| c.to_string())
        }
    }

    #[test]
    fn hybrid_host_is_v1() {
        let got = Hierarchy::detect(
            HYBRID,
            controllers(&[("/sys/fs/cgroup/unified", "hugetlb\n")]),
        );
        assert_eq!(
            got.unwrap(),
            Hierarchy::V1 {
                memory: "/sys/fs/cgroup/memory".into(),
                pids: "/sys/fs/cgroup/pids".into(),
                cpu: Some("/sys/fs/cgroup/cpu".into()),
                freezer: Some("/sys/fs/cgroup/freezer".into()),
            }
        );
    }

    #[test]
    fn unified_host_is_v2() {
        let got = Hierarchy::detect(
            UNIFIED,
            controllers(&[(
                "/sys/fs/cgroup",
                "cpuset cpu io memory hugetlb pids rdma misc\n",
            )]),
        );
        assert_eq!(
            got.unwrap(),
            Hierarchy::V2 {
                root: "/sys/fs/cgroup".into()
            }
        );
    }

    #[test]
    fn v2_with_the_controllers_wins_over_v1() {
        let got = Hierarchy::detect(
            HYBRID,
            controllers(&[("/sys/fs/cgroup/unified", "memory pids")]),
        );
        assert_eq!(
            got.unwrap(),
            Hierarchy::V2 {
                root: "/sys/fs/cgroup/unified".into()
            }
        );
    }

    #[test]
    fn comounted_v1_controllers_and_escaped_paths() {
        let got = Hierarchy::detect(COMOUNTED, controllers(&[("/sys/fs/cgroup/unified", "")]));
        assert_eq!(
            got.unwrap(),
            Hierarchy::V1 {
                memory: "/sys/fs/cgroup/memory limits".into(),
                pids: "/sys/fs/cgroup/pids".into(),
                cpu: Some("/sys/fs/cgroup/cpu,cpuacct".into()),
                freezer: None,
            }
        );
    }

    #[test]
    fn v2_without_pids_and_no_v1_is_an_error() {
        let err = Hierarchy::detect(UNIFIED, controllers(&[("/sys/fs/cgroup", "cpu memory io")]))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "no usable cgroup hierarchy: cgroup2 at /sys/fs/cgroup lacks pids"
        );
    }

    #[test]
    fn unreadable_v2_and_partial_v1_is_an_error() {
        let mountinfo = "\
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
";
        let err = Hierarchy::detect(mountinfo, |_| None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no usable cgroup hierarchy: cannot read /sys/fs/cgroup/unified/cgroup.controllers; \
             cgroup v1 lacks pids"
        );
    }

    #[test]
    fn no_cgroup_mounts_is_an_error() {
        let err =
            Hierarchy::detect("22 1 0:21 / /sys rw - sysfs sysfs rw\n", |_| None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no usable cgroup hierarchy: no cgroup or cgroup2 mount in mountinfo"
        );
    }
}
