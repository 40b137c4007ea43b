//! Connections over the wire (`cm/wire.rs`) on the host's TCP, 127.66.x.y
//! and ::1: the state machine's transitions when the peer is across a
//! socket, both address families, and the time-outs of each wait.

use std::time::Duration;

use super::scripted_net::{ScriptedNet, wire_host};
use super::*;
use crate::kernel::testing::wait_some;

/// How long the raw peer's socket waits for a read.
pub(super) const LIMIT: Duration = Duration::from_secs(10);

pub(super) fn next_event(events: &Events) -> Ev {
    wait_some("an event", || events.next())
}

/// The parties of one connection over the wire before it is requested: a
/// listener of the passive host, a QP on each side, the active connector.
pub(super) struct Parties {
    server: Server,
    /// Where the listener listens.
    bound: Endpoint,
    pub(super) qa: Side,
    pub(super) qb: Side,
    pub(super) active: Client,
}

/// A listener of `b` on `listen_on`, a QP of `a` and one of `b`, a
/// connector of `a`.
fn parties(a: &Host, b: &Host, listen_on: Endpoint) -> Parties {
    let server = server(b);
    let bound = server.listener.listen(listen_on).unwrap();
    Parties {
        server,
        bound,
        qa: side(a, 0xA),
        qb: side(b, 0xB),
        active: client(a),
    }
}

impl Parties {
    /// Connects the active QP from `(from, 0)` to `to` with `data`; returns
    /// the passive connector once the listener has the request.
    fn request(&self, from: IpAddr, to: Endpoint, data: &[u8]) -> Client {
        self.active
            .conn
            .connect(&self.qa.qp, ep(from, 0), to, LIMITS, data)
            .unwrap();
        wrap(wait_some("the connect event", || self.server.next()))
    }

    /// `passive` accepts with the passive QP; returns the active side's
    /// next event (its Connect's completion).
    fn accept(&self, passive: &Client) -> Ev {
        passive.conn.accept(&self.qb.qp, LIMITS, b"").unwrap();
        next_event(&self.active.events)
    }

    /// The active CompleteConnect; returns the passive side's next event
    /// (its Accept's completion).
    fn complete(&self, passive: &Client) -> Ev {
        self.active.conn.complete_connect().unwrap();
        next_event(&passive.events)
    }
}

/// A Connect of a fresh QP of `a` from `(from, 0)` to `to`, taken by the
/// wire (its outcome comes as an event): the QP and the connector.
fn start_connect(a: &Host, from: IpAddr, to: Endpoint) -> (Side, Client) {
    let qa = side(a, 0xA);
    let active = client(a);
    active
        .conn
        .connect(&qa.qp, ep(from, 0), to, LIMITS, b"")
        .unwrap();
    (qa, active)
}

/// X1: the active side disconnects, the passive consumer answers the
/// indication with its own Disconnect; expects the passive side's first
/// event to be the indication, then each side's Disconnect to succeed.
#[track_caller]
fn expect_graceful_disconnect(active: &Client, passive: &Client) {
    active.conn.disconnect().unwrap();
    assert_eq!(next_event(&passive.events), Ev::Indicated);
    passive.conn.disconnect().unwrap();
    assert_eq!(next_event(&passive.events), Ev::Disconnect(Ok(())));
    assert_eq!(next_event(&active.events), Ev::Disconnect(Ok(())));
}

/// Test-unique loopback addresses (127.66.x.1 and .2).
pub(super) fn addresses() -> (IpAddr, IpAddr) {
    static NEXT: core::sync::atomic::AtomicU8 = core::sync::atomic::AtomicU8::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    (IpAddr::V4([127, 66, n, 1]), IpAddr::V4([127, 66, n, 2]))
}

