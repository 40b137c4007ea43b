//! Primitive aliases and the 4-byte enumerations of the miniport side
//! (MSVC enums as `#[repr(transparent)]` newtypes, see the conventions in
//! `abi/mod.rs`).

/// `NDIS_PORT_NUMBER`: `ULONG` [H ntddndis.h]. Port 0 is the default port.
pub type NdisPortNumber = u32;

/// `NET_IFTYPE`: `UINT16` [H ifdef.h], an IANA interface type.
pub type NetIfType = u16;

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
