//! Process: the bubblewrap argv, the seccomp filter the jail installs, and the memfd guard.

pub mod apply;
pub mod bwrap;
pub mod memfd;
pub mod seccomp;

use self::bwrap::{JailExec, SandboxPlan};
use self::seccomp::DeniedSyscall;
use crate::config::ServerConfig;

use crate::layers::cli::execcache::{self, ExecTable};
use bwrap::PROGRAM_FD;

/// The process layer's part of [`crate::plan::RunPlan`].
#[derive(Debug, Clone)]
pub struct ProcessPlan {
    pub sandbox: SandboxPlan,
    /// bubblewrap and its arguments.
    pub bwrap: std::path::PathBuf,
    pub argv: Vec<std::ffi::OsString>,
    /// The deny list band-jail installs (it builds the filter from the same function).
    pub seccomp: Vec<DeniedSyscall>,
}

/// The process layer's part of [`crate::plan::RunPlan`]: what bubblewrap gets (`sandbox`, which
/// the plan makes of the other layers' parts), its argv, and the seccomp list. Pure.
pub fn plan_process(sandbox: SandboxPlan, cfg: &ServerConfig) -> ProcessPlan {
    ProcessPlan {
        argv: bwrap::build_bwrap_args(&sandbox),
        seccomp: plan_seccomp(&sandbox),
        sandbox,
        bwrap: cfg.bwrap.clone(),
    }
}

/// The deny list band-jail installs (it builds the filter from the same function), part of
/// [`crate::plan::RunPlan`]. Pure.
pub fn plan_seccomp(sandbox: &SandboxPlan) -> Vec<DeniedSyscall> {
    seccomp::denied_syscalls(seccomp::Profile {
        share_net: sandbox.share_net,
        ..Default::default()
    })
}

/// How the jail starts the entry: a `#!` script whose interpreter is one of the run's programs
/// (not itself a script) starts that program directly (what the kernel would do, minus a trip
/// through band-shim, which would only judge the skill's own entry point), from the descriptor
/// band-server passes as [`PROGRAM_FD`]; anything else is exec'd as it is. Returns the program's
/// name in the table, and how the jail runs it. `with_bash`: the entry is upstream's `run.sh`
/// without an execute bit, which upstream starts as `bash run.sh` (see
/// `band::skill::runs_with_bash`), whatever its first line says.
pub fn entry_exec(
    entry: &[u8],
    entry_path: &str,
    table: &ExecTable,
    with_bash: bool,
) -> Option<(String, JailExec)> {
    let sb = if with_bash {
        execcache::Shebang {
            path: "bash".into(),
            interp: "bash".into(),
            arg: None,
        }
    } else {
        execcache::parse_shebang(entry)?
    };
    let program = table.get(&sb.interp)?;
    if program.script.is_some() {
        return None;
    }
    let mut argv = vec![sb.interp.clone()];
    argv.extend(sb.arg.clone());
    argv.push(entry_path.to_string());
    Some((
        sb.interp,
        JailExec {
            fd: PROGRAM_FD,
            argv,
        },
    ))
}

/// The process layer: bubblewrap and the jail leave nothing behind that the other layers do not
/// remove (their processes die with the cgroup and the uid).
pub struct Process;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::cli::execcache::Program;

    #[test]
    fn upstream_run_sh_starts_with_bash_whatever_its_first_line() {
        let table = ExecTable::from([(
            "bash".to_string(),
            Program {
                file: "/state/exec/cache/k/bash".into(),
                script: None,
                argv0: None,
            },
        )]);
        let path = "/skill/scripts/resources/go/run.sh";
        let (name, exec) = entry_exec(b"echo no shebang\n", path, &table, true).unwrap();
        assert_eq!(name, "bash");
        assert_eq!(exec.argv, ["bash", path]);
        // Without the flag, a file with no `#!` is exec'd as it is; with it but no bash, none.
        assert!(entry_exec(b"echo no shebang\n", path, &table, false).is_none());
        assert!(entry_exec(b"", path, &ExecTable::new(), true).is_none());
        let (_, exec) = entry_exec(b"#!/bin/bash -e\n", path, &table, false).unwrap();
        assert_eq!(exec.argv, ["bash", "-e", path]);
    }
}
