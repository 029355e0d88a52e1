//! Installing band-server on a target, and the version handshake that keeps it current.
//!
//! The target holds `/usr/local/lib/band/{band-server,band-jail,band-shim,installed.json}`.
//! `installed.json` records the version, protocol and SHA-256 of the host binaries it came from;
//! `band setup` and `band vm start` compare it with the local binaries and with what
//! `band-server version` answers, and upload again on any difference (a stale band-server is
//! upgraded, never used). Binaries are stripped of debug info and gzip-compressed for the upload
//! when `strip` and `gzip` exist on the host.
//!
//! The binaries come one of two [`Way`]s: uploaded from beside band, or built in the target from
//! the source band carries ([`super::build`]). Then `installed.json` also names the source's
//! SHA-256, and a target is current when that source is this band's (the built binaries' own
//! hashes are recorded, but nothing on the host could compare them). `band setup` chooses the
//! way ([`choose`]) and records it beside the target's pinned host key, for runs and
//! `band vm start`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::endpoint::{self, Endpoint, SERVER_DIR};
use super::ssh::{self, Session};
use super::{Progress, Result, VmError, io_at};
use super::{build, cmd};
use crate::proto;

/// The programs band-server needs next to it.
pub const BINARIES: [&str; 3] = ["band-server", "band-jail", "band-shim"];
/// The server config written on targets that have none (the QEMU image ships the same file).
pub const SERVER_TOML: &str = include_str!("../../vm-templates/debian-12/files/server.toml");

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub version: String,
    pub protocol: u32,
    pub sha256: BTreeMap<String, String>,
    /// Built in the target from the source with this SHA-256 (see [`super::build`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// What `band-server version` prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerVersion {
    pub version: String,
    pub protocol: u32,
}

/// The folder holding the host's band-server binaries: `$BAND_SERVER`'s folder, else this
/// executable's folder.
pub fn local_dir() -> Result<PathBuf> {
    let dir = match std::env::var_os(proto::env::SERVER) {
        Some(p) => PathBuf::from(p)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default(),
        None => std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .unwrap_or_default(),
    };
    for b in BINARIES {
        if !dir.join(b).is_file() {
            return Err(VmError::Invalid(format!(
                "{} is missing; build it (`cargo build --workspace`) or point $BAND_SERVER at a band-server with band-jail and band-shim beside it",
                dir.join(b).display()
            )));
        }
    }
    Ok(dir)
}

fn sha256_file(path: &Path) -> Result<String> {
    let data = fs_err::read(path).map_err(VmError::Fs)?;
    Ok(hex::encode(Sha256::digest(&data)))
}

/// The manifest of the local binaries.
pub fn local_manifest(dir: &Path) -> Result<Manifest> {
    let mut sha256 = BTreeMap::new();
    for b in BINARIES {
        sha256.insert(b.to_string(), sha256_file(&dir.join(b))?);
    }
    Ok(Manifest {
        version: env!("CARGO_PKG_VERSION").to_string(),
        protocol: proto::PROTOCOL_VERSION,
        sha256,
        source: None,
    })
}

/// What a target built from `source` holds, as far as the host can know it: this band's
/// version and protocol, and the source's SHA-256 (the binaries' hashes are the target's).
pub fn source_manifest(source: &build::Source) -> Manifest {
    Manifest {
        version: env!("CARGO_PKG_VERSION").to_string(),
        protocol: proto::PROTOCOL_VERSION,
        sha256: BTreeMap::new(),
        source: Some(source.sha256.to_string()),
    }
}

/// The SHA-256 of `installed.json` as [`install`] writes it for `m`: what a current target holds.
pub fn manifest_digest(m: &Manifest) -> String {
    hex::encode(Sha256::digest(
        serde_json::to_vec_pretty(m).unwrap_or_default(),
    ))
}

