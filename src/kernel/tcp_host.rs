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

/// Bytes every stream of the process has taken for sending, and handed to
/// its receiver: equal when nothing is in flight between two streams of
/// this process ([`settle`]).
static TAKEN: AtomicU64 = AtomicU64::new(0);
static DELIVERED: AtomicU64 = AtomicU64::new(0);

/// Waits (at most `limit`) until every byte a stream of this process took
/// has been received and handed over by its peer stream — the wire is
/// idle — or until neither count has moved for `quiet` (bytes to or from
/// another process, or dropped by a reset, never balance). For tests that
/// run both ends in one process: an RDMA Write completes at its initiator
/// once sent, and its data lands at the target a moment later.
pub fn settle(limit: Duration, quiet: Duration) {
    let start = Instant::now();
    let mut last = (
        TAKEN.load(Ordering::Acquire),
        DELIVERED.load(Ordering::Acquire),
    );
    let mut still = Instant::now();
    while start.elapsed() < limit {
        let now = (
            TAKEN.load(Ordering::Acquire),
            DELIVERED.load(Ordering::Acquire),
        );
        if now.0 == now.1 {
            return;
        }
        if now == last {
            if still.elapsed() >= quiet {
                return;
            }
        } else {
            last = now;
            still = Instant::now();
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

impl Stream for TcpByteStream {
    fn send(&self, bytes: &[u8]) -> usize {
        let n = Self::send(self, bytes);
        TAKEN.fetch_add(n as u64, Ordering::AcqRel);
        n
    }

    fn send_with(&self, len: usize, fill: &mut dyn FnMut(&mut [u8]) -> bool) -> Option<bool> {
        let taken = Self::send_with(self, len, fill);
        if taken == Some(true) {
            TAKEN.fetch_add(len as u64, Ordering::AcqRel);
        }
        taken
    }

    fn close(&self, abortive: bool) {
        Self::close(self, abortive);
    }
}

/// Forwards the host stream's events to the platform-neutral sink.
struct Forward(Arc<dyn StreamEvents>);

impl net::StreamEvents for Forward {
    fn received(&self, bytes: &[u8]) {
        self.0.received(bytes);
        DELIVERED.fetch_add(bytes.len() as u64, Ordering::AcqRel);
    }

    fn writable(&self) {
        self.0.writable();
    }

    fn closed(&self, abortive: bool) {
        self.0.closed(abortive);
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
    let connected = Connected {
        stream: Arc::clone(&stream) as Arc<dyn Stream>,
        local,
        peer,
        mss,
    };
    if let Some(events) = give(connected) {
        stream
            .start(Arc::new(Forward(events)))
            .map_err(|e| net_error(&e))
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
