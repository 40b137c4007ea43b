//! The transmit side of a link, run by the QP's runner: one FPDU at a time
//! built (in the stream's lent room or the link's buffer) and offered to
//! the stream; initiator requests in post order (Send, Write, Read Request
//! under the ORD, local operations) alternating with Read Responses, and
//! completed requests retired from the ring head (P23).

use super::{Link, OutRead, Tx, copy_out, one, resolve_local};
use crate::kernel::sync::Arc;
use crate::kernel::sync::atomic::Ordering;
use crate::rnic::engine;
use crate::rnic::fault;
use crate::rnic::iwarp::ddp::{self, DdpHeader};
use crate::rnic::iwarp::mpa;
use crate::rnic::iwarp::rdmap::{self, Message, ReadRequest, SendHeader};
use crate::rnic::iwarp::terminate::LocalCause;
use crate::rnic::qp::{MAX_INLINE, MAX_SGE, Qp, QpState, SendOp, SendWqe};
use crate::rnic::types::{Access, Sge, WcStatus, WrFlags};

/// Writes `header`, `chunk` payload bytes (from `fill`), the pad and the CRC
/// as one FPDU at the start of `buf`; returns its length.
fn write_fpdu_into(
    buf: &mut [u8],
    header: &DdpHeader,
    chunk: usize,
    crc: bool,
    fill: impl FnOnce(&mut [u8]) -> Result<(), ()>,
) -> Option<usize> {
    let hlen = header.len();
    let ulpdu = buf.get_mut(mpa::FPDU_LENGTH_LEN..)?;
    header.write(ulpdu).ok()?;
    fill(ulpdu.get_mut(hlen..hlen + chunk)?).ok()?;
    mpa::seal_fpdu(buf, hlen + chunk, crc).ok()
}

/// Where the transmit position goes after working on a request.
enum Next {
    /// On to the next request; this one completed with the status, or
    /// completes later (`None`: when its FPDU is taken, or its Read answered).
    Done(Option<WcStatus>),
    /// More FPDUs of this request to come.
    Stay,
    /// It cannot go yet (ORD, READ_FENCE).
    Wait,
}

/// What one transmit step did.
pub(super) enum Step {
    /// An FPDU is in the buffer (or a request completed without one).
    Progress,
    /// Nothing to do now.
    Idle,
}

impl Link {
    /// The stream has room again: the runner resumes sending.
    pub fn writable(&self) {
        if let Some(qp) = self.qp.upgrade() {
            qp.kick();
        }
    }

    /// Runs the transmit side and retires completed requests (the QP's
    /// runner calls this in place of the local engine).
    pub(crate) fn run(&self, qp: &Arc<Qp>) {
        loop {
            self.retire_done(qp);
            let (failing, may_send, finishing) = {
                let shared = self.shared.lock();
                (shared.failing, shared.may_send, shared.finishing)
            };
            if qp.state() != QpState::Connected || failing {
                self.wind_down(qp);
                return;
            }
            if !may_send && !finishing {
                // RFC 5044: the responder speaks after the initiator's first
                // FPDU; its arrival kicks the runner.
                return;
            }
            if !self.flush(qp) {
                return;
            }
            let step = if finishing {
                self.finish_step(qp)
            } else {
                self.step(qp)
            };
            match step {
                Step::Progress => {}
                Step::Idle => {
                    self.retire_done(qp);
                    return;
                }
            }
        }
    }

