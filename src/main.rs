//! The `band` command line.

use std::process::ExitCode;

use clap::Parser;

mod cli;
mod commands;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match commands::dispatch(args) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            // A closed pipe (`band list | head`) is not an error.
            if err.chain().any(|e| {
                e.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            eprintln!("error: {err:#}");
            if let Some(hint) = err.chain().find_map(cli::hint_of) {
                eprintln!("\nhint: {hint}");
            }
            ExitCode::from(band::proto::exit::USAGE)
        }
    }
}
