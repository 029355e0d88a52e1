//! Renderers for diagnostics: human (rustc-style snippets), JSON, and SARIF 2.1.0.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::Report;
use crate::diag::{Code, Diagnostic, Severity, inert};

/// rustc/ruff-style text: headline, location, source snippet with a caret, hint; then a summary.
pub fn human(report: &Report, color: bool) -> String {
    let mut sources: BTreeMap<PathBuf, Option<String>> = BTreeMap::new();
    let mut out = String::new();
    let paint = |s: &str, code: &str| {
        if color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    };
    for d in &report.diagnostics {
        let sev = match d.severity {
            Severity::Error => paint(&format!("error[{}]", d.code), "1;31"),
            Severity::Warning => paint(&format!("warning[{}]", d.code), "1;33"),
        };
        // A skill's file names and the text quoting them are the skill author's: inert here.
        let _ = writeln!(out, "{sev}: {}", inert(&d.message));
        let _ = writeln!(
            out,
            "  {} {}",
            paint("-->", "1;34"),
            inert(&crate::diag::location_prefix(&d.path, d.loc))
        );
        if d.loc.line > 0 {
            let src = sources
                .entry(d.path.clone())
                // Never through a link: what a diagnostic quotes must be the file lint parsed, not
                // `/proc/self/environ` behind a symlinked BAND.md (issue 36).
                .or_insert_with(|| {
                    crate::skillfs::read_quotable(&d.path, crate::skillfs::MAX_SKILL_MD_BYTES)
                });
            if let Some(line) = src.as_deref().and_then(|s| s.lines().nth(d.loc.line - 1)) {
                let no = d.loc.line.to_string();
                let pad = " ".repeat(no.len());
                let (line, col) = window(line.trim_end_matches('\r'), d.loc.col);
                let line = inert(&line);
                let _ = writeln!(out, "{pad} {}", paint("|", "1;34"));
                let _ = writeln!(out, "{} {} {line}", paint(&no, "1;34"), paint("|", "1;34"));
                if col > 0 {
                    let caret_at: String = line
                        .chars()
                        .take(col - 1)
                        .map(|c| if c == '\t' { '\t' } else { ' ' })
                        .collect();
                    let _ = writeln!(
                        out,
                        "{pad} {} {caret_at}{}",
                        paint("|", "1;34"),
                        paint("^", "1;31")
                    );
                }
            }
        }
        if let Some(h) = &d.hint {
            let _ = writeln!(out, "  {} {}", paint("= hint:", "1;36"), inert(h));
        }
        out.push('\n');
    }
    out.push_str(&summary_line(report));
    out.push('\n');
    out
}

/// The most characters of a source line a diagnostic quotes.
const QUOTED_CHARS: usize = 120;

/// What a diagnostic quotes of `line`: all of it when short, else [`QUOTED_CHARS`] around
/// column `col` (1-based; 0: none) with `…` where it was cut; and the column in what is quoted.
/// A line of 60 KB quoted once per diagnostic on it would make lint's output quadratic.
fn window(line: &str, col: usize) -> (String, usize) {
    let n = line.chars().count();
    if n <= QUOTED_CHARS {
        return (line.to_string(), col);
    }
    let start = col.saturating_sub(QUOTED_CHARS / 2).min(n - QUOTED_CHARS);
    let mut quoted: String = line.chars().skip(start).take(QUOTED_CHARS).collect();
    if start > 0 {
        quoted.insert(0, '…');
    }
    if start + QUOTED_CHARS < n {
        quoted.push('…');
    }
    let col = if col == 0 {
        0
    } else {
        col - start + usize::from(start > 0)
    };
    (quoted, col)
}

