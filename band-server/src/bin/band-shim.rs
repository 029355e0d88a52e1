//! `band-shim`: every wrapped name in the sandbox (`/band/bin/<name>`, `/usr/bin/<name>`) leads
//! here; `argv[0]`'s last path component names the command.
//!
//! 1. Take the name `band/shim`: band-server only talks to a shim past that point (see
//!    `band_server::layers::cli::shim` for why). Inherited descriptors stay open: the command gets them, as
//!    it would without the shim (`diff <(…) <(…)` passes `/dev/fd/63`).
//! 2. Send argv over `/band/sock` (after band-server's nonce) and wait for the verdict. If there
//!    is none, refuse to run anything (fail closed).
//! 3. Denied: the message on stderr, exit 126 (127 for a name this sandbox does not have).
//!    Allowed: exec the program band-server named, with the same arguments and environment.
//!
//! band-shim reads no file and decides nothing: the policy is band-server's. Its own file is
//! execute-only inside the sandbox, so the kernel makes it non-dumpable from the start: no other
//! process of the run can read its memory or take its descriptors.

use std::ffi::CString;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::time::Duration;

use anyhow::{anyhow, bail};
use band_server::layers::cli::shim::{self, ShimRequest, Verdict};
use band_server::sys;

const SOCK: &str = "/band/sock";

fn die(code: i32, msg: &str) -> ! {
    eprintln!("{msg}");
    std::process::exit(code);
}

fn ask(argv: &[String]) -> anyhow::Result<Verdict> {
    let conn = UnixStream::connect(SOCK).map_err(|e| anyhow!("connect {SOCK}: {e}"))?;
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(&conn);
    let mut nonce = String::new();
    reader
        .read_line(&mut nonce)
        .map_err(|e| anyhow!("no nonce: {e}"))?;
    let nonce = nonce.trim_end().to_string();
    if nonce.is_empty() || nonce == "refused" {
        bail!("band-server refused the connection ({nonce:?})");
    }
    let mut line = serde_json::to_vec(&ShimRequest {
        nonce,
        argv: argv.to_vec(),
    })?;
    line.push(b'\n');
    (&conn).write_all(&line).map_err(|e| anyhow!("send: {e}"))?;
    let mut answer = String::new();
    reader
        .read_line(&mut answer)
        .map_err(|e| anyhow!("no answer: {e}"))?;
    serde_json::from_str(answer.trim_end())
        .map_err(|e| anyhow!("band-server answered {:?}: {e}", answer.trim_end()))
}

fn main() {
    let _ = sys::set_not_dumpable();
    let comm = CString::new(shim::COMM).unwrap_or_default();
    if let Err(e) = sys::set_comm(&comm) {
        die(
            shim::EXIT_DENIED,
            &format!("band: cannot set the shim's name: {e}"),
        );
    }
    let args: Vec<String> = std::env::args().collect();
    let name = shim::command_name(args.first().map(String::as_str).unwrap_or("")).to_string();
    if name.is_empty() || name == "shim" || name == "band-shim" {
        die(
            shim::EXIT_DENIED,
            "band-shim: run a command through its name in /band/bin, not the shim itself",
        );
    }
    match ask(&args) {
        Err(e) => die(
            shim::EXIT_DENIED,
            &format!(
                "band: {name}: cannot ask band-server about the call ({e}); refusing to run it"
            ),
        ),
        Ok(Verdict::Denied { message, code }) => die(code, &message),
        Ok(Verdict::Exec(program)) => {
            let err = std::process::Command::new(&program)
                .arg0(&args[0])
                .args(&args[1..])
                .exec();
            die(
                shim::EXIT_UNKNOWN,
                &format!("band: {name}: cannot execute it: {err}"),
            );
        }
    }
}
