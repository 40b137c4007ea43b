//! Winsock Kernel (WSK): the structures, dispatch tables, constants and
//! function-pointer types of `km/wsk.h` (WDK 10.0.16299), with the parts of
//! the I/O manager's `IRP` and `IO_STACK_LOCATION` (`km/wdm.h`) that a WSK
//! client touches to complete requests. Every offset below was read from
//! those headers for x86-64 and is asserted.
//!
//! Facts kept here, with their source:
//! * Calling convention: `WSKAPI` is `NTAPI` (the system convention, which
//!   on x86-64 is the one Microsoft x64 convention): `extern "system"`.
//! * Dispatch slots the provider always fills are plain function pointers;
//!   the client tables' slots are `Option` because a client may leave one
//!   NULL (an event it never enables).
//! * `WSK_PROVIDER_DISPATCH` has the three `NTDDI_WIN7` address-info slots:
//!   the driver's floor (Windows 10 1809) is past that guard. The
//!   `NTDDI_WIN10_RS2` stream-socket tables are not declared (not used).
//! * `NPI_WSK_INTERFACE_ID` is `extern` data in `wsk.h` (defined in a WDK
//!   static library, not exported by `netio.sys`), so its value is written
//!   here: `{2227E803-8D8B-11D4-ABAD-009027719E09}`.
//! * The `IRP` is declared only as far as a driver that allocates its own
//!   IRPs (`IoAllocateIrp(1, FALSE)`) reads and writes it: `IoStatus` and
//!   `Tail.Overlay.CurrentStackLocation` (the next stack location, where
//!   the inline `IoSetCompletionRoutine` of `wdm.h` writes, is the one
//!   before it). The rest is kept as sized opaque fields so that the size is
//!   exact (0xD0).

use core::ffi::c_void;

use super::{AddressFamily, Guid, Mdl, NtStatus, SockAddr};

// --- Statuses WSK uses that the NDK tables do not ------------------------

/// `STATUS_MORE_PROCESSING_REQUIRED`: returned by a completion routine that
/// keeps the IRP (every WSK client completion routine does).
pub const STATUS_MORE_PROCESSING_REQUIRED: NtStatus = 0xC000_0016_u32.cast_signed();
/// `STATUS_DEVICE_NOT_READY`: `WskCaptureProviderNPI` found no provider yet.
pub const STATUS_DEVICE_NOT_READY: NtStatus = 0xC000_00A3_u32.cast_signed();
/// `STATUS_REQUEST_NOT_ACCEPTED`: an accept event refuses the connection.
pub const STATUS_REQUEST_NOT_ACCEPTED: NtStatus = 0xC000_00D0_u32.cast_signed();
/// `STATUS_CONNECTION_DISCONNECTED`.
pub const STATUS_CONNECTION_DISCONNECTED: NtStatus = 0xC000_020C_u32.cast_signed();
/// `STATUS_CONNECTION_RESET`.
pub const STATUS_CONNECTION_RESET: NtStatus = 0xC000_020D_u32.cast_signed();
/// `STATUS_DATA_NOT_ACCEPTED`: a receive event leaves the data buffered.
pub const STATUS_DATA_NOT_ACCEPTED: NtStatus = 0xC000_021B_u32.cast_signed();
/// `STATUS_NOINTERFACE`: the provider does not support the client's version.
pub const STATUS_NOINTERFACE: NtStatus = 0xC000_02B9_u32.cast_signed();

// --- Sockets API constants (ws2def.h) -------------------------------------

/// `SOCK_STREAM`.
pub const SOCK_STREAM: u16 = 1;
/// `IPPROTO_TCP`.
pub const IPPROTO_TCP: u32 = 6;
/// `SOCK_DGRAM`.
pub const SOCK_DGRAM: u16 = 2;
/// `IPPROTO_UDP`.
pub const IPPROTO_UDP: u32 = 17;
/// `SOL_SOCKET`: the level of socket options.
pub const SOL_SOCKET: u32 = 0xFFFF;
/// `WSK_SO_BASE` (ws2def.h): the base of the WSK socket options.
pub const WSK_SO_BASE: u32 = 0x4000;
/// `SO_WSK_EVENT_CALLBACK` (`WSK_SO_BASE + 2`): enables or disables event
/// callbacks; the input is a [`WskEventCallbackControl`].
pub const SO_WSK_EVENT_CALLBACK: u32 = WSK_SO_BASE + 2;

