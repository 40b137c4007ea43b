//! The WSK glue against the tests' WSK provider ([`super::fake`]).

use super::fake::{Provider, complete};
use super::*;
use crate::abi::{STATUS_ADDRESS_ALREADY_EXISTS, STATUS_CONNECTION_RESET};
use alloc::vec::Vec;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

// --- Recorders -----------------------------------------------------------------

// A stream's events, recorded (also `net_tests`'), as in `kernel::net`'s
// tests.
pub(super) use crate::kernel::tcp_testing::Recorder;

/// An accepted stream, its events and the peer's address.
type Accepted = (Arc<WskStream>, Arc<Recorder>, Option<SocketAddr>);

#[derive(Default)]
struct Acceptor {
    ready: Mutex<Vec<Result<(), NtStatus>>>,
    accepted: Mutex<Vec<Accepted>>,
    refuse: AtomicBool,
}

impl ListenEvents for Acceptor {
    fn accepted(
        &self,
        stream: &Arc<WskStream>,
        _local: Option<SocketAddr>,
        remote: Option<SocketAddr>,
    ) -> Option<Arc<dyn StreamEvents>> {
        if self.refuse.load(Ordering::Relaxed) {
            return None;
        }
        let events = Arc::new(Recorder::default());
        self.accepted
            .lock()
            .unwrap()
            .push((Arc::clone(stream), Arc::clone(&events), remote));
        Some(events)
    }
    fn ready(&self, result: Result<(), NtStatus>) {
        self.ready.lock().unwrap().push(result);
    }
}

#[derive(Default)]
struct Connector {
    result: Mutex<Option<Result<Arc<WskStream>, ConnectError>>>,
    /// What the stream reports to once connected.
    events: Arc<Recorder>,
}

impl ConnectEvents for Connector {
    fn connected(
        &self,
        result: Result<Arc<WskStream>, ConnectError>,
    ) -> Option<Arc<dyn StreamEvents>> {
        let ok = result.is_ok();
        let previous = self.result.lock().unwrap().replace(result);
        assert!(previous.is_none(), "connected is reported once");
        ok.then(|| Arc::clone(&self.events) as Arc<dyn StreamEvents>)
    }
}

// --- Scenarios -----------------------------------------------------------------

const SERVER: &str = "127.0.0.1:4791";

struct Pair {
    provider: &'static Provider,
    listener: Arc<WskListener>,
    acceptor: Arc<Acceptor>,
    client: Arc<WskStream>,
    client_events: Arc<Recorder>,
    server: Arc<WskStream>,
    server_events: Arc<Recorder>,
}

fn pair(capacity: usize, piece: usize) -> Pair {
    let provider = Provider::new(piece);
    let wsk = provider.client();
    let acceptor = Arc::new(Acceptor::default());
    let listener = listen(&wsk, SERVER.parse().unwrap(), capacity, acceptor.clone()).unwrap();
    provider.run();
    assert_eq!(*acceptor.ready.lock().unwrap(), [Ok(())]);
    let connector = Arc::new(Connector::default());
    let client_events = connector.events.clone();
    connect(
        &wsk,
        None,
        SERVER.parse().unwrap(),
        capacity,
        connector.clone(),
    )
    .unwrap();
    provider.run();
    let client = connector.result.lock().unwrap().take().unwrap().unwrap();
    let (server, server_events, remote) = acceptor.accepted.lock().unwrap().pop().unwrap();
    assert!(remote.is_some_and(|r| r.ip() == SERVER.parse::<SocketAddr>().unwrap().ip()));
    Pair {
        provider,
        listener,
        acceptor,
        client,
        client_events,
        server,
        server_events,
    }
}

