//! Host mode: the C entry points of the user-mode library.
//!
//! Built for any non-Windows target, the library (`libsoftndk.so`, or the
//! `rlib` for Rust tests) exposes two functions in place of NDIS's open and
//! close-adapter handlers:
//!
//! ```c
//! NTSTATUS SoftNdkOpenAdapter(const SOCKADDR *address, NDK_ADAPTER **adapter);
//! NTSTATUS SoftNdkCloseAdapter(NDK_ADAPTER *adapter);
//! ```
//!
//! Every distinct IP address (IPv4 or IPv6, N1) is one emulated NIC on the
//! process's fabric: the first open of an address creates its device, later
//! opens share it (N32), and it lives while any adapter on it is open. All
//! devices of the process reach each other, so adapters opened on 127.0.0.1
//! and 127.0.0.2 connect to one another, and an adapter reaches itself
//! (loopback, N27). The port of the address is ignored. Adapters are opened
//! with the highest version SoftNDK implements (NDKPI 1.2).
//!
//! The engine mode of a device is read from the environment variable
//! `SOFTNDK_ENGINE` when the address's device is created (its first open):
//! `deferred` selects `EngineMode::Deferred` (a worker thread runs the
//! requests), anything else or nothing the default, `EngineMode::Inline`.
//! A device keeps its mode while it lives.

use std::sync::{Mutex, OnceLock, PoisonError};

use super::adapter::{self, Adapter};
use super::cm::{self, AddressSet};
use super::object::{Object, Slot};
use crate::abi::{
    NdkAdapter, NtStatus, STATUS_INSUFFICIENT_RESOURCES, STATUS_INVALID_PARAMETER, STATUS_SUCCESS,
    SockAddr,
};
use crate::kernel::sync::Arc;
use crate::rnic::cm::{Fabric, IpAddr};
use crate::rnic::device::{Device, EngineMode};
use crate::rnic::types::Limits;

/// The fabric of this process: every adapter opened here reaches every other.
pub fn fabric() -> &'static Arc<Fabric> {
    static FABRIC: OnceLock<Arc<Fabric>> = OnceLock::new();
    FABRIC.get_or_init(Fabric::new)
}

/// Opens an adapter on the device of `ip` (created with `limits` and
/// `mode` when this is the address's first open).
///
/// # Errors
/// `STATUS_INVALID_ADDRESS` for a wildcard address,
/// `STATUS_INSUFFICIENT_RESOURCES` when memory runs out.
pub fn open(ip: IpAddr, limits: Limits, mode: EngineMode) -> Result<*mut NdkAdapter, NtStatus> {
    // One open at a time, so that two first opens of one address do not
    // make two devices.
    static OPENING: Mutex<()> = Mutex::new(());
    let _guard = OPENING.lock().unwrap_or_else(PoisonError::into_inner);
    let fabric = fabric();
    let device = match fabric.device_of(ip) {
        Some(device) => device,
        None => Device::new(limits, mode).map_err(|_| STATUS_INSUFFICIENT_RESOURCES)?,
    };
    let set = AddressSet::register(fabric, &device, &[ip]).map_err(cm::status)?;
    adapter::open(&device, adapter::HIGHEST_VERSION, set)
}

/// `SoftNdkOpenAdapter`: opens an NDK adapter on the emulated NIC of
/// `address`, a `SOCKADDR_IN` (`AF_INET` = 2) or `SOCKADDR_IN6` (`AF_INET6` =
/// 23, the Windows value), and stores it in `*adapter`.
///
/// Returns `STATUS_SUCCESS`, `STATUS_INVALID_PARAMETER` (null pointer,
/// other family), `STATUS_INVALID_ADDRESS` (the wildcard address) or
/// `STATUS_INSUFFICIENT_RESOURCES`.
///
/// # Safety
/// `address` points to a readable `SOCKADDR_IN` or `SOCKADDR_IN6` as its
/// family says; `adapter` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "system" fn SoftNdkOpenAdapter(
    address: *const SockAddr,
    adapter: *mut *mut NdkAdapter,
) -> NtStatus {
    if address.is_null() || adapter.is_null() {
        return STATUS_INVALID_PARAMETER;
    }
    // SAFETY: non-null; the caller's structure starts with its family.
    let family = unsafe { address.cast::<u16>().read_unaligned() };
    let Some(length) = cm::sockaddr_len(family) else {
        return STATUS_INVALID_PARAMETER;
    };
    // SAFETY: the caller's structure is the one its family names, `length`
    // bytes.
    let endpoint = match unsafe { cm::read_address(address, length) } {
        Ok(endpoint) => endpoint,
        Err(status) => return status,
    };
    match open(endpoint.ip, Limits::DEFAULT, engine_mode_from_env()) {
        Ok(opened) => {
            // SAFETY: the caller's out-pointer (checked non-null).
            unsafe { adapter.write_unaligned(opened) };
            STATUS_SUCCESS
        }
        Err(status) => status,
    }
}

/// The engine mode `SOFTNDK_ENGINE` asks for (see the module documentation).
fn engine_mode_from_env() -> EngineMode {
    match std::env::var_os("SOFTNDK_ENGINE") {
        Some(value) if value == "deferred" => EngineMode::Deferred,
        _ => EngineMode::default(),
    }
}

/// `SoftNdkCloseAdapter`: closes an adapter from `SoftNdkOpenAdapter`. Like
/// NDIS's close handler it blocks until every object created from the
/// adapter is closed and every callback has returned (L27); the consumer
/// closes its objects first and never calls this from a callback (L28).
///
/// Returns `STATUS_SUCCESS`, or `STATUS_INVALID_PARAMETER` for a pointer
/// that is not an open adapter.
///
/// # Safety
/// `adapter` is null or was returned by `SoftNdkOpenAdapter` and not closed.
#[unsafe(no_mangle)]
pub unsafe extern "system" fn SoftNdkCloseAdapter(adapter: *mut NdkAdapter) -> NtStatus {
    // SAFETY: the caller's contract.
    if unsafe { Object::<Adapter>::from_ptr(adapter.cast(), &Slot("SoftNdkCloseAdapter")) }
        .is_none()
    {
        return STATUS_INVALID_PARAMETER;
    }
    // SAFETY: an open adapter of ours (checked above), not used afterwards.
    unsafe { adapter::close(adapter) };
    STATUS_SUCCESS
}
