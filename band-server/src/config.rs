//! The server configuration (`/etc/band/server.toml`) and the effective limits of a run.
//!
//! The platform sets a default and a cap for every limit. A band may lower a limit below the cap
//! but never raise it: `effective = min(band value or default, cap)` ([`resolve_limits`]).
//!
//! ```toml
//! # /etc/band/server.toml (every key optional)
//! state_dir = "/run/band"
//! bwrap = "/usr/bin/bwrap"
//! mask_lib_executables = true   # hide programs inside /usr/lib, /usr/libexec (see execmask)
//! nft = "/usr/sbin/nft"          # the network layer's nftables front end
//! slirp4netns = "/usr/bin/slirp4netns"  # relays a networked run's own namespace to the host
//! dns_upstream = ["192.0.2.53:53"]  # resolvers the DNS stub asks (default: /etc/resolv.conf)
//! proxy_extra_ca = "/etc/band/upstream-ca.pem"  # the egress proxy trusts it too, upstream
//! proxy_ports = [443, 80]          # where the egress proxy listens in a run's namespace: TLS, HTTP
//! require_ipc_scope = false      # refuse networked runs without Landlock abstract-socket scoping
//! bin_path = ["/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"]  # where declared commands are found
//! site_policy = "/etc/band/site.md"  # the site policy every request passes (docs/site-policy.md)
//!
//! [defaults]
//! memory = "512m"
//! runtime = "60s"
//!
//! [caps]
//! memory = "4g"
//! pids = 4096
//! cpus = 2
//!
//! [program_cache]      # the skills' own programs in the shared program cache (execcache)
//! per_skill = "128m"   # one user's one skill
//! per_owner = "256m"   # one user's skills together (at most 768m)
//!
//! [deps]               # the Python and Node environments of scripts that declare packages (`deps`)
//! dir = "/var/cache/band/envs"                  # where they are built and kept
//! index_url = "https://pypi.org/simple"         # the package index pip resolves and installs from
//! find_links = ["/srv/wheels"]                  # folders (or URLs) of wheels pip also looks in
//! no_index = false                              # only find_links, no index
//! npm_registry = "https://registry.npmjs.org/"  # where npm fetches every package of a lock
//! ```
//!
//! Sizes accept a number of bytes or `k`/`m`/`g` suffixes, durations a number of milliseconds or
//! `ms`/`s`/`m`/`h` suffixes (as in BAND.md, see `band::units`).

use std::path::{Path, PathBuf};

use band::policy::Limits;
use band::proto::Layer;
use serde::Deserialize;

use crate::error::{SetupError, SetupResult};

/// Where the config is read from unless `BAND_SERVER_CONFIG` names another file.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/band/server.toml";
/// Environment variable overriding [`DEFAULT_CONFIG_PATH`].
pub const CONFIG_ENV: &str = "BAND_SERVER_CONFIG";
/// Environment variable overriding the state directory (tests).
pub const STATE_DIR_ENV: &str = "BAND_SERVER_STATE_DIR";
pub(crate) const DEFAULT_STATE_DIR: &str = "/run/band";
/// Where host binaries are looked up, in order, unless the server config's `bin_path` says
/// otherwise.
pub(crate) const BIN_SEARCH: &[&str] =
    &["/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"];
pub(crate) const DEFAULT_BWRAP: &str = "/usr/bin/bwrap";
pub const DEFAULT_NFT: &str = "/usr/sbin/nft";
/// The relay between a networked run's namespace and the host (`layers::net::netns`).
pub const DEFAULT_SLIRP4NETNS: &str = "/usr/bin/slirp4netns";

/// The cgroup CPU period; `maxCpus` becomes a quota of `cpus × period`.
pub(crate) const CPU_PERIOD_US: u64 = 100_000;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// One value per limit, all present (after defaults are filled in).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LimitValues {
    pub(crate) memory_bytes: u64,
    pub(crate) pids: u64,
    pub(crate) cpus: f64,
    pub(crate) runtime_ms: u64,
    pub(crate) disk_bytes: u64,
    pub(crate) log_bytes: u64,
    pub(crate) output_bytes: u64,
    pub(crate) input_bytes: u64,
}

