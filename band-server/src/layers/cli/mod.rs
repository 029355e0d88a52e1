//! CLI gate: the shim's decision, the verified report socket, the execute-only program cache.

pub mod execcache;
pub mod reports;
pub mod shim;
