//! Family D of the rules catalogue, through the C ABI: deferred processing
//! (`NDK_OP_FLAG_DEFER`).
//!
//! The provider holds deferred requests back until a request without the
//! flag, an inline failure, a flush, a disconnect or a close rings the
//! doorbell (docs/rnic.md); the tests assert only what the rules promise —
//! each accepted request completes exactly once, eventually — and never that
//! a deferred request has *not* run yet (D2: the flag is a hint).

use softndk::abi::*;

use super::harness::*;

/// D1: NDK_OP_FLAG_DEFER is accepted on Bind, FastRegister, Invalidate, Read,
/// Send, SendAndInvalidate and Write; the chain, closed by a request without
/// the flag, completes in full with the data where it belongs.
#[test]
fn d1_defer_accepted_on_every_initiator_request() {
    let (pair, a_src, b_mem) = pair_with_patterns(4096, 1, 2);
    let a_sink = Region::new(&pair.a_pd, 4096, 0, MR_LOCAL_WRITE);
    let b_recv = Region::new(&pair.b_pd, 4096, 0, MR_LOCAL_WRITE);
    let a_mw = pair.a_pd.mw();
    let a_frmr = Frmr::new(&pair.a, &pair.a_pd, 2 * PAGE, 0, 4, true);
    // SendAndInvalidate needs a token B can invalidate: B binds a window.
    let b_mw = pair.b_pd.mw();
    let window = (&b_mem.mr, &b_mw, b_mem.remote(0), 1024);
    pair.b_qp.bound(&pair.b_cq, 100, window, OP_REMOTE_READ);
    let b_token = b_mw.remote_token();
    assert_success!(pair.b_qp.receive(200, &[b_recv.sge(0, 1024)]));
    assert_success!(pair.b_qp.receive(201, &[b_recv.sge(1024, 1024)]));

    let qp = &pair.a_qp;
    let ops: [(&str, NtStatus); 7] = [
        (
            "Bind",
            qp.bind(
                1,
                &a_src.mr,
                &a_mw,
                a_src.remote(0),
                4096,
                OP_REMOTE_READ | DEFER,
            ),
        ),
        ("FastRegister", a_frmr.post(qp, 2, DEFER)),
        ("Invalidate", qp.invalidate(3, a_frmr.mr.header(), DEFER)),
        (
            "Read",
            qp.read(
                4,
                &[a_sink.sge(0, 512)],
                b_mem.remote(0),
                b_mem.token(),
                DEFER,
            ),
        ),
        ("Send", qp.send(5, &[a_src.sge(0, 100)], DEFER)),
        (
            "SendAndInvalidate",
            qp.send_and_invalidate(6, &[a_src.sge(100, 100)], DEFER, b_token),
        ),
        (
            "Write",
            qp.write(
                7,
                &[a_src.sge(0, 256)],
                b_mem.remote(2048),
                b_mem.token(),
                DEFER,
            ),
        ),
    ];
    for (name, status) in ops {
        assert_success!(status, "{name} with DEFER");
    }
    // D5: the chain ends with a request without the flag.
    assert_success!(qp.invalidate(8, a_mw.header(), 0));

    let done = wait_results_ex(&pair.a_cq, 8);
    assert_eq!(
        summary_ex(&done),
        [
            (1, STATUS_SUCCESS, NdkOperationType::BIND),
            (2, STATUS_SUCCESS, NdkOperationType::FAST_REGISTER),
            (3, STATUS_SUCCESS, NdkOperationType::INVALIDATE),
            (4, STATUS_SUCCESS, NdkOperationType::READ),
            (5, STATUS_SUCCESS, NdkOperationType::SEND),
            (6, STATUS_SUCCESS, NdkOperationType::SEND),
            (7, STATUS_SUCCESS, NdkOperationType::WRITE),
            (8, STATUS_SUCCESS, NdkOperationType::INVALIDATE),
        ]
    );
    let received = wait_results_ex(&pair.b_cq, 2);
    assert_eq!(
        summary_ex(&received),
        [
            (200, STATUS_SUCCESS, NdkOperationType::RECEIVE),
            (
                201,
                STATUS_SUCCESS,
                NdkOperationType::RECEIVE_AND_INVALIDATE
            ),
        ]
    );
    assert_eq!(
        received[1].type_specific_completion_output,
        b_token as usize
    );
    assert_eq!(&a_sink.bytes()[..512], &b_mem.bytes()[..512]);
    assert_eq!(&b_mem.bytes()[2048..2304], &a_src.bytes()[..256]);
    assert_eq!(&b_recv.bytes()[..100], &a_src.bytes()[..100]);
    assert_eq!(&b_recv.bytes()[1024..1124], &a_src.bytes()[100..200]);
    pair.assert_cqs_empty();

    a_frmr.close(&pair.a);
    assert_closed([a_mw.close(), b_mw.close()]);
    teardown_with_regions(pair, [a_src, a_sink, b_mem, b_recv]);
}

