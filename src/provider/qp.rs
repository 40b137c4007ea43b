//! `NDK_QP` and `NDK_SRQ` over the RNIC's queue pairs and SRQs (rules P1–P25,
//! D1–D6, E1, L13, L20, L24, Q1–Q9).
//!
//! A posting thunk checks the consumer's pointers and flags, copies the SGE
//! list onto the stack (no allocation on the posting path), and hands the
//! request to the RNIC, which queues it or refuses it inline. A refusal the
//! provider decides itself still rings the doorbell for the QP's earlier
//! deferred requests first (D4, see `refuse`).

#![expect(
    clippy::too_many_arguments,
    reason = "a slot's method takes the C slot's parameters (dispatch::ndk_table)"
)]

use alloc::boxed::Box;
use core::ffi::c_void;

use super::checked::{self, Breach};
use super::cq::Cq;
use super::dispatch::ndk_table;
use super::mr::{Mr, Mw};
use super::object::{Entered, Event, Holder, Kind, Object, Parents, Slot};
use super::pd::Pd;
use super::status;
use crate::abi::{
    NdkCq, NdkFnRequestCompletion, NdkFnSrqNotificationCallback, NdkLogicalAddress, NdkMr, NdkMw,
    NdkObjectHeader, NdkObjectType, NdkQp, NdkQpDispatch, NdkSge, NdkSrq, NdkSrqDispatch, NtStatus,
    OpFlags, STATUS_CONNECTION_INVALID, STATUS_INSUFFICIENT_RESOURCES, STATUS_INVALID_PARAMETER,
    STATUS_SUCCESS,
};
use crate::kernel::sync::{Arc, SpinLock, Weak};
use crate::rnic::memory::{self, Span};
use crate::rnic::qp::{
    self as rqp, InvalidateTarget, MAX_INLINE, MAX_SGE, Payload, PostError, QpConfig,
};
use crate::rnic::srq::{self as rsrq, SrqEvent, SrqNotify};
use crate::rnic::{Access, Sge, WrFlags};

// ----- NDK_QP ------------------------------------------------------------

/// The provider state of an `NDK_QP`.
pub struct Qp {
    /// The RNIC queue pair.
    pub(super) rnic: Arc<rqp::Qp>,
    /// Checked mode (D5): the slot of the last accepted initiator request
    /// when it carried DEFER (a chain still open), else null. Written only
    /// in checked mode.
    chain: core::sync::atomic::AtomicPtr<Slot>,
    /// Checked mode (P2): the slot of the call running on the initiator
    /// queue, and on the receive queue, else null.
    posting: [core::sync::atomic::AtomicPtr<Slot>; 2],
    /// The QP's receive and initiator CQs (also its parents, L24): P2 does
    /// not watch posts made while a notification callback of one of them
    /// runs (they may be nested in a post on the same thread).
    cqs: [Arc<Object<Cq>>; 2],
}

/// P2: which of a QP's queues a posting call claims ([`Qp::posting`]).
const INITIATOR: usize = 0;
const RECEIVE: usize = 1;

/// P2 in checked mode: the posting call of `slot` claims `queue` of `qp`
/// (one relaxed load and a branch when off).
#[inline]
fn claim_queue<'a>(
    qp: &'a Object<Qp>,
    queue: usize,
    slot: &'static Slot,
) -> Option<checked::Claimed<'a>> {
    if checked::checked() {
        claim_queue_checked(qp, queue, slot)
    } else {
        None
    }
}

#[inline(never)]
fn claim_queue_checked<'a>(
    qp: &'a Object<Qp>,
    queue: usize,
    slot: &'static Slot,
) -> Option<checked::Claimed<'a>> {
    // A post made from a notification callback may be nested in another
    // post on the same thread (the callback runs inside the engine's
    // completion of that post): not watched, as C1 does not watch calls
    // from the callback.
    if qp.inner.cqs.iter().any(|cq| super::cq::delivering(cq)) {
        return None;
    }
    let cell = qp.inner.posting.get(queue)?;
    checked::serialize(
        cell,
        slot,
        Breach::P2,
        NdkObjectType::QP,
        qp.as_ptr() as usize,
    )
}

/// The RNIC queue pair of a QP object (for the connection layer).
pub fn rnic_qp(qp: &Object<Qp>) -> &Arc<rqp::Qp> {
    &qp.inner.rnic
}

ndk_table! {
    /// The dispatch table of every object of this type.
    static QP_DISPATCH: NdkQpDispatch for Qp (QP) at NdkQp,
        close ndk_close_qp = "NdkCloseQp";
    ndk_flush = "NdkFlush" => flush();
    ndk_send = "NdkSend" => send(context: *mut c_void, sgl: *const NdkSge, n: u32, flags: u32
    ) -> NtStatus, then watched_data(flags, sgl, n, None);
    ndk_receive = "NdkReceive" => receive(context: *mut c_void, sgl: *const NdkSge, n: u32
    ) -> NtStatus, then watched_receive(sgl, n);
    ndk_bind = "NdkBind" => bind(context: *mut c_void, mr: *mut NdkMr, mw: *mut NdkMw,
        virtual_address: *mut c_void, length: usize, flags: u32
    ) -> NtStatus, then watched(Some(flags));
    ndk_fast_register = "NdkFastRegister" => fast_register(context: *mut c_void, mr: *mut NdkMr,
        page_count: u32, pages: *const NdkLogicalAddress, fbo: u32, length: usize,
        base_virtual_address: *mut c_void, flags: u32) -> NtStatus,
        then watched_fast_register(flags, mr, pages, page_count);
    ndk_invalidate = "NdkInvalidate" => invalidate(context: *mut c_void,
        target: *mut NdkObjectHeader, flags: u32) -> NtStatus, then watched_invalidate(flags, target);
    ndk_read = "NdkRead" => read(context: *mut c_void, sgl: *const NdkSge, n: u32,
        remote_address: u64, remote_token: u32, flags: u32) -> NtStatus,
        then watched_data(flags, sgl, n, Some(remote_token));
    ndk_write = "NdkWrite" => write(context: *mut c_void, sgl: *const NdkSge, n: u32,
        remote_address: u64, remote_token: u32, flags: u32) -> NtStatus,
        then watched_data(flags, sgl, n, Some(remote_token));
    ndk_send_and_invalidate = "NdkSendAndInvalidate" => send_and_invalidate(context: *mut c_void,
        sgl: *const NdkSge, n: u32, flags: u32, remote_token: u32
    ) -> NtStatus, then watched_send_and_invalidate(flags, sgl, n, remote_token);
}

