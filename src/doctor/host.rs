//! The host's checks: the platform, the tools each target needs, the accelerator (KVM) and free
//! disk for the VM image.

use std::path::{Path, PathBuf};

use super::{Check, Host, Level};
use crate::units::format_bytes;
use crate::vm::image;
use crate::vm::qemu::{self, Accel, AccelChoice};

/// A tool a target needs, found on the host's search path.
struct Tool {
    name: &'static str,
    binary: &'static str,
    fix: &'static str,
    /// Missing: `fail` (a target will not work) rather than `warn`.
    needed: bool,
}

/// The Linux host target's and the qemu driver's tools.
const LINUX_TOOLS: [Tool; 7] = [
    Tool {
        name: "bwrap (host target)",
        binary: "bwrap",
        fix: "band setup --driver host (or apt-get install bubblewrap)",
        needed: false,
    },
    Tool {
        name: "nft (host target)",
        binary: "nft",
        fix: "band setup --driver host (or apt-get install nftables)",
        needed: false,
    },
    Tool {
        name: "slirp4netns (host target)",
        binary: "slirp4netns",
        fix: "band setup --driver host (or apt-get install slirp4netns)",
        needed: false,
    },
    Tool {
        name: "qemu",
        binary: if cfg!(target_arch = "aarch64") {
            "qemu-system-aarch64"
        } else {
            "qemu-system-x86_64"
        },
        fix: "apt-get install qemu-system-x86",
        needed: false,
    },
    Tool {
        name: "qemu-img",
        binary: "qemu-img",
        fix: "apt-get install qemu-utils",
        needed: false,
    },
    Tool {
        name: "mmdebstrap",
        binary: "mmdebstrap",
        fix: "apt-get install mmdebstrap",
        needed: false,
    },
    Tool {
        name: "mkfs.ext4",
        binary: "mkfs.ext4",
        fix: "apt-get install e2fsprogs",
        needed: false,
    },
];

/// The SSH tools: keys for every VM target, and the client that reaches them.
const SSH_TOOLS: [Tool; 2] = [
    Tool {
        name: "ssh-keygen",
        binary: "ssh-keygen",
        fix: "apt-get install openssh-client",
        needed: true,
    },
    // Every VM and ssh:// target is reached through the system OpenSSH client.
    Tool {
        name: "ssh (VM targets)",
        binary: "ssh",
        fix: "apt-get install openssh-client",
        needed: true,
    },
];

/// The VM image build needs about this much free space.
const IMAGE_BYTES: u64 = 4 << 30;

/// The OS and architecture band runs on.
pub(super) fn platform(_: &Host) -> Vec<Check> {
    vec![Check::new(
        "host",
        Level::Ok,
        format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
    )]
}

/// The host target: band-server needs root, as band itself or through `sudo -n`.
pub(super) fn host_target(host: &Host) -> Vec<Check> {
    if !host.linux {
        return Vec::new();
    }
    vec![if host.root {
        Check::new("host target", Level::Ok, "root: band-server runs directly")
    } else if host.sudo_allows {
        Check::new("host target", Level::Ok, "sudo -n may run band-server")
    } else {
        Check::new(
            "host target",
            Level::Warn,
            "not root, and `sudo -n` may not run band-server: runs go to the VM once `band setup` made one",
        )
        .fix("band setup --driver qemu (no root needed); or run band as root, or allow `sudo -n band-server`")
    }]
}

/// band-server where the host target starts it: beside `band` (or `$BAND_SERVER`).
pub(super) fn band_server(host: &Host) -> Vec<Check> {
    if !host.linux {
        return Vec::new();
    }
    let server = &host.band_server;
    let found = if server.is_absolute() {
        is_executable(server).then(|| server.clone())
    } else {
        find(host, &server.to_string_lossy())
    };
    vec![match found {
        Some(p) => Check::new("band-server", Level::Ok, p.display().to_string()),
        None => Check::new(
            "band-server",
            Level::Warn,
            format!(
                "{} not found: the host target cannot start",
                server.display()
            ),
        )
        .fix("install band-server beside band (the release archive has both; or cargo build --workspace), or set BAND_SERVER"),
    }]
}

