//! [`WskNet`] (the `Net` of the iWARP transport in the driver) against the
//! tests' WSK provider, with a played clock.

use super::fake::Provider;
use super::tests::Recorder;
use super::*;
use crate::abi::STATUS_DEVICE_NOT_READY;
use crate::kernel::tcp::{
    AcceptEvents, ConnectEvents as NetConnectEvents, Connected, Dial, Net, NetError, Stream, Timer,
};
use crate::kernel::timers::PlayedClock;
use alloc::vec::Vec;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize};

/// The provider, once "WSK is up".
struct Source {
    provider: &'static Provider,
    up: AtomicBool,
    captures: AtomicUsize,
}

impl WskSource for Source {
    fn capture(&self) -> Result<Arc<WskClient>, NtStatus> {
        self.captures.fetch_add(1, Ordering::Relaxed);
        if self.up.load(Ordering::Acquire) {
            Ok(self.provider.client())
        } else {
            Err(STATUS_DEVICE_NOT_READY)
        }
    }
}

type Accepted = (Arc<dyn Stream>, SocketAddr, Arc<Recorder>);

#[derive(Default)]
struct Acceptor {
    accepted: Mutex<Vec<Accepted>>,
    bound: Mutex<Vec<(SocketAddr, Result<(), NetError>)>>,
}

impl AcceptEvents for Acceptor {
    fn bound(&self, local: SocketAddr, result: Result<(), NetError>) {
        self.bound.lock().unwrap().push((local, result));
    }

    fn accepted(&self, connection: Connected) -> Option<Arc<dyn StreamEvents>> {
        let events = Arc::new(Recorder::default());
        self.accepted
            .lock()
            .unwrap()
            .push((connection.stream, connection.peer, events.clone()));
        Some(events)
    }
}

/// A connect's outcome: the stream and its local address, or the error.
type Outcome = Result<(Arc<dyn Stream>, SocketAddr), NetError>;

#[derive(Default)]
struct Connector {
    results: Mutex<Vec<Outcome>>,
    events: Arc<Recorder>,
}

impl NetConnectEvents for Connector {
    fn connected(&self, result: Result<Connected, NetError>) -> Option<Arc<dyn StreamEvents>> {
        let ok = result.is_ok();
        self.results
            .lock()
            .unwrap()
            .push(result.map(|c| (c.stream, c.local)));
        ok.then(|| self.events.clone() as Arc<dyn StreamEvents>)
    }
}

impl Connector {
    fn stream(&self) -> Arc<dyn Stream> {
        let results = self.results.lock().unwrap();
        assert_eq!(results.len(), 1, "one outcome");
        Arc::clone(&results[0].as_ref().unwrap().0)
    }
}

struct Setup {
    provider: &'static Provider,
    source: Arc<Source>,
    clock: Arc<PlayedClock>,
    net: Arc<WskNet>,
}

/// Forwards to a shared source (the net owns a box of it).
struct Shared(Arc<Source>);

impl WskSource for Shared {
    fn capture(&self) -> Result<Arc<WskClient>, NtStatus> {
        self.0.capture()
    }
}

fn setup(capacity: usize, up: bool) -> Setup {
    let provider = Provider::new(5);
    let source = Arc::new(Source {
        provider,
        up: AtomicBool::new(up),
        captures: AtomicUsize::new(0),
    });
    let clock = PlayedClock::new(10_000);
    let net = WskNet::new(Box::new(Shared(source.clone())), clock.timers(), capacity);
    Setup {
        provider,
        source,
        clock,
        net,
    }
}

impl Setup {
    /// Starts a connect from [`CLIENT`] to `server` allowed `timeout_ms`,
    /// reporting to a new connector; returns the connector and what the
    /// net answered at once.
    fn connect(&self, server: &str, timeout_ms: u64) -> (Arc<Connector>, Result<(), NetError>) {
        let connector = Arc::new(Connector::default());
        let dial = Dial {
            local: CLIENT.parse().unwrap(),
            remote: server.parse().unwrap(),
            timeout_ms,
        };
        let started = self.net.connect(dial, connector.clone());
        (connector, started)
    }
}

const SERVER: &str = "127.0.0.1:4791";
const CLIENT: &str = "127.0.0.1:50001";

struct Pair {
    s: Setup,
    listening: Box<dyn crate::kernel::tcp::Listening>,
    client: Arc<dyn Stream>,
    client_events: Arc<Recorder>,
    server: Arc<dyn Stream>,
    server_events: Arc<Recorder>,
}

