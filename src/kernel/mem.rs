//! Fallible allocation of single objects.
//!
//! `Box::new` treats an allocation failure as fatal, and in the kernel a
//! fatal error is a bug check. Everything the driver and the provider allocate
//! on an NDIS path (adapter context, provider) goes through [`try_box`] instead, so that
//! running out of pool becomes `NDIS_STATUS_RESOURCES`.

use alloc::boxed::Box;
use core::alloc::Layout;

/// Moves `value` into a new pool allocation, or gives it back as `None` when
/// the allocator fails (the value is dropped).
#[must_use]
pub fn try_box<T>(value: T) -> Option<Box<T>> {
    let layout = Layout::new::<T>();
    if layout.size() == 0 {
        // Zero-sized values do not allocate.
        return Some(Box::new(value));
    }
    // SAFETY: `layout` has a non-zero size.
    let ptr = unsafe { alloc::alloc::alloc(layout) }.cast::<T>();
    if ptr.is_null() {
        return None;
    }
    // SAFETY: `ptr` is a fresh, exclusive allocation of `T`'s layout.
    unsafe { ptr.write(value) };
    // SAFETY: `ptr` was allocated by the global allocator with `T`'s layout and
    // now holds an initialised `T`, which is what `Box::from_raw` requires.
    Some(unsafe { Box::from_raw(ptr) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_try_box_holds_the_value() {
        let boxed = try_box([7_u64; 4]).unwrap();
        assert_eq!(*boxed, [7; 4]);
        assert!(try_box(()).is_some());
    }
}
