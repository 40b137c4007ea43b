//! Connections over the wire (issue 8): the connection state machine of
//! `connection.rs` with the peer across TCP instead of on this fabric.
//!
//! A device on the wire (its node carries a [`Wire`]: the platform's
//! [`Net`] and the [`ConnTimeouts`]) reaches every peer through TCP, even
//! one of the same process. Its connectors have no peer record; a
//! [`WireConn`] stands where the peer would be. What a local peer's
//! transition would do to this side arrives instead as an event of the
//! connection's [`Conn`] (the MPA exchange, then the QP's link) or of the
//! stream, and is turned here into the same transition under the fabric's
//! lock; what this side's transitions would do to a local peer becomes a
//! [`WireOp`], run after the lock like every callback (I4).
//!
//! | NDK | wire |
//! |---|---|
//! | Listen | a TCP listener on the address and port (N30: ND port = TCP port) |
//! | Connect | TCP connect, then the MPA request (IRD/ORD = read limits, N20; private data) |
//! | connect event | the request arrived |
//! | Accept | the MPA reply; completes when the RTR arrives (N15) |
//! | Connect completes | the reply accepted (N13) |
//! | CompleteConnect | the RTR goes out and the link starts |
//! | Reject (passive) | the MPA reject, then FIN: the peer's Connect is refused (N16) |
//! | Reject (active), close before established | RST: the peer's Accept is aborted |
//! | Disconnect | FIN; the peer's FIN answers it (X1 a); no answer within the disconnect time-out: RST, `IO_TIMEOUT` (N26) |
//! | peer's FIN | disconnect indication (X2), no flush (N24) |
//! | peer's RST, Terminate | abort: QP in error, indication (E5, X2) |
//! | nothing listening / no answer | `CONNECTION_REFUSED` / `IO_TIMEOUT` (N12) |

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::net::SocketAddr;

use super::BACKLOG;
use super::address::{Endpoint, IpAddr};
use super::connection::{Accept, Admitted, Call, Request};
use super::fabric::{Fabric, LostHandler};
use super::slab::Key;
use super::state::{
    Action, Actions, Callout, ConnectorRec, Ending, Role, State, count_established,
};
use super::types::{CmError, ConnState, ReadLimits};
use crate::kernel::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use crate::kernel::sync::{Arc, SpinLock, Weak};
use crate::kernel::tcp::{
    AcceptEvents, ConnectEvents, Connected, Dial, Listening, Net, NetError, Stream, StreamEvents,
    Timer,
};
use crate::rnic::iwarp::conn::{Conn, ConnEvents, ConnFailure, ConnParts, Finish, LinkParams};
use crate::rnic::iwarp::link::{ByteStream, Link};
use crate::rnic::iwarp::mpa::{self, MAX_IRD_ORD, RtrKinds};
use crate::rnic::iwarp::setup::{Established, InitiatorConfig, PeerRequest, ResponderConfig};
use crate::rnic::qp::{Qp, QpState};

/// How long each wait on a wire peer may last, in ms (configurable per
/// device; tests make them short).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnTimeouts {
    /// The TCP connect (N12: `IO_TIMEOUT`).
    pub connect_ms: u64,
    /// The MPA reply after the request (N12).
    pub reply_ms: u64,
    /// The MPA request once a TCP connection was accepted.
    pub request_ms: u64,
    /// The RTR after the reply: the passive Accept fails `IO_TIMEOUT` (N15).
    pub rtr_ms: u64,
    /// The peer's FIN after this side's Disconnect: then an RST, and the
    /// Disconnect fails `IO_TIMEOUT` (N26). Also how long a stream this
    /// side closes in order, or whose last bytes wait for room (a peer
    /// that reads nothing), may take to drain: then it is reset (issue 8).
    pub disconnect_ms: u64,
}

impl Default for ConnTimeouts {
    fn default() -> Self {
        Self {
            connect_ms: 5_000,
            reply_ms: 10_000,
            request_ms: 5_000,
            rtr_ms: 5_000,
            disconnect_ms: 5_000,
        }
    }
}

/// A device's wire: the platform's TCP and the time-outs.
#[derive(Clone)]
pub struct Wire {
    /// The platform's TCP.
    pub net: Arc<dyn Net>,
    /// The waits' limits.
    pub timeouts: ConnTimeouts,
}

impl core::fmt::Debug for Wire {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Wire")
            .field("timeouts", &self.timeouts)
            .finish_non_exhaustive()
    }
}

/// The consumer's passive decision is never timed out (N29); the
/// initiator's reply time-out bounds it from the other side.
const NO_DECISION_TIMEOUT_MS: u64 = u64::MAX / 4;

/// The most private data a request or reply carries with the RFC 6581
/// block (MPA revision 2).
pub const MAX_WIRE_PRIVATE_DATA: usize = mpa::MAX_PRIVATE_DATA - mpa::ENHANCED_LEN;

/// The link's stream: the platform's, seen through `link::ByteStream`.
/// An orderly close, or a link stalled at the end of the connection,
/// arms the drain time-out (`disconnect_ms`): then the stream is reset
/// (issue 8: a peer that reads nothing kept the stream, its threads, the
/// link and the QP alive for as long as it liked).
struct Pipe {
    stream: Arc<dyn Stream>,
    wire: Wire,
    conn: Weak<WireConn>,
    /// The drain time-out is armed.
    draining: AtomicBool,
}

impl Pipe {
    fn new(stream: Arc<dyn Stream>, wire: &Wire, conn: &Arc<WireConn>) -> Self {
        Self {
            stream,
            wire: wire.clone(),
            conn: Arc::downgrade(conn),
            draining: AtomicBool::new(false),
        }
    }

    /// Arms the drain time-out, once.
    fn drain(&self) {
        if self.draining.swap(true, Ordering::AcqRel) {
            return;
        }
        Drained::arm(&self.wire, Weak::clone(&self.conn), &self.stream);
    }
}

