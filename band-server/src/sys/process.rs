//! Processes: signals, reaping orphans, a single-threaded `fork`, ids, and the scheduling
//! policy of a thread.

use std::io;

use super::check;

/// Make the calling thread `SCHED_BATCH`: woken, it does not preempt the task running on its
/// CPU, but waits for that task to block or use up its slice. For band-shim's gate (issue 17,
/// round 20): a worker woken by band-shim's `connect` used to preempt band-shim before its
/// request was written, only to block on the read and switch back; now band-shim writes its
/// request and blocks on the answer first, and the worker finds the request there (two context
/// switches fewer a command). Otherwise scheduled as any thread: it gets its share of the CPU,
/// but on a CPU busy with other work it can wait for the running task's slice.
pub(crate) fn set_batch_scheduling() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid sched_param for the duration of the call; pid 0 is the calling
    // thread.
    check(unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) }).map(|_| ())
}

#[cfg(test)]
/// The calling thread's scheduling policy (`SCHED_OTHER`, `SCHED_BATCH`, …).
pub(crate) fn scheduling_policy() -> io::Result<i32> {
    // SAFETY: plain syscall on an integer; pid 0 is the calling thread.
    check(unsafe { libc::sched_getscheduler(0) })
}

/// `kill(pid, sig)`; ESRCH (already gone) is success.
pub(crate) fn kill(pid: i32, sig: i32) -> io::Result<()> {
    if pid <= 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "refusing to signal a process group",
        ));
    }
    // SAFETY: plain syscall on integers.
    let rc = unsafe { libc::kill(pid, sig) };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::ESRCH) {
        Ok(())
    } else {
        Err(err)
    }
}

/// `prctl(PR_SET_CHILD_SUBREAPER, 1)`: orphans below this process are handed to it, not to the
/// host's init (band-server reaps them at the end of the run: [`reap_any`]).
pub(crate) fn set_child_subreaper() -> io::Result<()> {
    // SAFETY: prctl with integer arguments.
    check(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }).map(|_| ())
}

/// What [`reap`] found of one child.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub(crate) enum Reaped {
    /// It is still running.
    Running,
    /// It had exited, and is reaped now.
    Now,
    /// It is not (or no longer) a child of ours: reaped before, by [`reap_any`] say.
    Before,
}

/// `waitpid(pid, WNOHANG)`: reap the child `pid` if it has exited.
pub(crate) fn reap(pid: i32) -> io::Result<Reaped> {
    let mut status: libc::c_int = 0;
    // SAFETY: `status` is a valid c_int for writes; plain syscall otherwise.
    let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    match rc {
        0 => Ok(Reaped::Running),
        _ if rc == pid => Ok(Reaped::Now),
        _ => {
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::ECHILD) {
                Ok(Reaped::Before)
            } else {
                Err(err)
            }
        }
    }
}

/// `waitpid(-1, WNOHANG)`: reap one child of ours that has exited. `Ok(Some(pid))` when one
/// was reaped, `Ok(None)` when none has exited (or there is no child at all).
pub(crate) fn reap_any() -> io::Result<Option<i32>> {
    waitpid_any(libc::WNOHANG)
}

/// `waitpid(-1, 0)`: wait for a child of ours to end and reap it. `Ok(None)` when there is no
/// child left.
pub(crate) fn wait_any() -> io::Result<Option<i32>> {
    waitpid_any(0)
}

/// `waitpid(-1, options)`: the pid reaped, `None` when none was (`WNOHANG` and none has ended,
/// or no child at all).
fn waitpid_any(options: libc::c_int) -> io::Result<Option<i32>> {
    let mut status: libc::c_int = 0;
    // SAFETY: `status` is a valid c_int for writes; plain syscall otherwise.
    let rc = unsafe { libc::waitpid(-1, &mut status, options) };
    if rc >= 0 {
        return Ok((rc > 0).then_some(rc));
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::ECHILD) => Ok(None),
        _ => Err(err),
    }
}

/// `fork()` for a process with one thread (`band-server serve`'s accept loop): `Ok(None)` in the
/// child, `Ok(Some(pid))` in the parent. Refused when `/proc/self/task` lists more than one
/// thread, since the child of a multi-threaded fork may find locks held by threads it lacks.
pub(crate) fn fork_single_threaded() -> io::Result<Option<i32>> {
    let threads = fs_err::read_dir("/proc/self/task")?.count();
    if threads != 1 {
        return Err(io::Error::other(format!(
            "refusing to fork a process with {threads} threads"
        )));
    }
    // SAFETY: this process has one thread (checked above; only this thread could start another),
    // so the child gets a consistent copy of memory and of every lock; it then runs ordinary Rust.
    let pid = check(unsafe { libc::fork() })?;
    Ok((pid != 0).then_some(pid))
}