impl Kind for Qp {
    fn begin_close(object: &Object<Self>) {
        // L20: disconnects and flushes: every outstanding request completes
        // (cancelled) on the QP's CQs, which this QP holds open until its
        // close completes (L24); later posts fail inline. Receives of an SRQ
        // stay in the SRQ (E4). L21: the close completes once the engine
        // has retired (and reported) everything, which with the deferred
        // engine may be after this returns.
        watch_chain(object, &Slot("NdkCloseQp"));
        object.hold();
        let this = object.arc();
        let finish: crate::rnic::mr::Finish = Box::new(move || this.release());
        if object.inner.rnic.close_with(finish) == crate::rnic::mr::Progress::Done {
            object.release();
        }
    }
}

/// Creates a QP on `pd` (L13, L14, Q2): its receives come from `srq` when it
/// is not null, else from a receive queue of its own. Inline (L7).
///
/// `STATUS_INVALID_PARAMETER` for a null or foreign CQ or SRQ pointer, a CQ,
/// SRQ or PD already closing, limits above the adapter's (L13), an SRQ of
/// another device; `STATUS_INSUFFICIENT_RESOURCES` for memory or the QP limit.
///
/// # Safety
/// The CQ and SRQ pointers are null or the consumer's objects (L14).
pub(super) unsafe fn create_qp(
    pd: &Object<Pd>,
    receive_cq: *mut NdkCq,
    initiator_cq: *mut NdkCq,
    srq: *mut NdkSrq,
    config: QpConfig,
    slot: &'static Slot,
) -> Result<*mut NdkQp, NtStatus> {
    // SAFETY: the caller's contract.
    let receive = unsafe { Object::<Cq>::from_ptr(receive_cq.cast(), slot) }
        .ok_or(STATUS_INVALID_PARAMETER)?;
    // SAFETY: the caller's contract.
    let initiator = unsafe { Object::<Cq>::from_ptr(initiator_cq.cast(), slot) }
        .ok_or(STATUS_INVALID_PARAMETER)?;
    let srq = if srq.is_null() {
        None
    } else {
        // SAFETY: the caller's contract.
        Some(unsafe { Object::<Srq>::from_ptr(srq.cast(), slot) }.ok_or(STATUS_INVALID_PARAMETER)?)
    };
    // L14: successors are created from live antecedents only.
    let live = pd.is_open()
        && receive.is_open()
        && initiator.is_open()
        && srq.as_ref().is_none_or(|s| s.is_open());
    if !live {
        return Err(STATUS_INVALID_PARAMETER);
    }
    // L14: a QP completes into CQs of its own NIC only (adapters opened on
    // one NIC share it, N32). The RNIC's CQs know no device, so the check is
    // here; the SRQ's is in `rqp::Qp::new`.
    let device = pd.inner.rnic.device();
    if !Arc::ptr_eq(receive.inner.device(), device)
        || !Arc::ptr_eq(initiator.inner.device(), device)
    {
        return Err(STATUS_INVALID_PARAMETER);
    }
    let rnic = rqp::Qp::new(
        &pd.inner.rnic,
        &receive.inner.rnic,
        &initiator.inner.rnic,
        srq.as_ref().map(|s| &s.inner.rnic),
        config,
    )
    .map_err(status::create_qp)?;
    // L24: the PD, both CQs (the same CQ twice when they are one) and the
    // SRQ stay open until this QP's close completes.
    let parents: Parents = [
        Some(pd.arc() as Arc<dyn Holder>),
        Some(receive.arc() as Arc<dyn Holder>),
        Some(initiator.arc() as Arc<dyn Holder>),
        srq.as_ref().map(|s| s.arc() as Arc<dyn Holder>),
    ];
    let Some(object) = Object::create(
        pd.header().version,
        Qp {
            rnic,
            chain: core::sync::atomic::AtomicPtr::new(core::ptr::null_mut()),
            posting: [const { core::sync::atomic::AtomicPtr::new(core::ptr::null_mut()) }; 2],
            cqs: [receive.arc(), initiator.arc()],
        },
        parents,
    ) else {
        return Err(STATUS_INSUFFICIENT_RESOURCES);
    };
    Ok(object.as_ptr().cast())
}

// ----- flags ---------------------------------------------------------------

/// The flags every initiator request documents (ndk-abi.md §5.3; D1).
const COMMON: OpFlags = OpFlags::SILENT_SUCCESS
    .union(OpFlags::READ_FENCE)
    .union(OpFlags::DEFER);
/// Send and SendAndInvalidate.
const SEND_FLAGS: OpFlags = COMMON
    .union(OpFlags::SEND_AND_SOLICIT_EVENT)
    .union(OpFlags::INLINE);
/// Write: INLINE too (P13, ndk-abi.md §6 item 19).
const WRITE_FLAGS: OpFlags = COMMON.union(OpFlags::INLINE);
/// Read (M26).
const READ_FLAGS: OpFlags = COMMON.union(OpFlags::RDMA_READ_LOCAL_INVALIDATE);
/// Bind: remote rights only (ALLOW_REMOTE_WRITE's value contains the
/// local-write bit, M7).
const BIND_FLAGS: OpFlags = COMMON
    .union(OpFlags::ALLOW_REMOTE_READ)
    .union(OpFlags::ALLOW_REMOTE_WRITE);
/// FastRegister (M7, M9, M15).
const FAST_REGISTER_FLAGS: OpFlags = COMMON
    .union(OpFlags::ALLOW_REMOTE_READ)
    .union(OpFlags::ALLOW_LOCAL_WRITE)
    .union(OpFlags::ALLOW_REMOTE_WRITE)
    .union(OpFlags::RDMA_READ_SINK);
/// Invalidate.
const INVALIDATE_FLAGS: OpFlags = COMMON;

