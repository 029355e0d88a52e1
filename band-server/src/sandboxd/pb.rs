//! The messages and service of `proto/process/v1/process.proto`, generated at build time
//! (protox and tonic-prost-build, `build.rs`).
#![allow(clippy::all, clippy::pedantic, missing_docs)]

tonic::include_proto!("process.v1");
