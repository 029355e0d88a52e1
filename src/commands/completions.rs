//! `band completions <shell>` and `band man`: generated from the same clap definition as the
//! command line itself (clap_complete, clap_mangen), so they cannot drift from it.

use anyhow::{Context, Result};
use clap::CommandFactory;

use crate::cli::render::write_stdout;
use crate::cli::{Cli, CompletionsArgs, ManArgs};
use band::proto::exit;

pub(crate) fn cmd_completions(args: CompletionsArgs) -> Result<u8> {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "band", &mut script);
    write_stdout(&String::from_utf8_lossy(&script))?;
    Ok(exit::OK)
}

pub(crate) fn cmd_man(args: ManArgs) -> Result<u8> {
    let command = Cli::command();
    match args.dir {
        Some(dir) => {
            fs_err::create_dir_all(&dir)?;
            clap_mangen::generate_to(command, &dir)
                .with_context(|| format!("cannot write the manual pages to {}", dir.display()))?;
            eprintln!("band: wrote the manual pages to {}", dir.display());
        }
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(command)
                .render(&mut page)
                .context("cannot render the manual page")?;
            write_stdout(&String::from_utf8_lossy(&page))?;
        }
    }
    Ok(exit::OK)
}
