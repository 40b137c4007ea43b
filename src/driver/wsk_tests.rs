//! The NDIS path on the iWARP transport over WSK: two miniport adapters,
//! each with its provider opened as `MiniportInitializeEx` opens it
//! (`provider::ndis::factory_on`) on a `WskNet` of its own, both over the
//! tests' WSK provider (`kernel::wsk::fake`, serving on its own thread).
//! The full stack runs: NDK calls, the connection manager, MPA and DDP over
//! the WSK glue's streams. Addresses 127.9.x.y are this file's.

use core::ffi::c_void;
use core::net::SocketAddr;
use core::ptr::{null, null_mut};
use std::sync::Mutex;

use super::addresses::AddressTracker;
use crate::abi::{
    IP_DAD_STATE_PREFERRED, NDK_VERSION_1_2, NdkConnector, NdkConnectorDispatch, NdkListener,
    NdkListenerDispatch, NdkQpDispatch, NdkSge, NetLuid, NtStatus, STATUS_CANCELLED,
    STATUS_PENDING, STATUS_SHARING_VIOLATION, STATUS_SUCCESS,
};
use crate::driver::adapter::Adapter;
use crate::driver::config::{AdapterConfig, RawConfig, generated_mac};
use crate::kernel::sync::Arc;
use crate::kernel::tcp::Net;
use crate::kernel::timers::PlayedClock;
use crate::kernel::wsk::WskNet;
use crate::kernel::wsk::fake::{Provider, Source};
use crate::provider::testing::cq_results;
use crate::rnic::Limits;
use crate::rnic::cm::{IpAddr, MAX_WIRE_PRIVATE_DATA};
use crate::rnic::device::{Device, EngineMode};

use super::addresses::tests::{Open, close, raw, row, sockaddr, table};

const LUID_A: NetLuid = NetLuid {
    value: 0x0006_0000_0900_0000,
};
const LUID_B: NetLuid = NetLuid {
    value: 0x0006_0000_0a00_0000,
};

fn v4(n: u8) -> IpAddr {
    IpAddr::V4([127, 9, 0, n])
}

/// A miniport adapter on the wire over `net`, owning `ip`.
fn wsk_adapter(luid: NetLuid, ip: IpAddr, net: &Arc<WskNet>) -> (Adapter, AddressTracker) {
    let raw = RawConfig {
        network_direct: Some(1),
        ..RawConfig::default()
    };
    let config = AdapterConfig::from_raw(&raw, 1);
    let device = Device::new(Limits::DEFAULT, EngineMode::Inline).unwrap();
    let wire: Arc<dyn Net> = net.clone();
    let provider = crate::provider::ndis::factory_on(&device, Some(wire)).unwrap();
    let tracker = AddressTracker::new(luid, &device).unwrap();
    tracker.load(
        tracker.begin().unwrap(),
        &[row(ip, luid, IP_DAD_STATE_PREFERRED)],
    );
    let adapter = Adapter::new(config, generated_mac(1), device, provider);
    (adapter, tracker)
}

static EVENTS: Mutex<Vec<(usize, NtStatus)>> = Mutex::new(Vec::new());

/// Records a request completion under its context (a tag).
unsafe extern "system" fn on_request(ctx: *mut c_void, status: NtStatus) {
    EVENTS.lock().unwrap().push((ctx as usize, status));
}

unsafe extern "system" fn on_indication(_ctx: *mut c_void) {}

/// `NdkListen` on `ip`:`port` with a completion tagged `tag`.
fn listen_on(l: *mut NdkListener, ip: IpAddr, port: u16, tag: usize) -> NtStatus {
    let address = sockaddr(ip, port);
    let (a, n) = raw(&address, ip);
    let d: &NdkListenerDispatch = table(l.cast());
    // SAFETY: valid arguments; the completion's context is a tag.
    unsafe { (d.ndk_listen)(l, a, n, Some(on_request), tag as *mut c_void) }
}

