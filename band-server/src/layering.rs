//! Which module may use which: band-server's modules in ranks, each using only lower ranks, and
//! a test that fails on an edge that points up, or sideways between two layers.
//!
//! From the bottom: [`crate::error`] and [`crate::sys`]; the server's config; the request's
//! checks; [`crate::common`] (the run's guard, what layers hand each other, the paths they share,
//! the janitor's report); each layer's plan half, `layers/<layer>/` but its `apply.rs` (its
//! types and pure planner); the host's facts (gathered through the layers); the plan, which
//! composes the layers' parts; [`crate::layer`], the layer trait and the apply machinery (its
//! steps read the plan); each layer's apply half, `layers/<layer>/apply.rs` (its steps, and its
//! `RunLayer` impl); the list of layers ([`crate::layers`]); then the collection, the observer
//! and the janitor; the run; the warm server. No layer uses another layer, in either half.
//! Read from the code: every `crate::…` path outside comments and `#[cfg(test)]` items (tests
//! may reach anywhere), and a plan half's `apply::` paths.

use std::path::{Path, PathBuf};

/// Whether `name` is a layer: a folder `layers/<name>/` (each one rank, and none may use
/// another).
fn is_layer(name: &str) -> bool {
    static LAYERS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    LAYERS
        .get_or_init(|| {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/layers");
            fs_err::read_dir(dir)
                .unwrap_or_else(|e| panic!("{e}"))
                .flatten()
                .filter(|e| e.path().is_dir())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .iter()
        .any(|l| l == name)
}

/// Each module's rank: a module may use only modules of a lower rank (and itself).
const RANKS: &[(&str, u32)] = &[
    ("error", 0),
    ("sys", 0),
    ("config", 1),
    ("request", 2),
    ("common", 3),
    ("layers::*", 4),
    ("facts", 5),
    ("plan", 6),
    ("layer", 7),
    ("layers::*::apply", 8),
    ("layers", 9),
    ("collect", 10),
    ("observe", 10),
    ("janitor", 10),
    ("deps", 10),
    ("run", 11),
    ("warm", 12),
    ("sandboxd", 12),
    ("lib", 13),
];

fn rank(unit: &str) -> Option<u32> {
    let key = if unit.starts_with("layers::") && unit.ends_with("::apply") {
        "layers::*::apply"
    } else if unit.starts_with("layers::") {
        "layers::*"
    } else {
        unit
    };
    RANKS.iter().find(|(n, _)| *n == key).map(|(_, r)| *r)
}

/// The module a file of `src/` belongs to.
fn unit_of_file(rel: &Path) -> String {
    let parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    match parts.as_slice() {
        [layers, layer, apply] if layers == "layers" && apply == "apply" => {
            format!("layers::{layer}::apply")
        }
        [layers, layer, ..] if layers == "layers" && is_layer(layer) => {
            format!("layers::{layer}")
        }
        [first, ..] => first.clone(),
        [] => String::new(),
    }
}

/// The module a path `crate::<a>::<b>::<c>…` names.
fn unit_of_path(a: &str, b: Option<&str>, c: Option<&str>) -> String {
    match (b, c) {
        (Some(b), Some("apply")) if a == "layers" && is_layer(b) => {
            format!("layers::{b}::apply")
        }
        (Some(b), _) if a == "layers" && is_layer(b) => format!("layers::{b}"),
        _ => a.to_string(),
    }
}

/// Whether two modules are two layers, or two halves of two layers.
fn sideways(from: &str, to: &str) -> bool {
    let layer = |u: &str| {
        u.strip_prefix("layers::")
            .map(|rest| rest.trim_end_matches("::apply").to_string())
    };
    matches!((layer(from), layer(to)), (Some(a), Some(b)) if a != b)
}

/// A file's code without its comments and `#[cfg(test)]` items, line by line (numbers kept).
fn code_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut skip_depth: Option<i64> = None;
    let mut skip_next = false;
    for (i, line) in text.lines().enumerate() {
        let code = match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        };
        let trimmed = code.trim();
        let opens = code.matches('{').count() as i64 - code.matches('}').count() as i64;
        if let Some(depth) = skip_depth.as_mut() {
            *depth += opens;
            if *depth <= 0 && (code.contains('}') || code.contains(';')) {
                skip_depth = None;
            }
            continue;
        }
        if trimmed == "#[cfg(test)]" {
            skip_next = true;
            continue;
        }
        if skip_next {
            if trimmed.starts_with("#[") {
                continue;
            }
            skip_next = false;
            // The item: to its `;`, or to the end of its braces.
            if !(opens <= 0 && (trimmed.ends_with(';') || trimmed.ends_with('}'))) {
                skip_depth = Some(opens);
            }
            continue;
        }
        out.push((i + 1, code.to_string()));
    }
    out
}

