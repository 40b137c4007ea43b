//! Connections over the wire (`cm/wire.rs`) on the host's TCP, 127.0.0.x:
//! the state machine's transitions when the peer is across a socket.

use core::net::SocketAddr;
use std::time::{Duration, Instant};

use super::*;
use crate::kernel::tcp::{AcceptEvents, ConnectEvents, Listening, NetError, Timer};
use crate::kernel::tcp_host::HostNet;

/// Every wait of these tests ends by this.
const LIMIT: Duration = Duration::from_secs(10);

/// Waits until `f` returns `Some`, at most [`LIMIT`].
fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(value) = f() {
            return value;
        }
        assert!(start.elapsed() < LIMIT, "{what}: not within {LIMIT:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn next_event(events: &Events) -> Ev {
    wait_for("an event", || {
        let mut list = events.0.lock().unwrap();
        (!list.is_empty()).then(|| list.remove(0))
    })
}

/// The host's TCP, but the first `busy` connects find their source port
/// taken, as when another program holds it.
struct BusyPorts {
    inner: Arc<dyn crate::kernel::tcp::Net>,
    busy: core::sync::atomic::AtomicU32,
    tried: Mutex<Vec<u16>>,
}

impl crate::kernel::tcp::Net for BusyPorts {
    fn now_ms(&self) -> u64 {
        self.inner.now_ms()
    }

    fn listen(
        &self,
        local: SocketAddr,
        events: Arc<dyn AcceptEvents>,
    ) -> Result<alloc::boxed::Box<dyn Listening>, NetError> {
        self.inner.listen(local, events)
    }

    fn connect(
        &self,
        local: SocketAddr,
        remote: SocketAddr,
        timeout_ms: u64,
        events: Arc<dyn ConnectEvents>,
    ) -> Result<(), NetError> {
        self.tried.lock().unwrap().push(local.port());
        let busy = self
            .busy
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok();
        if busy {
            // Reported from another thread, as the host's connect does.
            std::thread::spawn(move || {
                let _ = events.connected(Err(NetError::AddressInUse));
            });
            return Ok(());
        }
        self.inner.connect(local, remote, timeout_ms, events)
    }

    fn timer(&self, at_ms: u64, timer: Arc<dyn Timer>) {
        self.inner.timer(at_ms, timer);
    }
}

fn wire_host(fabric: &Arc<Fabric>, ip: IpAddr, net: Arc<dyn crate::kernel::tcp::Net>) -> Host {
    let h = host(fabric, &[ip], EngineMode::Inline);
    fabric
        .attach_wire(
            &h.device,
            Wire {
                net,
                timeouts: ConnTimeouts::default(),
            },
        )
        .unwrap();
    h
}

/// Test-unique loopback addresses (127.66.x.1 and .2).
fn addresses() -> (IpAddr, IpAddr) {
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
    let busy = Arc::new(BusyPorts {
        inner: HostNet::shared(),
        busy: core::sync::atomic::AtomicU32::new(2),
        tried: Mutex::new(Vec::new()),
    });
    let a = wire_host(&fabric, ip_a, Arc::clone(&busy) as _);
    let b = wire_host(&fabric, ip_b, HostNet::shared());
    let server = server(&b);
    let bound = server.listener.listen(ep(ip_b, 0)).unwrap();
    assert!((EPHEMERAL_FIRST..=EPHEMERAL_LAST).contains(&bound.port));
    let qa = side(&a, 0xA);
    let qb = side(&b, 0xB);
    let active = client(&a);
    active
        .conn
        .connect(&qa.qp, ep(ip_a, 0), bound, LIMITS, b"hi")
        .unwrap();
    let passive = wrap(wait_for("the connect event", || server.next()));
    let tried = busy.tried.lock().unwrap().clone();
    assert_eq!(tried.len(), 3, "two taken ports, then one that worked");
    assert!(tried.windows(2).all(|w| w[0] != w[1]), "{tried:?}");
    let local = active.conn.local().unwrap();
    assert_eq!(local, ep(ip_a, tried[2]));
    assert_eq!(passive.conn.peer(), Some(local));
    passive.conn.accept(&qb.qp, LIMITS, b"").unwrap();
    assert_eq!(next_event(&active.events), Ev::Connect(Ok(())));
    active.conn.complete_connect().unwrap();
    assert_eq!(next_event(&passive.events), Ev::Accept(Ok(())));
    // X1: the disconnect completes once the peer's answers it.
    active.conn.disconnect().unwrap();
    assert_eq!(next_event(&passive.events), Ev::Indicated);
    passive.conn.disconnect().unwrap();
    assert_eq!(next_event(&passive.events), Ev::Disconnect(Ok(())));
    assert_eq!(next_event(&active.events), Ev::Disconnect(Ok(())));
}

/// N12: with every source port taken the Connect fails (asynchronously)
/// with the address in use, after a bounded number of tries.
#[test]
fn test_connect_gives_up_when_every_source_port_is_taken_rule_n12() {
    let fabric = Fabric::new();
    let (ip_a, ip_b) = addresses();
    let busy = Arc::new(BusyPorts {
        inner: HostNet::shared(),
        busy: core::sync::atomic::AtomicU32::new(u32::MAX),
        tried: Mutex::new(Vec::new()),
    });
    let a = wire_host(&fabric, ip_a, Arc::clone(&busy) as _);
    let qa = side(&a, 0xA);
    let active = client(&a);
    active
        .conn
        .connect(&qa.qp, ep(ip_a, 0), ep(ip_b, 4000), LIMITS, b"")
        .unwrap();
    assert_eq!(
        next_event(&active.events),
        Ev::Connect(Err(CmError::AddressInUse))
    );
    assert_eq!(active.conn.state(), Some(ConnState::Failed));
    let tries = busy.tried.lock().unwrap().len();
    assert!(tries > 1 && tries <= 20, "{tries} tries");
}

/// N12: nothing listening on the destination port: the TCP RST refuses the
/// Connect, asynchronously.
#[test]
fn test_connect_to_no_listener_is_refused_rule_n12() {
    let fabric = Fabric::new();
    let (ip_a, ip_b) = addresses();
    let a = wire_host(&fabric, ip_a, HostNet::shared());
    let _b = wire_host(&fabric, ip_b, HostNet::shared());
    let qa = side(&a, 0xA);
    let active = client(&a);
    active
        .conn
        .connect(&qa.qp, ep(ip_a, 0), ep(ip_b, 9), LIMITS, b"")
        .unwrap();
    assert_eq!(
        next_event(&active.events),
        Ev::Connect(Err(CmError::ConnectionRefused))
    );
    // N28: the QP is as it was, and connects again.
    assert_eq!(qa.qp.state(), QpState::Idle);
}
