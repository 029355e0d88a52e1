//! The whole plan of one run, without root and without touching the host: a fixture skill, a
//! policy with commands, files, network and limits, made-up host facts, and [`plan_run`]'s
//! answer in one snapshot (argv, cgroup writes, nft text, run directory operations, programs,
//! seccomp list).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use band::policy::Policy;
use band::proto::{self, FileEntry, RunRequest};
use band_server::config::ServerConfig;
use band_server::facts::{Helpers, HostFacts};
use band_server::layers::cgroup::{CgroupPlan, Hierarchy};
use band_server::layers::fs::workdir::FsOp;
use band_server::layers::net::NetRunPlan;
use band_server::plan::{self, ExecPlan, Identity, ProcessPlan, RunPlan};
use band_server::request::{self, Check};
use serde::Serialize;

use super::helpers::{bundle_hash, file, strs};

/// The skill's files, sorted, as the client packs them.
fn pack(root: &Path) -> Vec<FileEntry> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<FileEntry>) {
        let mut entries: Vec<PathBuf> = fs_err::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap_or_else(|e| panic!("{e}")).path())
            .collect();
        entries.sort();
        for p in entries {
            let m = fs_err::symlink_metadata(&p).unwrap_or_else(|e| panic!("{e}"));
            if m.is_dir() {
                walk(root, &p, out);
            } else if m.is_file() {
                let rel = p.strip_prefix(root).unwrap_or(&p).to_string_lossy();
                let data = fs_err::read(&p).unwrap_or_else(|e| panic!("{e}"));
                out.push(file(&rel, m.permissions().mode() & 0o7777, &data));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out
}

pub(super) fn request() -> RunRequest {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../skills/csv-stats");
    let bundle = pack(&root);
    let mut policy = Policy::default();
    policy.allow.cli = strs(&["python3 /skill/scripts/report.py", "jq -r *"]);
    policy.allow.read = strs(&["data/**", "/srv/data/**"]);
    policy.allow.write = strs(&["out/"]);
    policy.allow.net = strs(&["api.example.com:443", "192.0.2.10"]);
    policy.deny.read = strs(&["**/.env*"]);
    policy.insist.write = strs(&["out/*.md"]);
    policy.limits.max_memory_bytes = Some(256 << 20);
    policy.limits.max_pids = Some(16);
    policy.limits.max_disk_bytes = Some(64 << 20);
    policy.limits.max_runtime_ms = Some(60_000);
    let cities = fs_err::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/csv/cities.csv"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    RunRequest {
        protocol: proto::PROTOCOL_VERSION,
        run_id: "0123456789abcdef".into(),
        skill: "csv-stats".into(),
        script: "report".into(),
        entry: "scripts/report.py".into(),
        bundle_sha256: bundle_hash(&bundle),
        bundle,
        policy,
        input: serde_json::json!({"file": "data/cities.csv"}),
        config: Some(serde_json::json!({"title": "Cities"})),
        secrets: BTreeMap::new(),
        workspace: vec![
            file("data/cities.csv", 0o644, &cities),
            file("out/old.md", 0o644, b"# old\n"),
        ],
        trace: false,
        observe: false,
        args: Vec::new(),
        signed: None,
        narrowing: Vec::new(),
        stdin: false,
        start_on_go: false,
        workspace_folders: None,
    }
}

