//! Family P of the rules catalogue, through the C ABI: work-request posting.

use softndk::abi::*;

use super::harness::*;

/// An inline SGE over `bytes` (the token is ignored, P12).
fn inline_sge(bytes: &[u8], token: u32) -> NdkSge {
    NdkSge {
        address: bytes.as_ptr() as u64,
        length: u32::try_from(bytes.len()).unwrap(),
        memory_region_token: token,
    }
}

/// Polls until every context of `wanted` appeared on `cq`, collecting
/// everything polled into `seen`.
fn wait_for(cq: &Cq, wanted: usize, seen: &mut Vec<NdkResultEx>) {
    let arrived = |seen: &[NdkResultEx]| seen.iter().any(|r| r.request_context as usize == wanted);
    wait_until(&format!("completion {wanted} did not arrive"), || {
        if arrived(seen) {
            return true;
        }
        seen.extend(cq.poll_ex(16));
        false
    });
}

/// P1: the initiator queue takes Send, SendAndInvalidate, Read, Write, Bind,
/// FastRegister and Invalidate, the receive queue takes Receive; initiator
/// completions go to the initiator CQ, receive completions to the receive CQ.
#[test]
fn p1_completions_reach_the_initiator_and_receive_cqs() {
    let (a, b) = Side::two();
    let a_rcq = a.adapter.cq(64);
    let a_icq = a.adapter.cq(64);
    let b_rcq = b.adapter.cq(64);
    let b_icq = b.adapter.cq(64);
    let own = RecvQueue::Own { depth: 16, sge: 4 };
    let a_qp = a.pd.try_qp(&a_rcq, &a_icq, own, 0xA1, 16, 4, 64).unwrap();
    let b_qp = b.pd.try_qp(&b_rcq, &b_icq, own, 0xB1, 16, 4, 64).unwrap();
    let link = a.connect(&a_qp, &b, &b_qp);
    let a_mem = Region::pattern(&a.pd, 4096, 1, MR_REMOTE);
    let b_mem = Region::pattern(&b.pd, 4096, 2, MR_REMOTE);
    let a_mw = a.pd.mw();
    let b_mw = b.pd.mw();
    let a_frmr = Frmr::new(&a.adapter, &a.pd, PAGE, 0, 4, false);

    // B's window, bound before A's SendAndInvalidate names it.
    let window = (&b_mem.mr, &b_mw, b_mem.remote(0), 512);
    b_qp.bound(&b_icq, 50, window, OP_REMOTE_READ);
    assert_success!(b_qp.receive(51, &[b_mem.sge(1024, 256)]));
    assert_success!(b_qp.receive(52, &[b_mem.sge(1280, 256)]));
    assert_success!(a_qp.receive(53, &[a_mem.sge(1024, 256)]));

    assert_success!(a_qp.send(1, &[a_mem.sge(0, 32)], 0));
    assert_success!(a_qp.send_and_invalidate(2, &[a_mem.sge(0, 32)], 0, b_mw.remote_token()));
    assert_success!(a_qp.write(3, &[a_mem.sge(0, 64)], b_mem.remote(2048), b_mem.token(), 0));
    assert_success!(a_qp.read(4, &[a_mem.sge(2048, 64)], b_mem.remote(0), b_mem.token(), 0));
    assert_success!(a_qp.bind(5, &a_mem.mr, &a_mw, a_mem.remote(0), 512, OP_REMOTE_READ));
    assert_success!(a_frmr.post(&a_qp, 6, 0));
    assert_success!(a_qp.invalidate(7, a_frmr.mr.header(), 0));
    assert_success!(b_qp.send(54, &[b_mem.sge(0, 16)], 0));

    let a_initiator = wait_results_ex(&a_icq, 7);
    assert_eq!(contexts_ex(&a_initiator), [1, 2, 3, 4, 5, 6, 7]);
    assert!(a_initiator.iter().all(|r| r.status == STATUS_SUCCESS));
    let b_received = wait_results_ex(&b_rcq, 2);
    assert_eq!(
        summary_ex(&b_received),
        [
            (51, STATUS_SUCCESS, NdkOperationType::RECEIVE),
            (52, STATUS_SUCCESS, NdkOperationType::RECEIVE_AND_INVALIDATE)
        ]
    );
    let b_initiator = wait_results_ex(&b_icq, 1);
    assert_eq!(contexts_ex(&b_initiator), [54]);
    let a_received = wait_results_ex(&a_rcq, 1);
    assert_eq!(
        summary_ex(&a_received),
        [(53, STATUS_SUCCESS, NdkOperationType::RECEIVE)]
    );
    for cq in [&a_rcq, &a_icq, &b_rcq, &b_icq] {
        assert_empty(cq);
    }

    a_frmr.close(&a.adapter);
    assert_closed([a_mw.close(), b_mw.close()]);
    a_mem.close();
    b_mem.close();
    link.close();
    assert_closed([a_qp.close(), b_qp.close()]);
    for cq in [a_rcq, a_icq, b_rcq, b_icq] {
        assert_close(cq.close());
    }
    a.close();
    b.close();
}

/// Request contexts of extended results.
fn contexts_ex(results: &[NdkResultEx]) -> Vec<usize> {
    results.iter().map(|r| r.request_context as usize).collect()
}

/// P2 (consumer): posts on different queues of one QP may overlap — Receives
/// on A's receive queue while Writes go to its initiator queue. A consumer
/// that breaks the rule (two threads on one initiator queue, two on one
/// receive queue) finds the provider still safe: every accepted post
/// completes exactly once.
#[test]
fn p2_concurrent_posts_on_one_queue_or_on_two_queues_complete_exactly_once() {
    let (pair, a_mem, b_mem) = pair_with_memory(8192, 3);
    let b_src = Region::pattern(&pair.b_pd, 4096, 4, MR_LOCAL_WRITE);
    let src: Vec<NdkSge> = (0..64).map(|i| a_mem.sge(i * 64, 64)).collect();
    let recv_a: Vec<NdkSge> = (0..32).map(|i| a_mem.sge(4096 + i * 64, 64)).collect();
    let recv_b: Vec<NdkSge> = (0..64).map(|i| b_mem.sge(4096 + i * 64, 64)).collect();
    let (remote, token) = (b_mem.remote(0), b_mem.token());
    let accepted = std::sync::Mutex::new(Vec::new());
    let start = Barrier::new(4);
    std::thread::scope(|s| {
        // Breach: two threads on A's initiator queue.
        for t in 0..2_usize {
            let (a_qp, src, accepted, start) = (&pair.a_qp, &src, &accepted, &start);
            s.spawn(move || {
                start.wait();
                for i in 0..100 {
                    let context = 1000 * (t + 1) + i;
                    let status = a_qp.write(
                        context,
                        &[src[i % 64]],
                        remote + 64 * (i as u64 % 64),
                        token,
                        0,
                    );
                    assert!(
                        status == STATUS_SUCCESS || status == STATUS_NO_MORE_ENTRIES,
                        "{status:#x}"
                    );
                    if status == STATUS_SUCCESS {
                        accepted.lock().unwrap().push(context);
                    }
                }
            });
        }
        // Allowed: A's receive queue at the same time.
        let (a_qp, b_qp, recv_a, start) = (&pair.a_qp, &pair.b_qp, &recv_a, &start);
        s.spawn(move || {
            start.wait();
            for (i, sge) in recv_a.iter().enumerate() {
                assert_success!(a_qp.receive(5000 + i, &[*sge]));
            }
        });
        // Breach: B's receive queue from two threads (the main one too).
        let recv_b = &recv_b;
        s.spawn(move || {
            start.wait();
            for i in (0..64).step_by(2) {
                assert_success!(b_qp.receive(7000 + i, &[recv_b[i]]));
            }
        });
        for i in (1..64).step_by(2) {
            assert_success!(pair.b_qp.receive(7000 + i, &[recv_b[i]]));
        }
    });
    let mut expected = accepted.into_inner().unwrap();
    // B's 32 Sends consume A's 32 receives.
    for i in 0..32 {
        assert_success!(pair.b_qp.send(9000 + i, &[b_src.sge(i * 64, 64)], 0));
    }
    // A's 64 Sends consume B's 64 receives.
    for (i, sge) in src.iter().enumerate() {
        assert_success!(with_room(|| pair.a_qp.send(3000 + i, &[*sge], 0)));
        expected.push(3000 + i);
    }
    let a_done = pair.a_cq.wait_results(expected.len() + 32);
    expected.extend(5000..5032);
    expected.sort_unstable();
    assert_eq!(
        sorted_contexts(&a_done),
        expected,
        "each accepted post exactly once"
    );
    let b_done = pair.b_cq.wait_results(64 + 32);
    let mut b_expected: Vec<usize> = (7000..7064).chain(9000..9032).collect();
    b_expected.sort_unstable();
    assert_eq!(sorted_contexts(&b_done), b_expected);
    pair.assert_cqs_empty();
    for region in [a_mem, b_mem, b_src] {
        region.close();
    }
    pair.teardown();
}

