//! The connection state machine under the fabric lock: connect, request,
//! accept, reject, complete_connect, disconnect (X1–X7) and close of
//! connectors (L20, L21), and listen and close of listeners (N3–N7, N12).

use alloc::vec::Vec;

use super::address::Endpoint;
use super::connector::Connector;
use super::fabric::{Fabric, LostHandler};
use super::slab::Key;
use super::state::{
    Action, Actions, BindingRef, Callout, ConnectorRec, Ending, Role, State, count_established,
    count_failure, qp_key,
};
use super::types::{CloseState, CmError, ConnState, ConnectionData, ListenerEvents, ReadLimits};
use super::wire::{WireConn, WireOp};
use crate::kernel::sync::Arc;
use crate::kernel::sync::atomic::Ordering;
use crate::rnic::qp;
use crate::rnic::qp::{Qp, QpState};

impl State {
    // ----- callouts --------------------------------------------------------

    /// Queues a callback to connector `key` (none when it has no events).
    pub(super) fn emit(&mut self, actions: &mut Actions, key: Key, callout: Callout) {
        if let Some(rec) = self.connectors.get_mut(key)
            && let Some(events) = rec.events.clone()
        {
            rec.callouts += 1;
            actions.push(Action::Connector {
                events,
                key,
                callout,
            });
        }
    }

    /// The live peer of `key` if it is in `state`.
    fn peer_in(&self, key: Key, state: ConnState) -> Option<Key> {
        let peer = self.connectors.get(key)?.peer?;
        let rec = self.connectors.get(peer)?;
        (rec.state == state && rec.peer == Some(key)).then_some(peer)
    }

    /// Whether the peer has given up the attempt of `key` before
    /// establishment (N14, N15, N16): it closed or rejected, so this side's
    /// CompleteConnect, Accept or Reject will find the connection aborted.
    /// On the fabric that is the peer's record no longer waiting for this
    /// side; over the wire it is the stream's failure having arrived (the
    /// peer's RST or MPA give-up), which takes the time TCP takes.
    pub(super) fn peer_gone(&self, key: Key) -> bool {
        let Some(rec) = self.connectors.get(key) else {
            return false;
        };
        if rec.wire.is_some() {
            return rec.wire_dead;
        }
        match rec.state {
            ConnState::Replied => self.peer_in(key, ConnState::Accepting).is_none(),
            ConnState::Requested => self.peer_in(key, ConnState::Connecting).is_none(),
            _ => false,
        }
    }

    /// The passive request leaves the listener's backlog.
    pub(super) fn leave_backlog(&mut self, key: Key) {
        let Some(rec) = self.connectors.get_mut(key) else {
            return;
        };
        if let Some(listener) = rec.listener.take()
            && let Some(l) = self.listeners.get_mut(listener)
        {
            l.backlog = l.backlog.saturating_sub(1);
        }
    }

    /// An attempt of `key` failed before establishment: the connector is
    /// `Failed`, unlinked from its peer, and gives back what the attempt
    /// took — the QP (N28), the four-tuple and, for an active connector,
    /// its binding reference (the passive one keeps the listener's until it
    /// closes, N7).
    pub(super) fn fail(&mut self, key: Key) {
        self.leave_backlog(key);
        let Some(rec) = self.connectors.get_mut(key) else {
            return;
        };
        rec.set_state(key, ConnState::Failed);
        rec.peer = None;
        rec.pending.connect = false;
        rec.pending.accept = false;
        let qp = rec.qp.take();
        // An attempt that had a QP failed (either direction).
        count_failure(qp.as_ref());
        let tuple = rec.tuple.take();
        let binding = if rec.role == Role::Active {
            rec.binding.take()
        } else {
            None
        };
        self.unbind_qp(qp.as_ref());
        self.remove_tuple(tuple);
        if let Some(r) = binding {
            self.unbind(r);
        }
    }

