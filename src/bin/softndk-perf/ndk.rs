//! A consumer of the host-mode NDK C ABI, written as a kernel consumer
//! would write one: the adapter comes from `SoftNdkOpenAdapter` (or
//! `SoftNdkOpenAdapterEx` with transport 1, iWARP over TCP), and every other
//! provider call goes through a function pointer read from the object's
//! dispatch table. It never reaches into the provider's Rust internals.
//!
//! One module for every host-mode program that speaks to the provider:
//! the perf tool (`src/bin/softndk-perf/`, which uses [`Link`]: both ends
//! of a connection in one process) and the examples `rping` and `perftest`
//! (one side of a connection each), which include this file with
//! `#[path]`. All of their `unsafe` lives here. Each program uses a part of
//! the module, hence the `dead_code` allowance below.
//!
//! Objects are closed explicitly (`close(self)`); none has a `Drop` that
//! calls the provider, because `SoftNdkCloseAdapter` blocks until every
//! object of the adapter is closed. A [`Region`] that was never deregistered
//! leaks its memory instead of freeing it under the device.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::ffi::c_void;
use std::ptr;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use softndk::abi::{
    AF_INET, InAddr, Mdl, MrFlags, NdkAdapter, NdkAdapterDispatch, NdkAdapterInfo, NdkConnector,
    NdkConnectorDispatch, NdkCq, NdkCqDispatch, NdkCqNotifyType, NdkFnWrite, NdkListener,
    NdkListenerDispatch, NdkMr, NdkPd, NdkPdDispatch, NdkQp, NdkQpDispatch, NdkResult, NdkSge,
    NtStatus, OpFlags, PAGE_SIZE, STATUS_PENDING, STATUS_SUCCESS, SockAddr, SockAddrIn,
};
use softndk::provider::host::{SoftNdkCloseAdapter, SoftNdkOpenAdapter, SoftNdkOpenAdapterEx};

/// How long the tool waits for any one thing (a completion, a connection)
/// before it gives up with an error.
pub const WAIT: Duration = Duration::from_secs(20);

/// Empty polls in a row after which a polling thread yields its core
/// before each further poll (about 10 µs of polling): on a machine with
/// fewer free cores than spinning threads, the thread that would produce
/// the completion (the peer, or the deferred engine's worker) gets to run
/// instead of waiting for the spinner's time slice to end.
pub const SPINS_BEFORE_YIELD: u32 = 256;

/// A failure, with a message for the user.
pub type Result<T> = std::result::Result<T, String>;

/// Turns a provider status into a `Result`.
pub fn check(what: &str, status: NtStatus) -> Result<()> {
    if status == STATUS_SUCCESS {
        Ok(())
    } else {
        Err(format!(
            "{what} failed with status {:#010x}",
            status.cast_unsigned()
        ))
    }
}

/// A request context: the tool's number for a request.
fn context(value: usize) -> *mut c_void {
    ptr::without_provenance_mut(value)
}

/// The tool's number of a completed request (see [`context`]).
pub fn request_number(result: &NdkResult) -> usize {
    result.request_context.addr()
}

/// An empty result, to fill a poll buffer with.
pub const EMPTY_RESULT: NdkResult = NdkResult {
    status: STATUS_SUCCESS,
    bytes_transferred: 0,
    qp_context: ptr::null_mut(),
    request_context: ptr::null_mut(),
};

// ---------------------------------------------------------------------------
// Callbacks
// ---------------------------------------------------------------------------

/// One status callback (a request completion, a close completion, a CQ
/// notification or a disconnect event) and a thread waiting for it.
#[derive(Default)]
pub struct Signal {
    /// Statuses delivered and not yet taken.
    state: Mutex<Vec<NtStatus>>,
    cv: Condvar,
}

impl Signal {
    /// A new signal, shared with the provider through [`Signal::context`].
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// The context pointer for [`on_status`] / [`on_close`]. The caller
    /// keeps the `Arc` alive while the provider may call back.
    fn context(self: &Arc<Self>) -> *mut c_void {
        Arc::as_ptr(self).cast_mut().cast()
    }

    /// Records a callback's status and wakes the waiter.
    pub fn push(&self, status: NtStatus) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(status);
        self.cv.notify_all();
    }

    /// Whether a status was delivered and not yet taken.
    pub fn delivered(&self) -> bool {
        !self
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
    }

    /// Forgets the statuses delivered so far.
    pub fn clear(&self) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// Waits up to [`WAIT`] for a status and takes the oldest.
    pub fn wait(self: &Arc<Self>, what: &str) -> Result<NtStatus> {
        let guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let (mut guard, timeout) = self
            .cv
            .wait_timeout_while(guard, WAIT, |statuses| statuses.is_empty())
            .unwrap_or_else(PoisonError::into_inner);
        if timeout.timed_out() {
            // The provider may still call back: keep the context alive.
            std::mem::forget(Arc::clone(self));
            return Err(format!("{what}: no callback within {WAIT:?}"));
        }
        Ok(guard.remove(0))
    }

    /// The outcome of a call that may pend: its return value, or the status
    /// of its completion when it returned `STATUS_PENDING`.
    fn outcome(self: &Arc<Self>, what: &str, returned: NtStatus) -> Result<()> {
        let status = if returned == STATUS_PENDING {
            self.wait(what)?
        } else {
            returned
        };
        check(what, status)
    }
}

