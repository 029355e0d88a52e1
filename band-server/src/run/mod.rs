//! One run, start to finish: check the request, build every layer, run the script, collect what
//! it produced, tear everything down, and return the result.
//!
//! The order of [`execute`]:
//!
//! 1. Pure checks ([`crate::request::check`]), the host's facts ([`crate::facts`]) and what the
//!    host must offer ([`crate::plan::preflight`]): nothing created yet but the state directory.
//! 2. Identity: lease a pool uid ([`crate::layers::identity::apply::lease`]).
//! 3. The whole plan ([`crate::plan::plan_run`]), before anything else exists.
//! 4. Apply it ([`apply`]): every layer's apply steps, each in its layer's `apply.rs` (cgroup,
//!    network when `allow.net` is not empty, the run's programs, the jail's input, the run
//!    directory, the report socket), in the order what each needs from another decides, up to
//!    bubblewrap's spawn as the run's uid, inside the cgroup, with the secrets pipe on fd 3 and
//!    the jail's status pipe on fd 4. What a step needs from an earlier one is a typed value
//!    that step returned.
//! 5. Run: write the secrets, stream stdout/stderr and CLI reports until bubblewrap exits or the
//!    wall clock runs out (or the client goes, or the run's table vanishes); then kill everything
//!    left in the cgroup (`events`).
//! 6. Collect (output, written files, network report, insist) from outside, then stop
//!    everything (every layer's stop, in reverse order of building: no process of the run is
//!    left); the result goes out ([`serve`]), and only then is what was built removed, in reverse
//!    order ([`Removal`]): the client need not wait for the unmounts and rmdirs.
//!
//! Steps 2 to 4 are `prepare`, 5 and 6 `run_prepared`. A warm server's spare sandbox
//! ([`spare`]) is `prepare` done ahead of its request, without the request's own files, which the
//! hand-over makes before `run_prepared`.
//!
//! Any failure before the script starts is a `setup_failed` result naming the layer; the
//! [`RunGuard`] tears down whatever was built, on every path including panics. If band-server
//! dies between the result and the end of the removal, the lease still names the run and the
//! janitor removes the rest.

use std::io::{BufRead, Read};
use std::process::ExitStatus;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use band::proto::{self, Denial, Event, Layer, Message, Metrics, RunRequest, RunResult, Status};

use crate::collect::{self, Facts, Output};
use crate::config::ServerConfig;
use crate::error::{SetupError, SetupResult};
use crate::facts::HostFacts;
use crate::layer::Inputs;
use crate::layers::cgroup::{CgroupStats, KILL_DEADLINE};
use crate::layers::cli::reports::OnReport;
use crate::layers::identity;
use crate::layers::net;
use crate::layers::net::dns::{Lookup, OnLookup};
use crate::layers::process::apply::Spawned;
use crate::plan;
use crate::request::{self, Check};
use crate::sys;

pub(crate) mod apply;
mod events;
pub(crate) mod spare;

pub use self::apply::beside;
pub(crate) use self::apply::{Started, apply};

pub(crate) use self::events::{ClientGone, watch_client};
pub use self::events::{ClosingStdout, EventSink};
use self::events::{
    Inbox, LoopState, MAX_CALLS_KEPT, Msg, Pipes, ReportQueue, drain, run_loop, spawn_pipes,
};
pub use crate::common::RunGuard;

fn exit_code(status: ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.code().or_else(|| status.signal().map(|s| 128 + s))
}

/// Reap the zombies handed to band-server as the child subreaper (by the spawn step, see
/// [`crate::layers::process::apply::spawn`]).
/// By now every child band-server started itself has been waited for (band-server serves one
/// run per process), so each child that has exited is an orphan of the run: reaped with
/// `waitpid(-1)`, not looked for in the host's `/proc`.
fn reap_orphans() {
    for _ in 0..10_000 {
        match sys::reap_any() {
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) => {
                crate::say!("band-server: teardown: cannot reap: {e}");
                break;
            }
        }
    }
}

/// What is left of a run once its result is known: everything of it has stopped (no process of
/// it runs), and what was built for it (run directory, mounts, cgroups, nftables table, lease)
/// is still there. [`Removal::finish`] removes it; dropped unfinished, the guard's drop does.
/// If band-server dies before, the lease still names the run and the janitor removes it all.
pub(crate) struct Removal {
    guards: Vec<RunGuard>,
}

impl Removal {
    /// What `guard` built, once the result is out.
    pub(crate) fn of(guard: RunGuard) -> Removal {
        Removal {
            guards: vec![guard],
        }
    }

    /// Also remove what `guard` built (stopped first if it was not), after the rest: a spare
    /// sandbox that did not fit the request it was handed (`spare`).
    pub(crate) fn and(mut self, guard: RunGuard) -> Removal {
        self.guards.push(guard);
        self
    }

