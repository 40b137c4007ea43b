//! The provider as the miniport needs it: the interface the driver calls
//! ([`NdkProvider`], made per adapter by a [`ProviderFactory`]), and what the
//! provider reports through it (version, adapter information, counters,
//! connections, endpoints).
//!
//! It lives in the provider so that layers point one way: the driver uses
//! the provider, and the provider never reaches back into `driver/`.

use alloc::boxed::Box;
use core::net::SocketAddr;
use core::ptr::NonNull;

use crate::abi::{
    AdapterFlags, CounterMask, NDK_VERSION_1_2, NdisNdkPerformanceCounters, NdkAdapter,
    NdkAdapterInfo, NdkRdmaTechnology, NdkVersion, NtStatus,
};
use crate::kernel::sync::Arc;
use crate::kernel::sync::atomic::Ordering;
use crate::rnic::Limits;
use crate::rnic::device::{Counters, Device};

/// The NDKPI version SoftNDK implements: 1.2, the highest minor of major 1
/// (ndk-abi.md §2.2). Every successful open uses it (rule A2).
pub const PROVIDER_VERSION: NdkVersion = NDK_VERSION_1_2;

/// The RDMA transport of the driver's NIC: iWARP (MPA / DDP / RDMAP over
/// kernel TCP sockets, docs/driver.md "The iWARP transport over WSK"). It is
/// the only `*NetworkDirectTechnology` value the INF offers (rule A23) and
/// the `RdmaTechnology` of an adapter on the wire (rule A8), whose
/// connections and endpoints the NDK OIDs report mapped onto TCP (A21).
pub const RDMA_TECHNOLOGY: NdkRdmaTechnology = NdkRdmaTechnology::IWARP;

/// The `RdmaTechnology` of an adapter whose NIC is on the in-process fabric
/// only (host mode's default transport; a driver NIC whose WSK registration
/// failed): RoCE v2. Its connections are not TCP connections (no ND/TCP
/// pairs, A21), its private-data limits are those of the InfiniBand
/// connection manager RoCE uses (`Limits::DEFAULT`: 56 / 148 bytes), and the
/// RNIC counts its octets in RoCE v2 frames (`rnic::device::FRAME_OVERHEAD`).
pub const FABRIC_TECHNOLOGY: NdkRdmaTechnology = NdkRdmaTechnology::ROCE_V2;

/// The technology of an adapter whose NIC is (`on_wire`) or is not on the
/// wire.
#[must_use]
pub const fn technology(on_wire: bool) -> NdkRdmaTechnology {
    if on_wire {
        RDMA_TECHNOLOGY
    } else {
        FABRIC_TECHNOLOGY
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
    /// that maps connections onto TCP (iWARP, [`RDMA_TECHNOLOGY`]) the entries
    /// come in the pairs of rule A21 (ND entry, then its TCP entry); RoCE v2
    /// does not.
    fn connections(&self, out: &mut dyn FnMut(&Connection));

    /// Calls `out` once per active listener and shared endpoint (rule A20),
    /// in ND/TCP pairs for iWARP as [`connections`](Self::connections).
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

/// `NDK_ADAPTER_INFO` of an adapter on the wire (the driver's: iWARP) from
/// its device's limits (rules A7, A8), for a provider that supports the
/// features in `flags`: [`adapter_info_for`] with `on_wire`.
#[must_use]
pub fn adapter_info_from_limits(limits: &Limits, flags: AdapterFlags) -> NdkAdapterInfo {
    adapter_info_for(limits, flags, true)
}

/// `NDK_ADAPTER_INFO` from a device's limits (rules A7, A8) for an adapter
/// whose NIC is (`on_wire`: iWARP, the limits the connection manager
/// enforces there, `rnic::cm::wire_limits`) or is not on the wire (the
/// fabric: RoCE v2 and the device's limits), supporting `flags`.
#[must_use]
pub fn adapter_info_for(limits: &Limits, flags: AdapterFlags, on_wire: bool) -> NdkAdapterInfo {
    let wire;
    let limits = if on_wire {
        wire = crate::rnic::cm::wire_limits(limits);
        &wire
    } else {
        limits
    };
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
        rdma_technology: technology(on_wire),
        ..NdkAdapterInfo::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rnic::device::EngineMode;

    #[test]
    fn test_adapter_info_from_limits_is_the_enforced_limits_rule_a8() {
        let limits = Limits::DEFAULT;
        let info = adapter_info_from_limits(&limits, AdapterFlags::CQ_RESIZE_SUPPORTED);
        assert_eq!(info.version, PROVIDER_VERSION);
        // The queues' limits, then the memory's.
        assert_eq!(info.max_cq_depth, limits.max_cq_depth);
        assert_eq!(info.max_receive_queue_depth, limits.max_receive_queue_depth);
        assert_eq!(info.max_srq_depth, limits.max_srq_depth);
        assert_eq!(info.rdma_technology, NdkRdmaTechnology::IWARP);
        assert_eq!(info.max_initiator_request_sge, limits.max_initiator_sge);
        assert_eq!(info.max_inline_data_size, limits.max_inline_data);
        assert!(info.frmr_page_count >= crate::abi::NDK_MIN_FRMR_PAGE_COUNT);
        assert_eq!(info.frmr_page_count, limits.max_fr_pages);
        assert_eq!(info.adapter_flags, AdapterFlags::CQ_RESIZE_SUPPORTED.bits());
    }

    #[test]
    fn test_wire_adapter_reports_iwarp_and_the_wire_limits_rule_a8() {
        let limits = Limits::DEFAULT;
        let wire = adapter_info_for(&limits, AdapterFlags::empty(), true);
        assert_eq!(wire.rdma_technology, NdkRdmaTechnology::IWARP);
        // MPA carries 512 bytes of private data, 4 of them the RFC 6581
        // block, each way (N17).
        assert_eq!(wire.max_caller_data, 508);
        assert_eq!(wire.max_callee_data, 508);
        // The read limits fit MPA's 14-bit IRD / ORD (N20).
        assert!(wire.max_inbound_read_limit <= 0x3FFF);
        assert!(wire.max_outbound_read_limit <= 0x3FFF);
        assert_eq!(wire.max_inbound_read_limit, limits.max_inbound_read_limit);
        assert_eq!(wire.max_transfer_length, limits.max_transfer_length);
        // The fabric's adapter: RoCE v2 with the InfiniBand CM's sizes.
        let fabric = adapter_info_for(&limits, AdapterFlags::empty(), false);
        assert_eq!(fabric.rdma_technology, NdkRdmaTechnology::ROCE_V2);
        assert_eq!(fabric.max_caller_data, limits.max_caller_data);
        assert_eq!(fabric.max_callee_data, limits.max_callee_data);
        // Read limits above MPA's are lowered to what it negotiates.
        let big = Limits {
            max_inbound_read_limit: 1 << 20,
            ..limits
        };
        assert_eq!(
            adapter_info_for(&big, AdapterFlags::empty(), true).max_inbound_read_limit,
            0x3FFF
        );
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
}
