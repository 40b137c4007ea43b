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

#[cfg(all(target_os = "windows", not(feature = "wdk")))]
mod global {
    use core::alloc::{GlobalAlloc, Layout};

    /// Non-paged pool allocator on `ExAllocatePool2` (or, before Windows 10
    /// 2004, `ExAllocatePoolWithTag`) and `ExFreePoolWithTag`.
    pub struct PoolAllocator;

    // SAFETY:
    // - `alloc` returns either null or a fresh block of at least `layout.size()`
    //   bytes aligned to `layout.align()` (the backend over-allocates for
    //   alignments above the pool's natural 16 bytes).
    // - `alloc_zeroed` does the same with every byte of the block zero.
    // - `dealloc` is only given pointers `alloc` returned, with the same layout.
    unsafe impl GlobalAlloc for PoolAllocator {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            super::super::backend::pool_alloc(layout, false)
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            super::super::backend::pool_alloc(layout, true)
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: the caller passes a pointer `alloc` returned for `layout`.
            unsafe { super::super::backend::pool_free(ptr, layout) }
        }
    }

    #[global_allocator]
    static ALLOCATOR: PoolAllocator = PoolAllocator;
}
