//! [`SshTransport`]: carries runs to band-server on a VM or an `ssh://` host
//! (`--target qemu|lima|ssh://user@host`), at the endpoint its [`crate::vm::driver`] gives.

use std::time::Duration;

use super::config::vm_paths;
use super::transport::Transport;
use super::{ClientError, Result};
use crate::manifest::Target;
use crate::policy::CompiledPolicy;
use crate::proto::{self, Message, RunRequest, RunResult};
use crate::vm::endpoint::Endpoint;
use crate::vm::ssh;
use crate::vm::stage;
use crate::vm::{install, mux};

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
            endpoint: crate::vm::driver::select::endpoint_for(&paths, target)?,
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
        // Sent as `cancel` when a quiet read gives way; and when band exits, the connection
        // closes and band-server cancels the run.
        cancel: &super::cancel::Cancel,
        recorded: &dyn Fn() -> Result<()>,
    ) -> Result<RunResult> {
        // The VM's band-server starts the script when it is ready: the record first.
        recorded()?;
        let line = serde_json::to_vec(&Message::Request(Box::new(req.clone())))?;
        let paths = vm_paths()?;
        // What this band expects there: the binaries beside it, or a build of its own source.
        let local = install::Expected::of(
            install::read_way(&self.endpoint),
            Some(&paths.root.join("local-manifest.json")),
        )?;
        let expected = install::manifest_digest(local.manifest());
        let cancelled = || cancel.is_cancelled();
        // The warm channel (the system `ssh` client's master connection).
        let channel = mux::channel(&self.endpoint)?.ok_or_else(ssh::missing_ssh)?;
        let send = |on_event: &mut dyn FnMut(&proto::Event)| {
            mux::run_request(
                &self.endpoint,
                &channel,
                Some(&expected),
                &line,
                on_event,
                &cancelled,
            )
        };
        // The warm band-server of this build first (through the master's forward); when there
        // is none, nothing was sent and the per-run path serves the run (and starts one).
        match mux::run_warm(
            &self.endpoint,
            &channel,
            &expected,
            &line,
            on_event,
            &cancelled,
        ) {
            Err(crate::vm::VmError::NoWarmServer(_)) => {}
            other => return check_result(req, other?),
        }
        let result = match send(on_event) {
            // A stale band-server is upgraded, never used: install, then run once more.
            Err(crate::vm::VmError::StaleServer) => {
                eprintln!(
                    "band: band-server on {} is another build; {}",
                    self.target,
                    match local {
                        install::Expected::Upload { .. } => "installing this one",
                        install::Expected::Build { .. } =>
                            "building this one there from this band's source (minutes)",
                    }
                );
                let sess = ssh::connect(&self.endpoint, Duration::from_secs(30))?;
                local.install(&sess, &self.endpoint, &mut crate::vm::Silent)?;
                drop(sess);
                send(on_event)?
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
        return Err(ClientError::Protocol(format!(
            "band-server answered for run {} instead of {}",
            result.run_id, req.run_id
        )));
    }
    let policy =
        CompiledPolicy::compile(&req.policy).map_err(|e| ClientError::Protocol(e.to_string()))?;
    stage::check_written(&result.written, &policy, stage::MAX_WRITTEN_BYTES)
        .and_then(|_| stage::check_written_folders(&result.written_folders, &policy))
        .map_err(|e| ClientError::Protocol(format!("{e}; nothing was written back")))?;
    Ok(result)
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
            observe: false,
            args: Vec::new(),
            signed: None,
            narrowing: Vec::new(),
            stdin: false,
            start_on_go: false,
            workspace_folders: None,
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
