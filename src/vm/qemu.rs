//! The QEMU driver (Linux hosts): boot the cached image with `-kernel/-initrd`, a copy-on-write
//! disk, user-mode networking with only SSH forwarded (to a random free loopback port), KVM when
//! `/dev/kvm` really works and TCG otherwise.
//!
//! `/dev/kvm` existing is not enough: nested setups can open it and then hang on the first guest
//! instruction that needs real virtualisation. [`probe_argv`] boots the image's own kernel under
//! KVM with no root disk, so a working KVM reaches a deliberate panic within seconds; a hang or
//! an error means TCG. The answer is cached per host boot.

use std::ffi::OsString;
use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::cmd::{self, os};
use super::image::{self, Image};
use super::paths::{VmPaths, private_dir, write_atomic};
use super::{Result, VmError};

pub const DRIVER: &str = "qemu";
/// How long the KVM probe may take before KVM is declared unusable.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Accel {
    Kvm,
    Tcg,
}

impl Accel {
    pub fn as_str(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }

    /// The `-accel` value. TCG runs single-threaded: with one host thread per vCPU (QEMU's
    /// default), a vCPU can run a stale translation of kernel text that another vCPU is patching,
    /// and Linux 6.12 (the image's bookworm-backports kernel) then hits a leftover `int3` in
    /// `sched_clock_cpu` and panics at boot ("Oops: int3"; seen once here under load, one boot in
    /// many). One thread runs the vCPUs in turn and invalidates patched code at once.
    pub fn accel_arg(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg,thread=single",
        }
    }

    /// The CPU model: the host's under KVM; under TCG everything it can emulate except
    /// CMPXCHG16B, whose emulation in QEMU 7.2 (Debian 12) corrupts the stack of Linux 6.12's
    /// SLUB allocator (a double fault in the first modprobe; the kernel falls back without it).
    pub fn cpu(self) -> &'static str {
        match self {
            Accel::Kvm => "host",
            Accel::Tcg => "max,-cx16",
        }
    }
}

/// One QEMU instance, as its command line needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QemuSpec {
    pub binary: PathBuf,
    pub accel: Accel,
    pub cpus: u32,
    pub memory_mib: u64,
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    pub disk: PathBuf,
    pub ssh_port: u16,
    pub console_log: PathBuf,
    pub pidfile: PathBuf,
}

/// The kernel command line of the VM.
pub const APPEND: &str =
    "root=/dev/vda rw console=ttyS0 quiet loglevel=3 systemd.show_status=false";

/// The QEMU command line. The only way in is the SSH forward on 127.0.0.1; no display, no
/// monitor, no shared folders, no other devices than the disk, the network card and an RNG.
pub fn argv(s: &QemuSpec) -> Vec<OsString> {
    vec![
        os(&s.binary),
        os("-name"),
        os("band"),
        os("-machine"),
        os("q35"),
        os("-accel"),
        os(s.accel.accel_arg()),
        os("-cpu"),
        os(s.accel.cpu()),
        os("-smp"),
        os(s.cpus.to_string()),
        os("-m"),
        os(format!("{}M", s.memory_mib)),
        os("-nodefaults"),
        os("-no-user-config"),
        os("-display"),
        os("none"),
        os("-no-reboot"),
        os("-kernel"),
        os(&s.kernel),
        os("-initrd"),
        os(&s.initrd),
        os("-append"),
        os(APPEND),
        os("-drive"),
        os(format!(
            "file={},if=virtio,format=qcow2,discard=unmap",
            drive_path(&s.disk)
        )),
        os("-netdev"),
        os(format!(
            "user,id=net0,hostfwd=tcp:127.0.0.1:{}-:22",
            s.ssh_port
        )),
        os("-device"),
        os("virtio-net-pci,netdev=net0"),
        os("-device"),
        os("virtio-rng-pci"),
        os("-serial"),
        os(format!("file:{}", s.console_log.display())),
        os("-pidfile"),
        os(&s.pidfile),
        os("-daemonize"),
    ]
}

/// A path inside a `-drive` option: commas are doubled (QEMU's escaping).
fn drive_path(p: &Path) -> String {
    p.to_string_lossy().replace(',', ",,")
}

