//! Directories of an exact mode, made with as few calls as the kernel allows.
//!
//! A run makes some 90 folders in its run directory and looks at about ten of band-server's own
//! (`<state>`, `leases`, `exec`, …) that are there already. `mkdir` then `chmod` (the process's
//! umask takes bits off `mkdir`'s mode) was two calls for each new folder, and a `chmod` of each
//! existing one, which on a disk filesystem writes its inode's change time to the journal every
//! run. Here an existing folder is changed only when its mode differs, and a new folder in the run
//! directory's tmpfs ([`fresh_dir_with_mode`]) is made with its mode when the umask leaves that
//! mode whole. Elsewhere a parent's default ACL, not the umask, may decide a new folder's mode, so
//! a new folder there is looked at too.

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::OnceLock;

/// The process's umask, as `/proc/self/status` gives it (read once: band-server never sets it).
/// `None` when it cannot be read: every new folder is then `chmod`ed.
pub(crate) fn umask() -> Option<u32> {
    static UMASK: OnceLock<Option<u32>> = OnceLock::new();
    *UMASK.get_or_init(|| {
        fs_err::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| parse_umask(&s))
    })
}

/// The `Umask:` line of a `/proc/<pid>/status` text.
pub(crate) fn parse_umask(status: &str) -> Option<u32> {
    let value = status.lines().find_map(|l| l.strip_prefix("Umask:"))?;
    u32::from_str_radix(value.trim(), 8).ok()
}

/// Does `mkdir(path, mode)` under `umask` make a folder of exactly `mode`? Not for the bits
/// above the permissions (set-group-id is inherited, not taken from `mkdir`).
fn whole(mode: u32, umask: Option<u32>) -> bool {
    mode & !0o1777 == 0 && umask.is_some_and(|m| mode & m == 0)
}

/// Make the folder `path` with `mode`, or take the one there (following a link to a folder, as
/// `create_dir_all` does); `parents`: make missing parents too, with the default mode. Then
/// `owner`'s uid and gid, if given (of `path` itself, not of a folder it links to). The folder
/// has exactly `mode` when this returns: it is `chmod`ed only when its mode is another. Errors
/// are the kernel's, each naming `path`.
pub(crate) fn dir_with_mode(
    path: &Path,
    mode: u32,
    parents: bool,
    owner: Option<(u32, u32)>,
) -> io::Result<()> {
    make(path, mode, parents, owner, false)
}

/// [`dir_with_mode`] in a folder of a tmpfs band-server mounted itself and nothing else writes
/// (the run directory): no ACL there, so the umask alone decides a new folder's mode, and one it
/// leaves whole is not looked at again.
pub(crate) fn fresh_dir_with_mode(
    path: &Path,
    mode: u32,
    owner: Option<(u32, u32)>,
) -> io::Result<()> {
    make(path, mode, false, owner, true)
}

fn make(
    path: &Path,
    mode: u32,
    parents: bool,
    owner: Option<(u32, u32)>,
    fresh: bool,
) -> io::Result<()> {
    let made = || {
        std::fs::DirBuilder::new()
            .mode(mode)
            .create(path)
            .map_err(|e| io::Error::new(e.kind(), format!("mkdir {}: {e}", path.display())))
    };
    let created = match made() {
        Ok(()) => true,
        Err(e) if e.kind() == io::ErrorKind::NotFound && parents => {
            if let Some(parent) = path.parent() {
                fs_err::create_dir_all(parent)?;
            }
            match made() {
                Ok(()) => true,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
                Err(e) => return Err(e),
            }
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
        Err(e) => return Err(e),
    };
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::lchown(path, Some(uid), Some(gid))
            .map_err(|e| io::Error::new(e.kind(), format!("chown {}: {e}", path.display())))?;
    }
    if fresh && created && whole(mode, umask()) {
        return Ok(());
    }
    let meta = fs_err::metadata(path)?;
    if !meta.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} exists and is not a folder", path.display()),
        ));
    }
    keep_mode(path, &meta, mode)
}

/// Give the folder `path`, whose metadata is `meta`, the mode `mode` unless it has it: a `chmod`
/// to the same mode would still write its change time (to disk, on a disk filesystem).
pub(crate) fn keep_mode(path: &Path, meta: &std::fs::Metadata, mode: u32) -> io::Result<()> {
    if meta.mode() & 0o7777 == mode {
        return Ok(());
    }
    fs_err::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_umask_is_read_from_the_status_text() {
        let status = "Name:\tband-server\nUmask:\t0022\nState:\tR (running)\n";
        assert_eq!(parse_umask(status), Some(0o022));
        assert_eq!(parse_umask("Umask:\t0077\n"), Some(0o077));
        assert_eq!(parse_umask("Name:\tx\n"), None);
        assert_eq!(parse_umask("Umask:\tnope\n"), None);
        // This process's, as the kernel says it.
        assert!(umask().is_some());
    }

    #[test]
    fn mkdir_gives_the_mode_only_when_the_umask_leaves_it_whole() {
        assert!(whole(0o755, Some(0o022)));
        assert!(whole(0o711, Some(0o022)));
        assert!(whole(0o1700, Some(0o022)));
        assert!(!whole(0o1770, Some(0o022)), "group write is masked");
        assert!(!whole(0o755, Some(0o077)));
        assert!(!whole(0o2755, Some(0o022)), "set-group-id is not mkdir's");
        assert!(!whole(0o755, None));
    }

    #[test]
    fn every_folder_ends_with_exactly_its_mode() {
        let tmp = tempfile::tempdir().expect("tempdir");
        // New, with a mode mkdir gives whole and with one the umask cuts.
        for (name, mode) in [("a", 0o755), ("b", 0o1770), ("c", 0o700), ("d", 0o777)] {
            let p = tmp.path().join(name);
            dir_with_mode(&p, mode, false, None).expect("mkdir");
            assert_eq!(
                fs_err::metadata(&p).unwrap().mode() & 0o7777,
                mode,
                "{name}"
            );
            let p = tmp.path().join(format!("fresh-{name}"));
            fresh_dir_with_mode(&p, mode, None).expect("mkdir");
            assert_eq!(
                fs_err::metadata(&p).unwrap().mode() & 0o7777,
                mode,
                "fresh {name}"
            );
        }
        // Existing, of another mode: changed.
        let a = tmp.path().join("a");
        dir_with_mode(&a, 0o711, false, None).expect("again");
        assert_eq!(fs_err::metadata(&a).unwrap().mode() & 0o7777, 0o711);
        dir_with_mode(&a, 0o711, false, None).expect("same mode");
        assert_eq!(fs_err::metadata(&a).unwrap().mode() & 0o7777, 0o711);
        // Parents made when asked, not otherwise.
        let deep = tmp.path().join("x/y/z");
        assert_eq!(
            dir_with_mode(&deep, 0o700, false, None).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        dir_with_mode(&deep, 0o700, true, None).expect("with parents");
        assert_eq!(fs_err::metadata(&deep).unwrap().mode() & 0o7777, 0o700);
        // A file in the way is an error naming it.
        let file = tmp.path().join("f");
        fs_err::write(&file, "").unwrap();
        let e = dir_with_mode(&file, 0o755, false, None).unwrap_err();
        assert!(e.to_string().contains("not a folder"), "{e}");
    }
}
