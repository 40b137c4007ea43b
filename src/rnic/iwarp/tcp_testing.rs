//! What the tests running the iWARP connection over real TCP on 127.0.0.1
//! share (`conn/tests.rs`, `conn/hostile_tests.rs`, `link/tcp_tests.rs`):
//! a connected pair of sockets, the socket as a link's [`ByteStream`], the
//! glue routing a socket's events to a [`Conn`], and bounded waits.

use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, Ordering};
use std::net::{TcpListener, TcpStream};
use std::panic::AssertUnwindSafe;
use std::sync::OnceLock;

use crate::kernel::net::{StreamEvents, TcpByteStream};
use crate::kernel::sync::{Arc, Weak};
use crate::rnic::iwarp::conn::{Conn, ConnEvents, ConnParts, LinkParams};
use crate::rnic::iwarp::link::ByteStream;
use crate::rnic::qp::QpState;
use crate::rnic::testing::{Side, TestCq};
use crate::rnic::types::Completion;

// Every wait on another thread or the peer ends within `WAIT`; the kernel's
// socket tests wait the same way.
use crate::kernel::testing::waited;
pub(crate) use crate::kernel::testing::{WAIT, wait_until};

/// The clock a `Conn` runs on, in ms.
pub(crate) fn now() -> u64 {
    crate::kernel::time::now_100ns() / 10_000
}

/// A connection's parts on `stream`, its link built with `params`, its
/// setup starting [`now`].
pub(crate) fn parts(
    stream: Arc<dyn ByteStream>,
    params: LinkParams,
    events: Arc<dyn ConnEvents>,
) -> ConnParts {
    ConnParts {
        stream,
        params,
        events,
        now: now(),
    }
}

/// Waits (bounded) until `side`'s QP is in `state`; returns the state it
/// is in then.
pub(crate) fn wait_state(side: &Side, state: QpState) -> QpState {
    waited(|| side.qp.state() == state);
    side.qp.state()
}

/// Polls `cq` until `n` completions are in (bounded in count and time);
/// returns what came, fewer on a time-out.
pub(crate) fn completions(cq: &TestCq, n: usize) -> Vec<Completion> {
    let mut got = Vec::new();
    waited(|| {
        got.extend(cq.drain());
        got.len() >= n
    });
    got
}

/// A connected pair of sockets: (client, server).
pub(crate) fn sockets() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    (client, server)
}

/// The socket as a link's stream (copying `send`; it lends no room).
impl ByteStream for TcpByteStream {
    fn send(&self, bytes: &[u8]) -> usize {
        Self::send(self, bytes)
    }
    fn close(&self, abortive: bool) {
        Self::close(self, abortive);
    }
}

/// A socket's events to its connection; a panic on a socket thread is
/// caught and remembered (it would otherwise only kill that thread).
#[derive(Default)]
pub(crate) struct Glue {
    conn: OnceLock<Arc<Conn>>,
    panicked: AtomicBool,
}

impl Glue {
    fn guard(&self, f: impl FnOnce(&Conn)) {
        if let Some(conn) = self.conn.get()
            && std::panic::catch_unwind(AssertUnwindSafe(|| f(conn))).is_err()
        {
            self.panicked.store(true, Ordering::SeqCst);
        }
    }

    /// Whether a socket thread panicked in the connection.
    pub(crate) fn panicked(&self) -> bool {
        self.panicked.load(Ordering::SeqCst)
    }
}

impl StreamEvents for Glue {
    fn received(&self, bytes: &[u8]) {
        self.guard(|conn| conn.received(bytes, now()));
    }
    fn writable(&self) {
        self.guard(Conn::writable);
    }
    fn closed(&self, abortive: bool) {
        self.guard(|conn| conn.closed(abortive));
    }
}

/// A `Conn` on a socket, its events flowing.
pub(crate) struct Started {
    pub(crate) conn: Arc<Conn>,
    pub(crate) glue: Arc<Glue>,
    /// The socket stream, gone once its reader and writer threads end.
    pub(crate) stream: Weak<TcpByteStream>,
}

/// Makes the connection over `socket` (`make` gets the socket's stream)
/// and starts the socket's events to it.
pub(crate) fn start(
    socket: TcpStream,
    make: impl FnOnce(Arc<dyn ByteStream>) -> Arc<Conn>,
) -> Started {
    let stream = TcpByteStream::new(socket, 16 * 1024).unwrap();
    let conn = make(Arc::clone(&stream) as Arc<dyn ByteStream>);
    let glue = Arc::new(Glue::default());
    glue.conn.set(Arc::clone(&conn)).ok().unwrap();
    stream
        .start(Arc::clone(&glue) as Arc<dyn StreamEvents>)
        .unwrap();
    Started {
        conn,
        glue,
        stream: Arc::downgrade(&stream),
    }
}
