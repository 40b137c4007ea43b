//! FPDUs built in place (`ByteStream::send_with`): two links over an
//! in-memory pipe whose streams lend their room. A Send, a Write and a Read
//! (its Responses built in place too) arrive whole, with and without CRC;
//! when the room left is smaller than an FPDU the link falls back to
//! `send`, which splits that FPDU across the back-pressure; a stream that
//! lends nothing still carries everything (the default method).

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use std::sync::Mutex;

use super::tests::{Linked, RW, config};
use super::{ByteStream, Link};
use crate::kernel::sync::Arc;
use crate::kernel::sync::atomic::Ordering;
use crate::rnic::device::EngineMode;
use crate::rnic::iwarp::mpa;
use crate::rnic::iwarp::rdmap::Message;
use crate::rnic::qp::Payload;
use crate::rnic::testing::{Pair, summary};
use crate::rnic::types::{Access, Opcode, WcStatus, WrFlags};

/// One direction: bytes taken and not yet delivered, within a window.
struct LendPipe {
    bytes: Mutex<VecDeque<u8>>,
    window: usize,
    /// Lends its room (`send_with`), or only takes copies (`send`).
    lends: bool,
    /// FPDUs written in place; `send` calls that took bytes, and how many
    /// of those took fewer than offered.
    lent: Mutex<usize>,
    sends: Mutex<(usize, usize)>,
    /// Runs once, right after the stream took bytes (outside its lock): a
    /// peer that answers before the link returns from `send`/`send_with`.
    on_taken: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl LendPipe {
    fn new(window: usize, lends: bool) -> Arc<Self> {
        Arc::new(Self {
            bytes: Mutex::new(VecDeque::new()),
            window,
            lends,
            lent: Mutex::new(0),
            sends: Mutex::new((0, 0)),
            on_taken: Mutex::new(None),
        })
    }

    fn taken(&self) {
        let hook = self.on_taken.lock().unwrap().take();
        if let Some(hook) = hook {
            hook();
        }
    }
}

impl ByteStream for LendPipe {
    fn send(&self, bytes: &[u8]) -> usize {
        let mut q = self.bytes.lock().unwrap();
        let n = bytes.len().min(self.window.saturating_sub(q.len()));
        q.extend(&bytes[..n]);
        if n > 0 {
            let mut sends = self.sends.lock().unwrap();
            sends.0 += 1;
            sends.1 += usize::from(n < bytes.len());
        }
        drop(q);
        if n > 0 {
            self.taken();
        }
        n
    }

    fn send_with(&self, len: usize, fill: &mut dyn FnMut(&mut [u8]) -> bool) -> Option<bool> {
        if !self.lends {
            return None;
        }
        let mut q = self.bytes.lock().unwrap();
        if len > self.window.saturating_sub(q.len()) {
            return None;
        }
        // Poisoned room: `fill` must write every byte.
        let mut room = alloc::vec![0xee_u8; len];
        if !fill(&mut room) {
            return Some(false);
        }
        q.extend(&room);
        drop(q);
        *self.lent.lock().unwrap() += 1;
        self.taken();
        Some(true)
    }

    fn close(&self, _abortive: bool) {}
}

struct Wire {
    linked: Linked<LendPipe>,
    chunk: usize,
}

impl core::ops::Deref for Wire {
    type Target = Linked<LendPipe>;
    fn deref(&self) -> &Linked<LendPipe> {
        &self.linked
    }
}

impl Wire {
    fn new(window: usize, chunk: usize, crc: bool, lends: bool) -> Self {
        let cfg = config(crc, 4);
        let pipes = (LendPipe::new(window, lends), LendPipe::new(window, lends));
        Self {
            linked: Linked::new(Pair::apart(EngineMode::Inline), pipes, (cfg, cfg)),
            chunk,
        }
    }

    /// The next time A's stream (`a_sends`) or B's takes bytes, they are
    /// delivered to the peer and the peer's answer delivered back, all
    /// before the sending link returns from `send_with` / `send`: a peer on
    /// another machine can answer that fast. Once.
    fn answer_inside_the_hand_over(self: &Arc<Self>, a_sends: bool) {
        let w = Arc::clone(self);
        let hook: Box<dyn FnOnce() + Send> = Box::new(move || {
            if a_sends {
                Self::move_one(&w.ab, &w.lb, &w.la, 4096, None);
                Self::move_one(&w.ba, &w.la, &w.lb, 4096, None);
            } else {
                Self::move_one(&w.ba, &w.la, &w.lb, 4096, None);
                Self::move_one(&w.ab, &w.lb, &w.la, 4096, None);
            }
        });
        let stream = if a_sends { &self.ab } else { &self.ba };
        *stream.on_taken.lock().unwrap() = Some(hook);
    }

