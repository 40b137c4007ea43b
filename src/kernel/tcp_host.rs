//! The host's [`Net`]: `std::net` sockets (bound before connecting with
//! `socket2`), one thread per listening socket blocked in `accept`, one
//! short-lived thread per connect, [`TcpByteStream`] for each connected
//! stream, and one timer thread for the process.

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::net::SocketAddr;
use std::io;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockRef, Socket, Type};

use super::net::{self, TcpByteStream};
use super::tcp::{
    AcceptEvents, ConnectEvents, Connected, Dial, Listening, Net, NetError, Stream, StreamEvents,
    Timer,
};

/// Bytes a stream buffers for sending.
pub const SEND_BUFFER: usize = 256 * 1024;

/// Pending connections a listening socket queues in the kernel.
const LISTEN_BACKLOG: i32 = 64;

/// The MSS when the socket does not say (Ethernet's).
const DEFAULT_MSS: u16 = 1460;

/// One direction of a connection between two streams of this process,
/// `(from, to)`: the bytes its sending stream took, and those its receiving
/// stream handed over. `reading` while the receiving stream is in this
/// process and its read loop runs: only then will the two counts meet.
#[derive(Debug, Default)]
struct Flow {
    taken: AtomicU64,
    delivered: AtomicU64,
    reading: AtomicBool,
}

impl Flow {
    /// Bytes taken and not yet handed over, while a reader of this process
    /// will hand them over.
    fn in_flight(&self) -> bool {
        self.reading.load(Ordering::Acquire)
            && self.taken.load(Ordering::Acquire) != self.delivered.load(Ordering::Acquire)
    }
}

type FlowKey = (SocketAddr, SocketAddr);

/// The flows of this process's streams, by `(from, to)`. Each end holds
/// its two flows from the moment it is connected (a send or a delivery
/// counts with one atomic add, no lock); the receiving end takes its
/// incoming flow out of the table once its read loop ended.
fn flows() -> std::sync::MutexGuard<'static, alloc::collections::BTreeMap<FlowKey, Arc<Flow>>> {
    static FLOWS: Mutex<alloc::collections::BTreeMap<FlowKey, Arc<Flow>>> =
        Mutex::new(alloc::collections::BTreeMap::new());
    FLOWS.lock().unwrap_or_else(PoisonError::into_inner)
}

fn flow(key: FlowKey) -> Arc<Flow> {
    Arc::clone(flows().entry(key).or_default())
}

