//! The transport that carries runs to a VM or an `ssh://` host (`--target qemu|lima|ssh://user@host`),
//! and the endpoints of those targets, from the state `band setup` left.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::config::UserConfig;
use super::pipeline::Transport;
use super::user_error;
use crate::manifest::Target;
use crate::policy::CompiledPolicy;
use crate::proto::{self, Message, RunRequest, RunResult};
use crate::vm::install;
use crate::vm::lima;
use crate::vm::paths::VmPaths;
use crate::vm::qemu::InstanceDir;
use crate::vm::ssh::{self, Auth, Endpoint};
use crate::vm::stage;

/// The VM state folder of this user.
pub fn vm_paths() -> Result<VmPaths> {
    Ok(VmPaths::new(&UserConfig::load()?.data_dir()))
}

/// The endpoint of the QEMU instance on `port`.
pub fn qemu_endpoint(paths: &VmPaths, port: u16) -> Endpoint {
    Endpoint {
        host: "127.0.0.1".into(),
        port,
        user: "root".into(),
        auth: Auth::KeyFile(paths.client_key()),
        known_host: InstanceDir::new(paths).known_host(),
        sudo: false,
    }
}

/// The endpoint of a target, from the state `band setup` left.
pub fn endpoint_for(paths: &VmPaths, target: &Target) -> Result<Endpoint> {
    match target {
        Target::Host => bail!("the host target has no SSH endpoint"),
        Target::Qemu => {
            let inst = InstanceDir::new(paths);
            let state = inst.running().ok_or_else(|| {
                user_error(
                    "the qemu VM is not running",
                    "run `band vm start` (or `band setup --driver qemu` the first time)",
                )
            })?;
            Ok(qemu_endpoint(paths, state.ssh_port))
        }
        Target::Lima => lima_endpoint(paths),
        Target::Ssh { user, host, port } => ssh_endpoint(paths, user, host, *port),
    }
}

/// Runs over SSH to band-server on a VM or a remote host.
pub struct SshTransport {
    target: Target,
    endpoint: Endpoint,
}

impl SshTransport {
    pub fn new(target: &Target) -> Result<Self> {
        let paths = vm_paths()?;
        Ok(SshTransport {
            target: target.clone(),
            endpoint: endpoint_for(&paths, target)?,
        })
    }
}

impl Transport for SshTransport {
    fn name(&self) -> String {
        format!(
            "{} ({}@{})",
            self.target,
            self.endpoint.user,
            self.endpoint.addr()
        )
    }

    fn run(
        &mut self,
        req: &RunRequest,
        on_event: &mut dyn FnMut(&proto::Event),
    ) -> Result<RunResult> {
        let line = serde_json::to_vec(&Message::Request(Box::new(req.clone())))?;
        let paths = vm_paths()?;
        let dir = install::local_dir()?;
        let local = install::local_manifest_cached(&dir, &paths.root.join("local-manifest.json"))?;
        let expected = install::manifest_digest(&local);
        let sess = ssh::connect(&self.endpoint, Duration::from_secs(30))?;
        let result = match ssh::run_request(&sess, &self.endpoint, Some(&expected), &line, on_event)
        {
            // A stale band-server is upgraded, never used: install, then run once more.
            Err(crate::vm::VmError::StaleServer) => {
                eprintln!(
                    "band: band-server on {} is another build; installing this one",
                    self.target
                );
                install::install(&sess, &self.endpoint, &dir, &local)?;
                ssh::run_request(&sess, &self.endpoint, Some(&expected), &line, on_event)?
            }
            other => other?,
        };
        check_result(req, result)
    }
}

/// A result from a remote band-server must name our run and hand back only files that the
/// band lets the run write (see `crate::vm::stage`).
pub fn check_result(req: &RunRequest, result: RunResult) -> Result<RunResult> {
    if !result.run_id.is_empty() && result.run_id != req.run_id {
        bail!(
            "band-server answered for run {} instead of {}",
            result.run_id,
            req.run_id
        );
    }
    let policy = CompiledPolicy::compile(&req.policy).map_err(|e| anyhow::anyhow!("{e}"))?;
    stage::check_written(&result.written, &policy, stage::MAX_WRITTEN_BYTES)
        .map_err(|e| anyhow::anyhow!("{e}; nothing was written back"))?;
    Ok(result)
}

