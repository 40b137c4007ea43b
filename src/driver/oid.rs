//! OID requests: parsing, answering and the byte-exact serialisation of the
//! structures the answers carry.
//!
//! [`handle_ndis_request`] parses an `NDIS_OID_REQUEST` (a query gets its
//! information buffer as `&mut [u8]`, a set as `&[u8]`), calls [`handle`] (or
//! [`handle_direct`] for the direct OID path) and stores the [`OidOutcome`]
//! back into `BytesWritten` / `BytesRead` / `BytesNeeded`; the Windows glue
//! only adds the queuing of the NDK work item.
//!
//! Apart from reading the request's raw pointers, nothing here is unsafe or
//! platform-specific: every answer is written field by field at the offsets
//! asserted in `abi`, with little-endian integers, so no uninitialised byte (padding, an unused union member) can
//! reach a caller's buffer, and a buffer too small for an answer gets
//! `NDIS_STATUS_BUFFER_TOO_SHORT` with the size needed in `BytesNeeded`.
//!
//! No request ever pends: every status returned here is final (rule A13 for
//! `OID_NDK_SET_STATE`, and simply true of every other OID).

use core::mem::offset_of;
use core::net::SocketAddr;

use crate::abi::{
    AF_INET, AF_INET6, NDIS_NDK_CONNECTIONS_REVISION_1, NDIS_NDK_LOCAL_ENDPOINTS_REVISION_1,
    NDIS_NDK_STATISTICS_INFO_REVISION_1, NDIS_OBJECT_TYPE_DEFAULT,
    NDIS_SIZEOF_NDK_STATISTICS_INFO_REVISION_1, NDIS_STATUS_BUFFER_TOO_SHORT,
    NDIS_STATUS_INVALID_LENGTH, NDIS_STATUS_MULTICAST_FULL, NDIS_STATUS_NOT_SUPPORTED,
    NDIS_STATUS_SUCCESS, NdisNdkConnectionEntry, NdisNdkConnections, NdisNdkLocalEndpointEntry,
    NdisNdkPerformanceCounters, NdisNdkStatisticsInfo, NdisObjectHeader, NdisOid, NdisStatus,
    NdkRdmaTechnology, SockAddrIn, SockAddrIn6, SockAddrInet,
    ndis_sizeof_ndk_connections_revision_1, ndis_sizeof_ndk_local_endpoints_revision_1,
};
use crate::abi::{
    NDIS_INTERRUPT_MODERATION_PARAMETERS_REVISION_1,
    NDIS_SIZEOF_INTERRUPT_MODERATION_PARAMETERS_REVISION_1, NDIS_SIZEOF_STATISTICS_INFO_REVISION_1,
    NDIS_STATISTICS_INFO_REVISION_1, NdisInterruptModeration, NdisInterruptModerationParameters,
    NdisStatisticsInfo,
};
use crate::abi::{
    OID_802_3_CURRENT_ADDRESS, OID_802_3_MAXIMUM_LIST_SIZE, OID_802_3_MULTICAST_LIST,
    OID_802_3_PERMANENT_ADDRESS, OID_802_3_RCV_ERROR_ALIGNMENT, OID_802_3_XMIT_MORE_COLLISIONS,
    OID_802_3_XMIT_ONE_COLLISION, OID_GEN_CURRENT_LOOKAHEAD, OID_GEN_CURRENT_PACKET_FILTER,
    OID_GEN_DRIVER_VERSION, OID_GEN_HARDWARE_STATUS, OID_GEN_INTERRUPT_MODERATION,
    OID_GEN_LINK_PARAMETERS, OID_GEN_LINK_SPEED, OID_GEN_MAC_OPTIONS, OID_GEN_MAXIMUM_FRAME_SIZE,
    OID_GEN_MAXIMUM_LOOKAHEAD, OID_GEN_MAXIMUM_SEND_PACKETS, OID_GEN_MAXIMUM_TOTAL_SIZE,
    OID_GEN_MEDIA_CONNECT_STATUS, OID_GEN_MEDIA_IN_USE, OID_GEN_MEDIA_SUPPORTED,
    OID_GEN_PHYSICAL_MEDIUM, OID_GEN_RCV_ERROR, OID_GEN_RCV_NO_BUFFER, OID_GEN_RCV_OK,
    OID_GEN_RECEIVE_BLOCK_SIZE, OID_GEN_RECEIVE_BUFFER_SPACE, OID_GEN_STATISTICS,
    OID_GEN_SUPPORTED_LIST, OID_GEN_TRANSMIT_BLOCK_SIZE, OID_GEN_TRANSMIT_BUFFER_SPACE,
    OID_GEN_TRANSMIT_QUEUE_LENGTH, OID_GEN_VENDOR_DESCRIPTION, OID_GEN_VENDOR_DRIVER_VERSION,
    OID_GEN_VENDOR_ID, OID_GEN_XMIT_ERROR, OID_GEN_XMIT_OK, OID_NDK_CONNECTIONS,
    OID_NDK_LOCAL_ENDPOINTS, OID_NDK_SET_STATE, OID_NDK_STATISTICS, OID_PNP_QUERY_POWER,
    OID_PNP_SET_POWER,
};

use crate::abi::{NDIS_STATUS_INVALID_DATA, NdisOidRequest, NdisRequestType};
use crate::abi::{
    OID_SOFTNDK_CHECKED, SOFTNDK_CHECKED_COUNT_SIZE, SOFTNDK_CHECKED_HEADER_SIZE,
    SOFTNDK_CHECKED_REPORT_SIZE, SOFTNDK_CHECKED_REPORT_TEXT, SOFTNDK_CHECKED_REVISION_1,
};
use crate::abi::{
    OID_SOFTNDK_FAULTS, SOFTNDK_FAULTS_ENTRY_SIZE, SOFTNDK_FAULTS_HEADER_SIZE,
    SOFTNDK_FAULTS_REVISION_1,
};

use super::adapter::Adapter;
use super::config::MAC_LEN;
use super::ndk::{Connection, LocalEndpoint, NdkProvider};

