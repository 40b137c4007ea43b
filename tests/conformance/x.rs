//! Family X of the rules catalogue, through the C ABI: the disconnect scheme
//! (seed 004).
//!
//! Every test connects adapters on addresses of its own ([`Pair::new`] uses
//! [`fresh_addresses`]) and closes everything it created.

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use softndk::abi::*;

use super::harness::*;

/// Aborts the connection of `pair` with an error completion (E5): an RDMA
/// Write of A gathering from a token A's MR never issued, to a page of B. A
/// local error, so the failed completion is A's on any transport (a remote
/// one, over iWARP, would return as the peer's Terminate after A's Write
/// completed successfully, RFC 5040 §7). Returns the page of memory made on
/// each side (A's filled with 1s, B's with 0s), for the test to use and
/// close.
fn abort(pair: &Pair) -> (Mem, Mem) {
    let a_mem = Mem::all(&pair.a_pd, 4096, 1);
    let b_mem = Mem::all(&pair.b_pd, 4096, 0);
    let (remote, token) = (b_mem.remote(0), b_mem.token());
    let bad = [a_mem.bad_sge(0, 64)];
    assert_success!(pair.a_qp.write(0xBAD, &bad, remote, token, 0));
    let failed = pair.a_cq.wait_results(1);
    assert_eq!(failed[0].request_context as usize, 0xBAD);
    assert_ne!(failed[0].status, STATUS_SUCCESS, "the Write failed");
    (a_mem, b_mem)
}

/// A disconnects; B, once told (X2), answers with its own Disconnect: both
/// Disconnects must complete with STATUS_SUCCESS (X1).
fn expect_b_answers_a(pair: &Pair) {
    let (x, xs) = pair.a_conn.disconnect();
    assert_success!(pair.b_disconnects.wait(), "B is told (X2)");
    let (y, ys) = pair.b_conn.disconnect();
    assert_success!(xs.outcome(x), "A's Disconnect completes");
    assert_success!(ys.outcome(y), "B's Disconnect completes");
}

/// A calls Disconnect, which must pend until B answers (X1), and B is told
/// (X2): the signal of A's Disconnect.
fn expect_a_disconnect_pends(pair: &Pair) -> Arc<Signal> {
    let (x, xs) = pair.a_conn.disconnect();
    assert_eq!(x, STATUS_PENDING, "Disconnect pends");
    assert_success!(pair.b_disconnects.wait(), "B is told (X2)");
    xs
}

/// Both sides call Disconnect, neither waiting for the other's indication:
/// the outcomes of A's and of B's.
fn both_disconnect(pair: &Pair) -> (NtStatus, NtStatus) {
    let (x, xs) = pair.a_conn.disconnect();
    let (y, ys) = pair.b_conn.disconnect();
    (xs.outcome(x), ys.outcome(y))
}

// ---------------------------------------------------------------------------
// X1
// ---------------------------------------------------------------------------

/// X1 (a): Disconnect completes successfully only once the peer's graceful
/// disconnect has arrived: A's Disconnect returns STATUS_PENDING and does
/// not complete while B (which got its indication) has not disconnected;
/// once B disconnects, both complete with STATUS_SUCCESS.
#[test]
fn x1_disconnect_pends_until_the_peer_disconnects() {
    let pair = Pair::new();
    let xs = expect_a_disconnect_pends(&pair);
    assert_eq!(
        settled_count(&xs),
        0,
        "no completion before the peer's graceful disconnect arrived"
    );
    let (y, ys) = pair.b_conn.disconnect();
    assert_success!(ys.outcome(y));
    assert_success!(xs.wait(), "completes once B disconnected");
    assert_eq!(settled_count(&xs), 1);
    close_pair(pair);
}

/// X1 (a): the peer may answer by closing its connector instead of calling
/// Disconnect; that, too, is its graceful disconnect: the pending
/// Disconnect then completes with STATUS_SUCCESS.
#[test]
fn x1_the_peer_closing_its_connector_completes_the_disconnect() {
    let pair = Pair::new();
    let xs = expect_a_disconnect_pends(&pair);
    assert_eq!(settled_count(&xs), 0, "B has not answered yet");
    finish_close(close_connector_async(&pair.b_conn));
    assert_success!(xs.wait(), "B's close answered");
    close_pair_except(pair, Closed::B_CONN);
}

