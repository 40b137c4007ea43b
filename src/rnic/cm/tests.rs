//! Unit tests of connection management, grouped by state: addresses,
//! listeners, Requested, Replied / Accepting, Established, shared
//! endpoints, loopback and IPv6.

use alloc::vec;
use alloc::vec::Vec;
use std::sync::Mutex;

use super::*;
use crate::kernel::sync::Arc;
use crate::kernel::sync::atomic::Ordering;
use crate::rnic::device::{Device, EngineMode};
use crate::rnic::qp::{Payload, QpState};
use crate::rnic::testing::{CONFIG, Side, inline_device};
use crate::rnic::types::{Access, Limits, WcStatus, WrFlags};

const A: IpAddr = IpAddr::V4([10, 0, 0, 1]);
const A2: IpAddr = IpAddr::V4([10, 0, 0, 3]);
const B: IpAddr = IpAddr::V4([10, 0, 0, 2]);
const ANY: IpAddr = IpAddr::V4([0; 4]);

fn ep(ip: IpAddr, port: u16) -> Endpoint {
    Endpoint::new(ip, port)
}

// ----- recorders -------------------------------------------------------

use super::recorder::{Ev, Events};

#[derive(Default)]
struct Requests {
    queue: Mutex<Vec<Connector>>,
    closed: Mutex<usize>,
    /// Pending listens' outcomes, in order; the close count when each came.
    listens: Mutex<Vec<(Result<(), CmError>, usize)>>,
}

impl ListenerEvents for Requests {
    fn incoming(&self, request: Connector) {
        self.queue.lock().unwrap().push(request);
    }
    fn listen_completed(&self, result: Result<(), CmError>) {
        let closed = *self.closed.lock().unwrap();
        self.listens.lock().unwrap().push((result, closed));
    }
    fn closed(&self) {
        *self.closed.lock().unwrap() += 1;
    }
}

// ----- fixtures --------------------------------------------------------

struct Host {
    device: Arc<Device>,
    set: AddressSet,
}

fn host(fabric: &Arc<Fabric>, ips: &[IpAddr], mode: EngineMode) -> Host {
    let device = Device::new(Limits::DEFAULT, mode).unwrap();
    let set = AddressSet::register(fabric, &device, ips).unwrap();
    Host { device, set }
}

struct Net {
    fabric: Arc<Fabric>,
    a: Host,
    b: Host,
}

fn net_with(mode: EngineMode) -> Net {
    let fabric = Fabric::new();
    let a = host(&fabric, &[A, A2], mode);
    let b = host(&fabric, &[B], mode);
    Net { fabric, a, b }
}

fn net() -> Net {
    net_with(EngineMode::Inline)
}

fn side(host: &Host, context: usize) -> Side {
    Side::new(&host.device, context, CONFIG)
}

struct Server {
    listener: Listener,
    requests: Arc<Requests>,
}

impl Server {
    fn next(&self) -> Option<Connector> {
        let mut queue = self.requests.queue.lock().unwrap();
        (!queue.is_empty()).then(|| queue.remove(0))
    }
}

fn server(host: &Host) -> Server {
    server_on(&host.set)
}

/// A listener (not listening yet) of `set`, recording its requests.
fn server_on(set: &AddressSet) -> Server {
    let requests = Arc::new(Requests::default());
    let listener = Listener::new(set, Arc::clone(&requests) as _).unwrap();
    Server { listener, requests }
}

fn listening(host: &Host, local: Endpoint) -> Server {
    let s = server(host);
    s.listener.listen(local).unwrap();
    s
}

struct Client {
    conn: Connector,
    events: Arc<Events>,
}

fn wrap(conn: Connector) -> Client {
    let events = Arc::new(Events::default());
    conn.set_events(Arc::clone(&events) as _);
    Client { conn, events }
}

fn client(host: &Host) -> Client {
    wrap(Connector::new(&host.set).unwrap())
}

/// A Disconnect that completed aborted.
const DISCONNECT_ABORTED: Ev = Ev::Disconnect(Err(CmError::ConnectionAborted));

const LIMITS: ReadLimits = ReadLimits::new(16, 16);

/// A request from `net.a` (QP `a`) to `dst`, delivered to `server`.
fn request(net: &Net, server: &Server, a: &Side, dst: Endpoint, data: &[u8]) -> (Client, Client) {
    let active = client(&net.a);
    active
        .conn
        .connect(&a.qp, ep(A, 0), dst, LIMITS, data)
        .unwrap();
    assert_eq!(active.conn.state(), Some(ConnState::Connecting));
    let passive = wrap(server.next().expect("connect event"));
    assert_eq!(passive.conn.state(), Some(ConnState::Requested));
    (active, passive)
}

/// A request from `net.a` (QP `a`, context `contexts.0`) to a listener of
/// `net.b` on `(B, port)`, delivered with `data`; `b` (context
/// `contexts.1`) is a QP for the passive side's answer. Returns (server, a,
/// b, active, passive).
fn requested_on(
    net: &Net,
    port: u16,
    contexts: (usize, usize),
    data: &[u8],
) -> (Server, Side, Side, Client, Client) {
    let s = listening(&net.b, ep(B, port));
    let a = side(&net.a, contexts.0);
    let b = side(&net.b, contexts.1);
    let (active, passive) = request(net, &s, &a, ep(B, port), data);
    (s, a, b, active, passive)
}

/// [`requested_on`] B:5000, contexts 1 and 2.
fn requested(net: &Net, data: &[u8]) -> (Server, Side, Side, Client, Client) {
    requested_on(net, 5000, (1, 2), data)
}

/// An established connection between `net.a` and a listener on `net.b`.
struct Conn {
    active: Client,
    passive: Client,
    a: Side,
    b: Side,
    server: Server,
}

fn established(net: &Net) -> Conn {
    let (server, a, b, active, passive) = requested_on(net, 4000, (0xA, 0xB), b"hello");
    passive.conn.accept(&b.qp, LIMITS, b"welcome").unwrap();
    expect_events(&active, &[Ev::Connect(Ok(()))]);
    active.conn.complete_connect().unwrap();
    expect_events(&passive, &[Ev::Accept(Ok(()))]);
    assert_eq!(active.conn.state(), Some(ConnState::Established));
    assert_eq!(passive.conn.state(), Some(ConnState::Established));
    Conn {
        active,
        passive,
        a,
        b,
        server,
    }
}

/// A fresh net and an established connection on it.
fn connected() -> (Net, Conn) {
    let net = net();
    let c = established(&net);
    (net, c)
}

/// Expects `client`'s connector to have reported exactly `events` since
/// they were last taken.
#[track_caller]
fn expect_events(client: &Client, events: &[Ev]) {
    assert_eq!(client.events.take(), events);
}

/// A connect from `a` on any port of A to `to`, with no private data.
fn connects(c: &Client, a: &Side, to: Endpoint) -> Result<(), CmError> {
    connects_from(c, a, ep(A, 0), to)
}

/// A connect from `a` at `from` to `to`, with no private data.
fn connects_from(c: &Client, a: &Side, from: Endpoint, to: Endpoint) -> Result<(), CmError> {
    c.conn.connect(&a.qp, from, to, LIMITS, b"")
}

