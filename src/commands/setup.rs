//! `band setup`: provision a machine that runs band-server, idempotently.
//!
//! ```text
//! --driver qemu   build (or reuse) the image, make the disk, boot, install band-server
//! --driver lima   write the template, limactl create/start, pin the host key, install band-server
//! --driver ssh    pin the host key of user@host, install band-server there
//! --driver host   install the host target's packages with apt-get (`setup_host`)
//! ```
//!
//! Running it again changes nothing that is already right; `--force` rebuilds from scratch.

use std::io::Write;
use std::time::Instant;

use anyhow::{Result, bail};

use crate::cli::progress::Steps;
use crate::cli::setup::SetupArgs;
use crate::cli::user_error;
use band::client::config::vm_paths;
use band::proto::exit;
use band::vm::driver::{self, DriverKind, SetupOptions, round_secs};
use band::vm::qemu::Resources;

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

pub(crate) fn cmd_setup(args: SetupArgs) -> Result<u8> {
    if args.driver == Some(crate::cli::setup::SetupDriver::Host) {
        return super::setup_host::cmd_setup_host(&args);
    }
    let paths = vm_paths()?;
    let res = Resources {
        cpus: args.cpus.max(1),
        memory_mib: size_mib(&args.memory, "memory")?,
        disk_mib: size_mib(&args.disk, "disk")?,
    };
    let driver = args
        .driver
        .and_then(|d| d.vm())
        .unwrap_or_else(DriverKind::default_for_host);
    if args.host.is_some() && driver != DriverKind::Ssh {
        bail!(user_error(
            "--host is for --driver ssh",
            "band setup --driver ssh --host user@host"
        ));
    }
    let started = Instant::now();
    let mut steps = Steps::new("band setup", args.json);
    let opts = SetupOptions {
        resources: res,
        force: args.force,
        accel: args.accel,
        mirror: args.mirror.clone(),
        host: args.host.clone(),
        identity: args.identity.clone(),
        build_server_in_guest: args.build_server_in_guest,
    };
    let mut summary = driver::select::for_kind(driver, &paths).setup(&opts, &mut steps)?;
    steps.finish();
    summary["driver"] = serde_json::json!(driver.as_str());
    summary["total_secs"] = serde_json::json!(round_secs(started.elapsed().as_secs_f64()));
    summary["steps"] = serde_json::json!(
        steps
            .done
            .iter()
            .map(|(s, t)| serde_json::json!({"step": s, "secs": round_secs(*t)}))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_checked() {
        assert_eq!(size_mib("2g", "memory").unwrap(), 2048);
        assert!(size_mib("1m", "memory").is_err());
        assert!(size_mib("lots", "disk").is_err());
    }
}
