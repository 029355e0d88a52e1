//! `band-jail --secrets-fd N [--status-fd M] -- /skill/<entry>`: the last step inside the sandbox.
//!
//! Synchronous, single-threaded, in this order:
//!
//! 0. write `up` to the status fd: band-server covers the host's entries of the run's `/proc`
//!    now, from outside, while the jail waits for its input (`layers::fs::proc_cover`);
//! 1. read band-server's input from fd N until EOF, close it: the secrets, and how to start the
//!    entry (`bwrap::JailInput`: a `#!` entry starts its interpreter's program directly, from the
//!    descriptor band-server passed, since no path inside the sandbox leads to it);
//! 2. `RLIMIT_CORE = 0`, `PR_SET_NO_NEW_PRIVS`, no `ADDR_NO_RANDOMIZE` in the persona (so every
//!    program is mapped at random addresses), a Landlock domain scoping abstract unix sockets
//!    and signals to the sandbox (`--ipc-scope required` fails when the kernel cannot; every run
//!    has a network namespace of its own, so the host's abstract sockets are out of reach
//!    either way and `best-effort` is the default);
//! 3. close every fd above 2 (the status fd and the program's are kept, close-on-exec);
//! 4. build the environment (bubblewrap's `--setenv` values plus the secrets) and the argv;
//!    reset `SIGPIPE` (the Rust runtime ignores it, and an ignored signal stays ignored across
//!    `exec`) and the signal mask;
//! 5. install the seccomp program, last, so nothing above runs under it (`band learn`: an
//!    observing filter first, its listener sent to band-server on `JailInput::observe_fd`);
//! 6. write `ok` to the status fd and `execve` the entry (or `execveat` its interpreter).
//!
//! Any failure: `band-jail: <layer>: <message>` on stderr, `err <layer> <message>` on the status
//! fd, exit 125. band-server turns that into `setup_failed` with that layer.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::ffi::OsStrExt;

use anyhow::{anyhow, bail};
use band::proto::{self, Layer};
use band_server::layers::process::{bwrap, seccomp};
use band_server::sys;

const EXIT_JAIL: i32 = 125;

struct Args {
    secrets_fd: i32,
    status_fd: Option<i32>,
    ipc_scope_required: bool,
    command: Vec<String>,
}

fn parse_args(args: &[String]) -> anyhow::Result<Args> {
    let mut secrets_fd = None;
    let mut status_fd = None;
    let mut ipc_scope_required = false;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--secrets-fd" => {
                secrets_fd = Some(
                    args.get(i + 1)
                        .and_then(|v| v.parse().ok())
                        .ok_or_else(|| anyhow!("--secrets-fd needs a number"))?,
                );
                i += 2;
            }
            "--status-fd" => {
                status_fd = Some(
                    args.get(i + 1)
                        .and_then(|v| v.parse().ok())
                        .ok_or_else(|| anyhow!("--status-fd needs a number"))?,
                );
                i += 2;
            }
            "--ipc-scope" => {
                ipc_scope_required = match args.get(i + 1).map(String::as_str) {
                    Some("required") => true,
                    Some("best-effort") => false,
                    _ => bail!("--ipc-scope needs `required` or `best-effort`"),
                };
                i += 2;
            }
            "--" => {
                let command = args[i + 1..].to_vec();
                if command.is_empty() {
                    bail!("no command after --");
                }
                return Ok(Args {
                    secrets_fd: secrets_fd.ok_or_else(|| anyhow!("--secrets-fd is required"))?,
                    status_fd,
                    ipc_scope_required,
                    command,
                });
            }
            other => bail!("unexpected argument {other:?}"),
        }
    }
    Err(anyhow!(
        "usage: band-jail --secrets-fd N [--status-fd M] -- COMMAND"
    ))
}

fn fail(status_fd: Option<i32>, layer: Layer, msg: &str) -> ! {
    eprintln!("band-jail: {}: {msg}", layer.as_str());
    if let Some(fd) = status_fd {
        let _ = sys::write_fd(
            fd,
            format!("err {} {}\n", layer.as_str(), msg.replace('\n', " ")).as_bytes(),
        );
    }
    std::process::exit(EXIT_JAIL);
}

