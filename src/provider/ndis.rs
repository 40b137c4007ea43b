//! The provider as the miniport sees it: [`NdkProvider`] over one emulated
//! NIC, for the driver's open / close NDK adapter handlers and NDK OIDs.
//!
//! Every miniport adapter gets one [`Provider`] over its own [`Device`]; all
//! of them share the driver instance's [`Fabric`], so QPs of different
//! miniport adapters can connect to each other.
//!
//! **Addresses.** The provider's connection layer names local endpoints by IP
//! address, and the interface's addresses belong to the TCP/IP stack. The
//! driver learns them (`driver::addresses`, from `netio.sys`) and keeps an
//! [`InterfaceAddresses`] per miniport adapter current: it registers them on
//! the fabric as owned by the adapter's device, so every adapter opened on
//! the device — before or after an address comes — listens, connects and
//! shares endpoints on exactly the interface's current addresses (and on
//! the wildcard), as host mode does on its one address. An address that
//! leaves is handled as `rnic::cm::AddressSet::remove` documents.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use core::ptr::NonNull;

use super::adapter;
use super::iface::{Connection, LocalEndpoint, NdkProvider, counters_from_device};
use super::object::Slot;
use crate::abi::STATUS_INSUFFICIENT_RESOURCES;
use crate::abi::{NdisNdkPerformanceCounters, NdkAdapter, NdkAdapterInfo, NdkVersion, NtStatus};
use crate::kernel::sync::{Arc, SpinLock};
use crate::kernel::tcp::Net;
use crate::rnic::cm::{
    AddressSet, ConnTimeouts, ConnectionInfo, Endpoint, Fabric, IpAddr, LocalEndpointInfo, Wire,
};
use crate::rnic::device::Device;

/// The fabric of this driver instance (created at the first provider).
static FABRIC: SpinLock<Option<Arc<Fabric>>> = SpinLock::new(None);

fn fabric() -> Arc<Fabric> {
    let mut slot = FABRIC.lock();
    Arc::clone(slot.get_or_insert_with(Fabric::new))
}

/// The current addresses of one miniport adapter's interface, registered on
/// the driver's fabric as owned by its device (N1, N32). Each opening of
/// the device sees them as they are at the time of each call.
pub struct InterfaceAddresses {
    set: SpinLock<AddressSet>,
}

impl InterfaceAddresses {
    /// No addresses yet, for `device`.
    ///
    /// # Errors
    /// `STATUS_INSUFFICIENT_RESOURCES`.
    pub fn new(device: &Arc<Device>) -> Result<Self, NtStatus> {
        let set = AddressSet::register(&fabric(), device, &[]).map_err(super::cm::status)?;
        Ok(Self {
            set: SpinLock::new(set),
        })
    }

    /// The interface gained `ip`; returns whether it was new.
    ///
    /// # Errors
    /// `STATUS_INVALID_ADDRESS` (a wildcard), `STATUS_SHARING_VIOLATION`
    /// (another miniport adapter's interface owns it),
    /// `STATUS_INSUFFICIENT_RESOURCES`.
    pub fn add(&self, ip: IpAddr) -> Result<bool, NtStatus> {
        self.set.lock().add(ip).map_err(super::cm::status)
    }

    /// The interface lost `ip`; returns whether it had it.
    pub fn remove(&self, ip: IpAddr) -> bool {
        self.set.lock().remove(ip)
    }

    /// Whether the interface has `ip`.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.set.lock().contains(ip)
    }

    /// How many addresses it has.
    pub fn len(&self) -> usize {
        self.set.lock().addresses().len()
    }

    /// Whether it has none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes every address (halt).
    pub fn clear(&self) {
        let mut set = self.set.lock();
        while let Some(&ip) = set.addresses().first() {
            set.remove(ip);
        }
    }
}

/// The device that owns `ip` on the driver's fabric, if any.
pub fn device_of(ip: IpAddr) -> Option<Arc<Device>> {
    fabric().device_of(ip)
}

/// Entries read on the stack per OID; more are read into one allocation
/// of the size the fabric reported (the OID runs at PASSIVE_LEVEL on the
/// control path).
const BATCH: usize = 32;

/// Room for entries added between the count and the second read.
const SLACK: usize = 8;