    /// Completes the close of `key` if nothing holds it any longer.
    pub(super) fn settle(&mut self, key: Key, actions: &mut Actions) -> bool {
        let done = self.connectors.get(key).is_some_and(|rec| {
            rec.closing && rec.callouts == 0 && !rec.quiescing && !rec.pending.any()
        });
        if !done {
            return false;
        }
        let Some(mut rec) = self.connectors.remove(key) else {
            return false;
        };
        if rec.state == ConnState::Requested
            && let Some(listener) = rec.listener.take()
            && let Some(l) = self.listeners.get_mut(listener)
        {
            l.backlog = l.backlog.saturating_sub(1);
        }
        self.unbind_qp(rec.qp.as_ref());
        self.remove_tuple(rec.tuple.take());
        if let Some(r) = rec.binding.take() {
            self.unbind(r);
        }
        uncount(&mut rec);
        if let Some(events) = rec.events.take() {
            // Dropped (or called) after the lock is released: the owner's
            // events may hold the last reference to objects whose drop takes
            // this lock again.
            actions.push(Action::ConnectorClosed {
                events,
                notify: rec.close_pending,
            });
        }
        true
    }

    /// The connection's DMA has finished (X1b): the disconnect completes.
    pub(super) fn finish_disconnect(&mut self, key: Key, actions: &mut Actions) {
        let Some(rec) = self.connectors.get_mut(key) else {
            return;
        };
        rec.quiescing = false;
        if rec.state == ConnState::Disconnecting {
            rec.set_state(key, ConnState::Disconnected);
        }
        uncount(rec);
        if rec.pending.disconnect {
            rec.pending.disconnect = false;
            // X1: success once the peer's graceful disconnect arrived;
            // failure when the connection had been aborted, or when the own
            // close cut the wait short.
            let result = if rec.cancelled {
                Err(CmError::Cancelled)
            } else if rec.timed_out {
                // N26: the wire peer never answered.
                Err(CmError::TimedOut)
            } else if rec.ending == Ending::Aborted {
                Err(CmError::ConnectionAborted)
            } else {
                Ok(())
            };
            self.emit(actions, key, Callout::Disconnect(result));
        }
        self.settle(key, actions);
    }

    /// The peer of `key` while it still takes part in the connection
    /// (established, or disconnecting itself).
    fn connected_peer(&self, key: Key) -> Option<Key> {
        let peer = self.connectors.get(key)?.peer?;
        let rec = self.connectors.get(peer)?;
        let taking_part = matches!(rec.state, ConnState::Established | ConnState::Disconnecting);
        (taking_part && rec.peer == Some(key)).then_some(peer)
    }

    /// This side leaves an established connection, by `disconnect` or by
    /// its close. The peer gets the graceful notice: its indication unless
    /// it disconnected already (X2, X3); its QP and outstanding work are left
    /// alone (N24). A `disconnect` then waits for the peer's answer — its
    /// consumer's own disconnect or close — unless it has answered already
    /// or the connection was aborted (X1 a); a close never waits for the
    /// peer's consumer and tears the connection down at once.
    fn leave(&mut self, key: Key, by_close: bool, actions: &mut Actions) {
        let Some(rec) = self.connectors.get_mut(key) else {
            return;
        };
        if rec.wire.is_some() {
            self.wire_leave(key, by_close, actions);
            return;
        }
        rec.set_state(key, ConnState::Disconnecting);
        // X2: no indication after this side's own disconnect.
        rec.indicated = true;
        let own_open = rec.ending == Ending::Open;
        let mut wait = false;
        if let Some(peer) = self.connected_peer(key)
            && let Some(p) = self.connectors.get_mut(peer)
            && p.state == ConnState::Established
        {
            if p.ending == Ending::Open {
                p.ending = Ending::Graceful;
            }
            if !core::mem::replace(&mut p.indicated, true) {
                self.emit(actions, peer, Callout::Indicate);
            }
            wait = !by_close && own_open;
        }
        if wait {
            if let Some(rec) = self.connectors.get_mut(key) {
                rec.waiting = true;
            }
        } else {
            self.teardown(key, actions);
        }
    }

