//! The QP and SRQ tables driven as a C consumer drives them; the fixture
//! is shared with the MR tests.

use core::ffi::c_void;
use core::ptr::{null, null_mut, without_provenance_mut};
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::vec::Vec;

use super::{MAX_INLINE, MAX_SGE, Qp, rnic_qp};
use crate::abi::{
    Mdl, NDK_VERSION_1_2, NdkAdapter, NdkAdapterDispatch, NdkCq, NdkCqDispatch,
    NdkFnCloseCompletion, NdkFnCloseObject, NdkFnRequestCompletion, NdkMr, NdkMrDispatch, NdkMw,
    NdkMwDispatch, NdkObjectHeader, NdkObjectType, NdkOperationType, NdkPd, NdkPdDispatch, NdkQp,
    NdkQpDispatch, NdkResult, NdkResultEx, NdkSge, NdkSrq, NdkSrqDispatch, NtStatus, OpFlags,
    STATUS_ACCESS_VIOLATION, STATUS_BUFFER_OVERFLOW, STATUS_CANCELLED, STATUS_CONNECTION_INVALID,
    STATUS_DATA_OVERRUN, STATUS_IMPLEMENTATION_LIMIT, STATUS_INVALID_PARAMETER,
    STATUS_NOT_SUPPORTED, STATUS_PENDING, STATUS_SUCCESS,
};
use crate::kernel::sync::Arc;
use crate::provider::object::{Object, Slot};
use crate::rnic::device::{Device, EngineMode, ObjectKind};
use crate::rnic::{Limits, qp as rqp};

pub(crate) const PAGE: usize = 0x1000;

// ----- fixture ---------------------------------------------------------

/// The dispatch table of an NDK object: `Dispatch` follows the 0x28-byte
/// header (five pointers, §3.8).
pub(crate) fn table<D, T>(object: *mut T) -> &'static D {
    let slot = object.cast::<*const D>().wrapping_add(5);
    // SAFETY: a live provider object: 8-byte aligned, `Dispatch` at 0x28.
    let dispatch = unsafe { slot.read() };
    // SAFETY: the provider's dispatch tables are statics.
    unsafe { &*dispatch }
}

/// The header of an NDK object.
pub(crate) fn header<T>(object: *mut T) -> NdkObjectHeader {
    // SAFETY: a live provider object starts with its header.
    unsafe { object.cast::<NdkObjectHeader>().read() }
}

/// L2: negotiated version, own type, all-zero reserved block, a table.
pub(crate) fn check_header<T>(object: *mut T, kind: NdkObjectType) {
    let h = header(object);
    assert_eq!(h.version, NDK_VERSION_1_2);
    assert_eq!(h.object_type, kind);
    assert!(h.ndk_reserved.rf.iter().all(|p| p.is_null()));
    let slot = object.cast::<*const c_void>().wrapping_add(5);
    // SAFETY: as in `table`.
    assert!(!unsafe { slot.read() }.is_null());
}

/// What a create slot made: the object, its header checked (L2), or the
/// status it failed with.
pub(crate) fn made<T>(
    status: NtStatus,
    out: *mut T,
    kind: NdkObjectType,
) -> Result<*mut T, NtStatus> {
    if status == STATUS_SUCCESS {
        check_header(out, kind);
        Ok(out)
    } else {
        assert!(out.is_null(), "a failed create hands out nothing");
        Err(status)
    }
}

/// A consumer's callback record: calls, last status, and when (a global
/// sequence, to check ordering).
#[derive(Default)]
pub(crate) struct Counter {
    calls: AtomicUsize,
    status: AtomicI32,
    stamp: AtomicUsize,
}

static SEQUENCE: AtomicUsize = AtomicUsize::new(0);

impl Counter {
    pub(crate) fn ctx(&self) -> *mut c_void {
        core::ptr::from_ref(self).cast_mut().cast()
    }
    pub(crate) fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
    pub(crate) fn status(&self) -> NtStatus {
        self.status.load(Ordering::SeqCst)
    }
    pub(crate) fn stamp(&self) -> usize {
        self.stamp.load(Ordering::SeqCst)
    }
    fn record(&self, status: NtStatus) {
        self.status.store(status, Ordering::SeqCst);
        self.stamp.store(
            SEQUENCE.fetch_add(1, Ordering::SeqCst) + 1,
            Ordering::SeqCst,
        );
        self.calls.fetch_add(1, Ordering::SeqCst);
    }
}

/// A request completion / SRQ notification counting into a [`Counter`].
pub(crate) unsafe extern "system" fn on_request(context: *mut c_void, status: NtStatus) {
    // SAFETY: the tests pass a live `Counter` as context.
    let counter = unsafe { &*context.cast::<Counter>() };
    counter.record(status);
}

/// A close completion counting into a [`Counter`].
pub(crate) unsafe extern "system" fn on_close(context: *mut c_void) {
    // SAFETY: the tests pass a live `Counter` as context.
    let counter = unsafe { &*context.cast::<Counter>() };
    counter.record(STATUS_SUCCESS);
}

/// `NdkCloseObject` through slot 0 of the object's table.
pub(crate) fn close<T>(object: *mut T) -> NtStatus {
    close_with(object, None)
}

/// `NdkCloseObject` with a close completion counting into `counter`.
pub(crate) fn close_with<T>(object: *mut T, counter: Option<&Counter>) -> NtStatus {
    let close: &NdkFnCloseObject = table(object);
    let (callback, context) = match counter {
        Some(c) => (Some(on_close as NdkFnCloseCompletion), c.ctx()),
        None => (None, null_mut()),
    };
    // SAFETY: a live object of the test, closed once.
    unsafe { (*close)(object.cast(), callback, context) }
}

fn ctx(value: usize) -> *mut c_void {
    without_provenance_mut(value)
}

/// A buffer in host memory, `offset` bytes into a page, described by a
/// host-mode MDL (`MdlFlags` 0: the bytes are at `StartVa + ByteOffset`).
pub(crate) struct Buf {
    storage: Vec<u8>,
    start: usize,
    len: usize,
}

impl Buf {
    pub(crate) fn new(len: usize, offset: usize, seed: u8) -> Self {
        let mut storage = std::vec![0_u8; len + offset + 2 * PAGE];
        let start = storage.as_ptr().align_offset(PAGE) + offset;
        for (i, b) in storage[start..start + len].iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(31).wrapping_add(seed);
        }
        Self {
            storage,
            start,
            len,
        }
    }
    pub(crate) fn ptr(&mut self) -> *mut u8 {
        self.storage.as_mut_ptr().wrapping_add(self.start)
    }
    pub(crate) fn addr(&self) -> u64 {
        self.storage.as_ptr().wrapping_add(self.start) as u64
    }
    pub(crate) const fn len(&self) -> usize {
        self.len
    }
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }
    pub(crate) fn mdl(&mut self) -> Mdl {
        let offset = (self.addr() as usize) % PAGE;
        let ptr = self.ptr();
        Mdl {
            next: null_mut(),
            size: 0,
            mdl_flags: 0,
            padding_0c: 0,
            process: null_mut(),
            mapped_system_va: null_mut(),
            start_va: ptr.wrapping_sub(offset).cast(),
            byte_count: u32::try_from(self.len).unwrap(),
            byte_offset: u32::try_from(offset).unwrap(),
        }
    }
}

/// A LAM built through the adapter table.
pub(crate) struct Lam {
    storage: Vec<u64>,
    pub(crate) pages: Vec<i64>,
    pub(crate) fbo: u32,
}

/// One adapter on a fresh device, with a PD and a CQ.
pub(crate) struct Env {
    pub(crate) device: Arc<Device>,
    pub(crate) adapter: *mut NdkAdapter,
    pub(crate) pd: *mut NdkPd,
    pub(crate) cq: *mut NdkCq,
}

impl Env {
    pub(crate) fn new() -> Self {
        Self::with_limits(Limits::DEFAULT)
    }