/// A QP (context 1) and a connector on `host`, for a connect.
fn connecting(host: &Host) -> (Side, Client) {
    (side(host, 1), client(host))
}

/// N16: `waiting` sees its peer present (`present`), then gone once `peer`
/// is dropped (the observable tests wait on, `Connector::peer_gone`); a
/// Reject then returns aborted.
#[track_caller]
fn expect_reject_aborted_once_gone(waiting: &Client, peer: Client, present: &str) {
    assert!(!waiting.conn.peer_gone(), "{present}");
    drop(peer);
    assert!(waiting.conn.peer_gone());
    assert_eq!(waiting.conn.reject(b""), Err(CmError::ConnectionAborted));
}

/// A server listening on `at` of `host`, QPs `a` (context 1, on `net.a`)
/// and `b` (context 2, on `host`), and a connector on `net.a`.
fn parts(net: &Net, host: &Host, at: Endpoint) -> (Server, Side, Side, Client) {
    let s = listening(host, at);
    (s, side(&net.a, 1), side(host, 2), client(&net.a))
}

fn data_of(conn: &Connector) -> (ConnectionData, Vec<u8>) {
    let mut buf = [0_u8; 256];
    let data = conn.connection_data(&mut buf).unwrap();
    (data, buf[..data.copied].to_vec())
}

// ----- addresses -------------------------------------------------------

mod addresses {
    use super::*;

    #[test]
    fn test_register_address_of_other_device_fails() {
        let net = net();
        let other = inline_device();
        assert_eq!(
            AddressSet::register(&net.fabric, &other, &[A]).err(),
            Some(CmError::AddressInUse)
        );
        assert_eq!(
            AddressSet::register(&net.fabric, &other, &[ANY]).err(),
            Some(CmError::InvalidAddress)
        );
    }

    #[test]
    fn test_register_same_device_shares_rule_n32() {
        let net = net();
        let again = AddressSet::register(&net.fabric, &net.a.device, &[A]).unwrap();
        let clone = again.try_clone().unwrap();
        drop(again);
        assert!(Arc::ptr_eq(
            &net.fabric.device_of(A).unwrap(),
            &net.a.device
        ));
        drop(clone);
        assert!(Arc::ptr_eq(
            &net.fabric.device_of(A).unwrap(),
            &net.a.device
        ));
    }

    #[test]
    fn test_address_free_after_last_set_dropped() {
        let net = net();
        let Net { fabric, a, b } = net;
        drop(a);
        assert!(fabric.device_of(A).is_none());
        let other = inline_device();
        let _set = AddressSet::register(&fabric, &other, &[A]).unwrap();
        assert!(Arc::ptr_eq(&fabric.device_of(A).unwrap(), &other));
        drop(b);
    }

    #[test]
    fn test_detached_set_creates_nothing() {
        let set = AddressSet::default();
        assert_eq!(Connector::new(&set).err(), Some(CmError::InvalidParameter));
        assert!(set.addresses().is_empty());
    }

    #[test]
    fn test_addresses_display() {
        assert_eq!(ep(A, 80).to_string(), "10.0.0.1:80");
        let mut v6 = [0_u8; 16];
        v6[15] = 1;
        assert_eq!(ep(IpAddr::V6(v6), 1).to_string(), "[0:0:0:0:0:0:0:1]:1");
    }
}

// ----- listeners -------------------------------------------------------

mod listener {
    use super::*;

    #[test]
    fn test_listen_port_zero_picks_ephemeral_rule_n3() {
        let net = net();
        let s = server(&net.a);
        let local = s.listener.listen(ep(A, 0)).unwrap();
        assert!((EPHEMERAL_FIRST..=EPHEMERAL_LAST).contains(&local.port));
        assert_eq!(s.listener.local(), Some(local));
        assert!(net.fabric.is_bound(A, local.port));
    }

    #[test]
    fn test_listen_twice_same_port_fails_rule_n7() {
        let net = net();
        let _first = listening(&net.a, ep(A, 5000));
        let second = server(&net.a);
        assert_eq!(
            second.listener.listen(ep(A, 5000)),
            Err(CmError::AddressInUse)
        );
        // The same port on another address of the device is free.
        assert!(second.listener.listen(ep(A2, 5000)).is_ok());
    }

    #[test]
    fn test_listen_on_foreign_address_fails_rule_n3() {
        let net = net();
        let s = server(&net.a);
        assert_eq!(s.listener.listen(ep(B, 5000)), Err(CmError::InvalidAddress));
    }

    #[test]
    fn test_listening_listen_again_is_invalid_state() {
        let net = net();
        let s = listening(&net.a, ep(A, 5000));
        assert_eq!(s.listener.listen(ep(A, 5001)), Err(CmError::InvalidState));
    }

    #[test]
    fn test_wildcard_listener_covers_adapter_addresses_only_rule_n31() {
        let net = net();
        let wild_a = listening(&net.a, ep(ANY, 5000));
        // Another device may listen on the same port: the wildcard does
        // not span devices.
        let wild_b = listening(&net.b, ep(ANY, 5000));
        assert_eq!(
            wild_a.listener.local(),
            Some(ep(ANY, 5000)),
            "the listener reports the wildcard"
        );
        // Covers both of A's addresses, and conflicts with them.
        assert_eq!(
            server(&net.a).listener.listen(ep(A2, 5000)),
            Err(CmError::AddressInUse)
        );
        let qb = side(&net.b, 1);
        let c = client(&net.b);
        c.conn
            .connect(&qb.qp, ep(B, 0), ep(A2, 5000), LIMITS, b"")
            .unwrap();
        let passive = wild_a.next().expect("request on A2");
        assert_eq!(passive.local(), Some(ep(A2, 5000)));
        assert!(wild_b.next().is_none());
        // A request to B reaches B's listener only.
        let qa = side(&net.a, 2);
        let c2 = client(&net.a);
        connects(&c2, &qa, ep(B, 5000)).unwrap();
        assert!(wild_b.next().is_some());
        assert!(wild_a.next().is_none());
    }

    #[test]
    fn test_specific_listener_blocks_wildcard_rule_n31() {
        let net = net();
        let _specific = listening(&net.a, ep(A2, 5000));
        assert_eq!(
            server(&net.a).listener.listen(ep(ANY, 5000)),
            Err(CmError::AddressInUse)
        );
        // IPv6 wildcard is another family.
        let _v6 = server(&net.a)
            .listener
            .listen(ep(IpAddr::unspecified(Family::V6), 5000));
    }

    #[test]
    fn test_ephemeral_ports_exhausted_rule_n3() {
        let net = net();
        let mut endpoints = Vec::new();
        for _ in EPHEMERAL_FIRST..=EPHEMERAL_LAST {
            let e = SharedEndpoint::new(&net.a.set, ep(A, 0)).unwrap();
            assert!(e.local().port >= EPHEMERAL_FIRST);
            endpoints.push(e);
        }
        let s = server(&net.a);
        assert_eq!(s.listener.listen(ep(A, 0)), Err(CmError::TooManyAddresses));
        // Another address of the device still has its own ports.
        assert!(s.listener.listen(ep(A2, 0)).is_ok());
        endpoints.pop();
        let again = server(&net.a);
        assert_eq!(
            again.listener.listen(ep(A, 0)).unwrap().port,
            EPHEMERAL_LAST
        );
    }

