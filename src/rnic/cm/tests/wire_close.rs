//! How a wire connection ends (issue 8, "Connections over TCP"): a graceful
//! Disconnect lets the message in flight out whole before the FIN (X1), and
//! a peer that reads nothing cannot hold the stream, its threads, the link
//! and the QP for ever: after the drain time-out (`disconnect_ms`) the
//! stream is reset (X6, E5, N26).

use std::io::{ErrorKind, Read, Write};
use std::sync::atomic::AtomicBool;

use super::scripted_net::ScriptedNet;
use super::wire::{SHORT, addresses, connect_to_raw, next_event, one_receive, replied};
use super::*;
use crate::kernel::sync::Weak;
use crate::kernel::tcp::{ConnectEvents, Connected, NetError, Stream, StreamEvents};
use crate::kernel::testing::{wait_some, wait_until};
use crate::rnic::iwarp::mpa::{self, FrameKind, MpaFrame};
use crate::rnic::iwarp::rdmap::Message;

/// X1, issue 8: a Disconnect made while a large Send is on its way lets
/// the rest of the Send out before the FIN: the peer places the whole
/// message (its receive completes with success and every byte), then sees
/// the graceful disconnect. (The FIN used to go at once, after an FPDU cut
/// short: the peer's receive completed cancelled.)
#[test]
fn test_disconnect_lets_the_message_in_flight_out_before_the_fin_rule_x1() {
    const LEN: u32 = 32 << 20;
    let r = replied(ConnTimeouts::default());
    r.parties.active.conn.complete_connect().unwrap();
    assert_eq!(next_event(&r.passive.events), Ev::Accept(Ok(())));
    let sink = r.parties.qb.buffer(LEN as usize, 0, Access::LOCAL_WRITE);
    r.parties
        .qb
        .qp
        .post_receive(1, &[sink.sge(0, LEN)])
        .unwrap();
    let src = r.parties.qa.pattern(LEN as usize, 5, Access::empty());
    r.parties
        .qa
        .qp
        .post_send(2, Payload::Sges(&[src.sge(0, LEN)]), WrFlags::empty(), None)
        .unwrap();
    // The stream's buffer holds a fraction of the Send: it is in flight.
    r.parties.active.conn.disconnect().unwrap();
    let c = one_receive(&r.parties.qb);
    assert_eq!((c.status, c.bytes), (WcStatus::Success, LEN));
    assert!(
        sink.buffer.bytes() == src.buffer.bytes(),
        "every byte placed"
    );
    assert_eq!(next_event(&r.passive.events), Ev::Indicated);
    r.passive.conn.disconnect().unwrap();
    assert_eq!(next_event(&r.passive.events), Ev::Disconnect(Ok(())));
    assert_eq!(next_event(&r.parties.active.events), Ev::Disconnect(Ok(())));
    let sent = r.parties.qa.scq.drain();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].status, WcStatus::Success);
}

// ----- a peer that reads nothing ------------------------------------------

/// One stream the host's TCP connected: a weak reference to it, and
/// whether its end was reported (its reader thread ended).
pub(super) struct Watch {
    stream: Weak<dyn Stream>,
    ended: Arc<AtomicBool>,
}

/// `events` of a connect, recording the stream it connects in `streams`.
pub(super) fn watch(
    streams: &Arc<Mutex<Vec<Watch>>>,
    events: Arc<dyn ConnectEvents>,
) -> Arc<dyn ConnectEvents> {
    Arc::new(WatchConnect {
        streams: Arc::clone(streams),
        inner: events,
    })
}

/// Records a connected stream, then hands it on.
struct WatchConnect {
    streams: Arc<Mutex<Vec<Watch>>>,
    inner: Arc<dyn ConnectEvents>,
}

impl ConnectEvents for WatchConnect {
    fn connected(&self, result: Result<Connected, NetError>) -> Option<Arc<dyn StreamEvents>> {
        let stream = result.as_ref().ok().map(|c| Arc::downgrade(&c.stream));
        let events = self.inner.connected(result)?;
        let ended = Arc::new(AtomicBool::new(false));
        if let Some(stream) = stream {
            self.streams.lock().unwrap().push(Watch {
                stream,
                ended: Arc::clone(&ended),
            });
        }
        Some(Arc::new(WatchEnd {
            inner: events,
            ended,
        }))
    }
}

