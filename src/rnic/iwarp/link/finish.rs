//! How a link ends: this side's graceful finish (X1), the wind-down that
//! sends the Terminate, closes the stream and retires every request (E5),
//! the Terminates this side queues, and the peer's close or reset.

use super::transmit::Step;
use super::{Concerns, Link, Shared, complete_recv};
use crate::kernel::sync::Arc;
use crate::rnic::iwarp::ddp::DdpHeader;
use crate::rnic::iwarp::rdmap::{self, Message};
use crate::rnic::iwarp::terminate::{LocalCause, TermCode, Terminate};
use crate::rnic::qp::{MAX_INLINE, MAX_SGE, Qp, QpState};
use crate::rnic::types::{Opcode, Sge, WcStatus};

impl Link {
    /// This side's graceful disconnect (X1): the message in progress goes
    /// out whole — the rest of its FPDUs, as the Read Response in progress
    /// — then the stream closes in order (FIN); nothing new starts (the
    /// requests not started complete cancelled when the QP leaves the
    /// connection, X7). Closing the stream at once cut the FPDU in
    /// progress, and the peer never placed the message (issue 8).
    pub fn finish(&self) {
        self.shared.lock().finishing = true;
        match self.qp.upgrade() {
            Some(qp) => qp.kick(),
            None => self.close_in_order(),
        }
    }

    /// Closes the stream in order, once.
    fn close_in_order(&self) {
        let close = !core::mem::replace(&mut self.shared.lock().closed, true);
        if close {
            self.stream.close(false);
        }
    }

    /// While finishing: the next FPDU of the message in progress, else of
    /// the Read Response in progress; with neither, the stream closes.
    pub(super) fn finish_step(&self, qp: &Arc<Qp>) -> Step {
        let (started, responding) = {
            let tx = self.tx.lock();
            (tx.started, tx.response_sent > 0)
        };
        if started {
            return self.initiate(qp);
        }
        if responding {
            return self.respond(qp);
        }
        self.close_in_order();
        Step::Idle
    }

    /// The connection is over: finish a half-sent FPDU, send the Terminate,
    /// close the stream, and retire every request (failed ones with their
    /// status, the others cancelled, E5).
    pub(super) fn wind_down(&self, qp: &Arc<Qp>) {
        // Whether the request at the cursor went out in part: only such a
        // request, and those before the cursor, can be what a Terminate
        // concerns (the tx lock comes before the shared one).
        let mut started = self.tx.lock().started;
        let (closed, peer_closed) = {
            let mut shared = self.shared.lock();
            // Before a half-sent FPDU completes its request, and before any
            // request retires.
            mark_concerned(&mut shared, qp, started);
            (shared.closed, shared.peer_closed)
        };
        {
            let mut tx = self.tx.lock();
            if tx.sent == 0 || closed || peer_closed {
                // Not started (or nowhere to go): dropped.
                tx.len = 0;
                tx.sent = 0;
                tx.completes = None;
            }
        }
        let blocked = !self.flush(qp);
        let close = {
            let mut shared = self.shared.lock();
            let mut blocked = blocked;
            while !blocked
                && shared.term_sent < shared.term_len
                && !shared.peer_closed
                && !shared.closed
            {
                let n = match shared.term.get(shared.term_sent..shared.term_len) {
                    Some(rest) => self.stream.send(rest),
                    None => 0,
                };
                if n == 0 {
                    blocked = true;
                } else {
                    shared.term_sent += n;
                }
            }
            let close = (!blocked || shared.peer_closed) && !shared.closed;
            shared.closed |= close;
            mark_concerned(&mut shared, qp, started);
            while shared.out_reads.pop().is_some() {}
            while shared.in_reads.pop().is_some() {}
            close
        };
        if close {
            self.stream.close(false);
        } else if !self.shared.lock().closed {
            // The peer reads nothing: the platform bounds the wait.
            self.stream.stalled();
        }
        // A message whose first segments landed holds its receive between
        // segments; no more segments are placed now (`receive` checks the
        // state), so it completes cancelled here, or it would never complete
        // and the QP's close would wait for it (E5, L21).
        let held = {
            let mut rx = self.rx.lock();
            rx.state.dead = true;
            rx.state.recv.take()
        };
        if let Some(recv) = held {
            complete_recv(qp, &recv, WcStatus::Cancelled);
        }
        loop {
            let mut sges = [Sge::default(); MAX_SGE];
            let mut inline = [0_u8; MAX_INLINE];
            let Some(wqe) = qp.snapshot(0, &mut sges, &mut inline) else {
                break;
            };
            let slot = qp.queued(0).map_or(usize::MAX, |(slot, _)| slot);
            let status = {
                let mut shared = self.shared.lock();
                mark_concerned(&mut shared, qp, started);
                // At the cursor, the head is the request in progress, if any.
                started &= shared.cursor > 0;
                shared.cursor = shared.cursor.saturating_sub(1);
                shared.done.get_mut(slot).and_then(Option::take)
            };
            qp.retire(&wqe, status.unwrap_or(WcStatus::Cancelled));
        }
        let mut tx = self.tx.lock();
        tx.offset = 0;
        tx.started = false;
        tx.response_sent = 0;
    }