/// P3: the posting paths stay memory-safe when P2 is broken: two threads
/// send on one initiator queue (inline and SGE data) while two threads post
/// on the peer's receive queue; every message arrives whole, exactly once.
#[test]
fn p3_breached_serialization_stays_memory_safe() {
    const PER_THREAD: usize = 32;
    const LEN: usize = 64;
    let pair = Pair::new();
    let a_src = Region::new(&pair.a_pd, 2 * PER_THREAD * LEN, 0, MR_LOCAL_WRITE);
    let mut a_src = a_src;
    for id in 0..2 * PER_THREAD {
        a_src.bytes_mut()[id * LEN..(id + 1) * LEN].fill(id as u8 + 1);
    }
    let b_recv = Region::new(&pair.b_pd, 2 * PER_THREAD * LEN, 0, MR_LOCAL_WRITE);
    let src: Vec<NdkSge> = (0..2 * PER_THREAD)
        .map(|id| a_src.sge(id * LEN, LEN))
        .collect();
    let slots: Vec<NdkSge> = (0..2 * PER_THREAD)
        .map(|slot| b_recv.sge(slot * LEN, LEN))
        .collect();
    let start = &Barrier::new(4);
    // Over iWARP a Send that finds no receive posted ends the connection
    // (RFC 5040 §7), so B's two threads finish posting before A's start;
    // each queue is still posted to by two threads at once (the rule's
    // point). On the fabric a Send waits for its receive: all four race.
    let receives_first = Transport::default() == Transport::Iwarp;
    let posted = &Barrier::new(4);
    std::thread::scope(|s| {
        for t in 0..2 {
            let (a_qp, b_qp, src) = (&pair.a_qp, &pair.b_qp, &src);
            s.spawn(move || {
                start.wait();
                if receives_first {
                    posted.wait();
                }
                for k in 0..PER_THREAD {
                    let id = t * PER_THREAD + k;
                    let status = if k % 2 == 0 {
                        // Inline: the thread's own copy of the bytes.
                        let bytes = [id as u8 + 1; LEN];
                        a_qp.send(id, &[inline_sge(&bytes, 0)], INLINE)
                    } else {
                        a_qp.send(id, &[src[id]], 0)
                    };
                    assert_success!(status);
                }
            });
            let slots = &slots;
            s.spawn(move || {
                start.wait();
                for k in 0..PER_THREAD {
                    let slot = t * PER_THREAD + k;
                    assert_success!(b_qp.receive(100 + slot, &[slots[slot]]));
                }
                if receives_first {
                    posted.wait();
                }
            });
        }
    });
    let sent = pair.a_cq.wait_results(2 * PER_THREAD);
    assert_eq!(
        sorted_contexts(&sent),
        (0..2 * PER_THREAD).collect::<Vec<_>>()
    );
    assert!(sent.iter().all(|r| r.status == STATUS_SUCCESS));
    let received = pair.b_cq.wait_results(2 * PER_THREAD);
    let mut ids = Vec::new();
    for r in &received {
        assert_eq!(
            (r.status, r.bytes_transferred as usize),
            (STATUS_SUCCESS, LEN)
        );
        let slot = r.request_context as usize - 100;
        let bytes = &b_recv.bytes()[slot * LEN..(slot + 1) * LEN];
        assert!(bytes.iter().all(|&b| b == bytes[0]), "a torn message");
        ids.push(usize::from(bytes[0]) - 1);
    }
    ids.sort_unstable();
    assert_eq!(ids, (0..2 * PER_THREAD).collect::<Vec<_>>());
    teardown_with_regions(pair, [a_src, b_recv]);
}

/// Posts with `post`, again while the initiator queue is full (P24: with
/// the deferred engine the earlier requests may not have run yet), waiting
/// (bounded, [`WAIT`]) for the engine to make room; returns the last status.
fn with_room(mut post: impl FnMut() -> NtStatus) -> NtStatus {
    wait_some("the queue stays full", || {
        Some(post()).filter(|&status| status != STATUS_NO_MORE_ENTRIES)
    })
}

/// How many Writes [`race_posts`] posts, and after how many the race starts.
const RACED: usize = 300;
const RACE_AFTER: usize = 100;

/// Posts [`RACED`] Writes of `sge` to the start of `target` (contexts
/// `0..RACED`) from a thread; after [`RACE_AFTER`] posts the thread and the
/// main thread meet, and the main thread runs `race` while the thread goes
/// on posting. Returns the contexts accepted and the statuses refused.
fn race_posts(
    pair: &Pair,
    sge: NdkSge,
    target: &Region,
    race: impl FnOnce(),
) -> (Vec<usize>, Vec<NtStatus>) {
    let (remote, token) = (target.remote(0), target.token());
    let meet = Barrier::new(2);
    let a_qp = &pair.a_qp;
    std::thread::scope(|s| {
        let poster = s.spawn(|| {
            let mut accepted = Vec::new();
            let mut refused = Vec::new();
            for i in 0..RACED {
                if i == RACE_AFTER {
                    meet.wait();
                }
                // A full queue is not the race under test.
                match with_room(|| a_qp.write(i, &[sge], remote, token, 0)) {
                    STATUS_SUCCESS => accepted.push(i),
                    status => refused.push(status),
                }
            }
            (accepted, refused)
        });
        meet.wait();
        race();
        poster.join().unwrap()
    })
}

/// Waits for A's completions of the posts `accepted` names: each exactly
/// once, each successful or cancelled (P4, P5).
fn expect_each_completed_once(pair: &Pair, accepted: &[usize]) {
    let done = pair.a_cq.wait_results(accepted.len());
    assert_eq!(
        sorted_contexts(&done),
        accepted,
        "each accepted post exactly once"
    );
    expect_completed_or_cancelled(&done);
}

/// P4: NdkFlush racing a work-request call on the same QP: each racing
/// request is refused inline or accepted and completed exactly once
/// (cancelled if the flush caught it) — never lost, never twice.
#[test]
fn p4_flush_racing_posts_loses_and_duplicates_nothing() {
    let (pair, a_src, b_mem) = pair_with_memory(4096, 5);
    let sge = a_src.sge(0, 64);
    let (accepted, refused) = race_posts(&pair, sge, &b_mem, || pair.a_qp.flush());
    expect_each_completed_once(&pair, &accepted);
    // Refused posts (none expected: a flushed QP accepts and cancels) left
    // no entry: the accepted ones account for every entry.
    assert_eq!(accepted.len() + refused.len(), RACED);
    assert_empty(&pair.a_cq);
    // Once the flush has returned, a post is accepted and cancelled.
    assert_success!(
        pair.a_qp
            .write(1000, &[sge], b_mem.remote(0), b_mem.token(), 0)
    );
    assert_eq!(
        summary(&pair.a_cq.wait_results(1)),
        [(1000, STATUS_CANCELLED)]
    );
    teardown_closing(pair, [a_src, b_mem]);
}

/// P5: closing the QP's connector racing work-request calls: same guarantee
/// as P4; a post the close refused fails with STATUS_CONNECTION_INVALID (X5).
#[test]
fn p5_connector_close_racing_posts_loses_and_duplicates_nothing() {
    let (pair, a_src, b_mem) = pair_with_memory(4096, 6);
    let sge = a_src.sge(0, 64);
    let mut closing = None;
    let (accepted, refused) = race_posts(&pair, sge, &b_mem, || {
        closing = Some(close_connector_async(&pair.a_conn));
    });
    for status in &refused {
        assert_eq!(*status, STATUS_CONNECTION_INVALID);
    }
    expect_each_completed_once(&pair, &accepted);
    assert_empty(&pair.a_cq);
    a_src.close();
    b_mem.close();
    teardown_after(
        pair,
        Early {
            a_qp: None,
            a_conn: closing,
        },
    );
}

