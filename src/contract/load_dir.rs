//! Reading a skill's `schemas/` folder from disk: the only I/O in this module.

use std::path::{Path, PathBuf};

use super::SCHEMAS_DIR;
use super::error::ContractError;
use super::schema_set::COLOCATED_DIR;
use super::schema_set::{SchemaFile, SchemaSet};

impl SchemaSet {
    /// Read every `*.json` under `<skill_root>/schemas/`, and upstream's co-located
    /// `scripts/resources/<script>/{input,output}_schema.json`, and [`load`](Self::load) them.
    ///
    /// A missing `schemas/` folder is an empty set. Symlinked folders are not followed; a
    /// symlinked file is read only if it stays inside the skill.
    pub fn load_dir(skill_root: &Path) -> (SchemaSet, Vec<ContractError>) {
        let mut errors = Vec::new();
        let mut files = Vec::new();
        let schemas = skill_root.join(SCHEMAS_DIR);
        match fs_err::symlink_metadata(&schemas) {
            Ok(meta) if meta.is_dir() => {
                let root = fs_err::canonicalize(skill_root).unwrap_or_else(|_| skill_root.into());
                collect_json_files(
                    skill_root,
                    &root,
                    Path::new(SCHEMAS_DIR),
                    &mut files,
                    &mut errors,
                );
            }
            Ok(_) => errors.push(ContractError::compile(
                Path::new(SCHEMAS_DIR),
                "schemas is not a folder (a symlinked schemas/ is not followed)",
            )),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => errors.push(ContractError::Io {
                path: PathBuf::from(SCHEMAS_DIR),
                source,
            }),
        }
        collect_colocated(skill_root, &mut files, &mut errors);
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let (set, more) = SchemaSet::load(files);
        errors.extend(more);
        (set, errors)
    }
}

/// Gather upstream's co-located contracts, `scripts/resources/<script>/{input,output}_schema.json`
/// (regular files only: a symlinked resource folder or schema is not followed).
fn collect_colocated(
    skill_root: &Path,
    files: &mut Vec<SchemaFile>,
    errors: &mut Vec<ContractError>,
) {
    let dir = skill_root.join(COLOCATED_DIR);
    if !fs_err::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
        return;
    }
    let Ok(entries) = fs_err::read_dir(&dir) else {
        return;
    };
    let mut names: Vec<_> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name())
        .collect();
    names.sort();
    for name in names {
        for file in ["input_schema.json", "output_schema.json"] {
            let rel = Path::new(COLOCATED_DIR).join(&name).join(file);
            let full = skill_root.join(&rel);
            match fs_err::symlink_metadata(&full) {
                Ok(m) if m.is_file() => match read_schema(skill_root, &rel) {
                    Ok(text) => files.push(SchemaFile { path: rel, text }),
                    Err(e) => errors.push(e),
                },
                Ok(_) => errors.push(ContractError::compile(
                    &rel,
                    "not a regular file (a symlinked schema is not followed)",
                )),
                Err(_) => {}
            }
        }
    }
}

/// Gather `schemas/**.json` (as paths relative to the skill root) into `files`.
fn collect_json_files(
    skill_root: &Path,
    canonical_root: &Path,
    rel_dir: &Path,
    files: &mut Vec<SchemaFile>,
    errors: &mut Vec<ContractError>,
) {
    let dir = skill_root.join(rel_dir);
    let entries = match fs_err::read_dir(&dir) {
        Ok(entries) => entries,
        Err(source) => {
            errors.push(ContractError::Io {
                path: rel_dir.to_path_buf(),
                source,
            });
            return;
        }
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        let rel = rel_dir.join(entry.file_name());
        let full = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            collect_json_files(skill_root, canonical_root, &rel, files, errors);
            continue;
        }
        if rel.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        if kind.is_symlink() {
            match fs_err::canonicalize(&full) {
                Ok(target) if target.starts_with(canonical_root) && target.is_file() => {}
                Ok(_) => {
                    errors.push(ContractError::compile(
                        &rel,
                        "symlink points outside the skill (or not to a file); not read",
                    ));
                    continue;
                }
                Err(source) => {
                    errors.push(ContractError::Io { path: rel, source });
                    continue;
                }
            }
        }
        match read_schema(skill_root, &rel) {
            Ok(text) => files.push(SchemaFile { path: rel, text }),
            Err(e) => errors.push(e),
        }
    }
}