    /// A new env and its [`pair`](Self::pair).
    pub(crate) fn paired() -> (Self, Pair) {
        let env = Self::new();
        let pair = env.pair();
        (env, pair)
    }

    pub(crate) fn with_limits(limits: Limits) -> Self {
        let device = Device::new(limits, EngineMode::Inline).unwrap();
        #[allow(
            clippy::default_trait_access,
            reason = "the address set's shape belongs to the connection layer"
        )]
        let adapter =
            crate::provider::adapter::open(&device, NDK_VERSION_1_2, Default::default()).unwrap();
        let mut env = Self {
            device,
            adapter,
            pd: null_mut(),
            cq: null_mut(),
        };
        env.pd = env.create_pd();
        env.cq = env.create_cq(256);
        env
    }

    fn adapter_table(&self) -> &'static NdkAdapterDispatch {
        table(self.adapter)
    }

    pub(crate) fn pd_table(&self) -> &'static NdkPdDispatch {
        table(self.pd)
    }

    /// A CQ of `depth` (`testing::new_cq`), its header checked (L2).
    pub(crate) fn create_cq(&self, depth: u32) -> *mut NdkCq {
        let cq = crate::provider::testing::new_cq(self.adapter, depth);
        check_header(cq, NdkObjectType::CQ);
        cq
    }

    /// A PD (`testing::new_pd`), its header checked (L2).
    pub(crate) fn create_pd(&self) -> *mut NdkPd {
        let pd = crate::provider::testing::new_pd(self.adapter);
        check_header(pd, NdkObjectType::PD);
        pd
    }

    pub(crate) fn create_mr(&self, fast: bool) -> *mut NdkMr {
        let mut out = null_mut();
        let create = self.pd_table().ndk_create_mr;
        // SAFETY: the PD is open; valid out-pointer.
        let status = unsafe { create(self.pd, u8::from(fast), None, null_mut(), &raw mut out) };
        assert_eq!(status, STATUS_SUCCESS);
        check_header(out, NdkObjectType::MR);
        out
    }

    /// A (non-fast) MR of the PD, registered over `buf` with `flags`.
    pub(crate) fn registered_mr(&self, buf: &mut Buf, flags: u32) -> *mut NdkMr {
        let mr = self.create_mr(false);
        assert_eq!(register(mr, buf, flags), STATUS_SUCCESS);
        mr
    }

    pub(crate) fn create_mw(&self) -> *mut NdkMw {
        let mut out = null_mut();
        let create = self.pd_table().ndk_create_mw;
        // SAFETY: the PD is open; valid out-pointer.
        let status = unsafe { create(self.pd, None, null_mut(), &raw mut out) };
        assert_eq!(status, STATUS_SUCCESS);
        check_header(out, NdkObjectType::MW);
        out
    }

    /// `NdkCreateQp` with the given depths, SGE counts and inline size.
    pub(crate) fn try_create_qp(
        &self,
        cq: *mut NdkCq,
        context: usize,
        [
            receive_depth,
            initiator_depth,
            receive_sge,
            initiator_sge,
            inline,
        ]: [u32; 5],
    ) -> Result<*mut NdkQp, NtStatus> {
        let mut out = null_mut();
        let create = self.pd_table().ndk_create_qp;
        let (depths, sges) = (
            (receive_depth, initiator_depth),
            (receive_sge, initiator_sge),
        );
        let (context, completion, at) = (ctx(context), (None, null_mut()), &raw mut out);
        // SAFETY: the PD and CQ are the test's; valid out-pointer.
        let status = unsafe {
            let (d, s) = (depths, sges);
            create(
                self.pd,
                cq,
                cq,
                context,
                d.0,
                d.1,
                s.0,
                s.1,
                inline,
                completion.0,
                completion.1,
                at,
            )
        };
        made(status, out, NdkObjectType::QP)
    }

    /// A QP with depth 16, 4 SGEs each way, 64 inline bytes.
    pub(crate) fn create_qp(&self, cq: *mut NdkCq, context: usize) -> *mut NdkQp {
        self.try_create_qp(cq, context, [16, 16, 4, 4, 64]).unwrap()
    }

    pub(crate) fn try_create_qp_with_srq(
        &self,
        cq: *mut NdkCq,
        srq: *mut NdkSrq,
        context: usize,
    ) -> Result<*mut NdkQp, NtStatus> {
        let mut out = null_mut();
        let create = self.pd_table().ndk_create_qp_with_srq;
        // Initiator depth 16, 4 SGEs, 64 inline bytes.
        let (pd, cx, at, (d, s, i)) = (self.pd, ctx(context), &raw mut out, (16, 4, 64));
        // SAFETY: the PD, CQ and SRQ are the test's; valid out-pointer.
        let status = unsafe { create(pd, cq, cq, srq, cx, d, s, i, None, null_mut(), at) };
        made(status, out, NdkObjectType::QP)
    }

    pub(crate) fn try_create_srq(
        &self,
        depth: u32,
        max_sge: u32,
        threshold: u32,
        notify: Option<&Counter>,
    ) -> Result<*mut NdkSrq, NtStatus> {
        let mut out = null_mut();
        let create = self.pd_table().ndk_create_srq;
        let (callback, context) = match notify {
            Some(c) => (Some(on_request as NdkFnRequestCompletion), c.ctx()),
            None => (None, null_mut()),
        };
        let (pd, d, s, t, at) = (self.pd, depth, max_sge, threshold, &raw mut out);
        // SAFETY: the PD is open; valid out-pointer.
        let status =
            unsafe { create(pd, d, s, t, callback, context, null(), None, null_mut(), at) };
        made(status, out, NdkObjectType::SRQ)
    }

    /// One of each object a QP slot takes: an MR registered over `buf` with
    /// `flags`, a fast-register MR initialized for 4 pages, a window and an
    /// idle QP (context 7) on the env's CQ.
    pub(crate) fn one_of_each(
        &self,
        buf: &mut Buf,
        flags: u32,
    ) -> (*mut NdkMr, *mut NdkMr, *mut NdkMw, *mut NdkQp) {
        let mr = self.registered_mr(buf, flags);
        let fast = self.create_mr(true);
        assert_eq!(init_fast(fast, 4, true), STATUS_SUCCESS);
        (mr, fast, self.create_mw(), self.create_qp(self.cq, 7))
    }

    /// Two connected QPs: A on the env's CQ, B on a CQ of its own.
    pub(crate) fn pair(&self) -> Pair {
        let cq_b = self.create_cq(256);
        let a = self.create_qp(self.cq, 0xA);
        let b = self.create_qp(cq_b, 0xB);
        connect(a, b);
        Pair {
            a,
            b,
            cq_a: self.cq,
            cq_b,
        }
    }

    pub(crate) fn build_lam(&self, buf: &mut Buf) -> Lam {
        let mut mdl = buf.mdl();
        self.build_lam_mdl(&raw mut mdl, buf.len())
    }

    /// BuildLam over `len` bytes of the chain at `mdl`.
    pub(crate) fn build_lam_mdl(&self, mdl: *mut Mdl, len: usize) -> Lam {
        let mut storage = std::vec![0_u64; 4 + len / PAGE];
        let mut size = u32::try_from(storage.len() * 8).unwrap();
        let mut fbo = 0_u32;
        let build = self.adapter_table().ndk_build_lam;
        // SAFETY: the adapter is open; the MDL chain (valid, over the
        // test's memory), LAM buffer (of `size` bytes) and out-pointers are
        // valid.
        let status = unsafe {
            build(
                self.adapter,
                mdl,
                len,
                None,
                null_mut(),
                storage.as_mut_ptr().cast(),
                &raw mut size,
                &raw mut fbo,
            )
        };
        assert_eq!(status, STATUS_SUCCESS);
        // `AdapterPageCount` is the low half of the second word.
        let count = (storage[1] & 0xFFFF_FFFF) as usize;
        let pages = storage[2..2 + count]
            .iter()
            .map(|p| p.cast_signed())
            .collect();
        Lam {
            storage,
            pages,
            fbo,
        }
    }

    pub(crate) fn release_lam(&self, mut lam: Lam) {
        let release = self.adapter_table().ndk_release_lam;
        // SAFETY: a LAM this adapter built, released once.
        unsafe { release(self.adapter, lam.storage.as_mut_ptr().cast()) };
    }

    /// Closes `objects` (each at once), then tears down.
    pub(crate) fn teardown_with(self, objects: &[*mut c_void]) {
        for &object in objects {
            assert_eq!(close(object), STATUS_SUCCESS);
        }
        self.teardown();
    }

    /// Closes `pair`, then `mrs`, then tears down.
    pub(crate) fn finish(self, pair: Pair, mrs: &[*mut NdkMr]) {
        self.finish_releasing(pair, mrs, None);
    }

    /// Closes `pair`, then `mrs`, releases `lam` (if any), then tears down.
    pub(crate) fn finish_releasing(self, pair: Pair, mrs: &[*mut NdkMr], lam: Option<Lam>) {
        pair.close();
        for &mr in mrs {
            assert_eq!(close(mr), STATUS_SUCCESS);
        }
        if let Some(lam) = lam {
            self.release_lam(lam);
        }
        self.teardown();
    }

    /// Closes the PD, the CQ and the adapter, and checks that nothing
    /// leaked (objects, tokens, LAMs).
    pub(crate) fn teardown(self) {
        assert_eq!(close(self.pd), STATUS_SUCCESS);
        assert_eq!(close(self.cq), STATUS_SUCCESS);
        self.close_adapter();
    }

    /// With the PD and the CQ closed: checks that nothing leaked (objects,
    /// tokens, LAMs), then closes the adapter.
    pub(crate) fn close_adapter(self) {
        for kind in [
            ObjectKind::Pd,
            ObjectKind::Cq,
            ObjectKind::Qp,
            ObjectKind::Srq,
            ObjectKind::Mr,
            ObjectKind::Mw,
        ] {
            assert_eq!(self.device.live(kind), 0, "{kind:?} leaked");
        }
        assert_eq!(self.device.live_keys(), 0);
        assert_eq!(self.device.live_lams(), 0);
        // SAFETY: the adapter from `open`, not used afterwards (L27).
        let _ = unsafe {
            crate::provider::adapter::close(self.adapter, &crate::provider::object::Slot("close"))
        };
    }
}

