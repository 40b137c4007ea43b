//! Host mode: the C entry points of the user-mode library.
//!
//! Built for any non-Windows target, the library (`libsoftndk.so`, or the
//! `rlib` for Rust tests) exposes two functions in place of NDIS's open and
//! close-adapter handlers:
//!
//! ```c
//! NTSTATUS SoftNdkOpenAdapter(const SOCKADDR *address, NDK_ADAPTER **adapter);
//! NTSTATUS SoftNdkCloseAdapter(NDK_ADAPTER *adapter);
//! ```
//!
//! Every distinct IP address (IPv4 or IPv6, N1) is one emulated NIC on the
//! process's fabric: the first open of an address creates its device, later
//! opens share it (N32), and it lives while any adapter on it is open. All
//! devices of the process reach each other, so adapters opened on 127.0.0.1
//! and 127.0.0.2 connect to one another, and an adapter reaches itself
//! (loopback, N27). The port of the address is ignored. Adapters are opened
//! with the highest version SoftNDK implements (NDKPI 1.2).
//!
//! The engine mode of a device is read from the environment variable
//! `SOFTNDK_ENGINE` when the address's device is created (its first open):
//! `deferred` selects `EngineMode::Deferred` (a worker thread runs the
//! requests), anything else or nothing the default, `EngineMode::Inline`.
//! A device keeps its mode while it lives.
//!
//! Checked mode ([`super::checked`], `docs/debugging.md`) is per process:
//! `SOFTNDK_CHECKED`, read at every `SoftNdkOpenAdapter`, sets it when
//! present (`0` off, `1` report, `stop` report and abort at the first
//! breach); `SoftNdkSetChecked` sets it at any time. The reports and the
//! per-rule counters are read with `SoftNdkGetBreachReports` and
//! `SoftNdkGetBreachCounts`:
//!
//! ```c
//! typedef struct { char Rule[8]; ULONG ObjectType; ULONG Reserved;
//!                  ULONG64 Object; char Text[240]; } SOFTNDK_BREACH_REPORT;
//! typedef struct { char Rule[8]; ULONG64 Count; } SOFTNDK_BREACH_COUNT;
//! NTSTATUS SoftNdkSetChecked(ULONG Mode);
//! NTSTATUS SoftNdkGetBreachReports(SOFTNDK_BREACH_REPORT *Reports, ULONG *Count);
//! NTSTATUS SoftNdkGetBreachCounts(SOFTNDK_BREACH_COUNT *Counts, ULONG *Count);
//! ```
//!
//! Fault injection (`rnic::fault`, `docs/debugging.md`) is per process too:
//! `SOFTNDK_FAULTS` (a plan's text form, e.g. `seed=7,rate=0.01` or
//! `post@3`), read once, at the first `SoftNdkOpenAdapter`, installs a plan;
//! `SoftNdkSetFaults` (the `SOFTNDK_FAULTS` structure of `abi::fault`) or
//! `SoftNdkSetFaultPlan` (the text form) install one at any time, and
//! `SoftNdkGetFaultTrace` reads back the faults injected.
//! `SoftNdkGetLiveObjects` counts the provider objects of the process whose
//! memory is still allocated (a leak check):
//!
//! ```c
//! ULONG64 SoftNdkGetLiveObjects(void);
//! ```

use std::sync::{Mutex, OnceLock, PoisonError};

use super::adapter;
use super::checked::{self, Breach, Mode, Report};
use super::cm::{self, AddressSet};
use super::fault::Plan;
use super::object::{Object, Slot};
use crate::abi::{
    NdkAdapter, NdkConnector, NtStatus, STATUS_BUFFER_TOO_SMALL, STATUS_INSUFFICIENT_RESOURCES,
    STATUS_INVALID_PARAMETER, STATUS_SUCCESS, SockAddr,
};
use crate::abi::{SoftNdkFaultCall, SoftNdkFaults};
use crate::kernel::sync::Arc;
use crate::kernel::tcp_host::HostNet;
use crate::rnic::cm::{ConnTimeouts, Fabric, IpAddr, Wire};
use crate::rnic::device::{Device, EngineMode};
use crate::rnic::fault;
use crate::rnic::types::Limits;

