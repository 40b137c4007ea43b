//! Pool memory.
//!
//! In the kernel every allocation of the crate (`alloc`'s `Box`, `Vec`, `Arc`)
//! goes through the global allocator installed here, which takes non-paged,
//! no-execute pool tagged [`POOL_TAG`] (`!poolused` and Driver Verifier's pool
//! tracking show it as `SNdk`). On the host the system allocator serves.
//!
//! Allocation happens when objects are created, never per work request.
//!
//! In the portable image the allocator takes `ExAllocatePool2` when the
//! kernel exports it (Windows 10 2004 and later) and
//! `ExAllocatePoolWithTag(NonPagedPoolNx)` otherwise; [`init`] makes that
//! choice once, in `DriverEntry`.

/// The pool tag, `'kdNS'` as a little-endian `ULONG`: shown as "SNdk".
pub const POOL_TAG: u32 = u32::from_le_bytes(*b"SNdk");

/// Resolves, once, the pool routines newer than the supported floor
/// (Windows 10 1809 / Windows Server 2019, build 17763): `ExAllocatePool2`,
/// looked up with `MmGetSystemRoutineAddress`. `DriverEntry` calls it first,
/// at PASSIVE_LEVEL; until then, and on kernels without `ExAllocatePool2`,
/// the allocator uses `ExAllocatePoolWithTag(NonPagedPoolNx)`. Allocates
/// nothing; a no-op on the host and in the WDK build.
pub fn init() {
    #[cfg(all(target_os = "windows", not(feature = "wdk")))]
    super::backend::init();
}

/// Whether memory is low: the pool refused small allocations and the
/// emergency reserve ([`super::reserve`]) served a quarter of its slots or
/// more. Every create is then refused with `STATUS_INSUFFICIENT_RESOURCES`
/// (L9) before it allocates. Never on the host (the system allocator
/// serves; a test can make its own thread see low memory with
/// `simulate_low`, a test-only hook).
#[must_use]
pub fn low() -> bool {
    #[cfg(all(target_os = "windows", not(feature = "wdk")))]
    let low = super::reserve::RESERVE.low();
    #[cfg(not(all(target_os = "windows", not(feature = "wdk"))))]
    let low = false;
    #[cfg(all(test, not(target_os = "windows")))]
    let low = low || SIMULATED_LOW.with(core::cell::Cell::get);
    low
}

#[cfg(all(test, not(target_os = "windows")))]
std::thread_local! {
    static SIMULATED_LOW: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

/// Test hook: makes [`low`] answer `true` on this thread while `on` (other
/// threads, other tests, are not affected).
#[cfg(all(test, not(target_os = "windows")))]
pub fn simulate_low(on: bool) {
    SIMULATED_LOW.with(|low| low.set(on));
}

#[cfg(all(target_os = "windows", not(feature = "wdk")))]
mod global {
    use core::alloc::{GlobalAlloc, Layout};
    use core::cell::UnsafeCell;

    use super::super::reserve::{ALIGN, RESERVE, SLOT, SLOTS};

    /// Non-paged pool allocator on `ExAllocatePool2` (or, before Windows 10
    /// 2004, `ExAllocatePoolWithTag`) and `ExFreePoolWithTag`, with the
    /// emergency reserve behind it.
    pub struct PoolAllocator;

    /// The reserve's memory: part of the image's non-paged data.
    #[repr(C, align(64))]
    struct Area(UnsafeCell<[u8; SLOT * SLOTS]>);

    // SAFETY: the bytes of slot `i` are only touched by the owner of the
    // block in it, which `RESERVE` hands to one caller at a time (a bit set
    // by one atomic exchange, cleared when that block is freed).
    unsafe impl Sync for Area {}

    const _: () = assert!(ALIGN == 64 && SLOT.is_multiple_of(ALIGN));

    static AREA: Area = Area(UnsafeCell::new([0; SLOT * SLOTS]));

    /// Where the reserve's bytes start.
    fn area() -> *mut u8 {
        AREA.0.get().cast()
    }

    /// Pool memory for `layout`: the pool's, tried twice more when it
    /// refuses (Driver Verifier's low resources simulation refuses at
    /// random), then a slot of the reserve when the block fits one; null
    /// when all of that fails.
    fn allocate(layout: Layout, zeroed: bool) -> *mut u8 {
        for _ in 0..3 {
            let block = super::super::backend::pool_alloc(layout, zeroed);
            if !block.is_null() {
                return block;
            }
        }
        let Some(index) = RESERVE.take(layout.size(), layout.align()) else {
            return core::ptr::null_mut();
        };
        let block = area().wrapping_add(index * SLOT);
        if zeroed {
            // SAFETY: slot `index` is this caller's now (`RESERVE.take`): its
            // `SLOT` bytes lie inside `AREA` and nobody else touches them.
            unsafe { block.write_bytes(0, SLOT) };
        }
        block
    }

    // SAFETY:
    // - `alloc` returns either null or a fresh block of at least `layout.size()`
    //   bytes aligned to `layout.align()`: the pool's (the backend
    //   over-allocates for alignments above the pool's natural 16 bytes), or
    //   a reserve slot, which is `SLOT` bytes aligned to 64 and is given only
    //   for layouts that fit it (`Slots::take`).
    // - `alloc_zeroed` does the same with every byte of the block zero.
    // - `dealloc` is only given pointers `alloc` returned, with the same layout;
    //   a pointer inside `AREA` is a slot and goes back to the reserve.
    unsafe impl GlobalAlloc for PoolAllocator {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            allocate(layout, false)
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            allocate(layout, true)
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            let offset = (ptr as usize).wrapping_sub(area() as usize);
            if offset < SLOT * SLOTS {
                RESERVE.give(offset / SLOT);
                return;
            }
            // SAFETY: the caller passes a pointer `alloc` returned for `layout`,
            // and not a reserve slot: one of the pool's.
            unsafe { super::super::backend::pool_free(ptr, layout) }
        }
    }

    #[global_allocator]
    static ALLOCATOR: PoolAllocator = PoolAllocator;
}
