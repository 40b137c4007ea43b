//! The NDK state of one miniport adapter: enabled or disabled, what NDIS has
//! been told, the open `NDK_ADAPTER`s, and the work item that tells NDIS.
//!
//! # The protocol (rules A5, A13–A15)
//!
//! * `OID_NDK_SET_STATE` changes the **current** state at once
//!   ([`NdkState::request`]): from then on opens succeed or fail with
//!   `NDIS_STATUS_ADAPTER_NOT_READY` (A5). The OID handler returns success
//!   immediately — it never pends (A13) — and never calls `NdisMNetPnPEvent`
//!   itself, because that can deadlock in the OID context (A14).
//! * When the current state differs from the state last **announced** to NDIS
//!   and no worker is queued or running, [`NdkState::request`] says so and the
//!   caller queues the NDIS work item (PASSIVE_LEVEL).
//! * The work item ([`NdkState::run_announcements`]) announces
//!   `NetEventNDKEnable` / `NetEventNDKDisable` until what NDIS was told
//!   matches the current state, so quick toggles coalesce and the events
//!   NDIS sees alternate. After `NetEventNDKDisable` returns — NDIS keeps it
//!   pending until the upper layers closed every `NDK_ADAPTER`, and those
//!   closes go through [`NdkState::closed`], which takes no lock the worker
//!   holds (A15) — the provider's [`close_all`](super::ndk::NdkProvider::close_all)
//!   tears down whatever is left.
//! * State changes the adapter decides on its own ([`NdkState::fail`]) take
//!   the same path (A14).
//! * Halt ([`NdkState::halt`]) disables, stops the worker from announcing
//!   anything new, and lets the caller wait until the worker is idle before it
//!   frees the work item.
//!
//! Every method takes the one short spin lock and never calls out while
//! holding it.

use crate::abi::{NDIS_STATUS_ADAPTER_NOT_READY, NDIS_STATUS_SUCCESS, NdisStatus};
use crate::kernel::sync::SpinLock;

use super::ndk::NdkProvider;

/// An NDK PnP event the miniport sends with `NdisMNetPnPEvent`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NdkEvent {
    /// `NetEventNDKEnable`.
    Enable,
    /// `NetEventNDKDisable`.
    Disable,
}

impl NdkEvent {
    /// The event that announces `enabled`.
    const fn announcing(enabled: bool) -> Self {
        if enabled { Self::Enable } else { Self::Disable }
    }

    /// The `NET_PNP_EVENT_CODE` of the event (ndk-abi.md §5.10).
    #[must_use]
    pub const fn code(self) -> crate::abi::NetPnpEventCode {
        match self {
            Self::Enable => crate::abi::NetPnpEventCode::NDK_ENABLE,
            Self::Disable => crate::abi::NetPnpEventCode::NDK_DISABLE,
        }
    }
}

/// Where the announcing work item is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Worker {
    /// Not queued: whoever changes the state queues it.
    Idle,
    /// Queued, not started: it will see the latest state.
    Queued,
    /// Running: it loops until NDIS knows the latest state.
    Running,
}

/// What [`NdkState::request`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transition {
    /// The OID's status: always success (rule A13), never pending.
    pub status: NdisStatus,
    /// Whether the caller must queue the work item now.
    pub queue_work: bool,
}

#[derive(Debug)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "four independent facts, all read and written under the one lock"
)]
struct Inner {
    /// `*NetworkDirect` permits NDK.
    permitted: bool,
    /// The current state: opens succeed only while it is true.
    enabled: bool,
    /// The state NDIS last learned (from the NDK attributes at
    /// initialisation, then from our PnP events).
    announced: bool,
    worker: Worker,
    /// `NDK_ADAPTER`s open now (rule A6).
    open_adapters: u32,
    /// Halt started: nothing is announced any more.
    halted: bool,
}

/// The NDK state of one miniport adapter (see the module documentation).
#[derive(Debug)]
pub struct NdkState {
    inner: SpinLock<Inner>,
}

impl NdkState {
    /// The state at `MiniportInitializeEx`: enabled exactly when
    /// `*NetworkDirect` permits it, and NDIS learns it from the NDK
    /// attributes (rule A11), so nothing needs announcing.
    #[must_use]
    pub fn new(permitted: bool) -> Self {
        Self {
            inner: SpinLock::new(Inner {
                permitted,
                enabled: permitted,
                announced: permitted,
                worker: Worker::Idle,
                open_adapters: 0,
                halted: false,
            }),
        }
    }

    /// Whether NDK is enabled now.
    #[must_use]
    pub fn is_enabled(&self) -> bool {
        self.inner.lock().enabled
    }