/// X1 (a): an abort while the Disconnect waits for the peer ends the wait
/// with a failure: the peer, told of the disconnect but not yet answering,
/// makes an RDMA Write to a token this side never issued; the error
/// terminates the connection (E5) and the pending Disconnect completes with
/// STATUS_CONNECTION_ABORTED. The peer had received this side's graceful
/// disconnect before the abort, so its own later Disconnect succeeds, and it
/// gets no second indication (N24).
#[test]
fn x1_an_abort_during_the_wait_fails_the_disconnect_connection_aborted() {
    let pair = Pair::new();
    let a_mem = Mem::all(&pair.a_pd, 4096, 0);
    let b_mem = Mem::all(&pair.b_pd, 4096, 2);
    let xs = expect_a_disconnect_pends(&pair);
    // B's own error completion (a local one: see `abort`).
    assert_success!(pair.b_qp.write(
        0xBAD,
        &[b_mem.bad_sge(0, 64)],
        a_mem.remote(0),
        a_mem.token(),
        0
    ));
    let failed = pair.b_cq.wait_results(1);
    assert_ne!(failed[0].status, STATUS_SUCCESS, "the Write failed");
    assert_eq!(xs.wait(), STATUS_CONNECTION_ABORTED);
    let (y, ys) = pair.b_conn.disconnect();
    assert_success!(ys.outcome(y), "A's graceful disconnect had arrived");
    assert_eq!(settled_count(&pair.b_disconnects), 1);
    assert_eq!(pair.a_disconnects.count(), 0, "A had disconnected itself");
    assert!(a_mem.bytes().iter().all(|&x| x == 0));
    close_pair_with_regions(pair, [a_mem, b_mem]);
}

/// X1 with L20: closing the connector while its Disconnect waits for the
/// peer ends the wait: the Disconnect completes (STATUS_CANCELLED, the
/// provider's documented status) no later than the close; the peer is
/// still told once, and its own Disconnect then succeeds (the close was a
/// graceful disconnect).
#[test]
fn x1_closing_the_connector_ends_the_wait_for_the_peer() {
    let pair = Pair::new();
    let xs = expect_a_disconnect_pends(&pair);
    finish_close(close_connector_async(&pair.a_conn));
    assert_eq!(
        xs.all(),
        [STATUS_CANCELLED],
        "completed before the close (L21)"
    );
    let (y, ys) = pair.b_conn.disconnect();
    assert_success!(ys.outcome(y));
    assert_eq!(settled_count(&pair.b_disconnects), 1);
    assert_eq!(xs.count(), 1);
    close_pair_except(pair, Closed::A_CONN);
}

/// X1 (a), the other way round: when the peer disconnects first, the
/// consumer's later Disconnect completes with STATUS_SUCCESS (the peer's
/// graceful disconnect has arrived already), exactly once.
#[test]
fn x1_disconnect_after_the_peer_disconnected_completes_with_success() {
    let pair = Pair::new();
    let (y, ys) = pair.b_conn.disconnect();
    assert_success!(pair.a_disconnects.wait(), "A is told (X2)");
    let (x, xs) = pair.a_conn.disconnect();
    assert_success!(xs.outcome(x));
    assert_success!(ys.outcome(y));
    assert_eq!(settled_count(&xs), usize::from(x == STATUS_PENDING));
    assert_eq!(ys.count(), usize::from(y == STATUS_PENDING));
    close_pair(pair);
}

