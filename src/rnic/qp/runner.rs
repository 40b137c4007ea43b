//! The runner of a QP: at most one at a time (`RunState`), executing rung
//! requests in post order and retiring and reporting them (P23, P24, E5).

use super::{MAX_INLINE, MAX_SGE, Qp, QpState, SendOp, SendQueue, SendWqe};
use crate::kernel::deferred::DeferredRoutine;
use crate::kernel::sync::atomic::{AtomicU8, Ordering};
use crate::kernel::sync::{Arc, Weak};
use crate::rnic::engine;
use crate::rnic::fault;
use crate::rnic::types::{Completion, Opcode, Sge, WcStatus, WrFlags};

/// SGEs a [`Scratch`] holds without making room for [`MAX_SGE`].
const FEW_SGE: usize = 4;
/// Inline bytes a [`Scratch`] holds without making room for [`MAX_INLINE`].
const FEW_INLINE: usize = 64;

/// Where the runner copies a request's SGEs and inline bytes out of its
/// slot. Room for the largest request (512 bytes of SGEs, 1 KiB of inline
/// data) is made, and zeroed, only when a request needs it: zeroing both for
/// every request was a visible share of a 64 B Send (docs/performance.md).
pub(crate) struct Scratch {
    few: [Sge; FEW_SGE],
    many: Option<[Sge; MAX_SGE]>,
    small: [u8; FEW_INLINE],
    large: Option<[u8; MAX_INLINE]>,
    /// Which of each pair the last `room` chose.
    use_many: bool,
    use_large: bool,
}

impl Scratch {
    pub(crate) const fn new() -> Self {
        Self {
            few: [Sge {
                addr: 0,
                len: 0,
                key: 0,
            }; FEW_SGE],
            many: None,
            small: [0; FEW_INLINE],
            large: None,
            use_many: false,
            use_large: false,
        }
    }

    /// Room for `nsge` SGEs and `inline_len` inline bytes.
    fn room(&mut self, nsge: usize, inline_len: usize) -> (&mut [Sge], &mut [u8]) {
        self.use_many = nsge > FEW_SGE;
        self.use_large = inline_len > FEW_INLINE;
        let sges: &mut [Sge] = if self.use_many {
            self.many.get_or_insert([Sge::default(); MAX_SGE])
        } else {
            &mut self.few
        };
        let inline: &mut [u8] = if self.use_large {
            self.large.get_or_insert([0; MAX_INLINE])
        } else {
            &mut self.small
        };
        (sges, inline)
    }

    /// The data `room` made room for, as `wqe` uses it.
    fn data(&self, wqe: &SendWqe) -> engine::Data<'_> {
        let sges: &[Sge] = match (&self.many, self.use_many) {
            (Some(many), true) => many,
            _ => &self.few,
        };
        let inline: &[u8] = match (&self.large, self.use_large) {
            (Some(large), true) => large,
            _ => &self.small,
        };
        engine::Data {
            sges: sges.get(..wqe.nsge).unwrap_or_default(),
            inline: inline.get(..wqe.inline_len).unwrap_or_default(),
        }
    }
}

/// Who runs a QP's queue: at most one runner at a time, and a kick while it
/// runs is never lost.
///
/// # Invariants
/// The value is one of `IDLE`, `RUNNING`, `AGAIN`; only the thread that
/// moved it from `IDLE` to `RUNNING` (the runner) moves it back to `IDLE`.
pub(crate) struct RunState(AtomicU8);

impl RunState {
    const IDLE: u8 = 0;
    const RUNNING: u8 = 1;
    const AGAIN: u8 = 2;

    pub(crate) fn new() -> Self {
        Self(AtomicU8::new(Self::IDLE))
    }

    /// Becomes the runner (`true`), or tells the current runner to go round
    /// again (`false`).
    pub(crate) fn enter(&self) -> bool {
        let mut current = self.0.load(Ordering::Acquire);
        loop {
            let next = if current == Self::IDLE {
                Self::RUNNING
            } else {
                Self::AGAIN
            };
            match self
                .0
                .compare_exchange(current, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return current == Self::IDLE,
                Err(seen) => current = seen,
            }
        }
    }

