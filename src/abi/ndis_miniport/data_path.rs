//! The data path: the prefixes of `NET_BUFFER_LIST` and `NET_BUFFER` the
//! driver reads or writes, and the send flags.

use core::ffi::c_void;

use crate::abi::types::{Mdl, NdisHandle, NdisStatus};

/// The prefix of `NET_BUFFER_LIST` [H ndis.h; layout PDB] through `Status`
/// (0x90 bytes, align 16 because of the `SLIST_HEADER` and the
/// `MEMORY_ALLOCATION_ALIGNMENT`-aligned reserved arrays). The
/// `NetBufferListInfo` array that follows at 0x90 has a length that changes
/// with the NDIS version, so it is not declared. NDIS owns every NBL.
#[repr(C, align(16))]
#[derive(Debug)]
pub struct NetBufferList {
    /// `Next`: the next NBL of the chain (first member of the header union).
    pub next: *mut NetBufferList,
    /// `FirstNetBuffer`.
    pub first_net_buffer: *mut NetBuffer,
    /// `Context`.
    pub context: *mut c_void,
    /// `ParentNetBufferList`.
    pub parent_net_buffer_list: *mut NetBufferList,
    /// `NdisPoolHandle`.
    pub ndis_pool_handle: NdisHandle,
    /// Padding in C (the next member is 16-aligned).
    pub padding_28: u64,
    /// `NdisReserved`.
    pub ndis_reserved: [*mut c_void; 2],
    /// `ProtocolReserved`.
    pub protocol_reserved: [*mut c_void; 4],
    /// `MiniportReserved`: the miniport's own while it owns the NBL.
    pub miniport_reserved: [*mut c_void; 2],
    /// `Scratch`.
    pub scratch: *mut c_void,
    /// `SourceHandle`.
    pub source_handle: NdisHandle,
    /// `NblFlags`.
    pub nbl_flags: u32,
    /// `ChildRefCount`.
    pub child_ref_count: i32,
    /// `Flags`.
    pub flags: u32,
    /// `Status`: set by the miniport before completing a send.
    pub status: NdisStatus,
}

/// The prefix of `NET_BUFFER` [H ndis.h; layout PDB] through `DataOffset`
/// (0x30 bytes). NDIS owns every NB.
#[repr(C)]
#[derive(Debug)]
pub struct NetBuffer {
    /// `Next`: the next NB of the same NBL.
    pub next: *mut NetBuffer,
    /// `CurrentMdl`: the MDL holding the first byte of data.
    pub current_mdl: *mut Mdl,
    /// `CurrentMdlOffset`: where the data starts within `current_mdl`.
    pub current_mdl_offset: u32,
    /// Padding in C.
    pub padding_14: u32,
    /// `DataLength` (a `ULONG` in a union with the `SIZE_T` `stDataLength`;
    /// only the low 32 bits are meaningful to a miniport).
    pub data_length: u64,
    /// `MdlChain`.
    pub mdl_chain: *mut Mdl,
    /// `DataOffset`.
    pub data_offset: u32,
    /// Padding in C.
    pub padding_2c: u32,
}

/// `NDIS_SEND_FLAGS_DISPATCH_LEVEL` (0x1): the send handler runs at
/// DISPATCH_LEVEL.
pub const NDIS_SEND_FLAGS_DISPATCH_LEVEL: u32 = 0x0000_0001;
/// `NDIS_SEND_COMPLETE_FLAGS_DISPATCH_LEVEL` (0x1): the caller of
/// `NdisMSendNetBufferListsComplete` runs at DISPATCH_LEVEL.
pub const NDIS_SEND_COMPLETE_FLAGS_DISPATCH_LEVEL: u32 = 0x0000_0001;

// --- Receive: the NBL pool, indications, returns ---------------------------

