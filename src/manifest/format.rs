//! Formatting band files (`band fmt`): a minimal-edit normaliser over the source text.
//!
//! The formatter never re-emits the YAML: it moves and drops whole lines of the source, so
//! comments, quoting, flow or block style, indentation and blank lines stay as written. What it
//! normalises:
//!
//! - the order of the top-level keys ([`KEY_ORDER`]; keys it does not order, such as the skill's
//!   config block, keep their order after them);
//! - the order of the categories in block-style `allow`, `deny` and `insist` (`cli`, `net`,
//!   `read`, `write`);
//! - exact duplicate rules in a category's list (block items and one-line flow lists), which lint
//!   reports as P005;
//! - the frame: `---`, the frontmatter, `---`, one blank line, the Markdown body, one final newline.
//!
//! Rule order within a list is the author's (it often follows the script) and is kept.
//! A comment line, and blank lines, directly above a key move with that key; comments before the
//! first key (a `# yaml-language-server: $schema=` modeline) stay at the top.
//!
//! Safety net: the result is parsed again and must mean exactly what the source meant (the same
//! values, duplicates aside); otherwise formatting fails and nothing is written.

use std::path::{Path, PathBuf};

use yaml_serde::{Mapping, Value};

use super::{is_band_file, split_frontmatter};

/// The order of the top-level keys.
pub const KEY_ORDER: &[&str] = &[
    "band",
    "description",
    "icon",
    "version",
    "path",
    "extends",
    "includes",
    "allow",
    "deny",
    "insist",
    "env",
    "requires",
    "limit",
    "execution",
    "provides",
    "contract",
];
/// The order of the categories in `allow`, `deny` and `insist`.
pub const CATEGORY_ORDER: &[&str] = &["cli", "net", "read", "write"];
const RULE_COLUMNS: &[&str] = &["allow", "deny", "insist"];

/// The band files at `p` (a band file, or every band file under a folder, in name order,
/// hidden folders and `target` skipped), appended to `out`. `p` itself is followed if it is a
/// link (the user named it); below it, a link to a folder is not entered: it could lead out of
/// the skill, or back into it without end. (A band file reached by a link is listed: its
/// rewrite, `skillfs::replace`, refuses one that leads out of the skill.)
pub fn collect(p: &Path, out: &mut Vec<PathBuf>) {
    if p.is_file() {
        if is_band_file(p) {
            out.push(p.to_path_buf());
        }
        return;
    }
    collect_below(p, out);
}

fn collect_below(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = fs_err::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = rd
        .flatten()
        .filter_map(|e| Some((e.path(), e.file_type().ok()?)))
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    for (e, ft) in entries {
        let hidden = e
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.') || n == "target");
        if hidden {
            continue;
        }
        if ft.is_dir() {
            collect_below(&e, out);
        } else if (ft.is_file() || (ft.is_symlink() && e.is_file())) && is_band_file(&e) {
            out.push(e);
        }
    }
}

/// Why a band file cannot be formatted.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// The frontmatter could not be found (the message says why).
    #[error("{0}")]
    Frontmatter(String),
    #[error("invalid YAML: {0}")]
    Yaml(yaml_serde::Error),
    #[error("the frontmatter is not a mapping")]
    NotMapping,
    /// The normalised text would not mean what the source means (a layout the line-based
    /// formatter does not understand); nothing is changed.
    #[error(
        "band fmt cannot normalise this file's layout without changing what it means; it is left as it is"
    )]
    Unsafe,
}

/// The normalised text of a band file.
pub fn format_band(src: &str) -> std::result::Result<String, FormatError> {
    let (yaml, _, body) =
        split_frontmatter(src).map_err(|e| FormatError::Frontmatter(e.to_string()))?;
    let before: Value = yaml_serde::from_str(yaml).map_err(FormatError::Yaml)?;
    if !matches!(before, Value::Mapping(_) | Value::Null) {
        return Err(FormatError::NotMapping);
    }
    let lines: Vec<String> = yaml
        .split_inclusive('\n')
        .map(|l| {
            let mut l = l.to_string();
            if !l.ends_with('\n') {
                l.push('\n');
            }
            l
        })
        .collect();
    let text: String = reorder(&lines, 0, &|key| rank(KEY_ORDER, key), &|key, block| {
        if RULE_COLUMNS.contains(&key) {
            rules_block(block)
        } else {
            block.to_vec()
        }
    })
    .concat();
    let after: Value = yaml_serde::from_str(&text).map_err(|_| FormatError::Unsafe)?;
    // Duplicates in a layout the formatter leaves alone (a multi-line flow list) stay.
    if dedup_rules(&after) != dedup_rules(&before) {
        return Err(FormatError::Unsafe);
    }
    let body = body.trim();
    Ok(if body.is_empty() {
        format!("---\n{text}---\n")
    } else {
        format!("---\n{text}---\n\n{body}\n")
    })
}

