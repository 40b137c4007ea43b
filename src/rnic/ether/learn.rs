//! The learning table: which peer each remote MAC address was last seen
//! behind, bounded in size, aged by a clock the caller supplies.
//!
//! * The table is allocated once, at its full capacity, when it is made;
//!   learning and lookup never allocate.
//! * Entries are kept sorted by address: a lookup is a binary search; an
//!   insertion shifts at most `capacity` small entries.
//! * Time is a `u64` in whatever unit the caller uses (the switch passes
//!   it through). An entry last seen at `seen` is *aged* at `now` when
//!   `now - seen > max_age`; an aged entry is never returned by a lookup and
//!   its slot is reused. A clock that goes backwards makes an entry young,
//!   never a panic.
//! * When the table is full and no entry has aged, a new address is **not**
//!   learned ([`Learned::TableFull`]): the addresses already known stay known
//!   and frames to the new one are flooded, which is correct, only slower.
//!   (Evicting instead would let a stream of forged source addresses flush
//!   every real one.)

use alloc::collections::TryReserveError;
use alloc::vec::Vec;

use super::mac::MacAddr;

/// Index of a peer in the switch's peer list.
pub type PeerIndex = u16;

#[derive(Clone, Copy, Debug)]
struct Entry {
    mac: MacAddr,
    peer: PeerIndex,
    seen: u64,
}

/// What [`LearnTable::learn`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Learned {
    /// The address was not known (or had aged): now it is.
    New,
    /// The address was known behind the same peer: its age is reset.
    Refreshed,
    /// The address was known behind another peer: it moved.
    Moved,
    /// The address is new but the table is full of live entries.
    TableFull,
}

/// A bounded MAC → peer table with aging.
#[derive(Debug)]
pub struct LearnTable {
    entries: Vec<Entry>,
    capacity: usize,
    max_age: u64,
}

impl LearnTable {
    /// A table of at most `capacity` entries, each valid for `max_age` clock
    /// units after it was last seen. Allocates its storage now, once.
    ///
    /// # Errors
    ///
    /// The allocation failed.
    pub fn new(capacity: usize, max_age: u64) -> Result<Self, TryReserveError> {
        let mut entries = Vec::new();
        entries.try_reserve_exact(capacity)?;
        Ok(Self {
            entries,
            capacity,
            max_age,
        })
    }