/// The fabric of this process: every adapter opened here reaches every other.
pub fn fabric() -> &'static Arc<Fabric> {
    static FABRIC: OnceLock<Arc<Fabric>> = OnceLock::new();
    FABRIC.get_or_init(Fabric::new)
}

/// Opens an adapter on the device of `ip` (created with `limits` and
/// `mode` when this is the address's first open).
///
/// # Errors
/// `STATUS_INVALID_ADDRESS` for a wildcard address,
/// `STATUS_INSUFFICIENT_RESOURCES` when memory runs out.
pub fn open(ip: IpAddr, limits: Limits, mode: EngineMode) -> Result<*mut NdkAdapter, NtStatus> {
    open_with(ip, limits, mode, Transport::Local)
}

/// How a host-mode device reaches its peers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Transport {
    /// The process's in-memory fabric: every device of this process, and
    /// nothing else.
    #[default]
    Local,
    /// iWARP over TCP (`docs/iwarp.md`): any peer the address routes to —
    /// another process, another machine, Linux siw — and devices of this
    /// process too, through the kernel's TCP. The address must be one of
    /// the machine's (a loopback address, or one of a real interface):
    /// listening and connecting bind it.
    Iwarp(ConnTimeouts),
}

/// Opens an adapter as [`open`], on `transport`. Every adapter of one
/// address shares its device (N32), so they must name the same transport.
///
/// # Errors
/// As [`open`]; `STATUS_INVALID_PARAMETER` when the address's device is
/// open on the other transport.
pub fn open_with(
    ip: IpAddr,
    limits: Limits,
    mode: EngineMode,
    transport: Transport,
) -> Result<*mut NdkAdapter, NtStatus> {
    // One open at a time, so that two first opens of one address do not
    // make two devices.
    static OPENING: Mutex<()> = Mutex::new(());
    let _guard = OPENING.lock().unwrap_or_else(PoisonError::into_inner);
    let fabric = fabric();
    let (device, fresh) = match fabric.device_of(ip) {
        Some(device) => (device, false),
        None => (
            Device::new(limits, mode).map_err(|_| STATUS_INSUFFICIENT_RESOURCES)?,
            true,
        ),
    };
    let wire = matches!(transport, Transport::Iwarp(_));
    if !fresh && fabric.on_wire(&device) != wire {
        return Err(STATUS_INVALID_PARAMETER);
    }
    let set = AddressSet::register(fabric, &device, &[ip]).map_err(cm::status)?;
    if let (true, Transport::Iwarp(timeouts)) = (fresh, transport) {
        fabric
            .attach_wire(
                &device,
                Wire {
                    net: HostNet::shared(),
                    timeouts,
                },
            )
            .map_err(cm::status)?;
    }
    adapter::open(&device, adapter::HIGHEST_VERSION, set)
}

/// Waits until the bytes in flight between this process's iWARP streams
/// have landed (at most 5 s; see `kernel::tcp_host::settle`). A test aid:
/// over iWARP an RDMA Write completes at the initiator once sent.
#[doc(hidden)]
pub fn wire_settle() {
    crate::kernel::tcp_host::settle(std::time::Duration::from_secs(5));
}

/// Whether the peer of `connector`, an attempt not yet established, has
/// given it up (closed or rejected: N14, N15, N16) and this side knows it.
/// A test aid: over iWARP the give-up arrives as the stream's RST a moment
/// after the peer acted, and a test that acts at once would race it.
///
/// # Safety
/// `connector` is null or a connector of this provider whose close has not
/// completed (L19).
#[doc(hidden)]
pub unsafe fn connector_peer_gone(connector: *mut NdkConnector) -> bool {
    // SAFETY: the caller's contract.
    let entered = unsafe {
        Object::<cm::Connector>::from_ptr(connector.cast(), &Slot("connector_peer_gone"))
    };
    entered.is_some_and(|connector| connector.inner.rnic().peer_gone())
}

