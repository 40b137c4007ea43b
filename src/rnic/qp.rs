//! Queue pairs: the initiator and receive queues, their states, the doorbell
//! (deferred batching, rules D1–D6), flush, and the connection to a peer.
//!
//! # Queues
//! The initiator queue is a ring of work requests allocated at creation with
//! room for their SGEs and inline data, so posting allocates nothing. Entries
//! stay in the ring until they complete, and only the QP's *runner* (see
//! below) retires them, oldest first, so initiator completions come in post
//! order (P23) and each accepted request completes exactly once (P6).
//!
//! # Doorbell
//! Requests posted with `DEFER` are queued but not *rung*: the runner only
//! executes rung entries. Every request posted without the flag rings the
//! doorbell for itself and every deferred entry before it (D2). When an
//! initiator call fails inline, the doorbell is rung for the deferred entries
//! before the failure is returned (D4, D6). Flush, disconnect and close ring it
//! too (D5), and a failed call leaves no trace (D3, P6).
//!
//! # Runner
//! One runner at a time executes a QP's rung requests: a small
//! idle / running / again state machine (`RunState`) makes `kick` from any
//! thread either start the runner or tell the running one to look again, so
//! nothing is missed and nothing runs twice. In [`EngineMode::Inline`] the
//! runner runs in the thread that kicked it (posting, a peer posting a
//! receive, flush); in [`EngineMode::Deferred`] it runs as deferred work.
//!
//! # States
//! `Idle` (created; receives may be posted, P8) → `Connected` (via
//! [`connect`]) → `Error` (flushed, or an error completion terminated the
//! connection: every outstanding and later request completes cancelled, E5)
//! → `Disconnected` (disconnect or close: later posts fail inline, X5).
//!
//! # Files
//! This file holds the types, creation and connection; `post.rs` the
//! initiator posts and their checks, `receive.rs` the receive queue (posting,
//! taking for an incoming Send, cancelling, completing), `state.rs` the state
//! changes (flush, disconnect, terminate, close) and `runner.rs` the runner
//! (kick, the pass over rung requests, retiring and reporting).

use alloc::boxed::Box;
use core::fmt;

use super::cq::Cq;
use super::device::{Device, EngineMode, ObjectKind, ResourceError, Slot};
use super::iwarp::link::Link;
use super::memory::Span;
use super::mr::{Finish, Mr, MrError, Mw, Pd};
use super::ring::Ring;
use super::srq::Srq;
use super::types::{Access, Opcode, Sge, WrFlags};
use crate::kernel::deferred::Deferred;
use crate::kernel::mem::try_filled;
use crate::kernel::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use crate::kernel::sync::{Arc, SpinLock, Weak};

mod post;
mod receive;
mod runner;
mod state;

use receive::RecvQueue;
pub(crate) use receive::{FEW_RECV_SGE, NoReceive, RecvWqe};
use runner::QpWork;
pub(crate) use runner::RunState;
/// The most SGEs any request may carry; device limits are clamped to it.
pub const MAX_SGE: usize = 32;
/// The most inline bytes any request may carry; device limits are clamped.
pub const MAX_INLINE: usize = 1024;

/// What a QP is created with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct QpConfig {
    /// Returned in every completion of the QP (P21).
    pub context: usize,
    /// Receive queue depth (ignored with an SRQ).
    pub receive_depth: u32,
    /// Initiator queue depth.
    pub initiator_depth: u32,
    /// SGEs per receive (ignored with an SRQ).
    pub max_receive_sge: u32,
    /// SGEs per initiator request.
    pub max_initiator_sge: u32,
    /// Inline bytes per Send or Write.
    pub inline_size: u32,
}

/// Why a QP could not be created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CreateQpError {
    /// A depth, SGE count or inline size above the device's limit, or a zero
    /// initiator depth (L13).
    InvalidParameter,
    /// The CQs, SRQ and PD are not all of one device.
    Mismatch,
    /// Out of memory or over the QP limit.
    Resources,
}

