//! The frame path's NDIS bookkeeping, platform-neutral: what the miniport
//! does with the frames its [`EtherPort`] receives, the link state it
//! indicates, pause and halt with receive NBLs outstanding, and the
//! periodic tick (`docs/driver.md`, "Data path").
//!
//! The NDIS calls themselves sit behind [`NblOps`]: in the kernel
//! (`miniport.rs`) one NBL with one `NET_BUFFER` and one MDL per receive
//! buffer of the port, made at initialise, indicated with
//! `NdisMIndicateReceiveNetBufferLists`, the link with
//! `NdisMIndicateStatusEx(NDIS_STATUS_LINK_STATE)`, and a pending pause
//! completed with `NdisMPauseComplete`; in the host tests a table that
//! records what NDIS would see. Everything else — which buffer is up the
//! stack, when `NDIS_RECEIVE_FLAGS_RESOURCES` is used, what a pause or a
//! halt does with NBLs out, starting the port once WSK is up, ageing the
//! learning table — is here and is tested on the host.
//!
//! * [`Receiver`] is the port's [`FrameSink`]. A received frame is
//!   indicated only while the adapter runs (after initialise, not paused,
//!   not halted); otherwise its buffer goes straight back to the port and
//!   the frame is counted as dropped. When fewer than [`RX_LOW_WATER`]
//!   receive buffers stay free the frame is indicated with
//!   `NDIS_RECEIVE_FLAGS_RESOURCES`: NDIS copies it and the NBL is the
//!   miniport's again when the call returns, so the buffer goes back at
//!   once. Otherwise the buffer is NDIS's until
//!   `MiniportReturnNetBufferLists` ([`Receiver::returned`]).
//! * Pause ([`Receiver::pause`]): no indication from then on; with NBLs
//!   still up the stack the pause pends and the last return completes it
//!   ([`NblOps::pause_complete`], `NdisMPauseComplete`) — the NDIS rule
//!   that every indicated NBL is back before a pause completes.
//! * Halt ([`FramePath::halt`]): no indication at all from then on (link
//!   included), the tick stops, the port's sockets close. NDIS halts only
//!   a paused adapter, so no NBL is out; one still out is reported (the
//!   caller logs it) rather than waited for.
//! * [`Ticker`]: every [`TICK_MS`] the learning table ages
//!   (`EtherPort::tick`); until the port is started it also tries to
//!   capture WSK without waiting (`WskSource::capture`, `WSK_NO_WAIT` in
//!   the kernel) and starts the port once it can — WSK may not be up when
//!   `MiniportInitializeEx` runs, and initialise never waits for it.
//!
//! No [`NblOps`] call is made with a lock held (rule I4).

use alloc::boxed::Box;
use alloc::sync::{Arc, Weak};
use core::net::IpAddr;

use super::ether::{Clock, EtherPort, FrameSink, PortError, RX_BUFFERS};
use crate::kernel::sync::SpinLock;
use crate::kernel::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use crate::kernel::tcp::Timer;
use crate::kernel::timers::Timers;
use crate::kernel::wsk::WskSource;

/// Below this many free receive buffers a frame is indicated with
/// `NDIS_RECEIVE_FLAGS_RESOURCES` (and its buffer taken back at once).
pub const RX_LOW_WATER: usize = 4;

/// The period of the tick, in ms.
pub const TICK_MS: u64 = 1_000;

/// The NDIS side of the frame path (see the module documentation). Every
/// method is called at ≤ DISPATCH_LEVEL with no lock of this module held.
pub trait NblOps: Send + Sync {
    /// Indicates receive buffer `index`'s frame, `len` bytes at `offset`.
    /// With `resources` the NBL is the miniport's again when this returns;
    /// otherwise NDIS gives it back through `MiniportReturnNetBufferLists`.
    fn indicate(&self, index: usize, offset: usize, len: usize, resources: bool);
    /// Indicates the link state.
    fn link(&self, up: bool);
    /// Completes a pause that pended (`NdisMPauseComplete`).
    fn pause_complete(&self);
}

