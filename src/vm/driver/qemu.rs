//! The QEMU VM: an image built from a recipe, booted with `-kernel`, SSH on a loopback port.

use std::time::{Duration, Instant};

use super::{AccelPref, Driver, DriverKind, Logs, SetupOptions, Up, round_secs};
use crate::vm::Progress;
use crate::vm::endpoint::{Auth, Endpoint};
use crate::vm::image::{self, Image};
use crate::vm::paths::VmPaths;
use crate::vm::qemu::{self, Accel, AccelChoice, InstanceDir, Resources};
use crate::vm::ssh;
use crate::vm::{Result, VmError, cmd, keys};

/// How long a VM may take from QEMU start to SSH (TCG on a busy 2-core machine is slow).
pub const BOOT_TIMEOUT: Duration = Duration::from_secs(900);

/// The QEMU VM in the band data folder.
pub struct Qemu {
    paths: VmPaths,
}

impl Qemu {
    pub fn new(paths: &VmPaths) -> Self {
        Qemu {
            paths: paths.clone(),
        }
    }
}

/// The endpoint of the QEMU instance on `port`.
pub fn endpoint(paths: &VmPaths, port: u16) -> Endpoint {
    Endpoint {
        host: "127.0.0.1".into(),
        port,
        user: "root".into(),
        auth: Auth::KeyFile(paths.client_key()),
        known_host: InstanceDir::new(paths).known_host(),
        sudo: false,
        ssh_config: None,
    }
}

