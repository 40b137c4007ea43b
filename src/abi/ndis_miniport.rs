//! The NDIS 6 miniport side the driver needs: driver characteristics, adapter
//! attributes, OID requests, PnP notifications, the prefix of
//! `NET_BUFFER_LIST` / `NET_BUFFER`, registry configuration, and the general
//! OID / status constants.
//!
//! These structures are **not** in `shared/spec/ndk-abi.md` (it tabulates the
//! NDK-specific NDIS structures only, which live in [`ndis`](super)). Their
//! facts were looked up in the public WDK headers and confirmed where possible
//! against layouts dumped from the public symbols of `ndis.sys`:
//!
//! * [H] WDK 10.0.16299 `km/ndis.h`, `shared/ntddndis.h`, `shared/ifdef.h`,
//!   `shared/ntstatus.h`, `shared/netevent.h`, `km/wdm.h` (repository
//!   `tpn/winsdk-10`, `Include/10.0.16299.0/…`);
//! * [PDB] x64 layouts from the public symbols of `ndis.sys` (repository
//!   `ntdiff/headers`, `…/x64/System32/ndis.sys/…`, Windows 10 builds).
//!
//! Every declaration below is written here from those facts (nothing is
//! copied), and each type's doc comment says which source confirms its
//! layout: "PDB" (offsets read from the symbol dump), or "computed" (natural
//! x64 alignment of the header's declaration, not confirmed from symbols).
//! Every size and field offset the driver relies on is asserted with
//! [`assert_layout!`], exactly like the NDK structures.
//!
//! Structures that NDIS allocates and that have grown with NDIS versions
//! (`NDIS_OID_REQUEST`, `NET_BUFFER_LIST`, `NET_BUFFER`) are declared as the
//! **prefix** the driver reads or writes; the driver only ever reaches them
//! through raw pointers to memory NDIS owns, never by value. The set of
//! structures is kept to what `src/driver/` really fills or reads.

use core::ffi::c_void;

use super::types::{Boolean, Mdl, NdisHandle, NdisNicSwitchId, NdisNicSwitchVportId, NdisOid};
use super::types::{NdisStatus, NtStatus};
use super::{MiniportSetOptions, NdisObjectHeader, NetPnpEventCode};

// ---------------------------------------------------------------------------
// Primitive aliases
// ---------------------------------------------------------------------------

/// `NDIS_PORT_NUMBER`: `ULONG` [H ntddndis.h]. Port 0 is the default port.
pub type NdisPortNumber = u32;

/// `NET_IFTYPE`: `UINT16` [H ifdef.h], an IANA interface type.
pub type NetIfType = u16;

// ---------------------------------------------------------------------------
// Enumerations (4-byte MSVC enums as `#[repr(transparent)]` newtypes, see the
// conventions in `abi/mod.rs`)
// ---------------------------------------------------------------------------

/// `NDIS_MEDIUM` [H ntddndis.h]: the medium type of an adapter.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NdisMedium(pub u32);

impl NdisMedium {
    /// `NdisMedium802_3` (0): Ethernet. The INF's `*MediaType` is this value.
    pub const MEDIUM_802_3: Self = Self(0);
}

/// `NDIS_PHYSICAL_MEDIUM` [H ntddndis.h]: the physical medium under the
/// medium type.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NdisPhysicalMedium(pub u32);

impl NdisPhysicalMedium {
    /// `NdisPhysicalMediumUnspecified` (0).
    pub const UNSPECIFIED: Self = Self(0);
    /// `NdisPhysicalMedium802_3` (14): wired Ethernet. The INF's
    /// `*PhysicalMediaType` is this value.
    pub const MEDIUM_802_3: Self = Self(14);
}

/// `NDIS_MEDIA_CONNECT_STATE` (= `NET_IF_MEDIA_CONNECT_STATE`) [H ifdef.h].
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NdisMediaConnectState(pub u32);

impl NdisMediaConnectState {
    /// `MediaConnectStateUnknown` (0).
    pub const UNKNOWN: Self = Self(0);
    /// `MediaConnectStateConnected` (1).
    pub const CONNECTED: Self = Self(1);
    /// `MediaConnectStateDisconnected` (2).
    pub const DISCONNECTED: Self = Self(2);
}

/// `NDIS_MEDIA_DUPLEX_STATE` (= `NET_IF_MEDIA_DUPLEX_STATE`) [H ifdef.h].
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NdisMediaDuplexState(pub u32);

impl NdisMediaDuplexState {
    /// `MediaDuplexStateFull` (2).
    pub const FULL: Self = Self(2);
}

/// `NET_IF_ACCESS_TYPE` [H ifdef.h].
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NetIfAccessType(pub u32);

impl NetIfAccessType {
    /// `NET_IF_ACCESS_BROADCAST` (2): a typical Ethernet adapter.
    pub const BROADCAST: Self = Self(2);
}

/// `NET_IF_DIRECTION_TYPE` [H ifdef.h].
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NetIfDirectionType(pub u32);

impl NetIfDirectionType {
    /// `NET_IF_DIRECTION_SENDRECEIVE` (0).
    pub const SEND_RECEIVE: Self = Self(0);
}

/// `NET_IF_CONNECTION_TYPE` [H ifdef.h].
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NetIfConnectionType(pub u32);

impl NetIfConnectionType {
    /// `NET_IF_CONNECTION_DEDICATED` (1).
    pub const DEDICATED: Self = Self(1);
}

/// `NDIS_INTERFACE_TYPE` [H ndis.h, PDB].
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NdisInterfaceType(pub u32);

impl NdisInterfaceType {
    /// `NdisInterfaceInternal` (0): no bus, what a virtual adapter reports.
    pub const INTERNAL: Self = Self(0);
}

