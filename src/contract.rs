//! JSON Schema contracts per script, resolved offline.
//!
//! A skill's contracts live in `schemas/input/<script>.json`, `schemas/output/<script>.json`, and
//! shared fragments in `schemas/defs/*.json`. Drafts 2020-12 (the default) and 7 are the supported
//! ones, picked from `$schema`.
//!
//! Every schema file is given a URI under `band://skill/` that mirrors its path, so a relative
//! `$ref` such as `../defs/repo.json` resolves the way it reads. A defs file is also known by its
//! `$id`: an absolute `$id` as is, a relative one (`"repo.json"`) from every schema folder of the
//! skill. Nothing else is ever resolved: jsonschema gets a retriever that serves the skill's own
//! schemas from memory and refuses every other URI (no network, no file reads), and the documents
//! it is handed have every `$ref` already made absolute, so a file means the same thing however
//! it is reached.
//!
//! [`Contract::coerce_and_validate`] turns CLI strings into the types the schema asks for before
//! validating; [`Contract::validate`] is strict and is what script output goes through.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use jsonschema::error::ValidationErrorKind;
use jsonschema::{Draft, ReferencingError, Retrieve, Uri};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::diag::{Code, Diagnostic, Loc};

/// The advice every refused `$ref` carries.
const OFFLINE_ONLY: &str = "band resolves $ref offline only; put the schema in schemas/defs/";
/// The URI prefix under which a skill's files are known to the resolver.
const ROOT_URI: &str = "band://skill/";
/// The folder, relative to the skill root, that holds every schema.
const SCHEMAS_DIR: &str = "schemas";
/// The largest whole number an `f64` holds exactly (2^53).
const MAX_EXACT_FLOAT: f64 = 9_007_199_254_740_992.0;
/// How deep a `$ref`/combinator chain is followed when looking for types (cycles are cut earlier).
const MAX_FOLLOW_DEPTH: usize = 64;

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// A problem with a schema file: it is not JSON, does not compile, or has a `$ref` band cannot
/// resolve. Every message names the file (relative to the skill root).
#[derive(Debug, thiserror::Error)]
pub enum ContractError {
    #[error("{}:{line}:{col}: invalid json: {message}", path.display())]
    Json {
        path: PathBuf,
        line: usize,
        col: usize,
        message: String,
    },
    #[error("{}: {message}", path.display())]
    Compile { path: PathBuf, message: String },
    #[error("{}: cannot resolve $ref \"{reference}\": {message}", path.display())]
    Ref {
        path: PathBuf,
        reference: String,
        message: String,
    },
    #[error("{}: {}", .path.display(), lowercase_first(&.source.to_string()))]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl ContractError {
    /// The file the error is about, relative to the skill root (or as given for I/O errors).
    pub fn path(&self) -> &Path {
        match self {
            ContractError::Json { path, .. }
            | ContractError::Compile { path, .. }
            | ContractError::Ref { path, .. }
            | ContractError::Io { path, .. } => path,
        }
    }

    /// The lint code this error is reported under.
    pub fn code(&self) -> Code {
        match self {
            ContractError::Json { .. } | ContractError::Io { .. } => Code::SchemaJson,
            ContractError::Compile { .. } | ContractError::Ref { .. } => Code::SchemaInvalid,
        }
    }

    /// Where in the file the error is, when known.
    pub fn loc(&self) -> Loc {
        match self {
            ContractError::Json { line, col, .. } => Loc::new(*line, *col),
            _ => Loc::FILE,
        }
    }

    /// The error as a lint diagnostic (the path stays relative to the skill root).
    pub fn to_diagnostic(&self) -> Diagnostic {
        let message = match self {
            ContractError::Json { message, .. } => format!("invalid json: {message}"),
            ContractError::Compile { message, .. } => message.clone(),
            ContractError::Ref {
                reference, message, ..
            } => format!("cannot resolve $ref \"{reference}\": {message}"),
            ContractError::Io { source, .. } => lowercase_first(&source.to_string()),
        };
        Diagnostic::new(self.code(), self.path(), self.loc(), message)
    }

    fn compile(path: &Path, message: impl Into<String>) -> Self {
        ContractError::Compile {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }
}

/// One way a value fails a contract.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// JSON pointer to the offending part of the value; `""` is the value itself.
    pub instance_path: String,
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.instance_path.is_empty() {
            write!(f, "(root): {}", self.message)
        } else {
            write!(f, "{}: {}", self.instance_path, self.message)
        }
    }
}

/// A command line that is not a list of `--key[=value]` flags.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgError {
    #[error("unexpected argument \"{0}\": arguments are --key=value, --key value, or --flag")]
    Positional(String),
    #[error("argument \"{0}\" has no name: arguments are --key=value, --key value, or --flag")]
    EmptyName(String),
}

// ---------------------------------------------------------------------------------------------
// The schema set
// ---------------------------------------------------------------------------------------------

/// One schema file as read from the skill: its path relative to the skill root and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaFile {
    /// Relative to the skill root, e.g. `schemas/defs/repo.json`.
    pub path: PathBuf,
    pub text: String,
}

/// A parsed schema file.
#[derive(Debug)]
struct Loaded {
    path: PathBuf,
    /// `/`-separated relative path, e.g. `schemas/defs/repo.json`.
    rel: String,
    /// `band://skill/schemas/defs/repo.json`.
    uri: String,
    /// The schema as written.
    value: Value,
    /// The schema as handed to jsonschema: every `$ref` made absolute (and anchors turned into
    /// JSON pointers), so no `$ref` depends on the URI the document was reached by.
    served: Value,
}

/// Everything the resolver and the coercer need, shared by the set, its contracts and the
/// retriever.
#[derive(Debug, Default)]
struct Index {
    files: Vec<Loaded>,
    /// Fragmentless URI (path, `$id`, relative `$id` alias, embedded `$id`) → the file, and the
    /// JSON pointer of the resource inside it (`""` for the whole file).
    by_uri: BTreeMap<String, (usize, String)>,
    /// `/`-separated relative path → index into `files`.
    by_rel: BTreeMap<String, usize>,
    /// Files that were given but are not valid JSON, by URI (so a `$ref` to one says so).
    broken: BTreeMap<String, String>,
}

/// All schemas of one skill, parsed and indexed for offline `$ref` resolution.
#[derive(Debug, Clone, Default)]
pub struct SchemaSet {
    index: Arc<Index>,
}

impl SchemaSet {
    /// Parse every schema file and index it by its path and (for defs files) by its `$id`.
    ///
    /// A file that fails to parse is left out and reported; the rest still load.
    pub fn load(files: Vec<SchemaFile>) -> (SchemaSet, Vec<ContractError>) {
        let mut errors = Vec::new();
        let mut index = Index::default();
        let mut dirs: BTreeSet<String> = BTreeSet::new();
        dirs.insert(SCHEMAS_DIR.to_string());

        for file in files {
            let rel = match relative_schema_path(&file.path) {
                Ok(rel) => rel,
                Err(message) => {
                    errors.push(ContractError::compile(&file.path, message));
                    continue;
                }
            };
            let Some(uri) = path_uri(&rel) else {
                errors.push(ContractError::compile(
                    &file.path,
                    "the file name cannot be made into a uri",
                ));
                continue;
            };
            if index.by_rel.contains_key(&rel) || index.broken.contains_key(&uri) {
                errors.push(ContractError::compile(
                    &file.path,
                    "schema file given twice",
                ));
                continue;
            }
            if let Some((dir, _)) = rel.rsplit_once('/') {
                dirs.insert(dir.to_string());
            }
            match serde_json::from_str::<Value>(&file.text) {
                Ok(value) => {
                    let at = index.files.len();
                    index.by_rel.insert(rel.clone(), at);
                    index.by_uri.insert(uri.clone(), (at, String::new()));
                    index.files.push(Loaded {
                        path: file.path,
                        rel,
                        uri,
                        served: Value::Null,
                        value,
                    });
                }
                Err(error) => {
                    index.broken.insert(uri, rel);
                    errors.push(json_error(file.path, &error));
                }
            }
        }

        // Aliases by `$id`. A real file path always wins over an alias.
        let mut aliases: BTreeMap<String, usize> = BTreeMap::new();
        for (at, file) in index.files.iter().enumerate() {
            let Some(id) = root_id(&file.value) else {
                continue;
            };
            let is_def = file.rel.starts_with("schemas/defs/");
            let mut targets = Vec::new();
            match resolve(&file.uri, id) {
                Some(resolved) => targets.push(resolved),
                None => {
                    errors.push(ContractError::compile(
                        &file.path,
                        format!("$id \"{id}\" is not a valid uri reference"),
                    ));
                    continue;
                }
            }
            if is_def && !has_scheme(id) {
                for dir in &dirs {
                    if let Some(resolved) = resolve(&format!("{ROOT_URI}{dir}/"), id) {
                        targets.push(resolved);
                    }
                }
            }
            targets.sort();
            targets.dedup();
            let mut clash: Option<String> = None;
            for target in targets {
                let target = strip_fragment(&target).to_string();
                if let Some(&(owner, _)) = index.by_uri.get(&target) {
                    // A real file path wins over an alias. Only an absolute `$id` naming another
                    // file is worth reporting: a relative one seen from a sibling folder is not.
                    if owner != at && has_scheme(id) {
                        clash = Some(format!(
                            "$id \"{id}\" is already the uri of {}",
                            index.files[owner].rel
                        ));
                    }
                    continue;
                }
                match aliases.get(&target) {
                    Some(&other) if other != at => {
                        clash = Some(format!(
                            "$id \"{id}\" is also the $id of {}",
                            index.files[other].rel
                        ));
                    }
                    Some(_) => {}
                    None => {
                        aliases.insert(target, at);
                    }
                }
            }
            if let Some(message) = clash {
                errors.push(ContractError::compile(&file.path, message));
            }
        }
        index.by_uri.extend(
            aliases
                .into_iter()
                .map(|(uri, at)| (uri, (at, String::new()))),
        );

        // Embedded resources (a subschema with its own `$id`), where nothing else has the URI.
        let mut embedded = Vec::new();
        for (at, file) in index.files.iter().enumerate() {
            walk_schemas(
                &file.value,
                &file.uri,
                &mut String::new(),
                &mut |node, base, pointer| {
                    if !pointer.is_empty() && root_id(node).is_some() {
                        embedded.push((base.to_string(), (at, pointer.to_string())));
                    }
                },
            );
        }
        for (uri, target) in embedded {
            index.by_uri.entry(uri).or_insert(target);
        }

        // What jsonschema gets: every `$ref` absolute.
        let mut served = Vec::with_capacity(index.files.len());
        for file in &index.files {
            let mut edits = Vec::new();
            walk_schemas(
                &file.value,
                &file.uri,
                &mut String::new(),
                &mut |node, base, pointer| {
                    if let Some(literal) = node.get("$ref").and_then(Value::as_str)
                        && let Some(absolute) = index.absolute_ref(base, literal)
                    {
                        edits.push((pointer.to_string(), absolute));
                    }
                },
            );
            let mut value = file.value.clone();
            for (pointer, absolute) in edits {
                if let Some(object) = value.pointer_mut(&pointer).and_then(Value::as_object_mut) {
                    object.insert("$ref".to_string(), Value::String(absolute));
                }
            }
            served.push(value);
        }
        for (file, value) in index.files.iter_mut().zip(served) {
            file.served = value;
        }

        (
            SchemaSet {
                index: Arc::new(index),
            },
            errors,
        )
    }

