//! The fabric: one lock over every device, endpoint, listener and
//! connector; transitions run under it and their callbacks after it (I4);
//! the OID reports of connections and local endpoints (A19, A20); a QP's
//! lost connection turned into an indication (E5, X2); and the poll of
//! disconnecting connections until their DMA has finished (X1b).

use alloc::vec::Vec;
use core::fmt;

use super::address::{Endpoint, IpAddr};
use super::slab::Key;
use super::state::{Action, Actions, Callout, State, node_of_device};
use super::types::{CmError, ConnectionInfo, LocalEndpointInfo};
use super::wire::{Wire, WireConn};
use crate::kernel::deferred::{Deferred, DeferredRoutine};
use crate::kernel::sync::{Arc, SpinLock, Weak};
use crate::rnic::device::Device;
use crate::rnic::iwarp::mpa::MAX_IRD_ORD;
use crate::rnic::qp::{Qp, QpEvents};
use crate::rnic::types::Limits;

/// The limits of a device whose connections run over the wire (iWARP, A8):
/// private data is what an MPA request or reply carries besides its RFC 6581
/// block ([`super::MAX_WIRE_PRIVATE_DATA`], 508 bytes, each way: N17), and
/// the read limits are at most what MPA's IRD / ORD fields negotiate
/// ([`MAX_IRD_ORD`], N20). Everything else is the device's own: the transfer
/// and registration limits are within DDP's (32-bit message offsets and
/// lengths), and the queues are the RNIC's.
#[must_use]
pub fn wire_limits(device: &Limits) -> Limits {
    let private = u32::try_from(super::MAX_WIRE_PRIVATE_DATA).unwrap_or(u32::MAX);
    let ird_ord = u32::from(MAX_IRD_ORD);
    Limits {
        max_caller_data: private,
        max_callee_data: private,
        max_inbound_read_limit: device.max_inbound_read_limit.min(ird_ord),
        max_outbound_read_limit: device.max_outbound_read_limit.min(ird_ord),
        ..*device
    }
}

/// The connection fabric of one driver instance (host mode: one process):
/// every device, address, endpoint, listener and connector.
pub struct Fabric {
    pub(super) state: SpinLock<State>,
    /// Polls connections whose DMA has not finished yet (X1b).
    poller: Deferred<Poller>,
}

impl fmt::Debug for Fabric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Fabric { .. }")
    }
}

/// Whose callback [`Fabric::execute`] made.
#[derive(Clone, Copy)]
enum Caller {
    Connector(Key),
    Listener(Key),
}

struct Poller(Weak<Fabric>);

impl DeferredRoutine for Poller {
    fn run(&self) {
        if let Some(fabric) = self.0.upgrade() {
            fabric.poll();
        }
    }
}

/// Turns a QP's lost connection into a disconnect indication (E5, X2).
pub(super) struct LostHandler {
    pub(super) fabric: Weak<Fabric>,
    pub(super) key: Key,
}

impl LostHandler {
    /// E5/X2: errors that end the connection of connector `key` come back
    /// from `qp` as indications; set before the QP connects, so that none is
    /// missed.
    pub(super) fn watch(qp: &Qp, fabric: &Arc<Fabric>, key: Key) {
        qp.set_events(Some(Arc::new(Self {
            fabric: Arc::downgrade(fabric),
            key,
        })));
    }
}

impl QpEvents for LostHandler {
    fn connection_lost(&self) {
        if let Some(fabric) = self.fabric.upgrade() {
            fabric.run(|state, _, actions| state.connection_lost(self.key, actions));
        }
    }
}

pub(super) fn copy_data(data: &[u8]) -> Result<Vec<u8>, CmError> {
    let mut v = Vec::new();
    v.try_reserve_exact(data.len())
        .map_err(|_| CmError::Resources)?;
    v.extend_from_slice(data);
    Ok(v)
}

impl Fabric {
    /// An empty fabric.
    pub fn new() -> Arc<Self> {
        Arc::new_cyclic(|weak| Self {
            state: SpinLock::new(State::new()),
            poller: Deferred::new(Poller(Weak::clone(weak))),
        })
    }

