//! `band vm status|start|stop|destroy|ssh|logs`: the machine made by `band setup`, through its
//! [`band::vm::driver::Driver`].

use std::io::Write;

use anyhow::{Context, Result};

use crate::cli::progress::Steps;
use crate::cli::user_error;
use crate::cli::vm::{DriverArg, VmArgs, VmCommand};
use band::client::config::vm_paths;
use band::proto::exit;
use band::vm::driver::{self, Driver as VmDriver, DriverKind, ServerLog};
use band::vm::endpoint::Auth;

/// The driver a `band vm` command acts on.
fn pick_driver(arg: &DriverArg, paths: &band::vm::paths::VmPaths) -> Box<dyn VmDriver> {
    driver::select::for_kind(DriverKind::pick(arg.driver, paths), paths)
}

/// How a driver's machine is named in messages: `the qemu VM`, `the Lima VM`.
fn title(kind: DriverKind) -> &'static str {
    match kind {
        DriverKind::Lima => "Lima",
        other => other.as_str(),
    }
}

pub(crate) fn cmd_vm(args: VmArgs) -> Result<u8> {
    let paths = vm_paths()?;
    match args.command {
        VmCommand::Status { driver, json } => status(&*pick_driver(&driver, &paths), json),
        VmCommand::Start { driver, accel } => {
            let d = pick_driver(&driver, &paths);
            let mut steps = Steps::new("band vm start", false);
            let up = d.up(accel, &mut steps)?;
            if let Some(accel) = &up.accel {
                steps.finish();
                eprintln!(
                    "band: the qemu VM is up ({}, ssh on 127.0.0.1:{}, ready {:.1} s after boot)",
                    accel.accel.as_str(),
                    up.endpoint.port,
                    up.boot_secs.unwrap_or(0.0)
                );
            }
            Ok(exit::OK)
        }
        VmCommand::Stop { driver } => {
            let d = pick_driver(&driver, &paths);
            if d.stop()? {
                eprintln!("band: the {} VM is stopped", title(d.kind()));
            } else {
                eprintln!("band: the {} VM was not running", title(d.kind()));
            }
            Ok(exit::OK)
        }
        VmCommand::Destroy { driver, images } => {
            let d = pick_driver(&driver, &paths);
            d.destroy()?;
            if images && paths.images_dir().exists() {
                fs_err::remove_dir_all(paths.images_dir())?;
            }
            eprintln!(
                "band: the {} VM is destroyed{}",
                d.kind().as_str(),
                if images {
                    " and the cached images removed"
                } else {
                    ""
                }
            );
            Ok(exit::OK)
        }
        VmCommand::Ssh { driver, command } => ssh_shell(&*pick_driver(&driver, &paths), &command),
        VmCommand::Logs { driver, lines } => logs(&*pick_driver(&driver, &paths), lines),
    }
}

fn status(driver: &dyn VmDriver, json: bool) -> Result<u8> {
    let v = driver.status()?;
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

fn ssh_shell(driver: &dyn VmDriver, command: &[String]) -> Result<u8> {
    let ep = driver.shell()?;
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

fn logs(driver: &dyn VmDriver, lines: usize) -> Result<u8> {
    let logs = driver.logs(lines)?;
    let mut out = std::io::stdout().lock();
    if let Some((console, text)) = &logs.console {
        writeln!(out, "== console ({}) ==", console.display())?;
        writeln!(out, "{text}")?;
    }
    match logs.server {
        ServerLog::Text(text) => {
            writeln!(
                out,
                "== band-server ({}) ==",
                band::vm::endpoint::SERVER_LOG
            )?;
            out.write_all(&text)?;
        }
        ServerLog::Unreachable(e) => writeln!(out, "== band-server: not reachable ({e}) ==")?,
        ServerLog::Failed(e) => return Err(e.into()),
    }
    Ok(exit::OK)
}
