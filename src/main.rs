//! The `band` command line.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

mod cli;
mod commands;

fn main() -> ExitCode {
    let command = cli::Cli::command();
    let argv = cli::argv::normalize(&command, std::env::args_os().collect());
    let json = cli::argv::wants_json(&argv);
    let command = command.color(cli::color::from_argv(&argv));
    let args = match command
        .try_get_matches_from(&argv)
        .and_then(|m| cli::Cli::from_arg_matches(&m))
    {
        Ok(args) => args,
        Err(e) => return ExitCode::from(cli::error::report_usage(&e, json)),
    };
    cli::color::init(args.color);
    match commands::dispatch(args) {
        Ok(code) => ExitCode::from(code),
        Err(err) => ExitCode::from(cli::error::report(&err, json)),
    }
}
