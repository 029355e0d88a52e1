//! What a declared program needs around it to run: its runtime trees.
//!
//! A declared command runs from an execute-only copy in the program cache ([`super::execcache`]),
//! away from its installation. Programs installed under the library trees (`/usr/lib`, ...) find
//! what they need there, since those are in every sandbox. Others do not: an npm CLI
//! (`/usr/local/bin/claude` → `/usr/local/lib/node_modules/@anthropic-ai/claude-code/cli.js`)
//! `require`s its siblings, a pip-installed package lives in `/usr/local/lib/python3.X/
//! dist-packages` or a venv, a JDK or LibreOffice in `/opt/<name>/`.
//!
//! These trees are discovered from the resolved program, never declared by the band (a band that
//! could name a tree could name any directory): see [`discover`]. Each is bound read-only at its
//! host path, and band-shim (its execute-only copy) is bound over every ELF executable inside it:
//! a call of one by its path reaches the gate, which judges it as its file name and runs the
//! tree's file only by an `allow.cli` rule allowing that call ([`helper_table_name`]), so a tree
//! gives no second way to start an undeclared program. Shared objects (`*.so`, `*.so.N`, Python's
//! `*.cpython-311-x86_64-linux-gnu.so`, node's `*.node` are loaded with `mmap(PROT_EXEC)`, which
//! a `noexec` mount refuses: so the trees are not `noexec`, and shared objects stay as they are,
//! as in `/usr/lib` (see `layers::fs::execmask`). Scripts stay: their interpreter is a command
//! like any other, judged by band-shim.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use fs_err as fs;

/// Directories never bound whole as a runtime tree: the roots of the file system's hierarchy
/// (what they hold is not one program's), and home directories.
pub(crate) const NEVER_WHOLE: &[&str] = &[
    "/",
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/home",
    "/lib",
    "/lib64",
    "/media",
    "/mnt",
    "/opt",
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/snap",
    "/srv",
    "/sys",
    "/tmp",
    "/usr",
    "/usr/local",
    "/var",
];

/// Above this many ELF executables in one tree, the run does not start (each is a mount).
pub(crate) const MAX_MASKED: usize = 512;

/// A tree bound read-only at its host path, and the files hidden in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeTree {
    pub root: PathBuf,
    /// Where it is bound in the sandbox: `root` itself, except for a user site
    /// ([`user_site_at`]).
    pub at: PathBuf,
    /// Every ELF executable in it (`layers::fs::execmask::scan`): band-shim in the sandbox.
    pub masked: Vec<PathBuf>,
    /// The run's uid cannot reach `root` on the host (a folder above it others may not enter:
    /// a home of mode 0700): band-server binds it into the run directory first
    /// ([`reachable_by_others`]).
    pub hidden: bool,
}

/// Where discovery looks besides the program's own path.
#[derive(Debug, Clone)]
pub(crate) struct Places<'a> {
    /// `/usr/local`: pip's site directories of the system's Python.
    pub(crate) local: &'a Path,
    /// Trees every sandbox has already (`execmask::LIB_ROOTS`), and places never bound (the
    /// sandbox's own `/tmp`, `/proc`, `/sys`, `/dev`, the state directory): no tree under or
    /// around one of them is added.
    pub(crate) bound: &'a [PathBuf],
}

fn name_of(p: &Path) -> &str {
    p.file_name().and_then(OsStr::to_str).unwrap_or("")
}

/// A Python interpreter's version from its file name (`python3.11` → `3.11`).
fn python_version(real: &Path) -> Option<&str> {
    let v = name_of(real).strip_prefix("python")?;
    let (major, minor) = v.split_once('.')?;
    (!major.is_empty()
        && !minor.is_empty()
        && major
            .chars()
            .chain(minor.chars())
            .all(|c| c.is_ascii_digit()))
    .then_some(v)
}