/// A stream's events, noting its end.
struct WatchEnd {
    inner: Arc<dyn StreamEvents>,
    ended: Arc<AtomicBool>,
}

impl StreamEvents for WatchEnd {
    fn received(&self, bytes: &[u8]) {
        self.inner.received(bytes);
    }

    fn writable(&self) {
        self.inner.writable();
    }

    fn closed(&self, abortive: bool) {
        self.inner.closed(abortive);
        self.ended.store(true, Ordering::Release);
    }
}

/// How the local side ends the connection whose peer reads nothing.
#[derive(Clone, Copy, Debug)]
enum Ending {
    /// The peer sends a Write to an STag it does not own: a Terminate is
    /// due (E5), behind the Writes that fill the stream.
    PeerError,
    /// The consumer's Disconnect (X1, N26).
    Disconnect,
    /// The consumer closes the QP (L20).
    CloseQp,
}

/// Writes of 1 MiB the local side posts: far more than the socket buffers
/// and the stream's buffer hold together.
const WRITES: usize = 24;
const WRITE_LEN: u32 = 1 << 20;

/// A local wire QP (time-outs `SHORT`) connected to a raw socket of the
/// test, which ran the MPA exchange by hand.
struct RawPeer {
    active: Client,
    qa: Side,
    peer: std::net::TcpStream,
    /// The local stream, and whether its end was reported.
    stream: Weak<dyn Stream>,
    ended: Arc<AtomicBool>,
    _host: Host,
}

fn raw_peer() -> RawPeer {
    raw_peer_over(&ScriptedNet::busy_ports(0))
}

/// [`raw_peer`] over `net`.
fn raw_peer_over(net: &Arc<ScriptedNet>) -> RawPeer {
    let fabric = Fabric::new();
    let (ip_a, ip_b) = addresses();
    let a = host(&fabric, &[ip_a], EngineMode::Inline);
    let wire = Wire {
        net: Arc::clone(net) as _,
        timeouts: SHORT,
    };
    fabric.attach_wire(&a.device, wire).unwrap();
    let mut reply = [0_u8; mpa::FRAME_HEADER_LEN + mpa::ENHANCED_LEN];
    let (qa, active, mut peer) = connect_to_raw(&a, ip_a, ip_b);
    // The MPA request, and a reply accepting it.
    let mut request = alloc::vec![0_u8; mpa::FRAME_HEADER_LEN];
    peer.read_exact(&mut request).unwrap();
    let pd_len = usize::from(u16::from_be_bytes([request[18], request[19]]));
    request.resize(mpa::FRAME_HEADER_LEN + pd_len, 0);
    peer.read_exact(&mut request[mpa::FRAME_HEADER_LEN..])
        .unwrap();
    let (request, _) = MpaFrame::parse(&request, FrameKind::Request).unwrap();
    let accept = MpaFrame::accept(&request, false, 1, 1, &[]).unwrap();
    let n = accept.write(&mut reply).unwrap();
    peer.write_all(&reply[..n]).unwrap();
    assert_eq!(next_event(&active.events), Ev::Connect(Ok(())));
    active.conn.complete_connect().unwrap();
    let (stream, ended) = {
        let streams = net.streams.lock().unwrap();
        assert_eq!(streams.len(), 1);
        (
            Weak::clone(&streams[0].stream),
            Arc::clone(&streams[0].ended),
        )
    };
    RawPeer {
        active,
        qa,
        peer,
        stream,
        ended,
        _host: a,
    }
}

/// [`WRITES`] Writes of [`WRITE_LEN`] bytes from `src` to the peer, more
/// than a stream holds when the peer reads nothing.
fn post_writes(qa: &Side, src: &crate::rnic::testing::Registered) {
    for context in 0..WRITES {
        qa.qp
            .post_write(
                context,
                Payload::Sges(&[src.sge(0, WRITE_LEN)]),
                0x1000,
                0x7777_0000,
                WrFlags::empty(),
            )
            .unwrap();
    }
}

