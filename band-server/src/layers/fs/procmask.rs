//! What of `/proc` a run sees: its own processes and what ordinary programs need, never the
//! host kernel's facts (issue 36, item 7).
//!
//! bubblewrap mounts a fresh procfs in the run's pid namespace. Its `<pid>` folders are the run's
//! processes, and `net`, `mounts`, `sysvipc` are the run's own namespaces; the rest describes
//! the host: its kernel command line (secrets on some hosts), build configuration, boot id,
//! disks, devices, interrupts, memory layout, keys, locks of other users' processes. Container
//! runtimes hide a list of these (runc, youki and podman mask `acpi`, `asound`, `interrupts`,
//! `kcore`, `keys`, `latency_stats`, `timer_list`, `timer_stats`, `sched_debug`, `scsi`, and make
//! `bus`, `fs`, `irq`, `sys`, `sysrq-trigger` read-only). band goes further, the other way
//! round: at the top of `/proc`, every entry that is neither a process nor in [`KEPT`] is
//! covered, read-only, by an empty file or an empty folder, whatever the kernel calls it (so an
//! entry a newer kernel or a module adds is covered too); below it, the entries of [`MASKED`].
//!
//! The list is made per run from the host's own `/proc` ([`plan`]), which shows the kernel's
//! entries: band-server makes each cover after bubblewrap has mounted the run's `/proc`
//! ([`super::proc_cover`]), and an entry it cannot cover fails the run before the script starts
//! ("the sandbox did not start", the filesystem layer). The sandbox has no `/sys`.
//!
//! procfs lists the kernel's own entries first and the processes after them (`self`,
//! `thread-self`, then one folder per process: `proc_root_readdir` in the kernel's
//! `fs/proc/root.c`), so the listing for a run ends at `self` instead of making the kernel list
//! every process on the host (0.5 ms of a run's CPU with 1,000 of them). That order is checked
//! once, by a warm band-server before it serves, against a whole listing
//! ([`settle_listing_order`]); where it does not hold, and in a band-server that serves one run,
//! every run lists the whole folder.

use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::OnceLock;

use band::proto::Layer;
use fs_err as fs;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RawDir};

use crate::error::{SetupError, SetupResult};

/// The top-level entries of `/proc` a run keeps (besides its processes' folders), and why.
pub const KEPT: &[(&str, &str)] = &[
    ("self", "the reading process itself"),
    ("thread-self", "the reading thread itself"),
    (
        "mounts",
        "a link to self/mounts: the run's own mount namespace",
    ),
    ("net", "a link to self/net: the run's own network namespace"),
    ("sysvipc", "the run's own IPC namespace"),
    (
        "sys",
        "sysctls, read-only for the run; glibc, Go, node and python read some (ngroups_max, \
         overcommit_memory, somaxconn, random/uuid); the host's entries below are in MASKED",
    ),
    (
        "cpuinfo",
        "CPU count and features: node's os.cpus(), multiprocessing, BLAS, the JVM",
    ),
    (
        "meminfo",
        "memory totals: free, psutil, node's os.totalmem(), the JVM's heap sizing",
    ),
    ("stat", "boot time and CPU ticks: ps, top, psutil"),
    ("loadavg", "os.getloadavg(), uptime"),
    ("uptime", "ps's start times, uptime"),
    ("vmstat", "VM counters: psutil's swap_memory(), vmstat"),
    (
        "version",
        "the kernel's release and build, which uname(2) tells any process anyway",
    ),
    (
        "filesystems",
        "libselinux (in ls, ps and most of coreutils) and mount tools look for selinuxfs there",
    ),
    (
        "cgroups",
        "the cgroup controllers of this kernel build: the JVM reads it to size itself",
    ),
];

/// Entries below the top of `/proc` covered like the others (relative to `/proc`), and why.
pub const MASKED: &[(&str, &str)] = &[
    (
        "sys/kernel/random/boot_id",
        "names the host's boot: ties runs to one machine",
    ),
    (
        "sys/kernel/core_pattern",
        "the host's crash handler and its paths",
    ),
    ("sys/kernel/modprobe", "the host's module loader path"),
    (
        "sys/dev",
        "the host's devices: cdrom, raid, hpet, scsi, parport, i915",
    ),
];

pub use crate::common::handover::ProcMask;

/// Entries of `/proc` known to tell a run about the host (the third red-team round's, and
/// container runtimes' masked paths): each is covered, or left to the kernel's own check when
/// only root may open it. The tests check every one by name, on this host and inside a run.
pub const KNOWN_HOST_FACTS: &[&str] = &[
    "cmdline",
    "config.gz",
    "sys/kernel/random/boot_id",
    "diskstats",
    "partitions",
    "kallsyms",
    "modules",
    "iomem",
    "ioports",
    "keys",
    "key-users",
    "sched_debug",
    "timer_list",
    "vmallocinfo",
    "slabinfo",
    "buddyinfo",
    "pagetypeinfo",
    "zoneinfo",
    "swaps",
    "mdstat",
    "devices",
    "interrupts",
    "softirqs",
    "driver",
    "sysrq-trigger",
    "acpi",
    "scsi",
    "tty",
    "fs",
    "bootconfig",
    "kcore",
];