/// A parsed OID request.
#[derive(Debug)]
pub enum OidRequest<'a> {
    /// `NdisRequestQueryInformation` / `NdisRequestQueryStatistics`: the
    /// answer goes into `buffer`.
    Query {
        /// `Oid`.
        oid: NdisOid,
        /// `InformationBuffer` of `InformationBufferLength` bytes.
        buffer: &'a mut [u8],
    },
    /// `NdisRequestSetInformation`: the value is in `buffer`.
    Set {
        /// `Oid`.
        oid: NdisOid,
        /// `InformationBuffer` of `InformationBufferLength` bytes.
        buffer: &'a [u8],
    },
    /// `NdisRequestMethod` or any other type: SoftNDK supports none.
    Other {
        /// `Oid`.
        oid: NdisOid,
    },
}

/// The result of an OID request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OidOutcome {
    /// The status the handler returns; never `NDIS_STATUS_PENDING`.
    pub status: NdisStatus,
    /// `BytesWritten` (query) or `BytesRead` (set).
    pub bytes_done: u32,
    /// `BytesNeeded`.
    pub bytes_needed: u32,
    /// The NDK state changed and the announcing work item must be queued
    /// (after the handler has stored the outcome; rule A14).
    pub queue_ndk_work: bool,
}

impl OidOutcome {
    /// A status with no bytes moved.
    #[must_use]
    pub const fn status(status: NdisStatus) -> Self {
        Self {
            status,
            bytes_done: 0,
            bytes_needed: 0,
            queue_ndk_work: false,
        }
    }

    /// `NDIS_STATUS_NOT_SUPPORTED`.
    #[must_use]
    pub const fn not_supported() -> Self {
        Self::status(NDIS_STATUS_NOT_SUPPORTED)
    }

    /// Success after moving `bytes` bytes.
    #[must_use]
    pub const fn done(bytes: usize) -> Self {
        Self {
            status: NDIS_STATUS_SUCCESS,
            bytes_done: clamp_u32(bytes),
            bytes_needed: 0,
            queue_ndk_work: false,
        }
    }

    /// A query buffer shorter than `needed` bytes.
    #[must_use]
    pub const fn too_short(needed: usize) -> Self {
        Self {
            status: NDIS_STATUS_BUFFER_TOO_SHORT,
            bytes_done: 0,
            bytes_needed: clamp_u32(needed),
            queue_ndk_work: false,
        }
    }

    /// A set buffer whose length is wrong; `needed` is the length expected.
    #[must_use]
    pub const fn invalid_length(needed: usize) -> Self {
        Self {
            status: NDIS_STATUS_INVALID_LENGTH,
            bytes_done: 0,
            bytes_needed: clamp_u32(needed),
            queue_ndk_work: false,
        }
    }
}

/// A byte count as the `UINT` fields of `NDIS_OID_REQUEST` hold it.
const fn clamp_u32(n: usize) -> u32 {
    saturate!(n => u32)
}

/// Every OID SoftNDK answers: the general and 802.3 OIDs an NDIS 6 Ethernet
/// miniport must support, the power OIDs its power-management capabilities
/// imply, the four NDK OIDs (rule A9) and SoftNDK's checked-mode query. Reported to NDIS in the general
/// attributes' `SupportedOidList`.
pub static SUPPORTED_OIDS: [NdisOid; 46] = [
    OID_GEN_SUPPORTED_LIST,
    OID_GEN_HARDWARE_STATUS,
    OID_GEN_MEDIA_SUPPORTED,
    OID_GEN_MEDIA_IN_USE,
    OID_GEN_PHYSICAL_MEDIUM,
    OID_GEN_MAXIMUM_LOOKAHEAD,
    OID_GEN_MAXIMUM_FRAME_SIZE,
    OID_GEN_LINK_SPEED,
    OID_GEN_TRANSMIT_BUFFER_SPACE,
    OID_GEN_RECEIVE_BUFFER_SPACE,
    OID_GEN_TRANSMIT_BLOCK_SIZE,
    OID_GEN_RECEIVE_BLOCK_SIZE,
    OID_GEN_VENDOR_ID,
    OID_GEN_VENDOR_DESCRIPTION,
    OID_GEN_VENDOR_DRIVER_VERSION,
    OID_GEN_DRIVER_VERSION,
    OID_GEN_CURRENT_PACKET_FILTER,
    OID_GEN_CURRENT_LOOKAHEAD,
    OID_GEN_MAXIMUM_TOTAL_SIZE,
    OID_GEN_MAC_OPTIONS,
    OID_GEN_MEDIA_CONNECT_STATUS,
    OID_GEN_MAXIMUM_SEND_PACKETS,
    OID_GEN_LINK_PARAMETERS,
    OID_GEN_INTERRUPT_MODERATION,
    OID_GEN_XMIT_OK,
    OID_GEN_RCV_OK,
    OID_GEN_XMIT_ERROR,
    OID_GEN_RCV_ERROR,
    OID_GEN_RCV_NO_BUFFER,
    OID_GEN_STATISTICS,
    OID_GEN_TRANSMIT_QUEUE_LENGTH,
    OID_802_3_PERMANENT_ADDRESS,
    OID_802_3_CURRENT_ADDRESS,
    OID_802_3_MULTICAST_LIST,
    OID_802_3_MAXIMUM_LIST_SIZE,
    OID_802_3_RCV_ERROR_ALIGNMENT,
    OID_802_3_XMIT_ONE_COLLISION,
    OID_802_3_XMIT_MORE_COLLISIONS,
    OID_PNP_SET_POWER,
    OID_PNP_QUERY_POWER,
    OID_NDK_SET_STATE,
    OID_NDK_STATISTICS,
    OID_NDK_CONNECTIONS,
    OID_NDK_LOCAL_ENDPOINTS,
    OID_SOFTNDK_CHECKED,
    OID_SOFTNDK_FAULTS,
];

/// The OIDs that are sets only; every other supported OID is a query (some
/// are both: the packet filter, the lookahead and the multicast list).
pub const SET_ONLY_OIDS: [NdisOid; 3] = [
    OID_GEN_LINK_PARAMETERS,
    OID_PNP_SET_POWER,
    OID_NDK_SET_STATE,
];

/// The OIDs that may be set as well as queried.
pub const SETTABLE_OIDS: [NdisOid; 3] = [
    OID_GEN_CURRENT_PACKET_FILTER,
    OID_GEN_CURRENT_LOOKAHEAD,
    OID_802_3_MULTICAST_LIST,
];