    /// The exchange is over (or cut short): both QPs leave the connection —
    /// outstanding work completes cancelled (X7, E3), later posts fail (X5),
    /// nothing flows either way (X6) — and each side that is disconnecting
    /// waits for the DMA of both QPs (X1 b).
    pub(super) fn teardown(&mut self, key: Key, actions: &mut Actions) {
        let peer = self.connected_peer(key);
        let qps = self
            .connectors
            .get(key)
            .map(|rec| [rec.qp.clone(), rec.peer_qp.clone()])
            .unwrap_or_default();
        let mut keys = [None, None];
        for (n, k) in [Some(key), peer].into_iter().enumerate() {
            let Some(k) = k else { continue };
            let Some(rec) = self.connectors.get_mut(k) else {
                continue;
            };
            // A peer waiting for this side's answer has it now (X1 a, X3).
            rec.waiting = false;
            if rec.state == ConnState::Disconnecting {
                rec.quiescing = true;
                if let Some(slot) = keys.get_mut(n) {
                    *slot = Some(k);
                }
            }
        }
        if qps.iter().all(Option::is_none) {
            self.finish_disconnect(key, actions);
        } else {
            actions.push(Action::Teardown { qps, keys });
        }
    }
}

/// The first close of a record marks it `closing` and goes on with it; a
/// second close finds the first still pending, and the close of a record
/// already gone is done (L21).
fn begin_close<T>(
    rec: Option<&mut T>,
    closing: fn(&mut T) -> &mut bool,
) -> Result<&mut T, CloseState> {
    let rec = rec.ok_or(CloseState::Done)?;
    if core::mem::replace(closing(rec), true) {
        return Err(CloseState::Pending);
    }
    Ok(rec)
}

/// The outcome of a close (L21): done once the record `settled` (it is
/// gone); else pending, and the record, still there, keeps `close_pending`
/// so that its last callback reports the close.
fn close_outcome(settled: bool, close_pending: Option<&mut bool>) -> CloseState {
    if settled {
        return CloseState::Done;
    }
    if let Some(flag) = close_pending {
        *flag = true;
    }
    CloseState::Pending
}

/// Takes a connection off the devices' `active_connection` counters.
fn uncount(rec: &mut ConnectorRec) {
    if core::mem::take(&mut rec.counted)
        && let Some(qp) = &rec.qp
    {
        let _ = qp.device().counters.active_connection.fetch_update(
            Ordering::AcqRel,
            Ordering::Acquire,
            |n| Some(n.saturating_sub(1)),
        );
    }
}

/// An active connector's request as `connect` prepared it: its QP, its
/// binding and four-tuple (`local` to `dst`), its limits (N20) and private
/// data.
pub(super) struct Request<'a> {
    pub(super) key: Key,
    pub(super) qp: &'a Arc<Qp>,
    pub(super) binding: BindingRef,
    pub(super) local: Endpoint,
    pub(super) dst: Endpoint,
    pub(super) own: ReadLimits,
    pub(super) payload: Vec<u8>,
}

/// A request a listener admitted (`ListenerRec::admit`): the listener's
/// events and key, the binding it came through, and the four-tuple seen
/// from the listener's side.
pub(super) struct Admitted {
    pub(super) events: Arc<dyn ListenerEvents>,
    pub(super) listener: Key,
    pub(super) binding: BindingRef,
    pub(super) local: Endpoint,
    pub(super) remote: Endpoint,
}

/// Where a connection's local endpoint comes from.
#[derive(Clone, Copy)]
pub(super) enum Source {
    /// `connect`: a dedicated endpoint at this address (N8).
    Address(Endpoint),
    /// `connect_shared`: a reference on a shared endpoint's binding (N10).
    Shared {
        binding: BindingRef,
        local: Endpoint,
        node: usize,
    },
}

/// A consumer's CM call on the connector `key`: its fabric and the
/// callouts it queues, which the local half of the call and, over the
/// wire, its wire half (`wire.rs`) both take.
pub(super) struct Call<'a> {
    pub(super) fabric: &'a Arc<Fabric>,
    pub(super) key: Key,
    pub(super) actions: &'a mut Actions,
}

/// NdkAccept's own parameters, which `accept` hands to `wire_accept` with
/// the read limits clamped to the connector's (N20).
pub(super) struct Accept<'a> {
    pub(super) qp: &'a Arc<Qp>,
    pub(super) limits: ReadLimits,
    pub(super) payload: Vec<u8>,
}

impl State {
    // ----- connectors ------------------------------------------------------