/// A host with python3, jq and the essentials, cgroup v2, one resolver, and a masked library
/// executable: every path made up.
pub(super) fn facts() -> HostFacts {
    let bin = |names: &[(&str, &str)]| -> BTreeMap<String, PathBuf> {
        names
            .iter()
            .map(|(n, p)| (n.to_string(), PathBuf::from(p)))
            .collect()
    };
    HostFacts {
        binaries: bin(&[
            ("sh", "/usr/bin/dash"),
            ("cat", "/usr/bin/cat"),
            ("env", "/usr/bin/env"),
            ("jq", "/usr/bin/jq"),
            ("python3", "/usr/bin/python3.11"),
        ]),
        heads: BTreeMap::new(),
        host_paths: BTreeMap::from([(
            PathBuf::from("/srv/data"),
            (PathBuf::from("/srv/data"), true),
        )]),
        state_dir: Ok(()),
        masked: vec![
            PathBuf::from("/usr/lib/git-core/git"),
            PathBuf::from("/usr/libexec/fwupd/fwupd"),
        ],
        lib_roots: strs(&["/usr/lib", "/usr/libexec", "/usr/share"]),
        proc_masks: Ok(vec![band_server::layers::fs::procmask::ProcMask {
            path: "cmdline".into(),
            dir: false,
        }]),
        helpers: Ok(Helpers {
            jail: PathBuf::from("/opt/band/band-jail"),
            shim: PathBuf::from("/opt/band/band-shim"),
        }),
        bwrap_present: true,
        randomization: Ok(()),
        hierarchy: Ok(Hierarchy::V2 {
            root: PathBuf::from("/sys/fs/cgroup"),
        }),
        upstream: vec!["192.0.2.53:53".parse().unwrap_or_else(|e| panic!("{e}"))],
        own_addrs: vec!["10.0.2.15".parse().unwrap_or_else(|e| panic!("{e}"))],
        shim_copy: Ok(PathBuf::from(
            "/run/band/exec/cache/band-shim-000000000000000000000000",
        )),
        copies: BTreeMap::from([(
            "jq".to_string(),
            PathBuf::from("/run/band/exec/cache/jq-000000000000000000000000"),
        )]),
        runtime: Ok(vec![band_server::layers::cli::runtime::RuntimeTree {
            root: PathBuf::from("/usr/local/lib/python3.11/dist-packages"),
            at: PathBuf::from("/usr/local/lib/python3.11/dist-packages"),
            masked: vec![PathBuf::from(
                "/usr/local/lib/python3.11/dist-packages/pkg/bin/tool",
            )],
            hidden: false,
        }]),
        layouts: BTreeMap::new(),
        argv0: BTreeMap::new(),
    }
}

/// The plan, as text a reviewer reads.
#[derive(Serialize)]
struct View {
    run_id: String,
    identity: String,
    limits: String,
    argv: Vec<String>,
    cgroup: Vec<String>,
    nft: Vec<String>,
    resolv_conf: String,
    programs: Vec<String>,
    shim_policy: String,
    run_dir_tmpfs: String,
    run_dir: Vec<String>,
    /// Made after bubblewrap's spawn, before the jail's input.
    run_dir_late: Vec<String>,
    /// The request's own files, made after `run_dir` (a spare sandbox makes them at the
    /// hand-over).
    run_dir_request: Vec<String>,
    seccomp: Vec<String>,
}