// --- WSK constants ---------------------------------------------------------

/// `MAKE_WSK_VERSION(1, 0)`: the version the client asks for.
pub const WSK_VERSION_1_0: u16 = 0x0100;
/// `WSK_NO_WAIT`: `WskCaptureProviderNPI` returns at once.
pub const WSK_NO_WAIT: u32 = 0;
/// `WSK_INFINITE_WAIT`.
pub const WSK_INFINITE_WAIT: u32 = 0xFFFF_FFFF;

/// `WSK_FLAG_ABORTIVE`: an abortive disconnect (`WskDisconnect` flag; the
/// disconnect event's flag for a reset).
pub const WSK_FLAG_ABORTIVE: u32 = 0x0000_0001;
/// `WSK_FLAG_RELEASE_ASAP` (receive event).
pub const WSK_FLAG_RELEASE_ASAP: u32 = 0x0000_0002;
/// `WSK_FLAG_ENTIRE_MESSAGE` (receive event).
pub const WSK_FLAG_ENTIRE_MESSAGE: u32 = 0x0000_0004;
/// `WSK_FLAG_AT_DISPATCH_LEVEL`: the event runs at DISPATCH_LEVEL.
pub const WSK_FLAG_AT_DISPATCH_LEVEL: u32 = 0x0000_0008;
/// `WSK_FLAG_NODELAY` (`WskSend`).
pub const WSK_FLAG_NODELAY: u32 = 0x0000_0002;

/// `WSK_FLAG_BASIC_SOCKET`.
pub const WSK_FLAG_BASIC_SOCKET: u32 = 0x0000_0000;
/// `WSK_FLAG_LISTEN_SOCKET`.
pub const WSK_FLAG_LISTEN_SOCKET: u32 = 0x0000_0001;
/// `WSK_FLAG_CONNECTION_SOCKET`.
pub const WSK_FLAG_CONNECTION_SOCKET: u32 = 0x0000_0002;
/// `WSK_FLAG_DATAGRAM_SOCKET`.
pub const WSK_FLAG_DATAGRAM_SOCKET: u32 = 0x0000_0004;

/// `WSK_EVENT_RECEIVE_FROM` (datagram sockets).
pub const WSK_EVENT_RECEIVE_FROM: u32 = 0x0000_0100;
/// `WSK_EVENT_ACCEPT` (listening sockets).
pub const WSK_EVENT_ACCEPT: u32 = 0x0000_0200;
/// `WSK_EVENT_SEND_BACKLOG` (connection and listening sockets).
pub const WSK_EVENT_SEND_BACKLOG: u32 = 0x0000_0010;
/// `WSK_EVENT_RECEIVE` (connection and listening sockets; on a listening
/// socket it is inherited by the accepted ones).
pub const WSK_EVENT_RECEIVE: u32 = 0x0000_0040;
/// `WSK_EVENT_DISCONNECT` (connection and listening sockets).
pub const WSK_EVENT_DISCONNECT: u32 = 0x0000_0080;
/// `WSK_EVENT_DISABLE`: with the flags above, disables them.
pub const WSK_EVENT_DISABLE: u32 = 0x8000_0000;

/// `WSK_CONTROL_SOCKET_TYPE`: a 4-byte C enum.
pub type WskControlSocketType = u32;
/// `WskSetOption`.
pub const WSK_SET_OPTION: WskControlSocketType = 0;
/// `WskGetOption`.
pub const WSK_GET_OPTION: WskControlSocketType = 1;
/// `WskIoctl`.
pub const WSK_IOCTL: WskControlSocketType = 2;

/// `NPI_WSK_INTERFACE_ID`: `{2227E803-8D8B-11D4-ABAD-009027719E09}`.
pub const NPI_WSK_INTERFACE_ID: Guid = Guid::from_u128(0x2227E803_8D8B_11D4_ABAD_009027719E09);

// --- IRP (wdm.h) -------------------------------------------------------------

