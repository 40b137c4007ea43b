//! The structures the miniport hands to NDIS: driver characteristics,
//! NDK provider characteristics, and the registration, general and NDK
//! attributes of an adapter, with `NDIS_NDK_CAPABILITIES` (rules A9–A12).
//!
//! Every builder is a pure function of its inputs, so the values NDIS
//! receives are unit-tested on the host; the Windows glue only passes the
//! results (and pointers to storage it keeps alive until halt) to
//! `NdisMRegisterMiniportDriver`, `NdisSetOptionalHandlers` and
//! `NdisMSetMiniportAttributes`.

use core::ffi::c_void;

use crate::abi::{
    CloseNdkAdapterHandler, CounterMask, IF_TYPE_ETHERNET_CSMACD, MiniportCancelDirectOidRequest,
    MiniportCancelOidRequest, MiniportCancelSend, MiniportDevicePnpEventNotify,
    MiniportDirectOidRequest, MiniportDriverUnload, MiniportHalt, MiniportInitialize,
    MiniportOidRequest, MiniportPause, MiniportReset, MiniportRestart,
    MiniportReturnNetBufferLists, MiniportSendNetBufferLists, MiniportSetOptions, MiniportShutdown,
    NDIS_LINK_STATE_DUPLEX_AUTO_NEGOTIATED, NDIS_MAC_OPTION_COPY_LOOKAHEAD_DATA,
    NDIS_MAC_OPTION_NO_LOOPBACK, NDIS_MAC_OPTION_TRANSFERS_NOT_PEND,
    NDIS_MINIPORT_ADAPTER_GENERAL_ATTRIBUTES_REVISION_2,
    NDIS_MINIPORT_ADAPTER_NDK_ATTRIBUTES_REVISION_1,
    NDIS_MINIPORT_ADAPTER_REGISTRATION_ATTRIBUTES_REVISION_2,
    NDIS_MINIPORT_ATTRIBUTES_NO_PAUSE_ON_SUSPEND, NDIS_MINIPORT_ATTRIBUTES_SURPRISE_REMOVE_OK,
    NDIS_MINIPORT_DRIVER_CHARACTERISTICS_REVISION_2, NDIS_MINIPORT_MAJOR_VERSION,
    NDIS_MINIPORT_MINOR_VERSION, NDIS_NDK_CAPABILITIES_REVISION_1,
    NDIS_NDK_PROVIDER_CHARACTERISTICS_REVISION_1, NDIS_OBJECT_TYPE_DEFAULT,
    NDIS_OBJECT_TYPE_MINIPORT_ADAPTER_GENERAL_ATTRIBUTES,
    NDIS_OBJECT_TYPE_MINIPORT_ADAPTER_NDK_ATTRIBUTES,
    NDIS_OBJECT_TYPE_MINIPORT_ADAPTER_REGISTRATION_ATTRIBUTES,
    NDIS_OBJECT_TYPE_MINIPORT_DRIVER_CHARACTERISTICS,
    NDIS_OBJECT_TYPE_NDK_PROVIDER_CHARACTERISTICS, NDIS_PACKET_TYPE_ALL_MULTICAST,
    NDIS_PACKET_TYPE_BROADCAST, NDIS_PACKET_TYPE_DIRECTED, NDIS_PACKET_TYPE_MULTICAST,
    NDIS_PACKET_TYPE_PROMISCUOUS, NDIS_PM_CAPABILITIES_REVISION_2,
    NDIS_SIZEOF_MINIPORT_ADAPTER_GENERAL_ATTRIBUTES_REVISION_2,
    NDIS_SIZEOF_MINIPORT_ADAPTER_NDK_ATTRIBUTES_REVISION_1,
    NDIS_SIZEOF_MINIPORT_ADAPTER_REGISTRATION_ATTRIBUTES_REVISION_2,
    NDIS_SIZEOF_MINIPORT_DRIVER_CHARACTERISTICS_REVISION_2,
    NDIS_SIZEOF_NDIS_PM_CAPABILITIES_REVISION_2, NDIS_SIZEOF_NDK_CAPABILITIES_REVISION_1,
    NDIS_SIZEOF_NDK_PROVIDER_CHARACTERISTICS_REVISION_1,
    NDIS_STATISTICS_BROADCAST_BYTES_XMIT_SUPPORTED,
    NDIS_STATISTICS_BROADCAST_FRAMES_XMIT_SUPPORTED, NDIS_STATISTICS_BYTES_XMIT_SUPPORTED,
    NDIS_STATISTICS_DIRECTED_BYTES_XMIT_SUPPORTED, NDIS_STATISTICS_DIRECTED_FRAMES_XMIT_SUPPORTED,
    NDIS_STATISTICS_GEN_STATISTICS_SUPPORTED, NDIS_STATISTICS_MULTICAST_BYTES_XMIT_SUPPORTED,
    NDIS_STATISTICS_MULTICAST_FRAMES_XMIT_SUPPORTED, NDIS_STATISTICS_RCV_ERROR_SUPPORTED,
    NDIS_STATISTICS_RCV_NO_BUFFER_SUPPORTED, NDIS_STATISTICS_RCV_OK_SUPPORTED,
    NDIS_STATISTICS_XMIT_ERROR_SUPPORTED, NDIS_STATISTICS_XMIT_OK_SUPPORTED, NdisHandle,
    NdisInterfaceType, NdisMediaConnectState, NdisMediaDuplexState, NdisMedium,
    NdisMiniportAdapterGeneralAttributes, NdisMiniportAdapterNdkAttributes,
    NdisMiniportAdapterRegistrationAttributes, NdisMiniportDriverCharacteristics,
    NdisNdkCapabilities, NdisNdkProviderCharacteristics, NdisObjectHeader, NdisOid,
    NdisPhysicalMedium, NdisPmCapabilities, NdisSupportedPauseFunctions, NdkAdapterInfo,
    NetIfAccessType, NetIfConnectionType, NetIfDirectionType, OpenNdkAdapterHandler,
};
use crate::rnic::Limits;