/// The peer's Write to an STag this side does not own (E5): this side
/// answers with a Terminate and the connection's loss is indicated.
fn bad_write(peer: &mut std::net::TcpStream, active: &Client) {
    let write = Message::Write {
        stag: 0x7777_7700,
        to: 0,
        last: true,
        payload: &[1; 8],
    };
    let mut fpdu = [0_u8; 64];
    let n = write.write_fpdu(&mut fpdu, false).unwrap();
    peer.write_all(&fpdu[..n]).unwrap();
    assert_eq!(next_event(&active.events), Ev::Indicated);
}

/// Every Write completes once: those the stream took with success, then
/// the rest cancelled.
fn every_write_completes_once(qa: &Side) {
    let mut done = Vec::new();
    wait_some("every Write's completion", || {
        done.extend(qa.scq.drain());
        (done.len() >= WRITES).then_some(())
    });
    assert_eq!(done.len(), WRITES, "{done:?}");
    let mut contexts: Vec<usize> = done.iter().map(|c| c.request_context).collect();
    contexts.sort_unstable();
    assert_eq!(contexts, (0..WRITES).collect::<Vec<_>>());
    let taken = done
        .iter()
        .take_while(|c| c.status == WcStatus::Success)
        .count();
    assert!(taken < WRITES, "the stream cannot have taken them all");
    assert!(
        done[taken..]
            .iter()
            .all(|c| c.status == WcStatus::Cancelled),
        "{done:?}"
    );
}

/// A local wire QP connects to a raw socket of the test that runs the MPA
/// exchange and then reads nothing; the local side posts Writes until the
/// stream is full and ends the connection as `ending` says. The stream is
/// reset within the drain time-out: its end is reported (the reader
/// thread ends), the peer reads what came and then `ECONNRESET`, every
/// Write completes once, and once the consumer lets go, the stream and the
/// QP are released.
fn peer_reads_nothing(ending: Ending) {
    let RawPeer {
        active,
        qa,
        mut peer,
        stream,
        ended,
        _host,
    } = raw_peer();
    // Writes until the stream is full: the peer reads nothing.
    let src = qa.pattern(WRITE_LEN as usize, 3, Access::empty());
    post_writes(&qa, &src);
    match ending {
        Ending::PeerError => bad_write(&mut peer, &active),
        Ending::Disconnect => {
            active.conn.disconnect().unwrap();
            assert_eq!(
                next_event(&active.events),
                Ev::Disconnect(Err(CmError::TimedOut))
            );
        }
        Ending::CloseQp => qa.qp.close(),
    }
    // The drain time-out resets the stream: its reader ends.
    wait_some("the stream's end", || {
        ended.load(Ordering::Acquire).then_some(())
    });
    // The peer reads what came, then the reset.
    let mut buf = alloc::vec![0_u8; 1 << 20];
    let mut total = 0_usize;
    let end = loop {
        match peer.read(&mut buf) {
            Ok(0) => break None,
            Ok(n) => total += n,
            Err(e) => break Some(e.kind()),
        }
        assert!(total <= WRITES * (WRITE_LEN as usize) * 2, "{total} bytes");
    };
    assert_eq!(end, Some(ErrorKind::ConnectionReset), "{ending:?}");
    every_write_completes_once(&qa);
    // The consumer lets go: nothing stays alive.
    let qp = Arc::downgrade(&qa.qp);
    qa.qp.close();
    drop(active);
    drop(src);
    drop(qa);
    wait_some("the stream and the QP released", || {
        (stream.upgrade().is_none() && qp.upgrade().is_none()).then_some(())
    });
}

/// E5, X6, issue 8: an error whose Terminate waits behind a full stream
/// (the peer reads nothing) ends with a reset after the drain time-out.
#[test]
fn test_error_towards_a_peer_that_reads_nothing_resets_rule_e5_x6() {
    peer_reads_nothing(Ending::PeerError);
}

/// N26, X6, issue 8: a Disconnect whose message in progress cannot go out
/// (the peer reads nothing) fails `IO_TIMEOUT` and resets the stream.
#[test]
fn test_disconnect_towards_a_peer_that_reads_nothing_resets_rule_n26_x6() {
    peer_reads_nothing(Ending::Disconnect);
}

