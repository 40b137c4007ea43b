//! Two devices, two QPs joined by an in-memory byte pipe through
//! `iwarp::link`: the data path end to end, its errors and Terminates, close,
//! and the same scenarios over the local fabric for comparison.

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::fmt::Debug;
use std::sync::Mutex;

use proptest::prelude::*;

use super::{ByteStream, Link, LinkConfig, connect};
use crate::kernel::sync::Arc;
use crate::kernel::sync::atomic::Ordering;
use crate::rnic::device::{Device, EngineMode};
use crate::rnic::iwarp::mpa::{self, RtrKinds};
use crate::rnic::iwarp::rdmap::{Message, Opcode as WireOp, SendHeader};
use crate::rnic::iwarp::setup::{
    Established, Event as SetupEvent, Initiator, InitiatorConfig, Responder, ResponderConfig,
};
use crate::rnic::iwarp::terminate::{LocalCause, TermCode, Terminate, ddp_code, ddp_etype};
use crate::rnic::mr::{Denied, Mw, Pd};
use crate::rnic::qp::{self, Payload, QpState};
use crate::rnic::srq::Srq;
use crate::rnic::testing::hook::{self, Point};
use crate::rnic::testing::{Pair, Registered, Side, TestCq, summary};
use crate::rnic::types::{Access, Limits, Opcode, WcStatus, WrFlags};

/// One direction of the pipe: what the sender's link offered and the
/// receiver has not read yet, with a window.
struct Pipe {
    bytes: Mutex<VecDeque<u8>>,
    window: usize,
    closed: Mutex<Option<bool>>,
}

impl ByteStream for Pipe {
    fn send(&self, bytes: &[u8]) -> usize {
        let mut q = self.bytes.lock().unwrap();
        let n = bytes.len().min(self.window.saturating_sub(q.len()));
        q.extend(&bytes[..n]);
        n
    }
    fn close(&self, abortive: bool) {
        let mut closed = self.closed.lock().unwrap();
        assert!(closed.is_none(), "closed twice");
        *closed = Some(abortive);
    }
}

/// A deterministic chunk-size source.
struct Chunks(u64);

impl Chunks {
    fn next(&mut self, max: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        1 + (self.0 as usize) % max
    }
}

/// A pipe pair with its two linked sides and the pipe's own bookkeeping.
struct Wire {
    linked: Linked<Pipe>,
    /// Every byte delivered b → a (a → b: `linked.log_ab`).
    log_ba: Mutex<Vec<u8>>,
    close_seen: Mutex<(bool, bool)>,
    chunks: Mutex<Chunks>,
    max_chunk: usize,
    crc: bool,
}

impl core::ops::Deref for Wire {
    type Target = Linked<Pipe>;
    fn deref(&self) -> &Linked<Pipe> {
        &self.linked
    }
}

pub(super) const MULPDU: u16 = 64;

/// Both links' configuration: FPDUs of at most [`MULPDU`] bytes of ULPDU,
/// IRD 4, no RTR.
pub(super) fn config(crc: bool, ord: u32) -> LinkConfig {
    LinkConfig {
        mulpdu: MULPDU,
        max_rx_ulpdu: 1024,
        crc,
        ird: 4,
        ord,
        rtr: None,
        receive_first: false,
    }
}

/// A QP on each of two fresh devices, A sending into the pipe `ab` and B
/// into `ba`, each through its link (`la`, `lb`): what the in-memory wires
/// of these tests and `lend_tests.rs` share.
pub(super) struct Linked<P> {
    pub(super) a: Side,
    pub(super) b: Side,
    pub(super) la: Arc<Link>,
    pub(super) lb: Arc<Link>,
    pub(super) ab: Arc<P>,
    pub(super) ba: Arc<P>,
    /// Every byte delivered a → b.
    pub(super) log_ab: Mutex<Vec<u8>>,
}

impl<P: ByteStream + 'static> Linked<P> {
    /// Links the two sides of `pair` (not connected) over the pipes
    /// `(ab, ba)` with `configs` (A's, B's).
    pub(super) fn new(
        Pair { a, b }: Pair,
        (ab, ba): (Arc<P>, Arc<P>),
        configs: (LinkConfig, LinkConfig),
    ) -> Self {
        let la = connect(&a.qp, Arc::clone(&ab) as _, configs.0).unwrap();
        let lb = connect(&b.qp, Arc::clone(&ba) as _, configs.1).unwrap();
        Self {
            a,
            b,
            la,
            lb,
            ab,
            ba,
            log_ab: Mutex::new(Vec::new()),
        }
    }
}

impl Wire {
    fn new(window: usize, max_chunk: usize, seed: u64, crc: bool) -> Self {
        Self::with(window, max_chunk, seed, config(crc, 4), EngineMode::Inline)
    }

    fn with(window: usize, max_chunk: usize, seed: u64, cfg: LinkConfig, mode: EngineMode) -> Self {
        Self::with_configs(window, max_chunk, seed, (cfg, cfg), mode)
    }

    fn with_configs(
        window: usize,
        max_chunk: usize,
        seed: u64,
        cfgs: (LinkConfig, LinkConfig),
        mode: EngineMode,
    ) -> Self {
        Self::joining(Pair::apart(mode), window, max_chunk, seed, cfgs)
    }

    /// A wire between the sides of `pair` (not connected).
    fn joining(
        pair: Pair,
        window: usize,
        max_chunk: usize,
        seed: u64,
        (cfg, cfg_b): (LinkConfig, LinkConfig),
    ) -> Self {
        let pipe = || {
            Arc::new(Pipe {
                bytes: Mutex::new(VecDeque::new()),
                window,
                closed: Mutex::new(None),
            })
        };
        Self {
            linked: Linked::new(pair, (pipe(), pipe()), (cfg, cfg_b)),
            log_ba: Mutex::new(Vec::new()),
            close_seen: Mutex::new((false, false)),
            chunks: Mutex::new(Chunks(seed | 1)),
            max_chunk,
            crc: cfg.crc,
        }
    }

    /// Moves bytes both ways in random chunks until nothing moves (bounded).
    fn pump(&self) {
        for _ in 0..200_000 {
            crate::kernel::deferred::flush();
            let moved_ab = self.move_one(&self.ab, &self.lb, &self.la, &self.log_ab, 0);
            let moved_ba = self.move_one(&self.ba, &self.la, &self.lb, &self.log_ba, 1);
            if !moved_ab && !moved_ba {
                crate::kernel::deferred::flush();
                return;
            }
        }
        panic!("pump did not settle");
    }

    fn move_one(
        &self,
        pipe: &Pipe,
        to: &Link,
        from: &Link,
        log: &Mutex<Vec<u8>>,
        which: usize,
    ) -> bool {
        let n = self.chunks.lock().unwrap().next(self.max_chunk);
        let chunk: Vec<u8> = {
            let mut q = pipe.bytes.lock().unwrap();
            let n = n.min(q.len());
            q.drain(..n).collect()
        };
        if chunk.is_empty() {
            let closed = *pipe.closed.lock().unwrap();
            let mut seen = self.close_seen.lock().unwrap();
            let seen = if which == 0 { &mut seen.0 } else { &mut seen.1 };
            if let Some(abortive) = closed
                && !*seen
            {
                *seen = true;
                to.peer_closed(abortive);
                return true;
            }
            return false;
        }
        log.lock().unwrap().extend_from_slice(&chunk);
        to.receive(&chunk);
        from.writable();
        true
    }

    /// The messages that crossed one way: opcode and, for a Terminate, its
    /// code.
    fn crossed(&self, log: &Mutex<Vec<u8>>) -> Vec<(WireOp, Option<TermCode>)> {
        let log = log.lock().unwrap();
        let mut rest = &log[..];
        let mut out = Vec::new();
        while !rest.is_empty() {
            let Ok((ulpdu, len)) = mpa::parse_fpdu(rest, self.crc, 65535) else {
                break;
            };
            let message = Message::parse(ulpdu, None).unwrap();
            let code = match message {
                Message::Terminate { terminate, .. } => Some(terminate.code),
                _ => None,
            };
            out.push((message.opcode(), code));
            rest = &rest[len..];
        }
        out
    }

