//! Family N of the rules catalogue, through the C ABI: connections —
//! listeners, connectors, shared endpoints.
//!
//! Every test opens adapters on addresses of its own ([`Fixture`],
//! [`own_v4`]), so tests running in parallel never share an emulated NIC,
//! and names ports explicitly only through [`Transport::explicit_port`]
//! (over iWARP ND ports are the host's TCP ports, and every IPv6 test is
//! on `::1`); each closes everything it created.

use std::sync::Arc;

use softndk::abi::*;

use super::harness::*;

/// The ephemeral port range (N3, N9; `ndk-abi.md` §5.14).
const EPHEMERAL: std::ops::RangeInclusive<u16> = 49152..=65535;

/// The outcome of a call that may pend (L8).
fn outcome((status, signal): (NtStatus, Arc<Signal>)) -> NtStatus {
    signal.outcome(status)
}

/// What [`Staged::request`] returns: A's connector, its Connect's return
/// and completion signal, and the passive connector of B's connect event.
type Request = (Connector, (NtStatus, Arc<Signal>), Connector);

/// A fresh stage and its first request, carrying `data` ([`Staged::request`]).
fn staged_request(data: &[u8]) -> (Staged, Request) {
    let s = Fixture::new().staged();
    let request = s.request(1, data);
    (s, request)
}

/// B's consumer accepts the request `passive` on the stage's B QP
/// (`disconnects` its disconnect signal): the Accept pends, awaiting A's
/// CompleteConnect, while A's Connect (`connecting`) completes. Returns the
/// Accept's completion signal.
fn accept_pending(
    s: &Staged,
    passive: &Connector,
    connecting: (NtStatus, Arc<Signal>),
    disconnects: &Arc<Signal>,
) -> Arc<Signal> {
    let (accept, accepted) = passive.accept(&s.b_qp, 16, 16, b"", disconnects);
    assert_eq!(accept, STATUS_PENDING);
    assert_success!(outcome(connecting));
    accepted
}

/// Asserts that a call that may pend failed with `expected`, and that a
/// failure returned inline has no completion (L8).
fn assert_fails((status, signal): (NtStatus, Arc<Signal>), expected: NtStatus, what: &str) {
    if status == STATUS_PENDING {
        assert_eq!(signal.wait(), expected, "{what} (completion)");
    } else {
        assert_eq!(status, expected, "{what}");
        assert_eq!(
            settled_count(&signal),
            0,
            "{what}: no completion after an inline failure"
        );
    }
}

/// A Send on `qp` is refused with STATUS_CONNECTION_INVALID: the QP is not
/// connected (a failed or refused connection leaves it so).
fn expect_not_connected(qp: &Qp) {
    assert_eq!(
        qp.send(1, &[], 0),
        STATUS_CONNECTION_INVALID,
        "the QP was not connected"
    );
}

/// The passive side rejects a request ([`connect_request`]): the Connect fails
/// with STATUS_CONNECTION_REFUSED (N16); both connectors close.
fn refuse(active: Connector, connecting: (NtStatus, Arc<Signal>), passive: Connector) {
    assert_success!(passive.reject(b""));
    assert_eq!(outcome(connecting), STATUS_CONNECTION_REFUSED);
    assert_closes_succeed!(passive, active);
}

/// Both sides' QPs, connected through `listener` of `b`, then a message
/// each way.
fn connect_and_exchange(a: &End, b: &End) {
    let a_qp = a.qp(0xA);
    let b_qp = b.qp(0xB);
    let (listener, incoming, listen_addr) = b.listen(0);
    assert_eq!(listen_addr.family(), b.addr.family());
    assert_eq!(listen_addr.ip_bytes(), b.addr.ip_bytes());
    let conn = Conn::establish(&a.adapter, a.addr, &a_qp, listen_addr, &incoming, 1, &b_qp);
    // Each connector reports the addresses of its family.
    let local = address_of(Getter::ConnectorLocal(&conn.active));
    let peer = address_of(Getter::ConnectorPeer(&conn.active));
    assert_eq!(local.family(), a.addr.family());
    assert_eq!(local.ip_bytes(), a.addr.ip_bytes());
    assert_eq!(peer, listen_addr);
    assert_eq!(
        address_of(Getter::ConnectorLocal(&conn.passive)),
        listen_addr
    );
    assert_eq!(address_of(Getter::ConnectorPeer(&conn.passive)), local);
    ping_both_ways((a, &a_qp), (b, &b_qp), b"over there", b"and back");
    conn.close();
    assert_success!(listener.close());
    a_qp.close();
    b_qp.close();
}

// ---------------------------------------------------------------------------
// N1, N2: address families and SOCKADDRs
// ---------------------------------------------------------------------------

/// N1: a connection between two IPv4 addresses carries data both ways.
#[test]
fn n1_connections_work_over_ipv4() {
    let (a, b) = End::two();
    connect_and_exchange(&a, &b);
    a.close();
    b.close();
}

/// N1: a connection between two IPv6 addresses carries data both ways, and
/// the address getters report `SOCKADDR_IN6`s.
#[test]
fn n1_connections_work_over_ipv6() {
    let (a, b) = Fixture::new().v6().ends();
    connect_and_exchange(&a, &b);
    a.close();
    b.close();
}

/// N2: Listen, Connect and CreateSharedEndpoint take a `SOCKADDR_IN` (16
/// bytes) or `SOCKADDR_IN6` (28 bytes) with the number of bytes supplied: a
/// length that covers the structure (even a longer one) works, a length
/// short of it is refused (the provider's documented status,
/// STATUS_INVALID_PARAMETER), as is an unknown family.
#[test]
fn n2_addresses_are_sockaddr_in_or_in6_with_the_bytes_supplied() {
    let (a, b) = End::two();
    let v6 = End::open(Transport::default().addresses(Family::V6).0);
    let fixed_port = b.explicit_port();
    let v6_port = v6.explicit_port();
    let incoming = Incoming::new();

    // Listen.
    let short = b.adapter.listener(&incoming);
    assert_eq!(
        listen_with_length(&short, b.addr.with_port(fixed_port), 15),
        STATUS_INVALID_PARAMETER,
        "SOCKADDR_IN cut short"
    );
    let mut unknown = b.addr.with_port(fixed_port);
    // SAFETY: the family is the first two bytes of the 28-byte buffer.
    unsafe { unknown.as_mut_ptr().cast::<u16>().write_unaligned(0x7777) };
    assert_eq!(
        listen_with_length(&short, unknown, 28),
        STATUS_INVALID_PARAMETER,
        "unknown family"
    );
    // The refused calls left the listener unused: it still listens.
    assert_success!(
        listen_with_length(&short, b.addr.with_port(fixed_port), 16),
        "SOCKADDR_IN, 16 bytes"
    );
    let v6_listener = v6.adapter.listener(&incoming);
    assert_eq!(
        listen_with_length(&v6_listener, v6.addr.with_port(v6_port), 16),
        STATUS_INVALID_PARAMETER,
        "SOCKADDR_IN6 given 16 bytes"
    );
    assert_success!(
        listen_with_length(&v6_listener, v6.addr.with_port(v6_port), 28),
        "SOCKADDR_IN6, 28 bytes"
    );
    let long = b.adapter.listener(&incoming);
    assert_success!(
        listen_with_length(&long, b.addr.with_port(fixed_port + 1), 28),
        "SOCKADDR_IN with more bytes supplied"
    );
    assert_eq!(
        address_of(Getter::Listener(&long)),
        b.addr.with_port(fixed_port + 1)
    );

    // CreateSharedEndpoint.
    assert_eq!(
        shared_endpoint_with_length(&a.adapter, a.addr.with_port(fixed_port), 8).err(),
        Some(STATUS_INVALID_PARAMETER)
    );
    assert_eq!(
        shared_endpoint_with_length(&v6.adapter, v6.addr.with_port(v6_port + 5), 16).err(),
        Some(STATUS_INVALID_PARAMETER)
    );
    let endpoint = shared_endpoint_with_length(&v6.adapter, v6.addr.with_port(v6_port + 5), 28)
        .expect("CreateSharedEndpoint, SOCKADDR_IN6");
    assert_eq!(
        address_of(Getter::Endpoint(&endpoint)),
        v6.addr.with_port(v6_port + 5)
    );

    // Connect: both addresses are checked.
    let qp = a.qp(1);
    let connector = a.adapter.connector();
    let dst = b.addr.with_port(fixed_port);
    assert_fails(
        connect_with_lengths(&connector, &qp, a.addr, 15, dst, 16, b""),
        STATUS_INVALID_PARAMETER,
        "Connect with a short source",
    );
    assert_fails(
        connect_with_lengths(&connector, &qp, a.addr, 16, dst, 4, b""),
        STATUS_INVALID_PARAMETER,
        "Connect with a short destination",
    );
    // Nothing was started: the same connector and QP connect.
    let (status, connected) = connect_with_lengths(&connector, &qp, a.addr, 16, dst, 28, b"hi");
    assert!(status == STATUS_PENDING || status == STATUS_SUCCESS);
    let passive = incoming.wait_nth(1);
    assert_success!(passive.reject(b""));
    assert_eq!(connected.outcome(status), STATUS_CONNECTION_REFUSED);

    assert_closes_succeed!(passive, connector, endpoint);
    for listener in [short, v6_listener, long] {
        assert_success!(listener.close());
    }
    close_ends([qp], (a, b));
    v6.close();
}

// ---------------------------------------------------------------------------
// N3: Listen
// ---------------------------------------------------------------------------

/// N3: Listen on port 0 picks a port of 49152–65535, which
/// GetListenerLocalAddress reports (IPv4 and IPv6); an explicit port is
/// reported as given. Listen is a request that may pend (L8): its outcome
/// is STATUS_SUCCESS.
#[test]
fn n3_listen_on_port_0_picks_an_ephemeral_port_reported_by_get_local_address() {
    for end in End::one_per_family() {
        let addr = end.addr;
        let fixed_port = end.explicit_port();
        let incoming = Incoming::new();
        let first = end.adapter.listener(&incoming);
        let second = end.adapter.listener(&incoming);
        let fixed = end.adapter.listener(&incoming);
        assert_success!(first.listen(addr.with_port(0)));
        assert_success!(second.listen(addr.with_port(0)));
        assert_success!(fixed.listen(addr.with_port(fixed_port)));
        let p1 = address_of(Getter::Listener(&first));
        let p2 = address_of(Getter::Listener(&second));
        for got in [p1, p2] {
            assert_eq!(got.family(), addr.family());
            assert_eq!(got.ip_bytes(), addr.ip_bytes());
            assert!(
                EPHEMERAL.contains(&got.port()),
                "port {} not ephemeral",
                got.port()
            );
        }
        assert_ne!(p1.port(), p2.port(), "two listeners, two ports");
        assert_eq!(
            address_of(Getter::Listener(&fixed)),
            addr.with_port(fixed_port)
        );
        // The port reported is the one that takes connections.
        let qp = end.qp(1);
        let connector = end.adapter.connector();
        let started = start_connect(&connector, &qp, addr, p2, b"");
        let passive = incoming.wait_nth(1);
        assert_eq!(address_of(Getter::ConnectorLocal(&passive)), p2);
        assert_success!(passive.reject(b""));
        assert_eq!(outcome(started), STATUS_CONNECTION_REFUSED);
        assert_closes_succeed!(passive, connector);
        for listener in [first, second, fixed] {
            assert_success!(listener.close());
        }
        qp.close();
        end.close();
    }
}

