//! `band lint`: every check on skills and band files, and the renderers for its output.
//!
//! Checks: band file fields and patterns (via [`crate::manifest`]), resolution and composition per
//! script (via [`crate::skill`]), the skill layout (SKILL.md, executable entries, schemas), and the
//! contracts (every schema compiles, every `$ref` resolves offline).

pub mod render;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::contract::SchemaSet;
use crate::diag::{Code, Diagnostic, Loc, Severity};
use crate::manifest::{is_band_file, load_band};
use crate::skill::{find_loose_band_files, find_skills, load_skill, resolve_script};

/// What `band lint` found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub diagnostics: Vec<Diagnostic>,
    pub skills: usize,
    pub band_files: usize,
}

impl Report {
    pub fn count(&self, sev: Severity) -> usize {
        self.diagnostics.iter().filter(|d| d.severity == sev).count()
    }
}

/// Lint every skill and loose band file at or below each path.
pub fn lint_paths(paths: &[PathBuf]) -> Report {
    let mut report = Report::default();
    for path in paths {
        if !path.exists() {
            report.diagnostics.push(
                Diagnostic::new(Code::FileUnreadable, path, Loc::FILE, format!("{} does not exist", path.display()))
                    .with_hint("pass a skill folder, a folder of skills, or a band file"),
            );
            continue;
        }
        for skill in find_skills(path) {
            report.skills += 1;
            let (diags, bands) = lint_skill(&skill);
            report.band_files += bands;
            report.diagnostics.extend(diags);
        }
        for file in find_loose_band_files(path) {
            report.band_files += 1;
            let (_, diags) = crate::skill::resolve_band_file(&file);
            let parsed = load_band(&file);
            report.diagnostics.extend(parsed.diagnostics);
            report.diagnostics.extend(diags);
        }
    }
    sort_dedup(&mut report.diagnostics);
    report
}

fn sort_dedup(diags: &mut Vec<Diagnostic>) {
    diags.sort_by(|a, b| (&a.path, a.loc, a.code, &a.message).cmp(&(&b.path, b.loc, b.code, &b.message)));
    diags.dedup();
}

/// Lint one skill folder. Returns the diagnostics and the number of band files checked.
pub fn lint_skill(root: &Path) -> (Vec<Diagnostic>, usize) {
    let (skill, mut diags) = load_skill(root);
    // Every band file in the skill, whether or not a script uses it.
    let mut band_files = BTreeSet::new();
    collect_band_files(root, 0, &mut band_files);
    for f in &band_files {
        diags.extend(load_band(f).diagnostics);
    }
    let schemas_dir = root.join("schemas");
    let (schemas, schema_errors) = SchemaSet::load_dir(root);
    diags.extend(schema_errors.iter().map(|e| contract_diagnostic(root, e)));
    diags.extend(schemas.compile_all().iter().map(|e| contract_diagnostic(root, e)));
    for script in &skill.scripts {
        let (resolved, d) = resolve_script(&skill, &script.name);
        diags.extend(d);
        let entry = root.join(&script.entry);
        if !is_executable(&entry) {
            diags.push(
                Diagnostic::new(Code::NotExecutable, &entry, Loc::FILE, format!("script `{}` is not executable", script.name))
                    .with_hint(format!("chmod +x {}", entry.display())),
            );
        }
        let input = schemas_dir.join("input").join(format!("{}.json", script.name));
        if !input.is_file() {
            diags.push(
                Diagnostic::new(Code::MissingInputSchema, &entry, Loc::FILE, format!("script `{}` has no input schema", script.name))
                    .with_hint(format!("add {} (`{{\"type\": \"object\", \"properties\": {{}}}}` takes no arguments)", input.display())),
            );
        }
        let output = schemas_dir.join("output").join(format!("{}.json", script.name));
        if !output.is_file() {
            diags.push(
                Diagnostic::new(Code::MissingOutputSchema, &entry, Loc::FILE, format!("script `{}` has no output schema", script.name))
                    .with_hint(format!("add {} so callers can rely on the output's shape", output.display())),
            );
        }
        if let Some(r) = resolved {
            diags.extend(check_config(root, &schemas, &r));
        }
    }
    for (kind, dir) in [("input", "schemas/input"), ("output", "schemas/output")] {
        let Ok(rd) = std::fs::read_dir(root.join(dir)) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            let Some(stem) = p.file_stem().and_then(|s| s.to_str()) else { continue };
            if p.extension().is_some_and(|x| x == "json") && skill.script(stem).is_none() {
                diags.push(
                    Diagnostic::new(Code::OrphanSchema, &p, Loc::FILE, format!("{kind} schema for `{stem}`, which is not a script of this skill"))
                        .with_hint("rename it to match a script in scripts/, or remove it"),
                );
            }
        }
    }
    diags.extend(check_links(root));
    (diags, band_files.len())
}

/// The band's config block must match schemas/band-config.schema.json when both exist.
fn check_config(root: &Path, schemas: &SchemaSet, r: &crate::skill::Resolved) -> Vec<Diagnostic> {
    let rel = "schemas/band-config.schema.json";
    let (Some(config), true) = (&r.config, root.join(rel).is_file()) else { return Vec::new() };
    match schemas.compile(rel) {
        Ok(contract) => match contract.validate(config) {
            Ok(()) => Vec::new(),
            Err(violations) => violations
                .into_iter()
                .map(|v| {
                    Diagnostic::new(
                        Code::ConfigInvalid,
                        &r.band.path,
                        r.band.locate(&[crate::manifest::locate::Step::Key(&r.band.name)]),
                        format!("config {}: {}", if v.instance_path.is_empty() { "/" } else { &v.instance_path }, v.message),
                    )
                })
                .collect(),
        },
        Err(_) => Vec::new(), // reported by the schema checks
    }
}

fn collect_band_files(dir: &Path, depth: usize, out: &mut BTreeSet<PathBuf>) {
    if depth > 4 {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() && !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')) {
            collect_band_files(&p, depth + 1, out);
        } else if ft.is_file() && is_band_file(&p) {
            out.insert(p);
        }
    }
}

/// Symlinks inside a skill must stay inside it.
fn check_links(root: &Path) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let Ok(canon_root) = root.canonicalize() else { return out };
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_symlink() {
                let inside = p.canonicalize().is_ok_and(|t| t.starts_with(&canon_root));
                if !inside {
                    out.push(
                        Diagnostic::new(Code::UnsafeLink, &p, Loc::FILE, "symlink points outside the skill (or nowhere)")
                            .with_hint("copy the file into the skill instead of linking to it"),
                    );
                }
            } else if ft.is_dir() {
                stack.push(p);
            }
        }
    }
    out
}

#[cfg(unix)]
fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(p: &Path) -> bool {
    p.is_file()
}

/// A contract error as a diagnostic on the schema file.
fn contract_diagnostic(root: &Path, e: &crate::contract::ContractError) -> Diagnostic {
    let path = if e.path().is_absolute() { e.path().to_path_buf() } else { root.join(e.path()) };
    Diagnostic::new(e.code(), path, e.loc(), e.to_string())
}
