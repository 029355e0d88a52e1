//! The VM image recipe, as data: `vm-templates/debian-12/` (package list, config files and the
//! customize hook), compiled into band so a released binary carries the recipe it was tested with.
//!
//! The recipe's hash names the cached image: change any file and the next `band setup` builds a
//! new one.

use std::path::Path;

use sha2::{Digest, Sha256};

use super::paths::write_atomic;
use super::{Result, VmError};

/// The Debian release the image is built from.
pub const SUITE: &str = "bookworm";
/// The default Debian mirror; `band setup --mirror URL` picks another (a local mirror works offline).
pub const DEFAULT_MIRROR: &str = "http://deb.debian.org/debian";
/// Security updates, used only with the default mirror.
pub const DEFAULT_SECURITY_MIRROR: &str = "http://deb.debian.org/debian-security";

/// One file of the recipe, relative to `vm-templates/debian-12/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecipeFile {
    pub path: &'static str,
    pub text: &'static str,
    pub mode: u32,
}

macro_rules! recipe_file {
    ($path:literal, $mode:literal) => {
        RecipeFile {
            path: $path,
            text: include_str!(concat!("../../vm-templates/debian-12/", $path)),
            mode: $mode,
        }
    };
}

/// Every file of the recipe.
pub const FILES: &[RecipeFile] = &[
    recipe_file!("packages.txt", 0o644),
    recipe_file!("customize.sh", 0o755),
    recipe_file!("files/sshd_config", 0o644),
    recipe_file!("files/network", 0o644),
    recipe_file!("files/resolv.conf", 0o644),
    recipe_file!("files/fstab", 0o644),
    recipe_file!("files/hostname", 0o644),
    recipe_file!("files/server.toml", 0o644),
    recipe_file!("files/journald.conf", 0o644),
    recipe_file!("files/initramfs-modules", 0o644),
    recipe_file!("files/initramfs.conf", 0o644),
];

/// The package names of a `packages.txt` text: one per line, `#` comments, blank lines ignored.
pub fn parse_packages(text: &str) -> Vec<&str> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .collect()
}

/// The packages of the image.
pub fn packages() -> Vec<&'static str> {
    let text = FILES
        .iter()
        .find(|f| f.path == "packages.txt")
        .map(|f| f.text)
        .unwrap_or("");
    parse_packages(text)
}

/// A short hash of the whole recipe (files, modes, suite): the image cache key.
pub fn hash() -> String {
    let mut h = Sha256::new();
    h.update(SUITE.as_bytes());
    for f in FILES {
        h.update([0]);
        h.update(f.path.as_bytes());
        h.update(format!("\0{:o}\0{}\0", f.mode, f.text.len()).as_bytes());
        h.update(f.text.as_bytes());
    }
    hex::encode(&h.finalize()[..8])
}

/// Write the recipe into `dir` (for mmdebstrap's hook to read).
pub fn write_to(dir: &Path) -> Result<()> {
    for f in FILES {
        let path = dir.join(f.path);
        if let Some(parent) = path.parent() {
            fs_err::create_dir_all(parent).map_err(VmError::Fs)?;
        }
        write_atomic(&path, f.text.as_bytes(), f.mode)?;
    }
    Ok(())
}

/// The apt sources of the build: the mirror's release, updates and backports (the kernel), plus
/// security updates when the default mirror is used (a custom mirror is taken to be complete, so
/// builds work offline).
pub fn sources(mirror: Option<&str>) -> Vec<String> {
    let main = mirror.unwrap_or(DEFAULT_MIRROR).trim_end_matches('/');
    let mut out = vec![
        format!("deb {main} {SUITE} main"),
        format!("deb {main} {SUITE}-updates main"),
        format!("deb {main} {SUITE}-backports main"),
    ];
    if mirror.is_none() {
        out.push(format!(
            "deb {DEFAULT_SECURITY_MIRROR} {SUITE}-security main"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_package_list_has_what_band_server_and_skills_need() {
        let p = packages();
        for want in [
            "linux-image-cloud-amd64/bookworm-backports",
            "systemd",
            "openssh-server",
            "bubblewrap",
            "iptables",
            "nftables",
            "slirp4netns",
            "iproute2",
            "ca-certificates",
            "bash",
            "python3",
            "jq",
            "curl",
            "passwd",
        ] {
            assert!(p.contains(&want), "{want} missing from packages.txt");
        }
        assert!(
            p.iter().all(|n| n
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-./".contains(c))),
            "{p:?}"
        );
    }

    #[test]
    fn package_parsing_skips_comments_and_blanks() {
        assert_eq!(parse_packages("# x\n\na  # why\n b\n"), vec!["a", "b"]);
    }

    #[test]
    fn every_recipe_file_is_used_by_the_hook() {
        let hook = FILES
            .iter()
            .find(|f| f.path == "customize.sh")
            .map(|f| f.text)
            .unwrap_or("");
        for f in FILES.iter().filter(|f| f.path.starts_with("files/")) {
            let name = f.path.trim_start_matches("files/");
            assert!(
                hook.contains(&format!("$files/{name}\"")),
                "customize.sh never installs {}",
                f.path
            );
        }
    }

    #[test]
    fn the_ssh_config_allows_only_band_s_key() {
        let cfg = FILES
            .iter()
            .find(|f| f.path == "files/sshd_config")
            .map(|f| f.text)
            .unwrap_or("");
        for line in [
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PermitRootLogin prohibit-password",
            // The warm band-server's socket (sshd needs both), and no remote (-R) forwarding.
            "AllowTcpForwarding local",
            "AllowStreamLocalForwarding local",
            "AuthorizedKeysFile /etc/band/authorized_keys",
        ] {
            assert!(
                cfg.lines().any(|l| l.trim() == line),
                "sshd_config lacks `{line}`"
            );
        }
    }

    #[test]
    fn hash_is_stable_and_short() {
        assert_eq!(hash(), hash());
        assert_eq!(hash().len(), 16);
    }

    #[test]
    fn sources_use_the_mirror_and_security_only_by_default() {
        assert_eq!(sources(None).len(), 4);
        let s = sources(Some("http://mirror.local/debian/"));
        assert_eq!(
            s,
            vec![
                "deb http://mirror.local/debian bookworm main",
                "deb http://mirror.local/debian bookworm-updates main",
                "deb http://mirror.local/debian bookworm-backports main"
            ]
        );
    }

    #[test]
    fn write_to_keeps_modes() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        write_to(t.path()).unwrap();
        let m = fs_err::metadata(t.path().join("customize.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(m & 0o777, 0o755);
        assert!(t.path().join("files/sshd_config").is_file());
    }
}