fn rank(order: &[&str], key: &str) -> usize {
    order.iter().position(|k| *k == key).unwrap_or(order.len())
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

fn is_blank(line: &str) -> bool {
    line.trim().is_empty()
}

fn is_comment(line: &str) -> bool {
    line.trim_start().starts_with('#')
}

/// `key` if `line` is `key:` or `key: value` at its indent (quotes removed), not a list item.
fn key_of(line: &str) -> Option<&str> {
    let t = line.trim_start_matches(' ');
    if t.starts_with(['-', '#', '[', '{', '?', '|', '>']) {
        return None;
    }
    let bytes = t.as_bytes();
    let mut quote: Option<u8> = None;
    for (i, &b) in bytes.iter().enumerate() {
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'"' || b == b'\'' => quote = Some(b),
            None if b == b':'
                && matches!(bytes.get(i + 1), None | Some(b' ' | b'\t' | b'\n' | b'\r')) =>
            {
                return Some(t[..i].trim().trim_matches(|c| c == '"' || c == '\''));
            }
            None => {}
        }
    }
    None
}

/// One key of a block mapping: the comment and blank lines above it, its line, and the lines
/// of its value.
struct Entry<'a> {
    key: &'a str,
    lines: Vec<String>,
}

/// Split the lines of a block mapping whose keys sit at `at` (lines deeper belong to the key
/// above them) into (prefix, entries, suffix), then order the entries by `rank` (stably) and
/// pass each through `inner`. Comments and blanks above a key go with it; those before the
/// first key and after the last value stay where they are.
fn reorder(
    lines: &[String],
    at: usize,
    rank: &dyn Fn(&str) -> usize,
    inner: &dyn Fn(&str, &[String]) -> Vec<String>,
) -> Vec<String> {
    let mut prefix: Vec<String> = Vec::new();
    let mut entries: Vec<Entry<'_>> = Vec::new();
    let mut pending: Vec<String> = Vec::new();
    for line in lines {
        let key = (indent(line) == at).then(|| key_of(line)).flatten();
        if let Some(key) = key {
            let mut e = Entry {
                key,
                lines: std::mem::take(&mut pending),
            };
            e.lines.push(line.clone());
            if entries.is_empty() {
                // Above the first key, what a blank line separates from it, and a
                // `yaml-language-server` modeline, are the file's, not the key's.
                let lead = &e.lines[..e.lines.len() - 1];
                let keep = lead
                    .iter()
                    .rposition(|l| is_blank(l))
                    .map_or(0, |i| i + 1)
                    .max(
                        lead.iter()
                            .take_while(|l| l.contains("yaml-language-server:"))
                            .count(),
                    );
                prefix.extend(e.lines.drain(..keep));
            }
            entries.push(e);
        } else if is_blank(line) || (indent(line) <= at && is_comment(line)) {
            pending.push(line.clone());
        } else if let Some(e) = entries.last_mut() {
            e.lines.append(&mut pending);
            e.lines.push(line.clone());
        } else {
            prefix.append(&mut pending);
            prefix.push(line.clone());
        }
    }
    let mut order: Vec<usize> = (0..entries.len()).collect();
    order.sort_by_key(|&i| rank(entries[i].key));
    let mut out = prefix;
    let first_key = out.len();
    for i in order {
        let e = &entries[i];
        let head = e.lines.iter().position(|l| !is_blank(l) && !is_comment(l));
        let Some(head) = head else { continue };
        out.extend(e.lines[..head].iter().cloned());
        out.extend(inner(e.key, &e.lines[head..]));
    }
    // The first entry never starts with blank lines, wherever it came from.
    while out.len() > first_key && is_blank(&out[first_key]) {
        out.remove(first_key);
    }
    out.extend(pending);
    out
}