/// The most multicast addresses the adapter keeps (`OID_802_3_MAXIMUM_LIST_SIZE`).
pub const MAX_MULTICAST_LIST: usize = 32;

/// `OID_GEN_VENDOR_DESCRIPTION`: NUL-terminated.
pub const VENDOR_DESCRIPTION: &[u8] = b"SoftNDK software RDMA (NDK) adapter\0";

/// The link speed reported for the virtual wire, bits per second.
pub const LINK_SPEED_BPS: u64 = 100_000_000_000;

/// Frames the adapter can have in flight (it has none: every send completes
/// before the send handler returns); used for the buffer-space OIDs.
const SEND_SLOTS: u32 = 64;

/// `NDIS_MEDIA_STATE::NdisMediaStateConnected` (0), for
/// `OID_GEN_MEDIA_CONNECT_STATUS` (a different enum from the general
/// attributes' `NET_IF_MEDIA_CONNECT_STATE`).
const NDIS_MEDIA_STATE_CONNECTED: u32 = 0;

/// `NDIS_MEDIA_STATE::NdisMediaStateDisconnected` (1): the virtual
/// Ethernet's socket is not bound (yet, or any more).
const NDIS_MEDIA_STATE_DISCONNECTED: u32 = 1;

/// `major << 16 | minor` of this crate's version, for
/// `OID_GEN_VENDOR_DRIVER_VERSION`.
pub const VENDOR_DRIVER_VERSION: u32 = (parse_u16(env!("CARGO_PKG_VERSION_MAJOR")) as u32) << 16
    | parse_u16(env!("CARGO_PKG_VERSION_MINOR")) as u32;

/// A decimal number at compile time (saturating, non-digits ignored).
const fn parse_u16(text: &str) -> u16 {
    let bytes = text.as_bytes();
    let mut value: u16 = 0;
    let mut i = 0;
    while i < bytes.len() {
        // PANIC: `i < bytes.len()`.
        let digit = bytes[i];
        if digit.is_ascii_digit() {
            value = value
                .saturating_mul(10)
                .saturating_add((digit - b'0') as u16);
        }
        i += 1;
    }
    value
}

/// Answers an OID request on the ordinary OID path (`MiniportOidRequest`,
/// PASSIVE_LEVEL).
pub fn handle(adapter: &Adapter, request: OidRequest<'_>) -> OidOutcome {
    match request {
        OidRequest::Query { oid, buffer } => query(adapter, oid, buffer),
        OidRequest::Set { oid, buffer } => set(adapter, oid, buffer),
        OidRequest::Other { .. } => OidOutcome::not_supported(),
    }
}

/// Answers an OID request on the direct OID path (`MiniportDirectOidRequest`,
/// IRQL ≤ DISPATCH_LEVEL): `OID_NDK_STATISTICS` only (rule A16); the answer
/// reads counters and never blocks.
pub fn handle_direct(adapter: &Adapter, request: OidRequest<'_>) -> OidOutcome {
    match request {
        OidRequest::Query {
            oid: OID_NDK_STATISTICS,
            buffer,
        } => ndk_statistics(adapter.provider(), buffer),
        _ => OidOutcome::not_supported(),
    }
}

/// Parses an `NDIS_OID_REQUEST`, answers it ([`handle`], or [`handle_direct`]
/// when `direct`) and stores `BytesWritten` / `BytesRead` and `BytesNeeded`
/// back into it. A null request is `NDIS_STATUS_INVALID_DATA`; a null
/// information buffer counts as an empty one.
///
/// # Safety
/// `request` is null or points to a valid `NDIS_OID_REQUEST` whose
/// `RequestType` says which member of `DATA` is valid, whose information
/// buffer is valid for `InformationBufferLength` bytes (writable for a
/// query), and which nothing else accesses during the call.
pub unsafe fn handle_ndis_request(
    adapter: &Adapter,
    request: *mut NdisOidRequest,
    direct: bool,
) -> OidOutcome {
    if request.is_null() {
        return OidOutcome::status(NDIS_STATUS_INVALID_DATA);
    }
    let handler = if direct { handle_direct } else { handle };
    // SAFETY: caller contract: a valid request.
    let request_type = unsafe { (*request).request_type };
    // SAFETY: caller contract; only the address of the union is taken.
    let data = unsafe { &raw mut (*request).data };
    // A request with a buffer: the union's `$member` (valid for the request
    // type: QUERY_INFORMATION for queries, SET_INFORMATION for sets, the
    // caller's contract), its buffer as a slice (`$slice`: writable for a
    // query), the handler's answer, and the byte counts written back
    // (`$done`: BytesWritten or BytesRead).
    macro_rules! answer {
        ($member:ident, $slice:ident, $variant:ident, $done:ident) => {{
            // SAFETY: `data` points into the valid request; only the
            // address of the member is taken.
            let member = unsafe { &raw mut (*data).$member };
            // SAFETY: the valid member for this request type (caller
            // contract), and this is the only reference to it.
            let member = unsafe { &mut *member };
            let (at, length) = (member.information_buffer, member.information_buffer_length);
            // SAFETY: caller contract: the buffer is valid for its length
            // (writable for a query), and not aliased.
            let buffer = unsafe { $slice(at, length) };
            let outcome = handler(
                adapter,
                OidRequest::$variant {
                    oid: member.oid,
                    buffer,
                },
            );
            member.$done = outcome.bytes_done;
            member.bytes_needed = outcome.bytes_needed;
            outcome
        }};
    }
    match request_type {
        NdisRequestType::QUERY_INFORMATION | NdisRequestType::QUERY_STATISTICS => {
            answer!(query_information, buffer_mut, Query, bytes_written)
        }
        NdisRequestType::SET_INFORMATION => answer!(set_information, buffer_ref, Set, bytes_read),
        _ => {
            // SAFETY: as above.
            let oid = unsafe { &raw const (*data).method_information.oid };
            // SAFETY: every member of the union starts with the OID, which is
            // initialised whatever the request type.
            let oid = unsafe { oid.read() };
            handler(adapter, OidRequest::Other { oid })
        }
    }
}

