//! The records the fabric's one lock guards: nodes, addresses, bindings,
//! listeners and connectors, and the actions collected under the lock to run
//! after it is released (I4).

use alloc::boxed::Box;
use alloc::vec::Vec;

use super::address::{Endpoint, IpAddr};
use super::connector::Connector;
use super::listener::BindWait;
use super::slab::{Key, Slab};
use super::types::{CmError, ConnState, ConnectorEvents, ListenerEvents, ReadLimits};
use super::wire::{Accepted, Wire, WireConn, WireOp};
use super::{BACKLOG, EPHEMERAL_FIRST, EPHEMERAL_LAST};
use crate::kernel::sync::atomic::Ordering;
use crate::kernel::sync::{Arc, Weak};
use crate::kernel::tcp::Listening;
use crate::rnic::device::Device;
use crate::rnic::qp::Qp;
use crate::rnic::types::Limits;

/// The identity of a device on the fabric: its address. A registration
/// holds the device (and the node entry a `Weak` to it), so the address is
/// not reused while the node exists.
pub(super) fn node_of_device(device: &Arc<Device>) -> usize {
    Arc::as_ptr(device).addr()
}

pub(super) struct Node {
    pub(super) key: usize,
    pub(super) device: Weak<Device>,
    pub(super) refs: usize,
    /// The device reaches its peers over TCP (`wire.rs`), else on this
    /// fabric.
    pub(super) wire: Option<Wire>,
}

