//! The warm channel: one authenticated SSH connection per target, kept open across runs.
//!
//! A run used to open its own SSH connection (TCP, key exchange, host key check, key auth: about
//! 1 s under TCG). Now every run goes through the system `ssh` client with OpenSSH's connection
//! multiplexing: the first run starts a master connection (`ControlMaster=auto`) that stays in the
//! background for [`PERSIST_SECS`] after the last run (`ControlPersist`), and later runs open only a
//! new channel on it through the control socket.
//!
//! - The control socket lives in the target's own 0700 state folder (`vm/qemu/`,
//!   `vm/ssh/<user@host_port>/`) and its name is a hash of user, host, port and the pinned host key
//!   ([`control_path`]): a VM on another port, or a re-pinned key, never reuses an old master.
//! - A fresh master checks the pinned key (`StrictHostKeyChecking=yes` against a known_hosts file
//!   holding only that key). A dead master leaves a stale socket, which `ssh` removes before it
//!   connects afresh; a master whose connection broke exits. Neither can send a run elsewhere.
//! - `band vm stop` and `destroy` end the masters (`ssh -O exit`, [`close_all`]).
//! - Lima keeps its own master: for Lima, runs use Lima's `ssh.config` (its `ControlPath` and
//!   `ControlPersist`) with band's pinned host key on top ([`Endpoint::ssh_config`]).
//!
//! Setup, the install, `band vm status` and `band doctor` use the same client and master
//! ([`super::ssh::Session`]); without a system `ssh` client, nothing connects and the error names
//! the package (`openssh-client`).

use std::ffi::OsString;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::endpoint::{Auth, Endpoint, STALE_EXIT, warm_socket};
use super::framing::{MAX_LINE_BYTES, MAX_STDERR_BYTES, read_stream};
use super::keys;

/// How often a run's holder looks whether the run was cancelled (the end of the run wakes it at
/// once).
const HOLD_POLL: Duration = Duration::from_millis(50);

/// Set once a run's result is in. A holder waiting on it wakes at once, so the run's end is not
/// delayed by a poll interval (up to 50 ms per run before).
#[derive(Debug, Default)]
struct Latch(std::sync::Mutex<bool>, std::sync::Condvar);

impl Latch {
    fn set(&self) {
        if let Ok(mut set) = self.0.lock() {
            *set = true;
        }
        self.1.notify_all();
    }

    /// Wait until set or `timeout` passes; whether it is set.
    fn wait(&self, timeout: Duration) -> bool {
        let Ok(set) = self.0.lock() else {
            return true;
        };
        match self.1.wait_timeout_while(set, timeout, |set| !*set) {
            Ok((set, _)) => *set,
            Err(_) => true,
        }
    }
}

/// Hold a run's request channel open until `done`: if band dies, the channel closes and
/// band-server cancels the run; when `cancelled` says so, band-server is told at once.
fn hold(done: &Latch, cancelled: &(dyn Fn() -> bool + Sync), mut to: impl Write) {
    while !done.wait(HOLD_POLL) {
        if cancelled() {
            let _ = to
                .write_all(b"{\"type\":\"cancel\"}\n")
                .and_then(|()| to.flush());
            while !done.wait(HOLD_POLL) {}
            return;
        }
    }
}
use super::{Result, VmError};
use crate::proto::{Event, RunResult};

/// How long a master stays after its last run (seconds).
pub const PERSIST_SECS: u32 = 300;
/// The file name prefix of band's control sockets.
const PREFIX: &str = "mux-";
/// `sun_path` holds 108 bytes; OpenSSH adds a 17-byte random suffix while it binds.
const MAX_SOCKET_PATH: usize = 108 - 18;
/// The exit status of `ssh` itself failing (connection, host key, authentication).
pub const SSH_FAILED: i32 = 255;

