//! Hostile peers over real TCP on 127.0.0.1 (issue 8, item 5). The test
//! plays the peer with a raw `std` socket: it runs the MPA exchange by hand
//! (frames built with `mpa.rs`), then misbehaves. Each case checks what the
//! peer receives (a Terminate decoded with `terminate.rs`, or only the end of
//! the stream), the local consumer's completion statuses, the QP's state and
//! a later post, that a second, well-behaved connection on the same device
//! still carries a Send round trip, that no stream thread panicked, and that
//! the connection's objects (conn, link, QP, socket threads) are all released
//! once both ends are closed. Every wait has a deadline.

use alloc::vec::Vec;
use core::sync::atomic::{AtomicUsize, Ordering};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Mutex;

use super::{Conn, ConnEvents, ConnFailure, Finish, LinkParams};
use crate::kernel::net::TcpByteStream;
use crate::kernel::sync::{Arc, Weak};
use crate::rnic::device::Device;
use crate::rnic::iwarp::ddp;
use crate::rnic::iwarp::link::{ByteStream, Link};
use crate::rnic::iwarp::mpa::{self, Enhanced, FrameKind, MpaError, MpaFrame};
use crate::rnic::iwarp::rdmap::{Message, ReadRequest, SendHeader};
use crate::rnic::iwarp::setup::{InitiatorConfig, PeerRequest, ResponderConfig, SetupError};
use crate::rnic::iwarp::tcp_testing::{self, Glue, WAIT, now, parts, sockets, wait_until};
use crate::rnic::iwarp::terminate::{
    Layer, LlpCode, TermCode, TermLayout, Terminate, ddp_code, ddp_etype, rdmap_code, rdmap_etype,
};
use crate::rnic::qp::{Payload, PostError, QpEvents, QpState};
use crate::rnic::testing::{CONFIG, Registered, Side, TestCq, inline_device, summary};
use crate::rnic::types::{Access, Completion, Opcode, WcStatus, WrFlags};

/// The local link's sizes: FPDUs announcing more than 1024 ULPDU bytes are
/// refused (the oversized-FPDU case).
const PARAMS: LinkParams = LinkParams {
    mulpdu: 1000,
    max_rx_ulpdu: 1024,
    default_ird_ord: (1, 1),
};

/// The hostile peer's remote token for the local Read it never answers.
const PEER_STAG: u32 = 0x4242_0100;

// ----- the local side (socket ↔ Conn: `tcp_testing`) ------------------------

#[derive(Debug)]
enum Seen {
    Request,
    Up,
    Failed(ConnFailure),
}

/// What the connection layer heard.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<Seen>>,
    link: Mutex<Option<Weak<Link>>>,
    /// When `established` was reported.
    up_at: AtomicUsize,
}

impl ConnEvents for Recorder {
    fn request(&self, _request: &PeerRequest) {
        self.seen.lock().unwrap().push(Seen::Request);
    }
    fn established(&self, link: &Arc<Link>, _private_data: &[u8]) {
        *self.link.lock().unwrap() = Some(Arc::downgrade(link));
        self.up_at
            .store(ORDER.fetch_add(1, Ordering::SeqCst), Ordering::SeqCst);
        self.seen.lock().unwrap().push(Seen::Up);
    }
    fn failed(&self, failure: ConnFailure) {
        self.seen.lock().unwrap().push(Seen::Failed(failure));
    }
}

impl Recorder {
    fn next(&self) -> Seen {
        let mut taken = None;
        wait_until("a connection event", || {
            let mut seen = self.seen.lock().unwrap();
            if seen.is_empty() {
                return false;
            }
            taken = Some(seen.remove(0));
            true
        });
        taken.unwrap()
    }

    fn is_quiet(&self) -> bool {
        self.seen.lock().unwrap().is_empty()
    }
}

/// Orders events across threads (compared only within one test).
static ORDER: AtomicUsize = AtomicUsize::new(1);

/// The QP's connection-layer events (X2): how often, and when, the loss
/// was reported.
#[derive(Default)]
struct Lost {
    count: AtomicUsize,
    at: AtomicUsize,
}

impl QpEvents for Lost {
    fn connection_lost(&self) {
        self.count.fetch_add(1, Ordering::SeqCst);
        self.at
            .store(ORDER.fetch_add(1, Ordering::SeqCst), Ordering::SeqCst);
    }
}

/// One local connection: its `Conn`, what it reported, its socket glue.
struct End {
    conn: Arc<Conn>,
    seen: Arc<Recorder>,
    glue: Arc<Glue>,
    stream: Weak<TcpByteStream>,
}

fn start(
    socket: TcpStream,
    make: impl FnOnce(Arc<dyn ByteStream>, Arc<Recorder>) -> Arc<Conn>,
) -> End {
    let seen = Arc::new(Recorder::default());
    let events = Arc::clone(&seen);
    let started = tcp_testing::start(socket, |stream| make(stream, events));
    End {
        conn: started.conn,
        seen,
        glue: started.glue,
        stream: started.stream,
    }
}

fn initiator(side: &Side, socket: TcpStream, config: &InitiatorConfig) -> End {
    start(socket, |stream, seen| {
        Conn::initiate(
            &side.qp,
            parts(stream, PARAMS, seen),
            config,
            b"",
            Finish::AtReply,
        )
        .unwrap()
    })
}

fn responder(side: &Side, socket: TcpStream) -> End {
    start(socket, |stream, seen| {
        Conn::respond(
            Some(&side.qp),
            parts(stream, PARAMS, seen),
            ResponderConfig::default(),
        )
    })
}

/// Two well-behaved local connections over TCP: `a` initiates, `b` accepts.
fn connect_pair(a: &Side, b: &Side) -> (End, End) {
    let (client, server) = sockets();
    let ea = initiator(a, client, &InitiatorConfig::default());
    let eb = responder(b, server);
    assert!(matches!(eb.seen.next(), Seen::Request));
    eb.conn.accept(None, 1, 1, b"", now()).unwrap();
    assert!(matches!(ea.seen.next(), Seen::Up));
    assert!(matches!(eb.seen.next(), Seen::Up));
    (ea, eb)
}