/// `NDK_OP_FLAG_*` to the RNIC's request flags and, for Bind and
/// FastRegister, rights (M7: remote write includes local write).
///
/// `None` when a bit outside `accepted` is set, or ALLOW_LOCAL_WRITE alone
/// where `local_write_alone` says the operation does not document it. P18 obliges the provider to
/// accept every flag the operation documents; for the others NDK documents
/// no status, and NDSPI v2 refuses them inline (P25), which is what this
/// provider does, with `STATUS_INVALID_PARAMETER` (see
/// [`status::undocumented_flags`]). Refusing keeps P6: nothing is queued.
fn decode(flags: u32, accepted: OpFlags, local_write_alone: bool) -> Option<(WrFlags, Access)> {
    let flags = OpFlags::from_bits_retain(flags);
    if !accepted.contains(flags) {
        return None;
    }
    // Flags are values, not bit sets: ALLOW_REMOTE_WRITE (0x30) contains the
    // ALLOW_LOCAL_WRITE bit (0x10), but its other bit (0x20) is no flag of
    // its own, and ALLOW_LOCAL_WRITE alone is documented only where the
    // operation lists it (FastRegister, not Bind).
    let remote_write_bit = OpFlags::ALLOW_REMOTE_WRITE.difference(OpFlags::ALLOW_LOCAL_WRITE);
    let has_local_write_alone =
        flags.contains(OpFlags::ALLOW_LOCAL_WRITE) && !flags.intersects(remote_write_bit);
    if (flags.intersects(remote_write_bit) && !flags.contains(OpFlags::ALLOW_LOCAL_WRITE))
        || (has_local_write_alone && !local_write_alone)
    {
        return None;
    }
    let mut wr = WrFlags::empty();
    for (op, w) in [
        (OpFlags::SILENT_SUCCESS, WrFlags::SILENT_SUCCESS),
        (OpFlags::READ_FENCE, WrFlags::READ_FENCE),
        (OpFlags::SEND_AND_SOLICIT_EVENT, WrFlags::SOLICITED),
        (OpFlags::INLINE, WrFlags::INLINE),
        (OpFlags::DEFER, WrFlags::DEFER),
        (
            OpFlags::RDMA_READ_LOCAL_INVALIDATE,
            WrFlags::READ_LOCAL_INVALIDATE,
        ),
    ] {
        if flags.contains(op) {
            wr |= w;
        }
    }
    let mut access = Access::empty();
    for (op, a) in [
        (OpFlags::ALLOW_REMOTE_READ, Access::REMOTE_READ),
        (OpFlags::ALLOW_LOCAL_WRITE, Access::LOCAL_WRITE),
        (remote_write_bit, Access::REMOTE_WRITE | Access::LOCAL_WRITE),
        (OpFlags::RDMA_READ_SINK, Access::READ_SINK),
    ] {
        if flags.intersects(op) {
            access |= a;
        }
    }
    Some((wr, access))
}

// ----- posting helpers -----------------------------------------------------

/// Refuses an initiator request the provider rejects before the RNIC sees
/// it (undocumented flags, a bad MR / MW pointer, more SGEs than any queue
/// takes), after handing the QP's earlier deferred requests to the engine
/// (D4, D6).
fn refuse(qp: &Arc<rqp::Qp>, status: NtStatus) -> NtStatus {
    qp.ring_deferred();
    status
}

/// The status of a post the RNIC accepted or refused.
const fn posted(result: Result<(), PostError>) -> NtStatus {
    match result {
        Ok(()) => STATUS_SUCCESS,
        Err(e) => status::post(e),
    }
}

/// Copies the consumer's `n` SGEs into `out` (P11: address, length, token).
///
/// # Errors
/// The refusal status: more SGEs than any queue takes (P9), or a null array
/// with `n > 0`.
///
/// # Safety
/// `sgl` is null or points to `n` readable `NDK_SGE`s (the consumer's
/// contract).
unsafe fn read_sges(sgl: *const NdkSge, n: u32, out: &mut [Sge]) -> Result<&[Sge], NtStatus> {
    let Some(out) = out.get_mut(..n as usize) else {
        return Err(status::post(PostError::TooManySge));
    };
    if !out.is_empty() && sgl.is_null() {
        return Err(STATUS_INVALID_PARAMETER);
    }
    for (i, slot) in out.iter_mut().enumerate() {
        // SAFETY: entry `i < n` of the consumer's array.
        let sge = unsafe { sgl.wrapping_add(i).read_unaligned() };
        *slot = Sge {
            addr: sge.address,
            len: sge.length,
            key: sge.memory_region_token,
        };
    }
    Ok(out)
}

/// SGEs a post reads into a small buffer; more take one of [`MAX_SGE`].
const FEW_SGE: usize = 4;

/// Calls `f` with the consumer's `n` SGEs read as by [`read_sges`], into a
/// buffer no larger than they need: a post of one SGE then does not zero
/// room for 32 (docs/performance.md).
///
/// # Safety
/// As [`read_sges`].
unsafe fn with_sges<R>(
    sgl: *const NdkSge,
    n: u32,
    f: impl FnOnce(Result<&[Sge], NtStatus>) -> R,
) -> R {
    if n as usize <= FEW_SGE {
        let mut few = [Sge::default(); FEW_SGE];
        // SAFETY: the caller's contract.
        f(unsafe { read_sges(sgl, n, &mut few) })
    } else {
        let mut many = [Sge::default(); MAX_SGE];
        // SAFETY: the caller's contract.
        f(unsafe { read_sges(sgl, n, &mut many) })
    }
}

/// Reads an inline SGE's buffer as a span.
///
/// # Safety
/// `sgl` points to at least `i + 1` readable `NDK_SGE`s whose buffers stay
/// readable until the posting call returns (P12, I5), and the span is used
/// only until then.
unsafe fn inline_span(sgl: *const NdkSge, i: usize) -> Option<Span> {
    // SAFETY: entry `i` of the consumer's array (caller's contract).
    let sge = unsafe { sgl.wrapping_add(i).read_unaligned() };
    let addr = usize::try_from(sge.address).ok()?;
    // SAFETY: P12 / I5: the consumer keeps an inline buffer resident and
    // accessible until the posting call returns; the RNIC copies the bytes
    // before `post_*` returns (`Payload::Inline`) and keeps no span. The
    // token is ignored (P12).
    unsafe { Span::new(addr, sge.length as usize) }
}