use super::config::{AdapterConfig, MAC_LEN};
use super::oid::LINK_SPEED_BPS;

/// The driver's own version, in the characteristics (`major.minor` of the
/// crate, saturated to a byte each).
pub const DRIVER_VERSION: (u8, u8) = (
    saturate!(super::oid::VENDOR_DRIVER_VERSION >> 16 => u8),
    saturate!(super::oid::VENDOR_DRIVER_VERSION & 0xFFFF => u8),
);

/// `MacOptions`: NDIS may copy lookahead data, sends never pend, and NDIS
/// loops frames back to local protocols itself (the virtual wire does not).
pub const MAC_OPTIONS: u32 = NDIS_MAC_OPTION_COPY_LOOKAHEAD_DATA
    | NDIS_MAC_OPTION_TRANSFERS_NOT_PEND
    | NDIS_MAC_OPTION_NO_LOOPBACK;

/// `SupportedPacketFilters`.
pub const SUPPORTED_PACKET_FILTERS: u32 = NDIS_PACKET_TYPE_DIRECTED
    | NDIS_PACKET_TYPE_MULTICAST
    | NDIS_PACKET_TYPE_ALL_MULTICAST
    | NDIS_PACKET_TYPE_BROADCAST
    | NDIS_PACKET_TYPE_PROMISCUOUS;

/// `SupportedStatistics` of the general attributes.
pub const SUPPORTED_STATISTICS: u32 = NDIS_STATISTICS_XMIT_OK_SUPPORTED
    | NDIS_STATISTICS_RCV_OK_SUPPORTED
    | NDIS_STATISTICS_XMIT_ERROR_SUPPORTED
    | NDIS_STATISTICS_RCV_ERROR_SUPPORTED
    | NDIS_STATISTICS_RCV_NO_BUFFER_SUPPORTED
    | NDIS_STATISTICS_DIRECTED_BYTES_XMIT_SUPPORTED
    | NDIS_STATISTICS_DIRECTED_FRAMES_XMIT_SUPPORTED
    | NDIS_STATISTICS_MULTICAST_BYTES_XMIT_SUPPORTED
    | NDIS_STATISTICS_MULTICAST_FRAMES_XMIT_SUPPORTED
    | NDIS_STATISTICS_BROADCAST_BYTES_XMIT_SUPPORTED
    | NDIS_STATISTICS_BROADCAST_FRAMES_XMIT_SUPPORTED
    | NDIS_STATISTICS_BYTES_XMIT_SUPPORTED
    | NDIS_STATISTICS_GEN_STATISTICS_SUPPORTED;

