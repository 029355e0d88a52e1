//! Setup + teardown of the network layer (nftables table, the run's own network namespace with
//! its slirp4netns relay, DNS stub inside it) per run, with 1, 10 and 100 allowed names, against
//! a baseline measured in the same process: one `nft` process adding an empty table and one
//! deleting it (the least a layer driving the `nft` program can cost; the layer itself speaks to
//! libnftables in process where the host has it). Two more rows, 1 name, same
//! process: the layer as it was before the namespace (table + stub on a host loopback address),
//! and the namespace + relay alone (what the namespace adds), its setup and teardown apart.
//!
//! `cargo bench -p band-server --bench net` (as root; otherwise it says why and exits 0).

// A benchmark harness: a broken fixture or a failed measurement is a panic, as in tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use band::policy::net::NetMatcher;
use band_server::layers::net::dns::{Resolver, Stub, UdpUpstream};
use band_server::layers::net::netns::RunNetns;
use band_server::layers::net::nft::Nft;
use band_server::layers::net::{self, NetLayer};
use band_test::percentile;

const ITERATIONS: usize = 40;
/// A stub slot outside the uid pool (0..64), so a live run never holds its address.
const BENCH_SLOT: u32 = 249;
/// The uid and gid the relay runs as (no such user is needed).
const BENCH_UID: u32 = 65_000;

fn measure(mut f: impl FnMut()) -> (Duration, Duration) {
    f(); // warm-up
    let mut v: Vec<Duration> = (0..ITERATIONS)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    v.sort();
    (percentile(&v, 50), percentile(&v, 95))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    if band_server::sys::euid() != 0 {
        println!("net bench: skipped (needs root: it builds real nftables tables)");
        return;
    }
    // The layer speaks to nftables as band-server does (in process, through libnftables, where
    // the host has it); the baseline is the `nft` program, two processes.
    let nft = Nft::new(Path::new(band_server::config::DEFAULT_NFT));
    let bare = Nft::program(Path::new(band_server::config::DEFAULT_NFT));
    let (base50, base95) = measure(|| {
        bare.apply("table inet band_benchbase { }\n")
            .unwrap_or_else(|e| panic!("{e}"));
        bare.delete_table("band_benchbase")
            .unwrap_or_else(|e| panic!("{e}"));
    });
    println!("| allowed names | p50 ms | p95 ms | p50 ratio vs bare `nft` add+delete |");
    println!("|---|---|---|---|");
    println!(
        "| baseline: empty table add + delete | {:.2} | {:.2} | 1.0× |",
        ms(base50),
        ms(base95)
    );
    let relay = Path::new(band_server::config::DEFAULT_SLIRP4NETNS);
    let own = net::own_addresses(Path::new("/proc"));
    let upstream = ["127.0.0.1:9".parse().unwrap_or_else(|e| panic!("{e}"))];
    let plan = |k: u32, matcher: &NetMatcher| {
        net::plan_run(
            &format!("bench{k:08x}"),
            BENCH_UID,
            BENCH_UID,
            BENCH_SLOT,
            matcher,
            &own,
            &upstream,
        )
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let mut rows = Vec::new();
    for n in [1usize, 10, 100] {
        let allow: Vec<String> = (0..n).map(|i| format!("api{i}.example.test:443")).collect();
        let matcher = NetMatcher::new(&allow, &[]).unwrap_or_else(|e| panic!("{e:?}"));
        let mut k = 0u32;
        let (p50, p95) = measure(|| {
            k += 1;
            // The plan (with the host's addresses it needs), then the layer: what a run pays.
            let plan = plan(k, &matcher);
            let mut layer = NetLayer::setup(&plan, &nft, relay, Arc::new(|_| {}))
                .unwrap_or_else(|e| panic!("{e}"));
            layer.teardown().unwrap_or_else(|e| panic!("{e}"));
        });
        rows.push((format!("{n}"), p50, p95));
    }
    // Before the run had its own namespace: the table, and the stub on a host loopback address.
    let matcher = NetMatcher::new(&["api0.example.test:443".to_string()], &[])
        .unwrap_or_else(|e| panic!("{e:?}"));
    let mut k = 1000u32;
    let (p50, p95) = measure(|| {
        k += 1;
        let plan = plan(k, &matcher);
        nft.apply(&plan.ruleset).unwrap_or_else(|e| panic!("{e}"));
        let resolver = Resolver {
            matcher: plan.matcher.clone(),
            own: plan.own.clone(),
            upstream: Box::new(UdpUpstream {
                servers: plan.upstream.clone(),
                timeout: Duration::from_secs(3),
            }),
            proxy: None,
            learn: Box::new(|_: &[_], _: &[_]| Ok(())),
        };
        let mut stub = Stub::start(plan.stub_addr, resolver, Arc::new(|_: &_| {}))
            .unwrap_or_else(|e| panic!("{e}"));
        stub.stop();
        nft.delete_table(&plan.table.table)
            .unwrap_or_else(|e| panic!("{e}"));
    });
    rows.push((
        "1, before: table + stub on the host (no namespace)".into(),
        p50,
        p95,
    ));
    // The namespace with its relay alone, its setup and its teardown timed apart.
    let (mut up, mut down) = (Vec::new(), Vec::new());
    for i in 0..=ITERATIONS {
        let t = Instant::now();
        let ns = RunNetns::start(relay, BENCH_UID, BENCH_UID).unwrap_or_else(|e| panic!("{e}"));
        let setup = t.elapsed();
        let t = Instant::now();
        drop(ns);
        if i > 0 {
            // The first is a warm-up, as in `measure`.
            up.push(setup);
            down.push(t.elapsed());
        }
    }
    for (what, mut v) in [
        ("namespace + slirp4netns: setup alone", up),
        ("namespace + slirp4netns: teardown alone", down),
    ] {
        v.sort();
        rows.push((what.into(), percentile(&v, 50), percentile(&v, 95)));
    }
    for (what, p50, p95) in rows {
        println!(
            "| {what} | {:.2} | {:.2} | {:.1}× |",
            ms(p50),
            ms(p95),
            p50.as_secs_f64() / base50.as_secs_f64()
        );
    }
}
