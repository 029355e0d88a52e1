//! nf_tables over netlink, for the three requests a running run makes of its table: add set
//! elements (the DNS stub's answers), ask whether the table exists (the table watch), delete it
//! (teardown).
//!
//! Why not libnftables or `nft` for these: before it sends anything, nft fetches a cache of the
//! ruleset (every table, and the sets of the one it names) in a netlink dump, and starts the
//! dump again whenever the ruleset's generation changed under it. With many runs at once, each
//! committing its table, its elements and its removal, the dumps kept restarting: 64 writers
//! adding 20 elements each to their own tables took 3.3 s per element at the median and 275 s at
//! worst (`nft add element`, 2-core VM), and the DNS answers that wait for them timed out inside
//! the runs. The three messages here name their table and set and need no cache: no dump, so
//! nothing to restart. Building the table stays with libnftables, which parses the ruleset's text.
//!
//! The wire (linux/netlink.h, linux/netfilter/nfnetlink.h, nf_tables.h): a `nlmsghdr`, a
//! `nfgenmsg`, then attributes (`nlattr` + payload, each padded to 4 bytes). Changes go in a batch
//! (`NFNL_MSG_BATCH_BEGIN` … `NFNL_MSG_BATCH_END`), one transaction. The messages are built by
//! pure functions ([`add_elements`], [`get_table`], [`delete_table`]) and sent by [`request`].

use std::time::Duration;

use rustix::fd::OwnedFd;
use rustix::net::{
    AddressFamily, RecvFlags, SendFlags, SocketType, netlink, recv, sendto, socket, sockopt,
};

const NLMSG_HDRLEN: usize = 16;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_CREATE: u16 = 0x400;
const NLA_F_NESTED: u16 = 0x8000;

const NFNL_SUBSYS_NFTABLES: u16 = 10;
const NFNL_MSG_BATCH_BEGIN: u16 = 0x10;
const NFNL_MSG_BATCH_END: u16 = 0x11;
const NFT_MSG_NEWTABLE: u16 = 0;
const NFT_MSG_GETTABLE: u16 = 1;
const NFT_MSG_DELTABLE: u16 = 2;
const NFT_MSG_NEWSETELEM: u16 = 12;

const NFPROTO_INET: u8 = 1;
const AF_UNSPEC: u8 = 0;

const NFTA_TABLE_NAME: u16 = 1;
const NFTA_SET_ELEM_LIST_TABLE: u16 = 1;
const NFTA_SET_ELEM_LIST_SET: u16 = 2;
const NFTA_SET_ELEM_LIST_ELEMENTS: u16 = 3;
const NFTA_LIST_ELEM: u16 = 1;
const NFTA_SET_ELEM_KEY: u16 = 1;
const NFTA_DATA_VALUE: u16 = 1;

/// How long a reply may take before the request is an error (the kernel answers at once; this
/// only keeps a wedged socket from hanging a run).
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// What went wrong talking to nf_tables.
#[derive(Debug, thiserror::Error)]
pub enum NfnlError {
    #[error("netlink socket: {0}")]
    Socket(rustix::io::Errno),
    #[error("netlink send: {0}")]
    Send(rustix::io::Errno),
    #[error("netlink receive: {0}")]
    Recv(rustix::io::Errno),
    #[error("nf_tables: {what}: {errno}")]
    Kernel {
        what: String,
        errno: rustix::io::Errno,
    },
    #[error("nf_tables: {0}: a malformed reply")]
    Malformed(String),
}

/// One set element's key, as nf_tables stores it: each field of a concatenation padded to 4
/// bytes (an `inet_service` is its 2 bytes, big-endian, then 2 zero bytes).
pub(crate) fn key(fields: &[&[u8]]) -> Vec<u8> {
    let mut k = Vec::new();
    for f in fields {
        k.extend_from_slice(f);
        k.resize(k.len().next_multiple_of(4), 0);
    }
    k
}

/// A message under construction: header, `nfgenmsg`, attributes.
struct Msg {
    buf: Vec<u8>,
    /// Offsets of nested attributes still open (their length is written when they close).
    open: Vec<usize>,
}

