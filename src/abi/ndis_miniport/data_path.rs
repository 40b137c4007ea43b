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

assert_layout!(layout_net_buffer_list: NetBufferList, size = 0x90, align = 16, {
    next: 0x00,
    first_net_buffer: 0x08,
    context: 0x10,
    parent_net_buffer_list: 0x18,
    ndis_pool_handle: 0x20,
    ndis_reserved: 0x30,
    protocol_reserved: 0x40,
    miniport_reserved: 0x60,
    scratch: 0x70,
    source_handle: 0x78,
    nbl_flags: 0x80,
    child_ref_count: 0x84,
    flags: 0x88,
    status: 0x8C,
});

assert_layout!(layout_net_buffer: NetBuffer, size = 0x30, align = 8, {
    next: 0x00,
    current_mdl: 0x08,
    current_mdl_offset: 0x10,
    data_length: 0x18,
    mdl_chain: 0x20,
    data_offset: 0x28,
});

/// `NDIS_SEND_FLAGS_DISPATCH_LEVEL` (0x1): the send handler runs at
/// DISPATCH_LEVEL.
pub const NDIS_SEND_FLAGS_DISPATCH_LEVEL: u32 = 0x0000_0001;
/// `NDIS_SEND_COMPLETE_FLAGS_DISPATCH_LEVEL` (0x1): the caller of
/// `NdisMSendNetBufferListsComplete` runs at DISPATCH_LEVEL.
pub const NDIS_SEND_COMPLETE_FLAGS_DISPATCH_LEVEL: u32 = 0x0000_0001;
