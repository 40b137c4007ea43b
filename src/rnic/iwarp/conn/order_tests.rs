//! What a `Conn` hands its link once the link starts on a thread that is
//! not the stream's reader: the initiator's `complete` (NDK's
//! CompleteConnect) runs on the consumer's thread. What the stream
//! delivers while the connection layer is being told (`established`) waits
//! until it has been told, then reaches the link in order (N13: a failure
//! the peer's first FPDUs cause follows the establishment; X2: its
//! disconnect indication is not lost). Driven by hand over an in-memory
//! stream: no socket, no timing.

use alloc::vec::Vec;
use std::sync::Mutex;

use super::{Conn, ConnEvents, ConnFailure, ConnParts, Finish, LinkParams};
use crate::kernel::sync::{Arc, Weak};
use crate::rnic::iwarp::link::{ByteStream, Link};
use crate::rnic::iwarp::mpa::{self, FrameKind, MpaFrame};
use crate::rnic::iwarp::rdmap::{Message, SendHeader};
use crate::rnic::iwarp::setup::{Established, InitiatorConfig, PeerRequest, SetupError};
use crate::rnic::iwarp::terminate::{TermCode, Terminate, rdmap_code, rdmap_etype};
use crate::rnic::qp::QpState;
use crate::rnic::testing::{CONFIG, Side, inline_device};
use crate::rnic::types::{Access, WcStatus};

/// The local side's output, kept, and how the stream was closed.
#[derive(Default)]
struct Output(Mutex<Vec<u8>>, Mutex<Option<bool>>);

impl ByteStream for Output {
    fn send(&self, bytes: &[u8]) -> usize {
        self.0.lock().unwrap().extend_from_slice(bytes);
        bytes.len()
    }
    fn close(&self, abortive: bool) {
        self.1.lock().unwrap().get_or_insert(abortive);
    }
}

/// The connection layer: when told of the establishment, it first makes
/// the stream deliver `arriving` (the peer's bytes coming in meanwhile) and
/// then, when `close`, the peer's orderly close, then notes the QP's state.
struct Layer {
    conn: Mutex<Option<Weak<Conn>>>,
    side: Arc<Side>,
    arriving: Vec<u8>,
    close: bool,
    replied: Mutex<bool>,
    state_when_told: Mutex<Option<QpState>>,
    failed: Mutex<Option<ConnFailure>>,
    output: Arc<Output>,
}

impl ConnEvents for Layer {
    fn request(&self, _request: &PeerRequest) {}
    fn replied(&self, _established: &Established) {
        *self.replied.lock().unwrap() = true;
    }
    fn established(&self, _link: &Arc<Link>, _private_data: &[u8]) {
        let conn = self.conn.lock().unwrap().as_ref().and_then(Weak::upgrade);
        if let Some(conn) = conn {
            conn.received(&self.arriving, 0);
            if self.close {
                conn.closed(false);
            }
        }
        *self.state_when_told.lock().unwrap() = Some(self.side.qp.state());
    }
    fn failed(&self, failure: ConnFailure) {
        *self.failed.lock().unwrap() = Some(failure);
    }
}

/// One FPDU of `message` (no CRC).
fn fpdu(message: Message<'_>) -> Vec<u8> {
    let mut buf = alloc::vec![0_u8; mpa::fpdu_len(message.ulpdu_len())];
    let n = message.write_fpdu(&mut buf, false).unwrap();
    buf.truncate(n);
    buf
}

/// An initiator on `side` (started with `Finish::AtComplete`) whose
/// responder accepts; then CompleteConnect, during whose report the
/// stream delivers `arriving` (and the peer's close when `close`). The
/// connection layer, as it was when it returned.
fn complete_while_arriving(side: &Arc<Side>, arriving: Vec<u8>, close: bool) -> Arc<Layer> {
    let (conn, layer) = replied(side, arriving, close);
    // CompleteConnect: the link starts, the layer is told.
    conn.complete().unwrap();
    assert!(
        layer.failed.lock().unwrap().is_none(),
        "the setup succeeded"
    );
    layer
}

/// An initiator on `side` (started with `Finish::AtComplete`) whose
/// responder accepted: its Connect completed, CompleteConnect not called
/// yet. The layer delivers `arriving` (and the close when `close`) once
/// told of the establishment.
fn replied(side: &Arc<Side>, arriving: Vec<u8>, close: bool) -> (Arc<Conn>, Arc<Layer>) {
    let output = Arc::new(Output::default());
    let layer = Arc::new(Layer {
        conn: Mutex::new(None),
        side: Arc::clone(side),
        arriving,
        close,
        replied: Mutex::new(false),
        state_when_told: Mutex::new(None),
        failed: Mutex::new(None),
        output: Arc::clone(&output),
    });
    let conn = accepted_initiator(
        side,
        Arc::clone(&output) as Arc<dyn ByteStream>,
        Arc::clone(&layer) as Arc<dyn ConnEvents>,
        || core::mem::take(&mut *output.0.lock().unwrap()),
    );
    *layer.conn.lock().unwrap() = Some(Arc::downgrade(&conn));
    assert!(
        *layer.replied.lock().unwrap(),
        "Connect completes at the reply"
    );
    (conn, layer)
}