/// `NDK_FN_REQUEST_COMPLETION`, `NDK_FN_CQ_NOTIFICATION_CALLBACK`: records
/// the status in the [`Signal`] of `ctx`.
unsafe extern "system" fn on_status(ctx: *mut c_void, status: NtStatus) {
    // SAFETY: every context passed with this callback is `Signal::context`
    // of a Signal its owner keeps alive while the callback may come.
    let signal = unsafe { &*ctx.cast::<Signal>() };
    signal.push(status);
}

/// `NDK_FN_CLOSE_COMPLETION` and `NDK_FN_DISCONNECT_EVENT_CALLBACK`:
/// recorded as `STATUS_SUCCESS`.
unsafe extern "system" fn on_close(ctx: *mut c_void) {
    // SAFETY: as in `on_status`.
    let signal = unsafe { &*ctx.cast::<Signal>() };
    signal.push(STATUS_SUCCESS);
}

/// Connectors handed over by a listener's connect-event callback.
#[derive(Default)]
struct Incoming {
    connectors: Mutex<Vec<usize>>,
    cv: Condvar,
}

/// `NDK_FN_CONNECT_EVENT_CALLBACK` for an [`Incoming`].
unsafe extern "system" fn on_connect(ctx: *mut c_void, connector: *mut NdkConnector) {
    // SAFETY: the listener's context is an `Incoming` that `Listener` keeps
    // alive until the listener is closed.
    let incoming = unsafe { &*ctx.cast::<Incoming>() };
    incoming
        .connectors
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(connector.addr());
    incoming.cv.notify_all();
}

/// Reads the dispatch table of a provider object.
macro_rules! dispatch {
    ($object:expr) => {{
        let object = $object;
        // SAFETY: `object` is a live object the provider created; its
        // header and dispatch pointer are readable while it is open.
        let table = unsafe { (*object).dispatch };
        // SAFETY: the provider's dispatch tables are static and every slot
        // is filled.
        unsafe { &*table }
    }};
}

/// A wrapper of a provider object (`ptr`) and its dispatch table: usable
/// from any thread, and `d()` reads its table.
macro_rules! provider_object {
    ($object:ty => $table:ty) => {
        // SAFETY: the provider's objects may be used from any thread (I6).
        unsafe impl Send for $object {}
        // SAFETY: as above.
        unsafe impl Sync for $object {}

        impl $object {
            fn d(&self) -> &'static $table {
                dispatch!(self.ptr)
            }
        }
    };
}

/// Closes an object through its table's close slot and waits for the close
/// to complete.
macro_rules! close_object {
    ($what:expr, $object:expr, $slot:ident) => {{
        let object = $object;
        let close = dispatch!(object).$slot;
        // SAFETY: a live object and its own close slot; the signal of `ctx`
        // is kept until the close completion arrived.
        Pending::start($what, |ctx| unsafe {
            close(object.cast(), Some(on_close), ctx)
        })
        .finish()
    }};
}

// ---------------------------------------------------------------------------
// Adapter
// ---------------------------------------------------------------------------

/// An open adapter on an IPv4 address.
pub struct Adapter {
    ptr: *mut NdkAdapter,
    address: SockAddrIn,
}

provider_object!(Adapter => NdkAdapterDispatch);

/// A `SOCKADDR_IN` for `ip` and `port` (host order).
fn sockaddr(ip: [u8; 4], port: u16) -> SockAddrIn {
    SockAddrIn {
        sin_family: AF_INET,
        sin_port: port.to_be(),
        sin_addr: InAddr { bytes: ip },
        sin_zero: [0; 8],
    }
}

/// The length of a `SOCKADDR_IN`, as the ABI's `ULONG` lengths want it.
const SOCKADDR_IN_LEN: u32 = 16;

impl Adapter {
    /// `SoftNdkOpenAdapter` on `ip` (the default transport).
    pub fn open(ip: [u8; 4]) -> Result<Self> {
        Self::open_on(ip, None)
    }

    /// `SoftNdkOpenAdapterEx` on `ip`, transport 1 (iWARP over TCP).
    pub fn open_iwarp(ip: [u8; 4]) -> Result<Self> {
        Self::open_on(ip, Some(1))
    }

