//! OID requests: `NDIS_OID_REQUEST` with its query / set / method data, and the
//! general OID codes [H ntddndis.h].

use core::ffi::c_void;

use super::enums::{NdisPortNumber, NdisRequestType};
use crate::abi::NdisObjectHeader;
use crate::abi::types::{NdisHandle, NdisOid};

/// The `QUERY_INFORMATION` member of `NDIS_OID_REQUEST.DATA` [H ndis.h;
/// layout PDB], 0x20 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdisOidQuery {
    /// `Oid`.
    pub oid: NdisOid,
    /// Padding in C.
    pub padding_04: u32,
    /// `InformationBuffer`.
    pub information_buffer: *mut c_void,
    /// `InformationBufferLength`.
    pub information_buffer_length: u32,
    /// `BytesWritten`.
    pub bytes_written: u32,
    /// `BytesNeeded`.
    pub bytes_needed: u32,
    /// Tail padding in C.
    pub padding_1c: u32,
}

/// The `SET_INFORMATION` member of `NDIS_OID_REQUEST.DATA` [H ndis.h; layout
/// PDB], 0x20 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdisOidSet {
    /// `Oid`.
    pub oid: NdisOid,
    /// Padding in C.
    pub padding_04: u32,
    /// `InformationBuffer`.
    pub information_buffer: *mut c_void,
    /// `InformationBufferLength`.
    pub information_buffer_length: u32,
    /// `BytesRead`.
    pub bytes_read: u32,
    /// `BytesNeeded`.
    pub bytes_needed: u32,
    /// Tail padding in C.
    pub padding_1c: u32,
}

/// The `METHOD_INFORMATION` member of `NDIS_OID_REQUEST.DATA` [H ndis.h;
/// layout PDB], 0x28 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdisOidMethod {
    /// `Oid`.
    pub oid: NdisOid,
    /// Padding in C.
    pub padding_04: u32,
    /// `InformationBuffer`.
    pub information_buffer: *mut c_void,
    /// `InputBufferLength`.
    pub input_buffer_length: u32,
    /// `OutputBufferLength`.
    pub output_buffer_length: u32,
    /// `MethodId`.
    pub method_id: u32,
    /// `BytesWritten`.
    pub bytes_written: u32,
    /// `BytesRead`.
    pub bytes_read: u32,
    /// `BytesNeeded`.
    pub bytes_needed: u32,
}

/// `NDIS_OID_REQUEST.DATA` (`union _REQUEST_DATA`) [H ndis.h; layout PDB],
/// 0x28 bytes; `RequestType` says which member is meant.
#[repr(C)]
#[derive(Clone, Copy)]
pub union NdisOidRequestData {
    /// `QUERY_INFORMATION` (query and query-statistics requests).
    pub query_information: NdisOidQuery,
    /// `SET_INFORMATION` (set requests).
    pub set_information: NdisOidSet,
    /// `METHOD_INFORMATION` (method requests).
    pub method_information: NdisOidMethod,
}

/// `NDIS_OID_REQUEST` [H ndis.h; layout PDB], declared through `Reserved2`
/// (revision 1, `NDIS_SIZEOF_OID_REQUEST_REVISION_1` = 0xEC; `size_of` 0xF0
/// with the tail padding). NDIS 6.50 appends `SwitchId`, `VPortId` and `Flags`
/// at 0xEC (revision 2, 0xF8); the driver does not read them. NDIS allocates
/// the request; the driver only reaches it through the pointer it is given.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct NdisOidRequest {
    /// `Header`: {[`NDIS_OBJECT_TYPE_OID_REQUEST`], revision, size}.
    pub header: NdisObjectHeader,
    /// `RequestType`.
    pub request_type: NdisRequestType,
    /// `PortNumber`.
    pub port_number: NdisPortNumber,
    /// `Timeout`: seconds.
    pub timeout: u32,
    /// `RequestId`.
    pub request_id: *mut c_void,
    /// `RequestHandle`.
    pub request_handle: NdisHandle,
    /// `DATA`.
    pub data: NdisOidRequestData,
    /// `NdisReserved`: `16 × sizeof(PVOID)` bytes.
    pub ndis_reserved: [u8; 0x80],
    /// `MiniportReserved`: `2 × sizeof(PVOID)` bytes, the miniport's own.
    pub miniport_reserved: [u8; 0x10],
    /// `SourceReserved`.
    pub source_reserved: [u8; 0x10],
    /// `SupportedRevision`.
    pub supported_revision: u8,
    /// `Reserved1`.
    pub reserved1: u8,
    /// `Reserved2`.
    pub reserved2: u16,
}

