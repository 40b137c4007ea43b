//! Windows only: `DriverEntry` and every `extern "system"` entry point NDIS
//! calls, each a thin shell around the platform-neutral code of
//! [`adapter`](super::adapter), [`oid`](super::oid) and
//! [`attributes`](super::attributes).
//!
//! # Ownership
//!
//! * `DriverEntry` registers the miniport driver; NDIS installs its own
//!   `DriverUnload`, which calls [`unload`], which deregisters.
//! * `MiniportInitializeEx` allocates one [`Context`] in non-paged pool (tag
//!   `SNdk`) and gives its address to NDIS as the adapter context; every
//!   other handler borrows it; `MiniportHaltEx` frees it — after the NDK work
//!   item is idle and the provider has torn everything down — together with
//!   the work item, the provider and the emulated NIC.
//! * The NDIS structures NDIS keeps pointers to (NDK adapter information and
//!   capabilities, power capabilities, the OID list) live in the context or
//!   in statics, so they outlive every use.
//!
//! # IRQL
//!
//! Initialize, halt, pause, restart, set-options, OID requests, PnP
//! notifications, NDK open and close, and the NDK work item run at
//! PASSIVE_LEVEL; sends, returns, cancels, reset and direct OID requests at
//! up to DISPATCH_LEVEL, where they only touch atomics, the short spin locks
//! of the adapter, and (sends) already-locked MDLs. Shutdown may run at
//! HIGH_LEVEL during a bug check and therefore does nothing at all.

use core::ffi::c_void;
use core::ptr::{NonNull, null_mut};

use crate::abi::{AF_UNSPEC, MibNotificationType, MibUnicastIpAddressRow, NetLuid};
use crate::abi::{
    EVENT_NDIS_UNSUPPORTED_CONFIGURATION, NDIS_CONFIGURATION_OBJECT_REVISION_1,
    NDIS_OBJECT_TYPE_CONFIGURATION_OBJECT, NDIS_OBJECT_TYPE_DEFAULT,
    NDIS_SEND_COMPLETE_FLAGS_DISPATCH_LEVEL, NDIS_SEND_FLAGS_DISPATCH_LEVEL,
    NDIS_SIZEOF_CONFIGURATION_OBJECT_REVISION_1, NDIS_SIZEOF_NET_PNP_EVENT_NOTIFICATION_REVISION_1,
    NDIS_STATUS_FAILURE, NDIS_STATUS_PENDING, NDIS_STATUS_RESOURCES, NDIS_STATUS_SUCCESS,
    NET_PNP_EVENT_NOTIFICATION_REVISION_1, NdisConfigurationObject, NdisConfigurationParameter,
    NdisDevicePnpEvent, NdisHaltAction, NdisHandle, NdisMiniportInitParameters, NdisObjectHeader,
    NdisOidRequest, NdisOpenNdkAdapterParameters, NdisParameterType, NdisShutdownAction,
    NdisStatus, NdkAdapter, NetBufferList, NetDevicePnpEvent, NetPnpEvent, NetPnpEventNotification,
    NtStatus, STATUS_INVALID_PARAMETER, UnicodeString,
};
use crate::kernel::log::Level;
use crate::kernel::sync::atomic::{AtomicPtr, Ordering};
use crate::klog;
use crate::rnic::Limits;
use crate::rnic::device::{Device, EngineMode};

use super::adapter::Adapter;
use super::addresses::AddressTracker;
use super::attributes::{self, MiniportHandlers, NdisBlocks};
use super::config::{self, AdapterConfig, MAC_LEN, Peers, RawConfig, keyword};
use super::frames::{FramePath, PathConfig};
use super::ndis_sys as ndis;
use super::netio_sys as netio;
use super::oid::{self, SUPPORTED_OIDS};
use super::rx_ndis::NdisNbls;
use super::state::NdkEvent;
use crate::kernel::mem::try_box;

/// How the emulated NIC runs its engine (see `docs/rnic.md`); deferred work
/// runs in DPCs either way.
const ENGINE_MODE: EngineMode = EngineMode::Inline;

/// The handle `NdisMRegisterMiniportDriver` returned.
static DRIVER_HANDLE: AtomicPtr<c_void> = AtomicPtr::new(null_mut());

/// The `DRIVER_OBJECT`, the log handle of `NdisWriteEventLogEntry`.
static DRIVER_OBJECT: AtomicPtr<c_void> = AtomicPtr::new(null_mut());

/// The handlers registered with NDIS.
const HANDLERS: MiniportHandlers = MiniportHandlers {
    set_options,
    initialize,
    halt,
    unload,
    pause,
    restart,
    oid_request: oid_request::<false>,
    send,
    return_net_buffer_lists,
    cancel_send,
    reset,
    device_pnp_event_notify,
    shutdown,
    cancel_oid_request,
    direct_oid_request: oid_request::<true>,
    cancel_direct_oid_request: cancel_oid_request,
};

/// What the adapter context handle points to.
struct Context {
    adapter: Adapter,
    /// The `NdisMiniportHandle` of `MiniportInitializeEx`.
    miniport_handle: NdisHandle,
    /// The NDIS I/O work item that announces NDK state changes.
    work_item: NdisHandle,
    /// Structures NDIS keeps pointers to.
    blocks: NdisBlocks,
    /// The interface's IP addresses, on the emulated NIC
    /// (`driver::addresses`); the context of the address notification.
    addresses: AddressTracker,
    /// The `NotifyUnicastIpAddressChange` handle (null: not registered).
    notification: AtomicPtr<c_void>,
    /// The NIC's iWARP transport (`None`: WSK registration failed; the NIC
    /// then reaches only the driver's other NICs).
    net: Option<alloc::sync::Arc<crate::kernel::wsk::WskNet>>,
    /// The virtual Ethernet's frame path (`driver::frames`): the VXLAN
    /// port, its receiver and tick (`None`: no peer configured, or it could
    /// not be made; frames are then consumed).
    frames: Option<FramePath>,
    /// The receive NBLs over the port's buffers (also the receiver's
    /// `NblOps`).
    nbls: Option<alloc::sync::Arc<NdisNbls>>,
}

/// Borrows the context behind an adapter context handle.
///
/// # Safety
/// `handle` is null or the pointer `initialize` gave NDIS, and the adapter
/// has not been halted (NDIS calls no handler after `MiniportHaltEx`).
unsafe fn context<'a>(handle: NdisHandle) -> Option<&'a Context> {
    // SAFETY: caller contract: a live `Context` or null.
    unsafe { handle.cast::<Context>().as_ref() }
}