    #[test]
    fn test_paused_listener_refuses_rule_n5() {
        let net = net();
        let s = listening(&net.b, ep(B, 5000));
        s.listener.pause(true);
        let (a, c) = connecting(&net.a);
        assert_eq!(
            connects(&c, &a, ep(B, 5000)),
            Err(CmError::ConnectionRefused)
        );
        assert!(s.next().is_none());
        // The refused attempt left nothing behind: the same connector and
        // QP connect once the listener resumes (N28).
        assert_eq!(c.conn.state(), Some(ConnState::Idle));
        s.listener.pause(false);
        connects(&c, &a, ep(B, 5000)).unwrap();
        assert!(s.next().is_some());
    }

    #[test]
    fn test_closing_listener_refuses_and_keeps_endpoint_rule_n6_n7() {
        let net = net();
        let (s, _a, _b, _active, passive) = requested(&net, b"");
        assert_eq!(s.listener.close(), CloseState::Done);
        // N6: refused at once.
        let a2 = side(&net.a, 2);
        let c = client(&net.a);
        assert_eq!(
            connects(&c, &a2, ep(B, 5000)),
            Err(CmError::ConnectionRefused)
        );
        // N7: the accepted connector still holds the endpoint.
        assert!(net.fabric.is_bound(B, 5000));
        assert_eq!(
            server(&net.b).listener.listen(ep(B, 5000)),
            Err(CmError::AddressInUse)
        );
        drop(passive);
        assert!(!net.fabric.is_bound(B, 5000));
        assert!(server(&net.b).listener.listen(ep(B, 5000)).is_ok());
    }

    #[test]
    fn test_backlog_full_refused_rule_n12() {
        let net = net();
        let s = listening(&net.b, ep(B, 5000));
        let mut keep = Vec::new();
        for n in 0..BACKLOG {
            let a = side(&net.a, n);
            let c = client(&net.a);
            connects(&c, &a, ep(B, 5000)).unwrap();
            keep.push((a, c));
        }
        let a = side(&net.a, 99);
        let c = client(&net.a);
        assert_eq!(
            connects(&c, &a, ep(B, 5000)),
            Err(CmError::ConnectionRefused)
        );
        // Answering one makes room.
        let first = s.next().unwrap();
        first.reject(b"").unwrap();
        connects(&c, &a, ep(B, 5000)).unwrap();
    }

    #[test]
    fn test_listener_close_pends_while_incoming_runs() {
        struct Closer {
            listener: Mutex<Option<Arc<Listener>>>,
            seen: Mutex<Vec<CloseState>>,
            closed: Mutex<usize>,
        }
        impl ListenerEvents for Closer {
            fn incoming(&self, request: Connector) {
                let listener = self.listener.lock().unwrap().clone().unwrap();
                self.seen.lock().unwrap().push(listener.close());
                drop(request);
            }
            fn listen_completed(&self, result: Result<(), CmError>) {
                panic!("no listen pends on the fabric: {result:?}");
            }
            fn closed(&self) {
                *self.closed.lock().unwrap() += 1;
            }
        }
        let net = net();
        let closer = Arc::new(Closer {
            listener: Mutex::new(None),
            seen: Mutex::new(Vec::new()),
            closed: Mutex::new(0),
        });
        let listener = Arc::new(Listener::new(&net.b.set, Arc::clone(&closer) as _).unwrap());
        listener.listen(ep(B, 5000)).unwrap();
        *closer.listener.lock().unwrap() = Some(Arc::clone(&listener));
        let (a, c) = connecting(&net.a);
        connects(&c, &a, ep(B, 5000)).unwrap();
        assert_eq!(*closer.seen.lock().unwrap(), vec![CloseState::Pending]);
        assert_eq!(*closer.closed.lock().unwrap(), 1);
        expect_events(&c, &[Ev::Connect(Err(CmError::ConnectionRefused))]);
        *closer.listener.lock().unwrap() = None;
        assert_eq!(net.fabric.listener_count(), 0);
    }
}

// ----- active Connecting / passive Requested -----------------------------

mod requested {
    use super::*;

    #[test]
    fn test_connect_without_listener_refused_rule_n12() {
        let net = net();
        let (a, c) = connecting(&net.a);
        assert_eq!(
            connects(&c, &a, ep(B, 5000)),
            Err(CmError::ConnectionRefused)
        );
        assert_eq!(
            net.a
                .device
                .counters
                .connect_failure
                .load(Ordering::Relaxed),
            1
        );
        // The dedicated endpoint went back (N8).
        assert!(!net.fabric.is_bound(A, 49152));
    }

    #[test]
    fn test_connect_bad_destinations_rule_n12() {
        let net = net();
        let (a, c) = connecting(&net.a);
        let nobody = IpAddr::V4([10, 9, 9, 9]);
        let v6 = IpAddr::V6([0xfe; 16]);
        for (src, dst, error) in [
            (ep(A, 0), ep(nobody, 1), CmError::HostUnreachable),
            (ep(A, 0), ep(v6, 1), CmError::NetworkUnreachable),
            (ep(A, 0), ep(ANY, 1), CmError::InvalidAddress),
            (ep(A, 0), ep(B, 0), CmError::InvalidAddress),
            (ep(B, 0), ep(B, 1), CmError::InvalidAddress),
        ] {
            assert_eq!(c.conn.connect(&a.qp, src, dst, LIMITS, b""), Err(error));
        }
    }

    #[test]
    fn test_connect_delivers_request_with_private_data_rule_n4_n18() {
        let net = net();
        let (_s, _a, _b, active, passive) = requested(&net, b"caller data");
        let (data, bytes) = data_of(&passive.conn);
        assert_eq!(bytes, b"caller data");
        assert_eq!(data.length, 11);
        // The passive side sees the active side's view mirrored (N20).
        assert_eq!(data.limits, ReadLimits::new(16, 16));
        assert_eq!(passive.conn.peer(), active.conn.local());
        assert_eq!(passive.conn.local(), Some(ep(B, 5000)));
        assert_eq!(active.conn.peer(), Some(ep(B, 5000)));
        // N19: nothing to read on the active side before the answer.
        assert_eq!(
            active.conn.connection_data(&mut []),
            Err(CmError::ConnectionInvalid)
        );
    }

    #[test]
    fn test_connection_data_short_buffer_reports_size_rule_n18() {
        let net = net();
        let (_s, _a, _b, _active, passive) = requested(&net, b"0123456789");
        let mut small = [0_u8; 4];
        let data = passive.conn.connection_data(&mut small).unwrap();
        assert_eq!((data.length, data.copied), (10, 4));
        assert_eq!(&small, b"0123");
    }

    #[test]
    fn test_connect_private_data_too_long_rule_n17() {
        let net = net();
        let _s = listening(&net.b, ep(B, 5000));
        let (a, c) = connecting(&net.a);
        let max = Limits::DEFAULT.max_caller_data as usize;
        assert_eq!(
            c.conn
                .connect(&a.qp, ep(A, 0), ep(B, 5000), LIMITS, &vec![0; max + 1]),
            Err(CmError::PrivateDataTooLong)
        );
        c.conn
            .connect(&a.qp, ep(A, 0), ep(B, 5000), LIMITS, &vec![0; max])
            .unwrap();
    }

