//! The runner's per-request path (docs/performance.md, "The send queue per
//! request"): a Send, Write or Read that succeeded is carried to its report
//! as the little its completion needs ([`super::runner`]'s `Done`), removed
//! from the ring together with the copy of the next request, and reported
//! before that one executes. These tests pin what a consumer sees of DEFER
//! chains on that path, in both engine modes: post order with silent
//! successes left out (P23, P14), slots free once completions are seen
//! (P24), a CQ overflow in the middle of a chain (E10) and a failure in the
//! middle of a chain (E5).

use super::{Payload, PostError, Qp, QpConfig, QpState};
use crate::kernel::sync::Arc;
use crate::rnic::device::{Device, EngineMode};
use crate::rnic::mr::Pd;
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
    super::connect(&a.qp, &b.qp, (16, 16), (16, 16)).unwrap();
    Pair { a, b }
}

/// A Write of chunk `ctx` of `src` to chunk `ctx` of `target`, under `key`.
fn write(
    side: &Side,
    ctx: usize,
    src: &Registered,
    target: &Registered,
    key: u32,
    flags: WrFlags,
) -> Result<(), PostError> {
    let at = (ctx * CHUNK) as u64;
    let sge: Sge = src.sge(at, CHUNK as u32);
    side.qp
        .post_write(ctx, Payload::Sges(&[sge]), target.raddr(at), key, flags)
}

/// (context, opcode, status) of each completion `side`'s initiator CQ holds.
fn completions(side: &Side) -> Vec<(usize, Opcode, WcStatus)> {
    side.scq
        .drain()
        .iter()
        .map(|c| (c.request_context, c.opcode, c.status))
        .collect()
}

/// Whether chunk `ctx` of `target` holds chunk `ctx` of `src`.
fn moved(src: &Registered, target: &Registered, ctx: usize) -> bool {
    let chunk = ctx * CHUNK..(ctx + 1) * CHUNK;
    target.buffer.bytes()[chunk.clone()] == src.buffer.bytes()[chunk]
}

#[test]
fn test_chain_of_mixed_ops_completes_in_post_order_without_silent_ones_rule_p23_p14() {
    for mode in [EngineMode::Inline, EngineMode::Deferred] {
        let pair = pair(mode, 64, 8);
        let (a, b) = (&pair.a, &pair.b);
        let src = a.pattern(8 * CHUNK, 1, RW);
        let target = b.buffer(8 * CHUNK, 0, RW);
        let sink = a.buffer(CHUNK, 0, RW);
        let inbox = b.buffer(CHUNK, 0, RW);
        b.qp.post_receive(20, &[inbox.sge(0, CHUNK as u32)])
            .unwrap();
        let defer = WrFlags::DEFER;
        let silent = WrFlags::DEFER | WrFlags::SILENT_SUCCESS;
        let key = target.rkey();
        write(a, 1, &src, &target, key, defer).unwrap();
        write(a, 2, &src, &target, key, silent).unwrap();
        let read = [sink.sge(0, CHUNK as u32)];
        a.qp.post_read(3, &read, target.raddr(CHUNK as u64), key, defer)
            .unwrap();
        let send = [src.sge(0, CHUNK as u32)];
        a.qp.post_send(4, Payload::Sges(&send), silent, None)
            .unwrap();
        write(a, 6, &src, &target, key, WrFlags::empty()).unwrap();
        pair.settle();
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
        assert!(
            [1, 2, 6].iter().all(|&ctx| moved(&src, &target, ctx)),
            "{mode:?}"
        );
        assert_eq!(sink.buffer.bytes(), &src.buffer.bytes()[CHUNK..2 * CHUNK]);
        assert_eq!(b.rcq.drain().len(), 1, "{mode:?}: the silent Send arrived");
    }
}

#[test]
fn test_chain_filling_the_queue_leaves_every_slot_free_once_completed_rule_p24() {
    for mode in [EngineMode::Inline, EngineMode::Deferred] {
        let depth = 4;
        let pair = pair(mode, 64, depth);
        let src = pair.a.pattern(16 * CHUNK, 2, RW);
        let target = pair.b.buffer(16 * CHUNK, 0, RW);
        let key = target.rkey();
        for round in 0..3_usize {
            for k in 0..depth as usize {
                let flags = if k + 1 < depth as usize {
                    WrFlags::DEFER
                } else {
                    WrFlags::empty()
                };
                write(&pair.a, round * 4 + k, &src, &target, key, flags).unwrap();
            }
            pair.settle();
            let done = completions(&pair.a);
            let want: Vec<_> = (round * 4..round * 4 + 4).collect();
            let got: Vec<_> = done.iter().map(|c| c.0).collect();
            assert_eq!(got, want, "{mode:?}: round {round}");
            // Every slot is free again: the next round fills the queue anew.
        }
        assert_eq!(
            write(&pair.a, 12, &src, &target, key, WrFlags::DEFER),
            Ok(()),
            "{mode:?}"
        );
    }
}

#[test]
fn test_chain_overflowing_the_cq_ends_the_connection_before_the_next_executes_rule_e10() {
    for mode in [EngineMode::Inline, EngineMode::Deferred] {
        // Room for two completions: the third Write's overflows the CQ.
        let pair = pair(mode, 2, 8);
        let src = pair.a.pattern(8 * CHUNK, 3, RW);
        let target = pair.b.buffer(8 * CHUNK, 0, RW);
        let key = target.rkey();
        for ctx in 1..=5 {
            let flags = if ctx < 5 {
                WrFlags::DEFER
            } else {
                WrFlags::empty()
            };
            write(&pair.a, ctx, &src, &target, key, flags).unwrap();
        }
        pair.settle();
        assert!(pair.a.scq.cq.is_error(), "{mode:?}");
        let ok = |ctx| (ctx, Opcode::Write, WcStatus::Success);
        assert_eq!(completions(&pair.a), [ok(1), ok(2)], "{mode:?}");
        // The third executed before its completion overflowed; the fourth,
        // read again after the connection ended, did not execute (E10, E5).
        assert!((1..=3).all(|ctx| moved(&src, &target, ctx)), "{mode:?}");
        assert!(
            !(4..=5).any(|ctx| moved(&src, &target, ctx)),
            "{mode:?}: executed after the overflow"
        );
        assert_eq!(pair.a.qp.state(), QpState::Error, "{mode:?}");
        assert_eq!(pair.b.qp.state(), QpState::Error, "{mode:?}");
    }
}

#[test]
fn test_chain_failing_in_the_middle_cancels_the_rest_rule_e5() {
    for mode in [EngineMode::Inline, EngineMode::Deferred] {
        let pair = pair(mode, 64, 8);
        let src = pair.a.pattern(8 * CHUNK, 4, RW);
        let target = pair.b.buffer(8 * CHUNK, 0, RW);
        let key = target.rkey();
        let defer = WrFlags::DEFER;
        write(&pair.a, 1, &src, &target, key, defer).unwrap();
        write(&pair.a, 2, &src, &target, key ^ 0x5A5A_0000, defer).unwrap();
        write(
            &pair.a,
            3,
            &src,
            &target,
            key,
            defer | WrFlags::SILENT_SUCCESS,
        )
        .unwrap();
        write(&pair.a, 4, &src, &target, key, WrFlags::empty()).unwrap();
        pair.settle();
        let done = completions(&pair.a);
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
        assert!(moved(&src, &target, 1), "{mode:?}");
        assert!(!(2..=4).any(|ctx| moved(&src, &target, ctx)), "{mode:?}");
        assert_eq!(pair.a.qp.state(), QpState::Error, "{mode:?}");
    }
}
