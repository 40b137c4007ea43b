//! Loom models of the QP runner and of the doorbell racing flush.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release --lib -- loom`.

use super::RunState;
use crate::kernel::sync::Arc;
use crate::kernel::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A queue served by a `RunState` runner: `posted` items are pushed, the
/// runner moves them to `done`; `inside` catches two runners at once.
struct Model {
    run: RunState,
    posted: AtomicUsize,
    done: AtomicUsize,
    inside: AtomicBool,
}

impl Model {
    fn kick(&self) {
        if !self.run.enter() {
            return;
        }
        loop {
            assert!(
                !self.inside.swap(true, Ordering::SeqCst),
                "two runners at once"
            );
            while self.done.load(Ordering::SeqCst) < self.posted.load(Ordering::SeqCst) {
                self.done.fetch_add(1, Ordering::SeqCst);
            }
            self.inside.store(false, Ordering::SeqCst);
            if self.run.exit() {
                return;
            }
        }
    }
}

#[test]
fn test_loom_runner_never_loses_a_kick_nor_runs_twice() {
    loom::model(|| {
        let model = Arc::new(Model {
            run: RunState::new(),
            posted: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            inside: AtomicBool::new(false),
        });
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let model = Arc::clone(&model);
                loom::thread::spawn(move || {
                    model.posted.fetch_add(1, Ordering::SeqCst);
                    model.kick();
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        // Every posted item was run by some runner before all kicks returned.
        assert_eq!(model.done.load(Ordering::SeqCst), 2);
        assert!(model.run.is_idle());
    });
}

mod doorbell {
    //! The real QP: a post with and without DEFER racing a flush. Each
    //! accepted request completes exactly once (P4, D3, D5), cancelled or
    //! not; a refused one never does.

    use crate::kernel::sync::Arc;
    use crate::kernel::sync::atomic::{AtomicUsize, Ordering};
    use crate::rnic::cq::{Cq, CqEvent, CqNotify};
    use crate::rnic::device::{Device, EngineMode};
    use crate::rnic::loom_model::bounded;
    use crate::rnic::mr::Pd;
    use crate::rnic::qp::{self, Payload, Qp, QpConfig};
    use crate::rnic::types::{Completion, Limits, Opcode, WcStatus, WrFlags};

    pub(super) struct Silent;
    impl CqNotify for Silent {
        fn notify(&self, _event: CqEvent) {}
        fn close_complete(&self) {}
    }

    pub(super) const CONFIG: QpConfig = QpConfig {
        context: 1,
        receive_depth: 2,
        initiator_depth: 4,
        max_receive_sge: 1,
        max_initiator_sge: 1,
        inline_size: 0,
    };

    pub(super) fn limits() -> Limits {
        Limits {
            max_mr_count: 1,
            max_mw_count: 1,
            max_pd_count: 2,
            ..Limits::DEFAULT
        }
    }

    pub(super) fn pair() -> (Arc<Qp>, Arc<Qp>, Arc<Cq>) {
        let device = Device::new(limits(), EngineMode::Inline).unwrap();
        let pd = Pd::new(&device).unwrap();
        let cq = Arc::new(Cq::new(16, Arc::new(Silent)).unwrap());
        let a = Qp::new(&pd, &cq, &cq, None, CONFIG).unwrap();
        let b = Qp::new(&pd, &cq, &cq, None, CONFIG).unwrap();
        qp::connect(&a, &b, (1, 1), (1, 1)).unwrap();
        (a, b, cq)
    }

    /// Everything `cq` holds: never more than its depth (16), so one poll
    /// of 16 takes it all.
    pub(super) fn drain(cq: &Cq) -> Vec<Completion> {
        let mut batch = [Completion::new(WcStatus::Success, Opcode::Send, 0, 0); 16];
        let n = cq.poll(&mut batch);
        batch[..n].to_vec()
    }

    #[test]
    fn test_loom_doorbell_racing_flush_completes_each_accepted_post_once() {
        bounded(|| {
            let (a, b, cq) = pair();
            let poster = {
                let a = Arc::clone(&a);
                loom::thread::spawn(move || {
                    // A deferred Send (0 bytes) then an undeferred one: the
                    // second rings the first (D2). No receive is posted, so a
                    // Send that starts waits (RNR) until the flush cancels it.
                    let first = a
                        .post_send(10, Payload::Sges(&[]), WrFlags::DEFER, None)
                        .is_ok();
                    let second = a
                        .post_send(11, Payload::Sges(&[]), WrFlags::empty(), None)
                        .is_ok();
                    (first, second)
                })
            };
            a.flush();
            let (first, second) = poster.join().unwrap();
            // D5: once flushed and drained, nothing is left in flight.
            a.flush();
            let done = drain(&cq);
            let count = |ctx: usize| {
                done.iter()
                    .filter(|c| c.request_context == ctx && c.qp_context == 1)
                    .count()
            };
            assert_eq!(count(10), usize::from(first), "first post: {done:?}");
            assert_eq!(count(11), usize::from(second), "second post: {done:?}");
            assert!(
                done.iter().all(|c| c.status == WcStatus::Cancelled),
                "nothing could execute: {done:?}"
            );
            assert!(a.is_quiescent());
            drop(b);
        });
    }

    /// A QP with two receives posted whose connection ends on another
    /// thread (`end`: the connection layer's disconnect, or the link's
    /// failure) while the consumer closes it: when the close completes,
    /// both receives' entries are in the CQ (L21, P6). The close used to
    /// complete first in two interleavings: the other thread had moved the
    /// QP to `Disconnected` but not yet cancelled its receives (the close's
    /// own disconnect then did nothing), or had taken a receive out of the
    /// queue to cancel it and not yet queued its entry.
    fn close_racing(end: fn(&Arc<Qp>)) {
        bounded(move || {
            let (a, b, cq) = pair();
            a.post_receive(20, &[]).unwrap();
            a.post_receive(21, &[]).unwrap();
            let ender = {
                let a = Arc::clone(&a);
                loom::thread::spawn(move || end(&a))
            };
            // The entries in the CQ when the close completes.
            let at_close = Arc::new(AtomicUsize::new(usize::MAX));
            let finish = {
                let (cq, at_close) = (Arc::clone(&cq), Arc::clone(&at_close));
                Box::new(move || at_close.store(cq.len(), Ordering::SeqCst))
            };
            if a.close_with(finish) == crate::rnic::mr::Progress::Done {
                at_close.store(cq.len(), Ordering::SeqCst);
            }
            ender.join().unwrap();
            let receives = drain(&cq)
                .iter()
                .filter(|c| c.request_context == 20 || c.request_context == 21)
                .count();
            assert_eq!(receives, 2, "each receive completes once");
            assert!(
                at_close.load(Ordering::SeqCst) >= 2,
                "the close completed before the receives' entries were in the CQ"
            );
            drop(b);
        });
    }

    #[test]
    fn test_loom_close_racing_a_disconnect_waits_for_the_receives_entries_rule_l21_p6() {
        close_racing(Qp::disconnect);
    }

    #[test]
    fn test_loom_close_racing_a_connection_failure_waits_for_the_receives_entries_rule_l21_p6() {
        close_racing(Qp::terminate);
    }
}

mod srq {
    //! An SRQ receive racing the close of another attached QP: the Send of
    //! a peer waiting for the SRQ (Q3) is woken by the receive.

    use super::doorbell::{CONFIG, Silent, drain, limits};
    use crate::kernel::sync::Arc;
    use crate::kernel::sync::atomic::{AtomicUsize, Ordering};
    use crate::rnic::cq::Cq;
    use crate::rnic::device::{Device, EngineMode};
    use crate::rnic::loom_model::bounded;
    use crate::rnic::mr::Pd;
    use crate::rnic::qp::{self, Payload, Qp};
    use crate::rnic::srq::{Srq, SrqEvent, SrqNotify};
    use crate::rnic::types::{WcStatus, WrFlags};

    /// A PD, a CQ of 16 and an SRQ of 2 receives (notifying `notify`) on a
    /// fresh device.
    fn world(notify: Option<Arc<dyn SrqNotify>>) -> (Arc<Pd>, Arc<Cq>, Arc<Srq>) {
        let device = Device::new(limits(), EngineMode::Inline).unwrap();
        let pd = Pd::new(&device).unwrap();
        let cq = Arc::new(Cq::new(16, Arc::new(Silent)).unwrap());
        let srq = Srq::new(&pd, 2, 1, 0, notify).unwrap();
        (pd, cq, srq)
    }

    /// A QP taking its receives from `srq`, connected to a QP of its own:
    /// (the attached QP, its peer).
    fn attached_pair(pd: &Arc<Pd>, cq: &Arc<Cq>, srq: &Arc<Srq>) -> (Arc<Qp>, Arc<Qp>) {
        let attached = Qp::new(pd, cq, cq, Some(srq), CONFIG).unwrap();
        let peer = Qp::new(pd, cq, cq, None, CONFIG).unwrap();
        qp::connect(&attached, &peer, (1, 1), (1, 1)).unwrap();
        (attached, peer)
    }

    /// Two QPs share an SRQ; the second's peer has a Send waiting because
    /// the SRQ is empty. A receive posted to the SRQ while the first QP
    /// closes on another thread must reach the waiting Send: once both
    /// threads are done, the Send and the receive have completed. The
    /// receive's wake-up used to walk the attached QPs by index, and the
    /// close's detach shifted the second QP under it: its peer was never
    /// kicked and the Send waited for ever.
    #[test]
    fn test_loom_srq_receive_racing_a_close_wakes_the_waiting_send_rule_q3() {
        bounded(|| {
            let (pd, cq, srq) = world(None);
            let first = Qp::new(&pd, &cq, &cq, Some(&srq), CONFIG).unwrap();
            let (second, peer) = attached_pair(&pd, &cq, &srq);
            // No receive yet: the Send waits for one.
            peer.post_send(30, Payload::Sges(&[]), WrFlags::empty(), None)
                .unwrap();
            assert!(drain(&cq).is_empty(), "the Send waits for a receive");
            let closer = {
                let first = Arc::clone(&first);
                loom::thread::spawn(move || first.close())
            };
            srq.post_receive(40, &[]).unwrap();
            closer.join().unwrap();
            let done = drain(&cq);
            let status = |ctx: usize| {
                done.iter()
                    .find(|c| c.request_context == ctx)
                    .map(|c| c.status)
            };
            assert_eq!(status(30), Some(WcStatus::Success), "the Send: {done:?}");
            assert_eq!(status(40), Some(WcStatus::Success), "the receive: {done:?}");
            drop((second, peer));
        });
    }

    /// A QP taking its receives from an empty SRQ closes while its peer's
    /// Send, on another thread, looks for a receive there: the close
    /// completes (L18, L21), and the Send ends once, cancelled. The Send's
    /// look counts itself on the QP before it reads the QP's state (so that
    /// a close sees it or makes it back off); when it backed off after the
    /// close had seen the count and gone pending, nobody finished the close:
    /// it waited for ever (found by the fuzzer on the deferred engine).
    #[test]
    fn test_loom_srq_qp_close_racing_the_peers_send_completes_rule_l18_l21() {
        bounded(|| {
            let (pd, cq, srq) = world(None);
            let (attached, peer) = attached_pair(&pd, &cq, &srq);
            let sender = {
                let peer = Arc::clone(&peer);
                loom::thread::spawn(move || {
                    peer.post_send(30, Payload::Sges(&[]), WrFlags::empty(), None)
                        .unwrap();
                })
            };
            let closed = Arc::new(AtomicUsize::new(0));
            let finish = {
                let closed = Arc::clone(&closed);
                Box::new(move || {
                    closed.fetch_add(1, Ordering::SeqCst);
                })
            };
            if attached.close_with(finish) == crate::rnic::mr::Progress::Done {
                closed.fetch_add(1, Ordering::SeqCst);
            }
            sender.join().unwrap();
            assert_eq!(closed.load(Ordering::SeqCst), 1, "the close completed once");
            let sends: Vec<_> = drain(&cq)
                .iter()
                .filter(|c| c.request_context == 30)
                .map(|c| c.status)
                .collect();
            assert_eq!(sends, [WcStatus::Cancelled], "the Send ends once");
            drop(peer);
        });
    }

    /// Counts the SRQ's notifications.
    #[derive(Default)]
    struct Count(AtomicUsize);

    impl SrqNotify for Count {
        fn notify(&self, event: SrqEvent) {
            assert_eq!(event, SrqEvent::BelowThreshold);
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Two peers' Sends land at once in the two receives of an SRQ armed
    /// at 2: each receive is taken by one Send, and the threshold fires
    /// exactly once (Q4: once fewer than 2 are queued; Q5: that disarms
    /// it), whichever take comes first.
    #[test]
    fn test_loom_two_sends_draining_an_armed_srq_notify_once_rule_q3_q4_q5() {
        bounded(|| {
            let count = Arc::new(Count::default());
            let (pd, cq, srq) = world(Some(Arc::clone(&count) as _));
            srq.post_receive(40, &[]).unwrap();
            srq.post_receive(41, &[]).unwrap();
            // Armed with both queued (Q6: depth 0 keeps the depth).
            srq.modify(0, 2).unwrap();
            let peers: Vec<Arc<Qp>> = (0..2).map(|_| attached_pair(&pd, &cq, &srq).1).collect();
            assert_eq!(count.0.load(Ordering::SeqCst), 0, "2 queued, not below 2");
            let other = {
                let peer = Arc::clone(&peers[0]);
                loom::thread::spawn(move || {
                    peer.post_send(30, Payload::Sges(&[]), WrFlags::empty(), None)
                        .unwrap();
                })
            };
            peers[1]
                .post_send(31, Payload::Sges(&[]), WrFlags::empty(), None)
                .unwrap();
            other.join().unwrap();
            let done = drain(&cq);
            for ctx in [30, 31, 40, 41] {
                let statuses: Vec<_> = done
                    .iter()
                    .filter(|c| c.request_context == ctx)
                    .map(|c| c.status)
                    .collect();
                assert_eq!(statuses, [WcStatus::Success], "{ctx}: {done:?}");
            }
            assert!(srq.is_empty());
            assert_eq!(count.0.load(Ordering::SeqCst), 1, "one notification");
        });
    }
}

mod waiting_send {
    //! A Send that found no receive waits for one (the fabric's RNR wait);
    //! the receive, or the end of the connection, is posted on another
    //! thread.

    use super::doorbell::{drain, pair};
    use crate::kernel::sync::Arc;
    use crate::rnic::loom_model::bounded;
    use crate::rnic::qp::Payload;
    use crate::rnic::types::{Completion, WcStatus, WrFlags};

    fn status_of(done: &[Completion], ctx: usize) -> Vec<WcStatus> {
        done.iter()
            .filter(|c| c.request_context == ctx)
            .map(|c| c.status)
            .collect()
    }

    /// The Send posted on one thread and the receive on another: whichever
    /// comes first, the Send lands in the receive and both complete once,
    /// successfully (P6: a post that returned success completes).
    #[test]
    fn test_loom_send_racing_the_peers_receive_post_lands_in_it_rule_p6() {
        bounded(|| {
            let (a, b, cq) = pair();
            let sender = {
                let a = Arc::clone(&a);
                loom::thread::spawn(move || {
                    a.post_send(30, Payload::Sges(&[]), WrFlags::empty(), None)
                        .unwrap();
                })
            };
            b.post_receive(40, &[]).unwrap();
            sender.join().unwrap();
            let done = drain(&cq);
            assert_eq!(status_of(&done, 30), [WcStatus::Success], "{done:?}");
            assert_eq!(status_of(&done, 40), [WcStatus::Success], "{done:?}");
        });
    }

    /// A Send waiting for a receive while the peer disconnects on another
    /// thread: once both sides have disconnected, the Send has completed
    /// exactly once, cancelled (E3: a request outstanding at the disconnect
    /// is flushed), and nothing is left outstanding on either side.
    #[test]
    fn test_loom_waiting_send_racing_the_peers_disconnect_completes_once_cancelled_rule_e3() {
        bounded(|| {
            let (a, b, cq) = pair();
            a.post_send(30, Payload::Sges(&[]), WrFlags::empty(), None)
                .unwrap();
            let ender = {
                let b = Arc::clone(&b);
                loom::thread::spawn(move || b.disconnect())
            };
            a.disconnect();
            ender.join().unwrap();
            let done = drain(&cq);
            assert_eq!(status_of(&done, 30), [WcStatus::Cancelled], "{done:?}");
            assert!(a.is_quiescent() && b.is_quiescent());
        });
    }
}
