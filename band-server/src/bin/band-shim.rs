//! `band-shim`: the program behind every command name in the sandbox. Its code is the `band-shim`
//! crate's (`band-shim/src/lib.rs`), which depends on nothing of band-server's: this executable
//! uses that crate alone, so it links only the shim's few dependencies, linked static
//! (`build.rs`). Use nothing else here.
//!
//! It starts once per command, so it skips the Rust runtime's start (`no_main`): the C runtime
//! calls `main` below directly. What that start does is of no use to a process that asks one
//! question and execs: a `poll` of the standard descriptors, ignoring `SIGPIPE` (band-shim sets
//! the program's signal state itself before it execs), and the main thread's stack-overflow guard
//! (a read of `/proc/self/maps`, an alternate signal stack, two signal handlers): 17 system calls
//! of a command's ~30 before it connects. `std::env::args` still works: on glibc, std takes
//! `argv` from `.init_array`, which the C runtime runs before `main`.
// Built as a test (`cargo test --all-targets` gives every binary a harness), it keeps the
// harness's `main`: this one would replace it.
#![cfg_attr(not(test), no_main)]

/// The process's entry, called by the C runtime's start (`__libc_start_main`).
// `no_mangle` is an unsafe attribute (a symbol named `main` must be the only one): band-shim's
// executable defines no other, and band-shim's crate (a library) none at all.
#[cfg(not(test))]
#[allow(unsafe_code)]
#[unsafe(no_mangle)]
extern "C" fn main() -> std::ffi::c_int {
    band_shim::main()
}
