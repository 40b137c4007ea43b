//! Family Q of the rules catalogue, through the C ABI: shared receive
//! queues.
//!
//! The fixture: adapter B has an SRQ and QPs created with CreateQpWithSrq,
//! each with a receive CQ of its own and one initiator CQ for all; each is
//! connected to a QP of adapter A. A's Sends consume the SRQ's receives.
//! Notifications are recorded in order; to show that one did *not* come,
//! a test makes a later one come and checks that it is the next in line
//! (callbacks of one SRQ are delivered one at a time, in order).

use std::sync::Arc;

use softndk::abi::*;

use super::harness::*;

/// One connection: A's QP (with its CQ) and B's QP on the SRQ (with its
/// receive CQ).
struct Conn {
    a_cq: Cq,
    a_qp: Qp,
    b_rcq: Cq,
    b_qp: Qp,
    link: Link,
}

/// B's SRQ with `conns` QPs attached, each connected to A.
struct Fixture {
    a: Side,
    b: Side,
    b_icq: Cq,
    srq: Srq,
    notes: Arc<Signal>,
    conns: Vec<Conn>,
    /// A's send buffer (a pattern).
    src: Region,
    /// B's receive buffer.
    inbox: Region,
}

/// A receive completion as (request context, status, bytes transferred).
fn received(r: &NdkResult) -> (usize, NtStatus, u32) {
    (r.request_context as usize, r.status, r.bytes_transferred)
}

/// B's QP context for connection `i`.
const fn qp_context(i: usize) -> usize {
    0xB0 + i
}

impl Fixture {
    /// An SRQ of `depth` receives of up to `sge` SGEs, threshold
    /// `threshold`, with a notification callback when `notify`, and `conns`
    /// connections.
    fn new(depth: u32, sge: u32, threshold: u32, notify: bool, conns: usize) -> Self {
        let (a, b) = Side::two();
        let notes = Signal::new();
        let srq =
            b.pd.try_srq(depth, sge, threshold, notify.then_some(&notes))
                .expect("CreateSrq");
        let b_icq = b.adapter.cq(64);
        let conns = (0..conns)
            .map(|i| {
                let a_cq = a.adapter.cq(256);
                let a_qp = a.pd.qp(&a_cq, &a_cq, 0xA0 + i);
                let b_rcq = b.adapter.cq(256);
                let shared = RecvQueue::Shared(&srq);
                let b_qp =
                    b.pd.try_qp(&b_rcq, &b_icq, shared, qp_context(i), 16, 4, 64)
                        .expect("CreateQpWithSrq");
                let link = a.connect(&a_qp, &b, &b_qp);
                Conn {
                    a_cq,
                    a_qp,
                    b_rcq,
                    b_qp,
                    link,
                }
            })
            .collect();
        let src = Region::pattern(&a.pd, 4 * PAGE, 0x71, 0);
        let inbox = Region::new(&b.pd, 8 * PAGE, 0, MR_LOCAL_WRITE);
        Self {
            a,
            b,
            b_icq,
            srq,
            notes,
            conns,
            src,
            inbox,
        }
    }

    /// SrqReceive of `len` bytes of the inbox at `offset`.
    fn post(&self, context: usize, offset: usize, len: usize) -> NtStatus {
        self.srq.receive(context, &[self.inbox.sge(offset, len)])
    }

    /// Empty receives with the request contexts given, each accepted.
    fn post_empty(&self, contexts: std::ops::Range<usize>) {
        for context in contexts {
            assert_success!(self.post(context, 0, 0), "SrqReceive {context}");
        }
    }

    /// Zero-length receives with the request contexts given, then the SRQ
    /// armed with `threshold` through ModifySrq (its depth unchanged).
    fn post_empty_and_arm(&self, contexts: std::ops::Range<usize>, threshold: u32) {
        self.post_empty(contexts);
        assert_success!(self.srq.modify(0, threshold));
    }

    /// Receives of `len` bytes with the request contexts given, each at
    /// 0x100 × its context in the inbox, each accepted.
    fn expect_posted(&self, contexts: std::ops::Range<usize>, len: usize) {
        for context in contexts {
            assert_success!(
                self.post(context, 0x100 * context, len),
                "SrqReceive {context}"
            );
        }
    }

    /// Waits for the `n`th notification; each so far was STATUS_SUCCESS.
    fn expect_notified(&self, n: usize) {
        assert_success!(self.notes.wait_nth(n), "notification {n}");
        assert_eq!(self.notes.all(), vec![STATUS_SUCCESS; n]);
    }