/// `SL_INVOKE_ON_CANCEL`.
pub const SL_INVOKE_ON_CANCEL: u8 = 0x20;
/// `SL_INVOKE_ON_SUCCESS`.
pub const SL_INVOKE_ON_SUCCESS: u8 = 0x40;
/// `SL_INVOKE_ON_ERROR`.
pub const SL_INVOKE_ON_ERROR: u8 = 0x80;

/// `IO_STATUS_BLOCK`: 0x10 bytes. `Status` shares its 8 bytes with
/// `Pointer`; on x86-64 (little-endian) `Status` is the low 4.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct IoStatusBlock {
    /// `Status`.
    pub status: NtStatus,
    /// The high half of the `Status`/`Pointer` union.
    pub padding_04: u32,
    /// `Information`: for WSK, bytes transferred or the new `PWSK_SOCKET`.
    pub information: usize,
}

c_fn! {
    /// `PIO_COMPLETION_ROUTINE`.
    IoCompletionRoutine(device_object: *mut c_void, irp: *mut Irp,
        context: *mut c_void) -> NtStatus;
}

/// `IO_STACK_LOCATION`: 0x48 bytes, align 8. `Parameters` is a union of
/// four pointer-sized words.
#[repr(C)]
pub struct IoStackLocation {
    /// `MajorFunction`.
    pub major_function: u8,
    /// `MinorFunction`.
    pub minor_function: u8,
    /// `Flags`.
    pub flags: u8,
    /// `Control`: `SL_INVOKE_ON_*`.
    pub control: u8,
    /// Alignment padding before `Parameters`.
    pub padding_04: u32,
    /// `Parameters` (opaque here).
    pub parameters: [usize; 4],
    /// `DeviceObject`.
    pub device_object: *mut c_void,
    /// `FileObject`.
    pub file_object: *mut c_void,
    /// `CompletionRoutine`.
    pub completion_routine: Option<IoCompletionRoutine>,
    /// `Context`.
    pub context: *mut c_void,
}

/// `IRP` on x86-64: 0xD0 bytes, align 8, followed in memory by its
/// `StackCount` stack locations. Only `IoStatus`, `StackCount`,
/// `CurrentLocation` and `Tail.Overlay.CurrentStackLocation` are named.
#[repr(C)]
pub struct Irp {
    /// `Type`, `Size`, `AllocationProcessorNumber`, `Reserved`.
    pub header: [u16; 4],
    /// `MdlAddress`.
    pub mdl_address: *mut Mdl,
    /// `Flags`, then padding.
    pub flags: [u32; 2],
    /// `AssociatedIrp`.
    pub associated_irp: *mut c_void,
    /// `ThreadListEntry` (`LIST_ENTRY`).
    pub thread_list_entry: [usize; 2],
    /// `IoStatus`.
    pub io_status: IoStatusBlock,
    /// `RequestorMode`, `PendingReturned`.
    pub requestor_mode: [u8; 2],
    /// `StackCount`.
    pub stack_count: i8,
    /// `CurrentLocation`: `StackCount + 1` for a new IRP.
    pub current_location: i8,
    /// `Cancel`, `CancelIrql`, `ApcEnvironment`, `AllocationFlags`.
    pub cancel: [u8; 4],
    /// `UserIosb`.
    pub user_iosb: *mut c_void,
    /// `UserEvent`.
    pub user_event: *mut c_void,
    /// `Overlay`.
    pub overlay: [usize; 2],
    /// `CancelRoutine`.
    pub cancel_routine: *mut c_void,
    /// `UserBuffer`.
    pub user_buffer: *mut c_void,
    /// `Tail.Overlay.DriverContext[4]`, `Thread`, `AuxiliaryBuffer`,
    /// `ListEntry`.
    pub tail_overlay: [usize; 8],
    /// `Tail.Overlay.CurrentStackLocation`: one past the next (the caller's)
    /// stack location of a fresh IRP.
    pub current_stack_location: *mut IoStackLocation,
    /// `Tail.Overlay.OriginalFileObject` and the rest of the `Tail` union
    /// (`KAPC`, 0x58 bytes).
    pub tail_rest: [usize; 2],
}

// --- WSK structures ----------------------------------------------------------

/// `WSK_SOCKET`: what the provider returns; `Dispatch` is the provider's
/// table for the socket's type.
#[repr(C)]
pub struct WskSocket {
    /// `Dispatch`: a [`WskProviderListenDispatch`] or
    /// [`WskProviderConnectionDispatch`] by the socket's type.
    pub dispatch: *const c_void,
}