/// Set by [`catch_stop_signals`]'s handler.
static STOP_ASKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn note_stop(_sig: libc::c_int) {
    // Async-signal-safe: one atomic store.
    STOP_ASKED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// SIGTERM and SIGINT set a flag ([`stop_asked`]) instead of ending the process: `band-server
/// serve` stops its way (its socket removed, its children sent away and waited for). With
/// `SA_RESTART`, so that only calls that are never restarted (`poll`) see `EINTR`. A handler is
/// reset to the default action by `exec`; a forked child that does not exec puts the default
/// back itself ([`default_stop_signals`]).
pub(crate) fn catch_stop_signals() -> io::Result<()> {
    set_action(STOP_SIGNALS, note_stop as *const () as libc::sighandler_t)
}

/// SIGTERM and SIGINT back to their default action (in a child forked after
/// [`catch_stop_signals`]: a run's child ends on them as `band-server run` does).
pub(crate) fn default_stop_signals() -> io::Result<()> {
    set_action(STOP_SIGNALS, libc::SIG_DFL)
}

const STOP_SIGNALS: &[libc::c_int] = &[libc::SIGTERM, libc::SIGINT];

/// `handler` for each of `signals`, with `SA_RESTART` and an empty mask.
fn set_action(signals: &[libc::c_int], handler: libc::sighandler_t) -> io::Result<()> {
    for &sig in signals {
        // SAFETY: `act` is zeroed (an empty mask, no flags) and then given a handler that is
        // SIG_DFL, `note_stop` or `note_leave`, each of which only stores to an atomic
        // (async-signal-safe); sigaction reads `act` and writes no old action (null).
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = handler;
            act.sa_flags = libc::SA_RESTART;
            check(libc::sigemptyset(&mut act.sa_mask))?;
            check(libc::sigaction(sig, &act, std::ptr::null_mut()))?;
        }
    }
    Ok(())
}

/// Whether SIGTERM or SIGINT came since [`catch_stop_signals`].
pub(crate) fn stop_asked() -> bool {
    STOP_ASKED.load(std::sync::atomic::Ordering::SeqCst)
}

/// Set by [`catch_leave_signal`]'s handler.
static LEAVE_ASKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn note_leave(_sig: libc::c_int) {
    // Async-signal-safe: one atomic store.
    LEAVE_ASKED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// SIGUSR2 sets a flag ([`leave_asked`]): a run of another server that waits for a uid asks a
/// waiting spare to leave with it (`layers::identity::idle`). Installed by `band-server serve`
/// and inherited by its forked children; a child that is not a waiting spare never reads the
/// flag, so the signal does nothing to it. `exec` resets it. With `SA_RESTART`, as the stop
/// signals.
pub(crate) fn catch_leave_signal() -> io::Result<()> {
    set_action(
        &[libc::SIGUSR2],
        note_leave as *const () as libc::sighandler_t,
    )
}

/// Whether SIGUSR2 came since [`clear_leave_asked`] (or the start).
pub(crate) fn leave_asked() -> bool {
    LEAVE_ASKED.load(std::sync::atomic::Ordering::SeqCst)
}

/// Forget a SIGUSR2 that came before now (a spare about to wait again).
pub(crate) fn clear_leave_asked() {
    LEAVE_ASKED.store(false, std::sync::atomic::Ordering::SeqCst);
}

/// `getpid()`.
pub(crate) fn pid() -> i32 {
    // SAFETY: getpid cannot fail and takes no arguments.
    unsafe { libc::getpid() }
}

/// `geteuid()`.
pub fn euid() -> u32 {
    // SAFETY: geteuid cannot fail and takes no arguments.
    unsafe { libc::geteuid() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_made_batch_is_batch_and_others_are_not() {
        let (before, after) = std::thread::spawn(|| {
            let before = scheduling_policy().unwrap();
            set_batch_scheduling().unwrap();
            (before, scheduling_policy().unwrap())
        })
        .join()
        .unwrap();
        assert_eq!((before, after), (libc::SCHED_OTHER, libc::SCHED_BATCH));
        assert_eq!(scheduling_policy().unwrap(), libc::SCHED_OTHER);
    }
}
