//! The QEMU driver's disk image, built from Debian packages by one mmdebstrap command, as root
//! or as an ordinary user alike:
//!
//! ```text
//! mmdebstrap --mode=root|unshare --format=null --variant=minbase --include=<packages.txt>
//!   customize hooks (as root, or as root of mmdebstrap's user namespace):
//!     copy-in recipe/ keys/ /tmp/band       the recipe and the host key, into the new root
//!     customize.sh "$1"                     the recipe's configuration; then /tmp/band removed
//!     IMAGE_HOOK                            mkfs.ext4 -d <the root, without mmdebstrap's mounts>
//!                                           root.raw; qemu-img convert → /tmp/band-out/root.qcow2,
//!                                           with /vmlinuz, /initrd.img and /boot beside it
//!     sync-out /tmp/band-out <work>/out     back out, owned by whoever runs band
//! then <work>/out: root.qcow2 is the cached base (instances get an overlay), and vmlinuz and
//! initrd.img are copied out of its boot/ (QEMU boots them with -kernel/-initrd)
//! ```
//!
//! Without root, mmdebstrap's unshare mode maps root of a user namespace to the user's subordinate
//! ids (`/etc/subuid`, `/etc/subgid`, set up through `newuidmap`/`newgidmap` from Debian's
//! `uidmap`). The root file system is owned by those ids, which the user cannot read or remove, so
//! every step that needs the tree runs inside mmdebstrap, in a hook, as that namespace's root: there
//! `mkfs.ext4 -d` records the owners the guest sees (0 for root). The tree itself is mmdebstrap's
//! temporary folder (`--format=null`), which mmdebstrap removes; nothing owned by a subordinate id
//! is left in band's data folder, so cleaning up never needs root, and `sudo` is never used. Root
//! runs the same hooks in mmdebstrap's root mode: one build, whoever runs it.
//!
//! The image is cached under `vm/images/<recipe hash>/`.

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

/// How mmdebstrap gets root for the build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildMode {
    /// band runs as root: mmdebstrap's root mode.
    Root,
    /// An ordinary user: mmdebstrap's unshare mode, root of a user namespace mapped to the user's
    /// subordinate ids.
    Unshare,
}

impl BuildMode {
    /// The mode for a process that is root or not.
    pub fn for_root(is_root: bool) -> BuildMode {
        if is_root {
            BuildMode::Root
        } else {
            BuildMode::Unshare
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            BuildMode::Root => "root",
            BuildMode::Unshare => "unshare",
        }
    }
}

/// Everything one build needs, with its paths inside a private work folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildPlan {
    /// `vm/images/<hash>.partial`: removed on failure, renamed to `<hash>` on success.
    pub work: PathBuf,
    pub sources: Vec<String>,
    pub packages: Vec<String>,
    pub fs_size_mib: u64,
    pub mode: BuildMode,
    /// `mkfs.ext4` and `qemu-img`, found by band (a hook's `PATH` is the user's, often without
    /// `/usr/sbin`).
    pub mkfs: PathBuf,
    pub qemu_img: PathBuf,
}

impl BuildPlan {
    pub fn recipe_dir(&self) -> PathBuf {
        self.work.join("recipe")
    }
    pub fn keys_dir(&self) -> PathBuf {
        self.work.join("keys")
    }
    /// What the build's last hook sends out of mmdebstrap: the qcow2, `/boot` and the two links.
    pub fn out_dir(&self) -> PathBuf {
        self.work.join("out")
    }
    pub fn qcow2(&self) -> PathBuf {
        self.work.join(BASE)
    }
}

pub const BASE: &str = "root.qcow2";
pub const KERNEL: &str = "vmlinuz";
pub const INITRD: &str = "initrd.img";
pub const HOST_KEY: &str = "host_key.pub";
pub const INFO: &str = "image.json";

/// Where, inside the new root, the recipe and keys are copied for the customize hook.
const IN_BUILD: &str = "/tmp/band";
/// Where, inside the new root, the image hook leaves what the build keeps.
const IN_OUT: &str = "/tmp/band-out";