fn describe(op: &FsOp<'_>) -> String {
    let owner = |o: &Option<(u32, u32)>| match o {
        Some((u, g)) => format!("{u}:{g}"),
        None => "root".into(),
    };
    match op {
        FsOp::Mkdir {
            path,
            mode,
            owner: o,
        } => {
            format!("mkdir {} {mode:o} {}", path.display(), owner(o))
        }
        FsOp::Chown { path, uid, gid } => format!("chown {} {uid}:{gid}", path.display()),
        FsOp::Write {
            path,
            data,
            mode,
            owner: o,
        } => {
            let what = match data {
                Cow::Owned(d) => format!("{:?}", String::from_utf8_lossy(d)),
                Cow::Borrowed(d) => format!("{} bytes", d.len()),
            };
            format!("write {} {mode:o} {} {what}", path.display(), owner(o))
        }
        FsOp::Copy {
            source,
            path,
            mode,
            optional,
        } => {
            format!(
                "copy {} -> {} {mode:o} root{}",
                source.display(),
                path.display(),
                if *optional {
                    " (if the host has it)"
                } else {
                    ""
                }
            )
        }
        FsOp::Symlink { target, link, .. } => {
            format!("symlink {} -> {}", link.display(), target.display())
        }
        FsOp::Bind {
            source,
            target,
            read_only,
            no_exec,
            ..
        } => format!(
            "bind {} -> {}{}{}",
            source.display(),
            target.display(),
            if *read_only { " ro" } else { "" },
            if *no_exec { " noexec" } else { "" }
        ),
        FsOp::BindHost { source, target } => {
            format!(
                "bind {} -> {} ro, if the host has it",
                source.display(),
                target.display()
            )
        }
        FsOp::BindOverView { source, target } => format!(
            "bind {} -> {} ro noexec, if the view has that file",
            source.display(),
            target.display()
        ),
        FsOp::Dev { target } => format!(
            "dev at {}: tmpfs nosuid noexec; {}; links {}; read-only; devpts at pts",
            target.display(),
            band_server::layers::fs::workdir::DEV_NODES
                .iter()
                .map(|(n, major, minor)| format!("{n} {major}:{minor}"))
                .collect::<Vec<_>>()
                .join(", "),
            band_server::layers::fs::workdir::DEV_LINKS
                .iter()
                .map(|(l, t)| format!("{l} -> {t}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        FsOp::MaskLibrary {
            root, rels, target, ..
        } => format!(
            "mask {root} at {}: {}",
            target.display(),
            rels.iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn view(plan: &RunPlan<'_>) -> View {
    let process: &ProcessPlan = &plan.process;
    let cgroup: &CgroupPlan = &plan.cgroup;
    let net: &Option<NetRunPlan> = &plan.net;
    let exec: &ExecPlan = &plan.exec;
    let run_dir = &plan.run_dir;
    View {
        run_id: plan.run_id.clone(),
        identity: format!("{:?}", plan.identity),
        limits: format!("{:?}", plan.limits),
        argv: std::iter::once(process.bwrap.to_string_lossy().into_owned())
            .chain(
                process
                    .argv
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned()),
            )
            .collect(),
        cgroup: cgroup.ops.iter().map(|op| format!("{op:?}")).collect(),
        nft: net
            .as_ref()
            .map(|n| n.ruleset.lines().map(str::to_string).collect())
            .unwrap_or_default(),
        resolv_conf: net
            .as_ref()
            .map(|n| n.resolv_conf.clone())
            .unwrap_or_default(),
        programs: exec
            .programs
            .iter()
            .map(|(name, host)| format!("{name} = {}", host.display()))
            .collect(),
        shim_policy: format!("{:?}", plan.pre.cli.policy),
        run_dir_tmpfs: run_dir.tmpfs.clone(),
        run_dir: run_dir.ops.iter().map(describe).collect(),
        run_dir_late: run_dir.late.iter().map(describe).collect(),
        run_dir_request: run_dir.request.iter().map(describe).collect(),
        seccomp: process
            .seccomp
            .iter()
            .map(|s| format!("{} errno {} when {:?}", s.name, s.errno, s.when))
            .collect(),
    }
}

/// A fresh state folder, and the default config with its state there.
pub(super) fn state_config() -> (tempfile::TempDir, ServerConfig) {
    let state = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cfg = ServerConfig {
        state_dir: state.path().to_path_buf(),
        ..ServerConfig::default()
    };
    (state, cfg)
}

/// `req` checked under `cfg` (as root), or the test fails.
pub(super) fn checked<'r>(req: &'r RunRequest, cfg: &ServerConfig) -> Box<request::Checked<'r>> {
    match request::check(req, cfg, true) {
        Ok(Check::Run(c)) => c,
        Ok(Check::Refused(r)) => panic!("refused: {r:?}"),
        Err(e) => panic!("{e}"),
    }
}

/// The pool identity the plan tests lease.
pub(super) fn identity() -> Identity {
    Identity {
        slot: 3,
        uid: 990,
        gid: 985,
        user: "band-run-3".into(),
    }
}

#[test]
fn a_request_gives_this_whole_plan() {
    let req = request();
    let cfg = ServerConfig::default();
    let checked = checked(&req, &cfg);
    let identity = identity();
    let plan =
        plan::plan_run(&checked, &cfg, &facts(), &identity).unwrap_or_else(|e| panic!("{e}"));
    insta::assert_yaml_snapshot!(view(&plan));
}