#[expect(
    clippy::struct_excessive_bools,
    reason = "independent facts of the adapter's state"
)]
struct State {
    /// Initialise has finished: indications may start.
    ready: bool,
    paused: bool,
    /// A pause returned `NDIS_STATUS_PENDING` and waits for returns.
    pause_pending: bool,
    halted: bool,
    /// Receive buffers up the stack, one bit each.
    out: u64,
    /// The link state NDIS was last told.
    told_up: bool,
    /// The port's link state.
    link_up: bool,
}

/// Why a frame was not indicated, and how many were.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxPathStats {
    /// Frames indicated.
    pub indicated: u64,
    /// Of those, indicated with `NDIS_RECEIVE_FLAGS_RESOURCES`.
    pub resources: u64,
    /// Frames dropped because the adapter was not running (initialising,
    /// paused, halted) or the NBLs were not made.
    pub not_running: u64,
    /// Returns of a buffer that was not up the stack (ignored).
    pub stray_returns: u64,
}

/// The port's [`FrameSink`]: indication, return, pause, link (see the
/// module documentation).
pub struct Receiver {
    state: SpinLock<State>,
    port: SpinLock<Weak<EtherPort>>,
    ops: SpinLock<Option<Arc<dyn NblOps>>>,
    indicated: AtomicU64,
    resources: AtomicU64,
    not_running: AtomicU64,
    stray_returns: AtomicU64,
}

impl core::fmt::Debug for Receiver {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Receiver")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

/// The bit of receive buffer `index` (none past 63).
fn bit(index: usize) -> u64 {
    u32::try_from(index)
        .ok()
        .and_then(|shift| 1_u64.checked_shl(shift))
        .unwrap_or(0)
}

impl Receiver {
    /// A receiver, paused (NDIS restarts the adapter after initialise),
    /// whose NDIS was told the link is `told_up` (the general attributes'
    /// media state).
    #[must_use]
    pub fn new(told_up: bool) -> Self {
        Self {
            state: SpinLock::new(State {
                ready: false,
                paused: true,
                pause_pending: false,
                halted: false,
                out: 0,
                told_up,
                link_up: false,
            }),
            port: SpinLock::new(Weak::new()),
            ops: SpinLock::new(None),
            indicated: AtomicU64::new(0),
            resources: AtomicU64::new(0),
            not_running: AtomicU64::new(0),
            stray_returns: AtomicU64::new(0),
        }
    }

    fn attach_port(&self, port: &Arc<EtherPort>) {
        *self.port.lock() = Arc::downgrade(port);
    }

    /// Gives the receiver its NDIS side (once the NBLs are made).
    pub fn bind(&self, ops: Arc<dyn NblOps>) {
        *self.ops.lock() = Some(ops);
    }

    fn ops(&self) -> Option<Arc<dyn NblOps>> {
        self.ops.lock().clone()
    }

    /// Initialise is done: indications may start, and NDIS learns the
    /// link state if it changed meanwhile.
    pub fn set_ready(&self) {
        self.state.lock().ready = true;
        self.sync_link();
    }

    /// Tells NDIS the port's link state if it is not what NDIS knows.
    fn sync_link(&self) {
        let change = {
            let mut state = self.state.lock();
            if !state.ready || state.halted || state.told_up == state.link_up {
                None
            } else {
                state.told_up = state.link_up;
                Some(state.link_up)
            }
        };
        if let (Some(up), Some(ops)) = (change, self.ops()) {
            ops.link(up);
        }
    }

    /// `MiniportPauseEx`: no indication from now on. Returns whether the
    /// pause is complete; `false`: NBLs are up the stack and the last
    /// return completes it ([`NblOps::pause_complete`]).
    pub fn pause(&self) -> bool {
        let mut state = self.state.lock();
        state.paused = true;
        if state.out == 0 {
            true
        } else {
            state.pause_pending = true;
            false
        }
    }

