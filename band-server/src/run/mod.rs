//! One run, start to finish: check the request, build every layer, run the script, collect what
//! it produced, tear everything down, and return the result.
//!
//! The order of [`execute`]:
//!
//! 1. Pure checks ([`crate::request::check`]), the host's facts ([`crate::facts`]) and what the
//!    host must offer ([`crate::plan::preflight`]): nothing created yet but the state directory.
//! 2. Identity: lease a pool uid.
//! 3. The whole plan ([`crate::plan::plan_run`]), before anything else exists.
//! 4. Apply it, layer by layer: cgroup, network (when `allow.net` is not empty), the run's
//!    programs, the run directory, the report socket.
//! 5. Spawn bubblewrap as the run's uid, inside the cgroup, with the secrets pipe on fd 3 and the
//!    jail's status pipe on fd 4; stream stdout/stderr and CLI reports until it exits or the wall
//!    clock runs out (or the run's table vanishes); then kill everything left in the cgroup
//!    (`events`).
//! 6. Collect (output, written files, network report, insist) from outside, then tear down in
//!    reverse order.
//!
//! Any failure before the script starts is a `setup_failed` result naming the layer; the
//! [`RunGuard`] tears down whatever was built, on every path including panics.

use std::io::{BufRead, Read};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use band::proto::{self, Denial, Event, Layer, Message, Metrics, RunRequest, RunResult, Status};
use fs_err::OpenOptions;

use crate::collect::{self, Facts, Output};
use crate::config::ServerConfig;
use crate::error::{LayerExt, SetupError, SetupResult};
use crate::facts::HostFacts;
use crate::layers::cgroup::{KILL_DEADLINE, RunCgroup};
use crate::layers::cli::execcache::{self, ExecDir};
use crate::layers::cli::reports::{PeerCheck, ReportListener};
use crate::layers::fs::workdir::RunDir;
use crate::layers::identity::uidpool;
use crate::layers::net::{self, NetLayer, dns::Lookup, nft::Nft};
use crate::layers::process::memfd::{self, MemfdGuard};
use crate::layers::process::{bwrap, seccomp};
use crate::plan::{self, Identity};
use crate::request::{self, Check};
use crate::sys::{self, PreExec};

mod events;
mod guard;

pub use self::events::{
    ClientGone, ClientSays, EventSink, client_verdict, parse_jail_status, watch_client,
};
use self::events::{
    LoopState, MAX_CALLS_KEPT, Msg, drain, run_loop, spawn_reader, spawn_status_reader,
    write_secrets,
};
pub use self::guard::RunGuard;

fn exit_code(status: ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.code().or_else(|| status.signal().map(|s| 128 + s))
}

/// Reap the zombies handed to band-server as the child subreaper (step 5 of `execute_inner`).
/// By now every child band-server started itself has been waited for, so each one is an orphan
/// of the run.
fn reap_orphans() {
    let own = sys::pid();
    for pid in crate::layers::identity::procs::zombie_children(Path::new("/proc"), own) {
        if let Err(e) = sys::reap(pid) {
            eprintln!("band-server: teardown: cannot reap pid {pid}: {e}");
        }
    }
}

/// The whole run. Always returns a result; never leaves anything behind.
pub fn execute(req: &RunRequest, cfg: &ServerConfig, sink: &EventSink) -> RunResult {
    execute_watched(req, cfg, sink, &ClientGone::never())
}

/// [`execute`], killing the run (status `cancelled`) as soon as `gone` is set.
pub fn execute_watched(
    req: &RunRequest,
    cfg: &ServerConfig,
    sink: &EventSink,
    gone: &ClientGone,
) -> RunResult {
    let t0 = Instant::now();
    let mut guard = RunGuard::default();
    let mut result = match execute_inner(req, cfg, sink, &mut guard, t0, gone) {
        Ok(r) => r,
        Err(e) => {
            let mut r = RunResult::setup_failed(&req.run_id, e.layer, e.message, e.hint);
            r.metrics.setup_ms = t0.elapsed().as_millis() as u64;
            r
        }
    };
    let td = Instant::now();
    for e in guard.teardown() {
        eprintln!("band-server: teardown: {e}");
    }
    reap_orphans();
    result.metrics.teardown_ms = td.elapsed().as_millis() as u64;
    result
}

