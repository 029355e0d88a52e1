//! Building requests and running the real band-server binary.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::Write;
use std::ops::Range;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use band::policy::Policy;
use band::proto::{self, Event, FileEntry, Message, RunRequest, RunResult};
use band_server::request::{DecodedFile, bundle_sha256};
use base64::Engine;

/// All tests share one state directory: the uid pool is per state directory, and two pools on
/// one machine would hand out the same uids.
pub(crate) const STATE_DIR: &str = "/run/band-test";

pub(crate) fn server() -> &'static str {
    env!("CARGO_BIN_EXE_band-server")
}

/// The gate of privileged tests (not root, no bubblewrap): `privileged!()` first in a test.
pub(crate) use band_test::privileged;

/// A random run id (16 lowercase hex).
pub(crate) fn run_id() -> String {
    let mut b = [0u8; 8];
    use std::io::Read;
    fs_err::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .unwrap_or_else(|e| panic!("{e}"));
    hex::encode(b)
}

/// A skill directory on disk (tempdir), packed into a bundle like the client does.
pub(crate) struct SkillDir {
    pub(crate) dir: tempfile::TempDir,
}

impl SkillDir {
    pub(crate) fn new(files: &[(&str, u32, &str)]) -> SkillDir {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        for (path, mode, text) in files {
            let p = dir.path().join(path);
            if let Some(parent) = p.parent() {
                fs_err::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
            }
            fs_err::write(&p, text).unwrap_or_else(|e| panic!("{e}"));
            fs_err::set_permissions(&p, std::fs::Permissions::from_mode(*mode))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        SkillDir { dir }
    }

    /// Walk the directory (sorted) into bundle entries.
    pub(crate) fn pack(&self) -> Vec<FileEntry> {
        fn walk(root: &Path, rel: &str, out: &mut Vec<FileEntry>) {
            let dir = if rel.is_empty() {
                root.to_path_buf()
            } else {
                root.join(rel)
            };
            let mut names: Vec<String> = fs_err::read_dir(&dir)
                .unwrap_or_else(|e| panic!("{e}"))
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect();
            names.sort();
            for n in names {
                let r = if rel.is_empty() {
                    n.clone()
                } else {
                    format!("{rel}/{n}")
                };
                let p = root.join(&r);
                let m = fs_err::symlink_metadata(&p).unwrap_or_else(|e| panic!("{e}"));
                if m.is_dir() {
                    walk(root, &r, out);
                } else if m.is_file() {
                    let data = fs_err::read(&p).unwrap_or_else(|e| panic!("{e}"));
                    out.push(FileEntry {
                        path: r,
                        mode: m.permissions().mode() & 0o7777,
                        data: base64::engine::general_purpose::STANDARD.encode(data),
                    });
                }
            }
        }
        let mut out = Vec::new();
        walk(self.dir.path(), "", &mut out);
        out
    }
}

pub(crate) fn bundle_hash(bundle: &[FileEntry]) -> String {
    let decoded: Vec<DecodedFile> = bundle
        .iter()
        .map(|f| DecodedFile {
            path: f.path.clone(),
            mode: f.mode & 0o7777,
            data: base64::engine::general_purpose::STANDARD
                .decode(&f.data)
                .unwrap_or_default(),
        })
        .collect();
    bundle_sha256(&decoded)
}

pub(crate) fn file(path: &str, mode: u32, data: &[u8]) -> FileEntry {
    FileEntry {
        path: path.into(),
        mode,
        data: base64::engine::general_purpose::STANDARD.encode(data),
    }
}

/// A request running `script` (a bash script) as `run.sh`, with `policy`.
pub(crate) fn request(script: &str, policy: Policy) -> RunRequest {
    request_with(&[("run.sh", 0o755, script)], "run.sh", policy)
}

pub(crate) fn request_with(files: &[(&str, u32, &str)], entry: &str, policy: Policy) -> RunRequest {
    let skill = SkillDir::new(files);
    let bundle = skill.pack();
    RunRequest {
        protocol: proto::PROTOCOL_VERSION,
        run_id: run_id(),
        skill: "test".into(),
        script: entry.into(),
        entry: entry.into(),
        bundle_sha256: bundle_hash(&bundle),
        bundle,
        policy,
        input: serde_json::json!({"hello": "world"}),
        config: None,
        secrets: BTreeMap::new(),
        workspace: Vec::new(),
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

/// A traced request of the skill `skill` whose files are `bundle` (binary ones too), entry
/// `run.sh` (script `run`), with `policy` and an empty input.
pub(crate) fn bundle_request(skill: &str, bundle: Vec<FileEntry>, policy: Policy) -> RunRequest {
    RunRequest {
        protocol: proto::PROTOCOL_VERSION,
        run_id: run_id(),
        skill: skill.into(),
        script: "run".into(),
        entry: "run.sh".into(),
        bundle_sha256: bundle_hash(&bundle),
        bundle,
        policy,
        input: serde_json::json!({}),
        config: None,
        secrets: BTreeMap::new(),
        workspace: Vec::new(),
        trace: true,
        observe: false,
        args: Vec::new(),
        signed: None,
        narrowing: Vec::new(),
        stdin: false,
        start_on_go: false,
        workspace_folders: None,
    }
}

pub(crate) fn policy() -> Policy {
    Policy::default()
}

pub(crate) fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// What one band-server run printed.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub events: Vec<Event>,
    pub result: RunResult,
    pub server_stderr: String,
    pub exit: Option<i32>,
}

impl Outcome {
    pub(crate) fn stdout(&self) -> &str {
        &self.result.stdout
    }
    pub(crate) fn stderr(&self) -> &str {
        &self.result.stderr
    }
    /// Lines `key=value` printed by a probe script.
    pub(crate) fn kv(&self) -> BTreeMap<String, String> {
        self.result
            .stdout
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect()
    }
}

/// The value of `key` in a probe's [`Outcome::kv`], or `<missing key>` (which no assertion
/// expects).
pub(crate) fn value_of(kv: &BTreeMap<String, String>, key: &str) -> String {
    kv.get(key)
        .cloned()
        .unwrap_or_else(|| format!("<missing {key}>"))
}

pub(crate) fn spawn(req: &RunRequest) -> Child {
    spawn_line(&serde_json::to_string(&Message::Request(Box::new(req.clone()))).unwrap_or_default())
}

pub(crate) fn spawn_line(line: &str) -> Child {
    spawn_line_with_config(line, Path::new("/nonexistent/band-test/server.toml"))
}

/// Run band-server with a server config file (the network tests point its DNS at their lab).
pub(crate) fn spawn_with_config(req: &RunRequest, config: &Path) -> Child {
    spawn_line_with_config(
        &serde_json::to_string(&Message::Request(Box::new(req.clone()))).unwrap_or_default(),
        config,
    )
}

pub(crate) fn spawn_line_with_config(line: &str, config: &Path) -> Child {
    spawn_line_in(line, config, Path::new(STATE_DIR))
}

/// Run band-server with a config file and a state directory of the test's own.
pub(crate) fn spawn_line_in(line: &str, config: &Path, state_dir: &Path) -> Child {
    spawn_line_under(&[], line, config, state_dir)
}

/// [`spawn_line_in`], band-server started by `launcher` (a program and its arguments, before
/// band-server's path: `setarch -R`), or directly when it is empty.
pub(crate) fn spawn_line_under(
    launcher: &[&str],
    line: &str,
    config: &Path,
    state_dir: &Path,
) -> Child {
    let server = server();
    let mut argv: Vec<&std::ffi::OsStr> = launcher.iter().map(std::ffi::OsStr::new).collect();
    argv.push(std::ffi::OsStr::new(server));
    let mut child = Command::new(argv[0])
        .args(&argv[1..])
        .arg("run")
        .env(band_server::config::STATE_DIR_ENV, state_dir)
        .env(band_server::config::CONFIG_ENV, config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start band-server: {e}"));
    let mut stdin = child.stdin.take().unwrap_or_else(|| panic!("no stdin"));
    stdin
        .write_all(line.as_bytes())
        .unwrap_or_else(|e| panic!("{e}"));
    stdin.write_all(b"\n").unwrap_or_else(|e| panic!("{e}"));
    drop(stdin);
    child
}

/// How long a test's band-server may take: far above any run of the suite (the longest wait for
/// its own timeouts is seconds), so that a band-server that hangs fails its test, named, instead
/// of stalling the whole suite until CI gives up.
const SERVER_DEADLINE: std::time::Duration = std::time::Duration::from_secs(300);

fn deadline(child: &Child) -> std::sync::mpsc::Sender<()> {
    band_test::kill_after(child, SERVER_DEADLINE, "band-server")
}

pub(crate) fn finish(child: Child) -> Outcome {
    let _deadline = deadline(&child);
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    outcome(&out.stdout, &out.stderr, out.status)
}

/// Like [`finish`] of a run spawned after the marker `from` (see [`marker`]), and also the
/// window of start times `from..to` where `to` is a marker taken once band-server's output has
/// ended and before it exits: band-server stops every process of the run before it sends the
/// result and ends its output, and frees the run's uid only after (as it exits). So every process
/// of the run started in that window, while the run held the uid, and no later run's did.
pub(crate) fn finish_marked(mut child: Child, from: u64) -> (Outcome, Range<u64>) {
    use std::io::Read as _;
    let _deadline = deadline(&child);
    let mut stderr = child.stderr.take().unwrap_or_else(|| panic!("no stderr"));
    let errs = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stderr.read_to_end(&mut v);
        v
    });
    let mut stdout = Vec::new();
    child
        .stdout
        .take()
        .unwrap_or_else(|| panic!("no stdout"))
        .read_to_end(&mut stdout)
        .unwrap_or_else(|e| panic!("{e}"));
    let mark = marker();
    let status = child.wait().unwrap_or_else(|e| panic!("{e}"));
    let stderr = errs
        .join()
        .unwrap_or_else(|_| panic!("stderr reader panicked"));
    (outcome(&stdout, &stderr, status), from..mark)
}

/// [`run`] with [`finish_marked`]'s window.
pub(crate) fn run_marked(req: &RunRequest) -> (Outcome, Range<u64>) {
    let from = marker();
    finish_marked(spawn(req), from)
}

/// A band-server run whose stdout a thread reads as it comes, so that the test can wait for a
/// line the run prints (a positive sign that it is running) and still get the whole outcome.
pub(crate) struct Watched {
    pub(crate) child: Child,
    /// The run's stdout up to and with the first `Stdout` event that holds the needle.
    seen: std::sync::mpsc::Receiver<String>,
    stdout: std::thread::JoinHandle<Vec<u8>>,
}

/// [`spawn`] `req`, watching its stdout events for `needle`.
pub(crate) fn spawn_watching(req: &RunRequest, needle: &str) -> Watched {
    use std::io::BufRead as _;
    let mut child = spawn(req);
    let out = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let (tell, seen) = std::sync::mpsc::channel();
    let needle = needle.to_string();
    let stdout = std::thread::spawn(move || {
        let (mut all, mut printed, mut tell) = (Vec::new(), String::new(), Some(tell));
        for line in std::io::BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if let Ok(Message::Event(Event::Stdout { data })) = serde_json::from_str(&line) {
                printed.push_str(&data);
                if printed.contains(&needle)
                    && let Some(tell) = tell.take()
                {
                    let _ = tell.send(printed.clone());
                }
            }
            all.extend_from_slice(line.as_bytes());
            all.push(b'\n');
        }
        all
    });
    Watched {
        child,
        seen,
        stdout,
    }
}

