//! Memory tokens (keys): allocation and lookup.
//!
//! A token is 32 bits: bit 31 says remote (a remote token is never accepted
//! locally and the other way round), bits 30..16 are the slot's generation and
//! bits 15..0 the slot index:
//!
//! ```text
//!  31 30            16 15             0
//! +--+----------------+----------------+
//! |R |   generation   |     index      |
//! +--+----------------+----------------+
//! ```
//!
//! Slots are reused in FIFO order, and every reuse bumps the slot's
//! generation, so a token only comes back after every slot of the table has
//! gone through all 32 767 generations — over two billion registrations with
//! the default table. A slot whose generation would wrap is retired for good
//! instead, so a stale token is *always* refused; the table then shrinks by one
//! slot, and allocation fails cleanly when none is left. (Linux rxe's 16-bit
//! index space overflowed after 65 536 registrations; here the index and the
//! generation never spill into each other.) Generation 0 is never used, so no
//! token is 0.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;

/// Bit that marks a remote token.
pub const REMOTE_BIT: u32 = 1 << 31;
const INDEX_BITS: u32 = 16;
const INDEX_MASK: u32 = (1 << INDEX_BITS) - 1;
const GENERATION_MASK: u32 = 0x7FFF;
/// Largest table: the index has 16 bits.
pub const MAX_SLOTS: usize = 1 << INDEX_BITS;

/// Why a key could not be allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyError {
    /// Every slot is in use (or retired).
    Exhausted,
    /// Pool memory for the table ran out.
    NoMemory,
}

struct Slot<T> {
    generation: u16,
    value: Option<T>,
}

/// A fixed-capacity table from token to `T`.
///
/// # Invariants
/// Every index in `free` names a slot whose `value` is `None`, and appears in
/// `free` once. A slot's generation is in `1..=0x7FFF` once it has been used.
pub struct KeyTable<T> {
    slots: Box<[Slot<T>]>,
    free: VecDeque<u16>,
}

impl<T> core::fmt::Debug for KeyTable<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KeyTable")
            .field("capacity", &self.slots.len())
            .field("free", &self.free.len())
            .finish()
    }
}

/// Builds a token from its parts.
const fn compose(index: u16, generation: u16) -> u32 {
    ((generation as u32 & GENERATION_MASK) << INDEX_BITS) | index as u32
}

/// The local form of a token (remote bit cleared).
#[must_use]
pub const fn local_form(key: u32) -> u32 {
    key & !REMOTE_BIT
}

/// Whether `key` is a remote token.
#[must_use]
pub const fn is_remote(key: u32) -> bool {
    key & REMOTE_BIT != 0
}

impl<T> KeyTable<T> {
    /// A table of `capacity` slots (at most [`MAX_SLOTS`]), allocated now.
    ///
    /// # Errors
    /// [`KeyError::NoMemory`] when the allocation fails.
    pub fn new(capacity: usize) -> Result<Self, KeyError> {
        let capacity = capacity.min(MAX_SLOTS);
        let mut slots = Vec::new();
        slots
            .try_reserve_exact(capacity)
            .map_err(|_| KeyError::NoMemory)?;
        slots.extend((0..capacity).map(|_| Slot {
            generation: 0,
            value: None,
        }));
        let mut free = VecDeque::new();
        free.try_reserve_exact(capacity)
            .map_err(|_| KeyError::NoMemory)?;
        // `capacity <= MAX_SLOTS`, so every index fits in 16 bits.
        free.extend((0..capacity).filter_map(|i| u16::try_from(i).ok()));
        Ok(Self {
            slots: slots.into_boxed_slice(),
            free,
        })
    }

    /// Stores `value` under a fresh token (local form) and returns the token.
    ///
    /// # Errors
    /// [`KeyError::Exhausted`] when no slot is free.
    pub fn insert(&mut self, value: T) -> Result<u32, KeyError> {
        loop {
            let index = self.free.pop_front().ok_or(KeyError::Exhausted)?;
            let Some(slot) = self.slots.get_mut(usize::from(index)) else {
                continue;
            };
            let next = slot.generation.wrapping_add(1);
            if u32::from(next) > GENERATION_MASK {
                // Retire: its every generation has been handed out once. Not
                // put back on the free list, so its tokens stay refused.
                continue;
            }
            slot.generation = next;
            slot.value = Some(value);
            return Ok(compose(index, next));
        }
    }

    /// The value under `key` (remote bit ignored), if the token is current.
    #[must_use]
    pub fn get(&self, key: u32) -> Option<&T> {
        let slot = self.slot(key)?;
        slot.value.as_ref()
    }

