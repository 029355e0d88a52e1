//! The host's loopback ports a band opens: `allow.net: ["localhost:8000"]` (or `127.0.0.1:8000`,
//! `[::1]:8000`; [`band::policy::net::NetMatcher::loopback_ports`]).
//!
//! Inside a networked run, `127.0.0.1` and `::1` are the run's own namespace's loopback, and the
//! relay never leads to the host's (`--disable-host-loopback`, [`super::netns`]). For each opened
//! port P, band-server listens (TCP) *inside* the run's namespace on `127.0.0.1:P` and `[::1]:P`
//! (sockets made by a thread that joined it, like the DNS stub's: nothing outside the run can
//! reach them), and relays each connection the run makes there to port P of the host's loopback
//! (`127.0.0.1`, then `::1`), copying both ways. Only those ports: every other loopback port of
//! the host, and every other host service, stays out of reach. TCP only: no UDP is relayed.
//!
//! The host side of each relayed connection is band-server's own socket (root), made in the
//! host's namespace: the run's nftables table, which matches the run's uid, does not see it, so
//! the forwarder records each connection itself ([`Forward::flows`]) for the run's report.
//!
//! [`Forward::stop`] closes the listeners, shuts down every relayed connection (both sides) and
//! joins every thread: nothing of it is left. A run holds at most [`MAX_CONNECTIONS`] relayed
//! connections at once; more are closed as they come.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Most relayed connections a run holds open at once (a per-run bound on band-server's threads
/// and sockets); a connection beyond it is closed as soon as it is accepted.
pub const MAX_CONNECTIONS: usize = 64;
/// How long a connection to the host's loopback may take to be accepted (a full backlog drops
/// the handshake instead of refusing it).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// What went wrong opening a loopback port in the run's namespace.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    #[error("cannot listen on {addr} in the run's network namespace: {source}")]
    Bind { addr: SocketAddr, source: io::Error },
    #[error("cannot start a thread of the loopback relay: {0}")]
    Thread(io::Error),
}

/// A listening socket of the run's namespace and the host's loopback port it leads to.
pub struct Listener {
    /// Where the run connects (`127.0.0.1:P` or `[::1]:P`).
    pub inside: SocketAddr,
    /// The port of the host's loopback the connections go to (P, but for tests).
    pub to_port: u16,
    socket: TcpListener,
}

/// The loopback addresses a port is opened on inside the run, in order.
pub fn inside_addrs(port: u16) -> [SocketAddr; 2] {
    [
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port),
        SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), port),
    ]
}

/// Listen on `127.0.0.1:P` and `[::1]:P` for each port, in the calling thread's network
/// namespace (a networked run's own: see `netns::RunNetns::in_netns`). A namespace without IPv6
/// gets the IPv4 listener only; any other failure is an error (and closes what was bound).
pub fn bind(ports: &[u16]) -> Result<Vec<Listener>, ForwardError> {
    let mut out = Vec::new();
    for &port in ports {
        for addr in inside_addrs(port) {
            match TcpListener::bind(addr) {
                Ok(socket) => out.push(Listener {
                    inside: addr,
                    to_port: port,
                    socket,
                }),
                Err(e) if addr.is_ipv6() && no_ipv6(&e) => {}
                Err(source) => return Err(ForwardError::Bind { addr, source }),
            }
        }
    }
    Ok(out)
}

/// The errors of binding `::1` where the kernel or namespace has no IPv6.
fn no_ipv6(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(code) if code == rustix::io::Errno::ADDRNOTAVAIL.raw_os_error()
            || code == rustix::io::Errno::AFNOSUPPORT.raw_os_error()
    )
}

/// A listener for tests (and anything else that binds its own sockets): `socket` leads to port
/// `to_port` of the host's loopback.
pub fn listener(socket: TcpListener, to_port: u16) -> io::Result<Listener> {
    Ok(Listener {
        inside: socket.local_addr()?,
        to_port,
        socket,
    })
}

#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    /// The sockets of each live relayed connection (copies), shut down by [`Forward::stop`].
    live: Mutex<BTreeMap<u64, Vec<OwnedFd>>>,
    next: AtomicU64,
    /// The connection threads, joined by [`Forward::stop`].
    conns: Mutex<Vec<JoinHandle<()>>>,
    /// What the run connected to: (the address inside, the port).
    seen: Mutex<BTreeSet<(IpAddr, u16)>>,
}

