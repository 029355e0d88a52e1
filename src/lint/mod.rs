//! `band lint`: every check on skills and band files, and the renderers for its output.
//!
//! Checks: band file fields and patterns (via [`crate::manifest`]), resolution and composition per
//! script (via [`crate::skill`]), the skill layout (SKILL.md, executable entries, schemas), and the
//! contracts (every schema compiles, every `$ref` resolves offline).

pub mod layout;
pub mod paths;
pub mod render;
pub mod site;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::contract::{Contract, SchemaSet};
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
        self.diagnostics
            .iter()
            .filter(|d| d.severity == sev)
            .count()
    }
}

/// What lint finds in the text of one band file of its own (`BAND.md`): its parser's
/// diagnostics and the absolute-path checks, errors and warnings alike. The check a draft of
/// `band wrap` or `band learn` must pass, as a band a person wrote does.
pub fn band_text_findings(text: &str) -> Vec<Diagnostic> {
    let parsed = crate::manifest::parse_band(Path::new("BAND.md"), text);
    let mut diags = parsed.diagnostics;
    diags.extend(parsed.band.iter().flat_map(paths::check_absolute_paths));
    diags.extend(parsed.band.iter().flat_map(paths::check_never_copied));
    diags
}

/// Lint every skill and loose band file at or below each path.
pub fn lint_paths(paths: &[PathBuf]) -> Report {
    let mut report = Report::default();
    for path in paths {
        if !path.exists() {
            report.diagnostics.push(
                Diagnostic::new(
                    Code::FileUnreadable,
                    path,
                    Loc::FILE,
                    format!("{} does not exist", path.display()),
                )
                .with_hint("pass a skill folder, a folder of skills, or a band file"),
            );
            continue;
        }
        let skills = find_skills(path);
        report.skills += skills.len();
        for (diags, bands) in lint_skills(&skills) {
            report.band_files += bands;
            report.diagnostics.extend(diags);
        }
        for file in find_loose_band_files(path) {
            report.band_files += 1;
            let (_, diags) = crate::skill::resolve_band_file(&file);
            let parsed = load_band(&file);
            report.diagnostics.extend(parsed.diagnostics);
            report
                .diagnostics
                .extend(parsed.band.iter().flat_map(paths::check_absolute_paths));
            report
                .diagnostics
                .extend(parsed.band.iter().flat_map(paths::check_never_copied));
            report.diagnostics.extend(diags);
        }
    }
    sort_dedup(&mut report.diagnostics);
    report
}

/// [`lint_skill`] on each skill, spread over the available cores (skills are independent).
/// Results come back in the order of `skills`.
fn lint_skills(skills: &[PathBuf]) -> Vec<(Vec<Diagnostic>, usize)> {
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(skills.len());
    if workers <= 1 {
        return skills.iter().map(|s| lint_skill(s)).collect();
    }
    let next = AtomicUsize::new(0);
    let mut results: Vec<Option<(Vec<Diagnostic>, usize)>> = skills.iter().map(|_| None).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(skill) = skills.get(i) else { break };
                        done.push((i, lint_skill(skill)));
                    }
                    done
                })
            })
            .collect();
        for handle in handles {
            match handle.join() {
                Ok(done) => done.into_iter().for_each(|(i, r)| results[i] = Some(r)),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
    });
    results.into_iter().flatten().collect()
}

fn sort_dedup(diags: &mut Vec<Diagnostic>) {
    diags.sort_by(|a, b| {
        (&a.path, a.loc, a.code, &a.message).cmp(&(&b.path, b.loc, b.code, &b.message))
    });
    diags.dedup();
}

