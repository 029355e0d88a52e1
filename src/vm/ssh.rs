//! The SSH transport, through the system OpenSSH client (`ssh`): a pinned host key, key
//! authentication, commands on the master's channels (see [`super::mux`]), and the band protocol's
//! framing.
//!
//! Framing is the host target's: one request line in, event lines and one result line out
//! (`band::proto`). Lines are capped ([`MAX_LINE_BYTES`]); anything that is not a protocol
//! message, a second result, or a line after the result fails the run (a VM is a boundary: its
//! output is not trusted to be well-formed).

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::keys::{self, PublicKey};
use super::{Result, VmError};
use crate::proto::{Event, Message, RunResult};

/// The longest protocol line accepted: a result carries the written files (base64), which
/// band-server caps well below this.
pub const MAX_LINE_BYTES: usize = 512 << 20;
/// The most stderr kept from a remote command.
pub const MAX_STDERR_BYTES: usize = 64 << 10;
/// Where band-server and its helpers live on a target.
pub const SERVER_DIR: &str = "/usr/local/lib/band";
/// The exit status of the run command when the target's band-server is stale (EX_TEMPFAIL).
pub const STALE_EXIT: i32 = 75;
/// band-server's own diagnostics on a target (its stdout is the protocol).
pub const SERVER_LOG: &str = "/var/log/band-server.log";

/// How to authenticate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// A private key file (band's own, or `--identity`).
    KeyFile(PathBuf),
    /// The user's ssh-agent, then the key file.
    AgentThenKey(PathBuf),
}

/// One SSH target: where, as whom, and which host key is pinned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub auth: Auth,
    /// A file holding the pinned host key (`ssh-ed25519 AAAA…`).
    pub known_host: PathBuf,
    /// Run band-server through `sudo -n` (the user is not root).
    pub sudo: bool,
    /// Lima's `ssh.config` for this machine: runs go through Lima's own master connection
    /// (see [`super::mux`]). `None`: band's own.
    pub ssh_config: Option<PathBuf>,
}

