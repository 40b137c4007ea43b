//! The host backend: std threads, locks and the system allocator.
//!
//! Used for every non-Windows build: the unit and conformance tests, the
//! benchmarks, and the user-mode host library.

use super::deferred::{DeferredRoutine, Inner};
use alloc::sync::Arc;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, OnceLock, PoisonError};

/// Worker threads serving deferred routines (the host's "processors").
pub(super) const WORKERS: usize = 2;

/// Per-[`Deferred`](super::deferred::Deferred) state: whether it is queued.
pub(super) struct DpcSlot {
    queued: AtomicBool,
}

impl DpcSlot {
    pub(super) const fn new() -> Self {
        Self {
            queued: AtomicBool::new(false),
        }
    }
}

trait Job: Send + Sync {
    fn execute(&self);
}

impl<T: DeferredRoutine> Job for Inner<T> {
    fn execute(&self) {
        // Like a KDPC, the object leaves the queue before its routine runs, so
        // the routine (or anyone) may queue it again meanwhile.
        self.slot.queued.store(false, Ordering::SeqCst);
        self.routine.run();
    }
}

#[derive(Default)]
struct QueueState {
    jobs: VecDeque<Arc<dyn Job>>,
    running: usize,
}

struct Pool {
    state: Mutex<QueueState>,
    work: Condvar,
    idle: Condvar,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<&'static Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let pool: &'static Pool = Box::leak(Box::new(Pool {
            state: Mutex::new(QueueState::default()),
            work: Condvar::new(),
            idle: Condvar::new(),
        }));
        for n in 0..WORKERS {
            // A failure to start a worker leaves fewer workers; with none at
            // all, deferred work would never run, which `dpc_flush` would show.
            let _ = std::thread::Builder::new()
                .name(format!("softndk-dpc-{n}"))
                .spawn(move || worker(pool));
        }
        pool
    })
}

fn worker(pool: &'static Pool) {
    let mut state = pool.state.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        if let Some(job) = state.jobs.pop_front() {
            state.running += 1;
            drop(state);
            job.execute();
            drop(job);
            state = pool.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.running -= 1;
            if state.jobs.is_empty() && state.running == 0 {
                pool.idle.notify_all();
            }
        } else {
            state = pool
                .work
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

pub(super) fn dpc_init<T: DeferredRoutine>(_inner: &Arc<Inner<T>>) {}

#[cfg(not(loom))]
pub(super) fn dpc_schedule<T: DeferredRoutine>(inner: &Arc<Inner<T>>) -> bool {
    if inner.slot.queued.swap(true, Ordering::SeqCst) {
        return false;
    }
    let job: Arc<dyn Job> = Arc::clone(inner) as Arc<dyn Job>;
    let pool = pool();
    pool.state
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .jobs
        .push_back(job);
    pool.work.notify_one();
    true
}

pub(super) fn dpc_flush() {
    let pool = pool();
    let mut state = pool.state.lock().unwrap_or_else(PoisonError::into_inner);
    while !state.jobs.is_empty() || state.running != 0 {
        state = pool
            .idle
            .wait(state)
            .unwrap_or_else(PoisonError::into_inner);
    }
}

pub(super) fn debug_print(_level: super::log::Level, message: &super::log::Message) {
    // Quiet unless asked for, so that test output stays readable.
    static ENABLED: OnceLock<bool> = OnceLock::new();
    if *ENABLED.get_or_init(|| std::env::var_os("SOFTNDK_LOG").is_some()) {
        eprint!("{}", message.as_str());
    }
}

/// The host's bug check: the process aborts (the code and parameters were
/// reported by the caller).
pub(super) fn bug_check_ex(_code: u32, _parameters: [usize; 4]) -> ! {
    std::process::abort()
}

pub(super) fn monotonic_100ns() -> u64 {
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    let elapsed = START.get_or_init(std::time::Instant::now).elapsed();
    u64::try_from(elapsed.as_nanos() / 100).unwrap_or(u64::MAX)
}

pub(super) fn sleep_100ns(duration: u64) {
    std::thread::sleep(std::time::Duration::from_nanos(
        duration.saturating_mul(100),
    ));
}
