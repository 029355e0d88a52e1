//! `band doctor`: check the host and the VM, and say what to fix.
//!
//! Each check is `ok`, `warn` (works, but slower or partly), `fail` (a target will not work) or
//! `skip` (does not apply here). Exit 0 when nothing failed, 1 otherwise.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;

use crate::cli::doctor::DoctorArgs;
use band::client::config::vm_paths;
use band::proto::exit;
use band::vm::install::{self, Handshake};
use band::vm::paths::VmPaths;
use band::vm::qemu::{self, Accel, AccelChoice, InstanceDir};
use band::vm::{cmd, image, keys, ssh};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Level {
    Ok,
    Warn,
    Fail,
    Skip,
}

#[derive(Debug, Clone, Serialize)]
pub(super) struct Check {
    pub name: &'static str,
    pub level: Level,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

fn check(name: &'static str, level: Level, detail: impl Into<String>, fix: Option<&str>) -> Check {
    Check {
        name,
        level,
        detail: detail.into(),
        fix: fix.map(String::from),
    }
}

/// Free bytes from `df -Pk DIR` output (POSIX format, 1024-byte blocks).
pub(crate) fn parse_df_available(text: &str) -> Option<u64> {
    let line = text.lines().nth(1)?;
    let avail: u64 = line.split_whitespace().nth(3)?.parse().ok()?;
    Some(avail * 1024)
}

fn tool(name: &'static str, binary: &str, fix: &str, needed: bool) -> Check {
    match cmd::which(binary).or_else(|| {
        ["/usr/sbin", "/sbin"]
            .iter()
            .map(|d| Path::new(d).join(binary))
            .find(|p| p.is_file())
    }) {
        Some(p) => check(name, Level::Ok, p.display().to_string(), None),
        None => check(
            name,
            if needed { Level::Fail } else { Level::Warn },
            format!("{binary} not found"),
            Some(fix),
        ),
    }
}

fn accel_check(paths: &VmPaths) -> Check {
    if !cfg!(target_os = "linux") {
        return check(
            "accelerator",
            Level::Skip,
            "macOS: Lima uses Apple's Hypervisor.framework (vz) itself",
            None,
        );
    }
    let dev = Path::new("/dev/kvm");
    if !dev.exists() {
        return check(
            "accelerator",
            Level::Warn,
            "no /dev/kvm: the qemu VM runs under TCG (emulation, several times slower)",
            Some(
                "enable virtualisation (VT-x/AMD-V, nested virtualisation on a cloud VM) and load kvm_intel/kvm_amd",
            ),
        );
    }
    if let Err(e) = qemu::kvm_device_opens(dev) {
        return check(
            "accelerator",
            Level::Warn,
            format!("{e}: TCG will be used"),
            Some("add yourself to the kvm group"),
        );
    }
    let cached: Option<AccelChoice> = fs_err::read_to_string(paths.accel_cache())
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    let probed = cached.or_else(|| {
        let img = image::cached(paths)?;
        let bin = qemu::binary()?;
        Some(qemu::choose_accel(paths, &bin, &img.kernel()))
    });
    match probed {
        Some(c) if c.accel == Accel::Kvm => check(
            "accelerator",
            Level::Ok,
            format!("kvm ({})", c.reason),
            None,
        ),
        Some(c) => check(
            "accelerator",
            Level::Warn,
            format!("tcg: {}", c.reason),
            Some("the VM works under TCG, only slower; fix KVM on the host for speed"),
        ),
        None => check(
            "accelerator",
            Level::Ok,
            "/dev/kvm opens; a guest boot is probed at `band setup` (a /dev/kvm that opens may still hang)",
            None,
        ),
    }
}

fn free_disk(paths: &VmPaths) -> Check {
    let mut dir = paths.root.clone();
    while !dir.exists() {
        if !dir.pop() {
            break;
        }
    }
    let out = std::process::Command::new("df")
        .arg("-Pk")
        .arg(&dir)
        .output();
    match out
        .ok()
        .and_then(|o| parse_df_available(&String::from_utf8_lossy(&o.stdout)))
    {
        Some(b) if b >= 4 << 30 => check(
            "free disk",
            Level::Ok,
            format!("{} free at {}", band::units::format_bytes(b), dir.display()),
            None,
        ),
        Some(b) => check(
            "free disk",
            Level::Fail,
            format!(
                "only {} free at {}; the image build needs about 4 GiB",
                band::units::format_bytes(b),
                dir.display()
            ),
            Some("free space, or set data_dir in ~/.config/band/config.toml"),
        ),
        None => check(
            "free disk",
            Level::Warn,
            format!("could not measure free space at {}", dir.display()),
            None,
        ),
    }
}

fn client_key(paths: &VmPaths) -> Check {
    let key = paths.client_key();
    if !key.exists() {
        return check(
            "ssh key",
            Level::Skip,
            format!("{} will be made by `band setup`", key.display()),
            None,
        );
    }
    match keys::check_private(&key) {
        Ok(()) => check(
            "ssh key",
            Level::Ok,
            format!("{} (0600)", key.display()),
            None,
        ),
        Err(e) => check(
            "ssh key",
            Level::Fail,
            e.to_string(),
            Some("chmod 600 the key"),
        ),
    }
}

fn vm_checks(paths: &VmPaths) -> Vec<Check> {
    let inst = InstanceDir::new(paths);
    let mut out = Vec::new();
    if inst.load_state().is_none() {
        out.push(check("qemu VM", Level::Skip, "not set up", None));
        return out;
    }
    let Some(state) = inst.running() else {
        out.push(check(
            "qemu VM",
            Level::Warn,
            "set up, not running",
            Some("band vm start"),
        ));
        return out;
    };
    out.push(check(
        "qemu VM",
        Level::Ok,
        format!(
            "running ({}, ssh 127.0.0.1:{})",
            state.accel.as_str(),
            state.ssh_port
        ),
        None,
    ));
    let ep = band::vm::driver::qemu::endpoint(paths, state.ssh_port);
    let sess = match ssh::connect(&ep, Duration::from_secs(15)) {
        Ok(s) => s,
        Err(e) => {
            out.push(check(
                "VM ssh",
                Level::Fail,
                e.to_string(),
                Some("band vm stop && band vm start"),
            ));
            return out;
        }
    };
    out.push(check(
        "VM ssh",
        Level::Ok,
        format!("host key pinned in {}", ep.known_host.display()),
        None,
    ));
    match install::local_dir()
        .and_then(|d| install::local_manifest(&d))
        .and_then(|m| install::handshake(&sess, &m))
    {
        Ok(Handshake::Current(v)) => out.push(check(
            "VM band-server",
            Level::Ok,
            format!(
                "{} (protocol {}), same build as this band",
                v.version, v.protocol
            ),
            None,
        )),
        Ok(Handshake::Missing) => out.push(check(
            "VM band-server",
            Level::Fail,
            "not installed",
            Some("band setup (or band vm start)"),
        )),
        Ok(Handshake::Stale { answered, .. }) => out.push(check(
            "VM band-server",
            Level::Fail,
            format!(
                "stale: answers {}",
                answered
                    .map(|v| format!("{} protocol {}", v.version, v.protocol))
                    .unwrap_or_else(|| "nothing".into())
            ),
            Some("band vm start (upgrades it)"),
        )),
        Err(e) => out.push(check("VM band-server", Level::Fail, e.to_string(), None)),
    }
    match install::missing_prerequisites(&sess, &ep) {
        Ok(m) if m.is_empty() => out.push(check(
            "VM sandbox tools",
            Level::Ok,
            "bwrap, iptables, ip6tables, ip, useradd",
            None,
        )),
        Ok(m) => out.push(check(
            "VM sandbox tools",
            Level::Fail,
            format!("missing: {}", m.join(", ")),
            Some("band setup --force"),
        )),
        Err(e) => out.push(check("VM sandbox tools", Level::Fail, e.to_string(), None)),
    }
    out
}

pub(crate) fn checks() -> Result<Vec<Check>> {
    let paths = vm_paths()?;
    let linux = cfg!(target_os = "linux");
    let mut out = vec![check(
        "host",
        Level::Ok,
        format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
        None,
    )];
    if linux {
        out.push(tool(
            "bwrap (host target)",
            "bwrap",
            "apt-get install bubblewrap",
            false,
        ));
        out.push(tool(
            "qemu",
            if cfg!(target_arch = "aarch64") {
                "qemu-system-aarch64"
            } else {
                "qemu-system-x86_64"
            },
            "apt-get install qemu-system-x86",
            false,
        ));
        out.push(tool(
            "qemu-img",
            "qemu-img",
            "apt-get install qemu-utils",
            false,
        ));
        out.push(tool(
            "mmdebstrap",
            "mmdebstrap",
            "apt-get install mmdebstrap",
            false,
        ));
        out.push(tool(
            "mkfs.ext4",
            "mkfs.ext4",
            "apt-get install e2fsprogs",
            false,
        ));
    }
    out.push(accel_check(&paths));
    let mut lima = tool("limactl", "limactl", "brew install lima", !linux);
    if linux && lima.level != Level::Ok {
        lima = check(
            "limactl",
            Level::Skip,
            "not installed (optional on Linux: the qemu driver needs no Lima)",
            None,
        );
    }
    out.push(lima);
    out.push(tool(
        "ssh-keygen",
        "ssh-keygen",
        "apt-get install openssh-client",
        true,
    ));
    out.push(tool(
        "ssh (band vm ssh)",
        "ssh",
        "apt-get install openssh-client",
        false,
    ));
    out.push(client_key(&paths));
    out.push(free_disk(&paths));
    match image::cached(&paths) {
        Some(img) => out.push(check(
            "qemu image",
            Level::Ok,
            format!("{} ({})", img.hash(), img.dir.display()),
            None,
        )),
        None => out.push(check(
            "qemu image",
            Level::Skip,
            "not built (band setup --driver qemu)",
            None,
        )),
    }
    out.extend(vm_checks(&paths));
    Ok(out)
}

pub(crate) fn cmd_doctor(args: DoctorArgs) -> Result<u8> {
    let all = checks()?;
    let failed = all.iter().any(|c| c.level == Level::Fail);
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "ok": !failed, "checks": all }))?
        )?;
    } else {
        for c in &all {
            let tag = match c.level {
                Level::Ok => "ok  ",
                Level::Warn => "warn",
                Level::Fail => "FAIL",
                Level::Skip => "-   ",
            };
            writeln!(out, "{tag}  {:20} {}", c.name, c.detail)?;
            if let Some(f) = c
                .fix
                .as_ref()
                .filter(|_| matches!(c.level, Level::Fail | Level::Warn))
            {
                writeln!(out, "      {:20} fix: {f}", "")?;
            }
        }
    }
    Ok(if failed {
        exit::SCRIPT_FAILED
    } else {
        exit::OK
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn df_output_is_parsed() {
        let text = "Filesystem     1024-blocks      Used Available Capacity Mounted on\n/dev/vda        263174212  33521244 62795512      35% /\n";
        assert_eq!(parse_df_available(text), Some(62_795_512 * 1024));
        assert_eq!(parse_df_available("garbage"), None);
    }

    #[test]
    fn a_missing_required_tool_fails_and_says_how_to_fix_it() {
        let c = tool("x", "band-no-such-tool", "apt-get install x", true);
        assert_eq!(c.level, Level::Fail);
        assert_eq!(c.fix.as_deref(), Some("apt-get install x"));
        assert_eq!(tool("x", "band-no-such-tool", "", false).level, Level::Warn);
        assert_eq!(tool("sh", "sh", "", true).level, Level::Ok);
    }
}
