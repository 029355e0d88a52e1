//! The run's nftables table, as text: a pure function of a [`NetPlan`], and the small batches the
//! DNS stub adds to it. [`Nft`] is the thin layer that hands the text to libnftables (in process)
//! or to `nft -f -`.
//!
//! Why nftables and not iptables + ip6tables: one `inet` table covers IPv4 and IPv6 with the same
//! rules in one atomic batch; named sets let the DNS stub add an answered address with one small
//! batch instead of rewriting a chain; a table of our own never interleaves with the host's rules,
//! so setup and teardown are one `add table …` and one `delete table …`; and the dynamic sets
//! `seen*`/`denied*` record, inside the kernel, every destination the run reached or was refused.
//!
//! The table (`band_<run id>`):
//!
//! ```text
//! chain output   hook output: the stub's address is closed to other users;
//!                packets of sockets owned by the run's uid → jump run
//! chain run      non tcp/udp → deny
//!                deny.net IPs/CIDRs (and name:port denials learned by the stub) → deny
//!                allow.net IPs/CIDRs → allow
//!                addresses the stub answered for allowed names (@dns4, @dns6) → allow
//!                `*`: non-public ranges and this host's own addresses → deny, else → allow
//!                → deny
//! chain allow    record in @seen4/@seen6, accept
//! chain deny     record in @denied4/@denied6, TCP reset ("connection refused"), else ICMP
//!                port-unreachable
//! ```
//!
//! Only packets whose socket belongs to the run's uid enter `run`, so a packet the kernel sends on
//! no socket's behalf (a RST, a SYN-ACK) is never refused by it. The run's own sockets live in
//! its own network namespace ([`super::netns`]); the sockets of the run's uid in the host's
//! namespace are its relay's, one per connection of the run. The stub listens inside the run's
//! namespace, so `run` has no rule for it: the relay never reaches the stub's address on the
//! host (the run's packets to it stay on the run's own loopback).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

use serde::Deserialize;

use crate::sys;

/// A destination: address, optional port (`None` = every port).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dest {
    pub(crate) net: IpAddr,
    pub(crate) prefix: u8,
    pub(crate) port: Option<u16>,
}

impl Dest {
    pub fn addr(ip: IpAddr, port: Option<u16>) -> Dest {
        Dest {
            net: ip,
            prefix: full_prefix(ip),
            port,
        }
    }
}

pub(crate) fn full_prefix(ip: IpAddr) -> u8 {
    if ip.is_ipv4() { 32 } else { 128 }
}

/// Everything the run's table is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetPlan {
    /// `band_<run id>`.
    pub table: String,
    pub uid: u32,
    /// The DNS stub's address (port 53, UDP and TCP).
    pub stub: Ipv4Addr,
    /// `deny.net` IP/CIDR patterns, and `*:port` denials (net = unspecified, prefix 0).
    pub deny: Vec<Dest>,
    /// `allow.net` IP/CIDR patterns (these may name private ranges on purpose).
    pub allow: Vec<Dest>,
    /// Ports of the `*` patterns (`None` = any port); empty = no `*`.
    pub any_public: Vec<Option<u16>>,
    /// Never reachable through `*` or a name: non-public ranges, this host's addresses.
    pub never: Vec<(IpAddr, u8)>,
}

/// The table name of a run (run ids are validated lower-case hex).
pub fn table_name(run_id: &str) -> String {
    format!("band_{run_id}")
}

/// Whether a table name is one of ours (for the janitor).
pub(crate) fn is_band_table(name: &str) -> bool {
    name.strip_prefix("band_")
        .is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric()))
}

fn net_text(net: IpAddr, prefix: u8) -> String {
    if prefix == full_prefix(net) {
        net.to_string()
    } else {
        format!("{net}/{prefix}")
    }
}

fn family(ip: IpAddr) -> &'static str {
    if ip.is_ipv4() { "ip" } else { "ip6" }
}

/// One rule matching `d` (address part, then port), ending in `verdict`.
fn dest_rule(d: &Dest, verdict: &str) -> String {
    let port = d.port.map(|p| format!(" th dport {p}")).unwrap_or_default();
    if d.prefix == 0 && d.net.is_unspecified() {
        // `*:port` in deny.net: every address, both families.
        return format!("    meta l4proto {{ tcp, udp }}{port} {verdict}\n");
    }
    format!(
        "    {} daddr {}{port} {verdict}\n",
        family(d.net),
        net_text(d.net, d.prefix)
    )
}

