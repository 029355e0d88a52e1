//! What a run's plan depends on from the host, gathered before planning: which binaries resolve
//! where, the cgroup hierarchy, the state directory, the library executables to hide, the
//! resolvers and the host's own addresses. The only I/O before the plan (`plan::plan_run`);
//! everything it reads is a field, so a test can plan a run with made-up facts.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use band::proto::Layer;
use fs_err as fs;

use crate::config::ServerConfig;
use crate::error::{LayerExt, SetupError, SetupResult};
use crate::layers::cgroup::{CgroupError, Hierarchy};
use crate::layers::cli::bins::BinSearch;
use crate::layers::cli::programs;
use crate::layers::cli::{execcache, runtime, shim};
use crate::layers::fs::mounts;
use crate::layers::fs::{execmask, procmask, workdir};
use crate::layers::net;
use crate::request::Checked;

/// The helper binaries band-server puts in every sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Helpers {
    pub jail: PathBuf,
    pub shim: PathBuf,
}

impl Helpers {
    /// `band-jail` and `band-shim` next to the running band-server, unless `BAND_JAIL` /
    /// `BAND_SHIM` name them.
    pub(crate) fn locate() -> SetupResult<Helpers> {
        let here = std::env::current_exe()
            .layer(Layer::Filesystem, "cannot find band-server's own path")?;
        let dir = here.parent().map(Path::to_path_buf).unwrap_or_default();
        let find = |var: &str, name: &str| -> SetupResult<PathBuf> {
            let p = std::env::var_os(var)
                .map(PathBuf::from)
                .unwrap_or_else(|| dir.join(name));
            let p = p.canonicalize().map_err(|e| {
                SetupError::new(
                    Layer::Filesystem,
                    format!("{name} not found at {}: {e}", p.display()),
                )
                .with_hint(format!("install {name} next to band-server or set {var}"))
            })?;
            Ok(p)
        };
        Ok(Helpers {
            jail: find("BAND_JAIL", "band-jail")?,
            shim: find("BAND_SHIM", "band-shim")?,
        })
    }
}

/// The sysctl that says whether the kernel randomizes program addresses.
const RANDOMIZE_VA_SPACE: &str = "/proc/sys/kernel/randomize_va_space";

/// The host, as far as one run's plan is concerned.
#[derive(Debug)]
pub struct HostFacts {
    /// Command name → its canonical host file, for every name the plan may need (declared
    /// commands, essentials, interpreters); a name missing here is not installed.
    pub binaries: BTreeMap<String, PathBuf>,
    /// The first bytes (the `#!` line) of the declared commands' host files.
    pub heads: BTreeMap<PathBuf, Vec<u8>>,
    /// Static prefix of an absolute `allow.read` / `allow.write` pattern → (its canonical host
    /// path, is it a directory), for the prefixes that exist.
    pub host_paths: BTreeMap<PathBuf, (PathBuf, bool)>,
    /// The state directory could be prepared (root-owned, 0755); only tried for a request whose
    /// commands and host mounts are fine (it is `Ok` otherwise: the plan fails before it).
    pub state_dir: SetupResult<()>,
    /// Library executables to hide (see `execmask`), declared commands' trees exempted.
    pub masked: Vec<PathBuf>,
    /// The library trees that are directories here.
    pub lib_roots: Vec<String>,
    /// What of the run's `/proc` is covered ([`procmask::plan`] of the host's), or why the host's
    /// `/proc` could not be listed.
    pub proc_masks: SetupResult<Vec<crate::common::handover::ProcMask>>,
    pub helpers: SetupResult<Helpers>,
    /// The configured bubblewrap is a file.
    pub bwrap_present: bool,
    /// The kernel randomizes where it maps programs, or why not: the CLI gate needs it
    /// ([`crate::layers::cli::reports::randomization`]).
    pub randomization: Result<(), crate::layers::cli::reports::RandomizationOff>,
    pub hierarchy: Result<Hierarchy, CgroupError>,
    /// Upstream resolvers for the DNS stub (server config, else `/etc/resolv.conf`).
    pub upstream: Vec<SocketAddr>,
    /// The host's own addresses (only read for a run with network).
    pub own_addrs: Vec<IpAddr>,
    /// Where band-shim's execute-only copy is in the program cache, or why it cannot be.
    pub shim_copy: Result<PathBuf, std::io::Error>,
    /// Where each binary's execute-only copy is (or will be) in the program cache: the path a
    /// running copy reports as its own (`/proc/self/exe`), by command name.
    pub copies: BTreeMap<String, PathBuf>,
    /// The trees the run's programs need around them ([`runtime`]), with their executables to
    /// hide, or why they cannot be bound.
    pub runtime: Result<Vec<runtime::RuntimeTree>, String>,
    /// Command name → where its program sits in an installation of its own, and the links that
    /// rebuild that installation around its copy ([`runtime::install_layout`]).
    pub layouts: BTreeMap<String, (runtime::Layout, Vec<(PathBuf, PathBuf)>)>,
    /// Command name → the `argv[0]` its program runs with, when not its own: a Python found as a
    /// venv's `bin/python` runs as that path, so it finds the venv ([`runtime::venv_argv0`]).
    pub argv0: BTreeMap<String, String>,
}

