//! `band setup`: provision a machine that runs band-server, idempotently.
//!
//! ```text
//! --driver qemu   build (or reuse) the image, make the disk, boot, install band-server
//! --driver lima   write the template, limactl create/start, pin the host key, install band-server
//! --driver ssh    pin the host key of user@host, install band-server there
//! ```
//!
//! Running it again changes nothing that is already right; `--force` rebuilds from scratch.

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::progress::Steps;
use super::user_error;
use super::vm::{self, AccelArg, Driver};
use band::client::ssh::{LimaState, SshState, lima_endpoint, ssh_endpoint_unchecked, vm_paths};
use band::proto::exit;
use band::vm::paths::{VmPaths, private_dir, write_atomic};
use band::vm::qemu::{InstanceDir, Resources};
use band::vm::ssh::{self, Endpoint};
use band::vm::{cmd, image, keys, lima};

#[derive(Debug, clap::Args)]
pub struct SetupArgs {
    /// qemu (Linux), lima (macOS, Linux) or ssh (any Linux host). Default: lima when limactl is on
    /// PATH, else qemu.
    #[arg(long, value_enum)]
    pub driver: Option<Driver>,
    /// For --driver ssh: user@host[:port].
    #[arg(long, value_name = "USER@HOST[:PORT]")]
    pub host: Option<String>,
    /// For --driver ssh: the private key to log in with (default: the ssh-agent, then band's key).
    #[arg(long, value_name = "FILE")]
    pub identity: Option<PathBuf>,
    /// CPUs of the VM.
    #[arg(long, default_value_t = 2)]
    pub cpus: u32,
    /// Memory of the VM (e.g. 2g, 2048m).
    #[arg(long, default_value = "2g")]
    pub memory: String,
    /// Disk of the VM (e.g. 8g); applies when the disk is made.
    #[arg(long, default_value = "8g")]
    pub disk: String,
    /// Rebuild: a new image (qemu), a new instance (lima), a fresh install (ssh).
    #[arg(long)]
    pub force: bool,
    /// qemu: KVM when it works (probed), else TCG; or force one.
    #[arg(long, value_enum, default_value_t = AccelArg::Auto)]
    pub accel: AccelArg,
    /// qemu: the Debian mirror to build from (a local mirror makes the build work offline).
    #[arg(long, value_name = "URL")]
    pub mirror: Option<String>,
    /// Print a JSON summary (with step timings) on stdout.
    #[arg(long)]
    pub json: bool,
}

fn size_mib(text: &str, what: &str) -> Result<u64> {
    let bytes = band::units::parse_bytes(text)
        .map_err(|e| user_error(format!("--{what}: {e}"), format!("e.g. --{what} 2g")))?;
    let mib = bytes >> 20;
    if mib < 256 {
        bail!(user_error(
            format!("--{what} {text} is too small"),
            format!("give at least 256m, e.g. --{what} 2g")
        ));
    }
    Ok(mib)
}

pub fn cmd_setup(args: SetupArgs) -> Result<u8> {
    let paths = vm_paths()?;
    let res = Resources {
        cpus: args.cpus.max(1),
        memory_mib: size_mib(&args.memory, "memory")?,
        disk_mib: size_mib(&args.disk, "disk")?,
    };
    let driver = args.driver.unwrap_or_else(Driver::default_for_host);
    if args.host.is_some() && driver != Driver::Ssh {
        bail!(user_error(
            "--host is for --driver ssh",
            "band setup --driver ssh --host user@host"
        ));
    }
    let started = Instant::now();
    let mut steps = Steps::new("band setup", args.json);
    let mut summary = match driver {
        Driver::Qemu => setup_qemu(&paths, &args, &res, &mut steps)?,
        Driver::Lima => setup_lima(&paths, &args, &res, &mut steps)?,
        Driver::Ssh => setup_ssh(&paths, &args, &mut steps)?,
    };
    steps.finish();
    summary["driver"] = serde_json::json!(driver.as_str());
    summary["total_secs"] = serde_json::json!(round(started.elapsed().as_secs_f64()));
    summary["steps"] = serde_json::json!(
        steps
            .done
            .iter()
            .map(|(s, t)| serde_json::json!({"step": s, "secs": round(*t)}))
            .collect::<Vec<_>>()
    );
    if args.json {
        writeln!(
            std::io::stdout(),
            "{}",
            serde_json::to_string_pretty(&summary)?
        )?;
    } else {
        let target = summary["target"].as_str().unwrap_or("").to_string();
        eprintln!(
            "band: setup done in {:.1} s; run skills with `--target {target}` (or `target = \"{target}\"` in ~/.config/band/config.toml)",
            started.elapsed().as_secs_f64()
        );
    }
    Ok(exit::OK)
}

