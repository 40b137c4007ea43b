//! The receive queue of a QP without SRQ: posting (P8), taking a receive for
//! an incoming Send, cancelling (E1, X5) and completing (L21, P23).

use super::{MAX_SGE, PostError, Qp, QpState};
use crate::kernel::sync::Arc;
use crate::kernel::sync::atomic::Ordering;
use crate::rnic::fault;
use crate::rnic::ring::Ring;
use crate::rnic::types::{Completion, Opcode, Sge, WcStatus};
use alloc::boxed::Box;

/// Why no receive could be taken for an incoming Send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NoReceive {
    /// None is posted yet: the Send waits (see `engine.rs`).
    Empty,
    /// The receiving side is flushed, disconnected, closed or failed: the
    /// Send fails and the connection ends (E5).
    Gone,
}

/// One queued receive, copied out for execution.
#[derive(Clone, Copy)]
pub(crate) struct RecvWqe {
    pub(crate) context: usize,
    pub(crate) sges: [Sge; MAX_SGE],
    pub(crate) nsge: usize,
}

impl RecvWqe {
    /// The receive in ring `slot`: its SGEs copied out of `sges`, where each
    /// slot holds `cap` of them and `counts` says how many are used.
    pub(crate) fn copied(
        context: usize,
        slot: usize,
        cap: usize,
        counts: &[usize],
        sges: &[Sge],
    ) -> Self {
        let nsge = counts.get(slot).copied().unwrap_or(0).min(MAX_SGE);
        let mut wqe = Self {
            context,
            sges: [Sge::default(); MAX_SGE],
            nsge,
        };
        let base = slot.saturating_mul(cap);
        if let (Some(src), Some(dst)) = (sges.get(base..base + nsge), wqe.sges.get_mut(..nsge)) {
            dst.copy_from_slice(src);
        }
        wqe
    }

    pub(crate) fn sges(&self) -> &[Sge] {
        self.sges.get(..self.nsge).unwrap_or_default()
    }
}

/// SGEs of a receive that [`Qp::take_receive_into`] copies out without a
/// whole [`RecvWqe`].
pub(crate) const FEW_RECV_SGE: usize = 4;

/// A receive taken by [`Qp::take_receive_into`]: its context and SGE count
/// (the SGEs are where that call put them).
#[derive(Clone, Copy)]
pub(crate) struct Taken {
    pub(crate) context: usize,
    pub(crate) nsge: usize,
}

/// Where [`Qp::take_with`] took a receive from, for its caller to copy it out.
enum TakenFrom<'a> {
    /// The QP's own queue, still locked: the receive's `context` was popped
    /// from ring `slot`, whose SGEs are still in place.
    Queue {
        q: &'a RecvQueue,
        slot: usize,
        context: usize,
    },
    /// The SRQ, which copied it out whole.
    Srq(&'a RecvWqe),
}

/// The receive queue of a QP without SRQ.
pub(crate) struct RecvQueue {
    /// Set by flush, disconnect and close: receives are then cancelled at
    /// once (E1) or refused (X5), never left queued.
    pub(super) state: QpState,
    pub(super) ring: Ring<usize>,
    /// Contexts and SGEs of each slot: `context`, then `sge_cap` SGEs.
    pub(super) sges: Box<[Sge]>,
    pub(super) counts: Box<[usize]>,
    /// A peer's Send found this queue empty and waits (RNR): the next receive
    /// kicks the peer's runner.
    pub(super) peer_waiting: bool,
}