/// `NDIS_REQUEST_TYPE` [H ndis.h, PDB]: `NDIS_OID_REQUEST.RequestType`.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NdisRequestType(pub u32);

impl NdisRequestType {
    /// `NdisRequestQueryInformation` (0).
    pub const QUERY_INFORMATION: Self = Self(0);
    /// `NdisRequestSetInformation` (1).
    pub const SET_INFORMATION: Self = Self(1);
    /// `NdisRequestQueryStatistics` (2).
    pub const QUERY_STATISTICS: Self = Self(2);
    /// `NdisRequestMethod` (12).
    pub const METHOD: Self = Self(12);
}

/// `NDIS_PARAMETER_TYPE` [H ndis.h]: the type asked of `NdisReadConfiguration`.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NdisParameterType(pub u32);

impl NdisParameterType {
    /// `NdisParameterInteger` (0): a decimal `REG_SZ` or a `REG_DWORD`.
    pub const INTEGER: Self = Self(0);
    /// `NdisParameterHexInteger` (1).
    pub const HEX_INTEGER: Self = Self(1);
    /// `NdisParameterString` (2).
    pub const STRING: Self = Self(2);
}

/// `NDIS_DEVICE_PNP_EVENT` [H ndis.h]: `NET_DEVICE_PNP_EVENT.DevicePnPEvent`.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NdisDevicePnpEvent(pub u32);

impl NdisDevicePnpEvent {
    /// `NdisDevicePnPEventQueryRemoved` (0).
    pub const QUERY_REMOVED: Self = Self(0);
    /// `NdisDevicePnPEventRemoved` (1).
    pub const REMOVED: Self = Self(1);
    /// `NdisDevicePnPEventSurpriseRemoved` (2).
    pub const SURPRISE_REMOVED: Self = Self(2);
    /// `NdisDevicePnPEventQueryStopped` (3).
    pub const QUERY_STOPPED: Self = Self(3);
    /// `NdisDevicePnPEventStopped` (4).
    pub const STOPPED: Self = Self(4);
    /// `NdisDevicePnPEventPowerProfileChanged` (5).
    pub const POWER_PROFILE_CHANGED: Self = Self(5);
}

/// `NDIS_HALT_ACTION` [H ndis.h]: why `MiniportHaltEx` is called.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NdisHaltAction(pub u32);

/// `NDIS_SHUTDOWN_ACTION` [H ndis.h]: why `MiniportShutdownEx` is called.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NdisShutdownAction(pub u32);

impl NdisShutdownAction {
    /// `NdisShutdownPowerOff` (0): PASSIVE_LEVEL.
    pub const POWER_OFF: Self = Self(0);
    /// `NdisShutdownBugCheck` (1): HIGH_LEVEL, during a bug check.
    pub const BUG_CHECK: Self = Self(1);
}

/// `NDIS_DEVICE_POWER_STATE` [H ntddndis.h].
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NdisDevicePowerState(pub u32);

impl NdisDevicePowerState {
    /// `NdisDeviceStateUnspecified` (0): no wake-up from any state.
    pub const UNSPECIFIED: Self = Self(0);
}

/// `NDIS_HARDWARE_STATUS` [H ntddndis.h].
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NdisHardwareStatus(pub u32);

impl NdisHardwareStatus {
    /// `NdisHardwareStatusReady` (0).
    pub const READY: Self = Self(0);
}

/// `NDIS_INTERRUPT_MODERATION` [H ntddndis.h].
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NdisInterruptModeration(pub u32);

impl NdisInterruptModeration {
    /// `NdisInterruptModerationNotSupported` (1).
    pub const NOT_SUPPORTED: Self = Self(1);
}

/// `NDIS_SUPPORTED_PAUSE_FUNCTIONS` [H ntddndis.h].
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NdisSupportedPauseFunctions(pub u32);

impl NdisSupportedPauseFunctions {
    /// `NdisPauseFunctionsUnsupported` (0).
    pub const UNSUPPORTED: Self = Self(0);
}

// ---------------------------------------------------------------------------
// Handler types (ndis.h function classes; IRQL from their annotations)
// ---------------------------------------------------------------------------

/// `MINIPORT_INITIALIZE` (PASSIVE_LEVEL).
pub type MiniportInitialize = unsafe extern "system" fn(
    miniport_adapter_handle: NdisHandle,
    miniport_driver_context: NdisHandle,
    init_parameters: *mut NdisMiniportInitParameters,
) -> NdisStatus;

/// `MINIPORT_HALT` (PASSIVE_LEVEL).
pub type MiniportHalt =
    unsafe extern "system" fn(miniport_adapter_context: NdisHandle, halt_action: NdisHaltAction);

/// `MINIPORT_DRIVER_UNLOAD` (= `DRIVER_UNLOAD`, PASSIVE_LEVEL): takes the
/// `DRIVER_OBJECT`.
pub type MiniportDriverUnload = unsafe extern "system" fn(driver_object: *mut c_void);

/// `MINIPORT_PAUSE` (PASSIVE_LEVEL). The parameters are not read.
pub type MiniportPause = unsafe extern "system" fn(
    miniport_adapter_context: NdisHandle,
    pause_parameters: *mut c_void,
) -> NdisStatus;

/// `MINIPORT_RESTART` (PASSIVE_LEVEL). The parameters are not read.
pub type MiniportRestart = unsafe extern "system" fn(
    miniport_adapter_context: NdisHandle,
    restart_parameters: *mut c_void,
) -> NdisStatus;

/// `MINIPORT_OID_REQUEST` (PASSIVE_LEVEL).
pub type MiniportOidRequest = unsafe extern "system" fn(
    miniport_adapter_context: NdisHandle,
    oid_request: *mut NdisOidRequest,
) -> NdisStatus;

