//! A consumer of the NDK C ABI, as a kernel consumer would write one: every
//! provider call goes through a function pointer read from a dispatch table;
//! callbacks are `extern "system"` functions with context pointers.
//!
//! The wrappers are thin and honest: they return the provider's NTSTATUS and
//! leave the judging to the tests. Panics here are test failures.
//!
//! Split by concern: [`callbacks`] (signals and watchers), [`objects`] (one
//! wrapper per NDK object, memory, closes), [`connections`] (the one
//! connection fixture, [`Fixture`], and what it builds) and [`reaping`]
//! (completion queues and their results). Everything is re-exported here, so
//! a family needs only `use super::harness::*;`.

#![allow(
    dead_code,
    reason = "each test binary module uses a different part of the harness"
)]
#![allow(clippy::missing_panics_doc, reason = "test harness")]

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use softndk::abi::*;
use softndk::provider::host::{SoftNdkCloseAdapter, SoftNdkOpenAdapter, SoftNdkOpenAdapterEx};

/// Asserts that a call, or the outcome of a request, is `STATUS_SUCCESS`
/// (with an optional message, as `assert_eq!`).
macro_rules! assert_success {
    ($status:expr $(,)?) => {
        assert_eq!($status, ::softndk::abi::STATUS_SUCCESS)
    };
    ($status:expr, $($message:tt)+) => {
        assert_eq!($status, ::softndk::abi::STATUS_SUCCESS, $($message)+)
    };
}
pub(crate) use assert_success;

/// Closes each object given, in order, asserting that every close returns
/// `STATUS_SUCCESS` (the message names the object).
#[allow(
    unused_macros,
    reason = "used by the families; binaries that include the harness without them do not"
)]
macro_rules! assert_closes_succeed {
    ($($object:expr),+ $(,)?) => {
        $(assert_success!($object.close(), concat!("close of ", stringify!($object)));)+
    };
}
#[allow(unused_imports, reason = "as the macro")]
pub(crate) use assert_closes_succeed;

/// Ends the test at once when the binary runs over iWARP: what it checks is
/// a behaviour of the in-memory fabric that iWARP, by its RFCs, does not
/// have — the reason says which (`docs/iwarp.md`, "Conformance over
/// iWARP", lists every such test). Never for a failure not understood.
#[allow(
    unused_macros,
    reason = "used by the families; binaries that include the harness without them do not"
)]
macro_rules! only_on_fabric {
    ($why:literal) => {
        if $crate::harness::Transport::default() == $crate::harness::Transport::Iwarp {
            eprintln!("only on the fabric: {}", $why);
            return;
        }
    };
}
#[allow(unused_imports, reason = "as the macro")]
pub(crate) use only_on_fabric;

/// Whether the devices of this run execute requests on the deferred engine
/// (`SOFTNDK_ENGINE=deferred`, read by `SoftNdkOpenAdapter`): completions
/// then arrive on a worker thread after the post returned.
pub fn deferred_engine() -> bool {
    std::env::var_os("SOFTNDK_ENGINE").is_some_and(|engine| engine == "deferred")
}

/// Waits until the deferred engine has run every request handed to it so
/// far (`softndk::kernel::deferred::flush`, as `KeFlushQueuedDpcs`): for a
/// test that must see what a post led to without a completion to wait on
/// (a CQ overrun). The inline engine ran it before the post returned.
pub fn settle_engine() {
    if deferred_engine() {
        softndk::kernel::deferred::flush();
    }
}

pub mod arrange;
pub mod callbacks;
pub mod connections;
pub mod objects;
pub mod reaping;

#[allow(
    unused_imports,
    reason = "binaries that include the harness without the families"
)]
pub use arrange::*;
pub use callbacks::*;
pub use connections::*;
pub use objects::*;
#[allow(unused_imports, reason = "the scenario binary reaps its own way")]
pub use reaping::*;

/// How long a test waits for an asynchronous completion before failing.
pub const WAIT: Duration = Duration::from_secs(10);

/// Calls `ready` until it gives a value and fails naming `what` once
/// [`WAIT`] has passed: the one way the suite waits for something that has
/// no callback to block on (an event that arrives on a transport or engine
/// thread after the call that caused it returned), so that a provider which
/// never delivers fails the test instead of hanging the run. The first
/// tries only yield, so an event about to happen is seen at once; later
/// ones sleep a millisecond, so a long wait costs no CPU (two cores,
/// valgrind). Bounded in time, and so in count.
pub fn wait_some<T>(what: &str, ready: impl FnMut() -> Option<T>) -> T {
    wait_some_within(WAIT, what, ready)
}

/// [`wait_some`] for a condition.
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    wait_some(what, || done().then_some(()));
}

fn wait_some_within<T>(limit: Duration, what: &str, mut ready: impl FnMut() -> Option<T>) -> T {
    const SPINS: u32 = 100;
    const POLL: Duration = Duration::from_millis(1);
    let deadline = std::time::Instant::now() + limit;
    let mut tries = 0;
    loop {
        if let Some(value) = ready() {
            return value;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not within {limit:?}"
        );
        if tries < SPINS {
            tries += 1;
            std::thread::yield_now();
        } else {
            std::thread::sleep(POLL);
        }
    }
}

/// The bounded wait ends a wait that never comes true with a failure that
/// names it, and returns the value of one that does (every binary that
/// includes the harness runs this; it takes 10 ms).
#[test]
fn harness_wait_fails_at_its_deadline_instead_of_hanging() {
    let mut calls = 0;
    assert_eq!(
        wait_some_within(WAIT, "the third call", || {
            calls += 1;
            (calls == 3).then_some(calls)
        }),
        3
    );
    let never = std::panic::catch_unwind(|| {
        wait_some_within(Duration::from_millis(10), "a completion", || None::<()>);
    });
    let message = never.expect_err("a wait that never comes true fails");
    let text = message
        .downcast_ref::<String>()
        .expect("the failure's message");
    assert!(text.starts_with("a completion: not within"), "{text}");
}

pub const PAGE: usize = 4096;
