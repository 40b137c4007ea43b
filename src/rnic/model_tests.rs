//! Model test of the RNIC's work-request paths: random sequences of posts,
//! polls, arms, flushes, fast registrations and window binds on a connected
//! [`Pair`], replayed on a small reference model that predicts every
//! completion and every byte.
//!
//! # The model
//! * A's initiator queue is a FIFO executed in post order (P23). `DEFER`
//!   holds an entry back until a request without the flag, a refused post
//!   (D4) or a flush rings the doorbell (D2, D5); a refused post leaves no
//!   trace (P6, D3).
//! * A Send consumes B's oldest receive (FIFO). With no receive posted it
//!   waits (RNR, see `engine.rs`), and so does everything queued behind it.
//!   Once B's receive side is gone (flushed or terminated) a Send fails with
//!   `RemoteOperationError`, a waiting one as soon as B leaves.
//! * A request that fails terminates the connection (E5, E7, M34, P20): both
//!   QPs enter the error state, B's receives are cancelled, and every
//!   outstanding and later request completes `Cancelled` (E1, P15). A flush
//!   does the same to one QP only; Writes and Reads into a flushed B still
//!   succeed while A is connected.
//! * A successful silent request produces no completion (P14); every other
//!   accepted request produces exactly one (P6, D3), with the QP's and the
//!   request's contexts (P21).
//! * The bytes of B's receive buffer and remote region, of A's Read sink and
//!   of the LAM pages behind A's fast-register region are tracked exactly.
//!
//! B posts receives and (without DEFER) Bind / Invalidate of a window over
//! its remote region; A posts every other request.
//!
//! # Deferred engine
//! The deferred engine is settled before every poll, flush and B-side
//! initiator post, and after each B-side initiator post, so that the outcome
//! of every operation is fixed; between those points posts race the engine's
//! worker threads. A receive posted to a terminated queue is completed by the
//! posting thread, possibly while a worker still cancels older receives, so
//! B's receive CQ is matched by request context rather than by position in
//! that mode (every other CQ is checked in order in both modes).
//!
//! # Reproducing a failure
//! Failures are not persisted (no file is written into `src/`): proptest
//! prints the minimal failing sequence, which can be pasted into a plain
//! `#[test]` through [`run`]; `PROPTEST_RNG_SEED=<n>` replays a whole run.

use std::collections::{HashMap, VecDeque};

use proptest::prelude::*;
use proptest::test_runner::Config;

use super::cq::{ArmType, Cq, CqEvent};
use super::device::EngineMode;
use super::mr::{Mr, Mw};
use super::qp::{InvalidateTarget, Payload, PostError, Qp};
use super::testing::{Buffer, LamPages, Pair, Recorder, Registered, drain};
use super::types::{Access, Completion, Opcode, PAGE_SIZE, Sge, WcStatus, WrFlags};
use crate::kernel::sync::Arc;

/// Bytes of every registered buffer.
const BUF_LEN: usize = 1024;
/// Bytes of one receive slot of B's receive buffer.
const SLOT_LEN: usize = 256;
/// Largest message, and A's inline size (`testing::CONFIG`).
const MAX_MSG: usize = 256;
/// Pages behind A's fast-register region.
const FR_PAGES: usize = 2;
/// Virtual-address indexes a FastRegister may map at (FBO 0).
const FR_BASES: [u64; 2] = [0x7000_0000, 0x7100_0000];
/// Lengths a FastRegister may map.
const FR_LENS: [u64; 2] = [PAGE_SIZE, 2 * PAGE_SIZE];
/// Offsets into the fast-register region stay below this (inside either length).
const FR_WINDOW: usize = 4096;
/// QP contexts of the pair's sides.
const QP_A: usize = 0xA;
const QP_B: usize = 0xB;

// ----- operations ----------------------------------------------------------

/// How a byte range is cut into SGEs: `n` pieces (1..=3) at `cuts`, in
/// order or reversed (so scatter order is checked too).
#[derive(Clone, Copy, Debug)]
struct Split {
    n: usize,
    cuts: [u16; 2],
    reverse: bool,
}

impl Split {
    /// Pieces `(offset, len)` relative to the start of a `len`-byte range.
    fn pieces(self, len: usize) -> Vec<(usize, usize)> {
        let mut cuts: Vec<usize> = self.cuts[..self.n - 1]
            .iter()
            .map(|&c| usize::from(c) % (len + 1))
            .collect();
        cuts.sort_unstable();
        let mut pieces = Vec::new();
        let mut at = 0;
        for cut in cuts.into_iter().chain([len]) {
            pieces.push((at, cut - at));
            at = cut;
        }
        if self.reverse {
            pieces.reverse();
        }
        pieces
    }

    /// The pieces `(offset, len)` in B's receive buffer of a receive of
    /// `len` bytes into slot `slot`.
    fn receive_pieces(slot: u8, len: u16, split: Self) -> Vec<(usize, usize)> {
        let base = usize::from(slot) % (BUF_LEN / SLOT_LEN) * SLOT_LEN;
        split
            .pieces(usize::from(len).min(SLOT_LEN))
            .into_iter()
            .map(|(off, n)| (base + off, n))
            .collect()
    }
}

/// A's local memory for a Send or Write source.
#[derive(Clone, Copy, Debug)]
enum Local {
    /// The registered source buffer (local read only).
    Src,
    /// The fast-register region, at the last posted FastRegister's base.
    Fr,
}

/// A's local memory for a Read sink.
#[derive(Clone, Copy, Debug)]
enum SinkKind {
    /// The registered sink buffer (local write).
    Sink,
    /// The fast-register region (mapped with local write).
    Fr,
}

impl Local {
    /// The buffer, or `None` for the fast-register region.
    const fn buf(self) -> Option<Buf> {
        match self {
            Self::Src => Some(Buf::Src),
            Self::Fr => None,
        }
    }
}

impl SinkKind {
    /// The buffer, or `None` for the fast-register region.
    const fn buf(self) -> Option<Buf> {
        match self {
            Self::Sink => Some(Buf::Sink),
            Self::Fr => None,
        }
    }
}

/// DEFER when `defer`, else no flag.
fn deferred(defer: bool) -> WrFlags {
    if defer {
        WrFlags::DEFER
    } else {
        WrFlags::empty()
    }
}

/// Where a Write or Read goes at B.
#[derive(Clone, Copy, Debug)]
enum Remote {
    /// Inside B's remote region.
    Region(u16),
    /// Across or past its end: RemoteOperationError (P20, M34).
    Beyond(u16),
    /// Through B's window as currently bound (RemoteAccessError when it is
    /// not bound, or bound again, when the request executes, M34).
    Window(u16),
    /// Across the end of B's window: RemoteOperationError (M34).
    WindowBeyond(u16),
    /// A token that names nothing: RemoteAccessError (M34).
    BadKey,
}