    fn terminate_ba(&self) -> Option<TermCode> {
        self.crossed(&self.log_ba).into_iter().find_map(|(_, c)| c)
    }

    fn terminate_ab(&self) -> Option<TermCode> {
        self.crossed(&self.log_ab).into_iter().find_map(|(_, c)| c)
    }
}

/// A request `ctx` of `opcode` that completed successfully, as
/// [`expect_done`] lists it.
fn ok(ctx: usize, opcode: Opcode) -> (usize, Opcode, WcStatus) {
    (ctx, opcode, WcStatus::Success)
}

/// Drains `cq` and expects exactly `expected` (request context, opcode,
/// status), in order.
#[track_caller]
pub(super) fn expect_done(cq: &TestCq, expected: &[(usize, Opcode, WcStatus)]) {
    assert_eq!(summary(&cq.drain()), expected);
}

/// Posts on `side` a Read (context `ctx`) of the first 8 bytes of the
/// peer's `remote` into a new buffer; returns the buffer.
fn read_8_from(side: &Side, ctx: usize, remote: &Registered) -> Registered {
    let sink = side.buffer(8, 0, Access::LOCAL_WRITE);
    side.qp
        .post_read(
            ctx,
            &[sink.sge(0, 8)],
            remote.raddr(0),
            remote.rkey(),
            WrFlags::empty(),
        )
        .unwrap();
    sink
}

/// `n` buffers of `len` bytes of `side` that Reads land in.
fn read_sinks(side: &Side, n: usize, len: usize) -> Vec<Registered> {
    (0..n)
        .map(|_| side.buffer(len, 0, Access::LOCAL_WRITE))
        .collect()
}

/// Local and remote write, remote read.
pub(super) const RW: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ);

/// Posts a receive (context `ctx`) of one `len`-byte buffer on `side`;
/// returns the buffer.
fn receive_into(side: &Side, ctx: usize, len: usize) -> Registered {
    let dst = side.buffer(len, 0, RW);
    let sge = dst.sge(0, u32::try_from(len).unwrap());
    side.qp.post_receive(ctx, &[sge]).unwrap();
    dst
}

/// Posts receives 1 and 2 on `side`, both into the same new buffer of
/// `len` bytes; returns the buffer.
fn receive_twice_into(side: &Side, len: usize) -> Registered {
    let dst = receive_into(side, 1, len);
    side.qp
        .post_receive(2, &[dst.sge(0, u32::try_from(len).unwrap())])
        .unwrap();
    dst
}

/// Posts a Send (context `ctx`) of `len` bytes of pattern `seed` from
/// `side`, invalidating `invalidate` at the peer; returns its source.
pub(super) fn send_pattern(
    side: &Side,
    ctx: usize,
    len: usize,
    seed: u8,
    invalidate: Option<u32>,
) -> Registered {
    let src = side.pattern(len, seed, Access::empty());
    let sge = src.sge(0, u32::try_from(len).unwrap());
    side.qp
        .post_send(ctx, Payload::Sges(&[sge]), WrFlags::empty(), invalidate)
        .unwrap();
    src
}

#[test]
fn test_send_multi_segment_sge_lists() {
    for crc in [false, true] {
        let w = Wire::new(100, 37, 7, crc);
        let src = w.a.pattern(300, 3, Access::empty());
        let dst = w.b.buffer(400, 0, RW);
        w.b.qp
            .post_receive(1, &[dst.sge(0, 100), dst.sge(100, 300)])
            .unwrap();
        w.b.qp.post_receive(2, &[dst.sge(0, 0)]).unwrap();
        let sges = [src.sge(0, 50), src.sge(50, 200), src.sge(250, 50)];
        w.a.qp
            .post_send(10, Payload::Sges(&sges), WrFlags::SOLICITED, None)
            .unwrap();
        // A zero-length Send lands in a zero-length receive.
        w.a.qp
            .post_send(11, Payload::Sges(&[]), WrFlags::empty(), None)
            .unwrap();
        w.pump();
        expect_done(&w.a.scq, &[ok(10, Opcode::Send), ok(11, Opcode::Send)]);
        let got = w.b.rcq.drain();
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].request_context, got[0].bytes), (1, 300));
        assert!(got[0].solicited);
        assert_eq!(got[0].qp_context, 0xB);
        assert_eq!((got[1].request_context, got[1].bytes), (2, 0));
        assert!(!got[1].solicited);
        assert_eq!(&dst.buffer.bytes()[..300], src.buffer.bytes());
        // 300 bytes in 46-byte payloads: 7 FPDUs, then one for the empty Send.
        let crossed = w.crossed(&w.log_ab);
        assert_eq!(crossed.len(), 8);
        // Counters count FPDUs and their octets.
        let out = &w.a.device.counters;
        let inn = &w.b.device.counters;
        assert_eq!(out.rdma_out_frames.load(Ordering::Relaxed), 8);
        assert_eq!(inn.rdma_in_frames.load(Ordering::Relaxed), 8);
        assert_eq!(
            out.rdma_out_octets.load(Ordering::Relaxed),
            w.log_ab.lock().unwrap().len() as u64
        );
        assert!(
            crossed
                .iter()
                .all(|(op, _)| *op == WireOp::Send || *op == WireOp::SendSolicited)
        );
        assert_eq!(w.a.qp.state(), QpState::Connected);
        assert_eq!(w.b.qp.state(), QpState::Connected);
    }
}

/// rule M2 over the wire: tagged Writes and Read responses, and untagged
/// Sends, placed into a region of several spans mapped apart, in FPDUs
/// that start and end anywhere, land exactly across every span boundary;
/// a Read of such a region gathers across them.
#[test]
fn test_spans_placement_across_boundaries_rule_m2() {
    use crate::rnic::testing::Spread;
    for crc in [false, true] {
        let w = Wire::new(100, 37, 13, crc);
        let lens = [0x123, 1, 0x2FF, 0x200];
        let remote = Spread::new(&w.b.pd, &lens, 4, 0x0000_7000_0000_0321, RW);
        let total = remote.total();
        let src = w.a.pattern(0x700, 6, Access::empty());
        let mut model = remote.flat();
        // A Write from inside the first span to inside the last.
        w.a.qp
            .post_write(
                1,
                Payload::Sges(&[src.sge(0, 0x500)]),
                remote.raddr(0x100),
                remote.rkey(),
                WrFlags::empty(),
            )
            .unwrap();
        // A Send into a receive whose SGE spans the middle boundaries.
        w.b.qp
            .post_receive(2, &[remote.sge(0x120, 0x10), remote.sge(0x400, 0x30)])
            .unwrap();
        w.a.qp
            .post_send(
                3,
                Payload::Sges(&[src.sge(0x600, 0x40)]),
                WrFlags::empty(),
                None,
            )
            .unwrap();
        w.pump();
        model[0x100..0x600].copy_from_slice(&src.buffer.bytes()[..0x500]);
        model[0x120..0x130].copy_from_slice(&src.buffer.bytes()[0x600..0x610]);
        model[0x400..0x430].copy_from_slice(&src.buffer.bytes()[0x610..0x640]);
        assert_eq!(remote.flat(), model, "crc {crc}");
        assert!(remote.guards_intact());
        // A Read of the whole region: the responses gather across spans.
        let sink = w.a.buffer(total, 0, Access::LOCAL_WRITE);
        w.a.qp
            .post_read(
                4,
                &[
                    sink.sge(0, 0x200),
                    sink.sge(0x200, u32::try_from(total - 0x200).unwrap()),
                ],
                remote.raddr(0),
                remote.rkey(),
                WrFlags::empty(),
            )
            .unwrap();
        w.pump();
        assert_eq!(sink.buffer.bytes(), &model[..], "crc {crc}");
        expect_done(
            &w.a.scq,
            &[
                ok(1, Opcode::Write),
                ok(3, Opcode::Send),
                ok(4, Opcode::Read),
            ],
        );
        assert_eq!(w.b.rcq.drain().len(), 1);
    }
}

