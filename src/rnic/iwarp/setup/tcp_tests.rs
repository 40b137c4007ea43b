//! Both sides of the MPA exchange over a real TCP connection on
//! 127.0.0.1, every read bounded: the setup, then one FPDU each way.

use alloc::vec::Vec;

use super::tests::data_fpdu;
use super::*;
use crate::rnic::iwarp::mpa::{MpaError, Rtr, parse_fpdu};
use crate::rnic::iwarp::rdmap::Message;

/// Milliseconds since `start`.
fn now(start: std::time::Instant) -> u64 {
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Writes a machine's `output` whole; returns how much, for its
/// `advance_output`.
fn write_out(stream: &mut std::net::TcpStream, output: &[u8]) -> usize {
    std::io::Write::write_all(stream, output).unwrap();
    output.len()
}

/// Reads what is there (waiting at most 50 ms); `None` at EOF.
fn read_some(stream: &mut std::net::TcpStream) -> Option<Vec<u8>> {
    let mut buf = [0u8; 256];
    match std::io::Read::read(stream, &mut buf) {
        Ok(0) => None,
        Ok(n) => Some(buf[..n].to_vec()),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            Some(Vec::new())
        }
        Err(e) => panic!("read: {e}"),
    }
}

/// Reads until one whole FPDU (after `have`) is in; returns its message payload.
fn read_fpdu(
    stream: &mut std::net::TcpStream,
    mut have: Vec<u8>,
    crc: bool,
    start: std::time::Instant,
) -> Vec<u8> {
    loop {
        match parse_fpdu(&have, crc, 1024) {
            Ok((ulpdu, _)) => {
                let Message::Send { payload, .. } = Message::parse(ulpdu, None).unwrap() else {
                    panic!("not a Send");
                };
                return payload.to_vec();
            }
            Err(MpaError::Truncated { .. }) => {}
            Err(e) => panic!("{e}"),
        }
        assert!(now(start) < 10_000, "no FPDU");
        have.extend(read_some(stream).expect("EOF"));
    }
}

/// The responder of [`over_tcp_on_loopback`]: accepts, answers "ping"
/// with "pong", returns what was agreed.
fn tcp_responder(listener: &std::net::TcpListener, start: std::time::Instant) -> Negotiated {
    use std::io::Write;
    use std::time::Duration;

    // A bounded accept: poll the non-blocking listener for 10 s at most.
    listener.set_nonblocking(true).unwrap();
    let mut stream = loop {
        match listener.accept() {
            Ok((stream, _)) => break stream,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(now(start) < 10_000, "no connection");
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("accept: {e}"),
        }
    };
    stream.set_nonblocking(false).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let mut r = Responder::new(ResponderConfig::default(), now(start));
    let established = loop {
        let n = write_out(&mut stream, r.output());
        r.advance_output(n);
        let chunk = read_some(&mut stream).expect("peer closed");
        match r.receive(&chunk, now(start)).unwrap() {
            Some(Event::Request(request)) => {
                assert_eq!(request.private_data, b"client");
                assert_eq!(r.accept(8, 8, b"server", now(start)).unwrap(), None);
            }
            Some(Event::Established(e)) => break e,
            Some(other) => panic!("{other:?}"),
            None => {}
        }
    };
    let n = write_out(&mut stream, r.output());
    r.advance_output(n);
    let crc = established.negotiated.crc;
    let first = read_fpdu(&mut stream, established.leftover, crc, start);
    assert_eq!(first, b"ping");
    stream.write_all(&data_fpdu(b"pong", 1, crc)).unwrap();
    established.negotiated
}

/// Both sides over a real TCP connection on 127.0.0.1, every read
/// bounded: the setup, then one FPDU each way.
#[test]
fn over_tcp_on_loopback() {
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::time::{Duration, Instant};

    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let start = Instant::now();
    let server = std::thread::spawn(move || tcp_responder(&listener, start));

    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let icfg = InitiatorConfig {
        crc: true,
        ird: 8,
        ord: 8,
        rtr: RtrKinds::WRITE | RtrKinds::READ,
        ..InitiatorConfig::default()
    };
    let mut i = Initiator::new(&icfg, b"client", now(start)).unwrap();
    let established = loop {
        let n = write_out(&mut stream, i.output());
        i.advance_output(n);
        let chunk = read_some(&mut stream).expect("peer closed");
        match i.receive(&chunk, now(start)).unwrap() {
            Some(Event::Established(e)) => break e,
            Some(other) => panic!("{other:?}"),
            None => {}
        }
    };
    assert_eq!(established.private_data, b"server");
    assert_eq!(established.negotiated.rtr, Some(Rtr::Write));
    // The RTR first, then data.
    let n = write_out(&mut stream, i.output());
    i.advance_output(n);
    stream.write_all(&data_fpdu(b"ping", 1, true)).unwrap();
    let reply = read_fpdu(&mut stream, established.leftover, true, start);
    assert_eq!(reply, b"pong");
    let responder = server.join().unwrap();
    assert_eq!(responder.rtr, Some(Rtr::Write));
    assert_eq!((responder.ird, responder.ord), (Some(8), Some(8)));
}