    /// The device that owns `ip`, if any.
    pub fn device_of(&self, ip: IpAddr) -> Option<Arc<Device>> {
        let state = self.state.lock();
        let node = state.owner(ip)?;
        state
            .nodes
            .iter()
            .find(|n| n.key == node)
            .and_then(|n| n.device.upgrade())
    }

    /// Whether `ip`:`port` is bound (by a listener, a shared endpoint or a
    /// connection), directly or through a wildcard.
    pub fn is_bound(&self, ip: IpAddr, port: u16) -> bool {
        let state = self.state.lock();
        let owner = state.owner(ip);
        state
            .bindings
            .get(state.port_range(port))
            .is_some_and(|found| {
                found.iter().any(|b| {
                    b.ip == ip
                        || (b.ip.is_unspecified()
                            && b.ip.family() == ip.family()
                            && owner == Some(b.node))
                })
            })
    }

    /// The established connections of `device` (for `OID_NDK_CONNECTIONS`,
    /// A19): fills `out` with as many as fit and returns how many there are.
    pub fn connections(&self, device: &Arc<Device>, out: &mut [ConnectionInfo]) -> usize {
        let node = node_of_device(device);
        let state = self.state.lock();
        let mut n = 0_usize;
        for rec in state.active_connections(node) {
            if let (Some(local), Some(remote)) = (rec.local, rec.remote) {
                if let Some(slot) = out.get_mut(n) {
                    *slot = ConnectionInfo { local, remote };
                }
                n += 1;
            }
        }
        n
    }

    /// Aborts every established connection of `device` (NDK disabled, or
    /// the adapter halting: A15): both sides' QPs enter the error state, their
    /// outstanding work completes cancelled (E5), and both consumers get their
    /// disconnect indication (X2), so that they close what they own. Returns
    /// how many connections were aborted. Control path: allocates.
    pub fn abort_all(&self, device: &Arc<Device>) -> usize {
        let node = node_of_device(device);
        let mut qps: Vec<Arc<Qp>> = Vec::new();
        {
            let state = self.state.lock();
            for rec in state.active_connections(node) {
                if let Some(qp) = &rec.qp {
                    if qps.try_reserve(1).is_err() {
                        break;
                    }
                    qps.push(Arc::clone(qp));
                }
            }
        }
        // Outside the fabric's lock: terminating reports the loss back here.
        let aborted = qps.len();
        for qp in qps {
            qp.terminate();
        }
        aborted
    }

    /// The listeners and shared endpoints of `device` (for
    /// `OID_NDK_LOCAL_ENDPOINTS`, A20): fills `out` with as many as fit and
    /// returns how many there are.
    pub fn local_endpoints(&self, device: &Arc<Device>, out: &mut [LocalEndpointInfo]) -> usize {
        let node = node_of_device(device);
        let state = self.state.lock();
        let mut n = 0_usize;
        for b in &state.bindings {
            let listener = b.listener.is_some();
            if b.node != node || !(listener || b.shared) {
                continue;
            }
            if let Some(slot) = out.get_mut(n) {
                *slot = LocalEndpointInfo {
                    local: Endpoint::new(b.ip, b.port),
                    listener,
                };
            }
            n += 1;
        }
        n
    }

    /// Puts `device` on the wire: from now on its connections go over TCP
    /// through `wire.net` (`wire.rs`), even to a device of this fabric.
    /// Meant right after the device's first registration, before it has
    /// listeners or connectors.
    ///
    /// # Errors
    /// [`CmError::InvalidParameter`] when the device has no address here.
    pub fn attach_wire(&self, device: &Arc<Device>, wire: Wire) -> Result<(), CmError> {
        let node = node_of_device(device);
        let mut state = self.state.lock();
        let entry = state
            .nodes
            .iter_mut()
            .find(|n| n.key == node)
            .ok_or(CmError::InvalidParameter)?;
        entry.wire = Some(wire);
        Ok(())
    }

    /// Whether `device` reaches its peers over the wire.
    pub fn on_wire(&self, device: &Arc<Device>) -> bool {
        let node = node_of_device(device);
        self.state.lock().wire_of(node).is_some()
    }

    /// The limits connections of `device` honour: the device's, or on the
    /// wire [`wire_limits`] of them (A8: what is reported is enforced).
    pub fn limits(&self, device: &Arc<Device>) -> Limits {
        if self.on_wire(device) {
            wire_limits(device.limits())
        } else {
            *device.limits()
        }
    }