impl From<ResourceError> for CreateQpError {
    fn from(_: ResourceError) -> Self {
        Self::Resources
    }
}

/// Why a post was refused inline. A refused post leaves no trace (P6, D3)
/// and does not harm the QP: earlier and later requests proceed (E6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PostError {
    /// Initiator request on a QP that is not connected (P7), or any request
    /// on a disconnected or closed QP (X5).
    ConnectionInvalid,
    /// More SGEs than the queue allows (P9).
    TooManySge,
    /// More bytes than `MaxTransferLength` (P10).
    TooLong,
    /// Inline data larger than the QP's inline size (P12).
    InlineTooLong,
    /// The queue is full (P24).
    QueueFull,
    /// A malformed request (bad page list, window range, object of another
    /// PD or kind, a flag the operation does not take).
    InvalidParameter,
    /// Rights that cannot be granted (M15, M19).
    AccessViolation,
    /// An inline source buffer that cannot be read.
    InvalidBuffer,
    /// The QP's CQ overflowed or failed: the QP is unusable (E10, E13).
    Unusable,
}

impl From<MrError> for PostError {
    fn from(e: MrError) -> Self {
        match e {
            MrError::AccessViolation => Self::AccessViolation,
            // Every staged page list of the region is taken and no memory
            // or token is left for another (P24 spirit).
            MrError::Busy | MrError::Resources => Self::QueueFull,
            _ => Self::InvalidParameter,
        }
    }
}

/// Connection-level events of a QP, for the connection layer (X2).
pub trait QpEvents: Send + Sync {
    /// The connection ended without this side's disconnect: the peer
    /// disconnected or closed, or an error terminated it. Called once, with
    /// no QP lock held.
    fn connection_lost(&self);
}

/// The data of a Send or Write: registered memory, or bytes to copy now.
#[derive(Clone, Copy, Debug)]
pub enum Payload<'a> {
    /// SGEs naming registered memory (or logical addresses, privileged token).
    Sges(&'a [Sge]),
    /// Inline data (P12): buffers the caller vouches for until the call
    /// returns; copied before the post returns, tokens ignored.
    Inline(&'a [Span]),
}

/// What an Invalidate names.
#[derive(Clone, Debug)]
pub enum InvalidateTarget {
    /// A fast-register region.
    Mr(Arc<Mr>),
    /// A memory window.
    Mw(Arc<Mw>),
}

/// The operation of an initiator request, with what it needs at execution.
#[derive(Clone)]
pub(crate) enum SendOp {
    Send {
        invalidate: Option<u32>,
    },
    Write {
        remote_addr: u64,
        remote_key: u32,
    },
    Read {
        remote_addr: u64,
        remote_key: u32,
    },
    Bind {
        mw: Arc<Mw>,
        mr: Arc<Mr>,
        /// The token `Mw::prepare_bind` assigned at post time (M20).
        key: u32,
        base: u64,
        len: u64,
        access: Access,
    },
    FastRegister {
        mr: Arc<Mr>,
        /// The region's staged page list this request owns.
        slot: usize,
    },
    Invalidate {
        target: InvalidateTarget,
    },
}

impl SendOp {
    pub(crate) const fn opcode(&self) -> Opcode {
        match self {
            Self::Send { .. } => Opcode::Send,
            Self::Write { .. } => Opcode::Write,
            Self::Read { .. } => Opcode::Read,
            Self::Bind { .. } => Opcode::Bind,
            Self::FastRegister { .. } => Opcode::FastRegister,
            Self::Invalidate { .. } => Opcode::Invalidate,
        }
    }
}

/// One queued initiator request.
#[derive(Clone)]
pub(crate) struct SendWqe {
    pub(crate) context: usize,
    pub(crate) op: SendOp,
    pub(crate) flags: WrFlags,
    pub(crate) nsge: usize,
    /// Bytes of inline data (with `WrFlags::INLINE`).
    pub(crate) inline_len: usize,
}

/// The connection state of a QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpState {
    /// Created, never connected: receives may be posted (P8).
    Idle,
    /// Connected to a peer.
    Connected,
    /// Flushed or terminated by an error: requests complete cancelled (E5).
    Error,
    /// Disconnected or closed: posts fail inline (X5).
    Disconnected,
}