/// An initiator on `side` over `stream` telling `events`, started with
/// `Finish::AtComplete`; the responder accepts (no CRC, IRD = ORD = 1) the
/// request `sent` takes from what the stream was given.
fn accepted_initiator(
    side: &Side,
    stream: Arc<dyn ByteStream>,
    events: Arc<dyn ConnEvents>,
    sent: impl FnOnce() -> Vec<u8>,
) -> Arc<Conn> {
    let parts = ConnParts {
        stream,
        params: LinkParams {
            mulpdu: 1000,
            max_rx_ulpdu: u16::MAX,
            default_ird_ord: (1, 1),
        },
        events,
        now: 0,
    };
    let config = InitiatorConfig::default();
    let conn = Conn::initiate(&side.qp, parts, &config, b"", Finish::AtComplete).unwrap();
    let request = sent();
    let (request, _) = MpaFrame::parse(&request, FrameKind::Request).unwrap();
    let mut reply = alloc::vec![0_u8; mpa::FRAME_HEADER_LEN + mpa::ENHANCED_LEN];
    let n = MpaFrame::accept(&request, false, 1, 1, &[])
        .unwrap()
        .write(&mut reply)
        .unwrap();
    conn.received(&reply[..n], 0);
    conn
}

/// X2, N13: the responder's Terminate, arriving while the initiator's
/// connection layer is being told of the establishment, fails the QP only
/// after it has been told. (The link used to take it at once: the QP was
/// in `Error` inside `established`, before the connector was
/// `Established`, and the connection layer then dropped the loss — no
/// disconnect indication would ever come.)
#[test]
fn test_bytes_arriving_while_established_is_reported_wait_for_it_rule_n13_x2() {
    let side = Arc::new(Side::new(&inline_device(), 0xA, CONFIG));
    let code = TermCode::rdmap(rdmap_etype::REMOTE_OPERATION, rdmap_code::UNSPECIFIED);
    let terminate = fpdu(Message::Terminate {
        msn: 1,
        terminate: Terminate::new(code),
    });
    let layer = complete_while_arriving(&side, terminate, false);
    assert_eq!(
        *layer.state_when_told.lock().unwrap(),
        Some(QpState::Connected),
        "the Terminate reached the link before the establishment was reported"
    );
    // Then the Terminate: the QP leaves the connection.
    assert_ne!(side.qp.state(), QpState::Connected);
}

/// N13, X2: the responder's Send and then its orderly close, both arriving
/// while the initiator's connection layer is being told, reach the link
/// afterwards and in that order: the receive takes the Send's bytes, then
/// the QP leaves the connection.
#[test]
fn test_a_send_and_the_close_arriving_while_established_is_reported_keep_their_order_rule_x2() {
    let side = Arc::new(Side::new(&inline_device(), 0xA, CONFIG));
    let sink = side.buffer(64, 0, Access::LOCAL_WRITE);
    side.qp.post_receive(7, &[sink.sge(0, 64)]).unwrap();
    let payload = *b"before the close";
    let send = fpdu(Message::Send {
        header: SendHeader::whole(1),
        payload: &payload,
    });
    let layer = complete_while_arriving(&side, send, true);
    assert_eq!(
        *layer.state_when_told.lock().unwrap(),
        Some(QpState::Connected)
    );
    let done = side.rcq.drain();
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(
        (done[0].request_context, done[0].status, done[0].bytes),
        (7, WcStatus::Success, payload.len() as u32)
    );
    assert_eq!(&sink.buffer.bytes()[..payload.len()], &payload);
    assert_ne!(side.qp.state(), QpState::Connected, "then the close");
}

/// Issue 8 (a hostile peer), N13: after its reply the responder streams
/// bytes while the initiator's consumer has not called CompleteConnect.
/// Up to `EARLY_MAX` bytes are kept for the link; one more ends the attempt
/// (the stream reset, `Flooded`) instead of growing the kept bytes without
/// bound, and CompleteConnect then finds nothing to complete.
#[test]
fn test_a_flood_before_complete_connect_ends_the_attempt_rule_n13() {
    let side = Arc::new(Side::new(&inline_device(), 0xA, CONFIG));
    let (conn, layer) = replied(&side, Vec::new(), false);
    let chunk = alloc::vec![0x5A_u8; 64 * 1024];
    for _ in 0..super::EARLY_MAX / chunk.len() {
        conn.received(&chunk, 0);
    }
    assert!(
        layer.failed.lock().unwrap().is_none(),
        "EARLY_MAX bytes are kept"
    );
    assert_eq!(*layer.output.1.lock().unwrap(), None, "the stream is open");
    conn.received(&[0x5A], 0);
    assert_eq!(
        *layer.failed.lock().unwrap(),
        Some(ConnFailure::Flooded),
        "one byte more ends the attempt"
    );
    assert_eq!(
        *layer.output.1.lock().unwrap(),
        Some(true),
        "the stream is reset"
    );
    assert_eq!(conn.complete(), Err(SetupError::WrongState));
    assert!(conn.link().is_none(), "no link started");
    assert_eq!(side.qp.state(), QpState::Idle, "the QP was never connected");
}