/// What every run looks up on the host, whatever its request: where the essential commands are
/// ([`shim::ESSENTIALS`] on the config's `bin_path`), band-server's helpers and the cgroup
/// hierarchy. `band-server run` looks them up on a thread of their own ([`Prefetched::start`])
/// while it waits for its request and reads and checks it (band starts it before the request is
/// ready, so the two overlap: issue 17), and [`HostFacts::gather`] waits for them and takes them
/// when they are at most [`PREFETCH_FRESH`] old and for the same `bin_path`; else it looks
/// again.
#[derive(Debug)]
pub struct Prefetched {
    at: Instant,
    bin_path: Vec<PathBuf>,
    essentials: BTreeMap<&'static str, Option<(PathBuf, PathBuf)>>,
    helpers: SetupResult<Helpers>,
    /// Detected (an error is looked for again, to report).
    hierarchy: Option<Hierarchy>,
}

/// How old prefetched facts may be when the request comes (a client that prepared its request
/// for longer, or a person at an approval prompt, gets fresh ones).
pub(crate) const PREFETCH_FRESH: Duration = Duration::from_millis(500);

static PREFETCHED: OnceLock<Prefetched> = OnceLock::new();

/// The thread [`Prefetched::start`] started, until [`HostFacts::gather`] waits for it.
static PREFETCHING: Mutex<Option<std::thread::JoinHandle<()>>> = Mutex::new(None);

impl Prefetched {
    /// Look them up now.
    pub(crate) fn look(cfg: &ServerConfig) -> Prefetched {
        let search = BinSearch::new(&cfg.bin_path);
        Prefetched {
            at: Instant::now(),
            bin_path: cfg.bin_path.clone(),
            essentials: shim::ESSENTIALS
                .iter()
                .map(|&name| (name, search.find(name)))
                .collect(),
            helpers: Helpers::locate(),
            hierarchy: Hierarchy::detect_system().ok(),
        }
    }

    /// Look them up on a thread of their own and keep them ([`Prefetched::keep`]), beside what
    /// this process does next (reading its request); [`HostFacts::gather`] waits for that
    /// thread. Without a thread, now.
    pub fn start(cfg: &ServerConfig) {
        let mine = cfg.clone();
        match std::thread::Builder::new()
            .name("prefetch".into())
            .spawn(move || Prefetched::look(&mine).keep())
        {
            Ok(handle) => {
                if let Ok(mut pending) = PREFETCHING.lock() {
                    *pending = Some(handle);
                }
            }
            Err(_) => Prefetched::look(cfg).keep(),
        }
    }

    /// Keep them for this process's run ([`HostFacts::gather`]); the first call wins.
    pub(crate) fn keep(self) {
        let _ = PREFETCHED.set(self);
    }

    /// The kept ones (once [`Prefetched::start`]'s thread is done), if they may serve `cfg`'s
    /// run now.
    fn fresh_for(cfg: &ServerConfig) -> Option<&'static Prefetched> {
        let pending = PREFETCHING.lock().ok().and_then(|mut p| p.take());
        if let Some(handle) = pending {
            // A lookup that panicked kept nothing: the run looks again.
            let _ = handle.join();
        }
        PREFETCHED.get().filter(|p| p.serves(cfg, Instant::now()))
    }

    /// At most [`PREFETCH_FRESH`] old at `now`, and looked up on `cfg`'s `bin_path`.
    fn serves(&self, cfg: &ServerConfig, now: Instant) -> bool {
        now.saturating_duration_since(self.at) <= PREFETCH_FRESH && self.bin_path == cfg.bin_path
    }
}