pub(super) struct Address {
    pub(super) ip: IpAddr,
    pub(super) node: usize,
    pub(super) refs: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct BindingRef {
    pub(super) port: u16,
    pub(super) id: u64,
}

/// A bound local endpoint.
pub(super) struct Binding {
    pub(super) id: u64,
    pub(super) node: usize,
    /// A specific address, or the wildcard of a family (N31).
    pub(super) ip: IpAddr,
    pub(super) port: u16,
    pub(super) refs: usize,
    /// The listener that requests to this endpoint reach (N3).
    pub(super) listener: Option<Key>,
    /// (local address, remote endpoint) of each connection through it (N11).
    pub(super) conns: Vec<(IpAddr, Endpoint)>,
    /// Claimed by a shared endpoint (reported with the listeners, A20).
    pub(super) shared: bool,
}

impl Binding {
    /// Whether `ip` on `node` at this binding's port would overlap it.
    pub(super) fn overlaps(&self, node: usize, ip: IpAddr) -> bool {
        self.node == node
            && self.ip.family() == ip.family()
            && (self.ip == ip || self.ip.is_unspecified() || ip.is_unspecified())
    }
}

pub(super) struct ListenerRec {
    pub(super) node: usize,
    pub(super) limits: Limits,
    pub(super) events: Arc<dyn ListenerEvents>,
    pub(super) listening: Option<(BindingRef, Endpoint)>,
    pub(super) paused: bool,
    /// Requests delivered and not yet answered.
    pub(super) backlog: usize,
    /// `incoming` calls in flight.
    pub(super) callouts: usize,
    pub(super) closing: bool,
    pub(super) close_pending: bool,
    /// A wire listener's TCP listening sockets (one per address, N31).
    pub(super) sockets: Vec<Box<dyn Listening>>,
    /// A wire listener's sink of accepted TCP connections.
    pub(super) accepted: Option<Arc<Accepted>>,
    /// A wire listener's sockets still binding (N3, L8).
    pub(super) bind_wait: Option<BindWait>,
}

impl ListenerRec {
    /// The binding through which a new request reaches this listener, if
    /// it takes one: N5, a paused listener is as though there were none;
    /// N6, a closing one turns every request away; N12, the backlog is
    /// bounded.
    pub(super) fn admit(&self) -> Result<BindingRef, CmError> {
        if self.paused || self.closing || self.backlog >= BACKLOG {
            return Err(CmError::ConnectionRefused);
        }
        self.listening
            .map(|(binding, _)| binding)
            .ok_or(CmError::ConnectionRefused)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
    Active,
    Passive,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Pending {
    pub(super) connect: bool,
    pub(super) accept: bool,
    pub(super) disconnect: bool,
}

impl Pending {
    pub(super) const fn any(self) -> bool {
        self.connect || self.accept || self.disconnect
    }
}

/// How the connection ended for a side before its own disconnect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ending {
    Open,
    /// The peer disconnected or closed gracefully.
    Graceful,
    /// An error ended it (E5), or the peer's QP left without a disconnect.
    Aborted,
}

#[expect(
    clippy::struct_excessive_bools,
    reason = "independent flags of the close and disconnect machinery"
)]
pub(super) struct ConnectorRec {
    pub(super) node: usize,
    pub(super) limits: Limits,
    pub(super) events: Option<Arc<dyn ConnectorEvents>>,
    pub(super) state: ConnState,
    pub(super) role: Role,
    pub(super) peer: Option<Key>,
    /// Passive: the listener whose backlog the request counts in.
    pub(super) listener: Option<Key>,
    pub(super) qp: Option<Arc<Qp>>,
    /// The peer's QP once established: its DMA counts for X1 too.
    pub(super) peer_qp: Option<Arc<Qp>>,
    /// The binding this connector holds a reference on (N7, N8, N10).
    pub(super) binding: Option<BindingRef>,
    /// The four-tuple registered for this connection (N11).
    pub(super) tuple: Option<(BindingRef, IpAddr, Endpoint)>,
    pub(super) local: Option<Endpoint>,
    pub(super) remote: Option<Endpoint>,
    /// This side's read limits, lowered to the device's (N20).
    pub(super) own_limits: Option<ReadLimits>,
    /// The peer's read limits, as it sent them.
    pub(super) peer_limits: ReadLimits,
    /// The peer's private data (N18).
    pub(super) peer_data: Vec<u8>,
    pub(super) pending: Pending,
    /// The disconnect indication was given, or is no longer due (X2, N24).
    pub(super) indicated: bool,
    pub(super) ending: Ending,
    /// Disconnecting, waiting for the peer's graceful disconnect (X1 a).
    pub(super) waiting: bool,
    /// The own close ended the wait for the peer: the Disconnect completes
    /// cancelled (L20).
    pub(super) cancelled: bool,
    pub(super) callouts: usize,
    pub(super) closing: bool,
    pub(super) close_pending: bool,
    /// Waiting for the QPs' DMA to finish (X1b).
    pub(super) quiescing: bool,
    /// Counted in `active_connection`.
    pub(super) counted: bool,
    /// The connection over the wire (`wire.rs`): the peer is across TCP
    /// and `peer` stays `None`.
    pub(super) wire: Option<Arc<WireConn>>,
    /// The wire peer gave up before establishment (N14, N15, N16).
    pub(super) wire_dead: bool,
    /// The wait for the wire peer's disconnect timed out (N26).
    pub(super) timed_out: bool,
}

impl ConnectorRec {
    pub(super) fn new(node: usize, limits: Limits) -> Self {
        Self {
            node,
            limits,
            events: None,
            state: ConnState::Idle,
            role: Role::Active,
            peer: None,
            listener: None,
            qp: None,
            peer_qp: None,
            binding: None,
            tuple: None,
            local: None,
            remote: None,
            own_limits: None,
            peer_limits: ReadLimits::default(),
            peer_data: Vec::new(),
            pending: Pending::default(),
            indicated: false,
            ending: Ending::Open,
            waiting: false,
            cancelled: false,
            callouts: 0,
            closing: false,
            close_pending: false,
            quiescing: false,
            counted: false,
            wire: None,
            wire_dead: false,
            timed_out: false,
        }
    }

    /// The passive connector of a request that reached `listener` through
    /// `binding`, at `local` from `remote` (`Requested`, N4).
    pub(super) fn passive(
        node: usize,
        limits: Limits,
        listener: Key,
        binding: BindingRef,
        local: Endpoint,
        remote: Endpoint,
    ) -> Self {
        Self {
            state: ConnState::Requested,
            role: Role::Passive,
            listener: Some(listener),
            binding: Some(binding),
            tuple: Some((binding, local.ip, remote)),
            local: Some(local),
            remote: Some(remote),
            ..Self::new(node, limits)
        }
    }

