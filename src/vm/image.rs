//! The QEMU driver's disk image, built from Debian packages:
//!
//! ```text
//! mmdebstrap --variant=minbase --include=<packages.txt> --customize-hook=customize.sh → rootfs/
//! mkfs.ext4 -d rootfs/ root.raw                   (no loop device, no mount)
//! qemu-img convert -O qcow2 root.raw root.qcow2   (the cached base; instances get an overlay)
//! vmlinuz, initrd.img copied out of rootfs/boot   (QEMU boots them with -kernel/-initrd)
//! ```
//!
//! The image is cached under `vm/images/<recipe hash>/`. Building needs root (mmdebstrap's root
//! mode and reading root-owned files for mkfs); without root, the privileged steps run through
//! `sudo`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::cmd::{self, os};
use super::keys;
use super::paths::{VmPaths, private_dir, write_atomic};
use super::recipe;
use super::{Result, VmError};

/// The size of the image's file system. Instances grow theirs to `--disk` on first boot.
pub const FS_SIZE_MIB: u64 = 2048;

/// Everything one build needs, with its paths inside a private work folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildPlan {
    /// `vm/images/<hash>.partial`: removed on failure, renamed to `<hash>` on success.
    pub work: PathBuf,
    pub sources: Vec<String>,
    pub packages: Vec<String>,
    pub fs_size_mib: u64,
    /// Prefix the privileged steps with `sudo` (band is not root).
    pub sudo: bool,
}

impl BuildPlan {
    pub fn recipe_dir(&self) -> PathBuf {
        self.work.join("recipe")
    }
    pub fn keys_dir(&self) -> PathBuf {
        self.work.join("keys")
    }
    pub fn rootfs(&self) -> PathBuf {
        self.work.join("rootfs")
    }
    pub fn raw(&self) -> PathBuf {
        self.work.join("root.raw")
    }
    pub fn qcow2(&self) -> PathBuf {
        self.work.join(BASE)
    }

    fn privileged(&self, mut argv: Vec<OsString>) -> Vec<OsString> {
        if self.sudo {
            argv.insert(0, os("sudo"));
        }
        argv
    }
}

pub const BASE: &str = "root.qcow2";
pub const KERNEL: &str = "vmlinuz";
pub const INITRD: &str = "initrd.img";
pub const HOST_KEY: &str = "host_key.pub";
pub const INFO: &str = "image.json";

/// Quote a string for `sh` (single quotes).
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The mmdebstrap command line. The customize hook gets the recipe and key folders on its
/// command line (not in the environment, which `sudo` would clear).
pub fn mmdebstrap_argv(p: &BuildPlan) -> Vec<OsString> {
    let recipe_dir = p.recipe_dir().to_string_lossy().into_owned();
    let keys_dir = p.keys_dir().to_string_lossy().into_owned();
    let hook = format!(
        "BAND_RECIPE={} BAND_KEYS={} sh {} \"$1\"",
        sh_quote(&recipe_dir),
        sh_quote(&keys_dir),
        sh_quote(&format!("{recipe_dir}/customize.sh"))
    );
    let mut argv = vec![
        os("mmdebstrap"),
        os("--mode=root"),
        os("--variant=minbase"),
        os("--format=directory"),
        os(format!("--include={}", p.packages.join(","))),
        os("--aptopt=Acquire::Retries \"3\""),
        os(format!("--customize-hook={hook}")),
        os(recipe::SUITE),
        os(p.rootfs()),
    ];
    argv.extend(p.sources.iter().map(os));
    p.privileged(argv)
}

/// `mkfs.ext4 -d`: the root file system from the folder, without mounting anything.
pub fn mkfs_argv(p: &BuildPlan) -> Vec<OsString> {
    p.privileged(vec![
        os("mkfs.ext4"),
        os("-q"),
        os("-F"),
        os("-L"),
        os("band-root"),
        os("-d"),
        os(p.rootfs()),
        os(p.raw()),
        os(format!("{}M", p.fs_size_mib)),
    ])
}

pub fn convert_argv(p: &BuildPlan) -> Vec<OsString> {
    vec![
        os("qemu-img"),
        os("convert"),
        os("-q"),
        os("-O"),
        os("qcow2"),
        os(p.raw()),
        os(p.qcow2()),
    ]
}