/// The driver's entry point, called once by the I/O manager at
/// PASSIVE_LEVEL: registers the NDIS miniport driver.
///
/// # Safety
/// Called by the kernel with a valid `DRIVER_OBJECT` and registry path.
#[unsafe(no_mangle)]
pub unsafe extern "system" fn DriverEntry(
    driver_object: *mut c_void,
    registry_path: *mut c_void,
) -> NtStatus {
    // First, before anything allocates: pick the pool routines this kernel has.
    crate::kernel::pool::init();
    klog!(
        Level::Info,
        "DriverEntry (softndk {}, NDIS {}.{})",
        env!("CARGO_PKG_VERSION"),
        crate::abi::NDIS_MINIPORT_MAJOR_VERSION,
        crate::abi::NDIS_MINIPORT_MINOR_VERSION
    );
    DRIVER_OBJECT.store(driver_object, Ordering::Release);
    let characteristics = attributes::driver_characteristics(&HANDLERS);
    let mut handle: NdisHandle = null_mut();
    // SAFETY: PASSIVE_LEVEL in DriverEntry; the driver object and registry
    // path are the kernel's; the characteristics are complete and NDIS copies
    // them; `handle` is a valid out-parameter.
    let status = unsafe {
        ndis::NdisMRegisterMiniportDriver(
            driver_object,
            registry_path,
            null_mut(),
            &raw const characteristics,
            &raw mut handle,
        )
    };
    if status < 0 {
        klog!(
            Level::Error,
            "NdisMRegisterMiniportDriver failed: {:#x}",
            status
        );
        return status;
    }
    DRIVER_HANDLE.store(handle, Ordering::Release);
    NDIS_STATUS_SUCCESS
}

/// `MINIPORT_DRIVER_UNLOAD` (PASSIVE_LEVEL): deregisters, then waits for
/// queued DPCs so that no code of the image runs after it is unmapped.
unsafe extern "system" fn unload(_driver_object: *mut c_void) {
    let handle = DRIVER_HANDLE.swap(null_mut(), Ordering::AcqRel);
    if !handle.is_null() {
        // SAFETY: the handle came from NdisMRegisterMiniportDriver; NDIS
        // calls the unload handler once, at PASSIVE_LEVEL, after every adapter
        // has been halted.
        unsafe { ndis::NdisMDeregisterMiniportDriver(handle) };
    }
    crate::kernel::deferred::flush();
    klog!(Level::Info, "unloaded");
}

/// The NDK provider characteristics (rule A10), static so that they outlive
/// the registration whether or not NDIS copies them.
static NDK_PROVIDER_CHARACTERISTICS: crate::abi::NdisNdkProviderCharacteristics =
    attributes::provider_characteristics(open_ndk_adapter, close_ndk_adapter);

/// `MINIPORT_SET_OPTIONS` (PASSIVE_LEVEL): registers the NDK provider
/// characteristics (rule A10).
unsafe extern "system" fn set_options(
    ndis_driver_handle: NdisHandle,
    _driver_context: NdisHandle,
) -> NdisStatus {
    // SAFETY: PASSIVE_LEVEL; the driver handle is NDIS's; the static starts
    // with the NDIS_OBJECT_HEADER that `NDIS_DRIVER_OPTIONAL_HANDLERS` is, and
    // lives as long as the image.
    let status = unsafe {
        ndis::NdisSetOptionalHandlers(
            ndis_driver_handle,
            (&raw const NDK_PROVIDER_CHARACTERISTICS).cast(),
        )
    };
    if status < 0 {
        klog!(
            Level::Error,
            "NdisSetOptionalHandlers (NDK) failed: {:#x}",
            status
        );
    }
    status
}

/// An `NDIS_STRING` over a static UTF-16 keyword.
fn ndis_string(text: &'static [u16]) -> UnicodeString {
    let bytes = u16::try_from(core::mem::size_of_val(text)).unwrap_or(u16::MAX);
    UnicodeString {
        length: bytes,
        maximum_length: bytes,
        padding_04: 0,
        buffer: text.as_ptr(),
    }
}

/// A keyword as a static UTF-16 array.
macro_rules! wide {
    ($text:expr) => {{
        const N: usize = $text.len();
        static WIDE: [u16; N] = $crate::kernel::ascii_utf16::<N>($text);
        &WIDE
    }};
}

/// Reads a keyword as `kind` (`NdisReadConfiguration`): the parameter,
/// owned by the configuration handle until it is closed; `None` when missing
/// or not of that type.
///
/// # Safety
/// `configuration` is an open configuration handle, not closed while the
/// parameter is used; PASSIVE_LEVEL.
unsafe fn read_parameter<'a>(
    configuration: NdisHandle,
    keyword: &'static [u16],
    kind: NdisParameterType,
) -> Option<&'a NdisConfigurationParameter> {
    let name = ndis_string(keyword);
    let mut status: NdisStatus = NDIS_STATUS_FAILURE;
    let mut value: *mut NdisConfigurationParameter = null_mut();
    // SAFETY: caller contract; `name` and the out-parameters are valid for the
    // call.
    unsafe {
        ndis::NdisReadConfiguration(
            &raw mut status,
            &raw mut value,
            configuration,
            &raw const name,
            kind,
        );
    }
    if status < 0 {
        return None;
    }
    // SAFETY: on success NDIS returned a parameter owned by the configuration
    // handle, valid until it is closed (caller contract); null is handled by
    // `as_ref`.
    let parameter = unsafe { value.as_ref() }?;
    (parameter.parameter_type == kind).then_some(parameter)
}

/// Reads an integer keyword; `None` when missing or not an integer.
///
/// # Safety
/// `configuration` is an open configuration handle; PASSIVE_LEVEL.
unsafe fn read_integer(configuration: NdisHandle, keyword: &'static [u16]) -> Option<u32> {
    // SAFETY: caller contract; the value is copied out before it returns.
    let parameter = unsafe { read_parameter(configuration, keyword, NdisParameterType::INTEGER) }?;
    // SAFETY: the type says `IntegerData` is the valid member.
    Some(unsafe { parameter.parameter_data.integer_data })
}

/// Opens the adapter's configuration (its registry keywords); `None`, said
/// in the debug log, when NDIS refuses. The caller closes it with
/// `NdisCloseConfiguration`.
///
/// # Safety
/// `miniport_handle` is the handle of `MiniportInitializeEx`; PASSIVE_LEVEL.
unsafe fn open_configuration(miniport_handle: NdisHandle) -> Option<NdisHandle> {
    let object = NdisConfigurationObject {
        header: NdisObjectHeader {
            type_: NDIS_OBJECT_TYPE_CONFIGURATION_OBJECT,
            revision: NDIS_CONFIGURATION_OBJECT_REVISION_1,
            size: NDIS_SIZEOF_CONFIGURATION_OBJECT_REVISION_1,
        },
        padding_04: 0,
        ndis_handle: miniport_handle,
        flags: 0,
        padding_14: 0,
    };
    let mut configuration: NdisHandle = null_mut();
    // SAFETY: PASSIVE_LEVEL in MiniportInitializeEx; valid object and
    // out-parameter.
    let status =
        unsafe { ndis::NdisOpenConfigurationEx(&raw const object, &raw mut configuration) };
    if status < 0 || configuration.is_null() {
        klog!(
            Level::Warning,
            "NdisOpenConfigurationEx failed: {:#x}",
            status
        );
        return None;
    }
    Some(configuration)
}