    /// Pumps until the wire settles, checks that the answer set up by
    /// [`Self::answer_inside_the_hand_over`] came, and returns what A's
    /// initiator CQ holds.
    fn a_completions_once_answered(&self) -> Vec<(usize, Opcode, WcStatus)> {
        self.pump();
        let waiting = [&self.ab, &self.ba].map(|s| s.on_taken.lock().unwrap().is_some());
        assert_eq!(
            waiting,
            [false, false],
            "the peer answered inside the hand-over"
        );
        summary(&self.a.scq.drain())
    }

    /// Moves bytes both ways in chunks until nothing moves (bounded).
    fn pump(&self) {
        for _ in 0..100_000 {
            let ab = Self::move_one(&self.ab, &self.lb, &self.la, self.chunk, Some(&self.log_ab));
            let ba = Self::move_one(&self.ba, &self.la, &self.lb, self.chunk, None);
            if !ab && !ba {
                return;
            }
        }
        panic!("pump did not settle");
    }

    fn move_one(
        pipe: &LendPipe,
        to: &Link,
        from: &Link,
        max: usize,
        log: Option<&Mutex<Vec<u8>>>,
    ) -> bool {
        let chunk: Vec<u8> = {
            let mut q = pipe.bytes.lock().unwrap();
            let n = max.min(q.len());
            q.drain(..n).collect()
        };
        if chunk.is_empty() {
            return false;
        }
        if let Some(log) = log {
            log.lock().unwrap().extend_from_slice(&chunk);
        }
        to.receive(&chunk);
        from.writable();
        true
    }