/// Drops the local side of a connection and checks that everything it
/// held is released: no socket thread panicked, and the conn, its link,
/// the QP and the socket (whose reader and writer threads hold it until
/// they end) are all gone. The peer's end must be closed already.
fn assert_released(end: End, side: Side) {
    let End {
        conn,
        seen,
        glue,
        stream,
    } = end;
    assert!(!glue.panicked(), "a socket thread panicked");
    let conn_w = Arc::downgrade(&conn);
    let qp_w = Arc::downgrade(&side.qp);
    let link_w = seen.link.lock().unwrap().clone();
    side.qp.set_events(None);
    drop((conn, seen, glue, side));
    wait_until("the connection's objects to be released", || {
        conn_w.upgrade().is_none()
            && qp_w.upgrade().is_none()
            && stream.upgrade().is_none()
            && link_w.as_ref().is_none_or(|l| l.upgrade().is_none())
    });
}

// ----- completions ---------------------------------------------------------

fn take(cq: &TestCq, n: usize) -> Vec<Completion> {
    let got = tcp_testing::completions(cq, n);
    assert_eq!(got.len(), n, "not the completions expected: {got:?}");
    got
}

// ----- the bench: a device with a well-behaved connection ----------------------

/// The local device, with one well-behaved connection (`good`, initiator,
/// to `peer` on another device) that must outlive every hostile one.
struct Bench {
    device: Arc<Device>,
    good: Side,
    peer: Side,
    ends: (End, End),
    rounds: u8,
}

impl Bench {
    fn new() -> Self {
        let good = Side::new(&inline_device(), 0x600D, CONFIG);
        let peer = Side::new(&inline_device(), 0x9EE5, CONFIG);
        let ends = connect_pair(&good, &peer);
        let mut bench = Self {
            device: Arc::clone(&good.device),
            good,
            peer,
            ends,
            rounds: 0,
        };
        bench.round_trip();
        bench
    }

    /// A fresh QP on the local device for a hostile connection.
    fn side(&self) -> (Side, Arc<Lost>) {
        let side = Side::new(&self.device, 0xBAD, CONFIG);
        let lost = Arc::new(Lost::default());
        side.qp
            .set_events(Some(Arc::clone(&lost) as Arc<dyn QpEvents>));
        (side, lost)
    }

    /// A Send each way over the well-behaved connection.
    fn round_trip(&mut self) {
        self.rounds += 1;
        let round = usize::from(self.rounds);
        for (from, to) in [(&self.good, &self.peer), (&self.peer, &self.good)] {
            let dst = to.buffer(64, 0, Access::LOCAL_WRITE);
            to.qp.post_receive(round, &[dst.sge(0, 64)]).unwrap();
            let src = from.pattern(40, self.rounds, Access::empty());
            from.qp
                .post_send(
                    round,
                    Payload::Sges(&[src.sge(0, 40)]),
                    WrFlags::empty(),
                    None,
                )
                .unwrap();
            let got = take(&to.rcq, 1);
            assert_eq!(
                (got[0].request_context, got[0].status, got[0].bytes),
                (round, WcStatus::Success, 40),
                "the well-behaved connection"
            );
            assert_eq!(&dst.buffer.bytes()[..40], src.buffer.bytes());
            assert_eq!(
                summary(&take(&from.scq, 1)),
                [(round, Opcode::Send, WcStatus::Success)]
            );
        }
        assert_eq!(self.good.qp.state(), QpState::Connected);
        assert_eq!(self.peer.qp.state(), QpState::Connected);
    }

    /// The well-behaved connection still works; then it is disconnected and
    /// released too.
    /// Runs `test` on a new bench, then checks the well-behaved connection
    /// survived it ([`Self::finish`]).
    fn run(test: impl FnOnce(&Self)) {
        let bench = Self::new();
        test(&bench);
        bench.finish();
    }

    fn finish(mut self) {
        self.round_trip();
        self.good.qp.disconnect();
        wait_until("the peer to see the disconnect", || {
            self.peer.qp.state() == QpState::Error
        });
        self.peer.qp.disconnect();
        let Self {
            good, peer, ends, ..
        } = self;
        assert!(ends.0.seen.is_quiet() && ends.1.seen.is_quiet());
        assert_released(ends.0, good);
        assert_released(ends.1, peer);
    }
}

// ----- the hostile peer ----------------------------------------------------

/// The test's end of a hostile connection: a raw socket.
struct Hostile {
    socket: TcpStream,
    crc: bool,
}

impl Hostile {
    fn send(&mut self, bytes: &[u8]) {
        self.socket.write_all(bytes).unwrap();
    }

    /// `frame`'s bytes (a request or reply with at most the IRD/ORD block).
    fn frame(frame: &MpaFrame<'_>) -> Vec<u8> {
        let mut bytes = alloc::vec![0_u8; mpa::FRAME_HEADER_LEN + mpa::ENHANCED_LEN];
        let n = frame.write(&mut bytes).unwrap();
        bytes.truncate(n);
        bytes
    }

    /// Reads the local initiator's request and returns the reply accepting
    /// it with IRD = ORD = 1 (not sent yet).
    fn accepting_reply(&mut self) -> Vec<u8> {
        let request = self.read_frame(FrameKind::Request);
        let (request, _) = MpaFrame::parse(&request, FrameKind::Request).unwrap();
        Self::frame(&MpaFrame::accept(&request, self.crc, 1, 1, &[]).unwrap())
    }

    /// Sends `message` as one FPDU; returns its ULPDU.
    fn send_message(&mut self, message: Message<'_>) -> Vec<u8> {
        let fpdu = self.fpdu(message);
        self.send(&fpdu);
        fpdu[mpa::FPDU_LENGTH_LEN..mpa::FPDU_LENGTH_LEN + message.ulpdu_len()].to_vec()
    }

    fn fpdu(&self, message: Message<'_>) -> Vec<u8> {
        let mut buf = alloc::vec![0_u8; mpa::fpdu_len(message.ulpdu_len())];
        let n = message.write_fpdu(&mut buf, self.crc).unwrap();
        buf.truncate(n);
        buf
    }

    /// Reads one MPA frame of `kind`.
    fn read_frame(&mut self, kind: FrameKind) -> Vec<u8> {
        self.socket.set_read_timeout(Some(WAIT)).unwrap();
        let mut frame = alloc::vec![0_u8; mpa::FRAME_HEADER_LEN];
        self.socket.read_exact(&mut frame).unwrap();
        let len = MpaFrame::frame_len(&frame).unwrap();
        frame.resize(len, 0);
        self.socket
            .read_exact(&mut frame[mpa::FRAME_HEADER_LEN..])
            .unwrap();
        assert!(MpaFrame::parse(&frame, kind).is_ok());
        frame
    }