/// X1 (b): Disconnect completes only once all DMA on the connection has
/// finished, including Writes posted with the silent-success flag. A thread
/// keeps posting large silent Writes (alternating two sources, so each one
/// changes the target) while both sides disconnect: once A's Disconnect has
/// completed, the target never changes again; the poster's next post is
/// refused (X5); every Write that did not run to success reports a
/// completion (cancelled), once.
#[test]
fn x1_disconnect_completes_only_after_dma_finished_including_silent_success() {
    let pair = Pair::new();
    let len = (1_usize << 20).min(pair.a.info().max_transfer_length as usize);
    let sources = [
        Mem::all(&pair.a_pd, len, 0x11),
        Mem::all(&pair.a_pd, len, 0x22),
    ];
    let target = Mem::all(&pair.b_pd, len, 0);
    let sges = [sources[0].sge(0, len), sources[1].sge(0, len)];
    let (remote, token) = (target.remote(0), target.token());
    let landed = || target.bytes()[len - 1] != 0;
    let posted = std::thread::scope(|s| {
        let poster = s.spawn(|| {
            // Bounded: a provider that accepts posts after the Disconnect
            // (X5), or a test failing before it, ends the loop.
            let deadline = std::time::Instant::now() + WAIT;
            for i in 0.. {
                assert!(
                    std::time::Instant::now() < deadline,
                    "posts still accepted after {WAIT:?}"
                );
                let status =
                    pair.a_qp
                        .write(0x100 + i, &sges[i % 2..=i % 2], remote, token, SILENT);
                if status == STATUS_NO_MORE_ENTRIES {
                    // The initiator queue is full (P: the ring is the QP's
                    // depth; over iWARP the stream drains it): wait a turn.
                    std::thread::yield_now();
                    continue;
                }
                if status != STATUS_SUCCESS {
                    assert_eq!(
                        status, STATUS_CONNECTION_INVALID,
                        "post {i} after Disconnect"
                    );
                    return i;
                }
            }
            unreachable!()
        });
        wait_until("no Write landed", landed);
        let (x, xs) = pair.a_conn.disconnect();
        let (y, ys) = pair.b_conn.disconnect();
        assert_success!(xs.outcome(x));
        // Over iWARP A's DMA is the reading of its sources (a Write
        // completes once sent) and the target is written by B's placement of
        // what arrives, which ends before B's Disconnect completes: A's FIN,
        // which completes it, follows A's last byte. There the target is
        // checked once both have completed; on the fabric A's engine writes
        // the target itself.
        let b_first = (Transport::default() == Transport::Iwarp).then(|| ys.outcome(y));
        let snapshot = target.bytes().to_vec();
        let posted = poster.join().unwrap();
        std::thread::sleep(SETTLE);
        assert!(
            target.bytes() == &snapshot[..],
            "the target changed after the Disconnect completed: DMA was still running"
        );
        assert_success!(b_first.unwrap_or_else(|| ys.outcome(y)));
        posted
    });
    assert!(posted > 0);
    // Silent successes report nothing; a Write the disconnect cut off
    // reports its cancellation, once.
    let reported = sorted(&pair.a_cq.poll(posted + 8));
    let mut seen = std::collections::HashSet::new();
    for (context, status) in &reported {
        assert!((0x100..0x100 + posted).contains(context), "{context:#x}");
        assert_eq!(*status, STATUS_CANCELLED, "Write {context:#x}");
        assert!(seen.insert(*context), "Write {context:#x} reported twice");
    }
    for mem in sources {
        mem.close();
    }
    close_pair_with_regions(pair, [target]);
}

/// X1: when the connection was aborted (an error completion ended it, E5)
/// before the consumer disconnected, Disconnect still completes, with a
/// failure: STATUS_CONNECTION_ABORTED, on both sides.
#[test]
fn x1_disconnect_of_an_aborted_connection_fails_connection_aborted() {
    let pair = Pair::new();
    let (a_mem, b_mem) = abort(&pair);
    assert_success!(pair.a_disconnects.wait());
    assert_success!(pair.b_disconnects.wait());
    let aborted = STATUS_CONNECTION_ABORTED;
    assert_eq!(both_disconnect(&pair), (aborted, aborted));
    close_pair_with_regions(pair, [a_mem, b_mem]);
}