#[test]
fn test_inline_send_and_write() {
    let w = Wire::new(64, 5, 11, false);
    let mut bytes = crate::rnic::testing::Buffer::pattern(200, 9);
    let span = bytes.span();
    let dst = receive_into(&w.b, 1, 256);
    w.a.qp
        .post_send(1, Payload::Inline(&[span]), WrFlags::empty(), None)
        .unwrap();
    w.pump();
    assert_eq!(&dst.buffer.bytes()[..200], bytes.bytes());
    let sink = w.b.buffer(256, 0, RW);
    w.a.qp
        .post_write(
            2,
            Payload::Inline(&[span]),
            sink.raddr(10),
            sink.rkey(),
            WrFlags::empty(),
        )
        .unwrap();
    w.pump();
    assert_eq!(&sink.buffer.bytes()[10..210], bytes.bytes());
    expect_done(&w.a.scq, &[ok(1, Opcode::Send), ok(2, Opcode::Write)]);
}

fn write_then_reads(w: &Wire, reads: usize) -> (Registered, Vec<Registered>) {
    let src = w.a.pattern(500, 5, Access::empty());
    let remote = w.b.buffer(600, 0, RW);
    w.a.qp
        .post_write(
            1,
            Payload::Sges(&[src.sge(0, 200), src.sge(200, 300)]),
            remote.raddr(50),
            remote.rkey(),
            WrFlags::empty(),
        )
        .unwrap();
    let mut sinks = Vec::new();
    for i in 0..reads {
        let sink = w.a.buffer(500, 0, Access::LOCAL_WRITE);
        w.a.qp
            .post_read(
                10 + i,
                &[sink.sge(0, 123), sink.sge(123, 377)],
                remote.raddr(50),
                remote.rkey(),
                WrFlags::empty(),
            )
            .unwrap();
        sinks.push(sink);
    }
    w.pump();
    for sink in &sinks {
        assert_eq!(sink.buffer.bytes(), src.buffer.bytes());
    }
    (remote, sinks)
}

#[test]
fn test_write_and_reads_up_to_ord_in_order_rule_p23_n21() {
    for ord in [1, 2, 4] {
        let w = Wire::with(128, 29, 3, config(true, ord), EngineMode::Inline);
        let _ = write_then_reads(&w, 6);
        let done = summary(&w.a.scq.drain());
        let mut expected = alloc::vec![(1, Opcode::Write, WcStatus::Success)];
        expected.extend((0..6).map(|i| (10 + i, Opcode::Read, WcStatus::Success)));
        assert_eq!(done, expected, "ord {ord}");
        let requests = w
            .crossed(&w.log_ab)
            .iter()
            .filter(|(op, _)| *op == WireOp::ReadRequest)
            .count();
        assert_eq!(requests, 6);
    }
}

#[test]
fn test_deferred_engine_data_path() {
    let w = Wire::with(64, 13, 5, config(false, 2), EngineMode::Deferred);
    let _ = write_then_reads(&w, 3);
    assert_eq!(w.a.scq.drain().len(), 4);
}

#[test]
fn test_zero_length_write_and_read_rule_p19() {
    let w = Wire::new(64, 8, 1, false);
    let remote = w.b.buffer(16, 0, RW);
    w.a.qp
        .post_write(
            1,
            Payload::Sges(&[]),
            remote.raddr(0),
            remote.rkey(),
            WrFlags::empty(),
        )
        .unwrap();
    w.a.qp
        .post_read(2, &[], remote.raddr(0), remote.rkey(), WrFlags::READ_FENCE)
        .unwrap();
    w.pump();
    expect_done(&w.a.scq, &[ok(1, Opcode::Write), ok(2, Opcode::Read)]);
}

#[test]
fn test_send_with_invalidate_of_a_bound_window() {
    let w = Wire::new(256, 64, 9, false);
    let region = w.b.buffer(64, 0, RW);
    let mw = Mw::new(&w.b.pd).unwrap();
    // Bind executes on B's side of the link, in order.
    w.b.qp
        .post_bind(
            1,
            &region.mr,
            &mw,
            region.raddr(0),
            64,
            Access::REMOTE_WRITE,
            WrFlags::empty(),
        )
        .unwrap();
    w.pump();
    expect_done(&w.b.scq, &[ok(1, Opcode::Bind)]);
    let key = mw.remote_key();
    let _dst = receive_into(&w.b, 5, 16);
    let _src = send_pattern(&w.a, 2, 16, 1, Some(key));
    w.pump();
    let got = w.b.rcq.drain();
    assert_eq!(got[0].opcode, Opcode::ReceiveAndInvalidate);
    assert_eq!(got[0].invalidated_key, key);
    assert_eq!(got[0].status, WcStatus::Success);
    // The window no longer takes writes.
    assert!(
        w.b.device
            .resolve_remote(
                &w.b.pd,
                w.b.qp.id(),
                key,
                region.raddr(0),
                1,
                Access::REMOTE_WRITE
            )
            .is_err()
    );
}

// ----- errors --------------------------------------------------------------

#[test]
fn test_write_bad_stag_terminates_rule_m34() {
    for (key_ok, offset, len, cause) in [
        (false, 0, 8, LocalCause::SinkDenied(Denied::Token)),
        (true, 60, 8, LocalCause::SinkDenied(Denied::Range)),
    ] {
        let w = Wire::new(256, 17, 2, true);
        let src = w.a.pattern(8, 1, Access::empty());
        let remote = w.b.buffer(64, 0, RW);
        let _rx = receive_into(&w.b, 9, 8);
        let key = if key_ok {
            remote.rkey()
        } else {
            remote.rkey() ^ 0x40
        };
        w.a.qp
            .post_write(
                1,
                Payload::Sges(&[src.sge(0, len)]),
                remote.raddr(offset),
                key,
                WrFlags::empty(),
            )
            .unwrap();
        let _sink = read_8_from(&w.a, 2, &remote);
        w.pump();
        assert_eq!(w.terminate_ba(), Some(cause.term_code()));
        assert_eq!(w.terminate_ab(), None, "a Terminate is never answered");
        // The Write was taken by the stream: success (siw); the Read behind
        // it is cancelled.
        let done = summary(&w.a.scq.drain());
        assert_eq!(done[0], (1, Opcode::Write, WcStatus::Success));
        assert_eq!(done[1].2, WcStatus::Cancelled);
        assert_eq!(w.a.qp.state(), QpState::Error);
        assert_eq!(w.b.qp.state(), QpState::Error);
        expect_done(&w.b.rcq, &[(9, Opcode::Receive, WcStatus::Cancelled)]);
        assert_eq!(*w.ab.closed.lock().unwrap(), Some(false));
        assert_eq!(*w.ba.closed.lock().unwrap(), Some(false));
    }
}

#[test]
fn test_read_errors_match_local_engine_statuses_rule_p20() {
    for (bad, expected) in [
        ("token", WcStatus::RemoteAccessError),
        ("range", WcStatus::RemoteOperationError),
        ("rights", WcStatus::RemoteAccessError),
    ] {
        let w = Wire::new(256, 31, 4, false);
        let remote = w.b.buffer(64, 0, RW);
        let no_read =
            w.b.buffer(64, 0, Access::LOCAL_WRITE | Access::REMOTE_WRITE);
        let (key, addr, len) = match bad {
            "token" => (remote.rkey() ^ 0x40, remote.raddr(0), 8),
            "range" => (remote.rkey(), remote.raddr(60), 8),
            _ => (no_read.rkey(), no_read.raddr(0), 8),
        };
        let sink = w.a.buffer(8, 0, Access::LOCAL_WRITE);
        w.a.qp
            .post_read(1, &[sink.sge(0, len)], addr, key, WrFlags::empty())
            .unwrap();
        // Fenced, the Send waits for the Read's outcome and is cancelled,
        // as the local engine cancels what follows a failed request.
        w.a.qp
            .post_send(2, Payload::Sges(&[]), WrFlags::READ_FENCE, None)
            .unwrap();
        w.pump();
        assert_eq!(
            summary(&w.a.scq.drain()),
            [
                (1, Opcode::Read, expected),
                (2, Opcode::Send, WcStatus::Cancelled)
            ],
            "{bad}"
        );
        assert_eq!(
            w.terminate_ba().map(|c| c.completion_status()),
            Some(expected)
        );
        assert_eq!(w.a.qp.state(), QpState::Error);
        assert_eq!(w.b.qp.state(), QpState::Error);
    }
}

