//! CLI gate: the shim's decision, the verified report socket, the execute-only program cache.

pub(crate) mod apply;
pub(crate) mod bins;
pub(crate) mod bundled;
pub(crate) mod execcache;
pub(crate) mod heard;
pub(crate) mod launch;
pub(crate) mod programs;
pub(crate) mod reports;
pub mod runtime;
pub(crate) mod shim;

use std::path::{Path, PathBuf};

use band::proto::Layer;

use self::execcache::{ExecDir, ExecTable};
use self::programs::CliPlan;
use self::reports::ReportListener;
use crate::common::{Built, Teardown, built_any};
use crate::error::{SetupError, SetupResult};

/// The run's programs: copies in `<state>/exec/cache`, handed over as descriptors, and
/// `<state>/exec/runs/<run>` → `/band/x` with the `#!` scripts, laid out by
/// [`execcache::ExecDir::make`] and [`execcache::ExecDir::populate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecPlan {
    pub(crate) state: PathBuf,
    pub(crate) root: PathBuf,
    /// (wrapped name, host file).
    pub programs: Vec<(String, PathBuf)>,
    /// band-shim's execute-only copy in the program cache.
    pub(crate) shim: PathBuf,
    /// (cache path, wrapped name) of each declared host program: inside the sandbox the path a
    /// running copy reports as its own leads to band-shim under that name (see
    /// [`execcache`]'s "What is left").
    pub(crate) self_links: Vec<(PathBuf, String)>,
    /// The trees the run's programs need, bound read-only at their host paths with their
    /// executables hidden ([`runtime`]).
    pub(crate) runtime: Vec<runtime::RuntimeTree>,
    /// Wrapped name → the copy's path in its cache entry, for a program with an installation of
    /// its own ([`runtime::install_layout`]: `bin/java`); others are `<name>`.
    pub(crate) layouts: std::collections::BTreeMap<String, PathBuf>,
    /// (link, target): symlinks in the sandbox that put each such program's installation around
    /// the path its copy reports for itself (`<cache>/<key>/lib` → `<jdk>/lib`, see
    /// [`runtime::layout_links`]).
    pub(crate) links: Vec<(PathBuf, PathBuf)>,
    /// Wrapped name → the `argv[0]` its program runs with, when not the call's (a venv's python:
    /// [`runtime::venv_argv0`]).
    pub(crate) argv0: std::collections::BTreeMap<String, String>,
}

/// Command name → where its program sits in an installation of its own, and the links (link,
/// target) that rebuild that installation around its copy ([`runtime::install_layout`]).
pub(crate) type InstallLayouts =
    std::collections::BTreeMap<String, (runtime::Layout, Vec<(PathBuf, PathBuf)>)>;

/// What the CLI gate's plan reads of the host (gathered with the host's facts, `HostFacts`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProgramFacts<'a> {
    /// Where band-shim's execute-only copy is in the program cache, or why it cannot be.
    pub(crate) shim_copy: &'a Result<PathBuf, std::io::Error>,
    /// Where each binary's execute-only copy is in the program cache, by command name.
    pub(crate) copies: &'a std::collections::BTreeMap<String, PathBuf>,
    /// The trees the run's programs need around them, or why they cannot be bound.
    pub(crate) runtime: &'a Result<Vec<runtime::RuntimeTree>, String>,
    /// Command name → its installation's layout and the links that rebuild it.
    pub(crate) layouts: &'a InstallLayouts,
    /// Command name → the `argv[0]` its program runs with, when not its own.
    pub(crate) argv0: &'a std::collections::BTreeMap<String, String>,
}

/// The programs part of [`crate::plan::RunPlan`]: the declared commands' host files (a bundled
/// program's: its staged copy, [`bundled::staging_path`]), and
/// band-shim's copy as the host's facts found it. Pure.
pub(crate) fn plan_exec(
    state: &Path,
    run_id: &str,
    cli: &CliPlan,
    facts: &ProgramFacts<'_>,
) -> SetupResult<ExecPlan> {
    let programs: Vec<(String, PathBuf)> = cli
        .binaries
        .iter()
        .map(|b| (b.name.clone(), b.host.clone()))
        .chain(
            cli.bundled
                .iter()
                .map(|b| (b.name.clone(), bundled::staging_path(state, &b.sha256))),
        )
        .collect();
    let shim_copy = facts
        .shim_copy
        .as_ref()
        .map_err(|e| SetupError::new(Layer::Cli, format!("failed to cache band-shim: {e}")))?
        .clone();
    let self_links = cli
        .binaries
        .iter()
        .filter_map(|b| Some((facts.copies.get(&b.name)?.clone(), b.name.clone())))
        .collect();
    let runtime = facts
        .runtime
        .clone()
        .map_err(|e| SetupError::new(Layer::Cli, format!("cannot bind a program's tree: {e}")))?;
    let mut layouts = std::collections::BTreeMap::new();
    let mut links = Vec::new();
    // Each program inside a runtime tree: band-shim is bound over it, and its host file joins the
    // table under its path (`runtime::helper_table_name`), copied by its file name.
    let mut programs = programs;
    for t in &runtime {
        for (at, host) in t.helpers() {
            let name = runtime::helper_table_name(&at);
            if let Some(file) = host.file_name() {
                layouts.insert(name.clone(), PathBuf::from(file));
            }
            programs.push((name, host));
        }
    }
    for (name, (layout, tree_links)) in facts.layouts {
        let Some(copy) = facts.copies.get(name) else {
            continue;
        };
        let Some(entry) = copy
            .ancestors()
            .nth(layout.rel.components().count())
            .map(Path::to_path_buf)
        else {
            continue;
        };
        layouts.insert(name.clone(), layout.rel.clone());
        links.extend(
            tree_links
                .iter()
                .map(|(rel, target)| (entry.join(rel), target.clone())),
        );
    }
    let argv0 = cli
        .binaries
        .iter()
        .filter_map(|b| Some((b.name.clone(), facts.argv0.get(&b.name)?.clone())))
        .collect();
    Ok(ExecPlan {
        argv0,
        layouts,
        links,
        runtime,
        state: state.to_path_buf(),
        root: execcache::runs_root(state).join(run_id),
        programs,
        shim: shim_copy,
        self_links,
    })
}