fn set_elements(items: &[String]) -> String {
    if items.is_empty() {
        String::new()
    } else {
        format!(" elements = {{ {} }};", items.join(", "))
    }
}

/// The whole table, for `nft -f -` (one atomic transaction).
pub fn ruleset(p: &NetPlan) -> String {
    let t = &p.table;
    let never4: Vec<String> = p
        .never
        .iter()
        .filter(|(n, _)| n.is_ipv4())
        .map(|(n, l)| net_text(*n, *l))
        .collect();
    let never6: Vec<String> = p
        .never
        .iter()
        .filter(|(n, _)| n.is_ipv6())
        .map(|(n, l)| net_text(*n, *l))
        .collect();
    let mut s = String::new();
    s += &format!("table inet {t} {{\n");
    s += &format!(
        "  set never4 {{ type ipv4_addr; flags interval;{} }}\n",
        set_elements(&never4)
    );
    s += &format!(
        "  set never6 {{ type ipv6_addr; flags interval;{} }}\n",
        set_elements(&never6)
    );
    for fam in ["4", "6"] {
        let ty = if fam == "4" { "ipv4_addr" } else { "ipv6_addr" };
        s += &format!("  set dns{fam} {{ type {ty} . inet_service; }}\n");
        s += &format!("  set dns{fam}any {{ type {ty}; }}\n");
        s += &format!("  set dnsdeny{fam} {{ type {ty} . inet_service; }}\n");
        s += &format!(
            "  set seen{fam} {{ type {ty} . inet_proto . inet_service; flags dynamic; size 4096; }}\n"
        );
        s += &format!(
            "  set denied{fam} {{ type {ty} . inet_proto . inet_service; flags dynamic; size 4096; }}\n"
        );
    }
    s += "  chain output {\n    type filter hook output priority filter; policy accept;\n";
    s += &format!(
        "    ip daddr {} meta l4proto {{ tcp, udp }} th dport 53 meta skuid != {{ 0, {} }} reject\n",
        p.stub, p.uid
    );
    s += &format!("    meta skuid {} jump run\n  }}\n", p.uid);

    s += "  chain run {\n";
    s += "    meta l4proto != { tcp, udp } goto deny\n";
    for d in &p.deny {
        s += &dest_rule(d, "goto deny");
    }
    s += "    ip daddr . th dport @dnsdeny4 goto deny\n";
    s += "    ip6 daddr . th dport @dnsdeny6 goto deny\n";
    for d in &p.allow {
        s += &dest_rule(d, "goto allow");
    }
    s += "    ip daddr . th dport @dns4 goto allow\n";
    s += "    ip daddr @dns4any goto allow\n";
    s += "    ip6 daddr . th dport @dns6 goto allow\n";
    s += "    ip6 daddr @dns6any goto allow\n";
    if !p.any_public.is_empty() {
        s += "    ip daddr @never4 goto deny\n";
        s += "    ip6 daddr @never6 goto deny\n";
        for port in &p.any_public {
            match port {
                Some(port) => s += &format!("    th dport {port} goto allow\n"),
                None => s += "    goto allow\n",
            }
        }
    }
    s += "    goto deny\n  }\n";

    s += "  chain allow {\n";
    s += "    meta nfproto ipv4 add @seen4 { ip daddr . meta l4proto . th dport }\n";
    s += "    meta nfproto ipv6 add @seen6 { ip6 daddr . meta l4proto . th dport }\n";
    s += "    accept\n  }\n";
    s += "  chain deny {\n";
    s += "    meta nfproto ipv4 meta l4proto { tcp, udp } add @denied4 { ip daddr . meta l4proto . th dport }\n";
    s += "    meta nfproto ipv6 meta l4proto { tcp, udp } add @denied6 { ip6 daddr . meta l4proto . th dport }\n";
    s += "    meta l4proto tcp reject with tcp reset\n";
    s += "    reject with icmpx port-unreachable\n  }\n";
    s += "}\n";
    s
}

