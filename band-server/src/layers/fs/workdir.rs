//! The per-run directory `<state>/runs/<run_id>`: a tmpfs of `maxDiskBytes` that holds everything
//! the sandbox sees besides the host's read-only system files.
//!
//! ```text
//! <run>/            tmpfs, root:<run gid> 0710 (the run's uid may traverse it, nobody may list it)
//!   root/           the sandbox's tree as band-server makes it: folders, files, links and
//!                   mount points, no mount (late files land here too); seen through view/
//!     skill/        the bundle, root-owned; bound read-only, noexec on the view        → /skill
//!     etc/          synthetic passwd, group, hosts, nsswitch.conf (root 0444)         → /etc
//!                   (with resolv.conf when networked), a copy of the host's ld.so.cache, and
//!                   mount points for the host's ssl/certs, ca-certificates and fonts
//!     usr/          the sandbox's /usr                                                → /usr
//!       lib/ lib64/ libexec/ share/   mount points of the host's trees the host has, each a
//!                   read-only mount on the view: an overlay with the run's masks (`execmask`),
//!                   else a bind of the host's
//!       bin/        symlinks <name> → /band/shim                   → /band/bin and /usr/bin
//!       sbin/ local/bin/  links to bin/ (and mount points for binds under /usr outside the trees above)
//!     bin lib lib64 sbin   links into usr/
//!     band/         mount point of a read-only bind of the run's exec folder (below)  → /band
//!     dev/          mount point of the sandbox's /dev, a tmpfs of its own on the view (read-only,
//!                   nosuid, noexec): null, zero, full, random, urandom and tty made with
//!                   mknod, a devpts of the run's own, links                               → /dev
//!     proc/ tmp/ workspace/   mount points (of bubblewrap's `/proc`, of the writable binds
//!                   below), and one for each absolute host path or program tree bubblewrap
//!                   binds; the links at the programs' cache paths (`SandboxPlan::self_links`)
//!                   with their folders
//!   view/           `root/` bound again, read-only, and every mount of the tree on it (the
//!                   library trees, /etc's host folders, /skill, /band, /dev, the three
//!                   folders below, writable): bubblewrap's one bind (`--dev-bind`: it adds
//!                   nosuid, not nodev, to the mounts in it)                               → /
//!   workspace/      request workspace files (see below), bound noexec at view/workspace → /workspace
//!   io/             root:<run gid> 1770 (sticky), bound noexec at view/band/io → /band/io
//!     input.json    root 0444; config.json the same when present; output.json written by the script
//!   tmp/            run uid 0700, bound noexec at view/tmp                   → /tmp
//!   lib/            where a mask layer is built when the shared cache cannot hold it
//!   host/<n>        bind mounts of absolute allow.read/allow.write prefixes  → their own path
//! ```
//!
//! The run's programs live outside this tmpfs (they are hardlinks into a cache on the state
//! directory's filesystem): `<state>/exec/runs/<run_id>` → `/band`, in one read-only bind at `root/band`
//! (`x/` the `#!` scripts, `shim`, `jail`, `sock` the gate's socket (`root:<run gid> 0660`), `bin`
//! a link to `/usr/bin`, `io/` the mount point of `io/` above), see `execcache`.
//!
//! Workspace files matching `allow.write` (and no `deny.write`) belong to the run's uid; all other
//! files are root-owned 0444 (0555 if executable) so the script cannot change them in place. The
//! directory each relative `allow.write` pattern can write into (its static prefix) is created and
//! owned by the run's uid so new files can appear there.
//!
//! `noexec` on every writable directory (and on `skill/`) means a script cannot write a binary and
//! run it, nor run a file of its bundle by its path: only the read-only system files and the
//! run's programs (through band-shim) can be executed. The flags are set here, in the initial user
//! namespace, so they are locked for bubblewrap's unprivileged copy of these mounts.

use fs_err::{self as fs, OpenOptions};
use std::borrow::Cow;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;

use fs_err::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use band::policy::fs::FsPattern;
use band::proto::Layer;

use crate::common::dirs::{dir_with_mode, fresh_dir_with_mode};
use crate::common::handover::{JAVA_TRUSTSTORE, SYSTEM_BUNDLES};
use crate::error::{LayerExt, SetupError, SetupResult};
use crate::request::DecodedFile;
use crate::sys::{self, BindFlags};

pub(crate) fn runs_dir(state: &Path) -> PathBuf {
    state.join("runs")
}

/// A host path bound into the sandbox for an absolute `allow.read` / `allow.write` pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HostMount {
    /// Canonical host path (file or directory).
    pub(crate) host: PathBuf,
    /// Where the sandbox sees it (the pattern's static prefix as written).
    pub(crate) sandbox: PathBuf,
    pub(crate) writable: bool,
    pub(crate) is_dir: bool,
}

/// Everything needed to plan a run directory.
/// `'d`: the files' data, which the plan borrows.
pub(crate) struct RunDirSpec<'a, 'd> {
    pub(crate) state: &'a Path,
    pub(crate) run_id: &'a str,
    pub(crate) disk_bytes: u64,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) user: &'a str,
    pub(crate) bundle: &'d [DecodedFile],
    pub(crate) workspace: &'d [DecodedFile],
    /// Does this workspace-relative path match `allow.write` and no `deny.write`?
    pub(crate) write_allowed: &'a dyn Fn(&str) -> bool,
    /// Workspace-relative directories the run may create files in ("" = the workspace root).
    pub(crate) write_dirs: &'a [String],
    /// The folders on the way to them that the workspace has (`RunRequest::workspace_folders`);
    /// `None`: all are made.
    pub(crate) workspace_folders: Option<&'d [String]>,
    pub(crate) input_json: &'d [u8],
    pub(crate) config_json: Option<&'d [u8]>,
    /// Names to link to the shim in `bin/`.
    pub(crate) wrappers: &'a [String],
    pub(crate) host_mounts: &'a [HostMount],
    /// Files in the library trees to hide (see `execmask`): a tree holding any is an overlay
    /// with the masks on top at `usr/<tree>`, the others are binds of the host's.
    pub(crate) masked: &'a [PathBuf],
    /// The library trees ([`crate::layers::fs::execmask::LIB_ROOTS`]) that are directories on
    /// this host.
    pub(crate) lib_roots: &'a [String],
    /// The sandbox's `/etc/resolv.conf` when the run has network (then `hosts: files dns`).
    pub(crate) resolv_conf: Option<&'a str>,
    /// The run's CA bundle, written as `/etc/band-ca.pem` (the egress proxy's runs), and bound
    /// over each system bundle path the view has ([`SYSTEM_BUNDLES`]).
    pub(crate) ca_bundle: Option<&'a str>,
    /// The run's Java trust store (PKCS#12), written as [`JAVA_TRUSTSTORE`].
    pub(crate) java_truststore: Option<&'a [u8]>,
    /// Other binds whose sandbox path may lie under `/etc` (a declared program's tree there, such
    /// as LibreOffice's `/etc/libreoffice/registry`; an absolute `allow.read`), each with whether
    /// it is a directory: the synthetic `/etc` is read-only once bound, so their mount points
    /// are made here.
    pub(crate) other_binds: &'a [(PathBuf, bool)],
    /// Host folders of runtime trees the run's uid cannot reach (`ExecView::hidden_trees`):
    /// each bound read-only (not noexec: their shared objects are mapped executable) at
    /// `trees/<n>`, which bubblewrap binds at the tree's path.
    pub(crate) hidden_trees: &'a [PathBuf],
    /// (link, target): symlinks at absolute sandbox paths (`SandboxPlan::self_links` and
    /// `SandboxPlan::links`), made in the sandbox's root here since it is read-only once bound.
    pub(crate) links: &'a [(PathBuf, PathBuf)],
    /// The run's exec folder (`execcache::ExecDir`: `#!` scripts, shim, jail, socket, the `bin`
    /// link, `io/` as a mount point), bound read-only at `root/band` (→ `/band`).
    pub(crate) exec_dir: &'a Path,
}

/// What a run directory's request part ([`RunDirPlan::request`]) is made of: the request's own
/// files, and the little of its band they depend on.
pub(crate) struct RequestFiles<'a, 'd> {
    pub(crate) state: &'a Path,
    pub(crate) run_id: &'a str,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) workspace: &'d [DecodedFile],
    pub(crate) write_allowed: &'a dyn Fn(&str) -> bool,
    pub(crate) write_dirs: &'a [String],
    pub(crate) workspace_folders: Option<&'d [String]>,
    pub(crate) input_json: &'d [u8],
}

impl<'a, 'd> RunDirSpec<'a, 'd> {
    fn request_files(&self) -> RequestFiles<'a, 'd> {
        RequestFiles {
            state: self.state,
            run_id: self.run_id,
            uid: self.uid,
            gid: self.gid,
            workspace: self.workspace,
            write_allowed: self.write_allowed,
            write_dirs: self.write_dirs,
            workspace_folders: self.workspace_folders,
            input_json: self.input_json,
        }
    }
}

pub(crate) use crate::common::paths::VIEW;

/// The folders of the sandbox's root that are mount points (`/proc`, made by bubblewrap; `/dev`,
/// the writable `/workspace` and `/tmp`, and `/band`, bound on the view by band-server): made in
/// `root/` since the view is read-only.
pub(crate) const ROOT_MOUNT_POINTS: &[&str] = &["band", "dev", "proc", "tmp", "workspace"];

/// The device nodes of the sandbox's `/dev` (bubblewrap's `--dev` set): name, major, minor (the
/// kernel's fixed numbers, `Documentation/admin-guide/devices.txt`).
pub const DEV_NODES: &[(&str, u32, u32)] = &[
    ("null", 1, 3),
    ("zero", 1, 5),
    ("full", 1, 7),
    ("random", 1, 8),
    ("urandom", 1, 9),
    ("tty", 5, 0),
];

/// The links in the sandbox's `/dev`: (link, target), bubblewrap's `--dev` set.
pub const DEV_LINKS: &[(&str, &str)] = &[
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
    ("fd", "/proc/self/fd"),
    ("core", "/proc/kcore"),
    ("ptmx", "pts/ptmx"),
];

/// The compatibility links at the sandbox's root: (link, target).
pub(crate) const ROOT_LINKS: &[(&str, &str)] = &[
    ("bin", "usr/bin"),
    ("lib", "usr/lib"),
    ("lib64", "usr/lib64"),
    ("sbin", "usr/sbin"),
];

