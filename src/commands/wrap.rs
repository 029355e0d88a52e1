//! `band wrap`: print or write a band and argv-style contracts for an Agent Skill (`band::wrap`).

use anyhow::{Result, bail};

use crate::cli::render::{for_terminal, json_text, write_stdout};
use crate::cli::user_error;
use crate::cli::wrap::WrapArgs;
use band::proto::exit;
use band::wrap::{Access, plan, shown};

pub(crate) fn cmd_wrap(args: WrapArgs) -> Result<u8> {
    let root = &args.dir;
    let access = Access {
        read: args.allow_read.clone(),
        write: args.allow_write.clone(),
        net: args.allow_net.clone(),
    };
    // Each host as lint reads it in a band of its own, so a refused one is named with its hint
    // (the drafted band is checked whole again before anything is written).
    for host in &access.net {
        let doc = serde_json::json!({
            "band": "draft", "description": "d", "version": 1, "allow": { "net": [host] },
        });
        if let Some(d) = band::lint::band_text_findings(&format!("---\n{doc}\n---\n")).first() {
            bail!(user_error(
                format!("--allow-net {}: {}", band::wrap::shown(host), d.message),
                d.hint.as_deref().unwrap_or(
                    "write a host as in allow.net: `api.example.com:443`, `localhost:8000`"
                ),
            ));
        }
    }
    let mut plan = plan(root, &access).map_err(|e| user_error(e.to_string(), e.hint()))?;
    if !args.with.is_empty() {
        let text = band::deps::requirements_file(&args.with)
            .map_err(|e| user_error(format!("--with: {}", e.message), e.hint))?;
        plan.files.push(band::wrap::WrapFile {
            path: band::deps::REQUIREMENTS.into(),
            text,
        });
    }
    let existing: Vec<&str> = plan
        .files
        .iter()
        .filter(|f| root.join(&f.path).symlink_metadata().is_ok())
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
    // Why the written skill was not locked (lint errors), said after what was written: the
    // files are the user's to see and fix, and a second `--write` needs `--force`.
    let mut not_locked: Option<anyhow::Error> = None;
    if args.write {
        // The skill must be lockable before anything is written (a file name band refuses to
        // lock would leave an unlocked band behind).
        band::lock::Tree::read(root)
            .map_err(|e| user_error(for_terminal(&e.to_string()).into_owned(), e.hint()))?;
        // All or nothing, never through a link: a `schemas/output` that is a file, or a link
        // planted where a contract goes, stops the write before any file is written.
        let files: Vec<(&std::path::Path, &[u8])> = plan
            .files
            .iter()
            .map(|f| (std::path::Path::new(&f.path), f.text.as_bytes()))
            .collect();
        band::skillfs::write_files(root, &files).map_err(|e| {
            user_error(
                for_terminal(&e.to_string()).into_owned(),
                "remove or rename what is in the way, then run band wrap --write again",
            )
        })?;
        // Locked as `band lock` locks it: not when lint finds errors in the skill (its band and
        // contracts are written all the same, for the user to see and fix).
        let tree = band::lock::Tree::read(root).map_err(|e| user_error(e.to_string(), e.hint()))?;
        not_locked = crate::commands::lock::lock_skill(root, &tree).err();
    }
    if args.json {
        if let Some(e) = not_locked {
            return Err(e);
        }
        let mut doc = serde_json::to_value(&plan)?;
        doc["written"] = serde_json::json!(args.write);
        write_stdout(&format!(
            "{}\n",
            json_text(&serde_json::to_string_pretty(&doc)?)
        ))?;
        return Ok(exit::OK);
    }
    // What the skill's files control (its description, paths, names) is made inert for a
    // terminal; names and paths on one line are escaped ([`shown`]).
    let mut o = String::new();
    let verb = if args.write { "Wrote" } else { "Would write" };
    o.push_str(&format!(
        "{verb} for `{}` ({}):\n",
        plan.skill,
        root.display()
    ));
    for f in &plan.files {
        let mark = if existing.contains(&f.path.as_str()) {
            " (replacing)"
        } else {
            ""
        };
        o.push_str(&format!("\n--- {}{mark}\n{}", f.path, f.text));
    }
    if args.write {
        o.push_str(match not_locked {
            None => "\n--- band.lock (locked)\n",
            Some(_) => "\n--- band.lock (not written: see the error below)\n",
        });
    }
    o.push_str("\nScripts:\n");
    for s in &plan.scripts {
        let by = s.interpreter.as_deref().unwrap_or("itself");
        o.push_str(&format!(
            "  {}/{} -- ARGS…   ({}, run by {by}; an entry point: {})\n",
            plan.skill, s.name, s.entry, s.why
        ));
        for c in &s.calls {
            o.push_str(&format!(
                "    calls `{c}` (read from its code: allowed as `{c} *`)\n"
            ));
        }
        for u in &s.unseen {
            o.push_str(&format!(
                "    runs a command band cannot read from its code (allow it by hand, or draft it with band learn): {}\n",
                u.escape_debug()
            ));
        }
    }
    for f in &plan.skipped {
        o.push_str(&format!(
            "  not a script: {} ({})\n",
            f.path.escape_debug(),
            f.why
        ));
    }
    for f in &plan.refused {
        o.push_str(&format!(
            "  not wrapped: {} (its name, path or interpreter has a character band cannot write into a rule literally: rename it)\n",
            shown(f)
        ));
    }
    if access.read.is_empty() && access.write.is_empty() {
        o.push_str(&format!(
            "\nNo workspace file is readable or writable. Name the files the arguments take with \
             --allow-read/--allow-write, or draft them from a run: band learn {}/<script> -- ARGS…\n",
            plan.skill
        ));
    }
    if !args.write {
        o.push_str("\nNothing written: pass --write to write these files and lock the skill.\n");
    }
    write_stdout(&for_terminal(&o))?;
    match not_locked {
        Some(e) => Err(e),
        None => Ok(exit::OK),
    }
}