/// N12, N30: a Connect from port 0 whose TCP source port the host has
/// taken moves to another ephemeral port and connects; the connector's
/// local endpoint is the port that worked, and the passive side sees it as
/// the peer's (the ND port is the TCP port).
#[test]
fn test_connect_from_port_0_moves_past_a_taken_tcp_port_rule_n12_n30() {
    let fabric = Fabric::new();
    let (ip_a, ip_b) = addresses();
    let busy = ScriptedNet::busy_ports(2);
    let a = wire_host(
        &fabric,
        &[ip_a],
        Some(Arc::clone(&busy)),
        ConnTimeouts::default(),
    );
    let b = wire_host(&fabric, &[ip_b], None, ConnTimeouts::default());
    let p = parties(&a, &b, ep(ip_b, 0));
    assert!((EPHEMERAL_FIRST..=EPHEMERAL_LAST).contains(&p.bound.port));
    let passive = p.request(ip_a, p.bound, b"hi");
    let tried = busy.tried();
    assert_eq!(tried.len(), 3, "two taken ports, then one that worked");
    assert!(tried.windows(2).all(|w| w[0] != w[1]), "{tried:?}");
    let local = p.active.conn.local().unwrap();
    assert_eq!(local, ep(ip_a, tried[2]));
    assert_eq!(passive.conn.peer(), Some(local));
    assert_eq!(p.accept(&passive), Ev::Connect(Ok(())));
    assert_eq!(p.complete(&passive), Ev::Accept(Ok(())));
    // X1: the disconnect completes once the peer's answers it.
    expect_graceful_disconnect(&p.active, &passive);
}

/// N12: with every source port taken the Connect fails (asynchronously)
/// with the address in use, after a bounded number of tries.
#[test]
fn test_connect_gives_up_when_every_source_port_is_taken_rule_n12() {
    let fabric = Fabric::new();
    let (ip_a, ip_b) = addresses();
    let busy = ScriptedNet::busy_ports(u32::MAX);
    let a = wire_host(
        &fabric,
        &[ip_a],
        Some(Arc::clone(&busy)),
        ConnTimeouts::default(),
    );
    let (_qa, active) = start_connect(&a, ip_a, ep(ip_b, 4000));
    assert_eq!(
        next_event(&active.events),
        Ev::Connect(Err(CmError::AddressInUse))
    );
    assert_eq!(active.conn.state(), Some(ConnState::Failed));
    let tries = busy.tried().len();
    assert!(tries > 1 && tries <= 20, "{tries} tries");
}

/// N12: nothing listening on the destination port: the TCP RST refuses the
/// Connect, asynchronously.
#[test]
fn test_connect_to_no_listener_is_refused_rule_n12() {
    let fabric = Fabric::new();
    let (ip_a, ip_b) = addresses();
    let a = wire_host(&fabric, &[ip_a], None, ConnTimeouts::default());
    let _b = wire_host(&fabric, &[ip_b], None, ConnTimeouts::default());
    let (qa, active) = start_connect(&a, ip_a, ep(ip_b, 9));
    assert_eq!(
        next_event(&active.events),
        Ev::Connect(Err(CmError::ConnectionRefused))
    );
    // N28: the QP is as it was, and connects again.
    assert_eq!(qa.qp.state(), QpState::Idle);
}

// ----- both families on loopback (issue 8: IPv6 over iWARP) -------------

