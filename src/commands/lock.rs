//! `band lock [SKILL…]`: write each skill's `band.lock`, or with `--check` compare without writing.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;

use super::skills::find_skill;
use crate::cli::lock::LockArgs;
use crate::cli::user_error;
use band::lock::{self, LockState, Tree};
use band::proto::exit;

pub(crate) fn cmd_lock(args: LockArgs) -> Result<u8> {
    let roots: Vec<PathBuf> = if args.skills.is_empty() {
        let here = PathBuf::from(".");
        if !band::skill::is_skill_dir(&here) {
            return Err(user_error(
                "the current folder is not a skill",
                "name the skills to lock: `band lock text` or `band lock skills/text`",
            ));
        }
        vec![here]
    } else {
        args.skills
            .iter()
            .map(|s| find_skill(s.trim_end_matches('/'), &args.dirs))
            .collect::<Result<_>>()?
    };
    let mut out = crate::cli::render::Shown::stdout(args.json);
    let mut failed = false;
    let mut docs = Vec::new();
    for root in roots {
        let tree = Tree::read(&root).map_err(|e| user_error(e.to_string(), e.hint()))?;
        let shown = root.join(lock::LOCK_FILE);
        if !args.check {
            let written = lock_skill(&root, &tree)?;
            if args.json {
                docs.push(serde_json::json!({
                    "skill": root.display().to_string(),
                    "lock": shown.display().to_string(),
                    "state": "written",
                    "entries": written.entries.len(),
                    "bundle_sha256": written.bundle_sha256,
                }));
                continue;
            }
            writeln!(
                out,
                "wrote {} ({} entries, bundle {})",
                shown.display(),
                written.entries.len(),
                written.bundle_sha256
            )?;
            continue;
        }
        let state = lock::check(&root, &tree).map_err(|e| user_error(e.to_string(), e.hint()))?;
        if args.json {
            let (name, differences) = match &state {
                LockState::Matches => ("matches", Vec::new()),
                LockState::Unlocked => ("missing", Vec::new()),
                LockState::Differs(diffs) => {
                    ("differs", diffs.iter().map(|d| d.to_string()).collect())
                }
            };
            failed |= !matches!(state, LockState::Matches);
            docs.push(serde_json::json!({
                "skill": root.display().to_string(),
                "lock": shown.display().to_string(),
                "state": name,
                "differences": differences,
            }));
            continue;
        }
        match state {
            LockState::Matches => writeln!(out, "{}: the skill matches it", shown.display())?,
            LockState::Unlocked => {
                failed = true;
                writeln!(
                    out,
                    "{}: missing (run `band lock {}`)",
                    shown.display(),
                    root.display()
                )?;
            }
            LockState::Differs(diffs) => {
                failed = true;
                writeln!(out, "{}: the skill differs from it:", shown.display())?;
                for d in diffs {
                    writeln!(out, "  {d}")?;
                }
            }
        }
    }
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&docs)?)?;
    }
    Ok(if failed {
        exit::INTEGRITY_FAILED
    } else {
        exit::OK
    })
}

/// Write the lock of the skill at `root` (its files as `tree` read them), unless `band lint` finds
/// errors in it ([`refuse_lint_errors`]): what `band lock` and `band learn --write` do.
pub(crate) fn lock_skill(root: &std::path::Path, tree: &Tree) -> Result<lock::Lock> {
    refuse_lint_errors(root)?;
    lock::write(root, tree).map_err(|e| user_error(e.to_string(), e.hint()))
}

/// A lock vouches for a skill as it is: one that `band lint` finds errors in (a band with YAML
/// errors, a broken contract) is not locked, so that no run ever trusts a band that cannot
/// resolve. Warnings do not stop it.
fn refuse_lint_errors(root: &std::path::Path) -> Result<()> {
    const SHOWN: usize = 3;
    let (diagnostics, _) = band::lint::lint_skill(root);
    let mut errors: Vec<String> = Vec::new();
    for d in diagnostics
        .iter()
        .filter(|d| d.severity == band::diag::Severity::Error)
    {
        // A band file every script resolves is reported once per script: said once here.
        let headline = d.headline();
        if !errors.contains(&headline) {
            errors.push(headline);
        }
    }
    if errors.is_empty() {
        return Ok(());
    }
    let mut listed = errors[..errors.len().min(SHOWN)].join("\n  ");
    if errors.len() > SHOWN {
        listed.push_str(&format!("\n  and {} more", errors.len() - SHOWN));
    }
    Err(user_error(
        format!(
            "{} has {} lint error{}, so its {} was not written:\n  {listed}",
            root.display(),
            errors.len(),
            if errors.len() == 1 { "" } else { "s" },
            lock::LOCK_FILE
        ),
        format!(
            "fix them (`band lint {0}` shows each with its hint), then `band lock {0}`",
            root.display()
        ),
    ))
}

/// `band sign [SKILL] --key KEY`: sign the skill's band.lock into band.lock.sig. The lock must
/// match the skill as it is: a signature vouches for what the lock describes.
pub(crate) fn cmd_sign(args: crate::cli::lock::SignArgs) -> Result<u8> {
    let root = match &args.skill {
        Some(s) => find_skill(s.trim_end_matches('/'), &args.dirs)?,
        None => PathBuf::from("."),
    };
    let tree = Tree::read(&root).map_err(|e| user_error(e.to_string(), e.hint()))?;
    match lock::check(&root, &tree).map_err(|e| user_error(e.to_string(), e.hint()))? {
        LockState::Matches => {}
        LockState::Unlocked => {
            return Err(user_error(
                format!("{} has no {}", root.display(), lock::LOCK_FILE),
                format!("run `band lock {}` first, then sign", root.display()),
            ));
        }
        LockState::Differs(d) => {
            return Err(user_error(
                format!(
                    "{} differs from its {} ({} difference(s)): a signature vouches for the lock",
                    root.display(),
                    lock::LOCK_FILE,
                    d.len()
                ),
                format!(
                    "review the skill, run `band lock {}`, then sign",
                    root.display()
                ),
            ));
        }
    }
    let (written, fingerprint) = band::sign::sign_dir(&root, &args.key).map_err(|e| {
        user_error(
            e.to_string(),
            "pass an OpenSSH ed25519 private key: `ssh-keygen -t ed25519` makes one",
        )
    })?;
    println!("wrote {} (signer {fingerprint})", written.display());
    Ok(exit::OK)
}