/// A CQ the test polls or arms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Which {
    /// A's initiator CQ.
    AInitiator,
    /// B's receive CQ.
    BReceive,
    /// B's initiator CQ (window Bind / Invalidate).
    BInitiator,
}

impl Which {
    const ALL: [Self; 3] = [Self::AInitiator, Self::BReceive, Self::BInitiator];

    const fn index(self) -> usize {
        match self {
            Self::AInitiator => 0,
            Self::BReceive => 1,
            Self::BInitiator => 2,
        }
    }
}

/// Options of a window rebind.
#[derive(Clone, Copy, Debug)]
struct RebindFlags {
    /// The Bind is silent (P14).
    silent: bool,
    /// The Invalidate is posted with DEFER, the Bind right behind it.
    chain: bool,
}

/// A range of A's memory for a Send, Write or Read.
#[derive(Clone, Copy, Debug)]
struct Range {
    off: u16,
    len: u16,
    split: Split,
}

/// One step of a test sequence.
#[derive(Clone, Copy, Debug)]
enum Op {
    /// A posts a Send (flags among SILENT_SUCCESS, SOLICITED, DEFER, INLINE).
    Send {
        local: Local,
        range: Range,
        flags: WrFlags,
    },
    /// B posts a receive into slot `slot` of its receive buffer.
    Receive { slot: u8, len: u16, split: Split },
    /// A posts a Write (flags among SILENT_SUCCESS, DEFER, INLINE).
    Write {
        local: Local,
        range: Range,
        remote: Remote,
        flags: WrFlags,
    },
    /// A posts a Read (flags among SILENT_SUCCESS, DEFER, READ_FENCE).
    Read {
        sink: SinkKind,
        range: Range,
        remote: Remote,
        flags: WrFlags,
    },
    /// Polls up to `max` completions.
    Poll { cq: Which, max: u8 },
    /// Arms a CQ.
    Arm { cq: Which, arm: ArmType },
    /// Flushes A or B (E1).
    Flush { b: bool },
    /// A posts a FastRegister of its region (an error when it is mapped).
    FastRegister { base: bool, long: bool, defer: bool },
    /// A posts an Invalidate of its region (an error when it is not mapped).
    InvalidateFr { defer: bool },
    /// A posts Invalidate then FastRegister of its region: a remap.
    Remap {
        base: bool,
        long: bool,
        defer_invalidate: bool,
        defer_register: bool,
    },
    /// B invalidates its window if the model says it is bound, then binds it
    /// over `len` bytes at `off` of its remote region.
    Rebind {
        off: u16,
        len: u16,
        flags: RebindFlags,
    },
    /// B binds its window without invalidating it first: an error when it is
    /// bound (the Bind finds no Invalidate to wait for).
    Bind { off: u16, len: u16 },
    /// B posts an Invalidate of its window (an error when it is not bound).
    InvalidateWindow,
    /// A posts a request that fails inline (kind 0..5): it must leave no
    /// trace and ring A's earlier deferred requests (D4).
    Refused { kind: u8 },
    /// B posts a receive with too many SGEs: refused, no trace.
    RefusedReceive,
}

fn split() -> impl Strategy<Value = Split> {
    (1_usize..=3, any::<[u16; 2]>(), any::<bool>()).prop_map(|(n, cuts, reverse)| Split {
        n,
        cuts,
        reverse,
    })
}

fn range(min: u16) -> impl Strategy<Value = Range> {
    (any::<u16>(), min..=MAX_MSG as u16, split()).prop_map(|(off, len, split)| Range {
        off,
        len,
        split,
    })
}

fn local() -> impl Strategy<Value = Local> {
    prop_oneof![3 => Just(Local::Src), 1 => Just(Local::Fr)]
}

fn remote() -> impl Strategy<Value = Remote> {
    prop_oneof![
        16 => any::<u16>().prop_map(Remote::Region),
        6 => any::<u16>().prop_map(Remote::Window),
        1 => any::<u16>().prop_map(Remote::WindowBeyond),
        1 => any::<u16>().prop_map(Remote::Beyond),
        1 => Just(Remote::BadKey),
    ]
}

/// Flags from `bits`: each of `allowed`, independently.
fn flags(allowed: WrFlags) -> impl Strategy<Value = WrFlags> {
    any::<u8>().prop_map(move |bits| {
        allowed
            .iter()
            .enumerate()
            .filter(|(i, _)| bits & (1 << i) != 0)
            .fold(WrFlags::empty(), |acc, (_, f)| acc | f)
    })
}

fn which() -> impl Strategy<Value = Which> {
    prop_oneof![
        Just(Which::AInitiator),
        Just(Which::BReceive),
        Just(Which::BInitiator)
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let send_flags =
        WrFlags::SILENT_SUCCESS | WrFlags::SOLICITED | WrFlags::DEFER | WrFlags::INLINE;
    let write_flags = WrFlags::SILENT_SUCCESS | WrFlags::DEFER | WrFlags::INLINE;
    let read_flags = WrFlags::SILENT_SUCCESS | WrFlags::DEFER | WrFlags::READ_FENCE;
    prop_oneof![
        6 => (local(), range(0), flags(send_flags))
            .prop_map(|(local, range, flags)| Op::Send { local, range, flags }),
        12 => (
            any::<u8>(),
            prop_oneof![3 => Just(SLOT_LEN as u16), 1 => 0..=SLOT_LEN as u16],
            split(),
        )
            .prop_map(|(slot, len, split)| Op::Receive { slot, len, split }),
        6 => (local(), range(1), remote(), flags(write_flags)).prop_map(
            |(local, range, remote, flags)| Op::Write { local, range, remote, flags }
        ),
        5 => (
            prop_oneof![3 => Just(SinkKind::Sink), 1 => Just(SinkKind::Fr)],
            range(1),
            remote(),
            flags(read_flags),
        )
            .prop_map(|(sink, range, remote, flags)| Op::Read { sink, range, remote, flags }),
        5 => (which(), 1_u8..=8).prop_map(|(cq, max)| Op::Poll { cq, max }),
        1 => (
            which(),
            prop_oneof![Just(ArmType::Any), Just(ArmType::Solicited), Just(ArmType::Errors)],
        )
            .prop_map(|(cq, arm)| Op::Arm { cq, arm }),
        1 => any::<bool>().prop_map(|b| Op::Flush { b }),
        2 => any::<[bool; 4]>().prop_map(|[base, long, defer_invalidate, defer_register]| {
            Op::Remap { base, long, defer_invalidate, defer_register }
        }),
        // Each of these fails (and ends the connection) unless the region
        // or window is in the right state.
        1 => prop_oneof![
            any::<[bool; 3]>()
                .prop_map(|[base, long, defer]| Op::FastRegister { base, long, defer }),
            any::<bool>().prop_map(|defer| Op::InvalidateFr { defer }),
            (any::<u16>(), any::<u16>()).prop_map(|(off, len)| Op::Bind { off, len }),
            Just(Op::InvalidateWindow),
        ],
        2 => (any::<u16>(), any::<u16>(), any::<[bool; 2]>()).prop_map(
            |(off, len, [silent, chain])| Op::Rebind { off, len, flags: RebindFlags { silent, chain } }
        ),
        2 => (0_u8..5).prop_map(|kind| Op::Refused { kind }),
        1 => Just(Op::RefusedReceive),
    ]
}

// ----- the reference model ---------------------------------------------------

/// The buffers whose bytes the model tracks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Buf {
    /// A: source of Sends and Writes (never written).
    Src,
    /// A: Read sink.
    Sink,
    /// B: receive buffer.
    Recv,
    /// B: remote region (Write target, Read source).
    Mem,
    /// A: the LAM pages behind the fast-register region.
    Lam,
}