/// Waits (at most `limit`) until no byte is in flight between two streams
/// of this process: every byte a stream took has been received and handed
/// over by its peer stream, for every connection whose receiving end is a
/// stream of this process with its read loop running (bytes to another
/// process, or to a stream that was reset or closed, are not waited for).
/// For tests that run both ends in one process: an RDMA Write completes at
/// its initiator once sent, and its data lands at the target a moment
/// later.
pub fn settle(limit: Duration) {
    let start = Instant::now();
    while start.elapsed() < limit {
        if !flows().values().any(|flow| flow.in_flight()) {
            return;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// A connected stream that counts what it takes in its outgoing flow.
struct Counted {
    stream: Arc<TcpByteStream>,
    out: Arc<Flow>,
    /// The outgoing flow's key, `(local, peer)`.
    key: FlowKey,
}

impl Drop for Counted {
    /// The outgoing flow leaves the table with its sender unless a reader
    /// of this process reads it (that reader takes it out when its read
    /// loop ends): a flow to another process, or one whose reader ended,
    /// stayed in the table for ever, one per connection (an audit of
    /// reachable leaks, 2026-11-28).
    fn drop(&mut self) {
        if self.out.reading.load(Ordering::Acquire) {
            return;
        }
        let mut flows = flows();
        if flows
            .get(&self.key)
            .is_some_and(|flow| Arc::ptr_eq(flow, &self.out))
        {
            flows.remove(&self.key);
        }
    }
}

impl Stream for Counted {
    fn send(&self, bytes: &[u8]) -> usize {
        let n = self.stream.send(bytes);
        self.out.taken.fetch_add(n as u64, Ordering::AcqRel);
        n
    }

    fn send_with(&self, len: usize, fill: &mut dyn FnMut(&mut [u8]) -> bool) -> Option<bool> {
        let taken = self.stream.send_with(len, fill);
        if taken == Some(true) {
            self.out.taken.fetch_add(len as u64, Ordering::AcqRel);
        }
        taken
    }

    fn close(&self, abortive: bool) {
        self.stream.close(abortive);
    }
}

/// Forwards the host stream's events to the platform-neutral sink, and
/// counts what it hands over in the incoming flow (`key`).
struct Forward {
    /// The stream as the connection layer holds it, kept while a thread of
    /// the stream runs: a drain time-out holds it weakly and must still be
    /// able to reset it after the consumer let go of the connection
    /// (otherwise a peer that never closes keeps the reader thread, the
    /// socket and the buffers for ever). `None` in tests of the forwarding
    /// alone.
    _stream: Option<Arc<dyn Stream>>,
    events: Arc<dyn StreamEvents>,
    incoming: Arc<Flow>,
    key: FlowKey,
}

impl net::StreamEvents for Forward {
    fn received(&self, bytes: &[u8]) {
        self.events.received(bytes);
        self.incoming
            .delivered
            .fetch_add(bytes.len() as u64, Ordering::AcqRel);
    }

    fn writable(&self) {
        self.events.writable();
    }

    fn closed(&self, abortive: bool) {
        // The read loop is over: nothing more comes in on this flow.
        self.incoming.reading.store(false, Ordering::Release);
        let mut flows = flows();
        if flows
            .get(&self.key)
            .is_some_and(|flow| Arc::ptr_eq(flow, &self.incoming))
        {
            flows.remove(&self.key);
        }
        drop(flows);
        self.events.closed(abortive);
    }
}

/// The process's host TCP.
#[derive(Debug, Default)]
pub struct HostNet;

impl HostNet {
    /// The host TCP, shared by every wire device of the process.
    pub fn shared() -> Arc<dyn Net> {
        static NET: OnceLock<Arc<HostNet>> = OnceLock::new();
        let net: Arc<Self> = Arc::clone(NET.get_or_init(|| Arc::new(Self)));
        net
    }
}

fn clock() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    let start = START.get_or_init(Instant::now);
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}

fn net_error(error: &io::Error) -> NetError {
    match error.kind() {
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionReset => NetError::Refused,
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => NetError::TimedOut,
        io::ErrorKind::NetworkUnreachable | io::ErrorKind::HostUnreachable => NetError::Unreachable,
        io::ErrorKind::AddrInUse => NetError::AddressInUse,
        io::ErrorKind::AddrNotAvailable => NetError::AddressNotAvailable,
        io::ErrorKind::OutOfMemory => NetError::Resources,
        _ => NetError::Failed,
    }
}

/// Wraps a connected socket and hands it to `give`, which returns the sink
/// of its events; starts the stream's threads with it.
fn hand_over(
    socket: TcpStream,
    give: impl FnOnce(Connected) -> Option<Arc<dyn StreamEvents>>,
) -> Result<(), NetError> {
    let local = socket.local_addr().map_err(|e| net_error(&e))?;
    let peer = socket.peer_addr().map_err(|e| net_error(&e))?;
    let mss = SockRef::from(&socket)
        .tcp_mss()
        .ok()
        .and_then(|mss| u16::try_from(mss).ok())
        .filter(|&mss| mss >= 128)
        .unwrap_or(DEFAULT_MSS);
    let stream = TcpByteStream::new(socket, SEND_BUFFER).map_err(|e| net_error(&e))?;
    let counted = Counted {
        stream: Arc::clone(&stream),
        out: flow((local, peer)),
        key: (local, peer),
    };
    let counted: Arc<dyn Stream> = Arc::new(counted);
    let connected = Connected {
        stream: Arc::clone(&counted),
        local,
        peer,
        mss,
    };
    if let Some(events) = give(connected) {
        let incoming = flow((peer, local));
        incoming.reading.store(true, Ordering::Release);
        let forward = Forward {
            _stream: Some(counted),
            events,
            incoming,
            key: (peer, local),
        };
        stream.start(Arc::new(forward)).map_err(|e| net_error(&e))
    } else {
        stream.close(true);
        Ok(())
    }
}

struct HostListening {
    socket: Arc<Socket>,
    local: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl Listening for HostListening {
    fn local(&self) -> SocketAddr {
        self.local
    }
}

impl Drop for HostListening {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wakes the thread blocked in accept (Linux ends it with EINVAL).
        let _ = self.socket.shutdown(Shutdown::Both);
    }
}

fn socket_for(addr: SocketAddr) -> io::Result<Socket> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    Ok(socket)
}

impl Net for HostNet {
    fn now_ms(&self) -> u64 {
        clock()
    }

    fn listen(
        &self,
        local: SocketAddr,
        events: Arc<dyn AcceptEvents>,
    ) -> Result<Box<dyn Listening>, NetError> {
        let socket = socket_for(local).map_err(|e| net_error(&e))?;
        socket.bind(&local.into()).map_err(|e| net_error(&e))?;
        socket.listen(LISTEN_BACKLOG).map_err(|e| net_error(&e))?;
        let bound = socket
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .ok_or(NetError::Failed)?;
        let socket = Arc::new(socket);
        let stop = Arc::new(AtomicBool::new(false));
        let thread_socket = Arc::clone(&socket);
        let thread_stop = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("softndk-tcp-listen".into())
            .spawn(move || {
                let listener: TcpListener = match thread_socket.try_clone() {
                    Ok(s) => s.into(),
                    Err(_) => return,
                };
                while !thread_stop.load(Ordering::Acquire) {
                    match listener.accept() {
                        Ok((socket, _)) => {
                            if thread_stop.load(Ordering::Acquire) {
                                return;
                            }
                            let _ = hand_over(socket, |c| events.accepted(c));
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => {}
                        Err(_) => return,
                    }
                }
            })
            .map_err(|_| NetError::Resources)?;
        Ok(Box::new(HostListening {
            socket,
            local: bound,
            stop,
        }))
    }

    fn connect(&self, dial: Dial, events: Arc<dyn ConnectEvents>) -> Result<(), NetError> {
        std::thread::Builder::new()
            .name("softndk-tcp-connect".into())
            .spawn(move || {
                let attempt = (|| {
                    let socket = socket_for(dial.local)?;
                    socket.bind(&dial.local.into())?;
                    socket.connect_timeout(
                        &dial.remote.into(),
                        Duration::from_millis(dial.timeout_ms.max(1)),
                    )?;
                    Ok::<TcpStream, io::Error>(socket.into())
                })();
                match attempt {
                    Ok(socket) => {
                        let sink = Arc::clone(&events);
                        if let Err(error) = hand_over(socket, |c| sink.connected(Ok(c))) {
                            // Not reported yet when wrapping failed before
                            // `connected` ran; a second report is ignored
                            // by the connection layer.
                            let _ = events.connected(Err(error));
                        }
                    }
                    Err(error) => {
                        let _ = events.connected(Err(net_error(&error)));
                    }
                }
            })
            .map_err(|_| NetError::Resources)?;
        Ok(())
    }

    fn timer(&self, at_ms: u64, timer: Arc<dyn Timer>) {
        timers().add(at_ms, timer);
    }
}

/// The process's timer thread: one-shot timers by due time.
struct Timers {
    due: Mutex<Vec<(u64, Arc<dyn Timer>)>>,
    wake: Condvar,
}

fn timers() -> &'static Timers {
    static TIMERS: OnceLock<&'static Timers> = OnceLock::new();
    TIMERS.get_or_init(|| {
        let timers: &'static Timers = Box::leak(Box::new(Timers {
            due: Mutex::new(Vec::new()),
            wake: Condvar::new(),
        }));
        let _ = std::thread::Builder::new()
            .name("softndk-timers".into())
            .spawn(move || timers.run());
        timers
    })
}