/// Remove the build's root-owned leftovers.
pub fn cleanup_argv(p: &BuildPlan) -> Vec<OsString> {
    p.privileged(vec![
        os("rm"),
        os("-rf"),
        os("--one-file-system"),
        os(p.rootfs()),
        os(p.raw()),
    ])
}

/// An instance's copy-on-write disk over the cached base, `size_mib` large.
pub fn overlay_argv(base: &Path, overlay: &Path, size_mib: u64) -> Vec<OsString> {
    vec![
        os("qemu-img"),
        os("create"),
        os("-q"),
        os("-f"),
        os("qcow2"),
        os("-F"),
        os("qcow2"),
        os("-b"),
        os(base),
        os(overlay),
        os(format!("{size_mib}M")),
    ]
}

/// What `image.json` records about a build.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageInfo {
    pub recipe: String,
    pub suite: String,
    pub kernel: String,
    pub packages: Vec<String>,
    pub sources: Vec<String>,
    pub build_secs: f64,
    pub built_at_unix: u64,
}

/// A built image in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    pub dir: PathBuf,
}

impl Image {
    pub fn base(&self) -> PathBuf {
        self.dir.join(BASE)
    }
    pub fn kernel(&self) -> PathBuf {
        self.dir.join(KERNEL)
    }
    pub fn initrd(&self) -> PathBuf {
        self.dir.join(INITRD)
    }
    pub fn host_key(&self) -> PathBuf {
        self.dir.join(HOST_KEY)
    }
    pub fn hash(&self) -> String {
        self.dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
    pub fn info(&self) -> Result<ImageInfo> {
        let p = self.dir.join(INFO);
        let text = fs_err::read_to_string(&p).map_err(VmError::Fs)?;
        serde_json::from_str(&text).map_err(|e| VmError::Invalid(format!("{}: {e}", p.display())))
    }
}

/// The image of the current recipe, when it has been built (and is complete).
pub fn cached(paths: &VmPaths) -> Option<Image> {
    let img = Image {
        dir: paths.image_dir(&recipe::hash()),
    };
    let complete = [BASE, KERNEL, INITRD, HOST_KEY, INFO]
        .iter()
        .all(|f| img.dir.join(f).is_file());
    complete.then_some(img)
}

/// A build step, for the progress display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Packages,
    FileSystem,
    Qcow2,
    Cleanup,
}

impl Step {
    pub fn describe(self) -> &'static str {
        match self {
            Step::Packages => "install Debian packages (mmdebstrap)",
            Step::FileSystem => "make the ext4 file system (mkfs.ext4 -d)",
            Step::Qcow2 => "convert to qcow2 (qemu-img)",
            Step::Cleanup => "remove the build folder",
        }
    }
}

/// Build the image of the current recipe. `on_step` is called as each step starts.
pub fn build(
    paths: &VmPaths,
    mirror: Option<&str>,
    on_step: &mut dyn FnMut(Step),
) -> Result<Image> {
    let started = Instant::now();
    let hash = recipe::hash();
    let final_dir = paths.image_dir(&hash);
    private_dir(&paths.images_dir())?;
    let plan = BuildPlan {
        work: paths.images_dir().join(format!("{hash}.partial")),
        sources: recipe::sources(mirror),
        packages: recipe::packages().iter().map(|s| s.to_string()).collect(),
        fs_size_mib: FS_SIZE_MIB,
        sudo: !cmd::is_root(),
    };
    for tool in ["mmdebstrap", "mkfs.ext4", "qemu-img", "ssh-keygen"] {
        if cmd::which(tool).is_none()
            && !Path::new("/usr/sbin").join(tool).is_file()
            && !Path::new("/sbin").join(tool).is_file()
        {
            return Err(VmError::Invalid(format!(
                "`{tool}` is not installed; on Debian/Ubuntu: apt-get install mmdebstrap e2fsprogs qemu-utils openssh-client"
            )));
        }
    }
    // A previous failed build may have left root-owned files behind.
    if plan.work.exists() {
        cmd::run_argv(&cleanup_argv(&plan))?;
        fs_err::remove_dir_all(&plan.work).map_err(VmError::Fs)?;
    }
    let result = build_in(&plan, paths, on_step, started);
    on_step(Step::Cleanup);
    let cleaned = cmd::run_argv(&cleanup_argv(&plan));
    let info = result?;
    cleaned?;
    let _ = fs_err::remove_dir_all(plan.keys_dir());
    let _ = fs_err::remove_dir_all(plan.recipe_dir());
    write_atomic(
        &plan.work.join(INFO),
        serde_json::to_string_pretty(&info)
            .unwrap_or_default()
            .as_bytes(),
        0o644,
    )?;
    if final_dir.exists() {
        fs_err::remove_dir_all(&final_dir).map_err(VmError::Fs)?;
    }
    fs_err::rename(&plan.work, &final_dir).map_err(VmError::Fs)?;
    Ok(Image { dir: final_dir })
}