impl Buf {
    const fn index(self) -> usize {
        match self {
            Self::Src => 0,
            Self::Sink => 1,
            Self::Recv => 2,
            Self::Mem => 3,
            Self::Lam => 4,
        }
    }
}

/// One SGE as the model sees it.
#[derive(Clone, Copy, Debug)]
enum Piece {
    /// `len` bytes at `off` of a registered buffer.
    Buf(Buf, usize, usize),
    /// `len` bytes at virtual-address index `addr` of the fast-register region.
    Fr(u64, usize),
}

#[derive(Clone, Debug)]
enum Source {
    Pieces(Vec<Piece>),
    /// Inline bytes, copied at post time (P12).
    Inline(Vec<u8>),
}

/// A Write or Read target, resolved at post time like a consumer would.
#[derive(Clone, Copy, Debug)]
enum Target {
    /// Byte offset into B's region (may run past its end).
    Mem(usize),
    /// Through the window binding `generation` (`None`: not bound at post
    /// time), at byte offset `offset` of B's region.
    Window {
        generation: Option<u32>,
        offset: usize,
    },
    BadKey,
}

#[derive(Clone, Debug)]
enum Work {
    Send { source: Source, solicited: bool },
    Write { source: Source, target: Target },
    Read { sinks: Vec<Piece>, target: Target },
    FastRegister { base: u64, len: u64 },
    Invalidate,
}

impl Work {
    const fn opcode(&self) -> Opcode {
        match self {
            Self::Send { .. } => Opcode::Send,
            Self::Write { .. } => Opcode::Write,
            Self::Read { .. } => Opcode::Read,
            Self::FastRegister { .. } => Opcode::FastRegister,
            Self::Invalidate => Opcode::Invalidate,
        }
    }
}

#[derive(Clone, Debug)]
struct Wqe {
    context: usize,
    work: Work,
    silent: bool,
}

#[derive(Clone, Debug)]
struct Recv {
    context: usize,
    /// `(offset, len)` in B's receive buffer.
    pieces: Vec<(usize, usize)>,
}

#[derive(Clone, Copy, Debug)]
struct Window {
    generation: u32,
    offset: usize,
    len: usize,
}

/// What became of one post.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// Failed inline: no completion ever (P6, D3).
    Refused,
    /// Accepted, not yet completed.
    Pending,
    /// Completed with `status`; `silent` success produces no entry (P14).
    Completed { status: WcStatus, silent: bool },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Conn {
    Up,
    Error,
}

#[derive(Clone)]
struct Model {
    /// A's and B's connection state (A's initiator queue; B's queues).
    a: Conn,
    b: Conn,
    /// A's initiator queue and how many of its entries are rung.
    queue: VecDeque<Wqe>,
    rung: usize,
    /// B's posted receives.
    receives: VecDeque<Recv>,
    /// The executed mapping of A's fast-register region: base, length.
    fr: Option<(u64, u64)>,
    /// B's window as executed.
    window: Option<Window>,
    generations: u32,
    /// Expected bytes of every tracked buffer.
    bufs: [Vec<u8>; 5],
    /// Completions queued and not yet polled, per [`Which`].
    cqs: [VecDeque<Expected>; 3],
    outcomes: HashMap<usize, Outcome>,
    /// How many times the connection was terminated by an error (E5).
    terminations: usize,
    /// Set while A's runner races B's termination (deferred engine): a
    /// request failing with RemoteOperationError may as well be cancelled.
    racing: bool,
    /// Whether the engine is deferred.
    deferred: bool,
}

/// A completion the model expects.
#[derive(Clone, Copy, Debug)]
struct Expected {
    completion: Completion,
    /// It may come with status `Cancelled` instead.
    or_cancelled: bool,
}

impl Expected {
    fn matches(&self, completion: &Completion) -> bool {
        *completion == self.completion
            || (self.or_cancelled
                && *completion
                    == Completion {
                        status: WcStatus::Cancelled,
                        ..self.completion
                    })
    }
}

impl Model {
    fn buf(&self, buf: Buf) -> &[u8] {
        &self.bufs[buf.index()]
    }

    /// Queues `completion` on `cq` unless it is a silent success (P14), and
    /// records the outcome of its request.
    fn complete(&mut self, cq: Which, completion: Completion, silent: bool) {
        let status = completion.status;
        if !(status.is_success() && silent) {
            self.cqs[cq.index()].push_back(Expected {
                completion,
                or_cancelled: self.racing
                    && cq == Which::AInitiator
                    && status == WcStatus::RemoteOperationError,
            });
        }
        let previous = self.outcomes.insert(
            completion.request_context,
            Outcome::Completed { status, silent },
        );
        assert_eq!(previous, Some(Outcome::Pending), "model completed twice");
    }

    /// Local SGEs to buffer ranges (P11): the fast-register region only
    /// while mapped and inside its mapping.
    fn resolve(&self, pieces: &[Piece]) -> Result<Vec<(Buf, usize, usize)>, WcStatus> {
        pieces
            .iter()
            .map(|piece| match *piece {
                Piece::Buf(buf, off, len) => Ok((buf, off, len)),
                Piece::Fr(addr, len) => match self.fr {
                    Some((base, map_len))
                        if addr >= base && addr - base + len as u64 <= map_len =>
                    {
                        Ok((Buf::Lam, (addr - base) as usize, len))
                    }
                    _ => Err(WcStatus::LocalAccessError),
                },
            })
            .collect()
    }

