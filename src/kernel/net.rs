//! Host TCP byte streams (`std::net`), for the iWARP data path in host mode.
//! Host only: the kernel's streams will come from WSK.
//!
//! A [`TcpByteStream`] wraps a connected socket. Sending never blocks: bytes
//! go into a bounded buffer that a writer thread hands to the socket; when
//! the buffer is full, [`TcpByteStream::send`] takes what fits and the writer
//! thread calls [`StreamEvents::writable`] once it has made room. A reader
//! thread hands every received chunk to [`StreamEvents::received`] and
//! reports the end of the stream with [`StreamEvents::closed`] (`false` for
//! an orderly close, `true` for an error or reset). Events are called with
//! no lock of this module held.
//!
//! # Buffers (docs/performance.md, "Wire")
//! The send buffer is two buffers of `capacity` bytes, both allocated by
//! [`TcpByteStream::new`]: `send` appends to the one under the lock (one
//! `memcpy`), or [`TcpByteStream::send_with`] lends the next bytes of it to
//! the caller, who writes them in place (the link builds its FPDUs there,
//! a copy less), and the writer thread swaps it for its own, empty one and
//! writes the whole of it in as few system calls as the socket allows, with
//! no lock held. The reader reads up to [`READ_CHUNK`] bytes per system
//! call into a buffer small enough to stay in cache until the link has
//! placed the bytes: 64 KiB cost about 30 % less CPU per byte than 256 KiB
//! in the wire benchmark, although more FPDUs are cut in two by a read
//! (docs/performance.md, "Wire").
//!
//! # Close
//! An orderly close ([`TcpByteStream::close`]`(false)`) is a FIN once the
//! buffered bytes are written. An abortive one is an RST: `SO_LINGER` is
//! set to 0 (through `socket2`; `std` has no setter), so that closing the
//! socket resets the connection; on Linux the connection is also dissolved
//! at once (`connect` to `AF_UNSPEC`, connect(2)), which sends the RST even
//! while another descriptor of the socket is open and wakes both threads.
//! Elsewhere the reader is woken by a shutdown of the receive direction
//! (which sends nothing), the writer by the close itself (a blocked write
//! gives up within [`WRITE_POLL`]), and the RST goes when the last
//! descriptor closes. Either way the peer's next read fails with
//! `ECONNRESET`. `closed` still comes once, last, after this side's
//! abortive close too: as `closed(false)`, the end of a stream this side
//! ended (not a reset by the peer). An abortive close after an orderly one
//! still resets. A peer's reset whose error the writer's `write` took (the
//! system reports it once) still reports `closed(true)`: the reader, at
//! the end of the stream, asks the writer.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::time::Duration;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::{Condvar, Mutex, PoisonError};

/// What a stream reports to its user: the platform's stream events
/// ([`super::tcp::StreamEvents`], which `tcp_host` forwards them to). Here
/// `closed` comes once, last, also after this side's abortive `close`, with
/// `false`.
pub use super::tcp::StreamEvents;

struct Outgoing {
    /// `capacity` bytes, of which the first `filled` were taken by `send`
    /// (or written in place by `send_with`) and not yet handed to the
    /// writer thread.
    buf: Vec<u8>,
    filled: usize,
    /// The writer thread's buffer until `start` hands it over.
    spare: Option<Vec<u8>>,
    /// `close` was called: `Some(abortive)`.
    closing: Option<bool>,
    /// A `send` took less than offered.
    want_writable: bool,
    /// The writer thread's system calls, as the reader needs them.
    calls: WriteCalls,
}

/// What the reader learns of the writer's `write` calls
/// ([`TcpByteStream::reset_seen_by_writer`]).
#[derive(Default)]
struct WriteCalls {
    /// A `write` is under way.
    busy: bool,
    /// A `write` failed (a reset, a broken connection).
    failed: bool,
    /// The reader waits for the `write` under way to return.
    awaited: bool,
}

