//! Integration tests of the `band` CLI: one binary, one module per area.
//!
//! Tests named `privileged_*` run the real sandbox (root, bubblewrap, a built band-server).
//! Without them they print `skipped: <why>` and pass, unless `BAND_TEST_MUST_RUN=1`, which turns a
//! skip into a failure. `vm_e2e` builds and boots a VM: it runs only with `BAND_TEST_VM=1` or
//! `BAND_TEST_MUST_RUN=1`.

mod common;

mod agents;
mod audit;
mod authoring;
mod cli;
mod docs;
mod exec;
mod mcp;
mod run;
mod skills;
mod vm_cli;
mod vm_e2e;
