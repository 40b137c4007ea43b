//! The data path over a real TCP connection on 127.0.0.1: the MPA exchange
//! (`iwarp::setup`) on the sockets, then two links over
//! `kernel::net::TcpByteStream`, carrying a Send, a Write and Reads, and a
//! disconnect.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::tests::send_pattern;
use super::{ByteStream, Link, LinkConfig, connect};
use crate::kernel::net::{StreamEvents, TcpByteStream};
use crate::kernel::sync::Arc;
use crate::rnic::device::EngineMode;
use crate::rnic::iwarp::mpa;
use crate::rnic::iwarp::setup::{
    Established, Event, Initiator, InitiatorConfig, Responder, ResponderConfig,
};
use crate::rnic::iwarp::tcp_testing::{completions, wait_state};
use crate::rnic::qp::QpState;
use crate::rnic::testing::{Pair, Side};
use crate::rnic::types::{Access, Opcode, WcStatus, WrFlags};

/// Routes a socket's events to its link.
#[derive(Default)]
struct Glue(OnceLock<Arc<Link>>);

impl Glue {
    /// Runs `f` on the link, once there is one (events before are dropped).
    fn to_link(&self, f: impl FnOnce(&Link)) {
        if let Some(link) = self.0.get() {
            f(link);
        }
    }
}

impl StreamEvents for Glue {
    fn received(&self, bytes: &[u8]) {
        self.to_link(|link| link.receive(bytes));
    }
    fn writable(&self) {
        self.to_link(Link::writable);
    }
    fn closed(&self, abortive: bool) {
        self.to_link(|link| link.peer_closed(abortive));
    }
}

fn now_ms(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_millis()).unwrap()
}

/// Runs the initiator's side of the MPA exchange on a blocking socket.
fn initiate(mut socket: &TcpStream, crc: bool) -> Established {
    let start = Instant::now();
    let config = InitiatorConfig {
        crc,
        ird: 4,
        ord: 4,
        ..InitiatorConfig::default()
    };
    let mut machine = Initiator::new(&config, b"hello", 0).unwrap();
    let mut buf = [0_u8; 2048];
    for _ in 0..100 {
        let out = machine.output().to_vec();
        socket.write_all(&out).unwrap();
        machine.advance_output(out.len());
        let n = socket.read(&mut buf).unwrap();
        assert!(n > 0, "responder closed during setup");
        match machine.receive(&buf[..n], now_ms(start)).unwrap() {
            Some(Event::Established(established)) => {
                let out = machine.output().to_vec();
                socket.write_all(&out).unwrap();
                return established;
            }
            Some(other) => panic!("unexpected {other:?}"),
            None => {}
        }
    }
    panic!("setup did not finish");
}

/// Runs the responder's side, accepting with IRD = ORD = 4.
fn respond(mut socket: &TcpStream) -> Established {
    let start = Instant::now();
    let mut machine = Responder::new(ResponderConfig::default(), 0);
    let mut buf = [0_u8; 2048];
    for _ in 0..100 {
        let n = socket.read(&mut buf).unwrap();
        assert!(n > 0, "initiator closed during setup");
        let mut event = machine.receive(&buf[..n], now_ms(start)).unwrap();
        if let Some(Event::Request(request)) = &event {
            assert_eq!(request.private_data, b"hello");
            event = machine.accept(4, 4, b"welcome", now_ms(start)).unwrap();
        }
        let out = machine.output().to_vec();
        socket.write_all(&out).unwrap();
        machine.advance_output(out.len());
        if let Some(Event::Established(established)) = event {
            return established;
        }
    }
    panic!("setup did not finish");
}

/// One side: QP, link and socket stream, started.
fn attach(side: &Side, socket: TcpStream, established: &Established, initiator: bool) -> Arc<Link> {
    socket
        .set_read_timeout(None)
        .expect("blocking reads for the reader thread");
    let stream = TcpByteStream::new(socket, 16 * 1024).unwrap();
    let config = LinkConfig::established(
        established,
        initiator,
        u16::try_from(mpa::mulpdu(1460)).unwrap(),
        u16::MAX,
        (4, 4),
    );
    let link = connect(&side.qp, Arc::clone(&stream) as Arc<dyn ByteStream>, config).unwrap();
    let glue = Arc::new(Glue::default());
    glue.0.set(Arc::clone(&link)).ok().unwrap();
    // Bytes that followed the setup messages belong to the data path.
    link.receive(&established.leftover);
    stream.start(glue).unwrap();
    link
}

#[test]
fn test_send_write_read_over_tcp_loopback() {
    for crc in [false, true] {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (socket, _) = listener.accept().unwrap();
            socket
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let established = respond(&socket);
            (socket, established)
        });
        let client = TcpStream::connect(address).unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let a_established = initiate(&client, crc);
        let (server_socket, b_established) = server.join().unwrap();
        assert_eq!(a_established.private_data, b"welcome");
        assert_eq!(a_established.negotiated.crc, crc);
        assert_eq!(b_established.negotiated.crc, crc);

        let Pair { a, b } = Pair::apart(EngineMode::Inline);
        let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
        let dst = b.buffer(100_000, 0, rw);
        b.qp.post_receive(1, &[dst.sge(0, 100_000)]).unwrap();
        let _la = attach(&a, client, &a_established, true);
        let _lb = attach(&b, server_socket, &b_established, false);

        // A Send larger than the socket buffer (back-pressure), a Write, and
        // two Reads of what was written.
        let src = send_pattern(&a, 1, 100_000, 7, None);
        a.write_to(2, &[src.sge(0, 50_000)], &dst, 0, WrFlags::empty())
            .unwrap();
        let back = a.buffer(50_000, 0, Access::LOCAL_WRITE);
        for context in [3, 4] {
            a.qp.post_read(
                context,
                &[back.sge(0, 50_000)],
                dst.raddr(0),
                dst.rkey(),
                WrFlags::empty(),
            )
            .unwrap();
        }
        let done = completions(&a.scq, 4);
        let statuses: Vec<_> = done
            .iter()
            .map(|c| (c.request_context, c.opcode, c.status))
            .collect();
        assert_eq!(
            statuses,
            [
                (1, Opcode::Send, WcStatus::Success),
                (2, Opcode::Write, WcStatus::Success),
                (3, Opcode::Read, WcStatus::Success),
                (4, Opcode::Read, WcStatus::Success)
            ]
        );
        let received = completions(&b.rcq, 1);
        assert_eq!(received.len(), 1);
        assert_eq!(received[0].bytes, 100_000);
        assert_eq!(received[0].status, WcStatus::Success);
        assert_eq!(back.buffer.bytes(), &src.buffer.bytes()[..50_000]);
        assert_eq!(&dst.buffer.bytes()[50_000..], &src.buffer.bytes()[50_000..]);

        // Disconnect: the peer sees the stream close.
        a.qp.disconnect();
        assert_eq!(wait_state(&b, QpState::Error), QpState::Error);
        assert_eq!(a.qp.state(), QpState::Disconnected);
    }
}
