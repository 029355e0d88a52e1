//! The network namespace of a networked run, and the relay that connects it to the host.
//!
//! band-server makes a user namespace owned by the run's uid and a network namespace owned by it
//! ([`crate::sys::user_and_net_namespaces`]), and keeps only descriptors of them: nothing names
//! them in the filesystem, so when band-server and the run are gone, so are they, with every
//! interface inside. Then:
//!
//! 1. `slirp4netns` (the userspace relay of rootless podman and docker) is started as the run's
//!    uid ([`crate::sys::RelayExec`]) with the descriptors: it creates a tap device inside
//!    (`tap0`, `198.19.249.100/24`, gateway `198.19.249.2`, see [`RELAY_CIDR`]; IPv6 from its
//!    router advertisements),
//!    brings up loopback, and makes every connection of the run with sockets of its own in the
//!    host's network namespace. Those sockets belong to the run's uid, so the run's nftables
//!    table (`meta skuid`, [`super::nft`]) filters them exactly as it filtered the run's own
//!    sockets before, and its dynamic sets still record the real destinations. Its built-in DNS
//!    forwarder and its gateway-to-host-loopback mapping are off (`--disable-dns`,
//!    `--disable-host-loopback`).
//! 2. The DNS stub's sockets are created *inside* the namespace by a thread that joins it
//!    ([`RunNetns::in_netns`]), on a loopback address there: only the run can reach it. Its
//!    upstream sockets are created by the stub's own threads, in the host's namespace.
//! 3. bubblewrap's parent joins the namespace (`setns`, [`crate::sys::PreExec`]) before it drops
//!    to the run's uid; bubblewrap runs without `--unshare-net`.
//!
//! So the run sees its own socket tables (`/proc/net/*`, netlink dumps), its own abstract unix
//! socket names, and its own loopback; the host's are out of reach.
//!
//! Why a relay rather than a veth pair routed by the host: routing the run's traffic needs IPv4
//! forwarding (`net.ipv4.ip_forward`), and for IPv6 `net.ipv6.conf.all.forwarding`, which turns
//! off router advertisements on every interface of the host; band-server would change host-wide
//! settings on every machine it runs on. A relay changes nothing on the host. Why slirp4netns
//! and not `pasta` (passt): Debian 12's pasta (2023-03) could not open the tap device as an
//! unprivileged user in a namespace made by root, crashed (SIGSEGV) with logging on, and left
//! refused connections hanging instead of refusing them; slirp4netns 1.2 did all of it right.

use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::sys;

/// The interface of the run's namespace.
pub(crate) const TAP: &str = "tap0";
/// The relay's own IPv4 network inside the run's namespace (the tap, its gateway, its unused
/// DNS address). Not slirp4netns's default `10.0.2.0/24`: that is QEMU's user network too, so in
/// a band VM the host the band allows (`10.0.2.2`) would be the relay's own gateway. A
/// benchmarking range (RFC 2544), never a destination a band needs.
pub(crate) const RELAY_CIDR: &str = "198.19.249.0/24";
/// Descriptor numbers in the relay: user namespace, network namespace, ready pipe, exit pipe.
const FD_USERNS: i32 = 3;
const FD_NETNS: i32 = 4;
const FD_READY: i32 = 5;
const FD_EXIT: i32 = 6;
/// How long the relay may take to configure the namespace.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long to wait for the relay's IPv6 router advertisement.
const IPV6_TIMEOUT: Duration = Duration::from_secs(3);

/// What went wrong making the run's namespace or its relay.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error("cannot create the run's network namespace: {0}")]
    Create(std::io::Error),
    #[error("cannot enter the run's network namespace: {0}")]
    Enter(std::io::Error),
    #[error("cannot start {}: {source}", .bin.display())]
    Spawn {
        bin: PathBuf,
        source: std::io::Error,
    },
    #[error("{} did not set up the run's network: {stderr}", .bin.display())]
    NotReady { bin: PathBuf, stderr: String },
    #[error("the run's network namespace got no IPv6 route from {} within {timeout:?}", .bin.display())]
    NoIpv6 { bin: PathBuf, timeout: Duration },
    #[error("internal: {0}")]
    Thread(String),
    #[error("/dev/net/tun does not exist: the relay needs the tun driver (modprobe tun)")]
    NoTun,
}