/// An information buffer as a mutable byte slice (empty when null).
///
/// # Safety
/// `buffer` is null or valid for `length` writable bytes, not aliased.
unsafe fn buffer_mut<'a>(buffer: *mut core::ffi::c_void, length: u32) -> &'a mut [u8] {
    if buffer.is_null() || length == 0 {
        return &mut [];
    }
    // SAFETY: caller contract.
    unsafe { core::slice::from_raw_parts_mut(buffer.cast::<u8>(), length as usize) }
}

/// An information buffer as a byte slice (empty when null).
///
/// # Safety
/// `buffer` is null or valid for `length` readable bytes.
unsafe fn buffer_ref<'a>(buffer: *mut core::ffi::c_void, length: u32) -> &'a [u8] {
    if buffer.is_null() || length == 0 {
        return &[];
    }
    // SAFETY: caller contract.
    unsafe { core::slice::from_raw_parts(buffer.cast::<u8>().cast_const(), length as usize) }
}

fn query(adapter: &Adapter, oid: NdisOid, buffer: &mut [u8]) -> OidOutcome {
    let config = adapter.config();
    let mtu = config.mtu();
    let frame = config.jumbo_packet;
    let tx = adapter.tx_counters();
    match oid {
        OID_GEN_SUPPORTED_LIST => {
            let needed = SUPPORTED_OIDS.len() * size_of::<NdisOid>();
            answer_with(buffer, needed, |w| {
                for (i, oid) in SUPPORTED_OIDS.iter().enumerate() {
                    w.u32(i * size_of::<NdisOid>(), *oid);
                }
            })
        }
        OID_GEN_HARDWARE_STATUS => answer_u32(buffer, crate::abi::NdisHardwareStatus::READY.0),
        OID_GEN_MEDIA_SUPPORTED | OID_GEN_MEDIA_IN_USE => {
            answer_u32(buffer, crate::abi::NdisMedium::MEDIUM_802_3.0)
        }
        OID_GEN_PHYSICAL_MEDIUM => {
            answer_u32(buffer, crate::abi::NdisPhysicalMedium::MEDIUM_802_3.0)
        }
        OID_GEN_MAXIMUM_LOOKAHEAD | OID_GEN_MAXIMUM_FRAME_SIZE => answer_u32(buffer, mtu),
        OID_GEN_LINK_SPEED => answer_u32(buffer, clamp_u32((LINK_SPEED_BPS / 100) as usize)),
        OID_GEN_TRANSMIT_BUFFER_SPACE | OID_GEN_RECEIVE_BUFFER_SPACE => {
            answer_u32(buffer, frame.saturating_mul(SEND_SLOTS))
        }
        OID_GEN_TRANSMIT_BLOCK_SIZE | OID_GEN_RECEIVE_BLOCK_SIZE | OID_GEN_MAXIMUM_TOTAL_SIZE => {
            answer_u32(buffer, frame)
        }
        OID_GEN_VENDOR_ID => answer_u32(buffer, crate::provider::iface::VENDOR_ID),
        OID_GEN_VENDOR_DESCRIPTION => answer_bytes(buffer, VENDOR_DESCRIPTION),
        OID_GEN_VENDOR_DRIVER_VERSION => answer_u32(buffer, VENDOR_DRIVER_VERSION),
        OID_GEN_DRIVER_VERSION => answer_bytes(
            buffer,
            &u16::from_be_bytes([
                crate::abi::NDIS_MINIPORT_MAJOR_VERSION,
                crate::abi::NDIS_MINIPORT_MINOR_VERSION,
            ])
            .to_le_bytes(),
        ),
        OID_GEN_CURRENT_PACKET_FILTER => answer_u32(buffer, adapter.packet_filter()),
        OID_GEN_CURRENT_LOOKAHEAD => answer_u32(buffer, adapter.lookahead()),
        OID_GEN_MAC_OPTIONS => answer_u32(buffer, super::attributes::MAC_OPTIONS),
        OID_GEN_MEDIA_CONNECT_STATUS => answer_u32(
            buffer,
            if adapter.media_connected() {
                NDIS_MEDIA_STATE_CONNECTED
            } else {
                NDIS_MEDIA_STATE_DISCONNECTED
            },
        ),
        OID_GEN_MAXIMUM_SEND_PACKETS => answer_u32(buffer, SEND_SLOTS),
        OID_GEN_INTERRUPT_MODERATION => interrupt_moderation(buffer),
        OID_GEN_XMIT_OK => answer_counter(buffer, tx.frames()),
        OID_GEN_RCV_OK => answer_counter(buffer, adapter.rx_counters().frames()),
        OID_GEN_XMIT_ERROR => answer_counter(buffer, adapter.xmit_errors()),
        OID_GEN_RCV_ERROR => answer_counter(buffer, adapter.rx_errors().0),
        OID_GEN_RCV_NO_BUFFER => answer_counter(buffer, adapter.rx_errors().1),
        OID_GEN_TRANSMIT_QUEUE_LENGTH
        | OID_802_3_RCV_ERROR_ALIGNMENT
        | OID_802_3_XMIT_ONE_COLLISION
        | OID_802_3_XMIT_MORE_COLLISIONS => answer_u32(buffer, 0),
        OID_GEN_STATISTICS => gen_statistics(adapter, buffer),
        OID_802_3_PERMANENT_ADDRESS => answer_bytes(buffer, &adapter.permanent_mac()),
        OID_802_3_CURRENT_ADDRESS => answer_bytes(buffer, &config.mac),
        OID_802_3_MULTICAST_LIST => {
            let list = adapter.multicast_list();
            answer_bytes(buffer, list.as_bytes())
        }
        OID_802_3_MAXIMUM_LIST_SIZE => answer_u32(buffer, clamp_u32(MAX_MULTICAST_LIST)),
        OID_PNP_QUERY_POWER => OidOutcome::done(0),
        OID_NDK_STATISTICS => ndk_statistics(adapter.provider(), buffer),
        OID_NDK_CONNECTIONS => write_list(adapter.provider(), buffer, &CONNECTIONS),
        OID_NDK_LOCAL_ENDPOINTS => write_list(adapter.provider(), buffer, &LOCAL_ENDPOINTS),
        OID_SOFTNDK_CHECKED => checked_reports(buffer),
        OID_SOFTNDK_FAULTS => fault_trace(buffer),
        _ => OidOutcome::not_supported(),
    }
}

