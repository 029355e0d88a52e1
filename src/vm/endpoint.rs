//! One SSH target (where, as whom, which host key is pinned) and where band-server lives on it:
//! what the warm channel ([`super::mux`]) and the transport ([`super::ssh`]) both start from.

use std::path::PathBuf;

use super::VmError;

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

    pub(super) fn err(&self, message: impl std::fmt::Display) -> VmError {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
