//! `band lint`: check skills and band files.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;

use crate::cli::{Format, LintArgs};
use band::lint::{self, render};
use band::proto::exit;

pub(crate) fn cmd_lint(args: LintArgs) -> Result<u8> {
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths
    };
    let mut report = lint::lint_paths(&paths);
    // What this machine's site policy would refuse (a file band-server cannot use is
    // `band doctor`'s to report: lint checks the skills).
    if let Ok(Some(site)) = band::policy::site::load_site(&band::policy::site::local_path()) {
        report
            .diagnostics
            .extend(lint::site::check_paths(&paths, &site));
    }
    let mut out = std::io::stdout().lock();
    match args.format {
        Format::Human => {
            let color = crate::cli::color::stdout();
            out.write_all(render::human(&report, color).as_bytes())?;
        }
        Format::Json => writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&render::json(&report))?
        )?,
        Format::Sarif => {
            let base = std::env::current_dir().unwrap_or_default();
            writeln!(
                out,
                "{}",
                serde_json::to_string_pretty(&render::sarif(&report, &base))?
            )?;
        }
    }
    let errors = report.count(band::diag::Severity::Error);
    let warnings = report.count(band::diag::Severity::Warning);
    Ok(if errors > 0 || (args.deny_warnings && warnings > 0) {
        exit::SCRIPT_FAILED
    } else {
        exit::OK
    })
}