/// The KVM probe: the image's kernel with no disk and `panic=-1`, so it panics at "no root
/// file system" and QEMU exits (`-no-reboot`). Reaching that panic in time means KVM works.
pub fn probe_argv(binary: &Path, kernel: &Path, console_log: &Path) -> Vec<OsString> {
    vec![
        os(binary),
        os("-machine"),
        os("q35"),
        os("-accel"),
        os("kvm"),
        os("-cpu"),
        os("host"),
        os("-m"),
        os("256M"),
        os("-nodefaults"),
        os("-no-user-config"),
        os("-display"),
        os("none"),
        os("-no-reboot"),
        os("-kernel"),
        os(kernel),
        os("-append"),
        os("console=ttyS0 panic=-1 root=/dev/band-probe"),
        os("-serial"),
        os(format!("file:{}", console_log.display())),
    ]
}

/// The QEMU binary for this host's architecture.
pub fn binary() -> Option<PathBuf> {
    let name = if cfg!(target_arch = "aarch64") {
        "qemu-system-aarch64"
    } else {
        "qemu-system-x86_64"
    };
    cmd::which(name)
}

/// Which accelerator to use, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccelChoice {
    pub accel: Accel,
    pub reason: String,
    /// The host boot the answer belongs to (`/proc/sys/kernel/random/boot_id`).
    #[serde(default)]
    pub boot_id: String,
}

fn boot_id() -> String {
    fs_err::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Can this process open `/dev/kvm` read-write?
/// The error says `path: reason`.
pub fn kvm_device_opens(dev: &Path) -> Result<()> {
    fs_err::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dev)
        .map(|_| ())
        .map_err(|e| VmError::Invalid(format!("{}: {}", dev.display(), super::os_error(&e))))
}

/// Decide between KVM and TCG: the cached answer of this host boot, else a fresh probe.
pub fn choose_accel(paths: &VmPaths, qemu: &Path, kernel: &Path) -> AccelChoice {
    let cache = paths.accel_cache();
    let id = boot_id();
    if let Some(c) = fs_err::read_to_string(&cache)
        .ok()
        .and_then(|t| serde_json::from_str::<AccelChoice>(&t).ok())
        && !id.is_empty()
        && c.boot_id == id
    {
        return c;
    }
    let mut choice = probe_kvm(paths, Path::new("/dev/kvm"), qemu, kernel, PROBE_TIMEOUT);
    choice.boot_id = id;
    let _ = write_atomic(
        &cache,
        serde_json::to_string(&choice)
            .unwrap_or_default()
            .as_bytes(),
        0o600,
    );
    choice
}

/// Run the KVM probe (see the module docs). `kvm` is the device (`/dev/kvm`): one this process
/// cannot open read-write (an ordinary user outside the kvm group) means TCG, without a probe.
pub fn probe_kvm(
    paths: &VmPaths,
    kvm: &Path,
    qemu: &Path,
    kernel: &Path,
    timeout: Duration,
) -> AccelChoice {
    let tcg = |reason: String| AccelChoice {
        accel: Accel::Tcg,
        reason,
        boot_id: String::new(),
    };
    if let Err(e) = kvm_device_opens(kvm) {
        return tcg(format!("KVM unavailable ({e})"));
    }
    let log = paths.root.join("kvm-probe.log");
    let _ = fs_err::remove_file(&log);
    let argv = probe_argv(qemu, kernel, &log);
    let mut child = match cmd::command(&argv)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return tcg(format!("KVM probe could not start QEMU: {e}")),
    };
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return tcg(format!(
                    "/dev/kvm opens, but a KVM guest did not boot within {} s (nested or broken KVM)",
                    timeout.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => return tcg(format!("KVM probe: {e}")),
        }
    }
    let console = fs_err::read_to_string(&log).unwrap_or_default();
    if console.contains("Kernel panic") {
        AccelChoice {
            accel: Accel::Kvm,
            reason: format!(
                "KVM probe booted a kernel in {:.1} s",
                started.elapsed().as_secs_f64()
            ),
            boot_id: String::new(),
        }
    } else {
        let mut err = String::new();
        let _ = child.stderr.take().map(|mut s| s.read_to_string(&mut err));
        tcg(format!(
            "KVM guest failed: {}",
            cmd::tail(err.as_bytes(), 2)
        ))
    }
}

/// A free TCP port on 127.0.0.1 (QEMU binds it right after; a lost race is retried by `start`).
pub fn free_port() -> Result<u16> {
    let l = TcpListener::bind(("127.0.0.1", 0)).map_err(|source| VmError::Io {
        path: PathBuf::from("127.0.0.1:0"),
        source,
    })?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|source| VmError::Io {
            path: PathBuf::from("127.0.0.1:0"),
            source,
        })
}

