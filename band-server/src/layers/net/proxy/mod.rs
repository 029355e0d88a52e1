//! The run's egress proxy: bound secrets and HTTP rules (issue 39).
//!
//! A run gets one when it carries a bound secret (`env.secrets: [{name, hosts}]`) or an HTTP rule
//! in `allow.net` (`"GET https://api.example.com/v1/**"`). Which hosts it serves
//! ([`serves`]): with a bound secret, every host name `allow.net` admits (so a placeholder is
//! caught wherever it is sent); else the hosts of the HTTP rules. The run's DNS stub answers
//! those names with the proxy's address inside the run's namespace, and never asks upstream for
//! them on the run's behalf: their addresses never enter the run's nftables sets, so the run has
//! no direct path to them, and a proxied host is reached on ports 443 (TLS) and 80 only.
//!
//! For each request ([`Ctx::handle`]), in order: the `Host` (the TLS name, for HTTPS) must be a
//! served host; a placeholder in the path or query string is refused; the request must be
//! admitted by `allow.net` (its method and path against the HTTP rules,
//! [`band::policy::net::NetMatcher::check_request`]), else an HTTP 403 naming the rule that
//! would allow it; the headers get the values of the secrets bound to the host and refuse a
//! placeholder of any other ([`bound::Bound::rewrite_headers`]); the body is streamed on, and
//! the request is cut off before a chunk holding a placeholder goes out ([`bound::Scanner`]).
//! Each refusal is a [`Denial`] (the secret's name and the destination, never its value).
//!
//! Upstream, the proxy resolves the host through the run's DNS upstream, keeps only addresses
//! the stub would hand the run (public, or named by an IP rule; never this host's), connects
//! from band-server, and verifies the server's certificate against the host's trust store and
//! the config's extra CA. A program that pins its own certificate fails its handshake with the
//! proxy: it is refused, never let through.
//!
//! The TLS it terminates uses the run's CA ([`ca::Ca`]), made in memory when the proxy starts
//! and dropped when it stops; the run trusts it through its CA bundle, at `/etc/band-ca.pem`
//! with the variables of [`CA_ENV`], over the system bundle paths the sandbox has, and in a Java
//! trust store ([`truststore`]).

pub mod bound;
pub mod ca;
pub mod refusals;
pub mod truststore;

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::thread::JoinHandle;

use band::policy::Decision;
use band::policy::net::{HostPattern, NetMatcher};
use band::proto::Denial;
use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};

use self::bound::{Bound, Leak, Scanner};
use self::ca::Ca;
use self::refusals::Refusals;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type ProxyBody = BoxBody<Bytes, BoxError>;
/// The addresses of a host name the proxy may connect to.
pub type Resolve = Arc<dyn Fn(&str) -> Vec<IpAddr> + Send + Sync>;

/// Most connections a run holds open through the proxy at once.
pub const MAX_CONNECTIONS: usize = 64;

/// What went wrong starting the proxy.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error(transparent)]
    Ca(#[from] ca::CaError),
    #[error("cannot start the egress proxy: {0}")]
    Start(std::io::Error),
    #[error("cannot read the trust store: {0}")]
    Roots(String),
    #[error(transparent)]
    TrustStore(#[from] truststore::TrustStoreError),
}

/// Which names the proxy serves ([`serves`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serve {
    /// The names an HTTP rule matches.
    HttpRules,
    /// Every name `allow.net` names (a run with bound secrets).
    Named,
    /// Every name `allow.net` admits, `*` included: the observing run of `band learn --net`,
    /// whose requests the proxy records.
    Observe,
}

impl Serve {
    pub fn of(bound: &Bound, observe: bool) -> Serve {
        if observe {
            Serve::Observe
        } else if bound.is_empty() {
            Serve::HttpRules
        } else {
            Serve::Named
        }
    }
}

/// Whether the proxy serves `host`: see [`Serve`].
pub fn serves(m: &NetMatcher, mode: Serve, host: &str) -> bool {
    if matches!(m.check_host(host, None), Decision::Deny { .. }) {
        return false;
    }
    m.allow_patterns().iter().any(|p| match p.host() {
        HostPattern::Exact(_) | HostPattern::Subdomains(_) => {
            (mode != Serve::HttpRules || p.http().is_some()) && p.matches_host(host, None)
        }
        HostPattern::Any => mode == Serve::Observe,
        _ => false,
    })
}

