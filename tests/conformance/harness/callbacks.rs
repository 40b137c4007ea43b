//! Callbacks: `extern "system"` functions with context pointers, and the
//! signals and watchers they report to.

use super::*;

// ---------------------------------------------------------------------------
// Callbacks
// ---------------------------------------------------------------------------

/// What callbacks hand over, in the order they came, for a test to count
/// and wait on (statuses for a [`Signal`], connectors for an [`Incoming`]).
pub struct Arrivals<T> {
    items: Mutex<Vec<T>>,
    cv: Condvar,
}

impl<T> Default for Arrivals<T> {
    fn default() -> Self {
        Self {
            items: Mutex::new(Vec::new()),
            cv: Condvar::new(),
        }
    }
}

impl<T: Copy> Arrivals<T> {
    fn push(&self, item: T) {
        self.items.lock().unwrap().push(item);
        self.cv.notify_all();
    }

    fn all(&self) -> Vec<T> {
        self.items.lock().unwrap().clone()
    }

    fn count(&self) -> usize {
        self.items.lock().unwrap().len()
    }

    /// Waits for the `n`th (1-based) arrival, failing the test (naming
    /// `what`) when it has not come within [`WAIT`].
    fn wait_nth(&self, n: usize, what: &str) -> T {
        let guard = self.items.lock().unwrap();
        let (guard, timeout) = self
            .cv
            .wait_timeout_while(guard, WAIT, |items| items.len() < n)
            .unwrap();
        assert!(
            !timeout.timed_out(),
            "{what} #{n} did not arrive within {WAIT:?}"
        );
        guard[n - 1]
    }
}

/// Collects the statuses of request completions (or of any status callback).
#[derive(Default)]
pub struct Signal {
    statuses: Arrivals<NtStatus>,
    /// Runs (once) inside the next callback, before it returns.
    hook: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl Signal {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// The context pointer to pass with [`on_status`] / [`on_close`].
    pub fn ctx(self: &Arc<Self>) -> *mut c_void {
        Arc::as_ptr(self).cast_mut().cast()
    }

    pub fn push(&self, status: NtStatus) {
        let hook = self.hook.lock().unwrap().take();
        if let Some(hook) = hook {
            hook();
        }
        self.statuses.push(status);
    }

    /// Runs `hook` inside the next callback recorded here, on the thread
    /// that calls back, before the callback returns.
    pub fn on_next(&self, hook: impl FnOnce() + Send + 'static) {
        *self.hook.lock().unwrap() = Some(Box::new(hook));
    }

    /// Statuses so far.
    pub fn all(&self) -> Vec<NtStatus> {
        self.statuses.all()
    }

    pub fn count(&self) -> usize {
        self.statuses.count()
    }

    /// Waits for the `n`th (1-based) callback and returns its status.
    pub fn wait_nth(&self, n: usize) -> NtStatus {
        self.statuses.wait_nth(n, "callback")
    }

    /// Waits for the first callback.
    pub fn wait(&self) -> NtStatus {
        self.wait_nth(1)
    }

    /// The outcome of a call that may pend: its return value, or the status
    /// of its completion when it returned `STATUS_PENDING` (L8).
    pub fn outcome(&self, returned: NtStatus) -> NtStatus {
        if returned == STATUS_PENDING {
            self.wait()
        } else {
            returned
        }
    }
}

/// Starts a request whose completion (`NDK_FN_REQUEST_COMPLETION`) is
/// [`on_status`] reporting to a fresh [`Signal`]: `call` gets the callback
/// and its context; returns its return value and the signal.
pub fn requested(
    call: impl FnOnce(Option<NdkFnRequestCompletion>, *mut c_void) -> NtStatus,
) -> (NtStatus, Arc<Signal>) {
    let signal = Signal::new();
    let status = call(Some(on_status), signal.ctx());
    (status, signal)
}

/// As [`requested`], waited for: the request's outcome (L8).
pub fn request_outcome(
    call: impl FnOnce(Option<NdkFnRequestCompletion>, *mut c_void) -> NtStatus,
) -> NtStatus {
    let (status, signal) = requested(call);
    signal.outcome(status)
}

/// `NDK_FN_REQUEST_COMPLETION` (and CQ / SRQ notification) for a [`Signal`].
pub unsafe extern "system" fn on_status(ctx: *mut c_void, status: NtStatus) {
    // SAFETY: tests pass `Signal::ctx` of a Signal they keep alive.
    let signal = unsafe { &*ctx.cast::<Signal>() };
    signal.push(status);
}

/// `NDK_FN_CLOSE_COMPLETION` for a [`Signal`] (recorded as STATUS_SUCCESS).
pub unsafe extern "system" fn on_close(ctx: *mut c_void) {
    // SAFETY: as above.
    let signal = unsafe { &*ctx.cast::<Signal>() };
    signal.push(STATUS_SUCCESS);
}

/// `NDK_FN_DISCONNECT_EVENT_CALLBACK` for a [`Signal`].
pub unsafe extern "system" fn on_disconnect(ctx: *mut c_void) {
    // SAFETY: as above.
    let signal = unsafe { &*ctx.cast::<Signal>() };
    signal.push(STATUS_SUCCESS);
}

/// Incoming connectors of a listener.
#[derive(Default)]
pub struct Incoming {
    connectors: Arrivals<usize>,
}

impl Incoming {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }
    pub fn ctx(self: &Arc<Self>) -> *mut c_void {
        Arc::as_ptr(self).cast_mut().cast()
    }
    pub fn count(&self) -> usize {
        self.connectors.count()
    }
    /// Waits for the `n`th (1-based) incoming connector.
    pub fn wait_nth(&self, n: usize) -> Connector {
        Connector(self.connectors.wait_nth(n, "connect event") as *mut NdkConnector)
    }
}