/// The drain time-out of a stream: it resets the stream if the stream
/// still lives then. It holds it weakly: a stream still draining is kept
/// alive by the platform (the host's reader and writer threads, the WSK
/// socket's own reference until its close completed), so a peer that
/// reads nothing cannot keep it past the reset; one whose close completed
/// both ways is released as soon as its owners let go, instead of its
/// buffers (256 KiB) staying for `disconnect_ms` after every close.
struct Drained {
    conn: Weak<WireConn>,
    stream: Weak<dyn Stream>,
}

impl Drained {
    /// Arms the drain time-out of `stream` on `wire`, `disconnect_ms` from
    /// now; `conn`'s Disconnect, if one still waits then, ends first.
    fn arm(wire: &Wire, conn: Weak<WireConn>, stream: &Arc<dyn Stream>) {
        let at = wire
            .net
            .now_ms()
            .saturating_add(wire.timeouts.disconnect_ms);
        let timer: Arc<dyn Timer> = Arc::new(Self {
            conn,
            stream: Arc::downgrade(stream),
        });
        wire.net.timer(at, timer);
    }
}

impl Timer for Drained {
    fn fire(&self, _now: u64) {
        if let Some(conn) = self.conn.upgrade() {
            // A Disconnect still waiting ends as its own time-out would end
            // it (N26), before the reset can look like the peer's answer.
            conn.disconnect_due();
        }
        if let Some(stream) = self.stream.upgrade() {
            stream.close(true);
        }
    }
}

impl ByteStream for Pipe {
    fn send(&self, bytes: &[u8]) -> usize {
        self.stream.send(bytes)
    }

    /// The link builds its FPDUs in the stream's own send buffer (a copy
    /// less, docs/performance.md "Wire"). The link records a request's
    /// completion before it lends the room for its last FPDU, so a peer's
    /// Terminate that follows those bytes never overtakes it (RFC 5040 §7).
    fn send_with(&self, len: usize, fill: &mut dyn FnMut(&mut [u8]) -> bool) -> Option<bool> {
        self.stream.send_with(len, fill)
    }

    fn close(&self, abortive: bool) {
        self.stream.close(abortive);
        if !abortive {
            self.drain();
        }
    }

    fn stalled(&self) {
        self.drain();
    }
}

fn endpoint_of(addr: SocketAddr) -> Endpoint {
    let ip = match addr.ip() {
        core::net::IpAddr::V4(v4) => IpAddr::V4(v4.octets()),
        core::net::IpAddr::V6(v6) => IpAddr::V6(v6.octets()),
    };
    Endpoint::new(ip, addr.port())
}

fn socket_of(endpoint: Endpoint) -> SocketAddr {
    let ip = match endpoint.ip {
        IpAddr::V4(octets) => core::net::IpAddr::from(octets),
        IpAddr::V6(octets) => core::net::IpAddr::from(octets),
    };
    SocketAddr::new(ip, endpoint.port)
}

fn ird_ord(value: u32) -> u16 {
    u16::try_from(value).unwrap_or(u16::MAX).min(MAX_IRD_ORD)
}

/// What a failed connect or setup means for the Connect (N12).
const fn connect_error(failure: &ConnFailure) -> CmError {
    match failure {
        // N16: rejected, or closed before answering (a full backlog, a
        // listener gone).
        ConnFailure::Rejected(_) | ConnFailure::Closed { .. } => CmError::ConnectionRefused,
        ConnFailure::TimedOut => CmError::TimedOut,
        ConnFailure::Setup(_) | ConnFailure::Link(_) | ConnFailure::Flooded => {
            CmError::ConnectionAborted
        }
    }
}

const fn net_error(error: NetError) -> CmError {
    match error {
        NetError::Refused | NetError::Failed => CmError::ConnectionRefused,
        NetError::TimedOut => CmError::TimedOut,
        NetError::Unreachable => CmError::HostUnreachable,
        NetError::AddressInUse => CmError::AddressInUse,
        NetError::AddressNotAvailable => CmError::InvalidAddress,
        NetError::Resources => CmError::Resources,
    }
}

/// What the active side needs once TCP is up.
struct Start {
    qp: Arc<Qp>,
    limits: ReadLimits,
    payload: Vec<u8>,
}

/// One connection over the wire, standing in for the remote peer.
pub(super) struct WireConn {
    fabric: Weak<Fabric>,
    wire: Wire,
    /// The connector (passive: from the request on).
    key: SpinLock<Option<Key>>,
    /// Passive: the listener that accepted the TCP connection.
    listener: Option<Key>,
    /// Active: what the MPA request is built from, until TCP is up.
    start: SpinLock<Option<Start>>,
    conn: SpinLock<Option<Arc<Conn>>>,
    stream: SpinLock<Option<Arc<dyn Stream>>>,
    /// The TCP endpoints (passive: known from the accept).
    endpoints: SpinLock<Option<(Endpoint, Endpoint)>>,
    /// Failed or given up: later events are ignored.
    over: AtomicBool,
    /// The link runs.
    linked: AtomicBool,
    /// Active, from port 0: a TCP source port the host has taken is
    /// replaced by another ephemeral ND port.
    any_port: AtomicBool,
    /// Ports tried so far.
    tries: AtomicU32,
}

/// Source ports a wire Connect from port 0 tries before giving up.
const CONNECT_PORT_TRIES: u32 = 16;

/// An operation on a wire connection, run after the fabric's lock.
pub(super) enum WireOp {
    /// TCP connect, then the MPA request.
    Connect {
        conn: Arc<WireConn>,
        local: Endpoint,
        remote: Endpoint,
    },
    /// The MPA reply (accept) with this QP.
    Accept {
        conn: Arc<WireConn>,
        qp: Arc<Qp>,
        limits: ReadLimits,
        payload: Vec<u8>,
    },
    /// The MPA reject.
    Reject {
        conn: Arc<WireConn>,
        payload: Vec<u8>,
    },
    /// The RTR, and the link starts.
    Complete(Arc<WireConn>),
    /// Give the attempt up: the stream closes (`abortive`: RST).
    Abandon(Arc<WireConn>, bool),
    /// This side's graceful disconnect: FIN, then wait for the peer's.
    Finish(Arc<WireConn>),
    /// The listening sockets of a closed listener go.
    Unlisten(Vec<Box<dyn Listening>>),
}

