//! Structured answers to general OIDs: `NDIS_STATISTICS_INFO` with its valid
//! flags, and `NDIS_INTERRUPT_MODERATION_PARAMETERS`.

use super::enums::NdisInterruptModeration;
use crate::abi::NdisObjectHeader;

/// `NDIS_STATISTICS_INFO` [H ntddndis.h; layout computed], 0x98 bytes: the
/// answer to `OID_GEN_STATISTICS`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NdisStatisticsInfo {
    /// `Header`: {[`NDIS_OBJECT_TYPE_DEFAULT`](crate::abi::NDIS_OBJECT_TYPE_DEFAULT),
    /// [`NDIS_STATISTICS_INFO_REVISION_1`], [`NDIS_SIZEOF_STATISTICS_INFO_REVISION_1`]}.
    pub header: NdisObjectHeader,
    /// `SupportedStatistics`: `NDIS_STATISTICS_FLAGS_VALID_*`.
    pub supported_statistics: u32,
    /// `ifInDiscards`.
    pub if_in_discards: u64,
    /// `ifInErrors`.
    pub if_in_errors: u64,
    /// `ifHCInOctets`.
    pub if_hc_in_octets: u64,
    /// `ifHCInUcastPkts`.
    pub if_hc_in_ucast_pkts: u64,
    /// `ifHCInMulticastPkts`.
    pub if_hc_in_multicast_pkts: u64,
    /// `ifHCInBroadcastPkts`.
    pub if_hc_in_broadcast_pkts: u64,
    /// `ifHCOutOctets`.
    pub if_hc_out_octets: u64,
    /// `ifHCOutUcastPkts`.
    pub if_hc_out_ucast_pkts: u64,
    /// `ifHCOutMulticastPkts`.
    pub if_hc_out_multicast_pkts: u64,
    /// `ifHCOutBroadcastPkts`.
    pub if_hc_out_broadcast_pkts: u64,
    /// `ifOutErrors`.
    pub if_out_errors: u64,
    /// `ifOutDiscards`.
    pub if_out_discards: u64,
    /// `ifHCInUcastOctets`.
    pub if_hc_in_ucast_octets: u64,
    /// `ifHCInMulticastOctets`.
    pub if_hc_in_multicast_octets: u64,
    /// `ifHCInBroadcastOctets`.
    pub if_hc_in_broadcast_octets: u64,
    /// `ifHCOutUcastOctets`.
    pub if_hc_out_ucast_octets: u64,
    /// `ifHCOutMulticastOctets`.
    pub if_hc_out_multicast_octets: u64,
    /// `ifHCOutBroadcastOctets`.
    pub if_hc_out_broadcast_octets: u64,
}

/// `NDIS_INTERRUPT_MODERATION_PARAMETERS` [H ntddndis.h; layout computed],
/// 0xC bytes: the answer to `OID_GEN_INTERRUPT_MODERATION`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NdisInterruptModerationParameters {
    /// `Header`: {[`NDIS_OBJECT_TYPE_DEFAULT`](crate::abi::NDIS_OBJECT_TYPE_DEFAULT),
    /// [`NDIS_INTERRUPT_MODERATION_PARAMETERS_REVISION_1`],
    /// [`NDIS_SIZEOF_INTERRUPT_MODERATION_PARAMETERS_REVISION_1`]}.
    pub header: NdisObjectHeader,
    /// `Flags`.
    pub flags: u32,
    /// `InterruptModeration`.
    pub interrupt_moderation: NdisInterruptModeration,
}

assert_layouts! {
    layout_ndis_statistics_info: NdisStatisticsInfo, size 0x98, align 8 {
        header: 0x00, supported_statistics: 0x04, if_in_discards: 0x08, if_in_errors: 0x10,
        if_hc_in_octets: 0x18, if_hc_in_ucast_pkts: 0x20, if_hc_in_multicast_pkts: 0x28,
        if_hc_in_broadcast_pkts: 0x30, if_hc_out_octets: 0x38, if_hc_out_ucast_pkts: 0x40,
        if_hc_out_multicast_pkts: 0x48, if_hc_out_broadcast_pkts: 0x50, if_out_errors: 0x58,
        if_out_discards: 0x60, if_hc_in_ucast_octets: 0x68, if_hc_in_multicast_octets: 0x70,
        if_hc_in_broadcast_octets: 0x78, if_hc_out_ucast_octets: 0x80,
        if_hc_out_multicast_octets: 0x88, if_hc_out_broadcast_octets: 0x90,
    }
    layout_ndis_interrupt_moderation_parameters:
        NdisInterruptModerationParameters, size 0xC, align 4 {
        header: 0x0, flags: 0x4, interrupt_moderation: 0x8,
    }
}

/// `NDIS_STATISTICS_INFO_REVISION_1`.
pub const NDIS_STATISTICS_INFO_REVISION_1: u8 = 1;
/// `NDIS_SIZEOF_STATISTICS_INFO_REVISION_1`: through `ifHCOutBroadcastOctets`.
pub const NDIS_SIZEOF_STATISTICS_INFO_REVISION_1: u16 = 0x98;
/// `NDIS_INTERRUPT_MODERATION_PARAMETERS_REVISION_1`.
pub const NDIS_INTERRUPT_MODERATION_PARAMETERS_REVISION_1: u8 = 1;
/// `NDIS_SIZEOF_INTERRUPT_MODERATION_PARAMETERS_REVISION_1`: through
/// `InterruptModeration`.
pub const NDIS_SIZEOF_INTERRUPT_MODERATION_PARAMETERS_REVISION_1: u16 = 0xC;