    /// Reads one FPDU, the local Read Request (see
    /// [`assert_read_request`]); returns its ULPDU.
    #[track_caller]
    fn read_request(&mut self) -> Vec<u8> {
        let request = self.read_fpdu();
        assert_read_request(&request);
        request
    }

    /// Reads one FPDU; returns its ULPDU.
    fn read_fpdu(&mut self) -> Vec<u8> {
        self.socket.set_read_timeout(Some(WAIT)).unwrap();
        let mut len = [0_u8; mpa::FPDU_LENGTH_LEN];
        self.socket.read_exact(&mut len).unwrap();
        let mut fpdu = Vec::from(len);
        fpdu.resize(mpa::fpdu_len(usize::from(u16::from_be_bytes(len))), 0);
        self.socket
            .read_exact(&mut fpdu[mpa::FPDU_LENGTH_LEN..])
            .unwrap();
        let (ulpdu, _) = mpa::parse_fpdu(&fpdu, self.crc, mpa::MAX_ULPDU).unwrap();
        ulpdu.to_vec()
    }

    /// Reads until the local side closes the stream (it must, in time).
    fn read_to_end(&mut self) -> Vec<u8> {
        self.socket.set_read_timeout(Some(WAIT)).unwrap();
        let mut bytes = Vec::new();
        let mut chunk = [0_u8; 4096];
        for _ in 0..100_000 {
            match self.socket.read(&mut chunk) {
                Ok(0) => return bytes,
                Ok(n) => bytes.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => panic!("the local side did not close the stream: {e}"),
            }
        }
        panic!("endless stream");
    }

    /// The ULPDUs of every FPDU the local side sent, up to its close.
    fn read_ulpdus(&mut self) -> Vec<Vec<u8>> {
        let bytes = self.read_to_end();
        let mut rest = &bytes[..];
        let mut out = Vec::new();
        while !rest.is_empty() {
            let (ulpdu, len) = mpa::parse_fpdu(rest, self.crc, mpa::MAX_ULPDU).unwrap();
            out.push(ulpdu.to_vec());
            rest = &rest[len..];
        }
        out
    }

    /// Waits until the local side's bytes are in this socket's receive
    /// buffer (unread: closing then resets the connection).
    fn await_unread(&self) {
        self.socket.set_read_timeout(Some(WAIT)).unwrap();
        let mut byte = [0_u8; 1];
        assert_eq!(self.socket.peek(&mut byte).unwrap(), 1);
    }
}

/// A local QP initiating on a fresh socket pair with `config`, and the
/// test's raw socket as its peer, before the MPA exchange.
fn local_initiator(side: &Side, config: &InitiatorConfig) -> (End, Hostile) {
    let (client, server) = sockets();
    let end = initiator(side, client, config);
    let peer = Hostile {
        socket: server,
        crc: config.crc,
    };
    (end, peer)
}

/// A local QP responding on a fresh socket pair, and the test's raw socket
/// as its peer (asking for CRC when `crc`), before the MPA exchange.
fn local_responder(side: &Side, crc: bool) -> (End, Hostile) {
    let (client, server) = sockets();
    let end = responder(side, server);
    let peer = Hostile {
        socket: client,
        crc,
    };
    (end, peer)
}

/// A hostile connection, established. `local_responds`: the test connects
/// and sends the MPA request, the local QP accepts (it then sends nothing
/// before the peer's first FPDU, RFC 5044); otherwise the local QP
/// initiates and the test answers with an accepting reply. CRC when `crc`.
fn hostile_connection(side: &Side, crc: bool, local_responds: bool) -> (End, Hostile) {
    if local_responds {
        let (end, mut peer) = local_responder(side, crc);
        let enhanced = Enhanced {
            ird: 1,
            ord: 1,
            ..Enhanced::default()
        };
        peer.send(&Hostile::frame(&MpaFrame::request(crc, enhanced, &[])));
        assert!(matches!(end.seen.next(), Seen::Request));
        end.conn.accept(None, 1, 1, b"", now()).unwrap();
        let reply = peer.read_frame(FrameKind::Reply);
        let (reply, _) = MpaFrame::parse(&reply, FrameKind::Reply).unwrap();
        assert!(!reply.reject && reply.crc == crc);
        assert!(matches!(end.seen.next(), Seen::Up));
        return (end, peer);
    }
    let config = InitiatorConfig {
        crc,
        ..InitiatorConfig::default()
    };
    let (end, mut peer) = local_initiator(side, &config);
    let reply = peer.accepting_reply();
    peer.send(&reply);
    assert!(matches!(end.seen.next(), Seen::Up));
    (end, peer)
}

/// The local consumer's outstanding work on a hostile connection: two
/// receives (1, 2) and a Read (10) the peer never answers; the Read
/// Request is the first FPDU the peer gets (a local responder sends it
/// only after the peer's first FPDU).
struct Outstanding {
    recv: Registered,
    sink: Registered,
}

fn outstanding(side: &Side) -> Outstanding {
    let recv = side.buffer(128, 0, Access::LOCAL_WRITE);
    side.qp.post_receive(1, &[recv.sge(0, 64)]).unwrap();
    side.qp.post_receive(2, &[recv.sge(64, 64)]).unwrap();
    let sink = side.buffer(16, 0, Access::LOCAL_WRITE);
    side.qp
        .post_read(10, &[sink.sge(0, 16)], 0x1000, PEER_STAG, WrFlags::empty())
        .unwrap();
    Outstanding { recv, sink }
}

/// The first ULPDU is the local side's Read Request for the Read (10).
fn assert_read_request(ulpdu: &[u8]) {
    match Message::parse(ulpdu, None).unwrap() {
        Message::ReadRequest { msn: 1, request } => {
            assert_eq!((request.source_stag, request.size), (PEER_STAG, 16));
        }
        other => panic!("expected the Read Request, got {other:?}"),
    }
}

/// A segment of the Send with MSN 1 (the first on its queue) at message
/// offset `mo`.
fn send_segment(mo: u32, last: bool, payload: &[u8]) -> Message<'_> {
    Message::Send {
        header: SendHeader {
            mo,
            last,
            ..SendHeader::whole(1)
        },
        payload,
    }
}