    /// `SoftNdkOpenAdapterEx` with `transport`, or `SoftNdkOpenAdapter`.
    fn open_on(ip: [u8; 4], transport: Option<u32>) -> Result<Self> {
        let address = sockaddr(ip, 0);
        let mut adapter = ptr::null_mut();
        let raw_address = (&raw const address).cast::<SockAddr>();
        let [a, b, c, d] = ip;
        let (what, status) = match transport {
            Some(transport) => (
                format!("SoftNdkOpenAdapterEx({a}.{b}.{c}.{d}, {transport})"),
                // SAFETY: a readable SOCKADDR_IN and a writable out-pointer.
                unsafe { SoftNdkOpenAdapterEx(raw_address, transport, &raw mut adapter) },
            ),
            None => (
                format!("SoftNdkOpenAdapter({a}.{b}.{c}.{d})"),
                // SAFETY: as above.
                unsafe { SoftNdkOpenAdapter(raw_address, &raw mut adapter) },
            ),
        };
        check(&what, status)?;
        Ok(Self {
            ptr: adapter,
            address,
        })
    }

    /// `NdkQueryAdapterInfo`.
    pub fn info(&self) -> Result<NdkAdapterInfo> {
        let mut info = NdkAdapterInfo::default();
        let mut size = u32::try_from(size_of::<NdkAdapterInfo>()).unwrap_or(u32::MAX);
        let query = self.d().ndk_query_adapter_info;
        // SAFETY: a live adapter and a buffer of `size` bytes.
        let status = unsafe { query(self.ptr, &raw mut info, &raw mut size) };
        check("NdkQueryAdapterInfo", status)?;
        Ok(info)
    }

    /// `NdkCreateCq` of `depth` entries; its notifications go to the CQ's
    /// own [`Signal`].
    pub fn cq(&self, depth: u32) -> Result<Cq> {
        let notifications = Signal::new();
        let ctx = notifications.context();
        let create = self.d().ndk_create_cq;
        let mut cq = ptr::null_mut();
        // SAFETY: a live adapter; `notifications` lives as long as the CQ.
        let status = unsafe {
            create(
                self.ptr,
                depth,
                Some(on_status),
                ctx,
                ptr::null(),
                None,
                ptr::null_mut(),
                &raw mut cq,
            )
        };
        check("NdkCreateCq", status)?;
        Ok(Cq {
            ptr: cq,
            notifications,
        })
    }

    /// `NdkCreatePd`.
    pub fn pd(&self) -> Result<Pd> {
        let create = self.d().ndk_create_pd;
        let mut pd = ptr::null_mut();
        // SAFETY: a live adapter and an out-pointer.
        let status = unsafe { create(self.ptr, None, ptr::null_mut(), &raw mut pd) };
        check("NdkCreatePd", status)?;
        Ok(Pd { ptr: pd })
    }

    /// `SoftNdkCloseAdapter`; every object of the adapter is closed first.
    pub fn close(self) -> Result<()> {
        // SAFETY: an adapter from `SoftNdkOpenAdapter`, not used afterwards.
        let status = unsafe { SoftNdkCloseAdapter(self.ptr) };
        check("SoftNdkCloseAdapter", status)
    }
}

// ---------------------------------------------------------------------------
// CQ
// ---------------------------------------------------------------------------

/// A completion queue.
pub struct Cq {
    ptr: *mut NdkCq,
    /// Where the CQ's notification callback goes (see [`Cq::wait`]); lives
    /// as long as the CQ.
    notifications: Arc<Signal>,
}

provider_object!(Cq => NdkCqDispatch);

impl Cq {
    /// `NdkGetCqResults` into `out`; the number of results.
    pub fn poll(&self, out: &mut [NdkResult]) -> usize {
        let get = self.d().ndk_get_cq_results;
        let room = u32::try_from(out.len()).unwrap_or(u32::MAX);
        // SAFETY: a live CQ and room for `room` results.
        let n = unsafe { get(self.ptr, out.as_mut_ptr(), room) };
        usize::try_from(n).unwrap_or(usize::MAX).min(out.len())
    }