impl LimitValues {
    pub(crate) const PLATFORM_DEFAULTS: LimitValues = LimitValues {
        memory_bytes: 512 * MIB,
        pids: 128,
        cpus: 1.0,
        runtime_ms: 60_000,
        disk_bytes: 256 * MIB,
        log_bytes: 10 * MIB,
        output_bytes: 10 * MIB,
        input_bytes: 10 * MIB,
    };

    pub(crate) const PLATFORM_CAPS: LimitValues = LimitValues {
        memory_bytes: 4 * GIB,
        pids: 4096,
        cpus: 2.0,
        runtime_ms: 3_600_000,
        disk_bytes: 4 * GIB,
        log_bytes: 10 * MIB,
        output_bytes: 10 * MIB,
        input_bytes: 10 * MIB,
    };
}

/// The parsed server configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    pub state_dir: PathBuf,
    pub bwrap: PathBuf,
    /// Hide the executables inside `/usr/lib`, `/usr/lib64`, `/usr/libexec` (`execmask`).
    pub mask_lib_executables: bool,
    /// nftables, for runs with `allow.net`.
    pub nft: PathBuf,
    /// slirp4netns, for runs with `allow.net`: relays the run's own network namespace.
    pub slirp4netns: PathBuf,
    /// Resolvers the per-run DNS stub asks; empty: the host's `/etc/resolv.conf`.
    pub dns_upstream: Vec<std::net::SocketAddr>,
    /// A PEM file of certificates the egress proxy trusts upstream besides the host's trust
    /// store (`layers::net::proxy`).
    pub proxy_extra_ca: Option<PathBuf>,
    /// The ports the egress proxy listens on in a run's namespace, for TLS and for plain HTTP
    /// (default 443 and 80): the ports a proxied host is reached on.
    pub proxy_ports: [u16; 2],
    /// Refuse a run with `allow.net` when Landlock cannot scope abstract unix sockets (before
    /// Linux 6.12). Off by default: such a run has a network namespace of its own, hence
    /// abstract socket names of its own (`layers::net::netns`); the scope, when the kernel has
    /// it, is applied anyway, as for every run.
    pub require_ipc_scope: bool,
    /// Where declared commands are looked up, in order (default [`BIN_SEARCH`]).
    pub bin_path: Vec<PathBuf>,
    pub defaults: LimitValues,
    pub caps: LimitValues,
    /// The bounds of the program cache's bytes: per user and skill, per user (`[program_cache]`).
    pub program_cache: CacheBounds,
    /// Where scripts' Python environments are built, and the package index they come from
    /// (`[deps]`).
    pub deps: DepsConfig,
    /// The site policy file (`site_policy`; default `/etc/band/site.md`).
    pub site_policy: PathBuf,
    /// The site policy read from it by [`load_config`]; `None`: no file there, nothing narrowed.
    pub site: Option<band::policy::site::SitePolicy>,
}

/// Where to find packages when building a script's environment, and where to keep it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DepsConfig {
    /// The environments, one folder per resolved lock (outside `/tmp` and the state directory,
    /// which runs never see).
    pub dir: PathBuf,
    /// pip's `--index-url`; `None`: pip's default (PyPI).
    pub index_url: Option<String>,
    /// pip's `--find-links`, each.
    pub find_links: Vec<String>,
    /// pip's `--no-index`: only `find_links`.
    pub no_index: bool,
    /// npm's `--registry`: every package of a `package-lock.json` is fetched from it, whatever
    /// host its `resolved` names (`--replace-registry-host=always`).
    pub npm_registry: String,
    /// Not of the config file: the run's Node environment, set for one run by
    /// `deps::with_env` (`facts` binds it read-only as a runtime tree).
    pub node_modules: Option<NodeModules>,
}

/// A run's `node_modules`: the environment's on the host, and where the sandbox has it (beside
/// the script's `package.json` in `/skill`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeModules {
    pub host: PathBuf,
    pub at: PathBuf,
}

/// npm's registry unless `[deps] npm_registry` says otherwise.
pub const DEFAULT_NPM_REGISTRY: &str = "https://registry.npmjs.org/";