/// N3: Listen on an address and port already in use fails with
/// STATUS_SHARING_VIOLATION; the listener that failed can listen elsewhere.
#[test]
fn n3_listen_on_an_address_in_use_fails_sharing_violation() {
    let (a, _) = End::two();
    let fixed_port = a.explicit_port();
    let incoming = Incoming::new();
    let (first, _, addr) = a.listen(0);
    let second = a.adapter.listener(&incoming);
    assert_eq!(
        second.listen(addr),
        STATUS_SHARING_VIOLATION,
        "ephemeral port in use"
    );
    let fixed = a.adapter.listener(&incoming);
    assert_success!(fixed.listen(a.addr.with_port(fixed_port)));
    assert_eq!(
        second.listen(a.addr.with_port(fixed_port)),
        STATUS_SHARING_VIOLATION,
        "explicit port in use"
    );
    assert_success!(second.listen(a.addr.with_port(fixed_port + 1)));
    for listener in [first, second, fixed] {
        assert_success!(listener.close());
    }
    a.close();
}

/// N3: Listen on an address that is not one of this adapter's fails with
/// STATUS_INVALID_ADDRESS: the peer adapter's address, an address no adapter
/// has, an address of the other family.
#[test]
fn n3_listen_on_an_address_not_of_this_adapter_fails_invalid_address() {
    let (a, b) = End::two();
    let fixed_port = a.explicit_port();
    let (v6, _) = fresh_v6();
    let incoming = Incoming::new();
    let listener = a.adapter.listener(&incoming);
    for (foreign, what) in [
        (b.addr.with_port(fixed_port), "another adapter's address"),
        (own_v4().with_port(fixed_port), "an address nobody has"),
        (
            v6.with_port(fixed_port),
            "an IPv6 address of an IPv4 adapter",
        ),
    ] {
        assert_eq!(listener.listen(foreign), STATUS_INVALID_ADDRESS, "{what}");
    }
    assert_success!(listener.listen(a.addr.with_port(fixed_port)));
    close_stage(listener, [], (a, b));
}

/// N3: with every port of the ephemeral range taken on an address, Listen
/// on port 0 fails with STATUS_TOO_MANY_ADDRESSES; once one is free again,
/// port 0 gets exactly that one.
#[test]
fn n3_listen_on_port_0_with_every_ephemeral_port_taken_fails_too_many_addresses() {
    only_on_fabric!(
        "over iWARP an ND port is a TCP port: taking the 16 384 ports of the range \
         takes as many TCP listening sockets, beyond the process's descriptor limit, \
         and would starve every test running beside it"
    );
    let end = End::open(own_v4());
    let incoming = Incoming::new();
    let mut taken = Vec::with_capacity(EPHEMERAL.len());
    for port in EPHEMERAL {
        let listener = end.adapter.listener(&incoming);
        assert_success!(listener.listen(end.addr.with_port(port)), "port {port}");
        taken.push(listener);
    }
    let last = end.adapter.listener(&incoming);
    assert_eq!(
        last.listen(end.addr.with_port(0)),
        STATUS_TOO_MANY_ADDRESSES
    );
    // The shared endpoint fails alike (N9).
    assert_eq!(
        end.adapter.try_shared_endpoint(end.addr.with_port(0)).err(),
        Some(STATUS_TOO_MANY_ADDRESSES)
    );
    // Free one port in the middle of the range.
    let freed = taken.remove(1000);
    assert_success!(freed.close());
    assert_success!(last.listen(end.addr.with_port(0)));
    assert_eq!(
        address_of(Getter::Listener(&last)),
        end.addr.with_port(49152 + 1000)
    );
    assert_success!(last.close());
    while let Some(listener) = taken.pop() {
        assert_success!(listener.close());
    }
    end.close();
}

// ---------------------------------------------------------------------------
// N4–N8: listeners and their endpoints
// ---------------------------------------------------------------------------

/// N4: every incoming request yields a new connector, handed over by one
/// call of the connect-event callback; each can be accepted on its own.
#[test]
fn n4_each_incoming_request_yields_one_new_connector_through_one_connect_event() {
    let (a, b) = End::two();
    let (listener, incoming, listen_addr) = b.listen(0);
    let qps: Vec<(Qp, Qp)> = (0..3).map(|i| (a.qp(0x100 + i), b.qp(0x200 + i))).collect();
    let conns: Vec<Conn> = establish_each(&a, &qps, listen_addr, &incoming);
    assert_eq!(
        settled_count_incoming(&incoming),
        3,
        "one connect event per request"
    );
    let passive: Vec<usize> = conns.iter().map(|c| c.passive.0 as usize).collect();
    let active: Vec<usize> = conns.iter().map(|c| c.active.0 as usize).collect();
    for (i, p) in passive.iter().enumerate() {
        assert!(!active.contains(p), "a new connector, not the active one");
        assert!(!passive[..i].contains(p), "a new connector per request");
    }
    // Each passive connector knows its own peer.
    for conn in &conns {
        assert_eq!(
            address_of(Getter::ConnectorPeer(&conn.passive)),
            address_of(Getter::ConnectorLocal(&conn.active))
        );
    }
    for conn in conns {
        conn.close();
    }
    assert_success!(listener.close());
    close_qp_pairs(qps, (a, b));
}

/// How many connect events `incoming` has seen after a settling pause.
fn settled_count_incoming(incoming: &Incoming) -> usize {
    std::thread::sleep(SETTLE);
    incoming.count()
}

/// N5: a paused listener treats requests as though it did not exist
/// (Connect fails with STATUS_CONNECTION_REFUSED, no connect event); resumed,
/// it takes them again.
#[test]
fn n5_paused_listener_refuses_and_resumed_one_accepts() {
    let s = Fixture::new().staged();
    s.listener.pause(true);
    let connector = s.a.adapter.connector();
    assert_fails(
        connector.connect(&s.a_qp, s.a.addr, s.listen_addr, 16, 16, b""),
        STATUS_CONNECTION_REFUSED,
        "Connect to a paused listener",
    );
    assert_eq!(
        settled_count_incoming(&s.incoming),
        0,
        "no connect event while paused"
    );
    // Pausing twice, then resuming once, resumes.
    s.listener.pause(true);
    s.listener.pause(false);
    assert_success!(connector.close());
    s.establish(1).close();
    s.close();
}

/// N6: from the moment its close is issued, a listener turns away every new
/// request, although the close is still pending (a connector it produced is
/// open, N7).
#[test]
fn n6_closing_listener_turns_away_new_requests_at_once() {
    let ((a, b), (a_qp, b_qp), (listener, incoming, listen_addr)) = Fixture::new().stage();
    let conn = Conn::establish(&a.adapter, a.addr, &a_qp, listen_addr, &incoming, 1, &b_qp);
    let (close_status, closed) = listener.close_async();
    assert_eq!(
        close_status, STATUS_PENDING,
        "an accepted connector is still open"
    );
    let late_qp = a.qp(0xC);
    let late = a.adapter.connector();
    assert_fails(
        late.connect(&late_qp, a.addr, listen_addr, 16, 16, b""),
        STATUS_CONNECTION_REFUSED,
        "Connect to a closing listener",
    );
    assert_eq!(
        settled_count_incoming(&incoming),
        1,
        "no connect event after the close"
    );
    assert_eq!(closed.count(), 0);
    assert_success!(late.close());
    conn.close();
    assert_success!(closed.wait(), "the close completes after the connectors'");
    close_ends([a_qp, b_qp, late_qp], (a, b));
}

/// N7: a listener's endpoint counts one reference for the listener and one
/// per accepted connector: the listener's close stays pending until the
/// accepted connectors are closed, and until then Listen, Connect and
/// ConnectWithSharedEndpoint (through CreateSharedEndpoint) on that address
/// and port fail; afterwards the address and port are free again.
#[test]
fn n7_listener_close_pends_until_accepted_connectors_close_and_the_address_is_reused_only_after() {
    let (a, b) = End::two();
    let (listener, incoming, listen_addr) = b.listen(0);
    let qps: Vec<(Qp, Qp)> = (0..2).map(|i| (a.qp(0xA0 + i), b.qp(0xB0 + i))).collect();
    let mut conns: Vec<Conn> = establish_each(&a, &qps, listen_addr, &incoming);
    let (close_status, closed) = listener.close_async();
    assert_eq!(close_status, STATUS_PENDING);

    // A listener on A to aim a Connect from B's endpoint at.
    let (a_listener, a_incoming, a_listen_addr) = a.listen(0);
    let in_use = |when: &str| {
        let other = b.adapter.listener(&Incoming::new());
        assert_eq!(
            other.listen(listen_addr),
            STATUS_SHARING_VIOLATION,
            "Listen {when}"
        );
        assert_success!(other.close());
        assert_eq!(
            b.adapter.try_shared_endpoint(listen_addr).err(),
            Some(STATUS_SHARING_VIOLATION),
            "CreateSharedEndpoint {when}"
        );
        let qp = b.qp(0xEE);
        let connector = b.adapter.connector();
        assert_fails(
            connector.connect(&qp, listen_addr, a_listen_addr, 16, 16, b""),
            STATUS_SHARING_VIOLATION,
            &format!("Connect from the endpoint {when}"),
        );
        assert_success!(connector.close());
        qp.close();
    };
    in_use("while two accepted connectors remain");
    // Closing the first connection leaves one reference.
    conns.remove(0).close();
    assert_eq!(settled_count(&closed), 0, "one accepted connector remains");
    in_use("while one accepted connector remains");
    conns.remove(0).close();
    assert_success!(closed.wait(), "the last reference went");
    assert_eq!(a_incoming.count(), 0);

    // The address and port are free again.
    let again = b.adapter.listener(&Incoming::new());
    assert_success!(again.listen(listen_addr));
    assert_closes_succeed!(again, a_listener);
    close_qp_pairs(qps, (a, b));
}

/// N8: a connector accepted through a listener uses the listener's endpoint
/// (its local address is the listener's, port included).
#[test]
fn n8_accepted_connector_uses_the_listener_endpoint() {
    let (a, b) = End::two();
    let a_qp = a.qp(0xA);
    let b_qp = b.qp(0xB);
    let fixed_port = b.explicit_port();
    let (listener, incoming, listen_addr) = b.listen(fixed_port);
    assert_eq!(listen_addr, b.addr.with_port(fixed_port));
    let conn = Conn::establish(&a.adapter, a.addr, &a_qp, listen_addr, &incoming, 1, &b_qp);
    assert_eq!(
        address_of(Getter::ConnectorLocal(&conn.passive)),
        listen_addr
    );
    assert_eq!(address_of(Getter::ConnectorPeer(&conn.active)), listen_addr);
    conn.close();
    close_stage(listener, [a_qp, b_qp], (a, b));
}