/// Lint one skill folder. Returns the diagnostics and the number of band files checked.
pub fn lint_skill(root: &Path) -> (Vec<Diagnostic>, usize) {
    let (skill, mut diags) = load_skill(root);
    // Every band file in the skill, whether or not a script uses it.
    let mut band_files = BTreeSet::new();
    collect_band_files(root, 0, &mut band_files);
    for f in &band_files {
        let parsed = load_band(f);
        diags.extend(parsed.diagnostics);
        diags.extend(parsed.band.iter().flat_map(paths::check_absolute_paths));
        diags.extend(parsed.band.iter().flat_map(paths::check_never_copied));
    }
    let schemas_dir = root.join("schemas");
    let (schemas, schema_errors) = SchemaSet::load_dir(root);
    diags.extend(schema_errors.iter().map(|e| contract_diagnostic(root, e)));
    diags.extend(
        schemas
            .compile_all()
            .iter()
            .map(|e| contract_diagnostic(root, e)),
    );
    // Scripts that share a band file share its resolution: resolve (and check the config of)
    // each band file once. The diagnostics would be the same, and are deduplicated anyway.
    let mut resolved_files: BTreeSet<PathBuf> = BTreeSet::new();
    // Compiled once per skill; a config schema that does not compile is reported by the checks above.
    let config_contract = root
        .join(CONFIG_SCHEMA)
        .is_file()
        .then(|| schemas.compile(CONFIG_SCHEMA).ok())
        .flatten();
    // The commands each band file allows (by its resolution), for the entries it starts.
    let mut commands: BTreeMap<PathBuf, Option<BTreeSet<String>>> = BTreeMap::new();
    for script in &skill.scripts {
        let band_file = skill.band_file_for(&script.name);
        if band_file
            .as_ref()
            .is_none_or(|f| resolved_files.insert(f.clone()))
        {
            let (resolved, d) = resolve_script(&skill, &script.name);
            diags.extend(d);
            if let Some(r) = &resolved {
                diags.extend(check_bound_hosts(r));
                diags.extend(paths::check_git_work_tree(r));
            }
            if let Some(f) = &band_file {
                let allowed = resolved.as_ref().and_then(|r| {
                    crate::policy::cli::CliMatcher::new(&r.policy.allow.cli, &r.policy.deny.cli)
                        .ok()
                        .map(|m| m.commands())
                });
                commands.insert(f.clone(), allowed);
            }
            if let (Some(r), Some(contract)) = (resolved, &config_contract) {
                diags.extend(check_config(contract, &r));
            }
        }
        let allowed = band_file
            .as_ref()
            .and_then(|f| commands.get(f))
            .and_then(Option::as_ref);
        diags.extend(check_entry_start(root, script, allowed));
        let entry = root.join(&script.entry);
        // A script starts as band-server starts it (`crate::launch`): by its `#!` line or its
        // extension it needs no execute bit; only one nothing explains cannot start.
        if entry_launch(root, &script.entry) == crate::launch::Launch::Unknown {
            diags.push(
                Diagnostic::new(
                    Code::NotExecutable,
                    &entry,
                    Loc::FILE,
                    format!(
                        "script `{}` is not executable, and band cannot tell what runs it",
                        script.name
                    ),
                )
                .with_hint(format!(
                    "give it a #! line or a known extension ({}), or chmod +x it if it is a program",
                    crate::launch::KNOWN_EXTENSIONS
                )),
            );
        }
        diags.extend(crate::lint::layout::check_contract_files(
            root,
            &script.name,
        ));
        let input = schemas_dir
            .join("input")
            .join(format!("{}.json", script.name));
        if let Some(rel) = schemas.input_rel(&script.name)
            && let Some(schema) = schemas.get(&rel)
        {
            for name in crate::contract::shadowed_properties(schema) {
                diags.push(
                    Diagnostic::new(
                        Code::ShadowedInput,
                        root.join(&rel),
                        Loc::FILE,
                        format!(
                            "input property `{name}` of script `{}` is named like band run's own flag: `band {}/{} --{name}=…` sets band's --{name}, not the script's",
                            script.name, skill.name, script.name
                        ),
                    )
                    .with_hint(format!(
                        "rename the property; until then give it after `--` (`-- --{name}=…`) or in --input"
                    )),
                );
            }
        }
        if schemas.input_rel(&script.name).is_none() {
            diags.push(
                Diagnostic::new(
                    Code::MissingInputSchema,
                    &entry,
                    Loc::FILE,
                    format!(
                        "script `{}` has no input schema, so it takes no input (an empty object)",
                        script.name
                    ),
                )
                .with_hint(format!(
                    "add {} if it takes arguments (`{{\"type\": \"object\", \"properties\": {{}}}}` says it takes none)",
                    input.display()
                )),
            );
        }
        let output = schemas_dir
            .join("output")
            .join(format!("{}.json", script.name));
        if schemas.output_rel(&script.name).is_none() {
            diags.push(
                Diagnostic::new(
                    Code::MissingOutputSchema,
                    &entry,
                    Loc::FILE,
                    format!("script `{}` has no output schema", script.name),
                )
                .with_hint(format!(
                    "add {} so callers can rely on the output's shape",
                    output.display()
                )),
            );
        }
    }
    for (kind, dir) in [("input", "schemas/input"), ("output", "schemas/output")] {
        let Ok(rd) = fs_err::read_dir(root.join(dir)) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let Some(stem) = p.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            if p.extension().is_some_and(|x| x == "json") && skill.script(stem).is_none() {
                diags.push(
                    Diagnostic::new(
                        Code::OrphanSchema,
                        &p,
                        Loc::FILE,
                        format!("{kind} schema for `{stem}`, which is not a script of this skill"),
                    )
                    .with_hint("rename it to match a script in scripts/, or remove it"),
                );
            }
        }
    }
    diags.extend(check_links(root));
    diags.extend(check_bundled_programs(root, &skill, &band_files));
    (diags, band_files.len())
}