/// Where environments are kept unless `[deps] dir` says otherwise.
pub const DEFAULT_DEPS_DIR: &str = "/var/cache/band/envs";

impl Default for DepsConfig {
    fn default() -> Self {
        DepsConfig {
            dir: PathBuf::from(DEFAULT_DEPS_DIR),
            index_url: None,
            find_links: Vec::new(),
            no_index: false,
            npm_registry: DEFAULT_NPM_REGISTRY.into(),
            node_modules: None,
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            state_dir: PathBuf::from(DEFAULT_STATE_DIR),
            bwrap: PathBuf::from(DEFAULT_BWRAP),
            mask_lib_executables: true,
            nft: PathBuf::from(DEFAULT_NFT),
            slirp4netns: PathBuf::from(DEFAULT_SLIRP4NETNS),
            dns_upstream: Vec::new(),
            proxy_extra_ca: None,
            proxy_ports: [443, 80],
            require_ipc_scope: false,
            bin_path: BIN_SEARCH.iter().map(PathBuf::from).collect(),
            defaults: LimitValues::PLATFORM_DEFAULTS,
            caps: LimitValues::PLATFORM_CAPS,
            program_cache: CacheBounds::default(),
            deps: DepsConfig::default(),
            site_policy: PathBuf::from(band::policy::site::DEFAULT_PATH),
            site: None,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Num {
    Int(u64),
    Float(f64),
    Text(String),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    memory: Option<Num>,
    pids: Option<Num>,
    cpus: Option<Num>,
    runtime: Option<Num>,
    disk: Option<Num>,
    log: Option<Num>,
    output: Option<Num>,
    input: Option<Num>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    state_dir: Option<PathBuf>,
    bwrap: Option<PathBuf>,
    mask_lib_executables: Option<bool>,
    nft: Option<PathBuf>,
    slirp4netns: Option<PathBuf>,
    #[serde(default)]
    dns_upstream: Vec<String>,
    proxy_extra_ca: Option<PathBuf>,
    proxy_ports: Option<[u16; 2]>,
    require_ipc_scope: Option<bool>,
    bin_path: Option<Vec<PathBuf>>,
    #[serde(default)]
    defaults: RawLimits,
    #[serde(default)]
    caps: RawLimits,
    #[serde(default)]
    program_cache: RawProgramCache,
    #[serde(default)]
    deps: RawDeps,
    site_policy: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDeps {
    dir: Option<PathBuf>,
    index_url: Option<String>,
    #[serde(default)]
    find_links: Vec<String>,
    no_index: Option<bool>,
    npm_registry: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProgramCache {
    per_skill: Option<Num>,
    per_owner: Option<Num>,
}

/// A server config that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ConfigError {
    /// Not TOML, or an unknown key (the parser's message).
    #[error("{0}")]
    Toml(String),
    #[error("`{key}` must be a whole number of bytes or a size like \"512m\"")]
    NotBytes { key: String },
    #[error("`{key}` must be milliseconds or a duration like \"60s\"")]
    NotDuration { key: String },
    #[error("`{key}` must be a whole number")]
    NotCount { key: String },
    #[error("`{key}` must be a number of CPUs")]
    NotCpus { key: String },
    #[error("`{key}`: {error}")]
    Unit {
        key: String,
        error: band::units::UnitError,
    },
    #[error("`dns_upstream`: `{0}` is not an address like 192.0.2.53 or [2001:db8::53]:53")]
    Resolver(String),
    #[error(
        "`program_cache`: per_skill ({per_skill}) must be at least 1 byte and at most per_owner ({per_owner}), which must be at most {most}"
    )]
    CacheBounds {
        per_skill: u64,
        per_owner: u64,
        most: u64,
    },
}

/// `[program_cache]` over the defaults: `0 < per_skill <= per_owner <= charged`.
fn cache_bounds(raw: &RawProgramCache, base: CacheBounds) -> Result<CacheBounds, ConfigError> {
    let mut out = base;
    if let Some(v) = &raw.per_skill {
        out.per_skill = size("program_cache.per_skill", v)?;
    }
    if let Some(v) = &raw.per_owner {
        out.per_owner = size("program_cache.per_owner", v)?;
    }
    if out.per_skill == 0 || out.per_skill > out.per_owner || out.per_owner > out.charged {
        return Err(ConfigError::CacheBounds {
            per_skill: out.per_skill,
            per_owner: out.per_owner,
            most: out.charged,
        });
    }
    Ok(out)
}

fn size(key: &str, v: &Num) -> Result<u64, ConfigError> {
    match v {
        Num::Int(n) => Ok(*n),
        Num::Float(_) => Err(ConfigError::NotBytes { key: key.into() }),
        Num::Text(t) => band::units::parse_bytes(t).map_err(|error| ConfigError::Unit {
            key: key.into(),
            error,
        }),
    }
}

fn duration(key: &str, v: &Num) -> Result<u64, ConfigError> {
    match v {
        Num::Int(n) => Ok(*n),
        Num::Float(_) => Err(ConfigError::NotDuration { key: key.into() }),
        Num::Text(t) => band::units::parse_duration_ms(t).map_err(|error| ConfigError::Unit {
            key: key.into(),
            error,
        }),
    }
}

fn count(key: &str, v: &Num) -> Result<u64, ConfigError> {
    match v {
        Num::Int(n) => Ok(*n),
        _ => Err(ConfigError::NotCount { key: key.into() }),
    }
}

fn cpus(key: &str, v: &Num) -> Result<f64, ConfigError> {
    match v {
        Num::Int(n) => Ok(*n as f64),
        Num::Float(f) => Ok(*f),
        Num::Text(t) => t
            .trim()
            .parse::<f64>()
            .map_err(|_| ConfigError::NotCpus { key: key.into() }),
    }
}

fn apply(raw: &RawLimits, base: LimitValues, table: &str) -> Result<LimitValues, ConfigError> {
    let k = |name: &str| format!("{table}.{name}");
    let mut out = base;
    if let Some(v) = &raw.memory {
        out.memory_bytes = size(&k("memory"), v)?;
    }
    if let Some(v) = &raw.pids {
        out.pids = count(&k("pids"), v)?;
    }
    if let Some(v) = &raw.cpus {
        out.cpus = cpus(&k("cpus"), v)?;
    }
    if let Some(v) = &raw.runtime {
        out.runtime_ms = duration(&k("runtime"), v)?;
    }
    if let Some(v) = &raw.disk {
        out.disk_bytes = size(&k("disk"), v)?;
    }
    if let Some(v) = &raw.log {
        out.log_bytes = size(&k("log"), v)?;
    }
    if let Some(v) = &raw.output {
        out.output_bytes = size(&k("output"), v)?;
    }
    if let Some(v) = &raw.input {
        out.input_bytes = size(&k("input"), v)?;
    }
    Ok(out)
}

/// Parse the text of a config file. Unknown keys are errors (a typo must not silently keep a
/// default).
pub(crate) fn parse_config(text: &str) -> Result<ServerConfig, ConfigError> {
    let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Toml(e.to_string()))?;
    let d = ServerConfig::default();
    let caps = apply(&raw.caps, d.caps, "caps")?;
    let defaults = apply(&raw.defaults, d.defaults, "defaults")?;
    Ok(ServerConfig {
        state_dir: raw.state_dir.unwrap_or(d.state_dir),
        bwrap: raw.bwrap.unwrap_or(d.bwrap),
        mask_lib_executables: raw.mask_lib_executables.unwrap_or(d.mask_lib_executables),
        nft: raw.nft.unwrap_or(d.nft),
        slirp4netns: raw.slirp4netns.unwrap_or(d.slirp4netns),
        require_ipc_scope: raw.require_ipc_scope.unwrap_or(d.require_ipc_scope),
        proxy_extra_ca: raw.proxy_extra_ca,
        proxy_ports: raw.proxy_ports.unwrap_or(d.proxy_ports),
        bin_path: raw.bin_path.unwrap_or(d.bin_path),
        dns_upstream: raw
            .dns_upstream
            .iter()
            .map(|s| parse_resolver(s).ok_or_else(|| ConfigError::Resolver(s.clone())))
            .collect::<Result<_, _>>()?,
        defaults,
        caps,
        program_cache: cache_bounds(&raw.program_cache, d.program_cache)?,
        deps: DepsConfig {
            dir: raw.deps.dir.unwrap_or(d.deps.dir),
            index_url: raw.deps.index_url,
            find_links: raw.deps.find_links,
            no_index: raw.deps.no_index.unwrap_or(d.deps.no_index),
            npm_registry: raw.deps.npm_registry.unwrap_or(d.deps.npm_registry),
            node_modules: None,
        },
        site_policy: raw.site_policy.unwrap_or(d.site_policy),
        site: None,
    })
}

/// Read the config from `path`; a missing file means the defaults. `state_dir_override` (from
/// `BAND_SERVER_STATE_DIR`) wins over the file.
pub fn load_config(path: &Path, state_dir_override: Option<PathBuf>) -> SetupResult<ServerConfig> {
    let mut cfg = match fs_err::read_to_string(path) {
        Ok(text) => parse_config(&text).map_err(|e| {
            SetupError::new(
                Layer::Limits,
                format!("invalid server config {}: {e}", path.display()),
            )
            .with_hint("fix the file or remove it to use the built-in defaults")
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => ServerConfig::default(),
        Err(e) => {
            return Err(SetupError::new(
                Layer::Limits,
                format!("cannot read server config {}: {e}", path.display()),
            ));
        }
    };
    if let Some(dir) = state_dir_override {
        cfg.state_dir = dir;
    }
    cfg.site = band::policy::site::load_site(&cfg.site_policy).map_err(|e| {
        let err = SetupError::new(Layer::new("site"), format!("invalid site policy: {e}"));
        match e.hint {
            Some(h) => err.with_hint(h),
            None => err.with_hint("fix the site policy: until then band-server runs nothing"),
        }
    })?;
    Ok(cfg)
}

/// The limits one run gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EffectiveLimits {
    pub(crate) memory_bytes: u64,
    pub(crate) pids: u64,
    pub(crate) cpu_quota_us: u64,
    pub(crate) cpu_period_us: u64,
    pub(crate) runtime_ms: u64,
    pub(crate) disk_bytes: u64,
    pub(crate) log_bytes: u64,
    pub(crate) output_bytes: u64,
    pub(crate) input_bytes: u64,
}

/// `min(band value or default, cap)` for every limit. A zero, negative or non-finite band value
/// is refused (it cannot mean "no limit", and rounding it up would be a silent change).
pub(crate) fn resolve_limits(band: &Limits, cfg: &ServerConfig) -> SetupResult<EffectiveLimits> {
    fn pick(name: &str, band: Option<u64>, default: u64, cap: u64) -> SetupResult<u64> {
        if band == Some(0) {
            return Err(SetupError::new(
                Layer::Limits,
                format!("{name} must be greater than 0"),
            ));
        }
        Ok(band.unwrap_or(default).min(cap))
    }
    let (d, c) = (&cfg.defaults, &cfg.caps);
    let cpus = match band.max_cpus {
        Some(x) if !x.is_finite() || x <= 0.0 => {
            return Err(SetupError::new(
                Layer::Limits,
                format!("maxCpus must be a positive number, not {x}"),
            ));
        }
        Some(x) => x,
        None => d.cpus,
    };
    let cpus = cpus.min(c.cpus);
    // At least 1 % of one CPU (the kernel's minimum quota is 1 ms).
    let quota = ((cpus * CPU_PERIOD_US as f64).round() as u64).max(1_000);
    Ok(EffectiveLimits {
        memory_bytes: pick(
            "maxMemoryBytes",
            band.max_memory_bytes,
            d.memory_bytes,
            c.memory_bytes,
        )?,
        pids: pick("maxPids", band.max_pids, d.pids, c.pids)?,
        cpu_quota_us: quota,
        cpu_period_us: CPU_PERIOD_US,
        runtime_ms: pick(
            "maxRuntimeMs",
            band.max_runtime_ms,
            d.runtime_ms,
            c.runtime_ms,
        )?,
        disk_bytes: pick(
            "maxDiskBytes",
            band.max_disk_bytes,
            d.disk_bytes,
            c.disk_bytes,
        )?,
        log_bytes: pick("maxLogBytes", band.max_log_bytes, d.log_bytes, c.log_bytes)?,
        output_bytes: pick(
            "maxOutputBytes",
            band.max_output_bytes,
            d.output_bytes,
            c.output_bytes,
        )?,
        input_bytes: pick(
            "maxInputBytes",
            band.max_input_bytes,
            d.input_bytes,
            c.input_bytes,
        )?,
    })
}

/// The bounds of the program cache's bytes (server config `[program_cache]`), read by
/// [`crate::layers::cli::execcache`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheBounds {
    /// One owner's one skill (`per_skill`).
    pub(crate) per_skill: u64,
    /// One owner, all skills (`per_owner`).
    pub(crate) per_owner: u64,
    /// All charged entries together: the rest ([`CacheBounds::total`] minus this) stays for the
    /// host's programs, which are charged to nobody.
    pub(crate) charged: u64,
    /// Every entry: a little under the tmpfs ([`crate::layers::cli::execcache::CACHE_TMPFS_SIZE`]; the run folders and the
    /// directories take some).
    pub(crate) total: u64,
}

impl Default for CacheBounds {
    fn default() -> Self {
        CacheBounds {
            per_skill: 128 << 20,
            per_owner: 256 << 20,
            charged: 768 << 20,
            total: 1000 << 20,
        }
    }
}

/// One resolver address as written in the server config: `ip` or `ip:port` / `[ip6]:port`.
pub(crate) fn parse_resolver(s: &str) -> Option<std::net::SocketAddr> {
    let s = s.trim();
    s.parse::<std::net::SocketAddr>().ok().or_else(|| {
        s.parse::<std::net::IpAddr>()
            .ok()
            .map(|ip| std::net::SocketAddr::new(ip, 53))
    })
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn defaults() -> EffectiveLimits {
        EffectiveLimits {
            memory_bytes: 512 * MIB,
            pids: 128,
            cpu_quota_us: 100_000,
            cpu_period_us: 100_000,
            runtime_ms: 60_000,
            disk_bytes: 256 * MIB,
            log_bytes: 10 * MIB,
            output_bytes: 10 * MIB,
            input_bytes: 10 * MIB,
        }
    }

    #[test]
    fn no_band_limits_gives_the_platform_defaults() {
        let got = resolve_limits(&Limits::default(), &ServerConfig::default());
        assert_eq!(got, Ok(defaults()));
    }

    #[test]
    fn a_band_can_lower_but_never_raise() {
        let band = Limits {
            max_memory_bytes: Some(64 * MIB),
            max_pids: Some(100_000),
            max_cpus: Some(8.0),
            max_runtime_ms: Some(2_000),
            max_disk_bytes: Some(16 * GIB),
            max_log_bytes: Some(1024),
            max_output_bytes: Some(20 * MIB),
            ..Limits::default()
        };
        let got = resolve_limits(&band, &ServerConfig::default());
        let want = EffectiveLimits {
            memory_bytes: 64 * MIB,
            pids: 4096,
            cpu_quota_us: 200_000,
            cpu_period_us: 100_000,
            runtime_ms: 2_000,
            disk_bytes: 4 * GIB,
            log_bytes: 1024,
            output_bytes: 10 * MIB,
            input_bytes: 10 * MIB,
        };
        assert_eq!(got, Ok(want));
    }

    #[test]
    fn a_band_above_the_default_but_below_the_cap_gets_its_value() {
        let band = Limits {
            max_memory_bytes: Some(GIB),
            max_cpus: Some(1.5),
            ..Limits::default()
        };
        let got = resolve_limits(&band, &ServerConfig::default())
            .map(|l| (l.memory_bytes, l.cpu_quota_us));
        assert_eq!(got, Ok((GIB, 150_000)));
    }

    #[test]
    fn zero_and_nonsense_values_are_refused() {
        for band in [
            Limits {
                max_memory_bytes: Some(0),
                ..Limits::default()
            },
            Limits {
                max_pids: Some(0),
                ..Limits::default()
            },
            Limits {
                max_cpus: Some(0.0),
                ..Limits::default()
            },
            Limits {
                max_cpus: Some(f64::NAN),
                ..Limits::default()
            },
            Limits {
                max_cpus: Some(-1.0),
                ..Limits::default()
            },
        ] {
            let got = resolve_limits(&band, &ServerConfig::default());
            assert!(
                matches!(&got, Err(e) if e.layer == Layer::Limits),
                "{band:?} gave {got:?}"
            );
        }
    }

    #[test]
    fn tiny_cpu_share_is_raised_to_the_kernel_minimum() {
        let band = Limits {
            max_cpus: Some(0.001),
            ..Limits::default()
        };
        assert_eq!(
            resolve_limits(&band, &ServerConfig::default()).map(|l| l.cpu_quota_us),
            Ok(1_000)
        );
    }

    #[test]
    fn config_file_sets_defaults_and_caps() {
        let cfg = parse_config(
            r#"
            state_dir = "/var/lib/band"
            [defaults]
            memory = "256m"
            runtime = "30s"
            [caps]
            memory = 1073741824
            pids = 512
            cpus = 1.5
            "#,
        );
        let cfg = match cfg {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(cfg.state_dir, PathBuf::from("/var/lib/band"));
        assert_eq!(cfg.defaults.memory_bytes, 256 * MIB);
        assert_eq!(cfg.defaults.runtime_ms, 30_000);
        assert_eq!(cfg.caps.memory_bytes, GIB);
        assert_eq!(cfg.caps.pids, 512);
        assert_eq!(cfg.caps.cpus, 1.5);
        assert_eq!(cfg.caps.runtime_ms, 3_600_000);
        let band = Limits {
            max_memory_bytes: Some(2 * GIB),
            ..Limits::default()
        };
        assert_eq!(resolve_limits(&band, &cfg).map(|l| l.memory_bytes), Ok(GIB));
    }

    #[test]
    fn program_cache_bounds_are_read_and_checked() {
        let cfg = parse_config("[program_cache]\nper_skill = \"8m\"\nper_owner = \"12m\"\n")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cfg.program_cache.per_skill, 8 << 20);
        assert_eq!(cfg.program_cache.per_owner, 12 << 20);
        assert_eq!(
            ServerConfig::default().program_cache.per_owner,
            256 << 20,
            "the default"
        );
        for bad in [
            "per_skill = 0",
            "per_skill = \"300m\"",
            "per_owner = \"2g\"",
            "per_user = \"1m\"",
        ] {
            assert!(
                parse_config(&format!("[program_cache]\n{bad}\n")).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn config_typos_are_errors() {
        assert!(parse_config("[caps]\nmemroy = 1").is_err());
        assert!(parse_config("statedir = \"/x\"").is_err());
        assert!(parse_config("[caps]\nmemory = \"lots\"").is_err());
        assert_eq!(parse_config(""), Ok(ServerConfig::default()));
    }

    #[test]
    fn deps_section_names_the_index_and_the_folder() {
        let cfg = parse_config(
            "[deps]\ndir = \"/srv/envs\"\nindex_url = \"http://127.0.0.1:8080/simple\"\nfind_links = [\"/srv/wheels\"]\nno_index = true\nnpm_registry = \"http://127.0.0.1:4873/\"\n",
        )
        .unwrap();
        assert_eq!(
            cfg.deps,
            DepsConfig {
                dir: PathBuf::from("/srv/envs"),
                index_url: Some("http://127.0.0.1:8080/simple".into()),
                find_links: vec!["/srv/wheels".into()],
                no_index: true,
                npm_registry: "http://127.0.0.1:4873/".into(),
                node_modules: None,
            }
        );
        assert_eq!(parse_config("").unwrap().deps, DepsConfig::default());
        assert!(parse_config("[deps]\nindex = \"x\"\n").is_err());
    }

    #[test]
    fn missing_config_file_means_defaults() {
        let got = load_config(
            Path::new("/nonexistent/band/server.toml"),
            Some(PathBuf::from("/tmp/s")),
        );
        let want = ServerConfig {
            state_dir: PathBuf::from("/tmp/s"),
            ..ServerConfig::default()
        };
        assert_eq!(got, Ok(want));
    }
}