/// Whether a run needs the proxy at all (`observe`: an observing run with network).
pub fn needed(m: &NetMatcher, bound: &Bound, observe: bool) -> bool {
    observe || !bound.is_empty() || m.has_http_rules()
}

/// The nftables batch of an observing run's namespace: its TCP to `ports` (TLS, HTTP) of any
/// address outside loopback goes to the proxy at `addr` on the same ports.
pub fn observe_redirect(addr: std::net::Ipv4Addr, ports: [u16; 2]) -> String {
    let [tls, plain] = ports;
    format!(
        "table ip band_observe {{\n\
         \tchain out {{\n\
         \t\ttype nat hook output priority -100; policy accept;\n\
         \t\tip daddr != 127.0.0.0/8 tcp dport 443 dnat to {addr}:{tls}\n\
         \t\tip daddr != 127.0.0.0/8 tcp dport 80 dnat to {addr}:{plain}\n\
         \t}}\n\
         }}\n"
    )
}

/// Whether `m` admits any host (`*`): with `observe`, the observing run of `band learn --net`.
pub fn admits_any(m: &NetMatcher) -> bool {
    m.allow_patterns()
        .iter()
        .any(|p| matches!(p.host(), HostPattern::Any))
}

/// How the proxy reaches upstream: the addresses of a name (through the run's DNS upstream,
/// filtered as the stub filters them), and the roots it verifies servers against.
pub struct Upstream {
    pub resolve: Resolve,
    pub roots: rustls::RootCertStore,
}

/// The trust store of the host (`rustls-native-certs`: the system's bundle), plus the PEM
/// certificates of `extra` (the server config's `proxy_extra_ca`).
pub fn roots(extra: Option<&[u8]>) -> Result<rustls::RootCertStore, ProxyError> {
    let mut store = rustls::RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for cert in native.certs {
        // A certificate the store cannot parse is skipped, as every TLS client does.
        let _ = store.add(cert);
    }
    if let Some(pem) = extra {
        for cert in extra_certs(pem)? {
            store
                .add(cert)
                .map_err(|e| ProxyError::Roots(format!("extra CA: {e}")))?;
        }
    }
    Ok(store)
}

/// The certificates of the config's extra CA file (PEM): at least one, each one parsed; a file
/// that holds none (not PEM) is an error, not an empty set.
pub fn extra_certs(
    pem: &[u8],
) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, ProxyError> {
    let certs = rustls::pki_types::pem::PemObject::pem_slice_iter(pem)
        .collect::<Result<Vec<rustls::pki_types::CertificateDer<'static>>, _>>()
        .map_err(|e| ProxyError::Roots(format!("extra CA: {e}")))?;
    if certs.is_empty() {
        return Err(ProxyError::Roots(
            "extra CA: no PEM certificate in the file".into(),
        ));
    }
    for cert in &certs {
        webpki_parse(cert)?;
    }
    Ok(certs)
}

/// Whether `cert` parses as a trust anchor, as the root store will take it.
fn webpki_parse(cert: &rustls::pki_types::CertificateDer<'_>) -> Result<(), ProxyError> {
    rustls::RootCertStore::empty()
        .add(cert.clone())
        .map_err(|e| ProxyError::Roots(format!("extra CA: {e}")))
}

/// Everything one request is decided with.
pub struct Ctx {
    net: NetMatcher,
    bound: Bound,
    upstream: Upstream,
    /// Upstream TLS: `[HTTP/1.1, HTTP/2]`.
    tls: [Arc<rustls::ClientConfig>; 2],
    /// What it refused: streamed as it happens, kept and counted within bounds.
    refusals: Arc<Refusals>,
    /// Where it connected for the run: (host, address, port).
    contacted: Mutex<std::collections::BTreeSet<(String, IpAddr, u16)>>,
    serve: Serve,
    /// The requests passed on, in an observing run ([`Serve::Observe`]).
    seen: Mutex<std::collections::BTreeSet<band::proto::HttpSeen>>,
}