/// Equal byte strings, reported by length and first difference.
fn assert_same(got: &[u8], want: &[u8], what: &str) {
    let first = got.iter().zip(want).position(|(a, b)| a != b);
    assert!(
        got == want,
        "{what}: got {} bytes, want {}, first difference at {first:?}",
        got.len(),
        want.len()
    );
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

#[test]
fn test_connect_accept_and_exchange_both_ways() {
    let p = pair(4096, 5);
    assert_eq!(p.client.send(b"hello, server"), 13);
    assert_eq!(p.server.send(b"hello, client"), 13);
    p.provider.run();
    assert_eq!(p.server_events.bytes(), b"hello, server");
    assert_eq!(p.client_events.bytes(), b"hello, client");
    assert!(p.client_events.closes().is_empty());
    assert_eq!(p.client.queued(), 0);
}

#[test]
fn test_receive_in_order_across_mdl_chains() {
    for piece in [1, 3, 64, 4096] {
        let p = pair(1 << 16, piece);
        let data = pattern(10_000);
        assert_eq!(p.client.send(&data), data.len());
        p.provider.run();
        assert_same(
            &p.server_events.bytes(),
            &data,
            &format!("MDLs of {piece} bytes"),
        );
    }
}

#[test]
fn test_send_beyond_the_ring_takes_what_fits_and_reports_writable() {
    let p = pair(16, 4);
    p.provider.hold_sends(true);
    let data = pattern(100);
    let mut offered = 0;
    let first = p.client.send(&data);
    assert_eq!(first, 16, "the ring holds 16 bytes");
    offered += first;
    assert_eq!(
        p.client.send(&data[offered..]),
        0,
        "full until a send completes"
    );
    assert_eq!(p.client_events.writables(), 0);
    for _ in 0..100 {
        if offered == data.len() {
            break;
        }
        p.provider.hold_sends(false);
        p.provider.run();
        p.provider.hold_sends(true);
        let writables = p.client_events.writables();
        assert!(writables > 0, "room was reported");
        // Odd sizes so that the ring wraps.
        let take = (data.len() - offered).min(7);
        offered += p.client.send(&data[offered..offered + take]);
        offered += p.client.send(&data[offered..]);
    }
    p.provider.hold_sends(false);
    p.provider.run();
    assert_eq!(offered, data.len());
    assert_same(&p.server_events.bytes(), &data, "in order across wraps");
    let sends = p.provider.lock().sends;
    assert!(sends > 100 / 16, "one WskSend at a time, {sends} in all");
}

#[test]
fn test_inline_send_completion_does_not_recurse_or_reorder() {
    let p = pair(8, 3);
    p.provider.inline_sends.store(true, Ordering::Relaxed);
    let data = pattern(1000);
    let mut offered = 0;
    for _ in 0..10_000 {
        if offered == data.len() {
            break;
        }
        offered += p.client.send(&data[offered..]);
    }
    assert_eq!(
        offered,
        data.len(),
        "inline completions free the ring at once"
    );
    p.provider.run();
    assert_same(&p.server_events.bytes(), &data, "received");
}

#[test]
fn test_graceful_close_sends_the_queue_then_disconnects_and_frees() {
    let p = pair(64, 7);
    let weak = Arc::downgrade(&p.client);
    p.provider.hold_sends(true);
    let data = pattern(64);
    assert_eq!(p.client.send(&data), 64);
    p.client.close(false);
    assert_eq!(p.client.send(b"late"), 0, "nothing after close");
    assert!(
        p.provider.lock().disconnects.is_empty(),
        "not before the queue is sent"
    );
    p.provider.hold_sends(false);
    p.provider.run();
    assert_same(&p.server_events.bytes(), &data, "received");
    assert_eq!(
        p.server_events.closes(),
        [false],
        "the peer sees an orderly close"
    );
    assert_eq!(p.provider.lock().disconnects, [false]);
    assert!(
        p.client_events.closes().is_empty(),
        "the peer has not closed yet"
    );
    assert_eq!(
        p.provider.lock().closes,
        0,
        "the socket stays until the peer's end (its FIN is still reported)"
    );
    drop(p.client);
    // The server answers and closes its side too: the client still
    // receives, hears the orderly close, and only then closes its socket.
    assert_eq!(p.server.send(b"late reply"), 10);
    p.server.close(false);
    p.provider.run();
    assert_eq!(p.client_events.bytes(), b"late reply");
    assert_eq!(p.client_events.closes(), [false], "the peer's FIN");
    assert_eq!(p.provider.lock().closes, 2);
    assert!(
        weak.upgrade().is_none(),
        "the stream is freed once its socket is closed"
    );
}

/// `kernel::tcp::Stream::close`: an abortive close after an orderly one
/// still resets (the drain time-out of `cm::wire` relies on it, towards a
/// peer that never closes its end). It did nothing over WSK: the socket
/// stayed open, with its send ring, for as long as the peer wished.
#[test]
fn test_abortive_close_after_an_orderly_one_resets() {
    let p = pair(64, 7);
    assert_eq!(p.client.send(&pattern(64)), 64);
    p.client.close(false);
    p.provider.run();
    assert_eq!(p.provider.lock().disconnects, [false]);
    assert_eq!(p.server_events.closes(), [false], "the orderly close");
    assert_eq!(p.provider.lock().closes, 0, "waiting for the peer's end");
    // The peer never closes: the drain time-out's reset.
    p.client.close(true);
    p.provider.run();
    assert_eq!(p.provider.lock().closes, 1, "the client's socket closed");
    assert!(
        p.client_events.closes().is_empty(),
        "the closer is not told of its own reset"
    );
}

#[test]
fn test_abortive_close_resets_and_drops_the_queue() {
    let p = pair(64, 7);
    p.provider.hold_sends(true);
    assert_eq!(p.client.send(&pattern(40)), 40);
    p.client.close(true);
    p.provider.run();
    assert_eq!(p.server_events.closes(), [true], "the peer sees a reset");
    assert!(
        p.server_events.bytes().is_empty(),
        "the queued bytes were dropped"
    );
    assert_eq!(p.provider.lock().disconnects, [true]);
    let weak = Arc::downgrade(&p.client);
    drop(p.client);
    assert!(weak.upgrade().is_none());
}

#[test]
fn test_peer_reset_is_reported_once_and_close_still_completes() {
    let p = pair(64, 7);
    p.server.close(true);
    p.provider.run();
    assert_eq!(p.client_events.closes(), [true]);
    assert_eq!(p.client.send(b"x"), 1, "taken; the send fails on the wire");
    p.provider.run();
    assert_eq!(p.client_events.closes(), [true], "reported once");
    p.client.close(false);
    p.provider.run();
    let weak = Arc::downgrade(&p.client);
    drop(p.client);
    assert!(weak.upgrade().is_none());
}

#[test]
fn test_connect_to_a_closed_port_is_refused() {
    let provider = Provider::new(8);
    let wsk = provider.client();
    let connector = Arc::new(Connector::default());
    connect(
        &wsk,
        Some("127.0.0.1:0".parse().unwrap()),
        "127.0.0.1:9".parse().unwrap(),
        64,
        connector.clone(),
    )
    .unwrap();
    provider.run();
    let result = connector.result.lock().unwrap().take().unwrap();
    assert_eq!(result.err(), Some(ConnectError::Refused));
}

#[test]
fn test_refused_accept_resets_the_caller_and_listener_close_stops_accepting() {
    let p = pair(64, 8);
    p.acceptor.refuse.store(true, Ordering::Relaxed);
    let wsk = p.provider.client();
    let connector = Arc::new(Connector::default());
    let events = connector.events.clone();
    connect(&wsk, None, SERVER.parse().unwrap(), 64, connector.clone()).unwrap();
    p.provider.run();
    let stream = connector.result.lock().unwrap().take().unwrap().unwrap();
    assert_eq!(events.closes(), [true], "refused by the listener: reset");
    stream.close(true);
    p.listener.close();
    p.provider.run();
    let late = Arc::new(Connector::default());
    connect(&wsk, None, SERVER.parse().unwrap(), 64, late.clone()).unwrap();
    p.provider.run();
    let result = late.result.lock().unwrap().take().unwrap();
    assert_eq!(result.err(), Some(ConnectError::Refused));
}

#[test]
fn test_listen_on_an_address_in_use_reports_the_bind_failure() {
    let p = pair(64, 8);
    let wsk = p.provider.client();
    let second = Arc::new(Acceptor::default());
    let listener = listen(&wsk, SERVER.parse().unwrap(), 64, second.clone()).unwrap();
    p.provider.run();
    assert_eq!(
        *second.ready.lock().unwrap(),
        [Err(STATUS_ADDRESS_ALREADY_EXISTS)]
    );
    let weak = Arc::downgrade(&listener);
    drop(listener);
    assert!(weak.upgrade().is_none(), "closed after the failed bind");
}

#[test]
fn test_connect_errors_map_from_statuses() {
    for (status, error) in [
        (STATUS_CONNECTION_REFUSED, ConnectError::Refused),
        (STATUS_HOST_UNREACHABLE, ConnectError::Unreachable),
        (STATUS_NETWORK_UNREACHABLE, ConnectError::Unreachable),
        (STATUS_IO_TIMEOUT, ConnectError::TimedOut),
        (
            STATUS_CONNECTION_RESET,
            ConnectError::Other(STATUS_CONNECTION_RESET),
        ),
    ] {
        assert_eq!(ConnectError::from_status(status), error, "{status:#x}");
    }
}

#[test]
fn test_socket_addresses_round_trip_v4_and_v6() {
    for text in ["192.0.2.7:4791", "[2001:db8::5]:445", "[fe80::1%3]:80"] {
        let addr: SocketAddr = text.parse().unwrap();
        let mut raw = to_sockaddr(addr);
        // SAFETY: a SOCKADDR_INET built above.
        let back = unsafe { from_sockaddr((&raw mut raw).cast()) };
        assert_eq!(back, Some(addr));
    }
}

#[test]
fn test_irp_completion_routine_gets_status_information_and_context() {
    unsafe extern "system" fn routine(
        device: *mut c_void,
        irp: *mut Irp,
        context: *mut c_void,
    ) -> NtStatus {
        assert!(device.is_null());
        // SAFETY: the test's IRP, completed.
        let (status, info) = unsafe { outcome(irp) };
        // SAFETY: the context is the test's counter.
        unsafe { *context.cast::<(NtStatus, usize)>() = (status, info) };
        STATUS_MORE_PROCESSING_REQUIRED
    }
    let irp = OwnedIrp::new().unwrap();
    let mut seen: (NtStatus, usize) = (0, 0);
    for round in 1..=3_usize {
        // SAFETY: idle IRP; the context outlives the request.
        unsafe { irp.prepare(routine, (&raw mut seen).cast()) };
        complete(irp.as_ptr(), STATUS_CONNECTION_RESET, round);
        assert_eq!(
            seen,
            (STATUS_CONNECTION_RESET, round),
            "reused IRP, round {round}"
        );
    }
}

#[test]
fn test_halt_with_connections_open_leaves_nothing_pending() {
    let p = pair(32, 5);
    p.provider.hold_sends(true);
    assert_eq!(p.client.send(&pattern(32)), 32);
    assert_eq!(p.server.send(&pattern(20)), 20);
    let weak = [Arc::downgrade(&p.client), Arc::downgrade(&p.server)];
    let listener = Arc::downgrade(&p.listener);
    // Halt: every stream reset, the listener closed, whatever is in flight.
    p.client.close(true);
    p.server.close(true);
    p.listener.close();
    p.provider.hold_sends(false);
    p.provider.run();
    {
        let inner = p.provider.lock();
        assert!(
            inner.ops.is_empty() && inner.held.is_empty(),
            "no request left"
        );
        assert!(
            inner.sockets.iter().all(|s| s.closed),
            "every provider socket was closed"
        );
    }
    drop((p.client, p.server, p.listener, p.acceptor));
    assert!(weak.iter().all(|w| w.upgrade().is_none()), "streams freed");
    assert!(listener.upgrade().is_none(), "listener freed");
}
