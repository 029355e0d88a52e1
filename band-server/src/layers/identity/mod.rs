//! Identity: the run's uid, leased from a pool of per-run users.

pub mod procs;
pub mod uidpool;
