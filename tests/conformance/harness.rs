//! A consumer of the NDK C ABI, as a kernel consumer would write one: every
//! provider call goes through a function pointer read from a dispatch table;
//! callbacks are `extern "system"` functions with context pointers.
//!
//! The wrappers are thin and honest: they return the provider's NTSTATUS and
//! leave the judging to the tests. Panics here are test failures.

#![allow(
    dead_code,
    reason = "each test binary module uses a different part of the harness"
)]
#![allow(clippy::missing_panics_doc, reason = "test harness")]

use std::ffi::c_void;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use softndk::abi::*;
use softndk::provider::host::{SoftNdkCloseAdapter, SoftNdkOpenAdapter};

/// How long a test waits for an asynchronous completion before failing.
pub const WAIT: Duration = Duration::from_secs(10);

pub const PAGE: usize = 4096;

// ---------------------------------------------------------------------------
// Callbacks
// ---------------------------------------------------------------------------

/// Collects the statuses of request completions (or of any status callback).
#[derive(Default)]
pub struct Signal {
    statuses: Mutex<Vec<NtStatus>>,
    cv: Condvar,
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
        self.statuses.lock().unwrap().push(status);
        self.cv.notify_all();
    }

    /// Runs `hook` inside the next callback recorded here, on the thread
    /// that calls back, before the callback returns.
    pub fn on_next(&self, hook: impl FnOnce() + Send + 'static) {
        *self.hook.lock().unwrap() = Some(Box::new(hook));
    }

    /// Statuses so far.
    pub fn all(&self) -> Vec<NtStatus> {
        self.statuses.lock().unwrap().clone()
    }

    pub fn count(&self) -> usize {
        self.statuses.lock().unwrap().len()
    }

    /// Waits for the `n`th (1-based) callback and returns its status.
    pub fn wait_nth(&self, n: usize) -> NtStatus {
        let guard = self.statuses.lock().unwrap();
        let (guard, timeout) = self
            .cv
            .wait_timeout_while(guard, WAIT, |s| s.len() < n)
            .unwrap();
        assert!(
            !timeout.timed_out(),
            "callback #{n} did not arrive within {WAIT:?}"
        );
        guard[n - 1]
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
    connectors: Mutex<Vec<usize>>,
    cv: Condvar,
}

impl Incoming {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }
    pub fn ctx(self: &Arc<Self>) -> *mut c_void {
        Arc::as_ptr(self).cast_mut().cast()
    }
    pub fn count(&self) -> usize {
        self.connectors.lock().unwrap().len()
    }
    /// Waits for the `n`th (1-based) incoming connector.
    pub fn wait_nth(&self, n: usize) -> Connector {
        let guard = self.connectors.lock().unwrap();
        let (guard, timeout) = self
            .cv
            .wait_timeout_while(guard, WAIT, |c| c.len() < n)
            .unwrap();
        assert!(!timeout.timed_out(), "connect event #{n} did not arrive");
        Connector(guard[n - 1] as *mut NdkConnector)
    }
}

/// `NDK_FN_CONNECT_EVENT_CALLBACK` for an [`Incoming`].
pub unsafe extern "system" fn on_connect(ctx: *mut c_void, connector: *mut NdkConnector) {
    // SAFETY: tests pass `Incoming::ctx` of an Incoming they keep alive.
    let incoming = unsafe { &*ctx.cast::<Incoming>() };
    incoming.connectors.lock().unwrap().push(connector as usize);
    incoming.cv.notify_all();
}

// ---------------------------------------------------------------------------
// Addresses
// ---------------------------------------------------------------------------

/// A SOCKADDR_IN6-sized buffer holding an IPv4 or IPv6 address.
#[derive(Clone, Copy)]
#[repr(C)]
pub struct Addr {
    bytes: [u8; 28],
}

impl Addr {
    pub fn v4(ip: [u8; 4], port: u16) -> Self {
        let mut bytes = [0_u8; 28];
        bytes[..2].copy_from_slice(&AF_INET.to_ne_bytes());
        bytes[2..4].copy_from_slice(&port.to_be_bytes());
        bytes[4..8].copy_from_slice(&ip);
        Self { bytes }
    }

    pub fn v6(ip: [u8; 16], port: u16) -> Self {
        let mut bytes = [0_u8; 28];
        bytes[..2].copy_from_slice(&AF_INET6.to_ne_bytes());
        bytes[2..4].copy_from_slice(&port.to_be_bytes());
        bytes[8..24].copy_from_slice(&ip);
        Self { bytes }
    }

    /// `::1`.
    pub fn v6_loopback(port: u16) -> Self {
        let mut ip = [0_u8; 16];
        ip[15] = 1;
        Self::v6(ip, port)
    }

    pub fn family(&self) -> u16 {
        u16::from_ne_bytes([self.bytes[0], self.bytes[1]])
    }

    pub fn port(&self) -> u16 {
        u16::from_be_bytes([self.bytes[2], self.bytes[3]])
    }

    pub fn with_port(mut self, port: u16) -> Self {
        self.bytes[2..4].copy_from_slice(&port.to_be_bytes());
        self
    }

    /// Bytes a provider call should be told this address has.
    pub fn len(&self) -> u32 {
        if self.family() == AF_INET { 16 } else { 28 }
    }

    pub fn ip_bytes(&self) -> &[u8] {
        if self.family() == AF_INET {
            &self.bytes[4..8]
        } else {
            &self.bytes[8..24]
        }
    }

    pub fn as_ptr(&self) -> *const SockAddr {
        self.bytes.as_ptr().cast()
    }

    pub fn as_mut_ptr(&mut self) -> *mut SockAddr {
        self.bytes.as_mut_ptr().cast()
    }

    pub fn empty() -> Self {
        Self { bytes: [0; 28] }
    }
}

impl std::fmt::Debug for Addr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Addr(family {}, {:?}, port {})",
            self.family(),
            self.ip_bytes(),
            self.port()
        )
    }
}

impl PartialEq for Addr {
    fn eq(&self, other: &Self) -> bool {
        self.family() == other.family()
            && self.ip_bytes() == other.ip_bytes()
            && self.port() == other.port()
    }
}

// ---------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------

/// Page-aligned memory with a host-mode MDL describing `len` bytes at
/// `offset` into its first page.
pub struct Buffer {
    storage: Vec<u8>,
    start: usize,
    pub len: usize,
    mdl: Box<Mdl>,
}

impl Buffer {
    /// `len` bytes starting `offset` bytes into a page, filled with `fill`.
    pub fn new(len: usize, offset: usize, fill: u8) -> Self {
        let pages = (offset + len).div_ceil(PAGE) + 1;
        let storage = vec![fill; pages * PAGE];
        let base = storage.as_ptr() as usize;
        let aligned = (PAGE - base % PAGE) % PAGE;
        let start = aligned + offset;
        let page_va = base + aligned;
        let mdl = Box::new(Mdl {
            next: std::ptr::null_mut(),
            size: 0x30,
            mdl_flags: 0,
            padding_0c: 0,
            process: std::ptr::null_mut(),
            mapped_system_va: std::ptr::null_mut(),
            start_va: page_va as *mut c_void,
            byte_count: u32::try_from(len).unwrap(),
            byte_offset: u32::try_from(offset).unwrap(),
        });
        Self {
            storage,
            start,
            len,
            mdl,
        }
    }

    /// Fills with a pattern distinct per offset and seed.
    pub fn pattern(len: usize, offset: usize, seed: u8) -> Self {
        let mut buffer = Self::new(len, offset, 0);
        for (i, byte) in buffer.bytes_mut().iter_mut().enumerate() {
            let [low, high, ..] = i.to_le_bytes();
            *byte = low.wrapping_mul(31).wrapping_add(seed).wrapping_add(high);
        }
        buffer
    }

    pub fn bytes(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.len]
    }

    /// The virtual address of the first byte (the region's index base).
    pub fn va(&self) -> u64 {
        self.storage.as_ptr() as u64 + self.start as u64
    }

    pub fn mdl(&mut self) -> *mut Mdl {
        &raw mut *self.mdl
    }

    /// An SGE over `len` bytes at `offset` with `token`.
    pub fn sge(&self, offset: usize, len: u32, token: u32) -> NdkSge {
        NdkSge {
            address: self.va() + offset as u64,
            length: len,
            memory_region_token: token,
        }
    }
}

// ---------------------------------------------------------------------------
// Objects
// ---------------------------------------------------------------------------

macro_rules! table {
    ($ptr:expr) => {
        // SAFETY: the provider filled `dispatch` when it created the object;
        // the tables are static.
        unsafe { &*(*$ptr).dispatch }
    };
}

/// Closes any object through its table's close slot (slot 0).
fn close_object(
    header: *mut NdkObjectHeader,
    close: NdkFnCloseObject,
    signal: &Arc<Signal>,
) -> NtStatus {
    // SAFETY: a live object and its own close slot.
    unsafe { close(header, Some(on_close), signal.ctx()) }
}

/// An open adapter.
pub struct Adapter(pub *mut NdkAdapter);

// SAFETY: the provider's objects may be used from any thread (I6).
unsafe impl Send for Adapter {}
// SAFETY: as above.
unsafe impl Sync for Adapter {}

impl Adapter {
    /// Opens the host adapter for `addr` (any port).
    pub fn open(addr: Addr) -> Self {
        let mut adapter = std::ptr::null_mut();
        // SAFETY: a valid SOCKADDR and out-pointer.
        let status = unsafe { SoftNdkOpenAdapter(addr.as_ptr(), &raw mut adapter) };
        assert_eq!(status, STATUS_SUCCESS, "SoftNdkOpenAdapter({addr:?})");
        assert!(!adapter.is_null());
        Self(adapter)
    }

    pub fn v4(last: u8) -> Self {
        Self::open(Addr::v4([127, 0, 0, last], 0))
    }

    pub fn d(&self) -> &NdkAdapterDispatch {
        table!(self.0)
    }

    pub fn header(&self) -> NdkObjectHeader {
        // SAFETY: a live adapter.
        unsafe { (*self.0).header }
    }

    pub fn info(&self) -> NdkAdapterInfo {
        let mut info = std::mem::MaybeUninit::<NdkAdapterInfo>::zeroed();
        let mut size = u32::try_from(size_of::<NdkAdapterInfo>()).unwrap();
        // SAFETY: a buffer of `size` bytes.
        let status =
            unsafe { (self.d().ndk_query_adapter_info)(self.0, info.as_mut_ptr(), &raw mut size) };
        assert_eq!(status, STATUS_SUCCESS);
        // SAFETY: filled by the successful call.
        unsafe { info.assume_init() }
    }

    pub fn try_cq(&self, depth: u32, watch: &Arc<Signal>) -> Result<Cq, NtStatus> {
        let mut cq = std::ptr::null_mut();
        // SAFETY: valid arguments; the watch outlives the CQ (tests keep it).
        let status = unsafe {
            (self.d().ndk_create_cq)(
                self.0,
                depth,
                Some(on_status),
                watch.ctx(),
                std::ptr::null(),
                None,
                std::ptr::null_mut(),
                &raw mut cq,
            )
        };
        if status == STATUS_SUCCESS {
            Ok(Cq(cq, Arc::clone(watch)))
        } else {
            Err(status)
        }
    }