fn set(adapter: &Adapter, oid: NdisOid, buffer: &[u8]) -> OidOutcome {
    match oid {
        OID_NDK_SET_STATE => ndk_set_state(adapter, buffer),
        OID_GEN_CURRENT_PACKET_FILTER => match read_u32_exact(buffer) {
            Some(filter) => {
                adapter.set_packet_filter(filter);
                OidOutcome::done(4)
            }
            None => OidOutcome::invalid_length(4),
        },
        OID_GEN_CURRENT_LOOKAHEAD => match read_u32_exact(buffer) {
            Some(lookahead) if lookahead <= adapter.config().mtu() => {
                adapter.set_lookahead(lookahead);
                OidOutcome::done(4)
            }
            Some(_) => OidOutcome::status(crate::abi::NDIS_STATUS_INVALID_DATA),
            None => OidOutcome::invalid_length(4),
        },
        OID_802_3_MULTICAST_LIST => {
            if !buffer.len().is_multiple_of(MAC_LEN) {
                return OidOutcome::invalid_length(buffer.len() / MAC_LEN * MAC_LEN);
            }
            if buffer.len() / MAC_LEN > MAX_MULTICAST_LIST {
                return OidOutcome::status(NDIS_STATUS_MULTICAST_FULL);
            }
            adapter.set_multicast_list(buffer);
            OidOutcome::done(buffer.len())
        }
        // Accepted and ignored: the virtual wire has one speed and duplex.
        OID_GEN_LINK_PARAMETERS => OidOutcome::done(buffer.len()),
        // A power state: `NDIS_DEVICE_POWER_STATE`. There is no hardware to
        // power down, and NDIS pauses the adapter around power transitions.
        OID_PNP_SET_POWER => {
            if buffer.len() < 4 {
                OidOutcome::invalid_length(4)
            } else {
                OidOutcome::done(4)
            }
        }
        _ => OidOutcome::not_supported(),
    }
}

/// `OID_NDK_SET_STATE` (rule A13): a one-byte `BOOLEAN`; never pends.
fn ndk_set_state(adapter: &Adapter, buffer: &[u8]) -> OidOutcome {
    let Some(&value) = buffer.first() else {
        return OidOutcome::invalid_length(size_of::<crate::abi::Boolean>());
    };
    let transition = adapter.ndk().request(value != 0);
    OidOutcome {
        status: transition.status,
        bytes_done: 1,
        bytes_needed: 0,
        queue_ndk_work: transition.queue_work,
    }
}

fn interrupt_moderation(buffer: &mut [u8]) -> OidOutcome {
    let needed = usize::from(NDIS_SIZEOF_INTERRUPT_MODERATION_PARAMETERS_REVISION_1);
    answer_with(buffer, needed, |w| {
        w.default_header(
            NDIS_INTERRUPT_MODERATION_PARAMETERS_REVISION_1,
            NDIS_SIZEOF_INTERRUPT_MODERATION_PARAMETERS_REVISION_1,
        );
        w.u32(offset_of!(NdisInterruptModerationParameters, flags), 0);
        w.u32(
            offset_of!(NdisInterruptModerationParameters, interrupt_moderation),
            NdisInterruptModeration::NOT_SUPPORTED.0,
        );
    })
}

// The runs of consecutive `ULONG64`s of `NDIS_STATISTICS_INFO` that
// `gen_statistics` writes with one `Writer::u64s` each: a direction's octets
// and its unicast, multicast and broadcast frames; its unicast, multicast and
// broadcast octets.
const _: () = {
    type S = NdisStatisticsInfo;
    let step = size_of::<u64>();
    assert!(offset_of!(S, if_hc_in_broadcast_pkts) == offset_of!(S, if_hc_in_octets) + 3 * step);
    assert!(offset_of!(S, if_hc_out_broadcast_pkts) == offset_of!(S, if_hc_out_octets) + 3 * step);
    assert!(
        offset_of!(S, if_hc_in_broadcast_octets) == offset_of!(S, if_hc_in_ucast_octets) + 2 * step
    );
    assert!(
        offset_of!(S, if_hc_out_broadcast_octets)
            == offset_of!(S, if_hc_out_ucast_octets) + 2 * step
    );
};

/// `OID_GEN_STATISTICS`: `NDIS_STATISTICS_INFO` of the Ethernet side.
fn gen_statistics(adapter: &Adapter, buffer: &mut [u8]) -> OidOutcome {
    let tx = adapter.tx_counters();
    let needed = usize::from(NDIS_SIZEOF_STATISTICS_INFO_REVISION_1);
    answer_with(buffer, needed, |w| {
        type S = NdisStatisticsInfo;
        w.default_header(
            NDIS_STATISTICS_INFO_REVISION_1,
            NDIS_SIZEOF_STATISTICS_INFO_REVISION_1,
        );
        w.u32(
            offset_of!(S, supported_statistics),
            super::attributes::STATISTICS_FLAGS_VALID,
        );
        let rx = adapter.rx_counters();
        let (rx_errors, rx_no_buffer) = adapter.rx_errors();
        w.u64(offset_of!(S, if_in_errors), rx_errors);
        w.u64(offset_of!(S, if_in_discards), rx_no_buffer);
        w.u64(offset_of!(S, if_out_errors), adapter.xmit_errors());
        // The `ifHC*` counters of each direction, in the structure's runs of
        // consecutive `ULONG64`s (asserted above).
        for (frames, octets, of) in [
            (
                offset_of!(S, if_hc_in_octets),
                offset_of!(S, if_hc_in_ucast_octets),
                &rx,
            ),
            (
                offset_of!(S, if_hc_out_octets),
                offset_of!(S, if_hc_out_ucast_octets),
                &tx,
            ),
        ] {
            let (u, m, b) = (&of.unicast, &of.multicast, &of.broadcast);
            w.u64s(frames, &[of.octets(), u.frames, m.frames, b.frames]);
            w.u64s(octets, &[u.octets, m.octets, b.octets]);
        }
    })
}