/// The runtime trees of a program: `path` is where it was found or how a `#!` line names it (not
/// resolved), `real` its canonical file.
///
/// - **node package**: the nearest directory above `real` with a `package.json` that is itself a
///   package in a `node_modules` (`…/node_modules/<pkg>` or `…/node_modules/@scope/<pkg>`): an
///   npm CLI and its dependencies (npm installs a global package's own under it);
/// - **Python virtual environment**: `path`'s or `real`'s `<venv>/bin/<python>` beside
///   `<venv>/pyvenv.cfg`: the venv (Python finds it from `argv[0]`, which the `#!` line gives);
/// - **Python's site directories**: for `real` named `pythonX.Y`, `<local>/lib/pythonX.Y/
///   {dist,site}-packages` and `<local>/lib/python3/dist-packages`, where pip installs;
/// - **installation prefix**: `real` in a `bin`, `sbin` or `program` directory of its own tree
///   (`/opt/jdk-21/bin/java` → `/opt/jdk-21`, `~/.pyenv/versions/3.12.1/bin/python3.12`,
///   `/opt/libreoffice/program/soffice`): the tree above it, unless that is a directory of
///   [`NEVER_WHOLE`], a home directory, or the parent of one of them.
///
/// Only existing directories, none under `places.bound` (but a venv under `/tmp`), none inside
/// another. Reads the file system (existence only).
pub(crate) fn discover(path: &Path, real: &Path, places: &Places<'_>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    // node package.
    for a in real.ancestors().skip(1) {
        if a.join("package.json").is_file() {
            let parent = a.parent();
            let in_modules = parent.is_some_and(|p| name_of(p) == "node_modules")
                || (name_of(parent.unwrap_or(a)).starts_with('@')
                    && parent
                        .and_then(Path::parent)
                        .is_some_and(|p| name_of(p) == "node_modules"));
            if in_modules {
                out.push(a.to_path_buf());
                break;
            }
        }
    }
    // Python venv.
    for p in [path, real] {
        if let Some(venv) = p.parent().and_then(Path::parent)
            && venv.join("pyvenv.cfg").is_file()
        {
            out.push(venv.to_path_buf());
        }
    }
    // Python's site directories under /usr/local.
    if let Some(v) = python_version(real) {
        let lib = places.local.join("lib");
        for d in [
            lib.join(format!("python{v}/dist-packages")),
            lib.join(format!("python{v}/site-packages")),
            lib.join("python3/dist-packages"),
        ] {
            out.push(d);
        }
    }
    // Installation prefix.
    if let Some(dir) = real.parent()
        && matches!(name_of(dir), "bin" | "sbin" | "program")
        && let Some(prefix) = dir.parent()
        && !NEVER_WHOLE.iter().any(|n| Path::new(n) == prefix)
        && prefix.parent().is_none_or(|p| p != Path::new("/home"))
        && prefix.components().count() > 2
    {
        out.push(prefix.to_path_buf());
    }
    out.retain(|d| {
        // A venv under the host's /tmp (which the sandbox does not see: its /tmp is its own) is
        // bound at its path there all the same: a user's venv is often made there.
        let tmp_venv =
            d.starts_with("/tmp") && d != Path::new("/tmp") && d.join("pyvenv.cfg").is_file();
        d.is_absolute()
            && d.is_dir()
            && !places.bound.iter().any(|b| {
                (d.starts_with(b) && !(tmp_venv && b == Path::new("/tmp"))) || b.starts_with(d)
            })
    });
    normalize(out)
}

/// The program table's name of a program inside a runtime tree, by its path in the sandbox
/// (`tree:/usr/local/lib/node_modules/x/vendor/rg`). A bare command name has no `/`, so no call
/// by name reaches it; a call by its path does ([`crate::layers::cli::shim::resolve_call`]).
pub(crate) fn helper_table_name(at: &Path) -> String {
    format!("{HELPER_PREFIX}{}", at.display())
}

const HELPER_PREFIX: &str = "tree:";

impl RuntimeTree {
    /// Each program in the tree: (its path in the sandbox, its host file).
    pub(crate) fn helpers(&self) -> Vec<(PathBuf, PathBuf)> {
        self.masked
            .iter()
            .map(|f| {
                let at = f
                    .strip_prefix(&self.root)
                    .map_or_else(|_| f.clone(), |rel| self.at.join(rel));
                (at, f.clone())
            })
            .collect()
    }
}

