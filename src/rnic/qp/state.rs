//! State changes of a QP: flush (E1), disconnect (X5–X7), termination by an
//! error (E5), the peer leaving (X2), close (L20, L21).

use super::{Qp, QpState};
use crate::kernel::sync::Arc;
use crate::kernel::sync::atomic::Ordering;
use crate::rnic::fault;
use crate::rnic::mr::{Finish, Progress};

impl Qp {
    /// Flush (E1): every pending receive and initiator request completes
    /// cancelled, each exactly once, so a consumer that drains the CQ for all
    /// of them knows the flush is over (E2); returns without waiting for
    /// them. Receives of an SRQ stay in the SRQ (E4).
    pub fn flush(self: &Arc<Self>) {
        self.enter(QpState::Error);
    }

    /// Disconnects this side (X5, X6): outstanding requests complete
    /// cancelled (X7, E3), later posts fail inline, and the peer learns that
    /// the connection is gone unless it disconnected first (X2).
    pub fn disconnect(self: &Arc<Self>) {
        let (_, peer) = self.enter(QpState::Disconnected);
        if let Some(peer) = peer {
            peer.peer_gone();
        }
    }

    /// The connection ended because of an error on it (E5, E7, M24).
    pub(crate) fn terminate(self: &Arc<Self>) {
        let (peer, link) = {
            let sq = self.sq.lock();
            (sq.peer.clone(), sq.link.clone())
        };
        if let Some(link) = link {
            // Over iWARP the peer learns it from a Terminate (unless one
            // already crossed), then the stream closes.
            link.local_failure();
        }
        self.connection_failed();
        if let Some(peer) = peer {
            peer.connection_failed();
        }
    }

    /// Enters `Error` because the connection failed, and tells the connection
    /// layer (X2). Each side's device counts the failed connection once
    /// (A18: an established connection of that adapter hit an error), when
    /// this side leaves `Connected`: a failure seen again, as when every
    /// completion of an overflowed CQ fails, is not a new connection error.
    pub(super) fn connection_failed(self: &Arc<Self>) {
        let (was, _) = self.enter(QpState::Error);
        if was == QpState::Connected {
            self.device()
                .counters
                .connection_error
                .fetch_add(1, Ordering::Relaxed);
        }
        self.report_lost();
    }

    /// Fault injection ([`fault::Kind::Abort`]): a connected QP's
    /// connection aborts as if the transport had failed (X2, E5). Only a
    /// connected QP's posts are counted.
    pub(super) fn inject_abort(self: &Arc<Self>) {
        if fault::armed() && self.state() == QpState::Connected && fault::hit(fault::Kind::Abort) {
            self.terminate();
        }
    }

    /// The peer disconnected or closed: flush, and tell the connection layer.
    pub(crate) fn peer_gone(self: &Arc<Self>) {
        let (was_connected, _peer) = {
            let mut sq = self.sq.lock();
            // Drop the link to the departed peer (outside the lock): a closed
            // QP must not be kept alive by its former peer.
            (sq.state == QpState::Connected, sq.peer.take())
        };
        if was_connected {
            self.enter(QpState::Error);
            self.report_lost();
        }
    }

    pub(super) fn report_lost(&self) {
        if self.lost_reported.swap(true, Ordering::AcqRel) {
            return;
        }
        let events = self.events.lock().clone();
        if let Some(events) = events {
            events.connection_lost();
        }
    }

    /// Moves to `Error` or `Disconnected`, rings the doorbell (D5), cancels
    /// the receives, and kicks the runner to cancel the initiator queue.
    /// Returns the state it left, and the peer when leaving a connection for
    /// good.
    ///
    /// An empty queue (and no iWARP link, whose runner also handles the
    /// state change) leaves the runner nothing to do: no pass is scheduled,
    /// so a QP with nothing outstanding is quiet at once (X1 b, L21) — on
    /// the deferred engine, an empty pass picked up by the worker before the
    /// caller looked used to make a close or disconnect pend. A post after
    /// the state change kicks the runner itself; one before it is in the
    /// queue, seen here under the same lock.
    pub(super) fn enter(self: &Arc<Self>, state: QpState) -> (QpState, Option<Arc<Self>>) {
        let (was, peer, kick) = {
            let mut sq = self.sq.lock();
            let was = sq.state;
            if was == QpState::Disconnected {
                drop(sq);
                // Another thread may have set `Disconnected` and not yet
                // cancelled the receives: cancel them here too (each one
                // once), so that a close returning through here is not
                // quiescent before their entries are in the CQ (L21).
                self.cancel_receives(QpState::Disconnected);
                return (was, None);
            }
            sq.set_state(self.id, state);
            sq.rung = sq.ring.len();
            let peer = if state == QpState::Disconnected {
                sq.peer.take()
            } else {
                None
            };
            (was, peer, !sq.ring.is_empty() || sq.link.is_some())
        };
        self.cancel_receives(state);
        if kick {
            self.kick();
        }
        (was, peer)
    }

    /// Closes the QP: like a disconnect, then detaches from the SRQ. The QP
    /// keeps no reference to its peer afterwards.
    pub fn close(self: &Arc<Self>) {
        self.disconnect();
        if let Some(srq) = &self.srq {
            srq.detach(self);
        }
    }

    /// Closes the QP and reports when it is quiet (L20, L21): every
    /// outstanding request retired and reported, and the runner stopped.
    /// `Done` when that is already so; otherwise `Pending`, and `finish` runs
    /// (once, with no lock held) when the runner stops with nothing left —
    /// with the deferred engine, after its last cancelled completion.
    pub fn close_with(self: &Arc<Self>, finish: Finish) -> Progress {
        self.close();
        {
            let mut slot = self.quiesced.lock();
            if self.is_quiescent() {
                return Progress::Done;
            }
            *slot = Some(finish);
        }
        // The runner may have stopped between the check and the store.
        self.notify_quiescent();
        Progress::Pending
    }

    /// Runs a pending `close_with` callback once the QP is quiet.
    pub(crate) fn notify_quiescent(&self) {
        let finish = {
            let mut slot = self.quiesced.lock();
            if slot.is_none() || !self.is_quiescent() {
                return;
            }
            slot.take()
        };
        if let Some(finish) = finish {
            finish();
        }
    }
}