/// One step of populating the run directory (a fresh tmpfs). Owners are `(uid, gid)`; `None` is
/// root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FsOp<'a> {
    /// `mkdir` (an existing directory is fine), then chown and chmod.
    Mkdir {
        path: PathBuf,
        mode: u32,
        owner: Option<(u32, u32)>,
    },
    Chown {
        path: PathBuf,
        uid: u32,
        gid: u32,
    },
    /// A new file (never through a symlink), then chown and chmod.
    Write {
        path: PathBuf,
        data: Cow<'a, [u8]>,
        mode: u32,
        owner: Option<(u32, u32)>,
    },
    Symlink {
        target: PathBuf,
        link: PathBuf,
        /// For the error message.
        name: String,
    },
    /// A new root-owned file holding a copy of the host file `source` (read whole when the run
    /// directory is made), then chmod: a small host file that would otherwise cost bubblewrap a
    /// bind of its own (each bind is a mount, a read-only remount and a re-read of its mount
    /// table). With `optional`, a host without the file gets none (the run directory is made
    /// without it); a file that is there but cannot be read is still an error.
    Copy {
        source: PathBuf,
        path: PathBuf,
        mode: u32,
        optional: bool,
    },
    /// A bind mount (`source` onto `target`, or a remount of `target` onto itself).
    Bind {
        source: PathBuf,
        target: PathBuf,
        read_only: bool,
        no_exec: bool,
        /// What failed, for the error message.
        what: String,
    },
    /// A read-only, nosuid, nodev bind of the host's `source` at `target` (not recursive), made
    /// only when the host has `source` (bubblewrap's `--ro-bind-try`).
    BindHost {
        source: PathBuf,
        target: PathBuf,
    },
    /// A read-only bind of the run's file `source` over the file `target` of the view, made only
    /// when the view has `target` as a regular file (never through a link, which could lead
    /// out of the view): the run's CA bundle over the system bundles of the host's folders
    /// bound in `/etc`. A mount in the run's tree: the host's file is never written.
    BindOverView {
        source: PathBuf,
        target: PathBuf,
    },
    /// The sandbox's `/dev` at `target` (`make_dev`): a tmpfs of its own (nosuid, noexec, not
    /// nodev), `shm/` and `pts/`, the [`DEV_NODES`] made with `mknod`, the [`DEV_LINKS`], then
    /// read-only, and a devpts instance of the run's own on `pts/`. Three mounts, where binding
    /// the host's six nodes took a bind and a remount each.
    Dev {
        target: PathBuf,
    },
    /// A read-only overlay at `target`: a layer of whiteouts (one per file of `rels`, shared
    /// through [`crate::layers::fs::maskcache`] when it can be) over the host tree `root`.
    MaskLibrary {
        index: usize,
        root: String,
        rels: Vec<PathBuf>,
        target: PathBuf,
    },
}

/// The run directory, planned: where it goes, its tmpfs, and every step that populates it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunDirPlan<'a> {
    pub(crate) state: PathBuf,
    pub(crate) run_id: String,
    pub(crate) root: PathBuf,
    /// The tmpfs mount options.
    pub tmpfs: String,
    pub ops: Vec<FsOp<'a>>,
    /// What only the script needs, not bubblewrap: the wrappers in `usr/bin` (links to band-shim,
    /// one per command), the files of the synthetic `/etc`, and the links at the programs' cache
    /// paths with their folders ([`RunDirSpec::links`]). Made by [`RunDir::finish`] after
    /// bubblewrap's spawn, while it builds the sandbox, and before the jail's input is written
    /// (so before the script starts): none is a mount point (a file of `/etc` a bind lands on
    /// stays in `ops`), and the view (`root/` bound read-only) shows them as they come.
    pub late: Vec<FsOp<'a>>,
    /// What is the request's own, not its band's: the workspace's files (with the folders they
    /// need) and `io/input.json`, made by [`RunDir::create`] after [`RunDirPlan::ops`]. A warm
    /// server's spare sandbox (`run::spare`) is built without them, and makes those of the
    /// request it serves when it comes ([`RunDir::write_request`]).
    pub request: Vec<FsOp<'a>>,
    /// (sandbox path, source) for library trees prepared with masks.
    pub(crate) lib_binds: Vec<(String, PathBuf)>,
}

impl RunDirPlan<'_> {
    pub(crate) fn host_mount(&self, i: usize) -> PathBuf {
        self.root.join("host").join(i.to_string())
    }

    /// Where the `i`th hidden tree is bound in the run directory ([`RunDirSpec::hidden_trees`]).
    pub(crate) fn hidden_tree(&self, i: usize) -> PathBuf {
        self.root.join("trees").join(i.to_string())
    }
}

/// The paths created so far by a plan: the tmpfs starts empty, so whether a directory exists is
/// known without looking.
#[derive(Default)]
struct Planned<'a> {
    ops: Vec<FsOp<'a>>,
    // Membership only (hashing a path is cheaper than ordering it component by component).
    dirs: std::collections::HashSet<PathBuf>,
    files: std::collections::HashSet<PathBuf>,
}

impl<'a> Planned<'a> {
    fn mkdir(&mut self, path: PathBuf, mode: u32, owner: Option<(u32, u32)>) {
        self.dirs.insert(path.clone());
        self.ops.push(FsOp::Mkdir { path, mode, owner });
    }

    /// The (root-owned) parent directories of `rel` under `base`.
    fn mkdir_parents(&mut self, base: &Path, rel: &str, mode: u32) {
        let mut cur = base.to_path_buf();
        let comps: Vec<&str> = rel.split('/').collect();
        for c in &comps[..comps.len().saturating_sub(1)] {
            cur.push(c);
            if !self.dirs.contains(&cur) {
                self.mkdir(cur.clone(), mode, None);
            }
        }
    }

    fn write(&mut self, path: PathBuf, data: Cow<'a, [u8]>, mode: u32, owner: Option<(u32, u32)>) {
        self.files.insert(path.clone());
        self.ops.push(FsOp::Write {
            path,
            data,
            mode,
            owner,
        });
    }

    /// Symlinks `(link, target)` in `dir`, which the sandbox sees at `at` (for error messages).
    fn links(&mut self, dir: &Path, at: &str, links: &[(&str, &str)]) {
        for (link, target) in links {
            self.ops.push(FsOp::Symlink {
                target: PathBuf::from(target),
                link: dir.join(link),
                name: format!("{at}/{link}"),
            });
        }
    }

    fn bind(&mut self, source: &Path, target: &Path, read_only: bool, no_exec: bool, what: String) {
        self.ops.push(FsOp::Bind {
            source: source.to_path_buf(),
            target: target.to_path_buf(),
            read_only,
            no_exec,
            what,
        });
    }
}

/// The paths of `paths` under the folder `root` (an absolute path without a trailing `/`),
/// relative to it: `Path::strip_prefix`'s answer for canonical paths, from one byte comparison
/// per path (the masked programs are a few hundred paths, matched against each library root on
/// every run).
fn under_root(paths: &[PathBuf], root: &str) -> Vec<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let root = root.as_bytes();
    paths
        .iter()
        .filter_map(|p| {
            let b = p.as_os_str().as_bytes();
            let rest = b.strip_prefix(root)?.strip_prefix(b"/")?;
            (!rest.is_empty()).then(|| PathBuf::from(std::ffi::OsStr::from_bytes(rest)))
        })
        .collect()
}

/// Plan the run directory: pure. Each step plans one tree of it, in the order they are made (a
/// folder before what it holds, a mount point before its bind); what the plan sets apart (the
/// request's own files, what is made late) is split off the steps as they come.
pub(crate) fn plan<'d>(spec: &RunDirSpec<'_, 'd>) -> RunDirPlan<'d> {
    let tree = Tree::new(runs_dir(spec.state).join(spec.run_id));
    let run_owner = (spec.uid, spec.gid);
    let mut p: Planned<'d> = Planned::default();
    p.root(&tree, spec.exec_dir);
    let lib_binds = p.usr(&tree, spec.masked, spec.lib_roots);
    p.skill(&tree, spec.bundle);
    p.workspace(&tree);
    p.io(&tree, spec.gid, spec.config_json);
    let request = p.split_off(|p| {
        let files = spec.request_files();
        p.write_dirs(&tree, &files);
        p.request(&tree, &files);
    });
    p.tmp(&tree, run_owner);
    p.dev(&tree);
    let etc_files = p.etc(&tree, spec);
    p.bind_mount_points(&tree, spec.other_binds, spec.lib_roots);
    // usr/bin/: its wrappers are made late.
    p.mkdir(tree.usr.join("bin"), 0o755, None);
    let mut late = p.etc_late(&tree, etc_files, spec.other_binds);
    late.extend(wrappers(&tree, spec.wrappers));
    late.extend(p.split_off(|p| p.absolute_links(&tree, spec.links)));
    p.host_mounts(&tree, spec.host_mounts);
    p.hidden_trees(&tree, spec.hidden_trees);
    p.writable_binds(&tree);
    RunDirPlan {
        state: spec.state.to_path_buf(),
        run_id: spec.run_id.to_string(),
        tmpfs: tmpfs_options(spec.disk_bytes, spec.gid),
        root: tree.run,
        ops: p.ops,
        late,
        request,
        lib_binds,
    }
}

/// The request's own files alone ([`RunDirPlan::request`]; nothing else in the plan): for a
/// spare sandbox (`run::spare`), whose run directory holds everything its band decides when a
/// request of that band comes. The same steps as [`plan`]'s (the workspace's folders its band
/// opens, then the request's files), so that the two agree (tested); without planning the whole
/// run again, which cost a spare's hand-over about 0.5 ms before its script could start.
pub(crate) fn plan_request<'d>(r: &RequestFiles<'_, 'd>) -> RunDirPlan<'d> {
    let tree = Tree::new(runs_dir(r.state).join(r.run_id));
    let mut p: Planned<'d> = Planned::default();
    let request = p.split_off(|p| {
        p.write_dirs(&tree, r);
        p.request(&tree, r);
    });
    RunDirPlan {
        state: r.state.to_path_buf(),
        run_id: r.run_id.to_string(),
        tmpfs: String::new(),
        root: tree.run,
        ops: Vec::new(),
        late: Vec::new(),
        request,
        lib_binds: Vec::new(),
    }
}

/// The run directory's tmpfs mount options: `disk_bytes` of space, and an inode a KiB of it.
fn tmpfs_options(disk_bytes: u64, gid: u32) -> String {
    let inodes = (disk_bytes / 1024).clamp(4096, 1 << 20);
    format!("size={disk_bytes},nr_inodes={inodes},mode=0710,uid=0,gid={gid}")
}

/// The folders of a run directory that [`plan`]'s steps fill.
struct Tree {
    /// `<state>/runs/<run_id>`: the tmpfs.
    run: PathBuf,
    /// `root/`: the sandbox's tree as band-server makes it.
    root: PathBuf,
    /// `view/`: `root/` bound again, read-only, with every mount of the tree on it.
    view: PathBuf,
    /// `root/usr`, `root/etc`, `root/skill`.
    usr: PathBuf,
    etc: PathBuf,
    skill: PathBuf,
    /// The writable folders: `workspace/`, `io/`, `tmp/`, `shm/` (the sandbox's `/dev/shm`).
    workspace: PathBuf,
    io: PathBuf,
    tmp: PathBuf,
    shm: PathBuf,
}

impl Tree {
    fn new(run: PathBuf) -> Tree {
        let root = run.join("root");
        Tree {
            view: run.join(VIEW),
            usr: root.join("usr"),
            etc: root.join("etc"),
            skill: root.join("skill"),
            workspace: run.join("workspace"),
            io: run.join("io"),
            tmp: run.join("tmp"),
            shm: run.join("shm"),
            root,
            run,
        }
    }
}