/// `OID_NDK_STATISTICS` (rules A16, A17): `NDIS_NDK_STATISTICS_INFO` with the
/// provider's counters; the reserved counters are written as 0 whatever the
/// provider put there.
pub fn ndk_statistics(provider: &dyn NdkProvider, buffer: &mut [u8]) -> OidOutcome {
    let needed = usize::from(NDIS_SIZEOF_NDK_STATISTICS_INFO_REVISION_1);
    if buffer.len() < needed {
        return OidOutcome::too_short(needed);
    }
    let counters = provider.statistics();
    answer_with(buffer, needed, |w| {
        w.default_header(
            NDIS_NDK_STATISTICS_INFO_REVISION_1,
            NDIS_SIZEOF_NDK_STATISTICS_INFO_REVISION_1,
        );
        w.u32(offset_of!(NdisNdkStatisticsInfo, flags), 0);
        let base = offset_of!(NdisNdkStatisticsInfo, counter_set);
        for (offset, value) in counter_fields(&counters) {
            w.u64(base + offset, value);
        }
    })
}

/// `OID_SOFTNDK_CHECKED`: checked mode's counters and kept reports, in the
/// layout `abi::OID_SOFTNDK_CHECKED` documents. A report made while this
/// runs may or may not be in the answer; the counts and the entries always
/// agree with each other.
pub fn checked_reports(buffer: &mut [u8]) -> OidOutcome {
    use crate::provider::checked::{self, Breach, KEPT, Mode, Report};
    let mut kept: [Option<(usize, Report)>; KEPT] = [None; KEPT];
    let mut n = 0_usize;
    checked::each_numbered_report(|seq, report| {
        if let Some(slot) = kept.get_mut(n) {
            *slot = Some((seq, *report));
            n += 1;
        }
    });
    let rules = Breach::ALL.len();
    let counts_at = SOFTNDK_CHECKED_HEADER_SIZE;
    let reports_at = counts_at + rules * SOFTNDK_CHECKED_COUNT_SIZE;
    let needed = reports_at + n * SOFTNDK_CHECKED_REPORT_SIZE;
    let mode = match checked::mode() {
        Mode::Off => 0,
        Mode::Report => 1,
        Mode::Stop => 2,
    };
    answer_with(buffer, needed, |w| {
        w.u32(0x00, SOFTNDK_CHECKED_REVISION_1);
        w.u32(0x04, clamp_u32(needed));
        w.u32(0x08, mode);
        w.u32(0x0C, clamp_u32(rules));
        w.u32(0x10, clamp_u32(n));
        w.u64(0x18, checked::reported_total() as u64);
        for (i, breach) in Breach::ALL.iter().enumerate() {
            let at = counts_at + i * SOFTNDK_CHECKED_COUNT_SIZE;
            w.bytes(at, breach.rule().as_bytes());
            w.u64(at + 8, checked::breaches(*breach) as u64);
        }
        for (i, (seq, report)) in kept.iter().flatten().enumerate() {
            let at = reports_at + i * SOFTNDK_CHECKED_REPORT_SIZE;
            w.bytes(at, report.breach.rule().as_bytes());
            w.u32(at + 0x08, report.object_type.0);
            w.u64(at + 0x10, report.object as u64);
            w.u64(at + 0x18, *seq as u64);
            w.u64(at + 0x20, report.detail);
            let mut text = crate::kernel::log::Message::new();
            let _ = core::fmt::Write::write_fmt(&mut text, format_args!("{report}"));
            let room = SOFTNDK_CHECKED_REPORT_SIZE - SOFTNDK_CHECKED_REPORT_TEXT - 1;
            let text = text.as_str();
            let mut take = text.len().min(room);
            while !text.is_char_boundary(take) {
                take -= 1;
            }
            let text = text.as_bytes().get(..take).unwrap_or_default();
            w.bytes(at + SOFTNDK_CHECKED_REPORT_TEXT, text);
        }
    })
}

/// `OID_SOFTNDK_FAULTS`: the fault plan in force, each kind's call counter
/// and the kept injected faults, in the layout `abi::OID_SOFTNDK_FAULTS`
/// documents. A fault injected while this runs may or may not be in the
/// answer; the counts and the entries always agree with each other.
pub fn fault_trace(buffer: &mut [u8]) -> OidOutcome {
    use crate::rnic::fault::{self, KINDS, Kind, MAX_SCHEDULED, Record, TRACE_LEN};
    let plan = fault::installed();
    let mut records: [Option<Record>; TRACE_LEN] = [None; TRACE_LEN];
    let mut n = 0_usize;
    fault::each_record(|record| {
        if let Some(slot) = records.get_mut(n) {
            *slot = Some(record);
            n += 1;
        }
    });
    let mut schedule: [Option<(Kind, u64)>; MAX_SCHEDULED] = [None; MAX_SCHEDULED];
    if let Some(plan) = &plan {
        schedule = plan.schedule;
    }
    let scheduled = schedule.iter().flatten().count();
    let kinds_at = SOFTNDK_FAULTS_HEADER_SIZE;
    let schedule_at = kinds_at + KINDS * SOFTNDK_FAULTS_ENTRY_SIZE;
    let records_at = schedule_at + scheduled * SOFTNDK_FAULTS_ENTRY_SIZE;
    let needed = records_at + n * SOFTNDK_FAULTS_ENTRY_SIZE;
    answer_with(buffer, needed, |w| {
        w.u32(0x00, SOFTNDK_FAULTS_REVISION_1);
        w.u32(0x04, clamp_u32(needed));
        w.u32(0x08, u32::from(plan.is_some()));
        w.u32(0x0C, clamp_u32(KINDS));
        w.u32(0x10, clamp_u32(scheduled));
        w.u32(0x14, clamp_u32(n));
        w.u64(0x18, plan.map_or(0, |p| p.seed));
        w.u64(0x20, fault::injected() as u64);
        for (i, kind) in Kind::ALL.iter().enumerate() {
            let at = kinds_at + i * SOFTNDK_FAULTS_ENTRY_SIZE;
            let rate = plan.map_or(0, |p| p.rates.get(i).copied().unwrap_or(0));
            w.u32(at, rate);
            w.u64(at + 8, fault::calls(*kind));
        }
        let entries = schedule
            .iter()
            .flatten()
            .map(|&(kind, index)| (schedule_at, kind, index))
            .enumerate()
            .chain(
                records
                    .iter()
                    .flatten()
                    .map(|r| (records_at, r.kind, r.index))
                    .enumerate(),
            );
        for (i, (base, kind, index)) in entries {
            let at = base + i * SOFTNDK_FAULTS_ENTRY_SIZE;
            w.u32(at, kind as u32);
            w.u64(at + 8, index);
        }
    })
}