/// Two connected QPs and their CQs.
pub(crate) struct Pair {
    pub(crate) a: *mut NdkQp,
    pub(crate) b: *mut NdkQp,
    pub(crate) cq_a: *mut NdkCq,
    pub(crate) cq_b: *mut NdkCq,
}

impl Pair {
    pub(crate) fn close(self) {
        assert_eq!(close(self.a), STATUS_SUCCESS);
        assert_eq!(close(self.b), STATUS_SUCCESS);
        assert_eq!(close(self.cq_b), STATUS_SUCCESS);
    }
}

/// Connects two idle QPs directly on the RNIC (no connection manager).
pub(crate) fn connect(a: *mut NdkQp, b: *mut NdkQp) {
    // SAFETY: live QPs of the test.
    let a = unsafe { Object::<Qp>::from_ptr(a.cast(), &Slot("test")) }.unwrap();
    // SAFETY: as above.
    let b = unsafe { Object::<Qp>::from_ptr(b.cast(), &Slot("test")) }.unwrap();
    rqp::connect(rnic_qp(&a), rnic_qp(&b), (1, 1), (1, 1)).unwrap();
}

/// Every completion in the CQ, through `NdkGetCqResultsEx`.
pub(crate) fn poll(cq: *mut NdkCq) -> Vec<NdkResultEx> {
    let get = table::<NdkCqDispatch, _>(cq).ndk_get_cq_results_ex;
    let empty = NdkResultEx {
        status: -1,
        bytes_transferred: 0,
        qp_context: null_mut(),
        request_context: null_mut(),
        type_: NdkOperationType(0),
        provider_error_code: 0,
        type_specific_completion_output: 0,
    };
    let mut out = Vec::new();
    loop {
        let mut batch = [empty; 8];
        // SAFETY: a live CQ; room for 8 results.
        let n = unsafe { get(cq, batch.as_mut_ptr(), 8) } as usize;
        out.extend_from_slice(&batch[..n]);
        if n < 8 {
            return out;
        }
    }
}

/// Every completion in the CQ, through `NdkGetCqResults`.
pub(crate) fn poll_plain(cq: *mut NdkCq) -> Vec<NdkResult> {
    let get = table::<NdkCqDispatch, _>(cq).ndk_get_cq_results;
    let mut batch = [NdkResult {
        status: -1,
        bytes_transferred: 0,
        qp_context: null_mut(),
        request_context: null_mut(),
    }; 8];
    // SAFETY: a live CQ; room for 8 results.
    let n = unsafe { get(cq, batch.as_mut_ptr(), 8) } as usize;
    batch[..n].to_vec()
}

/// The (status, type, request context) of each completion.
pub(crate) fn summary(results: &[NdkResultEx]) -> Vec<(NtStatus, NdkOperationType, usize)> {
    results
        .iter()
        .map(|r| (r.status, r.type_, r.request_context as usize))
        .collect()
}

// ----- slot wrappers -----------------------------------------------------

pub(crate) fn register(mr: *mut NdkMr, buf: &mut Buf, flags: u32) -> NtStatus {
    let mut mdl = buf.mdl();
    let register = table::<NdkMrDispatch, _>(mr).ndk_register_mr;
    // SAFETY: a live MR; a valid MDL over the test's buffer, which
    // outlives the registration.
    unsafe { register(mr, &raw mut mdl, buf.len(), flags, None, null_mut()) }
}

pub(crate) fn local_token(mr: *mut NdkMr) -> u32 {
    let get = table::<NdkMrDispatch, _>(mr).ndk_get_local_token_from_mr;
    // SAFETY: a live MR.
    unsafe { get(mr) }
}

pub(crate) fn remote_token(mr: *mut NdkMr) -> u32 {
    let get = table::<NdkMrDispatch, _>(mr).ndk_get_remote_token_from_mr;
    // SAFETY: a live MR.
    unsafe { get(mr) }
}

pub(crate) fn mw_token(mw: *mut NdkMw) -> u32 {
    let get = table::<NdkMwDispatch, _>(mw).ndk_get_remote_token_from_mw;
    // SAFETY: a live MW.
    unsafe { get(mw) }
}

pub(crate) fn init_fast(mr: *mut NdkMr, pages: u32, remote: bool) -> NtStatus {
    let init = table::<NdkMrDispatch, _>(mr).ndk_initialize_fast_register_mr;
    // SAFETY: a live MR.
    unsafe { init(mr, pages, u8::from(remote), None, null_mut()) }
}

/// An SGE as the consumer writes it: `length` bytes at `address`, `token`.
pub(crate) const fn raw_sge(address: u64, length: u32, token: u32) -> NdkSge {
    NdkSge {
        address,
        length,
        memory_region_token: token,
    }
}

/// An SGE over `len` bytes at `offset` of `buf`, registered in `mr`.
pub(crate) fn sge(buf: &Buf, mr: *mut NdkMr, offset: u64, len: u32) -> NdkSge {
    raw_sge(buf.addr() + offset, len, local_token(mr))
}

fn count(sges: &[NdkSge]) -> u32 {
    u32::try_from(sges.len()).unwrap()
}

pub(crate) fn send(qp: *mut NdkQp, context: usize, sges: &[NdkSge], flags: u32) -> NtStatus {
    let send = table::<NdkQpDispatch, _>(qp).ndk_send;
    // SAFETY: a live QP; the SGL (and inline buffers) live during the call.
    unsafe { send(qp, ctx(context), sges.as_ptr(), count(sges), flags) }
}

