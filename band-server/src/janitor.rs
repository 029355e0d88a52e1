//! Cleans up after band-servers that died mid-run (SIGKILL, OOM, power loss of the process).
//!
//! Runs at every start and as `band-server janitor`, over the layers' list
//! ([`crate::layers::LAYERS`]):
//!
//! 1. Each layer lists its leftovers (run directories, cgroups, program directories, whiteout
//!    builds, and with `janitor` the nftables tables) *before* the leases are read, so a run that
//!    starts meanwhile is never touched.
//! 2. For each lease file whose lock can be taken (its owner is dead) and that still names a run:
//!    kill every process of that slot's uid (only when the uid's host-wide lock is free too:
//!    otherwise a server of another state directory runs as it now), let every layer remove what
//!    the run left, clear the file (unless something could not be removed: then the file keeps
//!    naming the run and no run takes the slot until a later pass succeeds). With `janitor`, a free slot whose uid has processes gets them
//!    killed, under the same condition. Only these read every process's `/proc/<pid>/status`:
//!    the pass before a run costs the same however many processes the host has.
//! 3. Each layer, in reverse order, removes the leftovers of step 1 that no live lease names.
//!
//! What a pass did goes to `<state>/janitor.log` ([`log`]) when it ran before a run or in a warm
//! server: it cleans up after other runs, which is nothing to put in the next run's output.
//! `band-server janitor` prints it.
//!
//! A live run's lease is held, so nothing here can touch it; a live run of another state
//! directory holds its uid's host-wide lock, and its cgroup carries no mark of this state
//! directory (`cgroup::marks_dir`), so nothing here touches it either.

use fs_err::File;
use std::collections::BTreeSet;
use std::path::Path;

use fs_err as fs;
use fs_err::os::unix::fs::OpenOptionsExt;

use crate::common::Host;
pub(crate) use crate::common::Report;
use crate::layer::RunLayer;
use crate::layers::LAYERS;
use crate::layers::identity::procs::{kill_uids, pids_of_uids, status_uids};
use crate::layers::identity::uidpool::{self, POOL_SIZE};
use crate::sys;

/// The log of the passes before each run, in the state directory: they clean up after other
/// runs (dead ones, possibly another user's or another test's), which is nothing to put in this
/// run's output. `band-server janitor` prints its report instead.
pub const LOG_FILE: &str = "janitor.log";
/// The log starts again past this size.
pub(crate) const LOG_MAX_BYTES: u64 = 1 << 20;

/// Append `report`'s lines ([`Report::lines`]), each after the time in seconds since the epoch,
/// to [`LOG_FILE`] in `state` (0600). Nothing when the pass found nothing.
pub fn log(state: &Path, report: &Report) -> std::io::Result<()> {
    use std::io::Write;
    let lines = report.lines();
    if lines.is_empty() {
        return Ok(());
    }
    let path = state.join(LOG_FILE);
    if fs::metadata(&path).is_ok_and(|m| m.len() > LOG_MAX_BYTES) {
        fs::remove_file(&path)?;
    }
    let mut f = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&path)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let text: String = lines.iter().map(|l| format!("{now} {l}\n")).collect();
    f.write_all(text.as_bytes())
}

/// Clean up what the dead owner of `slot` left behind. `file` is the slot's lock file, locked by
/// the caller.
/// `nft` is the nft binary, when installed.
pub(crate) fn clean_dead_lease(
    state: &Path,
    slot: u32,
    file: &mut File,
    nft: Option<&Path>,
) -> Report {
    let host = Host {
        state,
        nft,
        scan_tables: false,
    };
    // Called by `uidpool::acquire`, which holds the slot's uid lock by then.
    clean_dead(LAYERS, &host, slot, file, true)
}

