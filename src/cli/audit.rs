//! The ledger from the CLI: where it lives, what a run's record holds, and `band audit verify`.

use std::io::Write;

use anyhow::{Context, Result};

use super::config::UserConfig;
use super::pipeline::Outcome;
use band::ledger::{self, Entry, IoDigest, Ledger, RunRecord};
use band::proto::{Event, exit};

#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    #[command(subcommand)]
    pub action: AuditAction,
}

#[derive(Debug, clap::Subcommand)]
pub enum AuditAction {
    /// Check the ledger's hash chain; print the first broken record (exit 1) or the head hash.
    Verify {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// The ledger in the data folder: `$BAND_DATA_DIR`, `data_dir` in the config, `~/.local/share/band`.
pub fn ledger() -> Result<Ledger> {
    Ok(Ledger::new(UserConfig::load()?.data_dir()))
}

/// Append the record of one run (refused or not). `events` are what the run streamed; only the
/// non-content ones are kept ([`ledger::audit_events`]); `record_io` keeps the documents and streams.
pub fn record(ledger: &Ledger, o: &Outcome, events: Vec<Event>, record_io: bool) -> Result<()> {
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
        integrity: o.integrity.clone(),
        policy_sha256: o.policy_sha256.clone(),
        input: IoDigest {
            bytes: o.input_bytes,
            sha256: o.input_sha256.clone(),
            data: record_io.then(|| o.input.clone()),
        },
        output: IoDigest {
            bytes: o.output_bytes,
            sha256: o.output_sha256.clone(),
            data: r.output.clone().filter(|_| record_io),
        },
        status: r.status,
        exit_code: r.status.exit_code(),
        script_exit: r.exit_code,
        metrics: r.metrics.clone(),
        denied: r.denied.clone(),
        insist_missing: r.insist_missing.clone(),
        error: r.error.clone(),
        events,
        events_dropped,
        stdout: record_io.then(|| r.stdout.clone()),
        stderr: record_io.then(|| r.stderr.clone()),
    };
    ledger.append(Entry::Run(Box::new(run))).with_context(|| {
        format!(
            "the run {} finished but could not be recorded in the ledger",
            r.run_id
        )
    })?;
    Ok(())
}

pub fn cmd_audit(args: AuditArgs) -> Result<u8> {
    match args.action {
        AuditAction::Verify { json } => verify(json),
    }
}

fn verify(json: bool) -> Result<u8> {
    let ledger = ledger()?;
    let path = ledger.path();
    let v = ledger
        .verify()
        .with_context(|| format!("cannot read the ledger {}", path.display()))?;
    let mut out = std::io::stdout().lock();
    if json {
        let mut value = serde_json::to_value(&v)?;
        if let Some(o) = value.as_object_mut() {
            o.insert("ledger".into(), path.display().to_string().into());
            o.insert("ok".into(), v.broken.is_none().into());
        }
        writeln!(out, "{}", serde_json::to_string_pretty(&value)?)?;
    } else {
        match &v.broken {
            None if v.records == 0 => writeln!(out, "{}: no records yet", path.display())?,
            None => {
                writeln!(
                    out,
                    "{}: {} records, chain intact",
                    path.display(),
                    v.records
                )?;
                writeln!(
                    out,
                    "head: {} (seq {})",
                    v.head.as_deref().unwrap_or(""),
                    v.last_seq.unwrap_or(0)
                )?;
                writeln!(
                    out,
                    "Keep the head hash elsewhere to detect a later rewrite or truncation of the ledger."
                )?;
            }
            Some(b) => {
                let what = match (&b.seq, &b.run_id) {
                    (Some(s), Some(id)) => format!(" (seq {s}, run {id})"),
                    (Some(s), None) => format!(" (seq {s})"),
                    _ => String::new(),
                };
                writeln!(
                    out,
                    "{}:{}: broken record{what}: {}",
                    path.display(),
                    b.line,
                    b.reason
                )?;
                match &v.head {
                    Some(h) => writeln!(
                        out,
                        "the {} records before it are intact; their head is {h}",
                        b.line - 1
                    )?,
                    None => writeln!(out, "no intact record precedes it")?,
                }
            }
        }
    }
    Ok(if v.broken.is_some() {
        exit::SCRIPT_FAILED
    } else {
        exit::OK
    })
}