/// A listening socket of the proxy (made in the run's namespace) and whether it takes TLS.
pub struct Listener {
    pub socket: std::net::TcpListener,
    pub tls: bool,
}

/// The running proxy: one thread with a tokio runtime. [`Proxy::stop`] (or drop) ends every
/// connection and task, and drops the CA.
pub struct Proxy {
    ctx: Arc<Ctx>,
    ca_pem: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Proxy {
    /// Start serving `listeners` with the run's CA `ca`, its refusals recorded in `refusals`
    /// (a run's, which its DNS stub shares: one bound for both, [`refusals::MAX_KEPT`]).
    pub fn start(
        ca: Arc<Ca>,
        net: NetMatcher,
        bound: Bound,
        upstream: Upstream,
        listeners: Vec<Listener>,
        observe: bool,
        refusals: Arc<Refusals>,
    ) -> Result<Proxy, ProxyError> {
        let ca_pem = ca.pem().to_string();
        let serve = Serve::of(&bound, observe);
        let serving = net.clone();
        let resolver = ca.resolver(Arc::new(move |h: &str| serves(&serving, serve, h)));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| ProxyError::Roots(e.to_string()))?
            .with_no_client_auth()
            .with_cert_resolver(resolver);
        server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        // Upstream, the request goes in the protocol the run spoke (a server may answer the two
        // differently); `http/1.1` is offered too, for a server without HTTP/2.
        let client = |alpn: Vec<Vec<u8>>| -> Result<Arc<rustls::ClientConfig>, ProxyError> {
            let mut c = rustls::ClientConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .map_err(|e| ProxyError::Roots(e.to_string()))?
                .with_root_certificates(upstream.roots.clone())
                .with_no_client_auth();
            c.alpn_protocols = alpn;
            Ok(Arc::new(c))
        };
        let tls = [
            client(vec![b"http/1.1".to_vec()])?,
            client(vec![b"h2".to_vec(), b"http/1.1".to_vec()])?,
        ];
        let ctx = Arc::new(Ctx {
            net,
            bound,
            upstream,
            tls,
            refusals,
            contacted: Mutex::new(std::collections::BTreeSet::new()),
            serve,
            seen: Mutex::new(std::collections::BTreeSet::new()),
        });
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(ProxyError::Start)?;
        let mut sockets = Vec::new();
        for l in listeners {
            l.socket.set_nonblocking(true).map_err(ProxyError::Start)?;
            let port = l.socket.local_addr().map_err(ProxyError::Start)?.port();
            sockets.push((l.socket, l.tls, port));
        }
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let run_ctx = ctx.clone();
        let thread = std::thread::Builder::new()
            .name("band-proxy".into())
            .spawn(move || {
                rt.block_on(async move {
                    let mut serving = tokio::task::JoinSet::new();
                    for (socket, tls, port) in sockets {
                        let Ok(listener) = tokio::net::TcpListener::from_std(socket) else {
                            continue;
                        };
                        let acceptor = tls.then(|| acceptor.clone());
                        serving.spawn(accept_loop(listener, acceptor, port, run_ctx.clone()));
                    }
                    let _ = stopped.await;
                    serving.abort_all();
                });
                // Dropping the runtime drops every connection task still running.
                drop(rt);
            })
            .map_err(ProxyError::Start)?;
        Ok(Proxy {
            ctx,
            ca_pem,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The run's CA certificate (PEM), for the run's bundle.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// What the proxy refused so far (the first [`refusals::MAX_KEPT`], their texts cut:
    /// [`refusals::bounded`]).
    pub fn denials(&self) -> Vec<Denial> {
        self.ctx.refusals.denials()
    }

    /// How many of its refusals were past the bound: counted only.
    pub fn denials_dropped(&self) -> u64 {
        self.ctx.refusals.dropped()
    }

    /// The requests it passed on in an observing run, for the run's network report.
    pub fn requests(&self) -> Vec<band::proto::HttpSeen> {
        self.ctx
            .seen
            .lock()
            .map(|c| c.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Where it connected for the run: (host, address, port), for the run's network report.
    pub fn contacted(&self) -> Vec<(String, IpAddr, u16)> {
        self.ctx
            .contacted
            .lock()
            .map(|c| c.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Stop: every listener and connection closed, the thread joined.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// Whether the proxy's thread is gone (after [`Proxy::stop`]).
    pub fn stopped(&self) -> bool {
        self.thread.is_none()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    port: u16,
    ctx: Arc<Ctx>,
) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            // Out of descriptors, or a connection reset before it was taken: back off a little
            // rather than spin.
            Err(_) => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        // Reap finished connections; a run holds at most MAX_CONNECTIONS at once (as the
        // loopback relay does), more are closed as they come.
        while conns.try_join_next().is_some() {}
        if conns.len() >= MAX_CONNECTIONS {
            drop(stream);
            continue;
        }
        let acceptor = acceptor.clone();
        let ctx = ctx.clone();
        conns.spawn(async move {
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            match acceptor {
                Some(acceptor) => {
                    let Ok(tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let sni = tls.get_ref().1.server_name().map(str::to_ascii_lowercase);
                    let svc = hyper::service::service_fn(move |req| {
                        let ctx = ctx.clone();
                        let sni = sni.clone();
                        async move { Ok::<_, Infallible>(ctx.handle(req, sni, port, true).await) }
                    });
                    let _ = builder.serve_connection(TokioIo::new(tls), svc).await;
                }
                None => {
                    let svc = hyper::service::service_fn(move |req| {
                        let ctx = ctx.clone();
                        async move { Ok::<_, Infallible>(ctx.handle(req, None, port, false).await) }
                    });
                    let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
                }
            }
        });
    }
}

fn text(status: StatusCode, body: String) -> Response<ProxyBody> {
    let mut r = Response::new(Full::new(Bytes::from(body)).map_err(|e| match e {}).boxed());
    *r.status_mut() = status;
    r
}

/// Headers that belong to one connection, never forwarded.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "te",
    "trailer",
    "host",
];

impl Ctx {
    fn deny(&self, d: Denial) -> Response<ProxyBody> {
        // Recorded cut (a path of 60 KB is said in 1 KB), and so said to the run.
        let d = self.refusals.record(d);
        let msg = format!("band: refused by the run's egress proxy: {}\n", d.what());
        text(StatusCode::FORBIDDEN, msg)
    }

    fn leak(&self, leak: Leak, host: &str, port: u16) -> Response<ProxyBody> {
        self.deny(Denial::Secret {
            name: leak.name,
            to: format!("{host}:{port}"),
            place: leak.place,
        })
    }

    /// One request of the run, answered.
    pub async fn handle(
        self: Arc<Self>,
        req: Request<Incoming>,
        sni: Option<String>,
        port: u16,
        https: bool,
    ) -> Response<ProxyBody> {
        let authority = req
            .uri()
            .authority()
            .map(|a| a.host().to_string())
            .or_else(|| {
                req.headers()
                    .get(hyper::header::HOST)
                    .and_then(|h| h.to_str().ok())
                    .map(|h| h.rsplit_once(':').map_or(h, |(h, _)| h).to_string())
            })
            .map(|h| h.trim_end_matches('.').to_ascii_lowercase());
        let host = match (sni, authority) {
            // A request must name the host its TLS connection was made to.
            (Some(s), Some(a)) if s != a => {
                return text(
                    StatusCode::MISDIRECTED_REQUEST,
                    format!("band: the request names {a}, its connection {s}\n"),
                );
            }
            (Some(s), _) => s,
            (None, Some(a)) => a,
            (None, None) => return text(StatusCode::BAD_REQUEST, "band: no Host\n".into()),
        };
        if !serves(&self.net, self.serve, &host) {
            return self.deny(Denial::Net {
                host,
                port: Some(port),
                rule: None,
            });
        }
        let path = req.uri().path().to_string();
        let query = req.uri().query().unwrap_or("").to_string();
        if let Some(l) = self.bound.find_in(path.as_bytes(), "path") {
            return self.leak(l, &host, port);
        }
        if let Some(l) = self.bound.find_in(query.as_bytes(), "query string") {
            return self.leak(l, &host, port);
        }
        let method = req.method().as_str().to_string();
        let h2 = req.version() == hyper::Version::HTTP_2;
        match self.net.check_request(&host, port, https, &method, &path) {
            Decision::Allow { .. } => {
                if self.serve == Serve::Observe
                    && let Ok(mut seen) = self.seen.lock()
                    && seen.len() < MAX_SEEN
                {
                    seen.insert(band::proto::HttpSeen {
                        method: method.clone(),
                        host: host.clone(),
                        port,
                        https,
                        path: path.clone(),
                    });
                }
            }
            Decision::Deny { rule } => {
                return self.deny(Denial::Http {
                    method,
                    host,
                    port,
                    https,
                    path,
                    rule: Some(rule),
                });
            }
            Decision::Default => {
                return self.deny(Denial::Http {
                    method,
                    host,
                    port,
                    https,
                    path,
                    rule: None,
                });
            }
        }
        let (parts, body) = req.into_parts();
        let named: Vec<(String, Vec<u8>)> = parts
            .headers
            .iter()
            .filter(|(n, _)| !HOP_BY_HOP.contains(&n.as_str()))
            .map(|(n, v)| (n.as_str().to_string(), v.as_bytes().to_vec()))
            .collect();
        // A value goes only over TLS: over plain HTTP a placeholder anywhere is refused.
        let values = if https {
            match self.bound.rewrite_headers(&host, &named) {
                Ok(v) => v,
                Err(l) => return self.leak(l, &host, port),
            }
        } else {
            if let Some(l) = named
                .iter()
                .find_map(|(n, v)| self.bound.find_in(v, &format!("header {n} (plain HTTP)")))
            {
                return self.leak(l, &host, port);
            }
            named.iter().map(|(_, v)| v.clone()).collect()
        };
        let body: ProxyBody = if self.bound.is_empty() {
            body.map_err(|e| Box::new(e) as BoxError).boxed()
        } else {
            ScanBody {
                inner: body,
                scanner: Scanner::new(self.bound.clone()),
                trailers: None,
            }
            .boxed()
        };
        let pq = parts
            .uri
            .path_and_query()
            .map_or("/".to_string(), |p| p.as_str().to_string());
        let mut out = Request::builder().method(parts.method.clone());
        for ((name, _), value) in named.iter().zip(values) {
            out = out.header(name.as_str(), value);
        }
        match self.forward(&host, port, https, h2, &pq, out, body).await {
            Ok(resp) => resp,
            Err(Forwarded::Leak(l)) => self.leak(l, &host, port),
            Err(Forwarded::Failed(e)) => text(
                StatusCode::BAD_GATEWAY,
                format!("band: the egress proxy could not reach {host}:{port}: {e}\n"),
            ),
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn forward(
        &self,
        host: &str,
        port: u16,
        https: bool,
        h2: bool,
        pq: &str,
        builder: hyper::http::request::Builder,
        body: ProxyBody,
    ) -> Result<Response<ProxyBody>, Forwarded> {
        let addrs = {
            let name = host.to_string();
            let resolve = self.upstream.resolve.clone();
            // The resolver blocks (UDP to the upstream, with its timeout): on the blocking pool.
            tokio::task::spawn_blocking(move || resolve(&name))
                .await
                .unwrap_or_default()
        };
        if addrs.is_empty() {
            return Err(Forwarded::Failed(format!(
                "{host} has no address the run may reach"
            )));
        }
        let mut last = String::new();
        let mut tcp = None;
        for ip in addrs {
            match tokio::net::TcpStream::connect(SocketAddr::new(ip, port)).await {
                Ok(s) => {
                    if let Ok(mut c) = self.contacted.lock() {
                        c.insert((host.to_string(), ip, port));
                    }
                    tcp = Some(s);
                    break;
                }
                Err(e) => last = e.to_string(),
            }
        }
        let Some(tcp) = tcp else {
            return Err(Forwarded::Failed(last));
        };
        let leak = Arc::new(Mutex::new(None::<Leak>));
        let body = watch_leak(body, leak.clone());
        let result = if https {
            let name = rustls::pki_types::ServerName::try_from(host.to_string())
                .map_err(|e| Forwarded::Failed(e.to_string()))?;
            let tls = tokio_rustls::TlsConnector::from(self.tls[usize::from(h2)].clone())
                .connect(name, tcp)
                .await
                .map_err(|e| Forwarded::Failed(format!("TLS: {e}")))?;
            let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
            send(TokioIo::new(tls), h2, host, port, https, pq, builder, body).await
        } else {
            send(
                TokioIo::new(tcp),
                false,
                host,
                port,
                https,
                pq,
                builder,
                body,
            )
            .await
        };
        if let Some(l) = leak.lock().ok().and_then(|mut g| g.take()) {
            return Err(Forwarded::Leak(l));
        }
        result.map_err(Forwarded::Failed)
    }
}

enum Forwarded {
    Leak(Leak),
    Failed(String),
}

#[allow(clippy::too_many_arguments)]
async fn send<T>(
    io: TokioIo<T>,
    h2: bool,
    host: &str,
    port: u16,
    https: bool,
    pq: &str,
    builder: hyper::http::request::Builder,
    body: ProxyBody,
) -> Result<Response<ProxyBody>, String>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let scheme = if https { "https" } else { "http" };
    let default = if https { 443 } else { 80 };
    let authority = if port == default {
        host.to_string()
    } else {
        format!("{host}:{port}")
    };
    let e = |e: hyper::Error| e.to_string();
    let resp = if h2 {
        let (mut sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .map_err(e)?;
        tokio::spawn(conn);
        let req = builder
            .uri(format!("{scheme}://{authority}{pq}"))
            .body(body)
            .map_err(|e| e.to_string())?;
        sender.send_request(req).await.map_err(e)?
    } else {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.map_err(e)?;
        tokio::spawn(conn);
        let req = builder
            .uri(pq)
            .header(hyper::header::HOST, authority)
            .body(body)
            .map_err(|e| e.to_string())?;
        sender.send_request(req).await.map_err(e)?
    };
    let (mut parts, body) = resp.into_parts();
    for h in HOP_BY_HOP {
        parts.headers.remove(*h);
    }
    Ok(Response::from_parts(
        parts,
        body.map_err(|e| Box::new(e) as BoxError).boxed(),
    ))
}

/// A request body passed on chunk by chunk, cut off before a chunk holding a placeholder.
struct ScanBody {
    inner: Incoming,
    scanner: Scanner,
    trailers: Option<Frame<Bytes>>,
}

/// The error that cuts a body off.
#[derive(Debug)]
struct LeakError(Leak);

impl std::fmt::Display for LeakError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "placeholder of {} in the {}", self.0.name, self.0.place)
    }
}

impl std::error::Error for LeakError {}

impl Body for ScanBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Some(t) = self.trailers.take() {
            return Poll::Ready(Some(Ok(t)));
        }
        loop {
            let frame = match Pin::new(&mut self.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(f) => f,
            };
            match frame {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => match self.scanner.push(&data) {
                        Ok(out) if out.is_empty() => continue,
                        Ok(out) => return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out))))),
                        Err(leak) => return Poll::Ready(Some(Err(Box::new(LeakError(leak))))),
                    },
                    Err(trailers) => {
                        let tail = self.scanner.finish();
                        if tail.is_empty() {
                            return Poll::Ready(Some(Ok(trailers)));
                        }
                        self.trailers = Some(trailers);
                        return Poll::Ready(Some(Ok(Frame::data(Bytes::from(tail)))));
                    }
                },
                Some(Err(e)) => return Poll::Ready(Some(Err(Box::new(e)))),
                None => {
                    let tail = self.scanner.finish();
                    if tail.is_empty() {
                        return Poll::Ready(None);
                    }
                    return Poll::Ready(Some(Ok(Frame::data(Bytes::from(tail)))));
                }
            }
        }
    }
}

