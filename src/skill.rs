//! The skill folder layout, script discovery, and band resolution for a script.
//!
//! ```text
//! skills/<skill>/
//!   BAND.md  SKILL.md
//!   scripts/<script>[.sh|.py|…]            canonical entry points
//!   scripts/<script>.band.md               optional per-script band
//!   scripts/BAND.md                        optional band for all scripts
//!   scripts/resources/<script>/run.sh      upstream layout (also accepted)
//!   scripts/<sub>/<name>[.py|…]            a nested script `<sub>-<name>`, when its contract
//!                                          schemas/input/<sub>-<name>.json exists
//!   schemas/{input,output}/<script>.json   contracts
//!   schemas/defs/*.json                    shared fragments
//! ```
//!
//! Upstream Bands skills are read in place, unchanged:
//! - `scripts/resources/<script>/run.sh` is the entry of `<script>`. Upstream starts it with
//!   `bash`, so it needs no execute bit ([`runs_with_bash`]); band starts it the same way.
//! - Its co-located `input_schema.json` / `output_schema.json` are its contracts when
//!   `schemas/{input,output}/<script>.json` is absent (see [`crate::contract::SchemaSet::input_rel`]).
//! - A script with no input schema takes no input (an empty object).
//! - Upstream's wrapper `scripts/<name>`, which hands `resources/<name>` to upstream's runtime
//!   (`band exec …` or `bun …/cli.ts exec …`), is the agent's launcher, not a script: band runs
//!   the resource itself, so the wrapper is skipped ([`is_upstream_wrapper`]).
//!
//! The band for a script is the most specific band file found (per-script, then scripts-level,
//! then the skill's BAND.md). A band file with errors is an error: band never falls back to a
//! broader band, or to no sandbox.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use crate::diag::{Code, Diagnostic, Loc, has_errors};
use crate::manifest::locate::Step;
use crate::manifest::skill_md::{SkillMd, parse_skill_md};
use crate::manifest::{BAND_FILE, Band, Target, is_band_file, load_band};
use crate::policy::Policy;
use crate::policy::compose::{BandPolicy, ConflictKind, compose};

/// References (`path:`, `extends`, `includes`) nest at most this deep.
pub const MAX_REFERENCE_DEPTH: usize = 8;

/// One runnable script of a skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    pub name: String,
    /// The entry point, relative to the skill root.
    pub entry: PathBuf,
}

/// A skill folder, as found on disk.
#[derive(Debug, Clone)]
pub struct Skill {
    pub root: PathBuf,
    pub name: String,
    pub skill_md: Option<SkillMd>,
    pub scripts: Vec<Script>,
}

impl Skill {
    pub fn script(&self, name: &str) -> Option<&Script> {
        self.scripts.iter().find(|s| s.name == name)
    }

    /// Band files that may govern `script`, most specific first (existing or not).
    pub fn band_candidates(&self, script: &str) -> Vec<PathBuf> {
        vec![
            self.root.join("scripts").join(format!("{script}.band.md")),
            self.root
                .join("scripts/resources")
                .join(script)
                .join(BAND_FILE),
            self.root.join("scripts").join(BAND_FILE),
            self.root.join(BAND_FILE),
        ]
    }

    /// The band file that governs `script`, if any exists.
    pub fn band_file_for(&self, script: &str) -> Option<PathBuf> {
        self.band_candidates(script)
            .into_iter()
            .find(|p| p.is_file())
    }
}

/// True when `dir` looks like a skill: it holds SKILL.md, or BAND.md next to a scripts/ folder.
pub fn is_skill_dir(dir: &Path) -> bool {
    dir.join("SKILL.md").is_file()
        || (dir.join(BAND_FILE).is_file() && dir.join("scripts").is_dir())
}

/// Skill folders at or below `path` (at most 4 levels down; hidden folders, `target` and
/// `node_modules` are skipped). Sorted.
pub fn find_skills(path: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    walk_dirs(path, 0, &mut |dir| {
        if is_skill_dir(dir) {
            out.push(dir.to_path_buf());
            false
        } else {
            true
        }
    });
    out.sort();
    out
}

/// Band files at or below `path` that are not inside any skill (templates, shared bands).
pub fn find_loose_band_files(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return if is_band_file(path) {
            vec![path.to_path_buf()]
        } else {
            Vec::new()
        };
    }
    let mut out = Vec::new();
    walk_dirs(path, 0, &mut |dir| {
        if is_skill_dir(dir) {
            return false;
        }
        if let Ok(rd) = fs_err::read_dir(dir) {
            for e in rd.flatten() {
                let p = e.path();
                if p.is_file() && is_band_file(&p) {
                    out.push(p);
                }
            }
        }
        true
    });
    out.sort();
    out
}