/// Is this top-level name kept: a process's folder or one of [`KEPT`]?
pub(crate) fn is_kept(name: &str) -> bool {
    is_process(name) || KEPT.iter().any(|(k, _)| *k == name)
}

/// Is this top-level name a process's folder (a pid)?
fn is_process(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit())
}

/// Is this top-level name one procfs lists before its processes: neither a pid nor `self` or
/// `thread-self`, which begin them?
fn listed_before_processes(name: &str) -> bool {
    !is_process(name) && name != "self" && name != "thread-self"
}

/// Whether only root may open an entry of these owner, group and mode at all (`kmsg`,
/// `kpageflags`, `slabinfo`, `timer_list`, `vmallocinfo` are 0400 root): a run's uid is never root
/// and holds no capability, so the kernel's own permission check refuses it, and a cover (a bind
/// bubblewrap makes, each one a mount and a re-read of the mount table) would add nothing.
pub(crate) fn only_root_opens(uid: u32, gid: u32, mode: u32) -> bool {
    uid == 0 && mode & 0o007 == 0 && (gid == 0 || mode & 0o070 == 0)
}

/// The covers for a kernel whose `/proc` is at `proc` (the host's, [`HOST_PROC`], for a run):
/// every top-level entry [`is_kept`] does not keep (but symlinks, which lead back into `/proc`,
/// and entries [`only_root_opens`]), then the entries of [`MASKED`] the kernel has, in that
/// order. Fails (the filesystem layer) when `proc` cannot be listed: the run would not know what
/// to hide.
pub fn plan(proc: &Path) -> SetupResult<Vec<ProcMask>> {
    let err = |e: std::io::Error| {
        SetupError::new(
            Layer::Filesystem,
            format!(
                "cannot list {} to hide the host's kernel facts from the run: {e}",
                proc.display()
            ),
        )
    };
    let until_processes = proc == Path::new(HOST_PROC) && LISTING_ORDER.get() == Some(&true);
    let (dir, entries) = top_level(proc, until_processes).map_err(err)?;
    let mut top: Vec<ProcMask> = Vec::new();
    for (name, kind) in entries {
        if is_kept(&name) {
            continue;
        }
        // An entry that cannot be looked at is covered all the same, as the listing typed it;
        // untyped, it is gone (a process's folder is kept anyway).
        let st = rustix::fs::statat(&dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW).ok();
        let kind = match (kind, &st) {
            (FileType::Unknown, Some(st)) => FileType::from_raw_mode(st.st_mode),
            (FileType::Unknown, None) => continue,
            (k, _) => k,
        };
        if kind == FileType::Symlink
            || st.is_some_and(|st| only_root_opens(st.st_uid, st.st_gid, st.st_mode))
        {
            continue;
        }
        top.push(ProcMask {
            path: name,
            dir: kind == FileType::Directory,
        });
    }
    top.sort_by(|a, b| a.path.cmp(&b.path));
    for (rel, _) in MASKED {
        if let Ok(m) = fs::symlink_metadata(proc.join(rel))
            && !m.file_type().is_symlink()
        {
            top.push(ProcMask {
                path: rel.to_string(),
                dir: m.is_dir(),
            });
        }
    }
    Ok(top)
}