    fn gather(&self, source: &Source) -> Result<Vec<u8>, WcStatus> {
        match source {
            Source::Inline(bytes) => Ok(bytes.clone()),
            Source::Pieces(pieces) => Ok(self
                .resolve(pieces)?
                .into_iter()
                .flat_map(|(buf, off, len)| self.buf(buf)[off..off + len].iter().copied())
                .collect()),
        }
    }

    fn scatter(&mut self, dst: &[(Buf, usize, usize)], mut bytes: &[u8]) {
        for &(buf, off, len) in dst {
            let n = len.min(bytes.len());
            let (head, tail) = bytes.split_at(n);
            self.bufs[buf.index()][off..off + n].copy_from_slice(head);
            bytes = tail;
        }
        assert!(bytes.is_empty(), "model scattered past its destination");
    }

    /// Where `len` bytes at `target` land in B's region (P19, P20, M34).
    fn remote(&self, target: Target, len: usize) -> Result<usize, WcStatus> {
        match target {
            Target::Mem(at) if at + len <= BUF_LEN => Ok(at),
            Target::Mem(_) => Err(WcStatus::RemoteOperationError),
            Target::Window { generation, offset } => match self.window {
                Some(w) if Some(w.generation) == generation => {
                    if offset >= w.offset && offset + len <= w.offset + w.len {
                        Ok(offset)
                    } else {
                        Err(WcStatus::RemoteOperationError)
                    }
                }
                _ => Err(WcStatus::RemoteAccessError),
            },
            Target::BadKey => Err(WcStatus::RemoteAccessError),
        }
    }

    /// Executes A's head request; `None` when a Send waits for a receive.
    fn execute(&mut self, wqe: &Wqe) -> Option<WcStatus> {
        Some(match &wqe.work {
            Work::Send { source, solicited } => {
                let bytes = match self.gather(source) {
                    Ok(bytes) => bytes,
                    Err(status) => return Some(status),
                };
                if self.b == Conn::Error {
                    // B's receive side is gone: the message can never land.
                    return Some(WcStatus::RemoteOperationError);
                }
                let recv = self.receives.pop_front()?;
                let room: usize = recv.pieces.iter().map(|p| p.1).sum();
                if room < bytes.len() {
                    // E7: both sides fail.
                    let c = Completion::new(
                        WcStatus::ReceiveTooSmall,
                        Opcode::Receive,
                        QP_B,
                        recv.context,
                    );
                    self.complete(Which::BReceive, c, false);
                    return Some(WcStatus::RemoteOperationError);
                }
                let dst: Vec<_> = recv
                    .pieces
                    .iter()
                    .map(|&(off, len)| (Buf::Recv, off, len))
                    .collect();
                self.scatter(&dst, &bytes);
                let mut c = Completion::new(WcStatus::Success, Opcode::Receive, QP_B, recv.context);
                c.bytes = u32::try_from(bytes.len()).unwrap();
                c.solicited = *solicited;
                self.complete(Which::BReceive, c, false);
                WcStatus::Success
            }
            Work::Write { source, target } => {
                let bytes = match self.gather(source) {
                    Ok(bytes) => bytes,
                    Err(status) => return Some(status),
                };
                match self.remote(*target, bytes.len()) {
                    Ok(at) => {
                        self.scatter(&[(Buf::Mem, at, bytes.len())], &bytes);
                        WcStatus::Success
                    }
                    Err(status) => status,
                }
            }
            Work::Read { sinks, target } => {
                let dst = match self.resolve(sinks) {
                    Ok(dst) => dst,
                    Err(status) => return Some(status),
                };
                let len = dst.iter().map(|d| d.2).sum();
                match self.remote(*target, len) {
                    Ok(at) => {
                        let bytes = self.buf(Buf::Mem)[at..at + len].to_vec();
                        self.scatter(&dst, &bytes);
                        WcStatus::Success
                    }
                    Err(status) => status,
                }
            }
            Work::FastRegister { base, len } => {
                if self.fr.is_some() {
                    WcStatus::InvalidRequest
                } else {
                    self.fr = Some((*base, *len));
                    WcStatus::Success
                }
            }
            Work::Invalidate => {
                if self.fr.take().is_some() {
                    WcStatus::Success
                } else {
                    WcStatus::InvalidRequest
                }
            }
        })
    }

    /// A's runner: executes rung requests in order until one waits.
    fn run_a(&mut self) {
        while self.rung > 0 {
            let wqe = self.queue.pop_front().expect("rung entries are queued");
            let status = if self.a == Conn::Error {
                Some(WcStatus::Cancelled)
            } else {
                self.execute(&wqe)
            };
            let Some(status) = status else {
                self.queue.push_front(wqe);
                return;
            };
            self.rung -= 1;
            let c = Completion::new(status, wqe.work.opcode(), QP_A, wqe.context);
            self.complete(Which::AInitiator, c, wqe.silent);
            if !status.is_success() && status != WcStatus::Cancelled {
                self.terminate();
            }
        }
    }

    /// E5: an error completion of A ends the connection on both sides.
    fn terminate(&mut self) {
        self.terminations += 1;
        self.flush_a();
        self.flush_b();
    }

    /// E5: an error completion of B ends the connection. B leaves first and
    /// wakes a Send of A waiting for a receive, which then fails (the
    /// message can never land) unless A has left meanwhile: with the
    /// deferred engine A's runner races B's thread, so that Send may as
    /// well complete cancelled.
    fn terminate_from_b(&mut self) {
        self.terminations += 1;
        self.flush_b();
        self.racing = self.deferred;
        self.run_a();
        self.racing = false;
        self.flush_a();
        self.run_a();
    }

    /// E1 on A: everything queued is rung and completes cancelled.
    fn flush_a(&mut self) {
        self.a = Conn::Error;
        self.rung = self.queue.len();
    }

    /// E1 on B: its receives complete cancelled, in order. A's waiting Send,
    /// if any, is woken (the caller runs A).
    fn flush_b(&mut self) {
        self.b = Conn::Error;
        while let Some(recv) = self.receives.pop_front() {
            let c = Completion::new(WcStatus::Cancelled, Opcode::Receive, QP_B, recv.context);
            self.complete(Which::BReceive, c, false);
        }
    }

    /// A request accepted on A's initiator queue.
    fn post_a(&mut self, wqe: Wqe, defer: bool) {
        self.outcomes.insert(wqe.context, Outcome::Pending);
        self.queue.push_back(wqe);
        // In the error state nothing is held back (E5).
        if !defer || self.a == Conn::Error {
            self.rung = self.queue.len();
        }
        self.run_a();
    }

