//! Timing helpers shared by the benches (`mod common;`). Percentiles by nearest rank
//! ([`band_test::percentile`]).
#![allow(dead_code)]

use std::time::{Duration, Instant};

use band_test::percentile;

pub(crate) mod peers;

/// p50 and p95 of a set of wall-clock timings, and the mean CPU time per iteration when known.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stats {
    pub(crate) p50: Duration,
    pub(crate) p95: Duration,
    /// CPU time per iteration: from [`measure`], the user + system time of this process and the
    /// children it waited for; from [`interleaved`], the machine's busy time ([`busy_time`]) until
    /// everything the run started has ended. Far less sensitive than wall time to other work on
    /// the machine.
    pub(crate) cpu: Option<Duration>,
    /// [`interleaved`] only: the share of the machine's CPU time that its hypervisor gave to
    /// others while the table ran (`/proc/stat`'s steal), the same for every row of a table. A
    /// table measured while the host was busy with other guests shows it here.
    pub(crate) steal: Option<f64>,
}

impl Stats {
    pub(crate) fn of(mut times: Vec<Duration>) -> Stats {
        assert!(!times.is_empty(), "no timings");
        times.sort();
        Stats {
            p50: percentile(&times, 50),
            p95: percentile(&times, 95),
            cpu: None,
            steal: None,
        }
    }

    /// `cpu` as text, or `–`.
    pub(crate) fn cpu_text(&self) -> String {
        self.cpu.map(ms).unwrap_or_else(|| "–".into())
    }
}

/// One warm-up, then `iters` timed runs of `f`.
pub(crate) fn measure(iters: usize, mut f: impl FnMut()) -> Stats {
    f();
    let cpu0 = cpu_time();
    let times = (0..iters)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    let cpu = cpu_time().saturating_sub(cpu0) / iters as u32;
    Stats {
        cpu: Some(cpu),
        ..Stats::of(times)
    }
}

/// Make this process the child subreaper: what a sandbox leaves behind (bubblewrap's outer
/// process exits without reaping its pid namespace's init) is handed to the bench, which reaps
/// it ([`reap_orphans`]), so its CPU time reaches [`cpu_time`]. Without this the CPU column
/// missed everything inside bubblewrap.
pub(crate) fn set_subreaper() {
    let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
}

/// Reap every child that has exited (the orphans of a run).
pub(crate) fn reap_orphans() {
    while let Ok(Some(_)) = rustix::process::wait(rustix::process::WaitOptions::NOHANG) {}
}

/// Is a child of this process (not a zombie) the program `name` (its `comm`)?
pub(crate) fn child_named(name: &str) -> bool {
    children().into_iter().any(|p| {
        fs_err::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|stat| {
            // `pid (comm) state …`: comm may hold spaces and parentheses; the state follows the
            // last `)`.
            stat.split_once('(')
                .and_then(|(_, rest)| rest.rsplit_once(')'))
                .is_some_and(|(comm, rest)| comm == name && !rest.trim_start().starts_with('Z'))
        })
    })
}

/// The children of this process (of every thread of it), zombies too.
fn children() -> std::collections::BTreeSet<i32> {
    children_of("self")
}

/// The children of process `pid` (a number, or `self`), from each of its threads' `children`.
fn children_of(pid: &str) -> std::collections::BTreeSet<i32> {
    let mut out = std::collections::BTreeSet::new();
    let Ok(tasks) = fs_err::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        if let Ok(text) = fs_err::read_to_string(t.path().join("children")) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
    }
    out
}