impl Endpoint {
    pub fn addr(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    fn err(&self, message: impl std::fmt::Display) -> VmError {
        VmError::Ssh {
            addr: format!("{}@{}", self.user, self.addr()),
            message: message.to_string(),
        }
    }

    /// Prefix a root command line with `sudo -n` when needed.
    pub fn as_root(&self, command: &str) -> String {
        if self.sudo {
            format!("sudo -n sh -c {}", super::image::sh_quote(command))
        } else {
            command.to_string()
        }
    }

    /// The command that serves one run. With `expected` (the SHA-256 of the `installed.json` this
    /// band would write), a target whose band-server is another build exits with
    /// [`STALE_EXIT`] before reading the request, in the same round trip. The check is a shell
    /// `test` of the build marker the install wrote ([`build_marker`]), which must exist and be no
    /// older than `installed.json` (an install by another band, even one that knows no markers,
    /// rewrites `installed.json`): under emulation every program started costs 100 ms or more, so
    /// the run starts only band-server.
    pub fn server_command(&self, expected: Option<&str>) -> String {
        let run = format!("exec {SERVER_DIR}/band-server run 2>>{SERVER_LOG}");
        match expected {
            None => self.as_root(&run),
            Some(hex) => {
                let marker = build_marker(hex);
                // With the build current and no warm server of it yet, start one in the
                // background (`band-server serve`) for the runs after this one.
                let digest: String = hex.chars().filter(char::is_ascii_hexdigit).collect();
                let sock = warm_socket(&digest);
                let warm = if self.user == "root" || self.sudo {
                    format!(
                        // The redirections hold for the whole background group: its subshell
                        // must not keep the channel's stdout open (the run would never end).
                        "{{ [ -S {sock} ] || {SERVER_DIR}/band-server serve {digest} --owner \"${{SUDO_UID:-0}}\"; }} </dev/null >/dev/null 2>>{SERVER_LOG} & "
                    )
                } else {
                    String::new()
                };
                self.as_root(&format!(
                    "{{ [ -e {marker} ] && [ ! {SERVER_DIR}/installed.json -nt {marker} ]; }} || exit {STALE_EXIT}; {warm}{run}"
                ))
            }
        }
    }
}

/// The folder of the warm band-server's socket on a target (band-server's `warm::DIR`).
pub const WARM_DIR: &str = "/run/band-serve";

/// The socket of the warm band-server of build `digest` (band-server's `warm::socket_path`).
pub fn warm_socket(digest: &str) -> String {
    let digest: String = digest.chars().filter(char::is_ascii_hexdigit).collect();
    format!("{WARM_DIR}/server-{digest}.sock")
}

/// The empty file whose name says which build is installed: `.build-<sha256 of installed.json>`
/// (`hex` is band's own digest, hex digits only).
pub fn build_marker(hex: &str) -> String {
    let hex: String = hex.chars().filter(char::is_ascii_hexdigit).collect();
    format!("{SERVER_DIR}/.build-{hex}")
}

/// A connection to a target: the system `ssh` client through band's master (or Lima's), with the
/// pinned key. Every command is a new channel on the master (see [`super::mux`]).
#[derive(Debug, Clone)]
pub struct Session {
    ep: Endpoint,
    ch: super::mux::Channel,
    /// `ConnectTimeout` for a master that must be started (seconds).
    timeout_secs: u64,
}

impl Session {
    pub fn endpoint(&self) -> &Endpoint {
        &self.ep
    }
}

/// The system `ssh` client is required: runs, setup, status, doctor and install go through it.
pub fn missing_ssh() -> VmError {
    VmError::user(
        "no `ssh` client on this machine (band reaches VMs and remote hosts with the system OpenSSH client)",
        "install it: `apt-get install openssh-client` (Debian, Ubuntu), `dnf install openssh-clients` (Fedora); macOS has it",
    )
}

/// Run `ssh … command` with `stdin`, collecting its output. Exit 255 is `ssh` itself failing.
fn ssh_output(argv: &[std::ffi::OsString], stdin: &[u8]) -> Result<ExecOutput> {
    use std::process::Stdio;
    let program = argv
        .first()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut child = super::cmd::command(argv)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| VmError::Spawn {
            program: program.clone(),
            source,
        })?;
    let mut input = child.stdin.take();
    let data = stdin.to_vec();
    // Written beside the reads, so a large upload and a chatty command never block each other.
    let writer = std::thread::spawn(move || {
        if let Some(w) = input.as_mut() {
            let _ = w.write_all(&data);
        }
        drop(input);
    });
    let out = child
        .wait_with_output()
        .map_err(|source| VmError::Spawn { program, source })?;
    let _ = writer.join();
    let mut stderr = out.stderr;
    stderr.truncate(MAX_STDERR_BYTES);
    Ok(ExecOutput {
        status: out.status.code().unwrap_or(-1),
        stdout: out.stdout,
        stderr: String::from_utf8_lossy(&stderr).trim().to_string(),
    })
}

/// The host key a server presents (for pinning a new `ssh://` target on first use): `ssh` with
/// `StrictHostKeyChecking=accept-new` into a known_hosts file of its own, empty before, which
/// then holds the key the server proved it has (the key exchange signs with it). No command
/// runs; authentication need not succeed. Only ed25519, ECDSA and RSA keys are asked for.
pub fn fetch_host_key(ep: &Endpoint, timeout: Duration) -> Result<PublicKey> {
    let ssh = super::cmd::which("ssh").ok_or_else(missing_ssh)?;
    let tmp = tempfile::tempdir().map_err(super::io_at(&std::env::temp_dir()))?;
    let kh = tmp.path().join("known_hosts");
    let mut argv: Vec<std::ffi::OsString> = vec![ssh.into()];
    for o in [
        "BatchMode=yes".to_string(),
        "StrictHostKeyChecking=accept-new".into(),
        format!("UserKnownHostsFile={}", kh.display()),
        "GlobalKnownHostsFile=/dev/null".into(),
        "HashKnownHosts=no".into(),
        "UpdateHostKeys=no".into(),
        "LogLevel=ERROR".into(),
        "ControlPath=none".into(),
        "ClearAllForwardings=yes".into(),
        "ForwardAgent=no".into(),
        "PasswordAuthentication=no".into(),
        "KbdInteractiveAuthentication=no".into(),
        "PreferredAuthentications=none".into(),
        format!("HostKeyAlgorithms={HOST_KEY_ALGORITHMS}"),
        format!("ConnectTimeout={}", timeout.as_secs().max(1)),
        format!("Port={}", ep.port),
        format!("User={}", ep.user),
    ] {
        argv.push("-o".into());
        argv.push(o.into());
    }
    argv.extend(["-F".into(), "/dev/null".into(), "-T".into(), "--".into()]);
    argv.push(ep.host.clone().into());
    argv.push("true".into());
    let out = ssh_output(&argv, b"")?;
    let text = fs_err::read_to_string(&kh).unwrap_or_default();
    key_from_known_hosts(&text).ok_or_else(|| {
        ep.err(format!(
            "could not read the host key: {}",
            if out.stderr.is_empty() {
                format!("ssh exited {}", out.status)
            } else {
                out.stderr.clone()
            }
        ))
    })?
}