fn walk_dirs(dir: &Path, depth: usize, visit: &mut dyn FnMut(&Path) -> bool) {
    if depth > 4 || !dir.is_dir() || !visit(dir) {
        return;
    }
    let Ok(rd) = fs_err::read_dir(dir) else {
        return;
    };
    let mut children: Vec<PathBuf> = rd
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            !name.starts_with('.') && name != "target" && name != "node_modules"
        })
        .collect();
    children.sort();
    for c in children {
        walk_dirs(&c, depth + 1, visit);
    }
}

/// Load a skill folder: SKILL.md and the scripts. Band files and schemas are checked elsewhere.
pub fn load_skill(root: &Path) -> (Skill, Vec<Diagnostic>) {
    let mut diags = Vec::new();
    let name = root
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| root.display().to_string());
    let skill_md_path = root.join("SKILL.md");
    let skill_md = match crate::skillfs::read_to_string(
        root,
        Path::new("SKILL.md"),
        crate::skillfs::MAX_SKILL_MD_BYTES,
    ) {
        Ok(text) => {
            let (md, d) = parse_skill_md(&skill_md_path, &text, &name);
            diags.extend(d);
            Some(md)
        }
        Err(e) if e.is_refused() => {
            diags.push(crate::diag::refused_file(&skill_md_path, &e));
            None
        }
        Err(e) if e.is_not_found() => {
            // A `skill.md` or `Skill.md`: the format's name is upper case, and the file is there.
            let other_case = fs_err::read_dir(root).ok().and_then(|entries| {
                entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .find(|n| n.eq_ignore_ascii_case("SKILL.md"))
            });
            let d = match other_case {
                Some(found) => Diagnostic::new(
                    Code::SkillMdMissing,
                    root,
                    Loc::FILE,
                    format!(
                        "the skill has no SKILL.md, but a `{}`",
                        crate::diag::inert(&found)
                    ),
                )
                .with_hint(format!(
                    "Agent Skills name the file SKILL.md, in upper case: rename it (`mv {} SKILL.md`, or `git mv`)",
                    crate::diag::inert(&found)
                )),
                None => Diagnostic::new(
                    Code::SkillMdMissing,
                    root,
                    Loc::FILE,
                    "the skill has no SKILL.md",
                )
                .with_hint(
                    "add SKILL.md with `name` and `description` frontmatter and instructions for the agent",
                ),
            };
            diags.push(d);
            None
        }
        Err(e) => {
            diags.push(Diagnostic::new(
                Code::FileUnreadable,
                &skill_md_path,
                Loc::FILE,
                e.to_string(),
            ));
            None
        }
    };
    let (scripts, d) = discover_scripts(root, skill_md.as_ref().map(|m| m.body.as_str()));
    diags.extend(d);
    (
        Skill {
            root: root.to_path_buf(),
            name,
            skill_md,
            scripts,
        },
        diags,
    )
}

/// The files directly in `scripts/` that may be scripts (hidden and `_` files, band files,
/// READMEs and upstream wrappers left out), relative to the skill root, sorted.
/// Whether the skill's `scripts` folder is inside it. One that leads out (a link) has no script
/// of the skill: the names of the files out there are not listed (nor served, nor quoted).
fn scripts_inside(root: &Path) -> bool {
    match (root.canonicalize(), root.join("scripts").canonicalize()) {
        (Ok(root), Ok(dir)) => dir.starts_with(root),
        _ => false,
    }
}