/// `NET_BUFFER_LIST_POOL_PARAMETERS` [H ndis.h; layout computed], 0x14
/// bytes: what `NdisAllocateNetBufferListPool` is given.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NetBufferListPoolParameters {
    /// `Header`: {[`NDIS_OBJECT_TYPE_DEFAULT`](crate::abi::NDIS_OBJECT_TYPE_DEFAULT),
    /// [`NET_BUFFER_LIST_POOL_PARAMETERS_REVISION_1`],
    /// [`NDIS_SIZEOF_NET_BUFFER_LIST_POOL_PARAMETERS_REVISION_1`]}.
    pub header: crate::abi::NdisObjectHeader,
    /// `ProtocolId`: [`NDIS_PROTOCOL_ID_DEFAULT`] for a miniport.
    pub protocol_id: u8,
    /// `fAllocateNetBuffer`: TRUE, one `NET_BUFFER` with each NBL.
    pub allocate_net_buffer: u8,
    /// Padding in C.
    pub padding_06: u16,
    /// `ContextSize`: 0.
    pub context_size: u16,
    /// Padding in C.
    pub padding_0a: u16,
    /// `PoolTag`.
    pub pool_tag: u32,
    /// `DataSize`: 0 (the miniport brings its own MDLs).
    pub data_size: u32,
}

/// `NET_BUFFER_LIST_POOL_PARAMETERS_REVISION_1`.
pub const NET_BUFFER_LIST_POOL_PARAMETERS_REVISION_1: u8 = 1;
/// `NDIS_SIZEOF_NET_BUFFER_LIST_POOL_PARAMETERS_REVISION_1`: through
/// `DataSize`.
pub const NDIS_SIZEOF_NET_BUFFER_LIST_POOL_PARAMETERS_REVISION_1: u16 = 0x14;
/// `NDIS_PROTOCOL_ID_DEFAULT` (0).
pub const NDIS_PROTOCOL_ID_DEFAULT: u8 = 0;

/// `NDIS_LINK_STATE` [H ntddndis.h; layout computed], 0x28 bytes: the
/// buffer of an `NDIS_STATUS_LINK_STATE` indication.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdisLinkState {
    /// `Header`: {[`NDIS_OBJECT_TYPE_DEFAULT`](crate::abi::NDIS_OBJECT_TYPE_DEFAULT),
    /// [`NDIS_LINK_STATE_REVISION_1`], [`NDIS_SIZEOF_LINK_STATE_REVISION_1`]}.
    pub header: crate::abi::NdisObjectHeader,
    /// `MediaConnectState`.
    pub media_connect_state: super::NdisMediaConnectState,
    /// `MediaDuplexState`.
    pub media_duplex_state: super::NdisMediaDuplexState,
    /// Padding in C.
    pub padding_0c: u32,
    /// `XmitLinkSpeed`, bits per second.
    pub xmit_link_speed: u64,
    /// `RcvLinkSpeed`, bits per second.
    pub rcv_link_speed: u64,
    /// `PauseFunctions`.
    pub pause_functions: super::NdisSupportedPauseFunctions,
    /// `AutoNegotiationFlags`.
    pub auto_negotiation_flags: u32,
}

/// `NDIS_LINK_STATE_REVISION_1`.
pub const NDIS_LINK_STATE_REVISION_1: u8 = 1;
/// `NDIS_SIZEOF_LINK_STATE_REVISION_1`: through `AutoNegotiationFlags`.
pub const NDIS_SIZEOF_LINK_STATE_REVISION_1: u16 = 0x28;

/// `NDIS_STATUS_INDICATION` [H ndis.h; layout computed], 0x70 bytes: what
/// `NdisMIndicateStatusEx` is given.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdisStatusIndication {
    /// `Header`: {[`NDIS_OBJECT_TYPE_STATUS_INDICATION`],
    /// [`NDIS_STATUS_INDICATION_REVISION_1`],
    /// [`NDIS_SIZEOF_STATUS_INDICATION_REVISION_1`]}.
    pub header: crate::abi::NdisObjectHeader,
    /// Padding in C.
    pub padding_04: u32,
    /// `SourceHandle`: the miniport adapter handle.
    pub source_handle: NdisHandle,
    /// `PortNumber`: 0, the default port.
    pub port_number: u32,
    /// `StatusCode`: e.g. [`NDIS_STATUS_LINK_STATE`].
    pub status_code: NdisStatus,
    /// `Flags`.
    pub flags: u32,
    /// Padding in C.
    pub padding_1c: u32,
    /// `DestinationHandle`: null (not an answer to an OID).
    pub destination_handle: NdisHandle,
    /// `RequestId`: null.
    pub request_id: *mut c_void,
    /// `StatusBuffer`.
    pub status_buffer: *mut c_void,
    /// `StatusBufferSize`.
    pub status_buffer_size: u32,
    /// `Guid`: zero.
    pub guid: crate::abi::Guid,
    /// Padding in C (`NdisReserved` is pointer-aligned).
    pub padding_4c: u32,
    /// `NdisReserved`.
    pub ndis_reserved: [*mut c_void; 4],
}