    /// A request refused inline on A: rings the deferred ones first (D4).
    fn refuse_a(&mut self, context: usize) {
        self.outcomes.insert(context, Outcome::Refused);
        self.rung = self.queue.len();
        self.run_a();
    }

    fn post_receive(&mut self, recv: Recv) {
        self.outcomes.insert(recv.context, Outcome::Pending);
        if self.b == Conn::Error {
            let c = Completion::new(WcStatus::Cancelled, Opcode::Receive, QP_B, recv.context);
            self.complete(Which::BReceive, c, false);
        } else {
            self.receives.push_back(recv);
            // A Send waiting for it runs now.
            self.run_a();
        }
    }

    /// B's Bind, executed at once (B's queue is rung at every post here).
    /// A Bind posted while the window is bound waits for an Invalidate
    /// posted before it (M21); with none, it fails and ends the connection.
    fn post_bind(&mut self, context: usize, offset: usize, len: usize, silent: bool) {
        self.outcomes.insert(context, Outcome::Pending);
        let status = if self.b == Conn::Error {
            WcStatus::Cancelled
        } else if self.window.is_some() {
            WcStatus::InvalidRequest
        } else {
            self.generations += 1;
            self.window = Some(Window {
                generation: self.generations,
                offset,
                len,
            });
            WcStatus::Success
        };
        let c = Completion::new(status, Opcode::Bind, QP_B, context);
        self.complete(Which::BInitiator, c, silent);
        if status == WcStatus::InvalidRequest {
            self.terminate_from_b();
        }
    }

    /// B's Invalidate of its window.
    fn post_invalidate_window(&mut self, context: usize) {
        self.outcomes.insert(context, Outcome::Pending);
        let status = if self.b == Conn::Error {
            WcStatus::Cancelled
        } else if self.window.take().is_some() {
            WcStatus::Success
        } else {
            WcStatus::InvalidRequest
        };
        let c = Completion::new(status, Opcode::Invalidate, QP_B, context);
        self.complete(Which::BInitiator, c, false);
        if status == WcStatus::InvalidRequest {
            self.terminate_from_b();
        }
    }
}

// ----- the system under test -------------------------------------------------

/// A connected pair, its memory, and the model of it all.
struct Harness {
    deferred: bool,
    pair: Pair,
    src: Registered,
    sink: Registered,
    recv: Registered,
    mem: Registered,
    lam: LamPages,
    fr: Arc<Mr>,
    mw: Arc<Mw>,
    /// Base and length of the last FastRegister posted (the consumer's view).
    fr_posted: (u64, u64),
    model: Model,
    next_context: usize,
    arms: [usize; 3],
    /// Every completion polled, in order.
    polled: Vec<Completion>,
}

impl Harness {
    fn new(mode: EngineMode) -> Self {
        let pair = Pair::new(mode);
        let src = pair.a.pattern(BUF_LEN, 0x11, Access::empty());
        let sink = pair.a.buffer(BUF_LEN, 0x22, Access::LOCAL_WRITE);
        let recv = pair.b.buffer(BUF_LEN, 0x33, Access::LOCAL_WRITE);
        let mem = Registered::new(
            &pair.b.pd,
            Buffer::pattern(BUF_LEN, 0x44),
            Access::REMOTE_READ | Access::REMOTE_WRITE,
        );
        let lam = LamPages::new(&pair.a.device, FR_PAGES, 0x55);
        let fr = Mr::new(&pair.a.pd, true).unwrap();
        fr.init_fast(FR_PAGES as u32, false).unwrap();
        let mw = Mw::new(&pair.b.pd).unwrap();
        let bufs = [
            src.buffer.bytes().to_vec(),
            sink.buffer.bytes().to_vec(),
            recv.buffer.bytes().to_vec(),
            mem.buffer.bytes().to_vec(),
            lam.bytes().to_vec(),
        ];
        let model = Model {
            a: Conn::Up,
            b: Conn::Up,
            queue: VecDeque::new(),
            rung: 0,
            receives: VecDeque::new(),
            fr: None,
            window: None,
            generations: 0,
            bufs,
            cqs: Default::default(),
            outcomes: HashMap::new(),
            terminations: 0,
            racing: false,
            deferred: mode == EngineMode::Deferred,
        };
        let mut h = Self {
            deferred: mode == EngineMode::Deferred,
            pair,
            src,
            sink,
            recv,
            mem,
            lam,
            fr,
            mw,
            fr_posted: (0, 0),
            model,
            next_context: 0x100,
            arms: [0; 3],
            polled: Vec::new(),
        };
        // Start with the fast-register region mapped and the window bound.
        h.apply(Op::FastRegister {
            base: false,
            long: true,
            defer: false,
        });
        h.apply(Op::Bind { off: 0, len: 0 });
        h
    }

    fn context(&mut self) -> usize {
        self.next_context += 1;
        self.next_context
    }

    fn settle(&self) {
        if self.deferred {
            self.pair.settle();
        }
    }

    fn cq(&self, which: Which) -> &Arc<Cq> {
        match which {
            Which::AInitiator => &self.pair.a.scq.cq,
            Which::BReceive => &self.pair.b.rcq.cq,
            Which::BInitiator => &self.pair.b.scq.cq,
        }
    }

    fn recorder(&self, which: Which) -> &Arc<Recorder> {
        match which {
            Which::AInitiator => &self.pair.a.scq.recorder,
            Which::BReceive => &self.pair.b.rcq.recorder,
            Which::BInitiator => &self.pair.b.scq.recorder,
        }
    }

    fn registered(&self, buf: Buf) -> &Registered {
        match buf {
            Buf::Src => &self.src,
            Buf::Sink => &self.sink,
            Buf::Recv => &self.recv,
            Buf::Mem => &self.mem,
            Buf::Lam => unreachable!("LAM pages are reached through the region"),
        }
    }

    fn sge(&self, piece: Piece) -> Sge {
        match piece {
            Piece::Buf(buf, off, len) => self
                .registered(buf)
                .sge(off as u64, u32::try_from(len).unwrap()),
            Piece::Fr(addr, len) => Sge {
                addr,
                len: u32::try_from(len).unwrap(),
                key: self.fr.local_key().unwrap(),
            },
        }
    }

    /// The pieces of A's local memory that `range` names (at least `min` bytes).
    /// The pieces a request's SGEs cover: `range`, at least `min` bytes
    /// long, inside buffer `buf` or, for `None`, inside the fast-registered
    /// window at its last posted base.
    fn pieces(&self, buf: Option<Buf>, range: Range, min: usize) -> Vec<Piece> {
        let len = usize::from(range.len).max(min);
        let cap = if buf.is_some() { BUF_LEN } else { FR_WINDOW };
        let start = usize::from(range.off) % (cap - len + 1);
        range
            .split
            .pieces(len)
            .into_iter()
            .map(|(off, n)| match buf {
                Some(buf) => Piece::Buf(buf, start + off, n),
                None => Piece::Fr(self.fr_posted.0 + (start + off) as u64, n),
            })
            .collect()
    }

