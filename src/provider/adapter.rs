//! `NDK_ADAPTER`: open, close, adapter information, CQ and PD creation, LAMs.
//!
//! An adapter is one opening of an emulated NIC ([`Device`]); several
//! openings share the device and their objects work together (N32). It is
//! opened by the driver's open handler (or `SoftNdkOpenAdapter` in host
//! mode) and closed by the matching close, which blocks until every object
//! created from it has closed and every callback has returned (L27).

use core::ffi::c_void;

use super::cm::{self, create_connector, create_listener, create_shared_endpoint};
use super::cq;
use super::dispatch::ndk_table;
use super::object::{Kind, Object, Slot};
use super::pd::create_pd;
use crate::abi::{
    AdapterFlags, Guid, Mdl, NDK_VERSION_1_2, NdkAdapter, NdkAdapterDispatch, NdkAdapterInfo,
    NdkExtensionInterface, NdkFnCqNotificationCallback, NdkFnRequestCompletion,
    NdkLogicalAddressMapping, NdkVersion, NtStatus, STATUS_BUFFER_TOO_SMALL,
    STATUS_INSUFFICIENT_RESOURCES, STATUS_INVALID_PARAMETER, STATUS_NOT_SUPPORTED, STATUS_SUCCESS,
};
use crate::abi::{
    GroupAffinity, NdkConnector, NdkCq, NdkFnConnectEventCallback, NdkListener, NdkPd,
    NdkSharedEndpoint, SockAddr,
};
use crate::kernel::sync::Arc;
use crate::rnic::device::Device;
use crate::rnic::memory::{LamId, Span};

/// The provider state of an `NDK_ADAPTER`.
pub struct Adapter {
    device: Arc<Device>,
    version: NdkVersion,
    /// The local addresses connections of this adapter may use (N1).
    addresses: cm::AddressSet,
}

impl Adapter {
    /// The emulated NIC.
    pub const fn device(&self) -> &Arc<Device> {
        &self.device
    }

    /// The negotiated version (A4).
    pub const fn version(&self) -> NdkVersion {
        self.version
    }

    /// The adapter's local addresses.
    pub const fn addresses(&self) -> &cm::AddressSet {
        &self.addresses
    }
}

ndk_table! {
    /// The dispatch table of every object of this type.
    static DISPATCH: NdkAdapterDispatch for Adapter (ADAPTER) at NdkAdapter;
    ndk_query_adapter_info = "NdkQueryAdapterInfo" => query_adapter_info(
        info_out: *mut NdkAdapterInfo, buffer_size: *mut u32) -> NtStatus;
    ndk_create_cq = "NdkCreateCq" => create_cq(CreateCq { depth: u32,
        notification: Option<NdkFnCqNotificationCallback>, notification_context: *mut c_void,
        _affinity: *const GroupAffinity }), creates NdkCq;
    ndk_create_pd = "NdkCreatePd" => create_pd(), creates NdkPd;
    ndk_create_shared_endpoint = "NdkCreateSharedEndpoint" => create_shared_endpoint(
        address: *const SockAddr, address_length: u32), creates NdkSharedEndpoint;
    ndk_create_connector = "NdkCreateConnector" => create_connector(), creates NdkConnector;
    ndk_create_listener = "NdkCreateListener" => create_listener(
        event: Option<NdkFnConnectEventCallback>, event_context: *mut c_void), creates NdkListener;
    ndk_build_lam = "NdkBuildLAM" => build_lam(BuildLam { mdl: *mut Mdl, length: usize,
        _completion: Option<NdkFnRequestCompletion>, _context: *mut c_void,
        lam: *mut NdkLogicalAddressMapping, lam_size: *mut u32, fbo: *mut u32 }) -> NtStatus;
    ndk_release_lam = "NdkReleaseLAM" => release_lam(lam: *mut NdkLogicalAddressMapping);
}

impl Kind for Adapter {}

/// The highest NDKPI version SoftNDK implements.
pub const HIGHEST_VERSION: NdkVersion = NDK_VERSION_1_2;

/// Opens an adapter on `device` with the already negotiated `version` (A2–A4).
///
/// # Errors
/// `STATUS_INSUFFICIENT_RESOURCES` when memory runs out (A5).
pub fn open(
    device: &Arc<Device>,
    version: NdkVersion,
    addresses: cm::AddressSet,
) -> Result<*mut NdkAdapter, NtStatus> {
    let adapter = Adapter {
        device: Arc::clone(device),
        version,
        addresses,
    };
    let object = Object::create(version, adapter, [None, None, None, None])
        .ok_or(STATUS_INSUFFICIENT_RESOURCES)?;
    Ok(object.as_ptr().cast())
}