/// `NDIS_STATISTICS_INFO.SupportedStatistics`: every counter the answer to
/// `OID_GEN_STATISTICS` carries is valid (the receive ones are truly 0: the
/// virtual wire delivers nothing).
pub const STATISTICS_FLAGS_VALID: u32 = crate::abi::NDIS_STATISTICS_FLAGS_VALID_DIRECTED_FRAMES_RCV
    | crate::abi::NDIS_STATISTICS_FLAGS_VALID_MULTICAST_FRAMES_RCV
    | crate::abi::NDIS_STATISTICS_FLAGS_VALID_BROADCAST_FRAMES_RCV
    | crate::abi::NDIS_STATISTICS_FLAGS_VALID_BYTES_RCV
    | crate::abi::NDIS_STATISTICS_FLAGS_VALID_RCV_DISCARDS
    | crate::abi::NDIS_STATISTICS_FLAGS_VALID_RCV_ERROR
    | crate::abi::NDIS_STATISTICS_FLAGS_VALID_DIRECTED_FRAMES_XMIT
    | crate::abi::NDIS_STATISTICS_FLAGS_VALID_MULTICAST_FRAMES_XMIT
    | crate::abi::NDIS_STATISTICS_FLAGS_VALID_BROADCAST_FRAMES_XMIT
    | crate::abi::NDIS_STATISTICS_FLAGS_VALID_BYTES_XMIT
    | crate::abi::NDIS_STATISTICS_FLAGS_VALID_XMIT_ERROR
    | crate::abi::NDIS_STATISTICS_FLAGS_VALID_XMIT_DISCARDS
    | crate::abi::NDIS_STATISTICS_FLAGS_VALID_DIRECTED_BYTES_RCV
    | crate::abi::NDIS_STATISTICS_FLAGS_VALID_MULTICAST_BYTES_RCV
    | crate::abi::NDIS_STATISTICS_FLAGS_VALID_BROADCAST_BYTES_RCV
    | crate::abi::NDIS_STATISTICS_FLAGS_VALID_DIRECTED_BYTES_XMIT
    | crate::abi::NDIS_STATISTICS_FLAGS_VALID_MULTICAST_BYTES_XMIT
    | crate::abi::NDIS_STATISTICS_FLAGS_VALID_BROADCAST_BYTES_XMIT;

/// Every miniport handler the driver registers. Each is a required field, so
/// a characteristics structure without an OID handler or a set-options
/// handler cannot be built (rule A9).
#[derive(Clone, Copy, Debug)]
pub struct MiniportHandlers {
    /// `SetOptionsHandler`: registers the NDK provider characteristics.
    pub set_options: MiniportSetOptions,
    /// `InitializeHandlerEx`.
    pub initialize: MiniportInitialize,
    /// `HaltHandlerEx`.
    pub halt: MiniportHalt,
    /// `UnloadHandler`.
    pub unload: MiniportDriverUnload,
    /// `PauseHandler`.
    pub pause: MiniportPause,
    /// `RestartHandler`.
    pub restart: MiniportRestart,
    /// `OidRequestHandler`: answers every NDK and mandatory OID.
    pub oid_request: MiniportOidRequest,
    /// `SendNetBufferListsHandler`.
    pub send: MiniportSendNetBufferLists,
    /// `ReturnNetBufferListsHandler`.
    pub return_net_buffer_lists: MiniportReturnNetBufferLists,
    /// `CancelSendHandler`.
    pub cancel_send: MiniportCancelSend,
    /// `ResetHandlerEx`.
    pub reset: MiniportReset,
    /// `DevicePnPEventNotifyHandler`.
    pub device_pnp_event_notify: MiniportDevicePnpEventNotify,
    /// `ShutdownHandlerEx`.
    pub shutdown: MiniportShutdown,
    /// `CancelOidRequestHandler`.
    pub cancel_oid_request: MiniportCancelOidRequest,
    /// `DirectOidRequestHandler`: `OID_NDK_STATISTICS` (rule A16).
    pub direct_oid_request: MiniportDirectOidRequest,
    /// `CancelDirectOidRequestHandler`.
    pub cancel_direct_oid_request: MiniportCancelDirectOidRequest,
}

