//! One emulated NIC: its limits, token table, LAM table, counters and the
//! counts of live objects.
//!
//! Every adapter (every `NDK_ADAPTER` opening shares one, see rule N32) sits on
//! a [`Device`]. Objects hold an `Arc<Device>`; the device holds no object
//! except through the token table, whose entries are removed when a region is
//! deregistered or a window invalidated, so no reference cycle outlives the
//! objects' close.

use super::keys::{KeyError, KeyTable};
use super::memory::{LamError, LamId, LamTable, Span};
use super::mr::{Mr, Mw};
use super::qp::{MAX_INLINE, MAX_SGE};
use super::types::{Limits, PAGE_SIZE};
use crate::kernel::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use crate::kernel::sync::{Arc, SpinLock};

/// How the engine runs work requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum EngineMode {
    /// In the posting thread, before the post returns (the default: see
    /// `docs/rnic.md` for the benchmark behind it).
    #[default]
    Inline,
    /// On deferred work (a DPC in the kernel, a worker thread on the host).
    Deferred,
}

/// What a token names.
#[derive(Clone)]
pub(crate) enum KeyTarget {
    /// A registered or fast-register memory region.
    Mr(Arc<Mr>),
    /// A memory window (bound or not).
    Mw(Arc<Mw>),
    /// A PD's privileged token (local access only, M27).
    Privileged,
}

/// Object kinds with a per-device limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectKind {
    /// Protection domain.
    Pd,
    /// Completion queue.
    Cq,
    /// Queue pair.
    Qp,
    /// Shared receive queue.
    Srq,
    /// Memory region.
    Mr,
    /// Memory window.
    Mw,
}

const KINDS: usize = 6;

impl ObjectKind {
    const fn index(self) -> usize {
        match self {
            Self::Pd => 0,
            Self::Cq => 1,
            Self::Qp => 2,
            Self::Srq => 3,
            Self::Mr => 4,
            Self::Mw => 5,
        }
    }
}

/// The device's performance counters (reported by `OID_NDK_STATISTICS`).
#[derive(Debug, Default)]
pub struct Counters {
    /// Outbound connections established.
    pub connect: AtomicU64,
    /// Inbound connections established.
    pub accept: AtomicU64,
    /// Failed connection attempts, both directions.
    pub connect_failure: AtomicU64,
    /// Established connections that failed before the consumer disconnected.
    pub connection_error: AtomicU64,
    /// Connections established now.
    pub active_connection: AtomicU64,
    /// CQs that entered the error state.
    pub cq_error: AtomicU64,
    /// Incoming RDMA bytes, with per-frame overhead.
    pub rdma_in_octets: AtomicU64,
    /// Outgoing RDMA bytes, with per-frame overhead.
    pub rdma_out_octets: AtomicU64,
    /// Incoming frames.
    pub rdma_in_frames: AtomicU64,
    /// Outgoing frames.
    pub rdma_out_frames: AtomicU64,
}

/// Payload bytes per emulated frame (a 4 KiB RoCE MTU).
pub const FRAME_PAYLOAD: u64 = 4096;
/// Header and trailer bytes per emulated frame: Ethernet 14 + FCS 4, IPv4 20,
/// UDP 8, BTH 12, ICRC 4 (RoCEv2 framing).
pub const FRAME_OVERHEAD: u64 = 62;

impl Counters {
    /// Accounts one message of `payload` bytes from `self` (sender) to
    /// `receiver`: frames of [`FRAME_PAYLOAD`] bytes, at least one.
    pub fn account_transfer(&self, receiver: &Self, payload: u64) {
        let frames = payload.div_ceil(FRAME_PAYLOAD).max(1);
        let octets = payload.saturating_add(frames.saturating_mul(FRAME_OVERHEAD));
        self.rdma_out_frames.fetch_add(frames, Ordering::Relaxed);
        self.rdma_out_octets.fetch_add(octets, Ordering::Relaxed);
        receiver.rdma_in_frames.fetch_add(frames, Ordering::Relaxed);
        receiver.rdma_in_octets.fetch_add(octets, Ordering::Relaxed);
    }
}

