//! `band-sandboxd`: agent-sandbox's per-pod daemon contract (sandboxd, KEP 539.2) served by band.
//!
//! ```text
//! client (SDK, agtsbx, band --target sandboxd://)
//!   ├─ gRPC :9090  process.v1.ProcessService  (process)  Start / Execute / WriteStdin /
//!   │                                                     SendSignal / ResizeTTY
//!   └─ HTTP :8080  /v1/files/{path}, /v1/health, /v1/metadata  (files)
//!        both: `authorization: Bearer <token>` (token)
//! each Start / Execute ──► one band run (run), served by the pod's warm band-server (warm) or a
//!                          `band-server run` child of its own: the pod's band, an ad-hoc command
//!                          as `band exec` makes it, its own uid, mount namespace, CLI gate,
//!                          seccomp, cgroup and egress table; the workspace files the band admits
//! a Start of `band-request` ─► the same, for the skill request on its stdin, under `band ∩ pod`
//!                          (`band run --target sandboxd://`; more than the pod allows: refused)
//! ```
//!
//! band-sandboxd is a client of band-server, as band is on the host: a run it starts is built,
//! run and torn down by the same code as every other run (a child of its warm server, or a
//! `band-server run` of its own), and nothing of it lives in this process. It is the only async
//! program of band-server's package (tokio, tonic, axum); band-server, band-jail and band-shim
//! link none of it.

pub mod files;
pub mod process;
pub mod run;
pub mod token;
pub mod warm;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use band::client::workspace::WorkspaceRoot;
use band::policy::CompiledPolicy;

pub use self::token::Token;
/// The protobuf of `process.v1`, band's (`proto/process/v1/process.proto`): the same code is the
/// `sandboxd://` target's client.
pub use band::client::sandboxd::pb;

/// The default ports of the contract.
pub const GRPC_PORT: u16 = 9090;
pub const HTTP_PORT: u16 = 8080;

/// What `band-sandboxd` was started with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The pod's band file (a ConfigMap's `BAND.md`).
    pub band: PathBuf,
    /// The folder the runs see at /workspace, and the files API serves.
    pub workspace: PathBuf,
    /// The file that holds the token (a mounted Secret).
    pub token_file: PathBuf,
    pub grpc: SocketAddr,
    pub http: SocketAddr,
    /// The `band-server` each run starts.
    pub server: PathBuf,
}

pub const USAGE: &str = "usage: band-sandboxd --band FILE --token-file FILE [--workspace DIR] [--grpc ADDR] [--http ADDR] [--server PATH]";

impl Options {
    /// Parse the arguments (after the program's name). `server` is the default band-server.
    pub fn parse(args: &[String], server: PathBuf) -> Result<Options, String> {
        let mut band = None;
        let mut token_file = None;
        let mut workspace = PathBuf::from("/workspace");
        let mut grpc = SocketAddr::from(([127, 0, 0, 1], GRPC_PORT));
        let mut http = SocketAddr::from(([127, 0, 0, 1], HTTP_PORT));
        let mut server = server;
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            let mut value = || {
                it.next()
                    .cloned()
                    .ok_or_else(|| format!("{flag} needs a value"))
            };
            let addr = |v: String| {
                v.parse::<SocketAddr>()
                    .map_err(|e| format!("{flag} {v}: {e} (an address such as 127.0.0.1:9090)"))
            };
            match flag.as_str() {
                "--band" => band = Some(PathBuf::from(value()?)),
                "--token-file" => token_file = Some(PathBuf::from(value()?)),
                "--workspace" => workspace = PathBuf::from(value()?),
                "--grpc" => grpc = addr(value()?)?,
                "--http" => http = addr(value()?)?,
                "--server" => server = PathBuf::from(value()?),
                other => return Err(format!("unknown argument `{other}`")),
            }
        }
        Ok(Options {
            band: band.ok_or("--band FILE is required: the pod's BAND.md")?,
            token_file: token_file
                .ok_or("--token-file FILE is required: the token clients must send")?,
            workspace,
            grpc,
            http,
            server,
        })
    }
}

/// What every request of the pod reads: its band, workspace and token.
#[derive(Debug)]
pub struct Pod {
    pub band: PathBuf,
    pub policy: CompiledPolicy,
    /// SHA-256 of the effective policy as JSON: the `policy_sha256` of every run's result.
    pub policy_sha256: String,
    pub workspace: WorkspaceRoot,
    pub token: Token,
    pub server: PathBuf,
    pub started: std::time::Instant,
    pub runs: run::Runs,
    /// The pod's band as a narrower layer (label `pod`) over every skill a client sends
    /// ([`run::skill`]): its allow lists are ceilings, its deny and insist join, its limits cap.
    pub ceiling: band::policy::site::SitePolicy,
    /// The largest request a client may send (band-server's, from its config).
    pub max_request: u64,
    /// The pod's warm band-server, which serves its runs when it listens.
    pub warm: warm::Warm,
}