    #[test]
    fn test_connect_qp_checks() {
        let net = net();
        let _s = listening(&net.b, ep(B, 5000));
        let foreign = side(&net.b, 1);
        let c = client(&net.a);
        assert_eq!(
            c.conn
                .connect(&foreign.qp, ep(A, 0), ep(B, 5000), LIMITS, b""),
            Err(CmError::InvalidParameter)
        );
        let a = side(&net.a, 1);
        connects(&c, &a, ep(B, 5000)).unwrap();
        // The QP is tied to `c` now.
        let d = client(&net.a);
        assert_eq!(
            connects(&d, &a, ep(B, 5000)),
            Err(CmError::ConnectionInvalid)
        );
        // And `c` is busy.
        let a2 = side(&net.a, 2);
        assert_eq!(
            connects(&c, &a2, ep(B, 5000)),
            Err(CmError::ConnectionInvalid)
        );
    }

    #[test]
    fn test_connect_dedicated_endpoint_in_use_rule_n8() {
        let net = net();
        let _local = listening(&net.a, ep(A, 6000));
        let _s = listening(&net.b, ep(B, 5000));
        let (a, c) = connecting(&net.a);
        assert_eq!(
            c.conn.connect(&a.qp, ep(A, 6000), ep(B, 5000), LIMITS, b""),
            Err(CmError::AddressInUse)
        );
        c.conn
            .connect(&a.qp, ep(A, 6001), ep(B, 5000), LIMITS, b"")
            .unwrap();
        assert_eq!(c.conn.local(), Some(ep(A, 6001)));
        // N8: the dedicated endpoint is the connector's until it closes.
        assert!(net.fabric.is_bound(A, 6001));
        drop(c);
        assert!(!net.fabric.is_bound(A, 6001));
    }

    #[test]
    fn test_reject_refuses_connect_rule_n16() {
        let net = net();
        let (_s, a, _b, active, passive) = requested(&net, b"");
        passive.conn.reject(b"no thanks").unwrap();
        expect_events(&active, &[Ev::Connect(Err(CmError::ConnectionRefused))]);
        assert_eq!(active.conn.state(), Some(ConnState::Failed));
        assert_eq!(data_of(&active.conn).1, b"no thanks");
        // N28: the QP is untouched and free again.
        assert_eq!(a.qp.state(), QpState::Idle);
        let again = client(&net.a);
        connects(&again, &a, ep(B, 5000)).unwrap();
        // Reject is over: a second answer is invalid.
        assert_eq!(passive.conn.reject(b""), Err(CmError::ConnectionInvalid));
        assert_eq!(
            passive.conn.accept(&side(&net.b, 2).qp, LIMITS, b""),
            Err(CmError::ConnectionInvalid)
        );
    }

    #[test]
    fn test_reject_private_data_too_long_rule_n17() {
        let net = net();
        let (_s, _a, b, _active, passive) = requested(&net, b"");
        let too_long = vec![0; Limits::DEFAULT.max_callee_data as usize + 1];
        assert_eq!(
            passive.conn.reject(&too_long),
            Err(CmError::PrivateDataTooLong)
        );
        assert_eq!(
            passive.conn.accept(&b.qp, LIMITS, &too_long),
            Err(CmError::PrivateDataTooLong)
        );
        assert_eq!(passive.conn.state(), Some(ConnState::Requested));
    }

    #[test]
    fn test_requested_close_refuses_connect_rule_n16() {
        let net = net();
        let (_s, _a, _b, active, passive) = requested(&net, b"");
        drop(passive);
        expect_events(&active, &[Ev::Connect(Err(CmError::ConnectionRefused))]);
    }

    #[test]
    fn test_connecting_close_cancels_and_peer_sees_abort_rule_n15_n16() {
        let net = net();
        let (_s, _a, b, active, passive) = requested(&net, b"");
        let events = Arc::clone(&active.events);
        assert_eq!(active.conn.close(), CloseState::Pending);
        assert_eq!(
            events.take(),
            vec![Ev::Connect(Err(CmError::Cancelled)), Ev::Closed]
        );
        drop(active);
        assert_eq!(
            passive.conn.accept(&b.qp, LIMITS, b""),
            Err(CmError::ConnectionAborted)
        );
        assert_eq!(passive.conn.reject(b""), Err(CmError::ConnectionInvalid));
        assert_eq!(b.qp.state(), QpState::Idle);
    }

    #[test]
    fn test_reject_after_abandon_returns_aborted_rule_n16() {
        let net = net();
        let (_s, _a, _b, active, passive) = requested(&net, b"");
        expect_reject_aborted_once_gone(&passive, active, "the active side still waits");
    }

    #[test]
    fn test_connecting_waits_for_the_passive_side_rule_n29() {
        let net = net();
        let (_s, _a, _b, active, _passive) = requested(&net, b"");
        crate::kernel::deferred::flush();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(active.conn.state(), Some(ConnState::Connecting));
        assert!(active.events.take().is_empty());
    }
}

// ----- active Replied / passive Accepting ---------------------------------

mod replied {
    use super::*;

    fn replied(net: &Net) -> (Server, Side, Side, Client, Client) {
        let (s, a, b, active, passive) = requested(net, b"ping");
        passive.conn.accept(&b.qp, LIMITS, b"pong").unwrap();
        expect_events(&active, &[Ev::Connect(Ok(()))]);
        assert_eq!(active.conn.state(), Some(ConnState::Replied));
        assert_eq!(passive.conn.state(), Some(ConnState::Accepting));
        (s, a, b, active, passive)
    }

    #[test]
    fn test_accept_completes_connect_with_callee_data_rule_n13_n18() {
        let net = net();
        let (_s, _a, _b, active, passive) = replied(&net);
        let (data, bytes) = data_of(&active.conn);
        assert_eq!(bytes, b"pong");
        assert_eq!(data.length, 4);
        assert!(passive.events.take().is_empty(), "Accept still pending");
    }

    #[test]
    fn test_read_limits_negotiated_rule_n20() {
        let net = net();
        let (s, a, b, active) = parts(&net, &net.b, ep(B, 5000));
        // Outbound 500 is lowered to the adapter's 128.
        active
            .conn
            .connect(&a.qp, ep(A, 0), ep(B, 5000), ReadLimits::new(4, 500), b"")
            .unwrap();
        let passive = wrap(s.next().unwrap());
        // Before Accept: the active side's offer, mirrored and clamped.
        assert_eq!(data_of(&passive.conn).0.limits, ReadLimits::new(128, 4));
        passive
            .conn
            .accept(&b.qp, ReadLimits::new(8, 2), b"")
            .unwrap();
        // Effective: inbound = min(4, 2), outbound = min(128, 8).
        assert_eq!(data_of(&active.conn).0.limits, ReadLimits::new(2, 8));
        active.conn.complete_connect().unwrap();
        assert_eq!(a.qp.read_limits(), (2, 8));
        assert_eq!(b.qp.read_limits(), (8, 2));
    }