pub fn top_level_candidates(root: &Path) -> Vec<PathBuf> {
    let dir = root.join("scripts");
    if !scripts_inside(root) {
        return Vec::new();
    }
    let mut entries: Vec<PathBuf> = fs_err::read_dir(&dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    entries.sort();
    entries
        .into_iter()
        .filter(|p| {
            let fname = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            // A name with a line break or another control character is no script's (the skill
            // cannot be locked or run with it, and it would forge lines wherever it is printed).
            !(fname.is_empty()
                || fname.chars().any(char::is_control)
                || fname.starts_with('.')
                || fname.starts_with('_')
                || is_band_file(p)
                || fname.to_ascii_lowercase().starts_with("readme"))
                && p.is_file()
                && !is_upstream_wrapper(root, p)
        })
        .filter_map(|p| p.file_name().map(|n| PathBuf::from("scripts").join(n)))
        .collect()
}

/// A file directly in `scripts/` is a script unless it is clearly not a program
/// ([`crate::entry`]): with no input contract, a data file (no interpreter band knows starts
/// it, and an extension), a test, or a module a sibling imports (no execute bit), or a file
/// nothing says is a program (no execute bit, `#!` line or main guard, and SKILL.md does not run
/// it). A file with an input contract is a script whatever it is.
fn discover_scripts(root: &Path, skill_md: Option<&str>) -> (Vec<Script>, Vec<Diagnostic>) {
    let mut diags = Vec::new();
    let mut by_name: BTreeMap<String, PathBuf> = BTreeMap::new();
    let dir = root.join("scripts");
    let top = top_level_candidates(root);
    let mut files: Vec<crate::entry::File> = top
        .iter()
        .map(|rel| crate::entry::File::read(root, rel))
        .collect();
    files.extend(
        nested_candidates(root)
            .into_iter()
            .map(|(_, rel)| crate::entry::File::read(root, &rel)),
    );
    let verdicts = crate::entry::classify(&files, skill_md);
    let stem_of = |rel: &Path| {
        let f = rel.file_name().and_then(|n| n.to_str()).unwrap_or("");
        f.split('.').next().unwrap_or(f).to_string()
    };
    // Names an entry point claims: a contract of that name is its, not a test's or data's of the
    // same stem (`x.mjs` and `x.test.mjs`).
    let claimed: std::collections::BTreeSet<String> = files
        .iter()
        .zip(&verdicts)
        .take(top.len())
        .filter(|(_, v)| v.is_ok())
        .map(|(f, _)| stem_of(&f.rel))
        .collect();
    for (f, verdict) in files.iter().zip(verdicts).take(top.len()) {
        let rel = f.rel.clone();
        let fname = rel.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let stem = fname.split('.').next().unwrap_or(fname).to_string();
        let contract = root
            .join("schemas/input")
            .join(format!("{stem}.json"))
            .is_file();
        let script = match verdict {
            Ok(_) | Err(crate::entry::NotEntry::Unknown) => true,
            Err(crate::entry::NotEntry::Data) => false,
            Err(_) => contract && !claimed.contains(&stem),
        };
        if script && let Some(prev) = by_name.insert(stem.clone(), rel.clone()) {
            diags.push(
                Diagnostic::new(
                    Code::NotExecutable,
                    root.join(&rel),
                    Loc::FILE,
                    format!(
                        "two entry points for script `{stem}`: {} and {}",
                        prev.display(),
                        rel.display()
                    ),
                )
                .with_hint("keep one file per script name in scripts/"),
            );
        }
    }
    // Nested scripts (Agent Skills: docx's `scripts/office/soffice.py`): a file below a subfolder
    // is a script only when its input contract exists (`band wrap` writes it), so a skill's helper
    // modules and data files below scripts/ stay what they are.
    for (name, rel) in nested_candidates(root) {
        if root
            .join("schemas/input")
            .join(format!("{name}.json"))
            .is_file()
        {
            if let Some(prev) = by_name.get(&name) {
                diags.push(
                    Diagnostic::new(
                        Code::NotExecutable,
                        root.join(&rel),
                        Loc::FILE,
                        format!(
                            "two entry points for script `{name}`: {} and {}",
                            prev.display(),
                            rel.display()
                        ),
                    )
                    .with_hint("rename one of them: a nested script is named by its path below scripts/, joined by `-`"),
                );
            } else {
                by_name.insert(name, rel);
            }
        }
    }
    // Upstream layout: scripts/resources/<name>/run.sh (wins over an upstream wrapper of the same name).
    if let Ok(rd) = fs_err::read_dir(dir.join("resources")) {
        let mut res: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("run.sh").is_file())
            .collect();
        res.sort();
        for r in res {
            let name = r
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            by_name.insert(
                name.clone(),
                PathBuf::from("scripts/resources")
                    .join(&name)
                    .join("run.sh"),
            );
        }
    }
    let scripts: Vec<Script> = by_name
        .into_iter()
        .map(|(name, entry)| Script { name, entry })
        .collect();
    if scripts.is_empty() {
        diags.push(
            Diagnostic::new(Code::NoScripts, root, Loc::FILE, "the skill has no scripts")
                .with_hint(
                    "add an executable file under scripts/, e.g. `band new-script <skill> <name>`",
                ),
        );
    }
    (scripts, diags)
}

/// Folders below `scripts/` never searched for nested scripts: upstream's `resources/` (read as
/// its own layout), dependency and cache folders.
const NOT_NESTED: &[&str] = &["resources", "node_modules", "__pycache__", "venv"];