// ---------------------------------------------------------------------------
// X2, X3
// ---------------------------------------------------------------------------

/// X2: the peer's graceful disconnect is indicated to a consumer that has
/// not called Disconnect (once), and not to the one that initiated it.
#[test]
fn x2_peer_disconnect_is_indicated_unless_the_consumer_disconnected_first() {
    let pair = Pair::new();
    expect_b_answers_a(&pair);
    assert_eq!(
        settled_count(&pair.a_disconnects),
        0,
        "A disconnected itself"
    );
    assert_eq!(pair.b_disconnects.count(), 1, "once");
    close_pair(pair);
}

/// X2: an abort (an error completion ended the connection) is indicated to
/// both consumers, neither of which had called Disconnect.
#[test]
fn x2_abort_is_indicated_to_both_consumers() {
    let pair = Pair::new();
    let (a_mem, b_mem) = abort(&pair);
    assert_success!(pair.a_disconnects.wait(), "indicated to A");
    assert_success!(pair.b_disconnects.wait(), "indicated to B");
    let _ = both_disconnect(&pair);
    assert_eq!(settled_count(&pair.a_disconnects), 1);
    assert_eq!(pair.b_disconnects.count(), 1);
    close_pair_with_regions(pair, [a_mem, b_mem]);
}

/// X2: closing a connected connector without Disconnect is a graceful
/// disconnect towards the peer (the provider's documented choice), which is
/// indicated to the peer; the peer's Disconnect then completes.
#[test]
fn x2_peer_close_is_indicated() {
    let pair = Pair::new();
    let closed = close_connector_async(&pair.a_conn);
    assert_success!(pair.b_disconnects.wait(), "the close is indicated to B");
    finish_close(closed);
    let (y, ys) = pair.b_conn.disconnect();
    assert_success!(ys.outcome(y));
    assert_eq!(settled_count(&pair.b_disconnects), 1);
    close_pair_except(pair, Closed::A_CONN);
}

/// X3: both consumers call Disconnect at the same moment, so each side's
/// graceful disconnect races the other's: each Disconnect completes exactly
/// once, with STATUS_SUCCESS, and each side gets at most one indication
/// (one may still arrive after its own Disconnect, as X3 warns).
#[test]
fn x3_simultaneous_disconnects_complete_once_each() {
    for round in 0..16 {
        let pair = Pair::new();
        let barrier = Barrier::new(2);
        let (a_done, b_done) = std::thread::scope(|s| {
            let a = s.spawn(|| {
                barrier.wait();
                pair.a_conn.disconnect()
            });
            let b = s.spawn(|| {
                barrier.wait();
                pair.b_conn.disconnect()
            });
            (a.join().unwrap(), b.join().unwrap())
        });
        for (side, (status, signal)) in [("A", &a_done), ("B", &b_done)] {
            assert!(
                *status == STATUS_PENDING || *status == STATUS_SUCCESS,
                "round {round}: {side} returned {status:#x}"
            );
            assert_success!(signal.outcome(*status), "round {round}: {side}");
        }
        std::thread::sleep(SETTLE / 5);
        for (side, (status, signal)) in [("A", &a_done), ("B", &b_done)] {
            assert_eq!(
                signal.count(),
                usize::from(*status == STATUS_PENDING),
                "round {round}: {side} completed once"
            );
        }
        assert!(pair.a_disconnects.count() <= 1, "round {round}");
        assert!(pair.b_disconnects.count() <= 1, "round {round}");
        close_pair(pair);
    }
}

/// A consumer that calls Disconnect from inside its disconnect callback.
#[derive(Default)]
struct Replier {
    connector: AtomicUsize,
    indications: AtomicUsize,
    disconnect: Mutex<Option<(NtStatus, Arc<Signal>)>>,
}