/// Reads the adapter's keywords (PASSIVE_LEVEL). Anything unreadable is
/// `None`, which the configuration turns into the documented default.
///
/// # Safety
/// `miniport_handle` is the handle of `MiniportInitializeEx`.
unsafe fn read_config(
    miniport_handle: NdisHandle,
    mac: &mut [u8; 16],
) -> (
    Option<u32>,
    Option<u32>,
    Option<u32>,
    usize,
    Checked,
    config::Faults,
) {
    // SAFETY: the caller's contract.
    let Some(configuration) = (unsafe { open_configuration(miniport_handle) }) else {
        return (None, None, None, 0, [None; 3], config::Faults::Off);
    };
    // SAFETY: `configuration` is open until closed below.
    let network_direct = unsafe { read_integer(configuration, wide!(keyword::NETWORK_DIRECT)) };
    // SAFETY: as above.
    let jumbo = unsafe { read_integer(configuration, wide!(keyword::JUMBO_PACKET)) };
    // SAFETY: as above.
    let roce = unsafe { read_integer(configuration, wide!(keyword::ROCE_FRAME_SIZE)) };
    // SAFETY: as above.
    let checked = unsafe { read_integer(configuration, wide!(keyword::CHECKED)) };
    // SAFETY: as above.
    let checked_stop = unsafe { read_integer(configuration, wide!(keyword::CHECKED_STOP)) };
    // SAFETY: as above.
    let fault_seed = unsafe { read_integer(configuration, wide!(keyword::FAULT_SEED)) };
    // SAFETY: as above.
    let fault_rate = unsafe { read_integer(configuration, wide!(keyword::FAULT_RATE)) };
    // SAFETY: as above.
    let bound = unsafe { read_integer(configuration, wide!(keyword::CHECKED_CALLBACK_US)) };
    // SAFETY: as above; the schedule is parsed before the handle closes.
    let faults = unsafe {
        read_string(configuration, wide!(keyword::FAULT_SCHEDULE), |units| {
            config::fault_plan_utf16(fault_seed, fault_rate, Some(units))
        })
    }
    .unwrap_or_else(|| config::fault_plan(fault_seed, fault_rate, None));
    let mut address: *mut c_void = null_mut();
    let mut length: u32 = 0;
    let mut address_status: NdisStatus = NDIS_STATUS_FAILURE;
    // SAFETY: `configuration` is open; valid out-parameters.
    unsafe {
        ndis::NdisReadNetworkAddress(
            &raw mut address_status,
            &raw mut address,
            &raw mut length,
            configuration,
        );
    }
    let mut mac_len = 0;
    if address_status >= 0 && !address.is_null() {
        let len = (length as usize).min(mac.len());
        // SAFETY: NDIS returned `length` bytes at `address`, owned by the
        // open configuration handle; at most `mac.len()` of them are read.
        let bytes = unsafe { core::slice::from_raw_parts(address.cast::<u8>(), len) };
        if let Some(dst) = mac.get_mut(..len) {
            dst.copy_from_slice(bytes);
            mac_len = length as usize;
        }
    }
    // SAFETY: opened above, closed once; nothing read from it afterwards.
    unsafe { ndis::NdisCloseConfiguration(configuration) };
    (
        network_direct,
        jumbo,
        roce,
        mac_len,
        [checked, checked_stop, bound],
        faults,
    )
}

/// Checked mode and fault injection are per driver instance: the adapter
/// initialised last decides them (docs/debugging.md).
fn install_debugging(
    config: &AdapterConfig,
    bound: Option<u32>,
    faults: &crate::driver::config::Faults,
) {
    crate::provider::checked::set_mode(config.checked);
    let bound = crate::driver::config::checked_callback_bound(bound);
    crate::provider::checked::set_callback_bound(u64::from(bound));
    install_faults(faults);
}

/// Installs the fault plan the keywords ask for (or none), and says in
/// the debug log when their values were refused.
fn install_faults(faults: &crate::driver::config::Faults) {
    use crate::driver::config::Faults;
    match faults {
        Faults::Off => crate::rnic::fault::install(None),
        Faults::On(plan) => crate::rnic::fault::install(Some(plan)),
        Faults::Invalid => {
            crate::rnic::fault::install(None);
            klog!(
                Level::Warning,
                "SoftNdkFaultRate or SoftNdkFaultSchedule out of range: fault injection off"
            );
        }
    }
}

/// `SoftNdkChecked`, `SoftNdkCheckedStop` and `SoftNdkCheckedCallbackUs`
/// as read (the fault keywords come back as the plan they ask for).
type Checked = [Option<u32>; 3];

/// Frees a context that `initialize` allocated, with its work item.
///
/// # Safety
/// `context` came from `Box::into_raw` in `initialize`, the work item is not
/// queued or running, and NDIS will not use the context again.
unsafe fn destroy(context: *mut Context) {
    // SAFETY: caller contract: a live context from `Box::into_raw`.
    let work_item = unsafe { (*context).work_item };
    if !work_item.is_null() {
        // SAFETY: allocated by NdisAllocateIoWorkItem; neither queued nor
        // running (caller contract).
        unsafe { ndis::NdisFreeIoWorkItem(work_item) };
    }
    // SAFETY: caller contract; reclaimed exactly once.
    drop(unsafe { alloc::boxed::Box::from_raw(context) });
}

/// Sets one adapter attribute structure.
///
/// # Safety
/// `attributes` points to a complete attribute structure (one member of the
/// `NDIS_MINIPORT_ADAPTER_ATTRIBUTES` union); PASSIVE_LEVEL in initialize.
unsafe fn set_attributes<T>(miniport_handle: NdisHandle, attributes: &T) -> NdisStatus {
    // SAFETY: caller contract; NDIS reads `Header.Size` bytes during the call.
    unsafe {
        ndis::NdisMSetMiniportAttributes(miniport_handle, core::ptr::from_ref(attributes).cast())
    }
}

