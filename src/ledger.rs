//! The run ledger: one JSON line per run, append-only, each line chained to the one before it.
//!
//! ```text
//! $BAND_DATA_DIR/ledger.jsonl     the records
//! $BAND_DATA_DIR/ledger.lock      held (flock) by every writer: appends and prunes
//! $BAND_DATA_DIR/ledger.jsonl.torn  the fragments of writes cut short, set aside
//! ```
//!
//! A line is `{"v":1,"seq":N,"prev":"<hash of record N-1>","kind":"run",…,"hash":"<hex>"}`, where
//! `hash` is the SHA-256 of the line's text without its `,"hash":"…"` suffix (closed with `}`).
//! The first record's `prev` is 64 zeros. Editing any record breaks its own hash (or, if the
//! editor recomputed it, the next record's `prev`); deleting or reordering records breaks `seq`
//! and `prev`. `band history prune` drops the oldest records and appends a `checkpoint` record
//! naming the first record kept, so the shortened ledger still verifies.
//!
//! A run that starts in a sandbox has two records: a `start` record, written and synced before
//! anything runs (if it cannot be written, the run does not start: a full disk, a read-only
//! folder), and its `run` record when it ends. A `start` without its `run` is a run band did not
//! live to record, or whose record did not fit. That `run` record is written without waiting for
//! the disk ([`Durability::Written`]): the next synced append, or the kernel's writeback (within
//! half a minute by default), makes it durable, and a crash before then leaves the `start` without its `run`,
//! which the ledger already reads as above. Every other record is synced.
//!
//! A write cut short (a full disk, a crash) leaves a last line without its newline and its hash.
//! It is not a record: `verify` reports it as torn, not as a break, and the next append moves it
//! into `ledger.jsonl.torn` (kept, for whoever wants to look) and truncates the ledger to its last
//! whole record, so the chain goes on from there. A failed append truncates its own fragment at
//! once when it can. A last line with its hash suffix (only its newline cut) is checked as a record,
//! so an edit of the last record is still a break. Cutting the last record's end off is the same
//! as deleting it, which the chain cannot detect anyway (see the limits below).
//!
//! The files are opened with `O_NOFOLLOW` and must be regular files owned by the user band runs
//! as, with one link: band (as root) never writes through a link a local user planted.
//!
//! Limits (documented in `docs/lock-and-ledger.md`): the chain is not keyed, so whoever can write
//! the file can rewrite it whole, or drop its newest records; keep the head hash that
//! `band audit verify` prints somewhere else to detect that.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::lock::sha256_hex;
use crate::proto::{Denial, ErrorInfo, Event, Metrics, Status};

/// The records file, in the data directory.
pub const LEDGER_FILE: &str = "ledger.jsonl";
/// The writers' lock file, next to it.
pub const LOCK_FILE: &str = "ledger.lock";
/// Where a cut write's fragment is set aside, next to it.
pub const TORN_FILE: &str = "ledger.jsonl.torn";
/// The record format version (`v`).
pub const FORMAT_VERSION: u32 = 1;
/// The `prev` of the first record ever written.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// Events kept in one record; later ones are counted in `events_dropped`.
pub const MAX_EVENTS: usize = 1_000;

/// `,"hash":"` + 64 hex + `"}`.
const HASH_SUFFIX_LEN: usize = 9 + 64 + 2;

#[derive(Debug, Error)]
pub enum LedgerError {
    /// An I/O error from an operation whose error does not name the path (creating the folder).
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A file operation failed; the error (from fs_err) names the path.
    #[error(transparent)]
    Fs(std::io::Error),
    #[error("{path}:{line}: not a ledger record: {message}")]
    Corrupt {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{path}: the ledger is broken at line {line} ({reason}); pruning now would hide it")]
    Broken {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    #[error("{path}: refusing to use it as a ledger file: {reason}")]
    Unsafe { path: PathBuf, reason: String },
    #[error("cannot encode a ledger record: {0}")]
    Encode(#[from] serde_json::Error),
}

/// Whether the skill matched its `band.lock` when it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LockMark {
    Unlocked,
    Matches,
    Differs,
}

/// The size and SHA-256 of a run's input or output; the document itself only with `--record-io`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IoDigest {
    pub bytes: u64,
    pub sha256: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
}

impl IoDigest {
    /// Digest of a JSON document as band sends or receives it (compact serialisation).
    pub fn of(value: &serde_json::Value, keep: bool) -> IoDigest {
        let bytes = serde_json::to_vec(value).unwrap_or_default();
        IoDigest {
            bytes: bytes.len() as u64,
            sha256: sha256_hex(&bytes),
            data: keep.then(|| value.clone()),
        }
    }
}

/// One run, refused or not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub run_id: String,
    pub started_at_ms: u64,
    pub ended_at_ms: u64,
    pub skill: String,
    pub script: String,
    pub target: String,
    /// SHA-256 of the band file that governed the run.
    pub band_sha256: String,
    /// The bundle fingerprint (`band.lock`'s `bundle` line; the request's `bundle_sha256`).
    pub bundle_sha256: String,
    pub lock: LockMark,
    /// An observing run of `band learn`: the script ran under learn's draft band in a copy of
    /// the skill and the workspace, not as the skill's band allows it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub learn: bool,
    /// The files that differed from `band.lock` (an `integrity_failed` run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub integrity: Vec<String>,
    /// SHA-256 of the effective policy (canonical JSON).
    pub policy_sha256: String,
    pub input: IoDigest,
    pub output: IoDigest,
    pub status: Status,
    /// band's exit code for this run.
    pub exit_code: u8,
    /// The script's own exit code, when it ran: `script_exit_code`, as in `band run --json` and
    /// MCP results (records written before that say `script_exit`).
    #[serde(
        default,
        rename = "script_exit_code",
        alias = "script_exit",
        skip_serializing_if = "Option::is_none"
    )]
    pub script_exit: Option<i32>,
    /// Durations, peak memory, bytes in and out, as band-server measured them.
    #[serde(default)]
    pub metrics: Metrics,
    #[serde(default)]
    pub denied: Vec<Denial>,
    /// Insisted items that never happened.
    #[serde(default)]
    pub insist_missing: Vec<String>,
    /// Requests to the CLI gate that came from no genuine band-shim, refused (issue 36).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forged: Option<crate::proto::Forged>,
    /// The resolved lock of the script's Python environment (`deps`), when it declares packages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deps_sha256: Option<String>,
    /// The trust tier and signer band-server's site policy gave the run (issue 40).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust: Option<crate::sign::Trust>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
    /// What the run streamed, except its stdout/stderr (see [`audit_events`]).
    #[serde(default)]
    pub events: Vec<Event>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub events_dropped: u64,
    /// The run's stdout and stderr, only with `--record-io`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Written by `band history prune` in place of the records it dropped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub time_ms: u64,
    /// How many records were dropped.
    pub pruned: u64,
    /// Records that ended before this time were dropped.
    pub cutoff_ms: u64,
    /// `seq` and `prev` of the first line the ledger now starts with.
    pub first_seq: u64,
    pub first_prev: String,
}

