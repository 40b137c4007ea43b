//! The kernel's DPC (Windows only): the `KDPC` of every
//! [`Deferred`](super::deferred::Deferred) and of the timer's alarm
//! (`ktimer`), and the routines that initialise, queue and flush it.
//!
//! Declared by hand (`raw-dylib`), like `ktimer`'s block and the driver's
//! `ndis.sys` block, so that the raw and the wdk backend share one
//! declaration and one implementation (they differed only in their
//! bindings): both re-export [`DpcSlot`], [`dpc_init`], [`dpc_schedule`] and
//! [`dpc_flush`] as theirs. `tests/driver_image.rs` reads this file for its
//! declared imports.

use super::deferred::{DeferredRoutine, Inner};
use alloc::sync::Arc;
use core::cell::UnsafeCell;
use core::ffi::c_void;

/// `KDPC` on x64: 0x40 bytes, 8-aligned. Only the kernel reads its fields.
#[repr(C, align(8))]
pub(super) struct Kdpc([u8; 0x40]);

impl Kdpc {
    /// An uninitialised DPC (`KeInitializeDpc` fills it).
    pub(super) const fn zeroed() -> Self {
        Self([0; 0x40])
    }
}

/// `PKDEFERRED_ROUTINE`.
type KDeferredRoutine = unsafe extern "system" fn(
    dpc: *mut Kdpc,
    deferred_context: *mut c_void,
    system_argument1: *mut c_void,
    system_argument2: *mut c_void,
);

#[link(name = "ntoskrnl.exe", kind = "raw-dylib", modifiers = "+verbatim")]
unsafe extern "system" {
    pub(super) fn KeInitializeDpc(dpc: *mut Kdpc, routine: KDeferredRoutine, context: *mut c_void);
    fn KeInsertQueueDpc(dpc: *mut Kdpc, argument1: *mut c_void, argument2: *mut c_void) -> u8;
    /// PASSIVE_LEVEL: waits for every queued DPC to have run.
    pub(super) fn KeFlushQueuedDpcs();
}

/// Per-[`Deferred`](super::deferred::Deferred) state: its `KDPC`.
pub(super) struct DpcSlot {
    dpc: UnsafeCell<Kdpc>,
}

// SAFETY: the KDPC is written once by `KeInitializeDpc` before the owning Arc is
// shared, and afterwards only by the kernel's DPC routines, which synchronize it
// themselves (that is their contract for concurrently inserted DPCs).
unsafe impl Sync for DpcSlot {}
// SAFETY: the KDPC holds no thread affinity; moving it before initialization is fine.
unsafe impl Send for DpcSlot {}

impl DpcSlot {
    pub(super) const fn new() -> Self {
        Self {
            dpc: UnsafeCell::new(Kdpc::zeroed()),
        }
    }
}

unsafe extern "system" fn dpc_trampoline<T: DeferredRoutine>(
    _dpc: *mut Kdpc,
    _context: *mut c_void,
    argument1: *mut c_void,
    _argument2: *mut c_void,
) {
    // SAFETY: `dpc_schedule` inserted this DPC with
    // `Inner::insert_with_reference`, and the kernel runs each successful
    // insertion exactly once.
    unsafe { Inner::<T>::run_inserted(argument1) };
}

pub(super) fn dpc_init<T: DeferredRoutine>(inner: &Arc<Inner<T>>) {
    // SAFETY: the KDPC lives inside the Arc allocation, so its address is stable
    // for the Arc's life, and no other reference to it exists yet (the Arc has
    // just been created and not shared).
    unsafe {
        KeInitializeDpc(
            inner.slot.dpc.get(),
            dpc_trampoline::<T>,
            core::ptr::null_mut(),
        );
    }
}

pub(super) fn dpc_schedule<T: DeferredRoutine>(inner: &Arc<Inner<T>>) -> bool {
    Inner::insert_with_reference(inner, |reference| {
        // SAFETY: the KDPC was initialized by `dpc_init`; the strong reference
        // passed as argument 1 keeps the KDPC and the routine alive until the
        // DPC has run.
        unsafe { KeInsertQueueDpc(inner.slot.dpc.get(), reference, core::ptr::null_mut()) != 0 }
    })
}

pub(super) fn dpc_flush() {
    // SAFETY: called at PASSIVE_LEVEL (documented on `deferred::flush`).
    unsafe { KeFlushQueuedDpcs() }
}
