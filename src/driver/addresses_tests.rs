//! Host tests of the address tracker, and of the NDIS path on it: adapters
//! opened as NDIS opens them, over `provider::ndis`, listening and
//! connecting on the interface's addresses. Every test uses its own
//! addresses (127.7.T.x, fd00::7:T:x), since the NDIS provider's fabric is
//! shared by the whole process.

use core::ffi::c_void;
use core::ptr::{null, null_mut};
use std::sync::Mutex;

use super::*;
use crate::abi::{
    IP_DAD_STATE_DUPLICATE, IP_DAD_STATE_TENTATIVE, In6Addr, InAddr, MIB_ADD_INSTANCE,
    MIB_INITIAL_NOTIFICATION, MIB_PARAMETER_NOTIFICATION, NDK_VERSION_1_2, NdkAdapter,
    NdkAdapterDispatch, NdkConnector, NdkConnectorDispatch, NdkCq, NdkFnCloseObject, NdkListener,
    NdkListenerDispatch, NdkPd, NdkQp, STATUS_INVALID_ADDRESS, STATUS_PENDING, STATUS_SUCCESS,
    SockAddr, SockAddrIn, SockAddrIn6, SockAddrInet,
};
use crate::driver::adapter::Adapter;
use crate::driver::config::{AdapterConfig, RawConfig, generated_mac};
use crate::provider::testing;
use crate::rnic::Limits;
use crate::rnic::device::EngineMode;

const LUID: NetLuid = NetLuid {
    value: 0x0006_0000_0100_0000,
};
const OTHER: NetLuid = NetLuid {
    value: 0x0006_0000_0200_0000,
};
const NOT_FOUND: NtStatus = 0xC000_0225_u32.cast_signed();

fn v4(t: u8, n: u8) -> IpAddr {
    IpAddr::V4([127, 7, t, n])
}

fn v6(t: u8, n: u8) -> IpAddr {
    IpAddr::V6([0xFD, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, t, 0, n])
}

pub(crate) fn sockaddr(ip: IpAddr, port: u16) -> SockAddrInet {
    match ip {
        IpAddr::V4(bytes) => SockAddrInet {
            ipv4: SockAddrIn {
                sin_family: AF_INET,
                sin_port: port.to_be(),
                sin_addr: InAddr { bytes },
                sin_zero: [0; 8],
            },
        },
        IpAddr::V6(bytes) => SockAddrInet {
            ipv6: SockAddrIn6 {
                sin6_family: AF_INET6,
                sin6_port: port.to_be(),
                sin6_flowinfo: 0,
                sin6_addr: In6Addr { bytes },
                sin6_scope_id: 0,
            },
        },
    }
}

pub(crate) fn row(ip: IpAddr, luid: NetLuid, dad_state: u32) -> MibUnicastIpAddressRow {
    MibUnicastIpAddressRow {
        address: sockaddr(ip, 0),
        interface_luid: luid,
        dad_state,
        creation_time_stamp: 1,
        ..MibUnicastIpAddressRow::default()
    }
}

/// A key-only row, as a notification carries it.
fn key(ip: IpAddr) -> MibUnicastIpAddressRow {
    MibUnicastIpAddressRow {
        address: sockaddr(ip, 0),
        interface_luid: LUID,
        ..MibUnicastIpAddressRow::default()
    }
}

/// A stand-in for the stack's table: `GetUnicastIpAddressEntry` over it.
#[derive(Default)]
struct Stack(Mutex<Vec<MibUnicastIpAddressRow>>);

impl Stack {
    fn set(&self, r: MibUnicastIpAddressRow) {
        let mut rows = self.0.lock().unwrap();
        rows.retain(|x| row_ip(x) != row_ip(&r));
        rows.push(r);
    }
    fn delete(&self, ip: IpAddr) {
        self.0.lock().unwrap().retain(|x| row_ip(x) != Some(ip));
    }
    fn query(&self, out: &mut MibUnicastIpAddressRow) -> NtStatus {
        let rows = self.0.lock().unwrap();
        match rows
            .iter()
            .find(|x| row_ip(x) == row_ip(out) && x.interface_luid == out.interface_luid)
        {
            Some(found) => {
                *out = *found;
                STATUS_SUCCESS
            }
            None => NOT_FOUND,
        }
    }
    fn notify(&self, tracker: &AddressTracker, kind: MibNotificationType, ip: IpAddr) {
        tracker.notify(kind, Some(&key(ip)), &mut |r| self.query(r));
    }
    /// Sets `ip`'s row on our interface in DAD `state`, then tells
    /// `tracker` (`kind`).
    fn change(&self, tracker: &AddressTracker, kind: MibNotificationType, ip: IpAddr, state: u32) {
        self.set(row(ip, LUID, state));
        self.notify(tracker, kind, ip);
    }
    /// Deletes `ip`'s row, then tells `tracker`.
    fn remove(&self, tracker: &AddressTracker, ip: IpAddr) {
        self.delete(ip);
        self.notify(tracker, MIB_DELETE_INSTANCE, ip);
    }
}