    /// A Send of `len` bytes of the pattern at `offset` on connection
    /// `conn`, and its completion at A; returns B's receive completion.
    fn send(&self, conn: usize, offset: usize, len: usize) -> NdkResult {
        let c = &self.conns[conn];
        assert_success!(c.a_qp.send(0x5E, &[self.src.sge(offset, len)], 0));
        let sent = c.a_cq.wait_results(1);
        assert_eq!(
            (sent[0].request_context as usize, sent[0].status),
            (0x5E, STATUS_SUCCESS)
        );
        let got = c.b_rcq.wait_results(1).remove(0);
        assert_eq!(got.qp_context as usize, qp_context(conn));
        got
    }

    /// Consumes one receive with an empty Send on `conn`; returns its
    /// request context.
    fn consume(&self, conn: usize) -> usize {
        let got = self.send(conn, 0, 0);
        assert_success!(got.status);
        got.request_context as usize
    }

    /// Disconnects and closes everything.
    fn close(self) {
        for c in &self.conns {
            assert_empty(&c.a_cq);
            assert_empty(&c.b_rcq);
        }
        for c in self.conns {
            c.link.close_with((c.a_qp, c.b_qp), (c.a_cq, c.b_rcq));
        }
        assert_close(self.srq.close());
        close_the_rest((self.src, self.inbox), self.b_icq, (self.a, self.b));
    }

    /// The ending of the tests that leave the SRQ empty: arms it with
    /// threshold 1 through ModifySrq while no receive is queued, which
    /// notifies at once (Q4), the `n`th notification; then [`Self::close`].
    fn expect_notified_on_an_empty_arm_then_close(self, n: usize) {
        assert_success!(self.srq.modify(0, 1));
        self.expect_notified(n);
        self.close();
    }
}

/// Closes what a [`Fixture`] holds besides its connections and SRQ.
fn close_the_rest((src, inbox): (Region, Region), b_icq: Cq, (a, b): (Side, Side)) {
    src.close();
    inbox.close();
    assert_close(b_icq.close());
    a.close();
    b.close();
}

/// Q1: this adapter has SRQs (MaxSrqDepth > 0) and enforces its limits
/// (L12, Q6): a depth above MaxSrqDepth or an SGE count above
/// MaxReceiveRequestSge is refused with STATUS_INVALID_PARAMETER, at
/// CreateSrq and at ModifySrq; an SRQ of exactly MaxSrqDepth holds that
/// many receives and no more. (An adapter with MaxSrqDepth 0 refuses every
/// CreateSrq the same way; SoftNDK is not one.)
#[test]
fn q1_adapter_offers_srqs_and_refuses_limits_above_its_maximum() {
    let adapter = open_adapter(own_address());
    let info = adapter.info();
    assert!(info.max_srq_depth > 0);
    let pd = adapter.pd();
    for (depth, sge) in [
        (info.max_srq_depth + 1, 1),
        (u32::MAX, 1),
        (16, info.max_receive_request_sge + 1),
    ] {
        assert_eq!(
            pd.try_srq(depth, sge, 0, None).err(),
            Some(STATUS_INVALID_PARAMETER),
            "depth {depth}, {sge} SGEs"
        );
    }
    let srq = pd
        .try_srq(info.max_srq_depth, info.max_receive_request_sge, 0, None)
        .expect("CreateSrq at the limits");
    assert_eq!(
        srq.modify(info.max_srq_depth + 1, 0),
        STATUS_INVALID_PARAMETER
    );
    for i in 0..info.max_srq_depth as usize {
        assert_success!(srq.receive(i, &[]));
    }
    assert_eq!(srq.receive(0, &[]), STATUS_NO_MORE_ENTRIES);
    assert_closed([srq.close(), pd.close()]);
    adapter.close();
}

