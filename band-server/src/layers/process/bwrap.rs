//! The bubblewrap command line of a run, as a pure function of a [`SandboxPlan`].
//!
//! bubblewrap is started as the run's uid (never root) and builds an unprivileged user namespace
//! of its own, plus pid, ipc, uts, cgroup and network namespaces. The mount order matters:
//!
//! 1. `/`: one bind (`--dev-bind`) of the run directory's `view/`, the tree band-server
//!    prepared (`workdir::plan`) with every mount of it made there, read-only on top: `/usr`
//!    (the library trees, masked overlays or binds of the host's, read-only, nosuid and nodev;
//!    `/usr/bin` the run's wrapper directory, a link to band-shim for each essential and declared
//!    command and nothing else: the real programs are not in the sandbox, band-server hands
//!    band-shim a descriptor for each allowed call, see `execcache`), the synthetic `/etc`
//!    (passwd/group/hosts/nsswitch.conf, a copy of the host's `ld.so.cache`, resolv.conf with
//!    network, the host's CA certificates and fontconfig folder bound in it), `/skill`
//!    (read-only, noexec), `/band` (the run's exec folder: `#!` scripts, shim, jail, socket, the
//!    `bin` link to `/usr/bin`) with the writable `/band/io` on it, the writable `/workspace`
//!    and `/tmp` (noexec), `/dev` (a tmpfs of its own, read-only and noexec; `null`, `zero`,
//!    `full`, `random`, `urandom` and `tty` made with `mknod`, a devpts instance of the run's
//!    own, the links bubblewrap's `--dev` makes; `/dev/shm` the run's writable, noexec folder,
//!    as `/tmp`), the
//!    links `/lib`,
//!    `/lib64`, `/bin`, `/sbin`, the links at the programs' cache paths, and a mount point for
//!    each bind below. Every bind costs bubblewrap a mount, a remount and a re-read of its mount
//!    table, so what can be made by band-server is.
//! 2. `/proc`, in bubblewrap's pid namespace, and over each of its entries that tells of the host
//!    (`procmask`: `cmdline`, `config.gz`, `kallsyms`, `sys/kernel/random/boot_id`, …) the run
//!    directory's empty file or empty folder, read-only.
//! 3. band-shim over each declared program of the skill, then host mounts for absolute
//!    `allow.read` / `allow.write` patterns and declared programs' trees.
//!
//! The command is `/band/jail --secrets-fd 3 --status-fd 4 -- /skill/<entry>`; secrets never
//! appear on any command line.
//!
//! bubblewrap itself is started as `bwrap --args 5` ([`ARGS_FD`], [`split_args`]): the argv
//! above, full of host paths (the state directory, the run id, band's install path), is read
//! from a pipe, so it never appears in `/proc/<pid>/cmdline` of bubblewrap, which is pid 1 of
//! the sandbox and visible to the script.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::common::handover::ProcMask;
use crate::common::paths::VIEW;

/// Inside the sandbox.
pub(crate) use crate::common::paths::SANDBOX_PATH;
#[cfg(test)]
pub(crate) const SANDBOX_SHIM: &str = "/band/shim";
pub(crate) const SANDBOX_JAIL: &str = "/band/jail";
/// `BASH_ENV`: the run's `/etc` file [`crate::layers::fs::workdir::BASH_ENV`].
pub(crate) const SANDBOX_BASH_ENV: &str = "/etc/band-bash-env";
pub(crate) const SECRETS_FD: i32 = 3;
pub(crate) const STATUS_FD: i32 = 4;
/// bubblewrap reads its options from this descriptor (`--args`).
pub(crate) const ARGS_FD: i32 = 5;
/// The entry's interpreter, an `O_PATH` descriptor the jail runs ([`JailExec`]); passed only
/// when the jail input says so.
pub const PROGRAM_FD: i32 = 6;
/// `band learn` only: a unix socket to band-server, on which the jail sends the listener of its
/// observing seccomp filter ([`JailInput::observe_fd`]).
pub(crate) const OBSERVE_FD: i32 = 7;
/// The start of bubblewrap's command line (its `argv[0]` is set to this name, not its host
/// path); [`split_args`] gives the rest.
pub(crate) const BWRAP_ARGV: [&str; 3] = ["bwrap", "--args", "5"];

/// [`build_bwrap_args`] split in two: the options, for the `--args` descriptor (each followed
/// by a NUL byte), and `--` with the command, which bubblewrap only takes from its real command
/// line (it ignores what follows `--` in `--args` data). The command names sandbox paths only.
pub(crate) fn split_args(args: &[OsString]) -> (Vec<u8>, Vec<OsString>) {
    use std::os::unix::ffi::OsStrExt;
    let at = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let mut options = Vec::new();
    for a in &args[..at] {
        options.extend_from_slice(a.as_bytes());
        options.push(0);
    }
    (options, args[at..].to_vec())
}

