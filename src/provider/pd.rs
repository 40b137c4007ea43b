//! `NDK_PD`: protection domains, and the creation of what lives in one
//! (regions, windows, SRQs, QPs).

use core::ffi::c_void;
use core::ptr::null_mut;

use super::adapter::Adapter;
use super::dispatch::ndk_table;
use super::mr::{create_mr, create_mw};
use super::object::{Kind, Object, Slot};
use super::{qp, status};
use crate::abi::{
    Boolean, GroupAffinity, NdkCq, NdkFnSrqNotificationCallback, NdkMr, NdkMw, NdkPd,
    NdkPdDispatch, NdkQp, NdkSrq, NtStatus, STATUS_INVALID_PARAMETER,
};
use crate::kernel::sync::Arc;
use crate::rnic::mr as rmr;
use crate::rnic::qp::QpConfig;

/// The provider state of an `NDK_PD`.
pub struct Pd {
    /// The RNIC protection domain.
    pub(super) rnic: Arc<rmr::Pd>,
}

ndk_table! {
    /// The `NDK_PD_DISPATCH` of every PD.
    static DISPATCH: NdkPdDispatch for Pd (PD) at NdkPd,
        close ndk_close_pd = "NdkClosePd";
    ndk_create_mr = "NdkCreateMr" => create_mr(fast_register: Boolean), creates NdkMr;
    ndk_create_mw = "NdkCreateMw" => create_mw(), creates NdkMw;
    ndk_create_srq = "NdkCreateSrq" => create_srq(CreateSrq { depth: u32, max_sge: u32,
        threshold: u32, notification: Option<NdkFnSrqNotificationCallback>,
        notification_context: *mut c_void, _affinity: *const GroupAffinity }), creates NdkSrq;
    ndk_create_qp = "NdkCreateQp" => create_qp(CreateQp { receive_cq: *mut NdkCq,
        initiator_cq: *mut NdkCq, qp_context: *mut c_void, receive_depth: u32,
        initiator_depth: u32, max_receive_sge: u32, max_initiator_sge: u32, inline_size: u32 }),
        creates NdkQp;
    ndk_create_qp_with_srq = "NdkCreateQpWithSrq" => create_qp_with_srq(CreateQpWithSrq {
        receive_cq: *mut NdkCq, initiator_cq: *mut NdkCq, srq: *mut NdkSrq, qp_context: *mut c_void,
        initiator_depth: u32, max_initiator_sge: u32, inline_size: u32 }), creates NdkQp;
    ndk_get_privileged_memory_region_token = "NdkGetPrivilegedMemoryRegionToken" => privileged_token(token: *mut u32);
}

impl Kind for Pd {}

/// Creates a PD on `adapter` (`NdkCreatePd`, L7: inline).
pub(super) fn create_pd(adapter: &Object<Adapter>) -> Result<*mut NdkPd, NtStatus> {
    let rnic = rmr::Pd::new(adapter.inner.device()).map_err(status::resource)?;
    let object = Object::create_under(adapter, Pd { rnic })?;
    Ok(object.as_ptr().cast())
}

/// `NdkCreateSrq` (L7: inline; `qp::create_srq`). The `Affinity` is
/// accepted and not followed, as for a CQ (I7).
fn create_srq(pd: &Object<Pd>, args: CreateSrq) -> Result<*mut NdkSrq, NtStatus> {
    let (depth, max_sge, threshold) = (args.depth, args.max_sge, args.threshold);
    let context = args.notification_context as usize;
    qp::create_srq(pd, depth, max_sge, threshold, args.notification, context)
}

/// `NdkCreateQp` (L7: inline; `qp::create_qp`): a QP with a receive queue of
/// its own.
///
/// # Safety
/// The CQ pointers are null or the consumer's objects (L14).
unsafe fn create_qp(pd: &Object<Pd>, args: CreateQp) -> Result<*mut NdkQp, NtStatus> {
    let config = QpConfig {
        context: args.qp_context as usize,
        receive_depth: args.receive_depth,
        initiator_depth: args.initiator_depth,
        max_receive_sge: args.max_receive_sge,
        max_initiator_sge: args.max_initiator_sge,
        inline_size: args.inline_size,
    };
    let (receive_cq, initiator_cq, srq) = (args.receive_cq, args.initiator_cq, null_mut());
    let slot = &Slot("NdkCreateQp");
    // SAFETY: the caller's contract.
    unsafe { qp::create_qp(pd, receive_cq, initiator_cq, srq, config, slot) }
}

/// `NdkCreateQpWithSrq` (L7: inline; `qp::create_qp`): a QP whose receives
/// come from the SRQ (Q2).
///
/// # Safety
/// The CQ and SRQ pointers are null or the consumer's objects (L14).
unsafe fn create_qp_with_srq(
    pd: &Object<Pd>,
    args: CreateQpWithSrq,
) -> Result<*mut NdkQp, NtStatus> {
    if args.srq.is_null() {
        return Err(STATUS_INVALID_PARAMETER);
    }
    let config = QpConfig {
        context: args.qp_context as usize,
        initiator_depth: args.initiator_depth,
        max_initiator_sge: args.max_initiator_sge,
        inline_size: args.inline_size,
        ..QpConfig::default()
    };
    let (receive_cq, initiator_cq, srq) = (args.receive_cq, args.initiator_cq, args.srq);
    let slot = &Slot("NdkCreateQpWithSrq");
    // SAFETY: the caller's contract.
    unsafe { qp::create_qp(pd, receive_cq, initiator_cq, srq, config, slot) }
}

/// `NdkGetPrivilegedMemoryRegionToken` (M27).
unsafe fn privileged_token(pd: &Object<Pd>, token: *mut u32) {
    if token.is_null() {
        return;
    }
    // SAFETY: the consumer's out ULONG (checked non-null).
    unsafe { token.write_unaligned(pd.inner.rnic.privileged_key()) };
}
