//! One process of the contract is one band run: the pod's band applied to the client's argv as
//! `band exec` applies a band file to an agent's command (`band::client::adhoc`), the request
//! made by band's own pipeline (the workspace files the band admits, its limits, its secrets),
//! and served by the pod's warm band-server (`super::warm`), or by a `band-server run` child of
//! its own when none listens. What the client sends while it runs (stdin, a signal, going away)
//! becomes protocol lines on the run's input; what the run writes comes back as events; the
//! result's files written under `allow.write` are written back into the workspace by band's
//! write-back, the same as `band exec`'s.
//!
//! A `Start` of `band-request` ([`skill`]) is a skill's whole request instead, read from its
//! stdin: the pod's band is a narrower layer over it ([`under_pod`]), and it runs on the pod's
//! workspace under the pod's own run id.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

use band::client::adhoc::{AdHoc, AdHocSpec, cli_refusal};
use band::client::config::UserConfig;
use band::client::outcome::{Preparation, Prepared};
use band::client::pipeline;
use band::client::sandboxd::REQUEST_COMMAND;
use band::policy::Policy;
use band::policy::site::{DEFAULT_UNSIGNED_TIER, Layer, RunKind, SitePolicy, intersect};
use band::proto::{self, Event, Message, RunRequest, RunResult, Status};
use base64::Engine as _;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{Mutex, mpsc};

use super::Pod;

/// What a client says to a run while it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    Stdin(Vec<u8>),
    /// The end of the script's stdin.
    Eof,
    /// 2, 9 or 15.
    Signal(i32),
    /// The client is gone: the run is cancelled (status `cancelled`) and torn down.
    Cancel,
}

/// What a run writes, as it writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Out {
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
}

/// The most stdin bytes in one protocol line: band-server reads a client's line 4 KiB at a time,
/// and 2 KiB is under 2.8 KiB of base64.
pub const STDIN_CHUNK: usize = 2048;

/// The runs under way, by process id (a count from 1: never a pid of this host).
#[derive(Debug, Default)]
pub struct Runs {
    next: AtomicI32,
    live: Mutex<HashMap<i32, mpsc::UnboundedSender<Control>>>,
    /// Told each time a run is forgotten (for [`Runs::drain`]).
    ended: tokio::sync::Notify,
}

impl Runs {
    /// A new process id, and the channel its run reads.
    pub async fn register(&self) -> (i32, mpsc::UnboundedReceiver<Control>) {
        let id = self.next.fetch_add(1, Ordering::SeqCst) + 1;
        let (tx, rx) = mpsc::unbounded_channel();
        self.live.lock().await.insert(id, tx);
        (id, rx)
    }

    pub async fn forget(&self, id: i32) {
        self.live.lock().await.remove(&id);
        self.ended.notify_waiters();
    }

    /// Tell run `id`; `false` when no such run is under way.
    pub async fn tell(&self, id: i32, what: Control) -> bool {
        match self.live.lock().await.get(&id) {
            Some(tx) => tx.send(what).is_ok(),
            None => false,
        }
    }

    pub async fn is_live(&self, id: i32) -> bool {
        self.live.lock().await.contains_key(&id)
    }

    /// Cancel every run (the server stops).
    pub async fn cancel_all(&self) {
        for tx in self.live.lock().await.values() {
            let _ = tx.send(Control::Cancel);
        }
    }

    /// Cancel every run, and any that starts meanwhile, until none is under way (each one's
    /// band-server has torn it down and been reaped) or `limit` has passed; `false` then.
    /// band-sandboxd is pid 1 of a pod's pid namespace: when it exits the kernel kills what is
    /// left there, so a run still tearing down would leave its cgroups behind.
    pub async fn drain(&self, limit: std::time::Duration) -> bool {
        let until = tokio::time::Instant::now() + limit;
        loop {
            let ended = self.ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            self.cancel_all().await;
            if self.live.lock().await.is_empty() {
                return true;
            }
            if tokio::time::timeout_at(until, ended).await.is_err() {
                return false;
            }
        }
    }
}