    /// Called by the runner after a pass: `true` when it may stop, `false`
    /// when it was kicked meanwhile and must make another pass.
    pub(crate) fn exit(&self) -> bool {
        if self
            .0
            .compare_exchange(
                Self::RUNNING,
                Self::IDLE,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
        {
            return true;
        }
        // AGAIN: a kick arrived during the pass; take it and go round.
        self.0.store(Self::RUNNING, Ordering::Release);
        false
    }

    /// Whether no runner is active.
    pub(crate) fn is_idle(&self) -> bool {
        self.0.load(Ordering::Acquire) == Self::IDLE
    }
}

/// The deferred runner of a QP (engine mode `Deferred`).
pub(crate) struct QpWork(pub(super) Weak<Qp>);

impl DeferredRoutine for QpWork {
    fn run(&self) {
        if let Some(qp) = self.0.upgrade() {
            qp.run();
        }
    }
}

impl Qp {
    /// Queues an initiator completion; `false` when the CQ refused it and
    /// the connection was terminated.
    pub(crate) fn complete_initiator(self: &Arc<Self>, completion: Completion) -> bool {
        if self.initiator_cq.push(completion).is_err() {
            self.terminate();
            return false;
        }
        true
    }

    /// Makes the runner look at the queue: runs it here (inline mode) or
    /// schedules it (deferred mode).
    pub(crate) fn kick(self: &Arc<Self>) {
        match &self.worker {
            Some(worker) => {
                let _ = worker.schedule();
            }
            None => self.run(),
        }
    }

    /// Runs the queue unless a runner is already at it, in which case that
    /// one is told to look again before it stops.
    pub(super) fn run(self: &Arc<Self>) {
        if !self.run.enter() {
            return;
        }
        loop {
            self.process();
            if self.run.exit() {
                self.notify_quiescent();
                return;
            }
        }
    }

    /// Executes rung requests in order until the queue is drained or a Send
    /// waits for a receive at the peer.
    ///
    /// One lock of the send queue per request: a request that succeeded is
    /// removed from the ring in the same critical section that copies out the
    /// next one, and reported right after it (before the next executes), so
    /// completions stay in post order (P23) and a slot is free before its
    /// completion is seen (P24). A request that failed is retired on its own
    /// first, so that the connection it ends is seen by the next (E5).
    pub(super) fn process(self: &Arc<Self>) {
        let mut scratch = Scratch::new();
        let mut tokens = engine::Tokens::default();
        // A Send, Write or Read that succeeded and waits to be removed and
        // reported: only what its completion needs, not the request (a copy
        // of the request is moved and dropped once, not carried round).
        let mut done: Option<Done> = None;
        // The peer as the send queue named it for the last request: cloned
        // again only when that changes, not per request (two atomic counts
        // on a line the peer's threads share; docs/performance.md).
        let mut peer: Option<Arc<Self>> = None;
        loop {
            let (next, state, replaced) = {
                let mut sq = self.sq.lock();
                if done.is_some() {
                    sq.ring.pop();
                    sq.rung = sq.rung.saturating_sub(1);
                }
                if let Some(link) = &sq.link {
                    let link = Arc::clone(link);
                    drop(sq);
                    tokens.release();
                    if let Some(done) = done.take() {
                        self.report_done(done);
                    }
                    // The iWARP data path: FPDUs out, completions in post order.
                    link.run(self);
                    return;
                }
                let next = self.copy_rung_into(&sq, &mut scratch);
                let same_peer = match (&peer, &sq.peer) {
                    (Some(held), Some(now)) => Arc::ptr_eq(held, now),
                    (None, None) => true,
                    _ => false,
                };
                // The peer replaced is dropped after the lock (it may be the
                // last reference).
                let replaced = if same_peer {
                    None
                } else {
                    core::mem::replace(&mut peer, sq.peer.clone())
                };
                (next, sq.state, replaced)
            };
            drop(replaced);
            if next.is_none() {
                // The last request queued: its completion may be the last
                // one the consumer waits for before it closes the regions.
                tokens.release();
            }
            if let Some(done) = done.take()
                && self.report_done(done)
            {
                // Its completion ended the connection (a CQ overflow): the
                // next request, still queued, is read again in that light.
                continue;
            }
            let Some(wqe) = next else {
                return;
            };
            // Fault injection: an error completion instead (E8, E5).
            let injected = match (state, &peer) {
                (QpState::Connected, Some(_)) => fault::hit_at(fault::Kind::Completion),
                _ => None,
            };
            let status = match (state, &peer, injected) {
                (_, _, Some(index)) => fault::error_status(wqe.op.opcode(), index),
                (QpState::Connected, Some(peer), None) => {
                    let data = scratch.data(&wqe);
                    match engine::execute(self, peer, &wqe, &data, &mut tokens) {
                        Some(status) => status,
                        // A Send waits for a receive at the peer; the peer's
                        // next receive kicks this runner again.
                        None => return,
                    }
                }
                // Nothing executes once the connection ended (E5).
                _ => WcStatus::Cancelled,
            };
            if let Some(succeeded) = Done::of(&wqe, status) {
                done = Some(succeeded);
            } else {
                // Reported at once, before the next request is seen (a
                // failure, an injected fault, a cancel, a bind, a
                // registration: not the per-request path of Sends, Writes
                // and Reads): the pass lets go of every region first, so a
                // consumer reacting to this completion, or a pass that only
                // cancels what a consumer goes on posting, never keeps a
                // close or deregistration waiting (L18, M11, E5).
                tokens.release();
                self.retire(&wqe, status);
            }
        }
    }

