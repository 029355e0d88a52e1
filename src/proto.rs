//! The wire protocol between `band` and `band-server`, and the exit-code table.
//!
//! Transport-agnostic: the same JSON travels over a local `sudo band-server` pipe (the `host`
//! target) and over an SSH exec channel (VM and `ssh://` targets).
//!
//! ```text
//! band  ──► one line: {"type":"request", ...RunRequest}           (stdin of band-server)
//! band  ◄── lines:    {"type":"event", ...}  (stdout/stderr chunks, cli calls, limits)
//! band  ──► optional: {"type":"hold"}     the client keeps this channel open while it waits:
//!                                          from now on EOF means it is gone (the run is cancelled)
//! band  ──► optional: {"type":"cancel"}   stop the run now (status `cancelled`)
//! band  ──► optional: {"type":"stdin","data":…} / {"type":"stdin","eof":true}
//!                                          the script's stdin (a request with `stdin`)
//! band  ──► optional: {"type":"signal","signal":15}   SIGINT, SIGKILL or SIGTERM to the run
//! band  ◄── one line: {"type":"result", ...RunResult}             (last line, then exit)
//! ```
//!
//! Every line is one JSON object. [`PROTOCOL_VERSION`] is checked by the server; a mismatch is a
//! `setup_failed` result naming both versions, never a best-effort run.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::policy::{Policy, spell};

/// Bumped on any incompatible change to the types below.
pub const PROTOCOL_VERSION: u32 = 1;

/// A file carried inside a request or result (skill bundle, workspace file, written file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Relative path, `/`-separated, no `..`, no leading `/`.
    pub path: String,
    /// Unix permission bits (only 0o7777 are read). A skill's file keeps them in the sandbox; a
    /// workspace file's and a written file's execute bits are not written back (a new file gets
    /// `0666` less the umask, an existing one keeps its mode: `client::workspace::WrittenBack`).
    pub mode: u32,
    /// Contents, base64 (standard alphabet, padded).
    pub data: String,
}

/// Everything band-server needs to run one script. Nothing is read from the client's disk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRequest {
    pub protocol: u32,
    /// Chosen by the client: 16 lowercase hex characters.
    pub run_id: String,
    pub skill: String,
    pub script: String,
    /// The entry point, relative to the skill root (e.g. `scripts/count.sh`).
    pub entry: String,
    /// The whole skill folder (read-only at `/skill` inside the sandbox).
    pub bundle: Vec<FileEntry>,
    /// SHA-256 (hex) of the bundle as computed by the client; the server recomputes it.
    pub bundle_sha256: String,
    pub policy: Policy,
    /// The validated input document (written to `$INPUT_PATH`).
    pub input: serde_json::Value,
    /// The band's config block (written to `$CONFIG_PATH` when present).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<serde_json::Value>,
    /// Secret values by name. Only names in `policy.secrets` are accepted.
    #[serde(default)]
    pub secrets: BTreeMap<String, String>,
    /// Workspace files matched by `allow.read` / `allow.write` (relative patterns).
    #[serde(default)]
    pub workspace: Vec<FileEntry>,
    /// Record every CLI call in the result (`band run --trace`).
    #[serde(default)]
    pub trace: bool,
    /// `band learn`: also record which workspace files the run read and wrote
    /// ([`RunResult::observed`]). Nothing else about the sandbox changes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub observe: bool,
    /// Words appended to the entry's command line: the `args` of an argv-style input schema
    /// (`band wrap`'s contracts for Agent Skills, see `band::contract::is_argv_schema`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// The skill's `band.lock` and `band.lock.sig`, when it is signed: band-server verifies the
    /// signature over the lock and the lock's bundle hash against the bundle, and takes the
    /// run's trust tier from the site policy's `keys:` (`sign::trust`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed: Option<SignedLock>,
    /// Layers narrower than the site policy that the run passes too, in order: the user's own
    /// (`~/.config/band/site.md`), then the caller's for its session (`$BAND_NARROW`). Each is a
    /// site policy file's text; band-server applies it as it applies its site's, and it can only
    /// narrow (`band::policy::site::parse_narrowing`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub narrowing: Vec<Narrowing>,
    /// The script's standard input is a pipe fed by the client's [`Message::Stdin`] lines
    /// (band-sandboxd's `WriteStdin`); without it, stdin is `/dev/null`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stdin: bool,
    /// The script starts only once the client says [`Message::Go`]: the client sends its request
    /// first and makes its ledger's `start` record durable while band-server prepares the run
    /// (band on the host). A client that goes away, or says `cancel`, before `go` leaves a run
    /// that never started. Without it, the script starts as soon as the run is ready.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub start_on_go: bool,
    /// The folders of the workspace, on the way to each folder a relative `allow.write` /
    /// `insist.write` pattern writes in (`policy::fs::write_dir`), that exist (empty or not),
    /// workspace-relative. band-server makes the run's copy of those folders and no other: a
    /// script that refuses to write into an existing folder finds none that the workspace does
    /// not have. `None` from a client that does not say: every such folder is made, as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_folders: Option<Vec<String>>,
}

