//! The egress proxy (`layers::net::proxy`) on its own, on loopback: an HTTPS server the test
//! makes (its own CA, from rcgen) stands for the API; curl stands for the run's program, trusting
//! the run's CA only. Over HTTP/2 and HTTP/1.1: the bound host gets the real token in its
//! header; a placeholder toward another host, in a query string or in a body is refused and
//! reported by the secret's name; a request outside the HTTP rules gets a 403 naming the rule
//! that would allow it; stopping the proxy ends it.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::process::Command;
use std::sync::{Arc, Mutex};

use band::policy::net::NetMatcher;
use band::proto::Denial;
use band_server::layers::net::proxy::bound::{Bound, Secret, placeholder};
use band_server::layers::net::proxy::refusals::{self, Refusals};
use band_server::layers::net::proxy::{Listener, Proxy, Upstream};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};

/// One request the test's server received: method, path and query, Authorization, body.
#[derive(Debug, Clone)]
struct Seen {
    target: String,
    auth: String,
    body: String,
    version: String,
}

/// The test's HTTPS server on `addr`, for `names`, with a CA of its own: its CA (PEM) and
/// what it received.
type Error = Box<dyn std::error::Error + Send + Sync>;

/// What the test's server received.
type Record = Arc<Mutex<Vec<Seen>>>;

fn server(addr: TcpListener, names: &[&str]) -> Result<(String, Record), Error> {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let mut ca_params = CertificateParams::default();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf_key = KeyPair::generate()?;
    let leaf = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())?
        .signed_by(&leaf_key, &issuer)?;
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into());
    let mut cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(vec![leaf.der().clone()], key)?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    addr.set_nonblocking(true)?;
    std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        rt.block_on(async move {
            let Ok(listener) = tokio::net::TcpListener::from_std(addr) else {
                return;
            };
            while let Ok((s, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                let record = record.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(s).await else {
                        return;
                    };
                    let svc = hyper::service::service_fn(
                        move |req: hyper::Request<hyper::body::Incoming>| {
                            let record = record.clone();
                            async move {
                                let version = format!("{:?}", req.version());
                                let target = req
                                    .uri()
                                    .path_and_query()
                                    .map(|p| p.to_string())
                                    .unwrap_or_default();
                                let auth = req
                                    .headers()
                                    .get("authorization")
                                    .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                                    .unwrap_or_default();
                                let body = match req.into_body().collect().await {
                                    Ok(b) => String::from_utf8_lossy(&b.to_bytes()).into_owned(),
                                    Err(e) => format!("<cut off: {e}>"),
                                };
                                if let Ok(mut r) = record.lock() {
                                    r.push(Seen {
                                        target,
                                        auth,
                                        body,
                                        version,
                                    });
                                }
                                Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(
                                    Bytes::from("upstream ok\n"),
                                )))
                            }
                        },
                    );
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tls), svc)
                        .await;
                });
            }
        });
    });
    Ok((ca_cert.pem(), seen))
}

struct Lab {
    dir: tempfile::TempDir,
    port: u16,
    token_ph: String,
    proxy: Proxy,
    seen: Arc<Mutex<Vec<Seen>>>,
}

const PROXY: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
const UPSTREAM: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);

fn lab() -> Result<Lab, Error> {
    // The proxy connects upstream on the port the run connected to: the server listens on the
    // same port number at another loopback address.
    let up = TcpListener::bind((UPSTREAM, 0))?;
    let port = up.local_addr()?.port();
    let front = TcpListener::bind((PROXY, port))?;
    let (ca, seen) = server(up, &["api.example.test", "other.example.test"])?;
    let allow = vec![
        format!("GET,POST https://api.example.test:{port}/repos/acme/**"),
        "other.example.test".to_string(),
    ];
    let net = NetMatcher::new(&allow, &[])?;
    let token_ph = placeholder(&[0x5a; 20]);
    let bound = Bound::new(vec![Secret::new(
        "API_TOKEN",
        token_ph.clone(),
        "real-token-value".into(),
        &["api.example.test".to_string()],
    )]);
    let roots = band_server::layers::net::proxy::roots(Some(ca.as_bytes()))?;
    let upstream = Upstream {
        resolve: Arc::new(|_: &str| vec![IpAddr::V4(UPSTREAM)]),
        roots,
    };
    let ca = Arc::new(band_server::layers::net::proxy::ca::Ca::new(
        "0123456789abcdef",
    )?);
    let proxy = Proxy::start(
        ca,
        net,
        bound,
        upstream,
        vec![Listener {
            socket: front,
            tls: true,
        }],
        false,
        Arc::new(Refusals::new(refusals::MAX_KEPT, None)),
    )?;
    let dir = tempfile::tempdir()?;
    fs_err::write(dir.path().join("run-ca.pem"), proxy.ca_pem())?;
    Ok(Lab {
        dir,
        port,
        token_ph,
        proxy,
        seen,
    })
}