/// `NDIS_STATISTICS_FLAGS_VALID_DIRECTED_FRAMES_RCV` (0x1),
/// `NDIS_STATISTICS_INFO.SupportedStatistics`.
pub const NDIS_STATISTICS_FLAGS_VALID_DIRECTED_FRAMES_RCV: u32 = 0x0000_0001;
/// `NDIS_STATISTICS_FLAGS_VALID_MULTICAST_FRAMES_RCV` (0x2).
pub const NDIS_STATISTICS_FLAGS_VALID_MULTICAST_FRAMES_RCV: u32 = 0x0000_0002;
/// `NDIS_STATISTICS_FLAGS_VALID_BROADCAST_FRAMES_RCV` (0x4).
pub const NDIS_STATISTICS_FLAGS_VALID_BROADCAST_FRAMES_RCV: u32 = 0x0000_0004;
/// `NDIS_STATISTICS_FLAGS_VALID_BYTES_RCV` (0x8).
pub const NDIS_STATISTICS_FLAGS_VALID_BYTES_RCV: u32 = 0x0000_0008;
/// `NDIS_STATISTICS_FLAGS_VALID_RCV_DISCARDS` (0x10).
pub const NDIS_STATISTICS_FLAGS_VALID_RCV_DISCARDS: u32 = 0x0000_0010;
/// `NDIS_STATISTICS_FLAGS_VALID_RCV_ERROR` (0x20).
pub const NDIS_STATISTICS_FLAGS_VALID_RCV_ERROR: u32 = 0x0000_0020;
/// `NDIS_STATISTICS_FLAGS_VALID_DIRECTED_FRAMES_XMIT` (0x40).
pub const NDIS_STATISTICS_FLAGS_VALID_DIRECTED_FRAMES_XMIT: u32 = 0x0000_0040;
/// `NDIS_STATISTICS_FLAGS_VALID_MULTICAST_FRAMES_XMIT` (0x80).
pub const NDIS_STATISTICS_FLAGS_VALID_MULTICAST_FRAMES_XMIT: u32 = 0x0000_0080;
/// `NDIS_STATISTICS_FLAGS_VALID_BROADCAST_FRAMES_XMIT` (0x100).
pub const NDIS_STATISTICS_FLAGS_VALID_BROADCAST_FRAMES_XMIT: u32 = 0x0000_0100;
/// `NDIS_STATISTICS_FLAGS_VALID_BYTES_XMIT` (0x200).
pub const NDIS_STATISTICS_FLAGS_VALID_BYTES_XMIT: u32 = 0x0000_0200;
/// `NDIS_STATISTICS_FLAGS_VALID_XMIT_ERROR` (0x400).
pub const NDIS_STATISTICS_FLAGS_VALID_XMIT_ERROR: u32 = 0x0000_0400;
/// `NDIS_STATISTICS_FLAGS_VALID_XMIT_DISCARDS` (0x8000).
pub const NDIS_STATISTICS_FLAGS_VALID_XMIT_DISCARDS: u32 = 0x0000_8000;
/// `NDIS_STATISTICS_FLAGS_VALID_DIRECTED_BYTES_RCV` (0x10000).
pub const NDIS_STATISTICS_FLAGS_VALID_DIRECTED_BYTES_RCV: u32 = 0x0001_0000;
/// `NDIS_STATISTICS_FLAGS_VALID_MULTICAST_BYTES_RCV` (0x20000).
pub const NDIS_STATISTICS_FLAGS_VALID_MULTICAST_BYTES_RCV: u32 = 0x0002_0000;
/// `NDIS_STATISTICS_FLAGS_VALID_BROADCAST_BYTES_RCV` (0x40000).
pub const NDIS_STATISTICS_FLAGS_VALID_BROADCAST_BYTES_RCV: u32 = 0x0004_0000;
/// `NDIS_STATISTICS_FLAGS_VALID_DIRECTED_BYTES_XMIT` (0x80000).
pub const NDIS_STATISTICS_FLAGS_VALID_DIRECTED_BYTES_XMIT: u32 = 0x0008_0000;
/// `NDIS_STATISTICS_FLAGS_VALID_MULTICAST_BYTES_XMIT` (0x100000).
pub const NDIS_STATISTICS_FLAGS_VALID_MULTICAST_BYTES_XMIT: u32 = 0x0010_0000;
/// `NDIS_STATISTICS_FLAGS_VALID_BROADCAST_BYTES_XMIT` (0x200000).
pub const NDIS_STATISTICS_FLAGS_VALID_BROADCAST_BYTES_XMIT: u32 = 0x0020_0000;

assert_ndis_sizeof! {
    NDIS_SIZEOF_STATISTICS_INFO_REVISION_1 => NdisStatisticsInfo,
    NDIS_SIZEOF_INTERRUPT_MODERATION_PARAMETERS_REVISION_1 => NdisInterruptModerationParameters,
}