/// `MINIPORT_INITIALIZE` (PASSIVE_LEVEL): reads the configuration, creates
/// the emulated NIC and its provider, and sets the registration, general and
/// NDK attributes (rule A11), the last even while NDK is disabled.
unsafe extern "system" fn initialize(
    miniport_handle: NdisHandle,
    _driver_context: NdisHandle,
    init_parameters: *mut NdisMiniportInitParameters,
) -> NdisStatus {
    // SAFETY: NDIS passes valid parameters or (never, but handled) null.
    let luid = unsafe { init_parameters.as_ref() }
        .map_or(NetLuid::default(), |parameters| parameters.net_luid);
    let luid_index = luid.net_luid_index();
    let mut mac = [0_u8; 16];
    // SAFETY: the miniport handle of this call.
    let (
        network_direct,
        jumbo_packet,
        roce_frame_size,
        mac_len,
        [checked, checked_stop, bound],
        faults,
    ) = unsafe { read_config(miniport_handle, &mut mac) };
    let raw = RawConfig {
        network_direct,
        jumbo_packet,
        roce_frame_size,
        network_address: mac.get(..mac_len),
        checked,
        checked_stop,
    };
    let config = AdapterConfig::from_raw(&raw, luid_index);
    install_debugging(&config, bound, &faults);
    let Ok(device) = Device::new(Limits::DEFAULT, ENGINE_MODE) else {
        return NDIS_STATUS_RESOURCES;
    };
    // WSK registration never waits for WSK (docs/kernel.md).
    let net = super::transport::kernel_net();
    let wire = net
        .clone()
        .map(|net| net as alloc::sync::Arc<dyn crate::kernel::tcp::Net>);
    let provider = match crate::provider::ndis::factory_on(&device, wire) {
        Ok(provider) => provider,
        Err(status) => return status,
    };
    let Ok(addresses) = AddressTracker::new(luid, &device) else {
        return NDIS_STATUS_RESOURCES;
    };
    let info = provider.adapter_info();
    let missing = provider.missing_counters();
    // SAFETY: IRQL <= DISPATCH_LEVEL; the miniport handle is valid.
    let work_item = unsafe { ndis::NdisAllocateIoWorkItem(miniport_handle) };
    if work_item.is_null() {
        return NDIS_STATUS_RESOURCES;
    }
    let mtu = config.mtu();
    let adapter = Adapter::new(config, config::generated_mac(luid_index), device, provider);
    // SAFETY: the miniport handle of this call, PASSIVE_LEVEL.
    let (frames, nbls) = unsafe { make_frame_path(miniport_handle, mtu, net.as_ref()) };
    if let Some(frames) = &frames {
        adapter.attach_ether(alloc::sync::Arc::clone(frames.port()));
    }
    let Some(context) = try_box(Context {
        adapter,
        miniport_handle,
        work_item,
        blocks: NdisBlocks::empty(),
        addresses,
        notification: AtomicPtr::new(null_mut()),
        net,
        frames,
        nbls,
    }) else {
        // SAFETY: allocated above, never queued.
        unsafe { ndis::NdisFreeIoWorkItem(work_item) };
        return NDIS_STATUS_RESOURCES;
    };
    let context = alloc::boxed::Box::into_raw(context);
    // SAFETY: `context` is the allocation just made; nothing else refers to
    // it yet, so this is the only reference. Its blocks are filled in place,
    // where they stay until halt.
    let ctx = unsafe { &mut *context };
    ctx.blocks
        .fill(ctx.adapter.device().limits(), info, missing);
    let status = set_all_attributes(ctx, context.cast());
    if status < 0 {
        klog!(
            Level::Error,
            "NdisMSetMiniportAttributes failed: {:#x}",
            status
        );
        // SAFETY: from `Box::into_raw` above; the work item was never queued
        // and NDIS does not keep a context whose initialisation failed.
        unsafe { destroy(context) };
        return status;
    }
    log_roce_frame_size(ctx.adapter.config());
    // SAFETY: the context from `Box::into_raw` above; from here on it is
    // only shared: the notification callback may run on another thread.
    let ctx = unsafe { &*context };
    // SAFETY: PASSIVE_LEVEL; the context lives until halt, which cancels the
    // registration before it frees the context.
    unsafe { start_tracking(ctx) };
    // The frame path runs from now on: the port starts now if WSK is up,
    // else on a later tick; the link is indicated once it is bound.
    if let Some(frames) = &ctx.frames {
        frames.go();
    }
    klog!(
        Level::Info,
        "adapter initialised: NDK {}, MAC {:02x?}{}",
        if ctx.adapter.ndk().is_enabled() {
            "enabled"
        } else {
            "disabled"
        },
        ctx.adapter.config().mac,
        if ctx.adapter.config().mac_from_registry {
            " (NetworkAddress)"
        } else {
            ""
        }
    );
    NDIS_STATUS_SUCCESS
}

/// Starts learning the interface's addresses (PASSIVE_LEVEL, end of
/// initialize): registers for changes first, then reads the table, so that
/// nothing falls between the two (`driver::addresses` orders the overlap).
/// On failure the interface has no address: `Listen`, `Connect` and
/// `CreateSharedEndpoint` fail with `STATUS_INVALID_ADDRESS`.
///
/// # Safety
/// PASSIVE_LEVEL; `ctx` lives until `stop_tracking` has returned.
unsafe fn start_tracking(ctx: &Context) {
    let mut handle = null_mut();
    let tracker = core::ptr::from_ref(&ctx.addresses).cast_mut().cast();
    // SAFETY: PASSIVE_LEVEL; the tracker outlives the registration (halt
    // cancels it first); the out-pointer is ours.
    let status = unsafe {
        netio::NotifyUnicastIpAddressChange(AF_UNSPEC, address_changed, tracker, 0, &raw mut handle)
    };
    if status < 0 {
        klog!(
            Level::Error,
            "NotifyUnicastIpAddressChange failed: {:#x}",
            status
        );
        return;
    }
    ctx.notification.store(handle, Ordering::Release);
    let Some(ticket) = ctx.addresses.begin() else {
        return;
    };
    let mut table = null_mut();
    // SAFETY: PASSIVE_LEVEL; the out-pointer is ours.
    let status = unsafe { netio::GetUnicastIpAddressTable(AF_UNSPEC, &raw mut table) };
    // SAFETY: null, or on success the table the call allocated.
    let rows: &[MibUnicastIpAddressRow] = match unsafe { table.as_ref() } {
        // SAFETY: a table of `NumEntries` rows from its `Table` field, valid
        // until `FreeMibTable`.
        Some(t) if status >= 0 => unsafe {
            core::slice::from_raw_parts(t.table.as_ptr(), t.num_entries as usize)
        },
        _ => &[],
    };
    if status < 0 {
        klog!(
            Level::Error,
            "GetUnicastIpAddressTable failed: {:#x}",
            status
        );
    }
    ctx.addresses.load(ticket, rows);
    if !table.is_null() {
        // SAFETY: the table the call above allocated, no longer used.
        unsafe { netio::FreeMibTable(table.cast()) };
    }
}

