//! `band history` (recent runs as a table or JSON), `band history prune`, and `band show <run-id>`.
//! JSON output is the ledger's own record format (docs/lock-and-ledger.md).
//!
//! A record holds what a script controlled (its stderr, the argv of its commands, paths): the
//! human output goes through [`for_terminal`] and the JSON through [`json_text`], as `band run`'s
//! do, so a recorded escape sequence cannot drive the terminal of whoever reads the history.

use std::io::Write;

use anyhow::{Context, Result};
use comfy_table::{ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};

use crate::cli::history::{HistoryAction, HistoryArgs, ShowArgs};
use crate::cli::render::{for_terminal, json_text};
use crate::cli::user_error;
use band::client::record::ledger;
use band::ledger::{self as lg, Filter, FindError, RunRecord, Stored};
use band::proto::{Denial, Event, exit};
use band::units::{format_bytes, format_duration_ms};

pub(crate) fn cmd_history(args: HistoryArgs) -> Result<u8> {
    if let Some(HistoryAction::Prune { older_than, json }) = args.action {
        return prune(older_than, json);
    }
    let ledger = ledger()?;
    let records = read(&ledger)?;
    let now = lg::now_ms();
    let filter = Filter {
        skill: args.skill.clone(),
        status: args.status,
        since_ms: args.since.map(|age| now.saturating_sub(age)),
        limit: (args.limit > 0).then_some(args.limit),
    };
    let selected = lg::select(&records, &filter);
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(
            out,
            "{}",
            json_text(&serde_json::to_string_pretty(&selected)?)
        )?;
        return Ok(exit::OK);
    }
    let unfinished = if args.status.is_none() {
        unfinished(&records, &filter)
    } else {
        Vec::new()
    };
    if selected.is_empty() && unfinished.is_empty() {
        let what = if records.is_empty() {
            "No runs recorded yet"
        } else {
            "No runs match"
        };
        writeln!(out, "{what} ({}).", ledger.path().display())?;
        return Ok(exit::OK);
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic);
    // The trust tier a site policy gave a run (issue 40): a column once any run shown has one.
    let tiers = selected
        .iter()
        .filter_map(|s| s.run())
        .any(|r| r.trust.is_some());
    let mut header = vec![
        "run",
        "started (UTC)",
        "skill/script",
        "status",
        "exit",
        "took",
        "target",
        "lock",
    ];
    if tiers {
        header.push("tier");
    }
    t.set_header(header);
    for r in selected.iter().filter_map(|s| s.run()) {
        let mut row = vec![
            r.run_id.clone(),
            lg::rfc3339(r.started_at_ms)[..19].replace('T', " "),
            // An observing run of `band learn` ran under learn's draft band, not the skill's.
            format!(
                "{}/{}{}",
                r.skill,
                r.script,
                if r.learn { " (learn)" } else { "" }
            ),
            r.status.to_string(),
            r.exit_code.to_string(),
            format_duration_ms(r.ended_at_ms.saturating_sub(r.started_at_ms)),
            r.target.clone(),
            lock_word(r).to_string(),
        ];
        if tiers {
            row.push(r.trust.as_ref().map_or("-".into(), |t| t.tier.clone()));
        }
        t.add_row(row);
    }
    if !selected.is_empty() {
        writeln!(out, "{}", for_terminal(&t.to_string()))?;
    }
    // A run whose start is recorded but whose result is not (band was killed, the machine went
    // down, the ledger's disk was full): said below the table, so that no run goes unseen.
    for s in unfinished {
        writeln!(
            out,
            "{}",
            for_terminal(&format!(
                "{}  started {}  {}/{}: no result recorded (band stopped, or the ledger could not be written)",
                s.run_id,
                lg::rfc3339(s.started_at_ms)[..19].replace('T', " "),
                s.skill,
                s.script
            ))
        )?;
    }
    Ok(exit::OK)
}

/// The runs of `records` whose start record has no run record, that `filter`'s skill and age
/// admit, oldest first.
fn unfinished<'a>(records: &'a [Stored], filter: &Filter) -> Vec<&'a lg::RunStart> {
    let ended: std::collections::BTreeSet<&str> = records
        .iter()
        .filter_map(|s| s.run())
        .map(|r| r.run_id.as_str())
        .collect();
    records
        .iter()
        .filter_map(|s| match &s.entry {
            lg::Entry::Start(start) => Some(start),
            _ => None,
        })
        .filter(|s| !ended.contains(s.run_id.as_str()))
        .filter(|s| filter.since_ms.is_none_or(|t| s.started_at_ms >= t))
        .filter(|s| {
            filter
                .skill
                .as_deref()
                .is_none_or(|k| k == s.skill || k == format!("{}/{}", s.skill, s.script))
        })
        .collect()
}

fn lock_word(r: &RunRecord) -> &'static str {
    match r.lock {
        lg::LockMark::Matches => "locked",
        lg::LockMark::Unlocked => "-",
        lg::LockMark::Differs => "CHANGED",
    }
}