/// The name of a nested script from its path below `scripts/`: its folders and its file name up to
/// the first `.`, joined by `-` (`office/soffice.py` → `office-soffice`), so that it is a word on
/// the command line (`band docx/office-soffice -- ARGS…`), a file name for its contracts
/// (`schemas/input/office-soffice.json`) and an MCP tool name (`docx__office-soffice`). `None` for
/// a file directly in `scripts/`.
pub fn nested_name(below_scripts: &Path) -> Option<String> {
    let parts: Vec<&str> = below_scripts
        .iter()
        .map(|c| c.to_str())
        .collect::<Option<_>>()?;
    let (file, dirs) = parts.split_last()?;
    if dirs.is_empty() {
        return None;
    }
    let stem = file.split('.').next().unwrap_or(file);
    if stem.is_empty() {
        return None;
    }
    let mut name = dirs.join("-");
    name.push('-');
    name.push_str(stem);
    Some(name)
}

/// Every file in a subfolder of `scripts/` that could be a nested script: (its name, its path
/// relative to the skill root), sorted. Hidden and `_`-prefixed files and folders, `NOT_NESTED`
/// folders and symlinks are left out.
pub fn nested_candidates(root: &Path) -> Vec<(String, PathBuf)> {
    fn walk(root: &Path, rel: &Path, depth: usize, out: &mut Vec<(String, PathBuf)>) {
        if depth > 8 {
            return;
        }
        let Ok(rd) = fs_err::read_dir(root.join(rel)) else {
            return;
        };
        let mut entries: Vec<_> = rd.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = e.file_name().to_string_lossy().into_owned();
            let Ok(ft) = e.file_type() else { continue };
            if name.starts_with('.') || name.starts_with('_') || name.chars().any(char::is_control)
            {
                continue;
            }
            let child = rel.join(&name);
            if ft.is_dir() {
                if NOT_NESTED.contains(&name.as_str()) {
                    continue;
                }
                walk(root, &child, depth + 1, out);
            } else if ft.is_file()
                && depth > 0
                && !is_band_file(&child)
                && !name.to_ascii_lowercase().starts_with("readme")
                && let Ok(below) = child.strip_prefix("scripts")
                && let Some(n) = nested_name(below)
            {
                out.push((n, child));
            }
        }
    }
    let mut out = Vec::new();
    if scripts_inside(root) {
        walk(root, Path::new("scripts"), 0, &mut out);
    }
    out
}

pub use crate::launch::runs_with_bash;

/// The most of a file [`is_upstream_wrapper`] reads: upstream's wrappers are a few lines.
const WRAPPER_MAX_BYTES: u64 = 4096;

/// True when `file` (in `scripts/`) is an upstream wrapper: a small shell script that hands a
/// `resources/<name>` folder to upstream's runtime, `band exec <dir>` as documented or
/// `bun …/cli.ts exec "$DIR/resources/<name>"` as shipped.
pub fn is_upstream_wrapper(root: &Path, file: &Path) -> bool {
    let Ok(text) = crate::skillfs::read_to_string(root, file, WRAPPER_MAX_BYTES) else {
        return false;
    };
    text.starts_with("#!")
        && text.contains("resources/")
        && text.lines().any(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            words.windows(2).any(|w| {
                (w[0] == "band" || w[0].ends_with("cli.ts") || w[0].ends_with("cli.ts\""))
                    && w[1] == "exec"
            })
        })
}

/// A band file after references and composition: the policy one run gets.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The band file that was chosen (before following `path:`).
    pub file: PathBuf,
    /// The band after following `path:` references.
    pub band: Band,
    pub policy: Policy,
    pub target: Option<Target>,
    pub config: Option<serde_json::Value>,
    /// Every band file that contributed (for fingerprints and `band explain`).
    pub sources: Vec<PathBuf>,
}

/// Resolve the band that governs `script` of `skill`.
pub fn resolve_script(skill: &Skill, script: &str) -> (Option<Resolved>, Vec<Diagnostic>) {
    match skill.band_file_for(script) {
        Some(file) => resolve_band_file(&file),
        None => (
            None,
            vec![
                Diagnostic::new(
                    Code::NoBand,
                    &skill.root,
                    Loc::FILE,
                    format!("script `{script}` has no band file, so it cannot run"),
                )
                .with_hint("add BAND.md to the skill (everything not allowed there is denied)"),
            ],
        ),
    }
}

