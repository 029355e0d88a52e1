//! A spare sandbox: a run built ahead by the host's warm server (`warm`), up to band-jail waiting
//! for its input, for the next request of the same shape (issue 17).
//!
//! A run's cost before its script starts is mostly the building of its layers: the uid lease,
//! the cgroup, the run directory and its mounts, bubblewrap's namespaces, and the starts of
//! bubblewrap and band-jail. None of it depends on the request's own data, only on its shape:
//! the skill, script, entry, bundle, policy and config ([`same_shape`]). After a warm child has
//! served a request, it builds a spare of that shape ([`keep`]) with a run id of its own
//! ([`spare_request`]): every layer applied, bubblewrap spawned, band-jail blocked on the
//! secrets pipe, before it sets `no_new_privs`, Landlock or seccomp, and before anything of the
//! skill runs. The workspace is empty and there is no input (`RunDirPlan::request` is left out).
//!
//! When a request comes (the warm server hands the spare child its connection):
//! - **Same shape:** its own files (the workspace, with the folders they need, and the input)
//!   are made in the spare's run directory, its secrets and arguments go into the jail's input,
//!   and the run goes on from there as any other: its clock starts now (`setup_ms` is the
//!   hand-over), its stdout, stderr, status and limits are watched from now on, and what it
//!   wrote is collected against its own workspace. Its result has its own run id.
//! - **Another shape, or the spare is gone** (its bubblewrap ended): the request is run as a
//!   warm child runs any other, and the spare is removed after its result.
//!
//! What a spare is not built for: `band learn` (the observer watches the run from its start) and
//! runs that bind host paths (`allow.read` / `allow.write` outside the workspace: the spare would
//! hold the folders as they were when it was built). Those run as before. A spare of a run with
//! `allow.net` has its nftables table, its namespace with the relay, and its DNS stub from the
//! start, as a cold run has them before its script; nothing of the sandbox runs while it waits,
//! so nothing is resolved or sent. Before it takes a request it checks that the table and the
//! relay are still there (`NetLayer::intact`: a firewall's reload flushes the ruleset, and
//! without the table the run's uid would reach every host); if not, the request runs as any
//! other and the spare is removed.
//!
//! A spare is at most [`FRESH`] old when it serves: the host's facts it was built from (where
//! the declared commands are, the library masks) are looked up again by its successor. It never
//! outlives the warm server that made it (its control socket closes with the server, which exits
//! when band-server, its config or its settings change: `warm::still_current`). While it waits
//! it holds a pool uid, a cgroup and a run directory, and runs nothing but the waiting
//! band-jail and bubblewrap.

use std::path::Path;
use std::time::{Duration, Instant};

use band::proto::{Layer, RunRequest, RunResult};

use super::{
    Client, EventSink, LeaseHooks, Made, Prepared, Removal, RunGuard, ServedRequest, conclude,
    execute_until_result, prepare, run_prepared, serve_with,
};
use crate::common::Held;
use crate::config::ServerConfig;
use crate::error::{LayerExt, SetupResult};
use crate::layers::fs::mounts::allow_and_insist;
use crate::layers::fs::workdir::RunDir;
use crate::layers::identity::{idle, uidpool};
use crate::layers::net::NetLayer;
use crate::layers::process::bwrap;
use crate::request::{self, Check};
use crate::sys;

/// How long a spare waits for a request before it is built again.
pub(crate) const FRESH: Duration = Duration::from_secs(60);

/// May a spare be built for requests like `req`? Not for `band learn`, or patterns (allowed or
/// insisted on) that bind a host path (see the module's documentation).
pub(crate) fn wanted(req: &RunRequest) -> bool {
    use band::policy::Category;
    use band::policy::place::{Place, place};
    let p = &req.policy;
    let binds_host = [(Category::Read, false), (Category::Write, true)]
        .into_iter()
        .any(|(cat, writable)| {
            allow_and_insist(p, cat)
                .iter()
                .any(|pattern| matches!(place(pattern, writable), Some(Place::Host(_))))
        });
    // A run through the egress proxy has its own CA and placeholders from its start: no spare.
    let proxied = !p.secret_hosts.is_empty()
        || p.allow
            .net
            .iter()
            .any(|r| band::policy::net::NetPattern::parse(r).is_ok_and(|n| n.http().is_some()));
    !req.observe && !binds_host && !proxied
}

