//! One [`Driver`] per kind of machine that runs band-server: the QEMU VM ([`qemu`]), the Lima
//! VM ([`lima`]) and a remote host over SSH ([`remote`]). `band setup`, `band vm …` and the ssh
//! transport call them through the trait; [`select`] is the one place that picks the
//! implementation. An operation a driver cannot do (destroy an ssh host) is answered by that
//! driver with a [`VmError::User`] saying why.
//!
//! Dependency order (each uses only those before it):
//!
//! ```text
//! vm::{cmd, paths, keys, recipe, image, qemu, lima, endpoint, framing, mux, ssh, stage, install}
//! driver                        the Driver trait, its option and answer types
//! driver::server                band-server on a machine: install/upgrade, version, log
//! driver::{qemu, lima, remote}  the three implementations
//! driver::select                the driver for a --driver kind or a --target
//! ```
//!
//! Nothing here knows the user config or the run pipeline (`crate::client` sits above).

pub mod lima;
pub mod qemu;
pub mod remote;
pub mod select;
pub mod server;

use std::path::PathBuf;

use super::endpoint::Endpoint;
use super::paths::VmPaths;
use super::qemu::{AccelChoice, InstanceDir, Resources};
use super::{Progress, Result, VmError};

/// The kinds of machine (`--driver`: clap reads the value as it is spelled in [`Self::as_str`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DriverKind {
    Qemu,
    Lima,
    Ssh,
}

impl DriverKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DriverKind::Qemu => "qemu",
            DriverKind::Lima => "lima",
            DriverKind::Ssh => "ssh",
        }
    }

    /// `lima` when limactl is on PATH, else `qemu` on Linux.
    pub fn default_for_host() -> DriverKind {
        if super::cmd::which("limactl").is_some() || !cfg!(target_os = "linux") {
            DriverKind::Lima
        } else {
            DriverKind::Qemu
        }
    }

    /// The driver a `band vm` command acts on: the one asked for, else the one that exists,
    /// else the host's default.
    pub fn pick(asked: Option<DriverKind>, paths: &VmPaths) -> DriverKind {
        if let Some(d) = asked {
            return d;
        }
        let qemu_exists = InstanceDir::new(paths).state().is_file();
        let lima_exists = paths
            .instance_dir(super::lima::DRIVER)
            .join(super::lima::STATE)
            .is_file();
        match (qemu_exists, lima_exists) {
            (true, false) => DriverKind::Qemu,
            (false, true) => DriverKind::Lima,
            _ => DriverKind::default_for_host(),
        }
    }
}

/// Which accelerator the QEMU VM uses (`--accel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AccelPref {
    // KVM when it works (probed), else TCG. (Not a doc comment: clap would show it in --help.)
    Auto,
    Kvm,
    Tcg,
}

/// What `band setup` asked for.
#[derive(Debug, Clone)]
pub struct SetupOptions {
    pub resources: Resources,
    /// Rebuild: a new image (qemu), a new instance (lima), a fresh install (ssh).
    pub force: bool,
    pub accel: AccelPref,
    /// qemu: the Debian mirror to build from.
    pub mirror: Option<String>,
    /// ssh: `user@host[:port]`.
    pub host: Option<String>,
    /// ssh: the private key to log in with.
    pub identity: Option<PathBuf>,
    /// Build band-server in the target from this band's source instead of uploading the
    /// binaries beside band (`--build-server-in-guest`; Lima does so by itself when those
    /// binaries cannot run there).
    pub build_server_in_guest: bool,
}

/// A machine after [`Driver::up`].
pub struct Up {
    pub endpoint: Endpoint,
    /// The QEMU VM's accelerator (Lima chooses its own).
    pub accel: Option<AccelChoice>,
    /// Seconds from QEMU start to SSH ready, when this call booted it.
    pub boot_secs: Option<f64>,
}

/// What `band vm logs` shows.
pub struct Logs {
    /// The VM's console log (its path and last lines), when the driver keeps one.
    pub console: Option<(PathBuf, String)>,
    pub server: ServerLog,
}

/// The tail of band-server's log on the machine.
pub enum ServerLog {
    Text(Vec<u8>),
    /// The machine could not be reached (why).
    Unreachable(String),
    /// It was reached, but reading the log failed.
    Failed(VmError),
}

/// A kind of machine that runs band-server.
pub trait Driver {
    fn kind(&self) -> DriverKind;
    /// Provision the machine and install band-server (`band setup`); idempotent. Returns the
    /// summary `band setup --json` prints (without driver, timings and steps).
    fn setup(&self, opts: &SetupOptions, progress: &mut dyn Progress) -> Result<serde_json::Value>;
    /// Boot the machine and check it (`band vm start`).
    fn up(&self, accel: AccelPref, progress: &mut dyn Progress) -> Result<Up>;
    /// Power the machine off. Returns whether it was running.
    fn stop(&self) -> Result<bool>;
    /// Stop the machine and delete its disk and state.
    fn destroy(&self) -> Result<()>;
    /// State, port, accelerator and band-server version, as JSON (`band vm status`).
    fn status(&self) -> Result<serde_json::Value>;
    /// Where runs go: the SSH endpoint, from the state `band setup` left.
    fn endpoint(&self) -> Result<Endpoint>;
    /// The endpoint `band vm ssh` opens a shell on.
    fn shell(&self) -> Result<Endpoint>;
    /// The console log and band-server's log (`band vm logs`).
    fn logs(&self, lines: usize) -> Result<Logs>;
}

/// Seconds to one decimal, for summaries.
pub fn round_secs(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}