    /// Offers the buffered FPDU to the stream; `true` once it is all taken.
    pub(super) fn flush(&self, qp: &Qp) -> bool {
        let mut tx = self.tx.lock();
        while tx.sent < tx.len {
            // The FPDU that completes a request: its completion is recorded
            // before its last bytes can reach the stream (`mark_sent`).
            let marked = tx.completes.filter(|&slot| self.mark_sent(slot));
            let rest = tx.len - tx.sent;
            let n = match tx.buf.get(tx.sent..tx.len) {
                Some(rest) => self.stream.send(rest),
                None => 0,
            };
            if let Some(slot) = marked {
                if n < rest {
                    // Not all of it went: not sent yet after all.
                    self.unmark_sent(slot);
                } else {
                    tx.completes = None;
                }
            }
            if n == 0 {
                return false;
            }
            tx.sent = tx.sent.saturating_add(n).min(tx.len);
        }
        if tx.len > 0 {
            let counters = &qp.device().counters;
            counters.rdma_out_frames.fetch_add(1, Ordering::Relaxed);
            counters
                .rdma_out_octets
                .fetch_add(tx.len as u64, Ordering::Relaxed);
        }
        tx.len = 0;
        tx.sent = 0;
        if let Some(slot) = tx.completes.take() {
            let mut shared = self.shared.lock();
            if let Some(place) = shared.done.get_mut(slot) {
                place.get_or_insert(WcStatus::Success);
            }
        }
        true
    }

    /// Retires the head requests that are complete, oldest first (P23).
    fn retire_done(&self, qp: &Arc<Qp>) {
        loop {
            let Some((slot, _)) = qp.queued(0) else {
                return;
            };
            let status = {
                let mut shared = self.shared.lock();
                if shared.cursor == 0 {
                    return;
                }
                let Some(status) = shared.done.get_mut(slot).and_then(Option::take) else {
                    return;
                };
                shared.cursor -= 1;
                status
            };
            let mut sges = [Sge::default(); MAX_SGE];
            let mut inline = [0_u8; MAX_INLINE];
            if let Some(wqe) = qp.snapshot(0, &mut sges, &mut inline) {
                qp.retire(&wqe, status);
            }
        }
    }

    /// Builds the next FPDU: a Read Response and an initiator request take
    /// turns.
    fn step(&self, qp: &Arc<Qp>) -> Step {
        let responses = !self.shared.lock().in_reads.is_empty();
        let turn = {
            let mut tx = self.tx.lock();
            tx.responses_turn = !tx.responses_turn;
            tx.responses_turn
        };
        if responses && turn {
            return self.respond(qp);
        }
        match self.initiate(qp) {
            Step::Idle if responses => self.respond(qp),
            step => step,
        }
    }

    /// One Read Response FPDU for the oldest inbound Read.
    pub(super) fn respond(&self, qp: &Arc<Qp>) -> Step {
        let front = self.shared.lock().in_reads.get(0).copied();
        let Some((msn, request)) = front else {
            return Step::Idle;
        };
        let mut tx = self.tx.lock();
        let room = usize::from(self.config.mulpdu).saturating_sub(ddp::TAGGED_HEADER_LEN);
        let offset = tx.response_sent;
        if offset == 0
            && let Err(denied) = qp.device().resolve_remote(
                qp.pd(),
                qp.id(),
                request.source_stag,
                request.source_to,
                u64::from(request.size),
                Access::REMOTE_READ,
            )
        {
            // Checked in turn, so the Reads before it are answered first,
            // as the local engine completes them. The Terminate copies the
            // request's headers.
            drop(tx);
            let mut ulpdu = [0_u8; ddp::UNTAGGED_HEADER_LEN + rdmap::READ_REQUEST_LEN];
            let copied = Message::ReadRequest { msn, request }
                .write_ulpdu(&mut ulpdu)
                .ok()
                .and_then(|n| ulpdu.get(..n));
            self.fail(qp, LocalCause::ReadSourceDenied(denied).term_code(), copied);
            return Step::Progress;
        }
        let left = u64::from(request.size).saturating_sub(offset);
        let chunk = usize::try_from(left).unwrap_or(usize::MAX).min(room);
        let last = chunk as u64 == left;
        let header = Message::ReadResponse {
            stag: request.sink_stag,
            to: request.sink_to.wrapping_add(offset),
            last,
            payload: &[],
        }
        .ddp_header();
        let source = qp.device().resolve_remote(
            qp.pd(),
            qp.id(),
            request.source_stag,
            request.source_to.wrapping_add(offset),
            chunk as u64,
            Access::REMOTE_READ,
        );
        if last {
            // N21: the Read's IRD slot is free before its last Response can
            // reach the initiator, which may send its next Read Request the
            // moment that Response lands, before `build` returns (the stream
            // takes a lent FPDU inside it). Tx before shared: the lock order.
            tx.response_sent = 0;
            self.shared.lock().in_reads.pop();
        }
        let built = source.ok().and_then(|seg| {
            let source_list = one(seg);
            self.build(&mut tx, &header, chunk, None, |out| {
                copy_out(&source_list, 0, out)
            })
        });
        if built.is_none() {
            // The source went away after the request was accepted.
            drop(tx);
            self.fail(qp, LocalCause::Catastrophic.term_code(), None);
            return Step::Progress;
        }
        if !last {
            tx.response_sent = offset + chunk as u64;
        }
        Step::Progress
    }

