//! `band audit` arguments.

#[derive(Debug, clap::Args)]
pub(crate) struct AuditArgs {
    #[command(subcommand)]
    pub(crate) action: AuditAction,
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum AuditAction {
    /// Check the ledger's hash chain; print the first broken record (exit 1) or the head hash.
    Verify {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}
