//! The run's DNS stub: the only resolver a networked run can reach (its `/etc/resolv.conf`).
//!
//! For a name that `allow.net` admits (and `deny.net` does not), an A or AAAA question is asked
//! upstream; the answered addresses that may be reached are added to the run's nftables sets
//! *before* the reply leaves, so the script connects to exactly what it was told. Every other
//! name gets NXDOMAIN without a packet leaving the machine, and other record types (TXT, MX,
//! ANY, …) are never forwarded, which closes DNS tunnelling through names the band does not
//! trust.
//!
//! Addresses that are not public (private, loopback, link-local and metadata, ULA, …) or that
//! belong to this host are removed from answers unless an `allow.net` IP/CIDR names them:
//! an allowed name cannot be pointed at the inside (DNS rebinding).
//!
//! [`Resolver::answer`] is the whole decision, a function of the query bytes and an upstream;
//! [`Stub`] is the thin layer of sockets and threads around it.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use band::policy::Decision;
use band::policy::net::{NetMatcher, is_public_ip};
use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{DNSClass, RData, Record, RecordType};
use rustix::net::RecvFlags;

use super::nft::{Dest, NftError};

/// What the stub decided about one name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NameDecision {
    /// Not admitted: NXDOMAIN, nothing asked upstream.
    Refused,
    /// Admitted on these ports (`None` = every port); addresses are denied on `deny_ports`.
    Allowed {
        ports: Vec<Option<u16>>,
        deny_ports: Vec<u16>,
    },
}

/// Decide a name against the band's `net` rules.
pub(crate) fn decide_name(m: &NetMatcher, name: &str) -> NameDecision {
    if matches!(m.check_host(name, None), Decision::Deny { .. }) {
        return NameDecision::Refused;
    }
    let mut ports: Vec<Option<u16>> = m
        .allow_patterns()
        .iter()
        .filter(|p| !p.is_ip() && p.matches_host(name, None))
        .map(|p| p.port())
        .collect();
    if ports.is_empty() {
        return NameDecision::Refused;
    }
    if ports.contains(&None) {
        ports = vec![None];
    }
    ports.sort();
    ports.dedup();
    let mut deny_ports: Vec<u16> = m
        .deny_patterns()
        .iter()
        .filter_map(|p| p.port().filter(|port| p.matches_host(name, Some(*port))))
        .collect();
    deny_ports.sort();
    deny_ports.dedup();
    NameDecision::Allowed { ports, deny_ports }
}

/// Whether an answered address may be handed to the script.
pub(crate) fn address_admitted(m: &NetMatcher, own: &[IpAddr], ip: IpAddr) -> bool {
    if matches!(m.check_ip(ip, None), Decision::Deny { .. }) {
        return false;
    }
    let explicit = m.ip_patterns().any(|p| p.matches_ip(ip, None));
    explicit || (is_public_ip(ip) && !own.contains(&ip))
}

pub(crate) use crate::common::handover::{Lookup, OnLookup};

/// Asks the real resolvers.
pub trait Upstream: Send + Sync {
    fn ask(&self, query: &Message) -> Result<Message, DnsError>;
}

/// Adds learned destinations to the run's sets; must finish before the reply is sent.
pub(crate) type Learn = dyn Fn(&[Dest], &[Dest]) -> Result<(), NftError> + Send + Sync;

/// What went wrong asking an upstream resolver or starting the stub.
#[derive(Debug, thiserror::Error)]
pub enum DnsError {
    #[error("no upstream resolver configured")]
    NoUpstream,
    #[error("udp socket: {0}")]
    UdpSocket(std::io::Error),
    #[error("{server}: {source}")]
    Io {
        server: SocketAddr,
        source: std::io::Error,
    },
    #[error("{server} (tcp): {source}")]
    Tcp {
        server: SocketAddr,
        source: std::io::Error,
    },
    #[error("encode: {0}")]
    Encode(hickory_proto::ProtoError),
    #[error("{server}: bad answer: {source}")]
    Answer {
        server: SocketAddr,
        source: hickory_proto::ProtoError,
    },
    #[error("cannot bind the DNS stub on {addr}/{proto}: {source}")]
    Bind {
        addr: SocketAddrV4,
        proto: &'static str,
        source: std::io::Error,
    },
    #[error("{addr}: {source}")]
    Socket {
        addr: SocketAddrV4,
        source: std::io::Error,
    },
    #[error("cannot start the DNS stub: {0}")]
    Thread(std::io::Error),
}