/// The records that parse; a warning on stderr names the lines that do not.
fn read(ledger: &lg::Ledger) -> Result<Vec<Stored>> {
    let (records, bad) = ledger
        .records_lenient()
        .with_context(|| format!("cannot read the ledger {}", ledger.path().display()))?;
    if !bad.is_empty() {
        let lines = bad
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        eprintln!(
            "band: warning: {}: line {lines} not shown: not a ledger record; run `band audit verify`",
            ledger.path().display()
        );
    }
    Ok(records)
}

fn prune(older_than: u64, json: bool) -> Result<u8> {
    let ledger = ledger()?;
    let now = lg::now_ms();
    let cutoff = now.saturating_sub(older_than);
    let report = ledger.prune(cutoff, now).map_err(|e| match e {
        lg::LedgerError::Broken { .. } => user_error(
            e.to_string(),
            "run `band audit verify`; keep a copy of the ledger before repairing it",
        ),
        other => anyhow::Error::new(other).context("cannot prune the ledger"),
    })?;
    let mut out = std::io::stdout().lock();
    if json {
        let v = serde_json::json!({ "ledger": ledger.path(), "pruned": report.pruned, "kept": report.kept, "checkpoint": report.checkpoint });
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
    } else if report.pruned == 0 {
        writeln!(
            out,
            "nothing older than {}; {} records kept",
            lg::rfc3339(cutoff),
            report.kept
        )?;
    } else {
        let seq = report.checkpoint.as_ref().map(|c| c.seq).unwrap_or(0);
        writeln!(
            out,
            "pruned {} records that ended before {}; kept {}; checkpoint written (seq {seq})",
            report.pruned,
            lg::rfc3339(cutoff),
            report.kept
        )?;
    }
    Ok(exit::OK)
}

pub(crate) fn cmd_show(args: ShowArgs) -> Result<u8> {
    let ledger = ledger()?;
    let records = read(&ledger)?;
    let found = lg::find_run(&records, &args.run_id);
    // A run that started and recorded no result (band stopped, the ledger's disk full): its start.
    if let Err(FindError::NotFound(_)) = &found
        && let [start] = unfinished(&records, &Filter::default())
            .into_iter()
            .filter(|s| !args.run_id.is_empty() && s.run_id.starts_with(&args.run_id))
            .collect::<Vec<_>>()[..]
    {
        let mut out = std::io::stdout().lock();
        if args.json {
            writeln!(out, "{}", json_text(&serde_json::to_string_pretty(start)?))?;
        } else {
            out.write_all(for_terminal(&start_text(start)).as_bytes())?;
        }
        return Ok(exit::OK);
    }
    let stored = found.map_err(|e| match e {
        FindError::NotFound(_) => user_error(
            format!("{e} ({})", ledger.path().display()),
            "`band history` lists the recorded runs",
        ),
        FindError::Ambiguous(..) => user_error(e.to_string(), "give more characters of the run id"),
    })?;
    let run = stored.run().context("the record is not a run")?;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", json_text(&serde_json::to_string_pretty(stored)?))?;
    } else {
        out.write_all(for_terminal(&show_text(stored, run)).as_bytes())?;
    }
    Ok(exit::OK)
}

/// A run that started and recorded no result, for people: what its start record knows.
fn start_text(s: &lg::RunStart) -> String {
    format!(
        "{:<13}{}  {}/{}\n{:<13}no result recorded (band stopped, or the ledger could not be written)\n{:<13}{}\n{:<13}{}\n",
        "run",
        s.run_id,
        s.skill,
        s.script,
        "status",
        "started",
        lg::rfc3339(s.started_at_ms),
        "target",
        s.target
    )
}