/// Written and synced before a run starts in its sandbox, so no run happens unrecorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunStart {
    pub run_id: String,
    pub started_at_ms: u64,
    pub skill: String,
    pub script: String,
    pub target: String,
    pub band_sha256: String,
    pub bundle_sha256: String,
    pub policy_sha256: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Entry {
    Start(RunStart),
    Run(Box<RunRecord>),
    Checkpoint(Checkpoint),
}

impl Entry {
    /// When the record was made: the end of a run, the time of a checkpoint.
    pub fn time_ms(&self) -> u64 {
        match self {
            Entry::Start(s) => s.started_at_ms,
            Entry::Run(r) => r.ended_at_ms,
            Entry::Checkpoint(c) => c.time_ms,
        }
    }
}

/// A record as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stored {
    pub v: u32,
    pub seq: u64,
    pub prev: String,
    #[serde(flatten)]
    pub entry: Entry,
    pub hash: String,
}

impl Stored {
    /// The run this record holds (`None` for a checkpoint).
    pub fn run(&self) -> Option<&RunRecord> {
        match &self.entry {
            Entry::Run(r) => Some(r),
            Entry::Start(_) | Entry::Checkpoint(_) => None,
        }
    }
}

#[derive(Serialize)]
struct Body<'a> {
    v: u32,
    seq: u64,
    prev: &'a str,
    #[serde(flatten)]
    entry: &'a Entry,
}

/// The line for a record (with its trailing newline) and its hash.
fn encode(seq: u64, prev: &str, entry: &Entry) -> Result<(String, String), serde_json::Error> {
    let body = serde_json::to_string(&Body {
        v: FORMAT_VERSION,
        seq,
        prev,
        entry,
    })?;
    let hash = sha256_hex(body.as_bytes());
    let line = format!("{},\"hash\":\"{hash}\"}}\n", &body[..body.len() - 1]);
    Ok((line, hash))
}

/// Split a line into the hash it claims and the hash of its body. `None` if it has no hash suffix.
fn hashes(line: &str) -> Option<(&str, String)> {
    let cut = line.len().checked_sub(HASH_SUFFIX_LEN)?;
    let suffix = line.get(cut..)?;
    let claimed = suffix.strip_prefix(",\"hash\":\"")?.strip_suffix("\"}")?;
    let body = format!("{}}}", &line[..cut]);
    Some((claimed, sha256_hex(body.as_bytes())))
}

/// Is `line` (the last, without its newline) what a write cut short left: no hash suffix? A
/// write ends with its hash suffix and newline, so a cut loses the suffix, unless it cut the
/// newline alone (a whole record, checked as one: an edit of it is still a break).
fn cut_short(line: &str) -> bool {
    hashes(line).is_none()
}

/// Keep the events worth auditing: everything but stdout/stderr chunks (those are contents,
/// kept only with `--record-io`, as whole streams), at most [`MAX_EVENTS`]. Returns the kept
/// events and how many were dropped for the cap.
pub fn audit_events(events: Vec<Event>) -> (Vec<Event>, u64) {
    let mut kept = Vec::new();
    let mut dropped = 0u64;
    for e in events {
        if matches!(e, Event::Stdout { .. } | Event::Stderr { .. }) {
            continue;
        }
        if kept.len() < MAX_EVENTS {
            kept.push(e);
        } else {
            dropped += 1;
        }
    }
    (kept, dropped)
}

/// Whether an append waits for its record to reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// `fdatasync` before the append returns.
    Synced,
    /// Written to the file only: for a `run` record after its synced `start`, whose loss in a
    /// crash the ledger already tells (a `start` without its `run`). The next synced append makes
    /// it durable too (one file: `fdatasync` writes all of it).
    Written,
}

