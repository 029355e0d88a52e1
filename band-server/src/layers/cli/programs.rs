//! The CLI layer's plan: which programs a run gets (declared commands, the essentials, the
//! interpreters of declared scripts, the skill's own programs that `./` patterns declare) and
//! the policy band-shim's calls are judged by.

use std::path::{Path, PathBuf};

use band::policy::{CompiledPolicy, Policy};
use band::proto::Layer;

use crate::error::{SetupError, SetupResult};
use crate::layers::cli::bundled::{self, BundledProgram};
use crate::layers::cli::{execcache, shim, shim::ShimPolicy};
use crate::request::{self, DecodedFile};

/// A program of the CLI layer: a wrapped name and the host file behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BinaryBind {
    pub(crate) name: String,
    /// The canonical host file.
    pub(crate) host: PathBuf,
}

/// The pieces of the CLI layer: binaries to bind, wrapper names, and the shim's policy file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliPlan {
    pub(crate) binaries: Vec<BinaryBind>,
    /// The skill's programs the policy declares (`./bin/tool *`): band-shim is bound over each
    /// at `/skill/<path>`, and the file joins the program table (see [`bundled`]).
    pub(crate) bundled: Vec<BundledProgram>,
    pub policy: ShimPolicy,
    /// Declared (allowed, not insisted) commands that are not installed on this host: absent in
    /// the sandbox, and named in the run's result (`RunResult::missing_commands`).
    pub(crate) missing: Vec<MissingCommand>,
}

/// An allowed command that is not on this host, and the rules that name it: the run's result
/// carries it as it is.
pub(crate) use band::proto::MissingCommand;

