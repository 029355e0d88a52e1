//! band-sandboxd's warm band-server: the runs of a pod served as the host target's are, by a
//! `band-server serve` kept running (`crate::warm`), each by a forked child, most of them by a
//! spare sandbox built ahead. Without it every process of the pod paid a `band-server run` of its
//! own: its start, its config, its janitor pass, and every layer built while the client waits.
//!
//! - The server is this daemon's child, in a folder of its own ([`Warm::dir`]:
//!   `/run/band-serve/sandboxd-<pid>`), so that it neither replaces nor is replaced by the host's
//!   warm server when band-sandboxd runs on a host beside band.
//! - It serves while [`band::warm::digest`] of band-server and this daemon's settings is the one
//!   it was started with; it exits when they change or after ten idle minutes, and the next run
//!   finds no socket, is served by a `band-server run` of its own and starts it again.
//! - It stops with this daemon: told to (SIGTERM) once the runs are drained, it sends its spares
//!   away and exits only once each has removed its sandbox ([`Warm::stop`] waits for it). If
//!   this daemon is killed outright, it stops by itself (`--stop-with-parent`).
//! - `BAND_WARM=0` turns it off: every run is a `band-server run` of its own.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::sync::Mutex;

/// The pod's warm band-server (see the module's doc).
#[derive(Debug)]
pub struct Warm {
    server: PathBuf,
    dir: PathBuf,
    on: bool,
    child: Mutex<Option<tokio::process::Child>>,
}

impl Warm {
    /// The warm server of `server` for this daemon; `on` false: none ([`Warm::wanted`]).
    pub fn new(server: &Path, on: bool) -> Warm {
        Warm {
            server: server.to_path_buf(),
            // Beside the host's (`/run/band-serve/host`), under the folder of band-server's
            // warm servers.
            dir: Path::new(band::warm::DIR)
                .parent()
                .unwrap_or(Path::new("/run"))
                .join(format!("sandboxd-{}", std::process::id())),
            on,
            child: Mutex::new(None),
        }
    }

    /// Whether this daemon's runs go to a warm server: unless `$BAND_WARM` is `0`.
    pub fn wanted(env: Option<&str>) -> bool {
        env != Some("0")
    }

    /// The folder of its socket, lock, pid file and log.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A connection to the warm server of this band-server and settings, if one listens.
    pub async fn connect(&self) -> Option<tokio::net::UnixStream> {
        if !self.on {
            return None;
        }
        let digest = band::warm::digest_here(&self.server)?;
        tokio::net::UnixStream::connect(band::warm::socket(&self.dir, &digest))
            .await
            .ok()
    }

    /// Start the warm server unless one this daemon started still runs. It listens once it has
    /// run its janitor pass; until then runs are served as without it. Failing to start it costs
    /// nothing but the next runs' speed (said on stderr).
    pub async fn start(&self) {
        if !self.on {
            return;
        }
        let mut child = self.child.lock().await;
        if let Some(c) = child.as_mut()
            && matches!(c.try_wait(), Ok(None))
        {
            return;
        }
        let Some(digest) = band::warm::digest_here(&self.server) else {
            return;
        };
        let spawned = tokio::process::Command::new(&self.server)
            .arg("serve")
            .arg(&digest)
            .arg("--host")
            .arg("--dir")
            .arg(&self.dir)
            .arg("--stop-with-parent")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn();
        match spawned {
            Ok(c) => {
                eprintln!(
                    "band-sandboxd: warm band-server (pid {}) in {}",
                    c.id().unwrap_or(0),
                    self.dir.display()
                );
                *child = Some(c);
            }
            Err(e) => eprintln!(
                "band-sandboxd: cannot start the warm band-server ({}): {e}",
                self.server.display()
            ),
        }
    }

    /// Stop the warm server (SIGTERM) and wait up to `limit` for it: it exits once its spares
    /// have removed their sandboxes and its runs have ended. Then its folder goes. `false` when
    /// it did not exit in time.
    pub async fn stop(&self, limit: Duration) -> bool {
        let mut child = self.child.lock().await;
        let mut ended = true;
        if let Some(mut c) = child.take() {
            if let Some(pid) = c.id().and_then(|p| i32::try_from(p).ok()) {
                let _ = crate::sys::kill(pid, libc::SIGTERM);
            }
            ended = matches!(tokio::time::timeout(limit, c.wait()).await, Ok(Ok(_)));
        }
        if ended
            && let Err(e) = fs_err::remove_dir_all(&self.dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            eprintln!("band-sandboxd: {e}");
        }
        ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_unless_band_warm_is_zero_and_in_a_folder_of_its_own() {
        assert!(Warm::wanted(None));
        assert!(Warm::wanted(Some("1")));
        assert!(!Warm::wanted(Some("0")));
        let w = Warm::new(Path::new("/usr/libexec/band/band-server"), true);
        assert_eq!(
            w.dir(),
            Path::new(&format!("/run/band-serve/sandboxd-{}", std::process::id()))
        );
        assert_ne!(w.dir(), Path::new(band::warm::DIR));
    }
}