/// Every field of `NDIS_NDK_PERFORMANCE_COUNTERS` as (offset, value), the
/// reserved ones as 0.
fn counter_fields(c: &NdisNdkPerformanceCounters) -> [(usize, u64); 30] {
    type P = NdisNdkPerformanceCounters;
    let reserved = |offset: usize| (offset, 0);
    [
        (offset_of!(P, connect), c.connect),
        (offset_of!(P, accept), c.accept),
        (offset_of!(P, connect_failure), c.connect_failure),
        (offset_of!(P, connection_error), c.connection_error),
        (offset_of!(P, active_connection), c.active_connection),
        reserved(offset_of!(P, reserved01)),
        reserved(offset_of!(P, reserved02)),
        reserved(offset_of!(P, reserved03)),
        reserved(offset_of!(P, reserved04)),
        reserved(offset_of!(P, reserved05)),
        reserved(offset_of!(P, reserved06)),
        reserved(offset_of!(P, reserved07)),
        reserved(offset_of!(P, reserved08)),
        reserved(offset_of!(P, reserved09)),
        reserved(offset_of!(P, reserved10)),
        reserved(offset_of!(P, reserved11)),
        reserved(offset_of!(P, reserved12)),
        reserved(offset_of!(P, reserved13)),
        reserved(offset_of!(P, reserved14)),
        reserved(offset_of!(P, reserved15)),
        reserved(offset_of!(P, reserved16)),
        reserved(offset_of!(P, reserved17)),
        reserved(offset_of!(P, reserved18)),
        reserved(offset_of!(P, reserved19)),
        reserved(offset_of!(P, reserved20)),
        (offset_of!(P, cq_error), c.cq_error),
        (offset_of!(P, rdma_in_octets), c.rdma_in_octets),
        (offset_of!(P, rdma_out_octets), c.rdma_out_octets),
        (offset_of!(P, rdma_in_frames), c.rdma_in_frames),
        (offset_of!(P, rdma_out_frames), c.rdma_out_frames),
    ]
}

/// Whether the technology maps ND connections and endpoints onto TCP, so that
/// the lists come in ND/TCP pairs (rule A21): iWARP only.
#[must_use]
pub fn maps_to_tcp(technology: NdkRdmaTechnology) -> bool {
    technology == NdkRdmaTechnology::IWARP
}

/// `OID_NDK_CONNECTIONS` (rules A19, A21).
const CONNECTIONS: NdkList<Connection> = NdkList {
    revision: NDIS_NDK_CONNECTIONS_REVISION_1,
    size_of: ndis_sizeof_ndk_connections_revision_1,
    entries: |provider, out| provider.connections(out),
    write: write_connection,
};

/// `OID_NDK_LOCAL_ENDPOINTS` (rules A20, A21).
const LOCAL_ENDPOINTS: NdkList<LocalEndpoint> = NdkList {
    revision: NDIS_NDK_LOCAL_ENDPOINTS_REVISION_1,
    size_of: ndis_sizeof_ndk_local_endpoints_revision_1,
    entries: |provider, out| provider.local_endpoints(out),
    write: write_endpoint,
};

/// One `NDIS_NDK_CONNECTION_ENTRY` at `at` (zeroed by the caller).
fn write_connection(w: &mut Writer<'_>, at: usize, c: &Connection) {
    type E = NdisNdkConnectionEntry;
    w.sockaddr_inet(at + offset_of!(E, local), &c.local);
    w.sockaddr_inet(at + offset_of!(E, remote), &c.remote);
    w.u8(
        at + offset_of!(E, user_mode_owner),
        u8::from(c.user_mode_owner),
    );
    w.u32(at + offset_of!(E, owner_pid), c.owner_pid);
}

/// One `NDIS_NDK_LOCAL_ENDPOINT_ENTRY` at `at` (zeroed by the caller).
fn write_endpoint(w: &mut Writer<'_>, at: usize, e: &LocalEndpoint) {
    type E = NdisNdkLocalEndpointEntry;
    w.sockaddr_inet(at + offset_of!(E, local), &e.local);
    w.u8(
        at + offset_of!(E, user_mode_owner),
        u8::from(e.user_mode_owner),
    );
    w.u8(at + offset_of!(E, listener), u8::from(e.listener));
    w.u32(at + offset_of!(E, owner_pid), e.owner_pid);
}

/// One variable-length NDK list (connections, local endpoints): its header's
/// revision, its size with n entries (`NDIS_SIZEOF_…(n)`, the header plus n
/// entries), how the provider hands out its entries, and how one is written.
struct NdkList<T: 'static> {
    revision: u8,
    size_of: fn(usize) -> usize,
    entries: Entries<T>,
    write: fn(&mut Writer<'_>, usize, &T),
}

/// How a provider hands out the entries of one list, one call each.
type Entries<T> = fn(&dyn NdkProvider, &mut dyn FnMut(&T));

/// Where the fields after the object header stand in both lists' heads:
/// `Flags` (0), `Count`, and the byte saying whether entries come in ND/TCP
/// pairs (A21). The abi declares both lists as one
/// [`NdisNdkList`](crate::abi::NdisNdkList) over their entry types, so the
/// head's offsets do not depend on the entry.
const LIST_FLAGS: usize = offset_of!(NdisNdkConnections, flags);
const LIST_COUNT: usize = offset_of!(NdisNdkConnections, count);
const LIST_MAPS_TO_TCP: usize = offset_of!(NdisNdkConnections, mapped_to_tcp);