/// The decision part of the stub.
pub struct Resolver {
    pub matcher: NetMatcher,
    /// This host's own addresses (never handed out unless an IP pattern names them).
    pub own: Vec<IpAddr>,
    pub upstream: Box<dyn Upstream>,
    pub learn: Box<Learn>,
    /// The egress proxy of a run that has one: the names it serves are answered with its
    /// address (never asked upstream for the run), and a name holding a bound secret's
    /// placeholder is refused and reported.
    pub proxy: Option<ProxyDns>,
}

/// What the stub needs of the run's egress proxy.
pub struct ProxyDns {
    /// The proxy's address in the run's namespace (the stub's own).
    pub addr: Ipv4Addr,
    pub bound: super::proxy::bound::Bound,
    /// The observing run of `band learn --net`: every admitted name is the proxy's.
    pub observe: bool,
    /// Where a placeholder in a name is reported (streamed and kept with the proxy's denials,
    /// within their bound).
    pub refusals: Arc<super::proxy::refusals::Refusals>,
}

/// How many threads answer the stub's UDP questions.
/// The port the stub serves on its address, UDP and TCP.
pub(crate) const STUB_PORT: u16 = 53;

const UDP_THREADS: usize = 2;

/// Longest reply over UDP without EDNS.
const UDP_PLAIN: usize = 512;

impl Resolver {
    /// The reply to one query (None: not a DNS query at all; drop it), and what was asked.
    pub(crate) fn answer(&self, bytes: &[u8]) -> (Option<Vec<u8>>, Option<Lookup>) {
        let Ok(req) = Message::from_vec(bytes) else {
            return (None, None);
        };
        if req.metadata.message_type != MessageType::Query {
            return (None, None);
        }
        let id = req.metadata.id;
        let reply = |code: ResponseCode, answers: Vec<Record>| {
            let mut m = Message::error_msg(id, req.metadata.op_code, code);
            m.metadata.recursion_desired = req.metadata.recursion_desired;
            m.metadata.recursion_available = true;
            m.add_queries(req.queries.iter().cloned());
            m.add_answers(answers);
            m.to_vec().ok()
        };
        if req.metadata.op_code != OpCode::Query || req.queries.len() != 1 {
            return (reply(ResponseCode::Refused, vec![]), None);
        }
        let q = &req.queries[0];
        let name = q
            .name()
            .to_ascii()
            .trim_end_matches('.')
            .to_ascii_lowercase();
        let qtype = q.query_type();
        let mut lookup = Lookup {
            name: name.clone(),
            qtype: qtype.to_string(),
            allowed: false,
            addrs: vec![],
            withheld: vec![],
        };
        if q.query_class() != DNSClass::IN {
            return (reply(ResponseCode::Refused, vec![]), Some(lookup));
        }
        if let Some(proxy) = &self.proxy
            && let Some(leak) = proxy.bound.find_in(name.as_bytes(), "DNS name")
        {
            // A bound secret's placeholder on its way out in a name: refused, nothing asked.
            let d = band::proto::Denial::Secret {
                name: leak.name,
                to: "DNS".into(),
                place: leak.place,
            };
            proxy.refusals.record(d);
            return (reply(ResponseCode::NXDomain, vec![]), Some(lookup));
        }
        let NameDecision::Allowed { ports, deny_ports } = decide_name(&self.matcher, &name) else {
            return (reply(ResponseCode::NXDomain, vec![]), Some(lookup));
        };
        lookup.allowed = true;
        // An observing run's names resolve as usual: its HTTP(S) reaches the proxy by a
        // redirect in its namespace, its other traffic goes direct.
        if let Some(proxy) = &self.proxy
            && !proxy.observe
            && super::proxy::serves(
                &self.matcher,
                super::proxy::Serve::of(&proxy.bound, proxy.observe),
                &name,
            )
        {
            // Served by the proxy: its address, and nothing of the name's own enters the table.
            let mut answers = Vec::new();
            if qtype == RecordType::A {
                lookup.addrs.push(IpAddr::V4(proxy.addr));
                answers.push(Record::from_rdata(
                    q.name().clone(),
                    60,
                    RData::A(hickory_proto::rr::rdata::A(proxy.addr)),
                ));
            }
            return (reply(ResponseCode::NoError, answers), Some(lookup));
        }
        if qtype != RecordType::A && qtype != RecordType::AAAA {
            // An admitted name, but only addresses are ever asked upstream.
            return (reply(ResponseCode::NoError, vec![]), Some(lookup));
        }
        let mut up = Message::query();
        up.metadata.recursion_desired = true;
        up.add_query(Query::query(q.name().clone(), qtype));
        let resp = match self.upstream.ask(&up) {
            Ok(r) => r,
            Err(e) => {
                crate::say!("band-server: dns: {name}: {e}");
                return (reply(ResponseCode::ServFail, vec![]), Some(lookup));
            }
        };
        let mut answers = Vec::new();
        for rec in resp.answers {
            let ip = match &rec.data {
                RData::A(a) => IpAddr::V4(a.0),
                RData::AAAA(a) => IpAddr::V6(a.0),
                RData::CNAME(_) => {
                    answers.push(rec);
                    continue;
                }
                _ => continue,
            };
            if address_admitted(&self.matcher, &self.own, ip) {
                lookup.addrs.push(ip);
                answers.push(rec);
            } else {
                lookup.withheld.push(ip);
            }
        }
        let allow: Vec<Dest> = lookup
            .addrs
            .iter()
            .flat_map(|ip| ports.iter().map(|p| Dest::addr(*ip, *p)))
            .collect();
        let deny: Vec<Dest> = lookup
            .addrs
            .iter()
            .flat_map(|ip| deny_ports.iter().map(|p| Dest::addr(*ip, Some(*p))))
            .collect();
        if !allow.is_empty()
            && let Err(e) = (self.learn)(&allow, &deny)
        {
            // Fail closed: never tell the script an address its chain does not allow.
            crate::say!("band-server: dns: {name}: cannot add the answer to the run's table: {e}");
            lookup.addrs.clear();
            return (reply(ResponseCode::ServFail, vec![]), Some(lookup));
        }
        let code = match resp.metadata.response_code {
            ResponseCode::NXDomain => ResponseCode::NXDomain,
            ResponseCode::NoError => ResponseCode::NoError,
            _ => ResponseCode::ServFail,
        };
        (reply(code, answers), Some(lookup))
    }
}