fn build_in(
    plan: &BuildPlan,
    paths: &VmPaths,
    on_step: &mut dyn FnMut(Step),
    started: Instant,
) -> Result<ImageInfo> {
    private_dir(&plan.work)?;
    recipe::write_to(&plan.recipe_dir())?;
    // The host key is made here and pinned by the host; its private half exists only in the image.
    private_dir(&plan.keys_dir())?;
    let client = keys::ensure_key(&paths.client_key(), "band")?;
    let host_key = plan.keys_dir().join("ssh_host_ed25519_key");
    cmd::run_argv(&keys::keygen_argv(&host_key, "band-vm"))?;
    let client_pub = client.with_extension("pub");
    fs_err::copy(&client_pub, plan.keys_dir().join("authorized_keys")).map_err(VmError::Fs)?;

    on_step(Step::Packages);
    cmd::run_argv(&mmdebstrap_argv(plan))?;
    let kernel = copy_boot_file(&plan.rootfs(), "vmlinuz", &plan.work.join(KERNEL))?;
    copy_boot_file(&plan.rootfs(), "initrd.img", &plan.work.join(INITRD))?;
    let host_pub = host_key.with_extension("pub");
    fs_err::copy(&host_pub, plan.work.join(HOST_KEY)).map_err(VmError::Fs)?;

    on_step(Step::FileSystem);
    cmd::run_argv(&mkfs_argv(plan))?;
    on_step(Step::Qcow2);
    cmd::run_argv(&convert_argv(plan))?;

    Ok(ImageInfo {
        recipe: recipe::hash(),
        suite: recipe::SUITE.to_string(),
        kernel,
        packages: plan.packages.clone(),
        sources: plan.sources.clone(),
        build_secs: started.elapsed().as_secs_f64(),
        built_at_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
    })
}

/// Copy `/vmlinuz` or `/initrd.img` (Debian's symlinks into /boot) out of the root; returns the
/// file name it points at. The link must stay inside /boot.
fn copy_boot_file(rootfs: &Path, link: &str, dest: &Path) -> Result<String> {
    let l = rootfs.join(link);
    let target = fs_err::read_link(&l).map_err(VmError::Fs)?;
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let rel = target.strip_prefix("/").unwrap_or(&target);
    if rel.components().count() != 2 || !rel.starts_with("boot") {
        return Err(VmError::Invalid(format!(
            "{} points at {}, not into /boot",
            l.display(),
            target.display()
        )));
    }
    let src = rootfs.join(rel);
    fs_err::copy(&src, dest).map_err(VmError::Fs)?;
    Ok(name)
}

