//! `band fmt`: normalise band files ([`band::manifest::format`]); `--check` prints what would
//! change, as a unified diff, without writing. A locked skill whose lock a reformat breaks is
//! named, with the `band lock` to run.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::cli::{FmtArgs, user_error};
use band::lock::{self, LockState, Tree};
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
    let mut relock: Vec<PathBuf> = Vec::new();
    // Under --json: each file that changes (or would), with its diff; then the skills to re-lock.
    let mut json_files: Vec<serde_json::Value> = Vec::new();
    let mut out = crate::cli::render::Shown::stdout(args.json);
    for f in files {
        // Read and written as the run reads a skill: never through a link out of the skill (or,
        // for a band outside any skill, out of its folder): `band fmt` must not rewrite the
        // `~/.bashrc` a hostile BAND.md links to.
        let (scope, file) = band::manifest::band_scope(&f);
        let src =
            band::skillfs::read_to_string(&scope, &file, band::manifest::MAX_BAND_FILE_BYTES)?;
        let formatted = format_band(&src).map_err(|e| {
            user_error(
                format!("{}: {e}", f.display()),
                format!("run `band lint {}`", f.display()),
            )
        })?;
        if formatted == src {
            continue;
        }
        changed += 1;
        let locked = locked_skill(&f).filter(|root| !relock.contains(root));
        if args.json {
            let shown = f.display().to_string();
            let diff = similar::TextDiff::from_lines(&src, &formatted)
                .unified_diff()
                .context_radius(2)
                .header(&shown, &format!("{shown} (formatted)"))
                .to_string();
            if !args.check {
                band::skillfs::replace(&scope, &file, formatted.as_bytes())?;
            }
            json_files.push(serde_json::json!({
                "file": shown,
                "written": !args.check,
                "diff": diff,
            }));
        } else if args.check {
            writeln!(out, "would reformat {}", f.display())?;
            let shown = f.display().to_string();
            let diff = similar::TextDiff::from_lines(&src, &formatted);
            write!(
                out,
                "{}",
                diff.unified_diff()
                    .context_radius(2)
                    .header(&shown, &format!("{shown} (formatted)"))
            )?;
        } else {
            band::skillfs::replace(&scope, &file, formatted.as_bytes())?;
            writeln!(out, "reformatted {}", f.display())?;
        }
        if let Some(root) = locked {
            relock.push(root);
        }
    }
    let mut stale_locks: Vec<String> = Vec::new();
    for root in &relock {
        // After a write, only a lock that no longer matches needs redoing; under --check, a
        // lock that matches now would stop matching once fmt writes.
        let stale = args.check || lock_state(root).is_some_and(|s| s != LockState::Matches);
        if !stale {
            continue;
        }
        let shown = root.display();
        stale_locks.push(shown.to_string());
        if args.json {
            continue;
        }
        if args.check {
            writeln!(
                out,
                "{shown} is locked: after `band fmt`, run `band lock {shown}` (its band.lock would no longer match)"
            )?;
        } else {
            writeln!(
                out,
                "{shown} is locked and its band.lock no longer matches: run `band lock {shown}`"
            )?;
        }
    }
    if args.json {
        let value = serde_json::json!({
            "check": args.check,
            "changed": changed,
            "files": json_files,
            "relock": stale_locks,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&value)?)?;
    }
    Ok(if args.check && changed > 0 {
        exit::SCRIPT_FAILED
    } else {
        exit::OK
    })
}

/// The skill a band file belongs to (the nearest folder above it with a SKILL.md), if that
/// skill has a band.lock.
fn locked_skill(file: &Path) -> Option<PathBuf> {
    let mut dir = file.parent();
    while let Some(d) = dir {
        let d = if d.as_os_str().is_empty() {
            Path::new(".")
        } else {
            d
        };
        if d.join("SKILL.md").is_file() {
            return d.join(lock::LOCK_FILE).is_file().then(|| d.to_path_buf());
        }
        dir = d.parent().filter(|_| d != Path::new("."));
    }
    None
}

fn lock_state(root: &Path) -> Option<LockState> {
    let tree = Tree::read(root).ok()?;
    lock::check(root, &tree).ok()
}