/// [`local_manifest`], remembered in `cache` while the binaries' sizes and mtimes do not change
/// (hashing a debug build reads about 250 MB, too much for every run).
pub fn local_manifest_cached(dir: &Path, cache: &Path) -> Result<Manifest> {
    let stamp = |b: &str| -> Option<(u64, u128)> {
        let m = fs_err::metadata(dir.join(b)).ok()?;
        let t = m
            .modified()
            .ok()?
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?
            .as_nanos();
        Some((m.len(), t))
    };
    let stamps: Option<BTreeMap<String, (u64, u128)>> = BINARIES
        .iter()
        .map(|b| stamp(b).map(|s| (b.to_string(), s)))
        .collect();
    #[derive(Serialize, Deserialize)]
    struct Cached {
        dir: PathBuf,
        stamps: BTreeMap<String, (u64, u128)>,
        manifest: Manifest,
    }
    if let Some(st) = &stamps
        && let Some(c) = fs_err::read_to_string(cache)
            .ok()
            .and_then(|t| serde_json::from_str::<Cached>(&t).ok())
        && c.dir == dir
        && &c.stamps == st
        && c.manifest.version == env!("CARGO_PKG_VERSION")
        && c.manifest.protocol == proto::PROTOCOL_VERSION
    {
        return Ok(c.manifest);
    }
    let manifest = local_manifest(dir)?;
    if let Some(stamps) = stamps {
        let c = Cached {
            dir: dir.to_path_buf(),
            stamps,
            manifest: manifest.clone(),
        };
        let _ = super::paths::write_atomic(
            cache,
            serde_json::to_string(&c).unwrap_or_default().as_bytes(),
            0o600,
        );
    }
    Ok(manifest)
}

/// Ask the target's band-server for its version (`None`: not installed or not runnable).
pub fn remote_version(sess: &Session) -> Result<Option<ServerVersion>> {
    let out = ssh::exec(sess, &format!("{SERVER_DIR}/band-server version"), b"")?;
    Ok(if out.status == 0 {
        serde_json::from_slice(&out.stdout).ok()
    } else {
        None
    })
}

/// The manifest recorded on the target at the last install.
pub fn remote_manifest(sess: &Session) -> Result<Option<Manifest>> {
    let out = ssh::exec(sess, &format!("cat {SERVER_DIR}/installed.json"), b"")?;
    Ok(if out.status == 0 {
        serde_json::from_slice(&out.stdout).ok()
    } else {
        None
    })
}

/// Where the target stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handshake {
    /// Same binaries, and band-server answers with our version and protocol.
    Current(ServerVersion),
    /// Installed, but not ours (another build, version or protocol).
    Stale {
        installed: Option<Manifest>,
        answered: Option<ServerVersion>,
    },
    Missing,
}

/// Compare the target with the local manifest.
pub fn handshake(sess: &Session, local: &Manifest) -> Result<Handshake> {
    let installed = remote_manifest(sess)?;
    let answered = remote_version(sess)?;
    Ok(decide(local, installed, answered))
}

/// Whether `installed` is the build `local` describes: the same binaries, or for a build from
/// source, the same source (and version and protocol).
fn same_build(local: &Manifest, installed: &Manifest) -> bool {
    match &local.source {
        None => installed == local,
        Some(src) => {
            installed.source.as_ref() == Some(src)
                && installed.version == local.version
                && installed.protocol == local.protocol
        }
    }
}

/// The pure part of [`handshake`].
pub fn decide(
    local: &Manifest,
    installed: Option<Manifest>,
    answered: Option<ServerVersion>,
) -> Handshake {
    match (&installed, &answered) {
        (None, None) => Handshake::Missing,
        (Some(m), Some(v))
            if same_build(local, m)
                && v.version == local.version
                && v.protocol == local.protocol =>
        {
            Handshake::Current(v.clone())
        }
        _ => Handshake::Stale {
            installed,
            answered,
        },
    }
}

/// Bytes to upload for one binary and the remote command that unpacks them.
fn payload(path: &Path, tmp: &Path) -> Result<(Vec<u8>, &'static str)> {
    let mut src = path.to_path_buf();
    let stripped = tmp.join(format!(
        "{}.stripped",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    ));
    if cmd::which("strip").is_some()
        && Command::new("strip")
            .arg("--strip-debug")
            .arg("-o")
            .arg(&stripped)
            .arg(path)
            .status()
            .is_ok_and(|s| s.success())
    {
        src = stripped;
    }
    if cmd::which("gzip").is_some()
        && let Ok(out) = Command::new("gzip").arg("-1").arg("-c").arg(&src).output()
        && out.status.success()
    {
        return Ok((out.stdout, "gzip -dc"));
    }
    Ok((fs_err::read(&src).map_err(VmError::Fs)?, "cat"))
}