impl WireConn {
    fn new(fabric: &Arc<Fabric>, wire: &Wire, key: Option<Key>, listener: Option<Key>) -> Self {
        Self {
            fabric: Arc::downgrade(fabric),
            wire: wire.clone(),
            key: SpinLock::new(key),
            listener,
            start: SpinLock::new(None),
            conn: SpinLock::new(None),
            stream: SpinLock::new(None),
            endpoints: SpinLock::new(None),
            over: AtomicBool::new(false),
            linked: AtomicBool::new(false),
            any_port: AtomicBool::new(false),
            tries: AtomicU32::new(0),
        }
    }

    /// The Connect asked for any source port.
    pub(super) fn allow_other_port(&self) {
        self.any_port.store(true, Ordering::Release);
    }

    fn key(&self) -> Option<Key> {
        *self.key.lock()
    }

    fn conn(&self) -> Option<Arc<Conn>> {
        self.conn.lock().clone()
    }

    fn now(&self) -> u64 {
        self.wire.net.now_ms()
    }

    /// Arms the timer for the setup's next deadline. The consumer's
    /// decision on a request has none (N29: its deadline is
    /// `NO_DECISION_TIMEOUT_MS` away): no timer for it, or the platform
    /// would keep one that never fires, with its `Tick`, for ever (the
    /// Accept arms the next wait).
    fn arm(self: &Arc<Self>) {
        let due = self.conn().and_then(|conn| conn.deadline());
        if let Some(at) = due.filter(|&at| at - self.now().min(at) < NO_DECISION_TIMEOUT_MS / 2) {
            let timer: Arc<dyn Timer> = Arc::new(Tick {
                conn: Arc::downgrade(self),
                due: Due::Setup,
            });
            self.wire.net.timer(at, timer);
        }
    }

    /// Runs `f` on the fabric for this connection's connector.
    fn transition(self: &Arc<Self>, f: impl FnOnce(&mut State, Key, &mut Actions)) {
        let (Some(fabric), Some(key)) = (self.fabric.upgrade(), self.key()) else {
            return;
        };
        fabric.run(|state, _, actions| {
            // Only while the connector still belongs to this connection.
            let mine = state
                .connectors
                .get(key)
                .and_then(|rec| rec.wire.as_ref())
                .is_some_and(|wire| core::ptr::eq(Arc::as_ptr(wire), Arc::as_ptr(self)));
            if mine {
                f(state, key, actions);
            }
        });
    }

    /// The attempt ended before the link: tell the connector.
    fn attempt_failed(self: &Arc<Self>, error: CmError, data: Vec<u8>) {
        if self.over.swap(true, Ordering::AcqRel) {
            return;
        }
        self.transition(|state, key, actions| state.wire_failed(key, error, data, actions));
    }

    /// Runs `op` (no lock held).
    pub(super) fn execute(op: WireOp) {
        match op {
            WireOp::Connect {
                conn,
                local,
                remote,
            } => {
                let events: Arc<dyn ConnectEvents> = conn.sink();
                // N30: over iWARP the ND port is the TCP port.
                let dial = Dial {
                    local: socket_of(local),
                    remote: socket_of(remote),
                    timeout_ms: conn.wire.timeouts.connect_ms,
                };
                let started = conn.wire.net.connect(dial, events);
                if let Err(error) = started {
                    conn.attempt_failed(net_error(error), Vec::new());
                }
            }
            WireOp::Accept {
                conn,
                qp,
                limits,
                payload,
            } => {
                let Some(setup) = conn.conn() else { return };
                let now = conn.now();
                // IRD = what this side takes (inbound), ORD = what it issues.
                let result = setup.accept(
                    Some(&qp),
                    ird_ord(limits.inbound),
                    ird_ord(limits.outbound),
                    &payload,
                    now,
                );
                if result.is_err() {
                    setup.abandon(true);
                    conn.attempt_failed(CmError::ConnectionAborted, Vec::new());
                } else {
                    conn.arm();
                }
            }
            WireOp::Reject { conn, payload } => {
                conn.over.store(true, Ordering::Release);
                if let Some(setup) = conn.conn()
                    && setup.reject(&payload, conn.now()).is_err()
                {
                    setup.abandon(true);
                }
            }
            WireOp::Complete(conn) => {
                if let Some(setup) = conn.conn()
                    && setup.complete().is_err()
                {
                    setup.abandon(true);
                }
            }
            WireOp::Abandon(conn, abortive) => {
                conn.over.store(true, Ordering::Release);
                if let Some(setup) = conn.conn() {
                    setup.abandon(abortive);
                }
                if let Some(stream) = conn.stream.lock().clone() {
                    stream.close(abortive);
                }
            }
            WireOp::Finish(conn) => {
                // X1: the link sends the message in progress whole, then
                // FIN (closing the stream here cut the FPDU in flight).
                if let Some(link) = conn.conn().and_then(|setup| setup.link()) {
                    link.finish();
                } else if let Some(stream) = conn.stream.lock().clone() {
                    stream.close(false);
                }
                let at = conn.now().saturating_add(conn.wire.timeouts.disconnect_ms);
                let timer: Arc<dyn Timer> = Arc::new(Tick {
                    conn: Arc::downgrade(&conn),
                    due: Due::Disconnect,
                });
                conn.wire.net.timer(at, timer);
            }
            WireOp::Unlisten(listening) => drop(listening),
        }
    }
}

/// Which wait a [`Tick`] bounds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Due {
    /// A deadline of the MPA exchange (`Conn::deadline`).
    Setup,
    /// The peer's FIN after this side's Disconnect (N26).
    Disconnect,
}

