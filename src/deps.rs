//! The Python packages a script declares, and the resolved lock its environment is built from.
//!
//! Pure: text in, data out. band-server builds the environment ([`docs/dependencies.md`]); this
//! module is what both sides read the same way:
//!
//! - [`declared`]: a script's dependencies, from its PEP 723 `# /// script` block
//!   (`dependencies = [...]`, `requires-python`), else a `pyproject.toml` (with the [`uv_lock`]
//!   beside it as its resolved set) or a `requirements.txt` beside it, else one at the skill's
//!   root (with or without `--hash=` options);
//! - [`Declared::digest`]: one number for the declared set (what `band.lock` records);
//! - [`resolved_from_report`]: pip's installation report (`pip install --dry-run --report`) as
//!   resolved entries; [`lock_text`]: the resolved lock (`name==version --hash=sha256:…` lines) an
//!   environment is built from with `--require-hashes`, whose SHA-256 names it.
//!
//! [`docs/dependencies.md`]: https://github.com/band/band/blob/main/docs/dependencies.md

/// The name of the requirements file band reads, beside the script or at the skill's root.
pub const REQUIREMENTS: &str = "requirements.txt";
/// A Python project's manifest: its `[project] dependencies`, beside the script or at the root.
pub const PYPROJECT: &str = "pyproject.toml";
/// uv's lock, beside its `pyproject.toml`: the resolved set, each wheel pinned by its hash.
pub const UV_LOCK: &str = "uv.lock";

/// Where a declaration was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The script's own `# /// script` block.
    Pep723 { script: String },
    /// A requirements file (its path in the skill).
    Requirements { path: String },
    /// A `pyproject.toml`'s `[project] dependencies`, as the `uv.lock` beside it pins them when
    /// there is one (`lock`: its path).
    Pyproject { path: String, lock: Option<String> },
}

impl Source {
    /// The skill path the declaration is in.
    pub fn path(&self) -> &str {
        match self {
            Source::Pep723 { script } => script,
            Source::Requirements { path } => path,
            Source::Pyproject { path, .. } => path,
        }
    }

    /// The file that pins the packages (and whose lines a requirement's `line` counts): the
    /// `uv.lock` of a pyproject.toml that has one, else [`Source::path`].
    pub fn pins(&self) -> &str {
        match self {
            Source::Pyproject {
                lock: Some(lock), ..
            } => lock,
            _ => self.path(),
        }
    }
}

/// One declared requirement: a PEP 508 specifier (`pandas>=2`, `attrs==23.1.0`) and the
/// `sha256` hashes a requirements file pins it to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub spec: String,
    pub hashes: Vec<String>,
    /// 1-based line of the declaration.
    pub line: usize,
}

impl Requirement {
    /// The distribution's name as written (`Pandas` in `Pandas[excel]>=2`).
    pub fn name(&self) -> &str {
        package_name(&self.spec)
    }

    /// `name==version` with nothing else: an exact pin.
    fn exact(&self) -> bool {
        let pin = self.spec.split(';').next().unwrap_or("");
        pin.split_once("==").is_some_and(|(n, v)| {
            n.trim() == self.name()
                && !v.trim().is_empty()
                && v.trim()
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '!' | '-' | '_'))
        })
    }
}

/// A script's declared dependencies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declared {
    pub source: Source,
    pub requires_python: Option<String>,
    pub requirements: Vec<Requirement>,
}

/// A declaration band cannot use: where, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}:{line}: {message}")]
pub struct DepsError {
    pub path: String,
    pub line: usize,
    pub message: String,
    pub hint: String,
}

/// The distribution name at the start of a PEP 508 specifier.
pub fn package_name(spec: &str) -> &str {
    let spec = spec.trim_start();
    let end = spec
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')))
        .unwrap_or(spec.len());
    &spec[..end]
}

/// The normalized name of a distribution (PEP 503: lowercase, runs of `-_.` as one `-`).
pub fn normalize_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut sep = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            sep = true;
        } else {
            if sep && !out.is_empty() {
                out.push('-');
            }
            sep = false;
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// The dependencies the script at `entry` declares. `file` reads a skill file by its path
/// (`None`: not in the skill). A script's own block wins over a requirements file; a
/// requirements file beside the script over one at the root. `Ok(None)`: nothing declared.
pub fn declared(
    entry: &str,
    file: &dyn Fn(&str) -> Option<Vec<u8>>,
) -> Result<Option<Declared>, DepsError> {
    if let Some(bytes) = file(entry)
        && let Ok(text) = std::str::from_utf8(&bytes)
        && let Some(d) = pep723(entry, text)?
    {
        return Ok(Some(d));
    }
    let beside = match entry.rsplit_once('/') {
        Some((dir, _)) => format!("{dir}/{REQUIREMENTS}"),
        None => REQUIREMENTS.to_string(),
    };
    for path in [beside.as_str(), REQUIREMENTS] {
        let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
        let manifest = in_dir(dir, PYPROJECT);
        if let Some(bytes) = file(&manifest) {
            let lock_path = in_dir(dir, UV_LOCK);
            let lock = file(&lock_path);
            if let Some(d) = pyproject(
                &manifest,
                &bytes,
                lock.as_deref().map(|l| (lock_path.as_str(), l)),
            )? {
                return Ok(Some(d));
            }
        }
        if let Some(bytes) = file(path) {
            let text = std::str::from_utf8(&bytes).map_err(|_| DepsError {
                path: path.to_string(),
                line: 1,
                message: "not UTF-8 text".into(),
                hint: "a requirements file is text, one requirement a line".into(),
            })?;
            return Ok(Some(Declared {
                source: Source::Requirements {
                    path: path.to_string(),
                },
                requires_python: None,
                requirements: requirements(path, text)?,
            }));
        }
    }
    Ok(None)
}

/// The `# /// script` block of a Python script (PEP 723), parsed; `Ok(None)` without one.
pub fn pep723(path: &str, text: &str) -> Result<Option<Declared>, DepsError> {
    let lines: Vec<&str> = text.lines().collect();
    let Some(start) = lines.iter().position(|l| l.trim_end() == "# /// script") else {
        return Ok(None);
    };
    let err = |line: usize, message: String, hint: &str| DepsError {
        path: path.to_string(),
        line,
        message,
        hint: hint.to_string(),
    };
    let mut body = String::new();
    let mut end = None;
    for (i, l) in lines.iter().enumerate().skip(start + 1) {
        if l.trim_end() == "# ///" {
            end = Some(i);
            break;
        }
        let content = if *l == "#" {
            ""
        } else if let Some(c) = l.strip_prefix("# ") {
            c
        } else {
            return Err(err(
                i + 1,
                "a line of the `# /// script` block does not start with `# `".into(),
                "every line of the block is a comment: `# dependencies = [\"pandas\"]`, closed by `# ///`",
            ));
        };
        body.push_str(content);
        body.push('\n');
    }
    let Some(end) = end else {
        return Err(err(
            start + 1,
            "the `# /// script` block is not closed".into(),
            "end the block with a line `# ///`",
        ));
    };
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "kebab-case")]
    struct Block {
        #[serde(default)]
        dependencies: Vec<String>,
        requires_python: Option<String>,
        #[serde(default)]
        tool: Option<toml::Table>,
    }
    let block: Block = toml::from_str(&body).map_err(|e| {
        err(
            start + 1,
            format!(
                "the `# /// script` block is not valid TOML: {}",
                e.message()
            ),
            "PEP 723: `# dependencies = [\"pandas>=2\"]` and `# requires-python = \">=3.11\"`",
        )
    })?;
    let _ = block.tool;
    let mut reqs = Vec::new();
    for spec in block.dependencies {
        // The line of the block that names it, for the messages.
        let line = (start + 1..end)
            .find(|&i| lines[i].contains(&format!("\"{spec}\"")))
            .map_or(start + 1, |i| i + 1);
        check_spec(path, line, &spec)?;
        reqs.push(Requirement {
            spec: spec.trim().to_string(),
            hashes: Vec::new(),
            line,
        });
    }
    Ok(Some(Declared {
        source: Source::Pep723 {
            script: path.to_string(),
        },
        requires_python: block.requires_python.map(|s| s.trim().to_string()),
        requirements: reqs,
    }))
}