    /// Waits for at least one result, spinning on `NdkGetCqResults`
    /// (`armed == false`; after [`SPINS_BEFORE_YIELD`] empty polls each
    /// further poll yields the core first) or sleeping until the CQ's notification callback
    /// after `NdkArmCq(NDK_CQ_NOTIFY_ANY)` (`armed == true`).
    pub fn wait(&self, out: &mut [NdkResult], armed: bool) -> Result<usize> {
        let start = Instant::now();
        let mut spins = 0_u32;
        loop {
            let n = self.poll(out);
            if n > 0 {
                return Ok(n);
            }
            if armed {
                self.notifications.clear();
                let arm = self.d().ndk_arm_cq;
                // SAFETY: a live CQ.
                unsafe { arm(self.ptr, NdkCqNotifyType::ANY) };
                // A completion queued before the arm took effect.
                let n = self.poll(out);
                if n > 0 {
                    return Ok(n);
                }
                check(
                    "CQ notification",
                    self.notifications.wait("CQ notification")?,
                )?;
            } else {
                spins = spins.wrapping_add(1);
                if spins > SPINS_BEFORE_YIELD {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
                if spins.is_multiple_of(4096) && start.elapsed() > WAIT {
                    return Err(format!("no completion within {WAIT:?}"));
                }
            }
        }
    }

    /// `NdkCloseCq`.
    pub fn close(self) -> Result<()> {
        close_object!("NdkCloseCq", self.ptr, ndk_close_cq)
    }
}

/// One successful completion: its request number and the bytes it moved.
#[derive(Clone, Copy, Debug)]
pub struct Done {
    /// The request number (see [`request_number`]).
    pub kind: usize,
    /// `BytesTransferred`.
    pub bytes: u32,
}

/// Completions polled from a CQ and not yet claimed: a program waiting for
/// one kind of request keeps the others for later.
#[derive(Default)]
pub struct Completions {
    stash: VecDeque<Done>,
}

impl Completions {
    /// Polls `cq` once into the stash; the number of results. A failed
    /// completion is an error naming its request (`name` of its number).
    pub fn drain(&mut self, cq: &Cq, name: fn(usize) -> &'static str) -> Result<usize> {
        let mut results = [EMPTY_RESULT; 16];
        let n = cq.poll(&mut results);
        for result in &results[..n] {
            let kind = request_number(result);
            if result.status != STATUS_SUCCESS {
                return Err(format!(
                    "{} completed with status {:#010x}",
                    name(kind),
                    result.status.cast_unsigned()
                ));
            }
            self.stash.push_back(Done {
                kind,
                bytes: result.bytes_transferred,
            });
        }
        Ok(n)
    }

    /// Waits up to `limit` for a completion of `kind`, polling `cq` (and
    /// sleeping 100 µs whenever it is empty); `Ok(None)` when `stop` turned
    /// true first (asked whenever the CQ is empty).
    pub fn wait(
        &mut self,
        cq: &Cq,
        kind: usize,
        name: fn(usize) -> &'static str,
        limit: Duration,
        stop: &dyn Fn() -> bool,
    ) -> Result<Option<Done>> {
        let start = Instant::now();
        loop {
            let n = self.drain(cq, name)?;
            if let Some(done) = self.claim(kind) {
                return Ok(Some(done));
            }
            if n == 0 {
                if stop() {
                    return Ok(None);
                }
                if start.elapsed() > limit {
                    return Err(format!("no {} completion within {limit:?}", name(kind)));
                }
                std::thread::sleep(Duration::from_micros(100));
            }
        }
    }

    /// Takes the oldest completion of `kind`.
    pub fn claim(&mut self, kind: usize) -> Option<Done> {
        let i = self.stash.iter().position(|d| d.kind == kind)?;
        self.stash.remove(i)
    }

    /// Takes the oldest completion of any kind.
    pub fn next(&mut self) -> Option<Done> {
        self.stash.pop_front()
    }
}

// ---------------------------------------------------------------------------
// PD, MR, memory
// ---------------------------------------------------------------------------

/// A protection domain.
pub struct Pd {
    ptr: *mut NdkPd,
}

provider_object!(Pd => NdkPdDispatch);

/// Queue sizes of a QP.
#[derive(Clone, Copy, Debug)]
pub struct QpShape {
    /// Receive queue depth.
    pub receive_depth: u32,
    /// Initiator queue depth.
    pub initiator_depth: u32,
    /// SGEs per request, both queues.
    pub sge: u32,
}

impl Pd {
    /// `NdkCreateQp` on `cq` (receive and initiator), with context `tag`.
    pub fn qp(&self, cq: &Cq, tag: usize, shape: QpShape) -> Result<Qp> {
        let create = self.d().ndk_create_qp;
        let mut qp = ptr::null_mut();
        // SAFETY: a live PD and CQ, an out-pointer.
        let status = unsafe {
            create(
                self.ptr,
                cq.ptr,
                cq.ptr,
                context(tag),
                shape.receive_depth,
                shape.initiator_depth,
                shape.sge,
                shape.sge,
                0,
                None,
                ptr::null_mut(),
                &raw mut qp,
            )
        };
        check("NdkCreateQp", status)?;
        Ok(Qp { ptr: qp })
    }

    /// `NdkCreateMr` and `NdkRegisterMr` of `len` fresh page-aligned bytes
    /// with local write, remote read and remote write access.
    pub fn region(&self, len: usize) -> Result<Region> {
        let create = self.d().ndk_create_mr;
        let mut mr = ptr::null_mut();
        // SAFETY: a live PD and an out-pointer.
        let status = unsafe { create(self.ptr, 0, None, ptr::null_mut(), &raw mut mr) };
        check("NdkCreateMr", status)?;
        let mut memory = Memory::new(len)?;
        let register = dispatch!(mr).ndk_register_mr;
        let flags =
            (MrFlags::ALLOW_LOCAL_WRITE | MrFlags::ALLOW_REMOTE_READ | MrFlags::ALLOW_REMOTE_WRITE)
                .bits();
        let mdl = memory.mdl();
        // SAFETY: a live MR; the MDL describes `len` bytes of `memory`, which
        // the returned Region keeps (or leaks) for the registration's life.
        let registering = Pending::start("NdkRegisterMr", |ctx| unsafe {
            register(mr, mdl, len, flags, Some(on_status), ctx)
        });
        let mut region = Region {
            mr,
            memory: Some(memory),
            registered: false,
        };
        registering.finish()?;
        region.registered = true;
        Ok(region)
    }