/// The host's warm band-server (root on Linux only; on unless `warm = false` in the user config
/// or `BAND_WARM=0`): off, or whether one serves this band-server and its settings now.
pub(super) fn warm_server(host: &Host) -> Vec<Check> {
    if !host.linux || !host.root {
        return Vec::new();
    }
    if !host.warm {
        return vec![Check::new(
            "warm server",
            Level::Ok,
            "off: each run starts band-server (`warm = false` in the config, or BAND_WARM=0)",
        )];
    }
    let socket = crate::warm::digest_here(&host.band_server)
        .map(|d| crate::warm::socket(&host.warm_dir, &d));
    let pid = fs_err::read_to_string(host.warm_dir.join("serve.pid"))
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<u32>().ok())
        .filter(|p| Path::new(&format!("/proc/{p}")).exists());
    vec![match (socket.filter(|s| s.exists()), pid) {
        (Some(_), Some(pid)) => Check::new(
            "warm server",
            Level::Ok,
            format!(
                "on: pid {pid} serves runs of this band-server and its settings, with a spare sandbox of the last script run"
            ),
        ),
        _ => Check::new(
            "warm server",
            Level::Ok,
            "on: none serves this band-server and its settings yet; the next run starts one",
        ),
    }]
}

/// Whether the sandbox can be made here, tried for real: bubblewrap runs (`bwrap --ro-bind / /
/// true`), the kernel's Landlock ABI, and whether AppArmor keeps user namespaces from
/// unconfined programs (Ubuntu 23.10+), which stops bwrap without root.
pub(super) fn sandbox(host: &Host) -> Vec<Check> {
    if !host.linux {
        return Vec::new();
    }
    let bwrap = match &host.bwrap_tried {
        None => Check::new("bwrap works", Level::Skip, "bwrap is not installed"),
        Some(Ok(())) => Check::new("bwrap works", Level::Ok, "`bwrap --ro-bind / / true` ran"),
        Some(Err(why)) => Check::new(
            "bwrap works",
            Level::Warn,
            format!("`bwrap --ro-bind / / true` failed: {why}"),
        )
        .fix(if host.root {
            "check that the kernel allows namespaces (user.max_user_namespaces, a container's seccomp profile)"
        } else {
            "run band as root (or through sudo -n): band-server runs bwrap as root"
        }),
    };
    let landlock = match host.landlock_abi {
        None => Check::new(
            "landlock",
            Level::Warn,
            "not available (off, or a kernel before 5.13): the sandbox runs without it",
        )
        .fix("boot a kernel with Landlock enabled (lsm=…,landlock)"),
        Some(abi) if abi < 6 => Check::new(
            "landlock",
            Level::Warn,
            format!(
                "ABI {abi}: no scoping of abstract unix sockets and signals (ABI 6, Linux 6.12+)"
            ),
        )
        .fix("a Linux 6.12+ kernel for the full sandbox"),
        Some(abi) => Check::new("landlock", Level::Ok, format!("ABI {abi}")),
    };
    let restricted = fs_err::read_to_string(&host.apparmor_userns)
        .ok()
        .map(|t| t.trim() == "1");
    let userns = match restricted {
        None => Check::new(
            "user namespaces",
            Level::Ok,
            "AppArmor does not restrict them",
        ),
        Some(false) => Check::new(
            "user namespaces",
            Level::Ok,
            format!("AppArmor does not restrict them ({} is 0)", host.apparmor_userns.display()),
        ),
        Some(true) if host.root => Check::new(
            "user namespaces",
            Level::Ok,
            format!("AppArmor restricts them for unprivileged programs ({} is 1); root is not restricted", host.apparmor_userns.display()),
        ),
        Some(true) => Check::new(
            "user namespaces",
            Level::Warn,
            format!("AppArmor keeps unprivileged programs from making them ({} is 1): rootless image builds fail", host.apparmor_userns.display()),
        )
        .fix("run band as root (or through sudo -n), or allow them: sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0"),
    };
    vec![bwrap, landlock, userns]
}

