//! The kernel's [`Alarm`]: one `KTIMER` with a `KDPC`, over the interrupt
//! time clock (Windows only). Declared by hand (`raw-dylib`) like the other
//! kernel imports, so the portable image links without the WDK;
//! `tests/driver_image.rs` reads this file for its declared imports. The
//! `KDPC` and its routines are `kdpc`'s, as every `Deferred`'s.
//!
//! `km/wdm.h` declares `KeInitializeTimer`, `KeSetTimer` and `KeCancelTimer`
//! under `NTDDI_WIN2K`; all three are callable at ≤ DISPATCH_LEVEL.

use alloc::boxed::Box;
use alloc::sync::Weak;
use core::cell::UnsafeCell;
use core::ffi::c_void;

use super::kdpc::{Kdpc, KeFlushQueuedDpcs, KeInitializeDpc};
use super::mem::try_box;
use super::sync::SpinLock;
use super::timers::{Alarm, Timers};

/// `KTIMER` (x64: 0x40 bytes), opaque.
#[repr(C, align(8))]
struct KTimer([u8; 0x40]);

#[link(name = "ntoskrnl.exe", kind = "raw-dylib", modifiers = "+verbatim")]
unsafe extern "system" {
    /// ≤ DISPATCH_LEVEL: a notification timer, not signalled.
    fn KeInitializeTimer(timer: *mut KTimer);
    /// ≤ DISPATCH_LEVEL: (re)sets the timer; `due` < 0 is relative, in
    /// 100 ns; the DPC is queued when it expires.
    fn KeSetTimer(timer: *mut KTimer, due: i64, dpc: *mut Kdpc) -> u8;
    /// ≤ DISPATCH_LEVEL: takes the timer out of the timer queue.
    fn KeCancelTimer(timer: *mut KTimer) -> u8;
}

/// The timer, its DPC and whom it serves, boxed so their addresses stay.
struct Slot {
    timer: UnsafeCell<KTimer>,
    dpc: UnsafeCell<Kdpc>,
    target: SpinLock<Weak<Timers>>,
}

/// A `KTIMER` + `KDPC` alarm.
struct KernelAlarm {
    slot: Box<Slot>,
}

// SAFETY: the KTIMER and KDPC are only handed to the kernel routines, which
// synchronise on them; `target` is under its lock.
unsafe impl Send for KernelAlarm {}
// SAFETY: as above.
unsafe impl Sync for KernelAlarm {}

/// The DPC: the alarm went off.
unsafe extern "system" fn alarm_dpc(
    _dpc: *mut Kdpc,
    context: *mut c_void,
    _argument1: *mut c_void,
    _argument2: *mut c_void,
) {
    // SAFETY: the context is the boxed slot, which lives until `stop` has
    // cancelled the timer and flushed this DPC (the owner stops before it
    // drops, `Drop` cancels again).
    let slot = unsafe { &*context.cast::<Slot>() };
    let target = slot.target.lock().upgrade();
    if let Some(timers) = target {
        timers.expire();
    }
}

/// The kernel's alarm, or `None` without memory.
pub fn kernel_alarm() -> Option<Box<dyn Alarm>> {
    let slot = try_box(Slot {
        timer: UnsafeCell::new(KTimer([0; 0x40])),
        dpc: UnsafeCell::new(Kdpc::zeroed()),
        target: SpinLock::new(Weak::new()),
    })?;
    let context = core::ptr::from_ref::<Slot>(&slot)
        .cast_mut()
        .cast::<c_void>();
    // SAFETY: the timer is in the box, at a stable address, not yet used.
    unsafe { KeInitializeTimer(slot.timer.get()) };
    // SAFETY: as the timer: the DPC is in the box, not yet used.
    unsafe { KeInitializeDpc(slot.dpc.get(), alarm_dpc, context) };
    let alarm = try_box(KernelAlarm { slot })?;
    Some(alarm as Box<dyn Alarm>)
}

impl Alarm for KernelAlarm {
    fn now_ms(&self) -> u64 {
        super::time::now_100ns() / 10_000
    }

    fn set(&self, at_ms: u64) {
        let wait_ms = at_ms.saturating_sub(self.now_ms());
        // Relative, in 100 ns; at least one tick.
        let due = -i64::try_from(wait_ms.saturating_mul(10_000).max(1)).unwrap_or(i64::MAX);
        // SAFETY: initialised in `kernel_alarm`; the slot outlives the timer
        // (cancelled in `stop` and `Drop`).
        let _ = unsafe { KeSetTimer(self.slot.timer.get(), due, self.slot.dpc.get()) };
    }

    fn stop(&self) {
        // SAFETY: initialised in `kernel_alarm`.
        let _ = unsafe { KeCancelTimer(self.slot.timer.get()) };
        // SAFETY: PASSIVE_LEVEL (the trait's contract): waits for a DPC
        // already queued by the timer to have run.
        unsafe { KeFlushQueuedDpcs() };
    }

    fn attach(&self, timers: Weak<Timers>) {
        *self.slot.target.lock() = timers;
    }
}

impl Drop for KernelAlarm {
    fn drop(&mut self) {
        // SAFETY: initialised; cancelling is allowed at any IRQL ≤ DISPATCH.
        // The owner stopped the alarm first (flushing its DPC).
        let _ = unsafe { KeCancelTimer(self.slot.timer.get()) };
    }
}