/// The line a client of the host's warm band-server writes before its request: `shape <key>`,
/// [`RunRequest::shape_line`]. The warm server looks at it (without reading it) to hand the
/// connection to a spare sandbox of that shape; the child that serves the connection reads it.
pub const SHAPE_LINE_PREFIX: &str = "shape ";

/// The key of the shape line `bytes` begin with ([`RunRequest::shape_line`]), if they begin with
/// a whole one (its `\n` included).
pub fn shape_line_key(bytes: &[u8]) -> Option<&str> {
    let rest = bytes.strip_prefix(SHAPE_LINE_PREFIX.as_bytes())?;
    let end = rest.iter().position(|b| *b == b'\n')?;
    std::str::from_utf8(&rest[..end]).ok()
}

impl RunRequest {
    /// What a spare sandbox built after this request could serve again, as one SHA-256 (hex):
    /// the protocol, skill, script, entry, bundle digest, policy, config, `observe`, the
    /// narrowing layers, the signed lock and `stdin`. band-server's `spare::same_shape` still
    /// decides whether a spare serves a request; the key only routes it (a wrong one costs a
    /// spare, never a check).
    pub fn shape_key(&self) -> String {
        let shape = (
            self.protocol,
            &self.skill,
            &self.script,
            &self.entry,
            &self.bundle_sha256,
            &self.policy,
            &self.config,
            self.observe,
            &self.narrowing,
            &self.signed,
            self.stdin,
        );
        use sha2::Digest as _;
        let digest = sha2::Sha256::digest(serde_json::to_vec(&shape).unwrap_or_default());
        hex::encode(digest)
    }

    /// The shape line ([`SHAPE_LINE_PREFIX`]) of this request, with its `\n`.
    pub fn shape_line(&self) -> String {
        format!("{SHAPE_LINE_PREFIX}{}\n", self.shape_key())
    }
}

/// Why a run ended. Each status maps to one exit code of `band run` ([`Status::exit_code`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    ScriptFailed,
    Denied,
    Timeout,
    MemoryLimit,
    PidsLimit,
    OutputTooLarge,
    InputInvalid,
    OutputInvalid,
    InsistUnsatisfied,
    IntegrityFailed,
    SetupFailed,
    /// The run's client went away or asked to stop (Ctrl-C, SIGTERM, a closed connection, an
    /// MCP `notifications/cancelled`): band-server killed the run and tore it down.
    Cancelled,
}