/// Where the stub's answers for an allowed name go, in order (deny sets first): each destination
/// with its set, `allow` on its port (`dns4`/`dns6`) or on every port (`dns4any`/`dns6any`),
/// `deny` on a port a `deny.net` pattern names for the same host (`dnsdeny4`/`dnsdeny6`). A
/// port-less deny of an allowed name never comes: the stub refuses the name.
fn learned(allow: &[Dest], deny: &[Dest]) -> Vec<(String, Dest)> {
    let mut out = Vec::new();
    for (dests, base) in [(deny, "dnsdeny"), (allow, "dns")] {
        for d in dests {
            let fam = if d.net.is_ipv4() { "4" } else { "6" };
            match d.port {
                Some(_) => out.push((format!("{base}{fam}"), *d)),
                None if base == "dns" => out.push((format!("dns{fam}any"), *d)),
                None => {}
            }
        }
    }
    out
}

/// Addresses the stub learned for an allowed name ([`learned`]), as one batch of nft commands.
pub fn learn_batch(table: &str, allow: &[Dest], deny: &[Dest]) -> String {
    learned(allow, deny)
        .into_iter()
        .map(|(set, d)| match d.port {
            Some(port) => format!("add element inet {table} {set} {{ {} . {port} }}\n", d.net),
            None => format!("add element inet {table} {set} {{ {} }}\n", d.net),
        })
        .collect()
}

/// The same additions ([`learned`]) as set elements for netlink ([`super::nfnl::add_elements`]):
/// per set, the keys (`addr . port` or, for every port, `addr`).
pub(crate) fn learn_sets(allow: &[Dest], deny: &[Dest]) -> Vec<(String, Vec<Vec<u8>>)> {
    let mut sets: Vec<(String, Vec<Vec<u8>>)> = Vec::new();
    for (set, d) in learned(allow, deny) {
        let addr = match d.net {
            IpAddr::V4(a) => a.octets().to_vec(),
            IpAddr::V6(a) => a.octets().to_vec(),
        };
        let key = match d.port {
            Some(port) => super::nfnl::key(&[&addr, &port.to_be_bytes()]),
            None => super::nfnl::key(&[&addr]),
        };
        match sets.iter_mut().find(|(s, _)| *s == set) {
            Some((_, keys)) => keys.push(key),
            None => sets.push((set, vec![key])),
        }
    }
    sets
}

/// A destination recorded by the kernel in `seen*` or `denied*`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Flow {
    pub(crate) ip: IpAddr,
    pub(crate) proto: String,
    pub(crate) port: u16,
}

