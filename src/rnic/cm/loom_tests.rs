//! Loom models of the fabric's connection management: the two sides of one
//! connection, or a listener and a connect, acting at once on two threads.
//! Each request's outcome is reported once, and nothing follows a close's
//! `closed` (X3, L21, L22).
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release --lib -- loom`.

use alloc::vec::Vec;

use super::recorder::{Ev, Events};
use super::{
    AddressSet, CloseState, CmError, ConnState, Connector, Endpoint, Fabric, IpAddr, Listener,
    ListenerEvents, ReadLimits,
};
use crate::kernel::sync::{Arc, SpinLock};
use crate::rnic::cq::{Cq, CqEvent, CqNotify};
use crate::rnic::device::{Device, EngineMode};
use crate::rnic::loom_model::bounded;
use crate::rnic::mr::Pd;
use crate::rnic::qp::{Qp, QpConfig};
use crate::rnic::types::Limits;

const A: IpAddr = IpAddr::V4([10, 0, 0, 1]);
const B: IpAddr = IpAddr::V4([10, 0, 0, 2]);
const LIMITS: ReadLimits = ReadLimits::new(1, 1);

const CONFIG: QpConfig = QpConfig {
    context: 1,
    receive_depth: 1,
    initiator_depth: 1,
    max_receive_sge: 1,
    max_initiator_sge: 1,
    inline_size: 0,
};

struct Silent;
impl CqNotify for Silent {
    fn notify(&self, _event: CqEvent) {}
    fn close_complete(&self) {}
}

/// What a listener reported, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Heard {
    Incoming,
    Closed,
}

/// A listener's log that keeps each request (or, `refuse`, drops it at
/// once, which refuses it).
#[derive(Default)]
struct Requests {
    log: SpinLock<Vec<Heard>>,
    refuse: bool,
    queue: SpinLock<Vec<Connector>>,
}

impl ListenerEvents for Requests {
    fn incoming(&self, request: Connector) {
        self.log.lock().push(Heard::Incoming);
        if !self.refuse {
            self.queue.lock().push(request);
        }
    }
    fn listen_completed(&self, result: Result<(), CmError>) {
        panic!("no listen pends on the fabric: {result:?}");
    }
    fn closed(&self) {
        self.log.lock().push(Heard::Closed);
    }
}

/// Two hosts on one fabric (A, B), a QP on each, and a listener on B:4000.
struct Net {
    _fabric: Arc<Fabric>,
    a_set: AddressSet,
    _b_set: AddressSet,
    a_qp: Arc<Qp>,
    b_qp: Arc<Qp>,
    listener: Listener,
    requests: Arc<Requests>,
}

fn host(fabric: &Arc<Fabric>, ip: IpAddr) -> (AddressSet, Arc<Qp>) {
    let limits = Limits {
        max_mr_count: 1,
        max_mw_count: 1,
        max_pd_count: 1,
        ..Limits::DEFAULT
    };
    let device = Device::new(limits, EngineMode::Inline).unwrap();
    let set = AddressSet::register(fabric, &device, &[ip]).unwrap();
    let pd = Pd::new(&device).unwrap();
    let cq = Arc::new(Cq::new(4, Arc::new(Silent)).unwrap());
    let qp = Qp::new(&pd, &cq, &cq, None, CONFIG).unwrap();
    (set, qp)
}

fn net(refuse: bool) -> Net {
    let fabric = Fabric::new();
    let (a_set, a_qp) = host(&fabric, A);
    let (b_set, b_qp) = host(&fabric, B);
    let requests = Arc::new(Requests {
        refuse,
        ..Requests::default()
    });
    let listener = Listener::new(&b_set, Arc::clone(&requests) as _).unwrap();
    listener.listen(Endpoint::new(B, 4000)).unwrap();
    Net {
        _fabric: fabric,
        a_set,
        _b_set: b_set,
        a_qp,
        b_qp,
        listener,
        requests,
    }
}

fn connector(set: &AddressSet) -> (Connector, Arc<Events>) {
    let conn = Connector::new(set).unwrap();
    let log = Arc::new(Events::default());
    conn.set_events(Arc::clone(&log) as _);
    (conn, log)
}

fn connect(net: &Net, active: &Connector) -> Result<(), CmError> {
    active.connect(
        &net.a_qp,
        Endpoint::new(A, 0),
        Endpoint::new(B, 4000),
        LIMITS,
        b"",
    )
}

/// An established connection: (active, its log, passive, its log).
fn established(net: &Net) -> (Connector, Arc<Events>, Connector, Arc<Events>) {
    let (active, a_log) = connector(&net.a_set);
    connect(net, &active).unwrap();
    let passive = net.requests.queue.lock().pop().expect("the request");
    let b_log = Arc::new(Events::default());
    passive.set_events(Arc::clone(&b_log) as _);
    passive.accept(&net.b_qp, LIMITS, b"").unwrap();
    active.complete_connect().unwrap();
    assert_eq!(a_log.take(), [Ev::Connect(Ok(()))]);
    assert_eq!(b_log.take(), [Ev::Accept(Ok(()))]);
    net.requests.log.lock().clear();
    (active, a_log, passive, b_log)
}

fn count(events: &[Ev], ev: &Ev) -> usize {
    events.iter().filter(|e| *e == ev).count()
}

/// An established connection whose passive side disconnects while
/// `active_op` runs on the active side on another thread. The passive
/// Disconnect completes once, successfully, with at most one indication
/// before or after it (X3), and both QPs are quiet once both calls
/// returned; `check` judges what `active_op` returned and the active
/// side's callbacks.
fn racing_the_passive_disconnect<R: Send + 'static>(
    active_op: fn(&Connector) -> R,
    check: fn(R, &Connector, &[Ev]),
) {
    bounded(move || {
        let net = net(false);
        let (active, a_log, passive, b_log) = established(&net);
        let active = Arc::new(active);
        let other = {
            let active = Arc::clone(&active);
            loom::thread::spawn(move || active_op(&active))
        };
        assert_eq!(passive.disconnect(), Ok(()));
        let result = other.join().unwrap();
        let events = b_log.take();
        assert_eq!(count(&events, &Ev::Disconnect(Ok(()))), 1, "{events:?}");
        assert!(count(&events, &Ev::Indicated) <= 1, "{events:?}");
        assert_eq!(
            events.len(),
            1 + count(&events, &Ev::Indicated),
            "{events:?}"
        );
        assert_eq!(passive.state(), Some(ConnState::Disconnected));
        check(result, &active, &a_log.take());
        assert!(net.a_qp.is_quiescent() && net.b_qp.is_quiescent());
    });
}

/// X3: both sides disconnect at once: each Disconnect completes once,
/// successfully, and each side hears at most one indication.
#[test]
fn test_loom_simultaneous_disconnect_completes_each_once_rule_x3() {
    racing_the_passive_disconnect(Connector::disconnect, |result, active, events| {
        assert_eq!(result, Ok(()));
        assert_eq!(count(events, &Ev::Disconnect(Ok(()))), 1, "{events:?}");
        assert!(count(events, &Ev::Indicated) <= 1, "{events:?}");
        assert_eq!(
            events.len(),
            1 + count(events, &Ev::Indicated),
            "{events:?}"
        );
        assert_eq!(active.state(), Some(ConnState::Disconnected));
    });
}

/// One side closes while the other disconnects: the close's `closed`
/// comes once when it pends, and nothing after it (L21, L22).
#[test]
fn test_loom_close_racing_the_peers_disconnect_reports_each_once_rule_l21_l22_x3() {
    racing_the_passive_disconnect(Connector::close, |outcome, _, events| {
        let closed = count(events, &Ev::Closed);
        match outcome {
            CloseState::Done => assert_eq!(closed, 0, "{events:?}"),
            CloseState::Pending => {
                assert_eq!(closed, 1, "{events:?}");
                assert_eq!(events.last(), Some(&Ev::Closed), "{events:?}");
            }
        }
        assert!(
            events
                .iter()
                .all(|e| matches!(e, Ev::Indicated | Ev::Closed)),
            "{events:?}"
        );
    });
}

/// A connect while the listener closes: the connect is refused, inline or
/// by its one completion; the listener's `closed` comes once when its close
/// pends, and no request is delivered after it (N6, L22).
#[test]
fn test_loom_connect_racing_the_listeners_close_is_refused_once_rule_n6_l22() {
    bounded(|| {
        let net = Arc::new(net(true));
        let (active, a_log) = connector(&net.a_set);
        let closer = {
            let net = Arc::clone(&net);
            loom::thread::spawn(move || net.listener.close())
        };
        let inline = connect(&net, &active);
        let outcome = closer.join().unwrap();
        let events = a_log.take();
        match inline {
            Ok(()) => assert_eq!(
                events,
                [Ev::Connect(Err(CmError::ConnectionRefused))],
                "one completion"
            ),
            Err(error) => {
                assert_eq!(error, CmError::ConnectionRefused);
                assert!(events.is_empty(), "{events:?}");
            }
        }
        let heard = core::mem::take(&mut *net.requests.log.lock());
        let close_callbacks = heard.iter().filter(|h| **h == Heard::Closed).count();
        match outcome {
            CloseState::Done => assert_eq!(close_callbacks, 0, "{heard:?}"),
            CloseState::Pending => {
                assert_eq!(close_callbacks, 1, "{heard:?}");
                assert_eq!(heard.last(), Some(&Heard::Closed), "{heard:?}");
            }
        }
    });
}