fn round(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn setup_qemu(
    paths: &VmPaths,
    args: &SetupArgs,
    res: &Resources,
    steps: &mut Steps,
) -> Result<serde_json::Value> {
    if !cfg!(target_os = "linux") {
        bail!(user_error(
            "the qemu driver builds its image with Linux tools",
            "use --driver lima on macOS"
        ));
    }
    steps.start("check the host tools");
    if band::vm::qemu::binary().is_none() {
        bail!(user_error(
            "qemu-system-x86_64 is not installed",
            "apt-get install qemu-system-x86 qemu-utils"
        ));
    }
    keys::ensure_key(&paths.client_key(), "band")?;
    if args.force {
        vm::qemu_stop(paths)?;
        let inst = InstanceDir::new(paths);
        if inst.dir.exists() {
            std::fs::remove_dir_all(&inst.dir)
                .with_context(|| format!("cannot remove {}", inst.dir.display()))?;
        }
    }
    let mut built = None;
    let img = match image::cached(paths).filter(|_| !args.force) {
        Some(img) => {
            steps.note(format!("image {} is built", img.hash()));
            img
        }
        None => {
            let t = Instant::now();
            let img = image::build(paths, args.mirror.as_deref(), &mut |step| {
                steps.start(format!("build the image: {}", step.describe()))
            })?;
            image::remove_others(paths, &img)?;
            built = Some(round(t.elapsed().as_secs_f64()));
            img
        }
    };
    let up = vm::qemu_up(paths, &img, res, args.accel, steps)?;
    let version = vm::ensure_server(&up.endpoint, steps)?;
    Ok(serde_json::json!({
        "target": "qemu",
        "image": img.hash(),
        "image_build_secs": built,
        "accel": up.accel.accel.as_str(),
        "accel_reason": up.accel.reason,
        "boot_to_ready_secs": up.boot_secs.map(round),
        "ssh": format!("127.0.0.1:{}", up.endpoint.port),
        "band_server": version.version,
        "protocol": version.protocol,
    }))
}

fn limactl_present() -> Result<()> {
    if cmd::which("limactl").is_none() {
        bail!(user_error(
            "limactl is not installed",
            "install Lima (https://lima-vm.io; `brew install lima` on macOS), or use --driver qemu on Linux"
        ));
    }
    Ok(())
}

fn lima_list() -> Result<Option<lima::Instance>> {
    let out = cmd::run_argv(&lima::list_argv());
    match out {
        Ok(o) => Ok(lima::parse_list(&String::from_utf8_lossy(&o.stdout))?),
        Err(e) => Err(e.into()),
    }
}

fn setup_lima(
    paths: &VmPaths,
    args: &SetupArgs,
    res: &Resources,
    steps: &mut Steps,
) -> Result<serde_json::Value> {
    steps.start("check limactl and write the template");
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
    if args.force && lima_list()?.is_some() {
        steps.start("delete the old instance (--force)");
        cmd::run_argv(&lima::delete_argv())?;
        let _ = std::fs::remove_file(dir.join("known_host"));
    }
    if lima_list()?.is_none() {
        steps.start("create the Lima instance `band`");
        cmd::run_argv(&lima::create_argv(&yaml_path))?;
    }
    let t = Instant::now();
    let mut ep = lima_start(paths, steps)?;
    // The template installs a newer kernel than the cloud image boots (see band.yaml): restart
    // once so runs with allow.net get it.
    let sess = ssh::connect(&ep, Duration::from_secs(30))?;
    let kernels = ssh::exec(&sess, "uname -r; ls /boot", b"")?.stdout_text();
    if lima::needs_reboot(&kernels) {
        steps.start("restart the Lima VM into the newer kernel");
        cmd::run_argv(&lima::stop_argv())?;
        ep = lima_start(paths, steps)?;
    }
    let version = vm::ensure_server(&ep, steps)?;
    Ok(
        serde_json::json!({ "target": "lima", "ssh": ep.addr(), "start_secs": round(t.elapsed().as_secs_f64()), "band_server": version.version, "protocol": version.protocol }),
    )
}

/// Start the Lima instance if needed, pin its host key on first use, and return its endpoint.
pub fn lima_start(paths: &VmPaths, steps: &mut Steps) -> Result<Endpoint> {
    limactl_present()?;
    let inst = lima_list()?.ok_or_else(|| {
        user_error(
            "there is no Lima instance `band`",
            "run `band setup --driver lima`",
        )
    })?;
    if inst.status != "Running" {
        steps.start("start the Lima instance (limactl start)");
        cmd::run_argv(&lima::start_argv())?;
    }
    let inst = lima_list()?.ok_or_else(|| anyhow::anyhow!("the Lima instance disappeared"))?;
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
    lima_endpoint(paths)
}

pub fn lima_stop(_paths: &VmPaths) -> Result<()> {
    limactl_present()?;
    match lima_list()? {
        Some(i) if i.status == "Running" => {
            cmd::run_argv(&lima::stop_argv())?;
            eprintln!("band: the Lima VM is stopped");
        }
        _ => eprintln!("band: the Lima VM was not running"),
    }
    Ok(())
}

pub fn lima_destroy(paths: &VmPaths) -> Result<()> {
    if cmd::which("limactl").is_some() && lima_list()?.is_some() {
        cmd::run_argv(&lima::delete_argv())?;
    }
    let dir = paths.instance_dir(lima::DRIVER);
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .with_context(|| format!("cannot remove {}", dir.display()))?;
    }
    Ok(())
}