    /// Resolves `remote` for `len` bytes: the model target and the real
    /// remote address and token.
    fn target(&self, remote: Remote, len: usize) -> (Target, u64, u32) {
        let rkey = self.mem.rkey();
        match remote {
            Remote::Region(off) => {
                let at = usize::from(off) % (BUF_LEN - len + 1);
                (Target::Mem(at), self.mem.raddr(at as u64), rkey)
            }
            Remote::Beyond(over) => {
                let at = BUF_LEN - len + 1 + usize::from(over) % 64;
                (Target::Mem(at), self.mem.raddr(at as u64), rkey)
            }
            Remote::Window(off) | Remote::WindowBeyond(off) => {
                let beyond = matches!(remote, Remote::WindowBeyond(_));
                let (generation, at) = match self.model.window {
                    // Windows are at least MAX_MSG long (see `bind`).
                    Some(w) if beyond => (Some(w.generation), w.offset + w.len - len + 1),
                    Some(w) => (
                        Some(w.generation),
                        w.offset + usize::from(off) % (w.len - len + 1),
                    ),
                    None => (None, usize::from(off) % (BUF_LEN - len + 1)),
                };
                let target = Target::Window {
                    generation,
                    offset: at,
                };
                (target, self.mem.raddr(at as u64), self.mw.remote_key())
            }
            Remote::BadKey => (
                Target::BadKey,
                self.mem.raddr(0),
                rkey.wrapping_add(1 << 16),
            ),
        }
    }

    fn apply(&mut self, op: Op) {
        match op {
            Op::Send {
                local,
                range,
                flags,
            } => self.send(local, range, flags),
            Op::Receive { slot, len, split } => self.receive(slot, len, split),
            Op::Write {
                local,
                range,
                remote,
                flags,
            } => self.write(local, range, remote, flags),
            Op::Read {
                sink,
                range,
                remote,
                flags,
            } => self.read(sink, range, remote, flags),
            Op::Poll { cq, max } => self.poll(cq, usize::from(max)),
            Op::Arm { cq, arm } => {
                self.arms[cq.index()] += 1;
                self.cq(cq).arm(arm);
            }
            Op::Flush { b } => {
                self.settle();
                if b {
                    self.pair.b.qp.flush();
                    self.model.flush_b();
                    self.model.run_a();
                } else {
                    self.pair.a.qp.flush();
                    self.model.flush_a();
                    self.model.run_a();
                }
            }
            Op::FastRegister { base, long, defer } => self.fast_register(base, long, defer),
            Op::InvalidateFr { defer } => self.invalidate_fr(defer),
            Op::Remap {
                base,
                long,
                defer_invalidate,
                defer_register,
            } => {
                self.invalidate_fr(defer_invalidate);
                self.fast_register(base, long, defer_register);
            }
            Op::Rebind { off, len, flags } => self.rebind(off, len, flags),
            Op::Bind { off, len } => {
                self.settle();
                self.bind(off, len, false);
                self.settle();
            }
            Op::InvalidateWindow => {
                self.settle();
                self.invalidate_window(false);
                self.settle();
            }
            Op::Refused { kind } => self.refused(kind),
            Op::RefusedReceive => {
                let context = self.context();
                let sges: Vec<Sge> = (0..5).map(|i| self.recv.sge(i, 1)).collect();
                let result = self.pair.b.qp.post_receive(context, &sges);
                assert_eq!(result, Err(PostError::TooManySge));
                self.model.outcomes.insert(context, Outcome::Refused);
            }
        }
    }

    fn send(&mut self, local: Local, range: Range, flags: WrFlags) {
        let context = self.context();
        let solicited = flags.contains(WrFlags::SOLICITED);
        let (result, source) = self.post_source(local, range, 0, flags, |qp, payload, flags| {
            qp.post_send(context, payload, flags, None)
        });
        assert_eq!(result, Ok(()), "Send {context} refused");
        self.queue_a(context, Work::Send { source, solicited }, flags);
    }

