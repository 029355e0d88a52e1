//! The pool of run identities: users `band-run-0` … `band-run-63`, one per concurrent run.
//!
//! A run leases slot `n` by taking `flock(LOCK_EX | LOCK_NB)` on `<state>/leases/<n>.lock` and
//! writing `<server pid> <run id>` into it. The kernel drops the lock when band-server exits, however
//! it exits, so a lease can never leak; the janitor recognises a dead owner by being able to
//! take the lock while the file still names a run. Lock files are never deleted: deleting one
//! while another process has it open would let two processes "hold" the same slot.
//!
//! The pool's users are the host's, whichever state directory a server uses; so a slot is also
//! locked host-wide, in [`UID_LOCK_DIR`], for as long as it is leased: two servers with different
//! state directories never run as the same uid at once, and processes of a pool uid may be killed
//! only by the holder of that uid's host-wide lock (issue 13, item 11).
//!
//! Users are created on first use with `useradd --system --no-create-home --user-group --shell
//! /usr/sbin/nologin`, after the slot's lock is held, so no two servers create the same user.

use fs_err::{self as fs, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};

use fs_err::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use band::proto::Layer;

use crate::error::{LayerExt, SetupError, SetupResult};
use crate::sys;

pub const POOL_SIZE: u32 = 64;

/// The host-wide locks of the pool's uids (`<dir>/<slot>.lock`), shared by every state directory.
pub(crate) const UID_LOCK_DIR: &str = "/run/band-uids";

pub(crate) fn uid_lock_path(dir: &Path, slot: u32) -> PathBuf {
    dir.join(format!("{slot}.lock"))
}

/// Take the host-wide lock of `slot` in `dir` (normally [`UID_LOCK_DIR`]), creating the
/// directory (root-only) and the file if needed. `Ok(None)`: a server, of whichever state
/// directory, holds it, so a run of that uid may be alive.
pub(crate) fn try_lock_uid(dir: &Path, slot: u32) -> std::io::Result<Option<File>> {
    fs::create_dir_all(dir)?;
    let meta = fs::symlink_metadata(dir)?;
    if !meta.is_dir() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} is not a directory", dir.display()),
        ));
    }
    crate::common::dirs::keep_mode(dir, &meta, 0o700)?;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(uid_lock_path(dir, slot))?;
    Ok(sys::try_lock_exclusive(file.file())?.then_some(file))
}

pub fn user_name(slot: u32) -> String {
    format!("band-run-{slot}")
}

/// `(uid, gid)` of `name` in a passwd-format text.
pub fn parse_passwd_entry(passwd: &str, name: &str) -> Option<(u32, u32)> {
    passwd.lines().find_map(|line| {
        let mut f = line.split(':');
        if f.next()? != name {
            return None;
        }
        let _pw = f.next()?;
        let uid = f.next()?.parse().ok()?;
        let gid = f.next()?.parse().ok()?;
        Some((uid, gid))
    })
}

/// A held slot. Dropping it releases the lock (and the file's content is cleared first by
/// [`Lease::release`] on the normal path).
#[derive(Debug)]
pub(crate) struct Lease {
    pub(crate) slot: u32,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) user: String,
    file: File,
    path: PathBuf,
    /// The slot's host-wide lock ([`try_lock_uid`]), held as long as the lease.
    _uid_lock: File,
}

impl Lease {
    /// Clear the lock file and drop the lock. Call only once nothing of the run is alive. The
    /// slot becomes the pool's hint when it is below it (the next run starts its search there).
    pub(crate) fn release(self) {
        let _ = clear_lease(&self.file);
        if let Some(state) = self.path.parent().and_then(Path::parent) {
            lower_hint(state, self.slot);
        }
        drop(self);
    }
}

pub fn leases_dir(state: &Path) -> PathBuf {
    state.join("leases")
}

pub fn lease_path(state: &Path, slot: u32) -> PathBuf {
    leases_dir(state).join(format!("{slot}.lock"))
}

/// The slots whose lease file ([`lease_path`]) exists in `state`, in order, from one listing of
/// [`leases_dir`] (none when it cannot be read, as when it does not exist yet). Names that are not
/// a pool slot's lease file (the hint, anything else) are not slots.
pub(crate) fn lease_slots(state: &Path) -> Vec<u32> {
    let Ok(entries) = fs::read_dir(leases_dir(state)) else {
        return Vec::new();
    };
    let mut slots: Vec<u32> = entries
        .filter_map(|e| {
            let name = e.ok()?.file_name();
            let name = name.to_str()?;
            let slot: u32 = name.strip_suffix(".lock")?.parse().ok()?;
            (slot < POOL_SIZE && name == format!("{slot}.lock")).then_some(slot)
        })
        .collect();
    slots.sort_unstable();
    slots
}