/// What band-server writes to the jail's secrets descriptor (one JSON object, then EOF).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JailInput {
    /// Environment variables band-server sets for the entry (`PYTHONPATH=/skill` for a module
    /// entry, `band::launch::By::Module`); the secrets come after.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Environment variables for the script (the declared secrets).
    pub secrets: BTreeMap<String, String>,
    /// How to start the entry, when not by exec'ing the command itself (see `layers::process::entry_exec`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<JailExec>,
    /// Which seccomp deny list the jail installs (network, memfd fallback).
    #[serde(default)]
    pub seccomp: super::seccomp::Profile,
    /// Words the jail appends to the entry's command line (the request's `args`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// `band learn`: the descriptor ([`OBSERVE_FD`]) on which the jail sends band-server the
    /// listener of an observing seccomp filter (`seccomp::notify_program`), installed before
    /// the deny filter. `None` (every other run): no such filter, nothing changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observe_fd: Option<i32>,
}

/// A program to exec with its own argv: the inherited descriptor `fd` (`execveat`), since no
/// path inside the sandbox leads to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JailExec {
    pub fd: i32,
    pub argv: Vec<String>,
}

/// A host path bound into the sandbox (source already prepared by band-server).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExtraBind {
    pub(crate) source: PathBuf,
    pub(crate) dest: PathBuf,
    pub(crate) writable: bool,
}

/// Everything [`build_bwrap_args`] needs; all host paths are absolute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SandboxPlan {
    pub(crate) run_dir: PathBuf,
    /// band-shim's execute-only copy.
    pub(crate) shim: PathBuf,
    /// The run's exec folder (`execcache::ExecDir`), at `/band` (bound in the sandbox's root by
    /// the run directory's plan): `#!` scripts in `x/`, links to band-shim and band-jail, the
    /// gate socket, `bin`, and `io/` as a mount point.
    pub(crate) exec_dir: PathBuf,
    /// (program cache path, wrapped name): a symlink at the path a running program reports as
    /// its own (`/proc/self/exe`, which names the copy in the host's cache) to
    /// `/band/bin/<name>`, so a program that re-executes itself by that path (node's
    /// `process.execPath`, Go's `os.Executable`) goes through band-shim like any call. Symlinks
    /// in the sandbox's root (made there by the run directory's plan, `layers::fs::root_links`),
    /// not mounts: `/proc/self/mountinfo` does not show them.
    pub(crate) self_links: Vec<(PathBuf, String)>,
    /// (link, target): more symlinks in the sandbox's root (`ExecPlan::links`: a program's
    /// installation around its copy's path).
    pub(crate) links: Vec<(PathBuf, PathBuf)>,
    pub(crate) extra: Vec<ExtraBind>,
    pub(crate) entry: String,
    /// The skill's programs the policy declares (paths relative to the skill root): band-shim is
    /// bound over each at `/skill/<path>` (`layers::cli::bundled`).
    pub(crate) bundled: Vec<String>,
    pub(crate) has_config: bool,
    /// The run has `allow.net`: bubblewrap starts inside the run's own network namespace, which
    /// the network layer made and bubblewrap's parent joined (`sys::PreExec`), so no
    /// `--unshare-net`; the run gets `/etc/resolv.conf` pointing at its DNS stub there.
    pub(crate) share_net: bool,
    /// Refuse to start unless Landlock can scope abstract unix sockets (set for `share_net` runs
    /// unless the server config opts out).
    pub(crate) ipc_scope_required: bool,
    /// The entries of `/proc` covered by an empty file or folder (`procmask::plan`), by
    /// band-server once bubblewrap has built the sandbox (`layers::fs::proc_cover`), not in
    /// bubblewrap's argv.
    pub(crate) proc_masks: Vec<ProcMask>,
}

/// The environment of the script. Secrets are not here: the jail adds them from the pipe.
pub(crate) fn sandbox_env(has_config: bool) -> Vec<(&'static str, &'static str)> {
    let mut env = vec![
        ("PATH", SANDBOX_PATH),
        ("HOME", "/tmp"),
        ("TMPDIR", "/tmp"),
        ("LANG", "C.UTF-8"),
        ("INPUT_PATH", "/band/io/input.json"),
        ("OUTPUT_PATH", "/band/io/output.json"),
    ];
    if has_config {
        env.push(("CONFIG_PATH", "/band/io/config.json"));
    }
    // bash reads it at startup: undeclared host commands are reported (`workdir::BASH_ENV`).
    env.push(("BASH_ENV", SANDBOX_BASH_ENV));
    env.push(("WORKSPACE", "/workspace"));
    // A copied `.git` belongs to another uid than the script's: git refuses a repository it
    // does not own unless `safe.directory` names it (config given by environment, git ≥ 2.31).
    env.push(("GIT_CONFIG_COUNT", "1"));
    env.push(("GIT_CONFIG_KEY_0", "safe.directory"));
    env.push(("GIT_CONFIG_VALUE_0", "/workspace"));
    env.push(("SKILL_DIR", "/skill"));
    env
}