    /// FPDUs that crossed a → b, each parsed (CRC checked when on).
    fn fpdus_ab(&self, crc: bool) -> usize {
        let log = self.log_ab.lock().unwrap();
        let mut rest = &log[..];
        let mut count = 0;
        while !rest.is_empty() {
            let (ulpdu, len) = mpa::parse_fpdu(rest, crc, 65535).unwrap();
            Message::parse(ulpdu, None).unwrap();
            rest = &rest[len..];
            count += 1;
        }
        count
    }
}

/// A Send of 300 bytes (3 SGEs), a Write of 250 and a Read of 200 from A
/// to B; checks the data, the completions and the FPDUs on the wire.
fn send_write_read(w: &Wire, crc: bool) {
    let src = w.a.pattern(300, 3, Access::empty());
    let dst = w.b.buffer(300, 0, RW);
    let sink = w.b.buffer(300, 0, RW);
    let source = w.b.pattern(200, 7, RW);
    let back = w.a.buffer(200, 0, Access::LOCAL_WRITE);
    w.b.qp.post_receive(1, &[dst.sge(0, 300)]).unwrap();
    let sges = [src.sge(0, 50), src.sge(50, 200), src.sge(250, 50)];
    w.a.qp
        .post_send(10, Payload::Sges(&sges), WrFlags::empty(), None)
        .unwrap();
    w.a.qp
        .post_write(
            11,
            Payload::Sges(&[src.sge(0, 250)]),
            sink.raddr(25),
            sink.rkey(),
            WrFlags::empty(),
        )
        .unwrap();
    w.a.qp
        .post_read(
            12,
            &[back.sge(0, 200)],
            source.raddr(0),
            source.rkey(),
            WrFlags::empty(),
        )
        .unwrap();
    w.pump();
    assert_eq!(
        summary(&w.a.scq.drain()),
        [
            (10, Opcode::Send, WcStatus::Success),
            (11, Opcode::Write, WcStatus::Success),
            (12, Opcode::Read, WcStatus::Success),
        ]
    );
    let got = w.b.rcq.drain();
    assert_eq!(summary(&got), [(1, Opcode::Receive, WcStatus::Success)]);
    assert_eq!(got[0].bytes, 300);
    assert_eq!(dst.buffer.bytes(), src.buffer.bytes());
    assert_eq!(&sink.buffer.bytes()[25..275], &src.buffer.bytes()[..250]);
    assert_eq!(back.buffer.bytes(), source.buffer.bytes());
    // 300 bytes of Send in 46-byte payloads (7 FPDUs), 250 of Write in
    // 50-byte ones (5), one Read Request.
    assert_eq!(w.fpdus_ab(crc), 13);
    let out = &w.a.device.counters;
    assert_eq!(out.rdma_out_frames.load(Ordering::Relaxed), 13);
    assert_eq!(
        out.rdma_out_octets.load(Ordering::Relaxed),
        w.log_ab.lock().unwrap().len() as u64
    );
}

#[test]
fn test_fpdus_built_in_the_lent_room() {
    for crc in [false, true] {
        let w = Wire::new(4096, 4096, crc, true);
        send_write_read(&w, crc);
        // Every Send, Write and Read Response FPDU was written in place;
        // the Read Request went through `send`.
        assert_eq!(*w.ab.lent.lock().unwrap(), 12);
        assert_eq!(*w.ab.sends.lock().unwrap(), (1, 0));
        // B's Read Responses: 200 bytes in 50-byte payloads.
        assert_eq!(*w.ba.lent.lock().unwrap(), 4);
        assert_eq!(*w.ba.sends.lock().unwrap(), (0, 0));
    }
}

#[test]
fn test_fpdu_split_across_back_pressure_when_the_room_is_short() {
    for crc in [false, true] {
        // A window of 100 bytes holds one 72-byte FPDU (64-byte ULPDU): the
        // next finds 28 bytes of room, is not lent, and goes through `send`
        // in pieces; delivered 50 bytes at a time.
        let w = Wire::new(100, 50, crc, true);
        send_write_read(&w, crc);
        let lent = *w.ab.lent.lock().unwrap();
        let (sends, short) = *w.ab.sends.lock().unwrap();
        assert!(lent > 0, "some FPDUs were lent");
        assert!(short > 0, "some FPDUs were split by back-pressure");
        assert!(sends > short);
    }
}

#[test]
fn test_a_stream_that_lends_nothing_gets_copies() {
    let w = Wire::new(100, 37, true, false);
    send_write_read(&w, true);
    assert_eq!(*w.ab.lent.lock().unwrap(), 0);
    assert!(w.ab.sends.lock().unwrap().0 >= 13);
}

/// RFC 5040 §7, docs/iwarp.md "A peer's Terminate can overtake a sent
/// request's completion": a Write whose last FPDU the stream took completes
/// with success even when the peer's Terminate for it arrives before the
/// link returns from handing the bytes over (here: inside `send_with` or
/// `send`, the peer refusing the Write's token at once). Before the
/// completion was recorded ahead of the release, the lent path let the
/// Terminate be applied to the Write first (`RemoteAccessError`).
#[test]
fn test_terminate_arriving_as_the_last_bytes_leave_finds_the_write_sent() {
    for lends in [true, false] {
        let w = Arc::new(Wire::new(4096, 4096, false, lends));
        let src = w.a.pattern(40, 1, Access::empty());
        let sink = w.b.buffer(64, 0, RW);
        // B receives the Write (bad token: it terminates), and A the
        // Terminate, before A's `send_with`/`send` returns.
        w.answer_inside_the_hand_over(true);
        w.a.qp
            .post_write(
                7,
                Payload::Sges(&[src.sge(0, 40)]),
                sink.raddr(0),
                sink.rkey() ^ 0x0100,
                WrFlags::empty(),
            )
            .unwrap();
        assert_eq!(
            w.a_completions_once_answered(),
            [(7, Opcode::Write, WcStatus::Success)],
            "lends: {lends}"
        );
        // The Terminate ended the connection at both ends (E5).
        assert_ne!(w.a.qp.state(), crate::rnic::qp::QpState::Connected);
        assert_ne!(w.b.qp.state(), crate::rnic::qp::QpState::Connected);
        // The Arc cycle through the hook is gone (it ran once).
        drop(w);
    }
}

/// N21, the responder's side: the IRD slot of an inbound Read is free
/// before its last Response can reach the initiator. Here the initiator
/// (ORD 1) places that Response, completes the Read and sends its next
/// Read Request before the responder's link returns from handing the bytes
/// over, as a peer on another machine can; with IRD 1 the request must find
/// room. Before the slot was freed ahead of the hand-over, the lent path
/// answered it with a Terminate (IRD exceeded, `RemoteOperationError` for
/// the second Read; seen in CI on the deferred engine over TCP).
#[test]
fn test_a_read_request_right_behind_the_last_response_is_within_the_ird_rule_n21() {
    for lends in [true, false] {
        let a_cfg = config(false, 1);
        let b_cfg = super::LinkConfig {
            ird: 1,
            ..config(false, 4)
        };
        let pipes = (LendPipe::new(4096, lends), LendPipe::new(4096, lends));
        let w = Arc::new(Wire {
            linked: Linked::new(Pair::apart(EngineMode::Inline), pipes, (a_cfg, b_cfg)),
            chunk: 4096,
        });
        let source = w.b.pattern(16, 5, RW);
        let sinks = [0, 1].map(|_| w.a.buffer(8, 0, Access::LOCAL_WRITE));
        // A receives the first Read's Response (A then sends the second
        // Read Request), and B that request, before B's link returns.
        w.answer_inside_the_hand_over(false);
        for (i, sink) in sinks.iter().enumerate() {
            w.a.qp
                .post_read(
                    i,
                    &[sink.sge(0, 8)],
                    source.raddr(8 * i as u64),
                    source.rkey(),
                    WrFlags::empty(),
                )
                .unwrap();
        }
        assert_eq!(
            w.a_completions_once_answered(),
            [
                (0, Opcode::Read, WcStatus::Success),
                (1, Opcode::Read, WcStatus::Success)
            ],
            "lends: {lends}"
        );
        for (i, sink) in sinks.iter().enumerate() {
            assert_eq!(
                sink.buffer.bytes(),
                &source.buffer.bytes()[8 * i..8 * (i + 1)],
                "Read {i}"
            );
        }
        assert_eq!(w.b.qp.state(), crate::rnic::qp::QpState::Connected);
        drop(w);
    }
}