    pub(super) fn connect(
        &mut self,
        call: &mut Call<'_>,
        qp: &Arc<Qp>,
        source: Source,
        dst: Endpoint,
        limits: ReadLimits,
        payload: Vec<u8>,
    ) -> Result<(), CmError> {
        let key = call.key;
        let rec = self.connectors.get(key).ok_or(CmError::ConnectionInvalid)?;
        if rec.closing || !matches!(rec.state, ConnState::Idle | ConnState::Failed) {
            // X5: a disconnected connector is never reused.
            return Err(CmError::ConnectionInvalid);
        }
        if payload.len() > rec.limits.max_caller_data as usize {
            return Err(CmError::PrivateDataTooLong);
        }
        let node = rec.node;
        let own = limits.clamp(&rec.limits);
        self.check_qp(node, qp)?;
        if dst.ip.is_unspecified() || dst.port == 0 {
            return Err(CmError::InvalidAddress);
        }
        let (binding, local) = match source {
            Source::Address(src) => {
                if src.ip.family() != dst.ip.family() {
                    return Err(CmError::NetworkUnreachable);
                }
                let ip = self.local_ip(node, src.ip, true, Some(dst.ip))?;
                let r = self.bind(node, ip, src.port)?;
                (r, Endpoint::new(ip, r.port))
            }
            Source::Shared {
                binding,
                local,
                node: endpoint_node,
            } => {
                if endpoint_node != node {
                    return Err(CmError::InvalidParameter);
                }
                if local.ip.family() != dst.ip.family() {
                    return Err(CmError::NetworkUnreachable);
                }
                // N3: a new connection needs its local address owned now;
                // the endpoint's may have gone since it was created
                // (`AddressSet::remove`).
                self.local_ip(node, local.ip, false, None)?;
                if !self.add_ref(binding) {
                    return Err(CmError::InvalidParameter);
                }
                (binding, local)
            }
        };
        let any_port = matches!(source, Source::Address(src) if src.port == 0);
        let request = Request {
            key,
            qp,
            binding,
            local,
            dst,
            own,
            payload,
        };
        let outcome = self.request(call.fabric, request, call.actions);
        if outcome.is_ok()
            && any_port
            && let Some(wire) = self.connectors.get(key).and_then(|rec| rec.wire.as_ref())
        {
            // Over the wire a port the host's TCP has taken is tried again
            // with another (`wire.rs`).
            wire.allow_other_port();
        }
        if outcome.is_err() {
            self.unbind(binding);
            count_failure(Some(qp));
        }
        outcome
    }

    /// Sends `request`: finds the listener and creates the passive
    /// connector that its connect event hands over.
    fn request(
        &mut self,
        fabric: &Arc<Fabric>,
        mut request: Request<'_>,
        actions: &mut Actions,
    ) -> Result<(), CmError> {
        if let Some(rec) = self.connectors.get(request.key)
            && let Some(wire) = self.wire_of(rec.node)
        {
            return self.wire_request(fabric, &wire, request, actions);
        }
        let Request {
            key, local, dst, ..
        } = request;
        self.reserve_request(&request)?;
        let dst_node = self.owner(dst.ip).ok_or(CmError::HostUnreachable)?;
        let listener = self
            .find_listener(dst_node, dst.ip, dst.port)
            .ok_or(CmError::ConnectionRefused)?;
        let l = self
            .listeners
            .get(listener)
            .ok_or(CmError::ConnectionRefused)?;
        let l_binding = l.admit()?;
        let l_limits = l.limits;
        let l_events = Arc::clone(&l.events);
        self.reserve_tuple(l_binding)?;
        let mut passive =
            ConnectorRec::passive(dst_node, l_limits, listener, l_binding, dst, local);
        passive.peer = Some(key);
        passive.peer_limits = request.own;
        passive.peer_data = core::mem::take(&mut request.payload);
        let pkey = self.connectors.insert(passive)?;
        // Nothing below fails: the room was reserved above.
        self.start_request(&request, Some(pkey), None);
        let admitted = Admitted {
            events: l_events,
            listener,
            binding: l_binding,
            local: dst,
            remote: local,
        };
        self.deliver_request(fabric, admitted, pkey, actions);
        Ok(())
    }