/// N8: a connector connected with NdkConnect owns a dedicated local
/// endpoint (port 0: an ephemeral one): while the connector exists — even
/// after its Disconnect — the address and port are in use; its close
/// releases them.
#[test]
fn n8_connect_owns_a_dedicated_endpoint_released_when_the_connector_closes() {
    let ((a, b), (a_qp, b_qp), (listener, incoming, listen_addr)) = Fixture::new().stage();

    // Port 0: an ephemeral port, reported by GetLocalAddress.
    let ephemeral = Conn::establish(&a.adapter, a.addr, &a_qp, listen_addr, &incoming, 1, &b_qp);
    let local = address_of(Getter::ConnectorLocal(&ephemeral.active));
    assert_eq!(local.ip_bytes(), a.addr.ip_bytes());
    assert!(EPHEMERAL.contains(&local.port()));
    ephemeral.close();

    // An explicit port.
    let a_qp2 = a.qp(0xA2);
    let b_qp2 = b.qp(0xB2);
    let src = a.explicit_addr();
    let conn = Conn::establish(&a.adapter, src, &a_qp2, listen_addr, &incoming, 2, &b_qp2);
    assert_eq!(address_of(Getter::ConnectorLocal(&conn.active)), src);
    let probe = a.adapter.listener(&Incoming::new());
    assert_eq!(
        probe.listen(src),
        STATUS_SHARING_VIOLATION,
        "while connected"
    );
    let (status, signal) = conn.active.disconnect();
    let (b_status, b_signal) = conn.passive.disconnect();
    assert_success!(signal.outcome(status));
    assert_success!(b_signal.outcome(b_status));
    assert_eq!(
        probe.listen(src),
        STATUS_SHARING_VIOLATION,
        "disconnected, not closed"
    );
    assert_success!(conn.active.close());
    assert_success!(probe.listen(src), "released by the close");
    assert_closes_succeed!(conn.passive, probe, listener);
    close_ends([a_qp, b_qp, a_qp2, b_qp2], (a, b));
}

// ---------------------------------------------------------------------------
// N9–N11: shared endpoints
// ---------------------------------------------------------------------------

/// N9: CreateSharedEndpoint with port 0 claims an ephemeral port, reported
/// by GetSharedEndpointLocalAddress; an explicit port is reported as given
/// (IPv4 and IPv6); the address and port are then in use.
#[test]
fn n9_shared_endpoint_port_0_is_ephemeral_and_reported() {
    for end in End::one_per_family() {
        let addr = end.addr;
        let fixed_port = end.explicit_port();
        let ephemeral = end
            .adapter
            .try_shared_endpoint(addr.with_port(0))
            .expect("CreateSharedEndpoint, port 0");
        let got = address_of(Getter::Endpoint(&ephemeral));
        assert_eq!(got.family(), addr.family());
        assert_eq!(got.ip_bytes(), addr.ip_bytes());
        assert!(EPHEMERAL.contains(&got.port()));
        let fixed = end
            .adapter
            .try_shared_endpoint(addr.with_port(fixed_port))
            .expect("CreateSharedEndpoint, explicit port");
        assert_eq!(
            address_of(Getter::Endpoint(&fixed)),
            addr.with_port(fixed_port)
        );
        let listener = end.adapter.listener(&Incoming::new());
        assert_eq!(listener.listen(got), STATUS_SHARING_VIOLATION);
        assert_eq!(
            listener.listen(addr.with_port(fixed_port)),
            STATUS_SHARING_VIOLATION
        );
        assert_closes_succeed!(listener, ephemeral, fixed);
        end.close();
    }
}

/// N9: CreateSharedEndpoint fails like Listen: STATUS_SHARING_VIOLATION for
/// an address and port in use (by a listener, by another shared endpoint),
/// STATUS_INVALID_ADDRESS for an address that is not the adapter's.
#[test]
fn n9_shared_endpoint_fails_like_listen() {
    let (a, b) = End::two();
    let fixed_port = a.explicit_port();
    let (listener, _incoming, listen_addr) = a.listen(0);
    assert_eq!(
        a.adapter.try_shared_endpoint(listen_addr).err(),
        Some(STATUS_SHARING_VIOLATION),
        "a listener's address"
    );
    let endpoint = a
        .adapter
        .try_shared_endpoint(a.addr.with_port(fixed_port))
        .expect("CreateSharedEndpoint");
    assert_eq!(
        a.adapter
            .try_shared_endpoint(a.addr.with_port(fixed_port))
            .err(),
        Some(STATUS_SHARING_VIOLATION),
        "another shared endpoint's address"
    );
    assert_eq!(
        a.adapter
            .try_shared_endpoint(b.addr.with_port(fixed_port))
            .err(),
        Some(STATUS_INVALID_ADDRESS),
        "the peer adapter's address"
    );
    assert_eq!(
        a.adapter
            .try_shared_endpoint(own_v4().with_port(fixed_port))
            .err(),
        Some(STATUS_INVALID_ADDRESS),
        "an address nobody has"
    );
    assert_success!(endpoint.close());
    close_stage(listener, [], (a, b));
}

/// N10: a shared endpoint counts one reference for itself and one per
/// connector connected through it: its close stays pending while such a
/// connector remains, and until then the address and port stay in use;
/// afterwards they are free.
#[test]
fn n10_shared_endpoint_close_pends_while_its_connectors_remain_and_keeps_the_address() {
    let s = Fixture::new().staged();
    let src = s.a.explicit_addr();
    let endpoint =
        s.a.adapter
            .try_shared_endpoint(src)
            .expect("CreateSharedEndpoint");
    let active = s.a.adapter.connector();
    let connecting = connect_shared(&active, &s.a_qp, &endpoint, s.listen_addr, 16, 16, b"s");
    assert_eq!(connecting.0, STATUS_PENDING);
    let passive = s.incoming.wait_nth(1);
    // The disconnect signals are callback contexts: kept to the end.
    let Conn {
        active,
        passive,
        a_disconnects: _a_disconnects,
        b_disconnects: _b_disconnects,
    } = Conn::expect_accepted(active, connecting, passive, &s.b_qp, b"");
    assert_eq!(address_of(Getter::ConnectorLocal(&active)), src);

    let closing = close_endpoint_async(endpoint);
    assert_eq!(
        closing.0, STATUS_PENDING,
        "a connector still uses the endpoint"
    );
    let probe = s.a.adapter.listener(&Incoming::new());
    assert_eq!(
        probe.listen(src),
        STATUS_SHARING_VIOLATION,
        "while the connector remains"
    );
    let (x, xs) = active.disconnect();
    let (y, ys) = passive.disconnect();
    assert_success!(xs.outcome(x));
    assert_success!(ys.outcome(y));
    assert_eq!(settled_count(&closing.1), 0, "disconnected, not closed");
    assert_eq!(probe.listen(src), STATUS_SHARING_VIOLATION);
    assert_success!(active.close());
    assert_success!(closing.1.wait(), "the last connector closed");
    assert_success!(probe.listen(src), "the address and port are free");

    assert_closes_succeed!(passive, probe);
    s.close();
}

/// N11: connections through one shared endpoint share its address and port
/// as long as their destinations differ; one whose four-tuple already exists
/// fails with STATUS_ADDRESS_ALREADY_EXISTS; once that connection is gone
/// the four-tuple can be used again.
#[test]
fn n11_shared_endpoint_connections_need_distinct_destinations() {
    let (a, b) = End::two();
    let (l1, in1, dst1) = b.listen(0);
    let (l2, in2, dst2) = b.listen(0);
    let endpoint = a
        .adapter
        .try_shared_endpoint(a.addr.with_port(0))
        .expect("CreateSharedEndpoint");
    let src = address_of(Getter::Endpoint(&endpoint));
    let qps: Vec<(Qp, Qp)> = (0..4).map(|i| (a.qp(0xA0 + i), b.qp(0xB0 + i))).collect();

    let shared = |n: usize, dst: Addr, incoming: &Incoming, nth: usize| -> Conn {
        let (a_qp, b_qp) = &qps[n];
        let active = a.adapter.connector();
        let connecting = connect_shared(&active, a_qp, &endpoint, dst, 16, 16, b"");
        let status = connecting.0;
        assert_eq!(
            status, STATUS_PENDING,
            "ConnectWithSharedEndpoint to {dst:?}"
        );
        let conn = Conn::expect_accepted(active, connecting, incoming.wait_nth(nth), b_qp, b"");
        assert_eq!(address_of(Getter::ConnectorLocal(&conn.active)), src);
        conn
    };
    let first = shared(0, dst1, &in1, 1);
    let second = shared(1, dst2, &in2, 1);

    let dup = a.adapter.connector();
    assert_fails(
        connect_shared(&dup, &qps[2].0, &endpoint, dst1, 16, 16, b""),
        STATUS_ADDRESS_ALREADY_EXISTS,
        "the same four-tuple",
    );
    assert_eq!(
        settled_count_incoming(&in1),
        1,
        "the duplicate reached no listener"
    );
    assert_success!(dup.close());

    first.close();
    let third = shared(3, dst1, &in1, 2);
    third.close();
    second.close();
    assert_closes_succeed!(endpoint, l1, l2);
    close_qp_pairs(qps, (a, b));
}

// ---------------------------------------------------------------------------
// N12–N17: establishing a connection
// ---------------------------------------------------------------------------

/// N12: Connect to an address where nobody listens fails with
/// STATUS_CONNECTION_REFUSED (the port of a closed listener too); the
/// connector and QP may then connect to a listener.
#[test]
fn n12_connect_without_a_listener_is_refused() {
    let (a, b) = End::two();
    let fixed_port = b.explicit_port();
    let a_qp = a.qp(0xA);
    let b_qp = b.qp(0xB);
    let connector = a.adapter.connector();
    assert_fails(
        connector.connect(&a_qp, a.addr, b.addr.with_port(fixed_port), 16, 16, b""),
        STATUS_CONNECTION_REFUSED,
        "no listener",
    );
    let (gone, _, gone_addr) = b.listen(0);
    assert_success!(gone.close());
    assert_fails(
        connector.connect(&a_qp, a.addr, gone_addr, 16, 16, b""),
        STATUS_CONNECTION_REFUSED,
        "a closed listener's port",
    );
    assert_success!(connector.close());
    let (listener, incoming, listen_addr) = b.listen(0);
    let conn = Conn::establish(&a.adapter, a.addr, &a_qp, listen_addr, &incoming, 1, &b_qp);
    conn.close();
    close_stage(listener, [a_qp, b_qp], (a, b));
}

/// N12: the other Connect failures this provider can produce, each with its
/// documented status: STATUS_HOST_UNREACHABLE (no adapter has the
/// destination), STATUS_NETWORK_UNREACHABLE (source and destination of
/// different families), STATUS_INVALID_ADDRESS (a source that is not the
/// adapter's), STATUS_SHARING_VIOLATION (a source address and port in use).
#[test]
fn n12_connect_failures_name_their_cause() {
    let (a, b) = End::two();
    let fixed_port = a.explicit_port();
    let (listener, incoming, listen_addr) = b.listen(0);
    let (v6, _) = fresh_v6();
    let (busy, _, busy_addr) = a.listen(0);
    let qp = a.qp(0xA);
    let connector = a.adapter.connector();
    for (src, dst, expected, what) in [
        (
            a.addr,
            own_v4().with_port(fixed_port),
            // Over iWARP every 127.0.0.0/8 address is the host's own
            // loopback, reachable: nobody listens there, so TCP refuses.
            match Transport::default() {
                Transport::Local => STATUS_HOST_UNREACHABLE,
                Transport::Iwarp => STATUS_CONNECTION_REFUSED,
            },
            "nobody has the destination",
        ),
        (
            a.addr,
            v6.with_port(fixed_port),
            STATUS_NETWORK_UNREACHABLE,
            "IPv4 source, IPv6 destination",
        ),
        (
            b.addr,
            listen_addr,
            STATUS_INVALID_ADDRESS,
            "the source is the peer's address",
        ),
        (
            own_v4(),
            listen_addr,
            STATUS_INVALID_ADDRESS,
            "the source is nobody's address",
        ),
        (
            busy_addr,
            listen_addr,
            STATUS_SHARING_VIOLATION,
            "the source port is a listener's",
        ),
    ] {
        assert_fails(
            connector.connect(&qp, src, dst, 16, 16, b""),
            expected,
            what,
        );
    }
    assert_eq!(settled_count_incoming(&incoming), 0);
    assert_closes_succeed!(connector, busy);
    close_stage(listener, [qp], (a, b));
}