/// The `argv[0]` a Python found at `found` (where the lookup found it, not resolved) must run with
/// to be in its virtual environment: `found` itself when it is a venv's `<venv>/bin/<name>`
/// (beside `<venv>/pyvenv.cfg`) and its real file a `pythonX.Y`. Python finds its venv from
/// `argv[0]` (the `pyvenv.cfg` beside its directory), and band runs a copy of the real file, so
/// without it a venv's python is the base one and sees none of the venv's packages. The venv is
/// a runtime tree of the program ([`discover`]), so the path exists in the sandbox; what it
/// names is a link to the base interpreter, which leads back through the gate.
pub(crate) fn venv_argv0(found: &Path, real: &Path) -> Option<String> {
    python_version(real)?;
    let bin = found.parent().filter(|d| name_of(d) == "bin")?;
    let venv = bin.parent()?;
    (found != real && venv.join("pyvenv.cfg").is_file())
        .then(|| found.to_string_lossy().into_owned())
}

/// The home directory of `uid` in the text of a passwd file.
pub(crate) fn home_of(passwd: &str, uid: u32) -> Option<PathBuf> {
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() >= 7 && f[2].parse::<u32>().ok() == Some(uid) && f[5].starts_with('/'))
            .then(|| PathBuf::from(f[5]))
    })
}

/// pip's user site of the invoking user for Python `version` (`pip install --user`):
/// `<home>/.local/lib/pythonX.Y/site-packages`, if it is a directory that every user may read,
/// and every directory above it one every user may enter (the run's uid is no user of the host:
/// a home of mode 0700 keeps its user site to itself, and the run goes on without it). Reads the
/// file system (metadata only, not following a symlinked part).
pub(crate) fn user_site(home: &Path, version: &str) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let site = home.join(format!(".local/lib/python{version}/site-packages"));
    let m = fs::symlink_metadata(&site).ok()?;
    if !m.is_dir() || m.mode() & 0o005 != 0o005 {
        return None;
    }
    for dir in site.ancestors().skip(1) {
        let m = fs::symlink_metadata(dir).ok()?;
        if !m.is_dir() || m.mode() & 0o001 == 0 {
            return None;
        }
    }
    Some(site)
}

/// Where a user site is seen in the sandbox: the place Python looks for its user site with the
/// run's `HOME` (`/tmp`): `/tmp/.local/lib/pythonX.Y/site-packages`, read-only.
pub(crate) fn user_site_at(version: &str) -> PathBuf {
    PathBuf::from(format!("/tmp/.local/lib/python{version}/site-packages"))
}

/// The `pythonX.Y` versions of the programs `reals` (their real files).
pub(crate) fn python_versions<'a>(reals: impl Iterator<Item = &'a Path>) -> Vec<String> {
    let mut v: Vec<String> = reals
        .filter_map(|r| python_version(r).map(str::to_string))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Sorted, without duplicates or trees inside another.
pub(crate) fn normalize(mut trees: Vec<PathBuf>) -> Vec<PathBuf> {
    trees.sort();
    trees.dedup();
    let all = trees.clone();
    trees.retain(|t| !all.iter().any(|o| o != t && t.starts_with(o)));
    trees
}

/// Why a runtime tree cannot be bound.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TreeError {
    #[error(
        "{} holds {count} programs (at most {MAX_MASKED} can be hidden)",
        .root.display()
    )]
    TooMany { root: PathBuf, count: usize },
}

/// Each tree with its ELF executables, as `scan` finds them (the filesystem layer's
/// `execmask::scan`: not following symlinks, not crossing into another file system).
pub(crate) fn scan_trees(
    roots: &[PathBuf],
    scan: &dyn Fn(&[&str]) -> Vec<PathBuf>,
) -> Result<Vec<RuntimeTree>, TreeError> {
    roots
        .iter()
        .map(|root| {
            let r = root.to_string_lossy();
            let masked = scan(&[r.as_ref()]);
            if masked.len() > MAX_MASKED {
                return Err(TreeError::TooMany {
                    root: root.clone(),
                    count: masked.len(),
                });
            }
            Ok(RuntimeTree {
                root: root.clone(),
                at: root.clone(),
                masked,
                hidden: !reachable_by_others(root),
            })
        })
        .collect()
}

/// Where a program's real file sits in its installation: the tree and its path inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub(crate) tree: PathBuf,
    pub(crate) rel: PathBuf,
}