impl Pod {
    /// Read and check everything before a port opens: a band with errors, a missing workspace
    /// or token is an error naming the file.
    pub fn load(opts: &Options) -> anyhow::Result<Pod> {
        let band =
            band::client::adhoc::check_band_file(&opts.band).map_err(|e| anyhow::anyhow!("{e}"))?;
        let (resolved, diags) = band::skill::resolve_band_file(&band);
        let errors: Vec<String> = diags
            .iter()
            .filter(|d| d.severity == band::diag::Severity::Error)
            .map(|d| format!("{}: {}", d.path.display(), d.message))
            .collect();
        let resolved = match resolved {
            Some(r) if errors.is_empty() => r,
            _ => anyhow::bail!(
                "the band {} has errors; nothing is served:\n  {}\nhint: `band lint` says where",
                band.display(),
                errors.join("\n  ")
            ),
        };
        let policy = CompiledPolicy::compile(&resolved.policy)
            .with_context(|| format!("{}: the policy does not compile", band.display()))?;
        let policy_sha256 = band::lock::sha256_hex(&serde_json::to_vec(&resolved.policy)?);
        let workspace = WorkspaceRoot::open(&opts.workspace, true, true)
            .map_err(|e| anyhow::anyhow!("workspace {}: {e}", opts.workspace.display()))?;
        let token = Token::read(&opts.token_file)?;
        let text = fs_err::read_to_string(&band)?;
        let ceiling = band::policy::site::SitePolicy::of_band(&band, &text, &resolved.policy);
        // The config each run's band-server reads: its size cap is the request's.
        let config = std::env::var_os(crate::config::CONFIG_ENV)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(crate::config::DEFAULT_CONFIG_PATH));
        let cfg = crate::config::load_config(&config, None)
            .map_err(|e| anyhow::anyhow!("{}: {e}", config.display()))?;
        let max_request = crate::run::max_request_bytes(&cfg);
        if !opts.server.is_file() {
            anyhow::bail!(
                "{}: no band-server there (--server names the one each run starts)",
                opts.server.display()
            );
        }
        Ok(Pod {
            band,
            policy,
            policy_sha256,
            workspace,
            token,
            server: opts.server.clone(),
            started: std::time::Instant::now(),
            runs: run::Runs::default(),
            ceiling,
            max_request,
            warm: warm::Warm::new(
                &opts.server,
                warm::Warm::wanted(std::env::var(band::proto::env::WARM).ok().as_deref()),
            ),
        })
    }

    /// Whether the band admits the workspace-relative `rel`: what a run would see there
    /// (`allow.read` or `allow.write`, no `deny` covering it).
    pub fn admits(&self, rel: &str) -> bool {
        self.policy.read.check(rel).is_allowed() || self.policy.write.check(rel).is_allowed()
    }
}

/// The band-server beside this program (the image and `cargo build` put them together).
pub fn default_server() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("band-server")))
        .unwrap_or_else(|| PathBuf::from("/usr/libexec/band/band-server"))
}

/// How long a stop waits for the runs under way to be torn down (Kubernetes' default grace
/// period, and `podman stop`'s, is 30 s; a run's teardown takes well under one).
const DRAIN: std::time::Duration = std::time::Duration::from_secs(20);

/// How long a stop waits for the warm server at least, after the drain (its spares' teardown
/// takes milliseconds each).
const WARM_STOP: std::time::Duration = std::time::Duration::from_secs(5);

