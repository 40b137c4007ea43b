//! The NDIS side of NDK: how a miniport registers as an NDK provider, reports
//! its capabilities, and answers the NDK OIDs (ndk-abi.md §3.11, §4.13, §5.8).

use super::ndk::{NdkAdapter, NdkAdapterInfo};
use super::types::{
    Boolean, NdisHandle, NdisNicSwitchId, NdisNicSwitchVportId, NdisStatus, NdkVersion,
    SockAddrInet,
};

// ---------------------------------------------------------------------------
// §4.13 NDIS handler types
// ---------------------------------------------------------------------------

c_fn! {
    /// `OPEN_NDK_ADAPTER_HANDLER` (§4.13): the miniport's handler that opens an
    /// `NDK_ADAPTER` (`PASSIVE_LEVEL`). Returns `NDIS_STATUS_SUCCESS`,
    /// `NDIS_STATUS_BAD_VERSION`, `NDIS_STATUS_ADAPTER_NOT_READY` or
    /// `NDIS_STATUS_RESOURCES` (§2.3). Several adapters may be open at once.
    OpenNdkAdapterHandler(miniport_adapter_context: NdisHandle,
        parameters: *const NdisOpenNdkAdapterParameters,
        out_adapter: *mut *mut NdkAdapter) -> NdisStatus;

    /// `CLOSE_NDK_ADAPTER_HANDLER` (§4.13): the miniport's handler that closes an
    /// `NDK_ADAPTER` opened by [`OpenNdkAdapterHandler`] (`PASSIVE_LEVEL`).
    CloseNdkAdapterHandler(miniport_adapter_context: NdisHandle, adapter: *mut NdkAdapter);

    /// `MINIPORT_SET_OPTIONS` (= `SET_OPTIONS`, §4.13): the miniport driver's
    /// `SetOptionsHandler`, where it calls `NdisSetOptionalHandlers` with the
    /// [`NdisNdkProviderCharacteristics`] (`PASSIVE_LEVEL`).
    MiniportSetOptions(ndis_driver_handle: NdisHandle, driver_context: NdisHandle) -> NdisStatus;
}

// ---------------------------------------------------------------------------
// §3.11 NDIS structures
// ---------------------------------------------------------------------------

/// `NDIS_OBJECT_HEADER` (§3.11): type, revision and size of an NDIS structure,
/// 4 bytes, align 2.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NdisObjectHeader {
    /// `Type`: an `NDIS_OBJECT_TYPE_*` value (§5.8).
    pub type_: u8,
    /// `Revision`: an `NDIS_*_REVISION_*` value (§5.8).
    pub revision: u8,
    /// `Size`: an `NDIS_SIZEOF_*` value (§5.8).
    pub size: u16,
}

/// `NDIS_DRIVER_OPTIONAL_HANDLERS` (§3.11): the generic type
/// `NdisSetOptionalHandlers` takes; its only member is the header, which tells
/// NDIS what the pointer really points to (here an
/// [`NdisNdkProviderCharacteristics`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NdisDriverOptionalHandlers {
    /// `Header`.
    pub header: NdisObjectHeader,
}

/// `NDIS_NDK_PROVIDER_CHARACTERISTICS` (§3.11): registers the NDK open and close
/// handlers; passed to `NdisSetOptionalHandlers` cast to
/// [`NdisDriverOptionalHandlers`]. 0x18 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdisNdkProviderCharacteristics {
    /// `Header`: {[`NDIS_OBJECT_TYPE_NDK_PROVIDER_CHARACTERISTICS`](super::NDIS_OBJECT_TYPE_NDK_PROVIDER_CHARACTERISTICS),
    /// revision 1, [`NDIS_SIZEOF_NDK_PROVIDER_CHARACTERISTICS_REVISION_1`](super::NDIS_SIZEOF_NDK_PROVIDER_CHARACTERISTICS_REVISION_1)}.
    pub header: NdisObjectHeader,
    /// `Flags`: reserved, 0.
    pub flags: u32,
    /// `OpenNDKAdapterHandler`.
    pub open_ndk_adapter_handler: OpenNdkAdapterHandler,
    /// `CloseNDKAdapterHandler`.
    pub close_ndk_adapter_handler: CloseNdkAdapterHandler,
}

