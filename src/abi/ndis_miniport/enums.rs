//! Primitive aliases and the 4-byte enumerations of the miniport side
//! (MSVC enums as `#[repr(transparent)]` newtypes, see the conventions in
//! `abi/mod.rs`).

/// `NDIS_PORT_NUMBER`: `ULONG` [H ntddndis.h]. Port 0 is the default port.
pub type NdisPortNumber = u32;

/// `NET_IFTYPE`: `UINT16` [H ifdef.h], an IANA interface type.
pub type NetIfType = u16;

c_enum! {
    /// `NDIS_MEDIUM` [H ntddndis.h]: the medium type of an adapter.
    pub struct NdisMedium(pub u32) {
        /// `NdisMedium802_3` (0): Ethernet. The INF's `*MediaType` is this value.
        const MEDIUM_802_3 = 0;
    }

    /// `NDIS_PHYSICAL_MEDIUM` [H ntddndis.h]: the physical medium under the
    /// medium type.
    pub struct NdisPhysicalMedium(pub u32) {
        /// `NdisPhysicalMediumUnspecified` (0).
        const UNSPECIFIED = 0;
        /// `NdisPhysicalMedium802_3` (14): wired Ethernet. The INF's
        /// `*PhysicalMediaType` is this value.
        const MEDIUM_802_3 = 14;
    }

    /// `NDIS_MEDIA_CONNECT_STATE` (= `NET_IF_MEDIA_CONNECT_STATE`) [H ifdef.h].
    pub struct NdisMediaConnectState(pub u32) {
        /// `MediaConnectStateUnknown` (0).
        const UNKNOWN = 0;
        /// `MediaConnectStateConnected` (1).
        const CONNECTED = 1;
        /// `MediaConnectStateDisconnected` (2).
        const DISCONNECTED = 2;
    }

    /// `NDIS_MEDIA_DUPLEX_STATE` (= `NET_IF_MEDIA_DUPLEX_STATE`) [H ifdef.h].
    pub struct NdisMediaDuplexState(pub u32) {
        /// `MediaDuplexStateFull` (2).
        const FULL = 2;
    }

    /// `NET_IF_ACCESS_TYPE` [H ifdef.h].
    pub struct NetIfAccessType(pub u32) {
        /// `NET_IF_ACCESS_BROADCAST` (2): a typical Ethernet adapter.
        const BROADCAST = 2;
    }

    /// `NET_IF_DIRECTION_TYPE` [H ifdef.h].
    pub struct NetIfDirectionType(pub u32) {
        /// `NET_IF_DIRECTION_SENDRECEIVE` (0).
        const SEND_RECEIVE = 0;
    }

    /// `NET_IF_CONNECTION_TYPE` [H ifdef.h].
    pub struct NetIfConnectionType(pub u32) {
        /// `NET_IF_CONNECTION_DEDICATED` (1).
        const DEDICATED = 1;
    }

    /// `NDIS_INTERFACE_TYPE` [H ndis.h, PDB].
    pub struct NdisInterfaceType(pub u32) {
        /// `NdisInterfaceInternal` (0): no bus, what a virtual adapter reports.
        const INTERNAL = 0;
    }

    /// `NDIS_REQUEST_TYPE` [H ndis.h, PDB]: `NDIS_OID_REQUEST.RequestType`.
    pub struct NdisRequestType(pub u32) {
        /// `NdisRequestQueryInformation` (0).
        const QUERY_INFORMATION = 0;
        /// `NdisRequestSetInformation` (1).
        const SET_INFORMATION = 1;
        /// `NdisRequestQueryStatistics` (2).
        const QUERY_STATISTICS = 2;
        /// `NdisRequestMethod` (12).
        const METHOD = 12;
    }

    /// `NDIS_PARAMETER_TYPE` [H ndis.h]: the type asked of `NdisReadConfiguration`.
    pub struct NdisParameterType(pub u32) {
        /// `NdisParameterInteger` (0): a decimal `REG_SZ` or a `REG_DWORD`.
        const INTEGER = 0;
        /// `NdisParameterHexInteger` (1).
        const HEX_INTEGER = 1;
        /// `NdisParameterString` (2).
        const STRING = 2;
    }

    /// `NDIS_DEVICE_PNP_EVENT` [H ndis.h]: `NET_DEVICE_PNP_EVENT.DevicePnPEvent`.
    pub struct NdisDevicePnpEvent(pub u32) {
        /// `NdisDevicePnPEventQueryRemoved` (0).
        const QUERY_REMOVED = 0;
        /// `NdisDevicePnPEventRemoved` (1).
        const REMOVED = 1;
        /// `NdisDevicePnPEventSurpriseRemoved` (2).
        const SURPRISE_REMOVED = 2;
        /// `NdisDevicePnPEventQueryStopped` (3).
        const QUERY_STOPPED = 3;
        /// `NdisDevicePnPEventStopped` (4).
        const STOPPED = 4;
        /// `NdisDevicePnPEventPowerProfileChanged` (5).
        const POWER_PROFILE_CHANGED = 5;
    }

    /// `NDIS_HALT_ACTION` [H ndis.h]: why `MiniportHaltEx` is called.
    pub struct NdisHaltAction(pub u32) {}

    /// `NDIS_SHUTDOWN_ACTION` [H ndis.h]: why `MiniportShutdownEx` is called.
    pub struct NdisShutdownAction(pub u32) {
        /// `NdisShutdownPowerOff` (0): PASSIVE_LEVEL.
        const POWER_OFF = 0;
        /// `NdisShutdownBugCheck` (1): HIGH_LEVEL, during a bug check.
        const BUG_CHECK = 1;
    }

    /// `NDIS_DEVICE_POWER_STATE` [H ntddndis.h].
    pub struct NdisDevicePowerState(pub u32) {
        /// `NdisDeviceStateUnspecified` (0): no wake-up from any state.
        const UNSPECIFIED = 0;
    }

    /// `NDIS_HARDWARE_STATUS` [H ntddndis.h].
    pub struct NdisHardwareStatus(pub u32) {
        /// `NdisHardwareStatusReady` (0).
        const READY = 0;
    }

    /// `NDIS_INTERRUPT_MODERATION` [H ntddndis.h].
    pub struct NdisInterruptModeration(pub u32) {
        /// `NdisInterruptModerationNotSupported` (1).
        const NOT_SUPPORTED = 1;
    }

    /// `NDIS_SUPPORTED_PAUSE_FUNCTIONS` [H ntddndis.h].
    pub struct NdisSupportedPauseFunctions(pub u32) {
        /// `NdisPauseFunctionsUnsupported` (0).
        const UNSUPPORTED = 0;
    }
}