/// Q2: a QP made by CreateQpWithSrq has no receive queue of its own (a
/// Receive on it is refused inline) and its receive completions go to the
/// receive CQ named at its creation, with its own QPContext and the bytes
/// placed.
#[test]
fn q2_srq_qp_completions_go_to_its_own_receive_cq_with_its_context() {
    let f = Fixture::new(16, 2, 0, false, 2);
    let dummy = f.inbox.sge(0, 16);
    for c in &f.conns {
        assert_eq!(c.b_qp.receive(1, &[dummy]), STATUS_INVALID_PARAMETER);
    }
    assert_success!(f.post(10, 0, 0x100));
    assert_success!(f.post(11, 0x100, 0x100));
    let got = f.send(1, 0x20, 0x90);
    assert_eq!(received(&got), (10, STATUS_SUCCESS, 0x90));
    assert_empty(&f.conns[0].b_rcq);
    let got = f.send(0, 0x200, 0x100);
    assert_eq!(received(&got), (11, STATUS_SUCCESS, 0x100));
    assert_empty(&f.conns[1].b_rcq);
    assert_empty(&f.b_icq);
    assert_eq!(&f.inbox.bytes()[..0x90], &f.src.bytes()[0x20..0xB0]);
    assert_eq!(&f.inbox.bytes()[0x100..0x200], &f.src.bytes()[0x200..0x300]);
    f.close();
}

/// Q3: SrqReceive behaves like Receive — several SGEs, scattered across a
/// page boundary, the same inline refusals (too many SGEs:
/// STATUS_DATA_OVERRUN; full: STATUS_NO_MORE_ENTRIES) — and any attached QP
/// consumes the receives, oldest first.
#[test]
fn q3_any_attached_qp_consumes_srq_receives_in_order() {
    let f = Fixture::new(4, 2, 0, false, 2);
    // Receive `i` scatters into two pieces: 0x80 bytes before a page
    // boundary, and 0x100 bytes right after it.
    let pieces = |i: usize| {
        let boundary = (i + 1) * PAGE;
        [
            f.inbox.sge(boundary - 0x80, 0x80),
            f.inbox.sge(boundary, 0x100),
        ]
    };
    for i in 0..4 {
        assert_success!(f.srq.receive(20 + i, &pieces(i)));
    }
    let three = [f.inbox.sge(0, 1), f.inbox.sge(1, 1), f.inbox.sge(2, 1)];
    assert_eq!(f.srq.receive(99, &three), STATUS_DATA_OVERRUN);
    assert_eq!(f.srq.receive(99, &pieces(0)), STATUS_NO_MORE_ENTRIES);
    for (i, conn) in [1, 0, 0, 1].into_iter().enumerate() {
        let got = f.send(conn, 0x100 * i, 0x180);
        assert_eq!(
            (
                got.request_context as usize,
                got.status,
                got.bytes_transferred
            ),
            (20 + i, STATUS_SUCCESS, 0x180),
            "send {i} on connection {conn}"
        );
        let boundary = (i + 1) * PAGE;
        let sent = &f.src.bytes()[0x100 * i..0x100 * i + 0x180];
        assert_eq!(
            &f.inbox.bytes()[boundary - 0x80..boundary + 0x100],
            sent,
            "receive {i}"
        );
    }
    // Everything else of the inbox is untouched.
    for (i, &b) in f.inbox.bytes().iter().enumerate() {
        let in_piece = (1..=4).any(|k| (k * PAGE - 0x80..k * PAGE + 0x100).contains(&i));
        assert!(in_piece || b == 0, "byte {i:#x}");
    }
    // Room again.
    assert_success!(f.srq.receive(30, &pieces(0)));
    assert_eq!(f.consume(0), 30);
    f.close();
}

