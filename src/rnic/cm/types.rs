//! The public vocabulary of connection management besides addresses: read
//! limits (N20), the connection and endpoint reports (A19, A20), connection
//! data (N18–N20), errors, connection and close states, and the callback
//! traits of connectors and listeners (I4, L21).

use core::fmt;

use super::address::Endpoint;
use super::connector::Connector;
use crate::rnic::types::Limits;

/// Read limits (N20): RDMA Reads in flight, inbound (served for the peer)
/// and outbound (issued by this side).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ReadLimits {
    /// Inbound (IRD).
    pub inbound: u32,
    /// Outbound (ORD).
    pub outbound: u32,
}

impl ReadLimits {
    /// `inbound`, `outbound`.
    pub const fn new(inbound: u32, outbound: u32) -> Self {
        Self { inbound, outbound }
    }

    /// Lowered to what a device supports (N20).
    pub(super) fn clamp(self, limits: &Limits) -> Self {
        Self {
            inbound: self.inbound.min(limits.max_inbound_read_limit),
            outbound: self.outbound.min(limits.max_outbound_read_limit),
        }
    }

    /// The effective limits against the peer's offer (N20): inbound =
    /// min(own inbound, peer's outbound), outbound = min(own outbound, peer's
    /// inbound).
    pub(super) fn effective(self, peer: Self) -> Self {
        Self {
            inbound: self.inbound.min(peer.outbound),
            outbound: self.outbound.min(peer.inbound),
        }
    }

    pub(super) const fn pair(self) -> (u32, u32) {
        (self.inbound, self.outbound)
    }
}

/// An established connection, as `OID_NDK_CONNECTIONS` reports it (A19).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionInfo {
    /// This side's endpoint.
    pub local: Endpoint,
    /// The peer's endpoint.
    pub remote: Endpoint,
}

/// A listener's or shared endpoint's address, as `OID_NDK_LOCAL_ENDPOINTS`
/// reports it (A20).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalEndpointInfo {
    /// The address (a wildcard for a wildcard listener) and port.
    pub local: Endpoint,
    /// A listener (else a shared endpoint).
    pub listener: bool,
}

/// What `connection_data` reports (N18–N20).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionData {
    /// The effective read limits (N20).
    pub limits: ReadLimits,
    /// The size of the peer's private data (RDS, N18).
    pub length: usize,
    /// Bytes copied into the caller's buffer: min(buffer, RDS).
    pub copied: usize,
}

/// Why a connection-management call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmError {
    /// The local address is not one the device owns, or a destination is a
    /// wildcard address or port 0 (N3, N9, N12).
    InvalidAddress,
    /// The local address and port are in use (N3, N7, N9, N10, N12).
    AddressInUse,
    /// Port 0 asked for and no ephemeral port is left (N3, N9).
    TooManyAddresses,
    /// A connection with the same four-tuple exists (N11).
    AddressAlreadyExists,
    /// No listener, a paused or closing one, a full backlog, or the peer
    /// rejected the request (N5, N6, N12, N16).
    ConnectionRefused,
    /// The peer abandoned the connection (N14–N16), or the connection was
    /// aborted before this side disconnected (X1).
    ConnectionAborted,
    /// The connector or its QP is not in a state where the call is valid; a
    /// QP not idle or already tied to another connector (N14, X5).
    ConnectionInvalid,
    /// The listener is not in a state where the call is valid (a second
    /// `listen`).
    InvalidState,
    /// The request was cancelled by the local close (L20).
    Cancelled,
    /// A wait on a peer over the wire passed its time-out (N12, N14, N15,
    /// N26).
    TimedOut,
    /// No device of the fabric owns the destination address (N12).
    HostUnreachable,
    /// The source and destination are of different families (N12).
    NetworkUnreachable,
    /// Private data above `max_caller_data` / `max_callee_data` (N17).
    PrivateDataTooLong,
    /// Objects of different devices or fabrics, or a detached address set.
    InvalidParameter,
    /// Memory ran out.
    Resources,
}