/// Every entry `read` reports: first into a stack batch; when the fabric
/// has more than [`BATCH`], again into one vector of that size (plus
/// [`SLACK`]), then `each` for each. Without memory for the vector the
/// first [`BATCH`] entries are reported (logged). Bounded: two reads, and
/// at most as many entries as the fabric has.
fn each_entry<T: Copy>(blank: T, read: impl Fn(&mut [T]) -> usize, mut each: impl FnMut(&T)) {
    let mut batch = [blank; BATCH];
    let total = read(&mut batch);
    if total <= BATCH {
        batch.iter().take(total).for_each(&mut each);
        return;
    }
    let mut all = Vec::new();
    let len = total.saturating_add(SLACK);
    if all.try_reserve_exact(len).is_err() {
        crate::klog!(
            crate::kernel::log::Level::Warning,
            "NDK OID: no memory for {} entries, reporting {}",
            total,
            BATCH
        );
        batch.iter().for_each(&mut each);
        return;
    }
    all.resize(len, blank);
    let n = read(&mut all).min(len);
    all.iter().take(n).for_each(&mut each);
}

/// The NDK provider of one miniport adapter.
pub struct Provider {
    device: Arc<Device>,
    fabric: Arc<Fabric>,
    /// Adapters opened and not yet closed (for `close_all`, A15).
    open: SpinLock<Vec<usize>>,
    /// Keeps the device's node (and so its wire) on the fabric.
    node: AddressSet,
}

/// The driver's iWARP transport: the kernel's TCP (WSK, `kernel::wsk::WskNet`)
/// that the miniport sets once it has registered with WSK. Providers made
/// while it is set open their NIC on the wire (iWARP over TCP); without it
/// the NIC reaches only the other NICs of this driver instance.
static WIRE_NET: SpinLock<Option<Arc<dyn Net>>> = SpinLock::new(None);

/// Sets (or clears) the transport later providers open their NIC on.
pub fn set_wire_net(net: Option<Arc<dyn Net>>) {
    *WIRE_NET.lock() = net;
}

/// The [`ProviderFactory`](super::iface::ProviderFactory) of SoftNDK: the
/// NIC is on the wire set with [`set_wire_net`], if any.
///
/// # Errors
/// `STATUS_INSUFFICIENT_RESOURCES` when memory runs out.
pub fn factory(device: &Arc<Device>) -> Result<Box<dyn NdkProvider>, NtStatus> {
    let net = WIRE_NET.lock().clone();
    factory_on(device, net)
}

/// The provider of `device`, its NIC on the iWARP transport over `net`
/// (with the default time-outs), or on the driver's fabric only (`None`).
///
/// # Errors
/// `STATUS_INSUFFICIENT_RESOURCES` when memory runs out.
pub fn factory_on(
    device: &Arc<Device>,
    net: Option<Arc<dyn Net>>,
) -> Result<Box<dyn NdkProvider>, NtStatus> {
    let fabric = fabric();
    let node = AddressSet::register(&fabric, device, &[]).map_err(super::cm::status)?;
    if let Some(net) = net {
        fabric
            .attach_wire(
                device,
                Wire {
                    net,
                    timeouts: ConnTimeouts::default(),
                },
            )
            .map_err(super::cm::status)?;
    }
    let provider = Provider {
        device: Arc::clone(device),
        fabric,
        open: SpinLock::new(Vec::new()),
        node,
    };
    let boxed = crate::kernel::mem::try_box(provider).ok_or(STATUS_INSUFFICIENT_RESOURCES)?;
    Ok(boxed as Box<dyn NdkProvider>)
}

fn socket(endpoint: Endpoint) -> SocketAddr {
    match endpoint.ip {
        IpAddr::V4(b) => SocketAddr::new(Ipv4Addr::from(b).into(), endpoint.port),
        IpAddr::V6(b) => SocketAddr::new(Ipv6Addr::from(b).into(), endpoint.port),
    }
}

// SAFETY:
// - `open_adapter` returns the pointer of an adapter object created by
//   `adapter::open`, valid until `adapter::close` for it has returned;
// - adapters are closed only by `close_adapter` and `close_all`, each once
//   (the `open` list hands each pointer out for closing once).
unsafe impl NdkProvider for Provider {
    fn open_adapter(&self, version: NdkVersion) -> Result<NonNull<NdkAdapter>, NtStatus> {
        let mut open = self.open.lock();
        open.try_reserve(1)
            .map_err(|_| STATUS_INSUFFICIENT_RESOURCES)?;
        let addresses =
            AddressSet::register(&self.fabric, &self.device, &[]).map_err(super::cm::status)?;
        let ptr = adapter::open(&self.device, version, addresses)?;
        let ptr = NonNull::new(ptr).ok_or(STATUS_INSUFFICIENT_RESOURCES)?;
        open.push(ptr.as_ptr() as usize);
        Ok(ptr)
    }

