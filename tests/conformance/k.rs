//! Family K of the rules catalogue (CQ management: reaping, resize, interrupt
//! moderation), through the C ABI. Completions come from a [`Spout`]: a
//! flushed, unconnected QP whose every receive completes at once,
//! cancelled, on the CQ under test.

use softndk::abi::*;

use super::harness::*;

/// A value no provider writes into a result it did not fill (K1).
const DIRTY: u8 = 0xA5;

/// GetCqResults into `room` entries prefilled with [`DIRTY`]: the count
/// returned and all `room` entries.
fn poll_dirty(cq: &Cq, room: usize) -> (usize, Vec<NdkResult>) {
    // SAFETY: a live CQ; `poll_prefilled` gives room for `room` results.
    poll_prefilled(room, DIRTY, |out, n| unsafe {
        (cq.d().ndk_get_cq_results)(cq.0, out, n)
    })
}

/// GetCqResultsEx into `room` entries prefilled with [`DIRTY`].
fn poll_ex_dirty(cq: &Cq, room: usize) -> (usize, Vec<NdkResultEx>) {
    // SAFETY: as above.
    poll_prefilled(room, DIRTY, |out, n| unsafe {
        (cq.d().ndk_get_cq_results_ex)(cq.0, out, n)
    })
}

/// Whether a result still holds the DIRTY bytes it was prefilled with.
fn untouched<T>(result: &T) -> bool {
    // SAFETY: a plain-data result viewed as its bytes.
    let bytes = unsafe {
        std::slice::from_raw_parts(std::ptr::from_ref(result).cast::<u8>(), size_of::<T>())
    };
    bytes.iter().all(|&b| b == DIRTY)
}

/// NdkControlCqInterruptModeration.
fn moderate(cq: &Cq, interval: u32, count: u32) -> NtStatus {
    // SAFETY: a live CQ.
    unsafe { (cq.d().ndk_control_cq_interrupt_moderation)(cq.0, interval, count) }
}

/// ResizeCq with its completion checked (L8): the outcome.
fn resize(cq: &Cq, depth: u32) -> NtStatus {
    let signal = Signal::new();
    // SAFETY: a live CQ; the signal outlives the completion.
    let status = unsafe { (cq.d().ndk_resize_cq)(cq.0, depth, Some(on_status), signal.ctx()) };
    settle(status, &signal)
}

/// Whether the adapter reports CQ interrupt moderation.
fn moderation_supported(adapter: &Adapter) -> bool {
    adapter
        .flags()
        .contains(AdapterFlags::CQ_INTERRUPT_MODERATION_SUPPORTED)
}

/// Request contexts of `results`, asserting each was cancelled (a Spout's).
fn cancelled(results: &[NdkResult]) -> Vec<usize> {
    results
        .iter()
        .map(|r| {
            assert_eq!(r.status, STATUS_CANCELLED);
            r.request_context as usize
        })
        .collect()
}

// rule K1
// see also P21
#[test]
fn k1_get_cq_results_removes_up_to_n_and_returns_how_many() {
    let spout = Spout::new(|adapter| adapter.cq(16));
    assert_eq!(poll_dirty(&spout.cq, 4).0, 0, "K1: 0 when empty");
    assert_eq!(poll_ex_dirty(&spout.cq, 4).0, 0, "K1: 0 when empty (Ex)");
    for context in 1..=5 {
        spout.emit(context);
    }
    let (n, results) = poll_dirty(&spout.cq, 3);
    assert_eq!(n, 3, "K1: up to nResults");
    assert_eq!(cancelled(&results[..3]), vec![1, 2, 3]);
    assert_eq!(results[0].qp_context as usize, 0x5B, "P21");
    let (n, results) = poll_ex_dirty(&spout.cq, 8);
    assert_eq!(n, 2, "K1: as many as there were");
    assert_eq!(results[0].request_context as usize, 4);
    assert_eq!(results[1].request_context as usize, 5);
    assert!(
        results[2..].iter().all(untouched),
        "K1: entries past the count written"
    );
    assert_eq!(poll_dirty(&spout.cq, 8).0, 0, "K1: removed");
    // A room of 0 takes nothing.
    spout.emit(6);
    assert_eq!(poll_dirty(&spout.cq, 0).0, 0);
    let (n, results) = poll_dirty(&spout.cq, 1);
    assert_eq!((n, cancelled(&results)), (1, vec![6]));
    spout.close();
}

// rule K2, L8
#[test]
fn k2_resize_above_max_cq_depth_is_invalid_parameter() {
    let spout = Spout::new(|adapter| adapter.cq(16));
    let max = spout.adapter.info().max_cq_depth;
    spout.emit(1);
    assert_eq!(resize(&spout.cq, max + 1), STATUS_INVALID_PARAMETER, "K2");
    assert_eq!(resize(&spout.cq, u32::MAX), STATUS_INVALID_PARAMETER, "K2");
    // Unchanged, and MaxCqDepth itself is fine.
    assert_eq!(cancelled(&spout.cq.poll(4)), vec![1]);
    assert_success!(resize(&spout.cq, max), "K2: MaxCqDepth");
    assert_success!(resize(&spout.cq, 16));
    spout.close();
}