    /// Posts a Send or Write from A through `post`, its data the pieces of
    /// `range` (at least `min` bytes) in `local`: inline when asked and
    /// from the source buffer, by SGEs otherwise (without the INLINE flag).
    /// Returns the post's result and what the model expects the peer to get.
    fn post_source(
        &mut self,
        local: Local,
        range: Range,
        min: usize,
        flags: WrFlags,
        post: impl FnOnce(&Arc<Qp>, Payload<'_>, WrFlags) -> Result<(), PostError>,
    ) -> (Result<(), PostError>, Source) {
        let pieces = self.pieces(local.buf(), range, min);
        if flags.contains(WrFlags::INLINE) && matches!(local, Local::Src) {
            let (spans, source) = self.inline(&pieces);
            (
                post(&self.pair.a.qp, Payload::Inline(&spans), flags),
                source,
            )
        } else {
            let sges: Vec<Sge> = pieces.iter().map(|&p| self.sge(p)).collect();
            let flags = flags - WrFlags::INLINE;
            let result = post(&self.pair.a.qp, Payload::Sges(&sges), flags);
            (result, Source::Pieces(pieces))
        }
    }

    /// Queues request `context`, which A's queue accepted, in the model.
    fn queue_a(&mut self, context: usize, work: Work, flags: WrFlags) {
        let silent = flags.contains(WrFlags::SILENT_SUCCESS);
        let wqe = Wqe {
            context,
            work,
            silent,
        };
        self.model.post_a(wqe, flags.contains(WrFlags::DEFER));
    }

    /// Inline spans over the source buffer, and the bytes they hold now.
    fn inline(&mut self, pieces: &[Piece]) -> (Vec<super::memory::Span>, Source) {
        let whole = self.src.buffer.span();
        let mut bytes = Vec::new();
        let spans = pieces
            .iter()
            .map(|p| {
                let Piece::Buf(Buf::Src, off, len) = *p else {
                    unreachable!("inline data comes from the source buffer")
                };
                bytes.extend_from_slice(&self.model.buf(Buf::Src)[off..off + len]);
                whole.sub(off, len).unwrap()
            })
            .collect();
        (spans, Source::Inline(bytes))
    }

    fn receive(&mut self, slot: u8, len: u16, split: Split) {
        let context = self.context();
        let pieces = Split::receive_pieces(slot, len, split);
        let sges: Vec<Sge> = pieces
            .iter()
            .map(|&(off, n)| self.recv.sge(off as u64, u32::try_from(n).unwrap()))
            .collect();
        let result = self.pair.b.qp.post_receive(context, &sges);
        assert_eq!(result, Ok(()), "receive {context} refused");
        self.model.post_receive(Recv { context, pieces });
    }

    fn write(&mut self, local: Local, range: Range, remote: Remote, flags: WrFlags) {
        let context = self.context();
        let (target, addr, key) = self.target(remote, usize::from(range.len).max(1));
        let (result, source) = self.post_source(local, range, 1, flags, |qp, payload, flags| {
            qp.post_write(context, payload, addr, key, flags)
        });
        assert_eq!(result, Ok(()), "Write {context} refused");
        self.queue_a(context, Work::Write { source, target }, flags);
    }

    fn read(&mut self, sink: SinkKind, range: Range, remote: Remote, flags: WrFlags) {
        let context = self.context();
        let sinks = self.pieces(sink.buf(), range, 1);
        let (target, addr, key) = self.target(remote, usize::from(range.len).max(1));
        let sges: Vec<Sge> = sinks.iter().map(|&p| self.sge(p)).collect();
        let result = self.pair.a.qp.post_read(context, &sges, addr, key, flags);
        assert_eq!(result, Ok(()), "Read {context} refused");
        self.queue_a(context, Work::Read { sinks, target }, flags);
    }

    fn fast_register(&mut self, base: bool, long: bool, defer: bool) {
        let context = self.context();
        let base = FR_BASES[usize::from(base)];
        let len = FR_LENS[usize::from(long)];
        let pages = self.lam.page_list();
        let flags = deferred(defer);
        // A FastRegister queued behind others of the region stages its page
        // list in a slot of its own: the region grows one when all are taken
        // (rules D2, P18), so it is never refused for want of one.
        let result = self.pair.a.qp.post_fast_register(
            context,
            &self.fr,
            &pages,
            0,
            len,
            base,
            Access::LOCAL_WRITE,
            flags,
        );
        assert_eq!(result, Ok(()), "FastRegister {context} refused");
        self.fr_posted = (base, len);
        self.queue_a(context, Work::FastRegister { base, len }, flags);
    }

    fn invalidate_fr(&mut self, defer: bool) {
        let context = self.context();
        let flags = deferred(defer);
        let target = InvalidateTarget::Mr(Arc::clone(&self.fr));
        let result = self.pair.a.qp.post_invalidate(context, target, flags);
        assert_eq!(result, Ok(()), "Invalidate {context} refused");
        self.queue_a(context, Work::Invalidate, flags);
    }

    /// B rebinds its window: Invalidate (if the model says it is bound,
    /// or when `force`), then Bind. With `chain`, the Invalidate is posted
    /// with DEFER and the Bind rings both (M21, D2); otherwise the engine is
    /// settled in between.
    fn rebind(&mut self, off: u16, len: u16, flags: RebindFlags) {
        self.settle();
        if self.model.window.is_some() {
            self.invalidate_window(flags.chain);
            if !flags.chain {
                self.settle();
            }
        }
        self.bind(off, len, flags.silent);
        self.settle();
    }

    /// B posts a Bind of its window over `len` bytes at `off` of its region.
    fn bind(&mut self, off: u16, len: u16, silent: bool) {
        let context = self.context();
        // At most half the region in, at least MAX_MSG long.
        let offset = usize::from(off) % (BUF_LEN / 2);
        let len = MAX_MSG + usize::from(len) % (BUF_LEN - offset - MAX_MSG + 1);
        let wr_flags = if silent {
            WrFlags::SILENT_SUCCESS
        } else {
            WrFlags::empty()
        };
        let result = self.pair.b.qp.post_bind(
            context,
            &self.mem.mr,
            &self.mw,
            self.mem.raddr(offset as u64),
            len as u64,
            Access::REMOTE_READ | Access::REMOTE_WRITE,
            wr_flags,
        );
        assert_eq!(result, Ok(()), "Bind {context} refused");
        self.model.post_bind(context, offset, len, silent);
    }

    fn invalidate_window(&mut self, defer: bool) {
        let context = self.context();
        let target = InvalidateTarget::Mw(Arc::clone(&self.mw));
        let flags = deferred(defer);
        let result = self.pair.b.qp.post_invalidate(context, target, flags);
        assert_eq!(result, Ok(()), "Invalidate {context} refused");
        self.model.post_invalidate_window(context);
    }

    /// A post A's queue refuses inline, whatever its state.
    fn refused(&mut self, kind: u8) {
        let context = self.context();
        let qp = Arc::clone(&self.pair.a.qp);
        let (result, expected) = match kind {
            0 => {
                // P9: five SGEs on a queue that allows four.
                let sges: Vec<Sge> = (0..5).map(|i| self.src.sge(i, 1)).collect();
                let r = qp.post_send(context, Payload::Sges(&sges), WrFlags::empty(), None);
                (r, PostError::TooManySge)
            }
            1 => {
                // P12: more inline bytes than the QP's inline size.
                let whole = self.src.buffer.span();
                let spans = [whole.sub(0, 200).unwrap(), whole.sub(200, 200).unwrap()];
                let (addr, key) = (self.mem.raddr(0), self.mem.rkey());
                let r = qp.post_write(context, Payload::Inline(&spans), addr, key, WrFlags::INLINE);
                (r, PostError::InlineTooLong)
            }
            2 => {
                // A Read cannot be inline.
                let sges = [self.sink.sge(0, 8)];
                let (addr, key) = (self.mem.raddr(0), self.mem.rkey());
                let r = qp.post_read(context, &sges, addr, key, WrFlags::INLINE);
                (r, PostError::InvalidParameter)
            }
            3 => {
                // M16: a base that is not the FBO plus whole pages.
                let pages = self.lam.page_list();
                let r = qp.post_fast_register(
                    context,
                    &self.fr,
                    &pages,
                    0,
                    PAGE_SIZE,
                    FR_BASES[0] + 1,
                    Access::LOCAL_WRITE,
                    WrFlags::empty(),
                );
                (r, PostError::InvalidParameter)
            }
            _ => {
                // M22: Invalidate never applies to a registered region.
                let target = InvalidateTarget::Mr(Arc::clone(&self.src.mr));
                let r = qp.post_invalidate(context, target, WrFlags::empty());
                (r, PostError::InvalidParameter)
            }
        };
        assert_eq!(
            result,
            Err(expected),
            "refused post {context} (kind {kind})"
        );
        self.model.refuse_a(context);
    }

    /// Polls up to `max` completions and checks them against the model.
    fn poll(&mut self, which: Which, max: usize) {
        self.settle();
        let mut out = vec![Completion::new(WcStatus::Success, Opcode::Send, 0, 0); max];
        let n = self.cq(which).poll(&mut out);
        let queued = self.model.cqs[which.index()].len();
        assert_eq!(
            n,
            max.min(queued),
            "{which:?}: polled {:?}, model expects {:?}",
            &out[..n],
            self.model.cqs[which.index()]
        );
        for completion in &out[..n] {
            self.take(which, completion);
        }
    }

    /// Matches one polled completion with the model's next expected one (by
    /// position, or by context on B's receive CQ in deferred mode).
    fn take(&mut self, which: Which, completion: &Completion) {
        let by_context = self.deferred && which == Which::BReceive;
        let expected = &mut self.model.cqs[which.index()];
        let position = if by_context {
            expected
                .iter()
                .position(|e| e.completion.request_context == completion.request_context)
        } else {
            Some(0)
        };
        let want = position.and_then(|i| expected.remove(i));
        assert!(
            want.is_some_and(|w| w.matches(completion)),
            "{which:?}: polled {completion:?}, model expects {want:?}"
        );
        self.polled.push(*completion);
    }

    /// Flushes both sides, drains every CQ and checks the whole run.
    fn finish(mut self) {
        self.apply(Op::Flush { b: false });
        self.apply(Op::Flush { b: true });
        self.settle();
        for which in Which::ALL {
            let extra: Vec<Completion> = drain(self.cq(which));
            for completion in &extra {
                self.take(which, completion);
            }
            assert!(
                self.model.cqs[which.index()].is_empty(),
                "{which:?}: missing completions {:?}",
                self.model.cqs[which.index()]
            );
            let events = self.recorder(which).events();
            assert!(
                events.len() <= self.arms[which.index()],
                "C3: {which:?} notified {} times for {} arms",
                events.len(),
                self.arms[which.index()]
            );
            assert!(events.iter().all(|e| *e == CqEvent::Completion));
        }
        assert!(
            self.pair.a.rcq.drain().is_empty(),
            "A's receive CQ got entries"
        );
        assert!(self.model.queue.is_empty() && self.model.receives.is_empty());
        self.check_exactly_once();
        for (buf, real) in [
            (Buf::Src, self.src.buffer.bytes()),
            (Buf::Sink, self.sink.buffer.bytes()),
            (Buf::Recv, self.recv.buffer.bytes()),
            (Buf::Mem, self.mem.buffer.bytes()),
            (Buf::Lam, self.lam.bytes()),
        ] {
            let want = self.model.buf(buf);
            if let Some(at) = (0..want.len()).find(|&i| want[i] != real[i]) {
                panic!(
                    "{buf:?}: byte {at} is {:#04x}, model says {:#04x}",
                    real[at], want[at]
                );
            }
        }
    }

    /// P6, P14, P15, D3: one completion per accepted post except silent
    /// successes, none for refused posts, nothing else.
    fn check_exactly_once(&self) {
        let mut seen: HashMap<usize, usize> = HashMap::new();
        for c in &self.polled {
            *seen.entry(c.request_context).or_default() += 1;
        }
        for (&context, &outcome) in &self.model.outcomes {
            let count = seen.remove(&context).unwrap_or(0);
            match outcome {
                Outcome::Refused => assert_eq!(count, 0, "refused post {context} completed"),
                Outcome::Completed { status, silent } => {
                    let want = usize::from(!(status.is_success() && silent));
                    assert_eq!(count, want, "post {context} ({status:?}, silent {silent})");
                }
                Outcome::Pending => panic!("post {context} never completed in the model"),
            }
        }
        assert!(seen.is_empty(), "completions of unknown posts: {seen:?}");
    }
}

/// Runs `ops` on a fresh pair with the engine in `mode` and checks it.
fn run(mode: EngineMode, ops: &[Op]) {
    let mut h = Harness::new(mode);
    for &op in ops {
        h.apply(op);
    }
    h.finish();
}

fn config() -> Config {
    Config {
        cases: 128,
        failure_persistence: None,
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config())]