impl Shared {
    /// Keep a copy of `s` under connection `id`, to shut it down on stop. False once stopping
    /// (the caller drops the connection).
    fn register(&self, id: u64, s: &TcpStream) -> bool {
        let Ok(mut live) = self.live.lock() else {
            return false;
        };
        if self.stop.load(Ordering::SeqCst) {
            return false;
        }
        match s.try_clone() {
            Ok(c) => {
                live.entry(id).or_default().push(OwnedFd::from(c));
                true
            }
            Err(_) => false,
        }
    }

    fn forget(&self, id: u64) {
        if let Ok(mut live) = self.live.lock() {
            live.remove(&id);
        }
    }
}

/// The relay of a run's opened loopback ports: its listeners' threads and its connections.
/// Dropping it stops it.
pub struct Forward {
    shared: Arc<Shared>,
    accepting: Vec<JoinHandle<()>>,
    /// The listeners (copies), shut down by [`Forward::stop`] to wake their threads.
    wake: Vec<OwnedFd>,
}

impl Forward {
    /// Serve the listeners: a thread blocked in `accept` for each; each connection gets a thread
    /// that connects to the host's loopback and relays. The threads (and the sockets they make
    /// towards the host) stay in this process's network namespace.
    pub fn serve(listeners: Vec<Listener>) -> Result<Forward, ForwardError> {
        let shared = Arc::new(Shared::default());
        let mut forward = Forward {
            shared: shared.clone(),
            accepting: Vec::new(),
            wake: Vec::new(),
        };
        for l in listeners {
            l.socket
                .set_nonblocking(false)
                .map_err(ForwardError::Thread)?;
            forward.wake.push(OwnedFd::from(
                l.socket.try_clone().map_err(ForwardError::Thread)?,
            ));
            let shared = shared.clone();
            let handle = std::thread::Builder::new()
                .name("band-lo-accept".into())
                .spawn(move || accept_loop(&l, &shared))
                .map_err(ForwardError::Thread)?;
            forward.accepting.push(handle);
        }
        Ok(forward)
    }

