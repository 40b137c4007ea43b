//! Where callbacks land: the [`Signal`] every callback context points to,
//! and the `extern "system"` callbacks the fuzzer hands the provider.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use softndk::abi::{NdkConnector, NdkObjectHeader, NtStatus, STATUS_SUCCESS};

use super::WAIT;

/// Where a callback lands: its statuses (and, for a create completion, the
/// object), and whether the object it belongs to has finished closing.
#[derive(Default)]
pub(super) struct Signal {
    pub(super) state: Mutex<Vec<(NtStatus, usize)>>,
    pub(super) cv: Condvar,
    /// Callbacks delivered in all.
    pub(super) count: AtomicU64,
    /// Set once the close of the object this signal serves has completed:
    /// a callback after that breaks L22.
    pub(super) closed: AtomicBool,
    /// Callbacks delivered after `closed` was set.
    pub(super) late: AtomicU64,
}

impl Signal {
    pub(super) fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub(super) fn ctx(self: &Arc<Self>) -> *mut c_void {
        Arc::as_ptr(self).cast_mut().cast()
    }

    pub(super) fn push(&self, status: NtStatus, object: usize) {
        if self.closed.load(Ordering::SeqCst) {
            self.late.fetch_add(1, Ordering::SeqCst);
        }
        self.count.fetch_add(1, Ordering::SeqCst);
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((status, object));
        self.cv.notify_all();
    }

    /// The oldest callback's status and object, waiting up to [`WAIT`].
    pub(super) fn wait(self: &Arc<Self>) -> Option<(NtStatus, usize)> {
        let got = self.wait_up_to(WAIT);
        if got.is_none() {
            // The provider may still call back: the context must outlive it.
            keep(self);
        }
        got
    }

    /// Whether a callback with one of `statuses` came, waiting up to `wait`
    /// for it.
    pub(super) fn saw(&self, statuses: &[NtStatus], wait: Duration) -> bool {
        let seen = |s: &Vec<(NtStatus, usize)>| s.iter().any(|(got, _)| statuses.contains(got));
        let guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let (guard, _) = self
            .cv
            .wait_timeout_while(guard, wait, |s| !seen(s))
            .unwrap_or_else(PoisonError::into_inner);
        seen(&guard)
    }

    /// The oldest callback's status and object, waiting up to `wait` (the
    /// caller keeps the context alive when it gives up for good).
    pub(super) fn wait_up_to(&self, wait: Duration) -> Option<(NtStatus, usize)> {
        let guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let (mut guard, _) = self
            .cv
            .wait_timeout_while(guard, wait, |s| s.is_empty())
            .unwrap_or_else(PoisonError::into_inner);
        (!guard.is_empty()).then(|| guard.remove(0))
    }

    /// Drops the statuses delivered so far.
    pub(super) fn clear(&self) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

/// `NDK_FN_REQUEST_COMPLETION`, `NDK_FN_CQ_NOTIFICATION_CALLBACK`.
pub(super) unsafe extern "system" fn on_status(ctx: *mut c_void, status: NtStatus) {
    // SAFETY: every context given with this callback is a `Signal` its
    // owner keeps alive while the provider may call back.
    let signal = unsafe { &*ctx.cast::<Signal>() };
    signal.push(status, 0);
}

/// `NDK_FN_CLOSE_COMPLETION`, `NDK_FN_DISCONNECT_EVENT_CALLBACK`.
pub(super) unsafe extern "system" fn on_event(ctx: *mut c_void) {
    // SAFETY: as in `on_status`.
    let signal = unsafe { &*ctx.cast::<Signal>() };
    signal.push(STATUS_SUCCESS, 0);
}

/// `NDK_FN_CREATE_COMPLETION`.
pub(super) unsafe extern "system" fn on_create(
    ctx: *mut c_void,
    status: NtStatus,
    object: *mut NdkObjectHeader,
) {
    // SAFETY: as in `on_status`.
    let signal = unsafe { &*ctx.cast::<Signal>() };
    signal.push(status, object.addr());
}

/// `NDK_FN_CONNECT_EVENT_CALLBACK`: the incoming connector, as a status of
/// success and its address.
pub(super) unsafe extern "system" fn on_connect(ctx: *mut c_void, connector: *mut NdkConnector) {
    // SAFETY: as in `on_status`.
    let signal = unsafe { &*ctx.cast::<Signal>() };
    signal.push(STATUS_SUCCESS, connector.expose_provenance());
}

/// Keeps a callback's context alive for good: the provider may still call
/// it and the fuzzer will not wait for it (an error path).
pub(super) fn keep(signal: &Arc<Signal>) {
    std::mem::forget(Arc::clone(signal));
}