/// `NDK_FN_CONNECT_EVENT_CALLBACK` for an [`Incoming`].
pub unsafe extern "system" fn on_connect(ctx: *mut c_void, connector: *mut NdkConnector) {
    // SAFETY: tests pass `Incoming::ctx` of an Incoming they keep alive.
    let incoming = unsafe { &*ctx.cast::<Incoming>() };
    incoming.connectors.push(connector as usize);
}

/// How long a check waits to see that a callback does *not* come (only to
/// widen a race window; no test asserts on timing).
pub const SETTLE_BRIEF: Duration = Duration::from_millis(10);

/// `what` once nothing more is due for it (after [`SETTLE_BRIEF`]): for
/// counting the callbacks, completions or events that came, and seeing that
/// no further one did.
pub fn settled<T: ?Sized>(what: &T) -> &T {
    std::thread::sleep(SETTLE_BRIEF);
    what
}

/// What [`on_tagged_close`] records in a [`Signal`]: not an NTSTATUS any
/// provider callback carries, so one signal can log request completions,
/// events and the close completion in their order.
pub const CLOSED: NtStatus = 0x0C10_5ED0;

/// `NDK_FN_CLOSE_COMPLETION` recording [`CLOSED`] in a [`Signal`].
pub unsafe extern "system" fn on_tagged_close(ctx: *mut c_void) {
    // SAFETY: tests pass `Signal::ctx` of a Signal they keep alive.
    let signal = unsafe { &*ctx.cast::<Signal>() };
    signal.push(CLOSED);
}

/// `NDK_FN_CREATE_COMPLETION` recording its status in a [`Signal`].
pub unsafe extern "system" fn on_create(
    ctx: *mut c_void,
    status: NtStatus,
    _object: *mut NdkObjectHeader,
) {
    // SAFETY: tests pass `Signal::ctx` of a Signal they keep alive.
    let signal = unsafe { &*ctx.cast::<Signal>() };
    signal.push(status);
}

/// Type-erased [`Watch`] hook.
type Hook = Box<dyn FnMut(NtStatus) + Send>;

/// Records the callbacks of a CQ notification, request completion or close
/// completion (same shapes: see [`on_watch`], [`on_watch_close`]), counts
/// overlapping callbacks (C5), can hold every callback until opened
/// (L21, L23, L26) and can run a hook inside each callback.
#[derive(Default)]
pub struct Watch {
    log: Mutex<(Vec<NtStatus>, usize)>,
    cv: Condvar,
    closed_gate: Mutex<bool>,
    gate_cv: Condvar,
    /// How long a callback waits at the closed gate: [`WAIT`] unless set.
    gate_limit: Option<Duration>,
    inside: AtomicUsize,
    overlapped: AtomicBool,
    hook: Mutex<Option<Hook>>,
    connectors: Mutex<Vec<usize>>,
}

impl Watch {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// A watch whose callbacks block until [`open`](Self::open), or until
    /// [`WAIT`] has passed: a test that fails before it opens the gate must
    /// not hold the provider's thread, and a close waiting for the
    /// callback, forever.
    pub fn gated() -> Arc<Self> {
        Self::gated_within(WAIT)
    }

    fn gated_within(limit: Duration) -> Arc<Self> {
        Arc::new(Self {
            closed_gate: Mutex::new(true),
            gate_limit: Some(limit),
            ..Self::default()
        })
    }

    pub fn ctx(self: &Arc<Self>) -> *mut c_void {
        Arc::as_ptr(self).cast_mut().cast()
    }

    /// Lets every held and future callback return.
    pub fn open(&self) {
        *self.closed_gate.lock().unwrap() = false;
        self.gate_cv.notify_all();
    }

    /// Runs `hook(status)` inside every later callback (before the gate).
    pub fn set_hook(&self, hook: impl FnMut(NtStatus) + Send + 'static) {
        *self.hook.lock().unwrap() = Some(Box::new(hook));
    }

    /// Statuses of the callbacks entered so far, in order.
    pub fn all(&self) -> Vec<NtStatus> {
        self.log.lock().unwrap().0.clone()
    }

