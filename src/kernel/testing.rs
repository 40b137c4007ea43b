//! The bounded wait of the tests that wait on another thread (a worker, a
//! socket's thread, a timer, a provider's callback): a condition or a value
//! polled until it comes, failing the test with what it waited for once
//! [`WAIT`] has passed, so that a wait that never comes true fails instead
//! of hanging the run. Bounded in count and in time. The unit tests use it
//! as `kernel::testing`; the conformance harness, which cannot reach a
//! `cfg(test)` module of the library, includes this file with `#[path]`.

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