/// `PWSK_CLIENT`: the provider's opaque client object.
pub type WskClientHandle = *mut c_void;

/// `WSK_BUF`: `Length` bytes from `Offset` into the MDL chain `Mdl`
/// (`Offset` lies within the first MDL). 0x18 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WskBuf {
    /// `Mdl`: a locked MDL chain.
    pub mdl: *mut Mdl,
    /// `Offset`.
    pub offset: u32,
    /// Alignment padding before `Length`.
    pub padding_0c: u32,
    /// `Length` (`SIZE_T`).
    pub length: usize,
}

/// `WSK_DATA_INDICATION`: one element of a receive event's list.
#[repr(C)]
pub struct WskDataIndication {
    /// `Next`.
    pub next: *mut WskDataIndication,
    /// `Buffer`.
    pub buffer: WskBuf,
}

/// `WSK_EVENT_CALLBACK_CONTROL`: the input of `SO_WSK_EVENT_CALLBACK`.
#[repr(C)]
pub struct WskEventCallbackControl {
    /// `NpiId`: `&NPI_WSK_INTERFACE_ID`.
    pub npi_id: *const Guid,
    /// `EventMask`: `WSK_EVENT_*`.
    pub event_mask: u32,
    /// Tail padding.
    pub padding_0c: u32,
}

/// `WSK_REGISTRATION`: filled by `WskRegister`, opaque to the client, kept
/// in place until `WskDeregister` returns.
#[repr(C)]
pub struct WskRegistration {
    /// `ReservedRegistrationState`.
    pub reserved_registration_state: u64,
    /// `ReservedRegistrationContext`.
    pub reserved_registration_context: *mut c_void,
    /// `ReservedRegistrationLock` (`KSPIN_LOCK`).
    pub reserved_registration_lock: usize,
}

/// `WSK_CLIENT_NPI`.
#[repr(C)]
pub struct WskClientNpi {
    /// `ClientContext`.
    pub client_context: *mut c_void,
    /// `Dispatch`.
    pub dispatch: *const WskClientDispatch,
}

/// `WSK_PROVIDER_NPI`: what `WskCaptureProviderNPI` fills in.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WskProviderNpi {
    /// `Client`.
    pub client: WskClientHandle,
    /// `Dispatch`.
    pub dispatch: *const WskProviderDispatch,
}

