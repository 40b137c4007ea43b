//! The wdk backend: the same services through windows-drivers-rs.
//!
//! Compiled only with feature `wdk`, on a Windows host with the WDK or eWDK:
//! wdk-sys generates its bindings from the installed WDK headers, so this file
//! is NOT built on Linux and has not been compiled in this repository's CI (see
//! `docs/kernel.md`). It mirrors `raw.rs` one for one, but for the DPC, which
//! both take from `kdpc`; where the two could drift, `raw.rs` is the tested
//! reference. Allocation comes from wdk-alloc's `WdkAllocator` and the panic
//! handler from wdk-panic.

use super::log::{Level, Message};
use core::ffi::c_void;
use wdk_sys::ntddk::{
    KeAcquireSpinLockRaiseToDpc, KeBugCheckEx, KeDelayExecutionThread, KeQueryInterruptTimePrecise,
    KeReleaseSpinLock,
};

// The DPC: `kdpc`, declared by hand as in the raw backend (wdk-sys's
// bindings are not used for it).
pub(super) use super::kdpc::{DpcSlot, dpc_flush, dpc_init, dpc_schedule};

// The panic handler: wdk-panic's, linked in by naming the crate.
extern crate wdk_panic;

#[global_allocator]
static GLOBAL_ALLOCATOR: wdk_alloc::WdkAllocator = wdk_alloc::WdkAllocator;

/// Stops the machine with `code` and its four parameters (`kernel::stop`).
pub(super) fn bug_check_ex(code: u32, parameters: [usize; 4]) -> ! {
    let [p1, p2, p3, p4] = parameters;
    // SAFETY: KeBugCheckEx may be called at any IRQL and does not return.
    unsafe { KeBugCheckEx(code, p1 as _, p2 as _, p3 as _, p4 as _) }
}

pub(super) fn spin_lock_acquire(word: *mut usize) -> u8 {
    // SAFETY: `word` points to a KSPIN_LOCK inside a live `SpinLock` borrowed for
    // as long as it is held; callers run at IRQL <= DISPATCH_LEVEL.
    unsafe { KeAcquireSpinLockRaiseToDpc(word.cast()) }
}

pub(super) fn spin_lock_release(word: *mut usize, old_irql: u8) {
    // SAFETY: the guard acquired `word` with `spin_lock_acquire`, which returned
    // `old_irql`; each guard releases exactly once.
    unsafe { KeReleaseSpinLock(word.cast(), old_irql) }
}

pub(super) fn debug_print(_level: Level, message: &Message) {
    wdk::print!("{}", message.as_str());
}

/// The MDL mapping of `kernel::mdl` (mirror of `raw.rs`, unbuilt here): kernel
/// mode, cached, no bug check on failure, normal priority, non-executable.
///
/// # Safety
/// `mdl` points to a valid MDL describing locked pages; IRQL <= DISPATCH_LEVEL.
pub(super) unsafe fn map_locked_pages(mdl: *mut crate::abi::Mdl) -> *mut c_void {
    // SAFETY: as in `raw.rs`: caller contract, and a failure returns null
    // because `BugCheckOnFailure` is FALSE.
    unsafe {
        wdk_sys::ntddk::MmMapLockedPagesSpecifyCache(
            mdl.cast(),
            wdk_sys::_MODE::KernelMode as _,
            wdk_sys::_MEMORY_CACHING_TYPE::MmCached,
            core::ptr::null_mut(),
            0,
            crate::abi::NORMAL_PAGE_PRIORITY | crate::abi::MDL_MAPPING_NO_EXECUTE,
        )
    }
}

pub(super) fn monotonic_100ns() -> u64 {
    let mut qpc = 0_u64;
    // SAFETY: valid out-parameter; callable at any IRQL.
    unsafe { KeQueryInterruptTimePrecise(&raw mut qpc) }
}

pub(super) fn sleep_100ns(duration: u64) {
    let mut interval = wdk_sys::LARGE_INTEGER {
        QuadPart: -i64::try_from(duration).unwrap_or(i64::MAX),
    };
    // SAFETY: PASSIVE_LEVEL; KernelMode, not alertable, a valid interval.
    let _ =
        unsafe { KeDelayExecutionThread(wdk_sys::_MODE::KernelMode as i8, 0, &raw mut interval) };
}