    #[test]
    fn test_complete_connect_establishes_rule_n13() {
        let net = net();
        let (_s, a, b, active, passive) = replied(&net);
        active.conn.complete_connect().unwrap();
        expect_events(&passive, &[Ev::Accept(Ok(()))]);
        assert_eq!(a.qp.state(), QpState::Connected);
        assert_eq!(b.qp.state(), QpState::Connected);
        let c = &net.a.device.counters;
        assert_eq!(c.connect.load(Ordering::Relaxed), 1);
        assert_eq!(c.active_connection.load(Ordering::Relaxed), 1);
        assert_eq!(net.b.device.counters.accept.load(Ordering::Relaxed), 1);
        // N14: only once.
        assert_eq!(
            active.conn.complete_connect(),
            Err(CmError::ConnectionInvalid)
        );
    }

    #[test]
    fn test_active_reject_aborts_accept_rule_n16() {
        let net = net();
        let (_s, a, b, active, passive) = replied(&net);
        active.conn.reject(b"").unwrap();
        expect_events(&passive, &[Ev::Accept(Err(CmError::ConnectionAborted))]);
        assert_eq!((a.qp.state(), b.qp.state()), (QpState::Idle, QpState::Idle));
    }

    #[test]
    fn test_complete_connect_after_passive_closed_aborted_rule_n14() {
        let net = net();
        let (_s, _a, _b, active, passive) = replied(&net);
        let events = Arc::clone(&passive.events);
        drop(passive);
        assert_eq!(
            events.take(),
            vec![Ev::Accept(Err(CmError::Cancelled)), Ev::Closed]
        );
        assert_eq!(
            active.conn.complete_connect(),
            Err(CmError::ConnectionAborted)
        );
        assert_eq!(active.conn.reject(b""), Err(CmError::ConnectionInvalid));
    }

    #[test]
    fn test_reject_after_passive_closed_aborted_rule_n16() {
        let net = net();
        let (_s, _a, _b, active, passive) = replied(&net);
        expect_reject_aborted_once_gone(&active, passive, "the passive side still accepts");
    }

    #[test]
    fn test_complete_connect_with_flushed_qp_rule_n14() {
        let net = net();
        let (_s, a, _b, active, passive) = replied(&net);
        a.qp.flush();
        assert_eq!(
            active.conn.complete_connect(),
            Err(CmError::ConnectionInvalid)
        );
        expect_events(&passive, &[Ev::Accept(Err(CmError::ConnectionAborted))]);
        // The other way round.
        let (_s2, _a2, b2, active2, passive2) = requested_on(&net, 5001, (3, 4), b"");
        passive2.conn.accept(&b2.qp, LIMITS, b"").unwrap();
        b2.qp.flush();
        assert_eq!(
            active2.conn.complete_connect(),
            Err(CmError::ConnectionAborted)
        );
        expect_events(&passive2, &[Ev::Accept(Err(CmError::ConnectionInvalid))]);
    }
}

// ----- Established ---------------------------------------------------------

mod established {
    use super::*;

    #[test]
    fn test_connections_and_endpoints_reported_rule_a19_a20() {
        let (net, c) = connected();
        let _e = SharedEndpoint::new(&net.a.set, ep(A, 9000)).unwrap();
        let mut conns = [ConnectionInfo {
            local: ep(ANY, 0),
            remote: ep(ANY, 0),
        }; 4];
        assert_eq!(net.fabric.connections(&net.b.device, &mut conns), 1);
        assert_eq!(conns[0].local, ep(B, 4000));
        assert_eq!(Some(conns[0].remote), c.active.conn.local());
        assert_eq!(net.fabric.connections(&net.a.device, &mut []), 1);
        let mut ends = [LocalEndpointInfo {
            local: ep(ANY, 0),
            listener: false,
        }; 4];
        assert_eq!(net.fabric.local_endpoints(&net.b.device, &mut ends), 1);
        assert_eq!(
            ends[0],
            LocalEndpointInfo {
                local: ep(B, 4000),
                listener: true
            }
        );
        // The active side's dedicated endpoint is not listed, its shared one is.
        assert_eq!(net.fabric.local_endpoints(&net.a.device, &mut ends), 1);
        assert_eq!(
            ends[0],
            LocalEndpointInfo {
                local: ep(A, 9000),
                listener: false
            }
        );
    }

    #[test]
    fn test_established_addresses_rule_n22() {
        let (_net, c) = connected();
        assert_eq!(c.active.conn.peer(), Some(ep(B, 4000)));
        assert_eq!(c.passive.conn.local(), Some(ep(B, 4000)));
        assert_eq!(c.passive.conn.peer(), c.active.conn.local());
    }

    #[test]
    fn test_disconnect_waits_for_peer_rule_x1_x2_n24() {
        let (net, c) = connected();
        let buf = c.b.buffer(64, 0, Access::LOCAL_WRITE);
        c.b.qp.post_receive(9, &[buf.sge(0, 64)]).unwrap();
        c.active.conn.disconnect().unwrap();
        // X1 (a): pending until the peer's graceful disconnect arrives.
        assert!(c.active.events.take().is_empty());
        assert_eq!(c.active.conn.state(), Some(ConnState::Disconnecting));
        // X2: the peer is told; N24: its work is not flushed for that.
        expect_events(&c.passive, &[Ev::Indicated]);
        assert_eq!(c.b.qp.state(), QpState::Connected);
        assert!(c.b.rcq.drain().is_empty());
        // The peer answers: both complete successfully.
        c.passive.conn.disconnect().unwrap();
        expect_events(&c.passive, &[Ev::Disconnect(Ok(()))]);
        expect_events(&c.active, &[Ev::Disconnect(Ok(()))]);
        // X6: both QPs are out of the connection, the receive flushed.
        assert_eq!(c.a.qp.state(), QpState::Disconnected);
        assert_eq!(c.b.qp.state(), QpState::Disconnected);
        assert_eq!(c.b.rcq.drain()[0].status, WcStatus::Cancelled);
        assert_eq!(c.active.conn.state(), Some(ConnState::Disconnected));
        assert_eq!(
            net.a
                .device
                .counters
                .active_connection
                .load(Ordering::Relaxed),
            0
        );
    }

    #[test]
    fn test_disconnect_after_peer_disconnected_rule_x1_x2() {
        let (_net, c) = connected();
        c.passive.conn.disconnect().unwrap();
        expect_events(&c.active, &[Ev::Indicated]);
        assert!(
            c.passive.events.take().is_empty(),
            "waits for the active side"
        );
        // The peer's graceful disconnect arrived already: no wait.
        c.active.conn.disconnect().unwrap();
        expect_events(&c.active, &[Ev::Disconnect(Ok(()))]);
        expect_events(&c.passive, &[Ev::Disconnect(Ok(()))]);
    }

    #[test]
    fn test_peer_close_answers_the_wait_rule_x1() {
        let (_net, c) = connected();
        c.active.conn.disconnect().unwrap();
        let Conn {
            active, passive, ..
        } = c;
        drop(passive);
        expect_events(&active, &[Ev::Disconnect(Ok(()))]);
    }