/// A timer of one connection: a setup deadline or the disconnect's. The
/// platform's timers cannot be cancelled, so a setup deadline armed at
/// connect time still fires after the link is up; only the disconnect's own
/// timer may end a Disconnect's wait (issue 8: a stale setup timer failed a
/// Disconnect made about `rtr_ms` / `reply_ms` after the connect with
/// `IO_TIMEOUT` at once, and the reset aborted the peer's).
struct Tick {
    conn: Weak<WireConn>,
    due: Due,
}

impl Timer for Tick {
    fn fire(&self, now: u64) {
        let Some(conn) = self.conn.upgrade() else {
            return;
        };
        match self.due {
            Due::Setup => {
                if let Some(setup) = conn.conn() {
                    setup.tick(now);
                    conn.arm();
                }
            }
            Due::Disconnect => conn.disconnect_due(),
        }
    }
}

impl WireConn {
    /// The disconnect time-out passed: a Disconnect still waiting for the
    /// peer's FIN fails `IO_TIMEOUT` and the stream is reset (N26).
    fn disconnect_due(self: &Arc<Self>) {
        if self.linked.load(Ordering::Acquire) {
            let mut reset = false;
            self.transition(|state, key, actions| {
                reset = state.wire_disconnect_timed_out(key, actions);
            });
            if reset {
                Self::execute(WireOp::Abandon(Arc::clone(self), true));
            }
        }
    }
}

/// What the platform and the connection hold: a weak reference, so that
/// the connector's record alone keeps a wire connection alive.
struct Sink(Weak<WireConn>);

impl ConnectEvents for Sink {
    fn connected(&self, result: Result<Connected, NetError>) -> Option<Arc<dyn StreamEvents>> {
        if let Some(conn) = self.0.upgrade() {
            conn.on_connected(result)
        } else {
            if let Ok(connected) = result {
                connected.stream.close(true);
            }
            None
        }
    }
}

impl StreamEvents for Sink {
    fn received(&self, bytes: &[u8]) {
        if let Some(conn) = self.0.upgrade()
            && let Some(setup) = conn.conn()
        {
            setup.received(bytes, conn.now());
        }
    }

    fn writable(&self) {
        if let Some(setup) = self.0.upgrade().and_then(|conn| conn.conn()) {
            setup.writable();
        }
    }

    fn closed(&self, abortive: bool) {
        if let Some(conn) = self.0.upgrade() {
            conn.on_closed(abortive);
        }
    }
}

impl ConnEvents for Sink {
    fn request(&self, request: &PeerRequest) {
        if let Some(conn) = self.0.upgrade() {
            conn.on_request(request);
        }
    }

    fn replied(&self, established: &Established) {
        if let Some(conn) = self.0.upgrade() {
            let negotiated = established.negotiated;
            let data = fabric_copy(&established.private_data);
            conn.transition(|state, key, actions| {
                state.wire_replied(key, negotiated.ird, negotiated.ord, data, actions);
            });
        }
    }

    fn established(&self, _link: &Arc<Link>, _private_data: &[u8]) {
        if let Some(conn) = self.0.upgrade() {
            conn.linked.store(true, Ordering::Release);
            conn.transition(State::wire_established);
        }
    }

    fn failed(&self, failure: ConnFailure) {
        if let Some(conn) = self.0.upgrade() {
            conn.on_failed(&failure);
        }
    }
}

fn link_params(mss: u16) -> LinkParams {
    let mulpdu = u16::try_from(mpa::mulpdu(u32::from(mss))).unwrap_or(u16::MAX);
    LinkParams {
        mulpdu,
        max_rx_ulpdu: u16::MAX,
        default_ird_ord: (1, 1),
    }
}

impl WireConn {
    fn sink(self: &Arc<Self>) -> Arc<Sink> {
        Arc::new(Sink(Arc::downgrade(self)))
    }

    /// Active: TCP is up (or failed); the MPA request goes out.
    fn on_connected(
        self: &Arc<Self>,
        result: Result<Connected, NetError>,
    ) -> Option<Arc<dyn StreamEvents>> {
        let connected = match result {
            Ok(connected) => connected,
            Err(NetError::AddressInUse)
                if self.any_port.load(Ordering::Acquire)
                    && self.tries.fetch_add(1, Ordering::AcqRel) < CONNECT_PORT_TRIES =>
            {
                // N30: the ND port is the TCP source port; another program
                // holds this one, so the connector moves to the next.
                let mut moved = None;
                self.transition(|state, key, _| moved = state.wire_rebind(key));
                match moved {
                    Some((local, remote)) => Self::execute(WireOp::Connect {
                        conn: Arc::clone(self),
                        local,
                        remote,
                    }),
                    None => self.attempt_failed(CmError::AddressInUse, Vec::new()),
                }
                return None;
            }
            Err(error) => {
                self.attempt_failed(net_error(error), Vec::new());
                return None;
            }
        };
        let start = self.start.lock().take();
        let Some(start) = start.filter(|_| !self.over.load(Ordering::Acquire)) else {
            // The connector gave up while TCP was connecting.
            connected.stream.close(true);
            return None;
        };
        *self.stream.lock() = Some(Arc::clone(&connected.stream));
        let config = InitiatorConfig {
            crc: false,
            enhanced: true,
            ird: ird_ord(start.limits.inbound),
            ord: ird_ord(start.limits.outbound),
            // SoftNDK peers always ask for peer-to-peer mode (RFC 6581);
            // siw answers with the Write RTR (docs/siw.md).
            rtr: RtrKinds::WRITE | RtrKinds::READ,
            reply_timeout_ms: self.wire.timeouts.reply_ms,
            // N20: the effective outbound limit is min(own, peer's inbound).
            lower_ord: true,
        };
        let sink = self.sink();
        let events: Arc<dyn ConnEvents> = Arc::clone(&sink) as Arc<dyn ConnEvents>;
        let pipe: Arc<dyn ByteStream> = Arc::new(Pipe::new(connected.stream, &self.wire, self));
        let parts = ConnParts {
            stream: pipe,
            params: link_params(connected.mss),
            events,
            now: self.now(),
        };
        let started = Conn::initiate(
            &start.qp,
            parts,
            &config,
            &start.payload,
            Finish::AtComplete,
        );
        if let Ok(conn) = started {
            *self.conn.lock() = Some(conn);
            self.arm();
            Some(sink as Arc<dyn StreamEvents>)
        } else {
            self.attempt_failed(CmError::InvalidParameter, Vec::new());
            None
        }
    }

