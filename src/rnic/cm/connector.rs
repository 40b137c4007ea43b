//! Connectors: the handle of one end of a connection, and its calls
//! (connect, accept, reject, complete_connect, disconnect, close).

use core::fmt;

use super::address::Endpoint;
use super::address_set::AddressSet;
use super::connection::{Accept, Call, Source};
use super::fabric::{Fabric, copy_data};
use super::shared::SharedEndpoint;
use super::slab::Key;
use super::state::{ConnectorRec, State};
use super::types::{CloseState, CmError, ConnState, ConnectionData, ConnectorEvents, ReadLimits};
use crate::kernel::sync::Arc;
use crate::kernel::sync::atomic::Ordering;
use crate::rnic::qp::Qp;

/// A connector: one end of a connection. Dropping it closes it.
pub struct Connector {
    pub(super) fabric: Arc<Fabric>,
    pub(super) key: Key,
}

impl fmt::Debug for Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connector")
            .field("key", &self.key)
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

impl Connector {
    /// An idle connector on the device of `set`.
    ///
    /// # Errors
    /// [`CmError::InvalidParameter`] for a detached set,
    /// [`CmError::Resources`].
    pub fn new(set: &AddressSet) -> Result<Self, CmError> {
        let (fabric, node, limits) = set.parts()?;
        let key = fabric
            .state
            .lock()
            .connectors
            .insert(ConnectorRec::new(node, limits))?;
        Ok(Self {
            fabric: Arc::clone(fabric),
            key,
        })
    }

    /// Sets who hears of this connector's events.
    pub fn set_events(&self, events: Arc<dyn ConnectorEvents>) {
        let old = self
            .fabric
            .state
            .lock()
            .connectors
            .get_mut(self.key)
            .and_then(|rec| rec.events.replace(events));
        drop(old);
    }

    /// The state (`None` once closed).
    pub fn state(&self) -> Option<ConnState> {
        self.fabric
            .state
            .lock()
            .connectors
            .get(self.key)
            .map(|r| r.state)
    }

    /// The most private data this connector's device takes (N17): on
    /// Connect (`MaxCallerData`) and on Accept and Reject (`MaxCalleeData`).
    pub fn private_data_limits(&self) -> (usize, usize) {
        self.fabric
            .state
            .lock()
            .connectors
            .get(self.key)
            .map_or((0, 0), |r| {
                (
                    r.limits.max_caller_data as usize,
                    r.limits.max_callee_data as usize,
                )
            })
    }

    /// The local endpoint, once connecting or connected (N22, N23).
    pub fn local(&self) -> Option<Endpoint> {
        self.fabric
            .state
            .lock()
            .connectors
            .get(self.key)
            .and_then(|r| r.local)
    }

    /// The peer's endpoint, once connecting or connected (N22, N23).
    pub fn peer(&self) -> Option<Endpoint> {
        self.fabric
            .state
            .lock()
            .connectors
            .get(self.key)
            .and_then(|r| r.remote)
    }

    /// Asks `dst` for a connection with `qp` from a dedicated endpoint at
    /// `src` (N8, N12): `Ok` means pending, `connect_completed` follows.
    /// `src` may be a wildcard (the device's address of the family) and its
    /// port 0 (ephemeral). Read limits are lowered to the device's (N20).
    ///
    /// # Errors
    /// Inline, with nothing started: [`CmError::ConnectionInvalid`] (not
    /// idle, X5; QP not idle or tied to another connector),
    /// [`CmError::InvalidParameter`] (QP of another device),
    /// [`CmError::PrivateDataTooLong`] (N17), [`CmError::InvalidAddress`],
    /// [`CmError::AddressInUse`], [`CmError::TooManyAddresses`],
    /// [`CmError::HostUnreachable`], [`CmError::NetworkUnreachable`],
    /// [`CmError::ConnectionRefused`] (no, paused or closing listener, full
    /// backlog: N5, N6, N12), [`CmError::Resources`].
    pub fn connect(
        &self,
        qp: &Arc<Qp>,
        src: Endpoint,
        dst: Endpoint,
        limits: ReadLimits,
        data: &[u8],
    ) -> Result<(), CmError> {
        let payload = copy_data(data)?;
        self.call(|state, call| state.connect(call, qp, Source::Address(src), dst, limits, payload))
    }