impl fmt::Display for QpState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Idle => "IDLE",
            Self::Connected => "CONNECTED",
            Self::Error => "ERROR",
            Self::Disconnected => "DISCONNECTED",
        })
    }
}

/// The initiator queue and the connection, under one lock so that a state
/// change and the doorbell it rings are one step (P4, P5, D5). Serializing
/// posts is not its job (P3: the consumer serializes them, P2); it is what
/// keeps posts that break P2 memory-safe.
pub(crate) struct SendQueue {
    pub(crate) state: QpState,
    pub(crate) peer: Option<Arc<Qp>>,
    /// The iWARP link when the peer is reached over a byte stream
    /// (`iwarp::link`) instead of the in-memory fabric (`peer`).
    pub(crate) link: Option<Arc<Link>>,
    ring: Ring<SendWqe>,
    /// Entries from the head that the doorbell has released to the runner.
    rung: usize,
    /// SGEs of each slot: `sge_cap` per slot.
    sges: Box<[Sge]>,
    /// Inline bytes of each slot: `inline_cap` per slot.
    inline: Box<[u8]>,
    /// Negotiated read limits (N20): inbound, outbound.
    pub(crate) read_limits: (u32, u32),
    /// Whether the QP has ever been `Connected`: a QP flushed before it was
    /// connected is in `Error` for its receives (E1) but still not connected
    /// for its initiator requests (P7).
    was_connected: bool,
}

impl SendQueue {
    pub(crate) fn set_state(&mut self, qp: u32, state: QpState) {
        self.was_connected |= state == QpState::Connected;
        if self.state != state {
            crate::klog!(
                crate::kernel::log::Level::Trace,
                "qp {qp}: {} -> {state}",
                self.state
            );
            self.state = state;
        }
    }
}

/// A queue pair.
pub struct Qp {
    id: u32,
    pd: Arc<Pd>,
    _slot: Slot,
    config: QpConfig,
    sge_cap: usize,
    inline_cap: usize,
    initiator_cq: Arc<Cq>,
    receive_cq: Arc<Cq>,
    srq: Option<Arc<Srq>>,
    pub(crate) sq: SpinLock<SendQueue>,
    rq: Option<SpinLock<RecvQueue>>,
    run: RunState,
    worker: Option<Deferred<QpWork>>,
    events: SpinLock<Option<Arc<dyn QpEvents>>>,
    lost_reported: AtomicBool,
    /// Receives taken for an incoming Send ([`Qp::take_receive`]) whose
    /// completion is not yet in the CQ ([`Qp::complete_taken`]): a close
    /// waits for them (L21), since `cancel_receives` no longer sees them.
    taken: AtomicUsize,
    /// The callback of a `close_with` waiting for the runner to stop.
    quiesced: SpinLock<Option<Finish>>,
}

