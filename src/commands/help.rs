//! `band help <skill>/<script>` (also `band <skill>/<script> --help`): a script's arguments, from
//! its input schema with its `$ref`s, `allOf`, `anyOf` and `oneOf` followed
//! ([`band::contract::describe_args`]); and `band help <command>`, clap's help of a command.

use anyhow::{Result, bail};
use serde_json::Value;

use super::skills::{find_script, split_target};
use crate::cli::render::{for_terminal, json_text, write_stdout};
use crate::cli::{HelpArgs, user_error};
use band::contract::{ArgDoc, SchemaSet, describe_args};
use band::proto::exit;

pub(crate) fn cmd_help(args: HelpArgs) -> Result<u8> {
    let path: Vec<&str> = args.target.iter().map(String::as_str).collect();
    let [target] = path[..] else {
        return command_help(&path);
    };
    let (skill_name, script) = split_target(target);
    let Some(script) = script else {
        return command_help(&path);
    };
    let skill = find_script(skill_name, script, &args.skills)?;
    let (schemas, _) = SchemaSet::load_dir(&skill.root);
    // No input schema at all: the script takes no input (upstream's layout allows it).
    let none = band::contract::no_input_schema();
    let schema = if schemas.input_rel(script).is_none() {
        Some(&none)
    } else {
        schemas.input(script)
    };
    let Some(schema) = schema else {
        bail!(user_error(
            format!(
                "{}/{script} has no readable input schema (schemas/input/{script}.json)",
                skill.name
            ),
            format!("`band lint {}` says what is wrong", skill.root.display())
        ));
    };
    let page = ScriptHelp {
        target: format!("{}/{script}", skill.name),
        description: schema
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_string),
        args: describe_args(schema, &schemas),
        one_of: one_of_groups(schema),
    };
    if args.json {
        let text = serde_json::to_string_pretty(&page.json())?;
        write_stdout(&json_text(&format!("{text}\n")))?;
    } else if schemas.takes_argv(script) {
        // An argv-style script (`band wrap`): its arguments are its own command line.
        let mut out = format!("Usage: band {} [band's flags] -- ARGS…\n", page.target);
        if let Some(desc) = &page.description {
            out.push_str(&format!("\n{desc}\n"));
        }
        out.push_str(
            "\nArguments: the script's own command line. Every word after `--` is passed to it as it\n\
             is (workspace files by their path relative to the workspace); `--input '{\"args\": [...]}'`\n\
             gives the same.\n",
        );
        out.push_str(&format!("\nExample:\n  band {} -- ARGS…\n", page.target));
        // The schema's descriptions are the skill author's text: inert at a terminal.
        write_stdout(&for_terminal(&out))?;
    } else {
        write_stdout(&for_terminal(&page.render()))?;
    }
    Ok(exit::OK)
}

/// `band help <command> [<subcommand>…]`: exactly what `band <command> … --help` prints (clap
/// renders it). An unknown command gets the nearest name.
fn command_help(path: &[&str]) -> Result<u8> {
    let mut command = <crate::cli::Cli as clap::CommandFactory>::command();
    let mut at = &mut command;
    for name in path {
        let names: Vec<String> = at
            .get_subcommands()
            .map(|c| c.get_name().to_string())
            .collect();
        let Some(sub) = at.find_subcommand_mut(name) else {
            let hint = match band::suggest::nearest(name, names.iter().map(String::as_str)) {
                Some(near) => format!("did you mean `band help {near}`? `band --help` lists the commands"),
                None => "`band --help` lists the commands; `band help <skill>/<script>` shows a script's arguments".to_string(),
            };
            bail!(user_error(format!("`{name}` is not a band command"), hint));
        };
        at = sub;
    }
    let argv = std::iter::once("band")
        .chain(path.iter().copied())
        .chain(["--help"]);
    let help = <crate::cli::Cli as clap::CommandFactory>::command().try_get_matches_from(argv);
    match help {
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => {
            write_stdout(&e.render().to_string())?;
            Ok(exit::OK)
        }
        _ => bail!("clap printed no help for `band {} --help`", path.join(" ")),
    }
}

/// What `band help <skill>/<script>` shows.
struct ScriptHelp {
    target: String,
    description: Option<String>,
    args: Vec<ArgDoc>,
    /// Groups of arguments of which the input must give one (the root's `oneOf`/`anyOf` branches
    /// that only add `required`): `(exactly_one, names)`.
    one_of: Vec<(bool, Vec<String>)>,
}

impl ScriptHelp {
    fn json(&self) -> Value {
        serde_json::json!({
            "script": self.target,
            "description": self.description,
            "arguments": self.args,
            "one_of": self.one_of.iter().filter(|(exactly, _)| *exactly).map(|(_, names)| names).collect::<Vec<_>>(),
            "any_of": self.one_of.iter().filter(|(exactly, _)| !*exactly).map(|(_, names)| names).collect::<Vec<_>>(),
            "example": self.example(),
        })
    }

    fn render(&self) -> String {
        let mut out = format!(
            "Usage: band {} [--key=value …] [band's flags]\n",
            self.target
        );
        if let Some(desc) = &self.description {
            out.push_str(&format!("\n{desc}\n"));
        }
        let (required, optional): (Vec<&ArgDoc>, Vec<&ArgDoc>) =
            self.args.iter().partition(|a| a.required);
        if self.args.is_empty() {
            out.push_str("\nArguments: none\n");
        }
        for (title, docs) in [("Required", &required), ("Optional", &optional)] {
            if docs.is_empty() {
                continue;
            }
            out.push_str(&format!("\n{title}:\n"));
            for doc in docs {
                out.push_str(&render_arg(doc));
            }
        }
        for (exactly, names) in &self.one_of {
            let flags: Vec<String> = names.iter().map(|n| format!("--{n}")).collect();
            let how = if *exactly {
                "exactly one of"
            } else {
                "at least one of"
            };
            out.push_str(&format!("\nGive {how}: {}\n", flags.join(", ")));
        }
        out.push_str(&format!("\nExample:\n  {}\n", self.example()));
        out.push_str(
            "\nband's flags (--json, --trace, --target, …: `band run --help`) go before or after these;\n\
             after `--` every argument is the script's.\n",
        );
        out
    }