/// Q3, M24, E7: an SRQ receive completes like a QP's own: with a
/// SendAndInvalidate it completes as ReceiveAndInvalidate naming the token
/// (invalidated at B), and when too small for the message it completes with
/// STATUS_BUFFER_OVERFLOW and ends that connection only — the other
/// attached QP goes on consuming.
#[test]
fn q3_srq_receives_complete_like_receives() {
    let f = Fixture::new(8, 1, 0, false, 2);
    let window_region = Region::new(&f.b.pd, PAGE, 0, MR_LOCAL_WRITE);
    let mw = f.b.pd.mw();
    let c = &f.conns[0];
    let bind = |context: usize| {
        assert_success!(c.b_qp.bind(
            context,
            &window_region.mr,
            &mw,
            window_region.remote(0),
            0x100,
            OP_REMOTE_READ
        ));
        assert_success!(f.b_icq.wait_results(1)[0].status);
    };
    bind(1);
    let token = mw.remote_token();
    assert_success!(f.post(2, 0, 0x100));
    assert_success!(
        c.a_qp
            .send_and_invalidate(3, &[f.src.sge(0, 0x80)], 0, token)
    );
    assert_success!(c.a_cq.wait_results(1)[0].status);
    let got = wait_results_ex(&c.b_rcq, 1).remove(0);
    assert_eq!(
        (got.request_context as usize, got.status, got.type_),
        (2, STATUS_SUCCESS, NdkOperationType::RECEIVE_AND_INVALIDATE)
    );
    assert_eq!(got.type_specific_completion_output as u32, token);
    assert_eq!(got.qp_context as usize, qp_context(0));
    assert_eq!(&f.inbox.bytes()[..0x80], &f.src.bytes()[..0x80]);
    // The window was invalidated: it binds again without an Invalidate.
    bind(4);
    assert_success!(c.b_qp.invalidate(5, mw.header(), 0));
    assert_success!(f.b_icq.wait_results(1)[0].status);
    // Too small: 0x40 bytes for a 0x41-byte message.
    assert_success!(f.post(6, 0x200, 0x40));
    assert_success!(f.post(7, 0x300, 0x40));
    let c = &f.conns[1];
    assert_success!(c.a_qp.send(8, &[f.src.sge(0, 0x41)], 0));
    assert_eq!(
        c.a_cq.wait_results(1)[0].status,
        Transport::default().peer_refused(STATUS_REMOTE_RESOURCES)
    );
    let got = c.b_rcq.wait_results(1);
    assert_eq!(
        (got[0].request_context as usize, got[0].status),
        (6, STATUS_BUFFER_OVERFLOW)
    );
    await_abort(&c.link.a_disconnects);
    send0(&c.a_qp, 9, 0);
    assert_eq!(c.a_cq.wait_results(1)[0].status, STATUS_CANCELLED);
    // Connection 0 takes the next receive.
    let got = f.send(0, 0x100, 0x40);
    assert_eq!(received(&got), (7, STATUS_SUCCESS, 0x40));
    assert_eq!(&f.inbox.bytes()[0x300..0x340], &f.src.bytes()[0x100..0x140]);
    assert_close(mw.close());
    window_region.close();
    f.close();
}

/// Q4: a nonzero threshold set by ModifySrq arms the SRQ: the callback is
/// called with STATUS_SUCCESS when the receives queued fall below it — not
/// at 4 or 3 queued with a threshold of 3, but at 2.
#[test]
fn q4_notification_when_the_queued_receives_fall_below_the_threshold() {
    let f = Fixture::new(16, 1, 0, true, 1);
    f.post_empty_and_arm(0..4, 3);
    assert_eq!(f.consume(0), 0); // 3 left: not below 3.
    assert_eq!(f.notes.count(), 0);
    assert_eq!(f.consume(0), 1); // 2 left.
    assert_success!(f.notes.wait());
    // The notification came when the count fell to 2, not before: a
    // consumer that re-arms at 2 with threshold 2 is not notified at once.
    assert_success!(f.srq.modify(0, 2));
    assert_eq!(f.consume(0), 2);
    f.expect_notified(2);
    assert_eq!(f.consume(0), 3);
    f.close();
}

/// Q4: armed while already below the threshold — at CreateSrq (empty, with
/// a threshold) or at ModifySrq — the SRQ notifies at once.
#[test]
fn q4_arming_below_the_threshold_notifies_at_once() {
    let f = Fixture::new(16, 1, 2, true, 1);
    assert_success!(f.notes.wait(), "at CreateSrq");
    assert_success!(f.post(1, 0, 0));
    assert_success!(f.post(2, 0, 0));
    assert_success!(f.srq.modify(0, 3));
    f.expect_notified(2); // At ModifySrq.
    assert_eq!(f.consume(0), 1);
    assert_eq!(f.consume(0), 2);
    // Not armed with a threshold at or below the count.
    assert_success!(f.post(3, 0, 0));
    assert_success!(f.srq.modify(0, 1));
    assert_eq!(f.notes.count(), 2);
    assert_eq!(f.consume(0), 3);
    assert_success!(f.notes.wait_nth(3));
    f.close();
}

/// Q5: one notification disarms the SRQ: further consumption below the
/// threshold notifies nothing until ModifySrq is called with a nonzero
/// threshold.
#[test]
fn q5_one_notification_disarms_until_modify() {
    let f = Fixture::new(16, 1, 0, true, 2);
    f.post_empty_and_arm(0..8, 6);
    assert_eq!(f.consume(0), 0);
    assert_eq!(f.consume(1), 1);
    assert_eq!(f.consume(0), 2); // 5 left: below 6.
    assert_success!(f.notes.wait());
    for i in 3..7 {
        assert_eq!(f.consume(i % 2), i); // 4, 3, 2, 1 left: disarmed.
    }
    // ModifySrq with threshold 0 does not re-arm (Q6).
    assert_success!(f.srq.modify(0, 0));
    assert_eq!(f.notes.count(), 1);
    // Re-armed with a threshold above the count: notified at once (Q4),
    // and this is the second notification: none came in between.
    assert_success!(f.srq.modify(0, 2));
    f.expect_notified(2);
    assert_eq!(f.consume(1), 7);
    assert_eq!(f.notes.count(), 2);
    f.close();
}