/// `MINIPORT_SEND_NET_BUFFER_LISTS` (IRQL ≤ DISPATCH_LEVEL).
pub type MiniportSendNetBufferLists = unsafe extern "system" fn(
    miniport_adapter_context: NdisHandle,
    net_buffer_lists: *mut NetBufferList,
    port_number: NdisPortNumber,
    send_flags: u32,
);

/// `MINIPORT_RETURN_NET_BUFFER_LISTS` (IRQL ≤ DISPATCH_LEVEL).
pub type MiniportReturnNetBufferLists = unsafe extern "system" fn(
    miniport_adapter_context: NdisHandle,
    net_buffer_lists: *mut NetBufferList,
    return_flags: u32,
);

/// `MINIPORT_CANCEL_SEND` (IRQL ≤ DISPATCH_LEVEL).
pub type MiniportCancelSend =
    unsafe extern "system" fn(miniport_adapter_context: NdisHandle, cancel_id: *mut c_void);

/// `MINIPORT_CHECK_FOR_HANG` (PASSIVE_LEVEL).
pub type MiniportCheckForHang =
    unsafe extern "system" fn(miniport_adapter_context: NdisHandle) -> Boolean;

/// `MINIPORT_RESET` (IRQL ≤ DISPATCH_LEVEL).
pub type MiniportReset = unsafe extern "system" fn(
    miniport_adapter_context: NdisHandle,
    addressing_reset: *mut Boolean,
) -> NdisStatus;

/// `MINIPORT_DEVICE_PNP_EVENT_NOTIFY` (PASSIVE_LEVEL).
pub type MiniportDevicePnpEventNotify = unsafe extern "system" fn(
    miniport_adapter_context: NdisHandle,
    net_device_pnp_event: *mut NetDevicePnpEvent,
);

/// `MINIPORT_SHUTDOWN` (PASSIVE_LEVEL for power-off, HIGH_LEVEL during a bug
/// check).
pub type MiniportShutdown = unsafe extern "system" fn(
    miniport_adapter_context: NdisHandle,
    shutdown_action: NdisShutdownAction,
);

/// `MINIPORT_CANCEL_OID_REQUEST` (IRQL ≤ DISPATCH_LEVEL).
pub type MiniportCancelOidRequest =
    unsafe extern "system" fn(miniport_adapter_context: NdisHandle, request_id: *mut c_void);

/// `MINIPORT_DIRECT_OID_REQUEST` (NDIS 6.1+, IRQL ≤ DISPATCH_LEVEL).
pub type MiniportDirectOidRequest = unsafe extern "system" fn(
    miniport_adapter_context: NdisHandle,
    oid_request: *mut NdisOidRequest,
) -> NdisStatus;

/// `MINIPORT_CANCEL_DIRECT_OID_REQUEST` (NDIS 6.1+, IRQL ≤ DISPATCH_LEVEL).
pub type MiniportCancelDirectOidRequest =
    unsafe extern "system" fn(miniport_adapter_context: NdisHandle, request_id: *mut c_void);

/// `NDIS_IO_WORKITEM_FUNCTION` (PASSIVE_LEVEL): the routine of an NDIS I/O
/// work item.
pub type NdisIoWorkItemFunction =
    unsafe extern "system" fn(work_item_context: *mut c_void, work_item_handle: NdisHandle);

// ---------------------------------------------------------------------------
// Driver registration
// ---------------------------------------------------------------------------

/// `NDIS_MINIPORT_DRIVER_CHARACTERISTICS` [H ndis.h; layout PDB], declared
/// through `CancelDirectOidRequestHandler`: revision 2, 0x98 bytes. Revision 3
/// (NDIS 6.80) appends `SynchronousOidRequestHandler` at 0x98; SoftNDK
/// registers NDIS 6.50 and does not use it.
///
/// A handler NDIS treats as optional may be `None` (NULL).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdisMiniportDriverCharacteristics {
    /// `Header`: {[`NDIS_OBJECT_TYPE_MINIPORT_DRIVER_CHARACTERISTICS`],
    /// [`NDIS_MINIPORT_DRIVER_CHARACTERISTICS_REVISION_2`],
    /// [`NDIS_SIZEOF_MINIPORT_DRIVER_CHARACTERISTICS_REVISION_2`]}.
    pub header: NdisObjectHeader,
    /// `MajorNdisVersion`.
    pub major_ndis_version: u8,
    /// `MinorNdisVersion`.
    pub minor_ndis_version: u8,
    /// `MajorDriverVersion`.
    pub major_driver_version: u8,
    /// `MinorDriverVersion`.
    pub minor_driver_version: u8,
    /// `Flags`: 0 for a plain miniport.
    pub flags: u32,
    /// `SetOptionsHandler`.
    pub set_options_handler: Option<MiniportSetOptions>,
    /// `InitializeHandlerEx`.
    pub initialize_handler_ex: Option<MiniportInitialize>,
    /// `HaltHandlerEx`.
    pub halt_handler_ex: Option<MiniportHalt>,
    /// `UnloadHandler`.
    pub unload_handler: Option<MiniportDriverUnload>,
    /// `PauseHandler`.
    pub pause_handler: Option<MiniportPause>,
    /// `RestartHandler`.
    pub restart_handler: Option<MiniportRestart>,
    /// `OidRequestHandler`.
    pub oid_request_handler: Option<MiniportOidRequest>,
    /// `SendNetBufferListsHandler`.
    pub send_net_buffer_lists_handler: Option<MiniportSendNetBufferLists>,
    /// `ReturnNetBufferListsHandler`.
    pub return_net_buffer_lists_handler: Option<MiniportReturnNetBufferLists>,
    /// `CancelSendHandler`.
    pub cancel_send_handler: Option<MiniportCancelSend>,
    /// `CheckForHangHandlerEx` (optional).
    pub check_for_hang_handler_ex: Option<MiniportCheckForHang>,
    /// `ResetHandlerEx`.
    pub reset_handler_ex: Option<MiniportReset>,
    /// `DevicePnPEventNotifyHandler`.
    pub device_pnp_event_notify_handler: Option<MiniportDevicePnpEventNotify>,
    /// `ShutdownHandlerEx`.
    pub shutdown_handler_ex: Option<MiniportShutdown>,
    /// `CancelOidRequestHandler`.
    pub cancel_oid_request_handler: Option<MiniportCancelOidRequest>,
    /// `DirectOidRequestHandler` (NDIS 6.1+).
    pub direct_oid_request_handler: Option<MiniportDirectOidRequest>,
    /// `CancelDirectOidRequestHandler` (NDIS 6.1+).
    pub cancel_direct_oid_request_handler: Option<MiniportCancelDirectOidRequest>,
}

