//! The call-sequence fuzzer: a seeded generator of NDK calls and the oracle
//! that checks the provider's answers, written against the host-mode C ABI
//! only (`SoftNdkOpenAdapter[Ex]`, `SoftNdkCloseAdapter`,
//! `SoftNdkGetLiveObjects`, `SoftNdkGetBreachCounts` and the dispatch tables),
//! as a kernel consumer would write it. Shared by the soak binary
//! (`src/bin/softndk-fuzz/main.rs`) and the CI run (`tests/fuzz.rs`, which
//! includes this file with `#[path]`). See `docs/debugging.md`, "Fuzzer".
//!
//! A run opens `adapters` adapters (fabric, or iWARP over TCP on 127.0.0.x)
//! and starts `threads` threads. Each thread owns its links — two QPs
//! connected through a listener and two connectors, each side with its own
//! CQ, PD, registered MR and MW — so the consumer's serialisation rules (C1,
//! P2) hold; the adapters and their devices are shared. A thread draws every
//! choice from its own generator (seeded from the run's seed and its
//! number): posts (Send, SendAndInvalidate, Receive, Write, Read, Bind,
//! Invalidate) with valid or invalid SGEs, tokens, addresses, SGE counts and
//! flags, polls, arms, flushes, disconnects, and closes of whole links in a
//! random order.
//!
//! The oracle:
//! * every post that returned `STATUS_SUCCESS` gets exactly one CQ entry
//!   (its completion or its flush) on its side's CQ, with its QP's context
//!   (P6, P21); a silent post (P14) at most one, and never a successful one;
//! * a post that failed inline gets none; no entry comes twice and none
//!   names a context never posted;
//! * once a QP's close has completed, every request of its queues has its
//!   entry in the CQ (L21);
//! * every close completes (L18, L21), and no notification or disconnect
//!   event arrives after its object's close completed (L22);
//! * every wait is bounded ([`WAIT`]): a hang is a finding;
//! * the bytes around each registered buffer are never written (a bounds
//!   check missed);
//! * at the end, once every adapter is closed, the provider's live objects
//!   (`SoftNdkGetLiveObjects`) are back where they were, and no L17 breach
//!   (a close racing a call inside its object) was counted.
//!
//! Determinism: one thread on the fabric with the inline engine replays a
//! seed exactly (the same calls with the same answers). With more threads,
//! iWARP or the deferred engine, each thread's call sequence is still a
//! function of the seed and the thread's number (no choice depends on an
//! answer), but the answers and their interleaving depend on timing.
#![allow(dead_code)]
// A consumer of C calls: counts go to the ABI's ULONGs (always small here:
// SGE lists of at most 5, polls of at most 16), and a fuzzer's set-up and
// tear-down read best as one sequence each.
#![allow(
    clippy::cast_possible_truncation,
    clippy::too_many_lines,
    clippy::unused_self
)]

use std::collections::HashMap;
use std::ffi::c_void;
use std::fmt::Write as _;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use softndk::abi::{
    AF_INET, InAddr, Mdl, MrFlags, NdkAdapter, NdkConnector, NdkCq, NdkCqNotifyType, NdkListener,
    NdkMr, NdkMw, NdkObjectHeader, NdkPd, NdkQp, NdkResult, NdkSge, NtStatus, OpFlags, PAGE_SIZE,
    STATUS_BUFFER_OVERFLOW, STATUS_CANCELLED, STATUS_INTERNAL_ERROR, STATUS_PENDING,
    STATUS_SUCCESS, SockAddr, SockAddrIn,
};
use softndk::provider::host::{
    BreachCount, SoftNdkCloseAdapter, SoftNdkGetBreachCounts, SoftNdkGetLiveObjects,
    SoftNdkOpenAdapter, SoftNdkOpenAdapterEx, SoftNdkSetFaultPlan,
};

/// The longest the fuzzer waits for any one callback or completion; a wait
/// that runs out is a finding (a hang).
pub const WAIT: Duration = Duration::from_secs(20);

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// The seed every thread's generator derives from.
    pub seed: u64,
    /// Provider calls to make, over all threads (each thread makes its
    /// share, then closes what it holds).
    pub calls: u64,
    /// Threads, each with its own links.
    pub threads: usize,
    /// Adapters opened (127.0.`net`.1 ..); links pick two at random.
    pub adapters: usize,
    /// Links each thread keeps open at once.
    pub links: usize,
    /// iWARP over TCP on loopback instead of the process's fabric.
    pub iwarp: bool,
    /// The third byte of the adapters' 127.0.x.y addresses (fabric and
    /// iWARP devices cannot share an address).
    pub net: u8,
    /// Fault injection plan for the provider, in `SOFTNDK_FAULTS`' text
    /// form: when set, the run installs it (`SoftNdkSetFaultPlan`) before
    /// the adapters open and removes it once they are closed (so runs of one
    /// process do not leak faults into each other, and each starts its
    /// counters at zero), and the oracle then accepts failed set-up steps
    /// (an injected failure of a create, a register or a connect) by
    /// dropping the link. `None` installs nothing and makes any failed
    /// set-up step a finding.
    pub faults: Option<String>,
    /// Print every call (thread, call number, call, answer) on standard
    /// error: the way to read a finding's sequence.
    pub trace: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            seed: 1,
            calls: 10_000,
            threads: 1,
            adapters: 2,
            links: 2,
            iwarp: false,
            net: 40,
            faults: None,
            trace: false,
        }
    }
}

/// What a run did, and what it found.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Provider calls made.
    pub calls: u64,
    /// Posts that returned `STATUS_SUCCESS`.
    pub posted: u64,
    /// Posts refused inline.
    pub refused: u64,
    /// CQ entries with `STATUS_SUCCESS`.
    pub succeeded: u64,
    /// CQ entries with `STATUS_CANCELLED` (flushed).
    pub flushed: u64,
    /// CQ entries with another status.
    pub failed: u64,
    /// Links connected.
    pub links: u64,
    /// Links whose set-up failed (fault injection only).
    pub setup_failed: u64,
    /// Objects closed (close completed).
    pub closed: u64,
    /// CQ notifications delivered.
    pub notifications: u64,
    /// Sides whose missing entries were excused by their CQ's reported
    /// overflow or fatal error (E10, E11, E12).
    pub cq_errors: u64,
    /// Everything the oracle objected to; empty when the run passed.
    pub findings: Vec<String>,
}

impl Outcome {
    fn add(&mut self, other: &Self) {
        self.calls += other.calls;
        self.posted += other.posted;
        self.refused += other.refused;
        self.succeeded += other.succeeded;
        self.flushed += other.flushed;
        self.failed += other.failed;
        self.links += other.links;
        self.setup_failed += other.setup_failed;
        self.closed += other.closed;
        self.notifications += other.notifications;
        self.cq_errors += other.cq_errors;
        self.findings.extend(other.findings.iter().cloned());
    }
}

// ---------------------------------------------------------------------------
// The generator
// ---------------------------------------------------------------------------

/// SplitMix64: small, seedable, and the same on every machine.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }

    /// A `usize` in `0..n`.
    pub fn index(&mut self, n: usize) -> usize {
        usize::try_from(self.below(n as u64)).unwrap_or(0)
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// A `u32` in `lo..=hi`.
    pub fn range(&mut self, lo: u32, hi: u32) -> u32 {
        lo + u32::try_from(self.below(u64::from(hi - lo) + 1)).unwrap_or(0)
    }
}

// ---------------------------------------------------------------------------
// Callbacks
// ---------------------------------------------------------------------------

/// Where a callback lands: its statuses (and, for a create completion, the
/// object), and whether the object it belongs to has finished closing.
#[derive(Default)]
struct Signal {
    state: Mutex<Vec<(NtStatus, usize)>>,
    cv: Condvar,
    /// Callbacks delivered in all.
    count: AtomicU64,
    /// Set once the close of the object this signal serves has completed:
    /// a callback after that breaks L22.
    closed: AtomicBool,
    /// Callbacks delivered after `closed` was set.
    late: AtomicU64,
}

impl Signal {
    fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn ctx(self: &Arc<Self>) -> *mut c_void {
        Arc::as_ptr(self).cast_mut().cast()
    }