    /// Read every `*.json` under `<skill_root>/schemas/` and [`load`](Self::load) them.
    ///
    /// A missing `schemas/` folder is an empty set. Symlinked folders are not followed; a
    /// symlinked file is read only if it stays inside the skill.
    pub fn load_dir(skill_root: &Path) -> (SchemaSet, Vec<ContractError>) {
        let mut errors = Vec::new();
        let mut files = Vec::new();
        let schemas = skill_root.join(SCHEMAS_DIR);
        match std::fs::symlink_metadata(&schemas) {
            Ok(meta) if meta.is_dir() => {
                let root = std::fs::canonicalize(skill_root).unwrap_or_else(|_| skill_root.into());
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
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let (set, more) = SchemaSet::load(files);
        errors.extend(more);
        (set, errors)
    }

    /// The raw input schema of `script` (`schemas/input/<script>.json`).
    pub fn input(&self, script: &str) -> Option<&Value> {
        self.get(&format!("schemas/input/{script}.json"))
    }

    /// The raw output schema of `script` (`schemas/output/<script>.json`).
    pub fn output(&self, script: &str) -> Option<&Value> {
        self.get(&format!("schemas/output/{script}.json"))
    }

    /// The raw schema at `rel_path` (e.g. `schemas/defs/repo.json`).
    pub fn get(&self, rel_path: &str) -> Option<&Value> {
        self.index.file(rel_path).map(|file| &file.value)
    }

    /// The relative paths of every schema that loaded, sorted.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.index
            .by_rel
            .values()
            .map(|&at| self.index.files[at].path.as_path())
    }

    /// Compile the schema at `rel_path` (e.g. `schemas/input/fetch.json`) into a validator,
    /// resolving its `$ref`s against the skill's own schemas only.
    pub fn compile(&self, rel_path: &str) -> Result<Contract, ContractError> {
        let rel = rel_path.replace('\\', "/");
        let Some(&at) = self.index.by_rel.get(&rel) else {
            let message = if self.index.broken.values().any(|broken| *broken == rel) {
                "schema is not valid json"
            } else {
                "no such schema"
            };
            return Err(ContractError::compile(Path::new(rel_path), message));
        };
        let file = &self.index.files[at];
        check_drafts(&file.path, &file.value)?;

        let validator = jsonschema::options()
            .with_retriever(OfflineRetriever {
                index: Arc::clone(&self.index),
            })
            .with_base_uri(file.uri.clone())
            .should_validate_formats(true)
            .build(&file.served)
            .map_err(|error| self.compile_error(at, &error))?;
        Ok(Contract {
            path: file.path.clone(),
            file: at,
            index: Arc::clone(&self.index),
            validator,
        })
    }

    /// Compile every schema and check that every `$ref` resolves (also in `$defs` nothing uses);
    /// for lint. Each problem is reported once, against the file it is in.
    pub fn compile_all(&self) -> Vec<ContractError> {
        let mut seen = HashSet::new();
        let mut errors = Vec::new();
        let mut report = |error: ContractError| {
            let key = match &error {
                ContractError::Ref {
                    path, reference, ..
                } => format!("{}\0{reference}", path.display()),
                other => other.to_string(),
            };
            if seen.insert(key) {
                errors.push(error);
            }
        };
        for (rel, &at) in &self.index.by_rel {
            if let Err(error) = self.compile(rel) {
                report(error);
            }
            let file = &self.index.files[at];
            let mut unresolved = Vec::new();
            walk_schemas(
                &file.value,
                &file.uri,
                &mut String::new(),
                &mut |node, base, _| {
                    if let Some(literal) = node.get("$ref").and_then(Value::as_str)
                        && let Some(message) = self.index.unresolved_reason(base, literal)
                    {
                        unresolved.push(ContractError::Ref {
                            path: file.path.clone(),
                            reference: literal.to_string(),
                            message,
                        });
                    }
                },
            );
            unresolved.into_iter().for_each(&mut report);
        }
        errors
    }

    /// Turn a jsonschema build error into a [`ContractError`] naming the right file and `$ref`.
    fn compile_error(&self, at: usize, error: &jsonschema::ValidationError<'_>) -> ContractError {
        let file = &self.index.files[at];
        match error.kind() {
            ValidationErrorKind::Referencing(ReferencingError::Unretrievable { uri, source }) => {
                let message = match source.downcast_ref::<Refusal>() {
                    Some(refusal) => refusal.reason.clone(),
                    None => lowercase_first(&source.to_string()),
                };
                let target = strip_fragment(uri);
                match self
                    .index
                    .find_ref(at, |resolved, _| strip_fragment(resolved) == target)
                {
                    Some((path, reference)) => ContractError::Ref {
                        path,
                        reference,
                        message,
                    },
                    None => ContractError::Ref {
                        path: file.path.clone(),
                        reference: display_uri(target),
                        message,
                    },
                }
            }
            ValidationErrorKind::Referencing(ReferencingError::PointerToNowhere {
                pointer: missing,
            }) => {
                let found = self.index.find_ref(at, |_, literal| {
                    literal
                        .split_once('#')
                        .is_some_and(|(_, fragment)| percent_decode(fragment) == *missing)
                });
                let message = format!("nothing at \"{missing}\" in the schema it points into");
                match found {
                    Some((path, reference)) => ContractError::Ref {
                        path,
                        reference,
                        message,
                    },
                    None => ContractError::compile(&file.path, message),
                }
            }
            ValidationErrorKind::Referencing(ReferencingError::NoSuchAnchor { anchor }) => {
                let found = self.index.find_ref(at, |_, literal| {
                    literal
                        .split_once('#')
                        .is_some_and(|(_, fragment)| fragment == anchor)
                });
                let message = format!("no $anchor \"{anchor}\" in the schema it points into");
                match found {
                    Some((path, reference)) => ContractError::Ref {
                        path,
                        reference,
                        message,
                    },
                    None => ContractError::compile(&file.path, message),
                }
            }
            ValidationErrorKind::Referencing(other) => ContractError::compile(
                &file.path,
                format!(
                    "schema does not compile: {}",
                    lowercase_first(&other.to_string())
                ),
            ),
            _ => {
                let at_path = error.instance_path().as_str();
                let message = lowercase_first(&error.to_string());
                if at_path.is_empty() {
                    ContractError::compile(
                        &file.path,
                        format!("schema does not compile: {message}"),
                    )
                } else {
                    ContractError::compile(
                        &file.path,
                        format!("schema does not compile at {at_path}: {message}"),
                    )
                }
            }
        }
    }

    /// The schema at `rel_path` as one self-contained document, for readers that cannot reach the
    /// skill's other files (an MCP client, say).
    ///
    /// JSON Schema's own bundling: the root gets `$id` = its `band://skill/...` URI, and every file
    /// it reaches through `$ref` (transitively) is embedded under `$defs` (`definitions` for a
    /// draft-7 root) as a resource whose `$id` is that file's URI. Every `$ref` is rewritten to
    /// the canonical `<file uri>#<pointer>` form, so references made through a `$id` alias
    /// resolve to the embedded copy. `None` if there is no such schema.
    pub fn bundle(&self, rel_path: &str) -> Option<Value> {
        let index = &self.index;
        let at = *index.by_rel.get(&rel_path.replace('\\', "/"))?;
        let mut reached = BTreeSet::from([at]);
        let mut queue = vec![at];
        while let Some(i) = queue.pop() {
            let file = &index.files[i];
            walk_refs(&file.served, &file.uri, &mut |base, literal| {
                if let Some(target) = resolve(base, literal)
                    && let Some(&(j, _)) = index.by_uri.get(strip_fragment(&target))
                    && reached.insert(j)
                {
                    queue.push(j);
                }
            });
        }
        let canonical = |target: &str| -> Option<String> {
            let (doc, fragment) = target.split_once('#').unwrap_or((target, ""));
            let (j, prefix) = index.by_uri.get(doc)?;
            let pointer = format!("{prefix}{}", percent_decode(fragment));
            let uri = &index.files[*j].uri;
            Some(if pointer.is_empty() {
                uri.clone()
            } else {
                format!("{uri}#{}", encode_fragment(&pointer))
            })
        };
        let prepare = |i: usize| {
            let file = &index.files[i];
            let mut value = file.served.clone();
            rewrite_refs(&mut value, &canonical);
            if let Value::Object(object) = &mut value {
                object.insert("$id".into(), Value::String(file.uri.clone()));
            }
            value
        };
        let mut root = prepare(at);
        let draft7 = matches!(
            Draft::default().detect(&root),
            Draft::Draft7 | Draft::Draft6 | Draft::Draft4
        );
        if let Value::Object(object) = &mut root {
            let key = if draft7 { "definitions" } else { "$defs" };
            let defs = object
                .entry(key)
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(defs) = defs {
                for &i in reached.iter().filter(|&&i| i != at) {
                    defs.insert(format!("band:{}", index.files[i].rel), prepare(i));
                }
            }
        }
        Some(root)
    }

    /// A raw schema handed back by this set, as served, and the URI it is known by (found by
    /// identity); a schema from elsewhere is taken as is, as if it sat in `schemas/input/`.
    fn located<'a>(&'a self, schema: &'a Value) -> (&'a Value, String) {
        self.index
            .files
            .iter()
            .find(|file| std::ptr::eq(&file.value, schema))
            .map_or_else(
                || (schema, format!("{ROOT_URI}schemas/input/")),
                |file| (&file.served, file.uri.clone()),
            )
    }
}

impl Index {
    fn file(&self, rel_path: &str) -> Option<&Loaded> {
        let rel = rel_path.replace('\\', "/");
        self.by_rel.get(&rel).map(|&at| &self.files[at])
    }

    /// Find the literal `$ref` that `matches` (given its resolved URI and its text), looking in
    /// file `first` and then in every other file. Returns the file's path and the literal.
    fn find_ref(
        &self,
        first: usize,
        matches: impl Fn(&str, &str) -> bool,
    ) -> Option<(PathBuf, String)> {
        let order = std::iter::once(first).chain((0..self.files.len()).filter(|&at| at != first));
        for at in order {
            let file = &self.files[at];
            let mut found = None;
            walk_refs(&file.value, &file.uri, &mut |base, literal| {
                if found.is_none()
                    && resolve(base, literal).is_some_and(|resolved| matches(&resolved, literal))
                {
                    found = Some(literal.to_string());
                }
            });
            if let Some(literal) = found {
                return Some((file.path.clone(), literal));
            }
        }
        None
    }