fn execute_inner(
    req: &RunRequest,
    cfg: &ServerConfig,
    sink: &EventSink,
    guard: &mut RunGuard,
    t0: Instant,
    gone: &ClientGone,
) -> SetupResult<RunResult> {
    // 1. Pure checks, then the host's facts, then what the host must offer: nothing created yet
    // (but the state directory).
    let checked = match request::check(req, cfg, sys::euid() == 0)? {
        Check::Run(c) => c,
        Check::Refused(r) => return Ok(*r),
    };
    let facts = HostFacts::gather(cfg, &checked);
    plan::preflight(&checked, cfg, &facts)?;

    // 2. Identity: lease a pool uid. A lease whose owner died mid-run is cleaned first. (The
    // janitor pass before every run already did this with the configured nft; a lease that died
    // since is cleaned here with the default one.)
    let on_dead = |slot: u32, file: &mut fs_err::File| {
        let nft = Path::new(crate::config::DEFAULT_NFT);
        crate::janitor::clean_dead_lease(&cfg.state_dir, slot, file, nft.is_file().then_some(nft));
    };
    let lease = uidpool::acquire(&cfg.state_dir, &req.run_id, &on_dead)?;
    let identity = Identity {
        slot: lease.slot,
        uid: lease.uid,
        gid: lease.gid,
        user: lease.user.clone(),
    };
    guard.push(lease);
    let (uid, gid) = (identity.uid, identity.gid);

    // 3. The whole plan, before anything else exists.
    let plan = plan::plan_run(&checked, cfg, &facts, &identity)?;
    let limits = plan.limits;

    // 4. Apply it. The cgroup, with the effective limits.
    let cg = RunCgroup::apply_owned(&plan.cgroup, &cfg.state_dir)
        .layer(Layer::Cgroup, "failed to create the run's cgroup")?;
    let join_files = cg.join_files();
    // Guarded before anything else can fail, so a failure below still removes it.
    guard.push(cg);
    let procs = join_files
        .iter()
        .map(|p| {
            OpenOptions::new()
                .write(true)
                .open(p)
                .map(fs_err::File::into_file)
                .layer(Layer::Cgroup, format!("failed to open {}", p.display()))
        })
        .collect::<SetupResult<Vec<std::fs::File>>>()?;

    let (tx, rx) = mpsc::channel::<Msg>();

    // Network: the run's nftables table and DNS stub, when the band allows any host.
    if let Some(net_plan) = &plan.net {
        let dns_tx = Mutex::new(tx.clone());
        let on_lookup: std::sync::Arc<net::dns::OnLookup> =
            std::sync::Arc::new(move |l: &Lookup| {
                if let Ok(tx) = dns_tx.lock() {
                    let _ = tx.send(Msg::Dns(l.clone()));
                }
            });
        let layer = NetLayer::setup(net_plan, &Nft::new(&cfg.nft), on_lookup).map_err(|e| {
            SetupError::new(Layer::Network, e.to_string())
                .with_hint("the network layer needs nftables (apt-get install nftables) and a resolver in /etc/resolv.conf or dns_upstream in the server config")
        })?;
        guard.push(layer);
    }

    // CLI layer and filesystem. The programs first: hardlinks of execute-only copies, under
    // names only band-shim is told (see `execcache`).
    execcache::mount_cache(&cfg.state_dir)
        .layer(Layer::Cli, "failed to prepare the program cache")?;
    let exec = ExecDir::create(&plan.exec.state, &req.run_id, &plan.exec.programs)
        .layer(Layer::Cli, "failed to lay out the run's programs")?;
    let table = exec.table.clone();
    let shim_copy = exec.cached_copy(execcache::SHIM_NAME, &plan.helpers.shim);
    guard.push(exec);
    let shim_copy = shim_copy.layer(Layer::Cli, "failed to cache band-shim")?;
    if shim_copy.path != plan.exec.shim {
        return Err(SetupError::new(
            Layer::Cli,
            format!(
                "band-shim changed while the run was set up ({} is not {})",
                shim_copy.path.display(),
                plan.exec.shim.display()
            ),
        ));
    }
    let entry_data = checked
        .bundle
        .iter()
        .find(|f| f.path == req.entry)
        .map(|f| f.data.as_slice())
        .unwrap_or_default();
    // memfd execution: the run's pid namespace gets `vm.memfd_noexec = 2`, or, on kernels
    // without it, seccomp denies memfd_create.
    let memfd = memfd::open(Path::new(memfd::MEMFD_NOEXEC)).layer(
        Layer::Process,
        "cannot make the run's memfds non-executable",
    )?;
    let jail_input = bwrap::JailInput {
        secrets: req.secrets.clone(),
        exec: plan::entry_exec(entry_data, &format!("/skill/{}", req.entry), &table),
        seccomp: seccomp::Profile {
            share_net: plan.sandbox.share_net,
            deny_memfd: matches!(memfd, MemfdGuard::Seccomp),
        },
    };
    let jail_json = serde_json::to_vec(&jail_input)
        .layer(Layer::Secrets, "failed to encode the jail's input")?;
    drop(jail_input);
    let dir = RunDir::create(&plan.run_dir)?;
    let run_dir = dir.root.clone();
    guard.push(dir);
    let lib_trees: Vec<PathBuf> = plan
        .sandbox
        .lib_binds
        .iter()
        .map(|(_, p)| p.clone())
        .collect();
    let check = PeerCheck::for_shim(&shim_copy.path, uid, &lib_trees)
        .layer(Layer::Cli, "cannot stat band-shim")?;
    let report_tx = Mutex::new(tx.clone());
    let on_report: crate::layers::cli::reports::OnReport = std::sync::Arc::new(move |r| {
        if let Ok(tx) = report_tx.lock() {
            let _ = tx.send(Msg::Report(r));
        }
    });
    guard.push(
        ReportListener::start(&plan.sock, gid, check, plan.rules.clone(), table, on_report)
            .layer(Layer::Cli, "failed to open the report socket")?,
    );

    // 5. Spawn. bubblewrap runs under a reaper (`sys::PreExec`) that reaps the sandbox's pid 1.
    // If the reaper is killed first (the timeout path kills band-server's child after the
    // cgroup), that pid 1 is handed to band-server, not to the host's init, and is reaped at the
    // end of `execute`.
    sys::set_child_subreaper().layer(Layer::Process, "failed to become a child subreaper")?;
    let (secrets_r, secrets_w) =
        sys::pipe().layer(Layer::Secrets, "failed to create the secrets pipe")?;
    let (status_r, status_w) =
        sys::pipe().layer(Layer::Process, "failed to create the status pipe")?;
    // bubblewrap's argv comes through a pipe: its command line (pid 1's inside the sandbox)
    // names no host path.
    let (args_r, args_w) =
        sys::pipe().layer(Layer::Process, "failed to create the arguments pipe")?;
    let (args_data, command) = bwrap::split_args(&plan.argv);
    std::thread::Builder::new()
        .name("bwrap-args".into())
        .spawn(move || {
            let mut f = std::fs::File::from(args_w);
            let _ = std::io::Write::write_all(&mut f, &args_data);
        })
        .layer(Layer::Process, "failed to start a thread")?;
    let mut cmd = Command::new(&plan.bwrap);
    cmd.arg0(bwrap::BWRAP_ARGV[0])
        .args(&bwrap::BWRAP_ARGV[1..])
        .args(&command)
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    PreExec {
        cgroup_join: procs,
        fds: vec![
            (secrets_r.as_raw_fd(), bwrap::SECRETS_FD),
            (status_w.as_raw_fd(), bwrap::STATUS_FD),
            (args_r.as_raw_fd(), bwrap::ARGS_FD),
        ],
        uid,
        gid,
        memfd_noexec: match memfd {
            MemfdGuard::Sysctl(f) => Some(f),
            MemfdGuard::Seccomp => None,
        },
    }
    .install(&mut cmd);
    let setup_ms = t0.elapsed().as_millis() as u64;
    let run_start = Instant::now();
    let mut child = cmd.spawn().layer(
        Layer::Process,
        format!("failed to start {}", plan.bwrap.display()),
    )?;
    drop(secrets_r);
    drop(status_w);
    drop(args_r);
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    guard.child = Some(child);
    write_secrets(secrets_w, jail_json)?;
    spawn_status_reader(status_r, tx.clone())?;
    if let Some(s) = stdout {
        spawn_reader(s, tx.clone(), true)?;
    }
    if let Some(s) = stderr {
        spawn_reader(s, tx.clone(), false)?;
    }
    drop(tx);
    sink.event(Event::Started {
        run_id: req.run_id.clone(),
        setup_ms,
    });

    let mut st = LoopState::new(&limits);
    let deadline = run_start + Duration::from_millis(limits.runtime_ms);
    let exit = run_loop(&rx, guard, sink, &mut st, deadline, gone);
    let run_ms = run_start.elapsed().as_millis() as u64;
    // Anything still alive (daemonised children) dies now, then the pipes reach EOF.
    let stats = guard.get::<RunCgroup>().map(|cg| {
        let _ = cg.kill_all(KILL_DEADLINE);
        cg.stats()
    });
    drain(&rx, sink, &mut st, Duration::from_secs(2));
    if let Some(l) = guard.get_mut::<ReportListener>() {
        l.stop();
    }
    drain(&rx, sink, &mut st, Duration::ZERO);
    if st.forged > 0 {
        eprintln!(
            "band-server: run {}: dropped {} forged CLI report(s): {}",
            req.run_id,
            st.forged,
            st.forged_why.join("; ")
        );
    }

    // The sandbox never got to the script: bubblewrap or the jail failed.
    match &st.jail {
        Some(Err(e)) => return Err(e.clone()),
        None if !st.timed_out && !st.cancelled => {
            let msg = st.stderr.text();
            let msg = msg
                .lines()
                .rev()
                .find(|l| l.starts_with("bwrap:"))
                .unwrap_or(msg.trim())
                .to_string();
            return Err(SetupError::new(
                Layer::Filesystem,
                format!("the sandbox did not start: {msg}"),
            ));
        }
        _ => {}
    }

    if st.net_lost {
        return Err(SetupError::new(
            Layer::Network,
            "the run's nftables table disappeared while it ran (was the ruleset flushed?); the run was killed",
        ));
    }

    // 7. Collect.
    let stats = stats.unwrap_or_default();
    let output =
        match collect::read_output_file(&run_dir.join("io/output.json"), limits.output_bytes) {
            Output::None => collect::output_from_stdout(&st.stdout, limits.output_bytes),
            other => other,
        };
    let found = collect::walk_workspace(&run_dir.join("workspace"), limits.disk_bytes);
    let changed = collect::changed_files(&found, &checked.workspace);
    let written = collect::written_entries(&changed, &checked.compiled.write);
    let mut insist_missing = collect::insist_missing(&req.policy, &st.calls, &changed);
    let network = guard.get::<NetLayer>().map(|n| {
        let (report, lookups, seen) = n.report();
        insist_missing.extend(net::insist_missing(&req.policy.insist.net, &lookups, &seen));
        for f in &report.denied {
            st.denial_count += 1;
            let host = f.names.first().cloned().unwrap_or_else(|| f.addr.clone());
            let d = Denial::Net {
                host,
                port: Some(f.port),
                rule: None,
            };
            sink.event(Event::Denied(d.clone()));
            if st.denied.len() < MAX_CALLS_KEPT {
                st.denied.push(d);
            }
        }
        report
    });
    let (output, output_bytes, too_large) = match output {
        Output::Json(v, n) => (Some(v), n, false),
        Output::TooLarge(n) => {
            sink.event(Event::Limit {
                limit: "output".into(),
                detail: format!("{n} bytes, over maxOutputBytes {}", limits.output_bytes),
            });
            (None, n, true)
        }
        Output::Unreadable(m) => {
            eprintln!("band-server: run {}: {m}", req.run_id);
            (None, 0, false)
        }
        Output::None => (None, 0, false),
    };
    let facts = Facts {
        exit_code: exit.and_then(exit_code),
        timed_out: st.timed_out,
        oom_kills: stats.oom_kills,
        pids_max_hits: stats.pids_max_hits,
        output_too_large: too_large,
        denials: st.denial_count as usize,
        insist_missing: insist_missing.len(),
    };
    let status = if st.cancelled {
        Status::Cancelled
    } else {
        collect::status(&facts)
    };
    if stats.oom_kills > 0 {
        sink.event(Event::Limit {
            limit: "memory".into(),
            detail: format!("maxMemoryBytes {} reached", limits.memory_bytes),
        });
    }
    if stats.pids_max_hits > 0 {
        sink.event(Event::Limit {
            limit: "pids".into(),
            detail: format!("maxPids {} reached", limits.pids),
        });
    }
    Ok(RunResult {
        run_id: req.run_id.clone(),
        status,
        exit_code: facts.exit_code,
        output,
        stdout: st.stdout.text(),
        stderr: st.stderr.text(),
        stdout_truncated: st.stdout.truncated(),
        stderr_truncated: st.stderr.truncated(),
        // A cancelled run's half-written files are not copied back.
        written: if st.cancelled { Vec::new() } else { written },
        denied: st.denied.clone(),
        cli_calls: if req.trace {
            st.calls.clone()
        } else {
            Vec::new()
        },
        insist_missing,
        metrics: Metrics {
            setup_ms,
            run_ms,
            teardown_ms: 0,
            peak_memory_bytes: stats.peak_memory_bytes,
            input_bytes: checked.input_json.len() as u64,
            output_bytes,
        },
        error: None,
        network,
    })
}

