//! `NDK_QP` and `NDK_SRQ` over the RNIC's queue pairs and SRQs.

use super::object::Object;
use super::pd::Pd;
use crate::abi::{
    NdkCq, NdkFnSrqNotificationCallback, NdkQp, NdkSrq, NtStatus, STATUS_NOT_SUPPORTED,
};
use crate::rnic::qp::QpConfig;

/// Creates an SRQ on `pd` (L12, Q1, Q4, Q8).
pub(super) fn create_srq(
    _pd: &Object<Pd>,
    _depth: u32,
    _max_sge: u32,
    _threshold: u32,
    _notification: Option<NdkFnSrqNotificationCallback>,
    _context: usize,
) -> Result<*mut NdkSrq, NtStatus> {
    Err(STATUS_NOT_SUPPORTED)
}

/// Creates a QP on `pd` (L13, Q2).
///
/// # Safety
/// The CQ and SRQ pointers are the consumer's objects (or null).
pub(super) unsafe fn create_qp(
    _pd: &Object<Pd>,
    _receive_cq: *mut NdkCq,
    _initiator_cq: *mut NdkCq,
    _srq: *mut NdkSrq,
    _config: QpConfig,
) -> Result<*mut NdkQp, NtStatus> {
    Err(STATUS_NOT_SUPPORTED)
}