/// Could a spare built for `spare` serve `req`: the same protocol, skill, script, entry, bundle
/// (its digest, which the check recomputes from the files), policy, config, narrowing layers,
/// signed lock, `observe` and `stdin` (a pipe or `/dev/null`, given to bubblewrap when the spare
/// is built). Everything else of a request (run id, input, workspace, secrets, arguments,
/// trace) is the hand-over's. Every field is named here, so that a field added to requests is
/// put on one side or the other by whoever adds it.
pub(crate) fn same_shape(spare: &RunRequest, req: &RunRequest) -> bool {
    let RunRequest {
        protocol,
        run_id: _,
        skill,
        script,
        entry,
        bundle: _,
        bundle_sha256,
        policy,
        input: _,
        config,
        secrets: _,
        workspace: _,
        trace: _,
        observe,
        args: _,
        signed,
        narrowing,
        stdin,
        // When the script starts (on the client's `go`), not what it runs in.
        start_on_go: _,
        // The workspace's folders are made with its files, at the hand-over.
        workspace_folders: _,
    } = req;
    spare.protocol == *protocol
        && spare.skill == *skill
        && spare.script == *script
        && spare.entry == *entry
        && spare.bundle_sha256 == *bundle_sha256
        && spare.policy == *policy
        && spare.config == *config
        && spare.observe == *observe
        && spare.signed == *signed
        && spare.narrowing == *narrowing
        && spare.stdin == *stdin
}

/// The request a spare is built from: `served`'s shape, with `run_id`, and nothing of its own
/// (no workspace, input, secrets, arguments or trace).
pub(crate) fn spare_request(served: &RunRequest, run_id: String) -> RunRequest {
    RunRequest {
        protocol: served.protocol,
        run_id,
        skill: served.skill.clone(),
        script: served.script.clone(),
        entry: served.entry.clone(),
        bundle: served.bundle.clone(),
        bundle_sha256: served.bundle_sha256.clone(),
        policy: served.policy.clone(),
        input: serde_json::Value::Null,
        config: served.config.clone(),
        secrets: Default::default(),
        workspace: Vec::new(),
        trace: false,
        observe: served.observe,
        args: Vec::new(),
        signed: served.signed.clone(),
        narrowing: served.narrowing.clone(),
        // A spare's bubblewrap is spawned before its request, with the stdin the requests of
        // its shape have: a pipe for band-sandboxd's, `/dev/null` for band's.
        stdin: served.stdin,
        start_on_go: false,
        workspace_folders: None,
    }
}

/// A spare's run id: this process's pid and a count (16 hex digits, as a client's).
pub(crate) fn run_id(pid: i32, n: u32) -> String {
    format!("{:08x}{:08x}", pid as u32, n)
}

/// What sees a served result just before it goes out, and how it was served.
pub(crate) type BeforeResult = dyn Fn(&RunResult, Served);

/// What the spare's keeper says once it is built ([`keep`]).
pub(crate) enum Next {
    /// A connection came: serve the request on it.
    Serve {
        input: Box<dyn std::io::BufRead + Send>,
        sink: EventSink,
        /// Sees the result, and how it was served, just before it goes out (the warm server's
        /// log line).
        before_result: Box<BeforeResult>,
    },
    /// [`FRESH`] has passed: remove it and build another.
    Rebuild,
    /// The warm server is gone, or made another spare: remove it and stop.
    Stop,
    /// A run of another server waits for a uid: remove it (its uid is free then) and stop.
    Leave,
}

/// How [`keep`] ended.
pub(crate) enum Kept {
    /// It served a connection: the request served (the next spare's shape), if one came on it.
    Served(Option<Box<ServedRequest>>),
    Rebuild,
    Stop,
    /// It could not be built (said on stderr): no spare.
    Failed,
}