/// Writes the WSK function types, one entry each, parameters in the
/// header's order: `Name(params) => irp;` is a request that completes
/// through its IRP (every typed provider downcall but the two releases): the
/// parameters end with `irp: *mut Irp`, and it returns `NtStatus`
/// (`STATUS_PENDING` until the IRP completes). Any other entry is
/// `c_fn!`'s plain `Name(params) -> Ret;`.
macro_rules! wsk_fn {
    () => {};
    ($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),* $(,)?) => irp; $($rest:tt)*) => {
        c_fn! { $(#[$doc])* $name($($arg: $ty,)* irp: *mut Irp) -> NtStatus; }
        wsk_fn! { $($rest)* }
    };
    ($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?; $($rest:tt)*) => {
        c_fn! { $(#[$doc])* $name($($arg: $ty),*) $(-> $ret)?; }
        wsk_fn! { $($rest)* }
    };
}

// --- Client callbacks ------------------------------------------------------

wsk_fn! {
    /// `PFN_WSK_CLIENT_EVENT`.
    PfnWskClientEvent(client_context: *mut c_void, event_type: u32, information: *mut c_void,
        information_length: usize) -> NtStatus;

    /// `PFN_WSK_ACCEPT_EVENT`.
    PfnWskAcceptEvent(socket_context: *mut c_void, flags: u32, local_address: *mut SockAddr,
        remote_address: *mut SockAddr, accept_socket: *mut WskSocket,
        accept_socket_context: *mut *mut c_void,
        accept_socket_dispatch: *mut *const WskClientConnectionDispatch) -> NtStatus;

    /// `PFN_WSK_INSPECT_EVENT` (conditional accept; not used): returns a
    /// `WSK_INSPECT_ACTION`.
    PfnWskInspectEvent(socket_context: *mut c_void, local_address: *mut SockAddr,
        remote_address: *mut SockAddr, inspect_id: *mut c_void) -> u32;

    /// `PFN_WSK_ABORT_EVENT` (conditional accept; not used).
    PfnWskAbortEvent(socket_context: *mut c_void, inspect_id: *mut c_void) -> NtStatus;

    /// `PFN_WSK_RECEIVE_EVENT`.
    PfnWskReceiveEvent(socket_context: *mut c_void, flags: u32,
        data_indication: *mut WskDataIndication, bytes_indicated: usize,
        bytes_accepted: *mut usize) -> NtStatus;

    /// `PFN_WSK_DISCONNECT_EVENT`.
    PfnWskDisconnectEvent(socket_context: *mut c_void, flags: u32) -> NtStatus;

    /// `PFN_WSK_SEND_BACKLOG_EVENT`.
    PfnWskSendBacklogEvent(socket_context: *mut c_void, ideal_backlog_size: usize) -> NtStatus;
}

/// `WSK_CLIENT_DISPATCH`.
#[repr(C)]
pub struct WskClientDispatch {
    /// `Version`: [`WSK_VERSION_1_0`].
    pub version: u16,
    /// `Reserved`.
    pub reserved: u16,
    /// Alignment padding before the pointer.
    pub padding_04: u32,
    /// `WskClientEvent`.
    pub wsk_client_event: Option<PfnWskClientEvent>,
}

/// `WSK_CLIENT_LISTEN_DISPATCH`.
#[repr(C)]
pub struct WskClientListenDispatch {
    /// `WskAcceptEvent`.
    pub wsk_accept_event: Option<PfnWskAcceptEvent>,
    /// `WskInspectEvent`.
    pub wsk_inspect_event: Option<PfnWskInspectEvent>,
    /// `WskAbortEvent`.
    pub wsk_abort_event: Option<PfnWskAbortEvent>,
}

/// `WSK_CLIENT_CONNECTION_DISPATCH`.
#[repr(C)]
pub struct WskClientConnectionDispatch {
    /// `WskReceiveEvent`.
    pub wsk_receive_event: Option<PfnWskReceiveEvent>,
    /// `WskDisconnectEvent`.
    pub wsk_disconnect_event: Option<PfnWskDisconnectEvent>,
    /// `WskSendBacklogEvent`.
    pub wsk_send_backlog_event: Option<PfnWskSendBacklogEvent>,
}

// --- Provider downcalls ------------------------------------------------------

wsk_fn! {
    /// `PFN_WSK_SOCKET`.
    PfnWskSocket(client: WskClientHandle, address_family: AddressFamily, socket_type: u16,
        protocol: u32, flags: u32, socket_context: *mut c_void, dispatch: *const c_void,
        owning_process: *mut c_void, owning_thread: *mut c_void,
        security_descriptor: *mut c_void) => irp;

    /// `PFN_WSK_SOCKET_CONNECT`.
    PfnWskSocketConnect(client: WskClientHandle, socket_type: u16, protocol: u32,
        local_address: *mut SockAddr, remote_address: *mut SockAddr, flags: u32,
        socket_context: *mut c_void, dispatch: *const WskClientConnectionDispatch,
        owning_process: *mut c_void, owning_thread: *mut c_void,
        security_descriptor: *mut c_void) => irp;

    /// `PFN_WSK_CONTROL_CLIENT`.
    PfnWskControlClient(client: WskClientHandle, control_code: u32, input_size: usize,
        input_buffer: *mut c_void, output_size: usize, output_buffer: *mut c_void,
        output_size_returned: *mut usize) => irp;

    /// `PFN_WSK_GET_ADDRESS_INFO`, `PFN_WSK_FREE_ADDRESS_INFO`,
    /// `PFN_WSK_GET_NAME_INFO`: not called; kept as untyped slots.
    PfnWskUnused();

    /// `PFN_WSK_CONTROL_SOCKET`.
    PfnWskControlSocket(socket: *mut WskSocket, request_type: WskControlSocketType,
        control_code: u32, level: u32, input_size: usize, input_buffer: *mut c_void,
        output_size: usize, output_buffer: *mut c_void, output_size_returned: *mut usize) => irp;

    /// `PFN_WSK_CLOSE_SOCKET`.
    PfnWskCloseSocket(socket: *mut WskSocket) => irp;

    /// `PFN_WSK_BIND`.
    PfnWskBind(socket: *mut WskSocket, local_address: *mut SockAddr, flags: u32) => irp;

    /// `PFN_WSK_CONNECT`.
    PfnWskConnect(socket: *mut WskSocket, remote_address: *mut SockAddr, flags: u32) => irp;

    /// `PFN_WSK_CONNECT_EX`.
    PfnWskConnectEx(socket: *mut WskSocket, remote_address: *mut SockAddr, buffer: *mut WskBuf,
        flags: u32) => irp;

    /// `PFN_WSK_ACCEPT`.
    PfnWskAccept(listen_socket: *mut WskSocket, flags: u32, accept_socket_context: *mut c_void,
        accept_socket_dispatch: *const WskClientConnectionDispatch, local_address: *mut SockAddr,
        remote_address: *mut SockAddr) => irp;

    /// `PFN_WSK_INSPECT_COMPLETE` (not used).
    PfnWskInspectComplete(listen_socket: *mut WskSocket, inspect_id: *mut c_void,
        action: u32) => irp;

    /// `PFN_WSK_GET_LOCAL_ADDRESS` and `PFN_WSK_GET_REMOTE_ADDRESS`.
    PfnWskGetAddress(socket: *mut WskSocket, address: *mut SockAddr) => irp;

    /// `PFN_WSK_SEND` and `PFN_WSK_RECEIVE`.
    PfnWskSendReceive(socket: *mut WskSocket, buffer: *mut WskBuf, flags: u32) => irp;

    /// `PFN_WSK_DISCONNECT`: `buffer` optional.
    PfnWskDisconnect(socket: *mut WskSocket, buffer: *mut WskBuf, flags: u32) => irp;

    /// `PFN_WSK_RELEASE_DATA_INDICATION_LIST`.
    PfnWskRelease(socket: *mut WskSocket, data_indication: *mut WskDataIndication) -> NtStatus;
}

/// `WSK_PROVIDER_DISPATCH` (with the `NTDDI_WIN7` slots).
#[repr(C)]
pub struct WskProviderDispatch {
    /// `Version`.
    pub version: u16,
    /// `Reserved`.
    pub reserved: u16,
    /// Alignment padding before the pointers.
    pub padding_04: u32,
    /// `WskSocket`.
    pub wsk_socket: PfnWskSocket,
    /// `WskSocketConnect`.
    pub wsk_socket_connect: PfnWskSocketConnect,
    /// `WskControlClient`.
    pub wsk_control_client: PfnWskControlClient,
    /// `WskGetAddressInfo`.
    pub wsk_get_address_info: PfnWskUnused,
    /// `WskFreeAddressInfo`.
    pub wsk_free_address_info: PfnWskUnused,
    /// `WskGetNameInfo`.
    pub wsk_get_name_info: PfnWskUnused,
}

/// `WSK_PROVIDER_BASIC_DISPATCH`: the first two slots of every socket
/// table.
#[repr(C)]
pub struct WskProviderBasicDispatch {
    /// `WskControlSocket`.
    pub wsk_control_socket: PfnWskControlSocket,
    /// `WskCloseSocket`.
    pub wsk_close_socket: PfnWskCloseSocket,
}

/// `WSK_PROVIDER_LISTEN_DISPATCH` (the basic table inline, as in C).
#[repr(C)]
pub struct WskProviderListenDispatch {
    /// `Basic`.
    pub basic: WskProviderBasicDispatch,
    /// `WskBind`.
    pub wsk_bind: PfnWskBind,
    /// `WskAccept`.
    pub wsk_accept: PfnWskAccept,
    /// `WskInspectComplete`.
    pub wsk_inspect_complete: PfnWskInspectComplete,
    /// `WskGetLocalAddress`.
    pub wsk_get_local_address: PfnWskGetAddress,
}

/// `WSK_PROVIDER_CONNECTION_DISPATCH` (the basic table inline, as in C).
#[repr(C)]
pub struct WskProviderConnectionDispatch {
    /// `Basic`.
    pub basic: WskProviderBasicDispatch,
    /// `WskBind`.
    pub wsk_bind: PfnWskBind,
    /// `WskConnect`.
    pub wsk_connect: PfnWskConnect,
    /// `WskGetLocalAddress`.
    pub wsk_get_local_address: PfnWskGetAddress,
    /// `WskGetRemoteAddress`.
    pub wsk_get_remote_address: PfnWskGetAddress,
    /// `WskSend`.
    pub wsk_send: PfnWskSendReceive,
    /// `WskReceive`.
    pub wsk_receive: PfnWskSendReceive,
    /// `WskDisconnect`.
    pub wsk_disconnect: PfnWskDisconnect,
    /// `WskRelease`.
    pub wsk_release: PfnWskRelease,
    /// `WskConnectEx`.
    pub wsk_connect_ex: PfnWskConnectEx,
}

// --- Datagram sockets (WSK_FLAG_DATAGRAM_SOCKET) --------------------------------

/// `WSK_DATAGRAM_INDICATION`: one received datagram of a receive-from
/// event's list. 0x38 bytes.
#[repr(C)]
pub struct WskDatagramIndication {
    /// `Next`.
    pub next: *mut WskDatagramIndication,
    /// `Buffer`: the datagram's bytes.
    pub buffer: WskBuf,
    /// `ControlInfo` (`PCMSGHDR`), unused here.
    pub control_info: *mut c_void,
    /// `ControlInfoLength`.
    pub control_info_length: u32,
    /// Alignment padding before `RemoteAddress`.
    pub padding_2c: u32,
    /// `RemoteAddress`: the sender.
    pub remote_address: *mut SockAddr,
}

wsk_fn! {
    /// `PFN_WSK_RECEIVE_FROM_EVENT`: `indication` null when the socket is no
    /// longer usable.
    PfnWskReceiveFromEvent(socket_context: *mut c_void, flags: u32,
        indication: *mut WskDatagramIndication) -> NtStatus;
}

/// `WSK_CLIENT_DATAGRAM_DISPATCH`.
#[repr(C)]
pub struct WskClientDatagramDispatch {
    /// `WskReceiveFromEvent`.
    pub wsk_receive_from_event: Option<PfnWskReceiveFromEvent>,
}

wsk_fn! {
    /// `PFN_WSK_SEND_TO`.
    PfnWskSendTo(socket: *mut WskSocket, buffer: *mut WskBuf, flags: u32,
        remote_address: *mut SockAddr, control_info_length: u32, control_info: *mut c_void) => irp;

    /// `PFN_WSK_RECEIVE_FROM` (not used: data arrives by the event).
    PfnWskReceiveFrom(socket: *mut WskSocket, buffer: *mut WskBuf, flags: u32,
        remote_address: *mut SockAddr, control_length: *mut u32, control_info: *mut c_void,
        control_flags: *mut u32) => irp;

    /// `PFN_WSK_RELEASE_DATAGRAM_INDICATION_LIST`.
    PfnWskReleaseDatagram(socket: *mut WskSocket,
        indication: *mut WskDatagramIndication) -> NtStatus;
}

/// `WSK_PROVIDER_DATAGRAM_DISPATCH` (with the `NTDDI_WIN8`
/// `WskSendMessages` slot, below the driver's floor).
#[repr(C)]
pub struct WskProviderDatagramDispatch {
    /// `Basic`.
    pub basic: WskProviderBasicDispatch,
    /// `WskBind`.
    pub wsk_bind: PfnWskBind,
    /// `WskSendTo`.
    pub wsk_send_to: PfnWskSendTo,
    /// `WskReceiveFrom`.
    pub wsk_receive_from: PfnWskReceiveFrom,
    /// `WskRelease`.
    pub wsk_release: PfnWskReleaseDatagram,
    /// `WskGetLocalAddress`.
    pub wsk_get_local_address: PfnWskGetAddress,
    /// `WskSendMessages` (not used).
    pub wsk_send_messages: PfnWskUnused,
}

// --- Layouts (x86-64) ----------------------------------------------------------

assert_layouts! {
    layout_io_status_block: IoStatusBlock, size 0x10, align 8 { status: 0x00, information: 0x08 }
    layout_io_stack_location: IoStackLocation, size 0x48, align 8 {
        major_function: 0x00, control: 0x03, parameters: 0x08, device_object: 0x28,
        file_object: 0x30, completion_routine: 0x38, context: 0x40,
    }
    layout_irp: Irp, size 0xD0, align 8 {
        mdl_address: 0x08, flags: 0x10, associated_irp: 0x18, thread_list_entry: 0x20,
        io_status: 0x30, requestor_mode: 0x40, stack_count: 0x42, current_location: 0x43,
        cancel: 0x44, user_iosb: 0x48, user_event: 0x50, overlay: 0x58, cancel_routine: 0x68,
        user_buffer: 0x70, tail_overlay: 0x78, current_stack_location: 0xB8, tail_rest: 0xC0,
    }
    layout_wsk_socket: WskSocket, size 0x8, align 8 { dispatch: 0x0 }
    layout_wsk_buf: WskBuf, size 0x18, align 8 { mdl: 0x00, offset: 0x08, length: 0x10 }
    layout_wsk_data_indication: WskDataIndication, size 0x20, align 8 { next: 0x00, buffer: 0x08 }
    layout_wsk_event_callback_control: WskEventCallbackControl, size 0x10, align 8 {
        npi_id: 0x00, event_mask: 0x08,
    }
    layout_wsk_registration: WskRegistration, size 0x18, align 8 {
        reserved_registration_state: 0x00, reserved_registration_context: 0x08,
        reserved_registration_lock: 0x10,
    }
    layout_wsk_client_npi: WskClientNpi, size 0x10, align 8 { client_context: 0x00, dispatch: 0x08 }
    layout_wsk_provider_npi: WskProviderNpi, size 0x10, align 8 { client: 0x00, dispatch: 0x08 }
    layout_wsk_client_dispatch: WskClientDispatch, size 0x10, align 8 {
        version: 0x00, reserved: 0x02, wsk_client_event: 0x08,
    }
    layout_wsk_client_listen_dispatch: WskClientListenDispatch, size 0x18, align 8 {
        wsk_accept_event: 0x00, wsk_inspect_event: 0x08, wsk_abort_event: 0x10,
    }
    layout_wsk_client_connection_dispatch: WskClientConnectionDispatch, size 0x18, align 8 {
        wsk_receive_event: 0x00, wsk_disconnect_event: 0x08, wsk_send_backlog_event: 0x10,
    }
    layout_wsk_provider_dispatch: WskProviderDispatch, size 0x38, align 8 {
        version: 0x00, reserved: 0x02, wsk_socket: 0x08, wsk_socket_connect: 0x10,
        wsk_control_client: 0x18, wsk_get_address_info: 0x20, wsk_free_address_info: 0x28,
        wsk_get_name_info: 0x30,
    }
    layout_wsk_provider_basic_dispatch: WskProviderBasicDispatch, size 0x10, align 8 {
        wsk_control_socket: 0x00, wsk_close_socket: 0x08,
    }
    layout_wsk_provider_listen_dispatch: WskProviderListenDispatch, size 0x30, align 8 {
        basic: 0x00, wsk_bind: 0x10, wsk_accept: 0x18, wsk_inspect_complete: 0x20,
        wsk_get_local_address: 0x28,
    }
    layout_wsk_provider_connection_dispatch: WskProviderConnectionDispatch, size 0x58, align 8 {
        basic: 0x00, wsk_bind: 0x10, wsk_connect: 0x18, wsk_get_local_address: 0x20,
        wsk_get_remote_address: 0x28, wsk_send: 0x30, wsk_receive: 0x38, wsk_disconnect: 0x40,
        wsk_release: 0x48, wsk_connect_ex: 0x50,
    }
    layout_wsk_datagram_indication: WskDatagramIndication, size 0x38, align 8 {
        next: 0x00, buffer: 0x08, control_info: 0x20, control_info_length: 0x28,
        remote_address: 0x30,
    }
    layout_wsk_client_datagram_dispatch: WskClientDatagramDispatch, size 0x8, align 8 {
        wsk_receive_from_event: 0x00,
    }
    layout_wsk_provider_datagram_dispatch: WskProviderDatagramDispatch, size 0x40, align 8 {
        basic: 0x00, wsk_bind: 0x10, wsk_send_to: 0x18, wsk_receive_from: 0x20, wsk_release: 0x28,
        wsk_get_local_address: 0x30, wsk_send_messages: 0x38,
    }
}