/// `NDK_FN_DISCONNECT_EVENT_CALLBACK` of a [`Replier`]: records the
/// indication and answers it with Disconnect (I3, I4 allow calls from a
/// callback).
unsafe extern "system" fn disconnect_in_callback(ctx: *mut c_void) {
    // SAFETY: the test passes a Replier it keeps alive.
    let replier = unsafe { &*ctx.cast::<Replier>() };
    replier.indications.fetch_add(1, Ordering::SeqCst);
    let connector = Connector(replier.connector.load(Ordering::SeqCst) as *mut NdkConnector);
    let started = connector.disconnect();
    *replier.disconnect.lock().unwrap() = Some(started);
}

/// X3: a consumer that answers the indication with its own Disconnect from
/// inside the callback, while its peer's Disconnect is in flight: each
/// Disconnect completes exactly once with STATUS_SUCCESS and no second
/// indication follows.
#[test]
fn x3_disconnect_from_inside_the_indication_completes_once() {
    let ((a, b), (a_qp, b_qp), (listener, incoming, listen_addr)) = Fixture::new().stage();
    let (active, (status, connecting), passive) =
        connect_request((&a, &a_qp), listen_addr, &incoming, 1, b"");
    let replier = Arc::new(Replier::default());
    replier
        .connector
        .store(passive.0 as usize, Ordering::SeqCst);
    let ctx: *mut c_void = Arc::as_ptr(&replier).cast_mut().cast();
    let event = (
        Some(disconnect_in_callback as NdkFnDisconnectEventCallback),
        ctx,
    );
    let (accept, accepted) = accept_with(&passive, &b_qp, (16, 16), b"", event);
    assert_success!(connecting.outcome(status));
    let a_disconnects = Signal::new();
    assert_success!(active.complete_connect(&a_disconnects));
    assert_success!(accepted.outcome(accept));

    let (x, xs) = active.disconnect();
    assert_success!(xs.outcome(x));
    let (y, ys) = wait_some("no indication", || {
        replier.disconnect.lock().unwrap().take()
    });
    assert!(y == STATUS_PENDING || y == STATUS_SUCCESS, "{y:#x}");
    assert_success!(ys.outcome(y));
    std::thread::sleep(SETTLE);
    assert_eq!(ys.count(), usize::from(y == STATUS_PENDING));
    assert_eq!(xs.count(), usize::from(x == STATUS_PENDING));
    assert_eq!(replier.indications.load(Ordering::SeqCst), 1);
    assert_eq!(a_disconnects.count(), 0);
    assert_closes_succeed!(active, passive);
    close_stage(listener, [a_qp, b_qp], (a, b));
}

/// X3: one side closes its connector while the other disconnects at the
/// same moment: the Disconnect completes exactly once, the close completes,
/// the closing side's indication (if B's disconnect won the race) comes at
/// most once and never after its close completed, nothing crashes.
#[test]
fn x3_close_racing_the_peer_disconnect_is_harmless() {
    for round in 0..16 {
        let pair = Pair::new();
        let barrier = Barrier::new(2);
        let (closed, (y, ys)) = std::thread::scope(|s| {
            let closer = s.spawn(|| {
                barrier.wait();
                close_connector_async(&pair.a_conn)
            });
            let disconnecter = s.spawn(|| {
                barrier.wait();
                pair.b_conn.disconnect()
            });
            (closer.join().unwrap(), disconnecter.join().unwrap())
        });
        finish_close(closed);
        // The indication may have raced the close (X3) but comes at most
        // once, and never after the close completed (L22).
        let indicated = pair.a_disconnects.count();
        assert!(indicated <= 1, "round {round}");
        assert_success!(ys.outcome(y), "round {round}");
        std::thread::sleep(SETTLE / 5);
        assert_eq!(
            ys.count(),
            usize::from(y == STATUS_PENDING),
            "round {round}"
        );
        assert_eq!(
            pair.a_disconnects.count(),
            indicated,
            "round {round}: after the close"
        );
        close_pair_except(pair, Closed::A_CONN);
    }
}

// ---------------------------------------------------------------------------
// X4–X7
// ---------------------------------------------------------------------------