    fn on_closed(self: &Arc<Self>, abortive: bool) {
        let Some(setup) = self.conn() else { return };
        if !abortive && self.linked.load(Ordering::Acquire) {
            // X2, N24: the peer's FIN is its graceful disconnect. The link's
            // receive side simply ends; the QP is not flushed for it.
            let mut graceful = false;
            self.transition(|state, key, actions| {
                graceful = state.wire_peer_finished(key, actions);
            });
            if graceful {
                return;
            }
        }
        setup.closed(abortive);
    }

    /// Passive: the MPA request arrived; the listener's connect event.
    fn on_request(self: &Arc<Self>, request: &PeerRequest) {
        let (Some(fabric), Some(listener)) = (self.fabric.upgrade(), self.listener) else {
            return;
        };
        let Some((local, remote)) = *self.endpoints.lock() else {
            return;
        };
        let refused = fabric.run(|state, fabric, actions| {
            let refused = state
                .wire_incoming(fabric, listener, self, local, remote, request, actions)
                .is_err();
            // From now on the connector's record holds it, or nothing.
            if let Some(sink) = state
                .listeners
                .get(listener)
                .and_then(|l| l.accepted.clone())
            {
                sink.release(self);
            }
            refused
        });
        if refused {
            // N5, N6, N12: no listener taking requests, or a full backlog.
            self.over.store(true, Ordering::Release);
            if let Some(setup) = self.conn()
                && setup.reject(&[], self.now()).is_err()
            {
                setup.abandon(true);
            }
        }
    }

    fn on_failed(self: &Arc<Self>, failure: &ConnFailure) {
        if self.key().is_none() {
            // A passive connection before its request: nothing to tell.
            self.over.store(true, Ordering::Release);
            return;
        }
        if self.linked.load(Ordering::Acquire) {
            // The link could not start after CompleteConnect: an abort.
            self.transition(State::connection_lost);
            return;
        }
        let data = match failure {
            ConnFailure::Rejected(data) => fabric_copy(data),
            _ => Vec::new(),
        };
        self.attempt_failed(connect_error(failure), data);
    }
}

impl Drop for WireConn {
    fn drop(&mut self) {
        // Ends the platform's stream (an orderly close; nothing if it was
        // closed already), so that no thread waits on it for ever, and
        // resets it if it still lives after the drain time-out: a peer that
        // never closes its end must not keep it (an accepted connection
        // whose request had not come when its listener closed had only this
        // close, and kept its reader thread and socket for ever).
        if let Some(stream) = self.stream.lock().take() {
            stream.close(false);
            Drained::arm(&self.wire, Weak::new(), &stream);
        }
    }
}

fn fabric_copy(data: &[u8]) -> Vec<u8> {
    super::fabric::copy_data(data).unwrap_or_default()
}

/// Passive connections before their request have no connector yet: the
/// listener's sink keeps them until then.
pub(super) struct Accepted {
    fabric: Weak<Fabric>,
    wire: Wire,
    listener: Key,
    pending: SpinLock<Vec<Arc<WireConn>>>,
}

impl Accepted {
    /// `conn` leaves the pending list (its request arrived).
    fn release(&self, conn: &Arc<WireConn>) {
        self.pending.lock().retain(|c| !Arc::ptr_eq(c, conn));
    }
}

impl AcceptEvents for Accepted {
    fn bound(&self, local: SocketAddr, result: Result<(), NetError>) {
        // N3, L8: a listening socket bound late (WSK); `listener.rs`.
        if let Some(fabric) = self.fabric.upgrade() {
            super::listener::bound(
                &fabric,
                self.listener,
                endpoint_of(local),
                result.map_err(net_error),
            );
        }
    }

    fn accepted(&self, connection: Connected) -> Option<Arc<dyn StreamEvents>> {
        let fabric = self.fabric.upgrade()?;
        let conn = Arc::new(WireConn::new(
            &fabric,
            &self.wire,
            None,
            Some(self.listener),
        ));
        *conn.stream.lock() = Some(Arc::clone(&connection.stream));
        *conn.endpoints.lock() =
            Some((endpoint_of(connection.local), endpoint_of(connection.peer)));
        let config = ResponderConfig {
            crc: false,
            request_timeout_ms: self.wire.timeouts.request_ms,
            decision_timeout_ms: NO_DECISION_TIMEOUT_MS,
            rtr_timeout_ms: self.wire.timeouts.rtr_ms,
        };
        let sink = conn.sink();
        let events: Arc<dyn ConnEvents> = Arc::clone(&sink) as Arc<dyn ConnEvents>;
        let parts = ConnParts {
            stream: Arc::new(Pipe::new(connection.stream, &self.wire, &conn)),
            params: link_params(connection.mss),
            events,
            now: self.wire.net.now_ms(),
        };
        let setup = Conn::respond(None, parts, config);
        *conn.conn.lock() = Some(setup);
        {
            let mut pending = self.pending.lock();
            // Bounded like the backlog: more waiting connections are reset.
            pending.retain(|c| !c.over.load(Ordering::Acquire));
            if pending.len() >= BACKLOG || pending.try_reserve(1).is_err() {
                return None;
            }
            pending.push(Arc::clone(&conn));
        }
        conn.arm();
        Some(sink as Arc<dyn StreamEvents>)
    }
}