    /// Connectors that exist (open, or closing with work in flight).
    pub fn connector_count(&self) -> usize {
        self.state.lock().connectors.count(|_| true)
    }

    /// Listeners that exist (open, or closing with callbacks in flight).
    pub fn listener_count(&self) -> usize {
        self.state.lock().listeners.count(|_| true)
    }

    /// Runs `f` under the lock, then makes the callbacks it queued.
    pub(super) fn run<R>(
        self: &Arc<Self>,
        f: impl FnOnce(&mut State, &Arc<Self>, &mut Actions) -> R,
    ) -> R {
        let mut actions = Actions::new();
        let result = {
            let mut state = self.state.lock();
            f(&mut state, self, &mut actions)
        };
        self.execute(actions);
        result
    }

    /// Makes the queued callbacks, with no lock held (I4), then the
    /// bookkeeping each one needs.
    fn execute(self: &Arc<Self>, mut actions: Actions) {
        for action in actions.drain() {
            match action {
                Action::Connector {
                    events,
                    key,
                    callout,
                } => {
                    match callout {
                        Callout::Connect(result) => events.connect_completed(result),
                        Callout::Accept(result) => events.accept_completed(result),
                        Callout::Disconnect(result) => events.disconnect_completed(result),
                        Callout::Indicate => events.disconnected(),
                    }
                    drop(events);
                    self.callout_done(Caller::Connector(key));
                }
                Action::ConnectorClosed { events, notify } => {
                    if notify {
                        events.closed();
                    }
                }
                Action::Incoming {
                    events,
                    listener,
                    request,
                } => {
                    events.incoming(request);
                    drop(events);
                    self.callout_done(Caller::Listener(listener));
                }
                Action::ListenCompleted {
                    events,
                    listener,
                    result,
                } => {
                    events.listen_completed(result);
                    drop(events);
                    self.callout_done(Caller::Listener(listener));
                }
                Action::ListenerClosed { events, notify } => {
                    if notify {
                        events.closed();
                    }
                }
                Action::Wire(op) => WireConn::execute(op),
                Action::Teardown { qps, keys } => {
                    for qp in qps.into_iter().flatten() {
                        qp.disconnect();
                    }
                    for key in keys.into_iter().flatten() {
                        self.check_quiescence(key);
                    }
                }
            }
        }
    }

    /// A callback of `caller` is made (its events dropped): one fewer in
    /// flight, then what that lets happen (a pending close, L21).
    fn callout_done(self: &Arc<Self>, caller: Caller) {
        self.run(|state, _, more| match caller {
            Caller::Connector(key) => {
                if let Some(rec) = state.connectors.get_mut(key) {
                    rec.callouts = rec.callouts.saturating_sub(1);
                }
                state.settle(key, more);
            }
            Caller::Listener(key) => {
                if let Some(rec) = state.listeners.get_mut(key) {
                    rec.callouts = rec.callouts.saturating_sub(1);
                }
                state.settle_listener(key, more);
            }
        });
    }

    /// Completes the disconnect of `key` if its DMA has finished, else
    /// leaves it to the poller (X1b).
    fn check_quiescence(self: &Arc<Self>, key: Key) {
        let wait = self.run(|state, _, actions| match state.connectors.get(key) {
            Some(rec) if rec.quiescing => {
                if rec.quiescent() {
                    state.finish_disconnect(key, actions);
                    false
                } else {
                    true
                }
            }
            _ => false,
        });
        if wait {
            let _ = self.poller.schedule();
        }
    }

    /// The poller: completes every disconnect whose DMA has finished, and
    /// comes back while some still wait. DMA of one request is bounded (a
    /// copy of at most `MaxTransferLength` bytes), so the polling is short.
    fn poll(self: &Arc<Self>) {
        loop {
            let (progress, waiting) = self.run(|state, _, actions| {
                match state.connectors.find(|r| r.quiescing && r.quiescent()) {
                    Some(key) => {
                        state.finish_disconnect(key, actions);
                        (true, true)
                    }
                    None => (false, state.connectors.count(|r| r.quiescing) > 0),
                }
            });
            if !progress {
                if waiting {
                    let _ = self.poller.schedule();
                }
                return;
            }
        }
    }
}