/// L20, X6, issue 8: closing the QP while its stream is full (the peer
/// reads nothing) resets the stream after the drain time-out.
#[test]
fn test_qp_close_towards_a_peer_that_reads_nothing_resets_rule_l20_x6() {
    peer_reads_nothing(Ending::CloseQp);
}

/// X1, issue 12's fuzz campaigns: once a graceful close completed both
/// ways (this side's FIN, then the peer's), the stream is released as soon
/// as the consumer lets go, not when the drain time-out comes due. The
/// time-out used to hold the stream (and, on the host, its two 256 KiB
/// buffers; in the kernel, its 256 KiB send ring) for `disconnect_ms`
/// after every close: 2.5 GB in a fuzz run of 900 connections a second.
/// Here the timers never fire unless the test fires them.
#[test]
fn test_stream_released_after_a_graceful_close_before_the_drain_timeout_rule_x1() {
    let net = ScriptedNet::holding_timers();
    let mut r = raw_peer_over(&net);
    r.active.conn.disconnect().unwrap();
    // The peer reads up to this side's FIN, then closes in answer.
    let mut buf = [0_u8; 256];
    loop {
        match r.peer.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => panic!("the peer's read failed: {e}"),
        }
    }
    r.peer.shutdown(std::net::Shutdown::Both).unwrap();
    assert_eq!(next_event(&r.active.events), Ev::Disconnect(Ok(())));
    wait_some("the stream's end", || {
        r.ended.load(Ordering::Acquire).then_some(())
    });
    let held = net.take_timers();
    assert!(!held.is_empty(), "the drain time-out was armed");
    // The consumer lets go: the stream goes, though no timer fired.
    r.qa.qp.close();
    let stream = Weak::clone(&r.stream);
    drop(r);
    wait_some("the stream released before its drain time-out", || {
        stream.upgrade().is_none().then_some(())
    });
    // The time-outs come due later: nothing is left for them to do.
    for (at, timer) in held {
        timer.fire(at);
    }
}

/// N29 (the consumer's decision has no deadline): a request still
/// undecided when its request time-out's timer fires arms no timer for
/// the decision. It re-armed one `NO_DECISION_TIMEOUT_MS` (u64::MAX / 4 ms)
/// away, which the platform kept with its `Tick` for ever, one per such
/// request (an audit of reachable leaks, 2026-11-28).
#[test]
fn test_an_undecided_request_arms_no_timer_that_never_fires_rule_n29() {
    let net = ScriptedNet::holding_timers();
    let fabric = Fabric::new();
    let (_, ip_b) = addresses();
    let b = super::scripted_net::wire_host(&fabric, &[ip_b], Some(Arc::clone(&net)), SHORT);
    let s = listening(&b, ep(ip_b, 0));
    let port = s.listener.local().unwrap().port;
    let IpAddr::V4(octets) = ip_b else {
        unreachable!()
    };
    let mut raw = std::net::TcpStream::connect((core::net::Ipv4Addr::from(octets), port)).unwrap();
    let enhanced = mpa::Enhanced {
        ird: 1,
        ord: 1,
        peer_to_peer: true,
        rtr: mpa::RtrKinds::WRITE,
    };
    let mut frame = [0_u8; 64];
    let n = MpaFrame::request(false, enhanced, &[])
        .write(&mut frame)
        .unwrap();
    raw.write_all(&frame[..n]).unwrap();
    let passive = wait_some("the connect event", || s.next());
    let held = net.take_timers();
    assert!(!held.is_empty(), "the request's wait had its timer");
    // The request time-out comes due while the consumer still decides.
    for (at, timer) in held {
        timer.fire(at);
    }
    let now = crate::kernel::tcp::Net::now_ms(&*net);
    let rearmed: Vec<u64> = net.take_timers().iter().map(|(at, _)| *at).collect();
    assert!(
        rearmed.iter().all(|&at| at < now + 3_600_000),
        "a timer armed at {rearmed:?} (now {now}): it would never fire"
    );
    // The consumer decides after all: the Reject still goes out.
    assert!(passive.reject(&[]).is_ok());
    let _ = passive.close();
    drop(raw);
}