/// What a received Terminate says.
#[derive(Debug, PartialEq, Eq)]
struct SeenTerminate {
    code: TermCode,
    segment_len: Option<u16>,
    ddp_header: Option<Vec<u8>>,
    rdmap_header: Option<Vec<u8>>,
}

impl SeenTerminate {
    /// A Terminate that copies no header (an LLP error: the framing or the
    /// CRC, where no segment can be trusted).
    const fn headerless(code: TermCode) -> Self {
        Self {
            code,
            segment_len: None,
            ddp_header: None,
            rdmap_header: None,
        }
    }
}

/// Decodes a Terminate ULPDU (queue 2, MSN 1), checking on the raw bytes
/// that the control word is in the RFC 5040 layout: layer in the high
/// nibble of its first byte.
fn terminate_of(ulpdu: &[u8]) -> SeenTerminate {
    let Message::Terminate { msn, terminate } = Message::parse(ulpdu, None).unwrap() else {
        panic!("expected a Terminate");
    };
    assert_eq!(msn, 1);
    let control = &ulpdu[ddp::UNTAGGED_HEADER_LEN..];
    assert_eq!(
        control[0],
        (terminate.code.layer as u8) << 4 | terminate.code.etype,
        "RFC 5040 layout"
    );
    assert_eq!(control[1], terminate.code.ecode);
    SeenTerminate {
        code: terminate.code,
        segment_len: terminate.segment_len,
        ddp_header: terminate.ddp_header.map(<[u8]>::to_vec),
        rdmap_header: terminate.rdmap_header.map(<[u8]>::to_vec),
    }
}

/// How a case starts and what the local consumer must see.
#[derive(Clone, Copy)]
struct Expect {
    /// CRC negotiated.
    crc: bool,
    /// The local QP is the responder (else the initiator).
    local_responds: bool,
    /// Receive 1's status (receive 2 is always cancelled).
    recv: WcStatus,
    /// The Read's status.
    read: WcStatus,
}

const CANCELLED: Expect = Expect {
    crc: false,
    local_responds: false,
    recv: WcStatus::Cancelled,
    read: WcStatus::Cancelled,
};

impl Expect {
    /// As `self`, with CRC negotiated.
    const fn crc(self) -> Self {
        Self { crc: true, ..self }
    }
    /// As `self`, the local QP responding when `local_responds`.
    const fn responding(self, local_responds: bool) -> Self {
        Self {
            local_responds,
            ..self
        }
    }
    /// As `self`, receive 1 completing with `recv`.
    const fn recv(self, recv: WcStatus) -> Self {
        Self { recv, ..self }
    }
    /// As `self`, the Read completing with `read`.
    const fn read(self, read: WcStatus) -> Self {
        Self { read, ..self }
    }
}

/// The local side's part after the connection died: its receives and its
/// Read complete as `expect` says (each exactly once); the QP is in
/// `Error`, the connection layer heard of it once (X2), and a later post
/// is accepted and completes cancelled (E5).
fn assert_local_failed(side: &Side, lost: &Lost, expect: Expect) {
    assert_eq!(
        summary(&take(&side.rcq, 2)),
        [
            (1, Opcode::Receive, expect.recv),
            (2, Opcode::Receive, WcStatus::Cancelled)
        ]
    );
    assert_eq!(
        summary(&take(&side.scq, 1)),
        [(10, Opcode::Read, expect.read)]
    );
    assert_eq!(side.qp.state(), QpState::Error);
    wait_until("the connection layer to hear of the loss", || {
        lost.count.load(Ordering::SeqCst) == 1
    });
    side.qp
        .post_send(20, Payload::Sges(&[]), WrFlags::empty(), None)
        .unwrap();
    let spare = side.buffer(8, 0, Access::LOCAL_WRITE);
    side.qp.post_receive(21, &[spare.sge(0, 8)]).unwrap();
    assert_eq!(
        summary(&take(&side.scq, 1)),
        [(20, Opcode::Send, WcStatus::Cancelled)]
    );
    assert_eq!(
        summary(&take(&side.rcq, 1)),
        [(21, Opcode::Receive, WcStatus::Cancelled)]
    );
    assert_eq!(lost.count.load(Ordering::SeqCst), 1, "reported once");
}

/// Runs one hostile case on a fresh QP of `bench`'s device: connect,
/// post the outstanding work, let `misbehave` act (it returns what the
/// local side must answer: `Some(terminate)`, checked here, or `None` when
/// it checked what came itself), then check the local outcome and release
/// everything.
fn run_case(
    bench: &Bench,
    expect: Expect,
    misbehave: impl FnOnce(&mut Hostile, &Side, &Outstanding) -> Option<SeenTerminate>,
) {
    let (side, lost) = bench.side();
    let (end, mut peer) = hostile_connection(&side, expect.crc, expect.local_responds);
    let work = outstanding(&side);
    let expected = misbehave(&mut peer, &side, &work);
    if let Some(expected) = expected {
        let ulpdus = peer.read_ulpdus();
        let (terminate, before) = ulpdus.split_last().expect("a Terminate");
        // A local initiator's Read Request went out first; a local
        // responder had nothing valid to answer yet.
        assert_eq!(before.len(), usize::from(!expect.local_responds));
        for ulpdu in before {
            assert_read_request(ulpdu);
        }
        assert_eq!(terminate_of(terminate), expected);
    }
    assert_local_failed(&side, &lost, expect);
    assert!(end.seen.is_quiet(), "nothing more for the connection layer");
    assert_eq!(work.sink.buffer.bytes(), &[0; 16]);
    drop(peer);
    assert_released(end, side);
    drop(work);
}

// ----- setup misbehaviour ----------------------------------------------------