/// The control socket for `ep` with the pinned host key `pinned` (its key line): in the folder
/// of `ep.known_host`, named by a hash of user, host, port and key. `None` when the path would
/// be too long for a Unix socket (runs then connect afresh each time).
pub fn control_path(ep: &Endpoint, pinned: &str) -> Option<PathBuf> {
    let dir = ep.known_host.parent()?;
    let digest = Sha256::digest(format!(
        "{}\n{}\n{}\n{}",
        ep.user,
        ep.host,
        ep.port,
        pinned.trim()
    ));
    let hex: String = hex::encode(&digest[..8]);
    let path = dir.join(format!("{PREFIX}{hex}.sock"));
    (path.as_os_str().len() <= MAX_SOCKET_PATH).then_some(path)
}

/// The known_hosts file OpenSSH checks: the pinned key only, for this host and port.
pub fn known_hosts_line(ep: &Endpoint, pinned: &str) -> String {
    let host = if ep.port == 22 {
        ep.host.clone()
    } else {
        format!("[{}]:{}", ep.host, ep.port)
    };
    format!("{host} {}\n", pinned.trim())
}

/// What a channel needs besides the endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Channel {
    /// The system `ssh` client.
    pub ssh: PathBuf,
    /// The known_hosts file holding only the pinned key.
    pub known_hosts: PathBuf,
    /// band's control socket (`None`: Lima's own, from its ssh.config, or none at all).
    pub control: Option<PathBuf>,
}

/// The `ssh` command line that runs `remote` on `ep` through the warm channel. Options on the
/// command line win over any config file, so Lima's `StrictHostKeyChecking no` does not apply.
pub fn argv(ep: &Endpoint, ch: &Channel, remote: &str) -> Vec<OsString> {
    argv_timeout(ep, ch, remote, 30)
}

/// [`argv`] with another `ConnectTimeout` (seconds) for a master that must be started.
pub fn argv_timeout(ep: &Endpoint, ch: &Channel, remote: &str, timeout_secs: u64) -> Vec<OsString> {
    let mut a: Vec<OsString> = vec![ch.ssh.clone().into()];
    let mut o = |s: String| {
        a.push("-o".into());
        a.push(s.into());
    };
    o("BatchMode=yes".into());
    o("StrictHostKeyChecking=yes".into());
    // Lima's ssh.config says yes: the host key would go unchecked on 127.0.0.1.
    o("NoHostAuthenticationForLocalhost=no".into());
    o(format!("UserKnownHostsFile={}", ch.known_hosts.display()));
    o("GlobalKnownHostsFile=/dev/null".into());
    o("UpdateHostKeys=no".into());
    o("LogLevel=ERROR".into());
    o("ForwardAgent=no".into());
    o("ForwardX11=no".into());
    o("ClearAllForwardings=yes".into());
    // A hung VM fails the run instead of holding it: 30 s to connect and exchange banners (as
    // the setup commands), and an established master that stops answering is dropped after 60 s.
    o(format!("ConnectTimeout={timeout_secs}"));
    o("ServerAliveInterval=15".into());
    o("ServerAliveCountMax=4".into());
    let host = match &ep.ssh_config {
        // Lima: its config names the key, user, port and its own ControlMaster.
        Some(cfg) => {
            a.push("-F".into());
            a.push(cfg.clone().into());
            super::lima::SSH_HOST.to_string()
        }
        None => {
            match &ch.control {
                Some(c) => {
                    o("ControlMaster=auto".into());
                    o(format!("ControlPath={}", c.display()));
                    o(format!("ControlPersist={PERSIST_SECS}"));
                }
                None => o("ControlPath=none".into()),
            }
            match &ep.auth {
                Auth::KeyFile(k) => {
                    o("IdentitiesOnly=yes".into());
                    o(format!("IdentityFile={}", k.display()));
                    o("IdentityAgent=none".into());
                }
                Auth::AgentThenKey(k) => {
                    o(format!("IdentityFile={}", k.display()));
                }
            }
            o(format!("Port={}", ep.port));
            o(format!("User={}", ep.user));
            o("PasswordAuthentication=no".into());
            o("KbdInteractiveAuthentication=no".into());
            a.push("-F".into());
            a.push("/dev/null".into());
            ep.host.clone()
        }
    };
    a.push("-T".into());
    a.push("--".into());
    a.push(host.into());
    a.push(remote.into());
    a
}