/// Posts a Send, SendAndInvalidate or Write: inline data (P12, P13) or SGEs.
///
/// The consumer's `flags` are checked against those the operation
/// `accepts` first; `post` gets the payload and the request's flags.
///
/// # Safety
/// `sgl` is null or points to `n` readable `NDK_SGE`s; with INLINE, their
/// buffers are readable until this returns.
unsafe fn post_data(
    qp: &Object<Qp>,
    flags: u32,
    accepts: OpFlags,
    sgl: *const NdkSge,
    n: u32,
    post: impl FnOnce(&Arc<rqp::Qp>, Payload<'_>, WrFlags) -> Result<(), PostError>,
) -> NtStatus {
    let qp = &qp.inner.rnic;
    let Some((flags, _)) = decode(flags, accepts, false) else {
        return refuse(qp, status::undocumented_flags());
    };
    let post = |payload: Payload<'_>| post(qp, payload, flags);
    let count = n as usize;
    if count != 0 && sgl.is_null() {
        return refuse(qp, STATUS_INVALID_PARAMETER);
    }
    if !flags.contains(WrFlags::INLINE) {
        // SAFETY: the caller's contract.
        return unsafe {
            with_sges(sgl, n, |read| match read {
                Ok(sges) => posted(post(Payload::Sges(sges))),
                Err(status) => refuse(qp, status),
            })
        };
    }
    if count > MAX_SGE {
        // More SGEs than inline bytes fit in any QP: only empty ones could
        // still fit, and the bound keeps the work per call bounded (I2).
        if count > MAX_INLINE {
            return refuse(qp, status::post(PostError::TooManySge));
        }
        // SAFETY: the caller's contract.
        return unsafe { post_gathered(qp, sgl, count, post) };
    }
    let mut spans = [Span::empty(); MAX_SGE];
    let Some(spans) = spans.get_mut(..count) else {
        return refuse(qp, status::post(PostError::TooManySge));
    };
    for (i, slot) in spans.iter_mut().enumerate() {
        // SAFETY: `i < n`, and the spans are used only by `post` below.
        let Some(span) = (unsafe { inline_span(sgl, i) }) else {
            return refuse(qp, status::post(PostError::InvalidBuffer));
        };
        *slot = span;
    }
    posted(post(Payload::Inline(spans)))
}

/// Inline data in more SGEs than a request carries (P12 allows it): gathered
/// into one buffer on the stack first. More than [`MAX_INLINE`] bytes fit no
/// QP's inline size.
///
/// # Safety
/// `sgl` points to `count` readable `NDK_SGE`s whose buffers are readable
/// until this returns.
#[inline(never)]
unsafe fn post_gathered(
    qp: &Arc<rqp::Qp>,
    sgl: *const NdkSge,
    count: usize,
    post: impl FnOnce(Payload<'_>) -> Result<(), PostError>,
) -> NtStatus {
    let mut bytes = [0_u8; MAX_INLINE];
    let mut at = 0_usize;
    for i in 0..count {
        // SAFETY: `i < count`; the span is used only in this loop.
        let Some(span) = (unsafe { inline_span(sgl, i) }) else {
            return refuse(qp, status::post(PostError::InvalidBuffer));
        };
        let copied = bytes
            .get_mut(at..)
            .map(|dst| memory::copy_to_slice(dst, span));
        if !matches!(copied, Some(Ok(()))) {
            return refuse(qp, status::post(PostError::InlineTooLong));
        }
        at += span.len();
    }
    let Some(gathered) = bytes.get_mut(..at) else {
        return refuse(qp, status::post(PostError::InlineTooLong));
    };
    // SAFETY: `gathered` is this frame's buffer, alive and untouched until
    // `post` returns, and the RNIC copies inline data before returning.
    let Some(span) = (unsafe { Span::new(gathered.as_mut_ptr() as usize, gathered.len()) }) else {
        return refuse(qp, status::post(PostError::InvalidBuffer));
    };
    posted(post(Payload::Inline(&[span])))
}

/// Checked mode's watch of a post (`flags`: an initiator request's; `None`
/// for a receive): one load and a branch when off. The table's posting
/// slots pass their status through it (`then watched(…)` in [`QP_DISPATCH`]).
#[inline]
fn watched(qp: &Object<Qp>, slot: &'static Slot, flags: Option<u32>, status: NtStatus) -> NtStatus {
    if checked::checked() {
        watch_post(qp, slot, flags, status);
    }
    status
}

/// [`watched`] for a post naming SGEs (Send, Write with `remote` None or its
/// remote token, Read): and, for an accepted post in checked mode, M22 and
/// M33 on its SGEs ([`watch_tokens`]).
///
/// Called only by the slot's thunk, with the consumer's arguments unchanged
/// while the call is still inside (`sgl` is then readable, as the slot's
/// contract says).
#[inline]
fn watched_data(
    qp: &Object<Qp>,
    slot: &'static Slot,
    flags: u32,
    sgl: *const NdkSge,
    n: u32,
    remote: Option<u32>,
    status: NtStatus,
) -> NtStatus {
    if checked::checked() {
        watch_post(qp, slot, Some(flags), status);
        let inline = OpFlags::from_bits_retain(flags).contains(OpFlags::INLINE);
        if status == STATUS_SUCCESS {
            // Inline SGEs carry no token (P12): only the remote one counts.
            watch_tokens(qp, slot, if inline { 0 } else { n }, sgl, remote);
        }
    }
    status
}

/// [`watched`] for a Receive, with M22 and M33 on its SGEs as
/// [`watched_data`] (same contract).
#[inline]
fn watched_receive(
    qp: &Object<Qp>,
    slot: &'static Slot,
    sgl: *const NdkSge,
    n: u32,
    status: NtStatus,
) -> NtStatus {
    if checked::checked() {
        watch_post(qp, slot, None, status);
        if status == STATUS_SUCCESS {
            watch_tokens(qp, slot, n, sgl, None);
        }
    }
    status
}

/// [`watched_data`] for a SendAndInvalidate; an accepted one also notes
/// `remote_token` as invalidated by the consumer (M22) when it names a
/// region of this provider instance (a peer on the same device: a peer
/// elsewhere may register the region again unseen).
#[inline]
fn watched_send_and_invalidate(
    qp: &Object<Qp>,
    slot: &'static Slot,
    flags: u32,
    sgl: *const NdkSge,
    n: u32,
    remote_token: u32,
    status: NtStatus,
) -> NtStatus {
    let status = watched_data(qp, slot, flags, sgl, n, None, status);
    if status == STATUS_SUCCESS && checked::checked() {
        let device = qp.inner.rnic.device();
        if device.key_target(remote_token).is_some() {
            checked::note_invalidated(device.serial(), remote_token);
        }
    }
    status
}

/// [`watched`] for an Invalidate; an accepted one notes the tokens of its
/// target as invalidated by the consumer (M22).
#[inline]
fn watched_invalidate(
    qp: &Object<Qp>,
    slot: &'static Slot,
    flags: u32,
    target: *mut NdkObjectHeader,
    status: NtStatus,
) -> NtStatus {
    if checked::checked() {
        watch_post(qp, slot, Some(flags), status);
        if status == STATUS_SUCCESS {
            note_invalidate(qp, target);
        }
    }
    status
}

#[inline(never)]
fn note_invalidate(qp: &Object<Qp>, target: *mut NdkObjectHeader) {
    // SAFETY: the consumer's MR or MW header, passed unchanged by the thunk
    // while the Invalidate that accepted it is still inside the QP.
    let key = match unsafe { invalidate_target(target) } {
        Some(InvalidateTarget::Mr(mr)) => mr.local_key(),
        Some(InvalidateTarget::Mw(mw)) => Some(mw.remote_key()),
        None => None,
    };
    if let Some(key) = key {
        checked::note_invalidated(qp.inner.rnic.device().serial(), key);
    }
}

/// [`watched`] for a FastRegister; for an accepted one in checked mode, the
/// region's tokens are valid again (M22) and every page must lie in a LAM
/// (M33). Same contract as [`watched_data`] (`pages` holds `page_count`
/// addresses, checked readable by the accepted post).
#[inline]
fn watched_fast_register(
    qp: &Object<Qp>,
    slot: &'static Slot,
    flags: u32,
    mr: *mut NdkMr,
    pages: *const NdkLogicalAddress,
    page_count: u32,
    status: NtStatus,
) -> NtStatus {
    if checked::checked() {
        watch_post(qp, slot, Some(flags), status);
        if status == STATUS_SUCCESS {
            watch_fast_register(qp, slot, mr, pages, page_count);
        }
    }
    status
}

#[inline(never)]
fn watch_fast_register(
    qp: &Object<Qp>,
    slot: &'static Slot,
    mr: *mut NdkMr,
    pages: *const NdkLogicalAddress,
    page_count: u32,
) {
    let device = qp.inner.rnic.device();
    // SAFETY: the consumer's MR, accepted by this FastRegister, which is
    // still inside the QP.
    if let Some(mr) = unsafe { Object::<Mr>::from_ptr(mr.cast(), slot) }
        && let Some(key) = mr.inner.rnic.local_key()
    {
        checked::note_registered(device.serial(), key);
    }
    if pages.is_null() || !pages.is_aligned() {
        return;
    }
    for i in 0..page_count as usize {
        // SAFETY: the accepted post's page array of `page_count` entries
        // (non-null and aligned, checked above), readable during the call.
        let page = unsafe { pages.cast::<u64>().wrapping_add(i).read() };
        if device
            .resolve_logical(page, crate::rnic::PAGE_SIZE)
            .is_none()
        {
            let other = checked::slot_ptr(&Slot("a FastRegister page"));
            let at = qp.as_ptr() as usize;
            checked::report_detail(Breach::M33, NdkObjectType::QP, at, slot, other, page);
            return;
        }
    }
}

/// M22 and M33 on the `n` SGEs at `sgl` of an accepted post (and its remote
/// token): a privileged-token SGE naming memory outside every LAM (M33), a
/// token the consumer invalidated (M22). Each kind reported once per post.
#[inline(never)]
fn watch_tokens(
    qp: &Object<Qp>,
    slot: &'static Slot,
    n: u32,
    sgl: *const NdkSge,
    remote: Option<u32>,
) {
    let pd = qp.inner.rnic.pd();
    let at = (NdkObjectType::QP, qp.as_ptr() as usize);
    watch_sges(pd, at, slot, n, sgl, remote);
}

/// The SRQ table's watch of an `NdkSrqReceive` in checked mode: M22 and
/// M33 on the SGEs of an accepted one, as [`watched_receive`] for a QP's.
#[inline]
fn watched_srq_receive(
    srq: &Object<Srq>,
    slot: &'static Slot,
    sgl: *const NdkSge,
    n: u32,
    status: NtStatus,
) -> NtStatus {
    if status == STATUS_SUCCESS && checked::checked() {
        watch_srq_tokens(srq, slot, n, sgl);
    }
    status
}

/// [`watch_tokens`] for the SGEs of an accepted `NdkSrqReceive`.
#[inline(never)]
fn watch_srq_tokens(srq: &Object<Srq>, slot: &'static Slot, n: u32, sgl: *const NdkSge) {
    let pd = srq.inner.rnic.pd();
    let at = (NdkObjectType::SRQ, srq.as_ptr() as usize);
    watch_sges(pd, at, slot, n, sgl, None);
}

/// M22 and M33 on the SGEs of a post accepted on the object `at` (its type
/// and address) of `pd`.
fn watch_sges(
    pd: &crate::rnic::mr::Pd,
    (object_type, at): (NdkObjectType, usize),
    slot: &'static Slot,
    n: u32,
    sgl: *const NdkSge,
    remote: Option<u32>,
) {
    let device = pd.device();
    let tag = device.serial();
    let privileged = pd.privileged_key();
    let (mut outside, mut stale) = (None, None);
    let count = if sgl.is_null() {
        0
    } else {
        (n as usize).min(MAX_SGE)
    };
    for i in 0..count {
        // SAFETY: entry `i < n` of the consumer's SGL, which the accepted
        // post read too, still readable while the call is inside.
        let sge = unsafe { sgl.wrapping_add(i).read_unaligned() };
        let token = sge.memory_region_token;
        if token == privileged {
            let len = u64::from(sge.length);
            if len != 0 && device.resolve_logical(sge.address, len).is_none() {
                outside = outside.or(Some(sge.address));
            }
        } else if checked::is_invalidated(tag, token) {
            stale = stale.or(Some((token, &Slot("an SGE"))));
        }
    }
    if let Some(token) = remote.filter(|&t| checked::is_invalidated(tag, t)) {
        stale = stale.or(Some((token, &Slot("its remote token"))));
    }
    if let Some(address) = outside {
        let other = checked::slot_ptr(&Slot("a privileged-token SGE"));
        checked::report_detail(Breach::M33, object_type, at, slot, other, address);
    }
    if let Some((token, which)) = stale {
        let other = checked::slot_ptr(which);
        checked::report_detail(Breach::M22, object_type, at, slot, other, u64::from(token));
    }
}

/// X7: the connector at `connector` is disconnected (`slot`) while
/// initiator requests posted on its QP have not completed, in checked
/// mode. The provider still flushes them and completes the Disconnect.
pub fn watch_outstanding(qp: &Object<Qp>, connector: usize, slot: &'static Slot) {
    if checked::checked() && qp.inner.rnic.queued(0).is_some() {
        let other = checked::slot_ptr(&Slot("initiator requests"));
        checked::report(Breach::X7, NdkObjectType::CONNECTOR, connector, slot, other);
    }
}

/// D5: an accepted initiator request with DEFER opens (or extends) a chain,
/// one without closes it, and an inline failure rings it (D4). X5: a post
/// refused because the QP's connection has ended.
#[inline(never)]
fn watch_post(qp: &Object<Qp>, slot: &'static Slot, flags: Option<u32>, status: NtStatus) {
    use core::sync::atomic::Ordering::Relaxed;
    if let Some(flags) = flags {
        let open =
            status == STATUS_SUCCESS && OpFlags::from_bits_retain(flags).contains(OpFlags::DEFER);
        let last = if open {
            checked::slot_ptr(slot)
        } else {
            core::ptr::null_mut()
        };
        qp.inner.chain.store(last, Relaxed);
    }
    if status == STATUS_CONNECTION_INVALID && qp.inner.rnic.state() == rqp::QpState::Disconnected {
        checked::report(
            Breach::X5,
            NdkObjectType::QP,
            qp.as_ptr() as usize,
            slot,
            checked::slot_ptr(&Slot("a disconnected QP")),
        );
    }
}

/// D5: a flush, disconnect or close (`slot`) finds a DEFER chain the
/// consumer left open, in checked mode. The provider still completes every
/// request of the chain (flush and close cancel them).
pub fn watch_chain(qp: &Object<Qp>, slot: &'static Slot) {
    if !checked::checked() {
        return;
    }
    let last = qp
        .inner
        .chain
        .swap(core::ptr::null_mut(), core::sync::atomic::Ordering::Relaxed);
    if !last.is_null() {
        checked::report(
            Breach::D5,
            NdkObjectType::QP,
            qp.as_ptr() as usize,
            slot,
            last,
        );
    }
}

// ----- the QP slots ----------------------------------------------------------

/// `NdkFlush` (E1): every pending receive and initiator request completes
/// with `STATUS_CANCELLED`; returns at once. SRQ receives stay (E4).
fn flush(qp: &Object<Qp>) {
    watch_chain(qp, &Slot("NdkFlush"));
    qp.inner.rnic.flush();
}

/// Writes the data posts (Send, SendAndInvalidate, Write), one entry each:
/// the slot's method, its name, the flags it accepts, its C parameters after
/// the QP (the context and the SGL first; `flags` named again after them)
/// and the RNIC call that queues the payload. Each method claims the
/// initiator queue (P2) and hands the consumer's SGL to [`post_data`], which
/// checks the flags and the SGL.
macro_rules! data_posts {
    ($(
        $(#[$doc:meta])*
        $method:ident = $slot:literal, $accepts:ident,
            ($context:ident, $sgl:ident, $n:ident $(, $arg:ident: $ty:ty)*), $flags:ident,
            |$rnic:ident, $payload:ident, $wr:ident| $post:expr;
    )*) => {$(
        $(#[$doc])*
        unsafe fn $method(
            qp: &Object<Qp>,
            $context: *mut c_void,
            $sgl: *const NdkSge,
            $n: u32,
            $($arg: $ty),*
        ) -> NtStatus {
            let _p2 = claim_queue(qp, INITIATOR, &Slot($slot));
            // SAFETY: every data post passes on the consumer's SGL of `n`
            // entries, with inline buffers readable during the call (P12),
            // as the slot's C contract gives them: `post_data`'s contract.
            unsafe { post_data(qp, $flags, $accepts, $sgl, $n, |$rnic, $payload, $wr| $post) }
        }
    )*};
}

data_posts! {
    /// `NdkSend` (P6–P18, D1–D6). Inline refusals: `STATUS_CONNECTION_INVALID`
    /// (not connected, P7), `STATUS_DATA_OVERRUN` (too many SGEs, P9),
    /// `STATUS_BUFFER_OVERFLOW` (too long, P10, or inline data above the inline
    /// size, P12), `STATUS_NO_MORE_ENTRIES` (queue full, P24),
    /// `STATUS_INVALID_PARAMETER` (undocumented flag, bad SGL or buffer),
    /// `STATUS_INTERNAL_ERROR` (a CQ of the QP failed, E10).
    send = "NdkSend", SEND_FLAGS, (context, sgl, n, flags: u32), flags,
        |rnic, payload, wr| rnic.post_send(context as usize, payload, wr, None);
    /// `NdkSendAndInvalidate` (M24, C2): a Send that invalidates `remote_token`
    /// at the peer; statuses as [`send`].
    send_and_invalidate = "NdkSendAndInvalidate", SEND_FLAGS,
        (context, sgl, n, flags: u32, remote_token: u32), flags,
        |rnic, payload, wr| rnic.post_send(context as usize, payload, wr, Some(remote_token));
    /// `NdkWrite` (P13, P19); statuses as [`send`].
    write = "NdkWrite", WRITE_FLAGS,
        (context, sgl, n, remote_address: u64, remote_token: u32, flags: u32), flags,
        |rnic, payload, wr| rnic.post_write(context as usize, payload, remote_address, remote_token, wr);
}

/// What the operation's own part of an initiator post returns: the RNIC's
/// answer, or a refusal the provider decided before the RNIC saw it.
type Posted = Result<Result<(), PostError>, NtStatus>;

/// The other initiator posts (Read, Bind, FastRegister, Invalidate), said
/// once around the operation's own part: claims the initiator queue (P2),
/// decodes the consumer's `flags` against those the operation `accepts`
/// ([`decode`]), then runs `post` with the QP's RNIC queue pair, the
/// request's flags and the access they grant. A refusal (undocumented
/// flags, or one `post` returns) first hands the QP's earlier deferred
/// requests to the engine ([`refuse`], D4); the RNIC's answer is mapped by
/// [`posted`].
fn initiator(
    qp: &Object<Qp>,
    slot: &'static Slot,
    flags: u32,
    accepts: OpFlags,
    local_write_alone: bool,
    post: impl FnOnce(&Arc<rqp::Qp>, WrFlags, Access) -> Posted,
) -> NtStatus {
    let _p2 = claim_queue(qp, INITIATOR, slot);
    let rnic = &qp.inner.rnic;
    let Some((wr, access)) = decode(flags, accepts, local_write_alone) else {
        return refuse(rnic, status::undocumented_flags());
    };
    match post(rnic, wr, access) {
        Ok(result) => posted(result),
        Err(status) => refuse(rnic, status),
    }
}

/// The MR or MW a post names, entered for the call of `slot`:
/// `STATUS_INVALID_PARAMETER` for a pointer that is not one of the
/// consumer's objects of type `T`.
///
/// # Safety
/// As [`Object::from_ptr`].
unsafe fn named<'a, T: Kind>(
    object: *const c_void,
    slot: &'static Slot,
) -> Result<Entered<'a, T>, NtStatus> {
    // SAFETY: the caller's contract.
    unsafe { Object::<T>::from_ptr(object, slot) }.ok_or(STATUS_INVALID_PARAMETER)
}

/// A length the consumer passed as `SIZE_T`, as the RNIC's `u64`.
fn length64(length: usize) -> Result<u64, NtStatus> {
    u64::try_from(length).map_err(|_| STATUS_INVALID_PARAMETER)
}

/// `NdkRead` (P19, P20, M26): the SGEs are the local sink (up to
/// `MaxReadRequestSge`); INLINE is not a Read flag. Statuses as [`send`].
unsafe fn read(
    qp: &Object<Qp>,
    context: *mut c_void,
    sgl: *const NdkSge,
    n: u32,
    remote_address: u64,
    remote_token: u32,
    flags: u32,
) -> NtStatus {
    initiator(
        qp,
        &Slot("NdkRead"),
        flags,
        READ_FLAGS,
        false,
        |rnic, wr, _| {
            // SAFETY: the consumer's SGL of `n` entries.
            unsafe {
                with_sges(sgl, n, |read| {
                    Ok(rnic.post_read(context as usize, read?, remote_address, remote_token, wr))
                })
            }
        },
    )
}

/// An object that takes receives: a QP with a receive queue of its own, or
/// an SRQ (Q3). [`receive`] is the `NdkReceive` and `NdkSrqReceive` of both.
trait Receives: Kind {
    /// P2 in checked mode: a receive call claims the object's receive queue.
    fn claim(object: &Object<Self>) -> Option<checked::Claimed<'_>>;
    /// Queues a receive of `sges` for the consumer's `context`.
    fn post(object: &Object<Self>, context: usize, sges: &[Sge]) -> Result<(), PostError>;
}

impl Receives for Qp {
    fn claim(object: &Object<Self>) -> Option<checked::Claimed<'_>> {
        claim_queue(object, RECEIVE, &Slot("NdkReceive"))
    }
    fn post(object: &Object<Self>, context: usize, sges: &[Sge]) -> Result<(), PostError> {
        object.inner.rnic.post_receive(context, sges)
    }
}

impl Receives for Srq {
    fn claim(object: &Object<Self>) -> Option<checked::Claimed<'_>> {
        checked::serialize(
            &object.inner.posting,
            &Slot("NdkSrqReceive"),
            Breach::P2,
            NdkObjectType::SRQ,
            object.as_ptr() as usize,
        )
    }
    fn post(object: &Object<Self>, context: usize, sges: &[Sge]) -> Result<(), PostError> {
        object.inner.rnic.post_receive(context, sges)
    }
}