pub(crate) fn send_and_invalidate(
    qp: *mut NdkQp,
    context: usize,
    sges: &[NdkSge],
    flags: u32,
    token: u32,
) -> NtStatus {
    let send = table::<NdkQpDispatch, _>(qp).ndk_send_and_invalidate;
    // SAFETY: as in `send`.
    unsafe { send(qp, ctx(context), sges.as_ptr(), count(sges), flags, token) }
}

pub(crate) fn receive(qp: *mut NdkQp, context: usize, sges: &[NdkSge]) -> NtStatus {
    let receive = table::<NdkQpDispatch, _>(qp).ndk_receive;
    // SAFETY: a live QP; the SGL lives during the call.
    unsafe { receive(qp, ctx(context), sges.as_ptr(), count(sges)) }
}

/// The remote buffer of a Write or Read: address and token.
pub(crate) type Remote = (u64, u32);

pub(crate) fn write(qp: *mut NdkQp, context: usize, sg: &[NdkSge], at: Remote, f: u32) -> NtStatus {
    let slot = table::<NdkQpDispatch, _>(qp).ndk_write;
    rdma(slot, qp, context, sg, at, f)
}

pub(crate) fn read(qp: *mut NdkQp, context: usize, sg: &[NdkSge], at: Remote, f: u32) -> NtStatus {
    let slot = table::<NdkQpDispatch, _>(qp).ndk_read;
    rdma(slot, qp, context, sg, at, f)
}

/// A Write or Read through `slot` (the two share their C signature).
fn rdma(
    slot: crate::abi::NdkFnWrite,
    qp: *mut NdkQp,
    context: usize,
    sges: &[NdkSge],
    (address, token): Remote,
    flags: u32,
) -> NtStatus {
    let (sgl, n) = (sges.as_ptr(), count(sges));
    // SAFETY: a live QP; the SGL lives during the call.
    unsafe { slot(qp, ctx(context), sgl, n, address, token, flags) }
}

pub(crate) fn bind(
    qp: *mut NdkQp,
    context: usize,
    (mr, mw): (*mut NdkMr, *mut NdkMw),
    address: u64,
    len: usize,
    flags: u32,
) -> NtStatus {
    let bind = table::<NdkQpDispatch, _>(qp).ndk_bind;
    let va = without_provenance_mut(usize::try_from(address).unwrap());
    // SAFETY: a live QP, MR and MW (or pointers the provider must refuse).
    unsafe { bind(qp, ctx(context), mr, mw, va, len, flags) }
}

pub(crate) fn fast_register(
    qp: *mut NdkQp,
    context: usize,
    mr: *mut NdkMr,
    lam: &Lam,
    (len, base): (usize, u64),
    flags: u32,
) -> NtStatus {
    let fast_register = table::<NdkQpDispatch, _>(qp).ndk_fast_register;
    let base = without_provenance_mut(usize::try_from(base).unwrap());
    // SAFETY: a live QP and MR; the page array lives during the call.
    unsafe {
        fast_register(
            qp,
            ctx(context),
            mr,
            u32::try_from(lam.pages.len()).unwrap(),
            lam.pages.as_ptr(),
            lam.fbo,
            len,
            base,
            flags,
        )
    }
}

pub(crate) fn invalidate<T>(
    qp: *mut NdkQp,
    context: usize,
    target: *mut T,
    flags: u32,
) -> NtStatus {
    let invalidate = table::<NdkQpDispatch, _>(qp).ndk_invalidate;
    // SAFETY: a live QP; the target is a live object of the test.
    unsafe { invalidate(qp, ctx(context), target.cast(), flags) }
}

pub(crate) fn flush(qp: *mut NdkQp) {
    let flush = table::<NdkQpDispatch, _>(qp).ndk_flush;
    // SAFETY: a live QP.
    unsafe { flush(qp) };
}

fn query_extension<T>(object: *mut T) -> NtStatus {
    // Slot 1 of every table but the adapter's.
    let tables: &[crate::abi::NdkFnQueryExtensionInterface; 2] =
        table::<[crate::abi::NdkFnQueryExtensionInterface; 2], _>(object);
    let guid = crate::abi::Guid::default();
    let mut interface = core::mem::MaybeUninit::<crate::abi::NdkExtensionInterface>::zeroed();
    // SAFETY: a live object; a valid GUID and out-buffer.
    unsafe {
        (tables[1])(
            object.cast(),
            &raw const guid,
            NDK_VERSION_1_2,
            interface.as_mut_ptr(),
        )
    }
}

fn srq_receive(srq: *mut NdkSrq, context: usize, sges: &[NdkSge]) -> NtStatus {
    let receive = table::<NdkSrqDispatch, _>(srq).ndk_srq_receive;
    // SAFETY: a live SRQ; the SGL lives during the call.
    unsafe { receive(srq, ctx(context), sges.as_ptr(), count(sges)) }
}

fn modify_srq(srq: *mut NdkSrq, depth: u32, threshold: u32) -> NtStatus {
    let modify = table::<NdkSrqDispatch, _>(srq).ndk_modify_srq;
    // SAFETY: a live SRQ.
    unsafe { modify(srq, depth, threshold, None, null_mut()) }
}

// ----- tests -------------------------------------------------------------

/// One posting call with its flags.
type Post<'a> = &'a dyn Fn(u32) -> NtStatus;

const LOCAL_WRITE: u32 = 0x1;
const REMOTE_READ: u32 = 0x2;
const REMOTE_WRITE: u32 = 0x5;

/// rules L1, L2, L29, P7, P8, E1: every slot of the QP, MW and SRQ
/// tables answers, on objects with correct headers.
/// L9 with the emergency reserve (`kernel::reserve`): while memory is low
/// every create is refused inline with `STATUS_INSUFFICIENT_RESOURCES`
/// before it allocates, its out-pointer untouched and nothing left open;
/// once memory is no longer low the same creates succeed.
#[test]
fn creates_are_refused_while_memory_is_low_rule_l9() {
    let env = Env::new();
    let adapter = env.adapter_table();
    crate::kernel::pool::simulate_low(true);
    let mut pd = without_provenance_mut(0x5A);
    // SAFETY: a live adapter; the out-pointer is ours.
    let status = unsafe { (adapter.ndk_create_pd)(env.adapter, None, null_mut(), &raw mut pd) };
    let mut mr = without_provenance_mut(0x5A);
    // SAFETY: a live PD; the out-pointer is ours.
    let mr_status =
        unsafe { (env.pd_table().ndk_create_mr)(env.pd, 0, None, null_mut(), &raw mut mr) };
    crate::kernel::pool::simulate_low(false);
    assert_eq!(
        status,
        crate::abi::STATUS_INSUFFICIENT_RESOURCES,
        "a PD while low"
    );
    assert_eq!(
        mr_status,
        crate::abi::STATUS_INSUFFICIENT_RESOURCES,
        "an MR while low"
    );
    assert_eq!(
        (pd.addr(), mr.addr()),
        (0x5A, 0x5A),
        "the out-pointers untouched"
    );
    // No longer low: the same create succeeds.
    let pd = env.create_pd();
    assert_eq!(close(pd), STATUS_SUCCESS);
}

/// L7 with L24: a PD create given a null out-pointer is refused before
/// anything is made, so nothing is left holding the PD open and its close
/// completes at once (an MR made and then refused would keep it pending).
#[test]
fn a_pd_create_with_a_null_out_pointer_makes_nothing() {
    let env = Env::new();
    let table = env.pd_table();
    // SAFETY: the PD is open; the null out-pointer is the case under test.
    let mr = unsafe { (table.ndk_create_mr)(env.pd, 0, None, null_mut(), null_mut()) };
    assert_eq!(mr, STATUS_INVALID_PARAMETER);
    // SAFETY: as above.
    let mw = unsafe { (table.ndk_create_mw)(env.pd, None, null_mut(), null_mut()) };
    assert_eq!(mw, STATUS_INVALID_PARAMETER);
    let srq = {
        let create = table.ndk_create_srq;
        // SAFETY: as above.
        unsafe {
            create(
                env.pd,
                8,
                1,
                0,
                None,
                null_mut(),
                null(),
                None,
                null_mut(),
                null_mut(),
            )
        }
    };
    assert_eq!(srq, STATUS_INVALID_PARAMETER);
    assert_eq!(close(env.pd), STATUS_SUCCESS);
}

