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

/// The bounded wait for an event without a callback to block on (one that
/// arrives on a transport or engine thread after the call that caused it
/// returned), and the bounded `Barrier` of threads that meet: the library's
/// own, so that a provider which never delivers, or a thread that failed
/// before a meeting point, fails the test instead of hanging the run.
#[path = "../../../src/kernel/testing.rs"]
mod waits;
#[allow(
    unused_imports,
    reason = "binaries that include the harness without the families"
)]
pub(crate) use waits::{Barrier, wait_some, wait_until, waited};

pub const PAGE: usize = 4096;