/// An ordinary user's image build (mmdebstrap's unshare mode): newuidmap and newgidmap, and a
/// range of subordinate ids in `/etc/subuid` and `/etc/subgid`. Root needs none of it.
pub(super) fn rootless_build(host: &Host) -> Vec<Check> {
    if !host.linux {
        return Vec::new();
    }
    if host.root {
        return vec![Check::new(
            "rootless build",
            Level::Skip,
            "root: the image is built in mmdebstrap's root mode",
        )];
    }
    let mut checks: Vec<Check> = ["newuidmap", "newgidmap"]
        .into_iter()
        .map(|binary| {
            tool(
                host,
                &Tool {
                    name: binary,
                    binary,
                    fix: "apt-get install uidmap",
                    needed: false,
                },
            )
        })
        .collect();
    for (name, file) in [("subuid", &host.subuid), ("subgid", &host.subgid)] {
        checks.push(subid_check(name, file, &host.user));
    }
    checks
}

fn subid_check(name: &'static str, file: &Path, user: &str) -> Check {
    let fix = format!(
        "as root: usermod --add-subuids 100000-165535 --add-subgids 100000-165535 {user} (a range no other user has)"
    );
    let text = match fs_err::read_to_string(file) {
        Ok(t) => t,
        Err(e) => {
            return Check::new(
                name,
                Level::Warn,
                format!("{e}: the image cannot be built without root"),
            )
            .fix(fix);
        }
    };
    match image::subid_range(&text, user) {
        Some((start, n)) if n >= image::SUBID_COUNT => Check::new(
            name,
            Level::Ok,
            format!("{user}: {start}-{} ({n} ids)", start + n - 1),
        ),
        Some((_, n)) => Check::new(
            name,
            Level::Warn,
            format!(
                "{user} has only {n} ids in {}; the image build needs {}",
                file.display(),
                image::SUBID_COUNT
            ),
        )
        .fix(fix),
        None => Check::new(
            name,
            Level::Warn,
            format!(
                "no range for {user} in {}: the image cannot be built without root",
                file.display()
            ),
        )
        .fix(fix),
    }
}

pub(super) fn linux_tools(host: &Host) -> Vec<Check> {
    if !host.linux {
        return Vec::new();
    }
    LINUX_TOOLS.iter().map(|t| tool(host, t)).collect()
}

/// limactl: needed off Linux, optional on it.
pub(super) fn lima(host: &Host) -> Vec<Check> {
    let lima = Tool {
        name: "limactl",
        binary: "limactl",
        fix: "brew install lima",
        needed: !host.linux,
    };
    let check = tool(host, &lima);
    if host.linux && check.level != Level::Ok {
        return vec![Check::new(
            "limactl",
            Level::Skip,
            "not installed (optional on Linux: the qemu driver needs no Lima)",
        )];
    }
    vec![check]
}

pub(super) fn ssh_tools(host: &Host) -> Vec<Check> {
    SSH_TOOLS.iter().map(|t| tool(host, t)).collect()
}

