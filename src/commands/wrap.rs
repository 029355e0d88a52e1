//! `band wrap`: print or write a band and argv-style contracts for an Agent Skill (`band::wrap`).

use anyhow::{Result, bail};

use crate::cli::user_error;
use crate::cli::wrap::WrapArgs;
use band::proto::exit;
use band::wrap::{Access, plan};

pub(crate) fn cmd_wrap(args: WrapArgs) -> Result<u8> {
    let root = &args.dir;
    let access = Access {
        read: args.allow_read.clone(),
        write: args.allow_write.clone(),
    };
    let plan = plan(root, &access).map_err(|e| {
        user_error(
            e.to_string(),
            "band wrap wraps the programs in scripts/ and its subfolders (python, shell, node: a `#!` line, or a main guard below scripts/)",
        )
    })?;
    let existing: Vec<&str> = plan
        .files
        .iter()
        .filter(|f| root.join(&f.path).exists())
        .map(|f| f.path.as_str())
        .collect();
    if args.write && !args.force && !existing.is_empty() {
        bail!(user_error(
            format!(
                "{}: {} already exist{}",
                root.display(),
                existing.join(", "),
                if existing.len() == 1 { "s" } else { "" }
            ),
            "band wrap never replaces a skill's band or contracts: pass --force to replace them"
        ));
    }
    if args.write {
        for f in &plan.files {
            let path = root.join(&f.path);
            if let Some(dir) = path.parent() {
                fs_err::create_dir_all(dir)?;
            }
            fs_err::write(&path, &f.text)?;
        }
        let tree = band::lock::Tree::read(root).map_err(|e| user_error(e.to_string(), e.hint()))?;
        band::lock::write(root, &tree).map_err(|e| user_error(e.to_string(), e.hint()))?;
    }
    if args.json {
        let mut doc = serde_json::to_value(&plan)?;
        doc["written"] = serde_json::json!(args.write);
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(exit::OK);
    }
    let verb = if args.write { "Wrote" } else { "Would write" };
    println!("{verb} for `{}` ({}):", plan.skill, root.display());
    for f in &plan.files {
        let mark = if existing.contains(&f.path.as_str()) {
            " (replacing)"
        } else {
            ""
        };
        println!("\n--- {}{mark}", f.path);
        print!("{}", f.text);
    }
    if args.write {
        println!("\n--- band.lock (locked)");
    }
    println!("\nScripts:");
    for s in &plan.scripts {
        let by = s.interpreter.as_deref().unwrap_or("itself");
        println!(
            "  {}/{} -- ARGS…   ({}, run by {by})",
            plan.skill, s.name, s.entry
        );
        for c in &s.calls {
            println!("    calls `{c}` (read from its code: allowed as `{c} *`)");
        }
    }
    for f in &plan.skipped {
        println!("  not a script: {f} (a module or data: no `#!` line or main guard)");
    }
    if access.read.is_empty() && access.write.is_empty() {
        println!(
            "\nNo workspace file is readable or writable. Name the files the arguments take with \
             --allow-read/--allow-write, or draft them from a run: band learn {}/<script> -- ARGS…",
            plan.skill
        );
    }
    if !args.write {
        println!("\nNothing written: pass --write to write these files and lock the skill.");
    }
    Ok(exit::OK)
}