impl Status {
    pub const ALL: [Status; 13] = [
        Status::Ok,
        Status::ScriptFailed,
        Status::InputInvalid,
        Status::OutputInvalid,
        Status::Denied,
        Status::InsistUnsatisfied,
        Status::IntegrityFailed,
        Status::SetupFailed,
        Status::OutputTooLarge,
        Status::MemoryLimit,
        Status::PidsLimit,
        Status::Timeout,
        Status::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::ScriptFailed => "script_failed",
            Status::Denied => "denied",
            Status::Timeout => "timeout",
            Status::MemoryLimit => "memory_limit",
            Status::PidsLimit => "pids_limit",
            Status::OutputTooLarge => "output_too_large",
            Status::InputInvalid => "input_invalid",
            Status::OutputInvalid => "output_invalid",
            Status::InsistUnsatisfied => "insist_unsatisfied",
            Status::IntegrityFailed => "integrity_failed",
            Status::SetupFailed => "setup_failed",
            Status::Cancelled => "cancelled",
        }
    }

    /// The exit code of `band run` for this status. Published; never renumbered.
    pub fn exit_code(self) -> u8 {
        match self {
            Status::Ok => exit::OK,
            Status::ScriptFailed => exit::SCRIPT_FAILED,
            Status::InputInvalid => exit::INPUT_INVALID,
            Status::OutputInvalid => exit::OUTPUT_INVALID,
            Status::Denied => exit::DENIED,
            Status::InsistUnsatisfied => exit::INSIST_UNSATISFIED,
            Status::IntegrityFailed => exit::INTEGRITY_FAILED,
            Status::SetupFailed => exit::SETUP_FAILED,
            Status::OutputTooLarge => exit::OUTPUT_TOO_LARGE,
            Status::MemoryLimit => exit::MEMORY_LIMIT,
            Status::PidsLimit => exit::PIDS_LIMIT,
            Status::Timeout => exit::TIMEOUT,
            Status::Cancelled => exit::CANCELLED,
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Status::Ok => "the script succeeded and its output matched the contract",
            Status::ScriptFailed => "the script exited non-zero",
            Status::InputInvalid => {
                "the input did not match the script's input schema, or was too large"
            }
            Status::OutputInvalid => "the output did not match the script's output schema",
            Status::Denied => "the script failed after the policy denied a command, host or path",
            Status::InsistUnsatisfied => "the script never did something its band insists on",
            Status::IntegrityFailed => "the skill bundle does not match its band.lock",
            Status::SetupFailed => "a sandbox layer could not be set up, so the run did not start",
            Status::OutputTooLarge => "output.json or stdout output exceeded maxOutputBytes",
            Status::MemoryLimit => "the run hit maxMemoryBytes and was killed",
            Status::PidsLimit => "the run hit maxPids (fork bomb or runaway processes)",
            Status::Timeout => "the run exceeded maxRuntimeMs and was killed",
            Status::Cancelled => {
                "the run was cancelled (interrupted, or its client went away) and was killed"
            }
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The exit codes of every `band` command, in one table (also in `band --help` and docs).
pub mod exit {
    pub const OK: u8 = 0;
    /// `band run`: the script exited non-zero. `band lint`, `band doctor`: problems were found.
    pub const SCRIPT_FAILED: u8 = 1;
    /// Bad command line, or an internal error before anything ran.
    pub const USAGE: u8 = 2;
    pub const INPUT_INVALID: u8 = 3;
    pub const OUTPUT_INVALID: u8 = 4;
    pub const DENIED: u8 = 5;
    pub const INSIST_UNSATISFIED: u8 = 6;
    pub const INTEGRITY_FAILED: u8 = 7;
    pub const SETUP_FAILED: u8 = 8;
    pub const OUTPUT_TOO_LARGE: u8 = 9;
    pub const MEMORY_LIMIT: u8 = 10;
    pub const PIDS_LIMIT: u8 = 11;
    /// As coreutils `timeout`.
    pub const TIMEOUT: u8 = 124;
    /// The run was cancelled (Ctrl-C, SIGTERM, its client went away): 128 + SIGINT, as a shell
    /// reports an interrupted command.
    pub const CANCELLED: u8 = 130;
}

/// Where a run failed, named in `setup_failed` errors so the user knows which layer broke: one of
/// the names below, or a layer's own (band-server's layers name themselves; a client shows a name
/// it does not know as it is). On the wire, its name: lowercase letters, digits and `_`, at most
/// [`Layer::MAX_LEN`] bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct Layer(std::borrow::Cow<'static, str>);

/// The layers every band knows, under the names they have always had in code.
#[allow(non_upper_case_globals)]
impl Layer {
    pub const Protocol: Layer = Layer::new("protocol");
    pub const Integrity: Layer = Layer::new("integrity");
    pub const Identity: Layer = Layer::new("identity");
    pub const Filesystem: Layer = Layer::new("filesystem");
    pub const Cli: Layer = Layer::new("cli");
    pub const Network: Layer = Layer::new("network");
    pub const Seccomp: Layer = Layer::new("seccomp");
    pub const Cgroup: Layer = Layer::new("cgroup");
    pub const Limits: Layer = Layer::new("limits");
    pub const Secrets: Layer = Layer::new("secrets");
    pub const Io: Layer = Layer::new("io");
    pub const Process: Layer = Layer::new("process");
}

impl Layer {
    /// The longest name a layer has on the wire.
    pub const MAX_LEN: usize = 32;

    /// A layer named `name` (a layer of band-server's own; see [`Layer::is_name`], which a
    /// name read from the wire must pass).
    pub const fn new(name: &'static str) -> Layer {
        Layer(std::borrow::Cow::Borrowed(name))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Every layer the names above give.
    pub const KNOWN: [Layer; 12] = [
        Layer::Protocol,
        Layer::Integrity,
        Layer::Identity,
        Layer::Filesystem,
        Layer::Cli,
        Layer::Network,
        Layer::Seccomp,
        Layer::Cgroup,
        Layer::Limits,
        Layer::Secrets,
        Layer::Io,
        Layer::Process,
    ];

    /// The layer of [`Layer::KNOWN`] named `name`, if any.
    pub fn known(name: &str) -> Option<Layer> {
        Layer::KNOWN.into_iter().find(|l| l.as_str() == name)
    }

    /// Whether `name` can name a layer: 1 to [`Layer::MAX_LEN`] bytes of `a-z`, `0-9`, `_`.
    pub fn is_name(name: &str) -> bool {
        (1..=Layer::MAX_LEN).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    }
}

impl<'de> Deserialize<'de> for Layer {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Layer, D::Error> {
        let name = String::deserialize(d)?;
        if !Layer::is_name(&name) {
            return Err(serde::de::Error::custom(format!(
                "a layer is named by 1 to {} of a-z, 0-9 and _",
                Layer::MAX_LEN
            )));
        }
        Ok(Layer(std::borrow::Cow::Owned(name)))
    }
}

/// What a run request carries of a signed skill: `band.lock` and `band.lock.sig`, as text
/// (`crate::sign` makes and checks them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedLock {
    pub lock: String,
    pub sig: String,
}

/// A layer narrower than the site policy, as a run request carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Narrowing {
    /// Whose layer: `user` or `session` ([`Narrowing::LABELS`]).
    pub label: String,
    /// Where it was read, for messages (`/home/alice/.config/band/site.md`).
    pub source: String,
    /// The file's text, in the site policy format.
    pub text: String,
}

impl Narrowing {
    /// The layers a request may carry, in the order they apply.
    pub const LABELS: [&'static str; 2] = ["user", "session"];
}

/// The trust of a run: its tier, and who signed the skill (if anyone did).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trust {
    pub tier: String,
    /// `alice@example.com (SHA256:…)` for a signer the site knows, the bare fingerprint for
    /// one it does not; `None` when the skill is not signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signer: Option<String>,
}

/// An error across the wire: which layer, what happened, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorInfo {
    pub layer: Layer,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// Something the policy refused during the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Denial {
    Cli {
        argv: Vec<String>,
        rule: Option<String>,
        /// How band learned of the call, when not from band-shim's own request.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<CallSource>,
    },
    Net {
        host: String,
        port: Option<u16>,
        rule: Option<String>,
    },
    Dns {
        name: String,
    },
    Write {
        path: String,
        rule: Option<String>,
        /// Why band itself did not write it back, when no rule decided: the workspace has a
        /// symlink or a folder on its path, or the write failed (`band`'s write-back,
        /// `client::workspace::write_back`). No rule can allow such a write.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// An HTTP request band-server's egress proxy refused (an HTTP 403 to the run): no
    /// `allow.net` rule admits its method and path (`rule`: the deny rule of its host, if one
    /// decided).
    Http {
        method: String,
        host: String,
        port: u16,
        https: bool,
        /// The request's path, without its query string.
        path: String,
        rule: Option<String>,
    },
    /// A bound secret's placeholder on its way where band does not put the value (another host,
    /// a query string, a body, a DNS name): the request was refused. Never the value.
    Secret {
        name: String,
        /// The destination: a host (`api.example.com:443`) or `DNS`.
        to: String,
        /// Where in the request: `header Authorization`, `query string`, `body`, `DNS name`.
        place: String,
    },
}

impl Denial {
    /// The layer that refused.
    pub fn layer(&self) -> Layer {
        match self {
            Denial::Cli { .. } => Layer::Cli,
            Denial::Net { .. } | Denial::Dns { .. } | Denial::Http { .. } => Layer::Network,
            Denial::Write { .. } => Layer::Filesystem,
            Denial::Secret { .. } => Layer::Secrets,
        }
    }

    /// A file band's write-back did not write (see `Denial::Write::reason`): known only once the
    /// run is over, after its events.
    pub fn refused_by_write_back(&self) -> bool {
        matches!(
            self,
            Denial::Write {
                reason: Some(_),
                ..
            }
        )
    }

    /// The deny rule that decided, if one did (else no allow rule matched).
    pub fn deciding_rule(&self) -> Option<&str> {
        match self {
            Denial::Cli { rule, .. }
            | Denial::Net { rule, .. }
            | Denial::Write { rule, .. }
            | Denial::Http { rule, .. } => rule.as_deref(),
            Denial::Dns { .. } | Denial::Secret { .. } => None,
        }
    }

    /// The smallest rule that would allow what was tried, as `(key, pattern)`:
    /// `("allow.cli", "jq -r .a x.json")`, `("allow.net", "api.example.com:443")`,
    /// `("allow.write", "out/r.md")`. `None` when no pattern can spell it. (A deny rule that
    /// decided still wins over it: see [`Denial::deciding_rule`].)
    pub fn smallest_rule(&self) -> Option<(&'static str, String)> {
        match self {
            Denial::Cli { argv, source, .. } => {
                CallSource::cli_rule(*source, argv).map(|r| ("allow.cli", r))
            }
            // Only the one host or address refused, never a pattern built from what the run
            // asked for (a lookup of `*` suggests no `allow.net "*"`).
            Denial::Net { host, port, .. } => {
                spell::literal_net_rule(host, *port).map(|r| ("allow.net", r))
            }
            Denial::Dns { name } => spell::literal_net_rule(name, None).map(|r| ("allow.net", r)),
            Denial::Write {
                reason: Some(_), ..
            } => None,
            Denial::Write { path, .. } => spell::exact_write_rule(path).map(|r| ("allow.write", r)),
            Denial::Http {
                method,
                host,
                port,
                https,
                path,
                ..
            } => Some((
                "allow.net",
                crate::policy::http::suggest(method, *https, host, Some(*port), path),
            )),
            // No rule sends a bound secret's value anywhere but in headers to its hosts.
            Denial::Secret { .. } => None,
        }
    }

    /// What was tried, in words, for the refusals the proxy reports: `request GET
    /// https://api.example.com/gists`, `placeholder of API_TOKEN in the query string to
    /// evil.example:443`.
    pub fn what(&self) -> String {
        match self {
            Denial::Http {
                method,
                host,
                port,
                https,
                path,
                ..
            } => {
                let (scheme, default) = if *https { ("https", 443) } else { ("http", 80) };
                let port = if *port == default {
                    String::new()
                } else {
                    format!(":{port}")
                };
                format!("request {method} {scheme}://{host}{port}{path}")
            }
            Denial::Secret { name, to, place } => {
                format!("placeholder of {name} in the {place} to {to}")
            }
            Denial::Cli { argv, .. } => format!("command {}", argv.join(" ")),
            Denial::Net { host, port, .. } => {
                format!(
                    "host {host}{}",
                    port.map(|p| format!(":{p}")).unwrap_or_default()
                )
            }
            Denial::Dns { name } => format!("DNS name {name}"),
            Denial::Write { path, .. } => format!("write to {path}"),
        }
    }

    /// The rule that decided and how to allow it, in words: `no allow.cli rule matches; to allow
    /// it: allow.cli "jq ."`, or `deny.cli "rm *" decided (a deny wins over any allow)`.
    pub fn explain(&self) -> String {
        let key = match self {
            Denial::Cli { .. } => "cli",
            Denial::Net { .. } | Denial::Dns { .. } | Denial::Http { .. } => "net",
            Denial::Write { .. } => "write",
            Denial::Secret { name, .. } => {
                return format!(
                    "band puts the value of {name} only into request headers to the hosts env.secrets binds it to; the placeholder goes nowhere else"
                );
            }
        };
        let said = match self {
            Denial::Cli {
                source: Some(s), ..
            } => format!(" ({})", s.says()),
            _ => String::new(),
        };
        if let Denial::Write {
            reason: Some(why), ..
        } = self
        {
            return why.clone();
        }
        if let Some(rule) = self.deciding_rule() {
            return format!("deny.{key} {rule:?} decided (a deny wins over any allow){said}");
        }
        if let Denial::Write { path, .. } = self
            && let Some(why) = never_written_back(path)
        {
            return why.to_string();
        }
        match self.smallest_rule() {
            Some((k, r)) => {
                format!("no allow.{key} rule matches; to allow it: {k} {r:?}{said}")
            }
            None => format!("no allow.{key} rule matches{said}"),
        }
    }
}

/// Why a refused write at `path` can be allowed by no rule, if so: anything under a folder named
/// `.git`, and a name that is not UTF-8 (band-server names it escaped, `\xff`).
fn never_written_back(path: &str) -> Option<&'static str> {
    if path.split('/').any(|c| c == ".git") {
        return Some(
            "nothing under `.git` is written back: a repository is read-only to the script",
        );
    }
    let b = path.as_bytes();
    let escaped = b.windows(4).any(|w| {
        w[0] == b'\\' && w[1] == b'x' && w[2].is_ascii_hexdigit() && w[3].is_ascii_hexdigit()
    });
    escaped
        .then_some("a file name that is not UTF-8 is never written back (shown escaped): rename it")
}