    pub(super) fn set_state(&mut self, key: Key, state: ConnState) {
        if self.state != state {
            crate::klog!(
                crate::kernel::log::Level::Trace,
                "connector {}.{}: {} -> {state}",
                key.index,
                key.generation,
                self.state
            );
            self.state = state;
        }
    }

    /// An active attempt starts (`Connecting`): the QP, the binding and
    /// four-tuple `(binding, local, remote)`, this side's limits (N20), and
    /// the peer — a local record, or the wire (`wire.rs`). What an earlier
    /// failed attempt left is reset (N28).
    pub(super) fn start_active(
        &mut self,
        key: Key,
        qp: &Arc<Qp>,
        (binding, local, remote): (BindingRef, Endpoint, Endpoint),
        own: ReadLimits,
        peer: Option<Key>,
        wire: Option<Arc<WireConn>>,
    ) {
        self.set_state(key, ConnState::Connecting);
        self.role = Role::Active;
        self.peer = peer;
        self.listener = None;
        self.qp = Some(Arc::clone(qp));
        self.peer_qp = None;
        self.binding = Some(binding);
        self.tuple = Some((binding, local.ip, remote));
        self.local = Some(local);
        self.remote = Some(remote);
        self.own_limits = Some(own);
        self.peer_limits = ReadLimits::default();
        self.peer_data.clear();
        self.pending = Pending {
            connect: true,
            ..Pending::default()
        };
        self.indicated = false;
        self.ending = Ending::Open;
        self.wire = wire;
        self.wire_dead = false;
        self.timed_out = false;
    }

    /// The connection is up on this side, and counted in
    /// `active_connection` (`count_established`).
    pub(super) fn establish(&mut self, key: Key) {
        self.set_state(key, ConnState::Established);
        self.counted = true;
    }

    /// Whether every QP of the connection has finished its DMA (X1b).
    pub(super) fn quiescent(&self) -> bool {
        self.qp.as_ref().is_none_or(|qp| qp.is_quiescent())
            && self.peer_qp.as_ref().is_none_or(|qp| qp.is_quiescent())
    }

    /// The limits `connection_data` reports (N20): the effective ones once
    /// this side has chosen its own; before that (a passive connector before
    /// `accept`), the peer's offer seen from this side, lowered to the
    /// device's limits.
    pub(super) fn reported_limits(&self) -> ReadLimits {
        match self.own_limits {
            Some(own) => own.effective(self.peer_limits),
            None => ReadLimits::new(self.peer_limits.outbound, self.peer_limits.inbound)
                .clamp(&self.limits),
        }
    }
}

/// A callback to make once the lock is released.
pub(super) enum Callout {
    Connect(Result<(), CmError>),
    Accept(Result<(), CmError>),
    Disconnect(Result<(), CmError>),
    Indicate,
}

pub(super) enum Action {
    /// A connector callback, counted in the record's `callouts`.
    Connector {
        events: Arc<dyn ConnectorEvents>,
        key: Key,
        callout: Callout,
    },
    /// A connector's record is gone: its last callback when its close was
    /// pending (`notify`), and the release of its events either way.
    ConnectorClosed {
        events: Arc<dyn ConnectorEvents>,
        notify: bool,
    },
    /// A connection request, counted in the listener's `callouts`.
    Incoming {
        events: Arc<dyn ListenerEvents>,
        listener: Key,
        request: Connector,
    },
    /// A pending listen's outcome, counted in the listener's `callouts`.
    ListenCompleted {
        events: Arc<dyn ListenerEvents>,
        listener: Key,
        result: Result<(), CmError>,
    },
    /// A listener's record is gone: as `ConnectorClosed`.
    ListenerClosed {
        events: Arc<dyn ListenerEvents>,
        notify: bool,
    },
    /// Take both QPs of a connection out of it (outside the lock: a QP
    /// reports back to its peer's handler), then see whether the DMA of
    /// each side still in the connection has finished (X1 b, X6).
    Teardown {
        qps: [Option<Arc<Qp>>; 2],
        keys: [Option<Key>; 2],
    },
    /// An operation on a connection over the wire (`wire.rs`).
    Wire(WireOp),
}