/// Stops learning addresses (PASSIVE_LEVEL, halt): cancels the
/// notification, which returns once no callback runs, then takes every
/// address off the device.
///
/// # Safety
/// PASSIVE_LEVEL, not from the notification callback.
unsafe fn stop_tracking(ctx: &Context) {
    let handle = ctx.notification.swap(null_mut(), Ordering::AcqRel);
    if !handle.is_null() {
        // SAFETY: the registration's handle, cancelled once (swapped out).
        let status = unsafe { netio::CancelMibChangeNotify2(handle) };
        if status < 0 {
            klog!(Level::Error, "CancelMibChangeNotify2 failed: {:#x}", status);
        }
    }
    ctx.addresses.close();
}

/// `PUNICAST_IPADDRESS_CHANGE_CALLBACK` (PASSIVE_LEVEL): one address of
/// some interface changed; only the row's key is relied on.
unsafe extern "system" fn address_changed(
    caller_context: *mut c_void,
    row: *mut MibUnicastIpAddressRow,
    notification_type: MibNotificationType,
) {
    // SAFETY: the tracker of a live context: halt cancels the registration,
    // which waits for running callbacks, before it frees the context.
    let Some(tracker) = (unsafe { caller_context.cast::<AddressTracker>().as_ref() }) else {
        return;
    };
    // SAFETY: the stack's row, valid for the call, or null.
    let row = unsafe { row.as_ref() };
    tracker.notify(notification_type, row, &mut |current| {
        // SAFETY: PASSIVE_LEVEL; a row of ours with its key set.
        unsafe { netio::GetUnicastIpAddressEntry(current) }
    });
}

/// The three `NdisMSetMiniportAttributes` calls of initialisation.
fn set_all_attributes(ctx: &mut Context, handle_for_ndis: NdisHandle) -> NdisStatus {
    let registration = attributes::registration_attributes(handle_for_ndis);
    // SAFETY: a complete registration attributes structure, PASSIVE_LEVEL.
    let status = unsafe { set_attributes(ctx.miniport_handle, &registration) };
    if status < 0 {
        return status;
    }
    let mut general = attributes::general_attributes(
        ctx.adapter.config(),
        &ctx.adapter.permanent_mac(),
        &SUPPORTED_OIDS,
        &raw const ctx.blocks.pm,
    );
    if ctx.frames.is_some() {
        // The port's link is down until its socket is bound; the frame
        // path indicates it then (`Receiver::new(told_up: false)`).
        general.media_connect_state = crate::abi::NdisMediaConnectState::DISCONNECTED;
    }
    // SAFETY: a complete general attributes structure whose pointers (the
    // static OID list, the power capabilities in the context) outlive the
    // adapter.
    let status = unsafe { set_attributes(ctx.miniport_handle, &general) };
    if status < 0 {
        return status;
    }
    let ndk = attributes::ndk_attributes(
        ctx.adapter.ndk().is_enabled(),
        &raw mut ctx.blocks.ndk_capabilities,
    );
    // SAFETY: a complete NDK attributes structure whose capabilities (and
    // their adapter information) live in the context until halt.
    unsafe { set_attributes(ctx.miniport_handle, &ndk) }
}

/// Rule A24: a system event when the operational RoCE frame size differs
/// from the configured one (netevent.dll message
/// `EVENT_NDIS_UNSUPPORTED_CONFIGURATION`, data: configured, operational).
fn log_roce_frame_size(config: &AdapterConfig) {
    let size = config.roce_frame_size;
    if !size.must_log() {
        return;
    }
    klog!(
        Level::Warning,
        "*NetworkDirectRoCEFrameSize {} not usable with *JumboPacket {}: using {}",
        size.configured,
        config.jumbo_packet,
        size.operational
    );
    let mut data = [size.configured, size.operational];
    let driver_object = DRIVER_OBJECT.load(Ordering::Acquire);
    if driver_object.is_null() {
        return;
    }
    // SAFETY: PASSIVE_LEVEL; the driver object is the kernel's; `data` is 8
    // bytes valid for the call, which copies it.
    let status = unsafe {
        ndis::NdisWriteEventLogEntry(
            driver_object,
            EVENT_NDIS_UNSUPPORTED_CONFIGURATION,
            0,
            0,
            null_mut(),
            8,
            data.as_mut_ptr().cast(),
        )
    };
    if status < 0 {
        klog!(
            Level::Warning,
            "NdisWriteEventLogEntry failed: {:#x}",
            status
        );
    }
}

/// `MINIPORT_HALT` (PASSIVE_LEVEL): stops NDK announcements, waits until the
/// work item is idle, lets the provider tear down every NDK object, and
/// frees the context, the work item, the provider and the emulated NIC.
unsafe extern "system" fn halt(adapter_context: NdisHandle, _action: NdisHaltAction) {
    let context_ptr = adapter_context.cast::<Context>();
    // SAFETY: the context of this adapter; NDIS calls halt once, after which
    // no other handler runs.
    let Some(ctx) = (unsafe { context(adapter_context) }) else {
        return;
    };
    // SAFETY: PASSIVE_LEVEL, not from the callback.
    unsafe { stop_tracking(ctx) };
    if !ctx.adapter.begin_halt() {
        while !ctx.adapter.ndk().worker_idle() {
            // PASSIVE_LEVEL in MiniportHaltEx: wait 1 ms at a time.
            crate::kernel::time::sleep_passive_100ns(10_000);
        }
    }
    ctx.adapter.finish_halt();
    // SAFETY: PASSIVE_LEVEL in halt, before the transport's (the port's
    // sockets are on the same WSK client).
    unsafe { halt_frames(ctx) };
    if let Some(net) = &ctx.net
        && !super::transport::halt(net)
    {
        klog!(Level::Error, "WSK sockets still open after halt's wait");
    }
    klog!(Level::Info, "adapter halted");
    // SAFETY: the context from `initialize`; the work item is idle (waited
    // for above) and NDIS will not call this adapter again.
    unsafe { destroy(context_ptr) };
}

/// `MINIPORT_PAUSE` (PASSIVE_LEVEL): every send completes inside the send
/// handler; receives stop being indicated. With receive NBLs still up the
/// stack the pause pends (`NDIS_STATUS_PENDING`) and the last
/// `MiniportReturnNetBufferLists` completes it (`NdisMPauseComplete`).
unsafe extern "system" fn pause(
    adapter_context: NdisHandle,
    _parameters: *mut c_void,
) -> NdisStatus {
    // SAFETY: the context of this adapter, live until halt.
    if let Some(ctx) = unsafe { context(adapter_context) } {
        ctx.adapter.pause();
        if let Some(frames) = &ctx.frames
            && !frames.receiver().pause()
        {
            return NDIS_STATUS_PENDING;
        }
    }
    NDIS_STATUS_SUCCESS
}

