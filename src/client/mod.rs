//! The client side of a run: the user's config, the run pipeline, its transports and the ledger
//! record. Everything here belongs to the host CLI (the `cli` feature).

pub mod config;
pub mod pipeline;
pub mod record;
pub mod ssh;

/// An error for the user, with a hint on how to fix it.
#[derive(Debug)]
pub struct UserError {
    pub message: String,
    pub hint: String,
}

impl std::fmt::Display for UserError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for UserError {}

pub fn user_error(message: impl Into<String>, hint: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UserError {
        message: message.into(),
        hint: hint.into(),
    })
}
