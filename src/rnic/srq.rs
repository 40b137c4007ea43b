//! Shared receive queues (rules Q1–Q9, E4).
//!
//! An SRQ holds receives that any attached QP may consume (Q3). Its receives
//! belong to it, not to a QP: flushing or disconnecting an attached QP leaves
//! them queued (E4). A nonzero notify threshold arms the SRQ: when the number
//! of queued receives falls below it, the notification fires once and the SRQ
//! is disarmed until the next `modify` with a nonzero threshold (Q4, Q5).

use alloc::boxed::Box;
use alloc::vec::Vec;

use super::device::{ObjectKind, ResourceError, Slot};
use super::mr::Pd;
use super::qp::{MAX_SGE, NoReceive, PostError, Qp, RecvWqe};
use super::ring::Ring;
use super::types::Sge;
use crate::kernel::sync::{Arc, SpinLock, Weak};

/// What an SRQ notification reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SrqEvent {
    /// Fewer receives than the threshold are queued (Q4).
    BelowThreshold,
    /// A fatal SRQ error (Q9).
    Fatal,
}

/// The consumer's SRQ notification callback (optional, Q8).
pub trait SrqNotify: Send + Sync {
    /// Called with no SRQ lock held.
    fn notify(&self, event: SrqEvent);
}

/// Why an SRQ call was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SrqError {
    /// A depth or SGE count above the device's limit, or zero (L12, Q1, Q6).
    InvalidParameter,
    /// A new depth below the receives queued (Q7).
    BelowCount,
    /// The SRQ failed (Q9).
    InError,
    /// Out of memory or over the SRQ limit.
    Resources,
}

impl From<ResourceError> for SrqError {
    fn from(_: ResourceError) -> Self {
        Self::Resources
    }
}

struct Queue {
    ring: Ring<usize>,
    sges: Box<[Sge]>,
    counts: Box<[usize]>,
    threshold: u32,
    armed: bool,
    failed: bool,
    /// A Send of some attached QP's peer found the SRQ empty.
    waiting: bool,
    attached: Vec<Weak<Qp>>,
}

/// A shared receive queue.
pub struct Srq {
    pd: Arc<Pd>,
    _slot: Slot,
    max_sge: u32,
    queue: SpinLock<Queue>,
    notify: Option<Arc<dyn SrqNotify>>,
}

impl core::fmt::Debug for Srq {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Srq")
            .field("max_sge", &self.max_sge)
            .finish_non_exhaustive()
    }
}

/// A receive ring with its SGE and SGE-count storage.
type Storage = (Ring<usize>, Box<[Sge]>, Box<[usize]>);

fn alloc_queue(depth: u32, max_sge: u32) -> Result<Storage, SrqError> {
    let depth = depth as usize;
    let ring = Ring::new(depth).ok_or(SrqError::Resources)?;
    let mut sges = Vec::new();
    sges.try_reserve_exact(depth.saturating_mul(max_sge as usize))
        .map_err(|_| SrqError::Resources)?;
    sges.resize(depth.saturating_mul(max_sge as usize), Sge::default());
    let mut counts = Vec::new();
    counts
        .try_reserve_exact(depth)
        .map_err(|_| SrqError::Resources)?;
    counts.resize(depth, 0);
    Ok((ring, sges.into_boxed_slice(), counts.into_boxed_slice()))
}

impl Srq {
    /// Creates an SRQ (rules L12, Q1, Q4, Q8).
    ///
    /// # Errors
    /// [`SrqError::InvalidParameter`] for a zero depth or limits above the
    /// device's (with `MaxSrqDepth` 0 every depth is), `Resources` otherwise.
    pub fn new(
        pd: &Arc<Pd>,
        depth: u32,
        max_sge: u32,
        threshold: u32,
        notify: Option<Arc<dyn SrqNotify>>,
    ) -> Result<Arc<Self>, SrqError> {
        let limits = pd.device().limits();
        if depth == 0
            || depth > limits.max_srq_depth
            || max_sge > limits.max_receive_sge
            || max_sge as usize > MAX_SGE
        {
            return Err(SrqError::InvalidParameter);
        }
        let slot = pd.device().reserve(ObjectKind::Srq)?;
        let (ring, sges, counts) = alloc_queue(depth, max_sge)?;
        let srq = Arc::new(Self {
            pd: Arc::clone(pd),
            _slot: slot,
            max_sge,
            queue: SpinLock::new(Queue {
                ring,
                sges,
                counts,
                threshold,
                armed: threshold != 0,
                failed: false,
                waiting: false,
                attached: Vec::new(),
            }),
            notify,
        });
        // Q4: armed below the threshold from the start fires at once.
        srq.check_threshold();
        Ok(srq)
    }

