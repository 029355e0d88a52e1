//! Building band-server in the target from the exact source of the running band.
//!
//! A Mac has no Linux band-server beside band, and needs no cross toolchain: band carries its
//! own source ([`band_source`]: a reproducible tar of the workspace, gzipped, and the SHA-256 of
//! the tar) and the target builds it with Debian's Rust toolchain, in a Debian 12 root (the
//! guest's own release, so the binaries link against the glibc they run with).
//!
//! ```text
//! host                                   target (as root)
//! upload source.tar.gz ─────────────────▶ /var/cache/band/build/source.tar.gz
//! the build script (stdin of `sh -s`) ──▶ 1. gzip -dc | sha256sum == the carried SHA-256, else stop
//!                                         2. build root: mmdebstrap --variant=apt bookworm with
//!                                            rustc-web, cargo-web 1.96 (bookworm-security), gcc,
//!                                            libc6-dev (made once, kept)
//!                                         3. unpack into src/ (mtimes now: cargo sees the change)
//!                                         4. bwrap into the root: cargo build --release --locked
//!                                            -p band-server (crates.io, Cargo.lock's checksums)
//!                                         5. install to /usr/local/lib/band/, print the hashes
//! ```
//!
//! The target's own system keeps its packages: the toolchain lives in the build root only. The
//! root, cargo's registry cache and the target dir stay in `/var/cache/band/build` for the next
//! upgrade; the log of the last build is `build.log` there. [`script`] is pure: the snapshot
//! test shows it whole.

use super::endpoint::SERVER_DIR;
use super::image::sh_quote;

/// Where the build happens on the target.
pub const BUILD_DIR: &str = "/var/cache/band/build";
/// The log of the last build on the target.
pub const BUILD_LOG: &str = "/var/cache/band/build/build.log";
/// Debian's suite for the build root: Debian 12, as the guest. The binaries link against the
/// build root's glibc, so they run on a system with that glibc or a newer one: a build in Debian
/// testing (glibc 2.42) does not run on the Debian 12 guest (2.36).
pub const SUITE: &str = "bookworm";
/// The build root's apt sources: Debian 12 and its security updates, which carry `rustc-web`
/// and `cargo-web` 1.96 (for Firefox ESR; the workspace needs Rust 1.89, and Debian 12's own
/// `rustc` is 1.63).
pub const SOURCES: [&str; 2] = [
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
];
/// The build root's packages (on top of `--variant=apt`). `rustc-web` and `cargo-web` install
/// `/usr/bin/rustc` and `/usr/bin/cargo`; libc6-dev holds the static archives band-server's
/// build.rs links band-shim with (static-pie).
pub const PACKAGES: [&str; 5] = [
    "rustc-web",
    "cargo-web",
    "gcc",
    "libc6-dev",
    "ca-certificates",
];
/// The exit status of the build script when the uploaded source is not the carried one.
pub const SOURCE_MISMATCH: i32 = 65;
/// The exit status when the target lacks a tool the build needs.
pub const MISSING_TOOL: i32 = 69;

/// The source band carries, when it carries one (a band built outside its workspace does not).
#[derive(Debug, Clone, Copy)]
pub struct Source {
    /// The gzipped tar.
    pub archive: &'static [u8],
    /// The SHA-256 of the uncompressed tar: the source's identity.
    pub sha256: &'static str,
}

/// The source of this band.
pub fn carried() -> Option<Source> {
    let sha256 = band_source::SHA256.trim();
    (sha256.len() == 64 && !band_source::ARCHIVE.is_empty()).then_some(Source {
        archive: band_source::ARCHIVE,
        sha256,
    })
}

/// A name for the build root's recipe (suite, packages, sources): a changed recipe makes a new
/// root.
pub fn root_recipe_id() -> String {
    use sha2::{Digest, Sha256};
    let text = format!("{SUITE}\n{}\n{}\n", PACKAGES.join(","), SOURCES.join("\n"));
    hex::encode(&Sha256::digest(text.as_bytes())[..8])
}