/// Landlock scopes: no connecting to abstract unix sockets made outside the sandbox, no signals
/// to processes outside it.
fn restrict_ipc(required: bool) -> anyhow::Result<()> {
    use landlock::{CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetStatus, Scope};
    let level = if required {
        CompatLevel::HardRequirement
    } else {
        CompatLevel::BestEffort
    };
    let status = Ruleset::default()
        .set_compatibility(level)
        .scope(Scope::AbstractUnixSocket | Scope::Signal)
        .and_then(|r| r.create())
        .and_then(|r| r.restrict_self())
        .map_err(|e| {
            anyhow!(
                "this kernel's Landlock cannot scope abstract unix sockets (needs Linux 6.12+): {e}"
            )
        })?;
    if required && status.ruleset != RulesetStatus::FullyEnforced {
        bail!(
            "Landlock IPC scoping is {:?} on this kernel (needs Linux 6.12+)",
            status.ruleset
        );
    }
    Ok(())
}

fn env_name_ok(name: &str) -> bool {
    let mut b = name.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
        && !proto::env::RESERVED.contains(&name)
        && !proto::env::RESERVED_PREFIXES
            .iter()
            .any(|p| name.starts_with(p))
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = match parse_args(&argv) {
        Ok(a) => a,
        Err(m) => fail(None, Layer::Process, &m.to_string()),
    };
    let st = args.status_fd;

    // 0. Say that bubblewrap's sandbox is built and the jail is waiting for its input:
    // band-server covers the host's entries of /proc now, from outside (`layers::fs::proc_cover`),
    // before it writes the input, so before anything of the skill runs.
    if let Some(fd) = st
        && let Err(e) = sys::write_fd(fd, band_server::layers::fs::proc_cover::READY)
    {
        fail(None, Layer::Process, &format!("status fd: {e}"));
    }

    // 1. Secrets, and how to start the entry.
    let input: bwrap::JailInput = {
        let fd = sys::take_inherited_fd(args.secrets_fd)
            .unwrap_or_else(|e| fail(st, Layer::Secrets, &format!("fd {}: {e}", args.secrets_fd)));
        let mut text = Vec::new();
        if let Err(e) = std::fs::File::from(fd)
            .take(16 << 20)
            .read_to_end(&mut text)
        {
            fail(st, Layer::Secrets, &format!("cannot read secrets: {e}"));
        }
        serde_json::from_slice(&text)
            .unwrap_or_else(|e| fail(st, Layer::Secrets, &format!("malformed secrets: {e}")))
    };
    let secrets = input.secrets;
    let entry_env = input.env;
    let (program_fd, mut command) = match input.exec {
        Some(x) => {
            let fd = sys::take_inherited_fd(x.fd).unwrap_or_else(|e| {
                fail(
                    st,
                    Layer::Process,
                    &format!("the entry's interpreter (fd {}): {e}", x.fd),
                )
            });
            (Some(fd), x.argv)
        }
        None => (None, args.command.clone()),
    };
    // An argv-style script's words (`band wrap`), after the entry.
    command.extend(input.args);

    // 2. Process hardening.
    if let Err(e) = sys::disable_core_dumps() {
        fail(
            st,
            Layer::Process,
            &format!("failed to set RLIMIT_CORE: {e}"),
        );
    }
    if let Err(e) = sys::set_no_new_privs() {
        fail(
            st,
            Layer::Seccomp,
            &format!("failed to set no_new_privs: {e}"),
        );
    }

    // Programs mapped at random addresses, whatever persona band-server was started with: the
    // CLI gate tells one program of a shim's process from the next by them
    // (`reports::Image`), and seccomp keeps the script from turning it off.
    if let Err(e) = sys::clear_addr_no_randomize() {
        fail(
            st,
            Layer::Process,
            &format!("cannot clear ADDR_NO_RANDOMIZE from the persona: {e}"),
        );
    }

    if let Err(e) = restrict_ipc(args.ipc_scope_required) {
        fail(st, Layer::Network, &e.to_string());
    }

    // 3. No inherited descriptors beyond stdio.
    let observe_sock = input.observe_fd.map(|n| {
        sys::take_inherited_fd(n)
            .map(std::os::unix::net::UnixStream::from)
            .unwrap_or_else(|e| {
                fail(
                    st,
                    Layer::Seccomp,
                    &format!("observer socket (fd {n}): {e}"),
                )
            })
    });
    let keep: Vec<i32> = st
        .into_iter()
        .chain(program_fd.as_ref().map(AsRawFd::as_raw_fd))
        .chain(observe_sock.as_ref().map(AsRawFd::as_raw_fd))
        .collect();
    if let Err(e) = sys::close_fds_except(&keep) {
        fail(
            st,
            Layer::Process,
            &format!("failed to close inherited fds: {e}"),
        );
    }

    // 4. Environment and argv, prepared before seccomp so nothing allocates after it.
    let mut env: BTreeMap<Vec<u8>, Vec<u8>> = std::env::vars_os()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect();
    for (k, v) in &entry_env {
        env.insert(k.as_bytes().to_vec(), v.as_bytes().to_vec());
    }
    for (k, v) in &secrets {
        if !env_name_ok(k) {
            fail(
                st,
                Layer::Secrets,
                &format!("secret name {k:?} is not allowed"),
            );
        }
        env.insert(k.as_bytes().to_vec(), v.as_bytes().to_vec());
    }
    let envp: Vec<CString> = env
        .into_iter()
        .map(|(mut k, v)| {
            k.push(b'=');
            k.extend(v);
            CString::new(k).unwrap_or_else(|_| fail(st, Layer::Secrets, "environment contains NUL"))
        })
        .collect();
    let program_c = CString::new(args.command[0].as_bytes())
        .unwrap_or_else(|_| fail(st, Layer::Process, "program contains NUL"));
    let cargv: Vec<CString> = command
        .iter()
        .map(|a| {
            CString::new(a.as_bytes())
                .unwrap_or_else(|_| fail(st, Layer::Process, "argument contains NUL"))
        })
        .collect();
    let program = seccomp::build_program(input.seccomp)
        .unwrap_or_else(|e| fail(st, Layer::Seccomp, &e.to_string()));
    drop(secrets);

    // The signal state a program expects (not the Rust runtime's ignored SIGPIPE).
    if let Err(e) = sys::reset_signals_for_exec() {
        fail(st, Layer::Process, &format!("failed to reset signals: {e}"));
    }

    // 5. seccomp, last. `band learn` first: the observing filter, whose listener goes to
    // band-server (held in the socket until it reads it, so the first observed call, the exec
    // below, waits for band-server rather than failing); then the deny filter.
    if let Some(sock) = observe_sock {
        let listener = sys::seccomp_listener(&seccomp::notify_program()).unwrap_or_else(|e| {
            fail(
                st,
                Layer::Seccomp,
                &format!("cannot install the observing filter (seccomp user notification, Linux 5.5 or later): {e}"),
            )
        });
        if let Err(e) = sys::send_with_fd(&sock, b"l", listener.as_fd()) {
            fail(
                st,
                Layer::Seccomp,
                &format!("cannot pass the observing filter's listener: {e}"),
            );
        }
        drop(listener);
        drop(sock);
    }
    if let Err(e) = seccomp::install(&program) {
        fail(st, Layer::Seccomp, &e.to_string());
    }

    // 6. exec.
    if let Some(fd) = st
        && let Err(e) = sys::write_fd(fd, b"ok\n")
    {
        fail(None, Layer::Process, &format!("status fd: {e}"));
    }
    let err = match &program_fd {
        Some(fd) => sys::execveat_fd(fd.as_fd(), &cargv, &envp),
        None => sys::execve(&program_c, &cargv, &envp),
    };
    fail(
        st,
        Layer::Process,
        &format!("cannot execute {}: {err}", args.command[0]),
    );
}