/// `NDIS_MINIPORT_DRIVER_CHARACTERISTICS` for `NdisMRegisterMiniportDriver`:
/// revision 2, NDIS 6.50, every handler of `handlers`, no check-for-hang
/// handler (there is no hardware to hang), flags 0 (rule A9).
#[must_use]
pub fn driver_characteristics(handlers: &MiniportHandlers) -> NdisMiniportDriverCharacteristics {
    NdisMiniportDriverCharacteristics {
        header: NdisObjectHeader {
            type_: NDIS_OBJECT_TYPE_MINIPORT_DRIVER_CHARACTERISTICS,
            revision: NDIS_MINIPORT_DRIVER_CHARACTERISTICS_REVISION_2,
            size: NDIS_SIZEOF_MINIPORT_DRIVER_CHARACTERISTICS_REVISION_2,
        },
        major_ndis_version: NDIS_MINIPORT_MAJOR_VERSION,
        minor_ndis_version: NDIS_MINIPORT_MINOR_VERSION,
        major_driver_version: DRIVER_VERSION.0,
        minor_driver_version: DRIVER_VERSION.1,
        flags: 0,
        set_options_handler: Some(handlers.set_options),
        initialize_handler_ex: Some(handlers.initialize),
        halt_handler_ex: Some(handlers.halt),
        unload_handler: Some(handlers.unload),
        pause_handler: Some(handlers.pause),
        restart_handler: Some(handlers.restart),
        oid_request_handler: Some(handlers.oid_request),
        send_net_buffer_lists_handler: Some(handlers.send),
        return_net_buffer_lists_handler: Some(handlers.return_net_buffer_lists),
        cancel_send_handler: Some(handlers.cancel_send),
        check_for_hang_handler_ex: None,
        reset_handler_ex: Some(handlers.reset),
        device_pnp_event_notify_handler: Some(handlers.device_pnp_event_notify),
        shutdown_handler_ex: Some(handlers.shutdown),
        cancel_oid_request_handler: Some(handlers.cancel_oid_request),
        direct_oid_request_handler: Some(handlers.direct_oid_request),
        cancel_direct_oid_request_handler: Some(handlers.cancel_direct_oid_request),
    }
}

/// `NDIS_NDK_PROVIDER_CHARACTERISTICS` for `NdisSetOptionalHandlers` (rule
/// A10): header {0xB2, 1, 0x18}, `Flags` 0, the open and close handlers.
#[must_use]
pub const fn provider_characteristics(
    open: OpenNdkAdapterHandler,
    close: CloseNdkAdapterHandler,
) -> NdisNdkProviderCharacteristics {
    NdisNdkProviderCharacteristics {
        header: NdisObjectHeader {
            type_: NDIS_OBJECT_TYPE_NDK_PROVIDER_CHARACTERISTICS,
            revision: NDIS_NDK_PROVIDER_CHARACTERISTICS_REVISION_1,
            size: NDIS_SIZEOF_NDK_PROVIDER_CHARACTERISTICS_REVISION_1,
        },
        flags: 0,
        open_ndk_adapter_handler: open,
        close_ndk_adapter_handler: close,
    }
}

/// `NDIS_MINIPORT_ADAPTER_REGISTRATION_ATTRIBUTES`: revision 2, the adapter
/// context NDIS hands back to every handler, a virtual adapter on no bus that
/// may be surprise-removed and needs no pause on suspend.
#[must_use]
pub const fn registration_attributes(
    context: NdisHandle,
) -> NdisMiniportAdapterRegistrationAttributes {
    NdisMiniportAdapterRegistrationAttributes {
        header: NdisObjectHeader {
            type_: NDIS_OBJECT_TYPE_MINIPORT_ADAPTER_REGISTRATION_ATTRIBUTES,
            revision: NDIS_MINIPORT_ADAPTER_REGISTRATION_ATTRIBUTES_REVISION_2,
            size: NDIS_SIZEOF_MINIPORT_ADAPTER_REGISTRATION_ATTRIBUTES_REVISION_2,
        },
        padding_04: 0,
        miniport_adapter_context: context,
        attribute_flags: NDIS_MINIPORT_ATTRIBUTES_SURPRISE_REMOVE_OK
            | NDIS_MINIPORT_ATTRIBUTES_NO_PAUSE_ON_SUSPEND,
        check_for_hang_time_in_seconds: 0,
        interface_type: NdisInterfaceType::INTERNAL,
        padding_1c: 0,
    }
}