/// The steps of [`plan`], one tree each.
impl<'a> Planned<'a> {
    /// The steps `f` plans, taken out of [`Planned::ops`] (their paths stay known).
    fn split_off(&mut self, f: impl FnOnce(&mut Self)) -> Vec<FsOp<'a>> {
        let first = self.ops.len();
        f(self);
        self.ops.split_off(first)
    }

    /// root/: the sandbox's whole root, bound by bubblewrap in one bind at `/` through `view/`
    /// (each bind costs it a mount, a remount and a re-read of its mount table): `usr/`, `etc/`,
    /// `skill/` and the compatibility links, and a mount point for each bind (the writable ones,
    /// `/proc`, `/dev`, `/band`, absolute host paths).
    ///
    /// view/: the sandbox's root as bubblewrap binds it, whole, at `/` (one bind where it made
    /// five): `root/` bound again, read-only, with every mount of the tree made on it (by the
    /// steps that follow), none in `root/` itself, so that the tree's mounts exist once. Files,
    /// folders and links are made in `root/` (the same tmpfs, writable there), the late steps'
    /// too, and show through it as they come.
    fn root(&mut self, t: &Tree, exec_dir: &Path) {
        self.mkdir(t.root.clone(), 0o755, None);
        for d in ROOT_MOUNT_POINTS {
            self.mkdir(t.root.join(d), 0o755, None);
        }
        self.links(&t.root, "", ROOT_LINKS);
        self.mkdir(t.view.clone(), 0o755, None);
        self.bind(
            &t.root,
            &t.view,
            true,
            false,
            "failed to bind root/ read-only at view/".into(),
        );
        // /band: the run's exec folder, read-only (its programs run from there: not noexec);
        // only `io/` on it is bound writable (`writable_binds`).
        self.bind(
            exec_dir,
            &t.view.join("band"),
            true,
            false,
            format!("failed to bind {} at /band", exec_dir.display()),
        );
    }

    /// usr/: the sandbox's whole `/usr`, in the root's one bind. Each library tree the host has
    /// is a read-only, nosuid, nodev mount here, made in the initial user namespace (so locked
    /// for bubblewrap's copy): an overlay with the masks on top when the tree has masked files
    /// (one mount per tree, so the cost does not grow with the number of masks), else a bind of
    /// the host's tree. `bin/` holds the run's wrappers (made late). Returns the trees prepared
    /// with masks ([`RunDirPlan::lib_binds`]).
    fn usr(
        &mut self,
        t: &Tree,
        masked: &[PathBuf],
        lib_roots: &[String],
    ) -> Vec<(String, PathBuf)> {
        self.mkdir(t.usr.clone(), 0o755, None);
        if !masked.is_empty() {
            // Where a mask layer is built when the shared cache cannot hold it.
            self.mkdir(t.run.join("lib"), 0o755, None);
        }
        let mut lib_binds = Vec::new();
        for (i, lib) in crate::layers::fs::execmask::LIB_ROOTS.iter().enumerate() {
            if !lib_roots.iter().any(|r| r == lib) {
                continue;
            }
            let Some(name) = lib.strip_prefix("/usr/") else {
                continue;
            };
            self.mkdir(t.usr.join(name), 0o755, None);
            let target = t.view.join("usr").join(name);
            let rels = under_root(masked, lib);
            if rels.is_empty() {
                self.ops.push(FsOp::BindHost {
                    source: PathBuf::from(lib),
                    target,
                });
            } else {
                self.ops.push(FsOp::MaskLibrary {
                    index: i,
                    root: lib.to_string(),
                    rels,
                    target: target.clone(),
                });
                lib_binds.push((lib.to_string(), target));
            }
        }
        // `sbin/` and `local/bin/` are the same wrappers as `bin/`: a declared program called by
        // the absolute path it has on some host (`/usr/sbin/x`, `/usr/local/bin/x`) is the same
        // call.
        self.mkdir(t.usr.join("local"), 0o755, None);
        self.links(&t.usr, "/usr", &[("sbin", "bin"), ("local/bin", "../bin")]);
        lib_binds
    }

    /// skill/: root-owned, read-only and noexec (executable bits kept, but nothing of the bundle
    /// runs by its path: the skill's programs run through band-shim, `layers::cli::bundled`).
    fn skill(&mut self, t: &Tree, bundle: &'a [DecodedFile]) {
        self.mkdir(t.skill.clone(), 0o755, None);
        for f in bundle {
            self.mkdir_parents(&t.skill, &f.path, 0o755);
            let mode = (f.mode & 0o555) | 0o444;
            self.write(t.skill.join(&f.path), Cow::Borrowed(&f.data), mode, None);
        }
        self.bind(
            &t.skill,
            &t.view.join("skill"),
            true,
            true,
            "failed to bind skill/ read-only and noexec".into(),
        );
    }

    /// workspace/ (its folders and files are the request's: [`Planned::write_dirs`],
    /// [`Planned::request`]).
    fn workspace(&mut self, t: &Tree) {
        self.mkdir(t.workspace.clone(), 0o755, None);
    }

    /// The folders the band's `allow.write` opens, owned by the run: those the workspace has
    /// (all of them when the request does not say, `workspace_folders`). One it does not have is
    /// not made, as on the host: a script that refuses to write into an existing folder (a
    /// scaffolder's `my-package already exists`) would otherwise fail. The nearest folder on its
    /// way that the workspace has is opened for new entries instead: the run's group may add to
    /// it (the script makes the folder), and its sticky bit keeps the run from removing or
    /// renaming the files it does not own. What the run makes there outside `allow.write` is a
    /// refused write, as anywhere.
    fn write_dirs(&mut self, t: &Tree, spec: &RequestFiles<'_, 'a>) {
        let ws = &t.workspace;
        let (uid, gid) = (spec.uid, spec.gid);
        let has = |d: &str| {
            d.is_empty()
                || spec
                    .workspace_folders
                    .is_none_or(|f| f.iter().any(|x| x == d))
        };
        let owned: Vec<&String> = spec.write_dirs.iter().filter(|d| has(d)).collect();
        let under_owned = |a: &str| {
            owned
                .iter()
                .any(|d| d.is_empty() || a == d.as_str() || a.starts_with(&format!("{d}/")))
        };
        // Each owned folder, and the folders between it and an owned folder it is in (`out/x`
        // of `out/**` and `out/x/y/**`): the run may make entries in all of them.
        let mut chowned = std::collections::BTreeSet::new();
        for d in &owned {
            if d.is_empty() {
                if chowned.insert(String::new()) {
                    self.ops.push(FsOp::Chown {
                        path: ws.clone(),
                        uid,
                        gid,
                    });
                }
                continue;
            }
            self.mkdir_parents(ws, &format!("{d}/x"), 0o755);
            for a in band::policy::fs::folders_to(d).filter(|a| under_owned(a)) {
                if chowned.insert(a.to_string()) {
                    self.ops.push(FsOp::Chown {
                        path: ws.join(a),
                        uid,
                        gid,
                    });
                }
            }
        }
        let mut opened = std::collections::BTreeSet::new();
        for d in spec.write_dirs.iter().filter(|d| !has(d)) {
            let nearest = band::policy::fs::folders_to(d)
                .take_while(|a| has(a))
                .last()
                .unwrap_or("");
            if under_owned(nearest) || !opened.insert(nearest) {
                continue;
            }
            let path = if nearest.is_empty() {
                ws.clone()
            } else {
                self.mkdir_parents(ws, &format!("{nearest}/x"), 0o755);
                ws.join(nearest)
            };
            self.ops.push(FsOp::Mkdir {
                path,
                mode: 0o1775,
                owner: Some((0, gid)),
            });
        }
    }

    /// io/: sticky and group-writable, so the script can create output.json but cannot remove
    /// or replace input.json (the request's, [`Planned::request`]); and the config.
    fn io(&mut self, t: &Tree, gid: u32, config_json: Option<&'a [u8]>) {
        self.mkdir(t.io.clone(), 0o1770, Some((0, gid)));
        if let Some(cfg) = config_json {
            self.write(t.io.join("config.json"), Cow::Borrowed(cfg), 0o444, None);
        }
    }

    /// What is the request's own and not its band's ([`RunDirPlan::request`]): the workspace's
    /// files, with the folders they need, and the input.
    fn request(&mut self, t: &Tree, spec: &RequestFiles<'_, 'a>) {
        let ws = &t.workspace;
        let run_owner = Some((spec.uid, spec.gid));
        let under_owned = |rel: &str| {
            spec.write_dirs
                .iter()
                .any(|d| d.is_empty() || rel == d || rel.starts_with(&format!("{d}/")))
        };
        for f in spec.workspace {
            // Directories created for a file are the run's when they lie in a writable prefix.
            let mut cur = String::new();
            let comps: Vec<&str> = f.path.split('/').collect();
            for c in &comps[..comps.len() - 1] {
                if !cur.is_empty() {
                    cur.push('/');
                }
                cur.push_str(c);
                let path = ws.join(&cur);
                if !self.dirs.contains(&path) && !self.files.contains(&path) {
                    self.mkdir(
                        path,
                        0o755,
                        if under_owned(&cur) { run_owner } else { None },
                    );
                }
            }
            let path = ws.join(&f.path);
            if (spec.write_allowed)(&f.path) {
                self.write(
                    path,
                    Cow::Borrowed(&f.data),
                    (f.mode & 0o777) | 0o600,
                    run_owner,
                );
            } else {
                let mode = if f.mode & 0o111 != 0 { 0o555 } else { 0o444 };
                self.write(path, Cow::Borrowed(&f.data), mode, None);
            }
        }
        self.write(
            t.io.join("input.json"),
            Cow::Borrowed(spec.input_json),
            0o444,
            None,
        );
    }

    /// tmp/ and shm/: the run's. shm/ is the sandbox's `/dev/shm`, where POSIX shared memory
    /// and semaphores live (`shm_open`, `sem_open`: Python's `multiprocessing`, Chromium); in
    /// the run directory's tmpfs, so its size counts against the run's disk limit with `/tmp`'s
    /// and the workspace's.
    fn tmp(&mut self, t: &Tree, run_owner: (u32, u32)) {
        self.mkdir(t.tmp.clone(), 0o700, Some(run_owner));
        self.mkdir(t.shm.clone(), 0o700, Some(run_owner));
    }

    /// /dev: a tmpfs of its own on the view, at the mount point root/dev, so in bubblewrap's one
    /// bind of the root (its `--dev` would make six binds, each with a read-only remount and a
    /// re-read of its mount table). Its nodes are made with `mknod` (band-server is root in the
    /// initial namespace), where a bind of the host's node and its remount cost two mount calls
    /// each. Read-only, nosuid and noexec, and with the run's devpts the only mounts of the tree
    /// without nodev (which is why bubblewrap binds the root with `--dev-bind`).
    fn dev(&mut self, t: &Tree) {
        self.ops.push(FsOp::Dev {
            target: t.view.join("dev"),
        });
    }

    /// etc/: the synthetic `/etc`, and the mount points of the host's folders bound read-only
    /// over it (bound whole as `/etc`: one mount, not one per file): the CA certificates and
    /// fontconfig's folder. Returns its files, made late but for those a bind lands on
    /// ([`Planned::etc_late`]).
    fn etc(&mut self, t: &Tree, spec: &RunDirSpec<'_, 'a>) -> Vec<FsOp<'a>> {
        self.mkdir(t.etc.clone(), 0o755, None);
        let files = self.split_off(|p| p.etc_files(&t.etc, spec));
        self.mkdir(t.etc.join("ssl"), 0o755, None);
        for d in ETC_HOST_DIRS {
            self.mkdir(t.etc.join(d), 0o755, None);
            self.ops.push(FsOp::BindHost {
                source: Path::new("/etc").join(d),
                target: t.view.join("etc").join(d),
            });
        }
        // The run's CA bundle over the system bundles the view has (once the host's folders
        // are bound): a program that reads only its system's path trusts the run's CA too.
        if let Some(bundle) = spec.ca_bundle {
            let source = t.run.join(CA_BUNDLE_FILE);
            self.write(
                source.clone(),
                Cow::Owned(bundle.as_bytes().to_vec()),
                0o444,
                None,
            );
            for path in SYSTEM_BUNDLES {
                if let Ok(rel) = Path::new(path).strip_prefix("/") {
                    self.ops.push(FsOp::BindOverView {
                        source: source.clone(),
                        target: t.view.join(rel),
                    });
                }
            }
        }
        files
    }

    /// The files of `/etc`: for the script's programs, never bubblewrap or band-jail (static).
    fn etc_files(&mut self, etc: &Path, spec: &RunDirSpec<'_, 'a>) {
        let text = |s: String| Cow::Owned(s.into_bytes());
        self.write(
            etc.join("passwd"),
            text(synth_passwd(spec.user, spec.uid, spec.gid)),
            0o444,
            None,
        );
        self.write(
            etc.join("group"),
            text(synth_group(spec.user, spec.gid)),
            0o444,
            None,
        );
        self.write(etc.join("hosts"), text(HOSTS.to_string()), 0o444, None);
        self.write(
            etc.join(BASH_ENV_FILE),
            Cow::Borrowed(BASH_ENV.as_bytes()),
            0o444,
            None,
        );
        if let Some(bundle) = spec.ca_bundle {
            self.write(
                etc.join("band-ca.pem"),
                text(bundle.to_string()),
                0o444,
                None,
            );
        }
        if let (Some(store), Ok(rel)) = (
            spec.java_truststore,
            Path::new(JAVA_TRUSTSTORE).strip_prefix("/etc"),
        ) {
            self.write(etc.join(rel), Cow::Owned(store.to_vec()), 0o444, None);
        }
        match spec.resolv_conf {
            Some(resolv) => {
                self.write(
                    etc.join("resolv.conf"),
                    text(resolv.to_string()),
                    0o444,
                    None,
                );
                let nss = NSSWITCH.replace("hosts: files\n", "hosts: files dns\n");
                self.write(etc.join("nsswitch.conf"), text(nss), 0o444, None);
            }
            None => self.write(
                etc.join("nsswitch.conf"),
                text(NSSWITCH.to_string()),
                0o444,
                None,
            ),
        }
        // The dynamic linker's cache: a copy (44 KB here, rewritten only by `ldconfig`), not a
        // bind.
        let cache = etc.join("ld.so.cache");
        self.files.insert(cache.clone());
        self.ops.push(FsOp::Copy {
            source: PathBuf::from(LD_SO_CACHE),
            path: cache,
            mode: 0o444,
            optional: false,
        });
        // The host's local time zone, where it has one (a run's dates are the host's, as its
        // script's on the host): the zone's file, and Debian's name of it (read by Java and
        // Python's tzlocal). Without them a run is in UTC.
        for (host, name) in LOCAL_TIME {
            let at = etc.join(name);
            self.files.insert(at.clone());
            self.ops.push(FsOp::Copy {
                source: PathBuf::from(host),
                path: at,
                mode: 0o444,
                optional: true,
            });
        }
    }

    /// The mount points of the other binds ([`RunDirSpec::other_binds`]) in the tree, which is
    /// read-only once bound: under `/etc`, under `/usr` outside the library trees mounted there
    /// (which show the host's paths), and elsewhere under the root. A path the tree has already
    /// is its own mount point.
    fn bind_mount_points(
        &mut self,
        t: &Tree,
        other_binds: &[(PathBuf, bool)],
        lib_roots: &[String],
    ) {
        for (path, is_dir) in other_binds {
            let (base, rel) = match (path.strip_prefix("/etc"), path.strip_prefix("/usr")) {
                (Ok(rel), _) => (t.etc.clone(), rel),
                (_, Ok(rel))
                    if !lib_roots
                        .iter()
                        .any(|r| path.starts_with(r) || Path::new(r).starts_with(path)) =>
                {
                    (t.usr.clone(), rel)
                }
                (Err(_), Err(_)) => match path.strip_prefix("/") {
                    Ok(rel) => (t.root.clone(), rel),
                    Err(_) => continue,
                },
                _ => continue,
            };
            let parts: Vec<_> = rel.components().collect();
            let mut at = base;
            for (i, c) in parts.iter().enumerate() {
                at = at.join(c);
                if self.dirs.contains(&at) || self.files.contains(&at) {
                    continue;
                }
                if i + 1 < parts.len() || *is_dir {
                    self.mkdir(at.clone(), 0o755, None);
                } else {
                    self.write(at.clone(), Cow::Borrowed(b""), 0o444, None);
                }
            }
        }
    }

    /// Of the files of `/etc` ([`Planned::etc`]), those made late ([`RunDirPlan::late`]); one a
    /// bind lands on (`allow.read: [/etc/hosts]`) is its mount point, so a step of its own: it
    /// must be there when bubblewrap binds.
    fn etc_late(
        &mut self,
        t: &Tree,
        files: Vec<FsOp<'a>>,
        other_binds: &[(PathBuf, bool)],
    ) -> Vec<FsOp<'a>> {
        let mount_points: std::collections::BTreeSet<PathBuf> = other_binds
            .iter()
            .filter_map(|(path, _)| path.strip_prefix("/").ok().map(|rel| t.root.join(rel)))
            .collect();
        let (late, now): (Vec<_>, Vec<_>) = files.into_iter().partition(|op| {
            matches!(op, FsOp::Write { path, .. } | FsOp::Copy { path, .. }
                if !mount_points.contains(path))
        });
        self.ops.extend(now);
        late
    }

    /// Symlinks at absolute sandbox paths (a program's cache path → its wrapper, its
    /// installation around it), with their parent folders: late too (34 folders and 34 links for
    /// the essential commands alone), since only the script's programs follow them, never
    /// bubblewrap.
    fn absolute_links(&mut self, t: &Tree, links: &[(PathBuf, PathBuf)]) {
        for (link, target) in links {
            let Ok(rel) = link.strip_prefix("/") else {
                continue;
            };
            let parts: Vec<_> = rel.components().collect();
            let mut at = t.root.clone();
            for c in &parts[..parts.len().saturating_sub(1)] {
                at = at.join(c);
                if !self.dirs.contains(&at) {
                    self.mkdir(at.clone(), 0o755, None);
                }
            }
            if !self.files.insert(t.root.join(rel)) {
                continue;
            }
            self.ops.push(FsOp::Symlink {
                target: target.clone(),
                link: t.root.join(rel),
                name: link.display().to_string(),
            });
        }
    }

    /// host/<n>: the mount points of the absolute `allow.read` / `allow.write` prefixes, each
    /// with its bind (noexec).
    fn host_mounts(&mut self, t: &Tree, host_mounts: &[HostMount]) {
        if !host_mounts.is_empty() {
            self.mkdir(t.run.join("host"), 0o755, None);
        }
        for (i, m) in host_mounts.iter().enumerate() {
            let target = t.run.join("host").join(i.to_string());
            if m.is_dir {
                self.mkdir(target.clone(), 0o755, None);
            } else {
                self.write(target.clone(), Cow::Borrowed(b""), 0o444, None);
            }
            self.bind(
                &m.host,
                &target,
                !m.writable,
                true,
                format!("failed to bind {}", m.host.display()),
            );
        }
    }

    /// trees/<n>: the runtime trees the run's uid cannot reach on the host, bound read-only by
    /// band-server (root), so that bubblewrap (the run's uid) binds them from here. Only the
    /// tree itself: nothing else of the home it is in.
    fn hidden_trees(&mut self, t: &Tree, trees: &[PathBuf]) {
        if trees.is_empty() {
            return;
        }
        self.mkdir(t.run.join("trees"), 0o755, None);
        for (i, host) in trees.iter().enumerate() {
            let target = t.run.join("trees").join(i.to_string());
            self.mkdir(target.clone(), 0o755, None);
            self.bind(
                host,
                &target,
                true,
                false,
                format!("failed to bind {}", host.display()),
            );
        }
    }

    /// The writable folders, bound noexec on the view (`dev/shm` on the mount point in the
    /// read-only `/dev`, [`Planned::dev`] being before).
    fn writable_binds(&mut self, t: &Tree) {
        for (d, at) in [
            (&t.workspace, "workspace"),
            (&t.tmp, "tmp"),
            (&t.io, "band/io"),
            (&t.shm, "dev/shm"),
        ] {
            self.bind(
                d,
                &t.view.join(at),
                false,
                true,
                format!("failed to bind {} at /{at}", d.display()),
            );
        }
    }
}

