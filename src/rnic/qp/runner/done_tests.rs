//! The runner's per-request path (docs/performance.md, "The send queue per
//! request"): a Send, Write or Read that succeeded is carried to its report
//! as the little its completion needs ([`super::runner`]'s `Done`), removed
//! from the ring together with the copy of the next request, and reported
//! before that one executes. These tests pin what a consumer sees of DEFER
//! chains on that path, in both engine modes: post order with silent
//! successes left out (P23, P14), slots free once completions are seen
//! (P24), a CQ overflow in the middle of a chain (E10) and a failure in the
//! middle of a chain (E5); and that the regions of the last request are
//! free once its completion is seen (L18, M11).

use crate::kernel::sync::Arc;
use crate::rnic::device::{Device, EngineMode};
use crate::rnic::mr::{Pd, Progress};
use crate::rnic::qp::{Payload, PostError, Qp, QpConfig, QpState, connect};
use crate::rnic::testing::{CONFIG, Pair, Registered, Side, TestCq};
use crate::rnic::types::{Access, Limits, Opcode, Sge, WcStatus, WrFlags};

const RW: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_WRITE);

/// Bytes each Write of a chain moves, to its own offset of the target.
const CHUNK: usize = 8;

/// A connected pair whose A side has an initiator CQ of `scq_depth` entries
/// and an initiator queue of `depth` requests.
fn pair(mode: EngineMode, scq_depth: u32, depth: u32) -> Pair {
    let config = QpConfig {
        initiator_depth: depth,
        ..CONFIG
    };
    let device = Device::new(Limits::DEFAULT, mode).unwrap();
    let pd = Pd::new(&device).unwrap();
    let (scq, rcq) = (TestCq::new(scq_depth), TestCq::new(64));
    let qp = Qp::new(
        &pd,
        &rcq.cq,
        &scq.cq,
        None,
        QpConfig {
            context: 0xA,
            ..config
        },
    )
    .unwrap();
    let a = Side {
        device: Arc::clone(&device),
        pd,
        scq,
        rcq,
        qp,
    };
    let b = Side::new(&Device::new(Limits::DEFAULT, mode).unwrap(), 0xB, config);
    connect(&a.qp, &b.qp, (16, 16), (16, 16)).unwrap();
    Pair { a, b }
}

/// A chain's pair (as [`pair`]), a pattern source of 16 chunks on A and a
/// zeroed target of as many on B, and the target's token.
struct Chain {
    pair: Pair,
    src: Registered,
    target: Registered,
    key: u32,
}

impl Chain {
    fn new(mode: EngineMode, scq_depth: u32, depth: u32, seed: u8) -> Self {
        let pair = pair(mode, scq_depth, depth);
        let src = pair.a.pattern(16 * CHUNK, seed, RW);
        let target = pair.b.buffer(16 * CHUNK, 0, RW);
        let key = target.rkey();
        Self {
            pair,
            src,
            target,
            key,
        }
    }

    /// A Write of chunk `ctx` of the source to chunk `ctx` of the target,
    /// under `key`.
    fn write_with(&self, ctx: usize, key: u32, flags: WrFlags) -> Result<(), PostError> {
        let at = (ctx * CHUNK) as u64;
        let sge: Sge = self.src.sge(at, CHUNK as u32);
        self.pair.a.qp.post_write(
            ctx,
            Payload::Sges(&[sge]),
            self.target.raddr(at),
            key,
            flags,
        )
    }

    /// [`write_with`](Self::write_with) the target's own token.
    fn write(&self, ctx: usize, flags: WrFlags) -> Result<(), PostError> {
        self.write_with(ctx, self.key, flags)
    }

    /// Writes `contexts` as one chain: each `DEFER` but the last, which
    /// rings the doorbell for all (D2).
    fn write_chain(&self, contexts: core::ops::Range<usize>) {
        let last = contexts.end - 1;
        for ctx in contexts {
            let flags = if ctx < last {
                WrFlags::DEFER
            } else {
                WrFlags::empty()
            };
            self.write(ctx, flags).unwrap();
        }
    }