// rule K3, K4
// see also A8
#[test]
fn k3_resize_on_an_adapter_reporting_cq_resize_supported() {
    let (spout, watch) = watched_spout(4);
    let flags = spout.adapter.flags();
    assert!(
        flags.contains(AdapterFlags::CQ_RESIZE_SUPPORTED),
        "K3: this consumer resizes only with the flag"
    );
    for context in 1..=3 {
        spout.emit(context);
    }
    // Grow with entries queued, add more than the old depth held.
    assert_success!(resize(&spout.cq, 8));
    for context in 4..=8 {
        spout.emit(context);
    }
    spout.cq.arm(NdkCqNotifyType::ERRORS);
    assert_eq!(
        settled(&watch).entered(),
        0,
        "K3: 8 entries fit the new depth"
    );
    // Shrink to exactly the count.
    assert_success!(resize(&spout.cq, 8));
    assert_eq!(cancelled(&spout.cq.poll(5)), vec![1, 2, 3, 4, 5]);
    assert_success!(resize(&spout.cq, 3), "K4: the count is 3");
    assert_eq!(cancelled(&spout.cq.poll(8)), vec![6, 7, 8]);
    // The new depth is in force: the fourth entry overflows (E10).
    for context in 9..=12 {
        spout.emit(context);
    }
    watch.wait_returned(1);
    assert_eq!(
        watch.all(),
        vec![STATUS_BUFFER_OVERFLOW],
        "E10 at the new depth"
    );
    spout.close();
}

// rule K4
#[test]
fn k4_resize_below_the_count_is_buffer_overflow_and_changes_nothing() {
    let (spout, watch) = watched_spout(8);
    for context in 1..=5 {
        spout.emit(context);
    }
    spout.cq.arm(NdkCqNotifyType::ERRORS);
    for depth in [4, 1] {
        assert_eq!(resize(&spout.cq, depth), STATUS_BUFFER_OVERFLOW, "K4");
    }
    // Unchanged: still depth 8 (three more fit), nothing lost, same order.
    for context in 6..=8 {
        spout.emit(context);
    }
    assert_eq!(settled(&watch).entered(), 0, "K4: the depth changed");
    assert_eq!(cancelled(&spout.cq.poll(16)), (1..=8).collect::<Vec<_>>());
    // And not more than 8 either.
    for context in 9..=17 {
        spout.emit(context);
    }
    watch.wait_returned(1);
    assert_eq!(
        watch.all(),
        vec![STATUS_BUFFER_OVERFLOW],
        "K4: depth 8 kept"
    );
    spout.close();
}

// rule K4, K1
#[test]
fn k4_resize_keeps_every_completion_in_order() {
    let spout = Spout::new(|adapter| adapter.cq(64));
    let mut expected = Vec::new();
    let mut got = Vec::new();
    let mut next = 1;
    // Resize with entries queued, then fill to the new depth: counts 0, 2,
    // 4, 6, 8 before the resizes, 7, 9, 11, 13, 15 after the emits.
    for depth in [48, 9, 64, 13, 15] {
        assert_success!(resize(&spout.cq, depth), "K4: depth {depth}");
        for _ in 0..7 {
            spout.emit(next);
            expected.push(next);
            next += 1;
        }
        got.extend(cancelled(&spout.cq.poll(5)));
    }
    got.extend(cancelled(&spout.cq.poll(64)));
    assert_eq!(got, expected, "K4: lost, reordered or duplicated");
    spout.close();
}

// rule K5
#[test]
fn k5_a_cq_starts_without_interrupt_moderation() {
    let (spout, watch) = watched_spout(64);
    // Unmoderated: every armed completion notifies at once, one at a time.
    for i in 1..=5 {
        spout.cq.arm(NdkCqNotifyType::ANY);
        spout.emit(i);
        watch.wait_returned(i);
        assert_eq!(cancelled(&spout.cq.poll(4)), vec![i]);
    }
    assert_eq!(watch.all(), vec![STATUS_SUCCESS; 5]);
    spout.close();
}

// rule K6, K8
#[test]
fn k6_both_knobs_unused_is_invalid_parameter_mix_where_supported() {
    let spout = Spout::new(|adapter| adapter.cq(16));
    let supported = moderation_supported(&spout.adapter);
    for (interval, count) in [(MAXULONG, MAXULONG), (MAXULONG, 17)] {
        let status = moderate(&spout.cq, interval, count);
        if supported {
            assert_eq!(status, STATUS_INVALID_PARAMETER_MIX, "K6");
        } else {
            assert_eq!(status, STATUS_NOT_SUPPORTED, "K8: no moderation flag");
        }
    }
    spout.close();
}

