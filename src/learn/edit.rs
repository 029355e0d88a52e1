//! Rewrite the rule lists of a BAND.md in place (`band learn --write`): only the lines of the
//! lists that change are touched, so comments, order and everything else are kept. A changed list
//! is written in flow style (`cli: ["jq -r *"]`); its own inline comments go with it.

use thiserror::Error;

use crate::manifest::split_frontmatter;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EditError {
    #[error("the band has no `---` frontmatter to edit")]
    NoFrontmatter,
    #[error(
        "`{0}:` is written in flow style on one line; write it as a block (one key per line) so band learn can edit it"
    )]
    FlowBlock(String),
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

fn is_blank_or_comment(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#')
}

/// `key:` at the start of `line` after `ind` spaces, followed by nothing, a value or a comment.
fn key_value<'a>(line: &'a str, ind: usize, key: &str) -> Option<&'a str> {
    if indent(line) != ind {
        return None;
    }
    let rest = line[ind..].strip_prefix(key)?.strip_prefix(':')?;
    (rest.is_empty() || rest.starts_with([' ', '\t', '\n', '\r'])).then_some(rest)
}

fn flow(values: &[String]) -> String {
    let items: Vec<String> = values
        .iter()
        .map(|v| serde_json::to_string(v).unwrap_or_else(|_| format!("{v:?}")))
        .collect();
    format!("[{}]", items.join(", "))
}

/// Set `top.key` (`allow.cli`, `env.secrets`) to `values` in the frontmatter of `source`; an
/// empty list removes the key (and `top:` when nothing is left under it).
pub fn set_list(
    source: &str,
    top: &str,
    key: &str,
    values: &[String],
) -> Result<String, EditError> {
    let (yaml, _, _) = split_frontmatter(source).map_err(|_| EditError::NoFrontmatter)?;
    let start = yaml.as_ptr() as usize - source.as_ptr() as usize;
    let end = start + yaml.len();
    let mut lines: Vec<String> = yaml.split_inclusive('\n').map(String::from).collect();
    if let Some(l) = lines.last_mut()
        && !l.ends_with('\n')
    {
        l.push('\n');
    }
    let top_at = lines.iter().position(|l| key_value(l, 0, top).is_some());
    let Some(top_at) = top_at else {
        if !values.is_empty() {
            lines.push(format!("{top}:\n"));
            lines.push(format!("  {key}: {}\n", flow(values)));
        }
        return Ok(splice(source, start, end, &lines));
    };
    let inline = key_value(&lines[top_at], 0, top).unwrap_or("").trim();
    if !inline.is_empty() && !inline.starts_with('#') {
        return Err(EditError::FlowBlock(top.into()));
    }
    // The block: lines after `top:` up to the next line at column 0 that is not blank.
    let mut block_end = top_at + 1;
    while block_end < lines.len()
        && (lines[block_end].trim().is_empty() || indent(&lines[block_end]) > 0)
    {
        block_end += 1;
    }
    let child = lines[top_at + 1..block_end]
        .iter()
        .find(|l| !is_blank_or_comment(l))
        .map(|l| indent(l))
        .unwrap_or(2);
    let key_at = (top_at + 1..block_end).find(|&i| key_value(&lines[i], child, key).is_some());
    match key_at {
        Some(k) => {
            // The key's lines: deeper-indented lines, `- ` items at the key's indentation, and
            // blank lines between them (trailing blank lines stay).
            let mut e = k + 1;
            let mut last = k;
            while e < block_end {
                let l = &lines[e];
                if l.trim().is_empty() {
                    e += 1;
                    continue;
                }
                let deeper = indent(l) > child;
                let item = indent(l) == child && l[child..].starts_with('-');
                if deeper || item {
                    last = e;
                    e += 1;
                } else {
                    break;
                }
            }
            let replacement: Vec<String> = if values.is_empty() {
                Vec::new()
            } else {
                vec![format!("{}{key}: {}\n", " ".repeat(child), flow(values))]
            };
            lines.splice(k..=last, replacement);
            if values.is_empty() {
                let new_end = block_end - (last + 1 - k);
                let empty = lines[top_at + 1..new_end]
                    .iter()
                    .all(|l| is_blank_or_comment(l));
                if empty
                    && lines[top_at + 1..new_end]
                        .iter()
                        .all(|l| l.trim().is_empty())
                {
                    lines.remove(top_at);
                }
            }
        }
        None if values.is_empty() => {}
        None => {
            let mut at = block_end;
            while at > top_at + 1 && lines[at - 1].trim().is_empty() {
                at -= 1;
            }
            lines.insert(
                at,
                format!("{}{key}: {}\n", " ".repeat(child), flow(values)),
            );
        }
    }
    Ok(splice(source, start, end, &lines))
}