/// Writes a variable-length NDK list in one pass over the provider's entries:
/// entries that fit are written, all are counted, and the answer is
/// `BUFFER_TOO_SHORT` with the full size when some did not fit. One pass means
/// no allocation and no window in which the list can change between counting
/// and writing.
fn write_list<T>(provider: &dyn NdkProvider, buffer: &mut [u8], list: &NdkList<T>) -> OidOutcome {
    let tcp = maps_to_tcp(provider.adapter_info().rdma_technology);
    let mut w = Writer { buf: buffer };
    let header = (list.size_of)(0);
    let entry = (list.size_of)(1).saturating_sub(header);
    let mut count: usize = 0;
    (list.entries)(provider, &mut |item: &T| {
        let at = header.saturating_add(count.saturating_mul(entry));
        if at.saturating_add(entry) <= w.buf.len() {
            w.zero(at, entry);
            (list.write)(&mut w, at, item);
        }
        count = count.saturating_add(1);
    });
    let needed = (list.size_of)(count);
    if w.buf.len() < needed {
        return OidOutcome::too_short(needed);
    }
    w.zero(0, header);
    // The header's `Size` is a USHORT: min(0xFFFF, size) (rules A19, A20).
    let size = u16::try_from(needed).unwrap_or(u16::MAX);
    w.default_header(list.revision, size);
    w.u32(LIST_FLAGS, 0);
    w.u32(LIST_COUNT, clamp_u32(count));
    w.u8(LIST_MAPS_TO_TCP, u8::from(tcp));
    OidOutcome::done(needed)
}

/// Little-endian writes into an answer buffer. Every write is bounds-checked
/// and silently skipped out of range (callers check the length first, so that
/// never happens; skipping instead of panicking keeps a mistake from being a
/// bug check).
pub struct Writer<'a> {
    buf: &'a mut [u8],
}

impl Writer<'_> {
    fn bytes(&mut self, at: usize, bytes: &[u8]) {
        if let Some(dst) = self.buf.get_mut(at..at.saturating_add(bytes.len())) {
            dst.copy_from_slice(bytes);
        }
    }

    fn zero(&mut self, at: usize, len: usize) {
        if let Some(dst) = self.buf.get_mut(at..at.saturating_add(len)) {
            dst.fill(0);
        }
    }

    fn u8(&mut self, at: usize, value: u8) {
        self.bytes(at, &[value]);
    }

    fn u16(&mut self, at: usize, value: u16) {
        self.bytes(at, &value.to_le_bytes());
    }

    fn u32(&mut self, at: usize, value: u32) {
        self.bytes(at, &value.to_le_bytes());
    }

    fn u64(&mut self, at: usize, value: u64) {
        self.bytes(at, &value.to_le_bytes());
    }

    /// `values` as consecutive `ULONG64`s from `at`.
    fn u64s(&mut self, at: usize, values: &[u64]) {
        for (i, &value) in values.iter().enumerate() {
            self.u64(at + i * size_of::<u64>(), value);
        }
    }

    /// An `NDIS_OBJECT_HEADER` at 0, of type `NDIS_OBJECT_TYPE_DEFAULT`.
    fn default_header(&mut self, revision: u8, size: u16) {
        self.u8(
            offset_of!(NdisObjectHeader, type_),
            NDIS_OBJECT_TYPE_DEFAULT,
        );
        self.u8(offset_of!(NdisObjectHeader, revision), revision);
        self.u16(offset_of!(NdisObjectHeader, size), size);
    }

    /// A `SOCKADDR_INET` at `at`: `SOCKADDR_IN` or `SOCKADDR_IN6` with the
    /// Windows family values, the port in network order, and every other byte
    /// of the 0x1C-byte union zero.
    fn sockaddr_inet(&mut self, at: usize, addr: &SocketAddr) {
        self.zero(at, size_of::<SockAddrInet>());
        match addr {
            SocketAddr::V4(v4) => {
                self.u16(at + offset_of!(SockAddrIn, sin_family), AF_INET);
                self.bytes(
                    at + offset_of!(SockAddrIn, sin_port),
                    &v4.port().to_be_bytes(),
                );
                self.bytes(at + offset_of!(SockAddrIn, sin_addr), &v4.ip().octets());
            }
            SocketAddr::V6(v6) => {
                self.u16(at + offset_of!(SockAddrIn6, sin6_family), AF_INET6);
                self.bytes(
                    at + offset_of!(SockAddrIn6, sin6_port),
                    &v6.port().to_be_bytes(),
                );
                self.u32(at + offset_of!(SockAddrIn6, sin6_flowinfo), v6.flowinfo());
                self.bytes(at + offset_of!(SockAddrIn6, sin6_addr), &v6.ip().octets());
                self.u32(at + offset_of!(SockAddrIn6, sin6_scope_id), v6.scope_id());
            }
        }
    }
}

/// Answers a query with `needed` bytes written by `fill`, or
/// `BUFFER_TOO_SHORT`. The bytes are zeroed before `fill` runs, so fields it
/// does not write are 0.
fn answer_with(buffer: &mut [u8], needed: usize, fill: impl FnOnce(&mut Writer<'_>)) -> OidOutcome {
    let Some(out) = buffer.get_mut(..needed) else {
        return OidOutcome::too_short(needed);
    };
    out.fill(0);
    fill(&mut Writer { buf: out });
    OidOutcome::done(needed)
}

fn answer_bytes(buffer: &mut [u8], data: &[u8]) -> OidOutcome {
    answer_with(buffer, data.len(), |w| w.bytes(0, data))
}

fn answer_u32(buffer: &mut [u8], value: u32) -> OidOutcome {
    answer_bytes(buffer, &value.to_le_bytes())
}

/// A 64-bit statistics counter: eight bytes when there is room, the low four
/// bytes for a four-byte buffer (NDIS 5 callers), and `BytesNeeded` 8 either
/// way.
fn answer_counter(buffer: &mut [u8], value: u64) -> OidOutcome {
    let bytes = value.to_le_bytes();
    let mut outcome = if buffer.len() >= 8 {
        answer_bytes(buffer, &bytes)
    } else if buffer.len() >= 4 {
        answer_bytes(buffer, bytes.get(..4).unwrap_or_default())
    } else {
        OidOutcome::too_short(8)
    };
    outcome.bytes_needed = 8;
    outcome
}

/// A set buffer of exactly four bytes as a `ULONG`.
fn read_u32_exact(buffer: &[u8]) -> Option<u32> {
    let bytes: [u8; 4] = buffer.try_into().ok()?;
    Some(u32::from_le_bytes(bytes))
}