/// A tracker on a fresh device, and an empty stack to feed it.
fn tracked() -> (Arc<Device>, AddressTracker, Stack) {
    let (device, tracker) = tracker();
    (device, tracker, Stack::default())
}

fn tracker() -> (Arc<Device>, AddressTracker) {
    let device = Device::new(Limits::DEFAULT, EngineMode::Inline).unwrap();
    let tracker = AddressTracker::new(LUID, &device).unwrap();
    (device, tracker)
}

#[test]
fn test_initial_table_counts_own_usable_rows_only() {
    let (_device, t) = tracker();
    let rows = [
        row(v4(1, 1), LUID, IP_DAD_STATE_PREFERRED),
        row(v6(1, 1), LUID, IP_DAD_STATE_DEPRECATED),
        row(v4(1, 2), LUID, IP_DAD_STATE_TENTATIVE),
        row(v6(1, 2), LUID, IP_DAD_STATE_DUPLICATE),
        row(v4(1, 3), OTHER, IP_DAD_STATE_PREFERRED),
        MibUnicastIpAddressRow {
            interface_luid: LUID,
            dad_state: IP_DAD_STATE_PREFERRED,
            ..MibUnicastIpAddressRow::default()
        },
    ];
    t.load(t.begin().unwrap(), &rows);
    assert!(t.addresses().contains(v4(1, 1)));
    assert!(t.addresses().contains(v6(1, 1)));
    assert_eq!(t.addresses().len(), 2);
}

#[test]
fn test_notifications_add_and_remove_ipv4_and_ipv6() {
    let (device, t, stack) = tracked();
    for ip in [v4(2, 1), v6(2, 1)] {
        // Added while DAD runs: not yet the interface's.
        stack.change(&t, MIB_ADD_INSTANCE, ip, IP_DAD_STATE_TENTATIVE);
        assert!(!t.addresses().contains(ip));
        // DAD passes: a parameter notification, re-read.
        stack.change(&t, MIB_PARAMETER_NOTIFICATION, ip, IP_DAD_STATE_PREFERRED);
        assert!(t.addresses().contains(ip));
        let fabric_owner = crate::provider::ndis::device_of(ip).unwrap();
        assert!(Arc::ptr_eq(&fabric_owner, &device));
        // Deprecated still counts; duplicate does not.
        stack.change(&t, MIB_PARAMETER_NOTIFICATION, ip, IP_DAD_STATE_DEPRECATED);
        assert!(t.addresses().contains(ip));
        stack.change(&t, MIB_PARAMETER_NOTIFICATION, ip, IP_DAD_STATE_DUPLICATE);
        assert!(!t.addresses().contains(ip));
        stack.change(&t, MIB_ADD_INSTANCE, ip, IP_DAD_STATE_PREFERRED);
        assert!(t.addresses().contains(ip));
        stack.remove(&t, ip);
        assert!(!t.addresses().contains(ip));
        assert!(crate::provider::ndis::device_of(ip).is_none());
    }
    // An add whose re-read finds nothing (already gone) adds nothing; the
    // initial notification and other interfaces' rows are ignored.
    stack.notify(&t, MIB_ADD_INSTANCE, v4(2, 9));
    t.notify(MIB_INITIAL_NOTIFICATION, None, &mut |_| STATUS_SUCCESS);
    let mut foreign = key(v4(2, 8));
    foreign.interface_luid = OTHER;
    t.notify(MIB_ADD_INSTANCE, Some(&foreign), &mut |r| {
        r.dad_state = IP_DAD_STATE_PREFERRED;
        STATUS_SUCCESS
    });
    assert!(t.addresses().is_empty());
    // A key naming the interface by index only: the re-read row decides.
    let mut by_index = key(v6(2, 7));
    by_index.interface_luid = NetLuid::default();
    by_index.interface_index = 9;
    t.notify(MIB_ADD_INSTANCE, Some(&by_index), &mut |r| {
        *r = row(v6(2, 7), LUID, IP_DAD_STATE_PREFERRED);
        STATUS_SUCCESS
    });
    assert!(t.addresses().contains(v6(2, 7)));
    t.notify(MIB_ADD_INSTANCE, Some(&by_index), &mut |r| {
        *r = row(v6(2, 6), OTHER, IP_DAD_STATE_PREFERRED);
        STATUS_SUCCESS
    });
    assert!(!t.addresses().contains(v6(2, 6)));
    t.notify(MIB_DELETE_INSTANCE, Some(&by_index), &mut |_| {
        STATUS_SUCCESS
    });
    assert!(t.addresses().is_empty());
}