/// The canonical host path of `p` and whether it is a directory, if it exists.
pub(crate) fn host_path(p: &Path) -> Option<(PathBuf, bool)> {
    let host = p.canonicalize().ok()?;
    let is_dir = host.is_dir();
    Some((host, is_dir))
}

/// The state directory: root-owned, not a symlink, not writable by others, traversable (the
/// run's uid must reach its run directory through it).
pub(crate) fn prepare_state_dir(state: &Path) -> SetupResult<()> {
    fs::create_dir_all(state).layer(
        Layer::Filesystem,
        format!("failed to create {}", state.display()),
    )?;
    let m = fs::symlink_metadata(state).layer(
        Layer::Filesystem,
        format!("failed to stat {}", state.display()),
    )?;
    if !m.is_dir() || m.uid() != 0 {
        return Err(SetupError::new(
            Layer::Filesystem,
            format!("{} must be a root-owned directory", state.display()),
        ));
    }
    crate::common::dirs::keep_mode(state, &m, 0o755).layer(
        Layer::Filesystem,
        format!("failed to chmod {}", state.display()),
    )
}

impl HostFacts {
    /// What the CLI gate's plan reads of these facts.
    pub(crate) fn programs(&self) -> crate::layers::cli::ProgramFacts<'_> {
        crate::layers::cli::ProgramFacts {
            shim_copy: &self.shim_copy,
            copies: &self.copies,
            runtime: &self.runtime,
            layouts: &self.layouts,
            argv0: &self.argv0,
        }
    }
}

impl HostFacts {
    /// Look at the host for the run `checked`. Prepares the state directory and refreshes the
    /// cached list of library executables (as the run would need anyway); creates nothing else.
    pub(crate) fn gather(cfg: &ServerConfig, checked: &Checked<'_>) -> HostFacts {
        let pre = Prefetched::fresh_for(cfg);
        HostFacts::gather_with(cfg, checked, pre)
    }

    /// [`HostFacts::gather`], taking what `pre` looked up already.
    fn gather_with(
        cfg: &ServerConfig,
        checked: &Checked<'_>,
        pre: Option<&Prefetched>,
    ) -> HostFacts {
        let policy = &checked.req.policy;
        let commands = Commands::find(cfg, checked, pre);
        let host_paths = host_paths(policy);
        // The commands and host mounts are planned from what was just read; only a run that
        // gets past them prepares the state directory and scans the library trees (as before the
        // plan existed: a refused request leaves no trace).
        let cli = programs::plan_cli(
            policy,
            &checked.compiled,
            &checked.bundle,
            &|name| commands.binaries.get(name).cloned(),
            &|path| commands.heads.get(path).cloned().unwrap_or_default(),
        );
        let mounts_ok =
            mounts::plan_host_mounts(policy, &cfg.state_dir, &|p| host_paths.get(p).cloned())
                .is_ok();
        // The commands' plan, for a run that gets that far.
        let far = cli.as_ref().ok().filter(|_| mounts_ok);
        let state_dir = match far {
            Some(_) => prepare_state_dir(&cfg.state_dir),
            None => Ok(()),
        };
        let masked = match far {
            Some(cli) if cfg.mask_lib_executables && state_dir.is_ok() => {
                masked(cfg, cli, &commands.declared)
            }
            _ => Vec::new(),
        };
        let mut facts = HostFacts {
            binaries: commands.binaries,
            heads: commands.heads,
            host_paths,
            state_dir,
            masked,
            lib_roots: lib_roots(),
            proc_masks: procmask::plan(Path::new(procmask::HOST_PROC)),
            helpers: pre.map_or_else(Helpers::locate, |p| p.helpers.clone()),
            bwrap_present: cfg.bwrap.is_file(),
            randomization: crate::layers::cli::reports::randomization(Path::new(
                RANDOMIZE_VA_SPACE,
            )),
            hierarchy: match pre.and_then(|p| p.hierarchy.clone()) {
                Some(h) => Ok(h),
                None => Hierarchy::detect_system(),
            },
            upstream: Vec::new(),
            own_addrs: Vec::new(),
            shim_copy: Err(std::io::Error::other("band-shim not found")),
            copies: BTreeMap::new(),
            runtime: Ok(Vec::new()),
            layouts: BTreeMap::new(),
            argv0: BTreeMap::new(),
        };
        facts.argv0 = venv_argv0s(&commands.at, &facts.binaries);
        facts.layouts = layouts(&facts.binaries, &facts.heads);
        if let Some(cli) = far {
            facts.runtime = runtime_trees(cfg, cli, &commands.at, &commands.interp_paths);
        }
        facts.copies = copies(cfg, checked, &facts.binaries, &facts.layouts);
        if !checked.compiled.net.is_empty() {
            facts.upstream = upstream(cfg);
            facts.own_addrs = net::own_addresses(Path::new("/proc"));
        }
        if let Ok(h) = &facts.helpers {
            facts.shim_copy = shim_copy(cfg, h);
        }
        facts
    }
}