#[test]
fn every_slot_answers() {
    let env = Env::new();
    let mut buf = Buf::new(256, 0, 1);
    let (mr, fast, mw, qp) = env.one_of_each(&mut buf, LOCAL_WRITE);
    let srq = env.try_create_srq(8, 2, 0, None).unwrap();
    for status in [
        query_extension(qp),
        query_extension(mw),
        query_extension(srq),
        query_extension(mr),
    ] {
        assert_eq!(status, STATUS_NOT_SUPPORTED);
    }
    assert_eq!(mw_token(mw), 0);
    let s = [sge(&buf, mr, 0, 16)];
    // P8: a receive before the connection; P7: initiator requests fail.
    assert_eq!(receive(qp, 1, &s), STATUS_SUCCESS);
    let lam = Lam {
        storage: Vec::new(),
        pages: std::vec![0],
        fbo: 0,
    };
    for status in [
        send(qp, 2, &s, 0),
        send_and_invalidate(qp, 2, &s, 0, 1),
        write(qp, 2, &s, (0, 1), 0),
        read(qp, 2, &s, (0, 1), 0),
        bind(qp, 2, (mr, mw), buf.addr(), 16, 0),
        fast_register(qp, 2, fast, &lam, (16, 0), 0),
        invalidate(qp, 2, fast, 0),
        invalidate(qp, 2, mw, 0),
    ] {
        assert_eq!(status, STATUS_CONNECTION_INVALID);
    }
    // E1: the receive is cancelled.
    flush(qp);
    assert_eq!(
        summary(&poll(env.cq)),
        [(STATUS_CANCELLED, NdkOperationType::RECEIVE, 1)]
    );
    assert_eq!(poll(env.cq)[..].len(), 0);
    assert_eq!(modify_srq(srq, 0, 0), STATUS_SUCCESS);
    assert_eq!(srq_receive(srq, 3, &s), STATUS_SUCCESS);
    env.teardown_with(&[qp.cast(), srq.cast(), mw.cast(), fast.cast(), mr.cast()]);
}