/// N12: when the listener's backlog of unanswered requests is full, Connect
/// fails with STATUS_CONNECTION_REFUSED; answering one request makes room.
/// On the fabric the refusal is inline. Over iWARP a Connect pends for its
/// TCP connect and MPA request, and the listener's side turns the request
/// away with an MPA reject: the refusal is the Connect's completion (N12
/// allows either), and the request is never delivered.
#[test]
fn n12_connect_is_refused_when_the_backlog_is_full() {
    let (a, b) = End::two();
    let (listener, incoming, listen_addr) = b.listen(0);
    let mut attempts: Vec<(Qp, Connector, Arc<Signal>)> = Vec::new();
    let refused_at = loop {
        assert!(attempts.len() < 1000, "the backlog never filled");
        let qp = a.qp(attempts.len());
        let connector = a.adapter.connector();
        let (status, signal) = connector.connect(&qp, a.addr, listen_addr, 16, 16, b"");
        let delivered = attempts.len() + 1;
        if status == STATUS_PENDING {
            // The listener's answer: the request delivered, or refused.
            wait_until("the request is delivered or refused", || {
                incoming.count() >= delivered || signal.count() > 0
            });
            if signal.count() == 0 {
                attempts.push((qp, connector, signal));
                continue;
            }
            assert_eq!(
                Transport::default(),
                Transport::Iwarp,
                "inline on the fabric"
            );
            assert_eq!(signal.wait(), STATUS_CONNECTION_REFUSED, "backlog full");
            assert_eq!(settled_count(&signal), 1, "one completion");
        } else {
            assert_eq!(status, STATUS_CONNECTION_REFUSED, "backlog full");
            assert_eq!(settled_count(&signal), 0);
        }
        assert_success!(connector.close());
        qp.close();
        break attempts.len();
    };
    assert!(refused_at > 0);
    assert_eq!(
        settled_count_incoming(&incoming),
        refused_at,
        "every request was delivered"
    );
    assert!(
        attempts.iter().all(|(_, _, s)| s.count() == 0),
        "none answered yet"
    );
    // Rejecting one request makes room for one more.
    let first = incoming.wait_nth(1);
    assert_success!(first.reject(b""));
    assert_eq!(attempts[0].2.wait(), STATUS_CONNECTION_REFUSED);
    let qp = a.qp(0xFFFF);
    let connector = a.adapter.connector();
    let (status, signal) = connector.connect(&qp, a.addr, listen_addr, 16, 16, b"");
    assert_eq!(status, STATUS_PENDING, "room again");
    incoming.wait_nth(refused_at + 1);
    attempts.push((qp, connector, signal));

    // Teardown: closing an unanswered request refuses it (N16); each
    // Connect completes so before its connector closes.
    for n in 1..=incoming.count() {
        assert_success!(incoming.wait_nth(n).close());
    }
    for (qp, connector, signal) in attempts {
        assert_eq!(signal.wait(), STATUS_CONNECTION_REFUSED);
        assert_success!(connector.close());
        qp.close();
    }
    close_stage(listener, [], (a, b));
}

/// N13: Connect completes with STATUS_SUCCESS once the peer has accepted,
/// not before; the active consumer may then read GetConnectionData and
/// finishes with CompleteConnect, which registers its disconnect callback
/// (a later peer disconnect is indicated through it) and connects the QPs.
#[test]
fn n13_connect_completes_once_the_peer_accepted_then_complete_connect_establishes() {
    let (s, (active, connecting, passive)) = staged_request(b"hello");
    assert_eq!(
        settled_count(&connecting.1),
        0,
        "Connect pends until the peer accepts"
    );
    let b_disconnects = Signal::new();
    let (accept, accepted) = passive.accept(&s.b_qp, 16, 16, b"welcome", &b_disconnects);
    assert_eq!(accept, STATUS_PENDING);
    assert_success!(connecting.1.wait(), "Connect completes once accepted");
    let (status, _, _, data, len) = active.connection_data(64);
    assert_success!(status);
    assert_eq!(&data[..len as usize], b"welcome");
    let a_disconnects = Signal::new();
    let (complete, completed) =
        complete_connect_with(&active, Some(on_disconnect), a_disconnects.ctx());
    assert_success!(completed.outcome(complete), "CompleteConnect");
    assert_success!(accepted.wait());
    assert_eq!(
        settled_count(&connecting.1),
        1,
        "Connect completed exactly once"
    );

    // The QPs are connected.
    ping_once((&s.a, &s.a_qp), (&s.b, &s.b_qp), b"established");
    // The disconnect callback was registered: the peer's disconnect is
    // indicated through it.
    let (y, ys) = passive.disconnect();
    assert_success!(a_disconnects.wait(), "indicated to the active side");
    let (x, xs) = active.disconnect();
    assert_success!(ys.outcome(y));
    assert_success!(xs.outcome(x));
    assert_closes_succeed!(active, passive);
    s.close();
}

/// N14: CompleteConnect on a connector that is not connecting fails with
/// STATUS_CONNECTION_INVALID: never connected, still waiting for the peer's
/// accept, a passive connector, already established.
#[test]
fn n14_complete_connect_when_not_connecting_fails_connection_invalid() {
    let s = Fixture::new().staged();
    let idle = s.a.adapter.connector();
    assert_fails(
        complete_connect_with(&idle, None, std::ptr::null_mut()),
        STATUS_CONNECTION_INVALID,
        "never connected",
    );
    let (active, connecting, passive) = s.request(1, b"");
    assert_fails(
        complete_connect_with(&active, None, std::ptr::null_mut()),
        STATUS_CONNECTION_INVALID,
        "the peer has not accepted yet",
    );
    assert_fails(
        complete_connect_with(&passive, None, std::ptr::null_mut()),
        STATUS_CONNECTION_INVALID,
        "a passive connector",
    );
    // The refused calls changed nothing: the connection is made.
    let conn = Conn::expect_accepted(active, connecting, passive, &s.b_qp, b"");
    assert_fails(
        complete_connect_with(&conn.active, None, std::ptr::null_mut()),
        STATUS_CONNECTION_INVALID,
        "already established",
    );
    conn.close();
    assert_success!(idle.close());
    s.close();
}

/// N14: CompleteConnect after the accepting peer gave up (closed its
/// connector while its Accept was pending) fails with
/// STATUS_CONNECTION_ABORTED; the QP is not connected and may connect again.
#[test]
fn n14_complete_connect_after_the_accepting_peer_gave_up_fails_connection_aborted() {
    let (s, (active, connecting, passive)) = staged_request(b"");
    let accepted = accept_pending(&s, &passive, connecting, &Signal::new());
    // The passive consumer gives up: its close cancels its Accept (L20).
    assert_success!(passive.close());
    assert_eq!(accepted.wait(), STATUS_CANCELLED);
    await_peer_gone(&active);
    assert_fails(
        complete_connect_with(&active, None, std::ptr::null_mut()),
        STATUS_CONNECTION_ABORTED,
        "the accepting peer gave up",
    );
    expect_not_connected(&s.a_qp);
    assert_success!(active.close());
    s.establish(2).close();
    s.close();
}

/// N15: Accept completes only once the active side has called
/// CompleteConnect (the active side's Connect completes first).
#[test]
fn n15_accept_completes_only_after_complete_connect() {
    let (s, (active, connecting, passive)) = staged_request(b"");
    let b_disconnects = Signal::new();
    let accepted = accept_pending(&s, &passive, connecting, &b_disconnects);
    assert_eq!(
        settled_count(&accepted),
        0,
        "Accept pends until CompleteConnect"
    );
    let a_disconnects = Signal::new();
    assert_success!(active.complete_connect(&a_disconnects));
    assert_success!(accepted.wait());
    assert_eq!(settled_count(&accepted), 1, "exactly once");
    Conn::of(active, passive, a_disconnects, b_disconnects).close();
    s.close();
}

/// N15: Accept fails with STATUS_CONNECTION_ABORTED when the active side
/// gave up (closed its connector, cancelling its Connect) before the
/// passive consumer answered; the QP given to Accept stays unconnected and
/// usable.
#[test]
fn n15_accept_after_the_active_side_gave_up_fails_connection_aborted() {
    let (s, (active, connecting, passive)) = staged_request(b"");
    assert_success!(active.close());
    assert_eq!(
        connecting.1.wait(),
        STATUS_CANCELLED,
        "the close cancels the Connect (L20)"
    );
    await_peer_gone(&passive);
    assert_fails(
        passive.accept(&s.b_qp, 16, 16, b"", &Signal::new()),
        STATUS_CONNECTION_ABORTED,
        "Accept after the active side gave up",
    );
    assert_success!(passive.close());
    s.establish(2).close();
    s.close();
}

/// N16: on the passive side, Reject (synchronous, STATUS_SUCCESS) turns the
/// request down, and the peer's Connect fails with STATUS_CONNECTION_REFUSED.
#[test]
fn n16_passive_reject_refuses_the_active_connect() {
    let (s, (active, connecting, passive)) = staged_request(b"");
    assert_success!(passive.reject(b"no thanks"));
    assert_eq!(connecting.1.wait(), STATUS_CONNECTION_REFUSED);
    assert_eq!(settled_count(&connecting.1), 1);
    expect_not_connected(&s.a_qp);
    assert_closes_succeed!(passive, active);
    s.close();
}

/// N16: on the active side, after Connect completed, Reject (synchronous,
/// STATUS_SUCCESS) abandons the connection, and the peer's Accept fails
/// with STATUS_CONNECTION_ABORTED.
#[test]
fn n16_active_reject_after_connect_aborts_the_passive_accept() {
    let (s, (active, connecting, passive)) = staged_request(b"");
    let accepted = accept_pending(&s, &passive, connecting, &Signal::new());
    assert_success!(active.reject(b"changed my mind"));
    assert_eq!(accepted.wait(), STATUS_CONNECTION_ABORTED);
    assert_eq!(settled_count(&accepted), 1);
    expect_not_connected(&s.b_qp);
    assert_closes_succeed!(passive, active);
    s.close();
}

