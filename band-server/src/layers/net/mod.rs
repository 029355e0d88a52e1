//! The network layer of a run.
//!
//! - `allow.net` empty: bubblewrap gives the run a network namespace of its own with only
//!   loopback; nothing here runs.
//! - `allow.net` non-empty: the run gets a network namespace of its own too, made by
//!   band-server, with a tap device served by a userspace relay (slirp4netns) that makes the
//!   run's connections from the host's network stack as the run's uid ([`netns`], which says why
//!   a relay and not a routed veth pair). Before the script starts this module builds the run's
//!   nftables table ([`nft`]) in the host's namespace, matched on the run's uid (the relay's
//!   sockets are the run's uid's), then the namespace and relay, then the DNS stub ([`dns`]),
//!   whose sockets are made inside the run's namespace on a loopback address of the run's slot:
//!   nothing outside the run can reach it. After the run it reads what the kernel recorded
//!   (destinations reached and refused), decides `insist.net`, and removes all of it.
//!
//! The run's own namespace means it never sees the host's socket tables (`/proc/net/*`,
//! netlink dumps), loopback services or abstract unix socket names, and the host cannot reach
//! an abstract name the run binds (issue 13, item 2).
//!
//! A band's loopback rules (`localhost:P`) open port P of the host's loopback, and nothing else
//! of the host: band-server listens on `127.0.0.1:P` and `[::1]:P` inside the run's namespace and
//! relays to the host's ([`forward`]).
//!
//! Pure parts: [`plan`], [`stub_addr`], [`parse_resolv_conf`], [`parse_fib_trie_local`],
//! [`parse_if_inet6`], [`insist_missing`], [`netns::relay_args`]; [`NetLayer`] applies them.

pub(crate) mod apply;
pub mod dns;
pub mod forward;
pub(crate) mod listening;
pub(crate) mod lookups;
pub mod netns;
pub mod nfnl;
pub mod nft;
pub mod proxy;

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use band::policy::net::{HostPattern, NetMatcher, NetPattern, non_public_ranges};
use band::proto::{DnsLookup, NetFlow, NetworkReport};

use self::dns::{DnsError, Lookup, Resolver, Stub, UdpUpstream};
use self::netns::{NetnsError, RunNetns};
use self::nft::{Dest, NetPlan, Nft, NftError};