/// The modules `code` names with `crate::<a>[::<b>]` paths.
fn uses(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().last();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let ident = |s: &str| -> String {
            s.chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect()
        };
        let a = ident(rest);
        let after = &rest[a.len()..];
        if a.is_empty() || after.starts_with('!') {
            // `crate::say!`: a macro of the crate's root, for everyone.
            continue;
        }
        let b = after.strip_prefix("::").map(ident);
        let c = b
            .as_ref()
            .and_then(|b| after[2 + b.len()..].strip_prefix("::").map(ident));
        out.push(unit_of_path(&a, b.as_deref(), c.as_deref()));
    }
    out
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs_err::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every edge of `src/` that points up or sideways: `(from, to, "file:line")`.
fn back_edges(src: &Path) -> Vec<(String, String, String)> {
    let mut files = Vec::new();
    rs_files(src, &mut files);
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let rel = file.strip_prefix(src).unwrap_or(&file);
        // The binaries use the library from outside (`band_server::…`); this file is a test.
        if rel.starts_with("bin") || rel == Path::new("main.rs") || rel == Path::new("layering.rs")
        {
            continue;
        }
        let from = unit_of_file(rel);
        let text = fs_err::read_to_string(&file).unwrap_or_else(|e| panic!("{e}"));
        // A plan half names its apply half only by a relative path (`apply::`, `self::apply::`).
        let plan_half = from.starts_with("layers::") && !from.ends_with("::apply");
        for (line, code) in code_lines(&text) {
            let mut to_units = uses(&code);
            if plan_half
                && code
                    .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                    .any(|w| {
                        w.starts_with("apply::")
                            || w.contains("::apply::") && !w.starts_with("crate::")
                    })
            {
                to_units.push(format!("{from}::apply"));
            }
            for to in to_units {
                if to == from {
                    continue;
                }
                let (Some(rf), Some(rt)) = (rank(&from), rank(&to)) else {
                    panic!(
                        "{}:{line}: `{from}` or `{to}` has no rank in RANKS",
                        rel.display()
                    );
                };
                if rt >= rf || sideways(&from, &to) {
                    out.push((from.clone(), to, format!("{}:{line}", rel.display())));
                }
            }
        }
    }
    out
}

#[test]
fn every_module_uses_only_modules_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let bad: Vec<String> = back_edges(&src)
        .iter()
        .map(|(f, t, at)| format!("{at}: {f} uses {t}"))
        .collect();
    assert!(
        bad.is_empty(),
        "edges that point up or sideways (see RANKS in {}):\n{}",
        file!(),
        bad.join("\n")
    );
}

#[test]
fn the_checker_reads_paths_and_skips_tests_and_comments() {
    let text = "use crate::plan::RunPlan; // crate::run\n/// [`crate::janitor`]\nfn f() { crate::say!(\"x\"); crate::layers::net::x(); }\n#[cfg(test)]\nmod tests {\n    use crate::run;\n}\n#[cfg(test)]\nuse crate::warm;\nfn g() {}\n";
    let got: Vec<(usize, Vec<String>)> = code_lines(text)
        .into_iter()
        .map(|(n, l)| (n, uses(&l)))
        .filter(|(_, u)| !u.is_empty())
        .collect();
    assert_eq!(
        got,
        [
            (1, vec!["plan".to_string()]),
            (3, vec!["layers::net".to_string()]),
        ]
    );
    assert_eq!(unit_of_file(Path::new("layers/net/dns.rs")), "layers::net");
    assert_eq!(unit_of_file(Path::new("layers/mod.rs")), "layers");
    assert_eq!(unit_of_file(Path::new("layer/guard.rs")), "layer");
    assert_eq!(unit_of_file(Path::new("run/mod.rs")), "run");
    assert_eq!(unit_of_path("layers", Some("LAYERS"), None), "layers");
    assert_eq!(
        unit_of_file(Path::new("layers/net/apply.rs")),
        "layers::net::apply"
    );
    assert_eq!(
        unit_of_path("layers", Some("cgroup"), Some("apply")),
        "layers::cgroup::apply"
    );
    assert!(sideways("layers::net::apply", "layers::process"));
    assert!(!sideways("layers::net::apply", "layers::net"));
    assert!(!sideways("run", "layers::net"));
}