/// A connected TCP socket with a bounded send buffer.
pub struct TcpByteStream {
    /// The socket, shared with the reader and writer threads (no duplicate
    /// descriptor: the socket closes when the last holder lets go). `None`
    /// once an abortive close gave it up.
    socket: Mutex<Option<Arc<TcpStream>>>,
    out: Mutex<Outgoing>,
    wake: Condvar,
    /// A `write` returned (for the reader, at the end of the stream).
    written: Condvar,
    capacity: usize,
    mss: u32,
}

/// Bytes read per system call.
pub const READ_CHUNK: usize = 64 * 1024;

/// How long a write blocked on a full socket waits before it looks whether
/// an abortive close wants it to give up (then it tries again).
pub const WRITE_POLL: Duration = Duration::from_millis(50);

/// The MSS reported when the socket does not tell: Ethernet's (a 1500-byte
/// MTU less 40 bytes of IPv4 and TCP headers).
pub const FALLBACK_MSS: u32 = 1460;

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A buffer of `capacity` bytes (zeroed), allocated now.
fn buffer(capacity: usize) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    buf.try_reserve_exact(capacity)
        .map_err(|_| io::Error::from(io::ErrorKind::OutOfMemory))?;
    buf.resize(capacity, 0);
    Ok(buf)
}

/// The socket's maximum segment size (`TCP_MAXSEG`), or [`FALLBACK_MSS`].
#[cfg(unix)]
fn mss_of(socket: &TcpStream) -> u32 {
    socket2::SockRef::from(socket)
        .tcp_mss()
        .ok()
        .filter(|&mss| mss > 0)
        .unwrap_or(FALLBACK_MSS)
}

#[cfg(not(unix))]
fn mss_of(_socket: &TcpStream) -> u32 {
    FALLBACK_MSS
}

impl TcpByteStream {
    /// Wraps `socket` with a send buffer of `capacity` bytes (two of them:
    /// see the module docs).
    ///
    /// # Errors
    /// When memory for the buffers cannot be had, or the socket refuses an
    /// option.
    pub fn new(socket: TcpStream, capacity: usize) -> io::Result<Arc<Self>> {
        let buf = buffer(capacity)?;
        let spare = buffer(capacity)?;
        socket.set_nodelay(true)?;
        socket.set_write_timeout(Some(WRITE_POLL))?;
        let mss = mss_of(&socket);
        Ok(Arc::new(Self {
            socket: Mutex::new(Some(Arc::new(socket))),
            out: Mutex::new(Outgoing {
                buf,
                filled: 0,
                spare: Some(spare),
                closing: None,
                want_writable: false,
                calls: WriteCalls::default(),
            }),
            wake: Condvar::new(),
            written: Condvar::new(),
            capacity,
            mss,
        }))
    }

    /// The socket's maximum segment size (`TCP_MAXSEG`, read when the
    /// stream was made), or [`FALLBACK_MSS`] where the platform does not
    /// tell. The MULPDU is `rnic::iwarp::mpa::mulpdu` of it (RFC 5044 §6).
    pub const fn mss(&self) -> u32 {
        self.mss
    }