impl fmt::Debug for Qp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Qp")
            .field("id", &self.id)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Qp {
    /// Creates a QP on `pd` with its receives on `srq` or a receive queue of
    /// its own (rules L13, Q2).
    ///
    /// # Errors
    /// [`CreateQpError`] for limits (L13), objects of different devices, or
    /// resources.
    pub fn new(
        pd: &Arc<Pd>,
        receive_cq: &Arc<Cq>,
        initiator_cq: &Arc<Cq>,
        srq: Option<&Arc<Srq>>,
        config: QpConfig,
    ) -> Result<Arc<Self>, CreateQpError> {
        let device = pd.device();
        let limits = device.limits();
        let max_sge = limits.max_initiator_sge.max(limits.max_read_sge);
        let receive_ok = srq.is_some()
            || (config.receive_depth <= limits.max_receive_queue_depth
                && config.max_receive_sge <= limits.max_receive_sge);
        if !receive_ok
            || config.initiator_depth == 0
            || config.initiator_depth > limits.max_initiator_queue_depth
            || config.max_initiator_sge > limits.max_initiator_sge
            || config.inline_size > limits.max_inline_data
            || config.inline_size as usize > MAX_INLINE
            || max_sge as usize > MAX_SGE
        {
            return Err(CreateQpError::InvalidParameter);
        }
        if let Some(srq) = srq
            && !Arc::ptr_eq(srq.pd().device(), device)
        {
            return Err(CreateQpError::Mismatch);
        }
        let slot = device.reserve(ObjectKind::Qp)?;
        // Reads may carry more SGEs than other requests (P9), so every slot
        // has room for the larger of the two.
        let sge_cap = (config.max_initiator_sge.max(limits.max_read_sge)) as usize;
        let inline_cap = config.inline_size as usize;
        let depth = config.initiator_depth as usize;
        let sq = SendQueue {
            state: QpState::Idle,
            peer: None,
            link: None,
            ring: Ring::new(depth).ok_or(CreateQpError::Resources)?,
            rung: 0,
            sges: try_filled(depth.saturating_mul(sge_cap), Sge::default())
                .ok_or(CreateQpError::Resources)?,
            inline: try_filled(depth.saturating_mul(inline_cap), 0_u8)
                .ok_or(CreateQpError::Resources)?,
            read_limits: (0, 0),
            was_connected: false,
        };
        let rq = if srq.is_some() {
            None
        } else {
            let depth = config.receive_depth as usize;
            let cap = config.max_receive_sge as usize;
            Some(SpinLock::new(RecvQueue {
                state: QpState::Idle,
                ring: Ring::new(depth).ok_or(CreateQpError::Resources)?,
                sges: try_filled(depth.saturating_mul(cap), Sge::default())
                    .ok_or(CreateQpError::Resources)?,
                counts: try_filled(depth, 0_usize).ok_or(CreateQpError::Resources)?,
                peer_waiting: false,
            }))
        };
        let id = device.next_id();
        let mode = device.engine_mode();
        let qp = Arc::new_cyclic(|weak| Self {
            id,
            pd: Arc::clone(pd),
            _slot: slot,
            config,
            sge_cap,
            inline_cap,
            initiator_cq: Arc::clone(initiator_cq),
            receive_cq: Arc::clone(receive_cq),
            srq: srq.cloned(),
            sq: SpinLock::new(sq),
            rq,
            run: RunState::new(),
            worker: (mode == EngineMode::Deferred)
                .then(|| Deferred::new(QpWork(Weak::clone(weak)))),
            events: SpinLock::new(None),
            lost_reported: AtomicBool::new(false),
            taken: AtomicUsize::new(0),
            quiesced: SpinLock::new(None),
        });
        if let Some(srq) = srq {
            srq.attach(&qp).map_err(|()| CreateQpError::Resources)?;
        }
        Ok(qp)
    }

    /// The QP number.
    pub const fn id(&self) -> u32 {
        self.id
    }

    /// The QP's PD.
    pub const fn pd(&self) -> &Arc<Pd> {
        &self.pd
    }

    /// The device.
    pub fn device(&self) -> &Arc<Device> {
        self.pd.device()
    }

    /// The creation parameters.
    pub const fn config(&self) -> &QpConfig {
        &self.config
    }

    /// The CQ of initiator completions.
    pub const fn initiator_cq(&self) -> &Arc<Cq> {
        &self.initiator_cq
    }

    /// The CQ of receive completions.
    pub const fn receive_cq(&self) -> &Arc<Cq> {
        &self.receive_cq
    }

    /// The SRQ, if the QP takes its receives from one.
    pub const fn srq(&self) -> Option<&Arc<Srq>> {
        self.srq.as_ref()
    }

    /// The current state.
    pub fn state(&self) -> QpState {
        self.sq.lock().state
    }

    /// The effective (inbound, outbound) read limits of the connection (N20).
    pub fn read_limits(&self) -> (u32, u32) {
        self.sq.lock().read_limits
    }

    /// Sets the receiver of connection events (the connection layer).
    pub fn set_events(&self, events: Option<Arc<dyn QpEvents>>) {
        *self.events.lock() = events;
    }

    /// Whether the QP has nothing queued or executing: no initiator request
    /// is outstanding, the runner is idle and no receive taken by an
    /// incoming Send is still being placed (part of X1's "all DMA
    /// finished"; L21 for the close).
    pub fn is_quiescent(&self) -> bool {
        self.sq.lock().ring.is_empty()
            && self.run.is_idle()
            && self.taken.load(Ordering::SeqCst) == 0
    }
}

