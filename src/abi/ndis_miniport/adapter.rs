//! Adapter attributes (`NdisMSetMiniportAttributes`): registration and general
//! attributes, PM capabilities, and the attribute, MAC-option, packet-filter,
//! link-state and supported-statistics flags.

use core::ffi::c_void;

use super::enums::{
    NdisDevicePowerState, NdisInterfaceType, NdisMediaConnectState, NdisMediaDuplexState,
    NdisMedium, NdisPhysicalMedium, NdisSupportedPauseFunctions, NetIfAccessType,
    NetIfConnectionType, NetIfDirectionType, NetIfType,
};
use crate::abi::NdisObjectHeader;
use crate::abi::types::{Boolean, NdisHandle, NdisOid};

/// `NDIS_MINIPORT_ADAPTER_REGISTRATION_ATTRIBUTES` [H ndis.h; layout PDB],
/// 0x20 bytes. Revision 2 (NDIS 6.30+) has the same members and size.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdisMiniportAdapterRegistrationAttributes {
    /// `Header`: {[`NDIS_OBJECT_TYPE_MINIPORT_ADAPTER_REGISTRATION_ATTRIBUTES`],
    /// [`NDIS_MINIPORT_ADAPTER_REGISTRATION_ATTRIBUTES_REVISION_2`],
    /// [`NDIS_SIZEOF_MINIPORT_ADAPTER_REGISTRATION_ATTRIBUTES_REVISION_2`]}.
    pub header: NdisObjectHeader,
    /// Padding in C.
    pub padding_04: u32,
    /// `MiniportAdapterContext`: what NDIS passes back to every handler.
    pub miniport_adapter_context: NdisHandle,
    /// `AttributeFlags`: `NDIS_MINIPORT_ATTRIBUTES_*`.
    pub attribute_flags: u32,
    /// `CheckForHangTimeInSeconds`: 0 = NDIS default.
    pub check_for_hang_time_in_seconds: u32,
    /// `InterfaceType`.
    pub interface_type: NdisInterfaceType,
    /// Tail padding in C.
    pub padding_1c: u32,
}

/// `NDIS_PM_CAPABILITIES` [H ntddndis.h; layout computed], revision 2 (NDIS
/// 6.30+), 0x3C bytes: the power-management capabilities in the general
/// attributes. SoftNDK reports none (every wake-up state unspecified).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NdisPmCapabilities {
    /// `Header`: {[`NDIS_OBJECT_TYPE_DEFAULT`](crate::abi::NDIS_OBJECT_TYPE_DEFAULT),
    /// [`NDIS_PM_CAPABILITIES_REVISION_2`],
    /// [`NDIS_SIZEOF_NDIS_PM_CAPABILITIES_REVISION_2`]}.
    pub header: NdisObjectHeader,
    /// `Flags`: `NDIS_PM_*_SUPPORTED`.
    pub flags: u32,
    /// `SupportedWoLPacketPatterns`.
    pub supported_wol_packet_patterns: u32,
    /// `NumTotalWoLPatterns`.
    pub num_total_wol_patterns: u32,
    /// `MaxWoLPatternSize`.
    pub max_wol_pattern_size: u32,
    /// `MaxWoLPatternOffset`.
    pub max_wol_pattern_offset: u32,
    /// `MaxWoLPacketSaveBuffer`.
    pub max_wol_packet_save_buffer: u32,
    /// `SupportedProtocolOffloads`.
    pub supported_protocol_offloads: u32,
    /// `NumArpOffloadIPv4Addresses`.
    pub num_arp_offload_ipv4_addresses: u32,
    /// `NumNSOffloadIPv6Addresses`.
    pub num_ns_offload_ipv6_addresses: u32,
    /// `MinMagicPacketWakeUp`.
    pub min_magic_packet_wake_up: NdisDevicePowerState,
    /// `MinPatternWakeUp`.
    pub min_pattern_wake_up: NdisDevicePowerState,
    /// `MinLinkChangeWakeUp`.
    pub min_link_change_wake_up: NdisDevicePowerState,
    /// `SupportedWakeUpEvents` (revision 2).
    pub supported_wake_up_events: u32,
    /// `MediaSpecificWakeUpEvents` (revision 2).
    pub media_specific_wake_up_events: u32,
}