/// `NdkReceive` (P8, P9) and `NdkSrqReceive` (Q3): takes no flags; allowed
/// before the QP connects. `STATUS_DATA_OVERRUN` for too many SGEs,
/// `STATUS_BUFFER_OVERFLOW` above `MaxTransferLength`,
/// `STATUS_NO_MORE_ENTRIES` when full, `STATUS_CONNECTION_INVALID` after
/// disconnect or close, `STATUS_INVALID_PARAMETER` on a QP with an SRQ (Q2)
/// or a bad SGL; on an SRQ, `STATUS_INTERNAL_ERROR` after a fatal error
/// (Q9).
unsafe fn receive<T: Receives>(
    object: &Object<T>,
    context: *mut c_void,
    sgl: *const NdkSge,
    n: u32,
) -> NtStatus {
    let _p2 = T::claim(object);
    // SAFETY: the consumer's SGL of `n` entries.
    unsafe {
        with_sges(sgl, n, |read| match read {
            Ok(sges) => posted(T::post(object, context as usize, sges)),
            Err(status) => status,
        })
    }
}

/// `NdkBind` (M18–M21): the window's token is readable when this returns
/// (M20). `STATUS_ACCESS_VIOLATION` for remote write on a region without
/// local write (M19); `STATUS_INVALID_PARAMETER` for a bad MR or MW pointer,
/// a range outside the region, a window already bound, an MR or MW of
/// another PD, an undocumented flag; otherwise as [`send`].
unsafe fn bind(
    qp: &Object<Qp>,
    context: *mut c_void,
    mr: *mut NdkMr,
    mw: *mut NdkMw,
    virtual_address: *mut c_void,
    length: usize,
    flags: u32,
) -> NtStatus {
    const SLOT: &Slot = &Slot("NdkBind");
    initiator(qp, SLOT, flags, BIND_FLAGS, false, |rnic, wr, access| {
        // SAFETY: the consumer passes its MR.
        let mr = unsafe { named::<Mr>(mr.cast(), SLOT) }?;
        // SAFETY: the consumer passes its MW.
        let mw = unsafe { named::<Mw>(mw.cast(), SLOT) }?;
        let length = length64(length)?;
        // M5, M18: the address is an index into the region, never dereferenced.
        let base = virtual_address as usize as u64;
        let (mr, mw) = (&mr.inner.rnic, &mw.inner.rnic);
        Ok(rnic.post_bind(context as usize, mr, mw, base, length, access, wr))
    })
}