/// Garbage where the MPA reply belongs: the setup fails (bad key), nothing
/// but the request was sent (no reply, no Terminate before MPA is up), the
/// stream closes, no link exists, and the QP is as before (N28): a post
/// fails inline (P7), and the same QP then connects to a well-behaved peer.
#[test]
fn test_garbage_instead_of_mpa_reply_rule_n28_p7() {
    Bench::run(|bench| {
        let (side, _lost) = bench.side();
        let (end, mut peer) = local_initiator(&side, &InitiatorConfig::default());
        peer.read_frame(FrameKind::Request);
        peer.send(&[0x5a; 40]);
        match end.seen.next() {
            Seen::Failed(ConnFailure::Setup(SetupError::Mpa(MpaError::BadKey))) => {}
            other => panic!("{other:?}"),
        }
        assert!(peer.read_to_end().is_empty(), "nothing after the request");
        assert!(end.seen.link.lock().unwrap().is_none(), "no link");
        assert_eq!(side.qp.state(), QpState::Idle);
        assert_eq!(
            side.qp
                .post_send(1, Payload::Sges(&[]), WrFlags::empty(), None),
            Err(PostError::ConnectionInvalid)
        );
        assert!(side.scq.drain().is_empty());
        drop(peer);
        // N28: the QP can connect again, to a well-behaved peer this time.
        let other = inline_device();
        let fresh = Side::new(&other, 0xF2E5, CONFIG);
        let conn_w = Arc::downgrade(&end.conn);
        let stream_w = Weak::clone(&end.stream);
        assert!(!end.glue.panicked());
        drop(end);
        wait_until("the failed attempt to be released", || {
            conn_w.upgrade().is_none() && stream_w.upgrade().is_none()
        });
        let (ea, eb) = connect_pair(&side, &fresh);
        let dst = fresh.buffer(16, 0, Access::LOCAL_WRITE);
        fresh.qp.post_receive(5, &[dst.sge(0, 16)]).unwrap();
        side.qp
            .post_send(6, Payload::Sges(&[]), WrFlags::empty(), None)
            .unwrap();
        assert_eq!(
            summary(&take(&fresh.rcq, 1)),
            [(5, Opcode::Receive, WcStatus::Success)]
        );
        side.qp.disconnect();
        fresh.qp.disconnect();
        assert_released(ea, side);
        assert_released(eb, fresh);
    });
}

/// Garbage where the MPA request belongs (random bytes; then a request
/// whose private data length lies): the responder's setup fails, it sends
/// nothing at all and closes the stream; the QP stays idle.
#[test]
fn test_garbage_instead_of_mpa_request_rule_n28() {
    Bench::run(|bench| {
        let mut lying = Vec::from(mpa::KEY_REQUEST);
        lying.extend_from_slice(&[mpa::FLAG_ENHANCED, 2, 0xff, 0xff]);
        for (garbage, error) in [
            (alloc::vec![0xa5_u8; 64], MpaError::BadKey),
            (lying, MpaError::PrivateDataTooLong(0xffff)),
        ] {
            let (side, _lost) = bench.side();
            let (end, mut peer) = local_responder(&side, false);
            peer.send(&garbage);
            match end.seen.next() {
                Seen::Failed(ConnFailure::Setup(SetupError::Mpa(e))) => assert_eq!(e, error),
                other => panic!("{other:?}"),
            }
            assert!(peer.read_to_end().is_empty(), "no reply, no Terminate");
            assert_eq!(side.qp.state(), QpState::Idle);
            assert!(end.seen.link.lock().unwrap().is_none());
            drop(peer);
            assert_released(end, side);
        }
    });
}

// ----- data path misbehaviour ------------------------------------------------

/// A truncated FPDU, then the peer's orderly close (FIN): the half FPDU is
/// never delivered; the local side takes the close as the peer leaving (X2:
/// the connection layer hears of it), sends no Terminate (the peer is
/// gone), closes its end, and every receive and the Read complete
/// cancelled (E5 for the later post).
#[test]
fn test_truncated_fpdu_then_close_rule_x2_e5() {
    Bench::run(|bench| {
        run_case(bench, CANCELLED, |peer, _, _| {
            let fpdu = peer.fpdu(send_segment(0, true, &[7; 32]));
            peer.send(&fpdu[..fpdu.len() / 2]);
            peer.socket.shutdown(std::net::Shutdown::Write).unwrap();
            let ulpdus = peer.read_ulpdus();
            assert_eq!(ulpdus.len(), 1, "the Read Request, and no Terminate");
            assert_read_request(&ulpdus[0]);
            None
        });
    });
}

/// CRC negotiated; a Send carries a bad CRC: an MPA CRC Terminate (layer
/// LLP, type 0, code 2) with no header copied; everything outstanding is
/// cancelled (E5; a receive a first, good segment went into as well: the
/// table of docs/iwarp.md). With the local QP initiating, the bad segment is
/// the second of the message; with it responding, the bad one is the very
/// first FPDU, before which the responder may send nothing (RFC 5044) — the
/// Terminate still goes out.
#[test]
fn test_bad_crc_rule_e5() {
    Bench::run(|bench| {
        for local_responds in [false, true] {
            run_case(
                bench,
                CANCELLED.crc().responding(local_responds),
                |peer, _, _| {
                    if !local_responds {
                        peer.send_message(send_segment(0, false, &[1; 16]));
                    }
                    let mo = if local_responds { 0 } else { 16 };
                    let mut fpdu = peer.fpdu(send_segment(mo, true, &[2; 16]));
                    let crc_at = fpdu.len() - 1;
                    fpdu[crc_at] ^= 0x01;
                    peer.send(&fpdu);
                    Some(SeenTerminate::headerless(TermCode::llp(LlpCode::Crc)))
                },
            );
        }
    });
}

/// Oversized input: an FPDU announcing more than the local side accepts
/// (the framing is lost: LLP code 3), and a Send larger than the receive it
/// lands in (DDP untagged "message too long"; the receive completes with
/// E7's status, the Terminate copies the segment's DDP header).
#[test]
fn test_oversized_fpdu_and_segment_rule_e7() {
    Bench::run(|bench| {
        for local_responds in [false, true] {
            run_case(bench, CANCELLED.responding(local_responds), |peer, _, _| {
                let announced = PARAMS.max_rx_ulpdu + 1;
                let mut bytes = Vec::from(announced.to_be_bytes());
                bytes.extend_from_slice(&[0; 64]);
                peer.send(&bytes);
                Some(SeenTerminate::headerless(TermCode::llp(
                    LlpCode::FpduFraming,
                )))
            });
        }
        run_case(
            bench,
            CANCELLED.recv(WcStatus::ReceiveTooSmall),
            |peer, _, _| {
                let ulpdu = peer.send_message(send_segment(0, true, &[3; 100]));
                Some(SeenTerminate {
                    code: TermCode::ddp(ddp_etype::UNTAGGED_BUFFER, ddp_code::U_TOO_LONG),
                    segment_len: Some(u16::try_from(ulpdu.len()).unwrap()),
                    ddp_header: Some(ulpdu[..ddp::UNTAGGED_HEADER_LEN].to_vec()),
                    rdmap_header: None,
                })
            },
        );
    });
}