impl Qp {
    /// Posts a receive (P8: allowed before the QP is connected).
    ///
    /// # Errors
    /// [`PostError::TooManySge`], [`PostError::TooLong`],
    /// [`PostError::QueueFull`], [`PostError::ConnectionInvalid`] on a
    /// disconnected QP, [`PostError::InvalidParameter`] for a QP with SRQ.
    pub fn post_receive(self: &Arc<Self>, context: usize, sges: &[Sge]) -> Result<(), PostError> {
        let Some(rq) = &self.rq else {
            return Err(PostError::InvalidParameter);
        };
        self.check_sges(sges, self.config.max_receive_sge as usize)?;
        if self.is_unusable() {
            return Err(PostError::Unusable);
        }
        if fault::hit(fault::Kind::Post) {
            return Err(PostError::QueueFull); // fault injection: P24, P6
        }
        let cap = self.config.max_receive_sge as usize;
        let (kick_peer, cancel) = {
            let mut q = rq.lock();
            match q.state {
                QpState::Disconnected => return Err(PostError::ConnectionInvalid),
                // E1/E5: a receive posted to a flushed queue completes
                // cancelled; behind a receive still being placed
                // (`take_receive`) it queues, and whoever completes that one
                // cancels it after it (P23, `complete_taken`).
                QpState::Error if self.taken.load(Ordering::SeqCst) == 0 => (false, true),
                QpState::Idle | QpState::Connected | QpState::Error => {
                    let slot = q.ring.push(context).map_err(|_| PostError::QueueFull)?;
                    let base = slot.saturating_mul(cap);
                    if let Some(dst) = q.sges.get_mut(base..base + sges.len()) {
                        dst.copy_from_slice(sges);
                    }
                    if let Some(count) = q.counts.get_mut(slot) {
                        *count = sges.len();
                    }
                    (core::mem::take(&mut q.peer_waiting), false)
                }
            }
        };
        if cancel {
            self.complete_receive(self.cancelled(context));
        }
        if kick_peer {
            // A peer's Send was waiting for this receive.
            // Read the peer out first: kicking it may run its queue here
            // (inline engine) and end the connection, which takes this
            // QP's locks again (I4).
            let peer = self.sq.lock().peer.clone();
            if let Some(peer) = peer {
                peer.kick();
            }
        }
        Ok(())
    }

    /// Takes the oldest receive for an incoming Send, from the SRQ or the
    /// receive queue; `None` (and the queue remembers the waiter) when empty.
    /// See [`Qp::take_with`] for what the taker then owes (L21, P6).
    pub(crate) fn take_receive(&self) -> Result<RecvWqe, NoReceive> {
        let cap = self.config.max_receive_sge as usize;
        self.take_with(|from| match from {
            TakenFrom::Queue { q, slot, context } => {
                RecvWqe::copied(context, slot, cap, &q.counts, &q.sges)
            }
            TakenFrom::Srq(wqe) => *wqe,
        })
    }

    /// [`take_receive`](Self::take_receive) without building a whole
    /// [`RecvWqe`] (512 bytes of SGEs zeroed, then moved) for the common
    /// receive: up to [`FEW_RECV_SGE`] SGEs are copied into `few`; a receive
    /// with more, or one of an SRQ, is left whole in `many`.
    pub(crate) fn take_receive_into(
        &self,
        few: &mut [Sge; FEW_RECV_SGE],
        many: &mut Option<RecvWqe>,
    ) -> Result<Taken, NoReceive> {
        let cap = self.config.max_receive_sge as usize;
        self.take_with(|from| match from {
            TakenFrom::Queue { q, slot, context } => {
                let nsge = q.counts.get(slot).copied().unwrap_or(0).min(MAX_SGE);
                let base = slot.saturating_mul(cap);
                if nsge > FEW_RECV_SGE {
                    *many = Some(RecvWqe::copied(context, slot, cap, &q.counts, &q.sges));
                } else if let (Some(src), Some(dst)) =
                    (q.sges.get(base..base + nsge), few.get_mut(..nsge))
                {
                    dst.copy_from_slice(src);
                }
                Taken { context, nsge }
            }
            TakenFrom::Srq(wqe) => {
                let taken = Taken {
                    context: wqe.context,
                    nsge: wqe.nsge,
                };
                *many = Some(*wqe);
                taken
            }
        })
    }

