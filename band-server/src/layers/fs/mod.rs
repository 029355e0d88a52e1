//! Filesystem: the run directory, the hidden library executables and their cached whiteouts.

pub mod apply;
pub mod execmask;
pub mod maskcache;
pub mod mounts;
pub mod procmask;
pub mod workdir;

use std::collections::BTreeSet;

use self::workdir::{HostMount, RunDir, RunDirPlan, RunDirSpec};
use crate::config::ServerConfig;
use crate::layer::handover::{ExecView, Identity};
use crate::layer::{Built, Host, REMOVED_RUN_DIRS, Report, RunLayer, Stale, Teardown, built_any};
use crate::request::Checked;

/// What the run directory's plan reads besides the request, the config and the identity: the
/// host mounts, write dirs and wrapped command names planned before the lease, the host's
/// library executables to hide and library trees, the network's resolv.conf and the CLI gate's
/// programs.
pub struct RunDirInputs<'p> {
    pub host_mounts: &'p [HostMount],
    pub write_dirs: &'p [String],
    /// The names band-shim is bound under in `/usr/bin`.
    pub wrappers: &'p [String],
    pub masked: &'p [std::path::PathBuf],
    pub lib_roots: &'p [String],
    /// The sandbox's `/etc/resolv.conf` when the run has network.
    pub resolv_conf: Option<&'p str>,
    pub exec: ExecView<'p>,
}

/// The run directory part of [`crate::plan::RunPlan`]: its operations, owners and modes
/// included, and the library trees it masks. `inp.exec`: the programs (their trees are bound,
/// their links are made in the sandbox's root). Pure.
pub fn plan_run_dir<'a>(
    checked: &'a Checked<'_>,
    cfg: &ServerConfig,
    identity: &Identity,
    inp: &RunDirInputs<'_>,
) -> RunDirPlan<'a> {
    let exec = &inp.exec;
    let links = root_links(exec);
    let other_binds: Vec<(std::path::PathBuf, bool)> = inp
        .host_mounts
        .iter()
        .map(|m| (m.sandbox.clone(), m.is_dir))
        .chain(exec.tree_roots.iter().map(|r| (r.clone(), true)))
        .collect();
    let compiled = &checked.compiled;
    let write_allowed = |p: &str| compiled.write.check(p).is_allowed();
    workdir::plan(&RunDirSpec {
        state: &cfg.state_dir,
        run_id: &checked.req.run_id,
        disk_bytes: checked.limits.disk_bytes,
        uid: identity.uid,
        gid: identity.gid,
        user: &identity.user,
        bundle: &checked.bundle,
        workspace: &checked.workspace,
        write_allowed: &write_allowed,
        write_dirs: inp.write_dirs,
        input_json: &checked.input_json,
        config_json: checked.config_json.as_deref(),
        wrappers: inp.wrappers,
        host_mounts: inp.host_mounts,
        masked: inp.masked,
        lib_roots: inp.lib_roots,
        resolv_conf: inp.resolv_conf,
        other_binds: &other_binds,
        links: &links,
        exec_dir: exec.root,
    })
}

/// The symlinks bubblewrap's root holds (link, target): at each program copy's path a link to
/// its wrapper (`SandboxPlan::self_links`), and the installation links around it.
pub fn root_links(exec: &ExecView<'_>) -> Vec<(std::path::PathBuf, std::path::PathBuf)> {
    let bin = crate::layer::paths::SANDBOX_PATH;
    exec.self_links
        .iter()
        .map(|(copy, name)| {
            (
                copy.clone(),
                std::path::PathBuf::from(format!("{bin}/{name}")),
            )
        })
        .chain(exec.links.iter().cloned())
        .collect()
}

/// The filesystem layer: run directories, and whiteout layers being built.
pub struct Fs;

impl RunLayer for Fs {
    fn steps(&self) -> &'static [crate::layer::Step] {
        &[
            crate::layer::Step {
                phase: crate::layer::Phase::RunDir,
                what: "the run directory",
                apply: apply::run_dir,
            },
            crate::layer::Step {
                phase: crate::layer::Phase::Ready,
                what: "the wrappers in /usr/bin",
                apply: apply::wrappers,
            },
        ]
    }
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
                Ok(true) => report.note_removed(REMOVED_RUN_DIRS, run.to_string()),
                Ok(false) => {}
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
            // Gone since the listing: that run ended and moved or removed it itself.
            Some(path) => {
                if !live.contains(&item.run)
                    && let Err(e) = fs_err::remove_dir_all(path)
                    && e.kind() != std::io::ErrorKind::NotFound
                {
                    report.errors.push(e.to_string());
                }
            }
            None => {
                let d = &item.run;
                if live.contains(d) || report.removed(REMOVED_RUN_DIRS).contains(d) {
                    return;
                }
                let p = workdir::runs_dir(host.state).join(d);
                // Listed before the leases were read: a run that ended in between removed its
                // directory itself, and is not reported as a leftover.
                match workdir::remove_stale(&p) {
                    Ok(true) => report.note_removed(REMOVED_RUN_DIRS, d.clone()),
                    Ok(false) => {}
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
