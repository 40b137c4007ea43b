//! Regions over several spans mapped apart (rule M2: an MDL chain whose MDLs
//! the kernel mapped on their own): every operation that touches a region
//! copies across span boundaries, in both engine modes, and checks every
//! byte of the region and the guard bytes around each span.

use alloc::boxed::Box;
use alloc::vec::Vec;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::super::{Denied, Progress};
use super::{ALL, MODES, assert_status, len32, one, send_received, settle, wide};
use crate::kernel::sync::Arc;
use crate::rnic::device::EngineMode;
use crate::rnic::qp::{Payload, QpState};
use crate::rnic::testing::{Pair, Spread};
use crate::rnic::types::{Access, Opcode, Sge, WcStatus, WrFlags};

/// Odd lengths; the second part is one byte; a part ends mid-page.
const LENS: [usize; 4] = [0x1234, 1, 0x7FF, 0x1003];

/// A made-up index for the region's first byte.
const BASE: u64 = 0x0000_7000_0000_0321;

/// A pair whose side b has a region over the spans [`LENS`] at [`BASE`],
/// with every right, filled with pattern `seed`.
fn spread(mode: EngineMode, seed: u8) -> (Pair, Spread) {
    let pair = Pair::new(mode);
    let region = Spread::new(&pair.b.pd, &LENS, seed, BASE, ALL);
    (pair, region)
}

/// rules M2, P19: remote Writes whose target starts and ends inside
/// different spans (and Writes of one byte on each side of every
/// boundary) land exactly; a Read across all of them returns them.
#[test]
fn test_spans_remote_write_and_read_across_every_boundary_rule_m2() {
    for mode in MODES {
        let (pair, region) = spread(mode, 3);
        let total = region.total();
        let src = pair.a.pattern(total, 7, Access::empty());
        let mut model = region.flat();
        let mut writes = Vec::new();
        for at in region.boundaries() {
            writes.push((at - 1, 2));
        }
        writes.push((0x1200, 0x900));
        writes.push((1, total - 2));
        for (to, n) in writes {
            let from = (to * 3) % (total - n + 1);
            pair.a
                .qp
                .post_write(
                    1,
                    Payload::Sges(&[src.sge(wide(from), len32(n))]),
                    region.raddr(wide(to)),
                    region.rkey(),
                    WrFlags::empty(),
                )
                .unwrap();
            settle();
            assert_status(one(&pair.a.scq), Opcode::Write, WcStatus::Success);
            model[to..to + n].copy_from_slice(&src.buffer.bytes()[from..from + n]);
            assert_eq!(region.flat(), model, "{mode:?} {to}+{n}");
            assert!(region.guards_intact(), "{mode:?} {to}+{n}");
        }
        // A Read of everything, into two SGEs split inside the first span.
        let back = pair.a.buffer(total, 0, Access::LOCAL_WRITE);
        let sges = [back.sge(0, 0x1000), back.sge(0x1000, len32(total - 0x1000))];
        pair.a
            .qp
            .post_read(2, &sges, region.raddr(0), region.rkey(), WrFlags::empty())
            .unwrap();
        settle();
        assert_status(one(&pair.a.scq), Opcode::Read, WcStatus::Success);
        assert_eq!(back.buffer.bytes(), &model[..], "{mode:?}");
    }
}