/// `NDIS_OPEN_NDK_ADAPTER_PARAMETERS` (§3.11): what NDIS passes to
/// [`OpenNdkAdapterHandler`]; 0xC bytes with the NDIS 6.50 fields, align 4.
///
/// Below NDIS 6.50 the structure is only `Version` (4 bytes), and which size
/// NDIS passes is UNVERIFIED: read past `version` only when registered as NDIS
/// 6.50 or later.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NdisOpenNdkAdapterParameters {
    /// `Version`: the major version and the lowest minor the consumer accepts
    /// (§2.3).
    pub version: NdkVersion,
    /// `SwitchId` (NDIS ≥ 6.50 only).
    pub switch_id: NdisNicSwitchId,
    /// `VPortId` (NDIS ≥ 6.50 only).
    pub vport_id: NdisNicSwitchVportId,
}

/// `NDIS_MINIPORT_ADAPTER_NDK_ATTRIBUTES` (§3.11): the `NDKAttributes` member of
/// `NDIS_MINIPORT_ADAPTER_ATTRIBUTES`, passed to `NdisMSetMiniportAttributes`;
/// 0x10 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdisMiniportAdapterNdkAttributes {
    /// `Header`: {[`NDIS_OBJECT_TYPE_MINIPORT_ADAPTER_NDK_ATTRIBUTES`](super::NDIS_OBJECT_TYPE_MINIPORT_ADAPTER_NDK_ATTRIBUTES),
    /// revision 1, [`NDIS_SIZEOF_MINIPORT_ADAPTER_NDK_ATTRIBUTES_REVISION_1`](super::NDIS_SIZEOF_MINIPORT_ADAPTER_NDK_ATTRIBUTES_REVISION_1)}.
    pub header: NdisObjectHeader,
    /// `Enabled`: whether NDK starts enabled.
    pub enabled: Boolean,
    /// Padding in C, declared so that a zeroed value has no uninitialised bytes
    /// to leak into the consumer's buffer; write 0.
    pub padding_05: [u8; 3],
    /// `NdkCapabilities`.
    pub ndk_capabilities: *mut NdisNdkCapabilities,
}

/// `NDIS_NDK_CAPABILITIES` (§3.11): the adapter-wide NDK limits; 0x38 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdisNdkCapabilities {
    /// `Header`: {[`NDIS_OBJECT_TYPE_DEFAULT`](super::NDIS_OBJECT_TYPE_DEFAULT),
    /// revision 1, [`NDIS_SIZEOF_NDK_CAPABILITIES_REVISION_1`](super::NDIS_SIZEOF_NDK_CAPABILITIES_REVISION_1)}.
    pub header: NdisObjectHeader,
    /// `Flags`: reserved, 0.
    pub flags: u32,
    /// `MaxQpCount`.
    pub max_qp_count: u32,
    /// `MaxCqCount`.
    pub max_cq_count: u32,
    /// `MaxMrCount`.
    pub max_mr_count: u32,
    /// `MaxPdCount`.
    pub max_pd_count: u32,
    /// `MaxInboundReadLimit`: 0 = no adapter-wide limit (the per-QP limit is in
    /// `NdkInfo`).
    pub max_inbound_read_limit: u32,
    /// `MaxOutboundReadLimit`: 0 = no adapter-wide limit.
    pub max_outbound_read_limit: u32,
    /// `MaxMwCount`.
    pub max_mw_count: u32,
    /// `MaxSrqCount`: 0 = no SRQ support.
    pub max_srq_count: u32,
    /// `MissingCounterMask`: [`CounterMask`](super::CounterMask) bits of the
    /// counters the provider does not maintain.
    pub missing_counter_mask: u64,
    /// `NdkInfo`: the per-consumer limits.
    pub ndk_info: *mut NdkAdapterInfo,
}

