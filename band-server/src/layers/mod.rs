//! The sandbox's layers, one folder each.

pub mod cgroup;
pub mod cli;
pub mod fs;
pub mod identity;
pub mod net;
pub mod process;
