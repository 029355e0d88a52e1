//! P013: a band that asks for what the site policy will never give. band-server refuses such a
//! run before anything is built (`crate::policy::site`); lint says so first, naming the site rule.
//! A warning: the site policy is the one of the machine lint runs on, which may not be the one
//! the skill runs on.

use std::path::{Path, PathBuf};

use yaml_serde::Value as Yaml;

use crate::diag::{Code, Diagnostic, Loc};
use crate::manifest::locate::{Step, locate};
use crate::manifest::split_frontmatter;
use crate::policy::site::{self, Refusal, SitePolicy};
use crate::skill::{Resolved, find_loose_band_files, find_skills, load_skill, resolve_script};

/// The P013 findings for every skill and loose band file at or below each path.
pub fn check_paths(paths: &[PathBuf], site: &SitePolicy) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for path in paths.iter().filter(|p| p.exists()) {
        for root in find_skills(path) {
            let (skill, _) = load_skill(&root);
            let (tier, _) = crate::sign::preview_tier(site, Some(&root));
            for script in &skill.scripts {
                if let (Some(r), _) = resolve_script(&skill, &script.name) {
                    out.extend(check(&r, site, &tier));
                }
            }
        }
        for file in find_loose_band_files(path) {
            if let (Some(r), _) = crate::skill::resolve_band_file(&file) {
                out.extend(check(&r, site, &site.unsigned));
            }
        }
    }
    out.sort_by(|a, b| (&a.path, a.loc, &a.message).cmp(&(&b.path, b.loc, &b.message)));
    out.dedup();
    out
}

fn check(r: &Resolved, site: &SitePolicy, tier: &str) -> Option<Diagnostic> {
    let refusal = site::apply(&r.policy, site::RunKind::default(), site, tier).err()?;
    let loc = band_rule_loc(&r.file, &refusal);
    Some(
        Diagnostic::new(
            Code::SiteRefused,
            &r.file,
            loc,
            format!(
                "this machine's site policy refuses the band: {}",
                refusal.message
            ),
        )
        .with_hint(refusal.hint.clone()),
    )
}

/// The line of the band's rule in its file (`allow.cli` item `curl *`), when the file holds it
/// (an inherited rule is in another file: the file itself).
fn band_rule_loc(file: &Path, r: &Refusal) -> Loc {
    let (Some(key), Some(item)) = (&r.band_key, &r.band_item) else {
        return Loc::FILE;
    };
    let Ok(text) = fs_err::read_to_string(file) else {
        return Loc::FILE;
    };
    let Ok((yaml, first_line, _)) = split_frontmatter(&text) else {
        return Loc::FILE;
    };
    let Ok(doc) = yaml_serde::from_str::<Yaml>(yaml) else {
        return Loc::FILE;
    };
    let keys: Vec<&str> = key.split('.').collect();
    let mut node = &doc;
    for k in &keys {
        match node.get(k) {
            Some(n) => node = n,
            None => return Loc::FILE,
        }
    }
    let mut steps: Vec<Step<'_>> = keys.iter().map(|k| Step::Key(k)).collect();
    if let Some(i) = node
        .as_sequence()
        .and_then(|s| s.iter().position(|v| v.as_str() == Some(item)))
    {
        steps.push(Step::Index(i));
    }
    locate(yaml, first_line, &steps)
}