/// P6: a work-request call that returns STATUS_SUCCESS is followed by
/// exactly one CQ entry (none with SILENT_SUCCESS when it succeeds); one that
/// returns a failure leaves no trace — on both queues and for every kind of
/// request.
#[test]
fn p6_success_means_exactly_one_entry_failure_means_none() {
    let (pair, a_mem, b_mem) = pair_with_memory(8192, 7);
    let a_mw = pair.a_pd.mw();
    let a_frmr = Frmr::new(&pair.a, &pair.a_pd, PAGE, 0, 4, false);
    let qp = &pair.a_qp;
    let five: Vec<NdkSge> = (0..5).map(|i| a_mem.sge(i * 8, 8)).collect();
    let (remote, token) = (b_mem.remote(0), b_mem.token());
    // B's receive for Send 15: over iWARP before the Send (one that finds
    // no receive ends the connection, RFC 5040 §7); on the fabric after
    // (the Send waits for it).
    let b_receive = || assert_success!(pair.b_qp.receive(20, &[b_mem.sge(4096, 64)]));
    let iwarp = Transport::default() == Transport::Iwarp;
    if iwarp {
        b_receive();
    }
    let posts: Vec<(usize, NtStatus, NtStatus)> = vec![
        (1, a_mem_receive(qp, &a_mem, 1, 1), STATUS_SUCCESS),
        (2, qp.receive(2, &five), STATUS_DATA_OVERRUN),
        (
            3,
            qp.write(3, &[a_mem.sge(0, 64)], remote, token, 0),
            STATUS_SUCCESS,
        ),
        (4, qp.write(4, &five, remote, token, 0), STATUS_DATA_OVERRUN),
        (
            5,
            qp.read(5, &[a_mem.sge(4096, 64)], remote, token, UNKNOWN_FLAG),
            STATUS_INVALID_PARAMETER,
        ),
        (
            6,
            qp.read(6, &[a_mem.sge(4096, 64)], remote, token, 0),
            STATUS_SUCCESS,
        ),
        (
            7,
            qp.bind(7, &a_mem.mr, &a_mw, a_mem.remote(0), 512, OP_REMOTE_READ),
            STATUS_SUCCESS,
        ),
        (
            8,
            qp.bind(8, &a_mem.mr, &a_mw, a_mem.remote(8000), 512, OP_REMOTE_READ),
            STATUS_INVALID_PARAMETER,
        ),
        (9, qp.invalidate(9, a_mw.header(), 0), STATUS_SUCCESS),
        (
            10,
            a_frmr.post(qp, 10, OP_REMOTE_READ),
            STATUS_ACCESS_VIOLATION,
        ),
        (11, a_frmr.post(qp, 11, 0), STATUS_SUCCESS),
        (
            12,
            qp.invalidate(12, a_mem.mr.header(), 0),
            STATUS_INVALID_PARAMETER,
        ),
        (
            13,
            qp.invalidate(13, a_frmr.mr.header(), SILENT),
            STATUS_SUCCESS,
        ),
        (
            14,
            qp.write(14, &[a_mem.sge(0, 64)], remote, token, SILENT),
            STATUS_SUCCESS,
        ),
        (15, qp.send(15, &[a_mem.sge(0, 64)], 0), STATUS_SUCCESS),
    ];
    for (context, got, want) in &posts {
        assert_eq!(got, want, "post {context}");
    }
    // B's receive for Send 15 (on the fabric), B's Send for A's receive 1.
    if !iwarp {
        b_receive();
    }
    assert_success!(pair.b_qp.send(21, &[b_mem.sge(4096, 8)], 0));
    // Entries for every success that was not silent: 1, 3, 6, 7, 9, 11, 15.
    let done = pair.a_cq.wait_results(7);
    assert_eq!(sorted_contexts(&done), [1, 3, 6, 7, 9, 11, 15]);
    assert!(done.iter().all(|r| r.status == STATUS_SUCCESS));
    assert_eq!(sorted_contexts(&pair.b_cq.wait_results(2)), [20, 21]);
    pair.assert_cqs_empty();
    a_frmr.close(&pair.a);
    assert_close(a_mw.close());
    teardown_with_regions(pair, [a_mem, b_mem]);
}

/// A Receive of 64 bytes at `slot` × 64 of `region`.
fn a_mem_receive(qp: &Qp, region: &Region, context: usize, slot: usize) -> NtStatus {
    qp.receive(context, &[region.sge(6144 + slot * 64, 64)])
}

/// P7: every initiator request posted on a QP that is not connected fails
/// inline with STATUS_CONNECTION_INVALID and leaves no CQ entry.
#[test]
fn p7_initiator_post_on_unconnected_qp_fails_connection_invalid() {
    let pair = Pair::new();
    let qp = pair.a_pd.qp(&pair.a_cq, &pair.a_cq, 0xC);
    let kit = Kit::new(&pair.a, &pair.a_pd);
    kit.assert_all_refused(&qp, 0, "never connected");
    // Two variants the kit does not post: an inline Send, a deferred Write.
    let sge = [kit.mem.sge(0, 64)];
    let (remote, token) = (kit.mem.remote(1024), kit.mem.token());
    let variants = [
        ("Send inline", qp.send(8, &sge, INLINE)),
        ("deferred Write", qp.write(9, &sge, remote, token, DEFER)),
    ];
    for (name, status) in variants {
        assert_eq!(status, STATUS_CONNECTION_INVALID, "{name}");
    }
    assert_empty(&pair.a_cq);
    kit.close(&pair.a);
    assert_close(qp.close());
    assert_empty(&pair.a_cq);
    pair.teardown();
}

/// P8: a Receive may be posted before its QP is connected; it is consumed by
/// the first Send once the connection is up.
#[test]
fn p8_receive_posted_before_connect_is_used_after() {
    let f = Fixture::new().unconnected();
    let src = Region::pattern(&f.a.pd, 4096, 9, MR_LOCAL_WRITE);
    let dst = Region::new(&f.b.pd, 4096, 0, MR_LOCAL_WRITE);
    assert_success!(f.b_qp.receive(1, &[dst.sge(0, 4096)]));
    assert_success!(f.a_qp.receive(2, &[src.sge(2048, 1024)]));
    assert_empty(&f.b.cq);
    let link = f.connect();
    assert_success!(f.a_qp.send(3, &[src.sge(0, 1000)], 0));
    assert_eq!(summary(&f.a.cq.wait_results(1)), [(3, STATUS_SUCCESS)]);
    let got = f.b.cq.wait_results(1);
    assert_eq!(summary(&got), [(1, STATUS_SUCCESS)]);
    assert_eq!(got[0].bytes_transferred, 1000);
    assert_eq!(&dst.bytes()[..1000], &src.bytes()[..1000]);
    src.close();
    dst.close();
    link.close();
    f.close();
}

/// P9: a non-inline request carries at most as many SGEs as its queue
/// allows — the QP's initiator SGE count, the adapter's MaxReadRequestSge
/// for Reads, the QP's receive SGE count for Receives; a breach is refused
/// inline with STATUS_DATA_OVERRUN (NDSPI v2) and leaves no entry.
#[test]
fn p9_too_many_sges_refused_with_data_overrun() {
    let (pair, a_mem, b_mem) = pair_with_patterns(8192, 10, 11);
    let info = pair.a.info();
    let read_max = info.max_read_request_sge as usize;
    let sges = |n: usize, at: usize| -> Vec<NdkSge> {
        (0..n).map(|i| a_mem.sge(at + i * 16, 16)).collect()
    };
    let qp = &pair.a_qp;
    let (remote, token) = (b_mem.remote(0), b_mem.token());
    // The Pair's QPs take 4 SGEs per initiator request and per receive.
    assert_eq!(qp.send(1, &sges(5, 0), 0), STATUS_DATA_OVERRUN);
    assert_eq!(
        qp.send_and_invalidate(2, &sges(5, 0), 0, 1),
        STATUS_DATA_OVERRUN
    );
    assert_eq!(
        qp.write(3, &sges(5, 0), remote, token, 0),
        STATUS_DATA_OVERRUN
    );
    assert_eq!(qp.receive(4, &sges(5, 4096)), STATUS_DATA_OVERRUN);
    assert_eq!(
        qp.read(5, &sges(read_max + 1, 4096), remote, token, 0),
        STATUS_DATA_OVERRUN
    );
    assert_eq!(
        qp.read(6, &sges(33, 4096), remote, token, 0),
        STATUS_DATA_OVERRUN
    );
    assert_empty(&pair.a_cq);
    // At the limits: accepted. A Read takes more SGEs than other requests
    // when MaxReadRequestSge is larger.
    assert_success!(qp.write(7, &sges(4, 0), remote, token, 0));
    assert_success!(qp.read(8, &sges(read_max, 4096), remote, token, 0));
    let done = pair.a_cq.wait_results(2);
    assert_eq!(summary(&done), [(7, STATUS_SUCCESS), (8, STATUS_SUCCESS)]);
    assert_eq!(&b_mem.bytes()[..64], &a_mem.bytes()[..64]);
    assert_eq!(
        &a_mem.bytes()[4096..4096 + 16 * read_max],
        &b_mem.bytes()[..16 * read_max]
    );
    assert_success!(qp.receive(9, &sges(4, 4096)));
    teardown_with_regions(pair, [a_mem, b_mem]);
}

/// P10: the SGEs of one request add up to at most MaxTransferLength bytes; a
/// breach is refused inline with STATUS_BUFFER_OVERFLOW (NDSPI v2), on every
/// request that carries SGEs.
#[test]
fn p10_transfer_above_max_transfer_length_refused_with_buffer_overflow() {
    let pair = Pair::new();
    let max = pair.a.info().max_transfer_length as usize;
    let a_mem = Region::new(&pair.a_pd, 4096, 0, MR_LOCAL_WRITE);
    let b_mem = Region::new(&pair.b_pd, 4096, 0, MR_REMOTE);
    let over = [a_mem.sge(0, max / 2 + 1), a_mem.sge(0, max / 2 + 1)];
    let exact = [a_mem.sge(0, max / 2), a_mem.sge(0, max - max / 2)];
    let qp = &pair.a_qp;
    let (remote, token) = (b_mem.remote(0), b_mem.token());
    assert_eq!(qp.send(1, &over, 0), STATUS_BUFFER_OVERFLOW);
    assert_eq!(
        qp.send_and_invalidate(2, &over, 0, 1),
        STATUS_BUFFER_OVERFLOW
    );
    assert_eq!(qp.write(3, &over, remote, token, 0), STATUS_BUFFER_OVERFLOW);
    assert_eq!(qp.read(4, &over, remote, token, 0), STATUS_BUFFER_OVERFLOW);
    assert_eq!(qp.receive(5, &over), STATUS_BUFFER_OVERFLOW);
    assert_empty(&pair.a_cq);
    // Exactly MaxTransferLength is within the limit (the receive is only
    // queued; the teardown cancels it).
    assert_success!(qp.receive(6, &exact));
    teardown_with_regions(pair, [a_mem, b_mem]);
}