impl Watched {
    /// Wait until the run has printed the needle; what it printed so far. Panics if its output
    /// ends first.
    pub(crate) fn printed(&self) -> String {
        let _deadline = deadline(&self.child);
        self.seen
            .recv()
            .unwrap_or_else(|_| panic!("the run's output ended before it printed the needle"))
    }

    /// Like [`finish`].
    pub(crate) fn finish(mut self) -> Outcome {
        use std::io::Read as _;
        let _deadline = deadline(&self.child);
        let mut stderr = Vec::new();
        let _ = self
            .child
            .stderr
            .take()
            .unwrap_or_else(|| panic!("no stderr"))
            .read_to_end(&mut stderr);
        let stdout = self
            .stdout
            .join()
            .unwrap_or_else(|_| panic!("stdout reader panicked"));
        let status = self.child.wait().unwrap_or_else(|e| panic!("{e}"));
        outcome(&stdout, &stderr, status)
    }
}

/// When a process started now starts, in clock ticks since boot: any process with an earlier
/// start time ([`start_time`]) started before this call.
pub(crate) fn marker() -> u64 {
    let mut m = Command::new("sleep")
        .arg("1000")
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start a marker process: {e}"));
    let t = start_time(m.id() as i32).unwrap_or_else(|| panic!("no start time of the marker"));
    let _ = m.kill();
    let _ = m.wait();
    t
}

