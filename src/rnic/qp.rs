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

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;

use super::cq::Cq;
use super::device::{Device, EngineMode, ObjectKind, ResourceError, Slot};
use super::engine;
use super::fault;
use super::iwarp::link::Link;
use super::memory::{self, Span};
use super::mr::{Finish, Mr, MrError, Mw, Pd, Progress};
use super::ring::Ring;
use super::srq::Srq;
use super::types::{Access, Completion, Opcode, Sge, WcStatus, WrFlags};
use crate::kernel::deferred::{Deferred, DeferredRoutine};
use crate::kernel::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use crate::kernel::sync::{Arc, SpinLock, Weak};

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

/// Why a post was refused inline. A refused post leaves no trace (P6, D3).
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
/// change and the doorbell it rings are one step (P4, P5, D5).
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

/// The receive queue of a QP without SRQ.
pub(crate) struct RecvQueue {
    /// Set by flush, disconnect and close: receives are then cancelled at
    /// once (E1) or refused (X5), never left queued.
    state: QpState,
    ring: Ring<usize>,
    /// Contexts and SGEs of each slot: `context`, then `sge_cap` SGEs.
    sges: Box<[Sge]>,
    counts: Box<[usize]>,
    /// A peer's Send found this queue empty and waits (RNR): the next receive
    /// kicks the peer's runner.
    peer_waiting: bool,
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

/// The deferred runner of a QP (engine mode `Deferred`).
pub(crate) struct QpWork(Weak<Qp>);

impl DeferredRoutine for QpWork {
    fn run(&self) {
        if let Some(qp) = self.0.upgrade() {
            qp.run();
        }
    }
}

/// A `Vec` of `n` default values, or `None` when memory runs out.
fn try_filled<T: Clone>(n: usize, value: T) -> Option<Box<[T]>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).ok()?;
    v.resize(n, value);
    Some(v.into_boxed_slice())
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

    // ----- posting -------------------------------------------------------

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
            self.complete_receive(Completion::new(
                WcStatus::Cancelled,
                Opcode::Receive,
                self.config.context,
                context,
            ));
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
    ///
    /// A receive taken leaves the queue, so a flush or close no longer
    /// cancels it: its completion is owed by the taker, through
    /// [`Qp::complete_taken`], and until then the QP is not quiescent, so
    /// that its close does not complete before that entry is in the CQ
    /// (L21, P6). (The iWARP receive side takes receives on the stream's
    /// thread, concurrently with the consumer's close.)
    pub(crate) fn take_receive(&self) -> Result<RecvWqe, NoReceive> {
        if let Some(srq) = &self.srq {
            // Counted before the state is read: a close that changes the
            // state first sees the count or makes this take back off.
            self.taken.fetch_add(1, Ordering::SeqCst);
            let taken = if self.state() == QpState::Connected {
                srq.take()
            } else {
                Err(NoReceive::Gone)
            };
            if taken.is_err() {
                self.taken.fetch_sub(1, Ordering::SeqCst);
            }
            return taken;
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
        let cap = self.config.max_receive_sge as usize;
        Ok(RecvWqe::copied(context, slot, cap, &q.counts, &q.sges))
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
        if self.srq.is_some() {
            let wqe = self.take_receive()?;
            let taken = Taken {
                context: wqe.context,
                nsge: wqe.nsge,
            };
            *many = Some(wqe);
            return Ok(taken);
        }
        let rq = self.rq.as_ref().ok_or(NoReceive::Gone)?;
        let mut q = rq.lock();
        if q.state != QpState::Connected {
            // As in `take_receive` (E5).
            return Err(NoReceive::Gone);
        }
        let slot = q.ring.slot_of(0);
        let Some(context) = q.ring.pop() else {
            q.peer_waiting = true;
            return Err(NoReceive::Empty);
        };
        // Counted under the queue's lock as in `take_receive`: the taker owes
        // `complete_taken` (L21, P6).
        self.taken.fetch_add(1, Ordering::SeqCst);
        let cap = self.config.max_receive_sge as usize;
        let nsge = q.counts.get(slot).copied().unwrap_or(0).min(MAX_SGE);
        let base = slot.saturating_mul(cap);
        if nsge > FEW_RECV_SGE {
            *many = Some(RecvWqe::copied(context, slot, cap, &q.counts, &q.sges));
        } else if let (Some(src), Some(dst)) = (q.sges.get(base..base + nsge), few.get_mut(..nsge))
        {
            dst.copy_from_slice(src);
        }
        Ok(Taken { context, nsge })
    }

    /// Whether a CQ of the QP failed (E10, E11) or its SRQ did (Q9): the QP
    /// is then unusable and every post, on either queue, is refused inline
    /// (E13). A QP with an SRQ still has its own receive CQ (Q2), so that CQ
    /// counts too.
    fn is_unusable(&self) -> bool {
        self.initiator_cq.is_error()
            || self.receive_cq.is_error()
            || self.srq.as_ref().is_some_and(|srq| srq.is_failed())
    }

    /// Refuses a post inline: rings the doorbell for earlier deferred
    /// requests first (D4, D6).
    fn refuse(self: &Arc<Self>, error: PostError) -> Result<(), PostError> {
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

    fn check_sges(&self, sges: &[Sge], max: usize) -> Result<(), PostError> {
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
    fn post_data(
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
    fn post_initiator(
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
    fn post_initiator_with(
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

    fn fill_slot(
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

    // ----- state changes -------------------------------------------------

    /// Flush (E1): every pending receive and initiator request completes
    /// cancelled; returns without waiting for them. Receives of an SRQ stay
    /// in the SRQ (E4).
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
    fn connection_failed(self: &Arc<Self>) {
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
    fn inject_abort(self: &Arc<Self>) {
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

    fn report_lost(&self) {
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
    fn enter(self: &Arc<Self>, state: QpState) -> (QpState, Option<Arc<Self>>) {
        let (was, peer) = {
            let mut sq = self.sq.lock();
            let was = sq.state;
            if was == QpState::Disconnected {
                return (was, None);
            }
            sq.set_state(self.id, state);
            sq.rung = sq.ring.len();
            let peer = if state == QpState::Disconnected {
                sq.peer.take()
            } else {
                None
            };
            (was, peer)
        };
        self.cancel_receives(state);
        self.kick();
        (was, peer)
    }

    fn cancel_receives(&self, state: QpState) {
        let Some(rq) = &self.rq else { return };
        let (peer_waited, placing) = {
            let mut q = rq.lock();
            q.state = state;
            (
                core::mem::take(&mut q.peer_waiting),
                self.taken.load(Ordering::SeqCst) != 0,
            )
        };
        if peer_waited {
            // A peer's Send waits for a receive that will never come: let it
            // see that this side is gone (it then fails, E5).
            let peer = self.sq.lock().peer.clone();
            if let Some(peer) = peer {
                peer.kick();
            }
        }
        if placing {
            // A receive taken by an incoming Send is still being placed: the
            // queue is cancelled after its entry, by whoever completes it
            // (P23, `complete_taken`).
            return;
        }
        self.cancel_queued(rq);
    }

    /// Cancels every queued receive, oldest first. One at a time, so no lock
    /// is held while completing (I4).
    fn cancel_queued(&self, rq: &SpinLock<RecvQueue>) {
        loop {
            let context = {
                let mut q = rq.lock();
                q.ring.pop()
            };
            let Some(context) = context else { break };
            self.complete_receive(Completion::new(
                WcStatus::Cancelled,
                Opcode::Receive,
                self.config.context,
                context,
            ));
        }
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
    fn notify_quiescent(&self) {
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

    // ----- completions ---------------------------------------------------

    /// Queues an initiator completion; `false` when the CQ refused it and
    /// the connection was terminated.
    pub(crate) fn complete_initiator(self: &Arc<Self>, completion: Completion) -> bool {
        if self.initiator_cq.push(completion).is_err() {
            self.terminate();
            return false;
        }
        true
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
                    self.complete_receive(Completion::new(
                        WcStatus::Cancelled,
                        Opcode::Receive,
                        self.config.context,
                        context,
                    ));
                }
            },
            None => self.taken.fetch_sub(1, Ordering::SeqCst) == 1,
        };
        if last {
            self.notify_quiescent();
        }
    }

    // ----- the runner ----------------------------------------------------

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
    fn run(self: &Arc<Self>) {
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
    fn process(self: &Arc<Self>) {
        let mut scratch = Scratch::new();
        let mut tokens = engine::Tokens::default();
        // A request that succeeded and waits to be removed and reported.
        let mut done: Option<SendWqe> = None;
        loop {
            let (next, state, peer) = {
                let mut sq = self.sq.lock();
                if done.is_some() {
                    sq.ring.pop();
                    sq.rung = sq.rung.saturating_sub(1);
                }
                if let Some(link) = sq.link.clone() {
                    drop(sq);
                    if let Some(wqe) = done.take() {
                        self.report(&wqe, WcStatus::Success);
                    }
                    // The iWARP data path: FPDUs out, completions in post order.
                    link.run(self);
                    return;
                }
                let next = self.copy_rung_into(&sq, 0, &mut scratch);
                (next, sq.state, sq.peer.clone())
            };
            if let Some(wqe) = done.take()
                && self.report(&wqe, WcStatus::Success)
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
            let status = match (state, peer, injected) {
                (_, _, Some(index)) => fault::error_status(wqe.op.opcode(), index),
                (QpState::Connected, Some(peer), None) => {
                    let data = scratch.data(&wqe);
                    match engine::execute(self, &peer, &wqe, &data, &mut tokens) {
                        Some(status) => status,
                        // A Send waits for a receive at the peer; the peer's
                        // next receive kicks this runner again.
                        None => return,
                    }
                }
                _ => WcStatus::Cancelled,
            };
            if status.is_success()
                && matches!(
                    wqe.op,
                    SendOp::Send { .. } | SendOp::Write { .. } | SendOp::Read { .. }
                )
            {
                done = Some(wqe);
            } else {
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
    fn copy_rung(
        &self,
        sq: &SendQueue,
        index: usize,
        sges: &mut [Sge],
        inline: &mut [u8],
    ) -> Option<SendWqe> {
        if index >= sq.rung {
            return None;
        }
        let wqe = sq.ring.get(index)?.clone();
        let slot = sq.ring.slot_of(index);
        let sge_base = slot.saturating_mul(self.sge_cap);
        let nsge = wqe.nsge.min(MAX_SGE);
        if let (Some(src), Some(dst)) =
            (sq.sges.get(sge_base..sge_base + nsge), sges.get_mut(..nsge))
        {
            dst.copy_from_slice(src);
        }
        let inline_base = slot.saturating_mul(self.inline_cap);
        let n = wqe.inline_len.min(MAX_INLINE);
        if let (Some(src), Some(dst)) = (
            sq.inline.get(inline_base..inline_base + n),
            inline.get_mut(..n),
        ) {
            dst.copy_from_slice(src);
        }
        Some(wqe)
    }

    /// [`copy_rung`](Self::copy_rung) into `scratch`, which makes room for
    /// many SGEs or long inline data only for a request that has them.
    fn copy_rung_into(
        &self,
        sq: &SendQueue,
        index: usize,
        scratch: &mut Scratch,
    ) -> Option<SendWqe> {
        let (nsge, inline_len) = {
            let wqe = sq.ring.get(index)?;
            (wqe.nsge, wqe.inline_len)
        };
        let (sges, inline) = scratch.room(nsge, inline_len);
        self.copy_rung(sq, index, sges, inline)
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
    fn report(self: &Arc<Self>, wqe: &SendWqe, status: WcStatus) -> bool {
        match &wqe.op {
            SendOp::Bind { mw, key, .. } if !status.is_success() => mw.cancel_bind(*key),
            // Executed or cancelled: the staged page list is free again.
            SendOp::FastRegister { mr, slot } => mr.unstage(*slot),
            _ => {}
        }
        let mut ended = false;
        // P14/P15: silent success produces nothing; failures always report.
        if !(status.is_success() && wqe.flags.contains(WrFlags::SILENT_SUCCESS)) {
            ended = !self.complete_initiator(Completion::new(
                status,
                wqe.op.opcode(),
                self.config.context,
                wqe.context,
            ));
        }
        if !status.is_success() && status != WcStatus::Cancelled {
            // E5: an error completion terminates the connection.
            self.terminate();
            ended = true;
        }
        ended
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
mod e3_tests;

#[cfg(all(test, loom))]
mod loom_tests;