/// Open (creating it if needed) the lock file of `slot`, root-only.
pub(crate) fn open_lock(state: &Path, slot: u32) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(lease_path(state, slot))
}

/// Where a run starts looking for a free slot (`<state>/leases/hint`, a slot number): the slot
/// after the one last leased, lowered again when a lower slot is released. Without it every run
/// took one lock attempt per busy slot below the first free one (three system calls each; the
/// test suite's runs held ~17 at a time). Only a hint: read and written without a lock, so two
/// servers may race on it; which slot is free is still decided by each slot's lock, and a
/// search that starts at the hint goes round the whole pool before it gives up.
pub fn hint_path(state: &Path) -> PathBuf {
    leases_dir(state).join("hint")
}

/// The pool's hint ([`hint_path`]): 0 when missing or not a slot.
pub fn read_hint(state: &Path) -> u32 {
    fs::read_to_string(hint_path(state))
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .filter(|n| *n < POOL_SIZE)
        .unwrap_or(0)
}

/// Written in place, one width for every slot, never truncated: on a state directory on ext4
/// with `discard` and no journal (`/run` on a disk, as on a VM without systemd) each truncation
/// of the old number freed its block with a synchronous discard, 0.12 ms against 4 µs.
fn write_hint(state: &Path, slot: u32) {
    let _ = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(hint_path(state))
        .and_then(|f| f.write_all_at(format!("{slot:>HINT_WIDTH$}\n").as_bytes(), 0));
}

/// The hint's width: any `u32`.
const HINT_WIDTH: usize = 10;

/// The width of a lease record (`<pid> <run id>`, padded with spaces, then a newline): a pid and
/// a run id (16 characters) fit with room to spare.
const LEASE_WIDTH: usize = 47;

/// Write `<pid> <run_id>` over the lease in place ([`LEASE_WIDTH`]), as `write_hint` does and
/// for the same reason: a file of one block is never freed and allocated again.
fn write_lease(file: &File, pid: u32, run_id: &str) -> std::io::Result<()> {
    let record = format!("{pid} {run_id}");
    let padded = format!("{record:<LEASE_WIDTH$}\n");
    file.write_all_at(padded.as_bytes(), 0)?;
    // Longer before (an older band-server's record): only what was just written counts.
    if file.metadata()?.len() > padded.len() as u64 {
        file.set_len(padded.len() as u64)?;
    }
    Ok(())
}

/// Clear a lease (free slot) in place: blanks over the record, which [`parse_lease`] reads as no
/// lease, instead of truncating it to nothing (see `write_hint` for why).
pub(crate) fn clear_lease(file: &File) -> std::io::Result<()> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(());
    }
    let mut blank = vec![b' '; usize::try_from(len).unwrap_or(LEASE_WIDTH + 1)];
    if let Some(last) = blank.last_mut() {
        *last = b'\n';
    }
    file.write_all_at(&blank, 0)
}

/// After a release of `slot`: the hint goes down to it if it is above (the lowest slot that may
/// be free is where the next run should look first).
pub(crate) fn lower_hint(state: &Path, slot: u32) {
    if slot < read_hint(state) {
        write_hint(state, slot);
    }
}

/// The order in which slots are tried: from `hint` to the end of the pool, then from 0 (every
/// slot once).
pub(crate) fn search_order(hint: u32) -> impl Iterator<Item = u32> {
    let start = hint % POOL_SIZE;
    (start..POOL_SIZE).chain(0..start)
}

/// The `pid run_id` written in a lease file, if any.
pub(crate) fn parse_lease(text: &str) -> Option<(i32, String)> {
    let mut it = text.split_whitespace();
    let pid = it.next()?.parse().ok()?;
    let run = it.next()?.to_string();
    Some((pid, run))
}

pub(crate) fn read_lease(file: &mut File) -> Option<(i32, String)> {
    let mut s = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.read_to_string(&mut s).ok()?;
    parse_lease(&s)
}

