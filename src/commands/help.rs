//! `band help <skill>/<script>`: a script's arguments, from its input schema.

use std::io::Write;

use anyhow::{Context, Result, bail};

use super::skills::{find_script, split_target};
use crate::cli::{HelpArgs, user_error};
use band::proto::exit;

pub(crate) fn cmd_help(args: HelpArgs) -> Result<u8> {
    let (skill_name, script) = split_target(&args.target);
    let Some(script) = script else {
        bail!(user_error(
            format!("`{}` names no script", args.target),
            "use `band help <skill>/<script>`; `band list` shows them"
        ));
    };
    let skill = find_script(skill_name, script, &args.skills)?;
    let root = &skill.root;
    // `schemas/input/<script>.json`, upstream's co-located `input_schema.json`, or none (no input).
    let schema = match band::contract::SchemaSet::contract_candidates("input", script)
        .iter()
        .map(|rel| root.join(rel))
        .find(|p| p.is_file())
    {
        Some(schema_path) => {
            let text = fs_err::read_to_string(&schema_path)?;
            serde_json::from_str(&text)
                .with_context(|| format!("{} is not JSON", schema_path.display()))?
        }
        None => band::contract::no_input_schema(),
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "band run {}/{script} [--key=value …]", skill.name)?;
    if let Some(desc) = schema.get("description").and_then(|d| d.as_str()) {
        writeln!(out, "\n{desc}")?;
    }
    let required: Vec<&str> = schema
        .get("required")
        .and_then(|r| r.as_array())
        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    writeln!(out, "\nArguments:")?;
    let props = schema.get("properties").and_then(|p| p.as_object());
    match props {
        Some(props) if !props.is_empty() => {
            for (name, p) in props {
                let ty = p
                    .get("type")
                    .map(|t| t.to_string().replace('"', ""))
                    .unwrap_or_else(|| "any".into());
                let desc = p.get("description").and_then(|d| d.as_str()).unwrap_or("");
                let req = if required.contains(&name.as_str()) {
                    " (required)"
                } else {
                    ""
                };
                writeln!(out, "  --{name} <{ty}>{req}  {desc}")?;
            }
        }
        _ => writeln!(out, "  (none)")?,
    }
    Ok(exit::OK)
}
