//! The exact source of the band that carries it: a reproducible tar of the workspace files that
//! `cargo build --locked -p band-server` needs (see `archive.rs` for which), gzipped, and the
//! SHA-256 of the tar, which is the source's identity.
//!
//! `band setup --build-server-in-guest` (and by default on macOS with Lima) uploads it to the
//! target, checks the hash there, and builds band-server, band-jail and band-shim in a Debian 12
//! root with Debian's Rust toolchain (rustc-web): no cross toolchain on the host (docs/vm.md).
//!
//! Only band's `cli` feature depends on this crate: a server edit re-runs this build script and
//! so recompiles band's CLI library and binary, never band-server's own build.

/// The gzipped tar of the source (empty when band was built outside its workspace).
pub const ARCHIVE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/source.tar.gz"));

/// The SHA-256 of the uncompressed tar, lower-case hex (empty when there is no archive).
pub const SHA256: &str = include_str!(concat!(env!("OUT_DIR"), "/source.sha256"));

#[cfg(test)]
#[path = "archive.rs"]
mod archive;

#[cfg(test)]
mod tests {
    use super::archive;
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        fs_err::create_dir_all(p.parent().unwrap()).unwrap();
        fs_err::write(p, text).unwrap();
    }

    /// A small workspace: a root package and one member, plus files the archive leaves out.
    fn workspace(root: &Path) {
        write(
            root,
            "Cargo.toml",
            "[workspace]\nmembers = [\".\", \"server\"]\n[package]\nname = \"x\"\n",
        );
        write(root, "Cargo.lock", "version = 4\n");
        write(root, "src/lib.rs", "pub fn f() {}\n");
        write(root, "benches/b.rs", "fn main() {}\n");
        write(root, "vm-templates/server.toml", "a = 1\n");
        write(root, "server/Cargo.toml", "[package]\nname = \"server\"\n");
        write(root, "server/build.rs", "fn main() {}\n");
        write(root, "server/src/main.rs", "fn main() {}\n");
        write(root, "server/src/bin/jail.rs", "fn main() {}\n");
        // Left out: tests, docs, hidden and editor files, a folder outside the members.
        write(root, "tests/it.rs", "#[test] fn t() {}\n");
        write(root, "server/tests/all.rs", "#[test] fn t() {}\n");
        write(root, "docs/a.md", "# doc\n");
        write(root, "src/.lib.rs.swp", "swap");
        write(root, "src/lib.rs~", "backup");
        write(root, "other/src/x.rs", "\n");
    }

    fn hash_of(root: &Path) -> (Vec<String>, String) {
        let files = archive::files(root).unwrap();
        let tar = archive::tar(root, &files).unwrap();
        (files, archive::sha256_hex(&tar))
    }

    #[test]
    fn the_archive_holds_what_cargo_needs_and_nothing_else() {
        let t = tempfile::tempdir().unwrap();
        workspace(t.path());
        let (files, _) = hash_of(t.path());
        assert_eq!(
            files,
            [
                "Cargo.lock",
                "Cargo.toml",
                "benches/b.rs",
                "server/Cargo.toml",
                "server/build.rs",
                "server/src/bin/jail.rs",
                "server/src/main.rs",
                "src/lib.rs",
                "vm-templates/server.toml",
            ]
        );
        // What the build script watches: the same files and folders, where they exist.
        let watched: Vec<String> = archive::watched(t.path())
            .unwrap()
            .iter()
            .map(|p| p.strip_prefix(t.path()).unwrap().display().to_string())
            .collect();
        assert_eq!(
            watched,
            [
                "Cargo.toml",
                "Cargo.lock",
                "vm-templates",
                "Cargo.toml",
                "src",
                "benches",
                "server/Cargo.toml",
                "server/build.rs",
                "server/src",
            ]
        );
    }

    #[test]
    fn the_same_files_give_the_same_hash_and_a_change_another() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        workspace(a.path());
        // Written later, in another order of creation: other mtimes and inode order.
        std::thread::sleep(std::time::Duration::from_millis(20));
        write(b.path(), "server/src/main.rs", "fn main() {}\n");
        workspace(b.path());
        let (_, ha) = hash_of(a.path());
        let (_, hb) = hash_of(b.path());
        assert_eq!(ha, hb, "same files, same hash");
        assert_eq!(ha.len(), 64);
        // The gzip copy is reproducible too.
        let files = archive::files(a.path()).unwrap();
        let tar = archive::tar(a.path(), &files).unwrap();
        assert_eq!(
            archive::gzip(&tar).unwrap(),
            archive::gzip(&archive::tar(b.path(), &files).unwrap()).unwrap()
        );

        // One changed byte in a server file.
        write(b.path(), "server/src/main.rs", "fn main() { }\n");
        let (_, changed) = hash_of(b.path());
        assert_ne!(changed, ha, "a changed file changes the hash");
        // Back as it was, then only the execute bit.
        write(b.path(), "server/src/main.rs", "fn main() {}\n");
        assert_eq!(hash_of(b.path()).1, ha);
        fs_err::set_permissions(
            b.path().join("server/build.rs"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        assert_ne!(hash_of(b.path()).1, ha, "a changed mode changes the hash");
        // A new source file.
        let c = tempfile::tempdir().unwrap();
        workspace(c.path());
        write(c.path(), "server/src/new.rs", "\n");
        assert_ne!(hash_of(c.path()).1, ha, "a new file changes the hash");
        // A file the archive leaves out does not.
        let d = tempfile::tempdir().unwrap();
        workspace(d.path());
        write(d.path(), "server/tests/more.rs", "\n");
        assert_eq!(hash_of(d.path()).1, ha, "tests are not part of the source");
    }

    #[test]
    fn entries_have_fixed_owners_times_and_modes() {
        let t = tempfile::tempdir().unwrap();
        workspace(t.path());
        fs_err::set_permissions(
            t.path().join("server/build.rs"),
            std::fs::Permissions::from_mode(0o700),
        )
        .unwrap();
        let files = archive::files(t.path()).unwrap();
        let data = archive::tar(t.path(), &files).unwrap();
        let mut ar = tar::Archive::new(data.as_slice());
        for e in ar.entries().unwrap() {
            let e = e.unwrap();
            let h = e.header();
            assert_eq!(h.mtime().unwrap(), 0);
            assert_eq!((h.uid().unwrap(), h.gid().unwrap()), (0, 0));
            let path = e.path().unwrap().to_string_lossy().into_owned();
            let want = if path == "server/build.rs" {
                0o755
            } else {
                0o644
            };
            assert_eq!(h.mode().unwrap(), want, "{path}");
        }
    }

    #[test]
    fn a_glob_member_is_refused_by_name() {
        let t = tempfile::tempdir().unwrap();
        write(
            t.path(),
            "Cargo.toml",
            "[workspace]\nmembers = [\"crates/*\"]\n",
        );
        let err = archive::files(t.path()).unwrap_err();
        assert!(err.contains("crates/*") && err.contains("glob"), "{err}");
    }

    /// The archive this band carries: its hash is the tar's, and it holds the workspace's
    /// lock file and band-server's sources.
    #[test]
    fn the_carried_archive_is_this_workspace() {
        assert_eq!(super::SHA256.len(), 64);
        let mut tar = Vec::new();
        flate2::read::GzDecoder::new(super::ARCHIVE)
            .read_to_end(&mut tar)
            .unwrap();
        assert_eq!(archive::sha256_hex(&tar), super::SHA256);
        let mut ar = tar::Archive::new(tar.as_slice());
        let names: Vec<String> = ar
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned())
            .collect();
        for want in [
            "Cargo.lock",
            "Cargo.toml",
            "band-server/Cargo.toml",
            "band-server/src/main.rs",
            "band-source/build.rs",
            "src/lib.rs",
            "vm-templates/debian-12/files/server.toml",
        ] {
            assert!(names.iter().any(|n| n == want), "{want} missing");
        }
        assert!(
            !names
                .iter()
                .any(|n| n.starts_with("tests/") || n.starts_with("docs/"))
        );
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "entries are sorted");
    }
}
