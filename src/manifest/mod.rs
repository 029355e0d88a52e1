//! BAND.md parsing (in progress).
pub mod locate;