/// The transport `SOFTNDK_TRANSPORT` asks for: `iwarp` (or `tcp`) the wire
/// with the default time-outs, anything else or nothing the fabric.
fn transport_from_env() -> Transport {
    match std::env::var_os("SOFTNDK_TRANSPORT") {
        Some(value) if value == "iwarp" || value == "tcp" => {
            Transport::Iwarp(ConnTimeouts::default())
        }
        _ => Transport::Local,
    }
}

/// `SoftNdkOpenAdapterEx`: as `SoftNdkOpenAdapter`, on the transport
/// `transport` names: 0 the process's in-memory fabric, 1 iWARP over TCP
/// (the default time-outs).
///
/// Returns as `SoftNdkOpenAdapter`, and `STATUS_INVALID_PARAMETER` for
/// another transport or an address already open on the other one.
///
/// # Safety
/// As `SoftNdkOpenAdapter`.
#[unsafe(no_mangle)]
pub unsafe extern "system" fn SoftNdkOpenAdapterEx(
    address: *const SockAddr,
    transport: u32,
    adapter: *mut *mut NdkAdapter,
) -> NtStatus {
    let transport = match transport {
        0 => Transport::Local,
        1 => Transport::Iwarp(ConnTimeouts::default()),
        _ => return STATUS_INVALID_PARAMETER,
    };
    // SAFETY: the caller's promise, passed on.
    unsafe { open_address(address, transport, adapter) }
}

/// `SoftNdkOpenAdapter`: opens an NDK adapter on the emulated NIC of
/// `address`, a `SOCKADDR_IN` (`AF_INET` = 2) or `SOCKADDR_IN6` (`AF_INET6` =
/// 23, the Windows value), and stores it in `*adapter`.
///
/// Returns `STATUS_SUCCESS`, `STATUS_INVALID_PARAMETER` (null pointer,
/// other family), `STATUS_INVALID_ADDRESS` (the wildcard address) or
/// `STATUS_INSUFFICIENT_RESOURCES`.
///
/// # Safety
/// `address` points to a readable `SOCKADDR_IN` or `SOCKADDR_IN6` as its
/// family says; `adapter` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "system" fn SoftNdkOpenAdapter(
    address: *const SockAddr,
    adapter: *mut *mut NdkAdapter,
) -> NtStatus {
    // SAFETY: the caller's promise, passed on.
    unsafe { open_address(address, transport_from_env(), adapter) }
}

/// Opens an adapter for the caller's `SOCKADDR` on `transport`.
///
/// # Safety
/// As `SoftNdkOpenAdapter`.
unsafe fn open_address(
    address: *const SockAddr,
    transport: Transport,
    adapter: *mut *mut NdkAdapter,
) -> NtStatus {
    if address.is_null() || adapter.is_null() {
        return STATUS_INVALID_PARAMETER;
    }
    // SAFETY: non-null; the caller's structure starts with its family.
    let family = unsafe { address.cast::<u16>().read_unaligned() };
    let Some(length) = cm::sockaddr_len(family) else {
        return STATUS_INVALID_PARAMETER;
    };
    // SAFETY: the caller's structure is the one its family names, `length`
    // bytes.
    let endpoint = match unsafe { cm::read_address(address, length) } {
        Ok(endpoint) => endpoint,
        Err(status) => return status,
    };
    checked_mode_from_env();
    faults_from_env();
    match open_with(
        endpoint.ip,
        Limits::DEFAULT,
        engine_mode_from_env(),
        transport,
    ) {
        Ok(opened) => {
            // SAFETY: the caller's out-pointer (checked non-null).
            unsafe { adapter.write_unaligned(opened) };
            STATUS_SUCCESS
        }
        Err(status) => status,
    }
}