/// Tagged Writes the local side must refuse (M34): an STag it never gave
/// out, a region of this QP without remote write, the well-behaved
/// connection's region (same device, other PD) and a range past the end of
/// a writable region. Each is a DDP tagged-buffer Terminate copying the
/// segment's header; no byte of any region changes.
#[test]
fn test_write_to_stag_not_owned_rule_m34() {
    Bench::run(|bench| {
        let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
        let theirs = bench.good.buffer(64, 0xee, rw);
        for case in ["unknown", "read only", "other pd", "bounds"] {
            run_case(bench, CANCELLED, |peer, side, _| {
                let own = side.buffer(64, 0xcc, rw);
                let ro = side.buffer(64, 0xcc, Access::LOCAL_WRITE | Access::REMOTE_READ);
                let (stag, to, code) = match case {
                    "unknown" => (0x7777_7700, 0, ddp_code::T_INVALID_STAG),
                    "read only" => (ro.rkey(), ro.raddr(0), ddp_code::T_INVALID_STAG),
                    "other pd" => (theirs.rkey(), theirs.raddr(0), ddp_code::T_INVALID_STAG),
                    _ => (own.rkey(), own.raddr(32), ddp_code::T_BASE_BOUNDS),
                };
                let ulpdu = peer.send_message(Message::Write {
                    stag,
                    to,
                    last: true,
                    payload: &[0x11; 48],
                });
                let expected = SeenTerminate {
                    code: TermCode::ddp(ddp_etype::TAGGED_BUFFER, code),
                    segment_len: Some(u16::try_from(ulpdu.len()).unwrap()),
                    ddp_header: Some(ulpdu[..ddp::TAGGED_HEADER_LEN].to_vec()),
                    rdmap_header: None,
                };
                // The Terminate is out before the regions are looked at again.
                let ulpdus = peer.read_ulpdus();
                assert_eq!(ulpdus.len(), 2, "{case}");
                assert_read_request(&ulpdus[0]);
                assert_eq!(terminate_of(&ulpdus[1]), expected, "{case}");
                assert_eq!(own.buffer.bytes(), &[0xcc; 64], "{case}");
                assert_eq!(ro.buffer.bytes(), &[0xcc; 64], "{case}");
                None
            });
            assert_eq!(theirs.buffer.bytes(), &[0xee; 64], "{case}");
        }
    });
}

/// Read Requests the local side must refuse (M34; the status the peer's
/// Read gets from the code is P20's): beyond the end of the region, from a
/// region without remote read, and under an unknown STag. Each is an RDMAP
/// remote-protection Terminate copying the untagged DDP header and the
/// request's 28 bytes; no Read Response goes out.
#[test]
fn test_read_request_beyond_region_rule_m34_p20() {
    Bench::run(|bench| {
        for (case, ecode, status) in [
            (
                "bounds",
                rdmap_code::BASE_BOUNDS,
                WcStatus::RemoteOperationError,
            ),
            (
                "rights",
                rdmap_code::ACCESS_RIGHTS,
                WcStatus::RemoteAccessError,
            ),
            (
                "unknown",
                rdmap_code::INVALID_STAG,
                WcStatus::RemoteAccessError,
            ),
        ] {
            run_case(bench, CANCELLED, |peer, side, _| {
                let readable = side.buffer(64, 0x3c, Access::LOCAL_WRITE | Access::REMOTE_READ);
                let write_only = side.buffer(64, 0x3c, Access::LOCAL_WRITE | Access::REMOTE_WRITE);
                let (source_stag, source_to, size) = match case {
                    "bounds" => (readable.rkey(), readable.raddr(32), 64),
                    "rights" => (write_only.rkey(), write_only.raddr(0), 16),
                    _ => (0x0bad_0000, 0, 16),
                };
                let ulpdu = peer.send_message(Message::ReadRequest {
                    msn: 1,
                    request: ReadRequest {
                        sink_stag: 0x5151_5100,
                        sink_to: 0x2000,
                        size,
                        source_stag,
                        source_to,
                    },
                });
                let code = TermCode::rdmap(rdmap_etype::REMOTE_PROTECTION, ecode);
                assert_eq!(code.completion_status(), status, "{case}");
                let ulpdus = peer.read_ulpdus();
                assert_eq!(ulpdus.len(), 2, "no Read Response: {case}");
                assert_read_request(&ulpdus[0]);
                assert_eq!(
                    terminate_of(&ulpdus[1]),
                    SeenTerminate {
                        code,
                        segment_len: Some(u16::try_from(ulpdu.len()).unwrap()),
                        ddp_header: Some(ulpdu[..ddp::UNTAGGED_HEADER_LEN].to_vec()),
                        rdmap_header: Some(ulpdu[ddp::UNTAGGED_HEADER_LEN..].to_vec()),
                    },
                    "{case}"
                );
                assert_eq!(code.layer, Layer::Rdmap);
                None
            });
        }
    });
}

/// The first segment of a two-segment Send, then the peer's orderly close
/// (FIN): the receive it went into completes cancelled (its bytes were
/// placed, the message never finished), the local side sends no Terminate
/// and closes (X2: the connection layer hears the peer left).
#[test]
fn test_peer_close_mid_message_rule_x2() {
    Bench::run(|bench| {
        run_case(bench, CANCELLED, |peer, _, work| {
            peer.send_message(send_segment(0, false, &[9; 32]));
            peer.socket.shutdown(std::net::Shutdown::Write).unwrap();
            let ulpdus = peer.read_ulpdus();
            assert_eq!(ulpdus.len(), 1, "the Read Request, and no Terminate");
            assert_read_request(&ulpdus[0]);
            assert_eq!(&work.recv.buffer.bytes()[..32], &[9; 32]);
            None
        });
    });
}

