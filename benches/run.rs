//! `cargo bench --bench run`: what a sandboxed run costs, as ratios to a bare bubblewrap of the
//! same job measured in the same loop. Needs root and bubblewrap (like `band run` on the host
//! target); otherwise it says why and exits 0. (Under `cargo test` it is a smoke run of 2
//! iterations of the no-op table only.)
//!
//! Every table runs its entries interleaved (`BAND_BENCH_ITERS` rounds, default 30, after one
//! warm-up round; each round starts at another entry), so a slow phase of a shared machine falls
//! on all of them. The CPU column is the machine's busy time from a run's start until every
//! process it started has ended (`/proc/stat`, all CPUs): it counts the sandboxed processes and
//! the kernel's work for the run. The children's CPU time of the bench (it is the child
//! subreaper) did not: a sandbox's pid-namespace init, killed as bubblewrap's outer process
//! exits, takes the script's time with it, and the python job's own 20 ms were missing.
//!
//! Tables (the goals of issue 17 in brackets):
//! - **no-op** (`exit 0`) [band ≤ 2.0× bwrap]: bare, bwrap, the peers, band-server alone, `band
//!   run` with `warm = false` (a band-server of its own per run), `band run` as by default, on
//!   the host's warm band-server (the warm-up round starts the server and its first spare
//!   sandbox, the measured rounds use them; stopped at the end), `band exec` with `warm = false`.
//!   The goals are the default's rows; `warm = false`'s are printed beside them;
//! - **python job** (`sum(range(10**6))`) [≤ 1.2×];
//! - **50 processes** (`seq 50` and 50 `/bin/true`, counted: the job fails unless all ran)
//!   [≤ 1.3×];
//! - **a gated command** [≤ 1.3× the same command in bare bwrap]: the same script file, exec'd
//!   by bubblewrap and by band (default: warm server), with 200 `/bin/true`s (absolute path, no
//!   `PATH` search) and with none; one command's cost is the difference of the two p50s over
//!   200, so what a run costs around its script is out of it;
//! - **networked fetch** of one page from one allowed host [≤ 1.5× bwrap with network]: the host
//!   is a network namespace the bench makes (band-test's lab: a veth, and `netlab.py` serving DNS
//!   and HTTP there); bubblewrap shares the host network with a resolv.conf naming the lab's DNS;
//!   band's `dns_upstream` is the lab's DNS. No packet leaves the machine (checked by route).
//!   By default (the warm server of the lab's config, which keeps no spare for `allow.net`) and
//!   with `warm = false`; and the same fetch through the run's egress proxy (an HTTP rule,
//!   `GET http://api.bench.test/**`) [≤ 1.3× the direct fetch];
//! - **no-op with 1,000 idle host processes** [≤ 2.0×], by default and with `warm = false`;
//! - **two skills in turn** [the no-op ≤ 2.0×, the python job ≤ 1.2×, as one skill's]: the no-op
//!   and the python job run one after the other, by default, each against its bare bwrap;
//! - **first run of a fresh state directory** [≤ 150 ms]: band-server alone, a new state
//!   directory each time (safe next to other servers: uids are locked host-wide, cgroups are
//!   marked per state directory);
//! - **a no-op started in a folder of 100,000 files the band does not admit** [the same as in an
//!   empty folder].
//!
//! - **a no-op under a site policy of 100 rules** [≤ 1.02× the same without]: both with
//!   `warm = false`, so each run's band-server reads and parses the policy.
//!
//! - **many runs at once** (issue 42) [at 16 callers: no-op ≤ 1.5× bwrap's batch time, python
//!   ≤ 1.3×; band's runs/s never falls as callers go from 1 to 16]: 48 runs of the no-op and of
//!   the python job from 1, 4 and 16 concurrent callers, best of 3 batches, for bwrap, every peer
//!   the bench runs and band run (the default: warm server); runs/s, CPU per run (the machine's
//!   busy time over the batch / 48) and band-server's resident memory (the most, summed over its
//!   processes, sampled during the batch) per concurrent run.
//!
//! - **the platform's path** (issue 42): the no-op and the python job as `band run SKILL --target
//!   sandboxd://`, 48 runs from 1 and 16 callers, on a band-sandboxd with its warm band-server
//!   (the default) and with `BAND_WARM=0` (a `band-server run` per run), against bare bwrap.
//!
//! `BAND_BENCH_ONLY=loop,fresh` runs only those tables (names: noop, py, loop, gate, fetch, idle,
//! turns, fresh, files, site, load, platform), to re-measure what a change touched.
//!
//! Peers (nsjail, firejail, srt, codex) come from `common::peers`: installed from their
//! registries into `target/bench-peers` when missing (`BAND_BENCH_PEERS=0`: none), each skipped
//! with a printed line when it cannot run here.
//!
//! band-server and its helpers are taken from next to the `band` binary (target/release), built
//! first with `cargo build --release -p band-server` so they are never stale, and run, with
//! `band`, from copies made as `cargo install` makes them (`install`: a freshly linked program
//! runs slower than the installed one for a while). State goes to
//! `$BAND_SERVER_STATE_DIR` when set (set it to the test suite's `/run/band-test` when tests run
//! at the same time), else band-server's default. `band` gets a throwaway ledger and no config.

// A benchmark harness: a broken fixture or a failed measurement is a panic, as in tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;

use band::proto::{self, FileEntry, Message, RunRequest, RunResult, Status};
use common::peers::Peer;
use common::{Stats, env_usize, ms, ratio};

const BWRAP: &str = "/usr/bin/bwrap";
/// band-server's state directory override, and the one the test suite uses.
const STATE_DIR_ENV: &str = "BAND_SERVER_STATE_DIR";
const CONFIG_ENV: &str = "BAND_SERVER_CONFIG";
const TEST_STATE_DIR: &str = "/run/band-test";

const PY: &str = "sum(range(10**6))";
/// The 50 processes, failing unless all 51 ran: a `seq` that fails (a broken gate, a sandbox
/// that refuses it) would otherwise leave an empty loop that succeeds, and look fast.
const LOOP: &str =
    "n=0; for i in $(seq 50); do /bin/true || exit 1; n=$((n+1)); done; [ \"$n\" -eq 50 ]";

/// One job: a skill of one script, and the same work as a command for bwrap and the peers.
struct Job {
    name: &'static str,
    /// The skill's BAND.md policy lines (after `description`).
    policy: &'static str,
    script: String,
    /// The job as a command line outside band (absolute program paths).
    argv: Vec<String>,
}

fn jobs(fetch_url: &str) -> Vec<Job> {
    vec![
        Job {
            name: "noop",
            policy: "",
            script: "#!/bin/sh\nexit 0\n".into(),
            argv: vec!["/bin/sh".into(), "-c".into(), "exit 0".into()],
        },
        Job {
            name: "py",
            policy: "allow:\n  cli: [\"python3 *\"]\n",
            script: format!("#!/usr/bin/python3\n{PY}\n"),
            argv: vec!["/usr/bin/python3".into(), "-c".into(), PY.into()],
        },
        Job {
            name: "loop",
            policy: "allow:\n  cli: [\"seq *\", \"true\"]\n",
            script: format!("#!/bin/sh\n{LOOP}\n"),
            argv: vec!["/bin/sh".into(), "-c".into(), LOOP.into()],
        },
        Job {
            name: "fetch",
            policy: "allow:\n  cli: [\"python3 *\"]\n  net: [\"api.bench.test:80\"]\n",
            script: format!(
                "#!/usr/bin/python3\nimport urllib.request\nurllib.request.urlopen(\"{fetch_url}\", timeout=10).read()\n"
            ),
            argv: vec![
                "/usr/bin/python3".into(),
                "-c".into(),
                format!(
                    "import urllib.request\nurllib.request.urlopen(\"{fetch_url}\", timeout=10).read()"
                ),
            ],
        },
        // The same fetch through the run's egress proxy: an HTTP rule puts the host behind it.
        Job {
            name: "fetch-proxy",
            policy: "allow:\n  cli: [\"python3 *\"]\n  net: [\"GET http://api.bench.test/**\"]\n",
            script: format!(
                "#!/usr/bin/python3\nimport urllib.request\nurllib.request.urlopen(\"{fetch_url}\", timeout=10).read()\n"
            ),
            argv: Vec::new(),
        },
    ]
}

