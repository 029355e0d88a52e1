//! band-shim's `main` when it starts without the C library's start (`sys::bare`, static x86-64
//! Linux builds; `band-server/build.rs`): the same exchange as [`crate::main`], over raw system
//! calls. It never calls into glibc, whose start it skips: no `std` I/O, no `std::env` (argv
//! and the environment come from the initial stack), no `errno`; memory from `sys::bare`'s
//! allocator. Any error refuses to run the command (exit 126), as [`crate::main`] does.

use alloc::ffi::CString;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use crate::proto::{self, ImageAddresses, ShimRequest, Verdict};
use crate::sys::bare as sys;

extern crate alloc;

const SOCK: &[u8] = b"/band/sock";
/// Longest answer line read (as [`crate::main`]'s).
const MAX_ANSWER_BYTES: usize = 4 << 20;

fn die(code: i32, msg: &str) -> ! {
    let mut line = Vec::with_capacity(msg.len() + 1);
    line.extend_from_slice(msg.as_bytes());
    line.push(b'\n');
    let mut rest = &line[..];
    while let Ok(n) = sys::write(2, rest) {
        if n == 0 || n >= rest.len() {
            break;
        }
        rest = &rest[n..];
    }
    sys::exit(code)
}

fn os(what: &str, errno: i32) -> String {
    format!("{what}: os error {errno}")
}

/// Ask band-server about the call: its verdict, and the program's descriptor that came with it.
fn ask(argv: &[String], image: ImageAddresses) -> Result<(Verdict, Option<i32>), String> {
    let fd = sys::connect_unix(SOCK).map_err(|e| os("connect /band/sock", e))? as i32;
    sys::set_read_timeout(fd, 10).map_err(|e| os("SO_RCVTIMEO", e))?;
    let mut line = serde_json::to_vec(&ShimRequest {
        image,
        argv: argv.to_vec(),
    })
    .map_err(|e| format!("{e}"))?;
    line.push(b'\n');
    let mut rest = &line[..];
    while !rest.is_empty() {
        let n = sys::send(fd, rest).map_err(|e| os("send", e))?;
        if n == 0 {
            return Err("send: nothing written".into());
        }
        rest = &rest[n..];
    }
    // The answer: the descriptor comes with its first bytes.
    let mut answer = Vec::new();
    let mut program = None;
    let mut buf = [0u8; 4096];
    while !answer.contains(&b'\n') {
        let (n, got) = sys::recv_with_fd(fd, &mut buf).map_err(|e| os("no answer", e))?;
        match (program, got) {
            (None, Some(d)) => program = Some(d),
            (Some(_), Some(d)) => sys::close(d),
            _ => {}
        }
        if n == 0 {
            return Err("band-server closed the connection without an answer".into());
        }
        answer.extend_from_slice(&buf[..n]);
        if answer.len() > MAX_ANSWER_BYTES {
            return Err("band-server's answer is too long".into());
        }
    }
    sys::close(fd);
    let text = String::from_utf8_lossy(&answer);
    let verdict = serde_json::from_str(text.trim_end())
        .map_err(|e| format!("band-server answered {:?}: {e}", text.trim_end()))?;
    Ok((verdict, program))
}

/// The environment as `std::env::vars_os` sees it: entries with a `=` after their first byte.
fn environment(envp: &[&[u8]]) -> Vec<Vec<u8>> {
    envp.iter()
        .filter(|e| e.len() > 1 && e[1..].contains(&b'='))
        .map(|e| {
            let mut v = e.to_vec();
            v.push(0);
            v
        })
        .collect()
}

/// band-shim's `main` without glibc: ask band-server, then run the program it sent or exit with
/// its refusal.
pub fn run(argv: Vec<&'static [u8]>, envp: Vec<&'static [u8]>, image: Option<ImageAddresses>) -> ! {
    let _ = sys::prctl(libc::PR_SET_DUMPABLE, 0);
    let comm = b"band/shim\0";
    debug_assert_eq!(&comm[..comm.len() - 1], proto::COMM.as_bytes());
    if let Err(e) = sys::prctl(libc::PR_SET_NAME, comm.as_ptr() as usize) {
        die(
            proto::EXIT_DENIED,
            &os("band: cannot set the shim's name", e),
        );
    }
    let Ok(args) = argv
        .iter()
        .map(|a| String::from_utf8(a.to_vec()))
        .collect::<Result<Vec<String>, _>>()
    else {
        die(
            proto::EXIT_DENIED,
            "band: an argument is not UTF-8; refusing to run the command",
        );
    };
    let name = proto::called_as(&args).unwrap_or_else(|r| die(r.code, &r.message));
    let asked = match image {
        Some(image) => ask(&args, image),
        None => Err("no AT_PHDR or AT_RANDOM in the auxiliary vector".into()),
    };
    match proto::next(&name, &args, asked) {
        proto::Next::Refuse(r) => die(r.code, &r.message),
        proto::Next::Run {
            program,
            argv: run_argv,
        } => {
            let Ok(cargv) = run_argv
                .iter()
                .map(|a| CString::new(a.as_bytes()))
                .collect::<Result<Vec<CString>, _>>()
            else {
                die(
                    proto::EXIT_UNKNOWN,
                    &format!("band: {name}: cannot execute it: an argument contains NUL"),
                );
            };
            let env = environment(&envp);
            if let Err(e) = sys::reset_signals() {
                die(
                    proto::EXIT_UNKNOWN,
                    &os(&format!("band: {name}: cannot execute it"), e),
                );
            }
            let e = sys::execveat(program, &cargv, &env);
            die(
                proto::EXIT_UNKNOWN,
                &os(&format!("band: {name}: cannot execute it"), e),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_is_what_std_passes_on() {
        let env: Vec<&[u8]> = vec![b"A=1", b"=x", b"B", b"", b"C==", b"=D=2"];
        let got: Vec<Vec<u8>> = environment(&env);
        let want: Vec<Vec<u8>> = vec![b"A=1\0".to_vec(), b"C==\0".to_vec(), b"=D=2\0".to_vec()];
        assert_eq!(got, want);
    }
}
