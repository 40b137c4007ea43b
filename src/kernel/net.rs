//! Host TCP byte streams (`std::net`), for the iWARP data path in host mode.
//! Host only: the kernel's streams will come from WSK.
//!
//! A [`TcpByteStream`] wraps a connected socket. Sending never blocks: bytes
//! go into a bounded buffer (allocated once) that a writer thread drains
//! into the socket; when the buffer is full, [`TcpByteStream::send`] takes
//! what fits and the writer thread calls [`StreamEvents::writable`] once it
//! has made room. A reader thread hands every received chunk to
//! [`StreamEvents::received`] and reports the end of the stream with
//! [`StreamEvents::closed`] (`false` for an orderly close, `true` for an
//! error or reset). Events are called with no lock of this module held.

use alloc::collections::VecDeque;
use alloc::sync::Arc;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::{Condvar, Mutex, PoisonError};

/// What a stream reports to its user.
pub trait StreamEvents: Send + Sync {
    /// Bytes received, in order.
    fn received(&self, bytes: &[u8]);
    /// The send buffer has room again after a short `send`.
    fn writable(&self);
    /// The peer closed the stream (`abortive`: reset or error). Called once.
    fn closed(&self, abortive: bool);
}

struct Outgoing {
    buf: VecDeque<u8>,
    /// `close` was called: `Some(abortive)`.
    closing: Option<bool>,
    /// A `send` took less than offered.
    want_writable: bool,
}

/// A connected TCP socket with a bounded send buffer.
pub struct TcpByteStream {
    socket: TcpStream,
    out: Mutex<Outgoing>,
    wake: Condvar,
    capacity: usize,
}

/// Bytes read or written per system call.
const CHUNK: usize = 64 * 1024;

impl TcpByteStream {
    /// Wraps `socket` with a send buffer of `capacity` bytes.
    ///
    /// # Errors
    /// When memory for the buffer cannot be had.
    pub fn new(socket: TcpStream, capacity: usize) -> io::Result<Arc<Self>> {
        let mut buf = VecDeque::new();
        buf.try_reserve_exact(capacity)
            .map_err(|_| io::Error::from(io::ErrorKind::OutOfMemory))?;
        socket.set_nodelay(true)?;
        Ok(Arc::new(Self {
            socket,
            out: Mutex::new(Outgoing {
                buf,
                closing: None,
                want_writable: false,
            }),
            wake: Condvar::new(),
            capacity,
        }))
    }

    /// Starts the reader and writer threads, reporting to `events`.
    ///
    /// # Errors
    /// When the socket cannot be cloned or a thread cannot be started.
    pub fn start(self: &Arc<Self>, events: Arc<dyn StreamEvents>) -> io::Result<()> {
        let mut reader = self.socket.try_clone()?;
        let read_events = Arc::clone(&events);
        std::thread::Builder::new()
            .name("softndk-tcp-rx".into())
            .spawn(move || {
                let mut buf = alloc::vec![0_u8; CHUNK];
                loop {
                    match reader.read(&mut buf) {
                        Ok(0) => {
                            read_events.closed(false);
                            return;
                        }
                        Ok(n) => read_events.received(buf.get(..n).unwrap_or_default()),
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(_) => {
                            read_events.closed(true);
                            return;
                        }
                    }
                }
            })?;
        let this = Arc::clone(self);
        std::thread::Builder::new()
            .name("softndk-tcp-tx".into())
            .spawn(move || this.write_loop(events.as_ref()))?;
        Ok(())
    }

    fn write_loop(&self, events: &dyn StreamEvents) {
        let mut chunk = alloc::vec![0_u8; CHUNK];
        let mut socket = &self.socket;
        loop {
            let (n, closing) = {
                let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
                while out.buf.is_empty() && out.closing.is_none() {
                    out = self.wake.wait(out).unwrap_or_else(PoisonError::into_inner);
                }
                let n = out.buf.len().min(CHUNK);
                for (dst, src) in chunk.iter_mut().zip(out.buf.drain(..n)) {
                    *dst = src;
                }
                (n, out.closing)
            };
            let write_failed = chunk
                .get(..n)
                .is_none_or(|bytes| socket.write_all(bytes).is_err());
            let wake_user = {
                let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
                core::mem::take(&mut out.want_writable)
            };
            if wake_user && !write_failed {
                events.writable();
            }
            let drained = self
                .out
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .buf
                .is_empty();
            if write_failed || (closing.is_some() && drained) {
                let how = if closing == Some(false) && !write_failed {
                    Shutdown::Write
                } else {
                    Shutdown::Both
                };
                let _ = self.socket.shutdown(how);
                return;
            }
        }
    }

    /// Takes as much of `bytes` as the buffer has room for; 0 after `close`.
    pub fn send(&self, bytes: &[u8]) -> usize {
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        if out.closing.is_some() {
            return 0;
        }
        let n = bytes.len().min(self.capacity.saturating_sub(out.buf.len()));
        out.buf.extend(bytes.get(..n).unwrap_or_default());
        if n < bytes.len() {
            out.want_writable = true;
        }
        drop(out);
        self.wake.notify_one();
        n
    }

    /// Closes the stream once the buffered bytes are written (`abortive`:
    /// drops them and shuts both directions down at once).
    pub fn close(&self, abortive: bool) {
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        if out.closing.is_none() {
            out.closing = Some(abortive);
            if abortive {
                out.buf.clear();
            }
        }
        drop(out);
        self.wake.notify_one();
        if abortive {
            let _ = self.socket.shutdown(Shutdown::Both);
        }
    }
}