    /// Remove what was built for the run, in reverse order of building.
    pub(crate) fn finish(self) {
        for mut guard in self.guards {
            for e in guard.remove() {
                crate::say!("band-server: teardown: {e}");
            }
        }
        reap_orphans();
    }
}

/// What a run's caller does around its uid lease ([`prepare`]).
#[derive(Clone, Copy)]
pub(crate) struct LeaseHooks<'a> {
    /// Returns once what must precede the lease is done (`band-server run`'s janitor pass,
    /// started beside the request's read: it frees the leases of dead runs once their processes
    /// are killed).
    pub(crate) before: &'a dyn Fn(),
    /// Called after each look at the pool that found every uid leased, while the run waits for
    /// one (`uidpool::WhenFull`): a warm server's child asks its server to send a waiting spare
    /// away, whose uid a run can use.
    pub(crate) full: &'a dyn Fn(),
}

fn nothing() {}

impl LeaseHooks<'_> {
    /// Nothing before the lease, nothing to ask when the pool is full.
    pub(crate) const NONE: LeaseHooks<'static> = LeaseHooks {
        before: &nothing,
        full: &nothing,
    };
}

/// The run up to its result: built, run, collected, and stopped (every process of it killed and
/// reaped; `teardown_ms` is that stop). The removal of what was built is left to the caller, so
/// that the result can go out first ([`serve`]). `hooks`: what to do around its uid lease.
pub(crate) fn execute_until_result(
    req: &RunRequest,
    cfg: &ServerConfig,
    sink: &EventSink,
    gone: &ClientGone,
    hooks: LeaseHooks<'_>,
) -> (RunResult, Removal) {
    let t0 = Instant::now();
    conclude(&req.run_id, t0, RunGuard::default(), |guard| {
        execute_inner(req, cfg, sink, guard, t0, gone, hooks)
    })
}

/// The end of every run's path to its result: `run` (a failure becomes a `setup_failed` result
/// of run `run_id` naming its layer), then everything of the run stopped. What was built is left
/// to the [`Removal`].
fn conclude(
    run_id: &str,
    t0: Instant,
    mut guard: RunGuard,
    run: impl FnOnce(&mut RunGuard) -> SetupResult<RunResult>,
) -> (RunResult, Removal) {
    let mut result = match run(&mut guard) {
        Ok(r) => r,
        Err(e) => {
            let mut r = RunResult::setup_failed(run_id, e.layer, e.message, e.hint);
            r.metrics.setup_ms = t0.elapsed().as_millis() as u64;
            r
        }
    };
    let td = Instant::now();
    guard.stop();
    reap_orphans();
    result.metrics.teardown_ms = td.elapsed().as_millis() as u64;
    (result, Removal::of(guard))
}

fn execute_inner(
    req: &RunRequest,
    cfg: &ServerConfig,
    sink: &EventSink,
    guard: &mut RunGuard,
    t0: Instant,
    gone: &ClientGone,
    hooks: LeaseHooks<'_>,
) -> SetupResult<RunResult> {
    // 1. Pure checks: nothing created yet (but the state directory).
    let checked = match request::check(req, cfg, sys::euid() == 0)? {
        Check::Run(c) => c,
        Check::Refused(r) => return Ok(*r),
    };
    // The script's Python environment, built before anything of the run exists (`deps`): its
    // python3 is the run's.
    let envs = crate::deps::prepare(&checked, cfg)?;
    let with_env = (!envs.is_empty()).then(|| crate::deps::with_env(cfg, &envs));
    let cfg = with_env.as_ref().unwrap_or(cfg);
    let prepared = prepare(&checked, cfg, guard, hooks, Made::Whole)?;
    let client = Client {
        req,
        sink,
        gone,
        t0,
    };
    let mut result = run_prepared(&client, &checked, prepared, guard)?;
    result.deps_sha256 = envs.lock_sha256();
    result.trust = request::result_trust(req, cfg);
    Ok(result)
}

