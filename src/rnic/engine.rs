//! The data engine: executes one initiator request between two connected
//! QPs.
//!
//! Every byte moves through [`memory`]'s checked copies, after
//! both sides' tokens, ranges and rights have been resolved; nothing here is
//! `unsafe`. The engine runs in the QP's runner (one at a time per QP, see
//! `qp.rs`), so requests of one QP execute and complete in post order; a
//! Read therefore never overlaps another Read of the same QP, which honours
//! READ_FENCE (P16) and every read limit of at least 1 (N21).
//!
//! A Send that finds no receive posted at the peer waits for one, like an
//! InfiniBand QP with an infinite RNR retry count: the spec leaves this open
//! (NDK documents no receiver-not-ready error), and waiting is what lets a
//! consumer post its receives a moment after its peer's Send without losing
//! the connection. The wait costs nothing: the runner stops, and the peer's
//! next receive kicks it again.
//!
//! Failures follow rules E5, E7, M24 and M34: the failing request completes
//! with an error status, the other side's receive (if one was consumed)
//! completes with its own error, and the connection is terminated.

use super::memory::{self, Span};
use super::mr::{Segment, TokenCache};
use super::qp::{FEW_RECV_SGE, MAX_SGE, NoReceive, Qp, QpState, SendOp, SendWqe};
use super::types::{Access, Completion, Opcode, Sge, WcStatus, WrFlags};
use crate::kernel::sync::Arc;

/// The data of a request, copied out of its queue slot.
pub(crate) struct Data<'a> {
    /// SGEs (non-inline requests).
    pub(crate) sges: &'a [Sge],
    /// Inline bytes (inline requests).
    pub(crate) inline: &'a [u8],
}

/// Resolved SGEs of one side of a transfer, on the stack.
///
/// The first segment has a place of its own; the others go to `rest`, room
/// that [`with_list`] makes only for a side of more than one SGE. Most
/// requests carry one SGE, and building, moving and dropping 32 places per
/// side of every request was a visible share of a 64 B Send
/// (docs/performance.md, "Profile of the 64 B ping-pong").
struct SegList<'r> {
    first: Option<Segment>,
    rest: &'r mut [Option<Segment>],
    len: usize,
    total: u64,
}

impl<'r> SegList<'r> {
    const fn new(rest: &'r mut [Option<Segment>]) -> Self {
        Self {
            first: None,
            rest,
            len: 0,
            total: 0,
        }
    }

    /// Appends `seg`; `false` when the list has no room left.
    fn push(&mut self, seg: Segment) -> bool {
        let place = match self.len.checked_sub(1) {
            None => &mut self.first,
            Some(i) => {
                let Some(place) = self.rest.get_mut(i) else {
                    return false;
                };
                place
            }
        };
        self.total = self.total.saturating_add(seg.len());
        *place = Some(seg);
        self.len += 1;
        true
    }

    fn get(&self, i: usize) -> Option<&Segment> {
        match i.checked_sub(1) {
            None => self.first.as_ref(),
            Some(i) => self.rest.get(i)?.as_ref(),
        }
    }
}

/// Calls `f` with an empty list with room for `n` segments (at most
/// [`MAX_SGE`]); the room beyond the first is made only when `n > 1`.
fn with_list<R>(n: usize, f: impl FnOnce(&mut SegList<'_>) -> R) -> R {
    if n <= 1 {
        f(&mut SegList::new(&mut []))
    } else {
        let mut rest: [Option<Segment>; MAX_SGE - 1] = core::array::from_fn(|_| None);
        f(&mut SegList::new(&mut rest))
    }
}

/// Where the bytes of a transfer come from.
enum Source<'a> {
    Segments(&'a SegList<'a>),
    Bytes(&'a [u8]),
}

impl Source<'_> {
    fn total(&self) -> u64 {
        match self {
            Self::Segments(list) => list.total,
            Self::Bytes(bytes) => bytes.len() as u64,
        }
    }
}

