//! The TCP sockets a run was listening on when its wall clock ran out, read before it is killed.
//!
//! A skill that serves on a port (a gallery on `127.0.0.1:8765`, waiting for a browser) waits for
//! connections that never come: nothing outside a run can connect to it (its network namespace is
//! its own, and the relay forwards no port; docs/network.md, "A server inside a run"). It ends at
//! `maxRuntimeMs`, and the result says what it was still serving (`RunResult::listening`), as
//! does the limit event.
//!
//! Where: the network namespace of the run's processes. A process of the run's cgroup whose
//! `/proc/<pid>/ns/net` is not band-server's own is inside it (bubblewrap itself is not, in a run
//! without `allow.net`: it unshares the network for its child only). Its `/proc/<pid>/net/tcp`
//! and `tcp6` list every TCP socket of that namespace; state `0A` is LISTEN. band's own listeners
//! there (the DNS stub, the relay of the loopback ports a band names, the egress proxy) are left
//! out, as the run's plan names them ([`bands_own`]). Each `/proc/<pid>` is opened once and read
//! through that descriptor, so a pid reused meanwhile is never read as the run's.
//!
//! TCP only: a UDP socket has no listening state (a bound server and a resolver's socket look
//! alike in `/proc/net/udp`).
//!
//! Best effort: what cannot be read is not said, and reading never fails the run. Pure parts:
//! [`parse_tcp_listeners`], [`bands_own`]; [`of_run`] takes the `/proc` to read as a parameter.

use std::collections::BTreeSet;
use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{Mode, OFlags};

use super::NetRunPlan;

/// The most listeners a result names (the rest are not said).
pub(crate) const MAX_LISTED: usize = 16;
/// The most of each `net/tcp*` file read: a run with very many sockets is read in part.
const MAX_READ: u64 = 4 << 20;
/// The kernel's TCP state LISTEN, as `/proc/net/tcp` prints it.
const TCP_LISTEN: &str = "0A";

/// The sockets in state LISTEN of a `/proc/<pid>/net/tcp` or `tcp6` text: each line's
/// `local_address` (`0100007F:223D`, `00000000000000000000000001000000:0BB8`), in order, once
/// each. Lines that do not parse (the header) are passed over.
pub(crate) fn parse_tcp_listeners(text: &str) -> Vec<SocketAddr> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let (Some(_sl), Some(local), Some(_remote), Some(state)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if state != TCP_LISTEN {
            continue;
        }
        if let Some(addr) = parse_endpoint(local)
            && !out.contains(&addr)
        {
            out.push(addr);
        }
    }
    out
}

