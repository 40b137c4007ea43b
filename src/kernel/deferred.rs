//! Deferred work: a routine that runs later, outside the caller's context.
//!
//! In the kernel a [`Deferred`] is a DPC (`KDPC`): scheduling it while it is
//! already queued does nothing, and the routine runs at DISPATCH_LEVEL on some
//! processor. On the host it is the same contract served by a small pool of
//! worker threads. The queue holds a strong reference to the routine's owner,
//! so a routine never runs on freed memory however the owner is dropped.
//!
//! Like a DPC, a routine may be scheduled again while it runs and may then run
//! concurrently with itself on another processor: routines synchronize their
//! own state.
//!
//! Under `cfg(loom)` there are no background threads: [`Deferred::schedule`]
//! runs the routine inline, which is one of the schedules the real platform
//! allows.

use super::backend;
use alloc::sync::Arc;

/// Work that a [`Deferred`] runs.
pub trait DeferredRoutine: Send + Sync + 'static {
    /// Does the work. Runs at DISPATCH_LEVEL in the kernel: it must not block.
    fn run(&self);
}

/// What the platform queue holds: the platform's per-object slot (a `KDPC` in
/// the kernel) beside the routine.
pub(super) struct Inner<T> {
    #[cfg_attr(loom, allow(dead_code, reason = "under loom nothing is queued"))]
    pub(super) slot: backend::DpcSlot,
    pub(super) routine: T,
}

/// The kernel backends' half of the queue's strong reference: each insertion
/// of a `KDPC` that queues it carries one `Arc::into_raw` of its `Inner` as
/// the DPC's argument 1, which the DPC routine takes back when it runs
/// (`kdpc`, the DPC of the raw and the wdk backend alike).
#[cfg(target_os = "windows")]
impl<T: DeferredRoutine> Inner<T> {
    /// Queues `this` with `insert` (`kdpc`'s `KeInsertQueueDpc` of the
    /// slot, given argument 1; whether that queued the DPC), giving the
    /// insertion a strong reference when it queued.
    pub(super) fn insert_with_reference(
        this: &Arc<Self>,
        insert: impl FnOnce(*mut core::ffi::c_void) -> bool,
    ) -> bool {
        let reference = Arc::into_raw(Arc::clone(this));
        if insert(reference.cast_mut().cast()) {
            return true;
        }
        // Already queued: that insertion carries its own reference; drop ours.
        // SAFETY: `reference` came from `Arc::into_raw` above and the kernel
        // did not take it (nothing was queued), so it is reclaimed exactly
        // once here.
        drop(unsafe { Arc::from_raw(reference) });
        false
    }

    /// The DPC routine's body: takes back the reference of the insertion
    /// that is running and runs the routine.
    ///
    /// # Safety
    /// `argument` is argument 1 of an insertion by
    /// [`insert_with_reference`](Self::insert_with_reference) that queued,
    /// and the kernel runs each such insertion exactly once.
    pub(super) unsafe fn run_inserted(argument: *mut core::ffi::c_void) {
        // SAFETY: the reference `insert_with_reference` gave the insertion
        // (caller contract), reclaimed once.
        let inner = unsafe { Arc::from_raw(argument.cast::<Self>().cast_const()) };
        inner.routine.run();
    }
}

/// A routine that can be scheduled to run later (a DPC in the kernel).
pub struct Deferred<T: DeferredRoutine> {
    inner: Arc<Inner<T>>,
}

impl<T: DeferredRoutine> Clone for Deferred<T> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<T: DeferredRoutine> Deferred<T> {
    /// Wraps `routine`; nothing runs until [`schedule`](Self::schedule).
    pub fn new(routine: T) -> Self {
        let inner = Arc::new(Inner {
            slot: backend::DpcSlot::new(),
            routine,
        });
        backend::dpc_init(&inner);
        Self { inner }
    }

    /// The wrapped routine.
    pub fn routine(&self) -> &T {
        &self.inner.routine
    }

    /// Queues the routine to run once, soon, on some processor.
    ///
    /// Returns `false` when it was already queued and has not started yet (the
    /// queued run will see whatever state the caller just published).
    pub fn schedule(&self) -> bool {
        #[cfg(loom)]
        {
            self.inner.routine.run();
            true
        }
        #[cfg(not(loom))]
        {
            backend::dpc_schedule(&self.inner)
        }
    }
}

/// Waits until every deferred routine queued so far has run (PASSIVE_LEVEL
/// only; `KeFlushQueuedDpcs` in the kernel). Used before unload and in tests.
pub fn flush() {
    backend::dpc_flush();
}

#[cfg(test)]
#[cfg(not(loom))]
mod tests {
    use super::*;
    use crate::kernel::sync::atomic::{AtomicUsize, Ordering};

    struct Counter(AtomicUsize);
    impl DeferredRoutine for Counter {
        fn run(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn test_deferred_runs_scheduled_routine() {
        let work = Deferred::new(Counter(AtomicUsize::new(0)));
        assert!(work.schedule());
        flush();
        assert_eq!(work.routine().0.load(Ordering::SeqCst), 1);
        assert!(work.schedule());
        flush();
        assert_eq!(work.routine().0.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn test_deferred_runs_after_the_workers_parked() {
        // Longer than the workers' spin: they have parked, and a schedule
        // must wake one (no lost wake-up).
        let work = Deferred::new(Counter(AtomicUsize::new(0)));
        for round in 1..=3 {
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert!(work.schedule());
            flush();
            assert_eq!(work.routine().0.load(Ordering::SeqCst), round);
        }
    }

    struct Gate {
        open: std::sync::Mutex<bool>,
        cv: std::sync::Condvar,
        runs: AtomicUsize,
    }
    impl DeferredRoutine for Gate {
        fn run(&self) {
            let mut open = self.open.lock().unwrap();
            while !*open {
                open = self.cv.wait(open).unwrap();
            }
            self.runs.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn test_deferred_schedule_while_queued_is_coalesced() {
        // Block the pool's workers so that the routine under test stays queued.
        let gate = Deferred::new(Gate {
            open: std::sync::Mutex::new(false),
            cv: std::sync::Condvar::new(),
            runs: AtomicUsize::new(0),
        });
        let blockers: Vec<_> = (0..super::backend::WORKERS)
            .map(|_| {
                let g = Deferred::new(Gate {
                    open: std::sync::Mutex::new(false),
                    cv: std::sync::Condvar::new(),
                    runs: AtomicUsize::new(0),
                });
                assert!(g.schedule());
                g
            })
            .collect();
        assert!(gate.schedule());
        assert!(!gate.schedule(), "a queued routine is queued once");
        for g in blockers.iter().chain(core::iter::once(&gate)) {
            *g.routine().open.lock().unwrap() = true;
            g.routine().cv.notify_all();
        }
        flush();
        assert_eq!(gate.routine().runs.load(Ordering::SeqCst), 1);
    }
}