/// `NDIS_PM_CAPABILITIES` (revision 2): no wake-up and no protocol offload
/// from any power state.
#[must_use]
pub fn pm_capabilities() -> NdisPmCapabilities {
    NdisPmCapabilities {
        header: NdisObjectHeader {
            type_: NDIS_OBJECT_TYPE_DEFAULT,
            revision: NDIS_PM_CAPABILITIES_REVISION_2,
            size: NDIS_SIZEOF_NDIS_PM_CAPABILITIES_REVISION_2,
        },
        ..NdisPmCapabilities::default()
    }
}

/// `NDIS_MINIPORT_ADAPTER_GENERAL_ATTRIBUTES` (revision 2) of a virtual
/// Ethernet interface with the link up: `*IfType` 6, `*MediaType` 802.3,
/// `*PhysicalMediaType` 802.3 (as the INF declares), the configured MTU and
/// MAC addresses, the supported OIDs (`oids`, a static list) and the power
/// capabilities at `pm` (kept alive by the caller).
#[must_use]
pub fn general_attributes(
    config: &AdapterConfig,
    permanent_mac: &[u8; MAC_LEN],
    oids: &'static [NdisOid],
    pm: *const NdisPmCapabilities,
) -> NdisMiniportAdapterGeneralAttributes {
    let mut permanent = [0_u8; crate::abi::NDIS_MAX_PHYS_ADDRESS_LENGTH];
    let mut current = [0_u8; crate::abi::NDIS_MAX_PHYS_ADDRESS_LENGTH];
    if let (Some(p), Some(c)) = (permanent.get_mut(..MAC_LEN), current.get_mut(..MAC_LEN)) {
        p.copy_from_slice(permanent_mac);
        c.copy_from_slice(&config.mac);
    }
    let oid_bytes = u32::try_from(core::mem::size_of_val(oids)).unwrap_or(u32::MAX);
    NdisMiniportAdapterGeneralAttributes {
        header: NdisObjectHeader {
            type_: NDIS_OBJECT_TYPE_MINIPORT_ADAPTER_GENERAL_ATTRIBUTES,
            revision: NDIS_MINIPORT_ADAPTER_GENERAL_ATTRIBUTES_REVISION_2,
            size: NDIS_SIZEOF_MINIPORT_ADAPTER_GENERAL_ATTRIBUTES_REVISION_2,
        },
        flags: 0,
        media_type: NdisMedium::MEDIUM_802_3,
        physical_medium_type: NdisPhysicalMedium::MEDIUM_802_3,
        mtu_size: config.mtu(),
        padding_14: 0,
        max_xmit_link_speed: LINK_SPEED_BPS,
        xmit_link_speed: LINK_SPEED_BPS,
        max_rcv_link_speed: LINK_SPEED_BPS,
        rcv_link_speed: LINK_SPEED_BPS,
        media_connect_state: NdisMediaConnectState::CONNECTED,
        media_duplex_state: NdisMediaDuplexState::FULL,
        lookahead_size: config.mtu(),
        padding_44: 0,
        power_management_capabilities: core::ptr::null_mut::<c_void>(),
        mac_options: MAC_OPTIONS,
        supported_packet_filters: SUPPORTED_PACKET_FILTERS,
        max_multicast_list_size: u32::try_from(super::oid::MAX_MULTICAST_LIST).unwrap_or(0),
        mac_address_length: u16::try_from(MAC_LEN).unwrap_or(0),
        permanent_mac_address: permanent,
        current_mac_address: current,
        padding_9e: 0,
        recv_scale_capabilities: core::ptr::null_mut(),
        access_type: NetIfAccessType::BROADCAST,
        direction_type: NetIfDirectionType::SEND_RECEIVE,
        connection_type: NetIfConnectionType::DEDICATED,
        if_type: IF_TYPE_ETHERNET_CSMACD,
        if_connector_present: crate::abi::FALSE,
        padding_b7: 0,
        supported_statistics: SUPPORTED_STATISTICS,
        supported_pause_functions: NdisSupportedPauseFunctions::UNSUPPORTED,
        data_back_fill_size: 0,
        context_back_fill_size: 0,
        supported_oid_list: oids.as_ptr(),
        supported_oid_list_length: oid_bytes,
        auto_negotiation_flags: NDIS_LINK_STATE_DUPLEX_AUTO_NEGOTIATED,
        power_management_capabilities_ex: pm,
    }
}

