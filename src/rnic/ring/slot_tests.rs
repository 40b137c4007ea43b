//! `Ring::slot_of` wraps by comparison for every index below the capacity
//! (the per-request case) and by division beyond it: both agree with
//! `(head + n) mod capacity` wherever the head stands.

use super::Ring;

#[test]
fn test_slot_of_is_head_plus_n_modulo_capacity_for_every_head() {
    for cap in 1..=5_usize {
        let mut ring = Ring::new(cap).unwrap();
        for head in 0..cap {
            for n in 0..3 * cap {
                assert_eq!(
                    ring.slot_of(n),
                    (head + n) % cap,
                    "cap {cap} head {head} n {n}"
                );
            }
            // Moves the head one slot on.
            assert!(ring.push(head).is_ok());
            assert_eq!(ring.pop(), Some(head));
        }
    }
}

#[test]
fn test_get_with_slot_names_the_slot_push_filled() {
    let mut ring = Ring::new(3).unwrap();
    assert_eq!(ring.push('a'), Ok(0));
    assert_eq!(ring.pop(), Some('a'));
    let slots: Vec<_> = "bcd".chars().map(|c| ring.push(c).unwrap()).collect();
    assert_eq!(slots, [1, 2, 0]);
    for (n, (&slot, c)) in slots.iter().zip("bcd".chars()).enumerate() {
        assert_eq!(ring.get_with_slot(n), Some((slot, &c)));
    }
    assert_eq!(ring.get_with_slot(3), None);
    assert_eq!(Ring::<u8>::new(0).unwrap().slot_of(0), 0);
}
