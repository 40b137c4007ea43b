//! Models of the CQ's ring between pushers and pollers that share no lock
//! (the `head` / `tail` positions, the atomic slots): a poll racing pushes
//! sees every completion whole, once and in order (K1); an overflow happens
//! only when the ring is really full (E10); an arm racing a poll of the
//! fresh completion either fires or finds it polled, never neither (C4); a
//! resize racing a poll loses nothing (K4). Under `--cfg loom` every
//! interleaving is checked; without it the same bodies run once.

use super::hint_tests::model;
use super::*;
#[cfg(loom)]
use loom::thread;
#[cfg(not(loom))]
use std::thread;

/// Counts callbacks.
#[derive(Default)]
struct Count(AtomicUsize);

impl CqNotify for Count {
    fn notify(&self, _event: CqEvent) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    fn close_complete(&self) {}
}

/// A completion whose every field depends on `n`, so that a slot read
/// half-written (fields of two completions) does not pass for either.
fn distinct(n: usize) -> Completion {
    let mut c = Completion::new(
        STATUSES[n % STATUSES.len()],
        OPCODES[n % OPCODES.len()],
        100 + n,
        n,
    );
    c.bytes = u32::try_from(n).unwrap() * 7;
    c.invalidated_key = u32::try_from(n).unwrap() + 0x1000;
    c.solicited = n % 2 == 1;
    c
}

/// K1 across the lock-free hand-off: a poller racing a pusher on a ring
/// that wraps (depth 2, three completions) gets each completion whole, in
/// order, once; what it did not take is there afterwards.
#[test]
fn test_loom_ring_poll_racing_push_sees_whole_entries_in_order() {
    model(|| {
        let cq = Arc::new(Cq::new(2, Arc::new(Count::default())).unwrap());
        let pusher = {
            let cq = cq.clone();
            thread::spawn(move || {
                let mut pushed = 0;
                for n in 1..=3 {
                    // The third fits only once the poller freed a slot.
                    if cq.push(distinct(n)).is_ok() {
                        pushed += 1;
                    }
                }
                pushed
            })
        };
        let mut seen = Vec::new();
        let mut out = [FREE_SLOT; 2];
        for _ in 0..2 {
            let n = cq.poll(&mut out);
            seen.extend_from_slice(&out[..n]);
        }
        let count = pusher.join().unwrap();
        let n = cq.poll(&mut out);
        seen.extend_from_slice(&out[..n]);
        assert_eq!(seen.len(), count);
        let expected: Vec<Completion> = (1..=count).map(distinct).collect();
        assert_eq!(seen, expected);
        assert!(cq.is_empty());
    });
}

/// E10: two pushers serialized by the lock racing a poller on a ring of
/// one: a push overflows only if the other's completion was still queued,
/// and every completion that was queued is polled exactly once.
#[test]
fn test_loom_ring_overflow_only_when_full() {
    model(|| {
        let cq = Arc::new(Cq::new(1, Arc::new(Count::default())).unwrap());
        let pushers: Vec<_> = [1, 2]
            .into_iter()
            .map(|n| {
                let cq = cq.clone();
                thread::spawn(move || cq.push(distinct(n)).is_ok().then_some(n))
            })
            .collect();
        let mut seen = Vec::new();
        let mut out = [FREE_SLOT; 1];
        if cq.poll(&mut out) == 1 {
            seen.push(out[0]);
        }
        let queued: Vec<usize> = pushers
            .into_iter()
            .filter_map(|p| p.join().unwrap())
            .collect();
        if cq.poll(&mut out) == 1 {
            seen.push(out[0]);
        }
        assert!(!queued.is_empty(), "the first push always fits");
        // An overflow puts the CQ in error (E10); no overflow means both fit
        // because the poller took the first in between.
        assert_eq!(cq.is_error(), queued.len() == 1);
        let mut seen_n: Vec<usize> = seen.iter().map(|c| c.request_context).collect();
        seen_n.sort_unstable();
        let mut queued = queued;
        queued.sort_unstable();
        assert_eq!(seen_n, queued);
        for c in &seen {
            assert_eq!(*c, distinct(c.request_context));
        }
    });
}

/// C4: `arm(Any)` racing a poll of the one fresh completion: the arm fires
/// (the completion was still queued when it looked) or the poller got it;
/// never neither, and the callback runs at most once.
#[test]
fn test_loom_ring_arm_racing_poll_of_fresh_entry() {
    model(|| {
        let count = Arc::new(Count::default());
        let cq = Arc::new(Cq::new(2, count.clone()).unwrap());
        cq.push(distinct(1)).unwrap();
        let armer = {
            let cq = cq.clone();
            thread::spawn(move || cq.arm(ArmType::Any))
        };
        let mut out = [FREE_SLOT; 1];
        let polled = cq.poll(&mut out);
        armer.join().unwrap();
        let fired = count.0.load(Ordering::SeqCst);
        assert!(fired <= 1);
        assert!(
            fired == 1 || polled == 1,
            "fresh completion neither notified nor polled"
        );
        if polled == 1 {
            assert_eq!(out[0], distinct(1));
        }
    });
}

/// K4: a resize racing a poll and a push keeps every completion, in order.
#[test]
fn test_loom_ring_resize_racing_poll_keeps_order() {
    model(|| {
        let cq = Arc::new(Cq::new(2, Arc::new(Count::default())).unwrap());
        cq.push(distinct(1)).unwrap();
        let resizer = {
            let cq = cq.clone();
            thread::spawn(move || {
                cq.resize(3).unwrap();
                cq.push(distinct(2)).unwrap();
            })
        };
        let mut seen = Vec::new();
        let mut out = [FREE_SLOT; 2];
        let n = cq.poll(&mut out);
        seen.extend_from_slice(&out[..n]);
        resizer.join().unwrap();
        let n = cq.poll(&mut out);
        seen.extend_from_slice(&out[..n]);
        assert_eq!(seen, [distinct(1), distinct(2)]);
        assert_eq!(cq.depth(), 3);
    });
}

/// Every status and opcode survives a slot (the tables follow the
/// declaration order of the enums).
#[test]
fn test_ring_slot_round_trips_every_status_and_opcode() {
    let slot = Slot::free();
    for (i, status) in STATUSES.iter().enumerate() {
        for (j, opcode) in OPCODES.iter().enumerate() {
            let mut c = Completion::new(*status, *opcode, usize::MAX - i, j);
            c.bytes = u32::MAX - u32::try_from(j).unwrap();
            c.invalidated_key = u32::try_from(i).unwrap();
            c.solicited = (i + j) % 2 == 0;
            slot.store(&c);
            assert_eq!(slot.load(), c);
        }
    }
    assert_eq!(FREE_SLOT, {
        let free = Slot::free();
        free.load()
    });
}