    /// The socket's local address (`None` after an abortive close).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        lock(&self.socket).as_ref()?.local_addr().ok()
    }

    /// The peer's address (`None` after an abortive close).
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        lock(&self.socket).as_ref()?.peer_addr().ok()
    }

    /// Starts the reader and writer threads, reporting to `events`.
    ///
    /// # Errors
    /// When a thread cannot be started, or the stream was started before
    /// or closed abortively.
    pub fn start(self: &Arc<Self>, events: Arc<dyn StreamEvents>) -> io::Result<()> {
        let socket = lock(&self.socket)
            .clone()
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected))?;
        let inflight = lock(&self.out)
            .spare
            .take()
            .ok_or_else(|| io::Error::from(io::ErrorKind::AlreadyExists))?;
        let reader = Arc::clone(&socket);
        let read_events = Arc::clone(&events);
        let this = Arc::clone(self);
        std::thread::Builder::new()
            .name("softndk-tcp-rx".into())
            .spawn(move || read_loop(&reader, &this, read_events.as_ref()))?;
        let this = Arc::clone(self);
        std::thread::Builder::new()
            .name("softndk-tcp-tx".into())
            .spawn(move || this.write_loop(&socket, inflight, events.as_ref()))?;
        Ok(())
    }

    fn write_loop(&self, socket: &TcpStream, mut inflight: Vec<u8>, events: &dyn StreamEvents) {
        loop {
            let (closing, wake_user, batch) = {
                let mut out = lock(&self.out);
                while out.filled == 0 && out.closing.is_none() {
                    out = self.wake.wait(out).unwrap_or_else(PoisonError::into_inner);
                }
                core::mem::swap(&mut out.buf, &mut inflight);
                (
                    out.closing,
                    core::mem::take(&mut out.want_writable),
                    core::mem::take(&mut out.filled),
                )
            };
            if closing == Some(true) {
                // Abortive: nothing more goes out (`close` dropped the
                // buffer); letting go of the socket lets it close.
                return;
            }
            if wake_user {
                // The buffer is empty again: the user refills it (the
                // link's runner, inline or on its worker) while this batch
                // is written.
                events.writable();
            }
            let write_failed = self
                .write_all(socket, inflight.get(..batch).unwrap_or_default())
                .is_err();
            let (drained, closing) = {
                let out = lock(&self.out);
                (out.filled == 0, out.closing)
            };
            if write_failed || closing == Some(true) {
                return;
            }
            if closing == Some(false) && drained {
                let _ = socket.shutdown(Shutdown::Write);
                return;
            }
        }
    }

    /// Writes all of `bytes`; gives up on an error or an abortive close.
    fn write_all(&self, mut socket: &TcpStream, bytes: &[u8]) -> io::Result<()> {
        let mut rest = bytes;
        while !rest.is_empty() {
            lock(&self.out).calls.busy = true;
            let result = socket.write(rest);
            self.wrote(&result);
            match result {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => rest = rest.get(n..).unwrap_or_default(),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    // `WRITE_POLL` passed with the socket full.
                    if lock(&self.out).closing == Some(true) {
                        return Err(e);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Records that a `write` returned: whether it failed for good (not a
    /// time-out of [`WRITE_POLL`] nor an interruption), and wakes a reader
    /// waiting for it.
    fn wrote(&self, result: &io::Result<usize>) {
        let failed = match result {
            Ok(n) => *n == 0,
            Err(e) => !matches!(
                e.kind(),
                io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
        };
        let mut out = lock(&self.out);
        out.calls.busy = false;
        out.calls.failed |= failed;
        let wake = core::mem::take(&mut out.calls.awaited);
        drop(out);
        if wake {
            self.written.notify_all();
        }
    }

    /// The reader met the end of the stream: whether it was a reset all
    /// the same. Linux reports a reset's error (`ECONNRESET`) to one system
    /// call only: when the writer's `write` took it, the reader's `read`
    /// sees a plain end of stream. A `write` failing means the connection
    /// broke, so the end counts as a reset; a `write` under way is waited
    /// for (it returns within [`WRITE_POLL`], the socket's write time-out),
    /// as it may be the one taking the error. (This reported a peer's RST
    /// as an orderly close now and then: the connection layer took it for
    /// the peer's graceful disconnect and left the QP connected.)
    fn reset_seen_by_writer(&self) -> bool {
        let mut out = lock(&self.out);
        while out.calls.busy {
            out.calls.awaited = true;
            out = self
                .written
                .wait(out)
                .unwrap_or_else(PoisonError::into_inner);
        }
        out.calls.failed
    }

    /// Takes as much of `bytes` as the buffer has room for; 0 after `close`.
    pub fn send(&self, bytes: &[u8]) -> usize {
        let mut out = lock(&self.out);
        if out.closing.is_some() {
            return 0;
        }
        let at = out.filled;
        let n = bytes.len().min(self.capacity.saturating_sub(at));
        let Some(room) = out.buf.get_mut(at..at + n) else {
            return 0;
        };
        room.copy_from_slice(bytes.get(..n).unwrap_or_default());
        out.filled = at + n;
        if n < bytes.len() {
            out.want_writable = true;
        }
        drop(out);
        if at == 0 && n > 0 {
            // The writer waits only on an empty buffer.
            self.wake.notify_one();
        }
        n
    }

    /// Lends the next `len` bytes of the send buffer to `fill` (with the
    /// buffer's lock held) and takes them when it returns `true`; see
    /// `kernel::tcp::Stream::send_with`. `None` when they do not fit (a
    /// `writable` then follows once the writer has made room) or after
    /// `close`; `fill` is not called then.
    pub fn send_with(&self, len: usize, fill: &mut dyn FnMut(&mut [u8]) -> bool) -> Option<bool> {
        let mut out = lock(&self.out);
        if out.closing.is_some() {
            return None;
        }
        let at = out.filled;
        if len > self.capacity.saturating_sub(at) {
            out.want_writable = true;
            return None;
        }
        let room = out.buf.get_mut(at..at + len)?;
        if !fill(room) {
            return Some(false);
        }
        out.filled = at + len;
        drop(out);
        if at == 0 && len > 0 {
            self.wake.notify_one();
        }
        Some(true)
    }

    /// Closes the stream: orderly (a FIN) once the buffered bytes are
    /// written, or `abortive`: drops them and resets the connection (an
    /// RST, see the module docs).
    pub fn close(&self, abortive: bool) {
        let mut out = lock(&self.out);
        // An abortive close after an orderly one still resets.
        if abortive || out.closing.is_none() {
            out.closing = Some(abortive);
            if abortive {
                out.filled = 0;
            }
        }
        drop(out);
        self.wake.notify_one();
        if abortive {
            let socket = lock(&self.socket).take();
            if let Some(socket) = socket {
                let _ = socket2::SockRef::from(&*socket).set_linger(Some(Duration::ZERO));
                if dissolve(&socket).is_err() {
                    // Wakes a blocked reader and sends nothing.
                    let _ = socket.shutdown(Shutdown::Read);
                }
            }
        }
    }
}

/// Resets the connection now: `connect` to an `AF_UNSPEC` address
/// dissolves a TCP socket's association (connect(2)), sending an RST from
/// an established state and waking every thread blocked on the socket.
#[cfg(target_os = "linux")]
fn dissolve(socket: &TcpStream) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let unspec = libc::sockaddr {
        sa_family: libc::sa_family_t::try_from(libc::AF_UNSPEC)
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?,
        sa_data: [0; 14],
    };
    let len = libc::socklen_t::try_from(size_of::<libc::sockaddr>())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: the descriptor is open (`socket` owns it and is borrowed for
    // the call); `unspec` is a whole `sockaddr` of `len` bytes, alive and
    // only read for the call.
    let rc = unsafe { libc::connect(socket.as_raw_fd(), &raw const unspec, len) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn dissolve(_socket: &TcpStream) -> io::Result<()> {
    Err(io::ErrorKind::Unsupported.into())
}

impl TcpByteStream {
    /// This side closed abortively.
    fn aborted(&self) -> bool {
        lock(&self.out).closing == Some(true)
    }
}

fn read_loop(mut socket: &TcpStream, stream: &TcpByteStream, events: &dyn StreamEvents) {
    let mut buf = alloc::vec![0_u8; READ_CHUNK];
    loop {
        let abortive = match socket.read(&mut buf) {
            Ok(0) => stream.reset_seen_by_writer(),
            Ok(n) => {
                events.received(buf.get(..n).unwrap_or_default());
                continue;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => true,
        };
        // After this side's own abort the reader sees its own reset: it
        // reports an end, not a reset by the peer (as before the RST).
        events.closed(abortive && !stream.aborted());
        return;
    }
}

#[cfg(test)]
#[cfg(not(loom))]
mod tests;