/// The key of the one entry `ssh` wrote to a known_hosts file (`[host]:port keytype base64`).
/// `None` when there is none; an error when it does not parse, or there is more than one.
fn key_from_known_hosts(text: &str) -> Option<Result<PublicKey>> {
    let mut lines = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'));
    let line = lines.next()?;
    if lines.next().is_some() {
        return Some(Err(VmError::Invalid(
            "the server's first contact recorded more than one host key".into(),
        )));
    }
    let key = line.split_once(char::is_whitespace).map(|(_, k)| k.trim());
    Some(PublicKey::parse(key.unwrap_or_default()))
}

/// Host key algorithms asked for on first contact, best first. The pinned VM keys are ed25519.
const HOST_KEY_ALGORITHMS: &str = "ssh-ed25519,ecdsa-sha2-nistp256,ecdsa-sha2-nistp384,ecdsa-sha2-nistp521,rsa-sha2-512,rsa-sha2-256";

/// Compare a presented key with the pinned one.
pub fn check_pinned(pinned: &PublicKey, got: &PublicKey, addr: &str) -> Result<()> {
    if pinned == got {
        Ok(())
    } else {
        Err(VmError::HostKey {
            addr: addr.to_string(),
            pinned: pinned.fingerprint(),
            got: got.fingerprint(),
        })
    }
}

/// Connect (or reuse the master), with the pinned host key checked by `ssh` against a
/// known_hosts file holding only that key, and key authentication; `true` runs to prove it.
/// A refused host key is [`VmError::HostKey`], naming the pinned key.
pub fn connect(ep: &Endpoint, timeout: Duration) -> Result<Session> {
    let pinned = keys::read_public(&ep.known_host).map_err(|e| {
        ep.err(format!(
            "no pinned host key ({e}); run `band setup` for this target"
        ))
    })?;
    if let Auth::KeyFile(p) = &ep.auth {
        keys::check_private(p)?;
    }
    let ch = super::mux::channel(ep)?.ok_or_else(missing_ssh)?;
    let sess = Session {
        ep: ep.clone(),
        ch,
        timeout_secs: timeout.as_secs().max(1),
    };
    let out = exec(&sess, "true", b"")?;
    if out.status == super::mux::SSH_FAILED {
        if out.stderr.contains("Host key verification failed")
            || out
                .stderr
                .contains("REMOTE HOST IDENTIFICATION HAS CHANGED")
            || out.stderr.contains("Host key for")
        {
            return Err(VmError::HostKey {
                addr: ep.addr(),
                pinned: pinned.fingerprint(),
                got: "another key".into(),
            });
        }
        return Err(ep.err(if out.stderr.is_empty() {
            "ssh failed (exit 255)".to_string()
        } else {
            out.stderr
        }));
    }
    if out.status != 0 {
        return Err(ep.err(format!("`true` exited {}: {}", out.status, out.stderr)));
    }
    Ok(sess)
}

/// Wait until the target accepts SSH (boot), up to `timeout`. Returns the connected session.
pub fn wait_ready(
    ep: &Endpoint,
    timeout: Duration,
    is_alive: &mut dyn FnMut() -> bool,
) -> Result<Session> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        match connect(ep, Duration::from_secs(10)) {
            Ok(s) => return Ok(s),
            // A wrong host key is an answer, not a boot delay; so is a missing client.
            Err(e @ (VmError::HostKey { .. } | VmError::User { .. })) => return Err(e),
            Err(e) => {
                if std::time::Instant::now() > deadline {
                    return Err(VmError::Timeout {
                        what: format!("waiting for SSH ({e})"),
                        secs: timeout.as_secs(),
                    });
                }
                if !is_alive() {
                    return Err(VmError::Invalid(format!(
                        "the VM stopped while booting ({e})"
                    )));
                }
                std::thread::sleep(Duration::from_millis(250));
            }
        }
    }
}

