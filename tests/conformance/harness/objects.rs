//! Objects: addresses, buffers, and one thin wrapper per NDK object type
//! whose methods call through the dispatch table; regions, fast-register
//! MRs, and the closes a test starts or checks itself.

use super::*;

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
    /// An address of `family` with `ip` at bytes `at` and `port`
    /// (SOCKADDR_IN and SOCKADDR_IN6 share the family and port fields).
    fn of(family: AddressFamily, at: std::ops::Range<usize>, ip: &[u8], port: u16) -> Self {
        let mut bytes = [0_u8; 28];
        bytes[..2].copy_from_slice(&family.to_ne_bytes());
        bytes[at].copy_from_slice(ip);
        Self { bytes }.with_port(port)
    }

    pub fn v4(ip: [u8; 4], port: u16) -> Self {
        Self::of(AF_INET, 4..8, &ip, port)
    }

    pub fn v6(ip: [u8; 16], port: u16) -> Self {
        Self::of(AF_INET6, 8..24, &ip, port)
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

/// A host-mode MDL describing `len` bytes from `first` (its virtual address
/// is where the bytes are).
#[allow(
    clippy::unnecessary_box_returns,
    reason = "MDLs are linked by address, so they live in boxes"
)]
pub fn mdl_at(first: *mut u8, len: usize) -> Box<Mdl> {
    let offset = first as usize % PAGE;
    Box::new(Mdl::over(
        first.wrapping_sub(offset).cast(),
        u32::try_from(offset).unwrap(),
        u32::try_from(len).unwrap(),
    ))
}