/// Connects an idle QP to a peer reached through `link` (iWARP), with the
/// negotiated (inbound, outbound) read limits (N20).
pub(crate) fn attach_link(
    qp: &Arc<Qp>,
    link: Arc<Link>,
    read_limits: (u32, u32),
) -> Result<(), ConnectError> {
    {
        let mut sq = qp.sq.lock();
        if sq.state != QpState::Idle {
            return Err(ConnectError::NotIdle);
        }
        let l = qp.device().limits();
        sq.read_limits = (
            read_limits.0.min(l.max_inbound_read_limit),
            read_limits.1.min(l.max_outbound_read_limit),
        );
        sq.link = Some(link);
        sq.set_state(qp.id, QpState::Connected);
    }
    if let Some(rq) = &qp.rq {
        let mut q = rq.lock();
        if q.state == QpState::Idle {
            q.state = QpState::Connected;
        }
    }
    Ok(())
}

/// Why two QPs could not be connected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectError {
    /// Both ends are the same QP.
    SameQp,
    /// A QP was already connected, flushed or closed (X5).
    NotIdle,
}

/// Connects two idle QPs of any devices of one driver instance (the fabric),
/// with the read limits each side asked for (N20): each side's effective
/// inbound limit is min(own inbound, peer's outbound), and the other way.
///
/// # Errors
/// [`ConnectError::SameQp`] for a QP connected to itself,
/// [`ConnectError::NotIdle`] when either QP is not idle.
pub fn connect(
    a: &Arc<Qp>,
    b: &Arc<Qp>,
    a_limits: (u32, u32),
    b_limits: (u32, u32),
) -> Result<(), ConnectError> {
    if Arc::ptr_eq(a, b) {
        return Err(ConnectError::SameQp);
    }
    let clamp = |qp: &Qp, (inbound, outbound): (u32, u32)| {
        let l = qp.device().limits();
        (
            inbound.min(l.max_inbound_read_limit),
            outbound.min(l.max_outbound_read_limit),
        )
    };
    let (a_in, a_out) = clamp(a, a_limits);
    let (b_in, b_out) = clamp(b, b_limits);
    // Lock in a fixed order (by address) so two connects never deadlock.
    let (first, second) = if (Arc::as_ptr(a) as usize) < (Arc::as_ptr(b) as usize) {
        (a, b)
    } else {
        (b, a)
    };
    let mut first_sq = first.sq.lock();
    let mut second_sq = second.sq.lock();
    if first_sq.state != QpState::Idle || second_sq.state != QpState::Idle {
        return Err(ConnectError::NotIdle);
    }
    let (a_sq, b_sq) = if Arc::ptr_eq(first, a) {
        (&mut first_sq, &mut second_sq)
    } else {
        (&mut second_sq, &mut first_sq)
    };
    a_sq.peer = Some(Arc::clone(b));
    a_sq.read_limits = (a_in.min(b_out), a_out.min(b_in));
    a_sq.set_state(a.id, QpState::Connected);
    b_sq.peer = Some(Arc::clone(a));
    b_sq.read_limits = (b_in.min(a_out), b_out.min(a_in));
    b_sq.set_state(b.id, QpState::Connected);
    drop(first_sq);
    drop(second_sq);
    for qp in [a, b] {
        if let Some(rq) = &qp.rq {
            let mut q = rq.lock();
            if q.state == QpState::Idle {
                q.state = QpState::Connected;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[cfg(not(loom))]
mod tests;

#[cfg(test)]
#[cfg(not(loom))]
mod state_tests;

#[cfg(all(test, loom))]
mod loom_tests;