    /// Takes the oldest receive, from the SRQ or the receive queue, and lets
    /// `copy_out` copy it out (under the queue's lock for a queued one); the
    /// one place that counts a receive taken.
    ///
    /// A receive taken leaves the queue, so a flush or close no longer
    /// cancels it: its completion is owed by the taker, through
    /// [`Qp::complete_taken`], and until then the QP is not quiescent, so
    /// that its close does not complete before that entry is in the CQ
    /// (L21, P6). (The iWARP receive side takes receives on the stream's
    /// thread, concurrently with the consumer's close.)
    ///
    /// A take from an SRQ counts itself before it reads the QP's state, so
    /// a close sees the count or makes the take back off; a close that saw
    /// the count of a take that then backed off has gone pending with
    /// nothing left to finish it. So a caller that gets an `Err` calls
    /// [`Qp::notify_quiescent`] once it holds no lock (the close completion
    /// is the consumer's callback, I4).
    fn take_with<R>(&self, copy_out: impl FnOnce(TakenFrom<'_>) -> R) -> Result<R, NoReceive> {
        if let Some(srq) = &self.srq {
            // Counted before the state is read: a close that changes the
            // state first sees the count or makes this take back off.
            self.taken.fetch_add(1, Ordering::SeqCst);
            #[cfg(all(test, not(loom)))]
            crate::rnic::testing::hook::run(crate::rnic::testing::hook::Point::SrqTakeCounted);
            let taken = if self.state() == QpState::Connected {
                srq.take()
            } else {
                Err(NoReceive::Gone)
            };
            // Backing off: a close that saw the count may have gone
            // pending on it; the caller finishes it (see above).
            if taken.is_err() {
                self.taken.fetch_sub(1, Ordering::SeqCst);
            }
            return taken.map(|wqe| copy_out(TakenFrom::Srq(&wqe)));
        }
        let rq = self.rq.as_ref().ok_or(NoReceive::Gone)?;
        let mut q = rq.lock();
        if q.state != QpState::Connected {
            // Flushed, disconnected or closed: this side will never take
            // the message (E5: the connection is over).
            return Err(NoReceive::Gone);
        }
        let slot = q.ring.slot_of(0);
        let Some(context) = q.ring.pop() else {
            q.peer_waiting = true;
            return Err(NoReceive::Empty);
        };
        // Under the queue's lock, which `cancel_receives` takes to leave
        // `Connected` before a close looks at the count.
        self.taken.fetch_add(1, Ordering::SeqCst);
        Ok(copy_out(TakenFrom::Queue {
            q: &q,
            slot,
            context,
        }))
    }

    /// Leaves `Connected` for `state` (`Disconnected` is final: a failure
    /// seen after the disconnect does not turn it back into `Error`, X5)
    /// and cancels the queued receives, oldest first (E1, P23).
    ///
    /// The first one is taken out of the queue and counted as taken under
    /// the queue's lock, and [`Qp::complete_taken`] cancels the rest behind
    /// it before it stops counting: until every entry is in the CQ the QP
    /// is not quiescent, so a close racing this on another thread (the
    /// connection layer's disconnect, the link's failure) does not complete
    /// before them (L21, P6). When a receive is already taken (an incoming
    /// Send being placed, or another thread cancelling), its taker cancels
    /// the queue after it instead.
    pub(super) fn cancel_receives(&self, state: QpState) {
        let Some(rq) = &self.rq else { return };
        let (peer_waited, first) = {
            let mut q = rq.lock();
            if q.state != QpState::Disconnected {
                q.state = state;
            }
            let first = if self.taken.load(Ordering::SeqCst) == 0 {
                let first = q.ring.pop();
                if first.is_some() {
                    self.taken.fetch_add(1, Ordering::SeqCst);
                }
                first
            } else {
                None
            };
            (core::mem::take(&mut q.peer_waiting), first)
        };
        if peer_waited {
            // A peer's Send waits for a receive that will never come: let it
            // see that this side is gone (it then fails, E5).
            let peer = self.sq.lock().peer.clone();
            if let Some(peer) = peer {
                peer.kick();
            }
        }
        if let Some(context) = first {
            self.complete_taken(self.cancelled(context));
        }
    }

    /// The entry of receive `context` cancelled (E1, E3, X7).
    fn cancelled(&self, context: usize) -> Completion {
        Completion::new(
            WcStatus::Cancelled,
            Opcode::Receive,
            self.config.context,
            context,
        )
    }

    pub(crate) fn complete_receive(&self, completion: Completion) {
        // A CQ in error reports nothing more (E10); the QP is unusable and
        // its posts fail inline from now on.
        let _ = self.receive_cq.push(completion);
    }

    /// Completes a receive taken by [`Qp::take_receive`] (with any status),
    /// then lets a close waiting for it finish (L21). When the queue left
    /// `Connected` meanwhile, the last one taken also cancels the receives
    /// queued behind it, after its own entry (P23, E1), before it stops
    /// counting (so the QP is not quiescent before those entries are in).
    /// Called with no lock held: the close completion may run here.
    pub(crate) fn complete_taken(&self, completion: Completion) {
        self.complete_receive(completion);
        let last = match &self.rq {
            Some(rq) => loop {
                let cancel = {
                    let mut q = rq.lock();
                    let last = self.taken.load(Ordering::SeqCst) == 1;
                    let cancel = if last && q.state != QpState::Connected {
                        q.ring.pop()
                    } else {
                        None
                    };
                    if cancel.is_none() {
                        // Under the queue's lock: `cancel_receives` and
                        // `post_receive` decide by the count under it.
                        self.taken.fetch_sub(1, Ordering::SeqCst);
                        break last;
                    }
                    cancel
                };
                if let Some(context) = cancel {
                    self.complete_receive(self.cancelled(context));
                }
            },
            None => self.taken.fetch_sub(1, Ordering::SeqCst) == 1,
        };
        if last {
            self.notify_quiescent();
        }
    }
}