/// `NdkFastRegister` (M15–M17): the page list is captured before this
/// returns, and the MR's remote token is readable then (M17).
/// `STATUS_ACCESS_VIOLATION` for remote rights on an MR initialized without
/// remote access (M15); `STATUS_INVALID_PARAMETER` for a bad MR pointer or
/// page array, a page list the MR cannot hold, a base not `FBO` plus whole
/// pages (M16), a RegisterMr MR (M1), an undocumented flag; otherwise as
/// [`send`].
unsafe fn fast_register(
    qp: &Object<Qp>,
    context: *mut c_void,
    mr: *mut NdkMr,
    page_count: u32,
    pages: *const NdkLogicalAddress,
    fbo: u32,
    length: usize,
    base_virtual_address: *mut c_void,
    flags: u32,
) -> NtStatus {
    const SLOT: &Slot = &Slot("NdkFastRegister");
    initiator(
        qp,
        SLOT,
        flags,
        FAST_REGISTER_FLAGS,
        true,
        |rnic, wr, access| {
            // SAFETY: the consumer passes its MR.
            let mr = unsafe { named::<Mr>(mr.cast(), SLOT) }?;
            let length = length64(length)?;
            // A list longer than any fast-register MR holds is refused unread.
            let count = page_count as usize;
            let readable = count == 0 || (!pages.is_null() && pages.is_aligned());
            if page_count > rnic.device().limits().max_fr_pages || !readable {
                return Err(STATUS_INVALID_PARAMETER);
            }
            let pages: &[u64] = if count == 0 {
                &[]
            } else {
                // SAFETY: the consumer's array of `AdapterPageCount` logical
                // addresses, readable during the call (checked non-null and
                // aligned above); `NDK_LOGICAL_ADDRESS` is a 64-bit integer laid
                // out as `u64`; the RNIC copies the list before the post returns
                // and keeps no borrow.
                unsafe { core::slice::from_raw_parts(pages.cast::<u64>(), count) }
            };
            // M5, M16: the base address is an index, never dereferenced.
            let base = base_virtual_address as usize as u64;
            let fbo = u64::from(fbo);
            let mr = &mr.inner.rnic;
            Ok(rnic.post_fast_register(context as usize, mr, pages, fbo, length, base, access, wr))
        },
    )
}