/// A position in a segment list.
struct Cursor<'a> {
    list: &'a SegList<'a>,
    index: usize,
    offset: u64,
}

impl<'a> Cursor<'a> {
    const fn new(list: &'a SegList<'a>) -> Self {
        Self {
            list,
            index: 0,
            offset: 0,
        }
    }

    /// The next contiguous run of at most `max` bytes; `Err` when the mapping
    /// changed under a segment, `Ok(None)` at the end.
    fn peek(&mut self, max: u64) -> Result<Option<Span>, ()> {
        loop {
            let Some(seg) = self.list.get(self.index) else {
                return Ok(None);
            };
            if self.offset >= seg.len() {
                self.index += 1;
                self.offset = 0;
                continue;
            }
            return seg.run(self.offset, max).map(Some).ok_or(());
        }
    }

    fn advance(&mut self, n: u64) {
        self.offset = self.offset.saturating_add(n);
    }
}

/// Copies all of `src` into the start of `dst` (whose total must be at least
/// as large), run by run.
fn transfer(dst: &SegList<'_>, src: &Source<'_>) -> Result<(), ()> {
    let mut out = Cursor::new(dst);
    match src {
        Source::Bytes(bytes) => {
            let mut rest = *bytes;
            while !rest.is_empty() {
                let span = out.peek(rest.len() as u64)?.ok_or(())?;
                let (head, tail) = rest.split_at(span.len().min(rest.len()));
                memory::copy_from_slice(span, head).map_err(|_| ())?;
                out.advance(head.len() as u64);
                rest = tail;
            }
        }
        Source::Segments(list) => {
            let mut input = Cursor::new(list);
            let mut remaining = list.total;
            while remaining > 0 {
                let from = input.peek(remaining)?.ok_or(())?;
                let to = out.peek(from.len() as u64)?.ok_or(())?;
                let n = to.len().min(from.len());
                let piece = from.sub(0, n).ok_or(())?;
                memory::copy(to, piece).map_err(|_| ())?;
                input.advance(n as u64);
                out.advance(n as u64);
                remaining = remaining.saturating_sub(n as u64);
                if n == 0 {
                    return Err(());
                }
            }
        }
    }
    Ok(())
}

/// The regions a runner's pass resolved, by token: its own QP's and the
/// peer's (receive SGEs). Lives for one pass of the runner, so that a chain
/// of requests over the same regions looks each token up once and then
/// resolves it with no lock and no count (see [`TokenCache`]); its uses of
/// the regions end with the pass (drop).
#[derive(Default)]
pub(crate) struct Tokens {
    local: TokenCache,
    peer: TokenCache,
}

impl Tokens {
    /// Between two requests, when no segment is alive: releases the regions
    /// a deregistration or close waits for (M11, L8). Called by `execute`.
    pub(crate) fn between_requests(&mut self) {
        self.local.between_requests();
        self.peer.between_requests();
    }

    /// Between two requests, when no segment is alive: releases every
    /// region the pass holds. Called by the runner before it reports a
    /// completion that may be the last one the consumer waits for, so that
    /// a consumer closing or deregistering a region once it has seen the
    /// completions of every request over it is done at once (L18, M11),
    /// whichever engine runs the pass.
    pub(crate) fn release(&mut self) {
        self.local.clear();
        self.peer.clear();
    }
}

/// Resolves a QP's own SGEs (rule P11), through `cache`, into `list`
/// (filled in place: a `SegList` is large, and returning one by value cost
/// a copy of all of it per side of every request).
fn resolve_local(
    qp: &Qp,
    sges: &[Sge],
    need: Access,
    cache: &mut TokenCache,
    list: &mut SegList<'_>,
) -> Result<(), WcStatus> {
    for sge in sges {
        let seg = cache
            .resolve_local(qp.device(), qp.pd(), sge, need)
            .map_err(super::mr::Denied::local_status)?;
        if !list.push(seg) {
            return Err(WcStatus::LengthError);
        }
    }
    Ok(())
}