/// D2: a chain of deferred requests is handed over, in order, at the latest
/// by the first request without the flag; whatever the provider held back
/// then runs, and the data of every request lands.
#[test]
fn d2_deferred_chain_is_handed_over_by_the_first_request_without_the_flag() {
    let (pair, a_src, b_mem) = pair_with_memory(4096, 3);
    let b_recv = Region::new(&pair.b_pd, 512, 0, MR_LOCAL_WRITE);
    for round in 0..2_usize {
        let base = round * 100;
        for i in 0..5 {
            let at = round * 2048 + i * 256;
            assert_success!(pair.a_qp.write(
                base + i,
                &[a_src.sge(at, 256)],
                b_mem.remote(at),
                b_mem.token(),
                DEFER,
            ));
        }
        // The chain may already have run (D2: a hint), or not; the polls
        // here are legal either way and take whatever is there.
        let mut done = pair.a_cq.poll(8);
        if round == 0 {
            // Closed by a Write without the flag.
            let at = 1280;
            assert_success!(pair.a_qp.write(
                base + 5,
                &[a_src.sge(at, 256)],
                b_mem.remote(at),
                b_mem.token(),
                0
            ));
        } else {
            // Closed by a Send without the flag.
            assert_success!(pair.b_qp.receive(900, &[b_recv.sge(0, 512)]));
            assert_success!(pair.a_qp.send(base + 5, &[a_src.sge(0, 64)], 0));
            assert_eq!(summary(&pair.b_cq.wait_results(1)), [(900, STATUS_SUCCESS)]);
        }
        let rest = 6 - done.len();
        done.extend(pair.a_cq.wait_results(rest));
        assert_eq!(
            request_contexts(&done),
            (base..base + 6).collect::<Vec<_>>()
        );
        assert!(done.iter().all(|r| r.status == STATUS_SUCCESS));
    }
    assert_eq!(&b_mem.bytes()[..1536], &a_src.bytes()[..1536]);
    assert_eq!(&b_mem.bytes()[2048..3328], &a_src.bytes()[2048..3328]);
    assert_eq!(&b_recv.bytes()[..64], &a_src.bytes()[..64]);
    assert_empty(&pair.a_cq);
    teardown_with_regions(pair, [a_src, b_mem, b_recv]);
}

/// D3: with the flag, a call that returns a failure never produces a
/// completion, and one that returns success produces exactly one — also when
/// it fails later, at execution.
#[test]
fn d3_defer_changes_nothing_about_completions() {
    // Inline failures among deferred successes.
    let (pair, a_src, b_mem) = pair_with_memory(4096, 4);
    let write = |context: usize, sges: &[NdkSge], flags: u32| {
        pair.a_qp
            .write(context, sges, b_mem.remote(0), b_mem.token(), flags)
    };
    let five: Vec<NdkSge> = (0..5).map(|i| a_src.sge(i * 16, 16)).collect();
    assert_success!(write(1, &[a_src.sge(0, 64)], DEFER));
    assert_eq!(write(2, &five, DEFER), STATUS_DATA_OVERRUN);
    assert_eq!(
        write(3, &[a_src.sge(0, 64)], DEFER | UNKNOWN_FLAG),
        STATUS_INVALID_PARAMETER
    );
    assert_success!(write(4, &[a_src.sge(64, 64)], DEFER));
    assert_eq!(write(5, &five, 0), STATUS_DATA_OVERRUN);
    assert_success!(write(6, &[a_src.sge(128, 64)], DEFER));
    assert_success!(write(7, &[a_src.sge(192, 64)], 0));
    let done = pair.a_cq.wait_results(4);
    assert_eq!(
        summary(&done),
        [
            (1, STATUS_SUCCESS),
            (4, STATUS_SUCCESS),
            (6, STATUS_SUCCESS),
            (7, STATUS_SUCCESS)
        ]
    );
    assert_empty(&pair.a_cq);
    teardown_with_regions(pair, [a_src, b_mem]);

    // A deferred request that fails at execution still completes once (with
    // its error), and so does every accepted request behind it (E5:
    // cancelled).
    let (pair, a_src, b_mem) = pair_with_memory(4096, 5);
    // Gathering from a token A's MR never issued: a local error, A's own
    // on any transport (a remote one returns over iWARP as the peer's
    // Terminate after the Write completed, RFC 5040 §7).
    for (context, sge, flags) in [
        (11, a_src.bad_sge(0, 64), DEFER),
        (12, a_src.sge(0, 64), DEFER),
        (13, a_src.sge(0, 64), 0),
    ] {
        let (remote, token) = (b_mem.remote(0), b_mem.token());
        assert_success!(pair.a_qp.write(context, &[sge], remote, token, flags));
    }
    let done = pair.a_cq.wait_results(3);
    assert_eq!(
        summary(&done),
        [
            (11, STATUS_ACCESS_VIOLATION),
            (12, STATUS_CANCELLED),
            (13, STATUS_CANCELLED)
        ]
    );
    assert_empty(&pair.a_cq);
    teardown_closing(pair, [a_src, b_mem]);
}