    /// `NdkClosePd`.
    pub fn close(self) -> Result<()> {
        close_object!("NdkClosePd", self.ptr, ndk_close_pd)
    }
}

/// Page-aligned memory and the host-mode MDL that describes it.
struct Memory {
    storage: Vec<u8>,
    start: usize,
    len: usize,
    mdl: Box<Mdl>,
}

impl Memory {
    fn new(len: usize) -> Result<Self> {
        let storage = vec![0_u8; len + PAGE_SIZE];
        let start = storage.as_ptr().align_offset(PAGE_SIZE);
        let start_va = storage.as_ptr().wrapping_add(start).cast_mut().cast();
        let byte_count =
            u32::try_from(len).map_err(|_| format!("a region of {len} bytes is too large"))?;
        let mdl = Box::new(Mdl::over(start_va, 0, byte_count));
        Ok(Self {
            storage,
            start,
            len,
            mdl,
        })
    }

    fn mdl(&mut self) -> *mut Mdl {
        &raw mut *self.mdl
    }

    fn bytes(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.len]
    }
}

/// Registered memory: a buffer and its MR.
///
/// The bytes are the device's while a request that names them is
/// outstanding; the tool reads and writes them only between runs, when
/// every request has completed.
pub struct Region {
    mr: *mut NdkMr,
    memory: Option<Memory>,
    registered: bool,
}

// SAFETY: the provider's objects may be used from any thread (I6); the
// buffer is plain memory.
unsafe impl Send for Region {}
// SAFETY: as above; `&Region` gives only reads of the buffer.
unsafe impl Sync for Region {}

impl Region {
    fn memory(&self) -> &Memory {
        self.memory
            .as_ref()
            .unwrap_or_else(|| unreachable!("a region keeps its memory until closed"))
    }

    /// The registered bytes.
    pub fn bytes(&self) -> &[u8] {
        self.memory().bytes()
    }

    /// The registered bytes, to fill between runs.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        self.memory
            .as_mut()
            .unwrap_or_else(|| unreachable!("a region keeps its memory until closed"))
            .bytes_mut()
    }

    /// The address of byte `offset` (an SGE's or a remote address).
    pub fn address(&self, offset: usize) -> u64 {
        self.bytes().as_ptr().addr() as u64 + offset as u64
    }

    /// `NdkGetLocalTokenFromMr`.
    pub fn local_token(&self) -> u32 {
        let get = dispatch!(self.mr).ndk_get_local_token_from_mr;
        // SAFETY: a live, registered MR.
        unsafe { get(self.mr) }
    }

    /// `NdkGetRemoteTokenFromMr`.
    pub fn remote_token(&self) -> u32 {
        let get = dispatch!(self.mr).ndk_get_remote_token_from_mr;
        // SAFETY: a live, registered MR.
        unsafe { get(self.mr) }
    }

    /// `sge` SGEs that cover `len` bytes at `offset`, split evenly (the
    /// last takes the remainder).
    pub fn sges(&self, offset: usize, len: usize, sge: usize, out: &mut Vec<NdkSge>) {
        out.clear();
        let token = self.local_token();
        let piece = len / sge;
        for i in 0..sge {
            let this = if i + 1 == sge {
                len - piece * (sge - 1)
            } else {
                piece
            };
            out.push(NdkSge {
                address: self.address(offset + piece * i),
                length: u32::try_from(this).unwrap_or(u32::MAX),
                memory_region_token: token,
            });
        }
    }

    /// `NdkDeregisterMr` and `NdkCloseMr`, then frees the memory.
    pub fn close(mut self) -> Result<()> {
        let deregister = dispatch!(self.mr).ndk_deregister_mr;
        // SAFETY: a live, registered MR.
        Pending::start("NdkDeregisterMr", |ctx| unsafe {
            deregister(self.mr, Some(on_status), ctx)
        })
        .finish()?;
        self.registered = false;
        close_object!("NdkCloseMr", self.mr, ndk_close_mr)?;
        drop(self.memory.take());
        Ok(())
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        if self.registered {
            // Still registered (an error path): the device may still touch
            // the bytes, so they are never freed.
            std::mem::forget(self.memory.take());
        }
    }
}

// ---------------------------------------------------------------------------
// QP
// ---------------------------------------------------------------------------

/// A queue pair.
pub struct Qp {
    ptr: *mut NdkQp,
}

provider_object!(Qp => NdkQpDispatch);