/// `NdkListen`'s final status: inline, or its completion's (L8).
fn listened(l: *mut NdkListener, ip: IpAddr, port: u16, tag: usize) -> NtStatus {
    match listen_on(l, ip, port, tag) {
        STATUS_PENDING => {
            wait_for("the Listen's completion", || completed(tag).is_some());
            completed(tag).unwrap()
        }
        status => {
            assert_eq!(completed(tag), None, "no completion after an inline answer");
            status
        }
    }
}

/// Waits (bounded, `kernel::testing`) until `done` holds, letting the
/// deferred workers run between tries.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    crate::kernel::testing::wait_until(what, || {
        if done() {
            return true;
        }
        crate::kernel::deferred::flush();
        false
    });
}

fn completed(tag: usize) -> Option<NtStatus> {
    EVENTS
        .lock()
        .unwrap()
        .iter()
        .find(|(t, _)| *t == tag)
        .map(|(_, s)| *s)
}

fn conn_table(c: *mut NdkConnector) -> &'static NdkConnectorDispatch {
    table(c.cast())
}

/// The peer's private data of a connector.
fn peer_data(c: *mut NdkConnector) -> Vec<u8> {
    let mut buffer = [0_u8; 512];
    let mut length = 512_u32;
    let (mut ird, mut ord) = (0, 0);
    // SAFETY: a live connector; the buffer holds 512 bytes.
    let status = unsafe {
        (conn_table(c).ndk_get_connection_data)(
            c,
            &raw mut ird,
            &raw mut ord,
            buffer.as_mut_ptr().cast(),
            &raw mut length,
        )
    };
    assert_eq!(status, STATUS_SUCCESS);
    buffer[..length as usize].to_vec()
}

fn qp_table(qp: *mut crate::abi::NdkQp) -> &'static NdkQpDispatch {
    table(qp.cast())
}

/// `NdkCompleteConnect` on the active side (its completion tagged 0xA2).
fn complete_connect(c: *mut NdkConnector) {
    // SAFETY: valid arguments.
    let status = unsafe {
        (conn_table(c).ndk_complete_connect)(
            c,
            Some(on_indication),
            null_mut(),
            Some(on_request),
            0xA2 as *mut c_void,
        )
    };
    assert!(status == STATUS_SUCCESS || status == STATUS_PENDING);
}

/// Both adapters are iWARP with the wire's limits (A8, A23), and `b`'s
/// listener on `listening` is reported as an ND/TCP pair (A20, A21).
fn check_iwarp_reports(a: &Adapter, b: &Adapter, listening: SocketAddr) {
    for adapter in [a, b] {
        let info = adapter.provider().adapter_info();
        assert_eq!(info.rdma_technology, crate::abi::NdkRdmaTechnology::IWARP);
        assert_eq!(info.max_caller_data as usize, MAX_WIRE_PRIVATE_DATA);
        assert_eq!(info.max_callee_data as usize, MAX_WIRE_PRIVATE_DATA);
    }
    let mut endpoints = Vec::new();
    b.provider()
        .local_endpoints(&mut |endpoint| endpoints.push(*endpoint));
    assert_eq!(endpoints.len(), 2, "{endpoints:?}");
    assert!(endpoints[0].listener && endpoints[0].local == listening);
    assert!(!endpoints[1].listener && endpoints[1].local == listening);
}

/// OID_NDK_CONNECTIONS of an established connection from `local` to
/// `remote`: its ND entry, then its TCP connection, same addressing (N30)
/// (A19, A21).
fn check_connection_pair(adapter: &Adapter, local: IpAddr, remote: IpAddr) {
    let mut connections = Vec::new();
    adapter
        .provider()
        .connections(&mut |connection| connections.push(*connection));
    assert_eq!(connections.len(), 2, "{connections:?}");
    assert_eq!(connections[0], connections[1]);
    let ip = |ip: IpAddr| match ip {
        IpAddr::V4(octets) => core::net::IpAddr::from(octets),
        IpAddr::V6(octets) => core::net::IpAddr::from(octets),
    };
    assert_eq!(connections[0].local.ip(), ip(local));
    assert_eq!(connections[0].remote.ip(), ip(remote));
    assert!(!connections[0].user_mode_owner);
}