/// Where `binary` is: the first executable in `host.path`, else any file in `host.sbin`.
fn find(host: &Host, binary: &str) -> Option<PathBuf> {
    host.path
        .iter()
        .map(|d| d.join(binary))
        .find(|p| is_executable(p))
        .or_else(|| {
            host.sbin
                .iter()
                .map(|d| d.join(binary))
                .find(|p| p.is_file())
        })
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs_err::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn tool(host: &Host, t: &Tool) -> Check {
    match find(host, t.binary) {
        Some(p) => Check::new(t.name, Level::Ok, p.display().to_string()),
        None => Check::new(
            t.name,
            if t.needed { Level::Fail } else { Level::Warn },
            format!("{} not found", t.binary),
        )
        .fix(t.fix),
    }
}

/// KVM (fast) or TCG (emulation) for the qemu VM.
pub(super) fn accelerator(host: &Host) -> Vec<Check> {
    vec![accelerator_check(host)]
}

fn accelerator_check(host: &Host) -> Check {
    if !host.linux {
        return Check::new(
            "accelerator",
            Level::Skip,
            "macOS: Lima uses Apple's Hypervisor.framework (vz) itself",
        );
    }
    let dev = &host.kvm;
    if !dev.exists() {
        return Check::new(
            "accelerator",
            Level::Warn,
            format!(
                "no {}: the qemu VM runs under TCG (emulation, several times slower)",
                dev.display()
            ),
        )
        .fix("enable virtualisation (VT-x/AMD-V, nested virtualisation on a cloud VM) and load kvm_intel/kvm_amd");
    }
    if let Err(e) = qemu::kvm_device_opens(dev) {
        return Check::new(
            "accelerator",
            Level::Warn,
            format!("{e}: the qemu VM runs under TCG (emulation, slower)"),
        )
        .fix("for KVM: add yourself to the kvm group (`usermod -aG kvm USER` as root, then log in again)");
    }
    let paths = &host.vm;
    let cached: Option<AccelChoice> = fs_err::read_to_string(paths.accel_cache())
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    let probed = cached.or_else(|| {
        let img = image::cached(paths)?;
        let bin = qemu::binary()?;
        Some(qemu::choose_accel(paths, &bin, &img.kernel()))
    });
    accelerator_verdict(probed)
}

/// What the KVM probe (cached, or run on a built image) said; `None` when there is neither.
fn accelerator_verdict(probed: Option<AccelChoice>) -> Check {
    match probed {
        Some(c) if c.accel == Accel::Kvm => {
            Check::new("accelerator", Level::Ok, format!("kvm ({})", c.reason))
        }
        Some(c) => Check::new("accelerator", Level::Warn, format!("tcg: {}", c.reason))
            .fix("the VM works under TCG, only slower; fix KVM on the host for speed"),
        None => Check::new(
            "accelerator",
            Level::Ok,
            "/dev/kvm opens; a guest boot is probed at `band setup` (a /dev/kvm that opens may still hang)",
        ),
    }
}

/// Free space where the VM image goes (the data folder, or its nearest existing parent).
pub(super) fn free_disk(host: &Host) -> Vec<Check> {
    let mut dir = host.vm.root.clone();
    while !dir.exists() {
        if !dir.pop() {
            break;
        }
    }
    let out = std::process::Command::new("df")
        .arg("-Pk")
        .arg(&dir)
        .output();
    let free = out
        .ok()
        .and_then(|o| parse_df_available(&String::from_utf8_lossy(&o.stdout)));
    vec![free_disk_verdict(&dir, free)]
}

fn free_disk_verdict(dir: &Path, free: Option<u64>) -> Check {
    match free {
        Some(b) if b >= IMAGE_BYTES => Check::new(
            "free disk",
            Level::Ok,
            format!("{} free at {}", format_bytes(b), dir.display()),
        ),
        Some(b) => Check::new(
            "free disk",
            Level::Fail,
            format!(
                "only {} free at {}; the image build needs about 4 GiB",
                format_bytes(b),
                dir.display()
            ),
        )
        .fix("free space, or set data_dir in ~/.config/band/config.toml"),
        None => Check::new(
            "free disk",
            Level::Warn,
            format!("could not measure free space at {}", dir.display()),
        ),
    }
}

/// Free bytes from `df -Pk DIR` output (POSIX format, 1024-byte blocks).
pub fn parse_df_available(text: &str) -> Option<u64> {
    let line = text.lines().nth(1)?;
    let avail: u64 = line.split_whitespace().nth(3)?.parse().ok()?;
    Some(avail * 1024)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::super::tests::bare;
    use super::*;

    fn write(path: &Path, text: &str, mode: u32) {
        if let Some(d) = path.parent() {
            fs_err::create_dir_all(d).expect("mkdir");
        }
        fs_err::write(path, text).expect("write");
        fs_err::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    #[test]
    fn df_output_is_parsed() {
        let text = "Filesystem     1024-blocks      Used Available Capacity Mounted on\n/dev/vda        263174212  33521244 62795512      35% /\n";
        assert_eq!(parse_df_available(text), Some(62_795_512 * 1024));
        assert_eq!(parse_df_available("garbage"), None);
        assert_eq!(parse_df_available("header\n/dev/x 1 2 lots 3% /\n"), None);
        assert_eq!(parse_df_available("header\n/dev/x 1 2\n"), None);
    }

    #[test]
    fn free_disk_needs_room_for_the_image() {
        let dir = Path::new("/data");
        let ok = free_disk_verdict(dir, Some(IMAGE_BYTES));
        assert_eq!(ok.level, Level::Ok);
        assert_eq!(ok.detail, "4 GiB free at /data");
        let low = free_disk_verdict(dir, Some(IMAGE_BYTES - 1));
        assert_eq!(low.level, Level::Fail);
        assert!(low.fix.is_some());
        assert_eq!(free_disk_verdict(dir, None).level, Level::Warn);
    }

    #[test]
    fn free_disk_measures_the_nearest_existing_folder() {
        let dir = tempfile::tempdir().expect("tmp");
        let c = free_disk(&bare(dir.path())).remove(0);
        // The data folder does not exist yet: its parent is measured.
        assert!(
            c.detail.ends_with(&dir.path().display().to_string()),
            "{c:?}"
        );
    }

    #[test]
    fn a_missing_required_tool_fails_and_says_how_to_fix_it() {
        let dir = tempfile::tempdir().expect("tmp");
        let host = bare(dir.path());
        let t = |needed| Tool {
            name: "x",
            binary: "band-no-such-tool",
            fix: "apt-get install x",
            needed,
        };
        let c = tool(&host, &t(true));
        assert_eq!(c.level, Level::Fail);
        assert_eq!(c.detail, "band-no-such-tool not found");
        assert_eq!(c.fix.as_deref(), Some("apt-get install x"));
        assert_eq!(tool(&host, &t(false)).level, Level::Warn);
    }

    #[test]
    fn tools_are_executables_on_the_path_or_any_file_in_sbin() {
        let dir = tempfile::tempdir().expect("tmp");
        let host = bare(dir.path());
        let t = |binary| Tool {
            name: "x",
            binary,
            fix: "",
            needed: true,
        };
        write(&dir.path().join("bin/runs"), "", 0o755);
        write(&dir.path().join("bin/plain"), "", 0o644);
        write(&dir.path().join("sbin/admin"), "", 0o644);
        let found = tool(&host, &t("runs"));
        assert_eq!(found.level, Level::Ok);
        assert_eq!(
            found.detail,
            dir.path().join("bin/runs").display().to_string()
        );
        assert_eq!(found.fix, None);
        assert_eq!(tool(&host, &t("plain")).level, Level::Fail);
        assert_eq!(tool(&host, &t("admin")).level, Level::Ok);
    }

    #[test]
    fn lima_is_optional_on_linux() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut host = bare(dir.path());
        assert_eq!(lima(&host)[0].level, Level::Skip);
        write(&dir.path().join("bin/limactl"), "", 0o755);
        assert_eq!(lima(&host)[0].level, Level::Ok);
        host.linux = false;
        assert_eq!(lima(&host)[0].level, Level::Ok);
    }

    #[test]
    fn without_a_kvm_device_the_vm_is_emulated() {
        let dir = tempfile::tempdir().expect("tmp");
        let host = bare(dir.path());
        let c = accelerator_check(&host);
        assert_eq!(c.level, Level::Warn);
        assert!(
            c.detail
                .starts_with(&format!("no {}: ", host.kvm.display())),
            "{c:?}"
        );
        assert!(c.fix.is_some());
    }

    #[test]
    fn band_server_must_be_beside_band() {
        let dir = tempfile::tempdir().expect("tmp");
        let host = bare(dir.path());
        let c = band_server(&host).remove(0);
        assert_eq!(c.level, Level::Warn, "{c:?}");
        assert!(
            c.detail
                .ends_with("not found: the host target cannot start"),
            "{c:?}"
        );
        write(&host.band_server, "#!/bin/sh\n", 0o755);
        assert_eq!(band_server(&host)[0].level, Level::Ok);
        write(&host.band_server, "", 0o644);
        assert_eq!(band_server(&host)[0].level, Level::Warn, "not executable");
    }

    #[test]
    fn the_sandbox_is_tried_bwrap_landlock_and_apparmor() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut host = bare(dir.path());
        let by_name = |host: &Host| -> Vec<(&'static str, Level, String)> {
            sandbox(host)
                .into_iter()
                .map(|c| (c.name, c.level, c.detail))
                .collect()
        };
        let all = by_name(&host);
        assert_eq!(all[0].1, Level::Skip, "no bwrap: {all:?}");
        assert_eq!(all[1].1, Level::Warn, "no landlock: {all:?}");
        assert_eq!(all[2].1, Level::Ok, "no AppArmor file: {all:?}");

        host.bwrap_tried = Some(Err(crate::doctor::BwrapError::Said(
            "bwrap: setting up uid map: Permission denied".into(),
        )));
        host.landlock_abi = Some(3);
        fs_err::write(&host.apparmor_userns, "1\n").expect("write");
        let all = by_name(&host);
        assert_eq!(all[0].1, Level::Warn);
        assert!(
            all[0]
                .2
                .ends_with("failed: bwrap: setting up uid map: Permission denied"),
            "{all:?}"
        );
        assert_eq!(
            (all[1].1, all[1].2.starts_with("ABI 3:")),
            (Level::Warn, true),
            "{all:?}"
        );
        assert_eq!(all[2].1, Level::Warn, "restricted, not root: {all:?}");
        assert!(
            sandbox(&host)[2]
                .fix
                .as_deref()
                .is_some_and(|f| f.contains("apparmor_restrict_unprivileged_userns=0"))
        );

        host.root = true;
        host.bwrap_tried = Some(Ok(()));
        host.landlock_abi = Some(6);
        let all = by_name(&host);
        assert_eq!([all[0].1, all[1].1, all[2].1], [Level::Ok; 3], "{all:?}");
        fs_err::write(&host.apparmor_userns, "0\n").expect("write");
        host.root = false;
        assert_eq!(by_name(&host)[2].1, Level::Ok);
        host.linux = false;
        assert!(sandbox(&host).is_empty());
    }

    #[test]
    fn the_warm_server_is_off_unless_the_config_says_on_and_then_serves_or_not_yet() {
        let dir = tempfile::tempdir().expect("tmp");
        let detail = |host: &Host| {
            let checks = warm_server(host);
            assert!(checks.iter().all(|c| c.level == Level::Ok));
            checks.into_iter().map(|c| c.detail).collect::<Vec<_>>()
        };
        // Not root, or not Linux: no warm server at all.
        assert!(detail(&bare(dir.path())).is_empty());
        let root = Host {
            root: true,
            ..bare(dir.path())
        };
        assert!(
            detail(&Host {
                linux: false,
                ..root.clone()
            })
            .is_empty()
        );
        assert!(detail(&root)[0].starts_with("off: "));

        let on = Host { warm: true, ..root };
        write(&on.band_server, "server", 0o755);
        assert!(detail(&on)[0].contains("the next run starts one"));
        // A socket of this band-server and its settings, and a live pid.
        let digest = crate::warm::digest_here(&on.band_server).expect("digest");
        write(&crate::warm::socket(&on.warm_dir, &digest), "", 0o600);
        write(
            &on.warm_dir.join("serve.pid"),
            &format!("{} {digest}\n", std::process::id()),
            0o644,
        );
        assert_eq!(
            detail(&on),
            [format!(
                "on: pid {} serves runs of this band-server and its settings, with a spare sandbox of the last script run",
                std::process::id()
            )]
        );
        // Another build of band-server: its socket is not this one's.
        write(&on.band_server, "another build", 0o755);
        assert!(detail(&on)[0].contains("the next run starts one"));
    }

    #[test]
    fn the_host_target_needs_root_or_sudo() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut host = bare(dir.path());
        let c = host_target(&host).remove(0);
        assert_eq!(c.level, Level::Warn);
        assert!(
            c.detail.contains("`sudo -n` may not run band-server"),
            "{c:?}"
        );
        assert!(
            c.fix.as_deref().is_some_and(|f| f.contains("band setup")),
            "{c:?}"
        );
        host.sudo_allows = true;
        assert_eq!(host_target(&host)[0].level, Level::Ok);
        host.sudo_allows = false;
        host.root = true;
        assert_eq!(
            host_target(&host)[0].detail,
            "root: band-server runs directly"
        );
        host.linux = false;
        assert!(host_target(&host).is_empty());
    }

    #[test]
    fn a_rootless_build_needs_uidmap_and_subordinate_ids() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut host = bare(dir.path());
        let level = |host: &Host, name: &str| {
            rootless_build(host)
                .into_iter()
                .find(|c| c.name == name)
                .map(|c| (c.level, c.detail, c.fix))
        };
        // Nothing there: every line says what to do.
        for name in ["newuidmap", "newgidmap", "subuid", "subgid"] {
            let (l, _, fix) = level(&host, name).expect(name);
            assert_eq!(l, Level::Warn, "{name}");
            assert!(fix.is_some(), "{name}");
        }
        assert_eq!(
            level(&host, "newuidmap").and_then(|c| c.2).as_deref(),
            Some("apt-get install uidmap")
        );
        write(&dir.path().join("bin/newuidmap"), "", 0o755);
        write(&dir.path().join("bin/newgidmap"), "", 0o755);
        write(
            &host.subuid,
            "bob:100000:65536\nalice:165536:65536\n",
            0o644,
        );
        write(&host.subgid, "alice:165536:1000\n", 0o644);
        assert_eq!(level(&host, "newuidmap").map(|c| c.0), Some(Level::Ok));
        assert_eq!(
            level(&host, "subuid").map(|c| (c.0, c.1)),
            Some((Level::Ok, "alice: 165536-231071 (65536 ids)".to_string()))
        );
        let (l, detail, _) = level(&host, "subgid").expect("subgid");
        assert_eq!(l, Level::Warn);
        assert!(
            detail.starts_with("alice has only 1000 ids in "),
            "{detail}"
        );
        write(&host.subgid, "bob:100000:65536\n", 0o644);
        let (_, detail, fix) = level(&host, "subgid").expect("subgid");
        assert!(detail.starts_with("no range for alice in "), "{detail}");
        assert!(fix.is_some_and(|f| f.contains("usermod --add-subuids")));
        // Root builds without a user namespace.
        host.root = true;
        let c = rootless_build(&host);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].level, Level::Skip);
    }

    #[test]
    fn a_kvm_device_that_does_not_open_means_tcg() {
        let dir = tempfile::tempdir().expect("tmp");
        let host = bare(dir.path());
        // A folder never opens read-write, even for root.
        fs_err::create_dir_all(&host.kvm).expect("mkdir");
        let c = accelerator_check(&host);
        assert_eq!(c.level, Level::Warn);
        assert!(
            c.detail
                .ends_with("the qemu VM runs under TCG (emulation, slower)"),
            "{c:?}"
        );
        assert!(c.fix.is_some_and(|f| f.contains("kvm group")));
    }

    #[test]
    fn the_cached_probe_decides_the_accelerator() {
        let dir = tempfile::tempdir().expect("tmp");
        let host = bare(dir.path());
        // A device that opens (a plain file stands in for /dev/kvm), nothing probed yet.
        write(&host.kvm, "", 0o600);
        assert_eq!(accelerator_check(&host).level, Level::Ok);
        let probe = |accel| {
            let c = AccelChoice {
                accel,
                reason: "probed".into(),
                boot_id: String::new(),
            };
            write(
                &host.vm.accel_cache(),
                &serde_json::to_string(&c).expect("json"),
                0o644,
            );
            accelerator_check(&host)
        };
        let kvm = probe(Accel::Kvm);
        assert_eq!(
            (kvm.level, kvm.detail.as_str()),
            (Level::Ok, "kvm (probed)")
        );
        let tcg = probe(Accel::Tcg);
        assert_eq!(
            (tcg.level, tcg.detail.as_str()),
            (Level::Warn, "tcg: probed")
        );
        assert!(tcg.fix.is_some());
    }
}