/// One CLI call seen by the wrapper shim (reported over a channel the script cannot forge).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CliCall {
    pub argv: Vec<String>,
    pub allowed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// How band learned of the call, when not from band-shim's own request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<CallSource>,
}

impl CliCall {
    /// The most bytes of a call's argv kept on record (events, the result, the ledger): a gated
    /// call may be judged on up to 1 MiB of arguments, and a run makes up to 10,000 of them, so
    /// that a record kept whole could reach gigabytes (red team, round 6: one run wrote a 192 MB
    /// ledger record). The judgement saw the whole argv; the record keeps its start.
    pub const MAX_RECORDED_ARGV: usize = 4096;

    /// This call as it is kept on record: its argv's first [`Self::MAX_RECORDED_ARGV`] bytes,
    /// a word cut there ending in `…[N bytes]` (its whole length), the words after it as one
    /// `…[N more words]`.
    pub fn recorded(mut self) -> Self {
        let total: usize = self.argv.iter().map(String::len).sum();
        if total <= Self::MAX_RECORDED_ARGV {
            return self;
        }
        let mut budget = Self::MAX_RECORDED_ARGV;
        let mut kept = Vec::new();
        let words = self.argv.len();
        for (i, w) in self.argv.into_iter().enumerate() {
            if w.len() <= budget {
                budget -= w.len();
                kept.push(w);
                continue;
            }
            let mut cut = budget;
            while !w.is_char_boundary(cut) {
                cut -= 1;
            }
            kept.push(format!("{}…[{} bytes]", &w[..cut], w.len()));
            if words > i + 1 {
                kept.push(format!("…[{} more words]", words - i - 1));
            }
            break;
        }
        self.argv = kept;
        self
    }