/// Pass `body` on, noting in `leak` the leak that cut it off (if one did).
fn watch_leak(body: ProxyBody, leak: Arc<Mutex<Option<Leak>>>) -> ProxyBody {
    body.map_err(move |e| {
        if let Some(l) = e.downcast_ref::<LeakError>()
            && let Ok(mut g) = leak.lock()
        {
            *g = Some(l.0.clone());
        }
        e
    })
    .boxed()
}

/// Most distinct requests an observing run's report holds.
const MAX_SEEN: usize = 1000;

/// Where the run's CA bundle is in the sandbox: the host's system bundle and the run's CA.
pub const CA_BUNDLE: &str = "/etc/band-ca.pem";

/// The variables that point the run's TLS clients at [`CA_BUNDLE`] (OpenSSL and curl, Python's
/// requests, Node).
pub const CA_ENV: &[&str] = &[
    "SSL_CERT_FILE",
    "CURL_CA_BUNDLE",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
];

/// The host's system bundle, which the run's bundle starts with: the first of
/// [`truststore::SYSTEM_BUNDLES`] the host can read (empty if none).
pub fn host_system_bundle() -> String {
    truststore::SYSTEM_BUNDLES
        .iter()
        .find_map(|p| fs_err::read_to_string(p).ok())
        .unwrap_or_default()
}

