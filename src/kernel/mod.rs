//! Platform services: the only door from SoftNDK to the operating system.
//!
//! Everything above this module (`rnic`, `provider`, `driver`) reaches the
//! platform only through these items, so that the same code builds against
//! three backends:
//!
//! | backend | when | how |
//! |---|---|---|
//! | `host` | any non-Windows target (tests, benches, the user-mode host library) | std threads, locks and allocation |
//! | `raw` | Windows target without feature `wdk` (the portable `.sys`) | imports of `ntoskrnl.exe` declared by hand with `raw-dylib` |
//! | `wdk` | Windows target with feature `wdk` (Windows host with the WDK) | windows-drivers-rs: wdk-sys, wdk-alloc, wdk-panic |
//!
//! Under `cfg(loom)` the lock and the atomics come from loom so that the state
//! machines built on them can be model-checked.
//!
//! Services:
//! * [`sync`] — [`sync::SpinLock`] with an RAII guard, and the atomics.
//! * [`deferred`] — [`deferred::Deferred`], work run later at DISPATCH_LEVEL
//!   (a DPC in the kernel, a worker thread on the host).
//! * [`log`] — the debug log ([`klog!`](crate::klog)).
//! * [`pool`] — the pool tag and, in the kernel, the global allocator.
//! * [`time`] — a monotonic clock.
//! * [`irql`] — the current IRQL (CR8 on x64, as `KeGetCurrentIrql`;
//!   PASSIVE on the host), for `NDIS_RECEIVE_FLAGS_DISPATCH_LEVEL`.
//! * [`stop`] — stopping the machine on purpose (a bug check in the kernel,
//!   an abort on the host): checked mode's stop at a consumer breach.
//! * [`timers`] — one-shot timers served by one platform alarm (a `KTIMER`
//!   and its DPC in the kernel, `ktimer`; played by the tests on the host).
//! * `host_tap` (Linux host only, never in the driver) — a TAP device and
//!   entry into a network namespace, for the VXLAN harness of
//!   `tests/vxlan_linux.rs`.
//! * `net` (host only) — TCP byte streams over `std::net` for the iWARP
//!   data path.
//! * [`wsk`] — the same byte streams over Winsock Kernel (compiled on every
//!   target: in the kernel over the real provider, on the host against the
//!   tests' provider).

#[cfg(not(target_os = "windows"))]
mod host;
#[cfg(not(target_os = "windows"))]
use host as backend;

#[cfg(all(target_os = "windows", not(feature = "wdk")))]
mod raw;
#[cfg(all(target_os = "windows", not(feature = "wdk")))]
use raw as backend;

#[cfg(all(target_os = "windows", feature = "wdk"))]
mod wdk;
#[cfg(all(target_os = "windows", feature = "wdk"))]
use wdk as backend;

pub mod deferred;
#[cfg(target_os = "linux")]
pub mod host_tap;
pub mod irql;
#[cfg(target_os = "windows")]
mod kdpc;
#[cfg(all(target_os = "windows", not(loom)))]
mod ktimer;
pub mod log;
pub mod mdl;
pub mod mem;
#[cfg(not(target_os = "windows"))]
pub mod net;
pub mod pool;
pub mod reserve;
pub mod stop;
pub mod sync;
pub mod tcp;
#[cfg(not(target_os = "windows"))]
pub mod tcp_host;
#[cfg(test)]
#[cfg(not(loom))]
pub(crate) mod tcp_testing;
#[cfg(test)]
#[cfg(not(loom))]
pub(crate) mod testing;
pub mod time;
#[cfg(not(loom))]
pub mod timers;
#[cfg(not(loom))]
pub mod wsk;

/// An ASCII string as UTF-16 code units, at compile time: the kernel's
/// routine names (`MmGetSystemRoutineAddress`) and the driver's registry
/// keywords (`NDIS_STRING`) are built with it.
///
/// # Panics
/// At compile time only (it is meant for `const` and `static` items): when
/// `N` is not the string's length or the string is not ASCII.
#[must_use]
pub const fn ascii_utf16<const N: usize>(text: &str) -> [u16; N] {
    let bytes = text.as_bytes();
    assert!(bytes.len() == N, "N must be the string's length");
    let mut out = [0_u16; N];
    let mut i = 0;
    while i < N {
        assert!(bytes[i].is_ascii(), "an ASCII string");
        out[i] = bytes[i] as u16;
        i += 1;
    }
    out
}