    #[test]
    fn test_simultaneous_disconnect_rule_x3() {
        for _ in 0..50 {
            let (_net, c) = connected();
            let barrier = crate::kernel::testing::Barrier::new(2);
            std::thread::scope(|scope| {
                scope.spawn(|| {
                    barrier.wait();
                    c.active.conn.disconnect().unwrap();
                });
                barrier.wait();
                c.passive.conn.disconnect().unwrap();
            });
            crate::kernel::deferred::flush();
            for side in [&c.active, &c.passive] {
                let events = side.events.take();
                let completions = events
                    .iter()
                    .filter(|e| **e == Ev::Disconnect(Ok(())))
                    .count();
                assert_eq!(completions, 1, "{events:?}");
                assert!(events.iter().filter(|e| **e == Ev::Indicated).count() <= 1);
                assert_eq!(
                    events.len() - completions,
                    events.iter().filter(|e| **e == Ev::Indicated).count()
                );
            }
        }
    }

    #[test]
    fn test_close_is_graceful_disconnect_towards_peer() {
        let (net, c) = connected();
        let Conn {
            active,
            passive,
            a,
            b,
            server,
        } = c;
        let events = Arc::clone(&active.events);
        // Pending until the QPs are out of the connection; no request
        // completes, only the close.
        assert_eq!(active.conn.close(), CloseState::Pending);
        assert_eq!(events.take(), vec![Ev::Closed]);
        expect_events(&passive, &[Ev::Indicated]);
        passive.conn.disconnect().unwrap();
        expect_events(&passive, &[Ev::Disconnect(Ok(()))]);
        drop((active, passive, a, b, server));
        assert_eq!(net.fabric.connector_count(), 0);
    }

    #[test]
    fn test_error_terminated_connection_indicates_abort_rule_e5_x2() {
        let (_net, c) = connected();
        let local = c.a.buffer(64, 1, Access::LOCAL_WRITE);
        // A Write with a token the peer does not know: remote access
        // error, and the connection ends (E5).
        c.a.qp
            .post_write(
                1,
                Payload::Sges(&[local.sge(0, 8)]),
                0x1000,
                0xdead,
                WrFlags::empty(),
            )
            .unwrap();
        crate::kernel::deferred::flush();
        let completions = c.a.scq.drain();
        assert_eq!(completions.len(), 1);
        assert_ne!(completions[0].status, WcStatus::Success);
        expect_events(&c.active, &[Ev::Indicated]);
        expect_events(&c.passive, &[Ev::Indicated]);
        // X1: the disconnect of an aborted connection fails.
        c.active.conn.disconnect().unwrap();
        expect_events(&c.active, &[DISCONNECT_ABORTED]);
        c.passive.conn.disconnect().unwrap();
        expect_events(&c.passive, &[DISCONNECT_ABORTED]);
    }

    #[test]
    fn test_abort_all_ends_the_devices_connections_rule_a15_x2() {
        let (net, c) = connected();
        let local = c.b.buffer(64, 1, Access::LOCAL_WRITE);
        c.b.qp.post_receive(7, &[local.sge(0, 64)]).unwrap();
        // NDK disabled on B's adapter: its connection is aborted.
        assert_eq!(net.fabric.abort_all(&net.b.device), 1);
        crate::kernel::deferred::flush();
        // Both consumers are told (X2); B's outstanding receive is
        // cancelled (E5); the connection is no longer reported (A19).
        expect_events(&c.active, &[Ev::Indicated]);
        expect_events(&c.passive, &[Ev::Indicated]);
        let cancelled = c.b.rcq.drain();
        assert_eq!(cancelled.len(), 1);
        assert_eq!(cancelled[0].status, WcStatus::Cancelled);
        assert_eq!(net.fabric.connections(&net.b.device, &mut []), 0);
        assert_eq!(
            net.fabric.abort_all(&net.b.device),
            0,
            "nothing left to abort"
        );
    }

    #[test]
    fn test_peer_qp_closed_indicates_once_rule_n24() {
        let (_net, c) = connected();
        // The passive consumer closes its QP without disconnecting: an
        // abort for the active side.
        c.b.qp.close();
        expect_events(&c.active, &[Ev::Indicated]);
        // The passive consumer disconnects: it waits for the active side,
        // which gets no second indication.
        c.passive.conn.disconnect().unwrap();
        expect_events(&c.active, &[]);
        expect_events(&c.passive, &[]);
        c.active.conn.disconnect().unwrap();
        expect_events(&c.active, &[DISCONNECT_ABORTED]);
        expect_events(&c.passive, &[Ev::Disconnect(Ok(()))]);
    }

    #[test]
    fn test_abort_ends_the_wait_rule_x1() {
        let (_net, c) = connected();
        c.active.conn.disconnect().unwrap();
        expect_events(&c.passive, &[Ev::Indicated]);
        // The peer's QP goes away without its disconnect: an abort.
        c.b.qp.close();
        expect_events(&c.active, &[DISCONNECT_ABORTED]);
    }

    #[test]
    fn test_no_reuse_after_disconnect_rule_x5() {
        let (net, c) = connected();
        c.active.conn.disconnect().unwrap();
        assert_eq!(c.active.conn.disconnect(), Err(CmError::ConnectionInvalid));
        assert_eq!(
            c.active
                .conn
                .connect(&c.a.qp, ep(A, 0), ep(B, 4000), LIMITS, b""),
            Err(CmError::ConnectionInvalid)
        );
        let fresh = client(&net.a);
        assert_eq!(
            fresh
                .conn
                .connect(&c.a.qp, ep(A, 0), ep(B, 4000), LIMITS, b""),
            Err(CmError::ConnectionInvalid),
            "the disconnected QP cannot be reused"
        );
    }

    #[test]
    fn test_disconnect_with_outstanding_work_flushes_rule_x7() {
        let (_net, c) = connected();
        let buf = c.a.buffer(64, 1, Access::LOCAL_WRITE);
        // A receive, and a Send the peer has no receive for (it waits).
        c.a.qp.post_receive(7, &[buf.sge(0, 32)]).unwrap();
        c.a.qp
            .post_send(8, Payload::Sges(&[buf.sge(32, 8)]), WrFlags::empty(), None)
            .unwrap();
        assert!(c.a.scq.drain().is_empty());
        c.active.conn.disconnect().unwrap();
        c.passive.conn.disconnect().unwrap();
        expect_events(&c.active, &[Ev::Disconnect(Ok(()))]);
        let sends = c.a.scq.drain();
        let receives = c.a.rcq.drain();
        assert_eq!(sends.len(), 1);
        assert_eq!(sends[0].status, WcStatus::Cancelled);
        assert_eq!(receives.len(), 1);
        assert_eq!(receives[0].status, WcStatus::Cancelled);
        assert!(c.a.qp.is_quiescent());
    }