/// A requirement band can hand pip: a distribution by name with its version specifiers,
/// extras and markers; not an option, a path or a URL (the package index is band-server's).
fn check_spec(path: &str, line: usize, spec: &str) -> Result<(), DepsError> {
    let s = spec.trim();
    let err = |message: String, hint: &str| DepsError {
        path: path.to_string(),
        line,
        message,
        hint: hint.to_string(),
    };
    let name = package_name(s);
    if name.is_empty() || !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err(err(
            format!("`{s}` is not a package requirement"),
            "name a package and its versions: `pandas>=2`, `requests==2.31.0`",
        ));
    }
    let rest = s[name.len()..].split(';').next().unwrap_or("");
    if rest.contains('@') || rest.contains("://") {
        return Err(err(
            format!("`{s}`: a direct reference (a URL or a path) is not supported"),
            "name the package by version; band-server installs from its package index ([deps] in server.toml)",
        ));
    }
    if s.chars().any(char::is_control) {
        return Err(err(
            "a requirement holds a control character".into(),
            "one requirement a line",
        ));
    }
    Ok(())
}

/// The requirements of a requirements file: one a line, `\` continues a line, `#` starts a
/// comment, `--hash=sha256:<hex>` pins a requirement to the files it may be installed from.
/// Every other option is refused: the package index is band-server's, and band reads no other
/// file.
pub fn requirements(path: &str, text: &str) -> Result<Vec<Requirement>, DepsError> {
    let mut out = Vec::new();
    let mut logical = String::new();
    let mut first = 0;
    for (i, raw) in text.lines().enumerate() {
        if logical.is_empty() {
            first = i + 1;
        }
        let l = match raw.find(" #").or_else(|| raw.starts_with('#').then_some(0)) {
            Some(at) => &raw[..at],
            None => raw,
        };
        if let Some(cont) = l.trim_end().strip_suffix('\\') {
            logical.push_str(cont);
            logical.push(' ');
            continue;
        }
        logical.push_str(l);
        let whole = std::mem::take(&mut logical);
        if let Some(r) = requirement_line(path, first, &whole)? {
            out.push(r);
        }
    }
    if !logical.trim().is_empty()
        && let Some(r) = requirement_line(path, first, &logical)?
    {
        out.push(r);
    }
    Ok(out)
}

fn requirement_line(path: &str, line: usize, text: &str) -> Result<Option<Requirement>, DepsError> {
    let err = |message: String, hint: &str| DepsError {
        path: path.to_string(),
        line,
        message,
        hint: hint.to_string(),
    };
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let mut spec = String::new();
    let mut hashes = Vec::new();
    let mut words = text.split_whitespace().peekable();
    while let Some(w) = words.next() {
        if let Some(h) = w
            .strip_prefix("--hash=")
            .or_else(|| (w == "--hash").then(|| words.next()).flatten())
        {
            let Some(hex) = h.strip_prefix("sha256:") else {
                return Err(err(
                    format!("`--hash={h}`: only sha256 hashes are accepted"),
                    "pin each file by `--hash=sha256:<64 hex digits>` (pip hash, pip-compile --generate-hashes)",
                ));
            };
            if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(err(
                    format!("`--hash={h}` is not a SHA-256 (64 hex digits)"),
                    "pin each file by `--hash=sha256:<64 hex digits>`",
                ));
            }
            hashes.push(hex.to_ascii_lowercase());
        } else if w.starts_with('-') {
            return Err(err(
                format!("the option `{w}` is not supported in a skill's requirements"),
                "list packages only (with `--hash=sha256:…` if pinned); band-server's config names the package index ([deps] index_url, find_links)",
            ));
        } else {
            if !spec.is_empty() {
                spec.push(' ');
            }
            spec.push_str(w);
        }
    }
    if spec.is_empty() {
        return Err(err(
            "`--hash` without a requirement".into(),
            "write the requirement and its hashes on one line (or continue it with `\\`)",
        ));
    }
    check_spec(path, line, &spec)?;
    hashes.sort();
    hashes.dedup();
    Ok(Some(Requirement { spec, hashes, line }))
}

/// The `requirements.txt` `band wrap --with PKG` writes for the packages only a skill's prose
/// names ("pip install pandas"): one a line, each checked as a requirement file's line is.
pub fn requirements_file(packages: &[String]) -> Result<String, DepsError> {
    let mut out = String::from(
        "# The Python packages this skill's scripts need (band wrap --with); band-server builds\n# their environment: docs/dependencies.md.\n",
    );
    for (i, p) in packages.iter().enumerate() {
        let line = requirement_line(REQUIREMENTS, i + 1, p)?;
        match line {
            Some(r) if !p.contains('\n') && !p.contains('#') && r.hashes.is_empty() => {
                out.push_str(&r.spec);
                out.push('\n');
            }
            _ => {
                return Err(DepsError {
                    path: REQUIREMENTS.into(),
                    line: i + 1,
                    message: format!("`{p}` is not one package requirement"),
                    hint: "pass one package a --with: `--with pandas --with 'requests>=2'`".into(),
                });
            }
        }
    }
    Ok(out)
}

/// A `pyproject.toml`'s declared packages: with the `uv.lock` beside it (`lock`: its path and
/// bytes), the packages the lock installs for the project, each pinned to its wheels' hashes (no
/// resolution); without one, its `[project] dependencies`, resolved as a requirements file's are.
/// `Ok(None)`: no `[project]`, or one that needs no package.
pub fn pyproject(
    path: &str,
    bytes: &[u8],
    lock: Option<(&str, &[u8])>,
) -> Result<Option<Declared>, DepsError> {
    let err = |line: usize, message: String, hint: &str| DepsError {
        path: path.to_string(),
        line,
        message,
        hint: hint.to_string(),
    };
    let text = std::str::from_utf8(bytes)
        .map_err(|_| err(1, "not UTF-8 text".into(), "pyproject.toml is TOML text"))?;
    #[derive(serde::Deserialize)]
    struct Manifest {
        project: Option<Project>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "kebab-case")]
    struct Project {
        name: Option<String>,
        #[serde(default)]
        dependencies: Vec<String>,
        requires_python: Option<String>,
    }
    let m: Manifest = toml::from_str(text).map_err(|e| {
        err(
            line_at(text, e.span().map_or(0, |s| s.start)),
            format!("not valid TOML: {}", e.message()),
            "pyproject.toml: `[project]` with `dependencies = [\"pandas>=2\"]`",
        )
    })?;
    let Some(project) = m.project else {
        return Ok(None);
    };
    let mut wanted = Vec::new();
    for spec in &project.dependencies {
        let line = text
            .lines()
            .position(|l| l.contains(&format!("\"{spec}\"")) || l.contains(&format!("'{spec}'")))
            .map_or(1, |i| i + 1);
        check_spec(path, line, spec)?;
        wanted.push(Requirement {
            spec: spec.trim().to_string(),
            hashes: Vec::new(),
            line,
        });
    }
    let (requirements, requires_python, lock_path) = match lock {
        Some((lock_path, lock)) => {
            let l = uv_lock(lock_path, lock, project.name.as_deref(), &wanted)?;
            (
                l.requirements,
                project.requires_python.or(l.requires_python),
                Some(lock_path.to_string()),
            )
        }
        None => (wanted, project.requires_python, None),
    };
    if requirements.is_empty() {
        return Ok(None);
    }
    Ok(Some(Declared {
        source: Source::Pyproject {
            path: path.to_string(),
            lock: lock_path,
        },
        requires_python: requires_python.map(|s| s.trim().to_string()),
        requirements,
    }))
}

/// The 1-based line of byte `at` in `text`.
fn line_at(text: &str, at: usize) -> usize {
    text.get(..at).map_or(1, |t| t.matches('\n').count() + 1)
}

/// What a `uv.lock` installs for its project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UvLocked {
    /// `name==version` (with `; marker` when only some platforms need it), pinned by the sha256
    /// of each of its wheels.
    pub requirements: Vec<Requirement>,
    /// The lock's top-level `requires-python`.
    pub requires_python: Option<String>,
}

