//! Programs shipped in the skill: a file of the bundle that an `allow.cli` pattern names with
//! `./` (`./bin/tool *`, see [`band::policy::cli::bundled_path`]).
//!
//! `/skill` is `noexec` (see [`crate::layers::fs::workdir`]): no file of the bundle can be
//! executed by its path. For each bundled program the policy declares, the sandbox gets band-shim
//! bound over `/skill/<path>` (a mount of its own, so not `noexec`), and the real file joins the
//! run's program table like a declared host command. A call by any path that reaches that file
//! (`/skill/bin/tool`, `./bin/tool` or `bin/tool` from `/skill`, through `env`, `sh -c`,
//! `find -exec`) is therefore band-shim, and band-server judges it as argv\[0\] `./bin/tool`
//! ([`call_name`]): never as a host command of the same last component.
//!
//! - **Table name.** The program table is keyed by file names, so a bundled program's entry is
//!   [`table_name`] (`bin/tool` → `skill:bin:tool`): no command name has a `:`, and bundled paths
//!   have none either, so the mapping is one-to-one and can never be reached by a bare name.
//! - **Its copy.** The program goes from the bundle straight into the program cache before the
//!   sandbox exists, keyed by its content, the user and the skill, and charged to them within the
//!   cache's bounds ([`execcache::ExecDir::admit_bundled`]), so every run of the same skill by the
//!   same user reuses one cached copy (execute-only for an ELF, `0555` for a `#!` script, whose
//!   interpreter joins the table as for a declared `#!` command).
//!
//! What is left: a relative argv\[0\] is taken from `/skill` (the gate does not know the
//! caller's working directory): `cd /skill/bin && ./tool` is judged as `tool`, a host command.
//! The bundled program's own `$0` is its hidden path, not `/skill/bin/tool`.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use band::policy::CompiledPolicy;
use band::proto::Layer;
use sha2::{Digest, Sha256};

use crate::error::{SetupError, SetupResult};
use crate::layers::cli::execcache::{self, Shebang};
use crate::request::DecodedFile;

const TABLE_PREFIX: &str = "skill:";

/// The program table's name of the bundled program at `rel` (`bin/tool` → `skill:bin:tool`).
pub(crate) fn table_name(rel: &str) -> String {
    format!("{TABLE_PREFIX}{}", rel.replace('/', ":"))
}

/// The name calls of a bundled program are judged by, from its table name
/// (`skill:bin:tool` → `./bin/tool`); `None` for any other name.
pub(crate) fn judged_name(table: &str) -> Option<String> {
    table
        .strip_prefix(TABLE_PREFIX)
        .map(|rest| format!("./{}", rest.replace(':', "/")))
}

/// Whether `name` is a table name of a bundled program (never a command a script can name).
pub(crate) fn is_table_name(name: &str) -> bool {
    name.starts_with(TABLE_PREFIX)
}

/// The command name a call is judged by, from its `argv[0]`:
///
/// - a bare name (no `/`) is itself (`jq`);
/// - a path that leads to a bundled program (`is_bundled` of its path relative to the skill
///   root) is that program's `./` name: `/skill/bin/tool`, `/skill/./bin/../bin/tool`, and the
///   relative `./bin/tool` or `bin/tool` (taken from `/skill`) are all `./bin/tool`;
/// - any other path is its last component (`/usr/bin/jq` → `jq`), as before.
///
/// What runs is always the program of the name judged, whatever `argv[0]` claims.
pub(crate) fn call_name<'a>(arg0: &'a str, is_bundled: &dyn Fn(&str) -> bool) -> Cow<'a, str> {
    if !arg0.contains('/') {
        return Cow::Borrowed(arg0);
    }
    let last = || Cow::Borrowed(arg0.rsplit('/').next().unwrap_or(arg0));
    let rel = match arg0.strip_prefix('/') {
        Some(abs) => match normalise(abs, true).as_deref() {
            Some(["skill", rest @ ..]) if !rest.is_empty() => rest.join("/"),
            _ => return last(),
        },
        None => match normalise(arg0, false) {
            Some(parts) if !parts.is_empty() => parts.join("/"),
            _ => return last(),
        },
    };
    if is_bundled(&rel) {
        Cow::Owned(format!("./{rel}"))
    } else {
        last()
    }
}

/// A path's components with `.` and empty ones dropped and `..` applied (at the root of an
/// absolute path, `..` stays there); `None` when `..` leaves the start of a relative one.
fn normalise(path: &str, absolute: bool) -> Option<Vec<&str>> {
    let mut out: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                if out.pop().is_none() && !absolute {
                    return None;
                }
            }
            c => out.push(c),
        }
    }
    Some(out)
}