/// The argv a client sent, as a band run takes it: a standard location's absolute path for the
/// command (`/bin/sh`, what the SDK sends) becomes its name, which the sandbox's PATH of checked
/// wrappers resolves (inside, `/bin/sh` is that same wrapper). Any other path is left as it is,
/// and refused by the CLI gate as `band exec` refuses it.
pub fn normalize_argv(mut argv: Vec<String>) -> Vec<String> {
    const STANDARD: &[&str] = &[
        "/bin/",
        "/usr/bin/",
        "/usr/local/bin/",
        "/sbin/",
        "/usr/sbin/",
    ];
    if let Some(first) = argv.first_mut()
        && let Some(name) = STANDARD.iter().find_map(|d| first.strip_prefix(d))
        && !name.is_empty()
        && !name.contains('/')
    {
        *first = name.to_string();
    }
    argv
}

/// The exit code a client sees: the script's own when it ran to an end of its own (ok,
/// script_failed, denied with an exit status), else band's code for the status (`band --help`'s
/// table: setup_failed, timeout, cancelled 130, ...).
pub fn exit_code(r: &RunResult) -> i32 {
    match (r.status, r.exit_code) {
        (Status::Ok | Status::ScriptFailed | Status::Denied, Some(c)) => c,
        (status, _) => i32::from(status.exit_code()),
    }
}

pub use band::client::sandboxd::explain;

enum Made {
    Ready(Box<(AdHoc, Prepared)>),
    Refused(Box<RunResult>),
}

