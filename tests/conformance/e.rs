//! Family E of the rules catalogue, through the C ABI: errors and completion
//! statuses.

use std::sync::Arc;

use softndk::abi::*;

use super::harness::*;

use NdkOperationType as T;

/// Sorted (context, status, type) of extended results.
fn sorted_ex(results: &[NdkResultEx]) -> Vec<(usize, NtStatus, NdkOperationType)> {
    let mut s = summary_ex(results);
    s.sort_unstable_by_key(|r| r.0);
    s
}

/// What [`sorted_ex`] shows when every request of `requests` (runs of
/// request contexts, each with its type) completed with STATUS_CANCELLED.
fn cancelled(requests: &[(std::ops::RangeInclusive<usize>, T)]) -> Vec<(usize, NtStatus, T)> {
    requests
        .iter()
        .flat_map(|(contexts, kind)| contexts.clone().map(|c| (c, STATUS_CANCELLED, *kind)))
        .collect()
}

/// E1: NdkFlush cancels every pending receive and initiator request of the
/// QP — waiting Sends, the requests queued behind them, deferred ones, posted
/// receives — each completing once with STATUS_CANCELLED.
#[test]
fn e1_flush_cancels_pending_receives_and_initiator_requests() {
    let (pair, a_mem, b_mem) = pair_with_memory(4096, 1);
    let qp = &pair.a_qp;
    for i in 0..3 {
        assert_success!(qp.receive(10 + i, &[a_mem.sge(2048 + i * 64, 64)]));
    }
    // B posts no receive: the Sends wait, the Write waits behind them
    // (`Transport::held`).
    let held = Transport::default().held();
    for i in 0..3 {
        assert_success!(qp.send(20 + i, &[a_mem.sge(i * 64, 64)], held));
    }
    assert_success!(qp.write(
        30,
        &[a_mem.sge(0, 64)],
        b_mem.remote(0),
        b_mem.token(),
        DEFER
    ));
    qp.flush();
    let done = wait_results_ex(&pair.a_cq, 7);
    assert_eq!(
        sorted_ex(&done),
        cancelled(&[
            (10..=12, T::RECEIVE),
            (20..=22, T::SEND),
            (30..=30, T::WRITE)
        ])
    );
    // P21: cancelled entries carry the QP's context too.
    assert!(done.iter().all(|r| r.qp_context as usize == 0xA));
    assert_empty(&pair.a_cq);
    assert!(
        b_mem.bytes().iter().all(|&b| b == 0),
        "the flushed Write ran"
    );
    teardown_closing(pair, [a_mem, b_mem]);
}

/// E2 (consumer): a consumer that drains the CQ until it has seen a
/// completion for every request posted before the flush knows the flush is
/// over — so there is exactly one for each: those that had completed, those
/// in flight, those held back.
#[test]
fn e2_flush_leaves_one_completion_per_request_posted_before_it() {
    let (pair, a_mem, b_mem) = pair_with_memory(8192, 2);
    let (remote, token) = (b_mem.remote(0), b_mem.token());
    let qp = &pair.a_qp;
    // Over iWARP a Send does not wait for a receive: it goes at once and,
    // finding none, the peer terminates the connection (RFC 5040 §7). B
    // posts one there, and the requests behind the Send need not wait.
    let sends_wait = Transport::default() == Transport::Local;
    if !sends_wait {
        assert_success!(pair.b_qp.receive(0xB, &[b_mem.sge(4096, 64)]));
    }
    let mut posted = Vec::new();
    for i in 0..40_usize {
        let status = match i % 5 {
            0 => qp.write(
                i,
                &[a_mem.sge(i * 64, 64)],
                remote + 64 * i as u64,
                token,
                0,
            ),
            1 => qp.write(
                i,
                &[a_mem.sge(i * 64, 64)],
                remote + 64 * i as u64,
                token,
                DEFER,
            ),
            2 => qp.receive(i, &[a_mem.sge(4096 + i * 64, 64)]),
            3 => qp.read(i, &[a_mem.sge(4096 + i * 64, 64)], remote, token, 0),
            // A Send without a receive at B: it and everything behind it wait.
            _ if i == 34 => qp.send(i, &[a_mem.sge(0, 8)], 0),
            _ => qp.write(i, &[a_mem.sge(0, 8)], remote, token, SILENT | DEFER),
        };
        assert_success!(status, "post {i}");
        posted.push(i);
    }
    qp.flush();
    // Drain until every request posted before the flush has an entry (the
    // silent ones that succeeded have none, P14; those cancelled do, P15).
    let silent: Vec<usize> = (0..40).filter(|i| i % 5 == 4 && *i != 34).collect();
    let mut seen: Vec<NdkResult> = Vec::new();
    let is_seen =
        |seen: &[NdkResult], i: usize| seen.iter().any(|r| r.request_context as usize == i);
    wait_until("flush never finished", || {
        let drained = posted
            .iter()
            .filter(|i| !silent.contains(i))
            .all(|&i| is_seen(&seen, i));
        if drained {
            return true;
        }
        seen.extend(pair.a_cq.poll(16));
        false
    });
    seen.extend(pair.a_cq.poll(64));
    let mut contexts = sorted_contexts(&seen);
    let before = contexts.len();
    contexts.dedup();
    assert_eq!(before, contexts.len(), "a request completed twice");
    for r in &seen {
        let i = r.request_context as usize;
        assert!(posted.contains(&i));
        assert!(
            r.status == STATUS_SUCCESS || r.status == STATUS_CANCELLED,
            "{i}: {:#x}",
            r.status
        );
        if silent.contains(&i) {
            assert_eq!(r.status, STATUS_CANCELLED, "a silent success left an entry");
        }
        if (sends_wait && i >= 34) || i % 5 == 2 {
            // Behind the waiting Send, or a receive nobody sent to.
            assert_eq!(r.status, STATUS_CANCELLED, "{i}");
        }
    }
    assert_empty(&pair.a_cq);
    teardown_closing(pair, [a_mem, b_mem]);
}