/// Bytes of the MAC address arrays in the general attributes:
/// `NDIS_MAX_PHYS_ADDRESS_LENGTH` = `IF_MAX_PHYS_ADDRESS_LENGTH` = 32 [H
/// ifdef.h].
pub const NDIS_MAX_PHYS_ADDRESS_LENGTH: usize = 32;

/// `NDIS_MINIPORT_ADAPTER_GENERAL_ATTRIBUTES` [H ndis.h; layout PDB], revision
/// 2 (NDIS 6.20+), 0xE0 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdisMiniportAdapterGeneralAttributes {
    /// `Header`: {[`NDIS_OBJECT_TYPE_MINIPORT_ADAPTER_GENERAL_ATTRIBUTES`],
    /// [`NDIS_MINIPORT_ADAPTER_GENERAL_ATTRIBUTES_REVISION_2`],
    /// [`NDIS_SIZEOF_MINIPORT_ADAPTER_GENERAL_ATTRIBUTES_REVISION_2`]}.
    pub header: NdisObjectHeader,
    /// `Flags`.
    pub flags: u32,
    /// `MediaType`.
    pub media_type: NdisMedium,
    /// `PhysicalMediumType`.
    pub physical_medium_type: NdisPhysicalMedium,
    /// `MtuSize`: the largest frame payload, header excluded.
    pub mtu_size: u32,
    /// Padding in C.
    pub padding_14: u32,
    /// `MaxXmitLinkSpeed`, bits per second.
    pub max_xmit_link_speed: u64,
    /// `XmitLinkSpeed`.
    pub xmit_link_speed: u64,
    /// `MaxRcvLinkSpeed`.
    pub max_rcv_link_speed: u64,
    /// `RcvLinkSpeed`.
    pub rcv_link_speed: u64,
    /// `MediaConnectState`.
    pub media_connect_state: NdisMediaConnectState,
    /// `MediaDuplexState`.
    pub media_duplex_state: NdisMediaDuplexState,
    /// `LookaheadSize`.
    pub lookahead_size: u32,
    /// Padding in C.
    pub padding_44: u32,
    /// `PowerManagementCapabilities`: the NDIS 6.0 form; NULL for NDIS 6.20+.
    pub power_management_capabilities: *mut c_void,
    /// `MacOptions`: `NDIS_MAC_OPTION_*`.
    pub mac_options: u32,
    /// `SupportedPacketFilters`: `NDIS_PACKET_TYPE_*`.
    pub supported_packet_filters: u32,
    /// `MaxMulticastListSize`.
    pub max_multicast_list_size: u32,
    /// `MacAddressLength`.
    pub mac_address_length: u16,
    /// `PermanentMacAddress`.
    pub permanent_mac_address: [u8; NDIS_MAX_PHYS_ADDRESS_LENGTH],
    /// `CurrentMacAddress`.
    pub current_mac_address: [u8; NDIS_MAX_PHYS_ADDRESS_LENGTH],
    /// Padding in C.
    pub padding_9e: u16,
    /// `RecvScaleCapabilities`: NULL, no RSS.
    pub recv_scale_capabilities: *mut c_void,
    /// `AccessType`.
    pub access_type: NetIfAccessType,
    /// `DirectionType`.
    pub direction_type: NetIfDirectionType,
    /// `ConnectionType`.
    pub connection_type: NetIfConnectionType,
    /// `IfType`: an IANA `ifType`, 6 for Ethernet.
    pub if_type: NetIfType,
    /// `IfConnectorPresent`: FALSE for a virtual adapter.
    pub if_connector_present: Boolean,
    /// Padding in C.
    pub padding_b7: u8,
    /// `SupportedStatistics`: `NDIS_STATISTICS_*_SUPPORTED`.
    pub supported_statistics: u32,
    /// `SupportedPauseFunctions`.
    pub supported_pause_functions: NdisSupportedPauseFunctions,
    /// `DataBackFillSize`.
    pub data_back_fill_size: u32,
    /// `ContextBackFillSize`.
    pub context_back_fill_size: u32,
    /// `SupportedOidList`: `NDIS_OID` array.
    pub supported_oid_list: *const NdisOid,
    /// `SupportedOidListLength`: in **bytes**.
    pub supported_oid_list_length: u32,
    /// `AutoNegotiationFlags`: `NDIS_LINK_STATE_*_AUTO_NEGOTIATED`.
    pub auto_negotiation_flags: u32,
    /// `PowerManagementCapabilitiesEx` (revision 2).
    pub power_management_capabilities_ex: *const NdisPmCapabilities,
}