impl Msg {
    fn new(ty: u16, flags: u16, seq: u32, family: u8, res_id: u16) -> Msg {
        let mut buf = Vec::with_capacity(256);
        buf.extend_from_slice(&0u32.to_ne_bytes()); // length, set by `done`
        buf.extend_from_slice(&ty.to_ne_bytes());
        buf.extend_from_slice(&flags.to_ne_bytes());
        buf.extend_from_slice(&seq.to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel's
        buf.push(family);
        buf.push(0); // NFNETLINK_V0
        buf.extend_from_slice(&res_id.to_be_bytes());
        Msg {
            buf,
            open: Vec::new(),
        }
    }

    fn attr(&mut self, ty: u16, payload: &[u8]) -> &mut Msg {
        let len = u16::try_from(4 + payload.len()).unwrap_or(u16::MAX);
        self.buf.extend_from_slice(&len.to_ne_bytes());
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        self.buf.extend_from_slice(payload);
        self.buf.resize(self.buf.len().next_multiple_of(4), 0);
        self
    }

    /// A NUL-terminated string attribute.
    fn str(&mut self, ty: u16, s: &str) -> &mut Msg {
        let mut p = s.as_bytes().to_vec();
        p.push(0);
        self.attr(ty, &p)
    }

    fn nest(&mut self, ty: u16) -> &mut Msg {
        self.open.push(self.buf.len());
        self.buf.extend_from_slice(&0u16.to_ne_bytes());
        self.buf
            .extend_from_slice(&(ty | NLA_F_NESTED).to_ne_bytes());
        self
    }

    fn end(&mut self) -> &mut Msg {
        if let Some(at) = self.open.pop() {
            let len = u16::try_from(self.buf.len() - at).unwrap_or(u16::MAX);
            self.buf[at..at + 2].copy_from_slice(&len.to_ne_bytes());
        }
        self
    }

    fn done(mut self) -> Vec<u8> {
        let len = u32::try_from(self.buf.len()).unwrap_or(u32::MAX);
        self.buf[0..4].copy_from_slice(&len.to_ne_bytes());
        self.buf
    }
}

fn nft_type(msg: u16) -> u16 {
    (NFNL_SUBSYS_NFTABLES << 8) | msg
}

/// `inner` (changes, each acknowledged) between a batch's begin (`seq`) and end (`end_seq`).
fn batch(seq: u32, end_seq: u32, inner: Vec<u8>) -> Vec<u8> {
    let mut out = Msg::new(
        NFNL_MSG_BATCH_BEGIN,
        NLM_F_REQUEST,
        seq,
        AF_UNSPEC,
        NFNL_SUBSYS_NFTABLES,
    )
    .done();
    out.extend(inner);
    out.extend(
        Msg::new(
            NFNL_MSG_BATCH_END,
            NLM_F_REQUEST,
            end_seq,
            AF_UNSPEC,
            NFNL_SUBSYS_NFTABLES,
        )
        .done(),
    );
    out
}

/// A batch adding, for each `(set, keys)`, `keys` to that set of the `inet` table `table` (the
/// sets are there; adding an element already in a set is not an error): one transaction. The
/// changes are messages `seq + 1 ..= seq + sets.len()`; the last one's number is returned.
pub(crate) fn add_elements(
    seq: u32,
    table: &str,
    sets: &[(String, Vec<Vec<u8>>)],
) -> (Vec<u8>, u32) {
    let mut changes = Vec::new();
    let mut last = seq;
    for (set, keys) in sets {
        last += 1;
        let mut m = Msg::new(
            nft_type(NFT_MSG_NEWSETELEM),
            NLM_F_REQUEST | NLM_F_CREATE | NLM_F_ACK,
            last,
            NFPROTO_INET,
            0,
        );
        m.str(NFTA_SET_ELEM_LIST_TABLE, table)
            .str(NFTA_SET_ELEM_LIST_SET, set)
            .nest(NFTA_SET_ELEM_LIST_ELEMENTS);
        for k in keys {
            m.nest(NFTA_LIST_ELEM)
                .nest(NFTA_SET_ELEM_KEY)
                .attr(NFTA_DATA_VALUE, k)
                .end()
                .end();
        }
        m.end();
        changes.extend(m.done());
    }
    (batch(seq, last + 1, changes), last)
}

/// A batch deleting the `inet` table `table` with everything in it (message `seq + 1`).
pub(crate) fn delete_table(seq: u32, table: &str) -> Vec<u8> {
    let mut m = Msg::new(
        nft_type(NFT_MSG_DELTABLE),
        NLM_F_REQUEST | NLM_F_ACK,
        seq + 1,
        NFPROTO_INET,
        0,
    );
    m.str(NFTA_TABLE_NAME, table);
    batch(seq, seq + 2, m.done())
}

/// A request for the `inet` table `table` alone (not a dump): answered with the table, or
/// `ENOENT`.
pub(crate) fn get_table(seq: u32, table: &str) -> Vec<u8> {
    let mut m = Msg::new(
        nft_type(NFT_MSG_GETTABLE),
        NLM_F_REQUEST | NLM_F_ACK,
        seq,
        NFPROTO_INET,
        0,
    );
    m.str(NFTA_TABLE_NAME, table);
    m.done()
}

/// What the kernel said to the request numbered `seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reply {
    /// Acknowledged, after a `NEWTABLE` message if `table` (an answer to [`get_table`]).
    Ack { table: bool },
    /// Refused with this errno.
    Error(rustix::io::Errno),
}