/// Build the CLI layer from the declared commands. `resolve` finds host binaries and `head`
/// reads their first bytes (see `facts::HostFacts`). A command that `insist.cli` names and that
/// is missing on the host fails closed; a missing command that is only allowed (one of several
/// alternatives: `python *`, `python3 *`) is left out of the sandbox and listed in
/// [`CliPlan::missing`]; a missing essential is skipped.
/// `bundle`: the skill's files, where `./` commands are found.
pub(crate) fn plan_cli(
    policy: &Policy,
    compiled: &CompiledPolicy,
    bundle: &[DecodedFile],
    resolve: &dyn Fn(&str) -> Option<PathBuf>,
    head: &dyn Fn(&Path) -> Vec<u8>,
) -> SetupResult<CliPlan> {
    let declared = compiled.cli.commands();
    let bundled = bundled::plan(compiled, bundle)?;
    let mut binaries = Vec::new();
    let mut essentials = Vec::new();
    let mut missing = Vec::new();
    let rules_of = |rules: &[String], name: &str| -> Vec<String> {
        rules
            .iter()
            .filter(|r| {
                band::policy::cli::CliPattern::parse(r).is_ok_and(|p| p.command() == Some(name))
            })
            .cloned()
            .collect()
    };
    for name in &declared {
        if band::policy::cli::bundled_path(name).is_some() {
            continue;
        }
        request::check_command_name(name)?;
        let Some(host) = resolve(name) else {
            let insisted = rules_of(&policy.insist.cli, name);
            if let Some(rule) = insisted.first() {
                return Err(SetupError::new(
                    Layer::Cli,
                    format!("insist.cli `{rule}`: `{name}` is not installed on this host"),
                )
                .with_hint(format!(
                    "install `{name}` where band-server runs, or remove `{rule}` from insist.cli"
                )));
            }
            missing.push(MissingCommand {
                name: name.clone(),
                rules: rules_of(&policy.allow.cli, name),
            });
            continue;
        };
        binaries.push(BinaryBind {
            name: name.clone(),
            host,
        });
    }
    for name in shim::ESSENTIALS {
        if declared.contains(*name) {
            essentials.push(name.to_string());
            continue;
        }
        if let Some(host) = resolve(name) {
            binaries.push(BinaryBind {
                name: name.to_string(),
                host,
            });
            essentials.push(name.to_string());
        }
    }
    // A declared `#!` command needs its interpreter in the sandbox. It is wrapped like any
    // command, but (unless also declared or essential) only runs the scripts it belongs to: see
    // `shim::resolve_call`.
    let interpreters: Vec<String> = binaries
        .iter()
        .filter(|b| declared.contains(&b.name))
        .filter_map(|b| execcache::parse_shebang(&head(&b.host)))
        .chain(bundled.iter().filter_map(|b| b.script.clone()))
        .flat_map(|sb| [sb.interp.clone(), sb.effective_interpreter().to_string()])
        .collect();
    for name in interpreters {
        if binaries.iter().any(|b| b.name == name) || request::check_command_name(&name).is_err() {
            continue;
        }
        let host = resolve(&name).ok_or_else(|| {
            SetupError::new(
                Layer::Cli,
                format!(
                    "the interpreter `{name}` of a declared command is not installed on this host"
                ),
            )
        })?;
        binaries.push(BinaryBind { name, host });
    }
    binaries.sort_by(|a, b| a.name.cmp(&b.name));
    let mut allow = policy.allow.cli.clone();
    for p in &policy.insist.cli {
        if !allow.contains(p) {
            allow.push(p.clone());
        }
    }
    Ok(CliPlan {
        binaries,
        bundled,
        policy: ShimPolicy {
            allow,
            deny: policy.deny.cli.clone(),
            essentials,
        },
        missing,
    })
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn policy(allow_cli: &[&str]) -> Policy {
        let mut p = Policy::default();
        p.allow.cli = allow_cli.iter().map(|s| s.to_string()).collect();
        p
    }

    fn fake_resolve(name: &str) -> Option<PathBuf> {
        match name {
            "sh" => Some(PathBuf::from("/usr/bin/dash")),
            "cat" | "jq" | "python3" => Some(PathBuf::from(format!("/usr/bin/{name}"))),
            _ => None,
        }
    }

    #[test]
    fn cli_plan_binds_essentials_and_declared_commands() {
        let p = policy(&["jq -r *"]);
        let compiled = CompiledPolicy::compile(&p).unwrap_or_else(|e| panic!("{e}"));
        let plan = plan_cli(&p, &compiled, &[], &fake_resolve, &|_| Vec::new())
            .unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<(&str, &str)> = plan
            .binaries
            .iter()
            .map(|b| (b.name.as_str(), b.host.to_str().unwrap_or("")))
            .collect();
        assert_eq!(
            names,
            vec![
                ("cat", "/usr/bin/cat"),
                ("jq", "/usr/bin/jq"),
                ("sh", "/usr/bin/dash")
            ]
        );
        assert_eq!(
            plan.policy.essentials,
            vec!["sh".to_string(), "cat".to_string()]
        );
        assert_eq!(plan.policy.allow, vec!["jq -r *".to_string()]);
    }

    #[test]
    fn the_skills_programs_come_from_the_bundle_with_their_interpreters() {
        let p = policy(&["./bin/tool *", "./bin/helper.py"]);
        let compiled = CompiledPolicy::compile(&p).unwrap_or_else(|e| panic!("{e}"));
        let file = |path: &str, data: &[u8]| DecodedFile {
            path: path.into(),
            mode: 0o755,
            data: data.to_vec(),
        };
        let bundle = [
            file("bin/tool", b"\x7fELF"),
            file("bin/helper.py", b"#!/usr/bin/python3\n"),
        ];
        let plan = plan_cli(&p, &compiled, &bundle, &fake_resolve, &|_| Vec::new())
            .unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<&str> = plan.bundled.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["skill:bin:helper.py", "skill:bin:tool"]);
        let binaries: Vec<&str> = plan.binaries.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(
            binaries,
            ["cat", "python3", "sh"],
            "no host lookup of ./ names"
        );
        assert_eq!(plan.policy.essentials, ["sh", "cat"]);
        // A ./ rule naming no file of the bundle fails closed.
        let got = plan_cli(&p, &compiled, &bundle[..1], &fake_resolve, &|_| Vec::new());
        assert!(
            matches!(&got, Err(e) if e.layer == Layer::Cli && e.message.contains("./bin/helper.py")),
            "{got:?}"
        );
    }

    #[test]
    fn a_missing_alternative_is_left_out_and_a_missing_insisted_command_fails_closed() {
        // `python` is not on this host, `python3` is: the band runs without `python`.
        let p = policy(&["python *", "python -c *", "python3 *"]);
        let compiled = CompiledPolicy::compile(&p).unwrap_or_else(|e| panic!("{e}"));
        let plan = plan_cli(&p, &compiled, &[], &fake_resolve, &|_| Vec::new())
            .unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<&str> = plan.binaries.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["cat", "python3", "sh"]);
        assert_eq!(
            plan.missing,
            [MissingCommand {
                name: "python".into(),
                rules: vec!["python *".into(), "python -c *".into()],
            }]
        );
        assert_eq!(
            plan.missing[0].describe(),
            "`python` (allow.cli `python *`, `python -c *`)"
        );
        // Insisted, the same command is an error naming it and its rule.
        let mut p = policy(&["python3 *"]);
        p.insist.cli = vec!["kubectl get *".into()];
        let compiled = CompiledPolicy::compile(&p).unwrap_or_else(|e| panic!("{e}"));
        let got = plan_cli(&p, &compiled, &[], &fake_resolve, &|_| Vec::new());
        assert!(
            matches!(&got, Err(e) if e.layer == Layer::Cli
                && e.message == "insist.cli `kubectl get *`: `kubectl` is not installed on this host"),
            "{got:?}"
        );
    }

    #[test]
    fn sudo_can_never_be_declared() {
        let p = policy(&["sudo *"]);
        let compiled = CompiledPolicy::compile(&p).unwrap_or_else(|e| panic!("{e}"));
        let got = plan_cli(
            &p,
            &compiled,
            &[],
            &|_| Some(PathBuf::from("/usr/bin/sudo")),
            &|_| Vec::new(),
        );
        assert!(matches!(&got, Err(e) if e.layer == Layer::Cli), "{got:?}");
    }
}
