//! The Lima VM: `vm-templates/band.yaml`, `limactl create/start`, the host key pinned through
//! Lima's own channel.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{AccelPref, Driver, DriverKind, Logs, SetupOptions, Up, round_secs};
use crate::vm::Progress;
use crate::vm::endpoint::{Auth, Endpoint};
use crate::vm::paths::{VmPaths, private_dir, write_atomic};
use crate::vm::ssh;
use crate::vm::{Result, VmError, cmd, keys, lima};

/// `vm/lima/state.json`: where Lima keeps the instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct LimaState {
    dir: PathBuf,
}

/// The Lima instance `band`.
pub struct Lima {
    paths: VmPaths,
}

impl Lima {
    pub fn new(paths: &VmPaths) -> Self {
        Lima {
            paths: paths.clone(),
        }
    }
}

fn limactl_present() -> Result<()> {
    if cmd::which("limactl").is_none() {
        return Err(VmError::user(
            "limactl is not installed",
            "install Lima (https://lima-vm.io; `brew install lima` on macOS), or use --driver qemu on Linux",
        ));
    }
    Ok(())
}

fn lima_list() -> Result<Option<lima::Instance>> {
    let o = cmd::run_argv(&lima::list_argv())?;
    lima::parse_list(&String::from_utf8_lossy(&o.stdout))
}

/// Start the Lima instance if needed, pin its host key on first use, and return its endpoint.
fn start(paths: &VmPaths, steps: &mut dyn Progress) -> Result<Endpoint> {
    limactl_present()?;
    let inst = lima_list()?.ok_or_else(|| {
        VmError::user(
            "there is no Lima instance `band`",
            "run `band setup --driver lima`",
        )
    })?;
    if inst.status != "Running" {
        steps.start("start the Lima instance (limactl start)".into());
        cmd::run_argv(&lima::start_argv())?;
    }
    let inst =
        lima_list()?.ok_or_else(|| VmError::Invalid("the Lima instance disappeared".into()))?;
    let dir = paths.instance_dir(lima::DRIVER);
    private_dir(&dir)?;
    write_atomic(
        &dir.join(lima::STATE),
        serde_json::to_string(&LimaState {
            dir: inst.dir.clone(),
        })?
        .as_bytes(),
        0o600,
    )?;
    let known = dir.join("known_host");
    if !known.exists() {
        // Pinned on first use, read through Lima's own channel.
        let out = cmd::run_argv(&lima::host_key_argv())?;
        let key = keys::PublicKey::parse(&String::from_utf8_lossy(&out.stdout))?;
        ssh::pin(&known, &key)?;
        steps.note(format!("pinned the VM's host key {}", key.fingerprint()));
    }
    endpoint(paths)
}