/// `ssh -O exit` for a control socket: the master ends (its runs are done by then).
pub fn exit_argv(ssh: &Path, control: &Path) -> Vec<OsString> {
    vec![
        ssh.into(),
        "-F".into(),
        "/dev/null".into(),
        "-o".into(),
        format!("ControlPath={}", control.display()).into(),
        "-O".into(),
        "exit".into(),
        "band-mux".into(),
    ]
}

/// The channel for `ep`: `None` without a system `ssh` client ([`super::ssh::missing_ssh`]). Writes the
/// known_hosts file next to the pinned key.
pub fn channel(ep: &Endpoint) -> Result<Option<Channel>> {
    let Some(ssh) = super::cmd::which("ssh") else {
        return Ok(None);
    };
    let pinned = keys::read_public(&ep.known_host).map_err(|e| VmError::Ssh {
        addr: format!("{}@{}", ep.user, ep.addr()),
        message: format!("no pinned host key ({e}); run `band setup` for this target"),
    })?;
    let line = pinned.line();
    let known_hosts = ep.known_host.with_file_name("known_hosts");
    let want = known_hosts_line(ep, &line);
    if fs_err::read_to_string(&known_hosts).ok().as_deref() != Some(want.as_str()) {
        super::paths::write_atomic(&known_hosts, want.as_bytes(), 0o600)?;
    }
    let control = if ep.ssh_config.is_some() {
        None
    } else {
        control_path(ep, &line)
    };
    Ok(Some(Channel {
        ssh,
        known_hosts,
        control,
    }))
}

/// End every master band keeps in `dir` (`band vm stop`, `destroy`), and remove their sockets.
pub fn close_all(dir: &Path) {
    let Ok(entries) = fs_err::read_dir(dir) else {
        return;
    };
    let ssh = super::cmd::which("ssh");
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with(WARM_PREFIX) && name.ends_with(".sock") {
            // Forwards of the masters ended here.
            let _ = fs_err::remove_file(e.path());
            continue;
        }
        if !(name.starts_with(PREFIX) && name.ends_with(".sock")) {
            continue;
        }
        let path = e.path();
        if let Some(ssh) = &ssh {
            let _ = super::cmd::command(&exit_argv(ssh, &path))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        // The master removes its socket when it exits; wait a little for that.
        for _ in 0..50 {
            if !path.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = fs_err::remove_file(&path);
    }
}

/// Send one request line through the warm channel and read the answer, as
/// the ssh transport (`client::ssh`) does over its own connection: the same framing caps, the same
/// [`VmError::StaleServer`] on [`STALE_EXIT`], `cancel` sent when `cancelled` says so.
pub fn run_request(
    ep: &Endpoint,
    ch: &Channel,
    expected: Option<&str>,
    request_line: &[u8],
    on_event: &mut dyn FnMut(&Event),
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Result<RunResult> {
    use std::os::unix::process::CommandExt;
    let argv = argv(ep, ch, &ep.server_command(expected));
    let fail = |m: String| VmError::Ssh {
        addr: format!("{}@{}", ep.user, ep.addr()),
        message: m,
    };
    let mut child = super::cmd::command(&argv)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Ctrl-C reaches band only, which cancels the run over the channel.
        .process_group(0)
        .spawn()
        .map_err(|source| VmError::Spawn {
            program: ch.ssh.display().to_string(),
            source,
        })?;
    let mut stdin = child.stdin.take().ok_or_else(|| fail("no stdin".into()))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| fail("no stdout".into()))?;
    let stderr = child
        .stderr
        .take()
        .ok_or_else(|| fail("no stderr".into()))?;
    let errs = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stderr.take(MAX_STDERR_BYTES as u64).read_to_end(&mut buf);
        buf
    });
    // A stale target exits without reading: a failed write is judged by the exit status.
    let sent = stdin
        .write_all(request_line)
        .and_then(|()| stdin.write_all(b"\n{\"type\":\"hold\"}\n"))
        .and_then(|()| stdin.flush());
    let done = Latch::default();
    let read = std::thread::scope(|s| {
        let done = &done;
        let holder = s.spawn(move || hold(done, cancelled, stdin));
        let mut reader = BufReader::with_capacity(1 << 16, stdout);
        let r = read_stream(&mut reader, MAX_LINE_BYTES, on_event);
        done.set();
        let _ = holder.join();
        r
    });
    let status = child
        .wait()
        .map_err(|e| fail(format!("waiting for ssh: {e}")))?;
    let stderr = String::from_utf8_lossy(&errs.join().unwrap_or_default())
        .trim()
        .to_string();
    let code = status.code().unwrap_or(-1);
    match read {
        Ok(Some(r)) => Ok(r),
        Ok(None) if code == STALE_EXIT && expected.is_some() => Err(VmError::StaleServer),
        Ok(None) if code == SSH_FAILED => Err(fail(ssh_failure(&stderr, &ch.known_hosts))),
        Ok(None) => Err(fail(format!(
            "run: band-server exited (status {code}) without a result{}{}",
            if stderr.is_empty() {
                String::new()
            } else {
                format!(": {stderr}")
            },
            sent.err()
                .map(|e| format!(" (sending the request: {e})"))
                .unwrap_or_default()
        ))),
        Err(e) => {
            let _ = child.kill();
            Err(fail(format!("run: {e}")))
        }
    }
}