/// N16: Reject returns STATUS_CONNECTION_ABORTED when the peer had already
/// abandoned the connection — on the passive side (the active side closed
/// its connector) and on the active side (the passive side closed its
/// connector after accepting).
#[test]
fn n16_reject_after_the_peer_abandoned_returns_connection_aborted() {
    let s = Fixture::new().staged();

    // Passive side.
    let (active, connecting, passive) = s.request(1, b"");
    assert_success!(active.close());
    assert_eq!(connecting.1.wait(), STATUS_CANCELLED);
    await_peer_gone(&passive);
    assert_eq!(passive.reject(b""), STATUS_CONNECTION_ABORTED);
    assert_success!(passive.close());

    // Active side.
    let (active, connecting, passive) = s.request(2, b"");
    let accepted = accept_pending(&s, &passive, connecting, &Signal::new());
    assert_success!(passive.close());
    assert_eq!(accepted.wait(), STATUS_CANCELLED);
    await_peer_gone(&active);
    assert_eq!(active.reject(b""), STATUS_CONNECTION_ABORTED);
    assert_success!(active.close());

    s.close();
}

/// N17: private data above `MaxCallerData` on Connect and
/// ConnectWithSharedEndpoint is refused inline (NDSPI v2's
/// STATUS_INVALID_BUFFER_SIZE, the provider's documented status); exactly
/// `MaxCallerData` bytes reach the peer whole.
#[test]
fn n17_private_data_over_max_caller_data_is_refused_on_connect() {
    let s = Fixture::new().staged();
    let max = s.a.adapter.info().max_caller_data as usize;
    assert!(max > 0);
    let long = vec![0x5A_u8; max + 1];
    let connector = s.a.adapter.connector();
    assert_fails(
        connector.connect(&s.a_qp, s.a.addr, s.listen_addr, 16, 16, &long),
        STATUS_INVALID_BUFFER_SIZE,
        "Connect with MaxCallerData + 1 bytes",
    );
    let endpoint =
        s.a.adapter
            .try_shared_endpoint(s.a.addr.with_port(0))
            .expect("CreateSharedEndpoint");
    assert_fails(
        connect_shared(&connector, &s.a_qp, &endpoint, s.listen_addr, 16, 16, &long),
        STATUS_INVALID_BUFFER_SIZE,
        "ConnectWithSharedEndpoint with MaxCallerData + 1 bytes",
    );
    assert_eq!(settled_count_incoming(&s.incoming), 0);
    let exact: Vec<u8> = (0..max).map(|i| i as u8).collect();
    let connecting = connect_shared(
        &connector,
        &s.a_qp,
        &endpoint,
        s.listen_addr,
        16,
        16,
        &exact,
    );
    assert_eq!(connecting.0, STATUS_PENDING);
    let passive = s.incoming.wait_nth(1);
    let (status, _, _, data, len) = passive.connection_data(max + 8);
    assert_success!(status);
    assert_eq!(&data[..len as usize], &exact[..]);
    assert_success!(passive.reject(b""));
    assert_eq!(outcome(connecting), STATUS_CONNECTION_REFUSED);
    assert_closes_succeed!(passive, connector, endpoint);
    s.close();
}

/// N17: private data above `MaxCalleeData` on Accept and Reject is refused
/// inline (STATUS_INVALID_BUFFER_SIZE) and leaves the request unanswered;
/// exactly `MaxCalleeData` bytes reach the active side whole.
#[test]
fn n17_private_data_over_max_callee_data_is_refused_on_accept_and_reject() {
    let s = Fixture::new().staged();
    let max = s.b.adapter.info().max_callee_data as usize;
    assert!(max > 0);
    let (active, connecting, passive) = s.request(1, b"");
    let long = vec![0xA5_u8; max + 1];
    assert_fails(
        passive.accept(&s.b_qp, 16, 16, &long, &Signal::new()),
        STATUS_INVALID_BUFFER_SIZE,
        "Accept with MaxCalleeData + 1 bytes",
    );
    assert_eq!(
        passive.reject(&long),
        STATUS_INVALID_BUFFER_SIZE,
        "Reject with MaxCalleeData + 1 bytes"
    );
    assert_eq!(connecting.1.count(), 0, "the request is still unanswered");
    let exact: Vec<u8> = (0..max).map(|i| (i * 7) as u8).collect();
    let b_disconnects = Signal::new();
    let accepted = passive.accept(&s.b_qp, 16, 16, &exact, &b_disconnects);
    assert_success!(outcome(connecting));
    let (status, _, _, data, len) = active.connection_data(max + 8);
    assert_success!(status);
    assert_eq!(&data[..len as usize], &exact[..]);
    Conn::expect_completed(active, passive, accepted, b_disconnects).close();
    s.close();
}

// ---------------------------------------------------------------------------
// N18–N21: connection data and read limits
// ---------------------------------------------------------------------------

/// Checks N18 on a connector whose peer sent `sent`.
fn check_connection_data(connector: &Connector, sent: &[u8]) {
    let rds = u32::try_from(sent.len()).unwrap();
    // No buffer, length 0: the size.
    let query = connection_data_into(connector, None, 0, true);
    assert_eq!(
        (query.status, query.length),
        (STATUS_SUCCESS, rds),
        "NULL buffer, length 0"
    );
    // Exactly RDS bytes.
    let mut exact = vec![0xEE_u8; sent.len()];
    let got = connection_data_into(connector, Some(&mut exact), rds, true);
    assert_eq!(
        (got.status, got.length),
        (STATUS_SUCCESS, rds),
        "a buffer of RDS bytes"
    );
    assert_eq!(exact, sent);
    // More room than needed: RDS bytes copied, the rest untouched.
    let mut roomy = vec![0xEE_u8; sent.len() + 10];
    let got = connection_data_into(connector, Some(&mut roomy), rds + 10, false);
    assert_eq!(
        (got.status, got.length),
        (STATUS_SUCCESS, rds),
        "a larger buffer"
    );
    assert_eq!(&roomy[..sent.len()], sent);
    assert!(
        roomy[sent.len()..].iter().all(|&x| x == 0xEE),
        "nothing written past RDS"
    );
    // Too small: min(length, RDS) bytes, STATUS_BUFFER_TOO_SMALL, length = RDS.
    for short in [1_usize, sent.len() - 1] {
        let mut small = vec![0xEE_u8; sent.len()];
        let got = connection_data_into(connector, Some(&mut small), short as u32, true);
        assert_eq!(
            (got.status, got.length),
            (STATUS_BUFFER_TOO_SMALL, rds),
            "a buffer of {short} bytes"
        );
        assert_eq!(
            &small[..short],
            &sent[..short],
            "the first {short} bytes are copied"
        );
        assert!(
            small[short..].iter().all(|&x| x == 0xEE),
            "nothing past the buffer"
        );
    }
}

/// N18: GetConnectionData with no buffer and a length of 0 returns
/// STATUS_SUCCESS with the length set to RDS (the size of the peer's
/// private data).
#[test]
fn n18_get_connection_data_reports_rds_with_a_null_buffer() {
    let (s, (active, connecting, passive)) = staged_request(b"twelve bytes");
    let query = connection_data_into(&passive, None, 0, false);
    assert_eq!(
        query,
        Data {
            status: STATUS_SUCCESS,
            length: 12,
            limits: None
        }
    );
    refuse(active, connecting, passive);
    s.close();
}

/// N18: with a buffer, GetConnectionData copies min(length, RDS) bytes and
/// returns STATUS_SUCCESS if the buffer held RDS bytes, else
/// STATUS_BUFFER_TOO_SMALL, setting the length to RDS in both cases — on the
/// passive side (the caller's data) and on the active side (the callee's).
#[test]
fn n18_get_connection_data_copies_min_length_rds_and_reports_buffer_too_small() {
    let s = Fixture::new().staged();
    let active = s.a.adapter.connector();
    let caller = b"caller's private data";
    let callee = b"the callee's answer, somewhat longer";
    let connecting = start_connect(&active, &s.a_qp, s.a.addr, s.listen_addr, caller);
    let passive = s.incoming.wait_nth(1);
    check_connection_data(&passive, caller);
    let b_disconnects = Signal::new();
    let accepted = passive.accept(&s.b_qp, 16, 16, callee, &b_disconnects);
    assert_success!(outcome(connecting));
    check_connection_data(&active, callee);
    Conn::expect_completed(active, passive, accepted, b_disconnects).close();
    s.close();
}

/// N18: no private data: RDS is 0, and a query with a buffer succeeds
/// without writing to it.
#[test]
fn n18_empty_private_data_has_rds_0() {
    let (s, (active, connecting, passive)) = staged_request(b"");
    let query = connection_data_into(&passive, None, 0, false);
    assert_eq!((query.status, query.length), (STATUS_SUCCESS, 0));
    let mut buffer = [0xEE_u8; 8];
    let got = connection_data_into(&passive, Some(&mut buffer), 8, false);
    assert_eq!((got.status, got.length), (STATUS_SUCCESS, 0));
    assert_eq!(buffer, [0xEE; 8]);
    refuse(active, connecting, passive);
    s.close();
}

/// N19: GetConnectionData works on a connector delivered by a connect event
/// (before Accept or Reject) and on an active connector whose Connect has
/// completed (before CompleteConnect), with NULL read-limit outputs or with
/// them; before the peer has answered (Connect still pending, or never
/// called) there is nothing to read: the provider's documented answer is
/// STATUS_CONNECTION_INVALID.
#[test]
fn n19_get_connection_data_is_valid_once_the_peer_has_spoken() {
    let s = Fixture::new().staged();
    let active = s.a.adapter.connector();
    let never = connection_data_into(&active, None, 0, true);
    assert_eq!(never.status, STATUS_CONNECTION_INVALID, "never connected");
    let connecting = start_connect(&active, &s.a_qp, s.a.addr, s.listen_addr, b"ask");
    let passive = s.incoming.wait_nth(1);
    let pending = connection_data_into(&active, None, 0, true);
    assert_eq!(
        pending.status, STATUS_CONNECTION_INVALID,
        "Connect still pending"
    );
    // Passive, before Accept: NULL limit outputs, then with them.
    let mut buffer = [0_u8; 3];
    let got = connection_data_into(&passive, Some(&mut buffer), 3, false);
    assert_eq!(
        (got.status, got.length, got.limits),
        (STATUS_SUCCESS, 3, None)
    );
    assert_eq!(&buffer, b"ask");
    let got = connection_data_into(&passive, Some(&mut buffer), 3, true);
    assert_eq!((got.status, got.length), (STATUS_SUCCESS, 3));
    assert_eq!(got.limits, Some((16, 16)), "the peer asked for 16 / 16");
    let b_disconnects = Signal::new();
    let accepted = passive.accept(&s.b_qp, 8, 4, b"yes", &b_disconnects);
    assert_success!(outcome(connecting));
    // Active, after Connect completed, before CompleteConnect.
    let got = connection_data_into(&active, Some(&mut buffer), 3, false);
    assert_eq!(
        (got.status, got.length, got.limits),
        (STATUS_SUCCESS, 3, None)
    );
    assert_eq!(&buffer, b"yes");
    let got = connection_data_into(&active, None, 0, true);
    assert_eq!((got.status, got.length), (STATUS_SUCCESS, 3));
    assert_eq!(got.limits, Some((4, 8)), "min(16, 4), min(16, 8)");
    Conn::expect_completed(active, passive, accepted, b_disconnects).close();
    s.close();
}