/// P11: an SGE with an MR's token addresses a range within that region's
/// span (registered or fast-registered); one with the PD's privileged token
/// addresses adapter logical addresses from a LAM.
#[test]
fn p11_sges_address_registered_fast_registered_and_lam_memory() {
    let (pair, a_mem, b_mem) = pair_with_memory(8192, 12);
    let mut lam_buffer = Buffer::pattern(PAGE, 0, 13);
    let (status, mut lam, fbo) = pair.a.build_lam(&mut lam_buffer);
    assert_success!(status);
    let pages = lam_pages(&lam);
    let mut frmr = Frmr::new(&pair.a, &pair.a_pd, PAGE, 0, 4, false);
    for (i, byte) in frmr.buffer.bytes_mut().iter_mut().enumerate() {
        *byte = (i % 251) as u8;
    }
    assert_success!(frmr.post(&pair.a_qp, 1, 0));
    let privileged = NdkSge {
        address: pages[0] + u64::from(fbo) + 100,
        length: 200,
        memory_region_token: pair.a_pd.privileged_token(),
    };
    let (remote, token) = (b_mem.remote(0), b_mem.token());
    let qp = &pair.a_qp;
    assert_success!(qp.write(2, &[a_mem.sge(1000, 300)], remote, token, 0));
    assert_success!(qp.write(3, &[privileged], b_mem.remote(1024), token, 0));
    assert_success!(qp.write(4, &[frmr.sge(500, 300)], b_mem.remote(2048), token, 0));
    let done = pair.a_cq.wait_results(4);
    assert_eq!(request_contexts(&done), [1, 2, 3, 4]);
    assert!(done.iter().all(|r| r.status == STATUS_SUCCESS));
    assert_eq!(&b_mem.bytes()[..300], &a_mem.bytes()[1000..1300]);
    assert_eq!(&b_mem.bytes()[1024..1224], &lam_buffer.bytes()[100..300]);
    assert_eq!(&b_mem.bytes()[2048..2348], &frmr.buffer.bytes()[500..800]);
    frmr.close(&pair.a);
    pair.a.release_lam(&mut lam);
    teardown_with_regions(pair, [a_mem, b_mem]);

    // An SGE reaching one byte past its region, and a privileged-token SGE
    // outside every LAM, are refused: the request fails (local access).
    for case in 0..2 {
        let pair = Pair::new();
        let a_mem = Region::pattern(&pair.a_pd, 4096, 14, MR_LOCAL_WRITE);
        let b_mem = Region::new(&pair.b_pd, 8192, 0, MR_REMOTE);
        let sge = if case == 0 {
            a_mem.sge(4000, 97)
        } else {
            NdkSge {
                address: a_mem.remote(0),
                length: 64,
                memory_region_token: pair.a_pd.privileged_token(),
            }
        };
        let status = pair
            .a_qp
            .write(5, &[sge], b_mem.remote(0), b_mem.token(), 0);
        if status == STATUS_SUCCESS {
            assert_eq!(
                summary(&pair.a_cq.wait_results(1)),
                [(5, STATUS_ACCESS_VIOLATION)],
                "case {case}"
            );
        } else {
            assert_eq!(status, STATUS_ACCESS_VIOLATION, "case {case}");
        }
        assert!(b_mem.bytes().iter().all(|&b| b == 0), "case {case}");
        teardown_closing(pair, [a_mem, b_mem]);
    }
}

/// P12: with INLINE the provider copies the bytes before the call returns,
/// ignores the SGE tokens, accepts more SGEs than MaxInitiatorRequestSge
/// (also more than any request carries) and requires the total to fit the
/// QP's InlineDataSize (else STATUS_BUFFER_OVERFLOW).
#[test]
fn p12_inline_send_copies_ignores_tokens_and_takes_extra_sges() {
    let pair = Pair::new();
    let b_recv = Region::new(&pair.b_pd, 4096, 0, MR_LOCAL_WRITE);
    // Six SGEs (the QP takes 4 otherwise), unregistered memory, junk tokens.
    let mut chunks: Vec<Vec<u8>> = (0..6).map(|i| vec![0x10 + i as u8; 20]).collect();
    let sges: Vec<NdkSge> = chunks.iter().map(|c| inline_sge(c, 0xDEAD_BEEF)).collect();
    // On the fabric, posted before B has a receive: the Send waits, so the
    // engine moves the data only after the buffers below are overwritten.
    // Over iWARP a Send finding no receive terminates the connection (RFC
    // 5040 §7), so B's receives come first there; the buffers are still
    // overwritten right after the post returned.
    let receive = || {
        assert_success!(pair.b_qp.receive(10, &[b_recv.sge(0, 256)]));
        assert_success!(pair.b_qp.receive(11, &[b_recv.sge(256, 256)]));
    };
    let receives_first = Transport::default() == Transport::Iwarp;
    if receives_first {
        receive();
    }
    assert_success!(pair.a_qp.send(1, &sges, INLINE));
    for chunk in &mut chunks {
        chunk.fill(0xEE);
    }
    drop(chunks);
    // Forty SGEs, more than any request carries.
    let small: Vec<[u8; 3]> = (0..40).map(|i| [i as u8; 3]).collect();
    let many: Vec<NdkSge> = small.iter().map(|c| inline_sge(c, 0)).collect();
    assert_success!(pair.a_qp.send(2, &many, INLINE));
    // Above the QP's inline size (256): refused, no entry.
    let big = [0_u8; 257];
    assert_eq!(
        pair.a_qp.send(3, &[inline_sge(&big, 0)], INLINE),
        STATUS_BUFFER_OVERFLOW
    );
    let halves = [inline_sge(&big[..200], 0), inline_sge(&big[200..], 0)];
    assert_eq!(pair.a_qp.send(4, &halves, INLINE), STATUS_BUFFER_OVERFLOW);
    if !receives_first {
        receive();
    }
    let got = pair.b_cq.wait_results(2);
    assert_eq!(summary(&got), [(10, STATUS_SUCCESS), (11, STATUS_SUCCESS)]);
    assert_eq!(
        (got[0].bytes_transferred, got[1].bytes_transferred),
        (120, 120)
    );
    let expected: Vec<u8> = (0..6).flat_map(|i| [0x10 + i as u8; 20]).collect();
    assert_eq!(&b_recv.bytes()[..120], &expected[..]);
    let expected: Vec<u8> = (0..40).flat_map(|i| [i as u8; 3]).collect();
    assert_eq!(&b_recv.bytes()[256..376], &expected[..]);
    assert_eq!(
        summary(&pair.a_cq.wait_results(2)),
        [(1, STATUS_SUCCESS), (2, STATUS_SUCCESS)]
    );
    assert_empty(&pair.a_cq);
    teardown_with_regions(pair, [b_recv]);
}

/// P13: INLINE is accepted on Write too: the bytes land at the remote
/// address; the QP's inline size bounds it.
#[test]
fn p13_inline_write_accepted() {
    let pair = Pair::new();
    let b_mem = Region::new(&pair.b_pd, 4096, 0, MR_REMOTE);
    let mut bytes: Vec<u8> = (0..100).map(|i| i as u8 ^ 0x5C).collect();
    let original = bytes.clone();
    let (remote, token) = (b_mem.remote(300), b_mem.token());
    assert_success!(pair.a_qp.write(
        1,
        &[inline_sge(&bytes[..60], 0), inline_sge(&bytes[60..], 7)],
        remote,
        token,
        INLINE
    ));
    bytes.fill(0);
    let big = [1_u8; 257];
    assert_eq!(
        pair.a_qp
            .write(2, &[inline_sge(&big, 0)], remote, token, INLINE),
        STATUS_BUFFER_OVERFLOW
    );
    assert_eq!(summary(&pair.a_cq.wait_results(1)), [(1, STATUS_SUCCESS)]);
    assert_eq!(&b_mem.bytes()[300..400], &original[..]);
    assert_empty(&pair.a_cq);
    teardown_with_regions(pair, [b_mem]);
}