fn push(a: &mut Vec<OsString>, items: &[&str]) {
    a.extend(items.iter().map(OsString::from));
}

fn bind(a: &mut Vec<OsString>, kind: &str, src: OsString, dest: OsString) {
    a.push(kind.into());
    a.push(src);
    a.push(dest);
}

/// The full argv after the bwrap binary itself.
pub(crate) fn build_bwrap_args(plan: &SandboxPlan) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::new();
    push(
        &mut a,
        &[
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup",
        ],
    );
    if !plan.share_net {
        push(&mut a, &["--unshare-net"]);
    }
    push(&mut a, &["--disable-userns"]);
    push(
        &mut a,
        &[
            "--new-session",
            "--die-with-parent",
            "--clearenv",
            "--cap-drop",
            "ALL",
        ],
    );
    push(&mut a, &["--hostname", "band"]);
    // The sandbox's root in one bind, with every mount in it: `usr/` (its library trees: masked
    // overlays or binds of the host's; the wrappers in `bin/`), the synthetic `etc/` (with the
    // host folders of `workdir::ETC_HOST_DIRS` bound read-only in it), `skill/` (read-only,
    // noexec), `/band` (read-only) with `io/` on it, `/workspace` and `/tmp` (writable, noexec),
    // `/dev` (a read-only, noexec tmpfs holding the device nodes), the compatibility links, the
    // links at the programs' cache paths and a mount point for each bind below, all prepared by
    // band-server in the run directory (`workdir::plan`, its `view/`), every mount's flags set
    // there (the root's own read-only; nodev on every mount but `/dev` and its devpts) and
    // locked for bubblewrap's copy. Not `--ro-bind`: that would remount every mount in it
    // read-only, the writable ones too; not `--bind`: that would add nodev to `/dev`.
    // bubblewrap makes only what it must: `/proc` in its namespaces, host paths.
    bind(
        &mut a,
        "--dev-bind",
        plan.run_dir.join(VIEW).into_os_string(),
        "/".into(),
    );
    push(&mut a, &["--proc", "/proc"]);
    // The host's kernel facts (`procmask`) are covered by band-server once the sandbox is built
    // (`layers::fs::proc_cover`): a bind here costs bubblewrap a read of its mount table each.
    // /skill is noexec; each declared program of the skill is band-shim, on a mount of its own.
    for rel in &plan.bundled {
        bind(
            &mut a,
            "--ro-bind",
            plan.shim.clone().into_os_string(),
            format!("/skill/{rel}").into(),
        );
    }
    for e in &plan.extra {
        let kind = if e.writable { "--bind" } else { "--ro-bind" };
        bind(
            &mut a,
            kind,
            e.source.clone().into_os_string(),
            e.dest.clone().into_os_string(),
        );
    }
    for (k, v) in sandbox_env(plan.has_config) {
        push(&mut a, &["--setenv", k, v]);
    }
    push(&mut a, &["--chdir", "/workspace"]);
    push(
        &mut a,
        &[
            "--",
            SANDBOX_JAIL,
            "--secrets-fd",
            "3",
            "--status-fd",
            "4",
            "--ipc-scope",
            if plan.ipc_scope_required {
                "required"
            } else {
                "best-effort"
            },
            "--",
        ],
    );
    a.push(format!("/skill/{}", plan.entry).into());
    a
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn plan() -> SandboxPlan {
        SandboxPlan {
            run_dir: PathBuf::from("/run/band/runs/0123456789abcdef"),
            shim: PathBuf::from("/run/band/exec/cache/band-shim-0123"),
            exec_dir: PathBuf::from("/run/band/exec/runs/0123456789abcdef"),
            self_links: Vec::new(),
            links: Vec::new(),
            extra: vec![ExtraBind {
                source: PathBuf::from("/run/band/runs/0123456789abcdef/host/0"),
                dest: PathBuf::from("/data"),
                writable: false,
            }],
            entry: "scripts/run.sh".into(),
            bundled: vec!["bin/tool".into()],
            has_config: true,
            share_net: false,
            ipc_scope_required: false,
            proc_masks: vec![
                ProcMask {
                    path: "cmdline".into(),
                    dir: false,
                },
                ProcMask {
                    path: "acpi".into(),
                    dir: true,
                },
            ],
        }
    }

    #[test]
    fn full_argv() {
        let got: Vec<String> = build_bwrap_args(&plan())
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        let r = "/run/band/runs/0123456789abcdef";
        let want: Vec<String> = [
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup",
            "--unshare-net",
            "--disable-userns",
            "--new-session",
            "--die-with-parent",
            "--clearenv",
            "--cap-drop",
            "ALL",
            "--hostname",
            "band",
            "--dev-bind",
            &format!("{r}/view"),
            "/",
            "--proc",
            "/proc",
            "--ro-bind",
            "/run/band/exec/cache/band-shim-0123",
            "/skill/bin/tool",
            "--ro-bind",
            &format!("{r}/host/0"),
            "/data",
            "--setenv",
            "PATH",
            "/band/bin",
            "--setenv",
            "HOME",
            "/tmp",
            "--setenv",
            "TMPDIR",
            "/tmp",
            "--setenv",
            "LANG",
            "C.UTF-8",
            "--setenv",
            "INPUT_PATH",
            "/band/io/input.json",
            "--setenv",
            "OUTPUT_PATH",
            "/band/io/output.json",
            "--setenv",
            "CONFIG_PATH",
            "/band/io/config.json",
            "--setenv",
            "BASH_ENV",
            "/etc/band-bash-env",
            "--setenv",
            "WORKSPACE",
            "/workspace",
            "--setenv",
            "GIT_CONFIG_COUNT",
            "1",
            "--setenv",
            "GIT_CONFIG_KEY_0",
            "safe.directory",
            "--setenv",
            "GIT_CONFIG_VALUE_0",
            "/workspace",
            "--setenv",
            "SKILL_DIR",
            "/skill",
            "--chdir",
            "/workspace",
            "--",
            "/band/jail",
            "--secrets-fd",
            "3",
            "--status-fd",
            "4",
            "--ipc-scope",
            "best-effort",
            "--",
            "/skill/scripts/run.sh",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_networked_run_shares_the_network_and_gets_the_stub_resolver() {
        let mut p = plan();
        p.share_net = true;
        let args: Vec<String> = build_bwrap_args(&p)
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        assert!(!args.iter().any(|a| a == "--unshare-net"));
        assert!(!args.iter().any(|a| a == "--share-net"));
        // The stub's resolv.conf is in the run's /etc (written by the run directory's plan), in
        // the root bound whole: no mount of its own.
        assert!(!args.iter().any(|a| a == "/etc"));
        assert!(!args.iter().any(|a| a.ends_with("resolv.conf")));
        assert!(args.iter().any(|a| a == "--unshare-user"));
        assert!(args.iter().any(|a| a == "--disable-userns"));
    }

    #[test]
    fn without_allow_net_the_run_has_its_own_network_and_never_binds_the_host_root() {
        let args: Vec<String> = build_bwrap_args(&plan())
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        assert!(args.iter().any(|a| a == "--unshare-net"));
        assert!(!args.iter().any(|a| a == "/etc/resolv.conf"));
        assert!(!args.iter().any(|a| a == "--share-net"));
        for w in args.windows(3) {
            if w[0].ends_with("bind") || w[0].ends_with("bind-try") {
                assert_ne!(w[1], "/", "host root bound: {w:?}");
                assert_ne!(w[1], "/etc", "host /etc bound: {w:?}");
                assert_ne!(w[1], "/usr/bin", "host /usr/bin bound: {w:?}");
            }
        }
    }

    #[test]
    fn options_go_to_the_args_fd_and_the_command_stays_free_of_host_paths() {
        let args: Vec<OsString> = ["--bind", "/a b", "/c", "--", "/band/jail", "--", "x"]
            .iter()
            .map(OsString::from)
            .collect();
        let (options, command) = split_args(&args);
        assert_eq!(options, b"--bind\0/a b\0/c\0".to_vec());
        assert_eq!(command, args[3..].to_vec());
        assert_eq!(BWRAP_ARGV[2], ARGS_FD.to_string());

        let (options, command) = split_args(&build_bwrap_args(&plan()));
        let command: Vec<String> = command
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        assert_eq!(command[..2], ["--", SANDBOX_JAIL]);
        for a in &command {
            assert!(!a.contains("/run/band") && !a.contains("/opt/band"), "{a}");
        }
        assert!(String::from_utf8_lossy(&options).contains("/run/band/runs/0123456789abcdef"));
    }

    #[test]
    fn config_path_only_with_a_config() {
        let envs = sandbox_env(false);
        assert!(!envs.iter().any(|(k, _)| *k == "CONFIG_PATH"));
        assert!(
            sandbox_env(true)
                .iter()
                .any(|(k, v)| *k == "CONFIG_PATH" && *v == "/band/io/config.json")
        );
    }
}