    #[test]
    fn test_disconnect_deferred_engine_waits_for_dma_rule_x1() {
        let net = net_with(EngineMode::Deferred);
        let c = established(&net);
        let src = c.a.pattern(1 << 20, 3, Access::LOCAL_WRITE);
        let dst =
            c.b.buffer(1 << 20, 0, Access::LOCAL_WRITE | Access::REMOTE_WRITE);
        for n in 0..16 {
            c.a.qp
                .post_write(
                    n,
                    Payload::Sges(&[src.sge(0, 1 << 20)]),
                    dst.raddr(0),
                    dst.rkey(),
                    WrFlags::empty(),
                )
                .unwrap();
        }
        c.active.conn.disconnect().unwrap();
        c.passive.conn.disconnect().unwrap();
        crate::kernel::deferred::flush();
        expect_events(&c.active, &[Ev::Disconnect(Ok(()))]);
        expect_events(&c.passive, &[Ev::Indicated, Ev::Disconnect(Ok(()))]);
        assert!(c.a.qp.is_quiescent() && c.b.qp.is_quiescent());
        // Every request completed, successfully or cancelled (X7).
        assert_eq!(c.a.scq.drain().len(), 16);
    }

    #[test]
    fn test_close_during_disconnect_finishes_disconnect_first_rule_l20_l21() {
        let (_net, c) = connected();
        let Conn {
            active, passive, b, ..
        } = c;
        active.conn.disconnect().unwrap();
        let events = Arc::clone(&active.events);
        // L20: the close stops the wait for the peer; the Disconnect
        // completes (cancelled) before the close does.
        drop(active);
        assert_eq!(
            events.take(),
            vec![Ev::Disconnect(Err(CmError::Cancelled)), Ev::Closed]
        );
        assert_eq!(b.qp.state(), QpState::Disconnected);
        // The peer had its indication; its own disconnect succeeds.
        expect_events(&passive, &[Ev::Indicated]);
        passive.conn.disconnect().unwrap();
        expect_events(&passive, &[Ev::Disconnect(Ok(()))]);
    }
}

// ----- shared endpoints ------------------------------------------------------

mod shared {
    use super::*;

    #[test]
    fn test_shared_endpoint_four_tuple_rule_n11() {
        let net = net();
        let _s1 = listening(&net.b, ep(B, 5000));
        let _s2 = listening(&net.b, ep(B, 5001));
        let e = SharedEndpoint::new(&net.a.set, ep(A, 7000)).unwrap();
        let (a1, a2, a3) = (side(&net.a, 1), side(&net.a, 2), side(&net.a, 3));
        let (c1, c2, c3) = (client(&net.a), client(&net.a), client(&net.a));
        c1.conn
            .connect_shared(&a1.qp, &e, ep(B, 5000), LIMITS, b"")
            .unwrap();
        assert_eq!(
            c2.conn.connect_shared(&a2.qp, &e, ep(B, 5000), LIMITS, b""),
            Err(CmError::AddressAlreadyExists)
        );
        c3.conn
            .connect_shared(&a3.qp, &e, ep(B, 5001), LIMITS, b"")
            .unwrap();
        assert_eq!(c1.conn.local(), Some(ep(A, 7000)));
        assert_eq!(c3.conn.local(), Some(ep(A, 7000)));
        // Once the first connection is gone its tuple is free again.
        drop(c1);
        c2.conn
            .connect_shared(&a2.qp, &e, ep(B, 5000), LIMITS, b"")
            .unwrap();
    }

    #[test]
    fn test_shared_endpoint_reference_counted_rule_n10() {
        let net = net();
        let _s = listening(&net.b, ep(B, 5000));
        let e = SharedEndpoint::new(&net.a.set, ep(A, 0)).unwrap();
        let local = e.local();
        assert!(local.port >= EPHEMERAL_FIRST, "N9: port 0 picks one");
        assert_eq!(
            SharedEndpoint::new(&net.a.set, local).err(),
            Some(CmError::AddressInUse)
        );
        let (a, c) = connecting(&net.a);
        c.conn
            .connect_shared(&a.qp, &e, ep(B, 5000), LIMITS, b"")
            .unwrap();
        drop(e);
        assert!(net.fabric.is_bound(A, local.port));
        drop(c);
        assert!(!net.fabric.is_bound(A, local.port));
    }

    #[test]
    fn test_shared_endpoint_foreign_address_rule_n9() {
        let net = net();
        assert_eq!(
            SharedEndpoint::new(&net.a.set, ep(B, 1)).err(),
            Some(CmError::InvalidAddress)
        );
        let e = SharedEndpoint::new(&net.b.set, ep(B, 1)).unwrap();
        let a = side(&net.a, 1);
        assert_eq!(
            client(&net.a)
                .conn
                .connect_shared(&a.qp, &e, ep(B, 2), LIMITS, b""),
            Err(CmError::InvalidParameter)
        );
    }
}

// ----- loopback and IPv6 -------------------------------------------------------

mod loopback {
    use super::*;

    #[test]
    fn test_loopback_on_one_device_rule_n27() {
        let net = net();
        let (s, a1, a2, active) = parts(&net, &net.a, ep(A, 5000));
        connects_from(&active, &a1, ep(ANY, 0), ep(A, 5000)).unwrap();
        assert_eq!(
            active.conn.local().unwrap().ip,
            A,
            "wildcard source resolved"
        );
        let passive = wrap(s.next().unwrap());
        passive.conn.accept(&a2.qp, LIMITS, b"").unwrap();
        active.conn.complete_connect().unwrap();
        assert_eq!(a1.qp.state(), QpState::Connected);
        active.conn.disconnect().unwrap();
        expect_events(&passive, &[Ev::Accept(Ok(())), Ev::Indicated]);
    }

    #[test]
    fn test_ipv6_connection_rule_n1() {
        let fabric = Fabric::new();
        let mut x = [0_u8; 16];
        x[0] = 0xfd;
        x[15] = 1;
        let mut y = x;
        y[15] = 2;
        let (x, y) = (IpAddr::V6(x), IpAddr::V6(y));
        let hx = host(&fabric, &[x], EngineMode::Inline);
        let hy = host(&fabric, &[y], EngineMode::Inline);
        let s = listening(&hy, ep(IpAddr::unspecified(Family::V6), 5000));
        let qx = side(&hx, 1);
        let qy = side(&hy, 2);
        let active = client(&hx);
        active
            .conn
            .connect(&qx.qp, ep(x, 0), ep(y, 5000), LIMITS, b"v6")
            .unwrap();
        let passive = wrap(s.next().unwrap());
        assert_eq!(data_of(&passive.conn).1, b"v6");
        passive.conn.accept(&qy.qp, LIMITS, b"").unwrap();
        active.conn.complete_connect().unwrap();
        assert_eq!(passive.conn.local(), Some(ep(y, 5000)));
        assert_eq!(qx.qp.state(), QpState::Connected);
    }
}

// ----- addresses that come and go (AddressSet::add / remove) -----------

mod changing {
    use super::*;

    const C: IpAddr = IpAddr::V4([10, 0, 0, 9]);
    const C6: IpAddr = IpAddr::V6([0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9]);

    /// A device with an empty set, as the NDIS path registers it, and a
    /// second, empty opening of it (N32).
    fn bare(fabric: &Arc<Fabric>) -> (Host, AddressSet) {
        let h = host(fabric, &[], EngineMode::Inline);
        let opening = AddressSet::register(fabric, &h.device, &[]).unwrap();
        (h, opening)
    }