/// Sends both ways over an established iWARP connection (DDP untagged
/// messages in MPA FPDUs on the WSK streams), each matched by a receive.
fn exchange_sends(
    qp_a: *mut crate::abi::NdkQp,
    qp_b: *mut crate::abi::NdkQp,
    cq_a: *mut crate::abi::NdkCq,
    cq_b: *mut crate::abi::NdkCq,
) {
    for n in 0..4_usize {
        for (qp, tag) in [(qp_a, 0x100 + n), (qp_b, 0x200 + n)] {
            // SAFETY: no SGEs; the context is a tag.
            let status =
                unsafe { (qp_table(qp).ndk_receive)(qp, tag as *mut c_void, null::<NdkSge>(), 0) };
            assert_eq!(status, STATUS_SUCCESS);
        }
    }
    for n in 0..4_usize {
        for (qp, tag) in [(qp_a, 0x300 + n), (qp_b, 0x400 + n)] {
            // SAFETY: no SGEs; the context is a tag.
            let status =
                unsafe { (qp_table(qp).ndk_send)(qp, tag as *mut c_void, null::<NdkSge>(), 0, 0) };
            assert_eq!(status, STATUS_SUCCESS);
        }
    }
    let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
    wait_for("every send and receive completed", || {
        got_a.extend(cq_results(cq_a));
        got_b.extend(cq_results(cq_b));
        got_a.len() == 8 && got_b.len() == 8
    });
    for (got, mine, theirs) in [(&got_a, 0x300, 0x100), (&got_b, 0x400, 0x200)] {
        for n in 0..4 {
            assert!(
                got.contains(&(mine + n, STATUS_SUCCESS)),
                "send {n}: {got:x?}"
            );
            assert!(
                got.contains(&(theirs + n, STATUS_SUCCESS)),
                "receive {n}: {got:x?}"
            );
        }
    }
}