assert_layouts! {
    layout_ndis_miniport_adapter_registration_attributes:
        NdisMiniportAdapterRegistrationAttributes, size 0x20, align 8 {
        header: 0x00, miniport_adapter_context: 0x08, attribute_flags: 0x10,
        check_for_hang_time_in_seconds: 0x14, interface_type: 0x18,
    }
    layout_ndis_pm_capabilities: NdisPmCapabilities, size 0x3C, align 4 {
        header: 0x00, flags: 0x04, supported_wol_packet_patterns: 0x08,
        num_total_wol_patterns: 0x0C, max_wol_pattern_size: 0x10, max_wol_pattern_offset: 0x14,
        max_wol_packet_save_buffer: 0x18, supported_protocol_offloads: 0x1C,
        num_arp_offload_ipv4_addresses: 0x20, num_ns_offload_ipv6_addresses: 0x24,
        min_magic_packet_wake_up: 0x28, min_pattern_wake_up: 0x2C, min_link_change_wake_up: 0x30,
        supported_wake_up_events: 0x34, media_specific_wake_up_events: 0x38,
    }
    layout_ndis_miniport_adapter_general_attributes:
        NdisMiniportAdapterGeneralAttributes, size 0xE0, align 8 {
        header: 0x00, flags: 0x04, media_type: 0x08, physical_medium_type: 0x0C, mtu_size: 0x10,
        max_xmit_link_speed: 0x18, xmit_link_speed: 0x20, max_rcv_link_speed: 0x28,
        rcv_link_speed: 0x30, media_connect_state: 0x38, media_duplex_state: 0x3C,
        lookahead_size: 0x40, power_management_capabilities: 0x48, mac_options: 0x50,
        supported_packet_filters: 0x54, max_multicast_list_size: 0x58, mac_address_length: 0x5C,
        permanent_mac_address: 0x5E, current_mac_address: 0x7E, recv_scale_capabilities: 0xA0,
        access_type: 0xA8, direction_type: 0xAC, connection_type: 0xB0, if_type: 0xB4,
        if_connector_present: 0xB6, supported_statistics: 0xB8, supported_pause_functions: 0xBC,
        data_back_fill_size: 0xC0, context_back_fill_size: 0xC4, supported_oid_list: 0xC8,
        supported_oid_list_length: 0xD0, auto_negotiation_flags: 0xD4,
        power_management_capabilities_ex: 0xD8,
    }
}

/// `NDIS_OBJECT_TYPE_MINIPORT_ADAPTER_REGISTRATION_ATTRIBUTES` (0x9E).
pub const NDIS_OBJECT_TYPE_MINIPORT_ADAPTER_REGISTRATION_ATTRIBUTES: u8 = 0x9E;
/// `NDIS_OBJECT_TYPE_MINIPORT_ADAPTER_GENERAL_ATTRIBUTES` (0x9F).
pub const NDIS_OBJECT_TYPE_MINIPORT_ADAPTER_GENERAL_ATTRIBUTES: u8 = 0x9F;

