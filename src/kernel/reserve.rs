//! The emergency reserve: a few small slots of the driver's own non-paged
//! memory that the kernel allocator hands out when the pool refuses a small
//! allocation (after retrying it), so that an allocation Rust treats as
//! infallible — an object's `Arc::new`, which no stable API lets fail — is
//! not the allocation error handler's panic, that is a bug check. While a
//! quarter of the reserve or more is in use, memory is *low*
//! ([`Slots::low`]): every create is refused with
//! `STATUS_INSUFFICIENT_RESOURCES` (L9) before it allocates, so the reserve
//! fills no further while the objects holding its slots live. A slot goes
//! back when the block in it is freed.
//!
//! Why a reserve at all: Driver Verifier's low resources simulation fails
//! pool allocations at random, and a consumer may create objects until the
//! pool runs out; neither may crash the machine (`docs/kernel.md`,
//! "Allocation failures"). Only blocks of at most [`SLOT`] bytes aligned to
//! at most [`ALIGN`] come from the reserve: every object the provider and
//! the RNIC make is smaller than that (the largest, a link, is under 1 KiB);
//! the larger buffers are allocated fallibly (`kernel::mem`).
//!
//! This module only counts slots (safe and testable on the host); the
//! memory behind them and the allocator that uses them are the Windows
//! global allocator's (`kernel::pool`).

use core::sync::atomic::{AtomicU64, Ordering};

/// Bytes of one slot.
pub const SLOT: usize = 1024;
/// Slots in the reserve (one bit each of a 64-bit word).
pub const SLOTS: usize = u64::BITS as usize;
/// The largest alignment a slot serves (the reserve's memory is aligned to
/// it, and `SLOT` is a multiple of it).
pub const ALIGN: usize = 64;
/// From this many slots in use on, memory is low: a quarter of them.
pub const LOW_AT: u32 = u64::BITS / 4;

/// Which slots are in use: bit `i` for slot `i`.
pub struct Slots(AtomicU64);

impl Slots {
    /// No slot in use.
    #[must_use]
    pub const fn new() -> Self {
        Self(AtomicU64::new(0))
    }

    /// Takes a free slot for a block of `size` bytes aligned to `align`:
    /// its index, or `None` when the block does not fit a slot or every
    /// slot is in use. Lock-free: a failed exchange means another caller
    /// took or gave a slot, and the retries are bounded.
    #[must_use]
    pub fn take(&self, size: usize, align: usize) -> Option<usize> {
        if size > SLOT || align > ALIGN {
            return None;
        }
        let mut used = self.0.load(Ordering::Acquire);
        for _ in 0..4 * SLOTS {
            if used == u64::MAX {
                return None;
            }
            let index = (!used).trailing_zeros();
            match self.0.compare_exchange_weak(
                used,
                used | (1 << index),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(index as usize),
                Err(now) => used = now,
            }
        }
        None
    }

    /// Gives slot `index` back (its block was freed).
    pub fn give(&self, index: usize) {
        if index < SLOTS {
            self.0.fetch_and(!(1 << index), Ordering::AcqRel);
        }
    }

    /// Slots in use.
    #[must_use]
    pub fn in_use(&self) -> u32 {
        self.0.load(Ordering::Acquire).count_ones()
    }

    /// Whether memory is low: [`LOW_AT`] slots or more in use.
    #[must_use]
    pub fn low(&self) -> bool {
        self.in_use() >= LOW_AT
    }
}

impl Default for Slots {
    fn default() -> Self {
        Self::new()
    }
}

/// The driver's reserve (its memory is the Windows allocator's).
pub static RESERVE: Slots = Slots::new();

#[cfg(test)]
mod tests {
    use super::{ALIGN, LOW_AT, SLOT, SLOTS, Slots};

    #[test]
    fn test_slots_are_handed_out_once_until_given_back() {
        let slots = Slots::new();
        let taken: Vec<usize> = (0..SLOTS).map(|_| slots.take(SLOT, 8).unwrap()).collect();
        let mut sorted = taken.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted, (0..SLOTS).collect::<Vec<_>>(), "each slot once");
        assert_eq!(slots.take(16, 8), None, "every slot in use");
        slots.give(taken[5]);
        assert_eq!(slots.take(16, 8), Some(taken[5]), "the slot given back");
        slots.give(SLOTS + 3);
        assert_eq!(
            slots.in_use() as usize,
            SLOTS,
            "an index out of range changes nothing"
        );
    }

    #[test]
    fn test_only_blocks_that_fit_a_slot_come_from_it() {
        let slots = Slots::new();
        assert_eq!(slots.take(SLOT + 1, 8), None, "too large");
        assert_eq!(slots.take(8, ALIGN * 2), None, "aligned beyond the reserve");
        assert_eq!(slots.take(SLOT, ALIGN), Some(0));
        assert_eq!(slots.take(0, 1), Some(1));
    }

    #[test]
    fn test_memory_is_low_from_a_quarter_of_the_reserve_on_rule_l9() {
        let slots = Slots::new();
        let mut taken = Vec::new();
        while slots.in_use() < LOW_AT - 1 {
            taken.push(slots.take(64, 8).unwrap());
        }
        assert!(!slots.low(), "below a quarter");
        taken.push(slots.take(64, 8).unwrap());
        assert!(slots.low(), "a quarter in use");
        slots.give(taken.pop().unwrap());
        assert!(!slots.low(), "low ends as slots come back");
    }

    #[test]
    fn test_two_threads_never_take_the_same_slot() {
        let slots = std::sync::Arc::new(Slots::new());
        let takers: Vec<_> = (0..2)
            .map(|_| {
                let slots = std::sync::Arc::clone(&slots);
                std::thread::spawn(move || {
                    (0..SLOTS / 2)
                        .filter_map(|_| slots.take(32, 8))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all: Vec<usize> = takers.into_iter().flat_map(|t| t.join().unwrap()).collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "no slot handed out twice");
        assert_eq!(slots.in_use() as usize, n);
    }
}
