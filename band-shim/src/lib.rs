//! `band-shim`: every wrapped name in the sandbox (`/band/bin/<name>`, `/usr/bin/<name>`) leads
//! here; `argv[0]`'s last path component names the command.
//!
//! 1. Take the name `band/shim`: band-server only talks to a shim past that point (see
//!    `band_server::layers::cli::shim` for why). Inherited descriptors stay open: the command gets
//!    them, as it would without the shim (`diff <(…) <(…)` passes `/dev/fd/63`).
//! 2. Send argv over `/band/sock`, with this program image's addresses (which tell band-server
//!    the line is band-shim's own), and wait for the verdict. If there is none, refuse to run
//!    anything (fail closed).
//! 3. Denied: the message on stderr, exit 126 (127 for a name this sandbox does not have).
//!    Allowed: the answer carries the program as a descriptor (`SCM_RIGHTS`, received
//!    close-on-exec); run it with `execveat(fd, "", …, AT_EMPTY_PATH)`, with the same arguments
//!    (or those band-server gave, for a `#!` script's interpreter) and environment.
//!
//! band-shim reads no file and decides nothing: the policy is band-server's, and the programs
//! are not in the sandbox: no path leads to them, only the descriptor band-server sends for an
//! allowed call. Its own file is execute-only inside the sandbox, so the kernel makes it
//! non-dumpable from the start: no other process of the run can read its memory or take its
//! descriptors.
//!
//! This crate is the whole shim: its protocol with band-server ([`proto`]), the system calls both
//! sides use ([`sys`]) and [`main`]. It depends on nothing of band-server's, so the static shim
//! links only what it needs; band-server's `band-shim` executable is one call to [`main`].

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub mod bare;
pub mod proto;
pub mod sys;

use std::ffi::CString;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use anyhow::{anyhow, bail};

use proto::{ShimRequest, Verdict};

const SOCK: &str = "/band/sock";

fn die(code: i32, msg: &str) -> ! {
    eprintln!("{msg}");
    std::process::exit(code);
}

/// Longest answer line read (a denial message names the argv, which can be long).
const MAX_ANSWER_BYTES: usize = 4 << 20;

/// Ask band-server about the call: its verdict, and the program's descriptor that came with it.
fn ask(argv: &[String]) -> anyhow::Result<(Verdict, Option<OwnedFd>)> {
    let conn = UnixStream::connect(SOCK).map_err(|e| anyhow!("connect {SOCK}: {e}"))?;
    // Started with a standard descriptor closed (`cmd 2>&-`), the socket took its number: move it
    // above 2 (`try_clone` duplicates to 3 or more), so the refusal is not written to band-server
    // and the command starts with the descriptors its caller gave, closed ones closed. (Without
    // Rust's runtime start, nothing reopens them on /dev/null: see `bin/band-shim.rs`.)
    let conn = if conn.as_raw_fd() <= 2 {
        conn.try_clone()
            .map_err(|e| anyhow!("move the connection above the standard descriptors: {e}"))?
    } else {
        conn
    };
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    let image = sys::image_addresses()
        .ok_or_else(|| anyhow!("no AT_PHDR or AT_RANDOM in the auxiliary vector"))?;
    let mut line = serde_json::to_vec(&ShimRequest {
        image,
        argv: argv.to_vec(),
    })?;
    line.push(b'\n');
    (&conn).write_all(&line).map_err(|e| anyhow!("send: {e}"))?;
    // The answer, read with recvmsg: the descriptor comes with its first bytes.
    let mut answer = Vec::new();
    let mut fd = None;
    let mut buf = [0u8; 4096];
    while !answer.contains(&b'\n') {
        let (n, got) = sys::recv_with_fd(&conn, &mut buf).map_err(|e| anyhow!("no answer: {e}"))?;
        if fd.is_none() {
            fd = got;
        }
        if n == 0 {
            bail!("band-server closed the connection without an answer");
        }
        answer.extend_from_slice(&buf[..n]);
        if answer.len() > MAX_ANSWER_BYTES {
            bail!("band-server's answer is too long");
        }
    }
    let text = String::from_utf8_lossy(&answer);
    let verdict = serde_json::from_str(text.trim_end())
        .map_err(|e| anyhow!("band-server answered {:?}: {e}", text.trim_end()))?;
    Ok((verdict, fd))
}

fn cstrings<'a>(items: impl Iterator<Item = &'a [u8]>) -> anyhow::Result<Vec<CString>> {
    items
        .map(|b| CString::new(b).map_err(|_| anyhow!("an argument contains NUL")))
        .collect()
}

/// Run `program` (the descriptor band-server sent) with `argv` and this process's environment.
fn exec(program: &OwnedFd, argv: &[String]) -> anyhow::Error {
    let env: Vec<Vec<u8>> = std::env::vars_os()
        .map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            kv
        })
        .collect();
    let (argv, envp) = match (
        cstrings(argv.iter().map(|a| a.as_bytes())),
        cstrings(env.iter().map(Vec::as_slice)),
    ) {
        (Ok(a), Ok(e)) => (a, e),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    if let Err(e) = sys::reset_signals_for_exec() {
        return e.into();
    }
    sys::execveat_fd(program.as_fd(), &argv, &envp).into()
}

/// band-shim's `main`: ask band-server, then run the program it sent or exit with its refusal.
pub fn main() -> ! {
    let _ = sys::set_not_dumpable();
    let comm = CString::new(proto::COMM).unwrap_or_default();
    if let Err(e) = sys::set_comm(&comm) {
        die(
            proto::EXIT_DENIED,
            &format!("band: cannot set the shim's name: {e}"),
        );
    }
    let args: Vec<String> = std::env::args().collect();
    let name = proto::called_as(&args).unwrap_or_else(|r| die(r.code, &r.message));
    match proto::next(&name, &args, ask(&args)) {
        proto::Next::Refuse(r) => die(r.code, &r.message),
        proto::Next::Run { program, argv } => {
            let err = exec(&program, &argv);
            die(
                proto::EXIT_UNKNOWN,
                &format!("band: {name}: cannot execute it: {err}"),
            );
        }
    }
}
