//! The receive side of a link: FPDUs cut by the de-framer and parsed;
//! Writes, Read Responses and Sends placed, Read Requests queued for the
//! transmit side, a received Terminate recorded for the runner (E5).

use super::{Concerns, Link, Rx, RxState, complete_recv, copy_in, one, resolve_local};
use crate::kernel::sync::Arc;
use crate::kernel::sync::atomic::Ordering;
use crate::rnic::fault;
use crate::rnic::iwarp::ddp::{self, Buffer, DdpError};
use crate::rnic::iwarp::mpa;
use crate::rnic::iwarp::rdmap::{self, Message, ReadRequest, SendHeader};
use crate::rnic::iwarp::terminate::{LocalCause, TermCode, rdmap_code, rdmap_etype};
use crate::rnic::qp::{NoReceive, Qp, QpState, RecvWqe};
#[cfg(all(test, not(loom)))]
use crate::rnic::testing::hook::{self, Point};
use crate::rnic::types::{Access, Completion, Opcode, WcStatus};

impl Link {
    /// Bytes received from the stream, in order, in any chunking.
    pub fn receive(&self, bytes: &[u8]) {
        let Some(qp) = self.qp.upgrade() else {
            return;
        };
        if qp.state() != QpState::Connected {
            // Flushed, disconnected or closed: nothing is placed any more.
            self.rx.lock().state.dead = true;
            return;
        }
        let mut rest = bytes;
        let mut rounds = 0_usize;
        while !rest.is_empty() && rounds <= bytes.len() {
            rounds += 1;
            let (consumed, outcome) = {
                let mut rx = self.rx.lock();
                let Rx { deframer, state } = &mut *rx;
                if state.dead {
                    return;
                }
                match deframer.feed(rest) {
                    Ok(step) => (
                        step.consumed,
                        match step.ulpdu {
                            Some(ulpdu) => {
                                let mut shared = self.shared.lock();
                                let first = !core::mem::replace(&mut shared.may_send, true);
                                drop(shared);
                                let counters = &qp.device().counters;
                                counters.rdma_in_frames.fetch_add(1, Ordering::Relaxed);
                                counters.rdma_in_octets.fetch_add(
                                    mpa::fpdu_len(ulpdu.len()) as u64,
                                    Ordering::Relaxed,
                                );
                                let mut outcome = self.handle(&qp, state, ulpdu);
                                outcome.kick |= first;
                                outcome
                            }
                            None => Outcome::default(),
                        },
                    ),
                    Err(error) => {
                        state.dead = true;
                        let code = error
                            .term_code()
                            .unwrap_or(LocalCause::Catastrophic.term_code());
                        self.queue_terminate(code, None);
                        (
                            rest.len(),
                            Outcome::failed(state.recv.take().as_ref(), None),
                        )
                    }
                }
            };
            rest = rest.get(consumed..).unwrap_or_default();
            #[cfg(all(test, not(loom)))]
            hook::run(Point::AfterUlpdu);
            let stop = outcome.fail;
            Self::apply(&qp, &outcome);
            if stop {
                return;
            }
        }
    }

    fn apply(qp: &Arc<Qp>, outcome: &Outcome) {
        if let Some((recv, status)) = outcome.receive {
            complete_recv(qp, &recv, status);
        }
        if let Some(completion) = outcome.completion {
            qp.complete_taken(completion);
        }
        if outcome.fail {
            qp.terminate();
            // A close may wait on a receive's take that backed off
            // (`Qp::take_with`), under the lock now released.
            qp.notify_quiescent();
        } else if outcome.kick {
            qp.kick();
        }
    }

    /// One received ULPDU.
    fn handle(&self, qp: &Arc<Qp>, state: &mut RxState, ulpdu: &[u8]) -> Outcome {
        let message = match Message::parse(ulpdu, state.layout) {
            Ok(message) => message,
            Err(error) => return self.reject(state, error.term_code(), ulpdu),
        };
        match message {
            Message::Write {
                stag, to, payload, ..
            } => self.place_write(qp, state, stag, to, payload, ulpdu),
            Message::ReadResponse {
                stag,
                to,
                last,
                payload,
            } => self.place_response(qp, state, stag, to, last, payload, ulpdu),
            Message::Send { header, payload } => self.place_send(qp, state, header, payload, ulpdu),
            Message::ReadRequest { msn, request } => self.queue_read(state, msn, request, ulpdu),
            Message::Terminate { terminate, .. } => {
                state.dead = true;
                let kind = match terminate.offending_ddp().map(|h| h.buffer) {
                    Some(Buffer::Untagged { qn, msn, .. }) if qn == rdmap::QN_READ_REQUEST => {
                        Concerns::Read(Some(msn))
                    }
                    Some(Buffer::Untagged { qn, .. }) if qn == rdmap::QN_SEND => {
                        Concerns::SendOrWrite
                    }
                    Some(Buffer::Tagged { .. }) => {
                        let write = terminate.offending_ddp().is_some_and(|h| {
                            h.ulp_ctrl & 0x0f == rdmap::Opcode::Write.ctrl() & 0x0f
                        });
                        if write {
                            Concerns::SendOrWrite
                        } else {
                            Concerns::Read(None)
                        }
                    }
                    Some(Buffer::Untagged { .. }) | None => Concerns::Any,
                };
                {
                    // Both at once: a runner that sees `failing` sees the
                    // Terminate too.
                    let mut shared = self.shared.lock();
                    shared.failing = true;
                    shared.peer_terminate = Some((kind, terminate.code.completion_status()));
                }
                Outcome::failed(state.recv.take().as_ref(), None)
            }
        }
    }

