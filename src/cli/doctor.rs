//! `band doctor` arguments.

#[derive(Debug, clap::Args)]
pub(crate) struct DoctorArgs {
    /// Print the checks as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}
