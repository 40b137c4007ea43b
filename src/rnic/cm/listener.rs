//! Listeners (N3–N7, N31): the handle of a listening endpoint that turns
//! connection requests into passive connectors.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;
use core::net::SocketAddr;

use super::address::{Endpoint, IpAddr};
use super::address_set::AddressSet;
use super::fabric::Fabric;
use super::slab::Key;
use super::state::{Action, Actions, ListenerRec, State};
use super::types::{CloseState, CmError, Listen, ListenerEvents};
use super::wire::{self, WireOp};
use crate::kernel::sync::Arc;
use crate::kernel::tcp::Listening;

/// A listener (N3–N7, N31). Dropping it closes it.
pub struct Listener {
    fabric: Arc<Fabric>,
    key: Key,
}

impl fmt::Debug for Listener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Listener")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl Listener {
    /// A listener on the device of `set`, reporting to `events`.
    ///
    /// # Errors
    /// [`CmError::InvalidParameter`] for a detached set,
    /// [`CmError::Resources`].
    pub fn new(set: &AddressSet, events: Arc<dyn ListenerEvents>) -> Result<Self, CmError> {
        let (fabric, node, limits) = set.parts()?;
        let key = fabric.state.lock().listeners.insert(ListenerRec {
            node,
            limits,
            events,
            listening: None,
            paused: false,
            backlog: 0,
            callouts: 0,
            closing: false,
            close_pending: false,
            sockets: Vec::new(),
            accepted: None,
            bind_wait: None,
        })?;
        Ok(Self {
            fabric: Arc::clone(fabric),
            key,
        })
    }

    /// Starts listening on `local` (N3): an address of the device or the
    /// family's wildcard (N31), port 0 for an ephemeral port. Returns the
    /// endpoint bound; over the wire the TCP sockets may still be binding
    /// (then their outcome reaches [`ListenerEvents::listen_completed`], see
    /// [`start_listen`](Self::start_listen)).
    ///
    /// # Errors
    /// [`CmError::AddressInUse`], [`CmError::InvalidAddress`],
    /// [`CmError::TooManyAddresses`], [`CmError::Resources`] (N3);
    /// [`CmError::InvalidState`] when already listening or closed.
    pub fn listen(&self, local: Endpoint) -> Result<Endpoint, CmError> {
        self.start_listen(local).map(Listen::endpoint)
    }

    /// Starts listening on `local`, as [`listen`](Self::listen), and says
    /// whether it is done ([`Listen::Bound`]) or the platform is still
    /// binding the TCP sockets of a device on the wire
    /// ([`Listen::Binding`]: WSK binds asynchronously). In the second case
    /// exactly one [`ListenerEvents::listen_completed`] follows (possibly
    /// before this returns): `Ok` once every socket is bound, the first
    /// failure otherwise (the listener then listens on nothing and may
    /// listen again), or [`CmError::Cancelled`] when the listener is closed
    /// first (L20). A failure found within the call is returned and nothing
    /// follows (L8).
    ///
    /// # Errors
    /// As [`listen`](Self::listen).
    pub fn start_listen(&self, local: Endpoint) -> Result<Listen, CmError> {
        let plan = self.fabric.state.lock().wire_listen_plan(self.key, local)?;
        let Some((wire, addresses)) = plan else {
            return self
                .fabric
                .state
                .lock()
                .listen(self.key, local)
                .map(Listen::Bound);
        };
        // Over the wire the ND port is the TCP port (N30): the fabric binds
        // it first (picking an ephemeral one for port 0), then the platform's
        // sockets (outside the lock); a TCP port taken by another program
        // makes port 0 try the next.
        let sink = wire::accept_sink(&self.fabric, &wire, self.key);
        for _ in 0..WIRE_PORT_TRIES {
            let endpoint = {
                let mut state = self.fabric.state.lock();
                let endpoint = state.listen(self.key, local)?;
                let wait = BindWait::new(&addresses, endpoint.port);
                if let Some(rec) = state.listeners.get_mut(self.key) {
                    rec.accepted = Some(Arc::clone(&sink));
                    rec.bind_wait = wait;
                }
                endpoint
            };
            let error = match wire::listen_sockets(&wire, &sink, &addresses, endpoint.port) {
                Ok(sockets) => match self.keep_sockets(sockets, endpoint) {
                    Ok(listen) => return Ok(listen),
                    Err(error) => error,
                },
                Err(error) => {
                    let mut state = self.fabric.state.lock();
                    if let Some(rec) = state.listeners.get_mut(self.key) {
                        rec.bind_wait = None;
                    }
                    state.unlisten(self.key);
                    error
                }
            };
            if !(error == CmError::AddressInUse && local.port == 0) {
                return Err(error);
            }
        }
        Err(CmError::AddressInUse)
    }

    /// The sockets of a listen attempt at `endpoint` were made: the
    /// listener keeps them, and the attempt is done, still binding, or
    /// failed (its endpoint then given back).
    fn keep_sockets(
        &self,
        mut sockets: Vec<Box<dyn Listening>>,
        endpoint: Endpoint,
    ) -> Result<Listen, CmError> {
        let mut state = self.fabric.state.lock();
        let Some(rec) = state.listeners.get_mut(self.key) else {
            drop(state);
            drop(sockets);
            return Err(CmError::InvalidState);
        };
        if rec.closing {
            drop(state);
            // Closed meanwhile: the sockets close here, unlocked.
            drop(sockets);
            return Err(CmError::InvalidState);
        }
        let mut wait = rec.bind_wait.take();
        if let Some(wait) = wait.as_mut() {
            for socket in sockets.iter().filter(|s| s.bound()) {
                wait.settle(endpoint_of(socket.local()), Ok(()));
            }
        }
        // An address added meanwhile may have its socket already
        // (`wire::follow_address`).
        if rec.sockets.is_empty() {
            rec.sockets = core::mem::take(&mut sockets);
        } else if rec.sockets.try_reserve(sockets.len()).is_ok() {
            rec.sockets.append(&mut sockets);
        }
        let outcome = match wait.as_ref().map(BindWait::outcome) {
            Some(Some(outcome)) => outcome,
            Some(None) => {
                // L8: the rest is reported by `bound`.
                rec.bind_wait = wait.map(|mut wait| {
                    wait.answered = true;
                    wait
                });
                drop(state);
                drop(sockets);
                return Ok(Listen::Binding(endpoint));
            }
            None => Ok(()),
        };
        let failed = match outcome {
            Ok(()) => Vec::new(),
            Err(_) => state.fail_listen(self.key),
        };
        drop(state);
        // Nothing left in `sockets` unless memory ran out, and the failed
        // attempt's sockets: closed here, unlocked.
        drop(sockets);
        drop(failed);
        outcome.map(|()| Listen::Bound(endpoint))
    }

    /// The endpoint listened on.
    pub fn local(&self) -> Option<Endpoint> {
        let state = self.fabric.state.lock();
        state
            .listeners
            .get(self.key)
            .and_then(|l| l.listening)
            .map(|(_, endpoint)| endpoint)
    }

    /// Pauses (`true`) or resumes the delivery of requests (N5): while
    /// paused, requests are refused as though no listener existed.
    pub fn pause(&self, pause: bool) {
        if let Some(rec) = self.fabric.state.lock().listeners.get_mut(self.key) {
            rec.paused = pause;
        }
    }

    /// Closes the listener: requests are refused from now on (N6), its
    /// reference on the endpoint goes (N7). Pending while `incoming` calls
    /// are in flight; then `closed` follows.
    pub fn close(&self) -> CloseState {
        self.fabric
            .run(|state, _, actions| state.close_listener(self.key, actions))
    }
}

