//! Apply the process layer's plan, in two steps: the jail's input (with the memfd guard it
//! depends on), then the spawn of bubblewrap: it needs what every step before returned (after
//! it come only the steps that wait for what was started earlier or make what only the script
//! needs).

use super::Process;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use band::proto::Layer;

use super::memfd::{self, MemfdGuard};
use super::{ProcessPlan, bwrap, seccomp};
use crate::common::RunGuard;
use crate::common::handover::{JoinFiles, NetNamespace, OnReport};
use crate::error::{LayerExt, SetupResult};
use crate::layer::{EntryStart, Gate, Inputs, RunLayer};
use crate::sys::{self, PreExec};

pub(crate) use crate::common::handover::Spawned;

/// jail input → spawn: what [`jail_input`] made.
pub(crate) struct JailReady {
    /// The jail's input (secrets included), encoded.
    json: Vec<u8>,
    /// How the run's memfds are kept from executing.
    memfd: MemfdGuard,
    /// The entry's interpreter, as a descriptor for the jail to run (none when the jail runs the
    /// entry itself).
    program: Option<OwnedFd>,
}

/// What the spawn needs from the other layers, each from the step that made it.
pub(crate) struct SpawnInputs {
    pub(crate) jail: JailReady,
    /// cgroup → spawn: the files that put bubblewrap in the run's cgroup.
    pub(crate) cgroup_join: JoinFiles,
    /// network → spawn: the run's own network namespace (with `allow.net`).
    pub(crate) netns: Option<NetNamespace>,
    /// What the run builds beside the spawn (the run directory), which bubblewrap's exec waits
    /// for.
    pub(crate) gate: Option<Gate>,
}

/// The jail input step: how the entry starts (`programs`: the CLI gate's programs, which decide
/// it), the memfd guard, and the jail's input encoded. memfd execution: the run's pid namespace
/// gets `vm.memfd_noexec = 2`, or, on kernels without it, seccomp denies memfd_create.
pub(crate) fn jail_input(
    inp: &Inputs<'_>,
    programs: &dyn EntryStart,
    on_report: &OnReport,
) -> SetupResult<JailReady> {
    let req = inp.checked.req;
    let part: &ProcessPlan = &inp.plan.process;
    let entry_file = inp.checked.bundle.iter().find(|f| f.path == req.entry);
    let entry_data = entry_file.map(|f| f.data.as_slice()).unwrap_or_default();
    // How the entry starts: its `#!` line, or an interpreter its skill says (`band::launch`).
    // SKILL.md may run it as a module (`python -m scripts.x`).
    let skill_md = inp
        .checked
        .bundle
        .iter()
        .find(|f| f.path == "SKILL.md")
        .map(|f| String::from_utf8_lossy(&f.data).into_owned());
    let launch = entry_file.map_or(band::launch::Launch::AsIs, |f| {
        band::launch::launch_in_skill(
            Path::new(&req.entry),
            f.mode,
            entry_data,
            skill_md.as_deref(),
        )
    });
    let memfd = memfd::open(Path::new(memfd::MEMFD_NOEXEC)).layer(
        Layer::Process,
        "cannot make the run's memfds non-executable",
    )?;
    // `band exec`'s one command, allowed: the jail starts it directly (judged and recorded here,
    // as band-shim's call would be), not `sh` and then band-shim (issue 17, item 4). Refused or
    // unknown, the script runs as written and band-shim refuses it as before.
    let jail_exec = |(name, argv)| {
        (
            name,
            bwrap::JailExec {
                fd: bwrap::PROGRAM_FD,
                argv,
            },
        )
    };
    let direct = programs
        .band_exec(inp, entry_data, on_report)
        .map(jail_exec);
    let exec = direct.or_else(|| {
        programs
            .interpreter(entry_data, &format!("/skill/{}", req.entry), &launch)
            .map(jail_exec)
    });
    if let (band::launch::Launch::With(i), None) = (&launch, &exec) {
        return Err(no_interpreter(&req.entry, i));
    }
    let mut jail_program = None;
    if let Some((name, _)) = &exec {
        let fd = programs
            .fd(name)
            .map_err(|e| {
                crate::error::SetupError::new(
                    Layer::Cli,
                    format!("cannot open the entry's interpreter `{name}`: {e}"),
                )
            })?
            .try_clone()
            .layer(
                Layer::Process,
                "cannot pass the entry's interpreter to the jail",
            )?;
        jail_program = Some(fd);
    }
    // A module entry finds its package (`scripts`) from the skill's root, as `python -m` run
    // there would; the workspace stays its working directory.
    let mut env = std::collections::BTreeMap::new();
    if matches!(&launch, band::launch::Launch::With(i) if i.by == band::launch::By::Module) {
        env.insert("PYTHONPATH".to_string(), "/skill".to_string());
    }
    // Through the egress proxy: the run's TLS clients trust its bundle (the host's and the run's
    // CA), and a bound secret reaches the run as its placeholder, never its value.
    let secrets = match &inp.plan.run_egress {
        Some(egress) => {
            env.extend(egress.env.clone());
            egress.secrets.clone()
        }
        None => req.secrets.clone(),
    };
    let jail_input = bwrap::JailInput {
        env,
        secrets,
        exec: exec.map(|(_, x)| x),
        args: req.args.clone(),
        observe_fd: req.observe.then_some(bwrap::OBSERVE_FD),
        seccomp: seccomp::Profile {
            share_net: part.sandbox.share_net,
            deny_memfd: matches!(memfd, MemfdGuard::Seccomp),
        },
    };
    let jail_json = serde_json::to_vec(&jail_input)
        .layer(Layer::Secrets, "failed to encode the jail's input")?;
    drop(jail_input);
    Ok(JailReady {
        json: jail_json,
        memfd,
        program: jail_program,
    })
}