/// Executes `wqe` of `qp`, connected to `peer`. Returns its completion
/// status, or `None` when a Send must wait for a receive at the peer.
pub(crate) fn execute(
    qp: &Arc<Qp>,
    peer: &Arc<Qp>,
    wqe: &SendWqe,
    data: &Data<'_>,
    tokens: &mut Tokens,
) -> Option<WcStatus> {
    // No segment of an earlier request is alive: each was dropped before
    // `execute` returned.
    tokens.between_requests();
    // What a Send or a Write carries: its inline bytes, or its SGEs
    // resolved against the QP's PD (P11); a Read's SGEs are its sink.
    let carries = matches!(wqe.op, SendOp::Send { .. } | SendOp::Write { .. });
    if carries && !wqe.flags.contains(WrFlags::INLINE) {
        with_list(data.sges.len(), |local| {
            if let Err(status) =
                resolve_local(qp, data.sges, Access::empty(), &mut tokens.local, local)
            {
                return Some(status);
            }
            dispatch(qp, peer, wqe, data, &Source::Segments(local), tokens)
        })
    } else {
        dispatch(qp, peer, wqe, data, &Source::Bytes(data.inline), tokens)
    }
}

/// Executes `wqe`; a Send's or a Write's bytes are in `source`.
fn dispatch(
    qp: &Arc<Qp>,
    peer: &Arc<Qp>,
    wqe: &SendWqe,
    data: &Data<'_>,
    source: &Source<'_>,
    tokens: &mut Tokens,
) -> Option<WcStatus> {
    match &wqe.op {
        SendOp::Send { invalidate } => send(qp, peer, wqe, source, *invalidate, &mut tokens.peer),
        SendOp::Write {
            remote_addr,
            remote_key,
        } => {
            let len = source.total();
            let target = match peer.device().resolve_remote(
                peer.pd(),
                peer.id(),
                *remote_key,
                *remote_addr,
                len,
                Access::REMOTE_WRITE,
            ) {
                Ok(seg) => seg,
                Err(denied) => return Some(denied.remote_status()),
            };
            let mut dst = SegList::new(&mut []);
            dst.push(target);
            if transfer(&dst, source).is_err() {
                return Some(WcStatus::RemoteAccessError);
            }
            qp.device()
                .counters
                .account_transfer(&peer.device().counters, len);
            Some(WcStatus::Success)
        }
        SendOp::Read {
            remote_addr,
            remote_key,
        } => Some(read(
            qp,
            peer,
            wqe,
            data.sges,
            (*remote_addr, *remote_key),
            &mut tokens.local,
        )),
        SendOp::Bind { .. } | SendOp::FastRegister { .. } | SendOp::Invalidate { .. } => {
            execute_local(qp.id(), wqe)
        }
    }
}

/// Executes a request that stays on this side (Bind, FastRegister,
/// Invalidate); `None` for a data transfer.
pub(crate) fn execute_local(qp_id: u32, wqe: &SendWqe) -> Option<WcStatus> {
    match &wqe.op {
        SendOp::Send { .. } | SendOp::Write { .. } | SendOp::Read { .. } => None,
        SendOp::Bind {
            mw,
            mr,
            key,
            base,
            len,
            access,
        } => Some(
            mw.bind(*key, mr, *base, *len, *access, qp_id)
                .map_or_else(|s| s, |()| WcStatus::Success),
        ),
        SendOp::FastRegister { mr, slot } => Some(
            mr.fast_register(*slot)
                .map_or_else(|s| s, |()| WcStatus::Success),
        ),
        SendOp::Invalidate { target } => {
            let result = match target {
                super::qp::InvalidateTarget::Mr(mr) => mr.invalidate(),
                super::qp::InvalidateTarget::Mw(mw) => mw.invalidate(),
            };
            Some(result.map_or_else(|s| s, |()| WcStatus::Success))
        }
    }
}

