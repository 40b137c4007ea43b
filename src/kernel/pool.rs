//! Pool memory.
//!
//! In the kernel every allocation of the crate (`alloc`'s `Box`, `Vec`, `Arc`)
//! goes through the global allocator installed here, which takes non-paged,
//! no-execute pool tagged [`POOL_TAG`] (`!poolused` and Driver Verifier's pool
//! tracking show it as `SNdk`). On the host the system allocator serves.
//!
//! Allocation happens when objects are created, never per work request.

/// The pool tag, `'kdNS'` as a little-endian `ULONG`: shown as "SNdk".
pub const POOL_TAG: u32 = u32::from_le_bytes(*b"SNdk");

#[cfg(all(target_os = "windows", not(feature = "wdk")))]
mod global {
    use core::alloc::{GlobalAlloc, Layout};

    /// Non-paged pool allocator on `ExAllocatePool2` / `ExFreePoolWithTag`.
    pub struct PoolAllocator;

    // SAFETY:
    // - `alloc` returns either null or a fresh block of at least `layout.size()`
    //   bytes aligned to `layout.align()` (the backend over-allocates for
    //   alignments above the pool's natural 16 bytes).
    // - `dealloc` is only given pointers `alloc` returned, with the same layout.
    unsafe impl GlobalAlloc for PoolAllocator {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            super::super::backend::pool_alloc(layout)
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: the caller passes a pointer `alloc` returned for `layout`.
            unsafe { super::super::backend::pool_free(ptr, layout) }
        }
    }

    #[global_allocator]
    static ALLOCATOR: PoolAllocator = PoolAllocator;
}