fn pair(capacity: usize) -> Pair {
    let s = setup(capacity, true);
    let acceptor = Arc::new(Acceptor::default());
    let listening = s
        .net
        .listen(SERVER.parse().unwrap(), acceptor.clone())
        .unwrap();
    assert_eq!(listening.local(), SERVER.parse().unwrap());
    s.provider.run();
    let (connector, started) = s.connect(SERVER, 1000);
    started.unwrap();
    s.provider.run();
    let client = connector.stream();
    assert_eq!(
        connector.results.lock().unwrap()[0].as_ref().unwrap().1,
        CLIENT.parse().unwrap()
    );
    let (server, peer, server_events) = acceptor.accepted.lock().unwrap().pop().unwrap();
    assert_eq!(peer, CLIENT.parse().unwrap(), "the peer's address");
    Pair {
        s,
        listening,
        client,
        client_events: connector.events.clone(),
        server,
        server_events,
    }
}

#[test]
fn test_net_waits_for_wsk_without_blocking_and_retries() {
    let s = setup(64, false);
    let (_, result) = s.connect(SERVER, 1000);
    assert_eq!(result, Err(NetError::Unreachable), "WSK not up yet");
    let listen = s
        .net
        .listen(SERVER.parse().unwrap(), Arc::new(Acceptor::default()));
    assert_eq!(listen.err(), Some(NetError::Failed));
    assert!(!s.net.ready());
    s.source.up.store(true, Ordering::Release);
    assert!(s.net.ready(), "captured at the next try");
    let captures = s.source.captures.load(Ordering::Relaxed);
    let _listening = s
        .net
        .listen(SERVER.parse().unwrap(), Arc::new(Acceptor::default()))
        .unwrap();
    assert_eq!(
        s.source.captures.load(Ordering::Relaxed),
        captures,
        "captured once, then kept"
    );
}

#[test]
fn test_net_connects_accepts_and_exchanges_both_ways() {
    let p = pair(4096);
    assert_eq!(p.client.send(b"to the server"), 13);
    assert_eq!(p.server.send(b"to the client"), 13);
    p.s.provider.run();
    assert_eq!(p.server_events.bytes(), b"to the server");
    assert_eq!(p.client_events.bytes(), b"to the client");
    assert_eq!(p.s.net.sockets_open(), 3, "two streams and a listener");
    drop(p.listening);
    p.s.provider.run();
    assert_eq!(p.s.net.sockets_open(), 2, "the listener closed on drop");
}

#[test]
fn test_net_send_under_back_pressure_takes_what_fits_then_reports_writable() {
    let p = pair(32);
    p.s.provider.hold_sends(true);
    let data: Vec<u8> = (0..200_u8).collect();
    let mut offered = p.client.send(&data);
    assert_eq!(offered, 32, "the ring's room");
    assert_eq!(p.client.send(&data[offered..]), 0, "full");
    for _ in 0..100 {
        if offered == data.len() {
            break;
        }
        let before = p.client_events.writables();
        p.s.provider.hold_sends(false);
        p.s.provider.run();
        p.s.provider.hold_sends(true);
        assert!(p.client_events.writables() > before);
        offered += p.client.send(&data[offered..]);
    }
    p.s.provider.hold_sends(false);
    p.s.provider.run();
    assert_eq!(p.server_events.bytes(), data);
}

#[test]
fn test_net_orderly_peer_close_and_abort_are_reported() {
    let p = pair(64);
    assert_eq!(p.client.send(b"last words"), 10);
    p.client.close(false);
    p.s.provider.run();
    assert_eq!(p.server_events.bytes(), b"last words");
    assert_eq!(p.server_events.closes(), [false], "an orderly close");
    // After its own orderly close the client still hears the peer's end
    // (kernel::tcp::Stream::close: receiving goes on until the peer
    // closes too); it used not to, and a Disconnect (X1 a), which waits for
    // the peer's FIN, always ran into its time-out over WSK.
    p.server.close(true);
    p.s.provider.run();
    assert_eq!(
        p.client_events.closes(),
        [true],
        "the closer hears the peer's reset"
    );
    let q = pair(64);
    q.server.close(true);
    q.s.provider.run();
    assert_eq!(q.client_events.closes(), [true], "a reset");
}