/// The host-side socket through which runs reach the warm band-server of build `digest`: the
/// master forwards it (`ssh -O forward -L local:remote`) to [`super::ssh::warm_socket`] in the
/// guest. In the target's 0700 folder, named by the master's control socket (or `lima`) and the
/// digest, so a forward of another master or build is never used. `None` when there is no master
/// of band's or Lima's, or the path would be too long.
pub fn warm_local(ep: &Endpoint, ch: &Channel, digest: &str) -> Option<PathBuf> {
    let dir = ep.known_host.parent()?;
    let master = match (&ch.control, &ep.ssh_config) {
        (Some(c), _) => c
            .file_stem()?
            .to_string_lossy()
            .trim_start_matches(PREFIX)
            .to_string(),
        (None, Some(_)) => "lima".to_string(),
        (None, None) => return None,
    };
    let digest: String = digest
        .chars()
        .filter(char::is_ascii_hexdigit)
        .take(16)
        .collect();
    let path = dir.join(format!("{WARM_PREFIX}{master}-{digest}.sock"));
    (path.as_os_str().len() < 108).then_some(path)
}

/// The file name prefix of the host-side warm sockets.
const WARM_PREFIX: &str = "warm-";

/// `ssh -O forward`: the master (band's, or Lima's through its ssh.config) forwards `local` on
/// this machine to `remote` in the guest, until it exits. The local socket is made mode 0600
/// (`StreamLocalBindMask`, the master's default as well); a stale one is removed first
/// ([`run_warm`]), since the master binds it with its own options.
pub fn forward_argv(ep: &Endpoint, ch: &Channel, local: &Path, remote: &str) -> Vec<OsString> {
    let mut a: Vec<OsString> = vec![ch.ssh.clone().into()];
    let mut o = |s: String| {
        a.push("-o".into());
        a.push(s.into());
    };
    o("BatchMode=yes".into());
    o("LogLevel=ERROR".into());
    o("StreamLocalBindUnlink=yes".into());
    o("StreamLocalBindMask=0177".into());
    let host = match (&ep.ssh_config, &ch.control) {
        (Some(cfg), _) => {
            a.push("-F".into());
            a.push(cfg.clone().into());
            super::lima::SSH_HOST.to_string()
        }
        (None, control) => {
            if let Some(c) = control {
                o(format!("ControlPath={}", c.display()));
            }
            a.push("-F".into());
            a.push("/dev/null".into());
            ep.host.clone()
        }
    };
    a.push("-O".into());
    a.push("forward".into());
    a.push("-L".into());
    a.push(format!("{}:{remote}", local.display()).into());
    a.push("--".into());
    a.push(host.into());
    a
}