    /// The SRQ's PD.
    pub const fn pd(&self) -> &Arc<Pd> {
        &self.pd
    }

    /// Receives queued.
    pub fn len(&self) -> usize {
        self.queue.lock().ring.len()
    }

    /// Whether no receive is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The depth.
    pub fn depth(&self) -> usize {
        self.queue.lock().ring.capacity()
    }

    /// Posts a receive (Q3).
    ///
    /// # Errors
    /// [`PostError::TooManySge`], [`PostError::TooLong`],
    /// [`PostError::QueueFull`], [`PostError::Unusable`] after a fatal error.
    pub fn post_receive(&self, context: usize, sges: &[Sge]) -> Result<(), PostError> {
        if sges.len() > self.max_sge as usize {
            return Err(PostError::TooManySge);
        }
        let total: u64 = sges.iter().map(|s| u64::from(s.len)).sum();
        if total > u64::from(self.pd.device().limits().max_transfer_length) {
            return Err(PostError::TooLong);
        }
        let cap = self.max_sge as usize;
        let waiters = {
            let mut q = self.queue.lock();
            if q.failed {
                return Err(PostError::Unusable);
            }
            let slot = q.ring.push(context).map_err(|_| PostError::QueueFull)?;
            let base = slot.saturating_mul(cap);
            if let Some(dst) = q.sges.get_mut(base..base + sges.len()) {
                dst.copy_from_slice(sges);
            }
            if let Some(count) = q.counts.get_mut(slot) {
                *count = sges.len();
            }
            core::mem::take(&mut q.waiting)
        };
        if waiters {
            self.wake_waiters();
        }
        Ok(())
    }

    /// Kicks the peers of attached QPs: one of their Sends may be waiting for
    /// this receive. The attached list is copied out one entry at a time so
    /// that no SRQ lock is held while a runner executes; entries never move
    /// ([`attach`](Self::attach)), so a QP closing meanwhile cannot shift a
    /// waiting one past the walk (a lost wake-up, the Send stalled for ever).
    fn wake_waiters(&self) {
        let mut index = 0;
        loop {
            let qp = {
                let q = self.queue.lock();
                match q.attached.get(index) {
                    Some(weak) => weak.upgrade(),
                    None => break,
                }
            };
            index += 1;
            let peer = qp.and_then(|qp| qp.sq.lock().peer.clone());
            if let Some(peer) = peer {
                peer.kick();
            }
        }
    }

    /// Takes the oldest receive for an incoming Send on an attached QP.
    pub(crate) fn take(&self) -> Result<RecvWqe, NoReceive> {
        let cap = self.max_sge as usize;
        let wqe = {
            let mut q = self.queue.lock();
            if q.failed {
                return Err(NoReceive::Gone);
            }
            let slot = q.ring.slot_of(0);
            let Some(context) = q.ring.pop() else {
                q.waiting = true;
                return Err(NoReceive::Empty);
            };
            RecvWqe::copied(context, slot, cap, &q.counts, &q.sges)
        };
        self.check_threshold();
        Ok(wqe)
    }

    /// Fires the notification if armed and below the threshold (Q4, Q5).
    fn check_threshold(&self) {
        let fire = {
            let mut q = self.queue.lock();
            let below = q.armed && !q.failed && q.ring.len() < q.threshold as usize;
            if below {
                q.armed = false;
            }
            below
        };
        if fire && let Some(notify) = &self.notify {
            notify.notify(SrqEvent::BelowThreshold);
        }
    }

