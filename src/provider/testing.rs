//! Test fixtures shared by the provider's and the driver's unit tests: the
//! objects a test needs before the one it checks, made through the C
//! dispatch tables as a consumer makes them.

use alloc::vec::Vec;
use core::ffi::c_void;
use core::ptr::{null, null_mut};

use crate::abi::{
    NdkAdapter, NdkAdapterDispatch, NdkCq, NdkCqDispatch, NdkPd, NdkPdDispatch, NdkQp, NdkResult,
    NtStatus, STATUS_SUCCESS,
};

/// The dispatch table of a live NDK object (its `Dispatch` field at 0x28).
#[expect(clippy::cast_ptr_alignment, reason = "read with read_unaligned")]
fn table<T>(object: *const c_void) -> &'static T {
    let slot = object.cast::<u8>().wrapping_add(0x28).cast::<*const T>();
    // SAFETY: a live NDK object of the test; its Dispatch field is at 0x28.
    let table = unsafe { slot.read_unaligned() };
    // SAFETY: the provider's dispatch tables are statics.
    unsafe { &*table }
}

unsafe extern "system" fn on_cq(_ctx: *mut c_void, _status: NtStatus) {}

/// A CQ of `depth` on `adapter`, with a notification callback that does
/// nothing.
pub(crate) fn new_cq(adapter: *mut NdkAdapter, depth: u32) -> *mut NdkCq {
    let d: &NdkAdapterDispatch = table(adapter.cast());
    let mut cq = null_mut();
    let (affinity, out) = (null(), &raw mut cq);
    // SAFETY: a live adapter of the test; the out-pointer is ours.
    let status = unsafe {
        (d.ndk_create_cq)(
            adapter,
            depth,
            Some(on_cq),
            null_mut(),
            affinity,
            None,
            null_mut(),
            out,
        )
    };
    assert_eq!(status, STATUS_SUCCESS);
    assert!(!cq.is_null(), "L7: the create wrote its out-pointer");
    cq
}

/// A PD on `adapter`.
pub(crate) fn new_pd(adapter: *mut NdkAdapter) -> *mut NdkPd {
    let d: &NdkAdapterDispatch = table(adapter.cast());
    let mut pd = null_mut();
    // SAFETY: a live adapter of the test; the out-pointer is ours.
    let status = unsafe { (d.ndk_create_pd)(adapter, None, null_mut(), &raw mut pd) };
    assert_eq!(status, STATUS_SUCCESS);
    assert!(!pd.is_null(), "L7: the create wrote its out-pointer");
    pd
}

/// A QP on `pd` whose queues both complete on `cq`: 16 requests deep each,
/// two SGEs a request, 64 inline bytes.
pub(crate) fn new_qp(pd: *mut NdkPd, cq: *mut NdkCq) -> *mut NdkQp {
    let d: &NdkPdDispatch = table(pd.cast());
    let mut qp = null_mut();
    let (depths, sges, inline) = ((16, 16), (2, 2), 64);
    // SAFETY: a live PD and CQ of the test; the out-pointer is ours.
    let status = unsafe {
        (d.ndk_create_qp)(
            pd,
            cq,
            cq,
            null_mut(),
            depths.0,
            depths.1,
            sges.0,
            sges.1,
            inline,
            None,
            null_mut(),
            &raw mut qp,
        )
    };
    assert_eq!(status, STATUS_SUCCESS);
    assert!(!qp.is_null(), "L7: the create wrote its out-pointer");
    qp
}

/// The completions waiting in `cq` (up to 16), as (request context, status).
pub(crate) fn cq_results(cq: *mut NdkCq) -> Vec<(usize, NtStatus)> {
    let empty = NdkResult {
        status: 0,
        bytes_transferred: 0,
        qp_context: null_mut(),
        request_context: null_mut(),
    };
    let mut out = [empty; 16];
    let d: &NdkCqDispatch = table(cq.cast());
    // SAFETY: a live CQ of the test; room for 16 results.
    let n = unsafe { (d.ndk_get_cq_results)(cq, out.as_mut_ptr(), 16) };
    assert!(n <= 16, "never more results than asked for");
    out.iter()
        .take(n as usize)
        .map(|r| (r.request_context as usize, r.status))
        .collect()
}