    /// Writes `header` and `chunk` payload bytes (from `fill`) as one FPDU:
    /// straight into the stream's send buffer when it lends the room
    /// ([`ByteStream::send_with`]; the FPDU is then taken whole and `flush`
    /// only completes it), else into the link's buffer for `flush` to offer.
    ///
    /// `completes`: the ring slot of the request this FPDU completes (its
    /// last). Its completion is recorded before the stream can take the
    /// FPDU, so that a peer's Terminate arriving after the bytes left can
    /// never be applied to it first (`mark_sent`); `tx.completes` carries
    /// it when the FPDU stays in the link's buffer.
    ///
    /// [`ByteStream::send_with`]: super::ByteStream::send_with
    fn build(
        &self,
        tx: &mut Tx,
        header: &DdpHeader,
        chunk: usize,
        completes: Option<usize>,
        fill: impl FnOnce(&mut [u8]) -> Result<(), ()>,
    ) -> Option<()> {
        let hlen = header.len();
        let total = mpa::fpdu_len(hlen + chunk);
        let crc = self.config.crc;
        let mut fill = Some(fill);
        let marked = completes.filter(|&slot| self.mark_sent(slot));
        let lent = self.stream.send_with(total, &mut |out| {
            fill.take()
                .and_then(|fill| write_fpdu_into(out, header, chunk, crc, fill))
                == Some(total)
        });
        if lent != Some(true)
            && let Some(slot) = marked
        {
            self.unmark_sent(slot);
        }
        match lent {
            Some(true) => {
                // Taken whole: nothing left to offer.
                tx.len = total;
                tx.sent = total;
                tx.completes = completes.filter(|_| marked.is_none());
                return Some(());
            }
            Some(false) => return None,
            None => {}
        }
        let fill = fill.take()?;
        tx.len = write_fpdu_into(&mut tx.buf, header, chunk, crc, fill)?;
        tx.sent = 0;
        tx.completes = completes;
        Some(())
    }

    /// Records the request in ring slot `slot` as sent (success), before
    /// its last bytes are offered to the stream: a peer's Terminate about
    /// it can only arrive after those bytes left, and then finds it
    /// completed (RFC 5040 §7 allows the success; E5 cancels the rest). Not
    /// when a Terminate from the peer is already recorded (it came first:
    /// it may concern this request) or a status is there. Returns whether
    /// it marked; the runner alone calls this and [`Self::unmark_sent`], and
    /// alone reads the mark (`retire_done`, `mark_concerned`), so taking the
    /// mark back when the stream took less is never seen.
    fn mark_sent(&self, slot: usize) -> bool {
        let mut shared = self.shared.lock();
        if shared.peer_terminate.is_some() {
            return false;
        }
        match shared.done.get_mut(slot) {
            Some(place @ None) => {
                *place = Some(WcStatus::Success);
                true
            }
            _ => false,
        }
    }

    /// Takes back [`Self::mark_sent`]: the stream did not take the bytes.
    fn unmark_sent(&self, slot: usize) {
        if let Some(place) = self.shared.lock().done.get_mut(slot) {
            *place = None;
        }
    }