/// N19 (consumer): GetConnectionData is not called after Accept or
/// CompleteConnect. A consumer that does anyway gets a prompt, harmless
/// answer — the provider's: STATUS_SUCCESS with the peer's data and the
/// effective limits — and the connection is unaffected.
#[test]
fn n19_get_connection_data_after_accept_or_complete_connect_stays_harmless() {
    let (s, (active, connecting, passive)) = staged_request(b"from a");
    let b_disconnects = Signal::new();
    let accepted = passive.accept(&s.b_qp, 16, 16, b"from b", &b_disconnects);
    // After Accept, before the connection is complete.
    let mut buffer = [0_u8; 6];
    let got = connection_data_into(&passive, Some(&mut buffer), 6, true);
    assert_eq!(
        (got.status, got.length, got.limits),
        (STATUS_SUCCESS, 6, Some((16, 16)))
    );
    assert_eq!(&buffer, b"from a");
    assert_success!(outcome(connecting));
    let conn = Conn::expect_completed(active, passive, accepted, b_disconnects);
    // After CompleteConnect and Accept completed.
    for (connector, sent) in [(&conn.active, b"from b"), (&conn.passive, b"from a")] {
        let got = connection_data_into(connector, Some(&mut buffer), 6, true);
        assert_eq!(
            (got.status, got.length, got.limits),
            (STATUS_SUCCESS, 6, Some((16, 16)))
        );
        assert_eq!(&buffer, sent);
    }
    ping_once((&s.a, &s.a_qp), (&s.b, &s.b_qp), b"still fine");
    conn.close();
    s.close();
}

/// N20: the provider lowers each side's read limits to the adapter's
/// `MaxInboundReadLimit` / `MaxOutboundReadLimit`, sends them to the peer,
/// and reports effective inbound = min(own inbound, peer's outbound) and
/// effective outbound = min(own outbound, peer's inbound). Before Accept the
/// passive side sees the caller's offer from its own side (inbound = the
/// caller's outbound, outbound = the caller's inbound), lowered alike.
#[test]
fn n20_read_limits_are_lowered_to_the_adapter_maxima_and_the_minimum_is_effective() {
    let (a, b) = End::two();
    let info = a.adapter.info();
    let (max_in, max_out) = (info.max_inbound_read_limit, info.max_outbound_read_limit);
    assert!(max_in > 8 && max_out > 8, "limits: {max_in} / {max_out}");
    let (listener, incoming, listen_addr) = b.listen(0);
    // (caller inbound, caller outbound, callee inbound, callee outbound)
    let cases = [
        (u32::MAX, u32::MAX, 5, 7),
        (3, u32::MAX, u32::MAX, 2),
        (u32::MAX, 6, 4, u32::MAX),
        (0, 0, u32::MAX, u32::MAX),
    ];
    for (n, (c_in, c_out, s_in, s_out)) in cases.into_iter().enumerate() {
        let a_qp = a.qp(0xA);
        let b_qp = b.qp(0xB);
        let active = a.adapter.connector();
        let (status, connecting) = active.connect(&a_qp, a.addr, listen_addr, c_in, c_out, b"");
        assert_eq!(status, STATUS_PENDING);
        let passive = incoming.wait_nth(n + 1);
        let (c_in, c_out) = (c_in.min(max_in), c_out.min(max_out));
        let (s_in, s_out) = (s_in.min(max_in), s_out.min(max_out));
        let offer = connection_data_into(&passive, None, 0, true);
        assert_success!(offer.status);
        assert_eq!(
            offer.limits,
            Some((c_out.min(max_in), c_in.min(max_out))),
            "case {n}: the passive side before Accept"
        );
        let b_disconnects = Signal::new();
        let accepted = passive.accept(&b_qp, cases[n].2, cases[n].3, b"", &b_disconnects);
        assert_success!(connecting.outcome(status));
        let effective = connection_data_into(&active, None, 0, true);
        assert_success!(effective.status);
        assert_eq!(
            effective.limits,
            Some((c_in.min(s_out), c_out.min(s_in))),
            "case {n}: the active side's effective limits"
        );
        Conn::expect_completed(active, passive, accepted, b_disconnects).close();
        a_qp.close();
        b_qp.close();
    }
    close_stage(listener, [], (a, b));
}

/// N21: the effective limits bound the Reads in flight; Reads beyond them
/// wait their turn and complete — they do not fail. With effective limits
/// of 1 / 1, sixteen Reads posted at once all complete with the right data.
#[test]
fn n21_reads_beyond_the_effective_limits_queue_and_complete() {
    let s = Fixture::new().staged();
    let active = s.a.adapter.connector();
    let (status, connecting) = active.connect(&s.a_qp, s.a.addr, s.listen_addr, 1, 1, b"");
    let passive = s.incoming.wait_nth(1);
    let b_disconnects = Signal::new();
    let accepted = passive.accept(&s.b_qp, 1, 1, b"", &b_disconnects);
    assert_success!(connecting.outcome(status));
    let limits = connection_data_into(&active, None, 0, true).limits;
    assert_eq!(limits, Some((1, 1)), "effective limits");
    let conn = Conn::expect_completed(active, passive, accepted, b_disconnects);

    let a_mem = Mem::all(&s.a.pd, 16 * 1024, 0);
    let mut b_mem = Mem::all(&s.b.pd, 16 * 1024, 0);
    for (i, byte) in b_mem.buffer.bytes_mut().iter_mut().enumerate() {
        *byte = (i / 1024) as u8 ^ (i as u8);
    }
    for i in 0..16 {
        let status = s.a_qp.read(
            0x100 + i,
            &[a_mem.sge(i * 1024, 1024)],
            b_mem.remote(i * 1024),
            b_mem.token(),
            0,
        );
        assert_success!(status, "Read {i} is accepted");
    }
    assert_eq!(
        sorted_summary(&s.a.cq, 16),
        each_with(0x100..0x110, STATUS_SUCCESS)
    );
    assert_eq!(a_mem.bytes(), b_mem.bytes(), "every Read brought its bytes");
    conn.close();
    s.close_with_memory([a_mem, b_mem]);
}

// ---------------------------------------------------------------------------
// N22, N23: address getters
// ---------------------------------------------------------------------------

/// Checks N22 on one getter that reports `expected`.
fn check_getter(getter: Getter<'_>, expected: Addr) {
    let name = getter.name();
    let needed = expected.len();
    // Room for a SOCKADDR_IN6: the bytes written are reported.
    let (status, bytes, len) = get_address(getter, 28);
    assert_eq!(
        (status, len),
        (STATUS_SUCCESS, needed),
        "{name}: bytes written"
    );
    assert!(
        bytes[needed as usize..].iter().all(|&x| x == 0xEE),
        "{name}: nothing past them"
    );
    assert_eq!(address_of(getter), expected, "{name}");
    // Exactly the size needed.
    let (status, _, len) = get_address(getter, needed);
    assert_eq!(
        (status, len),
        (STATUS_SUCCESS, needed),
        "{name}: exact buffer"
    );
    // Too small (and none at all): the size needed.
    for room in [needed - 1, 8, 0] {
        let (status, bytes, len) = get_address(getter, room);
        assert_eq!(
            (status, len),
            (STATUS_BUFFER_TOO_SMALL, needed),
            "{name}: {room} bytes"
        );
        assert!(bytes.iter().all(|&x| x == 0xEE), "{name}: nothing written");
    }
}

/// N22: every address getter takes the buffer size in `*pAddressLength`
/// and returns the bytes written there (16 for IPv4, 28 for IPv6); a buffer
/// that is too small gives STATUS_BUFFER_TOO_SMALL with the size needed.
#[test]
fn n22_address_getters_report_the_bytes_written_or_needed() {
    for family in [Family::V4, Family::V6] {
        let (a, b) = Fixture::new().family(family).ends();
        let fixed_port = a.explicit_port();
        let a_qp = a.qp(0xA);
        let b_qp = b.qp(0xB);
        let (listener, incoming, listen_addr) = b.listen(0);
        let src = a.addr.with_port(fixed_port);
        let conn = Conn::establish(&a.adapter, src, &a_qp, listen_addr, &incoming, 1, &b_qp);
        let endpoint = a
            .adapter
            .try_shared_endpoint(a.addr.with_port(fixed_port + 1))
            .expect("CreateSharedEndpoint");
        check_getter(Getter::Listener(&listener), listen_addr);
        check_getter(Getter::ConnectorLocal(&conn.active), src);
        check_getter(Getter::ConnectorPeer(&conn.active), listen_addr);
        check_getter(Getter::ConnectorLocal(&conn.passive), listen_addr);
        check_getter(Getter::ConnectorPeer(&conn.passive), src);
        check_getter(
            Getter::Endpoint(&endpoint),
            a.addr.with_port(fixed_port + 1),
        );
        assert_success!(endpoint.close());
        conn.close();
        assert_success!(listener.close());
        a_qp.close();
        b_qp.close();
        a.close();
        b.close();
    }
}

/// N23 (NDSPI v2 only), as this provider behaves: a connector has no
/// addresses before it connects (STATUS_CONNECTION_INVALID, its documented
/// answer); its local address is available once it is connecting, and both
/// are once it is connected; a connector delivered by a connect event has
/// both at once.
#[test]
fn n23_local_address_once_connecting_peer_address_once_connected() {
    let s = Fixture::new().staged();
    let active = s.a.adapter.connector();
    for getter in [
        Getter::ConnectorLocal(&active),
        Getter::ConnectorPeer(&active),
    ] {
        let (status, bytes, _) = get_address(getter, 28);
        assert_eq!(
            status,
            STATUS_CONNECTION_INVALID,
            "{} before Connect",
            getter.name()
        );
        assert!(bytes.iter().all(|&x| x == 0xEE));
    }
    let src = s.a.explicit_addr();
    let connecting = start_connect(&active, &s.a_qp, src, s.listen_addr, b"");
    assert_eq!(
        address_of(Getter::ConnectorLocal(&active)),
        src,
        "while connecting"
    );
    let passive = s.incoming.wait_nth(1);
    assert_eq!(address_of(Getter::ConnectorLocal(&passive)), s.listen_addr);
    assert_eq!(address_of(Getter::ConnectorPeer(&passive)), src);
    let conn = Conn::expect_accepted(active, connecting, passive, &s.b_qp, b"");
    assert_eq!(address_of(Getter::ConnectorLocal(&conn.active)), src);
    assert_eq!(
        address_of(Getter::ConnectorPeer(&conn.active)),
        s.listen_addr
    );
    conn.close();
    s.close();
}

// ---------------------------------------------------------------------------
// N24–N26: disconnect events and Disconnect
// ---------------------------------------------------------------------------

/// A disconnect callback and its context (None: NULL).
type DisconnectEvent = Option<(NdkFnDisconnectEventCallback, *mut std::ffi::c_void)>;