/// The top-level entries of `proc` (names and the types the listing gives), and the open folder
/// to look at them in. With `until_processes`, the listing ends at `self`, where procfs begins
/// its processes; read in 2 KiB steps, so the kernel lists a few dozen processes past it at most,
/// not all.
fn top_level(
    proc: &Path,
    until_processes: bool,
) -> std::io::Result<(OwnedFd, Vec<(String, FileType)>)> {
    let dir = rustix::fs::open(
        proc,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut buf = [MaybeUninit::<u8>::uninit(); 2048];
    let mut entries = Vec::new();
    let mut listing = RawDir::new(&dir, &mut buf);
    while let Some(entry) = listing.next() {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy();
        if until_processes && name == "self" {
            break;
        }
        if name != "." && name != ".." {
            entries.push((name.into_owned(), entry.file_type()));
        }
    }
    Ok((dir, entries))
}

/// Whether the host's procfs lists every entry but processes before `self`, once it is settled
/// ([`settle_listing_order`]).
static LISTING_ORDER: OnceLock<bool> = OnceLock::new();

/// Settle whether the host's procfs lists every entry but processes before `self` (as every
/// kernel since `thread-self` came, 3.17, does), so a run's listing may end there: by listing
/// the whole of `/proc` and its beginning, once per process. A warm server calls it before it
/// forks its first run (a run's child would settle it for itself only). A difference (or an
/// error) means every run lists the whole folder.
pub fn settle_listing_order() -> bool {
    *LISTING_ORDER.get_or_init(|| {
        let proc = Path::new(HOST_PROC);
        let (Ok((_, whole)), Ok((_, head))) = (top_level(proc, false), top_level(proc, true))
        else {
            return false;
        };
        whole
            .iter()
            .filter(|(n, _)| listed_before_processes(n))
            .all(|e| head.contains(e))
    })
}

/// The host's `/proc`.
pub(crate) const HOST_PROC: &str = "/proc";

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use pretty_assertions::assert_eq;

    use super::*;

    fn mask(path: &str, dir: bool) -> ProcMask {
        ProcMask {
            path: path.into(),
            dir,
        }
    }

    #[test]
    fn an_entry_only_root_opens_is_left_to_the_kernels_check() {
        // kmsg, kpageflags, slabinfo: 0400 root.
        assert!(only_root_opens(0, 0, 0o100400));
        assert!(only_root_opens(0, 0, 0o100600));
        // Readable by the group root only: the run's uid is in no such group.
        assert!(only_root_opens(0, 0, 0o100440));
        // cmdline, diskstats: 0444 root. A group other than root could hold the run.
        assert!(!only_root_opens(0, 0, 0o100444));
        assert!(!only_root_opens(0, 5, 0o100440));
        // An entry someone else owns: covered.
        assert!(!only_root_opens(1000, 1000, 0o100400));
        // A folder anyone may enter: covered.
        assert!(!only_root_opens(0, 0, 0o040555));
    }

    #[test]
    fn everything_at_the_top_but_processes_and_the_kept_list_is_covered() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path();
        for d in ["1", "42", "acpi", "sys/kernel/random", "sys/dev", "net-x"] {
            fs::create_dir_all(p.join(d)).unwrap();
        }
        for f in [
            "cmdline",
            "cpuinfo",
            "meminfo",
            "config.gz",
            "a-new-kernel-entry",
            "sys/kernel/random/boot_id",
            "sys/kernel/random/uuid",
        ] {
            fs::write(p.join(f), "x").unwrap();
        }
        fs::os::unix::fs::symlink("42", p.join("self")).unwrap();
        fs::os::unix::fs::symlink("self/mounts", p.join("mounts")).unwrap();
        fs::os::unix::fs::symlink("elsewhere", p.join("odd-link")).unwrap();
        assert_eq!(
            plan(p).unwrap(),
            vec![
                mask("a-new-kernel-entry", false),
                mask("acpi", true),
                mask("cmdline", false),
                mask("config.gz", false),
                mask("net-x", true),
                mask("sys/kernel/random/boot_id", false),
                mask("sys/dev", true),
            ]
        );
        assert_eq!(
            mask("sys/dev", true).sandbox_path(),
            PathBuf::from("/proc/sys/dev")
        );
    }

    #[test]
    fn a_proc_that_cannot_be_listed_fails_the_run_in_the_filesystem_layer() {
        let e = plan(Path::new("/nonexistent/proc")).unwrap_err();
        assert_eq!(e.layer, Layer::Filesystem);
        assert!(e.message.contains("/nonexistent/proc"), "{e:?}");
    }

    #[test]
    fn processes_and_the_kept_entries_are_kept() {
        for k in [
            "1",
            "4194304",
            "self",
            "thread-self",
            "meminfo",
            "sys",
            "net",
        ] {
            assert!(is_kept(k), "{k}");
        }
        for m in ["", "cmdline", "kcore", "1a", "sysrq-trigger", "keys", "-1"] {
            assert!(!is_kept(m), "{m}");
        }
    }

    /// The host's listing for a run ends where the processes begin, and has every entry the
    /// whole listing has but them.
    #[test]
    fn the_hosts_listing_ends_at_its_processes_and_misses_nothing_else() {
        assert!(
            settle_listing_order(),
            "this kernel's procfs does not list its processes last"
        );
        let proc = Path::new(HOST_PROC);
        let (_, whole) = top_level(proc, false).unwrap();
        let (_, head) = top_level(proc, true).unwrap();
        assert!(whole.iter().any(|(n, _)| is_process(n)));
        assert!(
            head.iter().all(|(n, _)| listed_before_processes(n)),
            "{head:?}"
        );
        for e in whole.iter().filter(|(n, _)| listed_before_processes(n)) {
            assert!(head.contains(e), "{e:?} is missing from {head:?}");
        }
        assert!(head.iter().any(|(n, _)| n == "cmdline"), "{head:?}");
    }

    /// Every entry of this host's `/proc` that the issue names is covered, and what programs
    /// need is not.
    #[test]
    fn on_this_host_the_kernel_facts_are_covered() {
        let masks = plan(Path::new(HOST_PROC)).unwrap();
        let covered = |p: &str| masks.iter().any(|m| m.path == p);
        for p in KNOWN_HOST_FACTS {
            let path = Path::new(HOST_PROC).join(p);
            let root_only = fs::symlink_metadata(&path).is_ok_and(|m| {
                use std::os::unix::fs::MetadataExt;
                only_root_opens(m.uid(), m.gid(), m.mode())
            });
            if path.exists() && !root_only {
                assert!(covered(p), "{p} is not covered");
            }
        }
        for p in ["cpuinfo", "meminfo", "stat", "self", "sys", "uptime"] {
            assert!(!covered(p), "{p} is covered");
        }
    }
}