/// `vm/lima/state.json`: where Lima keeps the instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimaState {
    pub dir: PathBuf,
}

/// The endpoint of the Lima instance, from its `ssh.config`.
pub fn lima_endpoint(paths: &VmPaths) -> Result<Endpoint> {
    let dir = paths.instance_dir(lima::DRIVER);
    let state: LimaState = std::fs::read_to_string(dir.join(lima::STATE))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .ok_or_else(|| {
            user_error(
                "the Lima VM has not been set up",
                "run `band setup --driver lima`",
            )
        })?;
    let cfg_path = state.dir.join("ssh.config");
    let text = std::fs::read_to_string(&cfg_path)
        .with_context(|| format!("cannot read {}", cfg_path.display()))?;
    let cfg = lima::parse_ssh_config(&text);
    let key = cfg
        .identity_files
        .first()
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("{} names no IdentityFile", cfg_path.display()))?;
    if cfg.port == 0 {
        bail!(user_error(
            "the Lima VM is not running",
            "run `band vm start --driver lima`"
        ));
    }
    Ok(Endpoint {
        host: if cfg.hostname.is_empty() {
            "127.0.0.1".into()
        } else {
            cfg.hostname
        },
        port: cfg.port,
        user: cfg.user,
        auth: Auth::KeyFile(key),
        known_host: dir.join("known_host"),
        sudo: true,
    })
}

/// `vm/ssh/<user@host_port>/target.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SshState {
    pub identity: Option<PathBuf>,
}

pub fn ssh_endpoint_unchecked(
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
    }
}

/// The endpoint of an `ssh://` target that `band setup --driver ssh` has pinned.
pub fn ssh_endpoint(paths: &VmPaths, user: &str, host: &str, port: u16) -> Result<Endpoint> {
    let dir = paths.ssh_dir(user, host, port);
    let state: SshState = std::fs::read_to_string(dir.join("target.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .ok_or_else(|| {
            user_error(
                format!("ssh://{user}@{host}:{port} has not been set up"),
                format!("run `band setup --driver ssh --host {user}@{host}:{port}`"),
            )
        })?;
    Ok(ssh_endpoint_unchecked(
        paths,
        user,
        host,
        port,
        state.identity,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Category, Policy};
    use crate::proto::{FileEntry, Layer};

    fn request(write: &[&str]) -> RunRequest {
        let mut policy = Policy::default();
        *policy.allow.get_mut(Category::Write) = write.iter().map(|s| s.to_string()).collect();
        RunRequest {
            protocol: proto::PROTOCOL_VERSION,
            run_id: "00112233aabbccdd".into(),
            skill: "s".into(),
            script: "x".into(),
            entry: "scripts/x.sh".into(),
            bundle: vec![],
            bundle_sha256: String::new(),
            policy,
            input: serde_json::json!({}),
            config: None,
            secrets: Default::default(),
            workspace: vec![],
            trace: false,
        }
    }

    fn result(written: Vec<FileEntry>) -> RunResult {
        let mut r = RunResult::setup_failed("00112233aabbccdd", Layer::Io, "", None);
        r.status = proto::Status::Ok;
        r.error = None;
        r.written = written;
        r
    }

    #[test]
    fn a_result_for_another_run_is_refused() {
        let mut r = result(vec![]);
        r.run_id = "ffffffffffffffff".into();
        assert!(check_result(&request(&[]), r).is_err());
    }

    #[test]
    fn a_result_writing_outside_allow_write_is_refused_whole() {
        let f = |p: &str| FileEntry {
            path: p.into(),
            mode: 0o644,
            data: "aGk=".into(),
        };
        assert!(check_result(&request(&["out/"]), result(vec![f("out/a")])).is_ok());
        let e = check_result(
            &request(&["out/"]),
            result(vec![f("out/a"), f(".git/config")]),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(".git/config") && e.contains("nothing was written back"),
            "{e}"
        );
        assert!(check_result(&request(&["out/"]), result(vec![f("out/../../.bashrc")])).is_err());
    }
}