/// Closes an adapter: returns once every object created from it is closed
/// and every callback on them has returned (L26, L27). PASSIVE_LEVEL. A call
/// of the consumer's still inside the adapter is reported (L17), naming
/// `slot` (the close: NDIS's handler or `SoftNdkCloseAdapter`). `false` when
/// `adapter` is not an adapter of ours (nothing done).
///
/// # Safety
/// `adapter` was returned by [`open`] and is not used afterwards.
pub unsafe fn close(adapter: *mut NdkAdapter, slot: &'static Slot) -> bool {
    // SAFETY: the caller's contract.
    let Some(object) = (unsafe { super::object::close_slotless::<Adapter>(adapter.cast(), slot) })
    else {
        return false;
    };
    // The consumer closes the adapter last (L24 allows otherwise: then this
    // waits for the successors' closes, which the consumer still owes).
    while !object.is_finished() {
        crate::kernel::time::sleep_passive_100ns(10_000);
    }
    true
}

/// The adapter's information: the true limits of the emulated NIC (A8) and
/// the features this provider implements; iWARP with the wire's limits when
/// the NIC is on the wire (`on_wire`), else RoCE v2
/// (`iface::FABRIC_TECHNOLOGY`). `RDMA_READ_SINK_NOT_REQUIRED` frees
/// consumers from M8's read-sink flags (M9); `CQ_RESIZE_SUPPORTED` is what
/// lets them call ResizeCq (K3); moderation is not reported, so they do
/// not call ControlCqInterruptModeration (K9, and K8 when they do).
pub fn info(device: &Device, version: NdkVersion, on_wire: bool) -> NdkAdapterInfo {
    let flags = AdapterFlags::RDMA_READ_SINK_NOT_REQUIRED
        | AdapterFlags::RDMA_READ_LOCAL_INVALIDATE_SUPPORTED
        | AdapterFlags::CQ_RESIZE_SUPPORTED
        | AdapterFlags::LOOPBACK_CONNECTIONS_SUPPORTED;
    NdkAdapterInfo {
        version,
        ..super::iface::adapter_info_for(device.limits(), flags, on_wire)
    }
}

/// `NdkQueryAdapterInfo` (A7, L10).
unsafe fn query_adapter_info(
    adapter: &Object<Adapter>,
    info_out: *mut NdkAdapterInfo,
    buffer_size: *mut u32,
) -> NtStatus {
    if buffer_size.is_null() {
        return STATUS_INVALID_PARAMETER;
    }
    let needed = u32::try_from(core::mem::size_of::<NdkAdapterInfo>()).unwrap_or(u32::MAX);
    // SAFETY: `buffer_size` is a valid in/out ULONG (checked non-null).
    let have = unsafe { buffer_size.read_unaligned() };
    if info_out.is_null() || have < needed {
        // SAFETY: as above.
        unsafe { buffer_size.write_unaligned(needed) };
        return STATUS_BUFFER_TOO_SMALL;
    }
    let value = info(
        &adapter.inner.device,
        adapter.inner.version,
        adapter.inner.addresses.on_wire(),
    );
    // SAFETY: `info_out` has room for `needed` bytes (the consumer said so).
    unsafe { info_out.write_unaligned(value) };
    // SAFETY: as above.
    unsafe { buffer_size.write_unaligned(needed) };
    STATUS_SUCCESS
}

/// `NdkCreateCq` (L12; L7: inline): the notification callback is required.
/// The `Affinity` is accepted and not followed: a notification runs on
/// whichever thread completes the work, which I7 allows ("consumers cannot
/// count on it").
fn create_cq(adapter: &Object<Adapter>, args: CreateCq) -> Result<*mut NdkCq, NtStatus> {
    let notification = args.notification.ok_or(STATUS_INVALID_PARAMETER)?;
    let context = args.notification_context as usize;
    cq::create(adapter, args.depth, notification, context)
}