/// The run's wrappers: `usr/bin/<name>` → band-shim, one per command (made late).
fn wrappers<'a>(t: &Tree, names: &[String]) -> Vec<FsOp<'a>> {
    let bin = t.usr.join("bin");
    names
        .iter()
        .map(|name| FsOp::Symlink {
            target: PathBuf::from("/band/shim"),
            link: bin.join(name),
            name: name.clone(),
        })
        .collect()
}

/// A full tmpfs, said in the band's words.
fn no_space_hint(e: SetupError) -> SetupError {
    if e.message.contains("No space left") {
        e.with_hint("the skill and workspace do not fit in maxDiskBytes; raise it in the band")
    } else {
        e
    }
}

/// A created run directory. Unmounted and removed by [`RunDir::teardown`] or on drop.
#[derive(Debug)]
pub(crate) struct RunDir {
    pub(crate) root: PathBuf,
    mounted: bool,
    exists: bool,
}

impl RunDir {
    /// Create and mount the run directory, then apply the plan's steps.
    pub(crate) fn create(plan: &RunDirPlan<'_>) -> SetupResult<RunDir> {
        let runs = runs_dir(&plan.state);
        dir_with_mode(&runs, 0o711, true, None).layer(
            Layer::Filesystem,
            format!("failed to make {}", runs.display()),
        )?;
        let root = plan.root.clone();
        fs::create_dir(&root).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                SetupError::new(
                    Layer::Filesystem,
                    format!("run directory {} already exists", root.display()),
                )
                .with_hint(
                    "run ids must be unique; a stale one is removed by `band-server janitor`",
                )
            } else {
                SetupError::new(
                    Layer::Filesystem,
                    format!("failed to create {}: {e}", root.display()),
                )
            }
        })?;
        let mut dir = RunDir {
            root,
            mounted: false,
            exists: true,
        };
        sys::mount_tmpfs(&dir.root, &plan.tmpfs).layer(
            Layer::Filesystem,
            format!("failed to mount a tmpfs on {}", dir.root.display()),
        )?;
        dir.mounted = true;
        sys::make_private(&dir.root).layer(
            Layer::Filesystem,
            format!("failed to make {} private", dir.root.display()),
        )?;
        plan.ops
            .iter()
            .chain(&plan.request)
            .try_for_each(|op| apply_op(op, plan))
            .map_err(no_space_hint)?;
        Ok(dir)
    }

    /// Make the request's own files ([`RunDirPlan::request`]) in a run directory made without
    /// them: a spare sandbox's, when the request it serves comes. `plan` is that request's plan
    /// (the same run directory: the spare's run id).
    pub(crate) fn write_request(plan: &RunDirPlan<'_>) -> SetupResult<()> {
        plan.request
            .iter()
            .try_for_each(|op| apply_op(op, plan))
            .map_err(no_space_hint)
    }

    /// Apply the plan's late steps ([`RunDirPlan::late`]) to the run directory `create` made.
    pub(crate) fn finish(plan: &RunDirPlan<'_>) -> SetupResult<()> {
        plan.late.iter().try_for_each(|op| apply_op(op, plan))
    }

    /// Unmount (lazily, with everything below) and remove. Idempotent.
    pub(crate) fn teardown(&mut self) -> SetupResult<()> {
        if self.mounted {
            sys::umount_detach(&self.root).layer(
                Layer::Filesystem,
                format!("failed to unmount {}", self.root.display()),
            )?;
            self.mounted = false;
        }
        if self.exists {
            match fs::remove_dir(&self.root) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(SetupError::new(
                        Layer::Filesystem,
                        format!("failed to remove {}: {e}", self.root.display()),
                    ));
                }
            }
            self.exists = false;
        }
        Ok(())
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            crate::say!("band-server: {e}");
        }
    }
}