/// The egress proxy's material of a run that needs it (`layers::net::proxy::Egress`): the bound
/// secrets' random placeholders, the run's CA (in memory) and the bundle the sandbox trusts (the
/// host's, then the run's CA). The config's extra CA must be readable: fail closed.
fn egress(
    checked: &request::Checked<'_>,
    cfg: &ServerConfig,
) -> SetupResult<Option<std::sync::Arc<net::proxy::Egress>>> {
    use band::proto::Layer;
    let req = checked.req;
    // A superset of `net::proxy::needed`: a run that cannot need the proxy reads none of the
    // host's trust material (the system bundle is 200 KB or more, read per run).
    let may_proxy =
        req.observe || !req.policy.secret_hosts.is_empty() || checked.compiled.net.has_http_rules();
    if !may_proxy {
        return Ok(None);
    }
    let system = net::proxy::host_system_bundle();
    let java = std::path::Path::new(net::proxy::truststore::JVM_DIR).is_dir();
    let hint = "proxy_extra_ca in the server config names a PEM file of CA certificates";
    // Then the config's extra CA must be PEM certificates.
    let extra = match &cfg.proxy_extra_ca {
        Some(path) => {
            let pem = fs_err::read(path).map_err(|e| {
                crate::error::SetupError::new(Layer::Network, format!("egress proxy: {e}"))
                    .with_hint(hint)
            })?;
            net::proxy::extra_certs(&pem).map_err(|e| {
                crate::error::SetupError::new(
                    Layer::Network,
                    format!("egress proxy: {}: {e}", path.display()),
                )
                .with_hint(hint)
            })?;
            Some(pem)
        }
        _ => None,
    };
    net::proxy::Egress::new(
        &req.run_id,
        &req.policy,
        &checked.compiled.net,
        &req.secrets,
        net::proxy::EgressHost {
            system_bundle: &system,
            extra_ca: extra,
            java,
            observe: req.observe,
        },
    )
    .map(|e| {
        e.map(|mut e| {
            e.ports = cfg.proxy_ports;
            std::sync::Arc::new(e)
        })
    })
    .map_err(|e| crate::error::SetupError::new(Layer::Network, format!("egress proxy: {e}")))
}

/// What [`prepare`] makes of the run directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Made {
    /// Everything: a run's own.
    Whole,
    /// All but the request's own files (`RunDirPlan::request`): a spare sandbox, which makes
    /// those of the request it serves when it comes ([`spare`]).
    Spare,
}

/// A run built up to its start: every layer made, bubblewrap spawned, and band-jail waiting on
/// the secrets pipe for its input (before Landlock and seccomp: nothing of the script runs).
/// `'p`: the plan borrows the checked request's files.
pub(crate) struct Prepared<'p> {
    pub(crate) identity: plan::Identity,
    pub(crate) plan: plan::RunPlan<'p>,
    tx: mpsc::Sender<Msg>,
    rx: Inbox,
    heard: crate::layers::cli::heard::RunJudge,
    /// What applying the plan built, for the run.
    pub(crate) started: Started,
}

/// Steps 1 to 4 of a run (after the pure checks): the host's facts and what it must offer, the
/// uid lease, the plan, and every layer applied, bubblewrap spawned last.
pub(crate) fn prepare<'p>(
    checked: &'p request::Checked<'_>,
    cfg: &ServerConfig,
    guard: &mut RunGuard,
    hooks: LeaseHooks<'_>,
    made: Made,
) -> SetupResult<Prepared<'p>> {
    // The host's facts, then what the host must offer: nothing created yet (but the state
    // directory).
    let facts = HostFacts::gather(cfg, checked);
    plan::preflight(checked, cfg, &facts)?;

    // 2. Identity: lease a pool uid (the plan needs it).
    (hooks.before)();
    // A lease whose owner died mid-run is cleaned first. (The janitor pass before every run
    // already did this with the configured nft; a lease that died since is cleaned here with the
    // default one.)
    let on_dead = |slot: u32, file: &mut fs_err::File| {
        let nft = std::path::Path::new(crate::config::DEFAULT_NFT);
        let report = crate::janitor::clean_dead_lease(
            &cfg.state_dir,
            slot,
            file,
            nft.is_file().then_some(nft),
        );
        report.errors.is_empty()
    };
    // A spare takes a uid only when one is free: a run waiting for one comes first.
    let when_full = match made {
        Made::Whole => identity::uidpool::WhenFull::Wait(hooks.full),
        Made::Spare => identity::uidpool::WhenFull::GiveUp,
    };
    let identity = identity::apply::lease(cfg, &checked.req.run_id, guard, &on_dead, when_full)?;

    // 3. The whole plan, before anything else exists. A run with bound secrets or HTTP rules
    // gets the egress proxy's material first (a spare never does: `spare::wanted`).
    let egress = match made {
        Made::Whole => egress(checked, cfg)?,
        Made::Spare => None,
    };
    let mut plan = plan::plan_run_with(checked, cfg, &facts, &identity, egress)?;
    if made == Made::Spare {
        plan.run_dir.request.clear();
    }

    // 4. Apply it: every layer's steps, sorted by phase, the last of which spawns
    // bubblewrap. What the DNS stub and the report socket see goes to the run loop.
    let (tx, rx) = mpsc::channel::<Msg>();
    let dns_tx = Mutex::new(tx.clone());
    let on_lookup: Arc<OnLookup> = Arc::new(move |l: &Lookup| {
        if let Ok(tx) = dns_tx.lock() {
            let _ = tx.send(Msg::Dns(l.clone()));
        }
    });
    // The egress proxy's refusals stream as they happen.
    if let Some(e) = &plan.egress {
        let denied_tx = Mutex::new(tx.clone());
        e.on_denial(Arc::new(move |d: &band::proto::Denial| {
            if let Ok(tx) = denied_tx.lock() {
                let _ = tx.send(Msg::Denied(d.clone()));
            }
        }));
    }
    let reports = Arc::new(ReportQueue::new(tx.clone()));
    let queue = Arc::clone(&reports);
    let on_report: OnReport = Arc::new(move |r| queue.push(r));
    // The shells' own "not found" messages on the script's stderr are CLI reports too
    // (`layers::cli::heard`).
    let heard =
        crate::layers::cli::heard::Judge::for_run(&plan.pre.rules, &plan.exec, on_report.clone())?;
    let inputs = Inputs {
        plan: &plan,
        checked,
        cfg,
    };
    // The callbacks not kept by a layer go with it: the channel ends with the run's senders.
    let started = apply(&inputs, on_lookup, on_report, guard)?;
    Ok(Prepared {
        identity,
        plan,
        tx,
        rx: Inbox::new(rx, reports),
        heard,
        started,
    })
}