/// E3: Disconnect flushes the QP after the disconnect exchange: every request
/// still outstanding, on both sides, completes with STATUS_CANCELLED.
#[test]
fn e3_disconnect_cancels_outstanding_requests() {
    let (pair, a_mem, b_mem) = pair_with_memory(4096, 3);
    for i in 0..2 {
        assert_success!(pair.a_qp.receive(10 + i, &[a_mem.sge(2048 + i * 64, 64)]));
        assert_success!(pair.a_qp.send(
            20 + i,
            &[a_mem.sge(i * 64, 64)],
            Transport::default().held()
        ));
    }
    assert_success!(pair.a_qp.write(
        30,
        &[a_mem.sge(0, 64)],
        b_mem.remote(0),
        b_mem.token(),
        DEFER
    ));
    assert_success!(pair.b_qp.send(40, &[b_mem.sge(0, 0)], DEFER));
    // The Sends are outstanding — waiting for B's receives — before the
    // disconnect (with the deferred engine, once its worker ran them).
    settle_engine();
    disconnect_both(Some(&pair.a_conn), Some(&pair.b_conn));
    assert_eq!(
        sorted_ex(&wait_results_ex(&pair.a_cq, 5)),
        cancelled(&[
            (10..=11, T::RECEIVE),
            (20..=21, T::SEND),
            (30..=30, T::WRITE)
        ])
    );
    assert_eq!(
        sorted_ex(&wait_results_ex(&pair.b_cq, 1)),
        [(40, STATUS_CANCELLED, T::SEND)]
    );
    pair.assert_cqs_empty();
    teardown_closing(pair, [a_mem, b_mem]);
}

/// E4 (inference): receives posted to an SRQ belong to the SRQ — flushing or
/// disconnecting an attached QP does not cancel them; another QP on the SRQ
/// consumes them later.
#[test]
fn e4_srq_receives_survive_flush_and_disconnect_of_an_attached_qp() {
    let (a, b) = Side::two();
    let a_cq = a.adapter.cq(64);
    let b_cq = b.adapter.cq(64);
    let srq = b.pd.try_srq(16, 4, 0, None).expect("CreateSrq");
    let b_mem = Region::new(&b.pd, 4096, 0, MR_LOCAL_WRITE);
    let a_mem = Region::pattern(&a.pd, 4096, 4, MR_LOCAL_WRITE);
    for i in 0..3 {
        assert_success!(srq.receive(i + 1, &[b_mem.sge(i * 256, 256)]));
    }
    // A QP on A connected to one of B's on the SRQ (each with its context).
    let connect_on_srq = |a_context, b_context| {
        let a_qp = a.pd.qp(&a_cq, &a_cq, a_context);
        let b_qp =
            b.pd.try_qp(&b_cq, &b_cq, RecvQueue::Shared(&srq), b_context, 16, 4, 64);
        let b_qp = b_qp.expect("CreateQpWithSrq");
        let link = a.connect(&a_qp, &b, &b_qp);
        (a_qp, b_qp, link)
    };
    let (a_qp1, b_qp1, link1) = connect_on_srq(0xA1, 0xB1);
    b_qp1.flush();
    assert_empty(&b_cq);
    link1.close();
    assert_closed([b_qp1.close(), a_qp1.close()]);
    assert_empty(&b_cq);
    assert_empty(&a_cq);
    // A second QP on the SRQ gets the three receives.
    let (a_qp2, b_qp2, link2) = connect_on_srq(0xA2, 0xB2);
    for i in 0..3 {
        assert_success!(a_qp2.send(10 + i, &[a_mem.sge(i * 100, 100)], 0));
    }
    assert_eq!(a_cq.wait_results(3).len(), 3);
    let got = b_cq.wait_results(3);
    let seen: Vec<_> = got
        .iter()
        .map(|r| (r.request_context as usize, r.status, r.qp_context as usize))
        .collect();
    assert_eq!(
        seen,
        [
            (1, STATUS_SUCCESS, 0xB2),
            (2, STATUS_SUCCESS, 0xB2),
            (3, STATUS_SUCCESS, 0xB2)
        ]
    );
    link2.close();
    assert_closed([a_qp2.close(), b_qp2.close(), srq.close()]);
    a_mem.close();
    b_mem.close();
    assert_closed([a_cq.close(), b_cq.close()]);
    a.close();
    b.close();
}