/// `NDIS_MINIPORT_ADAPTER_REGISTRATION_ATTRIBUTES_REVISION_2` (NDIS 6.30+).
pub const NDIS_MINIPORT_ADAPTER_REGISTRATION_ATTRIBUTES_REVISION_2: u8 = 2;
/// `NDIS_SIZEOF_MINIPORT_ADAPTER_REGISTRATION_ATTRIBUTES_REVISION_2`: through
/// `InterfaceType` (0x1C, the same as revision 1).
pub const NDIS_SIZEOF_MINIPORT_ADAPTER_REGISTRATION_ATTRIBUTES_REVISION_2: u16 = 0x1C;
/// `NDIS_MINIPORT_ADAPTER_GENERAL_ATTRIBUTES_REVISION_2` (NDIS 6.20+).
pub const NDIS_MINIPORT_ADAPTER_GENERAL_ATTRIBUTES_REVISION_2: u8 = 2;
/// `NDIS_SIZEOF_MINIPORT_ADAPTER_GENERAL_ATTRIBUTES_REVISION_2`: through
/// `PowerManagementCapabilitiesEx`.
pub const NDIS_SIZEOF_MINIPORT_ADAPTER_GENERAL_ATTRIBUTES_REVISION_2: u16 = 0xE0;
/// `NDIS_PM_CAPABILITIES_REVISION_2` (NDIS 6.30+).
pub const NDIS_PM_CAPABILITIES_REVISION_2: u8 = 2;
/// `NDIS_SIZEOF_NDIS_PM_CAPABILITIES_REVISION_2`: through
/// `MediaSpecificWakeUpEvents`.
pub const NDIS_SIZEOF_NDIS_PM_CAPABILITIES_REVISION_2: u16 = 0x3C;

/// `NDIS_MINIPORT_ATTRIBUTES_NDIS_WDM` (0x2): the adapter has no hardware
/// resources for NDIS to manage.
pub const NDIS_MINIPORT_ATTRIBUTES_NDIS_WDM: u32 = 0x0000_0002;
/// `NDIS_MINIPORT_ATTRIBUTES_SURPRISE_REMOVE_OK` (0x4).
pub const NDIS_MINIPORT_ATTRIBUTES_SURPRISE_REMOVE_OK: u32 = 0x0000_0004;
/// `NDIS_MINIPORT_ATTRIBUTES_NO_PAUSE_ON_SUSPEND` (0x100, NDIS 6.30+).
pub const NDIS_MINIPORT_ATTRIBUTES_NO_PAUSE_ON_SUSPEND: u32 = 0x0000_0100;

/// `NDIS_MAC_OPTION_COPY_LOOKAHEAD_DATA` (0x1).
pub const NDIS_MAC_OPTION_COPY_LOOKAHEAD_DATA: u32 = 0x0000_0001;
/// `NDIS_MAC_OPTION_TRANSFERS_NOT_PEND` (0x4).
pub const NDIS_MAC_OPTION_TRANSFERS_NOT_PEND: u32 = 0x0000_0004;
/// `NDIS_MAC_OPTION_NO_LOOPBACK` (0x8): NDIS loops back frames itself.
pub const NDIS_MAC_OPTION_NO_LOOPBACK: u32 = 0x0000_0008;

/// `NDIS_PACKET_TYPE_DIRECTED` (0x1).
pub const NDIS_PACKET_TYPE_DIRECTED: u32 = 0x0000_0001;
/// `NDIS_PACKET_TYPE_MULTICAST` (0x2).
pub const NDIS_PACKET_TYPE_MULTICAST: u32 = 0x0000_0002;
/// `NDIS_PACKET_TYPE_ALL_MULTICAST` (0x4).
pub const NDIS_PACKET_TYPE_ALL_MULTICAST: u32 = 0x0000_0004;
/// `NDIS_PACKET_TYPE_BROADCAST` (0x8).
pub const NDIS_PACKET_TYPE_BROADCAST: u32 = 0x0000_0008;
/// `NDIS_PACKET_TYPE_PROMISCUOUS` (0x20).
pub const NDIS_PACKET_TYPE_PROMISCUOUS: u32 = 0x0000_0020;

/// `NDIS_LINK_STATE_DUPLEX_AUTO_NEGOTIATED` (0x4).
pub const NDIS_LINK_STATE_DUPLEX_AUTO_NEGOTIATED: u32 = 0x0000_0004;