/// D4: when an initiator call fails inline, every earlier deferred request of
/// the QP is handed to the engine and completes — whatever made the call fail,
/// and with no further post.
#[test]
fn d4_inline_failure_rings_earlier_deferred_requests() {
    let (pair, a_src, b_mem) = pair_with_memory(8192, 6);
    let read_only = Region::new(&pair.a_pd, 4096, 0, 0);
    let a_mw = pair.a_pd.mw();
    let local_frmr = Frmr::new(&pair.a, &pair.a_pd, PAGE, 0, 4, false);
    let max_transfer = pair.a.info().max_transfer_length as usize;
    let qp = &pair.a_qp;
    let inline_bytes = vec![7_u8; 300];
    let five: Vec<NdkSge> = (0..5).map(|i| a_src.sge(i * 16, 16)).collect();
    let huge = [
        a_src.sge(0, max_transfer / 2 + 1),
        a_src.sge(0, max_transfer / 2 + 1),
    ];

    type Failure<'a> = (&'a str, Box<dyn Fn(usize) -> NtStatus + 'a>, NtStatus);
    let failures: Vec<Failure<'_>> = vec![
        (
            "Send with an undocumented flag",
            Box::new(|c| qp.send(c, &[a_src.sge(0, 8)], UNKNOWN_FLAG)),
            STATUS_INVALID_PARAMETER,
        ),
        (
            "Write with too many SGEs",
            Box::new(|c| qp.write(c, &five, b_mem.remote(0), b_mem.token(), DEFER)),
            STATUS_DATA_OVERRUN,
        ),
        (
            "inline Send above the inline size",
            Box::new(|c| qp.send(c, &[inline_sge(&inline_bytes)], INLINE | DEFER)),
            STATUS_BUFFER_OVERFLOW,
        ),
        (
            "Read above MaxTransferLength",
            Box::new(|c| qp.read(c, &huge, b_mem.remote(0), b_mem.token(), 0)),
            STATUS_BUFFER_OVERFLOW,
        ),
        (
            "Bind for remote write on a region without local write",
            Box::new(|c| {
                qp.bind(
                    c,
                    &read_only.mr,
                    &a_mw,
                    read_only.remote(0),
                    4096,
                    OP_REMOTE_WRITE | DEFER,
                )
            }),
            STATUS_ACCESS_VIOLATION,
        ),
        (
            "FastRegister for remote read without remote access",
            Box::new(|c| local_frmr.post(qp, c, OP_REMOTE_READ)),
            STATUS_ACCESS_VIOLATION,
        ),
        (
            "Invalidate of a RegisterMr region",
            Box::new(|c| qp.invalidate(c, a_src.mr.header(), DEFER)),
            STATUS_INVALID_PARAMETER,
        ),
    ];
    for (round, (name, fail, expected)) in failures.iter().enumerate() {
        let base = 100 * (round + 1);
        for i in 0..3 {
            let at = round * 512 + i * 128;
            assert_success!(
                qp.write(
                    base + i,
                    &[a_src.sge(at, 128)],
                    b_mem.remote(at),
                    b_mem.token(),
                    DEFER
                ),
                "{name}: deferred Write"
            );
        }
        assert_eq!(fail(base + 99), *expected, "{name}");
        let done = pair.a_cq.wait_results(3);
        assert_eq!(
            summary(&done),
            [
                (base, STATUS_SUCCESS),
                (base + 1, STATUS_SUCCESS),
                (base + 2, STATUS_SUCCESS)
            ],
            "{name}"
        );
        assert_empty(&pair.a_cq);
    }
    for round in 0..failures.len() {
        let at = round * 512;
        assert_eq!(&b_mem.bytes()[at..at + 384], &a_src.bytes()[at..at + 384]);
    }

    // A full queue (P24) is an inline failure too: the deferred requests
    // that filled it are rung and complete.
    let depth = 64;
    for i in 0..depth {
        assert_success!(qp.write(
            1000 + i,
            &[a_src.sge(0, 16)],
            b_mem.remote(0),
            b_mem.token(),
            DEFER
        ));
    }
    assert_eq!(
        qp.write(
            1000 + depth,
            &[a_src.sge(0, 16)],
            b_mem.remote(0),
            b_mem.token(),
            DEFER
        ),
        STATUS_NO_MORE_ENTRIES
    );
    let done = pair.a_cq.wait_results(depth);
    assert_eq!(
        request_contexts(&done),
        (1000..1000 + depth).collect::<Vec<_>>()
    );
    assert!(done.iter().all(|r| r.status == STATUS_SUCCESS));
    assert_empty(&pair.a_cq);

    drop(failures);
    local_frmr.close(&pair.a);
    assert_close(a_mw.close());
    teardown_with_regions(pair, [a_src, read_only, b_mem]);
}

