//! Shared endpoints (N9–N11): one local address and port for many
//! connections whose destinations differ.

use super::address::Endpoint;
use super::address_set::AddressSet;
use super::fabric::Fabric;
use super::state::BindingRef;
use super::types::CmError;
use crate::kernel::sync::Arc;
use crate::kernel::sync::atomic::{AtomicBool, Ordering};

/// A shared endpoint (N9–N11): a local address and port that many
/// connections may share as long as their destinations differ. Dropping it
/// closes it.
#[derive(Debug)]
pub struct SharedEndpoint {
    pub(super) fabric: Arc<Fabric>,
    pub(super) node: usize,
    pub(super) binding: BindingRef,
    pub(super) local: Endpoint,
    pub(super) open: AtomicBool,
}

impl SharedEndpoint {
    /// Claims `local` on the device of `set` (port 0: an ephemeral one; a
    /// wildcard address: the device's first address of the family).
    ///
    /// # Errors
    /// As `listen` (N9): [`CmError::InvalidAddress`],
    /// [`CmError::AddressInUse`], [`CmError::TooManyAddresses`],
    /// [`CmError::Resources`]; [`CmError::InvalidParameter`] for a detached
    /// set.
    pub fn new(set: &AddressSet, local: Endpoint) -> Result<Self, CmError> {
        let (fabric, node, _) = set.parts()?;
        let mut state = fabric.state.lock();
        let ip = state.local_ip(node, local.ip, true, None)?;
        let binding = state.bind(node, ip, local.port)?;
        if let Some(b) = state.binding_mut(binding) {
            b.shared = true;
        }
        drop(state);
        Ok(Self {
            fabric: Arc::clone(fabric),
            node,
            binding,
            local: Endpoint::new(ip, binding.port),
            open: AtomicBool::new(true),
        })
    }

    /// The claimed address and port (N9).
    pub const fn local(&self) -> Endpoint {
        self.local
    }

    /// Drops the endpoint's own reference (N10): the address and port stay
    /// in use while connectors connected through it remain.
    pub fn close(&self) {
        if self.open.swap(false, Ordering::AcqRel) {
            self.fabric.state.lock().unbind(self.binding);
        }
    }
}

impl Drop for SharedEndpoint {
    fn drop(&mut self) {
        self.close();
    }
}