/// The sizes of an instance (`band setup --cpus --memory --disk`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resources {
    pub cpus: u32,
    pub memory_mib: u64,
    pub disk_mib: u64,
}

impl Default for Resources {
    fn default() -> Self {
        Resources {
            cpus: 2,
            memory_mib: 2048,
            disk_mib: 8192,
        }
    }
}

/// `vm/qemu/state.json`: what was started, and how to reach it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct State {
    pub image: String,
    pub resources: Resources,
    pub accel: Accel,
    pub accel_reason: String,
    pub ssh_port: u16,
    pub pid: i32,
    pub started_at_unix: u64,
}

/// The files of the QEMU instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceDir {
    pub dir: PathBuf,
}

impl InstanceDir {
    pub fn new(paths: &VmPaths) -> Self {
        InstanceDir {
            dir: paths.instance_dir(DRIVER),
        }
    }
    pub fn disk(&self) -> PathBuf {
        self.dir.join("disk.qcow2")
    }
    pub fn state(&self) -> PathBuf {
        self.dir.join("state.json")
    }
    pub fn pidfile(&self) -> PathBuf {
        self.dir.join("qemu.pid")
    }
    pub fn console(&self) -> PathBuf {
        self.dir.join("console.log")
    }
    /// The pinned host key (copied from the image the disk was made from).
    pub fn known_host(&self) -> PathBuf {
        self.dir.join("known_host")
    }
    /// Which image the disk belongs to.
    pub fn disk_image(&self) -> PathBuf {
        self.dir.join("disk.image")
    }

    pub fn load_state(&self) -> Option<State> {
        fs_err::read_to_string(self.state())
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
    }

    pub fn save_state(&self, s: &State) -> Result<()> {
        write_atomic(
            &self.state(),
            serde_json::to_string_pretty(s)
                .unwrap_or_default()
                .as_bytes(),
            0o600,
        )
    }

    /// The running QEMU of this instance: the pid from the state, checked against the process's
    /// command line (a reused pid is not ours).
    pub fn running(&self) -> Option<State> {
        let s = self.load_state()?;
        is_our_qemu(s.pid, &self.disk()).then_some(s)
    }
}

/// Is `pid` a QEMU using `disk`?
pub fn is_our_qemu(pid: i32, disk: &Path) -> bool {
    if pid <= 0 {
        return false;
    }
    let Ok(raw) = fs_err::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args: Vec<String> = raw
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let want = format!("file={},", drive_path(disk));
    args.first().is_some_and(|a| a.contains("qemu-system"))
        && args.iter().any(|a| a.starts_with(&want))
}

/// Make the instance's disk (an overlay over `img`) unless one exists for this image.
/// Returns true when a new disk was made.
pub fn ensure_disk(inst: &InstanceDir, img: &Image, res: &Resources) -> Result<bool> {
    private_dir(&inst.dir)?;
    let current = fs_err::read_to_string(inst.disk_image()).unwrap_or_default();
    if inst.disk().is_file() && current.trim() == img.hash() {
        return Ok(false);
    }
    let _ = fs_err::remove_file(inst.disk());
    cmd::run_argv(&image::overlay_argv(
        &img.base(),
        &inst.disk(),
        res.disk_mib,
    ))?;
    write_atomic(&inst.disk_image(), img.hash().as_bytes(), 0o600)?;
    let key = img.host_key();
    fs_err::copy(&key, inst.known_host()).map_err(VmError::Fs)?;
    Ok(true)
}