/// Whether the table `name` runs: `BAND_BENCH_ONLY` (comma-separated: noop, py, loop, gate, fetch,
/// idle, turns, fresh, files, site, load) picks some, to re-measure what a change touched; unset,
/// all run.
fn wanted(name: &str) -> bool {
    std::env::var("BAND_BENCH_ONLY")
        .map(|only| only.split(',').any(|n| n.trim() == name))
        .unwrap_or(true)
}

fn why_not() -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some(
            "it needs root (band-server builds the sandbox as root); run it as root".into(),
        );
    }
    if !Path::new(BWRAP).is_file() {
        return Some(format!(
            "bubblewrap is not installed ({BWRAP}): apt-get install bubblewrap"
        ));
    }
    None
}

/// What every `band` and `band-server` run of the bench shares.
struct Env {
    band: PathBuf,
    server: PathBuf,
    state_dir: Option<OsString>,
    tmp: PathBuf,
    skills: PathBuf,
    empty: PathBuf,
}

impl Env {
    fn band(&self, args: &[&str], workspace: &Path, config: Option<&Path>) -> Command {
        self.band_with(args, workspace, config, &self.tmp.join("cold.toml"))
    }

    /// [`Env::band`] with the user config `user_config` (`BAND_CONFIG`).
    fn band_with(
        &self,
        args: &[&str],
        workspace: &Path,
        config: Option<&Path>,
        user_config: &Path,
    ) -> Command {
        let mut c = Command::new(&self.band);
        c.args(args)
            .arg("--workspace")
            .arg(workspace)
            .env(proto::env::SERVER, &self.server)
            // The bench's runs go to a throwaway ledger, not the user's.
            .env(proto::env::DATA_DIR, self.tmp.join("data"))
            .env("BAND_CONFIG", user_config)
            // The config files above decide.
            .env_remove(proto::env::WARM)
            .envs(self.state_dir.iter().map(|d| (STATE_DIR_ENV, d)))
            .envs(config.map(|c| (CONFIG_ENV, c)))
            .stdin(Stdio::null());
        c
    }

    /// `band run <job>/<job> --json` with `warm = false` (a band-server of its own per run),
    /// asserting it succeeded.
    fn band_run(&self, job: &str, workspace: &Path, config: Option<&Path>) {
        self.band_run_as(job, workspace, config, &self.tmp.join("cold.toml"));
    }

    /// `band run` as by default, on the warm band-server (`warm = true`): the first run starts
    /// it, the next ones are served by it, by a spare sandbox of the job once it has served one.
    fn band_run_warm(&self, job: &str, workspace: &Path) {
        self.band_run_warm_with(job, workspace, None);
    }

    /// [`Env::band_run_warm`] with a server config (the warm server is the one of that config).
    fn band_run_warm_with(&self, job: &str, workspace: &Path, config: Option<&Path>) {
        self.band_run_as(job, workspace, config, &self.tmp.join("warm.toml"));
    }

