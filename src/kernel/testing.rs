//! The bounded wait of the tests that wait on another thread (a worker, a
//! socket's thread, a timer, a provider's callback): a condition or a value
//! polled until it comes, failing the test with what it waited for once
//! [`WAIT`] has passed, so that a wait that never comes true fails instead
//! of hanging the run; and the threads' meeting point ([`Barrier`]) with
//! the same bound. Bounded in count and in time. The unit tests use it
//! as `kernel::testing`; the conformance harness, which cannot reach a
//! `cfg(test)` module of the library, includes this file with `#[path]`.

use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a test waits for an event of another thread before it fails.
pub(crate) const WAIT: Duration = Duration::from_secs(20);

/// Polls `ready` until it gives a value; fails naming `what` after
/// [`WAIT`].
pub(crate) fn wait_some<T>(what: &str, ready: impl FnMut() -> Option<T>) -> T {
    within(WAIT, what, ready)
}

/// [`wait_some`] for a condition.
pub(crate) fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    wait_some(what, || done().then_some(()));
}

/// Polls `done` as [`wait_some`] does until it holds or [`WAIT`] has
/// passed, and says whether it held: for a test that asserts on what came
/// itself, so that its failure shows what did.
pub(crate) fn waited(mut done: impl FnMut() -> bool) -> bool {
    polled(WAIT, || done().then_some(())).is_some()
}

fn within<T>(limit: Duration, what: &str, ready: impl FnMut() -> Option<T>) -> T {
    polled(limit, ready).unwrap_or_else(|| panic!("timed out waiting: {what}"))
}

/// Polls `ready` until it gives a value or `limit` has passed. The first
/// tries only yield, so an event about to happen is seen at once; later
/// ones sleep a millisecond, so a long wait costs no CPU (two cores,
/// valgrind).
fn polled<T>(limit: Duration, mut ready: impl FnMut() -> Option<T>) -> Option<T> {
    const SPINS: u128 = 100;
    const POLL: Duration = Duration::from_millis(1);
    let deadline = Instant::now() + limit;
    // Every try after the first SPINS sleeps POLL: this many outlast `limit`.
    let tries = SPINS + limit.as_millis() + 2;
    for tried in 0..tries {
        if let Some(value) = ready() {
            return Some(value);
        }
        if Instant::now() >= deadline {
            break;
        }
        if tried < SPINS {
            std::thread::yield_now();
        } else {
            std::thread::sleep(POLL);
        }
    }
    None
}

/// `std::sync::Barrier`, bounded: when a party never arrives (its thread
/// failed before the meeting point), the parties waiting for it fail after
/// [`WAIT`] instead of holding their threads, and the test, forever.
pub(crate) struct Barrier {
    parties: usize,
    /// Parties arrived in this round, and the round.
    state: Mutex<(usize, u64)>,
    turned: Condvar,
}

impl Barrier {
    /// A barrier for `parties` threads, reusable round after round.
    pub(crate) fn new(parties: usize) -> Self {
        Self {
            parties,
            state: Mutex::new((0, 0)),
            turned: Condvar::new(),
        }
    }

    /// Waits until all parties have called `wait` in this round.
    pub(crate) fn wait(&self) {
        self.wait_within(WAIT);
    }

    fn wait_within(&self, limit: Duration) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let round = state.1;
        state.0 += 1;
        if state.0 == self.parties {
            *state = (0, round + 1);
            self.turned.notify_all();
            return;
        }
        let (state, _) = self
            .turned
            .wait_timeout_while(state, limit, |state| state.1 == round)
            .unwrap_or_else(PoisonError::into_inner);
        let (arrived, met) = (state.0, state.1 != round);
        drop(state);
        assert!(
            met,
            "a barrier of {} parties: {arrived} arrived, not within {limit:?}",
            self.parties
        );
    }
}

#[test]
fn test_a_barrier_meets_round_after_round_and_fails_a_party_left_alone() {
    let barrier = Barrier::new(2);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..3 {
                    barrier.wait();
                }
            });
        }
    });
    let alone = std::panic::catch_unwind(|| {
        Barrier::new(2).wait_within(Duration::from_millis(10));
    });
    let message = alone.expect_err("a party left alone fails");
    let text = message
        .downcast_ref::<String>()
        .expect("the failure's message");
    assert_eq!(text, "a barrier of 2 parties: 1 arrived, not within 10ms");
}

#[test]
fn test_a_wait_returns_what_came_and_fails_naming_what_never_did() {
    let mut calls = 0;
    let third = wait_some("the third call", || {
        calls += 1;
        (calls == 3).then_some(calls)
    });
    assert_eq!(third, 3);
    assert_eq!(polled(Duration::from_millis(10), || None::<()>), None);
    let never = std::panic::catch_unwind(|| {
        within(Duration::from_millis(10), "nothing", || None::<()>);
    });
    let message = never.expect_err("a wait that never comes true fails");
    let text = message
        .downcast_ref::<String>()
        .expect("the failure's message");
    assert_eq!(text, "timed out waiting: nothing");
}