/// `NDIS_NDK_PERFORMANCE_COUNTERS` (§3.11): 30 `ULONG64` counters, 0xF0 bytes.
/// A counter's [`CounterMask`](super::CounterMask) bit is its offset / 8.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NdisNdkPerformanceCounters {
    /// `Connect`: outbound connections established.
    pub connect: u64,
    /// `Accept`: inbound connections established.
    pub accept: u64,
    /// `ConnectFailure`: inbound and outbound connect attempts that failed.
    pub connect_failure: u64,
    /// `ConnectionError`: established connections that hit an error before the
    /// consumer disconnected.
    pub connection_error: u64,
    /// `ActiveConnection`: connections active now.
    pub active_connection: u64,
    /// `Reserved01`: the provider writes 0; NDIS ignores it.
    pub reserved01: u64,
    /// `Reserved02`.
    pub reserved02: u64,
    /// `Reserved03`.
    pub reserved03: u64,
    /// `Reserved04`.
    pub reserved04: u64,
    /// `Reserved05`.
    pub reserved05: u64,
    /// `Reserved06`.
    pub reserved06: u64,
    /// `Reserved07`.
    pub reserved07: u64,
    /// `Reserved08`.
    pub reserved08: u64,
    /// `Reserved09`.
    pub reserved09: u64,
    /// `Reserved10`.
    pub reserved10: u64,
    /// `Reserved11`.
    pub reserved11: u64,
    /// `Reserved12`.
    pub reserved12: u64,
    /// `Reserved13`.
    pub reserved13: u64,
    /// `Reserved14`.
    pub reserved14: u64,
    /// `Reserved15`.
    pub reserved15: u64,
    /// `Reserved16`.
    pub reserved16: u64,
    /// `Reserved17`.
    pub reserved17: u64,
    /// `Reserved18`.
    pub reserved18: u64,
    /// `Reserved19`.
    pub reserved19: u64,
    /// `Reserved20`.
    pub reserved20: u64,
    /// `CQError`: CQs that went into the error state.
    pub cq_error: u64,
    /// `RDMAInOctets`: bytes of incoming RDMA traffic, layer-2 overhead included.
    pub rdma_in_octets: u64,
    /// `RDMAOutOctets`: bytes of outgoing RDMA traffic, layer-2 overhead included.
    pub rdma_out_octets: u64,
    /// `RDMAInFrames`: layer-2 frames carrying incoming RDMA traffic.
    pub rdma_in_frames: u64,
    /// `RDMAOutFrames`: layer-2 frames carrying outgoing RDMA traffic.
    pub rdma_out_frames: u64,
}

/// `NDIS_NDK_STATISTICS_INFO` (§3.11): the answer to `OID_NDK_STATISTICS`; 0xF8
/// bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NdisNdkStatisticsInfo {
    /// `Header`: {[`NDIS_OBJECT_TYPE_DEFAULT`](super::NDIS_OBJECT_TYPE_DEFAULT),
    /// revision 1, [`NDIS_SIZEOF_NDK_STATISTICS_INFO_REVISION_1`](super::NDIS_SIZEOF_NDK_STATISTICS_INFO_REVISION_1)}.
    pub header: NdisObjectHeader,
    /// `Flags`: reserved, 0.
    pub flags: u32,
    /// `CounterSet`.
    pub counter_set: NdisNdkPerformanceCounters,
}