    #[test]
    fn test_added_address_is_owned_by_every_opening_rule_n1_n32() {
        let net = net();
        let (mut h, opening) = bare(&net.fabric);
        assert!(h.set.add(C).unwrap());
        assert!(!h.set.add(C).unwrap(), "adding twice is one address");
        assert!(h.set.add(C6).unwrap());
        assert!(Arc::ptr_eq(&net.fabric.device_of(C).unwrap(), &h.device));
        assert!(Arc::ptr_eq(&net.fabric.device_of(C6).unwrap(), &h.device));
        // An opening registered before the address came listens on it.
        let requests = Arc::new(Requests::default());
        let l = Listener::new(&opening, Arc::clone(&requests) as _).unwrap();
        assert_eq!(l.listen(ep(C6, 80)).unwrap(), ep(C6, 80));
        assert_eq!(h.set.addresses(), &[C, C6]);
    }

    #[test]
    fn test_add_checks_the_address_rule_n1() {
        let net = net();
        let (mut h, _opening) = bare(&net.fabric);
        assert_eq!(h.set.add(ANY), Err(CmError::InvalidAddress));
        assert_eq!(h.set.add(B), Err(CmError::AddressInUse));
        assert!(h.set.addresses().is_empty());
        let mut detached = AddressSet::default();
        assert_eq!(detached.add(C), Err(CmError::InvalidParameter));
        assert!(!detached.remove(C));
    }

    #[test]
    fn test_removed_address_refuses_new_endpoints_rule_n3() {
        let net = net();
        let (mut h, opening) = bare(&net.fabric);
        h.set.add(C).unwrap();
        assert!(h.set.remove(C));
        assert!(!h.set.remove(C));
        assert!(net.fabric.device_of(C).is_none());
        let requests = Arc::new(Requests::default());
        let l = Listener::new(&opening, Arc::clone(&requests) as _).unwrap();
        assert_eq!(l.listen(ep(C, 80)), Err(CmError::InvalidAddress));
        assert_eq!(
            SharedEndpoint::new(&opening, ep(C, 0)).err(),
            Some(CmError::InvalidAddress)
        );
        let s = side(&h, 1);
        let c = wrap(Connector::new(&opening).unwrap());
        let _server = listening(&net.b, ep(B, 80));
        assert_eq!(
            c.conn.connect(&s.qp, ep(C, 0), ep(B, 80), LIMITS, b""),
            Err(CmError::InvalidAddress)
        );
        // A device without an address of the family has nothing to pick
        // for a wildcard source either.
        assert_eq!(
            c.conn.connect(&s.qp, ep(ANY, 0), ep(B, 80), LIMITS, b""),
            Err(CmError::InvalidAddress)
        );
        // The address is free for another device now.
        let other = inline_device();
        let mut theirs = AddressSet::register(&net.fabric, &other, &[]).unwrap();
        assert!(theirs.add(C).unwrap());
        assert!(Arc::ptr_eq(&net.fabric.device_of(C).unwrap(), &other));
    }

    #[test]
    fn test_listener_on_removed_address_stays_bound_and_hears_again_when_it_returns() {
        let net = net();
        let (mut h, opening) = bare(&net.fabric);
        h.set.add(C).unwrap();
        let server = server_on(&opening);
        server.listener.listen(ep(C, 80)).unwrap();
        h.set.remove(C);
        // N7: the endpoint stays the listener's.
        assert!(net.fabric.is_bound(C, 80));
        let (a, c) = connecting(&net.a);
        assert_eq!(connects(&c, &a, ep(C, 80)), Err(CmError::HostUnreachable));
        assert!(server.next().is_none());
        // The address comes back: the same listener hears requests again.
        h.set.add(C).unwrap();
        connects(&c, &a, ep(C, 80)).unwrap();
        assert!(server.next().is_some());
    }

    #[test]
    fn test_wildcard_listener_follows_the_addresses_rule_n31() {
        let net = net();
        let (mut h, opening) = bare(&net.fabric);
        let server = server_on(&opening);
        server.listener.listen(ep(ANY, 81)).unwrap();
        let (a, c) = connecting(&net.a);
        assert_eq!(connects(&c, &a, ep(C, 81)), Err(CmError::HostUnreachable));
        h.set.add(C).unwrap();
        connects(&c, &a, ep(C, 81)).unwrap();
        assert!(server.next().is_some());
        drop(server);
    }

    #[test]
    fn test_shared_endpoint_on_removed_address_connects_no_more_rule_n3() {
        let net = net();
        let (mut h, opening) = bare(&net.fabric);
        h.set.add(C).unwrap();
        let _server = listening(&net.b, ep(B, 82));
        let e = SharedEndpoint::new(&opening, ep(C, 7100)).unwrap();
        h.set.remove(C);
        let s = side(&h, 1);
        let c = wrap(Connector::new(&opening).unwrap());
        assert_eq!(
            c.conn.connect_shared(&s.qp, &e, ep(B, 82), LIMITS, b""),
            Err(CmError::InvalidAddress)
        );
        assert!(net.fabric.is_bound(C, 7100), "N7: still the endpoint's");
        h.set.add(C).unwrap();
        c.conn
            .connect_shared(&s.qp, &e, ep(B, 82), LIMITS, b"")
            .unwrap();
    }

    #[test]
    fn test_established_connection_survives_its_address_leaving() {
        let mut net = net();
        let conn = established(&net);
        // `net.b`'s only address goes: the connection carries on.
        assert!(net.b.set.remove(B));
        assert!(net.fabric.device_of(B).is_none());
        assert_eq!(conn.active.conn.state(), Some(ConnState::Established));
        assert_eq!(conn.passive.conn.state(), Some(ConnState::Established));
        assert_eq!(conn.a.qp.state(), QpState::Connected);
        assert_eq!(conn.b.qp.state(), QpState::Connected);
    }

    #[test]
    fn test_adds_and_removes_race_with_openings() {
        let fabric = Fabric::new();
        let device = inline_device();
        let set = std::sync::Mutex::new(AddressSet::register(&fabric, &device, &[]).unwrap());
        std::thread::scope(|s| {
            s.spawn(|| {
                for n in 0..200_u8 {
                    let ip = IpAddr::V4([10, 9, 0, n % 8]);
                    let mut set = set.lock().unwrap();
                    if n % 3 == 0 {
                        set.remove(ip);
                    } else {
                        set.add(ip).unwrap();
                    }
                }
            });
            s.spawn(|| {
                for _ in 0..200 {
                    let opening = AddressSet::register(&fabric, &device, &[]).unwrap();
                    let requests = Arc::new(Requests::default());
                    let l = Listener::new(&opening, Arc::clone(&requests) as _).unwrap();
                    l.listen(ep(IpAddr::V4([0; 4]), 0)).unwrap();
                    drop(l);
                    drop(opening);
                }
            });
        });
        let set = set.into_inner().unwrap();
        for n in 0..8 {
            let ip = IpAddr::V4([10, 9, 0, n]);
            assert_eq!(set.contains(ip), fabric.device_of(ip).is_some());
        }
        drop(set);
        for n in 0..8 {
            assert!(fabric.device_of(IpAddr::V4([10, 9, 0, n])).is_none());
        }
    }
}

mod listen_bind;
mod scripted_net;
mod wire;
mod wire_close;
