//! `band doctor`'s checks of the host and the VM, as a library: each check is a function from
//! the [`Host`] (its paths are parameters, so tests run on a temp dir) to [`Check`]s, which the
//! binary renders (human or JSON).
//!
//! ```text
//! mod.rs   Check, Level, Host, and CHECKS: the one list, in the order they are shown
//! host.rs  the platform, the host target (root or sudo -n), tools on PATH, the rootless image
//!          build (newuidmap, subordinate ids), the accelerator (KVM), free disk
//! vm.rs    where VM targets' server binaries come from, the client's SSH key, the qemu image, the qemu VM (ssh, band-server, sandbox tools)
//! ```
//!
//! Adding a check: a function `fn(&Host) -> Vec<Check>` in `host.rs` or `vm.rs` (or a new file)
//! and one line in [`CHECKS`]. A check never fails: what goes wrong is a `fail` or `warn` check
//! that says how to fix it.

mod host;
mod probe;
mod vm;

use std::ffi::OsString;
use std::path::PathBuf;

use serde::Serialize;

use crate::vm::paths::VmPaths;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// It works.
    Ok,
    /// It works, but slower or partly.
    Warn,
    /// A target will not work.
    Fail,
    /// It does not apply here.
    Skip,
}

/// One check's result: what was checked, how it came out, what was seen, and how to fix it.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub level: Level,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    pub fn new(name: &'static str, level: Level, detail: impl Into<String>) -> Check {
        Check {
            name,
            level,
            detail: detail.into(),
            fix: None,
        }
    }

    /// The same check, saying how to fix it.
    pub fn fix(mut self, fix: impl Into<String>) -> Check {
        self.fix = Some(fix.into());
        self
    }
}

/// What the checks look at: the host's paths, as parameters.
#[derive(Debug, Clone)]
pub struct Host {
    /// The VM files under band's data folder (key, image, instance, accelerator cache).
    pub vm: VmPaths,
    /// The KVM device (`/dev/kvm`).
    pub kvm: PathBuf,
    /// The folders searched for tools, in order (`$PATH`); a tool there must be executable.
    pub path: Vec<PathBuf>,
    /// Searched after `path` (`/usr/sbin`, `/sbin`): any file there counts.
    pub sbin: Vec<PathBuf>,
    /// Linux (the host target and the qemu driver) or not (macOS: Lima only).
    pub linux: bool,
    /// band runs as root: the host target starts band-server itself, and the image build needs
    /// no user namespace.
    pub root: bool,
    /// The user band runs as (by name, as `/etc/subuid` lists it).
    pub user: String,
    /// `/etc/subuid` and `/etc/subgid`: an ordinary user's image build needs a range in each.
    pub subuid: PathBuf,
    pub subgid: PathBuf,
    /// Without root: may `sudo -n` run band-server (`sudo -n -l`)? Asked once, by [`Host::this`].
    pub sudo_allows: bool,
    /// band-server, where the host target starts it (`$BAND_SERVER`, else beside `band`).
    pub band_server: PathBuf,
    /// `/proc/sys/kernel/apparmor_restrict_unprivileged_userns` (Ubuntu 23.10+): `1` when
    /// AppArmor keeps unconfined programs from making user namespaces.
    pub apparmor_userns: PathBuf,
    /// The kernel's Landlock ABI, probed by [`Host::this`]; `None` when Landlock is off or absent.
    pub landlock_abi: Option<u8>,
    /// `bwrap --ro-bind / / true`, tried by [`Host::this`] when bwrap is there: `Ok`, or what
    /// went wrong (its stderr). `None`: not tried.
    pub bwrap_tried: Option<Result<(), BwrapError>>,
    /// Whether runs use the host's warm band-server ([`crate::warm`]): the user config's `warm`,
    /// on by default, or `BAND_WARM`.
    pub warm: bool,
    /// The warm band-server's folder ([`crate::warm::DIR`]).
    pub warm_dir: PathBuf,
}

