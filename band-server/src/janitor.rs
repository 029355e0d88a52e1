//! Cleans up after band-servers that died mid-run (SIGKILL, OOM, power loss of the process).
//!
//! Runs at every start and as `band-server janitor`:
//!
//! 1. For each lease file whose lock can be taken (its owner is dead) and that still names a run:
//!    kill every process of that slot's uid, kill and remove the run's cgroup, unmount and remove
//!    the run directory, clear the file.
//! 2. Remove run directories that no live lease names.
//! 3. Kill and remove stale cgroups that no live lease names.
//! 4. Remove the program directories (`execcache`, `/band/x`) that no live lease names, and
//!    the whiteout layers ([`crate::layers::fs::maskcache`]) that dead runs were building (listed
//!    before the leases are read, like the run directories).
//! 5. Delete the nftables tables (`band_<run>`) of runs that no live lease names. The tables are
//!    listed before the leases are read, so a run that starts meanwhile is never touched.
//!
//! A live run's lease is held, so nothing here can touch it.

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::path::Path;

use crate::layers::cgroup::{Hierarchy, RunCgroup};
use crate::layers::fs::workdir;
use crate::layers::identity::procs::{kill_uids, pids_of_uids, status_uids};
use crate::layers::identity::uidpool::{self, POOL_SIZE};
use crate::layers::net::nft::Nft;
use crate::sys;

/// What the janitor did, for the log line.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    pub dead_leases: Vec<u32>,
    pub killed: usize,
    pub removed_dirs: Vec<String>,
    pub removed_cgroups: Vec<String>,
    pub removed_tables: Vec<String>,
    pub errors: Vec<String>,
}

/// Clean up what the dead owner of `slot` left behind. `file` is the slot's lock file, locked by
/// the caller.
pub fn clean_dead_lease(state: &Path, slot: u32, file: &mut File, nft: Option<&Nft>) -> Report {
    let mut report = Report::default();
    let run = uidpool::read_lease(file).map(|(_, run)| run);
    if let Ok(passwd) = fs::read_to_string("/etc/passwd")
        && let Some((uid, _)) = uidpool::parse_passwd_entry(&passwd, &uidpool::user_name(slot))
    {
        report.killed += kill_uids(&BTreeSet::from([uid]));
    }
    if let Some(run) = run.filter(|r| crate::request::validate_run_id(r).is_ok()) {
        // Its processes are dead: the run's table (if it had network) can go.
        if let Some(nft) = nft {
            let table = crate::layers::net::nft::table_name(&run);
            if nft.list_table(&table).is_ok() {
                match nft.delete_table(&table) {
                    Ok(()) => report.removed_tables.push(table),
                    Err(e) => report.errors.push(e),
                }
            }
        }
        if let Ok(h) = Hierarchy::detect_system() {
            match RunCgroup::open(&h, &run).and_then(|cg| cg.remove()) {
                Ok(()) => report.removed_cgroups.push(run.clone()),
                Err(e) => report.errors.push(format!("cgroup {run}: {e}")),
            }
        }
        let dir = workdir::runs_dir(state).join(&run);
        if dir.exists() {
            match workdir::remove_stale(&dir) {
                Ok(()) => report.removed_dirs.push(run),
                Err(e) => report.errors.push(format!("{}: {e}", dir.display())),
            }
        }
    }
    let _ = file.set_len(0);
    report.dead_leases.push(slot);
    report
}

