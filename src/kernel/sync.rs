//! Locks and atomics.
//!
//! [`SpinLock`] is the one lock type of SoftNDK. In the kernel it is a
//! `KSPIN_LOCK` acquired with `KeAcquireSpinLockRaiseToDpc`, so it may be taken
//! at any IRQL up to DISPATCH_LEVEL, where every provider function may be
//! called (rule I1), and must only be held for short, bounded work (rule
//! I2). On the host it is a `std::sync::Mutex`; under `cfg(loom)` a loom
//! mutex, so that loom explores every interleaving of the code that uses it.
//! The guard releases the lock when dropped.
//!
//! No consumer callback may ever run while a guard is alive (rule I4): the code
//! that calls out first drops every guard.

// `Arc` stays the real one under loom too: the models check the locks and
// atomics that order the state machines, and loom's `Arc` has no `Weak`.
pub use alloc::sync::{Arc, Weak};
#[cfg(not(loom))]
pub use core::sync::atomic;
#[cfg(loom)]
pub use loom::sync::atomic;

use core::ops::{Deref, DerefMut};

/// A short-hold mutual-exclusion lock that may be taken at DISPATCH_LEVEL.
///
/// # Invariants
/// The protected value is only reachable through a [`SpinLockGuard`], and at
/// most one guard of a lock exists at a time.
pub struct SpinLock<T> {
    inner: imp::Lock<T>,
}

/// Proof that a [`SpinLock`] is held; releases it when dropped.
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct SpinLockGuard<'a, T> {
    inner: imp::Guard<'a, T>,
}

impl<T> SpinLock<T> {
    /// Creates an unlocked lock around `value` (usable in a `static`).
    #[cfg(not(loom))]
    pub const fn new(value: T) -> Self {
        Self {
            inner: imp::Lock::new(value),
        }
    }

    /// Creates an unlocked lock around `value`.
    #[cfg(loom)]
    pub fn new(value: T) -> Self {
        Self {
            inner: imp::Lock::new(value),
        }
    }

    /// Acquires the lock, spinning (kernel) or blocking (host) until it is free.
    ///
    /// In the kernel this raises the IRQL to DISPATCH_LEVEL until the guard is
    /// dropped. The lock is not re-entrant: taking it twice on one thread
    /// deadlocks.
    pub fn lock(&self) -> SpinLockGuard<'_, T> {
        SpinLockGuard {
            inner: self.inner.lock(),
        }
    }

    /// Consumes the lock and returns the value.
    pub fn into_inner(self) -> T {
        self.inner.into_inner()
    }
}

impl<T: Default> Default for SpinLock<T> {
    fn default() -> Self {
        Self::new(T::default())
    }
}

impl<T> core::fmt::Debug for SpinLock<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("SpinLock { .. }")
    }
}

impl<T> Deref for SpinLockGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.inner
    }
}

impl<T> DerefMut for SpinLockGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.inner
    }
}

#[cfg(loom)]
mod imp {
    pub type Guard<'a, T> = loom::sync::MutexGuard<'a, T>;

    pub struct Lock<T>(loom::sync::Mutex<T>);

    impl<T> Lock<T> {
        pub fn new(value: T) -> Self {
            Self(loom::sync::Mutex::new(value))
        }
        pub fn lock(&self) -> Guard<'_, T> {
            // loom mutexes are never poisoned inside a model: a panic ends the model.
            match self.0.lock() {
                Ok(guard) => guard,
                Err(poisoned) => poisoned.into_inner(),
            }
        }
        pub fn into_inner(self) -> T {
            match self.0.into_inner() {
                Ok(value) => value,
                Err(poisoned) => poisoned.into_inner(),
            }
        }
    }
}

#[cfg(all(not(loom), not(target_os = "windows")))]
mod imp {
    // `parking_lot`'s mutex, not `std::sync::Mutex`: it has no poisoning, like
    // the kernel's spin lock (a panic there is a bug check, and the host's
    // `std` lock ignored poisoning anyway), and so no panic-count check on
    // every lock and unlock — about 100 instructions per 64 B Send
    // (docs/performance.md, "The provider's share of a Send").
    pub type Guard<'a, T> = parking_lot::MutexGuard<'a, T>;

    pub struct Lock<T>(parking_lot::Mutex<T>);

    impl<T> Lock<T> {
        pub const fn new(value: T) -> Self {
            Self(parking_lot::Mutex::new(value))
        }
        pub fn lock(&self) -> Guard<'_, T> {
            self.0.lock()
        }
        pub fn into_inner(self) -> T {
            self.0.into_inner()
        }
    }
}

#[cfg(all(not(loom), target_os = "windows"))]
mod imp {
    use super::super::backend;
    use core::cell::UnsafeCell;
    use core::ops::{Deref, DerefMut};

    /// A `KSPIN_LOCK` (one pointer-sized word, zero when free) and its value.
    pub struct Lock<T> {
        word: UnsafeCell<usize>,
        value: UnsafeCell<T>,
    }

    // SAFETY:
    // - The value is reached only through a `Guard`, which exists only while the
    //   kernel spin lock is held, so access to it is exclusive across threads.
    // - `T: Send` is required because the value moves between the threads that
    //   take the lock.
    unsafe impl<T: Send> Sync for Lock<T> {}
    // SAFETY: owning the lock owns the value; moving it moves `T`, which is `Send`.
    unsafe impl<T: Send> Send for Lock<T> {}

    pub struct Guard<'a, T> {
        lock: &'a Lock<T>,
        old_irql: u8,
    }

    impl<T> Lock<T> {
        pub const fn new(value: T) -> Self {
            Self {
                word: UnsafeCell::new(0),
                value: UnsafeCell::new(value),
            }
        }
        pub fn lock(&self) -> Guard<'_, T> {
            // The lock word lives inside `self`, which the returned guard borrows,
            // so it cannot move while held.
            let old_irql = backend::spin_lock_acquire(self.word.get());
            Guard {
                lock: self,
                old_irql,
            }
        }
        pub fn into_inner(self) -> T {
            self.value.into_inner()
        }
    }

    impl<T> Drop for Guard<'_, T> {
        fn drop(&mut self) {
            backend::spin_lock_release(self.lock.word.get(), self.old_irql);
        }
    }

    impl<T> Deref for Guard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            // SAFETY: the guard exists only while the spin lock is held (type
            // invariant), so no other reference to the value is live.
            unsafe { &*self.lock.value.get() }
        }
    }

    impl<T> DerefMut for Guard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            // SAFETY: as in `deref`; `&mut self` makes this the only reference
            // derived from this guard.
            unsafe { &mut *self.lock.value.get() }
        }
    }
}

#[cfg(test)]
#[cfg(not(loom))]
mod tests {
    use super::*;

    #[test]
    fn test_spin_lock_guards_mutual_exclusion() {
        let lock = Arc::new(SpinLock::new(0_u64));
        let threads: alloc::vec::Vec<_> = (0..4)
            .map(|_| {
                let lock = Arc::clone(&lock);
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        let mut guard = lock.lock();
                        let seen = *guard;
                        std::hint::spin_loop();
                        *guard = seen + 1;
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(*lock.lock(), 40_000);
    }

    #[test]
    fn test_spin_lock_released_by_guard_drop() {
        let lock = SpinLock::new(alloc::vec![1, 2]);
        {
            let mut guard = lock.lock();
            guard.push(3);
        }
        // Would deadlock if the first guard had not released the lock.
        assert_eq!(lock.lock().len(), 3);
        assert_eq!(lock.into_inner(), alloc::vec![1, 2, 3]);
    }
}