/// The installation a program finds from its own path (`/proc/self/exe`; a JDK's `java` loads
/// `$ORIGIN/../lib/libjli.so`): for a real file under one of `lib_roots`, the tree
/// `layers::fs::execmask::exempt_roots` keeps for it (`/usr/lib/jvm/<jdk>/bin/java` →
/// `/usr/lib/jvm/<jdk>`, `bin/java`); else the installation prefix of [`discover`]
/// (`/opt/jdk/bin/java` → `/opt/jdk`, `bin/java`). `None` for a program with no tree of its own
/// (`/usr/bin/jq`).
pub(crate) fn install_layout(real: &Path, lib_roots: &[PathBuf]) -> Option<Layout> {
    for root in lib_roots {
        if let Ok(rest) = real.strip_prefix(root) {
            let comps: Vec<_> = rest.components().collect();
            if comps.len() < 2 {
                return None;
            }
            let keep = if comps.len() > 3 { 2 } else { 1 };
            let mut tree = root.clone();
            for c in &comps[..keep] {
                tree.push(c);
            }
            let rel = comps[keep..].iter().collect();
            return Some(Layout { tree, rel });
        }
    }
    let dir = real.parent()?;
    let prefix = dir.parent()?;
    if matches!(name_of(dir), "bin" | "sbin" | "program")
        && !NEVER_WHOLE.iter().any(|n| Path::new(n) == prefix)
        && prefix.parent().is_none_or(|p| p != Path::new("/home"))
        && prefix.components().count() > 2
    {
        return Some(Layout {
            tree: prefix.to_path_buf(),
            rel: real.strip_prefix(prefix).ok()?.to_path_buf(),
        });
    }
    None
}

/// The symlinks that make a cache entry's directory look like the program's installation around
/// its copy: for each directory on the way from the tree to the program, a link to each of the
/// tree's entries there except the one on the way (`lib` → `<tree>/lib`, `bin/javac` →
/// `<tree>/bin/javac`; the copy itself is `bin/java`). (path relative to the entry, target).
/// Reads the tree's directories.
pub(crate) fn layout_links(layout: &Layout) -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    let comps: Vec<_> = layout.rel.components().collect();
    let mut rel = PathBuf::new();
    for (i, next) in comps.iter().enumerate() {
        let host = layout.tree.join(&rel);
        let mut names: Vec<_> = fs::read_dir(&host)
            .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        names.sort();
        for n in names {
            if n.as_os_str() != next.as_os_str() {
                out.push((rel.join(&n), host.join(&n)));
            }
        }
        if i + 1 < comps.len() {
            rel.push(next);
        }
    }
    out
}

/// Directories outside `tree` that it links to, within `depth` levels: part of the
/// installation, so they come with it (read-only, like the tree).
///
/// - a linked directory (Debian's LibreOffice: `share/registry` → `/etc/libreoffice/registry`);
/// - the folder of a linked file (Debian's JDK: `lib/jvm.cfg` → `/etc/java-17-openjdk/
///   jvm-amd64.cfg`, `conf/security/java.security` → `/etc/java-17-openjdk/security/…`), when it
///   is an installation's own folder ([`own_folder`]) that every user may reach and list
///   ([`reachable_by_others`]): a linked file brings no more than any user of the host could read
///   anyway, never a hierarchy folder (`/etc`, `/usr/share`) nor a private one.
///
/// Never a directory of [`NEVER_WHOLE`]. Sorted, none inside another ([`normalize`]). Reads the
/// tree (not following its linked directories).
pub(crate) fn linked_dirs(tree: &Path, depth: usize) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut level = vec![tree.to_path_buf()];
    for _ in 0..depth {
        let mut next = Vec::new();
        for dir in level {
            let Ok(rd) = fs::read_dir(&dir) else { continue };
            for e in rd.flatten() {
                let Ok(ft) = e.file_type() else { continue };
                if ft.is_dir() {
                    next.push(e.path());
                    continue;
                }
                if !ft.is_symlink() {
                    continue;
                }
                let Ok(target) = fs::canonicalize(e.path()) else {
                    continue;
                };
                if target.starts_with(tree) {
                    continue;
                }
                if target.is_dir() {
                    if !NEVER_WHOLE.iter().any(|n| Path::new(n) == target) {
                        out.push(target);
                    }
                } else if let Some(folder) = target.parent()
                    && !folder.starts_with(tree)
                    && own_folder(folder)
                    && reachable_by_others(folder)
                {
                    out.push(folder.to_path_buf());
                }
            }
        }
        level = next;
    }
    normalize(out)
}