/// `NET_LUID` (= `NET_LUID_LH`) [H ifdef.h; PDB]: a 64-bit union whose
/// `Info` view is the bit fields `Reserved:24`, `NetLuidIndex:24`,
/// `IfType:16`, low bits first.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NetLuid {
    /// `Value`: the whole LUID.
    pub value: u64,
}

impl NetLuid {
    /// `Info.NetLuidIndex`: the interface's index among those of its type,
    /// stable for the life of the interface.
    #[must_use]
    pub const fn net_luid_index(self) -> u32 {
        // The mask keeps 24 bits, so the value always fits in a u32.
        ((self.value >> 24) & 0x00FF_FFFF) as u32
    }

    /// `Info.IfType`.
    #[must_use]
    pub const fn if_type(self) -> u16 {
        (self.value >> 48) as u16
    }
}

/// `NDIS_MINIPORT_INIT_PARAMETERS` [H ndis.h; layout PDB], 0x40 bytes: what
/// NDIS passes to `MiniportInitializeEx`. The driver reads `net_luid` only.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdisMiniportInitParameters {
    /// `Header`.
    pub header: NdisObjectHeader,
    /// `Flags`: reserved for NDIS.
    pub flags: u32,
    /// `AllocatedResources`: `PNDIS_RESOURCE_LIST` (none for a virtual adapter).
    pub allocated_resources: *mut c_void,
    /// `IMDeviceInstanceContext`.
    pub im_device_instance_context: NdisHandle,
    /// `MiniportAddDeviceContext`.
    pub miniport_add_device_context: NdisHandle,
    /// `IfIndex`: `NET_IFINDEX`.
    pub if_index: u32,
    /// Padding in C.
    pub padding_24: u32,
    /// `NetLuid`.
    pub net_luid: NetLuid,
    /// `DefaultPortAuthStates`.
    pub default_port_auth_states: *mut c_void,
    /// `PciDeviceCustomProperties`.
    pub pci_device_custom_properties: *mut c_void,
}

// ---------------------------------------------------------------------------
// Adapter attributes (NdisMSetMiniportAttributes)
// ---------------------------------------------------------------------------

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
    /// `Header`: {[`NDIS_OBJECT_TYPE_DEFAULT`](super::NDIS_OBJECT_TYPE_DEFAULT),
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

// ---------------------------------------------------------------------------
// OID requests
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// PnP
// ---------------------------------------------------------------------------

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
    /// `Header`: {[`NDIS_OBJECT_TYPE_DEFAULT`](super::NDIS_OBJECT_TYPE_DEFAULT),
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

// ---------------------------------------------------------------------------
// Data path (prefixes)
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// Registry configuration
// ---------------------------------------------------------------------------

/// `UNICODE_STRING` (= `NDIS_STRING`) [H ntdef.h; layout PDB], 0x10 bytes.
/// Lengths are in bytes, not characters.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct UnicodeString {
    /// `Length`: bytes of text, without a terminator.
    pub length: u16,
    /// `MaximumLength`: bytes of the buffer.
    pub maximum_length: u16,
    /// Padding in C.
    pub padding_04: u32,
    /// `Buffer`: UTF-16 code units.
    pub buffer: *const u16,
}

/// `NDIS_CONFIGURATION_OBJECT` [H ndis.h; layout computed], 0x18 bytes (the
/// revision-1 size through `Flags` is 0x14).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdisConfigurationObject {
    /// `Header`: {[`NDIS_OBJECT_TYPE_CONFIGURATION_OBJECT`],
    /// [`NDIS_CONFIGURATION_OBJECT_REVISION_1`],
    /// [`NDIS_SIZEOF_CONFIGURATION_OBJECT_REVISION_1`]}.
    pub header: NdisObjectHeader,
    /// Padding in C.
    pub padding_04: u32,
    /// `NdisHandle`: the miniport adapter handle.
    pub ndis_handle: NdisHandle,
    /// `Flags`: 0.
    pub flags: u32,
    /// Tail padding in C.
    pub padding_14: u32,
}

/// `BINARY_DATA` [H ndis.h; layout computed], 0x10 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BinaryData {
    /// `Length`.
    pub length: u16,
    /// Padding in C.
    pub padding_02: [u16; 3],
    /// `Buffer`.
    pub buffer: *mut c_void,
}

/// `NDIS_CONFIGURATION_PARAMETER.ParameterData` [H ndis.h; layout computed].
#[repr(C)]
#[derive(Clone, Copy)]
pub union NdisConfigurationParameterData {
    /// `IntegerData`.
    pub integer_data: u32,
    /// `StringData`.
    pub string_data: UnicodeString,
    /// `BinaryData`.
    pub binary_data: BinaryData,
}

