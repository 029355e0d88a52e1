//! `band-shim`: the program behind every command name in the sandbox. Its code is the `band-shim`
//! crate's (`band-shim/src/lib.rs`), which depends on nothing of band-server's: this executable
//! uses that crate alone, so it links only the shim's few dependencies, linked static
//! (`build.rs`). Use nothing else here.
//!
//! It starts once per command, so it skips the starts it does not need (issue 17, round 6):
//! - Where `build.rs` links it static on x86-64 Linux (`band_shim_bare`), it skips the C
//!   runtime's start (its entry is `band_shim_start`, not `_start`), which hands the initial stack to
//!   `band_shim::sys::bare::start`, which relocates the image and runs `band_shim::bare::run`
//!   over raw system calls. glibc's start spent most of a command's start in `cpuid` (an exit
//!   to the hypervisor on a VM): 0.33 ms of CPU a start against 0.08 ms without it.
//! - Otherwise it skips Rust's runtime start (`no_main`: the C runtime calls `main` below), of no
//!   use to a process that asks one question and execs: a `poll` of the standard descriptors,
//!   `SIGPIPE` ignored (band-shim sets the program's signal state itself), and the main thread's
//!   stack guard (a read of `/proc/self/maps`, an alternate signal stack, two handlers).
//!   `std::env::args` still works: on glibc, std takes `argv` from `.init_array`.
// Built as a test (`cargo test --all-targets` gives every binary a harness), it keeps the
// harness's `main` and the C runtime's start.
#![cfg_attr(not(test), no_main)]

// The process's entry (`-e band_shim_start`, build.rs): the initial stack pointer to `start`
// (16-byte aligned for the call). Global assembly counts as unsafe code: `start` is the only code
// it runs. A test build keeps the C runtime's start: its entry jumps to `_start`.
#[cfg(band_shim_bare)]
#[allow(unsafe_code)]
mod entry {
    #[cfg(not(test))]
    core::arch::global_asm!(
        ".globl band_shim_start",
        "band_shim_start:",
        "xor ebp, ebp",
        "mov rdi, rsp",
        "and rsp, -16",
        "call {entry}",
        "ud2",
        entry = sym band_shim::sys::bare::start,
    );
    #[cfg(test)]
    core::arch::global_asm!(".globl band_shim_start", "band_shim_start:", "jmp _start");
}

/// Memory from `mmap` (glibc's `malloc` needs the start this build skips).
#[cfg(all(not(test), band_shim_bare))]
#[global_allocator]
static ALLOC: band_shim::sys::bare::Alloc = band_shim::sys::bare::Alloc;

// The memory functions compiled code calls: glibc's are picked by CPU at the start this build
// skips. (`no_mangle` is an unsafe attribute: these are the only definitions linked.)
#[cfg(all(not(test), band_shim_bare))]
mod mem {
    #![allow(unsafe_code)]
    use band_shim::sys::bare;

    /// # Safety
    /// C's `memcpy`.
    #[unsafe(no_mangle)]
    unsafe extern "C" fn memcpy(d: *mut u8, s: *const u8, n: usize) -> *mut u8 {
        // SAFETY: the caller's contract is C's, the same as `bare::memcpy`'s.
        unsafe { bare::memcpy(d, s, n) }
    }

    /// # Safety
    /// C's `memmove`.
    #[unsafe(no_mangle)]
    unsafe extern "C" fn memmove(d: *mut u8, s: *const u8, n: usize) -> *mut u8 {
        // SAFETY: the caller's contract is C's, the same as `bare::memmove`'s.
        unsafe { bare::memmove(d, s, n) }
    }

    /// # Safety
    /// C's `memset`.
    #[unsafe(no_mangle)]
    unsafe extern "C" fn memset(d: *mut u8, c: i32, n: usize) -> *mut u8 {
        // SAFETY: the caller's contract is C's, the same as `bare::memset`'s.
        unsafe { bare::memset(d, c, n) }
    }

    /// # Safety
    /// C's `memcmp`.
    #[unsafe(no_mangle)]
    unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
        // SAFETY: the caller's contract is C's, the same as `bare::memcmp`'s.
        unsafe { bare::memcmp(a, b, n) }
    }

    /// # Safety
    /// C's `bcmp`.
    #[unsafe(no_mangle)]
    unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
        // SAFETY: the caller's contract is C's, the same as `bare::memcmp`'s.
        unsafe { bare::memcmp(a, b, n) }
    }
}

/// The process's entry, called by the C runtime's start (`__libc_start_main`), where that start
/// runs (not in a `band_shim_bare` build, whose start files reference it all the same).
// `no_mangle` is an unsafe attribute (a symbol named `main` must be the only one): band-shim's
// executable defines no other, and band-shim's crate (a library) none at all.
#[cfg(not(test))]
#[allow(unsafe_code)]
#[unsafe(no_mangle)]
extern "C" fn main() -> std::ffi::c_int {
    band_shim::main()
}