/// What went wrong planning or building the network layer.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error(
        "no upstream DNS resolver: /etc/resolv.conf names none and the server config sets no dns_upstream"
    )]
    NoUpstream,
    #[error("cannot build the run's nftables table: {0}")]
    Table(NftError),
    #[error(transparent)]
    Stub(#[from] DnsError),
    #[error(transparent)]
    Netns(#[from] NetnsError),
    #[error(transparent)]
    Forward(#[from] forward::ForwardError),
    #[error("the egress proxy: {0}")]
    Proxy(#[from] proxy::ProxyError),
    #[error("the egress proxy cannot redirect the observing run's HTTP(S) to itself: {0}")]
    ProxyRedirect(NftError),
    #[error("the egress proxy cannot listen on {addr} in the run's network namespace: {source}")]
    ProxyBind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// The stub's loopback address for a pool slot: `127.77.<slot / 250>.<slot % 250 + 1>`.
pub(crate) fn stub_addr(slot: u32) -> Ipv4Addr {
    Ipv4Addr::new(127, 77, (slot / 250) as u8, (slot % 250 + 1) as u8)
}

/// The `nameserver` lines of a resolv.conf (IPv6 zone ids are dropped with their line).
pub(crate) fn parse_resolv_conf(text: &str) -> Vec<SocketAddr> {
    text.lines()
        .filter_map(|l| l.split('#').next()?.trim().strip_prefix("nameserver"))
        .filter_map(|rest| rest.trim().parse::<IpAddr>().ok())
        .map(|ip| SocketAddr::new(ip, 53))
        .collect()
}

/// This host's IPv4 addresses from `/proc/net/fib_trie` (the `/32 host LOCAL` entries).
pub(crate) fn parse_fib_trie_local(text: &str) -> Vec<IpAddr> {
    let mut out = BTreeSet::new();
    let mut last: Option<Ipv4Addr> = None;
    for line in text.lines() {
        let t = line.trim_start_matches([' ', '|', '+', '-', '`']).trim();
        if let Ok(ip) = t.parse::<Ipv4Addr>() {
            last = Some(ip);
        } else if t.starts_with("/32 host LOCAL")
            && let Some(ip) = last
        {
            out.insert(IpAddr::V4(ip));
        }
    }
    out.into_iter().collect()
}

/// This host's IPv6 addresses from `/proc/net/if_inet6`.
pub(crate) fn parse_if_inet6(text: &str) -> Vec<IpAddr> {
    text.lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|h| h.len() == 32)
        .filter_map(|h| u128::from_str_radix(h, 16).ok())
        .map(|n| IpAddr::V6(Ipv6Addr::from(n)))
        .collect()
}

/// This host's own addresses, read under `proc` (a parameter so tests use a temp dir).
pub fn own_addresses(proc: &Path) -> Vec<IpAddr> {
    let read = |rel: &str| fs_err::read_to_string(proc.join(rel)).unwrap_or_default();
    let mut v = parse_fib_trie_local(&read("net/fib_trie"));
    v.extend(parse_if_inet6(&read("net/if_inet6")));
    v
}

fn dest_of(p: &NetPattern) -> Option<Dest> {
    match p.host() {
        HostPattern::Ip(ip) => Some(Dest::addr(*ip, p.port())),
        HostPattern::Cidr { net, prefix } => Some(Dest {
            net: *net,
            prefix: *prefix,
            port: p.port(),
        }),
        HostPattern::Any => Some(Dest {
            net: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            prefix: 0,
            port: p.port(),
        }),
        _ => None,
    }
}

/// The run's table, from its rules: a pure function.
pub(crate) fn plan(
    run_id: &str,
    uid: u32,
    stub: Ipv4Addr,
    m: &NetMatcher,
    own: &[IpAddr],
) -> NetPlan {
    let deny = m
        .deny_patterns()
        .iter()
        // A port-less `*` deny would deny everything; lint reports it, the stub refuses every name.
        .filter(|p| p.is_ip() || (p.is_any() && p.port().is_some()))
        .filter_map(dest_of)
        .collect();
    let allow = m
        .allow_patterns()
        .iter()
        .filter(|p| p.is_ip())
        .filter_map(dest_of)
        .collect();
    let mut any_public: Vec<Option<u16>> = m
        .allow_patterns()
        .iter()
        .filter(|p| p.is_any())
        .map(|p| p.port())
        .collect();
    if any_public.contains(&None) {
        any_public = vec![None];
    }
    let mut never = non_public_ranges();
    never.extend(own.iter().map(|ip| (*ip, nft::full_prefix(*ip))));
    NetPlan {
        table: nft::table_name(run_id),
        uid,
        stub,
        deny,
        allow,
        any_public,
        never: dedup_ranges(never),
    }
}

/// Drop addresses already inside a listed range (nft refuses overlapping interval elements).
fn dedup_ranges(mut v: Vec<(IpAddr, u8)>) -> Vec<(IpAddr, u8)> {
    v.sort_by_key(|(_, p)| *p);
    let mut out: Vec<(IpAddr, u8)> = Vec::new();
    for (ip, p) in v {
        if !out.iter().any(|(n, q)| {
            n.is_ipv4() == ip.is_ipv4() && band::policy::net::cidr_contains(*n, *q, ip)
        }) {
            out.push((ip, p));
        }
    }
    out
}

/// Which `insist.net` items the run never did: a name counts when the stub resolved a name the
/// pattern matches and the run reached one of the addresses it was given (on the pattern's port);
/// an IP/CIDR counts when the run reached an address inside it.
pub(crate) fn insist_missing(
    insist: &[String],
    lookups: &[Lookup],
    contacted: &[nft::Flow],
) -> Vec<String> {
    let mut missing = Vec::new();
    for text in insist {
        let Ok(p) = NetPattern::parse(text) else {
            missing.push(format!("net: {text}"));
            continue;
        };
        let reached = |ip: IpAddr| {
            contacted
                .iter()
                .any(|f| f.ip == ip && p.port().is_none_or(|port| port == f.port))
        };
        let done = if let Some(port) = p.loopback_port() {
            // A loopback rule counts when the run used the port it opens (on either address).
            contacted
                .iter()
                .any(|f| f.ip.is_loopback() && f.port == port)
        } else if p.is_ip() || p.is_any() {
            contacted.iter().any(|f| p.matches_ip(f.ip, Some(f.port)))
        } else {
            lookups
                .iter()
                .filter(|l| l.allowed && p.matches_host(&l.name, None))
                .any(|l| l.addrs.iter().any(|ip| reached(*ip)))
        };
        if !done {
            missing.push(format!("net: {text}"));
        }
    }
    missing
}

/// How often the run loop checks that the run's table still exists.
pub(crate) const WATCH_INTERVAL: Duration = Duration::from_millis(250);

/// The run's network, planned: its table, its stub and the sandbox's `/etc/resolv.conf`.
#[derive(Debug, Clone)]
pub struct NetRunPlan {
    pub table: NetPlan,
    /// The run's gid (its uid is the table's): the owner of the run's namespace and relay.
    pub(crate) gid: u32,
    /// The table as one nft batch ([`nft::ruleset`]).
    pub ruleset: String,
    pub stub_addr: Ipv4Addr,
    pub upstream: Vec<SocketAddr>,
    /// The host's own addresses (never reachable, never an answer).
    pub own: Vec<IpAddr>,
    pub matcher: NetMatcher,
    pub resolv_conf: String,
    /// The ports of the host's loopback the run may reach ([`NetMatcher::loopback_ports`]),
    /// relayed by [`forward`].
    pub loopback_ports: Vec<u16>,
}

/// Plan the network of run `run_id` (uid `uid`, pool slot `slot`): pure. Fails when no upstream
/// resolver is known.
pub fn plan_run(
    run_id: &str,
    uid: u32,
    gid: u32,
    slot: u32,
    matcher: &NetMatcher,
    own: &[IpAddr],
    upstream: &[SocketAddr],
) -> Result<NetRunPlan, NetError> {
    if upstream.is_empty() {
        return Err(NetError::NoUpstream);
    }
    let stub_addr = stub_addr(slot);
    let table = plan(run_id, uid, stub_addr, matcher, own);
    Ok(NetRunPlan {
        ruleset: nft::ruleset(&table),
        table,
        gid,
        stub_addr,
        upstream: upstream.to_vec(),
        own: own.to_vec(),
        matcher: matcher.clone(),
        resolv_conf: format!("nameserver {stub_addr}\noptions timeout:3 attempts:2\n"),
        loopback_ports: matcher.loopback_ports(),
    })
}

/// The network part of [`crate::plan::RunPlan`]: `None` without `allow.net` (the run gets a
/// network namespace with only loopback), else [`plan_run`] with the host's facts. Pure.
pub(crate) fn plan_network(
    run_id: &str,
    identity: &crate::common::handover::Identity,
    matcher: &NetMatcher,
    own_addrs: &[IpAddr],
    upstream: &[SocketAddr],
) -> crate::error::SetupResult<Option<NetRunPlan>> {
    if matcher.is_empty() {
        return Ok(None);
    }
    plan_run(
        run_id,
        identity.uid,
        identity.gid,
        identity.slot,
        matcher,
        own_addrs,
        upstream,
    )
    .map(Some)
    .map_err(|e| {
        crate::error::SetupError::new(band::proto::Layer::Network, e.to_string())
            .with_hint("the network layer needs nftables (apt-get install nftables) and a resolver in /etc/resolv.conf or dns_upstream in the server config")
    })
}

/// A run's table, namespace with its relay, and stub; [`NetLayer::teardown`] removes them (also
/// on drop).
pub struct NetLayer {
    pub(crate) table: String,
    pub(crate) stub_addr: Ipv4Addr,
    nft: Nft,
    stub: Option<Stub>,
    netns: Option<RunNetns>,
    /// What the stub was asked, distinct and bounded ([`lookups::Lookups`]).
    lookups: Arc<Mutex<lookups::Lookups>>,
    installed: bool,
    /// The stub's resolver and lookup recorder, until [`NetLayer::wait_ready`] starts it.
    resolver: Option<(Resolver, Arc<dns::OnLookup>)>,
    /// The host loopback ports to open, and their relay once [`NetLayer::wait_ready`] started it.
    loopback_ports: Vec<u16>,
    forward: Option<forward::Forward>,
    /// The egress proxy's material, and the proxy once [`NetLayer::wait_ready`] started it.
    egress: Option<Arc<proxy::Egress>>,
    proxy: Option<proxy::Proxy>,
    /// What the egress proxy refused, and the stub for a placeholder in a name: streamed as it
    /// happens, kept and counted within one bound ([`proxy::refusals`]).
    refusals: Arc<proxy::refusals::Refusals>,
    matcher: NetMatcher,
    own: Vec<IpAddr>,
    upstream: Vec<SocketAddr>,
}

impl NetLayer {
    /// Build the table (one atomic batch), the run's namespace with its relay `relay`
    /// (slirp4netns) and the stub inside it, and wait until all of it is ready. Any failure:
    /// nothing is left. `on_lookup` is called for each question the stub answers (for the
    /// `dns_denied` event).
    pub fn setup(
        plan: &NetRunPlan,
        nft: &Nft,
        relay: &Path,
        on_lookup: Arc<dns::OnLookup>,
    ) -> Result<NetLayer, NetError> {
        let mut layer = NetLayer::start(plan, nft, relay, on_lookup, None)?;
        layer.wait_ready()?;
        Ok(layer)
    }

    /// The first half of [`NetLayer::setup`], which a run does before bubblewrap: the table, and
    /// the namespace (bubblewrap's parent joins it) with its relay started.
    /// [`NetLayer::wait_ready`], after bubblewrap's spawn and before the jail's input is written,
    /// waits for the relay and starts the stub: the relay's start (about 3 ms) overlaps
    /// bubblewrap building the sandbox, and the script, which cannot start before that input,
    /// never runs before the relay is up and the stub answers. Any failure: nothing is left.
    pub(crate) fn start(
        plan: &NetRunPlan,
        nft: &Nft,
        relay: &Path,
        on_lookup: Arc<dns::OnLookup>,
        egress: Option<Arc<proxy::Egress>>,
    ) -> Result<NetLayer, NetError> {
        let stub_addr = plan.stub_addr;
        let mut layer = NetLayer {
            table: plan.table.table.clone(),
            stub_addr,
            nft: nft.clone(),
            stub: None,
            netns: None,
            lookups: Arc::default(),
            installed: false,
            resolver: None,
            loopback_ports: plan.loopback_ports.clone(),
            forward: None,
            egress: egress.clone(),
            proxy: None,
            refusals: Arc::new(proxy::refusals::Refusals::new(
                proxy::refusals::MAX_KEPT,
                egress.as_ref().and_then(|e| e.live.get().cloned()),
            )),
            matcher: plan.matcher.clone(),
            own: plan.own.clone(),
            upstream: plan.upstream.clone(),
        };
        // A table left by a crashed run with the same id cannot exist (ids are random), but
        // `add table` of an existing table would merge: refuse instead. The table and the
        // namespace with its relay are made at the same time. (Applied on a thread that ran on
        // past bubblewrap's spawn, the table took 3 to 18 ms instead of 2 to 3: it is joined
        // here.)
        let (table, netns) = std::thread::scope(|scope| {
            let table = scope.spawn(|| nft.apply(&plan.ruleset));
            let netns = RunNetns::begin(relay, plan.table.uid, plan.gid);
            (table.join(), netns)
        });
        match table {
            Ok(Ok(())) => layer.installed = true,
            Ok(Err(e)) => return Err(NetError::Table(e)),
            Err(_) => return Err(NetError::Table(NftError::Panicked)),
        }
        layer.netns = Some(netns?);
        let learn_nft = nft.clone();
        let table = plan.table.table.clone();
        let resolver = Resolver {
            matcher: plan.matcher.clone(),
            own: plan.own.clone(),
            upstream: Box::new(UdpUpstream {
                servers: plan.upstream.clone(),
                timeout: Duration::from_secs(3),
            }),
            proxy: egress.as_ref().map(|e| dns::ProxyDns {
                addr: stub_addr,
                bound: e.bound.clone(),
                observe: e.observe,
                refusals: layer.refusals.clone(),
            }),
            learn: Box::new(move |allow: &[Dest], deny: &[Dest]| {
                learn_nft.learn(&table, allow, deny)
            }),
        };
        let lookups = layer.lookups.clone();
        let record: Arc<dns::OnLookup> = Arc::new(move |l: &Lookup| {
            if let Ok(mut v) = lookups.lock() {
                v.record(l);
            }
            on_lookup(l);
        });
        layer.resolver = Some((resolver, record));
        Ok(layer)
    }

    /// The second half of [`NetLayer::setup`]: the relay up, then the stub serving (its address
    /// is on the namespace's loopback, which the relay brings up).
    pub(crate) fn wait_ready(&mut self) -> Result<(), NetError> {
        let Some(ns) = self.netns.as_mut() else {
            return Ok(());
        };
        ns.wait_ready()?;
        if let Some((resolver, record)) = self.resolver.take() {
            let addr = self.stub_addr;
            let (udp, tcp) = ns.in_netns(|| Stub::bind(addr))??;
            self.stub = Some(Stub::serve(addr, udp, tcp, resolver, record)?);
        }
        self.open_loopback_ports()?;
        self.start_proxy()
    }

    /// The egress proxy of a run with bound secrets or HTTP rules: listening on the stub's
    /// address inside the run's namespace, on 443 (TLS) and 80 (the server config's
    /// `proxy_ports`), before the script starts. A port it cannot listen on stops the run.
    fn start_proxy(&mut self) -> Result<(), NetError> {
        let (Some(egress), None, Some(ns)) = (&self.egress, &self.proxy, self.netns.as_ref())
        else {
            return Ok(());
        };
        let addr = self.stub_addr;
        let listeners = ns.in_netns(|| {
            [(egress.ports[0], true), (egress.ports[1], false)]
                .into_iter()
                .map(|(port, tls)| {
                    let at = SocketAddr::from((addr, port));
                    std::net::TcpListener::bind(at)
                        .map(|socket| proxy::Listener { socket, tls })
                        .map_err(|source| NetError::ProxyBind { addr: at, source })
                })
                .collect::<Result<Vec<_>, _>>()
        })??;
        // The observing run of `band learn --net`: its names resolve as usual (every port
        // reachable), and its TCP to ports 443 and 80 of any address but loopback goes to the
        // proxy, which records each request (a table of the run's namespace: it goes with it).
        if egress.observe {
            let nft = self.nft.as_program();
            let batch = proxy::observe_redirect(addr, egress.ports);
            ns.in_netns(|| nft.apply(&batch))?
                .map_err(NetError::ProxyRedirect)?;
        }
        let roots = proxy::roots(egress.extra_ca.as_deref())?;
        let upstream = UdpUpstream {
            servers: self.upstream.clone(),
            timeout: Duration::from_secs(3),
        };
        let (matcher, own) = (self.matcher.clone(), self.own.clone());
        let resolve: proxy::Resolve =
            Arc::new(move |name: &str| dns::resolve(&upstream, &matcher, &own, name));
        self.proxy = Some(proxy::Proxy::start(
            egress.ca.clone(),
            self.matcher.clone(),
            egress.bound.clone(),
            proxy::Upstream { resolve, roots },
            listeners,
            egress.observe,
            self.refusals.clone(),
        )?);
        Ok(())
    }

    /// What the egress proxy and the stub refused for a bound secret or an HTTP rule: the first
    /// [`proxy::refusals::MAX_KEPT`], in order, their texts cut ([`proxy::refusals::bounded`]).
    pub(crate) fn proxy_denials(&self) -> Vec<band::proto::Denial> {
        self.refusals.denials()
    }

    /// How many of their refusals were past the bound: neither streamed nor kept, counted.
    pub(crate) fn proxy_denials_dropped(&self) -> u64 {
        self.refusals.dropped()
    }

    /// Stop the egress proxy: its listeners, connections and thread; its CA goes with it.
    fn stop_proxy(&mut self) {
        if let Some(p) = self.proxy.as_mut() {
            p.stop();
        }
    }

    /// The host loopback ports of the band, listened on inside the run's namespace (by a thread
    /// that joins it) and relayed from this process's: before the script starts.
    fn open_loopback_ports(&mut self) -> Result<(), NetError> {
        if self.loopback_ports.is_empty() || self.forward.is_some() {
            return Ok(());
        }
        let Some(ns) = self.netns.as_ref() else {
            return Ok(());
        };
        let ports = self.loopback_ports.clone();
        let listeners = ns.in_netns(|| forward::bind(&ports))??;
        self.forward = Some(forward::Forward::serve(listeners)?);
        Ok(())
    }

    /// The run's network namespace, for bubblewrap's parent to join.
    pub(crate) fn netns_fd(&self) -> Option<std::os::fd::RawFd> {
        self.netns.as_ref().map(RunNetns::netns_fd)
    }

    /// Whether the table is still in the kernel (someone may have flushed the ruleset).
    pub(crate) fn table_present(&self) -> bool {
        // Fail closed: a listing that fails is a table that is not there.
        self.nft.table_exists(&self.table).unwrap_or(false)
    }

    /// Whether what the run's network needs is all still there: its table (a firewall's reload
    /// flushes the ruleset) and its relay. A spare sandbox asks before it takes a request
    /// (`run::spare`): without its table the run's uid would reach every host.
    pub(crate) fn intact(&mut self) -> bool {
        self.table_present() && self.netns.as_mut().is_some_and(RunNetns::relay_runs)
    }

    /// What the run resolved, reached and was refused, read from the stub and the kernel's sets.
    /// The lookups are distinct and bounded ([`lookups::Lookups`]); those past the bound are
    /// counted in the report and said in band-server's log.
    pub(crate) fn report(&self) -> (NetworkReport, Vec<Lookup>, Vec<nft::Flow>) {
        let (lookups, dropped) = self
            .lookups
            .lock()
            .map(|v| (v.list().to_vec(), v.dropped()))
            .unwrap_or_default();
        if dropped > 0 {
            crate::say!(
                "band-server: net {}: {dropped} DNS lookup(s) past the {} distinct a run's report keeps were counted, not kept",
                self.table,
                lookups::MAX_LOOKUPS
            );
        }
        let mut sets = self
            .nft
            .list_sets(&self.table, &["seen4", "seen6", "denied4", "denied6"])
            .unwrap_or_else(|e| {
                crate::say!("band-server: net: {e}");
                Default::default()
            });
        let mut read = |set: &str| sets.remove(set).unwrap_or_default();
        let mut seen = read("seen4");
        seen.extend(read("seen6"));
        let mut denied = read("denied4");
        denied.extend(read("denied6"));
        // The stub is infrastructure, not a destination.
        seen.retain(|f| f.ip != IpAddr::V4(self.stub_addr));
        let names_of = |ip: IpAddr| -> Vec<String> {
            let mut n: Vec<String> = lookups
                .iter()
                .filter(|l| l.addrs.contains(&ip) || l.withheld.contains(&ip))
                .map(|l| l.name.clone())
                .collect();
            n.sort();
            n.dedup();
            n
        };
        let flow = |f: &nft::Flow| NetFlow {
            addr: f.ip.to_string(),
            proto: f.proto.clone(),
            port: f.port,
            names: names_of(f.ip),
        };
        let report = NetworkReport {
            lookups: lookups
                .iter()
                .map(|l| DnsLookup {
                    name: l.name.clone(),
                    qtype: l.qtype.clone(),
                    allowed: l.allowed,
                    addrs: l.addrs.iter().map(IpAddr::to_string).collect(),
                    withheld: l.withheld.iter().map(IpAddr::to_string).collect(),
                })
                .collect(),
            lookups_dropped: dropped,
            contacted: seen.iter().map(flow).collect(),
            denied: denied.iter().map(flow).collect(),
            requests: self
                .proxy
                .as_ref()
                .map(proxy::Proxy::requests)
                .unwrap_or_default(),
        };
        let mut report = report;
        self.add_loopback_flows(&mut report, &mut seen);
        self.add_proxy_flows(&mut report, &mut seen);
        (report, lookups, seen)
    }

    /// The connections the run made to its opened loopback ports, which the kernel's sets never
    /// see (the host side is band-server's socket): named `localhost`, so `band learn` drafts
    /// `localhost:P`.
    fn add_loopback_flows(&self, report: &mut NetworkReport, seen: &mut Vec<nft::Flow>) {
        for (ip, port) in self
            .forward
            .as_ref()
            .map(forward::Forward::flows)
            .unwrap_or_default()
        {
            report.contacted.push(NetFlow {
                addr: ip.to_string(),
                proto: "tcp".into(),
                port,
                names: vec!["localhost".into()],
            });
            seen.push(nft::Flow {
                ip,
                proto: "tcp".into(),
                port,
            });
        }
    }

    /// The connections the egress proxy made for the run, which the kernel's sets never see (they
    /// are band-server's): in the report under the host's name, and for `insist.net` as a
    /// contact of the address the stub gave the run for it (the proxy's).
    fn add_proxy_flows(&self, report: &mut NetworkReport, seen: &mut Vec<nft::Flow>) {
        let Some(p) = &self.proxy else {
            return;
        };
        for (host, ip, port) in p.contacted() {
            report.contacted.push(NetFlow {
                addr: ip.to_string(),
                proto: "tcp".into(),
                port,
                names: vec![host],
            });
            seen.push(nft::Flow {
                ip: IpAddr::V4(self.stub_addr),
                proto: "tcp".into(),
                port,
            });
        }
    }

    /// Stop the stub but keep the table: something of the run survived and must stay filtered.
    /// The janitor deletes the table once the run's uid has no process left.
    /// The relay is gone too (the survivor's namespace has no way out).
    pub(crate) fn abandon(mut self) {
        if let Some(mut s) = self.stub.take() {
            let _ = s.stop();
        }
        self.stop_proxy();
        self.stop_loopback();
        self.netns = None;
        self.installed = false;
    }

    /// Kill the relay: the run's namespace has no way out any more (its exit, slow, is reaped
    /// by [`NetLayer::stop_relay`]).
    pub(crate) fn kill_relay(&mut self) -> std::io::Result<()> {
        self.stop_loopback();
        self.stop_proxy();
        match self.netns.as_mut() {
            Some(ns) => ns.kill(),
            None => Ok(()),
        }
    }

    /// Close the opened loopback ports: listeners, relayed connections and their threads (what
    /// they recorded stays, for the report).
    pub fn stop_loopback(&mut self) {
        if let Some(f) = self.forward.as_mut() {
            f.stop();
        }
    }

    /// Kill the relay and reap it.
    pub(crate) fn stop_relay(&mut self) -> std::io::Result<()> {
        match self.netns.as_mut() {
            Some(ns) => ns.stop(),
            None => Ok(()),
        }
    }

    /// Stop the stub and relay, delete the table. Call only once nothing of the run is alive.
    pub fn teardown(&mut self) -> Result<(), NftError> {
        if let Some(mut s) = self.stub.take() {
            let _ = s.stop();
        }
        self.stop_proxy();
        self.proxy = None;
        self.egress = None;
        self.stop_loopback();
        self.netns = None;
        if self.installed {
            self.installed = false;
            self.nft.delete_table(&self.table)?;
        }
        Ok(())
    }
}

impl Drop for NetLayer {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            crate::say!("band-server: net teardown: {e}");
        }
    }
}

/// Delete `band_*` tables of runs that are not live. `tables` must be listed *before* the live
/// leases were read, so a run that started in between is never touched.
pub(crate) fn remove_stale_tables(
    nft: &Nft,
    tables: &[String],
    live: &BTreeSet<String>,
) -> (Vec<String>, Vec<String>) {
    let (mut removed, mut errors) = (Vec::new(), Vec::new());
    for t in tables.iter().filter(|t| nft::is_band_table(t)) {
        let run = &t["band_".len()..];
        if live.contains(run) {
            continue;
        }
        match nft.delete_table(t) {
            Ok(()) => removed.push(t.clone()),
            // Listed before the leases were read: a run that ended in between removed its table
            // itself. Gone is not an error, and not the janitor's removal.
            Err(_) if nft.list_table(t).is_err() => {}
            Err(e) => errors.push(e.to_string()),
        }
    }
    (removed, errors)
}

/// The network layer.
pub(crate) struct Net;

impl crate::common::Built for NetLayer {
    fn stop(&mut self, t: &mut crate::common::Teardown) {
        // The relay runs as the run's uid outside the run's cgroup: killed here, before the
        // result; reaped in the removal after it (its exit waits for the kernel to unregister
        // its tap, about 25 ms that the result no longer waits for). If the kill fails the
        // identity layer sweeps the uid.
        if let Err(e) = self.kill_relay() {
            t.errors.push(format!("network: the relay: {e}"));
            t.processes_dead = false;
        }
    }

    fn teardown(mut self: Box<Self>, t: &mut crate::common::Teardown) {
        // Reaped before the lease goes (the identity layer's removal comes after this one):
        // a relay that cannot be reaped keeps the lease, and the janitor finishes.
        if let Err(e) = self.stop_relay() {
            t.errors.push(format!("network: the relay: {e}"));
            t.processes_dead = false;
        }
        if t.processes_dead {
            if let Err(e) = NetLayer::teardown(&mut self) {
                t.errors.push(format!("network: {e}"));
            }
        } else {
            // A survivor keeps its restrictions: the janitor deletes the table once the uid's
            // processes are gone.
            self.abandon();
        }
    }

    crate::common::built_any!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_resolver;
    use pretty_assertions::assert_eq;

    fn m(allow: &[&str], deny: &[&str]) -> NetMatcher {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        NetMatcher::new(&s(allow), &s(deny)).unwrap()
    }

    /// An `nft` program that knows only the tables named in `tables` (a file, one per line):
    /// lists them, deletes them (removing the line), and fails for any other.
    fn fake_nft(dir: &std::path::Path, tables: &[&str]) -> std::path::PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let list = dir.join("tables");
        fs_err::write(
            &list,
            tables.iter().map(|t| format!("{t}\n")).collect::<String>(),
        )
        .unwrap();
        let bin = dir.join("nft");
        let script = format!(
            "#!/bin/sh\nt=\"$4\"\ngrep -qx \"$t\" {l} || {{ echo \"Error: No such file or directory\" >&2; exit 1; }}\n\
             case \"$1\" in delete) grep -vx \"$t\" {l} > {l}.new; mv {l}.new {l};; esac\n",
            l = list.display()
        );
        fs_err::write(&bin, script).unwrap();
        fs_err::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        bin
    }

    #[test]
    fn a_table_its_own_run_removed_after_the_listing_is_neither_removed_nor_an_error() {
        let t = tempfile::tempdir().unwrap();
        // The janitor listed both; the run of the first ended and removed its table since.
        let nft = Nft::program(&fake_nft(t.path(), &["band_fedcba9876543210"]));
        let listed = [
            "band_0123456789abcdef".to_string(),
            "band_fedcba9876543210".to_string(),
        ];
        let (removed, errors) = remove_stale_tables(&nft, &listed, &BTreeSet::new());
        assert_eq!(removed, ["band_fedcba9876543210"]);
        assert!(errors.is_empty(), "{errors:?}");
        // A live run's table stays.
        let nft = Nft::program(&fake_nft(t.path(), &["band_0123456789abcdef"]));
        let live = BTreeSet::from(["0123456789abcdef".to_string()]);
        let (removed, errors) = remove_stale_tables(&nft, &listed[..1], &live);
        assert!(
            removed.is_empty() && errors.is_empty(),
            "{removed:?} {errors:?}"
        );
        assert_eq!(
            nft.list_table("band_0123456789abcdef").map(|_| ()).ok(),
            Some(())
        );
    }

    #[test]
    fn stub_addresses_are_distinct_loopback_per_slot() {
        assert_eq!(stub_addr(0), Ipv4Addr::new(127, 77, 0, 1));
        assert_eq!(stub_addr(63), Ipv4Addr::new(127, 77, 0, 64));
        let all: BTreeSet<Ipv4Addr> = (0..64).map(stub_addr).collect();
        assert_eq!(all.len(), 64);
        assert!(all.iter().all(|a| a.is_loopback()));
    }

    #[test]
    fn resolv_conf_and_resolver_config() {
        let t = "# generated\nsearch example\nnameserver 10.0.2.3\nnameserver fe80::1%eth0\nnameserver 2001:db8::53 # v6\noptions edns0\n";
        assert_eq!(
            parse_resolv_conf(t),
            vec![
                "10.0.2.3:53".parse().unwrap(),
                "[2001:db8::53]:53".parse().unwrap()
            ]
        );
        assert_eq!(
            parse_resolver("192.0.2.53"),
            Some("192.0.2.53:53".parse().unwrap())
        );
        assert_eq!(
            parse_resolver("10.200.0.2:5353"),
            Some("10.200.0.2:5353".parse().unwrap())
        );
        assert_eq!(
            parse_resolver("[::1]:53"),
            Some("[::1]:53".parse().unwrap())
        );
        assert_eq!(parse_resolver("dns.google"), None);
    }

    #[test]
    fn own_addresses_from_proc() {
        let fib = "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 0.0.0.0\n        /0 universe UNICAST\n     +-- 10.0.2.0/24 2 0 2\n        |-- 10.0.2.15\n           /32 host LOCAL\n        |-- 10.0.2.255\n           /32 link BROADCAST\n  +-- 127.0.0.0/8 2 0 2\n     |-- 127.0.0.1\n        /32 host LOCAL\nLocal:\n     |-- 10.0.2.15\n        /32 host LOCAL\n";
        assert_eq!(
            parse_fib_trie_local(fib),
            vec![IpAddr::from([10, 0, 2, 15]), IpAddr::from([127, 0, 0, 1])]
        );
        let v6 = "00000000000000000000000000000001 01 80 10 80       lo\nfe800000000000005054fffe123456 02 40 20 80     eth0\n20010db8000000000000000000000005 02 40 00 80     eth0\n";
        assert_eq!(
            parse_if_inet6(v6),
            vec![
                "::1".parse::<IpAddr>().unwrap(),
                "2001:db8::5".parse().unwrap()
            ]
        );
        let dir = tempfile::tempdir().unwrap();
        fs_err::create_dir(dir.path().join("net")).unwrap();
        fs_err::write(dir.path().join("net/fib_trie"), fib).unwrap();
        assert_eq!(own_addresses(dir.path()).len(), 2);
    }

    #[test]
    fn plan_from_rules() {
        let own = vec!["198.41.0.4".parse().unwrap(), "10.0.2.15".parse().unwrap()];
        let p = plan(
            "ab12",
            61000,
            stub_addr(3),
            &m(
                &["*.example.test", "10.9.0.0/16:443", "*:443"],
                &["203.0.113.9", "*:25"],
            ),
            &own,
        );
        assert_eq!(p.table, "band_ab12");
        assert_eq!(p.stub, Ipv4Addr::new(127, 77, 0, 4));
        assert_eq!(
            p.allow,
            vec![Dest {
                net: "10.9.0.0".parse().unwrap(),
                prefix: 16,
                port: Some(443)
            }]
        );
        assert_eq!(p.deny.len(), 2);
        assert_eq!(p.any_public, vec![Some(443)]);
        assert!(p.never.contains(&("198.41.0.4".parse().unwrap(), 32)));
        assert!(p.never.contains(&("169.254.0.0".parse().unwrap(), 16)));
        // 10.0.2.15 is inside 10.0.0.0/8 already: nft refuses overlapping intervals.
        assert!(!p.never.contains(&("10.0.2.15".parse().unwrap(), 32)));
    }

    #[test]
    fn the_plan_opens_the_loopback_ports_named_with_a_port_and_not_denied() {
        let up: Vec<SocketAddr> = vec!["127.0.0.1:9".parse().unwrap()];
        let plan = |allow: &[&str], deny: &[&str]| {
            plan_run("ab12", 61000, 61000, 0, &m(allow, deny), &[], &up)
                .unwrap()
                .loopback_ports
        };
        assert_eq!(
            plan(
                &[
                    "localhost:18000",
                    "[::1]:18000",
                    "127.0.0.1:5432",
                    "*",
                    "localhost"
                ],
                &["*:5432"]
            ),
            vec![18000]
        );
        assert_eq!(
            plan(&["*", "*:18000", "10.0.0.0/8:18000"], &[]),
            Vec::<u16>::new()
        );
        // The table still never lets the run's uid reach loopback: the relay is band-server's.
        let p = plan_run(
            "ab12",
            61000,
            61000,
            0,
            &m(&["localhost:18000"], &[]),
            &[],
            &up,
        )
        .unwrap();
        assert!(p.table.never.contains(&("127.0.0.0".parse().unwrap(), 8)));
        assert!(p.table.allow.is_empty(), "{:?}", p.table.allow);
    }

    #[test]
    fn a_loopback_insist_counts_when_the_run_used_its_port() {
        let insist = vec!["localhost:18000".to_string(), "[::1]:18001".to_string()];
        assert_eq!(
            insist_missing(
                &insist,
                &[],
                &[flow("::1", 18000), flow("93.184.216.34", 18001)]
            ),
            vec!["net: [::1]:18001".to_string()]
        );
        assert_eq!(
            insist_missing(
                &insist,
                &[],
                &[flow("127.0.0.1", 18000), flow("127.0.0.1", 18001)]
            ),
            Vec::<String>::new()
        );
    }

    fn lookup(name: &str, addrs: &[&str]) -> Lookup {
        Lookup {
            name: name.into(),
            qtype: "A".into(),
            allowed: true,
            addrs: addrs.iter().map(|a| a.parse().unwrap()).collect(),
            withheld: vec![],
        }
    }

    fn flow(ip: &str, port: u16) -> nft::Flow {
        nft::Flow {
            ip: ip.parse().unwrap(),
            proto: "tcp".into(),
            port,
        }
    }

    #[test]
    fn insist_needs_a_resolved_name_and_a_reached_address() {
        let insist = vec![
            "api.example.test:443".to_string(),
            "*.cdn.test".to_string(),
            "93.184.216.0/24".to_string(),
        ];
        let lookups = vec![
            lookup("api.example.test", &["93.184.216.34"]),
            lookup("img.cdn.test", &["93.184.217.1"]),
        ];
        assert_eq!(
            insist_missing(
                &insist,
                &lookups,
                &[flow("93.184.216.34", 443), flow("93.184.217.1", 80)]
            ),
            Vec::<String>::new()
        );
        assert_eq!(
            insist_missing(&insist, &lookups, &[flow("93.184.216.34", 80)]),
            vec![
                "net: api.example.test:443".to_string(),
                "net: *.cdn.test".to_string()
            ]
        );
        assert_eq!(insist_missing(&insist, &[], &[]).len(), 3);
    }
}