    /// The denial this refused call is on record as.
    pub fn denial(&self) -> Denial {
        Denial::Cli {
            argv: self.argv.clone(),
            rule: self.rule.clone(),
            source: self.source,
        }
    }
}

/// How band-server learned of a call that never reached band-shim (a command the sandbox does
/// not have), when its argv is not the whole call. Absent: band-shim's request (or bash's
/// not-found hook, or a launcher's command line read whole), the call exactly as tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallSource {
    /// Read from a "not found" message on the script's stderr: a shell's own (dash, busybox ash,
    /// zsh, mksh, posh; bash's for an absolute path), Python's `FileNotFoundError` from
    /// `subprocess`, Node's `spawn … ENOENT`. Only the command is known, not its arguments, so
    /// the rule that would allow it is `<command> *`. A script can print such a line itself:
    /// that adds a report line, never a permission.
    NotFoundMessage,
    /// The command line of `find -exec`/`-execdir`/`-ok` or `xargs -I {}`: each word with `{}` in
    /// it is filled in per file, so it is `*` in the rule.
    Filled,
    /// The command line of `xargs`, which appends words from its input (and fills `{}` words):
    /// the rule ends in `*`.
    Appended,
}

impl CallSource {
    /// What the report says about where the call was seen.
    pub fn says(self) -> &'static str {
        match self {
            CallSource::NotFoundMessage => {
                "read from a \"not found\" message on its stderr: its arguments are unknown"
            }
            CallSource::Filled => "the command line find -exec or xargs -I fills in",
            CallSource::Appended => "the command line xargs appends its input to",
        }
    }

    /// The smallest `allow.cli` rule that allows a call reported as `argv` from `source`.
    pub fn cli_rule(source: Option<CallSource>, argv: &[String]) -> Option<String> {
        match source {
            None => spell::exact_cli_rule(argv),
            Some(CallSource::NotFoundMessage) => {
                spell::template_cli_rule(&argv[..1.min(argv.len())], true)
            }
            Some(CallSource::Filled) => spell::template_cli_rule(argv, false),
            Some(CallSource::Appended) => spell::template_cli_rule(argv, true),
        }
    }
}