/// Which flag bits each operation takes (ndk-abi.md §5.3; P18, P25):
/// accepted flags reach the RNIC (here: not connected, P7), others are
/// refused with STATUS_INVALID_PARAMETER first.
#[test]
fn flags_table() {
    let env = Env::new();
    let mut buf = Buf::new(256, 0, 1);
    let (mr, fast, mw, qp) = env.one_of_each(&mut buf, REMOTE_WRITE);
    let lam = Lam {
        storage: Vec::new(),
        pages: std::vec![0],
        fbo: 0,
    };
    let ops: [(&str, Post<'_>, u32); 7] = [
        ("send", &|f| send(qp, 1, &[], f), 0x247),
        (
            "send+inv",
            &|f| send_and_invalidate(qp, 1, &[], f, 5),
            0x247,
        ),
        ("read", &|f| read(qp, 1, &[], (0, 5), f), 0x303),
        ("write", &|f| write(qp, 1, &[], (0, 5), f), 0x243),
        ("bind", &|f| bind(qp, 1, (mr, mw), buf.addr(), 8, f), 0x23B),
        (
            "fast register",
            &|f| fast_register(qp, 1, fast, &lam, (16, 0), f),
            0x2BB,
        ),
        ("invalidate", &|f| invalidate(qp, 1, mw, f), 0x203),
    ];
    for (name, post, accepted) in ops {
        for bit in (0..32).map(|n| 1_u32 << n) {
            // Flags are values: 0x20 is only half of ALLOW_REMOTE_WRITE
            // (0x30), and ALLOW_LOCAL_WRITE (0x10) alone is a
            // FastRegister flag, not a Bind flag (P25).
            let value = bit != 0x20 && !(bit == 0x10 && name == "bind");
            let expected = if accepted & bit == 0 || !value {
                STATUS_INVALID_PARAMETER
            } else {
                STATUS_CONNECTION_INVALID
            };
            assert_eq!(post(bit), expected, "{name} with {bit:#x}");
        }
        assert_eq!(post(accepted), STATUS_CONNECTION_INVALID, "{name}");
    }
    // The table above is ndk-abi.md §5.3: Bind's 0x30 is
    // ALLOW_REMOTE_WRITE, whose value contains ALLOW_LOCAL_WRITE's bit.
    assert_eq!(OpFlags::ALLOW_REMOTE_WRITE.bits(), 0x30);
    assert!(poll(env.cq).is_empty());
    for object in [qp.cast::<c_void>(), mw.cast(), fast.cast(), mr.cast()] {
        assert_eq!(close(object), STATUS_SUCCESS);
    }
    env.teardown();
}

/// rules D4, D6, P6, P9: a post the provider refuses itself still hands
/// the earlier deferred requests to the engine, and leaves no trace.
#[test]
fn provider_refusals_ring_deferred_requests() {
    let (env, p) = Env::paired();
    let mut src = Buf::new(64, 0, 3);
    let mut dst = Buf::new(64 * 4, 0, 0);
    let mr_a = env.registered_mr(&mut src, 0);
    let mr_b = env.registered_mr(&mut dst, REMOTE_WRITE);
    let s = [sge(&src, mr_a, 0, 64)];
    let defer = OpFlags::DEFER.bits();
    let many = [sge(&src, mr_a, 0, 1); MAX_SGE + 1];
    let refusals: [(&dyn Fn() -> NtStatus, NtStatus); 4] = [
        (&|| send(p.a, 9, &[], 0x400), STATUS_INVALID_PARAMETER),
        (
            &|| bind(p.a, 9, (null_mut(), null_mut()), 0, 8, 0),
            STATUS_INVALID_PARAMETER,
        ),
        (&|| send(p.a, 9, &many, 0), STATUS_DATA_OVERRUN),
        (&|| invalidate(p.a, 9, env.cq, 0), STATUS_INVALID_PARAMETER),
    ];
    for (round, (refused, status)) in refusals.iter().enumerate() {
        let at = dst.addr() + 64 * round as u64;
        assert_eq!(
            write(p.a, round, &s, (at, remote_token(mr_b)), defer),
            STATUS_SUCCESS
        );
        // Held back: not executed yet.
        assert!(poll(p.cq_a).is_empty(), "round {round}");
        assert_eq!(refused(), *status, "round {round}");
        // D4: the deferred Write ran; the refused post has no entry.
        assert_eq!(
            summary(&poll(p.cq_a)),
            [(STATUS_SUCCESS, NdkOperationType::WRITE, round)]
        );
        let range = 64 * round..64 * (round + 1);
        assert_eq!(&dst.bytes()[range], src.bytes());
    }
    env.finish(p, &[mr_a, mr_b]);
}

/// rules P12, I5: inline data is copied before the post returns (the
/// receive at the peer comes later), SGE tokens are ignored, more SGEs
/// than a request carries are fine, and the total must fit the QP's
/// inline size.
#[test]
fn inline_data_is_copied_at_post_time() {
    let (env, p) = Env::paired();
    let mut dst = Buf::new(256, 0, 0);
    let mr_b = env.registered_mr(&mut dst, LOCAL_WRITE);
    let inline = OpFlags::INLINE.bits();
    let mut first = *b"hello, ";
    let mut second = *b"inline world";
    let sges = [
        raw_sge(first.as_mut_ptr() as u64, 7, 0xDEAD),
        raw_sge(second.as_mut_ptr() as u64, 12, 0),
    ];
    assert_eq!(send(p.a, 1, &sges, inline), STATUS_SUCCESS);
    first.fill(b'X');
    second.fill(b'Y');
    assert_eq!(receive(p.b, 2, &[sge(&dst, mr_b, 0, 64)]), STATUS_SUCCESS);
    let got = poll(p.cq_b);
    assert_eq!(
        summary(&got),
        [(STATUS_SUCCESS, NdkOperationType::RECEIVE, 2)]
    );
    assert_eq!(got[0].bytes_transferred, 19);
    assert_eq!(got[0].qp_context as usize, 0xB);
    assert_eq!(&dst.bytes()[..19], b"hello, inline world");
    assert_eq!(
        summary(&poll(p.cq_a)),
        [(STATUS_SUCCESS, NdkOperationType::SEND, 1)]
    );

    // 40 one-byte SGEs (more than MAX_SGE): gathered.
    let mut bytes: Vec<u8> = (0..40).collect();
    let many: Vec<NdkSge> = (0..40)
        .map(|i| raw_sge(bytes.as_mut_ptr() as u64 + i, 1, 0))
        .collect();
    assert!(many.len() > MAX_SGE && 40 < MAX_INLINE);
    assert_eq!(send(p.a, 3, &many, inline), STATUS_SUCCESS);
    bytes.fill(0xFF);
    assert_eq!(receive(p.b, 4, &[sge(&dst, mr_b, 64, 64)]), STATUS_SUCCESS);
    assert_eq!(poll(p.cq_b)[0].bytes_transferred, 40);
    assert_eq!(&dst.bytes()[64..104], (0..40).collect::<Vec<u8>>());
    assert_eq!(poll(p.cq_a).len(), 1);

    // Above the QP's 64 inline bytes: refused, no trace.
    let mut big = [7_u8; 65];
    let too_big = [raw_sge(big.as_mut_ptr() as u64, 65, 0)];
    assert_eq!(send(p.a, 5, &too_big, inline), STATUS_BUFFER_OVERFLOW);
    let split: Vec<NdkSge> = (0..65)
        .map(|i| raw_sge(big.as_mut_ptr() as u64 + i, 1, 0))
        .collect();
    assert_eq!(send(p.a, 6, &split, inline), STATUS_BUFFER_OVERFLOW);
    // A null buffer with a length is refused.
    let null_sge = [raw_sge(0, 4, 0)];
    assert_eq!(send(p.a, 7, &null_sge, inline), STATUS_INVALID_PARAMETER);
    // More SGEs than any inline size has bytes.
    let empty = raw_sge(0, 0, 0);
    let empties = std::vec![empty; MAX_INLINE + 1];
    assert_eq!(send(p.a, 7, &empties, inline), STATUS_DATA_OVERRUN);
    assert!(poll(p.cq_a).is_empty());

    env.finish(p, &[mr_b]);
}

/// rule P13: INLINE on Write.
#[test]
fn inline_write() {
    let (env, p) = Env::paired();
    let inline = OpFlags::INLINE.bits();
    let mut data = *b"written inline";
    let w = [raw_sge(data.as_mut_ptr() as u64, 14, 0)];
    let mr_w = env.create_mr(false);
    let mut target = Buf::new(32, 0, 0);
    assert_eq!(register(mr_w, &mut target, REMOTE_WRITE), STATUS_SUCCESS);
    let remote = (target.addr() + 2, remote_token(mr_w));
    assert_eq!(write(p.a, 8, &w, remote, inline), STATUS_SUCCESS);
    assert_eq!(&target.bytes()[2..16], b"written inline");
    assert_eq!(
        summary(&poll(p.cq_a)),
        [(STATUS_SUCCESS, NdkOperationType::WRITE, 8)]
    );
    assert!(poll(p.cq_b).is_empty());
    env.finish(p, &[mr_w]);
}

/// rules P14, P6, E5: a silent request that succeeds leaves no entry;
/// one that fails does.
#[test]
fn silent_success() {
    let (env, p) = Env::paired();
    let mut src = Buf::new(32, 0, 9);
    let mut dst = Buf::new(32, 0, 0);
    let mr_a = env.registered_mr(&mut src, 0);
    let mr_b = env.registered_mr(&mut dst, REMOTE_WRITE);
    let s = [sge(&src, mr_a, 0, 32)];
    let remote = (dst.addr(), remote_token(mr_b));
    let silent = OpFlags::SILENT_SUCCESS.bits();
    assert_eq!(write(p.a, 1, &s, remote, silent), STATUS_SUCCESS);
    assert_eq!(dst.bytes(), src.bytes());
    assert!(poll(p.cq_a).is_empty());
    assert_eq!(write(p.a, 2, &s, remote, 0), STATUS_SUCCESS);
    assert_eq!(
        summary(&poll(p.cq_a)),
        [(STATUS_SUCCESS, NdkOperationType::WRITE, 2)]
    );
    // A silent Write with a bad token fails: it reports (P14).
    assert_eq!(
        write(p.a, 3, &s, (dst.addr(), 0x8000_0001), silent),
        STATUS_SUCCESS
    );
    assert_eq!(
        summary(&poll(p.cq_a)),
        [(STATUS_ACCESS_VIOLATION, NdkOperationType::WRITE, 3)]
    );
    env.finish(p, &[mr_a, mr_b]);
}

/// rules M13–M17, M22, M35: FastRegister over LAM pages, a remote Read
/// through the fast MR's token, Invalidate through the MR's header.
#[test]
fn fast_register_and_remote_read() {
    let (env, p) = Env::paired();
    let fast = env.create_mr(true);
    let max = env.device.limits().max_fr_pages;
    assert_eq!(init_fast(fast, max + 1, true), STATUS_IMPLEMENTATION_LIMIT);
    assert_eq!(remote_token(fast), 0);
    assert_eq!(init_fast(fast, 4, true), STATUS_SUCCESS);
    let (local, remote) = (local_token(fast), remote_token(fast));
    assert!(local != 0 && remote != 0 && local != remote);
    let mut memory = Buf::new(2 * PAGE, 0x123, 5);
    let lam = env.build_lam(&mut memory);
    assert_eq!((lam.pages.len(), lam.fbo), (3, 0x123));
    let base = 0x7000_0000 + u64::from(lam.fbo);
    let flags = (OpFlags::ALLOW_REMOTE_READ | OpFlags::DEFER).bits();
    let len = 2 * PAGE;
    assert_eq!(
        fast_register(p.b, 1, fast, &lam, (len, base), flags),
        STATUS_SUCCESS
    );
    // M17, M35: same tokens, readable before the completion.
    assert_eq!((local_token(fast), remote_token(fast)), (local, remote));
    // DEFER: nothing ran yet; a refused post on B rings it (D4).
    assert!(poll(p.cq_b).is_empty());
    assert_eq!(send(p.b, 0, &[], 0x8000), STATUS_INVALID_PARAMETER);
    let mut sink = Buf::new(PAGE, 0, 0);
    let mr_a = env.registered_mr(&mut sink, LOCAL_WRITE);
    let s = [sge(&sink, mr_a, 0, 300)];
    // Remote Read across the first page boundary of the mapping.
    let offset = PAGE as u64 - 100;
    assert_eq!(read(p.a, 2, &s, (base + offset, remote), 0), STATUS_SUCCESS);
    assert_eq!(
        summary(&poll(p.cq_a)),
        [(STATUS_SUCCESS, NdkOperationType::READ, 2)]
    );
    assert_eq!(
        summary(&poll(p.cq_b)),
        [(STATUS_SUCCESS, NdkOperationType::FAST_REGISTER, 1)]
    );
    assert_eq!(
        &sink.bytes()[..300],
        &memory.bytes()[PAGE - 100..PAGE + 200]
    );
    // M15: remote rights on an MR initialized without remote access.
    let local_only = env.create_mr(true);
    assert_eq!(init_fast(local_only, 4, false), STATUS_SUCCESS);
    let rw = OpFlags::ALLOW_REMOTE_WRITE.bits();
    let fr = fast_register(p.b, 3, local_only, &lam, (len, base), rw);
    assert_eq!(fr, STATUS_ACCESS_VIOLATION);
    // M1: FastRegister on a RegisterMr MR.
    let fr = fast_register(p.b, 3, mr_a, &lam, (len, base), 0);
    assert_eq!(fr, STATUS_INVALID_PARAMETER);
    // M22 through the MR's header.
    assert_eq!(invalidate(p.b, 4, fast, 0), STATUS_SUCCESS);
    assert_eq!(
        summary(&poll(p.cq_b)),
        [(STATUS_SUCCESS, NdkOperationType::INVALIDATE, 4)]
    );
    assert_eq!(remote_token(fast), remote);
    assert_eq!(read(p.a, 5, &s, (base, remote), 0), STATUS_SUCCESS);
    assert_eq!(
        summary(&poll(p.cq_a)),
        [(STATUS_ACCESS_VIOLATION, NdkOperationType::READ, 5)]
    );
    env.finish_releasing(p, &[fast, local_only, mr_a], Some(lam));
}

/// rules M18–M20, M22: Bind, a remote Write through the window,
/// Invalidate through the MW's header.
#[test]
fn bind_and_write_through_window() {
    let (env, p) = Env::paired();
    let mut target = Buf::new(1024, 0, 0);
    let mr_b = env.registered_mr(&mut target, REMOTE_WRITE);
    let mw = env.create_mw();
    let rw = OpFlags::ALLOW_REMOTE_WRITE.bits();
    let window = target.addr() + 64;
    assert_eq!(bind(p.b, 1, (mr_b, mw), window, 256, rw), STATUS_SUCCESS);
    // M20: the token is readable as soon as Bind returned.
    let token = mw_token(mw);
    assert!(token != 0 && token != remote_token(mr_b));
    assert_eq!(
        summary(&poll(p.cq_b)),
        [(STATUS_SUCCESS, NdkOperationType::BIND, 1)]
    );
    let mut src = Buf::new(100, 0, 11);
    let mr_a = env.registered_mr(&mut src, 0);
    let s = [sge(&src, mr_a, 0, 100)];
    assert_eq!(write(p.a, 2, &s, (window + 10, token), 0), STATUS_SUCCESS);
    assert_eq!(
        summary(&poll(p.cq_a)),
        [(STATUS_SUCCESS, NdkOperationType::WRITE, 2)]
    );
    assert_eq!(&target.bytes()[74..174], src.bytes());
    // M19: remote write over a region without local write.
    let read_only = env.create_mr(false);
    let mut other = Buf::new(64, 0, 0);
    assert_eq!(register(read_only, &mut other, REMOTE_READ), STATUS_SUCCESS);
    let mw2 = env.create_mw();
    let bound = bind(p.b, 3, (read_only, mw2), other.addr(), 64, rw);
    assert_eq!(bound, STATUS_ACCESS_VIOLATION);
    // Not an MW.
    let bound = bind(p.b, 3, (read_only, read_only.cast()), other.addr(), 64, 0);
    assert_eq!(bound, STATUS_INVALID_PARAMETER);
    // M22 through the MW's header.
    assert_eq!(invalidate(p.b, 4, mw, 0), STATUS_SUCCESS);
    assert_eq!(
        summary(&poll(p.cq_b)),
        [(STATUS_SUCCESS, NdkOperationType::INVALIDATE, 4)]
    );
    assert_eq!(write(p.a, 5, &s, (window, token), 0), STATUS_SUCCESS);
    assert_eq!(
        summary(&poll(p.cq_a)),
        [(STATUS_ACCESS_VIOLATION, NdkOperationType::WRITE, 5)]
    );
    p.close();
    env.teardown_with(&[
        mw.cast(),
        mw2.cast(),
        mr_a.cast(),
        mr_b.cast(),
        read_only.cast(),
    ]);
}

/// rules M24, C2, P22: SendAndInvalidate; the receiver sees
/// ReceiveAndInvalidate and the token through GetCqResultsEx, and a
/// receive through GetCqResults.
#[test]
fn send_and_invalidate_reports_the_token() {
    let (env, p) = Env::paired();
    let fast = env.create_mr(true);
    assert_eq!(init_fast(fast, 2, true), STATUS_SUCCESS);
    let token = remote_token(fast);
    let mut memory = Buf::new(PAGE, 0, 1);
    let lam = env.build_lam(&mut memory);
    let rr = OpFlags::ALLOW_REMOTE_READ.bits();
    let mut sink = Buf::new(128, 0, 0);
    let mr_b = env.registered_mr(&mut sink, LOCAL_WRITE);
    let mut message = *b"invalidate it";
    let m = [raw_sge(message.as_mut_ptr() as u64, 13, 0)];
    let inline = OpFlags::INLINE.bits();
    for round in 0..2_usize {
        let fr = fast_register(p.b, 10 + round, fast, &lam, (PAGE, 0), rr);
        assert_eq!(fr, STATUS_SUCCESS);
        let at = 64 * round as u64;
        assert_eq!(
            receive(p.b, 20 + round, &[sge(&sink, mr_b, at, 64)]),
            STATUS_SUCCESS
        );
        assert_eq!(
            send_and_invalidate(p.a, 30 + round, &m, inline, token),
            STATUS_SUCCESS
        );
        // P22: the sender's completion is a Send.
        assert_eq!(
            summary(&poll(p.cq_a)),
            [(STATUS_SUCCESS, NdkOperationType::SEND, 30 + round)]
        );
        if round == 0 {
            let got = poll(p.cq_b);
            assert_eq!(
                summary(&got),
                [
                    (STATUS_SUCCESS, NdkOperationType::FAST_REGISTER, 10),
                    (STATUS_SUCCESS, NdkOperationType::RECEIVE_AND_INVALIDATE, 20),
                ]
            );
            assert_eq!(got[1].type_specific_completion_output, token as usize);
            assert_eq!(got[1].bytes_transferred, 13);
        } else {
            let got = poll_plain(p.cq_b);
            let plain: Vec<_> = got
                .iter()
                .map(|r| (r.status, r.request_context as usize, r.bytes_transferred))
                .collect();
            assert_eq!(plain, [(STATUS_SUCCESS, 11, 0), (STATUS_SUCCESS, 21, 13)]);
        }
        assert_eq!(&sink.bytes()[64 * round..64 * round + 13], b"invalidate it");
    }
    // The token was invalidated: an Invalidate of the MR now fails.
    assert_eq!(invalidate(p.b, 40, fast, 0), STATUS_SUCCESS);
    let got = poll(p.cq_b);
    assert_eq!(got.len(), 1);
    assert_ne!(got[0].status, STATUS_SUCCESS);
    env.finish_releasing(p, &[fast, mr_b], Some(lam));
}

/// rules E1, P15: Flush cancels pending receives and deferred initiator
/// requests, silent ones included.
#[test]
fn flush_cancels_everything_pending() {
    let (env, p) = Env::paired();
    let mut buf = Buf::new(64, 0, 0);
    let mr = env.registered_mr(&mut buf, REMOTE_WRITE);
    let s = [sge(&buf, mr, 0, 8)];
    assert_eq!(receive(p.a, 1, &s), STATUS_SUCCESS);
    let defer = OpFlags::DEFER.bits();
    let silent = OpFlags::SILENT_SUCCESS.bits();
    let remote = (buf.addr(), remote_token(mr));
    assert_eq!(write(p.a, 2, &s, remote, defer), STATUS_SUCCESS);
    assert_eq!(write(p.a, 3, &s, remote, defer | silent), STATUS_SUCCESS);
    flush(p.a);
    assert_eq!(
        summary(&poll(p.cq_a)),
        [
            (STATUS_CANCELLED, NdkOperationType::RECEIVE, 1),
            (STATUS_CANCELLED, NdkOperationType::WRITE, 2),
            (STATUS_CANCELLED, NdkOperationType::WRITE, 3),
        ]
    );
    env.finish(p, &[mr]);
}

/// rules P9, P10: SGE counts and lengths.
#[test]
fn sge_limits() {
    let (env, p) = Env::paired();
    let mut buf = Buf::new(64, 0, 0);
    let mr = env.registered_mr(&mut buf, LOCAL_WRITE);
    let five = [sge(&buf, mr, 0, 8); 5];
    // Above the QP's 4, and above any request's MAX_SGE.
    assert_eq!(send(p.a, 1, &five, 0), STATUS_DATA_OVERRUN);
    assert_eq!(receive(p.a, 1, &five), STATUS_DATA_OVERRUN);
    let many = [sge(&buf, mr, 0, 8); MAX_SGE + 1];
    assert_eq!(receive(p.a, 1, &many), STATUS_DATA_OVERRUN);
    assert_eq!(read(p.a, 1, &many, (0, 1), 0), STATUS_DATA_OVERRUN);
    let long = [NdkSge {
        length: u32::MAX,
        ..sge(&buf, mr, 0, 8)
    }];
    assert_eq!(send(p.a, 1, &long, 0), STATUS_BUFFER_OVERFLOW);
    // A null SGL with entries.
    let receive_fn = table::<NdkQpDispatch, _>(p.a).ndk_receive;
    // SAFETY: a live QP; a null SGL the provider must refuse.
    let status = unsafe { receive_fn(p.a, null_mut(), null(), 1) };
    assert_eq!(status, STATUS_INVALID_PARAMETER);
    assert!(poll(p.cq_a).is_empty());
    env.finish(p, &[mr]);
}

/// rules L13, L14, Q1, Q2: creation limits and antecedents.
#[test]
fn create_limits() {
    let env = Env::new();
    let l = *env.device.limits();
    for config in [
        [l.max_receive_queue_depth + 1, 16, 4, 4, 64],
        [16, l.max_initiator_queue_depth + 1, 4, 4, 64],
        [16, 0, 4, 4, 64],
        [16, 16, l.max_receive_sge + 1, 4, 64],
        [16, 16, 4, l.max_initiator_sge + 1, 64],
        [16, 16, 4, 4, l.max_inline_data + 1],
    ] {
        let created = env.try_create_qp(env.cq, 0, config);
        assert_eq!(created, Err(STATUS_INVALID_PARAMETER), "{config:?}");
    }
    assert_eq!(
        env.try_create_qp(null_mut(), 0, [16, 16, 4, 4, 64]),
        Err(STATUS_INVALID_PARAMETER)
    );
    // Not a CQ.
    let mr = env.create_mr(false);
    assert_eq!(
        env.try_create_qp(mr.cast(), 0, [16, 16, 4, 4, 64]),
        Err(STATUS_INVALID_PARAMETER)
    );
    assert_eq!(
        env.try_create_qp_with_srq(env.cq, null_mut(), 0),
        Err(STATUS_INVALID_PARAMETER)
    );
    assert_eq!(
        env.try_create_qp_with_srq(env.cq, mr.cast(), 0),
        Err(STATUS_INVALID_PARAMETER)
    );
    // L12.
    assert_eq!(
        env.try_create_srq(l.max_srq_depth + 1, 1, 0, None),
        Err(STATUS_INVALID_PARAMETER)
    );
    assert_eq!(
        env.try_create_srq(4, l.max_receive_sge + 1, 0, None),
        Err(STATUS_INVALID_PARAMETER)
    );
    assert_eq!(close(mr), STATUS_SUCCESS);
    env.teardown();
    // Q1: no SRQs on an adapter with MaxSrqDepth 0.
    let env = Env::with_limits(Limits {
        max_srq_depth: 0,
        ..Limits::DEFAULT
    });
    assert_eq!(
        env.try_create_srq(1, 1, 0, None),
        Err(STATUS_INVALID_PARAMETER)
    );
    env.teardown();
}

/// rules Q2–Q7: SRQ receives consumed by a QP made with CreateQpWithSrq,
/// notifications, ModifySrq statuses.
#[test]
fn srq_receives_and_notifications() {
    let env = Env::new();
    let notes = Counter::default();
    // Q4: armed below the threshold at creation fires at once.
    let srq = env.try_create_srq(4, 2, 2, Some(&notes)).unwrap();
    assert_eq!((notes.calls(), notes.status()), (1, STATUS_SUCCESS));
    let cq_b = env.create_cq(64);
    let b = env.try_create_qp_with_srq(cq_b, srq, 0xB).unwrap();
    check_header(b, NdkObjectType::QP);
    let a = env.create_qp(env.cq, 0xA);
    connect(a, b);
    let mut sink = Buf::new(256, 0, 0);
    let mr = env.registered_mr(&mut sink, LOCAL_WRITE);
    for i in 0..3 {
        let s = [sge(&sink, mr, 64 * i, 64)];
        assert_eq!(srq_receive(srq, 100 + i as usize, &s), STATUS_SUCCESS);
    }
    assert_eq!(
        srq_receive(srq, 0, &[sge(&sink, mr, 0, 1); 3]),
        STATUS_DATA_OVERRUN
    );
    // Q2: no receive queue of its own.
    assert_eq!(
        receive(b, 0, &[sge(&sink, mr, 0, 1)]),
        STATUS_INVALID_PARAMETER
    );
    // Q7, Q6.
    assert_eq!(modify_srq(srq, 2, 0), STATUS_BUFFER_OVERFLOW);
    let max = env.device.limits().max_srq_depth;
    assert_eq!(modify_srq(srq, max + 1, 0), STATUS_INVALID_PARAMETER);
    let mut msg = *b"to the srq";
    let m = [raw_sge(msg.as_mut_ptr() as u64, 10, 0)];
    let inline = OpFlags::INLINE.bits();
    for i in 0..2 {
        assert_eq!(send(a, i, &m, inline), STATUS_SUCCESS);
    }
    let got = poll(cq_b);
    assert_eq!(
        summary(&got),
        [
            (STATUS_SUCCESS, NdkOperationType::RECEIVE, 100),
            (STATUS_SUCCESS, NdkOperationType::RECEIVE, 101),
        ]
    );
    assert!(got.iter().all(|r| r.qp_context as usize == 0xB));
    // Q5: disarmed after the first notification, re-armed by ModifySrq
    // (1 queued < 2: fires at once).
    assert_eq!(notes.calls(), 1);
    assert_eq!(modify_srq(srq, 0, 2), STATUS_SUCCESS);
    assert_eq!(notes.calls(), 2);
    assert_eq!(poll(env.cq).len(), 2);
    // L24: the SRQ is held by its QP.
    let closed = Counter::default();
    assert_eq!(close_with(srq, Some(&closed)), STATUS_PENDING);
    assert_eq!(close(a), STATUS_SUCCESS);
    assert_eq!(close(b), STATUS_SUCCESS);
    assert_eq!(closed.calls(), 1);
    assert_eq!(notes.calls(), 2);
    for object in [cq_b.cast::<c_void>(), mr.cast()] {
        assert_eq!(close(object), STATUS_SUCCESS);
    }
    env.teardown();
}

/// rules L24, L26, L27: antecedents closed first pend until their last
/// successor closes; then the adapter closes and nothing leaked.
#[test]
fn close_order() {
    let env = Env::new();
    let cq = env.create_cq(16);
    let qp = env.create_qp(cq, 1);
    let mr = env.create_mr(false);
    let mw = env.create_mw();
    let (cq_closed, pd_closed) = (Counter::default(), Counter::default());
    assert_eq!(close_with(cq, Some(&cq_closed)), STATUS_PENDING);
    assert_eq!(close_with(env.pd, Some(&pd_closed)), STATUS_PENDING);
    assert_eq!(close(qp), STATUS_SUCCESS);
    assert_eq!(cq_closed.calls(), 1);
    assert_eq!(close(mw), STATUS_SUCCESS);
    assert_eq!(pd_closed.calls(), 0);
    assert_eq!(close(mr), STATUS_SUCCESS);
    assert_eq!(pd_closed.calls(), 1);
    assert_eq!(close(env.cq), STATUS_SUCCESS);
    env.close_adapter();
}