/// `NDIS_CONFIGURATION_PARAMETER` [H ndis.h; layout computed], 0x18 bytes:
/// what `NdisReadConfiguration` returns (NDIS owns it).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct NdisConfigurationParameter {
    /// `ParameterType`: which member of `parameter_data` is valid.
    pub parameter_type: NdisParameterType,
    /// Padding in C.
    pub padding_04: u32,
    /// `ParameterData`.
    pub parameter_data: NdisConfigurationParameterData,
}

// ---------------------------------------------------------------------------
// General OID answers
// ---------------------------------------------------------------------------

/// `NDIS_STATISTICS_INFO` [H ntddndis.h; layout computed], 0x98 bytes: the
/// answer to `OID_GEN_STATISTICS`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NdisStatisticsInfo {
    /// `Header`: {[`NDIS_OBJECT_TYPE_DEFAULT`](super::NDIS_OBJECT_TYPE_DEFAULT),
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
    /// `Header`: {[`NDIS_OBJECT_TYPE_DEFAULT`](super::NDIS_OBJECT_TYPE_DEFAULT),
    /// [`NDIS_INTERRUPT_MODERATION_PARAMETERS_REVISION_1`],
    /// [`NDIS_SIZEOF_INTERRUPT_MODERATION_PARAMETERS_REVISION_1`]}.
    pub header: NdisObjectHeader,
    /// `Flags`.
    pub flags: u32,
    /// `InterruptModeration`.
    pub interrupt_moderation: NdisInterruptModeration,
}

// ---------------------------------------------------------------------------
// Layout assertions
// ---------------------------------------------------------------------------

assert_layout!(layout_ndis_miniport_driver_characteristics: NdisMiniportDriverCharacteristics,
    size = 0x98, align = 8, {
    header: 0x00,
    major_ndis_version: 0x04,
    minor_ndis_version: 0x05,
    major_driver_version: 0x06,
    minor_driver_version: 0x07,
    flags: 0x08,
    set_options_handler: 0x10,
    initialize_handler_ex: 0x18,
    halt_handler_ex: 0x20,
    unload_handler: 0x28,
    pause_handler: 0x30,
    restart_handler: 0x38,
    oid_request_handler: 0x40,
    send_net_buffer_lists_handler: 0x48,
    return_net_buffer_lists_handler: 0x50,
    cancel_send_handler: 0x58,
    check_for_hang_handler_ex: 0x60,
    reset_handler_ex: 0x68,
    device_pnp_event_notify_handler: 0x70,
    shutdown_handler_ex: 0x78,
    cancel_oid_request_handler: 0x80,
    direct_oid_request_handler: 0x88,
    cancel_direct_oid_request_handler: 0x90,
});

assert_layout!(layout_net_luid: NetLuid, size = 0x8, align = 8, { value: 0x0 });

assert_layout!(layout_ndis_miniport_init_parameters: NdisMiniportInitParameters,
    size = 0x40, align = 8, {
    header: 0x00,
    flags: 0x04,
    allocated_resources: 0x08,
    im_device_instance_context: 0x10,
    miniport_add_device_context: 0x18,
    if_index: 0x20,
    net_luid: 0x28,
    default_port_auth_states: 0x30,
    pci_device_custom_properties: 0x38,
});

assert_layout!(layout_ndis_miniport_adapter_registration_attributes:
    NdisMiniportAdapterRegistrationAttributes, size = 0x20, align = 8, {
    header: 0x00,
    miniport_adapter_context: 0x08,
    attribute_flags: 0x10,
    check_for_hang_time_in_seconds: 0x14,
    interface_type: 0x18,
});

assert_layout!(layout_ndis_pm_capabilities: NdisPmCapabilities, size = 0x3C, align = 4, {
    header: 0x00,
    flags: 0x04,
    supported_wol_packet_patterns: 0x08,
    num_total_wol_patterns: 0x0C,
    max_wol_pattern_size: 0x10,
    max_wol_pattern_offset: 0x14,
    max_wol_packet_save_buffer: 0x18,
    supported_protocol_offloads: 0x1C,
    num_arp_offload_ipv4_addresses: 0x20,
    num_ns_offload_ipv6_addresses: 0x24,
    min_magic_packet_wake_up: 0x28,
    min_pattern_wake_up: 0x2C,
    min_link_change_wake_up: 0x30,
    supported_wake_up_events: 0x34,
    media_specific_wake_up_events: 0x38,
});

assert_layout!(layout_ndis_miniport_adapter_general_attributes:
    NdisMiniportAdapterGeneralAttributes, size = 0xE0, align = 8, {
    header: 0x00,
    flags: 0x04,
    media_type: 0x08,
    physical_medium_type: 0x0C,
    mtu_size: 0x10,
    max_xmit_link_speed: 0x18,
    xmit_link_speed: 0x20,
    max_rcv_link_speed: 0x28,
    rcv_link_speed: 0x30,
    media_connect_state: 0x38,
    media_duplex_state: 0x3C,
    lookahead_size: 0x40,
    power_management_capabilities: 0x48,
    mac_options: 0x50,
    supported_packet_filters: 0x54,
    max_multicast_list_size: 0x58,
    mac_address_length: 0x5C,
    permanent_mac_address: 0x5E,
    current_mac_address: 0x7E,
    recv_scale_capabilities: 0xA0,
    access_type: 0xA8,
    direction_type: 0xAC,
    connection_type: 0xB0,
    if_type: 0xB4,
    if_connector_present: 0xB6,
    supported_statistics: 0xB8,
    supported_pause_functions: 0xBC,
    data_back_fill_size: 0xC0,
    context_back_fill_size: 0xC4,
    supported_oid_list: 0xC8,
    supported_oid_list_length: 0xD0,
    auto_negotiation_flags: 0xD4,
    power_management_capabilities_ex: 0xD8,
});