/// Send one request to the warm band-server of build `digest` (`band-server serve` in the
/// guest), through the master's forward of [`warm_local`]: no `ssh` process, no shell, no exec,
/// no config load and no janitor pass on the run's path. The framing, caps, hold and cancel are
/// [`run_request`]'s.
///
/// [`VmError::NoWarmServer`] when no band-server read the request, so that the caller may serve
/// it on the per-run path without running it twice: no master, no forward, no warm server of
/// this build in the guest (the master then closes the connection), or one whose build is no
/// longer installed (it closes the connection unread). A warm server writes a blank line before
/// it reads a request, so a connection that received any byte is never retried.
pub fn run_warm(
    ep: &Endpoint,
    ch: &Channel,
    digest: &str,
    request_line: &[u8],
    on_event: &mut dyn FnMut(&Event),
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Result<RunResult> {
    use std::os::unix::net::UnixStream;
    let none = |m: String| VmError::NoWarmServer(m);
    let local = warm_local(ep, ch, digest).ok_or_else(|| none("no master of band's".into()))?;
    let conn = match UnixStream::connect(&local) {
        Ok(c) => c,
        Err(_) => {
            // No forward on this master yet, or the master that had it is gone and left its
            // socket (the master binds, and would refuse an existing file).
            let _ = fs_err::remove_file(&local);
            let remote = warm_socket(digest);
            let out = super::cmd::command(&forward_argv(ep, ch, &local, &remote))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .output()
                .map_err(|e| none(format!("ssh -O forward: {e}")))?;
            // A run beside this one may have made the same forward first: connect either way.
            UnixStream::connect(&local).map_err(|e| {
                none(format!(
                    "{}: {e} (ssh -O forward: {})",
                    local.display(),
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            })?
        }
    };
    let fail = |m: String| VmError::Ssh {
        addr: format!("{}@{}", ep.user, ep.addr()),
        message: format!("warm band-server: {m}"),
    };
    let mut writer = conn.try_clone().map_err(|e| fail(e.to_string()))?;
    // A connection the master could not open in the guest may already be closed: a failed
    // write is judged by what was read.
    let sent = writer
        .write_all(request_line)
        .and_then(|()| writer.write_all(b"\n{\"type\":\"hold\"}\n"))
        .and_then(|()| writer.flush());
    let done = Latch::default();
    let received = AtomicBool::new(false);
    let read = std::thread::scope(|s| {
        let done = &done;
        let holder = s.spawn(move || hold(done, cancelled, writer));
        let mut reader = BufReader::with_capacity(
            1 << 16,
            Counted {
                inner: &conn,
                got: &received,
            },
        );
        let r = read_stream(&mut reader, MAX_LINE_BYTES, on_event);
        done.set();
        let _ = holder.join();
        r
    });
    let received = received.load(Ordering::SeqCst);
    match read {
        Ok(Some(r)) => Ok(r),
        // Closed (or reset) before a byte: the master could not reach a warm server.
        Ok(None) | Err(_) if !received => Err(none(format!(
            "{} closed without a byte{}",
            local.display(),
            sent.err().map(|e| format!(" ({e})")).unwrap_or_default()
        ))),
        Ok(None) => Err(fail("the connection closed without a result".into())),
        Err(e) => Err(fail(e.to_string())),
    }
}

/// A reader that notes whether any byte came through.
struct Counted<'a, R> {
    inner: R,
    got: &'a AtomicBool,
}

impl<R: Read> Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n > 0 {
            self.got.store(true, Ordering::SeqCst);
        }
        Ok(n)
    }
}