/// The most states [`uv_lock`] walks (a package reached by a path with a marker is one): a lock
/// that needs more is refused, not walked for ever.
const MAX_UV_STATES: usize = 100_000;

/// A `uv.lock` (format `version = 1`, as uv 0.5 and later write it) read for its project, the
/// package whose `source` is `{ editable = "." }` or `{ virtual = "." }`: the packages reachable
/// from the project's own `dependencies` (and the extras they name), never its dev ones, each an
/// exact pin with its wheels' hashes (band installs wheels only). The project's `requires-dist`
/// must name the packages of `wanted` (its pyproject.toml's dependencies): a stale lock is refused.
/// Every package must come from a registry with at least one wheel.
pub fn uv_lock(
    path: &str,
    bytes: &[u8],
    project: Option<&str>,
    wanted: &[Requirement],
) -> Result<UvLocked, DepsError> {
    use std::collections::{BTreeMap, BTreeSet};
    let relock = "run `uv lock` in its folder, then `band lock`";
    let err = |line: usize, message: String, hint: &str| DepsError {
        path: path.to_string(),
        line,
        message,
        hint: hint.to_string(),
    };
    let text = std::str::from_utf8(bytes).map_err(|_| err(1, "not UTF-8 text".into(), relock))?;
    let v: toml::Table = toml::from_str(text).map_err(|e| {
        err(
            line_at(text, e.span().map_or(0, |s| s.start)),
            format!("not valid TOML: {}", e.message()),
            relock,
        )
    })?;
    let line_of = |needle: &str| {
        text.lines()
            .position(|l| l.trim() == needle)
            .map_or(1, |i| i + 1)
    };
    if v.get("version").and_then(toml::Value::as_integer) != Some(1) {
        return Err(err(
            line_of(&format!(
                "version = {}",
                v.get("version")
                    .and_then(toml::Value::as_integer)
                    .map_or(String::new(), |x| x.to_string())
            )),
            "its `version` is not 1 (the format uv 0.5 and later write)".into(),
            relock,
        ));
    }
    let requires_python = v
        .get("requires-python")
        .and_then(toml::Value::as_str)
        .map(str::to_string);
    let empty = Vec::new();
    let packages = v
        .get("package")
        .and_then(toml::Value::as_array)
        .unwrap_or(&empty);
    let s = |t: &toml::Value, k: &str| t.get(k).and_then(toml::Value::as_str).map(str::to_string);
    let pkg_line = |name: &str, version: &str| {
        let lines: Vec<&str> = text.lines().collect();
        let want = format!("name = \"{name}\"");
        let ver = format!("version = \"{version}\"");
        (0..lines.len())
            .find(|&i| lines[i].trim() == want && lines.get(i + 1).is_some_and(|l| l.trim() == ver))
            .or_else(|| lines.iter().position(|l| l.trim() == want))
            .map_or(1, |i| i + 1)
    };
    // The project: its own source is the folder of the lock.
    let is_root = |p: &toml::Value| {
        p.get("source").is_some_and(|src| {
            ["editable", "virtual"]
                .iter()
                .any(|k| src.get(*k).and_then(toml::Value::as_str) == Some("."))
        })
    };
    let roots: Vec<usize> = (0..packages.len())
        .filter(|&i| is_root(&packages[i]))
        .collect();
    let root = match (roots.as_slice(), project) {
        ([one], _) => *one,
        (_, Some(name)) => *roots
            .iter()
            .find(|&&i| {
                s(&packages[i], "name").map(|n| normalize_name(&n)) == Some(normalize_name(name))
            })
            .ok_or_else(|| {
                err(
                    1,
                    format!(
                        "it has no entry for the project {name} (`source = {{ editable = \".\" }}`)"
                    ),
                    relock,
                )
            })?,
        _ => {
            return Err(err(
                1,
                "it has no entry for its project (`source = { editable = \".\" }` or `{ virtual = \".\" }`)".into(),
                relock,
            ));
        }
    };
    // The lock is the manifest's: the project's `requires-dist` names its dependencies.
    if let Some(dist) = packages[root]
        .get("metadata")
        .and_then(|m| m.get("requires-dist"))
        .and_then(toml::Value::as_array)
    {
        let locked: BTreeSet<String> = dist
            .iter()
            .filter(|d| {
                d.get("marker")
                    .and_then(toml::Value::as_str)
                    .is_none_or(|m| !m.contains("extra =="))
            })
            .filter_map(|d| s(d, "name"))
            .map(|n| normalize_name(&n))
            .collect();
        let manifest: BTreeSet<String> = wanted.iter().map(|r| normalize_name(r.name())).collect();
        if locked != manifest {
            return Err(err(
                line_of("requires-dist = ["),
                "it does not match the dependencies of the pyproject.toml beside it".into(),
                relock,
            ));
        }
    }
    let mut by_name: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, p) in packages.iter().enumerate() {
        if let Some(n) = s(p, "name") {
            by_name.entry(normalize_name(&n)).or_default().push(i);
        }
    }
    // A dependency's entry: by name, and by version when the lock has several of that name (a
    // resolution forked by markers).
    let target = |d: &toml::Value| -> Result<usize, DepsError> {
        let name = s(d, "name").unwrap_or_default();
        let all = by_name
            .get(&normalize_name(&name))
            .map_or(&[][..], Vec::as_slice);
        let found = match s(d, "version") {
            Some(ver) => all
                .iter()
                .find(|&&i| s(&packages[i], "version").as_deref() == Some(ver.as_str()))
                .copied(),
            None if all.len() == 1 => Some(all[0]),
            None => None,
        };
        found.ok_or_else(|| {
            err(
                line_of(&format!("name = \"{name}\"")),
                format!("a dependency on {name} names no single package of the lock"),
                relock,
            )
        })
    };
    let and = |a: &Option<String>, b: Option<String>| match (a, b) {
        (None, b) => b,
        (Some(a), None) => Some(a.clone()),
        (Some(a), Some(b)) if *a == b => Some(b),
        (Some(a), Some(b)) => Some(format!("({a}) and ({b})")),
    };
    // Walk: (package, the marker of the path to it, the extras it is asked for).
    type State = (usize, Option<String>, BTreeSet<String>);
    let mut seen: BTreeSet<State> = BTreeSet::new();
    let mut work: Vec<State> = vec![(root, None, BTreeSet::new())];
    let mut markers: BTreeMap<usize, BTreeSet<Option<String>>> = BTreeMap::new();
    while let Some((i, marker, extras)) = work.pop() {
        if !seen.insert((i, marker.clone(), extras.clone())) {
            continue;
        }
        if seen.len() > MAX_UV_STATES {
            return Err(err(
                1,
                "its dependency graph is too large for band to read".into(),
                relock,
            ));
        }
        if i != root {
            markers.entry(i).or_default().insert(marker.clone());
        }
        let p = &packages[i];
        let mut edges: Vec<&toml::Value> = p
            .get("dependencies")
            .and_then(toml::Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_default();
        for e in &extras {
            if let Some(a) = p
                .get("optional-dependencies")
                .and_then(|o| o.get(e.as_str()))
                .and_then(toml::Value::as_array)
            {
                edges.extend(a.iter());
            }
        }
        for d in edges {
            let child = target(d)?;
            let mut m = and(&marker, s(d, "marker"));
            // A marker past this length is dropped (the package is installed whenever its
            // parent is): a cycle of markers ends.
            if m.as_ref().is_some_and(|m| m.len() > 2048) {
                m = marker.clone();
            }
            let ex: BTreeSet<String> = d
                .get("extra")
                .and_then(toml::Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            work.push((child, m, ex));
        }
    }
    let mut requirements = Vec::new();
    for (i, ms) in markers {
        let p = &packages[i];
        let name = s(p, "name").unwrap_or_default();
        let version = s(p, "version").unwrap_or_default();
        let line = pkg_line(&name, &version);
        let at = |message: String, hint: &str| DepsError {
            path: path.to_string(),
            line,
            message,
            hint: hint.to_string(),
        };
        let registry = p
            .get("source")
            .is_some_and(|src| src.get("registry").is_some());
        if !registry {
            let src = p
                .get("source")
                .and_then(toml::Value::as_table)
                .and_then(|t| t.iter().next())
                .map_or("none".into(), |(k, v)| {
                    format!("{k} = {:?}", v.as_str().unwrap_or("…"))
                });
            return Err(at(
                format!("{name} {version} is not from a package index (its source is {src})"),
                "band-server installs packages from its package index only ([deps] in server.toml); publish it, or vendor its code in the skill",
            ));
        }
        let mut hashes = Vec::new();
        for w in p
            .get("wheels")
            .and_then(toml::Value::as_array)
            .unwrap_or(&empty)
        {
            let h = s(w, "hash").unwrap_or_default();
            match h.strip_prefix("sha256:") {
                Some(hex) if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
                    hashes.push(hex.to_ascii_lowercase());
                }
                _ => {
                    return Err(at(
                        format!("a wheel of {name} {version} has no sha256 hash (`{h}`)"),
                        relock,
                    ));
                }
            }
        }
        if hashes.is_empty() {
            return Err(at(
                format!("{name} {version} has no wheel in the lock (only a source distribution)"),
                "band-server installs wheels only (no package's code runs while it is installed); pin a version published as a wheel",
            ));
        }
        hashes.sort();
        hashes.dedup();
        let marker = if ms.contains(&None) {
            None
        } else {
            let all: Vec<String> = ms.into_iter().flatten().collect();
            match all.as_slice() {
                [one] => Some(one.clone()),
                _ => Some(
                    all.iter()
                        .map(|m| format!("({m})"))
                        .collect::<Vec<_>>()
                        .join(" or "),
                ),
            }
        };
        let mut spec = format!("{}=={version}", normalize_name(&name));
        if let Some(m) = marker {
            spec.push_str(" ; ");
            spec.push_str(&m);
        }
        check_spec(path, line, &spec)?;
        requirements.push(Requirement { spec, hashes, line });
    }
    Ok(UvLocked {
        requirements,
        requires_python,
    })
}