    /// This side found an error: queue `code` in a Terminate (copying the
    /// offending ULPDU's headers when given), then end the connection.
    pub(super) fn fail(&self, qp: &Arc<Qp>, code: TermCode, ulpdu: Option<&[u8]>) {
        self.queue_terminate(code, ulpdu);
        qp.terminate();
    }

    pub(super) fn queue_terminate(&self, code: TermCode, ulpdu: Option<&[u8]>) {
        let mut shared = self.shared.lock();
        if shared.failing {
            return;
        }
        shared.failing = true;
        if shared.peer_closed {
            return;
        }
        let mut terminate = Terminate::new(code);
        if let Some(ulpdu) = ulpdu
            && let Ok((header, _)) = DdpHeader::parse(ulpdu)
        {
            let hlen = header.len();
            terminate.segment_len = u16::try_from(ulpdu.len()).ok();
            terminate.ddp_header = ulpdu.get(..hlen);
            if header.ulp_ctrl & 0x0f == rdmap::Opcode::ReadRequest.ctrl() & 0x0f {
                terminate.rdmap_header = ulpdu.get(hlen..hlen + rdmap::READ_REQUEST_LEN);
            }
        }
        let message = Message::Terminate { msn: 1, terminate };
        let built = message
            .write_fpdu(&mut shared.term, self.config.crc)
            .or_else(|_| {
                Message::Terminate {
                    msn: 1,
                    terminate: Terminate::new(code),
                }
                .write_fpdu(&mut shared.term, self.config.crc)
            });
        shared.term_len = built.unwrap_or(0);
        shared.term_sent = 0;
    }

    /// A local error ended the connection (`Qp::terminate`): tell the peer,
    /// unless a Terminate already crossed.
    pub(crate) fn local_failure(&self) {
        self.queue_terminate(LocalCause::Catastrophic.term_code(), None);
    }

    /// The peer closed (`abortive`: reset) the stream.
    pub fn peer_closed(&self, abortive: bool) {
        let Some(qp) = self.qp.upgrade() else {
            return;
        };
        if qp.state() == QpState::Disconnected {
            // This side closed first: the peer's close answers ours.
            self.rx.lock().state.dead = true;
            self.shared.lock().peer_closed = true;
            return;
        }
        let recv = {
            let mut rx = self.rx.lock();
            rx.state.dead = true;
            rx.state.recv.take()
        };
        let failing = {
            let mut shared = self.shared.lock();
            shared.peer_closed = true;
            core::mem::replace(&mut shared.failing, true)
        };
        if let Some(recv) = recv {
            complete_recv(&qp, &recv, WcStatus::Cancelled);
        }
        if failing {
            // A Terminate already ended it; just let the runner close.
            qp.kick();
        } else if abortive {
            qp.terminate();
        } else {
            qp.peer_gone();
            qp.kick();
        }
    }
}

/// Fails the request a received Terminate concerns (if one was received and
/// not yet applied), with `shared` held. Called by the runner only: it alone
/// retires requests, so the ring positions walked here stay put (the
/// receive side used to walk them unlocked while the runner retired, and a
/// status could land on a neighbour or on a retired slot).
///
/// Only a request that went (at least in part) on the wire can be the one
/// concerned: those before the cursor, and the one at it when `started`.
/// A request posted later — after the QP entered `Error` and the abort was
/// indicated, before a deferred runner got here — completes cancelled (E5),
/// not with the Terminate's status.
fn mark_concerned(shared: &mut Shared, qp: &Qp, started: bool) {
    let Some((kind, status)) = shared.peer_terminate.take() else {
        return;
    };
    let read_slot = {
        let reads = || (0..shared.out_reads.len()).filter_map(|i| shared.out_reads.get(i));
        let named = match kind {
            Concerns::Read(Some(msn)) => reads().find(|r| r.msn == msn),
            _ => None,
        };
        named.or_else(|| reads().next()).map(|r| r.slot)
    };
    for index in 0..shared.cursor + usize::from(started) {
        let Some((slot, opcode)) = qp.queued(index) else {
            return;
        };
        let hit = match kind {
            Concerns::Read(_) => Some(slot) == read_slot,
            Concerns::SendOrWrite => matches!(opcode, Opcode::Send | Opcode::Write),
            Concerns::Any => true,
        };
        if hit && let Some(place) = shared.done.get_mut(slot) {
            if place.is_none() {
                *place = Some(status);
                return;
            }
            if matches!(kind, Concerns::Read(_)) {
                return;
            }
        }
    }
}