/// Upload the local binaries and the default server config, then check the handshake.
pub fn install(
    sess: &Session,
    ep: &Endpoint,
    dir: &Path,
    local: &Manifest,
) -> Result<ServerVersion> {
    let tmp = tempfile::tempdir().map_err(io_at(&std::env::temp_dir()))?;
    // A warm band-server of the old build stops taking runs (it exits when its socket is gone).
    ssh::exec_ok(
        sess,
        &ep.as_root(&format!(
            "mkdir -p {SERVER_DIR} /etc/band && chmod 0755 {SERVER_DIR} && rm -f {}/server-*.sock",
            endpoint::WARM_DIR
        )),
        b"",
    )?;
    for b in BINARIES {
        let (data, unpack) = payload(&dir.join(b), tmp.path())?;
        let new = format!("{SERVER_DIR}/.{b}.new");
        let command = format!(
            "{unpack} > {new} && chown root:root {new} && chmod 0755 {new} && mv -f {new} {SERVER_DIR}/{b}"
        );
        ssh::exec_ok(sess, &ep.as_root(&command), &data)?;
    }
    finish(sess, ep, local, local, "uploaded")
}

/// After the binaries are in place: the default server config, the handshake, then
/// `installed.json` (`installed`) and the build marker of `expected` (what runs compare).
fn finish(
    sess: &Session,
    ep: &Endpoint,
    installed: &Manifest,
    expected: &Manifest,
    how: &str,
) -> Result<ServerVersion> {
    ssh::exec_ok(
        sess,
        &ep.as_root("test -e /etc/band/server.toml || cat > /etc/band/server.toml"),
        SERVER_TOML.as_bytes(),
    )?;
    let answered = remote_version(sess)?.ok_or_else(|| {
        VmError::Invalid(format!(
            "the {how} band-server does not run on the target (another architecture or C library?)"
        ))
    })?;
    if answered.version != expected.version || answered.protocol != expected.protocol {
        return Err(VmError::Invalid(format!(
            "the {how} band-server answers version {} protocol {}, expected {} protocol {}",
            answered.version, answered.protocol, expected.version, expected.protocol
        )));
    }
    let manifest = serde_json::to_vec_pretty(installed).unwrap_or_default();
    // The build marker lets a run check the build with a shell test, no program started (see
    // `Endpoint::server_command`); written last, after the binaries and installed.json.
    let marker = endpoint::build_marker(&manifest_digest(expected));
    ssh::exec_ok(
        sess,
        &ep.as_root(&format!(
            "cat > {SERVER_DIR}/installed.json && rm -f {SERVER_DIR}/.build-* && : > {marker}"
        )),
        &manifest,
    )?;
    Ok(answered)
}