/// `MINIPORT_RESTART` (PASSIVE_LEVEL).
unsafe extern "system" fn restart(
    adapter_context: NdisHandle,
    _parameters: *mut c_void,
) -> NdisStatus {
    // SAFETY: the context of this adapter, live until halt.
    if let Some(ctx) = unsafe { context(adapter_context) } {
        ctx.adapter.restart();
        if let Some(frames) = &ctx.frames {
            frames.receiver().restart();
        }
    }
    NDIS_STATUS_SUCCESS
}

/// `MINIPORT_OID_REQUEST` (PASSIVE_LEVEL, `DIRECT` false) and
/// `MINIPORT_DIRECT_OID_REQUEST` (IRQL <= DISPATCH_LEVEL, `DIRECT` true:
/// `OID_NDK_STATISTICS`, rule A16): answers the request (never pends), then
/// queues the NDK work item if the NDK state changed.
unsafe extern "system" fn oid_request<const DIRECT: bool>(
    adapter_context: NdisHandle,
    request: *mut NdisOidRequest,
) -> NdisStatus {
    // SAFETY: the context of this adapter, live until halt.
    let Some(ctx) = (unsafe { context(adapter_context) }) else {
        return NDIS_STATUS_FAILURE;
    };
    // SAFETY: NDIS's request, ours until we return (we never pend).
    let outcome = unsafe { oid::handle_ndis_request(&ctx.adapter, request, DIRECT) };
    if outcome.queue_ndk_work {
        // Rule A14: the PnP event goes out from the work item, never from
        // here. SAFETY: the work item lives until halt, which waits for it to
        // be idle; the context outlives it for the same reason.
        unsafe {
            ndis::NdisQueueIoWorkItem(
                ctx.work_item,
                ndk_work_item,
                core::ptr::from_ref(ctx).cast_mut().cast(),
            );
        }
    }
    outcome.status
}

/// `MINIPORT_CANCEL_OID_REQUEST` and `MINIPORT_CANCEL_DIRECT_OID_REQUEST`:
/// nothing ever pends.
unsafe extern "system" fn cancel_oid_request(
    _adapter_context: NdisHandle,
    _request_id: *mut c_void,
) {
}

/// The NDIS I/O work item (PASSIVE_LEVEL): announces NDK state changes with
/// `NdisMNetPnPEvent` (rules A14, A15).
unsafe extern "system" fn ndk_work_item(work_item_context: *mut c_void, _work_item: NdisHandle) {
    // SAFETY: queued with the context pointer; halt frees the context only
    // once this routine has reported the worker idle, which is its last
    // access to the context.
    let Some(ctx) = (unsafe { context(work_item_context) }) else {
        return;
    };
    let handle = ctx.miniport_handle;
    ctx.adapter
        .ndk()
        .run_announcements(ctx.adapter.provider(), &mut |event| announce(handle, event));
}

/// One `NetEventNDKEnable` / `NetEventNDKDisable` (PASSIVE_LEVEL, from the
/// work item). The disable stays pending until every `NDK_ADAPTER` is closed.
fn announce(miniport_handle: NdisHandle, event: NdkEvent) -> NdisStatus {
    let notification = NetPnpEventNotification {
        header: NdisObjectHeader {
            type_: NDIS_OBJECT_TYPE_DEFAULT,
            revision: NET_PNP_EVENT_NOTIFICATION_REVISION_1,
            size: NDIS_SIZEOF_NET_PNP_EVENT_NOTIFICATION_REVISION_1,
        },
        port_number: 0,
        net_pnp_event: NetPnpEvent {
            net_event: event.code(),
            padding_04: 0,
            buffer: null_mut(),
            buffer_length: 0,
            padding_14: 0,
            ndis_reserved: [0; 4],
            transport_reserved: [0; 4],
            tdi_reserved: [0; 4],
            tdi_client_reserved: [0; 4],
        },
        flags: 0,
        switch_id: 0,
        vport_id: 0,
        padding_ac: 0,
    };
    klog!(Level::Info, "announcing {:?}", event);
    // SAFETY: PASSIVE_LEVEL in the work item, not the OID context; the
    // notification is complete and lives for the call.
    let status = unsafe { ndis::NdisMNetPnPEvent(miniport_handle, &raw const notification) };
    if status < 0 {
        klog!(
            Level::Error,
            "NdisMNetPnPEvent({:?}) failed: {:#x}",
            event,
            status
        );
    }
    status
}

/// `OPEN_NDK_ADAPTER_HANDLER` (PASSIVE_LEVEL): rules A1–A6.
unsafe extern "system" fn open_ndk_adapter(
    adapter_context: NdisHandle,
    parameters: *const NdisOpenNdkAdapterParameters,
    out_adapter: *mut *mut NdkAdapter,
) -> NdisStatus {
    // SAFETY: the context of this adapter, live until halt.
    let Some(ctx) = (unsafe { context(adapter_context) }) else {
        return NDIS_STATUS_FAILURE;
    };
    if parameters.is_null() || out_adapter.is_null() {
        return STATUS_INVALID_PARAMETER;
    }
    // SAFETY: NDIS passes valid parameters; only `Version`, present in every
    // NDIS version of the structure, is read.
    let requested = unsafe { (*parameters).version };
    let (status, adapter) = match ctx.adapter.open_ndk_adapter(requested) {
        Ok(adapter) => (NDIS_STATUS_SUCCESS, adapter.as_ptr()),
        Err(status) => (status, null_mut()),
    };
    // SAFETY: NDIS's valid out-parameter.
    unsafe { out_adapter.write(adapter) };
    status
}

/// `CLOSE_NDK_ADAPTER_HANDLER` (PASSIVE_LEVEL): returns when no callback of
/// the adapter's objects runs (L27).
unsafe extern "system" fn close_ndk_adapter(adapter_context: NdisHandle, adapter: *mut NdkAdapter) {
    // SAFETY: the context of this adapter, live until halt.
    let Some(ctx) = (unsafe { context(adapter_context) }) else {
        return;
    };
    if let Some(adapter) = NonNull::new(adapter) {
        ctx.adapter.close_ndk_adapter(adapter);
    }
}

/// The destination address of a frame: the first six bytes of its data.
///
/// # Safety
/// `nb` is a `NET_BUFFER` of a send in progress (its MDLs are locked).
unsafe fn destination(nb: *const crate::abi::NetBuffer) -> Option<[u8; MAC_LEN]> {
    // SAFETY: caller contract; plain field reads.
    let mdl = NonNull::new(unsafe { (*nb).current_mdl })?;
    // SAFETY: as above.
    let offset = unsafe { (*nb).current_mdl_offset } as usize;
    let mut address = [0_u8; MAC_LEN];
    // SAFETY: the NET_BUFFER's MDL chain describes locked memory NDIS does not
    // change while the send is ours.
    let copied = unsafe { crate::kernel::mdl::copy_from_chain(mdl, offset, &mut address) }.ok()?;
    (copied == MAC_LEN).then_some(address)
}