/// Serve one request from `input`, writing events and the result to `sink`. What the client
/// sends after the request is watched ([`watch_client`]): a `cancel`, or the end of input after
/// `hold`, kills the run.
pub fn serve(
    mut input: Box<dyn BufRead + Send>,
    cfg: &ServerConfig,
    sink: &EventSink,
) -> RunResult {
    let mut line = String::new();
    let max = max_request_bytes(cfg);
    let read = input.by_ref().take(max + 1).read_line(&mut line);
    let mut input = Some(input);
    let result = match read {
        Ok(n) if n as u64 > max => RunResult::setup_failed(
            "",
            Layer::Protocol,
            format!("the request is larger than {max} bytes"),
            Some("the skill and workspace must fit in the platform's disk cap".into()),
        ),
        Ok(0) => RunResult::setup_failed("", Layer::Protocol, "no request on stdin", None),
        Err(e) => RunResult::setup_failed(
            "",
            Layer::Protocol,
            format!("cannot read the request: {e}"),
            None,
        ),
        Ok(_) => match serde_json::from_str::<Message>(line.trim_end()) {
            Ok(Message::Request(req)) => {
                let gone = input.take().map(watch_client).unwrap_or_default();
                execute_watched(&req, cfg, sink, &gone)
            }
            Ok(_) => RunResult::setup_failed(
                "",
                Layer::Protocol,
                "the first line must be a request",
                None,
            ),
            Err(e) => {
                let run_id = serde_json::from_str::<serde_json::Value>(&line)
                    .ok()
                    .and_then(|v| v.get("run_id")?.as_str().map(str::to_string))
                    .unwrap_or_default();
                RunResult::setup_failed(
                    &run_id,
                    Layer::Protocol,
                    format!("malformed request: {e}"),
                    Some(format!(
                        "band-server speaks protocol {}",
                        proto::PROTOCOL_VERSION
                    )),
                )
            }
        },
    };
    sink.send(&Message::Result(Box::new(result.clone())));
    result
}

/// The largest request line read: the bundle and workspace (base64, so 4/3 of their size) must
/// fit in the disk cap, plus the input and some room for the policy and framing.
pub fn max_request_bytes(cfg: &ServerConfig) -> u64 {
    cfg.caps.disk_bytes.saturating_mul(4) / 3 + cfg.caps.input_bytes + (16 << 20)
}
