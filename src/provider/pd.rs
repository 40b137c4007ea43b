//! `NDK_PD`: protection domains, and the creation of what lives in one
//! (regions, windows, SRQs, QPs).

#![expect(
    clippy::too_many_arguments,
    reason = "a slot's method takes the C slot's parameters (dispatch::ndk_table)"
)]

use core::ffi::c_void;

use super::adapter::Adapter;
use super::dispatch::ndk_table;
use super::object::{Kind, Object, Slot};
use super::{Completion, created, mr, qp, status};
use crate::abi::{
    Boolean, GroupAffinity, NdkCq, NdkFnCreateCompletion, NdkFnSrqNotificationCallback, NdkMr,
    NdkMw, NdkObjectType, NdkPd, NdkPdDispatch, NdkQp, NdkSrq, NtStatus, STATUS_INVALID_PARAMETER,
};
use crate::kernel::sync::Arc;
use crate::rnic::mr as rmr;
use crate::rnic::qp::QpConfig;

/// The provider state of an `NDK_PD`.
pub struct Pd {
    /// The RNIC protection domain.
    pub(super) rnic: Arc<rmr::Pd>,
}

impl Kind for Pd {
    const TYPE: NdkObjectType = NdkObjectType::PD;
}

ndk_table! {
    /// The `NDK_PD_DISPATCH` of every PD.
    static DISPATCH: NdkPdDispatch for Pd at NdkPd,
        close ndk_close_pd = "NdkClosePd";
    ndk_create_mr = "NdkCreateMr" => create_mr(fast_register: Boolean, completion: Option<NdkFnCreateCompletion>, context: *mut c_void, out: *mut *mut NdkMr) -> NtStatus;
    ndk_create_mw = "NdkCreateMw" => create_mw(completion: Option<NdkFnCreateCompletion>, context: *mut c_void, out: *mut *mut NdkMw) -> NtStatus;
    ndk_create_srq = "NdkCreateSrq" => create_srq(depth: u32, max_sge: u32, threshold: u32, notification: Option<NdkFnSrqNotificationCallback>, notification_context: *mut c_void, affinity: *const GroupAffinity, completion: Option<NdkFnCreateCompletion>, context: *mut c_void, out: *mut *mut NdkSrq) -> NtStatus;
    ndk_create_qp = "NdkCreateQp" => create_qp(receive_cq: *mut NdkCq, initiator_cq: *mut NdkCq, qp_context: *mut c_void, receive_depth: u32, initiator_depth: u32, max_receive_sge: u32, max_initiator_sge: u32, inline_size: u32, completion: Option<NdkFnCreateCompletion>, context: *mut c_void, out: *mut *mut NdkQp) -> NtStatus;
    ndk_create_qp_with_srq = "NdkCreateQpWithSrq" => create_qp_with_srq(receive_cq: *mut NdkCq, initiator_cq: *mut NdkCq, srq: *mut NdkSrq, qp_context: *mut c_void, initiator_depth: u32, max_initiator_sge: u32, inline_size: u32, completion: Option<NdkFnCreateCompletion>, context: *mut c_void, out: *mut *mut NdkQp) -> NtStatus;
    ndk_get_privileged_memory_region_token = "NdkGetPrivilegedMemoryRegionToken" => privileged_token(token: *mut u32);
}

/// Creates a PD on `adapter`.
pub(super) fn create(adapter: &Object<Adapter>) -> Result<*mut NdkPd, NtStatus> {
    let rnic = rmr::Pd::new(adapter.inner.device()).map_err(status::resource)?;
    let object = Object::create_under(adapter, Pd { rnic })?;
    Ok(object.as_ptr().cast())
}

unsafe fn create_mr(
    pd: &Object<Pd>,
    fast_register: Boolean,
    completion: Option<NdkFnCreateCompletion>,
    context: *mut c_void,
    out: *mut *mut NdkMr,
) -> NtStatus {
    // SAFETY: the consumer's out-pointer, completion and its context.
    unsafe {
        created(out, (completion, context), || {
            mr::create_mr(pd, fast_register != 0)
        })
    }
}