assert_layout!(layout_ndis_oid_query: NdisOidQuery, size = 0x20, align = 8, {
    oid: 0x00,
    information_buffer: 0x08,
    information_buffer_length: 0x10,
    bytes_written: 0x14,
    bytes_needed: 0x18,
});

assert_layout!(layout_ndis_oid_set: NdisOidSet, size = 0x20, align = 8, {
    oid: 0x00,
    information_buffer: 0x08,
    information_buffer_length: 0x10,
    bytes_read: 0x14,
    bytes_needed: 0x18,
});

assert_layout!(layout_ndis_oid_method: NdisOidMethod, size = 0x28, align = 8, {
    oid: 0x00,
    information_buffer: 0x08,
    input_buffer_length: 0x10,
    output_buffer_length: 0x14,
    method_id: 0x18,
    bytes_written: 0x1C,
    bytes_read: 0x20,
    bytes_needed: 0x24,
});

assert_layout!(layout_ndis_oid_request_data: NdisOidRequestData, size = 0x28, align = 8, {
    query_information: 0x0,
    set_information: 0x0,
    method_information: 0x0,
});

assert_layout!(layout_ndis_oid_request: NdisOidRequest, size = 0xF0, align = 8, {
    header: 0x00,
    request_type: 0x04,
    port_number: 0x08,
    timeout: 0x0C,
    request_id: 0x10,
    request_handle: 0x18,
    data: 0x20,
    ndis_reserved: 0x48,
    miniport_reserved: 0xC8,
    source_reserved: 0xD8,
    supported_revision: 0xE8,
    reserved1: 0xE9,
    reserved2: 0xEA,
});

assert_layout!(layout_net_pnp_event: NetPnpEvent, size = 0x98, align = 8, {
    net_event: 0x00,
    buffer: 0x08,
    buffer_length: 0x10,
    ndis_reserved: 0x18,
    transport_reserved: 0x38,
    tdi_reserved: 0x58,
    tdi_client_reserved: 0x78,
});

assert_layout!(layout_net_pnp_event_notification: NetPnpEventNotification,
    size = 0xB0, align = 8, {
    header: 0x00,
    port_number: 0x04,
    net_pnp_event: 0x08,
    flags: 0xA0,
    switch_id: 0xA4,
    vport_id: 0xA8,
});

assert_layout!(layout_net_device_pnp_event: NetDevicePnpEvent, size = 0x30, align = 8, {
    header: 0x00,
    port_number: 0x04,
    device_pnp_event: 0x08,
    information_buffer: 0x10,
    information_buffer_length: 0x18,
    ndis_reserved: 0x1C,
});

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

assert_layout!(layout_unicode_string: UnicodeString, size = 0x10, align = 8, {
    length: 0x0,
    maximum_length: 0x2,
    buffer: 0x8,
});

assert_layout!(layout_ndis_configuration_object: NdisConfigurationObject,
    size = 0x18, align = 8, {
    header: 0x00,
    ndis_handle: 0x08,
    flags: 0x10,
});

assert_layout!(layout_binary_data: BinaryData, size = 0x10, align = 8, {
    length: 0x0,
    buffer: 0x8,
});

assert_layout!(layout_ndis_configuration_parameter: NdisConfigurationParameter,
    size = 0x18, align = 8, {
    parameter_type: 0x0,
    parameter_data: 0x8,
});

assert_layout!(layout_ndis_statistics_info: NdisStatisticsInfo, size = 0x98, align = 8, {
    header: 0x00,
    supported_statistics: 0x04,
    if_in_discards: 0x08,
    if_in_errors: 0x10,
    if_hc_in_octets: 0x18,
    if_hc_in_ucast_pkts: 0x20,
    if_hc_in_multicast_pkts: 0x28,
    if_hc_in_broadcast_pkts: 0x30,
    if_hc_out_octets: 0x38,
    if_hc_out_ucast_pkts: 0x40,
    if_hc_out_multicast_pkts: 0x48,
    if_hc_out_broadcast_pkts: 0x50,
    if_out_errors: 0x58,
    if_out_discards: 0x60,
    if_hc_in_ucast_octets: 0x68,
    if_hc_in_multicast_octets: 0x70,
    if_hc_in_broadcast_octets: 0x78,
    if_hc_out_ucast_octets: 0x80,
    if_hc_out_multicast_octets: 0x88,
    if_hc_out_broadcast_octets: 0x90,
});

assert_layout!(layout_ndis_interrupt_moderation_parameters: NdisInterruptModerationParameters,
    size = 0xC, align = 4, {
    header: 0x0,
    flags: 0x4,
    interrupt_moderation: 0x8,
});

// ---------------------------------------------------------------------------
// Versions, object types, revisions and sizes [H ndis.h, ntddndis.h]
// ---------------------------------------------------------------------------

/// The NDIS major version SoftNDK registers (`MajorNdisVersion`).
pub const NDIS_MINIPORT_MAJOR_VERSION: u8 = 6;

/// The NDIS minor version SoftNDK registers (`MinorNdisVersion`): 6.50
/// (Windows 10), the first with `SwitchId` / `VPortId` in
/// `NDIS_OPEN_NDK_ADAPTER_PARAMETERS`; NDKPI 1.2 needs at least 6.40.
pub const NDIS_MINIPORT_MINOR_VERSION: u8 = 50;