    /// `MiniportRestartEx`: indications resume.
    pub fn restart(&self) {
        let mut state = self.state.lock();
        state.paused = false;
        state.pause_pending = false;
    }

    /// `MiniportReturnNetBufferLists`, for the NBL of receive buffer
    /// `index`: the buffer goes back to the port; the last return of a
    /// pending pause completes it.
    pub fn returned(&self, index: usize) {
        let complete = {
            let mut state = self.state.lock();
            let mask = bit(index);
            if mask == 0 || state.out & mask == 0 {
                self.stray_returns.fetch_add(1, Ordering::Relaxed);
                return;
            }
            state.out &= !mask;
            let complete = state.pause_pending && state.out == 0;
            if complete {
                state.pause_pending = false;
            }
            complete
        };
        if let Some(port) = self.port.lock().upgrade() {
            port.return_buffer(index);
        }
        if complete && let Some(ops) = self.ops() {
            ops.pause_complete();
        }
    }

    /// Halt: no indication from now on. Returns how many NBLs are still
    /// up the stack (NDIS halts a paused adapter, so 0).
    pub fn halt(&self) -> usize {
        let mut state = self.state.lock();
        state.halted = true;
        state.out.count_ones() as usize
    }

    /// Receive NBLs up the stack.
    #[must_use]
    pub fn outstanding(&self) -> usize {
        self.state.lock().out.count_ones() as usize
    }

    /// Whether a pause waits for returns.
    #[must_use]
    pub fn pause_pending(&self) -> bool {
        self.state.lock().pause_pending
    }

    /// The counters.
    #[must_use]
    pub fn stats(&self) -> RxPathStats {
        RxPathStats {
            indicated: self.indicated.load(Ordering::Relaxed),
            resources: self.resources.load(Ordering::Relaxed),
            not_running: self.not_running.load(Ordering::Relaxed),
            stray_returns: self.stray_returns.load(Ordering::Relaxed),
        }
    }
}

impl FrameSink for Receiver {
    fn indicate(&self, index: usize, offset: usize, len: usize) {
        let Some(port) = self.port.lock().upgrade() else {
            return;
        };
        let ops = self.ops();
        let running = {
            let mut state = self.state.lock();
            let mask = bit(index);
            let running = state.ready
                && !state.paused
                && !state.halted
                && ops.is_some()
                && mask != 0
                && state.out & mask == 0;
            if running {
                state.out |= mask;
            }
            running
        };
        let Some(ops) = ops.filter(|_| running) else {
            self.not_running.fetch_add(1, Ordering::Relaxed);
            port.return_buffer(index);
            return;
        };
        let free = RX_BUFFERS.saturating_sub(port.rx_outstanding());
        let resources = free < RX_LOW_WATER;
        self.indicated.fetch_add(1, Ordering::Relaxed);
        if resources {
            self.resources.fetch_add(1, Ordering::Relaxed);
        }
        ops.indicate(index, offset, len, resources);
        if resources {
            // NDIS copied the frame: the NBL is ours again.
            self.returned(index);
        }
    }

    fn link(&self, up: bool) {
        self.state.lock().link_up = up;
        self.sync_link();
    }
}

/// The periodic tick: starts the port once WSK is up, ages the learning
/// table, and re-arms itself.
pub struct Ticker {
    me: Weak<Ticker>,
    port: Weak<EtherPort>,
    timers: Weak<Timers>,
    source: Arc<dyn WskSource>,
    started: AtomicBool,
}

impl Ticker {
    /// Starts the port if it is not yet and WSK can be captured now.
    fn try_start(&self, port: &Arc<EtherPort>) {
        if self.started.load(Ordering::Acquire) {
            return;
        }
        let Ok(client) = self.source.capture() else {
            return;
        };
        if self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Err(status) = port.start(&client) {
            crate::klog!(
                crate::kernel::log::Level::Error,
                "VXLAN port start failed: {:#x}",
                status
            );
        }
    }