/// `NDIS_NDK_CONNECTION_ENTRY` (§3.11): one connection in
/// [`NdisNdkConnections`]; 0x40 bytes, align 4.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct NdisNdkConnectionEntry {
    /// `Local`: local IP address and port.
    pub local: SockAddrInet,
    /// `Remote`: remote IP address and port.
    pub remote: SockAddrInet,
    /// `UserModeOwner`: TRUE = NDSPI (user mode), FALSE = NDKPI.
    pub user_mode_owner: Boolean,
    /// Padding in C, declared so that a zeroed value has no uninitialised bytes
    /// to leak into the consumer's (or user mode's) buffer; write 0.
    pub padding_39: [u8; 3],
    /// `OwnerPid`: the owning process id for NDSPI connections.
    pub owner_pid: u32,
}

/// The two variable-length NDK lists of §3.11, which C declares as two
/// structures with one head over different entries: `NDIS_NDK_CONNECTIONS`
/// ([`NdisNdkConnections`], the answer to `OID_NDK_CONNECTIONS`) and
/// `NDIS_NDK_LOCAL_ENDPOINTS` ([`NdisNdkLocalEndpoints`], the answer to
/// `OID_NDK_LOCAL_ENDPOINTS`). Declared once, so the head is the same in both
/// by construction.
///
/// Variable size: `NDIS_SIZEOF_…_REVISION_1(n)` = 0x10 + `size_of::<E>()` ×
/// `Count` bytes ([`ndis_sizeof_ndk_connections_revision_1`](super::ndis_sizeof_ndk_connections_revision_1),
/// [`ndis_sizeof_ndk_local_endpoints_revision_1`](super::ndis_sizeof_ndk_local_endpoints_revision_1));
/// `size_of` with the one declared entry is 0x50 and 0x34. When
/// `mapped_to_tcp` is TRUE (iWARP), entries come in pairs: even index ND
/// addressing plus the other members, odd index the TCP addressing only. Not
/// `Clone`/`Copy`: a copy would keep only the first entry.
#[repr(C)]
#[derive(Default)]
pub struct NdisNdkList<E> {
    /// `Header`: {[`NDIS_OBJECT_TYPE_DEFAULT`](super::NDIS_OBJECT_TYPE_DEFAULT),
    /// revision 1, min(0xFFFF, size(`Count`))}.
    pub header: NdisObjectHeader,
    /// `Flags`: reserved, 0.
    pub flags: u32,
    /// `Count`: entries in `entries`.
    pub count: u32,
    /// `NDConnectionsMappedtoTCPConnections` /
    /// `NDLocalEndpointsMappedtoTCPLocalEndpoints`.
    pub mapped_to_tcp: Boolean,
    /// Padding in C, declared so that a zeroed value has no uninitialised bytes
    /// to leak into the consumer's (or user mode's) buffer; write 0.
    pub padding_0d: [u8; 3],
    /// `Connections` / `LocalEndpoints`: `E[Count]`, declared `[1]`.
    pub entries: [E; 1],
}

/// `NDIS_NDK_CONNECTIONS` (§3.11): the answer to `OID_NDK_CONNECTIONS`.
pub type NdisNdkConnections = NdisNdkList<NdisNdkConnectionEntry>;

/// `NDIS_NDK_LOCAL_ENDPOINT_ENTRY` (§3.11): one listener or shared endpoint in
/// [`NdisNdkLocalEndpoints`]; 0x24 bytes, align 4.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct NdisNdkLocalEndpointEntry {
    /// `Local`: local IP address and port.
    pub local: SockAddrInet,
    /// `UserModeOwner`: TRUE = NDSPI.
    pub user_mode_owner: Boolean,
    /// `Listener`: TRUE = listener, FALSE = shared endpoint.
    pub listener: Boolean,
    /// Padding in C, declared so that a zeroed value has no uninitialised bytes
    /// to leak into the consumer's (or user mode's) buffer; write 0.
    pub padding_1e: [u8; 2],
    /// `OwnerPid`: the owning process id for NDSPI endpoints.
    pub owner_pid: u32,
}

/// `NDIS_NDK_LOCAL_ENDPOINTS` (§3.11): the answer to `OID_NDK_LOCAL_ENDPOINTS`.
pub type NdisNdkLocalEndpoints = NdisNdkList<NdisNdkLocalEndpointEntry>;