/// What a remote command produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    pub status: i32,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl ExecOutput {
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
}

/// Run `command` on the target with `stdin`, collecting its output (for setup, not for runs).
/// Status 255 is `ssh` itself failing (connection, host key, authentication).
pub fn exec(sess: &Session, command: &str, stdin: &[u8]) -> Result<ExecOutput> {
    let argv = super::mux::argv_timeout(&sess.ep, &sess.ch, command, sess.timeout_secs);
    ssh_output(&argv, stdin)
}

/// Like [`exec`], but a non-zero exit is an error.
pub fn exec_ok(sess: &Session, command: &str, stdin: &[u8]) -> Result<ExecOutput> {
    let out = exec(sess, command, stdin)?;
    if out.status != 0 {
        return Err(VmError::Command {
            program: format!("(remote) {command}"),
            status: format!("exit status {}", out.status),
            stderr: out.stderr,
        });
    }
    Ok(out)
}

/// Why a protocol stream was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("a line from band-server exceeds {0} bytes")]
    TooLong(usize),
    #[error("band-server sent a line that is not a protocol message: {0}")]
    NotAMessage(String),
    #[error("band-server sent a request")]
    UnexpectedRequest,
    #[error("band-server sent something after its result")]
    AfterResult,
    #[error("reading from band-server: {0}")]
    Io(String),
}