impl Host {
    /// This machine: `vm` under the data folder, `/dev/kvm`, `$PATH`.
    pub fn this(vm: VmPaths) -> Host {
        let root = crate::vm::cmd::is_root();
        let path = search_path(std::env::var_os("PATH"));
        let linux = cfg!(target_os = "linux");
        let bwrap = path.iter().map(|d| d.join("bwrap")).find(|p| p.is_file());
        Host {
            vm,
            kvm: PathBuf::from("/dev/kvm"),
            path,
            sbin: vec![PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")],
            linux,
            root,
            user: crate::vm::cmd::user_name().unwrap_or_default(),
            subuid: PathBuf::from("/etc/subuid"),
            subgid: PathBuf::from("/etc/subgid"),
            sudo_allows: !root && crate::client::transport::host_can_start(),
            band_server: crate::client::transport::server_path(),
            apparmor_userns: PathBuf::from(
                "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
            ),
            landlock_abi: if linux { probe::landlock_abi() } else { None },
            bwrap_tried: bwrap.filter(|_| linux).map(|b| probe::bwrap(&b)),
            // A broken config is `band run`'s error to report, with its line.
            warm: crate::client::config::UserConfig::load().is_ok_and(|c| c.warm()),
            warm_dir: PathBuf::from(crate::warm::DIR),
        }
    }
}

fn search_path(path: Option<OsString>) -> Vec<PathBuf> {
    path.map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default()
}

/// A check: what it looks at on `host`, as one or more results.
pub type CheckFn = fn(&Host) -> Vec<Check>;

/// Every check, in the order `band doctor` shows them.
pub const CHECKS: &[CheckFn] = &[
    host::platform,
    host::host_target,
    host::band_server,
    host::warm_server,
    host::linux_tools,
    host::sandbox,
    host::rootless_build,
    host::accelerator,
    host::lima,
    host::ssh_tools,
    vm::server_binaries,
    vm::client_key,
    host::free_disk,
    vm::image,
    vm::qemu_vm,
];

/// Run every check on `host`.
pub fn run(host: &Host) -> Vec<Check> {
    CHECKS.iter().flat_map(|check| check(host)).collect()
}

/// The site policy in force at `path` (`band::policy::site::local_path`): its tiers and keys,
/// `none`, or a file band-server cannot use (it then refuses every run: a failure).
pub fn site_check(path: &std::path::Path) -> Check {
    use crate::policy::site;
    match site::load_site(path) {
        Ok(None) => Check::new(
            "site policy",
            Level::Ok,
            format!("none (no file at {}): nothing is narrowed", path.display()),
        ),
        Ok(Some(s)) => {
            let mut tiers: Vec<String> = s.tiers.keys().cloned().collect();
            if !tiers.contains(&s.unsigned) {
                tiers.push(s.unsigned.clone());
            }
            let name = s
                .name
                .as_ref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default();
            Check::new(
                "site policy",
                Level::Ok,
                format!(
                    "{}{name}: tiers {}; unsigned skills: {}; {} signer key(s); band-server applies the site policy of the machine it runs on",
                    path.display(),
                    tiers.join(", "),
                    s.unsigned,
                    s.keys.len()
                ),
            )
        }
        Err(e) => Check::new(
            "site policy",
            Level::Fail,
            format!("{e}: band-server refuses every run"),
        )
        .fix(
            e.hint
                .unwrap_or_else(|| format!("fix or remove {}", path.display())),
        ),
    }
}

/// Did any check fail? (`band doctor` then exits 1.)
pub fn failed(checks: &[Check]) -> bool {
    checks.iter().any(|c| c.level == Level::Fail)
}

pub use host::parse_df_available;
pub use probe::BwrapError;

#[cfg(test)]
mod tests {
    use super::*;

    /// A host with nothing on it: an empty data folder, no KVM device, no tools.
    pub(super) fn bare(dir: &std::path::Path) -> Host {
        Host {
            vm: VmPaths::new(&dir.join("data")),
            kvm: dir.join("kvm"),
            path: vec![dir.join("bin")],
            sbin: vec![dir.join("sbin")],
            linux: true,
            root: false,
            user: "alice".into(),
            subuid: dir.join("subuid"),
            subgid: dir.join("subgid"),
            sudo_allows: false,
            band_server: dir.join("bin/band-server"),
            apparmor_userns: dir.join("apparmor_restrict_unprivileged_userns"),
            landlock_abi: None,
            bwrap_tried: None,
            warm: false,
            warm_dir: dir.join("band-serve"),
        }
    }

    #[test]
    fn every_check_runs_in_order_on_a_bare_linux_host() {
        let dir = tempfile::tempdir().expect("tmp");
        let checks = run(&bare(dir.path()));
        let names: Vec<&str> = checks.iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            [
                "host",
                "host target",
                "band-server",
                "bwrap (host target)",
                "nft (host target)",
                "slirp4netns (host target)",
                "qemu",
                "qemu-img",
                "mmdebstrap",
                "mkfs.ext4",
                "bwrap works",
                "landlock",
                "user namespaces",
                "newuidmap",
                "newgidmap",
                "subuid",
                "subgid",
                "accelerator",
                "limactl",
                "ssh-keygen",
                "ssh (VM targets)",
                "server binaries",
                "ssh key",
                "free disk",
                "qemu image",
                "qemu VM",
            ]
        );
        // ssh-keygen and ssh are the tools every target needs; the fix names the package.
        assert!(failed(&checks));
        let keygen = checks.iter().find(|c| c.name == "ssh-keygen");
        assert_eq!(keygen.map(|c| c.level), Some(Level::Fail));
        let ssh = checks.iter().find(|c| c.name == "ssh (VM targets)");
        assert_eq!(ssh.map(|c| c.level), Some(Level::Fail));
    }

    #[test]
    fn off_linux_there_are_no_linux_tools_and_lima_is_needed() {
        let dir = tempfile::tempdir().expect("tmp");
        let host = Host {
            linux: false,
            ..bare(dir.path())
        };
        let checks = run(&host);
        assert!(!checks.iter().any(|c| c.name == "bwrap (host target)"));
        let level = |name: &str| checks.iter().find(|c| c.name == name).map(|c| c.level);
        assert_eq!(level("accelerator"), Some(Level::Skip));
        assert_eq!(level("limactl"), Some(Level::Fail));
    }

    #[test]
    fn the_json_form_leaves_out_a_missing_fix() {
        let c = Check::new("x", Level::Ok, "fine");
        assert_eq!(
            serde_json::to_value(&c).expect("json"),
            serde_json::json!({"name": "x", "level": "ok", "detail": "fine"})
        );
        let c = Check::new("x", Level::Warn, "slow").fix("do y");
        assert_eq!(
            serde_json::to_value(&c).expect("json")["fix"],
            serde_json::json!("do y")
        );
    }

    #[test]
    fn the_search_path_is_split_like_path() {
        assert_eq!(
            search_path(Some("/a:/b".into())),
            [PathBuf::from("/a"), PathBuf::from("/b")]
        );
        assert!(search_path(None).is_empty());
    }
}