/// What to do with a slot whose previous owner died mid-run (the lock was free, the file still
/// names a run): the janitor's cleanup, passed in by the caller. It answers whether the slot is
/// clean; a slot that is not stays leased to the dead run and is skipped.
pub(crate) type OnDeadLease<'a> = &'a dyn Fn(u32, &mut File) -> bool;

/// What a lease does when it finds every slot taken.
#[derive(Clone, Copy)]
pub(crate) enum WhenFull<'a> {
    /// Look again every 20 ms, up to [`LEASE_WAIT`], calling the hook after each look that found
    /// none (a run: on the warm server, the hook asks for a waiting spare's uid).
    Wait(&'a dyn Fn()),
    /// Give up at once (a spare: it must not take a uid a run waits for).
    GiveUp,
}

/// How long a run waits for a uid when every one is leased.
pub(crate) const LEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Lease the first free slot for `run_id`, creating its user if needed.
pub(crate) fn acquire(
    state: &Path,
    run_id: &str,
    on_dead: OnDeadLease<'_>,
    when_full: WhenFull<'_>,
) -> SetupResult<Lease> {
    let dir = leases_dir(state);
    crate::common::dirs::dir_with_mode(&dir, 0o700, true, None)
        .layer(Layer::Identity, format!("failed to make {}", dir.display()))?;
    // Every slot can be briefly locked by a janitor pass of another starting server: retry.
    let deadline = std::time::Instant::now() + LEASE_WAIT;
    loop {
        if let Some(lease) = try_acquire(state, run_id, on_dead)? {
            return Ok(lease);
        }
        let full = || {
            SetupError::new(
                Layer::Identity,
                format!("all {POOL_SIZE} run identities are in use"),
            )
            .with_hint("wait for other runs to finish")
        };
        let WhenFull::Wait(hook) = when_full else {
            return Err(full());
        };
        if std::time::Instant::now() > deadline {
            return Err(full());
        }
        hook();
        // A spare of another server (the host's warm server's, a pod's) waiting with a uid is
        // asked to leave as well: only its own server could send it away otherwise.
        super::idle::ask_one_to_leave(
            Path::new(UID_LOCK_DIR),
            Path::new("/proc"),
            super::idle::server(),
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn try_acquire(state: &Path, run_id: &str, on_dead: OnDeadLease<'_>) -> SetupResult<Option<Lease>> {
    for slot in search_order(read_hint(state)) {
        let path = lease_path(state, slot);
        let mut file = open_lock(state, slot).layer(Layer::Identity, "failed to open a lease")?;
        if !sys::try_lock_exclusive(file.file()).layer(
            Layer::Identity,
            format!("failed to lock {}", path.display()),
        )? {
            continue;
        }
        // Free here, but the uid may be running a run of another state directory.
        let uid_lock = match try_lock_uid(Path::new(UID_LOCK_DIR), slot) {
            Ok(Some(l)) => l,
            Ok(None) => continue,
            Err(e) => {
                return Err(SetupError::new(
                    Layer::Identity,
                    format!(
                        "failed to lock {}: {e}",
                        uid_lock_path(Path::new(UID_LOCK_DIR), slot).display()
                    ),
                ));
            }
        };
        // Whatever the uid's last holder marked there (`idle`) is not this lease's. Only advisory:
        // a mark is acted on only while its process is alive and was started when it says.
        let _ = uid_lock.set_len(0);
        if read_lease(&mut file).is_some() {
            // The previous owner died without cleaning up; leave the slot to the janitor rather
            // than reuse a uid that may still have processes.
            if !on_dead(slot, &mut file) {
                continue;
            }
        }
        write_lease(&file, std::process::id(), run_id).layer(
            Layer::Identity,
            format!("failed to write {}", path.display()),
        )?;
        // The next run is most likely to find this slot busy and the next one free.
        write_hint(state, (slot + 1) % POOL_SIZE);
        let user = user_name(slot);
        let (uid, gid) = ensure_user(&user)?;
        return Ok(Some(Lease {
            slot,
            uid,
            gid,
            user,
            file,
            path,
            _uid_lock: uid_lock,
        }));
    }
    Ok(None)
}

/// Look up `user`, creating it if missing. Refuses uid or gid 0.
pub fn ensure_user(user: &str) -> SetupResult<(u32, u32)> {
    let lookup = || -> SetupResult<Option<(u32, u32)>> {
        let passwd = fs::read_to_string("/etc/passwd")
            .layer(Layer::Identity, "failed to read /etc/passwd")?;
        Ok(parse_passwd_entry(&passwd, user))
    };
    let ids = match lookup()? {
        Some(ids) => ids,
        None => {
            let out = Command::new("useradd")
                .args([
                    "--system",
                    "--no-create-home",
                    "--user-group",
                    "--shell",
                    "/usr/sbin/nologin",
                    user,
                ])
                .env_clear()
                .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
                .output()
                .layer(Layer::Identity, "failed to run useradd")?;
            // Exit 9: created meanwhile by someone else; the lookup below decides.
            if !out.status.success() && out.status.code() != Some(9) {
                return Err(SetupError::new(
                    Layer::Identity,
                    format!(
                        "useradd {user} failed: {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    ),
                ));
            }
            lookup()?.ok_or_else(|| {
                SetupError::new(
                    Layer::Identity,
                    format!("user {user} missing after useradd"),
                )
            })?
        }
    };
    if ids.0 == 0 || ids.1 == 0 {
        return Err(SetupError::new(
            Layer::Identity,
            format!("user {user} has uid/gid 0; refusing to use it"),
        ));
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// Every slot leased: a spare gives up at once; a run asks (the hook) after each look that
    /// found none, and takes the slot that frees (as a spare's does once the warm server has
    /// sent it away).
    #[test]
    fn a_full_pool_makes_a_run_wait_and_ask_and_a_spare_give_up() {
        // A freed slot's lease locks its uid host-wide and makes its user.
        band_test::privileged!((!rustix::process::geteuid().is_root()).then(|| "not root".into()));
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir_all(leases_dir(tmp.path())).unwrap();
        let held: Vec<File> = (0..POOL_SIZE)
            .map(|slot| {
                let f = open_lock(tmp.path(), slot).unwrap();
                assert!(sys::try_lock_exclusive(f.file()).unwrap());
                f
            })
            .collect();
        let held = std::cell::RefCell::new(held);
        let no_dead: OnDeadLease<'_> = &|_, _| true;
        match acquire(tmp.path(), "spare", no_dead, WhenFull::GiveUp) {
            Err(e) => assert!(e.message.contains("run identities are in use"), "{e:?}"),
            Ok(l) => panic!("a spare took slot {} of a full pool", l.slot),
        }
        let asked = std::cell::Cell::new(0u32);
        let free_one = || {
            asked.set(asked.get() + 1);
            held.borrow_mut().pop();
        };
        let lease = match acquire(tmp.path(), "run", no_dead, WhenFull::Wait(&free_one)) {
            Ok(l) => l,
            Err(e) => panic!("{e:?}"),
        };
        assert!(asked.get() >= 1);
        assert!(
            lease.slot >= POOL_SIZE - asked.get(),
            "slot {} was never freed ({} asked)",
            lease.slot,
            asked.get()
        );
    }

    #[test]
    fn passwd_lookup() {
        let text = "root:x:0:0:root:/root:/bin/bash\nband-run-1:x:998:997::/:/usr/sbin/nologin\nband-run-10:x:990:990::/:/x\n";
        assert_eq!(parse_passwd_entry(text, "band-run-1"), Some((998, 997)));
        assert_eq!(parse_passwd_entry(text, "band-run-10"), Some((990, 990)));
        assert_eq!(parse_passwd_entry(text, "band-run-2"), None);
        assert_eq!(
            parse_passwd_entry("band-run-2:x:bad:1::/:/x", "band-run-2"),
            None
        );
    }

    #[test]
    fn the_lease_slots_are_the_pools_lease_files_from_one_listing_in_order() {
        let tmp = tempfile::tempdir().unwrap();
        // No leases folder yet: no slots, and no error.
        assert_eq!(lease_slots(tmp.path()), Vec::<u32>::new());
        let dir = leases_dir(tmp.path());
        fs::create_dir_all(&dir).unwrap();
        for name in [
            "12.lock",
            "0.lock",
            "3.lock",
            "hint",
            "07.lock",
            "64.lock",
            "x.lock",
            "5.lock.tmp",
        ] {
            fs::write(dir.join(name), "").unwrap();
        }
        // The same files as a look at each slot's lease_path: not the hint, not a name that is
        // no slot's (a leading zero, past the pool, not a number).
        assert_eq!(lease_slots(tmp.path()), vec![0, 3, 12]);
        let looked: Vec<u32> = (0..POOL_SIZE)
            .filter(|s| lease_path(tmp.path(), *s).exists())
            .collect();
        assert_eq!(lease_slots(tmp.path()), looked);
    }

    #[test]
    fn a_uid_lock_is_held_once_host_wide() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("uids");
        let held = try_lock_uid(&dir, 3).unwrap();
        assert!(held.is_some());
        // Another server (another open file description) cannot take it, whatever its state dir.
        assert!(try_lock_uid(&dir, 3).unwrap().is_none());
        assert!(try_lock_uid(&dir, 4).unwrap().is_some());
        drop(held);
        assert!(try_lock_uid(&dir, 3).unwrap().is_some());
        let mode = fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        // Not a directory: refused, naming it.
        let file = tmp.path().join("file");
        fs::write(&file, "").unwrap();
        assert!(try_lock_uid(&file, 0).is_err());
    }

    #[test]
    fn the_search_starts_at_the_hint_and_goes_round_the_whole_pool() {
        let order: Vec<u32> = search_order(0).collect();
        assert_eq!(order, (0..POOL_SIZE).collect::<Vec<_>>());
        let order: Vec<u32> = search_order(62).collect();
        assert_eq!(order[..4], [62, 63, 0, 1]);
        assert_eq!(order.len(), POOL_SIZE as usize);
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..POOL_SIZE).collect::<Vec<_>>());
        // Out of range: from the start again.
        assert_eq!(search_order(POOL_SIZE + 1).next(), Some(1));
    }

    #[test]
    fn the_hint_is_read_leniently_and_lowered_on_release() {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path();
        assert_eq!(read_hint(state), 0, "no leases folder yet");
        fs::create_dir_all(leases_dir(state)).unwrap();
        for bad in ["", "x", "64", "-1"] {
            fs::write(hint_path(state), bad).unwrap();
            assert_eq!(read_hint(state), 0, "{bad:?}");
        }
        write_hint(state, 17);
        assert_eq!(read_hint(state), 17);
        lower_hint(state, 20);
        assert_eq!(read_hint(state), 17, "a release above the hint leaves it");
        lower_hint(state, 3);
        assert_eq!(read_hint(state), 3);
    }

    /// The hint and the lease are rewritten in place, at one width: the file never shrinks (a
    /// truncation frees its block, a synchronous discard on ext4 mounted `discard` without a
    /// journal), and what is read back is always the last thing written.
    #[test]
    fn the_hint_and_the_lease_are_rewritten_in_place_never_truncated() {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path();
        fs::create_dir_all(leases_dir(state)).unwrap();
        let len = |p: &Path| fs::metadata(p).unwrap().len();
        write_hint(state, 63);
        let hint_len = len(&hint_path(state));
        for slot in [0, 7, 63, 5] {
            write_hint(state, slot);
            assert_eq!(read_hint(state), slot);
            assert_eq!(len(&hint_path(state)), hint_len);
        }

        let path = lease_path(state, 3);
        // An older band-server's record, longer than a record now: cut to the new one.
        fs::write(&path, format!("{:<80}\n", "1 ffffffffffffffff")).unwrap();
        let mut file = open_lock(state, 3).unwrap();
        write_lease(&file, 4_194_304, "0123456789abcdef").unwrap();
        assert_eq!(
            read_lease(&mut file),
            Some((4_194_304, "0123456789abcdef".into()))
        );
        let lease_len = len(&path);
        assert_eq!(lease_len, LEASE_WIDTH as u64 + 1);
        clear_lease(&file).unwrap();
        assert_eq!(read_lease(&mut file), None, "a cleared lease is free");
        assert_eq!(len(&path), lease_len);
        assert!(
            !fs::read_to_string(&path)
                .unwrap()
                .contains("0123456789abcdef")
        );
        write_lease(&file, 12, "00000000000000aa").unwrap();
        assert_eq!(read_lease(&mut file), Some((12, "00000000000000aa".into())));
        assert_eq!(len(&path), lease_len);
        // An empty (new) lease stays empty when cleared.
        let empty = open_lock(state, 4).unwrap();
        clear_lease(&empty).unwrap();
        assert_eq!(len(&lease_path(state, 4)), 0);
    }

    #[test]
    fn lease_content() {
        assert_eq!(
            parse_lease("123 0123456789abcdef\n"),
            Some((123, "0123456789abcdef".into()))
        );
        assert_eq!(parse_lease(""), None);
        assert_eq!(parse_lease("x y"), None);
        assert_eq!(user_name(63), "band-run-63");
    }
}