pub fn lima_status(paths: &VmPaths) -> Result<serde_json::Value> {
    limactl_present()?;
    let mut v = serde_json::json!({ "driver": "lima" });
    match lima_list()? {
        None => v["state"] = serde_json::json!("absent"),
        Some(i) => {
            v["state"] = serde_json::json!(i.status.to_lowercase());
            if i.status == "Running" {
                let ep = lima_endpoint(paths)?;
                v["ssh"] = serde_json::json!(ep.addr());
                v["band_server"] = vm::server_status(&ep);
            }
        }
    }
    Ok(v)
}

/// Parse `user@host[:port]` (as in `ssh://user@host[:port]`).
pub fn parse_host(text: &str) -> Result<(String, String, u16)> {
    match band::manifest::Target::parse(&format!("ssh://{text}")) {
        Ok(band::manifest::Target::Ssh { user, host, port }) => Ok((user, host, port)),
        Ok(_) | Err(_) => Err(user_error(
            format!("--host {text} is not user@host[:port]"),
            "e.g. --host deploy@build.example.com",
        )),
    }
}

fn setup_ssh(paths: &VmPaths, args: &SetupArgs, steps: &mut Steps) -> Result<serde_json::Value> {
    let host_arg = args.host.as_deref().ok_or_else(|| {
        user_error(
            "--driver ssh needs --host",
            "band setup --driver ssh --host user@host",
        )
    })?;
    let (user, host, port) = parse_host(host_arg)?;
    let dir = paths.ssh_dir(&user, &host, port);
    private_dir(&dir)?;
    let known = dir.join("known_host");
    if args.force {
        let _ = std::fs::remove_file(&known);
    }
    if let Some(id) = &args.identity {
        keys::check_private(id)?;
    } else {
        keys::ensure_key(&paths.client_key(), "band")?;
    }
    write_atomic(
        &dir.join("target.json"),
        serde_json::to_string(&SshState {
            identity: args.identity.clone(),
        })?
        .as_bytes(),
        0o600,
    )?;
    steps.start(format!("connect to {user}@{host}:{port}"));
    let mut ep = ssh_endpoint_unchecked(paths, &user, &host, port, args.identity.clone());
    if !known.exists() {
        let key = ssh::fetch_host_key(&ep, Duration::from_secs(20))?;
        ssh::pin(&known, &key)?;
        steps.note(format!("pinned the host key {} {} (check it with `ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub` on the host)", key.algo, key.fingerprint()));
    }
    let sess = ssh::connect(&ep, Duration::from_secs(20)).map_err(|e| {
        let pubkey = paths.client_key().with_extension("pub");
        user_error(
            e.to_string(),
            format!("authorise a key for {user}: pass --identity FILE, load one into ssh-agent, or add {} to ~{user}/.ssh/authorized_keys", pubkey.display()),
        )
    })?;
    if user != "root" {
        let out = ssh::exec(&sess, "sudo -n true", b"")?;
        if out.status != 0 {
            bail!(user_error(
                format!("{user} cannot run `sudo -n` on {host} ({})", out.stderr),
                "band-server runs as root: log in as root, or give the user passwordless sudo"
            ));
        }
        ep.sudo = true;
    }
    let version = vm::ensure_server(&ep, steps)?;
    let target = if port == 22 {
        format!("ssh://{user}@{host}")
    } else {
        format!("ssh://{user}@{host}:{port}")
    };
    Ok(
        serde_json::json!({ "target": target, "ssh": ep.addr(), "band_server": version.version, "protocol": version.protocol }),
    )
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

    #[test]
    fn sizes_are_checked() {
        assert_eq!(size_mib("2g", "memory").unwrap(), 2048);
        assert!(size_mib("1m", "memory").is_err());
        assert!(size_mib("lots", "disk").is_err());
    }
}