/// Read the replies in `buf` (one `recv`'s worth): `Some` once the answer to `seq` is there (an
/// error for an earlier message of the batch counts as the batch's answer), `None` to read on.
/// `table`: a `NEWTABLE` was seen (carried over between reads).
pub(crate) fn parse_replies(buf: &[u8], seq: u32, table: &mut bool) -> Result<Option<Reply>, ()> {
    let mut at = 0;
    while at + NLMSG_HDRLEN <= buf.len() {
        let u32_at = |i: usize| -> u32 {
            let mut b = [0u8; 4];
            b.copy_from_slice(&buf[i..i + 4]);
            u32::from_ne_bytes(b)
        };
        let len = u32_at(at) as usize;
        if len < NLMSG_HDRLEN || at + len > buf.len() {
            return Err(());
        }
        let ty = u16::from_ne_bytes([buf[at + 4], buf[at + 5]]);
        let mseq = u32_at(at + 8);
        match ty {
            NLMSG_ERROR => {
                if len < NLMSG_HDRLEN + 4 {
                    return Err(());
                }
                let code =
                    i32::from_ne_bytes([buf[at + 16], buf[at + 17], buf[at + 18], buf[at + 19]]);
                if code != 0 {
                    return Ok(Some(Reply::Error(rustix::io::Errno::from_raw_os_error(
                        -code,
                    ))));
                }
                if mseq == seq {
                    return Ok(Some(Reply::Ack { table: *table }));
                }
            }
            NLMSG_DONE => {}
            t if t == nft_type(NFT_MSG_NEWTABLE) && mseq == seq => *table = true,
            _ => {}
        }
        at += len.next_multiple_of(4);
    }
    Ok(None)
}

/// A netlink socket to nf_tables in the calling thread's network namespace.
fn open() -> Result<OwnedFd, NfnlError> {
    let fd = socket(
        AddressFamily::NETLINK,
        SocketType::RAW,
        Some(netlink::NETFILTER),
    )
    .map_err(NfnlError::Socket)?;
    sockopt::set_socket_timeout(&fd, sockopt::Timeout::Recv, Some(REPLY_TIMEOUT))
        .map_err(NfnlError::Socket)?;
    Ok(fd)
}

/// Send `msg` and wait for the kernel's answer to message `seq`. `what` names the request in
/// errors.
pub(crate) fn request(msg: &[u8], seq: u32, what: &str) -> Result<Reply, NfnlError> {
    let fd = open()?;
    sendto(
        &fd,
        msg,
        SendFlags::empty(),
        &netlink::SocketAddrNetlink::new(0, 0),
    )
    .map_err(NfnlError::Send)?;
    let mut buf = vec![0u8; 16384];
    let mut table = false;
    loop {
        let (n, _) = recv(&fd, &mut buf[..], RecvFlags::empty()).map_err(NfnlError::Recv)?;
        match parse_replies(&buf[..n], seq, &mut table) {
            Ok(Some(r)) => return Ok(r),
            Ok(None) => {}
            Err(()) => return Err(NfnlError::Malformed(what.to_string())),
        }
    }
}

