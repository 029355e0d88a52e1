//! Rendering a run for people and machines: its events on stderr as they come, the status line
//! of a run that did not end `ok`, and the `--json` document.

use anyhow::Result;

use band::client::outcome::Outcome;
use band::proto;

pub(crate) fn show_event(ev: &proto::Event) {
    match ev {
        proto::Event::Stderr { data } => eprint!("{data}"),
        proto::Event::Denied(d) => eprintln!("band: denied: {}", describe_denial(d)),
        proto::Event::Limit { limit, detail } => {
            eprintln!("band: limit `{limit}` reached: {detail}")
        }
        _ => {}
    }
}

fn describe_denial(d: &proto::Denial) -> String {
    match d {
        proto::Denial::Cli { argv, .. } => format!("command `{}`", argv.join(" ")),
        proto::Denial::Net { host, port, .. } => format!(
            "host {host}{}",
            port.map(|p| format!(":{p}")).unwrap_or_default()
        ),
        proto::Denial::Dns { name } => format!("DNS name {name}"),
        proto::Denial::Write { path, .. } => format!("write to {path}"),
    }
}

/// The `--json` document of a run: the result, with the run's names and fingerprints.
pub(crate) fn result_json(outcome: &Outcome) -> Result<serde_json::Value> {
    let result = &outcome.result;
    let mut v = serde_json::to_value(result)?;
    if let Some(o) = v.as_object_mut() {
        o.remove("written");
        o.insert(
            "written_files".into(),
            serde_json::json!(
                result
                    .written
                    .iter()
                    .map(|f| f.path.clone())
                    .collect::<Vec<_>>()
            ),
        );
        o.insert("skill".into(), outcome.skill.clone().into());
        o.insert("script".into(), outcome.script.clone().into());
        o.insert("target".into(), outcome.target.to_string().into());
        o.insert(
            "fingerprints".into(),
            serde_json::json!({
                "bundle_sha256": outcome.bundle_sha256,
                "band_sha256": outcome.band_sha256,
                "policy_sha256": outcome.policy_sha256,
            }),
        );
        o.insert(
            "io".into(),
            serde_json::json!({
                "input_bytes": outcome.input_bytes,
                "input_sha256": outcome.input_sha256,
                "output_bytes": outcome.output_bytes,
                "output_sha256": outcome.output_sha256,
            }),
        );
        o.insert("started_at_ms".into(), outcome.started_at_ms.into());
        if !outcome.secret_warnings.is_empty() {
            o.insert(
                "secret_warnings".into(),
                outcome.secret_warnings.clone().into(),
            );
        }
    }
    Ok(v)
}

/// The status line of a run that did not end `ok`, on stderr: status, exit code, layer, hint.
pub(crate) fn print_failure(result: &proto::RunResult) {
    let s = result.status;
    let detail = result
        .error
        .as_ref()
        .map(|e| format!(" [{}] {}", e.layer.as_str(), e.message))
        .unwrap_or_default();
    let code = result
        .exit_code
        .map(|c| format!(" (exit {c})"))
        .unwrap_or_default();
    eprintln!("band: {s}{code}: {}{detail}", s.describe());
    if !result.insist_missing.is_empty() {
        eprintln!("band: never happened: {}", result.insist_missing.join(", "));
    }
    if let Some(h) = result.error.as_ref().and_then(|e| e.hint.as_ref()) {
        eprintln!("hint: {h}");
    }
}
