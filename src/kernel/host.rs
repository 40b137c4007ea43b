//! The host backend: std threads, locks and the system allocator.
//!
//! Used for every non-Windows build: the unit and conformance tests, the
//! benchmarks, and the user-mode host library.

use super::deferred::{DeferredRoutine, Inner};
use super::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use alloc::sync::Arc;
#[cfg(loom)]
use loom::sync::{Condvar, Mutex, MutexGuard};
use std::collections::VecDeque;
#[cfg(not(loom))]
use std::sync::{Condvar, Mutex, MutexGuard};
use std::sync::{OnceLock, PoisonError};

/// Worker threads serving deferred routines (the host's "processors").
#[cfg(not(loom))]
pub(super) const WORKERS: usize = 2;

/// How long an idle worker keeps looking for work before it parks, so that
/// the next request of a ping-pong (a few microseconds away) is handed over
/// without a futex wake-up and a thread switch; bounded, so that an idle
/// device burns no core.
#[cfg(not(loom))]
const SPIN: std::time::Duration = std::time::Duration::from_micros(64);

/// Pure `spin_loop` checks before the spinning worker yields its core
/// between checks (2 cores shared with the consumer's threads).
#[cfg(not(loom))]
const SPINS_BEFORE_YIELD: u32 = 64;

/// Per-[`Deferred`](super::deferred::Deferred) state: whether it is queued.
#[cfg_attr(loom, allow(dead_code, reason = "under loom nothing is queued"))]
pub(super) struct DpcSlot {
    // The platform's own atomic, not loom's: `new` is `const` and under loom
    // nothing is queued (`Deferred::schedule` runs the routine).
    queued: core::sync::atomic::AtomicBool,
}

impl DpcSlot {
    pub(super) const fn new() -> Self {
        Self {
            queued: core::sync::atomic::AtomicBool::new(false),
        }
    }
}

#[cfg(not(loom))]
trait Job: Send + Sync {
    fn execute(&self);
}

#[cfg(not(loom))]
impl<T: DeferredRoutine> Job for Inner<T> {
    fn execute(&self) {
        // Like a KDPC, the object leaves the queue before its routine runs, so
        // the routine (or anyone) may queue it again meanwhile.
        self.slot.queued.store(false, Ordering::SeqCst);
        self.routine.run();
    }
}

/// What the pool's lock protects.
struct QueueState<J> {
    jobs: VecDeque<J>,
    /// Jobs taken and not yet [`done`](Pool::done).
    running: usize,
    /// Workers waiting on `work` that no post has signalled yet.
    parked: usize,
    /// Signals sent to parked workers and not yet consumed: a worker leaves
    /// its wait only by consuming one, so that a spurious wake-up is waited
    /// out and a post never signals a worker already signalled.
    wakeups: usize,
    /// Threads in [`flush`](Pool::flush).
    flushing: usize,
}

/// The worker pool's queue and its hand-off (`J`: a job).
///
/// A post pushes under the lock and signals a parked worker only when no
/// worker is spinning and the running workers cannot take every queued job
/// ([`wake_one`](Self::wake_one)): the common hand-off of a busy device is a
/// push that the spinning worker, or the one finishing the previous job,
/// sees, with no system call on either side.
///
/// No lost wake-up: a worker parks only after re-checking the queue under
/// the lock, counted in `parked` in the same critical section, and a post
/// decides whether to signal under that lock, after its push. Either the
/// worker's check comes after the push (it sees the job) or the post sees
/// the worker parked (it signals it). A post that sees `spinning` skips the
/// signal: the spinner clears `spinning` before its own check under the lock,
/// so if the post still saw it set, that check comes after the push. A post
/// that skips the signal because workers are running counts on each of them
/// looking at the queue (`take`) when its job is done. The loom models below
/// check this.
struct Pool<J> {
    state: Mutex<QueueState<J>>,
    work: Condvar,
    idle: Condvar,
    /// Jobs queued and not yet taken: what the spinning worker watches
    /// without the lock (a hint; the lock's queue is the truth).
    queued: AtomicUsize,
    /// A worker is spinning for work (at most one spins at a time).
    spinning: AtomicBool,
    /// Models only: a worker parks without re-checking the queue (the
    /// injected lost wake-up the models must catch).
    #[cfg(loom)]
    skip_recheck: bool,
}

