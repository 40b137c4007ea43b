//! Initiator posts (Send, Write, Read, Bind, FastRegister, Invalidate):
//! their checks (P7, P9–P13, E13), the slot they fill and the doorbell (D2–D6).

use super::MAX_SGE;
use super::{InvalidateTarget, Payload, PostError, Qp, QpState, SendOp, SendQueue, SendWqe};
use crate::kernel::sync::Arc;
use crate::rnic::fault;
use crate::rnic::memory;
use crate::rnic::mr::{Mr, Mw};
use crate::rnic::types::{Access, Sge, WrFlags};

impl Qp {
    /// Posts a Send (with `invalidate`, a SendAndInvalidate, rule M24).
    ///
    /// # Errors
    /// [`PostError`] as documented on each variant; nothing is queued then.
    pub fn post_send(
        self: &Arc<Self>,
        context: usize,
        payload: Payload<'_>,
        flags: WrFlags,
        invalidate: Option<u32>,
    ) -> Result<(), PostError> {
        self.post_data(context, SendOp::Send { invalidate }, payload, flags)
    }

    /// Posts an RDMA Write of `payload` to `remote_addr` under `remote_key`
    /// (P19; inline allowed, P13).
    ///
    /// # Errors
    /// [`PostError`]; nothing is queued then.
    pub fn post_write(
        self: &Arc<Self>,
        context: usize,
        payload: Payload<'_>,
        remote_addr: u64,
        remote_key: u32,
        flags: WrFlags,
    ) -> Result<(), PostError> {
        self.post_data(
            context,
            SendOp::Write {
                remote_addr,
                remote_key,
            },
            payload,
            flags,
        )
    }

    /// Posts an RDMA Read from `remote_addr` under `remote_key` into `sges`.
    ///
    /// # Errors
    /// [`PostError`]; nothing is queued then.
    pub fn post_read(
        self: &Arc<Self>,
        context: usize,
        sges: &[Sge],
        remote_addr: u64,
        remote_key: u32,
        flags: WrFlags,
    ) -> Result<(), PostError> {
        if flags.contains(WrFlags::INLINE) {
            return self.refuse(PostError::InvalidParameter);
        }
        self.post_data(
            context,
            SendOp::Read {
                remote_addr,
                remote_key,
            },
            Payload::Sges(sges),
            flags,
        )
    }

    /// Posts a Bind of `mw` over `len` bytes of `mr` at index `base` (M18–M21).
    ///
    /// # Errors
    /// [`PostError`]; nothing is queued then.
    #[expect(clippy::too_many_arguments, reason = "mirrors NdkBind")]
    pub fn post_bind(
        self: &Arc<Self>,
        context: usize,
        mr: &Arc<Mr>,
        mw: &Arc<Mw>,
        base: u64,
        len: u64,
        access: Access,
        flags: WrFlags,
    ) -> Result<(), PostError> {
        if !Arc::ptr_eq(mr.pd(), &self.pd) {
            return self.refuse(PostError::InvalidParameter);
        }
        let mut taken = None;
        let posted = self.post_initiator_with(context, flags, |_, _| {
            // M20: the window's token is assigned now, readable on return;
            // the request carries it to its execution (P18: whether the
            // window is still bound is checked then, in post order).
            let key = mw.prepare_bind(mr, base, len, access)?;
            taken = Some(key);
            let op = SendOp::Bind {
                mw: Arc::clone(mw),
                mr: Arc::clone(mr),
                key,
                base,
                len,
                access,
            };
            Ok((op, 0))
        });
        if let (Err(_), Some(key)) = (&posted, taken) {
            mw.cancel_bind(key);
        }
        posted
    }

    /// Posts a FastRegister of `pages` into `mr` (M15–M17).
    ///
    /// # Errors
    /// [`PostError`]; nothing is queued then.
    #[expect(clippy::too_many_arguments, reason = "mirrors NdkFastRegister")]
    pub fn post_fast_register(
        self: &Arc<Self>,
        context: usize,
        mr: &Arc<Mr>,
        pages: &[u64],
        fbo: u64,
        len: u64,
        base: u64,
        access: Access,
        flags: WrFlags,
    ) -> Result<(), PostError> {
        if !Arc::ptr_eq(mr.pd(), &self.pd) || !mr.is_fast() {
            return self.refuse(PostError::InvalidParameter);
        }
        // The page list is captured now (the consumer's array is valid only
        // during this call) into a staged slot the request carries.
        let slot = match mr.stage_fast_register(pages, fbo, len, base, access) {
            Ok(slot) => slot,
            Err(e) => return self.refuse(e.into()),
        };
        let op = SendOp::FastRegister {
            mr: Arc::clone(mr),
            slot,
        };
        let posted = self.post_initiator(context, op, flags, |_, _| Ok(0));
        if posted.is_err() {
            mr.unstage(slot);
        }
        posted
    }

