//! `band history` and `band show` arguments.

use band::ledger as lg;
use band::proto::Status;

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct HistoryArgs {
    #[command(subcommand)]
    pub(crate) action: Option<HistoryAction>,
    /// Only runs of this skill (`text`) or script (`text/count`).
    #[arg(long, value_name = "SKILL[/SCRIPT]")]
    pub(crate) skill: Option<String>,
    /// Only runs that ended with this status (`ok`, `denied`, `integrity_failed`, …).
    #[arg(long, value_parser = parse_status)]
    pub(crate) status: Option<Status>,
    /// Only runs started within this age: `90s`, `15m`, `1h`, `7d`, `2w`.
    #[arg(long, value_name = "AGE", value_parser = parse_age)]
    pub(crate) since: Option<u64>,
    /// At most this many runs, newest first (0: all).
    #[arg(long, default_value_t = 20)]
    pub(crate) limit: usize,
    /// Print the records as JSON (the ledger's format) instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum HistoryAction {
    /// Drop the records older than an age; a checkpoint record keeps the chain verifiable.
    Prune {
        /// `30d`, `2w`, `12h`, …: records of runs that ended before then are dropped.
        #[arg(long, value_name = "AGE", value_parser = parse_age)]
        older_than: u64,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, clap::Args)]
pub(crate) struct ShowArgs {
    /// A run id (or an unambiguous prefix of one), as `band history` lists them.
    pub(crate) run_id: String,
    /// Print the record as JSON (the ledger's format).
    #[arg(long)]
    pub(crate) json: bool,
}

/// A bad `--status` or age value (clap prints it after the flag).
#[derive(Debug, thiserror::Error)]
enum BadValue {
    #[error("unknown status; one of: {}", Status::ALL.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", "))]
    Status,
    /// The age parser's message.
    #[error("{0}; days and weeks are `7d`, `2w`")]
    Age(String),
}

fn parse_status(s: &str) -> std::result::Result<Status, BadValue> {
    Status::ALL
        .into_iter()
        .find(|st| st.as_str() == s)
        .ok_or(BadValue::Status)
}

fn parse_age(s: &str) -> std::result::Result<u64, BadValue> {
    lg::parse_age(s).map_err(|e| BadValue::Age(e.to_string()))
}