/// A UDP reply that does not fit: the header and question with TC set (the client retries on TCP).
fn fit_udp(reply: Vec<u8>) -> Vec<u8> {
    if reply.len() <= UDP_PLAIN {
        return reply;
    }
    match Message::from_vec(&reply) {
        Ok(m) => m.truncate().to_vec().unwrap_or(reply),
        Err(_) => reply,
    }
}

/// The addresses of `name` the run may reach, asked of `upstream` (A, then AAAA) and kept as
/// the stub keeps them ([`address_admitted`]): for the egress proxy's own connections.
pub(crate) fn resolve(
    upstream: &dyn Upstream,
    m: &NetMatcher,
    own: &[IpAddr],
    name: &str,
) -> Vec<IpAddr> {
    let Ok(qname) = hickory_proto::rr::Name::from_ascii(format!("{name}.")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for qtype in [RecordType::A, RecordType::AAAA] {
        let mut q = Message::query();
        q.metadata.recursion_desired = true;
        q.add_query(Query::query(qname.clone(), qtype));
        let Ok(resp) = upstream.ask(&q) else {
            continue;
        };
        for rec in resp.answers {
            let ip = match &rec.data {
                RData::A(a) => IpAddr::V4(a.0),
                RData::AAAA(a) => IpAddr::V6(a.0),
                _ => continue,
            };
            if address_admitted(m, own, ip) && !out.contains(&ip) {
                out.push(ip);
            }
        }
    }
    out
}

/// Real resolvers over UDP (TCP when the answer is truncated).
pub struct UdpUpstream {
    pub servers: Vec<SocketAddr>,
    pub timeout: Duration,
}

impl UdpUpstream {
    fn ask_one(
        &self,
        server: SocketAddr,
        query: &Message,
        bytes: &[u8],
    ) -> Result<Message, DnsError> {
        let bind: SocketAddr = if server.is_ipv4() {
            "0.0.0.0:0".parse().unwrap_or(server)
        } else {
            "[::]:0".parse().unwrap_or(server)
        };
        let io = |source| DnsError::Io { server, source };
        let sock = UdpSocket::bind(bind).map_err(DnsError::UdpSocket)?;
        sock.set_read_timeout(Some(self.timeout))
            .map_err(DnsError::UdpSocket)?;
        sock.connect(server).map_err(io)?;
        sock.send(bytes).map_err(io)?;
        let mut buf = vec![0u8; 4096];
        loop {
            let n = sock.recv(&mut buf).map_err(io)?;
            let Ok(m) = Message::from_vec(&buf[..n]) else {
                continue;
            };
            if m.metadata.id != query.metadata.id || m.queries != query.queries {
                continue; // not our answer
            }
            if m.metadata.truncation {
                return ask_tcp(server, bytes, self.timeout);
            }
            return Ok(m);
        }
    }
}

impl Upstream for UdpUpstream {
    fn ask(&self, query: &Message) -> Result<Message, DnsError> {
        let bytes = query.to_vec().map_err(DnsError::Encode)?;
        let mut last = DnsError::NoUpstream;
        for s in &self.servers {
            match self.ask_one(*s, query, &bytes) {
                Ok(m) => return Ok(m),
                Err(e) => last = e,
            }
        }
        Err(last)
    }
}

fn ask_tcp(server: SocketAddr, bytes: &[u8], timeout: Duration) -> Result<Message, DnsError> {
    let tcp = |source| DnsError::Tcp { server, source };
    let mut s = TcpStream::connect_timeout(&server, timeout).map_err(tcp)?;
    s.set_read_timeout(Some(timeout))
        .map_err(|source| DnsError::Io { server, source })?;
    write_framed(&mut s, bytes).map_err(tcp)?;
    let reply = read_framed(&mut s).map_err(tcp)?;
    Message::from_vec(&reply).map_err(|e| DnsError::Answer {
        server,
        source: hickory_proto::ProtoError::Decode(e),
    })
}

fn write_framed(s: &mut impl Write, bytes: &[u8]) -> std::io::Result<()> {
    let len = u16::try_from(bytes.len()).map_err(|_| std::io::Error::other("message too long"))?;
    s.write_all(&len.to_be_bytes())?;
    s.write_all(bytes)
}

fn read_framed(s: &mut impl Read) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 2];
    s.read_exact(&mut len)?;
    let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
    s.read_exact(&mut buf)?;
    Ok(buf)
}