/// Build band-server, band-jail and band-shim in the target from `source` and install them
/// (see [`super::build`]), then check the handshake. A failed build installs nothing; the error
/// shows the tail of the build log, which stays on the target.
pub fn build_in_target(
    sess: &Session,
    ep: &Endpoint,
    source: &build::Source,
    progress: &mut dyn Progress,
) -> Result<ServerVersion> {
    let expected = source_manifest(source);
    ssh::exec_ok(
        sess,
        &ep.as_root(&format!(
            "mkdir -p {SERVER_DIR} /etc/band {dir} && chmod 0755 {SERVER_DIR} && rm -f {}/server-*.sock && cat > {dir}/.source.tar.gz.new && mv -f {dir}/.source.tar.gz.new {dir}/source.tar.gz",
            endpoint::WARM_DIR,
            dir = build::BUILD_DIR,
        )),
        source.archive,
    )?;
    progress.note(format!(
        "building band-server in the target from source {} (first time: a few minutes; log: {})",
        &source.sha256[..12],
        build::BUILD_LOG
    ));
    let out = ssh::exec(
        sess,
        &ep.as_root("sh -s"),
        build::script(source.sha256).as_bytes(),
    )?;
    if out.status != 0 {
        let tail = ssh::exec(
            sess,
            &ep.as_root(&format!("tail -n 25 {}", build::BUILD_LOG)),
            b"",
        )
        .map(|o| o.stdout_text())
        .unwrap_or_default();
        let why = match out.status {
            build::SOURCE_MISMATCH => "the uploaded source is not this band's",
            build::MISSING_TOOL => "the target lacks a tool the build needs",
            _ => "the build failed",
        };
        return Err(VmError::user(
            format!(
                "building band-server in the target failed: {why} (exit {}); the end of {}:\n{}",
                out.status,
                build::BUILD_LOG,
                tail.trim_end()
            ),
            format!(
                "read the whole log on the target ({}); a network error fetching Debian or crates.io packages goes away on a retry (`band setup` again); or point $BAND_SERVER at Linux binaries built elsewhere",
                build::BUILD_LOG
            ),
        ));
    }
    let sha256 = build::parse_hashes(&out.stdout_text());
    if BINARIES.iter().any(|b| !sha256.contains_key(*b)) {
        return Err(VmError::Invalid(format!(
            "the build in the target reported no hashes for {}: {}",
            BINARIES.join(", "),
            out.stdout_text().trim()
        )));
    }
    let installed = Manifest {
        sha256,
        ..expected.clone()
    };
    finish(sess, ep, &installed, &expected, "built")
}

/// How a target gets its band-server binaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Way {
    /// Uploaded from beside band (or `$BAND_SERVER`).
    Upload,
    /// Built in the target from the source band carries.
    Build,
}

impl Way {
    /// For people (`band doctor`, setup's progress).
    pub fn describe(self) -> String {
        match self {
            Way::Upload => "uploaded from this machine".into(),
            Way::Build => match build::carried() {
                Some(s) => format!(
                    "built in the target from this band's source {}",
                    &s.sha256[..12]
                ),
                None => "built in the target from source (but this band carries none)".into(),
            },
        }
    }
}

/// The file recording a target's [`Way`]: beside its pinned host key.
pub fn way_file(ep: &Endpoint) -> PathBuf {
    ep.known_host.with_file_name("server-way")
}

/// The recorded way (uploaded when nothing is recorded: targets set up before builds existed).
pub fn read_way(ep: &Endpoint) -> Way {
    match fs_err::read_to_string(way_file(ep))
        .ok()
        .as_deref()
        .map(str::trim)
    {
        Some("build") => Way::Build,
        _ => Way::Upload,
    }
}

pub fn write_way(ep: &Endpoint, way: Way) -> Result<()> {
    let text = match way {
        Way::Upload => "upload\n",
        Way::Build => "build\n",
    };
    super::paths::write_atomic(&way_file(ep), text.as_bytes(), 0o600)
}

/// The local binaries as `choose` sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalBinaries {
    /// One of them is missing.
    Missing,
    /// All present; the ELF machine they share (`None`: not all Linux ELF of one machine).
    Present(Option<u16>),
}

/// Inspect the binaries in `dir` (band's folder or `$BAND_SERVER`'s).
pub fn inspect_local(dir: Option<&Path>) -> LocalBinaries {
    let Some(dir) = dir else {
        return LocalBinaries::Missing;
    };
    let mut machine = None;
    for b in BINARIES {
        let mut head = [0u8; 20];
        let read = fs_err::File::open(dir.join(b)).and_then(|mut f| {
            use std::io::Read;
            f.read_exact(&mut head)
        });
        if read.is_err() {
            return if dir.join(b).is_file() {
                LocalBinaries::Present(None)
            } else {
                LocalBinaries::Missing
            };
        }
        let m = build::elf_machine(&head);
        if m.is_none() || (machine.is_some() && machine != m) {
            return LocalBinaries::Present(None);
        }
        machine = m;
    }
    LocalBinaries::Present(machine)
}

