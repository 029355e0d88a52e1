//! `band setup` arguments.

use std::path::PathBuf;

use clap::ValueEnum;

use band::vm::driver::{AccelPref, DriverKind};

/// Where `band setup` makes band-server ready: this machine, or a VM or SSH host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum SetupDriver {
    /// This Linux machine: install what the host target needs (bubblewrap, nftables,
    /// slirp4netns, uidmap) with apt-get as root, else print the command.
    Host,
    Qemu,
    Lima,
    Ssh,
}

impl SetupDriver {
    /// The VM driver, or `None` for the host.
    pub(crate) fn vm(self) -> Option<DriverKind> {
        match self {
            SetupDriver::Host => None,
            SetupDriver::Qemu => Some(DriverKind::Qemu),
            SetupDriver::Lima => Some(DriverKind::Lima),
            SetupDriver::Ssh => Some(DriverKind::Ssh),
        }
    }
}

#[derive(Debug, clap::Args)]
pub(crate) struct SetupArgs {
    /// host (this Linux machine: installs bubblewrap, nftables, slirp4netns and uidmap when
    /// missing), qemu (Linux), lima (macOS, Linux) or ssh (any Linux host). Default: lima when
    /// limactl is on PATH, else qemu.
    #[arg(long, value_enum)]
    pub(crate) driver: Option<SetupDriver>,
    /// For --driver ssh: user@host[:port].
    #[arg(long, value_name = "USER@HOST[:PORT]")]
    pub(crate) host: Option<String>,
    /// For --driver ssh: the private key to log in with (default: the ssh-agent, then band's key).
    #[arg(long, value_name = "FILE")]
    pub(crate) identity: Option<PathBuf>,
    /// CPUs of the VM.
    #[arg(long, default_value_t = 2)]
    pub(crate) cpus: u32,
    /// Memory of the VM (e.g. 2g, 2048m).
    #[arg(long, default_value = "2g")]
    pub(crate) memory: String,
    /// Disk of the VM (e.g. 8g); applies when the disk is made.
    #[arg(long, default_value = "8g")]
    pub(crate) disk: String,
    /// Rebuild: a new image (qemu), a new instance (lima), a fresh install (ssh).
    #[arg(long)]
    pub(crate) force: bool,
    /// qemu: KVM when it works (probed), else TCG; or force one.
    #[arg(long, value_enum, default_value_t = AccelPref::Auto)]
    pub(crate) accel: AccelPref,
    /// qemu: the Debian mirror to build from (a local mirror makes the build work offline).
    #[arg(long, value_name = "URL")]
    pub(crate) mirror: Option<String>,
    /// Build band-server, band-jail and band-shim in the target from this band's own source
    /// (checked by SHA-256 there), with Debian's Rust toolchain in a build root, instead of
    /// uploading the binaries beside band. The default for lima when those binaries cannot run
    /// in the VM (macOS). The first build takes minutes.
    #[arg(long)]
    pub(crate) build_server_in_guest: bool,
    /// Print a JSON summary (with step timings) on stdout.
    #[arg(long)]
    pub(crate) json: bool,
}
