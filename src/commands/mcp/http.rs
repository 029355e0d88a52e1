//! `band mcp --http ADDR`: the same server over Streamable HTTP.
//!
//! The transport is the SDK's own ([`StreamableHttpService`]): a session per `initialize` for
//! the revisions before 2026-07-28 (`Mcp-Session-Id`, GET for the server's stream, DELETE to end
//! it), each request on its own for 2026-07-28 (its `_meta` says the version and capabilities),
//! a POST answered with JSON or an SSE stream, 202 for a notification, Host and Origin checked
//! against DNS rebinding. hyper serves it, one task per connection, so calls run concurrently.
//! band adds what is its own:
//!
//! - where it listens: loopback unless told otherwise, and then only with a bearer token
//!   ([`check_exposure`]), read from a file or the environment, never from argv (other users
//!   see a process's argv);
//! - the token check (`Authorization: Bearer …`, 401 otherwise), before anything else;
//! - without a token, loopback callers of this user's and root's only ([`super::peer`]);
//! - bounds on connections: at most [`MAX_CONNECTIONS`], a request head within
//!   [`HEADER_TIMEOUT`], a pause after a failed `accept`;
//! - a client that goes away cancels its runs: each request carries a [`Disconnect`] token,
//!   cancelled when its response is dropped before it ended (the connection closed), which
//!   `call_tool` watches as it watches `notifications/cancelled`.

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use sha2::{Digest, Sha256};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::{BandServer, cancel_all};
use crate::cli::user_error;

/// The path the server answers at; every other path is 404.
pub(crate) const ENDPOINT: &str = "/mcp";
/// Where the token comes from when there is no `--token-file`.
pub(crate) const TOKEN_ENV: &str = "BAND_MCP_TOKEN";

/// Cancelled when the client of one HTTP request goes away before its response ended.
#[derive(Clone, Debug)]
pub(crate) struct Disconnect(pub(crate) CancellationToken);

/// Where to listen and who may call.
#[derive(Debug)]
pub(crate) struct HttpOptions {
    pub(crate) addr: SocketAddr,
    pub(crate) token: Option<String>,
    pub(crate) allow_hosts: Vec<String>,
    pub(crate) allow_origins: Vec<String>,
}

/// `PORT` (on loopback), `HOST:PORT` or `[V6]:PORT`; `localhost` is 127.0.0.1. No name is
/// resolved: what band binds is what the user wrote.
pub(crate) fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    if let Some(port) = s.strip_prefix("localhost:") {
        let port = port
            .parse::<u16>()
            .map_err(|_| format!("`{port}` is not a port"))?;
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    s.parse::<SocketAddr>().map_err(|_| {
        format!("`{s}` is not PORT, IP:PORT or [IPv6]:PORT (names other than localhost are not resolved)")
    })
}

/// The token: from `--token-file` (owner-only, one line), else `$BAND_MCP_TOKEN`, else none.
pub(crate) fn read_token(file: Option<&Path>, env: Option<String>) -> Result<Option<String>> {
    let (token, from) = match file {
        Some(path) => {
            use std::os::unix::fs::MetadataExt;
            let meta = fs_err::metadata(path)?;
            if meta.mode() & 0o077 != 0 {
                return Err(user_error(
                    format!(
                        "--token-file {}: readable by others (mode {:o})",
                        path.display(),
                        meta.mode() & 0o777
                    ),
                    format!("chmod 600 {}", path.display()),
                ));
            }
            let text = fs_err::read_to_string(path)?;
            (
                text.trim().to_string(),
                format!("--token-file {}", path.display()),
            )
        }
        None => match env {
            Some(t) => (t.trim().to_string(), format!("${TOKEN_ENV}")),
            None => return Ok(None),
        },
    };
    if token.is_empty() || token.chars().any(|c| !c.is_ascii_graphic()) {
        return Err(user_error(
            format!("{from}: the token is empty or not printable ASCII without spaces"),
            "write a long random token, e.g. `openssl rand -hex 32`",
        ));
    }
    Ok(Some(token))
}

/// Loopback needs nothing; any other address needs a token.
pub(crate) fn check_exposure(addr: &SocketAddr, token: Option<&str>) -> Result<()> {
    if addr.ip().is_loopback() || token.is_some() {
        return Ok(());
    }
    Err(user_error(
        format!(
            "--http {addr}: not a loopback address, and no bearer token: anyone who reaches it could run your skills"
        ),
        format!(
            "give a token with --token-file FILE or ${TOKEN_ENV} (clients send `Authorization: Bearer <token>`), or serve on loopback: --http 127.0.0.1:{}",
            addr.port()
        ),
    ))
}