/// The client's side of a run: its request (the result's id, insist, trace, observe), where the
/// run's events go, whether the client went, and when the run began for it (`setup_ms` counts
/// from there).
struct Client<'a> {
    req: &'a RunRequest,
    sink: &'a EventSink,
    gone: &'a ClientGone,
    t0: Instant,
}

/// Steps 5 and 6 of a run built by [`prepare`]: its input written, the script run, what it
/// produced collected. `checked` is the request whose workspace and input the run directory
/// holds.
fn run_prepared(
    client: &Client<'_>,
    checked: &request::Checked<'_>,
    prepared: Prepared<'_>,
    guard: &mut RunGuard,
) -> SetupResult<RunResult> {
    let Prepared {
        plan,
        tx,
        rx,
        heard,
        started:
            Started {
                spawned,
                run_dir,
                cgroup,
                net,
                reports,
            },
        ..
    } = prepared;
    let held = Handles {
        cgroup,
        net,
        reports,
        bands_listeners: net::listening::bands_own(
            plan.net.as_ref(),
            plan.egress.as_ref().map(|e| e.ports),
        ),
    };
    let setup_ms = spawned
        .run_start
        .saturating_duration_since(client.t0)
        .as_millis() as u64;
    let run_start = spawned.run_start;

    // 5. Feed the sandbox (secrets), read it (status, stdout, stderr), and run. A client that
    // asked for it says `go` first: its record of the run is on its disk, and the script has
    // not started before (`RunRequest::start_on_go`).
    if client.req.start_on_go
        && !client
            .gone
            .wait_for_go(Duration::from_millis(plan.limits.runtime_ms))
    {
        return Err(SetupError::new(
            Layer::Process,
            "the client did not say `go` (it went away, cancelled, or its record of the run did not reach its disk); the script did not start",
        ));
    }
    let observer = start(client.req.observe, &run_dir, spawned, heard, tx, guard)?;
    // A request with `stdin`: the client's chunks go to the script's pipe.
    if let Some(pipe) = guard.child.as_mut().and_then(|c| c.stdin.take()) {
        events::spawn_stdin_writer(pipe, client.gone);
    }
    client.sink.event(Event::Started {
        run_id: client.req.run_id.clone(),
        setup_ms,
    });
    let mut ran = run(client, &plan, &rx, guard, &held, run_start);
    ran.reached_the_script()?;

    // 6. Collect (the observer stops first: the collection's own reads are not the run's).
    let bands_own = crate::observe::program_cache_folders(&plan.process.sandbox.self_links);
    let observed = observer.map(|o| o.finish(&bands_own));
    let collected = collect(
        client,
        checked,
        &plan.limits,
        &run_dir,
        held.net.as_ref().and_then(|n| guard.get(n)),
        &mut ran.st,
    );
    let mut result = result(
        client,
        checked,
        &plan.limits,
        ran,
        collected,
        observed,
        setup_ms,
    );
    // Allowed commands this host does not have (alternatives such as `python *`): the run went
    // without them, and its result says so (the client tells it; the script's stderr stays the
    // script's).
    result.missing_commands = plan.pre.cli.missing.clone();
    Ok(result)
}