impl Timers {
    fn add(&self, at: u64, timer: Arc<dyn Timer>) {
        self.due
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((at, timer));
        self.wake.notify_one();
    }

    fn run(&self) {
        let mut due = self.due.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            let now = clock();
            if let Some(index) = due.iter().position(|(at, _)| *at <= now) {
                let (_, timer) = due.swap_remove(index);
                drop(due);
                timer.fire(now);
                due = self.due.lock().unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            let next = due.iter().map(|(at, _)| *at).min();
            due = match next {
                Some(at) => {
                    self.wake
                        .wait_timeout(due, Duration::from_millis(at.saturating_sub(now)))
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
                None => self.wake.wait(due).unwrap_or_else(PoisonError::into_inner),
            };
        }
    }
}

#[cfg(test)]
#[cfg(not(loom))]
mod tests {
    use super::{Flow, FlowKey, Forward, flow, flows, net};
    use crate::kernel::tcp_testing::Recorder;
    use alloc::sync::Arc;
    use std::sync::atomic::Ordering;

    /// `settle` waits for a flow only while bytes are missing and its
    /// reader, a stream of this process, still reads: a reset or closed
    /// reader takes its flow out of the table (bytes it will never hand
    /// over are not waited for), and bytes to another process are not
    /// waited for either.
    #[test]
    fn a_flow_is_in_flight_while_its_reader_reads_and_bytes_are_missing() {
        let key: FlowKey = (
            "127.0.99.1:1".parse().unwrap(),
            "127.0.99.2:2".parse().unwrap(),
        );
        let incoming: Arc<Flow> = flow(key);
        incoming.taken.fetch_add(10, Ordering::AcqRel);
        assert!(!incoming.in_flight(), "no reader of this process");
        incoming.reading.store(true, Ordering::Release);
        assert!(incoming.in_flight());
        let forward = Forward {
            _stream: None,
            events: Arc::new(Recorder::default()),
            incoming: Arc::clone(&incoming),
            key,
        };
        net::StreamEvents::received(&forward, &[0; 4]);
        assert!(incoming.in_flight(), "6 bytes still on their way");
        net::StreamEvents::received(&forward, &[0; 6]);
        assert!(!incoming.in_flight(), "all landed");
        incoming.taken.fetch_add(5, Ordering::AcqRel);
        assert!(incoming.in_flight());
        assert!(flows().contains_key(&key));
        net::StreamEvents::closed(&forward, true);
        assert!(!incoming.in_flight(), "the reader is gone");
        assert!(!flows().contains_key(&key), "and so is its flow");
    }