/// The stub's sockets and threads. Dropping it stops them.
pub struct Stub {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// The serving threads' sockets, shut down by [`Stub::stop`] to wake them at once (they
    /// block in `recv_from` and `accept` with no timeout: nothing polls).
    wake: Vec<OwnedFd>,
}

impl Stub {
    /// Bind UDP and TCP port 53 on `addr` (a loopback address of this run) and serve.
    pub fn start(
        addr: Ipv4Addr,
        resolver: Resolver,
        on_lookup: Arc<OnLookup>,
    ) -> Result<Stub, DnsError> {
        let (udp, tcp) = Stub::bind(addr)?;
        Stub::serve(addr, udp, tcp, resolver, on_lookup)
    }

    /// The stub's two sockets, UDP and TCP port 53 on `addr`, in the calling thread's network
    /// namespace (a networked run's own: see `netns::RunNetns::in_netns`).
    pub(crate) fn bind(addr: Ipv4Addr) -> Result<(UdpSocket, TcpListener), DnsError> {
        let sa = SocketAddrV4::new(addr, STUB_PORT);
        let bind = |proto| {
            move |source| DnsError::Bind {
                addr: sa,
                proto,
                source,
            }
        };
        let udp = UdpSocket::bind(sa).map_err(bind("udp"))?;
        let tcp = TcpListener::bind(sa).map_err(bind("tcp"))?;
        Ok((udp, tcp))
    }