/// Posts three deferred Writes (contexts 1..=3) that nothing rings.
fn open_chain(pair: &Pair, src: &Region, dst: &Region) {
    for i in 0..3 {
        assert_success!(pair.a_qp.write(
            i + 1,
            &[src.sge(i * 64, 64)],
            dst.remote(i * 64),
            dst.token(),
            DEFER
        ));
    }
}

/// The three requests of [`open_chain`] each completed once, successfully or
/// cancelled (D5: "complete or cancel").
fn assert_chain_ended(results: &[NdkResult]) {
    assert_eq!(request_contexts(results), [1, 2, 3]);
    expect_completed_or_cancelled(results);
}

/// D5: a chain left open (the consumer never posts the closing request) is
/// not lost: NdkFlush completes or cancels every request of it.
#[test]
fn d5_open_chain_is_ended_by_flush() {
    let (pair, src, dst) = pair_with_memory(4096, 7);
    open_chain(&pair, &src, &dst);
    pair.a_qp.flush();
    assert_chain_ended(&pair.a_cq.wait_results(3));
    assert_empty(&pair.a_cq);
    teardown_closing(pair, [src, dst]);
}

/// D5: a Disconnect ends an open chain: every request completes or is
/// cancelled.
#[test]
fn d5_open_chain_is_ended_by_disconnect() {
    chain_ended_by(8, |pair| {
        disconnect_both(Some(&pair.a_conn), Some(&pair.b_conn));
        Early::default()
    });
}

/// D5: closing the QP ends an open chain: every request completes or is
/// cancelled on the QP's CQ.
#[test]
fn d5_open_chain_is_ended_by_qp_close() {
    chain_ended_by(9, |pair| Early {
        a_qp: Some(close_qp_async(&pair.a_qp)),
        a_conn: None,
    });
}

/// D5: closing the QP's connector ends an open chain: every request
/// completes or is cancelled.
#[test]
fn d5_open_chain_is_ended_by_connector_close() {
    chain_ended_by(10, |pair| Early {
        a_qp: None,
        a_conn: Some(close_connector_async(&pair.a_conn)),
    });
}

/// D5: an open chain on A ([`open_chain`], source bytes of `seed`) that
/// `end` ends (returning what it closed early) completes or is cancelled
/// request by request on A's CQ, and nothing more arrives.
fn chain_ended_by(seed: u8, end: impl FnOnce(&Pair) -> Early) {
    let (pair, src, dst) = pair_with_memory(4096, seed);
    open_chain(&pair, &src, &dst);
    let early = end(&pair);
    assert_chain_ended(&pair.a_cq.wait_results(3));
    assert_empty(&pair.a_cq);
    teardown_closing_after(pair, [src, dst], early);
}

/// D6, the worked example: FastRegister(defer) succeeds, FastRegister(defer)
/// fails inline, the Send is never posted → exactly one completion, the first
/// FastRegister's; none for the second.
#[test]
fn d6_failed_deferred_fast_register_leaves_exactly_the_first_completion() {
    let pair = Pair::new();
    let first = Frmr::new(&pair.a, &pair.a_pd, 2 * PAGE, 0, 4, true);
    let second = Frmr::new(&pair.a, &pair.a_pd, 2 * PAGE, 0, 4, false);
    assert_success!(first.post(&pair.a_qp, 1, DEFER | OP_REMOTE_READ));
    // M15: remote rights on an MR initialized without remote access.
    assert_eq!(
        second.post(&pair.a_qp, 2, DEFER | OP_REMOTE_READ),
        STATUS_ACCESS_VIOLATION
    );
    let done = wait_results_ex(&pair.a_cq, 1);
    assert_eq!(
        summary_ex(&done),
        [(1, STATUS_SUCCESS, NdkOperationType::FAST_REGISTER)]
    );
    assert_empty(&pair.a_cq);
    // Nothing for the second one appears later either: a flush rings and
    // cancels whatever is still queued, and there is nothing.
    pair.a_qp.flush();
    assert_empty(&pair.a_cq);
    first.close(&pair.a);
    second.close(&pair.a);
    teardown_lenient(pair);
}