/// X4: the indication says nothing about work-request completions: a
/// message that arrived before the peer's disconnect is still reported
/// (with its data), and every other receive B had posted completes exactly
/// once (cancelled) by the time B's own Disconnect has completed — nothing
/// is lost or duplicated because of the indication.
#[test]
fn x4_indication_neither_loses_nor_duplicates_completions() {
    let pair = Pair::new();
    let mut a_mem = Mem::all(&pair.a_pd, 4096, 0);
    let b_mem = Mem::all(&pair.b_pd, 4096, 0);
    for i in 0..4 {
        assert_success!(pair.b_qp.receive(0x40 + i, &[b_mem.sge(i * 64, 64)]));
    }
    a_mem.buffer.bytes_mut()[..4].copy_from_slice(b"last");
    assert_success!(pair.a_qp.send(0x50, &[a_mem.sge(0, 4)], 0));
    assert_success!(pair.a_cq.wait_results(1)[0].status, "sent");
    expect_b_answers_a(&pair);
    let results = pair.b_cq.wait_results(4);
    assert_eq!(
        sorted(&results),
        [
            (0x40, STATUS_SUCCESS),
            (0x41, STATUS_CANCELLED),
            (0x42, STATUS_CANCELLED),
            (0x43, STATUS_CANCELLED),
        ]
    );
    let delivered = results
        .iter()
        .find(|r| r.request_context as usize == 0x40)
        .unwrap();
    assert_eq!(delivered.bytes_transferred, 4);
    assert_eq!(&b_mem.bytes()[..4], b"last");
    std::thread::sleep(SETTLE);
    assert!(pair.b_cq.poll(8).is_empty(), "no duplicate");
    close_pair_with_regions(pair, [a_mem, b_mem]);
}

/// Asserts that every work request on `qp` fails inline with
/// STATUS_CONNECTION_INVALID and leaves no completion on `cq`.
fn assert_posts_refused(qp: &Qp, cq: &Cq, mem: &Mem, peer: &Mem, side: &str) {
    let sge = [mem.sge(0, 64)];
    let refused = [
        ("Send", qp.send(1, &sge, 0)),
        ("Receive", qp.receive(2, &sge)),
        ("Write", qp.write(3, &sge, peer.remote(0), peer.token(), 0)),
        ("Read", qp.read(4, &sge, peer.remote(0), peer.token(), 0)),
    ];
    for (what, status) in refused {
        assert_eq!(status, STATUS_CONNECTION_INVALID, "{side}: {what}");
    }
    std::thread::sleep(SETTLE);
    assert!(cq.poll(8).is_empty(), "{side}: a refused post completed");
}

/// X5: a disconnected QP cannot be reused: every post fails inline with
/// STATUS_CONNECTION_INVALID, on both sides.
#[test]
fn x5_posts_after_disconnect_fail_connection_invalid() {
    let pair = Pair::new();
    let a_mem = Mem::all(&pair.a_pd, 4096, 0);
    let b_mem = Mem::all(&pair.b_pd, 4096, 0);
    assert_eq!(both_disconnect(&pair), (STATUS_SUCCESS, STATUS_SUCCESS));
    assert_posts_refused(&pair.a_qp, &pair.a_cq, &a_mem, &b_mem, "A");
    assert_posts_refused(&pair.b_qp, &pair.b_cq, &b_mem, &a_mem, "B");
    close_pair_with_regions(pair, [a_mem, b_mem]);
}

