//! `Conn` over real TCP connections on 127.0.0.1 (`kernel::net`): the MPA
//! exchange driven by socket events, accept with private data and read
//! limits (N20) then data over the link, reject, and a silent peer timing
//! out on either side.

use alloc::vec::Vec;
use std::io::Read;
use std::net::TcpStream;
use std::sync::Mutex;

use super::{Conn, ConnEvents, ConnFailure, Finish, LinkParams};
use crate::kernel::sync::Arc;
use crate::rnic::device::EngineMode;
use crate::rnic::iwarp::link::Link;
use crate::rnic::iwarp::mpa::{self, RtrKinds};
use crate::rnic::iwarp::setup::{InitiatorConfig, PeerRequest, ResponderConfig};
use crate::rnic::iwarp::tcp_testing::{
    Glue, WAIT, completions, now, parts, sockets, start, wait_state, wait_until,
};
use crate::rnic::qp::{Payload, QpState};
use crate::rnic::testing::{Pair, Side};
use crate::rnic::types::{Access, Opcode, WcStatus, WrFlags};

#[derive(Debug)]
enum Seen {
    Request(PeerRequest),
    Up(Vec<u8>, (u32, u32)),
    Failed(ConnFailure),
}

#[derive(Default)]
struct Recorder(Mutex<Vec<Seen>>);

impl ConnEvents for Recorder {
    fn request(&self, request: &PeerRequest) {
        self.0.lock().unwrap().push(Seen::Request(request.clone()));
    }
    fn established(&self, link: &Arc<Link>, private_data: &[u8]) {
        let limits = (link.config().ird, link.config().ord);
        self.0
            .lock()
            .unwrap()
            .push(Seen::Up(private_data.to_vec(), limits));
    }
    fn failed(&self, failure: ConnFailure) {
        self.0.lock().unwrap().push(Seen::Failed(failure));
    }
}

impl Recorder {
    /// Waits (bounded in count and time) until something is seen, and
    /// takes it.
    fn next(&self) -> Seen {
        let mut taken = None;
        wait_until("a connection event", || {
            let mut seen = self.0.lock().unwrap();
            taken = (!seen.is_empty()).then(|| seen.remove(0));
            taken.is_some()
        });
        taken.unwrap()
    }
}

const PARAMS: LinkParams = LinkParams {
    mulpdu: 1000,
    max_rx_ulpdu: u16::MAX,
    default_ird_ord: (1, 1),
};

struct End {
    conn: Arc<Conn>,
    seen: Arc<Recorder>,
    peer: TcpStream,
    /// The socket's events to `conn`; it notes a panic on a socket thread.
    glue: Arc<Glue>,
}

fn initiator(side: &Side, socket: TcpStream, config: &InitiatorConfig, data: &[u8]) -> End {
    let peer = socket.try_clone().unwrap();
    let seen = Arc::new(Recorder::default());
    let events = Arc::clone(&seen);
    let started = start(socket, |stream| {
        Conn::initiate(
            &side.qp,
            parts(stream, PARAMS, events),
            config,
            data,
            Finish::AtReply,
        )
        .unwrap()
    });
    End {
        conn: started.conn,
        seen,
        peer,
        glue: started.glue,
    }
}

fn responder(side: &Side, socket: TcpStream, config: ResponderConfig) -> End {
    let peer = socket.try_clone().unwrap();
    let seen = Arc::new(Recorder::default());
    let events = Arc::clone(&seen);
    let started = start(socket, |stream| {
        Conn::respond(Some(&side.qp), parts(stream, PARAMS, events), config)
    });
    End {
        conn: started.conn,
        seen,
        peer,
        glue: started.glue,
    }
}

fn sides() -> (Side, Side) {
    let Pair { a, b } = Pair::apart(EngineMode::Inline);
    (a, b)
}

/// N20 over the wire: each side's inbound limit is min(own inbound, peer's
/// outbound). Then a Send crosses the link, and a disconnect.
#[test]
fn test_connect_accept_private_data_and_read_limits_rule_n20() {
    for rtr in [RtrKinds::empty(), RtrKinds::WRITE | RtrKinds::READ] {
        let (a, b) = sides();
        let (client, server) = sockets();
        let config = InitiatorConfig {
            ird: 4,
            ord: 1,
            rtr,
            ..InitiatorConfig::default()
        };
        let ea = initiator(&a, client, &config, b"hello");
        let eb = responder(&b, server, ResponderConfig::default());
        let Seen::Request(request) = eb.seen.next() else {
            panic!("no request");
        };
        assert_eq!(request.private_data, b"hello");
        assert_eq!((request.ird, request.ord), (Some(4), Some(1)));
        eb.conn.accept(None, 2, 3, b"welcome", now()).unwrap();
        let Seen::Up(data, limits_a) = ea.seen.next() else {
            panic!("initiator not up");
        };
        assert_eq!(data, b"welcome");
        assert_eq!(limits_a, (3, 1));
        assert_eq!(a.qp.read_limits(), (3, 1));
        let dst = b.buffer(64, 0, Access::LOCAL_WRITE);
        b.qp.post_receive(1, &[dst.sge(0, 64)]).unwrap();
        let src = a.pattern(40, 3, Access::empty());
        a.qp.post_send(7, Payload::Sges(&[src.sge(0, 40)]), WrFlags::empty(), None)
            .unwrap();
        // The responder is up once the RTR (or, without one, its wait for
        // the first FPDU) is behind it.
        let Seen::Up(data, limits_b) = eb.seen.next() else {
            panic!("responder not up");
        };
        assert_eq!(data, b"hello");
        assert_eq!(limits_b, (1, 3));
        assert_eq!(b.qp.read_limits(), (1, 3));
        let got = wait_cq(&b.rcq);
        assert_eq!(
            (got.request_context, got.status, got.bytes),
            (1, WcStatus::Success, 40)
        );
        assert_eq!(&dst.buffer.bytes()[..40], src.buffer.bytes());
        let sent = wait_cq(&a.scq);
        assert_eq!((sent.request_context, sent.opcode), (7, Opcode::Send));
        a.qp.disconnect();
        assert_eq!(wait_state(&b, QpState::Error), QpState::Error);
        assert!(!ea.glue.panicked() && !eb.glue.panicked());
        drop((ea.peer, eb.peer));
    }
}