impl Declared {
    /// Every requirement an exact `name==version` pinned by at least one hash: the declaration
    /// is its own resolved lock, and nothing is resolved.
    pub fn fully_hashed(&self) -> bool {
        !self.requirements.is_empty()
            && self
                .requirements
                .iter()
                .all(|r| r.exact() && !r.hashes.is_empty())
    }

    /// The declaration in a normal form, one requirement a line, sorted: what
    /// [`Declared::digest`] hashes and what pip reads (`-r`).
    pub fn normal_text(&self) -> String {
        let mut lines: Vec<String> = self
            .requirements
            .iter()
            .map(|r| {
                let mut l = r.spec.clone();
                for h in &r.hashes {
                    l.push_str(" --hash=sha256:");
                    l.push_str(h);
                }
                l
            })
            .collect();
        lines.sort();
        lines.dedup();
        let mut out = String::new();
        if let Some(p) = &self.requires_python {
            out.push_str("# requires-python ");
            out.push_str(p);
            out.push('\n');
        }
        for l in lines {
            out.push_str(&l);
            out.push('\n');
        }
        out
    }

    /// SHA-256 of [`Declared::normal_text`], hex: the declared set, whatever file it is in.
    pub fn digest(&self) -> String {
        sha256_hex(self.normal_text().as_bytes())
    }

    /// Whether the Python `version` (`3.11.2`) satisfies `requires-python`; `Err` names a
    /// specifier band does not understand.
    pub fn python_ok(&self, version: &str) -> Result<bool, String> {
        match &self.requires_python {
            None => Ok(true),
            Some(spec) => version_matches(version, spec),
        }
    }
}

/// One package of a resolved set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub name: String,
    pub version: String,
    /// The SHA-256 of the file pip would install, when the report has it.
    pub sha256: Option<String>,
    /// Where pip found it.
    pub url: String,
}

/// The packages of pip's installation report (`pip install --dry-run --report FILE`, format
/// version 1), in its order.
pub fn resolved_from_report(report: &[u8]) -> Result<Vec<Resolved>, String> {
    let v: serde_json::Value =
        serde_json::from_slice(report).map_err(|e| format!("pip's report is not JSON: {e}"))?;
    let install = v
        .get("install")
        .and_then(|i| i.as_array())
        .ok_or("pip's report has no `install` list")?;
    let mut out = Vec::new();
    for item in install {
        let s = |ptr: &str| {
            item.pointer(ptr)
                .and_then(|x| x.as_str())
                .map(str::to_string)
        };
        let name = s("/metadata/name").ok_or("a package of pip's report has no name")?;
        let version = s("/metadata/version").ok_or("a package of pip's report has no version")?;
        let url = s("/download_info/url").unwrap_or_default();
        let sha256 = s("/download_info/archive_info/hashes/sha256").or_else(|| {
            s("/download_info/archive_info/hash")
                .and_then(|h| h.strip_prefix("sha256=").map(str::to_string))
        });
        let sha256 = match sha256 {
            Some(h) if h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()) => {
                Some(h.to_ascii_lowercase())
            }
            Some(h) => return Err(format!("pip's report has a bad hash `{h}` for {name}")),
            None => None,
        };
        out.push(Resolved {
            name,
            version,
            sha256,
            url,
        });
    }
    Ok(out)
}

/// The resolved lock: one `name==version --hash=sha256:<hex>` line per package, sorted by
/// normalized name. `Err` names a package without a hash.
pub fn lock_text(resolved: &[Resolved]) -> Result<String, String> {
    let mut lines = Vec::new();
    for r in resolved {
        let h = r
            .sha256
            .as_deref()
            .ok_or_else(|| format!("{}=={} has no sha256 hash", r.name, r.version))?;
        lines.push((
            normalize_name(&r.name),
            format!(
                "{}=={} --hash=sha256:{h}",
                normalize_name(&r.name),
                r.version
            ),
        ));
    }
    lines.sort();
    lines.dedup();
    Ok(lines.into_iter().map(|(_, l)| l + "\n").collect())
}

/// The resolved lock of a [`Declared::fully_hashed`] declaration: itself, in the lock's form.
pub fn lock_of_hashed(d: &Declared) -> String {
    let mut lines: Vec<(String, String)> = d
        .requirements
        .iter()
        .map(|r| {
            // `name==version ; marker` (a uv.lock's package needed on some platforms only):
            // pip reads the marker and leaves out what this Python does not need.
            let (pin, marker) = r.spec.split_once(';').unwrap_or((&r.spec, ""));
            let (name, version) = pin.split_once("==").unwrap_or((pin, ""));
            let n = normalize_name(name.trim());
            let mut l = format!("{n}=={}", version.trim());
            if !marker.trim().is_empty() {
                l.push_str(" ; ");
                l.push_str(marker.trim());
            }
            for h in &r.hashes {
                l.push_str(" --hash=sha256:");
                l.push_str(h);
            }
            (n, l)
        })
        .collect();
    lines.sort();
    lines.dedup();
    lines.into_iter().map(|(_, l)| l + "\n").collect()
}

/// SHA-256 of `bytes`, lowercase hex (the one definition is the lock's).
pub use crate::lock::sha256_hex;

/// A Node package's manifest, beside a script or at the skill's root.
pub const PACKAGE_JSON: &str = "package.json";
/// npm's lock, beside its `package.json`: the resolved set, each package pinned by its
/// `integrity` hash.
pub const PACKAGE_LOCK: &str = "package-lock.json";

/// The Node packages a script's `package.json` declares, as its `package-lock.json` pins them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeDeclared {
    /// The folder of the `package.json` in the skill (`""`: the root; `scripts`).
    pub dir: String,
    pub package_json: Vec<u8>,
    pub lock: Vec<u8>,
    /// The packages `npm ci --omit=dev` installs, in the lock's order.
    pub packages: Vec<NodePackage>,
}

/// One package of a `package-lock.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePackage {
    /// Its name (`left-pad`, `@scope/x`).
    pub name: String,
    pub version: String,
    /// Its `integrity` (`sha512-<base64>`).
    pub integrity: String,
}

impl NodeDeclared {
    /// `<dir>/package-lock.json`.
    pub fn lock_path(&self) -> String {
        in_dir(&self.dir, PACKAGE_LOCK)
    }