    /// Resolve `reference` against `base` to a schema in this set (as served to jsonschema) and
    /// the base URI outside it.
    fn lookup(&self, base: &str, reference: &str) -> Option<(&Value, String)> {
        let target = resolve(base, reference)?;
        let (doc, fragment) = match target.split_once('#') {
            Some((doc, fragment)) => (doc, percent_decode(fragment)),
            None => (target.as_str(), String::new()),
        };
        let (at, prefix) = self.by_uri.get(doc)?;
        let pointer = if fragment.is_empty() || fragment.starts_with('/') {
            format!("{prefix}{fragment}")
        } else {
            format!("{prefix}{}", self.anchor_pointer(*at, prefix, &fragment)?)
        };
        self.locate(*at, &pointer)
    }

    /// The node at `pointer` in file `at` (as served), and the base URI just outside it.
    fn locate(&self, at: usize, pointer: &str) -> Option<(&Value, String)> {
        let file = &self.files[at];
        let mut node = &file.served;
        let mut base = file.uri.clone();
        for segment in pointer.split('/').skip(1) {
            base = enter(&base, node);
            let segment = segment.replace("~1", "/").replace("~0", "~");
            node = match node {
                Value::Object(object) => object.get(&segment)?,
                Value::Array(items) => items.get(segment.parse::<usize>().ok()?)?,
                _ => return None,
            };
        }
        Some((node, base))
    }

    /// The JSON pointer, relative to the resource at `prefix` in file `at`, of the subschema
    /// declaring anchor `name` (`$anchor`, `$dynamicAnchor`, or draft 7's `$id: "#name"`).
    fn anchor_pointer(&self, at: usize, prefix: &str, name: &str) -> Option<String> {
        let resource = self.files[at].value.pointer(prefix)?;
        let mut found = None;
        walk_schemas(resource, "", &mut String::new(), &mut |node, _, pointer| {
            let declares = |keyword: &str| node.get(keyword).and_then(Value::as_str);
            if found.is_none()
                && (declares("$anchor") == Some(name)
                    || declares("$dynamicAnchor") == Some(name)
                    || declares("$id").and_then(|id| id.strip_prefix('#')) == Some(name))
            {
                found = Some(pointer.to_string());
            }
        });
        found
    }

    /// `literal` resolved against `base` into an absolute URI, an anchor turned into a JSON
    /// pointer where the anchor is found. `None` if it is not a valid URI reference.
    fn absolute_ref(&self, base: &str, literal: &str) -> Option<String> {
        let target = resolve(base, literal)?;
        if let Some((doc, fragment)) = target.split_once('#')
            && !fragment.is_empty()
            && !fragment.starts_with('/')
            && let Some((at, prefix)) = self.by_uri.get(doc)
            && let Some(pointer) = self.anchor_pointer(*at, prefix, &percent_decode(fragment))
        {
            return Some(format!("{doc}#{}", encode_fragment(&pointer)));
        }
        Some(target)
    }
}

// ---------------------------------------------------------------------------------------------
// Offline resolution
// ---------------------------------------------------------------------------------------------

/// The only retriever band ever gives jsonschema: it serves the skill's own schemas from memory
/// and refuses everything else. It never opens a file or a socket.
struct OfflineRetriever {
    index: Arc<Index>,
}

/// Why [`OfflineRetriever`] refused a URI.
#[derive(Debug)]
struct Refusal {
    reason: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for Refusal {}

impl Retrieve for OfflineRetriever {
    fn retrieve(
        &self,
        uri: &Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        let key = strip_fragment(uri.as_str());
        // Served with every `$ref` already absolute: a defs file known by `$id: "repo.json"` is
        // also asked for as `schemas/input/repo.json`, and its own relative `$ref`s must still
        // mean schemas/defs/.
        if let Some((at, pointer)) = self.index.by_uri.get(key)
            && let Some(value) = self.index.files[*at].served.pointer(pointer)
        {
            return Ok(value.clone());
        }
        Err(Box::new(Refusal {
            reason: self.index.missing_reason(key),
        }))
    }
}

impl Index {
    /// Why the document at the fragmentless URI `key` is not available.
    fn missing_reason(&self, key: &str) -> String {
        match key.strip_prefix(ROOT_URI) {
            Some(rel) if rel.starts_with("schemas/") => match self.broken.get(key) {
                Some(broken) => format!("{broken} is not valid json"),
                None => format!("no schema file at {}", percent_decode(rel)),
            },
            Some(_) => format!("it points outside schemas/; {OFFLINE_ONLY}"),
            None => OFFLINE_ONLY.to_string(),
        }
    }

    /// Why `literal` (a `$ref` seen at `base`) does not resolve in this set, or `None` if it does.
    fn unresolved_reason(&self, base: &str, literal: &str) -> Option<String> {
        let Some(target) = resolve(base, literal) else {
            return Some("not a valid uri reference".to_string());
        };
        if self.lookup(base, literal).is_some() {
            return None;
        }
        let (doc, fragment) = target.split_once('#').unwrap_or((target.as_str(), ""));
        let fragment = percent_decode(fragment);
        Some(if !self.by_uri.contains_key(doc) {
            self.missing_reason(doc)
        } else if fragment.starts_with('/') {
            format!("nothing at \"{fragment}\" in the schema it points into")
        } else {
            format!("no $anchor \"{fragment}\" in the schema it points into")
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Contracts
// ---------------------------------------------------------------------------------------------

/// A compiled schema, ready to validate values.
pub struct Contract {
    path: PathBuf,
    file: usize,
    index: Arc<Index>,
    validator: jsonschema::Validator,
}

impl fmt::Debug for Contract {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Contract")
            .field("path", &self.path)
            .finish()
    }
}

impl Contract {
    /// The schema file this contract was compiled from, relative to the skill root.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Strict validation: every error, each with the JSON pointer of the value it is about.
    ///
    /// `Value::Null` stands for "no output": against a schema that requires properties it fails
    /// with a message saying so, even where the schema would not otherwise constrain `null`.
    pub fn validate(&self, value: &Value) -> Result<(), Vec<Violation>> {
        let mut violations: Vec<Violation> = self
            .validator
            .iter_errors(value)
            .map(|error| Violation {
                instance_path: error.instance_path().as_str().to_string(),
                message: lowercase_first(&error.to_string()),
            })
            .collect();
        if value.is_null() {
            let file = &self.index.files[self.file];
            let roots = self
                .index
                .candidates(&file.served, &file.uri, Follow::Definite);
            let required: BTreeSet<&str> = roots
                .iter()
                .filter_map(|(schema, _)| schema.get("required")?.as_array())
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            if !required.is_empty() {
                let names: Vec<String> =
                    required.iter().map(|name| format!("\"{name}\"")).collect();
                let expected = format!(
                    "got null (no output), but the schema expects an object with required properties {}",
                    names.join(", ")
                );
                if violations.is_empty() {
                    if !allows_type(&roots, "null") {
                        violations.push(Violation {
                            instance_path: String::new(),
                            message: expected,
                        });
                    }
                } else {
                    violations.insert(
                        0,
                        Violation {
                            instance_path: String::new(),
                            message: expected,
                        },
                    );
                    violations.retain(|v| {
                        !(v.instance_path.is_empty()
                            && v.message.starts_with("null is not of type"))
                    });
                }
            } else if !violations.is_empty() {
                for violation in &mut violations {
                    if violation.instance_path.is_empty() {
                        violation.message = format!("got null (no output): {}", violation.message);
                    }
                }
            }
        }
        if violations.is_empty() {
            Ok(())
        } else {
            Err(violations)
        }
    }

    /// Coerce CLI strings to the types the schema asks for, then validate strictly.
    ///
    /// A string becomes an integer/number (`"5"`), boolean (`"true"`/`"false"`), null (`"null"`),
    /// or array/object (JSON text) only where the schema at that place (following `$ref`,
    /// `allOf`/`anyOf`/`oneOf`, `properties`, `additionalProperties`, `items` and `prefixItems`)
    /// names that type and does not accept a string. A string that cannot be coerced is left as
    /// it is, so validation reports it.
    pub fn coerce_and_validate(&self, value: Value) -> Result<Value, Vec<Violation>> {
        let file = &self.index.files[self.file];
        let roots = self.index.candidates(&file.served, &file.uri, Follow::All);
        let coerced = self.index.coerce(value, &roots);
        self.validate(&coerced).map(|()| coerced)
    }
}

// ---------------------------------------------------------------------------------------------
// Walking schemas: candidates, coercion, argument docs
// ---------------------------------------------------------------------------------------------

/// Which subschemas count as applying to the same value.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Follow {
    /// `$ref` and `allOf` only: what certainly applies.
    Definite,
    /// Also `anyOf`, `oneOf`, `then`, `else`: what may apply.
    All,
}

type Candidates<'a> = Vec<(&'a Value, String)>;

impl Index {
    /// Every subschema that applies to the value `schema` (at `base`) is about.
    fn candidates<'a>(&'a self, schema: &'a Value, base: &str, follow: Follow) -> Candidates<'a> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        self.collect(schema, base.to_string(), follow, &mut out, &mut seen, 0);
        out
    }

    fn collect<'a>(
        &'a self,
        schema: &'a Value,
        base: String,
        follow: Follow,
        out: &mut Candidates<'a>,
        seen: &mut HashSet<*const Value>,
        depth: usize,
    ) {
        let Some(object) = schema.as_object() else {
            return;
        };
        if depth > MAX_FOLLOW_DEPTH || !seen.insert(std::ptr::from_ref(schema)) {
            return;
        }
        let base = enter(&base, schema);
        for keyword in ["$ref", "$dynamicRef", "$recursiveRef"] {
            if let Some(reference) = object.get(keyword).and_then(Value::as_str)
                && let Some((target, target_base)) = self.lookup(&base, reference)
            {
                self.collect(target, target_base, follow, out, seen, depth + 1);
            }
        }
        let mut combinators = vec!["allOf"];
        if follow == Follow::All {
            combinators.extend(["anyOf", "oneOf"]);
        }
        for keyword in combinators {
            for sub in object
                .get(keyword)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                self.collect(sub, base.clone(), follow, out, seen, depth + 1);
            }
        }
        if follow == Follow::All {
            for keyword in ["then", "else"] {
                if let Some(sub) = object.get(keyword) {
                    self.collect(sub, base.clone(), follow, out, seen, depth + 1);
                }
            }
        }
        out.push((schema, base));
    }

    /// The candidates for property `key` of an object whose candidates are `parents`.
    fn property_candidates<'a>(&'a self, parents: &Candidates<'a>, key: &str) -> Candidates<'a> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        for (parent, base) in parents {
            let declared = parent.get("properties").and_then(|props| props.get(key));
            let sub = match declared {
                Some(sub) => Some(sub),
                None if parent.get("patternProperties").is_none() => {
                    parent.get("additionalProperties")
                }
                None => None,
            };
            if let Some(sub) = sub {
                self.collect(sub, base.clone(), Follow::All, &mut out, &mut seen, 0);
            }
        }
        out
    }

    /// The candidates for item `at` of an array whose candidates are `parents`.
    fn item_candidates<'a>(&'a self, parents: &Candidates<'a>, at: usize) -> Candidates<'a> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        for (parent, base) in parents {
            let prefix = parent.get("prefixItems").and_then(Value::as_array);
            let sub = match (prefix.and_then(|p| p.get(at)), parent.get("items")) {
                (Some(sub), _) => Some(sub),
                (None, Some(Value::Array(tuple))) => {
                    tuple.get(at).or_else(|| parent.get("additionalItems"))
                }
                (None, Some(items)) => Some(items),
                (None, None) => None,
            };
            if let Some(sub) = sub {
                self.collect(sub, base.clone(), Follow::All, &mut out, &mut seen, 0);
            }
        }
        out
    }

    fn coerce(&self, value: Value, candidates: &Candidates<'_>) -> Value {
        let value = match value {
            Value::String(text) => coerce_string(text, candidates),
            other => other,
        };
        match value {
            Value::Object(object) => Value::Object(
                object
                    .into_iter()
                    .map(|(key, child)| {
                        let subs = self.property_candidates(candidates, &key);
                        let child = self.coerce(child, &subs);
                        (key, child)
                    })
                    .collect(),
            ),
            Value::Array(items) => Value::Array(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(at, child)| {
                        let subs = self.item_candidates(candidates, at);
                        self.coerce(child, &subs)
                    })
                    .collect(),
            ),
            other => other,
        }
    }
}