/// E003: each host of a bound secret must be one the effective `allow.net` admits (a wildcard
/// host: some name below it), or its value could never be sent there; band-server refuses such a
/// run. Located at the host in the script's band file when the secret is declared there.
fn check_bound_hosts(r: &crate::skill::Resolved) -> Vec<Diagnostic> {
    use crate::manifest::locate::Step;
    let Ok(net) = crate::policy::net::NetMatcher::new(&r.policy.allow.net, &r.policy.deny.net)
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, hosts) in &r.policy.secret_hosts {
        for (j, host) in hosts.iter().enumerate() {
            let probe = host
                .strip_prefix("*.")
                .map_or(host.clone(), |d| format!("x.{d}"));
            if net.check_host(&probe, None).is_allowed() {
                continue;
            }
            let index = r.band.secrets.iter().position(|s| s == name);
            let loc = match index {
                Some(i) if r.band.secret_hosts.contains_key(name) => r.band.locate(&[
                    Step::Key("env"),
                    Step::Key("secrets"),
                    Step::Index(i),
                    Step::Key("hosts"),
                    Step::Index(j),
                ]),
                _ => Loc::FILE,
            };
            out.push(
                Diagnostic::new(
                    Code::SecretHostNotAllowed,
                    &r.band.path,
                    loc,
                    format!(
                        "`{name}` is bound to `{host}`, which `allow.net` does not admit, so its value could never be sent there"
                    ),
                )
                .with_hint(format!(
                    "add `{host}` (or the HTTP rules for it) to `allow.net`, or drop it from the secret's hosts"
                )),
            );
        }
    }
    out
}