    /// `<dir>/package.json`.
    pub fn manifest_path(&self) -> String {
        in_dir(&self.dir, PACKAGE_JSON)
    }

    /// SHA-256 of the lock's bytes, hex: what `band.lock` records and what names its
    /// environment.
    pub fn digest(&self) -> String {
        sha256_hex(&self.lock)
    }

    /// Where its `node_modules` is in the sandbox: beside its `package.json` in `/skill`.
    pub fn sandbox_node_modules(&self) -> String {
        match self.dir.as_str() {
            "" => "/skill/node_modules".into(),
            d => format!("/skill/{d}/node_modules"),
        }
    }
}

fn in_dir(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

/// The Node packages the script at `entry` has: the `package.json` beside it, else the one at
/// the skill's root, with the `package-lock.json` beside that. `Ok(None)`: no `package.json`, or
/// one that declares no `dependencies` (a `devDependencies` is never installed). A `package.json`
/// with dependencies and no lock is refused: band installs a pinned set, never resolves one.
pub fn node_declared(
    entry: &str,
    file: &dyn Fn(&str) -> Option<Vec<u8>>,
) -> Result<Option<NodeDeclared>, DepsError> {
    let beside = entry.rsplit_once('/').map_or("", |(d, _)| d);
    let mut dirs = vec![beside];
    if !beside.is_empty() {
        dirs.push("");
    }
    for dir in dirs {
        if let Some(manifest) = file(&in_dir(dir, PACKAGE_JSON)) {
            let lock = file(&in_dir(dir, PACKAGE_LOCK));
            return node_lock(dir, &manifest, lock.as_deref());
        }
    }
    Ok(None)
}

/// A `package.json` and its lock, checked: lockfileVersion 2 or 3, the lock's root the
/// manifest's dependencies, every installed package pinned by a sha512 `integrity` and fetched
/// from a registry (not a folder, a link or a git repository).
pub fn node_lock(
    dir: &str,
    manifest: &[u8],
    lock: Option<&[u8]>,
) -> Result<Option<NodeDeclared>, DepsError> {
    let mpath = in_dir(dir, PACKAGE_JSON);
    let lpath = in_dir(dir, PACKAGE_LOCK);
    let err = |path: &str, line: usize, message: String, hint: String| DepsError {
        path: path.to_string(),
        line,
        message,
        hint,
    };
    let m: serde_json::Value = serde_json::from_slice(manifest).map_err(|e| {
        err(
            &mpath,
            e.line().max(1),
            format!("not valid JSON: {e}"),
            "package.json is npm's manifest: a JSON object".into(),
        )
    })?;
    let wanted = node_dependencies(&m);
    if wanted.is_empty() {
        return Ok(None);
    }
    let regen = format!(
        "run `npm install --package-lock-only` in the folder of {mpath} to write it, then `band lock`"
    );
    let Some(lock) = lock else {
        return Err(err(
            &mpath,
            1,
            format!("it declares dependencies and has no {PACKAGE_LOCK} beside it"),
            format!(
                "{regen} (band installs exactly a lock's packages, each by its integrity hash, and never resolves a version range)"
            ),
        ));
    };
    let text = String::from_utf8_lossy(lock);
    let line_of = |needle: &str| {
        text.lines()
            .position(|l| l.contains(needle))
            .map_or(1, |i| i + 1)
    };
    let l: serde_json::Value = serde_json::from_slice(lock).map_err(|e| {
        err(
            &lpath,
            e.line().max(1),
            format!("not valid JSON: {e}"),
            regen.clone(),
        )
    })?;
    let version = l.get("lockfileVersion").and_then(serde_json::Value::as_u64);
    if !matches!(version, Some(2 | 3)) {
        return Err(err(
            &lpath,
            line_of("lockfileVersion"),
            format!(
                "lockfileVersion {} is not supported (2 or 3: npm 7 and later)",
                version.map_or("(none)".into(), |v| v.to_string())
            ),
            regen,
        ));
    }
    let Some(packages) = l.get("packages").and_then(serde_json::Value::as_object) else {
        return Err(err(&lpath, 1, "it has no `packages`".into(), regen));
    };
    let root = packages.get("").map(node_dependencies).unwrap_or_default();
    if root != wanted {
        return Err(err(
            &lpath,
            1,
            format!("it does not match the dependencies of {mpath}"),
            regen,
        ));
    }
    let mut out = Vec::new();
    for (key, p) in packages {
        if key.is_empty() || p.get("dev").and_then(serde_json::Value::as_bool) == Some(true) {
            continue;
        }
        let name = p
            .get("name")
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| {
                key.rsplit_once("node_modules/")
                    .map_or(key.as_str(), |(_, n)| n)
                    .to_string()
            });
        let at = line_of(&format!("\"{key}\""));
        let s = |k: &str| p.get(k).and_then(serde_json::Value::as_str).unwrap_or("");
        if !key.starts_with("node_modules/") || p.get("link").is_some() {
            return Err(err(
                &lpath,
                at,
                format!("`{key}` is a folder of the project, not a package from a registry"),
                "band installs packages from band-server's npm registry only; publish it, or vendor its files in the skill".into(),
            ));
        }
        let resolved = s("resolved");
        let from_registry = ["https://", "http://"]
            .iter()
            .any(|s| resolved.starts_with(s));
        if !resolved.is_empty() && !from_registry {
            return Err(err(
                &lpath,
                at,
                format!("{name} is resolved from `{resolved}`, not from a registry"),
                "band installs packages from band-server's npm registry only ([deps] npm_registry in server.toml)".into(),
            ));
        }
        let integrity = s("integrity");
        if !integrity
            .split_whitespace()
            .any(|h| h.starts_with("sha512-"))
        {
            return Err(err(
                &lpath,
                at,
                format!("{name}@{} has no sha512 integrity hash", s("version")),
                format!("{regen} (npm 7 and later write one for every package)"),
            ));
        }
        out.push(NodePackage {
            name,
            version: s("version").to_string(),
            integrity: integrity.to_string(),
        });
    }
    if out.is_empty() {
        return Ok(None);
    }
    Ok(Some(NodeDeclared {
        dir: dir.to_string(),
        package_json: manifest.to_vec(),
        lock: lock.to_vec(),
        packages: out,
    }))
}

/// `dependencies` and `optionalDependencies` of a manifest (or of a lock's root), by name.
fn node_dependencies(v: &serde_json::Value) -> std::collections::BTreeMap<String, String> {
    ["dependencies", "optionalDependencies"]
        .iter()
        .filter_map(|k| v.get(*k).and_then(serde_json::Value::as_object))
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
        .collect()
}