/// rules M2, P11: a receive whose SGEs start and end inside different
/// spans takes a Send's bytes exactly; a Send gathering from several spans
/// sends them in order.
#[test]
fn test_spans_send_scatter_and_gather_across_boundaries_rule_m2() {
    for mode in MODES {
        let (pair, region) = spread(mode, 5);
        let mut model = region.flat();
        // Scatter: two receive SGEs, 0x1230..0x1240 and 0x1600..0x1C00.
        let receive = [region.sge(0x1230, 0x10), region.sge(0x1600, 0x600)];
        pair.b.qp.post_receive(1, &receive).unwrap();
        let src = pair.a.pattern(0x610, 9, Access::empty());
        let got = send_received(&pair, &[src.sge(0, 0x610)]);
        assert_eq!(got.bytes, 0x610);
        model[0x1230..0x1240].copy_from_slice(&src.buffer.bytes()[..0x10]);
        model[0x1600..0x1C00].copy_from_slice(&src.buffer.bytes()[0x10..]);
        assert_eq!(region.flat(), model, "{mode:?}");
        assert!(region.guards_intact());
        // Gather: B sends 0x1233..0x1236 (across two boundaries) and
        // 0x1A00..0x1E00 (across the third).
        let sink = pair.a.buffer(0x500, 0, Access::LOCAL_WRITE);
        pair.a.qp.post_receive(3, &[sink.sge(0, 0x500)]).unwrap();
        let gather = [region.sge(0x1233, 3), region.sge(0x1A00, 0x400)];
        pair.b.send(4, &gather, None).unwrap();
        settle();
        assert_status(one(&pair.b.scq), Opcode::Send, WcStatus::Success);
        assert_status(one(&pair.a.rcq), Opcode::Receive, WcStatus::Success);
        assert_eq!(&sink.buffer.bytes()[..3], &model[0x1233..0x1236]);
        assert_eq!(&sink.buffer.bytes()[3..0x403], &model[0x1A00..0x1E00]);
        assert_eq!(pair.a.qp.state(), QpState::Connected);
    }
}

/// rules M34, P20: the region's edges: the last byte is reachable, one
/// byte past the end is not (nothing moves and the connection ends), and
/// neither is the byte before the first.
#[test]
fn test_spans_edges_refused_rule_m34() {
    for mode in MODES {
        let (pair, region) = spread(mode, 1);
        let total = region.total();
        let before = region.flat();
        let src = pair.a.pattern(8, 2, Access::empty());
        let write = |to: u64, n: u32| {
            pair.a
                .qp
                .post_write(
                    1,
                    Payload::Sges(&[src.sge(0, n)]),
                    to,
                    region.rkey(),
                    WrFlags::empty(),
                )
                .unwrap();
            settle();
            one(&pair.a.scq)
        };
        // Local resolution of B's own SGEs (P11).
        let pd = &pair.b.pd;
        let sge = |addr: u64, len: u32| Sge {
            addr,
            len,
            key: region.mr.local_key().unwrap(),
        };
        let device = pd.device();
        assert!(
            device
                .resolve_local(pd, &sge(BASE, len32(total)), ALL)
                .is_ok()
        );
        let past = device.resolve_local(pd, &sge(BASE + 1, len32(total)), ALL);
        assert_eq!(past.unwrap_err(), Denied::Range);
        let below = device.resolve_local(pd, &sge(BASE - 1, 1), ALL);
        assert_eq!(below.unwrap_err(), Denied::Range);
        assert_status(
            write(region.raddr(wide(total - 1)), 1),
            Opcode::Write,
            WcStatus::Success,
        );
        assert!(region.guards_intact());
        let mut model = before.clone();
        model[total - 1] = src.buffer.bytes()[0];
        assert_eq!(region.flat(), model);
        let c = write(region.raddr(wide(total - 1)), 2);
        assert_eq!(c.status, WcStatus::RemoteOperationError, "{mode:?}");
        assert_eq!(region.flat(), model, "nothing moved");
        assert!(region.guards_intact());
    }
}

/// rule M11: a region over several spans deregistered while a segment of
/// it is in flight pends; the segment still reaches every span until it
/// ends, then the deregistration completes.
#[test]
fn test_spans_deregister_pends_while_a_segment_is_in_flight_rule_m11() {
    let (pair, region) = spread(EngineMode::Inline, 4);
    let total = region.total();
    let pd = &pair.b.pd;
    let sge = Sge {
        addr: BASE,
        len: len32(total),
        key: region.mr.local_key().unwrap(),
    };
    let segment = pd.device().resolve_local(pd, &sge, ALL).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let finish = Box::new(move || {
        counter.fetch_add(1, Ordering::SeqCst);
    });
    assert_eq!(region.mr.deregister(finish), Ok(Progress::Pending));
    assert_eq!(region.mr.local_key(), None);
    // Every span is still reached, run by run, in order.
    let mut runs = Vec::new();
    let mut at = 0_u64;
    while at < wide(total) {
        let run = segment.run(at, u64::MAX).unwrap();
        runs.push(run.len());
        at += wide(run.len());
    }
    assert_eq!(runs, LENS);
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    drop(segment);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}
