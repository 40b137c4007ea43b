//! Addresses and bindings: a device's addresses on the fabric (N1, N31,
//! N32), local endpoints and ports (N3, N7–N11, N30), four-tuples (N11), and
//! the QPs tied to connectors.

use alloc::vec::Vec;

use super::EPHEMERAL_FIRST;
use super::address::{Endpoint, Family, IpAddr};
use super::slab::Key;
use super::state::{
    Address, Binding, BindingRef, EPHEMERAL_SPAN, Node, State, node_of_device, qp_key,
};
use super::types::CmError;
use crate::kernel::sync::Arc;
use crate::rnic::device::Device;
use crate::rnic::qp::{Qp, QpState};

impl State {
    // ----- addresses -------------------------------------------------------

    pub(super) fn owner(&self, ip: IpAddr) -> Option<usize> {
        self.addresses.iter().find(|a| a.ip == ip).map(|a| a.node)
    }

    fn owns(&self, node: usize, ip: IpAddr) -> bool {
        self.owner(ip) == Some(node)
    }

    pub(super) fn register(&mut self, device: &Arc<Device>, ips: &[IpAddr]) -> Result<(), CmError> {
        let node = node_of_device(device);
        if ips
            .iter()
            .any(|&ip| self.owner(ip).is_some_and(|owner| owner != node))
        {
            return Err(CmError::AddressInUse);
        }
        self.nodes.try_reserve(1).map_err(|_| CmError::Resources)?;
        self.addresses
            .try_reserve(ips.len())
            .map_err(|_| CmError::Resources)?;
        match self.nodes.iter_mut().find(|n| n.key == node) {
            Some(entry) => entry.refs += 1,
            None => self.nodes.push(Node {
                key: node,
                device: Arc::downgrade(device),
                refs: 1,
                wire: None,
            }),
        }
        for &ip in ips {
            match self.addresses.iter_mut().find(|a| a.ip == ip) {
                Some(entry) => entry.refs += 1,
                None => self.addresses.push(Address { ip, node, refs: 1 }),
            }
        }
        Ok(())
    }

    pub(super) fn retain(&mut self, node: usize, ips: &[IpAddr]) {
        if let Some(entry) = self.nodes.iter_mut().find(|n| n.key == node) {
            entry.refs += 1;
        }
        for &ip in ips {
            if let Some(entry) = self.addresses.iter_mut().find(|a| a.ip == ip) {
                entry.refs += 1;
            }
        }
    }

    pub(super) fn unregister(&mut self, node: usize, ips: &[IpAddr]) {
        for &ip in ips {
            self.drop_address(node, ip);
        }
        if let Some(n) = self.nodes.iter().position(|e| e.key == node)
            && let Some(entry) = self.nodes.get_mut(n)
        {
            entry.refs = entry.refs.saturating_sub(1);
            if entry.refs == 0 {
                // PANIC: `n` was just found by `position`.
                self.nodes.swap_remove(n);
            }
        }
    }

    /// One more reference on `ip` for `node`, whose node entry a set
    /// already holds: refused when another device owns it (N1).
    /// Adds a reference of `node` on `ip`; `true` when the node did not own
    /// it before.
    pub(super) fn add_address(&mut self, node: usize, ip: IpAddr) -> Result<bool, CmError> {
        if self.owner(ip).is_some_and(|owner| owner != node) {
            return Err(CmError::AddressInUse);
        }
        if let Some(entry) = self.addresses.iter_mut().find(|a| a.ip == ip) {
            entry.refs += 1;
            return Ok(false);
        }
        self.addresses
            .try_reserve(1)
            .map_err(|_| CmError::Resources)?;
        self.addresses.push(Address { ip, node, refs: 1 });
        Ok(true)
    }

    /// Drops one reference of `node` on `ip`; the last one gives the
    /// address back. Bindings on it stay (see `AddressSet::remove`).
    pub(super) fn drop_address(&mut self, node: usize, ip: IpAddr) {
        if let Some(n) = self
            .addresses
            .iter()
            .position(|a| a.ip == ip && a.node == node)
            && let Some(entry) = self.addresses.get_mut(n)
        {
            entry.refs = entry.refs.saturating_sub(1);
            if entry.refs == 0 {
                // PANIC: `n` was just found by `position`.
                self.addresses.swap_remove(n);
            }
        }
    }

    /// A local address of `node` for a connection to `dst`: `dst` itself
    /// when the node owns it (loopback, N27), else its first address of the
    /// family.
    fn pick_local(&self, node: usize, family: Family, dst: Option<IpAddr>) -> Option<IpAddr> {
        if let Some(dst) = dst
            && self.owns(node, dst)
        {
            return Some(dst);
        }
        self.addresses
            .iter()
            .find(|a| a.node == node && a.ip.family() == family)
            .map(|a| a.ip)
    }

    /// The address a local endpoint names: a wildcard becomes the node's
    /// address of the family (`dst` preferred) when `resolve` is set; a
    /// specific one must be the node's (N3, N9, N12).
    pub(super) fn local_ip(
        &self,
        node: usize,
        ip: IpAddr,
        resolve: bool,
        dst: Option<IpAddr>,
    ) -> Result<IpAddr, CmError> {
        if ip.is_unspecified() {
            if resolve {
                self.pick_local(node, ip.family(), dst)
                    .ok_or(CmError::InvalidAddress)
            } else {
                Ok(ip)
            }
        } else if self.owns(node, ip) {
            Ok(ip)
        } else {
            Err(CmError::InvalidAddress)
        }
    }

    // ----- bindings --------------------------------------------------------

    pub(super) fn port_range(&self, port: u16) -> core::ops::Range<usize> {
        let start = self.bindings.partition_point(|b| b.port < port);
        let end = self.bindings.partition_point(|b| b.port <= port);
        start..end
    }

