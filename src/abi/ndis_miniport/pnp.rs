//! PnP notifications: `NET_PNP_EVENT`, `NET_PNP_EVENT_NOTIFICATION` and
//! `NET_DEVICE_PNP_EVENT`.

use core::ffi::c_void;

use super::enums::{NdisDevicePnpEvent, NdisPortNumber};
use crate::abi::types::{NdisNicSwitchId, NdisNicSwitchVportId};
use crate::abi::{NdisObjectHeader, NetPnpEventCode};

/// `NET_PNP_EVENT` [H ndis.h; layout PDB], 0x98 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NetPnpEvent {
    /// `NetEvent`.
    pub net_event: NetPnpEventCode,
    /// Padding in C.
    pub padding_04: u32,
    /// `Buffer`: event-specific data, NULL for the NDK events.
    pub buffer: *mut c_void,
    /// `BufferLength`.
    pub buffer_length: u32,
    /// Padding in C.
    pub padding_14: u32,
    /// `NdisReserved`: `ULONG_PTR[4]`.
    pub ndis_reserved: [usize; 4],
    /// `TransportReserved`: `ULONG_PTR[4]`.
    pub transport_reserved: [usize; 4],
    /// `TdiReserved`: `ULONG_PTR[4]`.
    pub tdi_reserved: [usize; 4],
    /// `TdiClientReserved`: `ULONG_PTR[4]`.
    pub tdi_client_reserved: [usize; 4],
}

/// `NET_PNP_EVENT_NOTIFICATION` [H ndis.h; layout PDB], 0xB0 bytes with the
/// NDIS 6.50 members: what `NdisMNetPnPEvent` takes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NetPnpEventNotification {
    /// `Header`: {[`NDIS_OBJECT_TYPE_DEFAULT`](crate::abi::NDIS_OBJECT_TYPE_DEFAULT),
    /// [`NET_PNP_EVENT_NOTIFICATION_REVISION_1`],
    /// [`NDIS_SIZEOF_NET_PNP_EVENT_NOTIFICATION_REVISION_1`]}.
    pub header: NdisObjectHeader,
    /// `PortNumber`: 0, the event is not port-specific.
    pub port_number: NdisPortNumber,
    /// `NetPnPEvent`.
    pub net_pnp_event: NetPnpEvent,
    /// `Flags`.
    pub flags: u32,
    /// `SwitchId` (NDIS 6.50, revision 2).
    pub switch_id: NdisNicSwitchId,
    /// `VPortId` (NDIS 6.50, revision 2).
    pub vport_id: NdisNicSwitchVportId,
    /// Tail padding in C.
    pub padding_ac: u32,
}

/// `NET_DEVICE_PNP_EVENT` [H ndis.h; layout computed], 0x30 bytes: what
/// `MiniportDevicePnPEventNotify` receives. The driver reads
/// `device_pnp_event` only.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NetDevicePnpEvent {
    /// `Header`.
    pub header: NdisObjectHeader,
    /// `PortNumber`.
    pub port_number: NdisPortNumber,
    /// `DevicePnPEvent`.
    pub device_pnp_event: NdisDevicePnpEvent,
    /// Padding in C.
    pub padding_0c: u32,
    /// `InformationBuffer`.
    pub information_buffer: *mut c_void,
    /// `InformationBufferLength`.
    pub information_buffer_length: u32,
    /// `NdisReserved`: `2 × sizeof(PVOID)` bytes.
    pub ndis_reserved: [u8; 0x10],
    /// Tail padding in C.
    pub padding_2c: u32,
}

assert_layouts! {
    layout_net_pnp_event: NetPnpEvent, size 0x98, align 8 {
        net_event: 0x00, buffer: 0x08, buffer_length: 0x10, ndis_reserved: 0x18,
        transport_reserved: 0x38, tdi_reserved: 0x58, tdi_client_reserved: 0x78,
    }
    layout_net_pnp_event_notification: NetPnpEventNotification, size 0xB0, align 8 {
        header: 0x00, port_number: 0x04, net_pnp_event: 0x08, flags: 0xA0, switch_id: 0xA4,
        vport_id: 0xA8,
    }
    layout_net_device_pnp_event: NetDevicePnpEvent, size 0x30, align 8 {
        header: 0x00, port_number: 0x04, device_pnp_event: 0x08, information_buffer: 0x10,
        information_buffer_length: 0x18, ndis_reserved: 0x1C,
    }
}

/// `NET_PNP_EVENT_NOTIFICATION_REVISION_1`.
pub const NET_PNP_EVENT_NOTIFICATION_REVISION_1: u8 = 1;
/// `NDIS_SIZEOF_NET_PNP_EVENT_NOTIFICATION_REVISION_1`: through `Flags`.
pub const NDIS_SIZEOF_NET_PNP_EVENT_NOTIFICATION_REVISION_1: u16 = 0xA4;

assert_ndis_sizeof! {
    NDIS_SIZEOF_NET_PNP_EVENT_NOTIFICATION_REVISION_1 => NetPnpEventNotification { flags: u32 },
}