/// The host programs a run names, as the config's `bin_path` has them: its declared commands,
/// the essentials, and the `#!` interpreters of the declared commands and of the bundle's
/// declared scripts.
#[derive(Default)]
struct Commands {
    /// The declared commands that are host programs (not the skill's own).
    declared: BTreeSet<String>,
    /// Command name → its canonical host file.
    binaries: BTreeMap<String, PathBuf>,
    /// The first bytes (the `#!` line) of the declared commands' host files.
    heads: BTreeMap<PathBuf, Vec<u8>>,
    /// Command name → where the search found it (a venv's `bin/python`, not what it links to).
    at: BTreeMap<String, PathBuf>,
    /// The interpreters' paths as `#!` lines name them (a venv's python): see `runtime`.
    interp_paths: Vec<PathBuf>,
}

impl Commands {
    fn find(cfg: &ServerConfig, checked: &Checked<'_>, pre: Option<&Prefetched>) -> Commands {
        let search = BinSearch::new(&cfg.bin_path);
        let lookup = |name: &str| match pre.and_then(|p| p.essentials.get(name)) {
            Some(found) => found.clone(),
            None => search.find(name),
        };
        let mut declared = checked.compiled.cli.commands();
        // The skill's own programs (`./bin/tool`) come from the bundle, not the host; their `#!`
        // interpreters do.
        declared.retain(|n| band::policy::cli::bundled_path(n).is_none());
        let mut c = Commands::default();
        for name in declared
            .iter()
            .map(String::as_str)
            .chain(shim::ESSENTIALS.iter().copied())
        {
            c.add(name, &lookup);
        }
        for name in &declared {
            let Some(host) = c.binaries.get(name).cloned() else {
                continue;
            };
            let head = execcache::read_head(&host).unwrap_or_default();
            if let Some(sb) = execcache::parse_shebang(&head) {
                c.add(&sb.interp, &lookup);
                c.add(sb.effective_interpreter(), &lookup);
                c.interp_paths.push(PathBuf::from(&sb.path));
            }
            c.heads.insert(host, head);
        }
        for f in &checked.bundle {
            let declared = checked.compiled.cli.bundled().contains(&f.path);
            if (declared || f.path == checked.req.entry)
                && let Some(sb) = execcache::parse_shebang(&f.data)
            {
                if declared {
                    c.add(&sb.interp, &lookup);
                    c.add(sb.effective_interpreter(), &lookup);
                }
                c.interp_paths.push(PathBuf::from(&sb.path));
            }
        }
        c.declared = declared;
        c
    }

    /// `name` as `lookup` finds it (where, and its canonical file), unless it is known already.
    fn add(&mut self, name: &str, lookup: &dyn Fn(&str) -> Option<(PathBuf, PathBuf)>) {
        if !self.binaries.contains_key(name)
            && let Some((at, p)) = lookup(name)
        {
            self.at.insert(name.to_string(), at);
            self.binaries.insert(name.to_string(), p);
        }
    }
}

/// The static prefix of each absolute `allow.read` / `allow.write` pattern (and `insist`'s) →
/// its canonical host path and whether it is a directory, for the prefixes that exist.
fn host_paths(policy: &band::policy::Policy) -> BTreeMap<PathBuf, (PathBuf, bool)> {
    let mut host_paths = BTreeMap::new();
    for cat in [band::policy::Category::Read, band::policy::Category::Write] {
        for p in mounts::allow_and_insist(policy, cat) {
            if let Some(prefix) = workdir::absolute_prefix(&p)
                && let Some(found) = host_path(&prefix)
            {
                host_paths.insert(prefix, found);
            }
        }
    }
    host_paths
}