/// E5: a Terminate concerns a request that went on the wire, never one the
/// runner had not started — here a Send held back until the peer speaks
/// first (RFC 5044); on the deferred engine, likewise a Send posted after
/// the abort was indicated, before the runner wound down. It completes
/// cancelled, not with the Terminate's status.
#[test]
fn test_terminate_spares_a_request_not_yet_sent_rule_e5() {
    let waits = LinkConfig {
        receive_first: true,
        ..config(false, 4)
    };
    let w = Wire::with_configs(256, 64, 7, (waits, config(false, 4)), EngineMode::Inline);
    w.a.qp
        .post_send(1, Payload::Sges(&[]), WrFlags::empty(), None)
        .unwrap();
    w.pump();
    assert!(w.a.scq.drain().is_empty());
    w.b.qp.terminate();
    w.pump();
    assert_eq!(w.terminate_ba(), Some(LocalCause::Catastrophic.term_code()));
    expect_done(&w.a.scq, &[(1, Opcode::Send, WcStatus::Cancelled)]);
    assert_eq!(w.a.qp.state(), QpState::Error);
}

#[test]
fn test_reads_beyond_ird_terminate_rule_n21() {
    let cfg = LinkConfig {
        ird: 1,
        ..config(false, 4)
    };
    let w = Wire::with(8, 8, 21, cfg, EngineMode::Inline);
    let remote = w.b.buffer(2000, 0, RW);
    let sinks = read_sinks(&w.a, 4, 2000);
    for (i, sink) in sinks.iter().enumerate() {
        w.a.qp
            .post_read(
                i,
                &[sink.sge(0, 2000)],
                remote.raddr(0),
                remote.rkey(),
                WrFlags::empty(),
            )
            .unwrap();
    }
    w.pump();
    let code = w.terminate_ba().unwrap();
    assert_eq!(code, LocalCause::IrdExceeded.term_code());
    // The Terminate names the second Read Request (MSN 2): it fails, the
    // first (not fully answered) and the rest are cancelled.
    expect_done(
        &w.a.scq,
        &[
            (0, Opcode::Read, WcStatus::Cancelled),
            (1, Opcode::Read, WcStatus::RemoteOperationError),
            (2, Opcode::Read, WcStatus::Cancelled),
            (3, Opcode::Read, WcStatus::Cancelled),
        ],
    );
}

#[test]
fn test_flush_closes_the_stream_rule_e1() {
    let w = Wire::new(256, 64, 4, false);
    let _dst = receive_into(&w.a, 1, 8);
    w.b.qp.flush();
    w.pump();
    assert_eq!(*w.ba.closed.lock().unwrap(), Some(false));
    assert_eq!(w.a.qp.state(), QpState::Error);
    expect_done(&w.a.rcq, &[(1, Opcode::Receive, WcStatus::Cancelled)]);
}

#[test]
fn test_send_without_receive_terminates() {
    let w = Wire::new(256, 64, 4, false);
    let _src = send_pattern(&w.a, 1, 8, 1, None);
    w.pump();
    assert_eq!(
        w.terminate_ba(),
        Some(TermCode::ddp(
            ddp_etype::UNTAGGED_BUFFER,
            ddp_code::U_NO_BUFFER
        ))
    );
    expect_done(&w.a.scq, &[ok(1, Opcode::Send)]);
    assert_eq!(w.a.qp.state(), QpState::Error);
    assert_eq!(w.b.qp.state(), QpState::Error);
}

/// A Terminate arriving while the runner retires completed requests: the
/// status must land on the request the Terminate names, not on a neighbour
/// (or on a slot already retired). The hook runs the runner between the
/// Terminate's receipt and the application of its outcome, the moment the
/// old receive-side lookup raced with retirement.
#[test]
fn test_terminate_status_lands_on_its_request_while_runner_retires_rule_e5() {
    // Room for the Read Request (52 bytes), S1 (24) and 10 bytes of S2: S2
    // stays sent-but-not-taken, S3 waits behind it.
    let window = mpa::fpdu_len(46) + 2 * mpa::fpdu_len(18) - 14;
    let w = Wire::with(window, 64, 1, config(false, 4), EngineMode::Deferred);
    let sink = w.a.buffer(8, 0, Access::LOCAL_WRITE);
    w.a.qp
        .post_read(0, &[sink.sge(0, 8)], 0x1000, 0x77, WrFlags::empty())
        .unwrap();
    for ctx in 1..=3 {
        w.a.qp
            .post_send(ctx, Payload::Sges(&[]), WrFlags::empty(), None)
            .unwrap();
    }
    crate::kernel::deferred::flush();
    assert!(w.a.scq.drain().is_empty(), "all wait behind the Read");
    // The peer answers the Read, then terminates naming a Send.
    let mut bytes = alloc::vec![0_u8; 256];
    let sge = sink.sge(0, 8);
    let mut n = Message::ReadResponse {
        stag: sge.key,
        to: sge.addr,
        last: true,
        payload: &[5; 8],
    }
    .write_fpdu(&mut bytes, false)
    .unwrap();
    let mut send = [0_u8; 64];
    let send_len = Message::Send {
        header: SendHeader::whole(3),
        payload: &[],
    }
    .write_ulpdu(&mut send)
    .unwrap();
    let code = LocalCause::NoReceive.term_code();
    let mut terminate = Terminate::new(code);
    terminate.segment_len = u16::try_from(send_len).ok();
    terminate.ddp_header = Some(&send[..send_len]);
    n += Message::Terminate { msn: 1, terminate }
        .write_fpdu(&mut bytes[n..], false)
        .unwrap();
    // After each ULPDU, the runner runs to completion (it retires the Read
    // and S1 once the Response is placed, and winds down after the
    // Terminate) before the receive side goes on.
    hook::set(
        Point::AfterUlpdu,
        alloc::boxed::Box::new(crate::kernel::deferred::flush),
    );
    w.la.receive(&bytes[..n]);
    hook::clear();
    crate::kernel::deferred::flush();
    let status = code.completion_status();
    assert!(!matches!(status, WcStatus::Success | WcStatus::Cancelled));
    expect_done(
        &w.a.scq,
        &[
            ok(0, Opcode::Read),
            ok(1, Opcode::Send),
            (2, Opcode::Send, status),
            (3, Opcode::Send, WcStatus::Cancelled),
        ],
    );
    assert_eq!(sink.buffer.bytes(), &[5; 8]);
    assert_eq!(w.a.qp.state(), QpState::Error);
}

#[test]
fn test_send_too_long_fails_receive_rule_e7() {
    let w = Wire::new(256, 64, 4, false);
    let _dst = receive_twice_into(&w.b, 64);
    let _src = send_pattern(&w.a, 1, 100, 1, None);
    w.pump();
    assert_eq!(
        w.terminate_ba(),
        Some(TermCode::ddp(
            ddp_etype::UNTAGGED_BUFFER,
            ddp_code::U_TOO_LONG
        ))
    );
    // As the local engine: the receive reports E7's status, the rest cancel.
    expect_done(
        &w.b.rcq,
        &[
            (1, Opcode::Receive, WcStatus::ReceiveTooSmall),
            (2, Opcode::Receive, WcStatus::Cancelled),
        ],
    );
}

#[test]
fn test_send_invalidate_of_bad_key_rule_m24() {
    let w = Wire::new(256, 64, 4, false);
    let src = w.a.pattern(8, 1, Access::empty());
    let _dst = receive_into(&w.b, 1, 8);
    w.a.qp
        .post_send(
            1,
            Payload::Sges(&[src.sge(0, 8)]),
            WrFlags::empty(),
            Some(0x8000_1234),
        )
        .unwrap();
    w.pump();
    assert_eq!(
        w.terminate_ba(),
        Some(LocalCause::CannotInvalidate.term_code())
    );
    expect_done(&w.b.rcq, &[(1, Opcode::Receive, WcStatus::InvalidRequest)]);
}