/// An `allow`/`deny`/`insist` entry (its key line first): categories in order, duplicate rules
/// dropped. A one-line flow mapping is left as written.
fn rules_block(block: &[String]) -> Vec<String> {
    let Some(child) = block[1..]
        .iter()
        .find(|l| !is_blank(l) && !is_comment(l))
        .map(|l| indent(l))
    else {
        return block.to_vec();
    };
    let mut out = vec![block[0].clone()];
    out.extend(reorder(
        &block[1..],
        child,
        &|key| rank(CATEGORY_ORDER, key),
        &|_, lines| dedup_list(lines),
    ));
    out
}

/// A category's entry (its key line first): later exact duplicates of a rule removed, from a
/// one-line flow list or from block items (each item with the lines that continue it).
fn dedup_list(lines: &[String]) -> Vec<String> {
    let head = &lines[0];
    if let Some(colon) = key_colon(head) {
        let value = head[colon + 1..].trim_start();
        if value.starts_with('[') {
            let mut out = vec![dedup_flow(head, head.len() - value.len())];
            out.extend(lines[1..].iter().cloned());
            return out;
        }
    }
    let mut seen: Vec<Value> = Vec::new();
    let mut out = vec![head.clone()];
    let mut dropping: Option<usize> = None;
    for line in &lines[1..] {
        let t = line.trim_start_matches(' ');
        if let Some(item) = t.strip_prefix("- ") {
            let at = indent(line);
            dropping = None;
            if let Ok(v @ Value::String(_)) = yaml_serde::from_str::<Value>(item) {
                if seen.contains(&v) {
                    dropping = Some(at);
                    continue;
                }
                seen.push(v);
            }
        } else if let Some(at) = dropping {
            if !is_blank(line) && indent(line) > at && !is_comment(line) {
                continue;
            }
            dropping = None;
        }
        out.push(line.clone());
    }
    out
}

/// The byte index of the colon that ends the key of `line`.
fn key_colon(line: &str) -> Option<usize> {
    let key = key_of(line)?;
    let start = line.find(key)?;
    Some(start + line[start..].find(':')?)
}

/// `key: [a, b, a]  # c` with the later duplicates of the flow list starting at byte `open`
/// removed; anything it does not understand is returned unchanged.
fn dedup_flow(line: &str, open: usize) -> String {
    let s = &line[open..];
    let mut items: Vec<(usize, usize)> = Vec::new();
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    let mut start = 1;
    let mut close = None;
    for (i, c) in s.char_indices() {
        if let Some(q) = quote {
            if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '"' | '\'' => quote = Some(c),
            '[' | '{' => depth += 1,
            ']' | '}' => {
                depth -= 1;
                if depth == 0 {
                    items.push((start, i));
                    close = Some(i);
                    break;
                }
            }
            ',' if depth == 1 => {
                items.push((start, i));
                start = i + 1;
            }
            _ => {}
        }
    }
    let Some(close) = close else {
        return line.to_string();
    };
    let texts: Vec<&str> = items
        .iter()
        .map(|&(a, b)| s[a..b].trim())
        .filter(|t| !t.is_empty())
        .collect();
    let mut seen: Vec<Value> = Vec::new();
    let mut kept: Vec<&str> = Vec::new();
    for t in &texts {
        match yaml_serde::from_str::<Value>(t) {
            Ok(v @ Value::String(_)) if seen.contains(&v) => {}
            Ok(v) => {
                seen.push(v);
                kept.push(t);
            }
            Err(_) => return line.to_string(),
        }
    }
    if kept.len() == texts.len() {
        return line.to_string();
    }
    format!("{}[{}]{}", &line[..open], kept.join(", "), &s[close + 1..])
}

/// `v` with exact duplicate strings removed from the rule lists of `allow`, `deny`, `insist`.
fn dedup_rules(v: &Value) -> Value {
    let Value::Mapping(m) = v else {
        return v.clone();
    };
    let mut out = Mapping::new();
    for (k, val) in m {
        let val = match (k.as_str(), val) {
            (Some(col), Value::Mapping(cats)) if RULE_COLUMNS.contains(&col) => {
                let mut c = Mapping::new();
                for (ck, cv) in cats {
                    let cv = match cv {
                        Value::Sequence(items) => {
                            let mut kept: Vec<Value> = Vec::new();
                            for i in items {
                                if !(matches!(i, Value::String(_)) && kept.contains(i)) {
                                    kept.push(i.clone());
                                }
                            }
                            Value::Sequence(kept)
                        }
                        other => other.clone(),
                    };
                    c.insert(ck.clone(), cv);
                }
                Value::Mapping(c)
            }
            _ => val.clone(),
        };
        out.insert(k.clone(), val);
    }
    Value::Mapping(out)
}