/// What went wrong running `nft` or reading its output.
#[derive(Debug, thiserror::Error)]
pub enum NftError {
    #[error("nft JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("cannot run {}: {source}", .bin.display())]
    Spawn {
        bin: PathBuf,
        source: std::io::Error,
    },
    #[error("writing to {}: {source}", .bin.display())]
    Write {
        bin: PathBuf,
        source: std::io::Error,
    },
    #[error("waiting for {}: {source}", .bin.display())]
    Wait {
        bin: PathBuf,
        source: std::io::Error,
    },
    #[error("{} -f - failed ({status}): {stderr}", .bin.display())]
    Batch {
        bin: PathBuf,
        status: std::process::ExitStatus,
        stderr: String,
    },
    #[error("{} {args} failed: {stderr}", .bin.display())]
    Command {
        bin: PathBuf,
        args: String,
        stderr: String,
    },
    #[error("internal: the thread applying the table panicked")]
    Panicked,
    #[error("libnftables: {commands}: {stderr}")]
    Library { commands: String, stderr: String },
    #[error(transparent)]
    Netlink(#[from] super::nfnl::NfnlError),
}

#[derive(Deserialize)]
struct NftJson {
    nftables: Vec<serde_json::Value>,
}

#[cfg(test)]
/// Parse `nft -j list set inet <table> <set>` (elements are concatenations `addr . proto . port`).
pub(crate) fn parse_set_json(text: &str) -> Result<Vec<Flow>, NftError> {
    Ok(parse_sets_json(text)?
        .into_values()
        .flatten()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect())
}

/// Parse `nft -j list table inet <table>`: every set's elements that are concatenations
/// `addr . proto . port`, by set name (each sorted, without duplicates). One listing serves the
/// whole report.
pub(crate) fn parse_sets_json(text: &str) -> Result<BTreeMap<String, Vec<Flow>>, NftError> {
    let doc: NftJson = serde_json::from_str(text)?;
    let mut sets: BTreeMap<String, BTreeSet<Flow>> = BTreeMap::new();
    for item in &doc.nftables {
        let Some(set) = item.get("set") else { continue };
        let Some(name) = set.get("name").and_then(|n| n.as_str()) else {
            continue;
        };
        let out = sets.entry(name.to_string()).or_default();
        let Some(elems) = set.get("elem").and_then(|v| v.as_array()) else {
            continue;
        };
        for e in elems {
            // An element is {"concat": [..]} or, with counters/timeouts, {"elem": {"val": {"concat": ..}}}.
            let concat = e
                .pointer("/concat")
                .or_else(|| e.pointer("/elem/val/concat"))
                .and_then(|c| c.as_array());
            let Some(c) = concat else { continue };
            let ip = c
                .first()
                .and_then(|v| v.as_str())
                .and_then(|s| s.parse::<IpAddr>().ok());
            let proto = c.get(1).map(|v| match v {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Number(n) => match n.as_u64() {
                    Some(6) => "tcp".to_string(),
                    Some(17) => "udp".to_string(),
                    _ => n.to_string(),
                },
                other => other.to_string(),
            });
            let port = c
                .get(2)
                .and_then(|v| v.as_u64())
                .and_then(|p| u16::try_from(p).ok());
            if let (Some(ip), Some(proto), Some(port)) = (ip, proto, port) {
                out.insert(Flow { ip, proto, port });
            }
        }
    }
    Ok(sets
        .into_iter()
        .map(|(k, v)| (k, v.into_iter().collect()))
        .collect())
}

/// Parse `nft -j list tables`: the names of `inet` tables.
pub fn parse_tables_json(text: &str) -> Result<Vec<String>, NftError> {
    let doc: NftJson = serde_json::from_str(text)?;
    Ok(doc
        .nftables
        .iter()
        .filter_map(|v| v.get("table"))
        .filter(|t| t.get("family").and_then(|f| f.as_str()) == Some("inet"))
        .filter_map(|t| t.get("name").and_then(|n| n.as_str()).map(str::to_string))
        .collect())
}

/// nftables, either in process through libnftables ([`sys::NftLibrary`]: no process per
/// command) or through the `nft` program (`nft -f -` batches, `nft …` commands). The library is
/// used when `bin` is the system's nft ([`crate::config::DEFAULT_NFT`], present) and
/// `libnftables.so.1` opens: it is what that program runs, so the text, the transactions and
/// the JSON are the same; a configured other program (a wrapper) is always run.
#[derive(Debug, Clone)]
pub struct Nft {
    pub(crate) bin: PathBuf,
    lib: Option<&'static Mutex<sys::NftLibrary>>,
    /// The system's nft: the kernel's nf_tables is there, and the run's own requests (elements,
    /// the table watch, removal) go to it over netlink ([`super::nfnl`]), with no cache to fetch.
    netlink: bool,
}

/// The process's one libnftables context, opened on first use (`None`: no library here).
fn library() -> Option<&'static Mutex<sys::NftLibrary>> {
    static LIB: OnceLock<Option<Mutex<sys::NftLibrary>>> = OnceLock::new();
    LIB.get_or_init(|| sys::NftLibrary::open().ok().map(Mutex::new))
        .as_ref()
}

/// Whether `bin` is the system's nft (present), whose library runs in process.
fn is_system(bin: &Path) -> bool {
    bin == Path::new(crate::config::DEFAULT_NFT) && bin.is_file()
}

/// Open the process's libnftables context now, on a thread of its own, when `bin` is the
/// system's nft. A run with `allow.net` calls this as soon as its request is read: loading the
/// library and making its context (about 0.7 ms) then overlaps the run's checks, lease, plan and
/// cgroup instead of delaying its network, whose first use of the library waits for this one.
pub(crate) fn open_early(bin: &Path) {
    if is_system(bin) {
        let _ = std::thread::Builder::new()
            .name("band-nft-open".into())
            .spawn(|| {
                library();
            });
    }
}

impl Nft {
    /// `bin`, in process when it is the system's nft and its library opens.
    pub fn new(bin: &Path) -> Nft {
        let system = is_system(bin);
        Nft {
            bin: bin.to_path_buf(),
            lib: if system { library() } else { None },
            netlink: system,
        }
    }