    /// Serve on sockets made by [`Stub::bind`]. The serving threads (and the upstream sockets
    /// they make) stay in this process's network namespace.
    pub(crate) fn serve(
        addr: Ipv4Addr,
        udp: UdpSocket,
        tcp: TcpListener,
        resolver: Resolver,
        on_lookup: Arc<OnLookup>,
    ) -> Result<Stub, DnsError> {
        let sa = SocketAddrV4::new(addr, STUB_PORT);
        let socket = |source| DnsError::Socket { addr: sa, source };
        udp.set_read_timeout(None).map_err(socket)?;
        tcp.set_nonblocking(false).map_err(socket)?;
        let wake = vec![
            OwnedFd::from(udp.try_clone().map_err(socket)?),
            OwnedFd::from(tcp.try_clone().map_err(socket)?),
        ];
        let stop = Arc::new(AtomicBool::new(false));
        let resolver = Arc::new(resolver);
        let mut threads = Vec::new();
        // Two threads answer UDP, each blocked in `recv_from` on the same socket: a resolver asks
        // for A and AAAA at once, and the second question is asked upstream while the first
        // one's addresses go into the table (about 0.3 to 0.8 ms less per name).
        for _ in 0..UDP_THREADS {
            let udp = udp.try_clone().map_err(socket)?;
            let (stop, resolver, on_lookup) = (stop.clone(), resolver.clone(), on_lookup.clone());
            threads.push(
                std::thread::Builder::new()
                    .name("band-dns-udp".into())
                    .spawn(move || serve_udp(udp, &resolver, &*on_lookup, &stop))
                    .map_err(DnsError::Thread)?,
            );
        }
        drop(udp);
        {
            let stop = stop.clone();
            threads.push(
                std::thread::Builder::new()
                    .name("band-dns-tcp".into())
                    .spawn(move || serve_tcp(tcp, &resolver, &*on_lookup, &stop))
                    .map_err(DnsError::Thread)?,
            );
        }
        Ok(Stub {
            stop,
            threads,
            wake,
        })
    }

    /// Stop serving: set the flag, then shut the sockets down for reading, which wakes a thread
    /// blocked in `recv_from` (it reads 0 bytes) or `accept` (it fails) at once; it sees the flag
    /// and returns. Returns how many serving threads panicked (none should).
    pub fn stop(&mut self) -> usize {
        self.stop.store(true, Ordering::SeqCst);
        for fd in self.wake.drain(..) {
            let _ = rustix::net::shutdown(&fd, rustix::net::Shutdown::Read);
        }
        self.threads
            .drain(..)
            .map(JoinHandle::join)
            .filter(Result::is_err)
            .count()
    }
}