    /// Copies the `index`th queued request (from the head) with its SGEs and
    /// inline bytes, when the doorbell has released it to the runner.
    pub(crate) fn snapshot(
        &self,
        index: usize,
        sges: &mut [Sge; MAX_SGE],
        inline: &mut [u8; MAX_INLINE],
    ) -> Option<SendWqe> {
        self.copy_rung(&self.sq.lock(), index, sges, inline)
    }

    /// Copies the `index`th request of `sq` (from the head) with its SGEs
    /// and inline bytes, when the doorbell has released it (D4).
    pub(super) fn copy_rung(
        &self,
        sq: &SendQueue,
        index: usize,
        sges: &mut [Sge],
        inline: &mut [u8],
    ) -> Option<SendWqe> {
        if index >= sq.rung {
            return None;
        }
        let (slot, wqe) = sq.ring.get_with_slot(index)?;
        self.copy_data(sq, slot, wqe, sges, inline);
        Some(wqe.clone())
    }

    /// The head request of `sq`, when rung, copied as
    /// [`copy_rung`](Self::copy_rung) does into `scratch`, which makes room
    /// for many SGEs or long inline data only for a request that has them.
    pub(super) fn copy_rung_into(&self, sq: &SendQueue, scratch: &mut Scratch) -> Option<SendWqe> {
        if sq.rung == 0 {
            return None;
        }
        let (slot, wqe) = sq.ring.get_with_slot(0)?;
        let (sges, inline) = scratch.room(wqe.nsge, wqe.inline_len);
        self.copy_data(sq, slot, wqe, sges, inline);
        Some(wqe.clone())
    }