assert_layouts! {
    layout_ndis_oid_query: NdisOidQuery, size 0x20, align 8 {
        oid: 0x00, information_buffer: 0x08, information_buffer_length: 0x10, bytes_written: 0x14,
        bytes_needed: 0x18,
    }
    layout_ndis_oid_set: NdisOidSet, size 0x20, align 8 {
        oid: 0x00, information_buffer: 0x08, information_buffer_length: 0x10, bytes_read: 0x14,
        bytes_needed: 0x18,
    }
    layout_ndis_oid_method: NdisOidMethod, size 0x28, align 8 {
        oid: 0x00, information_buffer: 0x08, input_buffer_length: 0x10, output_buffer_length: 0x14,
        method_id: 0x18, bytes_written: 0x1C, bytes_read: 0x20, bytes_needed: 0x24,
    }
    layout_ndis_oid_request_data: NdisOidRequestData, size 0x28, align 8 {
        query_information: 0x0, set_information: 0x0, method_information: 0x0,
    }
    layout_ndis_oid_request: NdisOidRequest, size 0xF0, align 8 {
        header: 0x00, request_type: 0x04, port_number: 0x08, timeout: 0x0C, request_id: 0x10,
        request_handle: 0x18, data: 0x20, ndis_reserved: 0x48, miniport_reserved: 0xC8,
        source_reserved: 0xD8, supported_revision: 0xE8, reserved1: 0xE9, reserved2: 0xEA,
    }
}

/// `NDIS_OBJECT_TYPE_OID_REQUEST` (0x96).
pub const NDIS_OBJECT_TYPE_OID_REQUEST: u8 = 0x96;