/// Quote a string for `sh` (single quotes; mmdebstrap's special hooks split the same way).
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The image hook, run by `sh -c` inside a private mount namespace with `$1` the new root, `$2`
/// mkfs.ext4, `$3` qemu-img and `$4` the size. During customize hooks mmdebstrap has `/proc`,
/// `/sys` and `/dev` mounted in the root, and its own cleanup (what it does after the hooks) has
/// not run: so the file system is made from a bind mount of the root alone (no submounts), after
/// the same cleanup on it. What mmdebstrap still needs (its apt config, in `/tmp` and
/// `/etc/apt/apt.conf.d/00mmdebstrap`; whatever is in `/run`) is moved aside while mkfs reads the
/// tree, and back after. The bind mount is unmounted before anything is removed (`rmdir` only), so
/// a failure cannot delete through it.
pub const IMAGE_HOOK: &str = r#"set -eu
root="$1"; mkfs="$2"; qemu_img="$3"; size="$4"
work=$(mktemp -d)
view="$work/view"; aside="$work/aside"; conf="etc/apt/apt.conf.d/00mmdebstrap"
back() {
  for d in tmp run; do
    if [ -d "$aside/$d" ]; then
      find "$aside/$d" -mindepth 1 -maxdepth 1 -exec mv -t "$view/$d" {} +
      rmdir "$aside/$d"
    fi
  done
  if [ -e "$aside/00mmdebstrap" ]; then mv "$aside/00mmdebstrap" "$view/$conf"; fi
}
trap 'back || :; umount "$view" 2>/dev/null || :; rm -f "$work/root.raw"; rmdir "$aside" "$view" "$work"' EXIT
mkdir "$view" "$aside" "$aside/tmp" "$aside/run"
mount --bind "$root" "$view"
rm -f "$view/var/log/dpkg.log" "$view/var/log/apt/history.log" "$view/var/log/apt/term.log" \
  "$view/var/log/alternatives.log" "$view/var/cache/ldconfig/aux-cache" \
  "$view/var/log/apt/eipp.log.xz" "$view/var/lib/dbus/machine-id"
if [ -e "$view/etc/machine-id" ]; then rm -f "$view/etc/machine-id"; : >"$view/etc/machine-id"; fi
find "$view/tmp" -mindepth 1 -maxdepth 1 -exec mv -t "$aside/tmp" {} +
find "$view/run" -mindepth 1 -maxdepth 1 ! -name lock -exec mv -t "$aside/run" {} +
mv "$view/$conf" "$aside/00mmdebstrap"
"$mkfs" -q -F -L band-root -d "$view" "$work/root.raw" "$size"
back
out="$view/tmp/band-out"
mkdir -m 0700 "$out"
"$qemu_img" convert -q -O qcow2 "$work/root.raw" "$out/root.qcow2"
cp -P "$view/vmlinuz" "$view/initrd.img" "$out/"
cp -R -P "$view/boot" "$out/boot"
"#;

/// The mmdebstrap command line: the whole build, image included (see the module docs). The
/// customize hook gets the recipe and key folders on its command line, as copies inside the new
/// root (namespace root cannot read band's private folders).
pub fn mmdebstrap_argv(p: &BuildPlan) -> Vec<OsString> {
    let q = |p: &Path| sh_quote(&p.to_string_lossy());
    let customize = format!(
        "BAND_RECIPE=\"$1{IN_BUILD}/recipe\" BAND_KEYS=\"$1{IN_BUILD}/keys\" sh \"$1{IN_BUILD}/recipe/customize.sh\" \"$1\""
    );
    let image = format!(
        "unshare --mount --propagation private sh -c {} band-image \"$1\" {} {} {}M",
        sh_quote(IMAGE_HOOK),
        q(&p.mkfs),
        q(&p.qemu_img),
        p.fs_size_mib
    );
    let mut argv = vec![
        os("mmdebstrap"),
        os(format!("--mode={}", p.mode.as_str())),
        os("--variant=minbase"),
        os("--format=null"),
        os(format!("--include={}", p.packages.join(","))),
        os("--aptopt=Acquire::Retries \"3\""),
        os(format!("--customize-hook=mkdir -m 0700 \"$1{IN_BUILD}\"")),
        os(format!(
            "--customize-hook=copy-in {} {} {IN_BUILD}",
            q(&p.recipe_dir()),
            q(&p.keys_dir())
        )),
        os(format!("--customize-hook={customize}")),
        os(format!("--customize-hook=rm -rf \"$1{IN_BUILD}\"")),
        os(format!("--customize-hook={image}")),
        os(format!(
            "--customize-hook=sync-out {IN_OUT} {}",
            q(&p.out_dir())
        )),
        os(recipe::SUITE),
        os("/dev/null"),
    ];
    argv.extend(p.sources.iter().map(os));
    argv
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
    Cleanup,
}