/// The JSON types the candidates name, from `type`, `enum` and `const`, in order of appearance.
fn declared_types(candidates: &Candidates<'_>) -> Vec<&'static str> {
    let mut types: Vec<&'static str> = Vec::new();
    let mut add = |name: &'static str| {
        if !types.contains(&name) {
            types.push(name);
        }
    };
    for (schema, _) in candidates {
        match schema.get("type") {
            Some(Value::String(name)) => {
                if let Some(name) = type_name(name) {
                    add(name);
                }
            }
            Some(Value::Array(names)) => {
                for name in names.iter().filter_map(Value::as_str).filter_map(type_name) {
                    add(name);
                }
            }
            _ => {}
        }
        let values = schema
            .get("enum")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .chain(schema.get("const"));
        for value in values {
            add(json_type(value));
        }
    }
    types
}

fn allows_type(candidates: &Candidates<'_>, name: &str) -> bool {
    declared_types(candidates).contains(&name)
}

fn type_name(name: &str) -> Option<&'static str> {
    [
        "string", "integer", "number", "boolean", "null", "array", "object",
    ]
    .into_iter()
    .find(|known| *known == name)
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Coerce one string to the first type the candidates name that it can become, unless they
/// accept a string (or name no type at all).
fn coerce_string(text: String, candidates: &Candidates<'_>) -> Value {
    let types = declared_types(candidates);
    if types.is_empty() || types.contains(&"string") {
        return Value::String(text);
    }
    let parsed = || serde_json::from_str::<Value>(&text).ok();
    for wanted in ["integer", "number", "boolean", "null", "array", "object"] {
        if !types.contains(&wanted) {
            continue;
        }
        let coerced = match wanted {
            // Whole numbers only, and only where they are exact (`"5.0"` yes, `"1e30"` no).
            "integer" => parsed().filter(|v| {
                v.as_number().is_some_and(|n| {
                    n.is_i64()
                        || n.is_u64()
                        || n.as_f64()
                            .is_some_and(|f| f.fract() == 0.0 && f.abs() <= MAX_EXACT_FLOAT)
                })
            }),
            "number" => parsed().filter(Value::is_number),
            "boolean" => match text.as_str() {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                _ => None,
            },
            "null" => (text == "null").then_some(Value::Null),
            "array" => parsed().filter(Value::is_array),
            "object" => parsed().filter(Value::is_object),
            _ => None,
        };
        if let Some(coerced) = coerced {
            return coerced;
        }
    }
    Value::String(text)
}

// ---------------------------------------------------------------------------------------------
// CLI arguments
// ---------------------------------------------------------------------------------------------

/// Turn `--key=value`, `--key value` and bare `--flag` (= `"true"`) into a map of strings.
///
/// The first `=` splits key from value (`--filter=a=b` is `"a=b"`); the last of duplicate keys
/// wins; a following argument is taken as the value unless it starts with `--`; `--` ends the
/// flags. Anything that is not a flag (including anything after `--`) is an error naming it.
pub fn parse_cli_args(args: &[String]) -> Result<Map<String, Value>, ArgError> {
    let mut out = Map::new();
    let mut rest = args.iter().peekable();
    while let Some(arg) = rest.next() {
        if arg == "--" {
            return match rest.next() {
                Some(positional) => Err(ArgError::Positional(positional.clone())),
                None => Ok(out),
            };
        }
        let Some(flag) = arg.strip_prefix("--") else {
            return Err(ArgError::Positional(arg.clone()));
        };
        let (key, value) = match flag.split_once('=') {
            Some((key, value)) => (key, value.to_string()),
            None => match rest.next_if(|next| !next.starts_with("--")) {
                Some(value) => (flag, value.clone()),
                None => (flag, "true".to_string()),
            },
        };
        if key.is_empty() {
            return Err(ArgError::EmptyName(arg.clone()));
        }
        out.insert(key.to_string(), Value::String(value));
    }
    Ok(out)
}

/// One top-level input property, as `band help <skill>/<script>` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArgDoc {
    pub name: String,
    /// `string`, `integer|null`, `array<string>`, … or `any`.
    #[serde(rename = "type")]
    pub ty: String,
    pub description: Option<String>,
    pub required: bool,
    pub default: Option<Value>,
    /// The allowed values, from `enum` or `const`; empty when any value of the type goes.
    pub enum_values: Vec<Value>,
}

/// Describe the top-level properties of an input schema, for `band help`.
///
/// Properties come from the root and from what it pulls in (`$ref`, `allOf`, and the branches of
/// `anyOf`/`oneOf`), the root's own first, each group by name (serde_json keeps keys sorted).
/// A property is required if the root or a `$ref`/`allOf` of it lists it. `schema` is best one
/// of this set's own (from [`SchemaSet::input`]), so its relative `$ref`s resolve from its file;
/// any other schema is read as if it sat in `schemas/input/`.
pub fn describe_args(schema: &Value, defs: &SchemaSet) -> Vec<ArgDoc> {
    let index = &defs.index;
    let (schema, base) = defs.located(schema);
    let definite = index.candidates(schema, &base, Follow::Definite);
    let all = index.candidates(schema, &base, Follow::All);
    let required: BTreeSet<&str> = definite
        .iter()
        .filter_map(|(s, _)| s.get("required")?.as_array())
        .flatten()
        .filter_map(Value::as_str)
        .collect();

    // Root first, then what it pulls in.
    let mut names: Vec<&str> = Vec::new();
    for (candidate, _) in all.iter().rev() {
        for name in candidate
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|props| props.keys())
        {
            if !names.contains(&name.as_str()) {
                names.push(name);
            }
        }
    }

    names
        .into_iter()
        .map(|name| {
            let subs = index.property_candidates(&all, name);
            let first = |keyword: &str| subs.iter().rev().find_map(|(s, _)| s.get(keyword));
            ArgDoc {
                name: name.to_string(),
                ty: type_string(index, &subs, 0),
                description: first("description")
                    .or_else(|| first("title"))
                    .and_then(Value::as_str)
                    .map(str::to_string),
                required: required.contains(name),
                default: first("default").cloned(),
                enum_values: match first("enum") {
                    Some(Value::Array(values)) => values.clone(),
                    _ => first("const").cloned().into_iter().collect(),
                },
            }
        })
        .collect()
}

fn type_string(index: &Index, candidates: &Candidates<'_>, depth: usize) -> String {
    let types = declared_types(candidates);
    if types.is_empty() {
        return "any".to_string();
    }
    types
        .iter()
        .map(|name| {
            if *name == "array" && depth < 4 {
                let items = index.item_candidates(candidates, usize::MAX);
                if !items.is_empty() {
                    let inner = type_string(index, &items, depth + 1);
                    if inner != "any" {
                        return format!("array<{inner}>");
                    }
                }
            }
            (*name).to_string()
        })
        .collect::<Vec<_>>()
        .join("|")
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// Check that `path` is a plain relative path under `schemas/`, and return it `/`-separated.
fn relative_schema_path(path: &Path) -> Result<String, String> {
    let mut parts = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => match part.to_str() {
                Some(part) => parts.push(part),
                None => return Err("the file name is not utf-8".to_string()),
            },
            Component::CurDir => {}
            _ => {
                return Err(
                    "a schema path must be relative to the skill root, under schemas/".to_string(),
                );
            }
        }
    }
    if parts.len() < 2 || parts[0] != SCHEMAS_DIR {
        return Err("a schema file must be under schemas/".to_string());
    }
    Ok(parts.join("/"))
}

/// The `band://skill/…` URI of a relative path.
fn path_uri(rel: &str) -> Option<String> {
    let mut encoded = String::with_capacity(rel.len());
    for byte in rel.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    let uri = jsonschema::uri::from_str(&format!("{ROOT_URI}{encoded}")).ok()?;
    Some(uri.as_str().to_string())
}

/// Resolve a URI reference against a base URI; the result is normalized.
fn resolve(base: &str, reference: &str) -> Option<String> {
    let base = jsonschema::uri::from_str(base).ok()?;
    let resolved = jsonschema::uri::resolve_against(&base.borrow(), reference).ok()?;
    Some(resolved.as_str().to_string())
}

fn strip_fragment(uri: &str) -> &str {
    uri.split_once('#').map_or(uri, |(doc, _)| doc)
}

fn has_scheme(reference: &str) -> bool {
    let end = reference.find([':', '/', '?', '#']);
    matches!(end, Some(at) if at > 0 && reference[at..].starts_with(':'))
}

/// A URI as a person would write it: skill URIs become their relative path.
fn display_uri(uri: &str) -> String {
    match uri.strip_prefix(ROOT_URI) {
        Some(rel) => percent_decode(rel),
        None => uri.to_string(),
    }
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' && at + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[at + 1..at + 3]).ok();
            if let Some(byte) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(byte);
                at += 3;
                continue;
            }
        }
        out.push(bytes[at]);
        at += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The root `$id` of a schema (`id`-less drafts are not supported).
fn root_id(schema: &Value) -> Option<&str> {
    schema
        .get("$id")
        .and_then(Value::as_str)
        .filter(|id| !id.starts_with('#'))
}

/// The base URI inside `schema`, given the base outside it.
fn enter(base: &str, schema: &Value) -> String {
    match root_id(schema).and_then(|id| resolve(base, id)) {
        Some(resolved) => strip_fragment(&resolved).to_string(),
        None => base.to_string(),
    }
}

/// Keywords whose values are data, not schemas.
fn is_data_keyword(key: &str) -> bool {
    matches!(key, "enum" | "const" | "default" | "examples")
}