    /// Whether chunk `ctx` of the target holds chunk `ctx` of the source.
    fn moved(&self, ctx: usize) -> bool {
        let chunk = ctx * CHUNK..(ctx + 1) * CHUNK;
        self.target.buffer.bytes()[chunk.clone()] == self.src.buffer.bytes()[chunk]
    }
}

/// (context, opcode, status) of each completion `side`'s initiator CQ holds.
fn completions(side: &Side) -> Vec<(usize, Opcode, WcStatus)> {
    side.scq
        .drain()
        .iter()
        .map(|c| (c.request_context, c.opcode, c.status))
        .collect()
}

#[test]
fn test_chain_of_mixed_ops_completes_in_post_order_without_silent_ones_rule_p23_p14() {
    for mode in [EngineMode::Inline, EngineMode::Deferred] {
        let chain = Chain::new(mode, 64, 8, 1);
        let (a, b) = (&chain.pair.a, &chain.pair.b);
        let sink = a.buffer(CHUNK, 0, RW);
        let inbox = b.buffer(CHUNK, 0, RW);
        b.qp.post_receive(20, &[inbox.sge(0, CHUNK as u32)])
            .unwrap();
        let defer = WrFlags::DEFER;
        let silent = WrFlags::DEFER | WrFlags::SILENT_SUCCESS;
        chain.write(1, defer).unwrap();
        chain.write(2, silent).unwrap();
        let read = [sink.sge(0, CHUNK as u32)];
        let at = chain.target.raddr(CHUNK as u64);
        a.qp.post_read(3, &read, at, chain.key, defer).unwrap();
        let send = [chain.src.sge(0, CHUNK as u32)];
        a.qp.post_send(4, Payload::Sges(&send), silent, None)
            .unwrap();
        chain.write(6, WrFlags::empty()).unwrap();
        chain.pair.settle();
        let ok = |ctx, op| (ctx, op, WcStatus::Success);
        assert_eq!(
            completions(a),
            [
                ok(1, Opcode::Write),
                ok(3, Opcode::Read),
                ok(6, Opcode::Write)
            ],
            "{mode:?}: post order, silent successes left out"
        );
        assert!([1, 2, 6].iter().all(|&ctx| chain.moved(ctx)), "{mode:?}");
        let read_back = &chain.src.buffer.bytes()[CHUNK..2 * CHUNK];
        assert_eq!(sink.buffer.bytes(), read_back, "{mode:?}");
        assert_eq!(b.rcq.drain().len(), 1, "{mode:?}: the silent Send arrived");
    }
}

#[test]
fn test_chain_filling_the_queue_leaves_every_slot_free_once_completed_rule_p24() {
    for mode in [EngineMode::Inline, EngineMode::Deferred] {
        let depth = 4;
        let chain = Chain::new(mode, 64, depth, 2);
        for round in 0..3_usize {
            let contexts = round * 4..round * 4 + 4;
            chain.write_chain(contexts.clone());
            chain.pair.settle();
            let got: Vec<_> = completions(&chain.pair.a).iter().map(|c| c.0).collect();
            assert_eq!(got, contexts.collect::<Vec<_>>(), "{mode:?}: round {round}");
            // Every slot is free again: the next round fills the queue anew.
        }
        assert_eq!(chain.write(12, WrFlags::DEFER), Ok(()), "{mode:?}");
    }
}