/// X6, L21 (issue 8: no wait on a peer without a deadline): the consumer
/// lets go of a connection at once — closes the QP and the connector with
/// no Disconnect, and drops them — towards a peer that keeps its end open.
/// The stream was closed in order, its drain time-out armed; the time-out
/// must still reset it although the consumer's objects are gone: the local
/// stream's end is reported (its threads end) and the peer, reading, meets
/// the reset. (The drain timer holds the stream weakly, and only the
/// consumer's objects held it: the reset never came, and the reader thread,
/// the socket and the buffers stayed for as long as the peer kept its end
/// open.) `before`: what happens first — Writes queued that the peer does
/// not read, nothing, or the peer's bad FPDU (a Write to an unknown STag:
/// this side sends a Terminate and closes).
fn let_go_at_once_then_reset(before: LetGo) {
    let mut raw = raw_peer();
    let (qa, active) = (raw.qa, raw.active);
    let src = qa.pattern(WRITE_LEN as usize, 3, Access::empty());
    match before {
        LetGo::UnreadWrites => post_writes(&qa, &src),
        LetGo::Quiet => {}
        LetGo::PeerError => bad_write(&mut raw.peer, &active),
    }
    qa.qp.close();
    let _ = active.conn.close();
    drop(active);
    drop(src);
    drop(qa);
    wait_until(
        "the local stream's end (the drain time-out's reset)",
        || raw.ended.load(Ordering::Acquire),
    );
    wait_until("the stream released", || raw.stream.upgrade().is_none());
    assert!(
        meets_reset(&mut raw.peer),
        "{before:?}: the peer meets the reset"
    );
}

/// Whether the raw peer, reading what comes (a Terminate, Writes' bytes,
/// an orderly close's end of stream), then meets a reset (bounded: 2 000
/// reads of at most 50 ms).
fn meets_reset(peer: &mut std::net::TcpStream) -> bool {
    peer.set_read_timeout(Some(std::time::Duration::from_millis(50)))
        .unwrap();
    let mut buf = alloc::vec![0_u8; 1 << 16];
    for _ in 0..2_000 {
        match peer.read(&mut buf) {
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return true,
            // After the end of stream a read says nothing more: the reset
            // is the socket's pending error (Linux: EPIPE in CLOSE_WAIT).
            Ok(0) => {
                if peer.take_error().ok().flatten().is_some() {
                    return true;
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return false,
        }
    }
    false
}

/// L21, X6: a TCP connection a wire listener accepted, whose MPA request
/// has not come whole when the listener closes, is dropped with the
/// listener's sink: the stream closes in order, and if the peer keeps its
/// end open it is reset after the drain time-out (`disconnect_ms`, 200 ms
/// here). It was only closed in order, with no time-out: such a peer kept
/// the connection's reader thread and socket for ever, one per connection.
#[test]
fn test_listener_close_resets_a_connection_whose_request_had_not_come_rule_l21_x6() {
    let fabric = Fabric::new();
    let (_, ip_b) = addresses();
    let b = super::scripted_net::wire_host(&fabric, &[ip_b], None, SHORT);
    let s = listening(&b, ep(ip_b, 0));
    let port = s.listener.local().unwrap().port;
    let IpAddr::V4(octets) = ip_b else {
        unreachable!()
    };
    let mut raw = std::net::TcpStream::connect((core::net::Ipv4Addr::from(octets), port)).unwrap();
    raw.write_all(b"MPA ID Req").unwrap(); // half a request header
    let _ = s.listener.close();
    drop(s);
    assert!(meets_reset(&mut raw), "the peer meets the reset");
}

#[derive(Clone, Copy, Debug)]
enum LetGo {
    UnreadWrites,
    Quiet,
    PeerError,
}

/// X6, E5: each way of letting go at once (see
/// [`let_go_at_once_then_reset`]) still ends with the reset.
#[test]
fn test_let_go_at_once_still_resets_rule_x6_e5() {
    for before in [LetGo::UnreadWrites, LetGo::Quiet, LetGo::PeerError] {
        let_go_at_once_then_reset(before);
    }
}