/// The skill's own programs (`/skill` is noexec; a file of the skill runs only as a `./` command
/// of `allow.cli`, through band-shim): a `./` pattern of any band file of the skill must name a
/// regular file of the skill (S010, refused by band-server through the same
/// [`crate::policy::cli::missing_bundled`]); an entry must not be a native executable (S012,
/// refused by band-server too); and a file that looks executable (execute bit, `#!`, ELF) but is
/// no entry, no `./` pattern names it and no cli pattern passes it to an interpreter as
/// `/skill/<path>` gets a warning (S011): it cannot execute in the sandbox.
fn check_bundled_programs(
    root: &Path,
    skill: &crate::skill::Skill,
    band_files: &BTreeSet<PathBuf>,
) -> Vec<Diagnostic> {
    use crate::manifest::locate::Step;
    use crate::policy::cli::{CliPattern, looks_executable, missing_bundled};
    let mut out = Vec::new();
    // The files a run's bundle holds (a tree band refuses is reported by `band lock` and the run).
    let Ok(tree) = crate::lock::Tree::read(root) else {
        return out;
    };
    let files: BTreeSet<&str> = tree.files().map(|n| n.path.as_str()).collect();
    let mut named: BTreeSet<String> = BTreeSet::new();
    for f in band_files {
        let Some(band) = load_band(f).band else {
            continue;
        };
        let policy = crate::policy::Policy {
            allow: band.allow.clone(),
            deny: band.deny.clone(),
            insist: band.insist.clone(),
            ..Default::default()
        };
        for r in missing_bundled(&policy, &|p| files.contains(p)) {
            out.push(
                Diagnostic::new(
                    Code::BundledProgramMissing,
                    &band.path,
                    band.locate(&[Step::Key(r.column), Step::Key("cli"), Step::Index(r.index)]),
                    format!(
                        "`{}` in `{}.cli` names `./{}`, which is not a file of this skill",
                        r.pattern, r.column, r.path
                    ),
                )
                .with_hint(format!(
                    "add {} to the skill, or remove the rule (the run is refused while it names no file)",
                    r.path
                )),
            );
        }
        for p in [&band.allow.cli, &band.deny.cli, &band.insist.cli]
            .into_iter()
            .flatten()
            .filter_map(|t| CliPattern::parse(t).ok())
        {
            if let Some(b) = p.bundled() {
                named.insert(b.to_string());
            }
            // A file passed to an interpreter (`python3 /skill/lib/x.py`) is read, not executed.
            named.extend(
                p.as_str()
                    .split_whitespace()
                    .skip(1)
                    .filter_map(|w| w.trim_matches('"').strip_prefix("/skill/"))
                    .map(str::to_string),
            );
        }
    }
    let entries: BTreeSet<String> = skill
        .scripts
        .iter()
        .map(|s| s.entry.to_string_lossy().replace('\\', "/"))
        .collect();
    for node in tree.files() {
        let head = &node.data[..node.data.len().min(4)];
        if entries.contains(&node.path) {
            if crate::policy::cli::is_native_executable(head) {
                out.push(
                    Diagnostic::new(
                        Code::NativeEntry,
                        root.join(&node.path),
                        Loc::FILE,
                        format!(
                            "`{}` is a native executable: /skill is noexec, so it cannot start as a script",
                            node.path
                        ),
                    )
                    .with_hint(format!(
                        "move it to bin/, make the entry a `#!/bin/sh` script that runs `/skill/bin/<name>`, and allow it: allow.cli: [\"./bin/<name> *\"] (not `{}`)",
                        node.path
                    )),
                );
            }
            continue;
        }
        if named.contains(&node.path)
            || !looks_executable(node.mode, head)
            || crate::skill::is_upstream_wrapper(root, Path::new(&node.path))
        {
            continue;
        }
        out.push(
            Diagnostic::new(
                Code::BundledProgramUndeclared,
                root.join(&node.path),
                Loc::FILE,
                format!(
                    "`{}` looks executable but cannot execute in the sandbox: /skill is noexec and no `./` cli pattern names it",
                    node.path
                ),
            )
            .with_hint(if node.mode & 0o111 == 0 && node.data.starts_with(b"#!") {
                // Only its `#!` line makes it look like a program: no execute bit to clear.
                let run_by = crate::launch::shebang(head_of(&node.data))
                    .map_or_else(|| "its interpreter".to_string(), |(name, _)| format!("`{name}`"));
                format!(
                    "it has a #! line and no execute bit: if a script runs it with {run_by}, allow that call (allow.cli: [\"{} /skill/{} *\"]); if it is a module or data, this is nothing to fix (or drop its #! line)",
                    crate::launch::shebang(head_of(&node.data)).map_or("python3".to_string(), |(n, _)| n),
                    node.path
                )
            } else if crate::policy::cli::bundled_path(&format!("./{}", node.path)).is_some() {
                format!(
                    "to run it as a command, allow it: allow.cli: [\"./{} *\"]; if it is only read, clear its execute bit",
                    node.path
                )
            } else {
                "rename it to letters, digits, `.`, `_`, `+` and `-` so a `./` cli pattern can name it, or clear its execute bit".to_string()
            }),
        );
    }
    out
}