impl Qp {
    /// Posts request `number` on `sges` through `call`, which gets the
    /// parameters every post slot starts with: the QP, the request context,
    /// the SGE array and its length.
    fn post(
        &self,
        what: &str,
        number: usize,
        sges: &[NdkSge],
        call: impl FnOnce(*mut NdkQp, *mut c_void, *const NdkSge, u32) -> NtStatus,
    ) -> Result<()> {
        let count = u32::try_from(sges.len()).unwrap_or(u32::MAX);
        check(what, call(self.ptr, context(number), sges.as_ptr(), count))
    }

    /// `NdkSend` of `sges` with `NDK_OP_FLAG_*` `flags`.
    pub fn send(&self, number: usize, sges: &[NdkSge], flags: OpFlags) -> Result<()> {
        let send = self.d().ndk_send;
        // SAFETY: a live QP; the SGEs name registered memory the caller keeps
        // untouched until the completion.
        self.post("NdkSend", number, sges, |qp, ctx, sges, count| unsafe {
            send(qp, ctx, sges, count, flags.bits())
        })
    }

    /// `NdkReceive` into `sges`.
    pub fn receive(&self, number: usize, sges: &[NdkSge]) -> Result<()> {
        let receive = self.d().ndk_receive;
        // SAFETY: as in `send`.
        self.post("NdkReceive", number, sges, |qp, ctx, sges, count| unsafe {
            receive(qp, ctx, sges, count)
        })
    }

    /// `NdkWrite` of `sges` to `remote` under `token`.
    pub fn write(&self, number: usize, sges: &[NdkSge], remote: u64, token: u32) -> Result<()> {
        self.rdma(
            "NdkWrite",
            self.d().ndk_write,
            number,
            sges,
            (remote, token),
        )
    }

    /// `NdkRead` from `remote` under `token` into `sges`.
    pub fn read(&self, number: usize, sges: &[NdkSge], remote: u64, token: u32) -> Result<()> {
        self.rdma("NdkRead", self.d().ndk_read, number, sges, (remote, token))
    }

    /// An RDMA request (`NdkWrite` and `NdkRead` share one signature):
    /// `sges` locally, `remote` under `token` at the peer.
    fn rdma(
        &self,
        what: &'static str,
        post: NdkFnWrite,
        number: usize,
        sges: &[NdkSge],
        (remote, token): (u64, u32),
    ) -> Result<()> {
        // SAFETY: as in `send`.
        self.post(what, number, sges, |qp, ctx, sges, count| unsafe {
            post(qp, ctx, sges, count, remote, token, 0)
        })
    }

    /// `NdkCloseQp`.
    pub fn close(self) -> Result<()> {
        close_object!("NdkCloseQp", self.ptr, ndk_close_qp)
    }
}

// ---------------------------------------------------------------------------
// Connections
// ---------------------------------------------------------------------------

/// A call that may have pended: what it returned, and the signal its
/// completion goes to.
pub struct Pending {
    what: &'static str,
    returned: NtStatus,
    signal: Arc<Signal>,
}

impl Pending {
    /// Starts `what` with a new signal for its completion: `call` makes the
    /// provider call with the signal's context (kept with the signal).
    fn start(what: &'static str, call: impl FnOnce(*mut c_void) -> NtStatus) -> Self {
        let signal = Signal::new();
        let returned = call(signal.context());
        Self {
            what,
            returned,
            signal,
        }
    }

    /// Waits for the outcome (see [`Signal`]'s `outcome`).
    pub fn finish(self) -> Result<()> {
        self.signal.outcome(self.what, self.returned)
    }
}

/// A connector: a connection once connected or accepted.
pub struct Connector {
    ptr: *mut NdkConnector,
    /// Disconnect events; lives as long as the connector.
    disconnects: Arc<Signal>,
}

provider_object!(Connector => NdkConnectorDispatch);

impl Connector {
    /// `NdkCreateConnector` on `adapter`.
    pub fn new(adapter: &Adapter) -> Result<Self> {
        let create = adapter.d().ndk_create_connector;
        let mut connector = ptr::null_mut();
        // SAFETY: a live adapter and an out-pointer.
        let status = unsafe { create(adapter.ptr, None, ptr::null_mut(), &raw mut connector) };
        check("NdkCreateConnector", status)?;
        Ok(Self {
            ptr: connector,
            disconnects: Signal::new(),
        })
    }

    /// `NdkConnect` of `qp` from `adapter`'s address to `ip`:`port`, asking
    /// for `read_limit` reads each way, and waits for it to complete (the
    /// peer's reply). `NdkCompleteConnect` is left to [`Connector::complete`].
    pub fn connect(
        &self,
        adapter: &Adapter,
        qp: &Qp,
        (ip, port): ([u8; 4], u16),
        read_limit: u32,
    ) -> Result<()> {
        self.start_connect(adapter, qp, (ip, port), read_limit)
            .finish()
    }