/// A bundled program of the run, planned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BundledProgram {
    /// Relative to the skill root (`bin/tool`).
    pub(crate) path: String,
    /// Its name in the program table ([`table_name`]).
    pub(crate) name: String,
    /// SHA-256 of its content, hex: the name of its staged copy.
    pub(crate) sha256: String,
    /// Its `#!` line, if it is a script.
    pub(crate) script: Option<Shebang>,
}

/// The bundled programs the policy declares (`./` commands of `allow.cli`/`insist.cli`), from the
/// bundle. A declared one that is not a file of the bundle fails closed (also refused earlier
/// by [`crate::request::check_bundled`]).
pub(crate) fn plan(
    compiled: &CompiledPolicy,
    bundle: &[DecodedFile],
) -> SetupResult<Vec<BundledProgram>> {
    compiled
        .cli
        .bundled()
        .into_iter()
        .map(|path| {
            let f = bundle.iter().find(|f| f.path == path).ok_or_else(|| {
                SetupError::new(
                    Layer::Cli,
                    format!("allow.cli names `./{path}`, which is not a file of the skill"),
                )
            })?;
            Ok(BundledProgram {
                name: table_name(&path),
                sha256: hex(&Sha256::digest(&f.data)),
                script: execcache::parse_shebang(&f.data),
                path,
            })
        })
        .collect()
}

/// The source path a bundled program has in the run's plan (`ExecPlan::programs`, which names
/// every program of the run). Nothing is written there: the program goes from the bundle straight
/// into the program cache, charged to the user and the skill
/// ([`execcache::ExecDir::admit_bundled`]), before the rest of the run's programs.
pub(crate) fn staging_path(state: &Path, sha256: &str) -> PathBuf {
    state.join("exec").join("bundled").join(sha256)
}

fn hex(bytes: &[u8]) -> String {
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;
    use band::policy::Policy;

    #[test]
    fn table_names_are_one_to_one_and_never_commands() {
        assert_eq!(table_name("bin/tool"), "skill:bin:tool");
        assert_eq!(judged_name("skill:bin:tool").as_deref(), Some("./bin/tool"));
        assert_eq!(judged_name("tool"), None);
        assert!(is_table_name("skill:x"));
        assert!(crate::request::check_command_name(&table_name("bin/tool")).is_err());
    }

    #[test]
    fn calls_of_bundled_programs_are_judged_by_their_dot_slash_name() {
        let bundled = |p: &str| p == "bin/tool" || p == "bin/ls";
        let name = |a: &str| call_name(a, &bundled).into_owned();
        for arg0 in [
            "/skill/bin/tool",
            "/skill//bin/./tool",
            "/skill/bin/../bin/tool",
            "./bin/tool",
            "bin/tool",
            "/../skill/bin/tool",
        ] {
            assert_eq!(name(arg0), "./bin/tool", "{arg0}");
        }
        // A bundled bin/ls is never the host's ls, and the host's ls is never the bundled one.
        assert_eq!(name("/skill/bin/ls"), "./bin/ls");
        assert_eq!(name("ls"), "ls");
        assert_eq!(name("/usr/bin/ls"), "ls");
        assert_eq!(name("/band/bin/ls"), "ls");
        // Paths that lead to no bundled program keep the last component.
        assert_eq!(name("/skill/bin/other"), "other");
        assert_eq!(name("/skill"), "skill");
        assert_eq!(name("../bin/tool"), "tool");
        assert_eq!(name("tool"), "tool");
    }

    fn file(path: &str, data: &[u8]) -> DecodedFile {
        DecodedFile {
            path: path.into(),
            mode: 0o755,
            data: data.to_vec(),
        }
    }

    #[test]
    fn bundled_programs_are_planned_from_the_bundle() {
        let mut p = Policy::default();
        p.allow.cli = vec!["./bin/tool *".into(), "./bin/s.sh x".into(), "jq *".into()];
        p.deny.cli = vec!["./bin/s.sh *".into()];
        let compiled = CompiledPolicy::compile(&p).unwrap_or_else(|e| panic!("{e}"));
        let bundle = [
            file("bin/tool", b"\x7fELF...."),
            file("bin/s.sh", b"#!/bin/sh\necho\n"),
        ];
        let got = plan(&compiled, &bundle).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            got,
            vec![BundledProgram {
                path: "bin/tool".into(),
                name: "skill:bin:tool".into(),
                sha256: hex(&Sha256::digest(b"\x7fELF....")),
                script: None,
            }],
            "a program denied outright (`./bin/s.sh *`) is not laid out"
        );
    }
}