impl Lab {
    /// curl as the run's program: trusting only the run's CA, every name at the proxy.
    fn curl(&self, http: &str, args: &[&str], url_path: &str, host: &str) -> (String, String) {
        let url = format!("https://{host}:{}{url_path}", self.port);
        let out = Command::new("curl")
            .args([
                "-sS",
                http,
                "--noproxy",
                "*",
                "-o",
                "-",
                "-w",
                "\n%{http_code}",
            ])
            .arg("--cacert")
            .arg(self.dir.path().join("run-ca.pem"))
            .arg("--resolve")
            .arg(format!("{host}:{}:{PROXY}", self.port))
            .args(args)
            .arg(&url)
            .output();
        let text = match out {
            Ok(out) => String::from_utf8_lossy(&out.stdout).into_owned(),
            Err(e) => format!("curl: {e}\n"),
        };
        let (body, code) = text.rsplit_once('\n').unwrap_or((&text, ""));
        (code.to_string(), body.trim_end().to_string())
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

#[test]
fn the_proxy_puts_a_bound_secret_only_into_headers_to_its_host_over_h2_and_http1() {
    if Command::new("curl").arg("--version").output().is_err() {
        panic!("curl is needed by this test (CONTRIBUTING lists it among the packages)");
    }
    let lab = lab().expect("the lab");
    let ph = lab.token_ph.clone();
    let bearer = format!("Authorization: Bearer {ph}");
    for http in ["--http2", "--http1.1"] {
        let before = lab.seen().len();
        // The bound host gets the real value in its header.
        let (code, body) = lab.curl(
            http,
            &["-H", &bearer],
            "/repos/acme/x/issues",
            "api.example.test",
        );
        assert_eq!(
            (code.as_str(), body.as_str()),
            ("200", "upstream ok"),
            "{http}"
        );
        let seen = lab.seen();
        assert_eq!(seen.len(), before + 1, "{http}");
        let got = &seen[before];
        assert_eq!(got.auth, "Bearer real-token-value", "{http}");
        assert_eq!(got.target, "/repos/acme/x/issues");
        assert_eq!(
            got.version,
            if http == "--http2" {
                "HTTP/2.0"
            } else {
                "HTTP/1.1"
            }
        );

        // To another allowed host: refused, the server never sees it.
        let (code, _) = lab.curl(http, &["-H", &bearer], "/x", "other.example.test");
        assert_eq!(code, "403", "{http}");
        // In a query string to the bound host: refused.
        let (code, _) = lab.curl(
            http,
            &[],
            &format!("/repos/acme/x?t={ph}"),
            "api.example.test",
        );
        assert_eq!(code, "403", "{http}");
        assert_eq!(
            lab.seen().len(),
            before + 1,
            "{http}: nothing of those reached the server"
        );

        // In a body to the bound host: cut off before the placeholder goes out.
        let big = format!("{}{ph}{}", "a".repeat(70_000), "b".repeat(1000));
        let (code, _) = lab.curl(
            http,
            &["-X", "POST", "--data-binary", &big],
            "/repos/acme/x/comments",
            "api.example.test",
        );
        assert_eq!(code, "403", "{http}");
        for s in lab.seen() {
            assert!(!s.body.contains(&ph) && !s.target.contains(&ph) && !s.auth.contains(&ph));
            assert!(!s.body.contains("real-token-value"));
        }

        // Outside the HTTP rules: 403, with the rule that would allow it.
        let (code, body) = lab.curl(http, &["-X", "DELETE"], "/repos/acme/x", "api.example.test");
        assert_eq!(code, "403", "{http}");
        assert_eq!(
            body,
            format!(
                "band: refused by the run's egress proxy: request DELETE https://api.example.test:{}/repos/acme/x",
                lab.port
            )
        );
    }
    let denials = lab.proxy.denials();
    let port = lab.port;
    let secret = |to: &str, place: &str| Denial::Secret {
        name: "API_TOKEN".into(),
        to: format!("{to}:{port}"),
        place: place.into(),
    };
    let http = Denial::Http {
        method: "DELETE".into(),
        host: "api.example.test".into(),
        port,
        https: true,
        path: "/repos/acme/x".into(),
        rule: None,
    };
    let once = vec![
        secret("other.example.test", "header authorization"),
        secret("api.example.test", "query string"),
        secret("api.example.test", "body"),
        http.clone(),
    ];
    assert_eq!(denials, [once.clone(), once].concat());
    assert_eq!(
        http.explain(),
        format!(
            "no allow.net rule matches; to allow it: allow.net \"DELETE https://api.example.test:{port}/repos/acme/x\""
        )
    );
}

#[test]
fn a_stopped_proxy_leaves_nothing_listening() {
    let mut lab = lab().expect("the lab");
    let (code, _) = lab.curl("--http2", &[], "/repos/acme/x", "api.example.test");
    assert_eq!(code, "200");
    lab.proxy.stop();
    assert!(lab.proxy.stopped());
    // Its port is free again: nothing of it listens.
    TcpListener::bind(SocketAddr::from((PROXY, lab.port))).expect("the proxy's port is free");
}