#[cfg(test)]
thread_local! {
    /// `fdatasync`s of ledger appends made on this thread (a test hook, per thread so tests in
    /// parallel do not see each other's).
    static SYNCS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// `fdatasync` of a ledger file (counted in tests).
fn sync_data(file: &fs_err::File) -> std::io::Result<()> {
    #[cfg(test)]
    SYNCS.with(|n| n.set(n.get() + 1));
    file.sync_data()
}

/// The ledger in a data directory.
#[derive(Debug, Clone)]
pub struct Ledger {
    dir: PathBuf,
}

impl Ledger {
    pub fn new(dir: impl Into<PathBuf>) -> Ledger {
        Ledger { dir: dir.into() }
    }

    /// The records file.
    pub fn path(&self) -> PathBuf {
        self.dir.join(LEDGER_FILE)
    }

    /// Create the directory and the file if needed and check both can be written, so a run that
    /// could not be recorded fails before it starts.
    pub fn prepare(&self) -> Result<(), LedgerError> {
        let _guard = self.lock_exclusive()?;
        self.open_append().map(drop)
    }

    fn lock_file(&self) -> Result<fs_err::File, LedgerError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode_private()
            .create(&self.dir)
            .map_err(|source| LedgerError::Io {
                path: self.dir.clone(),
                source,
            })?;
        let p = self.dir.join(LOCK_FILE);
        open_checked(
            &p,
            fs_err::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .private(),
        )
    }

    /// Held while writing; released when dropped.
    fn lock_exclusive(&self) -> Result<fs_err::File, LedgerError> {
        let f = self.lock_file()?;
        f.lock().map_err(LedgerError::Fs)?;
        Ok(f)
    }

    /// Held while reading, so a reader never sees half a prune.
    fn lock_shared(&self) -> Result<Option<fs_err::File>, LedgerError> {
        let p = self.dir.join(LOCK_FILE);
        match open_checked(&p, fs_err::OpenOptions::new().read(true)) {
            Ok(f) => {
                f.lock_shared().map_err(LedgerError::Fs)?;
                Ok(Some(f))
            }
            Err(LedgerError::Fs(e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn open_append(&self) -> Result<fs_err::File, LedgerError> {
        let p = self.path();
        open_checked(
            &p,
            fs_err::OpenOptions::new()
                .create(true)
                .read(true)
                .append(true)
                .private(),
        )
    }

    /// `fdatasync` of the ledger file (opened as an append does, with its checks): what
    /// [`Durability::Written`] appends left in the page cache reaches the disk.
    pub fn sync(&self) -> Result<(), LedgerError> {
        let file = self.open_append()?;
        sync_data(&file).map_err(LedgerError::Fs)
    }

    /// Append one record under the writers' lock, in one write, and sync it. Returns it as stored.
    pub fn append(&self, entry: Entry) -> Result<Stored, LedgerError> {
        self.append_with(entry, Durability::Synced)
    }

    /// [`Ledger::append`], synced or not.
    pub fn append_with(&self, entry: Entry, durability: Durability) -> Result<Stored, LedgerError> {
        let _guard = self.lock_exclusive()?;
        let path = self.path();
        let mut file = self.open_append()?;
        let mut tail = last_line(&mut file).map_err(LedgerError::Fs)?;
        if let Some(t) = tail.as_ref().filter(|t| !t.complete && cut_short(&t.text)) {
            self.set_aside(&mut file, t)?;
            tail = last_line(&mut file).map_err(LedgerError::Fs)?;
        }
        let (prev, seq, needs_newline) = match &tail {
            None => (GENESIS.to_string(), 1, false),
            Some(t) => {
                let (prev, seq) = link_of(&t.text);
                let seq = match seq {
                    Some(s) => s + 1,
                    None => count_lines(&path)? + 1,
                };
                (prev, seq, !t.complete)
            }
        };
        let (mut line, hash) = encode(seq, &prev, &entry)?;
        if needs_newline {
            // A whole record whose newline was cut off: end its line.
            line.insert(0, '\n');
        }
        let before = file.metadata().map_err(LedgerError::Fs)?.len();
        if let Err(e) = file
            .write_all(line.as_bytes())
            .and_then(|()| match durability {
                Durability::Synced => sync_data(&file),
                Durability::Written => Ok(()),
            })
        {
            // Cut short (a full disk): take the fragment back, so the ledger still ends in a whole
            // record. If that fails too, the next append sets it aside.
            if file.set_len(before).is_ok() {
                let _ = file.sync_data();
            }
            return Err(LedgerError::Fs(e));
        }
        Ok(Stored {
            v: FORMAT_VERSION,
            seq,
            prev,
            entry,
            hash,
        })
    }

    /// Move a cut write's fragment (the last line, without its newline) to [`TORN_FILE`] and
    /// truncate the ledger to the whole records before it.
    fn set_aside(&self, file: &mut fs_err::File, tail: &Tail) -> Result<(), LedgerError> {
        let torn = self.dir.join(TORN_FILE);
        let mut aside = open_checked(
            &torn,
            fs_err::OpenOptions::new()
                .create(true)
                .append(true)
                .private(),
        )?;
        let mut fragment = tail.raw.clone();
        fragment.push(b'\n');
        aside.write_all(&fragment).map_err(LedgerError::Fs)?;
        aside.sync_data().map_err(LedgerError::Fs)?;
        let len = file.metadata().map_err(LedgerError::Fs)?.len();
        file.set_len(len.saturating_sub(tail.raw.len() as u64))
            .map_err(LedgerError::Fs)?;
        file.sync_data().map_err(LedgerError::Fs)
    }

    /// The raw lines (without newlines); `complete` is false when the file does not end in one.
    fn read_lines(&self) -> Result<(Vec<String>, bool), LedgerError> {
        let p = self.path();
        let text = match read_checked(&p) {
            Ok(b) => b,
            Err(LedgerError::Fs(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok((Vec::new(), true));
            }
            Err(e) => return Err(e),
        };
        let complete = text.is_empty() || text.ends_with(b"\n");
        let text = String::from_utf8_lossy(&text);
        Ok((text.lines().map(str::to_string).collect(), complete))
    }

    /// Every record, oldest first. A line that is not a record is an error naming it.
    pub fn records(&self) -> Result<Vec<Stored>, LedgerError> {
        let _guard = self.lock_shared()?;
        let (mut lines, complete) = self.read_lines()?;
        // A cut write is not a record (see the module docs).
        if !complete && lines.last().is_some_and(|l| cut_short(l)) {
            lines.pop();
        }
        let path = self.path();
        lines
            .iter()
            .enumerate()
            .map(|(i, l)| {
                serde_json::from_str(l).map_err(|e| LedgerError::Corrupt {
                    path: path.clone(),
                    line: i + 1,
                    message: e.to_string(),
                })
            })
            .collect()
    }

    /// Every record that parses, oldest first, and the line numbers of those that do not (for
    /// viewers: a damaged line is `verify`'s to report, not a reason to show nothing).
    pub fn records_lenient(&self) -> Result<(Vec<Stored>, Vec<usize>), LedgerError> {
        let _guard = self.lock_shared()?;
        let (lines, _) = self.read_lines()?;
        let mut good = Vec::with_capacity(lines.len());
        let mut bad = Vec::new();
        for (i, l) in lines.iter().enumerate() {
            match serde_json::from_str(l) {
                Ok(r) => good.push(r),
                Err(_) => bad.push(i + 1),
            }
        }
        Ok((good, bad))
    }

    /// Check the whole chain; report the first broken record.
    pub fn verify(&self) -> Result<Verification, LedgerError> {
        let _guard = self.lock_shared()?;
        let (lines, complete) = self.read_lines()?;
        Ok(verify_lines(&lines, complete))
    }

    /// Drop the oldest records that ended before `cutoff_ms` (a prefix of the ledger: it stops at
    /// the first newer one) and append a checkpoint. Refuses a ledger that does not verify.
    pub fn prune(&self, cutoff_ms: u64, now_ms: u64) -> Result<PruneReport, LedgerError> {
        let _guard = self.lock_exclusive()?;
        let path = self.path();
        let (lines, complete) = self.read_lines()?;
        let check = verify_lines(&lines, complete);
        if let Some(b) = check.broken {
            return Err(LedgerError::Broken {
                path,
                line: b.line,
                reason: b.reason,
            });
        }
        let parsed: Vec<Stored> = lines
            .iter()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let drop = parsed
            .iter()
            .take_while(|r| r.entry.time_ms() < cutoff_ms)
            .count();
        if drop == 0 {
            return Ok(PruneReport {
                pruned: 0,
                kept: parsed.len() as u64,
                checkpoint: None,
            });
        }
        let last = parsed
            .last()
            .map(|r| (r.hash.clone(), r.seq))
            .unwrap_or((GENESIS.to_string(), 0));
        let seq = last.1 + 1;
        let (first_seq, first_prev) = parsed
            .get(drop)
            .map(|r| (r.seq, r.prev.clone()))
            .unwrap_or((seq, last.0.clone()));
        let entry = Entry::Checkpoint(Checkpoint {
            time_ms: now_ms,
            pruned: drop as u64,
            cutoff_ms,
            first_seq,
            first_prev,
        });
        let (cp_line, hash) = encode(seq, &last.0, &entry)?;
        let mut text = String::new();
        for l in &lines[drop..] {
            text.push_str(l);
            text.push('\n');
        }
        text.push_str(&cp_line);
        let tmp = self.dir.join(format!(".{LEDGER_FILE}.tmp"));
        // A stale one (a prune that died): removed, never written through (a new file only).
        let _ = fs_err::remove_file(&tmp);
        let written = (|| {
            let mut f = fs_err::OpenOptions::new()
                .create_new(true)
                .write(true)
                .private()
                .open(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            fs_err::rename(&tmp, &path)
        })();
        if let Err(e) = written {
            let _ = fs_err::remove_file(&tmp);
            return Err(LedgerError::Fs(e));
        }
        if let Ok(d) = fs_err::File::open(&self.dir) {
            let _ = d.sync_all();
        }
        let kept = (parsed.len() - drop) as u64;
        Ok(PruneReport {
            pruned: drop as u64,
            kept,
            checkpoint: Some(Stored {
                v: FORMAT_VERSION,
                seq,
                prev: last.0,
                entry,
                hash,
            }),
        })
    }
}

/// What `prune` did.
#[derive(Debug, Clone, PartialEq)]
pub struct PruneReport {
    pub pruned: u64,
    /// Records kept (not counting the new checkpoint).
    pub kept: u64,
    pub checkpoint: Option<Stored>,
}

/// The result of checking the chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verification {
    /// Records read (up to and including the first broken one).
    pub records: u64,
    /// The hash of the last intact record (the chain's head), when there is one.
    pub head: Option<String>,
    pub last_seq: Option<u64>,
    pub broken: Option<Broken>,
    /// The last line, a write cut short (not a record, not a break; see the module docs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub torn: Option<Torn>,
}

/// A last line that a write left cut short.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Torn {
    /// 1-based line number in `ledger.jsonl`.
    pub line: usize,
    pub bytes: usize,
}

/// The first record that does not fit the chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Broken {
    /// 1-based line number in `ledger.jsonl`.
    pub line: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    pub reason: String,
}

/// Pure: check a ledger's lines. `complete` is false when the last line has no newline.
pub fn verify_lines(lines: &[String], complete: bool) -> Verification {
    let parsed: Vec<Option<Stored>> = lines.iter().map(|l| serde_json::from_str(l).ok()).collect();
    let mut out = Verification {
        records: 0,
        head: None,
        last_seq: None,
        broken: None,
        torn: None,
    };
    let mut expect: Option<(String, u64)> = None; // (prev, seq) the next record must carry
    for (i, line) in lines.iter().enumerate() {
        let n = i + 1;
        let rec = parsed[i].as_ref();
        let brk = |reason: String| Broken {
            line: n,
            seq: rec.map(|r| r.seq),
            run_id: rec.and_then(run_id_of),
            reason,
        };
        if !complete && n == lines.len() && cut_short(line) {
            out.torn = Some(Torn {
                line: n,
                bytes: line.len(),
            });
            return out;
        }
        out.records += 1;
        let Some((claimed, actual)) = hashes(line) else {
            out.broken = Some(brk(
                "the line has no record hash (not written by band, or cut)".into(),
            ));
            return out;
        };
        if claimed != actual {
            out.broken = Some(brk(
                "the record was edited: its hash does not match its content".into(),
            ));
            return out;
        }
        let Some(rec) = rec else {
            let why = serde_json::from_str::<Stored>(line)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            out.broken = Some(brk(format!("not a ledger record: {why}")));
            return out;
        };
        if rec.v != FORMAT_VERSION {
            out.broken = Some(brk(format!("unknown record format version {}", rec.v)));
            return out;
        }
        let (want_prev, want_seq) = match &expect {
            Some(e) => e.clone(),
            None if rec.prev == GENESIS => (GENESIS.to_string(), 1),
            None => match last_checkpoint(&parsed) {
                Some(c) => (c.first_prev.clone(), c.first_seq),
                None => {
                    out.broken = Some(brk("the first record continues an earlier chain and no checkpoint accounts for it: records were deleted from the start".into()));
                    return out;
                }
            },
        };
        if rec.seq != want_seq {
            let reason = if expect.is_none() {
                format!(
                    "the first record is seq {} but the checkpoint says the ledger starts at seq {want_seq}: records were deleted from the start",
                    rec.seq
                )
            } else if parsed.iter().flatten().any(|r| r.seq == want_seq) {
                format!(
                    "seq {} where seq {want_seq} was expected: records were reordered",
                    rec.seq
                )
            } else if rec.seq > want_seq {
                format!(
                    "seq {} follows seq {}: {} were deleted",
                    rec.seq,
                    want_seq - 1,
                    seq_range(want_seq, rec.seq - 1)
                )
            } else {
                format!(
                    "seq {} follows seq {}: records were duplicated or reordered",
                    rec.seq,
                    want_seq - 1
                )
            };
            out.broken = Some(brk(reason));
            return out;
        }
        if rec.prev != want_prev {
            let reason = if expect.is_none() {
                "the first record does not continue the chain the checkpoint names: records were deleted from the start".to_string()
            } else {
                format!(
                    "its prev hash does not match record {} (line {}): that record was replaced",
                    want_seq - 1,
                    n - 1
                )
            };
            out.broken = Some(brk(reason));
            return out;
        }
        expect = Some((rec.hash.clone(), rec.seq + 1));
        out.head = Some(rec.hash.clone());
        out.last_seq = Some(rec.seq);
    }
    out
}

fn seq_range(a: u64, b: u64) -> String {
    if a == b {
        format!("record {a}")
    } else {
        format!("records {a}–{b}")
    }
}

fn run_id_of(r: &Stored) -> Option<String> {
    r.run().map(|run| run.run_id.clone())
}

fn last_checkpoint(parsed: &[Option<Stored>]) -> Option<&Checkpoint> {
    parsed.iter().rev().flatten().find_map(|r| match &r.entry {
        Entry::Checkpoint(c) => Some(c),
        Entry::Start(_) | Entry::Run(_) => None,
    })
}

/// The last line of a file and whether it ended with a newline.
struct Tail {
    text: String,
    /// Its bytes, without the newline.
    raw: Vec<u8>,
    complete: bool,
}

/// Read the last line by scanning backwards (the ledger may be large).
fn last_line(f: &mut fs_err::File) -> std::io::Result<Option<Tail>> {
    let len = f.seek(SeekFrom::End(0))?;
    if len == 0 {
        return Ok(None);
    }
    // Read backwards a chunk at a time, looking for a newline only in the chunk just read, and
    // join the chunks once: linear in the last line's length (a record of 200 MB is read once,
    // not copied and scanned again for every 8 KiB). The first chunk holds a typical record
    // (1–2 KiB); each next one is twice the last, up to 1 MiB, so a long record takes few reads
    // and a short one neither a large buffer nor its page faults.
    let mut chunk = 4 * 1024u64;
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    let mut last = [0u8; 1];
    f.seek(SeekFrom::Start(len - 1))?;
    f.read_exact(&mut last)?;
    let complete = last[0] == b'\n';
    // The line ends before its newline, if it has one.
    let end = if complete { len - 1 } else { len };
    let mut pos = end;
    let start_of_line = loop {
        if pos == 0 {
            break 0;
        }
        let start = pos.saturating_sub(chunk);
        let mut part = vec![0u8; (pos - start) as usize];
        f.seek(SeekFrom::Start(start))?;
        f.read_exact(&mut part)?;
        if let Some(i) = part.iter().rposition(|b| *b == b'\n') {
            chunks.push(part.split_off(i + 1));
            break start + i as u64 + 1;
        }
        chunks.push(part);
        pos = start;
        chunk = (chunk * 2).min(1 << 20);
    };
    let mut raw = Vec::with_capacity((end - start_of_line) as usize);
    for c in chunks.iter().rev() {
        raw.extend_from_slice(c);
    }
    Ok(Some(Tail {
        text: String::from_utf8_lossy(&raw).into_owned(),
        raw,
        complete,
    }))
}

/// The hash and seq a new record links to, from the last line. A line that is not an intact
/// record still links (by the hash of its bytes), so appending never stops; `verify` reports it.
fn link_of(line: &str) -> (String, Option<u64>) {
    let v: Option<serde_json::Value> = serde_json::from_str(line).ok();
    let seq = v
        .as_ref()
        .and_then(|v| v.get("seq"))
        .and_then(|s| s.as_u64());
    let hash = v
        .as_ref()
        .and_then(|v| v.get("hash"))
        .and_then(|h| h.as_str())
        .map(str::to_string);
    (hash.unwrap_or_else(|| sha256_hex(line.as_bytes())), seq)
}

fn count_lines(path: &Path) -> Result<u64, LedgerError> {
    let b = read_checked(path)?;
    Ok(b.split(|c| *c == b'\n').filter(|l| !l.is_empty()).count() as u64)
}

/// Open a ledger file without following a link (`O_NOFOLLOW`, and `O_NONBLOCK` so a FIFO does not
/// hang the open), and refuse what is not a regular file of this user's with one link.
fn open_checked(path: &Path, opts: &mut fs_err::OpenOptions) -> Result<fs_err::File, LedgerError> {
    use fs_err::os::unix::fs::OpenOptionsExt;
    use rustix::fs::OFlags;
    let flags = OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = match opts.custom_flags(flags.bits() as i32).open(path) {
        Ok(f) => f,
        Err(e) => {
            if fs_err::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(unsafe_file(path, "it is a symbolic link".into()));
            }
            return Err(LedgerError::Fs(e));
        }
    };
    let meta = file.metadata().map_err(LedgerError::Fs)?;
    if let Some(reason) = unsafe_reason(&meta, rustix::process::geteuid().as_raw()) {
        return Err(unsafe_file(path, reason));
    }
    Ok(file)
}

/// Why a ledger file with this metadata is not band's to use (`None`: it is).
fn unsafe_reason(meta: &std::fs::Metadata, euid: u32) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    if !meta.file_type().is_file() {
        return Some("it is not a regular file".into());
    }
    if meta.uid() != euid {
        return Some(format!(
            "it belongs to uid {}, not to uid {euid} that band runs as",
            meta.uid()
        ));
    }
    if meta.nlink() != 1 {
        return Some(format!(
            "it has {} hard links (another name of it may be any file)",
            meta.nlink()
        ));
    }
    None
}

fn unsafe_file(path: &Path, reason: String) -> LedgerError {
    LedgerError::Unsafe {
        path: path.to_path_buf(),
        reason,
    }
}

/// A ledger file's bytes, opened as [`open_checked`] does.
fn read_checked(path: &Path) -> Result<Vec<u8>, LedgerError> {
    let mut f = open_checked(path, fs_err::OpenOptions::new().read(true))?;
    let mut out = Vec::new();
    f.read_to_end(&mut out).map_err(LedgerError::Fs)?;
    Ok(out)
}

/// Files and folders of the ledger are private to their owner.
trait Private {
    fn private(&mut self) -> &mut Self;
}

impl Private for fs_err::OpenOptions {
    #[cfg(unix)]
    fn private(&mut self) -> &mut Self {
        use fs_err::os::unix::fs::OpenOptionsExt;
        self.mode(0o600)
    }
    #[cfg(not(unix))]
    fn private(&mut self) -> &mut Self {
        self
    }
}

trait PrivateDir {
    fn mode_private(&mut self) -> &mut Self;
}

impl PrivateDir for std::fs::DirBuilder {
    #[cfg(unix)]
    fn mode_private(&mut self) -> &mut Self {
        use std::os::unix::fs::DirBuilderExt;
        self.mode(0o700)
    }
    #[cfg(not(unix))]
    fn mode_private(&mut self) -> &mut Self {
        self
    }
}

/// Which runs `band history` shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// `skill` or `skill/script`.
    pub skill: Option<String>,
    pub status: Option<Status>,
    /// Runs that started at or after this time.
    pub since_ms: Option<u64>,
    pub limit: Option<usize>,
}