/// Start QEMU in the background. Retries with another port when the chosen one was taken.
pub fn start(
    inst: &InstanceDir,
    img: &Image,
    res: &Resources,
    accel: &AccelChoice,
    qemu: &Path,
) -> Result<State> {
    let mut last = None;
    for _ in 0..3 {
        let port = free_port()?;
        let _ = fs_err::remove_file(inst.pidfile());
        let spec = QemuSpec {
            binary: qemu.to_path_buf(),
            accel: accel.accel,
            cpus: res.cpus,
            memory_mib: res.memory_mib,
            kernel: img.kernel(),
            initrd: img.initrd(),
            disk: inst.disk(),
            ssh_port: port,
            console_log: inst.console(),
            pidfile: inst.pidfile(),
        };
        match cmd::run_argv(&argv(&spec)) {
            Ok(_) => {
                let pid_text = fs_err::read_to_string(inst.pidfile()).map_err(VmError::Fs)?;
                let pid = pid_text.trim().parse().map_err(|_| {
                    VmError::Invalid(format!("{}: not a pid", inst.pidfile().display()))
                })?;
                let state = State {
                    image: img.hash(),
                    resources: *res,
                    accel: accel.accel,
                    accel_reason: accel.reason.clone(),
                    ssh_port: port,
                    pid,
                    started_at_unix: std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map(|d| d.as_secs())
                        .unwrap_or(0),
                };
                inst.save_state(&state)?;
                return Ok(state);
            }
            Err(VmError::Command { stderr, .. })
                if stderr.contains("hostfwd") || stderr.contains("host forwarding") =>
            {
                last = Some(stderr);
            }
            Err(e) => return Err(e),
        }
    }
    Err(VmError::Invalid(format!(
        "QEMU could not bind a loopback port for SSH: {}",
        last.unwrap_or_default()
    )))
}