/// The first line of a file's bytes, where a `#!` line is.
fn head_of(data: &[u8]) -> &[u8] {
    &data[..data.len().min(256)]
}

/// The config schema, relative to the skill root.
const CONFIG_SCHEMA: &str = "schemas/band-config.schema.json";

/// The band's config block must match schemas/band-config.schema.json when both exist.
fn check_config(contract: &Contract, r: &crate::skill::Resolved) -> Vec<Diagnostic> {
    let Some(config) = &r.config else {
        return Vec::new();
    };
    match contract.validate(config) {
        Ok(()) => Vec::new(),
        Err(violations) => violations
            .into_iter()
            .map(|v| {
                Diagnostic::new(
                    Code::ConfigInvalid,
                    &r.band.path,
                    r.band
                        .locate(&[crate::manifest::locate::Step::Key(&r.band.name)]),
                    format!(
                        "config {}: {}",
                        if v.instance_path.is_empty() {
                            "/"
                        } else {
                            &v.instance_path
                        },
                        v.message
                    ),
                )
            })
            .collect(),
    }
}

fn collect_band_files(dir: &Path, depth: usize, out: &mut BTreeSet<PathBuf>) {
    if depth > 4 {
        return;
    }
    let Ok(rd) = fs_err::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir()
            && !p
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        {
            collect_band_files(&p, depth + 1, out);
        } else if ft.is_file() && is_band_file(&p) {
            out.insert(p);
        }
    }
}

/// Symlinks inside a skill must stay inside it.
fn check_links(root: &Path) -> Vec<Diagnostic> {
    let outside = crate::skillfs::SkillFileError::Outside {
        path: root.to_path_buf(),
    };
    crate::skillfs::links_leaving(root)
        .into_iter()
        .map(|p| crate::diag::refused_file(&p, &outside))
        .collect()
}

/// S013: a script band-server starts with an interpreter (no execute bit: by its `#!` line, its
/// extension, as a module) needs that interpreter among the band's programs, or the run cannot
/// start (`setup_failed`). `allowed`: the commands the script's band allows (none known: a band
/// with errors, reported on its own).
fn check_entry_start(
    root: &Path,
    script: &crate::skill::Script,
    allowed: Option<&BTreeSet<String>>,
) -> Option<Diagnostic> {
    let crate::launch::Launch::With(i) = entry_launch(root, &script.entry) else {
        return None;
    };
    if !i.needs_rule() || allowed?.contains(&i.name) {
        return None;
    }
    let rule = i.start_rule(&script.entry);
    Some(
        Diagnostic::new(
            Code::InterpreterNotAllowed,
            root.join(&script.entry),
            Loc::FILE,
            format!(
                "script `{}` is started with {} ({}), which its band's allow.cli does not allow: the run cannot start",
                script.name,
                i.name,
                i.by.as_str()
            ),
        )
        .with_hint(format!(
            "allow it: allow.cli: [\"{rule}\"] (as band wrap writes it), or give the script an execute bit"
        )),
    )
}

/// How band-server will start the script at `entry` (relative to `root`), read as the run reads
/// it (a file it cannot read is left to the loader's own finding: it starts as it is).
pub fn entry_launch(root: &Path, entry: &Path) -> crate::launch::Launch {
    // SKILL.md says whether it runs as a module (`python -m scripts.x`), as band-server reads it.
    let skill_md = crate::skillfs::read_to_string(root, Path::new("SKILL.md"), 4 << 20).ok();
    match crate::skillfs::read_head(root, entry, 256) {
        Ok((head, mode)) => crate::launch::launch_in_skill(entry, mode, &head, skill_md.as_deref()),
        Err(_) => crate::launch::Launch::AsIs,
    }
}