/// Rewrite every `$ref` / `$dynamicRef` / `$recursiveRef` string in a schema document with
/// `map` (where it returns `Some`); data keywords (`enum`, `const`, …) are not entered.
fn rewrite_refs(schema: &mut Value, map: &dyn Fn(&str) -> Option<String>) {
    match schema {
        Value::Object(object) => {
            for (key, child) in object.iter_mut() {
                match child {
                    Value::String(literal)
                        if matches!(key.as_str(), "$ref" | "$dynamicRef" | "$recursiveRef") =>
                    {
                        if let Some(new) = map(literal) {
                            *literal = new;
                        }
                    }
                    _ if is_data_keyword(key) => {}
                    _ => rewrite_refs(child, map),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| rewrite_refs(item, map)),
        _ => {}
    }
}

/// Keywords whose values map names to schemas.
fn is_schema_map_keyword(key: &str) -> bool {
    matches!(
        key,
        "properties"
            | "patternProperties"
            | "$defs"
            | "definitions"
            | "dependentSchemas"
            | "dependencies"
    )
}

/// Call `found(base, literal)` for every `$ref`-like keyword in a schema document.
fn walk_refs(schema: &Value, base: &str, found: &mut dyn FnMut(&str, &str)) {
    walk_schemas(schema, base, &mut String::new(), &mut |node, base, _| {
        for keyword in ["$ref", "$dynamicRef", "$recursiveRef"] {
            if let Some(literal) = node.get(keyword).and_then(Value::as_str) {
                found(base, literal);
            }
        }
    });
}

/// Call `visit(node, base, pointer)` for every schema object in a document: `base` is the base
/// URI inside the node (its `$id` applied), `pointer` its JSON pointer in the document. Values of
/// `enum`, `const`, `default` and `examples` are data and are not entered.
fn walk_schemas<'v>(
    schema: &'v Value,
    base: &str,
    pointer: &mut String,
    visit: &mut dyn FnMut(&'v Value, &str, &str),
) {
    match schema {
        Value::Object(object) => {
            let base = enter(base, schema);
            visit(schema, &base, pointer);
            for (key, child) in object {
                if is_data_keyword(key) {
                    continue;
                }
                let outer = pointer.len();
                push_segment(pointer, key);
                match child {
                    Value::Object(map) if is_schema_map_keyword(key) => {
                        for (name, sub) in map {
                            let inner = pointer.len();
                            push_segment(pointer, name);
                            walk_schemas(sub, &base, pointer, visit);
                            pointer.truncate(inner);
                        }
                    }
                    _ => walk_schemas(child, &base, pointer, visit),
                }
                pointer.truncate(outer);
            }
        }
        Value::Array(items) => {
            for (at, item) in items.iter().enumerate() {
                let outer = pointer.len();
                pointer.push('/');
                pointer.push_str(&at.to_string());
                walk_schemas(item, base, pointer, visit);
                pointer.truncate(outer);
            }
        }
        _ => {}
    }
}

fn push_segment(pointer: &mut String, segment: &str) {
    pointer.push('/');
    pointer.push_str(&segment.replace('~', "~0").replace('/', "~1"));
}

/// Percent-encode what a URI fragment cannot hold as is.
fn encode_fragment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/?".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Refuse a `$schema` band does not know (it would otherwise be fetched as a custom meta-schema).
fn check_drafts(path: &Path, schema: &Value) -> Result<(), ContractError> {
    match schema.get("$schema") {
        None => Ok(()),
        Some(Value::String(uri)) => match Draft::default().detect(schema) {
            Draft::Unknown => Err(ContractError::compile(
                path,
                format!(
                    "unknown $schema \"{uri}\": use https://json-schema.org/draft/2020-12/schema \
                     (the default) or http://json-schema.org/draft-07/schema#"
                ),
            )),
            _ => Ok(()),
        },
        Some(_) => Err(ContractError::compile(path, "$schema must be a string")),
    }
}

fn json_error(path: PathBuf, error: &serde_json::Error) -> ContractError {
    let full = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    let message = full.strip_suffix(&suffix).unwrap_or(&full);
    ContractError::Json {
        path,
        line: error.line(),
        col: error.column(),
        message: lowercase_first(message),
    }
}

fn lowercase_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        // Leave acronyms ("EOF while parsing") alone.
        Some(first) if chars.next().is_some_and(char::is_lowercase) => first
            .to_lowercase()
            .chain(text[first.len_utf8()..].chars())
            .collect(),
        _ => text.to_string(),
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
    let entries = match std::fs::read_dir(&dir) {
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
            match std::fs::canonicalize(&full) {
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
        match std::fs::read_to_string(&full) {
            Ok(text) => files.push(SchemaFile { path: rel, text }),
            Err(source) => errors.push(ContractError::Io { path: rel, source }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn set(files: &[(&str, Value)]) -> SchemaSet {
        let (set, errors) = SchemaSet::load(
            files
                .iter()
                .map(|(path, value)| SchemaFile {
                    path: PathBuf::from(path),
                    text: value.to_string(),
                })
                .collect(),
        );
        assert!(errors.is_empty(), "load errors: {errors:?}");
        set
    }

    fn compile(set: &SchemaSet, rel: &str) -> Contract {
        match set.compile(rel) {
            Ok(contract) => contract,
            Err(error) => panic!("{rel} does not compile: {error}"),
        }
    }

    fn violations(contract: &Contract, value: &Value) -> Vec<Violation> {
        contract.validate(value).expect_err("expected violations")
    }

    fn paths(violations: &[Violation]) -> Vec<&str> {
        violations
            .iter()
            .map(|v| v.instance_path.as_str())
            .collect()
    }

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn repo_def() -> Value {
        json!({
            "type": "object",
            "properties": {"name": {"type": "string"}, "stars": {"type": "integer"}},
            "required": ["name"]
        })
    }

    // ---- $ref resolution ----

    #[test]
    fn ref_by_relative_id() {
        let mut def = repo_def();
        def["$id"] = json!("repo.json");
        let set = set(&[
            ("schemas/defs/repo.json", def),
            (
                "schemas/input/fetch.json",
                json!({"type": "object", "properties": {"repo": {"$ref": "repo.json"}}}),
            ),
        ]);
        let contract = compile(&set, "schemas/input/fetch.json");
        assert_eq!(
            contract.validate(&json!({"repo": {"name": "band"}})),
            Ok(())
        );
        let errs = violations(&contract, &json!({"repo": {"stars": 3}}));
        assert_eq!(paths(&errs), vec!["/repo"]);
        assert!(errs[0].message.contains("\"name\""), "{errs:?}");
    }

    #[test]
    fn def_known_by_relative_id_keeps_its_own_relative_refs() {
        // `repo.json` is reached as `schemas/input/repo.json` (by its `$id`), yet its own
        // `owner.json` must still mean `schemas/defs/owner.json`.
        let set = set(&[
            (
                "schemas/defs/repository.json",
                json!({"$id": "repo.json", "type": "object",
                       "properties": {"owner": {"$ref": "owner.json"},
                                      "stars": {"$ref": "#/$defs/count"}},
                       "$defs": {"count": {"$ref": "owner.json#/$defs/count"}}}),
            ),
            (
                "schemas/defs/owner.json",
                json!({"type": "object", "properties": {"id": {"type": "integer"}},
                       "$defs": {"count": {"type": "integer"}}}),
            ),
            (
                "schemas/input/fetch.json",
                json!({"properties": {"repo": {"$ref": "repo.json"}}}),
            ),
        ]);
        assert!(set.compile_all().is_empty(), "{:?}", set.compile_all());
        let contract = compile(&set, "schemas/input/fetch.json");
        assert_eq!(
            contract.coerce_and_validate(json!({"repo": {"owner": {"id": "7"}, "stars": "3"}})),
            Ok(json!({"repo": {"owner": {"id": 7}, "stars": 3}}))
        );
        let errs = contract
            .coerce_and_validate(json!({"repo": {"owner": {"id": "x"}}}))
            .unwrap_err();
        assert_eq!(paths(&errs), vec!["/repo/owner/id"]);
    }

    #[test]
    fn absolute_ids_rebase_relative_refs_whatever_uri_a_def_is_reached_by() {
        // repo.json says it lives at https://example.com/r/, so its "owner.json" is
        // https://example.com/r/owner.json, which only the `$id` of defs/people.json names.
        let set = set(&[
            (
                "schemas/defs/repo.json",
                json!({"$id": "https://example.com/r/repo.json",
                       "properties": {"owner": {"$ref": "owner.json"}}}),
            ),
            (
                "schemas/defs/people.json",
                json!({"$id": "https://example.com/r/owner.json",
                       "properties": {"id": {"type": "integer"}}}),
            ),
            (
                "schemas/input/a.json",
                json!({"properties": {"repo": {"$ref": "../defs/repo.json"}}}),
            ),
            (
                "schemas/input/b.json",
                json!({"properties": {"repo": {"$ref": "https://example.com/r/repo.json"}}}),
            ),
        ]);
        assert!(set.compile_all().is_empty(), "{:?}", set.compile_all());
        for rel in ["schemas/input/a.json", "schemas/input/b.json"] {
            let contract = compile(&set, rel);
            assert_eq!(
                contract.coerce_and_validate(json!({"repo": {"owner": {"id": "1"}}})),
                Ok(json!({"repo": {"owner": {"id": 1}}})),
                "{rel}"
            );
        }
    }

    #[test]
    fn embedded_ids_and_anchors_in_defs() {
        let set = set(&[
            (
                "schemas/defs/bundle.json",
                json!({"$id": "bundle.json", "$defs": {
                    "port": {"$id": "port.json", "type": "integer", "maximum": 65535},
                    "host": {"$anchor": "host", "type": "string", "minLength": 1}
                }}),
            ),
            (
                "schemas/input/x.json",
                json!({"properties": {
                    "port": {"$ref": "../defs/port.json"},
                    "host": {"$ref": "bundle.json#host"}
                }}),
            ),
        ]);
        assert!(set.compile_all().is_empty(), "{:?}", set.compile_all());
        let contract = compile(&set, "schemas/input/x.json");
        assert_eq!(
            contract.coerce_and_validate(json!({"port": "8080", "host": "h"})),
            Ok(json!({"port": 8080, "host": "h"}))
        );
        let errs = contract
            .coerce_and_validate(json!({"port": "70000", "host": ""}))
            .unwrap_err();
        assert_eq!(paths(&errs), vec!["/host", "/port"]);
    }

    #[test]
    fn anchors_resolve_in_both_drafts() {
        let set = set(&[
            (
                "schemas/input/new.json",
                json!({"$defs": {"n": {"$anchor": "num", "type": "integer"}},
                       "properties": {"n": {"$ref": "#num"}}}),
            ),
            (
                "schemas/input/old.json",
                json!({"$schema": "http://json-schema.org/draft-07/schema#",
                       "definitions": {"n": {"$id": "#num", "type": "integer"}},
                       "properties": {"n": {"$ref": "#num"}}}),
            ),
        ]);
        for rel in ["schemas/input/new.json", "schemas/input/old.json"] {
            let contract = compile(&set, rel);
            assert_eq!(
                contract.coerce_and_validate(json!({"n": "5"})),
                Ok(json!({"n": 5})),
                "{rel}"
            );
            assert!(contract.validate(&json!({"n": "5"})).is_err(), "{rel}");
        }
    }

    #[test]
    fn ref_by_relative_path() {
        let set = set(&[
            ("schemas/defs/repo.json", repo_def()),
            (
                "schemas/output/fetch.json",
                json!({"type": "array", "items": {"$ref": "../defs/repo.json"}}),
            ),
        ]);
        let contract = compile(&set, "schemas/output/fetch.json");
        assert_eq!(
            contract.validate(&json!([{"name": "a"}, {"name": "b"}])),
            Ok(())
        );
        let errs = violations(&contract, &json!([{"name": "a"}, {"name": 5}]));
        assert_eq!(paths(&errs), vec!["/1/name"]);
    }

    #[test]
    fn file_names_needing_percent_encoding() {
        let set = set(&[
            ("schemas/defs/my repo.json", repo_def()),
            (
                "schemas/input/x.json",
                json!({"properties": {"repo": {"$ref": "../defs/my%20repo.json"}}}),
            ),
        ]);
        assert!(set.compile_all().is_empty(), "{:?}", set.compile_all());
        let contract = compile(&set, "schemas/input/x.json");
        assert_eq!(
            contract.coerce_and_validate(json!({"repo": {"name": "a", "stars": "2"}})),
            Ok(json!({"repo": {"name": "a", "stars": 2}}))
        );
        let set2 = self::set(&[(
            "schemas/input/y.json",
            json!({"$ref": "../defs/no%20such.json"}),
        )]);
        let text = set2
            .compile("schemas/input/y.json")
            .unwrap_err()
            .to_string();
        assert!(
            text.ends_with("no schema file at schemas/defs/no such.json"),
            "{text}"
        );
    }

    #[test]
    fn ref_by_absolute_id_needs_no_network() {
        let mut def = repo_def();
        def["$id"] = json!("https://example.com/schemas/repo.json");
        let set = set(&[
            ("schemas/defs/repo.json", def),
            (
                "schemas/input/fetch.json",
                json!({"properties": {"repo": {"$ref": "https://example.com/schemas/repo.json"}}}),
            ),
        ]);
        let contract = compile(&set, "schemas/input/fetch.json");
        assert_eq!(contract.validate(&json!({"repo": {"name": "x"}})), Ok(()));
        assert_eq!(
            paths(&violations(&contract, &json!({"repo": {}}))),
            vec!["/repo"]
        );
    }

    #[test]
    fn root_with_absolute_id_still_resolves_its_own_pointers() {
        let set = set(&[(
            "schemas/input/x.json",
            json!({
                "$id": "https://example.com/x.json",
                "$defs": {"n": {"type": "integer"}},
                "properties": {"n": {"$ref": "#/$defs/n"}}
            }),
        )]);
        let contract = compile(&set, "schemas/input/x.json");
        assert_eq!(
            paths(&violations(&contract, &json!({"n": "a"}))),
            vec!["/n"]
        );
    }

    #[test]
    fn nested_defs_reference_defs() {
        let set = set(&[
            (
                "schemas/defs/owner.json",
                json!({"$id": "owner.json", "type": "object",
                       "properties": {"login": {"$ref": "common.json#/$defs/slug"}},
                       "required": ["login"]}),
            ),
            (
                "schemas/defs/common.json",
                json!({"$defs": {"slug": {"type": "string", "pattern": "^[a-z]+$"}}}),
            ),
            (
                "schemas/defs/repo.json",
                json!({"type": "object", "properties": {"owner": {"$ref": "owner.json"}}}),
            ),
            (
                "schemas/input/fetch.json",
                json!({"properties": {"repo": {"$ref": "../defs/repo.json"}}}),
            ),
        ]);
        let contract = compile(&set, "schemas/input/fetch.json");
        assert_eq!(
            contract.validate(&json!({"repo": {"owner": {"login": "abc"}}})),
            Ok(())
        );
        let errs = violations(&contract, &json!({"repo": {"owner": {"login": "ABC"}}}));
        assert_eq!(paths(&errs), vec!["/repo/owner/login"]);
        assert_eq!(set.compile_all().len(), 0);
    }

    #[test]
    fn draft7_and_2020_12_are_each_honored() {
        // In draft 7 a `$ref` hides its siblings; in 2020-12 it does not.
        let body = |schema: &str, defs: &str| {
            json!({
                "$schema": schema,
                defs: {"s": {"type": "string"}},
                "properties": {"s": {"$ref": format!("#/{defs}/s"), "maxLength": 2}}
            })
        };
        let set = set(&[
            (
                "schemas/input/old.json",
                body("http://json-schema.org/draft-07/schema#", "definitions"),
            ),
            (
                "schemas/input/new.json",
                body("https://json-schema.org/draft/2020-12/schema", "$defs"),
            ),
        ]);
        let long = json!({"s": "abcdef"});
        assert_eq!(
            compile(&set, "schemas/input/old.json").validate(&long),
            Ok(())
        );
        let new = compile(&set, "schemas/input/new.json");
        assert_eq!(paths(&violations(&new, &long)), vec!["/s"]);
        assert_eq!(paths(&violations(&new, &json!({"s": 1}))), vec!["/s"]);
    }

    #[test]
    fn draft7_tuple_items_and_2020_12_prefix_items() {
        let set = set(&[
            (
                "schemas/input/old.json",
                json!({"$schema": "http://json-schema.org/draft-07/schema#",
                       "type": "array", "items": [{"type": "integer"}, {"type": "string"}],
                       "additionalItems": false}),
            ),
            (
                "schemas/input/new.json",
                json!({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
                       "items": false}),
            ),
        ]);
        for rel in ["schemas/input/old.json", "schemas/input/new.json"] {
            let contract = compile(&set, rel);
            assert_eq!(contract.validate(&json!([1, "a"])), Ok(()), "{rel}");
            assert!(contract.validate(&json!([1, "a", 3])).is_err(), "{rel}");
            // Coercion follows the tuple positions too.
            assert_eq!(
                contract.coerce_and_validate(json!(["7", "7"])),
                Ok(json!([7, "7"])),
                "{rel}"
            );
        }
    }

    #[test]
    fn unknown_schema_uri_is_refused() {
        let set = set(&[(
            "schemas/input/x.json",
            json!({"$schema": "https://example.com/my-meta", "type": "object"}),
        )]);
        let error = set.compile("schemas/input/x.json").unwrap_err();
        let text = error.to_string();
        assert!(
            text.starts_with("schemas/input/x.json: unknown $schema"),
            "{text}"
        );
    }

    #[test]
    fn unresolvable_ref_names_file_and_ref() {
        let set = set(&[(
            "schemas/input/fetch.json",
            json!({"properties": {"repo": {"$ref": "../defs/missing.json"}}}),
        )]);
        let error = set.compile("schemas/input/fetch.json").unwrap_err();
        match &error {
            ContractError::Ref {
                path,
                reference,
                message,
            } => {
                assert_eq!(path, Path::new("schemas/input/fetch.json"));
                assert_eq!(reference, "../defs/missing.json");
                assert_eq!(message, "no schema file at schemas/defs/missing.json");
            }
            other => panic!("expected a ref error, got {other:?}"),
        }
        assert_eq!(
            error.to_string(),
            "schemas/input/fetch.json: cannot resolve $ref \"../defs/missing.json\": \
             no schema file at schemas/defs/missing.json"
        );
        assert_eq!(error.code(), Code::SchemaInvalid);
    }

    #[test]
    fn unresolvable_ref_in_a_def_is_blamed_on_the_def_once() {
        let set = set(&[
            (
                "schemas/defs/repo.json",
                json!({"properties": {"owner": {"$ref": "owner.json"}}}),
            ),
            (
                "schemas/input/a.json",
                json!({"properties": {"repo": {"$ref": "../defs/repo.json"}}}),
            ),
            (
                "schemas/input/b.json",
                json!({"items": {"$ref": "../defs/repo.json"}}),
            ),
        ]);
        let error = set.compile("schemas/input/a.json").unwrap_err();
        assert_eq!(error.path(), Path::new("schemas/defs/repo.json"));
        assert!(error.to_string().contains("\"owner.json\""), "{error}");
        let all = set.compile_all();
        assert_eq!(all.len(), 1, "{all:?}");
        assert_eq!(all[0].path(), Path::new("schemas/defs/repo.json"));
    }

    #[test]
    fn lint_checks_refs_in_unused_defs_too() {
        let set = set(&[(
            "schemas/defs/lib.json",
            json!({"$defs": {
                "a": {"$ref": "#/$defs/gone"},
                "b": {"$ref": "nowhere.json"},
                "c": {"$ref": "#missing-anchor"},
                "ok": {"$ref": "#/$defs/a"}
            }}),
        )]);
        let mut found: Vec<String> = set.compile_all().iter().map(|e| e.to_string()).collect();
        found.sort();
        assert_eq!(
            found,
            vec![
                "schemas/defs/lib.json: cannot resolve $ref \"#/$defs/gone\": nothing at \
                 \"/$defs/gone\" in the schema it points into",
                "schemas/defs/lib.json: cannot resolve $ref \"#missing-anchor\": no $anchor \
                 \"missing-anchor\" in the schema it points into",
                "schemas/defs/lib.json: cannot resolve $ref \"nowhere.json\": no schema file at \
                 schemas/defs/nowhere.json",
            ]
        );
    }

    #[test]
    fn pointer_to_nowhere_names_the_ref() {
        let set = set(&[(
            "schemas/input/x.json",
            json!({"$defs": {}, "properties": {"a": {"$ref": "#/$defs/nope"}}}),
        )]);
        let error = set.compile("schemas/input/x.json").unwrap_err();
        let text = error.to_string();
        assert!(text.starts_with("schemas/input/x.json: "), "{text}");
        assert!(text.contains("#/$defs/nope"), "{text}");
    }

    #[test]
    fn http_ref_is_refused_without_any_connection() {
        // A listener nobody should ever connect to: the ref points at it.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let url = format!("http://127.0.0.1:{port}/repo.json");
        let set = set(&[(
            "schemas/input/fetch.json",
            json!({"properties": {"repo": {"$ref": url}}}),
        )]);
        let error = set.compile("schemas/input/fetch.json").unwrap_err();
        let text = error.to_string();
        assert_eq!(
            text,
            format!(
                "schemas/input/fetch.json: cannot resolve $ref \"{url}\": band resolves $ref \
                 offline only; put the schema in schemas/defs/"
            )
        );
        match listener.accept() {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => panic!("band connected to the $ref url: {other:?}"),
        }
    }

    #[test]
    fn file_refs_and_escapes_are_refused() {
        let set = set(&[
            (
                "schemas/input/a.json",
                json!({"$ref": "file:///etc/passwd"}),
            ),
            (
                "schemas/input/b.json",
                json!({"$ref": "../../scripts/x.json"}),
            ),
            (
                "schemas/input/c.json",
                json!({"$ref": "../../../../../etc/passwd"}),
            ),
            (
                "schemas/input/d.json",
                json!({"$ref": "//evil.example/x.json"}),
            ),
        ]);
        let a = set.compile("schemas/input/a.json").unwrap_err().to_string();
        assert!(a.contains("\"file:///etc/passwd\""), "{a}");
        assert!(a.ends_with(OFFLINE_ONLY), "{a}");
        for rel in [
            "schemas/input/b.json",
            "schemas/input/c.json",
            "schemas/input/d.json",
        ] {
            let text = set.compile(rel).unwrap_err().to_string();
            assert!(
                text.starts_with(&format!("{rel}: cannot resolve $ref")),
                "{text}"
            );
            assert!(text.contains(OFFLINE_ONLY), "{text}");
        }
        let b = set.compile("schemas/input/b.json").unwrap_err().to_string();
        assert!(b.contains("outside schemas/"), "{b}");
    }

    #[test]
    fn ref_to_a_broken_file_says_so() {
        let (set, errors) = SchemaSet::load(vec![
            SchemaFile {
                path: "schemas/defs/bad.json".into(),
                text: "{".into(),
            },
            SchemaFile {
                path: "schemas/input/x.json".into(),
                text: r#"{"$ref": "../defs/bad.json"}"#.into(),
            },
        ]);
        assert_eq!(errors.len(), 1);
        let text = set.compile("schemas/input/x.json").unwrap_err().to_string();
        assert!(
            text.ends_with("schemas/defs/bad.json is not valid json"),
            "{text}"
        );
        let text = set
            .compile("schemas/defs/bad.json")
            .unwrap_err()
            .to_string();
        assert_eq!(text, "schemas/defs/bad.json: schema is not valid json");
    }

    #[test]
    fn bad_keyword_value_does_not_compile() {
        let set = set(&[(
            "schemas/input/x.json",
            json!({"properties": {"n": {"type": "strin"}}}),
        )]);
        let error = set.compile("schemas/input/x.json").unwrap_err();
        let text = error.to_string();
        assert!(
            text.starts_with("schemas/input/x.json: schema does not compile at /properties/n/type"),
            "{text}"
        );
        assert_eq!(set.compile_all().len(), 1);
    }

    #[test]
    fn duplicate_ids_are_reported() {
        let (_, errors) = SchemaSet::load(vec![
            SchemaFile {
                path: "schemas/defs/a.json".into(),
                text: r#"{"$id": "x.json"}"#.into(),
            },
            SchemaFile {
                path: "schemas/defs/b.json".into(),
                text: r#"{"$id": "x.json"}"#.into(),
            },
        ]);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(
            errors[0].to_string(),
            "schemas/defs/b.json: $id \"x.json\" is also the $id of schemas/defs/a.json"
        );
    }

    #[test]
    fn files_outside_schemas_are_refused() {
        let (_, errors) = SchemaSet::load(vec![
            SchemaFile {
                path: "scripts/x.json".into(),
                text: "{}".into(),
            },
            SchemaFile {
                path: "schemas/../x.json".into(),
                text: "{}".into(),
            },
        ]);
        assert_eq!(errors.len(), 2, "{errors:?}");
    }

    // ---- JSON syntax ----

    #[test]
    fn json_syntax_error_has_line_and_col() {
        let (set, errors) = SchemaSet::load(vec![SchemaFile {
            path: "schemas/input/x.json".into(),
            text: "{\n  \"type\": \"object\",\n  \"properties\": {,}\n}".into(),
        }]);
        assert!(set.input("x").is_none());
        match &errors[..] {
            [
                ContractError::Json {
                    path,
                    line,
                    col,
                    message,
                },
            ] => {
                assert_eq!(path, Path::new("schemas/input/x.json"));
                assert_eq!((*line, *col), (3, 18));
                assert!(!message.contains("line"), "{message}");
            }
            other => panic!("expected one json error, got {other:?}"),
        }
        let text = errors[0].to_string();
        assert!(
            text.starts_with("schemas/input/x.json:3:18: invalid json: "),
            "{text}"
        );
        assert_eq!(errors[0].loc(), Loc::new(3, 18));
        assert_eq!(errors[0].code(), Code::SchemaJson);
    }

    // ---- coercion ----

    fn input_contract(schema: Value) -> Contract {
        let set = set(&[("schemas/input/x.json", schema)]);
        compile(&set, "schemas/input/x.json")
    }

    #[test]
    fn coerces_integer_and_still_enforces_minimum() {
        let contract = input_contract(json!({
            "type": "object",
            "properties": {"n": {"type": "integer", "minimum": 10}}
        }));
        assert_eq!(
            contract.coerce_and_validate(json!({"n": "12"})),
            Ok(json!({"n": 12}))
        );
        let errs = contract.coerce_and_validate(json!({"n": "5"})).unwrap_err();
        assert_eq!(paths(&errs), vec!["/n"]);
        assert!(errs[0].message.contains("minimum of 10"), "{errs:?}");
        // Not an integer: left a string, so the type error shows.
        let errs = contract
            .coerce_and_validate(json!({"n": "2.5"}))
            .unwrap_err();
        assert!(errs[0].message.contains("\"2.5\""), "{errs:?}");
        // Too big to be exact: not coerced rather than silently rounded.
        let errs = contract
            .coerce_and_validate(json!({"n": "100000000000000000000000"}))
            .unwrap_err();
        assert!(errs[0].message.contains("is not of type"), "{errs:?}");
        assert_eq!(
            contract.coerce_and_validate(json!({"n": "12.0"})),
            Ok(json!({"n": 12.0}))
        );
        let errs = contract
            .coerce_and_validate(json!({"n": "ten"}))
            .unwrap_err();
        assert!(
            errs[0]
                .message
                .contains("\"ten\" is not of type \"integer\""),
            "{errs:?}"
        );
    }

    #[test]
    fn coerces_numbers_booleans_and_null() {
        let contract = input_contract(json!({
            "properties": {
                "x": {"type": "number"},
                "b": {"type": "boolean"},
                "z": {"type": "null"},
                "m": {"type": ["integer", "null"]}
            }
        }));
        assert_eq!(
            contract
                .coerce_and_validate(json!({"x": "2.5", "b": "true", "z": "null", "m": "null"})),
            Ok(json!({"x": 2.5, "b": true, "z": null, "m": null}))
        );
        assert_eq!(
            contract.coerce_and_validate(json!({"x": "-3", "b": "false", "m": "4"})),
            Ok(json!({"x": -3, "b": false, "m": 4}))
        );
        let errs = contract
            .coerce_and_validate(json!({"b": "yes"}))
            .unwrap_err();
        assert_eq!(paths(&errs), vec!["/b"]);
    }

    #[test]
    fn coerces_through_ref() {
        let set = set(&[
            (
                "schemas/defs/limits.json",
                json!({"$id": "limits.json", "$defs": {"count": {"type": "integer", "maximum": 100}}}),
            ),
            ("schemas/defs/flag.json", json!({"type": "boolean"})),
            (
                "schemas/input/x.json",
                json!({"$ref": "#/$defs/args", "$defs": {"args": {
                    "type": "object",
                    "properties": {
                        "count": {"$ref": "limits.json#/$defs/count"},
                        "dry": {"$ref": "../defs/flag.json"}
                    }
                }}}),
            ),
        ]);
        let contract = compile(&set, "schemas/input/x.json");
        assert_eq!(
            contract.coerce_and_validate(json!({"count": "42", "dry": "true"})),
            Ok(json!({"count": 42, "dry": true}))
        );
        let errs = contract
            .coerce_and_validate(json!({"count": "420"}))
            .unwrap_err();
        assert_eq!(paths(&errs), vec!["/count"]);
    }

    #[test]
    fn strings_stay_strings() {
        let contract = input_contract(json!({
            "properties": {
                "s": {"type": "string"},
                "either": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
                "free": {}
            }
        }));
        let value = json!({"s": "5", "either": "5", "free": "true"});
        assert_eq!(contract.coerce_and_validate(value.clone()), Ok(value));
    }

    #[test]
    fn enum_of_integers_coerces() {
        let contract = input_contract(json!({"properties": {"level": {"enum": [1, 2, 3]}}}));
        assert_eq!(
            contract.coerce_and_validate(json!({"level": "2"})),
            Ok(json!({"level": 2}))
        );
    }

    #[test]
    fn arrays_and_objects_from_json_text() {
        let contract = input_contract(json!({
            "properties": {
                "tags": {"type": "array", "items": {"type": "string"}},
                "ids": {"type": "array", "items": {"type": "integer"}},
                "opts": {"type": "object", "properties": {"deep": {"type": "boolean"}}},
                "extra": {"type": "object", "additionalProperties": {"type": "integer"}}
            }
        }));
        assert_eq!(
            contract.coerce_and_validate(json!({
                "tags": "[\"a\", \"b\"]",
                "ids": "[1, \"2\"]",
                "opts": "{\"deep\": \"true\"}",
                "extra": {"k": "3"}
            })),
            Ok(json!({
                "tags": ["a", "b"],
                "ids": [1, 2],
                "opts": {"deep": true},
                "extra": {"k": 3}
            }))
        );
        let errs = contract
            .coerce_and_validate(json!({"tags": "a,b"}))
            .unwrap_err();
        assert_eq!(paths(&errs), vec!["/tags"]);
        let errs = contract
            .coerce_and_validate(json!({"opts": "[1]"}))
            .unwrap_err();
        assert_eq!(paths(&errs), vec!["/opts"]);
    }

    #[test]
    fn cli_args_end_to_end() {
        let contract = input_contract(json!({
            "type": "object",
            "properties": {
                "n": {"type": "integer"},
                "verbose": {"type": "boolean"},
                "filter": {"type": "string"},
                "name": {"type": "string"}
            },
            "required": ["n"],
            "additionalProperties": false
        }));
        let map =
            parse_cli_args(&args(&["--n", "3", "--verbose", "--filter=a=b", "--name="])).unwrap();
        assert_eq!(
            contract.coerce_and_validate(Value::Object(map)),
            Ok(json!({"n": 3, "verbose": true, "filter": "a=b", "name": ""}))
        );
    }

    // ---- strict validation ----

    #[test]
    fn output_validation_does_not_coerce() {
        let set = set(&[(
            "schemas/output/x.json",
            json!({"type": "object", "properties": {"n": {"type": "integer"}, "ok": {"type": "boolean"}}}),
        )]);
        let contract = compile(&set, "schemas/output/x.json");
        let errs = violations(&contract, &json!({"n": "5", "ok": "true"}));
        assert_eq!(paths(&errs), vec!["/n", "/ok"]);
        assert_eq!(errs[0].to_string(), "/n: \"5\" is not of type \"integer\"");
    }

    #[test]
    fn violation_messages_are_lowercase() {
        let contract = input_contract(json!({"properties": {}, "additionalProperties": false}));
        let errs = violations(&contract, &json!({"x": 1}));
        assert!(
            errs[0].message.starts_with("additional properties"),
            "{errs:?}"
        );
    }

    #[test]
    fn contracts_can_be_shared_across_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Contract>();
        assert_send_sync::<SchemaSet>();
    }

    #[test]
    fn errors_become_diagnostics() {
        let set = set(&[(
            "schemas/input/x.json",
            json!({"$ref": "https://example.com/x.json"}),
        )]);
        let diag = set
            .compile("schemas/input/x.json")
            .unwrap_err()
            .to_diagnostic();
        assert_eq!(
            diag.headline(),
            "schemas/input/x.json: error[C002]: cannot resolve $ref \"https://example.com/x.json\": \
             band resolves $ref offline only; put the schema in schemas/defs/"
        );
        let (_, errors) = SchemaSet::load(vec![SchemaFile {
            path: "schemas/input/y.json".into(),
            text: "{\"a\": }".into(),
        }]);
        let headline = errors[0].to_diagnostic().headline();
        assert!(
            headline.starts_with("schemas/input/y.json:1:7: error[C001]: invalid json: "),
            "{headline}"
        );
    }

    #[test]
    fn formats_are_checked() {
        let contract =
            input_contract(json!({"properties": {"when": {"type": "string", "format": "date"}}}));
        assert_eq!(contract.validate(&json!({"when": "2024-02-29"})), Ok(()));
        assert_eq!(
            paths(&violations(&contract, &json!({"when": "yesterday"}))),
            vec!["/when"]
        );
    }

    #[test]
    fn null_output_against_required_fields() {
        let set = set(&[
            (
                "schemas/output/typed.json",
                json!({"type": "object", "required": ["a", "b"]}),
            ),
            ("schemas/output/untyped.json", json!({"required": ["a"]})),
            ("schemas/defs/res.json", json!({"required": ["id"]})),
            (
                "schemas/output/viaref.json",
                json!({"$ref": "../defs/res.json"}),
            ),
            ("schemas/output/object.json", json!({"type": "object"})),
            ("schemas/output/anything.json", json!({})),
            (
                "schemas/output/nullable.json",
                json!({"type": ["object", "null"], "required": ["a"]}),
            ),
        ]);
        let one = |rel: &str| compile(&set, rel).validate(&Value::Null);

        let errs = one("schemas/output/typed.json").unwrap_err();
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(
            errs[0].to_string(),
            "(root): got null (no output), but the schema expects an object with required \
             properties \"a\", \"b\""
        );
        // `required` alone does not constrain null in JSON Schema; band still refuses no output.
        let errs = one("schemas/output/untyped.json").unwrap_err();
        assert!(errs[0].message.contains("\"a\""), "{errs:?}");
        let errs = one("schemas/output/viaref.json").unwrap_err();
        assert!(errs[0].message.contains("\"id\""), "{errs:?}");

        let errs = one("schemas/output/object.json").unwrap_err();
        assert_eq!(
            errs[0].message,
            "got null (no output): null is not of type \"object\""
        );

        assert_eq!(one("schemas/output/anything.json"), Ok(()));
        assert_eq!(one("schemas/output/nullable.json"), Ok(()));
    }

    // ---- CLI args ----

    #[test]
    fn parse_cli_args_forms() {
        let map = parse_cli_args(&args(&[
            "--filter=key=val",
            "--name=",
            "--count",
            "5",
            "--neg",
            "-3",
            "--flag",
            "--last",
        ]))
        .unwrap();
        assert_eq!(
            Value::Object(map),
            json!({
                "filter": "key=val",
                "name": "",
                "count": "5",
                "neg": "-3",
                "flag": "true",
                "last": "true"
            })
        );
    }

    #[test]
    fn parse_cli_args_last_duplicate_wins() {
        let map = parse_cli_args(&args(&["--a=1", "--b", "x", "--a", "2"])).unwrap();
        assert_eq!(Value::Object(map), json!({"a": "2", "b": "x"}));
    }

    #[test]
    fn parse_cli_args_double_dash_and_positionals() {
        assert_eq!(
            Value::Object(parse_cli_args(&args(&["--a", "--"])).unwrap()),
            json!({"a": "true"})
        );
        assert_eq!(parse_cli_args(&[]).unwrap(), Map::new());
        assert_eq!(
            parse_cli_args(&args(&["--a=1", "stray"])),
            Err(ArgError::Positional("stray".into()))
        );
        assert_eq!(
            parse_cli_args(&args(&["--a", "1", "2"])),
            Err(ArgError::Positional("2".into()))
        );
        assert_eq!(
            parse_cli_args(&args(&["--", "--b"])),
            Err(ArgError::Positional("--b".into()))
        );
        assert_eq!(
            parse_cli_args(&args(&["-v"])),
            Err(ArgError::Positional("-v".into()))
        );
        assert_eq!(
            parse_cli_args(&args(&["--=x"])),
            Err(ArgError::EmptyName("--=x".into()))
        );
        let text = ArgError::Positional("stray".into()).to_string();
        assert!(text.contains("\"stray\""), "{text}");
    }

    // ---- describe_args ----

    #[test]
    fn describe_args_follows_refs() {
        let set = set(&[
            (
                "schemas/defs/common.json",
                json!({"$defs": {
                    "limit": {"type": "integer", "description": "how many", "default": 10},
                    "base": {"properties": {"verbose": {"type": "boolean"}}, "required": ["verbose"]}
                }}),
            ),
            (
                "schemas/input/x.json",
                json!({
                    "type": "object",
                    "allOf": [{"$ref": "../defs/common.json#/$defs/base"}],
                    "properties": {
                        "repo": {"type": "string", "description": "owner/name"},
                        "limit": {"$ref": "../defs/common.json#/$defs/limit"},
                        "mode": {"enum": ["fast", "slow"], "default": "fast"},
                        "tags": {"type": "array", "items": {"type": "string"}},
                        "since": {"type": ["string", "null"]},
                        "blob": {}
                    },
                    "required": ["repo"]
                }),
            ),
        ]);
        let schema = set.input("x").unwrap();
        let docs = describe_args(schema, &set);
        let by_name = |name: &str| docs.iter().find(|d| d.name == name).unwrap().clone();
        assert_eq!(docs.len(), 7, "{docs:?}");
        assert_eq!(
            by_name("repo"),
            ArgDoc {
                name: "repo".into(),
                ty: "string".into(),
                description: Some("owner/name".into()),
                required: true,
                default: None,
                enum_values: vec![],
            }
        );
        assert_eq!(
            by_name("limit"),
            ArgDoc {
                name: "limit".into(),
                ty: "integer".into(),
                description: Some("how many".into()),
                required: false,
                default: Some(json!(10)),
                enum_values: vec![],
            }
        );
        let mode = by_name("mode");
        assert_eq!(mode.ty, "string");
        assert_eq!(mode.enum_values, vec![json!("fast"), json!("slow")]);
        assert_eq!(mode.default, Some(json!("fast")));
        assert_eq!(by_name("tags").ty, "array<string>");
        assert_eq!(by_name("since").ty, "string|null");
        assert_eq!(by_name("blob").ty, "any");
        let verbose = by_name("verbose");
        assert_eq!((verbose.ty.as_str(), verbose.required), ("boolean", true));
    }

    // ---- load_dir ----

    #[test]
    fn load_dir_reads_schemas_tree() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("schemas/input")).unwrap();
        std::fs::create_dir_all(root.join("schemas/defs")).unwrap();
        std::fs::write(root.join("schemas/defs/n.json"), r#"{"type": "integer"}"#).unwrap();
        std::fs::write(
            root.join("schemas/input/x.json"),
            r#"{"properties": {"n": {"$ref": "../defs/n.json"}}}"#,
        )
        .unwrap();
        std::fs::write(root.join("schemas/input/notes.txt"), "not a schema").unwrap();
        std::fs::write(root.join("secret.json"), "{}").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(
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
        std::fs::write(outside.path().join("x.json"), "{}").unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("schemas/defs")).unwrap();
        std::os::unix::fs::symlink(
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
            std::fs::create_dir_all(dir.path().join("schemas/input")).unwrap();
            std::fs::write(dir.path().join("schemas/input/x.json"), "{}").unwrap();
            std::os::unix::fs::symlink("nowhere.json", dir.path().join("schemas/input/y.json"))
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

    #[test]
    fn bundle_is_self_contained_and_means_the_same() {
        let s = set(&[
            (
                "schemas/input/go.json",
                json!({
                    "type": "object",
                    "properties": {
                        "repo": {"$ref": "../defs/repo.json"},
                        "by_id": {"$ref": "repo.json"},
                        "n": {"$ref": "../defs/num.json#/$defs/small"}
                    },
                    "required": ["repo"],
                    "additionalProperties": false
                }),
            ),
            (
                "schemas/defs/repo.json",
                json!({"$id": "repo.json", "type": "string", "pattern": "^[a-z]+/[a-z]+$"}),
            ),
            (
                "schemas/defs/num.json",
                json!({"$defs": {"small": {"$ref": "#/$defs/int", "maximum": 9}, "int": {"type": "integer"}}}),
            ),
            ("schemas/defs/unused.json", json!({"type": "null"})),
        ]);
        let bundle = s.bundle("schemas/input/go.json").unwrap();
        assert_eq!(bundle["$id"], "band://skill/schemas/input/go.json");
        let defs = bundle["$defs"].as_object().unwrap();
        assert_eq!(
            defs.keys().collect::<Vec<_>>(),
            ["band:schemas/defs/num.json", "band:schemas/defs/repo.json"]
        );
        assert_eq!(
            bundle["properties"]["by_id"]["$ref"],
            "band://skill/schemas/defs/repo.json"
        );
        // No retriever: every reference must resolve inside the document.
        let validator = jsonschema::validator_for(&bundle).unwrap();
        let contract = s.compile("schemas/input/go.json").unwrap();
        for (value, ok) in [
            (json!({"repo": "a/b", "by_id": "c/d", "n": 3}), true),
            (json!({"repo": "A B"}), false),
            (json!({"repo": "a/b", "by_id": "x"}), false),
            (json!({"repo": "a/b", "n": 10}), false),
            (json!({"repo": "a/b", "n": 1.5}), false),
            (json!({"repo": "a/b", "extra": 1}), false),
        ] {
            assert_eq!(validator.is_valid(&value), ok, "bundle on {value}");
            assert_eq!(contract.validate(&value).is_ok(), ok, "contract on {value}");
        }
        assert!(s.bundle("schemas/input/none.json").is_none());
    }

    #[test]
    fn bundle_of_a_draft7_root_uses_definitions() {
        let s = set(&[
            (
                "schemas/input/go.json",
                json!({"$schema": "http://json-schema.org/draft-07/schema#", "properties": {"a": {"$ref": "../defs/a.json"}}}),
            ),
            ("schemas/defs/a.json", json!({"type": "integer"})),
        ]);
        let bundle = s.bundle("schemas/input/go.json").unwrap();
        assert!(
            bundle["definitions"]["band:schemas/defs/a.json"].is_object(),
            "{bundle}"
        );
        let validator = jsonschema::validator_for(&bundle).unwrap();
        assert!(validator.is_valid(&json!({"a": 1})));
        assert!(!validator.is_valid(&json!({"a": "x"})));
    }
}