    pub fn cq(&self, depth: u32) -> Cq {
        self.try_cq(depth, &Signal::new()).expect("CreateCq")
    }

    pub fn pd(&self) -> Pd {
        let mut pd = std::ptr::null_mut();
        // SAFETY: valid arguments.
        let status =
            unsafe { (self.d().ndk_create_pd)(self.0, None, std::ptr::null_mut(), &raw mut pd) };
        assert_eq!(status, STATUS_SUCCESS, "CreatePd");
        Pd(pd)
    }

    pub fn connector(&self) -> Connector {
        let mut c = std::ptr::null_mut();
        // SAFETY: valid arguments.
        let status = unsafe {
            (self.d().ndk_create_connector)(self.0, None, std::ptr::null_mut(), &raw mut c)
        };
        assert_eq!(status, STATUS_SUCCESS, "CreateConnector");
        Connector(c)
    }

    pub fn listener(&self, incoming: &Arc<Incoming>) -> Listener {
        let mut l = std::ptr::null_mut();
        // SAFETY: valid arguments; `incoming` outlives the listener.
        let status = unsafe {
            (self.d().ndk_create_listener)(
                self.0,
                Some(on_connect),
                incoming.ctx(),
                None,
                std::ptr::null_mut(),
                &raw mut l,
            )
        };
        assert_eq!(status, STATUS_SUCCESS, "CreateListener");
        Listener(l)
    }

    pub fn try_shared_endpoint(&self, addr: Addr) -> Result<SharedEndpoint, NtStatus> {
        let mut e = std::ptr::null_mut();
        // SAFETY: valid arguments.
        let status = unsafe {
            (self.d().ndk_create_shared_endpoint)(
                self.0,
                addr.as_ptr(),
                addr.len(),
                None,
                std::ptr::null_mut(),
                &raw mut e,
            )
        };
        if status == STATUS_SUCCESS {
            Ok(SharedEndpoint(e))
        } else {
            Err(status)
        }
    }

    /// BuildLam over `buffer`; returns (status, LAM bytes, FBO).
    pub fn build_lam(&self, buffer: &mut Buffer) -> (NtStatus, Vec<u64>, u32) {
        let mut size = 0_u32;
        let mut fbo = 0_u32;
        // SAFETY: size query with no buffer.
        let status = unsafe {
            (self.d().ndk_build_lam)(
                self.0,
                buffer.mdl(),
                buffer.len,
                None,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &raw mut size,
                &raw mut fbo,
            )
        };
        assert_eq!(status, STATUS_BUFFER_TOO_SMALL, "size query");
        let mut storage = vec![0_u64; (size as usize).div_ceil(8)];
        // SAFETY: a buffer of `size` bytes.
        let status = unsafe {
            (self.d().ndk_build_lam)(
                self.0,
                buffer.mdl(),
                buffer.len,
                None,
                std::ptr::null_mut(),
                storage.as_mut_ptr().cast(),
                &raw mut size,
                &raw mut fbo,
            )
        };
        (status, storage, fbo)
    }

    /// ReleaseLam of a LAM built by [`build_lam`](Self::build_lam).
    pub fn release_lam(&self, lam: &mut [u64]) {
        // SAFETY: a LAM this adapter built.
        unsafe { (self.d().ndk_release_lam)(self.0, lam.as_mut_ptr().cast()) };
    }

    /// Closes the adapter (blocks until everything under it is closed).
    pub fn close(self) {
        // SAFETY: a live adapter, not used afterwards.
        let status = unsafe { SoftNdkCloseAdapter(self.0) };
        assert_eq!(status, STATUS_SUCCESS);
    }
}

/// The page list of a LAM built by [`Adapter::build_lam`].
pub fn lam_pages(lam: &[u64]) -> Vec<u64> {
    let count = (lam[1] & 0xFFFF_FFFF) as usize;
    lam[2..2 + count].to_vec()
}

pub struct Cq(pub *mut NdkCq, pub Arc<Signal>);

// SAFETY: see `Adapter`.
unsafe impl Send for Cq {}
// SAFETY: see `Adapter`.
unsafe impl Sync for Cq {}

impl Cq {
    pub fn d(&self) -> &NdkCqDispatch {
        table!(self.0)
    }

    /// Notifications received so far.
    pub fn notifications(&self) -> Vec<NtStatus> {
        self.1.all()
    }

    pub fn arm(&self, kind: NdkCqNotifyType) {
        // SAFETY: a live CQ.
        unsafe { (self.d().ndk_arm_cq)(self.0, kind) };
    }

    pub fn poll(&self, max: usize) -> Vec<NdkResult> {
        let mut out = vec![
            NdkResult {
                status: 0,
                bytes_transferred: 0,
                qp_context: std::ptr::null_mut(),
                request_context: std::ptr::null_mut()
            };
            max
        ];
        // SAFETY: room for `max` results.
        let n = unsafe {
            (self.d().ndk_get_cq_results)(self.0, out.as_mut_ptr(), u32::try_from(max).unwrap())
        };
        out.truncate(n as usize);
        out
    }

    pub fn poll_ex(&self, max: usize) -> Vec<NdkResultEx> {
        // SAFETY: NdkResultEx is plain data; zeroed is a valid value.
        let mut out = vec![unsafe { std::mem::zeroed::<NdkResultEx>() }; max];
        // SAFETY: room for `max` results.
        let n = unsafe {
            (self.d().ndk_get_cq_results_ex)(self.0, out.as_mut_ptr(), u32::try_from(max).unwrap())
        };
        out.truncate(n as usize);
        out
    }

    /// Polls until `n` results arrived (the engine may run on a worker).
    pub fn wait_results(&self, n: usize) -> Vec<NdkResult> {
        let deadline = std::time::Instant::now() + WAIT;
        let mut got = Vec::new();
        while got.len() < n {
            got.extend(self.poll(n - got.len()));
            assert!(
                std::time::Instant::now() < deadline,
                "only {} of {n} completions arrived: {got:?}",
                got.len()
            );
            if got.len() < n {
                std::thread::yield_now();
            }
        }
        got
    }

    pub fn resize(&self, depth: u32) -> NtStatus {
        let signal = Signal::new();
        // SAFETY: a live CQ.
        let status =
            unsafe { (self.d().ndk_resize_cq)(self.0, depth, Some(on_status), signal.ctx()) };
        signal.outcome(status)
    }

    /// Closes and waits for the close to complete; returns the close's return value.
    pub fn close(self) -> NtStatus {
        let signal = Signal::new();
        let status = close_object(self.0.cast(), self.d().ndk_close_cq, &signal);
        if status == STATUS_PENDING {
            signal.wait();
        }
        status
    }
}

pub struct Pd(pub *mut NdkPd);

impl Pd {
    pub fn d(&self) -> &NdkPdDispatch {
        table!(self.0)
    }

    pub fn privileged_token(&self) -> u32 {
        let mut token = 0;
        // SAFETY: a live PD and an out ULONG.
        unsafe { (self.d().ndk_get_privileged_memory_region_token)(self.0, &raw mut token) };
        token
    }

    pub fn try_mr(&self, fast: bool) -> Result<Mr, NtStatus> {
        let mut mr = std::ptr::null_mut();
        // SAFETY: valid arguments.
        let status = unsafe {
            (self.d().ndk_create_mr)(
                self.0,
                u8::from(fast),
                None,
                std::ptr::null_mut(),
                &raw mut mr,
            )
        };
        if status == STATUS_SUCCESS {
            Ok(Mr(mr))
        } else {
            Err(status)
        }
    }

    pub fn mr(&self, fast: bool) -> Mr {
        self.try_mr(fast).expect("CreateMr")
    }

    pub fn mw(&self) -> Mw {
        let mut mw = std::ptr::null_mut();
        // SAFETY: valid arguments.
        let status =
            unsafe { (self.d().ndk_create_mw)(self.0, None, std::ptr::null_mut(), &raw mut mw) };
        assert_eq!(status, STATUS_SUCCESS, "CreateMw");
        Mw(mw)
    }

    /// CreateQp with explicit limits.
    #[allow(clippy::too_many_arguments, reason = "mirrors NdkCreateQp")]
    pub fn try_qp(
        &self,
        rcq: &Cq,
        icq: &Cq,
        context: usize,
        rdepth: u32,
        idepth: u32,
        rsge: u32,
        isge: u32,
        inline: u32,
    ) -> Result<Qp, NtStatus> {
        let mut qp = std::ptr::null_mut();
        // SAFETY: valid arguments.
        let status = unsafe {
            (self.d().ndk_create_qp)(
                self.0,
                rcq.0,
                icq.0,
                context as *mut c_void,
                rdepth,
                idepth,
                rsge,
                isge,
                inline,
                None,
                std::ptr::null_mut(),
                &raw mut qp,
            )
        };
        if status == STATUS_SUCCESS {
            Ok(Qp(qp))
        } else {
            Err(status)
        }
    }

    /// A QP with depth 64, 4 SGEs each way and 256 inline bytes.
    pub fn qp(&self, rcq: &Cq, icq: &Cq, context: usize) -> Qp {
        self.try_qp(rcq, icq, context, 64, 64, 4, 4, 256)
            .expect("CreateQp")
    }

    #[allow(clippy::too_many_arguments, reason = "mirrors NdkCreateQpWithSrq")]
    pub fn try_qp_with_srq(
        &self,
        rcq: &Cq,
        icq: &Cq,
        srq: &Srq,
        context: usize,
        idepth: u32,
        isge: u32,
        inline: u32,
    ) -> Result<Qp, NtStatus> {
        let mut qp = std::ptr::null_mut();
        // SAFETY: valid arguments.
        let status = unsafe {
            (self.d().ndk_create_qp_with_srq)(
                self.0,
                rcq.0,
                icq.0,
                srq.0,
                context as *mut c_void,
                idepth,
                isge,
                inline,
                None,
                std::ptr::null_mut(),
                &raw mut qp,
            )
        };
        if status == STATUS_SUCCESS {
            Ok(Qp(qp))
        } else {
            Err(status)
        }
    }

    pub fn try_srq(
        &self,
        depth: u32,
        sge: u32,
        threshold: u32,
        watch: Option<&Arc<Signal>>,
    ) -> Result<Srq, NtStatus> {
        let mut srq = std::ptr::null_mut();
        let (callback, ctx) = match watch {
            Some(w) => (Some(on_status as NdkFnSrqNotificationCallback), w.ctx()),
            None => (None, std::ptr::null_mut()),
        };
        // SAFETY: valid arguments; the watch outlives the SRQ.
        let status = unsafe {
            (self.d().ndk_create_srq)(
                self.0,
                depth,
                sge,
                threshold,
                callback,
                ctx,
                std::ptr::null(),
                None,
                std::ptr::null_mut(),
                &raw mut srq,
            )
        };
        if status == STATUS_SUCCESS {
            Ok(Srq(srq))
        } else {
            Err(status)
        }
    }

    pub fn close(self) -> NtStatus {
        let signal = Signal::new();
        let status = close_object(self.0.cast(), self.d().ndk_close_pd, &signal);
        if status == STATUS_PENDING {
            signal.wait();
        }
        status
    }

