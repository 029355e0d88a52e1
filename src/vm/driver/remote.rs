//! A remote Linux host over SSH (`ssh://user@host[:port]`): its host key pinned on first use,
//! band-server installed there. It is not a VM: band neither starts, stops nor destroys it.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{AccelPref, Driver, DriverKind, Logs, SetupOptions, Up};
use crate::vm::Progress;
use crate::vm::endpoint::{Auth, Endpoint};
use crate::vm::paths::{VmPaths, private_dir, write_atomic};
use crate::vm::ssh;
use crate::vm::{Result, VmError, keys};

/// `vm/ssh/<user@host_port>/target.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct SshState {
    identity: Option<PathBuf>,
}

/// An `ssh://` host; `target` is `(user, host, port)` when known (not for `band vm --driver ssh`).
pub struct Remote {
    paths: VmPaths,
    target: Option<(String, String, u16)>,
}

impl Remote {
    pub fn new(paths: &VmPaths, target: Option<(String, String, u16)>) -> Self {
        Remote {
            paths: paths.clone(),
            target,
        }
    }
}

/// The answer to starting or stopping an ssh host.
fn not_a_vm() -> VmError {
    VmError::user(
        "an ssh:// target is not a VM",
        "it is started and stopped by its owner",
    )
}

/// Parse `user@host[:port]` (as in `ssh://user@host[:port]`).
pub fn parse_host(text: &str) -> Result<(String, String, u16)> {
    match crate::manifest::Target::parse(&format!("ssh://{text}")) {
        Ok(crate::manifest::Target::Ssh { user, host, port }) => Ok((user, host, port)),
        Ok(_) | Err(_) => Err(VmError::user(
            format!("--host {text} is not user@host[:port]"),
            "e.g. --host deploy@build.example.com",
        )),
    }
}

fn endpoint_unchecked(
    paths: &VmPaths,
    user: &str,
    host: &str,
    port: u16,
    identity: Option<PathBuf>,
) -> Endpoint {
    Endpoint {
        host: host.to_string(),
        port,
        user: user.to_string(),
        auth: match identity {
            Some(p) => Auth::KeyFile(p),
            None => Auth::AgentThenKey(paths.client_key()),
        },
        known_host: paths.ssh_dir(user, host, port).join("known_host"),
        sudo: user != "root",
        ssh_config: None,
    }
}

/// The endpoint of an `ssh://` target that `band setup --driver ssh` has pinned.
pub fn endpoint(paths: &VmPaths, user: &str, host: &str, port: u16) -> Result<Endpoint> {
    let dir = paths.ssh_dir(user, host, port);
    let state: SshState = fs_err::read_to_string(dir.join("target.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .ok_or_else(|| {
            VmError::user(
                format!("ssh://{user}@{host}:{port} has not been set up"),
                format!("run `band setup --driver ssh --host {user}@{host}:{port}`"),
            )
        })?;
    Ok(endpoint_unchecked(paths, user, host, port, state.identity))
}

impl Driver for Remote {
    fn kind(&self) -> DriverKind {
        DriverKind::Ssh
    }

    fn setup(&self, opts: &SetupOptions, steps: &mut dyn Progress) -> Result<serde_json::Value> {
        let paths = &self.paths;
        let host_arg = opts.host.as_deref().ok_or_else(|| {
            VmError::user(
                "--driver ssh needs --host",
                "band setup --driver ssh --host user@host",
            )
        })?;
        let (user, host, port) = parse_host(host_arg)?;
        let dir = paths.ssh_dir(&user, &host, port);
        private_dir(&dir)?;
        let known = dir.join("known_host");
        if opts.force {
            let _ = fs_err::remove_file(&known);
        }
        if let Some(id) = &opts.identity {
            keys::check_private(id)?;
        } else {
            keys::ensure_key(&paths.client_key(), "band")?;
        }
        write_atomic(
            &dir.join("target.json"),
            serde_json::to_string(&SshState {
                identity: opts.identity.clone(),
            })?
            .as_bytes(),
            0o600,
        )?;
        steps.start(format!("connect to {user}@{host}:{port}"));
        let mut ep = endpoint_unchecked(paths, &user, &host, port, opts.identity.clone());
        if !known.exists() {
            let key = ssh::fetch_host_key(&ep, Duration::from_secs(20))?;
            ssh::pin(&known, &key)?;
            steps.note(format!("pinned the host key {} {} (check it with `ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub` on the host)", key.algo, key.fingerprint()));
        }
        let sess = ssh::connect(&ep, Duration::from_secs(20)).map_err(|e| {
            let pubkey = paths.client_key().with_extension("pub");
            VmError::user(
                e.to_string(),
                format!("authorise a key for {user}: pass --identity FILE, load one into ssh-agent, or add {} to ~{user}/.ssh/authorized_keys", pubkey.display()),
            )
        })?;
        if user != "root" {
            let out = ssh::exec(&sess, "sudo -n true", b"")?;
            if out.status != 0 {
                return Err(VmError::user(
                    format!("{user} cannot run `sudo -n` on {host} ({})", out.stderr),
                    "band-server runs as root: log in as root, or give the user passwordless sudo",
                ));
            }
            ep.sudo = true;
        }
        let version = super::server::ensure_server(
            &ep,
            steps,
            super::server::WayPlan::Choose {
                forced: opts.build_server_in_guest,
                auto: false,
            },
        )?;
        let target = if port == 22 {
            format!("ssh://{user}@{host}")
        } else {
            format!("ssh://{user}@{host}:{port}")
        };
        Ok(
            serde_json::json!({ "target": target, "ssh": ep.addr(), "band_server": version.version, "protocol": version.protocol, "server_way": crate::vm::install::read_way(&ep) }),
        )
    }

    fn up(&self, _accel: AccelPref, _steps: &mut dyn Progress) -> Result<Up> {
        Err(not_a_vm())
    }

    fn stop(&self) -> Result<bool> {
        Err(not_a_vm())
    }

    fn destroy(&self) -> Result<()> {
        Err(VmError::user(
            "an ssh:// target is not a VM",
            "remove its folder under the band data dir to forget it",
        ))
    }

    fn status(&self) -> Result<serde_json::Value> {
        Err(VmError::user(
            "`band vm status` is for VMs",
            "use `band doctor` for an ssh:// target",
        ))
    }

    fn endpoint(&self) -> Result<Endpoint> {
        match &self.target {
            Some((user, host, port)) => endpoint(&self.paths, user, host, *port),
            None => Err(VmError::user(
                "an ssh:// target names its host",
                "use --target ssh://user@host[:port]",
            )),
        }
    }

    fn shell(&self) -> Result<Endpoint> {
        Err(VmError::user(
            "use the system ssh client for an ssh:// target",
            "ssh user@host",
        ))
    }

    fn logs(&self, _lines: usize) -> Result<Logs> {
        Err(VmError::user(
            "`band vm logs` is for VMs",
            "read /var/log/band-server.log on the host",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_parse_like_ssh_targets() {
        assert_eq!(
            parse_host("me@box").unwrap(),
            ("me".into(), "box".into(), 22)
        );
        assert_eq!(
            parse_host("root@127.0.0.1:2222").unwrap(),
            ("root".into(), "127.0.0.1".into(), 2222)
        );
        assert!(parse_host("box").is_err());
        assert!(parse_host("me@box;rm").is_err());
    }
}