    /// Copies the SGEs and inline bytes of `wqe`, queued in `slot`.
    fn copy_data(
        &self,
        sq: &SendQueue,
        slot: usize,
        wqe: &SendWqe,
        sges: &mut [Sge],
        inline: &mut [u8],
    ) {
        let nsge = wqe.nsge.min(MAX_SGE);
        if nsge > 0 {
            let sge_base = slot.saturating_mul(self.sge_cap);
            if let (Some(src), Some(dst)) =
                (sq.sges.get(sge_base..sge_base + nsge), sges.get_mut(..nsge))
            {
                dst.copy_from_slice(src);
            }
        }
        let n = wqe.inline_len.min(MAX_INLINE);
        if n > 0 {
            let inline_base = slot.saturating_mul(self.inline_cap);
            if let (Some(src), Some(dst)) = (
                sq.inline.get(inline_base..inline_base + n),
                inline.get_mut(..n),
            ) {
                dst.copy_from_slice(src);
            }
        }
    }

    /// The ring slot of the `index`th queued request and its opcode.
    pub(crate) fn queued(&self, index: usize) -> Option<(usize, Opcode)> {
        let sq = self.sq.lock();
        let wqe = sq.ring.get(index)?;
        Some((sq.ring.slot_of(index), wqe.op.opcode()))
    }

    /// Slots of the initiator ring.
    pub(crate) fn initiator_slots(&self) -> usize {
        self.sq.lock().ring.capacity()
    }

    /// Removes the head request and reports its completion.
    pub(crate) fn retire(self: &Arc<Self>, wqe: &SendWqe, status: WcStatus) {
        {
            let mut sq = self.sq.lock();
            sq.ring.pop();
            sq.rung = sq.rung.saturating_sub(1);
        }
        self.report(wqe, status);
    }

    /// Reports the completion of a request already removed from the ring;
    /// `true` when that ended the connection.
    pub(super) fn report(self: &Arc<Self>, wqe: &SendWqe, status: WcStatus) -> bool {
        match &wqe.op {
            SendOp::Bind { mw, key, .. } if !status.is_success() => mw.cancel_bind(*key),
            // Executed or cancelled: the staged page list is free again.
            SendOp::FastRegister { mr, slot } => mr.unstage(*slot),
            _ => {}
        }
        let mut ended = self.complete(status, wqe.op.opcode(), wqe.flags, wqe.context);
        if !status.is_success() && status != WcStatus::Cancelled {
            // E5: an error completion terminates the connection.
            self.terminate();
            ended = true;
        }
        ended
    }

    /// [`report`](Self::report) for a Send, Write or Read that succeeded:
    /// nothing to release, nothing to terminate.
    fn report_done(self: &Arc<Self>, done: Done) -> bool {
        self.complete(WcStatus::Success, done.opcode, done.flags, done.context)
    }

    /// Queues the completion of a request unless it is a silent success;
    /// `true` when the CQ refused it and the connection ended.
    fn complete(
        self: &Arc<Self>,
        status: WcStatus,
        opcode: Opcode,
        flags: WrFlags,
        context: usize,
    ) -> bool {
        // P14/P15: silent success produces nothing; failures always report.
        if status.is_success() && flags.contains(WrFlags::SILENT_SUCCESS) {
            return false;
        }
        !self.complete_initiator(Completion::new(
            status,
            opcode,
            self.config.context,
            context,
        ))
    }
}

/// What the completion of a Send, Write or Read that succeeded needs: all
/// [`Qp::report_done`] reads, so the runner carries this instead of the
/// request until it removes the request from the ring.
#[derive(Clone, Copy)]
struct Done {
    opcode: Opcode,
    flags: WrFlags,
    context: usize,
}

impl Done {
    /// For `wqe` completed with `status`, when it is a Send, Write or Read
    /// that succeeded (removed together with the copy of the next request);
    /// `None` when it is retired on its own (a failure, E5, or an operation
    /// with something to release).
    fn of(wqe: &SendWqe, status: WcStatus) -> Option<Self> {
        let data = matches!(
            wqe.op,
            SendOp::Send { .. } | SendOp::Write { .. } | SendOp::Read { .. }
        );
        (data && status.is_success()).then(|| Self {
            opcode: wqe.op.opcode(),
            flags: wqe.flags,
            context: wqe.context,
        })
    }
}

#[cfg(test)]
#[cfg(not(loom))]
mod done_tests;