#[test]
fn test_stale_table_does_not_undo_a_later_delete() {
    let (_device, t, stack) = tracked();
    stack.set(row(v4(3, 1), LUID, IP_DAD_STATE_PREFERRED));
    // The table is read (ticket first), then the address is deleted and its
    // notification applied, then the stale table is applied.
    let ticket = t.begin().unwrap();
    let table = stack.0.lock().unwrap().clone();
    stack.remove(&t, v4(3, 1));
    t.load(ticket, &table);
    assert!(!t.addresses().contains(v4(3, 1)));
    // And the other way round: a later add wins over an older absence.
    let ticket = t.begin().unwrap();
    stack.change(&t, MIB_ADD_INSTANCE, v4(3, 1), IP_DAD_STATE_PREFERRED);
    t.load(ticket, &[]);
    assert!(t.addresses().contains(v4(3, 1)));
}

#[test]
fn test_close_removes_everything_and_ignores_late_callbacks() {
    let (_device, t, stack) = tracked();
    stack.set(row(v6(4, 1), LUID, IP_DAD_STATE_PREFERRED));
    let in_flight = t.begin().unwrap();
    stack.notify(&t, MIB_ADD_INSTANCE, v6(4, 1));
    assert!(t.addresses().contains(v6(4, 1)));
    t.close();
    assert!(t.addresses().is_empty());
    assert!(crate::provider::ndis::device_of(v6(4, 1)).is_none());
    // A callback that was running when the tracker closed, and one after.
    t.load(in_flight, &[row(v6(4, 1), LUID, IP_DAD_STATE_PREFERRED)]);
    stack.notify(&t, MIB_ADD_INSTANCE, v6(4, 1));
    assert!(t.addresses().is_empty());
    assert!(t.begin().is_none());
}

#[test]
fn test_two_interfaces_cannot_own_one_address_rule_n1() {
    let (_d1, t1) = tracker();
    let d2 = Device::new(Limits::DEFAULT, EngineMode::Inline).unwrap();
    let t2 = AddressTracker::new(OTHER, &d2).unwrap();
    t1.load(
        t1.begin().unwrap(),
        &[row(v4(5, 1), LUID, IP_DAD_STATE_PREFERRED)],
    );
    t2.load(
        t2.begin().unwrap(),
        &[row(v4(5, 1), OTHER, IP_DAD_STATE_PREFERRED)],
    );
    assert!(t1.addresses().contains(v4(5, 1)));
    assert!(!t2.addresses().contains(v4(5, 1)));
    // Once the first lets it go, the second gets it at its next notice.
    t1.close();
    t2.notify(
        MIB_PARAMETER_NOTIFICATION,
        Some(&row(v4(5, 1), OTHER, 0)),
        &mut |r| {
            r.dad_state = IP_DAD_STATE_PREFERRED;
            STATUS_SUCCESS
        },
    );
    assert!(t2.addresses().contains(v4(5, 1)));
}

// ----- the NDIS path ---------------------------------------------------

/// An adapter as `MiniportInitializeEx` builds it, over the NDIS provider,
/// with its address tracker for the interface `luid`.
pub(crate) fn ndis_adapter(luid: NetLuid) -> (Adapter, AddressTracker) {
    let raw = RawConfig {
        network_direct: Some(1),
        ..RawConfig::default()
    };
    let config = AdapterConfig::from_raw(&raw, 1);
    let device = Device::new(Limits::DEFAULT, EngineMode::Inline).unwrap();
    let provider = crate::provider::ndis::factory(&device).unwrap();
    let tracker = AddressTracker::new(luid, &device).unwrap();
    let adapter = Adapter::new(config, generated_mac(1), device, provider);
    (adapter, tracker)
}

/// An NDIS adapter (see [`ndis_adapter`]) with an NDK adapter opened on it.
fn ndis_open(luid: NetLuid) -> (Adapter, AddressTracker, Open) {
    let (adapter, tracker) = ndis_adapter(luid);
    let open = Open(adapter.open_ndk_adapter(NDK_VERSION_1_2).unwrap().as_ptr());
    (adapter, tracker, open)
}