/// Make sure the QEMU VM runs the current image with `res`, and answers SSH.
pub fn up(
    paths: &VmPaths,
    img: &Image,
    res: &Resources,
    accel: AccelPref,
    steps: &mut dyn Progress,
) -> Result<Up> {
    let inst = InstanceDir::new(paths);
    let qemu_bin = qemu::binary().ok_or_else(|| {
        VmError::user(
            "qemu-system-x86_64 is not installed",
            "apt-get install qemu-system-x86",
        )
    })?;
    if let Some(state) = inst.running() {
        let same_disk = fs_err::read_to_string(inst.disk_image())
            .unwrap_or_default()
            .trim()
            == img.hash();
        let same_accel = match accel {
            AccelPref::Auto => true,
            AccelPref::Kvm => state.accel == Accel::Kvm,
            AccelPref::Tcg => state.accel == Accel::Tcg,
        };
        if same_disk
            && same_accel
            && state.resources.cpus == res.cpus
            && state.resources.memory_mib == res.memory_mib
        {
            steps.start("check the running VM".into());
            let ep = endpoint(paths, state.ssh_port);
            ssh::connect(&ep, Duration::from_secs(30))
                .map_err(|e| VmError::NoAnswer(Box::new(e)))?;
            let accel = AccelChoice {
                accel: state.accel,
                reason: state.accel_reason.clone(),
                boot_id: String::new(),
            };
            return Ok(Up {
                endpoint: ep,
                accel: Some(accel),
                boot_secs: None,
            });
        }
        steps.start("stop the VM (its image or size changed)".into());
        stop(paths)?;
    }
    if qemu::ensure_disk(&inst, img, res)? {
        steps.note(format!(
            "new disk {} over image {}",
            inst.disk().display(),
            img.hash()
        ));
    }
    steps.start("choose the accelerator".into());
    let choice = match accel {
        AccelPref::Auto => qemu::choose_accel(paths, &qemu_bin, &img.kernel()),
        AccelPref::Kvm => AccelChoice {
            accel: Accel::Kvm,
            reason: "--accel kvm".into(),
            boot_id: String::new(),
        },
        AccelPref::Tcg => AccelChoice {
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
    let ep = endpoint(paths, state.ssh_port);
    let alive_inst = inst.clone();
    let sess = ssh::wait_ready(&ep, BOOT_TIMEOUT, &mut || alive_inst.running().is_some()).map_err(
        |e| {
            let console = cmd::tail(&fs_err::read(inst.console()).unwrap_or_default(), 8);
            VmError::Invalid(format!(
                "{e}\nlast console lines ({}):\n{console}",
                inst.console().display()
            ))
        },
    )?;
    let boot_secs = booted.elapsed().as_secs_f64();
    // Grow the file system to the disk (a no-op after the first boot).
    let _ = ssh::exec(&sess, "resize2fs /dev/vda >/dev/null 2>&1", b"");
    Ok(Up {
        endpoint: ep,
        accel: Some(choice),
        boot_secs: Some(boot_secs),
    })
}

/// Power the QEMU VM off (guest shutdown, then signals). Returns whether it was running.
pub fn stop(paths: &VmPaths) -> Result<bool> {
    let inst = InstanceDir::new(paths);
    let Some(state) = inst.running() else {
        crate::vm::mux::close_all(&inst.dir);
        return Ok(false);
    };
    let ep = endpoint(paths, state.ssh_port);
    // Through the master (or a new one), which then ends with the others (it would exit with
    // the VM anyway).
    if let Ok(sess) = ssh::connect(&ep, Duration::from_secs(5)) {
        let _ = ssh::exec(&sess, "systemctl poweroff", b"");
    }
    crate::vm::mux::close_all(&inst.dir);
    if !qemu::wait_exit(&inst, state.pid, Duration::from_secs(30)) {
        qemu::kill(&inst, Duration::from_secs(5))?;
    }
    Ok(true)
}

/// Stop the VM and delete its instance folder (the disk and state).
fn remove_instance(paths: &VmPaths) -> Result<()> {
    stop(paths)?;
    let inst = InstanceDir::new(paths);
    if inst.dir.exists() {
        fs_err::remove_dir_all(&inst.dir).map_err(VmError::Fs)?;
    }
    Ok(())
}

impl Driver for Qemu {
    fn kind(&self) -> DriverKind {
        DriverKind::Qemu
    }

    fn setup(&self, opts: &SetupOptions, steps: &mut dyn Progress) -> Result<serde_json::Value> {
        let paths = &self.paths;
        if !cfg!(target_os = "linux") {
            return Err(VmError::user(
                "the qemu driver builds its image with Linux tools",
                "use --driver lima on macOS",
            ));
        }
        steps.start("check the host tools".into());
        if qemu::binary().is_none() {
            return Err(VmError::user(
                "qemu-system-x86_64 is not installed",
                "apt-get install qemu-system-x86 qemu-utils",
            ));
        }
        keys::ensure_key(&paths.client_key(), "band")?;
        if opts.force {
            remove_instance(paths)?;
        }
        let mut built = None;
        let img = match image::cached(paths).filter(|_| !opts.force) {
            Some(img) => {
                steps.note(format!("image {} is built", img.hash()));
                img
            }
            None => {
                let t = Instant::now();
                let img = image::build(paths, opts.mirror.as_deref(), &mut |step| {
                    steps.start(format!("build the image: {}", step.describe()))
                })?;
                image::remove_others(paths, &img)?;
                built = Some(round_secs(t.elapsed().as_secs_f64()));
                img
            }
        };
        let up = up(paths, &img, &opts.resources, opts.accel, steps)?;
        let version = super::server::ensure_server(
            &up.endpoint,
            steps,
            super::server::WayPlan::Choose {
                forced: opts.build_server_in_guest,
                auto: false,
            },
        )?;
        let accel = up.accel.as_ref();
        Ok(serde_json::json!({
            "target": "qemu",
            "image": img.hash(),
            "image_build_secs": built,
            "accel": accel.map(|a| a.accel.as_str()),
            "accel_reason": accel.map(|a| a.reason.clone()),
            "boot_to_ready_secs": up.boot_secs.map(round_secs),
            "ssh": format!("127.0.0.1:{}", up.endpoint.port),
            "band_server": version.version,
            "protocol": version.protocol,
            "server_way": crate::vm::install::read_way(&up.endpoint),
        }))
    }

    fn up(&self, accel: AccelPref, steps: &mut dyn Progress) -> Result<Up> {
        let paths = &self.paths;
        let img = image::cached(paths).ok_or_else(|| {
            VmError::user(
                "no VM image has been built",
                "run `band setup --driver qemu`",
            )
        })?;
        let res = InstanceDir::new(paths)
            .load_state()
            .map(|s| s.resources)
            .unwrap_or_default();
        let up = up(paths, &img, &res, accel, steps)?;
        super::server::ensure_server(&up.endpoint, steps, super::server::WayPlan::Recorded)?;
        Ok(up)
    }

    fn stop(&self) -> Result<bool> {
        stop(&self.paths)
    }

    fn destroy(&self) -> Result<()> {
        remove_instance(&self.paths)
    }

    fn status(&self) -> Result<serde_json::Value> {
        let paths = &self.paths;
        let mut v = serde_json::json!({ "driver": "qemu" });
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
            v["band_server"] = super::server::server_status(&endpoint(paths, s.ssh_port));
        }
        Ok(v)
    }

    fn endpoint(&self) -> Result<Endpoint> {
        let state = InstanceDir::new(&self.paths).running().ok_or_else(|| {
            VmError::user(
                "the qemu VM is not running",
                "run `band vm start` (or `band setup --driver qemu` the first time)",
            )
        })?;
        Ok(endpoint(&self.paths, state.ssh_port))
    }

    fn shell(&self) -> Result<Endpoint> {
        self.endpoint()
    }

    fn logs(&self, lines: usize) -> Result<Logs> {
        let console = InstanceDir::new(&self.paths).console();
        let text = fs_err::read(&console).unwrap_or_default();
        Ok(Logs {
            console: Some((console, cmd::tail(&text, lines))),
            server: super::server::server_log(self.endpoint(), lines),
        })
    }
}