    /// Posts an Invalidate of a fast-registered region or a bound window (M22).
    ///
    /// # Errors
    /// [`PostError`]; nothing is queued then.
    pub fn post_invalidate(
        self: &Arc<Self>,
        context: usize,
        target: InvalidateTarget,
        flags: WrFlags,
    ) -> Result<(), PostError> {
        let same_pd = match &target {
            InvalidateTarget::Mr(mr) => Arc::ptr_eq(mr.pd(), &self.pd) && mr.is_fast(),
            InvalidateTarget::Mw(mw) => Arc::ptr_eq(mw.pd(), &self.pd),
        };
        if !same_pd {
            return self.refuse(PostError::InvalidParameter);
        }
        self.post_initiator(context, SendOp::Invalidate { target }, flags, |_, _| Ok(0))
    }

    /// Whether a CQ of the QP failed (E10, E11) or its SRQ did (Q9): the QP
    /// is then unusable and every post, on either queue, is refused inline
    /// (E13). A QP with an SRQ still has its own receive CQ (Q2), so that CQ
    /// counts too.
    pub(super) fn is_unusable(&self) -> bool {
        self.initiator_cq.is_error()
            || self.receive_cq.is_error()
            || self.srq.as_ref().is_some_and(|srq| srq.is_failed())
    }

    /// Refuses a post inline: rings the doorbell for earlier deferred
    /// requests first (D4, D6).
    pub(super) fn refuse(self: &Arc<Self>, error: PostError) -> Result<(), PostError> {
        self.ring_deferred();
        Err(error)
    }

    /// Hands every deferred request to the engine (D4): for a layer above
    /// that refuses a post before it reaches the QP.
    pub fn ring_deferred(self: &Arc<Self>) {
        let rang = {
            let mut sq = self.sq.lock();
            let rang = sq.rung != sq.ring.len();
            sq.rung = sq.ring.len();
            rang
        };
        if rang {
            self.kick();
        }
    }

    pub(super) fn check_sges(&self, sges: &[Sge], max: usize) -> Result<(), PostError> {
        if sges.len() > max || sges.len() > MAX_SGE {
            return Err(PostError::TooManySge);
        }
        let total: u64 = sges.iter().map(|s| u64::from(s.len)).sum();
        if total > u64::from(self.device().limits().max_transfer_length) {
            return Err(PostError::TooLong);
        }
        Ok(())
    }

    /// Posts a Send, Write or Read: checks the payload, then queues it.
    pub(super) fn post_data(
        self: &Arc<Self>,
        context: usize,
        op: SendOp,
        payload: Payload<'_>,
        flags: WrFlags,
    ) -> Result<(), PostError> {
        match payload {
            Payload::Sges(sges) => {
                let max = if matches!(op, SendOp::Read { .. }) {
                    self.device().limits().max_read_sge as usize
                } else {
                    self.config.max_initiator_sge as usize
                };
                if let Err(e) = self.check_sges(sges, max) {
                    return self.refuse(e);
                }
                if flags.contains(WrFlags::INLINE) {
                    return self.refuse(PostError::InvalidParameter);
                }
                self.post_initiator(context, op, flags, |slot_sges, _| {
                    if let Some(dst) = slot_sges.get_mut(..sges.len()) {
                        dst.copy_from_slice(sges);
                    }
                    Ok(sges.len())
                })
            }
            Payload::Inline(spans) => {
                // P12: more SGEs than the queue allows are fine inline; the
                // total must fit the QP's inline size.
                let total = spans
                    .iter()
                    .try_fold(0_usize, |acc, s| acc.checked_add(s.len()));
                if total.is_none_or(|t| t > self.inline_cap) {
                    return self.refuse(PostError::InlineTooLong);
                }
                self.post_initiator(context, op, flags | WrFlags::INLINE, |_, slot_inline| {
                    let mut at = 0_usize;
                    for span in spans {
                        let dst = slot_inline.get_mut(at..).ok_or(PostError::InlineTooLong)?;
                        memory::copy_to_slice(dst, *span).map_err(|_| PostError::InlineTooLong)?;
                        at += span.len();
                    }
                    Ok(at)
                })
            }
        }
    }

