//! Filesystem: the run directory, the hidden library executables and their cached whiteouts.

pub(crate) mod apply;
pub mod execmask;
pub mod maskcache;
pub(crate) mod mounts;
pub mod proc_cover;
pub mod procmask;
pub mod workdir;

use self::workdir::{HostMount, RunDir, RunDirPlan, RunDirSpec};
use crate::common::handover::{ExecView, Identity};
use crate::common::{Built, Teardown, built_any};
use crate::config::ServerConfig;
use crate::request::Checked;

/// What the run directory's plan reads besides the request, the config and the identity: the
/// host mounts, write dirs and wrapped command names planned before the lease, the host's
/// library executables to hide and library trees, the network's resolv.conf and the CLI gate's
/// programs.
pub(crate) struct RunDirInputs<'p> {
    pub(crate) host_mounts: &'p [HostMount],
    pub(crate) write_dirs: &'p [String],
    /// The names band-shim is bound under in `/usr/bin`.
    pub(crate) wrappers: &'p [String],
    pub(crate) masked: &'p [std::path::PathBuf],
    pub(crate) lib_roots: &'p [String],
    /// The sandbox's `/etc/resolv.conf` when the run has network.
    pub(crate) resolv_conf: Option<&'p str>,
    /// The run's CA bundle (`/etc/band-ca.pem`) when its traffic goes through the egress proxy.
    pub(crate) ca_bundle: Option<&'p str>,
    /// The run's Java trust store, with the bundle when the host has Java.
    pub(crate) java_truststore: Option<&'p [u8]>,
    pub(crate) exec: ExecView<'p>,
}

/// The run directory part of [`crate::plan::RunPlan`]: its operations, owners and modes
/// included, and the library trees it masks. `inp.exec`: the programs (their trees are bound,
/// their links are made in the sandbox's root). Pure.
pub(crate) fn plan_run_dir<'a>(
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
        workspace_folders: checked.req.workspace_folders.as_deref(),
        input_json: &checked.input_json,
        config_json: checked.config_json.as_deref(),
        wrappers: inp.wrappers,
        host_mounts: inp.host_mounts,
        masked: inp.masked,
        lib_roots: inp.lib_roots,
        resolv_conf: inp.resolv_conf,
        ca_bundle: inp.ca_bundle,
        java_truststore: inp.java_truststore,
        other_binds: &other_binds,
        hidden_trees: exec.hidden_trees,
        links: &links,
        exec_dir: exec.root,
    })
}

/// The request's own files of `checked` in its run directory ([`RunDirPlan::request`]), planned
/// alone: what a spare sandbox makes when the request it serves comes ([`RunDir::write_request`]).
pub(crate) fn plan_request_files<'a>(
    checked: &'a Checked<'_>,
    cfg: &ServerConfig,
    identity: &Identity,
) -> RunDirPlan<'a> {
    let write_dirs = mounts::plan_write_dirs(&checked.req.policy);
    let compiled = &checked.compiled;
    let write_allowed = |p: &str| compiled.write.check(p).is_allowed();
    workdir::plan_request(&workdir::RequestFiles {
        state: &cfg.state_dir,
        run_id: &checked.req.run_id,
        uid: identity.uid,
        gid: identity.gid,
        workspace: &checked.workspace,
        write_allowed: &write_allowed,
        write_dirs: &write_dirs,
        workspace_folders: checked.req.workspace_folders.as_deref(),
        input_json: &checked.input_json,
    })
}

/// The symlinks bubblewrap's root holds (link, target): at each program copy's path a link to
/// its wrapper (`SandboxPlan::self_links`), and the installation links around it.
pub(crate) fn root_links(exec: &ExecView<'_>) -> Vec<(std::path::PathBuf, std::path::PathBuf)> {
    let bin = crate::common::paths::SANDBOX_PATH;
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
pub(crate) struct Fs;

impl Built for RunDir {
    fn teardown(mut self: Box<Self>, t: &mut Teardown) {
        if let Err(e) = RunDir::teardown(&mut self) {
            t.errors.push(e.to_string());
            t.clean = false;
        }
    }

    built_any!();
}