/// The host's warm band-server, if its pid file names one (`band run` with `warm = true`).
fn warm_server_pid() -> Option<i32> {
    fs_err::read_to_string(std::path::Path::new(band::warm::DIR).join("serve.pid"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Reap what a job left until no child is left that was not there before it (`before`), or is
/// the warm band-server (which outlives the runs it serves): a sandbox's processes reach this
/// process (the subreaper) a moment after the job's own process ended, bubblewrap's
/// pid-namespace init last. Then wait until the warm band-server's processes are idle: after a
/// run's result its child removes the run and builds the next spare (several ms of CPU), which
/// is that run's work, not the next job's. Waited for here, their CPU time falls in this job's
/// window, and the next job starts on a quiet machine. At most 500 ms.
pub(crate) fn settle(before: &std::collections::BTreeSet<i32>) {
    let deadline = Instant::now() + Duration::from_millis(500);
    let mut quiet = 0;
    loop {
        reap_orphans();
        let warm = warm_server_pid();
        let left = children()
            .into_iter()
            .any(|p| !before.contains(&p) && Some(p) != warm);
        // Three looks in a row with nothing of the warm server running (a child between two
        // steps of its work may sleep for one look).
        quiet = if !left && warm.is_none_or(|w| !tree_running(w)) {
            quiet + 1
        } else {
            0
        };
        if quiet >= 3 || Instant::now() > deadline {
            return;
        }
        std::thread::sleep(Duration::from_micros(500));
    }
}

/// Whether a thread of `pid` or of a process under it is running or waiting on the disk (state
/// `R` or `D` in its `stat`).
fn tree_running(pid: i32) -> bool {
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        if let Ok(tasks) = fs_err::read_dir(format!("/proc/{p}/task")) {
            for t in tasks.flatten() {
                let stat = fs_err::read_to_string(t.path().join("stat")).unwrap_or_default();
                let state = stat
                    .rsplit_once(')')
                    .and_then(|(_, r)| r.split_whitespace().next());
                if matches!(state, Some("R" | "D")) {
                    return true;
                }
            }
        }
        todo.extend(children_of(&p.to_string()));
    }
    false
}

/// `iters` rounds (after one warm-up round) of every entry of `jobs`, interleaved: each round
/// runs each job once, starting at a different job each round, so a slow phase of the machine
/// falls on all of them. Wall time per run, and CPU per run: the machine's busy time
/// ([`busy_time`]) from the job's start until everything it started has ended and been reaped
/// ([`settle`]).
pub(crate) fn interleaved(iters: usize, jobs: &mut [&mut dyn FnMut()]) -> Vec<Stats> {
    let n = jobs.len();
    for j in jobs.iter_mut() {
        let before = children();
        j();
        settle(&before);
    }
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); n];
    let mut cpu: Vec<Duration> = vec![Duration::ZERO; n];
    let start = CpuTicks::now();
    for round in 0..iters {
        for k in 0..n {
            let i = (round + k) % n;
            let before = children();
            let c0 = busy_time();
            let t = Instant::now();
            jobs[i]();
            times[i].push(t.elapsed());
            settle(&before);
            cpu[i] += busy_time().saturating_sub(c0);
        }
    }
    let steal = CpuTicks::now().steal_share_since(&start);
    times
        .into_iter()
        .zip(cpu)
        .map(|(t, c)| Stats {
            cpu: Some(c / iters as u32),
            steal,
            ..Stats::of(t)
        })
        .collect()
}

/// User + system time so far of this process (all threads) and of its waited-for children (and
/// theirs), from `/proc/self/stat` (in clock ticks of 10 ms, so only means over many iterations
/// are meaningful).
pub(crate) fn cpu_time() -> Duration {
    let stat = fs_err::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the `(comm)`: state is the 3rd field; utime, stime, cutime, cstime the 14th-17th.
    let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    let ticks: u64 = after
        .split_whitespace()
        .skip(11)
        .take(4)
        .filter_map(|f| f.parse::<u64>().ok())
        .sum();
    Duration::from_millis(ticks * 10)
}

/// The machine's busy time so far, all CPUs ([`CpuTicks::busy`], in clock ticks of 10 ms). A
/// run's processes do not all reach a `wait` of the bench: a sandbox's pid-namespace init, killed
/// when bubblewrap's outer process exits, took its children's time (the script's) with it, so the
/// children's CPU time of the bench (and of band-server) missed the python job's own 20 ms. The
/// machine's busy time counts it, with the kernel's own work for the run (its network namespace
/// and cgroup, freed by kernel threads). Other work on the machine counts too, the same for every
/// entry of an interleaved table.
pub(crate) fn busy_time() -> Duration {
    Duration::from_millis(CpuTicks::now().busy * 10)
}