#[test]
fn test_reject_with_private_data_rule_n28() {
    let (a, b) = sides();
    let (client, server) = sockets();
    let ea = initiator(&a, client, &InitiatorConfig::default(), b"knock");
    let eb = responder(&b, server, ResponderConfig::default());
    assert!(matches!(eb.seen.next(), Seen::Request(_)));
    eb.conn.reject(b"go away", now()).unwrap();
    match ea.seen.next() {
        Seen::Failed(ConnFailure::Rejected(data)) => assert_eq!(data, b"go away"),
        other => panic!("{other:?}"),
    }
    assert_eq!(a.qp.state(), QpState::Idle, "the QP is untouched (N28)");
    assert_eq!(b.qp.state(), QpState::Idle);
    // The responder closed its end after the reject frame.
    assert_eq!(read_to_end(&ea.peer), 0);
    assert!(!ea.glue.panicked() && !eb.glue.panicked());
}

/// A peer that never answers: each side's wait ends at its deadline, and
/// the stream is reset.
#[test]
fn test_silent_peer_times_out() {
    let (a, b) = sides();
    // The initiator's wait for the reply.
    let (client, server) = sockets();
    let config = InitiatorConfig {
        reply_timeout_ms: 30,
        ..InitiatorConfig::default()
    };
    let ea = initiator(&a, client, &config, b"anyone?");
    tick_until_failed(&ea);
    assert!(matches!(
        ea.seen.next(),
        Seen::Failed(ConnFailure::TimedOut)
    ));
    assert!(ea.conn.deadline().is_none());
    // The silent server sees the request, then the end of the stream.
    let mut bytes = Vec::new();
    let _ = (&server).read_to_end(&mut bytes);
    assert!(bytes.starts_with(&mpa::KEY_REQUEST));
    // The responder's wait for the request.
    let (client, server) = sockets();
    let config = ResponderConfig {
        request_timeout_ms: 30,
        ..ResponderConfig::default()
    };
    let eb = responder(&b, server, config);
    tick_until_failed(&eb);
    assert!(matches!(
        eb.seen.next(),
        Seen::Failed(ConnFailure::TimedOut)
    ));
    assert_eq!(read_to_end(&client), 0);
    assert_eq!(a.qp.state(), QpState::Idle);
    assert_eq!(b.qp.state(), QpState::Idle);
    assert!(!ea.glue.panicked() && !eb.glue.panicked());
}

/// Calls `tick` by the deadline until the attempt failed (bounded).
fn tick_until_failed(end: &End) {
    wait_until("a time-out", || {
        if !end.seen.0.lock().unwrap().is_empty() {
            return true;
        }
        if let Some(deadline) = end.conn.deadline()
            && now() >= deadline
        {
            end.conn.tick(now());
        }
        false
    });
}

/// Reads until the end of the stream; returns how many bytes came.
fn read_to_end(mut socket: &TcpStream) -> usize {
    socket.set_read_timeout(Some(WAIT)).unwrap();
    let mut bytes = Vec::new();
    let _ = socket.read_to_end(&mut bytes);
    bytes.len()
}

fn wait_cq(cq: &crate::rnic::testing::TestCq) -> crate::rnic::types::Completion {
    let got = completions(cq, 1);
    assert!(!got.is_empty(), "no completion");
    got[0]
}

/// X1/X2 over TCP: whichever side disconnects, its link closes the stream
/// orderly once its FPDUs are out, and the other side sees the peer gone.
#[test]
fn test_graceful_disconnect_both_ways() {
    for a_first in [true, false] {
        let (a, b) = sides();
        let (client, server) = sockets();
        let ea = initiator(&a, client, &InitiatorConfig::default(), b"");
        let eb = responder(&b, server, ResponderConfig::default());
        assert!(matches!(eb.seen.next(), Seen::Request(_)));
        eb.conn.accept(None, 1, 1, b"", now()).unwrap();
        assert!(matches!(ea.seen.next(), Seen::Up(..)));
        assert!(matches!(eb.seen.next(), Seen::Up(..)));
        let (first, second) = if a_first { (&a, &b) } else { (&b, &a) };
        first.qp.disconnect();
        assert_eq!(wait_state(second, QpState::Error), QpState::Error);
        assert_eq!(first.qp.state(), QpState::Disconnected);
        assert!(!ea.glue.panicked() && !eb.glue.panicked());
    }
}
