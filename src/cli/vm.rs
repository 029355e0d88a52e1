//! `band vm` arguments, and the `--driver` and `--accel` values.

use clap::Subcommand;

use band::vm::driver::{AccelPref, DriverKind};

#[derive(Debug, clap::Args)]
pub(crate) struct VmArgs {
    #[command(subcommand)]
    pub(crate) command: VmCommand,
}

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct DriverArg {
    /// Which VM: qemu or lima. Default: the one that exists (lima when limactl is on PATH).
    #[arg(long, value_enum)]
    pub(crate) driver: Option<DriverKind>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum VmCommand {
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
        #[arg(long, value_enum, default_value_t = AccelPref::Auto)]
        accel: AccelPref,
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