/// The first segment of a two-segment Send, then a reset (the test closes
/// its socket with the local side's Read Request unread, which makes the
/// kernel send an RST): the connection fails (E5; counted as a connection
/// error), the receive in progress and everything else complete cancelled.
#[test]
fn test_peer_reset_mid_message_rule_e5() {
    Bench::run(|bench| {
        let errors = || {
            bench
                .device
                .counters
                .connection_error
                .load(Ordering::SeqCst)
        };
        let before = errors();
        let frames = || bench.device.counters.rdma_in_frames.load(Ordering::SeqCst);
        let (side, lost) = bench.side();
        let (end, mut peer) = hostile_connection(&side, false, false);
        let work = outstanding(&side);
        peer.await_unread();
        let seen = frames();
        peer.send_message(send_segment(0, false, &[4; 32]));
        // The segment is read by the local side before the reset can overtake
        // it in the socket.
        wait_until("the first segment to arrive", || frames() > seen);
        let Hostile { socket, .. } = peer;
        drop(socket);
        assert_local_failed(&side, &lost, CANCELLED);
        assert_eq!(&work.recv.buffer.bytes()[..32], &[4; 32]);
        assert_eq!(errors(), before + 1);
        assert!(end.seen.is_quiet());
        assert_released(end, side);
        drop(work);
    });
}

/// The peer sends a Terminate naming the local Read (its Read Request
/// header copied), in the RFC layout and in siw's: the Read fails with the
/// code's status (an invalid STag: `RemoteAccessError`, as the local engine
/// reports M34), everything else is cancelled (E5), and the local side
/// answers nothing (a Terminate is never answered) but closes the stream.
#[test]
fn test_terminate_from_peer_rule_e5_m34() {
    Bench::run(|bench| {
        for layout in [TermLayout::Rfc, TermLayout::Siw] {
            run_case(
                bench,
                CANCELLED.read(WcStatus::RemoteAccessError),
                |peer, _, _| {
                    let request = peer.read_request();
                    let mut terminate = Terminate::new(TermCode::rdmap(
                        rdmap_etype::REMOTE_PROTECTION,
                        rdmap_code::INVALID_STAG,
                    ));
                    terminate.segment_len = Some(u16::try_from(request.len()).unwrap());
                    terminate.ddp_header = Some(&request[..ddp::UNTAGGED_HEADER_LEN]);
                    terminate.rdmap_header = Some(&request[ddp::UNTAGGED_HEADER_LEN..]);
                    let message = Message::Terminate { msn: 1, terminate };
                    let mut ulpdu = alloc::vec![0_u8; message.ulpdu_len()];
                    let at = message.ddp_header().write(&mut ulpdu).unwrap();
                    terminate.write(&mut ulpdu[at..], layout).unwrap();
                    let mut fpdu = alloc::vec![0_u8; mpa::fpdu_len(ulpdu.len())];
                    let n = mpa::write_fpdu(&mut fpdu, &ulpdu, peer.crc).unwrap();
                    peer.send(&fpdu[..n]);
                    assert!(peer.read_ulpdus().is_empty(), "no answer: {layout:?}");
                    None
                },
            );
        }
    });
}

/// The peer closes (FIN) or resets the stream in the middle of the MPA
/// reply: the attempt fails as closed (abortive for the reset), the QP is
/// untouched (N28) and everything is released.
#[test]
fn test_peer_closes_during_mpa_exchange_rule_n28() {
    Bench::run(|bench| {
        for abortive in [false, true] {
            let (side, _lost) = bench.side();
            let (end, mut peer) = local_initiator(&side, &InitiatorConfig::default());
            if abortive {
                // Left unread: closing then resets the connection.
                peer.await_unread();
            } else {
                peer.read_frame(FrameKind::Request);
            }
            peer.send(&mpa::KEY_REPLY[..10]);
            if abortive {
                drop(peer);
            } else {
                peer.socket.shutdown(std::net::Shutdown::Write).unwrap();
                assert!(peer.read_to_end().is_empty());
                drop(peer);
            }
            match end.seen.next() {
                Seen::Failed(ConnFailure::Closed { abortive: a }) => assert_eq!(a, abortive),
                other => panic!("{other:?}"),
            }
            assert_eq!(side.qp.state(), QpState::Idle);
            assert!(end.seen.link.lock().unwrap().is_none());
            assert_released(end, side);
        }
    });
}

/// The reply and a bad first FPDU (a Write to an STag never given out) in
/// one segment: the link gets the FPDU with the setup's leftover bytes. The
/// connection layer must hear of the connection (N13) before it hears of
/// its loss (X2) — it used to be told of the loss first, while the FPDU was
/// handled before `established` was reported. Receives posted before the
/// connection (P8) are cancelled, the Terminate goes out.
#[test]
fn test_reply_and_bad_fpdu_in_one_segment_rule_n13_x2() {
    Bench::run(|bench| {
        let (side, lost) = bench.side();
        let recv = side.buffer(128, 0, Access::LOCAL_WRITE);
        side.qp.post_receive(1, &[recv.sge(0, 64)]).unwrap();
        side.qp.post_receive(2, &[recv.sge(64, 64)]).unwrap();
        let (end, mut peer) = local_initiator(&side, &InitiatorConfig::default());
        let mut bytes = peer.accepting_reply();
        let write = Message::Write {
            stag: 0x7777_7700,
            to: 0,
            last: true,
            payload: &[1; 8],
        };
        bytes.extend(peer.fpdu(write));
        peer.send(&bytes);
        assert!(matches!(end.seen.next(), Seen::Up));
        let ulpdus = peer.read_ulpdus();
        assert_eq!(ulpdus.len(), 1);
        let mut ulpdu = alloc::vec![0_u8; write.ulpdu_len()];
        write.write_ulpdu(&mut ulpdu).unwrap();
        assert_eq!(
            terminate_of(&ulpdus[0]),
            SeenTerminate {
                code: TermCode::ddp(ddp_etype::TAGGED_BUFFER, ddp_code::T_INVALID_STAG),
                segment_len: Some(u16::try_from(ulpdu.len()).unwrap()),
                ddp_header: Some(ulpdu[..ddp::TAGGED_HEADER_LEN].to_vec()),
                rdmap_header: None,
            }
        );
        assert_eq!(
            summary(&take(&side.rcq, 2)),
            [
                (1, Opcode::Receive, WcStatus::Cancelled),
                (2, Opcode::Receive, WcStatus::Cancelled)
            ]
        );
        assert_eq!(side.qp.state(), QpState::Error);
        wait_until("the loss to be reported", || {
            lost.count.load(Ordering::SeqCst) == 1
        });
        let up_at = end.seen.up_at.load(Ordering::SeqCst);
        assert!(
            up_at < lost.at.load(Ordering::SeqCst),
            "established after connection_lost"
        );
        drop(peer);
        assert_released(end, side);
        drop(recv);
    });
}