/// A contract error as a diagnostic on the schema file.
fn contract_diagnostic(root: &Path, e: &crate::contract::ContractError) -> Diagnostic {
    let path = if e.path().is_absolute() {
        e.path().to_path_buf()
    } else {
        root.join(e.path())
    };
    Diagnostic::new(e.code(), path, e.loc(), e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        let p = root.join(rel);
        fs_err::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs_err::write(&p, text).expect("write");
        fs_err::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    /// A skill whose BAND.md config breaks its config schema, with three scripts: two use
    /// BAND.md, one has its own band (with a valid config).
    fn skill(root: &Path, name: &str) {
        let band = |n: &str, retries: &str| {
            format!("---\nband: {n}\ndescription: d\n{n}:\n  retries: {retries}\n---\n")
        };
        write(root, "BAND.md", &band(name, "many"), 0o644);
        write(
            root,
            "SKILL.md",
            &format!("---\nname: {name}\ndescription: d\n---\n"),
            0o644,
        );
        write(
            root,
            "schemas/band-config.schema.json",
            r#"{"type": "object", "properties": {"retries": {"type": "integer"}}, "additionalProperties": false}"#,
            0o644,
        );
        for s in ["a", "b", "c"] {
            write(root, &format!("scripts/{s}.sh"), "#!/bin/sh\n", 0o755);
            write(
                root,
                &format!("schemas/input/{s}.json"),
                r#"{"type": "object"}"#,
                0o644,
            );
            write(
                root,
                &format!("schemas/output/{s}.json"),
                r#"{"type": "object"}"#,
                0o644,
            );
        }
        write(root, "scripts/c.band.md", &band("own", "3"), 0o644);
    }

    #[test]
    fn a_bound_secret_host_must_be_allowed() {
        let t = tempfile::tempdir().expect("tmp");
        let root = t.path().join("demo");
        skill(&root, "demo");
        write(
            &root,
            "BAND.md",
            "---\nband: demo\ndescription: d\nallow:\n  net: [\"GET https://api.example.test/v1/**\"]\nenv:\n  secrets:\n    - name: TOKEN\n      hosts: [api.example.test, other.test]\n---\n",
            0o644,
        );
        let report = lint_paths(&[t.path().to_path_buf()]);
        let found: Vec<_> = report
            .diagnostics
            .iter()
            .filter(|d| d.code == Code::SecretHostNotAllowed)
            .map(|d| (d.loc, d.message.as_str(), d.hint.as_deref()))
            .collect();
        assert_eq!(
            found,
            vec![(
                Loc::new(8, 7),
                "`TOKEN` is bound to `other.test`, which `allow.net` does not admit, so its value could never be sent there",
                Some(
                    "add `other.test` (or the HTTP rules for it) to `allow.net`, or drop it from the secret's hosts"
                )
            )]
        );
    }

    /// git over a copy holding `.git` and only part of the work tree sees the rest as deleted:
    /// warned where git is allowed and no rule admits the whole tree, at the `.git` rule.
    #[test]
    fn history_without_the_work_tree_is_warned_where_git_is_allowed() {
        let t = tempfile::tempdir().expect("tmp");
        let root = t.path().join("demo");
        skill(&root, "demo");
        let found = |allow: &str| {
            write(
                &root,
                "BAND.md",
                &format!("---\nband: demo\ndescription: d\nallow:\n{allow}---\n"),
                0o644,
            );
            lint_paths(&[t.path().to_path_buf()])
                .diagnostics
                .into_iter()
                .filter(|d| d.code == Code::GitWithoutWorkTree)
                .map(|d| (d.loc, d.message))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            found("  cli: [\"git status *\"]\n  read: [src/**, .git/**]\n"),
            vec![(
                Loc::new(6, 18),
                "allow.read `.git/**` copies the repository's history, but no rule admits its whole work tree: git in the run sees every tracked file the read rules leave out as deleted".to_string()
            )]
        );
        // The whole tree admitted, git not allowed, or `.git` reached only through a wildcard
        // (which copies nothing of it: P012).
        assert_eq!(
            found("  cli: [\"git *\"]\n  read: [.git/**, \"**\"]\n"),
            vec![]
        );
        assert_eq!(found("  cli: [\"ls *\"]\n  read: [.git/**]\n"), vec![]);
        assert_eq!(
            found("  cli: [\"git *\"]\n  read: [\"**/.git/**\"]\n"),
            vec![]
        );
    }

    #[test]
    fn an_entry_started_with_an_interpreter_the_band_does_not_allow_cannot_start() {
        let t = tempfile::tempdir().expect("tmp");
        let root = t.path().join("demo");
        skill(&root, "demo");
        // a.py: mode 644 with a #! line (started with python3); b.sh: mode 644 (bash, an
        // essential: no rule needed); c: executable (as it is).
        fs_err::remove_file(root.join("scripts/a.sh")).expect("rm");
        write(&root, "scripts/a.py", "#!/usr/bin/env python3\n", 0o644);
        write(&root, "scripts/b.sh", "echo\n", 0o644);
        let found = |band: &str| {
            write(&root, "BAND.md", band, 0o644);
            lint_paths(&[t.path().to_path_buf()])
                .diagnostics
                .into_iter()
                .filter(|d| d.code == Code::InterpreterNotAllowed)
                .map(|d| (d.message, d.hint.unwrap_or_default()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            found("---\nband: demo\ndescription: d\nallow:\n  cli: [\"jq *\"]\n---\n"),
            [(
                "script `a` is started with python3 (by its #! line), which its band's allow.cli does not allow: the run cannot start".to_string(),
                "allow it: allow.cli: [\"python3 /skill/scripts/a.py *\"] (as band wrap writes it), or give the script an execute bit".to_string()
            )]
        );
        for allowed in ["python3 /skill/scripts/a.py *", "python3 *"] {
            let band =
                format!("---\nband: demo\ndescription: d\nallow:\n  cli: [\"{allowed}\"]\n---\n");
            assert_eq!(found(&band), [], "{allowed}");
        }
        // A deny of the whole program takes it away again.
        assert_eq!(
            found(
                "---\nband: demo\ndescription: d\nallow:\n  cli: [\"python3 *\"]\ndeny:\n  cli: [\"python3 *\"]\n---\n"
            )
            .len(),
            1
        );
    }

    #[test]
    fn config_block_is_checked_against_its_schema_per_band_file() {
        let t = tempfile::tempdir().expect("tmp");
        skill(&t.path().join("demo"), "demo");
        let report = lint_paths(&[t.path().to_path_buf()]);
        let config: Vec<_> = report
            .diagnostics
            .iter()
            .filter(|d| d.code == Code::ConfigInvalid)
            .collect();
        assert_eq!(config.len(), 1, "{:#?}", report.diagnostics);
        assert!(config[0].path.ends_with("demo/BAND.md"), "{config:?}");
        assert_eq!(config[0].loc, Loc::new(4, 1));
        assert!(
            config[0].message.contains("/retries"),
            "{}",
            config[0].message
        );
        assert_eq!(report.band_files, 2);
    }

    #[test]
    fn many_skills_give_the_same_report_as_one_at_a_time() {
        let t = tempfile::tempdir().expect("tmp");
        let names: Vec<String> = (0..9).map(|i| format!("s{i}")).collect();
        for n in &names {
            skill(&t.path().join(n), n);
        }
        let together = lint_paths(&[t.path().to_path_buf()]);
        let mut one_by_one = Report::default();
        for n in &names {
            let r = lint_paths(&[t.path().join(n)]);
            one_by_one.skills += r.skills;
            one_by_one.band_files += r.band_files;
            one_by_one.diagnostics.extend(r.diagnostics);
        }
        sort_dedup(&mut one_by_one.diagnostics);
        assert_eq!(together.skills, 9);
        assert_eq!(
            (together.skills, together.band_files),
            (one_by_one.skills, one_by_one.band_files)
        );
        assert_eq!(together.diagnostics, one_by_one.diagnostics);
        assert_eq!(
            together.count(Severity::Error),
            9,
            "{:#?}",
            together.diagnostics
        );
    }
}