    fn push(&self, status: NtStatus, object: usize) {
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
    fn wait(self: &Arc<Self>) -> Option<(NtStatus, usize)> {
        let guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let (mut guard, _) = self
            .cv
            .wait_timeout_while(guard, WAIT, |s| s.is_empty())
            .unwrap_or_else(PoisonError::into_inner);
        if guard.is_empty() {
            // The provider may still call back: the context must outlive it.
            std::mem::forget(Arc::clone(self));
            return None;
        }
        Some(guard.remove(0))
    }

    /// Whether a callback with one of `statuses` came, waiting up to `wait`
    /// for it.
    fn saw(&self, statuses: &[NtStatus], wait: Duration) -> bool {
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
    fn wait_up_to(&self, wait: Duration) -> Option<(NtStatus, usize)> {
        let guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let (mut guard, _) = self
            .cv
            .wait_timeout_while(guard, wait, |s| s.is_empty())
            .unwrap_or_else(PoisonError::into_inner);
        (!guard.is_empty()).then(|| guard.remove(0))
    }

    /// Drops the statuses delivered so far.
    fn clear(&self) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

/// `NDK_FN_REQUEST_COMPLETION`, `NDK_FN_CQ_NOTIFICATION_CALLBACK`.
unsafe extern "system" fn on_status(ctx: *mut c_void, status: NtStatus) {
    // SAFETY: every context given with this callback is a `Signal` its
    // owner keeps alive while the provider may call back.
    let signal = unsafe { &*ctx.cast::<Signal>() };
    signal.push(status, 0);
}

/// `NDK_FN_CLOSE_COMPLETION`, `NDK_FN_DISCONNECT_EVENT_CALLBACK`.
unsafe extern "system" fn on_event(ctx: *mut c_void) {
    // SAFETY: as in `on_status`.
    let signal = unsafe { &*ctx.cast::<Signal>() };
    signal.push(STATUS_SUCCESS, 0);
}

/// `NDK_FN_CREATE_COMPLETION`.
unsafe extern "system" fn on_create(
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
unsafe extern "system" fn on_connect(ctx: *mut c_void, connector: *mut NdkConnector) {
    // SAFETY: as in `on_status`.
    let signal = unsafe { &*ctx.cast::<Signal>() };
    signal.push(STATUS_SUCCESS, connector.expose_provenance());
}

/// Keeps a callback's context alive for good: the provider may still call
/// it and the fuzzer will not wait for it (an error path).
fn keep(signal: &Arc<Signal>) {
    std::mem::forget(Arc::clone(signal));
}

/// A provider object type and its dispatch table.
trait Dispatched {
    type Table: 'static;
    /// The object's dispatch table. The fuzzer passes only objects the
    /// provider created and that are still open (a safe function, so that
    /// it can be called inside the `unsafe` block of the call it feeds).
    fn read(object: *mut Self) -> &'static Self::Table;
}

macro_rules! dispatched {
    ($($object:ty => $table:ty),* $(,)?) => {$(
        impl Dispatched for $object {
            type Table = $table;
            fn read(object: *mut Self) -> &'static $table {
                // SAFETY: a live object the provider created (the fuzzer
                // passes no other): its header and dispatch pointer are
                // readable while it is open.
                let table = unsafe { (*object).dispatch };
                // SAFETY: the provider's dispatch tables are static and full.
                unsafe { &*table }
            }
        }
    )*};
}

dispatched! {
    NdkAdapter => softndk::abi::NdkAdapterDispatch,
    NdkCq => softndk::abi::NdkCqDispatch,
    NdkPd => softndk::abi::NdkPdDispatch,
    NdkQp => softndk::abi::NdkQpDispatch,
    NdkMr => softndk::abi::NdkMrDispatch,
    NdkMw => softndk::abi::NdkMwDispatch,
    NdkConnector => softndk::abi::NdkConnectorDispatch,
    NdkListener => softndk::abi::NdkListenerDispatch,
}

/// The dispatch table of a live provider object.
macro_rules! table {
    ($object:expr) => {
        Dispatched::read($object)
    };
}

// ---------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------

/// Bytes before and after each registered buffer that nobody may write.
const GUARD: usize = PAGE_SIZE;
/// The guard bytes' value.
const GUARD_BYTE: u8 = 0x5A;
/// How far outside its buffer an invalid address may point (inside the
/// guard, so a missed bounds check writes the guard instead of crashing).
const STRAY: u64 = 256;

/// A page-aligned buffer between two guard pages, and its MDL.
struct Buffer {
    storage: Vec<u8>,
    start: usize,
    len: usize,
    mdl: Box<Mdl>,
}

impl Buffer {
    fn new(len: usize) -> Self {
        let mut storage = vec![GUARD_BYTE; len + 2 * GUARD + PAGE_SIZE];
        let base = storage.as_mut_ptr();
        let start = base.align_offset(PAGE_SIZE) + GUARD;
        storage[start..start + len].fill(0);
        let start_va = base.wrapping_add(start);
        let mdl = Box::new(Mdl {
            next: ptr::null_mut(),
            size: 0x30,
            mdl_flags: 0,
            padding_0c: 0,
            process: ptr::null_mut(),
            mapped_system_va: ptr::null_mut(),
            start_va: start_va.cast(),
            byte_count: u32::try_from(len).unwrap_or(u32::MAX),
            byte_offset: 0,
        });
        Self {
            storage,
            start,
            len,
            mdl,
        }
    }

    /// The address of byte `offset` of the buffer (any offset: an invalid
    /// address is made from one outside it).
    fn address(&self, offset: i64) -> u64 {
        let base = self.storage.as_ptr().wrapping_add(self.start);
        (base.expose_provenance() as u64).wrapping_add_signed(offset)
    }

    /// Whether every guard byte still holds its value.
    fn guards_intact(&self) -> bool {
        let (before, rest) = self.storage.split_at(self.start);
        let after = rest.get(self.len..).unwrap_or_default();
        before.iter().chain(after).all(|&b| b == GUARD_BYTE)
    }
}

// ---------------------------------------------------------------------------
// A thread's state
// ---------------------------------------------------------------------------

/// An outstanding post, by request context.
#[derive(Clone, Copy, Debug)]
struct Post {
    what: &'static str,
    call: u64,
    silent: bool,
}

/// One side of a link.
struct Side {
    adapter: usize,
    cq: *mut NdkCq,
    notes: Arc<Signal>,
    pd: *mut NdkPd,
    qp: *mut NdkQp,
    qp_ctx: usize,
    receive_sge: u32,
    initiator_sge: u32,
    inline: u32,
    mr: *mut NdkMr,
    registered: bool,
    buffer: Option<Buffer>,
    local_token: u32,
    remote_token: u32,
    mw: *mut NdkMw,
    /// The MW's token and window (start offset, length) once a Bind was
    /// accepted; kept after an Invalidate so that stale tokens are tried.
    window: Option<(u32, u64, u64)>,
    connector: *mut NdkConnector,
    disconnects: Arc<Signal>,
    /// Completions of Disconnect calls still to come.
    disconnecting: Vec<Arc<Signal>>,
    outstanding: HashMap<usize, Post>,
    /// Receives accepted on this side and not yet matched by a Send the
    /// peer posted: a clean link sends only when the peer has one (over
    /// iWARP, and on the fabric, a Send that finds no receive ends the
    /// connection).
    credits: u64,
    /// The CQ's depth. A CQ may overflow (posts to a queue in error
    /// complete at once, E1, E5, or one is injected): whether it did is
    /// asked of the CQ when entries are missing ([`Fuzzer::cq_failed`]).
    cq_depth: u32,
}

impl Side {
    fn new(adapter: usize) -> Self {
        Self {
            adapter,
            cq: ptr::null_mut(),
            notes: Signal::new(),
            pd: ptr::null_mut(),
            qp: ptr::null_mut(),
            qp_ctx: 0,
            receive_sge: 1,
            initiator_sge: 1,
            inline: 0,
            mr: ptr::null_mut(),
            registered: false,
            buffer: None,
            local_token: 0,
            remote_token: 0,
            mw: ptr::null_mut(),
            window: None,
            connector: ptr::null_mut(),
            disconnects: Signal::new(),
            disconnecting: Vec::new(),
            outstanding: HashMap::new(),
            credits: 0,
            cq_depth: 0,
        }
    }

    fn buffer_len(&self) -> u64 {
        self.buffer.as_ref().map_or(0, |b| b.len as u64)
    }
}

/// Two connected QPs and what they need.
struct Link {
    /// The link's number in its thread (for traces).
    id: u64,
    /// Whether the fuzzer called Disconnect on it.
    disconnected: bool,
    /// The percentage of its calls' parameters made invalid: 0 on most
    /// links (long clean runs), up to 10 on the others.
    noise: u64,
    sides: [Side; 2],
    listener: *mut NdkListener,
    /// The listener's connect events (the connectors they brought).
    incoming: Arc<Signal>,
}

/// An adapter opened for the run and its address.
#[derive(Clone, Copy)]
struct Adapter {
    ptr: usize,
    ip: [u8; 4],
}

impl Adapter {
    fn ptr(self) -> *mut NdkAdapter {
        ptr::with_exposed_provenance_mut(self.ptr)
    }
}

/// A SOCKADDR_IN.
fn sockaddr(ip: [u8; 4], port: u16) -> SockAddrIn {
    SockAddrIn {
        sin_family: AF_INET,
        sin_port: port.to_be(),
        sin_addr: InAddr { bytes: ip },
        sin_zero: [0; 8],
    }
}

const SOCKADDR_IN_LEN: u32 = 16;

/// SGE lengths (least, most) of receives, sends and RDMA requests: a send
/// (at most 4 × 64 bytes) always fits a receive (at least 256 bytes), so
/// only a noisy link ends connections with E7.
const RECEIVE_SGE: (u64, u64) = (256, 1024);
const SEND_SGE: (u64, u64) = (1, 64);
const RDMA_SGE: (u64, u64) = (1, 1024);

/// An empty result, to fill a poll buffer with.
const EMPTY_RESULT: NdkResult = NdkResult {
    status: STATUS_SUCCESS,
    bytes_transferred: 0,
    qp_context: ptr::null_mut(),
    request_context: ptr::null_mut(),
};

/// One thread of a run.
struct Fuzzer<'a> {
    thread: usize,
    rng: Rng,
    adapters: &'a [Adapter],
    config: &'a Config,
    budget: u64,
    next_context: usize,
    out: Outcome,
    links: Vec<Link>,
    /// The current link's noise: the percentage of parameters made invalid
    /// (0 on a clean link).
    noise: u64,
    /// Signals of objects whose close completed, kept a while so that a
    /// callback after the close (L22) is counted rather than a use after
    /// free.
    graveyard: std::collections::VecDeque<Arc<Signal>>,
}

/// How many closed objects' signals a thread keeps watching.
const GRAVEYARD: usize = 256;

/// A failed set-up step: the message, and whether it is a finding.
struct SetupFailed(String);

impl<'a> Fuzzer<'a> {
    fn new(thread: usize, config: &'a Config, adapters: &'a [Adapter], budget: u64) -> Self {
        let salt = (thread as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03);
        Self {
            thread,
            rng: Rng::new(config.seed ^ salt),
            adapters,
            config,
            budget,
            next_context: 0,
            out: Outcome::default(),
            links: Vec::new(),
            graveyard: std::collections::VecDeque::new(),
            noise: 0,
        }
    }

    /// Marks `signal`'s object closed and watches it for late callbacks
    /// (L22) until it leaves the graveyard.
    fn bury(&mut self, signal: Arc<Signal>) {
        signal.closed.store(true, Ordering::SeqCst);
        self.graveyard.push_back(signal);
        while self.graveyard.len() > GRAVEYARD {
            if let Some(old) = self.graveyard.pop_front() {
                self.check_grave(&old);
            }
        }
    }

    fn check_grave(&mut self, signal: &Signal) {
        let late = signal.late.swap(0, Ordering::SeqCst);
        if late != 0 {
            self.finding(&format!(
                "{late} callback(s) came after their object's close completed (L22)"
            ));
        }
    }

    /// Counts one provider call and traces it.
    fn call(&mut self, what: &str, status: NtStatus) {
        self.out.calls += 1;
        if self.config.trace {
            eprintln!(
                "fuzz t{} #{}: {what} -> {:#010x}",
                self.thread,
                self.out.calls,
                status.cast_unsigned()
            );
        }
    }

    fn finding(&mut self, text: &str) {
        let mut line = String::new();
        let _ = write!(
            line,
            "seed {} thread {} call {}: {text}",
            self.config.seed, self.thread, self.out.calls
        );
        if self.config.trace {
            eprintln!("fuzz FINDING {line}");
        }
        self.out.findings.push(line);
    }

    /// A fresh request context: unique in the process (thread in the top
    /// bits), never null.
    fn context(&mut self) -> usize {
        self.next_context += 1;
        ((self.thread + 1) << 40) | self.next_context
    }

    /// The outcome of a call that may pend, waiting for its callback.
    fn finish(
        &mut self,
        what: &str,
        returned: NtStatus,
        signal: &Arc<Signal>,
    ) -> Option<(NtStatus, usize)> {
        if returned != STATUS_PENDING {
            return Some((returned, 0));
        }
        let got = signal.wait();
        if got.is_none() {
            self.finding(&format!(
                "{what} returned STATUS_PENDING and never completed within {WAIT:?}"
            ));
        }
        got
    }

    // -- set-up ------------------------------------------------------------

    /// A set-up step's status: `Ok` on success, else the failure (a finding
    /// unless faults are injected).
    fn expect(&mut self, what: &str, status: NtStatus) -> Result<(), SetupFailed> {
        if status == STATUS_SUCCESS {
            Ok(())
        } else {
            Err(SetupFailed(format!(
                "{what} failed with {:#010x}",
                status.cast_unsigned()
            )))
        }
    }

    /// A create's outcome (L5: a create may pend and hand its object to the
    /// completion instead of the out-pointer): the object, or why it failed.
    fn made<T>(
        &mut self,
        what: &str,
        status: NtStatus,
        created: &Arc<Signal>,
        out: *mut T,
    ) -> Result<*mut T, SetupFailed> {
        self.call(what, status);
        let (status, object) = self
            .finish(what, status, created)
            .unwrap_or((STATUS_PENDING, 0));
        self.expect(what, status)?;
        Ok(if object == 0 {
            out
        } else {
            ptr::with_exposed_provenance_mut(object)
        })
    }

    /// Creates a side's CQ, PD, QP, MR (registered) and MW.
    fn open_side(&mut self, side: &mut Side) -> Result<(), SetupFailed> {
        let adapter = self.adapters[side.adapter].ptr();
        let d = table!(adapter);
        let receive_depth = self.rng.range(1, 16);
        let initiator_depth = self.rng.range(1, 16);
        side.receive_sge = self.rng.range(1, 4);
        side.initiator_sge = self.rng.range(1, 4);
        side.inline = if self.rng.chance(50) { 0 } else { 64 };
        // Room for every entry both queues can have outstanding, so that the
        // CQ never overflows.
        let depth = receive_depth + initiator_depth + self.rng.range(0, 8);
        side.cq_depth = depth;

        let created = Signal::new();
        let mut cq = ptr::null_mut();
        // SAFETY: a live adapter; the notification context and the create
        // completion's live as long as the CQ.
        let status = unsafe {
            (d.ndk_create_cq)(
                adapter,
                depth,
                Some(on_status),
                side.notes.ctx(),
                ptr::null(),
                Some(on_create),
                created.ctx(),
                &raw mut cq,
            )
        };
        side.cq = ptr::null_mut();
        side.cq = self.made("NdkCreateCq", status, &created, cq)?;

        let created = Signal::new();
        let mut pd = ptr::null_mut();
        // SAFETY: a live adapter and an out-pointer.
        let status =
            unsafe { (d.ndk_create_pd)(adapter, Some(on_create), created.ctx(), &raw mut pd) };
        side.pd = ptr::null_mut();
        side.pd = self.made("NdkCreatePd", status, &created, pd)?;

        let pdd = table!(side.pd);
        side.qp_ctx = self.context();
        let created = Signal::new();
        let mut qp = ptr::null_mut();
        // SAFETY: a live PD and CQ, an out-pointer.
        let status = unsafe {
            (pdd.ndk_create_qp)(
                side.pd,
                side.cq,
                side.cq,
                ptr::without_provenance_mut(side.qp_ctx),
                receive_depth,
                initiator_depth,
                side.receive_sge,
                side.initiator_sge,
                side.inline,
                Some(on_create),
                created.ctx(),
                &raw mut qp,
            )
        };
        side.qp = ptr::null_mut();
        side.qp = self.made("NdkCreateQp", status, &created, qp)?;

        let created = Signal::new();
        let mut mr = ptr::null_mut();
        // SAFETY: a live PD and an out-pointer.
        let status =
            unsafe { (pdd.ndk_create_mr)(side.pd, 0, Some(on_create), created.ctx(), &raw mut mr) };
        side.mr = ptr::null_mut();
        side.mr = self.made("NdkCreateMr", status, &created, mr)?;

        let len = usize::try_from(self.rng.range(1, 3)).unwrap_or(1) * PAGE_SIZE;
        let mut buffer = Buffer::new(len);
        let mdl = &raw mut *buffer.mdl;
        side.buffer = Some(buffer);
        let flags =
            (MrFlags::ALLOW_LOCAL_WRITE | MrFlags::ALLOW_REMOTE_READ | MrFlags::ALLOW_REMOTE_WRITE)
                .bits();
        let done = Signal::new();
        // SAFETY: a live MR; the MDL describes `len` bytes of the side's
        // buffer, which is kept until the MR's close has completed.
        let status = unsafe {
            (table!(side.mr).ndk_register_mr)(side.mr, mdl, len, flags, Some(on_status), done.ctx())
        };
        self.call("NdkRegisterMr", status);
        let (status, _) = self
            .finish("NdkRegisterMr", status, &done)
            .unwrap_or((STATUS_PENDING, 0));
        self.expect("NdkRegisterMr", status)?;
        side.registered = true;
        // SAFETY: a live, registered MR.
        side.local_token = unsafe { (table!(side.mr).ndk_get_local_token_from_mr)(side.mr) };
        self.call("NdkGetLocalTokenFromMr", STATUS_SUCCESS);
        // SAFETY: as above.
        side.remote_token = unsafe { (table!(side.mr).ndk_get_remote_token_from_mr)(side.mr) };
        self.call("NdkGetRemoteTokenFromMr", STATUS_SUCCESS);

        let created = Signal::new();
        let mut mw = ptr::null_mut();
        // SAFETY: a live PD and an out-pointer.
        let status =
            unsafe { (pdd.ndk_create_mw)(side.pd, Some(on_create), created.ctx(), &raw mut mw) };
        side.mw = ptr::null_mut();
        side.mw = self.made("NdkCreateMw", status, &created, mw)?;
        Ok(())
    }

    /// Connects side 0 (connector, `NdkConnect`) to side 1 (listener,
    /// `NdkAccept`); the listener is closed once the connection is up.
    fn connect(&mut self, link: &mut Link) -> Result<(), SetupFailed> {
        let [a, b] = &mut link.sides;
        let a_adapter = self.adapters[a.adapter];
        let b_adapter = self.adapters[b.adapter];

        let created = Signal::new();
        let mut connector = ptr::null_mut();
        // SAFETY: a live adapter and an out-pointer.
        let status = unsafe {
            (table!(a_adapter.ptr()).ndk_create_connector)(
                a_adapter.ptr(),
                Some(on_create),
                created.ctx(),
                &raw mut connector,
            )
        };
        a.connector = ptr::null_mut();
        a.connector = self.made("NdkCreateConnector", status, &created, connector)?;

        let incoming = Signal::new();
        let created = Signal::new();
        let mut listener: *mut NdkListener = ptr::null_mut();
        // SAFETY: a live adapter; `incoming` outlives the listener (it is
        // kept until the listener's close completed).
        let status = unsafe {
            (table!(b_adapter.ptr()).ndk_create_listener)(
                b_adapter.ptr(),
                Some(on_connect),
                incoming.ctx(),
                Some(on_create),
                created.ctx(),
                &raw mut listener,
            )
        };
        self.call("NdkCreateListener", status);
        let (status, object) = self
            .finish("NdkCreateListener", status, &created)
            .unwrap_or((STATUS_PENDING, 0));
        if object != 0 {
            listener = ptr::with_exposed_provenance_mut(object);
        }
        self.expect("NdkCreateListener", status)?;
        // The listener's close stays pending until the connector its
        // connect event brought is closed (L24): it closes with the link.
        link.listener = listener;
        link.incoming = Arc::clone(&incoming);
        let [a, b] = &mut link.sides;
        self.listen_and_connect(a_adapter, listener, &incoming, a, b)
    }

    fn listen_and_connect(
        &mut self,
        a_adapter: Adapter,
        listener: *mut NdkListener,
        incoming: &Arc<Signal>,
        a: &mut Side,
        b: &mut Side,
    ) -> Result<(), SetupFailed> {
        let b_ip = self.adapters[b.adapter].ip;
        let ld = table!(listener);
        let address = sockaddr(b_ip, 0);
        let done = Signal::new();
        // SAFETY: a live listener; the address is valid for the call.
        let status = unsafe {
            (ld.ndk_listen)(
                listener,
                (&raw const address).cast::<SockAddr>(),
                SOCKADDR_IN_LEN,
                Some(on_status),
                done.ctx(),
            )
        };
        self.call("NdkListen", status);
        let (status, _) = self
            .finish("NdkListen", status, &done)
            .unwrap_or((STATUS_PENDING, 0));
        self.expect("NdkListen", status)?;
        let mut bound = SockAddrIn::default();
        let mut len = SOCKADDR_IN_LEN;
        // SAFETY: a live listener and a SOCKADDR_IN-sized buffer.
        let status = unsafe {
            (ld.ndk_get_local_address)(listener, (&raw mut bound).cast::<SockAddr>(), &raw mut len)
        };
        self.call("NdkGetListenerLocalAddress", status);
        self.expect("NdkGetListenerLocalAddress", status)?;
        let port = u16::from_be(bound.sin_port);

        let read_limit = self.rng.range(0, 16);
        let src = sockaddr(a_adapter.ip, 0);
        let dst = sockaddr(b_ip, port);
        let connected = Signal::new();
        // SAFETY: live objects; addresses valid for the call; `connected`
        // kept until the completion.
        let status = unsafe {
            (table!(a.connector).ndk_connect)(
                a.connector,
                a.qp,
                (&raw const src).cast::<SockAddr>(),
                SOCKADDR_IN_LEN,
                (&raw const dst).cast::<SockAddr>(),
                SOCKADDR_IN_LEN,
                read_limit,
                read_limit,
                ptr::null(),
                0,
                Some(on_status),
                connected.ctx(),
            )
        };
        self.call("NdkConnect", status);
        if status != STATUS_PENDING {
            self.expect("NdkConnect", status)?;
        }
        // The connect event, unless the connect fails first (an injected
        // fault): then its completion explains the missing event at once.
        let failed = |connected: &Signal| {
            connected
                .state
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .first()
                .is_some_and(|&(status, _)| status != STATUS_SUCCESS)
        };
        let deadline = Instant::now() + WAIT;
        let mut event = None;
        while event.is_none() && Instant::now() < deadline {
            if status == STATUS_PENDING && failed(&connected) {
                break;
            }
            event = incoming.wait_up_to(Duration::from_millis(10));
        }
        let Some((_, connector)) = event else {
            keep(incoming);
            // The connect's own completion explains it, or it is a hang.
            if let Some((status, _)) = self.finish("NdkConnect", status, &connected) {
                self.expect("NdkConnect", status)?;
            }
            self.finding(&format!(
                "NdkConnect: no connect event at the listener within {WAIT:?}"
            ));
            return Err(SetupFailed("no connect event".into()));
        };
        b.connector = ptr::with_exposed_provenance_mut(connector);
        let accepted = Signal::new();
        // SAFETY: live objects; the disconnect signal and `accepted` are kept
        // as long as the provider may call them.
        let accept = unsafe {
            (table!(b.connector).ndk_accept)(
                b.connector,
                b.qp,
                read_limit,
                read_limit,
                ptr::null(),
                0,
                Some(on_event),
                b.disconnects.ctx(),
                Some(on_status),
                accepted.ctx(),
            )
        };
        self.call("NdkAccept", accept);
        if accept != STATUS_PENDING {
            self.expect("NdkAccept", accept)?;
        }
        // From here a failure leaves the accept pending: its completion
        // comes when the connector closes, so its context must outlive that.
        let (status, _) = self
            .finish("NdkConnect", status, &connected)
            .unwrap_or((STATUS_PENDING, 0));
        self.expect("NdkConnect", status)
            .inspect_err(|_| keep(&accepted))?;
        let completed = Signal::new();
        // SAFETY: live objects; the signals are kept as above.
        let status = unsafe {
            (table!(a.connector).ndk_complete_connect)(
                a.connector,
                Some(on_event),
                a.disconnects.ctx(),
                Some(on_status),
                completed.ctx(),
            )
        };
        self.call("NdkCompleteConnect", status);
        let (status, _) = self
            .finish("NdkCompleteConnect", status, &completed)
            .unwrap_or((STATUS_PENDING, 0));
        self.expect("NdkCompleteConnect", status)
            .inspect_err(|_| keep(&accepted))?;
        let (status, _) = self
            .finish("NdkAccept", accept, &accepted)
            .unwrap_or((STATUS_PENDING, 0));
        self.expect("NdkAccept", status)
    }

    /// Opens a link between two random adapters; `None` when set-up failed
    /// (a finding, unless faults are injected).
    fn open_link(&mut self) -> Option<Link> {
        let a = self.rng.index(self.adapters.len());
        let b = self.rng.index(self.adapters.len());
        let mut link = Link {
            id: self.out.links + self.out.setup_failed,
            disconnected: false,
            noise: if self.rng.chance(60) {
                0
            } else {
                self.rng.below(10) + 1
            },
            sides: [Side::new(a), Side::new(b)],
            listener: ptr::null_mut(),
            incoming: Signal::new(),
        };
        let mut result = Ok(());
        for i in 0..2 {
            let mut side = std::mem::replace(&mut link.sides[i], Side::new(0));
            result = self.open_side(&mut side);
            link.sides[i] = side;
            if result.is_err() {
                break;
            }
        }
        self.noise = link.noise;
        if result.is_ok() {
            // Receives before the connection (P8): over iWARP a Send that
            // finds none ends the connection.
            for i in 0..2 {
                for _ in 0..self.rng.below(4) {
                    self.receive(&mut link, i);
                }
            }
            result = self.connect(&mut link);
        }
        match result {
            Ok(()) => {
                self.out.links += 1;
                Some(link)
            }
            Err(SetupFailed(text)) => {
                if self.config.faults.is_none() {
                    self.finding(&format!("link set-up: {text}"));
                }
                self.out.setup_failed += 1;
                self.close_link(link);
                None
            }
        }
    }

    // -- posts -------------------------------------------------------------

    /// Accounts for a post's inline answer.
    fn posted(
        &mut self,
        link: &mut Link,
        i: usize,
        what: &'static str,
        context: usize,
        silent: bool,
        status: NtStatus,
    ) {
        self.call(what, status);
        if self.config.trace {
            eprintln!(
                "fuzz t{}   link {} side {i} context {context:#x}",
                self.thread, link.id
            );
        }
        if status == STATUS_SUCCESS {
            self.out.posted += 1;
            let call = self.out.calls;
            let side = &mut link.sides[i];
            if side
                .outstanding
                .insert(context, Post { what, call, silent })
                .is_some()
            {
                self.finding(&format!(
                    "{what}: request context {context:#x} reused by the fuzzer"
                ));
            }
        } else {
            if status == STATUS_PENDING {
                self.finding(&format!(
                    "{what} returned STATUS_PENDING (a work request completes through the CQ, L11)"
                ));
            }
            self.out.refused += 1;
        }
    }

    /// SGEs over side `i`'s buffer: mostly valid, sometimes with a wrong
    /// token, an address outside the buffer, a zero length or too many.
    fn sges(&mut self, side: &Side, max: u32, (lo, hi): (u64, u64)) -> Vec<NdkSge> {
        // A receive without SGEs takes only empty messages (E7): noisy
        // links only.
        let least = u32::from((lo, hi) == RECEIVE_SGE && self.noise == 0);
        let n = if self.invalid() {
            max + 1
        } else {
            self.rng.range(least, max)
        };
        let len = side.buffer_len();
        let mut out = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let length = lo + self.rng.below(hi - lo + 1);
            let offset = self.rng.below(len - length + 1);
            let mut length = length;
            let mut address = side.buffer.as_ref().map_or(0, |b| b.address(0)) + offset;
            let mut token = side.local_token;
            if self.invalid() {
                match self.rng.below(4) {
                    0 => token = u32::try_from(self.rng.next() & 0xFFFF_FFFF).unwrap_or(0),
                    1 => address = address.wrapping_sub(offset + 1 + self.rng.below(STRAY - 1)),
                    2 => length += len - offset + self.rng.below(STRAY - 1),
                    _ => length = 0,
                }
            }
            out.push(NdkSge {
                address,
                length: u32::try_from(length).unwrap_or(u32::MAX),
                memory_region_token: token,
            });
        }
        out
    }

    fn trace_flags(&self, flags: u32, sges: &[NdkSge]) {
        if self.config.trace {
            eprintln!("fuzz t{}   flags {flags:#x} sges {sges:x?}", self.thread);
        }
    }

    /// Whether to make this parameter invalid: with the current link's
    /// noise, in percent (0 for a clean link).
    fn invalid(&mut self) -> bool {
        self.noise != 0 && self.rng.chance(self.noise)
    }

    /// Flags for an initiator request: never SILENT_SUCCESS unless `silent`.
    /// `solicit`: the operation takes SEND_AND_SOLICIT_EVENT (a Send); on
    /// a noisy link a flag the operation does not take is sometimes added.
    fn flags(&mut self, silent: bool, solicit: bool) -> u32 {
        let mut flags = OpFlags::empty();
        if self.rng.chance(10) {
            flags |= OpFlags::DEFER;
        }
        if solicit && self.rng.chance(15) {
            flags |= OpFlags::SEND_AND_SOLICIT_EVENT;
        }
        if self.rng.chance(5) {
            flags |= OpFlags::READ_FENCE;
        }
        if silent {
            flags |= OpFlags::SILENT_SUCCESS;
        }
        if self.invalid() {
            flags |= OpFlags::from_bits_retain(1 << self.rng.below(12));
        }
        flags.bits()
    }

    fn receive(&mut self, link: &mut Link, i: usize) {
        let side = &link.sides[i];
        let sges = self.sges(side, side.receive_sge, RECEIVE_SGE);
        let qp = side.qp;
        let context = self.context();
        // SAFETY: a live QP; every SGE names memory of the side's buffer or
        // its guard, which outlives the QP.
        let status = unsafe {
            (table!(qp).ndk_receive)(
                qp,
                ptr::without_provenance_mut(context),
                sges.as_ptr(),
                sges.len() as u32,
            )
        };
        self.trace_flags(0, &sges);
        self.posted(link, i, "NdkReceive", context, false, status);
        if status == STATUS_SUCCESS {
            link.sides[i].credits += 1;
        }
    }

    fn send(&mut self, link: &mut Link, i: usize, invalidate: bool) {
        if link.sides[1 - i].credits == 0 && !self.invalid() {
            return;
        }
        // Invalidating no window fails at the peer and ends the connection:
        // on a clean link, a plain Send then.
        let invalidate = invalidate && (link.sides[1 - i].window.is_some() || self.invalid());
        let side = &link.sides[i];
        let silent = self.rng.chance(5);
        let mut flags = self.flags(silent, true);
        let mut sges = self.sges(side, side.initiator_sge, SEND_SGE);
        // INLINE copies from the SGEs' addresses without a token check: only
        // with addresses inside the buffer.
        if side.inline > 0 && self.rng.chance(20) {
            let base = side.buffer.as_ref().map_or(0, |b| b.address(0));
            let len = side.buffer_len();
            let mut total = 0;
            sges.retain(|s| s.address >= base && s.address + u64::from(s.length) <= base + len);
            for s in &mut sges {
                s.length = s.length.min(32);
                total += s.length;
            }
            if total <= side.inline {
                flags |= OpFlags::INLINE.bits();
            }
        }
        let qp = side.qp;
        let context = self.context();
        let (what, status) = if invalidate {
            let peer = &link.sides[1 - i];
            let token = match peer.window {
                Some((token, ..)) if !self.invalid() => token,
                _ => u32::try_from(self.rng.next() & 0xFFFF_FFFF).unwrap_or(0),
            };
            // SAFETY: as in `receive`.
            let status = unsafe {
                (table!(qp).ndk_send_and_invalidate)(
                    qp,
                    ptr::without_provenance_mut(context),
                    sges.as_ptr(),
                    sges.len() as u32,
                    flags,
                    token,
                )
            };
            ("NdkSendAndInvalidate", status)
        } else {
            // SAFETY: as in `receive`.
            let status = unsafe {
                (table!(qp).ndk_send)(
                    qp,
                    ptr::without_provenance_mut(context),
                    sges.as_ptr(),
                    sges.len() as u32,
                    flags,
                )
            };
            ("NdkSend", status)
        };
        self.trace_flags(flags, &sges);
        // SILENT_SUCCESS may also come from a noisy link's stray flag.
        let silent = flags & OpFlags::SILENT_SUCCESS.bits() != 0;
        self.posted(link, i, what, context, silent, status);
        if status == STATUS_SUCCESS {
            let noisy = self.noise != 0;
            let peer = &mut link.sides[1 - i];
            peer.credits = peer.credits.saturating_sub(1);
            if invalidate && !noisy {
                peer.window = None;
            }
        }
    }

    /// A remote address and token on the peer: its MR, its window, or a
    /// stray one.
    fn remote(&mut self, peer: &Side) -> (u64, u32, u64) {
        let base = peer.buffer.as_ref().map_or(0, |b| b.address(0));
        let len = peer.buffer_len();
        let offset = self.rng.below(len);
        let mut room = len - offset;
        let mut token = peer.remote_token;
        let mut address = base + offset;
        if let Some((window_token, start, window_len)) = peer.window
            && self.rng.chance(30)
        {
            token = window_token;
            let within = self.rng.below(window_len.max(1));
            address = base + start + within;
            room = window_len.saturating_sub(within).max(1);
        }
        if self.invalid() {
            match self.rng.below(3) {
                0 => token = u32::try_from(self.rng.next() & 0xFFFF_FFFF).unwrap_or(0),
                1 => address = base.wrapping_sub(1 + self.rng.below(STRAY - 1)),
                _ => room += self.rng.below(STRAY - 1) + 1,
            }
        }
        (address, token, room)
    }

    fn rdma(&mut self, link: &mut Link, i: usize, read: bool) {
        let silent = self.rng.chance(5);
        let flags = self.flags(silent, false);
        let (remote, token, room) = {
            let peer = &link.sides[1 - i];
            self.remote(peer)
        };
        let side = &link.sides[i];
        let mut sges = self.sges(side, side.initiator_sge, RDMA_SGE);
        // Mostly keep the total within the remote room, so that most are
        // valid; else the provider must refuse or fail it.
        if !self.invalid() {
            let mut left = room;
            for s in &mut sges {
                let take = u64::from(s.length).min(left);
                s.length = u32::try_from(take).unwrap_or(0);
                left -= take;
            }
        }
        let qp = side.qp;
        let context = self.context();
        let d = table!(qp);
        let (what, status) = if read {
            // SAFETY: as in `receive`; the remote address is an index.
            let status = unsafe {
                (d.ndk_read)(
                    qp,
                    ptr::without_provenance_mut(context),
                    sges.as_ptr(),
                    sges.len() as u32,
                    remote,
                    token,
                    flags,
                )
            };
            ("NdkRead", status)
        } else {
            // SAFETY: as above.
            let status = unsafe {
                (d.ndk_write)(
                    qp,
                    ptr::without_provenance_mut(context),
                    sges.as_ptr(),
                    sges.len() as u32,
                    remote,
                    token,
                    flags,
                )
            };
            ("NdkWrite", status)
        };
        self.trace_flags(flags, &sges);
        // SILENT_SUCCESS may also come from a noisy link's stray flag.
        let silent = flags & OpFlags::SILENT_SUCCESS.bits() != 0;
        self.posted(link, i, what, context, silent, status);
    }

    fn bind(&mut self, link: &mut Link, i: usize) {
        let side = &link.sides[i];
        // Binding a bound window fails the request: noisy links only.
        if side.window.is_some() && !self.invalid() {
            return;
        }
        let len = side.buffer_len();
        let start = self.rng.below(len);
        let mut window = 1 + self.rng.below(len - start);
        if self.invalid() {
            window += len;
        }
        let address = side.buffer.as_ref().map_or(0, |b| b.address(0)) + start;
        let mut flags = OpFlags::empty();
        if self.rng.chance(70) {
            flags |= OpFlags::ALLOW_REMOTE_READ;
        }
        if self.rng.chance(70) {
            flags |= OpFlags::ALLOW_REMOTE_WRITE;
        }
        if self.rng.chance(10) {
            flags |= OpFlags::DEFER;
        }
        let (qp, mr, mw) = (side.qp, side.mr, side.mw);
        let context = self.context();
        // SAFETY: live QP, MR and MW; the virtual address is an index.
        let status = unsafe {
            (table!(qp).ndk_bind)(
                qp,
                ptr::without_provenance_mut(context),
                mr,
                mw,
                ptr::without_provenance_mut(usize::try_from(address).unwrap_or(0)),
                usize::try_from(window).unwrap_or(0),
                flags.bits(),
            )
        };
        self.posted(link, i, "NdkBind", context, false, status);
        if status == STATUS_SUCCESS {
            // SAFETY: a live MW (M20: its token is readable once Bind returned).
            let token = unsafe { (table!(mw).ndk_get_remote_token_from_mw)(mw) };
            self.call("NdkGetRemoteTokenFromMw", STATUS_SUCCESS);
            link.sides[i].window = Some((token, start, window));
        }
    }

    fn invalidate(&mut self, link: &mut Link, i: usize) {
        let side = &link.sides[i];
        // Invalidating a window never bound fails the request and ends the
        // connection: only on a noisy link.
        if side.window.is_none() && !self.invalid() {
            return;
        }
        let (qp, mw) = (side.qp, side.mw);
        let context = self.context();
        let flags = if self.rng.chance(10) {
            OpFlags::DEFER.bits()
        } else {
            0
        };
        // SAFETY: live QP and MW.
        let status = unsafe {
            (table!(qp).ndk_invalidate)(qp, ptr::without_provenance_mut(context), mw.cast(), flags)
        };
        self.posted(link, i, "NdkInvalidate", context, false, status);
        // The token is stale now; a noisy link keeps trying it.
        if status == STATUS_SUCCESS && self.noise == 0 {
            link.sides[i].window = None;
        }
    }

    // -- reaping -----------------------------------------------------------

    /// One `NdkGetCqResults` of up to `room` entries on side `i`'s CQ; the
    /// number taken.
    fn poll(&mut self, link: &mut Link, i: usize, room: usize) -> usize {
        let mut results = [EMPTY_RESULT; 16];
        let room = room.min(results.len());
        let cq = link.sides[i].cq;
        // SAFETY: a live CQ and room for `room` results.
        let n = unsafe { (table!(cq).ndk_get_cq_results)(cq, results.as_mut_ptr(), room as u32) }
            as usize;
        self.call("NdkGetCqResults", STATUS_SUCCESS);
        if n > room {
            self.finding(&format!(
                "NdkGetCqResults returned {n} entries for room {room}"
            ));
        }
        for result in results.iter().take(n.min(room)) {
            self.reap(link, i, result);
        }
        n.min(room)
    }

    /// Checks one CQ entry against the outstanding posts.
    fn reap(&mut self, link: &mut Link, i: usize, result: &NdkResult) {
        let context = result.request_context.addr();
        let side = &mut link.sides[i];
        let qp_ctx = side.qp_ctx;
        if self.config.trace {
            eprintln!(
                "fuzz t{}   link {} side {i} entry {context:#x} status {:#010x}",
                self.thread,
                link.id,
                result.status.cast_unsigned()
            );
        }
        let side = &mut link.sides[i];
        let Some(post) = side.outstanding.remove(&context) else {
            self.finding(&format!(
                "a CQ entry (status {:#010x}) for request context {context:#x}, which has no outstanding post: a duplicate or a stray (P6)",
                result.status.cast_unsigned()
            ));
            return;
        };
        if result.qp_context.addr() != qp_ctx {
            self.finding(&format!(
                "{} posted at call {}: its entry carries QP context {:#x}, not {qp_ctx:#x} (P21)",
                post.what,
                post.call,
                result.qp_context.addr()
            ));
        }
        match result.status {
            STATUS_SUCCESS => {
                self.out.succeeded += 1;
                if post.silent {
                    self.finding(&format!(
                        "{} posted at call {} with SILENT_SUCCESS got a successful CQ entry (P14)",
                        post.what, post.call
                    ));
                }
            }
            STATUS_CANCELLED => self.out.flushed += 1,
            STATUS_PENDING => {
                self.finding(&format!(
                    "{} posted at call {} completed with STATUS_PENDING",
                    post.what, post.call
                ));
            }
            _ => self.out.failed += 1,
        }
    }

    /// Polls side `i`'s CQ until it is empty (bounded).
    fn drain(&mut self, link: &mut Link, i: usize) {
        for _ in 0..100_000 {
            if self.poll(link, i, 16) == 0 {
                return;
            }
        }
        self.finding("a CQ still had entries after 100000 polls");
    }

    /// Whether side `i`'s CQ reported an overflow (E10) or a fatal error
    /// (E11) through its notification callback: from then on no further
    /// completions are reported, so entries missing for requests accepted
    /// before are owed nothing more (E10 overrides P6's one entry; E13
    /// refuses every later post inline). The report comes through an arm
    /// (E12), now or at the next one: if none came yet, the CQ is armed for
    /// errors once and the report waited for (a healthy CQ never answers,
    /// so this waits out [`WAIT`], on a finding only). An overflow nobody
    /// reported stays a finding.
    fn cq_failed(&mut self, side: &Side) -> bool {
        let reported = |wait| {
            side.notes
                .saw(&[STATUS_BUFFER_OVERFLOW, STATUS_INTERNAL_ERROR], wait)
        };
        let failed = reported(Duration::ZERO)
            || (!side.cq.is_null() && {
                // SAFETY: a live CQ (closed after this check).
                unsafe { (table!(side.cq).ndk_arm_cq)(side.cq, NdkCqNotifyType::ERRORS) };
                self.call("NdkArmCq", STATUS_SUCCESS);
                reported(WAIT)
            });
        self.out.cq_errors += u64::from(failed);
        failed
    }

    fn arm(&mut self, link: &mut Link, i: usize) {
        let kind = match self.rng.below(10) {
            0 => NdkCqNotifyType::ERRORS,
            1..=5 => NdkCqNotifyType::ANY,
            6..=8 => NdkCqNotifyType::SOLICITED,
            _ => NdkCqNotifyType(self.rng.range(3, u32::MAX)),
        };
        let cq = link.sides[i].cq;
        // SAFETY: a live CQ.
        unsafe { (table!(cq).ndk_arm_cq)(cq, kind) };
        self.call("NdkArmCq", STATUS_SUCCESS);
    }

    fn flush(&mut self, link: &mut Link, i: usize) {
        let qp = link.sides[i].qp;
        // SAFETY: a live QP.
        unsafe { (table!(qp).ndk_flush)(qp) };
        self.call("NdkFlush", STATUS_SUCCESS);
    }

    fn disconnect(&mut self, link: &mut Link, i: usize) {
        let connector = link.sides[i].connector;
        if connector.is_null() {
            return;
        }
        let done = Signal::new();
        // SAFETY: a live connector; `done` is kept until it completes.
        let status =
            unsafe { (table!(connector).ndk_disconnect)(connector, Some(on_status), done.ctx()) };
        self.call("NdkDisconnect", status);
        link.disconnected = true;
        if status == STATUS_PENDING {
            link.sides[i].disconnecting.push(done);
        }
    }

    // -- closing -----------------------------------------------------------

    /// Starts the close of `object` through `close`; the signal to wait on
    /// (`None`: closed at once).
    fn start_close(
        &mut self,
        what: &'static str,
        object: *mut NdkObjectHeader,
        close: softndk::abi::NdkFnCloseObject,
    ) -> Option<(&'static str, Arc<Signal>)> {
        let closed = Signal::new();
        // SAFETY: a live object and its own close slot, called once.
        let status = unsafe { close(object, Some(on_event), closed.ctx()) };
        self.call(what, status);
        match status {
            STATUS_SUCCESS => {
                self.out.closed += 1;
                None
            }
            STATUS_PENDING => Some((what, closed)),
            other => {
                self.finding(&format!(
                    "{what} returned {:#010x} (L18: a close never fails)",
                    other.cast_unsigned()
                ));
                None
            }
        }
    }

    fn wait_closes(&mut self, pending: Vec<(&'static str, Arc<Signal>)>) -> bool {
        let mut all = true;
        for (what, signal) in pending {
            if signal.wait().is_some() {
                self.out.closed += 1;
            } else {
                all = false;
                self.finding(&format!(
                    "{what} pended and its close never completed within {WAIT:?} (L18, L21)"
                ));
            }
        }
        all
    }

    /// Closes a link in a random order: connectors (after a disconnect or
    /// not) and QPs first, then the CQs are drained and checked, then the
    /// MWs, MRs (deregistered or not), CQs and PDs.
    fn close_link(&mut self, mut link: Link) {
        if self.config.trace {
            eprintln!(
                "fuzz t{}   closing link {} noise {}",
                self.thread, link.id, link.noise
            );
        }
        if self.rng.chance(50) {
            for i in 0..2 {
                if self.rng.chance(50) {
                    self.disconnect(&mut link, i);
                }
            }
        }
        // QPs and connectors, in a random order.
        let mut order = [0_usize, 1, 2, 3];
        self.shuffle(&mut order);
        let mut pending = Vec::new();
        for what in order {
            let side = &mut link.sides[what / 2];
            if what % 2 == 0 {
                let qp = std::mem::replace(&mut side.qp, ptr::null_mut());
                if !qp.is_null() {
                    pending.extend(self.start_close(
                        "NdkCloseQp",
                        qp.cast(),
                        table!(qp).ndk_close_qp,
                    ));
                }
            } else {
                let connector = std::mem::replace(&mut side.connector, ptr::null_mut());
                if !connector.is_null() {
                    pending.extend(self.start_close(
                        "NdkCloseConnector",
                        connector.cast(),
                        table!(connector).ndk_close_connector,
                    ));
                }
            }
        }
        // Connectors of connect events the fuzzer did not accept, then the
        // listener.
        let extras: Vec<usize> = link
            .incoming
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
            .map(|(_, extra)| extra)
            .collect();
        for extra in extras {
            let extra: *mut NdkConnector = ptr::with_exposed_provenance_mut(extra);
            pending.extend(self.start_close(
                "NdkCloseConnector",
                extra.cast(),
                table!(extra).ndk_close_connector,
            ));
        }
        let listener = std::mem::replace(&mut link.listener, ptr::null_mut());
        if !listener.is_null() {
            pending.extend(self.start_close(
                "NdkCloseListener",
                listener.cast(),
                table!(listener).ndk_close_listener,
            ));
        }
        let closed = self.wait_closes(pending);
        if closed {
            let incoming = Arc::clone(&link.incoming);
            self.bury(incoming);
        } else {
            keep(&link.incoming);
        }
        for i in 0..2 {
            if closed {
                let disconnects = Arc::clone(&link.sides[i].disconnects);
                self.bury(disconnects);
            }
            for done in std::mem::take(&mut link.sides[i].disconnecting) {
                if done.wait().is_none() {
                    self.finding("NdkDisconnect pended and never completed, though its connector's close did (X1, L21)");
                }
            }
        }
        // L21: with the QPs closed, every request has its entry.
        for i in 0..2 {
            if link.sides[i].cq.is_null() {
                continue;
            }
            self.drain(&mut link, i);
            let left: Vec<Post> = link.sides[i]
                .outstanding
                .drain()
                .map(|(_, p)| p)
                .filter(|p| !p.silent)
                .collect();
            if closed
                && let Some(first) = left.first()
                && !self.cq_failed(&link.sides[i])
            {
                self.finding(&format!(
                    "{} posted request(s) never completed though the QP's close did (P6, L21); the first: {} at call {}",
                    left.len(),
                    first.what,
                    first.call
                ));
            }
        }
        // The rest, in a random order.
        let mut order = [0_usize, 1, 2, 3, 4, 5, 6, 7];
        self.shuffle(&mut order);
        let mut pending = Vec::new();
        for what in order {
            let side = &mut link.sides[what / 4];
            match what % 4 {
                0 => {
                    let mw = std::mem::replace(&mut side.mw, ptr::null_mut());
                    if !mw.is_null() {
                        pending.extend(self.start_close(
                            "NdkCloseMw",
                            mw.cast(),
                            table!(mw).ndk_close_mw,
                        ));
                    }
                }
                1 => {
                    let mr = std::mem::replace(&mut side.mr, ptr::null_mut());
                    if !mr.is_null() {
                        if side.registered && self.rng.chance(50) {
                            let done = Signal::new();
                            // SAFETY: a live, registered MR.
                            let status = unsafe {
                                (table!(mr).ndk_deregister_mr)(mr, Some(on_status), done.ctx())
                            };
                            self.call("NdkDeregisterMr", status);
                            let _ = self.finish("NdkDeregisterMr", status, &done);
                        }
                        pending.extend(self.start_close(
                            "NdkCloseMr",
                            mr.cast(),
                            table!(mr).ndk_close_mr,
                        ));
                    }
                }
                2 => {
                    let cq = std::mem::replace(&mut side.cq, ptr::null_mut());
                    if !cq.is_null() {
                        pending.extend(self.start_close(
                            "NdkCloseCq",
                            cq.cast(),
                            table!(cq).ndk_close_cq,
                        ));
                    }
                }
                _ => {
                    let pd = std::mem::replace(&mut side.pd, ptr::null_mut());
                    if !pd.is_null() {
                        pending.extend(self.start_close(
                            "NdkClosePd",
                            pd.cast(),
                            table!(pd).ndk_close_pd,
                        ));
                    }
                }
            }
        }
        let closed = self.wait_closes(pending) && closed;
        for side in &mut link.sides {
            self.out.notifications += side.notes.count.load(Ordering::SeqCst);
            if closed {
                self.graveyard.push_back(Arc::clone(&side.notes));
                side.notes.closed.store(true, Ordering::SeqCst);
            }
            if let Some(buffer) = side.buffer.take() {
                if !buffer.guards_intact() {
                    self.finding(
                        "bytes around a registered buffer were written: a bounds check missed",
                    );
                }
                if closed {
                    drop(buffer);
                } else {
                    // The device may still own the bytes.
                    std::mem::forget(buffer);
                }
            }
            if !closed {
                // Callbacks may still come: their contexts must outlive them.
                std::mem::forget(Arc::clone(&side.notes));
                std::mem::forget(Arc::clone(&side.disconnects));
            }
        }
    }

    fn shuffle(&mut self, items: &mut [usize]) {
        for i in (1..items.len()).rev() {
            let j = self.rng.index(i + 1);
            items.swap(i, j);
        }
    }

    // -- the loop ----------------------------------------------------------

    /// One random step on one of the thread's links.
    fn step(&mut self) {
        if self.links.len() < self.config.links && (self.links.is_empty() || self.rng.chance(5)) {
            if let Some(link) = self.open_link() {
                self.links.push(link);
            }
            return;
        }
        let Some(index) = (!self.links.is_empty()).then(|| self.rng.index(self.links.len())) else {
            return;
        };
        let mut link = self.links.swap_remove(index);
        self.noise = link.noise;
        let i = self.rng.index(2);
        let mut choice = self.rng.below(1000);
        // A disconnected link refuses every post (X5): close it soon.
        if link.disconnected && self.rng.chance(20) {
            choice = 999;
        }
        // A consumer sizes its CQ for what it has outstanding: with the CQ
        // possibly full, reap instead of posting (but now and then post
        // anyway, so that overflows (E10) are exercised too).
        let side = &link.sides[i];
        if choice < 620 && side.outstanding.len() >= side.cq_depth as usize && !self.rng.chance(2) {
            choice = 620;
        }
        match choice {
            0..=199 => self.receive(&mut link, i),
            200..=349 => self.send(&mut link, i, false),
            350..=379 => self.send(&mut link, i, true),
            380..=479 => self.rdma(&mut link, i, false),
            480..=569 => self.rdma(&mut link, i, true),
            570..=599 => self.bind(&mut link, i),
            600..=619 => self.invalidate(&mut link, i),
            620..=879 => {
                let room = if choice == 620 {
                    16
                } else {
                    self.rng.index(17)
                };
                self.poll(&mut link, i, room);
            }
            880..=979 => self.arm(&mut link, i),
            // A flush leaves the queues in error: every later post completes
            // cancelled (E1, E5); so rarely, for links to do work first.
            980..=984 => self.flush(&mut link, i),
            985..=989 => self.disconnect(&mut link, i),
            _ => {
                self.close_link(link);
                return;
            }
        }
        self.links.push(link);
    }

    fn run(mut self) -> Outcome {
        while self.out.calls < self.budget && self.out.findings.is_empty() {
            self.step();
        }
        for link in std::mem::take(&mut self.links) {
            self.close_link(link);
        }
        for signal in std::mem::take(&mut self.graveyard) {
            self.check_grave(&signal);
        }
        self.out
    }
}

// ---------------------------------------------------------------------------
// A run
// ---------------------------------------------------------------------------

/// The L17 counter (a close while a call is inside the object, always
/// counted).
fn l17_breaches() -> u64 {
    let mut counts = [BreachCount {
        rule: [0; 8],
        count: 0,
    }; 8];
    let mut n = counts.len() as u32;
    // SAFETY: room for `n` entries and a writable count.
    let status = unsafe { SoftNdkGetBreachCounts(counts.as_mut_ptr(), &raw mut n) };
    if status != STATUS_SUCCESS {
        return 0;
    }
    counts
        .iter()
        .take(n as usize)
        .find(|c| c.rule.starts_with(b"L17\0"))
        .map_or(0, |c| c.count)
}

/// Runs the fuzzer as `config` says; the counts and the findings.
///
/// The live-object check assumes no other code of the process creates or
/// closes provider objects during the run.
pub fn run(config: &Config) -> Outcome {
    let mut outcome = Outcome::default();
    if let Some(plan) = &config.faults {
        let text = std::ffi::CString::new(plan.as_str()).unwrap_or_default();
        // SAFETY: a NUL-terminated string.
        let status = unsafe { SoftNdkSetFaultPlan(text.as_ptr()) };
        if status != STATUS_SUCCESS {
            outcome
                .findings
                .push(format!("the fault plan {plan:?} was refused"));
            return outcome;
        }
    }
    let live_before = SoftNdkGetLiveObjects();
    let l17_before = l17_breaches();
    let mut adapters = Vec::new();
    for n in 0..config.adapters.max(1) {
        let ip = [127, 0, config.net, u8::try_from(n + 1).unwrap_or(u8::MAX)];
        let address = sockaddr(ip, 0);
        let mut adapter = ptr::null_mut();
        let raw = (&raw const address).cast::<SockAddr>();
        let status = if config.iwarp {
            // SAFETY: a readable SOCKADDR_IN and a writable out-pointer.
            unsafe { SoftNdkOpenAdapterEx(raw, 1, &raw mut adapter) }
        } else {
            // SAFETY: as above.
            unsafe { SoftNdkOpenAdapter(raw, &raw mut adapter) }
        };
        outcome.calls += 1;
        if status != STATUS_SUCCESS {
            outcome.findings.push(format!(
                "SoftNdkOpenAdapter({ip:?}) failed with {:#010x}",
                status.cast_unsigned()
            ));
            continue;
        }
        adapters.push(Adapter {
            ptr: adapter.expose_provenance(),
            ip,
        });
    }
    if !adapters.is_empty() {
        let threads = config.threads.max(1);
        let share = config.calls / threads as u64;
        let results: Vec<Outcome> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let adapters = &adapters;
                    scope.spawn(move || Fuzzer::new(t, config, adapters, share).run())
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| Outcome {
                        findings: vec!["a fuzzer thread panicked".into()],
                        ..Outcome::default()
                    })
                })
                .collect()
        });
        for result in &results {
            outcome.add(result);
        }
    }
    for adapter in &adapters {
        // SAFETY: an adapter opened above, closed once, its objects closed.
        let status = unsafe { SoftNdkCloseAdapter(adapter.ptr()) };
        outcome.calls += 1;
        if status != STATUS_SUCCESS {
            outcome.findings.push(format!(
                "SoftNdkCloseAdapter failed with {:#010x}",
                status.cast_unsigned()
            ));
        }
    }
    if config.faults.is_some() {
        // SAFETY: null turns fault injection off.
        unsafe { SoftNdkSetFaultPlan(ptr::null()) };
    }
    // An object's memory goes once the last reference drops, which another
    // thread (a device's worker) may hold a moment after the close.
    let start = Instant::now();
    let mut live = SoftNdkGetLiveObjects();
    while live != live_before && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
        live = SoftNdkGetLiveObjects();
    }
    if outcome.findings.is_empty() && live != live_before {
        outcome.findings.push(format!(
            "seed {}: {} provider object(s) left allocated after every adapter closed (before the run {live_before}, after {live})",
            config.seed,
            live.wrapping_sub(live_before).cast_signed()
        ));
    }
    let l17 = l17_breaches();
    if l17 != l17_before {
        outcome.findings.push(format!(
            "seed {}: {} L17 breach(es) counted: a close raced a call inside its object",
            config.seed,
            l17 - l17_before
        ));
    }
    outcome
}