/// The RNIC object an Invalidate names: an MR or an MW, told apart by the
/// header's object type.
///
/// # Safety
/// As [`Object::from_ptr`].
unsafe fn invalidate_target(header: *const NdkObjectHeader) -> Option<InvalidateTarget> {
    const SLOT: &Slot = &Slot("NdkInvalidate");
    // SAFETY: the caller's contract.
    if let Some(mr) = unsafe { Object::<Mr>::from_ptr(header.cast(), SLOT) } {
        return Some(InvalidateTarget::Mr(Arc::clone(&mr.inner.rnic)));
    }
    // SAFETY: the caller's contract.
    let mw = unsafe { Object::<Mw>::from_ptr(header.cast(), SLOT) }?;
    Some(InvalidateTarget::Mw(Arc::clone(&mw.inner.rnic)))
}

/// `NdkInvalidate` (M22): a fast-registered MR or a bound MW.
/// `STATUS_INVALID_PARAMETER` for a header that is neither, a RegisterMr MR,
/// an object of another PD, an undocumented flag; otherwise as [`send`]. An
/// MR or MW with nothing to invalidate completes with
/// `STATUS_INVALID_DEVICE_REQUEST`.
unsafe fn invalidate(
    qp: &Object<Qp>,
    context: *mut c_void,
    target: *mut NdkObjectHeader,
    flags: u32,
) -> NtStatus {
    initiator(
        qp,
        &Slot("NdkInvalidate"),
        flags,
        INVALIDATE_FLAGS,
        false,
        |rnic, wr, _| {
            // SAFETY: the consumer passes the header of its MR or MW.
            let target = unsafe { invalidate_target(target) }.ok_or(STATUS_INVALID_PARAMETER)?;
            Ok(rnic.post_invalidate(context as usize, target, wr))
        },
    )
}