    /// `bin` as a program, never the library.
    pub fn program(bin: &Path) -> Nft {
        Nft {
            bin: bin.to_path_buf(),
            lib: None,
            netlink: false,
        }
    }

    /// The same nft as a program, never the library: a command run from a thread in another
    /// network namespace acts there (the library's context is this process's).
    pub fn as_program(&self) -> Nft {
        Nft::program(&self.bin)
    }

    /// Whether commands go through libnftables in this process.
    pub fn in_process(&self) -> bool {
        self.lib.is_some()
    }

    /// `commands` through the library (the caller knows it has one).
    fn library_run(
        &self,
        lib: &Mutex<sys::NftLibrary>,
        commands: &str,
        json: bool,
    ) -> Result<String, NftError> {
        let mut lib = lib.lock().map_err(|_| NftError::Panicked)?;
        lib.run(commands, json).map_err(|e| NftError::Library {
            commands: commands.lines().next().unwrap_or_default().to_string(),
            stderr: e.to_string(),
        })
    }

    /// Apply a batch atomically (`nft -f -`).
    pub fn apply(&self, batch: &str) -> Result<(), NftError> {
        if let Some(lib) = self.lib {
            return self.library_run(lib, batch, false).map(|_| ());
        }
        let bin = || self.bin.clone();
        let mut child = Command::new(&self.bin)
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| NftError::Spawn { bin: bin(), source })?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(batch.as_bytes())
                .map_err(|source| NftError::Write { bin: bin(), source })?;
        }
        let out = child
            .wait_with_output()
            .map_err(|source| NftError::Wait { bin: bin(), source })?;
        if out.status.success() {
            Ok(())
        } else {
            Err(NftError::Batch {
                bin: bin(),
                status: out.status,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            })
        }
    }

    /// One command, `-j` for JSON: its output.
    fn run(&self, json: bool, args: &[&str]) -> Result<String, NftError> {
        if let Some(lib) = self.lib {
            return self.library_run(lib, &args.join(" "), json);
        }
        let out = Command::new(&self.bin)
            .args(json.then_some("-j"))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|source| NftError::Spawn {
                bin: self.bin.clone(),
                source,
            })?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(NftError::Command {
                bin: self.bin.clone(),
                args: args.join(" "),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            })
        }
    }

    /// The destinations recorded in the sets `names` of the table, by set name. In process, one
    /// listing per set (0.07 ms each, against 0.6 ms for the whole table with its rules and
    /// address ranges); through the program, one listing of the table (one process, not one per
    /// set).
    pub fn list_sets(
        &self,
        table: &str,
        names: &[&str],
    ) -> Result<BTreeMap<String, Vec<Flow>>, NftError> {
        let mut sets = if self.in_process() {
            let mut all = BTreeMap::new();
            for name in names {
                all.extend(parse_sets_json(
                    &self.run(true, &["list", "set", "inet", table, name])?,
                )?);
            }
            all
        } else {
            parse_sets_json(&self.run(true, &["list", "table", "inet", table])?)?
        };
        sets.retain(|name, _| names.contains(&name.as_str()));
        Ok(sets)
    }

    pub fn delete_table(&self, table: &str) -> Result<(), NftError> {
        if self.netlink {
            let what = format!("delete table inet {table}");
            return Ok(super::nfnl::change(
                &super::nfnl::delete_table(1, table),
                2,
                &what,
            )?);
        }
        self.run(false, &["delete", "table", "inet", table])
            .map(|_| ())
    }

    /// Add the addresses the DNS stub answered to the run's table ([`learn_batch`]): one
    /// transaction.
    pub fn learn(&self, table: &str, allow: &[Dest], deny: &[Dest]) -> Result<(), NftError> {
        if self.netlink {
            let sets = learn_sets(allow, deny);
            if sets.is_empty() {
                return Ok(());
            }
            let (msg, last) = super::nfnl::add_elements(1, table, &sets);
            let what = format!("add elements to inet {table}");
            return Ok(super::nfnl::change(&msg, last, &what)?);
        }
        self.apply(&learn_batch(table, allow, deny))
    }

    /// Whether the `inet` table `table` is in the kernel: one listing of that table only. Not
    /// `list tables`, which fetches every table of the host with its chains, rules and sets: with
    /// 64 runs' tables that cost 68 ms a call (most of it in the kernel), against 4 ms for one
    /// table through the nft program, and every networked run asks every 250 ms
    /// ([`super::WATCH_INTERVAL`]), so many runs at once spent their CPU listing each other.
    pub fn table_exists(&self, table: &str) -> Result<bool, NftError> {
        if self.netlink {
            let what = format!("get table inet {table}");
            return match super::nfnl::request(&super::nfnl::get_table(1, table), 1, &what)? {
                super::nfnl::Reply::Ack { table } => Ok(table),
                super::nfnl::Reply::Error(rustix::io::Errno::NOENT) => Ok(false),
                super::nfnl::Reply::Error(errno) => {
                    Err(super::nfnl::NfnlError::Kernel { what, errno }.into())
                }
            };
        }
        match self.run(false, &["list", "table", "inet", table]) {
            Ok(_) => Ok(true),
            Err(NftError::Command { stderr, .. } | NftError::Library { stderr, .. })
                if stderr.contains("No such file or directory") =>
            {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    pub fn list_tables(&self) -> Result<Vec<String>, NftError> {
        parse_tables_json(&self.run(true, &["list", "tables"])?)
    }

    /// The table's rules as nft prints them (for tests and `--trace`).
    pub fn list_table(&self, table: &str) -> Result<String, NftError> {
        self.run(false, &["list", "table", "inet", table])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn plan() -> NetPlan {
        NetPlan {
            table: table_name("0123abcd"),
            uid: 61000,
            stub: Ipv4Addr::new(127, 77, 0, 1),
            deny: vec![
                Dest {
                    net: "203.0.113.9".parse().unwrap(),
                    prefix: 32,
                    port: None,
                },
                Dest {
                    net: "0.0.0.0".parse().unwrap(),
                    prefix: 0,
                    port: Some(25),
                },
            ],
            allow: vec![
                Dest {
                    net: "10.9.0.0".parse().unwrap(),
                    prefix: 16,
                    port: Some(443),
                },
                Dest::addr("2001:db8::7".parse().unwrap(), None),
            ],
            any_public: vec![],
            never: vec![
                ("10.0.0.0".parse().unwrap(), 8),
                ("fc00::".parse().unwrap(), 7),
            ],
        }
    }

    #[test]
    fn ruleset_orders_deny_before_allow_and_ends_in_deny() {
        let r = ruleset(&plan());
        let pos = |needle: &str| {
            r.find(needle)
                .unwrap_or_else(|| panic!("missing `{needle}` in\n{r}"))
        };
        assert!(pos("table inet band_0123abcd {") == 0);
        assert!(pos("meta skuid 61000 jump run") > 0);
        assert!(
            pos("ip daddr 203.0.113.9 goto deny")
                < pos("ip daddr 10.9.0.0/16 th dport 443 goto allow")
        );
        assert!(
            pos("meta l4proto { tcp, udp } th dport 25 goto deny") < pos("@dns4any goto allow")
        );
        assert!(pos("ip6 daddr 2001:db8::7 goto allow") < pos("    goto deny\n  }"));
        assert!(
            r.contains("set never4 { type ipv4_addr; flags interval; elements = { 10.0.0.0/8 }; }")
        );
        assert!(
            r.contains("set never6 { type ipv6_addr; flags interval; elements = { fc00::/7 }; }")
        );
        // No `*`: the never sets are not consulted, nothing but the lists reaches `allow`.
        assert!(!r.contains("@never4 goto deny"));
        assert_eq!(r.matches("goto allow").count(), 6);
        assert!(r.ends_with("    reject with icmpx port-unreachable\n  }\n}\n"));
    }

    #[test]
    fn the_stub_is_closed_to_other_users() {
        let r = ruleset(&plan());
        assert!(r.contains("ip daddr 127.77.0.1 meta l4proto { tcp, udp } th dport 53 meta skuid != { 0, 61000 } reject\n"));
        let output_chain = &r[r.find("chain output").unwrap()..r.find("chain run").unwrap()];
        assert!(
            output_chain.find("skuid != { 0, 61000 } reject").unwrap()
                < output_chain.find("jump run").unwrap()
        );
    }

    #[test]
    fn star_allows_public_only_on_its_ports() {
        let mut p = plan();
        p.any_public = vec![Some(443)];
        let r = ruleset(&p);
        let never = r.find("ip daddr @never4 goto deny").unwrap();
        let star = r.find("    th dport 443 goto allow").unwrap();
        assert!(never < star);
        assert!(!r.contains("\n    goto allow\n"));
        p.any_public = vec![None];
        assert!(ruleset(&p).contains("\n    goto allow\n    goto deny\n"));
    }

    #[test]
    fn learn_batch_adds_ports_and_denials() {
        let b = learn_batch(
            "band_x",
            &[
                Dest::addr("93.184.216.34".parse().unwrap(), Some(443)),
                Dest::addr("2606:2800::1".parse().unwrap(), None),
            ],
            &[Dest::addr("93.184.216.34".parse().unwrap(), Some(25))],
        );
        assert_eq!(
            b,
            "add element inet band_x dnsdeny4 { 93.184.216.34 . 25 }\n\
             add element inet band_x dns4 { 93.184.216.34 . 443 }\n\
             add element inet band_x dns6any { 2606:2800::1 }\n"
        );
    }

    #[test]
    fn parses_dynamic_set_listings() {
        let text = r#"{"nftables": [{"metainfo": {"version": "1.0.6"}}, {"set": {"family": "inet", "name": "seen4", "table": "band_x", "type": ["ipv4_addr", "inet_proto", "inet_service"], "handle": 5, "size": 4096, "flags": ["dynamic"], "elem": [{"concat": ["10.200.1.2", "tcp", 80]}, {"concat": ["10.200.1.2", 17, 53]}]}}]}"#;
        let flows = parse_set_json(text).unwrap();
        assert_eq!(
            flows,
            vec![
                Flow {
                    ip: "10.200.1.2".parse().unwrap(),
                    proto: "tcp".into(),
                    port: 80
                },
                Flow {
                    ip: "10.200.1.2".parse().unwrap(),
                    proto: "udp".into(),
                    port: 53
                },
            ]
        );
        assert_eq!(
            parse_set_json(r#"{"nftables": [{"set": {"name": "seen4"}}]}"#).unwrap(),
            vec![]
        );
        assert!(parse_set_json("not json").is_err());
    }

    #[test]
    fn one_table_listing_gives_every_set() {
        // As `nft -j list table inet <t>` prints it (nftables 1.0.6).
        let text = r#"{"nftables": [{"metainfo": {"version": "1.0.6", "release_name": "Lester Gooch #5", "json_schema_version": 1}}, {"table": {"family": "inet", "name": "band_x", "handle": 1}}, {"set": {"family": "inet", "name": "seen4", "table": "band_x", "type": ["ipv4_addr", "inet_proto", "inet_service"], "handle": 1, "size": 4096, "elem": [{"concat": ["1.2.3.4", "tcp", 80]}]}}, {"set": {"family": "inet", "name": "denied6", "table": "band_x", "type": ["ipv6_addr", "inet_proto", "inet_service"], "handle": 2, "size": 4096, "elem": [{"concat": ["2001:db8::1", 17, 53]}, {"concat": ["2001:db8::1", "udp", 53]}]}}, {"set": {"family": "inet", "name": "dns4", "table": "band_x", "type": ["ipv4_addr", "inet_service"], "handle": 3}}, {"chain": {"family": "inet", "table": "band_x", "name": "run", "handle": 4}}]}"#;
        let sets = parse_sets_json(text).unwrap();
        let flow = |ip: &str, proto: &str, port| Flow {
            ip: ip.parse().unwrap(),
            proto: proto.into(),
            port,
        };
        assert_eq!(
            sets,
            BTreeMap::from([
                ("denied6".to_string(), vec![flow("2001:db8::1", "udp", 53)]),
                ("dns4".to_string(), vec![]),
                ("seen4".to_string(), vec![flow("1.2.3.4", "tcp", 80)]),
            ])
        );
    }

    #[test]
    fn table_names() {
        assert!(is_band_table("band_0123abcd"));
        assert!(!is_band_table("band_"));
        assert!(!is_band_table("filter"));
        assert!(!is_band_table("band_x;y"));
        let t = r#"{"nftables": [{"table": {"family": "inet", "name": "band_ab"}}, {"table": {"family": "ip", "name": "nat"}}]}"#;
        assert_eq!(parse_tables_json(t).unwrap(), vec!["band_ab".to_string()]);
    }
}