    /// As [`connect`](Self::connect), from `endpoint` (N10, N11).
    ///
    /// # Errors
    /// As `connect`, and [`CmError::AddressAlreadyExists`] when a connection
    /// from `endpoint` to `dst` exists (N11); [`CmError::InvalidParameter`]
    /// for an endpoint of another device or a closed one.
    pub fn connect_shared(
        &self,
        qp: &Arc<Qp>,
        endpoint: &SharedEndpoint,
        dst: Endpoint,
        limits: ReadLimits,
        data: &[u8],
    ) -> Result<(), CmError> {
        if !Arc::ptr_eq(&self.fabric, &endpoint.fabric) || !endpoint.open.load(Ordering::Acquire) {
            return Err(CmError::InvalidParameter);
        }
        let payload = copy_data(data)?;
        let source = Source::Shared {
            binding: endpoint.binding,
            local: endpoint.local,
            node: endpoint.node,
        };
        self.call(|state, call| state.connect(call, qp, source, dst, limits, payload))
    }

    /// Accepts the request with `qp` (N15): `Ok` means pending,
    /// `accept_completed` follows once the active side completes the
    /// connection; the active side's `connect` completes now.
    ///
    /// # Errors
    /// [`CmError::ConnectionInvalid`] (not a request, or the QP is not idle
    /// or tied elsewhere), [`CmError::InvalidParameter`] (QP of another
    /// device), [`CmError::PrivateDataTooLong`] (N17),
    /// [`CmError::ConnectionAborted`] (the active side gave up, N15),
    /// [`CmError::Resources`].
    pub fn accept(&self, qp: &Arc<Qp>, limits: ReadLimits, data: &[u8]) -> Result<(), CmError> {
        let payload = copy_data(data)?;
        self.call(|state, call| {
            state.accept(
                call,
                Accept {
                    qp,
                    limits,
                    payload,
                },
            )
        })
    }

    /// Rejects (N16), synchronously: a request (the active side's `connect`
    /// fails refused) or, on the active side after `connect` completed, the
    /// accepted connection (the peer's `accept` fails aborted).
    ///
    /// # Errors
    /// [`CmError::ConnectionAborted`] when the peer had already abandoned,
    /// [`CmError::ConnectionInvalid`] in another state,
    /// [`CmError::PrivateDataTooLong`] (N17), [`CmError::Resources`].
    pub fn reject(&self, data: &[u8]) -> Result<(), CmError> {
        let payload = copy_data(data)?;
        self.call(|state, call| state.reject(call, payload))
    }

    /// Completes an accepted connection (N13), synchronously: both QPs are
    /// connected with the negotiated read limits (N20) and the peer's
    /// `accept` completes.
    ///
    /// # Errors
    /// [`CmError::ConnectionInvalid`] when not connecting or this side's QP
    /// is no longer idle, [`CmError::ConnectionAborted`] when the peer gave
    /// up or its QP is no longer idle (N14).
    pub fn complete_connect(&self) -> Result<(), CmError> {
        self.call(State::complete_connect)
    }

    /// Runs one of this connector's CM calls under the fabric lock, with
    /// the [`Call`] that its local and wire halves take.
    fn call<R>(&self, f: impl FnOnce(&mut State, &mut Call<'_>) -> R) -> R {
        let key = self.key;
        self.fabric.run(|state, fabric, actions| {
            f(
                state,
                &mut Call {
                    fabric,
                    key,
                    actions,
                },
            )
        })
    }

    /// Whether the peer gave up this attempt before establishment (its
    /// close, Reject or give-up has arrived: N14, N15, N16). Only an
    /// observable for tests, which must not act before the give-up has
    /// reached this side over a transport where it travels.
    pub fn peer_gone(&self) -> bool {
        self.fabric.state.lock().peer_gone(self.key)
    }

    /// Copies the peer's private data into `out` (as much as fits) and
    /// reports its size and the read limits (N18–N20).
    ///
    /// # Errors
    /// [`CmError::ConnectionInvalid`] before the peer has sent anything.
    pub fn connection_data(&self, out: &mut [u8]) -> Result<ConnectionData, CmError> {
        self.fabric.state.lock().connection_data(self.key, out)
    }

    /// Disconnects gracefully (X1): `Ok` means pending,
    /// `disconnect_completed` follows once both QPs' DMA has finished.
    ///
    /// # Errors
    /// [`CmError::ConnectionInvalid`] when not established (X5).
    pub fn disconnect(&self) -> Result<(), CmError> {
        let key = self.key;
        self.fabric
            .run(|state, _, actions| state.disconnect(key, actions))
    }

    /// Closes the connector: cancels what is pending (L20), disconnects an
    /// established connection gracefully towards the peer, gives back the
    /// endpoint reference (N7, N8, N10). Pending while DMA or callbacks are
    /// in flight; then `closed` follows.
    pub fn close(&self) -> CloseState {
        let key = self.key;
        self.fabric
            .run(|state, _, actions| state.close_connector(key, actions))
    }
}

impl Drop for Connector {
    fn drop(&mut self) {
        let _ = self.close();
    }
}