/// `NdkBuildLam` (M28–M31, M36): inline, never pending.
unsafe fn build_lam(adapter: &Object<Adapter>, args: BuildLam) -> NtStatus {
    let (mdl, length, lam) = (args.mdl, args.length, args.lam);
    let (lam_size, fbo) = (args.lam_size, args.fbo);
    if lam_size.is_null() || fbo.is_null() || mdl.is_null() || length == 0 {
        return STATUS_INVALID_PARAMETER;
    }
    // SAFETY: the consumer's MDL chain is locked and describes at least
    // `length` bytes, and stays so until ReleaseLam (M3, M30).
    let spans = match unsafe { super::map_mdl(mdl, length) } {
        Ok(spans) => spans,
        Err(status) => return status,
    };
    // M28: the chain's MDLs may be mapped apart: the page array lists each
    // one's pages (`mdl::lam_plan`).
    let Some(plan) = super::mdl::lam_plan(&spans) else {
        return STATUS_INVALID_PARAMETER;
    };
    let header = core::mem::offset_of!(NdkLogicalAddressMapping, adapter_page_array);
    let needed = plan
        .pages
        .checked_mul(8)
        .and_then(|b| b.checked_add(header));
    let Some(needed) = needed.and_then(|n| u32::try_from(n).ok()) else {
        return STATUS_INVALID_PARAMETER;
    };
    // SAFETY: `lam_size` is a valid in/out ULONG (checked non-null).
    let have = unsafe { lam_size.read_unaligned() };
    if lam.is_null() || have < needed {
        // M29: the size needed.
        // SAFETY: as above.
        unsafe { lam_size.write_unaligned(needed) };
        return STATUS_BUFFER_TOO_SMALL;
    }
    // The LAM covers whole pages: its memory is the pages of the mappings.
    let memory = match super::mdl::lam_memory(&spans) {
        Ok(memory) => memory,
        Err(status) => return status,
    };
    let Ok(id) = adapter.inner.device.build_lam_all(&memory) else {
        return STATUS_INSUFFICIENT_RESOURCES;
    };
    // SAFETY: `lam` has room for `needed` bytes: the header and
    // `plan.pages` entries (checked above); every write below stays within
    // them.
    unsafe { write_lam(lam, id, &spans, plan.pages) };
    // SAFETY: as above.
    unsafe { lam_size.write_unaligned(needed) };
    // SAFETY: `fbo` is a valid out ULONG (checked non-null); offset < 4096.
    unsafe { fbo.write_unaligned(u32::try_from(plan.fbo).unwrap_or(0)) };
    STATUS_SUCCESS
}

/// Fills a LAM: the provider's id in `AdapterContext`, then the pages of
/// `spans` (`mdl::for_each_lam_page`, `pages` of them).
///
/// # Safety
/// `lam` points to at least `0x10 + 8 * pages` writable bytes.
#[expect(clippy::cast_ptr_alignment, reason = "every write is write_unaligned")]
unsafe fn write_lam(lam: *mut NdkLogicalAddressMapping, id: LamId, spans: &[Span], pages: usize) {
    let base = lam.cast::<u8>();
    let at = |offset: usize| base.wrapping_add(offset);
    let context = at(core::mem::offset_of!(
        NdkLogicalAddressMapping,
        adapter_context
    ))
    .cast::<usize>();
    // SAFETY: inside the caller's buffer; `AdapterContext` is the provider's.
    unsafe { context.write_unaligned(usize::try_from(id.0).unwrap_or(0)) };
    let count = at(core::mem::offset_of!(
        NdkLogicalAddressMapping,
        adapter_page_count
    ))
    .cast::<u32>();
    // SAFETY: inside the caller's buffer.
    unsafe { count.write_unaligned(u32::try_from(pages).unwrap_or(u32::MAX)) };
    let padding = at(core::mem::offset_of!(NdkLogicalAddressMapping, padding_0c)).cast::<u32>();
    // SAFETY: inside the caller's buffer.
    unsafe { padding.write_unaligned(0) };
    let array = at(core::mem::offset_of!(
        NdkLogicalAddressMapping,
        adapter_page_array
    ))
    .cast::<u64>();
    let mut n = 0_usize;
    super::mdl::for_each_lam_page(spans, |logical| {
        if n < pages {
            // SAFETY: entry `n < pages` lies inside the caller's buffer.
            unsafe { array.wrapping_add(n).write_unaligned(logical) };
            n += 1;
        }
    });
}

/// `NdkReleaseLam` (M32): forgets the mapping; the MDL is untouched.
unsafe fn release_lam(adapter: &Object<Adapter>, lam: *mut NdkLogicalAddressMapping) {
    if lam.is_null() {
        return;
    }
    let context = lam.cast::<u8>().wrapping_add(core::mem::offset_of!(
        NdkLogicalAddressMapping,
        adapter_context
    ));
    // SAFETY: `lam` is a LAM this adapter built (consumer contract, M32);
    // `AdapterContext` holds the id written by `write_lam`.
    let id = unsafe { context.cast::<usize>().read_unaligned() } as u64;
    adapter.inner.device.release_lam(LamId(id));
}

/// `NdkQueryExtension` on any object (L29): no extension interface is
/// implemented, so every query answers `STATUS_NOT_SUPPORTED`.
pub(super) fn no_extension(_id: *const Guid, _interface: *mut NdkExtensionInterface) -> NtStatus {
    STATUS_NOT_SUPPORTED
}
