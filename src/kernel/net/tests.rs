//! `TcpByteStream` on 127.0.0.1: bytes arrive whole and in order through a
//! small send buffer (back-pressure and `writable`), an orderly close is a
//! FIN after the bytes, an abortive close is an RST (the peer's read fails
//! with `ConnectionReset`, a peer stream reports `closed(true)`), also with
//! the writer blocked on a peer that does not read or another descriptor of
//! the socket open, and the MSS and addresses are reported. `send_with`
//! lends the buffer's room whole or not at all, mixes with `send` in order,
//! and a refused lend is followed by `writable`.

use alloc::vec::Vec;
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use super::{FALLBACK_MSS, StreamEvents, TcpByteStream};
use crate::kernel::tcp_testing::Recorder;
use crate::kernel::testing::wait_until;
use alloc::sync::Arc;

/// A connected pair: (client, server).
fn sockets() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    (client, server)
}

/// Reads until the end of the stream or an error (bounded in time).
fn read_all(mut socket: &TcpStream) -> (Vec<u8>, Option<std::io::ErrorKind>) {
    socket
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut bytes = Vec::new();
    let mut buf = alloc::vec![0_u8; 64 * 1024];
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        match socket.read(&mut buf) {
            Ok(0) => return (bytes, None),
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return (bytes, Some(e.kind())),
        }
    }
    panic!("no end of stream");
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// Offers all of `bytes` (bounded), waiting for room when the buffer is full.
fn send_all(stream: &TcpByteStream, bytes: &[u8]) {
    let mut at = 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    while at < bytes.len() {
        assert!(Instant::now() < deadline, "send stalled");
        let n = stream.send(&bytes[at..]);
        at += n;
        if n == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// A started stream over `client` with a 4 KiB send buffer, and the
/// recorder of its events.
fn started(client: TcpStream) -> (Arc<TcpByteStream>, Arc<Recorder>) {
    let stream = TcpByteStream::new(client, 4096).unwrap();
    let events = Arc::new(Recorder::default());
    stream
        .start(Arc::clone(&events) as Arc<dyn StreamEvents>)
        .unwrap();
    (stream, events)
}

#[test]
fn test_bytes_in_order_through_a_small_buffer_then_fin() {
    let (client, server) = sockets();
    let (stream, events) = started(client);
    let data = pattern(3 << 20);
    let reader = std::thread::spawn(move || read_all(&server));
    send_all(&stream, &data);
    stream.close(false);
    let (got, error) = reader.join().unwrap();
    assert_eq!(error, None, "an orderly close is a FIN");
    assert!(got == data, "bytes differ");
    assert!(events.writables() > 0, "back-pressure ended");
    assert_eq!(stream.send(b"late"), 0, "nothing is taken after close");
}

#[test]
fn test_abortive_close_is_a_reset() {
    let (client, server) = sockets();
    let (stream, _events) = started(client);
    assert_eq!(stream.send(b"hello"), 5);
    let mut got = [0_u8; 5];
    (&server).read_exact(&mut got).unwrap();
    assert_eq!(&got, b"hello");
    stream.close(true);
    let (rest, error) = read_all(&server);
    assert!(rest.is_empty());
    assert_eq!(error, Some(std::io::ErrorKind::ConnectionReset));
    assert!(stream.local_addr().is_none(), "the socket is given up");
}

#[test]
fn test_abortive_close_before_start_is_a_reset() {
    let (client, server) = sockets();
    let stream = TcpByteStream::new(client, 4096).unwrap();
    stream.close(true);
    let (rest, error) = read_all(&server);
    assert!(rest.is_empty());
    assert_eq!(error, Some(std::io::ErrorKind::ConnectionReset));
    let events = Arc::new(Recorder::default());
    assert!(stream.start(events).is_err());
}

/// The writer is blocked on a peer that reads nothing: the abort still
/// resets the connection.
#[test]
fn test_abortive_close_with_a_blocked_writer_is_a_reset() {
    let (client, server) = sockets();
    let stream = TcpByteStream::new(client, 1 << 20).unwrap();
    let events = Arc::new(Recorder::default());
    stream
        .start(Arc::clone(&events) as Arc<dyn StreamEvents>)
        .unwrap();
    // More than the socket buffers of both ends hold: the buffer stays full
    // (50 refusals in a row, 1 ms apart) once the writer is blocked.
    let data = pattern(1 << 20);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut refused = 0;
    for _ in 0..10_000 {
        if refused >= 50 || Instant::now() > deadline {
            break;
        }
        if stream.send(&data) == 0 {
            refused += 1;
            std::thread::sleep(Duration::from_millis(1));
        } else {
            refused = 0;
        }
    }
    assert!(refused >= 50, "the writer never blocked");
    stream.close(true);
    let (_, error) = read_all(&server);
    assert_eq!(error, Some(std::io::ErrorKind::ConnectionReset));
}

/// A peer `TcpByteStream` reports the reset as `closed(true)`, and an
/// orderly close as `closed(false)` after the bytes; the side that closed
/// hears of its stream's end once too.
#[test]
fn test_peer_stream_sees_reset_and_fin() {
    for abortive in [false, true] {
        let (client, server) = sockets();
        let a = TcpByteStream::new(client, 4096).unwrap();
        let b = TcpByteStream::new(server, 4096).unwrap();
        let ea = Arc::new(Recorder::default());
        let eb = Arc::new(Recorder::default());
        a.start(Arc::clone(&ea) as Arc<dyn StreamEvents>).unwrap();
        b.start(Arc::clone(&eb) as Arc<dyn StreamEvents>).unwrap();
        assert_eq!(a.send(b"ping"), 4);
        wait_until("the four bytes", || eb.bytes().len() == 4);
        a.close(abortive);
        wait_until("the far end's close", || !eb.closes().is_empty());
        assert_eq!(eb.closes(), [abortive]);
        assert_eq!(eb.bytes(), b"ping");
        if !abortive {
            // The orderly close leaves receiving open until the peer ends.
            b.close(false);
        }
        // This side's own end comes once, last, and is not a peer's reset.
        wait_until("the near end's close", || !ea.closes().is_empty());
        assert_eq!(ea.closes(), [false]);
    }
}

/// Another descriptor of the socket (a `try_clone`) does not hold the
/// reset back.
#[cfg(target_os = "linux")]
#[test]
fn test_abortive_close_resets_despite_a_duplicate_descriptor() {
    let (client, server) = sockets();
    let duplicate = client.try_clone().unwrap();
    let stream = TcpByteStream::new(client, 4096).unwrap();
    stream.start(Arc::new(Recorder::default())).unwrap();
    stream.close(true);
    let (rest, error) = read_all(&server);
    assert!(rest.is_empty());
    assert_eq!(error, Some(std::io::ErrorKind::ConnectionReset));
    drop(duplicate);
}

#[test]
fn test_mss_and_addresses_are_reported() {
    let (client, server) = sockets();
    let expected = (client.local_addr().unwrap(), client.peer_addr().unwrap());
    let stream = TcpByteStream::new(client, 4096).unwrap();
    assert_eq!(stream.local_addr(), Some(expected.0));
    assert_eq!(stream.peer_addr(), Some(expected.1));
    let mss = stream.mss();
    assert!(mss > 0);
    if cfg!(target_os = "linux") {
        // Loopback's MTU is 65536: the MSS is far above Ethernet's.
        assert!(mss > FALLBACK_MSS, "{mss}");
    }
    drop(server);
}

/// Writes `bytes` through `send_with`, all or nothing.
fn lend(stream: &TcpByteStream, bytes: &[u8]) -> Option<bool> {
    stream.send_with(bytes.len(), &mut |room| {
        room.copy_from_slice(bytes);
        true
    })
}

#[test]
fn test_send_with_lends_the_room_and_takes_it_whole_or_not_at_all() {
    let (client, server) = sockets();
    let stream = TcpByteStream::new(client, 100).unwrap();
    let data = pattern(100);
    // Not started: nothing drains, so the room is what `send` left.
    assert_eq!(lend(&stream, &data[..60]), Some(true));
    let mut called = false;
    let refused = stream.send_with(50, &mut |_| {
        called = true;
        true
    });
    assert_eq!(refused, None, "50 bytes do not fit in 40");
    assert!(!called, "fill is not called without room");
    // `fill` refusing takes nothing.
    assert_eq!(stream.send_with(10, &mut |_| false), Some(false));
    // `send` after a lend, then a lend of the last byte fills the buffer.
    assert_eq!(stream.send(&data[60..99]), 39);
    assert_eq!(lend(&stream, &data[99..]), Some(true));
    assert_eq!(lend(&stream, &data[..1]), None, "full");
    assert_eq!(lend(&stream, &[]), Some(true), "nothing fits anywhere");
    let events = Arc::new(Recorder::default());
    stream
        .start(Arc::clone(&events) as Arc<dyn StreamEvents>)
        .unwrap();
    stream.close(false);
    assert_eq!(lend(&stream, b"late"), None, "nothing is lent after close");
    let (got, error) = read_all(&server);
    assert_eq!(error, None);
    assert!(got == data, "bytes differ");
}

#[test]
fn test_send_with_and_send_mixed_under_back_pressure() {
    let (client, server) = sockets();
    let stream = TcpByteStream::new(client, 3000).unwrap();
    let events = Arc::new(Recorder::default());
    stream
        .start(Arc::clone(&events) as Arc<dyn StreamEvents>)
        .unwrap();
    let data = pattern(2 << 20);
    let reader = std::thread::spawn(move || read_all(&server));
    // Pieces of 1 000 bytes, alternately lent and sent (a short `send` is
    // finished by `send`); a refused lend is retried after a pause.
    let mut at = 0;
    let mut turn = 0_usize;
    let mut refused = 0_usize;
    let deadline = Instant::now() + Duration::from_secs(20);
    while at < data.len() {
        assert!(Instant::now() < deadline, "stalled");
        let piece = &data[at..(at + 1000).min(data.len())];
        turn += 1;
        if turn.is_multiple_of(2) {
            match lend(&stream, piece) {
                Some(true) => at += piece.len(),
                Some(false) => unreachable!("fill never refuses here"),
                None => {
                    refused += 1;
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        } else {
            send_all(&stream, piece);
            at += piece.len();
        }
    }
    stream.close(false);
    let (got, error) = reader.join().unwrap();
    assert_eq!(error, None);
    assert!(got == data, "bytes differ");
    if refused > 0 {
        // A refused lend asks for `writable` as a short `send` does.
        wait_until("writable", || events.writables() > 0);
    }
}
