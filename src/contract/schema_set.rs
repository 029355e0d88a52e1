//! The schema set: every schema file of a skill, parsed, indexed by URI and `$id`, and compiled
//! into [`Contract`]s (reading them from disk is `load_dir`, bundling one is `bundle`).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use jsonschema::error::ValidationErrorKind;
use jsonschema::{Draft, ReferencingError};
use serde_json::Value;

use super::error::{ContractError, lowercase_first};
use super::offline::{OfflineRetriever, Refusal};
use super::refs::{enter, root_id, walk_refs, walk_schemas};
use super::uri::{
    display_uri, encode_fragment, has_scheme, path_uri, percent_decode, resolve, strip_fragment,
};
use super::validate::Contract;
use super::{ROOT_URI, SCHEMAS_DIR};

/// One schema file as read from the skill: its path relative to the skill root and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaFile {
    /// Relative to the skill root, e.g. `schemas/defs/repo.json`.
    pub path: PathBuf,
    pub text: String,
}

/// A parsed schema file.
#[derive(Debug)]
pub(super) struct Loaded {
    path: PathBuf,
    /// `/`-separated relative path, e.g. `schemas/defs/repo.json`.
    pub(super) rel: String,
    /// `band://skill/schemas/defs/repo.json`.
    pub(super) uri: String,
    /// The schema as written.
    value: Value,
    /// The schema as handed to jsonschema: every `$ref` made absolute (and anchors turned into
    /// JSON pointers), so no `$ref` depends on the URI the document was reached by.
    pub(super) served: Value,
    /// The file's size as read.
    pub(super) bytes: usize,
}

/// Everything the resolver and the coercer need, shared by the set, its contracts and the
/// retriever.
#[derive(Debug, Default)]
pub(super) struct Index {
    pub(super) files: Vec<Loaded>,
    /// Fragmentless URI (path, `$id`, relative `$id` alias, embedded `$id`) → the file, and the
    /// JSON pointer of the resource inside it (`""` for the whole file).
    pub(super) by_uri: BTreeMap<String, (usize, String)>,
    /// `/`-separated relative path → index into `files`.
    pub(super) by_rel: BTreeMap<String, usize>,
    /// Files that were given but are not valid JSON, by URI (so a `$ref` to one says so).
    pub(super) broken: BTreeMap<String, String>,
}