/// P14: with SILENT_SUCCESS a request that succeeds produces no CQ entry;
/// one that fails still produces an entry with its error status.
#[test]
fn p14_silent_success_suppresses_only_successful_entries() {
    only_on_fabric!(
        "a remote error is the failing request's status on the fabric; over iWARP the request completes once sent and the target's Terminate aborts the connection (RFC 5040)"
    );
    let (pair, a_mem, b_mem) = pair_with_memory(4096, 15);
    let (remote, token) = (b_mem.remote(0), b_mem.token());
    let qp = &pair.a_qp;
    assert_success!(pair.b_qp.receive(50, &[b_mem.sge(2048, 512)]));
    assert_success!(qp.write(1, &[a_mem.sge(0, 64)], remote, token, SILENT));
    assert_success!(qp.send(2, &[a_mem.sge(64, 64)], SILENT));
    assert_success!(qp.write(3, &[a_mem.sge(128, 64)], b_mem.remote(128), token, 0));
    // The peer still sees the silent Send.
    assert_eq!(summary(&pair.b_cq.wait_results(1)), [(50, STATUS_SUCCESS)]);
    assert_eq!(summary(&pair.a_cq.wait_results(1)), [(3, STATUS_SUCCESS)]);
    assert_eq!(&b_mem.bytes()[..64], &a_mem.bytes()[..64]);
    assert_eq!(&b_mem.bytes()[2048..2112], &a_mem.bytes()[64..128]);
    // A silent request that fails reports its error.
    assert_success!(qp.write(4, &[a_mem.sge(0, 64)], remote, token ^ 0x0F0F, SILENT));
    assert_eq!(
        summary(&pair.a_cq.wait_results(1)),
        [(4, STATUS_ACCESS_VIOLATION)]
    );
    assert_empty(&pair.a_cq);
    teardown_closing(pair, [a_mem, b_mem]);
}

/// P15: a silent request that is flushed (or cancelled after the connection
/// ended) has failed, so it does produce an entry: STATUS_CANCELLED.
#[test]
fn p15_cancelled_silent_request_produces_an_entry() {
    only_on_fabric!(
        "a remote error is the failing request's status on the fabric; over iWARP the request completes once sent and the target's Terminate aborts the connection (RFC 5040)"
    );
    let (pair, a_mem, b_mem) = pair_with_memory(4096, 16);
    let qp = &pair.a_qp;
    // B posts no receive: the silent Send waits, and the silent Write
    // behind it waits too (P23).
    assert_success!(qp.send(1, &[a_mem.sge(0, 64)], SILENT));
    assert_success!(qp.write(
        2,
        &[a_mem.sge(0, 64)],
        b_mem.remote(0),
        b_mem.token(),
        SILENT
    ));
    qp.flush();
    assert_eq!(
        summary(&pair.a_cq.wait_results(2)),
        [(1, STATUS_CANCELLED), (2, STATUS_CANCELLED)]
    );
    // After the flush: accepted and cancelled, with an entry.
    let status = qp.write(
        3,
        &[a_mem.sge(0, 64)],
        b_mem.remote(0),
        b_mem.token(),
        SILENT,
    );
    if status == STATUS_SUCCESS {
        assert_eq!(summary(&pair.a_cq.wait_results(1)), [(3, STATUS_CANCELLED)]);
    }
    assert_empty(&pair.a_cq);
    teardown_closing(pair, [a_mem, b_mem]);
}

/// P16: with READ_FENCE a request does not start before every earlier Read
/// of the QP completed: a fenced Write of a Read's sink carries the bytes
/// the Read fetched.
#[test]
fn p16_read_fence_orders_after_earlier_reads() {
    let (pair, sink, b_mem) = pair_reading(8192, 17);
    let token = b_mem.token();
    let qp = &pair.a_qp;
    for round in 0..4_usize {
        let at = round * 512;
        assert_success!(qp.read(
            10 * round,
            &[sink.sge(at, 512)],
            b_mem.remote(at),
            token,
            DEFER
        ));
        let flags = if round % 2 == 0 { FENCE } else { FENCE | DEFER };
        assert_success!(qp.write(
            10 * round + 1,
            &[sink.sge(at, 512)],
            b_mem.remote(4096 + at),
            token,
            flags
        ));
    }
    // Close the last chain.
    assert_eq!(
        qp.send_and_invalidate(99, &[], UNKNOWN_FLAG, 0),
        STATUS_INVALID_PARAMETER
    );
    let done = pair.a_cq.wait_results(8);
    assert_eq!(request_contexts(&done), [0, 1, 10, 11, 20, 21, 30, 31]);
    assert!(done.iter().all(|r| r.status == STATUS_SUCCESS));
    assert_eq!(&b_mem.bytes()[4096..6144], &b_mem.bytes()[..2048]);
    teardown_with_regions(pair, [sink, b_mem]);
}

/// P17: SEND_AND_SOLICIT_EVENT on Send or SendAndInvalidate makes the
/// peer's receive completion solicited: it satisfies a SOLICITED arm there;
/// an unsolicited one does not.
#[test]
fn p17_solicited_send_satisfies_the_peers_solicited_arm() {
    let (pair, a_mem, b_mem) = pair_with_memory(4096, 18);
    let b_mw = pair.b_pd.mw();
    assert_success!(
        pair.b_qp
            .bind(5, &b_mem.mr, &b_mw, b_mem.remote(0), 256, OP_REMOTE_READ)
    );
    for i in 0..3 {
        assert_success!(pair.b_qp.receive(i + 1, &[b_mem.sge(1024 + i * 256, 256)]));
    }
    assert_eq!(summary(&pair.b_cq.wait_results(1)), [(5, STATUS_SUCCESS)]);
    pair.b_cq.arm(NdkCqNotifyType::SOLICITED);
    assert_success!(pair.a_qp.send(10, &[a_mem.sge(0, 32)], 0));
    assert_eq!(summary(&pair.b_cq.wait_results(1)), [(1, STATUS_SUCCESS)]);
    assert!(pair.b_cq.notifications().is_empty(), "unsolicited receive");
    assert_success!(pair.a_qp.send(11, &[a_mem.sge(0, 32)], SOLICIT));
    assert_success!(pair.b_cq.1.wait());
    assert_eq!(summary(&pair.b_cq.wait_results(1)), [(2, STATUS_SUCCESS)]);
    pair.b_cq.arm(NdkCqNotifyType::SOLICITED);
    assert_success!(pair.a_qp.send_and_invalidate(
        12,
        &[a_mem.sge(0, 32)],
        SOLICIT,
        b_mw.remote_token()
    ));
    assert_success!(pair.b_cq.1.wait_nth(2));
    assert_eq!(summary(&pair.b_cq.wait_results(1)), [(3, STATUS_SUCCESS)]);
    assert_eq!(request_contexts(&pair.a_cq.wait_results(3)), [10, 11, 12]);
    assert_eq!(pair.b_cq.notifications().len(), 2);
    assert_close(b_mw.close());
    teardown_with_regions(pair, [a_mem, b_mem]);
}

/// Posts work requests and records which must produce an entry.
struct Poster {
    next: usize,
    expected: Vec<usize>,
}

impl Poster {
    /// Posts through `post` with `flags`: it must succeed, whatever
    /// documented flag it carries (P18); SILENT_SUCCESS means no entry. A
    /// deferred post is followed by `close` (a request without the flag).
    fn post(
        &mut self,
        name: &str,
        flags: u32,
        post: impl FnOnce(usize, u32) -> NtStatus,
        close: &dyn Fn(usize) -> NtStatus,
    ) {
        self.next += 1;
        assert_success!(post(self.next, flags), "{name} with {flags:#x}");
        if flags & SILENT == 0 {
            self.expected.push(self.next);
        }
        if flags & DEFER != 0 {
            self.next += 1;
            assert_success!(close(self.next), "closing Write");
            self.expected.push(self.next);
        }
    }
}