/// Serve both ports until SIGTERM or SIGINT; then runs under way are cancelled (their band-server
/// children see their channel close and tear the runs down) and waited for, and only then do the
/// ports close (a Start's stream ends with its run's exit) and it returns.
pub async fn serve(pod: Arc<Pod>, grpc: SocketAddr, http: SocketAddr) -> anyhow::Result<()> {
    let grpc_listener = tokio::net::TcpListener::bind(grpc)
        .await
        .with_context(|| format!("gRPC port {grpc}"))?;
    let http_listener = tokio::net::TcpListener::bind(http)
        .await
        .with_context(|| format!("HTTP port {http}"))?;
    eprintln!(
        "band-sandboxd: serving {} (policy {}) on grpc {} and http {}",
        pod.band.display(),
        &pod.policy_sha256[..12.min(pod.policy_sha256.len())],
        grpc_listener.local_addr()?,
        http_listener.local_addr()?
    );
    // Listening once it has run its janitor pass; the runs before then are served as without it.
    pod.warm.start().await;
    let mut stop = tokio_util_stop();
    // The servers stop on `closed`, which turns once the runs are drained: a graceful shutdown
    // waits for open streams, and a Start's stream is open until its run ends.
    let (close, closed) = tokio::sync::watch::channel(false);
    let grpc_task = {
        let pod = pod.clone();
        let mut stop = closed.clone();
        tokio::spawn(async move {
            use tokio_stream::StreamExt as _;
            // TCP_NODELAY, which tonic sets only on connections it accepts itself: without it
            // the last frames of a stream (a process's exit, after its output) waited for the
            // client's delayed ACK, 40 ms on every run.
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(grpc_listener)
                .map(|conn| conn.inspect(no_delay));
            tonic::transport::Server::builder()
                .add_service(process::service(pod))
                .serve_with_incoming_shutdown(incoming, async move {
                    let _ = stop.changed().await;
                })
                .await
        })
    };
    let http_task = {
        let pod = pod.clone();
        let mut stop = closed.clone();
        tokio::spawn(async move {
            use axum::serve::ListenerExt as _;
            let http_listener = http_listener.tap_io(|c| no_delay(c));
            axum::serve(http_listener, files::router(pod))
                .with_graceful_shutdown(async move {
                    let _ = stop.changed().await;
                })
                .await
        })
    };
    let (mut grpc_task, mut http_task) = (grpc_task, http_task);
    let early = tokio::select! {
        _ = stop.changed() => None,
        g = &mut grpc_task => Some((Some(g), None)),
        h = &mut http_task => Some((None, Some(h))),
    };
    let until = tokio::time::Instant::now() + DRAIN;
    if !pod.runs.drain(DRAIN).await {
        eprintln!(
            "band-sandboxd: runs still under way after {} s; stopping anyway",
            DRAIN.as_secs()
        );
    }
    // Then the warm server, which exits once its spares have removed their sandboxes: this
    // daemon is the pod's init, and what is left of the pod when it exits is killed.
    if !pod
        .warm
        .stop(
            until
                .saturating_duration_since(tokio::time::Instant::now())
                .max(WARM_STOP),
        )
        .await
    {
        eprintln!("band-sandboxd: the warm band-server did not stop in time; stopping anyway");
    }
    let _ = close.send(true);
    let (g, h) = match early {
        None => tokio::join!(grpc_task, http_task),
        Some((Some(g), _)) => (g, http_task.await),
        Some((_, h)) => (grpc_task.await, h.unwrap_or_else(|| Ok(Ok(())))),
    };
    g?.context("gRPC server")?;
    h?.context("HTTP server")?;
    Ok(())
}

/// `TCP_NODELAY` on a connection either port accepted: a reply's last small frames go at once,
/// not after the client's delayed ACK.
fn no_delay(conn: &tokio::net::TcpStream) {
    if let Err(e) = conn.set_nodelay(true) {
        eprintln!("band-sandboxd: TCP_NODELAY: {e}");
    }
}

/// A watch that turns true on SIGTERM or SIGINT.
fn tokio_util_stop() -> tokio::sync::watch::Receiver<bool> {
    let (tx, rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("band-sandboxd: cannot watch SIGTERM: {e}");
                    return;
                }
            };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        let _ = tx.send(true);
    });
    rx
}

/// `band-sandboxd`'s main: parse, load, serve. The exit code.
pub fn main(args: &[String]) -> i32 {
    let opts = match Options::parse(args, default_server()) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("band-sandboxd: {e}\n{USAGE}");
            return i32::from(band::proto::exit::USAGE);
        }
    };
    let pod = match Pod::load(&opts) {
        Ok(p) => Arc::new(p),
        Err(e) => {
            eprintln!("band-sandboxd: {e:#}");
            return 1;
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("band-sandboxd: cannot start the runtime: {e}");
            return 1;
        }
    };
    match rt.block_on(serve(pod, opts.grpc, opts.http)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("band-sandboxd: {e:#}");
            1
        }
    }
}

/// The path a files API request names, relative to the workspace (its leading `/` dropped).
pub fn api_rel(path: &str) -> &str {
    path.trim_start_matches('/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_need_a_band_and_a_token_file() {
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let o = Options::parse(
            &s(&[
                "--band",
                "/b/BAND.md",
                "--token-file",
                "/t",
                "--grpc",
                "0.0.0.0:1",
            ]),
            "/srv".into(),
        )
        .unwrap();
        assert_eq!(o.grpc, "0.0.0.0:1".parse().unwrap());
        assert_eq!(o.http, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(o.workspace, PathBuf::from("/workspace"));
        assert!(
            Options::parse(&s(&["--token-file", "/t"]), "/srv".into())
                .unwrap_err()
                .contains("--band")
        );
        assert!(
            Options::parse(&s(&["--band", "/b"]), "/srv".into())
                .unwrap_err()
                .contains("--token-file")
        );
        assert!(Options::parse(&s(&["--grpc", "x"]), "/srv".into()).is_err());
    }
}