/// `OID_GEN_SUPPORTED_LIST`.
pub const OID_GEN_SUPPORTED_LIST: NdisOid = 0x0001_0101;
/// `OID_GEN_HARDWARE_STATUS`.
pub const OID_GEN_HARDWARE_STATUS: NdisOid = 0x0001_0102;
/// `OID_GEN_MEDIA_SUPPORTED`.
pub const OID_GEN_MEDIA_SUPPORTED: NdisOid = 0x0001_0103;
/// `OID_GEN_MEDIA_IN_USE`.
pub const OID_GEN_MEDIA_IN_USE: NdisOid = 0x0001_0104;
/// `OID_GEN_MAXIMUM_LOOKAHEAD`.
pub const OID_GEN_MAXIMUM_LOOKAHEAD: NdisOid = 0x0001_0105;
/// `OID_GEN_MAXIMUM_FRAME_SIZE`.
pub const OID_GEN_MAXIMUM_FRAME_SIZE: NdisOid = 0x0001_0106;
/// `OID_GEN_LINK_SPEED`.
pub const OID_GEN_LINK_SPEED: NdisOid = 0x0001_0107;
/// `OID_GEN_TRANSMIT_BUFFER_SPACE`.
pub const OID_GEN_TRANSMIT_BUFFER_SPACE: NdisOid = 0x0001_0108;
/// `OID_GEN_RECEIVE_BUFFER_SPACE`.
pub const OID_GEN_RECEIVE_BUFFER_SPACE: NdisOid = 0x0001_0109;
/// `OID_GEN_TRANSMIT_BLOCK_SIZE`.
pub const OID_GEN_TRANSMIT_BLOCK_SIZE: NdisOid = 0x0001_010A;
/// `OID_GEN_RECEIVE_BLOCK_SIZE`.
pub const OID_GEN_RECEIVE_BLOCK_SIZE: NdisOid = 0x0001_010B;
/// `OID_GEN_VENDOR_ID`.
pub const OID_GEN_VENDOR_ID: NdisOid = 0x0001_010C;
/// `OID_GEN_VENDOR_DESCRIPTION`.
pub const OID_GEN_VENDOR_DESCRIPTION: NdisOid = 0x0001_010D;
/// `OID_GEN_CURRENT_PACKET_FILTER`.
pub const OID_GEN_CURRENT_PACKET_FILTER: NdisOid = 0x0001_010E;
/// `OID_GEN_CURRENT_LOOKAHEAD`.
pub const OID_GEN_CURRENT_LOOKAHEAD: NdisOid = 0x0001_010F;
/// `OID_GEN_DRIVER_VERSION`.
pub const OID_GEN_DRIVER_VERSION: NdisOid = 0x0001_0110;
/// `OID_GEN_MAXIMUM_TOTAL_SIZE`.
pub const OID_GEN_MAXIMUM_TOTAL_SIZE: NdisOid = 0x0001_0111;
/// `OID_GEN_MAC_OPTIONS`.
pub const OID_GEN_MAC_OPTIONS: NdisOid = 0x0001_0113;
/// `OID_GEN_MEDIA_CONNECT_STATUS`.
pub const OID_GEN_MEDIA_CONNECT_STATUS: NdisOid = 0x0001_0114;
/// `OID_GEN_MAXIMUM_SEND_PACKETS`.
pub const OID_GEN_MAXIMUM_SEND_PACKETS: NdisOid = 0x0001_0115;
/// `OID_GEN_VENDOR_DRIVER_VERSION`.
pub const OID_GEN_VENDOR_DRIVER_VERSION: NdisOid = 0x0001_0116;
/// `OID_GEN_PHYSICAL_MEDIUM`.
pub const OID_GEN_PHYSICAL_MEDIUM: NdisOid = 0x0001_0202;
/// `OID_GEN_LINK_PARAMETERS` (set).
pub const OID_GEN_LINK_PARAMETERS: NdisOid = 0x0001_0208;
/// `OID_GEN_INTERRUPT_MODERATION`.
pub const OID_GEN_INTERRUPT_MODERATION: NdisOid = 0x0001_0209;
/// `OID_GEN_XMIT_OK`.
pub const OID_GEN_XMIT_OK: NdisOid = 0x0002_0101;
/// `OID_GEN_RCV_OK`.
pub const OID_GEN_RCV_OK: NdisOid = 0x0002_0102;
/// `OID_GEN_XMIT_ERROR`.
pub const OID_GEN_XMIT_ERROR: NdisOid = 0x0002_0103;
/// `OID_GEN_RCV_ERROR`.
pub const OID_GEN_RCV_ERROR: NdisOid = 0x0002_0104;
/// `OID_GEN_RCV_NO_BUFFER`.
pub const OID_GEN_RCV_NO_BUFFER: NdisOid = 0x0002_0105;
/// `OID_GEN_STATISTICS`.
pub const OID_GEN_STATISTICS: NdisOid = 0x0002_0106;
/// `OID_GEN_TRANSMIT_QUEUE_LENGTH`.
pub const OID_GEN_TRANSMIT_QUEUE_LENGTH: NdisOid = 0x0002_020E;
/// `OID_802_3_PERMANENT_ADDRESS`.
pub const OID_802_3_PERMANENT_ADDRESS: NdisOid = 0x0101_0101;
/// `OID_802_3_CURRENT_ADDRESS`.
pub const OID_802_3_CURRENT_ADDRESS: NdisOid = 0x0101_0102;
/// `OID_802_3_MULTICAST_LIST` (set).
pub const OID_802_3_MULTICAST_LIST: NdisOid = 0x0101_0103;
/// `OID_802_3_MAXIMUM_LIST_SIZE`.
pub const OID_802_3_MAXIMUM_LIST_SIZE: NdisOid = 0x0101_0104;
/// `OID_802_3_RCV_ERROR_ALIGNMENT`.
pub const OID_802_3_RCV_ERROR_ALIGNMENT: NdisOid = 0x0102_0101;
/// `OID_802_3_XMIT_ONE_COLLISION`.
pub const OID_802_3_XMIT_ONE_COLLISION: NdisOid = 0x0102_0102;
/// `OID_802_3_XMIT_MORE_COLLISIONS`.
pub const OID_802_3_XMIT_MORE_COLLISIONS: NdisOid = 0x0102_0103;
/// `OID_PNP_SET_POWER` (set).
pub const OID_PNP_SET_POWER: NdisOid = 0xFD01_0101;
/// `OID_PNP_QUERY_POWER`.
pub const OID_PNP_QUERY_POWER: NdisOid = 0xFD01_0102;

// NDIS_SIZEOF_OID_REQUEST_REVISION_1 is through Reserved2.
#[cfg(target_arch = "x86_64")]
const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(offset_of!(NdisOidRequest, reserved2) + size_of::<u16>() == 0xEC);
};

// The NDK OIDs are in `consts` (ndk-abi.md §5.9); these must not collide.
const _: () = {
    assert!(OID_GEN_SUPPORTED_LIST != crate::abi::OID_NDK_SET_STATE);
};