/// P18: every work request accepts each flag its page documents (ndk-abi.md
/// §5.3), alone and together; a documented flag never makes a post fail, and
/// each is honoured (silent requests leave no entry, the others complete).
#[test]
fn p18_every_documented_flag_is_accepted() {
    let (pair, a_src, b_mem) = pair_with_patterns(8192, 19, 20);
    let a_sink = Region::new(&pair.a_pd, 8192, 0, MR_LOCAL_WRITE);
    let b_recv = Region::new(&pair.b_pd, 32 * 64, 0, MR_LOCAL_WRITE);
    let a_mw = pair.a_pd.mw();
    let a_frmr = Frmr::new(&pair.a, &pair.a_pd, 2 * PAGE, 0, 4, true);
    let b_mw = pair.b_pd.mw();
    let qp = &pair.a_qp;
    let (remote, token) = (b_mem.remote(0), b_mem.token());
    for slot in 0..32 {
        assert_success!(pair.b_qp.receive(1000 + slot, &[b_recv.sge(slot * 64, 64)]));
    }
    let close = |c: usize| qp.write(c, &[a_src.sge(0, 8)], remote, token, 0);
    let mut p = Poster {
        next: 0,
        expected: Vec::new(),
    };
    let mut sends = 0;
    let mut b_seen = Vec::new();
    let mut b_context = 2000;

    let send_flags = [
        SILENT,
        FENCE,
        SOLICIT,
        INLINE,
        DEFER,
        SILENT | FENCE | SOLICIT | INLINE | DEFER,
    ];
    for flags in send_flags {
        p.post(
            "Send",
            flags,
            |c, f| qp.send(c, &[a_src.sge(0, 32)], f),
            &close,
        );
        sends += 1;
    }
    for flags in send_flags {
        // A fresh window at B for each SendAndInvalidate to invalidate.
        if sends > 6 {
            wait_for(&pair.b_cq, 1000 + sends - 1, &mut b_seen);
        }
        b_context += 1;
        assert_success!(pair.b_qp.bind(
            b_context,
            &b_mem.mr,
            &b_mw,
            b_mem.remote(0),
            256,
            OP_REMOTE_READ
        ));
        wait_for(&pair.b_cq, b_context, &mut b_seen);
        let b_token = b_mw.remote_token();
        p.post(
            "SendAndInvalidate",
            flags,
            |c, f| qp.send_and_invalidate(c, &[a_src.sge(0, 32)], f, b_token),
            &close,
        );
        sends += 1;
    }
    for flags in [
        SILENT,
        FENCE,
        READ_LOCAL_INVALIDATE,
        DEFER,
        SILENT | FENCE | READ_LOCAL_INVALIDATE | DEFER,
    ] {
        p.post(
            "Read",
            flags,
            |c, f| qp.read(c, &[a_sink.sge(0, 256)], remote, token, f),
            &close,
        );
    }
    for flags in [
        SILENT,
        FENCE,
        INLINE,
        DEFER,
        SILENT | FENCE | INLINE | DEFER,
    ] {
        p.post(
            "Write",
            flags,
            |c, f| qp.write(c, &[a_src.sge(0, 64)], b_mem.remote(4096), token, f),
            &close,
        );
    }
    let unbind_mw = |c: usize| qp.invalidate(c, a_mw.header(), 0);
    for flags in [
        SILENT,
        FENCE,
        OP_REMOTE_READ,
        OP_REMOTE_WRITE,
        DEFER,
        SILENT | FENCE | OP_REMOTE_WRITE | DEFER,
    ] {
        p.post(
            "Bind",
            flags,
            |c, f| qp.bind(c, &a_src.mr, &a_mw, a_src.remote(0), 4096, f),
            &close,
        );
        p.post("Invalidate (unbind)", 0, |c, _| unbind_mw(c), &close);
    }
    for flags in [
        SILENT,
        FENCE,
        OP_REMOTE_READ,
        OP_LOCAL_WRITE,
        OP_REMOTE_WRITE,
        READ_SINK,
        DEFER,
        SILENT | FENCE | OP_REMOTE_READ | OP_REMOTE_WRITE | READ_SINK | DEFER,
    ] {
        p.post("FastRegister", flags, |c, f| a_frmr.post(qp, c, f), &close);
        p.post(
            "Invalidate (FRMR)",
            0,
            |c, _| qp.invalidate(c, a_frmr.mr.header(), 0),
            &close,
        );
    }
    for flags in [SILENT, FENCE, DEFER, SILENT | FENCE | DEFER] {
        p.post(
            "Bind (for Invalidate)",
            0,
            |c, _| qp.bind(c, &a_src.mr, &a_mw, a_src.remote(0), 4096, OP_REMOTE_READ),
            &close,
        );
        p.post(
            "Invalidate",
            flags,
            |c, f| qp.invalidate(c, a_mw.header(), f),
            &close,
        );
    }

    let done = pair.a_cq.wait_results(p.expected.len());
    assert_eq!(request_contexts(&done), p.expected);
    assert!(done.iter().all(|r| r.status == STATUS_SUCCESS));
    assert_empty(&pair.a_cq);
    // Every Send arrived (silent or not), SendAndInvalidates as such.
    let sends_seen = |seen: &[NdkResultEx]| {
        seen.iter()
            .filter(|r| (1000..2000).contains(&(r.request_context as usize)))
            .count()
    };
    wait_until("every Send received at B", || {
        if sends_seen(&b_seen) >= sends {
            return true;
        }
        b_seen.extend(pair.b_cq.poll_ex(16));
        false
    });
    let received: Vec<_> = b_seen
        .iter()
        .filter(|r| (r.request_context as usize) < 2000)
        .collect();
    assert_eq!(received.len(), sends);
    assert!(
        received
            .iter()
            .all(|r| r.status == STATUS_SUCCESS && r.bytes_transferred == 32)
    );
    let invalidated = received
        .iter()
        .filter(|r| r.type_ == NdkOperationType::RECEIVE_AND_INVALIDATE)
        .count();
    assert_eq!(invalidated, send_flags.len());
    assert_eq!(&a_sink.bytes()[..256], &b_mem.bytes()[..256]);
    assert_eq!(&b_mem.bytes()[4096..4160], &a_src.bytes()[..64]);

    a_frmr.close(&pair.a);
    assert_closed([a_mw.close(), b_mw.close()]);
    for region in [a_src, a_sink, b_mem, b_recv] {
        region.close();
    }
    pair.teardown();
}

/// P19: Read and Write name the peer's memory by a 64-bit address in host
/// byte order — here the region's base plus offsets the consumer added — and
/// the opaque remote token.
#[test]
fn p19_remote_address_in_host_order_with_consumer_offset() {
    let (pair, a_mem, b_mem) = pair_with_patterns(8192, 21, 22);
    let token = b_mem.token();
    let base = b_mem.buffer.va();
    let qp = &pair.a_qp;
    let offsets = [0_usize, 100, 777, 4088, 5000, 8176];
    for (i, offset) in offsets.into_iter().enumerate() {
        assert_success!(qp.write(i, &[a_mem.sge(i * 16, 16)], base + offset as u64, token, 0));
    }
    assert_eq!(
        request_contexts(&pair.a_cq.wait_results(6)),
        [0, 1, 2, 3, 4, 5]
    );
    for (i, offset) in offsets.into_iter().enumerate() {
        let expected = &a_mem.bytes()[i * 16..i * 16 + 16];
        assert_eq!(
            &b_mem.bytes()[offset..offset + 16],
            expected,
            "offset {offset}"
        );
    }
    assert_success!(qp.read(9, &[a_mem.sge(4096, 100)], base + 6000, token, 0));
    assert_eq!(summary(&pair.a_cq.wait_results(1)), [(9, STATUS_SUCCESS)]);
    assert_eq!(&a_mem.bytes()[4096..4196], &b_mem.bytes()[6000..6100]);
    teardown_with_regions(pair, [a_mem, b_mem]);
}

/// P20: a Read reaching past the end of the remote region fails with
/// STATUS_REMOTE_RESOURCES — inline if the provider can tell at post time,
/// else as its completion status.
#[test]
fn p20_read_past_the_remote_region_fails_remote_resources() {
    let (pair, sink, b_mem) = pair_reading(4096, 23);
    let status = pair.a_qp.read(
        1,
        &[sink.sge(0, 256)],
        b_mem.remote(4096 - 100),
        b_mem.token(),
        0,
    );
    if status == STATUS_SUCCESS {
        assert_eq!(
            summary(&pair.a_cq.wait_results(1)),
            [(1, STATUS_REMOTE_RESOURCES)]
        );
    } else {
        assert_eq!(status, STATUS_REMOTE_RESOURCES);
    }
    assert_empty(&pair.a_cq);
    teardown_closing(pair, [sink, b_mem]);
}

/// P21: every entry carries the post's RequestContext and the QPContext of
/// the QP's creation; a receive's BytesTransferred is the bytes placed.
#[test]
fn p21_entries_carry_request_and_qp_context_and_receive_bytes() {
    let (pair, a_mem, b_mem) = pair_with_memory(4096, 24);
    let odd = [usize::MAX, 0, 0x1234_5678_9ABC, 1];
    // Scatter across two SGEs; a zero-length Send; two ordinary ones.
    assert_success!(
        pair.b_qp
            .receive(odd[0], &[b_mem.sge(0, 200), b_mem.sge(1024, 200)])
    );
    assert_success!(pair.b_qp.receive(odd[1], &[b_mem.sge(2048, 64)]));
    assert_success!(pair.b_qp.receive(odd[2], &[b_mem.sge(3072, 64)]));
    assert_success!(pair.a_qp.send(odd[3], &[a_mem.sge(0, 300)], 0));
    assert_success!(pair.a_qp.send(odd[2], &[], 0));
    assert_success!(pair.a_qp.send(odd[0], &[a_mem.sge(300, 17)], 0));
    let sent = pair.a_cq.wait_results(3);
    for (r, context) in sent.iter().zip([odd[3], odd[2], odd[0]]) {
        assert_eq!(r.request_context as usize, context);
        assert_eq!(r.qp_context as usize, 0xA);
        assert_success!(r.status);
    }
    let got = pair.b_cq.wait_results(3);
    let seen: Vec<_> = got
        .iter()
        .map(|r| {
            (
                r.request_context as usize,
                r.qp_context as usize,
                r.bytes_transferred,
            )
        })
        .collect();
    assert_eq!(
        seen,
        [(odd[0], 0xB, 300), (odd[1], 0xB, 0), (odd[2], 0xB, 17)]
    );
    assert_eq!(&b_mem.bytes()[..200], &a_mem.bytes()[..200]);
    assert_eq!(&b_mem.bytes()[1024..1124], &a_mem.bytes()[200..300]);
    assert_eq!(&b_mem.bytes()[3072..3089], &a_mem.bytes()[300..317]);
    teardown_with_regions(pair, [a_mem, b_mem]);
}