/// How the request was served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Served {
    /// By the spare.
    Spare,
    /// By a run of its own: another shape, or the spare was gone (or no spare was asked).
    Own,
}

impl Served {
    /// As the warm server's log says it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Served::Spare => "a spare",
            Served::Own => "built for it",
        }
    }
}

/// Build a spare for `served`'s shape with run id `id`, say so (`ready`), wait for what comes
/// (`next`), and serve it. The spare takes a uid only if one is free; a request it cannot serve
/// is run with `hooks` around its lease, as any warm child's.
pub(crate) fn keep(
    served: &RunRequest,
    id: String,
    cfg: &ServerConfig,
    ready: &mut dyn FnMut(),
    next: &mut dyn FnMut() -> Next,
    hooks: LeaseHooks<'_>,
) -> Kept {
    let spare = spare_request(served, id);
    let no_spare = |why: &str| {
        crate::say!(
            "band-server serve: no spare for {}/{}: {why}",
            spare.skill,
            spare.script
        );
        Kept::Failed
    };
    let mut guard = RunGuard::default();
    let checked = match request::check(&spare, cfg, sys::euid() == 0) {
        Ok(Check::Run(c)) => c,
        Ok(Check::Refused(r)) => {
            return no_spare(r.error.as_ref().map_or("refused", |e| e.message.as_str()));
        }
        Err(e) => return no_spare(&e.message),
    };
    // A script with packages runs with its environment's python3 (`deps`), which a spare's
    // plain config does not have.
    let file = |p: &str| {
        checked
            .bundle
            .iter()
            .find(|f| f.path == p)
            .map(|f| f.data.clone())
    };
    if crate::deps::declares(&spare.entry, &file) {
        return no_spare("its script declares packages");
    }
    let prepared = match prepare(&checked, cfg, &mut guard, LeaseHooks::NONE, Made::Spare) {
        Ok(p) => p,
        Err(e) => {
            Removal::of(guard).finish();
            return no_spare(&format!("{}: {}", e.layer.as_str(), e.message));
        }
    };
    // The spare, until a request takes it. A connection that brings no request (band drops
    // one it made on a guess when its run is refused before the request) leaves it waiting.
    let mut spare_run = Some((prepared, guard));
    loop {
        // Marked idle on its uid while it waits, so that a run of another server that finds the
        // pool full can ask it to leave; a request from before this wait is not one.
        let slot = spare_run.as_ref().map(|(p, _)| p.identity.slot);
        let idle = Path::new(uidpool::UID_LOCK_DIR);
        sys::clear_leave_asked();
        if let Some(slot) = slot
            && let Err(e) = idle::mark(idle, Path::new("/proc"), slot, idle::server())
        {
            crate::say!(
                "band-server serve: spare {}: no idle mark: {e}",
                spare.run_id
            );
        }
        ready();
        let next = next();
        let mut unmarking = None;
        if let Some(slot) = slot {
            // A connection to serve: the mark is cleared beside it, not before it (an `ftruncate`
            // of the lock file, 0.2 ms on this VM's ext4 `/run`, was on every served run's way to
            // its script). Until then a run of another server may still ask this spare to leave:
            // serving, it does not read the request, and the asker looks again.
            let serving = matches!(next, Next::Serve { .. });
            unmarking = serving
                .then(|| {
                    std::thread::Builder::new()
                        .name("unmark".into())
                        .spawn(move || {
                            let _ = idle::unmark(idle, slot);
                        })
                        .ok()
                })
                .flatten();
            if unmarking.is_none() {
                let _ = idle::unmark(idle, slot);
            }
        }
        let (input, sink, before_result) = match next {
            Next::Serve {
                input,
                sink,
                before_result,
            } => (input, sink, before_result),
            end => {
                if let Some((prepared, guard)) = spare_run.take() {
                    drop(prepared);
                    Removal::of(guard).finish();
                    crate::say!(
                        "band-server serve: spare {} removed ({}; pid {})",
                        spare.run_id,
                        match end {
                            Next::Rebuild => "to be built again",
                            Next::Leave => "for a run of another server waiting for a uid",
                            _ => "sent away",
                        },
                        sys::pid()
                    );
                }
                return if matches!(end, Next::Rebuild) {
                    Kept::Rebuild
                } else {
                    Kept::Stop
                };
            }
        };
        let how = std::cell::Cell::new(Served::Own);
        let said = |r: &RunResult| before_result(r, how.get());
        // Cleared before the run's lease can go (with its removal, after the result), and before
        // this spare marks it again (a connection without a request): a mark made after it is
        // never this one's to clear.
        let unmarked = JoinOnDrop(unmarking);
        let (_, req) = serve_with(input, cfg, &sink, &said, |req, gone| {
            let _unmarked = unmarked;
            let Some((prepared, mut guard)) = spare_run.take() else {
                // Never: a spare serves one request. Run it as any warm child does.
                let (result, removal) = execute_until_result(&req, cfg, &sink, &gone, hooks);
                return (result, removal, req);
            };
            if !same_shape(&spare, &req) || !still_waits(&mut guard, prepared.started.net.as_ref())
            {
                // Run as any warm child does; the spare goes after the result.
                let (result, removal) = execute_until_result(&req, cfg, &sink, &gone, hooks);
                drop(prepared);
                return (result, removal.and(guard), req);
            }
            how.set(Served::Spare);
            let t0 = Instant::now();
            let client = Client {
                req: &req,
                sink: &sink,
                gone: &gone,
                t0,
            };
            let (result, removal) = conclude(&req.run_id, t0, guard, |guard| {
                hand_over(&spare.run_id, &client, prepared, cfg, guard)
            });
            (result, removal, req)
        });
        sink.finish();
        if req.is_some() || spare_run.is_none() {
            return Kept::Served(req.map(Box::new));
        }
    }
}