/// Ephemeral ports a wire listener tries before giving up when other
/// programs hold the TCP ports the fabric picks.
const WIRE_PORT_TRIES: usize = 16;

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// The endpoint of a platform socket address.
fn endpoint_of(addr: SocketAddr) -> Endpoint {
    let ip = match addr.ip() {
        core::net::IpAddr::V4(v4) => IpAddr::V4(v4.octets()),
        core::net::IpAddr::V6(v6) => IpAddr::V6(v6.octets()),
    };
    Endpoint::new(ip, addr.port())
}

/// The TCP sockets of one listen attempt over the wire and whose bind is
/// over (N3, L8): the platform may bind asynchronously (WSK), and the
/// Listen is answered once every socket is bound or one failed.
pub(super) struct BindWait {
    /// Each socket's endpoint, and whether its bind is over.
    sockets: Vec<(Endpoint, bool)>,
    /// The first failure.
    error: Option<CmError>,
    /// `start_listen` answered [`Listen::Binding`]: the outcome goes to
    /// [`ListenerEvents::listen_completed`].
    answered: bool,
}

impl BindWait {
    /// The attempt at `port` on `addresses`, nothing bound yet; `None`
    /// when memory ran out (the attempt is then answered as though every
    /// socket had been bound within the call, as before sockets could bind
    /// late).
    fn new(addresses: &[IpAddr], port: u16) -> Option<Self> {
        let mut sockets = Vec::new();
        sockets.try_reserve_exact(addresses.len()).ok()?;
        sockets.extend(addresses.iter().map(|&ip| (Endpoint::new(ip, port), false)));
        Some(Self {
            sockets,
            error: None,
            answered: false,
        })
    }