    /// Starts the close and returns at once with the close's signal.
    pub fn close_async(self) -> (NtStatus, Arc<Signal>) {
        let signal = Signal::new();
        let status = close_object(self.0.cast(), self.d().ndk_close_pd, &signal);
        (status, signal)
    }
}

pub struct Mr(pub *mut NdkMr);

impl Mr {
    pub fn d(&self) -> &NdkMrDispatch {
        table!(self.0)
    }

    /// RegisterMr over the whole buffer.
    pub fn register(&self, buffer: &mut Buffer, flags: u32) -> NtStatus {
        let signal = Signal::new();
        // SAFETY: the buffer's MDL describes `len` locked (owned) bytes that
        // outlive the registration (the test keeps the buffer).
        let status = unsafe {
            (self.d().ndk_register_mr)(
                self.0,
                buffer.mdl(),
                buffer.len,
                flags,
                Some(on_status),
                signal.ctx(),
            )
        };
        signal.outcome(status)
    }

    pub fn deregister(&self) -> NtStatus {
        let signal = Signal::new();
        // SAFETY: a live MR.
        let status = unsafe { (self.d().ndk_deregister_mr)(self.0, Some(on_status), signal.ctx()) };
        signal.outcome(status)
    }

    pub fn init_fast(&self, pages: u32, remote: bool) -> NtStatus {
        let signal = Signal::new();
        // SAFETY: a live MR.
        let status = unsafe {
            (self.d().ndk_initialize_fast_register_mr)(
                self.0,
                pages,
                u8::from(remote),
                Some(on_status),
                signal.ctx(),
            )
        };
        signal.outcome(status)
    }

    pub fn local_token(&self) -> u32 {
        // SAFETY: a live MR.
        unsafe { (self.d().ndk_get_local_token_from_mr)(self.0) }
    }

    pub fn remote_token(&self) -> u32 {
        // SAFETY: a live MR.
        unsafe { (self.d().ndk_get_remote_token_from_mr)(self.0) }
    }

    pub fn header(&self) -> *mut NdkObjectHeader {
        self.0.cast()
    }

    pub fn close(self) -> NtStatus {
        let signal = Signal::new();
        let status = close_object(self.0.cast(), self.d().ndk_close_mr, &signal);
        if status == STATUS_PENDING {
            signal.wait();
        }
        status
    }
}

pub struct Mw(pub *mut NdkMw);

impl Mw {
    pub fn d(&self) -> &NdkMwDispatch {
        table!(self.0)
    }

    pub fn remote_token(&self) -> u32 {
        // SAFETY: a live MW.
        unsafe { (self.d().ndk_get_remote_token_from_mw)(self.0) }
    }

    pub fn header(&self) -> *mut NdkObjectHeader {
        self.0.cast()
    }

    pub fn close(self) -> NtStatus {
        let signal = Signal::new();
        let status = close_object(self.0.cast(), self.d().ndk_close_mw, &signal);
        if status == STATUS_PENDING {
            signal.wait();
        }
        status
    }
}

pub struct Srq(pub *mut NdkSrq);

impl Srq {
    pub fn d(&self) -> &NdkSrqDispatch {
        table!(self.0)
    }

    pub fn receive(&self, context: usize, sges: &[NdkSge]) -> NtStatus {
        // SAFETY: a live SRQ and an SGE array.
        unsafe {
            (self.d().ndk_srq_receive)(
                self.0,
                context as *mut c_void,
                sges.as_ptr(),
                u32::try_from(sges.len()).unwrap(),
            )
        }
    }

    pub fn modify(&self, depth: u32, threshold: u32) -> NtStatus {
        let signal = Signal::new();
        // SAFETY: a live SRQ.
        let status = unsafe {
            (self.d().ndk_modify_srq)(self.0, depth, threshold, Some(on_status), signal.ctx())
        };
        signal.outcome(status)
    }

    pub fn close(self) -> NtStatus {
        let signal = Signal::new();
        let status = close_object(self.0.cast(), self.d().ndk_close_srq, &signal);
        if status == STATUS_PENDING {
            signal.wait();
        }
        status
    }
}

pub struct Qp(pub *mut NdkQp);

// SAFETY: see `Adapter`.
unsafe impl Send for Qp {}
// SAFETY: see `Adapter`.
unsafe impl Sync for Qp {}

impl Qp {
    pub fn d(&self) -> &NdkQpDispatch {
        table!(self.0)
    }

    pub fn send(&self, context: usize, sges: &[NdkSge], flags: u32) -> NtStatus {
        // SAFETY: a live QP and an SGE array valid for the call.
        unsafe {
            (self.d().ndk_send)(
                self.0,
                context as *mut c_void,
                sges.as_ptr(),
                u32::try_from(sges.len()).unwrap(),
                flags,
            )
        }
    }

    pub fn send_and_invalidate(
        &self,
        context: usize,
        sges: &[NdkSge],
        flags: u32,
        token: u32,
    ) -> NtStatus {
        // SAFETY: as above.
        unsafe {
            (self.d().ndk_send_and_invalidate)(
                self.0,
                context as *mut c_void,
                sges.as_ptr(),
                u32::try_from(sges.len()).unwrap(),
                flags,
                token,
            )
        }
    }

    pub fn receive(&self, context: usize, sges: &[NdkSge]) -> NtStatus {
        // SAFETY: as above.
        unsafe {
            (self.d().ndk_receive)(
                self.0,
                context as *mut c_void,
                sges.as_ptr(),
                u32::try_from(sges.len()).unwrap(),
            )
        }
    }

    pub fn write(
        &self,
        context: usize,
        sges: &[NdkSge],
        remote: u64,
        token: u32,
        flags: u32,
    ) -> NtStatus {
        // SAFETY: as above.
        unsafe {
            (self.d().ndk_write)(
                self.0,
                context as *mut c_void,
                sges.as_ptr(),
                u32::try_from(sges.len()).unwrap(),
                remote,
                token,
                flags,
            )
        }
    }

    pub fn read(
        &self,
        context: usize,
        sges: &[NdkSge],
        remote: u64,
        token: u32,
        flags: u32,
    ) -> NtStatus {
        // SAFETY: as above.
        unsafe {
            (self.d().ndk_read)(
                self.0,
                context as *mut c_void,
                sges.as_ptr(),
                u32::try_from(sges.len()).unwrap(),
                remote,
                token,
                flags,
            )
        }
    }

    pub fn bind(
        &self,
        context: usize,
        mr: &Mr,
        mw: &Mw,
        va: u64,
        len: usize,
        flags: u32,
    ) -> NtStatus {
        // SAFETY: live objects.
        unsafe {
            (self.d().ndk_bind)(
                self.0,
                context as *mut c_void,
                mr.0,
                mw.0,
                va as *mut c_void,
                len,
                flags,
            )
        }
    }

    #[allow(clippy::too_many_arguments, reason = "mirrors NdkFastRegister")]
    pub fn fast_register(
        &self,
        context: usize,
        mr: &Mr,
        pages: &[u64],
        fbo: u32,
        len: usize,
        base: u64,
        flags: u32,
    ) -> NtStatus {
        // SAFETY: live objects and a page array valid for the call.
        unsafe {
            (self.d().ndk_fast_register)(
                self.0,
                context as *mut c_void,
                mr.0,
                u32::try_from(pages.len()).unwrap(),
                pages.as_ptr().cast(),
                fbo,
                len,
                base as *mut c_void,
                flags,
            )
        }
    }

    pub fn invalidate(&self, context: usize, target: *mut NdkObjectHeader, flags: u32) -> NtStatus {
        // SAFETY: a live QP and target.
        unsafe { (self.d().ndk_invalidate)(self.0, context as *mut c_void, target, flags) }
    }

    pub fn flush(&self) {
        // SAFETY: a live QP.
        unsafe { (self.d().ndk_flush)(self.0) };
    }

    pub fn close(self) -> NtStatus {
        let signal = Signal::new();
        let status = close_object(self.0.cast(), self.d().ndk_close_qp, &signal);
        if status == STATUS_PENDING {
            signal.wait();
        }
        status
    }
}

pub struct Connector(pub *mut NdkConnector);

// SAFETY: see `Adapter`.
unsafe impl Send for Connector {}
// SAFETY: see `Adapter`.
unsafe impl Sync for Connector {}

impl Connector {
    pub fn d(&self) -> &NdkConnectorDispatch {
        table!(self.0)
    }

    /// Connect; returns the call's return value and the completion signal.
    pub fn connect(
        &self,
        qp: &Qp,
        src: Addr,
        dst: Addr,
        ird: u32,
        ord: u32,
        data: &[u8],
    ) -> (NtStatus, Arc<Signal>) {
        let signal = Signal::new();
        // SAFETY: live objects; addresses and data valid for the call.
        let status = unsafe {
            (self.d().ndk_connect)(
                self.0,
                qp.0,
                src.as_ptr(),
                src.len(),
                dst.as_ptr(),
                dst.len(),
                ird,
                ord,
                data.as_ptr().cast(),
                u32::try_from(data.len()).unwrap(),
                Some(on_status),
                signal.ctx(),
            )
        };
        (status, signal)
    }

    pub fn complete_connect(&self, disconnects: &Arc<Signal>) -> NtStatus {
        let signal = Signal::new();
        // SAFETY: a live connector; `disconnects` outlives it.
        let status = unsafe {
            (self.d().ndk_complete_connect)(
                self.0,
                Some(on_disconnect),
                disconnects.ctx(),
                Some(on_status),
                signal.ctx(),
            )
        };
        signal.outcome(status)
    }

    pub fn accept(
        &self,
        qp: &Qp,
        ird: u32,
        ord: u32,
        data: &[u8],
        disconnects: &Arc<Signal>,
    ) -> (NtStatus, Arc<Signal>) {
        let signal = Signal::new();
        // SAFETY: live objects; data valid for the call.
        let status = unsafe {
            (self.d().ndk_accept)(
                self.0,
                qp.0,
                ird,
                ord,
                data.as_ptr().cast(),
                u32::try_from(data.len()).unwrap(),
                Some(on_disconnect),
                disconnects.ctx(),
                Some(on_status),
                signal.ctx(),
            )
        };
        (status, signal)
    }

    pub fn reject(&self, data: &[u8]) -> NtStatus {
        // SAFETY: a live connector; data valid for the call.
        unsafe {
            (self.d().ndk_reject)(
                self.0,
                data.as_ptr().cast(),
                u32::try_from(data.len()).unwrap(),
            )
        }
    }

    /// GetConnectionData: (status, inbound, outbound, data, reported length).
    pub fn connection_data(&self, room: usize) -> (NtStatus, u32, u32, Vec<u8>, u32) {
        let (mut ird, mut ord) = (0, 0);
        let mut data = vec![0_u8; room];
        let mut len = u32::try_from(room).unwrap();
        let ptr = if room == 0 {
            std::ptr::null_mut()
        } else {
            data.as_mut_ptr().cast()
        };
        // SAFETY: valid out-pointers and a buffer of `room` bytes.
        let status = unsafe {
            (self.d().ndk_get_connection_data)(
                self.0,
                &raw mut ird,
                &raw mut ord,
                ptr,
                &raw mut len,
            )
        };
        (status, ird, ord, data, len)
    }