// ----- NDK_SRQ -----------------------------------------------------------

/// The provider state of an `NDK_SRQ`.
pub struct Srq {
    /// The RNIC shared receive queue.
    pub(super) rnic: Arc<rsrq::Srq>,
    /// Checked mode (P2): the slot of the call running on the SRQ, else
    /// null.
    posting: core::sync::atomic::AtomicPtr<Slot>,
}

impl Kind for Srq {
    // Close: the QPs attached to the SRQ hold it open (L24), so when the
    // close completes none is left to consume a receive; the receives still
    // queued have no QP, hence no CQ, to complete on, and are dropped with
    // the RNIC SRQ. A notification running keeps the close pending (the
    // serializer's hold, L21); none is delivered once it started.
}

/// Bridges the RNIC's SRQ notifications to the consumer's callback (Q4, Q9).
struct SrqNotifier {
    callback: NdkFnSrqNotificationCallback,
    context: usize,
    state: SpinLock<NotifierState>,
}

struct NotifierState {
    /// Set once the object exists.
    object: Option<Weak<Object<Srq>>>,
    /// A notification due before then (Q4: armed below the threshold at
    /// creation fires at once).
    early: Option<NtStatus>,
}

impl SrqNotifier {
    /// Calls the consumer through the SRQ's serializer, unless the close has
    /// started (L22).
    fn deliver(&self, object: &Object<Srq>, status: NtStatus) {
        // The hold keeps a close that starts meanwhile pending until the
        // callback returned (L21).
        object.hold();
        if object.is_open() {
            object.deliver(Event::Request {
                callback: self.callback,
                context: self.context,
                status,
            });
        }
        object.release();
    }

    /// Links the notifier to its object and delivers an early notification.
    fn attach(&self, object: &Arc<Object<Srq>>) {
        let early = {
            let mut state = self.state.lock();
            state.object = Some(Arc::downgrade(object));
            state.early.take()
        };
        if let Some(status) = early {
            self.deliver(object, status);
        }
    }
}

impl SrqNotify for SrqNotifier {
    fn notify(&self, event: SrqEvent) {
        let status = status::srq_event(event);
        let object = {
            let mut state = self.state.lock();
            if let Some(weak) = &state.object {
                weak.upgrade()
            } else {
                state.early = Some(status);
                None
            }
        };
        if let Some(object) = object {
            self.deliver(&object, status);
        }
    }
}

ndk_table! {
    /// The dispatch table of every object of this type.
    static SRQ_DISPATCH: NdkSrqDispatch for Srq (SRQ) at NdkSrq,
        close ndk_close_srq = "NdkCloseSrq";
    ndk_modify_srq = "NdkModifySrq" => modify_srq(ModifySrq { depth: u32, threshold: u32,
        _completion: Option<NdkFnRequestCompletion>, _context: *mut c_void }) -> NtStatus;
    ndk_srq_receive = "NdkSrqReceive" => receive(context: *mut c_void, sgl: *const NdkSge,
        n: u32) -> NtStatus, then watched_srq_receive(sgl, n);
}

/// Creates an SRQ on `pd` (L12, Q1, Q4, Q8). Inline (L7).
/// `STATUS_INVALID_PARAMETER` for a zero depth or one above `MaxSrqDepth`
/// (every depth when it is 0, Q1), or an SGE count above
/// `MaxReceiveRequestSge`; `STATUS_INSUFFICIENT_RESOURCES` otherwise.
pub(super) fn create_srq(
    pd: &Object<Pd>,
    depth: u32,
    max_sge: u32,
    threshold: u32,
    notification: Option<NdkFnSrqNotificationCallback>,
    context: usize,
) -> Result<*mut NdkSrq, NtStatus> {
    // Q8: no callback, no notifications.
    let notifier = notification.map(|callback| {
        Arc::new(SrqNotifier {
            callback,
            context,
            state: SpinLock::new(NotifierState {
                object: None,
                early: None,
            }),
        })
    });
    let notify = notifier.clone().map(|n| n as Arc<dyn SrqNotify>);
    let rnic =
        rsrq::Srq::new(&pd.inner.rnic, depth, max_sge, threshold, notify).map_err(status::srq)?;
    let posting = core::sync::atomic::AtomicPtr::new(core::ptr::null_mut());
    let object = Object::create_under(pd, Srq { rnic, posting })?;
    if let Some(notifier) = notifier {
        notifier.attach(&object);
    }
    Ok(object.as_ptr().cast())
}

/// `NdkModifySrq` (Q5–Q7): inline, so the request completion is never
/// called (L8). `STATUS_INVALID_PARAMETER` above `MaxSrqDepth`,
/// `STATUS_BUFFER_OVERFLOW` below the receives queued (unchanged then),
/// `STATUS_INTERNAL_ERROR` after a fatal error (Q9),
/// `STATUS_INSUFFICIENT_RESOURCES`.
unsafe fn modify_srq(srq: &Object<Srq>, args: ModifySrq) -> NtStatus {
    match srq.inner.rnic.modify(args.depth, args.threshold) {
        Ok(()) => STATUS_SUCCESS,
        Err(e) => status::srq(e),
    }
}

#[cfg(test)]
#[cfg(not(loom))]
pub(crate) mod tests;