/// Q6: ModifySrq (inline here, so its completion is never called) with a
/// depth of 0 keeps the depth; with a threshold of 0 keeps the threshold and
/// the arm state; a depth above MaxSrqDepth is refused with
/// STATUS_INVALID_PARAMETER and changes nothing.
#[test]
fn q6_modify_srq_zero_keeps_depth_threshold_and_arm_state() {
    let f = Fixture::new(4, 1, 0, true, 1);
    f.post_empty(0..4);
    assert_eq!(f.post(9, 0, 0), STATUS_NO_MORE_ENTRIES);
    // Depth 0: kept; threshold 3 arms.
    let completions = Signal::new();
    // SAFETY: a live SRQ; the signal outlives the call (and any callback).
    let status =
        unsafe { (f.srq.d().ndk_modify_srq)(f.srq.0, 0, 3, Some(on_status), completions.ctx()) };
    assert_success!(status);
    assert_eq!(completions.count(), 0, "L8: inline, no callback");
    assert_eq!(f.post(9, 0, 0), STATUS_NO_MORE_ENTRIES);
    // Above the maximum: refused, nothing changes (still depth 4, armed at 3).
    let max = f.b.adapter.info().max_srq_depth;
    assert_eq!(f.srq.modify(max + 1, 1), STATUS_INVALID_PARAMETER);
    assert_eq!(f.post(9, 0, 0), STATUS_NO_MORE_ENTRIES);
    // A new depth with threshold 0: the threshold (3) and the arm stay.
    assert_success!(f.srq.modify(8, 0));
    f.post_empty(4..8);
    assert_eq!(f.post(9, 0, 0), STATUS_NO_MORE_ENTRIES);
    for i in 0..5 {
        assert_eq!(f.consume(0), i); // 7, 6, 5, 4, 3 left.
    }
    assert_eq!(f.notes.count(), 0);
    assert_eq!(f.consume(0), 5); // 2 left: below 3.
    assert_success!(f.notes.wait());
    // Disarmed now; threshold 0 keeps it disarmed.
    assert_success!(f.srq.modify(0, 0));
    assert_eq!(f.consume(0), 6);
    assert_eq!(f.consume(0), 7);
    f.expect_notified_on_an_empty_arm_then_close(2);
}

/// Q7 (NDSPI v2 only; this provider's behaviour): shrinking an SRQ below
/// the receives it holds fails with STATUS_BUFFER_OVERFLOW and leaves it
/// unchanged — depth, threshold and arm state, and every queued receive,
/// consumed afterwards in order with its data.
#[test]
fn q7_shrinking_below_the_queued_receives_overflows_and_changes_nothing() {
    let f = Fixture::new(8, 1, 0, true, 1);
    f.expect_posted(0..5, 0x40);
    assert_eq!(f.srq.modify(4, 2), STATUS_BUFFER_OVERFLOW);
    assert_eq!(f.notes.count(), 0);
    // Still depth 8.
    f.expect_posted(5..8, 0x40);
    assert_eq!(f.post(9, 0, 0), STATUS_NO_MORE_ENTRIES);
    // Exactly the count is fine.
    assert_success!(f.srq.modify(8, 0));
    for i in 0..8 {
        let got = f.send(0, 0x40 * i, 0x40);
        assert_eq!(received(&got), (i, STATUS_SUCCESS, 0x40));
        assert_eq!(
            &f.inbox.bytes()[0x100 * i..0x100 * i + 0x40],
            &f.src.bytes()[0x40 * i..0x40 * (i + 1)]
        );
    }
    // The refused ModifySrq did not arm the SRQ with threshold 2.
    assert_eq!(f.notes.count(), 0);
    f.expect_notified_on_an_empty_arm_then_close(1);
}