/// Why a device-level allocation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourceError {
    /// The per-device limit for that object kind is reached.
    LimitReached,
    /// No token is left.
    KeysExhausted,
    /// Pool memory ran out.
    NoMemory,
}

impl From<KeyError> for ResourceError {
    fn from(e: KeyError) -> Self {
        match e {
            KeyError::Exhausted => Self::KeysExhausted,
            KeyError::NoMemory => Self::NoMemory,
        }
    }
}

impl From<LamError> for ResourceError {
    fn from(e: LamError) -> Self {
        match e {
            LamError::NoMemory => Self::NoMemory,
        }
    }
}

/// One emulated RDMA NIC.
pub struct Device {
    limits: Limits,
    mode: EngineMode,
    pub(crate) keys: SpinLock<KeyTable<KeyTarget>>,
    pub(crate) lams: SpinLock<LamTable>,
    live: [AtomicU32; KINDS],
    next_id: AtomicU32,
    /// This device's number among every device of the process (or driver)
    /// since it started, never reused: names the device in diagnostics
    /// that outlive it (checked mode's invalidated tokens).
    serial: u32,
    /// Performance counters.
    pub counters: Counters,
}

/// The next [`Device::serial`].
static NEXT_SERIAL: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(1);

crate::kernel::log::debug_fields!(Device { limits, mode });

/// A reservation of one object of a limited kind; released when dropped.
#[derive(Debug)]
pub struct Slot {
    device: Arc<Device>,
    kind: ObjectKind,
}