/// [`request`], an errno answer as an error.
pub(crate) fn change(msg: &[u8], seq: u32, what: &str) -> Result<(), NfnlError> {
    match request(msg, seq, what)? {
        Reply::Ack { .. } => Ok(()),
        Reply::Error(errno) => Err(NfnlError::Kernel {
            what: what.to_string(),
            errno,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u16_at(b: &[u8], i: usize) -> u16 {
        u16::from_ne_bytes([b[i], b[i + 1]])
    }
    fn u32_at(b: &[u8], i: usize) -> u32 {
        u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
    }

    #[test]
    fn keys_pad_each_field_to_four_bytes() {
        let k = key(&[&[10, 0, 0, 1], &8080u16.to_be_bytes()]);
        assert_eq!(k, [10, 0, 0, 1, 0x1f, 0x90, 0, 0]);
        assert_eq!(key(&[&[1u8; 16]]).len(), 16);
        assert_eq!(key(&[&[1u8; 16], &[0, 53]]).len(), 20);
    }

    #[test]
    fn an_element_batch_is_begin_newsetelem_end_with_nested_keys() {
        let k = key(&[&[10, 0, 0, 1], &53u16.to_be_bytes()]);
        let (b, last) = add_elements(7, "band_x", &[("dns4".into(), vec![k.clone()])]);
        assert_eq!(last, 8);
        // Begin: 20 bytes, type 0x10, seq 7, res_id 10 big-endian.
        assert_eq!(u32_at(&b, 0), 20);
        assert_eq!(u16_at(&b, 4), NFNL_MSG_BATCH_BEGIN);
        assert_eq!(u32_at(&b, 8), 7);
        assert_eq!(&b[18..20], &[0, 10]);
        // The change: NEWSETELEM of nftables, acknowledged, seq 8, family inet.
        let m = &b[20..];
        let len = u32_at(m, 0) as usize;
        assert_eq!(u16_at(m, 4), (10 << 8) | 12);
        assert_eq!(u16_at(m, 6), NLM_F_REQUEST | NLM_F_CREATE | NLM_F_ACK);
        assert_eq!(u32_at(m, 8), 8);
        assert_eq!(m[16], NFPROTO_INET);
        // table "band_x\0" (4 + 7 → 12 padded), set "dns4\0" (4 + 5 → 12), then the nest.
        assert_eq!(
            (u16_at(m, 20), u16_at(m, 22)),
            (11, NFTA_SET_ELEM_LIST_TABLE)
        );
        assert_eq!(&m[24..31], b"band_x\0");
        assert_eq!((u16_at(m, 32), u16_at(m, 34)), (9, NFTA_SET_ELEM_LIST_SET));
        let elems = 44;
        assert_eq!(
            u16_at(m, elems + 2),
            NFTA_SET_ELEM_LIST_ELEMENTS | NLA_F_NESTED
        );
        // elements(4) → elem(4) → key(4) → value(4 + 8): 24 bytes in all.
        assert_eq!(u16_at(m, elems), 24);
        assert_eq!(u16_at(m, elems + 4), 20);
        assert_eq!(u16_at(m, elems + 6), NFTA_LIST_ELEM | NLA_F_NESTED);
        assert_eq!(u16_at(m, elems + 8), 16);
        assert_eq!(u16_at(m, elems + 10), NFTA_SET_ELEM_KEY | NLA_F_NESTED);
        assert_eq!(
            (u16_at(m, elems + 12), u16_at(m, elems + 14)),
            (12, NFTA_DATA_VALUE)
        );
        assert_eq!(&m[elems + 16..elems + 24], &k[..]);
        assert_eq!(len, elems + 24);
        // End: seq 9.
        let e = &m[len..];
        assert_eq!(u16_at(e, 4), NFNL_MSG_BATCH_END);
        assert_eq!(u32_at(e, 8), 9);
        assert_eq!(e.len(), 20);
    }

    fn error_msg(seq: u32, code: i32) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&36u32.to_ne_bytes());
        m.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
        m.extend_from_slice(&0u16.to_ne_bytes());
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&code.to_ne_bytes());
        m.extend_from_slice(&[0u8; 16]); // the request's header, echoed
        m
    }

    #[test]
    fn replies_are_read_to_the_requests_ack() {
        let mut t = false;
        assert_eq!(parse_replies(&error_msg(3, 0), 4, &mut t), Ok(None));
        assert_eq!(
            parse_replies(&error_msg(4, 0), 4, &mut t),
            Ok(Some(Reply::Ack { table: false }))
        );
        assert_eq!(
            parse_replies(&error_msg(3, -2), 4, &mut t),
            Ok(Some(Reply::Error(rustix::io::Errno::NOENT)))
        );
        let mut newtable = get_table(5, "band_x");
        newtable[4..6].copy_from_slice(&((10u16 << 8) | NFT_MSG_NEWTABLE).to_ne_bytes());
        newtable.extend(error_msg(5, 0));
        assert_eq!(
            parse_replies(&newtable, 5, &mut t),
            Ok(Some(Reply::Ack { table: true }))
        );
        assert_eq!(parse_replies(&[1, 0, 0, 0], 1, &mut t), Ok(None));
        let mut short = error_msg(1, 0);
        short[0] = 200;
        assert_eq!(parse_replies(&short, 1, &mut t), Err(()));
    }
}