impl State {
    /// For a listener of a wire device: its wire and the addresses to
    /// listen on (a wildcard: each of the device's addresses of the family,
    /// N31). `None` for a device on this fabric.
    pub(super) fn wire_listen_plan(
        &self,
        key: Key,
        local: Endpoint,
    ) -> Result<Option<(Wire, Vec<IpAddr>)>, CmError> {
        let rec = self.listeners.get(key).ok_or(CmError::InvalidState)?;
        if rec.closing || rec.listening.is_some() {
            return Err(CmError::InvalidState);
        }
        let Some(wire) = self.wire_of(rec.node) else {
            return Ok(None);
        };
        let ip = self.local_ip(rec.node, local.ip, false, None)?;
        let mut addresses = Vec::new();
        if ip.is_unspecified() {
            for a in &self.addresses {
                if a.node == rec.node && a.ip.family() == ip.family() {
                    addresses.try_reserve(1).map_err(|_| CmError::Resources)?;
                    addresses.push(a.ip);
                }
            }
        } else {
            addresses.try_reserve(1).map_err(|_| CmError::Resources)?;
            addresses.push(ip);
        }
        if addresses.is_empty() {
            return Err(CmError::InvalidAddress);
        }
        Ok(Some((wire, addresses)))
    }

    /// The node's wire, if its device is on one.
    pub(super) fn wire_of(&self, node: usize) -> Option<Wire> {
        self.nodes
            .iter()
            .find(|n| n.key == node)
            .and_then(|n| n.wire.clone())
    }

    /// Connect over the wire (the `request` of a wire device): the
    /// connector waits for TCP and the MPA reply.
    pub(super) fn wire_request(
        &mut self,
        fabric: &Arc<Fabric>,
        wire: &Wire,
        mut request: Request<'_>,
        actions: &mut Actions,
    ) -> Result<(), CmError> {
        self.reserve_request(&request)?;
        let conn = Arc::new(WireConn::new(fabric, wire, Some(request.key), None));
        *conn.start.lock() = Some(Start {
            qp: Arc::clone(request.qp),
            limits: request.own,
            payload: core::mem::take(&mut request.payload),
        });
        self.start_request(&request, None, Some(Arc::clone(&conn)));
        actions.push(Action::Wire(WireOp::Connect {
            conn,
            local: request.local,
            remote: request.dst,
        }));
        Ok(())
    }

    /// A request arrived on a wire listener: the passive connector and its
    /// connect event (N4), or a refusal (N5, N6, N12).
    #[expect(clippy::too_many_arguments, reason = "the parts of a request")]
    fn wire_incoming(
        &mut self,
        fabric: &Arc<Fabric>,
        listener: Key,
        conn: &Arc<WireConn>,
        local: Endpoint,
        remote: Endpoint,
        request: &PeerRequest,
        actions: &mut Actions,
    ) -> Result<(), CmError> {
        let l = self
            .listeners
            .get(listener)
            .ok_or(CmError::ConnectionRefused)?;
        let l_binding = l.admit()?;
        let (node, l_limits, events) = (l.node, l.limits, Arc::clone(&l.events));
        self.reserve_tuple(l_binding)?;
        let data = super::fabric::copy_data(&request.private_data)?;
        let mut passive = ConnectorRec::passive(node, l_limits, listener, l_binding, local, remote);
        // The initiator's own limits, as it sent them; without the RFC 6581
        // block, the device's (so that this side's own apply, N20).
        passive.peer_limits = ReadLimits::new(
            request
                .ird
                .map_or(l_limits.max_inbound_read_limit, u32::from),
            request
                .ord
                .map_or(l_limits.max_outbound_read_limit, u32::from),
        );
        passive.peer_data = data;
        passive.wire = Some(Arc::clone(conn));
        let pkey = self.connectors.insert(passive)?;
        *conn.key.lock() = Some(pkey);
        let admitted = Admitted {
            events,
            listener,
            binding: l_binding,
            local,
            remote,
        };
        self.deliver_request(fabric, admitted, pkey, actions);
        Ok(())
    }

    /// The attempt of `key` failed on the wire (TCP, MPA, a reject, a
    /// time-out, the peer's close).
    fn wire_failed(&mut self, key: Key, error: CmError, data: Vec<u8>, actions: &mut Actions) {
        let Some(rec) = self.connectors.get_mut(key) else {
            return;
        };
        match rec.state {
            ConnState::Connecting => {
                self.fail_rejected(key, data, Callout::Connect(Err(error)), actions);
            }
            // N14, N15, N16: the peer gave up; CompleteConnect, Accept or
            // Reject find out.
            ConnState::Replied | ConnState::Requested => rec.wire_dead = true,
            ConnState::Accepting => {
                // N15: the active side gave up, or never completed.
                let error = if error == CmError::TimedOut {
                    CmError::TimedOut
                } else {
                    CmError::ConnectionAborted
                };
                self.fail(key);
                self.emit(actions, key, Callout::Accept(Err(error)));
            }
            _ => {}
        }
    }

    /// The MPA reply accepted the request: Connect completes (N13).
    fn wire_replied(
        &mut self,
        key: Key,
        ird: Option<u16>,
        ord: Option<u16>,
        data: Vec<u8>,
        actions: &mut Actions,
    ) {
        let Some(rec) = self.connectors.get_mut(key) else {
            return;
        };
        if rec.state != ConnState::Connecting {
            return;
        }
        let own = rec.own_limits.unwrap_or_default();
        // `ird`/`ord` are this side's effective limits; the peer's offer is
        // their mirror (inbound = our outbound), so `effective` gives them
        // back (N20).
        rec.peer_limits = ReadLimits::new(
            ord.map_or(own.outbound, u32::from),
            ird.map_or(own.inbound, u32::from),
        );
        rec.peer_data = data;
        rec.pending.connect = false;
        rec.set_state(key, ConnState::Replied);
        self.emit(actions, key, Callout::Connect(Ok(())));
    }

    /// The passive side's link runs (the RTR arrived): Accept completes
    /// (N15).
    fn wire_established(&mut self, key: Key, actions: &mut Actions) {
        let Some(rec) = self.connectors.get_mut(key) else {
            return;
        };
        if rec.state != ConnState::Accepting {
            return;
        }
        rec.establish(key);
        rec.pending.accept = false;
        if let Some(qp) = &rec.qp {
            count_established(qp, Role::Passive);
        }
        self.emit(actions, key, Callout::Accept(Ok(())));
    }