/// `kill_uid`: the caller holds the slot's host-wide uid lock, so every process of the slot's uid
/// is a leftover. Without it the uid may be running another state directory's run now: only
/// the dead run's own leftovers (its cgroup, directories) are removed.
fn clean_dead(
    layers: &[&'static dyn RunLayer],
    host: &Host<'_>,
    slot: u32,
    file: &mut File,
    kill_uid: bool,
) -> Report {
    let mut report = Report::default();
    let run = uidpool::read_lease(file).map(|(_, run)| run);
    if kill_uid
        && let Ok(passwd) = fs::read_to_string("/etc/passwd")
        && let Some((uid, _)) = uidpool::parse_passwd_entry(&passwd, &uidpool::user_name(slot))
    {
        report.killed += kill_uids(&BTreeSet::from([uid]));
    }
    if let Some(run) = run.filter(|r| crate::request::validate_run_id(r).is_ok()) {
        for layer in layers {
            layer.remove_dead_run(host, &run, &mut report);
        }
    }
    if !report.errors.is_empty() {
        // Fail closed: a leftover that could not be removed (an nft table still filtering the
        // uid, a cgroup) must not meet the next run of this uid. The lease keeps naming the dead
        // run, so no run takes the slot and every later pass tries again.
        report.errors.push(format!(
            "lease {slot} kept: the dead run's leftovers could not all be removed"
        ));
        return report;
    }
    let _ = uidpool::clear_lease(file);
    // Free again: the next run's search may start here (as after a run's own release).
    uidpool::lower_hint(host.state, slot);
    report.dead_leases.push(slot);
    report
}

/// The nft that removes leftovers: the configured one, else the default one. A server configured
/// without nft (or with a wrong path) still removes the tables a dead run of another server of
/// this state directory left.
fn nft_for_leftovers(configured: &Path) -> Option<&Path> {
    let default = Path::new(crate::config::DEFAULT_NFT);
    [configured, default].into_iter().find(|p| p.is_file())
}

/// The whole janitor pass, over [`LAYERS`].
pub fn run(state: &Path, nft: &Path, scan_tables: bool) -> Report {
    run_with(LAYERS, state, nft, scan_tables)
}

/// [`run`] over the layers of `layers`, in that order (leftovers no lease names: reversed).
pub fn run_with(
    layers: &[&'static dyn RunLayer],
    state: &Path,
    nft: &Path,
    scan_tables: bool,
) -> Report {
    let mut report = Report::default();
    let host = Host {
        state,
        nft: nft_for_leftovers(nft),
        scan_tables,
    };
    // Every layer's leftovers are listed before the leases are read: a run holds its lease
    // before it builds anything.
    let listed: Vec<_> = layers
        .iter()
        .map(|layer| layer.list_stale(&host, &mut report))
        .collect();

    // `band-server janitor` only: pool uids that have processes right now (one /proc sweep). A
    // free slot whose uid is among them has leftovers: it stays locked until they are killed, so
    // no run starts on it meanwhile. Other free slots are released at once. The pass before every
    // run does not sweep, nor read the pool's users: a run releases its slot only once its
    // cgroup and relay are confirmed empty (`identity::stop_uid`), so a free slot has no
    // processes unless something outside band made them; a dead lease's uid is swept in
    // `clean_dead`.
    let passwd = if scan_tables {
        fs::read_to_string("/etc/passwd").unwrap_or_default()
    } else {
        String::new()
    };
    let pool_uid =
        |slot: u32| uidpool::parse_passwd_entry(&passwd, &uidpool::user_name(slot)).map(|(u, _)| u);
    let pool_uids: BTreeSet<u32> = (0..POOL_SIZE).filter_map(pool_uid).collect();
    let swept = if scan_tables {
        pids_of_uids(&pool_uids)
    } else {
        Vec::new()
    };
    let busy: BTreeSet<u32> = swept
        .into_iter()
        .filter_map(|pid| {
            fs::read_to_string(format!("/proc/{pid}/status"))
                .ok()
                .and_then(|s| status_uids(&s))
        })
        .flatten()
        .filter(|u| pool_uids.contains(u))
        .collect();
    let mut live: BTreeSet<String> = BTreeSet::new();
    let mut free_uids = BTreeSet::new();
    let mut held = Vec::new();
    // The lease files there are, from one listing (read after the layers' listings, as the
    // files were looked at one by one before: a run's lease file exists before anything of it).
    for slot in uidpool::lease_slots(state) {
        let Ok(mut file) = uidpool::open_lock(state, slot) else {
            continue;
        };
        match sys::try_lock_exclusive(file.file()) {
            Ok(true) => {
                // Free in this state directory; the uid's host-wide lock says whether a server
                // of another state directory runs as it now (then its processes are not ours).
                let uid_lock = match uidpool::try_lock_uid(Path::new(uidpool::UID_LOCK_DIR), slot) {
                    Ok(l) => l,
                    Err(e) => {
                        report.errors.push(format!("uid lock {slot}: {e}"));
                        None
                    }
                };
                let ours = uid_lock.is_some();
                if uidpool::read_lease(&mut file).is_some() {
                    report.extend(clean_dead(layers, &host, slot, &mut file, ours));
                } else if let Some(uid) = pool_uid(slot)
                    && busy.contains(&uid)
                    && let Some(l) = uid_lock
                {
                    free_uids.insert(uid);
                    held.push(file);
                    held.push(l);
                }
            }
            Ok(false) => {
                if let Some((_, run)) = uidpool::read_lease(&mut file) {
                    live.insert(run);
                }
            }
            Err(e) => report.errors.push(format!("lease {slot}: {e}")),
        }
    }
    report.killed += kill_uids(&free_uids);
    drop(held);
    for (layer, items) in layers.iter().zip(&listed).rev() {
        for item in items {
            layer.remove_stale(&host, item, &live, &mut report);
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::Stale;
    use crate::layers::identity::procs::sweeps;

    #[test]
    fn a_pass_is_logged_in_the_state_directory_and_only_when_it_did_something() {
        use std::os::unix::fs::PermissionsExt;
        let state = tempfile::tempdir().unwrap();
        let path = state.path().join(LOG_FILE);
        log(state.path(), &Report::default()).unwrap();
        assert!(!path.exists(), "an empty pass was logged");

        let report = Report {
            dead_leases: vec![3],
            killed: 2,
            removed: vec![(
                crate::common::REMOVED_RUN_DIRS,
                vec!["0123456789abcdef".into()],
            )],
            errors: vec!["cannot remove cgroup x: busy".into()],
        };
        log(state.path(), &report).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        let (time, line) = lines[0].split_once(' ').unwrap();
        assert!(
            time.parse::<u64>().is_ok_and(|t| t > 1_700_000_000),
            "{text}"
        );
        assert_eq!(
            line,
            "band-server: janitor: dead leases [3], killed 2 process(es), removed run dirs \
             [\"0123456789abcdef\"], cgroups [], nftables tables []"
        );
        assert!(lines[1].ends_with(" band-server: janitor: cannot remove cgroup x: busy"));
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);

        // Appended; past its size it starts again.
        log(state.path(), &report).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap().lines().count(), 4);
        fs::write(&path, vec![b'x'; LOG_MAX_BYTES as usize + 1]).unwrap();
        log(state.path(), &report).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap().lines().count(), 2);
    }

    #[test]
    fn the_pass_before_a_run_does_not_sweep_proc_without_a_dead_lease() {
        let state = tempfile::tempdir().unwrap();
        fs::create_dir_all(uidpool::leases_dir(state.path())).unwrap();
        // A free slot (an empty lease file) is no reason to sweep.
        fs::write(uidpool::lease_path(state.path(), 3), "").unwrap();
        let nft = Path::new("/nonexistent/nft");
        let before = sweeps();
        let report = run(state.path(), nft, false);
        assert_eq!(sweeps(), before, "{report:?}");
        assert!(report.dead_leases.is_empty(), "{report:?}");
        // `band-server janitor` sweeps the pool's free uids.
        run(state.path(), nft, true);
        assert_eq!(sweeps(), before + 1);
    }

    /// Whether [`Stuck`] can remove a dead run's leftover.
    static STUCK: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

    /// A layer whose dead-run leftover cannot be removed while [`STUCK`] is set (an nft table
    /// without nft, a cgroup that will not go).
    struct Stuck;

    impl RunLayer for Stuck {
        fn remove_dead_run(&self, _host: &Host<'_>, run: &str, report: &mut Report) {
            if STUCK.load(std::sync::atomic::Ordering::SeqCst) {
                report.errors.push(format!("{run}: cannot remove"));
            } else {
                report.note_removed(crate::common::REMOVED_RUN_DIRS, run.to_string());
            }
        }
    }

    #[test]
    fn a_dead_lease_is_kept_until_its_leftovers_are_gone() {
        let state = tempfile::tempdir().unwrap();
        fs::create_dir_all(uidpool::leases_dir(state.path())).unwrap();
        let lease = uidpool::lease_path(state.path(), 7);
        // Its owner is dead: nobody holds the file's lock.
        fs::write(&lease, "999999 0123456789abcdef\n").unwrap();
        fs::write(uidpool::hint_path(state.path()), "20\n").unwrap();
        let nft = Path::new("/nonexistent/nft");

        let report = run_with(&[&Stuck], state.path(), nft, false);
        assert!(report.dead_leases.is_empty(), "{report:?}");
        assert!(
            report.errors.iter().any(|e| e.starts_with("lease 7 kept")),
            "{report:?}"
        );
        assert_eq!(
            fs::read_to_string(&lease).unwrap(),
            "999999 0123456789abcdef\n",
            "a lease whose run left something behind was cleared: the next run of its uid would meet it"
        );

        STUCK.store(false, std::sync::atomic::Ordering::SeqCst);
        let report = run_with(&[&Stuck], state.path(), nft, false);
        assert_eq!(report.dead_leases, [7], "{report:?}");
        assert_eq!(
            report.removed(crate::common::REMOVED_RUN_DIRS),
            ["0123456789abcdef"]
        );
        // Cleared in place (blanks, no truncation): free to the next search.
        assert_eq!(
            uidpool::read_lease(&mut fs_err::File::open(&lease).unwrap()),
            None
        );
        assert_eq!(fs::read_to_string(&lease).unwrap().trim(), "");
        assert_eq!(
            uidpool::read_hint(state.path()),
            7,
            "a crashed run's slot is free again but the next search starts above it"
        );
    }

    /// A layer that lists nothing and, when the janitor lists, removes [`ENDED`]'s run directory:
    /// that run ended (and released its lease) between the janitor's listing and its reading of
    /// the leases.
    struct EndsARun;

    const ENDED: &str = "0123456789abcdef";

    impl RunLayer for EndsARun {
        fn list_stale(&self, host: &Host<'_>, _report: &mut Report) -> Vec<Stale> {
            fs::remove_dir(crate::layers::fs::workdir::runs_dir(host.state).join(ENDED)).unwrap();
            Vec::new()
        }
    }

    #[test]
    fn a_run_directory_its_own_run_removed_after_the_listing_is_not_reported() {
        let state = tempfile::tempdir().unwrap();
        let runs = crate::layers::fs::workdir::runs_dir(state.path());
        fs::create_dir_all(runs.join(ENDED)).unwrap();
        fs::create_dir_all(runs.join("fedcba9876543210")).unwrap();
        let nft = Path::new("/nonexistent/nft");

        let report = run_with(
            &[&crate::layers::fs::Fs, &EndsARun],
            state.path(),
            nft,
            false,
        );
        // A real leftover (no lease names it) is removed and reported; the directory of the run
        // that ended meanwhile was never the janitor's to remove.
        assert_eq!(
            report.removed(crate::common::REMOVED_RUN_DIRS),
            ["fedcba9876543210"],
            "{report:?}"
        );
        assert!(report.errors.is_empty(), "{report:?}");
        assert!(!runs.join("fedcba9876543210").exists());
    }
}