    /// Reserves what sending `request` takes on this side, after N11: one
    /// connection per four-tuple.
    pub(super) fn reserve_request(&mut self, request: &Request<'_>) -> Result<(), CmError> {
        let Request {
            binding,
            local,
            dst,
            ..
        } = *request;
        if self.has_tuple(binding, local.ip, dst) {
            return Err(CmError::AddressAlreadyExists);
        }
        self.bound_qps
            .try_reserve(1)
            .map_err(|_| CmError::Resources)?;
        self.reserve_tuple(binding)
    }

    /// `request` is sent, to the local record `peer` or over `wire`: its
    /// four-tuple and QP are taken (in the room `reserve_request` made) and
    /// the connector is `Connecting`.
    pub(super) fn start_request(
        &mut self,
        request: &Request<'_>,
        peer: Option<Key>,
        wire: Option<Arc<WireConn>>,
    ) {
        let r = request;
        self.add_tuple(r.binding, r.local.ip, r.dst);
        self.bound_qps.push(qp_key(r.qp));
        if let Some(rec) = self.connectors.get_mut(r.key) {
            let tuple = (r.binding, r.local, r.dst);
            rec.start_active(r.key, r.qp, tuple, r.own, peer, wire);
        }
    }

    /// The passive connector `pkey` of the request `admitted` is
    /// handed to its listener's consumer: N7, one reference on the
    /// listener's endpoint per connector; its four-tuple (reserved by the
    /// caller); N12, a place in the backlog; N4, the connect event.
    pub(super) fn deliver_request(
        &mut self,
        fabric: &Arc<Fabric>,
        admitted: Admitted,
        pkey: Key,
        actions: &mut Actions,
    ) {
        let Admitted {
            events,
            listener,
            binding,
            local,
            remote,
        } = admitted;
        self.add_ref(binding);
        self.add_tuple(binding, local.ip, remote);
        if let Some(l) = self.listeners.get_mut(listener) {
            l.backlog += 1;
            l.callouts += 1;
        }
        actions.push(Action::Incoming {
            events,
            listener,
            request: Connector {
                fabric: Arc::clone(fabric),
                key: pkey,
            },
        });
    }

    pub(super) fn accept(&mut self, call: &mut Call<'_>, args: Accept<'_>) -> Result<(), CmError> {
        let key = call.key;
        let rec = self.connectors.get(key).ok_or(CmError::ConnectionInvalid)?;
        if rec.closing || rec.state != ConnState::Requested {
            return Err(CmError::ConnectionInvalid);
        }
        if args.payload.len() > rec.limits.max_callee_data as usize {
            return Err(CmError::PrivateDataTooLong);
        }
        let node = rec.node;
        let own = args.limits.clamp(&rec.limits);
        let wire = rec.wire.is_some();
        self.check_qp(node, args.qp)?;
        if wire {
            return self.wire_accept(
                call,
                Accept {
                    limits: own,
                    ..args
                },
            );
        }
        let Some(peer) = self.peer_in(key, ConnState::Connecting) else {
            // N15: the active side gave up.
            self.fail(key);
            return Err(CmError::ConnectionAborted);
        };
        self.start_accept(key, args.qp, own)?;
        if let Some(p) = self.connectors.get_mut(peer) {
            p.set_state(peer, ConnState::Replied);
            p.peer_limits = own;
            p.peer_data = args.payload;
            p.pending.connect = false;
        }
        // N13: the active side's Connect completes once the peer accepted.
        self.emit(call.actions, peer, Callout::Connect(Ok(())));
        Ok(())
    }

    /// The passive connector `key` accepts with `qp` and its limits `own`
    /// (N20): the QP is taken, the request leaves the backlog (N12) and the
    /// connector is `Accepting` until the active side completes (N15).
    pub(super) fn start_accept(
        &mut self,
        key: Key,
        qp: &Arc<Qp>,
        own: ReadLimits,
    ) -> Result<(), CmError> {
        self.bound_qps
            .try_reserve(1)
            .map_err(|_| CmError::Resources)?;
        self.leave_backlog(key);
        self.bound_qps.push(qp_key(qp));
        if let Some(rec) = self.connectors.get_mut(key) {
            rec.set_state(key, ConnState::Accepting);
            rec.qp = Some(Arc::clone(qp));
            rec.own_limits = Some(own);
            rec.pending.accept = true;
        }
        Ok(())
    }