    pub fn local_address(&self) -> (NtStatus, Addr, u32) {
        let mut addr = Addr::empty();
        let mut len = 28_u32;
        // SAFETY: a buffer of 28 bytes.
        let status =
            unsafe { (self.d().ndk_get_local_address)(self.0, addr.as_mut_ptr(), &raw mut len) };
        (status, addr, len)
    }

    pub fn peer_address(&self) -> (NtStatus, Addr, u32) {
        let mut addr = Addr::empty();
        let mut len = 28_u32;
        // SAFETY: a buffer of 28 bytes.
        let status =
            unsafe { (self.d().ndk_get_peer_address)(self.0, addr.as_mut_ptr(), &raw mut len) };
        (status, addr, len)
    }

    pub fn disconnect(&self) -> (NtStatus, Arc<Signal>) {
        let signal = Signal::new();
        // SAFETY: a live connector.
        let status = unsafe { (self.d().ndk_disconnect)(self.0, Some(on_status), signal.ctx()) };
        (status, signal)
    }

    pub fn close(self) -> NtStatus {
        let signal = Signal::new();
        let status = close_object(self.0.cast(), self.d().ndk_close_connector, &signal);
        if status == STATUS_PENDING {
            signal.wait();
        }
        status
    }
}

pub struct Listener(pub *mut NdkListener);

impl Listener {
    pub fn d(&self) -> &NdkListenerDispatch {
        table!(self.0)
    }

    pub fn listen(&self, addr: Addr) -> NtStatus {
        let signal = Signal::new();
        // SAFETY: a live listener and an address valid for the call.
        let status = unsafe {
            (self.d().ndk_listen)(
                self.0,
                addr.as_ptr(),
                addr.len(),
                Some(on_status),
                signal.ctx(),
            )
        };
        signal.outcome(status)
    }

    pub fn local_address(&self) -> (NtStatus, Addr, u32) {
        let mut addr = Addr::empty();
        let mut len = 28_u32;
        // SAFETY: a buffer of 28 bytes.
        let status =
            unsafe { (self.d().ndk_get_local_address)(self.0, addr.as_mut_ptr(), &raw mut len) };
        (status, addr, len)
    }

    pub fn pause(&self, pause: bool) {
        // SAFETY: a live listener.
        unsafe { (self.d().ndk_control_connect_events)(self.0, u8::from(pause)) };
    }

    pub fn close_async(self) -> (NtStatus, Arc<Signal>) {
        let signal = Signal::new();
        let status = close_object(self.0.cast(), self.d().ndk_close_listener, &signal);
        (status, signal)
    }

    pub fn close(self) -> NtStatus {
        let (status, signal) = self.close_async();
        if status == STATUS_PENDING {
            signal.wait();
        }
        status
    }
}

pub struct SharedEndpoint(pub *mut NdkSharedEndpoint);

impl SharedEndpoint {
    pub fn d(&self) -> &NdkSharedEndpointDispatch {
        table!(self.0)
    }

    pub fn close(self) -> NtStatus {
        let signal = Signal::new();
        let status = close_object(self.0.cast(), self.d().ndk_close_shared_endpoint, &signal);
        if status == STATUS_PENDING {
            signal.wait();
        }
        status
    }
}

// ---------------------------------------------------------------------------
// A connected pair
// ---------------------------------------------------------------------------

/// Two adapters, each with a CQ, a PD and a QP, connected through a listener.
pub struct Pair {
    pub a: Adapter,
    pub b: Adapter,
    pub a_cq: Cq,
    pub b_cq: Cq,
    pub a_pd: Pd,
    pub b_pd: Pd,
    pub a_qp: Qp,
    pub b_qp: Qp,
    pub a_conn: Connector,
    pub b_conn: Connector,
    pub listener: Listener,
    pub incoming: Arc<Incoming>,
    pub a_disconnects: Arc<Signal>,
    pub b_disconnects: Arc<Signal>,
}