/// Stop QEMU: SIGTERM, then SIGKILL after `grace`. The guest's file system is an overlay whose
/// journal recovers; callers that want a clean shutdown ask the guest to power off first.
pub fn kill(inst: &InstanceDir, grace: Duration) -> Result<bool> {
    let Some(state) = inst.running() else {
        return Ok(false);
    };
    let pid = state.pid.to_string();
    let _ = Command::new("kill").args(["-TERM", &pid]).status();
    let deadline = Instant::now() + grace;
    while is_our_qemu(state.pid, &inst.disk()) {
        if Instant::now() > deadline {
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
            std::thread::sleep(Duration::from_millis(200));
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(true)
}

/// Wait until the QEMU process has exited (after the guest powered off).
pub fn wait_exit(inst: &InstanceDir, pid: i32, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while is_our_qemu(pid, &inst.disk()) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> QemuSpec {
        QemuSpec {
            binary: PathBuf::from("qemu-system-x86_64"),
            accel: Accel::Tcg,
            cpus: 2,
            memory_mib: 2048,
            kernel: PathBuf::from("/i/vmlinuz"),
            initrd: PathBuf::from("/i/initrd.img"),
            disk: PathBuf::from("/q/disk.qcow2"),
            ssh_port: 40123,
            console_log: PathBuf::from("/q/console.log"),
            pidfile: PathBuf::from("/q/qemu.pid"),
        }
    }

    fn strings(argv: &[OsString]) -> Vec<String> {
        argv.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    fn value_of(a: &[String], flag: &str) -> Vec<String> {
        a.windows(2)
            .filter(|w| w[0] == flag)
            .map(|w| w[1].clone())
            .collect()
    }

    #[test]
    fn only_ssh_is_forwarded_and_only_on_loopback() {
        let a = strings(&argv(&spec()));
        assert_eq!(
            value_of(&a, "-netdev"),
            ["user,id=net0,hostfwd=tcp:127.0.0.1:40123-:22"]
        );
        assert!(
            a.iter()
                .filter(|x| x.contains("hostfwd") || x.contains("guestfwd"))
                .count()
                == 1
        );
        for absent in [
            "-virtfs", "-fsdev", "-monitor", "-qmp", "-vnc", "-spice", "-chardev",
        ] {
            assert!(!a.contains(&absent.to_string()), "{absent} in {a:?}");
        }
        assert_eq!(
            value_of(&a, "-device"),
            ["virtio-net-pci,netdev=net0", "virtio-rng-pci"]
        );
        assert!(
            a.contains(&"-nodefaults".to_string()) && a.contains(&"-no-user-config".to_string())
        );
    }

    #[test]
    fn boots_the_image_kernel_with_the_overlay_disk() {
        let a = strings(&argv(&spec()));
        assert_eq!(value_of(&a, "-kernel"), ["/i/vmlinuz"]);
        assert_eq!(value_of(&a, "-initrd"), ["/i/initrd.img"]);
        assert_eq!(
            value_of(&a, "-drive"),
            ["file=/q/disk.qcow2,if=virtio,format=qcow2,discard=unmap"]
        );
        assert_eq!(value_of(&a, "-append"), [APPEND]);
        assert_eq!(value_of(&a, "-serial"), ["file:/q/console.log"]);
        assert_eq!(value_of(&a, "-smp"), ["2"]);
        assert_eq!(value_of(&a, "-m"), ["2048M"]);
        assert!(a.contains(&"-daemonize".to_string()));
    }

    #[test]
    fn accel_picks_the_cpu_model() {
        let a = strings(&argv(&spec()));
        assert_eq!(
            (value_of(&a, "-accel"), value_of(&a, "-cpu")),
            (
                vec!["tcg,thread=single".to_string()],
                vec!["max,-cx16".to_string()]
            )
        );
        let k = strings(&argv(&QemuSpec {
            accel: Accel::Kvm,
            ..spec()
        }));
        assert_eq!(
            (value_of(&k, "-accel"), value_of(&k, "-cpu")),
            (vec!["kvm".to_string()], vec!["host".to_string()])
        );
    }

    #[test]
    fn commas_in_the_disk_path_are_escaped() {
        let a = strings(&argv(&QemuSpec {
            disk: PathBuf::from("/a,b/disk.qcow2"),
            ..spec()
        }));
        assert_eq!(
            value_of(&a, "-drive"),
            ["file=/a,,b/disk.qcow2,if=virtio,format=qcow2,discard=unmap"]
        );
    }

    #[test]
    fn kvm_only_when_the_device_opens_read_write_and_a_guest_boots() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let paths = VmPaths::new(t.path());
        fs_err::create_dir_all(&paths.root).unwrap();
        // A stand-in QEMU that "boots" the probe: the kernel's panic on the serial console.
        let qemu = t.path().join("qemu");
        fs_err::write(
            &qemu,
            "#!/bin/sh\nfor a; do case $a in file:*) echo 'Kernel panic - not syncing' > \"${a#file:}\";; esac; done\n",
        )
        .unwrap();
        fs_err::set_permissions(&qemu, std::fs::Permissions::from_mode(0o755)).unwrap();
        let kernel = t.path().join("vmlinuz");
        let probe = |kvm: &Path| {
            // A stand-in written just now can be "busy" if another test thread forked meanwhile.
            let mut c = probe_kvm(&paths, kvm, &qemu, &kernel, Duration::from_secs(20));
            for _ in 0..5 {
                if !c.reason.contains("busy") {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
                c = probe_kvm(&paths, kvm, &qemu, &kernel, Duration::from_secs(20));
            }
            c
        };

        // No device, or one that does not open read-write (a folder never does, even for root;
        // /dev/kvm without the kvm group is the same refusal): TCG, saying why.
        let missing = t.path().join("no-kvm");
        let c = probe(&missing);
        assert_eq!(c.accel, Accel::Tcg);
        assert!(c.reason.contains("no-kvm"), "{c:?}");
        let dir = t.path().join("kvm-dir");
        fs_err::create_dir(&dir).unwrap();
        assert_eq!(probe(&dir).accel, Accel::Tcg);
        // A device that opens, and a guest that reaches its panic: KVM.
        let dev = t.path().join("kvm");
        fs_err::write(&dev, b"").unwrap();
        fs_err::set_permissions(&dev, std::fs::Permissions::from_mode(0o600)).unwrap();
        let c = probe(&dev);
        assert_eq!(c.accel, Accel::Kvm, "{c:?}");
    }

    #[test]
    fn the_kvm_probe_has_no_disk_and_panics_on_purpose() {
        let a = strings(&probe_argv(
            Path::new("qemu"),
            Path::new("/i/vmlinuz"),
            Path::new("/p.log"),
        ));
        assert_eq!(value_of(&a, "-accel"), ["kvm"]);
        assert!(value_of(&a, "-append")[0].contains("panic=-1"));
        assert!(a.contains(&"-no-reboot".to_string()));
        assert!(
            !a.iter()
                .any(|x| x == "-drive" || x == "-netdev" || x == "-daemonize")
        );
    }

    #[test]
    fn free_port_is_a_loopback_port() {
        let p = free_port().unwrap();
        assert!(p > 0);
        assert!(TcpListener::bind(("127.0.0.1", p)).is_ok());
    }

    #[test]
    fn a_pid_that_is_not_our_qemu_is_not_running() {
        assert!(!is_our_qemu(
            std::process::id() as i32,
            Path::new("/q/disk.qcow2")
        ));
        assert!(!is_our_qemu(0, Path::new("/q/disk.qcow2")));
        let t = tempfile::tempdir().unwrap();
        let inst = InstanceDir {
            dir: t.path().to_path_buf(),
        };
        assert!(inst.running().is_none());
    }
}
