//! A Listen over the wire whose TCP sockets the platform binds late (as WSK
//! does): the listener's `start_listen` answers `Binding`, and the outcome
//! reaches `ListenerEvents::listen_completed` exactly once (N3, L8), a
//! failure gives the endpoint back, and a close first completes it
//! cancelled before the close itself (L20, L21). The platform here is the
//! host's TCP whose listening sockets report their bind only when the test
//! says so. Addresses 127.67.x.y are this file's.

use core::net::SocketAddr;

use super::*;
use crate::kernel::tcp::{AcceptEvents, ConnectEvents, Listening, NetError, Timer};
use crate::kernel::tcp_host::HostNet;

/// When the sockets this net makes report their bind.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Bind {
    /// Within `listen` (`Listening::bound`): no report.
    Inline,
    /// Later, when the test calls [`LateNet::finish`].
    Late,
    /// Reported as done (`result`) before `listen` returns, though the
    /// socket says it was not bound: the report overtakes the return.
    Early(Result<(), NetError>),
}

/// The host's TCP, binding as [`Bind`] says.
struct LateNet {
    inner: Arc<dyn crate::kernel::tcp::Net>,
    mode: Mutex<Bind>,
    /// Sockets whose bind is still to be reported.
    waiting: Mutex<Vec<(SocketAddr, Arc<dyn AcceptEvents>)>>,
}

impl LateNet {
    fn new(mode: Bind) -> Arc<Self> {
        Arc::new(Self {
            inner: HostNet::shared(),
            mode: Mutex::new(mode),
            waiting: Mutex::new(Vec::new()),
        })
    }

    /// Reports every waiting bind with `result` (no lock held); returns how
    /// many.
    fn finish(&self, result: Result<(), NetError>) -> usize {
        let waiting = core::mem::take(&mut *self.waiting.lock().unwrap());
        for (local, events) in &waiting {
            events.bound(*local, result);
        }
        waiting.len()
    }
}

struct LateListening {
    inner: alloc::boxed::Box<dyn Listening>,
    bound: bool,
}

impl Listening for LateListening {
    fn local(&self) -> SocketAddr {
        self.inner.local()
    }
    fn bound(&self) -> bool {
        self.bound
    }
}

impl crate::kernel::tcp::Net for LateNet {
    fn now_ms(&self) -> u64 {
        self.inner.now_ms()
    }

    fn listen(
        &self,
        local: SocketAddr,
        events: Arc<dyn AcceptEvents>,
    ) -> Result<alloc::boxed::Box<dyn Listening>, NetError> {
        let inner = self.inner.listen(local, Arc::clone(&events))?;
        let mode = *self.mode.lock().unwrap();
        let at = inner.local();
        match mode {
            Bind::Inline => {}
            Bind::Late => self.waiting.lock().unwrap().push((at, events)),
            Bind::Early(result) => events.bound(at, result),
        }
        Ok(alloc::boxed::Box::new(LateListening {
            inner,
            bound: mode == Bind::Inline,
        }))
    }

    fn connect(
        &self,
        local: SocketAddr,
        remote: SocketAddr,
        timeout_ms: u64,
        events: Arc<dyn ConnectEvents>,
    ) -> Result<(), NetError> {
        self.inner.connect(local, remote, timeout_ms, events)
    }

    fn timer(&self, at_ms: u64, timer: Arc<dyn Timer>) {
        self.inner.timer(at_ms, timer);
    }
}

/// A wire host on a test-unique 127.67.n.1 over `net`.
fn late_host(fabric: &Arc<Fabric>, net: &Arc<LateNet>) -> (Host, IpAddr) {
    static NEXT: core::sync::atomic::AtomicU8 = core::sync::atomic::AtomicU8::new(1);
    let ip = IpAddr::V4([127, 67, NEXT.fetch_add(1, Ordering::Relaxed), 1]);
    let h = host(fabric, &[ip], EngineMode::Inline);
    fabric
        .attach_wire(
            &h.device,
            Wire {
                net: Arc::clone(net) as _,
                timeouts: ConnTimeouts::default(),
            },
        )
        .unwrap();
    (h, ip)
}

fn listens(server: &Server) -> Vec<(Result<(), CmError>, usize)> {
    server.requests.listens.lock().unwrap().clone()
}

/// N3, L8: bound within the call, the Listen is done inline and nothing
/// follows.
#[test]
fn test_listen_bound_inline_completes_inline_rule_l8() {
    let fabric = Fabric::new();
    let net = LateNet::new(Bind::Inline);
    let (h, ip) = late_host(&fabric, &net);
    let s = server(&h);
    let listen = s.listener.start_listen(ep(ip, 0)).unwrap();
    assert!(matches!(listen, Listen::Bound(e) if e.ip == ip && e.port != 0));
    assert!(listens(&s).is_empty());
}