    /// The active connector `key` is refused (N16): its Connect fails.
    fn refuse(&mut self, key: Key, data: Vec<u8>, actions: &mut Actions) {
        let refused = Callout::Connect(Err(CmError::ConnectionRefused));
        self.fail_rejected(key, data, refused, actions);
    }

    /// Connector `key`'s attempt ends with `data` from its peer — a reject's
    /// (N16), kept for `connection_data` (N18); none when the wire failed
    /// otherwise: `key` fails and `callout` completes its pending request.
    pub(super) fn fail_rejected(
        &mut self,
        key: Key,
        data: Vec<u8>,
        callout: Callout,
        actions: &mut Actions,
    ) {
        if let Some(rec) = self.connectors.get_mut(key) {
            rec.peer_data = data;
        }
        self.fail(key);
        self.emit(actions, key, callout);
    }

    pub(super) fn reject(&mut self, call: &mut Call<'_>, payload: Vec<u8>) -> Result<(), CmError> {
        let key = call.key;
        let rec = self.connectors.get(key).ok_or(CmError::ConnectionInvalid)?;
        if rec.closing {
            return Err(CmError::ConnectionInvalid);
        }
        let (state, max) = (rec.state, rec.limits.max_callee_data as usize);
        match state {
            ConnState::Requested | ConnState::Replied => {}
            _ => return Err(CmError::ConnectionInvalid),
        }
        if payload.len() > max {
            return Err(CmError::PrivateDataTooLong);
        }
        if rec.wire.is_some() {
            return self.wire_reject(call, payload);
        }
        let peer_state = if state == ConnState::Requested {
            ConnState::Connecting
        } else {
            ConnState::Accepting
        };
        let peer = self.peer_in(key, peer_state);
        self.fail(key);
        // N16: Reject answers CONNECTION_ABORTED when the peer had already
        // abandoned the connection.
        let peer = peer.ok_or(CmError::ConnectionAborted)?;
        if state == ConnState::Requested {
            // N16: the active side's Connect fails as refused.
            self.refuse(peer, payload, call.actions);
        } else {
            // N16: the passive side's Accept fails as aborted.
            let aborted = Callout::Accept(Err(CmError::ConnectionAborted));
            self.fail_rejected(peer, payload, aborted, call.actions);
        }
        Ok(())
    }

    pub(super) fn complete_connect(&mut self, call: &mut Call<'_>) -> Result<(), CmError> {
        let key = call.key;
        let rec = self.connectors.get(key).ok_or(CmError::ConnectionInvalid)?;
        if rec.closing || rec.state != ConnState::Replied {
            // N14: not connecting.
            return Err(CmError::ConnectionInvalid);
        }
        if rec.wire.is_some() {
            return self.wire_complete(call);
        }
        let Some(peer) = self.peer_in(key, ConnState::Accepting) else {
            // N14: the accepting peer gave up.
            self.fail(key);
            return Err(CmError::ConnectionAborted);
        };
        let own_qp = rec.qp.clone();
        let own_limits = rec.own_limits.unwrap_or_default();
        let (peer_qp, peer_limits) = self
            .connectors
            .get(peer)
            .map(|p| (p.qp.clone(), p.own_limits.unwrap_or_default()))
            .unwrap_or_default();
        let (Some(own_qp), Some(peer_qp)) = (own_qp, peer_qp) else {
            self.fail(key);
            self.fail(peer);
            self.emit(
                call.actions,
                peer,
                Callout::Accept(Err(CmError::ConnectionAborted)),
            );
            return Err(CmError::ConnectionInvalid);
        };
        // E5/X2: errors that end the connection come back as indications.
        // Set before the QPs connect, so that none is missed.
        LostHandler::watch(&own_qp, call.fabric, key);
        LostHandler::watch(&peer_qp, call.fabric, peer);
        // N14: a QP that is no longer idle (flushed, closed) fails this side
        // with CONNECTION_INVALID and the other with CONNECTION_ABORTED.
        let failure = if own_qp.state() != QpState::Idle {
            Some((CmError::ConnectionInvalid, CmError::ConnectionAborted))
        } else if peer_qp.state() != QpState::Idle {
            Some((CmError::ConnectionAborted, CmError::ConnectionInvalid))
        } else {
            qp::connect(&own_qp, &peer_qp, own_limits.pair(), peer_limits.pair())
                .err()
                .map(|_| (CmError::ConnectionInvalid, CmError::ConnectionAborted))
        };
        if let Some((own_error, peer_error)) = failure {
            self.fail(key);
            self.fail(peer);
            self.emit(call.actions, peer, Callout::Accept(Err(peer_error)));
            return Err(own_error);
        }
        count_established(&own_qp, Role::Active);
        count_established(&peer_qp, Role::Passive);
        if let Some(rec) = self.connectors.get_mut(key) {
            rec.establish(key);
            rec.peer_qp = Some(Arc::clone(&peer_qp));
        }
        if let Some(p) = self.connectors.get_mut(peer) {
            p.establish(peer);
            p.peer_qp = Some(own_qp);
            p.pending.accept = false;
        }
        // N15: Accept completes once the active side completed the connection.
        self.emit(call.actions, peer, Callout::Accept(Ok(())));
        Ok(())
    }