// ---------------------------------------------------------------------------
// Layout assertions
// ---------------------------------------------------------------------------

assert_layouts! {
    layout_ndis_object_header: NdisObjectHeader, size 0x4, align 2 {
        type_: 0x0, revision: 0x1, size: 0x2,
    }
    layout_ndis_driver_optional_handlers: NdisDriverOptionalHandlers, size 0x4, align 2 {
        header: 0x0,
    }
    layout_ndis_ndk_provider_characteristics: NdisNdkProviderCharacteristics, size 0x18, align 8 {
        header: 0x00, flags: 0x04, open_ndk_adapter_handler: 0x08, close_ndk_adapter_handler: 0x10,
    }
    layout_ndis_open_ndk_adapter_parameters: NdisOpenNdkAdapterParameters, size 0xC, align 4 {
        version: 0x0, switch_id: 0x4, vport_id: 0x8,
    }
    layout_ndis_miniport_adapter_ndk_attributes:
        NdisMiniportAdapterNdkAttributes, size 0x10, align 8 {
        header: 0x0, enabled: 0x4, padding_05: 0x5, ndk_capabilities: 0x8,
    }
    layout_ndis_ndk_capabilities: NdisNdkCapabilities, size 0x38, align 8 {
        header: 0x00, flags: 0x04, max_qp_count: 0x08, max_cq_count: 0x0C, max_mr_count: 0x10,
        max_pd_count: 0x14, max_inbound_read_limit: 0x18, max_outbound_read_limit: 0x1C,
        max_mw_count: 0x20, max_srq_count: 0x24, missing_counter_mask: 0x28, ndk_info: 0x30,
    }
    layout_ndis_ndk_performance_counters: NdisNdkPerformanceCounters, size 0xF0, align 8 {
        connect: 0x00, accept: 0x08, connect_failure: 0x10, connection_error: 0x18,
        active_connection: 0x20, reserved01: 0x28, reserved02: 0x30, reserved03: 0x38,
        reserved04: 0x40, reserved05: 0x48, reserved06: 0x50, reserved07: 0x58, reserved08: 0x60,
        reserved09: 0x68, reserved10: 0x70, reserved11: 0x78, reserved12: 0x80, reserved13: 0x88,
        reserved14: 0x90, reserved15: 0x98, reserved16: 0xA0, reserved17: 0xA8, reserved18: 0xB0,
        reserved19: 0xB8, reserved20: 0xC0, cq_error: 0xC8, rdma_in_octets: 0xD0,
        rdma_out_octets: 0xD8, rdma_in_frames: 0xE0, rdma_out_frames: 0xE8,
    }
    layout_ndis_ndk_statistics_info: NdisNdkStatisticsInfo, size 0xF8, align 8 {
        header: 0x00, flags: 0x04, counter_set: 0x08,
    }
    layout_ndis_ndk_connection_entry: NdisNdkConnectionEntry, size 0x40, align 4 {
        local: 0x00, remote: 0x1C, user_mode_owner: 0x38, padding_39: 0x39, owner_pid: 0x3C,
    }
    // Variable-size: sizeof with the one declared entry, and where the array starts.
    layout_ndis_ndk_connections: NdisNdkConnections, size 0x50, align 4 {
        header: 0x00, flags: 0x04, count: 0x08, mapped_to_tcp: 0x0C, padding_0d: 0x0D,
        entries: 0x10,
    }
    layout_ndis_ndk_local_endpoint_entry: NdisNdkLocalEndpointEntry, size 0x24, align 4 {
        local: 0x00, user_mode_owner: 0x1C, listener: 0x1D, padding_1e: 0x1E, owner_pid: 0x20,
    }
    // Variable-size: sizeof with the one declared entry, and where the array starts.
    layout_ndis_ndk_local_endpoints: NdisNdkLocalEndpoints, size 0x34, align 4 {
        header: 0x00, flags: 0x04, count: 0x08, mapped_to_tcp: 0x0C, padding_0d: 0x0D,
        entries: 0x10,
    }
}