/// What a run that needs the proxy carries from its start: its bound secrets with their
/// placeholders, its CA (made now, in memory) and the bundle the sandbox trusts.
pub struct Egress {
    pub bound: Bound,
    pub ca: Arc<Ca>,
    pub bundle: String,
    /// The config's extra CA for upstream (PEM), if any.
    pub extra_ca: Option<Vec<u8>>,
    /// The run's Java trust store (PKCS#12) when the host has Java ([`truststore`]).
    pub java_truststore: Option<Vec<u8>>,
    /// Where the proxy listens in the run's namespace: TLS, plain HTTP (the server config's
    /// `proxy_ports`).
    pub ports: [u16; 2],
    /// The observing run of `band learn --net` (`allow.net: [*]`): every name is served and
    /// each request recorded, nothing refused beyond what the band refuses.
    pub observe: bool,
    /// Told each refusal as it happens (the run's event stream), once the run has one.
    pub live: std::sync::OnceLock<Arc<OnDenial>>,
}

/// Called with each refusal of the proxy (and the stub's, for a placeholder in a name).
pub type OnDenial = dyn Fn(&Denial) + Send + Sync;

impl std::fmt::Debug for Egress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Egress")
            .field("bound", &self.bound)
            .finish_non_exhaustive()
    }
}

