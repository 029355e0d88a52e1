//! The `band` command line.

use std::process::ExitCode;

mod cli;
mod commands;

fn main() -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // A run: band-server may start now, before clap reads the command line (issue 17).
    if let Some(target) = cli::argv::run_target(&argv) {
        commands::run::start_early(target.as_deref());
    }
    let (parsed, argv) = cli::parse(argv);
    let json = cli::argv::wants_json(&argv);
    let code = match parsed {
        Ok(args) => {
            cli::color::init(args.global.color);
            match commands::dispatch(args) {
                Ok(code) => code,
                Err(err) => cli::error::report(&err, json),
            }
        }
        Err(e) => cli::error::report_usage(&e, json),
    };
    // A band-server started early for a run that never took it.
    commands::run::forget_early();
    ExitCode::from(code)
}
