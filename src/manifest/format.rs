//! Formatting band files (`band fmt`): stable key order, sorted and deduplicated rule lists,
//! the Markdown body kept. YAML comments in the frontmatter are not preserved.

use std::path::{Path, PathBuf};

use yaml_serde::{Mapping, Value};

use super::{is_band_file, split_frontmatter};

const KEY_ORDER: &[&str] = &[
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
];
const CATEGORY_ORDER: &[&str] = &["read", "write", "cli", "net"];

/// The band files at `p` (a band file, or every band file under a folder, in name order,
/// hidden folders and `target` skipped), appended to `out`.
pub fn collect(p: &Path, out: &mut Vec<PathBuf>) {
    if p.is_file() {
        if is_band_file(p) {
            out.push(p.to_path_buf());
        }
        return;
    }
    let Ok(rd) = fs_err::read_dir(p) else { return };
    let mut entries: Vec<_> = rd.flatten().map(|e| e.path()).collect();
    entries.sort();
    for e in entries {
        let hidden = e
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.') || n == "target");
        if !hidden {
            collect(&e, out);
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
    #[error("{0}")]
    Emit(yaml_serde::Error),
}

/// The normalised text of a band file.
pub fn format_band(src: &str) -> std::result::Result<String, FormatError> {
    let (yaml, _, body) =
        split_frontmatter(src).map_err(|e| FormatError::Frontmatter(e.to_string()))?;
    let root: Value = yaml_serde::from_str(yaml).map_err(FormatError::Yaml)?;
    let Value::Mapping(map) = root else {
        return Err(FormatError::NotMapping);
    };
    let mut out = Mapping::new();
    for key in KEY_ORDER {
        if let Some(v) = map.get(*key) {
            let v = if ["allow", "deny", "insist"].contains(key) {
                sort_rules(v)
            } else {
                v.clone()
            };
            out.insert(Value::String((*key).to_string()), v);
        }
    }
    let mut rest: Vec<(&Value, &Value)> = map
        .iter()
        .filter(|(k, _)| !k.as_str().is_some_and(|k| KEY_ORDER.contains(&k)))
        .collect();
    rest.sort_by_key(|(k, _)| k.as_str().unwrap_or("").to_string());
    for (k, v) in rest {
        out.insert(k.clone(), v.clone());
    }
    let text = yaml_serde::to_string(&Value::Mapping(out)).map_err(FormatError::Emit)?;
    let body = body.trim();
    Ok(if body.is_empty() {
        format!("---\n{text}---\n")
    } else {
        format!("---\n{text}---\n\n{body}\n")
    })
}

fn sort_rules(v: &Value) -> Value {
    let Value::Mapping(m) = v else {
        return v.clone();
    };
    let mut out = Mapping::new();
    let mut keys: Vec<&Value> = m.keys().collect();
    keys.sort_by_key(|k| {
        let s = k.as_str().unwrap_or("");
        (
            CATEGORY_ORDER
                .iter()
                .position(|c| *c == s)
                .unwrap_or(CATEGORY_ORDER.len()),
            s.to_string(),
        )
    });
    for k in keys {
        let v = &m[k];
        let v = match v {
            Value::Sequence(items) => {
                let mut items = items.clone();
                items.sort_by_key(|i| i.as_str().map(str::to_string).unwrap_or_default());
                items.dedup();
                Value::Sequence(items)
            }
            other => other.clone(),
        };
        out.insert(k.clone(), v);
    }
    Value::Mapping(out)
}

#[cfg(test)]
mod tests {
    use super::format_band;

    #[test]
    fn orders_keys_sorts_rules_keeps_body() {
        let src = "---\nallow:\n  net: [b.test, a.test]\n  cli: [\"jq *\", \"gh *\", \"jq *\"]\ndescription: d\nband: x\n---\n\nBody\n";
        let out = format_band(src).expect("formats");
        assert_eq!(
            out,
            "---\nband: x\ndescription: d\nallow:\n  cli:\n  - gh *\n  - jq *\n  net:\n  - a.test\n  - b.test\n---\n\nBody\n"
        );
        assert_eq!(format_band(&out).expect("idempotent"), out);
    }
}