    /// Refuses a ULPDU: Terminate with `code`, the receive in progress fails.
    fn reject(&self, state: &mut RxState, code: Option<TermCode>, ulpdu: &[u8]) -> Outcome {
        state.dead = true;
        let code = code.unwrap_or(LocalCause::Catastrophic.term_code());
        self.queue_terminate(code, Some(ulpdu));
        Outcome::failed(
            state.recv.take().as_ref(),
            Some(WcStatus::RemoteOperationError),
        )
    }

    fn reject_cause(&self, state: &mut RxState, cause: LocalCause, ulpdu: &[u8]) -> Outcome {
        self.reject(state, Some(cause.term_code()), ulpdu)
    }

    fn place_write(
        &self,
        qp: &Arc<Qp>,
        state: &mut RxState,
        stag: u32,
        to: u64,
        payload: &[u8],
        ulpdu: &[u8],
    ) -> Outcome {
        if ddp::tagged_end(to, payload.len()).is_err() {
            return self.reject_cause(state, LocalCause::SinkOffsetWrap, ulpdu);
        }
        let sink = qp.device().resolve_remote(
            qp.pd(),
            qp.id(),
            stag,
            to,
            payload.len() as u64,
            Access::REMOTE_WRITE,
        );
        match sink {
            Ok(seg) => {
                let list = one(seg);
                if copy_in(&list, 0, payload).is_err() {
                    return self.reject_cause(state, LocalCause::Catastrophic, ulpdu);
                }
                Outcome::default()
            }
            Err(denied) => self.reject_cause(state, LocalCause::SinkDenied(denied), ulpdu),
        }
    }

    #[expect(clippy::too_many_arguments, reason = "the segment's fields")]
    fn place_response(
        &self,
        qp: &Arc<Qp>,
        state: &mut RxState,
        stag: u32,
        to: u64,
        last: bool,
        payload: &[u8],
        ulpdu: &[u8],
    ) -> Outcome {
        let front = self.shared.lock().out_reads.get(0).copied();
        let Some(read) = front else {
            let code =
                TermCode::rdmap(rdmap_etype::REMOTE_OPERATION, rdmap_code::UNEXPECTED_OPCODE);
            return self.reject(state, Some(code), ulpdu);
        };
        let end = state.placed.saturating_add(payload.len() as u64);
        let wrong_stag = stag != read.stag;
        let wrong_range =
            to != read.to.wrapping_add(state.placed) || end > read.len || (last && end != read.len);
        if wrong_stag || wrong_range {
            // The Read this Response claims to answer fails: its answer is
            // wrong (as a malformed segment fails the receive it concerns;
            // siw reports a protection error). Without this it completed
            // `Cancelled`, and no request told the consumer why the
            // connection ended (E5).
            if let Some(place) = self.shared.lock().done.get_mut(read.slot) {
                *place = Some(WcStatus::RemoteOperationError);
            }
        }
        if wrong_stag {
            return self.reject_cause(
                state,
                LocalCause::SinkDenied(crate::rnic::mr::Denied::Token),
                ulpdu,
            );
        }
        if wrong_range {
            return self.reject_cause(
                state,
                LocalCause::SinkDenied(crate::rnic::mr::Denied::Range),
                ulpdu,
            );
        }
        let sges = read.sges.get(..read.nsge).unwrap_or_default();
        let placed = resolve_local(qp, sges, Access::LOCAL_WRITE)
            .ok()
            .and_then(|list| copy_in(&list, state.placed, payload).ok());
        if placed.is_none() {
            // The sink went away under the Read: it fails here, and the
            // connection ends.
            let mut shared = self.shared.lock();
            if let Some(place) = shared.done.get_mut(read.slot) {
                *place = Some(WcStatus::LocalAccessError);
            }
            drop(shared);
            return self.reject_cause(state, LocalCause::Catastrophic, ulpdu);
        }
        if !last {
            state.placed = end;
            return Outcome::default();
        }
        state.placed = 0;
        if read.invalidate_first
            && let Some(first) = sges.first()
        {
            // M26, as the local engine does.
            let _ = qp.device().invalidate_key(qp.pd(), first.key);
        }
        let mut shared = self.shared.lock();
        shared.out_reads.pop();
        if let Some(place) = shared.done.get_mut(read.slot) {
            place.get_or_insert(WcStatus::Success);
        }
        Outcome {
            kick: true,
            ..Outcome::default()
        }
    }