    /// `NDK_ADAPTER`s open now.
    #[must_use]
    pub fn open_adapters(&self) -> u32 {
        self.inner.lock().open_adapters
    }

    /// `OID_NDK_SET_STATE` (rule A13): TRUE enables NDK when `*NetworkDirect`
    /// permits it (otherwise the request succeeds and NDK stays disabled);
    /// FALSE disables it. Returns success at once; `queue_work` says whether
    /// the announcing work item must be queued.
    pub fn request(&self, enable: bool) -> Transition {
        let mut inner = self.inner.lock();
        let target = enable && inner.permitted && !inner.halted;
        inner.enabled = target;
        let queue_work =
            !inner.halted && inner.enabled != inner.announced && inner.worker == Worker::Idle;
        if queue_work {
            inner.worker = Worker::Queued;
        }
        Transition {
            status: NDIS_STATUS_SUCCESS,
            queue_work,
        }
    }

    /// The adapter disables NDK on its own (a failure of the device): the
    /// same path as `OID_NDK_SET_STATE(FALSE)` (rule A14).
    pub fn fail(&self) -> Transition {
        self.request(false)
    }

    /// Reserves an open: fails with `NDIS_STATUS_ADAPTER_NOT_READY` while NDK
    /// is disabled (rule A5). Each success is followed by exactly one
    /// [`end_open`](Self::end_open).
    ///
    /// # Errors
    /// `NDIS_STATUS_ADAPTER_NOT_READY` while disabled or halting.
    pub fn begin_open(&self) -> Result<(), NdisStatus> {
        let mut inner = self.inner.lock();
        if !inner.enabled || inner.halted {
            return Err(NDIS_STATUS_ADAPTER_NOT_READY);
        }
        inner.open_adapters = inner.open_adapters.saturating_add(1);
        Ok(())
    }

    /// Ends an open reserved by [`begin_open`](Self::begin_open): a failed
    /// open gives its reservation back.
    pub fn end_open(&self, opened: bool) {
        if !opened {
            self.closed();
        }
    }

    /// An `NDK_ADAPTER` was closed (rule A6). Takes only the state lock, never
    /// waits for the worker, so closes made by NDIS while it holds
    /// `NetEventNDKDisable` pending complete (rule A15).
    pub fn closed(&self) {
        let mut inner = self.inner.lock();
        inner.open_adapters = inner.open_adapters.saturating_sub(1);
    }

    /// The work item's next announcement, or `None` when NDIS already knows
    /// the current state (or halt started), in which case the worker is idle
    /// again and must not touch the adapter any more.
    pub fn next_announcement(&self) -> Option<NdkEvent> {
        let mut inner = self.inner.lock();
        if inner.halted || inner.enabled == inner.announced {
            inner.worker = Worker::Idle;
            return None;
        }
        inner.worker = Worker::Running;
        Some(NdkEvent::announcing(inner.enabled))
    }

    /// Records the outcome of announcing `event`. A failed enable leaves NDK
    /// disabled (NDIS was not told otherwise); a disable counts as announced
    /// whatever NDIS answered, since the provider tears everything down anyway.
    pub fn finish_announcement(&self, event: NdkEvent, succeeded: bool) {
        let mut inner = self.inner.lock();
        match (event, succeeded) {
            (NdkEvent::Enable, true) => inner.announced = true,
            (NdkEvent::Enable, false) => inner.enabled = false,
            (NdkEvent::Disable, _) => inner.announced = false,
        }
    }

    /// The body of the work item: announces until NDIS knows the current
    /// state. `announce` sends one PnP event and returns its status (the
    /// Windows glue calls `NdisMNetPnPEvent`; tests simulate NDIS). After
    /// every `NetEventNDKDisable` the provider closes everything left (rule
    /// A15). Runs at PASSIVE_LEVEL; never holds the lock while calling out.
    pub fn run_announcements(
        &self,
        provider: &dyn NdkProvider,
        announce: &mut dyn FnMut(NdkEvent) -> NdisStatus,
    ) {
        while let Some(event) = self.next_announcement() {
            let status = announce(event);
            if event == NdkEvent::Disable {
                provider.close_all();
            }
            self.finish_announcement(event, status >= 0);
        }
    }

    /// Halt begins: NDK is disabled, nothing more is announced. Returns
    /// whether the worker is idle (the caller waits until it is, with
    /// [`worker_idle`](Self::worker_idle), before freeing the work item).
    pub fn halt(&self) -> bool {
        let mut inner = self.inner.lock();
        inner.halted = true;
        inner.enabled = false;
        inner.worker == Worker::Idle
    }

    /// Whether the work item is neither queued nor running.
    #[must_use]
    pub fn worker_idle(&self) -> bool {
        self.inner.lock().worker == Worker::Idle
    }
}