/// The run records that pass `filter`, newest first (checkpoints are not runs).
pub fn select<'a>(records: &'a [Stored], filter: &Filter) -> Vec<&'a Stored> {
    let mut out: Vec<&Stored> = records
        .iter()
        .rev()
        .filter_map(|s| s.run().map(|r| (s, r)))
        .filter(|(_, r)| match filter.skill.as_deref() {
            None => true,
            Some(s) => match s.split_once('/') {
                Some((skill, script)) => r.skill == skill && r.script == script,
                None => r.skill == s,
            },
        })
        .filter(|(_, r)| filter.status.is_none_or(|s| r.status == s))
        .filter(|(_, r)| filter.since_ms.is_none_or(|t| r.started_at_ms >= t))
        .map(|(s, _)| s)
        .collect();
    if let Some(n) = filter.limit {
        out.truncate(n);
    }
    out
}

/// Why a run id did not name one run.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FindError {
    #[error("no run `{0}` in the ledger")]
    NotFound(String),
    #[error("`{0}` matches {1} runs")]
    Ambiguous(String, usize),
}

/// The record of run `id`, or of the one run whose id starts with `id`.
pub fn find_run<'a>(records: &'a [Stored], id: &str) -> Result<&'a Stored, FindError> {
    let matches: Vec<&Stored> = records
        .iter()
        .filter(|s| {
            s.run()
                .is_some_and(|r| r.run_id.starts_with(id) && !id.is_empty())
        })
        .collect();
    if let Some(exact) = matches
        .iter()
        .find(|s| s.run().is_some_and(|r| r.run_id == id))
    {
        return Ok(exact);
    }
    match matches.len() {
        0 => Err(FindError::NotFound(id.to_string())),
        1 => Ok(matches[0]),
        n => Err(FindError::Ambiguous(id.to_string(), n)),
    }
}