/// The error of an entry started with an interpreter (`band::launch`) that is not a program of
/// the run: what starts it and why, and the rule that allows it.
fn no_interpreter(entry: &str, i: &band::launch::Interpreter) -> crate::error::SetupError {
    use band::launch::By;
    let name = &i.name;
    if i.by == By::UpstreamRunSh {
        return crate::error::SetupError::new(
            Layer::Process,
            format!("{entry} is started with bash (as upstream does), and bash is not installed on this host"),
        )
        .with_hint("install bash where band-server runs, or make the script executable with a #! line");
    }
    let why = match i.by {
        By::Shebang => "by its #! line: it has no execute bit",
        By::UvRun => {
            "by its #! line: `uv run` runs a Python script, here with its environment's python3"
        }
        By::Module => "as a module: SKILL.md runs it with `python -m`",
        _ => "by its extension: it has no #! line",
    };
    crate::error::SetupError::new(
        Layer::Cli,
        format!("{entry} is started with {name} ({why}), and {name} is not a program this run may start"),
    )
    .with_hint(format!(
        "allow it in the band's allow.cli (`{name} {} *`, as band wrap writes it), with {name} installed where band-server runs",
        match (i.by, band::launch::module_name(std::path::Path::new(entry))) {
            (By::Module, Some(m)) => format!("-m {m}"),
            _ => format!("/skill/{entry}"),
        }
    ))
}

/// The spawn step: bubblewrap, in the run's cgroup as the run's uid (kept in `guard`), as the
/// first process of a pid namespace of the run's own ([`sys::spawn_in_own_pid_namespace`]):
/// band-server is its parent and reaps it, and when it ends the kernel ends every process of
/// the run. Called on the thread that waits for the run (the parent `PR_SET_PDEATHSIG` watches).
pub(crate) fn spawn(
    inp: &Inputs<'_>,
    with: SpawnInputs,
    guard: &mut RunGuard,
) -> SetupResult<Spawned> {
    let plan = inp.plan;
    let part: &ProcessPlan = &plan.process;
    sys::set_child_subreaper().layer(Layer::Process, "failed to become a child subreaper")?;
    let (secrets_r, secrets_w) =
        sys::pipe().layer(Layer::Secrets, "failed to create the secrets pipe")?;
    let (status_r, status_w) =
        sys::pipe().layer(Layer::Process, "failed to create the status pipe")?;
    // bubblewrap's argv comes through a pipe: its command line (pid 1's inside the sandbox)
    // names no host path.
    let (args_r, args_w) =
        sys::pipe().layer(Layer::Process, "failed to create the arguments pipe")?;
    let (args_data, command) = bwrap::split_args(&part.argv);
    std::thread::Builder::new()
        .name("bwrap-args".into())
        .spawn(move || {
            let mut f = std::fs::File::from(args_w);
            let _ = std::io::Write::write_all(&mut f, &args_data);
        })
        .layer(Layer::Process, "failed to start a thread")?;
    let SpawnInputs {
        jail:
            JailReady {
                json: jail_json,
                memfd,
                program,
            },
        cgroup_join: JoinFiles(cgroup_join),
        netns,
        gate,
    } = with;
    let netns = netns.map(|n| n.0);
    let gate = gate.map(|g| g.0);
    let mut fds = vec![
        (secrets_r.as_raw_fd(), bwrap::SECRETS_FD),
        (status_w.as_raw_fd(), bwrap::STATUS_FD),
        (args_r.as_raw_fd(), bwrap::ARGS_FD),
    ];
    if let Some(p) = &program {
        fds.push((p.as_raw_fd(), bwrap::PROGRAM_FD));
    }
    let observe = if inp.checked.req.observe {
        Some(UnixStream::pair().layer(Layer::Process, "failed to create the observer's socket")?)
    } else {
        None
    };
    if let Some((_, jail_end)) = &observe {
        fds.push((jail_end.as_raw_fd(), bwrap::OBSERVE_FD));
    }
    let mut cmd = Command::new(&part.bwrap);
    cmd.arg0(bwrap::BWRAP_ARGV[0])
        .args(&bwrap::BWRAP_ARGV[1..])
        .args(&command)
        .env_clear()
        .current_dir("/")
        .stdin(if inp.checked.req.stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    PreExec {
        cgroup_join,
        fds,
        uid: plan.identity.uid,
        gid: plan.identity.gid,
        memfd_noexec: match memfd {
            MemfdGuard::Sysctl(f) => Some(f),
            MemfdGuard::Seccomp => None,
        },
        // A networked run's own namespace (made by the network step); the descriptor stays open
        // in the guard's NetLayer until after the spawn.
        netns,
        gate: gate.as_ref().map(|g| g.as_raw_fd()),
    }
    .install(&mut cmd);
    let run_start = Instant::now();
    let child = sys::spawn_in_own_pid_namespace(&mut cmd).layer(
        Layer::Process,
        format!("failed to start {}", part.bwrap.display()),
    )?;
    drop(secrets_r);
    drop(status_w);
    drop(args_r);
    drop(program);
    drop(gate);
    let observe = observe.map(|(ours, _jail_end)| ours);
    guard.child = Some(child);
    Ok(Spawned {
        secrets_w,
        jail_json,
        status_r,
        run_start,
        observe,
    })
}

impl RunLayer for Process {}