/// Read one `\n`-terminated line of at most `max` bytes (without the newline). `None` at EOF;
/// a last line without newline is returned as is.
pub fn read_line_capped(
    r: &mut impl BufRead,
    max: usize,
) -> std::result::Result<Option<Vec<u8>>, FrameError> {
    let mut line = Vec::new();
    loop {
        let buf = r.fill_buf().map_err(|e| FrameError::Io(e.to_string()))?;
        if buf.is_empty() {
            return Ok(if line.is_empty() { None } else { Some(line) });
        }
        let (chunk, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if line.len() + chunk.len() > max {
            return Err(FrameError::TooLong(max));
        }
        line.extend_from_slice(chunk);
        let used = done.unwrap_or(buf.len());
        r.consume(used);
        if done.is_some() {
            return Ok(Some(line));
        }
    }
}

/// Read a whole protocol stream: events go to `on_event`; returns the result (None if the
/// stream ended without one).
pub fn read_stream(
    r: &mut impl BufRead,
    max: usize,
    on_event: &mut dyn FnMut(&Event),
) -> std::result::Result<Option<RunResult>, FrameError> {
    let mut result = None;
    while let Some(line) = read_line_capped(r, max)? {
        if line.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        if result.is_some() {
            return Err(FrameError::AfterResult);
        }
        let msg: Message = serde_json::from_slice(&line).map_err(|e| {
            let shown: String = String::from_utf8_lossy(&line[..line.len().min(120)]).into_owned();
            FrameError::NotAMessage(format!("{e}: `{shown}`"))
        })?;
        match msg {
            Message::Event(ev) => on_event(&ev),
            Message::Result(r) => result = Some(*r),
            Message::Request(_) | Message::Hold | Message::Cancel => {
                return Err(FrameError::UnexpectedRequest);
            }
        }
    }
    Ok(result)
}

/// Pin `key` for a target (the file holds one key line).
pub fn pin(path: &Path, key: &PublicKey) -> Result<()> {
    super::paths::write_atomic(path, format!("{}\n", key.line()).as_bytes(), 0o600)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{Layer, Status};
    use std::io::{BufReader, Cursor};

    fn line(m: &Message) -> String {
        serde_json::to_string(m).unwrap()
    }

    fn result_line() -> String {
        line(&Message::Result(Box::new(RunResult::setup_failed(
            "0011223344556677",
            Layer::Io,
            "x",
            None,
        ))))
    }

    #[test]
    fn lines_are_split_and_capped() {
        let mut r = Cursor::new(b"ab\ncd\nlast".to_vec());
        assert_eq!(read_line_capped(&mut r, 10).unwrap(), Some(b"ab".to_vec()));
        assert_eq!(read_line_capped(&mut r, 10).unwrap(), Some(b"cd".to_vec()));
        assert_eq!(
            read_line_capped(&mut r, 10).unwrap(),
            Some(b"last".to_vec())
        );
        assert_eq!(read_line_capped(&mut r, 10).unwrap(), None);
        let mut long = Cursor::new(vec![b'x'; 100]);
        assert_eq!(
            read_line_capped(&mut long, 99),
            Err(FrameError::TooLong(99))
        );
        // The cap counts across buffer refills.
        let mut small = BufReader::with_capacity(4, Cursor::new(b"0123456789\n".to_vec()));
        assert_eq!(read_line_capped(&mut small, 9), Err(FrameError::TooLong(9)));
        let mut small = BufReader::with_capacity(4, Cursor::new(b"0123456789\n".to_vec()));
        assert_eq!(
            read_line_capped(&mut small, 10).unwrap(),
            Some(b"0123456789".to_vec())
        );
    }

    #[test]
    fn a_stream_gives_events_then_the_result() {
        let ev = line(&Message::Event(Event::Stdout { data: "hi".into() }));
        let text = format!("{ev}\n\n{ev}\n{}\n", result_line());
        let mut seen = 0;
        let r = read_stream(&mut Cursor::new(text.into_bytes()), 1 << 20, &mut |_| {
            seen += 1
        })
        .unwrap();
        assert_eq!(seen, 2);
        assert_eq!(r.map(|r| r.status), Some(Status::SetupFailed));
    }

    #[test]
    fn garbage_duplicates_and_requests_fail_the_stream() {
        let noop = &mut |_: &Event| {};
        let garbage = "hello from a compromised VM\n".to_string();
        assert!(matches!(
            read_stream(&mut Cursor::new(garbage.into_bytes()), 1 << 20, noop),
            Err(FrameError::NotAMessage(_))
        ));
        let twice = format!("{}\n{}\n", result_line(), result_line());
        assert_eq!(
            read_stream(&mut Cursor::new(twice.into_bytes()), 1 << 20, noop),
            Err(FrameError::AfterResult)
        );
        let ev_after = format!(
            "{}\n{}\n",
            result_line(),
            line(&Message::Event(Event::Stdout {
                data: "late".into()
            }))
        );
        assert_eq!(
            read_stream(&mut Cursor::new(ev_after.into_bytes()), 1 << 20, noop),
            Err(FrameError::AfterResult)
        );
        let huge = format!("{}\n", result_line());
        assert_eq!(
            read_stream(&mut Cursor::new(huge.into_bytes()), 16, noop),
            Err(FrameError::TooLong(16))
        );
        assert_eq!(
            read_stream(&mut Cursor::new(Vec::new()), 16, noop),
            Ok(None)
        );
    }

    #[test]
    fn root_commands_use_sudo_only_when_asked() {
        let mut ep = Endpoint {
            host: "127.0.0.1".into(),
            port: 2222,
            user: "root".into(),
            auth: Auth::KeyFile(PathBuf::from("/k")),
            known_host: PathBuf::from("/kh"),
            sudo: false,
            ssh_config: None,
        };
        assert_eq!(
            ep.server_command(None),
            "exec /usr/local/lib/band/band-server run 2>>/var/log/band-server.log"
        );
        ep.sudo = true;
        assert_eq!(
            ep.server_command(None),
            "sudo -n sh -c 'exec /usr/local/lib/band/band-server run 2>>/var/log/band-server.log'"
        );
        assert_eq!(ep.addr(), "127.0.0.1:2222");
        ep.host = "::1".into();
        assert_eq!(ep.addr(), "[::1]:2222");
    }

    #[test]
    fn the_stale_check_runs_in_the_shell_before_band_server() {
        let t = tempfile::tempdir().unwrap();
        let ep = Endpoint {
            host: "h".into(),
            port: 22,
            user: "root".into(),
            auth: Auth::KeyFile(PathBuf::from("/k")),
            known_host: PathBuf::from("/kh"),
            sudo: false,
            ssh_config: None,
        };
        let hex = "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a";
        let marker = t.path().join(format!(".build-{hex}"));
        let installed = t.path().join("installed.json");
        fs_err::write(&installed, b"{}").unwrap();
        fs_err::write(&marker, b"").unwrap();
        // The command as the login shell (bash, root's on the VM) runs it, with the paths
        // pointed at the temp dir.
        let run = |expected: &str| {
            let cmd = ep
                .server_command(Some(expected))
                .replace(SERVER_DIR, &t.path().display().to_string())
                .replace("exec ", "echo ran; : ");
            let out = std::process::Command::new("bash")
                .arg("-c")
                .arg(&cmd)
                .output()
                .unwrap();
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
            )
        };
        let serve_args = t.path().join("serve-args");
        let fake = t.path().join("band-server");
        fs_err::write(
            &fake,
            // What it was asked, and where its stdout and stderr go (never the channel).
            format!(
                "#!/bin/sh\necho \"$@\" $(readlink /proc/$$/fd/1) $(readlink /proc/$$/fd/2) $(readlink /proc/$PPID/fd/1) >> {}\n",
                serve_args.display()
            ),
        )
        .unwrap();
        let mut perm = fs_err::metadata(&fake).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
        fs_err::set_permissions(&fake, perm).unwrap();
        assert_eq!(run(hex), (Some(0), "ran\n".to_string()));
        let mut args = String::new();
        for _ in 0..100 {
            args = fs_err::read_to_string(&serve_args).unwrap_or_default();
            if !args.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // (Earlier runs' background starts may land here too: the same line each.)
        assert!(
            !args.is_empty()
                && args.lines().all(|l| l
                    == format!(
                        "serve {hex} --owner 0 /dev/null /var/log/band-server.log /dev/null"
                    )),
            "{args}"
        );
        // A stale build starts nothing.
        let stale = "0".repeat(64);
        assert_eq!(run(&stale), (Some(STALE_EXIT), String::new()));
        std::thread::sleep(std::time::Duration::from_millis(300));
        let args = fs_err::read_to_string(&serve_args).unwrap_or_default();
        assert!(
            !args.contains(&stale),
            "a stale build started a warm server: {args}"
        );
        fs_err::remove_file(&marker).unwrap();
        assert_eq!(
            run(hex),
            (Some(STALE_EXIT), String::new()),
            "no marker is stale"
        );
    }

    #[test]
    fn a_different_host_key_is_refused() {
        let a = PublicKey::parse(
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHfTx4JDz2kRt5ltvDrBVnGmIzLHp3rRuu4gm8HCMPHu",
        )
        .unwrap();
        let mut b = a.clone();
        let last = b.blob.len() - 1;
        b.blob[last] ^= 1;
        assert!(check_pinned(&a, &a, "x").is_ok());
        let e = check_pinned(&a, &b, "127.0.0.1:1").unwrap_err().to_string();
        assert!(
            e.contains("refusing") && e.contains(&a.fingerprint()),
            "{e}"
        );
    }

    #[test]
    fn the_first_contact_key_is_read_from_ssh_s_known_hosts_entry() {
        let key =
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHfTx4JDz2kRt5ltvDrBVnGmIzLHp3rRuu4gm8HCMPHu";
        let got = key_from_known_hosts(&format!("[127.0.0.1]:2222 {key}\n"))
            .unwrap()
            .unwrap();
        assert_eq!(got, PublicKey::parse(key).unwrap());
        assert!(key_from_known_hosts("").is_none());
        assert!(key_from_known_hosts("\n# comment\n").is_none());
        assert!(
            key_from_known_hosts("[h]:1 ssh-ed25519 notbase64")
                .unwrap()
                .is_err()
        );
        let two = format!("h {key}\nh {key}\n");
        assert!(key_from_known_hosts(&two).unwrap().is_err());
    }

    #[test]
    fn a_pinned_key_reads_back_and_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let k = PublicKey::parse(
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHfTx4JDz2kRt5ltvDrBVnGmIzLHp3rRuu4gm8HCMPHu c",
        )
        .unwrap();
        let f = t.path().join("known_host");
        pin(&f, &k).unwrap();
        assert_eq!(keys::read_public(&f).unwrap(), k);
        assert_eq!(
            fs_err::metadata(&f).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn connecting_without_a_pinned_key_is_refused_before_any_packet() {
        let ep = Endpoint {
            host: "127.0.0.1".into(),
            port: 9,
            user: "root".into(),
            auth: Auth::KeyFile(PathBuf::from("/nonexistent")),
            known_host: PathBuf::from("/nonexistent/known_host"),
            sudo: false,
            ssh_config: None,
        };
        let Err(e) = connect(&ep, Duration::from_millis(200)) else {
            panic!("connected without a pinned key")
        };
        let e = e.to_string();
        assert!(e.contains("no pinned host key"), "{e}");
    }
}