/// The engine mode `SOFTNDK_ENGINE` asks for (see the module documentation).
fn engine_mode_from_env() -> EngineMode {
    match std::env::var_os("SOFTNDK_ENGINE") {
        Some(value) if value == "deferred" => EngineMode::Deferred,
        _ => EngineMode::default(),
    }
}

/// Sets the checked mode `SOFTNDK_CHECKED` asks for, if it is set (see the
/// module documentation); an unknown value leaves the mode alone.
fn checked_mode_from_env() {
    let Some(value) = std::env::var_os("SOFTNDK_CHECKED") else {
        return;
    };
    let mode = match value.to_str() {
        Some("0" | "off") => Mode::Off,
        Some("1" | "on") => Mode::Report,
        Some("stop") => Mode::Stop,
        _ => return,
    };
    checked::set_mode(mode);
    let bound = std::env::var("SOFTNDK_CHECKED_CALLBACK_US").ok();
    if let Some(micros) = bound.and_then(|b| b.parse::<u64>().ok()) {
        checked::set_callback_bound(micros);
    }
}

/// Installs the fault plan `SOFTNDK_FAULTS` describes (the text form of
/// `rnic::fault::Plan::parse`), once per process: at the first
/// `SoftNdkOpenAdapter` that finds it set, so that later opens do not start
/// the call counters again. A plan that does not parse is ignored (and said
/// on standard error).
fn faults_from_env() {
    static READ: std::sync::Once = std::sync::Once::new();
    READ.call_once(|| {
        let Some(value) = std::env::var_os("SOFTNDK_FAULTS") else {
            return;
        };
        if let Some(Ok(plan)) = value.to_str().map(Plan::parse) {
            fault::install(plan.as_ref());
        } else {
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "softndk: SOFTNDK_FAULTS={} is not a fault plan; fault injection stays off",
                value.display()
            );
        }
    });
}

/// `SoftNdkSetFaults`: installs a fault plan for this process (NULL: fault
/// injection off). The call counters and the trace start again from zero.
/// Returns `STATUS_SUCCESS`, or `STATUS_INVALID_PARAMETER` for a structure
/// [`super::fault::plan_from_c`] refuses (the plan in force stays then).
///
/// # Safety
/// `faults` is null or points to a readable `SOFTNDK_FAULTS`.
#[unsafe(no_mangle)]
pub unsafe extern "system" fn SoftNdkSetFaults(faults: *const SoftNdkFaults) -> NtStatus {
    if faults.is_null() {
        fault::install(None);
        return STATUS_SUCCESS;
    }
    // SAFETY: the caller's structure (checked non-null).
    let faults = unsafe { faults.read_unaligned() };
    match super::fault::plan_from_c(&faults) {
        Ok(plan) => {
            fault::install(Some(&plan));
            STATUS_SUCCESS
        }
        Err(status) => status,
    }
}

/// `SoftNdkSetFaultPlan`: installs the plan of a NUL-terminated text in the
/// form `SOFTNDK_FAULTS` takes (`"seed=7,post@3"`; NULL or `"off"`: off).
/// Returns `STATUS_SUCCESS`, or `STATUS_INVALID_PARAMETER` for a text that
/// is not a plan (the plan in force stays then).
///
/// # Safety
/// `plan` is null or a readable NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "system" fn SoftNdkSetFaultPlan(plan: *const core::ffi::c_char) -> NtStatus {
    if plan.is_null() {
        fault::install(None);
        return STATUS_SUCCESS;
    }
    // SAFETY: the caller's NUL-terminated string (checked non-null).
    let text = unsafe { core::ffi::CStr::from_ptr(plan) };
    match text.to_str().map(Plan::parse) {
        Ok(Ok(plan)) => {
            fault::install(plan.as_ref());
            STATUS_SUCCESS
        }
        _ => STATUS_INVALID_PARAMETER,
    }
}