/// The start of step 5: `band learn`'s observer (from now on: the script cannot start before
/// its secrets are written), and the thread that serves the sandbox's pipes ([`spawn_pipes`]:
/// the secrets written, the jail's status, bubblewrap's exit, stdout, stderr through `heard`)
/// and sends the run loop what it reads.
fn start(
    observe: bool,
    run_dir: &std::path::Path,
    spawned: Spawned,
    heard: crate::layers::cli::heard::RunJudge,
    tx: mpsc::Sender<Msg>,
    guard: &mut RunGuard,
) -> SetupResult<Option<crate::observe::Observer>> {
    let (stdout, stderr) = guard
        .child
        .as_mut()
        .map(|c| (c.stdout.take(), c.stderr.take()))
        .unwrap_or_default();
    // `band learn`: watch the workspace copy, and answer the jail's observing filter.
    let observer = if observe {
        Some(
            crate::observe::Observer::start(run_dir, spawned.observe).map_err(|e| {
                SetupError::new(
                    Layer::Filesystem,
                    format!(
                        "cannot observe the run's files (fanotify on {}): {e}",
                        run_dir.display()
                    ),
                )
                .with_hint("band learn needs Linux 5.5 or later (fanotify filesystem marks, seccomp user notification that lets calls continue) and band-server running as root")
            })?,
        )
    } else {
        None
    };
    let pipes = Pipes {
        stdout,
        stderr: stderr.map(|s| heard.watch(s)),
        status: spawned.status_r,
        exit: guard.child.as_ref().and_then(events::exit_pidfd),
        input: (spawned.secrets_w, spawned.jail_json),
    };
    spawn_pipes(pipes, tx)?;
    Ok(observer)
}

/// The layers the run reads while it runs ([`Started`]'s handles).
pub(crate) struct Handles {
    pub(crate) cgroup: crate::common::Held<crate::layers::cgroup::RunCgroup>,
    pub(crate) net: Option<crate::common::Held<net::NetLayer>>,
    pub(crate) reports: crate::common::Held<crate::layers::cli::reports::ReportListener>,
    /// What band-server itself listens on in the run's network namespace (`listening::bands_own`):
    /// left out of what the run is said to listen on when it times out.
    pub(crate) bands_listeners: Vec<std::net::SocketAddr>,
}

/// What the run loop saw of a run, and its cgroup's counters.
struct Ran {
    st: LoopState,
    exit: Option<ExitStatus>,
    run_ms: u64,
    stats: CgroupStats,
}

/// The run of step 5: the run loop until bubblewrap exits or the wall clock runs out (or the
/// client goes, or the run's table vanishes); then everything left in the cgroup killed, and
/// what is still on the way read.
fn run(
    client: &Client<'_>,
    plan: &plan::RunPlan<'_>,
    rx: &Inbox,
    guard: &mut RunGuard,
    held: &Handles,
    run_start: Instant,
) -> Ran {
    let sink = client.sink;
    let mut st = LoopState::new(&plan.limits);
    let deadline = run_start + Duration::from_millis(plan.limits.runtime_ms);
    let exit = run_loop(rx, guard, held, sink, &mut st, deadline, client.gone);
    let run_ms = run_start.elapsed().as_millis() as u64;
    // Anything still alive (daemonised children) dies now, then the pipes reach EOF.
    let stats = guard.get(&held.cgroup).map(|cg| {
        let _ = cg.kill_all(KILL_DEADLINE);
        cg.stats()
    });
    drain(rx, sink, &mut st, Duration::from_secs(2));
    if let Some(l) = guard.get_mut(&held.reports) {
        l.stop();
    }
    drain(rx, sink, &mut st, Duration::ZERO);
    if st.forged > 0 {
        crate::say!(
            "band-server: run {}: dropped {} forged CLI report(s): {}",
            client.req.run_id,
            st.forged,
            st.forged_why.join("; ")
        );
    }
    Ran {
        st,
        exit,
        run_ms,
        stats: stats.unwrap_or_default(),
    }
}

impl Ran {
    /// The error of a run whose script never ran (bubblewrap or the jail failed), or whose
    /// nftables table vanished (the run was killed).
    fn reached_the_script(&self) -> SetupResult<()> {
        let st = &self.st;
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
        Ok(())
    }
}

/// What a run produced, collected from outside the sandbox.
struct Collected {
    output: Option<serde_json::Value>,
    output_bytes: u64,
    output_too_large: bool,
    written: Vec<proto::FileEntry>,
    written_folders: Vec<String>,
    insist_missing: Vec<String>,
    network: Option<proto::NetworkReport>,
}