    fn place_send(
        &self,
        qp: &Arc<Qp>,
        state: &mut RxState,
        header: SendHeader,
        payload: &[u8],
        ulpdu: &[u8],
    ) -> Outcome {
        let recv = match state.recv {
            Some(recv) => recv,
            // Fault injection (`fault::Kind::ReceiveEmpty`, E5): the queue
            // counts as empty.
            None if fault::hit(fault::Kind::ReceiveEmpty) => {
                return self.reject_cause(state, LocalCause::NoReceive, ulpdu);
            }
            None => match qp.take_receive() {
                Ok(recv) => recv,
                // No receive posted: a Terminate, as siw (see module docs).
                Err(NoReceive::Empty | NoReceive::Gone) => {
                    return self.reject_cause(state, LocalCause::NoReceive, ulpdu);
                }
            },
        };
        state.recv = Some(recv);
        let buffer: u64 = recv.sges().iter().map(|s| u64::from(s.len)).sum();
        let buffer = u32::try_from(buffer).unwrap_or(u32::MAX);
        let queue = state
            .queues
            .get_mut(rdmap::QN_SEND as usize)
            .map(|q| q.accept(header.msn, header.mo, payload.len(), header.last, buffer));
        let placement = match queue {
            Some(Ok(placement)) => placement,
            Some(Err(DdpError::MessageTooLong { .. })) => {
                state.dead = true;
                self.queue_terminate(LocalCause::ReceiveTooSmall.term_code(), Some(ulpdu));
                return Outcome::failed(
                    state.recv.take().as_ref(),
                    Some(WcStatus::ReceiveTooSmall),
                );
            }
            Some(Err(error)) => return self.reject(state, error.term_code(), ulpdu),
            None => return self.reject_cause(state, LocalCause::Catastrophic, ulpdu),
        };
        let copied = resolve_local(qp, recv.sges(), Access::LOCAL_WRITE).and_then(|list| {
            copy_in(&list, u64::from(placement.offset), payload)
                .map_err(|()| WcStatus::LocalAccessError)
        });
        if let Err(status) = copied {
            state.dead = true;
            self.queue_terminate(LocalCause::Catastrophic.term_code(), Some(ulpdu));
            return Outcome::failed(state.recv.take().as_ref(), Some(status));
        }
        if !placement.last {
            return Outcome::default();
        }
        state.recv = None;
        let mut completion = Completion::new(
            WcStatus::Success,
            Opcode::Receive,
            qp.config().context,
            recv.context,
        );
        completion.bytes = placement.message_len;
        completion.solicited = header.solicited;
        if let Some(key) = header.invalidate {
            // M24 / C2, as the local engine.
            if qp.device().invalidate_key(qp.pd(), key).is_err() {
                state.dead = true;
                self.queue_terminate(LocalCause::CannotInvalidate.term_code(), Some(ulpdu));
                return Outcome::failed(Some(&recv), Some(WcStatus::InvalidRequest));
            }
            completion.opcode = Opcode::ReceiveAndInvalidate;
            completion.invalidated_key = key;
        }
        Outcome {
            completion: Some(completion),
            ..Outcome::default()
        }
    }

    fn queue_read(
        &self,
        state: &mut RxState,
        msn: u32,
        request: ReadRequest,
        ulpdu: &[u8],
    ) -> Outcome {
        let accepted = state
            .queues
            .get_mut(rdmap::QN_READ_REQUEST as usize)
            .map(|q| q.accept(msn, 0, 0, true, 0));
        match accepted {
            Some(Ok(_)) => {}
            Some(Err(error)) => return self.reject(state, error.term_code(), ulpdu),
            None => return self.reject_cause(state, LocalCause::Catastrophic, ulpdu),
        }
        // The source is checked when the request's turn comes (`respond`).
        let full = self.shared.lock().in_reads.push((msn, request)).is_err();
        if full {
            return self.reject_cause(state, LocalCause::IrdExceeded, ulpdu);
        }
        Outcome {
            kick: true,
            ..Outcome::default()
        }
    }
}

/// What receiving one ULPDU asks of the QP, done with no link lock held.
#[derive(Default)]
struct Outcome {
    /// A receive that fails (or is cancelled) with a status.
    receive: Option<(RecvWqe, WcStatus)>,
    /// A receive that completed.
    completion: Option<Completion>,
    /// The connection ends.
    fail: bool,
    /// The runner has work (a Read Response to send, a Read to retire).
    kick: bool,
}

impl Outcome {
    /// The connection ends; a receive in progress completes with `status`
    /// (cancelled when none is given).
    fn failed(recv: Option<&RecvWqe>, status: Option<WcStatus>) -> Self {
        Self {
            receive: recv.map(|r| (*r, status.unwrap_or(WcStatus::Cancelled))),
            fail: true,
            ..Self::default()
        }
    }
}