#[cfg(test)]
mod tests {
    use super::format_band;

    /// Below the path given, a link to a folder is not entered: not one out of the skill (whose
    /// band files are not the skill's), not two back into it (`a -> .`, `b -> .`, which would
    /// never end). A band file linked inside is listed.
    #[test]
    fn collect_enters_no_linked_folder() {
        use fs_err::os::unix::fs::symlink;
        let t = tempfile::tempdir().expect("tempdir");
        let (skill, outside) = (t.path().join("s"), t.path().join("outside"));
        fs_err::create_dir_all(skill.join("scripts")).expect("mkdir");
        fs_err::create_dir_all(&outside).expect("mkdir");
        for f in [
            skill.join("BAND.md"),
            skill.join("scripts/x.band.md"),
            outside.join("BAND.md"),
        ] {
            fs_err::write(f, "---\nband: b\n---\n").expect("write");
        }
        symlink(&outside, skill.join("vendor")).expect("symlink");
        symlink(".", skill.join("a")).expect("symlink");
        symlink(".", skill.join("b")).expect("symlink");
        symlink("x.band.md", skill.join("scripts/y.band.md")).expect("symlink");
        let mut got = Vec::new();
        super::collect(&skill, &mut got);
        let got: Vec<_> = got
            .iter()
            .map(|p| p.strip_prefix(&skill).expect("inside"))
            .collect();
        assert_eq!(
            got,
            ["BAND.md", "scripts/x.band.md", "scripts/y.band.md"].map(std::path::Path::new)
        );
    }

    #[test]
    fn orders_keys_and_categories_drops_duplicates_keeps_the_rest() {
        let src = "---\n# yaml-language-server: $schema=band.schema.json\nallow:\n  net: [b.test, a.test]  # hosts\n  cli: [\"jq *\", 'gh *', \"jq *\"]\ndescription: d\n\n# the name\nband: x\n---\nBody\n";
        let out = format_band(src).expect("formats");
        assert_eq!(
            out,
            "---\n# yaml-language-server: $schema=band.schema.json\n# the name\nband: x\ndescription: d\nallow:\n  cli: [\"jq *\", 'gh *']\n  net: [b.test, a.test]  # hosts\n---\n\nBody\n"
        );
        assert_eq!(format_band(&out).expect("idempotent"), out);
    }

    #[test]
    fn block_lists_keep_their_comments_and_order() {
        let src = "---\nband: x\ndescription: d\nlimit:\n  maxPids: 4   # few\ndeny:\n  read:\n    # secrets\n    - \"**/.env*\"\n    - '**/.env*'\n    - \"*.pem\"\nallow:\n  write:\n  - out/\n  cli:\n  # tools\n  - jq *\n  - wc *\n---\n";
        let out = format_band(src).expect("formats");
        assert_eq!(
            out,
            "---\nband: x\ndescription: d\nallow:\n  cli:\n  # tools\n  - jq *\n  - wc *\n  write:\n  - out/\ndeny:\n  read:\n    # secrets\n    - \"**/.env*\"\n    - \"*.pem\"\nlimit:\n  maxPids: 4   # few\n---\n"
        );
        assert_eq!(format_band(&out).expect("idempotent"), out);
    }

    #[test]
    fn unusual_layouts_are_kept_and_bad_yaml_refused() {
        // A multi-line flow mapping at the top level: the line-based view cannot move it safely.
        let src = "---\nband: x\ndescription: d\nallow: {cli: [\"jq *\"],\n net: [a.test]}\n---\n";
        assert!(format_band(src).is_ok(), "unchanged layout is fine");
        // A complex key is not a key line: it stays with the entry above it.
        let src = "---\ndescription: d\n? band\n: x\n---\n";
        assert_eq!(format_band(src).expect("formats"), src);
        // A multi-line flow list is left as written, duplicates included (lint reports them).
        let src = "---\nband: x\ndescription: d\nallow:\n  cli: [\"jq *\",\n    \"jq *\"]\n---\n";
        assert_eq!(format_band(src).expect("formats"), src);
        let src = "---\nband: [x\n---\n";
        assert!(matches!(format_band(src), Err(super::FormatError::Yaml(_))));
    }
}