/// `NDIS_NDK_CAPABILITIES` (rule A12): header {0x80, 1, 0x38}, `Flags` 0, the
/// NIC's object-count limits, no adapter-wide read limit beyond the per-QP
/// ones (0), `MaxSrqCount` 0 when the adapter has no SRQ (`MaxSrqDepth` 0),
/// the provider's missing counters, and `NdkInfo` → the adapter information
/// consumers receive (kept alive by the caller). The counts come from the
/// limits the RNIC enforces (rule A8).
#[must_use]
pub fn ndk_capabilities(
    limits: &Limits,
    info: *mut NdkAdapterInfo,
    srq_supported: bool,
    missing: CounterMask,
) -> NdisNdkCapabilities {
    NdisNdkCapabilities {
        header: NdisObjectHeader {
            type_: NDIS_OBJECT_TYPE_DEFAULT,
            revision: NDIS_NDK_CAPABILITIES_REVISION_1,
            size: NDIS_SIZEOF_NDK_CAPABILITIES_REVISION_1,
        },
        flags: 0,
        max_qp_count: limits.max_qp_count,
        max_cq_count: limits.max_cq_count,
        max_mr_count: limits.max_mr_count,
        max_pd_count: limits.max_pd_count,
        max_inbound_read_limit: 0,
        max_outbound_read_limit: 0,
        max_mw_count: limits.max_mw_count,
        max_srq_count: if srq_supported {
            limits.max_srq_count
        } else {
            0
        },
        missing_counter_mask: missing.bits(),
        ndk_info: info,
    }
}

/// `NDIS_MINIPORT_ADAPTER_NDK_ATTRIBUTES` (rule A11): header {0xB3, 1, 0x10},
/// `Enabled` = the current NDK state, `NdkCapabilities` → `capabilities`
/// (kept alive by the caller). Set even while NDK is disabled.
#[must_use]
pub const fn ndk_attributes(
    enabled: bool,
    capabilities: *mut NdisNdkCapabilities,
) -> NdisMiniportAdapterNdkAttributes {
    NdisMiniportAdapterNdkAttributes {
        header: NdisObjectHeader {
            type_: NDIS_OBJECT_TYPE_MINIPORT_ADAPTER_NDK_ATTRIBUTES,
            revision: NDIS_MINIPORT_ADAPTER_NDK_ATTRIBUTES_REVISION_1,
            size: NDIS_SIZEOF_MINIPORT_ADAPTER_NDK_ATTRIBUTES_REVISION_1,
        },
        enabled: if enabled {
            crate::abi::TRUE
        } else {
            crate::abi::FALSE
        },
        padding_05: [0; 3],
        ndk_capabilities: capabilities,
    }
}

/// What the adapter keeps alive for NDIS from `MiniportInitializeEx` to
/// `MiniportHaltEx`: the adapter information and capabilities the NDK
/// attributes point to, and the power capabilities the general attributes
/// point to. It lives inside the adapter's pool allocation, so the pointers
/// between its fields stay valid; build it in place with
/// [`NdisBlocks::fill`].
#[derive(Debug)]
pub struct NdisBlocks {
    /// `NDK_ADAPTER_INFO` of the provider, `NdkCapabilities->NdkInfo`.
    pub ndk_info: NdkAdapterInfo,
    /// `NDIS_NDK_CAPABILITIES`.
    pub ndk_capabilities: NdisNdkCapabilities,
    /// `NDIS_PM_CAPABILITIES`.
    pub pm: NdisPmCapabilities,
}

impl NdisBlocks {
    /// Fills the blocks at their final address: `ndk_capabilities.ndk_info`
    /// points to `self.ndk_info`, so `self` must not move afterwards.
    pub fn fill(&mut self, limits: &Limits, info: NdkAdapterInfo, missing: CounterMask) {
        self.ndk_info = info;
        self.ndk_capabilities = ndk_capabilities(
            limits,
            &raw mut self.ndk_info,
            info.max_srq_depth != 0,
            missing,
        );
        self.pm = pm_capabilities();
    }

    /// Blocks to be filled.
    #[must_use]
    pub fn empty() -> Self {
        Self {
            ndk_info: NdkAdapterInfo::default(),
            ndk_capabilities: ndk_capabilities(
                &Limits::DEFAULT,
                core::ptr::null_mut(),
                false,
                CounterMask::empty(),
            ),
            pm: NdisPmCapabilities::default(),
        }
    }
}