    /// A connection to a peer of another process (a plain socket here)
    /// leaves no flow in the process-wide table once it is over: only a
    /// reader of this process took one out, so each such connection left
    /// its outgoing flow for ever.
    #[test]
    fn a_flow_to_another_process_leaves_the_table_with_its_stream() {
        use super::{ConnectEvents, Connected, Dial, HostNet, NetError, StreamEvents};
        use std::sync::Mutex;
        struct Take(Mutex<Option<Connected>>, Arc<Recorder>);
        impl ConnectEvents for Take {
            fn connected(
                &self,
                result: Result<Connected, NetError>,
            ) -> Option<Arc<dyn StreamEvents>> {
                *self.0.lock().unwrap() = result.ok();
                Some(Arc::clone(&self.1) as Arc<dyn StreamEvents>)
            }
        }
        let listener = std::net::TcpListener::bind("127.0.97.1:0").unwrap();
        let remote = listener.local_addr().unwrap();
        let take = Arc::new(Take(Mutex::new(None), Arc::new(Recorder::default())));
        HostNet::shared()
            .connect(
                Dial {
                    local: "127.0.97.2:0".parse().unwrap(),
                    remote,
                    timeout_ms: 2_000,
                },
                Arc::clone(&take) as Arc<dyn ConnectEvents>,
            )
            .unwrap();
        let (peer, _) = listener.accept().unwrap();
        let connected =
            crate::kernel::testing::wait_some("connected", || take.0.lock().unwrap().take());
        let key = (connected.local, connected.peer);
        assert!(
            flows().contains_key(&key),
            "its outgoing flow, while it lives"
        );
        connected.stream.close(true);
        drop(peer);
        crate::kernel::testing::wait_until("the stream's end", || !take.1.closes().is_empty());
        drop(connected);
        crate::kernel::testing::wait_until("the flow gone with the stream", || {
            !flows().contains_key(&key)
        });
    }
}