/// The whole janitor pass.
pub fn run(state: &Path, nft: &Path, scan_tables: bool) -> Report {
    let mut report = Report::default();
    let nft = nft.is_file().then(|| Nft::new(nft));
    let scan = nft.as_ref().filter(|_| scan_tables);
    let tables = match scan.map(|n| n.list_tables()) {
        Some(Ok(t)) => t,
        Some(Err(e)) => {
            report.errors.push(format!("nft: {e}"));
            Vec::new()
        }
        None => Vec::new(),
    };
    // Run directories are listed before leases are read: a server writes its lease before it
    // creates its directory, so any directory seen here has its lease content by the time we
    // read it below.
    let dirs: Vec<String> = fs::read_dir(workdir::runs_dir(state))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    // Listed before the leases are read too: a run holds its lease before it makes either.
    let exec_dirs = crate::layers::cli::execcache::run_dirs(state);
    let mask_builds = crate::layers::fs::maskcache::builds(state);
    let hierarchy = Hierarchy::detect_system().ok();
    let stale_cgroups = hierarchy
        .as_ref()
        .map(RunCgroup::list_stale)
        .unwrap_or_default();

    let passwd = fs::read_to_string("/etc/passwd").unwrap_or_default();
    let pool_uid =
        |slot: u32| uidpool::parse_passwd_entry(&passwd, &uidpool::user_name(slot)).map(|(u, _)| u);
    // Pool uids that have processes right now (one /proc scan). A free slot whose uid is among
    // them has leftovers: it stays locked until they are killed, so no run starts on it meanwhile.
    // Other free slots are released at once, so starting servers do not wait for this pass.
    let pool_uids: BTreeSet<u32> = (0..POOL_SIZE).filter_map(pool_uid).collect();
    let busy: BTreeSet<u32> = pids_of_uids(&pool_uids)
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
    for slot in 0..POOL_SIZE {
        if !uidpool::lease_path(state, slot).exists() {
            continue;
        }
        let Ok(mut file) = uidpool::open_lock(state, slot) else {
            continue;
        };
        match sys::try_lock_exclusive(&file) {
            Ok(true) => {
                if uidpool::read_lease(&mut file).is_some() {
                    let r = clean_dead_lease(state, slot, &mut file, nft.as_ref());
                    report.dead_leases.extend(r.dead_leases);
                    report.killed += r.killed;
                    report.removed_dirs.extend(r.removed_dirs);
                    report.removed_cgroups.extend(r.removed_cgroups);
                    report.removed_tables.extend(r.removed_tables);
                    report.errors.extend(r.errors);
                } else if let Some(uid) = pool_uid(slot)
                    && busy.contains(&uid)
                {
                    free_uids.insert(uid);
                    held.push(file);
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
    for d in dirs {
        if live.contains(&d) || report.removed_dirs.contains(&d) {
            continue;
        }
        let p = workdir::runs_dir(state).join(&d);
        match workdir::remove_stale(&p) {
            Ok(()) => report.removed_dirs.push(d),
            Err(e) => report.errors.push(format!("{}: {e}", p.display())),
        }
    }
    for run in exec_dirs {
        if !live.contains(&run)
            && let Err(e) = crate::layers::cli::execcache::remove_stale(state, &run)
        {
            report.errors.push(e.to_string());
        }
    }
    // Whiteout layers a dead run was building (a live run's build is its own business).
    for (path, run) in mask_builds {
        if !live.contains(&run)
            && let Err(e) = fs::remove_dir_all(&path)
        {
            report.errors.push(format!("{}: {e}", path.display()));
        }
    }
    if let Some(h) = &hierarchy {
        for name in stale_cgroups {
            if live.contains(&name) || report.removed_cgroups.contains(&name) {
                continue;
            }
            match RunCgroup::open(h, &name).and_then(|cg| cg.remove()) {
                Ok(()) => report.removed_cgroups.push(name),
                Err(e) => report.errors.push(format!("cgroup {name}: {e}")),
            }
        }
    }
    if let Some(nft) = scan {
        let (removed, errors) = crate::layers::net::remove_stale_tables(nft, &tables, &live);
        report.removed_tables.extend(
            removed
                .into_iter()
                .filter(|t| !report.removed_tables.contains(t))
                .collect::<Vec<_>>(),
        );
        report.errors.extend(errors);
    }
    report
}