/// Step 6: the output (`io/output.json`, else stdout), the workspace's changed files (those
/// `allow.write` refuses are denials), the network report (its refused flows are denials), and
/// the `insist` rules nothing met.
fn collect(
    client: &Client<'_>,
    checked: &request::Checked<'_>,
    limits: &crate::config::EffectiveLimits,
    run_dir: &std::path::Path,
    net: Option<&net::NetLayer>,
    st: &mut LoopState,
) -> Collected {
    let (req, sink) = (client.req, client.sink);
    let output =
        match collect::read_output_file(&run_dir.join("io/output.json"), limits.output_bytes) {
            Output::None => collect::output_from_stdout(&st.stdout, limits.output_bytes),
            other => other,
        };
    let found = collect::walk_workspace(&run_dir.join("workspace"), limits.disk_bytes);
    // The copy's folders before the script: those of the request (an empty one among them is
    // not the run's to report).
    let folders_before = collect::folders_before(
        &checked.workspace,
        req.workspace_folders.as_deref(),
        &crate::layers::fs::mounts::plan_write_dirs(&req.policy),
    );
    let changed = collect::changed_files(&found, &checked.workspace, &folders_before);
    let written = collect::written_entries(&changed, &checked.compiled.write);
    let written_folders = collect::written_folders(&changed, &checked.compiled.write);
    for d in collect::write_denials(&changed, &checked.compiled.write) {
        deny(st, d, sink);
    }
    let mut insist_missing = collect::insist_missing(&req.policy, &st.calls, &changed);
    let network = net.map(|n| {
        let (report, lookups, seen) = n.report();
        insist_missing.extend(net::insist_missing(&req.policy.insist.net, &lookups, &seen));
        for f in &report.denied {
            let host = f.names.first().cloned().unwrap_or_else(|| f.addr.clone());
            let d = Denial::Net {
                host,
                port: Some(f.port),
                rule: None,
            };
            deny(st, d, sink);
        }
        // The egress proxy's refusals: requests outside the HTTP rules, bound secrets'
        // placeholders on their way where their values are not put (named, never the value).
        // Most were streamed as they happened; those still on their way are added now (one
        // for one, linear). Past their bound they were neither streamed nor kept: counted, so
        // the run's count of denials stays whole.
        let streamed = std::mem::take(&mut st.streamed);
        for d in net::proxy::refusals::not_streamed(&streamed, n.proxy_denials()) {
            deny(st, d, sink);
        }
        st.denial_count += n.proxy_denials_dropped();
        report
    });
    let (output, output_bytes, output_too_large) = match output {
        Output::Json(v, n) => (Some(v), n, false),
        Output::TooLarge(n) => {
            sink.event(Event::Limit {
                limit: "output".into(),
                detail: format!("{n} bytes, over maxOutputBytes {}", limits.output_bytes),
            });
            (None, n, true)
        }
        Output::Unreadable(m) => {
            crate::say!("band-server: run {}: {m}", req.run_id);
            (None, 0, false)
        }
        Output::None => (None, 0, false),
    };
    Collected {
        output,
        output_bytes,
        output_too_large,
        written,
        written_folders,
        insist_missing,
        network,
    }
}

/// A denial found after the run: counted, streamed, and kept (up to `MAX_CALLS_KEPT`).
fn deny(st: &mut LoopState, d: Denial, sink: &EventSink) {
    st.denial_count += 1;
    sink.event(Event::Denied(d.clone()));
    if st.denied.len() < MAX_CALLS_KEPT {
        st.denied.push(d);
    }
}