/// A Send or SendAndInvalidate: consumes the peer's oldest receive.
fn send(
    qp: &Arc<Qp>,
    peer: &Arc<Qp>,
    wqe: &SendWqe,
    source: &Source<'_>,
    invalidate: Option<u32>,
    peer_tokens: &mut TokenCache,
) -> Option<WcStatus> {
    if super::fault::hit(super::fault::Kind::ReceiveEmpty) {
        return Some(WcStatus::RemoteOperationError); // fault injection: E5, E8
    }
    let mut few = [Sge::default(); FEW_RECV_SGE];
    let mut many = None;
    let taken = peer.take_receive_into(&mut few, &mut many);
    if taken.is_err() && peer.srq().is_some() {
        // A close of the peer may wait on the take that backed off
        // (`Qp::take_with`: only a take from an SRQ counts itself before it
        // reads the state); no lock is held here.
        peer.notify_quiescent();
    }
    let recv = match taken {
        Ok(taken) => taken,
        // The Send waits: the peer's next receive kicks this runner again.
        Err(NoReceive::Empty) => return None,
        // The peer is disconnecting (X5): it left `Connected` and is about
        // to tell this side (`Qp::disconnect` calls `peer_gone`, which kicks
        // this runner once this side left `Connected` too). The Send waits
        // for that and completes cancelled (E3), not as an error that would
        // end the connection a second time.
        Err(NoReceive::Gone) if peer.state() == QpState::Disconnected => return None,
        // The peer's receive side is gone (flushed, disconnected, closed,
        // its SRQ failed): the message can never land (E5).
        Err(NoReceive::Gone) => return Some(WcStatus::RemoteOperationError),
    };
    let len = source.total();
    let peer_context = peer.config().context;
    let fail_receive = |status: WcStatus| {
        peer.complete_taken(Completion::new(
            status,
            Opcode::Receive,
            peer_context,
            recv.context,
        ));
    };
    let recv_sges = match &many {
        Some(wqe) => wqe.sges(),
        None => few.get(..recv.nsge).unwrap_or_default(),
    };
    // The receive's segments are released (the closure's end) before its
    // completion, or its failure, is reported.
    let placed = with_list(recv_sges.len(), |dst| {
        resolve_local(peer, recv_sges, Access::LOCAL_WRITE, peer_tokens, dst)?;
        // E7: a message larger than the receive fails both sides.
        if dst.total < len {
            return Err(WcStatus::ReceiveTooSmall);
        }
        if transfer(dst, source).is_err() {
            return Err(WcStatus::LocalAccessError);
        }
        let mut completion = Completion::new(
            WcStatus::Success,
            Opcode::Receive,
            peer_context,
            recv.context,
        );
        completion.bytes = u32::try_from(len).unwrap_or(u32::MAX);
        completion.solicited = wqe.flags.contains(WrFlags::SOLICITED);
        if let Some(key) = invalidate {
            // M24 / C2: the receiver invalidates the named token; an invalid
            // one aborts the connection. Every peer of this RNIC supports
            // remote invalidation, which M25 leaves the consumer to agree out
            // of band.
            peer.device()
                .invalidate_key(peer.pd(), key)
                .map_err(|_| WcStatus::InvalidRequest)?;
            completion.opcode = Opcode::ReceiveAndInvalidate;
            completion.invalidated_key = key;
        }
        Ok(completion)
    });
    let completion = match placed {
        Ok(completion) => completion,
        Err(status) => {
            fail_receive(status);
            return Some(WcStatus::RemoteOperationError);
        }
    };
    qp.device()
        .counters
        .account_transfer(&peer.device().counters, len);
    peer.complete_taken(completion);
    Some(WcStatus::Success)
}

