//! Filesystem: the run directory, the hidden library executables and their cached whiteouts.

pub mod apply;
pub mod execmask;
pub mod maskcache;
pub mod mounts;
pub mod workdir;

use std::collections::BTreeSet;

use self::workdir::RunDir;
use crate::layer::{Built, Host, Report, RunLayer, Stale, Teardown, built_any};

/// The filesystem layer: run directories, and whiteout layers being built.
pub struct Fs;

impl RunLayer for Fs {
    fn list_stale(&self, host: &Host<'_>, _report: &mut Report) -> Vec<Stale> {
        // Run directories are listed before leases are read: a server writes its lease before it
        // creates its directory, so any directory seen here has its lease content by the time
        // the janitor reads it.
        let dirs = fs_err::read_dir(workdir::runs_dir(host.state))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter_map(|e| e.file_name().into_string().ok())
                    .map(Stale::run)
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        let builds = maskcache::builds(host.state)
            .into_iter()
            .map(|(path, run)| Stale {
                run,
                path: Some(path),
            });
        dirs.into_iter().chain(builds).collect()
    }

    fn remove_dead_run(&self, host: &Host<'_>, run: &str, report: &mut Report) {
        let dir = workdir::runs_dir(host.state).join(run);
        if dir.exists() {
            match workdir::remove_stale(&dir) {
                Ok(()) => report.removed_dirs.push(run.to_string()),
                Err(e) => report.errors.push(format!("{}: {e}", dir.display())),
            }
        }
    }

    fn remove_stale(
        &self,
        host: &Host<'_>,
        item: &Stale,
        live: &BTreeSet<String>,
        report: &mut Report,
    ) {
        match &item.path {
            // Whiteout layers a dead run was building (a live run's build is its own business).
            Some(path) => {
                if !live.contains(&item.run)
                    && let Err(e) = fs_err::remove_dir_all(path)
                {
                    report.errors.push(e.to_string());
                }
            }
            None => {
                let d = &item.run;
                if live.contains(d) || report.removed_dirs.contains(d) {
                    return;
                }
                let p = workdir::runs_dir(host.state).join(d);
                match workdir::remove_stale(&p) {
                    Ok(()) => report.removed_dirs.push(d.clone()),
                    Err(e) => report.errors.push(format!("{}: {e}", p.display())),
                }
            }
        }
    }
}

impl Built for RunDir {
    fn teardown(mut self: Box<Self>, t: &mut Teardown) {
        if let Err(e) = RunDir::teardown(&mut self) {
            t.errors.push(e.to_string());
            t.clean = false;
        }
    }

    built_any!();
}
