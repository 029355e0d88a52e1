//! band-server: builds and tears down the sandbox for one run.
//!
//! Runs as root. `band-server run` serves one request per process: it reads a `RunRequest` line
//! on stdin and streams events and one result on stdout (see `band::proto`); `band-server serve`
//! ([`warm`]) serves one per connection, the same way. Kernel-facing setup is synchronous;
//! nothing here uses an async runtime. The design is in `docs/architecture.md`.
//!
//! Modules (one folder per sandbox layer under [`layers`]):
//!
//! - [`request`]: pure checks on a request (paths, bundle hash, secrets, limits, policy).
//! - [`facts`]: what the plan needs from the host, gathered before planning.
//! - [`plan`]: `plan_run`, the pure plan of a whole run (argv, cgroup ops, nft text, run dir ops).
//! - [`run`]: applies the plan, runs the script ([`run`]'s `events`), collects, tears down; a
//!   warm server's spare sandbox ([`run::spare`]).
//! - [`common`]: what the layers share, below all of them: the run's guard, what one layer
//!   hands another, shared paths, the janitor's report.
//! - [`layer`]: the shape every layer has (plan, apply, teardown, remove-stale), above the plan
//!   (its steps read it).
//! - [`layers`]: the layers and their one list:
//!   - [`layers::identity`]: per-run users `band-run-N`, leased with `flock`; their processes.
//!   - [`layers::cgroup`]: the run's cgroup (v1 or v2): limits, kill, stats.
//!   - [`layers::fs`]: the run directory (tmpfs), host mounts, hidden library executables, the
//!     run's view of `/proc`.
//!   - [`layers::cli`]: the CLI gate (programs, shim decision, report socket, program cache).
//!   - [`layers::net`]: the per-run nftables table, network namespace and relay, DNS stub and
//!     network report.
//!   - [`layers::process`]: the bubblewrap argv and the seccomp filter.
//! - [`collect`]: output, written files, insist and status, read after the run.
//! - [`observe`]: `band learn`'s observer of a run (fanotify, seccomp user notification).
//! - [`janitor`]: cleanup after servers that died mid-run, over the layers' list.
//! - [`warm`]: `band-server serve`, the warm server in a VM, on a remote host or on the host.
//! - [`config`]: `/etc/band/server.toml` and the effective limits (`min(band, cap)`).
//! - [`error`]: the setup error naming the layer that failed.
//! - [`sys`]: the system calls std lacks; the only `unsafe` code of this library. (The
//!   `band-shim` executable, `src/bin/band-shim.rs`, has the rest of band-server's: its entry
//!   and memory functions without glibc's start.)
//!
//! # What a run can and cannot do
//!
//! The script runs as a leased per-run uid (never root), in its own user, pid, ipc, uts, cgroup
//! and network namespaces (no network at all; with `allow.net`, a namespace whose only way out is
//! a relay filtered by a per-run nftables table, and a DNS stub inside it, see [`layers::net`]),
//! under `no_new_privs`, a seccomp deny list, no
//! capabilities, and a cgroup with memory, pids and CPU limits. It sees read-only system
//! libraries, band-shim under the name of each essential and declared command in `/usr/bin` and
//! `/band/bin`, a synthetic `/etc`, its skill (read-only and noexec: a program of the skill runs
//! only as a `./` command, through band-shim, see [`layers::cli::bundled`]), a copy of the
//! workspace, and noexec writable directories. Every command it runs is judged by band-server, whatever path it uses.
//!
//! Known limits, on purpose or for later:
//!
//! - `/usr/lib`, `/usr/libexec` and `/usr/share` are bound whole. The ELF executables inside the
//!   library trees (`/usr/lib/jvm/*/bin/java`, `/usr/lib/git-core/git`, …) are removed from the
//!   sandbox's view ([`layers::fs::execmask`]), except in the trees of declared commands, which keep their
//!   helpers. Scripts
//!   there stay (they need an interpreter, which is itself a command). The list is cached and
//!   refreshed when packages change or hourly, so a program installed by other means than the
//!   package manager can be visible for up to an hour.
//! - A running program can `exec` its own `/proc/self/exe` again, with other arguments, unseen by
//!   the gate: only a program that can exec a path, and only itself ([`layers::cli::execcache`];
//!   no path inside the sandbox leads to any program). The path it reports for itself names its
//!   copy on the host, which does not exist inside: a program that finds its installation from it
//!   (a JDK's `java`) does not start as a declared command.
//! - `insist.read` sees paths passed as arguments to commands, not shell redirections or
//!   builtins (`< file`, `read`), which never reach the shim.
//! - Absolute `allow.read` / `allow.write` bind the pattern's static prefix whole; the run's uid
//!   needs ordinary permission on the files. An absolute `deny` inside such a bind is refused at
//!   setup (it could not be enforced).

/// A line on band-server's stderr that never fails: the client may be gone (its end of the pipe
/// closed, an ssh session dropped), and `eprintln!` would then panic on `EPIPE` mid-teardown.
/// What cannot be written is dropped; the run's result and the janitor do not depend on it.
///
/// The line is made first and written whole, in one `write`: stderr is unbuffered, and
/// `writeln!` on it wrote each piece of the format with a call of its own (nine for a warm
/// run's log line, on the way to its result), which also let the lines of a warm server's
/// children interleave in their shared log.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut line = format!($($arg)*);
        line.push('\n');
        let _ = std::io::stderr().write_all(line.as_bytes());
    }};
}

pub(crate) mod collect;
pub mod common;
pub mod config;
pub mod deps;
pub mod error;
pub mod facts;
pub mod janitor;
pub mod layer;
#[cfg(test)]
mod layering;
pub mod layers;
pub(crate) mod observe;
pub mod plan;
pub mod request;
pub mod run;
#[cfg(feature = "sandboxd")]
pub mod sandboxd;
pub mod sys;
pub mod warm;
