//! Fallible allocation of single objects and of filled slices.
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

/// A slice of `n` copies of `value` in a new pool allocation, or `None` when
/// the allocator fails: the buffers, rings and queues every layer sizes at
/// creation, allocated without the bug check `vec!` would make of a failure.
#[must_use]
pub fn try_filled<T: Clone>(n: usize, value: T) -> Option<Box<[T]>> {
    let mut v = alloc::vec::Vec::new();
    v.try_reserve_exact(n).ok()?;
    v.resize(n, value);
    Some(v.into_boxed_slice())
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

    #[test]
    fn test_try_filled_holds_n_copies() {
        let filled = try_filled(3, 9_u8).unwrap();
        assert_eq!(&*filled, &[9, 9, 9]);
        assert!(try_filled(0, 1_u32).unwrap().is_empty());
    }

    #[test]
    fn test_try_filled_refuses_an_impossible_size() {
        // More bytes than an allocation may have: refused, not a panic.
        assert!(try_filled(usize::MAX, 0_u8).is_none());
    }
}
