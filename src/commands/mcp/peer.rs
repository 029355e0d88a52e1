//! Who is at the other end of a loopback connection to `band mcp --http`: the uid that owns the
//! client's socket, read from the kernel's tables of TCP sockets (`/proc/net/tcp` and
//! `/proc/net/tcp6` of the server's network namespace, the client's too on loopback).
//!
//! Loopback is not a boundary between the users of one machine: without a token, any local user
//! could call the tools, which run with the serving user's workspace and secrets. A loopback
//! server with no token admits only its own user and root.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

/// The uid owning the TCP socket whose local end is `client` and remote end is `server`, from
/// the tables under `proc_net` (`/proc/net`). `None` when no such socket is listed.
pub(crate) fn socket_owner(proc_net: &Path, client: SocketAddr, server: SocketAddr) -> Option<u32> {
    let (client, server) = (plain(client), plain(server));
    ["tcp", "tcp6"].iter().find_map(|table| {
        let text = fs_err::read_to_string(proc_net.join(table)).ok()?;
        text.lines().skip(1).find_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (local, remote, uid) = (f.get(1)?, f.get(2)?, f.get(7)?);
            (parse_end(local).map(plain) == Some(client)
                && parse_end(remote).map(plain) == Some(server))
            .then(|| uid.parse().ok())
            .flatten()
        })
    })
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
fn plain(a: SocketAddr) -> SocketAddr {
    match a.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), a.port()),
            None => a,
        },
        IpAddr::V4(_) => a,
    }
}

/// One end as the kernel lists it: `0100007F:1F90` (the address as 32-bit words in the host's
/// byte order, in hexadecimal; the port in hexadecimal), 8 or 32 digits of address.
fn parse_end(s: &str) -> Option<SocketAddr> {
    let (addr, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let words: Option<Vec<[u8; 4]>> = (0..addr.len() / 8)
        .map(|i| {
            let w = addr.get(i * 8..i * 8 + 8)?;
            u32::from_str_radix(w, 16).ok().map(u32::to_ne_bytes)
        })
        .collect();
    let bytes: Vec<u8> = words?.concat();
    let ip = match bytes.len() {
        4 => IpAddr::V4(Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3])),
        16 => IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(bytes).ok()?)),
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hexadecimal of `ip`'s bytes as the kernel prints them: 32-bit words in this host's
    /// byte order.
    fn hex(ip: IpAddr) -> String {
        let bytes = match ip {
            IpAddr::V4(v4) => v4.octets().to_vec(),
            IpAddr::V6(v6) => v6.octets().to_vec(),
        };
        bytes
            .chunks(4)
            .map(|c| format!("{:08X}", u32::from_ne_bytes([c[0], c[1], c[2], c[3]])))
            .collect()
    }

    fn row(local: SocketAddr, remote: SocketAddr, uid: u32) -> String {
        format!(
            "   0: {}:{:04X} {}:{:04X} 01 00000000:00000000 00:00000000 00000000  {uid}        0 12345 1 0000000000000000 20 4 30 10 -1",
            hex(local.ip()),
            local.port(),
            hex(remote.ip()),
            remote.port()
        )
    }

    #[test]
    fn the_client_socket_names_its_owner_in_either_table() {
        let t = tempfile::tempdir().expect("tmp");
        let head = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";
        let server: SocketAddr = "127.0.0.1:8808".parse().unwrap();
        let (mine, theirs): (SocketAddr, SocketAddr) = (
            "127.0.0.1:40001".parse().unwrap(),
            "127.0.0.1:40002".parse().unwrap(),
        );
        fs_err::write(
            t.path().join("tcp"),
            format!(
                "{head}{}\n{}\n{}\n",
                row(server, mine, 0),
                row(mine, server, 1000),
                row(theirs, server, 1001)
            ),
        )
        .unwrap();
        let v6: SocketAddr = "[::1]:8808".parse().unwrap();
        let c6: SocketAddr = "[::1]:40003".parse().unwrap();
        fs_err::write(
            t.path().join("tcp6"),
            format!("{head}{}\n", row(c6, v6, 1002)),
        )
        .unwrap();
        assert_eq!(socket_owner(t.path(), mine, server), Some(1000));
        assert_eq!(socket_owner(t.path(), theirs, server), Some(1001));
        assert_eq!(socket_owner(t.path(), c6, v6), Some(1002));
        // An IPv4 client of a dual-stack listener, as the listener sees it.
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:40001".parse().unwrap();
        assert_eq!(socket_owner(t.path(), mapped, server), Some(1000));
        assert_eq!(
            socket_owner(t.path(), "127.0.0.1:1".parse().unwrap(), server),
            None
        );
    }

    /// On this machine: a connection of this process's own to a listener of its own is its
    /// uid's.
    #[test]
    fn a_real_loopback_connection_is_its_owners() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (_s, peer) = l.accept().unwrap();
        assert_eq!(peer, c.local_addr().unwrap());
        assert_eq!(
            socket_owner(Path::new("/proc/net"), peer, l.local_addr().unwrap()),
            Some(rustix::process::geteuid().as_raw())
        );
    }
}