/// A Send with Invalidate naming an STag the connection does not own: the
/// well-behaved connection's region (same device, other PD) or a plain
/// region of its own PD (only fast-registered regions and windows can be
/// invalidated, M22). The receive completes `InvalidRequest` (M24, as the
/// local engine), the Terminate is RDMAP remote operation "cannot
/// invalidate" with the segment's header, and the region is still valid.
#[test]
fn test_send_invalidate_of_stag_not_owned_rule_m24() {
    Bench::run(|bench| {
        let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
        let theirs = bench.good.buffer(64, 0, rw);
        for other_pd in [true, false] {
            run_case(
                bench,
                CANCELLED.recv(WcStatus::InvalidRequest),
                |peer, side, _| {
                    let own = side.buffer(64, 0, rw);
                    let (pd, key) = if other_pd {
                        (&bench.good.pd, theirs.rkey())
                    } else {
                        (&side.pd, own.rkey())
                    };
                    let ulpdu = peer.send_message(Message::Send {
                        header: SendHeader {
                            invalidate: Some(key),
                            ..SendHeader::whole(1)
                        },
                        payload: &[6; 8],
                    });
                    let ulpdus = peer.read_ulpdus();
                    assert_eq!(ulpdus.len(), 2);
                    assert_read_request(&ulpdus[0]);
                    assert_eq!(
                        terminate_of(&ulpdus[1]),
                        SeenTerminate {
                            code: TermCode::rdmap(
                                rdmap_etype::REMOTE_OPERATION,
                                rdmap_code::CANNOT_INVALIDATE
                            ),
                            segment_len: Some(u16::try_from(ulpdu.len()).unwrap()),
                            ddp_header: Some(ulpdu[..ddp::UNTAGGED_HEADER_LEN].to_vec()),
                            rdmap_header: None,
                        }
                    );
                    let addr = if other_pd {
                        theirs.raddr(0)
                    } else {
                        own.raddr(0)
                    };
                    let still =
                        bench
                            .device
                            .resolve_remote(pd, 0, key, addr, 64, Access::REMOTE_WRITE);
                    assert!(still.is_ok(), "the region is still valid");
                    None
                },
            );
        }
    });
}

/// Garbage after the MPA exchange, then FIN: for each seed either raw
/// random bytes or random ULPDUs in correct MPA framing (so they reach the
/// DDP and RDMAP parsers). The local side always ends the connection: a
/// Terminate with a code the RFCs define when the garbage made up a whole
/// FPDU, else just the close; nothing panics, receives and the Read are
/// cancelled (E5), the other connection is untouched, nothing leaks.
#[test]
fn test_garbage_fpdus_after_setup_rule_e5() {
    Bench::run(|bench| {
        let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut terminated = 0;
        for seed in 0..24_u64 {
            let len = 1 + usize::try_from(next() % 120).unwrap();
            let random: Vec<u8> = (0..len).map(|_| next().to_le_bytes()[0]).collect();
            run_case(bench, CANCELLED, |peer, _, _| {
                let bytes = if seed % 2 == 0 {
                    random
                } else {
                    let mut fpdu = alloc::vec![0_u8; mpa::fpdu_len(random.len())];
                    let n = mpa::write_fpdu(&mut fpdu, &random, false).unwrap();
                    fpdu.truncate(n);
                    fpdu
                };
                peer.send(&bytes);
                peer.socket.shutdown(std::net::Shutdown::Write).unwrap();
                let ulpdus = peer.read_ulpdus();
                assert_read_request(&ulpdus[0]);
                match &ulpdus[1..] {
                    [] => assert_eq!(seed % 2, 0, "framed garbage is answered"),
                    [terminate] => {
                        let code = terminate_of(terminate).code;
                        assert!(code.is_known(), "seed {seed}: {code}");
                        assert!(!code.completion_status().is_success());
                        terminated += 1;
                    }
                    more => panic!("seed {seed}: {} FPDUs after the Read Request", more.len()),
                }
                None
            });
        }
        assert!(terminated >= 12, "every framed garbage ULPDU is refused");
    });
}

/// A Read Response the local Read did not ask for: another sink STag, or
/// more bytes than the Read's length. The local side refuses it with a DDP
/// tagged Terminate copying the segment's header and places nothing; the
/// Read fails `RemoteOperationError` (it used to complete `Cancelled`, so no
/// request told the consumer why the connection ended, E5).
#[test]
fn test_bogus_read_response_rule_e5() {
    Bench::run(|bench| {
        for case in ["stag", "length"] {
            run_case(
                bench,
                CANCELLED.read(WcStatus::RemoteOperationError),
                |peer, _, _| {
                    let request = peer.read_request();
                    let Message::ReadRequest { request, .. } =
                        Message::parse(&request, None).unwrap()
                    else {
                        unreachable!()
                    };
                    let (stag, len, code) = match case {
                        "stag" => (request.sink_stag ^ 0x100, 16, ddp_code::T_INVALID_STAG),
                        _ => (request.sink_stag, 32, ddp_code::T_BASE_BOUNDS),
                    };
                    let ulpdu = peer.send_message(Message::ReadResponse {
                        stag,
                        to: request.sink_to,
                        last: true,
                        payload: &alloc::vec![0x77; len],
                    });
                    let ulpdus = peer.read_ulpdus();
                    assert_eq!(ulpdus.len(), 1, "{case}");
                    assert_eq!(
                        terminate_of(&ulpdus[0]),
                        SeenTerminate {
                            code: TermCode::ddp(ddp_etype::TAGGED_BUFFER, code),
                            segment_len: Some(u16::try_from(ulpdu.len()).unwrap()),
                            ddp_header: Some(ulpdu[..ddp::TAGGED_HEADER_LEN].to_vec()),
                            rdmap_header: None,
                        },
                        "{case}"
                    );
                    None
                },
            );
        }
    });
}