fn splice(source: &str, start: usize, end: usize, lines: &[String]) -> String {
    let mut out = String::with_capacity(source.len() + 64);
    out.push_str(&source[..start]);
    for l in lines {
        out.push_str(l);
    }
    out.push_str(&source[end..]);
    out
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    const BAND: &str = "---\n# the text band\nband: text\nallow:\n  # commands it runs\n  cli:\n    - \"jq *\"   # old\n    - wc *\n\n  read: [\"data/**\"]  # inputs\nlimit:\n  maxPids: 16\n---\nbody\n";

    #[test]
    fn replaces_a_block_list_keeping_comments_elsewhere() {
        let out = set_list(BAND, "allow", "cli", &v(&["gh issue list *"])).unwrap_or_default();
        assert_eq!(
            out,
            "---\n# the text band\nband: text\nallow:\n  # commands it runs\n  cli: [\"gh issue list *\"]\n\n  read: [\"data/**\"]  # inputs\nlimit:\n  maxPids: 16\n---\nbody\n"
        );
    }

    #[test]
    fn adds_a_missing_key_at_the_end_of_its_block_and_a_missing_block_at_the_end() {
        let out = set_list(BAND, "allow", "write", &v(&["out/**"])).unwrap_or_default();
        assert!(
            out.contains("  read: [\"data/**\"]  # inputs\n  write: [\"out/**\"]\nlimit:"),
            "{out}"
        );
        let out = set_list(BAND, "env", "secrets", &v(&["GH_TOKEN"])).unwrap_or_default();
        assert!(
            out.ends_with("  maxPids: 16\nenv:\n  secrets: [\"GH_TOKEN\"]\n---\nbody\n"),
            "{out}"
        );
    }

    #[test]
    fn an_empty_list_removes_the_key_and_an_emptied_block() {
        let src = "---\nband: x\nallow:\n  cli: [\"jq *\"]\nlimit:\n  maxPids: 4\n---\n";
        let out = set_list(src, "allow", "cli", &[]).unwrap_or_default();
        assert_eq!(out, "---\nband: x\nlimit:\n  maxPids: 4\n---\n");
        let out = set_list(BAND, "allow", "read", &[]).unwrap_or_default();
        assert!(!out.contains("read"), "{out}");
        assert!(out.contains("allow:\n"), "{out}");
    }

    #[test]
    fn items_at_the_keys_indentation_belong_to_it() {
        let src = "---\nallow:\n  cli:\n  - \"a *\"\n  - \"b *\"\n  net: [\"x:1\"]\n---\n";
        let out = set_list(src, "allow", "cli", &v(&["c"])).unwrap_or_default();
        assert_eq!(out, "---\nallow:\n  cli: [\"c\"]\n  net: [\"x:1\"]\n---\n");
    }

    #[test]
    fn the_result_parses_to_the_values_written() {
        let out =
            set_list(BAND, "allow", "cli", &v(&["jq -r \"a b\" *", "./bin/t"])).unwrap_or_default();
        let (yaml, _, _) = split_frontmatter(&out).unwrap_or(("", 0, ""));
        let doc: serde_json::Value = yaml_serde::from_str(yaml).unwrap_or_default();
        assert_eq!(
            doc["allow"]["cli"],
            serde_json::json!(["jq -r \"a b\" *", "./bin/t"])
        );
    }

    #[test]
    fn flow_blocks_and_missing_frontmatter_are_errors() {
        assert_eq!(
            set_list("---\nallow: {cli: [a]}\n---\n", "allow", "cli", &v(&["b"])),
            Err(EditError::FlowBlock("allow".into()))
        );
        assert_eq!(
            set_list("no frontmatter", "allow", "cli", &v(&["b"])),
            Err(EditError::NoFrontmatter)
        );
    }
}