    /// Callbacks entered so far.
    pub fn entered(&self) -> usize {
        self.log.lock().unwrap().0.len()
    }

    /// Callbacks returned so far.
    pub fn returned(&self) -> usize {
        self.log.lock().unwrap().1
    }

    /// The connectors handed to [`on_watch_connect`], in order.
    pub fn connectors(&self) -> Vec<usize> {
        self.connectors.lock().unwrap().clone()
    }

    /// Whether two callbacks ever ran at once, or one inside another.
    pub fn overlapped(&self) -> bool {
        self.overlapped.load(Ordering::SeqCst)
    }

    /// Waits until `n` callbacks have been entered.
    pub fn wait_entered(&self, n: usize) {
        let guard = self.log.lock().unwrap();
        let (_guard, timeout) = self
            .cv
            .wait_timeout_while(guard, WAIT, |log| log.0.len() < n)
            .unwrap();
        assert!(!timeout.timed_out(), "callback #{n} did not come");
    }

    /// Waits until `n` callbacks have returned.
    pub fn wait_returned(&self, n: usize) {
        let guard = self.log.lock().unwrap();
        let (_guard, timeout) = self
            .cv
            .wait_timeout_while(guard, WAIT, |log| log.1 < n)
            .unwrap();
        assert!(!timeout.timed_out(), "callback #{n} did not return");
    }

    fn call(&self, status: NtStatus) {
        if self.inside.fetch_add(1, Ordering::SeqCst) != 0 {
            self.overlapped.store(true, Ordering::SeqCst);
        }
        self.log.lock().unwrap().0.push(status);
        self.cv.notify_all();
        let hook = self.hook.lock().unwrap().take();
        if let Some(mut hook) = hook {
            hook(status);
            let mut slot = self.hook.lock().unwrap();
            if slot.is_none() {
                *slot = Some(hook);
            }
        }
        let gate = self.closed_gate.lock().unwrap();
        let limit = self.gate_limit.unwrap_or(WAIT);
        let (gate, held) = self
            .gate_cv
            .wait_timeout_while(gate, limit, |closed| *closed)
            .unwrap();
        drop(gate);
        if held.timed_out() {
            // Not a panic: this runs inside an `extern "system"` callback.
            eprintln!("a gated callback returned after {limit:?}: its test never opened the gate");
        }
        self.inside.fetch_sub(1, Ordering::SeqCst);
        self.log.lock().unwrap().1 += 1;
        self.cv.notify_all();
    }
}

/// `NDK_FN_CQ_NOTIFICATION_CALLBACK` / `NDK_FN_REQUEST_COMPLETION` for a
/// [`Watch`].
pub unsafe extern "system" fn on_watch(ctx: *mut c_void, status: NtStatus) {
    // SAFETY: tests pass `Watch::ctx` of a Watch they keep alive.
    let watch = unsafe { &*ctx.cast::<Watch>() };
    watch.call(status);
}

/// `NDK_FN_CLOSE_COMPLETION` for a [`Watch`] (recorded as [`CLOSED`]).
pub unsafe extern "system" fn on_watch_close(ctx: *mut c_void) {
    // SAFETY: as above.
    let watch = unsafe { &*ctx.cast::<Watch>() };
    watch.call(CLOSED);
}

/// What [`on_watch_event`] records: an event callback without a status
/// (a disconnect event).
pub const EVENT: NtStatus = 0x0E7E_0000;

/// `NDK_FN_DISCONNECT_EVENT_CALLBACK` for a [`Watch`] (recorded as
/// [`EVENT`]).
pub unsafe extern "system" fn on_watch_event(ctx: *mut c_void) {
    // SAFETY: as above.
    let watch = unsafe { &*ctx.cast::<Watch>() };
    watch.call(EVENT);
}

/// `NDK_FN_CONNECT_EVENT_CALLBACK` for a [`Watch`]: records
/// `STATUS_SUCCESS` and keeps the connector in [`Watch::connectors`].
pub unsafe extern "system" fn on_watch_connect(ctx: *mut c_void, connector: *mut NdkConnector) {
    // SAFETY: as above.
    let watch = unsafe { &*ctx.cast::<Watch>() };
    watch.connectors.lock().unwrap().push(connector as usize);
    watch.call(STATUS_SUCCESS);
}

/// A gated [`Watch`] whose test never opens it lets its callback return
/// after the gate's limit instead of holding the provider's thread.
#[test]
fn harness_a_gate_never_opened_lets_its_callback_go_after_its_limit() {
    let watch = Watch::gated_within(Duration::from_millis(10));
    let ctx = watch.ctx();
    let address = ctx as usize;
    std::thread::spawn(move || {
        // SAFETY: the Watch behind `address` is kept alive by the test
        // until this thread is joined.
        unsafe { on_watch(address as *mut c_void, STATUS_SUCCESS) };
    })
    .join()
    .unwrap();
    assert_eq!(watch.all(), [STATUS_SUCCESS]);
    assert_eq!(watch.returned(), 1);
}