/// Closes the NDK adapter `open` of `adapter`, then the tracker.
fn close_all(adapter: &Adapter, open: &Open, tracker: &AddressTracker) {
    adapter.close_ndk_adapter(core::ptr::NonNull::new(open.0).unwrap());
    tracker.close();
}

#[expect(clippy::cast_ptr_alignment, reason = "read with read_unaligned")]
pub(crate) fn table<T>(object: *const c_void) -> &'static T {
    let slot = object.cast::<u8>().wrapping_add(0x28).cast::<*const T>();
    // SAFETY: a live NDK object of the test; its Dispatch field is at 0x28.
    let table = unsafe { slot.read_unaligned() };
    // SAFETY: the provider's dispatch tables are statics.
    unsafe { &*table }
}

static CLOSED: Mutex<usize> = Mutex::new(0);

unsafe extern "system" fn on_close(_ctx: *mut c_void) {
    *CLOSED.lock().unwrap() += 1;
}

unsafe extern "system" fn on_request(_ctx: *mut c_void, _status: NtStatus) {}

unsafe extern "system" fn on_connect(ctx: *mut c_void, connector: *mut NdkConnector) {
    // SAFETY: the context is a `Mutex<Vec<usize>>` that outlives the listener.
    let queue = unsafe { &*ctx.cast::<Mutex<Vec<usize>>>() };
    queue.lock().unwrap().push(connector as usize);
}

/// Closes any object through slot 0 of its table, waiting for a pending
/// close (bounded).
pub(crate) fn close(object: *mut c_void) {
    let before = *CLOSED.lock().unwrap();
    let close = *table::<NdkFnCloseObject>(object);
    // SAFETY: a live object of the test, closed once.
    let status = unsafe { close(object.cast(), Some(on_close), null_mut()) };
    if status == STATUS_PENDING {
        for _ in 0..100_000 {
            if *CLOSED.lock().unwrap() > before {
                return;
            }
            crate::kernel::deferred::flush();
            std::thread::yield_now();
        }
        panic!("close did not complete");
    }
    assert_eq!(status, STATUS_SUCCESS);
}

pub(crate) fn raw(address: &SockAddrInet, ip: IpAddr) -> (*const SockAddr, u32) {
    let len = if matches!(ip, IpAddr::V4(_)) { 16 } else { 28 };
    (core::ptr::from_ref(address).cast(), len)
}

pub(crate) struct Open(pub(crate) *mut NdkAdapter);

impl Open {
    fn d(&self) -> &NdkAdapterDispatch {
        table(self.0.cast())
    }

    pub(crate) fn listener(&self, queue: &Mutex<Vec<usize>>) -> *mut NdkListener {
        let mut l = null_mut();
        let ctx = core::ptr::from_ref(queue).cast_mut().cast();
        // SAFETY: valid arguments; `queue` outlives the listener.
        let status = unsafe {
            (self.d().ndk_create_listener)(
                self.0,
                Some(on_connect),
                ctx,
                None,
                null_mut(),
                &raw mut l,
            )
        };
        assert_eq!(status, STATUS_SUCCESS);
        l
    }

    pub(crate) fn listen(l: *mut NdkListener, ip: IpAddr, port: u16) -> NtStatus {
        let address = sockaddr(ip, port);
        let (a, n) = raw(&address, ip);
        let d: &NdkListenerDispatch = table(l.cast());
        // SAFETY: valid arguments.
        unsafe { (d.ndk_listen)(l, a, n, None, null_mut()) }
    }

    pub(crate) fn qp(&self) -> (*mut NdkCq, *mut NdkPd, *mut NdkQp) {
        let cq = testing::new_cq(self.0, 64);
        let pd = testing::new_pd(self.0);
        let qp = testing::new_qp(pd, cq);
        (cq, pd, qp)
    }

    pub(crate) fn connector(&self) -> *mut NdkConnector {
        let mut c = null_mut();
        // SAFETY: valid arguments.
        let status =
            unsafe { (self.d().ndk_create_connector)(self.0, None, null_mut(), &raw mut c) };
        assert_eq!(status, STATUS_SUCCESS);
        c
    }

    fn connect(
        c: *mut NdkConnector,
        qp: *mut NdkQp,
        src: IpAddr,
        dst: IpAddr,
        port: u16,
    ) -> NtStatus {
        let s = sockaddr(src, 0);
        let d = sockaddr(dst, port);
        let (sa, sn) = raw(&s, src);
        let (da, dn) = raw(&d, dst);
        let table: &NdkConnectorDispatch = table(c.cast());
        // SAFETY: valid arguments; the completion has no context.
        unsafe {
            (table.ndk_connect)(
                c,
                qp,
                sa,
                sn,
                da,
                dn,
                8,
                8,
                null(),
                0,
                Some(on_request),
                null_mut(),
            )
        }
    }
}