/// The SDK's transport, configured: sessions for the revisions that have them, Host and Origin
/// allowlists.
pub(crate) fn config(opts: &HttpOptions, ct: CancellationToken) -> StreamableHttpServerConfig {
    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    if !opts.addr.ip().is_unspecified() && !opts.addr.ip().is_loopback() {
        hosts.push(opts.addr.ip().to_string());
    }
    hosts.extend(opts.allow_hosts.iter().cloned());
    let mut origins: Vec<String> = vec![
        "http://localhost:*".into(),
        "http://127.0.0.1:*".into(),
        "http://[::1]:*".into(),
    ];
    origins.extend(opts.allow_origins.iter().cloned());
    StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_cancellation_token(ct)
}

/// Whether the request carries the token (compared as digests, so in constant time).
fn authorised(headers: &http::HeaderMap, token: &str) -> bool {
    let Some(given) = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, rest) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        })
    else {
        return false;
    };
    let (a, b) = (
        Sha256::digest(given.as_bytes()),
        Sha256::digest(token.as_bytes()),
    );
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

type Resp = http::Response<BoxBody<Bytes, Infallible>>;

fn plain(status: http::StatusCode, text: &str) -> Resp {
    let mut r = http::Response::new(Full::new(Bytes::from(format!("{text}\n"))).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// A response body that cancels its request's [`Disconnect`] when dropped before its end.
struct Watched {
    inner: BoxBody<Bytes, Infallible>,
    guard: Option<DropGuard>,
}

impl Body for Watched {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(None) = polled
            && let Some(g) = self.guard.take()
        {
            g.disarm();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

type Transport = StreamableHttpService<Arc<BandServer>, LocalSessionManager>;

async fn handle(
    transport: Transport,
    token: Option<Arc<str>>,
    mut req: http::Request<hyper::body::Incoming>,
) -> Result<http::Response<Watched>, Infallible> {
    // Dropped with this future (the client left before the headers) or with the body.
    let disconnect = CancellationToken::new();
    let guard = disconnect.clone().drop_guard();
    let resp = if req.uri().path() != ENDPOINT {
        plain(
            http::StatusCode::NOT_FOUND,
            &format!("band mcp serves MCP at {ENDPOINT}"),
        )
    } else if let Some(token) = &token
        && !authorised(req.headers(), token)
    {
        let mut r = plain(
            http::StatusCode::UNAUTHORIZED,
            "Unauthorized: send `Authorization: Bearer <token>`",
        );
        r.headers_mut().insert(
            http::header::WWW_AUTHENTICATE,
            http::HeaderValue::from_static("Bearer realm=\"band mcp\""),
        );
        r
    } else {
        req.extensions_mut().insert(Disconnect(disconnect));
        let svc = hyper_util::service::TowerToHyperService::new(transport);
        match hyper::service::Service::call(&svc, req).await {
            Ok(r) => r,
            Err(never) => match never {},
        }
    };
    Ok(resp.map(|inner| Watched {
        inner,
        guard: Some(guard),
    }))
}

/// The most connections served at once; more wait in the kernel's backlog.
const MAX_CONNECTIONS: usize = 256;
/// How long a connection may take to send a request's head.
const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// The pause after a failed `accept`.
const ACCEPT_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);

/// A line for stderr said at most once a second, however often it comes.
#[derive(Default)]
struct Said {
    last: Option<std::time::Instant>,
    held: u64,
}

impl Said {
    fn say(&mut self, line: &str) {
        let now = std::time::Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < std::time::Duration::from_secs(1))
        {
            self.held += 1;
            return;
        }
        match std::mem::take(&mut self.held) {
            0 => eprintln!("{line}"),
            n => eprintln!("{line} (and {n} more since the last such line)"),
        }
        self.last = Some(now);
    }
}

/// Whose the client at `peer` is, when not this process's user's or root's (`uid 1001's`), or
/// when the kernel's table does not list it (refused too). `None`: this user's, root's, or not on
/// loopback (where a token is required anyway).
fn other_user(peer: SocketAddr, local: SocketAddr) -> Option<String> {
    #[cfg(target_os = "linux")]
    {
        let mapped_loopback = matches!(peer.ip(),
            IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()));
        if !peer.ip().is_loopback() && !mapped_loopback {
            return None;
        }
        let me = rustix::process::geteuid().as_raw();
        match super::peer::socket_owner(Path::new("/proc/net"), peer, local) {
            Some(uid) if uid == me || uid == 0 => None,
            Some(uid) => Some(format!("uid {uid}'s")),
            None => Some("not in the kernel's table of sockets, so of no known user".into()),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (peer, local);
        None
    }
}

/// Serve until SIGINT or SIGTERM; then every run under way is cancelled.
pub(crate) async fn serve(server: Arc<BandServer>, opts: HttpOptions) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(opts.addr)
        .await
        .with_context(|| format!("--http {}: cannot listen", opts.addr))?;
    let local = listener.local_addr().context("the listening address")?;
    let ct = CancellationToken::new();
    let runs = server.runs.clone();
    let factory_server = server.clone();
    let transport: Transport = StreamableHttpService::new(
        move || Ok(factory_server.clone()),
        Arc::new(LocalSessionManager::default()),
        config(&opts, ct.clone()),
    );
    let host = match local.ip() {
        IpAddr::V6(ip) => format!("[{ip}]"),
        IpAddr::V4(ip) => ip.to_string(),
    };
    eprintln!(
        "band mcp: serving MCP over Streamable HTTP at http://{host}:{}{ENDPOINT}{}",
        local.port(),
        if opts.token.is_some() {
            " (bearer token required)"
        } else {
            ""
        }
    );
    // Without a token, loopback callers are this user's and root's only (Linux): the kernel
    // says whose each client socket is.
    let own_only = opts.token.is_none();
    let token: Option<Arc<str>> = opts.token.map(Arc::from);
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot watch SIGTERM")?;
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let mut said = Said::default();
    loop {
        // A connection waits in the kernel's backlog while every slot is taken.
        let slot = tokio::select! {
            s = slots.clone().acquire_owned() => s.context("the connection slots")?,
            _ = tokio::signal::ctrl_c() => break,
            _ = sigterm.recv() => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors, say: said once a while, and a pause before the next
                    // try (the error comes back at once, and the loop spun at 93 % of a CPU).
                    said.say(&format!("band mcp: accept: {e}"));
                    tokio::time::sleep(ACCEPT_PAUSE).await;
                    continue;
                }
            },
            _ = tokio::signal::ctrl_c() => break,
            _ = sigterm.recv() => break,
        };
        if own_only && let Some(whose) = other_user(peer, local) {
            said.say(&format!(
                "band mcp: refused a connection from {peer}: it is {whose}, and without a token only this user's are served"
            ));
            continue;
        }
        let (transport, token) = (transport.clone(), token.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                handle(transport.clone(), token.clone(), req)
            });
            // A client that opens a connection and sends no whole request head in time is let
            // go: idle connections cannot hold every slot.
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
            drop(slot);
        });
    }
    cancel_all(&runs);
    ct.cancel();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_port_is_loopback_and_names_are_not_resolved() {
        assert_eq!(
            parse_addr("8808").unwrap(),
            "127.0.0.1:8808".parse().unwrap()
        );
        assert_eq!(
            parse_addr("localhost:9").unwrap(),
            "127.0.0.1:9".parse().unwrap()
        );
        assert_eq!(parse_addr("[::1]:9").unwrap(), "[::1]:9".parse().unwrap());
        assert!(parse_addr("example.com:80").is_err());
        assert!(parse_addr("0.0.0.0").is_err());
    }

    #[test]
    fn only_loopback_goes_without_a_token() {
        let lo: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:1".parse().unwrap();
        let v6: SocketAddr = "[::]:1".parse().unwrap();
        assert!(check_exposure(&lo, None).is_ok());
        assert!(check_exposure(&"[::1]:1".parse().unwrap(), None).is_ok());
        assert!(check_exposure(&any, None).is_err());
        assert!(check_exposure(&v6, None).is_err());
        assert!(check_exposure(&any, Some("t")).is_ok());
    }

    #[test]
    fn the_bearer_token_must_match_exactly() {
        let mut h = http::HeaderMap::new();
        assert!(!authorised(&h, "secret"));
        h.insert(
            http::header::AUTHORIZATION,
            http::HeaderValue::from_static("Bearer secret"),
        );
        assert!(authorised(&h, "secret"));
        assert!(!authorised(&h, "secre"));
        h.insert(
            http::header::AUTHORIZATION,
            http::HeaderValue::from_static("Basic secret"),
        );
        assert!(!authorised(&h, "secret"));
    }

    #[test]
    fn a_token_file_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("token");
        fs_err::write(&f, "abc123\n").unwrap();
        fs_err::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(read_token(Some(&f), None).is_err());
        fs_err::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            read_token(Some(&f), Some("env".into())).unwrap().as_deref(),
            Some("abc123")
        );
        assert_eq!(
            read_token(None, Some(" e ".into())).unwrap().as_deref(),
            Some("e")
        );
        assert!(read_token(None, Some("a b".into())).is_err());
        assert_eq!(read_token(None, None).unwrap(), None);
    }
}