/// The IPv6 loopback address, the only one a test machine surely has.
const V6_LOOPBACK: IpAddr = IpAddr::V6([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);

/// A wire host on `ips` over the host's TCP with `timeouts`.
fn wire_host_with(fabric: &Arc<Fabric>, ips: &[IpAddr], timeouts: ConnTimeouts) -> Host {
    wire_host(fabric, ips, None, timeouts)
}

/// Waits for `side`'s receive CQ to hold one completion and returns it.
pub(super) fn one_receive(side: &Side) -> crate::rnic::types::Completion {
    let all = wait_some("a receive completion", || {
        let all = side.rcq.drain();
        (!all.is_empty()).then_some(all)
    });
    assert_eq!(all.len(), 1, "{all:?}");
    all[0]
}

/// Connects a QP of `a` from `(ip_a, 0)` to a listener of `b` on
/// `listen_on` (port 0; `ip_b` or the wildcard), at `ip_b`;
/// carries a Send each way and disconnects gracefully.
fn connect_and_exchange(a: &Host, ip_a: IpAddr, b: &Host, ip_b: IpAddr, listen_on: IpAddr) {
    let p = parties(a, b, ep(listen_on, 0));
    assert_eq!(p.bound.ip, listen_on);
    let passive = p.request(ip_a, ep(ip_b, p.bound.port), b"hi");
    assert_eq!(data_of(&passive.conn).1, b"hi");
    let local = p.active.conn.local().unwrap();
    assert_eq!(local.ip, ip_a);
    assert_eq!(passive.conn.peer(), Some(local));
    assert_eq!(passive.conn.local(), Some(ep(ip_b, p.bound.port)));
    assert_eq!(p.accept(&passive), Ev::Connect(Ok(())));
    assert_eq!(p.complete(&passive), Ev::Accept(Ok(())));
    // A Send each way, over TCP.
    for (from, to, seed) in [(&p.qa, &p.qb, 7_u8), (&p.qb, &p.qa, 9)] {
        let sink = to.buffer(64, 0, Access::LOCAL_WRITE);
        to.qp.post_receive(1, &[sink.sge(0, 64)]).unwrap();
        let src = from.pattern(48, seed, Access::empty());
        from.qp
            .post_send(2, Payload::Sges(&[src.sge(0, 48)]), WrFlags::empty(), None)
            .unwrap();
        let c = one_receive(to);
        assert_eq!((c.status, c.bytes), (WcStatus::Success, 48));
        assert_eq!(&sink.buffer.bytes()[..48], src.buffer.bytes());
        assert!(sink.buffer.bytes()[48..].iter().all(|&x| x == 0));
    }
    expect_graceful_disconnect(&p.active, &passive);
}

/// N1, N27: over the wire, one device on ::1 listens on ::1 and connects
/// to itself, and the connection carries data both ways.
#[test]
fn test_ipv6_loopback_connection_on_one_device_rule_n1_n27() {
    let fabric = Fabric::new();
    let h = wire_host_with(&fabric, &[V6_LOOPBACK], ConnTimeouts::default());
    connect_and_exchange(&h, V6_LOOPBACK, &h, V6_LOOPBACK, V6_LOOPBACK);
}

/// N1, N31: a wildcard IPv6 listener of a wire device on ::1 listens on
/// ::1, and a connection to ::1 reaches it.
#[test]
fn test_ipv6_wildcard_listener_on_loopback_rule_n1_n31() {
    let fabric = Fabric::new();
    let h = wire_host_with(&fabric, &[V6_LOOPBACK], ConnTimeouts::default());
    let any = IpAddr::unspecified(Family::V6);
    connect_and_exchange(&h, V6_LOOPBACK, &h, V6_LOOPBACK, any);
}

/// N1: the same over IPv4, both on one device (127.66.x.1) and between two
/// devices (127.66.x.1 and .2).
#[test]
fn test_ipv4_loopback_connections_rule_n1_n27() {
    let fabric = Fabric::new();
    let (ip_a, ip_b) = addresses();
    let a = wire_host_with(&fabric, &[ip_a], ConnTimeouts::default());
    let b = wire_host_with(&fabric, &[ip_b], ConnTimeouts::default());
    connect_and_exchange(&a, ip_a, &a, ip_a, ip_a);
    connect_and_exchange(&a, ip_a, &b, ip_b, ip_b);
}

/// N1: one wire device with an IPv4 and an IPv6 loopback address serves
/// both families.
#[test]
fn test_both_families_on_one_wire_device_rule_n1() {
    let fabric = Fabric::new();
    let (ip, _) = addresses();
    let h = wire_host_with(&fabric, &[ip, V6_LOOPBACK], ConnTimeouts::default());
    connect_and_exchange(&h, V6_LOOPBACK, &h, V6_LOOPBACK, V6_LOOPBACK);
    connect_and_exchange(&h, ip, &h, ip, ip);
}

// ----- time-outs over TCP (N12, N15, N26) --------------------------------

/// Short time-outs for the waits under test, long ones for the rest.
pub(super) const SHORT: ConnTimeouts = ConnTimeouts {
    connect_ms: 5_000,
    reply_ms: 200,
    request_ms: 5_000,
    rtr_ms: 200,
    disconnect_ms: 200,
};

/// A connection between wire hosts `a` and `b` (time-outs `timeouts`) up
/// to the reply: the active side has seen its Connect complete and holds
/// still (no CompleteConnect yet).
pub(super) struct Replied {
    pub(super) parties: Parties,
    pub(super) passive: Client,
    _hosts: (Host, Host),
}

/// [`Replied`] with the active host over `net` (the host's TCP when
/// `None`).
fn replied_over(net: Option<Arc<ScriptedNet>>, timeouts: ConnTimeouts) -> Replied {
    let fabric = Fabric::new();
    let (ip_a, ip_b) = addresses();
    let a = wire_host(&fabric, &[ip_a], net, timeouts);
    let b = wire_host_with(&fabric, &[ip_b], timeouts);
    let parties = parties(&a, &b, ep(ip_b, 0));
    let passive = parties.request(ip_a, parties.bound, b"");
    assert_eq!(parties.accept(&passive), Ev::Connect(Ok(())));
    Replied {
        parties,
        passive,
        _hosts: (a, b),
    }
}

pub(super) fn replied(timeouts: ConnTimeouts) -> Replied {
    replied_over(None, timeouts)
}

/// N15: the active side never sends its RTR (no CompleteConnect): the
/// passive Accept fails with IO_TIMEOUT once the RTR time-out has passed,
/// and the active side's late CompleteConnect finds the peer gone (N14).
#[test]
fn test_accept_times_out_when_the_active_side_never_completes_rule_n15() {
    let r = replied(SHORT);
    assert_eq!(
        next_event(&r.passive.events),
        Ev::Accept(Err(CmError::TimedOut))
    );
    assert!(r.passive.events.take().is_empty(), "one completion only");
    // The passive side gave up: the active side learns it when its
    // CompleteConnect runs into the closed stream (N14: aborted), inline
    // or as the connection's failure.
    let late = r.parties.active.conn.complete_connect();
    if late.is_ok() {
        let ev = next_event(&r.parties.active.events);
        assert!(
            matches!(ev, Ev::Indicated | Ev::Disconnect(Err(_))),
            "{ev:?}"
        );
    } else {
        assert_eq!(late, Err(CmError::ConnectionAborted));
    }
    assert_ne!(r.parties.qa.qp.state(), QpState::Connected);
}

/// N12: a peer that takes the TCP connection but never answers the MPA
/// request (a raw socket of the test) makes the Connect fail with
/// IO_TIMEOUT after the reply time-out.
#[test]
fn test_connect_times_out_when_the_peer_never_replies_rule_n12() {
    let fabric = Fabric::new();
    let (ip_a, ip_b) = addresses();
    let a = wire_host_with(&fabric, &[ip_a], SHORT);
    // The peer takes the connection and reads the request, and says nothing.
    let (qa, active, mut stream) = connect_to_raw(&a, ip_a, ip_b);
    let mut request = [0_u8; 20];
    std::io::Read::read_exact(&mut stream, &mut request).unwrap();
    assert_eq!(&request[..16], b"MPA ID Req Frame");
    assert_eq!(
        next_event(&active.events),
        Ev::Connect(Err(CmError::TimedOut))
    );
    assert_eq!(active.conn.state(), Some(ConnState::Failed));
    // N28: the QP is as it was.
    assert_eq!(qa.qp.state(), QpState::Idle);
}

/// A Connect of a fresh QP of `a` (on `ip_a`) to a raw TCP listener of the
/// test on `ip_b` (a peer played by hand): the QP, the connector, and the
/// peer's socket once it took the connection (reads time out at
/// [`LIMIT`]).
pub(super) fn connect_to_raw(
    a: &Host,
    ip_a: IpAddr,
    ip_b: IpAddr,
) -> (Side, Client, std::net::TcpStream) {
    let IpAddr::V4(octets) = ip_b else {
        unreachable!()
    };
    let raw = std::net::TcpListener::bind((core::net::Ipv4Addr::from(octets), 0)).unwrap();
    let port = raw.local_addr().unwrap().port();
    let (qa, active) = start_connect(a, ip_a, ep(ip_b, port));
    let (peer, _) = raw.accept().unwrap();
    peer.set_read_timeout(Some(LIMIT)).unwrap();
    (qa, active, peer)
}

/// N26, X1: a graceful Disconnect whose peer never answers (its consumer
/// holds still after the indication) completes with IO_TIMEOUT after the
/// disconnect time-out, and the QP leaves the connection (E3).
#[test]
fn test_disconnect_times_out_when_the_peer_never_answers_rule_n26() {
    let r = replied(SHORT);
    assert_eq!(r.parties.complete(&r.passive), Ev::Accept(Ok(())));
    let sink = r.parties.qa.buffer(64, 0, Access::LOCAL_WRITE);
    r.parties.qa.qp.post_receive(5, &[sink.sge(0, 64)]).unwrap();
    r.parties.active.conn.disconnect().unwrap();
    assert_eq!(next_event(&r.passive.events), Ev::Indicated);
    // The passive consumer never calls Disconnect.
    assert_eq!(
        next_event(&r.parties.active.events),
        Ev::Disconnect(Err(CmError::TimedOut))
    );
    assert!(
        r.parties.active.events.take().is_empty(),
        "one completion only"
    );
    assert_ne!(r.parties.qa.qp.state(), QpState::Connected);
    let flushed = one_receive(&r.parties.qa);
    assert_eq!(flushed.status, WcStatus::Cancelled);
}

/// N26, X1 (a), issue 8: a Disconnect waits for the peer's FIN until its
/// own time-out, whatever setup deadline comes due meanwhile. The active
/// side's reply deadline, armed at Connect, fires while its Disconnect
/// waits: nothing happens (it used to end the wait at once with IO_TIMEOUT
/// and reset the stream, so the peer's Disconnect failed too); the peer's
/// Disconnect then completes both with success, and the disconnect's own
/// timer, come due afterwards, changes nothing.
#[test]
fn test_a_setup_deadline_firing_late_does_not_end_the_disconnect_wait_rule_n26() {
    let timers = ScriptedNet::holding_timers();
    let r = replied_over(Some(Arc::clone(&timers)), ConnTimeouts::default());
    let (active, passive) = (&r.parties.active, &r.passive);
    assert_eq!(r.parties.complete(passive), Ev::Accept(Ok(())));
    let setup = timers.take_timers();
    assert!(!setup.is_empty(), "the reply's deadline was armed");
    active.conn.disconnect().unwrap();
    assert_eq!(next_event(&passive.events), Ev::Indicated);
    // The setup's deadlines come due while the Disconnect waits.
    for (at, timer) in setup {
        timer.fire(at);
    }
    assert!(active.events.take().is_empty(), "the wait goes on");
    assert_eq!(active.conn.state(), Some(ConnState::Disconnecting));
    passive.conn.disconnect().unwrap();
    assert_eq!(next_event(&passive.events), Ev::Disconnect(Ok(())));
    assert_eq!(next_event(&active.events), Ev::Disconnect(Ok(())));
    let late = timers.take_timers();
    assert!(!late.is_empty(), "the disconnect's time-out was armed");
    for (at, timer) in late {
        timer.fire(at);
    }
    assert!(active.events.take().is_empty(), "one completion only");
    assert!(passive.events.take().is_empty(), "one completion only");
}

// ----- addresses added after Listen --------------------------------------

/// N31: a wildcard wire listener follows an address its device gains after
/// Listen: a connection to the new address, at the listener's port,
/// reaches it (an address of the other family, added too, is left alone).
#[test]
fn test_wildcard_listener_follows_an_address_added_after_listen_rule_n31() {
    let fabric = Fabric::new();
    let (ip_a, ip_b) = addresses();
    let IpAddr::V4(mut later) = ip_a else {
        unreachable!()
    };
    later[3] = 3;
    let later = IpAddr::V4(later);
    let mut a = wire_host_with(&fabric, &[ip_a], ConnTimeouts::default());
    let b = wire_host_with(&fabric, &[ip_b], ConnTimeouts::default());
    // b connects to a wildcard listener of a.
    let p = parties(&b, &a, ep(IpAddr::unspecified(Family::V4), 0));
    assert_eq!(a.set.add(later), Ok(true));
    assert_eq!(a.set.add(V6_LOOPBACK), Ok(true));
    let passive = p.request(ip_b, ep(later, p.bound.port), b"late");
    assert_eq!(data_of(&passive.conn).1, b"late");
    assert_eq!(passive.conn.local(), Some(ep(later, p.bound.port)));
    assert_eq!(p.accept(&passive), Ev::Connect(Ok(())));
    assert_eq!(p.complete(&passive), Ev::Accept(Ok(())));
}