/// `Checked 3 skills and 5 band files: 2 errors, 1 warning.`
pub fn summary_line(report: &Report) -> String {
    let plural = |n: usize, w: &str| format!("{n} {w}{}", if n == 1 { "" } else { "s" });
    let (e, w) = (
        report.count(Severity::Error),
        report.count(Severity::Warning),
    );
    let checked = format!(
        "Checked {} and {}",
        plural(report.skills, "skill"),
        plural(report.band_files, "band file")
    );
    if e == 0 && w == 0 {
        format!("{checked}: no problems.")
    } else {
        format!(
            "{checked}: {}, {}.",
            plural(e, "error"),
            plural(w, "warning")
        )
    }
}

/// One JSON document: every diagnostic plus a summary.
pub fn json(report: &Report) -> serde_json::Value {
    json!({
        "diagnostics": report.diagnostics.iter().map(|d| json!({
            "severity": d.severity,
            "code": d.code,
            "name": d.code.name(),
            "message": d.message,
            "path": d.path,
            "line": d.loc.line,
            "column": d.loc.col,
            "hint": d.hint,
        })).collect::<Vec<_>>(),
        "summary": {
            "skills": report.skills,
            "band_files": report.band_files,
            "errors": report.count(Severity::Error),
            "warnings": report.count(Severity::Warning),
        }
    })
}

/// SARIF 2.1.0, for code-scanning UIs. Paths are made relative to `base` when possible.
pub fn sarif(report: &Report, base: &Path) -> serde_json::Value {
    let rules: Vec<_> = Code::ALL
        .iter()
        .map(|c| {
            json!({
                "id": c.as_str(),
                "name": c.name(),
                "shortDescription": { "text": c.summary() },
                "defaultConfiguration": { "level": level(c.default_severity()) },
                "helpUri": c.help_uri(),
            })
        })
        .collect();
    let results: Vec<_> = report
        .diagnostics
        .iter()
        .map(|d| sarif_result(d, base))
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "band",
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://github.com/band-sh/band",
                "rules": rules,
            }},
            "results": results,
        }]
    })
}

fn sarif_result(d: &Diagnostic, base: &Path) -> serde_json::Value {
    let uri = d
        .path
        .strip_prefix(base)
        .unwrap_or(&d.path)
        .to_string_lossy()
        .replace('\\', "/");
    let mut message = d.message.clone();
    if let Some(h) = &d.hint {
        message.push_str("\nhint: ");
        message.push_str(h);
    }
    let mut region = serde_json::Map::new();
    if d.loc.line > 0 {
        region.insert("startLine".into(), json!(d.loc.line));
        if d.loc.col > 0 {
            region.insert("startColumn".into(), json!(d.loc.col));
        }
    }
    let mut physical = json!({ "artifactLocation": { "uri": uri } });
    if !region.is_empty() {
        physical["region"] = serde_json::Value::Object(region);
    }
    json!({
        "ruleId": d.code.as_str(),
        "ruleIndex": Code::ALL.iter().position(|c| *c == d.code),
        "level": level(d.severity),
        "message": { "text": message },
        "locations": [{ "physicalLocation": physical }],
    })
}

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A long line is quoted around its column, the caret still under it; a short one whole.
    #[test]
    fn a_long_line_is_quoted_around_its_column() {
        assert_eq!(window("cli: [a]", 7), ("cli: [a]".to_string(), 7));
        let line = format!("cli: [{}X{}]", "5, ".repeat(1000), ", 5".repeat(1000));
        let col = line.find('X').expect("X") + 1;
        let (quoted, at) = window(&line, col);
        assert_eq!(quoted.chars().count(), QUOTED_CHARS + 2, "{quoted}");
        assert!(quoted.starts_with('…') && quoted.ends_with('…'), "{quoted}");
        assert_eq!(quoted.chars().nth(at - 1), Some('X'), "{quoted} {at}");
        // Near the start: cut at the end only; no column: none.
        let (quoted, at) = window(&line, 3);
        assert_eq!((quoted.chars().nth(2), at), (Some('i'), 3));
        assert_eq!(window(&line, 0).1, 0);
    }
}