    /// One invocation: every required argument (and, for a `oneOf`, the first of each group)
    /// with a value from the schema (`examples`, `default`, `enum`), else a placeholder.
    fn example(&self) -> String {
        let mut names: Vec<&str> = self
            .args
            .iter()
            .filter(|a| a.required)
            .map(|a| a.name.as_str())
            .collect();
        for (_, group) in &self.one_of {
            if !group.iter().any(|n| names.contains(&n.as_str()))
                && let Some(first) = group.first()
            {
                names.push(first);
            }
        }
        let mut line = format!("band {}", self.target);
        // An argument named like band's own flag goes after `--`, where every word is the
        // script's.
        let (names, shadowed): (Vec<&str>, Vec<&str>) = names
            .into_iter()
            .partition(|n| !band::contract::RUN_FLAGS.contains(n));
        let mut after = false;
        for name in names.into_iter().chain(shadowed) {
            if !after && band::contract::RUN_FLAGS.contains(&name) {
                line.push_str(" --");
                after = true;
            }
            let Some(doc) = self.args.iter().find(|a| a.name == name) else {
                line.push_str(&format!(" --{name}=<{name}>"));
                continue;
            };
            let value = doc
                .examples
                .first()
                .or(doc.default.as_ref())
                .or(doc.enum_values.first());
            let arg = match value {
                Some(Value::Bool(true)) => format!("--{name}"),
                Some(Value::String(s)) => format!("--{name}={s}"),
                Some(v) => format!("--{name}={v}"),
                None if doc.ty == "boolean" => format!("--{name}"),
                None => {
                    // A placeholder, for the reader to fill in: not quoted.
                    line.push_str(&format!(" --{name}=<{name}>"));
                    continue;
                }
            };
            line.push(' ');
            line.push_str(&shell_quote(&arg));
        }
        line
    }
}

/// One argument: `  --name <type>`, then its description, allowed values and default, indented.
fn render_arg(doc: &ArgDoc) -> String {
    let mut out = format!("  --{} <{}>\n", doc.name, doc.ty);
    if band::contract::RUN_FLAGS.contains(&doc.name.as_str()) {
        out.push_str(&format!(
            "      (band run takes --{0} for itself: give the script's after `--`, as `-- --{0}=…`)\n",
            doc.name
        ));
    }
    if let Some(desc) = &doc.description {
        for line in desc.lines() {
            out.push_str(&format!("      {line}\n"));
        }
    }
    if !doc.enum_values.is_empty() {
        let values: Vec<String> = doc.enum_values.iter().map(show_value).collect();
        out.push_str(&format!("      one of: {}\n", values.join(", ")));
    }
    if let Some(default) = &doc.default {
        out.push_str(&format!("      default: {}\n", show_value(default)));
    }
    out
}

/// A value as the user would type it: a plain string bare, anything else as JSON.
fn show_value(v: &Value) -> String {
    match v {
        Value::String(s) if is_plain(s) => s.clone(),
        v => v.to_string(),
    }
}

fn is_plain(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:@+=".contains(c))
}

/// `arg` quoted for a POSIX shell when it needs it.
fn shell_quote(arg: &str) -> String {
    if arg
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_./:@+,=%".contains(c))
    {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// The root's `oneOf` (exactly one) and `anyOf` (at least one) whose branches each only require
/// names: `{"oneOf": [{"required": ["data"]}, {"required": ["path"]}]}` is `--data` or `--path`.
fn one_of_groups(schema: &Value) -> Vec<(bool, Vec<String>)> {
    let mut out = Vec::new();
    for (keyword, exactly) in [("oneOf", true), ("anyOf", false)] {
        let Some(branches) = schema.get(keyword).and_then(Value::as_array) else {
            continue;
        };
        let names: Option<Vec<String>> = branches
            .iter()
            .map(|b| {
                let req = b.get("required")?.as_array()?;
                let names: Vec<&str> = req.iter().filter_map(Value::as_str).collect();
                (names.len() == 1).then(|| names[0].to_string())
            })
            .collect();
        if let Some(names) = names.filter(|n| !n.is_empty()) {
            out.push((exactly, names));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quoting_and_values() {
        assert_eq!(shell_quote("--path=data/x.csv"), "--path=data/x.csv");
        assert_eq!(shell_quote("--d=\t"), "'--d=\t'");
        assert_eq!(shell_quote("--q=it's"), r"'--q=it'\''s'");
        assert_eq!(show_value(&json!("open")), "open");
        assert_eq!(show_value(&json!("\t")), r#""\t""#);
        assert_eq!(show_value(&json!(30)), "30");
    }

    #[test]
    fn one_of_groups_are_single_required_branches() {
        let s = json!({"oneOf": [{"required": ["data"]}, {"required": ["path"]}],
                       "anyOf": [{"required": ["a", "b"]}, {"required": ["c"]}]});
        assert_eq!(
            one_of_groups(&s),
            vec![(true, vec!["data".to_string(), "path".to_string()])]
        );
    }
}
