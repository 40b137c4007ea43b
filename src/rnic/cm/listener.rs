//! Listeners (N3–N7, N31): the handle of a listening endpoint that turns
//! connection requests into passive connectors.

use alloc::vec::Vec;
use core::fmt;

use super::address::Endpoint;
use super::address_set::AddressSet;
use super::fabric::Fabric;
use super::slab::Key;
use super::state::ListenerRec;
use super::types::{CloseState, CmError, ListenerEvents};
use super::wire;
use crate::kernel::sync::Arc;

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
        })?;
        Ok(Self {
            fabric: Arc::clone(fabric),
            key,
        })
    }

    /// Starts listening on `local` (N3): an address of the device or the
    /// family's wildcard (N31), port 0 for an ephemeral port. Returns the
    /// endpoint bound.
    ///
    /// # Errors
    /// [`CmError::AddressInUse`], [`CmError::InvalidAddress`],
    /// [`CmError::TooManyAddresses`], [`CmError::Resources`] (N3);
    /// [`CmError::InvalidState`] when already listening or closed.
    pub fn listen(&self, local: Endpoint) -> Result<Endpoint, CmError> {
        let plan = self.fabric.state.lock().wire_listen_plan(self.key, local)?;
        let Some((wire, addresses)) = plan else {
            return self.fabric.state.lock().listen(self.key, local);
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
                if let Some(rec) = state.listeners.get_mut(self.key) {
                    rec.accepted = Some(Arc::clone(&sink));
                }
                endpoint
            };
            match wire::listen_sockets(&wire, &sink, &addresses, endpoint.port) {
                Ok(mut sockets) => {
                    let mut state = self.fabric.state.lock();
                    if let Some(rec) = state.listeners.get_mut(self.key)
                        && !rec.closing
                    {
                        // An address added meanwhile may have its socket
                        // already (`wire::follow_address`).
                        if rec.sockets.is_empty() {
                            rec.sockets = core::mem::take(&mut sockets);
                        } else if rec.sockets.try_reserve(sockets.len()).is_ok() {
                            rec.sockets.append(&mut sockets);
                        }
                        drop(state);
                        // Nothing left, unless memory ran out: then close
                        // these here, unlocked.
                        drop(sockets);
                        return Ok(endpoint);
                    }
                    drop(state);
                    // Closed meanwhile: the sockets close here, unlocked.
                    drop(sockets);
                    return Err(CmError::InvalidState);
                }
                Err(error) => {
                    self.fabric.state.lock().unlisten(self.key);
                    if !(error == CmError::AddressInUse && local.port == 0) {
                        return Err(error);
                    }
                }
            }
        }
        Err(CmError::AddressInUse)
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