    fn band_run_as(&self, job: &str, workspace: &Path, config: Option<&Path>, user_config: &Path) {
        let skill = self.skills.join(job).display().to_string();
        let out = self
            .band_with(
                &["run", &format!("{skill}/{job}"), "--json"],
                workspace,
                config,
                user_config,
            )
            .output()
            .expect("band run");
        assert!(
            out.status.success(),
            "band run {job} failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn main() {
    common::without_cargo_library_path();
    if let Some(why) = why_not() {
        println!("band run bench skipped: {why}");
        return;
    }
    common::set_subreaper();
    let full = common::bench_mode();
    let iters = env_usize("BAND_BENCH_ITERS", if full { 30 } else { 2 }).max(2);
    let band_bin = PathBuf::from(env!("CARGO_BIN_EXE_band"));
    // Under `cargo test` (a smoke run), band-server is the one the workspace build put next to
    // band; cargo must not be started from inside cargo test.
    let server = if full {
        build_server(&band_bin)
    } else {
        band_bin.with_file_name("band-server")
    };
    if !server.is_file() {
        println!(
            "band run bench skipped: {} is not built (cargo build --workspace)",
            server.display()
        );
        return;
    }
    if full {
        refresh_program_list(&server);
    }
    // The smoke run shares the test suite's state directory (one uid pool per machine).
    let state_dir: Option<OsString> =
        std::env::var_os(STATE_DIR_ENV).or_else(|| (!full).then(|| TEST_STATE_DIR.into()));

    let tmp = tempfile::Builder::new()
        .prefix("band-bench-run")
        .tempdir()
        .expect("temp dir");
    // Measured as installed (full runs): see `install`.
    let (band_bin, server) = if full {
        install(&band_bin, &tmp.path().join("bin"))
    } else {
        (band_bin, server)
    };
    let env = Env {
        band: band_bin,
        server,
        state_dir,
        tmp: tmp.path().to_path_buf(),
        skills: tmp.path().join("skills"),
        empty: tmp.path().join("workspace"),
    };
    fs_err::create_dir(&env.empty).expect("mkdir workspace");
    fs_err::write(env.tmp.join("warm.toml"), "warm = true\n").expect("write warm.toml");
    fs_err::write(env.tmp.join("cold.toml"), "warm = false\n").expect("write cold.toml");
    // A lab for the networked job (full runs only): its address names the fetch URL.
    let lab = if full && wanted("fetch") {
        Lab::new()
    } else {
        None
    };
    let jobs = jobs("http://api.bench.test/");
    for job in &jobs {
        write_skill(&env.skills.join(job.name), job);
    }
    let band_file = env.tmp.join("exec.band.md");
    fs_err::write(
        &band_file,
        "---\nband: bench-exec\ndescription: What the bench's band exec may run.\nallow:\n  cli: [\"sh *\", \"seq *\", \"true\", \"python3 *\"]\n---\n",
    )
    .expect("write band file");

    let peers = if full && std::env::var("BAND_BENCH_PEERS").as_deref() != Ok("0") {
        let dir = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
            .join("bench-peers");
        common::peers::peers(&dir, true)
    } else {
        Vec::new()
    };

    println!(
        "band run bench: {iters} interleaved rounds per table; ratios are p50 / p50 of bare bwrap in the same table"
    );
    if !full {
        println!(
            "(a smoke run under cargo test: a debug build, so the figures mean nothing; use cargo bench)"
        );
    }
    let mut goals: Vec<(String, String, String)> = Vec::new();

    // 1–3: the no-network jobs, each with every peer.
    for job in jobs.iter().filter(|j| !j.name.starts_with("fetch")) {
        if (!full && job.name != "noop") || !wanted(job.name) {
            continue;
        }
        let (band_ratio, warm_ratio) = job_table(&env, job, &peers, iters, &band_file);
        if full && job.name == "noop" {
            block_cpu(&env, job, iters);
        }
        let goal = match job.name {
            "noop" => 2.0,
            "py" => 1.2,
            _ => 1.3,
        };
        goals.push(goal_row(job_title(job.name), warm_ratio, goal));
        goals.push(goal_row(
            format!("{}, `warm = false`", job_title(job.name)),
            band_ratio,
            goal,
        ));
    }
    if !full {
        stop_warm_server();
        return;
    }

    // 3b: one gated command, apart from what a run costs around it.
    if wanted("gate") {
        goals.push(goal_row(
            "a gated command (vs the same command in bare bwrap)".into(),
            gate_table(&env, iters),
            1.3,
        ));
    }

    // 4: the networked fetch.
    match &lab {
        _ if !wanted("fetch") => {}
        Some(lab) => {
            let job = jobs.iter().find(|j| j.name == "fetch").expect("fetch job");
            let (cold, warm, proxied) = fetch_table(&env, job, lab, iters);
            goals.push(goal_row(
                "networked fetch (vs bwrap with network)".into(),
                warm,
                1.5,
            ));
            goals.push(goal_row(
                "fetch through the egress proxy (vs the direct fetch)".into(),
                proxied,
                1.3,
            ));
            goals.push(goal_row(
                "networked fetch, `warm = false`".into(),
                cold,
                1.5,
            ));
        }
        None => println!("\nnetworked fetch skipped: the lab could not be set up"),
    }

    // 5: no-op with 1,000 idle processes on the host.
    if wanted("idle") {
        let idle: Vec<Child> = (0..1000)
            .map(|_| {
                Command::new("sleep")
                    .arg("3600")
                    .stdin(Stdio::null())
                    .spawn()
                    .expect("sleep")
            })
            .collect();
        let noop = &jobs[0];
        let mut bw = || run_ok(&mut bwrap_cmd(&noop.argv, None), "bwrap");
        let mut br = || env.band_run("noop", &env.empty, None);
        let mut warm = || env.band_run_warm("noop", &env.empty);
        let s = common::interleaved(iters, &mut [&mut bw, &mut warm, &mut br]);
        print_table(
            "no-op with 1,000 idle processes on the host",
            &[
                ("bare bwrap", s[0]),
                ("band run (the default: warm server)", s[1]),
                ("band run, `warm = false`", s[2]),
            ],
            s[0],
        );
        goals.push(goal_row(
            "no-op, 1,000 idle host processes".into(),
            ratio(s[1].p50, s[0].p50),
            2.0,
        ));
        goals.push(goal_row(
            "no-op, 1,000 idle host processes, `warm = false`".into(),
            ratio(s[2].p50, s[0].p50),
            2.0,
        ));
        for mut c in idle {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    // 5b: two skills in turn, as an agent calls two tools: each band run follows the other
    // skill's (the warm server keeps a spare of each shape).
    if wanted("turns") {
        let (noop, py) = (&jobs[0], &jobs[1]);
        let mut bw_noop = || run_ok(&mut bwrap_cmd(&noop.argv, None), "bwrap");
        let mut bw_py = || run_ok(&mut bwrap_cmd(&py.argv, None), "bwrap");
        let mut band_noop = || env.band_run_warm("noop", &env.empty);
        let mut band_py = || env.band_run_warm("py", &env.empty);
        let s = common::interleaved(
            iters,
            &mut [&mut bw_noop, &mut bw_py, &mut band_noop, &mut band_py],
        );
        println!("\n### two skills in turn (the no-op and the python job, each after the other)\n");
        println!("| tool | job | p50 | p95 | p50 / bare bwrap's | CPU per run |");
        println!("|---|---|---:|---:|---:|---:|");
        for (tool, job, st, bwrap) in [
            ("bare bwrap", "no-op", s[0], s[0]),
            ("bare bwrap", "python job", s[1], s[1]),
            ("band run (the default: warm server)", "no-op", s[2], s[0]),
            (
                "band run (the default: warm server)",
                "python job",
                s[3],
                s[1],
            ),
        ] {
            println!(
                "| {tool} | {job} | {} | {} | {:.2}× | {} |",
                ms(st.p50),
                ms(st.p95),
                ratio(st.p50, bwrap.p50),
                st.cpu_text()
            );
        }
        goals.push(goal_row(
            "no-op, two skills in turn".into(),
            ratio(s[2].p50, s[0].p50),
            2.0,
        ));
        goals.push(goal_row(
            "python job, two skills in turn".into(),
            ratio(s[3].p50, s[1].p50),
            1.2,
        ));
    }

    // 6: the first run of a fresh state directory (band-server alone).
    if wanted("fresh") {
        let request = build_request(&env.skills.join("noop"), "noop");
        let fresh_iters = env_usize("BAND_BENCH_FRESH_ITERS", 5).max(1);
        let mut times = Vec::new();
        for i in 0..fresh_iters {
            let dir = PathBuf::from(format!("/run/band-bench-fresh-{}-{i}", std::process::id()));
            let t = Instant::now();
            let r = serve_once(&env.server, &request, Some(dir.as_os_str()), None);
            times.push(t.elapsed());
            common::reap_orphans();
            assert_eq!(r.status, Status::Ok, "fresh band-server run failed: {r:?}");
            // The state directory's program cache is a tmpfs of its own: unmounted first, or
            // the directory stays behind, mounted.
            let _ = Command::new("umount").arg(dir.join("exec")).status();
            let _ = fs_err::remove_dir_all(&dir);
        }
        let s = Stats::of(times);
        println!(
            "\n### first run of a fresh state directory (band-server alone, {fresh_iters} runs)\n\np50 {}, p95 {}",
            ms(s.p50),
            ms(s.p95)
        );
        goals.push((
            "first run of a fresh state dir".into(),
            ms(s.p50),
            format!(
                "≤ 150 ms: {}",
                if s.p50 <= Duration::from_millis(150) {
                    "met"
                } else {
                    "MISSED"
                }
            ),
        ));
    }

    // 7: a no-op started in a folder of 100,000 files the band does not admit.
    if wanted("files") {
        let big = env.tmp.join("big");
        for d in 0..100 {
            let dir = big.join(format!("d{d:03}"));
            fs_err::create_dir_all(&dir).expect("mkdir");
            for f in 0..1000 {
                fs_err::write(dir.join(format!("f{f:04}.txt")), "").expect("write");
            }
        }
        let noop = &jobs[0];
        let mut bw = || run_ok(&mut bwrap_cmd(&noop.argv, None), "bwrap");
        let mut empty = || env.band_run("noop", &env.empty, None);
        let mut full_dir = || env.band_run("noop", &big, None);
        let s = common::interleaved(iters, &mut [&mut bw, &mut empty, &mut full_dir]);
        print_table(
            "no-op started in an empty folder and in one of 100,000 files it does not admit",
            &[
                ("bare bwrap", s[0]),
                ("band run, empty folder", s[1]),
                ("band run, 100,000 files", s[2]),
            ],
            s[0],
        );
        let r = ratio(s[2].p50, s[1].p50);
        goals.push((
            "no-op in 100,000 files / in an empty folder".into(),
            format!("{r:.2}×"),
            format!("the same: {}", if r <= 1.1 { "met" } else { "MISSED" }),
        ));
        let _ = fs_err::remove_dir_all(&big);
    }

    // 8: a no-op under a site policy of 100 rules (issue 40), against the same without one.
    if wanted("site") {
        let site = env.tmp.join("site.md");
        let mut text = String::from("---\ndeny:\n");
        for (cat, n) in [("cli", 40), ("net", 30), ("read", 15), ("write", 15)] {
            text.push_str(&format!("  {cat}:\n"));
            for i in 0..n {
                let rule = match cat {
                    "cli" => format!("bench-tool-{i} *"),
                    "net" => format!("*.bench-denied-{i}.test"),
                    _ => format!("bench-denied-{i}/**"),
                };
                text.push_str(&format!("    - \"{rule}\"\n"));
            }
        }
        text.push_str("---\n");
        fs_err::write(&site, text).expect("write");
        let with_site = env.tmp.join("server-site.toml");
        fs_err::write(
            &with_site,
            format!("site_policy = \"{}\"\n", site.display()),
        )
        .expect("write");
        let without = env.tmp.join("server-nosite.toml");
        fs_err::write(
            &without,
            format!("site_policy = \"{}\"\n", env.tmp.join("none.md").display()),
        )
        .expect("write");
        let noop = &jobs[0];
        let mut bw = || run_ok(&mut bwrap_cmd(&noop.argv, None), "bwrap");
        // `warm = false`: each run's band-server reads and parses the site policy, the most a
        // site policy can cost a run (a warm server parses it once).
        let mut plain = || env.band_run("noop", &env.empty, Some(&without));
        let mut sited = || env.band_run("noop", &env.empty, Some(&with_site));
        let s = common::interleaved(iters, &mut [&mut bw, &mut plain, &mut sited]);
        print_table(
            "no-op without and with a site policy of 100 rules (`warm = false`: parsed per run)",
            &[
                ("bare bwrap", s[0]),
                ("band run, `warm = false`, no site policy", s[1]),
                ("band run, `warm = false`, site policy of 100 rules", s[2]),
            ],
            s[0],
        );
        let r = ratio(s[2].p50, s[1].p50);
        goals.push((
            "no-op under a 100-rule site policy / without".into(),
            format!("{r:.3}×"),
            format!("≤ 1.02×: {}", if r <= 1.02 { "met" } else { "MISSED" }),
        ));
    }

    // 9: many runs at once (issue 42): 48 runs from 1, 4 and 16 concurrent callers.
    if full && wanted("load") {
        for job in jobs.iter().filter(|j| j.name == "noop" || j.name == "py") {
            goals.extend(load_table(&env, job, &peers));
        }
    }

    // 10: the platform's path: the same runs through band-sandboxd.
    if full && wanted("platform") {
        for job in jobs.iter().filter(|j| j.name == "noop" || j.name == "py") {
            goals.extend(platform_table(&env, job));
        }
    }

    stop_warm_server();

    println!("\n### goals (issues 17 and 42)\n");
    println!("| row | measured | goal |");
    println!("|---|---:|---|");
    for (row, got, goal) in &goals {
        println!("| {row} | {got} | {goal} |");
    }
    println!("\nmachine: {}", common::machine());
    drop(lab);
}

fn job_title(name: &str) -> String {
    match name {
        "noop" => "no-op".into(),
        "py" => "python job".into(),
        "loop" => "50 processes".into(),
        other => other.into(),
    }
}

fn goal_row(row: String, r: f64, goal: f64) -> (String, String, String) {
    (
        row,
        format!("{r:.2}×"),
        format!("≤ {goal:.1}×: {}", if r <= goal { "met" } else { "MISSED" }),
    )
}

fn run_ok(cmd: &mut Command, what: &str) {
    let out = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One table: bare, bwrap, the peers, band-server alone (no-op only), band run with `warm =
/// false`, band run as by default (on the warm server), band exec with `warm = false`. Returns
/// the ratios to bwrap of band run with `warm = false` and on the warm server.
fn job_table(env: &Env, job: &Job, peers: &[Peer], iters: usize, band_file: &Path) -> (f64, f64) {
    let mut names: Vec<String> = Vec::new();
    let mut fns: Vec<Box<dyn FnMut() + '_>> = Vec::new();
    names.push("bare (no sandbox)".into());
    fns.push(Box::new(|| {
        run_ok(Command::new(&job.argv[0]).args(&job.argv[1..]), "bare")
    }));
    names.push("bare bwrap".into());
    fns.push(Box::new(|| {
        run_ok(&mut bwrap_cmd(&job.argv, None), "bwrap")
    }));
    for p in peers {
        names.push(p.name.to_string());
        fns.push(Box::new(move || {
            p.run(&job.argv)
                .unwrap_or_else(|e| panic!("{} failed: {e}", p.name))
        }));
    }
    if job.name == "noop" {
        let request = build_request(&env.skills.join("noop"), "noop");
        names.push("band-server alone".into());
        fns.push(Box::new(move || {
            let r = serve_once(&env.server, &request, env.state_dir.as_deref(), None);
            assert_eq!(r.status, Status::Ok, "band-server run failed: {r:?}");
        }));
    }
    names.push("band run, `warm = false`".into());
    let band_run_at = names.len() - 1;
    fns.push(Box::new(|| env.band_run(job.name, &env.empty, None)));
    names.push("band run (the default: warm server)".into());
    fns.push(Box::new(|| env.band_run_warm(job.name, &env.empty)));
    names.push("band exec, `warm = false`".into());
    fns.push(Box::new(move || {
        let mut args: Vec<String> = vec![
            "exec".into(),
            "--band".into(),
            band_file.display().to_string(),
            "--json".into(),
            "--".into(),
            "sh".into(),
            "-c".into(),
        ];
        args.push(match job.name {
            "py" => format!("/usr/bin/python3 -c '{PY}'"),
            other => job.argv.get(2).cloned().unwrap_or_else(|| other.into()),
        });
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run_ok(&mut env.band(&args, &env.empty, None), "band exec");
    }));
    let mut refs: Vec<&mut dyn FnMut()> = fns.iter_mut().map(|f| &mut **f as _).collect();
    let stats = common::interleaved(iters, &mut refs);
    let rows: Vec<(&str, Stats)> = names
        .iter()
        .map(String::as_str)
        .zip(stats.clone())
        .collect();
    print_table(&job_title(job.name), &rows, stats[1]);
    (
        ratio(stats[band_run_at].p50, stats[1].p50),
        ratio(stats[band_run_at + 1].p50, stats[1].p50),
    )
}

/// How many commands the gate table's long script runs.
const GATE_CALLS: usize = 200;

/// The gate table: what one command run through the gate costs, against the same command in a
/// bare bwrap. Each side runs the same script file, started the same way (bubblewrap, or band,
/// execs the file; its `#!/bin/sh` line starts dash), once with a loop of [`GATE_CALLS`]
/// `/bin/true`s (by absolute path: no `PATH` search on either side) and once with the same loop
/// of none; the environment is cleared to `PATH`, `HOME` and `LANG`, as a band run's script has
/// them (band's `PATH` is its own folder of commands).
/// A command's cost is the difference of the two p50s over the number of commands, so what a run
/// costs around its script (namespaces, band-server, the client) is out of it. Returns band's
/// cost per command over bwrap's.
fn gate_table(env: &Env, iters: usize) -> f64 {
    let script = |n: usize| {
        format!(
            "#!/bin/sh\nn=0\nwhile [ \"$n\" -lt {n} ]; do /bin/true || exit 1; n=$((n+1)); done\n[ \"$n\" -eq {n} ]\n"
        )
    };
    let names = ["gate0", "gate"];
    for (&name, n) in names.iter().zip([0, GATE_CALLS]) {
        write_skill(
            &env.skills.join(name),
            &Job {
                name,
                policy: "allow:\n  cli: [\"true\"]\n",
                script: script(n),
                argv: Vec::new(),
            },
        );
    }
    let bare = |name: &str| {
        let mut c = bwrap_base();
        c.args(["--clearenv", "--setenv", "PATH", "/usr/bin:/bin"])
            .args(["--setenv", "HOME", "/tmp", "--setenv", "LANG", "C.UTF-8"])
            .arg("--ro-bind")
            .arg(env.skills.join(name).join(format!("scripts/{name}.sh")))
            .arg("/skill/job.sh")
            .args(["--chdir", "/", "/skill/job.sh"]);
        c
    };
    let mut bw0 = || run_ok(&mut bare("gate0"), "bwrap");
    let mut bw = || run_ok(&mut bare("gate"), "bwrap");
    let mut band0 = || env.band_run_warm("gate0", &env.empty);
    let mut band = || env.band_run_warm("gate", &env.empty);
    let s = common::interleaved(iters, &mut [&mut bw0, &mut bw, &mut band0, &mut band]);
    print_table(
        &format!("a gated command: a script of {GATE_CALLS} `/bin/true`s and of none"),
        &[
            ("bare bwrap, no command", s[0]),
            ("bare bwrap, the commands", s[1]),
            ("band run (the default: warm server), no command", s[2]),
            ("band run (the default: warm server), the commands", s[3]),
        ],
        s[0],
    );
    let per = |with: Stats, without: Stats| {
        with.p50.saturating_sub(without.p50).as_secs_f64() * 1000.0 / GATE_CALLS as f64
    };
    let (bare_ms, band_ms) = (per(s[1], s[0]), per(s[3], s[2]));
    println!(
        "\none command: bare bwrap {bare_ms:.3} ms, through band's gate {band_ms:.3} ms ({:.3} ms more)",
        band_ms - bare_ms
    );
    band_ms / bare_ms
}

/// The no-op's CPU per run in blocks of ten runs, each block followed by 0.2 s in which the warm
/// server builds the spare of its last run, interleaved with a block of 0.2 s alone (the idle
/// machine's busy time, taken off): the table's CPU column ends when the processes a run started
/// have ended, and a spare is built after that, by the warm server. `iters` blocks of each.
fn block_cpu(env: &Env, job: &Job, iters: usize) {
    const BLOCK: u32 = 10;
    const AFTER: Duration = Duration::from_millis(200);
    let block = |run: &dyn Fn()| {
        for _ in 0..BLOCK {
            run();
        }
        std::thread::sleep(AFTER);
    };
    let mut idle = || std::thread::sleep(AFTER);
    let mut bw = || block(&|| run_ok(&mut bwrap_cmd(&job.argv, None), "bwrap"));
    let mut cold = || block(&|| env.band_run(job.name, &env.empty, None));
    let mut warm = || block(&|| env.band_run_warm(job.name, &env.empty));
    let s = common::interleaved(iters, &mut [&mut idle, &mut bw, &mut cold, &mut warm]);
    let idle_cpu = s[0].cpu.unwrap_or_default();
    println!(
        "\nCPU per no-op run in blocks of {BLOCK}, the warm server's spare building included ({iters} blocks each, idle time taken off):\n"
    );
    println!("| tool | CPU per run |");
    println!("|---|---:|");
    for (name, st) in [
        ("bare bwrap", s[1]),
        ("band run, `warm = false`", s[2]),
        ("band run (the default: warm server)", s[3]),
    ] {
        let per = st.cpu.unwrap_or_default().saturating_sub(idle_cpu) / BLOCK;
        println!("| {name} | {} |", ms(per));
    }
}

/// Stop the host's warm band-server the bench's `warm = true` runs started, and wait for its
/// spare sandbox to be removed (its child, handed to the bench, the subreaper, as the server
/// exits).
fn stop_warm_server() {
    let pid_file = Path::new(band::warm::DIR).join("serve.pid");
    if let Some(pid) = fs_err::read_to_string(&pid_file)
        .ok()
        .and_then(|t| t.split_whitespace().next().map(str::to_string))
    {
        let _ = Command::new("kill").arg(&pid).status();
        // Reaped here: the bench is the subreaper of what band started.
        let deadline = Instant::now() + Duration::from_secs(5);
        let server_left =
            || Path::new(&format!("/proc/{pid}")).exists() || common::child_named("band-server");
        while server_left() && Instant::now() < deadline {
            common::reap_orphans();
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn print_table(title: &str, rows: &[(&str, Stats)], bwrap: Stats) {
    println!("\n### {title}\n");
    println!("| tool | p50 | p95 | p50 / bare bwrap | CPU per run |");
    println!("|---|---:|---:|---:|---:|");
    for (name, s) in rows {
        println!(
            "| {name} | {} | {} | {:.2}× | {} |",
            ms(s.p50),
            ms(s.p95),
            ratio(s.p50, bwrap.p50),
            s.cpu_text()
        );
    }
    // The table's rows share one reading; a table the hypervisor disturbed says so.
    if let Some(steal) = bwrap.steal.filter(|s| *s >= 0.005) {
        println!(
            "\n(hypervisor steal during this table: {:.0} % of the CPUs' time; its wall times are slower, its CPU column leaves steal out)",
            steal * 100.0
        );
    }
}

/// The networked fetch: bwrap with the host network, and band with `allow.net`, as by default (on
/// the warm server of the lab's config, which keeps no spare for a networked run) and with
/// `warm = false`, and through the run's egress proxy (an HTTP rule; by default). The ratios:
/// `warm = false`'s and the default's to bwrap, the proxied fetch's to the direct one.
fn fetch_table(env: &Env, job: &Job, lab: &Lab, iters: usize) -> (f64, f64, f64) {
    let mut bw = || {
        run_ok(
            &mut bwrap_cmd(&job.argv, Some(&lab.resolv)),
            "bwrap --share-net",
        )
    };
    let mut br = || env.band_run("fetch", &env.empty, Some(&lab.config));
    let mut warm = || env.band_run_warm_with("fetch", &env.empty, Some(&lab.config));
    let mut proxied = || env.band_run_warm_with("fetch-proxy", &env.empty, Some(&lab.config));
    let s = common::interleaved(iters, &mut [&mut bw, &mut warm, &mut br, &mut proxied]);
    print_table(
        "networked fetch from one allowed host (bwrap with network)",
        &[
            ("bare bwrap, host network", s[0]),
            ("band run, allow.net (the default: warm server)", s[1]),
            ("band run, allow.net, `warm = false`", s[2]),
            ("band run, through the egress proxy (HTTP rule)", s[3]),
        ],
        s[0],
    );
    (
        ratio(s[2].p50, s[0].p50),
        ratio(s[1].p50, s[0].p50),
        ratio(s[3].p50, s[1].p50),
    )
}

/// Runs in one batch of the load table, and the callers it is issued from.
const LOAD_RUNS: usize = 48;
const LOAD_CALLERS: [usize; 3] = [1, 4, 16];

/// One batch: `LOAD_RUNS` calls of `call` from `callers` threads (each takes the next run until
/// none is left). Its wall time, the machine's busy time, and band-server's largest resident
/// memory (all its processes, summed; sampled every 2 ms) during it.
fn batch(callers: usize, call: &(dyn Fn() + Sync)) -> (Duration, Duration, u64) {
    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let done = AtomicBool::new(false);
    let peak = AtomicU64::new(0);
    let c0 = common::busy_time();
    let t = Instant::now();
    /// Stops the sampler when dropped, also by a caller's panic: otherwise the scope would wait
    /// for the sampler for ever, and the bench would go on reading `/proc` every 2 ms.
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(server_rss(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        let _stop = Stop(&done);
        let workers: Vec<_> = (0..callers)
            .map(|_| {
                s.spawn(|| {
                    while next.fetch_add(1, Ordering::Relaxed) < LOAD_RUNS {
                        call();
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().expect("a caller");
        }
    });
    let wall = t.elapsed();
    common::reap_orphans();
    (
        wall,
        common::busy_time().saturating_sub(c0),
        peak.into_inner(),
    )
}

/// The resident memory of every band-server process, summed (bytes).
fn server_rss() -> u64 {
    let Ok(dir) = fs_err::read_dir("/proc") else {
        return 0;
    };
    dir.flatten()
        .filter(|e| {
            fs_err::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim() == "band-server")
        })
        .filter_map(|e| {
            let status = fs_err::read_to_string(e.path().join("status")).ok()?;
            let kb: u64 = status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))?
                .split_whitespace()
                .next()?
                .parse()
                .ok()?;
            Some(kb * 1024)
        })
        .sum()
}

/// A peer's failed runs in the load table: how many, and the last line its first one printed.
#[derive(Default)]
struct PeerFailures {
    count: std::sync::atomic::AtomicUsize,
    first: std::sync::Mutex<Option<String>>,
}

impl PeerFailures {
    fn run(&self, line: &OwnedCommand) {
        let out = line
            .command()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output();
        let why = match out {
            Ok(o) if o.status.success() => return,
            Ok(o) => String::from_utf8_lossy(&o.stderr)
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no message")
                .trim()
                .replace('|', "\\|"),
            Err(e) => e.to_string(),
        };
        self.count
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.first.lock().expect("lock").get_or_insert(why);
    }

    fn reset(&self) {
        self.count.store(0, std::sync::atomic::Ordering::Relaxed);
        *self.first.lock().expect("lock") = None;
    }

    /// The failures since the last reset, if any.
    fn seen(&self) -> Option<(usize, String)> {
        let n = self.count.load(std::sync::atomic::Ordering::Relaxed);
        (n > 0).then(|| {
            (
                n,
                self.first.lock().expect("lock").clone().unwrap_or_default(),
            )
        })
    }
}

/// A command line as owned parts, so that caller threads can each build it.
struct OwnedCommand {
    program: OsString,
    args: Vec<OsString>,
    envs: Vec<(OsString, Option<OsString>)>,
}

impl OwnedCommand {
    fn of(c: &Command) -> OwnedCommand {
        OwnedCommand {
            program: c.get_program().to_owned(),
            args: c.get_args().map(ToOwned::to_owned).collect(),
            envs: c
                .get_envs()
                .map(|(k, v)| (k.to_owned(), v.map(ToOwned::to_owned)))
                .collect(),
        }
    }

    fn command(&self) -> Command {
        let mut c = Command::new(&self.program);
        c.args(&self.args);
        for (k, v) in &self.envs {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        c
    }
}

/// The load table of `job`: bwrap, each peer the bench runs and band run (the default, warm
/// server), 48 runs from 1, 4 and 16 callers, best of 3 batches each. Its goal rows.
fn load_table(env: &Env, job: &Job, peers: &[Peer]) -> Vec<(String, String, String)> {
    let bw = || run_ok(&mut bwrap_cmd(&job.argv, None), "bwrap");
    // Each peer's command line, as owned parts (a peer is not shared between threads).
    let lines: Vec<(&str, OwnedCommand)> = peers
        .iter()
        .map(|p| (p.name, OwnedCommand::of(&p.command(&job.argv))))
        .collect();
    // A peer may not hold up under concurrent use (codex's sandbox shares one folder of `PATH`
    // aliases between its processes): its failed runs are counted, and its row says so.
    let failures: Vec<PeerFailures> = lines.iter().map(|_| PeerFailures::default()).collect();
    let runs: Vec<Box<dyn Fn() + Sync + '_>> = lines
        .iter()
        .zip(&failures)
        .map(|((_, line), failed)| Box::new(move || failed.run(line)) as Box<_>)
        .collect();
    let band = || env.band_run_warm(job.name, &env.empty);
    // Each tool: its name, one run, and (a peer's) its failed runs.
    type Tool<'a> = (&'a str, &'a (dyn Fn() + Sync), Option<&'a PeerFailures>);
    let mut tools: Vec<Tool> = vec![("bare bwrap", &bw, None)];
    for (((name, _), run), failed) in lines.iter().zip(&runs).zip(&failures) {
        tools.push((name, &**run, Some(failed)));
    }
    tools.push(("band run (the default: warm server)", &band, None));
    // Warm-up: the warm server and its spare.
    for (_, call, _) in &tools {
        call();
    }
    println!(
        "\n### {}: {LOAD_RUNS} runs from N concurrent callers (best of 3 batches)\n",
        job_title(job.name)
    );
    println!(
        "| tool | callers | batch | runs/s | batch / bwrap's | CPU per run | band-server RSS per concurrent run |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let mut goals = Vec::new();
    let mut band_rate = Vec::new();
    for callers in LOAD_CALLERS {
        let mut best: Vec<(Duration, Duration, u64)> = Vec::new();
        for f in &failures {
            f.reset();
        }
        for (_, call, _) in &tools {
            let b = (0..3)
                .map(|_| {
                    // A peer's leftovers (srt's node processes end after its runs) would
                    // otherwise fall on the next tool's batch.
                    common::quiet_machine(Duration::from_secs(2));
                    batch(callers, *call)
                })
                .min_by_key(|b| b.0)
                .expect("three batches");
            best.push(b);
        }
        let bwrap_wall = best[0].0;
        for ((name, _, failed), (wall, cpu, rss)) in tools.iter().zip(&best) {
            if let Some((n, why)) = failed.and_then(PeerFailures::seen) {
                println!(
                    "| {name} | {callers} | {n} of {} runs failed: {why} | - | - | - | - |",
                    3 * LOAD_RUNS
                );
                continue;
            }
            let rss_text = if name.starts_with("band") {
                format!("{:.1} MiB", *rss as f64 / callers as f64 / 1048576.0)
            } else {
                "-".into()
            };
            println!(
                "| {name} | {callers} | {} | {:.0} | {:.2}× | {} | {rss_text} |",
                ms(*wall),
                LOAD_RUNS as f64 / wall.as_secs_f64(),
                ratio(*wall, bwrap_wall),
                ms(*cpu / LOAD_RUNS as u32),
            );
        }
        let (band_wall, band_cpu, _) = best[best.len() - 1];
        band_rate.push(LOAD_RUNS as f64 / band_wall.as_secs_f64());
        if callers == 16 {
            let goal = if job.name == "noop" { 1.5 } else { 1.3 };
            goals.push(goal_row(
                format!("{}, 48 runs from 16 callers (batch)", job_title(job.name)),
                ratio(band_wall, bwrap_wall),
                goal,
            ));
            if job.name == "noop" {
                goals.push(goal_row(
                    "no-op CPU per run at 16 callers / bwrap's".into(),
                    ratio(band_cpu, best[0].1),
                    1.5,
                ));
            }
        }
    }
    let never_falls = band_rate.windows(2).all(|w| w[1] >= w[0] * 0.95);
    goals.push((
        format!("{}: band runs/s from 1 to 16 callers", job_title(job.name)),
        band_rate
            .iter()
            .map(|r| format!("{r:.0}"))
            .collect::<Vec<_>>()
            .join(" → "),
        format!(
            "never falls: {}",
            if never_falls { "met" } else { "MISSED" }
        ),
    ));
    goals
}

/// A band-sandboxd for the platform table: the pod's band allows what the jobs run, its
/// workspace is empty; `warm`: with its warm band-server (the default), else `BAND_WARM=0` (a
/// `band-server run` per run). Stopped (SIGTERM, and waited for) when dropped.
struct Pod {
    child: Child,
    target: String,
    token: PathBuf,
}

impl Pod {
    fn start(env: &Env, warm: bool) -> Pod {
        let dir = env.tmp.join(if warm { "pod-warm" } else { "pod-cold" });
        let ws = dir.join("workspace");
        fs_err::create_dir_all(&ws).expect("mkdir pod");
        let band = dir.join("pod.band.md");
        fs_err::write(
            &band,
            "---\nband: bench-pod\ndescription: The bench's pod.\nallow:\n  cli: [\"python3 *\"]\n---\n",
        )
        .expect("write pod band");
        let token = dir.join("token");
        write_file(&token, "band-bench-token-0123456789\n", 0o600);
        let mut c = Command::new(env.server.with_file_name("band-sandboxd"));
        c.arg("--band")
            .arg(&band)
            .arg("--token-file")
            .arg(&token)
            .arg("--workspace")
            .arg(&ws)
            .args(["--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0", "--server"])
            .arg(&env.server)
            .envs(env.state_dir.iter().map(|d| (STATE_DIR_ENV, d)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if warm {
            c.env_remove(proto::env::WARM);
        } else {
            c.env(proto::env::WARM, "0");
        }
        let mut child = c.spawn().expect("band-sandboxd");
        let mut err = BufReader::new(child.stderr.take().expect("stderr"));
        let mut first = String::new();
        err.read_line(&mut first)
            .expect("band-sandboxd's first line");
        let words: Vec<&str> = first.split_whitespace().collect();
        let at = words
            .iter()
            .position(|w| *w == "grpc")
            .unwrap_or_else(|| panic!("band-sandboxd: {first}"));
        let target = format!("sandboxd://{}", words[at + 1]);
        // A line a run: read, or band-sandboxd would block on a full pipe.
        std::thread::spawn(move || for _ in err.lines() {});
        Pod {
            child,
            target,
            token,
        }
    }

    /// `band run <job>/<job> --target sandboxd://…`, asserting it succeeded.
    fn run(&self, env: &Env, job: &str) {
        let skill = env.skills.join(job).display().to_string();
        let out = env
            .band_with(
                &[
                    "run",
                    &format!("{skill}/{job}"),
                    "--json",
                    "--target",
                    &self.target,
                ],
                &env.empty,
                None,
                &env.tmp.join("cold.toml"),
            )
            .env(band::client::sandboxd::TOKEN_FILE_ENV, &self.token)
            .output()
            .expect("band run --target sandboxd://");
        assert!(
            out.status.success(),
            "band run {job} on band-sandboxd failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

/// The platform's path (`band run SKILL --target sandboxd://`, each run a `Start` of the skill's
/// request on a band-sandboxd): 48 runs of `job` from 1 and 16 callers, best of 3 batches, on
/// a band-sandboxd with its warm server (the default) and one without (`BAND_WARM=0`), against
/// bare bwrap. Both pods are up for the whole table; the warm-up round starts the warm server
/// and its spare.
fn platform_table(env: &Env, job: &Job) -> Vec<(String, String, String)> {
    let warm_pod = Pod::start(env, true);
    let cold_pod = Pod::start(env, false);
    let bw = || run_ok(&mut bwrap_cmd(&job.argv, None), "bwrap");
    let warm = || warm_pod.run(env, job.name);
    let cold = || cold_pod.run(env, job.name);
    let tools: [(&str, &(dyn Fn() + Sync)); 3] = [
        ("bare bwrap", &bw),
        ("band-sandboxd (the default: its warm server)", &warm),
        ("band-sandboxd, `BAND_WARM=0`", &cold),
    ];
    // Warm-up: the first runs come before the warm server listens; then its spare.
    for _ in 0..3 {
        for (_, call) in &tools {
            call();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    println!(
        "\n### {} through band-sandboxd (`band run --target sandboxd://`): {LOAD_RUNS} runs from N concurrent callers (best of 3 batches)\n",
        job_title(job.name)
    );
    println!("| tool | callers | batch | runs/s | batch / bwrap's | CPU per run |");
    println!("|---|---:|---:|---:|---:|---:|");
    let mut goals = Vec::new();
    for callers in [1, 16] {
        let best: Vec<(Duration, Duration)> = tools
            .iter()
            .map(|(_, call)| {
                (0..3)
                    .map(|_| {
                        common::quiet_machine(Duration::from_secs(2));
                        let (wall, cpu, _) = batch(callers, *call);
                        (wall, cpu)
                    })
                    .min_by_key(|b| b.0)
                    .expect("three batches")
            })
            .collect();
        for ((name, _), (wall, cpu)) in tools.iter().zip(&best) {
            println!(
                "| {name} | {callers} | {} | {:.0} | {:.2}× | {} |",
                ms(*wall),
                LOAD_RUNS as f64 / wall.as_secs_f64(),
                ratio(*wall, best[0].0),
                ms(*cpu / LOAD_RUNS as u32),
            );
        }
        goals.push((
            format!(
                "{} through band-sandboxd, 48 runs from {callers} caller{} (batch): warm / `BAND_WARM=0`",
                job_title(job.name),
                if callers == 1 { "" } else { "s" }
            ),
            format!(
                "{:.2}× / {:.2}× bwrap's",
                ratio(best[1].0, best[0].0),
                ratio(best[2].0, best[0].0)
            ),
            "no goal of its own (the host's rows above)".into(),
        ));
    }
    goals
}

/// bubblewrap around `argv`: `/usr` read-only, private `/proc`, `/dev`, `/tmp`, every namespace;
/// with `resolv`, the host network and that file as `/etc/resolv.conf`.
fn bwrap_cmd(argv: &[String], resolv: Option<&Path>) -> Command {
    let mut c = bwrap_base();
    if let Some(r) = resolv {
        c.arg("--share-net")
            .arg("--ro-bind")
            .arg(r)
            .arg("/etc/resolv.conf");
    }
    c.args(["--chdir", "/"]).args(argv);
    c
}

/// bubblewrap with the bench's sandbox (every namespace, `/usr` read-only, its own `/proc`,
/// `/dev` and `/tmp`), before the job's own arguments.
fn bwrap_base() -> Command {
    let mut c = Command::new(BWRAP);
    c.args([
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--ro-bind",
        "/usr",
        "/usr",
        "--symlink",
        "usr/bin",
        "/bin",
        "--symlink",
        "usr/lib",
        "/lib",
        "--symlink",
        "usr/lib64",
        "/lib64",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
    ]);
    c
}

/// Make the host's list of the library trees' programs anew (`band-server rescan-mask`, as the
/// janitor does at install), so that it is fresh for the next hour: a list turning an hour old
/// mid-bench is rescanned in the background by the next run, two seconds of a CPU that would land
/// inside whichever table runs then.
fn refresh_program_list(server: &Path) {
    let state = tempfile::tempdir().expect("tmp");
    let st = Command::new(server)
        .arg("rescan-mask")
        .arg(state.path())
        .status()
        .expect("band-server rescan-mask");
    assert!(st.success(), "band-server rescan-mask failed: {st}");
}

/// band's programs as `cargo install` leaves them: copied (`std::fs::copy`) from next to `band`
/// into `into`, where the bench runs them (band-server finds its helpers next to itself).
/// Returns the copies of band and band-server.
///
/// Why copies: a program the linker has just written runs slower than the same program
/// installed, for as long as its file stays in the page cache as the linker wrote it, in small
/// pieces. On ext4 with large folios (Linux 6.16 and later) a file written in large pieces, or
/// read back from disk, is cached in large folios (physically contiguous pieces: as many page
/// faults here, so the likely gain is in each fault and in the TLB); measured on this bench's VM,
/// `band run` of a no-op took 0.4–1 ms longer from the freshly linked
/// `band` than from a copy of it, or from the same file once evicted and read back
/// (docs/perf-history-2026-11.md, "A tenth pass"). Users run installed copies. The peers run as
/// their own installers leave them (apt, pip, npm), bwrap as Debian installs it.
fn install(band_bin: &Path, into: &Path) -> (PathBuf, PathBuf) {
    let from = band_bin.parent().expect("band's directory");
    fs_err::create_dir_all(into).expect("mkdir bench bin");
    for name in [
        "band",
        "band-server",
        "band-jail",
        "band-shim",
        "band-sandboxd",
    ] {
        let built = from.join(name);
        if built.is_file() {
            fs_err::copy(&built, into.join(name)).expect("copy a program");
        }
    }
    (into.join("band"), into.join("band-server"))
}

/// Build band-server, band-jail and band-shim next to `band` and return band-server's path.
fn build_server(band_bin: &Path) -> PathBuf {
    let dir = band_bin.parent().expect("band's directory");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let t = Instant::now();
    let st = Command::new(cargo)
        .args([
            "build",
            "--release",
            "--quiet",
            "-p",
            "band-server",
            "--bins",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("cargo build -p band-server");
    assert!(st.success(), "cargo build --release -p band-server failed");
    let server = dir.join("band-server");
    assert!(server.is_file(), "{} was not built", server.display());
    eprintln!("band-server built in {}", ms(t.elapsed()));
    server
}

fn write_file(path: &Path, text: &str, mode: u32) {
    fs_err::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs_err::write(path, text).expect("write");
    fs_err::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn write_skill(root: &Path, job: &Job) {
    let name = job.name;
    write_file(
        &root.join("BAND.md"),
        &format!(
            "---\nband: {name}\ndescription: The {name} job of the run benchmark.\n{}---\n",
            job.policy
        ),
        0o644,
    );
    write_file(
        &root.join("SKILL.md"),
        &format!("---\nname: {name}\ndescription: A benchmark job.\n---\n"),
        0o644,
    );
    let ext = if job.script.starts_with("#!/usr/bin/python3") {
        "py"
    } else {
        "sh"
    };
    write_file(
        &root.join(format!("scripts/{name}.{ext}")),
        &job.script,
        0o755,
    );
    write_file(
        &root.join(format!("schemas/input/{name}.json")),
        r#"{"type": "object", "properties": {}}"#,
        0o644,
    );
}

/// The request `band run` would send for `script` of `skill` (a fresh run id per call).
fn build_request(skill: &Path, script: &str) -> RunRequest {
    let (s, _) = band::skill::load_skill(skill);
    let (resolved, diags) = band::skill::resolve_script(&s, script);
    let resolved =
        resolved.unwrap_or_else(|| panic!("the bench skill does not resolve: {diags:?}"));
    let mut raw: Vec<(String, u32, Vec<u8>)> = Vec::new();
    let mut entry = String::new();
    let mut files = vec!["BAND.md".to_string(), "SKILL.md".to_string()];
    files.push(format!("schemas/input/{script}.json"));
    for ext in ["sh", "py"] {
        let rel = format!("scripts/{script}.{ext}");
        if skill.join(&rel).is_file() {
            entry = rel.clone();
            files.push(rel);
        }
    }
    for rel in &files {
        let p = skill.join(rel);
        let mode = fs_err::metadata(&p).expect("stat").permissions().mode() & 0o7777;
        raw.push((rel.clone(), mode, fs_err::read(&p).expect("read")));
    }
    RunRequest {
        protocol: proto::PROTOCOL_VERSION,
        run_id: String::new(),
        skill: script.into(),
        script: script.into(),
        entry,
        bundle_sha256: proto::bundle_digest(&raw),
        bundle: raw
            .iter()
            .map(|(p, m, d)| FileEntry {
                path: p.clone(),
                mode: *m,
                data: B64.encode(d),
            })
            .collect(),
        policy: resolved.policy,
        input: serde_json::json!({}),
        config: None,
        secrets: BTreeMap::new(),
        workspace: Vec::new(),
        trace: false,
        observe: false,
        args: Vec::new(),
        signed: None,
        narrowing: Vec::new(),
        stdin: false,
        start_on_go: false,
        workspace_folders: None,
    }
}

fn run_id() -> String {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos() as u64;
    format!("{:016x}", n ^ (u64::from(std::process::id()) << 40))
}

/// One `band-server run`: send the request, read lines until the result.
fn serve_once(
    server: &Path,
    request: &RunRequest,
    state_dir: Option<&std::ffi::OsStr>,
    config: Option<&Path>,
) -> RunResult {
    let mut req = request.clone();
    req.run_id = run_id();
    let mut child = Command::new(server)
        .arg("run")
        .envs(state_dir.iter().map(|d| (STATE_DIR_ENV, d)))
        .envs(config.map(|c| (CONFIG_ENV, c)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("band-server");
    {
        let mut stdin = child.stdin.take().expect("stdin");
        let line = serde_json::to_string(&Message::Request(Box::new(req))).expect("json");
        stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.write_all(b"\n"))
            .expect("send request");
    }
    let mut result = None;
    for line in BufReader::new(child.stdout.take().expect("stdout")).lines() {
        if let Ok(Message::Result(r)) = serde_json::from_str::<Message>(&line.expect("read")) {
            result = Some(*r);
        }
    }
    child.wait().expect("wait");
    result.expect("band-server sent no result")
}

/// A fake internet for the networked job: band-test's lab (`band_test::netlab`: a network
/// namespace with a veth to the host, `api.bench.test` resolving to its host, HTTP on port 80
/// there; every address checked by route to stay on the veth, or no lab), and a resolv.conf naming
/// the lab's DNS, for bubblewrap. Removed on drop.
struct Lab {
    _lab: band_test::netlab::Lab,
    /// band-server's config: `dns_upstream` is the lab's DNS.
    config: PathBuf,
    /// A resolv.conf naming the lab's DNS, for bubblewrap.
    resolv: PathBuf,
}

impl Lab {
    fn new() -> Option<Lab> {
        use band_test::netlab::{At, Spec};
        let lab = Spec::new()
            .name("api.bench.test", [At::V4(2)])
            .listen(At::V4(2), 80)
            .try_build()
            .map_err(|e| println!("lab: {e}; no networked row"))
            .ok()?;
        let resolv = lab.dir().join("resolv.conf");
        fs_err::write(&resolv, format!("nameserver {}\n", lab.host())).ok()?;
        Some(Lab {
            config: lab.config.clone(),
            resolv,
            _lab: lab,
        })
    }
}