// rule K7, K8, K10
#[test]
fn k7_the_newest_settings_win_and_never_stall_notifications() {
    let (spout, watch) = watched_spout(64);
    let supported = moderation_supported(&spout.adapter);
    // Moderation on (count 32), then off: the newest call wins, so a single
    // completion notifies without waiting for 31 more.
    for (interval, count) in [(1_000_000, 32), (0, 0)] {
        let status = moderate(&spout.cq, interval, count);
        let expected = if supported {
            STATUS_SUCCESS
        } else {
            STATUS_NOT_SUPPORTED
        };
        assert_eq!(status, expected, "K8");
    }
    spout.cq.arm(NdkCqNotifyType::ANY);
    spout.emit(1);
    watch.wait_returned(1);
    // Moderation asked for a long interval: notifications may be delayed but
    // not indefinitely (K7); without support, they are not delayed at all.
    let _ = moderate(&spout.cq, 200, MAXULONG);
    spout.cq.arm(NdkCqNotifyType::ANY);
    spout.emit(2);
    watch.wait_returned(2);
    assert_eq!(cancelled(&spout.cq.poll(8)), vec![1, 2]);
    spout.close();
}

// rule K8, L10
#[test]
fn k8_moderation_without_the_flag_is_not_supported_and_never_pending() {
    let spout = Spout::new(|adapter| adapter.cq(16));
    let supported = moderation_supported(&spout.adapter);
    for interval in [0, 1, 100, 1_000_000, MAXULONG] {
        for count in [0, 1, 2, 16, 17, MAXULONG] {
            let status = moderate(&spout.cq, interval, count);
            assert_ne!(status, STATUS_PENDING, "K8: never pending");
            if !supported {
                assert_eq!(status, STATUS_NOT_SUPPORTED, "K8: ({interval}, {count})");
            } else if interval != MAXULONG || (count != MAXULONG && count <= 16) {
                assert!(
                    status == STATUS_SUCCESS || status == STATUS_INSUFFICIENT_RESOURCES,
                    "K8: ({interval}, {count}) -> {status:#x}"
                );
            }
        }
    }
    spout.close();
}

// rule K9, K10
// see also I6
#[test]
fn k9_moderation_misused_concurrently_stays_safe() {
    let (spout, watch) = watched_spout(512);
    let cq = &spout.cq;
    // A consumer breaking K9: calls without the flag, from two threads at
    // once on one CQ, while completions are queued and the CQ armed.
    let statuses: Vec<Vec<NtStatus>> = std::thread::scope(|s| {
        let callers: Vec<_> = (0..2_u32)
            .map(|t| s.spawn(move || (0..200).map(|i| moderate(cq, i * (t + 1), i % 7)).collect()))
            .collect();
        for context in 1..=300 {
            if context % 50 == 1 {
                spout.cq.arm(NdkCqNotifyType::ANY);
            }
            spout.emit(context);
        }
        callers.into_iter().map(|c| c.join().unwrap()).collect()
    });
    let supported = moderation_supported(&spout.adapter);
    for status in statuses.concat() {
        assert_ne!(status, STATUS_PENDING, "K8");
        if !supported {
            assert_eq!(status, STATUS_NOT_SUPPORTED, "K8");
        }
    }
    assert_eq!(
        cancelled(&spout.cq.wait_results(300)),
        (1..=300).collect::<Vec<_>>(),
        "K10"
    );
    assert!(!watch.overlapped());
    spout.close();
}

// rule K10, K1
#[test]
fn k10_moderation_never_loses_reorders_or_duplicates_completions() {
    let (spout, watch) = watched_spout(256);
    let mut got = Vec::new();
    let settings = [(0, 0), (10, 4), (MAXULONG, 8), (50, MAXULONG), (0, 1)];
    for (round, (interval, count)) in settings.into_iter().enumerate() {
        assert_ne!(moderate(&spout.cq, interval, count), STATUS_PENDING);
        spout.cq.arm(NdkCqNotifyType::ANY);
        for i in 0..40 {
            spout.emit(round * 100 + i);
        }
        watch.wait_returned(round + 1);
        got.extend(cancelled(&spout.cq.poll(7)));
    }
    got.extend(cancelled(&spout.cq.wait_results(5 * 40 - got.len())));
    let expected: Vec<usize> = (0..5)
        .flat_map(|round| (0..40).map(move |i| round * 100 + i))
        .collect();
    assert_eq!(got, expected, "K10");
    assert!(spout.cq.poll(4).is_empty(), "K10: duplicated");
    assert_eq!(
        watch.all(),
        vec![STATUS_SUCCESS; 5],
        "one notification per arm"
    );
    spout.close();
}