    /// Changes the depth and/or re-arms (Q5, Q6, Q7): 0 keeps the depth; a
    /// threshold of 0 keeps the threshold and the arm state.
    ///
    /// # Errors
    /// [`SrqError::InvalidParameter`] above `MaxSrqDepth`,
    /// [`SrqError::BelowCount`] below the receives queued (unchanged then),
    /// [`SrqError::InError`] after a fatal error, `Resources`.
    pub fn modify(&self, depth: u32, threshold: u32) -> Result<(), SrqError> {
        if depth > self.pd.device().limits().max_srq_depth {
            return Err(SrqError::InvalidParameter);
        }
        // Allocate the new queue before taking the lock.
        let fresh = if depth == 0 {
            None
        } else {
            Some(alloc_queue(depth, self.max_sge)?)
        };
        {
            let mut q = self.queue.lock();
            if q.failed {
                return Err(SrqError::InError);
            }
            if let Some((mut ring, mut sges, mut counts)) = fresh {
                if q.ring.len() > depth as usize {
                    return Err(SrqError::BelowCount);
                }
                let cap = self.max_sge as usize;
                // Move every queued receive, oldest first.
                loop {
                    let old_slot = q.ring.slot_of(0);
                    let Some(context) = q.ring.pop() else { break };
                    let n = q.counts.get(old_slot).copied().unwrap_or(0);
                    let Ok(new_slot) = ring.push(context) else {
                        break;
                    };
                    let (from, to) = (old_slot.saturating_mul(cap), new_slot.saturating_mul(cap));
                    if let (Some(src), Some(dst)) =
                        (q.sges.get(from..from + n), sges.get_mut(to..to + n))
                    {
                        dst.copy_from_slice(src);
                    }
                    if let Some(c) = counts.get_mut(new_slot) {
                        *c = n;
                    }
                }
                core::mem::swap(&mut q.ring, &mut ring);
                core::mem::swap(&mut q.sges, &mut sges);
                core::mem::swap(&mut q.counts, &mut counts);
            }
            if threshold != 0 {
                q.threshold = threshold;
                q.armed = true;
            }
        }
        self.check_threshold();
        Ok(())
    }

    /// A fatal error (Q9): reported once through the callback; afterwards the
    /// SRQ and its QPs report nothing more and posts fail inline.
    pub fn fail(&self) {
        let first = {
            let mut q = self.queue.lock();
            !core::mem::replace(&mut q.failed, true)
        };
        if first && let Some(notify) = &self.notify {
            notify.notify(SrqEvent::Fatal);
        }
    }

    /// Whether [`fail`](Self::fail) was called: the SRQ and every QP attached
    /// to it are unusable (Q9).
    pub(crate) fn is_failed(&self) -> bool {
        self.queue.lock().failed
    }

    /// Attaches `qp`: into the first entry a closed or dropped QP left
    /// dead, else at the end. An entry never moves, so that
    /// [`wake_waiters`](Self::wake_waiters), walking the entries by index
    /// without the lock held between them, misses none that was there when
    /// it started.
    pub(crate) fn attach(&self, qp: &Arc<Qp>) -> Result<(), ()> {
        let mut q = self.queue.lock();
        if let Some(dead) = q.attached.iter_mut().find(|w| w.strong_count() == 0) {
            *dead = Arc::downgrade(qp);
            return Ok(());
        }
        q.attached.try_reserve(1).map_err(|_| ())?;
        q.attached.push(Arc::downgrade(qp));
        Ok(())
    }

    /// Detaches `qp`: its entry is left dead, in place (see
    /// [`attach`](Self::attach)).
    pub(crate) fn detach(&self, qp: &Qp) {
        let mut q = self.queue.lock();
        if let Some(entry) = q
            .attached
            .iter_mut()
            .find(|w| core::ptr::eq(w.as_ptr(), qp))
        {
            *entry = Weak::new();
        }
    }

    /// QPs attached (and alive).
    pub fn attached(&self) -> usize {
        self.queue
            .lock()
            .attached
            .iter()
            .filter(|w| w.strong_count() > 0)
            .count()
    }
}