/// Why `ssh` itself failed, in words that name a refused host key as such.
fn ssh_failure(stderr: &str, known_hosts: &Path) -> String {
    if stderr.is_empty() {
        "ssh failed (exit 255)".into()
    } else if stderr.contains("Host key verification failed") {
        format!(
            "the host key is not the pinned one ({}); refusing to connect: {stderr}",
            known_hosts.display()
        )
    } else {
        stderr.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHfTx4JDz2kRt5ltvDrBVnGmIzLHp3rRuu4gm8HCMPHu";

    fn ep(dir: &Path, port: u16) -> Endpoint {
        Endpoint {
            host: "127.0.0.1".into(),
            port,
            user: "root".into(),
            auth: Auth::KeyFile(dir.join("id")),
            known_host: dir.join("known_host"),
            sudo: false,
            ssh_config: None,
        }
    }

    fn strings(a: &[OsString]) -> Vec<String> {
        a.iter().map(|s| s.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn the_control_socket_is_per_port_and_per_pinned_key() {
        let d = Path::new("/d/vm/qemu");
        let a = control_path(&ep(d, 2222), KEY).unwrap();
        assert_eq!(a.parent(), Some(d));
        assert!(a.file_name().unwrap().to_string_lossy().starts_with("mux-"));
        assert_eq!(control_path(&ep(d, 2222), KEY), Some(a.clone()));
        assert_ne!(control_path(&ep(d, 2223), KEY), Some(a.clone()));
        let other_key = KEY.replace("Hu", "Hv");
        assert_ne!(control_path(&ep(d, 2222), &other_key), Some(a));
        // Too long for a Unix socket: no master at all.
        let deep = PathBuf::from(format!("/{}", "x".repeat(100)));
        assert_eq!(control_path(&ep(&deep, 2222), KEY), None);
    }

    #[test]
    fn the_command_line_pins_the_key_and_multiplexes() {
        let d = Path::new("/d/vm/qemu");
        let e = ep(d, 2222);
        let ch = Channel {
            ssh: "/usr/bin/ssh".into(),
            known_hosts: d.join("known_hosts"),
            control: Some(d.join("mux-00.sock")),
        };
        let a = strings(&argv(&e, &ch, "exec x"));
        let has = |s: &str| a.iter().any(|x| x == s);
        assert!(has("StrictHostKeyChecking=yes"), "{a:?}");
        assert!(has("UserKnownHostsFile=/d/vm/qemu/known_hosts"), "{a:?}");
        assert!(has("GlobalKnownHostsFile=/dev/null"), "{a:?}");
        assert!(has("BatchMode=yes"), "{a:?}");
        assert!(has("ControlMaster=auto"), "{a:?}");
        assert!(has("ControlPath=/d/vm/qemu/mux-00.sock"), "{a:?}");
        assert!(has(&format!("ControlPersist={PERSIST_SECS}")), "{a:?}");
        assert!(
            has("IdentitiesOnly=yes") && has("IdentityAgent=none"),
            "{a:?}"
        );
        assert!(
            has("ClearAllForwardings=yes") && has("ForwardAgent=no"),
            "{a:?}"
        );
        assert!(has("Port=2222") && has("User=root"), "{a:?}");
        assert!(
            has("ConnectTimeout=30") && has("ServerAliveInterval=15"),
            "{a:?}"
        );
        // No user or system config file changes where the run goes.
        let f = a.iter().position(|x| x == "-F").unwrap();
        assert_eq!(a[f + 1], "/dev/null");
        assert_eq!(&a[a.len() - 3..], ["--", "127.0.0.1", "exec x"]);
        // Without a socket: no master, a connection per run.
        let a = strings(&argv(
            &e,
            &Channel {
                control: None,
                ..ch.clone()
            },
            "x",
        ));
        assert!(a.iter().any(|x| x == "ControlPath=none"), "{a:?}");
        assert!(!a.iter().any(|x| x.starts_with("ControlMaster")), "{a:?}");
    }

    #[test]
    fn lima_uses_its_own_config_and_master_with_band_s_pinned_key() {
        let d = Path::new("/d/vm/lima");
        let mut e = ep(d, 60022);
        e.ssh_config = Some(PathBuf::from("/Users/me/.lima/band/ssh.config"));
        let ch = Channel {
            ssh: "/usr/bin/ssh".into(),
            known_hosts: d.join("known_hosts"),
            control: None,
        };
        let a = strings(&argv(&e, &ch, "x"));
        let f = a.iter().position(|x| x == "-F").unwrap();
        assert_eq!(a[f + 1], "/Users/me/.lima/band/ssh.config");
        assert!(a.iter().any(|x| x == "StrictHostKeyChecking=yes"), "{a:?}");
        assert!(
            a.iter().any(|x| x == "NoHostAuthenticationForLocalhost=no"),
            "{a:?}"
        );
        assert!(
            a.iter()
                .any(|x| x == "UserKnownHostsFile=/d/vm/lima/known_hosts"),
            "{a:?}"
        );
        // Lima's ControlMaster/ControlPath/ControlPersist stay in force.
        assert!(!a.iter().any(|x| x.starts_with("Control")), "{a:?}");
        assert_eq!(&a[a.len() - 2..], ["lima-band", "x"]);
    }

    #[test]
    fn the_warm_socket_is_per_master_and_build_and_forwarded_by_the_master() {
        let d = Path::new("/d/vm/qemu");
        let e = ep(d, 2222);
        let ch = Channel {
            ssh: "/usr/bin/ssh".into(),
            known_hosts: d.join("known_hosts"),
            control: Some(d.join("mux-0011223344556677.sock")),
        };
        let digest = "ab".repeat(32);
        let local = warm_local(&e, &ch, &digest).unwrap();
        assert_eq!(local, d.join("warm-0011223344556677-abababababababab.sock"));
        assert_ne!(warm_local(&e, &ch, &"cd".repeat(32)), Some(local.clone()));
        let other = Channel {
            control: Some(d.join("mux-8899aabbccddeeff.sock")),
            ..ch.clone()
        };
        assert_ne!(warm_local(&e, &other, &digest), Some(local.clone()));
        // No master of band's or Lima's: no warm path.
        let none = Channel {
            control: None,
            ..ch.clone()
        };
        assert_eq!(warm_local(&e, &none, &digest), None);
        let remote = warm_socket(&digest);
        assert_eq!(remote, format!("/run/band-serve/server-{digest}.sock"));
        let a = strings(&forward_argv(&e, &ch, &local, &remote));
        assert!(
            a.iter()
                .any(|x| x == "ControlPath=/d/vm/qemu/mux-0011223344556677.sock"),
            "{a:?}"
        );
        assert!(a.iter().any(|x| x == "StreamLocalBindMask=0177"), "{a:?}");
        let f = a.iter().position(|x| x == "-F").unwrap();
        assert_eq!(a[f + 1], "/dev/null");
        assert_eq!(
            &a[a.len() - 6..],
            [
                "-O",
                "forward",
                "-L",
                &format!("{}:{remote}", local.display()),
                "--",
                "127.0.0.1"
            ]
        );
        // Lima: its own master, through its ssh.config.
        let mut lima = ep(Path::new("/d/vm/lima"), 60022);
        lima.ssh_config = Some(PathBuf::from("/Users/me/.lima/band/ssh.config"));
        let local = warm_local(&lima, &none, &digest).unwrap();
        assert_eq!(
            local,
            Path::new("/d/vm/lima/warm-lima-abababababababab.sock")
        );
        let a = strings(&forward_argv(&lima, &none, &local, &remote));
        assert!(
            a.iter().any(|x| x == "/Users/me/.lima/band/ssh.config"),
            "{a:?}"
        );
        assert_eq!(a.last().map(String::as_str), Some("lima-band"));
    }

    #[test]
    fn a_warm_run_with_no_master_is_not_sent() {
        let t = tempfile::tempdir().unwrap();
        let e = ep(t.path(), 2222);
        let ch = Channel {
            // `false` stands in for ssh: the forward cannot be made.
            ssh: "/bin/false".into(),
            known_hosts: t.path().join("known_hosts"),
            control: Some(t.path().join("mux-00.sock")),
        };
        let mut events = 0;
        let r = run_warm(
            &e,
            &ch,
            &"ab".repeat(32),
            b"{}",
            &mut |_| events += 1,
            &|| false,
        );
        assert!(matches!(r, Err(VmError::NoWarmServer(_))), "{r:?}");
        assert_eq!(events, 0);
    }

    #[test]
    fn a_warm_server_that_answered_is_never_a_reason_to_send_again() {
        use std::os::unix::net::UnixListener;
        let t = tempfile::tempdir().unwrap();
        let e = ep(t.path(), 2222);
        let ch = Channel {
            ssh: "/bin/false".into(),
            known_hosts: t.path().join("known_hosts"),
            control: Some(t.path().join("mux-00.sock")),
        };
        let digest = "ab".repeat(32);
        let local = warm_local(&e, &ch, &digest).unwrap();
        let listener = UnixListener::bind(&local).unwrap();
        // A server that reads the request, says its blank line and dies: an error, not a retry.
        let server = std::thread::spawn(move || {
            let (mut c, _) = listener.accept().unwrap();
            c.write_all(b"\n").unwrap();
            let mut line = String::new();
            std::io::BufRead::read_line(&mut BufReader::new(&c), &mut line).unwrap();
            line
        });
        let r = run_warm(&e, &ch, &digest, b"{\"x\":1}", &mut |_| {}, &|| false);
        assert_eq!(server.join().unwrap(), "{\"x\":1}\n");
        match r {
            Err(VmError::Ssh { message, .. }) => {
                assert!(message.contains("closed without a result"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        // One that closes unread (its build is gone): not sent, the per-run path may serve it.
        let listener = UnixListener::bind({
            let _ = fs_err::remove_file(&local);
            &local
        })
        .unwrap();
        let server = std::thread::spawn(move || drop(listener.accept().unwrap()));
        let r = run_warm(&e, &ch, &digest, b"{}", &mut |_| {}, &|| false);
        server.join().unwrap();
        assert!(matches!(r, Err(VmError::NoWarmServer(_))), "{r:?}");
    }

    #[test]
    fn known_hosts_names_the_port() {
        let d = Path::new("/d");
        assert_eq!(
            known_hosts_line(&ep(d, 2222), KEY),
            format!("[127.0.0.1]:2222 {KEY}\n")
        );
        assert_eq!(
            known_hosts_line(&ep(d, 22), KEY),
            format!("127.0.0.1 {KEY}\n")
        );
    }

    #[test]
    fn a_refused_host_key_is_named() {
        let kh = Path::new("/d/known_hosts");
        let e = ssh_failure(
            "Host key for [127.0.0.1]:2222 has changed and you have requested strict checking.\nHost key verification failed.",
            kh,
        );
        assert!(
            e.starts_with("the host key is not the pinned one (/d/known_hosts); refusing"),
            "{e}"
        );
        assert_eq!(ssh_failure("", kh), "ssh failed (exit 255)");
        assert_eq!(ssh_failure("Connection refused", kh), "Connection refused");
    }

    #[test]
    fn close_all_removes_band_s_sockets_only() {
        let t = tempfile::tempdir().unwrap();
        let warm = t.path().join("warm-0011-abab.sock");
        fs_err::write(&warm, b"").unwrap();
        let sock = t.path().join("mux-0011.sock");
        let other = t.path().join("known_host");
        fs_err::write(&sock, b"").unwrap();
        fs_err::write(&other, b"k").unwrap();
        close_all(t.path());
        assert!(!sock.exists());
        assert!(!warm.exists());
        assert!(other.exists());
    }
}
