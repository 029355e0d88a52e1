//! Setup + teardown of the network layer (nftables table + DNS stub) per run, with 1, 10 and 100
//! allowed names, against a baseline measured in the same process: one `nft` batch adding an
//! empty table and one deleting it (the least any nftables-based layer can cost).
//!
//! `cargo bench -p band-server --bench net` (as root; otherwise it says why and exits 0).

// A benchmark harness: a broken fixture or a failed measurement is a panic, as in tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use band::policy::net::NetMatcher;
use band_server::layers::net::nft::Nft;
use band_server::layers::net::{self, NetLayer};

const ITERATIONS: usize = 40;
/// A stub slot outside the uid pool (0..64), so a live run never holds its address.
const BENCH_SLOT: u32 = 249;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

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
    (percentile(&v, 0.5), percentile(&v, 0.95))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    if band_server::sys::euid() != 0 {
        println!("net bench: skipped (needs root: it builds real nftables tables)");
        return;
    }
    let nft = Nft::new(Path::new(band_server::config::DEFAULT_NFT));
    let (base50, base95) = measure(|| {
        nft.apply("table inet band_benchbase { }\n")
            .unwrap_or_else(|e| panic!("{e}"));
        nft.delete_table("band_benchbase")
            .unwrap_or_else(|e| panic!("{e}"));
    });
    println!("| allowed names | p50 ms | p95 ms | p50 ratio vs bare `nft` add+delete |");
    println!("|---|---|---|---|");
    println!(
        "| baseline: empty table add + delete | {:.2} | {:.2} | 1.0× |",
        ms(base50),
        ms(base95)
    );
    for n in [1usize, 10, 100] {
        let allow: Vec<String> = (0..n).map(|i| format!("api{i}.example.test:443")).collect();
        let matcher = NetMatcher::new(&allow, &[]).unwrap_or_else(|e| panic!("{e:?}"));
        let mut k = 0u32;
        let (p50, p95) = measure(|| {
            k += 1;
            // The plan (with the host's addresses it needs), then the layer: what a run pays.
            let plan = net::plan_run(
                &format!("bench{k:08x}"),
                65_000,
                BENCH_SLOT,
                &matcher,
                &net::own_addresses(Path::new("/proc")),
                &["127.0.0.1:9".parse().unwrap_or_else(|e| panic!("{e}"))],
            )
            .unwrap_or_else(|e| panic!("{e}"));
            let mut layer =
                NetLayer::setup(&plan, &nft, Arc::new(|_| {})).unwrap_or_else(|e| panic!("{e}"));
            layer.teardown().unwrap_or_else(|e| panic!("{e}"));
        });
        println!(
            "| {n} | {:.2} | {:.2} | {:.1}× |",
            ms(p50),
            ms(p95),
            p50.as_secs_f64() / base50.as_secs_f64()
        );
    }
}
