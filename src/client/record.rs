//! The ledger from the client: where it lives and what a run's record holds.

use super::config::UserConfig;
use super::outcome::Outcome;
use super::outcome::Prepared;
use super::{ClientError, Result};
use crate::ledger::{self, Durability, Entry, IoDigest, Ledger, RunRecord, RunStart};
use crate::proto::Event;

/// The ledger in the data folder: `$BAND_DATA_DIR`, `data_dir` in the config, `~/.local/share/band`.
pub fn ledger() -> Result<Ledger> {
    Ok(ledger_of(&UserConfig::load()?))
}

/// [`ledger()`] of an already-read config (a run reads it once).
pub fn ledger_of(config: &UserConfig) -> Ledger {
    Ledger::new(config.data_dir())
}

/// Append the `start` record of a run about to start in its sandbox, written but not yet synced
/// ([`sync_start`] makes it durable, before the script starts): if it cannot be written, the run
/// must not start (the error names the ledger).
pub fn record_start(ledger: &Ledger, p: &Prepared, started_at_ms: u64) -> Result<()> {
    let start = RunStart {
        run_id: p.request.run_id.clone(),
        started_at_ms,
        skill: p.request.skill.clone(),
        script: p.request.script.clone(),
        target: p.target.to_string(),
        band_sha256: p.band_sha256.clone(),
        bundle_sha256: p.request.bundle_sha256.clone(),
        policy_sha256: p.policy_sha256.clone(),
    };
    ledger
        .append_with(Entry::Start(start), Durability::Written)
        .map_err(|source| ClientError::LedgerUnwritable {
            path: ledger.path(),
            source,
        })?;
    Ok(())
}

/// Make the `start` record [`record_start`] wrote durable (`fdatasync` of the ledger). The script
/// must not start before this returned `Ok`; it may be called again (a second sync is cheap).
pub fn sync_start(ledger: &Ledger) -> Result<()> {
    ledger
        .sync()
        .map_err(|source| ClientError::LedgerUnwritable {
            path: ledger.path(),
            source,
        })
}

/// Append the record of one run (refused or not). `events` are what the run streamed; only the
/// non-content ones are kept ([`ledger::audit_events`]); `record_io` keeps the documents and streams.
/// Nothing here holds a declared secret: the events and result come masked from the pipeline, and
/// the documents are masked here ([`super::redact`]); the digests are of the real documents.
/// `learn`: an observing run of `band learn` (marked so in the record). `durability`:
/// [`Durability::Written`] for the record of a run whose synced `start` record is on the ledger
/// (its loss in a crash leaves that `start` without its `run`), else [`Durability::Synced`].
pub fn record(
    ledger: &Ledger,
    o: &Outcome,
    events: Vec<Event>,
    record_io: bool,
    learn: bool,
    durability: Durability,
) -> Result<()> {
    let (events, events_dropped) = ledger::audit_events(events);
    let r = &o.result;
    let run = RunRecord {
        run_id: r.run_id.clone(),
        started_at_ms: o.started_at_ms,
        ended_at_ms: ledger::now_ms().max(o.started_at_ms),
        skill: o.skill.clone(),
        script: o.script.clone(),
        target: o.target.to_string(),
        band_sha256: o.band_sha256.clone(),
        bundle_sha256: o.bundle_sha256.clone(),
        lock: o.lock,
        learn,
        integrity: o.integrity.clone(),
        policy_sha256: o.policy_sha256.clone(),
        input: IoDigest {
            bytes: o.input_bytes,
            sha256: o.input_sha256.clone(),
            data: record_io.then(|| o.redact.mask_json(&o.input)),
        },
        output: IoDigest {
            bytes: o.output_bytes,
            sha256: o.output_sha256.clone(),
            data: r
                .output
                .as_ref()
                .filter(|_| record_io)
                .map(|v| o.redact.mask_json(v)),
        },
        status: r.status,
        exit_code: r.status.exit_code(),
        script_exit: r.exit_code,
        metrics: r.metrics.clone(),
        denied: r.denied.clone(),
        insist_missing: r.insist_missing.clone(),
        forged: r.forged.clone(),
        deps_sha256: r.deps_sha256.clone(),
        trust: r.trust.clone(),
        error: r.error.clone(),
        events,
        events_dropped,
        stdout: record_io.then(|| r.stdout.clone()),
        stderr: record_io.then(|| r.stderr.clone()),
    };
    ledger
        .append_with(Entry::Run(Box::new(run)), durability)
        .map_err(|source| ClientError::NotRecorded {
            run_id: r.run_id.clone(),
            source,
        })?;
    Ok(())
}