/// What of the host and the request an [`Egress`] is made with, besides the policy.
pub struct EgressHost<'a> {
    /// The host's system bundle's text.
    pub system_bundle: &'a str,
    /// The config's extra CA (PEM), if any.
    pub extra_ca: Option<Vec<u8>>,
    /// The host has Java: the run gets a trust store for it.
    pub java: bool,
    /// The request is an observing run (`band learn`).
    pub observe: bool,
}

impl Egress {
    /// For a run with `policy` and the secret values `values`: `None` when it needs no proxy.
    /// The placeholders are random (the crypto provider's generator). The extra CA must hold
    /// PEM certificates ([`extra_certs`]): checked here, before the run has anything.
    pub fn new(
        run_id: &str,
        policy: &band::policy::Policy,
        net: &NetMatcher,
        values: &std::collections::BTreeMap<String, String>,
        host: EgressHost<'_>,
    ) -> Result<Option<Egress>, ProxyError> {
        let EgressHost {
            system_bundle,
            extra_ca,
            java,
            observe,
        } = host;
        let mut secrets = Vec::new();
        for (name, hosts) in &policy.secret_hosts {
            let Some(value) = values.get(name) else {
                continue;
            };
            let mut random = [0u8; 20];
            rustls::crypto::ring::default_provider()
                .secure_random
                .fill(&mut random)
                .map_err(|_| ProxyError::Roots("no random bytes for a placeholder".into()))?;
            secrets.push(bound::Secret::new(
                name,
                bound::placeholder(&random),
                value.clone(),
                hosts,
            ));
        }
        let bound = Bound::new(secrets);
        let observe = observe && admits_any(net);
        if !needed(net, &bound, observe) {
            return Ok(None);
        }
        if let Some(pem) = &extra_ca {
            extra_certs(pem)?;
        }
        let ca = Arc::new(Ca::new(run_id)?);
        let mut bundle = system_bundle.to_string();
        if !bundle.is_empty() && !bundle.ends_with('\n') {
            bundle.push('\n');
        }
        bundle.push_str(ca.pem());
        let java_truststore = if java {
            Some(truststore::java_truststore(ca.pem(), system_bundle)?)
        } else {
            None
        };
        Ok(Some(Egress {
            bound,
            ca,
            bundle,
            extra_ca,
            java_truststore,
            ports: [443, 80],
            observe,
            live: std::sync::OnceLock::new(),
        }))
    }