    /// Starts [`Connector::connect`] without waiting for its completion.
    pub fn start_connect(
        &self,
        adapter: &Adapter,
        qp: &Qp,
        (ip, port): ([u8; 4], u16),
        read_limit: u32,
    ) -> Pending {
        let connect = self.d().ndk_connect;
        let dst = sockaddr(ip, port);
        let src = (&raw const adapter.address).cast::<SockAddr>();
        let dst_raw = (&raw const dst).cast::<SockAddr>();
        // SAFETY: live objects; addresses valid for the call; the signal of
        // `connected` is kept until the completion.
        Pending::start("NdkConnect", |connected| unsafe {
            connect(
                self.ptr,
                qp.ptr,
                src,
                SOCKADDR_IN_LEN,
                dst_raw,
                SOCKADDR_IN_LEN,
                read_limit,
                read_limit,
                ptr::null(),
                0,
                Some(on_status),
                connected,
            )
        })
    }

    /// `NdkCompleteConnect`: the RTR goes out, the connection is up.
    pub fn complete(&self) -> Result<()> {
        let complete = self.d().ndk_complete_connect;
        let disconnects = self.disconnects.context();
        // SAFETY: live objects; the signal of `completed` and the disconnect
        // signal are kept as long as the provider may call them.
        Pending::start("NdkCompleteConnect", |completed| unsafe {
            complete(
                self.ptr,
                Some(on_close),
                disconnects,
                Some(on_status),
                completed,
            )
        })
        .finish()
    }

    /// `NdkAccept` of an incoming connection with `qp`, offering
    /// `read_limit` reads each way; waits until it completes (the peer's
    /// RTR, or its first message).
    pub fn accept(&self, qp: &Qp, read_limit: u32) -> Result<()> {
        self.start_accept(qp, read_limit).finish()
    }

    /// Starts [`Connector::accept`] without waiting for its completion.
    pub fn start_accept(&self, qp: &Qp, read_limit: u32) -> Pending {
        let accept = self.d().ndk_accept;
        let disconnects = self.disconnects.context();
        // SAFETY: live objects; the signal of `accepted` and the disconnect
        // signal are kept as long as the provider may call them.
        Pending::start("NdkAccept", |accepted| unsafe {
            accept(
                self.ptr,
                qp.ptr,
                read_limit,
                read_limit,
                ptr::null(),
                0,
                Some(on_close),
                disconnects,
                Some(on_status),
                accepted,
            )
        })
    }

    /// `NdkGetConnectionData`: the negotiated inbound and outbound read
    /// limits.
    pub fn read_limits(&self) -> Result<(u32, u32)> {
        let get = self.d().ndk_get_connection_data;
        let mut inbound = 0;
        let mut outbound = 0;
        let mut len = 0;
        // SAFETY: a live, connected connector; out-pointers; no private
        // data buffer (length 0).
        let status = unsafe {
            get(
                self.ptr,
                &raw mut inbound,
                &raw mut outbound,
                ptr::null_mut(),
                &raw mut len,
            )
        };
        if status != STATUS_SUCCESS && status != softndk::abi::STATUS_BUFFER_TOO_SMALL {
            check("NdkGetConnectionData", status)?;
        }
        Ok((inbound, outbound))
    }

    /// Whether the peer disconnected (the disconnect event came).
    pub fn peer_disconnected(&self) -> bool {
        self.disconnects.delivered()
    }

    /// `NdkDisconnect`; a connection the peer already ended is fine.
    pub fn disconnect(&self) -> Result<()> {
        let started = self.start_disconnect();
        if started.returned == STATUS_PENDING {
            let done = started.signal.wait("NdkDisconnect")?;
            if !self.peer_disconnected() {
                check("NdkDisconnect", done)?;
            }
        }
        Ok(())
    }

    /// Starts `NdkDisconnect` without waiting for its completion.
    pub fn start_disconnect(&self) -> Pending {
        let disconnect = self.d().ndk_disconnect;
        // SAFETY: a live connector; the signal of `ctx` is kept until the
        // completion.
        Pending::start("NdkDisconnect", |ctx| unsafe {
            disconnect(self.ptr, Some(on_status), ctx)
        })
    }

    /// `NdkCloseConnector`.
    pub fn close(self) -> Result<()> {
        close_object!("NdkCloseConnector", self.ptr, ndk_close_connector)
    }
}

/// A listener.
pub struct Listener {
    ptr: *mut NdkListener,
    incoming: Arc<Incoming>,
}

provider_object!(Listener => NdkListenerDispatch);

