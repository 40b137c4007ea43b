//! The boundary between the miniport and the NDK provider, and the part of
//! the NDIS open-adapter handler that belongs to the miniport: version
//! negotiation (rules A1–A3).
//!
//! # Who does what
//!
//! * The **driver** (this module and [`adapter`](super::adapter)) negotiates
//!   the version (A1–A3), refuses opens while NDK is disabled (A5), counts the
//!   open adapters (A6), answers the NDK OIDs (A13–A21) and fills
//!   `NDIS_NDK_CAPABILITIES` (A11, A12).
//! * The **provider** ([`NdkProvider`], `src/provider/`) creates the
//!   `NDK_ADAPTER` at the version the driver negotiated and stamps it into
//!   `NDK_ADAPTER_INFO.Version` and every object header (A4), closes adapters
//!   (L27), and reports its limits (A7, A8), counters (A16–A18), connections
//!   (A19) and endpoints (A20).
//!
//! The driver makes one provider per miniport adapter, over that adapter's
//! emulated NIC ([`Device`]), with a [`ProviderFactory`]; the Windows glue
//! names the factory in one line (`miniport::PROVIDER_FACTORY`).

use alloc::boxed::Box;
use core::net::SocketAddr;
use core::ptr::NonNull;

use crate::abi::{
    AdapterFlags, CounterMask, NDIS_STATUS_BAD_VERSION, NDK_VERSION_1_2,
    NdisNdkPerformanceCounters, NdisStatus, NdkAdapter, NdkAdapterInfo, NdkVersion, NtStatus,
    STATUS_NOT_SUPPORTED,
};
use crate::kernel::sync::Arc;
use crate::kernel::sync::atomic::Ordering;
use crate::rnic::Limits;
use crate::rnic::device::{Counters, Device};

use super::config::RDMA_TECHNOLOGY;

/// The NDKPI version SoftNDK implements: 1.2, the highest minor of major 1
/// (ndk-abi.md §2.2). Every successful open uses it (rule A2).
pub const PROVIDER_VERSION: NdkVersion = NDK_VERSION_1_2;

/// Version negotiation of `OPEN_NDK_ADAPTER_HANDLER` (ndk-abi.md §2.3).
///
/// `requested` is the major the consumer wants and the lowest minor it
/// accepts. A major other than 1 fails (rule A1); a minor above 2 fails (rule
/// A3); anything else succeeds with 1.2, the provider's highest minor (rule
/// A2; higher minors are supersets, so a consumer asking for 1.0 or 1.1 gets
/// 1.2 behaviour, rule A4).
///
/// # Errors
/// `NDIS_STATUS_BAD_VERSION` for an unsupported major or minor.
pub const fn negotiate_version(requested: NdkVersion) -> Result<NdkVersion, NdisStatus> {
    if requested.major != PROVIDER_VERSION.major || requested.minor > PROVIDER_VERSION.minor {
        Err(NDIS_STATUS_BAD_VERSION)
    } else {
        Ok(PROVIDER_VERSION)
    }
}

/// One active connection, as `OID_NDK_CONNECTIONS` reports it (rule A19).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Connection {
    /// Local IP address and port.
    pub local: SocketAddr,
    /// Remote IP address and port.
    pub remote: SocketAddr,
    /// TRUE for an NDSPI (user-mode) connection, FALSE for NDKPI.
    pub user_mode_owner: bool,
    /// The owning process id (NDSPI connections).
    pub owner_pid: u32,
}

/// One active listener or shared endpoint, as `OID_NDK_LOCAL_ENDPOINTS`
/// reports it (rule A20).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalEndpoint {
    /// Local IP address and port.
    pub local: SocketAddr,
    /// TRUE for NDSPI (user mode).
    pub user_mode_owner: bool,
    /// TRUE for a listener, FALSE for a shared endpoint.
    pub listener: bool,
    /// The owning process id (NDSPI endpoints).
    pub owner_pid: u32,
}