/// X5: a disconnected connector cannot be reused — a second Disconnect,
/// CompleteConnect, Connect and Accept all fail inline with
/// STATUS_CONNECTION_INVALID — and a disconnected QP cannot be connected
/// again through a fresh connector (Connect or Accept), while a fresh QP
/// can.
#[test]
fn x5_disconnected_connector_and_qp_cannot_be_reused() {
    let pair = Pair::new();
    assert_eq!(both_disconnect(&pair), (STATUS_SUCCESS, STATUS_SUCCESS));
    let (_, listen_addr, _) = pair.listener.local_address();
    let (_, a_addr, _) = pair.a_conn.local_address();
    let a_addr = a_addr.with_port(0);
    let fresh_a = pair.a_pd.qp(&pair.a_cq, &pair.a_cq, 0xAA);
    let fresh_b = pair.b_pd.qp(&pair.b_cq, &pair.b_cq, 0xBB);

    for (side, connector) in [("A", &pair.a_conn), ("B", &pair.b_conn)] {
        let (status, signal) = connector.disconnect();
        assert_eq!(
            status, STATUS_CONNECTION_INVALID,
            "{side}: second Disconnect"
        );
        let (status, completed) = complete_connect_with(connector, None, std::ptr::null_mut());
        assert_eq!(status, STATUS_CONNECTION_INVALID, "{side}: CompleteConnect");
        assert_eq!(settled_count(&signal) + completed.count(), 0);
    }
    let (status, signal) = pair
        .a_conn
        .connect(&fresh_a, a_addr, listen_addr, 16, 16, b"");
    assert_eq!(status, STATUS_CONNECTION_INVALID, "A: Connect again");
    let (status, accepted) = pair.b_conn.accept(&fresh_b, 16, 16, b"", &Signal::new());
    assert_eq!(status, STATUS_CONNECTION_INVALID, "B: Accept again");
    assert_eq!(settled_count(&signal) + accepted.count(), 0);
    assert_eq!(pair.incoming.count(), 1, "no new request");

    // The disconnected QPs, through fresh connectors.
    let connector = pair.a.connector();
    let (status, signal) = connector.connect(&pair.a_qp, a_addr, listen_addr, 16, 16, b"");
    assert_eq!(
        status, STATUS_CONNECTION_INVALID,
        "Connect with a disconnected QP"
    );
    assert_eq!(settled_count(&signal), 0);
    let (c_status, connecting) = connector.connect(&fresh_a, a_addr, listen_addr, 16, 16, b"");
    assert_eq!(c_status, STATUS_PENDING, "a fresh QP connects");
    let passive = pair.incoming.wait_nth(2);
    let (status, accepted) = passive.accept(&pair.b_qp, 16, 16, b"", &Signal::new());
    assert_eq!(
        status, STATUS_CONNECTION_INVALID,
        "Accept with a disconnected QP"
    );
    assert_eq!(settled_count(&accepted), 0);
    Conn::expect_accepted(connector, (c_status, connecting), passive, &fresh_b, b"").close();
    assert_closed([fresh_a.close(), fresh_b.close()]);
    close_pair(pair);
}

/// X6: once Disconnect has completed the connection is fully closed, in
/// both directions: nothing a side posts reaches the other, and the
/// receives each side had posted were all flushed.
#[test]
fn x6_after_disconnect_completes_nothing_flows_either_way() {
    let pair = Pair::new();
    let a_mem = Mem::all(&pair.a_pd, 4096, 0);
    let b_mem = Mem::all(&pair.b_pd, 4096, 0);
    assert_success!(pair.a_qp.receive(0xA1, &[a_mem.sge(0, 64)]));
    assert_success!(pair.b_qp.receive(0xB1, &[b_mem.sge(0, 64)]));
    expect_b_answers_a(&pair);
    assert_eq!(sorted_summary(&pair.a_cq, 1), [(0xA1, STATUS_CANCELLED)]);
    assert_eq!(sorted_summary(&pair.b_cq, 1), [(0xB1, STATUS_CANCELLED)]);
    // Neither direction carries anything any more.
    let a_src = Mem::all(&pair.a_pd, 4096, 0x3C);
    let b_src = Mem::all(&pair.b_pd, 4096, 0xC3);
    let to_b = pair
        .a_qp
        .write(1, &[a_src.sge(0, 64)], b_mem.remote(0), b_mem.token(), 0);
    let to_a = pair
        .b_qp
        .write(2, &[b_src.sge(0, 64)], a_mem.remote(0), a_mem.token(), 0);
    assert_eq!(
        (to_b, to_a),
        (STATUS_CONNECTION_INVALID, STATUS_CONNECTION_INVALID)
    );
    std::thread::sleep(SETTLE);
    assert!(a_mem.bytes().iter().all(|&x| x == 0), "B reached A");
    assert!(b_mem.bytes().iter().all(|&x| x == 0), "A reached B");
    assert!(pair.a_cq.poll(4).is_empty() && pair.b_cq.poll(4).is_empty());
    close_pair_with_regions(pair, [a_mem, b_mem, a_src, b_src]);
}