assert_layouts! {
    layout_net_buffer_list: NetBufferList, size 0x90, align 16 {
        next: 0x00, first_net_buffer: 0x08, context: 0x10, parent_net_buffer_list: 0x18,
        ndis_pool_handle: 0x20, ndis_reserved: 0x30, protocol_reserved: 0x40,
        miniport_reserved: 0x60, scratch: 0x70, source_handle: 0x78, nbl_flags: 0x80,
        child_ref_count: 0x84, flags: 0x88, status: 0x8C,
    }
    layout_net_buffer: NetBuffer, size 0x30, align 8 {
        next: 0x00, current_mdl: 0x08, current_mdl_offset: 0x10, data_length: 0x18, mdl_chain: 0x20,
        data_offset: 0x28,
    }
    layout_net_buffer_list_pool_parameters: NetBufferListPoolParameters, size 0x14, align 4 {
        header: 0x00, protocol_id: 0x04, allocate_net_buffer: 0x05, context_size: 0x08,
        pool_tag: 0x0C, data_size: 0x10,
    }
    layout_ndis_link_state: NdisLinkState, size 0x28, align 8 {
        header: 0x00, media_connect_state: 0x04, media_duplex_state: 0x08, xmit_link_speed: 0x10,
        rcv_link_speed: 0x18, pause_functions: 0x20, auto_negotiation_flags: 0x24,
    }
    layout_ndis_status_indication: NdisStatusIndication, size 0x70, align 8 {
        header: 0x00, source_handle: 0x08, port_number: 0x10, status_code: 0x14, flags: 0x18,
        destination_handle: 0x20, request_id: 0x28, status_buffer: 0x30, status_buffer_size: 0x38,
        guid: 0x3C, ndis_reserved: 0x50,
    }
}

/// `NDIS_OBJECT_TYPE_STATUS_INDICATION` (0x98).
pub const NDIS_OBJECT_TYPE_STATUS_INDICATION: u8 = 0x98;
/// `NDIS_STATUS_INDICATION_REVISION_1`.
pub const NDIS_STATUS_INDICATION_REVISION_1: u8 = 1;
/// `NDIS_SIZEOF_STATUS_INDICATION_REVISION_1`: through `NdisReserved`.
pub const NDIS_SIZEOF_STATUS_INDICATION_REVISION_1: u16 = 0x70;
/// `NDIS_STATUS_LINK_STATE` (0x40010017): the buffer is an
/// [`NdisLinkState`].
pub const NDIS_STATUS_LINK_STATE: NdisStatus = 0x4001_0017;

/// `NDIS_RECEIVE_FLAGS_DISPATCH_LEVEL` (0x1): the indicating caller runs at
/// DISPATCH_LEVEL.
pub const NDIS_RECEIVE_FLAGS_DISPATCH_LEVEL: u32 = 0x0000_0001;
/// `NDIS_RECEIVE_FLAGS_RESOURCES` (0x2): the NBLs are the miniport's again
/// when the indication returns (NDIS copies what it keeps).
pub const NDIS_RECEIVE_FLAGS_RESOURCES: u32 = 0x0000_0002;
/// `NDIS_RETURN_FLAGS_DISPATCH_LEVEL` (0x1): `MiniportReturnNetBufferLists`
/// runs at DISPATCH_LEVEL.
pub const NDIS_RETURN_FLAGS_DISPATCH_LEVEL: u32 = 0x0000_0001;
/// `NDIS_DEFAULT_PORT_NUMBER` (0).
pub const NDIS_DEFAULT_PORT_NUMBER: u32 = 0;

assert_ndis_sizeof! {
    NDIS_SIZEOF_NET_BUFFER_LIST_POOL_PARAMETERS_REVISION_1 =>
        NetBufferListPoolParameters { data_size: u32 },
    NDIS_SIZEOF_LINK_STATE_REVISION_1 => NdisLinkState { auto_negotiation_flags: u32 },
    NDIS_SIZEOF_STATUS_INDICATION_REVISION_1 =>
        NdisStatusIndication { ndis_reserved: [*mut c_void; 4] },
}