/// The CLI gate: the run's programs (`/band/x` for its `#!` scripts) and its report socket.
pub(crate) struct Cli;

impl Built for ExecDir {
    fn teardown(self: Box<Self>, t: &mut Teardown) {
        if let Err(e) = self.remove() {
            t.errors.push(format!("programs: {e}"));
            t.clean = false;
        }
    }

    built_any!();
}

impl Built for ReportListener {
    fn teardown(mut self: Box<Self>, _t: &mut Teardown) {
        self.stop();
    }

    built_any!();
}
/// How the jail starts the entry: a `#!` script whose interpreter is one of the run's programs
/// (not itself a script) starts that program directly (what the kernel would do, minus a trip
/// through band-shim, which would only judge the skill's own entry point), from the descriptor
/// band-server passes (the process layer's `bwrap::PROGRAM_FD`); so does an entry `launch` says an
/// interpreter starts (`band::launch`: its `#!` line without an execute bit, its extension,
/// upstream's `run.sh`), whatever its mode; anything else is exec'd as it is. Returns the
/// program's name in the table, and how the jail runs it.
pub(crate) fn entry_exec(
    entry: &[u8],
    entry_path: &str,
    table: &ExecTable,
    launch: &band::launch::Launch,
) -> Option<(String, Vec<String>)> {
    let sb = match launch {
        band::launch::Launch::With(i) => execcache::Shebang {
            path: i.name.clone(),
            interp: i.name.clone(),
            arg: i.arg.clone(),
        },
        band::launch::Launch::AsIs => execcache::parse_shebang(entry)?,
        band::launch::Launch::Unknown => return None,
    };
    let program = table.get(&sb.interp)?;
    if program.script.is_some() {
        return None;
    }
    // A venv's python (a script's environment, `deps`) runs as `<venv>/bin/python3`, as the gate
    // runs it when called by name: that is how it finds its venv.
    let mut argv = vec![program.argv0.clone().unwrap_or_else(|| sb.interp.clone())];
    argv.extend(sb.arg.clone());
    // A module entry (SKILL.md runs `python -m scripts.x`): `python3 -m scripts.x`, its
    // package found from the skill's root (the jail's `PYTHONPATH=/skill`).
    let module = match launch {
        band::launch::Launch::With(i) if i.by == band::launch::By::Module => entry_path
            .strip_prefix("/skill/")
            .and_then(|p| band::launch::module_name(std::path::Path::new(p))),
        _ => None,
    };
    match module {
        Some(m) => argv.extend(["-m".to_string(), m]),
        None => argv.push(entry_path.to_string()),
    }
    Some((sb.interp, argv))
}

#[cfg(test)]
mod tests {
    use super::execcache::Program;
    use super::*;

    #[test]
    fn an_entry_starts_with_the_interpreter_its_launch_names() {
        use band::launch::{By, Interpreter, Launch};
        let program = |name: &str| {
            (
                name.to_string(),
                Program {
                    file: format!("/state/exec/cache/k/{name}").into(),
                    script: None,
                    argv0: None,
                },
            )
        };
        let table = ExecTable::from([program("bash"), program("python3")]);
        let with = |name: &str, by| {
            Launch::With(Interpreter {
                name: name.into(),
                arg: None,
                by,
            })
        };
        let path = "/skill/scripts/resources/go/run.sh";
        let (name, argv) = entry_exec(
            b"echo no shebang\n",
            path,
            &table,
            &with("bash", By::UpstreamRunSh),
        )
        .unwrap();
        assert_eq!(name, "bash");
        assert_eq!(argv, ["bash", path]);
        // Exec'd as it is: a file with no `#!` runs as it is; no interpreter, none.
        assert!(entry_exec(b"echo no shebang\n", path, &table, &Launch::AsIs).is_none());
        assert!(
            entry_exec(
                b"",
                path,
                &ExecTable::new(),
                &with("bash", By::UpstreamRunSh)
            )
            .is_none()
        );
        let (_, argv) = entry_exec(b"#!/bin/bash -e\n", path, &table, &Launch::AsIs).unwrap();
        assert_eq!(argv, ["bash", "-e", path]);
        // A mode-644 Python script, by its extension or its `#!` line.
        let py = "/skill/scripts/draw_cards.py";
        let (name, argv) =
            entry_exec(b"import sys\n", py, &table, &with("python3", By::Extension)).unwrap();
        assert_eq!(
            (name.as_str(), argv),
            ("python3", vec!["python3".to_string(), py.into()])
        );
        // Nothing explains it: not started.
        assert!(entry_exec(b"x", py, &table, &Launch::Unknown).is_none());
        let (_, argv) = entry_exec(
            b"from scripts.y import z\n",
            "/skill/scripts/package_skill.py",
            &table,
            &with("python3", By::Module),
        )
        .unwrap();
        assert_eq!(argv, ["python3", "-m", "scripts.package_skill"]);
        // An interpreter the run does not have: none (the jail's input says why).
        assert!(entry_exec(b"x", py, &table, &with("node", By::Extension)).is_none());
    }
}