    /// Accept over the wire: the MPA reply goes out; Accept completes when
    /// the RTR arrives (N15).
    pub(super) fn wire_accept(
        &mut self,
        call: &mut Call<'_>,
        args: Accept<'_>,
    ) -> Result<(), CmError> {
        let (key, qp) = (call.key, args.qp);
        let rec = self.connectors.get(key).ok_or(CmError::ConnectionInvalid)?;
        let Some(conn) = rec.wire.clone() else {
            return Err(CmError::ConnectionInvalid);
        };
        if rec.wire_dead {
            // N15: the active side gave up.
            self.fail(key);
            return Err(CmError::ConnectionAborted);
        }
        if qp.state() != QpState::Idle {
            return Err(CmError::ConnectionInvalid);
        }
        self.start_accept(key, qp, args.limits)?;
        // Before the link can connect the QP (after the lock).
        LostHandler::watch(qp, call.fabric, key);
        call.actions.push(Action::Wire(WireOp::Accept {
            conn,
            qp: Arc::clone(qp),
            limits: args.limits,
            payload: args.payload,
        }));
        Ok(())
    }

    /// CompleteConnect over the wire: the RTR goes out and the link starts
    /// (N13, N14).
    pub(super) fn wire_complete(&mut self, call: &mut Call<'_>) -> Result<(), CmError> {
        let key = call.key;
        let rec = self.connectors.get(key).ok_or(CmError::ConnectionInvalid)?;
        let (Some(conn), Some(qp)) = (rec.wire.clone(), rec.qp.clone()) else {
            return Err(CmError::ConnectionInvalid);
        };
        if rec.wire_dead {
            // N14: the accepting peer gave up.
            self.fail(key);
            return Err(CmError::ConnectionAborted);
        }
        if qp.state() != QpState::Idle {
            // N14: the QP is no longer idle; the peer's Accept is aborted.
            self.fail(key);
            call.actions.push(Action::Wire(WireOp::Abandon(conn, true)));
            return Err(CmError::ConnectionInvalid);
        }
        LostHandler::watch(&qp, call.fabric, key);
        count_established(&qp, Role::Active);
        if let Some(rec) = self.connectors.get_mut(key) {
            rec.establish(key);
        }
        conn.linked.store(true, Ordering::Release);
        call.actions.push(Action::Wire(WireOp::Complete(conn)));
        Ok(())
    }

    /// Reject over the wire (N16): passive, the MPA reject; active after
    /// the reply, an RST (the peer's Accept is aborted).
    pub(super) fn wire_reject(
        &mut self,
        call: &mut Call<'_>,
        payload: Vec<u8>,
    ) -> Result<(), CmError> {
        let key = call.key;
        let rec = self.connectors.get(key).ok_or(CmError::ConnectionInvalid)?;
        let (state, dead) = (rec.state, rec.wire_dead);
        let Some(conn) = rec.wire.clone() else {
            return Err(CmError::ConnectionInvalid);
        };
        self.fail(key);
        if dead {
            // N16: the peer had already abandoned.
            return Err(CmError::ConnectionAborted);
        }
        if state == ConnState::Requested {
            call.actions
                .push(Action::Wire(WireOp::Reject { conn, payload }));
        } else {
            call.actions.push(Action::Wire(WireOp::Abandon(conn, true)));
        }
        Ok(())
    }

    /// The close of a wire connector before establishment: the attempt is
    /// given up towards the peer (L20, N16).
    pub(super) fn wire_close_attempt(&mut self, key: Key, actions: &mut Actions) {
        let Some(rec) = self.connectors.get(key) else {
            return;
        };
        let (state, dead) = (rec.state, rec.wire_dead);
        let Some(conn) = rec.wire.clone() else { return };
        self.fail(key);
        match state {
            ConnState::Connecting => {
                self.emit(actions, key, Callout::Connect(Err(CmError::Cancelled)));
                actions.push(Action::Wire(WireOp::Abandon(conn, true)));
            }
            ConnState::Accepting => {
                self.emit(actions, key, Callout::Accept(Err(CmError::Cancelled)));
                actions.push(Action::Wire(WireOp::Abandon(conn, true)));
            }
            // An unanswered request closed: as a reject (N16).
            ConnState::Requested if !dead => {
                actions.push(Action::Wire(WireOp::Reject {
                    conn,
                    payload: Vec::new(),
                }));
            }
            _ => actions.push(Action::Wire(WireOp::Abandon(conn, true))),
        }
    }

    /// This side leaves an established wire connection (X1, X2): a
    /// Disconnect sends FIN and waits for the peer's (unless the peer left
    /// first or the connection was aborted); a close tears down at once
    /// (the QP's disconnect closes the stream after its FPDUs).
    pub(super) fn wire_leave(&mut self, key: Key, by_close: bool, actions: &mut Actions) {
        let Some(rec) = self.connectors.get_mut(key) else {
            return;
        };
        rec.set_state(key, ConnState::Disconnecting);
        rec.indicated = true;
        let conn = rec.wire.clone();
        if !by_close
            && rec.ending == Ending::Open
            && let Some(conn) = conn
        {
            rec.waiting = true;
            actions.push(Action::Wire(WireOp::Finish(conn)));
        } else {
            self.teardown(key, actions);
        }
    }

    /// The peer's FIN on an established wire connection. Returns whether it
    /// was taken as the peer's graceful disconnect.
    fn wire_peer_finished(&mut self, key: Key, actions: &mut Actions) -> bool {
        let Some(rec) = self.connectors.get_mut(key) else {
            return false;
        };
        match rec.state {
            ConnState::Established => {
                if rec.ending == Ending::Open {
                    rec.ending = Ending::Graceful;
                }
                // X2, N24: indicated once, nothing flushed.
                if !core::mem::replace(&mut rec.indicated, true) {
                    self.emit(actions, key, Callout::Indicate);
                }
                true
            }
            ConnState::Disconnecting if rec.waiting => {
                // X1 a: the peer's answer.
                self.teardown(key, actions);
                true
            }
            _ => false,
        }
    }

