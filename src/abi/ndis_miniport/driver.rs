//! Driver registration: the miniport handler types (ndis.h function classes;
//! IRQL from their annotations), `NDIS_MINIPORT_DRIVER_CHARACTERISTICS`,
//! `NDIS_MINIPORT_INIT_PARAMETERS` and the NDIS version SoftNDK registers.

use core::ffi::c_void;

use super::data_path::NetBufferList;
use super::enums::{NdisHaltAction, NdisPortNumber, NdisShutdownAction};
use super::oid::NdisOidRequest;
use super::pnp::NetDevicePnpEvent;
use crate::abi::types::{Boolean, NdisHandle, NdisStatus};
use crate::abi::{MiniportSetOptions, NdisObjectHeader};

c_fn! {
    /// `MINIPORT_INITIALIZE` (PASSIVE_LEVEL).
    MiniportInitialize(miniport_adapter_handle: NdisHandle, miniport_driver_context: NdisHandle,
        init_parameters: *mut NdisMiniportInitParameters) -> NdisStatus;

    /// `MINIPORT_HALT` (PASSIVE_LEVEL).
    MiniportHalt(miniport_adapter_context: NdisHandle, halt_action: NdisHaltAction);

    /// `MINIPORT_DRIVER_UNLOAD` (= `DRIVER_UNLOAD`, PASSIVE_LEVEL): takes the
    /// `DRIVER_OBJECT`.
    MiniportDriverUnload(driver_object: *mut c_void);

    /// `MINIPORT_PAUSE` (PASSIVE_LEVEL). The parameters are not read.
    MiniportPause(miniport_adapter_context: NdisHandle,
        pause_parameters: *mut c_void) -> NdisStatus;
}

/// `MINIPORT_RESTART` (PASSIVE_LEVEL). The parameters are not read: its
/// signature is [`MiniportPause`]'s, the parameters' pointer opaque in both.
pub type MiniportRestart = MiniportPause;

c_fn! {
    /// `MINIPORT_OID_REQUEST` (PASSIVE_LEVEL).
    MiniportOidRequest(miniport_adapter_context: NdisHandle,
        oid_request: *mut NdisOidRequest) -> NdisStatus;

    /// `MINIPORT_SEND_NET_BUFFER_LISTS` (IRQL ≤ DISPATCH_LEVEL).
    MiniportSendNetBufferLists(miniport_adapter_context: NdisHandle,
        net_buffer_lists: *mut NetBufferList, port_number: NdisPortNumber, send_flags: u32);

    /// `MINIPORT_RETURN_NET_BUFFER_LISTS` (IRQL ≤ DISPATCH_LEVEL).
    MiniportReturnNetBufferLists(miniport_adapter_context: NdisHandle,
        net_buffer_lists: *mut NetBufferList, return_flags: u32);

    /// `MINIPORT_CANCEL_SEND` (IRQL ≤ DISPATCH_LEVEL).
    MiniportCancelSend(miniport_adapter_context: NdisHandle, cancel_id: *mut c_void);

    /// `MINIPORT_CHECK_FOR_HANG` (PASSIVE_LEVEL).
    MiniportCheckForHang(miniport_adapter_context: NdisHandle) -> Boolean;

    /// `MINIPORT_RESET` (IRQL ≤ DISPATCH_LEVEL).
    MiniportReset(miniport_adapter_context: NdisHandle,
        addressing_reset: *mut Boolean) -> NdisStatus;

    /// `MINIPORT_DEVICE_PNP_EVENT_NOTIFY` (PASSIVE_LEVEL).
    MiniportDevicePnpEventNotify(miniport_adapter_context: NdisHandle,
        net_device_pnp_event: *mut NetDevicePnpEvent);

    /// `MINIPORT_SHUTDOWN` (PASSIVE_LEVEL for power-off, HIGH_LEVEL during a bug
    /// check).
    MiniportShutdown(miniport_adapter_context: NdisHandle, shutdown_action: NdisShutdownAction);

    /// `MINIPORT_CANCEL_OID_REQUEST` (IRQL ≤ DISPATCH_LEVEL).
    MiniportCancelOidRequest(miniport_adapter_context: NdisHandle, request_id: *mut c_void);
}

/// `MINIPORT_DIRECT_OID_REQUEST` (NDIS 6.1+, IRQL ≤ DISPATCH_LEVEL): the
/// signature of [`MiniportOidRequest`].
pub type MiniportDirectOidRequest = MiniportOidRequest;

/// `MINIPORT_CANCEL_DIRECT_OID_REQUEST` (NDIS 6.1+, IRQL ≤ DISPATCH_LEVEL):
/// the signature of [`MiniportCancelOidRequest`].
pub type MiniportCancelDirectOidRequest = MiniportCancelOidRequest;

c_fn! {
    /// `NDIS_IO_WORKITEM_FUNCTION` (PASSIVE_LEVEL): the routine of an NDIS I/O
    /// work item.
    NdisIoWorkItemFunction(work_item_context: *mut c_void, work_item_handle: NdisHandle);
}

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

assert_layouts! {
    layout_ndis_miniport_driver_characteristics:
        NdisMiniportDriverCharacteristics, size 0x98, align 8 {
        header: 0x00, major_ndis_version: 0x04, minor_ndis_version: 0x05,
        major_driver_version: 0x06, minor_driver_version: 0x07, flags: 0x08,
        set_options_handler: 0x10, initialize_handler_ex: 0x18, halt_handler_ex: 0x20,
        unload_handler: 0x28, pause_handler: 0x30, restart_handler: 0x38, oid_request_handler: 0x40,
        send_net_buffer_lists_handler: 0x48, return_net_buffer_lists_handler: 0x50,
        cancel_send_handler: 0x58, check_for_hang_handler_ex: 0x60, reset_handler_ex: 0x68,
        device_pnp_event_notify_handler: 0x70, shutdown_handler_ex: 0x78,
        cancel_oid_request_handler: 0x80, direct_oid_request_handler: 0x88,
        cancel_direct_oid_request_handler: 0x90,
    }
    layout_net_luid: NetLuid, size 0x8, align 8 { value: 0x0 }
    layout_ndis_miniport_init_parameters: NdisMiniportInitParameters, size 0x40, align 8 {
        header: 0x00, flags: 0x04, allocated_resources: 0x08, im_device_instance_context: 0x10,
        miniport_add_device_context: 0x18, if_index: 0x20, net_luid: 0x28,
        default_port_auth_states: 0x30, pci_device_custom_properties: 0x38,
    }
}

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

/// `NDIS_MINIPORT_DRIVER_CHARACTERISTICS_REVISION_2` (NDIS 6.1+).
pub const NDIS_MINIPORT_DRIVER_CHARACTERISTICS_REVISION_2: u8 = 2;
/// `NDIS_SIZEOF_MINIPORT_DRIVER_CHARACTERISTICS_REVISION_2`: through
/// `CancelDirectOidRequestHandler`.
pub const NDIS_SIZEOF_MINIPORT_DRIVER_CHARACTERISTICS_REVISION_2: u16 = 0x98;

assert_ndis_sizeof! {
    NDIS_SIZEOF_MINIPORT_DRIVER_CHARACTERISTICS_REVISION_2 =>
        NdisMiniportDriverCharacteristics { cancel_direct_oid_request_handler: Option<MiniportCancelDirectOidRequest> },
}