unsafe fn create_mw(
    pd: &Object<Pd>,
    completion: Option<NdkFnCreateCompletion>,
    context: *mut c_void,
    out: *mut *mut NdkMw,
) -> NtStatus {
    // SAFETY: the consumer's out-pointer, completion and its context.
    unsafe { created(out, (completion, context), || mr::create_mw(pd)) }
}

unsafe fn create_srq(
    pd: &Object<Pd>,
    depth: u32,
    max_sge: u32,
    threshold: u32,
    notification: Option<NdkFnSrqNotificationCallback>,
    notification_context: *mut c_void,
    _affinity: *const GroupAffinity,
    completion: Option<NdkFnCreateCompletion>,
    context: *mut c_void,
    out: *mut *mut NdkSrq,
) -> NtStatus {
    let notification_context = notification_context as usize;
    let create = || {
        qp::create_srq(
            pd,
            depth,
            max_sge,
            threshold,
            notification,
            notification_context,
        )
    };
    // SAFETY: the consumer's out-pointer, completion and its context.
    unsafe { created(out, (completion, context), create) }
}

unsafe fn create_qp(
    pd: &Object<Pd>,
    receive_cq: *mut NdkCq,
    initiator_cq: *mut NdkCq,
    qp_context: *mut c_void,
    receive_depth: u32,
    initiator_depth: u32,
    max_receive_sge: u32,
    max_initiator_sge: u32,
    inline_size: u32,
    completion: Option<NdkFnCreateCompletion>,
    context: *mut c_void,
    out: *mut *mut NdkQp,
) -> NtStatus {
    let config = QpConfig {
        context: qp_context as usize,
        receive_depth,
        initiator_depth,
        max_receive_sge,
        max_initiator_sge,
        inline_size,
    };
    let cqs = (receive_cq, initiator_cq);
    // SAFETY: the consumer's CQs and out-pointer.
    unsafe {
        new_qp(
            pd,
            cqs,
            core::ptr::null_mut(),
            config,
            (out, (completion, context)),
            &Slot("NdkCreateQp"),
        )
    }
}

/// Creates a QP (`qp::create_qp`) and writes it to `out`.
///
/// # Safety
/// As `qp::create_qp` and [`created`].
unsafe fn new_qp(
    pd: &Object<Pd>,
    (receive_cq, initiator_cq): (*mut NdkCq, *mut NdkCq),
    srq: *mut NdkSrq,
    config: QpConfig,
    (out, completion): (*mut *mut NdkQp, Completion),
    slot: &'static Slot,
) -> NtStatus {
    // SAFETY: the caller's contract.
    let create = || unsafe { qp::create_qp(pd, receive_cq, initiator_cq, srq, config, slot) };
    // SAFETY: the caller's contract.
    unsafe { created(out, completion, create) }
}

unsafe fn create_qp_with_srq(
    pd: &Object<Pd>,
    receive_cq: *mut NdkCq,
    initiator_cq: *mut NdkCq,
    srq: *mut NdkSrq,
    qp_context: *mut c_void,
    initiator_depth: u32,
    max_initiator_sge: u32,
    inline_size: u32,
    completion: Option<NdkFnCreateCompletion>,
    context: *mut c_void,
    out: *mut *mut NdkQp,
) -> NtStatus {
    if srq.is_null() {
        return STATUS_INVALID_PARAMETER;
    }
    // Q2: the receives come from the SRQ.
    let config = QpConfig {
        context: qp_context as usize,
        initiator_depth,
        max_initiator_sge,
        inline_size,
        ..QpConfig::default()
    };
    let cqs = (receive_cq, initiator_cq);
    // SAFETY: the consumer's CQs, SRQ and out-pointer.
    unsafe {
        new_qp(
            pd,
            cqs,
            srq,
            config,
            (out, (completion, context)),
            &Slot("NdkCreateQpWithSrq"),
        )
    }
}

/// `NdkGetPrivilegedMemoryRegionToken` (M27).
unsafe fn privileged_token(pd: &Object<Pd>, token: *mut u32) {
    if token.is_null() {
        return;
    }
    // SAFETY: the consumer's out ULONG (checked non-null).
    unsafe { token.write_unaligned(pd.inner.rnic.privileged_key()) };
}
