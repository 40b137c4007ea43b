//! A monotonic clock in 100-nanosecond units (the kernel's interrupt time).

/// Time since an arbitrary start, in 100 ns units; never goes backwards.
pub fn now_100ns() -> u64 {
    super::backend::monotonic_100ns()
}

/// Sleeps for `duration` (100 ns units). PASSIVE_LEVEL only: the adapter
/// close handler waits with it for its objects' closes (L27).
pub fn sleep_passive_100ns(duration: u64) {
    super::backend::sleep_100ns(duration);
}

#[cfg(test)]
mod tests {
    #[test]
    fn test_clock_is_monotonic() {
        let a = super::now_100ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = super::now_100ns();
        assert!(b >= a + 10_000, "2 ms is 20 000 units, got {}", b - a);
    }
}