    pub(super) fn disconnect(&mut self, key: Key, actions: &mut Actions) -> Result<(), CmError> {
        let rec = self
            .connectors
            .get_mut(key)
            .ok_or(CmError::ConnectionInvalid)?;
        if rec.closing || rec.state != ConnState::Established {
            // X5: a second disconnect, or one that was never connected.
            return Err(CmError::ConnectionInvalid);
        }
        rec.pending.disconnect = true;
        self.leave(key, false, actions);
        Ok(())
    }

    pub(super) fn connection_lost(&mut self, key: Key, actions: &mut Actions) {
        let Some(rec) = self.connectors.get_mut(key) else {
            return;
        };
        // Only while the connection is up, or this side waits for the peer:
        // a teardown in progress makes the QPs report the loss too, which
        // is no abort.
        let waiting = rec.state == ConnState::Disconnecting && rec.waiting;
        if rec.state != ConnState::Established && !waiting {
            return;
        }
        if rec.ending == Ending::Open {
            rec.ending = Ending::Aborted;
        }
        if waiting {
            // X1: an abort ends the wait for the peer, with a failure.
            self.teardown(key, actions);
        } else if !core::mem::replace(&mut rec.indicated, true) {
            // X2: the abort is indicated, once (N24).
            self.emit(actions, key, Callout::Indicate);
        }
    }

    pub(super) fn close_connector(&mut self, key: Key, actions: &mut Actions) -> CloseState {
        let rec = match begin_close(self.connectors.get_mut(key), |rec| &mut rec.closing) {
            Ok(rec) => rec,
            Err(outcome) => return outcome,
        };
        let attempt = matches!(
            rec.state,
            ConnState::Connecting
                | ConnState::Replied
                | ConnState::Requested
                | ConnState::Accepting
        );
        if attempt && rec.wire.is_some() {
            self.wire_close_attempt(key, actions);
            return self.close_settled(key, actions);
        }
        match rec.state {
            ConnState::Idle | ConnState::Failed | ConnState::Disconnected => {}
            ConnState::Disconnecting => {
                if rec.waiting {
                    // L20: the close stops waiting for the peer's answer;
                    // the Disconnect completes, cancelled, before the close.
                    rec.cancelled = true;
                    self.teardown(key, actions);
                }
            }
            ConnState::Connecting => {
                // L20: the close cancels the pending Connect; the passive
                // side finds the request abandoned (N15, N16).
                self.fail(key);
                self.emit(actions, key, Callout::Connect(Err(CmError::Cancelled)));
            }
            ConnState::Replied => {
                let peer = self.peer_in(key, ConnState::Accepting);
                self.fail(key);
                if let Some(peer) = peer {
                    self.fail(peer);
                    self.emit(
                        actions,
                        peer,
                        Callout::Accept(Err(CmError::ConnectionAborted)),
                    );
                }
            }
            ConnState::Requested => {
                // An unanswered request closed: as a reject (N16).
                let peer = self.peer_in(key, ConnState::Connecting);
                self.fail(key);
                if let Some(peer) = peer {
                    self.refuse(peer, Vec::new(), actions);
                }
            }
            ConnState::Accepting => {
                // L20: the close cancels the pending Accept; the active side
                // finds the connection abandoned (N14, N16).
                self.fail(key);
                self.emit(actions, key, Callout::Accept(Err(CmError::Cancelled)));
            }
            // Closing a connected connector is a graceful disconnect towards
            // the peer (X2), without a completion of its own.
            ConnState::Established => self.leave(key, true, actions),
        }
        self.close_settled(key, actions)
    }

