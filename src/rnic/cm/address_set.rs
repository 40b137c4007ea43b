//! Address sets: the addresses of one adapter registered on the fabric as
//! owned by its device (N1, N32), given back when the last set drops.

use alloc::vec::Vec;
use core::fmt;

use super::address::IpAddr;
use super::fabric::Fabric;
use super::state::node_of_device;
use super::types::CmError;
use super::wire;
use crate::kernel::sync::Arc;
use crate::rnic::device::Device;
use crate::rnic::types::Limits;

struct Registration {
    fabric: Arc<Fabric>,
    device: Arc<Device>,
    addresses: Vec<IpAddr>,
}

/// The local addresses of an adapter, registered on the fabric as owned by
/// its device (N1). Every opening of one device shares its addresses (N32).
/// Dropping the set gives the registration back; an address is free for
/// another device once no set of its device holds it.
#[derive(Default)]
pub struct AddressSet {
    registration: Option<Registration>,
}

impl fmt::Debug for AddressSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.addresses()).finish()
    }
}

impl AddressSet {
    /// Registers `addresses` as owned by `device` on `fabric`. An address
    /// the device already owns is shared.
    ///
    /// # Errors
    /// [`CmError::InvalidAddress`] for a wildcard address,
    /// [`CmError::AddressInUse`] for an address another device owns,
    /// [`CmError::Resources`].
    pub fn register(
        fabric: &Arc<Fabric>,
        device: &Arc<Device>,
        addresses: &[IpAddr],
    ) -> Result<Self, CmError> {
        let mut list = Vec::new();
        list.try_reserve_exact(addresses.len())
            .map_err(|_| CmError::Resources)?;
        for &ip in addresses {
            if ip.is_unspecified() {
                return Err(CmError::InvalidAddress);
            }
            if !list.contains(&ip) {
                list.push(ip);
            }
        }
        fabric.state.lock().register(device, &list)?;
        Ok(Self {
            registration: Some(Registration {
                fabric: Arc::clone(fabric),
                device: Arc::clone(device),
                addresses: list,
            }),
        })
    }

    /// Another set with the same registration.
    ///
    /// # Errors
    /// [`CmError::Resources`].
    pub fn try_clone(&self) -> Result<Self, CmError> {
        let Some(reg) = &self.registration else {
            return Ok(Self::default());
        };
        let mut list = Vec::new();
        list.try_reserve_exact(reg.addresses.len())
            .map_err(|_| CmError::Resources)?;
        list.extend_from_slice(&reg.addresses);
        reg.fabric
            .state
            .lock()
            .retain(node_of_device(&reg.device), &list);
        Ok(Self {
            registration: Some(Registration {
                fabric: Arc::clone(&reg.fabric),
                device: Arc::clone(&reg.device),
                addresses: list,
            }),
        })
    }

    /// Adds `ip` to the set after registration (an address the interface
    /// gained): from now on the device owns it, for every opening of the
    /// device (N1, N32). Returns whether it was new to this set.
    ///
    /// # Errors
    /// [`CmError::InvalidAddress`] for a wildcard address,
    /// [`CmError::AddressInUse`] for an address another device owns,
    /// [`CmError::InvalidParameter`] for an empty, detached set,
    /// [`CmError::Resources`].
    pub fn add(&mut self, ip: IpAddr) -> Result<bool, CmError> {
        if ip.is_unspecified() {
            return Err(CmError::InvalidAddress);
        }
        let reg = self
            .registration
            .as_mut()
            .ok_or(CmError::InvalidParameter)?;
        if reg.addresses.contains(&ip) {
            return Ok(false);
        }
        reg.addresses
            .try_reserve(1)
            .map_err(|_| CmError::Resources)?;
        let node = node_of_device(&reg.device);
        let fresh = reg.fabric.state.lock().add_address(node, ip)?;
        reg.addresses.push(ip);
        if fresh {
            // Over the wire, the device's wildcard listeners of the family
            // listen on the new address too (N31).
            wire::follow_address(&reg.fabric, node, ip);
        }
        Ok(true)
    }

    /// Removes `ip` from the set (an address the interface lost); returns
    /// whether the set held it. Once no set of the device holds it, the
    /// device no longer owns it, and another device may take it.
    ///
    /// What stays and what changes, for the bindings of the device:
    ///
    /// * New `Listen`, `Connect` and shared endpoints on `ip` fail with
    ///   [`CmError::InvalidAddress`] (N3), as do connections made through a
    ///   shared endpoint bound to it.
    /// * Listeners and shared endpoints already bound to `ip` stay bound
    ///   (their port stays theirs, N7) but no request reaches them, since a
    ///   connection request is routed to the device owning its destination
    ///   (a request to `ip` fails as for any unowned address).
    /// * Established connections through `ip` are left as they are: the
    ///   emulated fabric does not route by address, so they carry on until
    ///   their owners disconnect them.
    /// * Wildcard listeners keep listening on the device's other addresses.
    /// * When `ip` comes back to the same device, its listeners receive
    ///   requests again; nothing else about it changes.
    pub fn remove(&mut self, ip: IpAddr) -> bool {
        let Some(reg) = self.registration.as_mut() else {
            return false;
        };
        let Some(n) = reg.addresses.iter().position(|&a| a == ip) else {
            return false;
        };
        reg.addresses.swap_remove(n);
        reg.fabric
            .state
            .lock()
            .drop_address(node_of_device(&reg.device), ip);
        true
    }

    /// The addresses.
    pub fn addresses(&self) -> &[IpAddr] {
        self.registration
            .as_ref()
            .map_or(&[], |r| r.addresses.as_slice())
    }

    /// Whether `ip` is one of them.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.addresses().contains(&ip)
    }

    /// The device that owns them (`None` for an empty, detached set).
    pub fn device(&self) -> Option<&Arc<Device>> {
        self.registration.as_ref().map(|r| &r.device)
    }

    /// The fabric they are registered on.
    pub fn fabric(&self) -> Option<&Arc<Fabric>> {
        self.registration.as_ref().map(|r| &r.fabric)
    }

    pub(super) fn parts(&self) -> Result<(&Arc<Fabric>, usize, Limits), CmError> {
        let reg = self
            .registration
            .as_ref()
            .ok_or(CmError::InvalidParameter)?;
        Ok((
            &reg.fabric,
            node_of_device(&reg.device),
            reg.fabric.limits(&reg.device),
        ))
    }

    /// The limits connections through this set honour
    /// ([`Fabric::limits`]: on the wire, MPA's); `None` when detached.
    pub fn limits(&self) -> Option<Limits> {
        self.parts().ok().map(|(_, _, limits)| limits)
    }

    /// Whether the set's device reaches its peers over the wire (iWARP).
    pub fn on_wire(&self) -> bool {
        self.registration
            .as_ref()
            .is_some_and(|reg| reg.fabric.on_wire(&reg.device))
    }
}

impl Drop for AddressSet {
    fn drop(&mut self) {
        if let Some(reg) = self.registration.take() {
            reg.fabric
                .state
                .lock()
                .unregister(node_of_device(&reg.device), &reg.addresses);
        }
    }
}