/// The library executables to hide (`execmask`), but for the trees of the run's declared
/// programs.
fn masked(
    cfg: &ServerConfig,
    cli: &programs::CliPlan,
    declared: &BTreeSet<String>,
) -> Vec<PathBuf> {
    let programs: Vec<(String, PathBuf)> = cli
        .binaries
        .iter()
        .filter(|b| declared.contains(&b.name))
        .map(|b| (b.name.clone(), b.host.clone()))
        .collect();
    let exempt: Vec<PathBuf> = programs
        .iter()
        .flat_map(|(name, host)| execmask::exempt_roots(name, host))
        .collect();
    execmask::apply_exemptions(&execmask::load_or_scan(&cfg.state_dir), &exempt, &programs)
}

/// The library trees that are directories here.
fn lib_roots() -> Vec<String> {
    execmask::LIB_ROOTS
        .iter()
        .filter(|r| fs::symlink_metadata(r).is_ok_and(|m| m.is_dir()))
        .map(|r| r.to_string())
        .collect()
}

/// Command name → the `argv[0]` of a program found as a venv's `bin/python`
/// ([`runtime::venv_argv0`]), from where each was found (`at`) and what it is (`binaries`).
fn venv_argv0s(
    at: &BTreeMap<String, PathBuf>,
    binaries: &BTreeMap<String, PathBuf>,
) -> BTreeMap<String, String> {
    let mut argv0 = BTreeMap::new();
    for (name, at) in at {
        if let Some(real) = binaries.get(name)
            && let Some(a) = runtime::venv_argv0(at, real)
        {
            argv0.insert(name.clone(), a);
        }
    }
    argv0
}

/// [`HostFacts::layouts`].
type Layouts = BTreeMap<String, (runtime::Layout, Vec<(PathBuf, PathBuf)>)>;

/// Command name → the installation of its own its program sits in, and the links that rebuild
/// it around the copy ([`runtime::install_layout`]): for the programs that are not essentials
/// nor `#!` scripts.
fn layouts(binaries: &BTreeMap<String, PathBuf>, heads: &BTreeMap<PathBuf, Vec<u8>>) -> Layouts {
    let lib_roots: Vec<PathBuf> = execmask::LIB_ROOTS.iter().map(PathBuf::from).collect();
    let mut layouts = BTreeMap::new();
    for (name, host) in binaries {
        if shim::ESSENTIALS.contains(&name.as_str()) {
            continue;
        }
        let head = match heads.get(host) {
            Some(h) => h.clone(),
            None => execcache::read_head(host).unwrap_or_default(),
        };
        if execcache::parse_shebang(&head).is_some() {
            continue;
        }
        if let Some(layout) = runtime::install_layout(host, &lib_roots) {
            let links = runtime::layout_links(&layout);
            layouts.insert(name.clone(), (layout, links));
        }
    }
    layouts
}

/// The trees the run's programs need around them ([`runtime`]), with their executables to
/// hide: those of the programs (`at`: where each was found) and of the `#!` interpreters, and
/// the user site of each Python among them.
fn runtime_trees(
    cfg: &ServerConfig,
    cli: &programs::CliPlan,
    at: &BTreeMap<String, PathBuf>,
    interp_paths: &[PathBuf],
) -> Result<Vec<runtime::RuntimeTree>, String> {
    let mut trees = program_trees(cfg, cli, at, interp_paths);
    // pip's user site of the user who invoked band (`SUDO_UID`, which sudo sets, when band
    // started band-server through sudo; else band-server's own user), read-only where the run's
    // Python looks for it (`runtime::user_site`).
    let versions = runtime::python_versions(
        cli.binaries
            .iter()
            .filter(|b| !shim::ESSENTIALS.contains(&b.name.as_str()))
            .map(|b| b.host.as_path()),
    );
    let home = invoking_home();
    if let (Ok(trees), Some(home)) = (&mut trees, home) {
        trees.extend(user_sites(&home, &versions));
    }
    // The script's Node packages (`deps::node`), read-only beside its package.json in /skill.
    if let (Ok(list), Some(nm)) = (&mut trees, &cfg.deps.node_modules) {
        match runtime::scan_trees(std::slice::from_ref(&nm.host), &execmask::scan) {
            Ok(scanned) => list.extend(scanned.into_iter().map(|mut t| {
                t.at = nm.at.clone();
                t
            })),
            Err(e) => return Err(e.to_string()),
        }
    }
    trees
}