/// Wait until the machine is quiet: less than a tenth of one CPU busy over a quarter second
/// (what a slow peer left behind, a node process ending or a proxy, finishes first), for at
/// most `limit`.
pub(crate) fn quiet_machine(limit: Duration) {
    const WINDOW: Duration = Duration::from_millis(250);
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        let before = busy_time();
        std::thread::sleep(WINDOW);
        reap_orphans();
        if busy_time().saturating_sub(before) < WINDOW / 10 {
            break;
        }
    }
}

/// The `cpu` line of `/proc/stat` (all CPUs, clock ticks) as the bench reads it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CpuTicks {
    /// What this machine's CPUs did: user, nice, system, irq and softirq. Not idle or iowait;
    /// not steal, the time a hypervisor ran something else while this machine wanted to run
    /// (until round 16 it was counted, so a busy host inflated every CPU figure); not guest and
    /// guest_nice, which user and nice already hold.
    pub(crate) busy: u64,
    pub(crate) steal: u64,
    /// Every field but guest and guest_nice (counted in user and nice).
    pub(crate) total: u64,
}

impl CpuTicks {
    pub(crate) fn now() -> CpuTicks {
        CpuTicks::parse(&fs_err::read_to_string("/proc/stat").unwrap_or_default())
    }

    /// From a `/proc/stat` text: its first line, `cpu  user nice system idle iowait irq softirq
    /// steal guest guest_nice` (older kernels stop after fewer fields; those are 0).
    pub(crate) fn parse(stat: &str) -> CpuTicks {
        let f: Vec<u64> = stat
            .lines()
            .next()
            .unwrap_or("")
            .split_whitespace()
            .skip(1)
            .filter_map(|f| f.parse::<u64>().ok())
            .collect();
        let at = |i: usize| f.get(i).copied().unwrap_or(0);
        CpuTicks {
            busy: at(0) + at(1) + at(2) + at(5) + at(6),
            steal: at(7),
            total: (0..8).map(at).sum(),
        }
    }

    /// The share of all CPU time since `before` that was stolen; `None` when no time passed.
    pub(crate) fn steal_share_since(&self, before: &CpuTicks) -> Option<f64> {
        let total = self.total.saturating_sub(before.total);
        (total > 0).then(|| self.steal.saturating_sub(before.steal) as f64 / total as f64)
    }
}

pub(crate) fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

pub(crate) fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-9)
}

/// `cargo bench` passes `--bench`; `cargo test --all-targets` runs the bench binaries without it,
/// and then they only do a quick smoke run (small sizes, few iterations) so tests stay fast.
pub(crate) fn bench_mode() -> bool {
    std::env::args().any(|a| a == "--bench")
}

pub(crate) fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// "2 CPUs (Intel(R) Xeon(R) …), Debian GNU/Linux 12 (bookworm), kernel 6.1.0"
pub(crate) fn machine() -> String {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let model = fs_err::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let os = fs_err::read_to_string("/etc/os-release")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_string())
        })
        .unwrap_or_else(|| "unknown OS".into());
    let kernel = fs_err::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let load = fs_err::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_default();
    format!("{cpus} CPUs ({model}), {os}, kernel {kernel}, load average {load} at the end")
}

/// cargo runs a bench with `LD_LIBRARY_PATH` naming its target folders and the toolchain's
/// libraries, and every program the bench starts inherits it: the dynamic loader then looks
/// through those folders (and their `glibc-hwcaps` subfolders) for each library of each program
/// it starts. That made each `/bin/true` of bare bwrap about 0.2 ms slower, and `band` itself
/// slower to start, while nsjail, which clears its environment, and band's sandbox, which sets
/// its own, were not: the 50-process row showed nsjail at 0.74× bare bwrap, 0.99× without it.
/// So the bench starts again, once, as a user's shell would start it: without that variable.
pub(crate) fn without_cargo_library_path() {
    use std::os::unix::process::CommandExt;
    const AGAIN: &str = "BAND_BENCH_CLEAN_ENV";
    if std::env::var_os("LD_LIBRARY_PATH").is_none() || std::env::var_os(AGAIN).is_some() {
        return;
    }
    let Ok(me) = std::env::current_exe() else {
        return;
    };
    let e = std::process::Command::new(me)
        .args(std::env::args_os().skip(1))
        .env_remove("LD_LIBRARY_PATH")
        .env(AGAIN, "1")
        .exec();
    panic!("the bench could not start itself again without LD_LIBRARY_PATH: {e}");
}