/// `SoftNdkGetFaultTrace`: the injected faults kept (the newest
/// [`fault::TRACE_LEN`]), oldest first, as (kind, index) calls. `*count` is
/// the room on entry and the number of records on return, with the size
/// handshake of `SoftNdkGetBreachReports`.
///
/// # Safety
/// `count` is writable; `calls` has room for `*count` entries (or is null
/// when `*count` is 0).
#[unsafe(no_mangle)]
pub unsafe extern "system" fn SoftNdkGetFaultTrace(
    calls: *mut SoftNdkFaultCall,
    count: *mut u32,
) -> NtStatus {
    let mut kept = [SoftNdkFaultCall::default(); fault::TRACE_LEN];
    let mut n = 0_usize;
    fault::each_record(|record| {
        if let Some(slot) = kept.get_mut(n) {
            *slot = SoftNdkFaultCall {
                kind: record.kind as u32,
                reserved: 0,
                index: record.index,
            };
            n += 1;
        }
    });
    // SAFETY: the caller's contract.
    if let Err(status) = unsafe { answer_count(count, n, calls.is_null()) } {
        return status;
    }
    for (i, call) in kept.iter().take(n).enumerate() {
        // SAFETY: `i < n <= room`, the caller's array.
        unsafe { calls.wrapping_add(i).write_unaligned(*call) };
    }
    STATUS_SUCCESS
}

/// Stops the process at a breach (checked mode `stop`): the report on
/// standard error, then an abort, so that a debugger or the core dump shows
/// the consumer's call that broke the rule.
pub(super) fn stop(report: &Report) {
    use std::io::Write as _;
    // Straight to the stream (not `eprintln!`, which a test harness
    // captures and the abort would lose).
    let _ = writeln!(
        std::io::stderr(),
        "softndk: consumer breach {report}; stopping (SOFTNDK_CHECKED=stop)"
    );
    std::process::abort();
}

/// A test hook: called by a watched call once it has claimed its object
/// (C1: a CQ), with the object's address, so that a test can hold one call
/// inside while another enters and make a race deterministic. Checked mode
/// only.
static CHECKED_PAUSE: std::sync::RwLock<Option<fn(usize)>> = std::sync::RwLock::new(None);

/// Sets (or clears) the checked-mode test hook (see [`CHECKED_PAUSE`]).
#[doc(hidden)]
pub fn set_checked_pause(hook: Option<fn(usize)>) {
    *CHECKED_PAUSE
        .write()
        .unwrap_or_else(PoisonError::into_inner) = hook;
}

/// Runs the checked-mode test hook, if any.
pub(super) fn checked_pause(object: usize) {
    let hook = *CHECKED_PAUSE.read().unwrap_or_else(PoisonError::into_inner);
    if let Some(hook) = hook {
        hook(object);
    }
}

/// A test hook: the clock checked mode measures callbacks with (I3), in
/// 100 ns units, instead of the monotonic clock, so that a test makes a
/// callback "long" without waiting.
static CHECKED_CLOCK: std::sync::RwLock<Option<fn() -> u64>> = std::sync::RwLock::new(None);

/// Sets (or clears) the checked-mode clock (see [`CHECKED_CLOCK`]).
#[doc(hidden)]
pub fn set_checked_clock(clock: Option<fn() -> u64>) {
    *CHECKED_CLOCK
        .write()
        .unwrap_or_else(PoisonError::into_inner) = clock;
}

/// The test's clock, if one is installed.
pub(super) fn checked_clock() -> Option<u64> {
    let clock = *CHECKED_CLOCK.read().unwrap_or_else(PoisonError::into_inner);
    clock.map(|clock| clock())
}

/// `SoftNdkSetCheckedCallbackBound`: how long, in microseconds, a consumer
/// callback may run before checked mode reports it (I3); 100 000 (100 ms)
/// unless changed here or by `SOFTNDK_CHECKED_CALLBACK_US`. Returns
/// `STATUS_SUCCESS`.
#[unsafe(no_mangle)]
pub extern "system" fn SoftNdkSetCheckedCallbackBound(micros: u32) -> NtStatus {
    checked::set_callback_bound(u64::from(micros));
    STATUS_SUCCESS
}