/// The way `band setup` chooses, and why. `forced`: `--build-server-in-guest`. `auto`: the driver
/// builds when uploading cannot work (Lima: a Mac has no Linux binaries). `target_arch`: the
/// target's `uname -m`, when known.
pub fn choose(
    forced: bool,
    auto: bool,
    host_is_linux: bool,
    local: &LocalBinaries,
    target_arch: Option<&str>,
) -> (Way, String) {
    if forced {
        return (Way::Build, "--build-server-in-guest".into());
    }
    if !auto {
        return (Way::Upload, "the binaries beside band".into());
    }
    if !host_is_linux {
        return (
            Way::Build,
            "this machine is not Linux: it has no Linux band-server to upload".into(),
        );
    }
    let want = target_arch.and_then(build::machine_of);
    match local {
        LocalBinaries::Missing => (
            Way::Build,
            "no band-server, band-jail and band-shim beside band".into(),
        ),
        LocalBinaries::Present(m) if m.is_some() && *m == want => {
            (Way::Upload, "the binaries beside band".into())
        }
        LocalBinaries::Present(_) => (
            Way::Build,
            format!(
                "the binaries beside band are not Linux executables for the target ({})",
                target_arch.unwrap_or("unknown architecture")
            ),
        ),
    }
}

/// What this band expects on a target, by the target's way.
pub enum Expected {
    Upload {
        dir: PathBuf,
        manifest: Manifest,
    },
    Build {
        source: build::Source,
        manifest: Manifest,
    },
}

impl Expected {
    /// `way`'s expectation; `cache` remembers the local binaries' hashes (see
    /// [`local_manifest_cached`]).
    pub fn of(way: Way, cache: Option<&Path>) -> Result<Expected> {
        match way {
            Way::Upload => {
                let dir = local_dir()?;
                let manifest = match cache {
                    Some(c) => local_manifest_cached(&dir, c)?,
                    None => local_manifest(&dir)?,
                };
                Ok(Expected::Upload { dir, manifest })
            }
            Way::Build => {
                let source = build::carried().ok_or_else(|| {
                    VmError::user(
                        "this band carries no band-server source to build in the target",
                        "use a band built from its workspace (cargo build), or run `band setup` without --build-server-in-guest with Linux binaries beside band or at $BAND_SERVER",
                    )
                })?;
                let manifest = source_manifest(&source);
                Ok(Expected::Build { source, manifest })
            }
        }
    }

    pub fn manifest(&self) -> &Manifest {
        match self {
            Expected::Upload { manifest, .. } | Expected::Build { manifest, .. } => manifest,
        }
    }

    /// Install this expectation on the target: upload, or build there.
    pub fn install(
        &self,
        sess: &Session,
        ep: &Endpoint,
        progress: &mut dyn Progress,
    ) -> Result<ServerVersion> {
        match self {
            Expected::Upload { dir, manifest } => install(sess, ep, dir, manifest),
            Expected::Build { source, .. } => build_in_target(sess, ep, source, progress),
        }
    }
}