/// N3, L8: a socket still binding makes the Listen pend; the bind's
/// success completes it once, and the listener then takes requests.
#[test]
fn test_listen_pends_until_the_late_bind_then_completes_once_rule_n3_l8() {
    let fabric = Fabric::new();
    let net = LateNet::new(Bind::Late);
    let (h, ip) = late_host(&fabric, &net);
    let s = server(&h);
    let listen = s.listener.start_listen(ep(ip, 0)).unwrap();
    let Listen::Binding(endpoint) = listen else {
        panic!("the bind is late: {listen:?}");
    };
    assert_eq!(s.listener.local(), Some(endpoint), "the endpoint is held");
    assert!(listens(&s).is_empty(), "nothing before the bind");
    assert_eq!(net.finish(Ok(())), 1);
    assert_eq!(listens(&s), [(Ok(()), 0)]);
    // A late report of something else changes nothing.
    assert_eq!(net.finish(Ok(())), 0);
    assert_eq!(listens(&s), [(Ok(()), 0)]);
    assert_eq!(s.listener.close(), CloseState::Done);
    assert_eq!(listens(&s).len(), 1, "no completion at close");
}

/// N3: a bind that fails late (a port another program holds) fails the
/// Listen with AddressInUse (STATUS_SHARING_VIOLATION), gives the endpoint
/// back, and the listener may listen again.
#[test]
fn test_late_bind_failure_fails_the_listen_and_frees_the_port_rule_n3() {
    let fabric = Fabric::new();
    let net = LateNet::new(Bind::Late);
    let (h, ip) = late_host(&fabric, &net);
    let s = server(&h);
    let Listen::Binding(endpoint) = s.listener.start_listen(ep(ip, 0)).unwrap() else {
        panic!("late");
    };
    assert_eq!(net.finish(Err(NetError::AddressInUse)), 1);
    assert_eq!(listens(&s), [(Err(CmError::AddressInUse), 0)]);
    assert_eq!(s.listener.local(), None, "listening on nothing");
    assert!(
        !fabric.is_bound(ip, endpoint.port),
        "the port is free again"
    );
    *net.mode.lock().unwrap() = Bind::Inline;
    let again = s.listener.start_listen(endpoint).unwrap();
    assert_eq!(again, Listen::Bound(endpoint), "listens again");
}

/// L20, L21, N6: closing a listener whose bind is still under way completes
/// its Listen cancelled, and then the close; the late bind report is
/// ignored.
#[test]
fn test_close_while_binding_cancels_the_listen_before_the_close_rule_l20_l21() {
    let fabric = Fabric::new();
    let net = LateNet::new(Bind::Late);
    let (h, ip) = late_host(&fabric, &net);
    let s = server(&h);
    let Listen::Binding(endpoint) = s.listener.start_listen(ep(ip, 0)).unwrap() else {
        panic!("late");
    };
    let state = s.listener.close();
    let closed = *s.requests.closed.lock().unwrap();
    assert!(
        state == CloseState::Done || closed == 1,
        "the close is over once the cancelled Listen returned"
    );
    assert_eq!(
        listens(&s),
        [(Err(CmError::Cancelled), 0)],
        "cancelled, before the close's completion"
    );
    assert!(!fabric.is_bound(ip, endpoint.port));
    // The platform's late report: nothing follows.
    assert_eq!(net.finish(Ok(())), 1);
    assert_eq!(listens(&s).len(), 1);
}

/// N3, L8: a bind report that overtakes `listen`'s return is answered by
/// `start_listen` itself (inline), success or failure, and no completion
/// follows.
#[test]
fn test_bind_reported_before_listen_returns_is_answered_inline_rule_l8() {
    let fabric = Fabric::new();
    let net = LateNet::new(Bind::Early(Ok(())));
    let (h, ip) = late_host(&fabric, &net);
    let s = server(&h);
    assert!(matches!(
        s.listener.start_listen(ep(ip, 0)).unwrap(),
        Listen::Bound(_)
    ));
    let other = server(&h);
    *net.mode.lock().unwrap() = Bind::Early(Err(NetError::AddressInUse));
    assert_eq!(
        other.listener.start_listen(ep(ip, 4600)),
        Err(CmError::AddressInUse)
    );
    assert!(!fabric.is_bound(ip, 4600));
    assert!(listens(&s).is_empty() && listens(&other).is_empty());
}