/// What the miniport needs from the NDK provider of one adapter.
///
/// Addresses are given as [`SocketAddr`], not as `SOCKADDR_INET`: the driver
/// serialises them into the OID buffers itself, so a provider never hands the
/// driver a C union whose unused bytes might be uninitialised.
///
/// # Safety
///
/// Implementing this trait promises, and the driver relies on it in `unsafe`
/// code:
/// * a pointer returned by [`open_adapter`](Self::open_adapter) points to a
///   valid, initialised `NDK_ADAPTER` whose header carries the version it was
///   given, and stays valid until [`close_adapter`](Self::close_adapter) (or
///   [`close_all`](Self::close_all)) for it has returned;
/// * the provider never frees an adapter a consumer still holds except
///   through those two calls.
pub unsafe trait NdkProvider: Send + Sync {
    /// The body of `OPEN_NDK_ADAPTER_HANDLER` after the driver's checks:
    /// creates one `NDK_ADAPTER` at `version` (always the negotiated
    /// [`PROVIDER_VERSION`]) and stamps `version` into it and into every object
    /// created on it (rule A4). PASSIVE_LEVEL; may allocate and block.
    ///
    /// # Errors
    /// `STATUS_INSUFFICIENT_RESOURCES` (= `NDIS_STATUS_RESOURCES`, rule A5)
    /// when out of memory; the status is handed to NDIS unchanged.
    fn open_adapter(&self, version: NdkVersion) -> Result<NonNull<NdkAdapter>, NtStatus>;

    /// The body of `CLOSE_NDK_ADAPTER_HANDLER`: closes one adapter opened by
    /// [`open_adapter`](Self::open_adapter) and returns only when every
    /// callback on every object descended from it has returned (rule L27).
    /// PASSIVE_LEVEL. A pointer the provider does not know is ignored.
    fn close_adapter(&self, adapter: NonNull<NdkAdapter>);

    /// The adapter information consumers receive from `NdkQueryAdapterInfo`:
    /// the true, enforced limits (rule A8), `RdmaTechnology` =
    /// [`RDMA_TECHNOLOGY`]. Its `Version` is [`PROVIDER_VERSION`].
    fn adapter_info(&self) -> NdkAdapterInfo;

    /// Counters the provider does not maintain (rule A17); none by default.
    fn missing_counters(&self) -> CounterMask {
        CounterMask::empty()
    }

    /// The performance counters of all RDMA activity on the adapter (rules
    /// A16–A18). Reserved counters are ignored (the driver writes 0).
    fn statistics(&self) -> NdisNdkPerformanceCounters;

    /// Calls `out` once per active connection (rule A19). For a technology
    /// that maps connections onto TCP (iWARP) the entries come in the pairs of
    /// rule A21; RoCE v2 does not.
    fn connections(&self, out: &mut dyn FnMut(&Connection));

    /// Calls `out` once per active listener and shared endpoint (rule A20).
    fn local_endpoints(&self, out: &mut dyn FnMut(&LocalEndpoint));

    /// NDK was disabled or the adapter is halting: closes every adapter and
    /// object still open, flushing their requests, and returns when no
    /// callback is running. Idempotent. PASSIVE_LEVEL.
    fn close_all(&self);
}

/// Makes the provider of one miniport adapter over its emulated NIC.
///
/// # Errors
/// The NTSTATUS `MiniportInitializeEx` fails with (NDIS_STATUS values are
/// NTSTATUS values).
pub type ProviderFactory = fn(device: &Arc<Device>) -> Result<Box<dyn NdkProvider>, NtStatus>;

/// The performance counters of an emulated NIC (rules A16–A18): every counter
/// of `NDIS_NDK_PERFORMANCE_COUNTERS` has an RNIC counter, so nothing is
/// missing, and the reserved ones stay 0. The octet counters include the
/// per-frame overhead (`rnic::device::FRAME_OVERHEAD`), as A18 asks.
#[must_use]
pub fn counters_from_device(counters: &Counters) -> NdisNdkPerformanceCounters {
    let read = |c: &crate::kernel::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    NdisNdkPerformanceCounters {
        connect: read(&counters.connect),
        accept: read(&counters.accept),
        connect_failure: read(&counters.connect_failure),
        connection_error: read(&counters.connection_error),
        active_connection: read(&counters.active_connection),
        cq_error: read(&counters.cq_error),
        rdma_in_octets: read(&counters.rdma_in_octets),
        rdma_out_octets: read(&counters.rdma_out_octets),
        rdma_in_frames: read(&counters.rdma_in_frames),
        rdma_out_frames: read(&counters.rdma_out_frames),
        ..NdisNdkPerformanceCounters::default()
    }
}

/// `VendorId` and `OID_GEN_VENDOR_ID` of a vendor without an IEEE OUI.
pub const VENDOR_ID: u32 = 0x00FF_FFFF;

/// `DeviceId` of the emulated NIC (`'SN'`).
pub const DEVICE_ID: u32 = 0x534E;

/// `LargeRequestThreshold`: the size above which Read/Write beats
/// Send/Receive. With a copy engine both cost the same per byte; one page is
/// where the per-request overhead stops mattering.
pub const LARGE_REQUEST_THRESHOLD: u32 = 4096;