impl Listener {
    /// `NdkCreateListener` on `adapter` and `NdkListen` on its address and
    /// `port` (0: any); returns the listener and the port it listens on.
    pub fn listen(adapter: &Adapter, port: u16) -> Result<(Self, u16)> {
        let incoming = Arc::new(Incoming::default());
        let ctx = Arc::as_ptr(&incoming).cast_mut().cast();
        let create = adapter.d().ndk_create_listener;
        let mut listener = ptr::null_mut();
        // SAFETY: a live adapter; `incoming` lives as long as the listener.
        let status = unsafe {
            create(
                adapter.ptr,
                Some(on_connect),
                ctx,
                None,
                ptr::null_mut(),
                &raw mut listener,
            )
        };
        check("NdkCreateListener", status)?;
        let this = Self {
            ptr: listener,
            incoming,
        };
        let mut address = adapter.address;
        address.sin_port = port.to_be();
        let listen = this.d().ndk_listen;
        let raw = (&raw const address).cast::<SockAddr>();
        // SAFETY: a live listener and an address valid for the call.
        Pending::start("NdkListen", |ctx| unsafe {
            listen(this.ptr, raw, SOCKADDR_IN_LEN, Some(on_status), ctx)
        })
        .finish()?;
        let get = this.d().ndk_get_local_address;
        let mut bound = SockAddrIn::default();
        let mut len = SOCKADDR_IN_LEN;
        let out = (&raw mut bound).cast::<SockAddr>();
        // SAFETY: a live listener and a SOCKADDR_IN-sized buffer.
        let status = unsafe { get(this.ptr, out, &raw mut len) };
        check("NdkGetListenerLocalAddress", status)?;
        Ok((this, u16::from_be(bound.sin_port)))
    }

    /// Waits up to `limit` for the first incoming connector.
    pub fn incoming(&self, limit: Duration) -> Result<Connector> {
        let guard = self
            .incoming
            .connectors
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (mut guard, timeout) = self
            .incoming
            .cv
            .wait_timeout_while(guard, limit, |c| c.is_empty())
            .unwrap_or_else(PoisonError::into_inner);
        if timeout.timed_out() || guard.is_empty() {
            return Err(format!("no connect event within {limit:?}"));
        }
        let first = guard.remove(0);
        Ok(Connector {
            ptr: ptr::with_exposed_provenance_mut(first),
            disconnects: Signal::new(),
        })
    }

    /// `NdkCloseListener`.
    pub fn close(self) -> Result<()> {
        close_object!("NdkCloseListener", self.ptr, ndk_close_listener)
    }
}

/// Two adapters, each with a CQ, a PD and a QP, the QPs connected.
pub struct Link {
    /// The active side (127.0.0.1): it connects, and initiates the
    /// measured requests.
    pub a: Side,
    /// The passive side (127.0.0.2): it listens and accepts.
    pub b: Side,
    a_connector: Connector,
    b_connector: Connector,
    listener: Listener,
}

/// One side of a [`Link`].
pub struct Side {
    /// The adapter.
    pub adapter: Adapter,
    /// The CQ of both the QP's queues.
    pub cq: Cq,
    /// The PD of the QP and of the side's regions.
    pub pd: Pd,
    /// The QP.
    pub qp: Qp,
}

impl Side {
    fn open(ip: [u8; 4], tag: usize, shape: QpShape) -> Result<Self> {
        let adapter = Adapter::open(ip)?;
        let depth = (shape.receive_depth + shape.initiator_depth) * 2;
        let cq = adapter.cq(depth)?;
        let pd = adapter.pd()?;
        let qp = pd.qp(&cq, tag, shape)?;
        Ok(Self {
            adapter,
            cq,
            pd,
            qp,
        })
    }

    fn close(self) -> Result<()> {
        self.qp.close()?;
        self.cq.close()?;
        self.pd.close()?;
        self.adapter.close()
    }
}

/// Read limits asked for at connect and accept.
const READ_LIMIT: u32 = 16;

impl Link {
    /// Opens adapters on `a_ip` and `b_ip`, and connects a QP of each.
    pub fn open(a_ip: [u8; 4], b_ip: [u8; 4], shape: QpShape) -> Result<Self> {
        let a = Side::open(a_ip, 0xA, shape)?;
        let b = Side::open(b_ip, 0xB, shape)?;
        let (listener, port) = Listener::listen(&b.adapter, 0)?;
        let a_connector = Connector::new(&a.adapter)?;
        // One thread runs both sides: the connect completes only once the
        // accept is under way, so neither is waited for before both started.
        let connected = a_connector.start_connect(&a.adapter, &a.qp, (b_ip, port), READ_LIMIT);
        let b_connector = listener.incoming(WAIT)?;
        let accepted = b_connector.start_accept(&b.qp, READ_LIMIT);
        connected.finish()?;
        a_connector.complete()?;
        accepted.finish()?;
        Ok(Self {
            a,
            b,
            a_connector,
            b_connector,
            listener,
        })
    }

    /// Disconnects and closes everything; every queue must be empty.
    pub fn close(self) -> Result<()> {
        let a_disconnect = self.a_connector.start_disconnect();
        let b_disconnect = self.b_connector.start_disconnect();
        a_disconnect.finish()?;
        // The passive side's disconnect may find the connection already
        // ended by the active side's: any outcome is fine.
        if b_disconnect.returned == STATUS_PENDING {
            b_disconnect.signal.wait("NdkDisconnect")?;
        }
        self.a_connector.close()?;
        self.b_connector.close()?;
        self.listener.close()?;
        self.a.close()?;
        self.b.close()
    }
}