/// `NDIS_STATISTICS_XMIT_OK_SUPPORTED` (0x1), general attributes.
pub const NDIS_STATISTICS_XMIT_OK_SUPPORTED: u32 = 0x0000_0001;
/// `NDIS_STATISTICS_RCV_OK_SUPPORTED` (0x2).
pub const NDIS_STATISTICS_RCV_OK_SUPPORTED: u32 = 0x0000_0002;
/// `NDIS_STATISTICS_XMIT_ERROR_SUPPORTED` (0x4).
pub const NDIS_STATISTICS_XMIT_ERROR_SUPPORTED: u32 = 0x0000_0004;
/// `NDIS_STATISTICS_RCV_ERROR_SUPPORTED` (0x8).
pub const NDIS_STATISTICS_RCV_ERROR_SUPPORTED: u32 = 0x0000_0008;
/// `NDIS_STATISTICS_RCV_NO_BUFFER_SUPPORTED` (0x10).
pub const NDIS_STATISTICS_RCV_NO_BUFFER_SUPPORTED: u32 = 0x0000_0010;
/// `NDIS_STATISTICS_DIRECTED_BYTES_XMIT_SUPPORTED` (0x20).
pub const NDIS_STATISTICS_DIRECTED_BYTES_XMIT_SUPPORTED: u32 = 0x0000_0020;
/// `NDIS_STATISTICS_DIRECTED_FRAMES_XMIT_SUPPORTED` (0x40).
pub const NDIS_STATISTICS_DIRECTED_FRAMES_XMIT_SUPPORTED: u32 = 0x0000_0040;
/// `NDIS_STATISTICS_MULTICAST_BYTES_XMIT_SUPPORTED` (0x80).
pub const NDIS_STATISTICS_MULTICAST_BYTES_XMIT_SUPPORTED: u32 = 0x0000_0080;
/// `NDIS_STATISTICS_MULTICAST_FRAMES_XMIT_SUPPORTED` (0x100).
pub const NDIS_STATISTICS_MULTICAST_FRAMES_XMIT_SUPPORTED: u32 = 0x0000_0100;
/// `NDIS_STATISTICS_BROADCAST_BYTES_XMIT_SUPPORTED` (0x200).
pub const NDIS_STATISTICS_BROADCAST_BYTES_XMIT_SUPPORTED: u32 = 0x0000_0200;
/// `NDIS_STATISTICS_BROADCAST_FRAMES_XMIT_SUPPORTED` (0x400).
pub const NDIS_STATISTICS_BROADCAST_FRAMES_XMIT_SUPPORTED: u32 = 0x0000_0400;
/// `NDIS_STATISTICS_BYTES_XMIT_SUPPORTED` (0x100000).
pub const NDIS_STATISTICS_BYTES_XMIT_SUPPORTED: u32 = 0x0010_0000;
/// `NDIS_STATISTICS_GEN_STATISTICS_SUPPORTED` (0x400000).
pub const NDIS_STATISTICS_GEN_STATISTICS_SUPPORTED: u32 = 0x0040_0000;

/// `NCF_VIRTUAL` (0x1): the INF `Characteristics` bit of a virtual adapter.
pub const NCF_VIRTUAL: u32 = 0x0000_0001;

/// `IF_TYPE_ETHERNET_CSMACD` (6) [H ipifcons.h]: the INF's `*IfType`.
pub const IF_TYPE_ETHERNET_CSMACD: NetIfType = 6;

assert_ndis_sizeof! {
    NDIS_SIZEOF_MINIPORT_ADAPTER_REGISTRATION_ATTRIBUTES_REVISION_2 =>
        NdisMiniportAdapterRegistrationAttributes { interface_type: NdisInterfaceType },
    NDIS_SIZEOF_MINIPORT_ADAPTER_GENERAL_ATTRIBUTES_REVISION_2 =>
        NdisMiniportAdapterGeneralAttributes {
            power_management_capabilities_ex: *const NdisPmCapabilities
        },
    NDIS_SIZEOF_NDIS_PM_CAPABILITIES_REVISION_2 =>
        NdisPmCapabilities { media_specific_wake_up_events: u32 },
}
