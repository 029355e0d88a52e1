//! What layers hand each other and the run, defined below all of them: a layer reads another
//! layer's output only through a type of this module (or of [`crate::layer`]), never by naming
//! that layer.

use std::fs::File;
use std::net::IpAddr;
use std::os::fd::{OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use band::proto::CliCall;

/// The run's identity, leased before the plan (the only thing that exists before it): made by
/// the identity layer, read by the plan and every layer that names the run's user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub slot: u32,
    pub uid: u32,
    pub gid: u32,
    pub user: String,
}

/// What the CLI gate's report thread tells the run loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Report {
    Call(CliCall),
    Forged(String),
    /// An allowed call's program did not fit in the program cache (its first call copies it):
    /// `program` as the run's table names it, and the refusal with its hint. The run's record
    /// gets it as a `program_cache` limit event, once per program.
    CacheRefused {
        program: String,
        detail: String,
    },
}

/// Where verified calls go. Called before the shim is answered, so a call is always recorded
/// before the command it reports can run (or the run can end).
pub(crate) type OnReport = Arc<dyn Fn(Report) + Send + Sync>;

/// One question the run asked the network's DNS stub, for the result and `insist.net`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup {
    pub(crate) name: String,
    pub(crate) qtype: String,
    pub(crate) allowed: bool,
    /// Addresses handed to the script (and added to the run's sets).
    pub(crate) addrs: Vec<IpAddr>,
    /// Addresses upstream answered that the stub withheld (private, this host, denied).
    pub(crate) withheld: Vec<IpAddr>,
}

/// Called for every question the DNS stub answers, as it is answered.
pub(crate) type OnLookup = dyn Fn(&Lookup) + Send + Sync;

/// The system bundles a TLS library reads when no variable points it elsewhere, by family:
/// Debian and Ubuntu (OpenSSL's default file there, and GnuTLS's), RHEL and Fedora, Alpine and
/// the BSD-derived others. The host's bundle is the first of them the host has; in the sandbox,
/// each one its view has is the run's bundle (a bind over it, never a write to the host's).
pub const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
];

/// Where the run's Java trust store is in the sandbox (`layers::net::proxy::truststore`).
pub const JAVA_TRUSTSTORE: &str = "/etc/band-java-truststore.p12";

/// net (the egress proxy) → process and fs: what a run through the proxy sees differently: its
/// secrets (a bound one's placeholder in place of its value), the variables that point its TLS
/// clients at its CA bundle, and the bundle (the host's, then the run's CA).
#[derive(Clone, Default)]
pub struct RunEgress {
    pub(crate) secrets: std::collections::BTreeMap<String, String>,
    pub(crate) env: std::collections::BTreeMap<String, String>,
    pub(crate) ca_bundle: String,
    /// The run's Java trust store (PKCS#12), when the host has Java.
    pub(crate) java_truststore: Option<Vec<u8>>,
}

impl std::fmt::Debug for RunEgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunEgress")
            .field("env", &self.env)
            .finish_non_exhaustive()
    }
}

/// cgroup → spawn: the files that put bubblewrap in the run's cgroup.
pub(crate) struct JoinFiles(pub(crate) Vec<File>);

/// network → spawn: the run's own network namespace, for bubblewrap's parent to join (with
/// `allow.net`). The descriptor stays open in the network layer's handle, in the run's guard,
/// until after the spawn.
pub(crate) struct NetNamespace(pub(crate) RawFd);

/// What the spawn leaves to the run (bubblewrap itself is in the guard): the write end of the
/// secrets pipe and the jail's input to write into it, the read end of the jail's status pipe,
/// and when the script's clock started (the network's wait step sets it again after its wait).
pub(crate) struct Spawned {
    pub(crate) secrets_w: OwnedFd,
    pub(crate) jail_json: Vec<u8>,
    pub(crate) status_r: OwnedFd,
    pub(crate) run_start: Instant,
    /// `band learn`: band-server's end of the socket the jail sends its observing filter's
    /// listener on (the process layer's `bwrap::OBSERVE_FD`).
    pub(crate) observe: Option<UnixStream>,
}

/// The CLI gate's plan as the run directory sees it (made by the plan from the gate's part):
/// the run's exec folder, bound at `/band`; the links the sandbox's root holds for the programs;
/// and the programs' trees, bound at their host paths.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ExecView<'a> {
    pub(crate) root: &'a Path,
    /// (cache path, wrapped name) of each declared host program (the gate's `self_links`).
    pub(crate) self_links: &'a [(PathBuf, String)],
    /// (link, target): the installations around the programs' copies.
    pub(crate) links: &'a [(PathBuf, PathBuf)],
    /// The roots of the programs' trees.
    pub(crate) tree_roots: &'a [PathBuf],
    /// The host folders of the trees the run's uid cannot reach on the host (under a home of
    /// mode 0700): band-server binds each into the run directory (`trees/<n>`), whence
    /// bubblewrap binds it at its path.
    pub(crate) hidden_trees: &'a [PathBuf],
}

/// One cover of the run's `/proc` (the filesystem layer plans them, the process layer binds
/// them): a path of `/proc` and whether the host has a folder there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcMask {
    /// Relative to `/proc`: `cmdline`, `sys/kernel/random/boot_id`.
    pub path: String,
    pub dir: bool,
}

impl ProcMask {
    /// Where the run sees it.
    pub fn sandbox_path(&self) -> PathBuf {
        Path::new("/proc").join(&self.path)
    }
}
