//! Find the line and column of a key path (`allow.net[2]`) in block-style YAML text.
//!
//! YAML parsers that feed serde do not keep positions of values, so band re-scans the frontmatter
//! text: frontmatter is small and written by hand in block style. Flow sequences on one line
//! (`net: [a, b]`) are handled too. When a step cannot be found the deepest position found so far
//! is returned, so a message always points at the nearest enclosing key.

use crate::diag::Loc;

/// One step of a path into the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

struct Line<'a> {
    no: usize,
    indent: usize,
    text: &'a str,
}

/// The offsets of every item of the flow sequences located so far in one document, by (line,
/// column of the sequence): a sequence of thousands of items on one line is scanned once, not
/// once for each item a diagnostic points at (which made a band of 30,000 duplicate rules take
/// 38 s to load).
#[derive(Debug, Default)]
pub struct FlowItems(std::cell::RefCell<std::collections::HashMap<(usize, usize), Vec<usize>>>);

/// Locate `path` in `yaml`. `first_line` is the 1-based line number of the YAML's first line in
/// the file (2 for frontmatter that starts after a `---` line).
pub fn locate(yaml: &str, first_line: usize, path: &[Step<'_>]) -> Loc {
    locate_with(yaml, first_line, path, &FlowItems::default())
}

/// [`locate`], with the flow sequences' items kept in `items` across calls on the same `yaml`.
pub fn locate_with(yaml: &str, first_line: usize, path: &[Step<'_>], items: &FlowItems) -> Loc {
    let lines: Vec<Line<'_>> = yaml
        .lines()
        .enumerate()
        .filter_map(|(i, raw)| {
            let trimmed = raw.trim_start();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                return None;
            }
            Some(Line {
                no: i + first_line,
                indent: raw.len() - trimmed.len(),
                text: raw,
            })
        })
        .collect();
    let mut start = 0usize;
    let mut end = lines.len();
    let mut parent_indent: Option<usize> = None;
    let mut found = Loc::new(first_line, 1);
    // After a `- ` item or `key: value` on the same line, the next step may be inline.
    let mut inline: Option<(usize, usize)> = None; // (line index, column offset of the value)

    for step in path {
        if let Some((li, col)) = inline.take() {
            let line = &lines[li];
            let rest = &line.text[col..];
            match step {
                Step::Index(i) => {
                    let off = items
                        .0
                        .borrow_mut()
                        .entry((li, col))
                        .or_insert_with(|| flow_item_offsets(rest))
                        .get(*i)
                        .copied();
                    if let Some(off) = off {
                        return Loc::new(line.no, col + off + 1);
                    }
                }
                Step::Key(k) if rest.starts_with('{') => {
                    // A flow mapping on one line: `deny: {read: [a], reed: [b]}`.
                    if let Some((key, value)) = flow_key_offset(rest, k) {
                        found = Loc::new(line.no, col + key + 1);
                        inline = Some((li, col + value));
                        continue;
                    }
                }
                Step::Key(k) => {
                    // `- key: value` form: the key sits right after the dash.
                    let r = rest.trim_start();
                    if key_of(r) == Some(k) {
                        let c = col + (rest.len() - r.len());
                        found = Loc::new(line.no, c + 1);
                        inline = value_inline(line.text, c).map(|vc| (li, vc));
                        // children of this key are indented deeper than the dash item's content
                        parent_indent = Some(c);
                        start = li + 1;
                        end = block_end(&lines, li + 1, end, line.indent);
                        continue;
                    }
                }
            }
            // The value is inline but we could not find the step in it.
            return found;
        }
        // Children of the current block: lines in [start, end) with indent > parent_indent.
        let child_indent = lines[start..end]
            .iter()
            .find(|l| parent_indent.is_none_or(|p| l.indent > p))
            .map(|l| l.indent);
        let Some(ci) = child_indent else { return found };
        match step {
            Step::Key(k) => {
                let Some(pos) = (start..end).find(|&i| {
                    lines[i].indent == ci && key_of(lines[i].text.trim_start()) == Some(k)
                }) else {
                    return found;
                };
                found = Loc::new(lines[pos].no, ci + 1);
                inline = value_inline(lines[pos].text, ci).map(|vc| (pos, vc));
                parent_indent = Some(ci);
                start = pos + 1;
                end = block_end(&lines, pos + 1, end, ci);
                // YAML allows a key's list items at the key's own indent (`key:\n- a`).
                if inline.is_none()
                    && start < lines.len()
                    && start == end
                    && lines[start].indent == ci
                    && lines[start].text.trim_start().starts_with('-')
                {
                    end = (start..lines.len())
                        .find(|&i| {
                            lines[i].indent < ci
                                || (lines[i].indent == ci
                                    && !lines[i].text.trim_start().starts_with('-'))
                        })
                        .unwrap_or(lines.len());
                    parent_indent = ci.checked_sub(1);
                }
            }
            Step::Index(n) => {
                let items: Vec<usize> = (start..end)
                    .filter(|&i| {
                        lines[i].indent == ci && lines[i].text.trim_start().starts_with('-')
                    })
                    .collect();
                let Some(&pos) = items.get(*n) else {
                    return found;
                };
                let dash = ci;
                let after = lines[pos].text[dash + 1..].len()
                    - lines[pos].text[dash + 1..].trim_start().len();
                let vcol = dash + 1 + after;
                found = Loc::new(lines[pos].no, vcol + 1);
                inline = if vcol < lines[pos].text.len() {
                    Some((pos, vcol))
                } else {
                    None
                };
                parent_indent = Some(dash);
                start = pos + 1;
                end = block_end(&lines, pos + 1, end, dash);
            }
        }
    }
    found
}

/// The end of the block that starts at `from`: the first line with indent <= `indent`.
fn block_end(lines: &[Line<'_>], from: usize, limit: usize, indent: usize) -> usize {
    (from..limit)
        .find(|&i| lines[i].indent <= indent)
        .unwrap_or(limit)
}

/// `key` if the line (already trimmed at the start) is `key:` or `key: value` (quotes removed).
fn key_of(t: &str) -> Option<&str> {
    let t = t.strip_prefix("- ").map(str::trim_start).unwrap_or(t);
    let colon = find_key_colon(t)?;
    let key = t[..colon].trim();
    Some(key.trim_matches(|c| c == '"' || c == '\''))
}

fn find_key_colon(t: &str) -> Option<usize> {
    let bytes = t.as_bytes();
    let mut quote: Option<u8> = None;
    for (i, &b) in bytes.iter().enumerate() {
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'"' || b == b'\'' => quote = Some(b),
            None if b == b':'
                && (i + 1 == bytes.len() || bytes[i + 1] == b' ' || bytes[i + 1] == b'\t') =>
            {
                return Some(i);
            }
            None => {}
        }
    }
    None
}

/// If `key: value` has its value on the same line, the value's column.
fn value_inline(text: &str, key_col: usize) -> Option<usize> {
    let rest = &text[key_col..];
    let colon = find_key_colon(rest)?;
    let after = &rest[colon + 1..];
    let trimmed = after.trim_start();
    if trimmed.is_empty() || trimmed.starts_with('#') {
        return None;
    }
    Some(key_col + colon + 1 + (after.len() - trimmed.len()))
}

/// Column offsets of key `k` at the top level of the flow mapping `{k: v, …}` at the start of
/// `s` (quoted keys included) and of its value.
fn flow_key_offset(s: &str, k: &str) -> Option<(usize, usize)> {
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    let mut at_item = false;
    for (i, c) in s.char_indices() {
        if let Some(q) = quote {
            if c == q {
                quote = None;
            }
            continue;
        }
        if at_item && depth == 1 && !c.is_whitespace() {
            at_item = false;
            let t = &s[i..];
            let (q, body) = match c {
                '"' | '\'' => (Some(c), &t[1..]),
                _ => (None, t),
            };
            let after = body
                .strip_prefix(k)
                .and_then(|a| match q {
                    Some(q) => a.strip_prefix(q),
                    None => Some(a),
                })
                .and_then(|a| a.trim_start().strip_prefix(':'));
            if let Some(value) = after {
                let v = s.len() - value.trim_start().len();
                return Some((i, v));
            }
        }
        match c {
            '"' | '\'' => quote = Some(c),
            '{' | '[' => {
                depth += 1;
                at_item = depth == 1;
            }
            '}' | ']' => {
                depth -= 1;
                if depth <= 0 {
                    return None;
                }
            }
            ',' if depth == 1 => at_item = true,
            _ => {}
        }
    }
    None
}

/// Column offsets of the items of a flow sequence `[a, b, c]` at the start of `s`, in order, up
/// to the first whose place cannot be told (an empty item, or the last of a sequence that does
/// not close on this line).
fn flow_item_offsets(s: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let Some(open) = s.find('[') else {
        return out;
    };
    let mut quote: Option<char> = None;
    let mut item_start: Option<usize> = None;
    let mut depth = 0i32;
    for (i, c) in s.char_indices().skip_while(|(i, _)| *i <= open) {
        if let Some(q) = quote {
            if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '"' | '\'' => {
                quote = Some(c);
                item_start.get_or_insert(i);
            }
            '[' | '{' => {
                depth += 1;
                item_start.get_or_insert(i);
            }
            ']' | '}' if depth > 0 => depth -= 1,
            ']' | ',' if depth == 0 => {
                let Some(start) = item_start.take() else {
                    return out;
                };
                out.push(start);
                if c == ']' {
                    return out;
                }
            }
            c if c.is_whitespace() => {}
            _ => {
                item_start.get_or_insert(i);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::Step::{Index as I, Key as K};
    use super::*;

    const DOC: &str = "band: demo\ndescription: d\nallow:\n  cli:\n    - jq *\n    - \"gh issue list *\"\n  net: [api.github.com, \"*.example.test\"]\n  read:\n    # comment\n    - data/**\nlimit:\n  maxRuntimeMs: 30s\nenv:\n  secrets:\n  - A\n  - B\n";

    #[test]
    fn keys_and_items() {
        assert_eq!(locate(DOC, 2, &[K("band")]), Loc::new(2, 1));
        assert_eq!(locate(DOC, 2, &[K("allow"), K("cli")]), Loc::new(5, 3));
        assert_eq!(
            locate(DOC, 2, &[K("allow"), K("cli"), I(0)]),
            Loc::new(6, 7)
        );
        assert_eq!(
            locate(DOC, 2, &[K("allow"), K("cli"), I(1)]),
            Loc::new(7, 7)
        );
        assert_eq!(
            locate(DOC, 2, &[K("allow"), K("read"), I(0)]),
            Loc::new(11, 7)
        );
        assert_eq!(
            locate(DOC, 2, &[K("limit"), K("maxRuntimeMs")]),
            Loc::new(13, 3)
        );
        assert_eq!(
            locate(DOC, 2, &[K("env"), K("secrets"), I(1)]),
            Loc::new(17, 5)
        );
    }

    #[test]
    fn flow_sequences() {
        assert_eq!(
            locate(DOC, 2, &[K("allow"), K("net"), I(0)]),
            Loc::new(8, 9)
        );
        assert_eq!(
            locate(DOC, 2, &[K("allow"), K("net"), I(1)]),
            Loc::new(8, 25)
        );
    }

    #[test]
    fn flow_mappings() {
        let doc = "band: x\ndeny: {read: [a], reed: [b], \"net\": [c]}\nlimit: {maxRuntime: 1}\n";
        assert_eq!(locate(doc, 2, &[K("deny"), K("reed")]), Loc::new(3, 19));
        assert_eq!(locate(doc, 2, &[K("deny"), K("net")]), Loc::new(3, 30));
        assert_eq!(
            locate(doc, 2, &[K("deny"), K("reed"), I(0)]),
            Loc::new(3, 26)
        );
        assert_eq!(
            locate(doc, 2, &[K("limit"), K("maxRuntime")]),
            Loc::new(4, 9)
        );
        assert_eq!(locate(doc, 2, &[K("deny"), K("write")]), Loc::new(3, 1));
    }

    #[test]
    fn missing_steps_fall_back_to_nearest() {
        assert_eq!(
            locate(DOC, 2, &[K("allow"), K("write"), I(3)]),
            Loc::new(4, 1)
        );
        assert_eq!(locate(DOC, 2, &[K("nope")]), Loc::new(2, 1));
        assert_eq!(
            locate(DOC, 2, &[K("allow"), K("cli"), I(9)]),
            Loc::new(5, 3)
        );
    }

    /// A flow sequence's items are scanned once per document: every item located after the
    /// first comes from the same scan (one entry), at the same columns `locate` gives.
    #[test]
    fn a_flow_sequence_is_scanned_once_for_all_its_items() {
        let items: Vec<String> = (0..10_000).map(|i| format!("r{i}")).collect();
        let doc = format!("band: x\nallow:\n  cli: [{}]\n", items.join(", "));
        let cache = FlowItems::default();
        for i in [0usize, 1, 5_000, 9_999] {
            let at = [K("allow"), K("cli"), I(i)];
            let got = locate_with(&doc, 2, &at, &cache);
            assert_eq!(got, locate(&doc, 2, &at), "{i}");
            let line = doc.lines().nth(2).expect("line");
            assert!(
                line[got.col - 1..].starts_with(&format!("r{i}")),
                "{i}: {got:?}"
            );
        }
        assert_eq!(cache.0.borrow().len(), 1);
        // Past the end, and an empty item: no column for it, the key's instead.
        let at = [K("allow"), K("cli"), I(10_000)];
        assert_eq!(locate_with(&doc, 2, &at, &cache), Loc::new(4, 3));
        assert_eq!(
            locate("cli: [a, , b]\n", 2, &[K("cli"), I(2)]),
            Loc::new(2, 1)
        );
    }
}
