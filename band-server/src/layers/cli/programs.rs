//! The CLI layer's plan: which programs a run gets (declared commands, the essentials, the
//! interpreters of declared scripts) and the policy band-shim's calls are judged by.

use std::path::{Path, PathBuf};

use band::policy::{CompiledPolicy, Policy};
use band::proto::Layer;

use crate::error::{SetupError, SetupResult};
use crate::layers::cli::{execcache, shim, shim::ShimPolicy};
use crate::request;

/// A program of the CLI layer: a wrapped name and the host file behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryBind {
    pub name: String,
    /// The canonical host file.
    pub host: PathBuf,
}

/// The pieces of the CLI layer: binaries to bind, wrapper names, and the shim's policy file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliPlan {
    pub binaries: Vec<BinaryBind>,
    pub policy: ShimPolicy,
}

/// Build the CLI layer from the declared commands. `resolve` finds host binaries and `head`
/// reads their first bytes (see `facts::HostFacts`). A declared command missing on the host fails closed; a missing essential is skipped.
pub fn plan_cli(
    policy: &Policy,
    compiled: &CompiledPolicy,
    resolve: &dyn Fn(&str) -> Option<PathBuf>,
    head: &dyn Fn(&Path) -> Vec<u8>,
) -> SetupResult<CliPlan> {
    let declared = compiled.cli.commands();
    let mut binaries = Vec::new();
    let mut essentials = Vec::new();
    for name in &declared {
        request::check_command_name(name)?;
        let host = resolve(name).ok_or_else(|| {
            SetupError::new(
                Layer::Cli,
                format!("declared command `{name}` is not installed on this host"),
            )
            .with_hint(format!(
                "install `{name}` where band-server runs, or remove it from allow.cli"
            ))
        })?;
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
        policy: ShimPolicy {
            allow,
            deny: policy.deny.cli.clone(),
            essentials,
        },
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
        let plan = plan_cli(&p, &compiled, &fake_resolve, &|_| Vec::new())
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
    fn a_declared_command_missing_on_the_host_fails_closed() {
        let p = policy(&["kubectl get *"]);
        let compiled = CompiledPolicy::compile(&p).unwrap_or_else(|e| panic!("{e}"));
        let got = plan_cli(&p, &compiled, &fake_resolve, &|_| Vec::new());
        assert!(
            matches!(&got, Err(e) if e.layer == Layer::Cli && e.message.contains("kubectl")),
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
            &|_| Some(PathBuf::from("/usr/bin/sudo")),
            &|_| Vec::new(),
        );
        assert!(matches!(&got, Err(e) if e.layer == Layer::Cli), "{got:?}");
    }
}