    /// What the run connected to through the relay: (the loopback address inside the run, the
    /// port), each once, sorted. Still there after [`Forward::stop`].
    pub fn flows(&self) -> Vec<(IpAddr, u16)> {
        self.shared
            .seen
            .lock()
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Stop: no new connection, every relayed connection shut down on both sides, every thread
    /// joined. Idempotent.
    pub fn stop(&mut self) {
        if let Ok(live) = self.shared.live.lock() {
            self.shared.stop.store(true, Ordering::SeqCst);
            for fd in live.values().flatten() {
                let _ = rustix::net::shutdown(fd, rustix::net::Shutdown::Both);
            }
        } else {
            self.shared.stop.store(true, Ordering::SeqCst);
        }
        // A thread blocked in `accept` wakes (it fails) once its socket is shut down.
        for fd in self.wake.drain(..) {
            let _ = rustix::net::shutdown(&fd, rustix::net::Shutdown::Read);
        }
        for t in self.accepting.drain(..) {
            let _ = t.join();
        }
        // No accepting thread is left to add one.
        let conns = self
            .shared
            .conns
            .lock()
            .map(|mut c| std::mem::take(&mut *c))
            .unwrap_or_default();
        for t in conns {
            let _ = t.join();
        }
    }

    /// The threads still running (accepting and relaying), for tests.
    pub fn threads(&self) -> usize {
        let conns = self
            .shared
            .conns
            .lock()
            .map(|c| c.iter().filter(|t| !t.is_finished()).count())
            .unwrap_or(0);
        self.accepting.iter().filter(|t| !t.is_finished()).count() + conns
    }
}

impl Drop for Forward {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(l: &Listener, shared: &Arc<Shared>) {
    loop {
        let accepted = l.socket.accept();
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok((inside, _)) = accepted else {
            // A failed accept (the client gave up, a descriptor limit): brief, then again.
            std::thread::sleep(Duration::from_millis(5));
            continue;
        };
        if let Ok(mut seen) = shared.seen.lock() {
            seen.insert((l.inside.ip(), l.inside.port()));
        }
        let Ok(mut conns) = shared.conns.lock() else {
            continue;
        };
        conns.retain(|t| !t.is_finished());
        if conns.len() >= MAX_CONNECTIONS {
            // Over the bound: closed at once (the client sees the connection end).
            continue;
        }
        let id = shared.next.fetch_add(1, Ordering::SeqCst);
        let to_port = l.to_port;
        let s = shared.clone();
        if let Ok(t) = std::thread::Builder::new()
            .name("band-lo-relay".into())
            .spawn(move || relay(id, inside, to_port, &s))
        {
            conns.push(t);
        }
    }
}

/// Connect to port `port` of the host's loopback: `127.0.0.1`, then `::1`.
fn connect_host(port: u16) -> Option<TcpStream> {
    inside_addrs(port)
        .iter()
        .find_map(|a| TcpStream::connect_timeout(a, CONNECT_TIMEOUT).ok())
}

/// One relayed connection: the host's end, then both directions copied until each ends (or
/// [`Forward::stop`] shuts both sockets down).
fn relay(id: u64, inside: TcpStream, port: u16, shared: &Shared) {
    if shared.register(id, &inside)
        && let Some(outside) = connect_host(port)
        && shared.register(id, &outside)
    {
        copy_both_ways(&inside, &outside);
    }
    shared.forget(id);
}

fn copy_both_ways(a: &TcpStream, b: &TcpStream) {
    let one_way = |from: &TcpStream, to: &TcpStream| {
        let _ = io::copy(&mut &*from, &mut &*to);
        // The end of one direction is passed on; the other keeps going.
        let _ = to.shutdown(Shutdown::Write);
    };
    std::thread::scope(|s| {
        let back = std::thread::Builder::new()
            .name("band-lo-copy".into())
            .spawn_scoped(s, || one_way(b, a));
        if back.is_err() {
            // No second thread: the connection is closed rather than half served.
            let _ = a.shutdown(Shutdown::Both);
            let _ = b.shutdown(Shutdown::Both);
            return;
        }
        one_way(a, b);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// A host service on loopback: answers each connection with `reply` and what it read.
    fn service(reply: &'static str) -> (u16, JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let t = std::thread::spawn(move || {
            for s in l.incoming().take(2) {
                let mut s = s.unwrap();
                let mut buf = [0u8; 64];
                let n = s.read(&mut buf).unwrap();
                s.write_all(format!("{reply}:{}", String::from_utf8_lossy(&buf[..n])).as_bytes())
                    .unwrap();
            }
        });
        (port, t)
    }

    fn ask(addr: SocketAddr, what: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(what.as_bytes()).unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        // Ended by the other side: EOF, or a reset when it closed with our bytes unread.
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    /// Here "inside" is the test's own namespace: a listener on an ephemeral port stands for the
    /// run's `127.0.0.1:P`, and leads to the service's port.
    #[test]
    fn a_connection_is_relayed_both_ways_recorded_and_stop_leaves_nothing() {
        let (port, service) = service("hello");
        let inside = TcpListener::bind("127.0.0.1:0").unwrap();
        let at = inside.local_addr().unwrap();
        let mut f = Forward::serve(vec![listener(inside, port).unwrap()]).unwrap();
        assert_eq!(ask(at, "one"), "hello:one");
        assert_eq!(ask(at, "two"), "hello:two");
        service.join().unwrap();
        assert_eq!(f.flows(), vec![(at.ip(), at.port())]);
        // A connection left open by the run is shut down by stop, which returns once every
        // thread has returned.
        let mut open = TcpStream::connect(at).unwrap();
        f.stop();
        assert_eq!(f.threads(), 0);
        let mut buf = [0u8; 8];
        assert_eq!(
            open.read(&mut buf).unwrap_or(0),
            0,
            "the open connection ended"
        );
        assert!(TcpStream::connect(at).is_err(), "the listener is closed");
        assert_eq!(f.flows(), vec![(at.ip(), at.port())], "kept after stop");
    }

    #[test]
    fn nothing_listening_on_the_host_ends_the_connection() {
        // A port nothing listens on (bound, then closed).
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let inside = TcpListener::bind("127.0.0.1:0").unwrap();
        let at = inside.local_addr().unwrap();
        let mut f = Forward::serve(vec![listener(inside, port).unwrap()]).unwrap();
        assert_eq!(ask(at, "x"), "");
        f.stop();
        assert_eq!(f.threads(), 0);
    }

    #[test]
    fn each_port_is_opened_on_both_loopback_addresses() {
        assert_eq!(
            inside_addrs(18000).map(|a| a.to_string()),
            ["127.0.0.1:18000".to_string(), "[::1]:18000".to_string()]
        );
    }
}