/// Streamed while the run is under way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The sandbox is built and the script is starting.
    Started {
        run_id: String,
        setup_ms: u64,
    },
    Stdout {
        data: String,
    },
    Stderr {
        data: String,
    },
    Cli(CliCall),
    Denied(Denial),
    /// A limit was hit (`memory`, `pids`, `runtime`, `log`, `output`, `disk`).
    Limit {
        limit: String,
        detail: String,
    },
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    pub setup_ms: u64,
    pub run_ms: u64,
    pub teardown_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_memory_bytes: Option<u64>,
    pub input_bytes: u64,
    pub output_bytes: u64,
}

/// The last line from band-server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub run_id: String,
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// output.json (or stdout) parsed as JSON; validated against the contract by the client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<serde_json::Value>,
    #[serde(default)]
    pub stdout: String,
    #[serde(default)]
    pub stderr: String,
    #[serde(default)]
    pub stdout_truncated: bool,
    #[serde(default)]
    pub stderr_truncated: bool,
    /// Files the script wrote under `allow.write`, for the client to copy back.
    #[serde(default)]
    pub written: Vec<FileEntry>,
    /// Folders the script made that hold nothing after the run and that `allow.write` admits,
    /// workspace-relative (`projects/demo/episode-01/audio`), for the client to make (a folder
    /// that holds a file comes back with it, in `written`). One it does not admit is a refused
    /// write, named with a trailing `/`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub written_folders: Vec<String>,
    #[serde(default)]
    pub denied: Vec<Denial>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cli_calls: Vec<CliCall>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub insist_missing: Vec<String>,
    #[serde(default)]
    pub metrics: Metrics,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
    /// What a run with `allow.net` resolved, reached and was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkReport>,
    /// For a request with `observe` (`band learn`): the workspace files the run read and wrote,
    /// as the kernel saw them. `None` from a band-server that does not observe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed: Option<Observed>,
    /// Requests on the CLI gate's report socket that came from no genuine band-shim (a forged
    /// report: another program of the run, or one that inherited the socket), each refused.
    /// `None` when there were none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forged: Option<Forged>,
    /// SHA-256 of the resolved lock the script's Python environment was built from, when its
    /// files declare packages (`deps`; docs/dependencies.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deps_sha256: Option<String>,
    /// The run's trust tier and signer, as band-server's site policy decided them (absent when
    /// band-server has no site policy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust: Option<Trust>,
    /// Commands the band allows that the host band-server ran on does not have: the run went
    /// without them (one of several alternatives, `python *` and `python3 *`, is the usual case).
    /// Told by the client after the run, not mixed into the script's stderr.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_commands: Vec<MissingCommand>,
    /// For a run that reached `maxRuntimeMs`: the TCP addresses it was still listening on when it
    /// was killed (`127.0.0.1:8765`, `[::]:3000`), band's own listeners in the run left out. A run
    /// takes no inbound connections, so a server a script starts is never reached from outside
    /// (docs/network.md, "A server inside a run"). Empty otherwise, and when they could not be
    /// read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listening: Vec<String>,
}

/// An allowed command that is not installed where the run ran, and the `allow.cli` rules that
/// name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MissingCommand {
    pub name: String,
    pub rules: Vec<String>,
}

impl MissingCommand {
    /// `` `python` (allow.cli `python *`) ``: how a note names it.
    pub fn describe(&self) -> String {
        let rules: Vec<String> = self.rules.iter().map(|r| format!("`{r}`")).collect();
        format!("`{}` (allow.cli {})", self.name, rules.join(", "))
    }
}

/// The forged requests the CLI gate refused in one run: how many, and why the first few were
/// not a genuine band-shim's (band-server's words about the peer, at most [`Forged::MAX_REASONS`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Forged {
    pub count: u64,
    #[serde(default)]
    pub reasons: Vec<String>,
}

impl Forged {
    /// The most reasons a record keeps (the count is always whole).
    pub const MAX_REASONS: usize = 5;
}

/// The workspace files an observed run opened and the folders it listed (`band learn`),
/// workspace-relative.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observed {
    /// Opened or read, never written.
    pub reads: Vec<String>,
    /// Written (or opened for writing).
    pub writes: Vec<String>,
    /// `false` when the kernel's event queue overflowed, or the run touched more paths than
    /// band-server keeps: some files or folders may be missing.
    pub complete: bool,
    /// Paths outside the workspace the run opened or ran (or tried to), as the sandbox named them,
    /// in the order first seen; each (path, access) once. Seen by a seccomp filter that hands
    /// every open and exec to band-server before it runs (user notification).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outside: Vec<PathSeen>,
    /// Workspace folders the run listed (read the entries of: `ls`, a glob, `os.walk`,
    /// `readdir`), workspace-relative, `.` for the workspace root (first when listed), each
    /// once. Opening a folder without reading its entries (`mkdir -p`) is not a listing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listed: Vec<String>,
}