impl Buffer {
    /// `len` bytes starting `offset` bytes into a page, filled with `fill`.
    pub fn new(len: usize, offset: usize, fill: u8) -> Self {
        let pages = (offset + len).div_ceil(PAGE) + 1;
        let mut storage = vec![fill; pages * PAGE];
        let base = storage.as_ptr() as usize;
        let aligned = (PAGE - base % PAGE) % PAGE;
        let start = aligned + offset;
        let mdl = mdl_at(storage.as_mut_ptr().wrapping_add(start), len);
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

    /// The buffer's bytes. Over iWARP, first waits for the bytes in flight
    /// on this process's streams to land: an RDMA Write completes at its
    /// initiator once sent, and reaches the target a moment later.
    pub fn bytes(&self) -> &[u8] {
        if Transport::default() == Transport::Iwarp {
            softndk::provider::host::wire_settle();
        }
        std::hint::black_box(&self.storage[self.start..self.start + self.len])
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

/// An object's header and the close slot of its table: what a test needs
/// to close it its own way.
pub type CloseSlot = (*mut NdkObjectHeader, NdkFnCloseObject);

/// Starts the close of any object through its table's close slot (slot 0):
/// the close's return value and completion signal.
pub fn close_started(
    header: *mut NdkObjectHeader,
    close: NdkFnCloseObject,
) -> (NtStatus, Arc<Signal>) {
    let signal = Signal::new();
    // SAFETY: a live object and its own close slot.
    let status = unsafe { close(header, Some(on_close), signal.ctx()) };
    (status, signal)
}

/// Closes an object through its close slot and waits for the completion
/// if the close pended: the close's return value. Over iWARP, callbacks
/// run on the transport's threads, so a close that finds one still
/// returning pends (L18, L21) where the fabric's would not: there the
/// completion's status is returned instead.
fn close_waiting((header, close): CloseSlot) -> NtStatus {
    // SAFETY: a live object's header.
    let object_type = unsafe { (*header).object_type };
    if Transport::default() == Transport::Iwarp && object_type == NdkObjectType::MR {
        // An RDMA Write completes at its initiator once sent: the target's
        // memory is released only after the bytes in flight have landed, as
        // a consumer learns from the peer's next message.
        softndk::provider::host::wire_settle();
    }
    let (status, signal) = close_started(header, close);
    if status == STATUS_PENDING {
        let completed = signal.wait();
        if Transport::default() == Transport::Iwarp {
            return completed;
        }
    }
    status
}

/// A slice as the C ABI takes it: a pointer to its first element and its
/// length (an SGE list, a page list, private data).
pub fn c_array<T>(items: &[T]) -> (*const T, u32) {
    (items.as_ptr(), u32::try_from(items.len()).unwrap())
}

/// A request's context as the C ABI takes it: the test's number, returned
/// in the request's result.
pub fn c_context(context: usize) -> *mut c_void {
    context as *mut c_void
}

/// Makes a Create call synchronously, the one way the harness creates: no
/// completion callback, so the object is there when the call returns
/// (`call` gets the three trailing arguments every Create slot takes —
/// completion, its context, the out-pointer — and passes them on). The
/// object made, or the call's failure status.
pub fn create<T>(
    call: impl FnOnce(Option<NdkFnCreateCompletion>, *mut c_void, *mut *mut T) -> NtStatus,
) -> Result<*mut T, NtStatus> {
    let mut object = std::ptr::null_mut();
    let status = call(None, std::ptr::null_mut(), &raw mut object);
    if status == STATUS_SUCCESS {
        Ok(object)
    } else {
        Err(status)
    }
}

/// Declares the wrapper of one NDK object type: a newtype over the raw
/// pointer, usable from any thread (I6), with its dispatch table, its
/// header and a close that waits for the completion if the close pended.
macro_rules! object {
    ($(#[$doc:meta])* $name:ident($raw:ty) -> $table:ty, $close:ident) => {
        $(#[$doc])*
        pub struct $name(pub *mut $raw);

        // SAFETY: the provider's objects may be used from any thread (I6).
        unsafe impl Send for $name {}
        // SAFETY: as above.
        unsafe impl Sync for $name {}

        impl $name {
            pub fn d(&self) -> &$table {
                table!(self.0)
            }

            pub fn header(&self) -> *mut NdkObjectHeader {
                self.0.cast()
            }

            pub fn close(self) -> NtStatus {
                close_waiting(self.close_slot())
            }

            /// The object's header and its own close slot, for a test that
            /// closes it its own way ([`close_with`], [`close_and_wait`]).
            pub fn close_slot(&self) -> CloseSlot {
                (self.0.cast(), self.d().$close)
            }
        }
    };
}

/// An open adapter.
pub struct Adapter(pub *mut NdkAdapter);

// SAFETY: the provider's objects may be used from any thread (I6).
unsafe impl Send for Adapter {}

// SAFETY: as above.
unsafe impl Sync for Adapter {}

impl Adapter {
    /// Opens the host adapter for `addr` (any port). Tests open adapters
    /// through [`open_adapter`] or a [`Fixture`], which choose the transport.
    pub fn open(addr: Addr) -> Self {
        let mut adapter = std::ptr::null_mut();
        // SAFETY: a valid SOCKADDR and out-pointer.
        let status = unsafe { SoftNdkOpenAdapter(addr.as_ptr(), &raw mut adapter) };
        assert_success!(status, "SoftNdkOpenAdapter({addr:?})");
        assert!(!adapter.is_null());
        Self(adapter)
    }

    /// Opens the host adapter for `addr` on `transport`
    /// (`SoftNdkOpenAdapterEx`: 0 the fabric, 1 iWARP over TCP).
    pub fn open_on(addr: Addr, transport: u32) -> Self {
        let mut adapter = std::ptr::null_mut();
        // SAFETY: a valid SOCKADDR and out-pointer.
        let status = unsafe { SoftNdkOpenAdapterEx(addr.as_ptr(), transport, &raw mut adapter) };
        assert_success!(status, "SoftNdkOpenAdapterEx({addr:?}, {transport})");
        assert!(!adapter.is_null());
        Self(adapter)
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
        assert_success!(status);
        // SAFETY: filled by the successful call.
        unsafe { info.assume_init() }
    }

    /// The adapter's flags (`AdapterFlags` of its info).
    pub fn flags(&self) -> AdapterFlags {
        AdapterFlags::from_bits_retain(self.info().adapter_flags)
    }

    pub fn try_cq(&self, depth: u32, watch: &Arc<Signal>) -> Result<Cq, NtStatus> {
        // SAFETY: the watch outlives the CQ (tests keep it); no affinity.
        let cq = unsafe { cq_with(self, depth, on_status, watch.ctx(), std::ptr::null()) };
        cq.map(|Cq(cq, _)| Cq(cq, Arc::clone(watch)))
    }

    pub fn cq(&self, depth: u32) -> Cq {
        self.try_cq(depth, &Signal::new()).expect("CreateCq")
    }

    pub fn pd(&self) -> Pd {
        // SAFETY: valid arguments.
        let made =
            create(|done, ctx, out| unsafe { (self.d().ndk_create_pd)(self.0, done, ctx, out) });
        Pd(made.expect("CreatePd"))
    }

    pub fn connector(&self) -> Connector {
        // SAFETY: valid arguments.
        let made = create(|done, ctx, out| unsafe {
            (self.d().ndk_create_connector)(self.0, done, ctx, out)
        });
        Connector(made.expect("CreateConnector"))
    }

    pub fn listener(&self, incoming: &Arc<Incoming>) -> Listener {
        // SAFETY: `incoming` outlives the listener (tests keep it).
        unsafe { self.listener_with(on_connect, incoming.ctx()) }
    }

    /// CreateListener with the test's own connect-event callback.
    ///
    /// # Safety
    /// `context` stays valid for `callback` until the listener's close
    /// completes.
    pub unsafe fn listener_with(
        &self,
        callback: NdkFnConnectEventCallback,
        context: *mut c_void,
    ) -> Listener {
        // SAFETY: a live adapter; the caller vouches for the context.
        let made = create(|done, ctx, out| unsafe {
            (self.d().ndk_create_listener)(self.0, Some(callback), context, done, ctx, out)
        });
        Listener(made.expect("CreateListener"))
    }

    pub fn try_shared_endpoint(&self, addr: Addr) -> Result<SharedEndpoint, NtStatus> {
        shared_endpoint_with_length(self, addr, addr.len())
    }

    /// BuildLam over `buffer`; returns (status, LAM bytes, FBO).
    pub fn build_lam(&self, buffer: &mut Buffer) -> (NtStatus, Vec<u64>, u32) {
        let (mdl, len) = (buffer.mdl(), buffer.len);
        let (mut size, mut fbo) = (0_u32, 0_u32);
        let build = |lam: *mut NdkLogicalAddressMapping, size: &mut u32, fbo: &mut u32| {
            // SAFETY: a live adapter and the buffer's MDL; `lam` is null (a
            // size query) or a buffer of `*size` bytes.
            unsafe {
                (self.d().ndk_build_lam)(
                    self.0,
                    mdl,
                    len,
                    None,
                    std::ptr::null_mut(),
                    lam,
                    size,
                    fbo,
                )
            }
        };
        let status = build(std::ptr::null_mut(), &mut size, &mut fbo);
        assert_eq!(status, STATUS_BUFFER_TOO_SMALL, "size query");
        let mut storage = vec![0_u64; (size as usize).div_ceil(8)];
        let status = build(storage.as_mut_ptr().cast(), &mut size, &mut fbo);
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
        assert_success!(status);
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
        // SAFETY: a live CQ; `polled` gives room for `room` results.
        polled(max, 0, |out, room| unsafe {
            (self.d().ndk_get_cq_results)(self.0, out, room)
        })
    }

    pub fn poll_ex(&self, max: usize) -> Vec<NdkResultEx> {
        // SAFETY: as above.
        polled(max, 0, |out, room| unsafe {
            (self.d().ndk_get_cq_results_ex)(self.0, out, room)
        })
    }

    /// Polls until `n` results arrived (the engine may run on a worker).
    pub fn wait_results(&self, n: usize) -> Vec<NdkResult> {
        gathered(n, |more| self.poll(more))
    }

    pub fn resize(&self, depth: u32) -> NtStatus {
        // SAFETY: a live CQ.
        request_outcome(|done, ctx| unsafe { (self.d().ndk_resize_cq)(self.0, depth, done, ctx) })
    }

    /// Closes and waits for the close to complete; returns the close's return value.
    pub fn close(self) -> NtStatus {
        close_waiting(self.close_slot())
    }

    /// The CQ's header and close slot (as the objects' `close_slot`).
    pub fn close_slot(&self) -> CloseSlot {
        (self.0.cast(), self.d().ndk_close_cq)
    }
}

object! {
    Pd(NdkPd) -> NdkPdDispatch, ndk_close_pd
}

impl Pd {
    pub fn privileged_token(&self) -> u32 {
        let mut token = 0;
        // SAFETY: a live PD and an out ULONG.
        unsafe { (self.d().ndk_get_privileged_memory_region_token)(self.0, &raw mut token) };
        token
    }

    pub fn try_mr(&self, fast: bool) -> Result<Mr, NtStatus> {
        // SAFETY: valid arguments.
        create(|done, ctx, out| unsafe {
            (self.d().ndk_create_mr)(self.0, u8::from(fast), done, ctx, out)
        })
        .map(Mr)
    }

    pub fn mr(&self, fast: bool) -> Mr {
        self.try_mr(fast).expect("CreateMr")
    }

    pub fn mw(&self) -> Mw {
        // SAFETY: valid arguments.
        let made =
            create(|done, ctx, out| unsafe { (self.d().ndk_create_mw)(self.0, done, ctx, out) });
        Mw(made.expect("CreateMw"))
    }

    /// CreateQp (receives into a queue of the QP's own) or
    /// CreateQpWithSrq (receives from a shared queue), with explicit
    /// initiator limits.
    #[allow(clippy::too_many_arguments, reason = "mirrors NdkCreateQp")]
    pub fn try_qp(
        &self,
        rcq: &Cq,
        icq: &Cq,
        receives: RecvQueue,
        context: usize,
        idepth: u32,
        isge: u32,
        inline: u32,
    ) -> Result<Qp, NtStatus> {
        let qp_context = context as *mut c_void;
        create(|done, ctx, out| match receives {
            // SAFETY: valid arguments.
            RecvQueue::Own { depth, sge } => unsafe {
                (self.d().ndk_create_qp)(
                    self.0, rcq.0, icq.0, qp_context, depth, idepth, sge, isge, inline, done, ctx,
                    out,
                )
            },
            // SAFETY: as above.
            RecvQueue::Shared(srq) => unsafe {
                (self.d().ndk_create_qp_with_srq)(
                    self.0, rcq.0, icq.0, srq.0, qp_context, idepth, isge, inline, done, ctx, out,
                )
            },
        })
        .map(Qp)
    }

    /// A QP with depth 64, 4 SGEs each way and 256 inline bytes.
    pub fn qp(&self, rcq: &Cq, icq: &Cq, context: usize) -> Qp {
        let receives = RecvQueue::Own { depth: 64, sge: 4 };
        self.try_qp(rcq, icq, receives, context, 64, 4, 256)
            .expect("CreateQp")
    }

    pub fn try_srq(
        &self,
        depth: u32,
        sge: u32,
        threshold: u32,
        watch: Option<&Arc<Signal>>,
    ) -> Result<Srq, NtStatus> {
        let (callback, watch_ctx) = match watch {
            Some(w) => (Some(on_status as NdkFnSrqNotificationCallback), w.ctx()),
            None => (None, std::ptr::null_mut()),
        };
        let no_affinity = std::ptr::null();
        // SAFETY: valid arguments; the watch outlives the SRQ.
        create(|done, ctx, out| unsafe {
            (self.d().ndk_create_srq)(
                self.0,
                depth,
                sge,
                threshold,
                callback,
                watch_ctx,
                no_affinity,
                done,
                ctx,
                out,
            )
        })
        .map(Srq)
    }

    /// Starts the close and returns at once with the close's signal.
    pub fn close_async(self) -> (NtStatus, Arc<Signal>) {
        close_started(self.0.cast(), self.d().ndk_close_pd)
    }
}

/// Where a QP's receives go ([`Pd::try_qp`]): a receive queue of its own
/// with `depth` requests of up to `sge` SGEs each (NdkCreateQp), or a
/// shared receive queue (NdkCreateQpWithSrq, which has no receive limits).
#[derive(Clone, Copy)]
pub enum RecvQueue<'a> {
    Own { depth: u32, sge: u32 },
    Shared(&'a Srq),
}

impl RecvQueue<'_> {
    /// A receive queue of the QP's own, of 4 requests of one SGE each.
    pub const SMALL: Self = Self::Own { depth: 4, sge: 1 };
}

object! {
    Mr(NdkMr) -> NdkMrDispatch, ndk_close_mr
}

impl Mr {
    /// RegisterMr over the whole buffer.
    pub fn register(&self, buffer: &mut Buffer, flags: u32) -> NtStatus {
        // SAFETY: the buffer's MDL describes `len` locked (owned) bytes that
        // outlive the registration (the test keeps the buffer).
        request_outcome(|done, ctx| unsafe {
            (self.d().ndk_register_mr)(self.0, buffer.mdl(), buffer.len, flags, done, ctx)
        })
    }

    pub fn deregister(&self) -> NtStatus {
        if Transport::default() == Transport::Iwarp {
            // As for the close of an MR (`close_waiting`).
            softndk::provider::host::wire_settle();
        }
        // SAFETY: a live MR.
        request_outcome(|done, ctx| unsafe { (self.d().ndk_deregister_mr)(self.0, done, ctx) })
    }

    pub fn init_fast(&self, pages: u32, remote: bool) -> NtStatus {
        // SAFETY: a live MR.
        request_outcome(|done, ctx| unsafe {
            (self.d().ndk_initialize_fast_register_mr)(self.0, pages, u8::from(remote), done, ctx)
        })
    }

    pub fn local_token(&self) -> u32 {
        // SAFETY: a live MR.
        unsafe { (self.d().ndk_get_local_token_from_mr)(self.0) }
    }

    pub fn remote_token(&self) -> u32 {
        // SAFETY: a live MR.
        unsafe { (self.d().ndk_get_remote_token_from_mr)(self.0) }
    }
}

object! {
    Mw(NdkMw) -> NdkMwDispatch, ndk_close_mw
}

impl Mw {
    pub fn remote_token(&self) -> u32 {
        // SAFETY: a live MW.
        unsafe { (self.d().ndk_get_remote_token_from_mw)(self.0) }
    }
}

object! {
    Srq(NdkSrq) -> NdkSrqDispatch, ndk_close_srq
}

impl Srq {
    pub fn receive(&self, context: usize, sges: &[NdkSge]) -> NtStatus {
        let (sges, count) = c_array(sges);
        // SAFETY: a live SRQ and an SGE array.
        unsafe { (self.d().ndk_srq_receive)(self.0, c_context(context), sges, count) }
    }

    pub fn modify(&self, depth: u32, threshold: u32) -> NtStatus {
        // SAFETY: a live SRQ.
        request_outcome(|done, ctx| unsafe {
            (self.d().ndk_modify_srq)(self.0, depth, threshold, done, ctx)
        })
    }
}

object! {
    Qp(NdkQp) -> NdkQpDispatch, ndk_close_qp
}

/// Write and Read share one C signature: each is one line of
/// [`Qp::rdma`] with its dispatch slot.
macro_rules! rdma_posts {
    ($($(#[$doc:meta])* $name:ident => $slot:ident,)*) => {$(
        $(#[$doc])*
        pub fn $name(
            &self,
            context: usize,
            sges: &[NdkSge],
            remote: u64,
            token: u32,
            flags: u32,
        ) -> NtStatus {
            self.rdma(self.d().$slot, context, sges, (remote, token), flags)
        }
    )*};
}

impl Qp {
    pub fn send(&self, context: usize, sges: &[NdkSge], flags: u32) -> NtStatus {
        let (sges, count) = c_array(sges);
        // SAFETY: a live QP and an SGE array valid for the call.
        unsafe { (self.d().ndk_send)(self.0, c_context(context), sges, count, flags) }
    }

    pub fn send_and_invalidate(
        &self,
        context: usize,
        sges: &[NdkSge],
        flags: u32,
        token: u32,
    ) -> NtStatus {
        let (sges, count) = c_array(sges);
        let slot = self.d().ndk_send_and_invalidate;
        // SAFETY: as above.
        unsafe { slot(self.0, c_context(context), sges, count, flags, token) }
    }

    pub fn receive(&self, context: usize, sges: &[NdkSge]) -> NtStatus {
        let (sges, count) = c_array(sges);
        // SAFETY: as above.
        unsafe { (self.d().ndk_receive)(self.0, c_context(context), sges, count) }
    }

    rdma_posts! {
        /// Posts an RDMA Write of `sges` to `remote` under `token`.
        write => ndk_write,
        /// Posts an RDMA Read into `sges` from `remote` under `token`.
        read => ndk_read,
    }

    /// A Write or a Read (the slots share one signature).
    fn rdma(
        &self,
        slot: NdkFnRead,
        context: usize,
        sges: &[NdkSge],
        (remote, token): (u64, u32),
        flags: u32,
    ) -> NtStatus {
        let (sges, count) = c_array(sges);
        // SAFETY: a live QP and an SGE array valid for the call.
        unsafe {
            slot(
                self.0,
                c_context(context),
                sges,
                count,
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
        let (context, va) = (c_context(context), va as *mut c_void);
        // SAFETY: live objects.
        unsafe { (self.d().ndk_bind)(self.0, context, mr.0, mw.0, va, len, flags) }
    }

    /// A Bind that has taken effect: posts it and waits for its successful
    /// completion on `cq` (this QP's initiator CQ), read by a dirty
    /// `NDK_RESULT_EX` poll (`poll_ex_dirty`) and returned. The engine may
    /// run a Bind on a worker, so a window is bound only once its Bind
    /// completed; only then may the peer name it (a SendAndInvalidate, an
    /// access under its token).
    pub fn bound(
        &self,
        cq: &Cq,
        context: usize,
        (mr, mw, va, len): (&Mr, &Mw, u64, usize),
        flags: u32,
    ) -> NdkResultEx {
        assert_success!(self.bind(context, mr, mw, va, len, flags), "Bind {context}");
        let done = gathered(1, |missing| poll_ex_dirty(cq, missing))[0];
        let bind = (context, STATUS_SUCCESS, NdkOperationType::BIND);
        assert_eq!(summary_ex(&[done]), [bind], "the Bind's completion");
        done
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
        let (pages, count) = c_array(pages);
        // SAFETY: live objects and a page array valid for the call.
        unsafe {
            (self.d().ndk_fast_register)(
                self.0,
                c_context(context),
                mr.0,
                count,
                pages.cast(),
                fbo,
                len,
                base as *mut c_void,
                flags,
            )
        }
    }

    pub fn invalidate(&self, context: usize, target: *mut NdkObjectHeader, flags: u32) -> NtStatus {
        // SAFETY: a live QP and target.
        unsafe { (self.d().ndk_invalidate)(self.0, c_context(context), target, flags) }
    }

    pub fn flush(&self) {
        // SAFETY: a live QP.
        unsafe { (self.d().ndk_flush)(self.0) };
    }
}

/// Where a connect starts from ([`Connector::connect_from`]): a local
/// address with the length to give (NdkConnect), or a shared endpoint
/// (NdkConnectWithSharedEndpoint).
#[derive(Clone, Copy)]
pub enum Source<'a> {
    Addr(Addr, u32),
    Endpoint(&'a SharedEndpoint),
}

object! {
    Connector(NdkConnector) -> NdkConnectorDispatch, ndk_close_connector
}

impl Connector {
    /// NdkConnect from `src`: the call's return value and completion signal.
    pub fn connect(
        &self,
        qp: &Qp,
        src: Addr,
        dst: Addr,
        ird: u32,
        ord: u32,
        data: &[u8],
    ) -> (NtStatus, Arc<Signal>) {
        let from = Source::Addr(src, src.len());
        self.connect_from(qp, from, (dst, dst.len()), (ird, ord), data)
    }

    /// NdkConnect from a local address, or NdkConnectWithSharedEndpoint
    /// (`from`), to `dst` with the length given (at most 28) and read
    /// limits `(ird, ord)`: the call's return value and completion signal.
    pub fn connect_from(
        &self,
        qp: &Qp,
        from: Source,
        (dst, dst_len): (Addr, u32),
        (ird, ord): (u32, u32),
        data: &[u8],
    ) -> (NtStatus, Arc<Signal>) {
        let (data, data_len) = c_array(data);
        let data = data.cast();
        let (dst, dst_len) = (dst.as_ptr(), dst_len.min(28));
        requested(|done, ctx| match from {
            // SAFETY: live objects; both addresses are 28-byte buffers, at
            // least the lengths given; data valid for the call.
            Source::Addr(src, src_len) => unsafe {
                (self.d().ndk_connect)(
                    self.0,
                    qp.0,
                    src.as_ptr(),
                    src_len.min(28),
                    dst,
                    dst_len,
                    ird,
                    ord,
                    data,
                    data_len,
                    done,
                    ctx,
                )
            },
            // SAFETY: live objects; the address and data valid for the call.
            Source::Endpoint(endpoint) => unsafe {
                (self.d().ndk_connect_with_shared_endpoint)(
                    self.0, qp.0, endpoint.0, dst, dst_len, ird, ord, data, data_len, done, ctx,
                )
            },
        })
    }

    pub fn complete_connect(&self, disconnects: &Arc<Signal>) -> NtStatus {
        let (status, signal) = complete_connect_with(self, Some(on_disconnect), disconnects.ctx());
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
        let event = (
            Some(on_disconnect as NdkFnDisconnectEventCallback),
            disconnects.ctx(),
        );
        accept_with(self, qp, (ird, ord), data, event)
    }

    pub fn reject(&self, data: &[u8]) -> NtStatus {
        let (data, len) = c_array(data);
        // SAFETY: a live connector; data valid for the call.
        unsafe { (self.d().ndk_reject)(self.0, data.cast(), len) }
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
        // SAFETY: a live connector and a buffer of `len` bytes.
        queried_address(|addr, len| unsafe { (self.d().ndk_get_local_address)(self.0, addr, len) })
    }

    pub fn peer_address(&self) -> (NtStatus, Addr, u32) {
        // SAFETY: as above.
        queried_address(|addr, len| unsafe { (self.d().ndk_get_peer_address)(self.0, addr, len) })
    }

    pub fn disconnect(&self) -> (NtStatus, Arc<Signal>) {
        // SAFETY: a live connector.
        requested(|done, ctx| unsafe { (self.d().ndk_disconnect)(self.0, done, ctx) })
    }
}

/// Calls an address getter with a 28-byte buffer: its status, the address
/// and the length it reported.
fn queried_address(
    call: impl FnOnce(*mut SockAddr, *mut u32) -> NtStatus,
) -> (NtStatus, Addr, u32) {
    let mut addr = Addr::empty();
    let mut len = 28_u32;
    let status = call(addr.as_mut_ptr(), &raw mut len);
    (status, addr, len)
}

object! {
    Listener(NdkListener) -> NdkListenerDispatch, ndk_close_listener
}

impl Listener {
    pub fn listen(&self, addr: Addr) -> NtStatus {
        listen_with_length(self, addr, addr.len())
    }

    pub fn local_address(&self) -> (NtStatus, Addr, u32) {
        // SAFETY: a live listener and a buffer of `len` bytes.
        queried_address(|addr, len| unsafe { (self.d().ndk_get_local_address)(self.0, addr, len) })
    }

    pub fn pause(&self, pause: bool) {
        // SAFETY: a live listener.
        unsafe { (self.d().ndk_control_connect_events)(self.0, u8::from(pause)) };
    }

    pub fn close_async(self) -> (NtStatus, Arc<Signal>) {
        close_started(self.0.cast(), self.d().ndk_close_listener)
    }
}

object! {
    SharedEndpoint(NdkSharedEndpoint) -> NdkSharedEndpointDispatch, ndk_close_shared_endpoint
}

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

pub const MR_REMOTE: u32 = MrFlags::ALLOW_REMOTE_READ.bits() | MrFlags::ALLOW_REMOTE_WRITE.bits();

/// A buffer and the MR that registers all of it.
pub struct Region {
    pub buffer: Buffer,
    pub mr: Mr,
}

impl Region {
    /// `len` bytes (page-aligned start) filled with `fill`, registered on
    /// `pd` with `NDK_MR_FLAG_*` `flags`.
    pub fn new(pd: &Pd, len: usize, fill: u8, flags: u32) -> Self {
        Self::of(pd, Buffer::new(len, 0, fill), flags)
    }

    /// As [`Region::new`], with every access right ([`MR_ALL`]).
    pub fn all(pd: &Pd, len: usize, fill: u8) -> Self {
        Self::new(pd, len, fill, MR_ALL)
    }

    /// As [`Region::new`], filled with [`Buffer::pattern`] of `seed`.
    pub fn pattern(pd: &Pd, len: usize, seed: u8, flags: u32) -> Self {
        Self::of(pd, Buffer::pattern(len, 0, seed), flags)
    }

    /// `buffer` (as the test made it), registered on `pd` with
    /// `NDK_MR_FLAG_*` `flags`.
    pub fn of(pd: &Pd, mut buffer: Buffer, flags: u32) -> Self {
        let mr = pd.mr(false);
        assert_success!(mr.register(&mut buffer, flags), "RegisterMr");
        Self { buffer, mr }
    }

    /// A local SGE over `len` bytes at `offset`.
    pub fn sge(&self, offset: usize, len: usize) -> NdkSge {
        self.buffer
            .sge(offset, u32::try_from(len).unwrap(), self.mr.local_token())
    }

    /// A local SGE over `len` bytes at `offset` naming a token this MR
    /// never issued: a request that gathers from it fails at its own
    /// initiator (a local protection error), on any transport.
    pub fn bad_sge(&self, offset: usize, len: usize) -> NdkSge {
        let mut sge = self.sge(offset, len);
        sge.memory_region_token ^= 0x00FF_FF00;
        sge
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

/// The SGE of `bytes` as an INLINE request carries them: their address in
/// this process and no memory token (the provider copies them during the
/// post, I5).
pub fn inline_sge(bytes: &[u8]) -> NdkSge {
    NdkSge {
        address: bytes.as_ptr() as u64,
        length: u32::try_from(bytes.len()).unwrap(),
        memory_region_token: 0,
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

/// [`assert_close`] for each of several closes (made in order).
pub fn assert_closed<const N: usize>(statuses: [NtStatus; N]) {
    for status in statuses {
        assert_close(status);
    }
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
    // SAFETY: a live adapter; the caller vouches for context and affinity.
    create(|done, ctx, out| unsafe {
        (adapter.d().ndk_create_cq)(
            adapter.0,
            depth,
            Some(callback),
            context,
            affinity,
            done,
            ctx,
            out,
        )
    })
    .map(|cq| Cq(cq, Signal::new()))
}

/// Starts the close of a QP the test keeps the wrapper of (it must not
/// close it again): the close's return value and completion signal.
pub fn close_qp_async(qp: &Qp) -> (NtStatus, Arc<Signal>) {
    close_started(qp.0.cast(), qp.d().ndk_close_qp)
}

/// As [`close_qp_async`], for a connector.
pub fn close_connector_async(connector: &Connector) -> (NtStatus, Arc<Signal>) {
    close_started(connector.0.cast(), connector.d().ndk_close_connector)
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
    pub fn new(adapter: &Adapter, pd: &Pd, len: usize, fill: u8, pages: u32, remote: bool) -> Self {
        let mut buffer = Buffer::new(len, 0, fill);
        let (status, lam, fbo) = adapter.build_lam(&mut buffer);
        assert_success!(status, "BuildLam");
        let page_list = lam_pages(&lam);
        let mr = pd.mr(true);
        assert_success!(mr.init_fast(pages, remote), "InitializeFastRegisterMr");
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

/// L8: the outcome of a call taking a request completion whose completion
/// context is `signal`: when it returned `STATUS_PENDING`, its one
/// completion's status (and no second completion follows); otherwise the
/// return value (and no completion follows).
pub fn settle(returned: NtStatus, signal: &Signal) -> NtStatus {
    if returned == STATUS_PENDING {
        let status = signal.wait();
        std::thread::sleep(SETTLE_BRIEF);
        assert_eq!(signal.count(), 1, "L8: a completion ran more than once");
        status
    } else {
        std::thread::sleep(SETTLE_BRIEF);
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
pub fn close_with((header, close): CloseSlot, log: &Arc<Signal>) -> NtStatus {
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
pub fn close_and_wait(slot: CloseSlot) -> NtStatus {
    let log = Signal::new();
    let status = close_with(slot, &log);
    finish_close_logged(status, &log);
    status
}

/// Waits for the close that returned `status` with completion `log`
/// (only the close completion logs there) and checks L18.
pub fn finish_close_logged(status: NtStatus, log: &Signal) {
    if status == STATUS_PENDING {
        assert_eq!(log.wait(), CLOSED);
    }
    std::thread::sleep(SETTLE_BRIEF);
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

/// CreateCq with `watch` as its notification callback. The returned
/// [`Cq`]'s own signal stays empty.
pub fn watched_cq(adapter: &Adapter, depth: u32, watch: &Arc<Watch>) -> Cq {
    try_watched_cq(adapter, depth, watch).expect("CreateCq")
}

/// As [`watched_cq`], returning the failure status.
pub fn try_watched_cq(adapter: &Adapter, depth: u32, watch: &Arc<Watch>) -> Result<Cq, NtStatus> {
    // SAFETY: the watch outlives the CQ (tests keep it); no affinity.
    unsafe { cq_with(adapter, depth, on_watch, watch.ctx(), std::ptr::null()) }
}

/// Starts the close of a shared endpoint: its return value and signal.
#[allow(
    clippy::needless_pass_by_value,
    reason = "the close consumes the object"
)]
pub fn close_endpoint_async(endpoint: SharedEndpoint) -> (NtStatus, Arc<Signal>) {
    close_started(endpoint.0.cast(), endpoint.d().ndk_close_shared_endpoint)
}

/// Starts the close of a connector: its return value and signal.
#[allow(
    clippy::needless_pass_by_value,
    reason = "the close consumes the object"
)]
pub fn close_connector_owned_async(connector: Connector) -> (NtStatus, Arc<Signal>) {
    close_started(connector.0.cast(), connector.d().ndk_close_connector)
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

/// A page-aligned buffer registered with [`MR_ALL`] (see [`Region::all`]).
pub type Mem = Region;

/// Posts one request of every kind on `qp`, request contexts 1 to 8 in
/// this order: a Send from `mem`, a SendAndInvalidate of `peer_mw_token`,
/// a Write to and a Read from `remote` (address, token), a Bind of `mw`
/// over `mem`, an Invalidate of `mw`, a FastRegister of `frmr` and an
/// Invalidate of it. Each post must be accepted.
pub fn post_one_of_each(
    qp: &Qp,
    (mem, mw, frmr): (&Region, &Mw, &Frmr),
    (remote, token): (u64, u32),
    peer_mw_token: u32,
) {
    let header = mw.header();
    for (context, status) in [
        (1, qp.send(1, &[mem.sge(0, 8)], 0)),
        (
            2,
            qp.send_and_invalidate(2, &[mem.sge(0, 8)], 0, peer_mw_token),
        ),
        (3, qp.write(3, &[mem.sge(0, 8)], remote, token, 0)),
        (4, qp.read(4, &[mem.sge(8, 8)], remote, token, 0)),
        (
            5,
            qp.bind(5, &mem.mr, mw, mem.remote(0), 64, OP_REMOTE_READ),
        ),
        (6, qp.invalidate(6, header, 0)),
        (7, frmr.post(qp, 7, 0)),
        (8, qp.invalidate(8, frmr.mr.header(), 0)),
    ] {
        assert_success!(status, "post {context}");
    }
}
