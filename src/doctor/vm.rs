//! The VM's checks: the client's SSH key, the qemu image, and the qemu VM itself (running, its
//! SSH, its band-server, its sandbox tools).

use std::time::Duration;

use super::{Check, Host, Level};
use crate::vm::install::{self, Handshake};
use crate::vm::qemu::InstanceDir;
use crate::vm::{image, keys, ssh};

/// The client's SSH key exists and is private.
pub(super) fn client_key(host: &Host) -> Vec<Check> {
    let key = host.vm.client_key();
    if !key.exists() {
        return vec![Check::new(
            "ssh key",
            Level::Skip,
            format!("{} will be made by `band setup`", key.display()),
        )];
    }
    vec![match keys::check_private(&key) {
        Ok(()) => Check::new("ssh key", Level::Ok, format!("{} (0600)", key.display())),
        Err(e) => Check::new("ssh key", Level::Fail, e.to_string()).fix("chmod 600 the key"),
    }]
}

/// Where a VM's or ssh host's band-server binaries come from: uploaded from beside band when
/// they are Linux executables, else built in the target from the source this band carries
/// (`band setup --build-server-in-guest` forces the build).
pub(super) fn server_binaries(host: &Host) -> Vec<Check> {
    let dir = host.band_server.parent();
    let local = install::inspect_local(dir);
    let source = crate::vm::build::carried().map(|s| s.sha256[..12].to_string());
    let arch = |m: u16| match m {
        62 => "x86_64",
        183 => "aarch64",
        _ => "another architecture",
    };
    let check = match (&local, &source) {
        (install::LocalBinaries::Present(Some(m)), src) if host.linux => Check::new(
            "server binaries",
            Level::Ok,
            format!(
                "uploaded to VM targets from {} (Linux {}){}",
                dir.map(|d| d.display().to_string()).unwrap_or_default(),
                arch(*m),
                src.as_ref()
                    .map(|s| format!(
                        "; --build-server-in-guest builds them there from this band's source {s}"
                    ))
                    .unwrap_or_default()
            ),
        ),
        (_, Some(s)) => Check::new(
            "server binaries",
            Level::Ok,
            format!(
                "built in the target from this band's source {s} (no Linux band-server for upload beside band; the first build takes minutes)"
            ),
        ),
        (_, None) => Check::new(
            "server binaries",
            Level::Warn,
            "no Linux band-server beside band, and this band carries no source to build one",
        )
        .fix("point $BAND_SERVER at Linux band-server, band-jail and band-shim"),
    };
    vec![check]
}

/// The qemu driver's image, if built.
pub(super) fn image(host: &Host) -> Vec<Check> {
    vec![match image::cached(&host.vm) {
        Some(img) => Check::new(
            "qemu image",
            Level::Ok,
            format!("{} ({})", img.hash(), img.dir.display()),
        ),
        None => Check::new(
            "qemu image",
            Level::Skip,
            "not built (band setup --driver qemu)",
        ),
    }]
}

/// The qemu VM: set up, running, reachable over SSH, with a current band-server and the sandbox
/// tools. Each step is checked only if the one before it passed.
pub(super) fn qemu_vm(host: &Host) -> Vec<Check> {
    let paths = &host.vm;
    let inst = InstanceDir::new(paths);
    let mut out = Vec::new();
    if inst.load_state().is_none() {
        out.push(Check::new("qemu VM", Level::Skip, "not set up"));
        return out;
    }
    let Some(state) = inst.running() else {
        out.push(Check::new("qemu VM", Level::Warn, "set up, not running").fix("band vm start"));
        return out;
    };
    out.push(Check::new(
        "qemu VM",
        Level::Ok,
        format!(
            "running ({}, ssh 127.0.0.1:{})",
            state.accel.as_str(),
            state.ssh_port
        ),
    ));
    let ep = crate::vm::driver::qemu::endpoint(paths, state.ssh_port);
    let sess = match ssh::connect(&ep, Duration::from_secs(15)) {
        Ok(s) => s,
        Err(e) => {
            out.push(
                Check::new("VM ssh", Level::Fail, e.to_string())
                    .fix("band vm stop && band vm start"),
            );
            return out;
        }
    };
    out.push(Check::new(
        "VM ssh",
        Level::Ok,
        format!("host key pinned in {}", ep.known_host.display()),
    ));
    out.push(
        match install::Expected::of(install::read_way(&ep), None)
            .and_then(|m| install::handshake(&sess, m.manifest()))
        {
            Ok(Handshake::Current(v)) => Check::new(
                "VM band-server",
                Level::Ok,
                format!(
                    "{} (protocol {}), same build as this band, {}",
                    v.version,
                    v.protocol,
                    install::read_way(&ep).describe()
                ),
            ),
            Ok(Handshake::Missing) => Check::new("VM band-server", Level::Fail, "not installed")
                .fix("band setup (or band vm start)"),
            Ok(Handshake::Stale { answered, .. }) => Check::new(
                "VM band-server",
                Level::Fail,
                format!(
                    "stale: answers {}",
                    answered
                        .map(|v| format!("{} protocol {}", v.version, v.protocol))
                        .unwrap_or_else(|| "nothing".into())
                ),
            )
            .fix("band vm start (upgrades it)"),
            Err(e) => Check::new("VM band-server", Level::Fail, e.to_string()),
        },
    );
    out.push(match install::missing_prerequisites(&sess, &ep) {
        Ok(m) if m.is_empty() => Check::new(
            "VM sandbox tools",
            Level::Ok,
            "bwrap, iptables, ip6tables, ip, useradd",
        ),
        Ok(m) => Check::new(
            "VM sandbox tools",
            Level::Fail,
            format!("missing: {}", m.join(", ")),
        )
        .fix("band setup --force"),
        Err(e) => Check::new("VM sandbox tools", Level::Fail, e.to_string()),
    });
    out
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::super::tests::bare;
    use super::*;

    #[test]
    fn the_client_key_must_be_private() {
        let dir = tempfile::tempdir().expect("tmp");
        let host = bare(dir.path());
        assert_eq!(client_key(&host)[0].level, Level::Skip);
        let key = host.vm.client_key();
        fs_err::create_dir_all(key.parent().expect("parent")).expect("mkdir");
        fs_err::write(&key, "key").expect("write");
        fs_err::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let open = client_key(&host).remove(0);
        assert_eq!(open.level, Level::Fail);
        assert_eq!(open.fix.as_deref(), Some("chmod 600 the key"));
        fs_err::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert_eq!(client_key(&host)[0].level, Level::Ok);
    }

    #[test]
    fn nothing_set_up_is_skipped() {
        let dir = tempfile::tempdir().expect("tmp");
        let host = bare(dir.path());
        assert_eq!(image(&host)[0].level, Level::Skip);
        let vm = qemu_vm(&host);
        assert_eq!(vm.len(), 1);
        assert_eq!(
            (vm[0].level, vm[0].detail.as_str()),
            (Level::Skip, "not set up")
        );
    }
}