/// `NDK_ADAPTER_INFO` from the RNIC's enforced limits (rules A7, A8), for a
/// provider that supports the features in `flags`.
#[must_use]
pub fn adapter_info_from_limits(limits: &Limits, flags: AdapterFlags) -> NdkAdapterInfo {
    let size = |bytes: u64| usize::try_from(bytes).unwrap_or(usize::MAX);
    NdkAdapterInfo {
        version: PROVIDER_VERSION,
        vendor_id: VENDOR_ID,
        device_id: DEVICE_ID,
        max_registration_size: size(limits.max_registration_size),
        max_window_size: size(limits.max_window_size),
        frmr_page_count: limits.max_fr_pages,
        max_initiator_request_sge: limits.max_initiator_sge,
        max_receive_request_sge: limits.max_receive_sge,
        max_read_request_sge: limits.max_read_sge,
        max_transfer_length: limits.max_transfer_length,
        max_inline_data_size: limits.max_inline_data,
        max_inbound_read_limit: limits.max_inbound_read_limit,
        max_outbound_read_limit: limits.max_outbound_read_limit,
        max_receive_queue_depth: limits.max_receive_queue_depth,
        max_initiator_queue_depth: limits.max_initiator_queue_depth,
        max_srq_depth: limits.max_srq_depth,
        max_cq_depth: limits.max_cq_depth,
        large_request_threshold: LARGE_REQUEST_THRESHOLD,
        max_caller_data: limits.max_caller_data,
        max_callee_data: limits.max_callee_data,
        adapter_flags: flags.bits(),
        rdma_technology: RDMA_TECHNOLOGY,
        ..NdkAdapterInfo::default()
    }
}

/// Rule A7, the size handshake of `NdkQueryAdapterInfo`: for a consumer
/// buffer of `buffer_size` bytes, the status to return and the value to store
/// in `*pBufferSize` — `STATUS_SUCCESS` and the bytes written (the whole
/// `NDK_ADAPTER_INFO`) when it fits, `STATUS_BUFFER_TOO_SMALL` and the size
/// needed otherwise. The provider's dispatch writes the structure only on
/// success.
#[must_use]
#[expect(
    clippy::cast_possible_truncation,
    reason = "NDK_ADAPTER_INFO is 0x68 bytes (asserted in abi)"
)]
pub const fn query_adapter_info_size(buffer_size: u32) -> (NtStatus, u32) {
    let needed = size_of::<NdkAdapterInfo>() as u32;
    if buffer_size < needed {
        (crate::abi::STATUS_BUFFER_TOO_SMALL, needed)
    } else {
        (crate::abi::STATUS_SUCCESS, needed)
    }
}

/// The provider used until `src/provider/` is plugged in: it reports the
/// NIC's true limits and counters, has no connections, and refuses to open
/// adapters (`STATUS_NOT_SUPPORTED`). It claims no optional feature
/// (`AdapterFlags` empty) because it implements none.
pub struct DeviceOnlyProvider {
    device: Arc<Device>,
}

impl DeviceOnlyProvider {
    /// A placeholder provider over `device`.
    #[must_use]
    pub const fn new(device: Arc<Device>) -> Self {
        Self { device }
    }
}

// SAFETY: `open_adapter` never returns a pointer, so there is no adapter whose
// validity the driver could rely on.
unsafe impl NdkProvider for DeviceOnlyProvider {
    fn open_adapter(&self, _version: NdkVersion) -> Result<NonNull<NdkAdapter>, NtStatus> {
        Err(STATUS_NOT_SUPPORTED)
    }

    fn close_adapter(&self, _adapter: NonNull<NdkAdapter>) {}

    fn adapter_info(&self) -> NdkAdapterInfo {
        adapter_info_from_limits(self.device.limits(), AdapterFlags::empty())
    }

    fn statistics(&self) -> NdisNdkPerformanceCounters {
        counters_from_device(&self.device.counters)
    }

    fn connections(&self, _out: &mut dyn FnMut(&Connection)) {}

    fn local_endpoints(&self, _out: &mut dyn FnMut(&LocalEndpoint)) {}

    fn close_all(&self) {}
}

