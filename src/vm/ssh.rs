//! The SSH transport, through the system OpenSSH client (`ssh`): a pinned host key, key
//! authentication, and commands on the master's channels (see [`super::mux`]). What a target is
//! lives in [`super::endpoint`], the band protocol's framing in [`super::framing`].

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use super::endpoint::{Auth, Endpoint};
use super::framing::MAX_STDERR_BYTES;
use super::keys::{self, PublicKey};
use super::{Result, VmError};

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

/// Pin `key` for a target (the file holds one key line).
pub fn pin(path: &Path, key: &PublicKey) -> Result<()> {
    super::paths::write_atomic(path, format!("{}\n", key.line()).as_bytes(), 0o600)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

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
