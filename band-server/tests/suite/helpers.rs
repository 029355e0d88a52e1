//! Building requests and running the real band-server binary.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::Write;
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

/// `Some(reason)` when privileged tests cannot run here (not root, no bubblewrap).
pub(crate) fn unprivileged_reason() -> Option<String> {
    band_test::sandbox_missing()
}

/// Skip (return true) or, with `BAND_TEST_MUST_RUN=1`, panic.
pub(crate) fn skip(test: &str) -> bool {
    band_test::skip(test, unprivileged_reason())
}

macro_rules! privileged {
    () => {{
        fn f() {}
        let name = std::any::type_name_of_val(&f).trim_end_matches("::f");
        if $crate::suite::helpers::skip(name) {
            return;
        }
    }};
}
pub(crate) use privileged;

/// A random run id (16 lowercase hex).
pub(crate) fn run_id() -> String {
    let mut b = [0u8; 8];
    use std::io::Read;
    fs_err::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .unwrap_or_else(|e| panic!("{e}"));
    b.iter().map(|x| format!("{x:02x}")).collect()
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
    let mut child = Command::new(server())
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

pub(crate) fn finish(child: Child) -> Outcome {
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut events = Vec::new();
    let mut result = None;
    for line in text.lines() {
        match serde_json::from_str::<Message>(line) {
            Ok(Message::Event(e)) => events.push(e),
            Ok(Message::Result(r)) => result = Some(*r),
            Ok(Message::Request(_) | Message::Hold | Message::Cancel) => {
                panic!("server sent a client message")
            }
            Err(e) => panic!("bad line from band-server: {e}: {line}"),
        }
    }
    let server_stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let result = result
        .unwrap_or_else(|| panic!("no result line; stderr:\n{server_stderr}\nstdout:\n{text}"));
    Outcome {
        events,
        result,
        server_stderr,
        exit: out.status.code(),
    }
}

pub(crate) fn run(req: &RunRequest) -> Outcome {
    finish(spawn(req))
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