/// Resolve one band file: follow `path:`, compose `extends` and `includes`.
pub fn resolve_band_file(file: &Path) -> (Option<Resolved>, Vec<Diagnostic>) {
    let mut diags = Vec::new();
    let mut sources = Vec::new();
    let mut stack = Vec::new();
    let out =
        resolve_inner(file, &mut stack, &mut sources, &mut diags).map(|(band, policy)| Resolved {
            file: file.to_path_buf(),
            target: band.target.clone(),
            config: band.config.clone(),
            band,
            policy,
            sources: sources.clone(),
        });
    if has_errors(&diags) {
        return (None, diags);
    }
    (out, diags)
}

/// Load `file`, following `path:` and composing its extends/includes. `stack` holds the
/// canonical paths being resolved, for cycle detection.
fn resolve_inner(
    file: &Path,
    stack: &mut Vec<PathBuf>,
    sources: &mut Vec<PathBuf>,
    diags: &mut Vec<Diagnostic>,
) -> Option<(Band, Policy)> {
    let parsed = load_band(file);
    let errors = has_errors(&parsed.diagnostics);
    diags.extend(parsed.diagnostics);
    let band = parsed.band.filter(|_| !errors)?;
    let canonical = file.canonicalize().unwrap_or_else(|_| file.to_path_buf());
    if !sources.contains(&canonical) {
        sources.push(canonical.clone());
    }
    stack.push(canonical);
    let result = (|| {
        if let Some(reference) = band.reference.clone() {
            let target = reference_target(&band, &reference, &[Step::Key("path")], stack, diags)?;
            return resolve_inner(&target, stack, sources, diags);
        }
        let mut ancestors: Vec<BandPolicy> = Vec::new();
        for (i, r) in band.extends.iter().enumerate() {
            let at = [Step::Key("extends"), Step::Index(i)];
            let target = reference_target(&band, r, &at, stack, diags)?;
            let (parent, parent_policy) = resolve_inner(&target, stack, sources, diags)?;
            ancestors.push(effective_as_band(&parent, &parent_policy));
        }
        let mut includes: Vec<BandPolicy> = Vec::new();
        for (i, r) in band.includes.iter().enumerate() {
            let at = [Step::Key("includes"), Step::Index(i)];
            let target = reference_target(&band, r, &at, stack, diags)?;
            let (inc, inc_policy) = resolve_inner(&target, stack, sources, diags)?;
            includes.push(effective_as_band(&inc, &inc_policy));
        }
        let (policy, conflicts) = compose(&band.own_policy(), &ancestors, &includes);
        for c in conflicts {
            // Conflicts inside one file were already reported by the parser.
            if c.kind == ConflictKind::DenyInsist && c.source == band.path {
                continue;
            }
            let code = match c.kind {
                ConflictKind::DenyInsist => Code::DenyInsist,
                ConflictKind::InsistNotAllowed => Code::InsistNotAllowed,
                ConflictKind::CeilingExceeded => Code::CeilingExceeded,
                ConflictKind::RequiresUnsatisfied => Code::RequiresUnsatisfied,
            };
            let key = if band.includes.is_empty() {
                "extends"
            } else {
                "includes"
            };
            diags.push(Diagnostic::new(
                code,
                &band.path,
                band.locate(&[Step::Key(key)]),
                c.message,
            ));
        }
        Some((band.clone(), policy))
    })();
    stack.pop();
    result
}

fn effective_as_band(band: &Band, policy: &Policy) -> BandPolicy {
    BandPolicy {
        name: band.name.clone(),
        source: band.path.clone(),
        allow: policy.allow.clone(),
        deny: policy.deny.clone(),
        insist: policy.insist.clone(),
        limits: policy.limits.clone(),
        secrets: policy.secrets.clone(),
        required_secrets: policy.required_secrets.clone(),
        secret_hosts: policy.secret_hosts.clone(),
        requires_egress: band.requires_egress.clone(),
    }
}