#[test]
fn test_bad_crc_terminates() {
    let w = Wire::new(256, 64, 4, true);
    let _dst = receive_into(&w.b, 1, 8);
    let _src = send_pattern(&w.a, 1, 8, 1, None);
    // Corrupt a payload byte in transit.
    {
        let mut q = w.ab.bytes.lock().unwrap();
        let at = q.len() - 6;
        q[at] ^= 1;
    }
    w.pump();
    let code = w.terminate_ba().unwrap();
    assert_eq!(code.layer, crate::rnic::iwarp::terminate::Layer::Llp);
    expect_done(&w.b.rcq, &[(1, Opcode::Receive, WcStatus::Cancelled)]);
    assert_eq!(w.b.qp.state(), QpState::Error);
    assert_eq!(w.a.qp.state(), QpState::Error);
}

#[test]
fn test_malformed_segment_terminates() {
    let w = Wire::new(256, 64, 4, false);
    // An FPDU whose DDP version is 0.
    let mut fpdu = [0_u8; 64];
    let n = mpa::write_fpdu(
        &mut fpdu,
        &[0x80, 0x41, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0],
        false,
    )
    .unwrap();
    w.lb.receive(&fpdu[..n]);
    w.pump();
    let code = w.terminate_ba().unwrap();
    assert_eq!(code.completion_status(), WcStatus::RemoteOperationError);
    assert_eq!(w.b.qp.state(), QpState::Error);
}

#[test]
fn test_local_error_sends_terminate() {
    let w = Wire::new(256, 64, 4, false);
    let remote = w.b.buffer(8, 0, RW);
    let bad = crate::rnic::types::Sge {
        addr: 0,
        len: 8,
        key: 0x1234,
    };
    w.a.qp
        .post_write(
            1,
            Payload::Sges(&[bad]),
            remote.raddr(0),
            remote.rkey(),
            WrFlags::empty(),
        )
        .unwrap();
    w.pump();
    expect_done(&w.a.scq, &[(1, Opcode::Write, WcStatus::LocalAccessError)]);
    assert_eq!(w.terminate_ab(), Some(LocalCause::Catastrophic.term_code()));
    assert_eq!(w.b.qp.state(), QpState::Error);
}

// ----- after setup -----------------------------------------------------------

/// Runs `iwarp::setup` in memory, the initiator offering `rtr`: both sides'
/// outcomes, and the bytes the responder still sends (a Read RTR's
/// response), which start its data stream.
fn setup_pair(rtr: RtrKinds) -> (Established, Established, Vec<u8>) {
    let icfg = InitiatorConfig {
        ird: 4,
        ord: 4,
        rtr,
        ..InitiatorConfig::default()
    };
    let mut i = Initiator::new(&icfg, &[], 0).unwrap();
    let mut r = Responder::new(ResponderConfig::default(), 0);
    let request = i.output().to_vec();
    i.advance_output(request.len());
    assert!(matches!(
        r.receive(&request, 0).unwrap(),
        Some(SetupEvent::Request(_))
    ));
    let mut r_done = r.accept(4, 4, &[], 0).unwrap();
    let reply = r.output().to_vec();
    r.advance_output(reply.len());
    let Some(SetupEvent::Established(ei)) = i.receive(&reply, 0).unwrap() else {
        panic!("initiator not established");
    };
    let rtr_bytes = i.output().to_vec();
    i.advance_output(rtr_bytes.len());
    if !rtr_bytes.is_empty() {
        r_done = r.receive(&rtr_bytes, 0).unwrap();
    }
    let Some(SetupEvent::Established(er)) = r_done else {
        panic!("responder not established");
    };
    let tail = r.output().to_vec();
    (ei, er, tail)
}

#[test]
fn test_data_path_after_setup_with_each_rtr() {
    for rtr in [
        RtrKinds::empty(),
        RtrKinds::SEND,
        RtrKinds::READ,
        RtrKinds::WRITE,
    ] {
        let (ei, er, tail) = setup_pair(rtr);
        let ca = LinkConfig::established(&ei, true, MULPDU, 1024, (4, 4));
        let cb = LinkConfig::established(&er, false, MULPDU, 1024, (4, 4));
        assert_eq!(cb.receive_first, rtr.is_empty(), "{rtr:?}");
        let w = Wire::with_configs(64, 16, 3, (ca, cb), EngineMode::Inline);
        w.la.receive(&tail);
        // B speaks first: without RTR it waits for A's first FPDU.
        let a_in = receive_into(&w.a, 1, 64);
        let b_src = w.b.pattern(64, 4, RW);
        w.b.qp
            .post_send(
                1,
                Payload::Sges(&[b_src.sge(0, 64)]),
                WrFlags::empty(),
                None,
            )
            .unwrap();
        w.pump();
        let waited = w.log_ba.lock().unwrap().is_empty();
        assert_eq!(waited, rtr.is_empty(), "{rtr:?}");
        // A: a Send (MSN after a Send RTR) and Reads (MSN after a Read RTR,
        // ORD shared with the RTR's outstanding response).
        let b_in = receive_into(&w.b, 2, 64);
        let src = send_pattern(&w.a, 2, 64, 2, None);
        let sinks = read_sinks(&w.a, 5, 64);
        for (n, sink) in sinks.iter().enumerate() {
            w.a.qp
                .post_read(
                    10 + n,
                    &[sink.sge(0, 64)],
                    b_src.raddr(0),
                    b_src.rkey(),
                    WrFlags::empty(),
                )
                .unwrap();
        }
        w.pump();
        assert_eq!(w.terminate_ab(), None, "{rtr:?}");
        assert_eq!(w.terminate_ba(), None, "{rtr:?}");
        let done = summary(&w.a.scq.drain());
        assert_eq!(done.len(), 6, "{rtr:?}");
        assert!(
            done.iter().all(|d| d.2 == WcStatus::Success),
            "{rtr:?} {done:?}"
        );
        assert_eq!(b_in.buffer.bytes(), src.buffer.bytes());
        assert_eq!(a_in.buffer.bytes(), b_src.buffer.bytes());
        for sink in &sinks {
            assert_eq!(sink.buffer.bytes(), b_src.buffer.bytes());
        }
        expect_done(&w.b.scq, &[ok(1, Opcode::Send)]);
    }
}

// ----- close ---------------------------------------------------------------

#[test]
fn test_disconnect_both_ways_rule_x2() {
    for a_first in [true, false] {
        let w = Wire::new(256, 64, 4, false);
        let _dst = receive_into(&w.b, 1, 8);
        let (here, there, pipe) = if a_first {
            (&w.a, &w.b, &w.ab)
        } else {
            (&w.b, &w.a, &w.ba)
        };
        here.qp.disconnect();
        assert_eq!(*pipe.closed.lock().unwrap(), Some(false));
        w.pump();
        assert_eq!(here.qp.state(), QpState::Disconnected);
        assert_eq!(there.qp.state(), QpState::Error);
        expect_done(&w.b.rcq, &[(1, Opcode::Receive, WcStatus::Cancelled)]);
        assert_eq!(w.terminate_ab(), None);
        assert_eq!(w.terminate_ba(), None);
    }
}

#[test]
fn test_peer_reset_fails_connection_rule_e5() {
    let w = Wire::new(256, 64, 4, false);
    let remote = w.b.buffer(8, 0, RW);
    let _sink = read_8_from(&w.a, 1, &remote);
    w.la.peer_closed(true);
    w.pump();
    expect_done(&w.a.scq, &[(1, Opcode::Read, WcStatus::Cancelled)]);
    assert_eq!(w.a.qp.state(), QpState::Error);
}

// ----- the same scenario over both fabrics -----------------------------------

/// Initiator completions of one side, and (context, bytes, solicited) of the
/// other side's receives.
type Seen = (Vec<(usize, Opcode, WcStatus)>, Vec<(usize, u32, bool)>);