/// A schema file of the skill, read as the run reads the skill ([`crate::skillfs`]): never
/// through a link (or a linked `schemas/` folder) that leaves it, never a FIFO, at most
/// [`crate::skillfs::MAX_TEXT_BYTES`].
fn read_schema(skill_root: &Path, rel: &Path) -> Result<String, ContractError> {
    use crate::skillfs::SkillFileError;
    crate::skillfs::read_to_string(skill_root, rel, crate::skillfs::MAX_TEXT_BYTES).map_err(|e| {
        match e {
            SkillFileError::Io(source) => ContractError::Io {
                path: rel.to_path_buf(),
                source,
            },
            e => ContractError::compile(rel, format!("{e}")),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::testutil::*;
    use serde_json::json;

    #[test]
    fn load_dir_reads_schemas_tree() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs_err::create_dir_all(root.join("schemas/input")).unwrap();
        fs_err::create_dir_all(root.join("schemas/defs")).unwrap();
        fs_err::write(root.join("schemas/defs/n.json"), r#"{"type": "integer"}"#).unwrap();
        fs_err::write(
            root.join("schemas/input/x.json"),
            r#"{"properties": {"n": {"$ref": "../defs/n.json"}}}"#,
        )
        .unwrap();
        fs_err::write(root.join("schemas/input/notes.txt"), "not a schema").unwrap();
        fs_err::write(root.join("secret.json"), "{}").unwrap();
        #[cfg(unix)]
        fs_err::os::unix::fs::symlink(
            root.join("secret.json"),
            root.join("schemas/defs/link.json"),
        )
        .unwrap();

        let (set, errors) = SchemaSet::load_dir(root);
        assert!(errors.is_empty(), "{errors:?}");
        let listed: Vec<&Path> = set.paths().collect();
        assert_eq!(
            listed,
            vec![
                Path::new("schemas/defs/link.json"),
                Path::new("schemas/defs/n.json"),
                Path::new("schemas/input/x.json")
            ]
        );
        assert!(set.input("x").is_some());
        assert!(set.output("x").is_none());
        let contract = compile(&set, "schemas/input/x.json");
        assert_eq!(
            contract.coerce_and_validate(json!({"n": "4"})),
            Ok(json!({"n": 4}))
        );
        assert!(set.compile_all().is_empty());
    }

    #[cfg(unix)]
    #[test]
    fn load_dir_refuses_symlinks_out_of_the_skill() {
        let outside = tempfile::tempdir().unwrap();
        fs_err::write(outside.path().join("x.json"), "{}").unwrap();
        let dir = tempfile::tempdir().unwrap();
        fs_err::create_dir_all(dir.path().join("schemas/defs")).unwrap();
        fs_err::os::unix::fs::symlink(
            outside.path().join("x.json"),
            dir.path().join("schemas/defs/x.json"),
        )
        .unwrap();
        let (set, errors) = SchemaSet::load_dir(dir.path());
        assert_eq!(set.paths().count(), 0);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0]
                .to_string()
                .starts_with("schemas/defs/x.json: symlink points outside")
        );
    }

    #[test]
    fn load_dir_without_schemas_is_empty_and_io_errors_name_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let (set, errors) = SchemaSet::load_dir(dir.path());
        assert_eq!((set.paths().count(), errors.len()), (0, 0));

        #[cfg(unix)]
        {
            fs_err::create_dir_all(dir.path().join("schemas/input")).unwrap();
            fs_err::write(dir.path().join("schemas/input/x.json"), "{}").unwrap();
            fs_err::os::unix::fs::symlink("nowhere.json", dir.path().join("schemas/input/y.json"))
                .unwrap();
            let (_, errors) = SchemaSet::load_dir(dir.path());
            assert_eq!(errors.len(), 1, "{errors:?}");
            assert!(
                errors[0].to_string().starts_with("schemas/input/y.json: "),
                "{}",
                errors[0]
            );
        }
    }
}
