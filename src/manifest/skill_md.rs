//! SKILL.md: the instructions for the agent. Its frontmatter must name the skill and describe it.

use std::path::Path;

use yaml_serde::Value as Yaml;

use super::split_frontmatter;
use crate::diag::{Code, Diagnostic, Loc};

/// The fields band reads from SKILL.md.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkillMd {
    pub name: String,
    pub description: String,
    pub body: String,
}

/// Parse SKILL.md text; `folder` is the skill folder's name, which `name` must match.
pub fn parse_skill_md(path: &Path, source: &str, folder: &str) -> (SkillMd, Vec<Diagnostic>) {
    let mut diags = Vec::new();
    let mut out = SkillMd::default();
    let (yaml, first, body) = match split_frontmatter(source) {
        Ok(x) => x,
        Err(e @ super::FrontmatterError::TooComplex(_)) => {
            diags.push(
                Diagnostic::new(e.code(), path, e.loc(), format!("SKILL.md: {e}"))
                    .with_hint(e.hint()),
            );
            return (out, diags);
        }
        Err(e) => {
            diags.push(
                Diagnostic::new(Code::SkillMdField, path, e.loc(), format!("SKILL.md: {e}"))
                    .with_hint("start SKILL.md with frontmatter: `---`, `name: <skill>`, `description: ...`, `---`"),
            );
            return (out, diags);
        }
    };
    out.body = body.trim().to_string();
    let map = match yaml_serde::from_str::<Yaml>(yaml) {
        Ok(Yaml::Mapping(m)) => m,
        Ok(_) => yaml_serde::Mapping::new(),
        Err(e) => {
            let loc = super::yaml_error_loc(yaml, first, &e);
            diags.push(Diagnostic::new(
                Code::YamlSyntax,
                path,
                loc,
                format!("invalid YAML in SKILL.md: {e}"),
            ));
            return (out, diags);
        }
    };
    let get = |k: &str| {
        map.get(k)
            .and_then(Yaml::as_str)
            .map(str::trim)
            .unwrap_or("")
            .to_string()
    };
    out.name = get("name");
    out.description = get("description");
    let at = |k: &str| super::locate::locate(yaml, first, &[super::locate::Step::Key(k)]);
    if out.name.is_empty() {
        diags.push(
            Diagnostic::new(
                Code::SkillMdField,
                path,
                Loc::new(1, 1),
                "SKILL.md frontmatter has no `name`",
            )
            .with_hint(format!("add `name: {folder}`")),
        );
    } else if out.name != folder {
        diags.push(
            Diagnostic::new(
                Code::SkillMdField,
                path,
                at("name"),
                format!(
                    "SKILL.md name `{}` does not match the folder `{folder}`",
                    out.name
                ),
            )
            .with_hint(format!("rename the folder or set `name: {folder}`")),
        );
    }
    if out.description.is_empty() {
        diags.push(
            Diagnostic::new(Code::SkillMdField, path, Loc::new(1, 1), "SKILL.md frontmatter has no `description`")
                .with_hint("agents choose skills by their description: say what the skill does and when to use it"),
        );
    }
    (out, diags)
}