    /// Whether the port was started.
    #[must_use]
    pub fn started(&self) -> bool {
        self.started.load(Ordering::Acquire)
    }
}

impl Timer for Ticker {
    fn fire(&self, now: u64) {
        let Some(port) = self.port.upgrade() else {
            return;
        };
        self.try_start(&port);
        port.tick();
        if let (Some(timers), Some(me)) = (self.timers.upgrade(), self.me.upgrade()) {
            timers.add(now.saturating_add(TICK_MS), me);
        }
    }
}

/// One adapter's frame path: the port, its receiver, the tick.
pub struct FramePath {
    port: Arc<EtherPort>,
    receiver: Arc<Receiver>,
    timers: Arc<Timers>,
    ticker: Arc<Ticker>,
}

crate::kernel::log::debug_fields!(FramePath { port, receiver });

/// What [`FramePath::new`] needs besides the clock and WSK.
#[derive(Clone, Copy, Debug)]
pub struct PathConfig<'a> {
    /// The interface's IP MTU.
    pub mtu: u16,
    /// `SoftNdkVni`, validated.
    pub vni: u32,
    /// `SoftNdkPeers`, parsed.
    pub peers: &'a [IpAddr],
    /// The UDP port (4789 in the driver).
    pub udp_port: u16,
    /// The link state NDIS was told at initialise.
    pub told_up: bool,
}

impl FramePath {
    /// Makes the port and its receiver (initialise, PASSIVE_LEVEL); the
    /// tick runs on `timers`, whose clock ages the learning table, and the
    /// port starts over what `source` captures. Nothing runs until
    /// [`go`](Self::go).
    ///
    /// # Errors
    /// [`PortError`] from the port.
    pub fn new(
        config: &PathConfig<'_>,
        timers: Arc<Timers>,
        source: Arc<dyn WskSource>,
    ) -> Result<Self, PortError> {
        let receiver = Arc::new(Receiver::new(config.told_up));
        let clock_timers = Arc::clone(&timers);
        let clock: Clock = Box::new(move || clock_timers.now_ms());
        let port = EtherPort::new(
            config.mtu,
            config.vni,
            config.peers,
            config.udp_port,
            Arc::clone(&receiver) as Arc<dyn FrameSink>,
            clock,
        )?;
        receiver.attach_port(&port);
        let ticker = Arc::new_cyclic(|me| Ticker {
            me: me.clone(),
            port: Arc::downgrade(&port),
            timers: Arc::downgrade(&timers),
            source,
            started: AtomicBool::new(false),
        });
        Ok(Self {
            port,
            receiver,
            timers,
            ticker,
        })
    }

    /// The port.
    #[must_use]
    pub const fn port(&self) -> &Arc<EtherPort> {
        &self.port
    }

    /// The receiver.
    #[must_use]
    pub const fn receiver(&self) -> &Arc<Receiver> {
        &self.receiver
    }

    /// Whether the port was started (WSK was captured).
    #[must_use]
    pub fn started(&self) -> bool {
        self.ticker.started()
    }

    /// End of initialise, once the NBLs are bound
    /// ([`Receiver::bind`]): indications may start, the port starts now if
    /// WSK is up, and the tick is armed.
    pub fn go(&self) {
        self.receiver.set_ready();
        let now = self.timers.now_ms();
        self.ticker.try_start(&self.port);
        self.timers.add(
            now.saturating_add(TICK_MS),
            Arc::clone(&self.ticker) as Arc<dyn Timer>,
        );
    }

    /// Halt, first half (PASSIVE_LEVEL: the tick's stop waits for a
    /// running expiry): no indication from now on, the tick stops, the
    /// port's sockets close. Returns the NBLs still up the stack (0 when
    /// NDIS kept its rules). The caller waits for
    /// [`EtherPort::is_closed`] before it frees the NBLs.
    pub fn halt(&self) -> usize {
        let out = self.receiver.halt();
        self.timers.stop();
        self.port.halt();
        out
    }
}
