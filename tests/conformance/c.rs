//! Family C of the rules catalogue (completion handling: reaping, arming,
//! notification), through the C ABI. Completions come from real traffic
//! between the two QPs of a [`Pair`]: a zero-length Send from A makes one
//! receive completion on B's CQ, solicited with `SEND_AND_SOLICIT_EVENT`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use softndk::abi::*;

use super::harness::*;

/// B's receive completions that A's Sends `contexts` produce, after posting
/// as many receives on B (contexts + 1000).
fn sends(p: &Pair, contexts: &[usize], flags: u32) {
    for &context in contexts {
        recv0(&p.b_qp, context + 1000);
        send0(&p.a_qp, context, flags);
    }
}

/// `watch` and a pair whose B CQ notifies it ([`pair_watching_b`]).
fn watching_b(watch: Arc<Watch>) -> (Arc<Watch>, Pair) {
    let p = pair_watching_b(&watch);
    (watch, p)
}

// ---------------------------------------------------------------------------
// C1: concurrent reaping and arming
// ---------------------------------------------------------------------------

// rule C1, K1
// see also I6
#[test]
fn c1_concurrent_polls_and_arms_lose_and_duplicate_no_completion() {
    const N: usize = 600;
    let p = Pair::new();
    let mut sink = Buffer::new(PAGE, 0, 0);
    let mr = p.b_pd.mr(false);
    assert_success!(mr.register(&mut sink, MrFlags::ALLOW_REMOTE_WRITE.bits()));
    let token = mr.remote_token();
    let data = [0x5A_u8; 8];
    let inline = [inline_sge(&data)];
    let reaped = AtomicUsize::new(0);
    let cq = &p.a_cq;
    // A consumer breaking C1: three threads reap and arm one CQ at once while
    // the engine queues completions on it.
    let per_thread: Vec<Vec<usize>> = std::thread::scope(|s| {
        let reapers: Vec<_> = (0..3)
            .map(|t| {
                let reaped = &reaped;
                s.spawn(move || {
                    let deadline = std::time::Instant::now() + WAIT;
                    let mut mine = Vec::new();
                    while reaped.load(Ordering::SeqCst) < N {
                        assert!(std::time::Instant::now() < deadline, "C1: completions lost");
                        let got: Vec<(usize, NtStatus)> = match t {
                            0 => {
                                cq.arm(NdkCqNotifyType::ANY);
                                summary(&cq.poll(5))
                            }
                            1 => {
                                cq.arm(NdkCqNotifyType::SOLICITED);
                                cq.poll_ex(3)
                                    .iter()
                                    .map(|r| (r.request_context as usize, r.status))
                                    .collect()
                            }
                            _ => {
                                cq.arm(NdkCqNotifyType::ERRORS);
                                summary(&cq.poll(1))
                            }
                        };
                        for (context, status) in &got {
                            assert_success!(*status, "C1: a Write failed");
                            mine.push(*context);
                        }
                        reaped.fetch_add(got.len(), Ordering::SeqCst);
                        if got.is_empty() {
                            std::thread::yield_now();
                        }
                    }
                    mine
                })
            })
            .collect();
        for context in 1..=N {
            // At most a queue depth (64) of Writes outstanding: with the
            // deferred engine a post may run ahead of the completions, and
            // one past the depth is refused (P24).
            wait_until("C1: room in the initiator queue", || {
                context <= reaped.load(Ordering::SeqCst) + 64
            });
            assert_success!(p.a_qp.write(
                context,
                &inline,
                sink.va(),
                token,
                OpFlags::INLINE.bits()
            ));
        }
        reapers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    // Each thread saw its share in CQ order; together, each exactly once.
    for mine in &per_thread {
        assert!(mine.windows(2).all(|w| w[0] < w[1]), "C1: out of order");
    }
    let mut all: Vec<usize> = per_thread.concat();
    all.sort_unstable();
    assert_eq!(all, (1..=N).collect::<Vec<_>>(), "C1: lost or duplicated");
    assert!(p.a_cq.poll(4).is_empty());
    assert_success!(mr.close());
    p.teardown();
}

// ---------------------------------------------------------------------------
// C2: ReceiveAndInvalidate
// ---------------------------------------------------------------------------

/// B's window over a registered region, bound; A's local buffer for Reads.
struct Window {
    region: Buffer,
    mr: Mr,
    mw: Mw,
    local: Buffer,
    local_mr: Mr,
}

impl Window {
    fn bind(p: &Pair) -> Self {
        let mut region = Buffer::pattern(PAGE, 0, 3);
        let mr = p.b_pd.mr(false);
        assert_success!(mr.register(
            &mut region,
            (MrFlags::ALLOW_LOCAL_WRITE | MrFlags::ALLOW_REMOTE_READ).bits()
        ));
        let mw = p.b_pd.mw();
        let read = OpFlags::ALLOW_REMOTE_READ.bits();
        p.b_qp
            .bound(&p.b_cq, 0xB1, (&mr, &mw, region.va(), PAGE), read);
        let mut local = Buffer::new(PAGE, 0, 0);
        let local_mr = p.a_pd.mr(false);
        assert_success!(local_mr.register(&mut local, MrFlags::ALLOW_LOCAL_WRITE.bits()));
        Self {
            region,
            mr,
            mw,
            local,
            local_mr,
        }
    }

    /// A Read of 16 bytes through the window's token.
    fn read(&self, p: &Pair, context: usize) -> NtStatus {
        let sge = [self.local.sge(0, 16, self.local_mr.local_token())];
        assert_success!(
            p.a_qp
                .read(context, &sge, self.region.va(), self.mw.remote_token(), 0)
        );
        let results = p.a_cq.wait_results(1);
        assert_eq!(results[0].request_context as usize, context);
        results[0].status
    }

    /// Closes the window, its region and the local region: each at once,
    /// with nothing outstanding, on either engine (the runner releases the
    /// regions its pass resolved before it reports the last request).
    fn close(self) {
        for status in [self.mw.close(), self.mr.close(), self.local_mr.close()] {
            assert_success!(status);
        }
        drop((self.region, self.local));
    }

    /// Closes the window's objects, then the pair ([`teardown_except`]).
    fn close_with(self, p: Pair) {
        self.close();
        teardown_except(p, Closed::default());
    }
}

// rule C2
// see also M24, P21
#[test]
fn c2_receive_and_invalidate_completion_is_retrievable_with_get_cq_results() {
    let p = Pair::new();
    let window = Window::bind(&p);
    let token = window.mw.remote_token();
    assert_success!(window.read(&p, 1), "the token works");
    assert_eq!(&window.local.bytes()[..16], &window.region.bytes()[..16]);
    recv0(&p.b_qp, 2);
    assert_success!(p.a_qp.send_and_invalidate(3, &[], 0, token));
    assert_eq!(summary(&p.a_cq.wait_results(1)), vec![(3, STATUS_SUCCESS)]);
    // C2: the receive completion, through the plain NDK_RESULT form.
    let results = p.b_cq.wait_results(1);
    assert_eq!(summary(&results), vec![(2, STATUS_SUCCESS)], "C2");
    assert_eq!(results[0].qp_context as usize, 0xB, "P21");
    assert_eq!(results[0].bytes_transferred, 0);
    // The token was invalidated at the receiver all the same.
    let status = window.read(&p, 4);
    assert!(
        status == STATUS_ACCESS_VIOLATION || status == STATUS_REMOTE_RESOURCES,
        "C2/M34: a Read through the invalidated token: {status:#x}"
    );
    window.close_with(p);
}

// rule C2
// see also M24, P22, E14
#[test]
fn c2_receive_and_invalidate_through_get_cq_results_ex_names_the_token() {
    let p = Pair::new();
    let window = Window::bind(&p);
    let token = window.mw.remote_token();
    recv0(&p.b_qp, 2);
    assert_success!(p.a_qp.send_and_invalidate(3, &[], 0, token));
    // The Send completes when the engine has run it (on a worker with the
    // deferred engine).
    let sent = wait_results_ex(&p.a_cq, 1);
    assert_eq!(sent.len(), 1);
    assert!(p.a_cq.poll_ex(4).is_empty(), "one completion for one Send");
    assert_eq!(
        sent[0].type_,
        NdkOperationType::SEND,
        "P22: the sender sees a Send"
    );
    let received = wait_some("B's receive completion", || {
        Some(p.b_cq.poll_ex(4)).filter(|got| !got.is_empty())
    });
    assert_eq!(received.len(), 1);
    let r = &received[0];
    assert_eq!(r.request_context as usize, 2);
    assert_success!(r.status);
    assert_eq!(r.type_, NdkOperationType::RECEIVE_AND_INVALIDATE, "C2");
    assert_eq!(
        r.type_specific_completion_output, token as usize,
        "C2: the token"
    );
    assert_eq!(r.provider_error_code, 0, "E14");
    // A later Invalidate of that window fails as for any window that is not
    // bound.
    assert_success!(p.b_qp.invalidate(5, window.mw.header(), 0));
    let results = p.b_cq.wait_results(1);
    assert_eq!(
        summary(&results),
        vec![(5, STATUS_INVALID_DEVICE_REQUEST)],
        "C2: Invalidate of an invalidated window"
    );
    window.close_with(p);
}

// ---------------------------------------------------------------------------
// C3, C4: arming
// ---------------------------------------------------------------------------

// rule C3, K1
#[test]
fn c3_one_notification_per_arm_and_none_without_an_arm() {
    let p = Pair::new();
    // No arm: completions, no notification.
    sends(&p, &[1, 2], 0);
    assert_eq!(p.b_cq.wait_results(2).len(), 2);
    assert_eq!(
        settled(&p.b_cq).notifications(),
        vec![],
        "C3: notified without an arm"
    );
    // An arm on an empty CQ waits for a completion, then fires once for
    // however many follow.
    p.b_cq.arm(NdkCqNotifyType::ANY);
    assert_eq!(
        settled(&p.b_cq).notifications(),
        vec![],
        "C3: nothing matched yet"
    );
    sends(&p, &[3, 4, 5], 0);
    assert_success!(p.b_cq.1.wait());
    assert_eq!(p.b_cq.wait_results(3).len(), 3);
    assert_eq!(
        settled(&p.b_cq).notifications().len(),
        1,
        "C3: at most once per arm"
    );
    // The next arm, the next notification.
    p.b_cq.arm(NdkCqNotifyType::ANY);
    sends(&p, &[6], 0);
    assert_success!(p.b_cq.1.wait_nth(2));
    assert_eq!(p.b_cq.wait_results(1).len(), 1);
    assert_eq!(settled(&p.b_cq).notifications().len(), 2);
    p.teardown();
}

// rule C3, C5
#[test]
fn c3_the_arm_is_cleared_before_the_callback_so_it_can_rearm() {
    let (watch, p) = watching_b(Watch::new());
    let cq = p.b_cq.0 as usize;
    let arm = p.b_cq.d().ndk_arm_cq;
    watch.set_hook(move |_| {
        // SAFETY: the CQ outlives its callbacks.
        unsafe { arm(cq as *mut NdkCq, NdkCqNotifyType::ANY) };
    });
    p.b_cq.arm(NdkCqNotifyType::ANY);
    for i in 1..=3 {
        sends(&p, &[i], 0);
        watch.wait_returned(i);
    }
    assert_eq!(
        settled(&watch).all(),
        vec![STATUS_SUCCESS; 3],
        "C3: each re-arm made inside the callback holds"
    );
    assert!(!watch.overlapped());
    assert_eq!(p.b_cq.wait_results(3).len(), 3);
    // The last callback re-armed: one more completion, one more notification.
    watch.set_hook(|_| {});
    sends(&p, &[4], 0);
    watch.wait_returned(4);
    p.teardown();
}

// rule C4
#[test]
fn c4_arm_with_a_completion_new_since_the_last_callback_fires_at_once() {
    let (watch, p) = watching_b(Watch::new());
    // Queued before any callback: new.
    sends(&p, &[1], 0);
    assert_eq!(
        p.b_cq.wait_results(1).len(),
        1,
        "reaped: the CQ is empty again"
    );
    sends(&p, &[2], 0);
    assert_eq!(settled(&watch).entered(), 0, "C3: not armed");
    p.b_cq.arm(NdkCqNotifyType::ANY);
    watch.wait_returned(1);
    // Another one arrives after that callback, unreaped: the next arm fires.
    sends(&p, &[3], 0);
    p.b_cq.arm(NdkCqNotifyType::ANY);
    watch.wait_returned(2);
    // The same for a solicited arm and a new solicited completion.
    sends(&p, &[4], SOLICIT);
    p.b_cq.arm(NdkCqNotifyType::SOLICITED);
    watch.wait_returned(3);
    assert_eq!(settled(&watch).all(), vec![STATUS_SUCCESS; 3]);
    assert_eq!(p.b_cq.wait_results(3).len(), 3);
    p.teardown();
}

// rule C4
#[test]
fn c4_arm_without_new_completions_does_not_fire_the_documented_choice() {
    let (watch, p) = watching_b(Watch::new());
    p.b_cq.arm(NdkCqNotifyType::ANY);
    sends(&p, &[1], 0);
    watch.wait_returned(1);
    // The consumer re-arms without draining; nothing new arrived: the
    // provider may fire at once, and SoftNDK documents that it does not
    // (docs/rnic.md).
    p.b_cq.arm(NdkCqNotifyType::ANY);
    assert_eq!(
        settled(&watch).entered(),
        1,
        "C4: fired for completions already notified"
    );
    // The arm stands: the next completion satisfies it.
    sends(&p, &[2], 0);
    watch.wait_returned(2);
    // Draining part of the backlog changes nothing either.
    assert_eq!(p.b_cq.poll(1).len(), 1);
    p.b_cq.arm(NdkCqNotifyType::ANY);
    assert_eq!(settled(&watch).entered(), 2);
    sends(&p, &[3], 0);
    watch.wait_returned(3);
    assert_eq!(p.b_cq.wait_results(2).len(), 2);
    p.teardown();
}

// ---------------------------------------------------------------------------
// C5: no overlap
// ---------------------------------------------------------------------------

// rule C5
// see also I4
#[test]
fn c5_a_notification_due_during_a_slow_callback_waits_for_it() {
    let (watch, p) = watching_b(Watch::gated());
    recv0(&p.b_qp, 1001);
    recv0(&p.a_qp, 2001);
    p.b_cq.arm(NdkCqNotifyType::ANY);
    // A's Send produces B's receive completion on a thread of its own; the
    // notification runs there and blocks.
    let a_qp = p.a_qp.0 as usize;
    let send = p.a_qp.d().ndk_send;
    let sender = std::thread::spawn(move || {
        // SAFETY: the QP is live until the test tears the pair down, after
        // joining this thread.
        unsafe {
            send(
                a_qp as *mut NdkQp,
                std::ptr::without_provenance_mut(1),
                std::ptr::null(),
                0,
                0,
            )
        }
    });
    watch.wait_entered(1);
    // Re-armed during the callback, then a completion from another queue on
    // another thread: B's own Send completes on B's CQ.
    p.b_cq.arm(NdkCqNotifyType::ANY);
    send0(&p.b_qp, 2, 0);
    assert_eq!(
        settled(&watch).entered(),
        1,
        "C5: a second callback ran during the first"
    );
    watch.open();
    assert_success!(sender.join().unwrap());
    watch.wait_returned(2);
    assert!(!watch.overlapped(), "C5: callbacks overlapped");
    assert_eq!(
        sorted_summary(&p.b_cq, 2),
        vec![(2, STATUS_SUCCESS), (1001, STATUS_SUCCESS)]
    );
    p.teardown();
}

// rule C5
// see also I3, I4
#[test]
fn c5_a_notification_due_inside_a_callback_runs_after_it_returns() {
    let (watch, p) = watching_b(Watch::new());
    recv0(&p.a_qp, 2001);
    let cq = p.b_cq.0 as usize;
    let arm = p.b_cq.d().ndk_arm_cq;
    let b_qp = p.b_qp.0 as usize;
    let send = p.b_qp.d().ndk_send;
    let seen_inside = Arc::new(Mutex::new(None));
    let seen = Arc::clone(&seen_inside);
    let watch_in_hook = Arc::clone(&watch);
    watch.set_hook(move |_| {
        let mut seen = seen.lock().unwrap();
        if seen.is_some() {
            return;
        }
        // From inside the first callback: re-arm, and make a completion on
        // this CQ (B's own Send), on this thread.
        // SAFETY: the CQ outlives its callbacks.
        unsafe { arm(cq as *mut NdkCq, NdkCqNotifyType::ANY) };
        // SAFETY: B's QP is live; no SGEs.
        let status = unsafe {
            send(
                b_qp as *mut NdkQp,
                std::ptr::without_provenance_mut(2),
                std::ptr::null(),
                0,
                0,
            )
        };
        *seen = Some((status, watch_in_hook.entered()));
    });
    p.b_cq.arm(NdkCqNotifyType::ANY);
    sends(&p, &[1], 0);
    watch.wait_returned(2);
    let (status, entered) = seen_inside.lock().unwrap().expect("hook ran");
    assert_success!(status, "I4: posting from inside a callback");
    assert_eq!(entered, 1, "C5: the due callback nested inside the first");
    assert!(!watch.overlapped());
    assert_eq!(settled(&watch).all(), vec![STATUS_SUCCESS; 2]);
    assert_eq!(
        sorted_summary(&p.b_cq, 2),
        vec![(2, STATUS_SUCCESS), (1001, STATUS_SUCCESS)]
    );
    // Watch's hook holds the watch: break the cycle.
    watch.set_hook(|_| {});
    p.teardown();
}

// ---------------------------------------------------------------------------
// C6: merging two arms
// ---------------------------------------------------------------------------

// The arms of C6's table, by their short names.
const ANY: NdkCqNotifyType = NdkCqNotifyType::ANY;
const ERRORS: NdkCqNotifyType = NdkCqNotifyType::ERRORS;
const SOLICITED: NdkCqNotifyType = NdkCqNotifyType::SOLICITED;
use Merged::{Any, Errors, Solicited};

/// The arm in force, as its behaviour shows.
#[derive(Debug, PartialEq, Eq)]
enum Merged {
    /// A plain successful completion satisfies it.
    Any,
    /// Not a plain one, but a solicited one does.
    Solicited,
    /// Neither: only a CQ error (an overflow) does.
    Errors,
}

/// Arms B's CQ with `first` then `second`, and finds out which arm is in
/// force from what satisfies it.
fn merged(first: NdkCqNotifyType, second: NdkCqNotifyType) -> Merged {
    let p = Pair::new();
    p.b_cq.arm(first);
    p.b_cq.arm(second);
    let notified = |n: usize| {
        std::thread::sleep(SETTLE_BRIEF);
        let got = p.b_cq.notifications();
        assert!(got.len() <= 1, "C3: one notification per arm: {got:x?}");
        got.len() == n
    };
    sends(&p, &[1], 0);
    assert_eq!(p.b_cq.wait_results(1).len(), 1);
    if notified(1) {
        p.teardown();
        return Merged::Any;
    }
    sends(&p, &[2], SOLICIT);
    assert_eq!(p.b_cq.wait_results(1).len(), 1);
    if notified(1) {
        p.teardown();
        return Merged::Solicited;
    }
    // Only a CQ error is left: overflow a one-entry CQ (E10).
    assert_success!(p.b_cq.resize(1));
    sends(&p, &[3, 4], 0);
    assert_eq!(
        p.b_cq.1.wait(),
        STATUS_BUFFER_OVERFLOW,
        "neither ANY, SOLICITED nor ERRORS"
    );
    teardown_except(p, Closed::default());
    Merged::Errors
}

/// One `#[test]` per C6 row: arming B's CQ with the first type then the
/// second leaves the arm [`merged`] finds in force.
macro_rules! c6_merges {
    ($(
        $(#[$attr:meta])*
        fn $name:ident() { $first:ident then $second:ident is $merged:ident }
    )*) => {$(
        $(#[$attr])*
        fn $name() {
            assert_eq!(merged($first, $second), $merged);
        }
    )*};
}

c6_merges! {
    // rule C6
    #[test] fn c6_any_then_any_is_any() { ANY then ANY is Any }
    // rule C6
    #[test] fn c6_any_then_errors_is_any() { ANY then ERRORS is Any }
    // rule C6
    #[test] fn c6_any_then_solicited_is_any() { ANY then SOLICITED is Any }
    // rule C6
    #[test] fn c6_errors_then_any_is_any() { ERRORS then ANY is Any }
    // rule C6
    // see also E12
    #[test] fn c6_errors_then_errors_is_errors() { ERRORS then ERRORS is Errors }
    // rule C6
    #[test] fn c6_errors_then_solicited_merges_to_solicited() { ERRORS then SOLICITED is Solicited }
    // rule C6
    #[test] fn c6_solicited_then_any_is_any() { SOLICITED then ANY is Any }
    // rule C6
    #[test] fn c6_solicited_then_errors_stays_solicited() { SOLICITED then ERRORS is Solicited }
    // rule C6
    // see also P17
    #[test] fn c6_solicited_then_solicited_is_solicited() { SOLICITED then SOLICITED is Solicited }
}