/// The trees around the run's programs and its `#!` interpreters, scanned.
fn program_trees(
    cfg: &ServerConfig,
    cli: &programs::CliPlan,
    at: &BTreeMap<String, PathBuf>,
    interp_paths: &[PathBuf],
) -> Result<Vec<runtime::RuntimeTree>, String> {
    let lib_trees: Vec<PathBuf> = execmask::LIB_ROOTS.iter().map(PathBuf::from).collect();
    let bound: Vec<PathBuf> = execmask::LIB_ROOTS
        .iter()
        .chain(&["/tmp", "/proc", "/sys", "/dev"])
        .map(PathBuf::from)
        .chain([cfg.state_dir.clone()])
        .collect();
    let places = runtime::Places {
        local: Path::new("/usr/local"),
        bound: &bound,
    };
    let roots: Vec<PathBuf> = cli
        .binaries
        .iter()
        .filter(|b| !shim::ESSENTIALS.contains(&b.name.as_str()))
        .flat_map(|b| {
            // What the program's installation links to comes with it (LibreOffice's registry in
            // /etc).
            let linked = runtime::install_layout(&b.host, &lib_trees)
                .map(|l| runtime::linked_dirs(&l.tree, 3))
                .unwrap_or_default();
            let at = at.get(&b.name).unwrap_or(&b.host);
            runtime::discover(at, &b.host, &places).into_iter().chain(
                linked
                    .into_iter()
                    .filter(|d| !bound.iter().any(|b| d.starts_with(b) || b.starts_with(d))),
            )
        })
        .chain(
            interp_paths
                .iter()
                .filter(|p| p.is_absolute())
                .flat_map(|p| {
                    runtime::real(p)
                        .map(|r| runtime::discover(p, &r, &places))
                        .unwrap_or_default()
                }),
        )
        .collect();
    runtime::scan_trees(&runtime::normalize(roots), &execmask::scan).map_err(|e| e.to_string())
}

/// The home of the user who invoked band: `SUDO_UID`'s, else band-server's own user's.
fn invoking_home() -> Option<PathBuf> {
    let uid = std::env::var("SUDO_UID")
        .ok()
        .and_then(|u| u.parse::<u32>().ok())
        .or_else(|| fs::metadata("/proc/self").ok().map(|m| m.uid()));
    uid.and_then(|uid| {
        fs::read_to_string("/etc/passwd")
            .ok()
            .and_then(|p| runtime::home_of(&p, uid))
    })
}

/// The user sites under `home` of the Python `versions`, scanned, each where the run's Python
/// looks for it.
fn user_sites(home: &Path, versions: &[String]) -> Vec<runtime::RuntimeTree> {
    let mut trees = Vec::new();
    for v in versions {
        if let Some(site) = runtime::user_site(home, v)
            && let Ok(mut t) = runtime::scan_trees(std::slice::from_ref(&site), &execmask::scan)
        {
            for tree in &mut t {
                tree.at = runtime::user_site_at(v);
            }
            trees.extend(t);
        }
    }
    trees
}

/// Command name → where the execute-only copy of its program is (or will be) in the program
/// cache: the same key the run's copy will have (`ExecDir::populate`), under its layout's
/// path when it has one.
fn copies(
    cfg: &ServerConfig,
    checked: &Checked<'_>,
    binaries: &BTreeMap<String, PathBuf>,
    layouts: &Layouts,
) -> BTreeMap<String, PathBuf> {
    // A program another user can change is charged to the run's user and skill, and its key
    // says so.
    let requester = execcache::Owner {
        uid: execcache::requesting_uid(),
        skill: checked.req.skill.clone(),
    };
    let mut dirs = BTreeMap::new();
    let mut copies = BTreeMap::new();
    for (name, host) in binaries {
        if let Ok(m) = fs::metadata(host) {
            let owner = execcache::host_owner(host, &m, &requester, &mut dirs);
            let key = execcache::host_key(host, &m, owner.as_ref());
            let rel = layouts
                .get(name)
                .map(|(l, _)| l.rel.to_string_lossy().into_owned())
                .unwrap_or_else(|| name.clone());
            copies.insert(
                name.clone(),
                execcache::cache_entry(&execcache::cache_dir(&cfg.state_dir), &rel, &key),
            );
        }
    }
    copies
}