fn outcome(stdout: &[u8], stderr: &[u8], status: std::process::ExitStatus) -> Outcome {
    let text = String::from_utf8_lossy(stdout);
    let mut events = Vec::new();
    let mut result = None;
    for line in text.lines() {
        match serde_json::from_str::<Message>(line) {
            Ok(Message::Event(e)) => events.push(e),
            Ok(Message::Result(r)) => result = Some(*r),
            Ok(
                Message::Request(_)
                | Message::Hold
                | Message::Cancel
                | Message::Go
                | Message::Stdin { .. }
                | Message::Signal { .. },
            ) => {
                panic!("server sent a client message")
            }
            Err(e) => panic!("bad line from band-server: {e}: {line}"),
        }
    }
    let server_stderr = String::from_utf8_lossy(stderr).into_owned();
    let result = result
        .unwrap_or_else(|| panic!("no result line; stderr:\n{server_stderr}\nstdout:\n{text}"));
    Outcome {
        events,
        result,
        server_stderr,
        exit: status.code(),
    }
}

pub(crate) fn run(req: &RunRequest) -> Outcome {
    finish(spawn(req))
}

/// `(pid, comm)` of every live (non-zombie) process that is the run `run_id`'s: in a cgroup named
/// after it, or of its `uid` and started within `window` (start times, see [`marker`]: from
/// before its server started to a moment while that server still held the uid, so any process
/// of the uid started then is the run's). Processes of runs that held the uid before or after it
/// are not listed: every band-server start may lease the uid as soon as a run's server frees it.
pub(crate) fn processes_of_run(uid: u32, run_id: &str, window: Range<u64>) -> Vec<(i32, String)> {
    use band_server::layers::identity::procs::{status_is_zombie, status_uids};
    let mut found = Vec::new();
    for e in fs_err::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let dir = e.path();
        let Ok(status) = fs_err::read_to_string(dir.join("status")) else {
            continue;
        };
        if status_is_zombie(&status) {
            continue;
        }
        let in_cgroup =
            fs_err::read_to_string(dir.join("cgroup")).is_ok_and(|c| c.contains(run_id));
        let of_uid = status_uids(&status).is_some_and(|u| u.contains(&uid));
        if in_cgroup || (of_uid && start_time(pid).is_some_and(|t| window.contains(&t))) {
            let comm = fs_err::read_to_string(dir.join("comm")).unwrap_or_default();
            found.push((pid, comm.trim().to_string()));
        }
    }
    found
}