/// Copies the `length`-byte frame of `nb` into `buf` (the virtual
/// Ethernet's scratch buffer); `None` when it does not fit or cannot be read.
///
/// # Safety
/// `nb` is a `NET_BUFFER` of a send in progress (its MDLs are locked).
unsafe fn copy_frame(
    nb: *const crate::abi::NetBuffer,
    length: u64,
    buf: &mut [u8],
) -> Option<usize> {
    let length = usize::try_from(length).ok()?;
    let out = buf.get_mut(..length)?;
    // SAFETY: caller contract; plain field reads.
    let mdl = NonNull::new(unsafe { (*nb).current_mdl })?;
    // SAFETY: as above.
    let offset = unsafe { (*nb).current_mdl_offset } as usize;
    // SAFETY: the NET_BUFFER's MDL chain describes locked memory NDIS does not
    // change while the send is ours.
    let copied = unsafe { crate::kernel::mdl::copy_from_chain(mdl, offset, out) }.ok()?;
    (copied == length).then_some(length)
}

/// `MINIPORT_SEND_NET_BUFFER_LISTS` (IRQL <= DISPATCH_LEVEL): each frame goes
/// to `Adapter::transmit_frame` — out on the virtual Ethernet's port when
/// one is attached (copied, so the NBL can be completed at once), else
/// consumed by the wire (counted as sent). Nothing is looped back: NDIS
/// loops frames to local protocols itself (`NDIS_MAC_OPTION_NO_LOOPBACK`).
/// Every NBL is completed before returning, with `NDIS_STATUS_PAUSED` while
/// paused and otherwise the status of its worst frame.
unsafe extern "system" fn send(
    adapter_context: NdisHandle,
    net_buffer_lists: *mut NetBufferList,
    _port_number: u32,
    send_flags: u32,
) {
    // SAFETY: the context of this adapter, live until halt.
    let Some(ctx) = (unsafe { context(adapter_context) }) else {
        return;
    };
    let mut nbl = net_buffer_lists;
    while !nbl.is_null() {
        let mut status = ctx.adapter.send_status();
        if status >= 0 {
            // SAFETY: NDIS hands us the chain until we complete it; each NBL
            // is valid and ours.
            let mut nb = unsafe { (*nbl).first_net_buffer };
            while !nb.is_null() {
                // SAFETY: the NB belongs to an NBL we own. `DataLength` is the
                // low 32 bits of the field (a ULONG in a union with a SIZE_T).
                let length = unsafe { (*nb).data_length } & u64::from(u32::MAX);
                // SAFETY: as above; its MDLs are locked for the send.
                let destination = unsafe { destination(nb) };
                let copy = |buf: &mut [u8]| {
                    // SAFETY: as above: the frame is copied out of its locked
                    // MDL chain before `transmit_frame` returns.
                    unsafe { copy_frame(nb, length, buf) }
                };
                let outcome = ctx.adapter.transmit_frame(destination, length, copy);
                if outcome < 0 {
                    status = outcome;
                }
                // SAFETY: as above.
                nb = unsafe { (*nb).next };
            }
        }
        // SAFETY: as above.
        unsafe { (*nbl).status = status };
        // SAFETY: as above.
        nbl = unsafe { (*nbl).next };
    }
    let complete_flags = if send_flags & NDIS_SEND_FLAGS_DISPATCH_LEVEL != 0 {
        NDIS_SEND_COMPLETE_FLAGS_DISPATCH_LEVEL
    } else {
        0
    };
    // SAFETY: the chain NDIS gave us, each Status set; after this call the
    // NBLs are NDIS's again and are not touched.
    unsafe {
        ndis::NdisMSendNetBufferListsComplete(
            ctx.miniport_handle,
            net_buffer_lists,
            complete_flags,
        );
    }
}

/// The longest chain of NBLs a return walks (NDIS returns at most the
/// adapter's receive NBLs; a longer chain is corrupt).
const RETURN_LIMIT: usize = 4 * super::ether::RX_BUFFERS;

/// `MINIPORT_RETURN_NET_BUFFER_LISTS` (IRQL <= DISPATCH_LEVEL): each NBL's
/// receive buffer goes back to the port (`Receiver::returned`); the last
/// return of a pending pause completes it.
unsafe extern "system" fn return_net_buffer_lists(
    adapter_context: NdisHandle,
    net_buffer_lists: *mut NetBufferList,
    _return_flags: u32,
) {
    // SAFETY: the context of this adapter, live until halt.
    let Some(ctx) = (unsafe { context(adapter_context) }) else {
        return;
    };
    let (Some(frames), Some(table)) = (&ctx.frames, &ctx.nbls) else {
        return;
    };
    let mut nbl = net_buffer_lists;
    for _ in 0..RETURN_LIMIT {
        if nbl.is_null() {
            break;
        }
        // SAFETY: NDIS returns the chain to us: each NBL is ours again.
        // `Next` is read and cleared before the buffer is given back (from
        // then on the NBL may be indicated again on another processor).
        let next = unsafe { (*nbl).next };
        // SAFETY: as above.
        unsafe { (*nbl).next = null_mut() };
        // SAFETY: an NBL of the returned chain.
        if let Some(index) = unsafe { table.index_of(nbl) } {
            frames.receiver().returned(index);
        }
        nbl = next;
    }
}

/// `MINIPORT_CANCEL_SEND`: sends are never queued.
unsafe extern "system" fn cancel_send(_adapter_context: NdisHandle, _cancel_id: *mut c_void) {}

/// `MINIPORT_RESET` (IRQL <= DISPATCH_LEVEL): nothing to reset; addressing
/// (filter, lookahead, multicast list) is kept.
unsafe extern "system" fn reset(
    _adapter_context: NdisHandle,
    addressing_reset: *mut crate::abi::Boolean,
) -> NdisStatus {
    if !addressing_reset.is_null() {
        // SAFETY: NDIS's valid out-parameter.
        unsafe { addressing_reset.write(crate::abi::FALSE) };
    }
    NDIS_STATUS_SUCCESS
}