/// The upstream resolvers of the DNS stub: the config's, else `/etc/resolv.conf`'s.
fn upstream(cfg: &ServerConfig) -> Vec<SocketAddr> {
    if cfg.dns_upstream.is_empty() {
        net::parse_resolv_conf(&fs::read_to_string("/etc/resolv.conf").unwrap_or_default())
    } else {
        cfg.dns_upstream.clone()
    }
}

/// Where band-shim's execute-only copy is in the program cache.
fn shim_copy(cfg: &ServerConfig, h: &Helpers) -> Result<PathBuf, std::io::Error> {
    fs::metadata(&h.shim).map(|m| {
        execcache::cache_entry(
            &execcache::cache_dir(&cfg.state_dir),
            execcache::SHIM_NAME,
            &execcache::cache_key(&h.shim, &m),
        )
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use band::proto::RunRequest;
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::layers::cli::bins::find_binary;
    use crate::request::{self, Check};

    /// What [`find_binary`] did before [`BinSearch`]: the same answers, by the longer way (every
    /// candidate followed, every path resolved whole).
    fn find_by_resolving_each(name: &str, search: &[PathBuf]) -> Option<(PathBuf, PathBuf)> {
        for d in search {
            let p = d.join(name);
            let Ok(m) = fs::metadata(&p) else {
                continue;
            };
            if !m.is_file() || m.mode() & 0o111 == 0 {
                continue;
            }
            let real = p.canonicalize().ok()?;
            let base = real.file_name()?.to_str()?;
            if request::FORBIDDEN_COMMANDS.contains(&base) {
                return None;
            }
            return Some((p, real));
        }
        None
    }

    /// A folder of commands of every kind (files, links to files and folders, dangling links,
    /// files that do not execute, a forbidden command under another name), searched through a
    /// folder that is itself a link, a missing one and a second one: [`BinSearch`] answers as
    /// resolving each path whole does, with one resolution per folder.
    #[test]
    fn the_search_finds_what_resolving_each_path_finds() {
        let t = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = t.path();
        let mk = |rel: &str, mode: u32| {
            let p = root.join(rel);
            fs_err::create_dir_all(p.parent().unwrap_or(root)).unwrap_or_else(|e| panic!("{e}"));
            fs_err::write(&p, b"#!/bin/sh\n").unwrap_or_else(|e| panic!("{e}"));
            fs_err::set_permissions(&p, std::fs::Permissions::from_mode(mode))
                .unwrap_or_else(|e| panic!("{e}"));
        };
        let link = |target: &str, rel: &str| {
            fs_err::os::unix::fs::symlink(target, root.join(rel)).unwrap_or_else(|e| panic!("{e}"));
        };
        mk("real/bin/tool", 0o755);
        mk("real/bin/data", 0o644);
        mk("real/alt/mawk", 0o755);
        mk("real/alt/sudo", 0o755);
        mk("second/only-here", 0o755);
        mk("second/tool", 0o755);
        fs_err::create_dir_all(root.join("real/bin/folder")).unwrap_or_else(|e| panic!("{e}"));
        link("../alt/mawk", "real/bin/awk");
        link("../alt/sudo", "real/bin/elevate");
        link("../alt/none", "real/bin/dangling");
        link("folder", "real/bin/to-folder");
        link("real/bin", "bin");
        let search = [root.join("missing"), root.join("bin"), root.join("second")];
        let names = [
            "tool",
            "data",
            "awk",
            "elevate",
            "sudo",
            "dangling",
            "folder",
            "to-folder",
            "only-here",
            "absent",
            ".",
            "..",
            "",
        ];
        let batch = BinSearch::new(&search);
        for name in names {
            assert_eq!(
                batch.find(name),
                find_by_resolving_each(name, &search),
                "{name}"
            );
        }
        // Resolved through the folder's link, and followed through the command's.
        let real = root.canonicalize().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            find_binary("tool", &search),
            Some((root.join("bin/tool"), real.join("real/bin/tool")))
        );
        assert_eq!(
            find_binary("awk", &search).map(|(_, r)| r),
            Some(real.join("real/alt/mawk"))
        );
        assert_eq!(find_binary("elevate", &search), None);
        assert_eq!(
            find_binary("only-here", &search).map(|(_, r)| r),
            Some(real.join("second/only-here"))
        );
    }

    /// A no-op request (`#!/bin/sh`, no `allow`).
    fn noop_request() -> RunRequest {
        let script = b"#!/bin/sh\nexit 0\n".to_vec();
        let files = vec![("scripts/noop.sh".to_string(), 0o755, script.clone())];
        serde_json::from_value(serde_json::json!({
            "protocol": band::proto::PROTOCOL_VERSION,
            "run_id": "0123456789abcdef",
            "skill": "noop",
            "script": "noop",
            "entry": "scripts/noop.sh",
            "bundle": [{"path": "scripts/noop.sh", "mode": 0o755,
                        "data": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &script)}],
            "bundle_sha256": band::proto::bundle_digest(&files),
            "policy": {"allow": {}, "deny": {}, "insist": {}, "limits": {}, "secrets": [], "required_secrets": []},
            "input": {},
            "secrets": {},
            "workspace": [],
            "trace": false
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// A `cat` (a `#!` script) alone in `<tmp>/<dir>`, and a config whose `bin_path` is that
    /// folder (its state directory in `tmp`, no library masks).
    fn cat_on_bin_path(tmp: &Path, dir: &str) -> (PathBuf, ServerConfig) {
        let bin = tmp.join(dir);
        fs::create_dir(&bin).unwrap_or_else(|e| panic!("{e}"));
        let cat = bin.join("cat");
        fs::write(&cat, "#!/bin/sh\n").unwrap_or_else(|e| panic!("{e}"));
        fs::set_permissions(&cat, std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|e| panic!("{e}"));
        let cfg = ServerConfig {
            bin_path: vec![bin],
            state_dir: tmp.join("state"),
            mask_lib_executables: false,
            ..ServerConfig::default()
        };
        (cat, cfg)
    }

    #[test]
    fn a_lookup_started_on_its_thread_is_waited_for_and_served() {
        // The only test that starts the process's lookup (the one `band-server run` starts), on a
        // `bin_path` of its own, which no other test's run has.
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (cat, cfg) = cat_on_bin_path(tmp.path(), "started-bin");
        Prefetched::start(&cfg);
        // Asked at once, while the thread may still be looking: the answer waits for it.
        let pre = Prefetched::fresh_for(&cfg).unwrap_or_else(|| panic!("nothing prefetched"));
        let real = cat.canonicalize().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(pre.essentials.get("cat"), Some(&Some((cat, real))));
        // The thread is waited for once; later runs of this process take the same lookup.
        assert!(
            PREFETCHING
                .lock()
                .unwrap_or_else(|e| panic!("{e}"))
                .is_none()
        );
        assert!(Prefetched::fresh_for(&cfg).is_some_and(|p| std::ptr::eq(p, pre)));
    }

    /// What was looked up before the request serves the run while fresh (even if the host
    /// changed since: the lookup is one moment earlier), and is looked up again otherwise.
    #[test]
    fn a_run_takes_the_prefetched_lookups_while_they_are_fresh() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (cat, cfg) = cat_on_bin_path(tmp.path(), "bin");
        let pre = Prefetched::look(&cfg);
        let real = cat.canonicalize().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            pre.essentials.get("cat"),
            Some(&Some((cat.clone(), real.clone())))
        );
        assert_eq!(pre.essentials.get("sed"), Some(&None));

        let req = noop_request();
        let checked = match request::check(&req, &cfg, true) {
            Ok(Check::Run(c)) => c,
            Ok(Check::Refused(r)) => panic!("refused: {r:?}"),
            Err(e) => panic!("{e}"),
        };
        // `cat` goes away after the lookup: the run takes the lookup's answer ...
        fs::remove_file(&cat).unwrap_or_else(|e| panic!("{e}"));
        let facts = HostFacts::gather_with(&cfg, &checked, Some(&pre));
        assert_eq!(facts.binaries.get("cat"), Some(&real));
        // ... and without it, looks and finds none.
        let facts = HostFacts::gather_with(&cfg, &checked, None);
        assert_eq!(facts.binaries.get("cat"), None);

        // Fresh for PREFETCH_FRESH, for the same bin_path only.
        let now = pre.at;
        assert!(pre.serves(&cfg, now + PREFETCH_FRESH));
        assert!(!pre.serves(&cfg, now + PREFETCH_FRESH + Duration::from_millis(1)));
        let other = ServerConfig {
            bin_path: vec![tmp.path().to_path_buf()],
            ..cfg.clone()
        };
        assert!(!pre.serves(&other, now));
    }
}