/// The longest sequence any single transition pushes is four actions; the
/// capacity leaves room.
const ACTIONS: usize = 8;

/// Work collected under the lock, done after it is released.
pub(super) struct Actions {
    items: [Option<Action>; ACTIONS],
    len: usize,
}

impl Actions {
    pub(super) const fn new() -> Self {
        Self {
            items: [const { None }; ACTIONS],
            len: 0,
        }
    }

    pub(super) fn push(&mut self, action: Action) {
        // The bound is argued, not enforced by types: the debug builds (all
        // the tests, the fuzzer's CI runs) stop at once if a transition
        // ever pushes past it; a release build logs and leaks below.
        debug_assert!(self.len < ACTIONS, "cm: action list full");
        if let Some(slot) = self.items.get_mut(self.len) {
            *slot = Some(action);
            self.len += 1;
        } else {
            // Unreachable by the bound above. Dropping the action here could
            // run a connector's close under the fabric lock, so it is leaked.
            crate::klog!(crate::kernel::log::Level::Error, "cm: action list full");
            core::mem::forget(action);
        }
    }

    pub(super) fn drain(&mut self) -> impl Iterator<Item = Action> + '_ {
        self.len = 0;
        self.items.iter_mut().filter_map(Option::take)
    }
}

pub(super) struct State {
    pub(super) nodes: Vec<Node>,
    pub(super) addresses: Vec<Address>,
    /// Sorted by port.
    pub(super) bindings: Vec<Binding>,
    pub(super) next_binding: u64,
    /// Offset into the ephemeral range of the next port to try.
    pub(super) next_port: u32,
    pub(super) listeners: Slab<ListenerRec>,
    pub(super) connectors: Slab<ConnectorRec>,
    /// QPs tied to a connector (by address; the connector holds the QP).
    pub(super) bound_qps: Vec<usize>,
}

pub(super) const EPHEMERAL_SPAN: u32 = EPHEMERAL_LAST as u32 - EPHEMERAL_FIRST as u32 + 1;

pub(super) fn qp_key(qp: &Arc<Qp>) -> usize {
    Arc::as_ptr(qp).addr()
}

/// A connection is established on `qp`'s device: counted in `connect`
/// (the active side) or `accept` (the passive one), and in
/// `active_connection` until `uncount`.
pub(super) fn count_established(qp: &Arc<Qp>, role: Role) {
    let counters = &qp.device().counters;
    let side = match role {
        Role::Active => &counters.connect,
        Role::Passive => &counters.accept,
    };
    side.fetch_add(1, Ordering::Relaxed);
    counters.active_connection.fetch_add(1, Ordering::Relaxed);
}

pub(super) fn count_failure(qp: Option<&Arc<Qp>>) {
    if let Some(qp) = qp {
        qp.device()
            .counters
            .connect_failure
            .fetch_add(1, Ordering::Relaxed);
    }
}

impl State {
    /// The connectors of `node` whose connection is established and not
    /// aborted: an aborted connection (E5, A15) is no longer active, though
    /// its connector waits for the consumer's Disconnect or close.
    pub(super) fn active_connections(&self, node: usize) -> impl Iterator<Item = &ConnectorRec> {
        self.connectors
            .slots
            .iter()
            .filter_map(|(_, rec)| rec.as_ref())
            .filter(move |rec| {
                rec.node == node
                    && rec.state == ConnState::Established
                    && rec.ending != Ending::Aborted
            })
    }

    pub(super) const fn new() -> Self {
        Self {
            nodes: Vec::new(),
            addresses: Vec::new(),
            bindings: Vec::new(),
            next_binding: 1,
            next_port: 0,
            listeners: Slab::new(),
            connectors: Slab::new(),
            bound_qps: Vec::new(),
        }
    }
}