impl Step {
    pub fn describe(self) -> &'static str {
        match self {
            Step::Packages => {
                "install Debian packages, make the ext4 file system and qcow2 (mmdebstrap)"
            }
            Step::Cleanup => "remove the build folder",
        }
    }
}

/// The fewest subordinate ids an unshare build needs: Debian's packages use ids up to 65534.
pub const SUBID_COUNT: u64 = 65536;

/// The range a `/etc/subuid` or `/etc/subgid` text gives `user`, as mmdebstrap reads it: the first
/// line naming the user (by name: mmdebstrap does not match numeric ids).
pub fn subid_range(text: &str, user: &str) -> Option<(u64, u64)> {
    text.lines().find_map(|l| {
        let mut f = l.trim().splitn(3, ':');
        if f.next()? != user {
            return None;
        }
        Some((f.next()?.parse().ok()?, f.next()?.trim().parse().ok()?))
    })
}

/// Why an ordinary user cannot build the image (and what to do), or `None` when they can.
/// `subuid`/`subgid` are the files' texts (`None`: unreadable or absent).
pub fn rootless_problem(
    user: &str,
    subuid: Option<&str>,
    subgid: Option<&str>,
    newuidmap: bool,
    newgidmap: bool,
) -> Option<(String, String)> {
    if !newuidmap || !newgidmap {
        return Some((
            "building the VM image without root needs newuidmap and newgidmap, which are not installed".into(),
            "install them (Debian/Ubuntu: `apt-get install uidmap`)".into(),
        ));
    }
    for (file, text) in [("/etc/subuid", subuid), ("/etc/subgid", subgid)] {
        match text.and_then(|t| subid_range(t, user)) {
            Some((_, n)) if n >= SUBID_COUNT => {}
            Some((_, n)) => {
                return Some((
                    format!(
                        "{file} gives {user} only {n} subordinate ids; the image build needs {SUBID_COUNT}"
                    ),
                    format!(
                        "as root: `usermod --add-subuids 100000-165535 --add-subgids 100000-165535 {user}` (a free range)"
                    ),
                ));
            }
            None => {
                return Some((
                    format!(
                        "{file} has no range for {user}: building the VM image without root needs one"
                    ),
                    format!(
                        "as root: `usermod --add-subuids 100000-165535 --add-subgids 100000-165535 {user}` (a free range)"
                    ),
                ));
            }
        }
    }
    None
}