/// An RDMA Read into `sges` (rules P19, P20, M9, M26, N21).
fn read(
    qp: &Arc<Qp>,
    peer: &Arc<Qp>,
    wqe: &SendWqe,
    sges: &[Sge],
    (remote_addr, remote_key): (u64, u32),
    tokens: &mut TokenCache,
) -> WcStatus {
    // N21: with an outbound limit of 0 no Read may ever be in flight.
    if qp.read_limits().1 == 0 {
        return WcStatus::InvalidRequest;
    }
    // M9: the adapter reports RDMA_READ_SINK_NOT_REQUIRED; local write suffices.
    // The sink's segments are released at the closure's end.
    let moved = with_list(sges.len(), |dst| {
        resolve_local(qp, sges, Access::LOCAL_WRITE, tokens, dst)?;
        let len = dst.total;
        let source = peer
            .device()
            .resolve_remote(
                peer.pd(),
                peer.id(),
                remote_key,
                remote_addr,
                len,
                Access::REMOTE_READ,
            )
            .map_err(super::mr::Denied::remote_status)?;
        let mut src = SegList::new(&mut []);
        src.push(source);
        if transfer(dst, &Source::Segments(&src)).is_err() {
            return Err(WcStatus::RemoteAccessError);
        }
        Ok(len)
    });
    let len = match moved {
        Ok(len) => len,
        Err(status) => return status,
    };
    peer.device()
        .counters
        .account_transfer(&qp.device().counters, len);
    if wqe.flags.contains(WrFlags::READ_LOCAL_INVALIDATE) {
        // M26: a successful Read invalidates its first SGE's token. A token
        // that names nothing invalidatable is left alone (the rule makes the
        // buffer undefined only on failure).
        if let Some(first) = sges.first() {
            let _ = qp.device().invalidate_key(qp.pd(), first.key);
        }
    }
    WcStatus::Success
}

#[cfg(test)]
#[cfg(not(loom))]
mod smoke {
    use crate::rnic::device::EngineMode;
    use crate::rnic::qp::Payload;
    use crate::rnic::testing::Pair;
    use crate::rnic::types::{Access, Opcode, WcStatus, WrFlags};

    #[test]
    fn test_send_receive_write_read_smoke() {
        for mode in [EngineMode::Inline, EngineMode::Deferred] {
            let pair = Pair::new(mode);
            let src = pair.a.pattern(100, 1, Access::empty());
            let dst = pair.b.buffer(
                128,
                0,
                Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
            );
            pair.send_to_b(7, &[dst.sge(0, 128)], 9, &[src.sge(0, 100)]);
            let sent = pair.a.scq.drain();
            let got = pair.b.rcq.drain();
            assert_eq!(sent.len(), 1, "{mode:?}");
            assert_eq!(sent[0].status, WcStatus::Success);
            assert_eq!(got[0].bytes, 100);
            assert_eq!(got[0].opcode, Opcode::Receive);
            assert_eq!(got[0].request_context, 7);
            assert_eq!(got[0].qp_context, 0xB);
            assert_eq!(&dst.buffer.bytes()[..100], src.buffer.bytes());
            // Write then read back.
            let w = pair.a.pattern(64, 9, Access::LOCAL_WRITE);
            pair.a
                .qp
                .post_write(
                    1,
                    Payload::Sges(&[w.sge(0, 64)]),
                    dst.raddr(32),
                    dst.rkey(),
                    WrFlags::empty(),
                )
                .unwrap();
            let r = pair.a.buffer(64, 0, Access::LOCAL_WRITE);
            pair.a
                .qp
                .post_read(
                    2,
                    &[r.sge(0, 64)],
                    dst.raddr(32),
                    dst.rkey(),
                    WrFlags::empty(),
                )
                .unwrap();
            pair.settle();
            let done = pair.a.scq.drain();
            assert_eq!(
                done.iter()
                    .map(|c| (c.opcode, c.status))
                    .collect::<Vec<_>>(),
                [
                    (Opcode::Write, WcStatus::Success),
                    (Opcode::Read, WcStatus::Success)
                ]
            );
            assert_eq!(r.buffer.bytes(), w.buffer.bytes());
        }
    }
}
