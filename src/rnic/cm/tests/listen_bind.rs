//! A Listen over the wire whose TCP sockets the platform binds late (as WSK
//! does): the listener's `start_listen` answers `Binding`, and the outcome
//! reaches `ListenerEvents::listen_completed` exactly once (N3, L8), a
//! failure gives the endpoint back, and a close first completes it
//! cancelled before the close itself (L20, L21). The platform here is the
//! host's TCP whose listening sockets report their bind only when the test
//! says so. Addresses 127.67.x.y are this file's.

use super::scripted_net::{Bind, ScriptedNet, wire_host};
use super::*;
use crate::kernel::tcp::NetError;

/// A listener of a wire host on a test-unique 127.67.n.1 whose sockets
/// bind as the net says.
struct Binding {
    fabric: Arc<Fabric>,
    /// The net, to report late binds and change how the next ones bind.
    net: Arc<ScriptedNet>,
    host: Host,
    ip: IpAddr,
    s: Server,
}

fn binding(bind: Bind) -> Binding {
    static NEXT: core::sync::atomic::AtomicU8 = core::sync::atomic::AtomicU8::new(1);
    let ip = IpAddr::V4([127, 67, NEXT.fetch_add(1, Ordering::Relaxed), 1]);
    let fabric = Fabric::new();
    let net = ScriptedNet::binding(bind);
    let host = wire_host(
        &fabric,
        &[ip],
        Some(Arc::clone(&net)),
        ConnTimeouts::default(),
    );
    let s = server(&host);
    Binding {
        fabric,
        net,
        host,
        ip,
        s,
    }
}

impl Binding {
    /// Starts a Listen on `(ip, 0)` that a late bind leaves pending; returns
    /// the endpoint it holds.
    fn listen_pending(&self) -> Endpoint {
        let listen = self.s.listener.start_listen(ep(self.ip, 0)).unwrap();
        let Listen::Binding(endpoint) = listen else {
            panic!("the bind is late: {listen:?}");
        };
        endpoint
    }
}

fn listens(server: &Server) -> Vec<(Result<(), CmError>, usize)> {
    server.requests.listens.lock().unwrap().clone()
}

/// N3, L8: bound within the call, the Listen is done inline and nothing
/// follows.
#[test]
fn test_listen_bound_inline_completes_inline_rule_l8() {
    let f = binding(Bind::Inline);
    let listen = f.s.listener.start_listen(ep(f.ip, 0)).unwrap();
    assert!(matches!(listen, Listen::Bound(e) if e.ip == f.ip && e.port != 0));
    assert!(listens(&f.s).is_empty());
}

/// N3, L8: a socket still binding makes the Listen pend; the bind's
/// success completes it once, and the listener then takes requests.
#[test]
fn test_listen_pends_until_the_late_bind_then_completes_once_rule_n3_l8() {
    let f = binding(Bind::Late);
    let endpoint = f.listen_pending();
    assert_eq!(f.s.listener.local(), Some(endpoint), "the endpoint is held");
    assert!(listens(&f.s).is_empty(), "nothing before the bind");
    assert_eq!(f.net.finish_binds(Ok(())), 1);
    assert_eq!(listens(&f.s), [(Ok(()), 0)]);
    // A late report of something else changes nothing.
    assert_eq!(f.net.finish_binds(Ok(())), 0);
    assert_eq!(listens(&f.s), [(Ok(()), 0)]);
    assert_eq!(f.s.listener.close(), CloseState::Done);
    assert_eq!(listens(&f.s).len(), 1, "no completion at close");
}

/// N3: a bind that fails late (a port another program holds) fails the
/// Listen with AddressInUse (STATUS_SHARING_VIOLATION), gives the endpoint
/// back, and the listener may listen again.
#[test]
fn test_late_bind_failure_fails_the_listen_and_frees_the_port_rule_n3() {
    let f = binding(Bind::Late);
    let endpoint = f.listen_pending();
    assert_eq!(f.net.finish_binds(Err(NetError::AddressInUse)), 1);
    assert_eq!(listens(&f.s), [(Err(CmError::AddressInUse), 0)]);
    assert_eq!(f.s.listener.local(), None, "listening on nothing");
    assert!(
        !f.fabric.is_bound(f.ip, endpoint.port),
        "the port is free again"
    );
    *f.net.bind.lock().unwrap() = Bind::Inline;
    let again = f.s.listener.start_listen(endpoint).unwrap();
    assert_eq!(again, Listen::Bound(endpoint), "listens again");
}

/// L20, L21, N6: closing a listener whose bind is still under way completes
/// its Listen cancelled, and then the close; the late bind report is
/// ignored.
#[test]
fn test_close_while_binding_cancels_the_listen_before_the_close_rule_l20_l21() {
    let f = binding(Bind::Late);
    let endpoint = f.listen_pending();
    let state = f.s.listener.close();
    let closed = *f.s.requests.closed.lock().unwrap();
    assert!(
        state == CloseState::Done || closed == 1,
        "the close is over once the cancelled Listen returned"
    );
    assert_eq!(
        listens(&f.s),
        [(Err(CmError::Cancelled), 0)],
        "cancelled, before the close's completion"
    );
    assert!(!f.fabric.is_bound(f.ip, endpoint.port));
    // The platform's late report: nothing follows.
    assert_eq!(f.net.finish_binds(Ok(())), 1);
    assert_eq!(listens(&f.s).len(), 1);
}

/// N3, L8: a bind report that overtakes `listen`'s return is answered by
/// `start_listen` itself (inline), success or failure, and no completion
/// follows.
#[test]
fn test_bind_reported_before_listen_returns_is_answered_inline_rule_l8() {
    let f = binding(Bind::Early(Ok(())));
    assert!(matches!(
        f.s.listener.start_listen(ep(f.ip, 0)).unwrap(),
        Listen::Bound(_)
    ));
    let other = server(&f.host);
    *f.net.bind.lock().unwrap() = Bind::Early(Err(NetError::AddressInUse));
    assert_eq!(
        other.listener.start_listen(ep(f.ip, 4600)),
        Err(CmError::AddressInUse)
    );
    assert!(!f.fabric.is_bound(f.ip, 4600));
    assert!(listens(&f.s).is_empty() && listens(&other).is_empty());
}