    /// Tell `f` each refusal as it happens (set once, before the proxy starts).
    pub fn on_denial(&self, f: Arc<OnDenial>) {
        let _ = self.live.set(f);
    }

    /// What the run sees of it ([`crate::common::handover::RunEgress`]): its secrets with
    /// placeholders, its CA variables, its bundle and Java trust store. A `JAVA_TOOL_OPTIONS`
    /// the run has as a secret keeps its options, the trust store's after them.
    pub fn handover(
        &self,
        values: &std::collections::BTreeMap<String, String>,
    ) -> crate::common::handover::RunEgress {
        let mut secrets = self.run_secrets(values);
        let mut env: std::collections::BTreeMap<String, String> = CA_ENV
            .iter()
            .map(|v| ((*v).to_string(), CA_BUNDLE.to_string()))
            .collect();
        if self.java_truststore.is_some() {
            let name = truststore::JAVA_TOOL_OPTIONS;
            let options = truststore::java_options(secrets.get(name).map(String::as_str));
            if let Some(existing) = secrets.get_mut(name) {
                existing.clone_from(&options);
            }
            env.insert(name.to_string(), options);
        }
        crate::common::handover::RunEgress {
            secrets,
            env,
            ca_bundle: self.bundle.clone(),
            java_truststore: self.java_truststore.clone(),
        }
    }