/// Issue 8 (a hostile peer), X2: while the initiator's connection layer is
/// being told the link runs, the peer sends more than `LINKING_MAX` bytes
/// at once. They are not kept: the stream is reset, and the link hears the
/// abortive close (the QP leaves the connection, X2) without any of them.
#[test]
fn test_a_flood_while_established_is_reported_resets_the_stream_rule_x2() {
    let side = Arc::new(Side::new(&inline_device(), 0xA, CONFIG));
    let sink = side.buffer(64, 0, Access::LOCAL_WRITE);
    side.qp.post_receive(7, &[sink.sge(0, 64)]).unwrap();
    let flood = alloc::vec![0_u8; super::LINKING_MAX + 1];
    let layer = complete_while_arriving(&side, flood, false);
    assert_eq!(
        *layer.state_when_told.lock().unwrap(),
        Some(QpState::Connected),
        "told first"
    );
    assert_eq!(
        *layer.output.1.lock().unwrap(),
        Some(true),
        "the stream is reset"
    );
    assert_ne!(side.qp.state(), QpState::Connected, "then the close");
    let done = side.rcq.drain();
    assert!(
        done.iter().all(|c| c.status != WcStatus::Success),
        "none of the flood reached the receive: {done:?}"
    );
}

/// A stream that refuses its first FPDU send and, on every send, asks its
/// connection for its link (`Conn::link`, which takes the connection's
/// lock): what a platform does whose send completes inline and calls back.
#[derive(Default)]
struct Reentrant {
    conn: Mutex<Option<Weak<Conn>>>,
    refused: std::sync::atomic::AtomicBool,
    sent: Mutex<Vec<u8>>,
}

impl ByteStream for Reentrant {
    fn send(&self, bytes: &[u8]) -> usize {
        let conn = self.conn.lock().unwrap().as_ref().and_then(Weak::upgrade);
        if let Some(conn) = conn {
            let _ = conn.link();
            if !self.refused.swap(true, std::sync::atomic::Ordering::SeqCst) {
                return 0;
            }
        }
        self.sent.lock().unwrap().extend_from_slice(bytes);
        bytes.len()
    }
    fn close(&self, _abortive: bool) {}
}

/// Posts a Send when told of the establishment (the stream refuses it),
/// then has the stream report room while still being told (`Linking`).
struct SendsWhenUp {
    conn: Mutex<Option<Weak<Conn>>>,
    side: Arc<Side>,
    source: crate::rnic::testing::Registered,
}

impl ConnEvents for SendsWhenUp {
    fn request(&self, _request: &PeerRequest) {}
    fn established(&self, _link: &Arc<Link>, _private_data: &[u8]) {
        let sge = self.source.sge(0, 8);
        self.side
            .qp
            .post_send(
                5,
                crate::rnic::qp::Payload::Sges(&[sge]),
                crate::rnic::types::WrFlags::empty(),
                None,
            )
            .unwrap();
        let conn = self.conn.lock().unwrap().as_ref().and_then(Weak::upgrade);
        if let Some(conn) = conn {
            conn.writable();
        }
    }
    fn failed(&self, _failure: ConnFailure) {}
}

/// The lock discipline (no call out of the connection with its lock held):
/// the stream reporting room while the connection layer is being told of
/// the establishment (`Linking`) hands it to the link with the connection's
/// lock released. It called the link, and so the stream, under that lock: a
/// stream whose send completes inline and calls back into the connection,
/// as WSK's may in the kernel, deadlocked. Run on a thread of its own and
/// waited for, so that a regression fails instead of hanging.
#[test]
fn test_room_while_established_is_reported_reaches_the_link_unlocked() {
    let side = Arc::new(Side::new(&inline_device(), 0xA, CONFIG));
    let source = side.pattern(8, 1, Access::empty());
    let stream = Arc::new(Reentrant::default());
    let events = Arc::new(SendsWhenUp {
        conn: Mutex::new(None),
        side: Arc::clone(&side),
        source,
    });
    let conn = accepted_initiator(
        &side,
        Arc::clone(&stream) as Arc<dyn ByteStream>,
        Arc::clone(&events) as Arc<dyn ConnEvents>,
        || core::mem::take(&mut *stream.sent.lock().unwrap()),
    );
    *events.conn.lock().unwrap() = Some(Arc::downgrade(&conn));
    *stream.conn.lock().unwrap() = Some(Arc::downgrade(&conn));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let completing = {
        let (conn, done) = (Arc::clone(&conn), Arc::clone(&done));
        std::thread::spawn(move || {
            conn.complete().unwrap();
            done.store(true, std::sync::atomic::Ordering::SeqCst);
        })
    };
    crate::kernel::testing::wait_until("CompleteConnect returns", || {
        done.load(std::sync::atomic::Ordering::SeqCst)
    });
    completing.join().unwrap();
    assert!(
        !stream.sent.lock().unwrap().is_empty(),
        "the Send went out once the stream had room"
    );
    assert_eq!(side.qp.state(), QpState::Connected);
}