    fn conflicts(&self, node: usize, ip: IpAddr, port: u16) -> bool {
        self.bindings
            .get(self.port_range(port))
            .is_some_and(|found| found.iter().any(|b| b.overlaps(node, ip)))
    }

    pub(super) fn binding(&self, r: BindingRef) -> Option<&Binding> {
        self.bindings
            .get(self.port_range(r.port))?
            .iter()
            .find(|b| b.id == r.id)
    }

    pub(super) fn binding_mut(&mut self, r: BindingRef) -> Option<&mut Binding> {
        let range = self.port_range(r.port);
        self.bindings
            .get_mut(range)?
            .iter_mut()
            .find(|b| b.id == r.id)
    }

    fn pick_port(&mut self, node: usize, ip: IpAddr) -> Result<u16, CmError> {
        for n in 0..EPHEMERAL_SPAN {
            let offset = (self.next_port + n) % EPHEMERAL_SPAN;
            let port = u16::try_from(u32::from(EPHEMERAL_FIRST) + offset)
                .map_err(|_| CmError::TooManyAddresses)?;
            if !self.conflicts(node, ip, port) {
                self.next_port = (offset + 1) % EPHEMERAL_SPAN;
                return Ok(port);
            }
        }
        Err(CmError::TooManyAddresses)
    }

    /// Claims `ip`:`port` on `node` (port 0: an ephemeral one) with one
    /// reference.
    pub(super) fn bind(
        &mut self,
        node: usize,
        ip: IpAddr,
        port: u16,
    ) -> Result<BindingRef, CmError> {
        let port = if port == 0 {
            self.pick_port(node, ip)?
        } else if self.conflicts(node, ip, port) {
            return Err(CmError::AddressInUse);
        } else {
            port
        };
        self.bindings
            .try_reserve(1)
            .map_err(|_| CmError::Resources)?;
        let id = self.next_binding;
        self.next_binding += 1;
        let at = self.bindings.partition_point(|b| b.port <= port);
        // PANIC: `partition_point` returns at most the length.
        self.bindings.insert(
            at,
            Binding {
                id,
                node,
                ip,
                port,
                refs: 1,
                listener: None,
                conns: Vec::new(),
                shared: false,
            },
        );
        Ok(BindingRef { port, id })
    }

    pub(super) fn add_ref(&mut self, r: BindingRef) -> bool {
        match self.binding_mut(r) {
            Some(b) => {
                b.refs += 1;
                true
            }
            None => false,
        }
    }

    /// Drops one reference; the last frees the address and port (N7, N10).
    pub(super) fn unbind(&mut self, r: BindingRef) {
        let range = self.port_range(r.port);
        let Some(found) = self.bindings.get_mut(range.clone()) else {
            return;
        };
        let Some(n) = found.iter().position(|b| b.id == r.id) else {
            return;
        };
        let Some(binding) = found.get_mut(n) else {
            return;
        };
        binding.refs = binding.refs.saturating_sub(1);
        if binding.refs == 0 {
            // PANIC: `n` indexes the sub-slice that starts at `range.start`.
            self.bindings.remove(range.start + n);
        }
    }

    /// The listener that a request to `ip`:`port` on `node` reaches: one on
    /// that address or on the family's wildcard (N31).
    pub(super) fn find_listener(&self, node: usize, ip: IpAddr, port: u16) -> Option<Key> {
        self.bindings
            .get(self.port_range(port))?
            .iter()
            .find(|b| b.listener.is_some() && b.overlaps(node, ip))
            .and_then(|b| b.listener)
    }

    pub(super) fn has_tuple(&self, r: BindingRef, local: IpAddr, remote: Endpoint) -> bool {
        self.binding(r)
            .is_some_and(|b| b.conns.contains(&(local, remote)))
    }

    pub(super) fn reserve_tuple(&mut self, r: BindingRef) -> Result<(), CmError> {
        self.binding_mut(r)
            .ok_or(CmError::InvalidParameter)?
            .conns
            .try_reserve(1)
            .map_err(|_| CmError::Resources)
    }

    /// Registers a four-tuple; room was reserved with `reserve_tuple`.
    pub(super) fn add_tuple(&mut self, r: BindingRef, local: IpAddr, remote: Endpoint) {
        if let Some(b) = self.binding_mut(r) {
            b.conns.push((local, remote));
        }
    }

    pub(super) fn remove_tuple(&mut self, tuple: Option<(BindingRef, IpAddr, Endpoint)>) {
        if let Some((r, local, remote)) = tuple
            && let Some(b) = self.binding_mut(r)
            && let Some(n) = b.conns.iter().position(|c| *c == (local, remote))
        {
            // PANIC: `n` was just found by `position`.
            b.conns.swap_remove(n);
        }
    }

    // ----- QPs -------------------------------------------------------------

    /// Checks that `qp` may be tied to a connector of `node`: same device,
    /// idle (X5, N14), not tied to another connector.
    pub(super) fn check_qp(&self, node: usize, qp: &Arc<Qp>) -> Result<(), CmError> {
        if node_of_device(qp.device()) != node {
            return Err(CmError::InvalidParameter);
        }
        if qp.state() != QpState::Idle || self.bound_qps.contains(&qp_key(qp)) {
            return Err(CmError::ConnectionInvalid);
        }
        Ok(())
    }

    pub(super) fn unbind_qp(&mut self, qp: Option<&Arc<Qp>>) {
        if let Some(qp) = qp
            && let Some(n) = self.bound_qps.iter().position(|&k| k == qp_key(qp))
        {
            // PANIC: `n` was just found by `position`.
            self.bound_qps.swap_remove(n);
        }
    }
}