    /// Whether the Listen was answered "binding".
    pub(super) const fn answered(&self) -> bool {
        self.answered
    }

    /// The socket at `at` is bound or failed; `false` when it is not one of
    /// this attempt's still binding (a socket `wire::follow_address` added,
    /// or a late report).
    fn settle(&mut self, at: Endpoint, result: Result<(), CmError>) -> bool {
        let Some(entry) = self
            .sockets
            .iter_mut()
            .find(|(endpoint, done)| *endpoint == at && !*done)
        else {
            return false;
        };
        entry.1 = true;
        if let Err(error) = result {
            self.error.get_or_insert(error);
        }
        true
    }

    /// The attempt's outcome once every bind is over.
    fn outcome(&self) -> Option<Result<(), CmError>> {
        self.sockets
            .iter()
            .all(|&(_, done)| done)
            .then_some(self.error.map_or(Ok(()), Err))
    }
}

/// A wire listener's socket at `local` finished binding late (the platform's
/// [`AcceptEvents::bound`](crate::kernel::tcp::AcceptEvents::bound)): once
/// every socket of the attempt is over, the pending Listen completes (N3,
/// L8), through the listener's events after the lock (I4). A failure gives
/// the endpoint back and closes the attempt's sockets: the listener listens
/// on nothing, and may listen again.
pub(super) fn bound(fabric: &Arc<Fabric>, key: Key, local: Endpoint, result: Result<(), CmError>) {
    fabric.run(|state, _, actions| state.bind_done(key, local, result, actions));
}

impl State {
    fn bind_done(
        &mut self,
        key: Key,
        local: Endpoint,
        result: Result<(), CmError>,
        actions: &mut Actions,
    ) {
        let Some(rec) = self.listeners.get_mut(key) else {
            return;
        };
        let Some(wait) = rec.bind_wait.as_mut() else {
            // Closed (its Listen completed cancelled), or not binding.
            return;
        };
        if !wait.settle(local, result) || !wait.answered {
            // Not this attempt's, or `start_listen` still runs: it answers.
            return;
        }
        let Some(outcome) = wait.outcome() else {
            return;
        };
        rec.bind_wait = None;
        rec.callouts = rec.callouts.saturating_add(1);
        actions.push(Action::ListenCompleted {
            events: Arc::clone(&rec.events),
            listener: key,
            result: outcome,
        });
        if outcome.is_err() {
            let sockets = self.fail_listen(key);
            if !sockets.is_empty() {
                actions.push(Action::Wire(WireOp::Unlisten(sockets)));
            }
        }
    }

    /// A listen attempt failed: the listener gives its endpoint back and
    /// its sockets (returned, to close after the lock).
    fn fail_listen(&mut self, key: Key) -> Vec<Box<dyn Listening>> {
        let sockets = self
            .listeners
            .get_mut(key)
            .map(|rec| {
                rec.bind_wait = None;
                core::mem::take(&mut rec.sockets)
            })
            .unwrap_or_default();
        self.unlisten(key);
        sockets
    }
}