#[test]
fn test_two_ndis_adapters_connect_and_exchange_over_wsk() {
    let provider = Provider::new(700);
    let serving = provider.serve();
    let clock = PlayedClock::new(1_000);
    let nets = [0, 1].map(|_| {
        WskNet::new(
            Box::new(Source(provider)),
            clock.timers(),
            super::transport::SEND_RING,
        )
    });
    let (a, ta) = wsk_adapter(LUID_A, v4(1), &nets[0]);
    let (b, tb) = wsk_adapter(LUID_B, v4(2), &nets[1]);
    let open_a = Open(a.open_ndk_adapter(NDK_VERSION_1_2).unwrap().as_ptr());
    let open_b = Open(b.open_ndk_adapter(NDK_VERSION_1_2).unwrap().as_ptr());

    // B listens over a WSK listening socket.
    let queue = Mutex::new(Vec::new());
    let l = open_b.listener(&queue);
    // NdkListen completes once WSK has bound the socket (asynchronously,
    // on the provider's thread here): A may connect at once.
    assert_eq!(listened(l, v4(2), 4100, 0xB0), STATUS_SUCCESS);
    assert_eq!(nets[1].sockets_open(), 1, "B's listening socket");

    check_iwarp_reports(&a, &b, SocketAddr::from(([127, 9, 0, 2], 4100)));

    // A connects over WSK with private data as long as MPA carries (more
    // than the InfiniBand CM's 56 bytes a RoCE adapter offers); B accepts
    // with its own.
    let hello: Vec<u8> = (0..=250_u8).cycle().take(MAX_WIRE_PRIVATE_DATA).collect();
    let (cq_a, pd_a, qp_a) = open_a.qp();
    let (cq_b, pd_b, qp_b) = open_b.qp();
    let c = open_a.connector();
    let (src, dst) = (sockaddr(v4(1), 0), sockaddr(v4(2), 4100));
    let (src, dst) = (raw(&src, v4(1)), raw(&dst, v4(2)));
    // SAFETY: valid arguments; the completion's context is a tag.
    let status = unsafe {
        (conn_table(c).ndk_connect)(
            c,
            qp_a,
            src.0,
            src.1,
            dst.0,
            dst.1,
            8,
            8,
            hello.as_ptr().cast(),
            u32::try_from(hello.len()).unwrap(),
            Some(on_request),
            0xA1 as *mut c_void,
        )
    };
    assert_eq!(status, STATUS_PENDING);
    wait_for("B's connect event", || !queue.lock().unwrap().is_empty());
    let passive = queue.lock().unwrap().pop().unwrap() as *mut NdkConnector;
    assert_eq!(peer_data(passive), hello, "A's MPA request");
    // SAFETY: valid arguments; the completion's context is a tag.
    let status = unsafe {
        (conn_table(passive).ndk_accept)(
            passive,
            qp_b,
            8,
            8,
            b"hello from B".as_ptr().cast(),
            12,
            Some(on_indication),
            null_mut(),
            Some(on_request),
            0xB1 as *mut c_void,
        )
    };
    assert_eq!(status, STATUS_PENDING);
    wait_for("A's connect", || completed(0xA1).is_some());
    assert_eq!(completed(0xA1), Some(STATUS_SUCCESS));
    assert_eq!(peer_data(c), b"hello from B", "B's MPA reply");
    complete_connect(c);
    wait_for("B's accept", || completed(0xB1).is_some());
    assert_eq!(completed(0xB1), Some(STATUS_SUCCESS));
    assert_eq!(nets[0].sockets_open(), 1, "A's connection socket");
    assert_eq!(
        nets[1].sockets_open(),
        2,
        "B's listener and accepted socket"
    );

    check_connection_pair(&a, v4(1), v4(2));
    check_connection_pair(&b, v4(2), v4(1));

    exchange_sends(qp_a, qp_b, cq_a, cq_b);

    disconnect_both(c, passive);

    // Then the objects close and the adapters with them; each net resets
    // what is left and waits for its sockets.
    close(passive.cast());
    close(c.cast());
    close(l.cast());
    for object in [
        qp_a.cast(),
        qp_b.cast(),
        pd_a.cast(),
        pd_b.cast(),
        cq_a.cast(),
        cq_b.cast(),
    ] {
        close(object);
    }
    a.close_ndk_adapter(core::ptr::NonNull::new(open_a.0).unwrap());
    b.close_ndk_adapter(core::ptr::NonNull::new(open_b.0).unwrap());
    for net in &nets {
        assert!(super::transport::halt(net), "every socket closed at halt");
        assert_eq!(net.sockets_open(), 0);
    }
    drop(serving);
    assert!(provider.idle(), "no request left with the provider");
    assert!(provider.lock().sockets.iter().all(|s| s.closed));
    ta.close();
    tb.close();
}

/// X1 (a): A (`active`) disconnects gracefully, B (`passive`) too; each
/// Disconnect completes with success once the other's FIN came. (Over WSK a
/// stream closed in order used to hear nothing more, so A's Disconnect
/// waited for the peer's FIN until its time-out, which the tests' played
/// clock never brings.)
fn disconnect_both(active: *mut NdkConnector, passive: *mut NdkConnector) {
    for (connector, tag) in [(active, 0xA3_usize), (passive, 0xB3)] {
        // SAFETY: a live connector; the completion's context is a tag.
        let status = unsafe {
            (conn_table(connector).ndk_disconnect)(connector, Some(on_request), tag as *mut c_void)
        };
        assert!(
            status == STATUS_SUCCESS || status == STATUS_PENDING,
            "{status:#x}"
        );
        if status == STATUS_SUCCESS {
            EVENTS.lock().unwrap().push((tag, status));
        }
    }
    wait_for("both Disconnects", || {
        completed(0xA3).is_some() && completed(0xB3).is_some()
    });
    assert_eq!(completed(0xA3), Some(STATUS_SUCCESS), "A's Disconnect");
    assert_eq!(completed(0xB3), Some(STATUS_SUCCESS), "B's Disconnect");
}