/// Q8: the notification callback is optional: an SRQ created without one,
/// with a threshold, and armed again by ModifySrq, works (receives,
/// consumption, modification) and calls nothing; one with a callback but
/// never a nonzero threshold is never notified.
#[test]
fn q8_without_a_callback_or_a_threshold_no_notification_is_made() {
    // Receives 0 to 2 posted, the SRQ modified, the receives consumed.
    let post_modify_consume = |f: &Fixture, threshold: u32| {
        f.post_empty(0..3);
        assert_success!(f.srq.modify(16, threshold));
        for i in 0..3 {
            assert_eq!(f.consume(0), i);
        }
    };
    let f = Fixture::new(8, 1, 4, false, 1);
    post_modify_consume(&f, 8);
    assert_eq!(f.notes.count(), 0, "no callback was given");
    f.close();

    let f = Fixture::new(8, 1, 0, true, 1);
    post_modify_consume(&f, 0);
    // The first notification is the one this arm causes.
    f.expect_notified_on_an_empty_arm_then_close(1);
}

/// Q9: a fatal SRQ error cannot be caused through the C ABI (SoftNDK's
/// emulated SRQ has no failure of its own). What is reachable: an attached
/// QP's flush or connection error is no SRQ error — the SRQ keeps its
/// receives (E4), takes new ones, is modified, and the other attached QP
/// consumes them; no notification with STATUS_INTERNAL_ERROR is ever made.
#[test]
fn q9_an_attached_qp_flush_or_error_is_no_srq_error() {
    let f = Fixture::new(16, 1, 0, true, 2);
    f.expect_posted(0..4, 0x100);
    // Connection 0 fails: A writes with a token B never issued.
    let c = &f.conns[0];
    assert_success!(
        c.a_qp
            .write(1, &[f.src.sge(0, 0x10)], f.inbox.remote(0), 0xFFFF_FFF0, 0)
    );
    let failed = c.a_cq.wait_results(1);
    assert_eq!(
        failed[0].status,
        Transport::default().peer_refused(STATUS_ACCESS_VIOLATION)
    );
    await_abort(&c.link.a_disconnects);
    send0(&c.a_qp, 2, 0);
    let cancelled = c.a_cq.wait_results(1);
    assert_eq!(cancelled[0].status, STATUS_CANCELLED);
    // B flushes its QP of connection 0 as well.
    c.b_qp.flush();
    assert_empty(&c.b_rcq);
    // The SRQ is fine: it takes a receive, a modification, and connection 1
    // consumes all five receives in order.
    assert_success!(f.post(4, 0x400, 0x100));
    assert_success!(f.srq.modify(32, 0));
    for i in 0..5 {
        let got = f.send(1, 0x10 * i, 0x20);
        assert_eq!(
            (got.request_context as usize, got.status),
            (i, STATUS_SUCCESS)
        );
        assert_eq!(
            &f.inbox.bytes()[0x100 * i..0x100 * i + 0x20],
            &f.src.bytes()[0x10 * i..0x10 * i + 0x20]
        );
    }
    assert_success!(f.srq.modify(0, 1));
    assert_success!(f.notes.wait());
    assert_eq!(f.notes.all(), [STATUS_SUCCESS]);
    f.close();
}

/// Q9, L24: the SRQ's close with a QP still attached pends, and completes
/// (once) only after that QP's close — the attached QPs stay usable until
/// then, as no SRQ error ends them.
#[test]
fn q9_srq_close_pends_until_its_attached_qps_are_closed() {
    let f = Fixture::new(16, 1, 0, true, 1);
    assert_success!(f.post(1, 0, 0x40));
    let log = Signal::new();
    assert_eq!(close_with(f.srq.close_slot(), &log), STATUS_PENDING);
    // The attached QP still consumes the SRQ's receive.
    let c = &f.conns[0];
    assert_success!(c.a_qp.send(2, &[f.src.sge(0, 0x40)], 0));
    assert_success!(c.a_cq.wait_results(1)[0].status);
    let got = c.b_rcq.wait_results(1);
    assert_eq!(
        (got[0].request_context as usize, got[0].status),
        (1, STATUS_SUCCESS)
    );
    assert_eq!(&f.inbox.bytes()[..0x40], &f.src.bytes()[..0x40]);
    assert_eq!(log.count(), 0);
    for c in f.conns {
        c.link.close();
        assert_close(c.a_qp.close());
        assert_eq!(log.count(), 0);
        assert_closed([c.b_qp.close(), c.a_cq.close(), c.b_rcq.close()]);
    }
    assert_eq!(log.wait(), CLOSED);
    assert_eq!(log.count(), 1);
    assert_eq!(f.notes.count(), 0);
    close_the_rest((f.src, f.inbox), f.b_icq, (f.a, f.b));
}
