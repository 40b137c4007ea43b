//! The platform's TCP, as the iWARP transport sees it: listening sockets,
//! outgoing connects, connected byte streams and a one-shot timer.
//!
//! Only traits and plain data: the host implements them over `std::net`
//! ([`super::tcp_host`]), the driver will over WSK. `rnic::cm` drives
//! connections through a [`Net`] and never blocks on one: a connect reports
//! back through [`ConnectEvents`], a listener through [`AcceptEvents`], a
//! stream through [`StreamEvents`]. Every event is called with no lock of
//! the platform held, and may call back into the platform.

use alloc::boxed::Box;
use core::net::SocketAddr;

use super::sync::Arc;

/// A connected stream's sending half.
pub trait Stream: Send + Sync {
    /// Offers `bytes`; returns how many were taken (0 to all). After a
    /// short count the platform calls [`StreamEvents::writable`] once it has
    /// room again. 0 once closed.
    fn send(&self, bytes: &[u8]) -> usize;
    /// Sends `len` bytes written in place: when `len` bytes fit in the
    /// send buffer now, lends them to `fill`, which writes all of them;
    /// `Some(true)` when it did and the bytes were taken (as if by
    /// [`Stream::send`]), `Some(false)` when `fill` refused and nothing was
    /// taken. `None` when the space is not there (or the stream is closed),
    /// without calling `fill`: offer the bytes through `send` instead, which
    /// takes what fits and arranges [`StreamEvents::writable`]. `fill` runs
    /// with the stream's send lock held: it must only write the bytes (no
    /// call into the stream or the platform). The default lends nothing, so
    /// every caller keeps working through `send` (one copy more).
    fn send_with(&self, len: usize, fill: &mut dyn FnMut(&mut [u8]) -> bool) -> Option<bool> {
        let _ = (len, fill);
        None
    }
    /// Closes: `abortive` resets the connection (RST) and drops what is not
    /// sent; otherwise an orderly close (FIN) once every byte taken is out.
    /// Receiving goes on after an orderly close until the peer closes too.
    /// May be called more than once: an abortive close after an orderly one
    /// still resets; later calls change nothing else.
    fn close(&self, abortive: bool);
}

/// What a stream reports, in order, from the platform's context.
pub trait StreamEvents: Send + Sync {
    /// Bytes received, in order.
    fn received(&self, bytes: &[u8]);
    /// Room again after a short [`Stream::send`].
    fn writable(&self);
    /// The peer closed (`abortive`: reset, or an error). Called once, last.
    fn closed(&self, abortive: bool);
}

/// A stream just connected or accepted.
pub struct Connected {
    /// Its sending half.
    pub stream: Arc<dyn Stream>,
    /// The local address and port.
    pub local: SocketAddr,
    /// The peer's address and port.
    pub peer: SocketAddr,
    /// The largest TCP segment payload the connection sends (the MSS), for
    /// MPA's FPDU size (RFC 5044 §6).
    pub mss: u16,
}

/// Why a connect or listen failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetError {
    /// The peer answered the SYN with a reset: nothing listens there.
    Refused,
    /// No answer within the time allowed.
    TimedOut,
    /// No route to the network or host.
    Unreachable,
    /// The local address and port are taken.
    AddressInUse,
    /// The local address is not one of this machine's.
    AddressNotAvailable,
    /// Out of memory or threads.
    Resources,
    /// Anything else the platform reported.
    Failed,
}

/// A connect to make ([`Net::connect`]): the one parameter list every
/// platform's connect takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dial {
    /// The local address and port to connect from (port 0: any).
    pub local: SocketAddr,
    /// The peer's address and port.
    pub remote: SocketAddr,
    /// How long the connect may take, in ms, before it gives up
    /// ([`NetError::TimedOut`]).
    pub timeout_ms: u64,
}

/// What a connect reports.
pub trait ConnectEvents: Send + Sync {
    /// The connect ended. On success the returned sink receives the
    /// stream's events from now on (`None` closes the stream at once).
    fn connected(&self, result: Result<Connected, NetError>) -> Option<Arc<dyn StreamEvents>>;
}

/// What a listening socket reports.
pub trait AcceptEvents: Send + Sync {
    /// A connection arrived. The returned sink receives its events (`None`
    /// resets it).
    fn accepted(&self, connection: Connected) -> Option<Arc<dyn StreamEvents>>;
    /// The bind of the listening socket on `local` that was still under way
    /// when [`Net::listen`] returned ([`Listening::bound`] `false`) is over:
    /// `Ok` listening, or why not ([`NetError::AddressInUse`] for a port
    /// another program holds). Called exactly once for such a socket, with
    /// no lock of the platform held, possibly before the caller has looked
    /// at what `listen` returned; never for a socket bound within `listen`.
    fn bound(&self, local: SocketAddr, result: Result<(), NetError>) {
        let _ = (local, result);
    }
}

/// A listening socket; dropping it stops listening (connections already
/// accepted are not affected).
pub trait Listening: Send + Sync {
    /// The address and port it listens on (the port the platform picked
    /// when asked for port 0).
    fn local(&self) -> SocketAddr;
    /// Whether the socket was bound when [`Net::listen`] returned. A
    /// platform whose bind is asynchronous (WSK) may return before it is:
    /// then `false`, and [`AcceptEvents::bound`] reports the outcome.
    fn bound(&self) -> bool {
        true
    }
}

/// A one-shot timer's callback.
pub trait Timer: Send + Sync {
    /// The time came (`now`: the clock, in ms).
    fn fire(&self, now: u64);
}

/// The platform's TCP.
pub trait Net: Send + Sync {
    /// A monotonic clock, in ms.
    fn now_ms(&self) -> u64;
    /// Listens on `local` (port 0: any free port). The socket may still be
    /// binding when this returns ([`Listening::bound`]).
    ///
    /// # Errors
    /// [`NetError::AddressInUse`], [`NetError::AddressNotAvailable`],
    /// [`NetError::Resources`], [`NetError::Failed`].
    fn listen(
        &self,
        local: SocketAddr,
        events: Arc<dyn AcceptEvents>,
    ) -> Result<Box<dyn Listening>, NetError>;
    /// Connects as `dial` says; the outcome comes through `events`, never
    /// from within this call.
    ///
    /// # Errors
    /// When the attempt cannot even start ([`NetError::Resources`]).
    fn connect(&self, dial: Dial, events: Arc<dyn ConnectEvents>) -> Result<(), NetError>;
    /// Calls `timer` once the clock reaches `at_ms` (at once if it has).
    fn timer(&self, at_ms: u64, timer: Arc<dyn Timer>);
}