    fn close_settled(&mut self, key: Key, actions: &mut Actions) -> CloseState {
        let settled = self.settle(key, actions);
        let rec = self.connectors.get_mut(key);
        close_outcome(settled, rec.map(|rec| &mut rec.close_pending))
    }

    pub(super) fn connection_data(
        &self,
        key: Key,
        out: &mut [u8],
    ) -> Result<ConnectionData, CmError> {
        let rec = self.connectors.get(key).ok_or(CmError::ConnectionInvalid)?;
        if matches!(rec.state, ConnState::Idle | ConnState::Connecting) {
            // N19: only once the peer has spoken.
            return Err(CmError::ConnectionInvalid);
        }
        let length = rec.peer_data.len();
        let copied = out.len().min(length);
        if let (Some(dst), Some(src)) = (out.get_mut(..copied), rec.peer_data.get(..copied)) {
            dst.copy_from_slice(src);
        }
        Ok(ConnectionData {
            limits: rec.reported_limits(),
            length,
            copied,
        })
    }

    // ----- listeners -------------------------------------------------------

    pub(super) fn listen(&mut self, key: Key, local: Endpoint) -> Result<Endpoint, CmError> {
        let rec = self.listeners.get(key).ok_or(CmError::InvalidState)?;
        if rec.closing || rec.listening.is_some() {
            return Err(CmError::InvalidState);
        }
        let node = rec.node;
        // N31: a wildcard listener stays a wildcard.
        let ip = self.local_ip(node, local.ip, false, None)?;
        let r = self.bind(node, ip, local.port)?;
        if let Some(b) = self.binding_mut(r) {
            b.listener = Some(key);
        }
        let endpoint = Endpoint::new(ip, r.port);
        if let Some(rec) = self.listeners.get_mut(key) {
            rec.listening = Some((r, endpoint));
        }
        Ok(endpoint)
    }

    pub(super) fn settle_listener(&mut self, key: Key, actions: &mut Actions) -> bool {
        let done = self
            .listeners
            .get(key)
            .is_some_and(|l| l.closing && l.callouts == 0);
        if !done {
            return false;
        }
        if let Some(rec) = self.listeners.remove(key) {
            // As for connectors: dropped or called after the lock.
            actions.push(Action::ListenerClosed {
                events: rec.events,
                notify: rec.close_pending,
            });
        }
        true
    }

    pub(super) fn close_listener(&mut self, key: Key, actions: &mut Actions) -> CloseState {
        let rec = match begin_close(self.listeners.get_mut(key), |rec| &mut rec.closing) {
            Ok(rec) => rec,
            Err(outcome) => return outcome,
        };
        // L20, L21: a Listen still binding completes cancelled, and the
        // close waits for that completion to return.
        if let Some(wait) = rec.bind_wait.take()
            && wait.answered()
        {
            rec.callouts = rec.callouts.saturating_add(1);
            actions.push(Action::ListenCompleted {
                events: Arc::clone(&rec.events),
                listener: key,
                result: Err(CmError::Cancelled),
            });
        }
        let sockets = core::mem::take(&mut rec.sockets);
        if !sockets.is_empty() {
            // The TCP listening sockets close after the lock.
            actions.push(Action::Wire(WireOp::Unlisten(sockets)));
        }
        // N6: from now on every request is turned away. N7: the listener's
        // reference on its endpoint goes; accepted connectors keep theirs.
        if let Some((r, _)) = rec.listening.take() {
            if let Some(b) = self.binding_mut(r) {
                b.listener = None;
            }
            self.unbind(r);
        }
        let settled = self.settle_listener(key, actions);
        let rec = self.listeners.get_mut(key);
        close_outcome(settled, rec.map(|rec| &mut rec.close_pending))
    }
}