/// Connects `a_qp` to `b_qp` with the given disconnect callbacks (None:
/// NULL) on CompleteConnect and Accept.
#[allow(clippy::too_many_arguments, reason = "both sides' callbacks")]
fn connect_with_callbacks(
    a: &End,
    a_qp: &Qp,
    b_qp: &Qp,
    listen_addr: Addr,
    incoming: &Incoming,
    nth: usize,
    a_event: DisconnectEvent,
    b_event: DisconnectEvent,
) -> (Connector, Connector) {
    let active = a.adapter.connector();
    let connecting = start_connect(&active, a_qp, a.addr, listen_addr, b"");
    let passive = incoming.wait_nth(nth);
    let (b_cb, b_ctx) = b_event.map_or((None, std::ptr::null_mut()), |(f, c)| (Some(f), c));
    let accepted = accept_with(&passive, b_qp, (16, 16), b"", (b_cb, b_ctx));
    assert_success!(outcome(connecting));
    let (a_cb, a_ctx) = a_event.map_or((None, std::ptr::null_mut()), |(f, c)| (Some(f), c));
    assert_success!(outcome(complete_connect_with(&active, a_cb, a_ctx)));
    assert_success!(outcome(accepted));
    (active, passive)
}

/// [`connect_with_callbacks`] on the staged fixture's QPs: its first
/// connection.
fn staged_with_callbacks(
    s: &Staged,
    a_event: DisconnectEvent,
    b_event: DisconnectEvent,
) -> (Connector, Connector) {
    let (a, incoming) = (&s.a, &s.incoming);
    connect_with_callbacks(
        a,
        &s.a_qp,
        &s.b_qp,
        s.listen_addr,
        incoming,
        1,
        a_event,
        b_event,
    )
}

/// N24: the disconnect callback of CompleteConnect and Accept is optional:
/// with NULL on both sides the connection works, each side's peer-initiated
/// disconnect (and a peer's close) goes unindicated without harm, and
/// Disconnect completes.
#[test]
fn n24_disconnect_callback_may_be_null() {
    let (a, b) = End::two();
    let (listener, incoming, listen_addr) = b.listen(0);
    for (n, a_first) in [true, false].into_iter().enumerate() {
        let a_qp = a.qp(0xA);
        let b_qp = b.qp(0xB);
        let (active, passive) =
            connect_with_callbacks(&a, &a_qp, &b_qp, listen_addr, &incoming, n + 1, None, None);
        ping_once((&a, &a_qp), (&b, &b_qp), b"no callbacks");
        let (first, second) = if a_first {
            (&active, &passive)
        } else {
            (&passive, &active)
        };
        let (x, xs) = first.disconnect();
        std::thread::sleep(SETTLE);
        let (y, ys) = second.disconnect();
        assert_success!(xs.outcome(x));
        assert_success!(ys.outcome(y));
        assert_closes_succeed!(active, passive);
        a_qp.close();
        b_qp.close();
    }
    // A peer's close, too, with no callback to call.
    let a_qp = a.qp(0xA);
    let b_qp = b.qp(0xB);
    let (active, passive) =
        connect_with_callbacks(&a, &a_qp, &b_qp, listen_addr, &incoming, 3, None, None);
    assert_success!(active.close());
    let (y, ys) = passive.disconnect();
    assert_success!(ys.outcome(y));
    assert_success!(passive.close());
    close_stage(listener, [a_qp, b_qp], (a, b));
}

/// N24: the disconnect callback is called at most once per connection, even
/// when the connection is first aborted (an error completion) and the peer
/// then disconnects and closes.
#[test]
fn n24_disconnect_indication_at_most_once_per_connection() {
    let s = Fixture::new().staged();
    let a_events = Signal::new();
    let b_events = Signal::new();
    let (active, passive) = staged_with_callbacks(
        &s,
        Some((on_disconnect, a_events.ctx())),
        Some((on_disconnect, b_events.ctx())),
    );
    // An RDMA Write of A's gathering from a token A's MR never issued: an
    // error ends the connection (E5), which both sides learn of (X2). (A
    // local error: a remote one returns over iWARP as B's Terminate after
    // the Write completed, RFC 5040 §7.)
    let a_mem = Mem::all(&s.a.pd, 4096, 1);
    let b_mem = Mem::all(&s.b.pd, 4096, 0);
    assert_success!(s.a_qp.write(
        1,
        &[a_mem.bad_sge(0, 64)],
        b_mem.remote(0),
        b_mem.token(),
        0
    ));
    let failed = s.a.cq.wait_results(1);
    assert_ne!(failed[0].status, STATUS_SUCCESS, "the Write failed");
    assert_success!(a_events.wait(), "the abort is indicated to A");
    assert_success!(b_events.wait(), "the abort is indicated to B");
    // The peer's Disconnect and close add no second indication.
    let (y, ys) = passive.disconnect();
    let _ = ys.outcome(y);
    assert_success!(passive.close());
    assert_eq!(settled_count(&a_events), 1, "once for A");
    let (x, xs) = active.disconnect();
    let _ = xs.outcome(x);
    assert_success!(active.close());
    assert_eq!(settled_count(&b_events), 1, "once for B");
    assert_eq!(a_events.count(), 1);
    a_mem.close();
    b_mem.close();
    s.close();
}

/// N24: indicating a peer-initiated disconnect does not flush the
/// consumer's outstanding work requests: receives B posted stay pending
/// after B's indication, until B itself disconnects (then they are
/// cancelled, E3).
#[test]
fn n24_peer_disconnect_indication_does_not_flush_outstanding_requests() {
    let s = Fixture::new().staged();
    let b_events = Signal::new();
    let (active, passive) = staged_with_callbacks(&s, None, Some((on_disconnect, b_events.ctx())));
    let b_mem = Mem::all(&s.b.pd, 4096, 0);
    for i in 0..4 {
        assert_success!(s.b_qp.receive(0x10 + i, &[b_mem.sge(i * 64, 64)]));
    }
    let (x, xs) = active.disconnect();
    assert_success!(b_events.wait(), "B is told of A's disconnect");
    std::thread::sleep(SETTLE);
    assert_eq!(
        summary(&s.b.cq.poll(16)),
        [],
        "the indication flushed nothing"
    );
    let (y, ys) = passive.disconnect();
    assert_success!(ys.outcome(y));
    assert_success!(xs.outcome(x));
    assert_eq!(
        sorted_summary(&s.b.cq, 4),
        each_with(0x10..0x14, STATUS_CANCELLED)
    );
    assert_closes_succeed!(active, passive);
    b_mem.close();
    s.close();
}

/// N25 (NDKPI 2.1): the Ex disconnect callback with its reason code comes
/// with CompleteConnectEx / AcceptEx, which only a 2.1 connector table has.
/// This provider negotiates NDKPI 1.2 (adapter information and every
/// connector header say so), so a consumer registers the plain callback,
/// which carries no reason and is called once on a peer disconnect.
#[test]
fn n25_a_1_2_provider_indicates_through_the_plain_callback() {
    let (a, b) = End::two();
    assert_eq!(a.adapter.info().version, NDK_VERSION_1_2);
    let (listener, incoming, listen_addr) = b.listen(0);
    let a_qp = a.qp(0xA);
    let b_qp = b.qp(0xB);
    let conn = Conn::establish(&a.adapter, a.addr, &a_qp, listen_addr, &incoming, 1, &b_qp);
    for connector in [&conn.active, &conn.passive] {
        // SAFETY: live connectors; every NDK object starts with its header.
        let header = unsafe { (*connector.0).header };
        assert_eq!(header.version, NDK_VERSION_1_2);
        assert_eq!(header.object_type, NdkObjectType::CONNECTOR);
    }
    let (x, xs) = conn.active.disconnect();
    assert_success!(conn.b_disconnects.wait());
    let (y, ys) = conn.passive.disconnect();
    assert_success!(xs.outcome(x));
    assert_success!(ys.outcome(y));
    assert_eq!(settled_count(&conn.b_disconnects), 1);
    assert_closes_succeed!(conn.active, conn.passive);
    close_stage(listener, [a_qp, b_qp], (a, b));
}

/// N26: Disconnect may pend (L8): it returns STATUS_PENDING and completes
/// once (or returns STATUS_SUCCESS with no completion), and after the
/// graceful exchange the QP is flushed: requests still outstanding complete
/// with STATUS_CANCELLED (E3).
#[test]
fn n26_disconnect_completes_once_and_flushes_the_qp() {
    let ((a, b), (a_qp, b_qp), (listener, incoming, listen_addr)) = Fixture::new().stage();
    let conn = Conn::establish(&a.adapter, a.addr, &a_qp, listen_addr, &incoming, 1, &b_qp);
    let a_mem = Mem::all(&a.pd, 4096, 0);
    for i in 0..3 {
        assert_success!(a_qp.receive(0x20 + i, &[a_mem.sge(i * 64, 64)]));
    }
    let (x, xs) = conn.active.disconnect();
    let (y, ys) = conn.passive.disconnect();
    for (status, signal) in [(x, &xs), (y, &ys)] {
        assert!(
            status == STATUS_PENDING || status == STATUS_SUCCESS,
            "{status:#x}"
        );
        assert_success!(signal.outcome(status));
        let expected = usize::from(status == STATUS_PENDING);
        assert_eq!(
            settled_count(signal),
            expected,
            "one completion iff it pended"
        );
    }
    assert_eq!(
        sorted_summary(&a.cq, 3),
        each_with(0x20..0x23, STATUS_CANCELLED)
    );
    assert!(a.cq.poll(4).is_empty());
    assert_closes_succeed!(conn.active, conn.passive, listener);
    a_mem.close();
    a_qp.close();
    b_qp.close();
    a.close();
    b.close();
}

/// N26: Disconnect on a connector that is not connected fails inline with
/// the provider's documented STATUS_CONNECTION_INVALID, and no completion
/// follows; the provider never times a Disconnect out (it documents no
/// timeouts), so STATUS_IO_TIMEOUT never appears.
#[test]
fn n26_disconnect_of_an_unconnected_connector_fails_inline() {
    let (a, b) = End::two();
    let (listener, incoming, listen_addr) = b.listen(0);
    let a_qp = a.qp(0xA);
    let idle = a.adapter.connector();
    assert_fails(
        idle.disconnect(),
        STATUS_CONNECTION_INVALID,
        "never connected",
    );
    let active = a.adapter.connector();
    let connecting = start_connect(&active, &a_qp, a.addr, listen_addr, b"");
    assert_fails(
        active.disconnect(),
        STATUS_CONNECTION_INVALID,
        "still connecting",
    );
    let passive = incoming.wait_nth(1);
    assert_fails(
        passive.disconnect(),
        STATUS_CONNECTION_INVALID,
        "an unanswered request",
    );
    assert_success!(passive.reject(b""));
    assert_eq!(outcome(connecting), STATUS_CONNECTION_REFUSED);
    assert_fails(active.disconnect(), STATUS_CONNECTION_INVALID, "refused");
    for connector in [idle, active, passive] {
        assert_success!(connector.close());
    }
    close_stage(listener, [a_qp], (a, b));
}

// ---------------------------------------------------------------------------
// N27–N32
// ---------------------------------------------------------------------------