/// The request, as `band exec --band <pod band> --workspace <pod workspace> -- argv` makes it
/// (blocking: band's client reads files).
fn make(pod: &Pod, argv: &[String]) -> Result<Made, String> {
    let adhoc = AdHoc::new(&AdHocSpec {
        band_file: pod.band.clone(),
        argv: argv.to_vec(),
        workspace: pod.workspace.path.clone(),
        allow_system_workspace: true,
        target: Some("host".into()),
        record_io: false,
        trace: false,
    })
    .map_err(|e| e.to_string())?;
    let config = UserConfig::default();
    let started = now_ms();
    match pipeline::prepare(adhoc.spec(), &config, started, &mut |_| {}) {
        Ok(Preparation::Ready(p)) => {
            match cli_refusal(&p.request.policy, &p.request.run_id, argv) {
                Some(refused) => Ok(Made::Refused(Box::new(refused))),
                None => Ok(Made::Ready(Box::new((adhoc, *p)))),
            }
        }
        Ok(Preparation::Refused(o)) => Ok(Made::Refused(Box::new(o.result))),
        Err(e) => Err(e.to_string()),
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Run `argv` under the pod's band until it ends; what it writes goes to `out` as it comes, what
/// the client says comes from `control`. The exit code ([`exit_code`]), and band's result when
/// there is one. `stdin`: the script's stdin is fed by [`Control::Stdin`] (else it is
/// `/dev/null`).
pub async fn execute(
    pod: Arc<Pod>,
    id: i32,
    argv: Vec<String>,
    stdin: bool,
    out: mpsc::Sender<Out>,
    control: mpsc::UnboundedReceiver<Control>,
) -> (i32, Option<RunResult>) {
    let mut result = None;
    let code = execute_into(pod, id, argv, stdin, out, control, &mut result).await;
    match &result {
        Some(r) => eprintln!(
            "band-sandboxd: process {id} (run {}) ended: {}, exit code {code}",
            r.run_id,
            r.status.as_str()
        ),
        None => eprintln!("band-sandboxd: process {id} ended: exit code {code}"),
    }
    (code, result)
}

async fn execute_into(
    pod: Arc<Pod>,
    id: i32,
    argv: Vec<String>,
    stdin: bool,
    out: mpsc::Sender<Out>,
    mut control: mpsc::UnboundedReceiver<Control>,
    kept: &mut Option<RunResult>,
) -> i32 {
    let said = |text: String| {
        let out = out.clone();
        async move {
            let _ = out.send(Out::Stderr(text.into_bytes())).await;
        }
    };
    let made = {
        let pod = pod.clone();
        let argv = argv.clone();
        tokio::task::spawn_blocking(move || make(&pod, &argv)).await
    };
    let (adhoc, prepared) = match made {
        Ok(Ok(Made::Ready(r))) => *r,
        Ok(Ok(Made::Refused(r))) => {
            if let Some(text) = explain(&r) {
                said(text).await;
            }
            let code = exit_code(&r);
            *kept = Some(*r);
            return code;
        }
        Ok(Err(e)) => {
            said(format!("band: {e}\n")).await;
            return i32::from(proto::exit::USAGE);
        }
        Err(e) => {
            said(format!("band: internal error: {e}\n")).await;
            return i32::from(Status::SetupFailed.exit_code());
        }
    };
    let started_at = now_ms();
    let mut request = prepared.request.clone();
    // Which band run a process is, for the pod's log: band-server names the run's cgroup,
    // nftables table and run directory after it.
    eprintln!("band-sandboxd: process {id} is run {}", request.run_id);
    request.stdin = stdin;
    let result = match serve(&pod, request, &out, &mut control).await {
        Ok(r) => r,
        Err(e) => {
            said(format!(
                "band: band-server ({}): {e}\n",
                pod.server.display()
            ))
            .await;
            return i32::from(Status::SetupFailed.exit_code());
        }
    };
    // The write-back and the output's checks, as `band exec` does them.
    let finished =
        tokio::task::spawn_blocking(move || pipeline::finish(prepared, result, started_at)).await;
    drop(adhoc);
    match finished {
        Ok(Ok(outcome)) => {
            if let Some(text) = explain(&outcome.result) {
                said(text).await;
            }
            let code = exit_code(&outcome.result);
            *kept = Some(outcome.result);
            code
        }
        Ok(Err(e)) => {
            said(format!("band: {e}\n")).await;
            i32::from(Status::SetupFailed.exit_code())
        }
        Err(e) => {
            said(format!("band: internal error: {e}\n")).await;
            i32::from(Status::SetupFailed.exit_code())
        }
    }
}

/// The pod's band over a client's request: `band ∩ pod` ([`band::policy::site::intersect`], the
/// layer labelled `pod`), or the refusal naming the pod band's file, line and rule. Nothing of
/// the request is trusted: its policy is whatever the client claims, so it is this policy that
/// must fit inside the pod's, whatever its bundle says (band-server checks the bundle against
/// its hash, not against this policy).
pub fn under_pod(pod_band: &SitePolicy, req: &RunRequest) -> Result<Policy, Box<RunResult>> {
    let layer = Layer {
        label: "pod".into(),
        prefix: String::new(),
        rules: &pod_band.rules,
        site: pod_band,
    };
    let kind = RunKind {
        exec: req.skill == band::client::adhoc::NAME && req.script == band::client::adhoc::NAME,
    };
    intersect(&req.policy, kind, DEFAULT_UNSIGNED_TIER, &[layer])
        .map(|i| i.policy)
        .map_err(|r| {
            Box::new(RunResult::setup_failed(
                &req.run_id,
                proto::Layer::new("pod"),
                format!("refused: {}", r.message),
                Some(r.hint),
            ))
        })
}

/// The request a client sent as the stdin of a `Start` of [`REQUEST_COMMAND`]: read up to its
/// end (`eof`), at most `max` bytes. `Err` is what the client is told: too large, cancelled, or
/// not a request; nothing has started then.
pub async fn read_request(
    max: u64,
    control: &mut mpsc::UnboundedReceiver<Control>,
) -> Result<RunRequest, Box<RunResult>> {
    let refused = |m: String, hint: Option<String>| {
        Err(Box::new(RunResult::setup_failed(
            "",
            proto::Layer::Protocol,
            m,
            hint,
        )))
    };
    let mut text = Vec::new();
    loop {
        match control.recv().await {
            Some(Control::Stdin(b)) => {
                if (text.len() + b.len()) as u64 > max {
                    return refused(
                        format!("the request is larger than {max} bytes"),
                        Some("the skill and workspace must fit in the pod's disk cap".into()),
                    );
                }
                text.extend(b);
            }
            Some(Control::Eof) => break,
            Some(Control::Signal(_)) | Some(Control::Cancel) | None => {
                let mut r = RunResult::setup_failed("", proto::Layer::Protocol, "", None);
                r.error = None;
                r.status = Status::Cancelled;
                return Err(Box::new(r));
            }
        }
    }
    // A request, bare or as band-server's protocol line. band-sandboxd says no `go`: a request
    // that asked to wait for one would never start.
    let unwaiting = |mut r: RunRequest| {
        r.start_on_go = false;
        Ok(r)
    };
    match serde_json::from_slice::<RunRequest>(&text) {
        Ok(r) => unwaiting(r),
        Err(e) => match serde_json::from_slice::<Message>(&text) {
            Ok(Message::Request(r)) => unwaiting(*r),
            _ => refused(
                format!("malformed request: {e}"),
                Some(format!(
                    "the stdin of `{REQUEST_COMMAND}` is one band run request (protocol {})",
                    proto::PROTOCOL_VERSION
                )),
            ),
        },
    }
}

/// Run the skill request the client sends on the process's stdin ([`read_request`]) under the
/// pod's band ([`under_pod`]), on the pod's workspace: the files the narrowed band admits are
/// read from it (whatever files the client put in the request are dropped), and what the run
/// writes is written back into it. Like [`execute`], the exit code and band's result.
pub async fn skill(
    pod: Arc<Pod>,
    id: i32,
    out: mpsc::Sender<Out>,
    mut control: mpsc::UnboundedReceiver<Control>,
) -> (i32, Option<RunResult>) {
    let said = |text: String| {
        let out = out.clone();
        async move {
            let _ = out.send(Out::Stderr(text.into_bytes())).await;
        }
    };
    let refuse = |r: RunResult| async {
        if let Some(text) = explain(&r) {
            said(text).await;
        }
        eprintln!(
            "band-sandboxd: process {id} (a skill) refused: {}",
            r.error.as_ref().map_or("", |e| e.message.as_str())
        );
        (exit_code(&r), Some(r))
    };
    let mut req = match read_request(pod.max_request, &mut control).await {
        Ok(r) => r,
        Err(r) => return refuse(*r).await,
    };
    // The run id names the run's cgroup, table and folders: the pod's own, never the client's
    // (two clients could send one id, or the id of a run under way).
    req.run_id = band::client::workspace::random_hex();
    let policy = match under_pod(&pod.ceiling, &req) {
        Ok(p) => p,
        Err(r) => return refuse(*r).await,
    };
    let files = {
        let pod = pod.clone();
        let policy = policy.clone();
        tokio::task::spawn_blocking(move || {
            let compiled =
                band::policy::CompiledPolicy::compile(&policy).map_err(|e| e.to_string())?;
            band::client::workspace::read_workspace(&pod.workspace, &compiled)
                .map_err(|e| e.to_string())
        })
        .await
    };
    let files = match files.map_err(|e| e.to_string()).and_then(|r| r) {
        Ok(f) => f,
        Err(e) => {
            return refuse(RunResult::setup_failed(
                &req.run_id,
                proto::Layer::Filesystem,
                format!("the pod's workspace: {e}"),
                None,
            ))
            .await;
        }
    };
    req.policy = policy;
    req.workspace = files.files;
    req.stdin = false;
    eprintln!(
        "band-sandboxd: process {id} is run {} (skill {}, script {})",
        req.run_id, req.skill, req.script
    );
    let mut result = match serve(&pod, req, &out, &mut control).await {
        Ok(r) => r,
        Err(e) => {
            said(format!(
                "band: band-server ({}): {e}\n",
                pod.server.display()
            ))
            .await;
            return (i32::from(Status::SetupFailed.exit_code()), None);
        }
    };
    let written = std::mem::take(&mut result.written);
    let folders = std::mem::take(&mut result.written_folders);
    if !written.is_empty() || !folders.is_empty() {
        let pod = pod.clone();
        let back = tokio::task::spawn_blocking(move || {
            band::client::workspace::write_back(&pod.workspace, &written, &folders)
                .map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r);
        if let Err(e) = back {
            said(format!(
                "band: the write-back into the pod's workspace: {e}\n"
            ))
            .await;
        }
    }
    if let Some(text) = explain(&result) {
        said(text).await;
    }
    let code = exit_code(&result);
    eprintln!(
        "band-sandboxd: process {id} (run {}) ended: {}, exit code {code}",
        result.run_id,
        result.status.as_str()
    );
    (code, Some(result))
}

fn line(msg: &Message) -> Vec<u8> {
    let mut l = serde_json::to_vec(msg).unwrap_or_default();
    l.push(b'\n');
    l
}

/// One request, served by the pod's warm band-server ([`super::warm`]) when one listens, else by
/// a `band-server run` child of its own (which then starts the warm server for the next runs).
/// Either way the request and `hold` go first, then what the client says, until the result.
async fn serve(
    pod: &Pod,
    request: proto::RunRequest,
    out: &mpsc::Sender<Out>,
    control: &mut mpsc::UnboundedReceiver<Control>,
) -> std::io::Result<RunResult> {
    let lines = [
        line(&Message::Request(Box::new(request.clone()))),
        line(&Message::Hold),
    ]
    .concat();
    if let Some(conn) = pod.warm.connect().await {
        let (from, to) = conn.into_split();
        // The shape line first: the server hands the connection to a spare of this shape.
        let first = [request.shape_line().into_bytes(), lines.clone()].concat();
        let x = exchange(&first, to, from, out, control).await;
        match x.result {
            Ok(Some(r)) => return Ok(r),
            // No byte came back and nothing of the client's was taken: no band-server read the
            // request (the server is stopping, or no longer serves these settings). A child of
            // its own serves it, without running it twice.
            _ if !x.got && !x.heard => {}
            Ok(None) => {
                return Err(std::io::Error::other(
                    "the warm band-server closed the connection without a result",
                ));
            }
            Err(e) => return Err(e),
        }
    }
    let mut child = tokio::process::Command::new(&pod.server)
        .arg("run")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let to = child
        .stdin
        .take()
        .ok_or_else(|| std::io::Error::other("no stdin"))?;
    let from = child
        .stdout
        .take()
        .ok_or_else(|| std::io::Error::other("no stdout"))?;
    let x = exchange(&lines, to, from, out, control).await;
    // band-server closes its output with the result, then tears the run down: waited for, so
    // that a run's end is its teardown's (a drain waits for no more).
    child.wait().await?;
    pod.warm.start().await;
    x.result?
        .ok_or_else(|| std::io::Error::other("band-server ended without a result"))
}

/// What [`exchange`] found.
struct Exchanged {
    /// The result, `None` when the stream ended without one.
    result: std::io::Result<Option<RunResult>>,
    /// Whether any byte came from band-server.
    got: bool,
    /// Whether anything the client said was taken from `control`.
    heard: bool,
}

/// Write `first` (the request, `hold`) to band-server on `to`, then what the client says as
/// protocol lines; read its events and result from `from`, until the result. Dropping `to`
/// (the client gone, or a cancel) closes band-server's input after `hold`: it cancels the run and
/// tears it down.
async fn exchange(
    first: &[u8],
    to: impl tokio::io::AsyncWrite + Unpin,
    from: impl tokio::io::AsyncRead + Unpin,
    out: &mpsc::Sender<Out>,
    control: &mut mpsc::UnboundedReceiver<Control>,
) -> Exchanged {
    let mut x = Exchanged {
        result: Ok(None),
        got: false,
        heard: false,
    };
    let mut to = Some(to);
    if let Some(w) = to.as_mut()
        && w.write_all(first).await.is_err()
    {
        // Judged by what is read: a band-server that refused before the request says why.
        to = None;
    }
    // `next_line` is cancel-safe in `select!` (what it has read of a line is kept).
    let mut lines = BufReader::new(from).lines();
    let mut listening = true;
    let b64 = base64::engine::general_purpose::STANDARD;
    loop {
        tokio::select! {
            next = lines.next_line() => {
                let text = match next {
                    Ok(None) => return x,
                    Ok(Some(t)) => t,
                    Err(e) => {
                        x.result = Err(e);
                        return x;
                    }
                };
                x.got = true;
                match serde_json::from_str::<Message>(&text) {
                    Ok(Message::Event(Event::Stdout { data })) => {
                        let _ = out.send(Out::Stdout(data.into_bytes())).await;
                    }
                    Ok(Message::Event(Event::Stderr { data })) => {
                        let _ = out.send(Out::Stderr(data.into_bytes())).await;
                    }
                    Ok(Message::Result(r)) => {
                        x.result = Ok(Some(*r));
                        return x;
                    }
                    // Blank lines (a warm server's first byte is one), other events.
                    _ => {}
                }
            },
            what = control.recv(), if listening => {
                x.heard |= what.is_some();
                let msgs = match what {
                    None => { listening = false; Vec::new() }
                    Some(Control::Stdin(bytes)) => bytes
                        .chunks(STDIN_CHUNK)
                        .map(|c| Message::Stdin { data: b64.encode(c), eof: false })
                        .collect(),
                    Some(Control::Eof) => vec![Message::Stdin { data: String::new(), eof: true }],
                    Some(Control::Signal(s)) => vec![Message::Signal { signal: s }],
                    Some(Control::Cancel) => {
                        // The input closed after `hold`: band-server cancels and tears down.
                        to = None;
                        listening = false;
                        Vec::new()
                    }
                };
                if let Some(w) = to.as_mut() {
                    for m in &msgs {
                        if w.write_all(&line(m)).await.is_err() {
                            break;
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_standard_path_of_the_command_becomes_its_name() {
        let v = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            normalize_argv(v(&["/bin/sh", "-c", "/bin/x"])),
            v(&["sh", "-c", "/bin/x"])
        );
        assert_eq!(normalize_argv(v(&["/usr/bin/env"])), v(&["env"]));
        assert_eq!(normalize_argv(v(&["/opt/x/sh"])), v(&["/opt/x/sh"]));
        assert_eq!(normalize_argv(v(&["/bin/a/b"])), v(&["/bin/a/b"]));
        assert_eq!(normalize_argv(v(&["sh"])), v(&["sh"]));
    }

    const POD: &str = "---\nband: pod\ndescription: d\nallow:\n  cli: [\"wc *\"]\n  read: [\"data/**\"]\ndeny:\n  read: [\"data/secret.txt\"]\nlimit:\n  maxPids: 8\n---\n";

    fn pod_band() -> SitePolicy {
        let t = tempfile::tempdir().unwrap();
        let file = t.path().join("BAND.md");
        fs_err::write(&file, POD).unwrap();
        let (resolved, diags) = band::skill::resolve_band_file(&file);
        let policy = resolved.unwrap_or_else(|| panic!("{diags:?}")).policy;
        SitePolicy::of_band("/pod/BAND.md", POD, &policy)
    }

    fn request(policy: serde_json::Value) -> RunRequest {
        serde_json::from_value(serde_json::json!({
            "protocol": 1, "run_id": "0123456789abcdef", "skill": "s", "script": "x",
            "entry": "scripts/x.sh", "bundle": [], "bundle_sha256": "00", "policy": policy,
            "input": {}
        }))
        .unwrap()
    }

    #[test]
    fn the_pods_band_is_a_ceiling_whose_denies_and_limits_join() {
        let pod = pod_band();
        let inside = request(serde_json::json!({
            "allow": {"cli": ["wc -w"], "read": ["data/**"]},
            "limits": {"maxPids": 100}
        }));
        let p = under_pod(&pod, &inside).unwrap();
        assert_eq!(p.allow, inside.policy.allow);
        assert_eq!(p.deny.read, vec!["data/secret.txt"]);
        assert_eq!(p.limits.max_pids, Some(8));
        for (wider, rule, line) in [
            (
                serde_json::json!({"allow": {"cli": ["id -u"]}}),
                "allow.cli `id -u`",
                5,
            ),
            (
                serde_json::json!({"allow": {"read": ["**"]}}),
                "allow.read `**`",
                6,
            ),
            (
                serde_json::json!({"allow": {"net": ["a.test:443"]}}),
                "allow.net `a.test:443`",
                4,
            ),
        ] {
            let r = under_pod(&pod, &request(wider)).unwrap_err();
            let e = r.error.unwrap();
            assert_eq!(e.layer.as_str(), "pod");
            assert!(
                e.message.starts_with(&format!(
                    "refused: the band's {rule} is refused by the pod policy's"
                )),
                "{}",
                e.message
            );
            assert!(
                e.message.ends_with(&format!("(/pod/BAND.md:{line})")),
                "{}",
                e.message
            );
        }
    }

    #[tokio::test]
    async fn a_request_is_read_to_its_end_within_its_cap() {
        let send = |parts: Vec<Control>| {
            let (tx, rx) = mpsc::unbounded_channel();
            for p in parts {
                tx.send(p).unwrap();
            }
            rx
        };
        let json = serde_json::to_vec(&request(serde_json::json!({}))).unwrap();
        let (a, b) = json.split_at(10);
        let mut rx = send(vec![
            Control::Stdin(a.to_vec()),
            Control::Stdin(b.to_vec()),
            Control::Eof,
        ]);
        assert_eq!(read_request(1 << 20, &mut rx).await.unwrap().skill, "s");
        // A request that would wait for a `go` band-sandboxd never says does not.
        let mut waiting = request(serde_json::json!({}));
        waiting.start_on_go = true;
        let mut rx = send(vec![
            Control::Stdin(serde_json::to_vec(&waiting).unwrap()),
            Control::Eof,
        ]);
        assert!(!read_request(1 << 20, &mut rx).await.unwrap().start_on_go);
        let mut rx = send(vec![Control::Stdin(json.clone()), Control::Eof]);
        let r = read_request(10, &mut rx).await.unwrap_err();
        assert!(r.error.unwrap().message.contains("larger than 10 bytes"));
        let mut rx = send(vec![Control::Stdin(b"{}".to_vec()), Control::Eof]);
        let r = read_request(1 << 20, &mut rx).await.unwrap_err();
        assert!(r.error.unwrap().message.starts_with("malformed request"));
        let mut rx = send(vec![Control::Stdin(b"{".to_vec()), Control::Cancel]);
        assert_eq!(
            read_request(1 << 20, &mut rx).await.unwrap_err().status,
            Status::Cancelled
        );
    }

    /// band-server's side of an [`exchange`] as a script: what it read before it answered, and
    /// the lines it answers with (then it closes).
    async fn exchanged(
        answer: String,
        said: Vec<Control>,
        read_first: bool,
    ) -> (Exchanged, Vec<Out>, String) {
        use tokio::io::AsyncReadExt;
        // A socket pair, split as the warm server's connection is: the write half shuts the
        // socket's writing down when dropped, which band-server reads as its input's end.
        let (ours, theirs) = tokio::net::UnixStream::pair().unwrap();
        let (from, to) = ours.into_split();
        let (mut their_in, mut their_out) = theirs.into_split();
        let (tx, mut control) = mpsc::unbounded_channel();
        for c in said {
            tx.send(c).unwrap();
        }
        let (out, mut outs) = mpsc::channel(16);
        let server = tokio::spawn(async move {
            let mut got = String::new();
            if read_first {
                // Everything band-sandboxd writes, to its end (its input closed).
                their_in.read_to_string(&mut got).await.unwrap();
            }
            their_out.write_all(answer.as_bytes()).await.unwrap();
            drop(their_out);
            got
        });
        let x = exchange(b"request\nhold\n", to, from, &out, &mut control).await;
        drop(out);
        let mut seen = Vec::new();
        while let Some(o) = outs.recv().await {
            seen.push(o);
        }
        (x, seen, server.await.unwrap())
    }

    #[tokio::test]
    async fn an_exchange_says_whether_band_server_answered_and_what_the_client_said() {
        let result = serde_json::to_string(&Message::Result(Box::new(RunResult::setup_failed(
            "r1",
            proto::Layer::Filesystem,
            "x",
            None,
        ))))
        .unwrap();
        // A connection closed unread (a warm server going): nothing came, nothing was taken,
        // so the run may go to a band-server of its own.
        let (x, _, _) = exchanged(String::new(), Vec::new(), false).await;
        // (Its end may read as a reset: the request was never read.)
        assert!(!x.got && !x.heard);
        assert!(!matches!(x.result, Ok(Some(_))));
        // A warm server's blank line, an event, the result.
        let event =
            serde_json::to_string(&Message::Event(Event::Stdout { data: "hi".into() })).unwrap();
        let answer = format!("\n{event}\n{result}\n");
        let (x, seen, _) = exchanged(answer.clone(), Vec::new(), false).await;
        assert!(x.got);
        assert_eq!(x.result.unwrap().unwrap().run_id, "r1");
        assert_eq!(seen, vec![Out::Stdout(b"hi".to_vec())]);
        // Stdin goes as a line after the request and `hold`; a cancel closes the input, which
        // band-server reads as the client gone. What was said is noted (no second band-server
        // may run it then).
        let (x, _, got) = exchanged(
            answer,
            vec![Control::Stdin(b"abc".to_vec()), Control::Cancel],
            true,
        )
        .await;
        assert!(x.heard);
        let stdin = line(&Message::Stdin {
            data: "YWJj".into(),
            eof: false,
        });
        assert_eq!(
            got,
            format!("request\nhold\n{}", String::from_utf8(stdin).unwrap())
        );
    }

    #[test]
    fn the_exit_code_is_the_scripts_own_or_bands_for_the_status() {
        let mut r = RunResult::setup_failed("r", band::proto::Layer::Process, "x", None);
        assert_eq!(exit_code(&r), i32::from(Status::SetupFailed.exit_code()));
        assert!(explain(&r).unwrap().starts_with("band: setup_failed: x"));
        r.status = Status::ScriptFailed;
        r.exit_code = Some(3);
        assert_eq!(exit_code(&r), 3);
        assert_eq!(explain(&r), None);
        r.status = Status::Cancelled;
        assert_eq!(exit_code(&r), 130);
    }
}