    /// The disconnect time-out passed: if `key` still waits for the peer's
    /// FIN, the wait ends with `IO_TIMEOUT` (N26) and the stream is reset.
    fn wire_disconnect_timed_out(&mut self, key: Key, actions: &mut Actions) -> bool {
        let Some(rec) = self.connectors.get_mut(key) else {
            return false;
        };
        if rec.state != ConnState::Disconnecting || !rec.waiting {
            return false;
        }
        rec.timed_out = true;
        self.teardown(key, actions);
        true
    }
}

/// The sink of a wire listener's accepted TCP connections.
pub(super) fn accept_sink(fabric: &Arc<Fabric>, wire: &Wire, listener: Key) -> Arc<Accepted> {
    Arc::new(Accepted {
        fabric: Arc::downgrade(fabric),
        wire: wire.clone(),
        listener,
        pending: SpinLock::new(Vec::new()),
    })
}

/// The listening sockets of a wire listener at `port` on `addresses` (a
/// wildcard listener: one per address of the family the device owns, N31).
///
/// # Errors
/// The platform's, as [`CmError`]s ([`CmError::AddressInUse`] when the TCP
/// port is taken).
pub(super) fn listen_sockets(
    wire: &Wire,
    sink: &Arc<Accepted>,
    addresses: &[IpAddr],
    port: u16,
) -> Result<Vec<Box<dyn Listening>>, CmError> {
    let mut sockets: Vec<Box<dyn Listening>> = Vec::new();
    sockets
        .try_reserve_exact(addresses.len())
        .map_err(|_| CmError::Resources)?;
    for &ip in addresses {
        let events: Arc<dyn AcceptEvents> = Arc::clone(sink) as Arc<dyn AcceptEvents>;
        let socket = wire
            .net
            .listen(socket_of(Endpoint::new(ip, port)), events)
            .map_err(net_error)?;
        sockets.push(socket);
    }
    Ok(sockets)
}

/// A wire device (`node`) gained `ip` (`AddressSet::add`): each of its
/// wildcard listeners of that family listens on it too, at its port (N31),
/// as though the address had been there at Listen. Sockets are opened
/// outside the lock; a listener closed or gone meanwhile closes its new
/// socket at once. A port another program holds on the new address leaves
/// that listener without it (nothing to report it to). Not a device on a
/// wire: nothing to do (the fabric's wildcard listeners look addresses up at
/// each request). The platform's `listen` runs here, at the caller's IRQL:
/// the kernel's `Net` (`kernel::wsk::WskNet`) allows up to DISPATCH_LEVEL,
/// which the driver's address tracker needs (it adds addresses under its
/// spin lock). An address removed later keeps its socket
/// until the listener closes (as `AddressSet::remove` keeps bindings).
pub(super) fn follow_address(fabric: &Arc<Fabric>, node: usize, ip: IpAddr) {
    let (wire, plans) = {
        let state = fabric.state.lock();
        let Some(wire) = state.wire_of(node) else {
            return;
        };
        let mut plans = Vec::new();
        for (index, (generation, rec)) in state.listeners.slots.iter().enumerate() {
            let Some(rec) = rec else { continue };
            let Some((_, local)) = rec.listening else {
                continue;
            };
            let wildcard = local.ip.is_unspecified() && local.ip.family() == ip.family();
            if rec.node != node || rec.closing || !wildcard {
                continue;
            }
            let (Some(sink), Ok(index)) = (rec.accepted.clone(), u32::try_from(index)) else {
                continue;
            };
            if plans.try_reserve(1).is_err() {
                break;
            }
            let key = Key {
                index,
                generation: *generation,
            };
            plans.push((key, local.port, sink));
        }
        (wire, plans)
    };
    for (key, port, sink) in plans {
        let Ok(mut sockets) = listen_sockets(&wire, &sink, &[ip], port) else {
            continue;
        };
        let mut state = fabric.state.lock();
        if let Some(rec) = state.listeners.get_mut(key)
            && !rec.closing
            && rec.listening.is_some_and(|(_, local)| local.port == port)
            && rec.sockets.try_reserve(sockets.len()).is_ok()
        {
            rec.sockets.append(&mut sockets);
        }
        drop(state);
        // Left over when the listener went meanwhile: closed here, unlocked.
        drop(sockets);
    }
}

impl State {
    /// A connecting wire connector moves to another ephemeral port (its
    /// TCP source port was taken): returns its new local endpoint and the
    /// destination, or `None` when none is left or it no longer connects.
    fn wire_rebind(&mut self, key: Key) -> Option<(Endpoint, Endpoint)> {
        let rec = self.connectors.get(key)?;
        if rec.state != ConnState::Connecting {
            return None;
        }
        let (node, old, tuple) = (rec.node, rec.binding?, rec.tuple?);
        let (_, ip, dst) = tuple;
        let new = self.bind(node, ip, 0).ok()?;
        if self.reserve_tuple(new).is_err() {
            self.unbind(new);
            return None;
        }
        self.remove_tuple(Some(tuple));
        self.unbind(old);
        self.add_tuple(new, ip, dst);
        let local = Endpoint::new(ip, new.port);
        let rec = self.connectors.get_mut(key)?;
        rec.binding = Some(new);
        rec.tuple = Some((new, ip, dst));
        rec.local = Some(local);
        Some((local, dst))
    }

    /// Undoes a listener's `listen` whose TCP sockets could not be had.
    pub(super) fn unlisten(&mut self, key: Key) {
        let Some(rec) = self.listeners.get_mut(key) else {
            return;
        };
        rec.accepted = None;
        if let Some((r, _)) = rec.listening.take() {
            if let Some(b) = self.binding_mut(r) {
                b.listener = None;
            }
            self.unbind(r);
        }
    }
}