    /// The most entries the table holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Entries held, aged ones not yet reclaimed included.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn aged(&self, entry: &Entry, now: u64) -> bool {
        now.saturating_sub(entry.seen) > self.max_age
    }

    fn position(&self, mac: MacAddr) -> Result<usize, usize> {
        self.entries.binary_search_by(|e| e.mac.cmp(&mac))
    }

    /// The peer `mac` was last seen behind, unless unknown or aged at `now`.
    pub fn lookup(&self, mac: MacAddr, now: u64) -> Option<PeerIndex> {
        let at = self.position(mac).ok()?;
        let entry = self.entries.get(at)?;
        (!self.aged(entry, now)).then_some(entry.peer)
    }

    /// Records that a frame from `mac` arrived from `peer` at `now`.
    pub fn learn(&mut self, mac: MacAddr, peer: PeerIndex, now: u64) -> Learned {
        match self.position(mac) {
            Ok(at) => {
                let max_age = self.max_age;
                let Some(entry) = self.entries.get_mut(at) else {
                    return Learned::TableFull;
                };
                let was_aged = now.saturating_sub(entry.seen) > max_age;
                let moved = entry.peer != peer;
                entry.peer = peer;
                entry.seen = now;
                if was_aged {
                    Learned::New
                } else if moved {
                    Learned::Moved
                } else {
                    Learned::Refreshed
                }
            }
            Err(mut at) => {
                if self.entries.len() >= self.capacity {
                    if self.expire(now) == 0 {
                        return Learned::TableFull;
                    }
                    at = match self.position(mac) {
                        Ok(found) | Err(found) => found,
                    };
                }
                // Within the reserved capacity: no allocation.
                self.entries.insert(
                    at,
                    Entry {
                        mac,
                        peer,
                        seen: now,
                    },
                );
                Learned::New
            }
        }
    }

    /// Removes the entries aged at `now`; returns how many.
    pub fn expire(&mut self, now: u64) -> usize {
        let before = self.entries.len();
        let max_age = self.max_age;
        self.entries
            .retain(|e| now.saturating_sub(e.seen) <= max_age);
        before - self.entries.len()
    }

    /// Removes every entry behind `peer` (say, when the peer is removed).
    pub fn forget_peer(&mut self, peer: PeerIndex) {
        self.entries.retain(|e| e.peer != peer);
    }

    /// The live entries at `now`: address and peer, in address order.
    pub fn iter(&self, now: u64) -> impl Iterator<Item = (MacAddr, PeerIndex)> + '_ {
        self.entries
            .iter()
            .filter(move |e| !self.aged(e, now))
            .map(|e| (e.mac, e.peer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn mac(n: u32) -> MacAddr {
        let mut bytes = [0x02, 0, 0, 0, 0, 0];
        bytes[2..].copy_from_slice(&n.to_be_bytes());
        MacAddr(bytes)
    }

    /// A table of `capacity` entries that age after `max_age`, which has
    /// learned each `(mac, peer, now)` of `seen` in order.
    fn learned(capacity: usize, max_age: u64, seen: &[(u32, PeerIndex, u64)]) -> LearnTable {
        let mut t = LearnTable::new(capacity, max_age).unwrap();
        for &(n, peer, now) in seen {
            t.learn(mac(n), peer, now);
        }
        t
    }

    #[test]
    fn test_learn_then_lookup() {
        let mut t = LearnTable::new(4, 100).unwrap();
        assert_eq!(t.lookup(mac(1), 0), None);
        assert_eq!(t.learn(mac(1), 3, 0), Learned::New);
        assert_eq!(t.lookup(mac(1), 0), Some(3));
        assert_eq!(t.learn(mac(1), 3, 50), Learned::Refreshed);
        assert_eq!(t.learn(mac(1), 2, 60), Learned::Moved);
        assert_eq!(t.lookup(mac(1), 60), Some(2));
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn test_entries_age_from_last_seen() {
        let mut t = learned(4, 100, &[(1, 0, 10)]);
        assert_eq!(t.lookup(mac(1), 110), Some(0));
        assert_eq!(t.lookup(mac(1), 111), None);
        // Refreshing restarts the age.
        t.learn(mac(1), 0, 100);
        assert_eq!(t.lookup(mac(1), 200), Some(0));
        assert_eq!(t.lookup(mac(1), 201), None);
        // An aged entry relearned counts as new.
        assert_eq!(t.learn(mac(1), 1, 300), Learned::New);
        assert_eq!(t.lookup(mac(1), 300), Some(1));
    }

    #[test]
    fn test_clock_going_back_does_not_age_or_panic() {
        let mut t = learned(2, 5, &[(1, 0, 1_000)]);
        assert_eq!(t.lookup(mac(1), 0), Some(0));
        assert_eq!(t.expire(0), 0);
        let t = learned(2, u64::MAX, &[(1, 0, 0)]);
        assert_eq!(t.lookup(mac(1), u64::MAX), Some(0));
    }

    #[test]
    fn test_full_table_keeps_live_entries_and_refuses_new() {
        let mut t = LearnTable::new(3, 100).unwrap();
        for n in 0..3 {
            assert_eq!(t.learn(mac(n), 0, 0), Learned::New);
        }
        assert_eq!(t.learn(mac(9), 1, 50), Learned::TableFull);
        assert_eq!(t.lookup(mac(9), 50), None);
        for n in 0..3 {
            assert_eq!(t.lookup(mac(n), 50), Some(0));
        }
        // Known addresses are still refreshed and moved when full.
        assert_eq!(t.learn(mac(1), 1, 60), Learned::Moved);
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn test_full_table_reuses_aged_slots() {
        let mut t = learned(3, 100, &[(0, 0, 0), (1, 0, 0), (2, 0, 150)]);
        assert_eq!(t.learn(mac(9), 1, 200), Learned::New);
        assert_eq!(t.lookup(mac(9), 200), Some(1));
        assert_eq!(t.lookup(mac(2), 200), Some(0));
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn test_zero_capacity_learns_nothing() {
        let mut t = LearnTable::new(0, 100).unwrap();
        assert_eq!(t.learn(mac(1), 0, 0), Learned::TableFull);
        assert!(t.is_empty());
    }

    #[test]
    fn test_expire_and_forget_peer() {
        let mut t = learned(8, 10, &[(0, 0, 0), (1, 1, 15), (2, 1, 20)]);
        assert_eq!(t.expire(20), 1);
        assert_eq!(t.iter(20).collect::<Vec<_>>(), [(mac(1), 1), (mac(2), 1)]);
        t.forget_peer(1);
        assert!(t.is_empty());
    }

    #[derive(Clone, Debug)]
    enum Op {
        Learn(u8, PeerIndex, u64),
        Lookup(u8, u64),
        Expire(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..24, 0u16..4, 0u64..40).prop_map(|(m, p, dt)| Op::Learn(m, p, dt)),
            (0u8..24, 0u64..40).prop_map(|(m, dt)| Op::Lookup(m, dt)),
            (0u64..40).prop_map(Op::Expire),
        ]
    }

    proptest! {
        /// Against a model with no capacity limit: a lookup answers what the
        /// model answers, or nothing when the table was full at learning;
        /// the table never exceeds its capacity and never reallocates.
        #[test]
        fn prop_table_agrees_with_model(
            capacity in 0usize..10,
            max_age in 0u64..60,
            ops in proptest::collection::vec(op(), 0..200),
        ) {
            let mut t = LearnTable::new(capacity, max_age).unwrap();
            let storage = t.entries.as_ptr();
            let mut model: std::collections::BTreeMap<u8, (PeerIndex, u64)> =
                std::collections::BTreeMap::new();
            let mut now = 0u64;
            for op in ops {
                match op {
                    Op::Learn(m, p, dt) => {
                        now += dt;
                        let result = t.learn(mac(m.into()), p, now);
                        if result == Learned::TableFull {
                            model.remove(&m);
                        } else {
                            model.insert(m, (p, now));
                        }
                    }
                    Op::Lookup(m, dt) => {
                        now += dt;
                        let want = model
                            .get(&m)
                            .filter(|(_, seen)| now - seen <= max_age)
                            .map(|(p, _)| *p);
                        prop_assert_eq!(t.lookup(mac(m.into()), now), want);
                    }
                    Op::Expire(dt) => {
                        now += dt;
                        t.expire(now);
                    }
                }
                prop_assert!(t.len() <= capacity);
                prop_assert_eq!(t.entries.as_ptr(), storage);
            }
        }
    }
}