/// The run's result: its status from what it did, the limits it reached said as events.
fn result(
    client: &Client<'_>,
    checked: &request::Checked<'_>,
    limits: &crate::config::EffectiveLimits,
    ran: Ran,
    collected: Collected,
    observed: Option<proto::Observed>,
    setup_ms: u64,
) -> RunResult {
    let Ran {
        st,
        exit,
        run_ms,
        stats,
    } = ran;
    let sink = client.sink;
    let facts = Facts {
        exit_code: exit.and_then(exit_code),
        timed_out: st.timed_out,
        oom_kills: stats.oom_kills,
        pids_max_hits: stats.pids_max_hits,
        output_too_large: collected.output_too_large,
        denials: st.denial_count as usize,
        insist_missing: collected.insist_missing.len(),
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
    RunResult {
        run_id: client.req.run_id.clone(),
        status,
        exit_code: facts.exit_code,
        output: collected.output,
        stdout: st.stdout.text(),
        stderr: st.stderr.text(),
        stdout_truncated: st.stdout.truncated(),
        stderr_truncated: st.stderr.truncated(),
        // A cancelled run's half-written files (and folders) are not copied back.
        written: if st.cancelled {
            Vec::new()
        } else {
            collected.written
        },
        written_folders: if st.cancelled {
            Vec::new()
        } else {
            collected.written_folders
        },
        denied: st.denied.clone(),
        cli_calls: if client.req.trace {
            st.calls.clone()
        } else {
            Vec::new()
        },
        insist_missing: collected.insist_missing,
        metrics: Metrics {
            setup_ms,
            run_ms,
            teardown_ms: 0,
            peak_memory_bytes: stats.peak_memory_bytes,
            input_bytes: checked.input_json.len() as u64,
            output_bytes: collected.output_bytes,
        },
        error: None,
        network: collected.network,
        observed,
        // On the run's record (its result, the ledger, `band show`), not only in the log.
        forged: (st.forged > 0).then(|| band::proto::Forged {
            count: st.forged as u64,
            reasons: st.forged_why.clone(),
        }),
        deps_sha256: None,
        trust: None,
        missing_commands: Vec::new(),
        listening: st.listening,
    }
}

/// Serve one request from `input`, writing events and the result to `sink`. What the client
/// sends after the request is watched ([`watch_client`]): a `cancel`, or the end of input after
/// `hold`, kills the run. `before_lease` returns once what must precede the run's uid lease is
/// done (`band-server run`'s janitor pass).
pub fn serve(
    input: Box<dyn BufRead + Send>,
    cfg: &ServerConfig,
    sink: &EventSink,
    before_lease: &dyn Fn(),
) -> RunResult {
    serve_with(input, cfg, sink, &|_| (), |req, gone| {
        let hooks = LeaseHooks {
            before: before_lease,
            ..LeaseHooks::NONE
        };
        let (result, removal) = execute_until_result(&req, cfg, sink, &gone, hooks);
        (result, removal, req)
    })
    .0
}

/// A request served, and the key of the shape line its client sent before it
/// ([`RunRequest::shape_line`], computed before the site policy narrowed the request), if it
/// sent one: a warm server builds its next spare sandbox for it (`spare`) and hands that spare
/// the next connection of the same shape (`warm`).
pub(crate) struct ServedRequest {
    pub(crate) req: RunRequest,
    pub(crate) shape: Option<String>,
}

/// [`serve`] with the run left to `run`, which gets the request and the client's watch, and
/// gives back the result, what to remove once it is out, and the request. `before_result` sees
/// the result just before it goes out. Returns the result and the request served, if one was.
/// A warm server's client writes a shape line before its request
/// ([`proto::SHAPE_LINE_PREFIX`]); it is read and passed over here.
pub(crate) fn serve_with<F>(
    mut input: Box<dyn BufRead + Send>,
    cfg: &ServerConfig,
    sink: &EventSink,
    before_result: &dyn Fn(&RunResult),
    run: F,
) -> (RunResult, Option<ServedRequest>)
where
    F: FnOnce(RunRequest, ClientGone) -> (RunResult, Removal, RunRequest),
{
    let mut line = String::new();
    let max = max_request_bytes(cfg);
    let mut read = input.by_ref().take(max + 1).read_line(&mut line);
    let shape = proto::shape_line_key(line.as_bytes())
        .filter(|_| line.len() <= SHAPE_LINE_MAX)
        .map(str::to_string);
    if shape.is_some() {
        line.clear();
        read = input.by_ref().take(max + 1).read_line(&mut line);
    }
    let mut input = Some(input);
    let mut removal = None;
    let mut served = None;
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
            Ok(Message::Request(mut req)) => {
                drop(line);
                // Every path of a run (its own, a spare's, a warm child's) starts from the
                // request narrowed to the site policy; `request::check` refuses it again.
                if let Err(e) = request::narrow_to_site(&mut req, cfg) {
                    let r = RunResult::setup_failed(&req.run_id, e.layer, e.message, e.hint);
                    before_result(&r);
                    deliver(&r, None, sink);
                    return (r, None);
                }
                if !req.policy.allow.net.is_empty() {
                    crate::layers::net::nft::open_early(&cfg.nft);
                }
                let gone = input.take().map(watch_client).unwrap_or_default();
                let (result, rest, req) = run(*req, gone);
                removal = Some(rest);
                served = Some(ServedRequest { req, shape });
                result
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
    before_result(&result);
    deliver(&result, removal, sink);
    (result, served)
}

/// The longest shape line passed over ([`proto::SHAPE_LINE_PREFIX`], a SHA-256 in hex, `\n`).
pub(crate) const SHAPE_LINE_MAX: usize = 128;

/// How long the removal of a run waits for its result to be written out: a client that does
/// not read cannot keep the run's mounts, folders, cgroups and lease any longer.
const RESULT_OUT: Duration = Duration::from_secs(1);

/// Send the result and close the sink, then remove what was built for the run: the client has
/// its result, and the end of the output (a sink on standard output closes it as it finishes,
/// [`ClosingStdout`]), before the run's mounts, folders, cgroups and lease are removed, and
/// need not wait for that. (Before, the removal came first.)
fn deliver(result: &RunResult, removal: Option<Removal>, sink: &EventSink) {
    sink.send(&Message::Result(Box::new(result.clone())));
    sink.close_within(RESULT_OUT);
    if let Some(r) = removal {
        r.finish();
    }
}

/// The largest request line read: the bundle and workspace (base64, so 4/3 of their size) must
/// fit in the disk cap, plus the input and some room for the policy and framing.
pub(crate) fn max_request_bytes(cfg: &ServerConfig) -> u64 {
    cfg.caps.disk_bytes.saturating_mul(4) / 3 + cfg.caps.input_bytes + (16 << 20)
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use pretty_assertions::assert_eq;

    use super::*;
    use crate::common::{Built, Teardown, built_any};

    type Log = Arc<Mutex<Vec<String>>>;

    fn note(log: &Log, what: &str) {
        if let Ok(mut l) = log.lock() {
            l.push(what.to_string());
        }
    }

    /// A client's end of the output: notes each message, and its close.
    struct Client(Log);
    impl Write for Client {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let text = String::from_utf8_lossy(buf);
            if text.contains("\"type\":\"result\"") {
                note(&self.0, "result");
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    impl Drop for Client {
        fn drop(&mut self) {
            note(&self.0, "output closed");
        }
    }

    /// A built layer that notes its stop and its removal.
    struct Layer(Log);
    impl Built for Layer {
        fn stop(&mut self, _t: &mut Teardown) {
            note(&self.0, "stopped");
        }
        fn teardown(self: Box<Self>, _t: &mut Teardown) {
            note(&self.0, "removed");
        }
        built_any!();
    }

    /// The result goes out, and the output closes, after every process of the run is stopped and
    /// before anything built for it is removed (before, the removal came first).
    #[test]
    fn the_result_goes_out_between_the_stop_and_the_removal() {
        let log: Log = Arc::default();
        let mut guard = RunGuard::default();
        guard.push(Layer(log.clone()));
        guard.stop();
        let sink = EventSink::new(Box::new(Client(log.clone())));
        let result = RunResult::setup_failed("0123456789abcdef", proto::Layer::Process, "x", None);
        deliver(&result, Some(Removal::of(guard)), &sink);
        let got = log.lock().map(|l| l.clone()).unwrap_or_default();
        assert_eq!(got, ["stopped", "result", "output closed", "removed"]);
    }

    /// A warm server's client writes its shape line before the request: the request is read
    /// after it, and served with the shape it has as the client sent it.
    #[test]
    fn a_shape_line_before_the_request_is_passed_over() {
        let req: RunRequest = serde_json::from_value(serde_json::json!({
            "protocol": proto::PROTOCOL_VERSION, "run_id": "0123456789abcdef", "skill": "s",
            "script": "run", "entry": "scripts/run.sh", "bundle": [], "bundle_sha256": "00",
            "policy": {}, "input": {}
        }))
        .expect("a request");
        let text = format!(
            "{}{}\n",
            req.shape_line(),
            serde_json::to_string(&Message::Request(Box::new(req.clone()))).expect("json")
        );
        let log: Log = Arc::default();
        let sink = EventSink::new(Box::new(Client(log.clone())));
        let cfg = ServerConfig::default();
        let (result, served) = serve_with(
            Box::new(std::io::Cursor::new(text.into_bytes())),
            &cfg,
            &sink,
            &|_| (),
            |r, _| {
                let result = RunResult::setup_failed(&r.run_id, proto::Layer::Process, "x", None);
                (result, Removal::of(RunGuard::default()), r)
            },
        );
        sink.finish();
        assert_eq!(result.run_id, "0123456789abcdef", "{result:?}");
        let served = served.expect("a request served");
        assert_eq!(served.req.run_id, req.run_id);
        assert_eq!(served.shape, Some(req.shape_key()));
    }

    /// A client that never reads: its output blocks.
    struct Stalled(std::sync::mpsc::Receiver<()>);
    impl Write for Stalled {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let _ = self.0.recv();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A client that does not read its output cannot hold the removal of the run.
    #[test]
    fn a_client_that_does_not_read_does_not_hold_the_removal() {
        let log: Log = Arc::default();
        let mut guard = RunGuard::default();
        guard.push(Layer(log.clone()));
        let (unblock, blocked) = std::sync::mpsc::channel();
        let sink = EventSink::new(Box::new(Stalled(blocked)));
        let result = RunResult::setup_failed("0123456789abcdef", proto::Layer::Process, "x", None);
        deliver(&result, Some(Removal::of(guard)), &sink);
        let got = log.lock().map(|l| l.clone()).unwrap_or_default();
        assert_eq!(got, ["stopped", "removed"]);
        drop(unblock);
        sink.finish();
    }
}