/// When `pid` started, in clock ticks since boot (`/proc/<pid>/stat`, field 22).
pub(crate) fn start_time(pid: i32) -> Option<u64> {
    let stat = fs_err::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces): state is field 3.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// Does a lease of the shared state directory name `run_id`?
pub(crate) fn a_lease_names(run_id: &str) -> bool {
    fs_err::read_dir(band_server::layers::identity::uidpool::leases_dir(
        &state_dir(),
    ))
    .into_iter()
    .flatten()
    .flatten()
    .any(|e| fs_err::read_to_string(e.path()).is_ok_and(|t| t.contains(run_id)))
}

/// Wait (bounded) until no lease names `run_id`. A run's dead lease is cleaned by whichever
/// band-server of the state directory finds it first: every server's start cleans the dead leases
/// it finds, so another test's server may be the one removing the run's leftovers, and a
/// `band-server janitor` run meanwhile sees the slot locked and leaves it. The lease is cleared
/// once everything of the run is removed.
pub(crate) fn wait_until_no_lease_names(run_id: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while a_lease_names(run_id) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Pids whose real/effective/saved uid is `uid`.
pub(crate) fn pids_of_uid(uid: u32) -> Vec<i32> {
    band_server::layers::identity::procs::pids_of_uids(&std::collections::BTreeSet::from([uid]))
}

/// The uid of `band-run-N`.
pub(crate) fn uid_of(user: &str) -> Option<u32> {
    let passwd = fs_err::read_to_string("/etc/passwd").ok()?;
    band_server::layers::identity::uidpool::parse_passwd_entry(&passwd, user).map(|(u, _)| u)
}

pub(crate) fn state_dir() -> PathBuf {
    PathBuf::from(STATE_DIR)
}

/// `band-server janitor` over the suite's state directory, with `config` as its server config
/// (none: the server's default path); it must succeed.
pub(crate) fn run_janitor(config: Option<&Path>) -> std::process::Output {
    let mut cmd = Command::new(server());
    cmd.arg("janitor")
        .env(band_server::config::STATE_DIR_ENV, STATE_DIR);
    if let Some(config) = config {
        cmd.env(band_server::config::CONFIG_ENV, config);
    }
    let out = cmd.output().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A state directory of a test's own under `/run`, removed on drop with everything in it: the
/// program cache band-server mounts in it (a tmpfs) is unmounted first, or the directory would
/// stay behind, mounted.
pub(crate) struct OwnStateDir(tempfile::TempDir);

impl OwnStateDir {
    pub(crate) fn new(prefix: &str) -> OwnStateDir {
        OwnStateDir(
            tempfile::Builder::new()
                .prefix(prefix)
                .tempdir_in("/run")
                .unwrap_or_else(|e| panic!("{e}")),
        )
    }

    pub(crate) fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for OwnStateDir {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.0.path().join("exec"))
            .status();
    }
}

/// The `band_*` nftables tables of the host, as `nft -j list tables` lists them now.
pub(crate) fn band_tables() -> std::collections::BTreeSet<String> {
    let out = Command::new("nft")
        .args(["-j", "list", "tables"])
        .output()
        .unwrap_or_else(|e| panic!("nft: {e}"));
    band_server::layers::net::nft::parse_tables_json(&String::from_utf8_lossy(&out.stdout))
        .unwrap_or_default()
        .into_iter()
        .filter(|t| t.starts_with("band_"))
        .collect()
}