fn apply_op(op: &FsOp<'_>, plan: &RunDirPlan<'_>) -> SetupResult<()> {
    let fsl = Layer::Filesystem;
    match op {
        FsOp::Mkdir { path, mode, owner } => mkdir(path, *mode, *owner),
        FsOp::Chown { path, uid, gid } => chown(path, *uid, *gid),
        FsOp::Write {
            path,
            data,
            mode,
            owner,
        } => write_new(path, data, *mode, *owner),
        FsOp::Copy {
            source,
            path,
            mode,
            optional,
        } => match fs::read(source) {
            Err(e) if *optional && e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            data => write_new(path, &named(data)?, *mode, None),
        },
        FsOp::Symlink { target, link, name } => fs_err::os::unix::fs::symlink(target, link)
            .layer(fsl, format!("failed to create wrapper {name}")),
        FsOp::Bind {
            source,
            target,
            read_only,
            no_exec,
            what,
        } => sys::bind_mount(
            source,
            target,
            BindFlags {
                read_only: *read_only,
                no_exec: *no_exec,
            },
        )
        .layer(fsl, what),
        FsOp::BindHost { source, target } => {
            if fs::symlink_metadata(source).is_err() {
                return Ok(());
            }
            sys::bind_mount(
                source,
                target,
                BindFlags {
                    read_only: true,
                    no_exec: false,
                },
            )
            .layer(fsl, format!("failed to bind {}", source.display()))
        }
        FsOp::BindOverView { source, target } => {
            if !fs::symlink_metadata(target).is_ok_and(|m| m.file_type().is_file()) {
                return Ok(());
            }
            sys::bind_mount(
                source,
                target,
                BindFlags {
                    read_only: true,
                    no_exec: true,
                },
            )
            .layer(
                Layer::Network,
                format!(
                    "egress proxy: failed to bind the run's CA bundle over {}",
                    target.display()
                ),
            )
        }
        FsOp::Dev { target } => make_dev(target).layer(fsl, "failed to make /dev"),
        FsOp::MaskLibrary {
            index,
            root,
            rels,
            target,
        } => {
            // The layer comes from [`crate::layers::fs::maskcache`] (built once, shared by later
            // runs); only when that cache is full is it built here, in the run's own directory.
            let rels: Vec<&Path> = rels.iter().map(PathBuf::as_path).collect();
            let layer = match crate::layers::fs::maskcache::shared_layer(
                &plan.state,
                &plan.run_id,
                *index,
                root,
                &rels,
            )? {
                Some(shared) => shared,
                None => {
                    let private = plan.root.join("lib").join(format!("mask{index}"));
                    mkdir(&private, 0o755, None)?;
                    crate::layers::fs::maskcache::build_layer(&private, &rels)?;
                    private
                }
            };
            sys::mount_overlay_ro(target, &[&layer, Path::new(root)])
                .layer(fsl, format!("failed to mount the masked overlay of {root}"))
        }
    }
}

/// Unmount and remove a run directory left behind by a dead server (janitor). `Ok(false)`: there
/// was nothing at `path` (its run removed it itself since the janitor listed it), so nothing was
/// removed and nothing is to be reported.
pub(crate) fn remove_stale(path: &Path) -> std::io::Result<bool> {
    // Unmount until nothing is mounted there any more (a tmpfs, possibly stacked).
    let mut unmounted = false;
    for _ in 0..8 {
        if sys::umount_detach(path).is_err() {
            break;
        }
        unmounted = true;
    }
    match fs::remove_dir(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(unmounted),
        // Not a mount point and not empty: never on a tmpfs we made; clean it anyway.
        Err(_) => fs::remove_dir_all(path).map(|()| true),
    }
}

fn chown(p: &Path, uid: u32, gid: u32) -> SetupResult<()> {
    std::os::unix::fs::lchown(p, Some(uid), Some(gid)).layer(
        Layer::Filesystem,
        format!("failed to chown {}", p.display()),
    )
}

/// [`FsOp::Dev`]: the sandbox's `/dev` at `target`. Every error names its path.
fn make_dev(target: &Path) -> std::io::Result<()> {
    let at = |p: &Path| {
        let p = p.to_path_buf();
        move |e: std::io::Error| std::io::Error::new(e.kind(), format!("{}: {e}", p.display()))
    };
    sys::mount_dev_tmpfs(target).map_err(at(target))?;
    for d in ["shm", "pts"] {
        fresh_dir_with_mode(&target.join(d), 0o755, None)?;
    }
    for (name, major, minor) in DEV_NODES {
        let node = target.join(name);
        sys::mknod_char(&node, *major, *minor).map_err(at(&node))?;
    }
    for (link, to) in DEV_LINKS {
        fs::os::unix::fs::symlink(to, target.join(link))?;
    }
    sys::remount_read_only(target).map_err(at(target))?;
    let pts = target.join("pts");
    sys::mount_devpts(&pts).map_err(at(&pts))
}

/// An `fs_err` error already says what failed, on which path and why: that is the message (a
/// prefix naming the path again said it twice).
fn named<T>(r: std::io::Result<T>) -> SetupResult<T> {
    r.map_err(|e| SetupError::new(Layer::Filesystem, e.to_string()))
}

fn mkdir(p: &Path, mode: u32, owner: Option<(u32, u32)>) -> SetupResult<()> {
    named(fresh_dir_with_mode(p, mode, owner))
}

fn write_new(p: &Path, data: &[u8], mode: u32, owner: Option<(u32, u32)>) -> SetupResult<()> {
    let mut f = named(
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(p),
    )?;
    named(f.write_all(data))?;
    if let Some((u, g)) = owner {
        std::os::unix::fs::fchown(&f, Some(u), Some(g)).layer(
            Layer::Filesystem,
            format!("failed to chown {}", p.display()),
        )?;
    }
    named(f.set_permissions(std::fs::Permissions::from_mode(mode)))
}

/// The host's dynamic linker cache, copied into the synthetic `/etc` ([`FsOp::Copy`]).
pub(crate) const LD_SO_CACHE: &str = "/etc/ld.so.cache";

/// The host's local time zone, copied into the synthetic `/etc` where the host has it (an
/// optional [`FsOp::Copy`]), each with its name there: the zone's TZif file (`/etc/localtime`,
/// a link on most systems, read through it) and Debian's name of the zone.
pub(crate) const LOCAL_TIME: [(&str, &str); 2] = [
    ("/etc/localtime", "localtime"),
    ("/etc/timezone", "timezone"),
];

/// Host folders of `/etc` bound over the run's `etc/` (their mount points are made there), each
/// only if the host has it: shared configuration of libraries any program may load, never a
/// secret: the CA certificates (TLS), and fontconfig's `fonts` (without it every program that
/// draws text, LibreOffice converting a document, says "Fontconfig error: Cannot load default
/// config file" and picks fonts without its aliases).
pub const ETC_HOST_DIRS: &[&str] = &["ssl/certs", "ca-certificates", "fonts"];

/// The run's CA bundle in the run directory, outside the tree: the file bound over the system
/// bundles ([`FsOp::BindOverView`]).
const CA_BUNDLE_FILE: &str = "ca-bundle.pem";

/// `/etc/passwd` inside the sandbox: root and this run's user only (home `/tmp`, no shell).
pub(crate) fn synth_passwd(user: &str, uid: u32, gid: u32) -> String {
    format!(
        "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n{user}:x:{uid}:{gid}:band run:/tmp:/usr/sbin/nologin\n"
    )
}

/// `/etc/group` inside the sandbox: root and this run's group only.
pub(crate) fn synth_group(user: &str, gid: u32) -> String {
    format!("root:x:0:\n{user}:x:{gid}:\n")
}

pub(crate) const HOSTS: &str =
    "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\tband\n";
/// The file in the run's `/etc` that `BASH_ENV` names (`bwrap::sandbox_env`), read by every
/// non-interactive bash in the sandbox.
pub(crate) const BASH_ENV_FILE: &str = "band-bash-env";

/// Its text: bash calls `command_not_found_handle` when a name is not on `PATH`; it asks
/// band-server about the call through band-shim, which records a denial when the name is a host
/// program the band does not declare, and answers "not available" (127) either way. Only a
/// report: the program is not in the sandbox, and nothing here can start it. `command -v` still
/// finds nothing, so `command -v tool || fallback` keeps working.
pub(crate) const BASH_ENV: &str = "# band: report a command this sandbox does not have (see docs/security.md)\n\
command_not_found_handle() { exec -a \"$1\" /band/shim \"${@:2}\"; }\n";

pub(crate) const NSSWITCH: &str = "passwd: files\ngroup: files\nshadow: files\nhosts: files\nnetworks: files\nprotocols: files\nservices: files\n";

/// The workspace directory a relative `allow.write` pattern lets the run create files in
/// (`band::policy::fs::write_dir`).
pub(crate) use band::policy::fs::write_dir;

/// The host path an absolute pattern needs bound: its static prefix.
/// `/data/**` → `/data`, `/srv/a/*.csv` → `/srv/a`, `/data/input.csv` → `/data/input.csv`.
pub(crate) fn absolute_prefix(pattern: &str) -> Option<PathBuf> {
    let p = FsPattern::parse(pattern).ok()?;
    p.is_absolute().then(|| PathBuf::from(p.static_prefix()))
}

/// Why a host path cannot be bound into the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum HostMountError {
    #[error("{} would cover {reserved}", .path.display())]
    Covers {
        path: PathBuf,
        reserved: &'static str,
    },
    #[error("{} is inside {reserved}, which the sandbox manages itself", .path.display())]
    Inside {
        path: PathBuf,
        reserved: &'static str,
    },
    #[error("{} overlaps band-server's state directory", .0.display())]
    StateDir(PathBuf),
    #[error("{} is never exposed", .0.display())]
    Secret(PathBuf),
}