/// `NDIS_OBJECT_TYPE_MINIPORT_INIT_PARAMETERS` (0x81).
pub const NDIS_OBJECT_TYPE_MINIPORT_INIT_PARAMETERS: u8 = 0x81;
/// `NDIS_OBJECT_TYPE_MINIPORT_DRIVER_CHARACTERISTICS` (0x8A).
pub const NDIS_OBJECT_TYPE_MINIPORT_DRIVER_CHARACTERISTICS: u8 = 0x8A;
/// `NDIS_OBJECT_TYPE_OID_REQUEST` (0x96).
pub const NDIS_OBJECT_TYPE_OID_REQUEST: u8 = 0x96;
/// `NDIS_OBJECT_TYPE_MINIPORT_ADAPTER_REGISTRATION_ATTRIBUTES` (0x9E).
pub const NDIS_OBJECT_TYPE_MINIPORT_ADAPTER_REGISTRATION_ATTRIBUTES: u8 = 0x9E;
/// `NDIS_OBJECT_TYPE_MINIPORT_ADAPTER_GENERAL_ATTRIBUTES` (0x9F).
pub const NDIS_OBJECT_TYPE_MINIPORT_ADAPTER_GENERAL_ATTRIBUTES: u8 = 0x9F;
/// `NDIS_OBJECT_TYPE_CONFIGURATION_OBJECT` (0xA9).
pub const NDIS_OBJECT_TYPE_CONFIGURATION_OBJECT: u8 = 0xA9;

/// `NDIS_MINIPORT_DRIVER_CHARACTERISTICS_REVISION_2` (NDIS 6.1+).
pub const NDIS_MINIPORT_DRIVER_CHARACTERISTICS_REVISION_2: u8 = 2;
/// `NDIS_SIZEOF_MINIPORT_DRIVER_CHARACTERISTICS_REVISION_2`: through
/// `CancelDirectOidRequestHandler`.
pub const NDIS_SIZEOF_MINIPORT_DRIVER_CHARACTERISTICS_REVISION_2: u16 = 0x98;
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
/// `NET_PNP_EVENT_NOTIFICATION_REVISION_1`.
pub const NET_PNP_EVENT_NOTIFICATION_REVISION_1: u8 = 1;
/// `NDIS_SIZEOF_NET_PNP_EVENT_NOTIFICATION_REVISION_1`: through `Flags`.
pub const NDIS_SIZEOF_NET_PNP_EVENT_NOTIFICATION_REVISION_1: u16 = 0xA4;
/// `NDIS_CONFIGURATION_OBJECT_REVISION_1`.
pub const NDIS_CONFIGURATION_OBJECT_REVISION_1: u8 = 1;
/// `NDIS_SIZEOF_CONFIGURATION_OBJECT_REVISION_1`: through `Flags`.
pub const NDIS_SIZEOF_CONFIGURATION_OBJECT_REVISION_1: u16 = 0x14;
/// `NDIS_STATISTICS_INFO_REVISION_1`.
pub const NDIS_STATISTICS_INFO_REVISION_1: u8 = 1;
/// `NDIS_SIZEOF_STATISTICS_INFO_REVISION_1`: through `ifHCOutBroadcastOctets`.
pub const NDIS_SIZEOF_STATISTICS_INFO_REVISION_1: u16 = 0x98;
/// `NDIS_INTERRUPT_MODERATION_PARAMETERS_REVISION_1`.
pub const NDIS_INTERRUPT_MODERATION_PARAMETERS_REVISION_1: u8 = 1;
/// `NDIS_SIZEOF_INTERRUPT_MODERATION_PARAMETERS_REVISION_1`: through
/// `InterruptModeration`.
pub const NDIS_SIZEOF_INTERRUPT_MODERATION_PARAMETERS_REVISION_1: u16 = 0xC;

// Each NDIS_SIZEOF_* above is "the size through the last member": tie them to
// the declarations so neither can drift.
#[cfg(target_arch = "x86_64")]
const _: () = {
    use core::mem::{offset_of, size_of};
    const fn widen(size: u16) -> usize {
        size as usize
    }
    assert!(
        widen(NDIS_SIZEOF_MINIPORT_DRIVER_CHARACTERISTICS_REVISION_2)
            == offset_of!(
                NdisMiniportDriverCharacteristics,
                cancel_direct_oid_request_handler
            ) + size_of::<Option<MiniportCancelDirectOidRequest>>()
    );
    assert!(
        widen(NDIS_SIZEOF_MINIPORT_ADAPTER_REGISTRATION_ATTRIBUTES_REVISION_2)
            == offset_of!(NdisMiniportAdapterRegistrationAttributes, interface_type)
                + size_of::<NdisInterfaceType>()
    );
    assert!(
        widen(NDIS_SIZEOF_MINIPORT_ADAPTER_GENERAL_ATTRIBUTES_REVISION_2)
            == offset_of!(
                NdisMiniportAdapterGeneralAttributes,
                power_management_capabilities_ex
            ) + size_of::<*const NdisPmCapabilities>()
    );
    assert!(
        widen(NDIS_SIZEOF_NDIS_PM_CAPABILITIES_REVISION_2)
            == offset_of!(NdisPmCapabilities, media_specific_wake_up_events) + size_of::<u32>()
    );
    assert!(
        widen(NDIS_SIZEOF_NET_PNP_EVENT_NOTIFICATION_REVISION_1)
            == offset_of!(NetPnpEventNotification, flags) + size_of::<u32>()
    );
    assert!(
        widen(NDIS_SIZEOF_CONFIGURATION_OBJECT_REVISION_1)
            == offset_of!(NdisConfigurationObject, flags) + size_of::<u32>()
    );
    assert!(widen(NDIS_SIZEOF_STATISTICS_INFO_REVISION_1) == size_of::<NdisStatisticsInfo>());
    assert!(
        widen(NDIS_SIZEOF_INTERRUPT_MODERATION_PARAMETERS_REVISION_1)
            == size_of::<NdisInterruptModerationParameters>()
    );
    // NDIS_SIZEOF_OID_REQUEST_REVISION_1 is through Reserved2.
    assert!(offset_of!(NdisOidRequest, reserved2) + size_of::<u16>() == 0xEC);
};

