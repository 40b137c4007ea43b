//! Connections: `NDK_CONNECTOR`, `NDK_LISTENER`, `NDK_SHARED_ENDPOINT`.

use core::ffi::c_void;

use crate::abi::{
    NdkAdapter, NdkConnector, NdkFnConnectEventCallback, NdkFnCreateCompletion, NdkListener,
    NdkSharedEndpoint, NtStatus, STATUS_NOT_SUPPORTED, SockAddr,
};

/// The local IP addresses of an adapter (N1).
#[derive(Clone, Debug, Default)]
pub struct AddressSet;

pub(super) unsafe extern "system" fn create_shared_endpoint(
    _adapter: *mut NdkAdapter,
    _address: *const SockAddr,
    _address_length: u32,
    _completion: Option<NdkFnCreateCompletion>,
    _context: *mut c_void,
    _out: *mut *mut NdkSharedEndpoint,
) -> NtStatus {
    STATUS_NOT_SUPPORTED
}

pub(super) unsafe extern "system" fn create_connector(
    _adapter: *mut NdkAdapter,
    _completion: Option<NdkFnCreateCompletion>,
    _context: *mut c_void,
    _out: *mut *mut NdkConnector,
) -> NtStatus {
    STATUS_NOT_SUPPORTED
}

pub(super) unsafe extern "system" fn create_listener(
    _adapter: *mut NdkAdapter,
    _event: Option<NdkFnConnectEventCallback>,
    _event_context: *mut c_void,
    _completion: Option<NdkFnCreateCompletion>,
    _context: *mut c_void,
    _out: *mut *mut NdkListener,
) -> NtStatus {
    STATUS_NOT_SUPPORTED
}
