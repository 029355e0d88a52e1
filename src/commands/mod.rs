//! The command bodies (moved from `src/cli/`; their arguments move back in the next step).

pub(crate) use crate::cli::*;

pub(crate) mod audit;
pub(crate) mod doctor;
pub(crate) mod exec;
pub(crate) mod explain;
pub(crate) mod fmt;
pub(crate) mod history;
pub(crate) mod lock;
pub(crate) mod mcp;
pub(crate) mod run;
pub(crate) mod scaffold;
pub(crate) mod setup;
pub(crate) mod vm;