/// Whether `dir` may be one installation's own folder, not a folder of the file system's
/// hierarchy that many share: not a directory of [`NEVER_WHOLE`] nor directly in `/` (`/data`),
/// in `/usr`, `/usr/local` or `/var` (`/usr/share`, `/var/lib`), and not in a home directory
/// (`/home`, `/root`). Pure (the path only).
pub(crate) fn own_folder(dir: &Path) -> bool {
    let hierarchy = ["/", "/usr", "/usr/local", "/var"];
    dir.is_absolute()
        && !NEVER_WHOLE.iter().any(|n| Path::new(n) == dir)
        && dir
            .parent()
            .is_some_and(|p| !hierarchy.iter().any(|h| Path::new(h) == p))
        && !dir.starts_with("/home")
        && !dir.starts_with("/root")
}

/// Whether a user who is not the owner (nor of the group) of `dir` and of the folders above it
/// can reach it and list it: each folder above it has the others' execute bit, and it has the
/// others' read and execute bits. Metadata only.
pub(crate) fn reachable_by_others(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let own = fs::metadata(dir).is_ok_and(|m| m.mode() & 0o005 == 0o005);
    own && dir
        .ancestors()
        .skip(1)
        .all(|a| fs::metadata(a).is_ok_and(|m| m.mode() & 0o001 != 0))
}

/// The canonical file of `p`, if it exists.
pub(crate) fn real(p: &Path) -> Option<PathBuf> {
    fs::canonicalize(p).ok()
}