/// N27: the adapter reports `LOOPBACK_CONNECTIONS_SUPPORTED`, and a
/// connection from an address to the same address on the same adapter
/// behaves like any other: data both ways, disconnect, close.
#[test]
fn n27_loopback_connection_on_one_adapter() {
    let (addr, _) = fresh_addresses();
    let end = End::open(addr);
    let flags = end.adapter.flags();
    assert!(flags.contains(AdapterFlags::LOOPBACK_CONNECTIONS_SUPPORTED));
    let qp1 = end.qp(1);
    let qp2 = end.qp(2);
    let (listener, incoming, listen_addr) = end.listen(0);
    let conn = Conn::establish(&end.adapter, addr, &qp1, listen_addr, &incoming, 1, &qp2);
    let local = address_of(Getter::ConnectorLocal(&conn.active));
    assert_eq!(local.ip_bytes(), addr.ip_bytes());
    assert_eq!(address_of(Getter::ConnectorPeer(&conn.active)), listen_addr);
    assert_eq!(address_of(Getter::ConnectorPeer(&conn.passive)), local);
    let mut m1 = Mem::all(&end.pd, 4096, 0);
    let mut m2 = Mem::all(&end.pd, 4096, 0);
    ping((&qp1, &end.cq, &mut m1), (&qp2, &end.cq, &m2), b"to myself");
    ping(
        (&qp2, &end.cq, &mut m2),
        (&qp1, &end.cq, &m1),
        b"from myself",
    );
    let (x, xs) = conn.active.disconnect();
    assert_success!(conn.b_disconnects.wait(), "X2 on a loopback connection");
    let (y, ys) = conn.passive.disconnect();
    assert_success!(xs.outcome(x));
    assert_success!(ys.outcome(y));
    assert_closes_succeed!(conn.active, conn.passive, listener);
    m1.close();
    m2.close();
    qp1.close();
    qp2.close();
    end.close();
}

/// N28 (NDSPI v2 only), as this provider behaves: a failed connection
/// attempt (no listener, rejected, abandoned) leaves the QP as it was — the
/// receive posted before the attempts is still there and takes the first
/// message once the QP connects.
#[test]
fn n28_failed_connection_attempts_leave_the_qp_as_it_was() {
    let (a, b) = End::two();
    let fixed_port = b.explicit_port();
    let a_qp = a.qp(0xA);
    let b_qp = b.qp(0xB);
    let a_mem = Mem::all(&a.pd, 4096, 0);
    assert_success!(a_qp.receive(0x77, &[a_mem.sge(0, 64)]));
    let (listener, incoming, listen_addr) = b.listen(0);
    let connector = a.adapter.connector();
    // No listener.
    assert_fails(
        connector.connect(&a_qp, a.addr, b.addr.with_port(fixed_port), 16, 16, b""),
        STATUS_CONNECTION_REFUSED,
        "no listener",
    );
    // Rejected.
    let connecting = start_connect(&connector, &a_qp, a.addr, listen_addr, b"");
    let passive = incoming.wait_nth(1);
    assert_success!(passive.reject(b""));
    assert_eq!(outcome(connecting), STATUS_CONNECTION_REFUSED);
    assert_success!(passive.close());
    // Abandoned by the passive side after it accepted.
    let connecting = start_connect(&connector, &a_qp, a.addr, listen_addr, b"");
    let passive = incoming.wait_nth(2);
    let accepted = passive.accept(&b_qp, 16, 16, b"", &Signal::new());
    assert_success!(outcome(connecting));
    assert_success!(passive.close());
    assert_eq!(accepted.1.wait(), STATUS_CANCELLED);
    await_peer_gone(&connector);
    assert_eq!(
        outcome(complete_connect_with(
            &connector,
            None,
            std::ptr::null_mut()
        )),
        STATUS_CONNECTION_ABORTED
    );
    assert!(a.cq.poll(4).is_empty(), "the posted receive is untouched");
    assert_success!(connector.close());
    // Both QPs connect now; the old receive takes the message.
    let conn = Conn::establish(&a.adapter, a.addr, &a_qp, listen_addr, &incoming, 3, &b_qp);
    let mut b_mem = Mem::all(&b.pd, 4096, 0);
    b_mem.buffer.bytes_mut()[..5].copy_from_slice(b"still");
    assert_success!(b_qp.send(0x88, &[b_mem.sge(0, 5)], 0));
    let got = a.cq.wait_results(1);
    assert_eq!(
        (got[0].request_context as usize, got[0].status),
        (0x77, STATUS_SUCCESS)
    );
    assert_eq!(got[0].bytes_transferred, 5);
    assert_eq!(&a_mem.bytes()[..5], b"still");
    assert_success!(b.cq.wait_results(1)[0].status);
    conn.close();
    close_stage_with_memory(listener, [a_mem, b_mem], [a_qp, b_qp], (a, b));
}

/// N29 (NDSPI v2 only), as this provider behaves: nothing times a
/// connection out while the passive consumer takes its time to answer —
/// after a pause the request is still pending and can be accepted.
#[test]
fn n29_no_timeout_while_the_passive_consumer_has_not_answered() {
    let (s, (active, connecting, passive)) = staged_request(b"");
    std::thread::sleep(SETTLE * 6);
    assert_eq!(connecting.1.count(), 0, "still waiting for the answer");
    let b_disconnects = Signal::new();
    let accepted = passive.accept(&s.b_qp, 16, 16, b"", &b_disconnects);
    assert_success!(outcome(connecting));
    // The active consumer, too, may take its time before CompleteConnect.
    std::thread::sleep(SETTLE * 6);
    assert_eq!(accepted.1.count(), 0);
    Conn::expect_completed(active, passive, accepted, b_disconnects).close();
    s.close();
}

/// N30 (NDSPI v2 only), as this provider behaves: the ND port space is its
/// own — a port that a host TCP socket holds on the same IP address is free
/// for Listen — and connections made with Connect never share a local port.
#[test]
fn n30_nd_ports_are_separate_from_tcp_ports_and_connect_ports_are_not_shared() {
    let (a, b) = End::two();
    let ip = a.addr.ip_bytes();
    let tcp = std::net::TcpListener::bind((std::net::Ipv4Addr::new(ip[0], ip[1], ip[2], ip[3]), 0))
        .expect("a host TCP socket on the adapter's address");
    let port = tcp.local_addr().unwrap().port();
    let listener = a.adapter.listener(&Incoming::new());
    match Transport::default() {
        Transport::Local => {
            assert_success!(listener.listen(a.addr.with_port(port)), "TCP port {port}");
            drop(tcp);
        }
        // Over iWARP the hardware shares the host's TCP port space (N30's
        // exception: ND ports are mapped to TCP ports, one to one): the
        // port the socket holds is in use for Listen, free once the socket
        // lets go, and then a TCP port no socket can bind.
        Transport::Iwarp => {
            assert_eq!(
                listener.listen(a.addr.with_port(port)),
                STATUS_SHARING_VIOLATION,
                "TCP port {port}, held by a host socket"
            );
            drop(tcp);
            assert_success!(listener.listen(a.addr.with_port(port)), "TCP port {port}");
            assert!(
                std::net::TcpListener::bind((
                    std::net::Ipv4Addr::new(ip[0], ip[1], ip[2], ip[3]),
                    port
                ))
                .is_err(),
                "the ND listener holds TCP port {port}"
            );
        }
    }
    assert_success!(listener.close());

    // Connections made with Connect: distinct ephemeral ports; an explicit
    // port one of them holds is refused.
    let (b_listener, incoming, listen_addr) = b.listen(0);
    let qps: Vec<(Qp, Qp)> = (0..3).map(|i| (a.qp(0xA0 + i), b.qp(0xB0 + i))).collect();
    let conns = establish_each(&a, &qps[..2], listen_addr, &incoming);
    let p1 = address_of(Getter::ConnectorLocal(&conns[0].active));
    let p2 = address_of(Getter::ConnectorLocal(&conns[1].active));
    assert_ne!(p1.port(), p2.port());
    let third = a.adapter.connector();
    assert_fails(
        third.connect(&qps[2].0, p1, listen_addr, 16, 16, b""),
        STATUS_SHARING_VIOLATION,
        "a local port another Connect holds",
    );
    assert_success!(third.close());
    for conn in conns {
        conn.close();
    }
    assert_success!(b_listener.close());
    close_qp_pairs(qps, (a, b));
}

/// N31 (NDSPI v2 only), as this provider behaves: a listener on the
/// wildcard address covers the adapter's addresses (it takes requests to
/// them, and a specific listener on the same port conflicts) but never spans
/// adapters (another adapter may listen on the wildcard with the same port,
/// and requests to it go there).
#[test]
fn n31_wildcard_listener_covers_the_adapter_but_never_spans_adapters() {
    let (a, b) = End::two();
    let any = Addr::v4([0, 0, 0, 0], 0);
    let a_incoming = Incoming::new();
    let a_listener = a.adapter.listener(&a_incoming);
    assert_success!(a_listener.listen(any));
    let reported = address_of(Getter::Listener(&a_listener));
    assert_eq!(
        reported.ip_bytes(),
        [0, 0, 0, 0],
        "the wildcard is reported"
    );
    let port = reported.port();
    assert!(EPHEMERAL.contains(&port));
    let specific = a.adapter.listener(&Incoming::new());
    assert_eq!(
        specific.listen(a.addr.with_port(port)),
        STATUS_SHARING_VIOLATION
    );
    let b_incoming = Incoming::new();
    let b_listener = b.adapter.listener(&b_incoming);
    assert_success!(b_listener.listen(any.with_port(port)), "another adapter");

    let qps: Vec<(Qp, Qp)> = (0..2).map(|i| (a.qp(0xA0 + i), b.qp(0xB0 + i))).collect();
    let (a_port, b_port) = (a.addr.with_port(port), b.addr.with_port(port));
    // B → A's address: A's wildcard listener takes it.
    let (a_qp, b_qp) = (&qps[0].0, &qps[0].1);
    let to_a = Conn::establish(&b.adapter, b.addr, b_qp, a_port, &a_incoming, 1, a_qp);
    assert_eq!(address_of(Getter::ConnectorLocal(&to_a.passive)), a_port);
    // A → B's address: B's, not A's.
    let (a_qp, b_qp) = (&qps[1].0, &qps[1].1);
    let to_b = Conn::establish(&a.adapter, a.addr, a_qp, b_port, &b_incoming, 1, b_qp);
    assert_eq!(address_of(Getter::ConnectorLocal(&to_b.passive)), b_port);
    assert_eq!(settled_count_incoming(&a_incoming), 1);
    assert_eq!(b_incoming.count(), 1);
    to_a.close();
    to_b.close();
    for listener in [a_listener, specific, b_listener] {
        assert_success!(listener.close());
    }
    close_qp_pairs(qps, (a, b));
}

/// N32: an adapter opened twice (two openings of one address) gives objects
/// that work together: a connector from the first opening's listener accepts
/// with a QP of the second, and a connector of one opening connects with a
/// QP of the other.
#[test]
fn n32_objects_of_two_openings_of_one_adapter_work_together() {
    let (addr_x, addr_y) = fresh_addresses();
    let x1 = End::open(addr_x);
    let x2 = End::open(addr_x);
    let y1 = End::open(addr_y);
    let y2 = End::open(addr_y);
    let x_qp = x2.qp(0x12);
    let y_qp = y1.qp(0x21);
    // The listener is on x1; the passive QP is x2's.
    let (listener, incoming, listen_addr) = x1.listen(0);
    // The active connector is y2's; its QP is y1's.
    let conn = Conn::establish(&y2.adapter, addr_y, &y_qp, listen_addr, &incoming, 1, &x_qp);
    ping_both_ways((&y1, &y_qp), (&x2, &x_qp), b"across openings", b"and back");
    conn.close();
    assert_success!(listener.close());
    x_qp.close();
    y_qp.close();
    for end in [x1, x2, y1, y2] {
        end.close();
    }
}
