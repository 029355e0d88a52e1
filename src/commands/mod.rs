//! The command bodies: each parses what clap left ([`crate::cli`]), calls the library and
//! renders the answer. One module per command (`list`, `help` and `lint` are small).
//!
//! Dependency order: `crate::cli` (arguments, rendering) → `commands::skills` (finding skills)
//! → the command modules → [`dispatch`].

mod audit;
mod completions;
mod doctor;
mod exec;
mod explain;
mod fmt;
mod help;
mod history;
mod learn;
mod lint;
mod list;
mod lock;
mod mcp;
pub(crate) mod run;
mod scaffold;
mod setup;
mod setup_host;
mod skills;
mod vm;
mod wrap;

use anyhow::Result;

use crate::cli::{Cli, Command};

/// Run the command the user gave; the result is the exit code.
pub(crate) fn dispatch(cli: Cli) -> Result<u8> {
    match cli.command {
        Command::Lint(a) => lint::cmd_lint(a),
        Command::Fmt(a) => fmt::cmd_fmt(a),
        Command::Explain(a) => explain::cmd_explain(a),
        Command::List(a) => list::cmd_list(a),
        Command::Help(a) => help::cmd_help(a),
        Command::Run(a) => run::cmd_run(a),
        Command::Exec(a) => exec::cmd_exec(a),
        Command::Learn(a) => learn::cmd_learn(a),
        Command::Lock(a) => lock::cmd_lock(a),
        Command::Sign(a) => lock::cmd_sign(a),
        Command::History(a) => history::cmd_history(a),
        Command::Show(a) => history::cmd_show(a),
        Command::Audit(a) => audit::cmd_audit(a),
        Command::Init(a) => scaffold::cmd_init(a),
        Command::NewScript(a) => scaffold::cmd_new_script(a),
        Command::Mcp(a) => mcp::cmd_mcp(a),
        Command::Wrap(a) => wrap::cmd_wrap(a),
        Command::Shortcut(args) => run::cmd_shortcut(args),
        Command::Setup(a) => setup::cmd_setup(a),
        Command::Vm(a) => vm::cmd_vm(a),
        Command::Doctor(a) => doctor::cmd_doctor(a),
        Command::Completions(a) => completions::cmd_completions(a),
        Command::Man(a) => completions::cmd_man(a),
    }
}