/// The endpoint of the Lima instance, from its `ssh.config`.
fn endpoint(paths: &VmPaths) -> Result<Endpoint> {
    let dir = paths.instance_dir(lima::DRIVER);
    let state: LimaState = fs_err::read_to_string(dir.join(lima::STATE))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .ok_or_else(|| {
            VmError::user(
                "the Lima VM has not been set up",
                "run `band setup --driver lima`",
            )
        })?;
    let cfg_path = state.dir.join("ssh.config");
    let text = fs_err::read_to_string(&cfg_path).map_err(VmError::Fs)?;
    let cfg = lima::parse_ssh_config(&text);
    let key =
        cfg.identity_files.first().cloned().ok_or_else(|| {
            VmError::Invalid(format!("{} names no IdentityFile", cfg_path.display()))
        })?;
    if cfg.port == 0 {
        return Err(VmError::user(
            "the Lima VM is not running",
            "run `band vm start --driver lima`",
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
        ssh_config: Some(cfg_path),
    })
}

impl Driver for Lima {
    fn kind(&self) -> DriverKind {
        DriverKind::Lima
    }

    fn setup(&self, opts: &SetupOptions, steps: &mut dyn Progress) -> Result<serde_json::Value> {
        let paths = &self.paths;
        let res = &opts.resources;
        steps.start("check limactl and write the template".into());
        limactl_present()?;
        let dir = paths.instance_dir(lima::DRIVER);
        private_dir(&dir)?;
        let yaml = lima::template(&lima::LimaSpec {
            cpus: res.cpus,
            memory_mib: res.memory_mib,
            disk_mib: res.disk_mib,
        })?;
        let yaml_path = dir.join("band.yaml");
        write_atomic(&yaml_path, yaml.as_bytes(), 0o600)?;
        if opts.force && lima_list()?.is_some() {
            steps.start("delete the old instance (--force)".into());
            cmd::run_argv(&lima::delete_argv())?;
            let _ = fs_err::remove_file(dir.join("known_host"));
        }
        if lima_list()?.is_none() {
            steps.start("create the Lima instance `band`".into());
            cmd::run_argv(&lima::create_argv(&yaml_path))?;
        }
        let t = Instant::now();
        let mut ep = start(paths, steps)?;
        // The template installs a newer kernel than the cloud image boots (see band.yaml):
        // restart once so runs with allow.net get it.
        let sess = ssh::connect(&ep, Duration::from_secs(30))?;
        let kernels = ssh::exec(&sess, "uname -r; ls /boot", b"")?.stdout_text();
        if lima::needs_reboot(&kernels) {
            steps.start("restart the Lima VM into the newer kernel".into());
            cmd::run_argv(&lima::stop_argv())?;
            ep = start(paths, steps)?;
        }
        let version = super::server::ensure_server(
            &ep,
            steps,
            super::server::WayPlan::Choose {
                forced: opts.build_server_in_guest,
                auto: true,
            },
        )?;
        Ok(
            serde_json::json!({ "target": "lima", "ssh": ep.addr(), "start_secs": round_secs(t.elapsed().as_secs_f64()), "band_server": version.version, "protocol": version.protocol, "server_way": crate::vm::install::read_way(&ep) }),
        )
    }

    /// Lima chooses its own accelerator; `accel` does not apply.
    fn up(&self, _accel: AccelPref, steps: &mut dyn Progress) -> Result<Up> {
        Ok(Up {
            endpoint: start(&self.paths, steps)?,
            accel: None,
            boot_secs: None,
        })
    }

    fn stop(&self) -> Result<bool> {
        limactl_present()?;
        match lima_list()? {
            Some(i) if i.status == "Running" => {
                cmd::run_argv(&lima::stop_argv())?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn destroy(&self) -> Result<()> {
        if cmd::which("limactl").is_some() && lima_list()?.is_some() {
            cmd::run_argv(&lima::delete_argv())?;
        }
        let dir = self.paths.instance_dir(lima::DRIVER);
        if dir.exists() {
            fs_err::remove_dir_all(&dir).map_err(VmError::Fs)?;
        }
        Ok(())
    }

    fn status(&self) -> Result<serde_json::Value> {
        limactl_present()?;
        let mut v = serde_json::json!({ "driver": "lima" });
        match lima_list()? {
            None => v["state"] = serde_json::json!("absent"),
            Some(i) => {
                v["state"] = serde_json::json!(i.status.to_lowercase());
                if i.status == "Running" {
                    let ep = endpoint(&self.paths)?;
                    v["ssh"] = serde_json::json!(ep.addr());
                    v["band_server"] = super::server::server_status(&ep);
                }
            }
        }
        Ok(v)
    }

    fn endpoint(&self) -> Result<Endpoint> {
        endpoint(&self.paths)
    }

    fn shell(&self) -> Result<Endpoint> {
        endpoint(&self.paths)
    }

    fn logs(&self, lines: usize) -> Result<Logs> {
        Ok(Logs {
            console: None,
            server: super::server::server_log(endpoint(&self.paths), lines),
        })
    }
}