/// A tool the build needs: on `PATH`, or in `/usr/sbin` or `/sbin`.
fn find_tool(tool: &str) -> Result<PathBuf> {
    cmd::which(tool)
        .or_else(|| {
            ["/usr/sbin", "/sbin"]
                .iter()
                .map(|d| Path::new(d).join(tool))
                .find(|p| p.is_file())
        })
        .ok_or_else(|| {
            VmError::user(
                format!("`{tool}` is not installed"),
                "on Debian/Ubuntu: apt-get install mmdebstrap e2fsprogs qemu-utils openssh-client",
            )
        })
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
    find_tool("mmdebstrap")?;
    find_tool("ssh-keygen")?;
    let mode = BuildMode::for_root(cmd::is_root());
    if mode == BuildMode::Unshare {
        let user = cmd::user_name().unwrap_or_default();
        let read = |p: &str| fs_err::read_to_string(p).ok();
        let (subuid, subgid) = (read("/etc/subuid"), read("/etc/subgid"));
        if let Some((message, hint)) = rootless_problem(
            &user,
            subuid.as_deref(),
            subgid.as_deref(),
            cmd::which("newuidmap").is_some(),
            cmd::which("newgidmap").is_some(),
        ) {
            return Err(VmError::user(message, hint));
        }
    }
    let plan = BuildPlan {
        work: paths.images_dir().join(format!("{hash}.partial")),
        sources: recipe::sources(mirror),
        packages: recipe::packages().iter().map(|s| s.to_string()).collect(),
        fs_size_mib: FS_SIZE_MIB,
        mode,
        mkfs: find_tool("mkfs.ext4")?,
        qemu_img: find_tool("qemu-img")?,
    };
    // A previous failed build's folder: everything in it is the user's own.
    if plan.work.exists() {
        fs_err::remove_dir_all(&plan.work).map_err(VmError::Fs)?;
    }
    let result = build_in(&plan, paths, on_step, started);
    on_step(Step::Cleanup);
    let info = match result {
        Ok(info) => info,
        Err(e) => {
            let _ = fs_err::remove_dir_all(&plan.work);
            return Err(e);
        }
    };
    for dir in [plan.keys_dir(), plan.recipe_dir(), plan.out_dir()] {
        fs_err::remove_dir_all(&dir).map_err(VmError::Fs)?;
    }
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
    private_dir(&plan.out_dir())?;

    on_step(Step::Packages);
    cmd::run_argv(&mmdebstrap_argv(plan))?;
    let out = plan.out_dir();
    let kernel = copy_boot_file(&out, "vmlinuz", &plan.work.join(KERNEL))?;
    copy_boot_file(&out, "initrd.img", &plan.work.join(INITRD))?;
    fs_err::rename(out.join(BASE), plan.qcow2()).map_err(VmError::Fs)?;
    let host_pub = host_key.with_extension("pub");
    fs_err::copy(&host_pub, plan.work.join(HOST_KEY)).map_err(VmError::Fs)?;

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
    // The file itself, not a link to elsewhere (on the host, once out of the image).
    if !fs_err::symlink_metadata(&src)
        .map_err(VmError::Fs)?
        .is_file()
    {
        return Err(VmError::Invalid(format!(
            "{} is not a regular file",
            src.display()
        )));
    }
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

    fn plan(mode: BuildMode) -> BuildPlan {
        BuildPlan {
            work: PathBuf::from("/d/vm/images/abc.partial"),
            sources: recipe::sources(None),
            packages: vec!["systemd".into(), "bubblewrap".into()],
            fs_size_mib: 2048,
            mode,
            mkfs: PathBuf::from("/usr/sbin/mkfs.ext4"),
            qemu_img: PathBuf::from("/usr/bin/qemu-img"),
        }
    }

    fn strings(argv: &[OsString]) -> Vec<String> {
        argv.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    fn hooks(a: &[String]) -> Vec<&str> {
        a.iter()
            .filter_map(|x| x.strip_prefix("--customize-hook="))
            .collect()
    }

    #[test]
    fn mmdebstrap_builds_minbase_and_the_image_in_its_hooks() {
        let a = strings(&mmdebstrap_argv(&plan(BuildMode::Root)));
        assert_eq!(
            a[..4],
            [
                "mmdebstrap",
                "--mode=root",
                "--variant=minbase",
                "--format=null"
            ]
        );
        assert!(a.contains(&"--include=systemd,bubblewrap".to_string()));
        let h = hooks(&a);
        assert_eq!(h.len(), 6, "{h:#?}");
        assert_eq!(h[0], r#"mkdir -m 0700 "$1/tmp/band""#);
        assert_eq!(
            h[1],
            "copy-in '/d/vm/images/abc.partial/recipe' '/d/vm/images/abc.partial/keys' /tmp/band"
        );
        assert_eq!(
            h[2],
            r#"BAND_RECIPE="$1/tmp/band/recipe" BAND_KEYS="$1/tmp/band/keys" sh "$1/tmp/band/recipe/customize.sh" "$1""#
        );
        // The private host key is gone from the tree before the file system is made.
        assert_eq!(h[3], r#"rm -rf "$1/tmp/band""#);
        assert_eq!(
            h[4],
            format!(
                "unshare --mount --propagation private sh -c {} band-image \"$1\" '/usr/sbin/mkfs.ext4' '/usr/bin/qemu-img' 2048M",
                sh_quote(IMAGE_HOOK)
            )
        );
        assert_eq!(
            h[5],
            "sync-out /tmp/band-out '/d/vm/images/abc.partial/out'"
        );
        let suite = a.iter().position(|x| x == "bookworm").unwrap();
        assert_eq!(a[suite + 1], "/dev/null", "no tree is left behind");
        assert_eq!(a[suite + 2..], recipe::sources(None)[..]);
    }

    #[test]
    fn an_ordinary_user_builds_in_unshare_mode_without_sudo() {
        let root = strings(&mmdebstrap_argv(&plan(BuildMode::Root)));
        let user = strings(&mmdebstrap_argv(&plan(BuildMode::Unshare)));
        assert_eq!(user[1], "--mode=unshare");
        assert!(!user.iter().any(|x| x.contains("sudo")), "{user:?}");
        // The one difference between root and an ordinary user is the mode.
        let differ: Vec<_> = root.iter().zip(&user).filter(|(a, b)| a != b).collect();
        assert_eq!(
            differ,
            [(&"--mode=root".to_string(), &"--mode=unshare".to_string())]
        );
        assert_eq!(BuildMode::for_root(false), BuildMode::Unshare);
        assert_eq!(BuildMode::for_root(true), BuildMode::Root);
    }

    #[test]
    fn the_image_hook_makes_the_file_system_from_a_view_without_mounts() {
        let h = IMAGE_HOOK;
        let at = |s: &str| h.find(s).unwrap_or_else(|| panic!("{s} missing"));
        let mkfs = at(r#""$mkfs" -q -F -L band-root -d "$view" "$work/root.raw" "$size""#);
        assert!(at(r#"mount --bind "$root" "$view""#) < mkfs);
        assert!(
            mkfs < at(r#"mkdir -m 0700 "$out""#),
            "the output is not in the image"
        );
        assert!(at(r#"mv "$view/$conf" "$aside/00mmdebstrap""#) < mkfs);
        assert!(at(r#"-exec mv -t "$aside/tmp" {} +"#) < mkfs);
        assert!(mkfs < at("\nback\n"), "what mmdebstrap needs is put back");
        assert!(at(r#": >"$view/etc/machine-id""#) < mkfs);
        // The clean-up unmounts before it removes, and removes the view only with rmdir.
        assert!(h.contains(
            r#"trap 'back || :; umount "$view" 2>/dev/null || :; rm -f "$work/root.raw"; rmdir "$aside" "$view" "$work"' EXIT"#
        ));
        assert!(!h.contains("rm -rf \"$work"));
    }

    #[test]
    fn the_image_hook_is_valid_sh() {
        // Parsed, not run.
        let out = std::process::Command::new("sh")
            .args(["-n", "-c", IMAGE_HOOK])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }

    #[test]
    fn subordinate_ranges_are_read_by_user_name() {
        let text = "alice:100000:65536\n1001:200000:65536\nbob:300000:1000\n";
        assert_eq!(subid_range(text, "alice"), Some((100000, 65536)));
        assert_eq!(subid_range(text, "bob"), Some((300000, 1000)));
        assert_eq!(subid_range(text, "carol"), None);
        assert_eq!(subid_range("alice:x:y\n", "alice"), None);
    }

    #[test]
    fn a_rootless_build_names_what_is_missing() {
        let ok = "u:100000:65536\n";
        assert_eq!(rootless_problem("u", Some(ok), Some(ok), true, true), None);
        let (m, hint) = rootless_problem("u", Some(ok), Some(ok), false, true).unwrap();
        assert!(m.contains("newuidmap"), "{m}");
        assert!(hint.contains("apt-get install uidmap"), "{hint}");
        let (m, hint) = rootless_problem("u", None, Some(ok), true, true).unwrap();
        assert!(m.starts_with("/etc/subuid has no range for u"), "{m}");
        assert!(hint.contains("usermod --add-subuids"), "{hint}");
        let (m, _) = rootless_problem("u", Some(ok), Some("u:1:10\n"), true, true).unwrap();
        assert!(m.starts_with("/etc/subgid gives u only 10"), "{m}");
        for (m, hint) in [
            rootless_problem("u", Some(""), Some(ok), true, true).unwrap(),
            rootless_problem("u", Some(ok), Some(ok), true, false).unwrap(),
        ] {
            assert!(!m.contains("sudo") && !hint.contains("sudo"), "{m} {hint}");
        }
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
        fs_err::os::unix::fs::symlink("/etc/shadow", root.join("boot/shadow")).unwrap();
        fs_err::os::unix::fs::symlink("boot/shadow", root.join("link")).unwrap();
        let out = t.path().join("out");
        assert_eq!(
            copy_boot_file(root, "vmlinuz", &out).unwrap(),
            "vmlinuz-6.1.0-1-cloud-amd64"
        );
        assert_eq!(fs_err::read(&out).unwrap(), b"k");
        assert!(copy_boot_file(root, "initrd.img", &out).is_err());
        let e = copy_boot_file(root, "link", &out).unwrap_err().to_string();
        assert!(e.contains("is not a regular file"), "{e}");
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