/// P22: in NDK_RESULT_EX, Type names the completed operation; the sender's
/// completion of a SendAndInvalidate has type Send.
#[test]
fn p22_result_ex_type_names_the_operation() {
    let (pair, a_mem, b_mem) = pair_with_patterns(4096, 25, 26);
    let a_mw = pair.a_pd.mw();
    let a_frmr = Frmr::new(&pair.a, &pair.a_pd, PAGE, 0, 4, false);
    let b_mw = pair.b_pd.mw();
    let window = (&b_mem.mr, &b_mw, b_mem.remote(0), 64);
    pair.b_qp.bound(&pair.b_cq, 100, window, OP_REMOTE_READ);
    assert_success!(pair.b_qp.receive(101, &[b_mem.sge(1024, 64)]));
    assert_success!(pair.b_qp.receive(102, &[b_mem.sge(2048, 64)]));
    let (remote, token) = (b_mem.remote(3072), b_mem.token());
    let qp = &pair.a_qp;
    post_one_of_each(
        qp,
        (&a_mem, &a_mw, &a_frmr),
        (remote, token),
        b_mw.remote_token(),
    );
    use NdkOperationType as T;
    assert_eq!(
        summary_ex(&wait_results_ex(&pair.a_cq, 8)),
        [
            (1, STATUS_SUCCESS, T::SEND),
            (2, STATUS_SUCCESS, T::SEND),
            (3, STATUS_SUCCESS, T::WRITE),
            (4, STATUS_SUCCESS, T::READ),
            (5, STATUS_SUCCESS, T::BIND),
            (6, STATUS_SUCCESS, T::INVALIDATE),
            (7, STATUS_SUCCESS, T::FAST_REGISTER),
            (8, STATUS_SUCCESS, T::INVALIDATE),
        ]
    );
    assert_eq!(
        summary_ex(&wait_results_ex(&pair.b_cq, 2)),
        [
            (101, STATUS_SUCCESS, T::RECEIVE),
            (102, STATUS_SUCCESS, T::RECEIVE_AND_INVALIDATE),
        ]
    );
    a_frmr.close(&pair.a);
    assert_closed([a_mw.close(), b_mw.close()]);
    teardown_with_regions(pair, [a_mem, b_mem]);
}

/// P23 (NDSPI v2, this provider's behaviour): within one QP initiator
/// requests complete in post order, and so do receives.
#[test]
fn p23_completions_in_post_order_within_a_qp() {
    only_on_fabric!(
        "a Send waits for the peer's receive on the fabric; over iWARP it goes at once and, with no receive posted, the peer terminates (RFC 5040)"
    );
    let (pair, a_mem, b_mem) = pair_with_patterns(8192, 27, 28);
    let (remote, token) = (b_mem.remote(0), b_mem.token());
    let qp = &pair.a_qp;
    // Sends first, receives later: the Sends wait, and the Writes and Reads
    // behind them wait too.
    let mut expected = Vec::new();
    for i in 0..30_usize {
        let status = match i % 3 {
            0 => qp.send(i, &[a_mem.sge(i * 8, 8)], 0),
            1 => qp.write(i, &[a_mem.sge(i * 8, 8)], remote + 8 * i as u64, token, 0),
            _ => qp.read(
                i,
                &[a_mem.sge(4096 + i * 8, 8)],
                remote + 4096,
                token,
                DEFER,
            ),
        };
        assert_success!(status);
        expected.push(i);
    }
    // The last Read was deferred: a Write without the flag ends the chain.
    assert_success!(qp.write(30, &[a_mem.sge(0, 8)], remote, token, 0));
    expected.push(30);
    for slot in 0..10 {
        assert_success!(
            pair.b_qp
                .receive(100 + slot, &[b_mem.sge(6144 + slot * 8, 8)])
        );
    }
    let done = pair.a_cq.wait_results(31);
    assert_eq!(request_contexts(&done), expected);
    assert!(done.iter().all(|r| r.status == STATUS_SUCCESS));
    let got = pair.b_cq.wait_results(10);
    assert_eq!(request_contexts(&got), (100..110).collect::<Vec<_>>());
    // Receive k got the k-th Send (Send i = 3k carried bytes 24k..24k+8).
    for k in 0..10 {
        assert_eq!(
            &b_mem.bytes()[6144 + k * 8..6152 + k * 8],
            &a_mem.bytes()[24 * k..24 * k + 8]
        );
    }
    teardown_with_regions(pair, [a_mem, b_mem]);
}

/// P24 (NDSPI v2, this provider's behaviour): a post that would exceed the
/// queue depth fixed at creation is refused inline with
/// STATUS_NO_MORE_ENTRIES, on the initiator and on the receive queue; the
/// queued requests are not harmed.
#[test]
fn p24_full_queue_refused_with_no_more_entries() {
    only_on_fabric!(
        "a Send waits for the peer's receive on the fabric; over iWARP it goes at once and, with no receive posted, the peer terminates (RFC 5040)"
    );
    const DEPTH: usize = 64;
    let pair = Pair::new();
    let a_mem = Region::pattern(&pair.a_pd, 4096, 29, MR_LOCAL_WRITE);
    let b_mem = Region::new(&pair.b_pd, DEPTH * 64, 0, MR_LOCAL_WRITE);
    // Sends wait for receives that are not there: the initiator queue fills.
    for i in 0..DEPTH {
        assert_success!(pair.a_qp.send(i, &[a_mem.sge(i, 16)], 0));
    }
    assert_eq!(
        pair.a_qp.send(DEPTH, &[a_mem.sge(0, 16)], 0),
        STATUS_NO_MORE_ENTRIES
    );
    assert_eq!(
        pair.a_qp.write(
            DEPTH + 1,
            &[a_mem.sge(0, 16)],
            b_mem.remote(0),
            b_mem.token(),
            DEFER
        ),
        STATUS_NO_MORE_ENTRIES
    );
    assert_empty(&pair.a_cq);
    for slot in 0..DEPTH {
        assert_success!(pair.b_qp.receive(100 + slot, &[b_mem.sge(slot * 64, 64)]));
    }
    let done = pair.a_cq.wait_results(DEPTH);
    assert_eq!(request_contexts(&done), (0..DEPTH).collect::<Vec<_>>());
    assert!(done.iter().all(|r| r.status == STATUS_SUCCESS));
    assert_eq!(pair.b_cq.wait_results(DEPTH).len(), DEPTH);
    // The receive queue: DEPTH receives fit, one more does not.
    for slot in 0..DEPTH {
        assert_success!(pair.b_qp.receive(200 + slot, &[b_mem.sge(slot * 64, 64)]));
    }
    assert_eq!(
        pair.b_qp.receive(300, &[b_mem.sge(0, 64)]),
        STATUS_NO_MORE_ENTRIES
    );
    pair.assert_cqs_empty();
    teardown_with_regions(pair, [a_mem, b_mem]);
}

/// P25 (NDSPI v2, this provider's behaviour): a post with a flag its
/// operation does not accept is refused inline — with STATUS_INVALID_PARAMETER,
/// the NDK kin of NDSPI's STATUS_INVALID_PARAMETER_4 — and leaves no entry.
#[test]
fn p25_undocumented_flag_refused_with_invalid_parameter() {
    let (pair, a_mem, b_mem) = pair_with_memory(4096, 30);
    let a_mw = pair.a_pd.mw();
    let a_frmr = Frmr::new(&pair.a, &pair.a_pd, PAGE, 0, 4, true);
    let (remote, token) = (b_mem.remote(0), b_mem.token());
    let qp = &pair.a_qp;
    let sge = [a_mem.sge(0, 64)];
    let mut context = 0;
    let mut check = |name: &str, flags: &[u32], post: &dyn Fn(usize, u32) -> NtStatus| {
        for &flag in flags {
            context += 1;
            assert_eq!(
                post(context, flag),
                STATUS_INVALID_PARAMETER,
                "{name} with {flag:#x}"
            );
        }
    };
    check(
        "Send",
        &[
            OP_REMOTE_READ,
            OP_LOCAL_WRITE,
            READ_SINK,
            READ_LOCAL_INVALIDATE,
            UNKNOWN_FLAG,
        ],
        &|c, f| qp.send(c, &sge, f),
    );
    check(
        "SendAndInvalidate",
        &[OP_REMOTE_WRITE, READ_LOCAL_INVALIDATE, UNKNOWN_FLAG],
        &|c, f| qp.send_and_invalidate(c, &sge, f, 1),
    );
    check(
        "Read",
        &[SOLICIT, INLINE, OP_REMOTE_READ, READ_SINK, UNKNOWN_FLAG],
        &|c, f| qp.read(c, &sge, remote, token, f),
    );
    check(
        "Write",
        &[
            SOLICIT,
            OP_REMOTE_READ,
            READ_SINK,
            READ_LOCAL_INVALIDATE,
            UNKNOWN_FLAG,
        ],
        &|c, f| qp.write(c, &sge, remote, token, f),
    );
    check(
        "Bind",
        &[
            SOLICIT,
            INLINE,
            READ_SINK,
            READ_LOCAL_INVALIDATE,
            UNKNOWN_FLAG,
        ],
        &|c, f| qp.bind(c, &a_mem.mr, &a_mw, a_mem.remote(0), 64, OP_REMOTE_READ | f),
    );
    check(
        "FastRegister",
        &[SOLICIT, INLINE, READ_LOCAL_INVALIDATE, UNKNOWN_FLAG],
        &|c, f| a_frmr.post(qp, c, f),
    );
    check(
        "Invalidate",
        &[SOLICIT, OP_REMOTE_READ, INLINE, UNKNOWN_FLAG],
        &|c, f| qp.invalidate(c, a_mw.header(), f),
    );
    assert_empty(&pair.a_cq);
    // The QP is unharmed.
    assert_success!(qp.write(999, &sge, remote, token, 0));
    assert_eq!(summary(&pair.a_cq.wait_results(1)), [(999, STATUS_SUCCESS)]);
    a_frmr.close(&pair.a);
    assert_close(a_mw.close());
    teardown_with_regions(pair, [a_mem, b_mem]);
}