/// A thread joined when this is dropped.
struct JoinOnDrop(Option<std::thread::JoinHandle<()>>);

impl Drop for JoinOnDrop {
    fn drop(&mut self) {
        if let Some(t) = self.0.take() {
            let _ = t.join();
        }
    }
}

/// Is the spare still whole: its bubblewrap there (nothing killed it while it waited), and, for a
/// run with `allow.net`, its nftables table and relay?
fn still_waits(guard: &mut RunGuard, net: Option<&Held<NetLayer>>) -> bool {
    guard
        .child
        .as_mut()
        .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
        && net.is_none_or(|n| guard.get_mut(n).is_some_and(|n| n.intact()))
}

/// Serve `req` with the spare `prepared` (run id `spare_id`): make the request's own files in
/// its run directory, put its secrets and arguments in the jail's input, start its clock, and run
/// it as any other, for `client`.
fn hand_over(
    spare_id: &str,
    client: &Client<'_>,
    mut prepared: Prepared<'_>,
    cfg: &ServerConfig,
    guard: &mut RunGuard,
) -> SetupResult<RunResult> {
    let req = client.req;
    // The request checked and planned as the spare's run (its run directory, uid and cgroup),
    // for the files that are its own.
    let mut own = req.clone();
    own.run_id = spare_id.to_string();
    let checked = match request::check(&own, cfg, sys::euid() == 0)? {
        Check::Run(c) => c,
        Check::Refused(r) => {
            let mut r = *r;
            r.run_id = req.run_id.clone();
            return Ok(r);
        }
    };
    // Its own files only: the rest of the run directory is the spare's, planned for the same band.
    let own_files = crate::layers::fs::plan_request_files(&checked, cfg, &prepared.identity);
    RunDir::write_request(&own_files)?;
    let mut jail: bwrap::JailInput = serde_json::from_slice(&prepared.started.spawned.jail_json)
        .layer(Layer::Secrets, "cannot read back the spare's jail input")?;
    jail.secrets = req.secrets.clone();
    jail.args = req.args.clone();
    prepared.started.spawned.jail_json =
        serde_json::to_vec(&jail).layer(Layer::Secrets, "failed to encode the jail's input")?;
    prepared.started.spawned.run_start = Instant::now();
    let mut result = run_prepared(client, &checked, prepared, guard)?;
    // As a run of its own says it (`run::execute_inner`): the tier the site policy gave it.
    result.trust = request::result_trust(req, cfg);
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> RunRequest {
        serde_json::from_value(serde_json::json!({
            "protocol": band::proto::PROTOCOL_VERSION,
            "run_id": "0123456789abcdef",
            "skill": "s",
            "script": "run",
            "entry": "scripts/run.sh",
            "bundle": [],
            "bundle_sha256": "00",
            "policy": {},
            "input": {"n": 1},
            "secrets": {"TOKEN": "t"},
            "workspace": [{"path": "a.txt", "mode": 420, "data": "YQ=="}],
            "trace": true,
            "args": ["x"]
        }))
        .expect("a request")
    }

    #[test]
    fn a_spare_has_the_shape_of_the_request_served_and_nothing_of_its_own() {
        let served = request();
        let spare = spare_request(&served, run_id(42, 7));
        assert_eq!(spare.run_id, "0000002a00000007");
        assert!(request::validate_run_id(&spare.run_id).is_ok());
        assert!(same_shape(&spare, &served));
        assert!(spare.workspace.is_empty() && spare.secrets.is_empty() && spare.args.is_empty());
        assert_eq!(spare.input, serde_json::Value::Null);
        assert!(!spare.trace);
    }

    #[test]
    fn only_a_request_of_the_same_shape_is_served_by_a_spare() {
        let spare = spare_request(&request(), run_id(1, 1));
        // What the hand-over brings: not the shape.
        let mut other = request();
        other.run_id = "fedcba9876543210".into();
        other.input = serde_json::json!({"n": 2});
        other.workspace.clear();
        other.secrets.clear();
        other.args = vec!["y".into()];
        other.trace = false;
        assert!(same_shape(&spare, &other));
        // The key the warm server routes by agrees.
        assert_eq!(other.shape_key(), request().shape_key());
        // The shape.
        let changed: [fn(&mut RunRequest); 11] = [
            |r| r.protocol += 1,
            |r| r.skill = "t".into(),
            |r| r.script = "other".into(),
            |r| r.entry = "scripts/other.sh".into(),
            |r| r.bundle_sha256 = "01".into(),
            |r| r.policy.allow.read.push("*.md".into()),
            |r| r.config = Some(serde_json::json!({"k": 1})),
            |r| r.observe = true,
            // A session's narrowing is applied when the sandbox is built: a spare built without
            // it must not serve a request that carries it.
            |r| {
                r.narrowing.push(band::proto::Narrowing {
                    label: "session".into(),
                    source: "BAND_NARROW".into(),
                    text: "---\ndeny:\n  net: [\"**\"]\n---\n".into(),
                })
            },
            |r| {
                r.signed = Some(band::proto::SignedLock {
                    lock: "l".into(),
                    sig: "s".into(),
                })
            },
            // A spare built with stdin /dev/null cannot feed a request's stdin.
            |r| r.stdin = true,
        ];
        for (i, change) in changed.iter().enumerate() {
            let mut r = request();
            change(&mut r);
            assert!(!same_shape(&spare, &r), "change {i} kept the shape");
            assert_ne!(
                r.shape_key(),
                request().shape_key(),
                "change {i} kept the key"
            );
        }
    }

    #[test]
    fn no_spare_for_learn_or_host_paths() {
        let mut r = request();
        assert!(wanted(&r));
        r.policy.allow.read.push("docs/**".into());
        r.policy.allow.write.push("out/*".into());
        // The run's own /tmp is no host path.
        r.policy.allow.write.push("/tmp/**".into());
        // A network of its own: a spare has its table, relay and stub from the start.
        r.policy.allow.net.push("example.org".into());
        assert!(wanted(&r));
        for change in [
            (|r: &mut RunRequest| r.observe = true) as fn(&mut RunRequest),
            |r| r.policy.allow.read.push("/data/**".into()),
            |r| r.policy.allow.write.push("/srv/out/*".into()),
            |r| r.policy.insist.read.push("/data/input.csv".into()),
        ] {
            let mut r = request();
            change(&mut r);
            assert!(!wanted(&r));
        }
    }
}