    /// Queues one initiator request: `fill` writes its SGEs or inline bytes
    /// into the slot and returns how many it wrote. Rings the doorbell unless
    /// DEFER (D2); on failure rings it for the earlier deferred requests (D4).
    pub(super) fn post_initiator(
        self: &Arc<Self>,
        context: usize,
        op: SendOp,
        flags: WrFlags,
        fill: impl FnOnce(&mut [Sge], &mut [u8]) -> Result<usize, PostError>,
    ) -> Result<(), PostError> {
        self.post_initiator_with(context, flags, |sges, inline| {
            fill(sges, inline).map(|written| (op, written))
        })
    }

    /// [`post_initiator`](Self::post_initiator) for a request whose
    /// operation is only known once its slot is being filled (a Bind's
    /// token, taken after the connection and queue checks).
    pub(super) fn post_initiator_with(
        self: &Arc<Self>,
        context: usize,
        flags: WrFlags,
        build: impl FnOnce(&mut [Sge], &mut [u8]) -> Result<(SendOp, usize), PostError>,
    ) -> Result<(), PostError> {
        if self.is_unusable() {
            return self.refuse(PostError::Unusable);
        }
        // Fault injection (`fault`): a refusal as if the queue were full
        // (P24, P6, D4), or the connection aborted first (X2, E5).
        if fault::hit(fault::Kind::Post) {
            return self.refuse(PostError::QueueFull);
        }
        self.inject_abort();
        let mut sq = self.sq.lock();
        let connected = match sq.state {
            QpState::Connected => true,
            // E1, E5: a connection flushed or ended by an error still takes
            // requests, which complete cancelled; P7: a flush before any
            // connection makes none.
            QpState::Error => sq.was_connected,
            // P7 and X5: not connected yet, or no longer.
            QpState::Idle | QpState::Disconnected => false,
        };
        let outcome = if !connected {
            Err(PostError::ConnectionInvalid)
        } else if sq.ring.is_full() {
            Err(PostError::QueueFull)
        } else {
            self.fill_slot(&mut sq, context, flags, build)
        };
        match outcome {
            Ok(()) => {
                // In the error state nothing is held back: the request is
                // cancelled at once (E5), whatever its flags.
                let ring_now = !flags.contains(WrFlags::DEFER) || sq.state == QpState::Error;
                if ring_now {
                    sq.rung = sq.ring.len();
                }
                drop(sq);
                if ring_now {
                    self.kick();
                }
                Ok(())
            }
            Err(e) => {
                drop(sq);
                self.refuse(e)
            }
        }
    }

    pub(super) fn fill_slot(
        &self,
        sq: &mut SendQueue,
        context: usize,
        flags: WrFlags,
        build: impl FnOnce(&mut [Sge], &mut [u8]) -> Result<(SendOp, usize), PostError>,
    ) -> Result<(), PostError> {
        let slot = sq.ring.slot_of(sq.ring.len());
        let sge_base = slot.saturating_mul(self.sge_cap);
        let inline_base = slot.saturating_mul(self.inline_cap);
        let SendQueue { sges, inline, .. } = sq;
        let slot_sges = sges
            .get_mut(sge_base..sge_base + self.sge_cap)
            .ok_or(PostError::QueueFull)?;
        let slot_inline = inline
            .get_mut(inline_base..inline_base + self.inline_cap)
            .ok_or(PostError::QueueFull)?;
        let (op, written) = build(slot_sges, slot_inline)?;
        let inline = flags.contains(WrFlags::INLINE);
        let wqe = SendWqe {
            context,
            op,
            flags,
            nsge: if inline { 0 } else { written },
            inline_len: if inline { written } else { 0 },
        };
        sq.ring
            .push(wqe)
            .map(|_| ())
            .map_err(|_| PostError::QueueFull)
    }
}