impl Drop for Stub {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

fn serve_udp(sock: UdpSocket, r: &Resolver, on_lookup: &OnLookup, stop: &AtomicBool) {
    let mut buf = vec![0u8; 4096];
    while !stop.load(Ordering::SeqCst) {
        // rustix's recvfrom, not std's `recv_from`: once `Stub::stop` shuts the socket down,
        // recvfrom returns 0 bytes and no sender address, which std decodes as a sockaddr
        // anyway (an assertion failure, `len >= size_of::<sockaddr_in>()`, was seen in server
        // logs at teardown); rustix says "no address".
        let Ok((n, _, peer)) = rustix::net::recvfrom(&sock, &mut buf[..], RecvFlags::empty())
        else {
            continue;
        };
        if n == 0 && stop.load(Ordering::SeqCst) {
            break;
        }
        // A datagram with no IP sender (none comes on a UDP/IP socket) has no one to answer.
        let Some(peer) = peer.and_then(|a| SocketAddr::try_from(a).ok()) else {
            continue;
        };
        let (reply, lookup) = r.answer(&buf[..n]);
        if let Some(l) = lookup {
            on_lookup(&l);
        }
        if let Some(reply) = reply {
            let _ = sock.send_to(&fit_udp(reply), peer);
        }
    }
}

fn serve_tcp(listener: TcpListener, r: &Resolver, on_lookup: &OnLookup, stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        let Ok((mut s, _)) = listener.accept() else {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            // A failed accept (the client gave up, a descriptor limit): brief, then again.
            std::thread::sleep(Duration::from_millis(5));
            continue;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        // One connection at a time: a run asks few questions, and a slow client only delays itself.
        while let Ok(q) = read_framed(&mut s) {
            let (reply, lookup) = r.answer(&q);
            if let Some(l) = lookup {
                on_lookup(&l);
            }
            match reply {
                Some(reply) if write_framed(&mut s, &reply).is_ok() => {}
                _ => break,
            }
            if stop.load(Ordering::SeqCst) {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::Name;
    use hickory_proto::rr::rdata::{A, AAAA, CNAME, TXT};
    use std::str::FromStr;
    use std::sync::Mutex;

    fn matcher(allow: &[&str], deny: &[&str]) -> NetMatcher {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        NetMatcher::new(&s(allow), &s(deny)).unwrap()
    }

    #[test]
    fn names_follow_allow_deny_and_wildcard_depth() {
        let m = matcher(
            &["*.example.test", "api.other.test:443"],
            &["secret.example.test", "mail.example.test:25"],
        );
        assert_eq!(
            decide_name(&m, "a.b.example.test"),
            NameDecision::Allowed {
                ports: vec![None],
                deny_ports: vec![]
            }
        );
        assert_eq!(decide_name(&m, "example.test"), NameDecision::Refused);
        assert_eq!(
            decide_name(&m, "secret.example.test"),
            NameDecision::Refused
        );
        assert_eq!(
            decide_name(&m, "mail.example.test"),
            NameDecision::Allowed {
                ports: vec![None],
                deny_ports: vec![25]
            }
        );
        assert_eq!(
            decide_name(&m, "api.other.test"),
            NameDecision::Allowed {
                ports: vec![Some(443)],
                deny_ports: vec![]
            }
        );
        assert_eq!(decide_name(&m, "evil.test"), NameDecision::Refused);
    }

    #[test]
    fn private_and_own_addresses_are_withheld_unless_named() {
        let m = matcher(&["*.example.test", "10.9.0.0/16"], &["93.184.216.99"]);
        let own = vec![IpAddr::from_str("198.41.0.4").unwrap()];
        let ok = |s: &str| address_admitted(&m, &own, s.parse().unwrap());
        assert!(ok("93.184.216.34"));
        assert!(!ok("93.184.216.99"), "deny.net IP");
        assert!(!ok("169.254.169.254"), "metadata");
        assert!(!ok("127.0.0.1"));
        assert!(!ok("192.168.1.1"));
        assert!(!ok("fd00::1"));
        assert!(!ok("::1"));
        assert!(!ok("198.41.0.4"), "this host");
        assert!(ok("10.9.3.4"), "named by an allow.net CIDR");
        assert!(ok("2606:2800:220:1::1"));
    }

    struct Fake(Vec<Record>, std::sync::Mutex<usize>);
    impl Upstream for Fake {
        fn ask(&self, q: &Message) -> Result<Message, DnsError> {
            *self.1.lock().unwrap() += 1;
            let mut m = Message::response(q.metadata.id, OpCode::Query);
            m.add_queries(q.queries.iter().cloned());
            m.add_answers(self.0.clone());
            Ok(m)
        }
    }

    fn query(name: &str, t: RecordType) -> Vec<u8> {
        let mut m = Message::query();
        m.metadata.id = 4242;
        m.add_query(Query::query(Name::from_ascii(name).unwrap(), t));
        m.to_vec().unwrap()
    }

    type Learned = Arc<Mutex<Vec<(Vec<Dest>, Vec<Dest>)>>>;

    fn resolver(allow: &[&str], answers: Vec<Record>) -> (Resolver, Learned, Arc<Fake>) {
        let learned: Learned = Arc::default();
        let l2 = learned.clone();
        let fake = Arc::new(Fake(answers, Mutex::new(0)));
        struct Shared(Arc<Fake>);
        impl Upstream for Shared {
            fn ask(&self, q: &Message) -> Result<Message, DnsError> {
                self.0.ask(q)
            }
        }
        let r = Resolver {
            matcher: matcher(allow, &[]),
            own: vec![],
            upstream: Box::new(Shared(fake.clone())),
            proxy: None,
            learn: Box::new(move |a: &[Dest], d: &[Dest]| {
                l2.lock().unwrap().push((a.to_vec(), d.to_vec()));
                Ok(())
            }),
        };
        (r, learned, fake)
    }

    fn rec(name: &str, data: RData) -> Record {
        Record::from_rdata(Name::from_ascii(name).unwrap(), 60, data)
    }

    #[test]
    fn allowed_name_is_resolved_filtered_and_learned_before_the_reply() {
        let answers = vec![
            rec(
                "api.example.test.",
                RData::CNAME(CNAME(Name::from_ascii("edge.cdn.test.").unwrap())),
            ),
            rec(
                "edge.cdn.test.",
                RData::A(A(Ipv4Addr::new(93, 184, 216, 34))),
            ),
            rec(
                "edge.cdn.test.",
                RData::A(A(Ipv4Addr::new(169, 254, 169, 254))),
            ),
            rec(
                "edge.cdn.test.",
                RData::AAAA(AAAA("2606:2800::1".parse().unwrap())),
            ),
        ];
        let (r, learned, _) = resolver(&["api.example.test:443"], answers);
        let (reply, lookup) = r.answer(&query("api.example.test.", RecordType::A));
        let reply = Message::from_vec(&reply.unwrap()).unwrap();
        assert_eq!(reply.metadata.id, 4242);
        assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
        let ips: Vec<String> = reply
            .answers
            .iter()
            .filter_map(|r| match &r.data {
                RData::A(a) => Some(a.0.to_string()),
                RData::AAAA(a) => Some(a.0.to_string()),
                _ => None,
            })
            .collect();
        assert_eq!(ips, vec!["93.184.216.34", "2606:2800::1"]);
        let l = lookup.unwrap();
        assert!(l.allowed);
        assert_eq!(
            l.withheld,
            vec![IpAddr::from(Ipv4Addr::new(169, 254, 169, 254))]
        );
        let learned = learned.lock().unwrap();
        assert_eq!(learned.len(), 1);
        assert_eq!(
            learned[0].0,
            vec![
                Dest::addr("93.184.216.34".parse().unwrap(), Some(443)),
                Dest::addr("2606:2800::1".parse().unwrap(), Some(443))
            ]
        );
    }

    #[test]
    fn unlisted_names_and_other_types_never_go_upstream() {
        let (r, learned, fake) = resolver(
            &["api.example.test"],
            vec![rec("x.", RData::TXT(TXT::new(vec!["data".into()])))],
        );
        let (reply, lookup) = r.answer(&query(
            "exfil-aGVsbG8gd29ybGQ.attacker.test.",
            RecordType::A,
        ));
        assert_eq!(
            Message::from_vec(&reply.unwrap())
                .unwrap()
                .metadata
                .response_code,
            ResponseCode::NXDomain
        );
        assert!(!lookup.unwrap().allowed);
        let long = format!("{}.attacker.test.", "a".repeat(63));
        let (reply, _) = r.answer(&query(&long, RecordType::TXT));
        assert_eq!(
            Message::from_vec(&reply.unwrap())
                .unwrap()
                .metadata
                .response_code,
            ResponseCode::NXDomain
        );
        // TXT for an allowed name: an empty answer, and still nothing asked upstream.
        let (reply, _) = r.answer(&query("api.example.test.", RecordType::TXT));
        let reply = Message::from_vec(&reply.unwrap()).unwrap();
        assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
        assert!(reply.answers.is_empty());
        assert_eq!(*fake.1.lock().unwrap(), 0);
        assert!(learned.lock().unwrap().is_empty());
    }

    #[test]
    fn a_failing_table_update_answers_servfail() {
        let (mut r, _, _) = resolver(
            &["api.example.test"],
            vec![rec(
                "api.example.test.",
                RData::A(A(Ipv4Addr::new(93, 184, 216, 34))),
            )],
        );
        r.learn = Box::new(|_: &[Dest], _: &[Dest]| {
            Err(NftError::Command {
                bin: "nft".into(),
                args: "-f -".into(),
                stderr: "nft failed".into(),
            })
        });
        let (reply, lookup) = r.answer(&query("api.example.test.", RecordType::A));
        let reply = Message::from_vec(&reply.unwrap()).unwrap();
        assert_eq!(reply.metadata.response_code, ResponseCode::ServFail);
        assert!(reply.answers.is_empty());
        assert!(lookup.unwrap().addrs.is_empty());
    }

    #[test]
    fn garbage_is_dropped_and_big_udp_replies_are_truncated() {
        let (r, _, _) = resolver(&["api.example.test"], vec![]);
        assert_eq!(r.answer(b"\x00\x01garbage").0, None);
        let answers: Vec<Record> = (0..60)
            .map(|i| {
                rec(
                    "api.example.test.",
                    RData::A(A(Ipv4Addr::new(93, 184, 1, i))),
                )
            })
            .collect();
        let (r, _, _) = resolver(&["api.example.test"], answers);
        let reply = r
            .answer(&query("api.example.test.", RecordType::A))
            .0
            .unwrap();
        assert!(reply.len() > UDP_PLAIN);
        let small = Message::from_vec(&fit_udp(reply)).unwrap();
        assert!(small.metadata.truncation);
        assert!(small.answers.is_empty());
    }

    #[test]
    fn the_stub_blocks_without_polling_and_stop_wakes_it() {
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let udp_addr = udp.local_addr().unwrap();
        let probe = udp.try_clone().unwrap();
        let (r, _, _) = resolver(&["example.com"], vec![]);
        let mut stub =
            Stub::serve(Ipv4Addr::LOCALHOST, udp, tcp, r, Arc::new(|_: &Lookup| {})).unwrap();
        // No timeout to wake up for: the threads sleep in recv_from and accept until asked.
        assert_eq!(probe.read_timeout().unwrap(), None);
        // It still answers.
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        client
            .send_to(&query("example.com", RecordType::A), udp_addr)
            .unwrap();
        let mut buf = [0u8; 512];
        assert!(client.recv_from(&mut buf).unwrap().0 > 0);
        // stop() returns only once both threads have returned: with nothing polling, only the
        // shutdown of their sockets can wake them.
        // No thread panicked on its way out (a shut-down UDP socket reads 0 bytes from no
        // address).
        assert_eq!(stub.stop(), 0, "a serving thread panicked at stop");
        assert!(stub.threads.is_empty());
    }

    /// A and AAAA come at once (glibc asks both): the second is asked upstream while the first
    /// is still being answered. The upstream here holds each question until it has seen both
    /// (or 3 s passed): with one thread answering, it would see them one after the other.
    #[test]
    fn the_stub_answers_two_questions_at_once() {
        use std::sync::Condvar;
        #[derive(Default)]
        struct Both {
            asked: Mutex<usize>,
            cv: Condvar,
            together: Mutex<Vec<bool>>,
        }
        struct Held(Arc<Both>);
        impl Upstream for Held {
            fn ask(&self, q: &Message) -> Result<Message, DnsError> {
                let b = &self.0;
                let mut n = b.asked.lock().unwrap();
                *n += 1;
                b.cv.notify_all();
                let (n, _) =
                    b.cv.wait_timeout_while(n, Duration::from_secs(3), |n| *n < 2)
                        .unwrap();
                b.together.lock().unwrap().push(*n >= 2);
                let mut m = Message::response(q.metadata.id, OpCode::Query);
                m.add_queries(q.queries.iter().cloned());
                Ok(m)
            }
        }
        let both = Arc::new(Both::default());
        let r = Resolver {
            matcher: matcher(&["example.com"], &[]),
            own: vec![],
            upstream: Box::new(Held(both.clone())),
            proxy: None,
            learn: Box::new(|_: &[Dest], _: &[Dest]| Ok(())),
        };
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = udp.local_addr().unwrap();
        let mut stub =
            Stub::serve(Ipv4Addr::LOCALHOST, udp, tcp, r, Arc::new(|_: &Lookup| {})).unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        for t in [RecordType::A, RecordType::AAAA] {
            client.send_to(&query("example.com", t), addr).unwrap();
        }
        let mut buf = [0u8; 512];
        for _ in 0..2 {
            assert!(client.recv_from(&mut buf).unwrap().0 > 0);
        }
        assert_eq!(*both.together.lock().unwrap(), [true, true]);
        // No thread panicked on its way out (a shut-down UDP socket reads 0 bytes from no
        // address).
        assert_eq!(stub.stop(), 0, "a serving thread panicked at stop");
        assert!(stub.threads.is_empty());
    }
}
