//! `band init` and `band new-script`: a new skill, or a new script in a skill
//! ([`band::scaffold`]), and what to run next.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::skills::find_skill;
use crate::cli::scaffold::{InitArgs, Lang, NewScriptArgs};
use crate::cli::user_error;
use band::proto::exit;
use band::scaffold::{self, ScaffoldError};

pub(crate) fn cmd_init(args: InitArgs) -> Result<u8> {
    let root = &args.path;
    let name = scaffold::init(root, &args.script, lang(args.lang)).map_err(error)?;
    let run = format!(
        "band run --skills {} {name}/{} --name=World",
        parent_or_dot(root).display(),
        args.script
    );
    if args.json {
        let doc = serde_json::json!({
            "skill": name,
            "path": root.display().to_string(),
            "next": [format!("band lint {}", root.display()), run],
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(exit::OK);
    }
    println!("Created skill `{name}` in {}.", root.display());
    println!("  band lint {}", root.display());
    println!("  {run}");
    Ok(exit::OK)
}

pub(crate) fn cmd_new_script(args: NewScriptArgs) -> Result<u8> {
    scaffold::check_name("script", &args.name).map_err(error)?;
    let root = find_skill(&args.skill, &args.skills)?;
    let lang = lang(args.lang);
    let new = scaffold::new_script(&root, &args.name, lang).map_err(error)?;
    if args.json {
        let files: Vec<String> = new
            .files
            .iter()
            .map(|f| root.join(&f.rel).display().to_string())
            .collect();
        let doc = serde_json::json!({ "files": files, "own_band": new.own_band });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(exit::OK);
    }
    for f in &new.files {
        println!("created {}", root.join(&f.rel).display());
    }
    if new.own_band {
        println!(
            "The skill's band does not allow `{}`, so scripts/{}.band.md governs this script alone.",
            lang.cli_rule(&args.name),
            args.name
        );
    }
    Ok(exit::OK)
}

fn lang(l: Lang) -> scaffold::Lang {
    match l {
        Lang::Sh => scaffold::Lang::Sh,
        Lang::Python => scaffold::Lang::Python,
    }
}

/// A scaffold error with its hint, for the user.
fn error(e: ScaffoldError) -> anyhow::Error {
    match e.hint() {
        Some(hint) => user_error(e.to_string(), hint),
        None => anyhow::Error::new(e),
    }
}

fn parent_or_dot(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}