/// Whether `version` satisfies a `requires-python` specifier set (`>=3.10,<4`, `==3.11.*`,
/// `~=3.9`). Release numbers only.
pub fn version_matches(version: &str, spec: &str) -> Result<bool, String> {
    let parse = |v: &str| -> Result<Vec<u64>, String> {
        v.trim()
            .split('.')
            .map(|p| {
                p.parse::<u64>()
                    .map_err(|_| format!("`{v}` is not a version"))
            })
            .collect()
    };
    let have = parse(version)?;
    let cmp = |a: &[u64], b: &[u64]| {
        let n = a.len().max(b.len());
        (0..n)
            .map(|i| {
                a.get(i)
                    .copied()
                    .unwrap_or(0)
                    .cmp(&b.get(i).copied().unwrap_or(0))
            })
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    };
    for clause in spec.split(',').map(str::trim).filter(|c| !c.is_empty()) {
        let (op, v) = ["~=", "==", "!=", ">=", "<=", ">", "<"]
            .iter()
            .find_map(|op| clause.strip_prefix(op).map(|v| (*op, v.trim())))
            .ok_or_else(|| format!("`{clause}` is not a version specifier"))?;
        let ok = if let Some(prefix) = v.strip_suffix(".*") {
            let p = parse(prefix)?;
            let starts = have.len() >= p.len() && have[..p.len()] == p[..];
            match op {
                "==" => starts,
                "!=" => !starts,
                _ => return Err(format!("`{clause}`: `.*` goes with == or != only")),
            }
        } else {
            let want = parse(v)?;
            let o = cmp(&have, &want);
            match op {
                "==" => o.is_eq(),
                "!=" => o.is_ne(),
                ">=" => o.is_ge(),
                "<=" => o.is_le(),
                ">" => o.is_gt(),
                "<" => o.is_lt(),
                _ => {
                    // ~=X.Y: >= X.Y and == X.*
                    let prefix = &want[..want.len().saturating_sub(1).max(1)];
                    o.is_ge() && have.len() >= prefix.len() && have[..prefix.len()] == *prefix
                }
            }
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    const H1: &str = "0f3d1bb1f2e6b2a5d7b4f1f9e0f7a2c93b8f1d6e5a4c3b2a1908f7e6d5c4b3a2";
    const H2: &str = "1f3d1bb1f2e6b2a5d7b4f1f9e0f7a2c93b8f1d6e5a4c3b2a1908f7e6d5c4b3a2";

    fn files<'a>(list: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<Vec<u8>> + 'a {
        move |p| {
            list.iter()
                .find(|(n, _)| *n == p)
                .map(|(_, t)| t.as_bytes().to_vec())
        }
    }

    const SCRIPT: &str = r#"#!/usr/bin/env python3
# /// script
# requires-python = ">=3.10"
# dependencies = [
#   "pandas>=2,<3",
#   "requests[socks]==2.31.0; python_version >= '3.8'",
# ]
#
# [tool.band]
# note = "ignored"
# ///
import pandas
"#;

    #[test]
    fn pep723_block_is_read_with_its_lines() {
        let d = pep723("scripts/a.py", SCRIPT).unwrap().unwrap();
        assert_eq!(d.requires_python.as_deref(), Some(">=3.10"));
        let specs: Vec<(&str, &str, usize)> = d
            .requirements
            .iter()
            .map(|r| (r.spec.as_str(), r.name(), r.line))
            .collect();
        assert_eq!(
            specs,
            [
                ("pandas>=2,<3", "pandas", 5),
                (
                    "requests[socks]==2.31.0; python_version >= '3.8'",
                    "requests",
                    6
                )
            ]
        );
        assert!(!d.fully_hashed());
        assert_eq!(
            d.source,
            Source::Pep723 {
                script: "scripts/a.py".into()
            }
        );
    }

    #[test]
    fn a_script_without_a_block_declares_nothing() {
        assert_eq!(
            pep723("a.py", "import sys\n# /// other\n# ///\n").unwrap(),
            None
        );
        let f = [("scripts/a.py", "print(1)\n")];
        assert_eq!(declared("scripts/a.py", &files(&f)).unwrap(), None);
    }

    #[test]
    fn bad_blocks_are_errors_with_their_line() {
        let open = "x = 1\n# /// script\n# dependencies = []\n";
        let e = pep723("a.py", open).unwrap_err();
        assert_eq!(
            (e.line, e.message.as_str()),
            (2, "the `# /// script` block is not closed")
        );
        let bad = "# /// script\n#dependencies = []\n# ///\n";
        assert_eq!(pep723("a.py", bad).unwrap_err().line, 2);
        let toml = "# /// script\n# dependencies = [pandas]\n# ///\n";
        assert!(
            pep723("a.py", toml)
                .unwrap_err()
                .message
                .contains("not valid TOML")
        );
        let url = "# /// script\n# dependencies = [\"x @ https://example.com/x.whl\"]\n# ///\n";
        let e = pep723("a.py", url).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("direct reference"), "{e}");
    }

    #[test]
    fn the_script_block_wins_then_beside_then_root() {
        let all = [
            ("scripts/a.py", SCRIPT),
            ("scripts/requirements.txt", "attrs\n"),
            ("requirements.txt", "six\n"),
        ];
        let d = declared("scripts/a.py", &files(&all)).unwrap().unwrap();
        assert!(matches!(d.source, Source::Pep723 { .. }));
        let beside = [
            ("scripts/b.py", "import attrs\n"),
            ("scripts/requirements.txt", "attrs\n"),
            ("requirements.txt", "six\n"),
        ];
        let d = declared("scripts/b.py", &files(&beside)).unwrap().unwrap();
        assert_eq!(d.source.path(), "scripts/requirements.txt");
        let root = [
            ("scripts/b.sh", "python3 -c 1\n"),
            ("requirements.txt", "six\n"),
        ];
        let d = declared("scripts/b.sh", &files(&root)).unwrap().unwrap();
        assert_eq!(d.source.path(), "requirements.txt");
        assert_eq!(d.requirements[0].spec, "six");
    }

    #[test]
    fn requirements_with_hashes_continuations_and_comments() {
        // As pip-compile --generate-hashes writes it.
        let text = format!(
            "#\n# This file is autogenerated by pip-compile\n#\nattrs==23.1.0 \\\n    --hash=sha256:{H2} \\\n    --hash=sha256:{H1}\n    # via -r requirements.in\nsix==1.16.0 --hash=sha256:{H1}  # a comment\n\n"
        );
        let r = requirements("requirements.txt", &text).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].spec, "attrs==23.1.0");
        assert_eq!(r[0].hashes, [H1, H2]);
        assert_eq!(r[0].line, 4);
        assert_eq!(r[1].line, 8);
        let d = Declared {
            source: Source::Requirements {
                path: "requirements.txt".into(),
            },
            requires_python: None,
            requirements: r,
        };
        assert!(d.fully_hashed());
        assert_eq!(
            lock_of_hashed(&d),
            format!(
                "attrs==23.1.0 --hash=sha256:{H1} --hash=sha256:{H2}\nsix==1.16.0 --hash=sha256:{H1}\n"
            )
        );
    }

    #[test]
    fn requirements_options_and_bad_hashes_are_refused() {
        for (text, needle) in [
            (
                "--index-url https://evil.example/simple\nsix\n",
                "`--index-url`",
            ),
            ("-r other.txt\n", "`-r`"),
            ("-e .\n", "`-e`"),
            ("six --hash=md5:abc\n", "only sha256"),
            ("six --hash=sha256:abc\n", "not a SHA-256"),
            ("./local/pkg\n", "not a package requirement"),
        ] {
            let e = requirements("requirements.txt", text).unwrap_err();
            assert_eq!(e.line, 1, "{text}");
            assert!(e.message.contains(needle), "{text}: {e}");
        }
        let e = requirements("r.txt", "six\nnope @ file:///etc/passwd\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "r.txt:2: `nope @ file:///etc/passwd`: a direct reference (a URL or a path) is not supported"
        );
    }

    #[test]
    fn the_digest_is_of_the_set_not_the_file() {
        let a = requirements("r", "b==1\na>=2  # x\n").unwrap();
        let b = requirements("r", "a>=2\n\nb==1\n").unwrap();
        let d = |r| Declared {
            source: Source::Requirements { path: "r".into() },
            requires_python: None,
            requirements: r,
        };
        assert_eq!(d(a.clone()).digest(), d(b).digest());
        let c = requirements("r", "a>=3\nb==1\n").unwrap();
        assert_ne!(d(a).digest(), d(c).digest());
    }

    #[test]
    fn pip_report_becomes_the_resolved_lock() {
        // The shape of `pip install --dry-run --report` (pip 23).
        let report = format!(
            r#"{{"version":"1","pip_version":"23.0.1","install":[
              {{"download_info":{{"url":"https://files.example/packages/Six-1.16.0-py2.py3-none-any.whl","archive_info":{{"hash":"sha256={H2}","hashes":{{"sha256":"{H2}"}}}}}},
                "is_direct":false,"requested":true,"metadata":{{"name":"Six","version":"1.16.0"}}}},
              {{"download_info":{{"url":"file:///wheels/attrs-23.1.0-py3-none-any.whl","archive_info":{{"hash":"sha256={H1}"}}}},
                "metadata":{{"name":"attrs","version":"23.1.0"}}}},
              {{"download_info":{{"url":"file:///wheels/zope.interface-6.0-py3-none-any.whl","archive_info":{{}}}},
                "metadata":{{"name":"zope.interface","version":"6.0"}}}}
            ]}}"#
        );
        let mut r = resolved_from_report(report.as_bytes()).unwrap();
        assert_eq!(r[0].sha256.as_deref(), Some(H2));
        assert_eq!(r[1].sha256.as_deref(), Some(H1));
        assert_eq!(r[2].sha256, None);
        assert_eq!(
            lock_text(&r).unwrap_err(),
            "zope.interface==6.0 has no sha256 hash"
        );
        r[2].sha256 = Some(H1.into());
        assert_eq!(
            lock_text(&r).unwrap(),
            format!(
                "attrs==23.1.0 --hash=sha256:{H1}\nsix==1.16.0 --hash=sha256:{H2}\nzope-interface==6.0 --hash=sha256:{H1}\n"
            )
        );
        assert!(resolved_from_report(b"{}").is_err());
    }

    #[test]
    fn requires_python_specifiers() {
        for (v, spec, ok) in [
            ("3.11.2", ">=3.10", true),
            ("3.11.2", ">=3.12", false),
            ("3.11.2", ">=3.8,<4", true),
            ("3.11.2", "==3.11.*", true),
            ("3.11.2", "!=3.11.*", false),
            ("3.11.2", "~=3.9", true),
            ("3.11.2", "~=3.11.3", false),
            ("3.11.2", "<3.11", false),
        ] {
            assert_eq!(version_matches(v, spec), Ok(ok), "{v} {spec}");
        }
        assert!(version_matches("3.11.2", "=>3").is_err());
    }

    #[test]
    fn wrap_with_writes_a_requirements_file_band_reads_back() {
        let text = requirements_file(&["pandas>=2".into(), "requests[socks]".into()]).unwrap();
        let r = requirements(REQUIREMENTS, &text).unwrap();
        let specs: Vec<&str> = r.iter().map(|r| r.spec.as_str()).collect();
        assert_eq!(specs, ["pandas>=2", "requests[socks]"]);
        for bad in [
            "-r /etc/passwd",
            "x\n--index-url=http://e",
            "x # y",
            "",
            "x --hash=sha256:00",
        ] {
            assert!(requirements_file(&[bad.into()]).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn names_normalize() {
        assert_eq!(normalize_name("Zope.Interface"), "zope-interface");
        assert_eq!(normalize_name("a__b-.c"), "a-b-c");
        assert_eq!(package_name("Pandas[excel]>=2"), "Pandas");
    }

    /// A uv.lock as uv 0.5+ writes it for a project `report-skill` needing `requests[socks]` and,
    /// on Windows only, `colorama` (dev: `pytest`, never installed).
    fn uv_lock_text() -> String {
        let h = |c: char| c.to_string().repeat(64);
        format!(
            r#"version = 1
revision = 2
requires-python = ">=3.9"

[[package]]
name = "certifi"
version = "2024.8.30"
source = {{ registry = "https://pypi.org/simple" }}
sdist = {{ url = "https://files.pythonhosted.org/packages/certifi-2024.8.30.tar.gz", hash = "sha256:{a}", size = 168507 }}
wheels = [
    {{ url = "https://files.pythonhosted.org/packages/certifi-2024.8.30-py3-none-any.whl", hash = "sha256:{b}", size = 167321 }},
]

[[package]]
name = "colorama"
version = "0.4.6"
source = {{ registry = "https://pypi.org/simple" }}
wheels = [
    {{ url = "https://files.pythonhosted.org/packages/colorama-0.4.6-py2.py3-none-any.whl", hash = "sha256:{c}", size = 25335 }},
]

[[package]]
name = "pysocks"
version = "1.7.1"
source = {{ registry = "https://pypi.org/simple" }}
wheels = [
    {{ url = "https://files.pythonhosted.org/packages/PySocks-1.7.1-py3-none-any.whl", hash = "sha256:{d}", size = 16725 }},
]

[[package]]
name = "pytest"
version = "8.3.3"
source = {{ registry = "https://pypi.org/simple" }}
wheels = [
    {{ url = "https://files.pythonhosted.org/packages/pytest-8.3.3-py3-none-any.whl", hash = "sha256:{e}", size = 342341 }},
]

[[package]]
name = "report-skill"
version = "0.1.0"
source = {{ virtual = "." }}
dependencies = [
    {{ name = "colorama", marker = "sys_platform == 'win32'" }},
    {{ name = "requests", extra = ["socks"] }},
]

[package.dev-dependencies]
dev = [
    {{ name = "pytest" }},
]

[package.metadata]
requires-dist = [
    {{ name = "colorama", marker = "sys_platform == 'win32'" }},
    {{ name = "requests", extras = ["socks"], specifier = ">=2.31" }},
]

[package.metadata.requires-dev]
dev = [{{ name = "pytest", specifier = ">=8" }}]

[[package]]
name = "requests"
version = "2.32.3"
source = {{ registry = "https://pypi.org/simple" }}
dependencies = [
    {{ name = "certifi" }},
]
sdist = {{ url = "https://files.pythonhosted.org/packages/requests-2.32.3.tar.gz", hash = "sha256:{f}", size = 131218 }}
wheels = [
    {{ url = "https://files.pythonhosted.org/packages/requests-2.32.3-py3-none-any.whl", hash = "sha256:{g}", size = 64928 }},
]

[package.optional-dependencies]
socks = [
    {{ name = "pysocks" }},
]
"#,
            a = h('a'),
            b = h('b'),
            c = h('c'),
            d = h('d'),
            e = h('e'),
            f = h('f'),
            g = h('1'),
        )
    }

    const PYPROJECT_TEXT: &str = r#"[project]
name = "report-skill"
version = "0.1.0"
requires-python = ">=3.10"
dependencies = [
    "requests[socks]>=2.31",
    "colorama; sys_platform == 'win32'",
]

[dependency-groups]
dev = ["pytest>=8"]
"#;

    #[test]
    fn a_uv_lock_gives_the_projects_packages_pinned_by_their_wheels() {
        let lock = uv_lock_text();
        let f = [
            ("scripts/report.py", "import requests\n"),
            ("pyproject.toml", PYPROJECT_TEXT),
            ("uv.lock", lock.as_str()),
            ("requirements.txt", "six\n"),
        ];
        let d = declared("scripts/report.py", &files(&f)).unwrap().unwrap();
        assert_eq!(
            d.source,
            Source::Pyproject {
                path: "pyproject.toml".into(),
                lock: Some("uv.lock".into())
            }
        );
        assert_eq!(d.requires_python.as_deref(), Some(">=3.10"));
        assert!(d.fully_hashed(), "{d:?}");
        let h = |c: char| c.to_string().repeat(64);
        // Reachable: requests, its dependency certifi, its `socks` extra's pysocks; colorama on
        // Windows only. Not the project itself, not pytest (dev), wheels' hashes only.
        assert_eq!(
            lock_of_hashed(&d),
            format!(
                "certifi==2024.8.30 --hash=sha256:{}\ncolorama==0.4.6 ; sys_platform == 'win32' --hash=sha256:{}\npysocks==1.7.1 --hash=sha256:{}\nrequests==2.32.3 --hash=sha256:{}\n",
                h('b'),
                h('c'),
                h('d'),
                h('1')
            )
        );
        let line = d
            .requirements
            .iter()
            .find(|r| r.name() == "requests")
            .unwrap()
            .line;
        assert_eq!(lock.lines().nth(line - 1), Some("name = \"requests\""));
        // The digest follows the lock: another wheel is another set.
        let other = lock.replace(&h('1'), &h('2'));
        let f2 = [
            ("pyproject.toml", PYPROJECT_TEXT),
            ("uv.lock", other.as_str()),
        ];
        let d2 = declared("scripts/report.py", &files(&f2)).unwrap().unwrap();
        assert_ne!(d.digest(), d2.digest());
    }

    #[test]
    fn a_pyproject_without_a_lock_is_resolved_as_a_requirements_file() {
        let f = [
            ("scripts/a.py", "import requests\n"),
            ("scripts/pyproject.toml", PYPROJECT_TEXT),
            ("requirements.txt", "six\n"),
        ];
        let d = declared("scripts/a.py", &files(&f)).unwrap().unwrap();
        assert_eq!(d.source.path(), "scripts/pyproject.toml");
        assert!(!d.fully_hashed());
        let specs: Vec<(&str, usize)> = d
            .requirements
            .iter()
            .map(|r| (r.spec.as_str(), r.line))
            .collect();
        assert_eq!(
            specs,
            [
                ("requests[socks]>=2.31", 6),
                ("colorama; sys_platform == 'win32'", 7)
            ]
        );
        // No `[project]` (a tools-only pyproject.toml), or no dependencies: the next declaration.
        for manifest in [
            "[tool.ruff]\nline-length = 100\n",
            "[project]\nname = \"x\"\n",
        ] {
            let f = [
                ("scripts/a.py", ""),
                ("scripts/pyproject.toml", manifest),
                ("requirements.txt", "six\n"),
            ];
            let d = declared("scripts/a.py", &files(&f)).unwrap().unwrap();
            assert_eq!(d.source.path(), "requirements.txt", "{manifest}");
        }
        // A PEP 723 block wins over a pyproject.toml.
        let f = [("scripts/a.py", SCRIPT), ("pyproject.toml", PYPROJECT_TEXT)];
        let d = declared("scripts/a.py", &files(&f)).unwrap().unwrap();
        assert!(matches!(d.source, Source::Pep723 { .. }));
    }

    #[test]
    fn uv_locks_band_cannot_install_are_refused_naming_the_package() {
        let lock = uv_lock_text();
        let check = |lock: &str| {
            pyproject(
                "pyproject.toml",
                PYPROJECT_TEXT.as_bytes(),
                Some(("uv.lock", lock.as_bytes())),
            )
            .unwrap_err()
        };
        // A stale lock: the manifest gained a dependency.
        let e = pyproject(
            "pyproject.toml",
            PYPROJECT_TEXT
                .replace(
                    "\"requests[socks]>=2.31\",",
                    "\"requests[socks]>=2.31\", \"six\",",
                )
                .as_bytes(),
            Some(("uv.lock", lock.as_bytes())),
        )
        .unwrap_err();
        assert_eq!(e.path, "uv.lock");
        assert!(e.message.contains("does not match"), "{e}");
        assert!(e.hint.contains("uv lock"), "{}", e.hint);
        // Only a source distribution.
        let sdist_only = lock.replace(
            "wheels = [\n    { url = \"https://files.pythonhosted.org/packages/certifi-2024.8.30-py3-none-any.whl\"",
            "x = [\n    { url = \"\"",
        );
        let e = check(&sdist_only);
        assert_eq!(
            e.to_string(),
            "uv.lock:6: certifi 2024.8.30 has no wheel in the lock (only a source distribution)"
        );
        // From git, not an index.
        let git = lock.replace(
            "name = \"pysocks\"\nversion = \"1.7.1\"\nsource = { registry = \"https://pypi.org/simple\" }",
            "name = \"pysocks\"\nversion = \"1.7.1\"\nsource = { git = \"https://example.com/pysocks?rev=1#abc\" }",
        );
        let e = check(&git);
        assert_eq!(e.line, 23);
        assert!(
            e.message
                .contains("pysocks 1.7.1 is not from a package index"),
            "{e}"
        );
        // Another format.
        let e = check(&lock.replacen("version = 1\n", "version = 2\n", 1));
        assert_eq!(
            (e.line, e.message.contains("`version` is not 1")),
            (1, true)
        );
        // Not TOML.
        assert!(check("[[package]\n").message.contains("not valid TOML"));
    }

    const INTEGRITY: &str = "sha512-znQ76wyJ2hGrc4+XA3JnNaAUnSWBfog6s6PaeqLrbSXz+MpNr1fzI8WmE9vhPX162xJlciujvCqAhTCQusUIHw==";

    fn node_lock_text(extra: &str) -> String {
        format!(
            r#"{{
  "name": "app",
  "lockfileVersion": 3,
  "requires": true,
  "packages": {{
    "": {{ "name": "app", "dependencies": {{ "probe": "^1.0.0" }}, "devDependencies": {{ "lint": "1" }} }},
    "node_modules/probe": {{
      "version": "1.0.0",
      "resolved": "https://registry.npmjs.org/probe/-/probe-1.0.0.tgz",
      "integrity": "{INTEGRITY}"
    }},
    "node_modules/lint": {{ "version": "1.0.0", "dev": true }}{extra}
  }}
}}
"#
        )
    }

    const MANIFEST: &str =
        r#"{"name":"app","dependencies":{"probe":"^1.0.0"},"devDependencies":{"lint":"1"}}"#;

    #[test]
    fn a_node_lock_beside_the_script_wins_over_the_root_and_dev_packages_are_left_out() {
        let lock = node_lock_text("");
        let f = [
            ("scripts/a.mjs", "import p from 'probe'\n"),
            ("scripts/package.json", MANIFEST),
            ("scripts/package-lock.json", lock.as_str()),
            ("package.json", r#"{"dependencies":{"x":"1"}}"#),
        ];
        let d = node_declared("scripts/a.mjs", &files(&f)).unwrap().unwrap();
        assert_eq!(d.dir, "scripts");
        assert_eq!(d.lock_path(), "scripts/package-lock.json");
        assert_eq!(d.sandbox_node_modules(), "/skill/scripts/node_modules");
        assert_eq!(
            d.packages,
            [NodePackage {
                name: "probe".into(),
                version: "1.0.0".into(),
                integrity: INTEGRITY.into()
            }]
        );
        assert_eq!(d.digest(), sha256_hex(lock.as_bytes()));
        // At the root, for a script that has none beside it.
        let f = [
            ("scripts/b.js", ""),
            ("package.json", MANIFEST),
            ("package-lock.json", lock.as_str()),
        ];
        let d = node_declared("scripts/b.js", &files(&f)).unwrap().unwrap();
        assert_eq!(
            (d.dir.as_str(), d.sandbox_node_modules().as_str()),
            ("", "/skill/node_modules")
        );
        // No dependencies (dev ones only, or none): nothing to build, no lock needed.
        let f = [("package.json", r#"{"devDependencies":{"lint":"1"}}"#)];
        assert_eq!(node_declared("scripts/b.js", &files(&f)).unwrap(), None);
        assert_eq!(node_declared("scripts/b.js", &files(&[])).unwrap(), None);
    }

    #[test]
    fn node_declarations_band_cannot_pin_are_refused_naming_the_package() {
        let e = node_lock("scripts", MANIFEST.as_bytes(), None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "scripts/package.json:1: it declares dependencies and has no package-lock.json beside it"
        );
        assert!(
            e.hint.contains("npm install --package-lock-only"),
            "{}",
            e.hint
        );
        let check =
            |lock: &str| node_lock("", MANIFEST.as_bytes(), Some(lock.as_bytes())).unwrap_err();
        let no_hash = node_lock_text(
            r#",
    "node_modules/bare": { "version": "2.0.0", "resolved": "https://registry.npmjs.org/bare/-/bare-2.0.0.tgz" }"#,
        );
        let e = check(&no_hash);
        assert_eq!(
            e.to_string(),
            "package-lock.json:13: bare@2.0.0 has no sha512 integrity hash"
        );
        let git = node_lock_text(&format!(
            r#",
    "node_modules/g": {{ "version": "1.0.0", "resolved": "git+ssh://git@example.com/g.git#abc", "integrity": "{INTEGRITY}" }}"#
        ));
        assert!(
            check(&git).message.contains("g is resolved from `git+ssh"),
            "{}",
            check(&git)
        );
        let link = node_lock_text(
            r#",
    "node_modules/l": { "resolved": "../l", "link": true }"#,
        );
        assert!(
            check(&link)
                .message
                .contains("not a package from a registry")
        );
        let v1 = node_lock_text("").replace("\"lockfileVersion\": 3", "\"lockfileVersion\": 1");
        assert_eq!(check(&v1).line, 3);
        assert!(
            check(&v1)
                .message
                .contains("lockfileVersion 1 is not supported")
        );
        let stale = node_lock_text("").replace("\"probe\": \"^1.0.0\"", "\"probe\": \"^0.9\"");
        assert!(
            check(&stale)
                .message
                .contains("does not match the dependencies of package.json")
        );
    }
}