#[test]
fn test_ndis_path_listens_and_connects_on_owned_addresses_only() {
    let (adapter, t) = ndis_adapter(LUID);
    t.load(
        t.begin().unwrap(),
        &[
            row(v4(6, 1), LUID, IP_DAD_STATE_PREFERRED),
            row(v6(6, 1), LUID, IP_DAD_STATE_PREFERRED),
        ],
    );
    let open = Open(adapter.open_ndk_adapter(NDK_VERSION_1_2).unwrap().as_ptr());
    let queue = Mutex::new(Vec::new());
    for ip in [v4(6, 1), v6(6, 1)] {
        let l = open.listener(&queue);
        assert_eq!(Open::listen(l, ip, 4000), STATUS_SUCCESS);
        close(l.cast());
        // N3: an address the interface does not own.
        let l = open.listener(&queue);
        let foreign = if matches!(ip, IpAddr::V4(_)) {
            v4(6, 2)
        } else {
            v6(6, 2)
        };
        assert_eq!(Open::listen(l, foreign, 4000), STATUS_INVALID_ADDRESS);
        close(l.cast());
    }
    // Connect: from an owned address to a listener on it (loopback, N27).
    let l = open.listener(&queue);
    assert_eq!(Open::listen(l, v4(6, 1), 4001), STATUS_SUCCESS);
    let (cq, pd, qp) = open.qp();
    let c = open.connector();
    assert_eq!(
        Open::connect(c, qp, v4(6, 2), v4(6, 1), 4001),
        STATUS_INVALID_ADDRESS
    );
    let status = Open::connect(c, qp, v4(6, 1), v4(6, 1), 4001);
    assert!(
        status == STATUS_PENDING || status == STATUS_SUCCESS,
        "{status:#x}"
    );
    let passive = queue.lock().unwrap().pop().expect("connect event");
    close(passive as *mut c_void);
    close(c.cast());
    close(qp.cast());
    close(pd.cast());
    close(cq.cast());
    close(l.cast());
    close_all(&adapter, &open, &t);
}

#[test]
fn test_ndis_path_sees_addresses_that_come_and_go_while_open() {
    let (adapter, t, open) = ndis_open(LUID);
    let stack = Stack::default();
    let queue = Mutex::new(Vec::new());
    let l = open.listener(&queue);
    assert_eq!(Open::listen(l, v6(7, 1), 0), STATUS_INVALID_ADDRESS);
    stack.change(&t, MIB_ADD_INSTANCE, v6(7, 1), IP_DAD_STATE_PREFERRED);
    assert_eq!(Open::listen(l, v6(7, 1), 0), STATUS_SUCCESS);
    close(l.cast());
    stack.remove(&t, v6(7, 1));
    let l = open.listener(&queue);
    assert_eq!(Open::listen(l, v6(7, 1), 0), STATUS_INVALID_ADDRESS);
    close(l.cast());
    close_all(&adapter, &open, &t);
}

#[test]
fn test_address_changes_race_with_open_and_close() {
    let (adapter, t) = ndis_adapter(LUID);
    let stack = Stack::default();
    std::thread::scope(|s| {
        s.spawn(|| {
            for n in 0..300_u16 {
                let ip = v4(8, u8::try_from(n % 4).unwrap());
                if n % 3 == 0 {
                    stack.remove(&t, ip);
                } else {
                    stack.change(&t, MIB_ADD_INSTANCE, ip, IP_DAD_STATE_PREFERRED);
                }
            }
        });
        s.spawn(|| {
            let queue = Mutex::new(Vec::new());
            for n in 0..100_u8 {
                let open = Open(adapter.open_ndk_adapter(NDK_VERSION_1_2).unwrap().as_ptr());
                let l = open.listener(&queue);
                let status = Open::listen(l, v4(8, n % 4), 0);
                assert!(status == STATUS_SUCCESS || status == STATUS_INVALID_ADDRESS);
                close(l.cast());
                adapter.close_ndk_adapter(core::ptr::NonNull::new(open.0).unwrap());
            }
        });
    });
    // The device owns exactly what the stack's table says.
    for n in 0..4 {
        let mut probe = key(v4(8, n));
        let in_stack = stack.query(&mut probe) == STATUS_SUCCESS;
        assert_eq!(t.addresses().contains(v4(8, n)), in_stack);
    }
    t.close();
}