#[test]
fn test_net_connect_refused_and_timed_out() {
    let s = setup(64, true);
    let (refused, started) = s.connect("127.0.0.1:9", 1000);
    started.unwrap();
    s.provider.run();
    assert_eq!(
        refused.results.lock().unwrap()[0].as_ref().err(),
        Some(&NetError::Refused)
    );
    s.clock.advance(5000);
    assert_eq!(refused.results.lock().unwrap().len(), 1, "reported once");

    // No answer within the time allowed: the provider does not carry the
    // connect out in time.
    let _listening = s
        .net
        .listen(SERVER.parse().unwrap(), Arc::new(Acceptor::default()))
        .unwrap();
    s.provider.run();
    let (slow, started) = s.connect(SERVER, 300);
    started.unwrap();
    s.clock.advance(299);
    assert!(slow.results.lock().unwrap().is_empty());
    s.clock.advance(1);
    assert_eq!(
        slow.results.lock().unwrap()[0].as_ref().err(),
        Some(&NetError::TimedOut)
    );
    // The connection completes late: it is reset, and not reported.
    s.provider.run();
    assert_eq!(slow.results.lock().unwrap().len(), 1);
    assert_eq!(s.provider.lock().disconnects, [true], "the late one reset");
}

struct Tick(Arc<Mutex<Vec<u64>>>);

impl Timer for Tick {
    fn fire(&self, now: u64) {
        self.0.lock().unwrap().push(now);
    }
}

#[test]
fn test_net_timers_fire_when_the_kernel_timer_does() {
    let s = setup(64, true);
    let fired = Arc::new(Mutex::new(Vec::new()));
    let now = s.net.now_ms();
    assert_eq!(now, 10_000, "the played clock");
    s.net.timer(now + 250, Arc::new(Tick(fired.clone())));
    s.net.timer(now + 100, Arc::new(Tick(fired.clone())));
    assert_eq!(s.clock.last_set(), Some(now + 100));
    s.clock.advance(100);
    assert_eq!(*fired.lock().unwrap(), [now + 100]);
    s.clock.advance(200);
    assert_eq!(*fired.lock().unwrap(), [now + 100, now + 300]);
}

#[test]
fn test_net_teardown_with_connections_open_leaves_nothing_pending() {
    let p = pair(64);
    p.s.provider.hold_sends(true);
    assert_eq!(p.client.send(&[7; 40]), 40);
    assert_eq!(p.server.send(&[9; 20]), 20);
    let fired = Arc::new(Mutex::new(Vec::new()));
    p.s.net
        .timer(p.s.net.now_ms() + 10, Arc::new(Tick(fired.clone())));
    p.s.net.abort_all();
    assert!(!p.s.net.drain(1, 1), "closes still in flight");
    p.s.provider.hold_sends(false);
    p.s.provider.run();
    assert!(p.s.net.drain(1, 1), "every socket closed");
    {
        let inner = p.s.provider.lock();
        assert!(inner.ops.is_empty() && inner.held.is_empty());
        assert!(inner.sockets.iter().all(|s| s.closed));
    }
    assert_eq!(p.s.net.sockets_open(), 0);
    p.s.clock.advance(100);
    assert!(fired.lock().unwrap().is_empty(), "timers stopped");
    let (_, refused) = p.s.connect(SERVER, 10);
    assert!(refused.is_err(), "nothing new after halt");
    drop(p.listening);
}

/// WSK binds after `listen` returned: the socket says it is not bound yet,
/// and the provider's completion is reported once through
/// `AcceptEvents::bound` — success, or `AddressInUse` for an address another
/// socket holds (then the socket is closed).
#[test]
fn test_net_reports_a_bind_completed_after_listen_returned() {
    let s = setup(64, true);
    let first = Arc::new(Acceptor::default());
    let listening = s
        .net
        .listen(SERVER.parse().unwrap(), first.clone())
        .unwrap();
    assert!(!listening.bound(), "WSK has not run yet");
    assert!(first.bound.lock().unwrap().is_empty());
    s.provider.run();
    assert_eq!(
        *first.bound.lock().unwrap(),
        [(SERVER.parse().unwrap(), Ok(()))]
    );
    let second = Arc::new(Acceptor::default());
    let taken = s
        .net
        .listen(SERVER.parse().unwrap(), second.clone())
        .unwrap();
    assert!(!taken.bound());
    s.provider.run();
    assert_eq!(
        *second.bound.lock().unwrap(),
        [(SERVER.parse().unwrap(), Err(NetError::AddressInUse))]
    );
    assert_eq!(s.net.sockets_open(), 1, "the failed socket closed");
    drop(taken);
    drop(listening);
    s.provider.run();
    assert_eq!(s.net.sockets_open(), 0);
    assert_eq!(first.bound.lock().unwrap().len(), 1, "reported once");
}