/// Next host address for a pair: every pair gets its own two addresses so
/// tests running in parallel never share a device.
fn next_host() -> u16 {
    static NEXT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(10);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A fresh pair of loopback addresses, `127.1.<n>.1` and `127.1.<n>.2`
/// (65 000 pairs before any repeats).
pub fn fresh_addresses() -> (Addr, Addr) {
    let [low, high] = next_host().to_le_bytes();
    (
        Addr::v4([127, 1 + high, low, 1], 0),
        Addr::v4([127, 1 + high, low, 2], 0),
    )
}

impl Pair {
    /// A connected pair with one shared CQ per side.
    pub fn new() -> Self {
        let (addr_a, addr_b) = fresh_addresses();
        let a = Adapter::open(addr_a);
        let b = Adapter::open(addr_b);
        let a_cq = a.cq(1024);
        let b_cq = b.cq(1024);
        let a_pd = a.pd();
        let b_pd = b.pd();
        let a_qp = a_pd.qp(&a_cq, &a_cq, 0xA);
        let b_qp = b_pd.qp(&b_cq, &b_cq, 0xB);
        let incoming = Incoming::new();
        let listener = b.listener(&incoming);
        assert_eq!(listener.listen(addr_b), STATUS_SUCCESS, "Listen");
        let (_, listen_addr, _) = listener.local_address();
        let a_conn = a.connector();
        let (status, connected) = a_conn.connect(&a_qp, addr_a, listen_addr, 16, 16, b"hello");
        assert!(
            status == STATUS_PENDING || status == STATUS_SUCCESS,
            "Connect returned {status:#x}"
        );
        let b_conn = incoming.wait_nth(1);
        let b_disconnects = Signal::new();
        let (accept, accepted) = b_conn.accept(&b_qp, 16, 16, b"welcome", &b_disconnects);
        assert!(
            accept == STATUS_PENDING || accept == STATUS_SUCCESS,
            "Accept returned {accept:#x}"
        );
        assert_eq!(
            connected.outcome(status),
            STATUS_SUCCESS,
            "Connect completion"
        );
        let a_disconnects = Signal::new();
        assert_eq!(
            a_conn.complete_connect(&a_disconnects),
            STATUS_SUCCESS,
            "CompleteConnect"
        );
        assert_eq!(
            accepted.outcome(accept),
            STATUS_SUCCESS,
            "Accept completion"
        );
        Self {
            a,
            b,
            a_cq,
            b_cq,
            a_pd,
            b_pd,
            a_qp,
            b_qp,
            a_conn,
            b_conn,
            listener,
            incoming,
            a_disconnects,
            b_disconnects,
        }
    }

    /// Graceful disconnect of both sides, then close of everything; asserts
    /// every close completes.
    pub fn teardown(self) {
        // X1: A's disconnect completes once B's arrives, so start both.
        let (a_status, a_signal) = self.a_conn.disconnect();
        let (b_status, b_signal) = self.b_conn.disconnect();
        assert_eq!(a_signal.outcome(a_status), STATUS_SUCCESS, "Disconnect A");
        let _ = b_signal.outcome(b_status);
        self.a_conn.close();
        self.b_conn.close();
        self.listener.close();
        self.a_qp.close();
        self.b_qp.close();
        self.a_cq.close();
        self.b_cq.close();
        self.a_pd.close();
        self.b_pd.close();
        self.a.close();
        self.b.close();
    }
}

// --- helpers added for D/P/E/I ---

/// Helpers of the D, P, E and I families: registered regions, connecting QPs
/// a test built itself, CQs with the test's own callback, and teardowns that
/// tolerate a connection an error already ended or objects the test already
/// closed. In a module of their own so that no name collides with other
/// families' helpers.
pub mod dpei {
    use std::ffi::c_void;
    use std::sync::Arc;

    use softndk::abi::*;

    use super::{
        Adapter, Addr, Buffer, Connector, Cq, Incoming, Listener, Mr, Pair, Pd, Qp, Signal, WAIT,
        close_object,
    };

    /// `NDK_OP_FLAG_*` words.
    pub const SILENT: u32 = OpFlags::SILENT_SUCCESS.bits();
    pub const FENCE: u32 = OpFlags::READ_FENCE.bits();
    pub const SOLICIT: u32 = OpFlags::SEND_AND_SOLICIT_EVENT.bits();
    pub const OP_REMOTE_READ: u32 = OpFlags::ALLOW_REMOTE_READ.bits();
    pub const OP_LOCAL_WRITE: u32 = OpFlags::ALLOW_LOCAL_WRITE.bits();
    pub const OP_REMOTE_WRITE: u32 = OpFlags::ALLOW_REMOTE_WRITE.bits();
    pub const INLINE: u32 = OpFlags::INLINE.bits();
    pub const READ_SINK: u32 = OpFlags::RDMA_READ_SINK.bits();
    pub const READ_LOCAL_INVALIDATE: u32 = OpFlags::RDMA_READ_LOCAL_INVALIDATE.bits();
    pub const DEFER: u32 = OpFlags::DEFER.bits();
    /// A bit no work request documents.
    pub const UNKNOWN_FLAG: u32 = 0x1000;

    /// `NDK_MR_FLAG_*` words.
    pub const MR_LOCAL_WRITE: u32 = MrFlags::ALLOW_LOCAL_WRITE.bits();
    pub const MR_REMOTE: u32 =
        MrFlags::ALLOW_REMOTE_READ.bits() | MrFlags::ALLOW_REMOTE_WRITE.bits();

    /// A buffer and the MR that registers all of it.
    pub struct Region {
        pub buffer: Buffer,
        pub mr: Mr,
    }

    impl Region {
        /// `len` bytes (page-aligned start) filled with `fill`, registered on
        /// `pd` with `NDK_MR_FLAG_*` `flags`.
        pub fn new(pd: &Pd, len: usize, fill: u8, flags: u32) -> Self {
            Self::register(pd, Buffer::new(len, 0, fill), flags)
        }

        /// As [`Region::new`], filled with [`Buffer::pattern`] of `seed`.
        pub fn pattern(pd: &Pd, len: usize, seed: u8, flags: u32) -> Self {
            Self::register(pd, Buffer::pattern(len, 0, seed), flags)
        }

        fn register(pd: &Pd, mut buffer: Buffer, flags: u32) -> Self {
            let mr = pd.mr(false);
            assert_eq!(
                mr.register(&mut buffer, flags),
                STATUS_SUCCESS,
                "RegisterMr"
            );
            Self { buffer, mr }
        }

        /// A local SGE over `len` bytes at `offset`.
        pub fn sge(&self, offset: usize, len: usize) -> NdkSge {
            self.buffer
                .sge(offset, u32::try_from(len).unwrap(), self.mr.local_token())
        }

        /// The remote address of the byte at `offset`.
        pub fn remote(&self, offset: usize) -> u64 {
            self.buffer.va() + offset as u64
        }

        /// The remote token.
        pub fn token(&self) -> u32 {
            self.mr.remote_token()
        }

        pub fn bytes(&self) -> &[u8] {
            self.buffer.bytes()
        }

        pub fn bytes_mut(&mut self) -> &mut [u8] {
            self.buffer.bytes_mut()
        }

        /// Closes the MR (the buffer is freed after the close completed).
        pub fn close(self) {
            let status = self.mr.close();
            assert!(status == STATUS_SUCCESS || status == STATUS_PENDING);
        }
    }

    /// The connection of two QPs a test created itself (as `Pair::new`
    /// connects its own).
    pub struct Link {
        pub a_conn: Connector,
        pub b_conn: Connector,
        pub listener: Listener,
        pub incoming: Arc<Incoming>,
        pub a_disconnects: Arc<Signal>,
        pub b_disconnects: Arc<Signal>,
    }

    impl Link {
        /// Connects `a_qp` (of adapter `a`, opened on `addr_a`) to `b_qp` (of
        /// `b`, opened on `addr_b`) through a listener on `b`.
        pub fn connect(
            a: &Adapter,
            addr_a: Addr,
            a_qp: &Qp,
            b: &Adapter,
            addr_b: Addr,
            b_qp: &Qp,
        ) -> Self {
            let incoming = Incoming::new();
            let listener = b.listener(&incoming);
            assert_eq!(listener.listen(addr_b), STATUS_SUCCESS, "Listen");
            let (_, listen_addr, _) = listener.local_address();
            let a_conn = a.connector();
            let (status, connected) = a_conn.connect(a_qp, addr_a, listen_addr, 16, 16, b"hello");
            assert!(
                status == STATUS_PENDING || status == STATUS_SUCCESS,
                "Connect returned {status:#x}"
            );
            let b_conn = incoming.wait_nth(1);
            let b_disconnects = Signal::new();
            let (accept, accepted) = b_conn.accept(b_qp, 16, 16, b"welcome", &b_disconnects);
            assert!(
                accept == STATUS_PENDING || accept == STATUS_SUCCESS,
                "Accept returned {accept:#x}"
            );
            assert_eq!(
                connected.outcome(status),
                STATUS_SUCCESS,
                "Connect completion"
            );
            let a_disconnects = Signal::new();
            assert_eq!(
                a_conn.complete_connect(&a_disconnects),
                STATUS_SUCCESS,
                "CompleteConnect"
            );
            assert_eq!(
                accepted.outcome(accept),
                STATUS_SUCCESS,
                "Accept completion"
            );
            Self {
                a_conn,
                b_conn,
                listener,
                incoming,
                a_disconnects,
                b_disconnects,
            }
        }

        /// Disconnects both sides (whatever the outcome: an error may have
        /// ended the connection already) and closes the connectors and the
        /// listener.
        pub fn close(self) {
            disconnect_both(Some(&self.a_conn), Some(&self.b_conn));
            assert_close(self.a_conn.close());
            assert_close(self.b_conn.close());
            assert_close(self.listener.close());
        }
    }

    /// Starts a Disconnect on each connector given and waits for every one
    /// that pends, accepting any final status.
    pub fn disconnect_both(a: Option<&Connector>, b: Option<&Connector>) {
        let started: Vec<_> = [a, b]
            .into_iter()
            .flatten()
            .map(Connector::disconnect)
            .collect();
        for (status, signal) in started {
            let _ = signal.outcome(status);
        }
    }

    /// L18: a close returns `STATUS_SUCCESS` or `STATUS_PENDING` (the
    /// harness's closes have already waited for a pending one).
    pub fn assert_close(status: NtStatus) {
        assert!(
            status == STATUS_SUCCESS || status == STATUS_PENDING,
            "close returned {status:#x}"
        );
    }

    /// CreateCq with the test's own notification callback and affinity.
    ///
    /// # Safety
    /// `context` stays valid for `callback` until the CQ's close completes,
    /// and `affinity` is null or valid during the call.
    pub unsafe fn cq_with(
        adapter: &Adapter,
        depth: u32,
        callback: NdkFnCqNotificationCallback,
        context: *mut c_void,
        affinity: *const GroupAffinity,
    ) -> Result<Cq, NtStatus> {
        let mut cq = std::ptr::null_mut();
        // SAFETY: a live adapter; the caller vouches for context and affinity.
        let status = unsafe {
            (adapter.d().ndk_create_cq)(
                adapter.0,
                depth,
                Some(callback),
                context,
                affinity,
                None,
                std::ptr::null_mut(),
                &raw mut cq,
            )
        };
        if status == STATUS_SUCCESS {
            Ok(Cq(cq, Signal::new()))
        } else {
            Err(status)
        }
    }

    /// Starts the close of a QP the test keeps the wrapper of (it must not
    /// close it again): the close's return value and completion signal.
    pub fn close_qp_async(qp: &Qp) -> (NtStatus, Arc<Signal>) {
        let signal = Signal::new();
        let status = close_object(qp.0.cast(), qp.d().ndk_close_qp, &signal);
        (status, signal)
    }

    /// As [`close_qp_async`], for a connector.
    pub fn close_connector_async(connector: &Connector) -> (NtStatus, Arc<Signal>) {
        let signal = Signal::new();
        let status = close_object(
            connector.0.cast(),
            connector.d().ndk_close_connector,
            &signal,
        );
        (status, signal)
    }

    /// Closes the test started early with [`close_qp_async`] /
    /// [`close_connector_async`] on side A of a pair.
    #[derive(Default)]
    pub struct Early {
        pub a_qp: Option<(NtStatus, Arc<Signal>)>,
        pub a_conn: Option<(NtStatus, Arc<Signal>)>,
    }

    /// Waits for an early close: L18 status, and its completion if it pended.
    fn finish_early(close: Option<(NtStatus, Arc<Signal>)>) {
        if let Some((status, signal)) = close {
            assert_close(status);
            if status == STATUS_PENDING {
                signal.wait();
            }
        }
    }

    /// `Pair::teardown` that accepts any Disconnect outcome (an error may have
    /// terminated the connection) and skips what the test closed early.
    pub fn teardown_after(pair: Pair, early: Early) {
        let Pair {
            a,
            b,
            a_cq,
            b_cq,
            a_pd,
            b_pd,
            a_qp,
            b_qp,
            a_conn,
            b_conn,
            listener,
            ..
        } = pair;
        let a_conn_open = early.a_conn.is_none();
        disconnect_both(a_conn_open.then_some(&a_conn), Some(&b_conn));
        if a_conn_open {
            assert_close(a_conn.close());
        }
        assert_close(b_conn.close());
        finish_early(early.a_conn);
        assert_close(listener.close());
        if early.a_qp.is_some() {
            finish_early(early.a_qp);
        } else {
            assert_close(a_qp.close());
        }
        assert_close(b_qp.close());
        assert_close(a_cq.close());
        assert_close(b_cq.close());
        assert_close(a_pd.close());
        assert_close(b_pd.close());
        a.close();
        b.close();
    }

    /// `Pair::teardown` for a pair whose connection an error may have ended.
    pub fn teardown_lenient(pair: Pair) {
        teardown_after(pair, Early::default());
    }

    /// GetCqResultsEx into an array prefilled with 0xA5 bytes, so that a field
    /// the provider leaves unwritten shows.
    pub fn poll_ex_dirty(cq: &Cq, max: usize) -> Vec<NdkResultEx> {
        let mut out: Vec<NdkResultEx> = Vec::with_capacity(max);
        // SAFETY: room for `max` entries; 0xA5 bytes make valid plain data
        // (integers and raw pointers).
        unsafe {
            std::ptr::write_bytes(out.as_mut_ptr(), 0xA5, max);
        }
        // SAFETY: initialised just above.
        unsafe { out.set_len(max) };
        // SAFETY: room for `max` results.
        let n = unsafe {
            (cq.d().ndk_get_cq_results_ex)(cq.0, out.as_mut_ptr(), u32::try_from(max).unwrap())
        };
        out.truncate(n as usize);
        out
    }

    /// Polls `GetCqResultsEx` until `n` results arrived.
    pub fn wait_results_ex(cq: &Cq, n: usize) -> Vec<NdkResultEx> {
        let deadline = std::time::Instant::now() + WAIT;
        let mut got = Vec::new();
        while got.len() < n {
            got.extend(cq.poll_ex(n - got.len()));
            assert!(
                std::time::Instant::now() < deadline,
                "only {} of {n} completions arrived",
                got.len()
            );
            if got.len() < n {
                std::thread::yield_now();
            }
        }
        got
    }

    /// (request context, status) of each result.
    pub fn summary(results: &[NdkResult]) -> Vec<(usize, NtStatus)> {
        results
            .iter()
            .map(|r| (r.request_context as usize, r.status))
            .collect()
    }

    /// (request context, status, type) of each extended result.
    pub fn summary_ex(results: &[NdkResultEx]) -> Vec<(usize, NtStatus, NdkOperationType)> {
        results
            .iter()
            .map(|r| (r.request_context as usize, r.status, r.type_))
            .collect()
    }

    /// Asserts the CQ holds nothing more.
    pub fn assert_empty(cq: &Cq) {
        let more = cq.poll(16);
        assert!(
            more.is_empty(),
            "unexpected completions: {:?}",
            summary(&more)
        );
    }

    /// One side of a connection a test builds itself: an adapter opened on a
    /// fresh address, and a PD.
    pub struct Side {
        pub adapter: Adapter,
        pub addr: Addr,
        pub pd: Pd,
    }

    impl Side {
        /// Two sides on a fresh pair of addresses.
        pub fn two() -> (Self, Self) {
            let (addr_a, addr_b) = super::fresh_addresses();
            let open = |addr: Addr| {
                let adapter = Adapter::open(addr);
                let pd = adapter.pd();
                Self { adapter, addr, pd }
            };
            (open(addr_a), open(addr_b))
        }

        /// Connects `qp` of this side to `peer_qp` of `peer` (a listener on
        /// `peer`).
        pub fn connect(&self, qp: &Qp, peer: &Self, peer_qp: &Qp) -> Link {
            Link::connect(
                &self.adapter,
                self.addr,
                qp,
                &peer.adapter,
                peer.addr,
                peer_qp,
            )
        }

        /// Closes the PD and the adapter (after everything on them).
        pub fn close(self) {
            assert_close(self.pd.close());
            self.adapter.close();
        }
    }

    /// A fast-register MR over LAM pages of a buffer of its adapter.
    pub struct Frmr {
        pub mr: Mr,
        pub buffer: Buffer,
        pub lam: Vec<u64>,
        pub pages: Vec<u64>,
        pub fbo: u32,
    }

    impl Frmr {
        /// The index the mapping starts at (FBO plus whole pages, M16).
        pub const BASE: u64 = 0x7000_0000;

        /// A `len`-byte buffer (filled with `fill`) mapped with BuildLam, and
        /// an MR initialized for `pages` pages, with remote access or not.
        pub fn new(
            adapter: &Adapter,
            pd: &Pd,
            len: usize,
            fill: u8,
            pages: u32,
            remote: bool,
        ) -> Self {
            let mut buffer = Buffer::new(len, 0, fill);
            let (status, lam, fbo) = adapter.build_lam(&mut buffer);
            assert_eq!(status, STATUS_SUCCESS, "BuildLam");
            let page_list = super::lam_pages(&lam);
            let mr = pd.mr(true);
            assert_eq!(
                mr.init_fast(pages, remote),
                STATUS_SUCCESS,
                "InitializeFastRegisterMr"
            );
            Self {
                mr,
                buffer,
                lam,
                pages: page_list,
                fbo,
            }
        }

        /// The base index of the mapping.
        pub fn base(&self) -> u64 {
            Self::BASE + u64::from(self.fbo)
        }

        /// Posts a FastRegister of the whole buffer.
        pub fn post(&self, qp: &Qp, context: usize, flags: u32) -> NtStatus {
            qp.fast_register(
                context,
                &self.mr,
                &self.pages,
                self.fbo,
                self.buffer.len,
                self.base(),
                flags,
            )
        }

        /// A local SGE through the fast-registered mapping.
        pub fn sge(&self, offset: usize, len: usize) -> NdkSge {
            NdkSge {
                address: self.base() + offset as u64,
                length: u32::try_from(len).unwrap(),
                memory_region_token: self.mr.local_token(),
            }
        }

        /// Closes the MR and releases the LAM.
        pub fn close(mut self, adapter: &Adapter) {
            assert_close(self.mr.close());
            adapter.release_lam(&mut self.lam);
        }
    }
}

// --- helpers added for L/C/K ---

/// Helpers of the L, C and K families: closes through a saved close slot with
/// L8 / L18 checks, a CQ-notification (and request / close completion)
/// watcher that can block, detect overlap and run a hook, a pair whose B side
/// has a watched CQ, and zero-length sends and receives. In a module of their
/// own so that no name collides with other families' helpers.
pub mod lck {
    use std::ffi::c_void;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Condvar, Mutex};
    use std::time::Duration;

    use softndk::abi::*;

    use super::{Adapter, Addr, Cq, Incoming, Pair, Pd, Qp, Signal, WAIT, fresh_addresses};

    /// How long a check waits to see that a callback does *not* come (only to
    /// widen a race window; no test asserts on timing).
    pub const SETTLE: Duration = Duration::from_millis(10);

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

    /// L8: the outcome of a call taking a request completion whose completion
    /// context is `signal`: when it returned `STATUS_PENDING`, its one
    /// completion's status (and no second completion follows); otherwise the
    /// return value (and no completion follows).
    pub fn settle(returned: NtStatus, signal: &Signal) -> NtStatus {
        if returned == STATUS_PENDING {
            let status = signal.wait();
            std::thread::sleep(SETTLE);
            assert_eq!(signal.count(), 1, "L8: a completion ran more than once");
            status
        } else {
            std::thread::sleep(SETTLE);
            assert_eq!(
                signal.count(),
                0,
                "L8: a completion ran after the call returned {returned:#x}"
            );
            returned
        }
    }

    /// Starts the close of any object through `close` (a close slot the test
    /// saved), with [`on_tagged_close`] on `log`; asserts L18.
    pub fn close_with(
        header: *mut NdkObjectHeader,
        close: NdkFnCloseObject,
        log: &Arc<Signal>,
    ) -> NtStatus {
        // SAFETY: a live object and the close slot of its table; `log` outlives
        // the close (tests wait for it).
        let status = unsafe { close(header, Some(on_tagged_close), log.ctx()) };
        assert!(
            status == STATUS_SUCCESS || status == STATUS_PENDING,
            "L18: close returned {status:#x}"
        );
        status
    }

    /// Closes through `close` and waits until the close is complete; L18: a
    /// `STATUS_SUCCESS` close never calls back, a pending one exactly once.
    pub fn close_and_wait(header: *mut NdkObjectHeader, close: NdkFnCloseObject) -> NtStatus {
        let log = Signal::new();
        let status = close_with(header, close, &log);
        finish_close(status, &log);
        status
    }

    /// Waits for the close that returned `status` with completion `log`
    /// (only the close completion logs there) and checks L18.
    pub fn finish_close(status: NtStatus, log: &Signal) {
        if status == STATUS_PENDING {
            assert_eq!(log.wait(), CLOSED);
        }
        std::thread::sleep(SETTLE);
        let expected = usize::from(status == STATUS_PENDING);
        assert_eq!(
            log.count(),
            expected,
            "L18: close returned {status:#x}, completions {:?}",
            log.all()
        );
    }

    /// The first `n` dispatch slots of an object's table, as raw words (a null
    /// slot reads 0: reading it as a Rust fn pointer would be undefined).
    pub fn raw_slots(object: *const c_void, n: usize) -> Vec<usize> {
        let table = dispatch_of(object).cast::<usize>();
        assert!(!table.is_null(), "L2: null Dispatch");
        (0..n)
            // SAFETY: the table has at least `n` slots (§3.9).
            .map(|i| unsafe { table.wrapping_add(i).read() })
            .collect()
    }

    /// The header of any NDK object.
    pub fn header_of(object: *const c_void) -> NdkObjectHeader {
        // SAFETY: every NDK object starts with its header (§3.8).
        unsafe { object.cast::<NdkObjectHeader>().read() }
    }

    /// The dispatch pointer of any NDK object.
    pub fn dispatch_of(object: *const c_void) -> *const c_void {
        // SAFETY: every NDK object has the shape of `NDK_CQ`: the header, then
        // the dispatch pointer (§3.8).
        unsafe { (*object.cast::<NdkCq>()).dispatch.cast() }
    }

    /// Overwrites the dispatch pointer of any NDK object (L4), returning the
    /// old one.
    ///
    /// # Safety
    /// `object` is live; the caller restores the pointer before any code
    /// that reads it (the harness wrappers) runs on the object.
    pub unsafe fn set_dispatch(object: *mut c_void, dispatch: *const c_void) -> *const c_void {
        // SAFETY: the caller's contract; every NDK object has the shape of
        // `NDK_CQ` (§3.8).
        let field = unsafe { &raw mut (*object.cast::<NdkCq>()).dispatch };
        // SAFETY: as above; the field is the consumer's to write (L4).
        let old = unsafe { field.read() };
        // SAFETY: as above.
        unsafe { field.write(dispatch.cast()) };
        old.cast()
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
        inside: AtomicUsize,
        overlapped: AtomicBool,
        hook: Mutex<Option<Hook>>,
        connectors: Mutex<Vec<usize>>,
    }

    impl Watch {
        pub fn new() -> Arc<Self> {
            Arc::new(Self::default())
        }

        /// A watch whose callbacks block until [`open`](Self::open).
        pub fn gated() -> Arc<Self> {
            let watch = Self::new();
            *watch.closed_gate.lock().unwrap() = true;
            watch
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
            drop(self.gate_cv.wait_while(gate, |closed| *closed).unwrap());
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

    /// CreateCq with `watch` as its notification callback. The returned
    /// [`Cq`]'s own signal stays empty.
    pub fn watched_cq(adapter: &Adapter, depth: u32, watch: &Arc<Watch>) -> Cq {
        try_watched_cq(adapter, depth, watch).expect("CreateCq")
    }

    /// As [`watched_cq`], returning the failure status.
    pub fn try_watched_cq(
        adapter: &Adapter,
        depth: u32,
        watch: &Arc<Watch>,
    ) -> Result<Cq, NtStatus> {
        let mut cq = std::ptr::null_mut();
        // SAFETY: a live adapter; the watch outlives the CQ (tests keep it).
        let status = unsafe {
            (adapter.d().ndk_create_cq)(
                adapter.0,
                depth,
                Some(on_watch),
                watch.ctx(),
                std::ptr::null(),
                None,
                std::ptr::null_mut(),
                &raw mut cq,
            )
        };
        if status == STATUS_SUCCESS {
            Ok(Cq(cq, Signal::new()))
        } else {
            Err(status)
        }
    }

    /// A connected pair (as [`Pair::new`]) whose CQs are made by `a_cq` and
    /// `b_cq` on adapters A and B.
    pub fn pair_with(a_cq: impl FnOnce(&Adapter) -> Cq, b_cq: impl FnOnce(&Adapter) -> Cq) -> Pair {
        let (addr_a, addr_b) = fresh_addresses();
        let a = Adapter::open(addr_a);
        let b = Adapter::open(addr_b);
        let a_cq = a_cq(&a);
        let b_cq = b_cq(&b);
        let a_pd = a.pd();
        let b_pd = b.pd();
        let a_qp = a_pd.qp(&a_cq, &a_cq, 0xA);
        let b_qp = b_pd.qp(&b_cq, &b_cq, 0xB);
        let incoming = Incoming::new();
        let listener = b.listener(&incoming);
        assert_eq!(listener.listen(addr_b), STATUS_SUCCESS, "Listen");
        let (_, listen_addr, _) = listener.local_address();
        let a_conn = a.connector();
        let (status, connected) = a_conn.connect(&a_qp, addr_a, listen_addr, 16, 16, b"hello");
        assert!(
            status == STATUS_PENDING || status == STATUS_SUCCESS,
            "Connect returned {status:#x}"
        );
        let b_conn = incoming.wait_nth(1);
        let b_disconnects = Signal::new();
        let (accept, accepted) = b_conn.accept(&b_qp, 16, 16, b"welcome", &b_disconnects);
        assert!(
            accept == STATUS_PENDING || accept == STATUS_SUCCESS,
            "Accept returned {accept:#x}"
        );
        assert_eq!(
            connected.outcome(status),
            STATUS_SUCCESS,
            "Connect completion"
        );
        let a_disconnects = Signal::new();
        assert_eq!(
            a_conn.complete_connect(&a_disconnects),
            STATUS_SUCCESS,
            "CompleteConnect"
        );
        assert_eq!(
            accepted.outcome(accept),
            STATUS_SUCCESS,
            "Accept completion"
        );
        Pair {
            a,
            b,
            a_cq,
            b_cq,
            a_pd,
            b_pd,
            a_qp,
            b_qp,
            a_conn,
            b_conn,
            listener,
            incoming,
            a_disconnects,
            b_disconnects,
        }
    }

    /// A pair whose B-side CQ (depth 1024) notifies `watch`.
    pub fn pair_watching_b(watch: &Arc<Watch>) -> Pair {
        pair_with(|a| a.cq(1024), |b| watched_cq(b, 1024, watch))
    }

    /// A zero-length Receive.
    pub fn recv0(qp: &Qp, context: usize) {
        assert_eq!(qp.receive(context, &[]), STATUS_SUCCESS, "Receive");
    }

    /// A zero-length Send with `flags`.
    pub fn send0(qp: &Qp, context: usize, flags: u32) {
        assert_eq!(qp.send(context, &[], flags), STATUS_SUCCESS, "Send");
    }

    /// `NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT`.
    pub const SOLICIT: u32 = 0x4;

    /// A fresh IPv4 address of its own, `127.76.x.y` (outside the range of
    /// [`fresh_addresses`]), so that an adapter opened on it has a device of its
    /// own.
    pub fn own_address() -> Addr {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let (hi, lo) = (n / 250, n % 250 + 1);
        Addr::v4(
            [
                127,
                76,
                u8::try_from(hi).unwrap(),
                u8::try_from(lo).unwrap(),
            ],
            0,
        )
    }

    /// A source of completions without a connection: an unconnected QP that
    /// was flushed, so that every receive posted on it completes at once with
    /// `STATUS_CANCELLED` (E1) on `cq`.
    pub struct Spout {
        pub adapter: Adapter,
        pub cq: Cq,
        pub pd: Pd,
        pub qp: Qp,
    }

    impl Spout {
        /// An adapter of its own, a CQ made by `make_cq`, a PD and a flushed QP.
        pub fn new(make_cq: impl FnOnce(&Adapter) -> Cq) -> Self {
            let adapter = Adapter::open(own_address());
            let cq = make_cq(&adapter);
            let pd = adapter.pd();
            let qp = pd.qp(&cq, &cq, 0x5B);
            qp.flush();
            Self {
                adapter,
                cq,
                pd,
                qp,
            }
        }

        /// One `STATUS_CANCELLED` completion with request context `context`.
        pub fn emit(&self, context: usize) {
            recv0(&self.qp, context);
        }

        /// Closes everything (L18 checked).
        pub fn close(self) {
            for status in [self.qp.close(), self.cq.close(), self.pd.close()] {
                assert!(status == STATUS_SUCCESS || status == STATUS_PENDING);
            }
            self.adapter.close();
        }
    }

    /// Which objects of a [`Pair`] a test has closed itself (or started to
    /// close: [`teardown_except`] then relies on those closes completing).
    #[derive(Default, Clone, Copy)]
    #[allow(clippy::struct_excessive_bools, reason = "one flag per object")]
    pub struct Closed {
        pub a_conn: bool,
        pub b_conn: bool,
        pub listener: bool,
        pub a_qp: bool,
        pub b_qp: bool,
        pub a_cq: bool,
        pub b_cq: bool,
        pub a_pd: bool,
        pub b_pd: bool,
    }

    /// `Pair::teardown` that skips what the test closed and accepts any
    /// Disconnect outcome (an error may have ended the connection); every
    /// close it makes is checked (L18) and waited for; the adapters' closes
    /// return only once every close started by the test has completed (L27).
    pub fn teardown_except(pair: Pair, closed: Closed) {
        let Pair {
            a,
            b,
            a_cq,
            b_cq,
            a_pd,
            b_pd,
            a_qp,
            b_qp,
            a_conn,
            b_conn,
            listener,
            ..
        } = pair;
        let started: Vec<_> = [(&a_conn, closed.a_conn), (&b_conn, closed.b_conn)]
            .into_iter()
            .filter(|(_, done)| !done)
            .map(|(conn, _)| conn.disconnect())
            .collect();
        for (status, signal) in started {
            let _ = signal.outcome(status);
        }
        let check = |status: NtStatus| {
            assert!(
                status == STATUS_SUCCESS || status == STATUS_PENDING,
                "L18: close returned {status:#x}"
            );
        };
        if !closed.a_conn {
            check(a_conn.close());
        }
        if !closed.b_conn {
            check(b_conn.close());
        }
        if !closed.listener {
            check(listener.close());
        }
        if !closed.a_qp {
            check(a_qp.close());
        }
        if !closed.b_qp {
            check(b_qp.close());
        }
        if !closed.a_cq {
            check(a_cq.close());
        }
        if !closed.b_cq {
            check(b_cq.close());
        }
        if !closed.a_pd {
            check(a_pd.close());
        }
        if !closed.b_pd {
            check(b_pd.close());
        }
        a.close();
        b.close();
    }

    /// (request context, status) of each result.
    pub fn contexts(results: &[NdkResult]) -> Vec<(usize, NtStatus)> {
        results
            .iter()
            .map(|r| (r.request_context as usize, r.status))
            .collect()
    }
}

// --- helpers added for N/X ---

/// Helpers of the N and X families: addresses of their own, one side of a
/// connection (adapter, CQ, PD), connections a test drives step by step, and
/// the connection calls the harness wraps only in one form
/// (ConnectWithSharedEndpoint, the address getters with a chosen buffer size,
/// GetConnectionData with a chosen buffer and length, CompleteConnect and
/// Accept with an optional disconnect callback). In a module of their own so
/// that no name collides with other families' helpers.
pub mod nx {
    use super::*;
    use std::sync::atomic::{AtomicU16, Ordering};

    /// How long a check waits to see that a callback does *not* come (it is
    /// always followed by the positive check; no test asserts on timing).
    pub const SETTLE: Duration = Duration::from_millis(50);

    /// A fresh IPv4 address nobody else uses, `127.78.x.y` (outside the
    /// ranges of [`fresh_addresses`] and of the other families' helpers).
    pub fn own_v4() -> Addr {
        static NEXT: AtomicU16 = AtomicU16::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let [low, high] = (n % 250 + 1 + (n / 250) * 256).to_le_bytes();
        Addr::v4([127, 78, high, low], 0)
    }

    /// A fresh pair of IPv6 addresses nobody else uses, `fd00:4e58::<n>:1`
    /// and `fd00:4e58::<n>:2`.
    pub fn fresh_v6() -> (Addr, Addr) {
        static NEXT: AtomicU16 = AtomicU16::new(1);
        let [hi, lo] = NEXT.fetch_add(1, Ordering::Relaxed).to_be_bytes();
        let ip = |last: u8| {
            let mut ip = [0_u8; 16];
            ip[..4].copy_from_slice(&[0xFD, 0x00, 0x4E, 0x58]);
            ip[12] = hi;
            ip[13] = lo;
            ip[15] = last;
            ip
        };
        (Addr::v6(ip(1), 0), Addr::v6(ip(2), 0))
    }

    /// Waits [`SETTLE`] and returns how many callbacks `signal` has seen.
    pub fn settled_count(signal: &Signal) -> usize {
        std::thread::sleep(SETTLE);
        signal.count()
    }

    /// One side of a connection: an adapter opened on `addr`, a CQ (depth
    /// 1024) and a PD.
    pub struct End {
        pub addr: Addr,
        pub adapter: Adapter,
        pub cq: Cq,
        pub pd: Pd,
    }

    impl End {
        pub fn open(addr: Addr) -> Self {
            let adapter = Adapter::open(addr);
            let cq = adapter.cq(1024);
            let pd = adapter.pd();
            Self {
                addr,
                adapter,
                cq,
                pd,
            }
        }

        /// Two sides on [`fresh_addresses`].
        pub fn two() -> (Self, Self) {
            let (a, b) = fresh_addresses();
            (Self::open(a), Self::open(b))
        }

        /// A QP (depth 64, 4 SGEs, 256 inline bytes) on the side's CQ.
        pub fn qp(&self, context: usize) -> Qp {
            self.pd.qp(&self.cq, &self.cq, context)
        }

        /// A listener on this side's adapter listening on `addr`:`port`
        /// (port 0: ephemeral); returns it with its events and the address
        /// it reports.
        pub fn listen(&self, port: u16) -> (Listener, Arc<Incoming>, Addr) {
            let incoming = Incoming::new();
            let listener = self.adapter.listener(&incoming);
            assert_eq!(
                listener.listen(self.addr.with_port(port)),
                STATUS_SUCCESS,
                "Listen"
            );
            let (status, local, _) = listener.local_address();
            assert_eq!(status, STATUS_SUCCESS, "GetListenerLocalAddress");
            (listener, incoming, local)
        }

        /// Closes the CQ, the PD and the adapter (L18 checked).
        pub fn close(self) {
            for status in [self.cq.close(), self.pd.close()] {
                assert!(
                    status == STATUS_SUCCESS || status == STATUS_PENDING,
                    "L18: close returned {status:#x}"
                );
            }
            self.adapter.close();
        }
    }

    /// An established connection: the active connector, the passive one (from
    /// the connect event) and each side's disconnect indications.
    pub struct Conn {
        pub active: Connector,
        pub passive: Connector,
        pub a_disconnects: Arc<Signal>,
        pub b_disconnects: Arc<Signal>,
    }

    impl Conn {
        /// Connects `qp` (of `adapter`, from `src`) to `dst`, whose listener
        /// reports to `incoming`; accepts the `nth` connect event with
        /// `peer_qp`; read limits 16 / 16.
        pub fn establish(
            adapter: &Adapter,
            src: Addr,
            qp: &Qp,
            dst: Addr,
            incoming: &Incoming,
            nth: usize,
            peer_qp: &Qp,
        ) -> Self {
            let active = adapter.connector();
            let (status, connected) = active.connect(qp, src, dst, 16, 16, b"hello");
            assert!(
                status == STATUS_PENDING || status == STATUS_SUCCESS,
                "Connect returned {status:#x}"
            );
            let passive = incoming.wait_nth(nth);
            let b_disconnects = Signal::new();
            let (accept, accepted) = passive.accept(peer_qp, 16, 16, b"welcome", &b_disconnects);
            assert!(
                accept == STATUS_PENDING || accept == STATUS_SUCCESS,
                "Accept returned {accept:#x}"
            );
            assert_eq!(
                connected.outcome(status),
                STATUS_SUCCESS,
                "Connect completion"
            );
            let a_disconnects = Signal::new();
            assert_eq!(
                active.complete_connect(&a_disconnects),
                STATUS_SUCCESS,
                "CompleteConnect"
            );
            assert_eq!(
                accepted.outcome(accept),
                STATUS_SUCCESS,
                "Accept completion"
            );
            Self {
                active,
                passive,
                a_disconnects,
                b_disconnects,
            }
        }

        /// Disconnects both sides (any outcome) and closes both connectors.
        pub fn close(self) {
            let started = [self.active.disconnect(), self.passive.disconnect()];
            for (status, signal) in started {
                let _ = signal.outcome(status);
            }
            for status in [self.active.close(), self.passive.close()] {
                assert!(
                    status == STATUS_SUCCESS || status == STATUS_PENDING,
                    "L18: close returned {status:#x}"
                );
            }
        }
    }

    /// `NdkCompleteConnect` with an optional disconnect callback: its return
    /// value and completion signal.
    pub fn complete_connect_with(
        connector: &Connector,
        event: Option<NdkFnDisconnectEventCallback>,
        event_context: *mut c_void,
    ) -> (NtStatus, Arc<Signal>) {
        let signal = Signal::new();
        // SAFETY: a live connector; the caller keeps the event context alive.
        let status = unsafe {
            (connector.d().ndk_complete_connect)(
                connector.0,
                event,
                event_context,
                Some(on_status),
                signal.ctx(),
            )
        };
        (status, signal)
    }

    /// `NdkAccept` with an optional disconnect callback: its return value
    /// and completion signal.
    #[allow(clippy::too_many_arguments, reason = "mirrors NdkAccept")]
    pub fn accept_with(
        connector: &Connector,
        qp: &Qp,
        ird: u32,
        ord: u32,
        data: &[u8],
        event: Option<NdkFnDisconnectEventCallback>,
        event_context: *mut c_void,
    ) -> (NtStatus, Arc<Signal>) {
        let signal = Signal::new();
        // SAFETY: live objects; data valid for the call; the caller keeps the
        // event context alive.
        let status = unsafe {
            (connector.d().ndk_accept)(
                connector.0,
                qp.0,
                ird,
                ord,
                data.as_ptr().cast(),
                u32::try_from(data.len()).unwrap(),
                event,
                event_context,
                Some(on_status),
                signal.ctx(),
            )
        };
        (status, signal)
    }

    /// `NdkConnectWithSharedEndpoint`: its return value and completion signal.
    pub fn connect_shared(
        connector: &Connector,
        qp: &Qp,
        endpoint: &SharedEndpoint,
        dst: Addr,
        ird: u32,
        ord: u32,
        data: &[u8],
    ) -> (NtStatus, Arc<Signal>) {
        let signal = Signal::new();
        // SAFETY: live objects; address and data valid for the call.
        let status = unsafe {
            (connector.d().ndk_connect_with_shared_endpoint)(
                connector.0,
                qp.0,
                endpoint.0,
                dst.as_ptr(),
                dst.len(),
                ird,
                ord,
                data.as_ptr().cast(),
                u32::try_from(data.len()).unwrap(),
                Some(on_status),
                signal.ctx(),
            )
        };
        (status, signal)
    }

    /// `NdkConnect` with explicit address lengths (N2): its return value and
    /// completion signal.
    #[allow(clippy::too_many_arguments, reason = "mirrors NdkConnect")]
    pub fn connect_with_lengths(
        connector: &Connector,
        qp: &Qp,
        src: Addr,
        src_len: u32,
        dst: Addr,
        dst_len: u32,
        data: &[u8],
    ) -> (NtStatus, Arc<Signal>) {
        let signal = Signal::new();
        // SAFETY: live objects; both addresses are 28-byte buffers, at least
        // the lengths given (at most 28).
        let status = unsafe {
            (connector.d().ndk_connect)(
                connector.0,
                qp.0,
                src.as_ptr(),
                src_len.min(28),
                dst.as_ptr(),
                dst_len.min(28),
                16,
                16,
                data.as_ptr().cast(),
                u32::try_from(data.len()).unwrap(),
                Some(on_status),
                signal.ctx(),
            )
        };
        (status, signal)
    }

    /// `NdkListen` with an explicit address length (N2): the outcome (L8).
    pub fn listen_with_length(listener: &Listener, addr: Addr, len: u32) -> NtStatus {
        let signal = Signal::new();
        // SAFETY: a live listener; the address is a 28-byte buffer.
        let status = unsafe {
            (listener.d().ndk_listen)(
                listener.0,
                addr.as_ptr(),
                len.min(28),
                Some(on_status),
                signal.ctx(),
            )
        };
        signal.outcome(status)
    }

    /// `NdkCreateSharedEndpoint` with an explicit address length (N2).
    pub fn shared_endpoint_with_length(
        adapter: &Adapter,
        addr: Addr,
        len: u32,
    ) -> Result<SharedEndpoint, NtStatus> {
        let mut e = std::ptr::null_mut();
        // SAFETY: a live adapter; the address is a 28-byte buffer.
        let status = unsafe {
            (adapter.d().ndk_create_shared_endpoint)(
                adapter.0,
                addr.as_ptr(),
                len.min(28),
                None,
                std::ptr::null_mut(),
                &raw mut e,
            )
        };
        if status == STATUS_SUCCESS {
            Ok(SharedEndpoint(e))
        } else {
            Err(status)
        }
    }

    /// What GetConnectionData reported: status, `*pPrivateDataLength` after
    /// the call, and the read limits (when asked for).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Data {
        pub status: NtStatus,
        pub length: u32,
        pub limits: Option<(u32, u32)>,
    }

    /// `NdkGetConnectionData` into `buffer` (None: a NULL buffer) with
    /// `*pPrivateDataLength` = `length` on entry (at most the buffer's
    /// size); `limits`: whether to pass the read-limit outputs (else NULL).
    pub fn connection_data_into(
        connector: &Connector,
        buffer: Option<&mut [u8]>,
        length: u32,
        limits: bool,
    ) -> Data {
        let (mut ird, mut ord) = (0xDEAD_u32, 0xBEEF_u32);
        let mut len = length;
        let ptr: *mut c_void = match buffer {
            Some(b) => {
                assert!(length as usize <= b.len());
                b.as_mut_ptr().cast()
            }
            None => std::ptr::null_mut(),
        };
        let (pi, po): (*mut u32, *mut u32) = if limits {
            (&raw mut ird, &raw mut ord)
        } else {
            (std::ptr::null_mut(), std::ptr::null_mut())
        };
        // SAFETY: a live connector; the buffer holds `length` bytes.
        let status = unsafe {
            (connector.d().ndk_get_connection_data)(connector.0, pi, po, ptr, &raw mut len)
        };
        Data {
            status,
            length: len,
            limits: limits.then_some((ird, ord)),
        }
    }

    /// Which address getter.
    #[derive(Clone, Copy)]
    pub enum Getter<'a> {
        ConnectorLocal(&'a Connector),
        ConnectorPeer(&'a Connector),
        Listener(&'a Listener),
        Endpoint(&'a SharedEndpoint),
    }

    impl Getter<'_> {
        pub fn name(&self) -> &'static str {
            match self {
                Self::ConnectorLocal(_) => "connector GetLocalAddress",
                Self::ConnectorPeer(_) => "GetPeerAddress",
                Self::Listener(_) => "GetListenerLocalAddress",
                Self::Endpoint(_) => "GetSharedEndpointLocalAddress",
            }
        }
    }

    /// Calls an address getter with `*pAddressLength` = `room` on entry (a
    /// NULL buffer when `room` is 0): status, the address buffer (filled
    /// with 0xEE beforehand) and `*pAddressLength` after the call.
    pub fn get_address(getter: Getter<'_>, room: u32) -> (NtStatus, [u8; 28], u32) {
        assert!(room <= 28);
        let mut buf = [0xEE_u8; 28];
        let mut len = room;
        let ptr: *mut SockAddr = if room == 0 {
            std::ptr::null_mut()
        } else {
            buf.as_mut_ptr().cast()
        };
        let len_ptr = &raw mut len;
        let status = match getter {
            // SAFETY: a live object; a buffer of `room` bytes (at most 28)
            // and an in/out length.
            Getter::ConnectorLocal(c) => unsafe {
                (c.d().ndk_get_local_address)(c.0, ptr, len_ptr)
            },
            // SAFETY: as above.
            Getter::ConnectorPeer(c) => unsafe { (c.d().ndk_get_peer_address)(c.0, ptr, len_ptr) },
            // SAFETY: as above.
            Getter::Listener(l) => unsafe { (l.d().ndk_get_local_address)(l.0, ptr, len_ptr) },
            // SAFETY: as above.
            Getter::Endpoint(e) => unsafe { (e.d().ndk_get_local_address)(e.0, ptr, len_ptr) },
        };
        (status, buf, len)
    }

    /// The address a getter reports into a 28-byte buffer; asserts success.
    pub fn address_of(getter: Getter<'_>) -> Addr {
        let (status, bytes, _) = get_address(getter, 28);
        assert_eq!(status, STATUS_SUCCESS, "{}", getter.name());
        let mut addr = Addr::empty();
        // SAFETY: `Addr` is a 28-byte plain buffer.
        unsafe { addr.as_mut_ptr().cast::<[u8; 28]>().write(bytes) };
        addr
    }

    /// Starts the close of a shared endpoint: its return value and signal.
    #[allow(
        clippy::needless_pass_by_value,
        reason = "the close consumes the object"
    )]
    pub fn close_endpoint_async(endpoint: SharedEndpoint) -> (NtStatus, Arc<Signal>) {
        let signal = Signal::new();
        let status = close_object(
            endpoint.0.cast(),
            endpoint.d().ndk_close_shared_endpoint,
            &signal,
        );
        (status, signal)
    }

    /// Starts the close of a connector: its return value and signal.
    #[allow(
        clippy::needless_pass_by_value,
        reason = "the close consumes the object"
    )]
    pub fn close_connector_async(connector: Connector) -> (NtStatus, Arc<Signal>) {
        let signal = Signal::new();
        let status = close_object(
            connector.0.cast(),
            connector.d().ndk_close_connector,
            &signal,
        );
        (status, signal)
    }

    /// Waits for a close started with one of the `…_async` helpers (L18).
    pub fn finish_close((status, signal): (NtStatus, Arc<Signal>)) {
        assert!(
            status == STATUS_SUCCESS || status == STATUS_PENDING,
            "L18: close returned {status:#x}"
        );
        if status == STATUS_PENDING {
            signal.wait();
        }
    }

    /// `NDK_MR_FLAG_*`: local write, remote read and remote write.
    pub const MR_ALL: u32 = MrFlags::ALLOW_LOCAL_WRITE.bits()
        | MrFlags::ALLOW_REMOTE_READ.bits()
        | MrFlags::ALLOW_REMOTE_WRITE.bits();

    /// `NDK_OP_FLAG_SILENT_SUCCESS`.
    pub const SILENT: u32 = OpFlags::SILENT_SUCCESS.bits();

    /// A page-aligned buffer registered with [`MR_ALL`].
    pub struct Mem {
        pub buffer: Buffer,
        pub mr: Mr,
    }

    impl Mem {
        /// `len` bytes filled with `fill`, registered on `pd`.
        pub fn new(pd: &Pd, len: usize, fill: u8) -> Self {
            let mut buffer = Buffer::new(len, 0, fill);
            let mr = pd.mr(false);
            assert_eq!(
                mr.register(&mut buffer, MR_ALL),
                STATUS_SUCCESS,
                "RegisterMr"
            );
            Self { buffer, mr }
        }

        /// A local SGE over `len` bytes at `offset`.
        pub fn sge(&self, offset: usize, len: usize) -> NdkSge {
            self.buffer
                .sge(offset, u32::try_from(len).unwrap(), self.mr.local_token())
        }

        /// The remote address of the byte at `offset`.
        pub fn remote(&self, offset: usize) -> u64 {
            self.buffer.va() + offset as u64
        }

        /// The remote token.
        pub fn token(&self) -> u32 {
            self.mr.remote_token()
        }

        pub fn bytes(&self) -> &[u8] {
            self.buffer.bytes()
        }

        /// Closes the MR (the buffer is freed after the close completed).
        pub fn close(self) {
            let status = self.mr.close();
            assert!(status == STATUS_SUCCESS || status == STATUS_PENDING);
        }
    }

    /// Sends `payload` from `from` (QP, CQ, memory) into a receive posted on
    /// `to`, and checks both completions (SUCCESS) and the bytes received.
    /// The two sides may share one CQ (a loopback connection).
    pub fn ping(from: (&Qp, &Cq, &mut Mem), to: (&Qp, &Cq, &Mem), payload: &[u8]) {
        let (qp, cq, mem) = from;
        let (peer_qp, peer_cq, peer_mem) = to;
        let len = payload.len();
        mem.buffer.bytes_mut()[..len].copy_from_slice(payload);
        assert_eq!(
            peer_qp.receive(0x5EC0, &[peer_mem.sge(0, len)]),
            STATUS_SUCCESS,
            "Receive"
        );
        assert_eq!(
            qp.send(0x5E4D, &[mem.sge(0, len)], 0),
            STATUS_SUCCESS,
            "Send"
        );
        let mut done: Vec<(usize, NtStatus)> = if std::ptr::eq(cq.0, peer_cq.0) {
            cq.wait_results(2)
        } else {
            let mut v = cq.wait_results(1);
            v.extend(peer_cq.wait_results(1));
            v
        }
        .iter()
        .map(|r| (r.request_context as usize, r.status))
        .collect();
        done.sort_unstable();
        assert_eq!(
            done,
            [(0x5E4D, STATUS_SUCCESS), (0x5EC0, STATUS_SUCCESS)],
            "Send and Receive completions"
        );
        assert_eq!(&peer_mem.bytes()[..len], payload, "bytes received");
    }
}