/// One path outside the workspace an observed run opened or ran, or tried to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PathSeen {
    /// Absolute, as the sandbox names it (relative names resolved against the caller's working
    /// directory or directory descriptor).
    pub path: String,
    pub access: Access,
    /// Whether the path existed in the sandbox when the call was made (`false`: the call failed
    /// with ENOENT, the sandbox does not show it).
    pub in_sandbox: bool,
    /// Whether the same path exists on band-server's host (where a rule would bind it from).
    pub on_host: bool,
}

/// How a path was used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    Read,
    Write,
    Exec,
}

/// The network side of a run, from the DNS stub's records and the kernel's sets.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkReport {
    /// Every distinct DNS question, in order, up to band-server's bound (10,000; a repeat is
    /// merged into the one kept).
    pub lookups: Vec<DnsLookup>,
    /// Distinct questions past that bound: counted, not kept.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lookups_dropped: u64,
    /// Destinations the run reached.
    pub contacted: Vec<NetFlow>,
    /// Destinations the run was refused.
    pub denied: Vec<NetFlow>,
    /// The requests the egress proxy passed on in an observing run (`band learn --net`), each
    /// once, for drafting HTTP rules; empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<HttpSeen>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A request the egress proxy saw (method, host, port, scheme, path without the query).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct HttpSeen {
    pub method: String,
    pub host: String,
    pub port: u16,
    pub https: bool,
    pub path: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DnsLookup {
    pub name: String,
    pub qtype: String,
    pub allowed: bool,
    /// Addresses handed to the script.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addrs: Vec<String>,
    /// Addresses upstream answered that were withheld (private, this host, denied).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub withheld: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetFlow {
    pub addr: String,
    pub proto: String,
    pub port: u16,
    /// Names the stub resolved to this address.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
}

impl RunResult {
    /// Why a run that timed out while listening waited ([`RunResult::listening`]): the text of
    /// the hint `band run`, `band mcp` and the sandboxd client give. `None` when it listened on
    /// nothing.
    pub fn listening_hint(&self) -> Option<String> {
        (!self.listening.is_empty()).then(|| {
            format!(
                "the script was still listening on {} when it timed out; a run takes no inbound connections, so nothing outside the run can reach a server a skill starts (docs/network.md, \"A server inside a run\")",
                self.listening.join(", ")
            )
        })
    }

    /// A result for a run that never started.
    pub fn setup_failed(
        run_id: &str,
        layer: Layer,
        message: impl Into<String>,
        hint: Option<String>,
    ) -> Self {
        RunResult {
            run_id: run_id.to_string(),
            status: Status::SetupFailed,
            exit_code: None,
            output: None,
            stdout: String::new(),
            stderr: String::new(),
            stdout_truncated: false,
            stderr_truncated: false,
            written: Vec::new(),
            written_folders: Vec::new(),
            denied: Vec::new(),
            cli_calls: Vec::new(),
            insist_missing: Vec::new(),
            metrics: Metrics::default(),
            error: Some(ErrorInfo {
                layer,
                message: message.into(),
                hint,
            }),
            network: None,
            observed: None,
            forged: None,
            deps_sha256: None,
            trust: None,
            missing_commands: Vec::new(),
            listening: Vec::new(),
        }
    }
}

/// One line on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Message {
    Request(Box<RunRequest>),
    Event(Event),
    Result(Box<RunResult>),
    /// Client → server, after the request: the client holds its end of the channel open until
    /// the result comes, so an end of input from now on means it is gone and the run is
    /// cancelled. (Without it, a client may close its end right after the request.)
    Hold,
    /// Client → server: cancel the run (status [`Status::Cancelled`]).
    Cancel,
    /// Client → server, for a request with `start_on_go`: the script may start (the client's
    /// record of the run is on its disk).
    Go,
    /// Client → server, for a request with `stdin`: bytes for the script's standard input
    /// (base64), or its end (`eof`).
    Stdin {
        #[serde(default)]
        data: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        eof: bool,
    },
    /// Client → server: send this signal (2 SIGINT, 9 SIGKILL, 15 SIGTERM) to the script and
    /// every process it started (the run's cgroup but bubblewrap). Other numbers are ignored.
    Signal {
        signal: i32,
    },
}

/// Environment variable names band uses, in one place.
pub mod env {
    /// Where to find skills (colon-separated), after `--skills`.
    pub const SKILLS_PATH: &str = "BAND_SKILLS_PATH";
    /// Path to the band-server binary for the host target.
    pub const SERVER: &str = "BAND_SERVER";
    /// Data directory (ledger, VM images), instead of `~/.local/share/band`.
    pub const DATA_DIR: &str = "BAND_DATA_DIR";
    /// `0` or `1`: whether runs on the host target use the warm band-server, whatever the user
    /// config's `warm` says (the tests set `0`).
    pub const WARM: &str = "BAND_WARM";
    /// Tests: fail instead of skipping when privileged tests cannot run.
    pub const TEST_MUST_RUN: &str = "BAND_TEST_MUST_RUN";
    /// Names reserved for the runtime; a secret may not use them.
    pub const RESERVED: &[&str] = &[
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "PWD",
        "TMPDIR",
        "TERM",
        "LANG",
        "INPUT_PATH",
        "OUTPUT_PATH",
        "CONFIG_PATH",
        "WORKSPACE",
        "SKILL_DIR",
        "GIT_CONFIG_COUNT",
        "GIT_CONFIG_KEY_0",
        "GIT_CONFIG_VALUE_0",
    ];
    /// Prefixes reserved for the runtime or dangerous to set (`LD_PRELOAD`).
    pub const RESERVED_PREFIXES: &[&str] = &["BAND_", "LD_"];
}