impl<J> Pool<J> {
    fn new() -> Self {
        Self {
            state: Mutex::new(QueueState {
                jobs: VecDeque::new(),
                running: 0,
                parked: 0,
                wakeups: 0,
                flushing: 0,
            }),
            work: Condvar::new(),
            idle: Condvar::new(),
            queued: AtomicUsize::new(0),
            spinning: AtomicBool::new(false),
            #[cfg(loom)]
            skip_recheck: false,
        }
    }

    fn lock(&self) -> MutexGuard<'_, QueueState<J>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Under the lock: whether a parked worker must be signalled for the
    /// jobs in the queue; if so, counts the signal.
    ///
    /// Not when none is parked, nor when one spins (it takes the job), nor
    /// when the workers that will look at the queue before they park — each
    /// running a job (it takes the next when it is done) or signalled and
    /// not yet up — are at least as many as the jobs queued: in a ping-pong
    /// the next request is posted while the worker still finishes the one
    /// that completed it, and waking the parked worker for it made both
    /// workers, and the futex, part of every round trip
    /// (docs/performance.md, *Profile of the deferred ping-pong*).
    fn wake_one(&self, state: &mut QueueState<J>) -> bool {
        if state.parked == 0 || self.spinning.load(Ordering::SeqCst) {
            return false;
        }
        if state.jobs.len() <= state.running.saturating_add(state.wakeups) {
            return false;
        }
        state.parked -= 1;
        state.wakeups = state.wakeups.saturating_add(1);
        true
    }

    /// Queues `job` and makes sure a worker will take it.
    fn post(&self, job: J) {
        let wake = {
            let mut state = self.lock();
            state.jobs.push_back(job);
            self.queued.fetch_add(1, Ordering::SeqCst);
            self.wake_one(&mut state)
        };
        if wake {
            self.work.notify_one();
        }
    }

    /// The next job for a worker: from the queue, after a bounded spin
    /// (`spin` returns `false` when it gave up), or after parking.
    fn take(&self, spin: impl FnMut(&Self) -> bool) -> J {
        self.take_looking(spin, true)
    }

    /// [`take`](Self::take); with `look == false` (the models' injected bug
    /// only) the worker parks at once, without looking at the queue, as a
    /// worker back from a job must not: a post that saw it running counted
    /// on that look instead of signalling a parked worker.
    fn take_looking(&self, mut spin: impl FnMut(&Self) -> bool, mut look: bool) -> J {
        loop {
            let mut state = self.lock();
            if !look {
                look = true;
                drop(self.park(state));
                continue;
            }
            if let Some(job) = state.jobs.pop_front() {
                self.queued.fetch_sub(1, Ordering::SeqCst);
                state.running = state.running.saturating_add(1);
                // More queued: another worker may run it meanwhile.
                let wake = !state.jobs.is_empty() && self.wake_one(&mut state);
                drop(state);
                if wake {
                    self.work.notify_one();
                }
                return job;
            }
            drop(state);
            if self
                .spinning
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                let found = spin(self);
                // Before the check under the lock below (see `Pool`).
                self.spinning.store(false, Ordering::SeqCst);
                if found {
                    continue;
                }
            }
            state = self.lock();
            // Always re-checked, but in the models' injected bug.
            #[cfg(loom)]
            let recheck = !self.skip_recheck;
            #[cfg(not(loom))]
            let recheck = true;
            if recheck && !state.jobs.is_empty() {
                continue;
            }
            drop(self.park(state));
        }
    }

    /// Parks the calling worker until a post signals it (consuming the
    /// signal).
    fn park<'a>(
        &'a self,
        mut state: MutexGuard<'a, QueueState<J>>,
    ) -> MutexGuard<'a, QueueState<J>> {
        state.parked = state.parked.saturating_add(1);
        while state.wakeups == 0 {
            state = self
                .work
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state.wakeups -= 1;
        state
    }

    /// A worker finished a job taken with [`take`](Self::take).
    fn done(&self) {
        let mut state = self.lock();
        state.running = state.running.saturating_sub(1);
        if state.jobs.is_empty() && state.running == 0 && state.flushing != 0 {
            self.idle.notify_all();
        }
    }

    /// Waits until the queue is empty and no job runs.
    fn flush(&self) {
        let mut state = self.lock();
        while !state.jobs.is_empty() || state.running != 0 {
            state.flushing = state.flushing.saturating_add(1);
            state = self
                .idle
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
            state.flushing = state.flushing.saturating_sub(1);
        }
    }
}

