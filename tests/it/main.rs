//! Integration tests of the `band` CLI: one binary, one module per area.
//!
//! Tests named `privileged_*` run the real sandbox (root, bubblewrap, a built band-server).
//! Without them they print `skipped: <why>` and pass, unless `BAND_TEST_MUST_RUN=1`, which turns a
//! skip into a failure. `vm_e2e` builds and boots a VM: it runs only with `BAND_TEST_VM=1` or
//! `BAND_TEST_MUST_RUN=1`.

// The whole crate is tests: its helpers, too, fail by panicking on a broken fixture (clippy.toml
// allows unwrap/expect only inside `#[test]` functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod agents;
mod audit;
mod authoring;
mod bundled;
mod cancel;
mod cli;
mod conventions;
mod corpus;
mod deps;
mod docs;
mod escapes;
mod exec;
mod format;
mod help;
mod hostile_input;
mod learn;
mod load;
mod mcp;
mod mcp_agents;
mod mcp_http;
mod redteam;
mod run;
mod sandboxd;
mod secrets;
mod shell_denials;
mod site;
mod skill_set;
mod skills;
mod targets;
mod ux;
mod vm_build;
mod vm_cli;
mod vm_e2e;
mod vm_egress;
mod vm_rootless;
mod warm;
mod workspace;
mod wrap;