/// An age for `--since` / `--older-than`: a duration (`90s`, `15m`, `1h`) or days and weeks
/// (`30d`, `2w`). Milliseconds.
pub fn parse_age(text: &str) -> Result<u64, crate::units::UnitError> {
    let t = text.trim().to_ascii_lowercase();
    let days = |n: &str, mult: u64| -> Result<u64, crate::units::UnitError> {
        let hours = crate::units::parse_duration_ms(&format!("{n}h"))?;
        hours
            .checked_mul(24 * mult)
            .ok_or_else(|| crate::units::UnitError::Overflow(text.to_string()))
    };
    if let Some(n) = t.strip_suffix('d') {
        days(n, 1)
    } else if let Some(n) = t.strip_suffix('w') {
        days(n, 7)
    } else {
        crate::units::parse_duration_ms(&t)
    }
}

/// Milliseconds since the Unix epoch as RFC 3339 UTC with milliseconds: `2025-03-01T12:00:00.250Z`.
pub fn rfc3339(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Now, in milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The last line, whole or cut, across chunk boundaries; a long one is read once (the
    /// search looks at each byte once: a 4 MiB line is found among 300,000 shorter ones).
    #[test]
    fn the_last_line_is_read_across_chunks() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("ledger.jsonl");
        let long = "x".repeat(4 << 20);
        let check = |text: &str, want: &str, complete: bool| {
            fs_err::write(&path, text).unwrap();
            let mut f = fs_err::File::open(&path).unwrap();
            let tail = last_line(&mut f).unwrap().unwrap();
            assert_eq!(
                (tail.text.len(), tail.raw.len(), tail.complete),
                (want.len(), want.len(), complete)
            );
            assert!(tail.text == want, "{}", &text[..text.len().min(20)]);
        };
        for (text, want, complete) in [
            ("a\nbc\n".to_string(), "bc", true),
            ("a\nbc".to_string(), "bc", false),
            ("\n".to_string(), "", true),
            ("only".to_string(), "only", false),
            (
                format!("{}\n{long}\n", "y\n".repeat(300_000)),
                long.as_str(),
                true,
            ),
            (format!("{long}\nz"), "z", false),
        ] {
            check(&text, want, complete);
        }
        // Around the first chunk (4 KiB) and the second (8 KiB more): after another line, whole
        // or cut, and alone in the file.
        for n in [4095, 4096, 4097, 12_288, 12_289] {
            let line = "w".repeat(n);
            check(&format!("a\n{line}\n"), &line, true);
            check(&format!("a\n{line}"), &line, false);
            check(&line, &line, false);
        }
        fs_err::write(&path, "").unwrap();
        assert!(
            last_line(&mut fs_err::File::open(&path).unwrap())
                .unwrap()
                .is_none()
        );
    }

    /// `exit_code` is band's, `script_exit_code` the script's, as in `band run --json` and MCP
    /// results; a record written when the second was `script_exit` still reads.
    #[test]
    fn the_scripts_exit_code_is_script_exit_code() {
        let Entry::Run(mut r) = run("0011223344556677", "s", "x", Status::Denied, 1) else {
            panic!("a run");
        };
        r.script_exit = Some(126);
        let mut v = serde_json::to_value(&*r).unwrap();
        assert_eq!(
            (&v["exit_code"], &v["script_exit_code"]),
            (&5.into(), &126.into())
        );
        assert!(v.get("script_exit").is_none(), "{v}");
        let o = v.as_object_mut().unwrap();
        let code = o.remove("script_exit_code").unwrap();
        o.insert("script_exit".into(), code);
        let old: RunRecord = serde_json::from_value(v).unwrap();
        assert_eq!(old.script_exit, Some(126));
    }

    fn run(id: &str, skill: &str, script: &str, status: Status, t: u64) -> Entry {
        Entry::Run(Box::new(RunRecord {
            run_id: id.into(),
            started_at_ms: t,
            ended_at_ms: t + 5,
            skill: skill.into(),
            script: script.into(),
            target: "host".into(),
            band_sha256: "b".repeat(64),
            bundle_sha256: "c".repeat(64),
            lock: LockMark::Unlocked,
            learn: false,
            integrity: Vec::new(),
            policy_sha256: "d".repeat(64),
            input: IoDigest::of(&serde_json::json!({"text": "hi"}), false),
            output: IoDigest::default(),
            status,
            exit_code: status.exit_code(),
            script_exit: None,
            metrics: Metrics::default(),
            denied: Vec::new(),
            insist_missing: Vec::new(),
            forged: None,
            deps_sha256: None,
            trust: None,
            error: None,
            events: Vec::new(),
            events_dropped: 0,
            stdout: None,
            stderr: None,
        }))
    }

    fn ledger_with(n: u64) -> (tempfile::TempDir, Ledger) {
        let t = tempfile::tempdir().expect("tmp");
        let l = Ledger::new(t.path().join("data"));
        for i in 1..=n {
            l.append(run(
                &format!("{i:016x}"),
                "text",
                "count",
                Status::Ok,
                i * 1000,
            ))
            .expect("append");
        }
        (t, l)
    }

    fn lines(l: &Ledger) -> Vec<String> {
        fs_err::read_to_string(l.path())
            .expect("read")
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn write_lines(l: &Ledger, lines: &[String]) {
        fs_err::write(
            l.path(),
            lines.iter().map(|s| format!("{s}\n")).collect::<String>(),
        )
        .expect("write");
    }

    fn broken(l: &Ledger) -> Broken {
        l.verify()
            .expect("verify")
            .broken
            .expect("the ledger should not verify")
    }

    #[test]
    fn appends_chain_and_verify() {
        let (_t, l) = ledger_with(3);
        let recs = l.records().expect("records");
        assert_eq!(
            recs.iter().map(|r| r.seq).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        assert_eq!(recs[0].prev, GENESIS);
        assert_eq!(recs[1].prev, recs[0].hash);
        assert_eq!(recs[2].prev, recs[1].hash);
        let v = l.verify().expect("verify");
        assert_eq!(
            v,
            Verification {
                records: 3,
                head: Some(recs[2].hash.clone()),
                last_seq: Some(3),
                broken: None,
                torn: None
            }
        );
        // Each line's hash covers the line.
        for line in lines(&l) {
            let (claimed, actual) = hashes(&line).expect("hash suffix");
            assert_eq!(claimed, actual);
        }
    }

    /// A synced append waits for the disk, a written one does not; both chain and verify.
    #[test]
    fn a_written_append_is_not_synced_and_chains_like_a_synced_one() {
        let t = tempfile::tempdir().expect("tmp");
        let l = Ledger::new(t.path());
        let syncs = || SYNCS.with(std::cell::Cell::get);
        let before = syncs();
        l.append(run("0000000000000001", "text", "count", Status::Ok, 1))
            .expect("synced");
        assert_eq!(syncs(), before + 1);
        l.append_with(
            run("0000000000000002", "text", "count", Status::Ok, 2),
            Durability::Written,
        )
        .expect("written");
        assert_eq!(syncs(), before + 1, "a written append synced");
        let recs = l.records().expect("records");
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[1].prev, recs[0].hash);
        assert_eq!(l.verify().expect("verify").broken, None);
    }

    #[test]
    fn an_empty_or_missing_ledger_verifies() {
        let t = tempfile::tempdir().expect("tmp");
        let l = Ledger::new(t.path().join("nothing"));
        assert_eq!(
            l.verify().expect("verify"),
            Verification {
                records: 0,
                head: None,
                last_seq: None,
                broken: None,
                torn: None
            }
        );
        assert!(l.records().expect("records").is_empty());
        assert_eq!(
            l.records_lenient().expect("records"),
            (Vec::new(), Vec::new())
        );
        assert!(
            !t.path().join("nothing").exists(),
            "reading creates nothing"
        );
    }

    #[test]
    fn an_edited_record_is_detected() {
        let (_t, l) = ledger_with(4);
        let mut ls = lines(&l);
        ls[1] = ls[1].replace("\"status\":\"ok\"", "\"status\":\"denied\"");
        write_lines(&l, &ls);
        let b = broken(&l);
        assert_eq!((b.line, b.seq), (2, Some(2)));
        assert!(b.reason.contains("edited"), "{}", b.reason);
    }

    #[test]
    fn an_edited_last_record_is_detected() {
        let (_t, l) = ledger_with(2);
        let mut ls = lines(&l);
        ls[1] = ls[1].replace("\"skill\":\"text\"", "\"skill\":\"tExt\"");
        write_lines(&l, &ls);
        assert_eq!(broken(&l).line, 2);
    }

    #[test]
    fn an_edit_with_a_recomputed_hash_is_detected_by_the_next_record() {
        let (_t, l) = ledger_with(3);
        let mut ls = lines(&l);
        let recs = l.records().expect("records");
        let mut forged = recs[1].clone();
        if let Entry::Run(r) = &mut forged.entry {
            r.status = Status::Denied;
        }
        ls[1] = encode(forged.seq, &forged.prev, &forged.entry)
            .expect("encode")
            .0
            .trim_end()
            .to_string();
        write_lines(&l, &ls);
        let b = broken(&l);
        assert_eq!(b.line, 3);
        assert!(b.reason.contains("replaced"), "{}", b.reason);
    }

    #[test]
    fn a_deleted_record_is_detected() {
        let (_t, l) = ledger_with(5);
        let mut ls = lines(&l);
        ls.remove(2);
        write_lines(&l, &ls);
        let b = broken(&l);
        assert_eq!((b.line, b.seq), (3, Some(4)));
        assert!(b.reason.contains("record 3 were deleted"), "{}", b.reason);
        assert_eq!(b.run_id.as_deref(), Some("0000000000000004"));
    }

    #[test]
    fn a_deleted_first_record_is_detected() {
        let (_t, l) = ledger_with(3);
        let mut ls = lines(&l);
        ls.remove(0);
        write_lines(&l, &ls);
        let b = broken(&l);
        assert_eq!(b.line, 1);
        assert!(b.reason.contains("deleted from the start"), "{}", b.reason);
    }

    #[test]
    fn a_reordered_record_is_detected() {
        let (_t, l) = ledger_with(4);
        let mut ls = lines(&l);
        ls.swap(1, 2);
        write_lines(&l, &ls);
        let b = broken(&l);
        assert_eq!((b.line, b.seq), (2, Some(3)));
        assert!(b.reason.contains("reordered"), "{}", b.reason);
    }

    #[test]
    fn a_cut_write_is_torn_not_broken_and_set_aside_by_the_next_append() {
        let (_t, l) = ledger_with(2);
        let whole = fs_err::read_to_string(l.path()).expect("read");
        let fragment = "{\"v\":1,\"seq\":3,\"pre";
        fs_err::write(l.path(), format!("{whole}{fragment}")).expect("write");
        let v = l.verify().expect("verify");
        assert_eq!(v.broken, None);
        assert_eq!(
            v.torn,
            Some(Torn {
                line: 3,
                bytes: fragment.len()
            })
        );
        assert_eq!(v.records, 2);
        assert_eq!(l.records().expect("records").len(), 2);
        l.append(run("00000000000000ff", "text", "count", Status::Ok, 9))
            .expect("append after a cut");
        let ls = lines(&l);
        assert_eq!(ls.len(), 3, "the fragment is gone from the ledger");
        let v = l.verify().expect("verify");
        assert_eq!((v.broken, v.torn, v.records), (None, None, 3));
        assert_eq!(
            fs_err::read_to_string(l.dir.join(TORN_FILE)).expect("set aside"),
            format!("{fragment}\n")
        );
    }

    #[test]
    fn a_whole_last_record_without_its_newline_is_checked_as_a_record() {
        let (_t, l) = ledger_with(2);
        let whole = fs_err::read_to_string(l.path()).expect("read");
        let cut = whole.trim_end_matches('\n');
        // Its newline cut off: a record still, and the next append ends its line.
        fs_err::write(l.path(), cut).expect("write");
        let v = l.verify().expect("verify");
        assert_eq!((v.broken, v.torn, v.records), (None, None, 2));
        l.append(run("00000000000000ff", "text", "count", Status::Ok, 9))
            .expect("append");
        assert_eq!(l.verify().expect("verify").records, 3);
        // Edited and without its newline: an edit, not a cut write.
        let (first, last) = cut.rsplit_once('\n').expect("two lines");
        let edited = format!("{first}\n{}", last.replace("\"count\"", "\"other\""));
        fs_err::write(l.path(), &edited).expect("write");
        let b = broken(&l);
        assert_eq!(b.line, 2);
        assert!(b.reason.contains("edited"), "{}", b.reason);
    }

    #[test]
    fn ledger_files_behind_links_fifos_or_hard_links_are_refused() {
        use fs_err::os::unix::fs::symlink;
        let t = tempfile::tempdir().expect("tmp");
        let target = t.path().join("target");
        fs_err::write(&target, "precious\n").expect("write");
        let entry = || run("00000000000000aa", "text", "count", Status::Ok, 1);
        for planted in [LEDGER_FILE, LOCK_FILE] {
            let dir = t.path().join(format!("data-{planted}"));
            fs_err::create_dir_all(&dir).expect("dir");
            symlink(&target, dir.join(planted)).expect("symlink");
            let l = Ledger::new(&dir);
            let e = l.append(entry()).expect_err("a symlink is refused");
            assert!(
                e.to_string().ends_with(&format!(
                    "{planted}: refusing to use it as a ledger file: it is a symbolic link"
                )),
                "{e}"
            );
            assert!(matches!(l.verify(), Err(LedgerError::Unsafe { .. })));
        }
        // A hard link to another file.
        let dir = t.path().join("data-hard");
        fs_err::create_dir_all(&dir).expect("dir");
        fs_err::hard_link(&target, dir.join(LEDGER_FILE)).expect("link");
        let e = Ledger::new(&dir).append(entry()).expect_err("refused");
        assert!(e.to_string().contains("it has 2 hard links"), "{e}");
        // A FIFO: refused at once, not waited on.
        let dir = t.path().join("data-fifo");
        fs_err::create_dir_all(&dir).expect("dir");
        let made = std::process::Command::new("mkfifo")
            .arg(dir.join(LEDGER_FILE))
            .status()
            .expect("mkfifo");
        assert!(made.success());
        let e = Ledger::new(&dir).append(entry()).expect_err("refused");
        assert!(e.to_string().contains("not a regular file"), "{e}");
        assert_eq!(fs_err::read_to_string(&target).expect("read"), "precious\n");
        // Another user's file (the check itself: the tests may not run as root).
        let mine = t.path().join("mine");
        fs_err::write(&mine, "").expect("write");
        let meta = fs_err::metadata(&mine).expect("meta");
        use std::os::unix::fs::MetadataExt;
        let other = meta.uid() + 1;
        assert_eq!(
            unsafe_reason(&meta, other),
            Some(format!(
                "it belongs to uid {}, not to uid {other} that band runs as",
                meta.uid()
            ))
        );
        assert_eq!(unsafe_reason(&meta, meta.uid()), None);
    }

    #[test]
    fn concurrent_appends_from_threads_give_valid_records() {
        let t = tempfile::tempdir().expect("tmp");
        let dir = t.path().join("data");
        let handles: Vec<_> = (0..32u64)
            .map(|i| {
                let dir = dir.clone();
                std::thread::spawn(move || {
                    let l = Ledger::new(dir);
                    l.append(run(&format!("{i:016x}"), "text", "count", Status::Ok, i))
                        .map(|s| s.seq)
                })
            })
            .collect();
        let mut seqs: Vec<u64> = handles
            .into_iter()
            .map(|h| h.join().expect("thread").expect("append"))
            .collect();
        seqs.sort_unstable();
        assert_eq!(seqs, (1..=32).collect::<Vec<_>>());
        let l = Ledger::new(dir);
        let v = l.verify().expect("verify");
        assert_eq!((v.records, v.broken), (32, None));
        let mut ids: Vec<String> = l
            .records()
            .expect("records")
            .into_iter()
            .filter_map(|r| run_id_of(&r))
            .collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 32);
    }

    #[test]
    fn prune_keeps_the_chain_verifiable() {
        let (_t, l) = ledger_with(5); // ended at 1005, 2005, … 5005
        let rep = l.prune(3000, 10_000).expect("prune");
        assert_eq!((rep.pruned, rep.kept), (2, 3));
        let recs = l.records().expect("records");
        assert_eq!(
            recs.iter().map(|r| r.seq).collect::<Vec<_>>(),
            vec![3, 4, 5, 6]
        );
        match &recs[3].entry {
            Entry::Checkpoint(c) => {
                assert_eq!((c.pruned, c.first_seq), (2, 3));
                assert_eq!(c.first_prev, recs[0].prev);
            }
            other => panic!("expected a checkpoint, got {other:?}"),
        }
        assert_eq!(l.verify().expect("verify").broken, None);
        // Appending continues the chain after the checkpoint.
        l.append(run("00000000000000aa", "text", "count", Status::Ok, 20_000))
            .expect("append");
        assert_eq!(l.verify().expect("verify").broken, None);
        // Deleting more from the start is still detected.
        let mut ls = lines(&l);
        ls.remove(0);
        write_lines(&l, &ls);
        assert!(broken(&l).reason.contains("deleted from the start"));
    }

    #[test]
    fn prune_of_everything_and_prune_twice() {
        let (_t, l) = ledger_with(3);
        assert_eq!(l.prune(1, 50).expect("prune").pruned, 0, "nothing older");
        assert_eq!(lines(&l).len(), 3, "nothing pruned, nothing written");
        l.prune(u64::MAX, 100_000).expect("prune all");
        assert_eq!(lines(&l).len(), 1);
        assert_eq!(l.verify().expect("verify").broken, None);
        l.append(run(
            "00000000000000ab",
            "text",
            "count",
            Status::Ok,
            200_000,
        ))
        .expect("append");
        l.prune(150_000, 300_000).expect("prune the checkpoint too");
        let recs = l.records().expect("records");
        assert_eq!(recs.len(), 2);
        assert_eq!(l.verify().expect("verify").broken, None);
    }

    #[test]
    fn prune_refuses_a_broken_ledger() {
        let (_t, l) = ledger_with(3);
        let mut ls = lines(&l);
        ls.remove(1);
        write_lines(&l, &ls);
        assert!(matches!(
            l.prune(u64::MAX, 1),
            Err(LedgerError::Broken { line: 2, .. })
        ));
    }

    #[test]
    fn history_filters() {
        let t = tempfile::tempdir().expect("tmp");
        let l = Ledger::new(t.path());
        l.append(run("0000000000000001", "text", "count", Status::Ok, 1_000))
            .expect("append");
        l.append(run(
            "0000000000000002",
            "text",
            "upper",
            Status::Denied,
            2_000,
        ))
        .expect("append");
        l.append(run("0000000000000003", "web", "fetch", Status::Ok, 3_000))
            .expect("append");
        l.append(run(
            "0000000000000004",
            "text",
            "count",
            Status::InputInvalid,
            4_000,
        ))
        .expect("append");
        let recs = l.records().expect("records");
        let ids = |f: Filter| {
            select(&recs, &f)
                .iter()
                .filter_map(|s| s.run())
                .map(|r| r.run_id[15..].to_string())
                .collect::<Vec<_>>()
                .join("")
        };
        assert_eq!(ids(Filter::default()), "4321", "newest first");
        assert_eq!(
            ids(Filter {
                skill: Some("text".into()),
                ..Filter::default()
            }),
            "421"
        );
        assert_eq!(
            ids(Filter {
                skill: Some("text/count".into()),
                ..Filter::default()
            }),
            "41"
        );
        assert_eq!(
            ids(Filter {
                status: Some(Status::Ok),
                ..Filter::default()
            }),
            "31"
        );
        assert_eq!(
            ids(Filter {
                since_ms: Some(2_000),
                ..Filter::default()
            }),
            "432"
        );
        assert_eq!(
            ids(Filter {
                limit: Some(2),
                ..Filter::default()
            }),
            "43"
        );
        assert_eq!(
            ids(Filter {
                skill: Some("text".into()),
                status: Some(Status::Ok),
                since_ms: Some(500),
                limit: Some(5)
            }),
            "1"
        );
        assert_eq!(
            ids(Filter {
                skill: Some("nope".into()),
                ..Filter::default()
            }),
            ""
        );
    }

    #[test]
    fn find_by_id_or_prefix() {
        let t = tempfile::tempdir().expect("tmp");
        let l = Ledger::new(t.path());
        l.append(run("abcd000000000001", "text", "count", Status::Ok, 1))
            .expect("append");
        l.append(run("abcd000000000002", "text", "count", Status::Ok, 2))
            .expect("append");
        let recs = l.records().expect("records");
        assert_eq!(find_run(&recs, "abcd000000000002").map(|s| s.seq), Ok(2));
        assert_eq!(
            find_run(&recs, "abcd0000000000").err(),
            Some(FindError::Ambiguous("abcd0000000000".into(), 2))
        );
        assert_eq!(
            find_run(&recs, "abcd0000000000011").err(),
            Some(FindError::NotFound("abcd0000000000011".into()))
        );
        assert!(find_run(&recs, "").is_err());
    }

    #[test]
    fn audit_events_drop_contents_and_cap() {
        let mut evs = vec![
            Event::Stdout {
                data: "secret".into(),
            },
            Event::Stderr { data: "x".into() },
        ];
        evs.extend((0..MAX_EVENTS + 3).map(|i| Event::Limit {
            limit: "log".into(),
            detail: i.to_string(),
        }));
        let (kept, dropped) = audit_events(evs);
        assert_eq!((kept.len(), dropped), (MAX_EVENTS, 3));
        assert!(kept.iter().all(|e| matches!(e, Event::Limit { .. })));
    }

    #[test]
    fn io_digest_keeps_data_only_when_asked() {
        let v = serde_json::json!({"a": 1});
        let d = IoDigest::of(&v, false);
        assert_eq!((d.bytes, d.data), (7, None));
        assert_eq!(d.sha256, sha256_hex(b"{\"a\":1}"));
        assert_eq!(IoDigest::of(&v, true).data, Some(v));
    }

    #[test]
    fn ages_and_times() {
        assert_eq!(parse_age("30d"), Ok(30 * 86_400_000));
        assert_eq!(parse_age("2w"), Ok(14 * 86_400_000));
        assert_eq!(parse_age("1h"), Ok(3_600_000));
        assert_eq!(parse_age("90s"), Ok(90_000));
        assert!(parse_age("soon").is_err());
        assert!(parse_age("-1d").is_err());
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_250), "2000-02-29T00:00:00.250Z");
        assert_eq!(rfc3339(1_740_830_400_000), "2025-03-01T12:00:00.000Z");
    }

    #[cfg(unix)]
    #[test]
    fn files_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let (t, l) = ledger_with(1);
        let mode = |p: &Path| fs_err::metadata(p).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode(&l.path()), 0o600);
        assert_eq!(mode(&t.path().join("data")), 0o700);
        assert_eq!(mode(&t.path().join("data").join(LOCK_FILE)), 0o600);
    }
}