#[test]
fn test_chain_overflowing_the_cq_ends_the_connection_before_the_next_executes_rule_e10() {
    for mode in [EngineMode::Inline, EngineMode::Deferred] {
        // Room for two completions: the third Write's overflows the CQ.
        let chain = Chain::new(mode, 2, 8, 3);
        chain.write_chain(1..6);
        chain.pair.settle();
        let pair = &chain.pair;
        assert!(pair.a.scq.cq.is_error(), "{mode:?}");
        let ok = |ctx| (ctx, Opcode::Write, WcStatus::Success);
        assert_eq!(completions(&pair.a), [ok(1), ok(2)], "{mode:?}");
        // The third executed before its completion overflowed; the fourth,
        // read again after the connection ended, did not execute (E10, E5).
        assert!((1..=3).all(|ctx| chain.moved(ctx)), "{mode:?}");
        assert!(
            !(4..=5).any(|ctx| chain.moved(ctx)),
            "{mode:?}: executed after the overflow"
        );
        assert_eq!(pair.a.qp.state(), QpState::Error, "{mode:?}");
        assert_eq!(pair.b.qp.state(), QpState::Error, "{mode:?}");
    }
}

#[test]
fn test_chain_failing_in_the_middle_cancels_the_rest_rule_e5() {
    for mode in [EngineMode::Inline, EngineMode::Deferred] {
        let chain = Chain::new(mode, 64, 8, 4);
        let defer = WrFlags::DEFER;
        chain.write(1, defer).unwrap();
        chain.write_with(2, chain.key ^ 0x5A5A_0000, defer).unwrap();
        chain.write(3, defer | WrFlags::SILENT_SUCCESS).unwrap();
        chain.write(4, WrFlags::empty()).unwrap();
        chain.pair.settle();
        let done = completions(&chain.pair.a);
        assert_eq!(done.len(), 4, "{mode:?}: {done:?}");
        assert_eq!(done[0], (1, Opcode::Write, WcStatus::Success), "{mode:?}");
        assert_eq!((done[1].0, done[1].1), (2, Opcode::Write), "{mode:?}");
        assert!(
            !done[1].2.is_success() && done[1].2 != WcStatus::Cancelled,
            "{mode:?}: {done:?}"
        );
        // E5: the rest is cancelled, the silent one reported too (P15).
        assert_eq!(
            done[2..],
            [
                (3, Opcode::Write, WcStatus::Cancelled),
                (4, Opcode::Write, WcStatus::Cancelled)
            ],
            "{mode:?}"
        );
        assert!(chain.moved(1), "{mode:?}");
        assert!(!(2..=4).any(|ctx| chain.moved(ctx)), "{mode:?}");
        assert_eq!(chain.pair.a.qp.state(), QpState::Error, "{mode:?}");
    }
}

/// Waits (bounded) until `side`'s initiator CQ holds a completion, and
/// returns the completions it holds.
fn first_completions(side: &Side) -> Vec<(usize, Opcode, WcStatus)> {
    crate::kernel::testing::wait_some("a completion", || {
        Some(completions(side)).filter(|got| !got.is_empty())
    })
}

#[test]
fn test_region_of_the_last_request_closes_at_once_when_its_completion_is_seen_rule_l18_m11() {
    // A consumer that has seen the completion of every request over a
    // region and closes it has nothing outstanding: the close is done at
    // once on either engine, after a success and after a failure (the
    // deferred runner's pass must not still hold the region through its
    // token cache when the completion becomes visible). The rounds give the
    // worker's pass every chance to still be running when the close comes.
    for mode in [EngineMode::Inline, EngineMode::Deferred] {
        for round in 0..100_usize {
            let chain = Chain::new(mode, 64, 8, 5);
            let failing = round % 2 == 1;
            let key = if failing {
                chain.key ^ 0x5A5A_0000
            } else {
                chain.key
            };
            chain.write_with(1, key, WrFlags::empty()).unwrap();
            let done = first_completions(&chain.pair.a);
            assert_eq!(done.len(), 1, "{mode:?} round {round}: {done:?}");
            assert_eq!(done[0].2.is_success(), !failing, "{mode:?} round {round}");
            let progress = chain.src.mr.close(alloc::boxed::Box::new(|| {}));
            assert_eq!(
                progress,
                Progress::Done,
                "{mode:?} round {round} (failing {failing}): the source region closes at once"
            );
            chain.pair.settle();
        }
    }
}