/// Send, Write and Read between `a` and `b`; returns what each side saw.
fn scenario(a: &Side, b: &Side, settle: &dyn Fn()) -> Seen {
    let src = a.pattern(200, 1, Access::empty());
    let dst = receive_into(b, 7, 256);
    a.qp.post_send(
        1,
        Payload::Sges(&[src.sge(0, 200)]),
        WrFlags::SOLICITED,
        None,
    )
    .unwrap();
    a.write_to(2, &[src.sge(0, 100)], &dst, 100, WrFlags::empty())
        .unwrap();
    let back = a.buffer(156, 0, Access::LOCAL_WRITE);
    a.qp.post_read(
        3,
        &[back.sge(0, 156)],
        dst.raddr(100),
        dst.rkey(),
        WrFlags::empty(),
    )
    .unwrap();
    a.qp.post_read(
        4,
        &[back.sge(0, 8)],
        dst.raddr(250),
        dst.rkey(),
        WrFlags::empty(),
    )
    .unwrap();
    settle();
    let received = b
        .rcq
        .drain()
        .iter()
        .map(|c| (c.request_context, c.bytes, c.solicited))
        .collect();
    (summary(&a.scq.drain()), received)
}

#[test]
fn test_same_observable_behaviour_as_local_fabric() {
    let Pair { a, b } = Pair::apart(EngineMode::Inline);
    qp::connect(&a.qp, &b.qp, (4, 4), (4, 4)).unwrap();
    let local = scenario(&a, &b, &|| {});
    let w = Wire::new(96, 23, 77, true);
    let wire = scenario(&w.a, &w.b, &|| w.pump());
    assert_eq!(local, wire);
    // The last Read leaves the region: RemoteOperationError (P20) both ways.
    assert_eq!(wire.0[3].2, WcStatus::RemoteOperationError);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn prop_random_chunking_and_window(seed in any::<u64>(), window in 1_usize..200, chunk in 1_usize..100, crc in any::<bool>()) {
        let w = Wire::new(window, chunk, seed, crc);
        let src = w.a.pattern(333, 2, Access::empty());
        let dst = receive_into(&w.b, 1, 400);
        w.a.qp.post_send(1, Payload::Sges(&[src.sge(0, 333)]), WrFlags::empty(), None).unwrap();
        let (_, sinks) = write_then_reads(&w, 3);
        prop_assert_eq!(&dst.buffer.bytes()[..333], src.buffer.bytes());
        prop_assert_eq!(sinks.len(), 3);
        let done = w.a.scq.drain();
        prop_assert_eq!(done.len(), 5);
        prop_assert!(done.iter().all(|c| c.status == WcStatus::Success));
        let contexts: Vec<usize> = done.iter().map(|c| c.request_context).collect();
        prop_assert_eq!(contexts, alloc::vec![1, 1, 10, 11, 12]);
        prop_assert_eq!(w.b.rcq.drain().len(), 1);
    }
}

/// The request contexts of every entry a CQ holds now (taken out).
fn contexts(cq: &crate::rnic::cq::Cq) -> Vec<(usize, WcStatus)> {
    crate::rnic::testing::drain(cq)
        .iter()
        .map(|c| (c.request_context, c.status))
        .collect()
}

/// The entries a CQ held when a close completed, once it has.
type AtClose = Arc<Mutex<Option<Vec<(usize, WcStatus)>>>>;

/// Closes `side`'s QP and records the entries of its receive CQ at the
/// moment the close completes (at once, or in its completion).
/// Expects the close recorded by [`close_and_record`] to have completed,
/// the CQ then holding `expected` (request context, status), in order.
#[track_caller]
fn expect_at_close(at_close: &AtClose, expected: &[(usize, WcStatus)], case: impl Debug) {
    let seen = at_close.lock().unwrap().clone();
    assert_eq!(
        seen.as_deref(),
        Some(expected),
        "{case:?}: when the close completed"
    );
}

fn close_and_record(side: &Side, at_close: &AtClose) {
    let cq = Arc::clone(&side.rcq.cq);
    let record = Arc::clone(at_close);
    let progress = side.qp.close_with(alloc::boxed::Box::new(move || {
        *record.lock().unwrap() = Some(contexts(&cq));
    }));
    if progress == crate::rnic::mr::Progress::Done {
        *at_close.lock().unwrap() = Some(contexts(&side.rcq.cq));
    }
}

