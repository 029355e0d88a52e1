//! `band-server`: the root-side sandbox builder.
//!
//! ```text
//! band-server run       one request on stdin → events and one result on stdout, exit 0
//! band-server serve DIGEST [--owner UID] [--host] [--idle SECS] [--dir PATH] [--stop-with-parent]
//!                       the warm server: one run per connection on a unix socket (`warm`);
//!                       on SIGTERM it removes its socket and exits once its children have
//!                       ended
//! band-server janitor   clean up after servers that died mid-run
//! band-server version   {"version": …, "protocol": …}
//! ```

use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::Mutex;

use band::proto::{self, Layer, Message, RunResult};
use band_server::config::{self, ServerConfig};
use band_server::run::{self, EventSink};
use band_server::{janitor, sys};

fn load() -> Result<ServerConfig, band_server::error::SetupError> {
    let path = std::env::var_os(config::CONFIG_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(config::DEFAULT_CONFIG_PATH));
    config::load_config(
        &path,
        std::env::var_os(config::STATE_DIR_ENV).map(PathBuf::from),
    )
}

/// `scan_tables`: also look for leftover nftables tables (the `janitor` command, not every run).
/// `print`: the report goes to stderr (the `janitor` command); else to the state directory's
/// [`janitor::LOG_FILE`] (the pass before a run, or a warm server's: what it cleans is other
/// runs', not the output of the run that happens to come next).
fn janitor_pass(cfg: &ServerConfig, scan_tables: bool, print: bool) {
    if sys::euid() != 0 {
        return;
    }
    let r = janitor::run(&cfg.state_dir, &cfg.nft, scan_tables);
    if print {
        for line in r.lines() {
            band_server::say!("{line}");
        }
    } else if let Err(e) = janitor::log(&cfg.state_dir, &r) {
        // The error names the log's path.
        band_server::say!("band-server: janitor: {e}");
    }
}

fn cmd_run() -> i32 {
    // band-server holds secrets in memory: no core dumps, and no ptrace or /proc/<pid>/mem access
    // by other processes of the same uid.
    let _ = sys::disable_core_dumps();
    let _ = sys::set_not_dumpable();
    let sink = EventSink::new(Box::new(run::ClosingStdout(std::io::stdout())));
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let cfg = match load() {
            Ok(c) => c,
            Err(e) => {
                let r = RunResult::setup_failed("", e.layer, e.message, e.hint);
                sink.send(&Message::Result(Box::new(r)));
                return;
            }
        };
        // The janitor's pass runs beside the host's facts, the request's read and its checks
        // (all on this thread); the run waits for it before it leases a uid (the pass frees the
        // leases of dead runs, once their processes are killed), and band-server for it before
        // it exits.
        std::thread::scope(|s| {
            let janitor = Mutex::new(Some(
                std::thread::Builder::new()
                    .name("janitor".into())
                    .spawn_scoped(s, || janitor_pass(&cfg, false, false)),
            ));
            let wait = || {
                let pending = janitor.lock().map(|mut j| j.take()).unwrap_or_default();
                match pending {
                    Some(Ok(handle)) => {
                        let _ = handle.join();
                    }
                    // No thread: the pass runs here.
                    Some(Err(_)) => janitor_pass(&cfg, false, false),
                    None => {}
                }
            };
            // While band still prepares the request (it starts band-server first), and while the
            // request is read and checked.
            band_server::facts::Prefetched::start(&cfg);
            run::serve(
                Box::new(std::io::BufReader::new(std::io::stdin())),
                &cfg,
                &sink,
                &wait,
            );
            wait();
        });
    }));
    if let Err(panic) = outcome {
        let msg = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "unknown panic".into());
        let r = RunResult::setup_failed("", Layer::Process, format!("internal error: {msg}"), None);
        sink.send(&Message::Result(Box::new(r)));
    }
    sink.finish();
    0
}

fn cmd_serve(args: &[String]) -> i32 {
    let opts = match band_server::warm::parse_args(args) {
        Ok(o) => o,
        Err(e) => {
            band_server::say!("band-server serve: {e}");
            return i32::from(proto::exit::USAGE);
        }
    };
    if sys::euid() != 0 {
        band_server::say!("band-server serve: must run as root");
        return 1;
    }
    let cfg = match load() {
        Ok(c) => c,
        Err(e) => {
            band_server::say!("band-server serve: {e}");
            return 1;
        }
    };
    // As `run`: secrets pass through this process's children.
    let _ = sys::disable_core_dumps();
    let _ = sys::set_not_dumpable();
    // Detached from the SSH session (or the band) that started it.
    let _ = rustix::process::setsid();
    if opts.host {
        // What it says goes to its log: band started it and does not read its stderr.
        if let Err(e) = log_to(opts.dir()) {
            band_server::say!("band-server serve: {e}");
            return 1;
        }
    }
    band_server::warm::serve(opts.dir(), &opts, &cfg, &|| {
        janitor_pass(&cfg, false, false)
    })
}

/// Standard error to `dir`'s [`warm::LOG_FILE`](band_server::warm::LOG_FILE) (0600, appended).
fn log_to(dir: &std::path::Path) -> anyhow::Result<()> {
    use anyhow::Context;
    use fs_err::os::unix::fs::OpenOptionsExt;
    fs_err::create_dir_all(dir)?;
    let path = dir.join(band_server::warm::LOG_FILE);
    let log = fs_err::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&path)?;
    rustix::stdio::dup2_stderr(log.file()).with_context(|| format!("{}: dup2", path.display()))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.first().map(String::as_str) {
        Some("run") => cmd_run(),
        Some("serve") => cmd_serve(&args[1..]),
        Some("janitor") => match load() {
            Ok(cfg) => {
                if sys::euid() != 0 {
                    band_server::say!("band-server: janitor: must run as root");
                    1
                } else {
                    janitor_pass(&cfg, true, true);
                    // The library trees' list of programs, so that no run waits for its scan.
                    band_server::layers::fs::execmask::prepare(
                        &cfg.state_dir,
                        std::path::Path::new(band_server::layers::fs::execmask::HOST_CACHE),
                    );
                    0
                }
            }
            Err(e) => {
                band_server::say!("band-server: {e}");
                1
            }
        },
        // The library trees' executables, rescanned in the background (`execmask`).
        Some("rescan-mask") if sys::euid() == 0 => match args.get(1) {
            Some(state) => {
                band_server::layers::fs::execmask::rescan(
                    std::path::Path::new(state),
                    std::path::Path::new(band_server::layers::fs::execmask::HOST_CACHE),
                );
                0
            }
            None => i32::from(proto::exit::USAGE),
        },
        Some("version") => {
            let v = serde_json::json!({"version": env!("CARGO_PKG_VERSION"), "protocol": proto::PROTOCOL_VERSION});
            let _ = writeln!(std::io::stdout(), "{v}");
            0
        }
        _ => {
            band_server::say!(
                "usage: band-server run | serve DIGEST [--owner UID] | janitor | version"
            );
            i32::from(proto::exit::USAGE)
        }
    };
    std::process::exit(code);
}
