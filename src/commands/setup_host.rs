//! `band setup --driver host`: make this Debian or Ubuntu machine ready for the host target.
//!
//! band-server needs bubblewrap (the sandbox), nftables (the network policy), slirp4netns (the
//! network of a run that may reach hosts) and uidmap (newuidmap, for an ordinary user's image
//! builds). [`plan`] says which packages are missing (asked of `dpkg-query`); as root they are
//! installed with `apt-get` (after `apt-get update`), saying what is installed first; without
//! root the exact command is printed and nothing changes. Both programs are found on `PATH`.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::cli::setup::SetupArgs;
use crate::cli::user_error;
use band::proto::exit;

/// A package the host target needs, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Package {
    pub(crate) name: &'static str,
    pub(crate) why: &'static str,
}

pub(crate) const PACKAGES: [Package; 4] = [
    Package {
        name: "bubblewrap",
        why: "bwrap, the sandbox",
    },
    Package {
        name: "nftables",
        why: "nft, the network policy",
    },
    Package {
        name: "slirp4netns",
        why: "the network of runs that may reach hosts",
    },
    Package {
        name: "uidmap",
        why: "newuidmap, for rootless image builds",
    },
];

/// The packages `installed` says are missing (`None`: it cannot tell, counted as missing).
pub(crate) fn plan(installed: &dyn Fn(&str) -> Option<bool>) -> Vec<Package> {
    PACKAGES
        .into_iter()
        .filter(|p| installed(p.name) != Some(true))
        .collect()
}

/// The command that installs `missing`.
pub(crate) fn install_argv(missing: &[Package]) -> Vec<String> {
    ["apt-get", "install", "-y", "--no-install-recommends"]
        .into_iter()
        .map(str::to_string)
        .chain(missing.iter().map(|p| p.name.to_string()))
        .collect()
}

/// Is `package` installed, by `dpkg-query`? `None` when dpkg-query cannot be run.
fn dpkg_installed(package: &str) -> Option<bool> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", package])
        .output()
        .ok()?;
    Some(out.status.success() && String::from_utf8_lossy(&out.stdout).ends_with(" installed"))
}

fn on_path(binary: &str) -> Option<PathBuf> {
    band::vm::cmd::which(binary)
}

pub(crate) fn cmd_setup_host(args: &SetupArgs) -> Result<u8> {
    if !cfg!(target_os = "linux") {
        bail!(user_error(
            "the host target is Linux only",
            "band setup (Lima) makes a Linux VM for band-server"
        ));
    }
    if on_path("dpkg-query").is_none() {
        bail!(user_error(
            "band setup --driver host installs with apt-get, and this machine has no dpkg-query",
            format!(
                "install these with your package manager: {}",
                PACKAGES.map(|p| p.name).join(", ")
            )
        ));
    }
    let missing = plan(&dpkg_installed);
    let root = band::vm::cmd::is_root();
    let mut installed = Vec::new();
    if !missing.is_empty() {
        let argv = install_argv(&missing);
        let list: Vec<String> = missing
            .iter()
            .map(|p| format!("{} ({})", p.name, p.why))
            .collect();
        if !root {
            bail!(user_error(
                format!(
                    "the host target needs {}, and only root can install them",
                    list.join(", ")
                ),
                format!(
                    "run `sudo apt-get update && sudo {}`, then `band setup --driver host` again",
                    argv.join(" ")
                )
            ));
        }
        if on_path("apt-get").is_none() {
            bail!(user_error(
                format!(
                    "the host target needs {}, and apt-get is not on PATH",
                    list.join(", ")
                ),
                "install them with your package manager"
            ));
        }
        if !args.json {
            eprintln!("band setup: installing {}", list.join(", "));
            eprintln!("band setup: apt-get update && {}", argv.join(" "));
        }
        for step in [vec!["apt-get".to_string(), "update".into()], argv] {
            let status = Command::new(&step[0])
                .args(&step[1..])
                .env("DEBIAN_FRONTEND", "noninteractive")
                // apt-get's progress is for people, on stderr: stdout stays band's.
                .stdout(if args.json {
                    std::process::Stdio::null()
                } else {
                    std::process::Stdio::from(std::io::stderr())
                })
                .status()
                .with_context(|| format!("cannot run `{}`", step.join(" ")))?;
            if !status.success() {
                bail!(user_error(
                    format!("`{}` failed ({status})", step.join(" ")),
                    "its output above says why; fix it and run `band setup --driver host` again"
                ));
            }
        }
        installed = missing.iter().map(|p| p.name).collect();
    }
    let already: Vec<&str> = PACKAGES
        .iter()
        .map(|p| p.name)
        .filter(|n| !installed.contains(n))
        .collect();
    let server = band::client::transport::server_path();
    let server_found = server.is_file();
    // band-server's janitor also lists the programs of the library trees to hide
    // (`/var/cache/band/exec-mask.json`): made now, no run waits for that scan (issue 17).
    if root && server_found {
        let _ = Command::new(&server)
            .arg("janitor")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }
    // band-server runs as root: without root, only `sudo -n` starts it. Neither: the packages
    // are in place, but the host target is not ready, and setup does not say it is.
    let sudo = !root && band::vm::cmd::which("sudo").is_some();
    let via_sudo = sudo && band::client::transport::sudo_allows(&server);
    if !root && !via_sudo {
        let why = if sudo {
            "`sudo -n` may not run it"
        } else {
            "`sudo` is not installed"
        };
        bail!(user_error(
            format!(
                "the host target is not ready: its packages are installed, but band-server ({}) runs as root; you are not root and {why}",
                server.display()
            ),
            format!(
                "run band as root, or allow `sudo -n {}` (a sudoers rule); or run skills in a VM: `band setup` (no root needed)",
                server.display()
            )
        ));
    }
    if args.json {
        let doc = serde_json::json!({
            "driver": "host",
            "target": "host",
            "installed": installed,
            "already_installed": already,
            "band_server": server_found.then(|| server.display().to_string()),
            "band_server_as": if root { "root" } else { "sudo -n" },
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        if installed.is_empty() {
            eprintln!("band setup: {} already installed", already.join(", "));
        } else {
            eprintln!("band setup: installed {}", installed.join(", "));
        }
        if !server_found {
            eprintln!(
                "band setup: warning: band-server is not beside band ({}): install it there (the release archive has both) or set BAND_SERVER",
                server.display()
            );
        }
        eprintln!(
            "band: the host target is ready{}; `band doctor` checks it",
            if root {
                ""
            } else {
                " (band-server starts as root through `sudo -n`)"
            }
        );
    }
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_is_missing_is_installed() {
        let installed = |p: &str| match p {
            "bubblewrap" => Some(true),
            "uidmap" => None,
            _ => Some(false),
        };
        let missing = plan(&installed);
        let names: Vec<&str> = missing.iter().map(|p| p.name).collect();
        assert_eq!(names, ["nftables", "slirp4netns", "uidmap"]);
        assert_eq!(
            install_argv(&missing).join(" "),
            "apt-get install -y --no-install-recommends nftables slirp4netns uidmap"
        );
        assert!(plan(&|_| Some(true)).is_empty());
    }
}