/// P6, L21 (the fuzzer's finding over iWARP with two threads): the receive
/// side takes a receive for an incoming Send on the stream's thread and
/// completes it after leaving the link's locks; a close of the QP on the
/// consumer's thread in between (here: in the receive path's hook, exactly
/// there) used to complete at once — the receive was no longer in the
/// queue for the close to cancel — and the entry came after the close, or
/// was never seen. The close now completes only once that entry is in the
/// CQ, and it is there exactly once.
#[test]
fn test_close_waits_for_a_receive_being_placed_rule_l21() {
    let w = Wire::new(1024, 64, 5, false);
    let dst = receive_twice_into(&w.b, 64);
    let src = send_pattern(&w.a, 10, 16, 1, None);
    let bytes: Vec<u8> = w.ab.bytes.lock().unwrap().drain(..).collect();
    assert!(!bytes.is_empty(), "the Send's FPDU is on the wire");
    let at_close: AtClose = Arc::new(Mutex::new(None));
    let closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (qp, cq) = (Arc::clone(&w.b.qp), Arc::clone(&w.b.rcq.cq));
    let (record, fired) = (Arc::clone(&at_close), Arc::clone(&closed));
    // The consumer's close lands between the Send's handling (its receive
    // taken) and the receive's completion.
    hook::set(
        Point::AfterUlpdu,
        alloc::boxed::Box::new(move || {
            if fired.swap(true, std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            let (finish_cq, finish_record) = (Arc::clone(&cq), Arc::clone(&record));
            let progress = qp.close_with(alloc::boxed::Box::new(move || {
                *finish_record.lock().unwrap() = Some(contexts(&finish_cq));
            }));
            if progress == crate::rnic::mr::Progress::Done {
                // Completed inside the window: what the CQ held then.
                *record.lock().unwrap() = Some(contexts(&cq));
            }
        }),
    );
    w.lb.receive(&bytes);
    hook::clear();
    crate::kernel::deferred::flush();
    assert!(closed.load(std::sync::atomic::Ordering::SeqCst));
    // P23: every receive's entry is in the CQ when the close completes, in
    // post order.
    expect_at_close(
        &at_close,
        &[(1, WcStatus::Success), (2, WcStatus::Cancelled)],
        "P23",
    );
    assert!(contexts(&w.b.rcq.cq).is_empty(), "and none after it");
    assert!(w.b.qp.is_quiescent());
    assert_eq!(&dst.buffer.bytes()[..16], src.buffer.bytes());
}

/// L18, L21 (found by the fuzzer on the deferred fabric; this is the same
/// window over iWARP): a Send arrives for a QP that takes its receives from
/// an SRQ, and the take counts itself before it reads the QP's state. The
/// consumer's close lands right there (the hook): it sees the count and
/// goes pending. The take then backs off, since the QP left `Connected`.
/// On the fabric nothing finished that close, so it never completed and
/// the adapter's close waited for ever. Over iWARP two things finish it
/// once the take backed off: the receive side, having failed the Send (a
/// Terminate), with no lock held; and the QP's runner, whose wind-down
/// waits for the receive side's lock. The receive stays in the SRQ,
/// reported by no QP (E4).
#[test]
fn test_close_while_an_srq_take_backs_off_completes_rule_l18_l21() {
    // Deferred: the close's disconnect hands the runner to a worker (an
    // inline runner would wait on the receive side's lock, held here).
    let mode = EngineMode::Deferred;
    let pd = Pd::new(&Device::new(Limits::DEFAULT, mode).unwrap()).unwrap();
    let srq = Srq::new(&pd, 4, 1, 0, None).unwrap();
    let b = Side::custom(&pd, TestCq::new(16), TestCq::new(16), Some(&srq), 0xB);
    let a = Pair::apart(EngineMode::Inline).a;
    let w = Wire::joining(
        Pair { a, b },
        1024,
        64,
        9,
        (config(false, 4), config(false, 4)),
    );
    let dst = w.b.buffer(64, 0, RW);
    srq.post_receive(1, &[dst.sge(0, 64)]).unwrap();
    send_pattern(&w.a, 10, 16, 1, None);
    let bytes: Vec<u8> = w.ab.bytes.lock().unwrap().drain(..).collect();
    assert!(!bytes.is_empty(), "the Send's FPDU is on the wire");
    let closed = Arc::new(Mutex::new((None, 0)));
    let (qp, record) = (Arc::clone(&w.b.qp), Arc::clone(&closed));
    hook::set(
        Point::SrqTakeCounted,
        alloc::boxed::Box::new(move || {
            if record.lock().unwrap().0.is_some() {
                return;
            }
            let finished = Arc::clone(&record);
            let progress = qp.close_with(alloc::boxed::Box::new(move || {
                finished.lock().unwrap().1 += 1;
            }));
            record.lock().unwrap().0 = Some(progress);
        }),
    );
    w.lb.receive(&bytes);
    hook::clear();
    crate::kernel::deferred::flush();
    let (progress, finished) = core::mem::take(&mut *closed.lock().unwrap());
    assert_eq!(
        progress,
        Some(crate::rnic::mr::Progress::Pending),
        "the close came inside the take's window and saw its count"
    );
    assert_eq!(finished, 1, "L18, L21: the pending close completed, once");
    assert!(w.b.qp.is_quiescent());
    assert!(contexts(&w.b.rcq.cq).is_empty(), "E4: no entry on B's CQ");
    assert_eq!(srq.len(), 1, "E4: the receive stays in the SRQ");
    assert_eq!(srq.attached(), 0, "the closed QP left the SRQ");
}

/// P6, L21, E5: a message whose first segment landed holds its receive
/// until its last one; when the QP is closed in between, the receive
/// completes cancelled before the close completes (it used to be lost: the
/// receive side stops placing once the QP has left `Connected`, and the
/// close's flush no longer saw it).
#[test]
fn test_close_between_segments_cancels_the_held_receive_rule_l21() {
    for mode in [EngineMode::Inline, EngineMode::Deferred] {
        let w = Wire::with(4096, 64, 6, config(false, 4), mode);
        let src = w.a.pattern(200, 1, Access::empty());
        let dst = receive_into(&w.b, 1, 256);
        w.b.qp.post_receive(2, &[dst.sge(0, 256)]).unwrap();
        w.a.qp
            .post_send(
                10,
                Payload::Sges(&[src.sge(0, 200)]),
                WrFlags::empty(),
                None,
            )
            .unwrap();
        crate::kernel::deferred::flush();
        // The first of the message's FPDUs only (a full one: MULPDU bytes).
        let first: Vec<u8> =
            w.ab.bytes
                .lock()
                .unwrap()
                .drain(..mpa::fpdu_len(usize::from(MULPDU)))
                .collect();
        w.lb.receive(&first);
        crate::kernel::deferred::flush();
        assert!(contexts(&w.b.rcq.cq).is_empty(), "the message is not whole");
        let at_close = Arc::new(Mutex::new(None));
        close_and_record(&w.b, &at_close);
        crate::kernel::deferred::flush();
        // Every receive has its entry when the close completes, in post order.
        expect_at_close(
            &at_close,
            &[(1, WcStatus::Cancelled), (2, WcStatus::Cancelled)],
            mode,
        );
        // The rest of the message finds the QP closed: nothing more.
        let rest: Vec<u8> = w.ab.bytes.lock().unwrap().drain(..).collect();
        w.lb.receive(&rest);
        crate::kernel::deferred::flush();
        assert!(contexts(&w.b.rcq.cq).is_empty(), "{mode:?}");
    }
}

// ----- a hostile peer, at random --------------------------------------------

/// What the hostile peer sends B: a message with fields drawn around what B
/// registered (an STag of B's, a tagged offset just inside or outside a
/// region, a length that runs past its end, any MSN), or bytes that are no
/// FPDU. Most messages are first made valid ([`Peer::valid`]), so that the
/// connection lives long enough for the next ones to matter.
#[derive(Clone, Debug)]
enum Hostile {
    /// A tagged segment: an RDMA Write's, or (`response`) a Read
    /// Response's.
    Tagged {
        response: bool,
        stag: u8,
        to: i64,
        len: u16,
        last: bool,
    },
    ReadRequest {
        msn: u32,
        source: u8,
        to: i64,
        size: u16,
    },
    Send {
        msn: u32,
        mo: u16,
        len: u16,
        last: bool,
        invalidate: Option<u8>,
    },
    Terminate {
        msn: u32,
    },
    Garbage(Vec<u8>),
}

fn hostile() -> impl Strategy<Value = (bool, Hostile)> {
    // Offsets and lengths gather at the regions' ends (600 bytes from the
    // base), keys at the read-write region's (pick 0) and the read-only
    // one's (pick 1): where a check that is off by a few bytes shows.
    let to = || prop_oneof![-16_i64..16, 570_i64..610, -80_i64..700];
    let len = || prop_oneof![0_u16..40, 0_u16..300];
    let stag = || prop_oneof![2 => Just(0_u8), 1 => Just(1_u8), 3 => any::<u8>()];
    let message = prop_oneof![
        5 => (proptest::bool::weighted(0.2), stag(), to(), len(), any::<bool>()).prop_map(
            |(response, stag, to, len, last)| Hostile::Tagged { response, stag, to, len, last }
        ),
        2 => (0_u32..6, stag(), to(), prop_oneof![len(), 0_u16..1200]).prop_map(
            |(msn, source, to, size)| Hostile::ReadRequest { msn, source, to, size }
        ),
        4 => (0_u32..8, 0_u16..600, 0_u16..1100, any::<bool>(), any::<Option<u8>>()).prop_map(
            |(msn, mo, len, last, invalidate)| Hostile::Send { msn, mo, len, last, invalidate }
        ),
        1 => (0_u32..3).prop_map(|msn| Hostile::Terminate { msn }),
        1 => proptest::collection::vec(any::<u8>(), 1..40).prop_map(Hostile::Garbage),
    ];
    (proptest::bool::weighted(0.9), message)
}

/// B's memory the peer aims at: a region it may write and read, one it may
/// only read, one it may not touch (local access only), and the inbox its
/// receives name. Each part of each has guard bytes around it.
struct Target {
    rw: crate::rnic::testing::Spread,
    ro: crate::rnic::testing::Spread,
    local: crate::rnic::testing::Spread,
    inbox: crate::rnic::testing::Spread,
    base: u64,
}

impl Target {
    fn regions(&self) -> [&crate::rnic::testing::Spread; 4] {
        [&self.rw, &self.ro, &self.local, &self.inbox]
    }

    /// An STag the peer names: one of B's four regions' (remote or local
    /// key), or a made-up one.
    fn stag(&self, pick: u8) -> u32 {
        let region = self.regions()[usize::from(pick % 4)];
        match pick / 4 % 4 {
            0 => region.rkey(),
            1 => region.mr.local_key().unwrap_or(0),
            2 => region.rkey() ^ 0x100,
            _ => u32::from(pick).wrapping_mul(0x0101_0101),
        }
    }

    fn guards_intact(&self) -> bool {
        self.regions().iter().all(|spread| spread.guards_intact())
    }
}

impl Hostile {
    /// Whether B must end the connection for it, whatever came before (a
    /// message that may be valid, or bytes that may leave an FPDU
    /// unfinished, are not): a Write through a key other than the
    /// read-write region's, or past its ends; a Read Request of a region
    /// that does not allow it, or past its ends; a Read Response (B asked
    /// for nothing); a Terminate.
    fn surely_invalid(&self, target: &Target) -> bool {
        let outside = |to: i64, len: u16| to < 0 || to + i64::from(len) > 600;
        match *self {
            Hostile::Tagged {
                response,
                stag,
                to,
                len,
                ..
            } => response || target.stag(stag) != target.rw.rkey() || outside(to, len),
            Hostile::ReadRequest {
                source, to, size, ..
            } => {
                let stag = target.stag(source);
                (stag != target.rw.rkey() && stag != target.ro.rkey()) || outside(to, size)
            }
            Hostile::Terminate { .. } => true,
            Hostile::Send { .. } | Hostile::Garbage(_) => false,
        }
    }
}

/// The peer's side of the stream: the next MSN of each untagged queue.
struct Peer {
    send_msn: u32,
    read_msn: u32,
    terminate_msn: u32,
    crc: bool,
}

impl Peer {
    /// `message` made valid for B: a Write through the read-write region's
    /// key with the bytes inside it, the queues' next MSNs, whole Sends
    /// that fit a receive; Read Requests of B's regions that allow it. What
    /// cannot be valid (a Read Response B did not ask for, a Terminate,
    /// bytes that are no FPDU) becomes a Write.
    fn valid(&self, message: &Hostile) -> Hostile {
        let room = |to: i64, len: u16| {
            let len = len.min(600);
            (to.rem_euclid(i64::from(600 - len) + 1), len)
        };
        match *message {
            Hostile::Tagged { to, len, .. } => {
                let (to, len) = room(to, len);
                Hostile::Tagged {
                    response: false,
                    stag: 0,
                    to,
                    len,
                    last: true,
                }
            }
            Hostile::ReadRequest {
                source, to, size, ..
            } => {
                let (to, size) = room(to, size);
                Hostile::ReadRequest {
                    msn: self.read_msn,
                    source: source % 2,
                    to,
                    size,
                }
            }
            Hostile::Send { len, .. } => Hostile::Send {
                msn: self.send_msn,
                mo: 0,
                len: len.min(180),
                last: true,
                invalidate: None,
            },
            Hostile::Terminate { .. } | Hostile::Garbage(_) => Hostile::Tagged {
                response: false,
                stag: 0,
                to: 0,
                len: 8,
                last: true,
            },
        }
    }

    /// The bytes of `message`, and the MSNs it uses up.
    fn bytes(&mut self, target: &Target, message: &Hostile) -> Vec<u8> {
        let payload = alloc::vec![0xA5_u8; 1100];
        let at = |to: i64| target.base.wrapping_add_signed(to);
        let message = match message {
            Hostile::Tagged {
                response,
                stag,
                to,
                len,
                last,
            } => {
                let (stag, to, last) = (target.stag(*stag), at(*to), *last);
                let payload = &payload[..usize::from(*len)];
                if *response {
                    Message::ReadResponse {
                        stag,
                        to,
                        last,
                        payload,
                    }
                } else {
                    Message::Write {
                        stag,
                        to,
                        last,
                        payload,
                    }
                }
            }
            Hostile::ReadRequest {
                msn,
                source,
                to,
                size,
            } => {
                self.read_msn = self.read_msn.max(msn.wrapping_add(1));
                Message::ReadRequest {
                    msn: *msn,
                    request: crate::rnic::iwarp::rdmap::ReadRequest {
                        sink_stag: 0x4242_0100,
                        sink_to: 0,
                        size: u32::from(*size),
                        source_stag: target.stag(*source),
                        source_to: at(*to),
                    },
                }
            }
            Hostile::Send {
                msn,
                mo,
                len,
                last,
                invalidate,
            } => {
                if *last {
                    self.send_msn = self.send_msn.max(msn.wrapping_add(1));
                }
                Message::Send {
                    header: SendHeader {
                        solicited: false,
                        invalidate: invalidate.map(|pick| target.stag(pick)),
                        msn: *msn,
                        mo: u32::from(*mo),
                        last: *last,
                    },
                    payload: &payload[..usize::from(*len)],
                }
            }
            Hostile::Terminate { msn } => {
                self.terminate_msn = self.terminate_msn.max(msn.wrapping_add(1));
                Message::Terminate {
                    msn: *msn,
                    terminate: Terminate::new(TermCode::rdmap(
                        crate::rnic::iwarp::terminate::rdmap_etype::REMOTE_OPERATION,
                        crate::rnic::iwarp::terminate::rdmap_code::UNSPECIFIED,
                    )),
                }
            }
            Hostile::Garbage(bytes) => return bytes.clone(),
        };
        let mut buf = alloc::vec![0_u8; mpa::fpdu_len(message.ulpdu_len())];
        let n = message.write_fpdu(&mut buf, self.crc).unwrap();
        buf.truncate(n);
        buf
    }
}

/// Runs B's side alone: deferred work, and B's output taken and dropped
/// (the peer reads everything and answers nothing), until nothing moves
/// (bounded).
fn run_b_alone(w: &Wire) {
    for _ in 0..10_000 {
        crate::kernel::deferred::flush();
        let moved = !w
            .ba
            .bytes
            .lock()
            .unwrap()
            .drain(..)
            .collect::<Vec<u8>>()
            .is_empty();
        w.lb.writable();
        if !moved {
            crate::kernel::deferred::flush();
            return;
        }
    }
    panic!("B's output did not settle");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Issue 8 (a hostile peer: every field checked before it is used): a
    /// peer sends B's link messages aimed at B's regions — Writes and Read
    /// Responses through B's keys, its local keys, wrong and made-up ones,
    /// at offsets around each region's ends; Read Requests; Sends with any
    /// MSN, offset, length and invalidation; Terminates; bytes that are no
    /// FPDU — in random chunks, most of them valid so that the connection
    /// lives on. Nothing may be written outside a region (the guard
    /// bytes), nor into the region the peer may only read or may not touch
    /// at all (M34); B's close then gives each of B's posted receives
    /// exactly one entry (P6, L21); nothing panics.
    #[test]
    fn prop_a_hostile_peer_writes_only_where_it_may_rule_m34_p6(
        messages in proptest::collection::vec(hostile(), 1..32),
        seed in any::<u64>(),
        crc in any::<bool>(),
        receives in 0_usize..13,
    ) {
        let w = Wire::new(1 << 16, 97, seed, crc);
        let remote = Access::REMOTE_WRITE | Access::REMOTE_READ | Access::LOCAL_WRITE;
        let base = 0x7000_u64;
        let spread = |lens: &[usize], seed, access| {
            crate::rnic::testing::Spread::new(&w.b.pd, lens, seed, base, access)
        };
        let target = Target {
            rw: spread(&[200, 300, 100], 1, remote),
            ro: spread(&[600], 2, Access::REMOTE_READ),
            local: spread(&[600], 3, Access::LOCAL_WRITE),
            inbox: spread(&[700, 400, 1100], 4, Access::LOCAL_WRITE),
            base,
        };
        let (ro_before, local_before) = (target.ro.flat(), target.local.flat());
        for ctx in 1..=receives {
            let at = ((ctx - 1) * 180) as u64;
            w.b.qp.post_receive(ctx, &[target.inbox.sge(at, 180)]).unwrap();
        }
        let mut peer = Peer { send_msn: 1, read_msn: 1, terminate_msn: 1, crc };
        let mut stream = Vec::new();
        // What B must make of the whole: a surely invalid message ends the
        // connection (unless garbage before it may hide it in an unfinished
        // FPDU); only valid ones, as many Sends as receives and Read
        // Requests within B's IRD, keep it.
        let (mut invalid, mut garbage, mut all_valid) = (false, false, true);
        let (mut sends, mut reads) = (0, 0);
        for (valid, message) in &messages {
            let message = if *valid { peer.valid(message) } else { message.clone() };
            invalid |= !*valid && message.surely_invalid(&target);
            garbage |= matches!(message, Hostile::Garbage(_));
            all_valid &= *valid;
            sends += usize::from(matches!(message, Hostile::Send { .. }));
            reads += usize::from(matches!(message, Hostile::ReadRequest { .. }));
            stream.extend(peer.bytes(&target, &message));
        }
        let mut chunks = Chunks(seed | 1);
        let mut rest = &stream[..];
        while !rest.is_empty() {
            let (chunk, after) = rest.split_at(chunks.next(200).min(rest.len()));
            w.lb.receive(chunk);
            rest = after;
            run_b_alone(&w);
        }
        if invalid && !garbage {
            prop_assert_ne!(w.b.qp.state(), QpState::Connected, "an invalid message was taken");
        }
        if all_valid && sends <= receives && reads <= 4 {
            prop_assert_eq!(w.b.qp.state(), QpState::Connected, "valid messages ended the connection");
        }
        prop_assert!(target.guards_intact(), "a byte outside a region was written");
        prop_assert!(target.ro.flat() == ro_before, "the read-only region was written");
        prop_assert!(target.local.flat() == local_before, "the local-only region was written");
        // B's close: each posted receive has exactly one entry.
        w.b.qp.close();
        run_b_alone(&w);
        let mut seen: Vec<usize> = w.b.rcq.drain().iter().map(|c| c.request_context).collect();
        seen.sort_unstable();
        prop_assert_eq!(seen, (1..=receives).collect::<Vec<_>>());
    }
}