/// One run in full, for people.
fn show_text(s: &Stored, r: &RunRecord) -> String {
    let mut o = String::new();
    let mut line = |k: &str, v: String| o.push_str(&format!("{k:<13}{v}\n"));
    let script_exit = r
        .script_exit
        .map(|c| format!(", script exit {c}"))
        .unwrap_or_default();
    line("run", format!("{}  {}/{}", r.run_id, r.skill, r.script));
    if r.learn {
        line(
            "observed by",
            "band learn: the script ran under learn's draft band, in copies of the skill and the workspace".into(),
        );
    }
    line(
        "status",
        format!(
            "{} (band exit {}{script_exit}): {}",
            r.status,
            r.exit_code,
            r.status.describe()
        ),
    );
    let m = &r.metrics;
    line(
        "started",
        format!(
            "{}  took {} (setup {}, run {}, teardown {})",
            lg::rfc3339(r.started_at_ms),
            format_duration_ms(r.ended_at_ms.saturating_sub(r.started_at_ms)),
            format_duration_ms(m.setup_ms),
            format_duration_ms(m.run_ms),
            format_duration_ms(m.teardown_ms)
        ),
    );
    line("target", r.target.clone());
    let lock = match r.lock {
        lg::LockMark::Matches => "matches band.lock",
        lg::LockMark::Unlocked => "no band.lock",
        lg::LockMark::Differs => "DIFFERS from band.lock",
    };
    line("bundle", format!("{}  ({lock})", or_none(&r.bundle_sha256)));
    line("band file", or_none(&r.band_sha256));
    line("policy", or_none(&r.policy_sha256));
    line(
        "input",
        format!(
            "{}  sha256 {}",
            format_bytes(r.input.bytes),
            or_none(&r.input.sha256)
        ),
    );
    line(
        "output",
        format!(
            "{}  sha256 {}",
            format_bytes(r.output.bytes),
            or_none(&r.output.sha256)
        ),
    );
    if let Some(p) = m.peak_memory_bytes {
        line("peak memory", format_bytes(p));
    }
    if let Some(e) = &r.error {
        line("error", format!("[{}] {}", e.layer.as_str(), e.message));
        if let Some(h) = &e.hint {
            line("hint", h.clone());
        }
    }
    if !r.integrity.is_empty() {
        line("integrity", r.integrity.join("\n             "));
    }
    if !r.denied.is_empty() {
        line(
            "denied",
            r.denied
                .iter()
                .map(describe_denial)
                .collect::<Vec<_>>()
                .join("\n             "),
        );
    }
    if !r.insist_missing.is_empty() {
        line("never did", r.insist_missing.join(", "));
    }
    if let Some(f) = &r.forged {
        line("forged", crate::cli::render::describe_forged(f));
    }
    if let Some(t) = &r.trust {
        let signer = match &t.signer {
            Some(s) => format!("signed by {s}"),
            None => "unsigned".to_string(),
        };
        line("trust", format!("tier {} ({signer})", t.tier));
    }
    let dropped = if r.events_dropped > 0 {
        format!(" (+{} not kept)", r.events_dropped)
    } else {
        String::new()
    };
    line("events", format!("{}{dropped}", r.events.len()));
    for e in &r.events {
        o.push_str(&format!("  {}\n", describe_event(e)));
    }
    for (name, doc) in [
        ("input data", &r.input.data),
        ("output data", &r.output.data),
    ] {
        if let Some(d) = doc {
            o.push_str(&format!(
                "{name:<13}{}\n",
                serde_json::to_string(d).unwrap_or_default()
            ));
        }
    }
    for (name, text) in [("stdout", &r.stdout), ("stderr", &r.stderr)] {
        if let Some(t) = text.as_ref().filter(|t| !t.is_empty()) {
            o.push_str(&format!("{name}:\n{}", t));
            if !t.ends_with('\n') {
                o.push('\n');
            }
        }
    }
    o.push_str(&format!("{:<13}seq {}, hash {}\n", "record", s.seq, s.hash));
    o
}

fn or_none(s: &str) -> String {
    if s.is_empty() {
        "-".into()
    } else {
        s.to_string()
    }
}

fn describe_denial(d: &Denial) -> String {
    let what = match d {
        Denial::Cli { argv, .. } => format!("command `{}`", shell_words(argv)),
        Denial::Net { host, port, .. } => format!(
            "host {host}{}",
            port.map(|p| format!(":{p}")).unwrap_or_default()
        ),
        Denial::Dns { name } => format!("DNS name {name}"),
        Denial::Write { path, .. } => format!("write to {path}"),
        Denial::Http { .. } | Denial::Secret { .. } => d.what(),
    };
    format!("{what} ({} layer: {})", d.layer().as_str(), d.explain())
}

/// An argv as a shell would need it: plain words bare, anything else in single quotes.
fn shell_words(argv: &[String]) -> String {
    let plain = |a: &str| {
        !a.is_empty()
            && a.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%^".contains(c))
    };
    argv.iter()
        .map(|a| {
            if plain(a) {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn describe_event(e: &Event) -> String {
    match e {
        Event::Started { setup_ms, .. } => {
            format!("started (setup {})", format_duration_ms(*setup_ms))
        }
        Event::Stdout { data } => format!("stdout {data:?}"),
        Event::Stderr { data } => format!("stderr {data:?}"),
        Event::Cli(c) => format!(
            "cli {} `{}`",
            if c.allowed { "allowed" } else { "denied " },
            shell_words(&c.argv)
        ),
        Event::Denied(d) => format!("denied {}", describe_denial(d)),
        Event::Limit { limit, detail } => format!("limit {limit}: {detail}"),
    }
}

#[cfg(test)]
mod tests {
    use super::shell_words;

    #[test]
    fn argv_is_shown_unambiguously() {
        let argv = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            shell_words(&argv(&["wc", "-l", "data/a.txt"])),
            "wc -l data/a.txt"
        );
        assert_eq!(
            shell_words(&argv(&["tr", "-d", " \n", ""])),
            "tr -d ' \n' ''"
        );
        assert_eq!(shell_words(&argv(&["echo", "it's"])), "echo 'it'\\''s'");
    }
}
