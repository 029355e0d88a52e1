//! `band vm status|start|stop|destroy|ssh|logs`, and the transport that carries runs to a VM or
//! an `ssh://` host (`--target qemu|lima|ssh://user@host`).

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Subcommand, ValueEnum};

use super::progress::Steps;
use super::user_error;
use band::client::ssh::{endpoint_for, qemu_endpoint, vm_paths};
use band::manifest::Target;
use band::proto::exit;
use band::vm::image::{self, Image};
use band::vm::install::{self, Handshake};
use band::vm::lima;
use band::vm::paths::VmPaths;
use band::vm::qemu::{self, Accel, AccelChoice, InstanceDir, Resources};
use band::vm::ssh::{self, Auth, Endpoint};

/// How long a VM may take from QEMU start to SSH (TCG on a busy 2-core machine is slow).
pub const BOOT_TIMEOUT: Duration = Duration::from_secs(900);

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Driver {
    Qemu,
    Lima,
    Ssh,
}

impl Driver {
    pub fn as_str(self) -> &'static str {
        match self {
            Driver::Qemu => "qemu",
            Driver::Lima => "lima",
            Driver::Ssh => "ssh",
        }
    }

    /// `lima` when limactl is on PATH, else `qemu` on Linux.
    pub fn default_for_host() -> Driver {
        if band::vm::cmd::which("limactl").is_some() || !cfg!(target_os = "linux") {
            Driver::Lima
        } else {
            Driver::Qemu
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AccelArg {
    Auto,
    Kvm,
    Tcg,
}

#[derive(Debug, clap::Args)]
pub struct VmArgs {
    #[command(subcommand)]
    pub command: VmCommand,
}

#[derive(Debug, Clone, clap::Args)]
pub struct DriverArg {
    /// Which VM: qemu or lima. Default: the one that exists (lima when limactl is on PATH).
    #[arg(long, value_enum)]
    pub driver: Option<Driver>,
}

#[derive(Debug, Subcommand)]
pub enum VmCommand {
    /// Is the VM running, on which port and accelerator, with which band-server.
    Status {
        #[command(flatten)]
        driver: DriverArg,
        #[arg(long)]
        json: bool,
    },
    /// Boot the VM made by `band setup` and check its band-server (upgrading a stale one).
    Start {
        #[command(flatten)]
        driver: DriverArg,
        /// KVM when it works (probed), else TCG; or force one.
        #[arg(long, value_enum, default_value_t = AccelArg::Auto)]
        accel: AccelArg,
    },
    /// Power the VM off.
    Stop {
        #[command(flatten)]
        driver: DriverArg,
    },
    /// Stop the VM and delete its disk and state (the cached image stays unless --images).
    Destroy {
        #[command(flatten)]
        driver: DriverArg,
        /// Also delete the cached base images.
        #[arg(long)]
        images: bool,
    },
    /// Open a root shell in the VM (or run a command) with the system's `ssh` client.
    Ssh {
        #[command(flatten)]
        driver: DriverArg,
        /// The command to run instead of a shell.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// Print the VM's console log and band-server's log.
    Logs {
        #[command(flatten)]
        driver: DriverArg,
        /// Lines of each log.
        #[arg(long, default_value_t = 100)]
        lines: usize,
    },
}

/// The driver a `band vm` command acts on.
fn pick_driver(arg: &DriverArg, paths: &VmPaths) -> Driver {
    if let Some(d) = arg.driver {
        return d;
    }
    let qemu_exists = InstanceDir::new(paths).state().is_file();
    let lima_exists = paths.instance_dir(lima::DRIVER).join(lima::STATE).is_file();
    match (qemu_exists, lima_exists) {
        (true, false) => Driver::Qemu,
        (false, true) => Driver::Lima,
        _ => Driver::default_for_host(),
    }
}

pub fn cmd_vm(args: VmArgs) -> Result<u8> {
    let paths = vm_paths()?;
    match args.command {
        VmCommand::Status { driver, json } => status(&paths, pick_driver(&driver, &paths), json),
        VmCommand::Start { driver, accel } => {
            let d = pick_driver(&driver, &paths);
            let mut steps = Steps::new("band vm start", false);
            match d {
                Driver::Qemu => {
                    let img = image::cached(&paths).ok_or_else(|| {
                        user_error(
                            "no VM image has been built",
                            "run `band setup --driver qemu`",
                        )
                    })?;
                    let res = InstanceDir::new(&paths)
                        .load_state()
                        .map(|s| s.resources)
                        .unwrap_or_default();
                    let up = qemu_up(&paths, &img, &res, accel, &mut steps)?;
                    ensure_server(&up.endpoint, &mut steps)?;
                    steps.finish();
                    eprintln!(
                        "band: the qemu VM is up ({}, ssh on 127.0.0.1:{}, ready {:.1} s after boot)",
                        up.accel.accel.as_str(),
                        up.endpoint.port,
                        up.boot_secs.unwrap_or(0.0)
                    );
                }
                Driver::Lima => {
                    super::setup::lima_start(&paths, &mut steps)?;
                }
                Driver::Ssh => bail!(user_error(
                    "an ssh:// target is not a VM",
                    "it is started and stopped by its owner"
                )),
            }
            Ok(exit::OK)
        }
        VmCommand::Stop { driver } => {
            match pick_driver(&driver, &paths) {
                Driver::Qemu => {
                    if qemu_stop(&paths)? {
                        eprintln!("band: the qemu VM is stopped");
                    } else {
                        eprintln!("band: the qemu VM was not running");
                    }
                }
                Driver::Lima => super::setup::lima_stop(&paths)?,
                Driver::Ssh => bail!(user_error(
                    "an ssh:// target is not a VM",
                    "it is started and stopped by its owner"
                )),
            }
            Ok(exit::OK)
        }
        VmCommand::Destroy { driver, images } => {
            let d = pick_driver(&driver, &paths);
            match d {
                Driver::Qemu => {
                    qemu_stop(&paths)?;
                    let inst = InstanceDir::new(&paths);
                    if inst.dir.exists() {
                        std::fs::remove_dir_all(&inst.dir)
                            .with_context(|| format!("cannot remove {}", inst.dir.display()))?;
                    }
                }
                Driver::Lima => super::setup::lima_destroy(&paths)?,
                Driver::Ssh => bail!(user_error(
                    "an ssh:// target is not a VM",
                    "remove its folder under the band data dir to forget it"
                )),
            }
            if images && paths.images_dir().exists() {
                std::fs::remove_dir_all(paths.images_dir())
                    .with_context(|| format!("cannot remove {}", paths.images_dir().display()))?;
            }
            eprintln!(
                "band: the {} VM is destroyed{}",
                d.as_str(),
                if images {
                    " and the cached images removed"
                } else {
                    ""
                }
            );
            Ok(exit::OK)
        }
        VmCommand::Ssh { driver, command } => {
            ssh_shell(&paths, pick_driver(&driver, &paths), &command)
        }
        VmCommand::Logs { driver, lines } => logs(&paths, pick_driver(&driver, &paths), lines),
    }
}

/// The QEMU VM after [`qemu_up`].
pub struct QemuUp {
    pub endpoint: Endpoint,
    pub accel: AccelChoice,
    /// Seconds from QEMU start to SSH ready, when this call booted it.
    pub boot_secs: Option<f64>,
}

/// Make sure the QEMU VM runs the current image with `res`, and answers SSH.
pub fn qemu_up(
    paths: &VmPaths,
    img: &Image,
    res: &Resources,
    accel: AccelArg,
    steps: &mut Steps,
) -> Result<QemuUp> {
    let inst = InstanceDir::new(paths);
    let qemu_bin = qemu::binary().ok_or_else(|| {
        user_error(
            "qemu-system-x86_64 is not installed",
            "apt-get install qemu-system-x86",
        )
    })?;
    if let Some(state) = inst.running() {
        let same_disk = std::fs::read_to_string(inst.disk_image())
            .unwrap_or_default()
            .trim()
            == img.hash();
        let same_accel = match accel {
            AccelArg::Auto => true,
            AccelArg::Kvm => state.accel == Accel::Kvm,
            AccelArg::Tcg => state.accel == Accel::Tcg,
        };
        if same_disk
            && same_accel
            && state.resources.cpus == res.cpus
            && state.resources.memory_mib == res.memory_mib
        {
            steps.start("check the running VM");
            let ep = qemu_endpoint(paths, state.ssh_port);
            ssh::connect(&ep, Duration::from_secs(30)).context(
                "the running VM does not answer SSH; try `band vm stop` and `band vm start`",
            )?;
            let accel = AccelChoice {
                accel: state.accel,
                reason: state.accel_reason.clone(),
                boot_id: String::new(),
            };
            return Ok(QemuUp {
                endpoint: ep,
                accel,
                boot_secs: None,
            });
        }
        steps.start("stop the VM (its image or size changed)");
        qemu_stop(paths)?;
    }
    if qemu::ensure_disk(&inst, img, res)? {
        steps.note(format!(
            "new disk {} over image {}",
            inst.disk().display(),
            img.hash()
        ));
    }
    steps.start("choose the accelerator");
    let choice = match accel {
        AccelArg::Auto => qemu::choose_accel(paths, &qemu_bin, &img.kernel()),
        AccelArg::Kvm => AccelChoice {
            accel: Accel::Kvm,
            reason: "--accel kvm".into(),
            boot_id: String::new(),
        },
        AccelArg::Tcg => AccelChoice {
            accel: Accel::Tcg,
            reason: "--accel tcg".into(),
            boot_id: String::new(),
        },
    };
    steps.note(format!("{}: {}", choice.accel.as_str(), choice.reason));
    steps.start(format!(
        "boot the VM ({}, {} CPUs, {} MiB)",
        choice.accel.as_str(),
        res.cpus,
        res.memory_mib
    ));
    let booted = Instant::now();
    let state = qemu::start(&inst, img, res, &choice, &qemu_bin)?;
    let ep = qemu_endpoint(paths, state.ssh_port);
    let alive_inst = inst.clone();
    let sess = ssh::wait_ready(&ep, BOOT_TIMEOUT, &mut || alive_inst.running().is_some()).map_err(
        |e| {
            let console =
                band::vm::cmd::tail(&std::fs::read(inst.console()).unwrap_or_default(), 8);
            anyhow::anyhow!(
                "{e}\nlast console lines ({}):\n{console}",
                inst.console().display()
            )
        },
    )?;
    let boot_secs = booted.elapsed().as_secs_f64();
    // Grow the file system to the disk (a no-op after the first boot).
    let _ = ssh::exec(&sess, "resize2fs /dev/vda >/dev/null 2>&1", b"");
    Ok(QemuUp {
        endpoint: ep,
        accel: choice,
        boot_secs: Some(boot_secs),
    })
}

/// Power the QEMU VM off (guest shutdown, then signals). Returns whether it was running.
pub fn qemu_stop(paths: &VmPaths) -> Result<bool> {
    let inst = InstanceDir::new(paths);
    let Some(state) = inst.running() else {
        return Ok(false);
    };
    let ep = qemu_endpoint(paths, state.ssh_port);
    if let Ok(sess) = ssh::connect(&ep, Duration::from_secs(5)) {
        let _ = ssh::exec(&sess, "systemctl poweroff", b"");
    }
    if !qemu::wait_exit(&inst, state.pid, Duration::from_secs(30)) {
        qemu::kill(&inst, Duration::from_secs(5))?;
    }
    Ok(true)
}

/// Install or upgrade band-server on a connected target, and check what it needs.
pub fn ensure_server(ep: &Endpoint, steps: &mut Steps) -> Result<install::ServerVersion> {
    steps.start("check band-server on the target (version handshake)");
    let sess = ssh::connect(ep, Duration::from_secs(30))?;
    let dir = install::local_dir()?;
    let local = install::local_manifest(&dir)?;
    let version = match install::handshake(&sess, &local)? {
        Handshake::Current(v) => {
            steps.note(format!(
                "band-server {} (protocol {}) is current",
                v.version, v.protocol
            ));
            v
        }
        other => {
            let why = match &other {
                Handshake::Missing => "not installed".to_string(),
                Handshake::Stale {
                    answered: Some(v), ..
                } => format!("stale (answers {} protocol {})", v.version, v.protocol),
                _ => "stale".to_string(),
            };
            steps.start(format!("install band-server ({why})"));
            install::install(&sess, ep, &dir, &local)?
        }
    };
    let missing = install::missing_prerequisites(&sess, ep)?;
    if !missing.is_empty() {
        bail!(user_error(
            format!("the target lacks {}", missing.join(", ")),
            "install them there (Debian: apt-get install bubblewrap iptables iproute2 passwd)",
        ));
    }
    Ok(version)
}

fn status(paths: &VmPaths, driver: Driver, json: bool) -> Result<u8> {
    let mut v = serde_json::json!({ "driver": driver.as_str() });
    match driver {
        Driver::Qemu => {
            let inst = InstanceDir::new(paths);
            let state = inst.load_state();
            let running = inst.running();
            v["state"] = serde_json::json!(if running.is_some() {
                "running"
            } else if state.is_some() {
                "stopped"
            } else {
                "absent"
            });
            v["image"] = serde_json::json!(image::cached(paths).map(|i| i.hash()));
            if let Some(s) = &state {
                v["accel"] = serde_json::json!(s.accel.as_str());
                v["accel_reason"] = serde_json::json!(s.accel_reason);
                v["resources"] = serde_json::json!(s.resources);
            }
            if let Some(s) = &running {
                v["pid"] = serde_json::json!(s.pid);
                v["ssh"] = serde_json::json!(format!("127.0.0.1:{}", s.ssh_port));
                v["band_server"] = server_status(&qemu_endpoint(paths, s.ssh_port));
            }
        }
        Driver::Lima => v = super::setup::lima_status(paths)?,
        Driver::Ssh => bail!(user_error(
            "`band vm status` is for VMs",
            "use `band doctor` for an ssh:// target"
        )),
    }
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
    } else if let Some(obj) = v.as_object() {
        for (k, val) in obj {
            let shown = match val {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            writeln!(out, "{k:13} {shown}")?;
        }
    }
    Ok(exit::OK)
}

/// band-server's version on a running target, and whether it is current.
pub fn server_status(ep: &Endpoint) -> serde_json::Value {
    let sess = match ssh::connect(ep, Duration::from_secs(15)) {
        Ok(s) => s,
        Err(e) => return serde_json::json!({ "error": e.to_string() }),
    };
    let local = match install::local_dir().and_then(|d| install::local_manifest(&d)) {
        Ok(m) => m,
        Err(e) => return serde_json::json!({ "error": e.to_string() }),
    };
    match install::handshake(&sess, &local) {
        Ok(Handshake::Current(v)) => {
            serde_json::json!({ "version": v.version, "protocol": v.protocol, "current": true })
        }
        Ok(Handshake::Stale { answered, .. }) => {
            serde_json::json!({ "answered": answered, "current": false })
        }
        Ok(Handshake::Missing) => serde_json::json!({ "installed": false }),
        Err(e) => serde_json::json!({ "error": e.to_string() }),
    }
}

fn ssh_shell(paths: &VmPaths, driver: Driver, command: &[String]) -> Result<u8> {
    let target = match driver {
        Driver::Qemu => Target::Qemu,
        Driver::Lima => Target::Lima,
        Driver::Ssh => bail!(user_error(
            "use the system ssh client for an ssh:// target",
            "ssh user@host"
        )),
    };
    let ep = endpoint_for(paths, &target)?;
    let ssh_bin = band::vm::cmd::which("ssh").ok_or_else(|| {
        user_error(
            "the `ssh` client is not installed",
            "apt-get install openssh-client",
        )
    })?;
    // A known_hosts file holding only the pinned key, for this port.
    let known = band::vm::keys::read_public(&ep.known_host)?;
    let kh = ep.known_host.with_file_name("known_hosts");
    band::vm::paths::write_atomic(
        &kh,
        format!("[{}]:{} {}\n", ep.host, ep.port, known.line()).as_bytes(),
        0o600,
    )?;
    let key = match &ep.auth {
        Auth::KeyFile(p) | Auth::AgentThenKey(p) => p.clone(),
    };
    let mut c = std::process::Command::new(ssh_bin);
    c.arg("-p").arg(ep.port.to_string());
    c.arg("-i").arg(&key);
    c.args([
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        "LogLevel=ERROR",
    ]);
    c.arg("-o")
        .arg(format!("UserKnownHostsFile={}", kh.display()));
    if command.is_empty() {
        c.arg("-t");
    }
    c.arg(format!("{}@{}", ep.user, ep.host));
    if !command.is_empty() {
        c.arg("--").args(command);
    }
    let status = c.status().context("cannot run ssh")?;
    Ok(status
        .code()
        .map(|c| c.clamp(0, 255) as u8)
        .unwrap_or(exit::SCRIPT_FAILED))
}

fn logs(paths: &VmPaths, driver: Driver, lines: usize) -> Result<u8> {
    let mut out = std::io::stdout().lock();
    let target = match driver {
        Driver::Qemu => {
            let console = InstanceDir::new(paths).console();
            let text = std::fs::read(&console).unwrap_or_default();
            writeln!(out, "== console ({}) ==", console.display())?;
            writeln!(out, "{}", band::vm::cmd::tail(&text, lines))?;
            Target::Qemu
        }
        Driver::Lima => Target::Lima,
        Driver::Ssh => bail!(user_error(
            "`band vm logs` is for VMs",
            "read /var/log/band-server.log on the host"
        )),
    };
    match endpoint_for(paths, &target)
        .and_then(|ep| Ok(ssh::connect(&ep, Duration::from_secs(15))?))
    {
        Ok(sess) => {
            let o = ssh::exec(
                &sess,
                &format!("tail -n {lines} {} 2>/dev/null", ssh::SERVER_LOG),
                b"",
            )?;
            writeln!(out, "== band-server ({}) ==", ssh::SERVER_LOG)?;
            out.write_all(&o.stdout)?;
        }
        Err(e) => writeln!(out, "== band-server: not reachable ({e}) ==")?,
    }
    Ok(exit::OK)
}
