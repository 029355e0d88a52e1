//! `band list`: skills and their scripts.

use std::io::Write;

use anyhow::Result;

use super::skills::skill_dirs;
use crate::cli::ListArgs;
use band::proto::exit;

pub(crate) fn cmd_list(args: ListArgs) -> Result<u8> {
    let mut seen = std::collections::BTreeMap::new();
    for d in skill_dirs(&args.skills)? {
        for root in band::skill::find_skills(&d) {
            let (skill, _) = band::skill::load_skill(&root);
            seen.entry(skill.name.clone()).or_insert(skill);
        }
    }
    let mut out = crate::cli::render::Shown::stdout(args.json);
    if args.names {
        for s in seen.values() {
            for x in &s.scripts {
                writeln!(out, "{}/{}", s.name, x.name)?;
            }
        }
        return Ok(exit::OK);
    }
    if args.json {
        let v: Vec<_> = seen
            .values()
            .map(|s| {
                serde_json::json!({
                    "skill": s.name,
                    "path": s.root,
                    "description": s.skill_md.as_ref().map(|m| m.description.clone()),
                    "scripts": s.scripts.iter().map(|x| x.name.clone()).collect::<Vec<_>>(),
                })
            })
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(exit::OK);
    }
    if seen.is_empty() {
        writeln!(
            out,
            "No skills found. Pass --skills DIR or set $BAND_SKILLS_PATH."
        )?;
        return Ok(exit::OK);
    }
    // Short enough to paste into an agent's context: one sentence per skill, scripts on one line.
    for s in seen.values() {
        let desc = s
            .skill_md
            .as_ref()
            .map(|m| first_sentence(&m.description))
            .unwrap_or_default();
        let scripts: Vec<String> = s
            .scripts
            .iter()
            .map(|x| format!("{}/{}", s.name, x.name))
            .collect();
        writeln!(out, "{}: {desc}\n  {}", s.name, scripts.join("  "))?;
    }
    writeln!(
        out,
        "\nRun: band <skill>/<script> --key=value   Arguments: band help <skill>/<script>"
    )?;
    Ok(exit::OK)
}

/// The first sentence of a description (up to the first ". "), for `band list`.
fn first_sentence(text: &str) -> String {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match text.find(". ") {
        Some(i) => text[..=i].to_string(),
        None => text,
    }
}