    /// Works on the initiator request at the cursor.
    pub(super) fn initiate(&self, qp: &Arc<Qp>) -> Step {
        let (cursor, reads) = {
            let shared = self.shared.lock();
            (shared.cursor, shared.out_reads.len())
        };
        let mut sges = [Sge::default(); MAX_SGE];
        let mut inline = [0_u8; MAX_INLINE];
        let Some(wqe) = qp.snapshot(cursor, &mut sges, &mut inline) else {
            return Step::Idle;
        };
        let Some((slot, _)) = qp.queued(cursor) else {
            return Step::Idle;
        };
        // P16: a fenced request waits for every earlier Read.
        if wqe.flags.contains(WrFlags::READ_FENCE) && reads > 0 {
            return Step::Idle;
        }
        if fault::armed() && self.inject_completion(qp, &wqe, slot, reads) {
            return Step::Progress;
        }
        let sges = sges.get(..wqe.nsge.min(MAX_SGE)).unwrap_or_default();
        let inline = inline
            .get(..wqe.inline_len.min(MAX_INLINE))
            .unwrap_or_default();
        let next = match &wqe.op {
            SendOp::Send { .. } | SendOp::Write { .. } => {
                self.send_or_write(qp, &wqe, sges, inline, slot)
            }
            SendOp::Read {
                remote_addr,
                remote_key,
            } => self.read_request(qp, &wqe, sges, *remote_addr, *remote_key, slot, reads),
            _ => Next::Done(engine::execute_local(qp.id(), &wqe)),
        };
        match next {
            Next::Wait => Step::Idle,
            Next::Stay => Step::Progress,
            // Sent whole, or executed here.
            Next::Done(status) => {
                let mut shared = self.shared.lock();
                if let (Some(status), Some(place)) = (status, shared.done.get_mut(slot)) {
                    *place = Some(status);
                }
                shared.cursor += 1;
                Step::Progress
            }
        }
    }

    /// Fault injection ([`fault::Kind::Completion`], E8, E5): the request
    /// at the cursor, as it starts (once per request: not between the
    /// FPDUs of a message, nor while a Read waits for the ORD), completes
    /// with an error instead of going out, and the connection ends as for
    /// any local error: a Terminate reporting a local catastrophic error
    /// (RFC 5040 §7; the fault is this side's), then the stream closes.
    /// Whether it fired.
    fn inject_completion(&self, qp: &Arc<Qp>, wqe: &SendWqe, slot: usize, reads: usize) -> bool {
        let waits = matches!(wqe.op, SendOp::Read { .. }) && reads >= self.config.ord as usize;
        if waits || self.tx.lock().started {
            return false;
        }
        let Some(index) = fault::hit_at(fault::Kind::Completion) else {
            return false;
        };
        {
            let mut shared = self.shared.lock();
            if let Some(place) = shared.done.get_mut(slot) {
                *place = Some(fault::error_status(wqe.op.opcode(), index));
            }
            shared.cursor += 1;
        }
        self.fail(qp, LocalCause::Catastrophic.term_code(), None);
        true
    }