/// A net over `provider` with its own played clock.
fn net_over(provider: &'static Provider) -> Arc<WskNet> {
    WskNet::new(
        Box::new(Source(provider)),
        PlayedClock::new(1_000).timers(),
        super::transport::SEND_RING,
    )
}

/// Accepts nothing: a socket of another program.
struct Foreign;

impl crate::kernel::tcp::AcceptEvents for Foreign {
    fn accepted(
        &self,
        _connection: crate::kernel::tcp::Connected,
    ) -> Option<Arc<dyn crate::kernel::tcp::StreamEvents>> {
        None
    }
}

/// N3: a TCP port another program holds is found only when WSK completes
/// the bind, after NdkListen returned: the Listen completes
/// STATUS_SHARING_VIOLATION, and the listener may listen elsewhere.
#[test]
fn test_listen_on_a_port_held_by_another_socket_fails_asynchronously_rule_n3() {
    let provider = Provider::new(700);
    let serving = provider.serve();
    let net = net_over(provider);
    let (b, tb) = wsk_adapter(LUID_B, v4(12), &net);
    let open_b = Open(b.open_ndk_adapter(NDK_VERSION_1_2).unwrap().as_ptr());
    // Another program's socket on 127.9.0.12:4300 (the connection
    // manager's own port table does not know it).
    let foreign = net
        .listen(SocketAddr::from(([127, 9, 0, 12], 4300)), Arc::new(Foreign))
        .unwrap();
    wait_for("the foreign socket bound", || provider.idle());
    let queue = Mutex::new(Vec::new());
    let l = open_b.listener(&queue);
    assert_eq!(
        listened(l, v4(12), 4300, 0xC0),
        STATUS_SHARING_VIOLATION,
        "the address is in use"
    );
    assert_eq!(
        listened(l, v4(12), 4301, 0xC1),
        STATUS_SUCCESS,
        "listens again"
    );
    close(l.cast());
    drop(foreign);
    b.close_ndk_adapter(core::ptr::NonNull::new(open_b.0).unwrap());
    assert!(super::transport::halt(&net), "every socket closed at halt");
    drop(serving);
    tb.close();
}

/// L20, L21: closing a listener whose socket WSK has not bound yet
/// completes its Listen STATUS_CANCELLED, then the close; the socket is
/// closed once WSK is done with it.
#[test]
fn test_close_of_a_listener_still_binding_cancels_its_listen_rule_l20_l21() {
    // Not serving: WSK completes nothing until the test runs it.
    let provider = Provider::new(700);
    let net = net_over(provider);
    let (b, tb) = wsk_adapter(LUID_B, v4(13), &net);
    let open_b = Open(b.open_ndk_adapter(NDK_VERSION_1_2).unwrap().as_ptr());
    let queue = Mutex::new(Vec::new());
    let l = open_b.listener(&queue);
    assert_eq!(listen_on(l, v4(13), 4400, 0xD0), STATUS_PENDING);
    assert_eq!(completed(0xD0), None, "WSK has not bound the socket");
    close(l.cast());
    assert_eq!(
        completed(0xD0),
        Some(STATUS_CANCELLED),
        "the Listen completed before the close did"
    );
    // WSK finishes the socket (created, bound, then closed).
    provider.run();
    assert_eq!(net.sockets_open(), 0, "the socket closed");
    b.close_ndk_adapter(core::ptr::NonNull::new(open_b.0).unwrap());
    assert!(super::transport::halt(&net));
    tb.close();
}