/// Check and resolve a reference written in `band` at `at`.
fn reference_target(
    band: &Band,
    reference: &str,
    at: &[Step<'_>],
    stack: &[PathBuf],
    diags: &mut Vec<Diagnostic>,
) -> Option<PathBuf> {
    let loc = band.locate(at);
    let mut fail = |msg: String, hint: &str| {
        diags.push(Diagnostic::new(Code::BadReference, &band.path, loc, msg).with_hint(hint));
        None
    };
    let rel = Path::new(reference);
    if rel.is_absolute() || reference.contains("://") {
        return fail(
            format!("reference `{reference}` must be a relative path"),
            "write the path relative to this band file",
        );
    }
    if !is_band_file(rel) {
        return fail(
            format!("reference `{reference}` does not name a band file"),
            "references point at BAND.md or *.band.md files",
        );
    }
    if rel
        .components()
        .any(|c| matches!(c, Component::Prefix(_) | Component::RootDir))
    {
        return fail(
            format!("reference `{reference}` must be a relative path"),
            "write the path relative to this band file",
        );
    }
    let base = band.path.parent().unwrap_or(Path::new("."));
    let target = base.join(rel);
    let Ok(canonical) = target.canonicalize() else {
        return fail(
            format!(
                "reference `{reference}` not found (looked for {})",
                target.display()
            ),
            "check the path",
        );
    };
    if stack.contains(&canonical) {
        return fail(
            format!("reference `{reference}` forms a cycle"),
            "a band may not reach itself through path/extends/includes",
        );
    }
    if stack.len() >= MAX_REFERENCE_DEPTH {
        return fail(
            format!("references nest deeper than {MAX_REFERENCE_DEPTH}"),
            "flatten the chain of band files",
        );
    }
    Some(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `scripts` that is a link out of the skill lists nothing: the names of the files out
    /// there are no scripts of the skill (and so are printed and served nowhere).
    /// A `skill.md` in lower case (sixth wild trial: copilot-studio-knowledge-readiness) is no
    /// SKILL.md, and S001 says which file is there and to rename it.
    #[test]
    fn a_skill_md_in_another_case_is_named_with_the_rename() {
        let t = tempfile::tempdir().expect("tempdir");
        let root = t.path().join("lower");
        fs_err::create_dir_all(&root).expect("mkdir");
        fs_err::write(
            root.join("skill.md"),
            "---\nname: lower\ndescription: d\n---\n",
        )
        .expect("write");
        let (skill, diags) = load_skill(&root);
        assert!(skill.skill_md.is_none());
        let d = diags
            .iter()
            .find(|d| d.code == Code::SkillMdMissing)
            .expect("S001");
        assert_eq!(d.message, "the skill has no SKILL.md, but a `skill.md`");
        assert!(
            d.hint
                .as_deref()
                .is_some_and(|h| h.contains("rename it (`mv skill.md SKILL.md`")),
            "{d:?}"
        );
    }

    #[test]
    fn a_scripts_folder_linked_out_of_the_skill_lists_nothing() {
        let t = tempfile::tempdir().expect("tempdir");
        let (root, outside) = (t.path().join("sd"), t.path().join("ssh"));
        fs_err::create_dir_all(&root).expect("mkdir");
        fs_err::create_dir_all(outside.join("nested")).expect("mkdir");
        fs_err::write(
            root.join("SKILL.md"),
            "---\nname: sd\ndescription: d\n---\n",
        )
        .expect("write");
        fs_err::write(outside.join("id_canary"), "#!/bin/sh\n").expect("write");
        fs_err::write(outside.join("nested/run.sh"), "#!/bin/sh\n").expect("write");
        fs_err::os::unix::fs::symlink(&outside, root.join("scripts")).expect("symlink");
        assert!(top_level_candidates(&root).is_empty());
        assert!(nested_candidates(&root).is_empty());
        let (skill, _) = load_skill(&root);
        assert!(skill.scripts.is_empty(), "{:?}", skill.scripts);
    }

    /// A file whose name holds a line break (or any control character) is no script: it would
    /// print a line of the skill author's choosing wherever scripts are listed.
    #[test]
    fn a_name_with_a_line_break_is_no_script() {
        let t = tempfile::tempdir().expect("tempdir");
        let root = t.path().join("nl");
        fs_err::create_dir_all(root.join("scripts/sub")).expect("mkdir");
        for name in ["ok.sh", "x\nChecked 1 skill: no problems.sh", "sub/y\rz.sh"] {
            let p = root.join("scripts").join(name);
            fs_err::write(&p, "#!/bin/sh\n").expect("write");
            fs_err::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .expect("chmod");
        }
        assert_eq!(
            top_level_candidates(&root),
            [PathBuf::from("scripts/ok.sh")]
        );
        assert!(nested_candidates(&root).is_empty());
    }

    #[test]
    fn nested_scripts_are_named_by_their_path() {
        assert_eq!(
            nested_name(Path::new("office/soffice.py")).as_deref(),
            Some("office-soffice")
        );
        assert_eq!(
            nested_name(Path::new("a/b/c.tar.py")).as_deref(),
            Some("a-b-c")
        );
        assert_eq!(nested_name(Path::new("top.py")), None);
    }

    /// A file below a subfolder of scripts/ is a script only with its input contract; hidden,
    /// `_`-prefixed and dependency folders are not searched.
    #[test]
    fn nested_scripts_need_their_contract() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        for f in [
            "scripts/office/soffice.py",
            "scripts/office/helpers/merge.py",
            "scripts/_lib/x.py",
            "scripts/node_modules/m/cli.js",
            "scripts/office/.hidden.py",
        ] {
            fs_err::create_dir_all(r.join(f).parent().unwrap()).unwrap();
            fs_err::write(r.join(f), "#!/bin/sh\n").unwrap();
        }
        let names: Vec<String> = nested_candidates(r).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["office-helpers-merge", "office-soffice"]);
        assert!(discover_scripts(r, None).0.is_empty());
        fs_err::create_dir_all(r.join("schemas/input")).unwrap();
        fs_err::write(r.join("schemas/input/office-soffice.json"), "{}").unwrap();
        let (scripts, _) = discover_scripts(r, None);
        assert_eq!(
            scripts,
            [Script {
                name: "office-soffice".into(),
                entry: "scripts/office/soffice.py".into()
            }]
        );
    }

    /// Directly in scripts/, a file is a script unless it is clearly not a program: data (an
    /// extension no interpreter band knows), a test, a module a sibling imports, a file nothing
    /// says is a program. An extensionless file nothing explains stays a script (lint's S003
    /// says what to do); an input contract makes any of them but data a script.
    #[test]
    fn top_level_files_that_are_clearly_not_programs_are_not_scripts() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        for (f, text, mode) in [
            (
                "scripts/run.py",
                "import util\nif __name__ == '__main__':\n    pass\n",
                0o644,
            ),
            ("scripts/util.py", "#!/usr/bin/env python3\n", 0o644),
            ("scripts/tool.py", "import util\n", 0o755),
            ("scripts/test_run.py", "#!/usr/bin/env python3\n", 0o755),
            ("scripts/pyproject.toml", "[project]\n", 0o644),
            ("scripts/notes.py", "x = 1\n", 0o644),
            ("scripts/go", "go\n", 0o644),
            ("scripts/named.js", "console.log(1)\n", 0o644),
        ] {
            write(r, f, text);
            fs_err::set_permissions(r.join(f), std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let md = "Run `node scripts/named.js x`.";
        let names = |r: &Path| -> Vec<String> {
            discover_scripts(r, Some(md))
                .0
                .into_iter()
                .map(|s| s.name)
                .collect()
        };
        assert_eq!(names(r), ["go", "named", "run", "tool"]);
        write(r, "schemas/input/notes.json", "{}");
        write(r, "schemas/input/pyproject.json", "{}");
        assert_eq!(names(r), ["go", "named", "notes", "run", "tool"]);
    }

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        fs_err::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs_err::write(p, text).expect("write");
    }

    const BAND: &str = "---\nband: demo\ndescription: d\nallow:\n  cli: [\"jq *\"]\n---\n";

    #[test]
    fn discovers_canonical_and_upstream_scripts() {
        let t = tempfile::tempdir().expect("tmp");
        let root = t.path().join("demo");
        write(&root, "SKILL.md", "---\nname: demo\ndescription: d\n---\n");
        write(&root, "BAND.md", BAND);
        write(&root, "scripts/count.sh", "#!/bin/sh\n");
        write(&root, "scripts/count.band.md", BAND);
        write(&root, "scripts/_lib/common.sh", "");
        write(&root, "scripts/resources/legacy/run.sh", "#!/bin/sh\n");
        write(&root, "scripts/legacy", "#!/bin/sh\nband exec ...\n");
        let (skill, diags) = load_skill(&root);
        assert!(diags.is_empty(), "{diags:?}");
        let names: Vec<_> = skill
            .scripts
            .iter()
            .map(|s| (s.name.as_str(), s.entry.to_string_lossy().into_owned()))
            .collect();
        assert_eq!(
            names,
            vec![
                ("count", "scripts/count.sh".into()),
                ("legacy", "scripts/resources/legacy/run.sh".into())
            ]
        );
        assert_eq!(
            skill.band_file_for("count"),
            Some(root.join("scripts/count.band.md"))
        );
        assert_eq!(skill.band_file_for("legacy"), Some(root.join("BAND.md")));
        assert_eq!(find_skills(t.path()), vec![root.clone()]);
    }

    #[test]
    fn upstream_wrappers_are_skipped_and_run_sh_runs_with_bash() {
        let t = tempfile::tempdir().expect("tmp");
        let root = t.path().join("up");
        write(&root, "SKILL.md", "---\nname: up\ndescription: d\n---\n");
        write(&root, "BAND.md", BAND);
        write(&root, "scripts/resources/list/run.sh", "#!/bin/bash\n");
        // The documented wrapper, and the shipped one (which calls upstream's cli.ts).
        write(
            &root,
            "scripts/list",
            "#!/bin/bash\nband exec scripts/resources/list \"$@\"\n",
        );
        write(
            &root,
            "scripts/gone",
            "#!/bin/bash\nDIR=\"$(cd \"$(dirname \"$0\")\" && pwd)\"\nbun \"$DIR/../packages/runtime/src/cli.ts\" exec \"$DIR/resources/gone\" --skill_root \"$DIR/..\" \"$@\"\n",
        );
        // A script of its own that merely mentions band: kept.
        write(
            &root,
            "scripts/own.sh",
            "#!/bin/sh\necho band exec is upstream's\n",
        );
        let (skill, diags) = load_skill(&root);
        assert!(diags.is_empty(), "{diags:?}");
        let names: Vec<&str> = skill.scripts.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["list", "own"]);
        assert!(is_upstream_wrapper(&root, &root.join("scripts/gone")));
        assert!(!is_upstream_wrapper(&root, &root.join("scripts/own.sh")));
        assert!(runs_with_bash(Path::new("scripts/resources/list/run.sh")));
        for not in [
            "scripts/list",
            "scripts/resources/list/other.sh",
            "scripts/resources/.x/run.sh",
            "x/scripts/resources/list/run.sh",
        ] {
            assert!(!runs_with_bash(Path::new(not)), "{not}");
        }
    }

    #[test]
    fn broken_specific_band_is_an_error_not_a_fallback() {
        let t = tempfile::tempdir().expect("tmp");
        let root = t.path().join("demo");
        write(&root, "SKILL.md", "---\nname: demo\ndescription: d\n---\n");
        write(&root, "BAND.md", BAND);
        write(&root, "scripts/x.sh", "");
        write(&root, "scripts/BAND.md", "---\nband: [broken\n---\n");
        let (skill, _) = load_skill(&root);
        let (resolved, diags) = resolve_script(&skill, "x");
        assert!(resolved.is_none());
        assert!(
            diags
                .iter()
                .any(|d| d.code == Code::YamlSyntax && d.path.ends_with("scripts/BAND.md"))
        );
    }

    #[test]
    fn missing_band_is_an_error() {
        let t = tempfile::tempdir().expect("tmp");
        write(t.path(), "SKILL.md", "---\nname: x\ndescription: d\n---\n");
        write(t.path(), "scripts/x.sh", "");
        let (skill, _) = load_skill(t.path());
        let (resolved, diags) = resolve_script(&skill, "x");
        assert!(resolved.is_none());
        assert_eq!(diags[0].code, Code::NoBand);
    }

    #[test]
    fn path_references_resolve_and_cycles_are_refused() {
        let t = tempfile::tempdir().expect("tmp");
        write(t.path(), "shared/base.band.md", BAND);
        write(
            t.path(),
            "a/BAND.md",
            "---\npath: ../shared/base.band.md\n---\n",
        );
        let (r, d) = resolve_band_file(&t.path().join("a/BAND.md"));
        assert!(d.is_empty(), "{d:?}");
        let r = r.expect("resolved");
        assert_eq!(r.band.name, "demo");
        assert_eq!(r.policy.allow.cli, vec!["jq *"]);
        assert_eq!(r.sources.len(), 2);

        write(
            t.path(),
            "c/one.band.md",
            "---\npath: ../c/two.band.md\n---\n",
        );
        write(t.path(), "c/two.band.md", "---\npath: one.band.md\n---\n");
        let (r, d) = resolve_band_file(&t.path().join("c/one.band.md"));
        assert!(r.is_none());
        assert!(
            d.iter()
                .any(|d| d.code == Code::BadReference && d.message.contains("cycle")),
            "{d:?}"
        );

        write(t.path(), "d/BAND.md", "---\npath: /etc/shadow\n---\n");
        let (_, d) = resolve_band_file(&t.path().join("d/BAND.md"));
        assert!(
            d.iter()
                .any(|d| d.message.contains("must be a relative path")),
            "{d:?}"
        );
        write(
            t.path(),
            "e/BAND.md",
            "---\npath: ../../../../etc/passwd\n---\n",
        );
        let (_, d) = resolve_band_file(&t.path().join("e/BAND.md"));
        assert!(
            d.iter()
                .any(|d| d.message.contains("does not name a band file")),
            "{d:?}"
        );
    }
}