/// The bwrap argv that runs cargo in the build root: the root as `/`, the source, cargo's home
/// and the target dir bound in, the target's DNS config and CA certificates read-only (a TLS
/// proxy its administrator set up applies to crates.io too), no capabilities, a PID namespace,
/// and the network of the target (cargo fetches from crates.io).
pub fn cargo_argv() -> Vec<String> {
    let b = BUILD_DIR;
    let mut a: Vec<String> = [
        "bwrap",
        "--bind",
        &format!("{b}/root"),
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        "--bind",
        &format!("{b}/src"),
        "/src",
        "--bind",
        &format!("{b}/cargo"),
        "/cargo",
        "--bind",
        &format!("{b}/target"),
        "/target",
        "--ro-bind-try",
        "/etc/resolv.conf",
        "/etc/resolv.conf",
        "--ro-bind-try",
        "/etc/ssl/certs",
        "/etc/ssl/certs",
        "--chdir",
        "/src",
        "--unshare-pid",
        "--die-with-parent",
        "--cap-drop",
        "ALL",
        "--clearenv",
        "--setenv",
        "PATH",
        "/usr/bin:/bin",
        "--setenv",
        "HOME",
        "/tmp",
        "--setenv",
        "CARGO_HOME",
        "/cargo",
        "--setenv",
        "CARGO_TARGET_DIR",
        "/target",
        "--setenv",
        "CARGO_TERM_COLOR",
        "never",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend(
        [
            "cargo",
            "build",
            "--release",
            "--locked",
            "-p",
            "band-server",
            // band-server alone: not band-sandboxd (feature `sandboxd`), which a VM does not run.
            "--no-default-features",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    a
}

/// The mmdebstrap argv that makes the build root in `<BUILD_DIR>/root.new`.
pub fn mmdebstrap_argv() -> Vec<String> {
    let mut a = vec!["mmdebstrap".to_string(), "--variant=apt".to_string()];
    a.push(format!("--include={}", PACKAGES.join(",")));
    a.push(SUITE.to_string());
    a.push(format!("{BUILD_DIR}/root.new"));
    a.extend(SOURCES.iter().map(|s| s.to_string()));
    a
}

fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|w| {
            if w.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./=,:".contains(c))
            {
                w.clone()
            } else {
                sh_quote(w)
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The script the target runs as root (`sh -s`, the script on stdin) after the upload of the
/// archive to `<BUILD_DIR>/source.tar.gz`. Everything goes to [`BUILD_LOG`]; on success the
/// script's stdout is one `sha256sum` line per installed binary. It checks the upload before
/// anything else, and installs nothing unless the whole build succeeded.
pub fn script(sha256: &str) -> String {
    let b = BUILD_DIR;
    let recipe = root_recipe_id();
    let bins = super::install::BINARIES.join(" ");
    let mmdebstrap = shell_words(&mmdebstrap_argv());
    let cargo = shell_words(&cargo_argv());
    format!(
        r#"set -eu
B={b}
mkdir -p "$B"
exec 3>&1 >{BUILD_LOG} 2>&1
echo "band: building band-server from source {sha256}"
# 1. The upload must be the source the running band carries.
got=$(gzip -dc "$B/source.tar.gz" | sha256sum | cut -d' ' -f1)
if [ "$got" != {sha256} ]; then
  echo "band: the uploaded source hashes to $got, not {sha256}; nothing was built"
  exit {SOURCE_MISMATCH}
fi
for t in bwrap gzip tar sha256sum; do
  command -v $t >/dev/null || {{ echo "band: $t is missing on the target"; exit {MISSING_TOOL}; }}
done
# 2. The build root (Debian {SUITE} with its Rust toolchain), made once for this recipe.
if [ ! -e "$B/root/.band-root-{recipe}" ]; then
  if ! command -v mmdebstrap >/dev/null; then
    echo "band: installing mmdebstrap"
    DEBIAN_FRONTEND=noninteractive apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends mmdebstrap
  fi
  rm -rf "$B/root.new"
  {mmdebstrap}
  : > "$B/root.new/.band-root-{recipe}"
  rm -rf "$B/root"
  mv "$B/root.new" "$B/root"
fi
# 3. The source, with mtimes of now so cargo rebuilds what changed in the kept target dir.
rm -rf "$B/src"
mkdir -p "$B/src" "$B/cargo" "$B/target"
gzip -dc "$B/source.tar.gz" | tar -xmf - -C "$B/src" --no-same-owner
# 4. The build, inside the root.
{cargo}
# 5. Install beside each other, each by rename.
mkdir -p {SERVER_DIR}
chmod 0755 {SERVER_DIR}
for f in {bins}; do
  cp "$B/target/release/$f" "{SERVER_DIR}/.$f.new"
  chown root:root "{SERVER_DIR}/.$f.new"
  chmod 0755 "{SERVER_DIR}/.$f.new"
  mv -f "{SERVER_DIR}/.$f.new" "{SERVER_DIR}/$f"
done
echo "band: installed {bins} from source {sha256}"
cd {SERVER_DIR} && sha256sum {bins} >&3
"#
    )
}

/// The SHA-256 of each installed binary, from the script's stdout (`sha256sum` lines).
pub fn parse_hashes(stdout: &str) -> std::collections::BTreeMap<String, String> {
    stdout
        .lines()
        .filter_map(|l| {
            let (hash, name) = l.split_once("  ")?;
            (hash.len() == 64 && hash.chars().all(|c| c.is_ascii_hexdigit()))
                .then(|| (name.trim().to_string(), hash.to_string()))
        })
        .collect()
}

/// The ELF machine number (`e_machine`) of a 64-bit little-endian Linux executable's header,
/// `None` for anything else (Mach-O, a script, a truncated file).
pub fn elf_machine(header: &[u8]) -> Option<u16> {
    let h = header.get(..20)?;
    // \x7fELF, ELFCLASS64, ELFDATA2LSB.
    (h[..4] == *b"\x7fELF" && h[4] == 2 && h[5] == 1).then(|| u16::from_le_bytes([h[18], h[19]]))
}

/// The ELF machine number for a Linux `uname -m`.
pub fn machine_of(uname_m: &str) -> Option<u16> {
    match uname_m.trim() {
        "x86_64" | "amd64" => Some(62),
        "aarch64" | "arm64" => Some(183),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_script_checks_the_source_first_and_installs_last() {
        let sha = "ab".repeat(32);
        let s = script(&sha);
        insta::assert_snapshot!(s.replace(&root_recipe_id(), "<recipe>"));
        let check = s.find("sha256sum | cut").unwrap();
        let root = s.find("mmdebstrap --variant").unwrap();
        let build = s.find("cargo build").unwrap();
        let install = s.find("mv -f").unwrap();
        assert!(check < root && root < build && build < install);
        // The script as sh parses it.
        let st = std::process::Command::new("sh")
            .args(["-n", "-c", &s])
            .status()
            .unwrap();
        assert!(st.success());
    }

    #[test]
    fn a_wrong_upload_stops_before_anything_is_built() {
        // The script's first step against an upload that is not the carried source: it exits
        // SOURCE_MISMATCH and never reaches the root or the build (run with B in a temp dir and
        // the log path rewritten there).
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().display().to_string();
        let want = "cd".repeat(32);
        let s = script(&want)
            .replace(BUILD_LOG, &format!("{dir}/build.log"))
            .replacen(&format!("B={BUILD_DIR}"), &format!("B={dir}"), 1)
            .replace("mmdebstrap", "echo REACHED mmdebstrap")
            .replace("bwrap", "echo REACHED bwrap");
        let gz = std::process::Command::new("sh")
            .args(["-c", "printf 'not the source' | gzip -c"])
            .output()
            .unwrap()
            .stdout;
        fs_err::write(t.path().join("source.tar.gz"), gz).unwrap();
        let out = std::process::Command::new("sh")
            .args(["-c", &s])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(SOURCE_MISMATCH));
        let log = fs_err::read_to_string(t.path().join("build.log")).unwrap();
        assert!(log.contains("nothing was built"), "{log}");
        assert!(!log.contains("REACHED"), "{log}");
        assert!(out.stdout.is_empty());
    }

    #[test]
    fn the_argvs() {
        insta::assert_snapshot!(format!(
            "{}\n{}",
            shell_words(&mmdebstrap_argv()),
            shell_words(&cargo_argv())
        ));
    }

    #[test]
    fn hashes_come_from_sha256sum_lines() {
        let a = "a".repeat(64);
        let b = "b".repeat(64);
        let out = format!("{a}  band-server\n{b}  band-jail\nnoise\n");
        let h = parse_hashes(&out);
        assert_eq!(h.len(), 2);
        assert_eq!(h["band-server"], a);
        assert_eq!(h["band-jail"], b);
    }

    #[test]
    fn elf_headers_name_their_machine() {
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        h[18] = 62;
        assert_eq!(elf_machine(&h), Some(62));
        assert_eq!(machine_of("x86_64"), Some(62));
        h[18] = 183;
        assert_eq!(elf_machine(&h), machine_of("aarch64\n"));
        // Mach-O (64-bit, little-endian magic), a script, a short file.
        assert_eq!(
            elf_machine(&[
                0xcf, 0xfa, 0xed, 0xfe, 7, 0, 0, 1, 3, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0
            ]),
            None
        );
        assert_eq!(elf_machine(b"#!/bin/sh\necho not a binary\n"), None);
        assert_eq!(elf_machine(b"\x7fELF"), None);
        assert_eq!(machine_of("riscv64"), None);
        // This test binary itself, on Linux.
        let me = fs_err::read(std::env::current_exe().unwrap()).unwrap();
        let arch = std::env::consts::ARCH;
        assert_eq!(elf_machine(&me), machine_of(arch), "{arch}");
    }

    #[test]
    fn this_band_carries_its_source() {
        let s = carried().expect("built in the workspace");
        assert_eq!(s.sha256.len(), 64);
        assert!(s.archive.starts_with(&[0x1f, 0x8b]), "gzip");
    }
}
