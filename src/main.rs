//! The `band` command line.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

mod cli;
mod commands;

fn main() -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // A run: band-server may start now, before clap reads the command line (issue 17).
    if let Some(target) = cli::argv::run_target(&argv) {
        commands::run::start_early(target.as_deref());
    }
    // A plain run is read by `band run`'s command alone (`cli::fast_run`); anything else, and
    // every usage error, by the whole command line's.
    let (parsed, argv) = match cli::fast_run(&argv) {
        Some((run, argv)) => (Ok(run), argv),
        None => {
            let command = cli::Cli::command();
            let argv = cli::argv::normalize(&command, argv);
            let command = command.color(cli::color::from_argv(&argv));
            let parsed = command
                .try_get_matches_from(&argv)
                .and_then(|m| cli::Cli::from_arg_matches(&m));
            (parsed, argv)
        }
    };
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