/// `MINIPORT_DEVICE_PNP_EVENT_NOTIFY` (PASSIVE_LEVEL): logged; a virtual
/// adapter has no hardware to stop touching.
unsafe extern "system" fn device_pnp_event_notify(
    _adapter_context: NdisHandle,
    event: *mut NetDevicePnpEvent,
) {
    // SAFETY: NDIS's valid event, or null.
    if let Some(event) = unsafe { event.as_ref() } {
        let code = event.device_pnp_event;
        if code == NdisDevicePnpEvent::SURPRISE_REMOVED {
            klog!(Level::Warning, "surprise removal");
        } else {
            klog!(Level::Trace, "device PnP event {}", code.0);
        }
    }
}

/// `MINIPORT_SHUTDOWN`: may run at HIGH_LEVEL during a bug check, so it
/// touches nothing; there is no hardware to quiesce.
unsafe extern "system" fn shutdown(_adapter_context: NdisHandle, _action: NdisShutdownAction) {}

/// Reads `SoftNdkVni` (integer) and `SoftNdkPeers` (string), PASSIVE_LEVEL.
/// Unreadable: `None` / no peer.
///
/// # Safety
/// `miniport_handle` is the handle of `MiniportInitializeEx`.
unsafe fn read_underlay(miniport_handle: NdisHandle) -> (Option<u32>, Peers) {
    // SAFETY: the caller's contract.
    let Some(configuration) = (unsafe { open_configuration(miniport_handle) }) else {
        return (None, Peers::EMPTY);
    };
    // SAFETY: `configuration` is open until closed below.
    let vni = unsafe { read_integer(configuration, wide!(keyword::VNI)) };
    // SAFETY: as above.
    let peers = unsafe { read_string(configuration, wide!(keyword::PEERS), config::parse_peers) }
        .unwrap_or(Peers::EMPTY);
    // SAFETY: opened above, closed once; nothing read from it afterwards
    // (`read_string` parsed the string before returning).
    unsafe { ndis::NdisCloseConfiguration(configuration) };
    (vni, peers)
}

/// Reads a string keyword and hands its UTF-16 to `parse` while the
/// configuration handle still owns it; `None` when missing or not a string.
///
/// # Safety
/// `configuration` is an open configuration handle; PASSIVE_LEVEL.
unsafe fn read_string<R>(
    configuration: NdisHandle,
    keyword: &'static [u16],
    parse: impl FnOnce(&[u16]) -> R,
) -> Option<R> {
    // SAFETY: caller contract; `parse` runs before this returns, while the
    // handle is open.
    let parameter = unsafe { read_parameter(configuration, keyword, NdisParameterType::STRING) }?;
    // SAFETY: the type says `StringData` is the valid member.
    let text = unsafe { parameter.parameter_data.string_data };
    if text.buffer.is_null() {
        return None;
    }
    // SAFETY: `Length` bytes of UTF-16 at `Buffer`, owned by the open
    // configuration handle.
    let units = unsafe { core::slice::from_raw_parts(text.buffer, usize::from(text.length) / 2) };
    Some(parse(units))
}

/// Makes the adapter's frame path (initialise, PASSIVE_LEVEL): reads
/// `SoftNdkVni` and `SoftNdkPeers`, makes the port, its tick (a kernel
/// timer of its own) and the receive NBLs. Every failure is logged and
/// leaves the adapter up without a port (frames consumed, as with no peer):
/// a bad keyword never fails initialisation.
///
/// # Safety
/// `miniport_handle` is the handle of `MiniportInitializeEx`.
unsafe fn make_frame_path(
    miniport_handle: NdisHandle,
    mtu: u32,
    net: Option<&alloc::sync::Arc<crate::kernel::wsk::WskNet>>,
) -> (Option<FramePath>, Option<alloc::sync::Arc<NdisNbls>>) {
    use alloc::sync::Arc;
    // SAFETY: caller contract.
    let (vni_raw, peers) = unsafe { read_underlay(miniport_handle) };
    let vni = config::vni(vni_raw);
    if vni_raw.is_some_and(|raw| raw != vni) {
        klog!(
            Level::Warning,
            "SoftNdkVni {} out of range (1-16777215): using {}",
            vni_raw.unwrap_or(0),
            vni
        );
    }
    if peers.refused > 0 {
        klog!(
            Level::Warning,
            "SoftNdkPeers: {} entries refused (unparsable, unspecified, multicast, broadcast, repeated or beyond 32)",
            peers.refused
        );
    }
    if peers.addrs().is_empty() {
        klog!(
            Level::Info,
            "SoftNdkPeers names no peer: the virtual Ethernet has no far end"
        );
        return (None, None);
    }
    let Some(net) = net else {
        klog!(
            Level::Error,
            "no WSK client: the virtual Ethernet has no port"
        );
        return (None, None);
    };
    let Some(alarm) = crate::kernel::timers::kernel_alarm() else {
        return (None, None);
    };
    let timers = crate::kernel::timers::Timers::new(alarm);
    let config = PathConfig {
        mtu: u16::try_from(mtu).unwrap_or(u16::MAX),
        vni,
        peers: peers.addrs(),
        udp_port: super::ether::VXLAN_PORT,
        told_up: false,
    };
    let source: Arc<dyn crate::kernel::wsk::WskSource> = Arc::clone(net) as _;
    let path = match FramePath::new(&config, timers, source) {
        Ok(path) => path,
        Err(error) => {
            klog!(Level::Error, "VXLAN port not made: {:?}", error);
            return (None, None);
        }
    };
    let Some(nbls) = NdisNbls::new(miniport_handle, path.port()) else {
        klog!(Level::Error, "receive NBLs not allocated: no VXLAN port");
        return (None, None);
    };
    let nbls = Arc::new(nbls);
    path.receiver().bind(Arc::clone(&nbls) as _);
    klog!(
        Level::Info,
        "VXLAN port: VNI {}, {} peers",
        vni,
        peers.addrs().len()
    );
    (Some(path), Some(nbls))
}

/// Halt of the frame path (PASSIVE_LEVEL): no indication from now on, the
/// tick stops, the port's sockets close; waits (every 10 ms, at most 5 s)
/// until they are. NBLs NDIS did not return (it halts a paused adapter, so
/// none) are logged and never freed.
///
/// # Safety
/// PASSIVE_LEVEL, from `MiniportHaltEx`.
unsafe fn halt_frames(ctx: &Context) {
    let Some(frames) = &ctx.frames else {
        return;
    };
    let out = frames.halt();
    if out > 0 {
        klog!(
            Level::Error,
            "{} receive NBLs not returned at halt: kept",
            out
        );
        if let Some(nbls) = &ctx.nbls {
            // Never freed: NDIS may still hold them.
            core::mem::forget(alloc::sync::Arc::clone(nbls));
        }
    }
    for _ in 0..500 {
        if frames.port().is_closed() {
            return;
        }
        crate::kernel::time::sleep_passive_100ns(100_000);
    }
    klog!(Level::Error, "VXLAN sockets still open after halt's wait");
}
