//! Running the external programs the drivers need, with errors that name the program.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use super::{Result, VmError};

/// The program and the arguments of a command line built by a pure builder.
pub fn command(argv: &[OsString]) -> Command {
    let mut c = Command::new(&argv[0]);
    c.args(&argv[1..]);
    c
}

pub fn program_name(argv: &[OsString]) -> String {
    argv.first()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Run to completion; a non-zero exit is an error carrying the last lines of stderr.
pub fn run(mut cmd: Command, program: &str) -> Result<Output> {
    cmd.stdin(Stdio::null());
    let out = cmd.output().map_err(|source| VmError::Spawn {
        program: program.to_string(),
        source,
    })?;
    if !out.status.success() {
        return Err(VmError::Command {
            program: program.to_string(),
            status: out.status.to_string(),
            stderr: tail(&out.stderr, 12),
        });
    }
    Ok(out)
}

/// Run an argv built by a pure builder.
pub fn run_argv(argv: &[OsString]) -> Result<Output> {
    run(command(argv), &program_name(argv))
}

/// The last `lines` lines of a command's output, trimmed.
pub fn tail(bytes: &[u8], lines: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// `name` on `$PATH` (or `name` itself when it is a path to an existing file).
pub fn which(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return Path::new(name).is_file().then(|| PathBuf::from(name));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs_err::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Argument helper for the builders.
pub fn os(s: impl AsRef<OsStr>) -> OsString {
    s.as_ref().to_os_string()
}

/// This process's real user id (from `/proc/self/status`).
pub fn real_uid() -> Option<u32> {
    fs_err::read_to_string("/proc/self/status")
        .ok()?
        .lines()
        .find(|l| l.starts_with("Uid:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The user this process runs as, by name, from `/etc/passwd` (`$USER` is not trusted: mmdebstrap
/// looks the real uid up the same way).
pub fn user_name() -> Option<String> {
    let uid = real_uid()?;
    let passwd = fs_err::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        let _ = f.next()?;
        (f.next()?.parse::<u32>().ok()? == uid).then(|| name.to_string())
    })
}

/// True when this process runs as root (the host target starts band-server itself; the image
/// build uses mmdebstrap's root mode).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_last_non_empty_lines() {
        assert_eq!(tail(b"a\n\nb\nc\n\n", 2), "b\nc");
        assert_eq!(tail(b"", 3), "");
    }

    #[test]
    fn a_failing_command_names_the_program_and_its_stderr() {
        let mut c = Command::new("sh");
        c.args(["-c", "echo boom >&2; exit 3"]);
        let e = run(c, "sh").unwrap_err().to_string();
        assert!(e.contains("`sh` failed") && e.contains("boom"), "{e}");
        let e = run(Command::new("/nonexistent/band-x"), "band-x")
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot start `band-x`"), "{e}");
    }

    #[test]
    fn which_finds_sh() {
        assert!(which("sh").is_some());
        assert!(which("band-no-such-program").is_none());
    }
}