    /// The secrets as the run sees them: a bound one's placeholder in place of its value.
    pub fn run_secrets(
        &self,
        values: &std::collections::BTreeMap<String, String>,
    ) -> std::collections::BTreeMap<String, String> {
        let mut out = values.clone();
        for s in self.bound.secrets() {
            out.insert(s.name.clone(), s.placeholder.clone());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matcher(allow: &[&str]) -> NetMatcher {
        let allow: Vec<String> = allow.iter().map(|s| s.to_string()).collect();
        NetMatcher::new(&allow, &["deny.example.test".to_string()])
            .unwrap_or_else(|e| panic!("{e:?}"))
    }

    #[test]
    fn which_names_each_mode_serves() {
        let m = matcher(&[
            "GET https://api.example.test/v1/**",
            "other.example.test",
            "*",
        ]);
        let serve = |mode, host| serves(&m, mode, host);
        assert!(serve(Serve::HttpRules, "api.example.test"));
        assert!(!serve(Serve::HttpRules, "other.example.test"));
        assert!(serve(Serve::Named, "other.example.test"));
        assert!(!serve(Serve::Named, "anything.test"));
        // Observing (`*`): every admitted name, never a denied one.
        assert!(serve(Serve::Observe, "anything.test"));
        assert!(!serve(Serve::Observe, "deny.example.test"));
        assert!(admits_any(&m));
        assert!(!admits_any(&matcher(&["other.example.test"])));
        assert!(needed(&matcher(&["x.test"]), &Bound::new(vec![]), true));
        assert!(!needed(&matcher(&["x.test"]), &Bound::new(vec![]), false));
    }

    #[test]
    fn the_observing_redirect_sends_https_and_http_but_loopback_to_the_proxy() {
        let batch = observe_redirect(std::net::Ipv4Addr::new(127, 77, 0, 3), [443, 80]);
        assert!(batch.starts_with("table ip band_observe {"), "{batch}");
        assert!(batch.contains("type nat hook output priority -100; policy accept;"));
        assert!(
            batch.contains("ip daddr != 127.0.0.0/8 tcp dport 443 dnat to 127.77.0.3:443\n"),
            "{batch}"
        );
        assert!(
            batch.contains("ip daddr != 127.0.0.0/8 tcp dport 80 dnat to 127.77.0.3:80\n"),
            "{batch}"
        );
    }
}