impl fmt::Display for CmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// The state of a connector (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnState {
    /// Created, not connecting.
    Idle,
    /// Active: the request is at the passive side (no timeout, N29).
    Connecting,
    /// Active: the peer accepted and `connect` completed; waiting for
    /// `complete_connect` or `reject` (N13).
    Replied,
    /// Passive: delivered by the connect event; waiting for `accept` or
    /// `reject` (N4, N15).
    Requested,
    /// Passive: `accept` issued; waiting for the active side (N15).
    Accepting,
    /// Both QPs connected.
    Established,
    /// This side disconnected (or closed); waiting for DMA to finish (X1).
    Disconnecting,
    /// The connection is over; connector and QP cannot be reused (X5, X6).
    Disconnected,
    /// The attempt failed or was abandoned before establishment.
    Failed,
}

impl fmt::Display for ConnState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Idle => "IDLE",
            Self::Connecting => "CONNECTING",
            Self::Replied => "REPLIED",
            Self::Requested => "REQUESTED",
            Self::Accepting => "ACCEPTING",
            Self::Established => "ESTABLISHED",
            Self::Disconnecting => "DISCONNECTING",
            Self::Disconnected => "DISCONNECTED",
            Self::Failed => "FAILED",
        })
    }
}

/// Whether a close finished at once or completes later with a `closed`
/// callback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseState {
    /// Closed; no callback follows.
    Done,
    /// Work or callbacks are still in flight; `closed` follows once they
    /// have finished (it may already have run when `close` returns).
    Pending,
}

/// What a connector tells its owner. Called with no lock held, possibly
/// from inside the call that caused it; each request's outcome exactly once.
pub trait ConnectorEvents: Send + Sync {
    /// The outcome of `connect`: `Ok` once the peer accepted (N13), else
    /// [`CmError::ConnectionRefused`] (rejected, N16),
    /// [`CmError::Cancelled`] (closed meanwhile).
    fn connect_completed(&self, result: Result<(), CmError>);
    /// The outcome of `accept`: `Ok` once the active side completed the
    /// connection, else [`CmError::ConnectionAborted`] (it gave up, N15),
    /// [`CmError::ConnectionInvalid`] (the QP was no longer idle),
    /// [`CmError::Cancelled`] (closed meanwhile).
    fn accept_completed(&self, result: Result<(), CmError>);
    /// The outcome of `disconnect` (X1).
    fn disconnect_completed(&self, result: Result<(), CmError>);
    /// The disconnect indication (X2, N24): the peer disconnected or closed,
    /// or the connection was aborted. At most once, never after this side's
    /// own `disconnect` or close.
    fn disconnected(&self);
    /// A close that returned [`CloseState::Pending`] has finished: the last
    /// callback of the connector.
    fn closed(&self);
}

/// What a listener tells its owner. Called with no lock held.
pub trait ListenerEvents: Send + Sync {
    /// A connection request arrived (N4): `request` is the new passive
    /// connector, in [`ConnState::Requested`]. Dropping it (or closing it)
    /// without an answer refuses the request.
    fn incoming(&self, request: Connector);
    /// The outcome of a `start_listen` that answered [`Listen::Binding`]
    /// (N3, L8): `Ok` once every listening socket is bound, else
    /// [`CmError::AddressInUse`] (another program holds the TCP port) or
    /// another of N3's errors, or [`CmError::Cancelled`] when the listener
    /// was closed first (L20; its close completes after this returns, L21).
    /// Exactly once per such `start_listen`, possibly before it returned.
    fn listen_completed(&self, result: Result<(), CmError>);
    /// A close that returned [`CloseState::Pending`] has finished: no
    /// `incoming` call is running or will follow.
    fn closed(&self);
}

/// What `Listener::start_listen` started (N3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listen {
    /// Listening on the endpoint now: done.
    Bound(Endpoint),
    /// The endpoint is the listener's, but the platform is still binding
    /// its TCP sockets (WSK binds asynchronously): the outcome comes through
    /// [`ListenerEvents::listen_completed`]. Requests that arrive meanwhile
    /// reach the listener once its sockets listen.
    Binding(Endpoint),
}

impl Listen {
    /// The endpoint listened on.
    #[must_use]
    pub const fn endpoint(self) -> Endpoint {
        match self {
            Self::Bound(endpoint) | Self::Binding(endpoint) => endpoint,
        }
    }
}