    /// Rules P6, P14, P15, P21, P23, D2–D5, E1, E5, E7, M34, P20: the
    /// inline engine against the model.
    #[test]
    fn test_model_every_successful_post_completes_exactly_once_inline(
        ops in prop::collection::vec(op(), 1..40)
    ) {
        run(EngineMode::Inline, &ops);
    }

    /// The same with the deferred engine (worker threads).
    #[test]
    fn test_model_every_successful_post_completes_exactly_once_deferred(
        ops in prop::collection::vec(op(), 1..40)
    ) {
        run(EngineMode::Deferred, &ops);
    }
}

// ----- bugs found by the model -------------------------------------------------

/// Runs `case` on a thread of its own and fails if it has not finished
/// within ten seconds (a deadlock leaves that thread blocked, not the test).
fn within_deadline<T: Send + 'static>(case: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(case());
    });
    match finished.recv_timeout(std::time::Duration::from_secs(10)) {
        Ok(value) => value,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("deadlocked"),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("the case panicked"),
    }
}

/// Bug in `Qp::post_receive` (qp.rs): when the receive wakes a Send of the
/// peer that waited for it (RNR), it calls `peer.kick()` inside
/// `if let Some(peer) = self.sq.lock().peer.clone() { .. }`, so its own
/// send-queue guard lives across the kick. With the inline engine the kick
/// runs the peer's queue in this thread; when a request there fails (here the
/// Send, on a receive too small for it, E7) `terminate` puts this QP in the
/// error state through `enter`, which locks the same send queue again: the
/// thread deadlocks (rule I4; in the kernel, a spin lock taken twice). Any
/// failing request behind the woken Send does the same. Found by the inline
/// model. Fixed by taking the peer out of the guard before kicking it; this
/// is the regression test.
#[test]
fn test_receive_that_wakes_a_failing_send_does_not_deadlock_inline_rule_i4() {
    let (sent, received) = within_deadline(|| {
        let pair = Pair::new(EngineMode::Inline);
        let (src, dst) = pair.send_buffers(100, 1, 10);
        let sges = [src.sge(0, 100)];
        pair.a.send(1, &sges, None).unwrap();
        // The Send waits for a receive (RNR); this one is too small for it.
        pair.b.qp.post_receive(2, &[dst.sge(0, 10)]).unwrap();
        (pair.a.scq.drain(), pair.b.rcq.drain())
    });
    let status = |c: &Vec<Completion>| c.iter().map(|c| c.status).collect::<Vec<_>>();
    assert_eq!(status(&sent), [WcStatus::RemoteOperationError]);
    assert_eq!(status(&received), [WcStatus::ReceiveTooSmall]);
}