/// E5 (NDSPI v2; this provider's behaviour): once a request completed with an
/// error the connection is terminated; every request outstanding or posted
/// afterwards on the QP completes with STATUS_CANCELLED — and the peer's
/// outstanding receives too.
#[test]
fn e5_error_completion_terminates_and_cancels_the_rest() {
    let (pair, a_mem, b_mem) = pair_with_memory(4096, 5);
    let (remote, token) = (b_mem.remote(0), b_mem.token());
    for i in 0..2 {
        assert_success!(pair.b_qp.receive(10 + i, &[b_mem.sge(2048 + i * 64, 64)]));
    }
    let qp = &pair.a_qp;
    // Gathering from a token A's MR never issued: a local error, A's own on
    // any transport (a remote one returns over iWARP as the peer's
    // Terminate after the Write completed, RFC 5040 §7).
    assert_success!(qp.write(1, &[a_mem.bad_sge(0, 64)], remote, token, DEFER));
    assert_success!(qp.write(2, &[a_mem.sge(0, 64)], remote, token, DEFER));
    assert_success!(qp.send(3, &[a_mem.sge(0, 64)], 0));
    assert_eq!(
        summary(&pair.a_cq.wait_results(3)),
        [
            (1, STATUS_ACCESS_VIOLATION),
            (2, STATUS_CANCELLED),
            (3, STATUS_CANCELLED)
        ]
    );
    assert!(b_mem.bytes().iter().all(|&b| b == 0));
    assert_eq!(
        summary(&pair.b_cq.wait_results(2)),
        [(10, STATUS_CANCELLED), (11, STATUS_CANCELLED)]
    );
    // Posted afterwards, on either queue and either side.
    assert_success!(qp.write(4, &[a_mem.sge(0, 64)], remote, token, 0));
    assert_success!(qp.receive(5, &[a_mem.sge(1024, 64)]));
    assert_success!(qp.send(6, &[a_mem.sge(0, 64)], SILENT));
    assert_eq!(
        sorted_ex(&wait_results_ex(&pair.a_cq, 3)),
        [
            (4, STATUS_CANCELLED, T::WRITE),
            (5, STATUS_CANCELLED, T::RECEIVE),
            (6, STATUS_CANCELLED, T::SEND)
        ]
    );
    assert_success!(pair.b_qp.send(12, &[b_mem.sge(0, 8)], 0));
    assert_eq!(
        summary(&pair.b_cq.wait_results(1)),
        [(12, STATUS_CANCELLED)]
    );
    pair.assert_cqs_empty();
    teardown_closing(pair, [a_mem, b_mem]);
}

/// E6 (NDSPI v2; this provider's behaviour): a work-request call that fails
/// inline does not harm the QP: earlier and later requests proceed and
/// succeed.
#[test]
fn e6_inline_failure_leaves_the_qp_working() {
    let (pair, a_mem, b_mem) = pair_with_memory(8192, 6);
    let (remote, token) = (b_mem.remote(0), b_mem.token());
    let qp = &pair.a_qp;
    let five: Vec<NdkSge> = (0..5).map(|i| a_mem.sge(i * 8, 8)).collect();
    let big = [0_u8; 300];
    let inline = [inline_sge(&big)];
    assert_success!(pair.b_qp.receive(50, &[b_mem.sge(4096, 1024)]));
    assert_success!(pair.b_qp.receive(51, &[b_mem.sge(5120, 1024)]));
    assert_success!(qp.write(1, &[a_mem.sge(0, 512)], remote, token, DEFER));
    assert_success!(qp.send(2, &[a_mem.sge(512, 100)], 0));
    assert_eq!(qp.send(90, &five, 0), STATUS_DATA_OVERRUN);
    assert_eq!(qp.send(91, &inline, INLINE), STATUS_BUFFER_OVERFLOW);
    assert_eq!(
        qp.write(92, &[a_mem.sge(0, 8)], remote, token, UNKNOWN_FLAG),
        STATUS_INVALID_PARAMETER
    );
    assert_eq!(qp.receive(93, &five), STATUS_DATA_OVERRUN);
    assert_success!(qp.write(3, &[a_mem.sge(1024, 512)], b_mem.remote(1024), token, 0));
    assert_success!(qp.send(4, &[a_mem.sge(2048, 100)], 0));
    assert_eq!(
        summary(&pair.a_cq.wait_results(4)),
        [
            (1, STATUS_SUCCESS),
            (2, STATUS_SUCCESS),
            (3, STATUS_SUCCESS),
            (4, STATUS_SUCCESS)
        ]
    );
    assert_eq!(
        summary(&pair.b_cq.wait_results(2)),
        [(50, STATUS_SUCCESS), (51, STATUS_SUCCESS)]
    );
    assert_eq!(&b_mem.bytes()[..512], &a_mem.bytes()[..512]);
    assert_eq!(&b_mem.bytes()[1024..1536], &a_mem.bytes()[1024..1536]);
    assert_eq!(&b_mem.bytes()[4096..4196], &a_mem.bytes()[512..612]);
    assert_eq!(&b_mem.bytes()[5120..5220], &a_mem.bytes()[2048..2148]);
    assert_empty(&pair.a_cq);
    teardown_with_regions(pair, [a_mem, b_mem]);
}

/// E7 (NDSPI v2; this provider's behaviour): an incoming Send larger than the
/// receive it lands in completes that receive with STATUS_BUFFER_OVERFLOW and
/// terminates the connection; the Send fails too (STATUS_REMOTE_RESOURCES,
/// ND_REMOTE_ERROR).
#[test]
fn e7_receive_too_small_overflows_and_terminates() {
    let (pair, a_mem, b_mem) = pair_sending(4096, 7);
    assert_success!(pair.b_qp.receive(10, &[b_mem.sge(0, 8), b_mem.sge(100, 8)]));
    assert_success!(pair.b_qp.receive(11, &[b_mem.sge(1024, 1024)]));
    // On the fabric the second Send waits behind the first; over iWARP the
    // first completes once sent and B's Terminate returns the verdict, so
    // the second is posted once that has arrived.
    let iwarp = Transport::default() == Transport::Iwarp;
    assert_success!(pair.a_qp.send(1, &[a_mem.sge(0, 64)], 0));
    if !iwarp {
        assert_success!(pair.a_qp.send(2, &[a_mem.sge(0, 8)], 0));
    }
    assert_eq!(
        summary_ex(&wait_results_ex(&pair.b_cq, 2)),
        [
            (10, STATUS_BUFFER_OVERFLOW, T::RECEIVE),
            (11, STATUS_CANCELLED, T::RECEIVE)
        ]
    );
    if iwarp {
        await_abort(&pair.a_disconnects);
        assert_success!(pair.a_qp.send(2, &[a_mem.sge(0, 8)], 0));
    }
    assert_eq!(
        summary_ex(&wait_results_ex(&pair.a_cq, 2)),
        [(1, peer_refused(), T::SEND), (2, STATUS_CANCELLED, T::SEND)]
    );
    // Terminated: later requests are cancelled on both sides.
    assert_success!(pair.b_qp.receive(12, &[b_mem.sge(1024, 1024)]));
    assert_success!(pair.a_qp.send(3, &[a_mem.sge(0, 8)], 0));
    assert_eq!(
        summary(&pair.b_cq.wait_results(1)),
        [(12, STATUS_CANCELLED)]
    );
    assert_eq!(summary(&pair.a_cq.wait_results(1)), [(3, STATUS_CANCELLED)]);
    teardown_closing(pair, [a_mem, b_mem]);
}