#[cfg(test)]
mod tests {
    use fs_err::os::unix::fs::symlink;
    use pretty_assertions::assert_eq;
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn write(p: &Path, data: &[u8], mode: u32) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, data).unwrap();
        fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn the_user_site_of_a_home_others_can_enter() {
        assert_eq!(
            home_of(
                "root:x:0:0::/root:/bin/sh\nann:x:1000:1000::/home/ann:/bin/bash\n",
                1000
            ),
            Some(PathBuf::from("/home/ann"))
        );
        assert_eq!(home_of("ann:x:1000:1000::/home/ann:/bin/bash\n", 7), None);
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("home");
        let site = home.join(".local/lib/python3.11/site-packages");
        fs::create_dir_all(&site).unwrap();
        for d in site.ancestors().take_while(|d| d.starts_with(t.path())) {
            fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        assert_eq!(user_site(&home, "3.11"), Some(site.clone()));
        assert_eq!(user_site(&home, "3.12"), None);
        fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(user_site(&home, "3.11"), None);
        assert_eq!(
            user_site_at("3.11"),
            Path::new("/tmp/.local/lib/python3.11/site-packages")
        );
    }

    #[test]
    fn a_venv_python_runs_as_its_venv_path() {
        let t = tempfile::tempdir().unwrap();
        let venv = t.path().join("venv");
        write(&venv.join("pyvenv.cfg"), b"home = /usr/bin\n", 0o644);
        let found = venv.join("bin/python3");
        let real = Path::new("/usr/bin/python3.11");
        assert_eq!(
            venv_argv0(&found, real),
            Some(found.to_string_lossy().into_owned())
        );
        // Not a python, not in a venv, or the file itself: its own argv[0].
        assert_eq!(
            venv_argv0(&venv.join("bin/jq"), Path::new("/usr/bin/jq")),
            None
        );
        assert_eq!(venv_argv0(&t.path().join("bin/python3"), real), None);
        assert_eq!(venv_argv0(real, real), None);
    }

    #[test]
    fn trees_are_found_from_the_program() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        let local = r.join("local");
        let bound = [r.join("usr")];
        let places = Places {
            local: &local,
            bound: &bound,
        };
        // An npm CLI: bin link → lib/node_modules/fakecli/cli.js; a scoped one, deeper.
        let pkg = local.join("lib/node_modules/fakecli");
        write(&pkg.join("package.json"), b"{}", 0o644);
        write(&pkg.join("cli.js"), b"#!/usr/bin/env node\n", 0o755);
        write(&pkg.join("node_modules/dep/package.json"), b"{}", 0o644);
        assert_eq!(
            discover(&local.join("bin/fakecli"), &pkg.join("cli.js"), &places),
            [pkg]
        );
        let scoped = local.join("lib/node_modules/@acme/tool");
        write(&scoped.join("package.json"), b"{}", 0o644);
        write(&scoped.join("dist/bin/cli.js"), b"", 0o755);
        assert_eq!(
            discover(Path::new("/x"), &scoped.join("dist/bin/cli.js"), &places),
            [scoped]
        );
        // A venv's python, named by a #! line; its real file is the system's.
        let venv = r.join("srv/venv");
        write(&venv.join("pyvenv.cfg"), b"home = /usr/bin\n", 0o644);
        let sys_py = r.join("usr/bin/python3.11");
        write(&sys_py, b"\x7fELF", 0o755);
        fs::create_dir_all(local.join("lib/python3.11/dist-packages")).unwrap();
        assert_eq!(
            discover(&venv.join("bin/python3"), &sys_py, &places),
            [local.join("lib/python3.11/dist-packages"), venv.clone()]
        );
        // An installation prefix; never a hierarchy root, never inside a bound tree.
        write(&r.join("opt/jdk/bin/java"), b"\x7fELF", 0o755);
        assert_eq!(
            discover(Path::new("/j"), &r.join("opt/jdk/bin/java"), &places),
            [r.join("opt/jdk")]
        );
        write(&r.join("usr/lib/jvm/jdk/bin/java"), b"\x7fELF", 0o755);
        assert!(
            discover(
                Path::new("/j"),
                &r.join("usr/lib/jvm/jdk/bin/java"),
                &places
            )
            .is_empty()
        );
        assert!(discover(Path::new("/usr/bin/jq"), Path::new("/usr/bin/jq"), &places).is_empty());
        assert!(
            discover(
                Path::new("/bin/ls"),
                Path::new("/usr/local/bin/ls"),
                &places
            )
            .iter()
            .all(|p| p != Path::new("/usr/local"))
        );
    }

    #[test]
    fn a_trees_programs_are_masked_and_its_libraries_kept() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("tree");
        write(&root.join("bin/tool"), b"\x7fELF\x02", 0o755);
        write(&root.join("lib/libx.so.1"), b"\x7fELF\x02", 0o755);
        write(
            &root.join("lib/ext.cpython-311-x86_64-linux-gnu.so"),
            b"\x7fELF",
            0o755,
        );
        write(&root.join("bin/script"), b"#!/bin/sh\n", 0o755);
        write(&root.join("data.bin"), b"\x7fELF", 0o644);
        let got = scan_trees(
            std::slice::from_ref(&root),
            &crate::layers::fs::execmask::scan,
        )
        .unwrap();
        assert_eq!(
            got,
            [RuntimeTree {
                root: root.clone(),
                at: root.clone(),
                masked: vec![root.join("bin/tool")],
                hidden: false,
            }]
        );
    }

    #[test]
    fn nested_trees_collapse() {
        assert_eq!(
            normalize(vec!["/a/b".into(), "/a".into(), "/c".into(), "/a".into()]),
            [PathBuf::from("/a"), PathBuf::from("/c")]
        );
    }

    #[test]
    fn python_versions() {
        assert_eq!(
            python_version(Path::new("/usr/bin/python3.11")),
            Some("3.11")
        );
        assert_eq!(python_version(Path::new("/usr/bin/python3")), None);
        assert_eq!(python_version(Path::new("/usr/bin/python3.x")), None);
    }

    #[test]
    fn an_installed_program_gets_its_installation_around_its_copy() {
        let t = tempfile::tempdir().unwrap();
        let lib = t.path().join("usr/lib");
        let jdk = lib.join("jvm/jdk17");
        write(&jdk.join("bin/java"), b"\x7fELF", 0o755);
        write(&jdk.join("bin/javac"), b"\x7fELF", 0o755);
        write(&jdk.join("lib/libjli.so"), b"\x7fELF", 0o644);
        write(&jdk.join("release"), b"", 0o644);
        let layout = install_layout(&jdk.join("bin/java"), std::slice::from_ref(&lib));
        assert_eq!(
            layout,
            Some(Layout {
                tree: jdk.clone(),
                rel: PathBuf::from("bin/java")
            })
        );
        assert_eq!(
            layout_links(&layout.unwrap()),
            [
                (PathBuf::from("lib"), jdk.join("lib")),
                (PathBuf::from("release"), jdk.join("release")),
                (PathBuf::from("bin/javac"), jdk.join("bin/javac")),
            ]
        );
        assert_eq!(
            install_layout(Path::new("/opt/jdk/bin/java"), &[]),
            Some(Layout {
                tree: PathBuf::from("/opt/jdk"),
                rel: PathBuf::from("bin/java")
            })
        );
        assert_eq!(install_layout(Path::new("/usr/bin/jq"), &[]), None);
        assert_eq!(install_layout(Path::new("/usr/local/bin/x"), &[]), None);
    }

    #[test]
    fn an_installation_brings_the_directories_it_links_to() {
        let t = tempfile::tempdir().unwrap();
        // A host's folders are reachable by every user (a tempdir is 0700).
        fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let tree = t.path().join("usr/lib/office");
        let etc = t.path().join("etc/office/registry");
        fs::create_dir_all(&etc).unwrap();
        fs::create_dir_all(tree.join("share")).unwrap();
        symlink(&etc, tree.join("share/registry")).unwrap();
        symlink(
            t.path().join("etc/office/none"),
            tree.join("share/dangling"),
        )
        .unwrap();
        symlink("/etc", tree.join("etc")).unwrap();
        symlink(tree.join("share"), tree.join("inner")).unwrap();
        // A file of the tree linked from inside it brings nothing.
        write(&tree.join("share/own.conf"), b"", 0o644);
        symlink(tree.join("share/own.conf"), tree.join("own.conf")).unwrap();
        assert_eq!(linked_dirs(&tree, 3), [etc]);
    }

    #[test]
    fn an_installation_brings_the_folders_of_the_files_it_links_to() {
        // Debian's JDK: lib/jvm.cfg and conf/security/java.security (three levels down) link
        // into /etc/java-17-openjdk; a private folder's file does not bring its folder.
        let t = tempfile::tempdir().unwrap();
        fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let tree = t.path().join("usr/lib/jvm/jdk17");
        let etc = t.path().join("etc/jdk17");
        write(&etc.join("jvm-amd64.cfg"), b"-server KNOWN\n", 0o644);
        write(&etc.join("security/java.security"), b"", 0o644);
        write(&tree.join("bin/java"), b"\x7fELF", 0o755);
        fs::create_dir_all(tree.join("lib")).unwrap();
        symlink(etc.join("jvm-amd64.cfg"), tree.join("lib/jvm.cfg")).unwrap();
        fs::create_dir_all(tree.join("conf/security")).unwrap();
        symlink(
            etc.join("security/java.security"),
            tree.join("conf/security/java.security"),
        )
        .unwrap();
        let private = t.path().join("etc/private");
        write(&private.join("key.pem"), b"", 0o600);
        fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
        symlink(private.join("key.pem"), tree.join("lib/key.pem")).unwrap();
        assert_eq!(linked_dirs(&tree, 3), [etc.as_path()]);
        // Within the depth only: java.security is three levels down.
        assert_eq!(linked_dirs(&tree, 2), [etc]);
        fs::remove_file(tree.join("lib/jvm.cfg")).unwrap();
        assert_eq!(linked_dirs(&tree, 2), Vec::<PathBuf>::new());
    }

    #[test]
    fn a_linked_files_folder_is_an_installations_own() {
        for (dir, own) in [
            ("/etc/java-17-openjdk", true),
            ("/etc/java-17-openjdk/security", true),
            ("/etc/ssl/certs/java", true),
            ("/usr/share/java", true),
            ("/etc", false),
            ("/usr/share", false),
            ("/usr/local/share", false),
            ("/var/lib", false),
            ("/data", false),
            ("/", false),
            ("/home/alice/.config/jdk", false),
            ("/root/jdk", false),
            ("relative/dir", false),
        ] {
            assert_eq!(own_folder(Path::new(dir)), own, "{dir}");
        }
    }
}