/// The relay's command line after the program: pure.
pub(crate) fn relay_args() -> Vec<String> {
    [
        "--configure",
        "--mtu=65520",
        "--enable-ipv6",
        "--disable-host-loopback",
        "--disable-dns",
        "--enable-seccomp",
        "--netns-type=path",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([
        format!("--cidr={RELAY_CIDR}"),
        format!("--userns-path=/proc/self/fd/{FD_USERNS}"),
        format!("--ready-fd={FD_READY}"),
        format!("--exit-fd={FD_EXIT}"),
        format!("/proc/self/fd/{FD_NETNS}"),
        TAP.to_string(),
    ])
    .collect()
}

/// Whether `/proc/net/ipv6_route` text has a default route.
pub(crate) fn has_default_ipv6_route(text: &str) -> bool {
    text.lines().any(|l| {
        let mut f = l.split_whitespace();
        f.next() == Some("00000000000000000000000000000000") && f.next() == Some("00")
    })
}

/// The run's user and network namespaces and the relay serving them.
pub struct RunNetns {
    /// Kept open for the run's life (the relay has its own copy).
    _userns: OwnedFd,
    netns: OwnedFd,
    relay: Option<Child>,
    /// The relay was sent SIGKILL ([`RunNetns::kill`]): from then on it may be reaped by
    /// band-server's reaping of orphans (`waitpid(-1)`), so its pid is never signalled again.
    killed: bool,
    /// Closing it tells the relay to exit (`--exit-fd`), also when band-server dies.
    exit_w: Option<OwnedFd>,
    /// Until [`RunNetns::wait_ready`]: whether the relay said it is ready (false: it exited).
    ready: Option<std::sync::mpsc::Receiver<bool>>,
    bin: PathBuf,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl RunNetns {
    /// Make the namespaces (owned by `uid`) and start the relay `bin` in them as `uid`/`gid`;
    /// returns once the namespace has its interface, routes and loopback. Any failure: nothing
    /// is left (the namespaces go with the descriptors, the relay is killed).
    pub fn start(bin: &Path, uid: u32, gid: u32) -> Result<RunNetns, NetnsError> {
        let mut ns = RunNetns::begin(bin, uid, gid)?;
        ns.wait_ready()?;
        Ok(ns)
    }

    /// The first half of [`RunNetns::start`]: the namespaces, and the relay started in them,
    /// without waiting for it to configure the namespace ([`RunNetns::wait_ready`]). A run joins
    /// the namespace with bubblewrap meanwhile; nothing of the run uses the network before the
    /// wait (the jail's input, without which the script never starts, is written after it).
    pub(crate) fn begin(bin: &Path, uid: u32, gid: u32) -> Result<RunNetns, NetnsError> {
        if !Path::new("/dev/net/tun").exists() {
            return Err(NetnsError::NoTun);
        }
        let (userns, netns) = sys::user_and_net_namespaces(uid, gid).map_err(NetnsError::Create)?;
        let mut ns = RunNetns {
            _userns: userns,
            netns,
            relay: None,
            killed: false,
            exit_w: None,
            ready: None,
            bin: bin.to_path_buf(),
            stderr: Arc::default(),
        };
        // No duplicate address detection and an immediate router solicitation on the tap: IPv6
        // is up before the script starts. Absent files: a kernel without IPv6.
        ns.in_netns(|| {
            for (key, value) in [("accept_dad", "0"), ("router_solicitation_delay", "0")] {
                let _ = fs_err::write(format!("/proc/sys/net/ipv6/conf/default/{key}"), value);
            }
        })?;
        ns.spawn_relay(uid, gid)?;
        Ok(ns)
    }

    /// The second half of [`RunNetns::start`]: wait for the relay to configure the namespace
    /// (its ready byte) and for its IPv6 router advertisement. A relay that exits or times out
    /// is stopped, and the error carries what it printed.
    pub(crate) fn wait_ready(&mut self) -> Result<(), NetnsError> {
        let Some(ready) = self.ready.take() else {
            return Ok(());
        };
        if !ready.recv_timeout(READY_TIMEOUT).unwrap_or(false) {
            let _ = self.stop();
            std::thread::sleep(Duration::from_millis(20));
            let stderr = self
                .stderr
                .lock()
                .map(|v| String::from_utf8_lossy(&v).trim().to_string())
                .unwrap_or_default();
            return Err(NetnsError::NotReady {
                bin: self.bin.clone(),
                stderr,
            });
        }
        self.wait_ipv6()?;
        Ok(())
    }

    fn spawn_relay(&mut self, uid: u32, gid: u32) -> Result<(), NetnsError> {
        let spawn_err = |source| NetnsError::Spawn {
            bin: self.bin.clone(),
            source,
        };
        let (ready_r, ready_w) = sys::pipe().map_err(spawn_err)?;
        let (exit_r, exit_w) = sys::pipe().map_err(spawn_err)?;
        let userns = self._userns.as_raw_fd();
        let mut cmd = Command::new(&self.bin);
        cmd.args(relay_args())
            .env_clear()
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        sys::RelayExec {
            fds: vec![
                (userns, FD_USERNS),
                (self.netns.as_raw_fd(), FD_NETNS),
                (ready_w.as_raw_fd(), FD_READY),
                (exit_r.as_raw_fd(), FD_EXIT),
            ],
            uid,
            gid,
        }
        .install(&mut cmd);
        let mut child = cmd.spawn().map_err(spawn_err)?;
        drop(ready_w);
        drop(exit_r);
        self.exit_w = Some(exit_w);
        if let Some(mut err) = child.stderr.take() {
            let keep = self.stderr.clone();
            let _ = std::thread::Builder::new()
                .name("band-relay-err".into())
                .spawn(move || {
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = err.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        if let Ok(mut k) = keep.lock()
                            && k.len() < 16 * 1024
                        {
                            k.extend_from_slice(&buf[..n]);
                        }
                    }
                });
        }
        self.relay = Some(child);
        // The relay writes one byte once the namespace is configured; EOF means it exited.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("band-relay-ready".into())
            .spawn(move || {
                let mut f = std::fs::File::from(ready_r);
                let mut b = [0u8; 1];
                let _ = tx.send(matches!(f.read(&mut b), Ok(1)));
            })
            .map_err(|e| NetnsError::Thread(e.to_string()))?;
        self.ready = Some(rx);
        Ok(())
    }

    /// Wait for the relay's router advertisement (a default IPv6 route), unless the kernel has
    /// no IPv6.
    fn wait_ipv6(&mut self) -> Result<(), NetnsError> {
        let ok = self.in_netns(|| {
            let route = Path::new("/proc/thread-self/net/ipv6_route");
            let deadline = Instant::now() + IPV6_TIMEOUT;
            loop {
                match fs_err::read_to_string(route) {
                    Err(_) => return true, // no IPv6 in this kernel
                    Ok(t) if has_default_ipv6_route(&t) => return true,
                    Ok(_) if Instant::now() >= deadline => return false,
                    // The advertisement follows the relay's ready byte by about 0.1 to 2 ms.
                    Ok(_) => std::thread::sleep(Duration::from_micros(250)),
                }
            }
        })?;
        if ok {
            Ok(())
        } else {
            let _ = self.stop();
            Err(NetnsError::NoIpv6 {
                bin: self.bin.clone(),
                timeout: IPV6_TIMEOUT,
            })
        }
    }

    /// Run `f` on a thread of its own inside the run's network namespace (sockets it creates
    /// belong there); this thread stays where it is.
    pub(crate) fn in_netns<T: Send>(&self, f: impl FnOnce() -> T + Send) -> Result<T, NetnsError> {
        let fd = self.netns.as_fd();
        std::thread::scope(|s| {
            s.spawn(move || {
                sys::setns_net(fd).map_err(NetnsError::Enter)?;
                Ok(f())
            })
            .join()
            .map_err(|_| NetnsError::Thread("a thread in the run's namespace panicked".into()))?
        })
    }

    /// The namespace, for bubblewrap's parent to join.
    pub(crate) fn netns_fd(&self) -> std::os::fd::RawFd {
        self.netns.as_raw_fd()
    }

    #[cfg(test)]
    /// The relay's pid while it runs.
    pub(crate) fn relay_pid(&self) -> Option<u32> {
        self.relay.as_ref().map(Child::id)
    }

    /// Whether the relay is still running (not exited, not killed).
    pub(crate) fn relay_runs(&mut self) -> bool {
        self.relay
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Kill the relay (SIGKILL, and its exit pipe closed) without waiting for it: a killed
    /// process never runs its own code again, so the run's namespace has no way out from here.
    /// Its exit takes a while (about 25 ms: the kernel unregisters its tap first), so a run
    /// kills it before its result and reaps it ([`RunNetns::stop`]) after. An error means it
    /// may still be alive.
    pub(crate) fn kill(&mut self) -> std::io::Result<()> {
        self.exit_w = None;
        match self.relay.as_mut() {
            Some(c) if !self.killed => {
                c.kill()?;
                self.killed = true;
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Kill the relay and reap it. An error means it may still be alive.
    ///
    /// Once killed, the relay may already have been reaped by the run's reaping of orphans
    /// (`waitpid(-1)` after the run stops, which takes every exited child): then `wait` finds no
    /// such child (`ECHILD`), which means it is dead and gone, and its pid, free for reuse, is not
    /// signalled again. (Under load the relay often exited before that reaping; the error kept
    /// the run's table and lease for the janitor, and a run whose client was killed left them.)
    pub(crate) fn stop(&mut self) -> std::io::Result<()> {
        self.exit_w = None;
        if let Some(mut c) = self.relay.take() {
            if !self.killed {
                let _ = c.kill();
                self.killed = true;
            }
            match c.wait() {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ECHILD) => {}
                Err(e) => {
                    // Kept, so the run's teardown tries again (and says so).
                    self.relay = Some(c);
                    return Err(e);
                }
            }
        }
        Ok(())
    }
}

impl Drop for RunNetns {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_relay_has_no_dns_no_host_loopback_and_exits_with_us() {
        let a = relay_args();
        for flag in [
            "--disable-dns",
            "--disable-host-loopback",
            "--enable-seccomp",
            "--exit-fd=6",
            "--ready-fd=5",
            "--userns-path=/proc/self/fd/3",
        ] {
            assert!(a.iter().any(|x| x == flag), "{flag} missing from {a:?}");
        }
        assert!(a.contains(&format!("--cidr={RELAY_CIDR}")));
        assert_eq!(
            a[a.len() - 2..],
            ["/proc/self/fd/4".to_string(), "tap0".to_string()]
        );
        // No port forwarding of any kind exists in slirp4netns without its API socket.
        assert!(!a.iter().any(|x| x.starts_with("--api-socket")));
    }

    /// A `RunNetns` whose relay is `sleep 60` (no namespaces: `/dev/null` stands for them), with
    /// `exit_w` as its exit pipe.
    fn sleeping_relay(exit_w: Option<OwnedFd>) -> RunNetns {
        let fd = || -> OwnedFd {
            fs_err::File::open("/dev/null")
                .unwrap_or_else(|e| panic!("{e}"))
                .into_parts()
                .0
                .into()
        };
        let relay = Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap_or_else(|e| panic!("sleep: {e}"));
        RunNetns {
            _userns: fd(),
            netns: fd(),
            relay: Some(relay),
            killed: false,
            exit_w,
            ready: None,
            bin: PathBuf::from("sleep"),
            stderr: Arc::default(),
        }
    }

    /// `kill` kills the relay without reaping it (the run's result need not wait for its slow
    /// exit); `stop` reaps it; the process is gone after.
    #[test]
    fn kill_stops_the_relay_at_once_and_stop_reaps_it() {
        let (_exit_r, exit_w) = sys::pipe().unwrap_or_else(|e| panic!("{e}"));
        let mut ns = sleeping_relay(Some(exit_w));
        let pid = ns.relay_pid().unwrap_or_else(|| panic!("no relay"));
        let state = || {
            fs_err::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| s.rsplit_once(')').map(|(_, r)| r.trim().to_string()))
                .and_then(|r| r.chars().next())
        };
        assert!(matches!(state(), Some(c) if c != 'Z'), "{:?}", state());
        ns.kill().unwrap_or_else(|e| panic!("{e}"));
        assert!(ns.exit_w.is_none(), "the exit pipe is closed");
        // Dead (a zombie: killed, not reaped) ...
        let deadline = Instant::now() + Duration::from_secs(10);
        while state() != Some('Z') && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(state(), Some('Z'));
        assert!(ns.relay.is_some());
        // ... then reaped.
        ns.stop().unwrap_or_else(|e| panic!("{e}"));
        assert!(ns.relay.is_none());
        assert_eq!(state(), None);
    }

    /// A relay that something else reaped after it was killed (the run's reaping of orphans,
    /// `waitpid(-1)`): `stop` finds it gone, which is success (it is dead), and sends no signal
    /// to its pid. Before, the error kept the run's table and lease for the janitor.
    #[test]
    fn stop_after_the_killed_relay_was_reaped_elsewhere_is_success() {
        let mut ns = sleeping_relay(None);
        let pid = ns.relay_pid().unwrap_or_else(|| panic!("no relay"));
        ns.kill().unwrap_or_else(|e| panic!("{e}"));
        let reaped = rustix::process::waitpid(
            rustix::process::Pid::from_raw(pid as i32),
            rustix::process::WaitOptions::empty(),
        )
        .unwrap_or_else(|e| panic!("waitpid: {e}"));
        assert!(reaped.is_some(), "reaped here, as the orphan reaping does");
        ns.stop()
            .unwrap_or_else(|e| panic!("stop after the relay was reaped: {e}"));
        assert!(ns.relay.is_none());
    }

    #[test]
    fn default_ipv6_route_detection() {
        let none = "fe800000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     tap0\n";
        let default = "00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000002 00000400 00000001 00000000 00450003     tap0\n";
        assert!(!has_default_ipv6_route(none));
        assert!(has_default_ipv6_route(&format!("{none}{default}")));
    }
}