/// X6: a Disconnect that completes with a failure (the connection had been
/// aborted) leaves the connection just as fully closed: posts fail inline on
/// both sides.
#[test]
fn x6_after_a_failed_disconnect_the_connection_is_fully_closed() {
    let pair = Pair::new();
    let (a_mem, b_mem) = abort(&pair);
    assert_success!(pair.b_disconnects.wait());
    let aborted = STATUS_CONNECTION_ABORTED;
    assert_eq!(both_disconnect(&pair), (aborted, aborted));
    assert_posts_refused(&pair.a_qp, &pair.a_cq, &a_mem, &b_mem, "A");
    assert_posts_refused(&pair.b_qp, &pair.b_cq, &b_mem, &a_mem, "B");
    assert!(b_mem.bytes().iter().all(|&x| x == 0));
    close_pair_with_regions(pair, [a_mem, b_mem]);
}

/// X7 (consumer): Disconnect with requests still outstanding — receives,
/// and Sends waiting for receives the peer never posts — flushes them: each
/// completes exactly once with STATUS_CANCELLED, and the Disconnect still
/// completes (STATUS_SUCCESS).
#[test]
fn x7_disconnect_with_outstanding_requests_flushes_them_and_completes() {
    let pair = Pair::new();
    let a_mem = Mem::all(&pair.a_pd, 4096, 7);
    for i in 0..3 {
        assert_success!(pair.a_qp.receive(0x70 + i, &[a_mem.sge(1024 + i * 64, 64)]));
    }
    // B posts no receive: the Sends wait (`Transport::held`).
    let held = Transport::default().held();
    for i in 0..3 {
        assert_success!(pair.a_qp.send(0x80 + i, &[a_mem.sge(i * 64, 64)], held));
    }
    std::thread::sleep(SETTLE);
    assert!(pair.a_cq.poll(8).is_empty(), "the Sends wait for receives");
    expect_b_answers_a(&pair);
    let expected: Vec<(usize, NtStatus)> = (0..3)
        .map(|i| (0x70 + i, STATUS_CANCELLED))
        .chain((0..3).map(|i| (0x80 + i, STATUS_CANCELLED)))
        .collect();
    assert_eq!(sorted_summary(&pair.a_cq, 6), expected);
    std::thread::sleep(SETTLE);
    assert!(pair.a_cq.poll(8).is_empty(), "each exactly once");
    assert!(pair.b_cq.poll(8).is_empty(), "no Send reached B");
    close_pair_with_regions(pair, [a_mem]);
}

/// X7: the same when the consumer closes the connector (a graceful
/// disconnect, the provider's documented choice) with requests outstanding:
/// each completes cancelled, and the close completes.
#[test]
fn x7_close_with_outstanding_requests_flushes_them_and_completes() {
    let pair = Pair::new();
    let a_mem = Mem::all(&pair.a_pd, 4096, 7);
    assert_success!(pair.a_qp.receive(0x70, &[a_mem.sge(1024, 64)]));
    let held = Transport::default().held();
    for i in 0..2 {
        assert_success!(pair.a_qp.send(0x80 + i, &[a_mem.sge(i * 64, 64)], held));
    }
    finish_close(close_connector_async(&pair.a_conn));
    assert_eq!(
        sorted_summary(&pair.a_cq, 3),
        [
            (0x70, STATUS_CANCELLED),
            (0x80, STATUS_CANCELLED),
            (0x81, STATUS_CANCELLED)
        ]
    );
    assert_success!(pair.b_disconnects.wait());
    let (y, ys) = pair.b_conn.disconnect();
    assert_success!(ys.outcome(y));
    a_mem.close();
    close_pair_except(pair, Closed::A_CONN);
}
