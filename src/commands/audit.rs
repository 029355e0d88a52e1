//! The ledger from the CLI: where it lives, what a run's record holds, and `band audit verify`.

use std::io::Write;

use anyhow::{Context, Result};

use crate::cli::audit::{AuditAction, AuditArgs};
use band::client::record::ledger;
use band::proto::exit;

pub(crate) fn cmd_audit(args: AuditArgs) -> Result<u8> {
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
        if let Some(t) = &v.torn {
            writeln!(
                out,
                "{}:{}: a write cut short ({} bytes), not a record: the next run sets it aside in {}",
                path.display(),
                t.line,
                t.bytes,
                band::ledger::TORN_FILE
            )?;
        }
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