/// E8's table: whether an operation's completion may carry `status`.
/// SendAndInvalidate follows Send (its type is Send, P22), a
/// ReceiveAndInvalidate follows Receive, FastRegister follows Bind.
fn allowed(op: NdkOperationType, status: NtStatus) -> bool {
    let send = op == T::SEND;
    let receive = op == T::RECEIVE || op == T::RECEIVE_AND_INVALIDATE;
    let data = send || receive || op == T::READ || op == T::WRITE;
    let known = data || op == T::BIND || op == T::FAST_REGISTER || op == T::INVALIDATE;
    known
        && match status {
            STATUS_SUCCESS
            | STATUS_CANCELLED
            | STATUS_INVALID_DEVICE_REQUEST
            | STATUS_INTERNAL_ERROR => true,
            STATUS_DATA_OVERRUN => data && !receive,
            STATUS_BUFFER_OVERFLOW => receive,
            STATUS_ACCESS_VIOLATION | STATUS_IO_TIMEOUT | STATUS_REMOTE_RESOURCES => data,
            _ => false,
        }
}

/// One failure scenario on a fresh pair: `run` posts, then both CQs are
/// drained of the expected entries, which must match exactly and fit E8.
fn scenario(
    name: &str,
    run: impl FnOnce(&Pair, &Region, &Region, &Region),
    a_expected: &[(usize, NtStatus, NdkOperationType)],
    b_expected: &[(usize, NtStatus, NdkOperationType)],
) {
    let (pair, a_mem, b_mem) = pair_with_patterns(4096, 8, 9);
    let b_recv = Region::new(&pair.b_pd, 4096, 0, MR_LOCAL_WRITE);
    run(&pair, &a_mem, &b_mem, &b_recv);
    for (cq, expected, side) in [(&pair.a_cq, a_expected, "A"), (&pair.b_cq, b_expected, "B")] {
        let got = wait_results_ex(cq, expected.len());
        assert_eq!(sorted_ex(&got), expected, "{name}: side {side}");
        for r in &got {
            assert!(
                allowed(r.type_, r.status),
                "{name}: {:?} completed with {:#x}",
                r.type_,
                r.status
            );
        }
        assert_empty(cq);
    }
    teardown_closing(pair, [a_mem, b_mem, b_recv]);
}

/// E8 (NDSPI v2; this provider's behaviour): a completion carries only a
/// status its operation can report — checked here on the cancellations that
/// follow an error, for every operation, and on every other error this
/// provider produces by the `e8_*_fits` scenarios below.
#[test]
fn e8_completion_statuses_fit_their_operation() {
    // A Write with a bad remote token; every kind of request posted
    // afterwards is cancelled.
    let (pair, a, b) = pair_with_patterns(4096, 10, 11);
    let mw = pair.a_pd.mw();
    let frmr = Frmr::new(&pair.a, &pair.a_pd, PAGE, 0, 4, false);
    let qp = &pair.a_qp;
    assert_success!(failing_write(qp, 1, &a, 8, b.remote(0), b.token() ^ 1));
    assert_success!(qp.bind(2, &a.mr, &mw, a.remote(0), 64, OP_REMOTE_READ));
    assert_success!(frmr.post(qp, 3, 0));
    assert_success!(qp.invalidate(4, frmr.mr.header(), 0));
    assert_success!(qp.read(5, &[a.sge(0, 8)], b.remote(0), b.token(), 0));
    assert_success!(qp.send(6, &[a.sge(0, 8)], 0));
    assert_success!(qp.send_and_invalidate(7, &[a.sge(0, 8)], 0, 1));
    assert_success!(qp.receive(8, &[a.sge(0, 8)]));
    let got = wait_results_ex(&pair.a_cq, 8);
    assert_eq!(
        sorted_ex(&got),
        [
            (1, STATUS_ACCESS_VIOLATION, T::WRITE),
            (2, STATUS_CANCELLED, T::BIND),
            (3, STATUS_CANCELLED, T::FAST_REGISTER),
            (4, STATUS_CANCELLED, T::INVALIDATE),
            (5, STATUS_CANCELLED, T::READ),
            (6, STATUS_CANCELLED, T::SEND),
            (7, STATUS_CANCELLED, T::SEND),
            (8, STATUS_CANCELLED, T::RECEIVE),
        ]
    );
    assert!(got.iter().all(|r| allowed(r.type_, r.status)));
    frmr.close(&pair.a);
    assert_close(mw.close());
    teardown_closing(pair, [a, b]);
}

