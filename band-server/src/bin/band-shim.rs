//! `band-shim`: every name in `/band/bin` is a symlink to it (argv[0] dispatch).
//!
//! 1. Become non-dumpable (other processes of the run's uid cannot ptrace it, read its memory or
//!    take its descriptors).
//! 2. Read `/band/policy.json` (a fixed path: nothing the script controls, such as the
//!    environment, chooses the policy).
//! 3. Decide with the same function band-server uses.
//! 4. Report the call over `/band/sock` and wait for band-server's `ok`. If the report cannot be
//!    made, refuse to run the command (fail closed).
//! 5. Denied: `band: denied: …` on stderr, exit 126. Allowed: exec `/usr/bin/<name>` with the same
//!    arguments and environment.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::time::Duration;

use band_server::shim::{self, CliRules, ShimPolicy, ShimReport};
use band_server::sys;

const POLICY: &str = "/band/policy.json";
const SOCK: &str = "/band/sock";

fn die(code: i32, msg: &str) -> ! {
    eprintln!("{msg}");
    std::process::exit(code);
}

fn report(r: &mut ShimReport) -> Result<(), String> {
    let conn = UnixStream::connect(SOCK).map_err(|e| format!("connect {SOCK}: {e}"))?;
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(&conn);
    let mut nonce = String::new();
    reader
        .read_line(&mut nonce)
        .map_err(|e| format!("no nonce: {e}"))?;
    r.nonce = nonce.trim_end().to_string();
    let mut line = serde_json::to_vec(r).map_err(|e| e.to_string())?;
    line.push(b'\n');
    (&conn).write_all(&line).map_err(|e| format!("send: {e}"))?;
    let mut answer = String::new();
    reader
        .read_line(&mut answer)
        .map_err(|e| format!("no answer: {e}"))?;
    if answer.trim_end() == "ok" {
        Ok(())
    } else {
        Err(format!("band-server answered {:?}", answer.trim_end()))
    }
}

fn main() {
    let _ = sys::set_not_dumpable();
    let mut args: Vec<String> = std::env::args().collect();
    let name = shim::command_name(args.first().map(String::as_str).unwrap_or("")).to_string();
    if name.is_empty() || name == "shim" || name == "band-shim" {
        die(
            shim::EXIT_DENIED,
            "band-shim: run a command through its name in /band/bin, not the shim itself",
        );
    }
    let text = std::fs::read(POLICY).unwrap_or_else(|e| {
        die(
            shim::EXIT_DENIED,
            &format!("band: cannot read {POLICY}: {e}"),
        )
    });
    let policy: ShimPolicy = serde_json::from_slice(&text)
        .unwrap_or_else(|e| die(shim::EXIT_DENIED, &format!("band: malformed {POLICY}: {e}")));
    let Some(real) = policy.commands.get(&name).cloned() else {
        die(
            shim::EXIT_UNKNOWN,
            &format!("band: {name}: command not available in this sandbox"),
        );
    };
    let rules = CliRules::from_policy(&policy)
        .unwrap_or_else(|e| die(shim::EXIT_DENIED, &format!("band: {POLICY}: {e}")));
    args[0] = name.clone();
    let call = shim::decide(&rules, &args);
    let mut r = ShimReport {
        nonce: String::new(),
        argv: call.argv.clone(),
        allowed: call.allowed,
        rule: call.rule.clone(),
    };
    if let Err(e) = report(&mut r) {
        die(
            shim::EXIT_DENIED,
            &format!(
                "band: {name}: cannot report the call to band-server ({e}); refusing to run it"
            ),
        );
    }
    if !call.allowed {
        die(shim::EXIT_DENIED, &shim::denied_message(&call));
    }
    let err = std::process::Command::new(&real)
        .arg0(&name)
        .args(&args[1..])
        .exec();
    die(
        shim::EXIT_UNKNOWN,
        &format!("band: {name}: cannot execute {real}: {err}"),
    );
}