/// All schemas of one skill, parsed and indexed for offline `$ref` resolution.
#[derive(Debug, Clone, Default)]
pub struct SchemaSet {
    pub(super) index: Arc<Index>,
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
            index.add_file(file, &mut dirs, &mut errors);
        }
        index.alias_ids(&dirs, &mut errors);
        index.index_embedded();
        index.serve_absolute_refs();
        (
            SchemaSet {
                index: Arc::new(index),
            },
            errors,
        )
    }

    /// The raw input schema of `script` (at [`Self::input_rel`]).
    pub fn input(&self, script: &str) -> Option<&Value> {
        self.get(&self.input_rel(script)?)
    }

    /// The raw output schema of `script` (at [`Self::output_rel`]).
    pub fn output(&self, script: &str) -> Option<&Value> {
        self.get(&self.output_rel(script)?)
    }

    /// Where the input schema of `script` is, if it has one that loaded: `schemas/input/<script>.json`,
    /// else upstream's co-located `scripts/resources/<script>/input_schema.json`.
    pub fn input_rel(&self, script: &str) -> Option<String> {
        self.contract_rel("input", script)
    }

    /// The bytes of the schema at `rel_path` and of every file it reaches through `$ref`
    /// (transitively, each once): what compiling or bundling it reads. `None` if there is no such
    /// schema.
    pub fn reached_bytes(&self, rel_path: &str) -> Option<usize> {
        let (_, reached) = self.reached(rel_path)?;
        Some(reached.iter().map(|&i| self.index.files[i].bytes).sum())
    }

    /// The file at `rel_path` (its index), and every file it reaches through `$ref`,
    /// transitively, itself included. `None` if there is no such schema.
    pub(super) fn reached(
        &self,
        rel_path: &str,
    ) -> Option<(usize, std::collections::BTreeSet<usize>)> {
        let index = &self.index;
        let at = *index.by_rel.get(&rel_path.replace('\\', "/"))?;
        let mut reached = std::collections::BTreeSet::from([at]);
        let mut queue = vec![at];
        while let Some(i) = queue.pop() {
            let file = &index.files[i];
            super::refs::walk_refs(&file.served, &file.uri, &mut |base, literal| {
                if let Some(target) = super::uri::resolve(base, literal)
                    && let Some(&(j, _)) = index.by_uri.get(super::uri::strip_fragment(&target))
                    && reached.insert(j)
                {
                    queue.push(j);
                }
            });
        }
        Some((at, reached))
    }

    /// Where the output schema of `script` is (as [`Self::input_rel`], for `output`).
    pub fn output_rel(&self, script: &str) -> Option<String> {
        self.contract_rel("output", script)
    }

    /// The paths `script`'s `kind` (`input`/`output`) schema may have, the canonical one first.
    pub fn contract_candidates(kind: &str, script: &str) -> [String; 2] {
        [
            format!("{SCHEMAS_DIR}/{kind}/{script}.json"),
            format!("{COLOCATED_DIR}/{script}/{kind}_schema.json"),
        ]
    }

    fn contract_rel(&self, kind: &str, script: &str) -> Option<String> {
        Self::contract_candidates(kind, script)
            .into_iter()
            .find(|rel| self.index.by_rel.contains_key(rel) || self.is_broken(rel))
    }

    fn is_broken(&self, rel: &str) -> bool {
        self.index.broken.values().any(|b| b == rel)
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
        // A schema whose check of one value can take more subschemas than a bound is refused
        // before jsonschema builds it: a chain of `anyOf`s, each reaching the next level twice,
        // doubled the work a level (28 levels of a 5 KB input contract: 5.7 s of band's CPU on
        // the host before anything ran).
        let visits = self.index.fan_out(&file.served, &file.uri, MAX_FAN_OUT);
        if visits > MAX_FAN_OUT {
            return Err(ContractError::compile(
                &file.path,
                format!(
                    "checking one value against it can take more than {MAX_FAN_OUT} subschemas (each path through `$ref`s, `anyOf`, `allOf`… counts): band refuses a contract that costly"
                ),
            ));
        }

        // `pattern` and `patternProperties` run on the `regex` engine, linear in the text: a
        // skill's contract is checked on the host, outside any run's limits, and a backtracking
        // engine let one `pattern` (a backreference) cost 19 ms a string. Lookarounds and
        // backreferences do not compile (C002 names the pattern).
        let validator = jsonschema::options()
            .with_retriever(OfflineRetriever {
                index: Arc::clone(&self.index),
            })
            .with_base_uri(file.uri.clone())
            .with_pattern_options(jsonschema::PatternOptions::regex())
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

    /// A raw schema handed back by this set, as served, and the URI it is known by (found by
    /// identity); a schema from elsewhere is taken as is, as if it sat in `schemas/input/`.
    pub(super) fn located<'a>(&'a self, schema: &'a Value) -> (&'a Value, String) {
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

/// The steps of [`SchemaSet::load`], in order.
impl Index {
    /// One schema file, parsed and indexed by its path (its folder added to `dirs`); a file
    /// whose path is refused, given twice, or that is no JSON is reported in `errors` (no JSON:
    /// kept in [`Index::broken`]).
    fn add_file(
        &mut self,
        file: SchemaFile,
        dirs: &mut BTreeSet<String>,
        errors: &mut Vec<ContractError>,
    ) {
        let rel = match relative_schema_path(&file.path) {
            Ok(rel) => rel,
            Err(error) => {
                errors.push(error);
                return;
            }
        };
        let Some(uri) = path_uri(&rel) else {
            errors.push(ContractError::compile(
                &file.path,
                "the file name cannot be made into a uri",
            ));
            return;
        };
        if self.by_rel.contains_key(&rel) || self.broken.contains_key(&uri) {
            errors.push(ContractError::compile(
                &file.path,
                "schema file given twice",
            ));
            return;
        }
        if let Some((dir, _)) = rel.rsplit_once('/') {
            dirs.insert(dir.to_string());
        }
        match serde_json::from_str::<Value>(&file.text) {
            Ok(value) => {
                let at = self.files.len();
                self.by_rel.insert(rel.clone(), at);
                self.by_uri.insert(uri.clone(), (at, String::new()));
                self.files.push(Loaded {
                    path: file.path,
                    rel,
                    uri,
                    served: Value::Null,
                    value,
                    bytes: file.text.len(),
                });
            }
            Err(error) => {
                self.broken.insert(uri, rel);
                errors.push(json_error(file.path, &error));
            }
        }
    }

    /// Aliases by `$id` (a defs file's relative `$id` also seen from each schema folder). A real
    /// file path always wins over an alias; an `$id` that is no URI reference, or that another
    /// file claims, is reported in `errors`.
    fn alias_ids(&mut self, dirs: &BTreeSet<String>, errors: &mut Vec<ContractError>) {
        let mut aliases: BTreeMap<String, usize> = BTreeMap::new();
        for (at, file) in self.files.iter().enumerate() {
            let Some(id) = root_id(&file.value) else {
                continue;
            };
            let Some(targets) = id_targets(file, id, dirs) else {
                errors.push(ContractError::compile(
                    &file.path,
                    format!("$id \"{id}\" is not a valid uri reference"),
                ));
                continue;
            };
            if let Some(message) = self.claim(at, id, targets, &mut aliases) {
                errors.push(ContractError::compile(&file.path, message));
            }
        }
        self.by_uri.extend(
            aliases
                .into_iter()
                .map(|(uri, at)| (uri, (at, String::new()))),
        );
    }

    /// The `targets` of file `at`'s `$id` taken as its aliases where no file path or other alias
    /// has them; the last clash found, as a message (if any).
    fn claim(
        &self,
        at: usize,
        id: &str,
        targets: Vec<String>,
        aliases: &mut BTreeMap<String, usize>,
    ) -> Option<String> {
        let mut clash: Option<String> = None;
        for target in targets {
            let target = strip_fragment(&target).to_string();
            if let Some(&(owner, _)) = self.by_uri.get(&target) {
                // A real file path wins over an alias. Only an absolute `$id` naming another
                // file is worth reporting: a relative one seen from a sibling folder is not.
                if owner != at && has_scheme(id) {
                    clash = Some(format!(
                        "$id \"{id}\" is already the uri of {}",
                        self.files[owner].rel
                    ));
                }
                continue;
            }
            match aliases.get(&target) {
                Some(&other) if other != at => {
                    clash = Some(format!(
                        "$id \"{id}\" is also the $id of {}",
                        self.files[other].rel
                    ));
                }
                Some(_) => {}
                None => {
                    aliases.insert(target, at);
                }
            }
        }
        clash
    }

    /// Embedded resources (a subschema with its own `$id`), indexed where nothing else has the
    /// URI.
    fn index_embedded(&mut self) {
        let mut embedded = Vec::new();
        for (at, file) in self.files.iter().enumerate() {
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
            self.by_uri.entry(uri).or_insert(target);
        }
    }

    /// What jsonschema gets ([`Loaded::served`]): each file with every `$ref` absolute.
    fn serve_absolute_refs(&mut self) {
        let mut served = Vec::with_capacity(self.files.len());
        for file in &self.files {
            let mut edits = Vec::new();
            walk_schemas(
                &file.value,
                &file.uri,
                &mut String::new(),
                &mut |node, base, pointer| {
                    if let Some(literal) = node.get("$ref").and_then(Value::as_str)
                        && let Some(absolute) = self.absolute_ref(base, literal)
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
        for (file, value) in self.files.iter_mut().zip(served) {
            file.served = value;
        }
    }
}

/// The URIs a file's `$id` names, sorted and deduplicated: the `$id` resolved against the
/// file's URI, and for a defs file's relative `$id`, against each schema folder too. `None` if
/// it is not a valid URI reference.
fn id_targets(file: &Loaded, id: &str, dirs: &BTreeSet<String>) -> Option<Vec<String>> {
    let mut targets = vec![resolve(&file.uri, id)?];
    if file.rel.starts_with("schemas/defs/") && !has_scheme(id) {
        for dir in dirs {
            if let Some(resolved) = resolve(&format!("{ROOT_URI}{dir}/"), id) {
                targets.push(resolved);
            }
        }
    }
    targets.sort();
    targets.dedup();
    Some(targets)
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

    /// How many subschemas checking one value against `schema` (at base URI `base`) can visit:
    /// each path through `$ref`s and the keywords that apply subschemas counts, so a schema
    /// reached twice from one place counts twice; a `$ref` back into its own path (recursion,
    /// which follows the value's depth) counts once. Counted once per node (a DAG's paths, in
    /// linear time), saturating just past `limit`, and `limit + 1` past a nesting of 256.
    pub(super) fn fan_out(&self, schema: &Value, base: &str, limit: u64) -> u64 {
        let mut memo = std::collections::HashMap::new();
        let mut path = std::collections::HashSet::new();
        self.visits(schema, base, limit, 0, &mut memo, &mut path)
    }

    fn visits(
        &self,
        node: &Value,
        base: &str,
        limit: u64,
        depth: usize,
        memo: &mut std::collections::HashMap<*const Value, u64>,
        path: &mut std::collections::HashSet<*const Value>,
    ) -> u64 {
        const APPLIES_ONE: [&str; 11] = [
            "not",
            "if",
            "then",
            "else",
            "items",
            "additionalItems",
            "contains",
            "additionalProperties",
            "unevaluatedItems",
            "unevaluatedProperties",
            "propertyNames",
        ];
        const APPLIES_EACH: [&str; 5] = ["allOf", "anyOf", "oneOf", "prefixItems", "items"];
        const APPLIES_VALUES: [&str; 4] = [
            "properties",
            "patternProperties",
            "dependentSchemas",
            "dependencies",
        ];
        let Value::Object(object) = node else {
            return 1;
        };
        let key = node as *const Value;
        if let Some(&n) = memo.get(&key) {
            return n;
        }
        if depth > 256 {
            return limit + 1;
        }
        if !path.insert(key) {
            return 1;
        }
        let base = super::refs::enter(base, node);
        let mut total: u64 = 1;
        let mut add = |n: u64| total = total.saturating_add(n).min(limit + 1);
        for keyword in ["$ref", "$dynamicRef", "$recursiveRef"] {
            if let Some(reference) = object.get(keyword).and_then(Value::as_str)
                && let Some((target, target_base)) = self.lookup(&base, reference)
            {
                add(self.visits(target, &target_base, limit, depth + 1, memo, path));
            }
        }
        for keyword in APPLIES_ONE {
            if let Some(child) = object.get(keyword).filter(|c| c.is_object()) {
                add(self.visits(child, &base, limit, depth + 1, memo, path));
            }
        }
        for keyword in APPLIES_EACH {
            if let Some(Value::Array(items)) = object.get(keyword) {
                for child in items {
                    add(self.visits(child, &base, limit, depth + 1, memo, path));
                }
            }
        }
        for keyword in APPLIES_VALUES {
            if let Some(Value::Object(map)) = object.get(keyword) {
                for child in map.values().filter(|c| c.is_object()) {
                    add(self.visits(child, &base, limit, depth + 1, memo, path));
                }
            }
        }
        path.remove(&key);
        memo.insert(key, total);
        total
    }

    /// Resolve `reference` against `base` to a schema in this set (as served to jsonschema) and
    /// the base URI outside it.
    pub(super) fn lookup(&self, base: &str, reference: &str) -> Option<(&Value, String)> {
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

/// The most subschemas checking one value against a contract may take ([`Index::fan_out`]):
/// far above any contract written by hand (the shipped skills' largest takes 20), far below
/// what makes a check take seconds.
pub(super) const MAX_FAN_OUT: u64 = 100_000;

/// Where upstream Bands keeps a script's own files (`run.sh`, co-located schemas).
pub(super) const COLOCATED_DIR: &str = "scripts/resources";

/// `scripts/resources/<script>/{input,output}_schema.json`: upstream's co-located contracts.
fn is_colocated(parts: &[&str]) -> bool {
    matches!(parts, ["scripts", "resources", script, file]
        if !script.starts_with('.') && matches!(*file, "input_schema.json" | "output_schema.json"))
}

/// Check that `path` is a plain relative path under `schemas/` (or an upstream co-located
/// contract, see [`is_colocated`]), and return it `/`-separated.
fn relative_schema_path(path: &Path) -> Result<String, ContractError> {
    let mut parts = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => match part.to_str() {
                Some(part) => parts.push(part),
                None => return Err(ContractError::compile(path, "the file name is not utf-8")),
            },
            Component::CurDir => {}
            _ => {
                return Err(ContractError::compile(
                    path,
                    "a schema path must be relative to the skill root, under schemas/",
                ));
            }
        }
    }
    if parts.len() < 2 || parts[0] != SCHEMAS_DIR {
        if is_colocated(&parts) {
            return Ok(parts.join("/"));
        }
        return Err(ContractError::compile(
            path,
            "a schema file must be under schemas/ (or be upstream's scripts/resources/<script>/{input,output}_schema.json)",
        ));
    }
    Ok(parts.join("/"))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::testutil::*;
    use crate::diag::{Code, Loc};
    use pretty_assertions::assert_eq;
    use serde_json::json;

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

    /// A schema the draft's meta-schema refuses does not compile, whatever the input: it is
    /// checked against the meta-schema first (jsonschema's validators generated at build time,
    /// the `macros` feature).
    #[test]
    fn a_schema_the_meta_schema_refuses_does_not_compile() {
        let set = set(&[(
            "schemas/input/fetch.json",
            json!({"type": "object", "properties": {"repo": {"minLength": "three"}}}),
        )]);
        let error = set.compile("schemas/input/fetch.json").unwrap_err();
        assert_eq!(error.code(), Code::SchemaInvalid);
        assert_eq!(
            error.to_string(),
            "schemas/input/fetch.json: schema does not compile at /properties/repo/minLength: \
             \"three\" is not of type \"integer\""
        );
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

    /// Patterns run on the linear `regex` engine: a backreference (what made one `pattern`
    /// cost 19 ms a string on the backtracking engine) does not compile, and says which; a
    /// pattern that backtracks badly elsewhere (`^(a|aa)+$`) validates as it should.
    #[test]
    fn patterns_run_on_a_linear_engine() {
        let load = |pattern: &str| {
            SchemaSet::load(vec![SchemaFile {
                path: "schemas/output/x.json".into(),
                text: serde_json::json!({"type": "string", "pattern": pattern}).to_string(),
            }])
            .0
        };
        let Err(e) = load(r"^(a+)\1$").compile("schemas/output/x.json") else {
            panic!("a backreference compiled");
        };
        assert_eq!(e.code(), Code::SchemaInvalid, "{e}");
        let c = load("^(a|aa)+$")
            .compile("schemas/output/x.json")
            .expect("compiles");
        let long = format!("{}b", "a".repeat(4096));
        assert!(c.validate(&serde_json::json!(long)).is_err());
        assert!(c.validate(&serde_json::json!("aaaa")).is_ok());
    }

    /// A chain of `anyOf`s, each level reaching the next twice (red-team round 5: 28 levels of a
    /// 5 KB input contract took 5.7 s to check one value), is refused with why; the same depth
    /// reaching the next level once, and a recursive schema, compile.
    #[test]
    fn a_contract_whose_check_doubles_a_level_is_refused() {
        let chain = |depth: usize, twice: bool| {
            let mut defs = serde_json::Map::new();
            for k in 0..depth {
                let next = if k + 1 < depth {
                    serde_json::json!({"$ref": format!("#/$defs/l{}", k + 1)})
                } else {
                    serde_json::json!({"type": "string"})
                };
                let level = if twice {
                    serde_json::json!({"anyOf": [{"allOf": [next.clone(), {"maxLength": 0}]}, next]})
                } else {
                    serde_json::json!({"anyOf": [next, {"type": "null"}]})
                };
                defs.insert(format!("l{k}"), level);
            }
            let schema = serde_json::json!({
                "type": "object",
                "properties": {"text": {"$ref": "#/$defs/l0"}},
                "$defs": defs
            });
            SchemaSet::load(vec![SchemaFile {
                path: "schemas/input/x.json".into(),
                text: schema.to_string(),
            }])
            .0
        };
        let Err(e) = chain(28, true).compile("schemas/input/x.json") else {
            panic!("a doubling chain compiled");
        };
        assert_eq!(e.code(), Code::SchemaInvalid, "{e}");
        assert!(e.to_string().contains("more than 100000 subschemas"), "{e}");
        assert!(chain(28, false).compile("schemas/input/x.json").is_ok());
        assert!(chain(12, true).compile("schemas/input/x.json").is_ok());
        // A tree: recursion follows the value, and counts once.
        let tree = SchemaSet::load(vec![SchemaFile {
            path: "schemas/input/t.json".into(),
            text: r##"{"$defs":{"node":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}}}},"$ref":"#/$defs/node"}"##.into(),
        }])
        .0;
        assert!(tree.compile("schemas/input/t.json").is_ok());
    }

    /// Every shipped skill's contracts are far under the bound.
    #[test]
    fn the_shipped_contracts_are_far_under_the_fan_out_bound() {
        let skills = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("skills");
        let mut most = 0;
        for e in fs_err::read_dir(&skills).unwrap().flatten() {
            let (set, _) = SchemaSet::load_dir(&e.path());
            for &at in set.index.by_rel.values() {
                let f = &set.index.files[at];
                most = most.max(set.index.fan_out(&f.served, &f.uri, MAX_FAN_OUT));
            }
        }
        assert!(most > 1 && most < MAX_FAN_OUT / 100, "{most}");
    }
}
