//! The connection manager: addresses, endpoints, listeners and connectors on
//! the *fabric* that joins every emulated NIC of one driver instance (one
//! process in host mode).
//!
//! Plain Rust: no NDK types, no NTSTATUS. The provider turns [`CmError`]s
//! into statuses and the [`ConnectorEvents`] / [`ListenerEvents`] callbacks
//! into request completions and connect / disconnect events.
//!
//! # The fabric
//! A [`Fabric`] knows which device owns which IP addresses (an
//! [`AddressSet`] registers them, rule N1: IPv4 and IPv6 alike), which local
//! endpoints are bound (listeners, shared endpoints and the dedicated
//! endpoints of `Connect`), and every connector and listener. One spin lock
//! serializes every state change of the connection layer: connection
//! management is the control path, each transition is short and bounded, and
//! one lock makes the two sides of a connection change together (the
//! simultaneous-disconnect race X3 is then just two orders of one sequence).
//! The data path never takes it. Callbacks are collected under the lock and
//! made after it is released (rule I4); each record counts the callbacks in
//! flight for it, and a close completes only once they have returned (L21).
//!
//! # Endpoints and ports (N3, N7–N11, N30, N31)
//! A *binding* claims a local (address, port) on one device and is reference
//! counted: a listener holds one reference and each connector created for it
//! one more (N7); a shared endpoint holds one and each connector connected
//! through it one more (N10); a connector connected with `Connect` owns a
//! dedicated binding (N8). At zero the address and port are free again. A
//! wildcard address (0.0.0.0 or ::) binds the port on every address of its
//! family that the device owns, and never on another device (N31). Port 0
//! picks a free port of the ephemeral range 49152–65535
//! ([`CmError::TooManyAddresses`] when none is left). The ND port space is
//! the fabric's own (N30). Connections through one binding must differ in
//! their remote endpoint: the four-tuple is unique (N11).
//!
//! # Connection state machine
//! ```text
//!  active                                passive
//!  Idle ──connect──▶ Connecting ─────request──▶ Requested (connect event, N4)
//!                        │  ◀──refused (reject, close, N16)─┤
//!                        │                                  │ accept
//!                    Replied ◀──────── accepted ────── Accepting
//!   (Connect completed; GetConnectionData)                  │
//!     │ complete_connect: QPs connected (qp::connect)        │
//!  Established ◀────────────────────────────────────▶ Established
//!     │ disconnect ──graceful notice──▶ indication (X2, N24)  │
//!  Disconnecting (waits for the peer, X1a)                  │
//!     │ ◀──────────── its disconnect or close (X3) ─────────┤
//!     │ both QPs disconnected (X6, X7); DMA finished (X1b)   │
//!  Disconnected (no reuse, X5)                          Disconnected
//! ```
//! Any attempt that fails or is abandoned before `Established` leaves the
//! connector `Failed`; an active connector may then `connect` again with the
//! same or another idle QP, which the attempt left untouched (N28).
//!
//! # Disconnect (X1–X7)
//! `disconnect` sends the graceful notice to the peer: the peer's consumer
//! gets its disconnect indication (X2), unless it disconnected already, and
//! nothing else happens to the peer's QP — its outstanding work is not
//! flushed because of the indication (N24). The disconnect then waits for
//! the peer's answer, which is its consumer's own `disconnect` or the close
//! of its connector (X1 a); it does not wait when the peer answered first
//! (X3: of two simultaneous disconnects the second one answers the first)
//! or when the connection had been aborted. Once the exchange is over both
//! QPs leave the connection (`Qp::disconnect`): outstanding work completes
//! cancelled (X7, E3), later posts fail (X5), nothing flows either way (X6).
//! Each side's disconnect completes when the DMA of both QPs has finished
//! (X1 b, checked with [`Qp::is_quiescent`](super::qp::Qp::is_quiescent):
//! at once when possible, else by a deferred poll). The result is success, or
//! [`CmError::ConnectionAborted`] when the connection was aborted (an error
//! completion terminated it, E5, or a QP went away without a disconnect)
//! before or during the wait. The indication is given at most once per
//! connection and never after the side's own disconnect (N24, X2).
//!
//! Closing an established connector is a graceful disconnect towards the
//! peer (its indication, and its later `disconnect` succeeds), but a close
//! never waits for the peer's consumer: it tears the connection down at
//! once and completes when the DMA has finished. A close while the own
//! `disconnect` waits for the peer ends the wait: that disconnect completes
//! [`CmError::Cancelled`] (L20) before the close does.
//!
//! # Timeouts
//! There are none, and no timer. A `connect` waits for the passive
//! consumer's accept or reject and never times out (N29); the passive
//! side's close answers it (refused). An `accept` waits for the active
//! consumer's `complete_connect` or reject; the active side's close answers
//! it (aborted). A `disconnect` waits for the peer consumer's `disconnect`
//! or close, or for an abort. Every wait thus ends by an event of the
//! fabric at the latest when the peer closes its connector — which every
//! consumer does before it can close its adapter (L24, L27) — or when the
//! waiting side closes its own: peers cannot vanish silently, all of them
//! are on this fabric. Nothing waits on a peer consumer for ever unless that
//! consumer never closes (its bug, costing that one connection), and no
//! provider call ever blocks; `STATUS_IO_TIMEOUT` is never produced.

mod address;
mod address_set;
mod binding;
mod connection;
mod connector;
mod fabric;
mod listener;
mod shared;
mod slab;
mod state;
mod types;
mod wire;

pub use address::{Endpoint, Family, IpAddr};
pub use address_set::AddressSet;
pub use connector::Connector;
pub use fabric::{Fabric, wire_limits};
pub use listener::Listener;
pub use shared::SharedEndpoint;
pub use types::{
    CloseState, CmError, ConnState, ConnectionData, ConnectionInfo, ConnectorEvents, Listen,
    ListenerEvents, LocalEndpointInfo, ReadLimits,
};
pub use wire::{ConnTimeouts, MAX_WIRE_PRIVATE_DATA, Wire};

/// First port of the ephemeral range (N3, N9).
pub const EPHEMERAL_FIRST: u16 = 49152;
/// Last port of the ephemeral range (N3, N9).
pub const EPHEMERAL_LAST: u16 = 65535;
/// Connection requests a listener holds unanswered at most; more are refused
/// (N12: "backlog full"). It also bounds the connect events queued on the
/// listener's callback serializer.
pub const BACKLOG: usize = 32;

#[cfg(test)]
#[cfg(not(loom))]
mod tests;

#[cfg(all(test, loom))]
mod loom_tests;

#[cfg(test)]
mod recorder;
