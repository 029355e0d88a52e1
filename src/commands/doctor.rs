//! `band doctor`: check the host and the VM ([`band::doctor`]), and say what to fix.
//!
//! Each check is `ok`, `warn` (works, but slower or partly), `fail` (a target will not work) or
//! `skip` (does not apply here). Exit 0 when nothing failed, 1 otherwise.

use std::io::Write;

use anyhow::Result;

use crate::cli::doctor::DoctorArgs;
use band::client::config::vm_paths;
use band::doctor::{self, Check, Host, Level};
use band::proto::exit;

pub(crate) fn cmd_doctor(args: DoctorArgs) -> Result<u8> {
    let mut all = doctor::run(&Host::this(vm_paths()?));
    all.push(doctor::site_check(&band::policy::site::local_path()));
    let failed = doctor::failed(&all);
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "ok": !failed, "checks": all }))?
        )?;
    } else {
        let width = all.iter().map(|c| c.name.len()).max().unwrap_or(0);
        for c in &all {
            write_check(&mut out, c, width)?;
        }
    }
    Ok(if failed {
        exit::SCRIPT_FAILED
    } else {
        exit::OK
    })
}

/// One check as a line, and the fix under it when it failed or warned.
fn write_check(out: &mut impl Write, c: &Check, width: usize) -> std::io::Result<()> {
    let tag = match c.level {
        Level::Ok => "ok  ",
        Level::Warn => "warn",
        Level::Fail => "FAIL",
        Level::Skip => "-   ",
    };
    writeln!(out, "{tag}  {:width$} {}", c.name, c.detail)?;
    if let Some(f) = c
        .fix
        .as_ref()
        .filter(|_| matches!(c.level, Level::Fail | Level::Warn))
    {
        writeln!(out, "      {:width$} fix: {f}", "")?;
    }
    Ok(())
}