    fn close_adapter(&self, adapter: NonNull<NdkAdapter>) {
        let known = {
            let mut open = self.open.lock();
            let at = open.iter().position(|&p| p == adapter.as_ptr() as usize);
            at.map(|at| open.swap_remove(at))
        };
        if known.is_some() {
            // SAFETY: an adapter this provider opened and has not closed
            // (just taken off the open list, so closed exactly once).
            let _ = unsafe { adapter::close(adapter.as_ptr(), &Slot("CloseNdkAdapter")) };
        }
    }

    fn adapter_info(&self) -> NdkAdapterInfo {
        adapter::info(&self.device, adapter::HIGHEST_VERSION, self.node.on_wire())
    }

    fn statistics(&self) -> NdisNdkPerformanceCounters {
        counters_from_device(&self.device.counters)
    }

    fn connections(&self, out: &mut dyn FnMut(&Connection)) {
        let blank = ConnectionInfo {
            local: Endpoint::new(IpAddr::V4([0; 4]), 0),
            remote: Endpoint::new(IpAddr::V4([0; 4]), 0),
        };
        let pairs = self.node.on_wire();
        let read = |batch: &mut [ConnectionInfo]| self.fabric.connections(&self.device, batch);
        each_entry(blank, read, |info| {
            let nd = Connection {
                local: socket(info.local),
                remote: socket(info.remote),
                user_mode_owner: false,
                owner_pid: 0,
            };
            out(&nd);
            if pairs {
                // A21: the TCP connection under it. Over the wire the ND
                // port is the TCP port (N30) and the addresses are the
                // same, so its addressing is the ND entry's; the other
                // members stay untouched (zero).
                out(&Connection {
                    local: nd.local,
                    remote: nd.remote,
                    user_mode_owner: false,
                    owner_pid: 0,
                });
            }
        });
    }

    fn local_endpoints(&self, out: &mut dyn FnMut(&LocalEndpoint)) {
        let blank = LocalEndpointInfo {
            local: Endpoint::new(IpAddr::V4([0; 4]), 0),
            listener: false,
        };
        let pairs = self.node.on_wire();
        let read =
            |batch: &mut [LocalEndpointInfo]| self.fabric.local_endpoints(&self.device, batch);
        each_entry(blank, read, |info| {
            out(&LocalEndpoint {
                local: socket(info.local),
                user_mode_owner: false,
                listener: info.listener,
                owner_pid: 0,
            });
            if pairs {
                // A21: the TCP endpoint (same address and port, N30); the
                // other members stay untouched (zero).
                out(&LocalEndpoint {
                    local: socket(info.local),
                    user_mode_owner: false,
                    listener: false,
                    owner_pid: 0,
                });
            }
        });
    }

    fn close_all(&self) {
        // A15: connections end first, so that consumers, told by their
        // disconnect indications, close the objects they own; each adapter
        // close below then returns once its objects are closed (L27).
        self.fabric.abort_all(&self.device);
        loop {
            let next = self.open.lock().pop();
            let Some(ptr) = next else { break };
            // SAFETY: an adapter this provider opened, taken off the open
            // list, so closed exactly once.
            let _ = unsafe { adapter::close(ptr as *mut NdkAdapter, &Slot("CloseNdkAdapter")) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{NDK_VERSION_1_2, NdkObjectType};
    use crate::rnic::Limits;
    use crate::rnic::device::EngineMode;

    #[test]
    fn test_driver_provider_opens_closes_and_reports_the_device() {
        let device = Device::new(Limits::DEFAULT, EngineMode::Inline).unwrap();
        let provider = factory(&device).unwrap();
        let adapter = provider.open_adapter(NDK_VERSION_1_2).unwrap();
        // SAFETY: a live adapter just opened.
        let header = unsafe { adapter.as_ref() }.header;
        assert_eq!(header.version, NDK_VERSION_1_2);
        assert_eq!(header.object_type, NdkObjectType::ADAPTER);
        assert_eq!(
            provider.adapter_info().max_cq_depth,
            device.limits().max_cq_depth
        );
        // Not on the wire: the fabric's technology and limits.
        let info = provider.adapter_info();
        assert_eq!(info.rdma_technology, super::super::iface::FABRIC_TECHNOLOGY);
        assert_eq!(info.max_caller_data, device.limits().max_caller_data);
        let mut connections = 0;
        provider.connections(&mut |_| connections += 1);
        assert_eq!(connections, 0);
        provider.close_adapter(adapter);
        // A second open, then close_all tears it down.
        let _second = provider.open_adapter(NDK_VERSION_1_2).unwrap();
        provider.close_all();
        provider.close_all();
        // Closed adapters are forgotten: closing one again is ignored.
        provider.close_adapter(adapter);
    }
}