/// `SoftNdkSetChecked`: checked mode for this process: 0 off (only L17 is
/// reported), 1 every watched rule reported, 2 reported and the process
/// aborted at the first breach. Returns `STATUS_SUCCESS`, or
/// `STATUS_INVALID_PARAMETER` for another value.
#[unsafe(no_mangle)]
pub extern "system" fn SoftNdkSetChecked(mode: u32) -> NtStatus {
    let mode = match mode {
        0 => Mode::Off,
        1 => Mode::Report,
        2 => Mode::Stop,
        _ => return STATUS_INVALID_PARAMETER,
    };
    checked::set_mode(mode);
    STATUS_SUCCESS
}

/// `SOFTNDK_BREACH_REPORT`: one kept breach report.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BreachReport {
    /// The rule id, NUL-terminated (`"C1"`).
    pub rule: [u8; 8],
    /// `NDK_OBJECT_TYPE` of the object.
    pub object_type: u32,
    /// Zero.
    pub reserved: u32,
    /// The object, as the consumer knows it.
    pub object: u64,
    /// The report as the debug log shows it, NUL-terminated (cut if longer).
    pub text: [u8; 240],
}

impl BreachReport {
    /// An empty entry, for the caller's array.
    pub const EMPTY: Self = Self {
        rule: [0; 8],
        object_type: 0,
        reserved: 0,
        object: 0,
        text: [0; 240],
    };

    /// The text up to its NUL.
    pub fn text(&self) -> &str {
        c_str(&self.text)
    }

    /// The rule id up to its NUL.
    pub fn rule(&self) -> &str {
        c_str(&self.rule)
    }
}

/// `SOFTNDK_BREACH_COUNT`: how often one rule was broken.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BreachCount {
    /// The rule id, NUL-terminated.
    pub rule: [u8; 8],
    /// Breaches seen in this process.
    pub count: u64,
}

/// A NUL-terminated byte string of a fixed field.
fn c_str(bytes: &[u8]) -> &str {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    core::str::from_utf8(bytes.get(..end).unwrap_or_default()).unwrap_or_default()
}

/// Copies `text` into a fixed NUL-terminated field, cut to fit.
fn put(field: &mut [u8], text: &str) {
    let mut take = text.len().min(field.len().saturating_sub(1));
    while !text.is_char_boundary(take) {
        take -= 1;
    }
    if let (Some(dst), Some(src)) = (field.get_mut(..take), text.as_bytes().get(..take)) {
        dst.copy_from_slice(src);
    }
    if let Some(nul) = field.get_mut(take) {
        *nul = 0;
    }
}

/// `SoftNdkGetBreachReports`: the kept reports (the newest
/// [`checked::KEPT`]), oldest first. `*count` is the room in `reports` on
/// entry and the number of reports on return; with too little room nothing
/// is written and the call returns `STATUS_BUFFER_TOO_SMALL` with the number
/// needed in `*count` (call with 0 to ask).
///
/// # Safety
/// `count` is writable; `reports` has room for `*count` entries (or is null
/// when `*count` is 0).
#[unsafe(no_mangle)]
pub unsafe extern "system" fn SoftNdkGetBreachReports(
    reports: *mut BreachReport,
    count: *mut u32,
) -> NtStatus {
    let mut kept = [None; checked::KEPT];
    let mut n = 0_usize;
    checked::each_report(|report| {
        if let Some(slot) = kept.get_mut(n) {
            *slot = Some(*report);
            n += 1;
        }
    });
    // SAFETY: the caller's contract.
    if let Err(status) = unsafe { answer_count(count, n, reports.is_null()) } {
        return status;
    }
    for (i, report) in kept.iter().flatten().enumerate() {
        let mut entry = BreachReport::EMPTY;
        put(&mut entry.rule, report.breach.rule());
        entry.object_type = report.object_type.0;
        entry.object = report.object as u64;
        let mut text = crate::kernel::log::Message::new();
        let _ = core::fmt::Write::write_fmt(&mut text, format_args!("{report}"));
        put(&mut entry.text, text.as_str());
        // SAFETY: `i < n <= room`, the caller's array.
        unsafe { reports.wrapping_add(i).write_unaligned(entry) };
    }
    STATUS_SUCCESS
}