    /// Replaces the value under a current `key`; returns the old one.
    pub fn replace(&mut self, key: u32, value: T) -> Option<T> {
        let index = usize::try_from(key & INDEX_MASK).ok()?;
        let slot = self.slots.get_mut(index)?;
        if u32::from(slot.generation) != (local_form(key) >> INDEX_BITS) || slot.value.is_none() {
            return None;
        }
        slot.value.replace(value)
    }

    /// Frees the slot of a current `key` and returns its value; stale or
    /// unknown tokens give `None` and change nothing.
    pub fn remove(&mut self, key: u32) -> Option<T> {
        let index = u16::try_from(key & INDEX_MASK).ok()?;
        let slot = self.slots.get_mut(usize::from(index))?;
        if u32::from(slot.generation) != (local_form(key) >> INDEX_BITS) {
            return None;
        }
        let value = slot.value.take()?;
        // INVARIANT: the slot is empty again and goes back on the list once.
        self.free.push_back(index);
        Some(value)
    }

    /// Tokens in use.
    #[must_use]
    pub fn len(&self) -> usize {
        self.slots.iter().filter(|s| s.value.is_some()).count()
    }

    /// Whether no token is in use.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn slot(&self, key: u32) -> Option<&Slot<T>> {
        let index = usize::try_from(key & INDEX_MASK).ok()?;
        let slot = self.slots.get(index)?;
        (u32::from(slot.generation) == (local_form(key) >> INDEX_BITS)).then_some(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_tokens_are_nonzero_and_resolve() {
        let mut table = KeyTable::new(4).unwrap();
        let a = table.insert("a").unwrap();
        let b = table.insert("b").unwrap();
        assert_ne!(a, 0);
        assert_ne!(a, b);
        assert_eq!(table.get(a), Some(&"a"));
        assert_eq!(
            table.get(b | REMOTE_BIT),
            Some(&"b"),
            "lookup ignores the remote bit"
        );
        assert_eq!(table.len(), 2);
    }

    #[test]
    fn test_stale_token_is_refused_after_reuse() {
        let mut table = KeyTable::new(1).unwrap();
        let old = table.insert(1).unwrap();
        assert_eq!(table.remove(old), Some(1));
        assert_eq!(table.remove(old), None, "double free is refused");
        let new = table.insert(2).unwrap();
        assert_ne!(old, new, "same slot, new generation");
        assert_eq!(table.get(old), None);
        assert_eq!(
            table.remove(old),
            None,
            "stale token cannot free the new value"
        );
        assert_eq!(table.get(new), Some(&2));
    }

    #[test]
    fn test_exhaustion_is_an_error_not_a_panic() {
        let mut table = KeyTable::new(2).unwrap();
        table.insert(()).unwrap();
        table.insert(()).unwrap();
        assert_eq!(table.insert(()), Err(KeyError::Exhausted));
    }

    #[test]
    fn test_millions_of_registrations_never_repeat_a_live_or_recent_token() {
        // Rxe regression: its key space overflowed after 65 536 registrations.
        // Here 3 million register/deregister cycles over 64 slots each get a
        // token never seen before, until the slots retire.
        let mut table = KeyTable::new(64).unwrap();
        let mut seen = std::collections::HashSet::new();
        let mut live = VecDeque::new();
        let mut issued = 0_u64;
        for _ in 0..3_000_000 {
            match table.insert(()) {
                Ok(key) => {
                    assert!(seen.insert(key), "token {key:#x} handed out twice");
                    issued += 1;
                    live.push_back(key);
                }
                Err(e) => {
                    assert_eq!(e, KeyError::Exhausted);
                    break;
                }
            }
            if live.len() > 8 {
                let key = live.pop_front().unwrap();
                assert!(table.remove(key).is_some());
            }
        }
        // 64 slots x 32 767 generations, then every slot is retired.
        assert_eq!(issued, 64 * 32_767);
        for key in &seen {
            assert!(
                table.get(*key).is_none() || live.contains(key),
                "only live tokens resolve"
            );
        }
    }

    #[test]
    fn test_remote_bit_never_collides_with_index_or_generation() {
        let mut table = KeyTable::new(MAX_SLOTS).unwrap();
        for _ in 0..MAX_SLOTS {
            let key = table.insert(()).unwrap();
            assert!(!is_remote(key));
            assert_eq!(local_form(key | REMOTE_BIT), key);
        }
        assert_eq!(table.insert(()), Err(KeyError::Exhausted));
    }

    #[test]
    fn test_replace_keeps_the_token() {
        let mut table = KeyTable::new(2).unwrap();
        let key = table.insert(1).unwrap();
        assert_eq!(table.replace(key, 5), Some(1));
        assert_eq!(table.get(key), Some(&5));
        assert_eq!(
            table.replace(key.wrapping_add(1 << 16), 6),
            None,
            "stale generation"
        );
    }
}