/// The spin of an idle worker: watches `queued` for [`SPIN`], yielding the
/// core between checks after [`SPINS_BEFORE_YIELD`] of them; `true` when
/// work arrived.
#[cfg(not(loom))]
fn spin_for_work<J>(pool: &Pool<J>) -> bool {
    let start = std::time::Instant::now();
    let mut spins = 0_u32;
    loop {
        if pool.queued.load(Ordering::SeqCst) != 0 {
            return true;
        }
        if spins < SPINS_BEFORE_YIELD {
            spins += 1;
            core::hint::spin_loop();
        } else {
            if start.elapsed() > SPIN {
                return false;
            }
            std::thread::yield_now();
        }
    }
}

#[cfg(not(loom))]
type HostPool = Pool<Arc<dyn Job>>;

#[cfg(not(loom))]
fn pool() -> &'static HostPool {
    static POOL: OnceLock<&'static HostPool> = OnceLock::new();
    POOL.get_or_init(|| {
        let pool: &'static HostPool = Box::leak(Box::new(Pool::new()));
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

#[cfg(not(loom))]
fn worker(pool: &'static HostPool) {
    loop {
        let job = pool.take(spin_for_work);
        job.execute();
        drop(job);
        pool.done();
    }
}

pub(super) fn dpc_init<T: DeferredRoutine>(_inner: &Arc<Inner<T>>) {}

#[cfg(not(loom))]
pub(super) fn dpc_schedule<T: DeferredRoutine>(inner: &Arc<Inner<T>>) -> bool {
    if inner.slot.queued.swap(true, Ordering::SeqCst) {
        return false;
    }
    let job: Arc<dyn Job> = Arc::clone(inner) as Arc<dyn Job>;
    pool().post(job);
    true
}

#[cfg(not(loom))]
pub(super) fn dpc_flush() {
    pool().flush();
}

/// Under loom nothing is queued (`Deferred::schedule` runs the routine).
#[cfg(loom)]
pub(super) fn dpc_flush() {}

pub(super) fn debug_print(_level: super::log::Level, message: &super::log::Message) {
    use std::io::Write as _;
    // Quiet unless asked for, so that test output stays readable.
    static ENABLED: OnceLock<bool> = OnceLock::new();
    if *ENABLED.get_or_init(|| std::env::var_os("SOFTNDK_LOG").is_some()) {
        // Never `eprint!`: it panics when standard error cannot be written
        // (a closed pipe, a full disk), and this runs inside the dispatch
        // thunks and callbacks, where a panic cannot unwind and aborts the
        // process. A line the stream refuses is dropped, as the kernel's
        // debugger buffer drops what it has no room for.
        let _ = std::io::stderr().write_all(message.as_str().as_bytes());
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

#[cfg(all(test, loom))]
mod loom_tests {
    //! Loom models of the worker pool's hand-off (`Pool::post` / `take` /
    //! `done` / `flush`): every interleaving of posts, spins and parks (with
    //! the preemptions bounded where two workers make the space large); a
    //! lost wake-up shows as a deadlock (every thread blocked), which loom
    //! reports. `loom_lost_wakeup_is_caught` and
    //! `loom_blind_worker_after_job_is_caught` check that the models can fail.

    use super::*;
    use loom::thread;

    /// One look at the queue, as the spin's last check before it gives up.
    fn spin_once(pool: &Pool<usize>) -> bool {
        thread::yield_now();
        pool.queued.load(Ordering::SeqCst) != 0
    }

    /// The job that stops a model's worker: the worker takes it, finishes
    /// it and queues it again for the next, so that it is never lost.
    const STOP: usize = 0;

    /// Two workers take jobs until [`STOP`] while jobs 1 and 2 and then
    /// [`STOP`] are posted: each job must be run once, by a worker that
    /// found it (spinning, or back from a job) or was woken for it. With
    /// `look_after_job == false` a worker back from a job parks without
    /// looking at the queue (the injected bug).
    fn two_workers_two_posts(pool: Pool<usize>, look_after_job: bool) {
        let pool = Arc::new(pool);
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let pool = Arc::clone(&pool);
                thread::spawn(move || {
                    let mut got = Vec::new();
                    let mut look = true;
                    loop {
                        let job = pool.take_looking(spin_once, look);
                        look = look_after_job;
                        pool.done();
                        if job == STOP {
                            pool.post(STOP);
                            return got;
                        }
                        got.push(job);
                    }
                })
            })
            .collect();
        pool.post(1);
        pool.post(2);
        pool.post(STOP);
        let mut got: Vec<_> = workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect();
        got.sort_unstable();
        assert_eq!(got, [1, 2]);
    }

    fn bounded(preemptions: usize) -> loom::model::Builder {
        let mut model = loom::model::Builder::new();
        model.preemption_bound = Some(preemptions);
        model
    }

    #[test]
    fn loom_one_worker_takes_every_post() {
        loom::model(|| {
            let pool = Arc::new(Pool::<usize>::new());
            let worker = {
                let pool = Arc::clone(&pool);
                thread::spawn(move || {
                    let mut got = 0;
                    for _ in 0..2 {
                        got += pool.take(spin_once);
                        pool.done();
                    }
                    got
                })
            };
            pool.post(1);
            pool.post(2);
            assert_eq!(worker.join().unwrap(), 3);
        });
    }

    #[test]
    fn loom_two_workers_two_posts_no_lost_wakeup() {
        bounded(3).check(|| two_workers_two_posts(Pool::new(), true));
    }

    #[test]
    fn loom_flush_returns_after_the_job_ran() {
        loom::model(|| {
            let pool = Arc::new(Pool::<usize>::new());
            let ran = Arc::new(AtomicUsize::new(0));
            let worker = {
                let (pool, ran) = (Arc::clone(&pool), Arc::clone(&ran));
                thread::spawn(move || {
                    let job = pool.take(spin_once);
                    ran.store(job, Ordering::SeqCst);
                    pool.done();
                })
            };
            pool.post(7);
            pool.flush();
            assert_eq!(ran.load(Ordering::SeqCst), 7);
            worker.join().unwrap();
        });
    }

    /// The injected bug: a worker parks without re-checking the queue under
    /// the lock. A post that came between its spin and its park then finds
    /// no parked worker to signal, and the job waits forever.
    #[test]
    #[should_panic(expected = "deadlock")]
    fn loom_lost_wakeup_is_caught() {
        bounded(3).check(|| {
            let mut pool = Pool::new();
            pool.skip_recheck = true;
            two_workers_two_posts(pool, true);
        });
    }

    /// The injected bug of the count of running workers: a post that finds
    /// a worker running counts on it looking at the queue when it is done
    /// (and signals no parked worker); if it parks without looking, a job
    /// posted during its run waits forever.
    #[test]
    #[should_panic(expected = "deadlock")]
    fn loom_blind_worker_after_job_is_caught() {
        bounded(3).check(|| two_workers_two_posts(Pool::new(), false));
    }
}