/// The [`ProviderFactory`] of [`DeviceOnlyProvider`].
///
/// # Errors
/// `STATUS_INSUFFICIENT_RESOURCES` when the provider cannot be allocated.
pub fn device_only_provider(device: &Arc<Device>) -> Result<Box<dyn NdkProvider>, NtStatus> {
    let provider = super::mem::try_box(DeviceOnlyProvider::new(Arc::clone(device)))
        .ok_or(crate::abi::STATUS_INSUFFICIENT_RESOURCES)?;
    Ok(provider as Box<dyn NdkProvider>)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{NDK_VERSION_1_1, NdkRdmaTechnology};
    use crate::rnic::device::EngineMode;

    #[test]
    fn test_open_rejects_unsupported_major_rule_a1() {
        for major in [0, 2, 3, u16::MAX] {
            let requested = NdkVersion { major, minor: 0 };
            assert_eq!(negotiate_version(requested), Err(NDIS_STATUS_BAD_VERSION));
        }
    }

    #[test]
    fn test_open_uses_highest_minor_rule_a2() {
        for minor in 0..=2 {
            let requested = NdkVersion { major: 1, minor };
            assert_eq!(negotiate_version(requested), Ok(NDK_VERSION_1_2));
        }
        // The observed consumer opens with {1, 0} (ndk-abi.md §2.3).
        assert_eq!(
            negotiate_version(NdkVersion { major: 1, minor: 0 }),
            Ok(PROVIDER_VERSION)
        );
        assert!(negotiate_version(NDK_VERSION_1_1).is_ok());
    }

    #[test]
    fn test_open_rejects_minor_above_two_rule_a3() {
        for minor in [3, 4, u16::MAX] {
            let requested = NdkVersion { major: 1, minor };
            assert_eq!(negotiate_version(requested), Err(NDIS_STATUS_BAD_VERSION));
        }
    }

    #[test]
    fn test_query_adapter_info_reports_size_rule_a7() {
        assert_eq!(
            query_adapter_info_size(0),
            (crate::abi::STATUS_BUFFER_TOO_SMALL, 0x68)
        );
        assert_eq!(
            query_adapter_info_size(0x67),
            (crate::abi::STATUS_BUFFER_TOO_SMALL, 0x68)
        );
        assert_eq!(
            query_adapter_info_size(0x68),
            (crate::abi::STATUS_SUCCESS, 0x68)
        );
        assert_eq!(
            query_adapter_info_size(0x1000),
            (crate::abi::STATUS_SUCCESS, 0x68)
        );
    }

    #[test]
    fn test_adapter_info_from_limits_is_the_enforced_limits_rule_a8() {
        let limits = Limits::DEFAULT;
        let info = adapter_info_from_limits(&limits, AdapterFlags::CQ_RESIZE_SUPPORTED);
        assert_eq!(info.version, PROVIDER_VERSION);
        assert_eq!(info.max_cq_depth, limits.max_cq_depth);
        assert_eq!(info.max_receive_queue_depth, limits.max_receive_queue_depth);
        assert_eq!(info.max_initiator_request_sge, limits.max_initiator_sge);
        assert_eq!(info.max_inline_data_size, limits.max_inline_data);
        assert_eq!(info.max_srq_depth, limits.max_srq_depth);
        assert_eq!(info.frmr_page_count, limits.max_fr_pages);
        assert!(info.frmr_page_count >= crate::abi::NDK_MIN_FRMR_PAGE_COUNT);
        assert_eq!(info.rdma_technology, NdkRdmaTechnology::ROCE_V2);
        assert_eq!(info.adapter_flags, AdapterFlags::CQ_RESIZE_SUPPORTED.bits());
    }

    #[test]
    fn test_counters_from_device_are_the_rnic_counters_rule_a18() {
        let device = Device::new(Limits::DEFAULT, EngineMode::Inline).unwrap();
        let peer = Device::new(Limits::DEFAULT, EngineMode::Inline).unwrap();
        device.counters.account_transfer(&peer.counters, 10_000);
        device.counters.connect.fetch_add(2, Ordering::Relaxed);
        device.counters.cq_error.fetch_add(1, Ordering::Relaxed);
        let counters = counters_from_device(&device.counters);
        assert_eq!(counters.connect, 2);
        assert_eq!(counters.cq_error, 1);
        assert_eq!(counters.rdma_out_frames, 3, "10 000 bytes in 4 KiB frames");
        assert_eq!(
            counters.rdma_out_octets,
            10_000 + 3 * crate::rnic::device::FRAME_OVERHEAD,
            "octets include the layer-2 overhead"
        );
        assert_eq!(counters.rdma_in_octets, 0, "the peer received them");
        let incoming = counters_from_device(&peer.counters);
        assert_eq!(incoming.rdma_in_frames, 3);
    }

    #[test]
    fn test_device_only_provider_refuses_opens() {
        let device = Device::new(Limits::DEFAULT, EngineMode::Inline).unwrap();
        let provider = device_only_provider(&device).unwrap();
        assert_eq!(
            provider.open_adapter(PROVIDER_VERSION),
            Err(STATUS_NOT_SUPPORTED)
        );
        assert_eq!(
            provider.adapter_info().max_cq_depth,
            Limits::DEFAULT.max_cq_depth
        );
        assert_eq!(provider.missing_counters(), CounterMask::empty());
    }
}
