//! A fixed-capacity FIFO ring, allocated once.

use alloc::boxed::Box;
use alloc::vec::Vec;

/// A FIFO of at most `capacity` values, allocated at creation.
///
/// # Invariants
/// `head < slots.len()` (or 0 when the capacity is 0) and `len <= slots.len()`;
/// the occupied slots are `head, head + 1, … (mod capacity)`, `len` of them,
/// each holding `Some`.
pub struct Ring<T> {
    slots: Box<[Option<T>]>,
    head: usize,
    len: usize,
}

impl<T> Ring<T> {
    /// An empty ring of `capacity` slots, or `None` when memory runs out.
    pub fn new(capacity: usize) -> Option<Self> {
        let mut slots = Vec::new();
        slots.try_reserve_exact(capacity).ok()?;
        slots.resize_with(capacity, || None);
        Some(Self {
            slots: slots.into_boxed_slice(),
            head: 0,
            len: 0,
        })
    }

    /// Slots.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Values held.
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether the ring is empty.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the ring is full.
    pub fn is_full(&self) -> bool {
        self.len == self.slots.len()
    }

    /// Slot index of the `n`th value from the head (also for `n == len`, the
    /// slot the next push fills).
    pub fn slot_of(&self, n: usize) -> usize {
        let cap = self.slots.len();
        if n < cap {
            // `head < cap` and `n < cap`: one subtraction wraps the sum. Every
            // per-request call is here; two divisions per call were a visible
            // share of the data path (docs/performance.md, "The send queue
            // per request").
            let at = self.head + n;
            if at >= cap { at - cap } else { at }
        } else if cap == 0 {
            0
        } else {
            (self.head + n % cap) % cap
        }
    }

    /// Appends; gives the value back when full.
    ///
    /// # Errors
    /// The value, when the ring is full.
    pub fn push(&mut self, value: T) -> Result<usize, T> {
        if self.is_full() {
            return Err(value);
        }
        let slot = self.slot_of(self.len);
        match self.slots.get_mut(slot) {
            Some(place) => {
                *place = Some(value);
                self.len += 1;
                Ok(slot)
            }
            None => Err(value),
        }
    }

    /// Removes the oldest value.
    pub fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let value = self.slots.get_mut(self.head)?.take();
        self.head = self.slot_of(1);
        self.len -= 1;
        value
    }

    /// The `n`th value from the head.
    pub fn get(&self, n: usize) -> Option<&T> {
        self.get_with_slot(n).map(|(_, value)| value)
    }

    /// The `n`th value from the head and its slot index.
    pub fn get_with_slot(&self, n: usize) -> Option<(usize, &T)> {
        if n >= self.len {
            return None;
        }
        let slot = self.slot_of(n);
        Some((slot, self.slots.get(slot)?.as_ref()?))
    }
}

#[cfg(test)]
mod slot_tests;

#[cfg(test)]
mod tests {
    use super::Ring;

    #[test]
    fn test_ring_is_fifo_and_bounded() {
        let mut ring = Ring::new(3).unwrap();
        assert_eq!(ring.push(1), Ok(0));
        assert_eq!(ring.push(2), Ok(1));
        assert_eq!(ring.pop(), Some(1));
        assert_eq!(ring.push(3), Ok(2));
        assert_eq!(ring.push(4), Ok(0), "wraps around");
        assert_eq!(ring.push(5), Err(5), "full");
        assert_eq!(ring.get(0), Some(&2));
        assert_eq!(ring.get(2), Some(&4));
        assert_eq!(ring.get(3), None);
        assert_eq!(
            (ring.pop(), ring.pop(), ring.pop(), ring.pop()),
            (Some(2), Some(3), Some(4), None)
        );
    }

    #[test]
    fn test_ring_of_zero_capacity_refuses_everything() {
        let mut ring = Ring::new(0).unwrap();
        assert_eq!(ring.push(1), Err(1));
        assert_eq!(ring.pop(), None);
    }
}