/// `ADDR:PORT` in the kernel's hex: the address as 32-bit words (one for IPv4, four for IPv6),
/// each printed as a number in the host's byte order (so `127.0.0.1` is `0100007F` on a
/// little-endian host); the port as a number.
fn parse_endpoint(text: &str) -> Option<SocketAddr> {
    let (addr, port) = text.split_once(':')?;
    if !addr
        .bytes()
        .chain(port.bytes())
        .all(|b| b.is_ascii_hexdigit())
        || port.len() != 4
    {
        return None;
    }
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |hex: &str| u32::from_str_radix(hex, 16).ok().map(u32::to_ne_bytes);
    let ip = match addr.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(addr)?)),
        32 => {
            let mut bytes = [0u8; 16];
            for (i, chunk) in bytes.chunks_exact_mut(4).enumerate() {
                chunk.copy_from_slice(&word(&addr[i * 8..i * 8 + 8])?);
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// What band-server itself listens on inside the run's namespace, from the run's plan: the DNS
/// stub (`<stub>:53`), the relay of each loopback port the band names (`127.0.0.1:P`,
/// `[::1]:P`: `forward::inside_addrs`) and the egress proxy (`<stub>:<port>` for each of
/// `proxy_ports`, when the run has the proxy). Nothing without `allow.net`: such a run's
/// namespace is bubblewrap's, with no listener of band's.
pub(crate) fn bands_own(
    net: Option<&NetRunPlan>,
    proxy_ports: Option<[u16; 2]>,
) -> Vec<SocketAddr> {
    let Some(net) = net else {
        return Vec::new();
    };
    let stub = IpAddr::V4(net.stub_addr);
    let mut own = vec![SocketAddr::new(stub, super::dns::STUB_PORT)];
    own.extend(
        net.loopback_ports
            .iter()
            .flat_map(|p| super::forward::inside_addrs(*p)),
    );
    own.extend(
        proxy_ports
            .into_iter()
            .flatten()
            .map(|p| SocketAddr::new(stub, p)),
    );
    own
}

/// The TCP listeners of the run whose processes are `pids` (pids as `proc` names them), but
/// `own` ([`bands_own`]): read in each network namespace they are in that is not the one of
/// `proc/self` (band-server's), sorted, at most [`MAX_LISTED`]. Empty when nothing can be read
/// (band-server's own namespace unknown: nothing is read at all).
pub(crate) fn of_run(proc: &Path, pids: &[i32], own: &[SocketAddr]) -> Vec<SocketAddr> {
    let Some(server) = open_dir(&proc.join("self")).and_then(|d| netns_of(&d)) else {
        return Vec::new();
    };
    let mut namespaces = BTreeSet::from([server]);
    let mut found = BTreeSet::new();
    for pid in pids {
        // The process's folder, held: what is read through it is that process's, or nothing.
        let Some(dir) = open_dir(&proc.join(pid.to_string())) else {
            continue;
        };
        let Some(ns) = netns_of(&dir) else {
            continue;
        };
        if !namespaces.insert(ns) {
            continue;
        }
        for file in ["net/tcp", "net/tcp6"] {
            if let Some(text) = read_at(&dir, file) {
                found.extend(
                    parse_tcp_listeners(&text)
                        .into_iter()
                        .filter(|a| !own.contains(a)),
                );
            }
        }
    }
    found.into_iter().take(MAX_LISTED).collect()
}

fn open_dir(path: &Path) -> Option<OwnedFd> {
    rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()
}

/// The network namespace of the process whose `/proc` folder is `dir` (`net:[4026531840]`).
fn netns_of(dir: &OwnedFd) -> Option<Vec<u8>> {
    rustix::fs::readlinkat(dir, "ns/net", Vec::new())
        .ok()
        .map(|link| link.into_bytes())
}

/// `rel` under `dir`, at most [`MAX_READ`] bytes of it.
fn read_at(dir: &OwnedFd, rel: &str) -> Option<String> {
    let fd = rustix::fs::openat(dir, rel, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).ok()?;
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(MAX_READ)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    /// `/proc/net/tcp` as a little-endian host prints it: a server on 127.0.0.1:8765, one on
    /// 0.0.0.0:22, a connection (not a listener) and a truncated line.
    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:223D 00000000:0000 0A 00000000:00000000 00:00000000 00000000 61000        0 41512 1 0000000000000000 100 0 0 10 0\n\
   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1234 1 0000000000000000 100 0 0 10 0\n\
   2: 0100007F:A1B2 0100007F:223D 01 00000000:00000000 00:00000000 00000000 61000        0 41513 1 0000000000000000 20 4 30 10 -1\n\
   3: 0100007F:2\n";

    /// `/proc/net/tcp6`: `[::]:3000`, `[::1]:18000`, `[::ffff:127.0.0.1]:8080`,
    /// `[2001:db8::5]:443`, and a connection.
    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 00000000000000000000000000000000:0BB8 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000 61000        0 1 1 0000000000000000 100 0 0 10 0\n\
   1: 00000000000000000000000001000000:4650 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 100 0 0 10 0\n\
   2: 0000000000000000FFFF00000100007F:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000 61000        0 3 1 0000000000000000 100 0 0 10 0\n\
   3: B80D0120000000000000000005000000:01BB 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000 61000        0 4 1 0000000000000000 100 0 0 10 0\n\
   4: 00000000000000000000000001000000:C350 00000000000000000000000001000000:0BB8 01 00000000:00000000 00:00000000 00000000 61000        0 5 1 0000000000000000 20 4 30 10 -1\n";

    fn addrs(v: &[SocketAddr]) -> Vec<String> {
        v.iter().map(SocketAddr::to_string).collect()
    }

    #[cfg(target_endian = "little")]
    #[test]
    fn listeners_are_read_from_the_kernels_tcp_and_tcp6_text() {
        assert_eq!(
            addrs(&parse_tcp_listeners(TCP)),
            ["127.0.0.1:8765", "0.0.0.0:22"]
        );
        assert_eq!(
            addrs(&parse_tcp_listeners(TCP6)),
            [
                "[::]:3000",
                "[::1]:18000",
                "[::ffff:127.0.0.1]:8080",
                "[2001:db8::5]:443"
            ]
        );
        for bad in [
            "",
            "0100007F",
            "0100007F:22",
            "0100007G:0016",
            "01007F:0016",
            "+100007F:0016",
        ] {
            assert_eq!(parse_endpoint(bad), None, "{bad:?}");
        }
    }

    fn plan(allow: &[&str]) -> NetRunPlan {
        let allow: Vec<String> = allow.iter().map(|s| s.to_string()).collect();
        let m = band::policy::net::NetMatcher::new(&allow, &[]).unwrap();
        super::super::plan_run(
            "ab12",
            61000,
            61000,
            4,
            &m,
            &[],
            &["127.0.0.1:9".parse().unwrap()],
        )
        .unwrap()
    }

    #[test]
    fn bands_own_listeners_are_the_stub_the_loopback_relay_and_the_proxy_of_the_plan() {
        assert_eq!(bands_own(None, Some([443, 80])), Vec::<SocketAddr>::new());
        let p = plan(&["localhost:18000", "api.example.test"]);
        assert_eq!(
            addrs(&bands_own(Some(&p), None)),
            ["127.77.0.5:53", "127.0.0.1:18000", "[::1]:18000"]
        );
        assert_eq!(
            addrs(&bands_own(Some(&plan(&["*"])), Some([8443, 8080]))),
            ["127.77.0.5:53", "127.77.0.5:8443", "127.77.0.5:8080"]
        );
    }

    /// A fake `/proc`: band-server's own namespace (`self`), bubblewrap outside the run's (its
    /// table is the host's: never read), two processes in the run's, and one gone.
    fn fake_proc(tcp: &str, tcp6: &str) -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let proc = t.path();
        let process = |name: &str, ns: &str, tcp: Option<(&str, &str)>| {
            let dir = proc.join(name);
            fs_err::create_dir_all(dir.join("ns")).unwrap();
            fs_err::create_dir_all(dir.join("net")).unwrap();
            fs_err::os::unix::fs::symlink(ns, dir.join("ns/net")).unwrap();
            if let Some((v4, v6)) = tcp {
                fs_err::write(dir.join("net/tcp"), v4).unwrap();
                fs_err::write(dir.join("net/tcp6"), v6).unwrap();
            }
        };
        let host = "   0: 00000000:0016 00000000:0000 0A 0 0 0 0 0\n";
        process("self", "net:[4026531840]", Some((host, "")));
        process("100", "net:[4026531840]", Some((host, "")));
        process("101", "net:[4026532999]", Some((tcp, tcp6)));
        process("102", "net:[4026532999]", None);
        t
    }

    #[cfg(target_endian = "little")]
    #[test]
    fn a_runs_listeners_are_its_namespaces_but_bands_own() {
        let p = plan(&["localhost:18000"]);
        // The run listens where band's stub and relay do too, and on its own ports.
        let tcp = format!(
            "{TCP}   9: 05004D7F:0035 00000000:0000 0A 0 0 0 0 0\n  10: 0100007F:4650 00000000:0000 0A 0 0 0 0 0\n"
        );
        let t = fake_proc(&tcp, TCP6);
        let own = bands_own(Some(&p), None);
        let got = of_run(t.path(), &[100, 101, 102, 103], &own);
        assert_eq!(
            addrs(&got),
            [
                "0.0.0.0:22",
                "127.0.0.1:8765",
                "[::]:3000",
                "[::ffff:127.0.0.1]:8080",
                "[2001:db8::5]:443"
            ]
        );
        // Without the exclusion, band's are there: the stub, and the relay on both addresses.
        let all = addrs(&of_run(t.path(), &[101], &[]));
        for ours in ["127.77.0.5:53", "127.0.0.1:18000", "[::1]:18000"] {
            assert!(all.iter().any(|a| a == ours), "{ours} in {all:?}");
        }
        // Only processes in band-server's namespace (bubblewrap before its child): nothing.
        assert_eq!(of_run(t.path(), &[100], &own), Vec::<SocketAddr>::new());
        // band-server's namespace unknown: nothing is read.
        fs_err::remove_file(t.path().join("self/ns/net")).unwrap();
        assert_eq!(of_run(t.path(), &[101], &own), Vec::<SocketAddr>::new());
    }

    #[cfg(target_endian = "little")]
    #[test]
    fn at_most_max_listed_are_named() {
        let many: String = (0..40)
            .map(|i| format!("{i}: 0100007F:{:04X} 00000000:0000 0A 0 0\n", 9000 + i))
            .collect();
        let t = fake_proc(&many, "");
        let got = of_run(t.path(), &[101], &[]);
        assert_eq!(got.len(), MAX_LISTED);
        assert_eq!(got[0].to_string(), "127.0.0.1:9000");
    }
}