/// The canonical SHA-256 of a set of files (a skill bundle): files sorted by path, each hashed
/// as `path \0 mode-in-octal \0 length \0 bytes`. Both sides compute it; a mismatch refuses the run.
pub fn bundle_digest(files: &[(String, u32, Vec<u8>)]) -> String {
    use sha2::{Digest, Sha256};
    let mut sorted: Vec<&(String, u32, Vec<u8>)> = files.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut h = Sha256::new();
    for (path, mode, data) in sorted {
        h.update(path.as_bytes());
        h.update([0]);
        h.update(format!("{:o}", mode & 0o7777).as_bytes());
        h.update([0]);
        h.update(data.len().to_string().as_bytes());
        h.update([0]);
        h.update(data);
    }
    hex::encode(h.finalize())
}

#[cfg(test)]
mod tests {
    /// A call's record keeps its argv's first 4 KiB: the word cut there says its length, the
    /// words after it how many; a call within the bound is kept as it is.
    #[test]
    fn a_calls_record_keeps_the_start_of_a_huge_argv() {
        let call = |argv: Vec<String>| super::CliCall {
            argv,
            allowed: true,
            rule: None,
            source: None,
        };
        let small = vec!["true".to_string(), "x".repeat(100)];
        assert_eq!(call(small.clone()).recorded().argv, small);
        let big = "é".repeat(60_000);
        let kept = call(vec!["true".into(), big.clone(), big.clone(), "z".into()]).recorded();
        assert_eq!(
            kept.argv.len(),
            3,
            "{:?}",
            kept.argv.iter().map(String::len).collect::<Vec<_>>()
        );
        assert_eq!(kept.argv[0], "true");
        assert!(kept.argv[1].ends_with("…[120000 bytes]") && kept.argv[1].starts_with("éé"));
        assert!(kept.argv[1].len() <= super::CliCall::MAX_RECORDED_ARGV + 20);
        assert_eq!(kept.argv[2], "…[2 more words]");
    }

    use super::*;

    #[test]
    fn proxy_refusals_name_the_rule_that_would_allow_them() {
        let d = Denial::Http {
            method: "POST".into(),
            host: "api.github.com".into(),
            port: 443,
            https: true,
            path: "/gists".into(),
            rule: None,
        };
        assert_eq!(d.layer(), Layer::Network);
        assert_eq!(d.what(), "request POST https://api.github.com/gists");
        assert_eq!(
            d.explain(),
            "no allow.net rule matches; to allow it: allow.net \"POST https://api.github.com/gists\""
        );
        let s = Denial::Secret {
            name: "API_TOKEN".into(),
            to: "evil.test:443".into(),
            place: "query string".into(),
        };
        assert_eq!(s.layer(), Layer::Secrets);
        assert_eq!(
            s.what(),
            "placeholder of API_TOKEN in the query string to evil.test:443"
        );
        assert_eq!(s.smallest_rule(), None);
        // A refused write of a file or an empty folder (`stray/`): its exact rule, anchored at
        // the root when it is one name (a bare name matches at any depth).
        for (path, rule) in [
            ("notes.md", "./notes.md"),
            ("out/r.md", "out/r.md"),
            ("stray/", "./stray/"),
            ("a/b/", "a/b/"),
        ] {
            let w = Denial::Write {
                path: path.into(),
                rule: None,
                reason: None,
            };
            assert_eq!(
                w.smallest_rule(),
                Some(("allow.write", rule.to_string())),
                "{path}"
            );
        }
        let json = serde_json::to_string(&Event::Denied(s.clone())).unwrap();
        assert_eq!(
            serde_json::from_str::<Event>(&json).unwrap(),
            Event::Denied(s)
        );
    }

    #[test]
    fn exit_codes_are_distinct() {
        let mut seen = std::collections::BTreeSet::new();
        for s in Status::ALL {
            assert!(
                seen.insert(s.exit_code()),
                "{s} reuses exit code {}",
                s.exit_code()
            );
            assert_ne!(
                s.exit_code(),
                exit::USAGE,
                "{s} collides with the usage code"
            );
        }
    }

    #[test]
    fn messages_round_trip() {
        let ev = Message::Event(Event::Limit {
            limit: "pids".into(),
            detail: "128".into(),
        });
        let line = serde_json::to_string(&ev).unwrap_or_default();
        assert_eq!(
            line,
            r#"{"type":"event","event":"limit","limit":"pids","detail":"128"}"#
        );
        let back: Message = serde_json::from_str(&line).unwrap_or(Message::Event(Event::Stdout {
            data: String::new(),
        }));
        assert_eq!(back, ev);
        let st: Status = serde_json::from_str("\"memory_limit\"").unwrap_or(Status::Ok);
        assert_eq!(st, Status::MemoryLimit);
    }
}
