//! Integration tests: one binary, modules in `suite/`.
//!
//! Tests named `privileged_*` run the real band-server (root, bubblewrap, cgroups). Without root
//! they print `skipped: <why>` and pass, unless `BAND_TEST_MUST_RUN=1`, which turns a skip into a
//! failure.

mod suite;