impl Slot {
    /// The device the slot belongs to.
    #[must_use]
    pub const fn device(&self) -> &Arc<Device> {
        &self.device
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(live) = self.device.live.get(self.kind.index()) {
            live.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Device {
    /// A device with `limits` (the SGE and inline limits clamped to what a
    /// QP can hold), running its engine in `mode`.
    ///
    /// # Errors
    /// [`ResourceError::NoMemory`] when the token table cannot be allocated.
    pub fn new(limits: Limits, mode: EngineMode) -> Result<Arc<Self>, ResourceError> {
        // Rule A8: the limits the device reports are ones every QP can be
        // created with, and a QP's request slots hold at most `MAX_SGE` SGEs
        // and `MAX_INLINE` inline bytes (rule L13).
        let max_sge = u32::try_from(MAX_SGE).unwrap_or(u32::MAX);
        let limits = Limits {
            max_inline_data: limits
                .max_inline_data
                .min(u32::try_from(MAX_INLINE).unwrap_or(u32::MAX)),
            max_initiator_sge: limits.max_initiator_sge.min(max_sge),
            max_receive_sge: limits.max_receive_sge.min(max_sge),
            max_read_sge: limits.max_read_sge.min(max_sge),
            ..limits
        };
        // One token per MR, two per MW (its binding and a Bind posted behind
        // an Invalidate of it), one privileged token per PD.
        let capacity = (limits.max_mr_count as usize)
            .saturating_add((limits.max_mw_count as usize).saturating_mul(2))
            .saturating_add(limits.max_pd_count as usize);
        let keys = KeyTable::new(capacity)?;
        Ok(Arc::new(Self {
            limits,
            mode,
            keys: SpinLock::new(keys),
            lams: SpinLock::new(LamTable::new()),
            live: core::array::from_fn(|_| AtomicU32::new(0)),
            next_id: AtomicU32::new(1),
            serial: NEXT_SERIAL.fetch_add(1, core::sync::atomic::Ordering::Relaxed),
            counters: Counters::default(),
        }))
    }

    /// This device's number, never reused while the process (or driver)
    /// lives (it wraps after 2³² devices).
    #[must_use]
    pub const fn serial(&self) -> u32 {
        self.serial
    }

    /// The limits the device enforces (reported as `NDK_ADAPTER_INFO`).
    #[must_use]
    pub const fn limits(&self) -> &Limits {
        &self.limits
    }

    /// How the engine runs.
    #[must_use]
    pub const fn engine_mode(&self) -> EngineMode {
        self.mode
    }

    /// A fresh nonzero object id (for diagnostics and QP numbers).
    pub fn next_id(&self) -> u32 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if id == 0 {
            self.next_id.fetch_add(1, Ordering::Relaxed)
        } else {
            id
        }
    }

    /// Live objects of `kind`.
    #[must_use]
    pub fn live(&self, kind: ObjectKind) -> u32 {
        self.live
            .get(kind.index())
            .map_or(0, |l| l.load(Ordering::Acquire))
    }

    /// Reserves one object of `kind` against its limit.
    ///
    /// # Errors
    /// [`ResourceError::LimitReached`] at the limit.
    pub fn reserve(self: &Arc<Self>, kind: ObjectKind) -> Result<Slot, ResourceError> {
        let max = match kind {
            ObjectKind::Pd => self.limits.max_pd_count,
            ObjectKind::Cq => self.limits.max_cq_count,
            ObjectKind::Qp => self.limits.max_qp_count,
            ObjectKind::Srq => self.limits.max_srq_count,
            ObjectKind::Mr => self.limits.max_mr_count,
            ObjectKind::Mw => self.limits.max_mw_count,
        };
        let live = self
            .live
            .get(kind.index())
            .ok_or(ResourceError::LimitReached)?;
        live.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < max).then_some(n + 1)
        })
        .map_err(|_| ResourceError::LimitReached)?;
        Ok(Slot {
            device: Arc::clone(self),
            kind,
        })
    }

    /// Records a LAM over `pages` (rule M28); returns its id and the logical
    /// address of its first page.
    ///
    /// # Errors
    /// [`ResourceError::NoMemory`] when the table cannot grow.
    pub fn build_lam(&self, pages: Span) -> Result<(LamId, u64), ResourceError> {
        debug_assert_eq!(pages.addr() as u64 % PAGE_SIZE, 0);
        let id = self.lams.lock().insert(pages)?;
        Ok((id, pages.addr() as u64))
    }

    /// Records a LAM over several page-aligned spans (rule M28, `BuildLam`
    /// over an MDL chain whose MDLs are mapped apart): the logical address
    /// of a page is its address, as with [`build_lam`](Self::build_lam), and
    /// the LAM's page array lists the spans' pages in order.
    ///
    /// # Errors
    /// [`ResourceError::NoMemory`] when the table cannot grow.
    pub fn build_lam_all(&self, pages: &[Span]) -> Result<LamId, ResourceError> {
        debug_assert!(
            pages
                .iter()
                .all(|p| (p.addr() as u64).is_multiple_of(PAGE_SIZE))
        );
        Ok(self.lams.lock().insert_all(pages)?)
    }

    /// Forgets a LAM (rule M32); unknown ids are ignored.
    pub fn release_lam(&self, id: LamId) -> bool {
        self.lams.lock().remove(id).is_some()
    }

    /// Live LAMs.
    #[must_use]
    pub fn live_lams(&self) -> usize {
        self.lams.lock().len()
    }

    /// Tokens in use.
    #[must_use]
    pub fn live_keys(&self) -> usize {
        self.keys.lock().len()
    }

    /// The memory behind `len` bytes at logical address `addr`.
    pub(crate) fn resolve_logical(&self, addr: u64, len: u64) -> Option<Span> {
        self.lams.lock().resolve(addr, len)
    }

    pub(crate) fn key_target(&self, key: u32) -> Option<KeyTarget> {
        self.keys.lock().get(key).cloned()
    }
}
