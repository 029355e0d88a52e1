//! The teardown guard of a run: the built layers ([`Built`]), torn down in reverse order exactly
//! once.

use std::any::Any;
use std::marker::PhantomData;
use std::process::Child;

/// Everything built for a run, torn down in reverse order exactly once (explicitly, or on drop
/// during a panic): first every layer stops what runs (the cgroup is killed, then the uid's
/// processes), then bubblewrap is reaped, then every layer removes what it built.
pub struct RunGuard {
    /// Which guard this is, for its [`Held`] handles.
    id: u64,
    pub(crate) child: Option<Child>,
    built: Vec<Box<dyn Built>>,
    /// Set by [`RunGuard::stop`]: what the stop phase found, for [`RunGuard::remove`].
    stopped: Option<Teardown>,
}

/// A typed handle on what one [`RunGuard::push`] kept: the step that built it hands it to whoever
/// needs that layer later (the run loop reads the run's cgroup through one), so what is asked for
/// is always what was built. It reads nothing once the guard has torn that layer down.
pub struct Held<T> {
    guard: u64,
    index: usize,
    kind: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for Held<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Held<{}>({})", std::any::type_name::<T>(), self.index)
    }
}

impl Default for RunGuard {
    fn default() -> RunGuard {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        RunGuard {
            id: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            child: None,
            built: Vec::new(),
            stopped: None,
        }
    }
}

impl RunGuard {
    /// Keep a built layer, to be torn down before everything kept earlier; the handle reads it
    /// back.
    pub fn push<T: Built + 'static>(&mut self, layer: T) -> Held<T> {
        self.built.push(Box::new(layer));
        Held {
            guard: self.id,
            index: self.built.len() - 1,
            kind: PhantomData,
        }
    }

    /// Keep what another guard kept (the run directory, made beside the other steps), as if
    /// pushed now. (The other guard's handles read nothing of this one.)
    pub(crate) fn absorb(&mut self, mut other: RunGuard) {
        self.built.append(&mut other.built);
        debug_assert!(other.child.is_none() && other.stopped.is_none());
    }

    /// What `held` names, while the guard keeps it (none once torn down).
    pub fn get<T: 'static>(&self, held: &Held<T>) -> Option<&T> {
        if held.guard != self.id {
            return None;
        }
        self.built.get(held.index)?.as_any().downcast_ref()
    }

    /// [`RunGuard::get`], to change it.
    pub(crate) fn get_mut<T: 'static>(&mut self, held: &Held<T>) -> Option<&mut T> {
        if held.guard != self.id {
            return None;
        }
        self.built.get_mut(held.index)?.as_any_mut().downcast_mut()
    }

    /// Kill and remove everything. Returns the problems met (logged by the caller).
    pub fn teardown(&mut self) -> Vec<String> {
        self.remove()
    }

    /// The first half of [`RunGuard::teardown`]: every layer stops what runs (in reverse order
    /// of building), then bubblewrap is reaped. Nothing of the run runs after it; what was built
    /// is still there, for [`RunGuard::remove`]. Runs once (later calls do nothing).
    pub(crate) fn stop(&mut self) {
        if self.stopped.is_some() {
            return;
        }
        let mut t = Teardown {
            processes_dead: true,
            clean: true,
            errors: Vec::new(),
        };
        for b in self.built.iter_mut().rev() {
            b.stop(&mut t);
        }
        if let Some(mut child) = self.child.take() {
            // The child is bubblewrap, pid 1 of the run's pid namespace (`sys::PreExec`): the
            // cgroup's kill above has ended it unless it never joined the cgroup (a spawn that
            // failed before). Killed, every process of the namespace goes with it; reaped here.
            let _ = child.kill();
            let _ = child.wait();
        }
        self.stopped = Some(t);
    }

    /// The second half of [`RunGuard::teardown`] (after [`RunGuard::stop`], which it runs first
    /// if it has not run): every layer removes what it built, in reverse order, with what the
    /// stop phase found. Returns the problems met.
    pub(crate) fn remove(&mut self) -> Vec<String> {
        self.stop();
        let Some(mut t) = self.stopped.take() else {
            return Vec::new();
        };
        while let Some(b) = self.built.pop() {
            b.teardown(&mut t);
        }
        t.errors
    }
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        for e in self.teardown() {
            crate::say!("band-server: teardown: {e}");
        }
    }
}

/// What a run's teardown knows as it goes.
#[derive(Debug)]
pub struct Teardown {
    /// Nothing of the run is alive any more (decided by the stop phase).
    pub(crate) processes_dead: bool,
    /// Everything removed so far is gone; otherwise the lease keeps naming the run, and the
    /// janitor finishes the job.
    pub(crate) clean: bool,
    pub errors: Vec<String>,
}

/// One layer built for a live run, kept by the run's guard.
pub trait Built: Send {
    /// First phase, in reverse order of building: kill what runs.
    fn stop(&mut self, _t: &mut Teardown) {}
    /// Second phase, in reverse order of building: remove what was built. Called once.
    fn teardown(self: Box<Self>, t: &mut Teardown);
    /// For [`RunGuard::get`], which reads it back through its [`Held`] handle.
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// `as_any` / `as_any_mut` for a [`Built`] implementation.
macro_rules! built_any {
    () => {
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
        fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
            self
        }
    };
}
pub(crate) use built_any;