    /// One FPDU of a Send or Write.
    fn send_or_write(
        &self,
        qp: &Arc<Qp>,
        wqe: &SendWqe,
        sges: &[Sge],
        inline: &[u8],
        slot: usize,
    ) -> Next {
        let is_inline = wqe.flags.contains(WrFlags::INLINE);
        let gathered = if is_inline {
            None
        } else {
            match resolve_local(qp, sges, Access::empty()) {
                Ok(resolved) => Some(resolved),
                Err(status) => return Next::Done(Some(status)),
            }
        };
        let total = gathered.as_ref().map_or(inline.len() as u64, |l| l.total);
        let mut tx = self.tx.lock();
        if !tx.started {
            tx.started = true;
            tx.offset = 0;
            if matches!(wqe.op, SendOp::Send { .. }) {
                tx.send_msn = tx.send_msn.wrapping_add(1);
            }
        }
        let offset = tx.offset;
        let header_len = match wqe.op {
            SendOp::Send { .. } => ddp::UNTAGGED_HEADER_LEN,
            _ => ddp::TAGGED_HEADER_LEN,
        };
        let room = usize::from(self.config.mulpdu).saturating_sub(header_len);
        let left = total.saturating_sub(offset);
        let chunk = usize::try_from(left).unwrap_or(usize::MAX).min(room);
        let last = chunk as u64 == left;
        let header = match wqe.op {
            SendOp::Write {
                remote_addr,
                remote_key,
            } => Message::Write {
                stag: remote_key,
                to: remote_addr.wrapping_add(offset),
                last,
                payload: &[],
            },
            SendOp::Send { invalidate } => Message::Send {
                header: SendHeader {
                    solicited: wqe.flags.contains(WrFlags::SOLICITED),
                    invalidate,
                    msn: tx.send_msn.wrapping_sub(1),
                    mo: u32::try_from(offset).unwrap_or(u32::MAX),
                    last,
                },
                payload: &[],
            },
            _ => return Next::Done(Some(WcStatus::InternalError)),
        }
        .ddp_header();
        let built = self.build(&mut tx, &header, chunk, last.then_some(slot), |out| {
            if let Some(resolved) = &gathered {
                return copy_out(resolved, offset, out);
            }
            let at = usize::try_from(offset).map_err(|_| ())?;
            let from = inline.get(at..at + out.len()).ok_or(())?;
            out.copy_from_slice(from);
            Ok(())
        });
        if built.is_none() {
            tx.started = false;
            tx.len = 0;
            return Next::Done(Some(WcStatus::LocalAccessError));
        }
        if last {
            tx.started = false;
            tx.offset = 0;
            drop(tx);
            // Moves the cursor on; the completion waits for the stream.
            return Next::Done(None);
        }
        tx.offset = offset + chunk as u64;
        Next::Stay
    }

    /// A Read Request, when the ORD allows (N21).
    #[expect(clippy::too_many_arguments, reason = "the request's parts")]
    fn read_request(
        &self,
        qp: &Arc<Qp>,
        wqe: &SendWqe,
        sges: &[Sge],
        remote_addr: u64,
        remote_key: u32,
        slot: usize,
        reads: usize,
    ) -> Next {
        if qp.read_limits().1 == 0 {
            return Next::Done(Some(WcStatus::InvalidRequest));
        }
        if reads >= self.config.ord as usize {
            return Next::Wait;
        }
        // M9: local write suffices for the sink.
        let list = match resolve_local(qp, sges, Access::LOCAL_WRITE) {
            Ok(list) => list,
            Err(status) => return Next::Done(Some(status)),
        };
        let Ok(size) = u32::try_from(list.total) else {
            return Next::Done(Some(WcStatus::LengthError));
        };
        drop(list);
        let first = sges.first().copied().unwrap_or_default();
        let request = ReadRequest {
            sink_stag: first.key,
            sink_to: first.addr,
            size,
            source_stag: remote_key,
            source_to: remote_addr,
        };
        let mut tx = self.tx.lock();
        let msn = tx.read_msn;
        let Tx { buf, len, sent, .. } = &mut *tx;
        let Ok(n) = (Message::ReadRequest { msn, request }).write_fpdu(buf, self.config.crc) else {
            return Next::Done(Some(WcStatus::InternalError));
        };
        *len = n;
        *sent = 0;
        tx.read_msn = msn.wrapping_add(1);
        drop(tx);
        let mut out = OutRead {
            slot,
            msn,
            stag: first.key,
            to: first.addr,
            len: u64::from(size),
            sges: [Sge::default(); MAX_SGE],
            nsge: sges.len().min(MAX_SGE),
            invalidate_first: wqe.flags.contains(WrFlags::READ_LOCAL_INVALIDATE),
        };
        if let Some(dst) = out.sges.get_mut(..out.nsge) {
            dst.copy_from_slice(sges.get(..out.nsge).unwrap_or_default());
        }
        let _ = self.shared.lock().out_reads.push(out);
        Next::Done(None)
    }
}