// §5.8: each NDIS_SIZEOF_* is "the size through the last member" of its
// structure; on x64 that equals the whole `size_of`. Check both readings, so
// that neither the constant nor the layout can drift from the other.
assert_ndis_sizeof! {
    super::consts::NDIS_SIZEOF_NDK_PROVIDER_CHARACTERISTICS_REVISION_1 =>
        NdisNdkProviderCharacteristics { close_ndk_adapter_handler: CloseNdkAdapterHandler },
    super::consts::NDIS_SIZEOF_NDK_PROVIDER_CHARACTERISTICS_REVISION_1 =>
        NdisNdkProviderCharacteristics,
    super::consts::NDIS_SIZEOF_MINIPORT_ADAPTER_NDK_ATTRIBUTES_REVISION_1 =>
        NdisMiniportAdapterNdkAttributes { ndk_capabilities: *mut NdisNdkCapabilities },
    super::consts::NDIS_SIZEOF_MINIPORT_ADAPTER_NDK_ATTRIBUTES_REVISION_1 =>
        NdisMiniportAdapterNdkAttributes,
    super::consts::NDIS_SIZEOF_NDK_CAPABILITIES_REVISION_1 =>
        NdisNdkCapabilities { ndk_info: *mut NdkAdapterInfo },
    super::consts::NDIS_SIZEOF_NDK_CAPABILITIES_REVISION_1 => NdisNdkCapabilities,
    super::consts::NDIS_SIZEOF_NDK_STATISTICS_INFO_REVISION_1 =>
        NdisNdkStatisticsInfo { counter_set: NdisNdkPerformanceCounters },
    super::consts::NDIS_SIZEOF_NDK_STATISTICS_INFO_REVISION_1 => NdisNdkStatisticsInfo,
}

// The variable-size answers: header size, entry size and the size of n entries.
#[cfg(target_arch = "x86_64")]
const _: () = {
    use core::mem::offset_of;

    use super::consts::{
        NDIS_NDK_CONNECTION_ENTRY_SIZE, NDIS_NDK_CONNECTIONS_HEADER_SIZE,
        NDIS_NDK_LOCAL_ENDPOINT_ENTRY_SIZE, NDIS_NDK_LOCAL_ENDPOINTS_HEADER_SIZE,
        ndis_sizeof_ndk_connections_revision_1, ndis_sizeof_ndk_local_endpoints_revision_1,
    };

    assert!(NDIS_NDK_CONNECTIONS_HEADER_SIZE == offset_of!(NdisNdkConnections, entries));
    assert!(NDIS_NDK_CONNECTION_ENTRY_SIZE == size_of::<NdisNdkConnectionEntry>());
    assert!(ndis_sizeof_ndk_connections_revision_1(0) == 0x10);
    assert!(ndis_sizeof_ndk_connections_revision_1(1) == size_of::<NdisNdkConnections>());
    assert!(ndis_sizeof_ndk_connections_revision_1(3) == 0x10 + 3 * 0x40);

    assert!(NDIS_NDK_LOCAL_ENDPOINTS_HEADER_SIZE == offset_of!(NdisNdkLocalEndpoints, entries));
    assert!(NDIS_NDK_LOCAL_ENDPOINT_ENTRY_SIZE == size_of::<NdisNdkLocalEndpointEntry>());
    assert!(ndis_sizeof_ndk_local_endpoints_revision_1(0) == 0x10);
    assert!(ndis_sizeof_ndk_local_endpoints_revision_1(1) == size_of::<NdisNdkLocalEndpoints>());
    assert!(ndis_sizeof_ndk_local_endpoints_revision_1(3) == 0x10 + 3 * 0x24);
};
