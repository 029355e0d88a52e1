//! CLI gate: the shim's decision, the verified report socket, the execute-only program cache.

pub mod apply;
pub mod execcache;
pub mod programs;
pub mod reports;
pub mod shim;

use std::collections::BTreeSet;

use self::execcache::ExecDir;
use self::reports::ReportListener;
use crate::layer::{Built, Host, Report, RunLayer, Stale, Teardown, built_any};

/// The CLI gate: the run's program directories (`/band/x`) and its report socket.
pub struct Cli;

impl RunLayer for Cli {
    fn list_stale(&self, host: &Host<'_>, _report: &mut Report) -> Vec<Stale> {
        execcache::run_dirs(host.state)
            .into_iter()
            .map(Stale::run)
            .collect()
    }

    fn remove_stale(
        &self,
        host: &Host<'_>,
        item: &Stale,
        live: &BTreeSet<String>,
        report: &mut Report,
    ) {
        if !live.contains(&item.run)
            && let Err(e) = execcache::remove_stale(host.state, &item.run)
        {
            report.errors.push(e.to_string());
        }
    }
}

impl Built for ExecDir {
    fn teardown(self: Box<Self>, t: &mut Teardown) {
        if let Err(e) = self.remove() {
            t.errors.push(format!("programs: {e}"));
            t.clean = false;
        }
    }

    built_any!();
}

impl Built for ReportListener {
    fn teardown(mut self: Box<Self>, _t: &mut Teardown) {
        self.stop();
    }

    built_any!();
}