/// Remove the images of other recipes (after a successful build).
pub fn remove_others(paths: &VmPaths, keep: &Image) -> Result<()> {
    let dir = paths.images_dir();
    let Ok(entries) = fs_err::read_dir(&dir) else {
        return Ok(());
    };
    for e in entries.flatten() {
        if e.path() != keep.dir && e.path().join(INFO).is_file() {
            fs_err::remove_dir_all(e.path()).map_err(VmError::Fs)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(sudo: bool) -> BuildPlan {
        BuildPlan {
            work: PathBuf::from("/d/vm/images/abc.partial"),
            sources: recipe::sources(None),
            packages: vec!["systemd".into(), "bubblewrap".into()],
            fs_size_mib: 2048,
            sudo,
        }
    }

    fn strings(argv: &[OsString]) -> Vec<String> {
        argv.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn mmdebstrap_builds_minbase_with_the_recipe_hook() {
        let a = strings(&mmdebstrap_argv(&plan(false)));
        assert_eq!(
            a[..4],
            [
                "mmdebstrap",
                "--mode=root",
                "--variant=minbase",
                "--format=directory"
            ]
        );
        assert!(a.contains(&"--include=systemd,bubblewrap".to_string()));
        let hook = a
            .iter()
            .find(|x| x.starts_with("--customize-hook="))
            .unwrap();
        assert_eq!(
            hook,
            "--customize-hook=BAND_RECIPE='/d/vm/images/abc.partial/recipe' BAND_KEYS='/d/vm/images/abc.partial/keys' sh '/d/vm/images/abc.partial/recipe/customize.sh' \"$1\""
        );
        let suite = a.iter().position(|x| x == "bookworm").unwrap();
        assert_eq!(a[suite + 1], "/d/vm/images/abc.partial/rootfs");
        assert_eq!(a[suite + 2..], recipe::sources(None)[..]);
    }

    #[test]
    fn without_root_the_privileged_steps_use_sudo() {
        assert_eq!(strings(&mmdebstrap_argv(&plan(true)))[0], "sudo");
        assert_eq!(strings(&mkfs_argv(&plan(true)))[..2], ["sudo", "mkfs.ext4"]);
        assert_eq!(
            strings(&cleanup_argv(&plan(true)))[..3],
            ["sudo", "rm", "-rf"]
        );
        assert_eq!(
            strings(&convert_argv(&plan(true)))[0],
            "qemu-img",
            "qemu-img reads a world-readable file"
        );
    }

    #[test]
    fn mkfs_copies_the_folder_into_a_sized_ext4() {
        assert_eq!(
            strings(&mkfs_argv(&plan(false))),
            [
                "mkfs.ext4",
                "-q",
                "-F",
                "-L",
                "band-root",
                "-d",
                "/d/vm/images/abc.partial/rootfs",
                "/d/vm/images/abc.partial/root.raw",
                "2048M"
            ]
        );
    }

    #[test]
    fn overlay_is_backed_by_the_base() {
        let a = strings(&overlay_argv(
            Path::new("/i/root.qcow2"),
            Path::new("/q/disk.qcow2"),
            8192,
        ));
        assert_eq!(
            a,
            [
                "qemu-img",
                "create",
                "-q",
                "-f",
                "qcow2",
                "-F",
                "qcow2",
                "-b",
                "/i/root.qcow2",
                "/q/disk.qcow2",
                "8192M"
            ]
        );
    }

    #[test]
    fn sh_quote_survives_quotes() {
        assert_eq!(sh_quote("a'b"), r"'a'\''b'");
    }

    #[test]
    fn boot_files_must_point_into_boot() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        fs_err::create_dir_all(root.join("boot")).unwrap();
        fs_err::write(root.join("boot/vmlinuz-6.1.0-1-cloud-amd64"), b"k").unwrap();
        fs_err::os::unix::fs::symlink("boot/vmlinuz-6.1.0-1-cloud-amd64", root.join("vmlinuz"))
            .unwrap();
        fs_err::os::unix::fs::symlink("/etc/shadow", root.join("initrd.img")).unwrap();
        let out = t.path().join("out");
        assert_eq!(
            copy_boot_file(root, "vmlinuz", &out).unwrap(),
            "vmlinuz-6.1.0-1-cloud-amd64"
        );
        assert_eq!(fs_err::read(&out).unwrap(), b"k");
        assert!(copy_boot_file(root, "initrd.img", &out).is_err());
    }

    #[test]
    fn an_incomplete_image_is_not_cached() {
        let t = tempfile::tempdir().unwrap();
        let paths = VmPaths::new(t.path());
        let dir = paths.image_dir(&recipe::hash());
        fs_err::create_dir_all(&dir).unwrap();
        for f in [BASE, KERNEL, INITRD, HOST_KEY] {
            fs_err::write(dir.join(f), b"x").unwrap();
        }
        assert!(cached(&paths).is_none());
        fs_err::write(dir.join(INFO), b"{}").unwrap();
        assert_eq!(cached(&paths).map(|i| i.hash()), Some(recipe::hash()));
    }
}