/// The completion status of a Send or Write the peer refused
/// ([`Transport::peer_refused`]: over iWARP it completes successfully;
/// `failing_write` fails at A there).
fn peer_refused() -> NtStatus {
    Transport::default().peer_refused(STATUS_REMOTE_RESOURCES)
}

/// One `#[test]` per E8 failure [`scenario`] on a fresh pair: the closure
/// posts (`|pair, a_mem, b_mem, b_recv|`); then A's and B's CQs hold
/// exactly the entries listed, each with a status its operation may report.
macro_rules! e8_scenarios {
    ($(
        $(#[$attr:meta])*
        fn $name:ident() { $run:expr, A: $a_expected:expr, B: $b_expected:expr $(,)? }
    )*) => {$(
        $(#[$attr])*
        fn $name() {
            scenario(stringify!($name), $run, &$a_expected, &$b_expected);
        }
    )*};
}

e8_scenarios! {
    /// E8: a Read past the remote region fails with REMOTE_RESOURCES.
    #[test]
    fn e8_read_past_the_region_fits() {
        |p, a, b, _| {
            assert_success!(p.a_qp.read(1, &[a.sge(0, 256)], b.remote(4000), b.token(), 0));
        },
        A: [(1, STATUS_REMOTE_RESOURCES, T::READ)],
        B: [],
    }

    /// E8: a Read with a bad remote token fails with ACCESS_VIOLATION.
    #[test]
    fn e8_read_with_a_bad_token_fits() {
        |p, a, b, _| {
            assert_success!(p.a_qp.read(1, &[a.sge(0, 64)], b.remote(0), b.token() ^ 2, 0));
        },
        A: [(1, STATUS_ACCESS_VIOLATION, T::READ)],
        B: [],
    }

    /// E8: a Write past the remote region is refused by the peer.
    #[test]
    fn e8_write_past_the_region_fits() {
        |p, a, b, _| {
            assert_success!(p.a_qp.write(1, &[a.sge(0, 256)], b.remote(4000), b.token(), 0));
        },
        A: [(1, peer_refused(), T::WRITE)],
        B: [],
    }

    /// E8: a Send into a receive too small overflows the receive.
    #[test]
    fn e8_receive_too_small_fits() {
        |p, a, _, r| {
            assert_success!(p.b_qp.receive(10, &[r.sge(0, 16)]));
            assert_success!(p.a_qp.send(1, &[a.sge(0, 64)], 0));
        },
        A: [(1, peer_refused(), T::SEND)],
        B: [(10, STATUS_BUFFER_OVERFLOW, T::RECEIVE)],
    }

    /// E8: a Send gathering with a bad local token fails at A; B's receive
    /// is cancelled.
    #[test]
    fn e8_send_with_a_bad_local_token_fits() {
        |p, a, _, r| {
            assert_success!(p.b_qp.receive(10, &[r.sge(0, 64)]));
            let mut sge = a.sge(0, 64);
            sge.memory_region_token ^= 0x77;
            assert_success!(p.a_qp.send(1, &[sge], 0));
        },
        A: [(1, STATUS_ACCESS_VIOLATION, T::SEND)],
        B: [(10, STATUS_CANCELLED, T::RECEIVE)],
    }

    /// E8: a receive scattering with a bad local token fails at B.
    #[test]
    fn e8_receive_with_a_bad_local_token_fits() {
        |p, a, _, r| {
            let mut sge = r.sge(0, 64);
            sge.memory_region_token ^= 0x77;
            assert_success!(p.b_qp.receive(10, &[sge]));
            assert_success!(p.a_qp.send(1, &[a.sge(0, 64)], 0));
        },
        A: [(1, peer_refused(), T::SEND)],
        B: [(10, STATUS_ACCESS_VIOLATION, T::RECEIVE)],
    }

    /// E8: a SendAndInvalidate of a token the peer cannot invalidate fails
    /// B's receive with INVALID_DEVICE_REQUEST.
    #[test]
    fn e8_send_and_invalidate_of_a_foreign_token_fits() {
        |p, a, _, r| {
            assert_success!(p.b_qp.receive(10, &[r.sge(0, 64)]));
            assert_success!(p.a_qp.send_and_invalidate(1, &[a.sge(0, 64)], 0, 0x0BAD_0BAD));
        },
        A: [(1, peer_refused(), T::SEND)],
        B: [(10, STATUS_INVALID_DEVICE_REQUEST, T::RECEIVE)],
    }

    /// E8: an Invalidate of a window never bound completes with
    /// INVALID_DEVICE_REQUEST.
    #[test]
    fn e8_invalidate_of_an_unbound_window_fits() {
        |p, _, _, _| {
            let mw = p.a_pd.mw();
            assert_success!(p.a_qp.invalidate(1, mw.header(), 0));
            let got = wait_results_ex(&p.a_cq, 1);
            assert_eq!(
                summary_ex(&got),
                [(1, STATUS_INVALID_DEVICE_REQUEST, T::INVALIDATE)]
            );
            assert!(allowed(got[0].type_, got[0].status));
            assert_close(mw.close());
        },
        A: [],
        B: [],
    }
}

/// E9: a request that completes with an error satisfies a SOLICITED arm (a
/// successful initiator completion does not), and an ANY arm.
#[test]
fn e9_error_completion_satisfies_solicited_and_any_arms() {
    for arm in [NdkCqNotifyType::SOLICITED, NdkCqNotifyType::ANY] {
        let (pair, a_mem, b_mem) = pair_with_memory(4096, 12);
        let (remote, token) = (b_mem.remote(0), b_mem.token());
        pair.a_cq.arm(arm);
        if arm == NdkCqNotifyType::SOLICITED {
            assert_success!(pair.a_qp.write(1, &[a_mem.sge(0, 8)], remote, token, 0));
            assert_eq!(summary(&pair.a_cq.wait_results(1)), [(1, STATUS_SUCCESS)]);
            assert!(
                pair.a_cq.notifications().is_empty(),
                "a success satisfied SOLICITED"
            );
        }
        assert_success!(failing_write(&pair.a_qp, 2, &a_mem, 8, remote, token ^ 4));
        assert_success!(pair.a_cq.1.wait(), "{arm:?}");
        assert_eq!(
            summary(&pair.a_cq.wait_results(1)),
            [(2, STATUS_ACCESS_VIOLATION)]
        );
        assert_eq!(pair.a_cq.notifications().len(), 1);
        teardown_closing(pair, [a_mem, b_mem]);
    }
    // At the receiver: a receive that completes with an error (too small,
    // E7) satisfies the receiver's SOLICITED arm, though the Send was not
    // solicited; so does a receive cancelled by a flush.
    let (pair, a_mem, b_mem) = pair_sending(4096, 14);
    pair.b_cq.arm(NdkCqNotifyType::SOLICITED);
    assert_success!(pair.b_qp.receive(20, &[b_mem.sge(0, 8)]));
    assert_success!(pair.a_qp.send(21, &[a_mem.sge(0, 64)], 0));
    assert_success!(pair.b_cq.1.wait());
    assert_eq!(
        summary(&pair.b_cq.wait_results(1)),
        [(20, STATUS_BUFFER_OVERFLOW)]
    );
    pair.a_cq.arm(NdkCqNotifyType::SOLICITED);
    assert_eq!(summary(&pair.a_cq.wait_results(1)), [(21, peer_refused())]);
    assert_success!(pair.a_qp.receive(22, &[a_mem.sge(1024, 64)]));
    pair.a_qp.flush();
    assert_success!(pair.a_cq.1.wait());
    assert_eq!(
        summary(&pair.a_cq.wait_results(1)),
        [(22, STATUS_CANCELLED)]
    );
    teardown_closing(pair, [a_mem, b_mem]);
    // C6: ERRORS merged with SOLICITED is SOLICITED, which an error satisfies.
    let pair = Pair::new();
    let a_mem = Region::pattern(&pair.a_pd, 4096, 13, MR_LOCAL_WRITE);
    pair.a_cq.arm(NdkCqNotifyType::ERRORS);
    pair.a_cq.arm(NdkCqNotifyType::SOLICITED);
    assert_success!(failing_write(&pair.a_qp, 3, &a_mem, 8, 0x1000, 0x1234));
    assert_success!(pair.a_cq.1.wait());
    assert_eq!(
        summary(&pair.a_cq.wait_results(1)),
        [(3, STATUS_ACCESS_VIOLATION)]
    );
    teardown_closing(pair, [a_mem]);
}

/// A connection whose A side has a CQ of `depth` entries (watched), shared by
/// its receive and initiator queues.
struct SmallCq {
    pair: Pair,
    a_mem: Region,
    b_mem: Region,
}

impl SmallCq {
    fn new(depth: u32, watch: &Arc<Signal>) -> Self {
        let pair = Fixture::new()
            .a_cq(|a| a.try_cq(depth, watch).expect("CreateCq"))
            .b_cq(|b| b.cq(256))
            .pair();
        let a_mem = Region::pattern(&pair.a_pd, 4096, 14, MR_LOCAL_WRITE);
        let b_mem = Region::new(&pair.b_pd, 4096, 0, MR_REMOTE);
        Self { pair, a_mem, b_mem }
    }

    /// A Write that succeeds (unless the QP is unusable).
    fn write(&self, context: usize) -> NtStatus {
        self.pair.a_qp.write(
            context,
            &[self.a_mem.sge(0, 8)],
            self.b_mem.remote(0),
            self.b_mem.token(),
            0,
        )
    }

    /// Closes everything; every close completes (L18, E13).
    fn close(self) {
        teardown_closing(self.pair, [self.a_mem, self.b_mem]);
    }
}

/// E10: a CQ that would have to hold more completions than its depth
/// overflows: STATUS_BUFFER_OVERFLOW through its notification callback; from
/// then on the CQ and every QP associated with it are unusable (posts fail
/// inline) and no further completion is reported.
#[test]
fn e10_cq_overflow_reports_buffer_overflow_and_disables_its_qps() {
    const DEPTH: usize = 4;
    let watch = Signal::new();
    let rig = SmallCq::new(DEPTH as u32, &watch);
    let other_qp = rig.pair.a_pd.qp(&rig.pair.a_cq, &rig.pair.a_cq, 0xC);
    rig.pair.a_cq.arm(NdkCqNotifyType::ERRORS);
    for i in 0..=DEPTH {
        assert_success!(rig.write(i), "Write {i}");
    }
    assert_eq!(watch.wait(), STATUS_BUFFER_OVERFLOW);
    // What was queued before the error may still be reaped; the completion
    // that did not fit is not reported, nor is anything later.
    let kept = rig.pair.a_cq.poll(2 * DEPTH);
    assert!(kept.len() <= DEPTH);
    for (i, r) in kept.iter().enumerate() {
        assert_eq!((r.request_context as usize, r.status), (i, STATUS_SUCCESS));
    }
    let unusable = [
        ("Write", rig.write(100)),
        (
            "Receive",
            rig.pair.a_qp.receive(101, &[rig.a_mem.sge(1024, 64)]),
        ),
        ("Send", rig.pair.a_qp.send(102, &[rig.a_mem.sge(0, 8)], 0)),
        (
            "Receive on another QP of the CQ",
            other_qp.receive(103, &[rig.a_mem.sge(2048, 64)]),
        ),
    ];
    for (name, status) in unusable {
        assert_ne!(status, STATUS_SUCCESS, "{name} on an unusable QP");
        assert_eq!(status, STATUS_INTERNAL_ERROR, "{name}");
    }
    rig.pair.a_qp.flush();
    assert!(
        rig.pair.a_cq.poll(16).is_empty(),
        "a completion after the overflow"
    );
    rig.pair.a_cq.arm(NdkCqNotifyType::ANY);
    rig.pair.a_cq.arm(NdkCqNotifyType::ERRORS);
    assert_eq!(watch.count(), 1, "the overflow is reported once");
    assert_close(other_qp.close());
    rig.close();
    assert_eq!(watch.all(), [STATUS_BUFFER_OVERFLOW]);
}

/// E11: a fatal CQ error is reported through the notification callback with
/// STATUS_INTERNAL_ERROR, with E10's consequences. The C ABI offers no way
/// to provoke a fatal device error in host mode, so this checks what a
/// consumer can observe: a healthy CQ, armed every way through a busy
/// exchange, never reports STATUS_INTERNAL_ERROR; and after the one error a
/// consumer can cause (overflow) the CQ reports that error, once, and then
/// nothing — E11's "same consequences".
#[test]
fn e11_cq_errors_are_reported_once_and_healthy_cqs_report_no_fatal_error() {
    let (pair, a_mem, b_mem) = pair_with_memory(4096, 15);
    for round in 0..30_usize {
        let arm = [
            NdkCqNotifyType::ANY,
            NdkCqNotifyType::SOLICITED,
            NdkCqNotifyType::ERRORS,
        ][round % 3];
        pair.a_cq.arm(arm);
        pair.b_cq.arm(arm);
        assert_success!(pair.b_qp.receive(round, &[b_mem.sge(0, 64)]));
        let flags = if round % 2 == 0 { SOLICIT } else { 0 };
        assert_success!(pair.a_qp.send(round, &[a_mem.sge(0, 64)], flags));
        assert_eq!(pair.a_cq.wait_results(1).len(), 1);
        assert_eq!(pair.b_cq.wait_results(1).len(), 1);
    }
    for status in pair
        .a_cq
        .notifications()
        .into_iter()
        .chain(pair.b_cq.notifications())
    {
        assert_success!(status);
    }
    teardown_with_regions(pair, [a_mem, b_mem]);

    let watch = Signal::new();
    let rig = SmallCq::new(2, &watch);
    for i in 0..3 {
        assert_success!(rig.write(i));
    }
    rig.pair.a_cq.arm(NdkCqNotifyType::ERRORS);
    assert_eq!(watch.wait(), STATUS_BUFFER_OVERFLOW);
    assert_eq!(rig.write(9), STATUS_INTERNAL_ERROR);
    rig.close();
    assert_eq!(watch.all(), [STATUS_BUFFER_OVERFLOW]);
}

/// E12 (inference from C3, C6): a CQ error satisfies every arm type — ERRORS,
/// SOLICITED and ANY — and is delivered only through an arm: an overflow with
/// no arm set is reported at the next ArmCq, once.
#[test]
fn e12_cq_error_satisfies_every_arm_type_and_only_through_an_arm() {
    for arm in [
        NdkCqNotifyType::ERRORS,
        NdkCqNotifyType::SOLICITED,
        NdkCqNotifyType::ANY,
    ] {
        let watch = Signal::new();
        let rig = SmallCq::new(2, &watch);
        for i in 0..3 {
            assert_success!(rig.write(i));
        }
        // The overrun has happened (the deferred engine ran the Writes).
        settle_engine();
        assert_eq!(watch.count(), 0, "{arm:?}: reported without an arm");
        rig.pair.a_cq.arm(arm);
        assert_eq!(watch.wait(), STATUS_BUFFER_OVERFLOW, "{arm:?}");
        rig.pair.a_cq.arm(arm);
        assert_eq!(watch.count(), 1, "{arm:?}");
        rig.close();
        assert_eq!(watch.all(), [STATUS_BUFFER_OVERFLOW], "{arm:?}");
    }
    // Armed before the overflow: the arm is satisfied when it happens.
    for arm in [NdkCqNotifyType::ERRORS, NdkCqNotifyType::SOLICITED] {
        let watch = Signal::new();
        let rig = SmallCq::new(2, &watch);
        rig.pair.a_cq.arm(arm);
        for i in 0..3 {
            assert_success!(rig.write(i));
        }
        assert_eq!(watch.wait(), STATUS_BUFFER_OVERFLOW, "{arm:?}");
        rig.close();
        assert_eq!(watch.all(), [STATUS_BUFFER_OVERFLOW], "{arm:?}");
    }
}

/// E13 (inference): an object made unusable by an error still answers every
/// call promptly — inline failure or cancelled completion — and closes
/// normally: after a CQ overflow (E10) and after an error completion (E5).
#[test]
fn e13_unusable_objects_answer_every_call_and_close_normally() {
    // E10: every call on the CQ and its QP returns; posts fail inline.
    let watch = Signal::new();
    let rig = SmallCq::new(2, &watch);
    for i in 0..6 {
        let _ = rig.write(i);
    }
    // The overrun has happened (the deferred engine ran the Writes), so the
    // arm reports it rather than the first completion.
    settle_engine();
    rig.pair.a_cq.arm(NdkCqNotifyType::ANY);
    assert_eq!(watch.wait(), STATUS_BUFFER_OVERFLOW);
    let mw = rig.pair.a_pd.mw();
    let frmr = Frmr::new(&rig.pair.a, &rig.pair.a_pd, PAGE, 0, 4, false);
    let qp = &rig.pair.a_qp;
    let sge = [rig.a_mem.sge(0, 8)];
    let (remote, token) = (rig.b_mem.remote(0), rig.b_mem.token());
    let calls = [
        qp.send(10, &sge, 0),
        qp.send_and_invalidate(11, &sge, 0, 1),
        qp.write(12, &sge, remote, token, DEFER),
        qp.read(13, &sge, remote, token, 0),
        qp.bind(14, &rig.a_mem.mr, &mw, rig.a_mem.remote(0), 64, 0),
        frmr.post(qp, 15, 0),
        qp.invalidate(16, mw.header(), 0),
        qp.receive(17, &sge),
    ];
    for status in calls {
        assert_ne!(status, STATUS_SUCCESS);
    }
    qp.flush();
    let _ = rig.pair.a_cq.poll(8);
    let _ = rig.pair.a_cq.poll_ex(8);
    rig.pair.a_cq.arm(NdkCqNotifyType::SOLICITED);
    assert!(rig.pair.a_cq.poll(8).is_empty());
    frmr.close(&rig.pair.a);
    assert_close(mw.close());
    rig.close();

    // E5: a terminated QP accepts and cancels.
    let pair = Pair::new();
    let a_mem = Region::pattern(&pair.a_pd, 4096, 16, MR_LOCAL_WRITE);
    assert_success!(failing_write(&pair.a_qp, 1, &a_mem, 8, 0x1000, 0x4321));
    assert_eq!(
        summary(&pair.a_cq.wait_results(1)),
        [(1, STATUS_ACCESS_VIOLATION)]
    );
    let mw = pair.a_pd.mw();
    let qp = &pair.a_qp;
    let sge = [a_mem.sge(0, 8)];
    let calls = [
        qp.send(2, &sge, 0),
        qp.write(3, &sge, 0x1000, 0x4321, DEFER),
        qp.read(4, &sge, 0x1000, 0x4321, 0),
        qp.bind(5, &a_mem.mr, &mw, a_mem.remote(0), 64, 0),
        qp.invalidate(6, mw.header(), 0),
        qp.receive(7, &sge),
    ];
    let accepted: Vec<usize> = calls
        .iter()
        .enumerate()
        .filter(|(_, s)| **s == STATUS_SUCCESS)
        .map(|(i, _)| i + 2)
        .collect();
    qp.flush();
    let done = pair.a_cq.wait_results(accepted.len());
    assert_eq!(sorted_contexts(&done), accepted);
    assert!(done.iter().all(|r| r.status == STATUS_CANCELLED));
    assert_close(mw.close());
    teardown_closing(pair, [a_mem]);
}

/// E14: every NDK_RESULT_EX with STATUS_SUCCESS has 0 at offset 0x1C (the
/// NDKPI 2.1 ProviderErrorCode), written by the provider — the array is
/// prefilled with 0xA5 — for every operation type.
#[test]
fn e14_result_ex_provider_error_code_is_zero_on_success() {
    assert_eq!(std::mem::offset_of!(NdkResultEx, provider_error_code), 0x1C);
    let pair = Pair::new();
    let a_mem = Region::pattern(&pair.a_pd, 4096, 17, MR_REMOTE);
    let b_mem = Region::pattern(&pair.b_pd, 4096, 18, MR_REMOTE);
    let a_mw = pair.a_pd.mw();
    let b_mw = pair.b_pd.mw();
    let a_frmr = Frmr::new(&pair.a, &pair.a_pd, PAGE, 0, 4, false);
    let window = (&b_mem.mr, &b_mw, b_mem.remote(0), 64);
    let bound = pair.b_qp.bound(&pair.b_cq, 50, window, OP_REMOTE_READ);
    assert_success!(pair.b_qp.receive(51, &[b_mem.sge(1024, 64)]));
    assert_success!(pair.b_qp.receive(52, &[b_mem.sge(2048, 64)]));
    assert_success!(pair.a_qp.receive(53, &[a_mem.sge(2048, 64)]));
    let qp = &pair.a_qp;
    let (remote, token) = (b_mem.remote(3072), b_mem.token());
    post_one_of_each(
        qp,
        (&a_mem, &a_mw, &a_frmr),
        (remote, token),
        b_mw.remote_token(),
    );
    assert_success!(pair.b_qp.send(54, &[b_mem.sge(0, 8)], 0));
    let mut results = vec![bound];
    for (cq, n) in [(&pair.a_cq, 9), (&pair.b_cq, 3)] {
        results.extend(gathered(n, |missing| poll_ex_dirty(cq, missing)));
    }
    let mut types: Vec<NdkOperationType> = Vec::new();
    for r in &results {
        assert_success!(r.status);
        assert_eq!(r.provider_error_code, 0, "{:?}", r.type_);
        types.push(r.type_);
    }
    for t in [
        T::SEND,
        T::RECEIVE,
        T::RECEIVE_AND_INVALIDATE,
        T::WRITE,
        T::READ,
        T::BIND,
        T::INVALIDATE,
        T::FAST_REGISTER,
    ] {
        assert!(types.contains(&t), "{t:?}");
    }
    a_frmr.close(&pair.a);
    assert_closed([a_mw.close(), b_mw.close()]);
    teardown_with_regions(pair, [a_mem, b_mem]);
}