/// P25 (NDSPI v2, this provider's behaviour), the composite flag: Bind does
/// not document NDK_OP_FLAG_ALLOW_LOCAL_WRITE (0x10), and no request documents
/// 0x20 — the part of ALLOW_REMOTE_WRITE (0x30) above the local-write bit —
/// on its own. Each is a flag value the operation does not accept, so the
/// post is refused inline with STATUS_INVALID_PARAMETER, as for any other
/// undocumented flag.
#[test]
fn p25_sub_bits_of_allow_remote_write_alone_are_refused() {
    let pair = Pair::new();
    // The region allows every access: only the flag can be what is refused.
    let kit = Kit::new(&pair.a, &pair.a_pd);
    let (mem, mw) = (&kit.mem, &kit.mw);
    let remote_write_bit = OP_REMOTE_WRITE & !OP_LOCAL_WRITE;
    let qp = &pair.a_qp;
    let outcomes = [
        (
            "Bind with ALLOW_LOCAL_WRITE",
            qp.bind(1, &mem.mr, mw, mem.remote(0), 64, OP_LOCAL_WRITE),
        ),
        (
            "Bind with 0x20",
            qp.bind(2, &mem.mr, mw, mem.remote(0), 64, remote_write_bit),
        ),
        (
            "FastRegister with 0x20",
            kit.frmr.post(qp, 3, remote_write_bit),
        ),
    ];
    // Drain whatever was accepted before judging, so teardown stays clean.
    let accepted = outcomes
        .iter()
        .filter(|(_, s)| *s == STATUS_SUCCESS)
        .count();
    let _ = pair.a_cq.wait_results(accepted);
    for (name, status) in outcomes {
        assert_eq!(status, STATUS_INVALID_PARAMETER, "{name}");
    }
    assert_empty(&pair.a_cq);
    kit.close(&pair.a);
    pair.teardown();
}

// --- P7 in every state a QP can be in (issue: posts on a flushed, never
// connected QP). The decision and the rules it rests on: docs/rnic.md,
// "Posting in each QP state".

/// Everything one of each initiator request names: a registered region, a
/// window, and a fast-register MR over LAM pages of the same adapter.
struct Kit {
    mem: Region,
    mw: Mw,
    frmr: Frmr,
}

impl Kit {
    fn new(adapter: &Adapter, pd: &Pd) -> Self {
        Self {
            mem: Region::pattern(pd, 4096, 8, MR_REMOTE),
            mw: pd.mw(),
            frmr: Frmr::new(adapter, pd, PAGE, 0, 4, true),
        }
    }

    /// Posts each of the seven initiator requests once, with contexts
    /// `base + 1 ..= base + 7`.
    fn post_all(&self, qp: &Qp, base: usize) -> Vec<(&'static str, NtStatus)> {
        let sge = [self.mem.sge(0, 64)];
        let (remote, token) = (self.mem.remote(1024), self.mem.token());
        vec![
            ("Send", qp.send(base + 1, &sge, 0)),
            (
                "SendAndInvalidate",
                qp.send_and_invalidate(base + 2, &sge, 0, 0x1234),
            ),
            ("Write", qp.write(base + 3, &sge, remote, token, 0)),
            ("Read", qp.read(base + 4, &sge, remote, token, 0)),
            (
                "Bind",
                qp.bind(
                    base + 5,
                    &self.mem.mr,
                    &self.mw,
                    self.mem.remote(0),
                    512,
                    OP_REMOTE_READ,
                ),
            ),
            ("FastRegister", self.frmr.post(qp, base + 6, OP_REMOTE_READ)),
            ("Invalidate", qp.invalidate(base + 7, self.mw.header(), 0)),
        ]
    }

    /// Asserts every post of [`Kit::post_all`] failed inline with
    /// STATUS_CONNECTION_INVALID.
    fn assert_all_refused(&self, qp: &Qp, base: usize, state: &str) {
        for (name, status) in self.post_all(qp, base) {
            assert_eq!(
                status, STATUS_CONNECTION_INVALID,
                "P7: {name} on a QP {state} returned {status:#x}"
            );
        }
    }

    fn close(self, adapter: &Adapter) {
        self.frmr.close(adapter);
        assert_close(self.mw.close());
        self.mem.close();
    }
}

/// P7, P8, E1: a QP that was never connected and then flushed is still not
/// connected: every initiator request fails inline with
/// STATUS_CONNECTION_INVALID and leaves no CQ entry, while a receive (P8) is
/// still accepted and, the receive queue being flushed, completes cancelled.
#[test]
fn p7_initiator_post_on_flushed_never_connected_qp_fails_connection_invalid() {
    let side = Side::two().0;
    let cq = side.adapter.cq(64);
    let qp = side.pd.qp(&cq, &cq, 0xC);
    let kit = Kit::new(&side.adapter, &side.pd);
    let buffer = Region::new(&side.pd, 4096, 0, MR_LOCAL_WRITE);
    assert_success!(qp.receive(1, &[buffer.sge(0, 64)]));
    qp.flush();
    assert_eq!(summary(&cq.wait_results(1)), [(1, STATUS_CANCELLED)]);
    kit.assert_all_refused(&qp, 10, "flushed before it was ever connected");
    assert_success!(qp.receive(2, &[buffer.sge(0, 64)]));
    assert_eq!(summary(&cq.wait_results(1)), [(2, STATUS_CANCELLED)]);
    assert_empty(&cq);
    kit.close(&side.adapter);
    buffer.close();
    assert_close(qp.close());
    assert_empty(&cq);
    assert_close(cq.close());
    side.close();
}

/// P7: while its Connect is pending (the peer has not accepted) a QP is not
/// connected: every initiator request fails inline.
#[test]
fn p7_initiator_post_while_connecting_fails_connection_invalid() {
    let (a, b) = Side::two();
    let cq = a.adapter.cq(64);
    let qp = a.pd.qp(&cq, &cq, 0xC);
    let kit = Kit::new(&a.adapter, &a.pd);
    let (listener, incoming, listen_addr) = listen_on(&b.adapter, b.addr);
    let connector = a.adapter.connector();
    let (status, connected) = connector.connect(&qp, a.addr, listen_addr, 0, 0, b"");
    assert_eq!(status, STATUS_PENDING, "Connect");
    let request = incoming.wait_nth(1);
    kit.assert_all_refused(&qp, 0, "whose Connect is pending");
    assert_success!(request.reject(b""), "Reject");
    assert_eq!(connected.wait(), STATUS_CONNECTION_REFUSED);
    kit.assert_all_refused(&qp, 10, "whose Connect was refused");
    assert_empty(&cq);
    assert_closed([request.close(), connector.close(), listener.close()]);
    kit.close(&a.adapter);
    assert_closed([qp.close(), cq.close()]);
    a.close();
    b.close();
}

/// E1, E5, P4: a QP flushed while connected is still connected (its
/// connection is only torn down by Disconnect): every initiator request is
/// accepted and completes with STATUS_CANCELLED, exactly once each.
#[test]
fn e1_initiator_post_on_qp_flushed_while_connected_completes_cancelled() {
    let pair = Pair::new();
    let kit = Kit::new(&pair.a, &pair.a_pd);
    pair.a_qp.flush();
    for (name, status) in kit.post_all(&pair.a_qp, 0) {
        assert_success!(status, "{name} on a flushed connected QP");
    }
    let mut got = sorted_contexts(&pair.a_cq.wait_results(7));
    got.dedup();
    assert_eq!(got, (1..=7).collect::<Vec<_>>());
    let statuses: Vec<NtStatus> = pair.a_cq.poll(16).iter().map(|r| r.status).collect();
    assert!(statuses.is_empty(), "more completions: {statuses:x?}");
    kit.close(&pair.a);
    teardown_lenient(pair);
}

/// P7, X5: once disconnected — and after a flush that follows the disconnect
/// — a QP is no longer connected: every initiator request fails inline.
#[test]
fn p7_initiator_post_after_disconnect_and_after_a_later_flush_fails_connection_invalid() {
    let pair = Pair::new();
    let kit = Kit::new(&pair.a, &pair.a_pd);
    disconnect_both(Some(&pair.a_conn), Some(&pair.b_conn));
    kit.assert_all_refused(&pair.a_qp, 0, "after Disconnect");
    pair.a_qp.flush();
    kit.assert_all_refused(&pair.a_qp, 10, "flushed after Disconnect");
    assert_empty(&pair.a_cq);
    kit.close(&pair.a);
    teardown_lenient(pair);
}