/// Refuse a host mount at `p` if it would cover or sit inside a reserved path, or inside the
/// server's state directory.
pub(crate) fn check_host_mount_path(p: &Path, state: &Path) -> Result<(), HostMountError> {
    use band::policy::place::SANDBOX_TREES;
    // `/` and the paths lint refuses a pattern above.
    for r in std::iter::once("/").chain(SANDBOX_TREES.iter().map(|t| t.path)) {
        if Path::new(r).starts_with(p) {
            return Err(HostMountError::Covers {
                path: p.to_path_buf(),
                reserved: r,
            });
        }
    }
    for r in SANDBOX_TREES
        .iter()
        .filter(|t| !t.bind_inside)
        .map(|t| t.path)
    {
        if p.starts_with(r) {
            return Err(HostMountError::Inside {
                path: p.to_path_buf(),
                reserved: r,
            });
        }
    }
    if p.starts_with(state) || state.starts_with(p) {
        return Err(HostMountError::StateDir(p.to_path_buf()));
    }
    for secret in band::policy::place::SECRET {
        if p.starts_with(secret) {
            return Err(HostMountError::Secret(p.to_path_buf()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn paths_under_a_library_root_are_what_strip_prefix_says_of_canonical_paths() {
        let paths: Vec<PathBuf> = [
            "/usr/lib/apt/apt-helper",
            "/usr/lib64/ld-linux-x86-64.so.2",
            "/usr/libexec/at-spi-bus-launcher",
            "/usr/lib/x86_64-linux-gnu/a b/ü",
            "/usr/lib",
            "/usr/library/x",
            "/usr/share/doc/x",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        for root in crate::layers::fs::execmask::LIB_ROOTS {
            let by_components: Vec<PathBuf> = paths
                .iter()
                .filter_map(|p| p.strip_prefix(root).ok())
                .filter(|r| !r.as_os_str().is_empty())
                .map(Path::to_path_buf)
                .collect();
            assert_eq!(under_root(&paths, root), by_components, "{root}");
        }
        assert_eq!(
            under_root(&paths, "/usr/lib"),
            [
                PathBuf::from("apt/apt-helper"),
                PathBuf::from("x86_64-linux-gnu/a b/ü")
            ]
        );
    }

    /// What every spec here shares: nothing in the run but its identity and an empty input.
    /// Each test sets the fields it is about (`RunDirSpec { …, ..bare(&never) }`).
    fn bare<'a>(write_allowed: &'a dyn Fn(&str) -> bool) -> RunDirSpec<'a, 'a> {
        RunDirSpec {
            other_binds: &[],
            hidden_trees: &[],
            links: &[],
            exec_dir: Path::new("/run/band/exec/runs/0123456789abcdef"),
            state: Path::new("/run/band"),
            run_id: "0123456789abcdef",
            disk_bytes: 1 << 20,
            uid: 900,
            gid: 900,
            user: "band-run-0",
            bundle: &[],
            workspace: &[],
            write_allowed,
            write_dirs: &[],
            workspace_folders: None,
            input_json: b"{}",
            config_json: None,
            wrappers: &[],
            host_mounts: &[],
            masked: &[],
            lib_roots: &[],
            resolv_conf: None,
            ca_bundle: None,
            java_truststore: None,
        }
    }

    #[test]
    fn bash_env_is_the_file_bash_reads() {
        let sandbox = crate::layers::process::bwrap::SANDBOX_BASH_ENV;
        assert_eq!(sandbox, format!("/etc/{BASH_ENV_FILE}"));
        assert!(BASH_ENV.contains(crate::layers::process::bwrap::SANDBOX_SHIM));
    }

    #[test]
    fn skill_dev_and_every_writable_directory_are_noexec() {
        let bundle = [DecodedFile {
            path: "bin/tool".into(),
            mode: 0o755,
            data: b"\x7fELF".to_vec(),
        }];
        let never = |_: &str| false;
        let plan = plan(&RunDirSpec {
            bundle: &bundle,
            ..bare(&never)
        });
        let root = Path::new("/run/band/runs/0123456789abcdef");
        let rel = |p: &Path| p.strip_prefix(root).unwrap_or(p).display().to_string();
        let noexec: Vec<(String, String, bool)> = plan
            .ops
            .iter()
            .filter_map(|op| match op {
                FsOp::Bind {
                    source,
                    target,
                    read_only,
                    no_exec: true,
                    ..
                } => Some((rel(source), rel(target), *read_only)),
                _ => None,
            })
            .collect();
        let s = |from: &str, to: &str, ro: bool| (from.to_string(), to.to_string(), ro);
        assert_eq!(
            noexec,
            vec![
                s("root/skill", "view/skill", true),
                s("workspace", "view/workspace", false),
                s("tmp", "view/tmp", false),
                s("io", "view/band/io", false),
                s("shm", "view/dev/shm", false),
            ]
        );
        // The file keeps its mode (band-shim stands in for it when a `./` rule names it).
        assert!(plan.ops.contains(&FsOp::Write {
            path: root.join("root/skill/bin/tool"),
            data: Cow::Borrowed(b"\x7fELF"),
            mode: 0o555,
            owner: None,
        }));
    }

    /// The request's own files (the workspace's, with the folders they need, and the input) are
    /// apart from everything its band decides (`request`), so that a spare sandbox can be built
    /// without them and make them when a request comes; the writable folders a band's
    /// `allow.write` opens are the band's, made with the rest.
    #[test]
    fn the_requests_own_files_are_apart_from_the_bands() {
        let ws = [
            DecodedFile {
                path: "docs/a.md".into(),
                mode: 0o644,
                data: b"a".to_vec(),
            },
            DecodedFile {
                path: "out/old.txt".into(),
                mode: 0o644,
                data: b"o".to_vec(),
            },
        ];
        let writes = |p: &str| p.starts_with("out/");
        let dirs = ["out".to_string()];
        let spec = RunDirSpec {
            workspace: &ws,
            write_dirs: &dirs,
            input_json: b"{\"n\":1}",
            ..bare(&writes)
        };
        let plan = plan(&spec);
        // A spare's hand-over plans them alone: the same operations, in the same run directory.
        let alone = plan_request(&spec.request_files());
        assert_eq!(alone.request, plan.request);
        assert_eq!(alone.root, plan.root);
        assert!(alone.ops.is_empty() && alone.late.is_empty());
        let root = Path::new("/run/band/runs/0123456789abcdef");
        let paths = |ops: &[FsOp<'_>]| -> Vec<String> {
            ops.iter()
                .filter_map(|op| match op {
                    FsOp::Mkdir { path, .. } | FsOp::Write { path, .. } => Some(path),
                    _ => None,
                })
                .filter_map(|p| p.strip_prefix(root).ok())
                .filter(|p| p.starts_with("workspace") || p.starts_with("io"))
                .map(|p| p.display().to_string())
                .collect()
        };
        assert_eq!(
            paths(&plan.request),
            [
                "workspace/out",
                "workspace/docs",
                "workspace/docs/a.md",
                "workspace/out/old.txt",
                "io/input.json"
            ]
        );
        assert_eq!(paths(&plan.ops), ["workspace", "io"]);
        // The file under a writable folder is the run's, the other root's.
        assert!(plan.request.contains(&FsOp::Write {
            path: root.join("workspace/out/old.txt"),
            data: Cow::Borrowed(b"o"),
            mode: 0o644 | 0o600,
            owner: Some((900, 900)),
        }));
        assert!(plan.request.contains(&FsOp::Write {
            path: root.join("workspace/docs/a.md"),
            data: Cow::Borrowed(b"a"),
            mode: 0o444,
            owner: None,
        }));
    }

    /// A folder `allow.write` opens that the workspace does not have is not made (a scaffolder
    /// refuses an existing one); the nearest folder on its way that the workspace has is opened
    /// for new entries (the run's group, sticky), once, and not where the run owns it already.
    /// A request that does not say which folders exist gets them all, as before. A write folder
    /// inside another owns the folders between them.
    #[test]
    fn a_write_folder_the_workspace_lacks_is_left_for_the_script_to_make() {
        let never = |_: &str| false;
        let dirs = [
            "docs/new".to_string(),
            "my-package".to_string(),
            "new/a".to_string(),
            "out".to_string(),
            "out/reports".to_string(),
        ];
        let has = ["docs".to_string(), "out".to_string()];
        let spec = RunDirSpec {
            write_dirs: &dirs,
            workspace_folders: Some(&has),
            ..bare(&never)
        };
        let planned = plan(&spec);
        assert_eq!(plan_request(&spec.request_files()).request, planned.request);
        let ws = Path::new("/run/band/runs/0123456789abcdef/workspace");
        let opened = |rel: &str| FsOp::Mkdir {
            path: if rel.is_empty() {
                ws.to_path_buf()
            } else {
                ws.join(rel)
            },
            mode: 0o1775,
            owner: Some((0, 900)),
        };
        let made: Vec<&FsOp<'_>> = planned
            .request
            .iter()
            .filter(|op| matches!(op, FsOp::Mkdir { .. } | FsOp::Chown { .. }))
            .collect();
        assert_eq!(
            made,
            [
                &FsOp::Mkdir {
                    path: ws.join("out"),
                    mode: 0o755,
                    owner: None
                },
                &FsOp::Chown {
                    path: ws.join("out"),
                    uid: 900,
                    gid: 900
                },
                &FsOp::Mkdir {
                    path: ws.join("docs"),
                    mode: 0o755,
                    owner: None
                },
                &opened("docs"),
                // `my-package` and `new/a` share the root; `out/reports` is under `out`, the run's.
                &opened(""),
            ]
        );
        // The folders a plan makes the run's, below the workspace.
        let chowned = |p: &RunDirPlan<'_>| -> Vec<PathBuf> {
            p.request
                .iter()
                .filter_map(|op| match op {
                    FsOp::Chown { path, .. } => path.strip_prefix(ws).ok().map(Path::to_path_buf),
                    _ => None,
                })
                .collect()
        };
        // Unsaid: every folder is made and the run's.
        let all = plan(&RunDirSpec {
            workspace_folders: None,
            ..spec
        });
        assert_eq!(
            chowned(&all),
            ["docs/new", "my-package", "new/a", "out", "out/reports"].map(PathBuf::from)
        );
        // A write folder inside another (`out/**` and `out/x/y/**`): the folder between them is
        // in the outer one's reach, so the run's too (it was root's, and the run's `mkdir
        // out/x/new` failed).
        let nested = ["out".to_string(), "out/x/y".to_string()];
        let nested_plan = plan(&RunDirSpec {
            write_dirs: &nested,
            workspace_folders: None,
            ..spec
        });
        assert_eq!(
            chowned(&nested_plan),
            ["out", "out/x", "out/x/y"].map(PathBuf::from)
        );
    }

    /// An optional copy (the host's time zone) is skipped where the host has no such file, and
    /// made where it has; a required one (the linker's cache) fails, naming its path.
    #[test]
    fn an_optional_copy_is_skipped_where_the_host_has_no_file() {
        let t = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let never = |_: &str| false;
        let plan = plan(&bare(&never));
        let copy = |source: &str, to: &str, optional: bool| FsOp::Copy {
            source: t.path().join(source),
            path: t.path().join(to),
            mode: 0o444,
            optional,
        };
        fs_err::write(t.path().join("zone"), "TZif").unwrap_or_else(|e| panic!("{e}"));
        assert!(apply_op(&copy("missing", "localtime", true), &plan).is_ok());
        assert!(!t.path().join("localtime").exists());
        assert!(apply_op(&copy("zone", "localtime", true), &plan).is_ok());
        assert_eq!(
            fs_err::read_to_string(t.path().join("localtime")).unwrap_or_default(),
            "TZif"
        );
        let err = apply_op(&copy("missing", "ld.so.cache", false), &plan)
            .err()
            .unwrap_or_else(|| panic!("a required copy of a missing file"));
        assert!(err.to_string().contains("missing"), "{err}");
    }

    /// The synthetic /etc is bound read-only before the other binds: a bind under /etc (a
    /// declared program's tree, an absolute allow.read) needs its mount point made here, or
    /// bubblewrap fails ("Can't mkdir parents … Read-only file system").
    /// The files of the synthetic `/etc` are written after bubblewrap's spawn (only the script's
    /// programs read them), but for one a bind lands on: that one is a mount point, there before.
    #[test]
    fn etc_files_are_late_but_a_mount_point_is_not() {
        let never = |_: &str| false;
        let other = [(PathBuf::from("/etc/hosts"), false)];
        let plan = plan(&RunDirSpec {
            other_binds: &other,
            hidden_trees: &[],
            resolv_conf: Some("nameserver 127.77.0.4\n"),
            ca_bundle: None,
            java_truststore: None,
            ..bare(&never)
        });
        let etc = Path::new("/run/band/runs/0123456789abcdef/root/etc");
        let written = |ops: &[FsOp<'_>]| -> Vec<String> {
            ops.iter()
                .filter_map(|op| match op {
                    FsOp::Write { path, .. } | FsOp::Copy { path, .. } => {
                        path.strip_prefix(etc).ok().map(|r| r.display().to_string())
                    }
                    _ => None,
                })
                .collect()
        };
        assert_eq!(written(&plan.ops), ["hosts"]);
        assert_eq!(
            written(&plan.late),
            [
                "passwd",
                "group",
                BASH_ENV_FILE,
                "resolv.conf",
                "nsswitch.conf",
                "ld.so.cache",
                "localtime",
                "timezone"
            ]
        );
        // The time zone's files are copied where the host has them, and ld.so.cache always.
        let optional: Vec<(String, bool)> = plan
            .late
            .iter()
            .filter_map(|op| match op {
                FsOp::Copy { path, optional, .. } => path
                    .strip_prefix(etc)
                    .ok()
                    .map(|r| (r.display().to_string(), *optional)),
                _ => None,
            })
            .collect();
        assert_eq!(
            optional,
            [
                ("ld.so.cache".to_string(), false),
                ("localtime".to_string(), true),
                ("timezone".to_string(), true)
            ]
        );
        // The folder itself, and the mount points in it, come before.
        assert!(plan.ops.contains(&FsOp::Mkdir {
            path: etc.to_path_buf(),
            mode: 0o755,
            owner: None
        }));
        let view_etc = Path::new("/run/band/runs/0123456789abcdef/view/etc");
        assert!(plan.ops.iter().any(
            |op| matches!(op, FsOp::BindHost { target, .. } if target == &view_etc.join("ssl/certs"))
        ));
    }

    /// A proxied run: its bundle is written outside the tree before the host's certificate
    /// folder is bound, then bound over each system bundle path in the view (the apply step
    /// skips those the view has not); `/etc/band-ca.pem` and the Java trust store come late.
    #[test]
    fn the_run_ca_bundle_goes_over_the_system_bundles_of_the_view() {
        let never = |_: &str| false;
        let plan = plan(&RunDirSpec {
            ca_bundle: Some("PEM"),
            java_truststore: Some(b"P12"),
            ..bare(&never)
        });
        let run = Path::new("/run/band/runs/0123456789abcdef");
        let source = run.join("ca-bundle.pem");
        let written = plan
            .ops
            .iter()
            .position(|op| matches!(op, FsOp::Write { path, data, .. } if *path == source && data.as_ref() == b"PEM"))
            .expect("the bundle is written in the run directory");
        let certs = plan
            .ops
            .iter()
            .position(|op| matches!(op, FsOp::BindHost { target, .. } if *target == run.join("view/etc/ssl/certs")))
            .expect("the host's certificates are bound");
        let over: Vec<(usize, PathBuf)> = plan
            .ops
            .iter()
            .enumerate()
            .filter_map(|(i, op)| match op {
                FsOp::BindOverView { source: s, target } if *s == source => {
                    Some((i, target.clone()))
                }
                _ => None,
            })
            .collect();
        let targets: Vec<PathBuf> = over.iter().map(|(_, t)| t.clone()).collect();
        assert_eq!(
            targets,
            [
                run.join("view/etc/ssl/certs/ca-certificates.crt"),
                run.join("view/etc/pki/tls/certs/ca-bundle.crt"),
                run.join("view/etc/ssl/cert.pem"),
            ]
        );
        assert!(over.iter().all(|(i, _)| *i > written && *i > certs));
        let late: Vec<&PathBuf> = plan
            .late
            .iter()
            .filter_map(|op| match op {
                FsOp::Write { path, .. } => Some(path),
                _ => None,
            })
            .collect();
        assert!(
            late.contains(&&run.join("root/etc/band-ca.pem")),
            "{late:?}"
        );
        assert!(
            late.contains(&&run.join("root/etc/band-java-truststore.p12")),
            "{late:?}"
        );
    }

    #[test]
    fn binds_under_etc_get_their_mount_points_in_the_synthetic_etc() {
        let never = |_: &str| false;
        let other = [
            (PathBuf::from("/etc/libreoffice/registry"), true),
            (PathBuf::from("/etc/myapp/app.conf"), false),
            (PathBuf::from("/opt/tool"), true),
        ];
        let plan = plan(&RunDirSpec {
            other_binds: &other,
            hidden_trees: &[],
            ..bare(&never)
        });
        let etc = Path::new("/run/band/runs/0123456789abcdef/root/etc");
        let dirs: Vec<&Path> = plan
            .ops
            .iter()
            .filter_map(|op| match op {
                FsOp::Mkdir { path, .. } => path.strip_prefix(etc).ok(),
                _ => None,
            })
            .collect();
        for d in ["libreoffice", "libreoffice/registry", "myapp"] {
            assert!(dirs.contains(&Path::new(d)), "{d} in {dirs:?}");
        }
        assert!(plan.ops.contains(&FsOp::Write {
            path: etc.join("myapp/app.conf"),
            data: Cow::Borrowed(b""),
            mode: 0o444,
            owner: None,
        }));
        // Nothing outside /etc is made in it; the bind elsewhere gets its mount point in the
        // sandbox's root (read-only once bound, too).
        assert!(!dirs.iter().any(|d| d.starts_with("opt")), "{dirs:?}");
        let root = Path::new("/run/band/runs/0123456789abcdef/root");
        for d in ["opt", "opt/tool"] {
            assert!(
                plan.ops
                    .iter()
                    .any(|op| matches!(op, FsOp::Mkdir { path, .. } if path == &root.join(d))),
                "no mount point {d}"
            );
        }
    }

    /// The sandbox's `/usr` and the host folders of its `/etc` are prepared here, read-only, so
    /// that bubblewrap binds each in one (a bind costs it a re-read of its mount table): every
    /// library tree the host has is an overlay (masked) or a read-only bind of the host's, the
    /// host's `/etc` folders are read-only binds, and a bind under `/usr` outside those trees
    /// (python's `/usr/local` packages) gets its mount point, as under `/etc`.
    #[test]
    fn usr_and_the_etc_host_folders_are_prepared_read_only_in_the_run_directory() {
        let never = |_: &str| false;
        let other = [
            (PathBuf::from("/usr/local/lib/python3/dist-packages"), true),
            (PathBuf::from("/usr/lib/libreoffice"), true),
        ];
        let lib_roots: Vec<String> = ["/usr/lib", "/usr/libexec", "/usr/share"]
            .map(String::from)
            .to_vec();
        let plan = plan(&RunDirSpec {
            other_binds: &other,
            hidden_trees: &[],
            wrappers: &["git".to_string()],
            masked: &[PathBuf::from("/usr/lib/x/helper")],
            lib_roots: &lib_roots,
            ..bare(&never)
        });
        let root = Path::new("/run/band/runs/0123456789abcdef/root");
        // Mounted on the view (`root/` bound again), their mount points made in `root/`.
        let view = Path::new("/run/band/runs/0123456789abcdef/view");
        let rel = |p: &Path| p.strip_prefix(view).unwrap_or(p).display().to_string();
        let mounts: Vec<String> = plan
            .ops
            .iter()
            .filter_map(|op| match op {
                FsOp::BindHost { source, target } => {
                    Some(format!("bind {} {}", source.display(), rel(target)))
                }
                FsOp::MaskLibrary {
                    root: r, target, ..
                } => Some(format!("overlay {r} {}", rel(target))),
                _ => None,
            })
            .collect();
        assert_eq!(
            mounts,
            [
                "overlay /usr/lib usr/lib",
                "bind /usr/libexec usr/libexec",
                "bind /usr/share usr/share",
                "bind /etc/ssl/certs etc/ssl/certs",
                "bind /etc/ca-certificates etc/ca-certificates",
                "bind /etc/fonts etc/fonts",
            ]
        );
        let dirs: Vec<String> = plan
            .ops
            .iter()
            .filter_map(|op| match op {
                FsOp::Mkdir { path, .. } => Some(
                    path.strip_prefix(root)
                        .unwrap_or(path)
                        .display()
                        .to_string(),
                ),
                _ => None,
            })
            .collect();
        for d in ["usr/bin", "usr/local/lib/python3/dist-packages"] {
            assert!(dirs.contains(&d.to_string()), "{d} in {dirs:?}");
        }
        for (link, target) in [("usr/sbin", "bin"), ("usr/local/bin", "../bin")] {
            assert!(
                plan.ops.contains(&FsOp::Symlink {
                    target: PathBuf::from(target),
                    link: root.join(link),
                    name: format!("/{link}"),
                }),
                "{link} is not a link to the wrappers"
            );
        }
        // Nothing is made inside a mounted library tree (it is the host's, read-only).
        assert!(!dirs.iter().any(|d| d.starts_with("usr/lib/")), "{dirs:?}");
        // The wrappers are made late (after bubblewrap's spawn), never before.
        let git = FsOp::Symlink {
            target: PathBuf::from("/band/shim"),
            link: root.join("usr/bin/git"),
            name: "git".into(),
        };
        assert!(plan.late.contains(&git) && !plan.ops.contains(&git));
        assert!(
            plan.late.iter().all(|op| matches!(
                op,
                FsOp::Symlink { link, .. } if link.parent() == Some(&root.join("usr/bin"))
                    || link.starts_with(root.join("run/band/exec/cache"))
            ) || matches!(
                op,
                FsOp::Mkdir { path, .. } if path.starts_with(root.join("run"))
            ) || matches!(
                op,
                FsOp::Write { path, .. } | FsOp::Copy { path, .. }
                    if path.parent() == Some(&root.join("etc"))
            )),
            "late holds only the wrappers, the cache paths' links and the files of etc: {:?}",
            plan.late
        );
    }

    /// The sandbox's root is bound whole by bubblewrap, read-only: every path bubblewrap used to make
    /// in its own root (the mount points of its binds, the compatibility links, the links at the
    /// programs' cache paths with their folders) is made here instead, once each.
    #[test]
    fn the_sandbox_root_holds_the_links_and_every_mount_point_bubblewrap_needs() {
        let never = |_: &str| false;
        let other = [
            (PathBuf::from("/opt/data"), true),
            (PathBuf::from("/srv/a.txt"), false),
        ];
        let links = [
            (
                PathBuf::from("/run/band/exec/cache/ab12/node"),
                PathBuf::from("/band/bin/node"),
            ),
            (
                PathBuf::from("/run/band/exec/cache/ab12/lib"),
                PathBuf::from("/usr/lib/node"),
            ),
            (
                PathBuf::from("/run/band/exec/cache/ab12/node"),
                PathBuf::from("/band/bin/node"),
            ),
        ];
        let plan = plan(&RunDirSpec {
            other_binds: &other,
            hidden_trees: &[],
            links: &links,
            ..bare(&never)
        });
        let root = Path::new("/run/band/runs/0123456789abcdef/root");
        let rel = |p: &Path| p.strip_prefix(root).ok().map(|r| r.display().to_string());
        let mut dirs: Vec<String> = Vec::new();
        let mut files: Vec<String> = Vec::new();
        let mut symlinks: Vec<(String, String)> = Vec::new();
        for op in plan.ops.iter().chain(&plan.late) {
            match op {
                FsOp::Mkdir { path, mode, owner } => {
                    if let Some(r) = rel(path) {
                        // Root's, readable by all, as bubblewrap's were.
                        assert_eq!((*mode, *owner), (0o755, None), "{path:?}");
                        dirs.push(r);
                    }
                }
                FsOp::Write { path, .. } => files.extend(rel(path)),
                FsOp::Symlink { target, link, .. } => {
                    if let Some(l) = rel(link) {
                        symlinks.push((l, target.display().to_string()));
                    }
                }
                _ => {}
            }
        }
        for d in [
            "band",
            "dev",
            "proc",
            "tmp",
            "workspace",
            "usr",
            "etc",
            "skill",
            "opt",
            "opt/data",
            "srv",
            "run",
            "run/band",
            "run/band/exec",
            "run/band/exec/cache",
            "run/band/exec/cache/ab12",
        ] {
            assert_eq!(
                dirs.iter().filter(|x| *x == d).count(),
                1,
                "{d} in {dirs:?}"
            );
        }
        assert!(files.contains(&"srv/a.txt".to_string()), "{files:?}");
        let want: Vec<(String, String)> = [
            ("bin", "usr/bin"),
            ("lib", "usr/lib"),
            ("lib64", "usr/lib64"),
            ("sbin", "usr/sbin"),
            ("usr/sbin", "bin"),
            ("usr/local/bin", "../bin"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .chain(
            [
                ("run/band/exec/cache/ab12/node", "/band/bin/node"),
                ("run/band/exec/cache/ab12/lib", "/usr/lib/node"),
            ]
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string())),
        )
        .collect();
        assert_eq!(symlinks, want);
        // /band: the run's exec folder, read-only, bound on the view (its programs run: not
        // noexec).
        assert!(plan.ops.contains(&FsOp::Bind {
            source: PathBuf::from("/run/band/exec/runs/0123456789abcdef"),
            target: root.parent().unwrap_or(root).join(VIEW).join("band"),
            read_only: true,
            no_exec: false,
            what: "failed to bind /run/band/exec/runs/0123456789abcdef at /band".into(),
        }));
        // The writable folders stay outside the root, bound on its view (below).
        let run = root.parent().unwrap_or(root);
        for (d, at) in [
            ("workspace", "workspace"),
            ("tmp", "tmp"),
            ("io", "band/io"),
        ] {
            assert!(plan.ops.iter().any(|op| matches!(op,
                FsOp::Bind { source, target, no_exec: true, read_only: false, .. }
                    if source == &run.join(d) && target == &run.join(VIEW).join(at))));
        }
    }

    /// bubblewrap binds `view/` at `/`: `root/` bound again, read-only, first, then every mount
    /// of the tree on it. None lands in `root/` (it would exist twice, and bubblewrap's copy of
    /// band-server's mounts would hold both), and the late steps mount nothing.
    #[test]
    fn every_mount_of_the_tree_is_on_the_view_after_its_bind() {
        let never = |_: &str| false;
        let other = [
            (PathBuf::from("/opt/data"), true),
            (PathBuf::from("/etc/hosts"), false),
        ];
        let masked = [PathBuf::from("/usr/lib/x/secret.so")];
        let lib_roots = ["/usr/lib".to_string(), "/usr/share".to_string()];
        let plan = plan(&RunDirSpec {
            other_binds: &other,
            hidden_trees: &[],
            masked: &masked,
            lib_roots: &lib_roots,
            ..bare(&never)
        });
        let run = Path::new("/run/band/runs/0123456789abcdef");
        let (sroot, view) = (run.join("root"), run.join(VIEW));
        let mount_target = |op: &FsOp<'_>| match op {
            FsOp::Bind { target, .. }
            | FsOp::BindHost { target, .. }
            | FsOp::BindOverView { target, .. }
            | FsOp::Dev { target }
            | FsOp::MaskLibrary { target, .. } => Some(target.clone()),
            _ => None,
        };
        let at = plan
            .ops
            .iter()
            .position(|op| {
                matches!(op, FsOp::Bind { source, target, read_only: true, no_exec: false, .. }
                    if *source == sroot && *target == view)
            })
            .expect("the plan binds root/ read-only at view/");
        let (before, after) = plan.ops.split_at(at);
        assert!(
            before.iter().filter_map(mount_target).next().is_none(),
            "{before:?}"
        );
        let on_view: Vec<PathBuf> = after[1..].iter().filter_map(mount_target).collect();
        assert!(on_view.iter().all(|t| t.starts_with(&view)), "{on_view:?}");
        // /band, the two library trees (one masked), /skill, /dev, the host's /etc folders, and
        // the four writable folders.
        assert!(
            on_view.len() >= 3 + 2 + 1 + 1 + ETC_HOST_DIRS.len(),
            "{on_view:?}"
        );
        for t in [
            "band",
            "usr/lib",
            "usr/share",
            "skill",
            "dev",
            "workspace",
            "tmp",
            "band/io",
            "dev/shm",
        ] {
            assert!(on_view.contains(&view.join(t)), "{t} in {on_view:?}");
        }
        // Each mount point is made in root/ (the view shows it): none is made on the view.
        for op in &plan.ops {
            if let FsOp::Mkdir { path, .. } | FsOp::Write { path, .. } = op {
                assert!(!path.starts_with(&view) || *path == view, "{path:?}");
            }
        }
        // (The exec folder, bound at /band, holds its own mount point, `io/`.)
        for t in on_view
            .iter()
            .filter(|t| !t.starts_with(view.join("band/")))
        {
            let rel = t.strip_prefix(&view).unwrap_or(t);
            let in_root = sroot.join(rel);
            // `/dev`'s own (`dev/shm`) are made with it ([`FsOp::Dev`]).
            assert!(
                plan.ops.iter().any(|op| matches!(op,
                    FsOp::Mkdir { path, .. } | FsOp::Write { path, .. } if *path == in_root))
                    || ROOT_MOUNT_POINTS.contains(&rel.to_str().unwrap_or(""))
                    || rel.starts_with("dev/"),
                "no mount point for {t:?}"
            );
        }
        assert!(plan.late.iter().all(|op| mount_target(op).is_none()));
    }

    #[test]
    fn passwd_and_group_hold_only_root_and_the_run_user() {
        assert_eq!(
            synth_passwd("band-run-3", 996, 995),
            "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\nband-run-3:x:996:995:band run:/tmp:/usr/sbin/nologin\n"
        );
        assert_eq!(
            synth_group("band-run-3", 995),
            "root:x:0:\nband-run-3:x:995:\n"
        );
    }

    #[test]
    fn write_dirs_of_relative_patterns() {
        let got: Vec<Option<String>> = [
            "out/**",
            "./out/**",
            "reports/*.md",
            "a/b.txt",
            "b.txt",
            "*.json",
            "**",
            "x/y/**/z",
            "/abs/**",
            "a/../b/*",
            "out/",
            "out/sub/",
        ]
        .iter()
        .map(|p| write_dir(p))
        .collect();
        let s = |x: &str| Some(x.to_string());
        assert_eq!(
            got,
            vec![
                s("out"),
                s("out"),
                s("reports"),
                s("a"),
                s(""),
                s(""),
                s(""),
                s("x/y"),
                None,
                None,
                s("out"),
                s("out/sub"),
            ]
        );
    }

    #[test]
    fn absolute_prefixes() {
        let got: Vec<Option<PathBuf>> = [
            "/data/**",
            "/srv/a/*.csv",
            "/data/input.csv",
            "/*",
            "rel/**",
            "/a/../b",
        ]
        .iter()
        .map(|p| absolute_prefix(p))
        .collect();
        let s = |x: &str| Some(PathBuf::from(x));
        assert_eq!(
            got,
            vec![
                s("/data"),
                s("/srv/a"),
                s("/data/input.csv"),
                s("/"),
                None,
                None
            ]
        );
    }

    #[test]
    fn host_mounts_cannot_cover_the_sandbox() {
        let state = Path::new("/run/band");
        assert!(check_host_mount_path(Path::new("/data"), state).is_ok());
        assert!(check_host_mount_path(Path::new("/etc/myapp"), state).is_ok());
        assert!(check_host_mount_path(Path::new("/srv/x/file.csv"), state).is_ok());
        for bad in [
            "/",
            "/usr",
            "/usr/bin",
            "/usr/lib/x",
            "/etc",
            "/etc/shadow",
            "/tmp/x",
            "/proc/1",
            "/run/band/runs",
            "/band",
            "/root/.ssh",
            "/var/run/docker.sock",
        ] {
            assert!(
                check_host_mount_path(Path::new(bad), state).is_err(),
                "{bad}"
            );
        }
        assert!(
            check_host_mount_path(Path::new("/srv/state"), Path::new("/srv/state/band")).is_err()
        );
    }

    #[test]
    fn a_run_directory_error_names_its_path_once_with_the_cause() {
        let t = tempfile::tempdir().unwrap();
        let once = |e: SetupError, p: &Path, cause: &str| {
            let m = e.to_string();
            assert_eq!(m.matches(&*p.display().to_string()).count(), 1, "{m}");
            assert!(m.contains(cause), "{m}");
        };
        // A file that is there already (write_new never overwrites).
        let file = t.path().join("passwd");
        fs::write(&file, "x").unwrap();
        once(
            write_new(&file, b"y", 0o644, None).unwrap_err(),
            &file,
            "exists",
        );
        // A directory under a file.
        let under = file.join("dir");
        once(
            mkdir(&under, 0o755, None).unwrap_err(),
            &under,
            "Not a directory",
        );
    }
}