/// The in-out count of `SoftNdkGetBreachReports` and `SoftNdkGetBreachCounts`:
/// `*count` is the room on entry and becomes `n`; `Err` with
/// `STATUS_BUFFER_TOO_SMALL` when the room is less than `n` (nothing to
/// write then), `STATUS_INVALID_PARAMETER` for a null `count`, or for a null
/// array (`array_null`) when there is something to write.
///
/// # Safety
/// `count` is null or readable and writable.
unsafe fn answer_count(count: *mut u32, n: usize, array_null: bool) -> Result<(), NtStatus> {
    if count.is_null() {
        return Err(STATUS_INVALID_PARAMETER);
    }
    // SAFETY: the caller's in-out count (checked non-null).
    let room = unsafe { count.read_unaligned() } as usize;
    // SAFETY: as above.
    unsafe { count.write_unaligned(u32::try_from(n).unwrap_or(u32::MAX)) };
    if room < n {
        return Err(STATUS_BUFFER_TOO_SMALL);
    }
    if n > 0 && array_null {
        return Err(STATUS_INVALID_PARAMETER);
    }
    Ok(())
}

/// `SoftNdkGetBreachCounts`: one counter per watched rule, in a fixed
/// order. `*count` is the room on entry, the number of rules on return;
/// `STATUS_BUFFER_TOO_SMALL` (nothing written) when the room is too small.
///
/// # Safety
/// `count` is writable; `counts` has room for `*count` entries (or is null
/// when `*count` is 0).
#[unsafe(no_mangle)]
pub unsafe extern "system" fn SoftNdkGetBreachCounts(
    counts: *mut BreachCount,
    count: *mut u32,
) -> NtStatus {
    // SAFETY: the caller's contract.
    if let Err(status) = unsafe { answer_count(count, Breach::ALL.len(), counts.is_null()) } {
        return status;
    }
    for (i, breach) in Breach::ALL.iter().enumerate() {
        let mut entry = BreachCount {
            rule: [0; 8],
            count: checked::breaches(*breach) as u64,
        };
        put(&mut entry.rule, breach.rule());
        // SAFETY: `i < n <= room`, the caller's array.
        unsafe { counts.wrapping_add(i).write_unaligned(entry) };
    }
    STATUS_SUCCESS
}

/// `SoftNdkGetLiveObjects`: how many provider objects (adapters, CQs, PDs,
/// QPs, SRQs, MRs, MWs, connectors, listeners, shared endpoints) of this
/// process still hold their memory: a leak check for consumers' tests and
/// the fuzzer (`src/bin/softndk-fuzz/`). An object counts from its create
/// until its close has completed and the last call inside it has left.
#[unsafe(no_mangle)]
pub extern "system" fn SoftNdkGetLiveObjects() -> u64 {
    super::object::live_objects() as u64
}

/// `SoftNdkCloseAdapter`: closes an adapter from `SoftNdkOpenAdapter`. Like
/// NDIS's close handler it blocks until every object created from the
/// adapter is closed and every callback has returned (L27); the consumer
/// closes its objects first and never calls this from a callback (L28).
///
/// Returns `STATUS_SUCCESS`, or `STATUS_INVALID_PARAMETER` for a pointer
/// that is not an open adapter.
///
/// # Safety
/// `adapter` is null or was returned by `SoftNdkOpenAdapter` and not closed.
#[unsafe(no_mangle)]
pub unsafe extern "system" fn SoftNdkCloseAdapter(adapter: *mut NdkAdapter) -> NtStatus {
    // SAFETY: the caller's contract.
    if unsafe { adapter::close(adapter, &Slot("SoftNdkCloseAdapter")) } {
        STATUS_SUCCESS
    } else {
        STATUS_INVALID_PARAMETER
    }
}
