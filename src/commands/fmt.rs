//! `band fmt`: normalise band files ([`band::manifest::format`]); `--check` reports files that
//! would change without writing.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;

use crate::cli::{FmtArgs, user_error};
use band::manifest::format::{collect, format_band};
use band::proto::exit;

pub(crate) fn cmd_fmt(args: FmtArgs) -> Result<u8> {
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths
    };
    let mut files = Vec::new();
    for p in &paths {
        collect(p, &mut files);
    }
    let mut changed = 0usize;
    let mut out = std::io::stdout().lock();
    for f in files {
        let src = fs_err::read_to_string(&f)?;
        let formatted = format_band(&src).map_err(|e| {
            user_error(
                format!("{}: {e}", f.display()),
                format!("run `band lint {}`", f.display()),
            )
        })?;
        if formatted != src {
            changed += 1;
            if args.check {
                writeln!(out, "would reformat {}", f.display())?;
            } else {
                fs_err::write(&f, formatted)?;
                writeln!(out, "reformatted {}", f.display())?;
            }
        }
    }
    Ok(if args.check && changed > 0 {
        exit::SCRIPT_FAILED
    } else {
        exit::OK
    })
}