// ---------------------------------------------------------------------------
// Flags [H ndis.h, ntddndis.h]
// ---------------------------------------------------------------------------

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

/// `NDIS_SEND_FLAGS_DISPATCH_LEVEL` (0x1): the send handler runs at
/// DISPATCH_LEVEL.
pub const NDIS_SEND_FLAGS_DISPATCH_LEVEL: u32 = 0x0000_0001;
/// `NDIS_SEND_COMPLETE_FLAGS_DISPATCH_LEVEL` (0x1): the caller of
/// `NdisMSendNetBufferListsComplete` runs at DISPATCH_LEVEL.
pub const NDIS_SEND_COMPLETE_FLAGS_DISPATCH_LEVEL: u32 = 0x0000_0001;

/// `NCF_VIRTUAL` (0x1): the INF `Characteristics` bit of a virtual adapter.
pub const NCF_VIRTUAL: u32 = 0x0000_0001;

/// `IF_TYPE_ETHERNET_CSMACD` (6) [H ipifcons.h]: the INF's `*IfType`.
pub const IF_TYPE_ETHERNET_CSMACD: NetIfType = 6;

// ---------------------------------------------------------------------------
// MDL flags and Mm constants [H wdm.h], used by `kernel::mdl`
// ---------------------------------------------------------------------------

/// `MDL_MAPPED_TO_SYSTEM_VA` (0x1): `MappedSystemVa` is valid.
pub const MDL_MAPPED_TO_SYSTEM_VA: i16 = 0x0001;
/// `MDL_SOURCE_IS_NONPAGED_POOL` (0x4): the buffer is non-paged pool and
/// `MappedSystemVa` is its address.
pub const MDL_SOURCE_IS_NONPAGED_POOL: i16 = 0x0004;
/// `MM_PAGE_PRIORITY::NormalPagePriority` (16): the mapping may fail when
/// system PTEs run low.
pub const NORMAL_PAGE_PRIORITY: u32 = 16;
/// `MdlMappingNoExecute` (0x40000000): map non-executable.
pub const MDL_MAPPING_NO_EXECUTE: u32 = 0x4000_0000;
/// `MEMORY_CACHING_TYPE::MmCached` (1).
pub const MM_CACHED: u32 = 1;
/// `KPROCESSOR_MODE::KernelMode` (0).
pub const KERNEL_MODE: u8 = 0;

// ---------------------------------------------------------------------------
// NTSTATUS / NDIS_STATUS codes [H ndis.h, ntstatus.h]
// ---------------------------------------------------------------------------

/// `STATUS_UNSUCCESSFUL` (0xC0000001).
pub const STATUS_UNSUCCESSFUL: NtStatus = 0xC000_0001_u32.cast_signed();
/// `NDIS_STATUS_FAILURE` (= `STATUS_UNSUCCESSFUL`).
pub const NDIS_STATUS_FAILURE: NdisStatus = STATUS_UNSUCCESSFUL;
/// `NDIS_STATUS_NOT_SUPPORTED` (= `STATUS_NOT_SUPPORTED`, 0xC00000BB).
pub const NDIS_STATUS_NOT_SUPPORTED: NdisStatus = 0xC000_00BB_u32.cast_signed();
/// `NDIS_STATUS_INVALID_LENGTH` (0xC0010014): the buffer length is wrong for a
/// set; `BytesNeeded` says what is needed.
pub const NDIS_STATUS_INVALID_LENGTH: NdisStatus = 0xC001_0014_u32.cast_signed();
/// `NDIS_STATUS_INVALID_DATA` (0xC0010015).
pub const NDIS_STATUS_INVALID_DATA: NdisStatus = 0xC001_0015_u32.cast_signed();
/// `NDIS_STATUS_BUFFER_TOO_SHORT` (0xC0010016): a query buffer is too small;
/// `BytesNeeded` says what is needed.
pub const NDIS_STATUS_BUFFER_TOO_SHORT: NdisStatus = 0xC001_0016_u32.cast_signed();
/// `NDIS_STATUS_MULTICAST_FULL` (0xC0010009).
pub const NDIS_STATUS_MULTICAST_FULL: NdisStatus = 0xC001_0009_u32.cast_signed();
/// `NDIS_STATUS_PAUSED` (= `STATUS_NDIS_PAUSED`, 0xC023002A): a send while
/// paused.
pub const NDIS_STATUS_PAUSED: NdisStatus = 0xC023_002A_u32.cast_signed();

/// `EVENT_NDIS_UNSUPPORTED_CONFIGURATION` (0xC0001391) [H netevent.h]: the
/// netevent.dll message "%2 : Does not support the configuration supplied.",
/// written when the configured RoCE frame size is not the operational one
/// (rule A24).
pub const EVENT_NDIS_UNSUPPORTED_CONFIGURATION: NdisStatus = 0xC000_1391_u32.cast_signed();

// ---------------------------------------------------------------------------
// General OIDs [H ntddndis.h]
// ---------------------------------------------------------------------------

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

// The NDK OIDs are in `consts` (ndk-abi.md §5.9); these must not collide.
const _: () = {
    assert!(OID_GEN_SUPPORTED_LIST != super::OID_NDK_SET_STATE);
    assert!(NDIS_STATUS_BUFFER_TOO_SHORT < 0 && NDIS_STATUS_INVALID_LENGTH < 0);
    assert!(NDIS_STATUS_NOT_SUPPORTED == super::STATUS_NOT_SUPPORTED);
};