/// What the target lacks for band-server to work (empty when ready).
pub fn missing_prerequisites(sess: &Session, ep: &Endpoint) -> Result<Vec<String>> {
    let out = ssh::exec(sess, &ep.as_root("for p in bwrap iptables ip6tables ip useradd; do command -v $p >/dev/null || echo $p; done"), b"")?;
    let mut missing: Vec<String> = out
        .stdout_text()
        .split_whitespace()
        .map(String::from)
        .collect();
    if out.status != 0 && missing.is_empty() {
        missing.push(format!(
            "root access ({})",
            if out.stderr.is_empty() {
                "sudo -n failed".into()
            } else {
                out.stderr
            }
        ));
    }
    Ok(missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(v: &str, sha: &str) -> Manifest {
        Manifest {
            version: v.into(),
            protocol: 1,
            sha256: [("band-server".to_string(), sha.to_string())].into(),
            source: None,
        }
    }

    #[test]
    fn only_the_same_binaries_answering_the_same_version_are_current() {
        let local = manifest("0.1.0", "aa");
        let v = ServerVersion {
            version: "0.1.0".into(),
            protocol: 1,
        };
        assert_eq!(
            decide(&local, Some(local.clone()), Some(v.clone())),
            Handshake::Current(v.clone())
        );
        assert_eq!(decide(&local, None, None), Handshake::Missing);
        // Another build of the same version is stale (the version string alone is not enough).
        assert!(matches!(
            decide(&local, Some(manifest("0.1.0", "bb")), Some(v.clone())),
            Handshake::Stale { .. }
        ));
        // Right manifest, but the binary answers another protocol: stale.
        let old = ServerVersion {
            version: "0.1.0".into(),
            protocol: 0,
        };
        assert!(matches!(
            decide(&local, Some(local.clone()), Some(old)),
            Handshake::Stale { .. }
        ));
        // A band-server that no longer runs.
        assert!(matches!(
            decide(&local, Some(local.clone()), None),
            Handshake::Stale { .. }
        ));
    }

    fn built(source: &str, sha: &str) -> Manifest {
        Manifest {
            source: Some(source.into()),
            ..manifest("0.1.0", sha)
        }
    }

    #[test]
    fn a_source_built_install_is_current_when_its_source_is_this_bands() {
        let v = ServerVersion {
            version: "0.1.0".into(),
            protocol: 1,
        };
        // What the host expects: this band's source; it cannot know the built binaries' hashes.
        let local = Manifest {
            sha256: BTreeMap::new(),
            ..built("s1", "")
        };
        // Built from the same source: current, whatever the binaries hash to in the target.
        assert_eq!(
            decide(&local, Some(built("s1", "aa")), Some(v.clone())),
            Handshake::Current(v.clone())
        );
        // Another source, an upload (no source), another version: stale.
        assert!(matches!(
            decide(&local, Some(built("s2", "aa")), Some(v.clone())),
            Handshake::Stale { .. }
        ));
        assert!(matches!(
            decide(&local, Some(manifest("0.1.0", "aa")), Some(v.clone())),
            Handshake::Stale { .. }
        ));
        let other = Manifest {
            version: "0.0.9".into(),
            ..built("s1", "aa")
        };
        assert!(matches!(
            decide(&local, Some(other), Some(v.clone())),
            Handshake::Stale { .. }
        ));
        // The right source, but the binary answers another protocol, or nothing.
        let old = ServerVersion {
            version: "0.1.0".into(),
            protocol: 0,
        };
        assert!(matches!(
            decide(&local, Some(built("s1", "aa")), Some(old)),
            Handshake::Stale { .. }
        ));
        assert!(matches!(
            decide(&local, Some(built("s1", "aa")), None),
            Handshake::Stale { .. }
        ));
        // And an upload expectation never takes a source build for current.
        let up = manifest("0.1.0", "aa");
        assert!(matches!(
            decide(&up, Some(built("s1", "aa")), Some(v)),
            Handshake::Stale { .. }
        ));
        // installed.json of a build names its source; an old band's reader ignores the field.
        let text = serde_json::to_string(&built("s1", "aa")).unwrap();
        assert!(text.contains(r#""source":"s1""#), "{text}");
        let old_reader: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(old_reader["sha256"]["band-server"], "aa");
        let upload_text = serde_json::to_string(&manifest("0.1.0", "aa")).unwrap();
        assert!(!upload_text.contains("source"), "{upload_text}");
    }

    #[test]
    fn the_way_is_build_when_forced_or_when_uploading_cannot_work() {
        let x86 = LocalBinaries::Present(Some(62));
        let way = |forced, auto, linux, local: &LocalBinaries, arch| {
            choose(forced, auto, linux, local, arch).0
        };
        // Forced, for every driver and whatever is beside band.
        assert_eq!(way(true, false, true, &x86, None), Way::Build);
        assert_eq!(way(true, true, true, &x86, Some("x86_64")), Way::Build);
        // qemu and ssh upload unless forced (a host band does not own gets no toolchain).
        assert_eq!(
            way(false, false, false, &LocalBinaries::Missing, None),
            Way::Upload
        );
        // Lima: builds on a Mac, when the binaries are missing, not ELF, or another machine.
        assert_eq!(way(false, true, false, &x86, Some("x86_64")), Way::Build);
        assert_eq!(
            way(false, true, true, &LocalBinaries::Missing, Some("x86_64")),
            Way::Build
        );
        assert_eq!(
            way(
                false,
                true,
                true,
                &LocalBinaries::Present(None),
                Some("x86_64")
            ),
            Way::Build
        );
        assert_eq!(way(false, true, true, &x86, Some("aarch64")), Way::Build);
        assert_eq!(way(false, true, true, &x86, None), Way::Build);
        // ... and uploads Linux binaries of the guest's machine.
        assert_eq!(way(false, true, true, &x86, Some("x86_64")), Way::Upload);
        let (_, why) = choose(false, true, true, &x86, Some("aarch64"));
        assert!(why.contains("aarch64"), "{why}");
    }

    #[test]
    fn local_binaries_are_inspected_by_their_elf_headers() {
        let t = tempfile::tempdir().unwrap();
        assert_eq!(inspect_local(None), LocalBinaries::Missing);
        assert_eq!(inspect_local(Some(t.path())), LocalBinaries::Missing);
        let me = fs_err::read(std::env::current_exe().unwrap()).unwrap();
        for b in BINARIES {
            fs_err::write(t.path().join(b), &me).unwrap();
        }
        let here = build::machine_of(std::env::consts::ARCH);
        assert!(here.is_some());
        assert_eq!(inspect_local(Some(t.path())), LocalBinaries::Present(here));
        // A Mach-O band-shim (or any non-ELF file) makes the set unusable for upload.
        fs_err::write(
            t.path().join("band-shim"),
            [
                0xcf, 0xfa, 0xed, 0xfe, 7, 0, 0, 1, 3, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0,
            ],
        )
        .unwrap();
        assert_eq!(inspect_local(Some(t.path())), LocalBinaries::Present(None));
    }

    #[test]
    fn the_way_is_recorded_beside_the_pinned_key() {
        let t = tempfile::tempdir().unwrap();
        let ep = Endpoint {
            host: "127.0.0.1".into(),
            port: 22,
            user: "root".into(),
            auth: endpoint::Auth::KeyFile(t.path().join("id")),
            known_host: t.path().join("known_host"),
            sudo: false,
            ssh_config: None,
        };
        assert_eq!(read_way(&ep), Way::Upload, "nothing recorded: uploaded");
        write_way(&ep, Way::Build).unwrap();
        assert_eq!(read_way(&ep), Way::Build);
        assert_eq!(way_file(&ep), t.path().join("server-way"));
        write_way(&ep, Way::Upload).unwrap();
        assert_eq!(read_way(&ep), Way::Upload);
    }

    #[test]
    fn the_local_manifest_hashes_every_binary() {
        let t = tempfile::tempdir().unwrap();
        for b in BINARIES {
            fs_err::write(t.path().join(b), b.as_bytes()).unwrap();
        }
        let m = local_manifest(t.path()).unwrap();
        assert_eq!(m.sha256.len(), 3);
        let want: String = Sha256::digest(b"band-jail")
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(m.sha256["band-jail"], want);
        assert_ne!(m.sha256["band-jail"], m.sha256["band-shim"]);
        assert_eq!(m.protocol, proto::PROTOCOL_VERSION);
    }

    #[test]
    fn the_cached_manifest_follows_the_binaries() {
        let t = tempfile::tempdir().unwrap();
        for b in BINARIES {
            fs_err::write(t.path().join(b), b.as_bytes()).unwrap();
        }
        let cache = t.path().join("cache.json");
        let first = local_manifest_cached(t.path(), &cache).unwrap();
        assert!(cache.is_file());
        assert_eq!(local_manifest_cached(t.path(), &cache).unwrap(), first);
        fs_err::write(t.path().join("band-shim"), b"another build").unwrap();
        let second = local_manifest_cached(t.path(), &cache).unwrap();
        assert_ne!(
            second.sha256["band-shim"], first.sha256["band-shim"],
            "a rebuilt binary is rehashed"
        );
        assert_eq!(manifest_digest(&second).len(), 64);
        assert_ne!(manifest_digest(&second), manifest_digest(&first));
    }

    #[test]
    fn payloads_unpack_to_the_original() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("band-shim");
        fs_err::write(&f, b"#!/bin/sh\necho hi\n").unwrap();
        let (data, unpack) = payload(&f, t.path()).unwrap();
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(unpack)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(&data).unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.stdout, b"#!/bin/sh\necho hi\n");
    }
}
